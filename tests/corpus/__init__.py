"""The packet corpus: one behaviour, checked in every layer.

PTF style: each case is a switch program's state (pipeline params, table
entries, register cells, multicast groups), then frames in (ingress port +
bytes), each with the frames that must come out of every port, the CPU port
included, and register cells that must hold after. tests/test_corpus.py runs
every case through

- the C pipeline in-process (netkv.pipeline, cffi): the decision, the
  re-encoded payload and the addresses the switch gives each copy;
- netkv-switch on real frames (veth pairs, the switch in its own network
  namespace): every byte out of every port, the CPU queue, registers;
- simple_switch_grpc with the P4 program, where p4c and BMv2 are installed
  (marker ``bmv2``).

A new protocol adds ``tests/corpus/<protocol>.py`` with ``CASES`` and lists
it in ``PROTOCOLS`` below (docs/adding-a-protocol.md).

The rack: servers 0..3 behind ports 0..3, one client (node 4) behind port 4;
node n has IPv4 10.0.0.(n+1) and MAC 02:00:00:00:00:(n+1) (io.h).
"""

from __future__ import annotations

import importlib
import struct
from dataclasses import dataclass, field

from netkv.wire.pcap import _csum, node_ip, node_mac

N_SERVERS = 4
CLIENT = 4
NODES = 5
CLIENT_PORT = 40000     # the client's UDP source port
IP_ID = 0x1234
PROTOCOLS = (
    "hash",
    "pegasus",
    "netcache",
    "starcache",
    "netlr",
    "kvswitch",
    "netmc",
)


def frame(src: int, dst: int, payload: bytes, *, sport: int, dport: int,
          mac_src: int | None = None, mac_dst: int | None = None) -> bytes:
    """An Ethernet/IPv4/UDP frame between rack nodes, as nk_frame_build_udp
    lays it out (DF, TTL 64, both checksums, padded to 60 bytes). The MACs
    default to the nodes' (a readdressed frame keeps its sender's MAC)."""
    ulen = 8 + len(payload)
    addrs = struct.pack("!II", node_ip(src), node_ip(dst))
    ip = bytearray(struct.pack("!BBHHHBBH", 0x45, 0, 20 + ulen, IP_ID, 0x4000, 64, 17, 0) + addrs)
    ip[10:12] = struct.pack("!H", _csum(bytes(ip)))
    pseudo = addrs + struct.pack("!BBH", 0, 17, ulen)
    udp = struct.pack("!HHHH", sport, dport, ulen, 0) + payload
    c = _csum(pseudo + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", c) + udp[8:]
    eth = node_mac(dst if mac_dst is None else mac_dst) + node_mac(
        src if mac_src is None else mac_src) + b"\x08\x00"
    out = eth + bytes(ip) + udp
    return out + bytes(max(0, 60 - len(out)))


@dataclass(frozen=True)
class View:
    """A frame as the in-process runner compares it: addresses and payload."""

    src: int
    dst: int
    sport: int
    dport: int
    payload: bytes


def view(f: bytes) -> View:
    ulen = struct.unpack("!H", f[38:40])[0]
    return View(int.from_bytes(f[26:30], "big") - 0x0A000001,
                int.from_bytes(f[30:34], "big") - 0x0A000001,
                *struct.unpack("!HH", f[34:38]), f[42:34 + ulen])


@dataclass
class Step:
    """One frame in at ``port``; ``out`` maps each port to the frames that
    leave it (ports not listed: nothing), ``cpu`` the frames the controller
    gets (a copy of the frame as received, or a packet the pipeline sends it)."""

    port: int
    frame: bytes
    out: dict[int, list[bytes]] = field(default_factory=dict)
    cpu: list[bytes] = field(default_factory=list)
    why: str = ""


@dataclass
class Case:
    name: str
    protocol: str
    steps: list[Step]
    params: str = ""                                        # the pipeline's params string
    tables: list[tuple[str, list[int], list[int]]] = field(default_factory=list)
    registers: list[tuple[str, int, int]] = field(default_factory=list)
    groups: dict[int, list[int]] = field(default_factory=dict)
    after: dict[tuple[str, int], int] = field(default_factory=dict)


def cases(protocol: str) -> list[Case]:
    return list(importlib.import_module(f".{protocol}", __name__).CASES)


def all_cases() -> list[Case]:
    return [c for p in PROTOCOLS for c in cases(p)]
