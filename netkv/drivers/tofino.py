"""TofinoDriver: a Tofino switch (bf_switchd of an Intel/Barefoot SDE) running
a netkv TNA program (p4src/<p>/tna/<p>.p4), over P4Runtime.

UNTESTED against a real Tofino: no SDE (bf-p4c, bf_switchd) exists on this
project's machines; the driver is tested against a fake P4Runtime shell
(tests/test_tofino.py). docs/testbed.md "Tofino" says what was and was not
checked.

What differs from BMv2 (netkv/drivers/p4runtime.py has the rest):

- the pipeline config is bf-p4c's output packed as PI's Tofino device config
  (program name, tofino.bin, context.json, each behind its little-endian
  32-bit length): what bf_switchd's P4Runtime server (and Stratum-bf) takes;
- registers are P4Runtime ``RegisterEntry`` reads and writes by the names in
  the P4Info (the programs' absolute ``@name(".x")``: the C pipelines'
  names); a name's whole array is reset by one write without an index. Not BF
  Runtime: one protocol for tables, groups, packets and registers, which
  one fake tests, and bfrt_grpc ships only inside the SDE;
- ports: the controller and the C pipelines number ports by the rack plan
  (node i behind rack port i); a Tofino's ports are device ports. The driver
  maps rack port i to ``dev_ports[i]`` in every action parameter named
  ``port`` (``node_fwd``'s set_port, an address table's set_addr), multicast
  replicas (whose replica id is the rack port: the egress readdresses copies
  by it) and packet-out, back in packet-in, and installs ``rack_port``
  (device port -> rack port) for the program's trust boundary.

The parts a back-end needs:
- ``missing_tofino()`` / ``require_tofino()``  what the SDE lacks, in one line
- ``tna_source()``          the TNA twin of a v1model program path
- ``compile_command()`` / ``compile_cached()``  bf-p4c --target tofino --arch tna
- ``switchd_command()``     $SDE/run_switchd.sh on the compiled program's conf
- ``pack_pipeline_config()`` the device config bytes
- ``compile_on_host()``     bf-p4c on the switch host (testbed), its output fetched
- ``grpc_answers()``        an HTTP/2 server (bf_switchd's P4Runtime) answers there
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netkv.config.compose import ConfigError
from netkv.drivers import bmv2
from netkv.drivers.base import DriverError
from netkv.drivers.p4runtime import P4RuntimeDriver, require_toolchain
from netkv.protocols.plugin import P4Semantics

if TYPE_CHECKING:
    from netkv.backends.base import HostShell

COMPILER = "bf-p4c"
SWITCHD = "run_switchd.sh"          # under $SDE
TOFINO_CPU_PORT = 64                # p4src/common/tna/shell.p4 NETKV_TNA_CPU_PORT
P4RUNTIME_SHELL_MODULE = "p4runtime_sh"
PROTOBUF_MODULE = "p4.v1.p4runtime_pb2"
INSTALL_HINT = ("install an Intel P4 Studio SDE built with P4Runtime, source its "
                "set_sde.bash ($SDE, $SDE_INSTALL, bf-p4c on PATH); pip install "
                "'netkv[bmv2]' for p4runtime-shell")


def missing_tofino() -> list[str]:
    """The pieces of the Tofino toolchain that are not here."""
    missing = []
    if shutil.which(COMPILER) is None:
        missing.append(COMPILER)
    sde = os.environ.get("SDE")
    if not sde or not os.access(Path(sde) / SWITCHD, os.X_OK):
        missing.append(f"$SDE/{SWITCHD}" + ("" if sde else " ($SDE unset)"))
    if not os.environ.get("SDE_INSTALL"):   # run_switchd.sh refuses to start without it
        missing.append("$SDE_INSTALL")
    if importlib.util.find_spec(P4RUNTIME_SHELL_MODULE) is None:
        missing.append("p4runtime-shell")
    return missing


def require_tofino() -> None:
    """Raise a one-line ``ConfigError`` naming what ``switch=tofino`` lacks."""
    require_toolchain("tofino", missing_tofino(), INSTALL_HINT)


def missing_driver() -> list[str]:
    """What this machine needs when bf_switchd and bf-p4c are on the switch
    host: only the P4Runtime client."""
    return [] if importlib.util.find_spec(P4RUNTIME_SHELL_MODULE) else ["p4runtime-shell"]


def tna_source(v1model_source: str) -> str:
    """``<p>/<p>.p4`` -> ``<p>/tna/<p>.p4``: where a program's TNA twin lives."""
    src = Path(v1model_source)
    return str(src.parent / "tna" / src.name)


