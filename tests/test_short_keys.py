"""Keys shorter than 8 B (workload.h, docs/simulator.md): 4 B keys are as
many distinct keys as `keys` asks for (4 hex digits would be only 65,536),
and the hash-mod-N placement (`ring: hash_mod`) spreads them over every
server, where the djb2 of a 4 B key varies only in its low bits and the
other rings put every such key on one server. C and the numpy mirror agree
byte for byte; NetMC runs its multigets over 4 B keys on the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from netkv.native import NativeBuildMissing, library_path

try:
    library_path()
except NativeBuildMissing as exc:  # pragma: no cover - depends on the build
    pytest.skip(f"libnetkv not built: {exc}", allow_module_level=True)

from netkv.config.compose import load
from netkv.protocols import netmc as mc
from netkv.sim.analysis import djb2_np, key_bytes_np, placement_np
from netkv.sim.engine import SimEngine, Workload
from netkv.sim.native import load as native_load
from netkv.targets.sim import SimTarget

N = 200_000


def c_key(i: int, size: int) -> bytes:
    ffi, lib = native_load()
    buf = ffi.new("uint8_t[]", 64)
    lib.nk_key_bytes(i, size, buf)
    return bytes(ffi.buffer(buf, size))


@pytest.mark.parametrize("size", [1, 3, 4, 7, 8, 20])
def test_c_key_bytes_equal_the_numpy_mirror(size: int) -> None:
    ids = np.array([0, 1, 2, 255, 65_536, 999_999, 2**32 - 1], dtype=np.uint64)
    mirror = key_bytes_np(ids, size)
    for row, i in zip(mirror, ids):
        assert c_key(int(i), size) == bytes(row), (i, size)


def test_4_byte_keys_are_all_distinct() -> None:
    keys = key_bytes_np(np.arange(N, dtype=np.uint64), 4)
    assert len(np.unique(keys, axis=0)) == N
    # their djb2 spans only ~9.4 M values, so some keys share a keyhash:
    # the stores tell keys apart by their bytes (engine.c key_fp, kvserver)
    assert np.ptp(djb2_np(keys).astype(np.int64)) < 10_000_000


@pytest.mark.parametrize("size", [4, 8])
def test_hash_mod_spreads_short_keys_over_every_server(size: int) -> None:
    servers = 5
    w = Workload(kind="uniform", keys=N, alpha=0.0, seed=3, servers=servers,
                 key_size=size, ring="hash_mod")
    info = w.rank_info()
    homes_c = np.empty(N, dtype=np.uint16)
    homes_c[info["key"]] = info["home"]
    w.close()
    np.testing.assert_array_equal(homes_c, placement_np(N, size, servers, 16, "hash_mod"))
    counts = np.bincount(homes_c, minlength=servers)
    assert counts.max() / counts.mean() < 1.02, counts
    if size == 4:
        # why the finaliser: on the ranges of the raw djb2 the 4 B keys fall
        # on one or two of the 80 ranges, so on at most 2 of the 5 servers
        ranges = placement_np(N, 4, servers, 16, "equal_ranges")
        assert len(np.unique(ranges)) <= 2


def test_netmc_multigets_of_4_byte_keys_reach_every_server() -> None:
    cfg = load(["protocol=netmc", "servers=5", "keys=100000", "duration=0.05", "seed=2",
                "workload.key_size=4", "workload.value_size=256", "slo.reference=netmc",
                "protocol.ring=hash_mod", "workload.multiget.mean=8.6", "write_ratio=0.05"])
    with SimTarget(cfg) as t, SimEngine(cfg, t.workload, 20_000, 1,
                                        mc.pipeline_params(cfg)) as eng:
        st = eng.run(mc.sim_controller_factory(cfg)(eng), cfg.protocol.epoch_ms / 1e3)
        served = eng.server_counts()
    assert st.completed == st.issued > 500
    assert st.client_packets == st.issued          # one packet per multiget
    assert st.recirculated > 2 * st.issued         # ~3.8 groups a multiget: keys spread
    assert served.min() > 0.8 * served.mean()
