"""P4RuntimeDriver: what every P4Runtime switch driver shares (BMv2, Tofino).

Tables, multicast groups, the CPU clone session, packet-in and packet-out
go over P4Runtime through p4runtime-shell; a subclass says how its pipeline
config is packed (``pipeline_config``), what to wait for before connecting
(``wait_ready``), how its registers are reached (``self.regs``: a
``RegisterCells`` with ``read``) and what its shell needs installed besides
(``install_shell``, ``add_replica``). Names are the C pipelines' names; a
short name is resolved to the full one found in the P4Info.

p4runtime-shell keeps its client in module globals: one driver per process
(a second one raises ``DriverError``). A failed ``setup()`` raises
``SystemExit``; it is turned into ``DriverError``. ``close()`` always calls
``teardown()`` (a process that exits without it hangs).
"""

from __future__ import annotations

import inspect
import socket
import time
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self

from netkv.config.compose import ConfigError
from netkv.constants import CPU_CLONE_SESSION, FLOOD_MCAST_GRP
from netkv.drivers.base import CpuPacket, DriverError, SwitchDriver
from netkv.protocols.plugin import P4Semantics


def require_toolchain(switch: str, missing: Sequence[str], install_hint: str) -> None:
    """Raise a one-line ``ConfigError`` naming what ``target.switch=<switch>``
    lacks (nothing when ``missing`` is empty)."""
    if missing:
        raise ConfigError(f"target.switch={switch} needs {', '.join(missing)}, not found: "
                          f"{install_hint}")


def wait_for_tcp(addr: str, timeout_s: float, label: str = "P4Runtime server") -> None:
    """Wait until something listens on ``host:port``."""
    host, _, port = addr.rpartition(":")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host or "127.0.0.1", int(port)), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise DriverError(f"{label} not listening on {addr} after {timeout_s:.0f} s") from None
            time.sleep(0.1)


_ACTIVE: "P4RuntimeDriver | None" = None


