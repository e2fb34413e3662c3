"""MininetControlPlane: a controller's view of a Mininet rack.

The same ``netkv.protocols.base.ControlPlane`` the simulator gives
(netkv.sim.control), over real packets:

- ``switch``: the switch back-end's driver (netkv-switch's control socket,
  BMv2's P4Runtime client, ...), its register writes batched;
- ``cpu_messages``: the frames the pipeline copied to the CPU port, parsed
  (Ethernet / IPv4 / UDP of the protocol's port, from its plug-in) and decoded with
  ``netkv.wire.codec.decode``, with the source node from the IPv4 source
  address (the rack plan: node n = 10.0.0.0 + n + 1);
- ``packet_out(msg, dst)``: a whole frame from the controller's address
  (``CONTROLLER_IP``: outside the plan, so replies to it come back to the CPU
  port) to node ``dst``, injected into the pipeline as from the CPU port;
- ``server_ctl``: a kvserver's control socket (Rack.server_ctl);
- ``now_s``: wall time since the plane was made;
- ``port_of(node)``: the rack plan's port (node n on port n),
  ``recirc_port``: the switch back-end's;
- ``port_up(node)``: the switch-side interface's operstate, and for a
  server its kvserver running (Rack.port_up).
"""

from __future__ import annotations

import struct
import time
from typing import TYPE_CHECKING

import numpy as np

from netkv.drivers.base import BatchedWrites, DriverError, SwitchDriver
from netkv.protocols.base import ControlPlane
from netkv.wire import codec
from netkv.wire.codec import Msg, WireError

if TYPE_CHECKING:
    from netkv.mininet.rack import Rack
    from netkv.protocols.plugin import ProtocolPlugin

ETH_HLEN, IP_HLEN, UDP_HLEN = 14, 20, 8
ETHERTYPE_IPV4 = 0x0800
IPPROTO_UDP = 17

def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = int(np.frombuffer(data, dtype=">u2").sum(dtype=np.uint64))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def _ip(addr: str) -> bytes:
    return bytes(int(x) for x in addr.split("."))


def _mac(addr: str) -> bytes:
    return bytes.fromhex(addr.replace(":", ""))


def ip_node(ip: bytes) -> int:
    """Node id of an IPv4 address (nk_ip_node), or -1 outside the plan."""
    n = int.from_bytes(ip, "big") - 0x0A000000
    return n - 1 if ip[0] == 10 and 1 <= n <= 65000 else -1


def build_frame(payload: bytes, src_ip: str, src_mac: str, dst_ip: str, dst_mac: str,
                sport: int, dport: int, ip_id: int = 0) -> bytes:
    """Ethernet / IPv4 (checksummed) / UDP (checksummed) around ``payload``."""
    udp_len = UDP_HLEN + len(payload)
    sip, dip = _ip(src_ip), _ip(dst_ip)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, IP_HLEN + udp_len, ip_id & 0xFFFF,
                               0x4000, 64, IPPROTO_UDP, 0, sip, dip))
    ip[10:12] = struct.pack("!H", ~_csum(bytes(ip)) & 0xFFFF)
    udp = bytearray(struct.pack("!HHHH", sport, dport, udp_len, 0) + payload)
    pseudo = sip + dip + struct.pack("!BBH", 0, IPPROTO_UDP, udp_len)
    c = ~_csum(pseudo + bytes(udp)) & 0xFFFF
    udp[6:8] = struct.pack("!H", c or 0xFFFF)
    eth = _mac(dst_mac) + _mac(src_mac) + struct.pack("!H", ETHERTYPE_IPV4)
    return eth + bytes(ip) + bytes(udp)


def parse_frame(frame: bytes) -> tuple[int, int, bytes] | None:
    """(source node, UDP destination port, payload) of an IPv4/UDP frame
    (a CPU copy longer than the switch keeps is cut: the payload too), else None."""
    if len(frame) < ETH_HLEN + IP_HLEN + UDP_HLEN:
        return None
    if struct.unpack_from("!H", frame, 12)[0] != ETHERTYPE_IPV4:
        return None
    ihl = (frame[ETH_HLEN] & 0xF) * 4
    if frame[ETH_HLEN] >> 4 != 4 or ihl < IP_HLEN or frame[ETH_HLEN + 9] != IPPROTO_UDP:
        return None
    udp = ETH_HLEN + ihl
    if len(frame) < udp + UDP_HLEN:
        return None
    src = ip_node(frame[ETH_HLEN + 12:ETH_HLEN + 16])
    dport, ulen = struct.unpack_from("!HH", frame, udp + 2)
    return src, dport, bytes(frame[udp + UDP_HLEN:udp + max(ulen, UDP_HLEN)])