@dataclass(frozen=True)
class TofinoProgram:
    """bf-p4c's output folder for one program."""

    program: str               # a label: the protocol's name
    name: str                  # the P4 file's stem: bf-p4c's program name
    out_dir: Path
    defines: dict[str, int] = field(default_factory=dict)

    @property
    def p4info_path(self) -> Path:
        return self.out_dir / f"{self.name}.p4info.txtpb"

    @property
    def conf_path(self) -> Path:
        return self.out_dir / f"{self.name}.conf"

    @property
    def bin_path(self) -> Path:
        return self.out_dir / "pipe" / "tofino.bin"      # Pipeline(...) pipe;

    @property
    def context_path(self) -> Path:
        return self.out_dir / "pipe" / "context.json"

    @property
    def device_config_path(self) -> Path:
        return self.out_dir / f"{self.name}.device_config.bin"

    def complete(self) -> bool:
        return all(p.is_file() for p in (self.p4info_path, self.bin_path, self.context_path))


def compile_command(source: Path, out_dir: Path, name: str,
                    defines: Mapping[str, int] | None = None, target: str = "tofino") -> list[str]:
    cmd = [COMPILER, "--target", target, "--arch", "tna" if target == "tofino" else "t2na",
           "--p4runtime-files", str(out_dir / f"{name}.p4info.txtpb"), "-o", str(out_dir)]
    cmd += [f"-D{k}={int(v)}" for k, v in sorted((defines or {}).items())]
    cmd.append(str(source))
    return cmd


def pack_pipeline_config(name: str, tofino_bin: bytes, context_json: bytes) -> bytes:
    """PI's Tofino device config: name, tofino.bin, context.json, each
    preceded by its length (little-endian uint32)."""
    out = b""
    for part in (name.encode(), tofino_bin, context_json):
        out += struct.pack("<I", len(part)) + part
    return out


def _compile_into(prog: TofinoProgram, src: Path, timeout_s: float = 1800.0) -> None:
    cmd = compile_command(src, prog.out_dir, prog.name, prog.defines)
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        raise DriverError(f"{COMPILER} not found: {INSTALL_HINT}") from None
    if res.returncode != 0 or not prog.complete():
        tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-20:])
        raise DriverError(f"{COMPILER} failed on {src} (exit {res.returncode}):\n{tail}")
    prog.device_config_path.write_bytes(pack_pipeline_config(
        prog.name, prog.bin_path.read_bytes(), prog.context_path.read_bytes()))


def compile_cached(program: str, src: Path, defines: Mapping[str, int] | None = None,
                   cache_dir: str | Path | None = None) -> TofinoProgram:
    """bf-p4c into ``<cache>/tofino-<program>-<digest>/``, reused while the
    sources, defines and compiler stay the same (bf-p4c takes minutes);
    compiled beside it and renamed into place, as ``bmv2.compile_cached``."""
    defines = {k: int(v) for k, v in (defines or {}).items()}
    root = Path(cache_dir) if cache_dir is not None else bmv2.p4_cache_dir()
    out = root / f"tofino-{program}-{bmv2.program_digest(program, src, defines, COMPILER)}"
    return _cached(TofinoProgram(program, src.stem, out, defines),
                   lambda prog: _compile_into(prog, src))


def _cached(done: TofinoProgram, fill: Callable[[TofinoProgram], None]) -> TofinoProgram:
    """``done`` if complete, else ``fill`` a fresh folder beside it and rename
    it into place (another run's finished copy wins): no half folder stays."""
    if done.complete() and done.device_config_path.is_file():
        return done
    root = done.out_dir.parent
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tofino-{done.program}-", dir=root))
    try:
        fill(TofinoProgram(done.program, done.name, tmp, done.defines))
        try:
            tmp.rename(done.out_dir)
        except OSError:
            if not done.complete():   # not another run's finished copy
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return done


def p4src_archive() -> bytes:
    """Every .p4 under p4src/ (the programs include common/), gzipped tar."""
    root, buf = bmv2.p4src_dir(), io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for f in sorted(root.rglob("*.p4")):
            tar.add(f, arcname=str(f.relative_to(root)))
    return buf.getvalue()


# what the driver and the switch need of bf-p4c's output, relative to it
OUTPUTS = ("{name}.p4info.txtpb", "{name}.conf", "pipe/tofino.bin", "pipe/context.json")


