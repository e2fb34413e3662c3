"""SwitchDriver: the one interface a protocol's controller uses to drive a switch.

Names (registers, tables) are those of the protocol's C pipeline and P4
program, so one controller serves every target. Registers are arrays of
64-bit cells; tables are exact-match, keys and action arguments are tuples
of integers; multicast groups map a group id to egress ports.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
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

    @abstractmethod
    def reg_read(self, name: str, index: int) -> int:
        """One cell of register array ``name``."""

    def reg_read_range(self, name: str, first: int, count: int) -> list[int]:
        """``count`` cells from ``first`` (drivers may batch this)."""
        return [self.reg_read(name, first + i) for i in range(count)]

    @abstractmethod
    def reg_write(self, name: str, index: int, value: int) -> None:
        """Set one cell of register array ``name``."""

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
