"""Bmv2Driver: a BMv2 ``simple_switch_grpc`` running a netkv P4 program.

How each part of the SwitchDriver interface reaches BMv2
(shared/design/BMV2-NOTES.md has the measured facts this follows):

- tables, multicast groups, the CPU clone session, packet-in and
  packet-out: P4Runtime, through p4runtime-shell (``netkv[bmv2]``);
- registers: the Thrift CLI ``simple_switch_CLI`` (``register_read`` /
  ``register_write``), because BMv2 answers P4Runtime register requests with
  UNIMPLEMENTED. Both work at the same time on one switch.

Names are the C pipelines' names (``node_fwd``, ``rkeys``, ``ver_next``, ...):
the P4 programs declare them with absolute ``@name(".x")`` annotations, and
this driver still resolves a short name to the full one found in the
compiled JSON / P4Info, so either form works.

p4runtime-shell keeps its client in module globals: one ``Bmv2Driver`` per
process (a second one raises ``DriverError``). A failed ``setup()`` raises
``SystemExit``; it is turned into ``DriverError``. ``close()`` always calls
``teardown()`` (a process that exits without it hangs).

The parts a target needs:
- ``require_bmv2()``             one-line ``ConfigError`` when a binary is missing
- ``compile_program()``          p4c-bm2-ss -> BMv2 JSON + P4Info
- ``switch_command()``           the simple_switch_grpc command line (run it in
                                 the switch's namespace / Mininet node)
- ``Bmv2Driver.connect()``       push the program, install the flood group,
                                 the CPU clone session and the rack plan's
                                 ``node_fwd`` entries, write the registers the
                                 C pipeline's init sets (``initial_register_writes``)

and for target=mininet (``switch=bmv2``):
- ``compile_cached()``           compile_program into a cache folder keyed by the
                                 sources, defines and compiler (p4c takes tens of s)
- ``free_endpoint()``            gRPC and Thrift ports of one rack's switch
- ``configure_in_child()``       connect + close in a child process, for a switch
                                 no controller drives (one client per process)
- ``netkv.drivers.base.BatchedWrites``  register writes in one CLI run
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netkv.config.compose import ConfigError
from netkv.constants import (  # noqa: F401 - p4src/common/constants.p4, re-exported
    CPU_CLONE_SESSION,
    CPU_PORT,
    FLOOD_MCAST_GRP,
)
from netkv.drivers import p4runtime
from netkv.drivers.base import DriverError
from netkv.drivers.p4runtime import P4RuntimeDriver
from netkv.protocols.plugin import P4Semantics, parse_params  # noqa: F401 - re-exported

# ---- what BMv2 needs --------------------------------------------------------------

COMPILER = "p4c-bm2-ss"
SWITCH = "simple_switch_grpc"
CLI = "simple_switch_CLI"
P4RUNTIME_SHELL_MODULE = "p4runtime_sh"
INSTALL_HINT = (
    "build p4c and behavioral-model (with --with-pi, for simple_switch_grpc) from "
    "source (github.com/p4lang) or use the p4lang/p4c and p4lang/behavioral-model "
    "docker images; pip install 'netkv[bmv2]' for p4runtime-shell"
)



def missing_bmv2() -> list[str]:
    """The pieces of the BMv2 toolchain that are not installed."""
    missing = [b for b in (COMPILER, SWITCH, CLI) if shutil.which(b) is None]
    if importlib.util.find_spec(P4RUNTIME_SHELL_MODULE) is None:
        missing.append("p4runtime-shell")
    return missing


def require_bmv2() -> None:
    """Raise a one-line ``ConfigError`` naming what ``switch=bmv2`` lacks."""
    p4runtime.require_toolchain("bmv2", missing_bmv2(), INSTALL_HINT)


# ---- programs -----------------------------------------------------------------------
# Which program, with which defines and initial registers, is the protocol's
# business (its plug-in's ``P4Program``); this module only compiles and drives.


def p4src_dir() -> Path:
    """The ``p4src/`` folder: $NETKV_P4SRC, else the checkout's."""
    override = os.environ.get("NETKV_P4SRC")
    if override:
        return Path(override).resolve()
    return Path(__file__).resolve().parents[2] / "p4src"


