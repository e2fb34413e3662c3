"""target=testbed target.switch=tofino on the namespace rack (netkv.testbed.netns).

No Tofino SDE exists here and none may be installed: the switch host gets a
FAKE SDE (tests/fakes/sde: ``run_switchd.sh`` starting a child named
bf_switchd that answers HTTP/2 on bf_switchd's P4Runtime port, and
``install/bin/bf-p4c`` writing placeholder output), named by
``target.tofino.sde`` (the rack's hosts share this machine's file system).
Real: the SSH checks, the push of p4src/ and the compile's command there,
the fetch of its output, the push back beside the switch, the lifeline, the
forward (its bytes cross the rack's real SSH) and the clean-up. Faked here:
p4runtime-shell's presence and ``connect`` (it reads through the forward).
Never run against a real Tofino. Needs what tests/test_testbed.py needs."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from netkv.backends.tofino import TofinoBackend
from netkv.config.compose import load
from netkv.drivers import tofino
from netkv.testbed.inventory import Inventory

from test_testbed import REASON, SMALL, leftovers, rack  # noqa: F401 - the rack fixture
from test_testbed_bmv2 import (assert_clean_kills, ctrl_c_once_the_switch_runs, refusal,
                               ssh_children, switch_index)

FAKE_SDE = Path(__file__).parent / "fakes" / "sde"
DEV_PORTS = [str(128 + 4 * i) for i in range(21)]     # Tofino device ports, one per node
pytestmark = [pytest.mark.testbed]
needs_rack = pytest.mark.skipif(REASON is not None, reason=REASON or "")


def tofino_cfg(sde: Path, protocol: str = "hash") -> list[str]:
    ports = ",".join(f'"{p}"' for p in DEV_PORTS)
    return [*SMALL, f"protocol={protocol}", "target.switch=tofino",
            f"target.tofino.sde={sde}", f"inventory.hosts.{switch_index()}.ports=[{ports}]"]


@pytest.fixture
def fake_here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """This machine's side faked: p4runtime-shell 'present', the compile
    cache in tmp_path, and ``connect`` reading the fake's answer through
    the forward (what it read is returned). Afterwards the fake's SIGTERM
    record (beside the run folders) goes."""
    read: dict[str, Any] = {}
    monkeypatch.setattr(tofino, "missing_driver", lambda: [])
    monkeypatch.setenv("NETKV_P4_CACHE", str(tmp_path / "cache"))

    real_ready = TofinoBackend.ready

    def ready(self: TofinoBackend, proc: Any, folder: Path) -> None:
        real_ready(self, proc, folder)
        read.setdefault("order", []).append("ready")

    def connect(self: TofinoBackend, folder: Path, with_controller: bool) -> None:
        read.setdefault("order", []).append("connect")
        host, _, port = self.endpoint.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(tofino.H2_PREFACE)
            read["answer"] = s.makefile("rb").read()
        read["endpoint"] = self.endpoint
        read["program"] = self.program()

    monkeypatch.setattr(TofinoBackend, "ready", ready)
    monkeypatch.setattr(TofinoBackend, "connect", connect)
    yield read
    sw = load(SMALL).inventory.with_role("switch")[0]
    (Path(sw.workdir) / "fake-switchd.terms").unlink(missing_ok=True)


def refused_with_a_failing(tmp_path: Path, broken: str, words: str, code: int) -> str:
    """The testbed started on a copy of the FAKE SDE whose ``broken`` piece
    (run_switchd.sh, install/bin/bf-p4c) says ``words`` on stderr and exits
    ``code``: refused, in one line (returned)."""
    from netkv.targets.testbed import TestbedTarget

    sde = tmp_path / "sde"
    for rel in ("run_switchd.sh", "install/bin/bf-p4c"):
        (sde / rel).parent.mkdir(parents=True, exist_ok=True)
        if rel != broken:
            (sde / rel).symlink_to(FAKE_SDE / rel)
            continue
        (sde / rel).write_text(f"#!/bin/sh\necho '{words}' >&2\nexit {code}\n")
        (sde / rel).chmod(0o755)
    with pytest.raises(Exception) as e:
        TestbedTarget(load(tofino_cfg(sde)))
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


@needs_rack
def test_without_the_sde_on_the_switch_host_is_one_line(
        rack: Inventory, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    """Real: no SDE at /nonexistent/sde on the switch host. One line naming
    the host and both paths, exit 2, nothing left; the fake SDE's folder
    passes that check (and this machine's p4runtime-shell, absent here, is
    refused next: a line naming no host)."""
    err = refusal([*tofino_cfg(Path("/nonexistent/sde")), f"out={tmp_path / 'a'}"], capsys)
    assert "switch host 'sw'" in err and "/nonexistent/sde/run_switchd.sh" in err, err
    assert "/nonexistent/sde/install/bin/bf-p4c" in err, err
    err = refusal([*tofino_cfg(FAKE_SDE), f"out={tmp_path / 'b'}"], capsys)
    assert "'sw'" not in err, err
    assert "p4runtime-shell" in err and "on this machine" in err, err
    assert not leftovers(rack) and not ssh_children()


@needs_rack
def test_a_fake_sde_compiles_and_starts_on_the_switch_host_and_is_reached_through_ssh(
        rack: Inventory, fake_here: dict[str, Any]) -> None:  # noqa: F811
    """With the FAKE SDE on the switch host: bf-p4c ran there on the pushed
    TNA source with the CPU port's define, its output came here (the device
    config packs its binary) and went back beside the switch; run_switchd.sh
    got the SDE's environment, the conf in the run folder and --skip-p4, and
    leads its process group; the fake's HTTP/2 answer arrives here through
    the SSH forward (another port here than 9559), the rack having waited
    for that answer (``ready``) before ``connect``; after close its
    bf_switchd child got SIGTERM (the lifeline signals the script's
    process group) and is gone with it, and nothing runs, there or here."""
    from netkv.targets.testbed import TestbedTarget
    from netkv.testbed import netns

    target = TestbedTarget(load(tofino_cfg(FAKE_SDE)))
    try:
        rrun = Path(target.rack.remote_run["sw"])
        seen = json.loads((rrun / "fake-switchd.json").read_text())  # one file system here
        prov = target.provenance()["switch"]
        args = (rrun / "p4out" / "fake-bf-p4c.args").read_text()
        sw_ns = netns.ns_of(rack, rack.with_role("switch")[0])
        procs = subprocess.run(["ip", "netns", "pids", sw_ns], capture_output=True,
                               text=True).stdout.split()
        names = [Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0] for p in procs
                 if Path(f"/proc/{p}").exists()]
    finally:
        target.close()
    assert f"{rrun}/p4src/hash/tna/hash.p4" in args and "-DNETKV_TNA_CPU_PORT=64" in args
    assert seen["argv"] == ["-c", f"{rrun}/hash.conf", "--skip-p4"]
    assert (seen["sde"], seen["sde_install"]) == (str(FAKE_SDE), f"{FAKE_SDE}/install")
    assert seen["group_leader"]
    assert {"hash.conf", "hash.p4info.txtpb", "tofino.bin", "context.json"} <= set(seen["files"])
    prog = fake_here["program"]
    assert prov == {"sde": str(FAKE_SDE), "compiled_on": "host 'sw'",
                    "program": prog.out_dir.name,
                    "defines": {"NETKV_TNA_CPU_PORT": 64, "NETKV_TNA_RECIRC_PORT": 68}}
    assert prog.out_dir.name.startswith("tofino-hash-")
    assert prog.device_config_path.read_bytes()[4:8] == b"hash"
    assert b"BIN " in prog.device_config_path.read_bytes()
    assert fake_here["answer"] == bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]) + b"fake bf_switchd 9559\n"
    assert fake_here["order"] == ["ready", "connect"]      # the rack waited for it first
    assert fake_here["endpoint"].startswith("127.0.0.1:")
    assert not fake_here["endpoint"].endswith(":9559")
    assert b"bf_switchd" in names          # the script's child ran there
    # and got SIGTERM from the lifeline (its process group), not only clean's SIGKILL
    terms = rrun.parent / "fake-switchd.terms"
    assert rrun.name in terms.read_text().split()
    assert not leftovers(rack) and not ssh_children()


@needs_rack
def test_a_fake_switchd_that_exits_at_once_is_one_line(
        rack: Inventory, fake_here: dict[str, Any], tmp_path: Path) -> None:  # noqa: F811
    """A FAKE run_switchd.sh that exits before listening: one line naming the
    switch host and its log's end, nothing left there or here."""
    msg = refused_with_a_failing(tmp_path, "run_switchd.sh",
                                 "bf_switchd: ERROR: no Tofino device found", 3)
    assert "switch on host 'sw' exited (3)" in msg, msg
    assert "no Tofino device found" in msg
    assert "answer" not in fake_here
    assert not leftovers(rack) and not ssh_children()