class MininetControlPlane(ControlPlane):
    """A controller's handle on a Mininet rack."""

    def __init__(self, rack: "Rack", plugin: "ProtocolPlugin", capacity: np.ndarray,
                 driver: SwitchDriver, owned: bool = False) -> None:
        """``driver``: the switch back-end's driver for the controller (its
        register writes batched: ``BatchedWrites``); ``owned``: the plane
        closes it at the end. The target sets ``restart_before_traffic``
        once the controller is made (``MininetTarget.restart_closed``)."""
        from netkv.mininet.rack import CONTROLLER_IP, CONTROLLER_MAC

        self.rack = rack
        self.n_servers = rack.spec.servers
        self.capacity = np.asarray(capacity, dtype=np.float64)
        if len(self.capacity) != self.n_servers:
            raise ValueError(f"capacity has {len(self.capacity)} entries for "
                             f"{self.n_servers} servers")
        self.proto = plugin.wire
        self.port = plugin.udp_port
        self._own = owned
        self._switch = driver if isinstance(driver, BatchedWrites) else BatchedWrites(driver)
        self._ip, self._mac = CONTROLLER_IP, CONTROLLER_MAC
        self._ip_id = 0
        self._t0 = time.monotonic()
        self.undecodable = 0   # CPU frames that were not the protocol's messages
        self.restart_before_traffic = False

    @property
    def switch(self) -> SwitchDriver:
        return self._switch

    def attach(self, driver: SwitchDriver, owned: bool) -> None:
        """After a switch restart: the new program's driver (the old one's
        connection died with it; its queued writes are moot)."""
        if self._own:
            try:
                self._switch.close()
            except OSError:
                pass   # the dead program's socket
        self._own = owned
        self._switch = driver if isinstance(driver, BatchedWrites) else BatchedWrites(driver)

    def cpu_messages(self, max_packets: int = 4096) -> list[tuple[int, Msg]]:
        out: list[tuple[int, Msg]] = []
        while len(out) < max_packets:
            pkts = self._switch.cpu_poll(min(512, max_packets - len(out)))
            if not pkts:
                break
            for pkt in pkts:
                parsed = parse_frame(pkt.frame)
                if parsed is None or parsed[1] != self.port:
                    self.undecodable += 1
                    continue
                src, _, payload = parsed
                try:
                    msg = codec.decode(self.proto, payload)
                except WireError:
                    self.undecodable += 1  # e.g. cut at the CPU snap length
                    continue
                out.append((src, msg))
        return out

    def packet_out(self, msg: Msg, dst: int) -> None:
        from netkv.mininet.rack import node_ip, node_mac

        if msg.proto != self.proto:
            msg.proto = self.proto
        payload = codec.encode(msg)
        self._ip_id += 1
        frame = build_frame(payload, self._ip, self._mac, node_ip(dst), node_mac(dst),
                            self.port, self.port, self._ip_id)
        self._switch.packet_out(frame, None)

    def server_ctl(self, server: int, line: str) -> str:
        """``ok ...`` or ``err ...`` as the host logic answered (ctl.h)."""
        try:
            rest = self.rack.server_ctl(server, line)
        except DriverError as exc:
            return f"err {exc}"
        return f"ok {rest}" if rest else "ok"

    @property
    def now_s(self) -> float:
        return time.monotonic() - self._t0

    # the simulator's numbering: servers, clients, coordinator hosts, then the
    # controller (node S+M+C, behind the CPU port); node n < S+M+C on port n
    @property
    def controller_node(self) -> int:
        return self.rack.spec.backend.n_nodes

    def port_of(self, node: int) -> int:
        if not 0 <= node <= self.controller_node:
            raise DriverError(f"node {node}: the rack has nodes 0..{self.controller_node}")
        if node == self.controller_node:
            return self.rack.spec.backend.special_ports()[0]
        return node

    @property
    def recirc_port(self) -> int:
        return self.rack.spec.backend.special_ports()[1]

    def port_up(self, node: int) -> bool:
        return self.rack.port_up(node)

    def copy_store(self, src: int, dst: int) -> int:
        return self.rack.copy_store(src, dst)

    def newest_version(self, server: int) -> int:
        return self.rack.newest_version(server)

    def flush(self) -> None:
        """Send the register writes still queued (end of an epoch)."""
        flush = getattr(self._switch, "flush", None)  # a BatchedWrites, or a driver as given
        if flush is not None:
            flush()

    def close(self) -> None:
        if self._own:
            self._switch.close()
