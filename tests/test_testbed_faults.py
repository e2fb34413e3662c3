"""target.faults on target=testbed (the namespace rack over SSH). NetLR with
4 replicas and writes, replica 2's kvserver killed over SSH (SIGKILL) mid
run and a fresh one started with the same arguments: the controller takes
it out, sees its port come back, catches it up and makes it live as on
Mininet; the history is linearizable by WGL and Porcupine (and a doctored
one is not); nothing is left running. NetLR and Pegasus through a switch
outage and restart on the switch host. Needs what tests/test_testbed.py
needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from netkv.testbed.inventory import Inventory

from test_mininet_faults import NETLR_RACK, _outage_run, assert_outage_recovered
from test_mininet_netlr import RACK, _run, assert_replica_2_restarted_and_linearizable
from test_mininet_pegasus_restart import RACK as PEGASUS_RACK
from test_mininet_pegasus_restart import _outage_run as _pegasus_outage_run
from test_mininet_pegasus_restart import assert_restart_held_and_linearizable
from test_testbed import REASON, leftovers, rack  # noqa: F401 - the rack fixture

pytestmark = [pytest.mark.testbed, pytest.mark.skipif(REASON is not None, reason=REASON or "")]

HERE = ["target=testbed", "inventory=netns-rack"]
TESTBED = [o for o in RACK if o != "target=mininet"] + HERE
OUTAGE_RACK = [o for o in NETLR_RACK if o != "target=mininet"] + HERE
PEGASUS_OUTAGE = [o for o in PEGASUS_RACK if o != "target=mininet"] + HERE


def pids_alive(pids: dict[int, str]) -> list[int]:
    """Of the recorded pids, those still running the run's program (a pid
    may have been reused: its command line must carry the run's tag)."""
    alive = []
    for pid, tag in pids.items():
        try:
            if tag.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                alive.append(pid)
        except OSError:
            pass
    return alive


def test_pids_alive_sees_a_live_tagged_process_only() -> None:
    import subprocess
    import sys
    import time

    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "nktagged1"])
    try:
        for _ in range(100):   # until it has exec'd
            if b"nktagged1" in Path(f"/proc/{p.pid}/cmdline").read_bytes():
                break
            time.sleep(0.01)
        assert pids_alive({p.pid: "nktagged1"}) == [p.pid]
        assert pids_alive({p.pid: "nkother1"}) == []     # a reused pid: not the run's
    finally:
        p.kill()
        p.wait()
    assert pids_alive({p.pid: "nktagged1"}) == []


def pid_files(target: Any) -> dict[str, Any]:
    """Every pid the run recorded on its hosts (one file system here), and
    its servers' incarnations."""
    tag = target.state.tag
    pids = {int(f.read_text().strip()): tag for folder in set(target.rack.remote_run.values())
            for f in Path(folder).glob("*.pid")}
    return {"pids": pids, "incarnations": list(target.rack.incarnations)}


def test_netlr_replica_killed_and_restarted_over_ssh_stays_linearizable(
        rack: Inventory, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "history.jsonl"
    run = _run(["target.faults.crashes=[{server: 2, at_s: 0.3, restart_s: 0.5}]"], out,
               base=TESTBED, extra=pid_files)
    assert run["incarnations"] == [0, 0, 1, 0]   # one restart, of server 2
    assert_replica_2_restarted_and_linearizable(run, out, tmp_path)
    # nothing left: no program in the namespaces, no run folder, no
    # recorded pid alive
    assert len(run["pids"]) == 5   # the switch and 4 kvservers (server 2: its new one)
    assert pids_alive(run["pids"]) == []
    assert not leftovers(rack)


def test_netlr_switch_outage_on_the_testbed_recovers_and_stays_linearizable(
        rack: Inventory, tmp_path: Path) -> None:  # noqa: F811
    """netkv-switch killed on the switch host at 0.6 s (SIGKILL over SSH)
    and a fresh one, empty, started there at 1.2 s on the same ports, in one
    2.4 s point at 1,500 req/s: the same checks as on Mininet (per 100 ms:
    ~0 during, back after; epoch 1 reinstalled; linearizable)."""
    out = tmp_path / "history.jsonl"
    point, ctl, regs, _tag, lost, done = _outage_run(out, base=OUTAGE_RACK)
    assert_outage_recovered(point, ctl, regs, lost, out, tmp_path, done)
    assert not leftovers(rack)


def test_pegasus_switch_restart_on_the_testbed_holds_traffic_and_stays_linearizable(
        rack: Inventory, tmp_path: Path) -> None:  # noqa: F811
    """Pegasus through the same outage on the switch host: netkv-switch
    restarted there closed (its command line plus --closed, over SSH) and
    opened once the controller is done; the checks of Mininet's test
    (tests/test_mininet_pegasus_restart.py)."""
    out = tmp_path / "history.jsonl"
    run = _pegasus_outage_run(out, base=PEGASUS_OUTAGE)
    assert_restart_held_and_linearizable(run, out)
    assert not leftovers(rack)


def test_a_failed_restart_over_ssh_stops_the_point_in_one_line(
        rack: Inventory) -> None:  # noqa: F811
    """The restarted kvserver cannot open its control socket: the point
    stops with one line naming the server, the event and the cause (as on
    Mininet), and nothing is left running."""
    from netkv.config.compose import load
    from netkv.runner import make_target
    from netkv.targets.faults import FaultFailed

    from test_testbed import SMALL

    cfg = load([*SMALL, "protocol=hash",
                "target.faults.crashes=[{server: 1, at_s: 0.1, restart_s: 0.3}]"])
    with make_target(cfg) as target:
        argv = target.rack.server_argv[1]
        target.rack.server_argv[1] = [*argv, "--ctl", "/nonexistent-netkv/s.sock"]
        with pytest.raises(FaultFailed) as err:
            target.run_point(300.0, seed=1)
    line = str(err.value)
    print(line)
    assert "\n" not in line and "server 1's restart at 0.3 s failed" in line
    assert "server1 on host 's1' exited" in line
    assert not leftovers(rack)
