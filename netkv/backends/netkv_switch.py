"""netkv-switch: the C pipelines on real packets (hostapps/apps/netkv-switch.c).

The same pipeline code the simulator runs in-process; on a rack it is a
program on the switch node's ports, driven through its control socket
(``NetkvSwitchDriver``), and it injects ``target.faults`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netkv.backends.base import SwitchBackend, fault_per_egress
from netkv.drivers.base import BatchedWrites, SwitchDriver
from netkv.drivers.netkv_switch import NetkvSwitchDriver
from netkv.targets.base import TargetUnavailable

if TYPE_CHECKING:
    from netkv.config.schema import RunConfig
    from netkv.protocols.plugin import ProtocolPlugin

CTL_NAME = "switch.sock"
CPU_QUEUE_MAX = 65536   # netkv-switch.c CPU_MAX


class NetkvSwitchBackend(SwitchBackend):
    name = "netkv"
    captures = True
    label = "netkv-switch"
    loop_port = True
    restartable = True
    closed_args = ("--closed",)

    @classmethod
    def preflight(cls, cfg: "RunConfig", plugin: "ProtocolPlugin") -> None:
        del plugin
        # the simulator's channel is its own (schema: up to 2^20); target=sim
        # names this back-end but never starts it
        if cfg.target.name != "sim" and cfg.topology.cpu_queue > CPU_QUEUE_MAX:
            raise TargetUnavailable(
                f"topology.cpu_queue = {cfg.topology.cpu_queue} on target={cfg.target.name} "
                f"(allowed: 1..{CPU_QUEUE_MAX}: netkv-switch keeps each queued frame whole, "
                f"~2 KiB)")

    def args(self) -> list[str]:
        t = self.cfg.target
        out = ["--seed", str(self.cfg.seed)]
        if self.params:
            out += ["--params", self.params]
        if t.spin_us:
            out += ["--spin-us", str(t.spin_us)]
        out += ["--loop-rate", repr(float(t.loop.rate_pps)), "--loop-depth", str(t.loop.depth)]
        # the CPU port's queue to the controller, as the simulator's
        out += ["--cpu-queue", str(self.cfg.topology.cpu_queue)]
        return out

    def special_ports(self) -> tuple[int, int]:
        # netkv-switch: P data ports, then the CPU port, then recirculation
        return self.n_nodes, self.n_nodes + 1

    def command(self, ifaces: Sequence[str], folder: Path, tag: str,
                loop: tuple[str, str] | None = None) -> list[str]:
        from netkv.native import program_path

        topo = self.cfg.topology
        cmd = [str(program_path("netkv-switch")), "--protocol", self.plugin.name,
               "--servers", str(topo.servers), "--clients", str(topo.clients),
               "--ctl", str(folder / CTL_NAME), "--tag", tag, *self.args()]
        if self.n_coords:
            cmd += ["--coords", str(self.n_coords)]
        for iface in ifaces:
            cmd += ["--port", iface]
        if loop is not None:
            cmd += ["--loop", ",".join(loop)]
        return cmd

    def unix_sockets(self) -> list[str]:
        return [CTL_NAME]

    def connect(self, folder: Path, with_controller: bool) -> SwitchDriver:
        del with_controller  # netkv-switch's init installs everything itself
        return NetkvSwitchDriver.wait(folder / CTL_NAME)

    def controller_driver(self, driver: SwitchDriver | None,
                          folder: Path) -> tuple[SwitchDriver, bool]:
        # a connection of the plane's own (the target keeps one for counters
        # and faults), its register writes batched
        return BatchedWrites(NetkvSwitchDriver.wait(folder / CTL_NAME)), True

    def capture_start(self, driver: SwitchDriver | None, folder: Path, snaplen: int,
                      max_bytes: int, max_packets: int) -> None:
        assert isinstance(driver, NetkvSwitchDriver)
        driver.request(f"capture start {folder} {snaplen} {max_bytes} {max_packets}")

    def capture_stop(self, driver: SwitchDriver | None) -> dict[str, dict[str, Any]]:
        """`capture stop` answers NAME=PACKETS/MISSED/BUSY_NS per file."""
        assert isinstance(driver, NetkvSwitchDriver)
        files: dict[str, dict[str, Any]] = {}
        for word in driver.request("capture stop").split():
            name, _, counts = word.partition("=")
            packets, missed, busy = counts.split("/")
            files[name] = {"packets": int(packets), "missed": int(missed),
                           "busy_s": int(busy) / 1e9}
        return files

    def open(self, driver: SwitchDriver | None) -> None:
        assert isinstance(driver, NetkvSwitchDriver)
        driver.open()

    def apply_faults(self, driver: SwitchDriver | None) -> None:
        assert isinstance(driver, NetkvSwitchDriver)
        f = self.cfg.target.faults
        s, c = self.cfg.topology.servers, self.cfg.topology.clients
        ports = {"all": range(s + c), "servers": range(s), "clients": range(s, s + c)}[f.links]
        for port in ports:
            driver.set_fault(port, loss=fault_per_egress(f.loss),
                             duplicate=fault_per_egress(f.duplicate),
                             reorder=fault_per_egress(f.reorder), reorder_us=f.reorder_us,
                             delay_us=2.0 * f.delay_us)
