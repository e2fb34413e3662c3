"""Hostile clients on the simulator (topology.hostile_clients, docs/security.md).

One of the clients sends its protocol's adversarial traffic (host.h
client_hostile: forged versions and flags, server-only ops, replays, spoofed
replies, oversized values) beside honest clients recording histories. For
hash, Pegasus, NetCache, KVSwitch, StarCache and NetMC (with its baselines, beside
multigets; a multiget of the hottest keys after the run equals single GETs):

- every acknowledged write survives: after the run, every key an honest
  client wrote is read back through the switch and the servers (controller
  packet-out), and what comes back is at least as new as every acknowledged
  write of that key, and not a value some acknowledged write superseded;
- Pegasus' and KVSwitch's honest histories are linearizable by both checkers
  (WGL, Porcupine); StarCache's (not claimed linearizable) keep the session
  property of netkv.lincheck.session: no honest client reads a value older
  than its own last acknowledged write;
- the switch's refusal counters are non-zero, and in the dataset.

The read-back check reports doctored read-backs (the value of an overwritten
write, or the initial value); with every client port trusted the switch keeps
forged versions but still never wraps (writes past 2^64-1 are refused).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from netkv.config.compose import load
from netkv.lincheck import PorcupineUnavailable, check_file, check_file_porcupine
from netkv.protocols import lookup
from netkv.sim import native
from netkv.sim.engine import SimEngine, Workload
from netkv.sim.history import write_history
from netkv.protocols.kvswitch import wire_key
from netkv.protocols.netlr import wire_key as netlr_wire_key
from netkv.wire.codec import (KINDS, KvswitchOp, NetcacheOp, NetlrOp, NetmcOp, PegasusOp, Proto,
                              StarcacheOp)

try:
    from readback import INITIAL, Write, lost_write
except ImportError:
    from tests.readback import INITIAL, Write, lost_write

BASE = ["servers=4", "clients=4", "topology.hostile_clients=1", "keys=200", "alpha=1.2",
        "write_ratio=0.3", "record_history=true", "duration=0.05",
        "topology.hostile_rps=50000"]
# KVSwitch learns hot keys from the traffic (cold mode, short periods): the
# hostile client's messages meet installs, evictions and hot writes
# NetMC: multigets (mean 4 keys on [1, 16]) beside the single-key writes; 8 B
# keys (4 B keys all live on one server, docs/netmc.md); values of three sizes,
# so that a pair answered for the wrong key shows in its length
MGET = ["workload.multiget.mean=4", "workload.key_size=8", "slo.reference=netmc",
        "workload.value_size=[{size: 32, weight: 1}, {size: 128, weight: 1},"
        " {size: 700, weight: 1}]"]
EXTRA = {"hash": [], "pegasus": ["protocol.replicated_keys=4"], "netcache": [],
         "kvswitch": ["protocol.mode=cold", "protocol.hot_keys=16", "protocol.period_ms=2",
                      "protocol.min_period_queries=100", "protocol.epsilon=0.01"],
         # epochs within the run: the watchdog refetches keys a forged write left INVALID
         "starcache": ["protocol.cache_size=16", "protocol.epoch_ms=5"],
         "netmc": MGET,
         # strict mode; a write another write superseded is answered (flagged)
         # rather than left to time out; no retries (a resent NetLR write is
         # a second write: docs/netlr.md)
         "netlr": ["protocol.ack_superseded=true", "topology.timeout_us=2000",
                   "topology.retries=0"]}
PROTO = {"hash": (Proto.PLAIN, PegasusOp.READ), "pegasus": (Proto.PEGASUS, PegasusOp.READ),
         "netcache": (Proto.NETCACHE, NetcacheOp.READ),
         "kvswitch": (Proto.KVSWITCH, KvswitchOp.GET), "netmc": (Proto.NETMC, NetmcOp.GET),
         # the loop's cache packets end with the run (SimEngine.extend): StarCache
         # reads its servers back (CRN_REQ skips the cache); what the loop
         # served during the run is held by the session check below
         "starcache": (Proto.STARCACHE, StarcacheOp.CRN_REQ),
         "netlr": (Proto.NETLR, NetlrOp.READ)}
OK = 1  # nk_sim_outcome


def _run(proto: str, overrides: list[str], params_extra: str = "") -> dict[str, Any]:
    cfg = load([f"protocol={proto}", *BASE, *EXTRA[proto], *overrides])
    plugin = lookup(proto)
    params = ";".join(p for p in (plugin.pipeline_params(cfg), params_extra) if p)
    with Workload.from_config(cfg) as wl, SimEngine(cfg, wl, 200_000, 11, params) as eng:
        factory = plugin.sim_controller(cfg)
        controller = factory(eng) if factory else None
        epoch_ms = getattr(cfg.protocol, "epoch_ms", None)
        st = eng.run(controller, epoch_ms / 1e3 if controller else None)
        hist, owners = eng.history(), eng.version_owners()
        refused = {why: eng.reg_read(reg, idx) for why, (reg, idx) in plugin.refusals.items()}
        back = _read_back(eng, cfg, wl, hist, PROTO[proto])
        value_len = {int(r["key"]): int(r["value_len"]) for r in wl.rank_info()}
        mget = _mget_vs_gets(eng, cfg, wl) if proto == "netmc" else None
        # NetLR: older writes' acks forwarded SUPERSEDED (stats[NL_SUPERSEDED])
        superseded = eng.reg_read("stats", 7) if proto == "netlr" else None
    return {"cfg": cfg, "stats": st, "hist": hist, "owners": owners, "refused": refused,
            "back": back, "value_len": value_len, "mget": mget, "superseded": superseded}


def _read_back(eng: SimEngine, cfg, wl: Workload, hist: np.ndarray,
               proto: tuple[Proto, int]) -> dict[int, tuple[int, int]]:
    """READ every key an honest client wrote, as the controller (packet-out
    through the pipeline, replies to the CPU port): key id -> (version,
    value length)."""
    ok_writes = hist[(hist["write"] == 1) & (hist["outcome"] == OK)]
    keys = sorted(set(int(k) for k in ok_writes["key"]))
    info = {int(r["key"]): r for r in wl.rank_info()}
    ffi = eng.ffi
    while eng.cpu_recv(4096):
        pass  # what the controller has not read: the replies must fit the channel
    out: dict[int, tuple[int, int]] = {}
    for attempt in range(5):  # link faults hit controller traffic too: resend
        todo = [k for k in keys if k not in out]
        if not todo:
            break
        by_req = {}
        for i, key in enumerate(todo):
            m = eng.new_msg()
            m.proto, m.op = int(proto[0]), int(proto[1])
            m.kind = KINDS[proto[0]][int(proto[1])]
            kb = ffi.new("uint8_t[64]")
            eng.lib.nk_key_bytes(key, cfg.workload.key_size, kb)
            kbytes = bytes(ffi.buffer(kb, cfg.workload.key_size))
            if proto[0] == Proto.KVSWITCH:
                kbytes = wire_key(kbytes)   # 16 B on its wire (the client's encoding)
            elif proto[0] == Proto.NETLR:
                kbytes = netlr_wire_key(kbytes)   # its 4 B object id
            m.key_len = len(kbytes)
            ffi.memmove(m.key, kbytes, len(kbytes))
            m.keyhash = int(info[key]["keyhash"])
            m.server_id = int(info[key]["home"])
            m.client_id = 0xFFFE
            m.req_id = 0x7000_0000 + attempt * 0x10000 + i
            m.frag_cnt = m.nkeys = 1
            by_req[int(m.req_id)] = key
            eng.cpu_send(m, int(info[key]["home"]))
        eng.extend(0.01)
        eng.run_until(eng.end_s)
        for _src, msg in eng.cpu_recv(1 << 16):
            key = by_req.get(int(msg.req_id))
            if key is not None and msg.kind == 2:  # READ_REPLY
                out[key] = (int(msg.ver), int(msg.value_len))
    assert set(out) == set(keys), f"no read-back reply for {sorted(set(keys) - set(out))[:5]}"
    return out


def _mget_vs_gets(eng: SimEngine, cfg, wl: Workload) -> list[tuple[int, int, int, int]]:
    """After the run, on the quiescent store: a multiget of the 16 hottest
    keys as the scheme's client sends it (NetMC: one packet with KEYIDX and
    SRV, split by the switch; CliMC: one per server group; CoordiMC: one to
    the coordinator), from the controller, and single GETs of the same keys.
    The simulator's pairs carry lengths only: per reply packet, (first key,
    keys, value bytes from the multiget, the same keys' bytes from the GETs)."""
    ffi = eng.ffi
    hot = sorted(list(wl.rank_info())[:16], key=lambda r: int(r["home"]))  # by server
    kl, scheme = cfg.workload.key_size, cfg.protocol.scheme
    keys = []
    for r in hot:
        kb = ffi.new("uint8_t[64]")
        eng.lib.nk_key_bytes(int(r["key"]), kl, kb)
        keys.append(bytes(ffi.buffer(kb, kl)))
    homes = [int(r["home"]) for r in hot]
    groups = [i for i in range(len(hot)) if i == 0 or homes[i] != homes[i - 1]]
    if scheme == "climc":
        parts = [(lo, (groups + [len(hot)])[g + 1]) for g, lo in enumerate(groups)]
    else:
        parts = [(0, len(hot))]
    keep = []  # the key lists, alive until the replies are in
    while eng.cpu_recv(4096):
        pass
    for lo, hi in parts:
        items = ffi.new("uint8_t[]", b"".join(keys[lo:hi]))
        keep.append(items)
        m = eng.new_msg()
        m.proto, m.op = int(Proto.NETMC), int(NetmcOp.MGET)
        m.kind = KINDS[Proto.NETMC][NetmcOp.MGET]
        m.req_id = 0x3000 << 6 | lo      # the wire ID: request << 6 | first key
        m.nkeys = m.key_slots = hi - lo
        m.key_slot_len = kl
        m.items, m.items_len = items, (hi - lo) * kl
        m.frag_cnt = 1
        g = 0
        for i in range(lo, hi):
            if i + 1 == hi or homes[i + 1] != homes[i]:
                m.keyidx |= 1 << (cfg.protocol.w - 1 - (i - lo))
                m.srv[g] = homes[i]
                g += 1
        coord = cfg.topology.servers + cfg.topology.clients
        eng.cpu_send(m, coord if scheme == "coordimc" else homes[lo])
    for i, (home, k) in enumerate(zip(homes, keys, strict=True)):
        g = eng.new_msg()
        g.proto, g.op = int(Proto.NETMC), int(NetmcOp.GET)
        g.kind = KINDS[Proto.NETMC][NetmcOp.GET]
        g.key_len = g.key_slot_len = kl
        ffi.memmove(g.key, k, kl)
        g.key_slots = g.nkeys = g.frag_cnt = 1
        g.req_id = 0x3100 + i
        eng.cpu_send(g, home)
    eng.extend(0.01)
    eng.run_until(eng.end_s)
    got = eng.cpu_recv(1 << 16)
    single = {int(msg.req_id) - 0x3100: int(msg.value_len) for _src, msg in got
              if msg.op == NetmcOp.GET_REPLY}
    assert sorted(single) == list(range(len(keys))), "a GET went unanswered"
    out = []
    for _src, msg in got:
        if msg.op == NetmcOp.MGET_REPLY and msg.req_id >> 6 == 0x3000:
            lo, n = int(msg.req_id & 63) + int(msg.startidx), int(msg.nkeys)
            want = sum(single.get(i, -1) for i in range(lo, lo + n))
            out.append((lo, n, int(msg.value_len), want))
    del keep
    return sorted(out)


