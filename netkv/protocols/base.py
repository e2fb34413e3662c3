"""What a protocol's controller sees: one ControlPlane, whatever the target.

A controller drives the switch only through ``plane.switch`` (a
``SwitchDriver``: registers, tables, multicast, counters), receives the
packets the data plane sends it as decoded ``Msg`` objects, injects packets
through the pipeline, and sends text control commands to servers (e.g.
Pegasus' ``rkey_add``). The simulator, netkv-switch and BMv2 each provide a
ControlPlane; the controller never learns which.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from netkv.drivers.base import SwitchDriver
from netkv.wire.codec import Msg

if TYPE_CHECKING:
    import numpy as np  # annotations only: `netkv list` imports every plug-in


class ControlPlane(ABC):
    """The controller's handle on one rack."""

    n_servers: int
    capacity: np.ndarray  # per-server capacity factor known to the operator

    @property
    @abstractmethod
    def switch(self) -> SwitchDriver:
        """The switch's registers, tables and multicast groups."""

    @abstractmethod
    def cpu_messages(self, max_packets: int = 4096) -> list[tuple[int, Msg]]:
        """Packets the data plane sent to the controller: (source node, message)."""

    @abstractmethod
    def packet_out(self, msg: Msg, dst: int) -> None:
        """Inject ``msg`` into the switch pipeline, addressed to node ``dst``."""

    @abstractmethod
    def server_ctl(self, server: int, line: str) -> str:
        """A text command to one server's host logic; its reply ("ok ..."/"err ...")."""

    @property
    @abstractmethod
    def now_s(self) -> float:
        """The rack's clock (simulated time on the simulator)."""

    # Ports, for controllers that build multicast groups over hosts and the
    # recirculation port (StarCache's {client, loop} groups). A target that
    # cannot say raises NotImplementedError.

    @property
    def controller_node(self) -> int:
        """The node id the switch addresses the controller by (packet-out
        replies come back to it)."""
        raise NotImplementedError("this target does not expose its controller's node")

    def port_of(self, node: int) -> int:
        """The switch port that reaches ``node`` (the controller's: the CPU port)."""
        raise NotImplementedError("this target does not expose its port map")

    @property
    def recirc_port(self) -> int:
        """The switch's recirculation port (a packet sent there re-enters ingress)."""
        raise NotImplementedError("this target has no recirculation port")

    # Membership, for controllers that react to server failures (NetLR's
    # port monitoring and replica recovery).

    def port_up(self, node: int) -> bool:
        """The port status of ``node``'s link, as a switch CPU polls it."""
        raise NotImplementedError("this target does not report port status")

    def copy_store(self, src: int, dst: int) -> int:
        """Out-of-band state transfer: server ``src``'s written keys to server
        ``dst`` wherever ``src`` holds a newer version; how many keys moved."""
        raise NotImplementedError("this target cannot transfer a server's store")

    def newest_version(self, server: int) -> int:
        """Out of band: the highest version ``server``'s store holds."""
        raise NotImplementedError("this target cannot read a server's store")

    # Whether a restarted switch lets no packet through until the
    # controller's start() has run: the simulator (the restart is one
    # instant), and a rack whose switch restarts closed until the target
    # opens it after start() (netkv-switch's --closed, for a controller
    # that asks for it: Controller.restart_closed; docs/mininet.md). A
    # switch without it forwards as soon as it is up, with its registers at
    # their initial values.
    restart_before_traffic: bool = False


class Controller(ABC):
    """A protocol's control plane logic, run every epoch."""

    # Off the simulator, whether a restarted switch is to forward nothing
    # until this controller's start() has run (the target starts it closed
    # where its back-end can, and opens it after start() and the plane's
    # flush; the plane then says restart_before_traffic). Only for a start()
    # that needs no answer through the switch: one that fetches from the
    # servers (NetCache, StarCache) or waits for their pushes (KVSwitch)
    # would have those answers dropped while it is closed (docs/mininet.md
    # "Switch outages").
    restart_closed: ClassVar[bool] = False

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    @abstractmethod
    def start(self) -> None:
        """Install the initial state before any traffic."""

    @abstractmethod
    def epoch(self, t_s: float) -> None:
        """One control epoch at time ``t_s``."""

    def point_metrics(self) -> dict[str, Any]:
        """The controller's own measurements of the load point it ran
        (extra columns of points.parquet, e.g. switch-counter statistics)."""
        return {}
