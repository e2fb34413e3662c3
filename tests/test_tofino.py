"""The Tofino back-end and TofinoDriver. No Tofino SDE (bf-p4c, bf_switchd)
exists here: these tests check the one-line refusal a user without one gets,
the command lines, the pipeline config packing and the compile cache with a
FAKE bf-p4c, and the driver against a FAKE p4runtime-shell and FAKE P4Runtime
protobufs (what it asks of P4Runtime, not what a Tofino answers)."""

from __future__ import annotations

import os
import stat
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from netkv.backends import BACKENDS, available_on, backend_class
from netkv.config.compose import ConfigError, load
from netkv.constants import CPU_CLONE_SESSION, FLOOD_MCAST_GRP
from netkv.drivers import tofino
from netkv.drivers.base import DriverError
from netkv.protocols import lookup

try:
    from test_mininet_bmv2 import FAKE_SHELL, _events, _listeners
except ImportError:
    from tests.test_mininet_bmv2 import FAKE_SHELL, _events, _listeners

ROOT = Path(__file__).resolve().parents[1]


def _cfg(protocol: str, *overrides: str) -> Any:
    return load(["target=testbed", "inventory=netns-rack", "target.switch=tofino",
                 f"protocol={protocol}", "servers=2", "clients=1", *overrides])


def _sde_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SDE", raising=False)
    monkeypatch.setattr(tofino.shutil, "which", lambda name: None)


# ---- refusals: what a user without an SDE gets --------------------------------------------------


def test_cli_without_sde_exits_2_in_one_line_naming_what_is_missing(tmp_path: Path) -> None:
    """The real command on this machine (no SDE): refused at prepare, exit 2,
    one line naming bf-p4c and run_switchd.sh, and no run folder written."""
    env = {k: v for k, v in os.environ.items() if k != "SDE"}
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "netkv", "run", "target=testbed",
                          "inventory=netns-rack", "target.switch=tofino", "protocol=pegasus",
                          f"out={out}"], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=120)
    err = res.stderr.strip()
    assert res.returncode == 2 and len(err.splitlines()) == 1, err
    assert "bf-p4c" in err and "$SDE/run_switchd.sh" in err and "P4 Studio SDE" in err
    assert not out.exists()


def test_require_tofino_names_each_missing_piece(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    _sde_absent(monkeypatch)
    monkeypatch.delenv("SDE_INSTALL", raising=False)
    with pytest.raises(ConfigError) as e:
        tofino.require_tofino()
    assert "\n" not in str(e.value) and "($SDE unset)" in str(e.value)
    assert "$SDE_INSTALL" in str(e.value)
    # an SDE whose script is there, and a compiler: only what is still missing
    script = tmp_path / tofino.SWITCHD
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("SDE", str(tmp_path))
    monkeypatch.setenv("SDE_INSTALL", str(tmp_path / "install"))
    monkeypatch.setattr(tofino.shutil, "which", lambda name: f"/opt/{name}")
    monkeypatch.setattr(tofino.importlib.util, "find_spec", lambda name: object())
    assert tofino.missing_tofino() == []
    tofino.require_tofino()
    script.chmod(0o644)                         # not executable: missing again
    assert tofino.missing_tofino() == [f"$SDE/{tofino.SWITCHD}"]


def test_bmv2_and_tofino_refuse_a_missing_toolchain_in_one_shared_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """require_bmv2 and require_tofino: one helper, one line naming the
    switch, what is missing and the hint; nothing when nothing is missing."""
    from netkv.drivers import bmv2
    from netkv.drivers.p4runtime import require_toolchain

    require_toolchain("x", [], "hint")
    monkeypatch.setattr(bmv2, "missing_bmv2", lambda: ["p4c-bm2-ss", "simple_switch_CLI"])
    monkeypatch.setattr(tofino, "missing_tofino", lambda: ["bf-p4c"])
    with pytest.raises(ConfigError) as b:
        bmv2.require_bmv2()
    with pytest.raises(ConfigError) as t:
        tofino.require_tofino()
    assert str(b.value) == ("target.switch=bmv2 needs p4c-bm2-ss, simple_switch_CLI, not "
                            f"found: {bmv2.INSTALL_HINT}")
    assert str(t.value) == f"target.switch=tofino needs bf-p4c, not found: {tofino.INSTALL_HINT}"


def test_tofino_runs_on_the_testbed_only() -> None:
    assert available_on("testbed").count("tofino") == 1
    assert "tofino" not in available_on("mininet") and "tofino" not in available_on("sim")
    assert BACKENDS["tofino"].programs == ("run_switchd.sh", "bf_switchd")
    with pytest.raises(ConfigError) as e:
        load(["target=mininet", "target.switch=tofino"])
    assert "target.switch = 'tofino' is not available on target=mininet" in str(e.value)
    with pytest.raises(ConfigError):
        _cfg("hash", "target.tofino.cpu_port=512")
    assert _cfg("hash", "target.tofino.cpu_port=320").target.tofino.cpu_port == 320


@pytest.fixture
def sde_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tofino, "missing_tofino", lambda: [])
    monkeypatch.setattr(tofino, "missing_driver", lambda: [])
    monkeypatch.setenv("SDE", "/opt/sde")


