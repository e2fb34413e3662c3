"""Ctrl-C in the first seconds of a sweep or a figure (docs/robustness.md).

A terminal's Ctrl-C reaches the whole foreground process group: the command
and its joblib (loky) workers. Workers still starting printed their
KeyboardInterrupt tracebacks (interpreter start-up, joblib's imports, the
job's unpickling) around the command's one line. Each case starts the command
in a session of its own and sends SIGINT to the group, as a terminal does,
once a worker process exists or once a point is finished: one line, exit
130, no traceback, finished points on disk.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netkv.interrupts import interruptible, workers_start_deaf

pytestmark = pytest.mark.slow

# points spread over ~2.5 s after the workers start (2 cores, niced)
SWEEP = ["run", "-m", "alpha=0.9,1.2", "servers=4", "keys=2000", "duration=3",
         "hydra.launcher.n_jobs=2"]
FIGURE = ["reproduce", "pegasus/fig7", "--jobs", "2", "servers=4", "keys=2000",
          "duration=0.05"]


def _workers(session: int) -> int:
    """loky worker processes in the session (the command's, no other)."""
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getsid(int(entry)) != session:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                count += b"popen_loky_posix" in f.read()
        except OSError:   # gone meanwhile
            continue
    return count


def _points(out: Path) -> int:
    return len(list(out.glob("**/points.d/*/point.parquet")))


def _ctrl_c(args: list[str], out: Path, when: str, after_s: float) -> tuple[int, str]:
    """Run ``python -m netkv *args``, SIGINT its process group ``after_s``
    after ``when`` ("workers": one exists; "point": one is finished)."""
    proc = subprocess.Popen([sys.executable, "-m", "netkv", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (_workers(proc.pid) if when == "workers" else _points(out)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        time.sleep(after_s)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, err


@pytest.mark.parametrize(("when", "after_s"), [("workers", 0.2), ("workers", 0.5),
                                               ("point", 0.0)])
def test_ctrl_c_early_in_a_sweep_is_one_line(when: str, after_s: float, tmp_path: Path) -> None:
    """Failed on the old code at workers+0.2 and +0.5: a worker's
    KeyboardInterrupt traceback from site's or joblib's imports."""
    out = tmp_path / "sweep"
    code, err = _ctrl_c([*SWEEP, f"out={out}"], out, when, after_s)
    kept = _points(out)
    assert code == 130 and "Traceback" not in err, err
    assert err.strip() == (f"netkv: interrupted: {kept} finished point(s) kept in {out} "
                           f"(run the sweep again with out={out} to resume)"), err
    assert when != "point" or kept >= 1


def test_ctrl_c_early_in_a_figure_is_one_line(tmp_path: Path) -> None:
    """Failed on the old code: the workers' tracebacks (joblib's imports)."""
    out = tmp_path / "fig"
    code, err = _ctrl_c([*FIGURE, "--out", str(out)], out, "workers", 0.3)
    assert code == 130 and "Traceback" not in err, err
    assert err.strip() == (f"netkv: interrupted: every finished point is kept in {out} (run "
                           f"the same command with --out {out} to resume)"), err
    assert _points(out) >= 1   # the SLO reference, measured before the workers


def test_workers_start_deaf_and_a_job_hears() -> None:
    """A process started inside workers_start_deaf has SIGINT blocked (so a
    worker starting is not interrupted); interruptible unblocks it for a job
    and restores the mask after; the command's own Ctrl-C still arrives."""
    def blocked_in_child() -> bool:
        status = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True)
        mask = next(ln for ln in status.stdout.splitlines() if ln.startswith("SigBlk:"))
        return bool(int(mask.split()[1], 16) & (1 << (signal.SIGINT - 1)))

    assert not blocked_in_child()
    with workers_start_deaf():
        assert blocked_in_child()
        with interruptible():
            assert not blocked_in_child()
        assert blocked_in_child()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)   # to the process, as a terminal sends it
            for _ in range(100):   # the listener thread takes it when scheduled
                time.sleep(0.05)
    assert not blocked_in_child()


_WEAKREF_CTRL_C = """
import sys, weakref
from netkv.interrupts import interruptible

class Thing:
    pass

def interrupted(_):
    raise KeyboardInterrupt

def drop():
    thing = Thing()
    ref = weakref.ref(thing, interrupted)
    del thing
    assert ref() is None

if sys.argv[1] == "job":
    with interruptible():
        drop()
    sys.stderr.write("after\\n")
    drop()   # the hook is back after the job
else:
    drop()
"""


@pytest.mark.parametrize("where", ["job", "outside"])
def test_a_ctrl_c_in_a_weakref_callback_of_a_job_prints_nothing(where: str) -> None:
    """CI once: a worker's Ctrl-C landed in a weakref callback, which Python
    cannot raise from, and printed "Exception ignored in ... Traceback ...
    KeyboardInterrupt" beside the command's one line. Inside a job it is
    not printed; outside one (the old code everywhere) it is."""
    p = subprocess.run([sys.executable, "-c", _WEAKREF_CTRL_C, where], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    inside, _, after = p.stderr.partition("after\n")
    if where == "job":
        assert inside == "" and "KeyboardInterrupt" in after, p.stderr
    else:
        assert "Exception ignored" in p.stderr and "KeyboardInterrupt" in p.stderr, p.stderr


def _fails(_: int) -> None:
    raise ValueError("a run's error")


def test_every_joblib_pool_removes_what_killed_workers_left(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    """A figure's runs (reproduce.run_all), a sweep's jobs and Pool.map share
    one section (interrupts.joblib_workers): when the pool stops (here a
    run's error; Ctrl-C alike) the command removes its killed workers' racks,
    Mininet's and the testbed's. run_all had only the Ctrl-C part, so
    `reproduce --jobs 2` on Mininet left them."""
    import io

    from rich.console import Console

    from netkv.experiments.pool import Pool
    from netkv.experiments.reproduce import run_all
    from netkv.mininet import cleanup
    from netkv.testbed import clean

    swept: list[str] = []
    monkeypatch.setattr(cleanup, "clean_children",
                        lambda wait_s=5.0: swept.append("mininet") or ([], []))
    monkeypatch.setattr(clean, "clean_children",
                        lambda state_root, wait_s=5.0: swept.append("testbed") or ([], []))
    calls = [(1,), (2,)]
    for run in (lambda: run_all(_fails, calls, ["a", "b"], Pool(2), Console(file=io.StringIO()),
                                tmp_path),
                lambda: Pool(2).map(_fails, calls, tmp_path)):
        with pytest.raises(ValueError, match="a run's error"):
            run()
    assert swept == ["mininet", "testbed"] * 2


def test_a_failing_cleanup_does_not_hide_the_error_that_stopped_the_pool(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The killed workers' clean-up ran in the pool's ``except`` path: an
    error it raised (a host unreachable over SSH during Ctrl-C) replaced the
    KeyboardInterrupt, so the command reported the SSH error (exit 2), not
    the interruption, and skipped the testbed's clean-up after Mininet's."""
    from netkv.interrupts import workers_racks_removed
    from netkv.mininet import cleanup
    from netkv.testbed import clean
    from netkv.testbed.ssh import RemoteError

    def unreachable(wait_s: float = 5.0) -> tuple[list[str], list[str]]:
        raise RemoteError("host 'h1' (10.0.0.1): unreachable\n(no answer in 15 s)")

    swept: list[str] = []
    monkeypatch.setattr(cleanup, "clean_children", unreachable)
    monkeypatch.setattr(clean, "clean_children",
                        lambda state_root, wait_s=5.0: swept.append("testbed") or ([], []))
    with pytest.raises(KeyboardInterrupt):
        with workers_racks_removed():
            raise KeyboardInterrupt
    assert swept == ["testbed"]
    assert capsys.readouterr().err == (
        "netkv: removing the killed workers' Mininet runs failed: RemoteError: host 'h1' "
        "(10.0.0.1): unreachable (no answer in 15 s) (`python -m netkv clean`, with "
        "`--inventory NAME` for a testbed run's, removes them)\n")

    def interrupted(state_root: Path, wait_s: float = 5.0) -> tuple[list[str], list[str]]:
        raise KeyboardInterrupt   # a second Ctrl-C during the clean-up

    monkeypatch.setattr(cleanup, "clean_children", lambda wait_s=5.0: ([], []))
    monkeypatch.setattr(clean, "clean_children", interrupted)
    with pytest.raises(ValueError, match="a run's error"):
        with workers_racks_removed():
            _fails(1)
    assert capsys.readouterr().err.startswith(
        "netkv: removing the killed workers' testbed runs failed: KeyboardInterrupt: interrupted")


def test_a_host_skipped_by_the_killed_workers_clean_up_is_a_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """clean_inventory returns a skipped host as a ``skipped host ...``
    entry, but the killed workers' clean-up kept only the runs left alive and
    dropped it: the host's runs stayed behind, silently."""
    from netkv.interrupts import workers_racks_removed
    from netkv.mininet import cleanup
    from netkv.testbed import clean

    monkeypatch.setattr(cleanup, "clean_children", lambda wait_s=5.0: ([], []))
    monkeypatch.setattr(clean, "clean_children", lambda state_root, wait_s=5.0: (
        ["a:/w/run-nkdead", "skipped host 'h1' (10.0.0.1): unreachable\n(no answer in 15 s)"],
        []))
    with pytest.raises(KeyboardInterrupt):
        with workers_racks_removed():
            raise KeyboardInterrupt
    assert capsys.readouterr().err == (
        "netkv: removing the killed workers' testbed runs skipped host 'h1' (10.0.0.1): "
        "unreachable (no answer in 15 s) (`python -m netkv clean --inventory NAME` removes its "
        "runs once it answers)\n")


def test_a_host_failing_mid_clean_up_is_skipped_not_raised(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """clean_inventory caught a host's failure only on its first command: a
    kill that timed out on one host raised out of the killed workers'
    clean-up (hiding the error that stopped the pool) and left the other
    hosts' runs; an SSH master that did not answer ``-O exit`` in 10 s did
    the same from ``Ssh.close`` in a ``finally``."""
    import subprocess

    from netkv.testbed import clean, ssh
    from netkv.testbed.inventory import Inventory
    from netkv.testbed.ssh import RemoteError

    class FakeSsh:
        def __init__(self, host, known_hosts, control_dir):  # type: ignore[no-untyped-def]
            self.host = host

        def check(self) -> None:
            pass

        def run(self, command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
            if command.startswith("ls "):
                return subprocess.CompletedProcess([], 0, f"{self.host.workdir}/run-nkdead\n", "")
            if self.host.name == "a":
                raise RemoteError(f"host 'a': `{command[:20]}` took more than 60 s")
            return subprocess.CompletedProcess([], 0, "", "")

        def close(self) -> None:
            closed.append(self.host.name)

    closed: list[str] = []
    monkeypatch.setattr(clean, "Ssh", FakeSsh)
    host = {"ssh": "x", "key": "k", "roles": ["server"], "workdir": "/w"}
    inv = Inventory(name="t", hosts=[{**host, "name": "a"}, {**host, "name": "b"}])
    removed = clean.clean_inventory(inv, tmp_path / "state")
    assert removed == ["skipped host 'a': `for f in /w/run-nkde` took more than 60 s",
                       "b:/w/run-nkdead"], removed
    assert closed == ["a", "b"]

    def hangs(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise subprocess.TimeoutExpired(args[0], 10)

    monkeypatch.setattr(ssh.subprocess, "run", hangs)
    ssh.Ssh(inv.hosts[0], "", tmp_path).close()   # no TimeoutExpired
