"""Hostile clients on Mininet (topology.hostile_clients, docs/security.md).

The same scenario as tests/test_hostile_sim.py on real packets: the last
client runs ``kvclient --mode hostile`` (the protocol's client_hostile, the C
function the simulator's hostile clients call) beside honest kvclients
recording histories, through netkv-switch to real kvservers. For hash,
Pegasus, NetCache, KVSwitch, StarCache, NetLR and NetMC (and CoordiMC; their multigets
in a second point, as kvclient records single-key histories only):

- every acknowledged write survives: after the point, every key an honest
  client wrote is read back from an honest client's namespace through the
  switch (a READ of the protocol's wire), and the value that comes back is
  one somebody wrote (an honest write or a hostile one), not the preloaded
  value, and not an acknowledged write that finished before another
  acknowledged write of the key began (values are unique per write);
- the honest history of Pegasus, KVSwitch and NetLR (strict mode), the hostile
  writes in it as writes of unknown outcome, is linearizable by both
  checkers;
- StarCache's honest clients (not claimed linearizable) keep the session
  property of netkv.lincheck.session, by value ids (its wire carries no
  versions): no client reads a value older than its own acknowledged write;
- the switch's refusal counters are non-zero, and the point counts the
  hostile messages sent.

``test_the_read_back_check_fails_on_lost_writes`` shows the read-back check
failing on doctored read-backs.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

try:
    from readback import INITIAL, Write, lost_write
    from test_mininet_hash import REASON
    from test_mininet_netmc import mget_equals_gets
except ImportError:
    from tests.readback import INITIAL, Write, lost_write
    from tests.test_mininet_hash import REASON
    from tests.test_mininet_netmc import mget_equals_gets

pytestmark = pytest.mark.mininet
skip = pytest.mark.skipif(REASON is not None, reason=REASON or "")
ROOT = Path(__file__).resolve().parent.parent

BASE = ["target=mininet", "servers=2", "clients=3", "topology.hostile_clients=1", "keys=200",
        "alpha=1.2", "write_ratio=0.3", "record_history=true", "duration=0.5",
        "topology.hostile_rps=2000", "topology.drain_ms=500"]
# NetMC: multigets (mean 4 keys on [1, 16]) beside the single-key writes, 8 B
# keys (4 B keys all hash to one server, docs/netmc.md)
EXTRA = {"hash": [], "pegasus": ["protocol.replicated_keys=4"], "netcache": [], "kvswitch": [],
         "starcache": ["protocol.cache_size=16"],
         # strict mode, superseded writes answered (flagged), no retries (a
         # resent NetLR write is a second write: docs/netlr.md)
         "netlr": ["protocol.ack_superseded=true", "topology.timeout_us=100000",
                   "topology.retries=0"],
         "netmc": ["workload.multiget.mean=4", "workload.multiget.max_keys=16",
                   "workload.key_size=8", "slo.reference=netmc"]}

# Runs in an honest client's namespace: python - <json {port, proto, op, reads}>;
# reads: [[key id, key hex, keyhash, home node, dst ip]]. Prints one JSON
# object: key id -> the 8-byte value id read (0: the preloaded value), or
# null when no reply came after five tries.
READER = r'''
import json, socket, sys
from netkv.wire.codec import Msg, Proto, decode, encode, starcache_hkey
spec = json.loads(sys.argv[1])
proto = Proto(spec["proto"])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", spec["port"]))
s.settimeout(0.2)
out = {}
for i, (key, khex, keyhash, home, dst) in enumerate(spec["reads"]):
    rid = 0x7000_0000 + i
    kb = bytes.fromhex(khex)
    m = Msg(proto=proto, op=spec["op"], server_id=home, client_id=spec["client"], req_id=rid,
            keyhash=keyhash, key=kb, key_slot_len=len(kb),
            hkey=starcache_hkey(kb) if spec["hkey"] else 0)
    got = None
    for _ in range(5):
        s.sendto(encode(m), (dst, spec["port"]))
        try:
            while got is None:
                r = decode(proto, s.recv(65536))
                if r.req_id == rid:
                    got = int.from_bytes(r.value[:8], "big") if len(r.value) >= 8 else 0
        except socket.timeout:
            continue
        break
    out[str(key)] = got
print(json.dumps(out))
'''


def _read_back(target: Any, cfg: Any, keys: list[int], tmp_path: Path) -> dict[int, int | None]:
    from netkv.mininet.rack import node_ip
    from netkv.protocols import lookup
    from netkv.sim import native
    from netkv.sim.engine import Workload
    from netkv.protocols import PROTOCOLS
    from netkv.wire.codec import KINDS, Kind, Proto

    plugin = lookup(cfg.protocol.name)
    wire_key = getattr(importlib.import_module(PROTOCOLS[plugin.name]), "wire_key", None)
    ffi, lib = native.load()
    with Workload.from_config(cfg) as wl:
        info = {int(r["key"]): r for r in wl.rank_info()}
    reads = []
    for key in keys:
        kb = ffi.new("uint8_t[64]")
        lib.nk_key_bytes(key, cfg.workload.key_size, kb)
        home = int(info[key]["home"])
        kbytes = bytes(ffi.buffer(kb, cfg.workload.key_size))
        if wire_key is not None:  # e.g. NetCache carries a key's first 16 bytes
            kbytes = wire_key(kbytes)
        reads.append([key, kbytes.hex(),
                      int(info[key]["keyhash"]), home, node_ip(home)])
    read = next(op for op, kind in KINDS[plugin.wire].items() if kind == Kind.READ)
    spec = {"port": plugin.udp_port, "proto": int(plugin.wire), "op": int(read),
            "client": 0, "reads": reads,
            # StarCache: a cached key's read parks and its cache packet answers
            "hkey": plugin.wire == Proto.STARCACHE}
    script = tmp_path / "reader.py"
    script.write_text(READER)
    p = target.rack.clients[0].popen([sys.executable, str(script), json.dumps(spec)],
                                     env={"PYTHONPATH": str(ROOT)})
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err.decode()[-2000:]
    return {int(k): v for k, v in json.loads(out.decode().strip().splitlines()[-1]).items()}


def _lost_writes(rows: list[dict[str, Any]], back: dict[int, int | None]) -> list[str]:
    """Keys whose read-back is not what the acknowledged writes allow
    (tests/readback.py), from kvclient's rows and the value ids read back."""
    lost = []
    for key, vid in back.items():
        mine = [r for r in rows if r["key"] == key and r["op"] == "w"]
        acked = [r["invoke_ns"] for r in mine if r["status"] == "ok"]
        read: Write | str | None = None
        if vid == 0:
            read = INITIAL
        elif vid is not None:
            writer = [r for r in mine if r["value"] == vid]
            read = (Write(f"write {vid:#x}", writer[0]["status"] == "ok",
                          writer[0]["complete_ns"]) if writer else f"{vid:#x}")
        why = lost_write(key, max(acked) if acked else None, read)
        if why:
            lost.append(why)
    return lost


