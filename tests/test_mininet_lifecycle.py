"""A Mininet run that is killed or interrupted leaves nothing behind.

SIGKILL of ``python -m netkv run target=mininet`` mid-run: netkv-switch,
kvserver and kvclient die with their parent (PR_SET_PDEATHSIG), the node
shells read EOF and exit, so every namespace and interface of the run goes
within 5 s, with no ``clean`` needed. Ctrl-C (SIGINT): one line saying what
was kept, exit 130, the rack torn down, finished points on disk; SIGTERM
(kill, timeout, a batch scheduler) the same. Ctrl-C on a sweep in joblib's
workers, or on a figure's (`reproduce --jobs 2`): the same one line, and
nothing of its racks is left once it exits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from netkv import procstat
from netkv.mininet.cleanup import STATE_ROOT, clean_run

try:
    from test_mininet_hash import _leftovers, skip
except ImportError:
    from tests.test_mininet_hash import _leftovers, skip

pytestmark = [pytest.mark.mininet, skip]

RUN = [sys.executable, "-m", "netkv", "run", "target=mininet", "servers=2", "clients=1",
       "keys=20000", "duration=0.5"]


def _tags_of(owner: int) -> list[str]:
    tags = []
    if STATE_ROOT.is_dir():
        for folder in STATE_ROOT.iterdir():
            try:
                state = json.loads((folder / "state.json").read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if state.get("owner") == owner:
                tags.append(folder.name)
    return tags


def _wait_for_clients(proc: subprocess.Popen[str], seen: set[str], timeout_s: float,
                      tags_of: Callable[[int], Iterable[str]] = _tags_of) -> None:
    """Until one of the run's kvclients runs (mid-point); collects its tags
    (``tags_of(pid)``: the folders of the command's runs)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        seen.update(tags_of(proc.pid))
        if any("kvclient" in cmd for tag in seen for cmd in _leftovers(tag)[1]):
            return
        time.sleep(0.1)
    raise AssertionError("no kvclient started")


def _gone_within(tags: set[str], seconds: float) -> tuple[list[str], list[str]]:
    deadline = time.monotonic() + seconds
    while True:
        links = [n for t in tags for n in _leftovers(t)[0]]
        procs = [c for t in tags for c in _leftovers(t)[1]]
        if not (links or procs) or time.monotonic() > deadline:
            return links, procs
        time.sleep(0.1)


def _committed(out: Path) -> int:
    folder = out / "points.d"
    return len([d for d in folder.iterdir() if (d / "point.parquet").is_file()]
               ) if folder.is_dir() else 0


def _cleanup(tags: set[str]) -> None:
    for tag in tags:  # whatever a failing run left, so later tests start clean
        clean_run(tag)


def test_sigkill_mid_run_leaves_no_process_or_namespace(tmp_path: Path) -> None:
    proc = subprocess.Popen([*RUN, f"out={tmp_path / 'run'}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=True)
    tags: set[str] = set()
    try:
        _wait_for_clients(proc, tags, 90)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        links, procs = _gone_within(tags, 5.0)
        assert not procs, procs
        assert not links, links
    finally:
        proc.kill()
        _cleanup(tags)


# SIGTERM (kill, timeout, a batch scheduler) ends a run as Ctrl-C does
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_prints_one_line_saying_what_was_kept(tmp_path: Path, sig: int) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen([*RUN, f"out={out}"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    tags: set[str] = set()
    try:
        deadline = time.monotonic() + 90
        while not _committed(out) and time.monotonic() < deadline:
            time.sleep(0.1)
        _wait_for_clients(proc, tags, 90)  # the next point is under way
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, err
        kept = _committed(out)
        assert kept >= 1
        assert lines[0] == (f"netkv: interrupted: {kept} finished point(s) kept in {out} "
                            f"(run again with out={out} to resume)"), err
        links, procs = _gone_within(tags, 5.0)
        assert not procs and not links, (procs, links)
        assert not [t for t in tags if (STATE_ROOT / t).exists()]
    finally:
        proc.kill()
        _cleanup(tags)


def test_switch_stops_when_its_ports_vanish() -> None:
    """netkv-switch on two veth ends whose peers are deleted: it says so and
    exits instead of spinning on POLLERR."""
    from netkv.native import program_path

    names = [f"nkfz{i}" for i in range(2)]
    for i, name in enumerate(names):
        subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", f"{name}p"],
                       check=True)
        subprocess.run(["ip", "link", "set", name, "up"], check=True)
        subprocess.run(["ip", "link", "set", f"{name}p", "up"], check=True)
    sw = subprocess.Popen([str(program_path("netkv-switch")), "--protocol", "hash",
                           "--servers", "1", "--clients", "1",
                           *[a for n in names for a in ("--port", n)]],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        assert sw.poll() is None, sw.communicate()
        for name in names:
            subprocess.run(["ip", "link", "del", f"{name}p"], check=True)
        _, err = sw.communicate(timeout=5)
        assert "is gone" in err, err
    finally:
        sw.kill()
        for name in names:
            subprocess.run(["ip", "link", "del", name], capture_output=True)


BAD_CONTROL = [
    "fault all loss=nan", "fault all loss=inf", "fault all loss=-0.1", "fault all loss=1.5",
    "fault all dup=NaN", "fault all reorder=2", "fault all loss=", "fault all delay_us=inf",
    "fault all delay_us=1e300", "fault all reorder_us=-1", "fault 99 loss=0.1",
    "fault -1 loss=0.1", "fault all loss=0.1x", "reg_write nope 0 1", "reg_read ver_next 99999999999",
    "table_add rkeys 1", "mcast_set 999999 1,2", "counters extra", "nosuchcommand",
]


def test_control_socket_refuses_every_bad_value(tmp_path: Path) -> None:
    """Each bad command (NaN, inf, negative, out of range, malformed) gets an
    ``err`` line, and the switch lives on."""
    from netkv.drivers.base import DriverError
    from netkv.drivers.netkv_switch import NetkvSwitchDriver
    from netkv.native import program_path

    names = ["nkfc0", "nkfc1"]
    for name in names:
        subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", f"{name}p"],
                       check=True)
        for end in (name, f"{name}p"):
            subprocess.run(["ip", "link", "set", end, "up"], check=True)
    sock = tmp_path / "sw.sock"
    sw = subprocess.Popen([str(program_path("netkv-switch")), "--protocol", "pegasus",
                           "--servers", "1", "--clients", "1", "--ctl", str(sock),
                           *[a for n in names for a in ("--port", n)]],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        drv = NetkvSwitchDriver.wait(sock)
        drv.set_fault("all", loss=0.25)  # a valid setting is taken
        for line in BAD_CONTROL:
            with pytest.raises(DriverError):
                drv.request(line)
        assert drv.ping() is not None and sw.poll() is None
        drv.set_fault("all", loss=0.0)
    finally:
        sw.terminate()
        sw.communicate(timeout=5)
        for name in names:
            subprocess.run(["ip", "link", "del", name], capture_output=True)


def _tags_of_children(parent: int) -> set[str]:
    """State folders of the runs whose owner is a child of ``parent`` (a
    sweep's joblib workers), read while they are alive."""
    tags: set[str] = set()
    if STATE_ROOT.is_dir():
        for folder in STATE_ROOT.iterdir():
            try:
                owner = json.loads((folder / "state.json").read_text())["owner"]
            except (OSError, ValueError, KeyError):
                continue
            stat = procstat.fields(owner)
            if stat is not None and int(stat[procstat.PPID]) == parent:
                tags.add(folder.name)
    return tags


def test_ctrl_c_on_a_pooled_sweep_leaves_no_rack(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) on a
    2-job sweep in joblib workers once a kvclient runs: joblib kills its
    workers at once, mid-teardown; the command removes what they left (the
    old code left state folders, sometimes links, in 2 of 3 runs)."""
    out = tmp_path / "sweep"
    proc = subprocess.Popen([*RUN, "-m", "alpha=0.9,0.99", "hydra.launcher.n_jobs=2",
                             f"out={out}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    _ctrl_c_leaves_no_rack(proc, "netkv: interrupted: ")


def _ctrl_c_leaves_no_rack(proc: subprocess.Popen[str], said: str) -> None:
    """SIGINT to the process group of ``proc`` (a command pooling its runs in
    joblib workers, in a session of its own) once one of its kvclients runs:
    exit 130, one line on stderr, starting with ``said``, and nothing of its
    workers' racks 3 s after the exit."""
    tags: set[str] = set()
    try:
        _wait_for_clients(proc, tags, 120, _tags_of_children)
        tags |= _tags_of_children(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, err
        assert lines[0].startswith(said), err
        links, procs = _gone_within(tags, 3.0)
        assert not procs and not links, (procs, links)
        assert not [t for t in tags if (STATE_ROOT / t).exists()], tags
    finally:
        if proc.poll() is None:   # the workers too: they are in its session
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        _cleanup(tags)


# a figure of two series, two x values, one fixed-load point per cell (no SLO
# reference before the pool): four Mininet runs, two at once
FIGURE = """\
description: two Mininet runs at once (test_mininet_lifecycle)
overrides: [target=mininet, servers=2, clients=1, keys=20000, duration=0.5]
load_rps: 2000
x: {key: alpha, values: [0.9, 0.99]}
series: {hash: [protocol=hash], pegasus: [protocol=pegasus]}
"""


def test_ctrl_c_on_a_figure_with_two_jobs_leaves_no_rack(tmp_path: Path) -> None:
    """Ctrl-C on `reproduce --jobs 2` of a Mininet figure once a kvclient
    runs: the same one line and exit 130 as a sweep's, and nothing of its
    workers' racks left (reproduce.run_all's pool goes through
    interrupts.joblib_workers as the sweep's does)."""
    from netkv.config.core import conf_dir

    conf = tmp_path / "conf"   # the checkout's conf/, and experiments/ beside it
    conf.mkdir()
    for entry in conf_dir().iterdir():
        (conf / entry.name).symlink_to(entry)
    (tmp_path / "experiments" / "lifecycle").mkdir(parents=True)
    (tmp_path / "experiments" / "lifecycle" / "two.yaml").write_text(FIGURE)
    out = tmp_path / "figure"
    proc = subprocess.Popen([sys.executable, "-m", "netkv", "reproduce", "lifecycle/two",
                             "--jobs", "2", "--out", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "NETKV_CONF_DIR": str(conf)})
    _ctrl_c_leaves_no_rack(proc, f"netkv: interrupted: every finished point is kept in {out} "
                                 f"(run the same command with --out {out} to resume)")
