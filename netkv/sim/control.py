"""The simulator's ControlPlane and SwitchDriver (over a SimEngine).

Between epochs the engine is stopped, so every call here acts on the switch
and servers at one instant of simulated time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from netkv.drivers.base import CpuPacket, DriverError, SwitchDriver
from netkv.protocols.base import ControlPlane, Controller
from netkv.sim.engine import SimEngine
from netkv.wire.codec import Msg, Proto

_COPIED = ("op", "kind", "flags", "result", "server_id", "client_id", "load", "epoch",
           "req_id", "keyhash", "ver", "bitmap", "send_ns", "frag_idx", "frag_cnt", "nkeys",
           "oid", "startidx", "clo", "keyidx")


def msg_from_c(c: Any) -> Msg:
    """A cffi ``struct nk_msg`` as a Msg (values are lengths only in the sim)."""
    fields = {name: int(getattr(c, name)) for name in _COPIED}
    key = bytes(c.key[0:c.key_len])
    return Msg(proto=Proto(c.proto), key=key, hkey=(int(c.hkey[0]) << 64) | int(c.hkey[1]),
               **fields)


def msg_to_c(msg: Msg, out: Any) -> Any:
    out.proto = int(msg.proto)
    for name in _COPIED:
        value = getattr(msg, name)
        if value is not None:
            setattr(out, name, int(value))
    # StarCache's HKEY (C: hkey[0] the high word): the switch looks a
    # controller's F_REQ up by it (its LAT stamp, docs/starcache.md)
    out.hkey[0] = msg.hkey >> 64
    out.hkey[1] = msg.hkey & 0xFFFFFFFFFFFFFFFF
    out.key_len = len(msg.key)
    out.key[0:len(msg.key)] = msg.key
    out.value_len = len(msg.value)
    return out


class SimSwitchDriver(SwitchDriver):
    """Registers and tables of the simulated switch's pipeline."""

    def __init__(self, engine: SimEngine) -> None:
        self.engine = engine

    def reg_read(self, name: str, index: int) -> int:
        try:
            return self.engine.reg_read(name, index)
        except KeyError as exc:
            raise DriverError(str(exc)) from None

    def reg_read_range(self, name: str, first: int, count: int) -> list[int]:
        try:
            return self.engine.reg_read_range(name, first, count)
        except KeyError as exc:
            raise DriverError(str(exc)) from None

    def reg_write(self, name: str, index: int, value: int) -> None:
        try:
            self.engine.reg_write(name, index, value)
        except KeyError as exc:
            raise DriverError(str(exc)) from None

    def table_add(self, table: str, key: Sequence[int], args: Sequence[int] = ()) -> None:
        try:
            self.engine.table_add(table, list(key), list(args))
        except KeyError as exc:
            raise DriverError(str(exc)) from None

    def table_delete(self, table: str, key: Sequence[int]) -> None:
        try:
            self.engine.table_del(table, list(key))
        except KeyError as exc:
            raise DriverError(str(exc)) from None

    def mcast_set(self, group: int, ports: Sequence[int]) -> None:
        self.engine.mcast_set(group, list(ports))

    def counters(self) -> dict[str, int]:
        st = self.engine.stats()
        return {"events": st.events, "dropped": st.dropped, "cpu_packets": st.cpu_packets,
                "cpu_dropped": st.cpu_dropped}

    def cpu_poll(self, max_packets: int = 64) -> list[CpuPacket]:
        raise DriverError("the simulator delivers CPU packets decoded: use cpu_messages()")

    def packet_out(self, frame: bytes, port: int | None = None) -> None:
        raise DriverError("the simulator injects decoded messages: use packet_out(msg, dst)")


class SimControlPlane(ControlPlane):
    """A controller's view of a simulated rack."""

    restart_before_traffic = True  # switch_back runs start() at the restart instant

    def __init__(self, engine: SimEngine) -> None:
        self.engine = engine
        self.n_servers = engine.cfg.topology.servers
        self.capacity = np.asarray(engine.capacity, dtype=np.float64)
        self._switch = SimSwitchDriver(engine)

    @property
    def switch(self) -> SwitchDriver:
        return self._switch

    def cpu_messages(self, max_packets: int = 4096) -> list[tuple[int, Msg]]:
        return [(src, msg_from_c(m)) for src, m in self.engine.cpu_recv(max_packets)]

    def packet_out(self, msg: Msg, dst: int) -> None:
        self.engine.cpu_send(msg_to_c(msg, self.engine.new_msg()), dst)

    def server_ctl(self, server: int, line: str) -> str:
        return self.engine.server_ctl(server, line)

    @property
    def now_s(self) -> float:
        return self.engine.now_s

    # nodes: servers 0..S-1, clients S..S+M-1, coordinators (if the protocol
    # has them), then the controller; port p reaches node p, the controller
    # is behind the CPU port, whose number is the controller's node id
    # (docs/simulator.md)

    @property
    def controller_node(self) -> int:
        return self.engine.cpu_port

    def port_of(self, node: int) -> int:
        if not 0 <= node <= self.controller_node:
            raise DriverError(f"node {node}: the rack has nodes 0..{self.controller_node}")
        return self.engine.cpu_port if node == self.controller_node else node

    @property
    def recirc_port(self) -> int:
        return self.engine.recirc_port

    def port_up(self, node: int) -> bool:
        if node >= self.n_servers:
            return 0 <= node <= self.controller_node  # clients and the CPU never fail here
        return self.engine.server_up(node)

    def copy_store(self, src: int, dst: int) -> int:
        return self.engine.store_merge(src, dst)

    def newest_version(self, server: int) -> int:
        return self.engine.store_newest(server)


class SimEpochs:
    """Adapts a protocol Controller to SimEngine.run's ``epoch(engine, t)`` hook.
    After a switch outage (target.faults.switch_outages) the switch is back
    empty: at the restart instant (``switch_back``) the controller's ``start``
    installs its state again, as an operator's control plane does when the
    switch reconnects; not at its next epoch, which would leave the switch
    empty for up to an epoch (NetMC's is 1 s)."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    def switch_back(self, engine: SimEngine, t_s: float) -> None:
        del engine, t_s
        self.controller.start()

    def epoch(self, engine: SimEngine, t_s: float) -> None:
        del engine
        self.controller.epoch(t_s)

    def metrics(self) -> dict[str, Any]:
        return self.controller.point_metrics()
