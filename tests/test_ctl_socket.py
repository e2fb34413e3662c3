"""netkv-switch's control socket (docs/security.md, issue #21): it refuses a
path that exists and is not a socket (one line; the file is left alone) and
is created owner-only (0600). Also the Mininet run folders: owner-only."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from netkv.native import NativeBuildMissing, program_path


def _switch() -> str:
    try:
        return str(program_path("netkv-switch"))
    except NativeBuildMissing as exc:
        pytest.skip(str(exc))


needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="netkv-switch opens an AF_PACKET port (needs root)")


def _cmd(ctl: Path) -> list[str]:
    return [_switch(), "--protocol", "hash", "--servers", "1", "--clients", "0",
            "--port", "lo", "--ctl", str(ctl)]


@needs_root
def test_ctl_refuses_an_existing_file_and_leaves_it(tmp_path: Path) -> None:
    victim = tmp_path / "important.txt"
    victim.write_text("keep me\n")
    res = subprocess.run(_cmd(victim), capture_output=True, text=True, timeout=20)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "exists and is not a socket" in lines[0], res.stderr
    assert str(victim) in lines[0]
    assert victim.read_text() == "keep me\n"
    # a directory is refused the same way
    res = subprocess.run(_cmd(tmp_path), capture_output=True, text=True, timeout=20)
    assert res.returncode != 0 and "not a socket" in res.stderr and tmp_path.is_dir()


@needs_root
def test_ctl_socket_is_owner_only_and_replaces_a_stale_socket(tmp_path: Path) -> None:
    ctl = tmp_path / "sw.sock"
    for _ in range(2):  # the second start finds the first one's stale socket
        old_umask = os.umask(0)  # the widest umask: the mode must not come from it
        try:
            p = subprocess.Popen(_cmd(ctl), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        finally:
            os.umask(old_umask)
        try:
            deadline = time.monotonic() + 10
            while not ctl.exists() and time.monotonic() < deadline and p.poll() is None:
                time.sleep(0.05)
            st = ctl.lstat()
            assert stat.S_ISSOCK(st.st_mode)
            assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
        finally:
            p.send_signal(signal.SIGKILL)  # leaves the socket behind, as a crash would
            p.wait(timeout=10)
        assert ctl.exists()


def test_mininet_run_folders_are_owner_only(tmp_path: Path, monkeypatch) -> None:
    from netkv.mininet import cleanup

    monkeypatch.setattr(cleanup, "STATE_ROOT", tmp_path / "state")
    old_umask = os.umask(0)
    try:
        state = cleanup.RunState.create()
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(state.folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700


@needs_root
def test_netkv_switch_has_the_simulators_multicast_groups(tmp_path: Path) -> None:
    """netkv-switch had 1,024 multicast groups, the simulator 4,096: a
    protocol whose groups fit the simulator could be refused on Mininet. One
    constant now (spec/constants.toml MAX_MCAST_GROUPS); both refuse the
    first group past it in one line naming what is allowed."""
    from netkv.config.compose import load
    from netkv.constants import MAX_MCAST_GROUPS
    from netkv.drivers.base import DriverError
    from netkv.drivers.netkv_switch import NetkvSwitchDriver
    from netkv.sim.engine import SimEngine, Workload

    last = MAX_MCAST_GROUPS - 1
    assert last >= 4095
    ctl = tmp_path / "sw.sock"
    p = subprocess.Popen(_cmd(ctl), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        drv = NetkvSwitchDriver.wait(ctl)
        drv.mcast_set(last, [0])
        assert drv.request(f"mcast_get {last}") == "0"
        with pytest.raises(DriverError) as exc:
            drv.mcast_set(last + 1, [0])
        assert str(exc.value) == f"mcast_set: group {last + 1} (allowed: 0..{last})"
        drv.close()
    finally:
        p.terminate()
        p.wait(timeout=10)
    cfg = load(["servers=2", "clients=1", "keys=100"])
    with Workload.from_config(cfg) as wl, SimEngine(cfg, wl, 1.0, 1) as eng:
        eng.mcast_set(last, [0, 1])
        with pytest.raises(ValueError) as exc2:
            eng.mcast_set(last + 1, [0, 1])
    assert str(exc2.value) == (f"multicast group {last + 1}: out of range (allowed: 0..{last}, "
                               "as on netkv-switch)")