def compile_on_host(shell: "HostShell", where: str, folder: str, sde: str, program: str,
                    src: Path, defines: Mapping[str, int] | None = None,
                    cache_dir: str | Path | None = None,
                    timeout_s: float = 1800.0) -> TofinoProgram:
    """bf-p4c of the switch host's SDE (``<sde>/install/bin``) on p4src/ pushed
    into ``folder`` there; its output fetched into this machine's cache
    (the driver pushes the pipeline from here), keyed by the sources, the
    defines and that compiler's size and mtime, as ``compile_cached``."""
    defines = {k: int(v) for k, v in (defines or {}).items()}
    q = shlex.quote
    compiler = f"{sde}/install/bin/{COMPILER}"
    ident = shell.run(f"stat -L -c '%s %Y' {q(compiler)}", check=False).stdout.strip()
    key = f"{bmv2.program_digest(program, src, defines, COMPILER)}\0{compiler}\0{ident}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    root = Path(cache_dir) if cache_dir is not None else bmv2.p4_cache_dir()
    out = root / f"tofino-{program}-{digest}"
    rsrc, rout, log = f"{folder}/p4src", f"{folder}/p4out", f"{folder}/{COMPILER}.log"

    def fill(got: TofinoProgram) -> None:
        (got.out_dir / "p4src.tar.gz").write_bytes(p4src_archive())
        shell.copy_to(got.out_dir / "p4src.tar.gz", f"{folder}/p4src.tar.gz")
        (got.out_dir / "p4src.tar.gz").unlink()
        cmd = compile_command(Path(rsrc) / src.relative_to(bmv2.p4src_dir()), Path(rout),
                              src.stem, defines)
        res = shell.run(f"mkdir -p {q(rsrc)} {q(rout)} && tar xzf {q(folder)}/p4src.tar.gz "
                        f"-C {q(rsrc)} && SDE={q(sde)} SDE_INSTALL={q(sde)}/install "
                        f"{shlex.join([compiler, *cmd[1:]])} >{q(log)} 2>&1",
                        timeout_s=timeout_s, check=False)
        if res.returncode != 0:
            try:
                tail = " ".join(shell.read(log).decode(errors="replace").split())[-300:]
            except ConfigError:     # the host's RemoteError: the log is not there
                tail = " ".join(res.stderr.split())[-300:]
            raise DriverError(f"{COMPILER} on {where} failed on {src.name} (exit "
                              f"{res.returncode}): {tail} (log: {log})")
        for rel in (r.format(name=src.stem) for r in OUTPUTS):
            (got.out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (got.out_dir / rel).write_bytes(shell.read(f"{rout}/{rel}"))
        got.device_config_path.write_bytes(pack_pipeline_config(
            got.name, got.bin_path.read_bytes(), got.context_path.read_bytes()))

    return _cached(TofinoProgram(program, src.stem, out, defines), fill)


# HTTP/2's client preface and an empty SETTINGS frame (RFC 9113, 3.4)
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def grpc_answers(addr: str, timeout_s: float = 2.0) -> bool:
    """Whether an HTTP/2 server (a gRPC one: bf_switchd's P4Runtime) answers
    at ``addr``: its first frame is SETTINGS. Through an SSH forward a TCP
    connect alone proves nothing: the forward's local end accepts at once."""
    host, _, port = addr.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as s:
            s.settimeout(timeout_s)
            s.sendall(H2_PREFACE)
            head = b""
            while len(head) < 9:
                chunk = s.recv(9 - len(head))
                if not chunk:
                    return False
                head += chunk
            return head[3] == 4
    except OSError:
        return False


def switchd_command(prog: TofinoProgram, sde: str | None = None) -> list[str]:
    """bf_switchd through the SDE's script, on the compiled program's conf
    (no install into the SDE tree) and without loading it (``--skip-p4``):
    the driver pushes the pipeline over P4Runtime, as on BMv2. Under
    ``setsid``: the script runs ``sudo ... bf_switchd`` as a child, not by
    exec, so stopping it means signalling its whole process group."""
    sde = sde if sde is not None else os.environ.get("SDE", "")
    if not sde:
        raise DriverError(f"$SDE is unset: {INSTALL_HINT}")
    return ["setsid", str(Path(sde) / SWITCHD), "-c", str(prog.conf_path), "--skip-p4"]


def stop_group(proc: subprocess.Popen[str], timeout_s: float = 10.0) -> None:
    """SIGTERM to the process group ``proc`` leads (``switchd_command``'s
    setsid), SIGKILL if it is still there after ``timeout_s``."""
    if proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=timeout_s)
            return
        except subprocess.TimeoutExpired:
            continue