@dataclass(frozen=True)
class CompiledProgram:
    program: str  # a label: the protocol's name, for the cache folder and messages
    json_path: Path
    p4info_path: Path
    defines: dict[str, int] = field(default_factory=dict)


def compile_command(
    source: Path, out_dir: Path, name: str, defines: Mapping[str, int] | None = None
) -> list[str]:
    cmd = [
        COMPILER, "--arch", "v1model",
        "--p4runtime-files", str(out_dir / f"{name}.p4info.txtpb"),
        "-o", str(out_dir / f"{name}.json"),
    ]
    for key, value in sorted((defines or {}).items()):
        cmd.append(f"-D{key}={int(value)}")
    cmd.append(str(source))
    return cmd


def compile_program(
    program: str,
    src: Path,
    out_dir: str | Path,
    defines: Mapping[str, int] | None = None,
    timeout_s: float = 300.0,
) -> CompiledProgram:
    """Compile ``src`` (under p4src/) with p4c-bm2-ss into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = src.stem
    cmd = compile_command(src, out, name, defines)
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        raise DriverError(f"{COMPILER} not found: {INSTALL_HINT}") from None
    if res.returncode != 0:
        tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-20:])
        raise DriverError(f"{COMPILER} failed on {src} (exit {res.returncode}):\n{tail}")
    return CompiledProgram(program, out / f"{name}.json", out / f"{name}.p4info.txtpb",
                           dict(defines or {}))


def p4_cache_dir() -> Path:
    """Where compiled programs are kept: $NETKV_P4_CACHE, else
    $XDG_CACHE_HOME/netkv/p4 (~/.cache/netkv/p4)."""
    override = os.environ.get("NETKV_P4_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "netkv" / "p4"


def program_digest(program: str, src: Path, defines: Mapping[str, int],
                   compiler_name: str = COMPILER) -> str:
    """What a compiled program depends on: every ``.p4`` under p4src/ (the
    programs include common/), the defines and the compiler binary (path
    and mtime, so a rebuilt p4c recompiles)."""
    h = hashlib.sha256()
    h.update(program.encode() + b"\0" + str(src).encode())
    h.update(json.dumps(sorted((k, int(v)) for k, v in defines.items())).encode())
    compiler = shutil.which(compiler_name)
    h.update(f"{compiler}:{os.stat(compiler).st_mtime_ns if compiler else 0}".encode())
    root = p4src_dir()
    for f in sorted(root.rglob("*.p4")):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def compile_cached(program: str, src: Path, defines: Mapping[str, int] | None = None,
                   cache_dir: str | Path | None = None) -> CompiledProgram:
    """``compile_program`` into ``<cache>/<program>-<digest>/``, reused while
    the sources, defines and compiler stay the same: p4c takes tens of
    seconds, and a run builds up to two racks (the SLO's hash reference)."""
    defines = {k: int(v) for k, v in (defines or {}).items()}
    root = Path(cache_dir) if cache_dir is not None else p4_cache_dir()
    out = root / f"{program}-{program_digest(program, src, defines)}"
    name = src.stem
    done = CompiledProgram(program, out / f"{name}.json", out / f"{name}.p4info.txtpb", defines)
    if done.json_path.is_file() and done.p4info_path.is_file():
        return done
    root.mkdir(parents=True, exist_ok=True)
    # compiled next to the cache and renamed into place: a concurrent run (or
    # a compiler killed half-way) never leaves a folder with half its files
    tmp = Path(tempfile.mkdtemp(prefix=f".{program}-", dir=root))
    try:
        compile_program(program, src, tmp, defines)
        try:
            tmp.rename(out)
        except OSError:
            if not done.json_path.is_file():  # not another run's finished copy
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return done


@dataclass(frozen=True)
class Bmv2Endpoint:
    """Where one simple_switch_grpc listens for P4Runtime (gRPC) and Thrift."""

    grpc_addr: str = "127.0.0.1:9559"
    thrift_port: int = 9090
    device_id: int = 0


def free_endpoint(host: str = "127.0.0.1") -> Bmv2Endpoint:
    """Two TCP ports free right now. Every rack's switch runs in the root
    namespace, and a run may hold two racks (the SLO's hash reference next
    to the protocol's rack) beside other runs: fixed ports would collide."""
    socks: list[socket.socket] = []
    try:
        for _ in range(2):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.bind((host, 0))   # both held open until both are chosen: two different ports
        grpc_port, thrift_port = (s.getsockname()[1] for s in socks)
    finally:
        for s in socks:
            s.close()
    return Bmv2Endpoint(f"{host}:{grpc_port}", thrift_port)


def switch_command(
    ports: Mapping[int, str],
    *,
    grpc_addr: str = "127.0.0.1:9559",
    thrift_port: int = 9090,
    device_id: int = 0,
    cpu_port: int = CPU_PORT,
    log_file: str | None = None,
    notifications_addr: str | None = None,
) -> list[str]:
    """The simple_switch_grpc command line: no program yet (pushed over
    P4Runtime), one ``-i port@iface`` per data port, the CPU port for
    packet-in/out. ``notifications_addr`` (e.g. ``ipc:///run/x/notify.ipc``):
    BMv2 binds ``ipc:///tmp/bmv2-<device>-notifications.ipc`` by default and
    exits when that is taken, so two switches at once (a rack and the SLO's
    hash reference rack) need one each."""
    cmd = [SWITCH, "--no-p4", "--device-id", str(device_id), "--thrift-port", str(thrift_port)]
    if notifications_addr:
        cmd += ["--notifications-addr", notifications_addr]
    for port, iface in sorted(ports.items()):
        if port == cpu_port:
            raise DriverError(f"data port {port} is the CPU port")
        cmd += ["-i", f"{port}@{iface}"]
    if log_file:
        cmd += ["--log-file", log_file, "--log-flush"]
    cmd += ["--", "--grpc-server-addr", grpc_addr, "--cpu-port", str(cpu_port)]
    return cmd


def wait_for_tcp(addr: str, timeout_s: float) -> None:
    """Wait until something listens on ``host:port``."""
    p4runtime.wait_for_tcp(addr, timeout_s, "BMv2")


# ---- the Thrift CLI (registers) -------------------------------------------------------

_REG_LINE = re.compile(r"(\S+)\[(\d+)\]=\s*(-?\d+)")


def cli_run(thrift_port: int, commands: Sequence[str], thrift_ip: str = "127.0.0.1",
            timeout_s: float = 30.0) -> str:
    """Run ``commands`` in one ``simple_switch_CLI``; its output. An error
    line, or a non-zero exit, raises DriverError with the first one."""
    if not commands:
        return ""
    cmd = [CLI, "--thrift-port", str(thrift_port), "--thrift-ip", thrift_ip]
    try:
        res = subprocess.run(cmd, input="\n".join(commands) + "\n", capture_output=True,
                             text=True, timeout=timeout_s)
    except FileNotFoundError:
        raise DriverError(f"{CLI} not found: {INSTALL_HINT}") from None
    out = res.stdout
    bad = [ln for ln in out.splitlines()
           if re.search(r"\b(Error|Invalid|exception)\b", ln, re.IGNORECASE)]
    if res.returncode != 0 or bad:
        detail = (bad[0] if bad else (res.stderr or out).strip().splitlines()[-1:] or [""])
        raise DriverError(f"{CLI}: {detail if isinstance(detail, str) else detail[0]}")
    return out


def loop_queue_commands(port: int, rate_pps: float, depth: int) -> list[str]:
    """The loop port's egress queue as a recirculation port (digest §8,
    "BMv2 / Mininet emulation"; BMV2-NOTES: BMv2's own recirculate() would
    starve the clients): ``depth`` packets, drained at ``rate_pps`` (0: as
    fast as the switch goes, BMv2's default)."""
    cmds = [f"set_queue_depth {depth} {port}"]
    if rate_pps > 0:
        cmds.append(f"set_queue_rate {max(1, round(rate_pps))} {port}")
    return cmds


class ThriftRegisters:
    """Register access through ``simple_switch_CLI`` (one process per batch)."""

    def __init__(self, json_path: Path, thrift_port: int, thrift_ip: str = "127.0.0.1",
                 timeout_s: float = 30.0) -> None:
        self.thrift_port = thrift_port
        self.thrift_ip = thrift_ip
        self.timeout_s = timeout_s
        self.registers: dict[str, tuple[str, int, int]] = {}  # short/full -> (full, size, width)
        spec = json.loads(Path(json_path).read_text())
        for reg in spec.get("register_arrays", []):
            full = reg["name"]
            entry = (full, int(reg["size"]), int(reg["bitwidth"]))
            stripped = full.lstrip(".")
            for alias in {full, stripped, stripped.rsplit(".", 1)[-1]}:
                if alias in self.registers and self.registers[alias][0] != full:
                    self.registers[alias] = ("", 0, 0)  # ambiguous suffix
                else:
                    self.registers[alias] = entry

    def resolve(self, name: str, index: int) -> tuple[str, int]:
        full, size, width = self.registers.get(name, ("", 0, 0))
        if not full:
            raise DriverError(f"BMv2: no register {name!r}")
        if not 0 <= index < size:
            raise DriverError(f"BMv2: register {name}[{index}] out of range (size {size})")
        return full, width

    def run(self, commands: Sequence[str]) -> str:
        return cli_run(self.thrift_port, commands, self.thrift_ip, self.timeout_s)

    def read(self, cells: Sequence[tuple[str, int]]) -> list[int]:
        resolved = [(self.resolve(name, idx)[0], idx) for name, idx in cells]
        out = self.run([f"register_read {full} {idx}" for full, idx in resolved])
        values = [(m.group(1), int(m.group(2)), int(m.group(3))) for m in _REG_LINE.finditer(out)]
        if len(values) != len(resolved):
            raise DriverError(f"{CLI}: expected {len(resolved)} register values, got {len(values)}")
        return [v for _, _, v in values]

    def reset(self, names: Sequence[str]) -> None:
        """Zero whole register arrays (``register_reset``)."""
        self.run([f"register_reset {self.resolve(n, 0)[0]}" for n in names])

    def write(self, cells: Iterable[tuple[str, int, int]]) -> None:
        cmds = []
        for name, idx, value in cells:
            full, width = self.resolve(name, idx)
            value = int(value) & ((1 << width) - 1)  # as the C pipeline masks to the width
            cmds.append(f"register_write {full} {idx} {value}")
        self.run(cmds)


# ---- the driver ---------------------------------------------------------------------------


class Bmv2Driver(P4RuntimeDriver):
    """One BMv2 switch: P4Runtime (p4runtime-shell) + Thrift CLI for registers."""

    label = "BMv2"
    install_hint = INSTALL_HINT

    def __init__(self, compiled: CompiledProgram, *, grpc_addr: str = "127.0.0.1:9559",
                 thrift_port: int = 9090, device_id: int = 0, cpu_port: int = CPU_PORT,
                 election_id: tuple[int, int] = (0, 1),
                 semantics: P4Semantics | None = None) -> None:
        super().__init__(grpc_addr=grpc_addr, device_id=device_id, cpu_port=cpu_port,
                         election_id=election_id, semantics=semantics)
        self.compiled = compiled
        self.regs = ThriftRegisters(compiled.json_path, thrift_port)

    def pipeline_config(self, sh: Any) -> Any:
        return sh.FwdPipeConfig(str(self.compiled.p4info_path), str(self.compiled.json_path))

    def wait_ready(self, timeout_s: float) -> None:
        wait_for_tcp(self.grpc_addr, timeout_s)
        wait_for_tcp(f"{self.regs.thrift_ip}:{self.regs.thrift_port}", timeout_s)


def start_switch(ports: Mapping[int, str], *, log_file: str | None = None,
                 **kw: Any) -> subprocess.Popen:
    """Start simple_switch_grpc in this namespace (tests, single-host runs).
    Mininet targets run ``switch_command()`` inside the switch node instead."""
    cmd = switch_command(ports, log_file=log_file, **kw)
    try:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except FileNotFoundError:
        raise DriverError(f"{SWITCH} not found: {INSTALL_HINT}") from None


# ---- configuring a switch from a child process -------------------------------------------


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def configure_in_child(compiled: CompiledProgram, endpoint: Bmv2Endpoint, *,
                       data_ports: Sequence[int] = (),
                       registers: Sequence[tuple[str, int, int]] = (),
                       node_ports: Mapping[int, int] | None = None,
                       connect_timeout_s: float = 30.0, timeout_s: float = 180.0) -> None:
    """``Bmv2Driver.connect`` then ``close`` in a child Python process, for a
    switch no controller drives. p4runtime-shell allows one client
    per process, and a run measures the SLO's hash reference while the
    protocol's rack and its controller's driver are up; BMv2 keeps the
    pipeline, entries and registers after the client leaves."""
    spec = {
        "program": compiled.program, "json": str(compiled.json_path),
        "p4info": str(compiled.p4info_path), "defines": compiled.defines,
        "grpc_addr": endpoint.grpc_addr, "thrift_port": endpoint.thrift_port,
        "device_id": endpoint.device_id, "data_ports": [int(p) for p in data_ports],
        "node_ports": sorted((int(n), int(p)) for n, p in (node_ports or {}).items()),
        "registers": [[str(n), int(i), int(v)] for n, i, v in registers],
        "connect_timeout_s": connect_timeout_s,
    }
    env = dict(os.environ)
    # the child imports this very package, wherever it was imported from
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH")) if p)
    try:
        res = subprocess.run([sys.executable, "-m", "netkv.drivers.bmv2", "configure"],
                             input=json.dumps(spec), capture_output=True, text=True,
                             timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        raise DriverError(f"configuring BMv2 at {endpoint.grpc_addr}: no answer after "
                          f"{timeout_s:.0f} s") from None
    if res.returncode != 0:
        lines = [ln for ln in (res.stderr or res.stdout).strip().splitlines() if ln.strip()]
        raise DriverError(f"configuring BMv2 at {endpoint.grpc_addr}: "
                          f"{lines[-1] if lines else f'exit {res.returncode}'}")


def _configure_main(text: str) -> int:
    """The child of ``configure_in_child``: the spec as JSON on stdin; one
    error line on stderr and exit 1 when it fails."""
    spec = json.loads(text)
    compiled = CompiledProgram(spec["program"], Path(spec["json"]), Path(spec["p4info"]),
                               {k: int(v) for k, v in spec["defines"].items()})
    try:
        drv = Bmv2Driver.connect(
            compiled, data_ports=spec["data_ports"],
            registers=[tuple(r) for r in spec["registers"]], node_ports=dict(spec["node_ports"]),
            connect_timeout_s=spec["connect_timeout_s"], grpc_addr=spec["grpc_addr"],
            thrift_port=spec["thrift_port"], device_id=spec["device_id"])
        drv.close()
    except (DriverError, ConfigError, OSError) as exc:
        # one line: the parent reports the child's last stderr line
        print(f"{type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["configure"]:
        print("usage: python -m netkv.drivers.bmv2 configure < spec.json", file=sys.stderr)
        sys.exit(2)
    sys.exit(_configure_main(sys.stdin.read()))