def _rows(paths: list[Path]) -> list[dict[str, Any]]:
    import csv

    rows = []
    for path in paths:
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                rows.append({"client": int(r["client"]), "op": r["op"], "key": int(r["key"]),
                             "invoke_ns": int(r["invoke_ns"]),
                             "complete_ns": int(r["complete_ns"]),
                             "value": int(r["value"]), "status": r["status"]})
    return rows


def _run(proto: str, tmp_path: Path) -> dict[str, Any]:
    return _run_proto(proto, EXTRA[proto], tmp_path)


def _run_proto(proto: str, extra: list[str], tmp_path: Path) -> dict[str, Any]:
    from netkv.config.compose import load
    from netkv.runner import make_target

    cfg = load([f"protocol={proto}", *BASE, *extra])
    with make_target(cfg) as target:
        res = target.run_point(1500.0, seed=5)
        rows = _rows(target.histories) if cfg.record_history else []
        honest = cfg.topology.clients - cfg.topology.hostile_clients
        written = sorted({r["key"] for r in rows
                          if r["client"] < honest and r["op"] == "w" and r["status"] == "ok"})
        back = _read_back(target, cfg, written, tmp_path)
        history = tmp_path / "history.jsonl"
        if cfg.record_history:
            target.write_history(history)
        refused = {why: target.driver.reg_read(reg, idx)
                   for why, (reg, idx) in target.plugin.refusals.items()}
        # multigets: a multiget of the hottest keys equals single GETs of
        # them (through NetMC's split or the coordinator), after the point
        mget = None
        if cfg.workload.multiget.enabled:
            via = (cfg.topology.servers + cfg.topology.clients
                   if target.rack.coordinators else None)
            mget = mget_equals_gets(target, via)
    return {"cfg": cfg, "res": res, "rows": rows, "back": back, "history": history,
            "honest": honest, "refused": refused, "mget": mget}


