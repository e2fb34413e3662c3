"""target=testbed target.switch=bmv2 on the namespace rack (netkv.testbed.netns).

No BMv2 exists here: the refusal is real (simple_switch_grpc is absent
from the switch host), and the start, the push and the SSH port forwarding
are exercised with a FAKE simple_switch_grpc (tests/fakes/) put first on
the switch host's PATH through the inventory's ``path``; this machine's
p4c and P4Runtime client are faked too (the compile returns placeholder
files, ``connect`` only reads the fake's line through each forward). The
forwarded bytes are real: they cross the rack's real SSH. Needs what
tests/test_testbed.py needs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from netkv.backends.bmv2 import Bmv2Backend
from netkv.config.compose import ConfigError, load
from netkv.drivers import bmv2
from netkv.testbed.clean import kill_and_remove, program_names
from netkv.testbed.inventory import Inventory

from test_testbed import REASON, SMALL, leftovers, rack  # noqa: F401 - the rack fixture

FAKES = Path(__file__).parent / "fakes"
pytestmark = [pytest.mark.testbed]
needs_rack = pytest.mark.skipif(REASON is not None, reason=REASON or "")


def switch_index() -> int:
    return next(i for i, h in enumerate(load(SMALL).inventory.hosts) if "switch" in h.roles)


def bmv2_cfg(path: Path | None, protocol: str = "hash") -> list[str]:
    extra = [f"+inventory.hosts.{switch_index()}.path=[{path}]"] if path is not None else []
    return [*SMALL, f"protocol={protocol}", "target.switch=bmv2", *extra]


def exit_code(argv: list[str]) -> int:
    """``netkv run`` as the command line does: its exit code (a refusal in
    the Hydra job raises SystemExit(2))."""
    from netkv.cli import main

    try:
        return main(["run", *argv])
    except SystemExit as exc:
        return int(exc.code or 0)


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``netkv run argv`` refused: exit 2 and one line, which is returned."""
    assert exit_code(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def ssh_children() -> list[str]:
    """This process's ssh children (forwards, lifelines) still running."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            if not d.name.isdigit() or int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) \
                    != os.getpid():
                continue
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if cmd and cmd[0] == b"ssh":
            out.append(b" ".join(cmd).decode(errors="replace")[:120])
    return out


@pytest.fixture
def fake_here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, list[str]]:
    """This machine's side faked: p4c-bm2-ss, simple_switch_CLI and
    p4runtime-shell 'present', the compile writing placeholder files, and
    ``connect`` reading one line through each forwarded port (what it read
    is returned)."""
    read: dict[str, list[str]] = {"lines": []}
    monkeypatch.setattr(bmv2, "missing_bmv2", lambda: [])

    def compile_cached(program: str, src: Path, defines: object = None,
                       cache_dir: object = None) -> bmv2.CompiledProgram:
        out = tmp_path / "p4out"
        out.mkdir(exist_ok=True)
        (out / f"{src.stem}.json").write_text('{"fake": "bmv2 json"}')
        (out / f"{src.stem}.p4info.txtpb").write_text("# fake p4info\n")
        return bmv2.CompiledProgram(program, out / f"{src.stem}.json",
                                    out / f"{src.stem}.p4info.txtpb", {})

    def connect(self: Bmv2Backend, folder: Path, with_controller: bool) -> None:
        for port in (int(self.endpoint.grpc_addr.rpartition(":")[2]), self.endpoint.thrift_port):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                read["lines"].append(s.makefile().readline().strip())
        read["listen"] = [str(p) for p in self.tcp_ports()]
        read["local"] = [self.endpoint.grpc_addr, str(self.endpoint.thrift_port)]

    monkeypatch.setattr(bmv2, "compile_cached", compile_cached)
    monkeypatch.setattr(Bmv2Backend, "connect", connect)
    return read


@needs_rack
def test_bmv2_without_simple_switch_grpc_on_the_switch_host_is_one_line(
        rack: Inventory, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    """Real: the namespace rack's switch host has no simple_switch_grpc. The
    refusal names the host and the program, exit 2, nothing left; with the
    FAKE's folder on the host's path the same check passes (and the next one,
    this machine's p4c, refuses instead: it names no host)."""
    err = refusal([*bmv2_cfg(None), f"out={tmp_path / 'a'}"], capsys)
    assert "switch host 'sw'" in err and "has no simple_switch_grpc" in err, err
    err = refusal([*bmv2_cfg(FAKES), f"out={tmp_path / 'b'}"], capsys)
    assert "'sw'" not in err, err
    assert "p4c-bm2-ss" in err and "on this machine" in err, err
    assert not leftovers(rack) and not ssh_children()


def test_an_inventory_path_must_be_absolute() -> None:
    with pytest.raises(ConfigError, match="path entry 'bin'"):
        load([*SMALL, f"+inventory.hosts.{switch_index()}.path=[bin]"])


@needs_rack
@pytest.mark.parametrize("protocol", ["hash", "starcache"])
def test_a_fake_simple_switch_grpc_starts_on_the_switch_ports_and_is_reached_through_ssh(
        rack: Inventory, fake_here: dict[str, list[str]], protocol: str) -> None:  # noqa: F811
    """With the FAKE simple_switch_grpc on the switch host: its command line
    has the rack's ports as netkv-switch numbers them (port i = the switch
    host's interface wired to node i: servers, then clients), gRPC and
    Thrift on the host's loopback; the compiled files are beside it; the
    lines it answers arrive here through the SSH forwards (other port
    numbers here than there); after close nothing runs, there or here.
    StarCache's program also gets the switch host's loop pair (lp0, lp1) on
    its plug-in's loop ports (out, in)."""
    from netkv.protocols import lookup as protocol_plugin
    from netkv.targets.testbed import TestbedTarget

    target = TestbedTarget(load(bmv2_cfg(FAKES, protocol)))
    try:
        rrun = Path(target.rack.remote_run["sw"])
        seen = json.loads((rrun / "fake-bmv2.json").read_text())  # one file system here
        argv = seen["argv"]
        grpc, thrift = fake_here["listen"]
        assert argv[:2] == ["--no-p4", "--device-id"]
        ports = [argv[i + 1] for i, a in enumerate(argv) if a == "-i"]
        # servers s0 s1, client c0 (wired to port 16), then any loop pair
        p4 = protocol_plugin(protocol).p4
        assert p4 is not None
        loop = [f"{p4.loop_ports[0]}@lp0", f"{p4.loop_ports[1]}@lp1"] if p4.loop_ports else []
        assert ports == ["0@p0", "1@p1", "2@p16", *loop]
        assert bool(loop) == (protocol == "starcache")
        assert argv[argv.index("--thrift-port") + 1] == thrift
        assert argv[argv.index("--grpc-server-addr") + 1] == f"127.0.0.1:{grpc}"
        assert argv[argv.index("--cpu-port") + 1] == str(bmv2.CPU_PORT)
        stem = Path(p4.source).stem
        assert {f"{stem}.json", f"{stem}.p4info.txtpb"} <= set(seen["files"])
        assert fake_here["lines"] == [f"fake simple_switch_grpc grpc {grpc}",
                                      f"fake simple_switch_grpc thrift {thrift}"]
        local_grpc, local_thrift = fake_here["local"]
        assert local_grpc.startswith("127.0.0.1:")
        assert {local_grpc.rpartition(":")[2], local_thrift}.isdisjoint({grpc, thrift})
    finally:
        target.close()
    assert not leftovers(rack) and not ssh_children()
    for port in (int(local_grpc.rpartition(":")[2]), int(local_thrift)):
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()


@needs_rack
def test_a_fake_simple_switch_grpc_that_exits_at_once_is_one_line(
        rack: Inventory, fake_here: dict[str, list[str]], tmp_path: Path) -> None:  # noqa: F811
    """A FAKE simple_switch_grpc that exits before listening (as BMv2 does on
    a port taken): one line naming the switch host and its log's end, no
    process or forward left."""
    from netkv.targets.testbed import TestbedTarget

    fake = tmp_path / "bin" / "simple_switch_grpc"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'fake simple_switch_grpc: cannot bind, exiting' >&2\n"
                    "exit 3\n")
    fake.chmod(0o755)
    with pytest.raises(Exception) as e:
        TestbedTarget(load(bmv2_cfg(fake.parent)))
    msg = str(e.value)
    assert "\n" not in msg and "switch on host 'sw' exited (3)" in msg, msg
    assert "cannot bind, exiting" in msg
    assert not fake_here["lines"]
    assert not leftovers(rack) and not ssh_children()


@needs_rack
def test_ctrl_c_after_the_fake_switch_started_leaves_nothing(
        rack: Inventory, fake_here: dict[str, list[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Ctrl-C once the FAKE switch runs and its ports are forwarded (during
    the servers' start): the fake, its forward and the run folders go."""
    assert ctrl_c_once_the_switch_runs(bmv2_cfg(FAKES), monkeypatch) == [1]  # its TCP forward
    assert not leftovers(rack) and not ssh_children()


def ctrl_c_once_the_switch_runs(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Start the testbed on ``argv`` and Ctrl-C it when the servers start (the
    switch started, its ports forwarded); how many forwards were up then."""
    from netkv.targets.testbed import TestbedTarget
    from netkv.testbed.rack import SshRack

    started: list[int] = []

    def interrupted(self: SshRack) -> None:
        started.append(len(self.forwards))
        raise KeyboardInterrupt

    monkeypatch.setattr(SshRack, "_start_servers", interrupted)
    with pytest.raises(KeyboardInterrupt):
        TestbedTarget(load(argv))
    return started


def test_clean_kills_a_switch_program_left_without_its_pid_file(tmp_path: Path) -> None:
    """`netkv clean` knows the back-ends' program names: a process named
    simple_switch_grpc whose command line names a dead run's folder goes,
    one of another name stays (killed here by the test)."""
    assert {"simple_switch_grpc", "lt-simple_switch_grpc", "netkv-switch"} <= \
        set(program_names())
    folder = tmp_path / "run-nkdead"
    folder.mkdir()
    named = subprocess.Popen(["bash", "-c", f"exec -a {folder}/simple_switch_grpc sleep 60"])
    other = subprocess.Popen(["bash", "-c", f"exec -a {folder}/other-program sleep 60"])
    assert_clean_kills(folder, [named], other)


def assert_clean_kills(folder: Path, killed: list[subprocess.Popen[bytes]],
                       kept: subprocess.Popen[bytes]) -> None:
    """`netkv clean`'s sweep of the dead run ``folder``: ``killed`` die by
    SIGKILL, ``kept`` (another program's name) stays, the folder goes."""
    try:
        subprocess.run(["sh", "-c", kill_and_remove(str(folder), "nkdead")], check=True,
                       timeout=20)
        for p in killed:
            assert p.wait(timeout=5) == -9
        assert kept.poll() is None
        assert not folder.exists()
    finally:
        for p in (*killed, kept):
            if p.poll() is None:
                p.kill()
                p.wait()
                p.wait()
