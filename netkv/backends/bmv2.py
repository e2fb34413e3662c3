"""BMv2: the protocol's P4 program in ``simple_switch_grpc`` on a rack's switch node.

Prepared before anything starts: the toolchain is checked (one line naming
what is missing), faults are refused (netkv-switch injects them; BMv2 has no
counterpart), and the program (the plug-in's ``P4Program``) is compiled with
p4c-bm2-ss, cached by content. Started without a program (``--no-p4``) on
data port i = the node's i-th interface and the CPU port; ``connect`` pushes
the program over P4Runtime and installs what netkv-switch's init would (flood
group, CPU clone session, node -> port, the pipeline's initial registers).

A program whose plug-in declares ``loop_ports`` (out, in) (StarCache) gets
its recirculation port as a loopback veth pair: the placement makes the pair,
its ends become those two data ports, and after the program is pushed the
out port's egress queue is set to ``target.loop`` (``set_queue_depth``,
``set_queue_rate``) over the Thrift CLI. BMv2's own recirculate() is not
used: it queues recirculated packets ahead of new ones, and cache packets
looping back to back would starve the clients (BMV2-NOTES).

On the testbed (``switch_elsewhere``) only ``simple_switch_grpc`` runs on
the switch host (``host_programs``, checked there over SSH first); this
machine compiles and drives it, through SSH forwards of the switch's gRPC
and Thrift ports (``tcp_ports``, ``forwarded``; docs/testbed.md "Switch").
Never run against a real BMv2: tested with a fake simple_switch_grpc.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netkv.backends.base import SwitchBackend, refuse_p4_basics, switch_elsewhere
from netkv.config.compose import ConfigError
from netkv.drivers import bmv2
from netkv.drivers.base import BatchedWrites, DriverError, SwitchDriver
from netkv.protocols.plugin import parse_params
from netkv.targets.base import TargetUnavailable

if TYPE_CHECKING:
    from netkv.config.schema import RunConfig
    from netkv.protocols.plugin import ProtocolPlugin

START_TIMEOUT_S = 30.0


def wait_listening(proc: subprocess.Popen[Any], addr: str, timeout_s: float, log: Path,
                   label: str) -> None:
    """Wait until ``proc`` listens on ``addr``; fail at once (with its log)
    if it exits first instead of waiting out the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip()[-500:] if log.exists() else ""
            raise DriverError(f"{label} exited ({proc.returncode}) before listening on "
                              f"{addr}: {tail}")
        try:
            bmv2.wait_for_tcp(addr, min(0.5, max(0.0, deadline - time.monotonic())))
            return
        except DriverError:
            if time.monotonic() > deadline:
                raise DriverError(f"{label} not listening on {addr} after {timeout_s:g} s") from None