def _mget_wrong(replies: list[tuple[int, int, int, int]], nkeys: int) -> list[str]:
    """What is wrong with a multiget's replies: a key answered twice or not
    at all, or value bytes that differ from the single GETs'."""
    wrong, seen = [], [0] * nkeys
    for lo, n, got, want in replies:
        for i in range(lo, min(lo + n, nkeys)):
            seen[i] += 1
        if got != want:
            wrong.append(f"keys {lo}..{lo + n - 1}: {got} B, single GETs {want} B")
    wrong += [f"key {i} answered {c} times" for i, c in enumerate(seen) if c != 1]
    return wrong


HOSTILE_VALUE_LEN = 8000  # the hostile clients' oversized (but legitimate) writes


def _lost_writes(run: dict[str, Any]) -> list[str]:
    """Keys whose read-back is older than an acknowledged write."""
    hist, owners, back = run["hist"], run["owners"], run["back"]
    acked = hist[(hist["write"] == 1) & (hist["outcome"] == OK)]
    if run["cfg"].protocol.name == "netcache":
        # no version on NetCache's wire: the value read must be one some
        # client wrote (an honest write's length, or a hostile client's
        # oversized one), never a forged refresh's
        lost = []
        for key, (_ver, vlen) in back.items():
            if vlen not in (run["value_len"][key], HOSTILE_VALUE_LEN):
                lost.append(f"key {key}: read a {vlen} B value nobody wrote")
        return lost
    lost = []
    for key, (ver, _vlen) in back.items():
        mine = acked[acked["key"] == key]
        if ver < int(mine["ver"].max()):
            lost.append(f"key {key}: read {ver} < acked {int(mine['ver'].max())}")
            continue
        owner = owners.get((int(mine["keyhash"][0]), ver), native.OWNER_INITIAL)
        read: Write | str = INITIAL
        if owner != native.OWNER_INITIAL:
            rec = hist[owner - 1]
            read = Write(f"write {owner}", rec["outcome"] == OK, int(rec["done_ns"]))
        why = lost_write(key, int(mine["invoke_ns"].max()), read)
        if why:
            lost.append(why)
    return lost


