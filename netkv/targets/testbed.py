"""TestbedTarget: the Mininet target's rack logic on real hosts over SSH.

Everything per load point (client arguments, the common start, the
controller's epochs, merging histograms and counters into a PointResult) is
the Mininet target's; what differs is the rack (``netkv.testbed.rack.SshRack``
on the inventory's hosts) and its state: a local folder for the forwarded
control sockets and the SSH masters, and on each host a run folder that
``stop`` removes. The switch back-end is prepared here as on Mininet and its
program started on the switch host.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netkv import procstat, statedir
from netkv.backends import backend_class
from netkv.config.schema import RunConfig
from netkv.native import NativeBuildMissing, program_path
from netkv.targets.base import TargetUnavailable
from netkv.testbed import stacks
from netkv.testbed.clean import INVENTORY, PARENT, STATE_ROOT
from netkv.testbed.inventory import Host, Inventory
from netkv.testbed.ssh import Ssh
from netkv.targets.mininet import MininetTarget
from netkv.targets.mininet import check_config as check_rack_config


@dataclass
class LocalState:
    """A run's local folder (0700): forwarded sockets, SSH masters, histories."""

    tag: str
    folder: Path
    pids: list[int] = field(default_factory=list)

    @classmethod
    def create(cls, inventory: Inventory) -> "LocalState":
        # whose run it is (`netkv clean --inventory` treats the run as dead
        # once this process is gone), the hosts, then the owner's parent (a
        # sweep's command finds its killed workers' runs by it:
        # netkv.testbed.clean.clean_children); all in the folder as it
        # appears (netkv.statedir)
        folder = statedir.create(STATE_ROOT, "nk", {
            "owner": procstat.owner_record() + "\n",
            INVENTORY: inventory.model_dump_json(),
            PARENT: procstat.owner_record(os.getppid()) + "\n"}, tag_chars=8)
        # it names the remote run folders and the run in process lists
        return cls(folder.name, folder)


def check_config(cfg: RunConfig) -> None:
    """Refuse, before the run directory is written (runner.check_supported),
    what the testbed cannot run: the Mininet rack's limits (one switch,
    kvclient's workloads) and capture; this machine's part is check_machine's,
    and the hosts (over SSH) wait for the target."""
    check_rack_config(cfg, TestbedTarget.name, TestbedTarget.applies_faults)
    if cfg.capture:
        raise TargetUnavailable("capture=true is not implemented on target=testbed yet "
                                "(sim and mininet capture)")


def check_machine(cfg: RunConfig) -> None:
    """Refuse, before the run directory is written (runner.check_supported),
    what this machine lacks for the inventory: OpenSSH's client, the key
    files, the DPDK programs its dpdk hosts run, the known_hosts file."""
    inv = cfg.inventory
    if shutil.which("ssh") is None:
        raise TargetUnavailable("target=testbed needs OpenSSH's client: "
                                "apt-get install openssh-client")
    missing = sorted({h.key for h in inv.hosts if not os.path.exists(h.key)})
    if missing:
        # every one, so that a test or a user fixing one is not sent back
        # for the next
        raise TargetUnavailable(f"target=testbed: key file{'s' if len(missing) > 1 else ''}"
                                f" {', '.join(missing)} not found (inventory {inv.name!r})")
    used = (inv.with_role("server")[: cfg.topology.servers]
            + inv.with_role("client")[: cfg.topology.clients]
            + inv.with_role("coordinator")[: cfg.protocol.coordinators()[0]])
    for prog in stacks.programs(inv, used):
        try:
            program_path(prog)
        except NativeBuildMissing:
            raise TargetUnavailable(f"target=testbed: stack dpdk needs {prog}, which this "
                                    "build has not (CMake found no libdpdk: apt-get install "
                                    "libdpdk-dev, then just setup)") from None
    if not os.path.exists(inv.known_hosts):
        raise TargetUnavailable(f"target=testbed: known_hosts file {inv.known_hosts} not "
                                "found (host keys are pinned)")


class TestbedTarget(MininetTarget):
    """One rack of the inventory's hosts, reached over SSH."""

    name = "testbed"
    one_rack_at_a_time = True   # every rack runs on the inventory's hosts
    switch_elsewhere = True     # on the inventory's switch host

    def check_placement(self) -> None:
        inv = self.cfg.inventory
        switch = inv.with_role("switch")[0]
        if self.plugin.p4 is not None and self.plugin.p4.needs_loop and not switch.loop:
            raise TargetUnavailable(f"target=testbed: protocol = '{self.plugin.name}' needs a "
                                    f"loop port on the switch: inventory {inv.name!r} host "
                                    f"{switch.name!r} has no loop (two interfaces wired to "
                                    "each other, e.g. loop: [lp0, lp1])")
        # as runner.check_supported did, for a target built directly
        check_config(self.cfg)
        check_machine(self.cfg)
        self.check_switch_host(switch)

    def check_switch_host(self, switch: Host) -> None:
        """The programs the switch back-end runs there and netkv does not
        push are on the switch host's PATH: one line naming host and
        program, before anything is compiled or started."""
        need = backend_class(self.cfg.target.switch).switch_host_programs(self.cfg)
        if not need:
            return
        with tempfile.TemporaryDirectory(prefix="nkchk", dir="/tmp") as control:
            ssh = Ssh(switch, self.cfg.inventory.known_hosts, Path(control))
            try:
                missing = ssh.missing(need)
            finally:
                ssh.close()
        where = (f"target.switch={self.cfg.target.switch}: switch host {switch.name!r} "
                 f"({switch.ssh})")
        if paths := [m for m in missing if m.startswith("/")]:
            raise TargetUnavailable(f"{where} has no executable {', '.join(paths)} there: "
                                    f"{backend_class(self.cfg.target.switch).install_hint}")
        if missing:
            path = f" (PATH: inventory path {switch.path} first)" if switch.path else ""
            raise TargetUnavailable(f"{where} has no {missing[0]} on its PATH{path}: install "
                                    "it there, or list its folder in the host's inventory path")

    def new_state(self) -> Any:
        return LocalState.create(self.cfg.inventory)

    def new_rack(self, spec: Any) -> Any:
        from netkv.testbed.rack import SshRack

        control = self.state.folder / "ssh"
        control.mkdir(mode=0o700)
        return SshRack(spec, self.cfg.inventory, self.state.folder, control)

    def release(self) -> None:
        statedir.remove(self.state.folder)

    def provenance(self) -> dict[str, Any]:
        """Per host: roles, stack, NIC and cores as the inventory gives them,
        and what the host reports (kernel, CPU model, online cores, the NIC's
        driver and speed), and the switch back-end's own record (``switch``:
        e.g. where its program was compiled), when it has one."""
        if self.rack is None:
            return {}
        switch = self.rack.spec.backend.provenance()
        return {"hosts": self.rack.describe_hosts(), **({"switch": switch} if switch else {})}

