"""pcap files and Ethernet/IPv4/UDP frames, with no dependency.

Reads the classic pcap format in both byte orders and both time resolutions
(what tcpdump, netkv-switch and the simulator write); writes nanosecond pcap.
Frames use the rack plan of docs/mininet.md: node n has IPv4 10.0.0.(n+1) and
MAC 02:00:00:00:HH:LL (HHLL = n + 1).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

MAGIC_US = 0xA1B2C3D4
MAGIC_NS = 0xA1B23C4D
LINKTYPE_ETHERNET = 1
LINKTYPE_LINUX_SLL = 113
ETH_P_IP = 0x0800
IPPROTO_UDP = 17
RACK_NET = 0x0A000000  # 10.0.0.0
CONTROLLER_IP = 0x0AFFFFFE  # 10.255.255.254


class PcapError(ValueError):
    """A file that is not a pcap this module reads (one line)."""


@dataclass(frozen=True)
class Record:
    ts_ns: int
    data: bytes
    orig_len: int
    linktype: int


def read(path: Path | str) -> Iterator[Record]:
    """Every record of a pcap file; a torn last record (a capture cut off) ends it."""
    with open(path, "rb") as fh:
        head = fh.read(24)
        if len(head) < 24:
            raise PcapError(f"{path}: {len(head)} bytes, not a pcap file")
        for order in ("<", ">"):
            (magic,) = struct.unpack(order + "I", head[:4])
            if magic in (MAGIC_US, MAGIC_NS):
                break
        else:
            raise PcapError(f"{path}: magic 0x{head[:4].hex()} is not pcap (pcapng is not read)")
        scale = 1 if magic == MAGIC_NS else 1000
        linktype = struct.unpack(order + "I", head[20:24])[0] & 0x0FFFFFFF
        rec = struct.Struct(order + "IIII")
        while True:
            h = fh.read(16)
            if len(h) < 16:
                return
            sec, frac, incl, orig = rec.unpack(h)
            data = fh.read(incl)
            if len(data) < incl:
                return
            yield Record(sec * 1_000_000_000 + frac * scale, data, orig, linktype)


def write(path: Path | str, records: Iterable[tuple[int, bytes]],
          snaplen: int = 65535) -> int:
    """Write (ts_ns, Ethernet frame) records as nanosecond pcap; returns the count."""
    n = 0
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", MAGIC_NS, 2, 4, 0, 0, snaplen, LINKTYPE_ETHERNET))
        for ts, frame in records:
            cut = frame[:snaplen]
            fh.write(struct.pack("<IIII", ts // 1_000_000_000, ts % 1_000_000_000,
                                 len(cut), len(frame)))
            fh.write(cut)
            n += 1
    return n


def node_ip(node: int) -> int:
    return RACK_NET + node + 1


def ip_node(ip: int) -> int | None:
    """The rack node of an IPv4 address, None outside the plan (e.g. the controller)."""
    n = ip - RACK_NET - 1
    return n if 0 <= n < 0xFFFF else None


def node_mac(node: int) -> bytes:
    return bytes([2, 0, 0, 0]) + (node + 1).to_bytes(2, "big")


def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp_frame(src: int, dst: int, sport: int, dport: int, payload: bytes) -> bytes:
    """An Ethernet/IPv4/UDP frame between two rack nodes (UDP checksum 0)."""
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBHII", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, IPPROTO_UDP, 0,
                     node_ip(src), node_ip(dst))
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    return node_mac(dst) + node_mac(src) + struct.pack("!H", ETH_P_IP) + ip + udp


@dataclass(frozen=True)
class Udp:
    src_ip: int
    dst_ip: int
    sport: int
    dport: int
    payload: bytes
    truncated: bool  # the capture cut the payload short (snap length)


def parse_udp(rec: Record) -> Udp | None:
    """The UDP datagram of an Ethernet or Linux-cooked IPv4 frame, else None."""
    d = rec.data
    if rec.linktype == LINKTYPE_ETHERNET:
        off = 14
        if len(d) < off or struct.unpack_from("!H", d, 12)[0] != ETH_P_IP:
            return None
    elif rec.linktype == LINKTYPE_LINUX_SLL:
        off = 16
        if len(d) < off or struct.unpack_from("!H", d, 14)[0] != ETH_P_IP:
            return None
    else:
        return None
    if len(d) < off + 20 or d[off] >> 4 != 4 or d[off + 9] != IPPROTO_UDP:
        return None
    ihl = (d[off] & 0x0F) * 4
    total = struct.unpack_from("!H", d, off + 2)[0]
    src, dst = struct.unpack_from("!II", d, off + 12)
    u = off + ihl
    if len(d) < u + 8:
        return None
    sport, dport, ulen = struct.unpack_from("!HHH", d, u)
    want = min(ulen, total - ihl) - 8
    payload = bytes(d[u + 8:u + 8 + max(want, 0)])
    return Udp(src, dst, sport, dport, payload, truncated=len(payload) < want)