def _unexplained_timeouts(run: dict[str, Any]) -> list[str]:
    """Honest NetLR requests that went unanswered for another reason than
    the protocol's: a write another write of its key (any client's)
    superseded while it was in flight gets no reply in strict mode until
    CRep holds it, which a loss can prevent (docs/netlr.md); a read is
    always answered."""
    hist, cfg = run["hist"], run["cfg"]
    honest = cfg.topology.clients - cfg.topology.hostile_clients
    timeout_ns = cfg.topology.timeout_us * 1e3
    writes = hist[hist["write"] == 1]
    out = []
    for rec in hist[(hist["client"] < honest) & (hist["outcome"] != OK)]:
        if not rec["write"]:
            out.append(f"read of key {rec['key']} at {rec['invoke_ns']} unanswered")
            continue
        same = writes[(writes["key"] == rec["key"]) & (writes["invoke_ns"] > rec["invoke_ns"])
                      & (writes["invoke_ns"] <= rec["invoke_ns"] + timeout_ns)]
        if len(same) == 0:
            out.append(f"write of key {rec['key']} at {rec['invoke_ns']} unanswered, "
                       "not superseded")
    return out


def _honest_ok(run: dict[str, Any]) -> None:
    st, cfg = run["stats"], run["cfg"]
    assert st.hostile_sent > 500, st
    if cfg.protocol.name == "netlr":
        assert st.issued > 5000 and _unexplained_timeouts(run) == [], st
    else:
        assert st.issued > 5000 and st.completed == st.issued, st  # no honest request lost
    honest = cfg.topology.clients - cfg.topology.hostile_clients
    hist = run["hist"]
    hostile = hist[hist["client"] >= honest]
    # the hostile client's writes are in the history, never acknowledged
    assert len(hostile) > 0 and (hostile["write"] == 1).all() and (hostile["outcome"] != OK).all()


