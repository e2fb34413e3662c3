"""BMv2: the protocol's P4 program in ``simple_switch_grpc`` on a rack's switch node.

Prepared before anything starts: the toolchain is checked (one line naming
what is missing), faults are refused (netkv-switch injects them; BMv2 has no
counterpart), and the program (the plug-in's ``P4Program``) is compiled with
p4c-bm2-ss, cached by content. Started without a program (``--no-p4``) on
data port i = the node's i-th interface and the CPU port; ``connect`` pushes
the program over P4Runtime and installs what netkv-switch's init would (flood
group, CPU clone session, node -> port, the pipeline's initial registers).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netkv.backends.base import SwitchBackend, has_faults
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

    @classmethod
    def preflight(cls, cfg: "RunConfig", plugin: "ProtocolPlugin") -> None:
        try:
            bmv2.require_bmv2()
        except ConfigError as exc:
            raise TargetUnavailable(str(exc)) from None
        if plugin.p4 is None:
            raise TargetUnavailable(f"target.switch = 'bmv2': protocol = '{plugin.name}' has "
                                    "no P4 program")
        if plugin.p4.needs_loop and not cls.loop_port:
            raise TargetUnavailable(f"target.switch = 'bmv2': protocol = '{plugin.name}' needs "
                                    "a loop port, which the BMv2 back-end does not build yet: "
                                    "use target.switch=netkv")
        if has_faults(cfg):
            raise TargetUnavailable("target.faults (loss, duplicate, reorder, delay_us) are "
                                    "injected by netkv-switch: use target.switch=netkv")

    def __init__(self, cfg: "RunConfig", plugin: "ProtocolPlugin", params: str) -> None:
        super().__init__(cfg, plugin, params)
        assert plugin.p4 is not None  # preflight
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
        self.endpoint = bmv2.free_endpoint()

    def command(self, ifaces: Sequence[str], folder: Path, tag: str,
                loop: tuple[str, str] | None = None) -> list[str]:
        del tag, loop
        ep = self.endpoint
        # no --log-file: BMv2 then logs every packet event, which costs more
        # than the switching itself
        return bmv2.switch_command(
            dict(enumerate(ifaces)), grpc_addr=ep.grpc_addr, thrift_port=ep.thrift_port,
            device_id=ep.device_id, notifications_addr=f"ipc://{folder / 'bmv2-notify.ipc'}")

    def start(self, ifaces: Sequence[str], folder: Path, tag: str,
              loop: tuple[str, str] | None = None) -> subprocess.Popen[str]:
        cmd = self.command(ifaces, folder, tag, loop)
        with open(folder / self.log_name, "w") as log:
            try:
                return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
            except FileNotFoundError:
                raise DriverError(f"{bmv2.SWITCH} not found: {bmv2.INSTALL_HINT}") from None

    def ready(self, proc: subprocess.Popen[str], folder: Path) -> None:
        wait_listening(proc, self.endpoint.grpc_addr, START_TIMEOUT_S, folder / self.log_name,
                       self.label)

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
            return None
        drv = bmv2.Bmv2Driver.connect(self.compiled, grpc_addr=ep.grpc_addr,
                                      thrift_port=ep.thrift_port, device_id=ep.device_id,
                                      semantics=self.p4.semantics(), **self.setup())
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
