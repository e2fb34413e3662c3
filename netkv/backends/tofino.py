"""Tofino: the protocol's TNA program (p4src/<p>/tna/<p>.p4) on a Tofino switch
(bf_switchd of an Intel P4 Studio SDE), driven over P4Runtime.

UNTESTED on a Tofino: no SDE exists on this project's machines. What runs
here: the refusal in one line (exit 2) naming what is missing, the driver
against a fake P4Runtime shell (tests/test_tofino.py), and the testbed
wiring with a FAKE run_switchd.sh and bf-p4c on the namespace rack's switch
host (tests/test_testbed_tofino.py).

On the testbed (``switch_elsewhere``) the SDE is the switch host's
(``target.tofino.sde``, else this machine's $SDE): its ``run_switchd.sh`` and
``install/bin/bf-p4c`` are checked there over SSH first; bf-p4c runs there
(``prepare_on_host``: the SDE, its licence and its compiler live on the
switch's CPU, not on the machine that drives it), its output is fetched
into this machine's cache (the driver pushes the pipeline from here) and
pushed back beside the switch (``remote_files``); bf_switchd's P4Runtime
port (``target.tofino.grpc_addr``'s, on the host's loopback) is forwarded
here (``tcp_ports``, ``forwarded``) and ``ready`` waits until an HTTP/2
server answers through it. This machine needs only p4runtime-shell.

On a placement running the switch here (none yet), prepared before anything
starts: the SDE is checked (bf-p4c on PATH, $SDE/run_switchd.sh,
p4runtime-shell), faults and loop pairs are refused,
and the TNA program is compiled with bf-p4c (cached by content, with
NETKV_TNA_CPU_PORT = target.tofino.cpu_port). Started with
``setsid $SDE/run_switchd.sh -c <conf> --skip-p4`` on the switch; ``connect``
pushes the program over P4Runtime (PI's Tofino device config) and installs
what netkv-switch's init would, in rack ports the driver maps to the
switch's device ports: the switch's ``ports`` (the inventory's, one per
node in wiring order) are Tofino device port numbers.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netkv.backends.base import HostShell, SwitchBackend, refuse_p4_basics, switch_elsewhere
from netkv.backends.bmv2 import wait_listening
from netkv.config.compose import ConfigError
from netkv.drivers import bmv2, tofino
from netkv.drivers.base import BatchedWrites, DriverError, SwitchDriver
from netkv.protocols.plugin import parse_params
from netkv.targets.base import TargetUnavailable

if TYPE_CHECKING:
    from netkv.config.schema import RunConfig
    from netkv.protocols.plugin import ProtocolPlugin


def switch_sde(cfg: "RunConfig") -> str:
    """The SDE's folder on the switch host: ``target.tofino.sde``, else this
    machine's $SDE (the same path there), else ``""``."""
    return cfg.target.tofino.sde or os.environ.get("SDE", "")


LOOPBACK = ("127.0.0.1", "localhost")