@pytest.mark.parametrize("proto", ["hash", "pegasus", "netcache", "kvswitch", "starcache", "netmc",
                                   "netlr"])
def test_hostile_client_loses_no_acknowledged_write(proto: str) -> None:
    run = _run(proto, [])
    _honest_ok(run)
    assert len(run["back"]) > 50
    assert _lost_writes(run) == []
    assert sum(run["refused"].values()) > 0, run["refused"]


@pytest.mark.parametrize("scheme", ["netmc", "climc", "coordimc"])
def test_netmc_multigets_stand_beside_a_hostile_client(scheme: str) -> None:
    """NetMC and its baselines: the hostile client's forged OID, STARTIDX,
    CLO, KEYIDX, SRV and NUMKEY, spoofed replies (to honest clients, the
    coordinator and servers), replays and oversized messages leave every
    honest multiget complete, every acknowledged PUT readable, and a
    multiget of the hottest keys (rewritten during the run) equal to single
    GETs of them; the switch counts its refusals by reason."""
    run = _run("netmc", [f"protocol.scheme={scheme}"])
    _honest_ok(run)
    st, refused = run["stats"], run["refused"]
    print(f"NetMC {scheme}: {st.issued} honest requests, {st.completed} completed, "
          f"{st.hostile_sent} hostile messages, refused {refused}, "
          f"{len(run['back'])} keys read back, multiget replies {run['mget']}")
    assert _lost_writes(run) == []
    if scheme == "coordimc":
        # the simulated coordinator gets lengths-only sub-replies and spreads
        # each one's bytes evenly over its pairs (docs/netmc.md): per packet
        # the lengths move, the total may lose < 1 B per key to rounding
        replies = run["mget"]
        assert _mget_wrong([(lo, n, w, w) for lo, n, _g, w in replies], 16) == []
        total, want = sum(r[2] for r in replies), sum(r[3] for r in replies)
        assert want - 16 < total <= want, (total, want)
    else:
        assert run["mget"] and _mget_wrong(run["mget"], 16) == []
    assert refused["host_server_op"] > 0
    if scheme == "netmc":   # the baselines' switch only forwards (split=0)
        assert refused["forged_fields"] > 0 and refused["malformed"] > 0
    else:
        assert refused["forged_fields"] == refused["malformed"] == 0


