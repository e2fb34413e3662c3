"""NetkvSwitchDriver: netkv-switch's control socket (a Unix stream socket).

One request line, one reply line: ``ok ...`` or ``err <reason>``. The
commands are listed in docs/mininet.md ("Control socket").
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from netkv.drivers.base import (
    CpuPacket,
    DriverError,
    PacketOut,
    RegWrite,
    Request,
    SwitchDriver,
    TableAdd,
    TableDelete,
)


def _ints(values: Sequence[int]) -> str:
    return ",".join(str(int(v)) for v in values) if len(values) else "-"


class CtlSocket:
    """A line client for a ctl.h control socket (netkv-switch, kvserver)."""

    def __init__(self, path: str | Path, timeout_s: float = 5.0) -> None:
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout_s)
        self.sock.connect(self.path)
        self._buf = b""

    @classmethod
    def wait(cls, path: str | Path, timeout_s: float = 5.0):  # noqa: ANN206
        """Connect once the program is listening (it may still be starting)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                client = cls(path)
                client.request("ping")
                return client
            except OSError:
                if time.monotonic() > deadline:
                    raise DriverError(f"control socket {path} not answering") from None
                time.sleep(0.01)   # a restarted switch is waited for mid-point

    def reply_line(self, context: str) -> str:
        """The switch's next reply line (``context`` names what was sent, for
        the error when the connection closes)."""
        while b"\n" not in self._buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise DriverError(f"{self.path}: connection closed {context}")
            self._buf += chunk
        reply, self._buf = self._buf.split(b"\n", 1)
        return reply.decode()

    def request(self, line: str) -> str:
        """Send one command; return the text after ``ok`` or raise DriverError."""
        self.sock.sendall(line.encode() + b"\n")
        text = self.reply_line(f"after {line.split()[0]!r}")
        if text == "ok" or text.startswith("ok "):
            return text[3:]
        raise DriverError(f"{line.split()[0]}: {text.removeprefix('err ')}")

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


# lines sent before their replies are read. The switch may block on its
# replies until we read, so a chunk's lines must fit our send buffer
# (~208 KiB) or both sides would wait
PIPELINE_CHUNK = 512
PIPELINE_BYTES = 64 * 1024


def _line(req: Request) -> str:
    """The control-socket line of one request (every write is sent so)."""
    match req:
        case RegWrite(name, index, value):
            return f"reg_write {name} {int(index)} {int(value)}"
        case TableAdd(table, key, args):
            return f"table_add {table} {_ints(key)} {_ints(args)}"
        case TableDelete(table, key):
            return f"table_del {table} {_ints(key)}"
        case PacketOut(frame, port):
            return f"packet_out {'pipeline' if port is None else int(port)} {frame.hex()}"
    raise TypeError(f"not a switch request: {req!r}")


class NetkvSwitchDriver(CtlSocket, SwitchDriver):
    """Talks to one netkv-switch over its control socket."""

    # --- SwitchDriver -----------------------------------------------------------

    def reg_read(self, name: str, index: int) -> int:
        return int(self.request(f"reg_read {name} {int(index)}"))

    def reg_read_range(self, name: str, first: int, count: int) -> list[int]:
        out: list[int] = []
        while count > 0:
            n = min(count, 4096)
            text = self.request(f"reg_read_range {name} {int(first)} {n}")
            out += [int(v) for v in text.split(",")] if text else []
            first += n
            count -= n
        return out

    def reg_write(self, name: str, index: int, value: int) -> None:
        self.request(_line(RegWrite(name, index, value)))

    def reg_write_many(self, cells: Iterable[tuple[str, int, int]]) -> None:
        self.pipelined([_line(RegWrite(*cell)) for cell in cells])

    def reg_read_many(self, cells: Sequence[tuple[str, int]]) -> list[int]:
        return [int(v) for v in self.pipelined([f"reg_read {name} {int(index)}"
                                                for name, index in cells])]

    def apply(self, requests: Sequence[Request]) -> None:
        self.pipelined([_line(req) for req in requests])

    def pipelined(self, lines: Sequence[str]) -> list[str]:
        """Each line's reply (the text after ``ok``). A chunk of lines goes
        in one send, then every reply is read (the switch executes lines in
        order): a round trip per chunk, not per line. The first refusal is
        raised, naming its line, after its whole chunk is answered."""
        out: list[str] = []
        start = 0
        while start < len(lines):
            end, size = start, 0
            while end < len(lines) and end - start < PIPELINE_CHUNK and (
                    end == start or size + len(lines[end]) < PIPELINE_BYTES):
                size += len(lines[end]) + 1
                end += 1
            chunk = lines[start:end]
            self.sock.sendall(("\n".join(chunk) + "\n").encode())
            failed = None
            for line in chunk:
                text = self.reply_line("during a batch of requests")
                if text == "ok" or text.startswith("ok "):
                    out.append(text[3:])
                elif failed is None:
                    failed = f"{line}: {text.removeprefix('err ')}"
            if failed is not None:
                raise DriverError(failed)
            start = end
        return out

    def table_add(self, table: str, key: Sequence[int], args: Sequence[int] = ()) -> None:
        self.request(_line(TableAdd(table, tuple(key), tuple(args))))

    def table_delete(self, table: str, key: Sequence[int]) -> None:
        self.request(_line(TableDelete(table, tuple(key))))

    def mcast_set(self, group: int, ports: Sequence[int]) -> None:
        self.request(f"mcast_set {int(group)} {_ints(ports)}")

    def counters(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for word in self.request("counters").split():
            k, _, v = word.partition("=")
            out[k] = int(v)
        return out

    def reset_counters(self) -> None:
        self.request("reset_counters")

    def cpu_poll(self, max_packets: int = 64) -> list[CpuPacket]:
        words = self.request(f"cpu_poll {int(max_packets)}").split()
        pkts = []
        for w in words[1:]:
            port, _, hexframe = w.partition(":")
            pkts.append(CpuPacket(int(port), bytes.fromhex(hexframe)))
        return pkts

    def cpu_sample(self, every: int) -> None:
        self.request(f"cpu_sample {int(every)}")

    def packet_out(self, frame: bytes, port: int | None = None) -> None:
        self.request(_line(PacketOut(frame, port)))

    # --- netkv-switch specifics ---------------------------------------------------

    def set_fault(self, port: int | str = "all", *, loss: float = 0.0, duplicate: float = 0.0,
                  reorder: float = 0.0, reorder_us: float = 0.0, delay_us: float = 0.0) -> None:
        """Egress faults of one port (or all): drop, duplicate, hold back a
        fraction by up to ``reorder_us``, delay every frame by ``delay_us``."""
        self.request(f"fault {port} loss={loss} dup={duplicate} reorder={reorder} "
                     f"reorder_us={reorder_us} delay_us={delay_us}")

    def open(self) -> None:
        """Let traffic through a switch started ``--closed`` (a restart:
        after the controller has installed its state again)."""
        self.request("open")

    def ping(self) -> str:
        return self.request("ping")

    def quit(self) -> None:
        try:
            self.request("quit")
        except (DriverError, OSError):
            pass
