"""Tofino: the protocol's TNA program (p4src/<p>/tna/<p>.p4) on a Tofino switch
(bf_switchd of an Intel P4 Studio SDE), driven over P4Runtime.

UNTESTED on a Tofino: no SDE exists on this project's machines. What runs
here: the refusal in one line (exit 2) naming what is missing, and the
driver against a fake P4Runtime shell (tests/test_tofino.py).

Prepared before anything starts: the SDE is checked (bf-p4c on PATH,
$SDE/run_switchd.sh, p4runtime-shell), faults and loop pairs are refused,
and the TNA program is compiled with bf-p4c (cached by content, with
NETKV_TNA_CPU_PORT = target.tofino.cpu_port). Started with
``setsid $SDE/run_switchd.sh -c <conf> --skip-p4`` on the switch; ``connect``
pushes the program over P4Runtime (PI's Tofino device config) and installs
what netkv-switch's init would, in rack ports the driver maps to the
switch's device ports: the switch's ``ports`` (the inventory's, one per
node in wiring order) are Tofino device port numbers.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netkv.backends.base import SwitchBackend, refuse_p4_basics
from netkv.backends.bmv2 import START_TIMEOUT_S, wait_listening
from netkv.config.compose import ConfigError
from netkv.drivers import bmv2, tofino
from netkv.drivers.base import BatchedWrites, SwitchDriver
from netkv.protocols.plugin import parse_params
from netkv.targets.base import TargetUnavailable

if TYPE_CHECKING:
    from netkv.config.schema import RunConfig
    from netkv.protocols.plugin import ProtocolPlugin


class TofinoBackend(SwitchBackend):
    name = "tofino"
    label = "bf_switchd"
    stdout_to_log = True      # bf_switchd writes much and reports nothing on exit
    install_hint = tofino.INSTALL_HINT

    @classmethod
    def preflight(cls, cfg: "RunConfig", plugin: "ProtocolPlugin") -> None:
        refuse_p4_basics(cls.name, cfg, plugin, tofino.require_tofino)
        assert plugin.p4 is not None
        src = tofino.tna_source(plugin.p4.source)
        if not (bmv2.p4src_dir() / src).is_file():
            raise TargetUnavailable(f"target.switch = 'tofino': protocol = '{plugin.name}' has "
                                    f"no TNA program (p4src/{src})")
        if plugin.p4.needs_loop:
            raise TargetUnavailable(f"target.switch = 'tofino': protocol = '{plugin.name}' needs "
                                    "a recirculation port, not mapped on Tofino yet")

    def __init__(self, cfg: "RunConfig", plugin: "ProtocolPlugin", params: str) -> None:
        super().__init__(cfg, plugin, params)
        assert plugin.p4 is not None  # preflight
        self.p4 = plugin.p4
        knobs = parse_params(params)
        self.opts = cfg.target.tofino
        try:
            defines = {**self.p4.defines(knobs), "NETKV_TNA_CPU_PORT": self.opts.cpu_port,
                       "NETKV_TNA_RECIRC_PORT": self.opts.recirc_port}
            self.registers = self.p4.initial_registers(cfg.topology.servers, knobs)
        except ValueError as exc:
            raise ConfigError(f"invalid config: target.switch = 'tofino': {exc}") from None
        # before anything is started: a compile error leaves nothing behind
        self.compiled = tofino.compile_cached(
            plugin.name, bmv2.p4src_dir() / tofino.tna_source(self.p4.source), defines)
        self.dev_ports: list[int] = []

    def special_ports(self) -> tuple[int, int]:
        """(CPU port, recirculation port) as rack ports, after the nodes' (as
        netkv-switch numbers them); the driver maps them to the device's."""
        return self.n_nodes, self.n_nodes + 1

    def command(self, ifaces: Sequence[str], folder: Path, tag: str,
                loop: tuple[str, str] | None = None) -> list[str]:
        del folder, tag, loop
        try:
            self.dev_ports = [int(i) for i in ifaces]
        except ValueError:
            raise ConfigError(f"invalid config: target.switch = 'tofino': the switch's ports are "
                              f"Tofino device port numbers (e.g. 132), got {list(ifaces)}") from None
        return tofino.switchd_command(self.compiled)

    def ready(self, proc: subprocess.Popen[str], folder: Path) -> None:
        wait_listening(proc, self.opts.grpc_addr, START_TIMEOUT_S, folder / self.log_name,
                       self.label)

    def stop(self, proc: subprocess.Popen[str]) -> dict[str, Any]:
        tofino.stop_group(proc)     # bf_switchd is the script's grandchild
        return {}                   # and has no exit report

    def connect(self, folder: Path, with_controller: bool) -> SwitchDriver | None:
        """The driver (register writes batched) for a controller; without one
        the switch is set up and the session closed (the pipeline, entries
        and registers stay)."""
        del folder
        nodes = range(self.n_nodes)
        # rack ports: the nodes', then the CPU and recirculation ports (special_ports)
        dev_ports = [*self.dev_ports[:self.n_nodes], self.opts.cpu_port, self.opts.recirc_port]
        drv = tofino.TofinoDriver.connect(
            self.compiled, dev_ports=dev_ports, grpc_addr=self.opts.grpc_addr,
            device_id=self.opts.device_id, cpu_port=self.opts.cpu_port,
            semantics=self.p4.semantics(), data_ports=list(nodes),
            node_ports={n: n for n in nodes}, registers=self.registers)
        if not with_controller:
            drv.close()
            return None
        return BatchedWrites(drv)
