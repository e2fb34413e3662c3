"""SwitchBackend: one switch back-end's life cycle on a rack.

A placement (Mininet now, the testbed later) builds a node with the rack's
ports and asks its back-end:

1. ``SwitchBackend(cfg, plugin, params)``: prepare. Refuse in one line
   (``TargetUnavailable``, exit 2) what cannot run here, before anything is
   started; compile what needs compiling (cached by content).
2. ``command(ifaces, folder, tag, loop)``: the program to start on the
   node, data port i on ``ifaces[i]`` (the rack plan: node i on port i) and,
   for a back-end with ``loop_port``, its recirculation port on the veth
   pair ``loop`` = (out, in) the placement made (when ``wants_loop()``);
   ``ready(proc)`` waits until it serves.
3. ``connect(folder, with_controller)``: install what the C pipeline's init
   would, and hand back the ``SwitchDriver`` a controller uses (None if the
   back-end keeps nothing connected without one). A restart after an outage
   starts a back-end with ``closed_args`` closed (``command()`` plus those),
   and ``open(driver)`` lets traffic through once the controller is done.
4. ``stop(proc)``: stop it; its final counters.

A placement that runs the switch on another host (the testbed's switch
host, over SSH; ``switch_elsewhere``) starts ``command()`` there under its
own supervision instead of ``start``/``ready``/``stop``, and asks the
back-end what crosses the SSH channel: ``host_programs`` (checked on the
host's PATH before anything starts), ``remote_files`` (pushed into the
remote run folder first), ``unix_sockets`` (waited for, then forwarded here
under the same name) and ``tcp_ports`` (waited for on the host's loopback,
forwarded from ports of this machine's loopback, told back through
``forwarded``), then calls ``ready`` (with the SSH session standing for the
program) before ``connect``. ``switch_host_programs`` may name programs by
absolute path (an SDE's script), and ``prepare_on_host`` does what must run
on the switch host before the program starts (a compiler that lives only
there).

A back-end asks the protocol only through its ``ProtocolPlugin`` and never
learns a protocol's name; a placement never learns a back-end's internals.
"""

from __future__ import annotations

import json
import signal
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from netkv.drivers.base import DriverError, SwitchDriver

if TYPE_CHECKING:
    from netkv.config.schema import RunConfig
    from netkv.protocols.plugin import ProtocolPlugin


class HostShell(Protocol):
    """What a back-end may do on the switch host (``netkv.testbed.ssh.Ssh``)."""

    def run(self, command: str, timeout_s: float = 60.0, input_text: str | None = None,
            check: bool = True) -> "subprocess.CompletedProcess[str]": ...

    def copy_to(self, local: Path, remote: str) -> None: ...

    def read(self, remote: str) -> bytes: ...