@needs_rack
def test_ctrl_c_after_the_fake_switchd_started_leaves_nothing(
        rack: Inventory, fake_here: dict[str, Any],
        monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Ctrl-C once the FAKE switchd answers through its forward (during the
    servers' start): the script, its bf_switchd child, the forward and the
    run folders go."""
    assert ctrl_c_once_the_switch_runs(tofino_cfg(FAKE_SDE), monkeypatch) == [1]  # its forward
    assert fake_here["order"] == ["ready"]      # it answered through the forward first
    assert not leftovers(rack) and not ssh_children()


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_an_absolute_program_on_the_switch_host_must_be_an_executable_file(
        tmp_path: Path, shell: str) -> None:
    """What the switch host's check runs (dash or bash as the login shell):
    a missing or non-executable path and a folder are missing, an
    executable file and a name on PATH are not."""
    from netkv.testbed.ssh import missing_script

    ok, plain = tmp_path / "run_switchd.sh", tmp_path / "bf-p4c"
    ok.write_text("#!/bin/sh\n")
    ok.chmod(0o755)
    plain.write_text("#!/bin/sh\n")
    plain.chmod(0o644)
    asked = [str(ok), str(plain), str(tmp_path / "absent"), str(tmp_path), "sh"]
    out = subprocess.run([shell, "-c", missing_script(asked)], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == [str(plain), str(tmp_path / "absent"), str(tmp_path)]


def test_clean_kills_a_switchd_script_and_its_child_by_name(tmp_path: Path) -> None:
    """`netkv clean` finds run_switchd.sh (a script: its name is the
    interpreter's first argument) and bf_switchd whose command lines name a
    dead run's folder; a process of another name stays."""
    folder = tmp_path / "run-nkdead"
    folder.mkdir()
    script = folder / "run_switchd.sh"
    script.write_text("#!/bin/sh\nsleep 60\n")
    script.chmod(0o755)
    by_script = subprocess.Popen(["sh", str(script), "-c", f"{folder}/hash.conf"])
    sleeper = f"{sys.executable} -c 'import time; time.sleep(60)' {folder}/x"
    child = subprocess.Popen(["bash", "-c", f"exec -a bf_switchd {sleeper}"])
    other = subprocess.Popen(["bash", "-c", f"exec -a other-program {sleeper}"])
    assert_clean_kills(folder, [by_script, child], other)


@needs_rack
def test_a_failing_bf_p4c_on_the_switch_host_is_one_line(
        rack: Inventory, fake_here: dict[str, Any], tmp_path: Path) -> None:  # noqa: F811
    """A FAKE bf-p4c that fails there: one line naming the host, the
    compiler's last words and its log there; no switch started, nothing
    cached here, nothing left."""
    msg = refused_with_a_failing(tmp_path, "install/bin/bf-p4c",
                                 "error: table node_fwd: stage overflow", 1)
    assert "bf-p4c on host 'sw' failed on hash.p4 (exit 1)" in msg, msg
    assert "stage overflow" in msg and "/bf-p4c.log)" in msg, msg
    assert "order" not in fake_here
    cache = tmp_path / "cache"
    assert not cache.exists() or not any(cache.iterdir())
    assert not leftovers(rack) and not ssh_children()


@needs_rack
def test_netkv_clean_kills_a_dead_runs_switchd_on_the_switch_host(
        rack: Inventory, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    """A FAKE switchd (script and bf_switchd child) left on the switch host
    by a run that died before writing its pid file: `netkv clean
    --inventory` finds both there by name and folder and kills them."""
    import time

    from netkv.cli import main
    from netkv.testbed import netns

    sw = rack.with_role("switch")[0]
    dead = Path(sw.workdir) / "run-nkdeadsw1"
    dead.mkdir(parents=True, exist_ok=True)
    (dead / "hash.conf").write_text("{}\n")
    started = subprocess.Popen(
        ["ip", "netns", "exec", netns.ns_of(rack, sw), "setsid",
         str(FAKE_SDE / "run_switchd.sh"), "-c", str(dead / "hash.conf"), "--skip-p4"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def running() -> list[bytes]:
        out = []
        for pid in subprocess.run(["ip", "netns", "pids", netns.ns_of(rack, sw)],
                                  capture_output=True, text=True).stdout.split():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if str(dead).encode() in cmd:
                out.append(cmd.split(b"\0")[0])
        return out

    try:
        for _ in range(100):
            if b"bf_switchd" in running():
                break
            time.sleep(0.05)
        assert b"bf_switchd" in running() and len(running()) == 2
        assert main(["clean", "--inventory", "netns-rack"]) == 0
        assert "run-nkdeadsw1" in capsys.readouterr().out
        assert started.wait(timeout=10) == -9
        for _ in range(100):
            if not running():
                break
            time.sleep(0.05)
        assert not running() and not dead.exists()
    finally:
        if started.poll() is None:
            started.kill()
            started.wait()