class P4RuntimeRegisters:
    """Registers as P4Runtime ``RegisterEntry``s (by P4Info name)."""

    def __init__(self, client: Any, p4info: Any, pb: Any) -> None:
        self.client, self.pb = client, pb
        self.registers: dict[str, tuple[int, int, int, str]] = {}  # alias -> (id, size, width, full)
        for reg in p4info.registers:
            full = reg.preamble.name
            width = int(reg.type_spec.bitstring.bit.bitwidth)
            entry = (int(reg.preamble.id), int(reg.size), width, full)
            for alias in {full, full.lstrip("."), full.rsplit(".", 1)[-1]}:
                taken = self.registers.get(alias)
                self.registers[alias] = entry if taken is None or taken[3] == full else (0, 0, 0, "")

    def resolve(self, name: str, index: int) -> tuple[str, int]:
        rid, size, width, full = self.registers.get(name, (0, 0, 0, ""))
        if not full:
            raise DriverError(f"Tofino: no register {name!r}")
        if not 0 <= index < size:
            raise DriverError(f"Tofino: register {name}[{index}] out of range (size {size})")
        return full, width

    def _entity(self, name: str, index: int | None, value: int | None = None) -> Any:
        full, width = self.resolve(name, 0 if index is None else index)
        entry = self.pb.RegisterEntry(register_id=self.registers[name][0])
        if index is not None:
            entry.index.index = index
        if value is not None:
            value &= (1 << width) - 1            # as the C pipeline masks to the width
            entry.data.bitstring = value.to_bytes(max(1, (width + 7) // 8), "big")
        return self.pb.Entity(register_entry=entry)

    def read(self, cells: Sequence[tuple[str, int]]) -> list[int]:
        out = []
        for name, index in cells:
            got = [e.register_entry.data.bitstring for resp in self.client.read_one(
                self._entity(name, int(index))) for e in resp.entities]
            if len(got) != 1:
                raise DriverError(f"Tofino: register {name}[{index}]: {len(got)} answers")
            out.append(int.from_bytes(got[0], "big"))
        return out

    def _write(self, entity: Any) -> None:
        update = self.pb.Update(type=self.pb.Update.MODIFY, entity=entity)
        try:
            self.client.write_update(update)
        except Exception as e:  # noqa: BLE001 - P4RuntimeWriteException and gRPC errors
            raise DriverError(f"Tofino: register write: {' '.join(str(e).split())}") from None

    def write(self, cells: Iterable[tuple[str, int, int]]) -> None:
        for name, index, value in cells:
            self._write(self._entity(name, int(index), int(value)))

    def reset(self, names: Sequence[str]) -> None:
        """Zero whole arrays: a write without an index covers every cell."""
        for name in names:
            self._write(self._entity(name, None, 0))


class TofinoDriver(P4RuntimeDriver):
    """One Tofino switch over P4Runtime; ``dev_ports[i]`` is rack port i."""

    label = "Tofino"
    install_hint = INSTALL_HINT

    def __init__(self, compiled: TofinoProgram, *, dev_ports: Sequence[int],
                 grpc_addr: str = "127.0.0.1:9559", device_id: int = 0,
                 cpu_port: int = TOFINO_CPU_PORT, election_id: tuple[int, int] = (0, 1),
                 semantics: P4Semantics | None = None) -> None:
        super().__init__(grpc_addr=grpc_addr, device_id=device_id, cpu_port=cpu_port,
                         election_id=election_id, semantics=semantics)
        self.compiled = compiled
        self.dev_ports = [int(p) for p in dev_ports]
        self.rack_of = {d: r for r, d in enumerate(self.dev_ports)}
        if len(self.rack_of) != len(self.dev_ports):
            raise DriverError(f"Tofino: a device port is given twice in {self.dev_ports}")
        self.regs: Any = None

    def pipeline_config(self, sh: Any) -> Any:
        return sh.FwdPipeConfig(str(self.compiled.p4info_path),
                                str(self.compiled.device_config_path))

    def dev(self, rack_port: int) -> int:
        if not 0 <= rack_port < len(self.dev_ports):
            raise DriverError(f"Tofino: rack port {rack_port} has no device port "
                              f"({len(self.dev_ports)} given)")
        return self.dev_ports[rack_port]

    def install_shell(self) -> None:
        try:
            pb = importlib.import_module(PROTOBUF_MODULE)
        except ImportError:
            raise DriverError(f"p4runtime protobufs ({PROTOBUF_MODULE}) not installed: "
                              f"{INSTALL_HINT}") from None
        self.regs = P4RuntimeRegisters(self._sh.client, self._sh.context.p4info, pb)
        for rack, dev in enumerate(self.dev_ports):
            super().table_add("rack_port", [dev], [rack])

    def add_replica(self, entry: Any, port: int) -> None:
        entry.add(self.dev(port), port)     # replica id = rack port (the egress's node)

    def table_add(self, table: str, key: Sequence[int], args: Sequence[int] = ()) -> None:
        # an action parameter named `port` is a port (node_fwd's set_port,
        # an address table's set_addr): the controller's rack port becomes
        # the device port
        names = self._table_action.get(table, ("", [], []))[2]
        args = [self.dev(int(a)) if i < len(names) and names[i] == "port" else int(a)
                for i, a in enumerate(args)]
        super().table_add(table, key, args)

    def packet_out(self, frame: bytes, port: int | None = None) -> None:
        super().packet_out(frame, None if port is None else self.dev(int(port)))
        # packet-in needs no mapping: packet_in.ingress_port is the rack port
        # the program's rack_port table found

