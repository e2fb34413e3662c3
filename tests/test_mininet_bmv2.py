"""target=mininet with target.switch=bmv2: BMv2's simple_switch_grpc as the
rack's switch, driven by the same controllers through Bmv2Driver.

Most of this file runs anywhere: the switch node's command line, the
target's call order (compile, start the switch, connect the driver, the
controller uses it) with fakes, the one-line refusals, the compile cache,
the batched register writes, and the P4Runtime set-up against a stand-in
p4runtime-shell (in this process and in the child that configures a switch
no controller drives). The end-to-end tests need p4c-bm2-ss,
simple_switch_grpc, simple_switch_CLI, p4runtime-shell, root and Mininet,
and skip with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from netkv.config.compose import ConfigError, load
from netkv.drivers import bmv2
from netkv.drivers.base import BatchedWrites, CpuPacket, DriverError, SwitchDriver
from netkv.backends import bmv2 as bmv2_backend
from netkv.mininet import cleanup
from netkv.mininet import rack as rack_mod
from netkv.protocols import lookup
from netkv.protocols.plugin import P4Semantics

ROOT = Path(__file__).resolve().parents[1]


def _cfg(protocol: str, *overrides: str) -> Any:
    return load(["target=mininet", "target.switch=bmv2", f"protocol={protocol}", "keys=2000",
                 "servers=4", "clients=2", *overrides])


# ---- refusals --------------------------------------------------------------------------------


@pytest.fixture
def no_rack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A refusal must come before anything is built."""
    def boom(*a: Any, **kw: Any) -> None:
        raise AssertionError("the rack was built although the target refused")

    monkeypatch.setattr(rack_mod, "Rack", boom)
    monkeypatch.setattr(bmv2, "compile_cached", boom)
    monkeypatch.setattr(cleanup, "STATE_ROOT", tmp_path / "state")


def test_missing_toolchain_is_one_line_naming_what_and_how(
        monkeypatch: pytest.MonkeyPatch, no_rack: None) -> None:
    from netkv.targets.mininet import MininetTarget, TargetUnavailable

    monkeypatch.setattr(bmv2.shutil, "which", lambda name: None)
    with pytest.raises(TargetUnavailable) as e:
        MininetTarget(_cfg("hash"))
    msg = str(e.value)
    assert isinstance(e.value, ConfigError)
    assert "\n" not in msg
    for name in ("p4c-bm2-ss", "simple_switch_grpc", "simple_switch_CLI"):
        assert name in msg
    assert bmv2.INSTALL_HINT in msg
    assert "not implemented" not in msg