class P4RuntimeDriver(SwitchDriver):
    """One switch over P4Runtime (p4runtime-shell); registers per subclass."""

    atomic_control = False   # packets are in the pipeline while a request lands

    label: ClassVar[str] = "P4Runtime"       # in messages
    install_hint: ClassVar[str] = "pip install p4runtime-shell"
    regs: Any                                # RegisterCells with read(cells) -> list[int]

    def __init__(self, *, grpc_addr: str, device_id: int, cpu_port: int,
                 election_id: tuple[int, int], semantics: P4Semantics | None) -> None:
        # what the program's C twin does on control writes that P4 leaves to us
        self.semantics = semantics if semantics is not None else P4Semantics()
        self.grpc_addr = grpc_addr
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.election_id = election_id
        self._sh: Any = None
        self._stats = {"packet_in": 0, "packet_out": 0, "table_writes": 0, "reg_writes": 0}
        self._table_action: dict[str, tuple[str, list[str], list[str]]] = {}
        self._pktin_ids: dict[int, str] = {}

    # -- what a subclass says -------------------------------------------------------------

    @abstractmethod
    def pipeline_config(self, sh: Any) -> Any:
        """The ``config`` for ``sh.setup``: the compiled program as the switch takes it."""

    def wait_ready(self, timeout_s: float) -> None:
        """Wait until the switch's servers listen (default: the gRPC address)."""
        wait_for_tcp(self.grpc_addr, timeout_s, self.label)

    def install_shell(self) -> None:  # noqa: B027 - optional
        """Install what the program's shell needs before the rack plan."""

    def add_replica(self, entry: Any, port: int) -> None:
        """One replica of a multicast group on ``port``."""
        entry.add(port)

    # -- lifecycle ------------------------------------------------------------------------

    @classmethod
    def connect(cls, compiled: Any, *, data_ports: Sequence[int] = (),
                registers: Sequence[tuple[str, int, int]] = (),
                node_ports: Mapping[int, int] | None = None,
                connect_timeout_s: float = 30.0, **kw: Any) -> Self:
        """Push ``compiled`` to the running switch (``pipeline_config``), then install
        the flood group (``data_ports``), the CPU clone session, the
        ``node_fwd`` entries node -> port of ``node_ports`` and the
        ``registers`` the C pipeline's init sets (the protocol's
        ``P4Program.initial_registers``). ``node_ports`` is what
        netkv-switch hands its pipeline at init (``cfg->node_port``, the
        rack plan): the P4 table starts empty, so without it nothing is
        forwarded."""
        global _ACTIVE
        if _ACTIVE is not None:
            raise DriverError("p4runtime-shell drives one switch per process; close the other first")
        drv = cls(compiled, **kw)
        drv.wait_ready(connect_timeout_s)
        try:
            import p4runtime_sh.shell as sh  # noqa: PLC0415 - optional dependency
        except ImportError:
            raise DriverError(f"p4runtime-shell not installed: {cls.install_hint}") from None
        try:
            kw: dict[str, Any] = {}
            if "verbose" in inspect.signature(sh.setup).parameters:  # newer releases only
                kw["verbose"] = False
            sh.setup(device_id=drv.device_id, grpc_addr=drv.grpc_addr,
                     election_id=drv.election_id,
                     config=drv.pipeline_config(sh),
                     **kw)
        except SystemExit:
            # setup() already tore its client down
            raise DriverError(f"P4Runtime setup on {drv.grpc_addr} failed (see the log above)") from None
        drv._sh = sh
        _ACTIVE = drv
        try:
            drv._index_p4info()
            drv.install_shell()
            if data_ports:
                drv.mcast_set(FLOOD_MCAST_GRP, data_ports)
            drv._clone_session(CPU_CLONE_SESSION, [drv.cpu_port])
            for node, port in sorted((node_ports or {}).items()):
                drv.table_add("node_fwd", [node], [port])
            if registers:
                drv.regs.write(registers)
        except BaseException:
            drv.close()
            raise
        return drv

    def close(self) -> None:
        global _ACTIVE
        sh, self._sh = self._sh, None
        if sh is not None:
            try:
                sh.teardown()
            finally:
                if _ACTIVE is self:
                    _ACTIVE = None

    def _need(self) -> Any:
        if self._sh is None:
            raise DriverError(f"{self.label} driver is closed")
        return self._sh

    def _index_p4info(self) -> None:
        from p4runtime_sh.context import P4Type  # noqa: PLC0415

        ctx = self._sh.context
        p4info = ctx.p4info
        actions = {a.preamble.id: a for a in p4info.actions}
        for table in p4info.tables:
            entry_actions = [
                actions[ref.id] for ref in table.action_refs
                if ref.scope != ref.DEFAULT_ONLY and actions[ref.id].preamble.name != "NoAction"
            ]
            if len(entry_actions) != 1:
                continue  # tables with several entry actions are not driven by name
            act = entry_actions[0]
            keys = [mf.name for mf in table.match_fields]
            params = [p.name for p in act.params]
            info = (act.preamble.name, keys, params)
            name = table.preamble.name
            for alias in {name, name.lstrip("."), name.rsplit(".", 1)[-1]}:
                self._table_action[alias] = info
        pktin = ctx.get_obj(P4Type.controller_packet_metadata, "packet_in")
        if pktin is not None:
            self._pktin_ids = {m.id: m.name for m in pktin.metadata}

    # -- registers (self.regs) ------------------------------------------------------------------

    def reg_read(self, name: str, index: int) -> int:
        return self.regs.read([(name, int(index))])[0]

    def reg_read_range(self, name: str, first: int, count: int) -> list[int]:
        return self.regs.read([(name, first + i) for i in range(count)])

    def reg_read_many(self, cells: Sequence[tuple[str, int]]) -> list[int]:
        # one CLI run for all (BMv2: ~100 ms a run)
        return self.regs.read([(name, int(index)) for name, index in cells]) if cells else []

    def reg_write(self, name: str, index: int, value: int) -> None:
        if name in self.semantics.special_registers:
            self.semantics.reg_write(self.regs, name, int(index), int(value))
            return
        self.regs.write([(name, int(index), int(value))])
        self._stats["reg_writes"] += 1

    def reg_write_many(self, cells: Iterable[tuple[str, int, int]]) -> None:
        """Several writes in one CLI run (the CLI costs ~100 ms per start),
        in order; a register the program's semantics treat as a control
        action stays the action ``reg_write`` makes of it."""
        plain: list[tuple[str, int, int]] = []
        for name, index, value in cells:
            if name in self.semantics.special_registers:
                self.regs.write(plain)
                self._stats["reg_writes"] += len(plain)
                plain = []
                self.reg_write(name, index, value)
            else:
                plain.append((name, int(index), int(value)))
        self.regs.write(plain)
        self._stats["reg_writes"] += len(plain)

    # -- tables (P4Runtime) --------------------------------------------------------------------

    def _entry(self, table: str, key: Sequence[int], args: Sequence[int] | None) -> Any:
        sh = self._need()
        if table not in self._table_action:
            raise DriverError(f"{self.label}: no table {table!r} with a single entry action")
        action, keys, params = self._table_action[table]
        if len(key) != len(keys):
            raise DriverError(f"{self.label}: table {table} takes {len(keys)} key field(s), got {len(key)}")
        te = sh.TableEntry(table)
        for kname, kval in zip(keys, key):
            te.match[kname] = str(int(kval))
        if args is not None:
            if len(args) != len(params):
                raise DriverError(
                    f"{self.label}: action {action} of {table} takes {len(params)} argument(s), got {len(args)}"
                )
            te.action = sh.Action(action)
            for pname, pval in zip(params, args):
                te.action[pname] = str(int(pval))
        return te

    def table_add(self, table: str, key: Sequence[int], args: Sequence[int] = ()) -> None:
        from p4runtime_sh.p4runtime import P4RuntimeWriteException  # noqa: PLC0415

        te = self._entry(table, key, args)
        self.semantics.before_table_add(self.regs, table, [int(k) for k in key],
                                        [int(a) for a in args])
        try:
            te.insert()
        except P4RuntimeWriteException as e:
            if "ALREADY_EXISTS" not in str(e):
                raise DriverError(f"{self.label}: table_add {table} {list(key)}: {e}") from None
            try:
                te.modify()
            except P4RuntimeWriteException as e2:
                raise DriverError(f"{self.label}: table_add {table} {list(key)}: {e2}") from None
        except Exception as e:  # UserError on a value too wide, ...
            raise DriverError(f"{self.label}: table_add {table} {list(key)}: {e}") from None
        self._stats["table_writes"] += 1

    def table_delete(self, table: str, key: Sequence[int]) -> None:
        from p4runtime_sh.p4runtime import P4RuntimeWriteException  # noqa: PLC0415

        te = self._entry(table, key, None)
        try:
            te.delete()
        except (P4RuntimeWriteException, Exception) as e:
            raise DriverError(f"{self.label}: table_delete {table} {list(key)}: {e}") from None
        self._stats["table_writes"] += 1
        self.semantics.after_table_delete(self.regs, table, [int(k) for k in key])

    # -- replication (P4Runtime PRE) --------------------------------------------------------------

    def _pre_write(self, entry: Any) -> None:
        from p4runtime_sh.p4runtime import P4RuntimeWriteException  # noqa: PLC0415

        try:
            entry.insert()
        except P4RuntimeWriteException as e:
            if "ALREADY_EXISTS" not in str(e):
                raise DriverError(f"{self.label}: {e}") from None
            entry.modify()

    def mcast_set(self, group: int, ports: Sequence[int]) -> None:
        sh = self._need()
        entry = sh.MulticastGroupEntry(int(group))
        if not ports:
            try:
                entry.delete()
            except Exception:  # noqa: BLE001 - deleting an absent group is fine
                pass
            return
        for port in ports:
            self.add_replica(entry, int(port))
        self._pre_write(entry)

    def _clone_session(self, session: int, ports: Sequence[int]) -> None:
        sh = self._need()
        entry = sh.CloneSessionEntry(int(session))
        for port in ports:
            entry.add(int(port))
        self._pre_write(entry)

    # -- counters and CPU packets -------------------------------------------------------------------

    def counters(self) -> dict[str, int]:
        return dict(self._stats)

    def cpu_poll(self, max_packets: int = 64) -> list[CpuPacket]:
        sh = self._need()
        out: list[CpuPacket] = []
        while len(out) < max_packets:
            msg = sh.client.get_stream_packet("packet", timeout=0)
            if msg is None:
                break
            md = {self._pktin_ids.get(m.metadata_id, str(m.metadata_id)): m.value
                  for m in msg.packet.metadata}
            port = int.from_bytes(md.get("ingress_port", b""), "big") if md else 0
            out.append(CpuPacket(ingress_port=port, frame=bytes(msg.packet.payload)))
            self._stats["packet_in"] += 1
        return out

    def packet_out(self, frame: bytes, port: int | None = None) -> None:
        sh = self._need()
        pkt = sh.PacketOut(payload=bytes(frame))
        pkt.metadata["egress_port"] = str(0 if port is None else int(port))
        pkt.metadata["direct"] = "0" if port is None else "1"
        pkt.metadata["pad"] = "0"
        pkt.send()
        self._stats["packet_out"] += 1
