"""SwitchDriver: the one interface a protocol's controller uses to drive a switch.

Names (registers, tables) are those of the protocol's C pipeline and P4
program, so one controller serves every target. Registers are arrays of
64-bit cells; tables are exact-match, keys and action arguments are tuples
of integers; multicast groups map a group id to egress ports.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class DriverError(RuntimeError):
    """The switch refused a request (unknown name, index out of range, ...)."""


@dataclass(frozen=True)
class CpuPacket:
    """A frame the data plane sent to the controller (clone to CPU, sampling)."""

    ingress_port: int
    frame: bytes


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

    @abstractmethod
    def reg_write(self, name: str, index: int, value: int) -> None:
        """Set one cell of register array ``name``."""

    def reg_write_many(self, cells: Iterable[tuple[str, int, int]]) -> None:
        """Set many cells ``(name, index, value)`` in order (drivers may batch this)."""
        for name, index, value in cells:
            self.reg_write(name, index, value)

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
    """Any driver with its register writes queued and sent as one
    ``reg_write_many`` before any other request and on ``flush()``.

    A controller epoch writes hundreds of cells (Pegasus' WRR schedule alone
    is 256), and one request costs a round trip on netkv-switch's control
    socket (~0.1 ms) or a ``simple_switch_CLI`` start on BMv2 (~100 ms). What
    a later read, table write or packet sees is unchanged; a refused write is
    reported at the next request or flush."""

    MAX_QUEUE = 4096

    def __init__(self, inner: SwitchDriver) -> None:
        self.inner = inner
        self._queue: list[tuple[str, int, int]] = []

    @property  # type: ignore[override]
    def atomic_control(self) -> bool:
        return self.inner.atomic_control

    def flush(self) -> None:
        cells, self._queue = self._queue, []
        if not cells:
            return
        self.inner.reg_write_many(cells)

    def reg_write(self, name: str, index: int, value: int) -> None:
        self._queue.append((name, int(index), int(value)))
        if len(self._queue) >= self.MAX_QUEUE:
            self.flush()

    def reg_read(self, name: str, index: int) -> int:
        self.flush()
        return self.inner.reg_read(name, index)

    def reg_read_range(self, name: str, first: int, count: int) -> list[int]:
        self.flush()
        return self.inner.reg_read_range(name, first, count)

    def table_add(self, table: str, key: Sequence[int], args: Sequence[int] = ()) -> None:
        self.flush()
        self.inner.table_add(table, key, args)

    def table_delete(self, table: str, key: Sequence[int]) -> None:
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