def test_cli_exit_2_one_line_when_missing(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from netkv.cli import main

    monkeypatch.setattr(bmv2.shutil, "which", lambda name: None)
    code = main(["run", "target=mininet", "target.switch=bmv2", "protocol=pegasus"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "simple_switch_grpc" in err and "install" in err


def test_faults_are_refused_on_bmv2(monkeypatch: pytest.MonkeyPatch, no_rack: None) -> None:
    from netkv.targets.mininet import MininetTarget, TargetUnavailable

    monkeypatch.setattr(bmv2, "missing_bmv2", lambda: [])
    with pytest.raises(TargetUnavailable) as e:
        MininetTarget(_cfg("hash", "target.faults.loss=0.01"))
    assert "\n" not in str(e.value) and "target.switch=netkv" in str(e.value)


# ---- the target's call order, with fakes -------------------------------------------------------


class FakeDriver(SwitchDriver):
    """Records every call into the shared list."""

    def __init__(self, calls: list[tuple[Any, ...]]) -> None:
        self.calls = calls

    def reg_read(self, name: str, index: int) -> int:
        self.calls.append(("reg_read", name, index))
        return 0

    def reg_write(self, name: str, index: int, value: int) -> None:
        self.calls.append(("reg_write", name, index, value))

    def reg_write_many(self, cells: Any) -> None:
        self.calls.append(("reg_write_many", list(cells)))

    def table_add(self, table: str, key: Any, args: Any = ()) -> None:
        self.calls.append(("table_add", table, list(key), list(args)))

    def table_delete(self, table: str, key: Any) -> None:
        self.calls.append(("table_delete", table, list(key)))

    def mcast_set(self, group: int, ports: Any) -> None:
        self.calls.append(("mcast_set", group, list(ports)))

    def counters(self) -> dict[str, int]:
        return {"packet_in": 3}

    def cpu_poll(self, max_packets: int = 64) -> list[CpuPacket]:
        self.calls.append(("cpu_poll",))
        return []

    def packet_out(self, frame: bytes, port: int | None = None) -> None:
        self.calls.append(("packet_out", port))

    def close(self) -> None:
        self.calls.append(("driver.close",))


@pytest.fixture
def fake_bmv2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[Any, ...]]:
    """Everything the target calls on BMv2 and Mininet, recorded in order."""
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(bmv2, "missing_bmv2", lambda: [])
    monkeypatch.setattr(cleanup, "STATE_ROOT", tmp_path / "state")
    monkeypatch.setattr(rack_mod, "check_mininet", lambda: None)

    def compile_cached(program: str, src: Path,
                       defines: dict[str, int]) -> bmv2.CompiledProgram:
        assert src == bmv2.p4src_dir() / lookup(program).p4.source
        calls.append(("compile", program, dict(defines)))
        return bmv2.CompiledProgram(program, tmp_path / "p.json", tmp_path / "p.p4info.txtpb",
                                    dict(defines))

    class FakeRack:
        def __init__(self, spec: rack_mod.RackSpec, state: Any) -> None:
            calls.append(("rack", spec))
            self.spec, self.state = spec, state

        def stop(self) -> dict[str, Any]:
            calls.append(("rack.stop",))
            return {}

    def connect(compiled: bmv2.CompiledProgram, **kw: Any) -> FakeDriver:
        calls.append(("connect", compiled.program, kw))
        return FakeDriver(calls)

    def configure_in_child(compiled: bmv2.CompiledProgram, endpoint: bmv2.Bmv2Endpoint,
                           **kw: Any) -> None:
        calls.append(("configure_in_child", compiled.program, endpoint, kw))

    monkeypatch.setattr(bmv2, "compile_cached", compile_cached)
    monkeypatch.setattr(rack_mod, "Rack", FakeRack)
    monkeypatch.setattr(bmv2.Bmv2Driver, "connect", staticmethod(connect))
    monkeypatch.setattr(bmv2, "configure_in_child", configure_in_child)

    def netkv_socket(*a: Any, **kw: Any) -> None:
        raise AssertionError("the netkv-switch control socket was used on BMv2")

    from netkv.drivers.netkv_switch import NetkvSwitchDriver

    monkeypatch.setattr(NetkvSwitchDriver, "wait", classmethod(netkv_socket))
    return calls


def test_controller_drives_bmv2_through_the_driver(fake_bmv2: list[tuple[Any, ...]]) -> None:
    """compile -> rack (switch node started) -> Bmv2Driver.connect with the
    rack plan -> the controller's plane.switch is that driver (register
    writes batched), and close() tears the driver down before the rack."""
    from netkv.protocols import pegasus
    from netkv.protocols.base import Controller
    from netkv.targets.mininet import MininetTarget

    calls = fake_bmv2
    cfg = _cfg("pegasus", "protocol.selection=rr")
    params = pegasus.pipeline_params(cfg)
    seen: dict[str, Any] = {}

    class Ctl(Controller):
        def start(self) -> None:
            calls.append(("controller.start",))
            seen["switch"] = self.plane.switch
            sw = self.plane.switch
            sw.reg_write("ver_next", 0, 5)
            sw.reg_write("n_servers", 0, 4)
            sw.table_add("rkeys", [77], [0])     # the queued writes go first
            sw.reg_write("rset_size", 0, 2)      # sent by plane.flush()

        def epoch(self, now_s: float) -> None:
            pass

    target = MininetTarget(cfg, controller_factory=Ctl, params=params)
    try:
        kinds = [c[0] for c in calls]
        assert kinds[:4] == ["compile", "rack", "connect", "controller.start"], kinds
        _, program, defines = calls[0]
        assert program == "pegasus"
        p4 = lookup("pegasus").p4
        assert defines == p4.defines(bmv2.parse_params(target.params))
        assert defines["PEG_SELECTION"] == 1   # rr reached the P4 program
        spec = calls[1][1]
        assert isinstance(spec.backend, bmv2_backend.Bmv2Backend)
        ep = spec.backend.endpoint
        assert isinstance(ep, bmv2.Bmv2Endpoint)
        kw = calls[2][2]
        assert kw["grpc_addr"] == ep.grpc_addr and kw["thrift_port"] == ep.thrift_port
        assert kw["data_ports"] == list(range(6))
        assert kw["node_ports"] == {n: n for n in range(6)}   # server s on port s, clients after
        assert kw["registers"] == p4.initial_registers(4, bmv2.parse_params(target.params))
        assert ("n_servers", 0, 4) in kw["registers"]
        assert isinstance(kw["semantics"], P4Semantics)
        assert calls[4:] == [
            ("reg_write_many", [("ver_next", 0, 5), ("n_servers", 0, 4)]),
            ("table_add", "rkeys", [77], [0]),
            ("reg_write_many", [("rset_size", 0, 2)]),
        ]
        assert isinstance(seen["switch"], BatchedWrites)
        assert seen["switch"] is target.driver
        assert target.switch_counters() == {"packet_in": 3}
        assert "configure_in_child" not in kinds
    finally:
        target.close()
    assert [c[0] for c in calls[-2:]] == ["driver.close", "rack.stop"]


def test_switch_without_controller_is_configured_in_a_child(
        fake_bmv2: list[tuple[Any, ...]]) -> None:
    """hash has no controller: the program is pushed from a child process,
    so this process holds no P4Runtime client (the SLO reference rack)."""
    from netkv.targets.mininet import MininetTarget

    calls = fake_bmv2
    target = MininetTarget(_cfg("hash"))
    try:
        kinds = [c[0] for c in calls]
        assert kinds == ["compile", "rack", "configure_in_child"], kinds
        assert calls[0][1:] == ("hash", {})
        _, program, endpoint, kw = calls[2]
        assert program == "hash" and endpoint == calls[1][1].backend.endpoint
        assert kw["node_ports"] == {n: n for n in range(6)} and kw["data_ports"] == list(range(6))
        assert kw["registers"] == [("n_servers", 0, 4)]
        assert target.driver is None and target.switch_counters() == {}
    finally:
        target.close()
    assert calls[-1] == ("rack.stop",)


# ---- the switch node ---------------------------------------------------------------------------


class FakeIntf:
    def __init__(self, name: str) -> None:
        self.name = name


class FakeProc:
    pid = 424242
    returncode: int | None = None

    def __init__(self, cmd: list[str], **kw: Any) -> None:
        self.cmd, self.kw, self.events = cmd, kw, []

    def poll(self) -> int | None:
        return self.returncode

    def terminate(self) -> None:
        self.events.append("terminate")
        self.returncode = -15

    def wait(self, timeout: float | None = None) -> int:
        return self.returncode or 0

    def kill(self) -> None:
        self.events.append("kill")


def _backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocol: str = "hash",
             *overrides: str) -> bmv2_backend.Bmv2Backend:
    """A prepared BMv2 back-end for a 2-server, 1-client rack (toolchain and
    compiler faked)."""
    monkeypatch.setattr(bmv2, "missing_bmv2", lambda: [])
    monkeypatch.setattr(bmv2, "compile_cached", lambda program, src, defines: bmv2.CompiledProgram(
        program, tmp_path / "p.json", tmp_path / "p.p4info.txtpb", dict(defines)))
    monkeypatch.setattr(bmv2, "free_endpoint", lambda: bmv2.Bmv2Endpoint("127.0.0.1:50101", 50102))
    cfg = load(["target=mininet", "target.switch=bmv2", f"protocol={protocol}", "servers=2",
                "clients=1", *overrides])
    return bmv2_backend.Bmv2Backend(cfg, lookup(protocol), "")


def _switch_node(tmp_path: Path, backend: Any) -> Any:
    """A SwitchNode without Mininet's shell: its ports added out of order."""
    cls = rack_mod._make_switch_class()
    node = object.__new__(cls)
    intfs = {3: FakeIntf("nkt1sw-eth3"), 1: FakeIntf("nkt1sw-eth1"), 2: FakeIntf("nkt1sw-eth2")}
    node.intfs = intfs
    node.ports = {intf: port for port, intf in intfs.items()}
    node.backend, node.folder, node.tag = backend, tmp_path, "nkt1"
    node.label = backend.label
    node.state = cleanup.RunState("nkt1", tmp_path)
    node.proc = None
    node.final = {}
    return node


def test_bmv2_node_command_line_follows_the_rack_plan(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    backend = _backend(tmp_path, monkeypatch)
    node = _switch_node(tmp_path, backend)
    ifaces = [i.name for i in rack_mod.switch_ports(node)]
    # a notifications socket of its own: the default one in /tmp is shared by
    # every switch with device id 0, and a second switch exits on it
    assert backend.command(ifaces, tmp_path, "nkt1") == [
        "simple_switch_grpc", "--no-p4", "--device-id", "0", "--thrift-port", "50102",
        "--notifications-addr", f"ipc://{tmp_path / 'bmv2-notify.ipc'}",
        "-i", "0@nkt1sw-eth1", "-i", "1@nkt1sw-eth2", "-i", "2@nkt1sw-eth3",
        "--", "--grpc-server-addr", "127.0.0.1:50101", "--cpu-port", "255"]


def test_bmv2_node_starts_waits_and_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mininet.node import Switch

    backend = _backend(tmp_path, monkeypatch)
    node = _switch_node(tmp_path, backend)
    events: list[tuple[Any, ...]] = []
    procs: list[FakeProc] = []

    def popen(cmd: list[str], **kw: Any) -> FakeProc:
        events.append(("popen", cmd[0]))
        procs.append(FakeProc(cmd, **kw))
        return procs[-1]

    monkeypatch.setattr(subprocess, "Popen", popen)
    def waited(proc: Any, addr: str, timeout: float, log: Path, label: str) -> None:
        events.append(("wait", addr, label))

    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: events.append(("run", *cmd)))
    monkeypatch.setattr(bmv2_backend, "wait_listening", waited)
    monkeypatch.setattr(Switch, "stop", lambda self, deleteIntfs=True: events.append(("stop",)))
    node.start([])
    assert events[:3] == [("run", "ethtool", "-K", f"nkt1sw-eth{i}", "tx", "off")
                          for i in (1, 2, 3)]
    assert events[3:] == [("popen", "simple_switch_grpc"),
                          ("wait", "127.0.0.1:50101", "simple_switch_grpc")]
    assert procs[0].cmd == backend.command([f"nkt1sw-eth{i}" for i in (1, 2, 3)], tmp_path,
                                           "nkt1")
    assert node.state.pids == [FakeProc.pid]   # recorded for `netkv clean`
    assert json.loads((tmp_path / "state.json").read_text())["pids"] == [FakeProc.pid]
    node.stop()
    assert procs[0].events == ["terminate"] and events[-1] == ("stop",)


def test_starcache_loop_is_a_veth_pair_on_the_programs_loop_ports(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """StarCache's plug-in declares its loop ports (P4Program.loop_ports, the
    program's -DSC_LOOP_OUT/-DSC_LOOP_IN): the switch node makes the veth pair
    and BMv2 gets its out end on 510 and its in end on 511; the controller's
    recirculation port is 510. hash (no loop_ports) gets no pair: the test
    above sees only the switch start."""
    from mininet.node import Switch

    backend = _backend(tmp_path, monkeypatch, "starcache")
    assert backend.wants_loop() and backend.special_ports() == (bmv2.CPU_PORT, 510)
    assert backend.defines["SC_LOOP_OUT"] == 510 and backend.defines["SC_LOOP_IN"] == 511
    node = _switch_node(tmp_path, backend)
    runs: list[list[str]] = []
    procs: list[FakeProc] = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: runs.append(list(cmd)))
    monkeypatch.setattr(subprocess, "Popen", lambda cmd, **kw: procs.append(FakeProc(cmd, **kw))
                        or procs[-1])
    monkeypatch.setattr(bmv2_backend, "wait_listening", lambda *a: None)
    monkeypatch.setattr(Switch, "stop", lambda self, deleteIntfs=True: None)
    node.start([])
    assert ["ip", "link", "add", "nkt1lpo", "type", "veth", "peer", "name", "nkt1lpi"] in runs
    cmd = procs[0].cmd
    assert cmd[cmd.index("--") - 4:cmd.index("--")] == ["-i", "510@nkt1lpo", "-i", "511@nkt1lpi"]
    assert cmd == backend.command([f"nkt1sw-eth{i}" for i in (1, 2, 3)], tmp_path, "nkt1",
                                  ("nkt1lpo", "nkt1lpi"))
    node.stop()
    assert ["ip", "link", "del", "nkt1lpo"] in runs   # nothing left behind
    with pytest.raises(DriverError, match="needs its loop pair"):
        backend.command(["a", "b", "c"], tmp_path, "nkt1")
    hash_backend = _backend(tmp_path, monkeypatch)
    assert not hash_backend.wants_loop()
    with pytest.raises(NotImplementedError):
        hash_backend.special_ports()


@pytest.mark.parametrize("with_controller", [True, False])
def test_starcache_loop_queue_is_set_after_the_program(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_controller: bool) -> None:
    """After the program is pushed, one simple_switch_CLI on the switch's
    Thrift port sets the loop's queue: target.loop.depth packets, drained at
    target.loop.rate_pps (the rate left alone at 0: unlimited)."""
    backend = _backend(tmp_path, monkeypatch, "starcache", "target.loop.rate_pps=5000",
                       "target.loop.depth=64")
    events: list[tuple[Any, ...]] = []
    monkeypatch.setattr(bmv2, "configure_in_child", lambda *a, **kw: events.append(("child",)))
    monkeypatch.setattr(bmv2.Bmv2Driver, "connect",
                        classmethod(lambda cls, *a, **kw: events.append(("connect",)) or object()))

    def run(cmd: list[str], **kw: Any) -> Any:
        events.append(("cli", cmd[:3], kw["input"]))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(bmv2.subprocess, "run", run)
    backend.connect(tmp_path, with_controller)
    assert events == [("connect",) if with_controller else ("child",),
                      ("cli", ["simple_switch_CLI", "--thrift-port", "50102"],
                       "set_queue_depth 64 510\nset_queue_rate 5000 510\n")]
    assert bmv2.loop_queue_commands(510, 0.0, 256) == ["set_queue_depth 256 510"]
    events.clear()
    _backend(tmp_path, monkeypatch).connect(tmp_path, False)   # hash: no loop, no CLI
    assert events == [("child",)]


def test_bmv2_starcache_is_refused_only_for_the_toolchain(
        monkeypatch: pytest.MonkeyPatch, no_rack: None) -> None:
    """The loop pair is built now: without the toolchain the one line names
    the toolchain, never a missing loop."""
    from netkv.targets.mininet import MininetTarget, TargetUnavailable

    monkeypatch.setattr(bmv2.shutil, "which", lambda name: None)
    with pytest.raises(TargetUnavailable) as e:
        MininetTarget(_cfg("starcache"))
    assert "simple_switch_grpc" in str(e.value) and "loop" not in str(e.value)
    assert "\n" not in str(e.value)


def test_wait_listening_fails_at_once_when_the_switch_dies(tmp_path: Path) -> None:
    log = tmp_path / "switch.log"
    log.write_text("Error: could not open interface nkt1sw-eth1\n")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    proc.wait()
    with pytest.raises(DriverError, match=r"exited \(3\).*could not open interface"):
        bmv2_backend.wait_listening(proc, "127.0.0.1:1", 30.0, log, "simple_switch_grpc")
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            bmv2_backend.wait_listening(live, f"127.0.0.1:{srv.getsockname()[1]}", 5.0, log, "x")
        finally:
            live.kill()
            live.wait()


def test_switch_factory_binds_the_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = cleanup.RunState("nkt1", tmp_path)
    backend = _backend(tmp_path, monkeypatch)
    spec = rack_mod.RackSpec("hash", 2, 1, "nkt1", tmp_path, backend=backend)
    made = rack_mod.switch_factory(spec, state)
    assert made.func.__name__ == "SwitchNode"
    assert made.keywords["backend"] is backend
    assert made.keywords["folder"] == str(tmp_path)


def test_clean_recognises_a_runs_bmv2_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = {
        1: "simple_switch_grpc --no-p4 -i 0@nkab1sw-eth1 -- --cpu-port 255",
        2: "/opt/bmv2/targets/simple_switch_grpc/.libs/lt-simple_switch_grpc -i 0@nkab1sw-eth1",
        3: "simple_switch_grpc --no-p4 -i 0@nkzz9sw-eth1",     # another run's
        4: "/usr/bin/python3 -i 0@nkab1sw-eth1",                # not a program of ours
    }
    monkeypatch.setattr(cleanup, "_cmdline", lambda pid: lines.get(pid, ""))
    assert [p for p in lines if cleanup._ours(p, "nkab1")] == [1, 2]


# ---- bmv2 helpers ------------------------------------------------------------------------------


def test_parse_params_and_free_endpoint() -> None:
    assert bmv2.parse_params("max_rkeys=8;selection=rr; amo=1;;junk") == {
        "max_rkeys": "8", "selection": "rr", "amo": "1"}
    assert bmv2.parse_params("") == {}
    ep = bmv2.free_endpoint()
    host, _, port = ep.grpc_addr.rpartition(":")
    assert host == "127.0.0.1" and int(port) != ep.thrift_port
    for p in (int(port), ep.thrift_port):
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))   # free now