def test_testbed_needs_to_know_where_the_sde_is_on_the_switch_host(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither target.tofino.sde nor $SDE: one line; either one: the switch
    host's programs are looked for there (by absolute path, over SSH)."""
    monkeypatch.delenv("SDE", raising=False)
    cls = backend_class("tofino")
    with pytest.raises(ConfigError) as e:
        cls.preflight(_cfg("hash"), lookup("hash"))
    assert "\n" not in str(e.value) and "target.tofino.sde" in str(e.value)
    cfg = _cfg("hash", "target.tofino.sde=/sw/sde")
    cls.preflight(cfg, lookup("hash"))
    assert cls.switch_host_programs(cfg) == ("/sw/sde/run_switchd.sh",
                                             "/sw/sde/install/bin/bf-p4c")
    monkeypatch.setenv("SDE", "/here/sde")
    assert cls.switch_host_programs(_cfg("hash"))[0] == "/here/sde/run_switchd.sh"
    with pytest.raises(ConfigError):
        _cfg("hash", "target.tofino.sde=relative/sde")


def test_testbed_refuses_a_grpc_addr_off_the_switch_hosts_loopback(sde_present: None) -> None:
    """The SSH forward reaches bf_switchd's port on the switch host's
    loopback: another host in grpc_addr would be ignored, so it is refused
    in one line naming what is allowed."""
    cls = backend_class("tofino")
    with pytest.raises(ConfigError) as e:
        cls.preflight(_cfg("hash", "target.tofino.grpc_addr=10.0.0.5:9559"), lookup("hash"))
    assert "\n" not in str(e.value) and "'10.0.0.5:9559'" in str(e.value)
    assert "allowed: 127.0.0.1:<port> or localhost:<port>" in str(e.value)
    for ok in ("127.0.0.1:9560", "localhost:9559"):
        cls.preflight(_cfg("hash", f"target.tofino.grpc_addr={ok}"), lookup("hash"))


@pytest.mark.parametrize(("protocol", "why"), [
    ("netcache", "no TNA program (p4src/netcache/tna/netcache.p4)"),
    ("starcache", "no TNA program"),
])
def test_preflight_refuses_a_protocol_without_tna_program(protocol: str, why: str,
                                                          sde_present: None) -> None:
    cls = backend_class("tofino")
    with pytest.raises(ConfigError) as e:
        cls.preflight(_cfg(protocol), lookup(protocol))
    assert why in str(e.value) and "\n" not in str(e.value)
    for twin in ("hash", "pegasus", "netmc"):              # those with a TNA twin pass
        cls.preflight(_cfg(twin), lookup(twin))


def test_preflight_refuses_faults(sde_present: None) -> None:
    with pytest.raises(ConfigError, match="target.switch=netkv"):
        backend_class("tofino").preflight(_cfg("hash", "target.faults.loss=0.01"),
                                          lookup("hash"))


# ---- command lines, packing, the compile cache (a fake bf-p4c) -----------------------------------


def test_command_lines() -> None:
    src = ROOT / "p4src" / tofino.tna_source("pegasus/pegasus.p4")
    assert src == ROOT / "p4src/pegasus/tna/pegasus.p4" and src.is_file()
    out = Path("/c/out")
    assert tofino.compile_command(src, out, "pegasus", {"PEG_SELECTION": 1}) == [
        "bf-p4c", "--target", "tofino", "--arch", "tna", "--p4runtime-files",
        "/c/out/pegasus.p4info.txtpb", "-o", "/c/out", "-DPEG_SELECTION=1", str(src)]
    assert tofino.compile_command(src, out, "pegasus", target="tofino2")[1:5] == [
        "--target", "tofino2", "--arch", "t2na"]
    prog = tofino.TofinoProgram("pegasus", "pegasus", out)
    assert tofino.switchd_command(prog, "/sde") == ["setsid", "/sde/run_switchd.sh", "-c",
                                                    "/c/out/pegasus.conf", "--skip-p4"]
    with pytest.raises(DriverError, match=r"\$SDE is unset"):
        tofino.switchd_command(prog, "")


def _unpack(blob: bytes) -> list[bytes]:
    parts, i = [], 0
    while i < len(blob):
        (n,) = struct.unpack_from("<I", blob, i)
        parts.append(blob[i + 4:i + 4 + n])
        i += 4 + n
    return parts


def test_pipeline_config_is_name_bin_context_each_length_prefixed() -> None:
    blob = tofino.pack_pipeline_config("hash", b"\x01\x02\x03", b"{}")
    assert blob[:8] == struct.pack("<I", 4) + b"hash"
    assert _unpack(blob) == [b"hash", b"\x01\x02\x03", b"{}"]
    assert _unpack(tofino.pack_pipeline_config("p", b"", b"ctx")) != [b"p", b"ctx", b""]


FAKE_SDE = Path(__file__).parent / "fakes" / "sde"
FAKE_BF_P4C = (FAKE_SDE / "install" / "bin" / "bf-p4c").read_text()


@pytest.fixture
def fake_bf_p4c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "bf-p4c"
    exe.write_text(FAKE_BF_P4C)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "bf-p4c.log"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_BF_P4C_LOG", str(log))
    monkeypatch.setenv("NETKV_P4_CACHE", str(tmp_path / "cache"))
    return log


def test_compile_cached_with_a_fake_bf_p4c_packs_and_reuses(fake_bf_p4c: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    src = ROOT / "p4src/hash/tna/hash.p4"
    prog = tofino.compile_cached("hash", src, {"NETKV_TNA_CPU_PORT": 64})
    name, blob, ctx = _unpack(prog.device_config_path.read_bytes())
    assert (name, ctx) == (b"hash", b'{"ctx": 1}') and blob.startswith(b"BIN ")
    again = tofino.compile_cached("hash", src, {"NETKV_TNA_CPU_PORT": 64})
    assert again == prog
    assert fake_bf_p4c.read_text().count("run\n") == 1          # cached: compiled once
    other = tofino.compile_cached("hash", src, {"NETKV_TNA_CPU_PORT": 320})
    assert other.out_dir != prog.out_dir and fake_bf_p4c.read_text().count("run\n") == 2
    monkeypatch.setenv("FAKE_BF_P4C_FAIL", "1")
    with pytest.raises(DriverError, match="(?s)bf-p4c failed .*stage overflow"):
        tofino.compile_cached("hash", src, {"NETKV_TNA_CPU_PORT": 128})
    cache = Path(os.environ["NETKV_P4_CACHE"])
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]   # no half folder left


class LocalShell:
    """The switch host's shell, played by this machine (``HostShell``)."""

    def __init__(self) -> None:
        self.commands: list[str] = []

    def run(self, command: str, timeout_s: float = 60.0, input_text: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        self.commands.append(command)
        return subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                              input=input_text, timeout=timeout_s, check=check)

    def copy_to(self, local: Path, remote: str) -> None:
        Path(remote).parent.mkdir(parents=True, exist_ok=True)
        Path(remote).write_bytes(local.read_bytes())

    def read(self, remote: str) -> bytes:
        try:
            return Path(remote).read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read {remote}: {exc}") from None


def test_backend_compiles_on_the_switch_host_with_the_tna_program_and_device_ports(
        fake_bf_p4c: Path, sde_present: None, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """On the testbed bf-p4c is the switch host's (its SDE's install/bin),
    run on p4src/ pushed into the run folder there; its output lands in this
    machine's cache, reused while nothing changed; the switch is started on
    the conf pushed beside it, with the SDE's environment and under setsid."""
    cfg = _cfg("pegasus", "target.tofino.cpu_port=320", f"target.tofino.sde={FAKE_SDE}")
    backend = backend_class("tofino")(cfg, lookup("pegasus"), "")
    assert backend.compiled is None and not fake_bf_p4c.exists()    # not compiled here
    run = tmp_path / "remote-run"
    run.mkdir()
    shell = LocalShell()
    backend.prepare_on_host(shell, str(run), "host 'sw'")
    log = fake_bf_p4c.read_text()
    assert f"{run}/p4src/pegasus/tna/pegasus.p4" in log and "-DNETKV_TNA_CPU_PORT=320" in log
    assert "-DNETKV_TNA_RECIRC_PORT=68" in log and f"SDE={FAKE_SDE}" in shell.commands[-1]
    prog = backend.program()
    assert prog.out_dir.parent == tmp_path / "cache"
    assert _unpack(prog.device_config_path.read_bytes())[1].startswith(b"BIN ")
    assert [f.name for f in backend.remote_files()] == [
        "pegasus.conf", "pegasus.p4info.txtpb", "tofino.bin", "context.json"]
    again = backend_class("tofino")(cfg, lookup("pegasus"), "")
    again.prepare_on_host(LocalShell(), str(run), "host 'sw'")
    assert again.program() == prog and fake_bf_p4c.read_text().count("run\n") == 1
    assert backend.special_ports() == (3, 4)             # 2 servers + 1 client, then CPU, recirc
    assert backend.command(["132", "140", "148"], Path("/w/run-x"), "t") == [
        "env", f"SDE={FAKE_SDE}", f"SDE_INSTALL={FAKE_SDE}/install", "setsid",
        f"{FAKE_SDE}/run_switchd.sh", "-c", "/w/run-x/pegasus.conf", "--skip-p4"]
    assert backend.dev_ports == [132, 140, 148]
    assert backend.tcp_ports() == [9559]
    backend.forwarded({9559: 40001})
    assert backend.endpoint == "127.0.0.1:40001"
    with pytest.raises(ConfigError) as e:
        backend.command(["eth0", "eth1"], tmp_path, "t")
    assert "device port numbers" in str(e.value) and "\n" not in str(e.value)
    # a failing compile there: one line naming the host, the compiler's words and its log
    monkeypatch.setenv("FAKE_BF_P4C_FAIL", "1")
    other = backend_class("tofino")(_cfg("hash", f"target.tofino.sde={FAKE_SDE}"),
                                    lookup("hash"), "")
    with pytest.raises(DriverError) as e:
        other.prepare_on_host(LocalShell(), str(run), "host 'sw'")
    msg = str(e.value)
    assert "\n" not in msg and "bf-p4c on host 'sw' failed" in msg and "stage overflow" in msg
    assert f"{run}/bf-p4c.log" in msg


def test_grpc_answers_only_for_an_http2_server(tmp_path: Path) -> None:
    """What ``ready`` waits for: a server whose first frame is SETTINGS. One
    that answers other bytes, one that closes at once, and no server at all
    do not count (through an SSH forward all three accept a connection)."""
    import socket
    import threading

    def server(reply: bytes) -> tuple[str, socket.socket]:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(4)

        def loop() -> None:
            while True:
                try:
                    conn, _ = s.accept()
                except OSError:
                    return
                conn.recv(64)
                conn.sendall(reply)
                conn.close()

        threading.Thread(target=loop, daemon=True).start()
        return f"127.0.0.1:{s.getsockname()[1]}", s

    h2, a = server(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
    text, b = server(b"hello, not http/2 at all\n")
    shut, c = server(b"")
    try:
        assert tofino.grpc_answers(h2)
        assert not tofino.grpc_answers(text) and not tofino.grpc_answers(shut)
    finally:
        for s in (a, b, c):
            s.shutdown(socket.SHUT_RDWR)    # wakes the accept (close alone does not)
            s.close()
    assert not tofino.grpc_answers(h2, timeout_s=0.5)   # closed now


# ---- the driver against a FAKE p4runtime-shell -------------------------------------------------

FAKE_TOFINO_SHELL = FAKE_SHELL + '''

class _TofinoCtx:
    p4info = NS(
        actions=[NS(preamble=NS(id=1, name="set_port"), params=[NS(name="port")]),
                 NS(preamble=NS(id=2, name="set_rack_port"), params=[NS(name="port")]),
                 NS(preamble=NS(id=3, name="set_addr"),
                    params=[NS(name="node"), NS(name="port"), NS(name="mgid")])],
        tables=[NS(preamble=NS(name="node_fwd"), match_fields=[NS(name="node")],
                   action_refs=[NS(id=1, scope=0, DEFAULT_ONLY=2)]),
                NS(preamble=NS(name="rack_port"), match_fields=[NS(name="dev_port")],
                   action_refs=[NS(id=2, scope=0, DEFAULT_ONLY=2)]),
                NS(preamble=NS(name="addr_table"), match_fields=[NS(name="srv_id")],
                   action_refs=[NS(id=3, scope=0, DEFAULT_ONLY=2)])],
        registers=[NS(preamble=NS(id=77, name="ver_next"), size=1,
                      type_spec=NS(bitstring=NS(bit=NS(bitwidth=32)))),
                   NS(preamble=NS(id=78, name="rset_size"), size=64,
                      type_spec=NS(bitstring=NS(bit=NS(bitwidth=8))))],
    )

    def get_obj(self, kind, name):
        return None


context = _TofinoCtx()


class MulticastGroupEntry(_Group):
    def add(self, port, rid=0):
        self.ports.append([port, rid])
        return self


class _Client:
    cells = {}

    def write_update(self, update):
        e = update.entity.register_entry
        idx = e.index.index
        log("reg_write", update.type, e.register_id, idx, e.data.bitstring.hex())
        for i in ([idx] if idx is not None else range(64)):
            self.cells[(e.register_id, i)] = e.data.bitstring

    def read_one(self, entity):
        e = entity.register_entry
        log("reg_read", e.register_id, e.index.index)
        got = self.cells.get((e.register_id, e.index.index), b"\\x00")
        return [NS(entities=[NS(register_entry=NS(data=NS(bitstring=got)))])]


client = _Client()


class PacketOut:
    def __init__(self, payload):
        self.payload, self.metadata = payload, {}

    def send(self):
        log("packet_out", self.payload.hex(), self.metadata)
'''

FAKE_PB2 = '''
class _NS:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class RegisterEntry:
    def __init__(self, register_id=0):
        self.register_id, self.index, self.data = register_id, _NS(index=None), _NS(bitstring=b"")


class Entity:
    def __init__(self, register_entry=None):
        self.register_entry = register_entry


class Update:
    MODIFY = 2

    def __init__(self, type=0, entity=None):
        self.type, self.entity = type, entity
'''


@pytest.fixture
def fake_p4runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """FAKE p4runtime_sh and p4.v1.p4runtime_pb2 packages that log what the
    driver asks (real ones imported earlier are set aside and put back)."""
    mods = ("p4runtime_sh", "p4")
    real = {m: sys.modules.pop(m) for m in list(sys.modules) if m.split(".")[0] in mods}
    root = tmp_path / "fake_p4rt"
    sh = root / "p4runtime_sh"
    sh.mkdir(parents=True)
    (sh / "__init__.py").write_text("")
    (sh / "shell.py").write_text(FAKE_TOFINO_SHELL)
    (sh / "context.py").write_text("class P4Type:\n    controller_packet_metadata = 'cpm'\n")
    (sh / "p4runtime.py").write_text("class P4RuntimeWriteException(Exception):\n    pass\n")
    pb = root / "p4" / "v1"
    pb.mkdir(parents=True)
    (root / "p4" / "__init__.py").write_text("")
    (pb / "__init__.py").write_text("")
    (pb / "p4runtime_pb2.py").write_text(FAKE_PB2)
    log = tmp_path / "p4rt.log"
    monkeypatch.setenv("NETKV_FAKE_SH_LOG", str(log))
    monkeypatch.syspath_prepend(str(root))
    yield log
    for name in [m for m in sys.modules if m.split(".")[0] in mods]:
        del sys.modules[name]
    sys.modules.update(real)


def _program(tmp_path: Path) -> tofino.TofinoProgram:
    prog = tofino.TofinoProgram("pegasus", "pegasus", tmp_path / "out")
    (prog.out_dir / "pipe").mkdir(parents=True)
    for p in (prog.p4info_path, prog.bin_path, prog.context_path, prog.device_config_path):
        p.write_bytes(b"x")
    return prog


def test_fake_p4runtime_driver_installs_the_rack_in_device_ports(
        tmp_path: Path, fake_p4runtime: Path) -> None:
    """Against a FAKE p4runtime-shell: the pipeline pushed as p4info + packed
    device config; rack_port (device -> rack port), the flood group with
    replica id = rack port, the CPU clone session, node_fwd to device ports,
    the C init's registers as P4Runtime RegisterEntry writes."""
    prog = _program(tmp_path)
    socks, ep = _listeners()
    dev = [132, 140, 148]
    try:
        drv = tofino.TofinoDriver.connect(
            prog, dev_ports=dev, grpc_addr=ep.grpc_addr, data_ports=range(3),
            node_ports={n: n for n in range(3)}, registers=[("ver_next", 0, 2)])
        try:
            drv.reg_write("rset_size", 5, 0x1FF)               # masked to 8 bits
            assert drv.reg_read("rset_size", 5) == 0xFF
            assert drv.reg_read_range("ver_next", 0, 1) == [2]
            drv.regs.reset(["rset_size"])
            assert drv.reg_read("rset_size", 5) == 0
            drv.packet_out(b"\xab", 2)
            drv.table_add("addr_table", [1], [1, 1, 33])        # only `port` is a port
            with pytest.raises(DriverError, match="no register 'ghost'"):
                drv.reg_read("ghost", 0)
            with pytest.raises(DriverError, match=r"rset_size\[64\] out of range"):
                drv.reg_write("rset_size", 64, 1)
            with pytest.raises(DriverError, match="rack port 3 has no device port"):
                drv.table_add("node_fwd", [9], [3])
        finally:
            drv.close()
    finally:
        for s in socks:
            s.close()
    events = _events(fake_p4runtime)
    assert events[0] == ["setup", ep.grpc_addr, 0,
                         [str(prog.p4info_path), str(prog.device_config_path)]]
    assert events[1:4] == [["insert", "rack_port", {"dev_port": str(d)}, "set_rack_port",
                            {"port": str(r)}] for r, d in enumerate(dev)]
    assert events[4] == ["mcast", FLOOD_MCAST_GRP, [[132, 0], [140, 1], [148, 2]]]
    assert events[5] == ["clone", CPU_CLONE_SESSION, [tofino.TOFINO_CPU_PORT]]
    assert events[6:9] == [["insert", "node_fwd", {"node": str(n)}, "set_port",
                            {"port": str(d)}] for n, d in enumerate(dev)]
    assert events[9] == ["reg_write", 2, 77, 0, "00000002"]
    assert ["reg_write", 2, 78, 5, "ff"] in events
    assert ["reg_write", 2, 78, None, "00"] in events          # reset: no index, every cell
    assert ["packet_out", "ab", {"egress_port": "148", "direct": "1", "pad": "0"}] in events
    assert ["insert", "addr_table", {"srv_id": "1"}, "set_addr",
            {"node": "1", "port": "140", "mgid": "33"}] in events
    assert events[-1] == ["teardown"]


def test_fake_p4runtime_driver_refuses_a_repeated_device_port(tmp_path: Path) -> None:
    with pytest.raises(DriverError, match="given twice"):
        tofino.TofinoDriver(_program(tmp_path), dev_ports=[132, 132])


def test_backends_and_drivers_name_no_protocol() -> None:
    """Target code stays protocol-agnostic: no protocol's name in the
    Tofino back-end or driver (the program path comes from the plug-in)."""
    from netkv.protocols import names

    for path in ("netkv/backends/tofino.py", "netkv/drivers/tofino.py",
                 "netkv/drivers/p4runtime.py"):
        text = (ROOT / path).read_text()
        code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
        code = code.split('"""', 2)[-1]                      # past the module docstring
        found = [p for p in names() if f"'{p}'" in code or f'"{p}' in code]
        assert not found, f"{path} names {found}"


# ---- the register path with the REAL P4Runtime protobufs (where netkv[bmv2] is installed) ----

_PB = "p4.v1.p4runtime_pb2"


@pytest.mark.skipif(__import__("importlib").util.find_spec("p4") is None,
                    reason="p4runtime protobufs not installed (pip install 'netkv[bmv2]')")
def test_register_entries_are_real_p4runtime_messages() -> None:
    """P4RuntimeRegisters builds real RegisterEntry updates and reads real
    ReadResponses (a fake client stands for the switch)."""
    import importlib

    from google.protobuf import text_format

    pb = importlib.import_module(_PB)
    p4info_pb2 = importlib.import_module("p4.config.v1.p4info_pb2")
    info = text_format.Parse('registers { preamble { id: 369 name: "rset_size" } '
                             'type_spec { bitstring { bit { bitwidth: 8 } } } size: 64 }',
                             p4info_pb2.P4Info())

    class Client:
        def __init__(self) -> None:
            self.updates: list[Any] = []

        def write_update(self, update: Any) -> None:
            self.updates.append(update)

        def read_one(self, entity: Any) -> list[Any]:
            resp = pb.ReadResponse()
            got = resp.entities.add()
            got.CopyFrom(entity)
            got.register_entry.data.bitstring = b"\x07"
            return [resp]

    client = Client()
    regs = tofino.P4RuntimeRegisters(client, info, pb)
    regs.write([("rset_size", 5, 0x1FF)])
    regs.reset(["rset_size"])
    one, every = (u.entity.register_entry for u in client.updates)
    assert client.updates[0].type == pb.Update.MODIFY
    assert (one.register_id, one.index.index, one.data.bitstring) == (369, 5, b"\xff")
    assert not every.HasField("index") and every.data.bitstring == b"\x00"
    assert regs.read([("rset_size", 3)]) == [7]


# ---- the whole driver with the REAL p4runtime-shell against a FAKE P4Runtime server -----------

P4INFO = """
tables { preamble { id: 101 name: "node_fwd" }
  match_fields { id: 1 name: "node" bitwidth: 16 match_type: EXACT }
  action_refs { id: 201 } action_refs { id: 202 scope: DEFAULT_ONLY } size: 4096 }
tables { preamble { id: 102 name: "rack_port" }
  match_fields { id: 1 name: "dev_port" bitwidth: 9 match_type: EXACT }
  action_refs { id: 203 } action_refs { id: 204 scope: DEFAULT_ONLY } size: 512 }
actions { preamble { id: 201 name: "set_port" } params { id: 1 name: "port" bitwidth: 9 } }
actions { preamble { id: 202 name: "node_miss" } }
actions { preamble { id: 203 name: "set_rack_port" } params { id: 1 name: "port" bitwidth: 16 } }
actions { preamble { id: 204 name: "NoAction" } }
registers { preamble { id: 369 name: "ver_next" }
  type_spec { bitstring { bit { bitwidth: 32 } } } size: 1 }
controller_packet_metadata { preamble { id: 301 name: "packet_in" }
  metadata { id: 1 name: "ingress_port" bitwidth: 16 }
  metadata { id: 2 name: "reason" bitwidth: 8 } metadata { id: 3 name: "pad" bitwidth: 8 } }
controller_packet_metadata { preamble { id: 302 name: "packet_out" }
  metadata { id: 1 name: "egress_port" bitwidth: 16 }
  metadata { id: 2 name: "direct" bitwidth: 8 } metadata { id: 3 name: "pad" bitwidth: 8 } }
"""


def _have_shell() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("p4runtime_sh", "grpc", "p4"))


@pytest.mark.skipif(not _have_shell(), reason="p4runtime-shell not installed "
                    "(pip install 'netkv[bmv2]')")
def test_real_shell_against_a_fake_p4runtime_server(tmp_path: Path) -> None:
    """The REAL p4runtime-shell drives a FAKE P4Runtime gRPC server (what a
    bf_switchd P4Runtime server would receive): the packed device config,
    rack_port and node_fwd entries in device ports, the flood group's
    replicas (device port, replica id = rack port), register writes and
    reads, a packet-out to a device port and a packet-in back."""
    from concurrent import futures

    import grpc
    from google.protobuf import text_format
    from p4.config.v1 import p4info_pb2
    from p4.v1 import p4runtime_pb2 as pb
    from p4.v1 import p4runtime_pb2_grpc

    seen: dict[str, list[Any]] = {"config": [], "updates": [], "packets": []}
    cells: dict[tuple[int, int], bytes] = {}

    class FakeServer(p4runtime_pb2_grpc.P4RuntimeServicer):
        def StreamChannel(self, requests: Any, context: Any) -> Any:
            for req in requests:
                if req.HasField("arbitration"):
                    resp = pb.StreamMessageResponse()
                    resp.arbitration.CopyFrom(req.arbitration)
                    resp.arbitration.status.code = 0
                    yield resp
                elif req.HasField("packet"):
                    seen["packets"].append(req.packet)
                    # answer with a packet-in from rack port 1 (the program's
                    # packet_in.ingress_port is a rack port already)
                    back = pb.StreamMessageResponse()
                    back.packet.payload = req.packet.payload[::-1]
                    md = back.packet.metadata.add()
                    md.metadata_id, md.value = 1, (1).to_bytes(2, "big")
                    yield back

        def SetForwardingPipelineConfig(self, req: Any, context: Any) -> Any:
            seen["config"].append(req.config)
            return pb.SetForwardingPipelineConfigResponse()

        def GetForwardingPipelineConfig(self, req: Any, context: Any) -> Any:
            resp = pb.GetForwardingPipelineConfigResponse()
            resp.config.CopyFrom(seen["config"][-1])
            return resp

        def Write(self, req: Any, context: Any) -> Any:
            for u in req.updates:
                seen["updates"].append(u)
                r = u.entity.register_entry
                if u.entity.HasField("register_entry"):
                    cells[(r.register_id, r.index.index)] = r.data.bitstring
            return pb.WriteResponse()

        def Read(self, req: Any, context: Any) -> Any:
            resp = pb.ReadResponse()
            for ent in req.entities:
                got = resp.entities.add()
                got.CopyFrom(ent)
                r = got.register_entry
                r.data.bitstring = cells.get((r.register_id, r.index.index), b"\x00")
            yield resp

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(FakeServer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    prog = _program(tmp_path)
    text_format.Parse(P4INFO, p4info_pb2.P4Info())                # the test's own P4Info parses
    prog.p4info_path.write_text(P4INFO)
    prog.device_config_path.write_bytes(tofino.pack_pipeline_config("hash", b"BIN", b"{}"))
    try:
        drv = tofino.TofinoDriver.connect(
            prog, dev_ports=[132, 140], grpc_addr=f"127.0.0.1:{port}", data_ports=range(2),
            node_ports={0: 0, 1: 1}, registers=[("ver_next", 0, 2)], connect_timeout_s=5)
        try:
            assert drv.reg_read("ver_next", 0) == 2
            drv.packet_out(b"\x01\x02", 1)
            got: list[Any] = []
            for _ in range(100):
                got += drv.cpu_poll()
                if got:
                    break
                __import__("time").sleep(0.02)
            assert [(p.ingress_port, p.frame) for p in got] == [(1, b"\x02\x01")]
        finally:
            drv.close()
    finally:
        server.stop(0)
    assert _unpack(seen["config"][0].p4_device_config) == [b"hash", b"BIN", b"{}"]
    tables = {(u.entity.table_entry.table_id, u.entity.table_entry.match[0].exact.value,
               u.entity.table_entry.action.action.params[0].value)
              for u in seen["updates"] if u.entity.HasField("table_entry")}
    be = lambda v, n: v.to_bytes(n, "big")  # noqa: E731 - p4runtime-shell 0.0.6 sends full width
    assert tables == {(102, be(132, 2), be(0, 2)), (102, be(140, 2), be(1, 2)),
                      (101, be(0, 2), be(132, 2)), (101, be(1, 2), be(140, 2))}
    groups = [u.entity.packet_replication_engine_entry.multicast_group_entry
              for u in seen["updates"] if u.entity.HasField("packet_replication_engine_entry")]
    flood = [g for g in groups if g.multicast_group_id == FLOOD_MCAST_GRP]
    assert [(r.egress_port, r.instance) for r in flood[0].replicas] == [(132, 0), (140, 1)]
    assert seen["packets"][0].payload == b"\x01\x02"
    assert {m.metadata_id: m.value for m in seen["packets"][0].metadata}[1] == be(140, 2)


def test_stop_reaches_the_script_grandchild(tmp_path: Path) -> None:
    """run_switchd.sh starts bf_switchd as a child (not exec): stopping the
    script alone would leave the switch running. A stand-in script with a
    child that ignores nothing, started as switchd_command starts it
    (setsid), is gone with its child after stop_group."""
    script = tmp_path / "run_switchd.sh"
    pidfile = tmp_path / "child.pid"
    script.write_text(f"#!/bin/bash\nsleep 300 &\necho $! > {pidfile}\nwait\n")
    script.chmod(0o755)
    proc = subprocess.Popen(["setsid", str(script)], text=True)
    try:
        for _ in range(100):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            __import__("time").sleep(0.05)
        child = int(pidfile.read_text())
        tofino.stop_group(proc, timeout_s=5)
        assert proc.poll() is not None
        for _ in range(100):
            if not Path(f"/proc/{child}").exists():
                break
            __import__("time").sleep(0.05)
        assert not Path(f"/proc/{child}").exists(), "the script's child outlived stop_group"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_grpc_answers_a_real_grpc_server() -> None:
    """``ready``'s check against a real gRPC server (grpcio's, with no
    service: bf_switchd's P4Runtime server is a gRPC C++ server, the same
    core): it answers the HTTP/2 preface with SETTINGS. Skips without
    grpcio (p4runtime-shell, `netkv[bmv2]`, brings it)."""
    grpc = pytest.importorskip("grpc")
    from concurrent.futures import ThreadPoolExecutor

    server = grpc.server(ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        assert tofino.grpc_answers(f"127.0.0.1:{port}")
    finally:
        server.stop(grace=None).wait()
    assert not tofino.grpc_answers(f"127.0.0.1:{port}", timeout_s=0.5)
