"""target=mininet with NetLR and its chain-replication baseline: netkv-switch
running pipeline/netlr.c, four kvservers as replicas (every key preloaded on
every one, under its 4 B object id), real kvclients, and the same
NetLRController as the simulator driving the switch through the control
socket (num_replica, LiveMask, PIN, get_dst_rep_table, multicast group 1).

- NetLR (strict mode), 20 % writes, two load points; replica 2's kvserver
  is killed in the middle of the first (``target.faults.crashes``). The
  controller sees its port go down (Rack.port_up, polled every 10 ms),
  removes it from the round-robin table, the multicast group and LiveMask,
  and sweeps the dirty slots; the writes that waited for its ack time out
  (recorded as unknown outcomes). In the second point, long after the
  crash, the only requests left unanswered are superseded writes (below),
  and the history of both points is linearizable by WGL and by Porcupine.
- CR, two clients: the tail's replies reach both (the head carries the
  client's node down the chain), and the history is linearizable.
- Harmonia on CR (not linearizable, performance-only): reads of clean
  keys reach every replica, dirty ones the tail, every write completes.
- Nothing is left behind: no process, no interface carrying the run's tag.

``test_netlr_history_check_fails_on_a_stale_read`` shows both checkers
refusing the NetLR history once one read is doctored to return an older
value.

Superseded writes: ``ack_superseded`` forwards an older write's ack only once
CRep, which serves the key's reads, holds that write (lseq, the condition
that makes it safe, docs/netlr.md). Until CRep's own ack of it arrives the
older write's acks are dropped, and a loss can keep it from arriving: the
older write then times out. That is the protocol, not a fault (under the
first rule, AckMask != 0, it happened to 1 of 1,539 requests of the second
point on a loaded CI machine). So the second point's check is that every
unanswered request is a write of a key another write of which was issued
within its timeout.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

try:
    from test_mininet_hash import REASON, _leftovers
except ImportError:
    from tests.test_mininet_hash import REASON, _leftovers

pytestmark = pytest.mark.mininet
skip = pytest.mark.skipif(REASON is not None, reason=REASON or "")

RACK = ["target=mininet", "protocol=netlr", "servers=4", "clients=2", "keys=2000", "alpha=1.2",
        "write_ratio=0.2", "duration=1.0", "record_history=true", "topology.timeout_us=100000",
        "topology.retries=0", "topology.drain_ms=300", "target.min_epoch_ms=10",
        "protocol.ack_superseded=true"]
CRASH = ["target.faults.crashes=[{server: 2, at_s: 0.5}]"]
RESTART = ["target.faults.crashes=[{server: 2, at_s: 0.5, restart_s: 0.8}]"]
STATS = ["reads", "dirty_reads", "writes", "collisions", "acks", "stale_acks", "commits",
         "superseded", "no_replica", "bad_oid", "host_server_op", "no_route"]


TIMEOUT_NS = 100_000 * 1000


def _run(overrides: list[str], out: Path, points: int = 2, base: list[str] = RACK,
         extra: Callable[[Any], dict[str, Any]] | None = None) -> dict[str, Any]:
    """The points on ``base`` (this rack; the testbed's test passes its
    own), and ``extra(target)`` read before the target stops."""
    from netkv.config.compose import load
    from netkv.mininet.history import read_csvs
    from netkv.runner import make_target

    cfg = load([*base, *overrides])
    results, ops = [], []
    with make_target(cfg) as target:
        tag = target.state.tag
        for i in range(points):
            seen = len(target.histories)
            results.append(target.run_point(1500.0, seed=3 + i))
            ops.append(read_csvs(target.histories[seen:]))
        stats = dict(zip(STATS, target.driver.reg_read_range("stats", 0, len(STATS)), strict=True))
        regs = {name: target.driver.reg_read(name, 0) for name in ("num_replica", "LiveMask")}
        ctl = target.controller.stats
        assert target.write_history(out)
        more = extra(target) if extra is not None else {}
    return {"results": results, "stats": stats, "regs": regs, "failures": ctl.failures,
            "recoveries": ctl.recoveries, "tag": tag, "ops": ops, **more}


def unexplained_losses(ops: Any, timeout_ns: int = TIMEOUT_NS) -> list[int]:
    """The operations without a known outcome that are not a superseded
    write: a read, or a write with no other write of its key issued between
    its own issue and its timeout."""
    bad = []
    for i in np.flatnonzero(~np.asarray(ops.ok, dtype=bool)):
        t, key = int(ops.invoke_ns[i]), ops.key[i]
        superseded = ops.write[i] and any(
            j != i and ops.write[j] and ops.key[j] == key
            and t <= int(ops.invoke_ns[j]) <= t + timeout_ns for j in range(len(ops)))
        if not superseded:
            bad.append(int(i))
    return bad


def _check_both(path: Path) -> tuple[bool, bool | None]:
    """WGL's verdict, then Porcupine's: None where it gave none (not built,
    or out of memory: a warning says which)."""
    from netkv.lincheck import verdicts

    wgl, *porc = verdicts(path, timeout=120)
    return wgl, porc[0] if porc else None


@skip
def test_netlr_replica_killed_mid_run_stays_linearizable(tmp_path: Path) -> None:
    out = tmp_path / "history.jsonl"
    run = _run(CRASH, out)
    first, second = run["results"]
    print(json.dumps({"points": [(r.issued, r.completed, r.timeouts) for r in run["results"]],
                      "stats": run["stats"], "regs": run["regs"],
                      "failures": run["failures"]}))
    # the controller saw replica 2 go and took it out of the switch's tables
    assert [r for r, _ in run["failures"]] == [2]
    assert run["regs"] == {"num_replica": 3, "LiveMask": 0b1011}
    # writes were multicast, acked by every live replica and committed
    assert run["stats"]["writes"] > 300 and run["stats"]["commits"] > 300, run["stats"]
    assert run["stats"]["acks"] >= 3 * run["stats"]["commits"]
    # only requests in flight at the crash were lost; after it, at most a
    # few superseded writes (module docstring)
    assert first.issued > 1000 and first.completed >= 0.95 * first.issued, first
    assert second.issued > 1000 and second.completed >= second.issued - 5, second
    assert len(run["ops"][1]) == second.issued
    assert unexplained_losses(run["ops"][1]) == [], second
    # Porcupine's verdict where it gave one (None: not built, just porcupine;
    # or out of memory, a warning says which): the rest is checked either way
    wgl, porc = _check_both(out)
    assert wgl is True and porc in (True, None), (wgl, porc)
    # the rack is gone
    links, procs = _leftovers(run["tag"])
    assert links == [] and procs == [], (links, procs)
    # and the check can fail: one read doctored to return the value of the
    # key's previous write, after a newer write of it had completed
    dwgl, dporc = _check_both(_doctored(out, tmp_path / "doctored.jsonl"))
    assert dwgl is False and dporc in ((False,) if porc is True else (False, None)), (dwgl, dporc)


@skip
def test_netlr_replica_restarted_mid_run_is_caught_up_and_stays_linearizable(
        tmp_path: Path) -> None:
    """Replica 2's kvserver killed at 0.5 s and a fresh one (its store
    preloaded again: every write it had is gone) started at 0.8 s: the
    controller removes it, sees its port come back, adds it to the
    multicast group, copies a live replica's written keys into it over the
    kvservers' control sockets (store_dump, store_merge: newer versions
    only), then makes it live; it serves reads again in the second point,
    and the history of both points is linearizable."""
    out = tmp_path / "history.jsonl"
    run = _run(RESTART, out)
    assert_replica_2_restarted_and_linearizable(run, out, tmp_path)
    links, procs = _leftovers(run["tag"])
    assert links == [] and procs == [], (links, procs)


def assert_replica_2_restarted_and_linearizable(run: dict[str, Any], out: Path,
                                                tmp_path: Path) -> None:
    """Replica 2 removed once, caught up and live again, serving its share
    of the second point; the history linearizable by both checkers and a
    doctored one refused (Mininet's and the testbed's restart tests)."""
    first, second = run["results"]
    print(json.dumps({"points": [(r.issued, r.completed, r.timeouts) for r in run["results"]],
                      "served": [[int(x) for x in r.server_requests] for r in run["results"]],
                      "stats": run["stats"], "regs": run["regs"], "failures": run["failures"],
                      "recoveries": run["recoveries"]}))
    assert [r for r, _ in run["failures"]] == [2]
    ((rep, _, copied),) = run["recoveries"]
    assert rep == 2 and copied > 50, run["recoveries"]
    assert run["regs"] == {"num_replica": 4, "LiveMask": 0b1111}
    assert first.issued > 1000 and first.completed >= 0.95 * first.issued, first
    assert second.issued > 1000 and second.completed >= second.issued - 5, second
    assert unexplained_losses(run["ops"][1]) == [], second
    # back in the round-robin: a quarter of the second point's reads
    assert second.server_requests[2] > 0.15 * second.issued, second.server_requests
    wgl, porc = _check_both(out)
    print(json.dumps({"wgl": wgl, "porcupine": porc}))
    assert wgl is True and porc in (True, None)
    assert _check_both(_doctored(out, tmp_path / "doctored.jsonl")) == (
        False, None if porc is None else False)


@skip
def test_netlr_restart_without_fault_adaptation_is_refused(tmp_path: Path) -> None:
    """The negative control: the same crash and restart with the controller
    off (``fault_adaptation: false``): the restarted kvserver, its store
    preloaded again, serves reads round-robin without being caught up, and
    both checkers refuse the history (the simulator's row of the same name,
    docs/netlr.md)."""
    out = tmp_path / "history.jsonl"
    run = _run([*RESTART, "protocol.fault_adaptation=false"], out)
    print(json.dumps({"points": [(r.issued, r.completed) for r in run["results"]],
                      "failures": run["failures"], "recoveries": run["recoveries"]}))
    assert run["failures"] == [] and run["recoveries"] == []
    wgl, porc = _check_both(out)
    print(json.dumps({"wgl": wgl, "porcupine": porc}))
    assert wgl is False and porc in (False, None)


@skip
def test_cr_serves_two_clients_linearizably(tmp_path: Path) -> None:
    out = tmp_path / "history.jsonl"
    run = _run(["protocol.replication=cr"], out, points=1)
    (res,) = run["results"]
    print(json.dumps({"point": (res.issued, res.completed), "stats": run["stats"]}))
    assert res.issued > 1000 and res.completed == res.issued, res
    assert run["stats"]["writes"] == 0   # the switch only forwards
    wgl, porc = _check_both(out)
    assert wgl is True and porc in (True, None)
    links, procs = _leftovers(run["tag"])
    assert links == [] and procs == [], (links, procs)


@skip
def test_harmonia_routes_reads_and_tracks_writes(tmp_path: Path) -> None:
    """Harmonia (not linearizable by design: its history is not checked):
    every request completes, every write is marked dirty and its completion
    forwarded, reads reach every replica and the tail's excess is the dirty
    reads."""
    run = _run(["protocol.replication=harmonia"], tmp_path / "history.jsonl", points=1)
    (res,) = run["results"]
    st = run["stats"]
    served = [int(x) for x in res.server_requests]
    print(json.dumps({"point": (res.issued, res.completed), "stats": st, "served": served}))
    assert res.issued > 1000 and res.completed == res.issued, res
    assert st["writes"] > 100 and st["writes"] == st["acks"], st   # every write completed
    assert 0 < st["commits"] <= st["acks"]
    assert st["reads"] + st["writes"] == res.issued
    # every write passes every replica; clean reads round-robin; dirty
    # reads at the tail on top
    reads_at = [n - st["writes"] for n in served]
    assert min(reads_at[:-1]) > 0.2 * st["reads"], reads_at
    assert reads_at[-1] - sum(reads_at[:-1]) / 3 == pytest.approx(st["dirty_reads"], abs=4)
    links, procs = _leftovers(run["tag"])
    assert links == [] and procs == [], (links, procs)


def _doctored(src: Path, dst: Path) -> Path:
    """``src`` with one read changed to return the value of a write that
    completed before another completed write of the same key began, itself
    before the read began: a stale read no checker may accept."""
    lines = [json.loads(x) for x in src.read_text().splitlines()]
    invoke: dict[tuple[Any, int], dict[str, Any]] = {}
    writes: dict[str, list[tuple[int, int, Any]]] = {}   # key -> (start, end, value)
    open_at: dict[Any, dict[str, Any]] = {}
    for x in lines:
        if x["type"] == "invoke":
            open_at[x["process"]] = x
        elif x["type"] == "ok" and x["f"] == "write":
            inv = open_at[x["process"]]
            writes.setdefault(x["key"], []).append((inv["time_ns"], x["time_ns"], inv["value"]))
    for i, x in enumerate(lines):
        if x["type"] != "ok" or x["f"] != "read":
            continue
        inv = open_at_for(lines, i)
        done = sorted(w for w in writes.get(x["key"], []) if w[1] < inv["time_ns"])
        for a in done:
            if any(b[0] > a[1] and b[1] < inv["time_ns"] for b in done):
                lines[i] = {**x, "value": a[2]}
                dst.write_text("".join(json.dumps(y) + "\n" for y in lines))
                return dst
    raise AssertionError("no read to doctor in the history")


def open_at_for(lines: list[dict[str, Any]], i: int) -> dict[str, Any]:
    """The invoke of the completion at ``lines[i]`` (its process' last before it)."""
    proc = lines[i]["process"]
    return next(y for y in reversed(lines[:i]) if y["type"] == "invoke" and y["process"] == proc)


def test_crashes_and_restarts_run_on_mininet_and_testbed_other_racks_refused_in_one_line(
        ) -> None:
    from netkv.config.compose import load
    from netkv.targets.base import TargetUnavailable
    from netkv.targets.mininet import MininetTarget, check_config

    for crash in (CRASH, RESTART):
        cfg = load([*RACK, *crash])
        check_config(cfg)
        check_config(cfg, "testbed")
        with pytest.raises(TargetUnavailable, match="crashes on target=other"):
            check_config(cfg, "other", applies_faults=False)
    from netkv.targets.testbed import TestbedTarget
    assert MininetTarget.applies_faults and TestbedTarget.applies_faults


def test_unexplained_losses_tells_a_superseded_write_from_a_lost_request() -> None:
    from netkv.results.history import OpColumns

    def ops(write: list[bool], key: list[str], invoke_ms: list[int],
            ok: list[bool]) -> OpColumns:
        n = len(write)
        t = np.asarray(invoke_ms, dtype=np.int64) * 1_000_000
        return OpColumns(client=np.arange(n) % 2, write=np.asarray(write), key=key,
                         invoke_ns=t, done_ns=t + 1000, ok=np.asarray(ok), value=[None] * n)

    # write 0 of k1 unanswered, another write of k1 issued 30 ms later: explained
    assert unexplained_losses(ops([True, True], ["k1", "k1"], [0, 30], [False, True])) == []
    # the same, but the other write came after the timeout, or to another key
    assert unexplained_losses(ops([True, True], ["k1", "k1"], [0, 130], [False, True])) == [0]
    assert unexplained_losses(ops([True, True], ["k1", "k2"], [0, 30], [False, True])) == [0]
    # an unanswered read is never explained
    assert unexplained_losses(ops([False, True], ["k1", "k1"], [0, 30], [False, True])) == [0]
