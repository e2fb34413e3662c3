"""Simulator engine behaviour: determinism, epochs and the controller hooks,
the histogram's precision, timelines, popularity dynamics, ABI checks."""

from __future__ import annotations

import numpy as np
import pytest

from netkv.config.compose import ConfigError, load
from netkv.native import NativeBuildMissing, library_path

try:
    library_path()
except NativeBuildMissing as exc:  # pragma: no cover - depends on the build
    pytest.skip(f"libnetkv not built: {exc}", allow_module_level=True)

from netkv.sim import native
from netkv.sim.engine import SimEngine, SimError, Workload
from netkv.targets.base import PointResult
from netkv.targets.sim import SimTarget

BASE = ["servers=16", "keys=100000", "alpha=1.1", "duration=0.2", "write_ratio=0.1"]


def as_tuple(r: PointResult) -> tuple:
    return (
        r.issued, r.completed, r.dropped, r.timeouts, tuple(sorted(r.latency_ns.items())),
        r.server_requests.tobytes(), r.hist_lower_ns.tobytes(), r.hist_counts.tobytes(),
        tuple((k, v.tobytes()) for k, v in sorted(r.timeline.items())),
    )


def test_same_seed_bit_identical() -> None:
    cfg = load([*BASE, "target.faults.loss=0.001", "target.faults.reorder=0.01"])
    with SimTarget(cfg) as a, SimTarget(cfg) as b:
        ra1, ra2 = a.run_point(1e6, 5), a.run_point(1e6, 5)
        rb = b.run_point(1e6, 5)
        other = a.run_point(1e6, 6)
    assert as_tuple(ra1) == as_tuple(ra2) == as_tuple(rb)
    assert as_tuple(other) != as_tuple(ra1)


class CountingController:
    """A controller that only reads the hash pipeline's counters each epoch."""

    def __init__(self, engine: SimEngine) -> None:
        self.seen: list[tuple[float, int]] = []

    def epoch(self, engine: SimEngine, t_s: float) -> None:
        total = sum(engine.reg_read("port_pkts", p) for p in range(16))
        self.seen.append((t_s, total))


def test_epochs_do_not_change_results() -> None:
    cfg = load(BASE)
    with SimTarget(cfg) as plain:
        r0 = plain.run_point(8e5, 2)
    with SimTarget(cfg) as t, SimEngine(cfg, t.workload, 8e5, 2) as eng:
        ctl = CountingController(eng)
        st = eng.run(ctl, epoch_s=0.01)
        assert [round(s, 6) for s, _ in ctl.seen] == [round(0.01 * k, 6) for k in range(1, len(ctl.seen) + 1)]
        counts = [c for _, c in ctl.seen]
        assert counts == sorted(counts) and counts[-1] > 0
        assert st.completed == r0.completed
        assert st.p99_ns == r0.latency_ns["p99"]
        assert (eng.server_counts() == r0.server_requests).all()
        # port counters count requests to servers: all requests were forwarded
        assert sum(eng.reg_read("port_pkts", p) for p in range(16)) == st.issued


def test_register_and_table_errors() -> None:
    cfg = load(BASE)
    with SimTarget(cfg) as t, SimEngine(cfg, t.workload, 1e5, 1) as eng:
        with pytest.raises(KeyError):
            eng.reg_read("no_such_register", 0)
        with pytest.raises(KeyError):
            eng.table_add("no_such_table", [1], [2])
        eng.reg_write("port_pkts", 3, 42)
        assert eng.reg_read("port_pkts", 3) == 42


def test_controller_packet_channel_and_node_fwd() -> None:
    cfg = load(BASE)
    with SimTarget(cfg) as t, SimEngine(cfg, t.workload, 1e3, 1) as eng:
        eng.run_until(0.001)
        m = eng.new_msg()
        m.proto, m.op, m.kind = 0, 0, 0  # plain READ
        m.keyhash, m.req_id, m.key_len = 1234, 77, 8
        eng.cpu_send(m, dst=5)
        eng.run_until(0.002)
        got = eng.cpu_recv()
        assert len(got) == 1
        src, reply = got[0]
        assert src == 5 and reply.req_id == 77 and reply.kind == 2 and reply.server_id == 5
        # steer server 5's traffic to the CPU port through the node_fwd table
        eng.table_add("node_fwd", [5], [eng.cpu_port])
        eng.run_until(0.2)
        assert eng.stats().cpu_packets > 1