@skip
@pytest.mark.parametrize("proto", ["hash", "pegasus", "netcache", "kvswitch", "starcache", "netlr"])
def test_hostile_client_loses_no_acknowledged_write(proto: str, tmp_path: Path) -> None:
    run = _run(proto, tmp_path)
    res, rows = run["res"], run["rows"]
    print(f"{proto}: {res.issued} honest requests, completion {res.completion:.4f}, "
          f"{res.hostile_sent} hostile messages, refused {res.refused}, "
          f"{len(run['back'])} keys read back")
    assert res.hostile_sent > 300, res
    assert sum(v for k, v in res.refused.items() if k.startswith("switch.")) > 0, res.refused
    assert res.completion >= 0.99, res
    # the hostile client's writes are in the history, never acknowledged
    hostile = [r for r in rows if r["client"] >= run["honest"]]
    assert hostile and all(r["op"] == "w" and r["status"] == "timeout" for r in hostile)
    assert len(run["back"]) > 20, run["back"]
    assert _lost_writes(rows, run["back"]) == []
    if proto == "starcache":
        import numpy as np

        from netkv.lincheck.session import check_read_your_writes_by_value

        h = rows   # the hostile client only writes (unknown outcome): honest reads are checked
        col = {c: np.array([r[c] for r in h]) for c in ("client", "key", "invoke_ns",
                                                         "complete_ns")}
        res = check_read_your_writes_by_value(
            col["client"], np.array([r["op"] == "w" for r in h]), col["key"], col["invoke_ns"],
            col["complete_ns"], np.array([r["status"] == "ok" for r in h]),
            np.array([r["value"] for r in h], np.uint64))
        print(f"starcache: {res.reads_checked} reads after the client's own write")
        assert res.ok, [str(v) for v in res.violations[:5]]
        assert res.reads_checked > 50, res.reads_checked
    if proto in ("pegasus", "kvswitch", "netlr"):  # KVSwitch, NetLR: strict mode, the default
        from netkv.lincheck import PorcupineUnavailable, check_file, check_file_porcupine

        assert check_file(run["history"], timeout=120).ok is True
        try:
            assert check_file_porcupine(run["history"], timeout=120).ok is True
        except PorcupineUnavailable as exc:
            pytest.skip(f"Porcupine: {exc}")


@skip
@pytest.mark.parametrize("scheme", ["netmc", "coordimc"])
def test_netmc_multigets_stand_beside_a_hostile_client(scheme: str, tmp_path: Path) -> None:
    """NetMC (the switch splits) and CoordiMC (the coordinator a rack host),
    beside ``kvclient --mode hostile`` sending NetMC's client_hostile
    (forged OID/STARTIDX/CLO/KEYIDX/SRV, spoofed replies to honest clients,
    the coordinator and servers, replays, oversized messages). Two points,
    as kvclient records single-key histories only: with single-key reads
    and histories, every acknowledged PUT reads back; with multigets (mean 4
    keys), every honest multiget completes and, after the point, a multiget
    of the hottest keys equals single GETs of them byte for byte. The switch
    counts its refusals by reason in both."""
    keyed = _run_proto("netmc", [f"protocol.scheme={scheme}", "workload.key_size=8",
                                 "workload.multiget.mean=1"], tmp_path)
    mget = _run_proto("netmc", [*EXTRA["netmc"], f"protocol.scheme={scheme}",
                                "record_history=false"], tmp_path)
    for name, run in (("single keys", keyed), ("multigets", mget)):
        res, refused = run["res"], run["refused"]
        print(f"NetMC {scheme} on Mininet, {name}: {res.issued} honest requests, completion "
              f"{res.completion:.4f}, {res.hostile_sent} hostile messages, switch refused "
              f"{refused}, point {res.refused}, {len(run['back'])} keys read back")
        assert res.hostile_sent > 300, res
        assert res.completion >= 0.99, res
        assert refused["host_server_op"] > 0
        if scheme == "netmc":
            assert refused["forged_fields"] > 0 and refused["malformed"] > 0
    assert len(keyed["back"]) > 20 and _lost_writes(keyed["rows"], keyed["back"]) == []
    hostile = [r for r in keyed["rows"] if r["client"] >= keyed["honest"]]
    assert hostile and all(r["op"] == "w" and r["status"] == "timeout" for r in hostile)
    assert mget["mget"] is not None   # mget_equals_gets asserted every pair
    print(f"{mget['mget']} of 16 probed values written")


def test_the_read_back_check_fails_on_lost_writes() -> None:
    """The check on wrong data: the preloaded value, a value nobody wrote,
    a superseded acknowledged write, and no reply are each reported."""
    rows = [
        {"client": 0, "op": "w", "key": 1, "invoke_ns": 10, "complete_ns": 20, "value": 0xA,
         "status": "ok"},
        {"client": 1, "op": "w", "key": 1, "invoke_ns": 30, "complete_ns": 40, "value": 0xB,
         "status": "ok"},
        {"client": 2, "op": "w", "key": 1, "invoke_ns": 5, "complete_ns": -1, "value": 0xC,
         "status": "timeout"},
    ]
    assert _lost_writes(rows, {1: 0xB}) == []
    assert _lost_writes(rows, {1: 0xC}) == []  # a hostile write may land any time
    for vid, why in ((0xA, "superseded"), (0, "preloaded"), (0xD, "nobody wrote"),
                     (None, "no read-back")):
        lost = _lost_writes(rows, {1: vid})
        assert len(lost) == 1 and why in lost[0], (vid, lost)