FAKE_P4C = r'''#!{python}
import sys
with open({count!r}, "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\n")
args = sys.argv[1:]
open(args[args.index("-o") + 1], "w").write('{{"register_arrays": []}}')
open(args[args.index("--p4runtime-files") + 1], "w").write("pkg_info {{}}")
'''


def test_compile_cache_reuses_until_an_input_changes(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "p4src"
    (src / "hash").mkdir(parents=True)
    (src / "common").mkdir()
    (src / "hash" / "hash.p4").write_text("#include \"../common/types.p4\"\n")
    (src / "common" / "types.p4").write_text("const bit<9> CPU = 255;\n")
    monkeypatch.setenv("NETKV_P4SRC", str(src))
    count = tmp_path / "runs.txt"
    p4c = tmp_path / "bin" / "p4c-bm2-ss"
    p4c.parent.mkdir()
    p4c.write_text(FAKE_P4C.format(python=sys.executable, count=str(count)))
    p4c.chmod(p4c.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{p4c.parent}{os.pathsep}{os.environ['PATH']}")
    cache = tmp_path / "cache"

    def runs() -> int:
        return len(count.read_text().splitlines()) if count.exists() else 0

    hp4 = src / "hash" / "hash.p4"
    a = bmv2.compile_cached("hash", hp4, {}, cache)
    assert runs() == 1 and a.json_path.is_file() and a.p4info_path.is_file()
    assert a.json_path.parent.parent == cache and a.json_path.name == "hash.json"
    assert bmv2.compile_cached("hash", hp4, {}, cache) == a and runs() == 1    # reused
    b = bmv2.compile_cached("hash", hp4, {"X": 1}, cache)                       # other defines
    assert runs() == 2 and b.json_path != a.json_path and "-DX=1" in count.read_text()
    (src / "common" / "types.p4").write_text("const bit<9> CPU = 254;\n")  # an included file
    c = bmv2.compile_cached("hash", hp4, {}, cache)
    assert runs() == 3 and c.json_path != a.json_path
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]     # no temp folders left


class InnerDriver(FakeDriver):
    def __init__(self, calls: list[tuple[Any, ...]], fail_writes: bool = False) -> None:
        super().__init__(calls)
        self.fail_writes = fail_writes

    def reg_write_many(self, cells: Any) -> None:
        super().reg_write_many(cells)
        if self.fail_writes:
            raise DriverError("simple_switch_CLI: Error")


def test_batched_writes_go_first_and_in_order() -> None:
    calls: list[tuple[Any, ...]] = []
    drv = BatchedWrites(InnerDriver(calls))
    drv.reg_write("a", 0, 1)
    drv.reg_write("a", 1, 2)
    assert calls == []                                      # queued
    assert drv.reg_read("a", 0) == 0                        # a read sees the writes
    drv.reg_write("b", 0, 3)
    drv.packet_out(b"x")
    drv.reg_write("c", 0, 4)
    drv.flush()
    drv.flush()                                             # nothing left: no empty batch
    assert calls == [("reg_write_many", [("a", 0, 1), ("a", 1, 2)]), ("reg_read", "a", 0),
                     ("reg_write_many", [("b", 0, 3)]), ("packet_out", None),
                     ("reg_write_many", [("c", 0, 4)])]
    failing = BatchedWrites(InnerDriver(calls, fail_writes=True))
    failing.reg_write("d", 0, 1)
    with pytest.raises(DriverError):
        failing.table_add("t", [1], [2])                    # a refused write is reported
    failing.reg_write("d", 0, 2)
    failing.close()                                         # still closes the connection
    assert calls[-1] == ("driver.close",)


# ---- P4Runtime set-up against a stand-in p4runtime-shell ---------------------------------------

FAKE_SHELL = '''
import json, os

LOG = os.environ["NETKV_FAKE_SH_LOG"]


def log(*event):
    with open(LOG, "a") as f:
        f.write(json.dumps(event) + "\\n")


class NS:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class _Ctx:
    p4info = NS(
        actions=[NS(preamble=NS(id=1, name="set_port"), params=[NS(name="port")])],
        tables=[NS(preamble=NS(name="node_fwd"), match_fields=[NS(name="node")],
                   action_refs=[NS(id=1, scope=0, DEFAULT_ONLY=2)])],
    )

    def get_obj(self, kind, name):
        return None


context = _Ctx()


def FwdPipeConfig(p4info, json_path):
    return [p4info, json_path]


def setup(**kw):
    log("setup", kw["grpc_addr"], kw["device_id"], kw["config"])


def teardown():
    log("teardown")


class _Group:
    kind = "mcast"

    def __init__(self, gid):
        self.gid, self.ports = gid, []

    def add(self, port, rid=0):
        self.ports.append(port)
        return self

    def insert(self):
        log(self.kind, self.gid, self.ports)


class MulticastGroupEntry(_Group):
    pass


class CloneSessionEntry(_Group):
    kind = "clone"


class Action(dict):
    def __init__(self, name):
        super().__init__()
        self.name = name


class TableEntry:
    def __init__(self, table):
        self.table, self.match, self.action = table, {}, None

    def insert(self):
        log("insert", self.table, self.match, self.action.name, dict(self.action))
'''


@pytest.fixture
def fake_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A p4runtime_sh package that logs what the driver asks of it, importable
    here and by a child process (PYTHONPATH). A real p4runtime_sh imported by
    an earlier test (tests/test_p4.py on a machine with BMv2) is set aside
    for the test and put back after: it keeps its client in module globals."""
    real = {m: sys.modules.pop(m) for m in list(sys.modules) if m.split(".")[0] == "p4runtime_sh"}
    pkg = tmp_path / "fake_sh" / "p4runtime_sh"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "shell.py").write_text(FAKE_SHELL)
    (pkg / "context.py").write_text("class P4Type:\n    controller_packet_metadata = 'cpm'\n")
    (pkg / "p4runtime.py").write_text("class P4RuntimeWriteException(Exception):\n    pass\n")
    log = tmp_path / "sh.log"
    monkeypatch.setenv("NETKV_FAKE_SH_LOG", str(log))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(pkg.parent), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(pkg.parent))
    yield log
    for name in [m for m in sys.modules if m.split(".")[0] == "p4runtime_sh"]:
        del sys.modules[name]
    sys.modules.update(real)


def _compiled(tmp_path: Path) -> bmv2.CompiledProgram:
    (tmp_path / "hash.json").write_text(json.dumps({"register_arrays": []}))
    (tmp_path / "hash.p4info.txtpb").write_text("")
    return bmv2.CompiledProgram("hash", tmp_path / "hash.json", tmp_path / "hash.p4info.txtpb")


def _events(log: Path) -> list[list[Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _expected(addr: str, compiled: bmv2.CompiledProgram, nodes: int) -> list[list[Any]]:
    return [
        ["setup", addr, 0, [str(compiled.p4info_path), str(compiled.json_path)]],
        ["mcast", bmv2.FLOOD_MCAST_GRP, list(range(nodes))],
        ["clone", bmv2.CPU_CLONE_SESSION, [bmv2.CPU_PORT]],
        *(["insert", "node_fwd", {"node": str(n)}, "set_port", {"port": str(n)}]
          for n in range(nodes)),
        ["teardown"],
    ]


def _listeners() -> tuple[list[socket.socket], bmv2.Bmv2Endpoint]:
    socks = []
    for _ in range(2):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        socks.append(s)
    ep = bmv2.Bmv2Endpoint(f"127.0.0.1:{socks[0].getsockname()[1]}", socks[1].getsockname()[1])
    return socks, ep


def _connect_and_close(tmp_path: Path, log: Path, nodes: int) -> None:
    """Connect a driver to listening stand-in ports, close it, and check what
    it asked of p4runtime_sh: the rack plan of ``nodes`` nodes."""
    compiled = _compiled(tmp_path)
    socks, ep = _listeners()
    try:
        drv = bmv2.Bmv2Driver.connect(compiled, data_ports=range(nodes),
                                      node_ports={n: n for n in range(nodes)},
                                      grpc_addr=ep.grpc_addr, thrift_port=ep.thrift_port)
        drv.close()
    finally:
        for s in socks:
            s.close()
    assert _events(log) == _expected(ep.grpc_addr, compiled, nodes)


def test_connect_installs_the_rack_plan(tmp_path: Path, fake_shell: Path) -> None:
    _connect_and_close(tmp_path, fake_shell, 3)


def test_connect_after_a_real_shell_was_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                request: pytest.FixtureRequest) -> None:
    """On a machine with BMv2, tests/test_p4.py imports the real p4runtime_sh
    first (it keeps its client in module globals); the fake must still be the
    one the driver talks to."""
    import types

    monkeypatch.setitem(sys.modules, "p4runtime_sh", types.ModuleType("p4runtime_sh"))
    monkeypatch.setitem(sys.modules, "p4runtime_sh.shell", types.ModuleType("p4runtime_sh.shell"))
    _connect_and_close(tmp_path, request.getfixturevalue("fake_shell"), 2)


def test_child_configures_the_switch_and_reports_failure_in_one_line(
        tmp_path: Path, fake_shell: Path) -> None:
    compiled = _compiled(tmp_path)
    socks, ep = _listeners()
    try:
        bmv2.configure_in_child(compiled, ep, data_ports=range(4),
                                node_ports={n: n for n in range(4)})
    finally:
        for s in socks:
            s.close()
    assert _events(fake_shell) == _expected(ep.grpc_addr, compiled, 4)
    assert "p4runtime_sh" not in sys.modules      # this process holds no client
    dead = bmv2.free_endpoint()                    # nothing listens there
    with pytest.raises(DriverError) as e:
        bmv2.configure_in_child(compiled, dead, connect_timeout_s=0.2)
    assert "\n" not in str(e.value)
    assert f"configuring BMv2 at {dead.grpc_addr}" in str(e.value)
    assert "not listening" in str(e.value)


# ---- end to end: needs BMv2, root and Mininet --------------------------------------------------

try:
    from test_mininet_hash import REASON as MININET_REASON
    from test_mininet_hash import _leftovers
except ImportError:
    from tests.test_mininet_hash import REASON as MININET_REASON
    from tests.test_mininet_hash import _leftovers

_MISSING = bmv2.missing_bmv2()
E2E_REASON = (f"BMv2 toolchain missing ({', '.join(_MISSING)}): {bmv2.INSTALL_HINT}"
              if _MISSING else MININET_REASON)
needs_bmv2_rack = pytest.mark.skipif(E2E_REASON is not None, reason=E2E_REASON or "")


def _target(cfg: Any) -> Any:
    from netkv.runner import make_target

    return make_target(cfg)


@pytest.mark.mininet
@pytest.mark.bmv2
@needs_bmv2_rack
@pytest.mark.parametrize("protocol", ["hash", "pegasus"])
def test_low_load_on_bmv2_loses_nothing_and_leaves_nothing(protocol: str) -> None:
    """The same experiment as on netkv-switch, with BMv2 as the switch:
    every request completes at a low rate (BMv2 forwards ~18 kpps), and the
    rack, its simple_switch_grpc included, is gone afterwards."""
    cfg = _cfg(protocol, "keys=20000", "clients=1", "alpha=1.2", "write_ratio=0.1",
               "duration=1.0", "topology.timeout_us=0", "topology.drain_ms=1000")
    with _target(cfg) as target:
        tag = target.state.tag
        assert target.rack.switch.label == "simple_switch_grpc"
        res = target.run_point(500.0, seed=7)
        if protocol == "pegasus":
            assert target.controller is not None
            assert isinstance(target.driver, BatchedWrites)
            hits = target.driver.reg_read("stats", 0)  # READs to replicated keys
    assert res.issued > 300
    assert res.completed == res.issued, (res.issued, res.completed, res.timeouts)
    assert res.server_requests.sum() >= res.issued
    if protocol == "pegasus":
        assert hits > 0.2 * res.issued, (hits, res.issued)
    links, procs = _leftovers(tag)
    assert links == [] and procs == [], (links, procs)


@pytest.mark.mininet
@pytest.mark.bmv2
@needs_bmv2_rack
def test_pegasus_rack_and_hash_reference_rack_at_once() -> None:
    """The SLO's hash reference is measured while the protocol's rack (and its
    controller's P4Runtime client) is up: the second BMv2 rack gets its own
    ports and is configured from a child process."""
    with _target(_cfg("pegasus", "clients=1", "duration=0.5", "topology.timeout_us=0")) as peg, \
            _target(_cfg("hash", "clients=1", "duration=0.5", "topology.timeout_us=0")) as ref:
        assert peg.rack.spec.bmv2_endpoint != ref.rack.spec.bmv2_endpoint
        r = ref.run_point(300.0, seed=3)
        p = peg.run_point(300.0, seed=3)
    assert r.completed == r.issued > 50 and p.completed == p.issued > 50