def test_the_multiget_check_fails_on_wrong_replies() -> None:
    """The multiget check on wrong data: a missing key, a key answered
    twice, and value bytes other than the single GETs' are each reported."""
    good = [(0, 3, 768, 768), (3, 1, 8000, 8000)]
    assert _mget_wrong(good, 4) == []
    assert any("key 3 answered 0" in w for w in _mget_wrong(good[:1], 4))
    assert any("answered 2" in w for w in _mget_wrong([*good, (2, 2, 8256, 8256)], 4))
    assert any("single GETs 768" in w for w in _mget_wrong([(0, 3, 512, 768), good[1]], 4))


def _both_checkers_accept(run: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "hostile.jsonl"
    write_history(run["hist"], run["owners"], path)
    assert check_file(path, timeout=120).ok is True
    try:
        assert check_file_porcupine(path, timeout=120).ok is True
    except PorcupineUnavailable as exc:
        pytest.skip(f"Porcupine: {exc}")


def test_pegasus_honest_histories_linearizable_beside_a_hostile_client(tmp_path: Path) -> None:
    run = _run("pegasus", ["target.faults.loss=0.01", "target.faults.reorder=0.01",
                           "target.faults.reorder_us=50"])
    assert min(run["refused"][k] for k in ("forged_ver", "forged_flags", "host_server_op")) > 0
    _both_checkers_accept(run, tmp_path)


def test_kvswitch_honest_histories_linearizable_beside_a_hostile_client(tmp_path: Path) -> None:
    """Strict mode, keys installed and evicted, 1% loss and reordering: the
    hostile client's forged VER/FLAGS are zeroed, its ACKs, updates, pushes
    and replies dropped, and the honest histories stay linearizable."""
    run = _run("kvswitch", ["target.faults.loss=0.01", "target.faults.reorder=0.01",
                            "target.faults.reorder_us=50"])
    assert min(run["refused"][k] for k in ("forged_fields", "host_server_op")) > 0
    _both_checkers_accept(run, tmp_path)


def test_netlr_honest_histories_linearizable_beside_a_hostile_client(tmp_path: Path) -> None:
    """Strict mode, 1% loss, duplication and reordering: the hostile
    client's forged seqs, stamps and epochs are cleared, its acks, replies
    and NACKs dropped, and the honest histories stay linearizable."""
    run = _run("netlr", ["target.faults.loss=0.01", "target.faults.duplicate=0.01",
                         "target.faults.reorder=0.01", "target.faults.reorder_us=50"])
    assert min(run["refused"][k] for k in ("forged_fields", "host_server_op")) > 0
    _both_checkers_accept(run, tmp_path)


def test_netlr_timeout_check_fails_on_doctored_histories() -> None:
    """Without faults every honest request is answered, superseded writes
    too (CRep's own ack of the older write lets it through: docs/netlr.md).
    And the check on wrong data: an honest read marked unanswered, and an
    honest write marked unanswered with its key's later writes moved out of
    its flight."""
    run = _run("netlr", [])
    assert _unexplained_timeouts(run) == []
    hist = run["hist"]
    honest = run["cfg"].topology.clients - run["cfg"].topology.hostile_clients
    mine = hist[hist["client"] < honest]
    assert len(mine) > 5000 and (mine["outcome"] == OK).all(), \
        np.unique(mine["outcome"], return_counts=True)
    assert run["superseded"] > 0       # the case arose, and was answered
    read = np.flatnonzero((hist["client"] < honest) & (hist["write"] == 0))[0]
    write = np.flatnonzero((hist["client"] < honest) & (hist["write"] == 1))[0]
    w = hist[write]
    doctored = hist.copy()
    doctored["outcome"][read] = 0
    doctored["outcome"][write] = 0
    later = (doctored["key"] == w["key"]) & (doctored["invoke_ns"] > w["invoke_ns"])
    doctored["invoke_ns"][later] += 10**12
    found = _unexplained_timeouts({**run, "hist": doctored})
    assert any("read of key" in x for x in found), found
    assert any("not superseded" in x for x in found), found


@pytest.mark.parametrize("faults", [[], ["target.faults.loss=0.01", "target.faults.reorder=0.01",
                                          "target.faults.reorder_us=50"]],
                         ids=["clean", "loss-reorder"])
def test_starcache_honest_sessions_hold_beside_a_hostile_client(faults: list[str]) -> None:
    """StarCache is not claimed linearizable; what it keeps (strict mode) is
    the session property of netkv.lincheck.session: no honest client reads a
    value older than its own last acknowledged write, also with the hostile
    client's forged FLAG/CACHED, forged replies and cache packets, writes
    sent to another server than the key's home, and forged HKEYs - while the
    loop serves."""
    from netkv.lincheck.session import check_read_your_writes

    run = _run("starcache", faults)
    st, hist = run["stats"], run["hist"]
    assert min(run["refused"].values()) > 0, run["refused"]
    assert st.switch_replies > 500, st           # the cache packets served throughout
    honest = run["cfg"].topology.clients - run["cfg"].topology.hostile_clients
    h = hist[hist["client"] < honest]
    res = check_read_your_writes(h["client"], h["write"] == 1, h["key"], h["invoke_ns"],
                                 h["done_ns"], h["outcome"] == OK, h["ver"])
    assert res.ok, [str(v) for v in res.violations[:5]]
    assert res.reads_checked > 1000, res.reads_checked
    if not faults:
        _honest_ok(run)
        assert _lost_writes(run) == []


def test_the_read_back_check_fails_on_lost_writes() -> None:
    """The check on wrong data: a read-back that returns the value of an
    acknowledged write that a later acknowledged write replaced, or the
    preloaded value, is reported."""
    run = _run("pegasus", [])
    hist = run["hist"]
    acked = hist[(hist["write"] == 1) & (hist["outcome"] == OK)]
    doctored = 0
    for key in list(run["back"])[:40]:
        mine = acked[acked["key"] == key]
        first = mine[np.argmin(mine["done_ns"])]
        if (mine["invoke_ns"] > first["done_ns"]).any():
            run["back"][key] = (int(first["ver"]), 0)  # an overwritten write's value
            doctored += 1
    assert doctored > 5
    assert len(_lost_writes(run)) == doctored
    key = next(iter(run["back"]))
    run["back"][key] = (10**12, 0)  # a version no write made: the initial value
    assert any("initial" in why for why in _lost_writes(run))


def test_trusted_ports_keep_versions_but_never_wrap() -> None:
    """Every client port configured as trusted (the switch keeps a hostile
    client's VER, as it did for every port before issue #21): ver_next
    still never wraps - writes past 2^64-1 are refused, not acked and lost."""
    ports = ",".join(str(p) for p in range(4, 8))
    run = _run("pegasus", [], params_extra=f"trusted_ports={ports}")
    assert run["refused"]["ver_exhausted"] > 0 and run["refused"]["forged_ver"] == 0
    assert _lost_writes(run) == []


def test_dataset_counts_refusals(tmp_path: Path) -> None:
    import subprocess
    import sys

    import polars as pl

    out = tmp_path / "run"
    args = [a for a in BASE if not a.startswith("record_history")]
    subprocess.run([sys.executable, "-m", "netkv", "run", "protocol=pegasus", *args,
                    "duration=0.02", f"out={out}"], check=True, capture_output=True)
    points = pl.read_parquet(out / "points.parquet").filter(pl.col("protocol") == "pegasus")
    assert len(points) > 0
    assert (points["refused_switch"] > 0).all()
    assert (points["refused.switch.forged_ver"] > 0).all()
    assert (points["hostile_sent"] > 0).all()


def test_hostile_clients_refused_without_hostile_traffic_and_bad_counts() -> None:
    """Every target runs the host logic's client_hostile (the simulator, and
    kvclient --mode hostile on Mininet and the testbed): a protocol without
    one is refused before anything runs, on any target, in one line."""
    import subprocess
    import sys

    from netkv.protocols import implemented_on

    _, lib = native.load()
    cases = [(["protocol=hash", "topology.hostile_clients=2", "clients=2"],
              "topology.hostile_clients = 2 (allowed: 0..1")]
    for target in ("sim", "mininet"):
        without = [p for p in implemented_on(target) if not lib.nk_host_has_hostile(p.encode())]
        cases += [([f"protocol={p}", f"target={target}", "topology.hostile_clients=1",
                    "clients=2", "servers=4"], "has no hostile traffic") for p in without[:1]]
    for args, why in cases:
        res = subprocess.run([sys.executable, "-m", "netkv", "run", *args],
                             capture_output=True, text=True)
        assert res.returncode == 2 and why in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