class TofinoBackend(SwitchBackend):
    name = "tofino"
    label = "bf_switchd"
    stdout_to_log = True      # bf_switchd writes much and reports nothing on exit
    install_hint = tofino.INSTALL_HINT
    start_timeout_s = 120.0   # bf_switchd initialises the ASIC before it serves

    @classmethod
    def switch_host_programs(cls, cfg: "RunConfig") -> tuple[str, ...]:
        sde = switch_sde(cfg)
        return (f"{sde}/{tofino.SWITCHD}", f"{sde}/install/bin/{tofino.COMPILER}")

    @classmethod
    def preflight(cls, cfg: "RunConfig", plugin: "ProtocolPlugin") -> None:
        elsewhere = switch_elsewhere(cfg)
        if elsewhere and not switch_sde(cfg):
            raise TargetUnavailable(
                "target.switch=tofino: where is the SDE on the switch host? Set "
                "target.tofino.sde (the folder with $SDE/run_switchd.sh and install/bin/"
                f"bf-p4c there) or $SDE here (the same path there): {tofino.INSTALL_HINT}")
        host = cfg.target.tofino.grpc_addr.rpartition(":")[0]
        if elsewhere and host not in LOOPBACK:
            # the forward reaches the switch host's loopback: another address
            # would be silently ignored
            raise TargetUnavailable(
                f"target.tofino.grpc_addr = '{cfg.target.tofino.grpc_addr}': on "
                f"target={cfg.target.name} netkv reaches bf_switchd through an SSH forward of "
                "its port on the switch host's loopback; allowed: 127.0.0.1:<port> or "
                "localhost:<port>")
        # a switch on another host: its SDE is checked there (first, over SSH),
        # this machine's P4Runtime client when prepared
        refuse_p4_basics(cls.name, cfg, plugin,
                         (lambda: None) if elsewhere else tofino.require_tofino)
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
        self.elsewhere = switch_elsewhere(cfg)
        if self.elsewhere and (missing := tofino.missing_driver()):
            raise TargetUnavailable(
                f"target.switch=tofino on target={cfg.target.name} needs {', '.join(missing)} "
                "on this machine (it drives the switch host's bf_switchd over P4Runtime "
                "through SSH), not found: pip install 'netkv[bmv2]'")
        try:
            self.defines = {**self.p4.defines(knobs), "NETKV_TNA_CPU_PORT": self.opts.cpu_port,
                            "NETKV_TNA_RECIRC_PORT": self.opts.recirc_port}
            self.registers = self.p4.initial_registers(cfg.topology.servers, knobs)
        except ValueError as exc:
            raise ConfigError(f"invalid config: target.switch = 'tofino': {exc}") from None
        self.source = bmv2.p4src_dir() / tofino.tna_source(self.p4.source)
        # here: before anything is started, a compile error leaves nothing
        # behind; on the switch host: when the rack is up, before the switch
        # starts (prepare_on_host)
        self.compiled: tofino.TofinoProgram | None = None
        self.compiled_on = "this machine"
        if not self.elsewhere:
            self.compiled = tofino.compile_cached(plugin.name, self.source, self.defines)
        self.dev_ports: list[int] = []
        # where this machine reaches its P4Runtime server: the forward's
        # local end once the placement made it
        self.endpoint = self.opts.grpc_addr

    def program(self) -> tofino.TofinoProgram:
        if self.compiled is None:
            raise DriverError(f"{self.label}: the TNA program was not compiled on the switch "
                              "host (prepare_on_host was not called)")
        return self.compiled

    def prepare_on_host(self, shell: HostShell, folder: str, where: str) -> None:
        """bf-p4c there, into this machine's cache (reused while the sources,
        defines and that compiler stay the same)."""
        self.compiled = tofino.compile_on_host(shell, where, folder, switch_sde(self.cfg),
                                               self.plugin.name, self.source, self.defines)
        self.compiled_on = where

    def provenance(self) -> dict[str, Any]:
        """The SDE and the compiled program (its cache folder's name carries
        the digest of the sources, defines and compiler) the run used."""
        if self.compiled is None:
            return {}
        return {"sde": switch_sde(self.cfg) if self.elsewhere else os.environ.get("SDE"),
                "compiled_on": self.compiled_on, "program": self.compiled.out_dir.name,
                "defines": dict(sorted(self.defines.items()))}

    def remote_files(self) -> list[Path]:
        """bf-p4c's output beside the switch: the conf run_switchd.sh reads
        (-c), the P4Info, binary and context for an operator there (the
        pipeline itself arrives over P4Runtime)."""
        prog = self.program()
        return [prog.conf_path, prog.p4info_path, prog.bin_path, prog.context_path]

    def tcp_ports(self) -> list[int]:
        """bf_switchd's P4Runtime port (9559 by default; netkv passes none, so
        ``grpc_addr`` must name the one it uses), on the switch host."""
        return [int(self.opts.grpc_addr.rpartition(":")[2])]

    def forwarded(self, ports: dict[int, int]) -> None:
        self.endpoint = f"127.0.0.1:{ports[self.tcp_ports()[0]]}"

    def special_ports(self) -> tuple[int, int]:
        """(CPU port, recirculation port) as rack ports, after the nodes' (as
        netkv-switch numbers them); the driver maps them to the device's."""
        return self.n_nodes, self.n_nodes + 1

    def command(self, ifaces: Sequence[str], folder: Path, tag: str,
                loop: tuple[str, str] | None = None) -> list[str]:
        del tag, loop
        try:
            self.dev_ports = [int(i) for i in ifaces]
        except ValueError:
            raise ConfigError(f"invalid config: target.switch = 'tofino': the switch's ports are "
                              f"Tofino device port numbers (e.g. 132), got {list(ifaces)}") from None
        prog = self.program()
        if not self.elsewhere:
            return tofino.switchd_command(prog)
        # the conf pushed into the run folder (remote_files), the script's
        # environment as set_sde.bash would make it (a command over SSH
        # sources no profile); setsid: the lifeline then stops the group
        sde = switch_sde(self.cfg)
        cmd = tofino.switchd_command(prog, sde)
        cmd[cmd.index("-c") + 1] = str(folder / prog.conf_path.name)
        return ["env", f"SDE={sde}", f"SDE_INSTALL={sde}/install", *cmd]

    def ready(self, proc: subprocess.Popen[str], folder: Path) -> None:
        """Until its P4Runtime server answers HTTP/2 where this machine
        reaches it (through the SSH forward on the testbed: the remote port
        listening is not enough, the server must answer end to end)."""
        if not self.elsewhere:
            wait_listening(proc, self.endpoint, self.start_timeout_s, folder / self.log_name,
                           self.label)
            return
        deadline = time.monotonic() + self.start_timeout_s
        while not tofino.grpc_answers(self.endpoint):
            if proc.poll() is not None:
                raise DriverError(f"{self.label} exited ({proc.returncode}) before its "
                                  f"P4Runtime server answered on {self.endpoint}")
            if time.monotonic() > deadline:
                raise DriverError(f"{self.label}: no HTTP/2 (P4Runtime) answer on "
                                  f"{self.endpoint} after {self.start_timeout_s:g} s")
            time.sleep(0.2)

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
            self.program(), dev_ports=dev_ports, grpc_addr=self.endpoint,
            device_id=self.opts.device_id, cpu_port=self.opts.cpu_port,
            semantics=self.p4.semantics(), data_ports=list(nodes),
            node_ports={n: n for n in nodes}, registers=self.registers)
        if not with_controller:
            drv.close()
            return None
        return BatchedWrites(drv)