def test_histogram_is_log_linear_within_one_percent() -> None:
    with SimTarget(load(BASE)) as t:
        r = t.run_point(1e6, 1)
    lower = r.hist_lower_ns
    width = np.diff(lower)
    big = lower[:-1] >= 256
    assert (width[big] / lower[:-1][big] <= 1 / 128 + 1e-12).all()
    # the reported quantiles are the buckets' nearest-rank midpoints
    cum = np.cumsum(r.hist_counts)
    for key, q in (("p50", 0.5), ("p99", 0.99)):
        i = int(np.searchsorted(cum, np.ceil(q * cum[-1])))
        lo, hi = lower[i], lower[i] + max(1.0, (lower[i] / 128))
        assert lo <= r.latency_ns[key] <= hi
        assert abs(r.latency_ns[key] - lo) / lo <= 0.01


def test_timeline_windows_add_up() -> None:
    with SimTarget(load([*BASE, "topology.timeline_ms=20"])) as t:
        r = t.run_point(5e5, 1)
    tl = r.timeline
    assert tl["completed"].sum() == r.completed
    assert tl["issued"].sum() == r.issued
    assert len(tl["t_s"]) == 13  # (0.2 s + 50 ms drain) / 20 ms
    assert (tl["p99_ns"][:10] > 0).all()


def test_hot_in_dynamics_moves_the_load() -> None:
    cfg = load(["servers=16", "keys=100000", "alpha=1.2", "duration=0.4",
                "workload.dynamics.kind=hot-in", "workload.dynamics.period_s=0.1",
                "workload.dynamics.count=100", "topology.timeline_ms=100"])
    with SimTarget(cfg) as t, SimEngine(cfg, t.workload, 5e5, 1) as eng:
        before = eng.rank_keys()
        st = eng.run()
        after = eng.rank_keys()
    assert st.dyn_changes == 3
    # three hot-in shifts of 100: the 300 coldest keys are now the hottest
    assert (after[:300] == before[-300:]).all()
    assert (after[300:] == before[:-300]).all()


def test_value_mix_and_writes() -> None:
    cfg = load([*BASE, "topology.server.per_byte_ns=2",
                "workload.value_size=[{size: 64, weight: 12}, {size: 1024, weight: 88}]"])
    w = Workload.from_config(cfg)
    small = (w.rank_info()["value_len"] == 64).mean()
    assert small == pytest.approx(0.12, abs=0.01)
    with SimTarget(cfg) as t:
        r = t.run_point(2e5, 1)
    assert r.completion == 1.0
    assert t.capacity_hint_rps() == pytest.approx(16e9 / (5000 + 2 * (0.12 * 64 + 0.88 * 1024)))


def test_ycsb_and_trace_workloads(tmp_path) -> None:
    with SimTarget(load([*BASE, "workload=ycsb", "alpha=0.99"])) as t:
        r = t.run_point(2e5, 1)
    assert r.completion == 1.0
    trace = tmp_path / "trace.txt"
    trace.write_text("# op key\nR 5\nW 7\nr 5\n9\n")
    with SimTarget(load([*BASE, "workload.kind=trace", f"workload.trace={trace}"])) as t:
        r = t.run_point(1e5, 1)
        homes = t.workload.rank_info()["home"]
    assert r.completion == 1.0
    served = set(np.flatnonzero(r.server_requests))
    assert served <= {int(homes[5]), int(homes[7]), int(homes[9])}


def test_bad_config_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="ycsb"):  # refused by the schema
        load([*BASE, "workload=ycsb", "alpha=1.2"])
    with pytest.raises(ConfigError, match="workload.multiget.mean = 4 .*no multiget"):
        load([*BASE, "workload.multiget.mean=4"])


def test_abi_declarations_match_the_library() -> None:
    ffi, lib = native.load()  # raises AbiMismatch otherwise
    for name in native.CHECKED_STRUCTS:
        assert lib.nk_sim_abi_sizeof(name.encode()) == ffi.sizeof(f"struct {name}")