class SwitchBackend(ABC):
    """One switch of one rack."""

    name: ClassVar[str]
    label: ClassVar[str]            # the program, in messages
    log_name: ClassVar[str] = "switch.log"
    captures: ClassVar[bool] = False  # capture_start/capture_stop (capture=true)
    # its recirculation port is a veth pair (out, in) the placement makes
    # (both ends on the switch node, target.loop)
    loop_port: ClassVar[bool] = False
    # target.faults.switch_outages: the placement may kill its program and
    # start it again on the same ports (state empty), then ``connect`` again
    restartable: ClassVar[bool] = False
    # what its command line takes to start the program closed, at a restart:
    # forwarding nothing until ``open`` (after the controller has installed
    # its state again), as a switch its control plane has not programmed
    # yet; () = it forwards as soon as it is up
    closed_args: ClassVar[tuple[str, ...]] = ()
    # a program that writes much and reports nothing on exit: its stdout goes
    # to the log too (a pipe nobody reads would fill and stall it), and a
    # missing program is named with this hint
    stdout_to_log: ClassVar[bool] = False
    install_hint: ClassVar[str] = ""

    # programs its command runs that a remote placement does not push (it
    # pushes netkv's own): they must be on the switch host's PATH
    host_programs: ClassVar[tuple[str, ...]] = ()
    # how long its program may take to listen (a Tofino's ASIC init is slow)
    start_timeout_s: ClassVar[float] = 30.0

    def __init__(self, cfg: "RunConfig", plugin: "ProtocolPlugin", params: str) -> None:
        self.preflight(cfg, plugin)
        self.cfg, self.plugin, self.params = cfg, plugin, params

    @classmethod
    def switch_host_programs(cls, cfg: "RunConfig") -> tuple[str, ...]:
        """``host_programs`` for ``cfg``: names on the host's PATH, or
        absolute paths there."""
        del cfg
        return cls.host_programs

    @classmethod
    def preflight(cls, cfg: "RunConfig", plugin: "ProtocolPlugin") -> None:  # noqa: B027
        """Refuse in one line (``TargetUnavailable``) what this back-end cannot
        run here: called before a run writes anything, and when prepared."""

    @property
    def n_coords(self) -> int:
        """Coordinator hosts in the rack (the protocol's), nodes after the clients."""
        return self.cfg.protocol.coordinators()[0]

    @property
    def n_nodes(self) -> int:
        return self.cfg.topology.servers + self.cfg.topology.clients + self.n_coords

    def wants_loop(self) -> bool:
        """Whether the placement makes the loop pair for this run (default:
        whenever the back-end has a loop port)."""
        return self.loop_port

    def special_ports(self) -> tuple[int, int]:
        """(CPU port, recirculation port) as the switch's pipeline numbers them."""
        raise NotImplementedError(f"{self.label}: its CPU and recirculation ports are not known")

    @abstractmethod
    def command(self, ifaces: Sequence[str], folder: Path, tag: str,
                loop: tuple[str, str] | None = None) -> list[str]:
        """The switch program's command line on the node's ports."""

    def start(self, ifaces: Sequence[str], folder: Path, tag: str,
              loop: tuple[str, str] | None = None,
              closed: bool = False) -> subprocess.Popen[str]:
        """Start ``command()`` (stdout: a pipe for the exit report, stderr:
        the log; ``closed``: with ``closed_args``)."""
        log_path = folder / self.log_name
        cmd = [*self.command(ifaces, folder, tag, loop), *(self.closed_args if closed else ())]
        with open(log_path, "w") as log:
            if not self.stdout_to_log:
                return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
            try:
                return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
            except FileNotFoundError:
                raise DriverError(f"{cmd[0]} not found: {self.install_hint}") from None

    def ready(self, proc: subprocess.Popen[str], folder: Path) -> None:  # noqa: B027
        """Wait until the started switch serves (default: at once)."""

    def prepare_on_host(self, shell: HostShell, folder: str, where: str) -> None:  # noqa: B027
        """A remote placement, before ``remote_files`` and ``command``: what
        must run on the switch host ``where`` (its run folder ``folder``)."""

    def provenance(self) -> dict[str, Any]:
        """What a run's provenance.json records of this switch (default:
        nothing beyond ``target.switch``)."""
        return {}

    def remote_files(self) -> list[Path]:
        """Files of this machine the program needs beside it in the run folder
        when it runs on another host (default: none)."""
        return []

    def unix_sockets(self) -> list[str]:
        """Unix sockets the program opens in its run folder (names), which a
        controller reaches under the same name in the local folder."""
        return []

    def tcp_ports(self) -> list[int]:
        """TCP ports ``command()`` listens on, on its host's loopback."""
        return []

    def forwarded(self, ports: dict[int, int]) -> None:  # noqa: B027
        """A remote placement forwards each of ``tcp_ports`` from a port of this
        machine's loopback ({remote: local}): ``connect`` must use those."""

    @abstractmethod
    def connect(self, folder: Path, with_controller: bool) -> SwitchDriver | None:
        """Install the initial state; the driver a controller uses."""

    def controller_driver(self, driver: SwitchDriver | None,
                          folder: Path) -> tuple[SwitchDriver, bool]:
        """The driver the controller's plane uses, and whether the plane owns
        (closes) it. Default: the one ``connect`` returned."""
        assert driver is not None, "connect(with_controller=True) returned no driver"
        return driver, False

    def capture_start(self, driver: SwitchDriver | None, folder: Path, snaplen: int,
                      max_bytes: int, max_packets: int) -> None:
        """capture=true: write every port's frames, the CPU port's included,
        into folder/switch-p<N>.pcap and folder/switch-cpu.pcap (bounded)."""
        raise NotImplementedError(f"{self.label} does not capture")

    def capture_stop(self, driver: SwitchDriver | None) -> dict[str, dict[str, Any]]:
        """Close the capture files: per file packets, missed, busy_s."""
        raise NotImplementedError(f"{self.label} does not capture")

    def open(self, driver: SwitchDriver | None) -> None:
        """Let traffic through a program started with ``closed_args``."""
        raise NotImplementedError(f"{self.label} does not start closed")

    def apply_faults(self, driver: SwitchDriver | None) -> None:  # noqa: B027
        """Inject ``target.faults`` (default: none are asked for; back-ends
        that cannot inject faults refuse them when prepared)."""

    def stop(self, proc: subprocess.Popen[str]) -> dict[str, Any]:
        """Stop the program; its exit report (a JSON last line on stdout,
        ``{"netkv_switch": {...}}``-style: the one object inside), or {}."""
        if proc.poll() is not None:
            return {}
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return {}
        try:
            last = json.loads(out.strip().splitlines()[-1]) if out and out.strip() else {}
        except json.JSONDecodeError:
            return {}
        inner = next(iter(last.values()), {}) if isinstance(last, dict) and len(last) == 1 else last
        return inner if isinstance(inner, dict) else {}


def switch_elsewhere(cfg: "RunConfig") -> bool:
    """Whether ``cfg``'s placement runs the switch program on another host
    (its ``Target.switch_elsewhere``): this machine then only drives it."""
    from netkv.runner import placement_class

    return placement_class(cfg.target.name).switch_elsewhere


def fault_per_egress(p: float) -> float:
    """The simulator charges a fault on each link traversal; a rack's switch
    applies it once per egress, which stands for two traversals (host ->
    switch -> host): 1 - (1 - p)^2."""
    return 1.0 - (1.0 - p) ** 2


def has_faults(cfg: "RunConfig") -> bool:
    f = cfg.target.faults
    return bool(f.loss or f.duplicate or f.reorder or f.delay_us)


def refuse_p4_basics(switch: str, cfg: "RunConfig", plugin: "ProtocolPlugin",
                     require: Callable[[], None]) -> None:
    """What every P4 back-end refuses in one line (``TargetUnavailable``):
    a toolchain ``require`` finds missing (its ``ConfigError``), a protocol
    without a P4 program, and faults (netkv-switch injects them)."""
    from netkv.config.compose import ConfigError
    from netkv.targets.base import TargetUnavailable

    try:
        require()
    except ConfigError as exc:
        raise TargetUnavailable(str(exc)) from None
    if plugin.p4 is None:
        raise TargetUnavailable(f"target.switch = '{switch}': protocol = '{plugin.name}' has "
                                "no P4 program")
    if has_faults(cfg):
        raise TargetUnavailable("target.faults (loss, duplicate, reorder, delay_us) are "
                                "injected by netkv-switch: use target.switch=netkv")
