"""SwitchDriver: the one interface a protocol's controller uses to drive a switch.

Names (registers, tables) are those of the protocol's C pipeline and P4
program, so one controller serves every target. Registers are arrays of
64-bit cells; tables are exact-match, keys and action arguments are tuples
of integers; multicast groups map a group id to egress ports.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass


class DriverError(RuntimeError):
    """The switch refused a request (unknown name, index out of range, ...)."""


@dataclass(frozen=True)
class CpuPacket:
    """A frame the data plane sent to the controller (clone to CPU, sampling)."""

    ingress_port: int
    frame: bytes


@dataclass(frozen=True)
class RegWrite:
    """``reg_write(name, index, value)`` as a request of a batch (``apply``)."""

    name: str
    index: int
    value: int


@dataclass(frozen=True)
class TableAdd:
    table: str
    key: tuple[int, ...]
    args: tuple[int, ...] = ()


@dataclass(frozen=True)
class TableDelete:
    table: str
    key: tuple[int, ...]


@dataclass(frozen=True)
class PacketOut:
    frame: bytes
    port: int | None = None


#: what ``apply`` takes: the control writes a controller makes in bulk
Request = RegWrite | TableAdd | TableDelete | PacketOut


class SwitchDriver(ABC):
    """Registers, tables, multicast groups, counters and CPU packets of one switch."""

    #: each request takes effect between two packets, with no packet part-way
    #: through the pipeline (the C pipeline: the simulator, netkv-switch). A
    #: P4 switch's packets are: one that matched a table entry just before a
    #: delete still writes registers after it (a controller that reads them
    #: at the delete must allow for that: KVSwitch's)
    atomic_control: bool = True

    @abstractmethod
    def reg_read(self, name: str, index: int) -> int:
        """One cell of register array ``name``."""

    def reg_read_range(self, name: str, first: int, count: int) -> list[int]:
        """``count`` cells from ``first`` (drivers may batch this)."""
        return [self.reg_read(name, first + i) for i in range(count)]

    def reg_read_many(self, cells: Sequence[tuple[str, int]]) -> list[int]:
        """The cells ``(name, index)``, in order (drivers may batch this)."""
        return [self.reg_read(name, index) for name, index in cells]

    @abstractmethod
    def reg_write(self, name: str, index: int, value: int) -> None:
        """Set one cell of register array ``name``."""

    def reg_write_many(self, cells: Iterable[tuple[str, int, int]]) -> None:
        """Set many cells ``(name, index, value)`` in order (drivers may batch this)."""
        for name, index, value in cells:
            self.reg_write(name, index, value)

    def apply(self, requests: Sequence[Request]) -> None:
        """Make ``requests`` in order (drivers may pipeline them: one round
        trip for many). The first refusal is raised; requests after it may
        or may not have been made. Here: one call each, a run of register
        writes as one ``reg_write_many`` (BMv2: one CLI run)."""
        cells: list[tuple[str, int, int]] = []
        for req in requests:
            if isinstance(req, RegWrite):
                cells.append((req.name, req.index, req.value))
                continue
            if cells:
                self.reg_write_many(cells)
                cells = []
            match req:
                case TableAdd(table, key, args):
                    self.table_add(table, key, args)
                case TableDelete(table, key):
                    self.table_delete(table, key)
                case PacketOut(frame, port):
                    self.packet_out(frame, port)
                case _:
                    raise TypeError(f"not a switch request: {req!r}")
        if cells:
            self.reg_write_many(cells)

    def batch(self) -> AbstractContextManager[None]:
        """A block whose register writes, table writes and packet-outs may be
        held and sent together (``apply``) when it ends or before the next
        read; what a read or a packet sees is unchanged, but a refusal may be
        raised only then. Here (and on the simulator): each is made at once."""
        return nullcontext()

    @abstractmethod
    def table_add(self, table: str, key: Sequence[int], args: Sequence[int] = ()) -> None:
        """Insert (or replace) the entry ``key`` -> action arguments ``args``."""

    @abstractmethod
    def table_delete(self, table: str, key: Sequence[int]) -> None:
        """Remove the entry ``key``."""

    @abstractmethod
    def mcast_set(self, group: int, ports: Sequence[int]) -> None:
        """Make multicast group ``group`` replicate to ``ports`` (replaces it)."""

    @abstractmethod
    def counters(self) -> dict[str, int]:
        """The switch's own counters (frames, drops, per-port rx/tx, ...)."""

    @abstractmethod
    def cpu_poll(self, max_packets: int = 64) -> list[CpuPacket]:
        """Packets the data plane sent to the controller since the last poll."""

    @abstractmethod
    def packet_out(self, frame: bytes, port: int | None = None) -> None:
        """Inject ``frame``: through the pipeline (port None, as from the CPU
        port) or straight out of ``port``."""

    def cpu_sample(self, every: int) -> None:  # noqa: B027 - optional
        """Also copy every ``every``-th pipeline packet to the controller (0 = off)."""
        raise NotImplementedError

    def close(self) -> None:  # noqa: B027 - optional
        """Release the connection."""

    def __enter__(self) -> "SwitchDriver":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BatchedWrites(SwitchDriver):
    """Any driver with its register writes queued and sent as one ``apply``
    before any other request and on ``flush()``; inside ``batch()`` its table
    writes and packet-outs are queued with them, in order.

    A controller epoch writes hundreds of cells (Pegasus' WRR schedule alone
    is 256), and one request costs a round trip on netkv-switch's control
    socket (~0.1 ms) or a ``simple_switch_CLI`` start on BMv2 (~100 ms);
    NetCache's refill of 1,000 keys made 4,000 (1.3 s). What a later read,
    table write or packet sees is unchanged; a refused write is reported at
    the next request or flush (in a batch: a refused table write or
    packet-out too). Table writes outside a batch are made at once: a caller
    may expect their refusal there (NetLR's delete of an absent entry)."""

    MAX_QUEUE = 4096

    def __init__(self, inner: SwitchDriver) -> None:
        self.inner = inner
        self._queue: list[Request] = []
        self._depth = 0   # open batch() blocks

    @property  # type: ignore[override]
    def atomic_control(self) -> bool:
        return self.inner.atomic_control

    def flush(self) -> None:
        requests, self._queue = self._queue, []
        if not requests:
            return
        self.inner.apply(requests)

    @contextmanager
    def _batch(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if self._depth == 0:   # after an exception, queued requests wait for the next request
            self.flush()

    def batch(self) -> AbstractContextManager[None]:
        return self._batch()

    def _queue_request(self, req: Request) -> None:
        self._queue.append(req)
        if len(self._queue) >= self.MAX_QUEUE:
            self.flush()

    def reg_write(self, name: str, index: int, value: int) -> None:
        self._queue_request(RegWrite(name, int(index), int(value)))

    def apply(self, requests: Sequence[Request]) -> None:
        self.flush()
        self.inner.apply(requests)

    def reg_read(self, name: str, index: int) -> int:
        self.flush()
        return self.inner.reg_read(name, index)

    def reg_read_range(self, name: str, first: int, count: int) -> list[int]:
        self.flush()
        return self.inner.reg_read_range(name, first, count)

    def reg_read_many(self, cells: Sequence[tuple[str, int]]) -> list[int]:
        self.flush()
        return self.inner.reg_read_many(cells)

    def table_add(self, table: str, key: Sequence[int], args: Sequence[int] = ()) -> None:
        if self._depth:
            self._queue_request(TableAdd(table, tuple(int(k) for k in key),
                                         tuple(int(a) for a in args)))
            return
        self.flush()
        self.inner.table_add(table, key, args)

    def table_delete(self, table: str, key: Sequence[int]) -> None:
        if self._depth:
            self._queue_request(TableDelete(table, tuple(int(k) for k in key)))
            return
        self.flush()
        self.inner.table_delete(table, key)

    def mcast_set(self, group: int, ports: Sequence[int]) -> None:
        self.flush()
        self.inner.mcast_set(group, ports)

    def counters(self) -> dict[str, int]:
        self.flush()
        return self.inner.counters()

    def cpu_poll(self, max_packets: int = 64) -> list[CpuPacket]:
        self.flush()
        return self.inner.cpu_poll(max_packets)

    def packet_out(self, frame: bytes, port: int | None = None) -> None:
        if self._depth:
            self._queue_request(PacketOut(bytes(frame), port))
            return
        self.flush()
        self.inner.packet_out(frame, port)

    def cpu_sample(self, every: int) -> None:
        self.flush()
        self.inner.cpu_sample(every)

    def close(self) -> None:
        try:
            self.flush()
        except DriverError:
            pass  # the rack is being torn down: what was still queued is moot
        finally:
            self.inner.close()