class Bmv2Backend(SwitchBackend):
    name = "bmv2"
    label = bmv2.SWITCH
    loop_port = True
    stdout_to_log = True
    install_hint = bmv2.INSTALL_HINT

    # on the testbed: only the switch runs on the switch host; this machine
    # compiles (p4c-bm2-ss) and drives it (p4runtime-shell, simple_switch_CLI)
    host_programs = (bmv2.SWITCH,)

    @classmethod
    def preflight(cls, cfg: "RunConfig", plugin: "ProtocolPlugin") -> None:
        # a switch on another host: that host's programs are the placement's
        # to check there (first, over SSH), this machine's when prepared
        refuse_p4_basics(cls.name, cfg, plugin,
                         (lambda: None) if switch_elsewhere(cfg) else bmv2.require_bmv2)
        assert plugin.p4 is not None
        ports = plugin.p4.loop_ports or ()
        nodes = cfg.topology.servers + cfg.topology.clients + cfg.protocol.coordinators()[0]
        if any(p == bmv2.CPU_PORT or p < nodes for p in ports):
            raise TargetUnavailable(f"target.switch = 'bmv2': protocol = '{plugin.name}' puts its "
                                    f"loop pair on ports {ports}, which the rack's nodes or the "
                                    f"CPU port ({bmv2.CPU_PORT}) take")

    def __init__(self, cfg: "RunConfig", plugin: "ProtocolPlugin", params: str) -> None:
        super().__init__(cfg, plugin, params)
        assert plugin.p4 is not None  # preflight
        self.elsewhere = switch_elsewhere(cfg)
        if self.elsewhere:
            missing = [m for m in bmv2.missing_bmv2() if m not in self.host_programs]
            if missing:
                raise TargetUnavailable(
                    f"target.switch=bmv2 on target={cfg.target.name} needs {', '.join(missing)} "
                    "on this machine (it compiles the program and drives the switch host's "
                    f"{bmv2.SWITCH} through SSH), not found: {bmv2.INSTALL_HINT}")
        self.p4 = plugin.p4
        self.knobs = parse_params(params)
        try:
            self.defines = self.p4.defines(self.knobs)
            self.registers = self.p4.initial_registers(cfg.topology.servers, self.knobs)
        except ValueError as exc:
            raise ConfigError(f"invalid config: target.switch = 'bmv2': {exc}") from None
        # before anything is started: a compile error leaves nothing behind
        self.compiled = bmv2.compile_cached(plugin.name, bmv2.p4src_dir() / self.p4.source,
                                            self.defines)
        # where the switch listens (its host's loopback), and where this
        # machine reaches it: the same on Mininet; on another host the SSH
        # forwards' local ends (``forwarded``)
        self.listen = bmv2.free_endpoint()
        self.endpoint = self.listen

    def wants_loop(self) -> bool:
        return self.p4.needs_loop

    def special_ports(self) -> tuple[int, int]:
        """(CPU port, recirculation port): the loop pair's out port."""
        if self.p4.loop_ports is None:
            raise NotImplementedError(f"{self.label}: protocol = '{self.plugin.name}' has no "
                                      "recirculation port")
        return bmv2.CPU_PORT, self.p4.loop_ports[0]

    def command(self, ifaces: Sequence[str], folder: Path, tag: str,
                loop: tuple[str, str] | None = None) -> list[str]:
        del tag
        ep = self.listen
        ports = dict(enumerate(ifaces))
        if self.p4.loop_ports is not None:
            if loop is None:
                raise DriverError(f"{self.label}: protocol = '{self.plugin.name}' needs its loop "
                                  "pair, and the placement made none")
            # the pair's out end on the program's out port, its in end on the
            # in port: what leaves the one comes back into ingress on the other
            ports.update(zip(self.p4.loop_ports, loop))
        # no --log-file: BMv2 then logs every packet event, which costs more
        # than the switching itself
        return bmv2.switch_command(
            ports, grpc_addr=ep.grpc_addr, thrift_port=ep.thrift_port,
            device_id=ep.device_id, notifications_addr=f"ipc://{folder / 'bmv2-notify.ipc'}")

    def loop_queue(self) -> list[str]:
        """The CLI commands that make the loop pair's out queue the
        recirculation port of ``target.loop`` (none without a loop)."""
        if self.p4.loop_ports is None:
            return []
        loop = self.cfg.target.loop
        return bmv2.loop_queue_commands(self.p4.loop_ports[0], loop.rate_pps, loop.depth)

    def ready(self, proc: subprocess.Popen[str], folder: Path) -> None:
        wait_listening(proc, self.endpoint.grpc_addr, START_TIMEOUT_S, folder / self.log_name,
                       self.label)

    def remote_files(self) -> list[Path]:
        """The compiled program beside the switch on its host: the switch
        gets it over P4Runtime, these copies let an operator there read the
        tables and registers (simple_switch_CLI) of what runs."""
        return [self.compiled.json_path, self.compiled.p4info_path]

    def tcp_ports(self) -> list[int]:
        """gRPC (P4Runtime) and Thrift (the CLI's registers and queues)."""
        return [int(self.listen.grpc_addr.rpartition(":")[2]), self.listen.thrift_port]

    def forwarded(self, ports: dict[int, int]) -> None:
        grpc, thrift = self.tcp_ports()
        self.endpoint = bmv2.Bmv2Endpoint(f"127.0.0.1:{ports[grpc]}", ports[thrift],
                                          self.listen.device_id)

    def setup(self) -> dict[str, Any]:
        nodes = range(self.n_nodes)
        return {"data_ports": list(nodes), "node_ports": {n: n for n in nodes},
                "registers": self.registers}

    def connect(self, folder: Path, with_controller: bool) -> SwitchDriver | None:
        """A controller gets the driver (its register writes batched, as over
        netkv-switch's socket); without one the switch is set up in a child
        process and nothing stays connected (p4runtime-shell: one client per
        process, and the SLO's reference rack comes up while the protocol's
        rack is held)."""
        del folder
        ep = self.endpoint
        if not with_controller:
            bmv2.configure_in_child(self.compiled, ep, **self.setup())
            bmv2.cli_run(ep.thrift_port, self.loop_queue())
            return None
        drv = bmv2.Bmv2Driver.connect(self.compiled, grpc_addr=ep.grpc_addr,
                                      thrift_port=ep.thrift_port, device_id=ep.device_id,
                                      semantics=self.p4.semantics(), **self.setup())
        # after the program is pushed: the queue settings are the switch's,
        # set once the pipeline that uses the port is in place
        bmv2.cli_run(ep.thrift_port, self.loop_queue())
        return BatchedWrites(drv)

    def stop(self, proc: subprocess.Popen[str]) -> dict[str, Any]:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return {}  # BMv2 has no exit report
