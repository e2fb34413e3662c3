"""SshRack: a rack of real hosts (the inventory's), driven over SSH.

The same interface the Mininet rack gives its target (``check_alive``,
``server_stats``, ``server_ctl``, ``run_clients``, ``stop``), so the testbed
target is the Mininet target with another rack:

1. every host used answers over SSH (one line naming the host and why not);
2. the C programs are pushed once per build into ``<workdir>/bin/<build>/``
   on each host (a content hash of the programs: a rebuilt binary is pushed
   again, an unchanged one never; every file is checked by its sha256, so
   one deleted or changed on the host is pushed again);
3. the data NICs get the rack plan's addresses (node n: 10.0.0.(n+1), MAC
   02:00:00:00:HH:LL), static ARP for every node and the controller; a DPDK
   host's NIC gets only its MAC and no address (its program answers, not
   the kernel), or nothing when DPDK owns it (a PCI address);
4. the switch back-end's program starts on the switch host on the ports
   wired to the hosts used, the kvservers on the servers (and ``kvserver
   --mode coord`` on the coordinator hosts a protocol asks for), each under a
   lifeline (``ssh.lifeline``) and on the host's stack
   (``netkv.testbed.stacks``), their control sockets forwarded here (the
   switch back-end's: its Unix sockets or loopback TCP ports, as it declares
   them; ``SwitchBackend``);
5. a load point's kvclients start over SSH and are sent one start instant
   in CLOCK_REALTIME (``@ns``: hosts' real-time clocks must be synchronised,
   e.g. by PTP/NTP; in the namespace rack they share one clock);
6. ``stop`` closes every lifeline (the programs get SIGTERM and print their
   exit report), the forwards and the SSH masters, and removes the remote
   run folder; nothing stays running remotely.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

# the rack plan and the controller's address are the Mininet rack's (io.h)
from netkv.drivers.base import DriverError
from netkv.mininet.rack import CONTROLLER_IP, CONTROLLER_MAC, node_ip, node_mac
from netkv.testbed import build, stacks
from netkv.testbed.clean import kill_and_remove
from netkv.testbed.inventory import Host, Inventory
from netkv.testbed.ssh import RemoteError, Ssh, lifeline

if TYPE_CHECKING:
    from netkv.mininet.rack import RackSpec

PROGRAMS = stacks.PROGRAMS
# how long one SSH session waits for a program's socket on its host; between
# slices every lifeline is checked, so a program that dies while starting is
# reported within about this long
WAIT_SLICE_S = 0.5


def free_ports(n: int) -> list[int]:
    """``n`` different TCP ports of this machine's loopback, free right now
    (a forward's local ends): all held open until all are chosen."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def build_id(paths: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


class SshRack:
    """The inventory's switch, first ``spec.servers`` servers, first
    ``spec.clients`` clients and first ``spec.coordinators`` coordinator
    hosts, running one rack."""

    def __init__(self, spec: "RackSpec", inventory: Inventory, local_folder: Path,
                 control_dir: Path) -> None:
        from netkv.native import program_path

        self.spec = spec
        self.inv = inventory
        self.folder = local_folder
        servers = inventory.with_role("server")
        clients = inventory.with_role("client")
        self.servers: list[Host] = servers[: spec.servers]
        # kvservers restarted per server (target.faults.crashes), read by
        # MininetTarget.run_point
        self.incarnations: list[int] = [0] * len(self.servers)
        self.crashed: set[int] = set()   # servers whose kvserver was killed (crash_server)
        self.server_argv: list[list[str]] = []   # each kvserver's command line, for its restart
        self.last_stats: dict[int, dict[str, Any]] = {}   # a crashed server's last counters
        # the switch killed by a scheduled outage (target.faults.switch_outages),
        # read by the controller's thread
        self.switch_down = False
        self.switch_argv: list[str] = []   # the switch program's, for its restart
        self.clients: list[Host] = clients[: spec.clients]
        self.coordinators: list[Host] = inventory.with_role("coordinator")[: spec.coordinators]
        self.switch_host = inventory.with_role("switch")[0]
        # the switch's port to each host used (port i of the inventory is
        # wired to the i-th server, then the clients, then the coordinators)
        ports = self.switch_host.ports
        first_k = len(servers) + len(clients)
        self.switch_ports = (ports[: spec.servers] + ports[len(servers): len(servers) + spec.clients]
                             + ports[first_k: first_k + spec.coordinators])
        self.nodes: list[Host] = self.servers + self.clients + self.coordinators
        self.node_of = {h.name: n for n, h in enumerate(self.nodes)}
        used = {h.name: h for h in [self.switch_host, *self.nodes]}
        self.hosts = used
        self.ncpu: dict[str, int] = {}
        self.ssh = {name: Ssh(h, inventory.known_hosts, control_dir) for name, h in used.items()}
        self.lifelines: dict[str, subprocess.Popen[str]] = {}
        self.logs: dict[str, tuple[str, str]] = {}   # label -> (host, remote log)
        self.forwards: list[subprocess.Popen[str]] = []
        from netkv.native import library_path

        self.programs = (*PROGRAMS[:-1], *stacks.programs(inventory, self.nodes), PROGRAMS[-1])
        self.local = {p: Path(program_path(p)) for p in self.programs}
        self.library = Path(library_path())
        self.build = build_id([self.library, *(self.local[p] for p in self.programs)])
        files = {self.library.name: self.library, **self.local}
        self.digests = {f: hashlib.sha256(p.read_bytes()).hexdigest() for f, p in files.items()}
        self.remote_run = {h.name: f"{h.workdir}/run-{spec.tag}" for h in used.values()}
        self.remote_bin = {h.name: f"{h.workdir}/bin/{self.build}" for h in used.values()}
        self.built_from: dict[str, str] = {}   # host -> build id, for build.mode=source
        self._archive_lock = threading.Lock()
        for h in used.values():
            b = inventory.build_of(h)
            if b.mode == "source":
                self.built_from[h.name] = build.build_id(build.source_root(), b.cmake_args)
                self.remote_bin[h.name] = f"{h.workdir}/bin/{self.built_from[h.name]}"
        try:
            self._each(lambda name: self.ssh[name].check())
            self._each(self._check_stack)
            self._each(self._push)
            self._each(lambda name: self.ssh[name].run(
                f"mkdir -p -m 700 {shlex.quote(self.remote_run[name])}"))
            self._each_node(self._address)
            self._start_switch()
            self._start_servers()
        except BaseException:
            self.stop()
            raise

    # --- set-up ----------------------------------------------------------------------------

    def _each(self, fn: Callable[[str], Any]) -> None:
        with ThreadPoolExecutor(max_workers=8) as pool:
            for f in [pool.submit(fn, name) for name in self.ssh]:
                f.result()

    def _each_node(self, fn: Callable[[int, Host], Any]) -> None:
        with ThreadPoolExecutor(max_workers=8) as pool:
            for f in [pool.submit(fn, n, h) for n, h in enumerate(self.nodes)]:
                f.result()

    def _check_stack(self, name: str) -> None:
        """A vma host has libvma (LD_PRELOAD of a missing library only warns,
        and the program would run on the kernel's sockets unnoticed)."""
        if name not in self.node_of or self.inv.stack_of(self.hosts[name]) != "vma":
            return
        lib = self.inv.vma_of(self.hosts[name]).lib
        if self.ssh[name].run(f"test -r {shlex.quote(lib)} && echo ok", check=False
                              ).stdout.strip() != "ok":
            raise RemoteError(f"host {name!r}: stack vma needs libvma at {lib} (inventory "
                              "vma.lib), not found there; libvma is not packaged for Debian")

    def _push(self, name: str) -> None:
        """Push the library and programs into the host's cache folder for this
        build, unless every file there already has the right content: the
        cache is checked file by file (sha256sum -c), so a program deleted or
        changed on the host since it was pushed is pushed again."""
        ssh, rbin = self.ssh[name], self.remote_bin[name]
        self.ncpu[name] = int(ssh.run("nproc --all").stdout.strip() or 1)
        if name in self.built_from:
            self._build_there(name)
        elif stale := self._stale(ssh, rbin):
            ssh.run(f"mkdir -p {shlex.quote(rbin)}")
            for prog in stale:
                local = self.library if prog == self.library.name else self.local[prog]
                ssh.copy_to(local, f"{rbin}/{prog}")
            if damaged := self._stale(ssh, rbin):
                raise RemoteError(f"host {name!r}: {', '.join(damaged)} in {rbin} still differ "
                                  "from this build after copying (is the disk full or read-only?)")
        stack = self.inv.stack_of(self.hosts[name]) if name in self.node_of else "kernel"
        res = ssh.run(shlex.join(self._remote_argv(name, [str(self.local["kvserver"]), "--help"])),
                      check=False)
        if "usage" not in (res.stdout + res.stderr):
            need = {"dpdk": "; stack dpdk needs DPDK's libraries there (libdpdk-dev)",
                    "vma": f"; stack vma needs {self.inv.vma_of(self.hosts[name]).lib} there"}
            raise RemoteError(f"host {name!r}: the pushed kvserver does not run there "
                              f"({' '.join(res.stderr.split())[:200] or 'no output'}); "
                              "hosts need the same OS and libc as this machine"
                              f"{need.get(stack, '')}")

    def _build_there(self, name: str) -> None:
        """build.mode=source: the sources to the host, built there once per
        source version (netkv.testbed.build)."""
        ssh, host, bid = self.ssh[name], self.hosts[name], self.built_from[name]
        how = self.inv.build_of(host)
        q = shlex.quote
        src = f"{host.workdir}/src/{bid}"
        done = ssh.run(f"test -f {q(self.remote_bin[name])}/.complete && echo yes", check=False)
        if done.stdout.strip() != "yes":
            with self._archive_lock:
                local = self.folder / f"{bid}.tar.gz"
                if not local.exists():
                    local.write_bytes(build.archive(build.source_root()))
            ssh.run(f"mkdir -p {q(host.workdir)}/src")
            ssh.copy_to(local, f"{src}.tar.gz")
        res = ssh.run("sh -s", input_text=build.script(host.workdir, bid, how.cmake_args,
                                                       self.programs, self.library.name),
                      timeout_s=how.timeout_s, check=False)
        last = (res.stdout.strip().splitlines() or [""])[-1]
        if res.returncode != 0 or last not in ("built", "cached"):
            why = last or " ".join(res.stderr.split())[-300:] or f"exit {res.returncode}"
            raise RemoteError(f"host {name!r}: building netkv's C programs from source there "
                              f"failed: {why} (log: {src}/build.log)")

    def _stale(self, ssh: Ssh, rbin: str) -> list[str]:
        """The files of this build that are missing or differ in ``rbin``."""
        check = "".join(f"{digest}  {f}\n" for f, digest in self.digests.items())
        res = ssh.run(f"cd {shlex.quote(rbin)} 2>/dev/null && sha256sum -c - 2>/dev/null",
                      input_text=check, check=False)
        good = {line.rsplit(":", 1)[0] for line in res.stdout.splitlines()
                if line.endswith(": OK")}
        return [f for f in self.digests if f not in good]

    def describe_hosts(self) -> dict[str, dict[str, Any]]:
        """Each used host as configured and as it reports itself (one SSH
        round trip per host; a field the host cannot tell is null)."""
        probe = ("uname -r; nproc; "
                 "sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n1; "
                 "basename \"$(readlink /sys/class/net/$NIC/device/driver 2>/dev/null)\" "
                 "2>/dev/null || true; echo; cat /sys/class/net/$NIC/speed 2>/dev/null || true")
        out: dict[str, dict[str, Any]] = {}

        def one(name: str) -> None:
            host = next(h for h in [self.switch_host, *self.nodes] if h.name == name)
            switch = "switch" in host.roles and bool(host.ports)
            nic = host.ports[0] if switch else host.nic
            res = self.ssh[name].run(f"NIC={shlex.quote(nic)}; {probe}", check=False)
            lines = (res.stdout.splitlines() + [""] * 6)[:6]
            speed = lines[5].strip()
            out[name] = {
                "roles": list(host.roles), "stack": self.inv.stack_of(host),
                "build": f"{self.inv.build_of(host).mode} "
                         f"{self.remote_bin[name].rsplit('/', 1)[-1]}",
                "nic": list(host.ports) if switch else nic, "pci": host.pci,
                "cores": list(host.cores), "kernel": lines[0].strip() or None,
                "online_cores": int(lines[1]) if lines[1].strip().isdigit() else None,
                "cpu_model": lines[2].strip() or None,
                "nic_driver": lines[3].strip() or None,
                "nic_speed_mbps": int(speed) if speed.lstrip("-").isdigit() and
                int(speed) > 0 else None,
            }

        self._each(one)
        return dict(sorted(out.items()))

    def _address(self, node: int, host: Host) -> None:
        nic = shlex.quote(host.nic)
        if self.inv.stack_of(host) == "dpdk":
            if host.pci:
                return  # the NIC is DPDK's: --io mac= gives it the plan's MAC
            # net_af_packet on the kernel's interface: the plan MAC, no
            # address (the kernel would answer the program's datagrams)
            self.ssh[host.name].run(
                f"ip link set dev {nic} address {node_mac(node)} && ip addr flush dev {nic} && "
                f"ip link set dev {nic} up && (ethtool -K {nic} tx off >/dev/null 2>&1 || true)")
            return
        neigh = "".join(
            f"ip neigh replace {node_ip(m)} lladdr {node_mac(m)} dev {nic} nud permanent; "
            for m in range(len(self.nodes)) if m != node)
        self.ssh[host.name].run(
            f"ip link set dev {nic} address {node_mac(node)} && ip addr flush dev {nic} && "
            f"ip addr add {node_ip(node)}/8 dev {nic} && ip link set dev {nic} up && "
            f"(ethtool -K {nic} tx off >/dev/null 2>&1 || true) && {neigh}"
            f"ip neigh replace {CONTROLLER_IP} lladdr {CONTROLLER_MAC} dev {nic} nud permanent")

    def _remote_argv(self, name: str, argv: Sequence[str]) -> list[str]:
        """A local program's command line with the remote copy's path, on
        the host's stack (the programs find the pushed libnetkv beside them)."""
        out = list(argv)
        host = self.hosts[name]
        node = self.node_of.get(name, 0)
        for prog, path in self.local.items():
            if out and out[0] == str(path):
                out = stacks.command(self.inv, host, prog, self.remote_bin[name], out[1:],
                                     node_mac(node), self.ncpu.get(name, 1),
                                     node=name in self.node_of)
        return out

    def _lifeline(self, label: str, host: Host, argv: Sequence[str]) -> subprocess.Popen[str]:
        rrun = self.remote_run[host.name]
        log = f"{rrun}/{label}.log"
        cmd = lifeline(self._remote_argv(host.name, argv), f"{rrun}/{label}.pid")
        # the whole lifeline's stderr, the program's with it (a redirect after
        # the command string would bind to its last word, the `exit`)
        proc = self.ssh[host.name].popen(f"{{ {cmd}; }} 2>{shlex.quote(log)}",
                                         stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lifelines[label] = proc
        self.logs[label] = (host.name, log)
        return proc

    def _forward(self, host: Host, pairs: list[tuple[Path, str]], label: str) -> None:
        self._check_forward(host, self.ssh[host.name].forward(pairs), f"{label}'s control socket")

    def _check_forward(self, host: Host, fwd: subprocess.Popen[str], what: str) -> None:
        self.forwards.append(fwd)
        time.sleep(0.05)
        if fwd.poll() is not None:
            err = fwd.stderr.read() if fwd.stderr else ""
            raise RemoteError(f"host {host.name!r}: cannot forward {what}: "
                              f"{' '.join(err.split())}")

    def _wait_socket(self, host: Host, remote: str, label: str, timeout_s: float = 30.0,
                     restarted: str | None = None) -> None:
        """Until ``remote`` is a socket on ``host``; every program must stay
        alive meanwhile (``restarted``: that lifeline only, one restarted by
        a fault event, the rest of the rack running on)."""
        deadline = time.monotonic() + timeout_s
        while True:
            if restarted is None:
                self.check_alive()
            elif (rc := self.lifelines[restarted].poll()) is not None:
                raise RuntimeError(f"{restarted} on host {host.name!r} exited ({rc}) before "
                                   f"serving: {self.log_tail(restarted)}")
            # the host polls every 10 ms for up to WAIT_SLICE_S (one SSH session
            # a slice, not one a poll plus a 0.1 s sleep here): a restarted
            # switch is reached about when it opens its socket
            q = shlex.quote(remote)
            res = self.ssh[host.name].run(
                f"for i in $(seq {int(WAIT_SLICE_S / 0.01)}); do test -S {q} && echo ok && "
                "exit 0; sleep 0.01; done; true", check=False)
            if res.stdout.strip() == "ok":
                return
            if time.monotonic() > deadline:
                raise RemoteError(f"{label} on {host.name!r} did not open {remote}")

    def _start_switch(self) -> None:
        """The back-end's program on the switch host: its files pushed first,
        then what it opens (Unix sockets, loopback TCP ports) waited for
        there and forwarded here over SSH; the back-end is told the local
        ends (``SwitchBackend`` documents the interface)."""
        backend = self.spec.backend
        sw = self.switch_host
        rrun = self.remote_run[sw.name]
        backend.prepare_on_host(self.ssh[sw.name], rrun, f"host {sw.name!r}")
        for f in backend.remote_files():
            self.ssh[sw.name].copy_to(f, f"{rrun}/{f.name}")
        # the inventory's loop pair, for a protocol whose plug-in needs one
        # (preflight refused it on a switch without); only then: the pair
        # outlives a run, and a switch still letting go of it (the previous
        # run's, reached over SSH) would keep the next one from opening it
        p4 = backend.plugin.p4
        needs = backend.loop_port and p4 is not None and p4.needs_loop
        loop = (sw.loop[0], sw.loop[1]) if needs and len(sw.loop) == 2 else None
        self.switch_argv = backend.command(self.switch_ports, Path(rrun), self.spec.tag, loop)
        self._lifeline("switch", sw, self.switch_argv)
        for name in backend.unix_sockets():
            remote = f"{rrun}/{name}"
            self._wait_socket(sw, remote, backend.label)
            self._forward(sw, [(self.folder / name, remote)], "the switch")
        if ports := backend.tcp_ports():
            self._wait_listening(sw, ports, backend.label, backend.start_timeout_s)
            local = dict(zip(ports, free_ports(len(ports)), strict=True))
            fwd = self.ssh[sw.name].forward_tcp({v: k for k, v in local.items()})
            self._check_forward(sw, fwd, f"{backend.label}'s ports {ports}")
            backend.forwarded(local)
        # the back-end's own check (through the forwards), the SSH session
        # standing for the program: before anything is installed
        try:
            backend.ready(self.lifelines["switch"], self.folder)
        except DriverError:
            self.check_alive()      # it exited: say so with its log's end there
            raise

    def _wait_listening(self, host: Host, ports: Sequence[int], label: str,
                        timeout_s: float = 30.0) -> None:
        """Until every port listens on the host (read from /proc/net/tcp and
        tcp6, which every Linux host has; any address: BMv2's Thrift server
        binds them all). Waited for there, not through the forward: a
        forward's local end accepts at once whether or not the remote end
        listens yet."""
        probe = "".join(f"grep -qE ':{p:04X} 0+:0000 0A ' /proc/net/tcp /proc/net/tcp6 2>/dev/null"
                        " || { echo no; exit 0; }; " for p in ports) + "echo ok"
        deadline = time.monotonic() + timeout_s
        while True:
            self.check_alive()
            if self.ssh[host.name].run(probe, check=False).stdout.strip() == "ok":
                return
            if time.monotonic() > deadline:
                raise RemoteError(f"{label} on host {host.name!r} is not listening on ports "
                                  f"{list(ports)} after {timeout_s:g} s")
            time.sleep(0.1)

    def _start_servers(self) -> None:
        for i, host in enumerate(self.servers):
            rrun = self.remote_run[host.name]
            args = [str(self.local["kvserver"]), "--protocol", self.spec.protocol, "--id", str(i),
                    "--servers", str(self.spec.servers), "--clients", str(self.spec.clients),
                    "--ctl", f"{rrun}/server{i}.sock", "--tag", self.spec.tag,
                    *self.spec.server_args]
            if self.spec.per_server_args:
                args += list(self.spec.per_server_args[i])
            self.server_argv.append(args)
            self._lifeline(f"server{i}", host, args)
        for i, host in enumerate(self.servers):
            remote = f"{self.remote_run[host.name]}/server{i}.sock"
            self._wait_socket(host, remote, f"kvserver {i}")
            self._forward(host, [(self.folder / f"server{i}.sock", remote)], f"kvserver {i}")
        for i, host in enumerate(self.coordinators):  # nodes after the clients
            rrun = self.remote_run[host.name]
            self._lifeline(f"coord{i}", host, [
                str(self.local["kvserver"]), "--protocol", self.spec.protocol, "--mode", "coord",
                "--id", str(i), "--coords", str(self.spec.coordinators),
                "--servers", str(self.spec.servers), "--clients", str(self.spec.clients),
                "--ctl", f"{rrun}/coord{i}.sock", "--tag", self.spec.tag,
                *self.spec.coordinator_args])
        for i, host in enumerate(self.coordinators):
            self._wait_socket(host, f"{self.remote_run[host.name]}/coord{i}.sock",
                              f"coordinator {i}")
        for i in range(len(self.servers)):  # each answers through its forward
            self._wait_ping(i)

    def _wait_ping(self, server: int, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.server_ctl(server, "ping")
                return
            except Exception:  # noqa: BLE001 - the forward may still be connecting
                if time.monotonic() > deadline:
                    raise RemoteError(f"kvserver {server}'s control socket does not answer "
                                      "through its SSH forward") from None
                time.sleep(0.05)

    # --- target.faults: replica crashes ------------------------------------------------------

    def crash_server(self, server: int) -> None:
        """A replica crash (target.faults.crashes): kvserver ``server``
        killed on its host (SIGKILL: no last word), its recorded pid checked
        to still carry the run's tag; its lifeline then ends, which is what
        ``port_up`` reads."""
        self.crashed.add(server)
        # its socket goes too: a restart then waits for the new program's
        self._kill_lifeline(f"server{server}", self.servers[server], [f"server{server}.sock"],
                            f"kvserver {server}")

    def restart_server(self, server: int) -> None:
        """A crashed replica restarted (restart_s): a fresh kvserver with the
        same arguments, its store preloaded again as at the start; its port
        counts as up only once it answers through its forward, and the
        protocol's controller catches it up as on Mininet."""
        if server not in self.crashed:
            return
        label, host = f"server{server}", self.servers[server]
        old = self.lifelines[label]
        if old.poll() is None:
            return
        old.communicate()   # its pipes closed: the next lifeline takes its place
        self._lifeline(label, host, self.server_argv[server])
        self._wait_socket(host, f"{self.remote_run[host.name]}/{label}.sock", f"kvserver {server}",
                          restarted=label)
        self._wait_ping(server)   # the existing forward reaches the new socket
        self.incarnations[server] += 1
        self.crashed.discard(server)

    # --- target.faults: switch outages (restartable back-ends: netkv-switch) -------------------

    def stop_switch(self) -> None:
        """A switch outage (target.faults.switch_outages): the switch program
        killed on the switch host (SIGKILL, its recorded pid if it still
        carries the run's tag) and its sockets removed there, so that the
        restart waits for the new program's; every packet reaching the
        switch is lost until start_switch."""
        backend = self.spec.backend
        self.switch_down = True
        # its process group if it leads one (a script and its child), else it
        self._kill_lifeline("switch", self.switch_host, backend.unix_sockets(), backend.label,
                            group=True)

    def _kill_lifeline(self, label: str, host: Host, sockets: list[str] | tuple[str, ...],
                       what: str, group: bool = False) -> None:
        """SIGKILL program ``label`` on ``host`` (its recorded pid, only if it
        still carries the run's tag: a pid may have been reused; with
        ``group`` its process group if it leads one), remove its ``sockets``
        from the run folder there, and wait for its lifeline to end."""
        rrun = self.remote_run[host.name]
        pidfile = shlex.quote(f"{rrun}/{label}.pid")
        kill = "kill -9 -$p 2>/dev/null || kill -9 $p" if group else "kill -9 $p"
        socks = " ".join(shlex.quote(f"{rrun}/{n}") for n in sockets)
        self.ssh[host.name].run(f"p=$(cat {pidfile}); if grep -qa -- {shlex.quote(self.spec.tag)} "
                                f"/proc/$p/cmdline 2>/dev/null; then {kill}; fi; "
                                f"rm -f {socks}; true", timeout_s=20)
        try:
            self.lifelines[label].communicate(timeout=20)
        except subprocess.TimeoutExpired:
            raise RemoteError(f"{what} on {host.name!r} still runs 20 s after SIGKILL") from None

    def start_switch(self, closed: bool = False) -> None:
        """The switch restarted: a fresh program with the same command line
        on the same ports (``closed``: plus the back-end's ``closed_args``,
        forwarding nothing until its ``open``), its state empty (the
        pipeline's init only: the controller installs the rest), reached
        through the forwards made at the start."""
        sw, backend = self.switch_host, self.spec.backend
        argv = [*self.switch_argv, *(backend.closed_args if closed else ())]
        self._lifeline("switch", sw, argv)
        for name in backend.unix_sockets():
            self._wait_socket(sw, f"{self.remote_run[sw.name]}/{name}", backend.label,
                              restarted="switch")
        backend.ready(self.lifelines["switch"], self.folder)
        self.switch_down = False

    def copy_store(self, src: int, dst: int) -> int:
        """ControlPlane.copy_store, through the kvservers' forwarded sockets."""
        from netkv.mininet.rack import copy_store

        return copy_store(self.server_ctl, src, dst)

    def newest_version(self, server: int) -> int:
        return int(self.server_ctl(server, "store_newest"))

    # --- the interface the rack target uses ------------------------------------------------

    def log_tail(self, label: str) -> str:
        host, log = self.logs.get(label, ("", ""))
        if not host:
            return ""
        try:
            return " ".join(self.ssh[host].read(log).decode(errors="replace").split())[-400:]
        except RemoteError:
            return ""

    def check_alive(self) -> None:
        # killed on purpose
        down = {f"server{i}" for i in self.crashed} | ({"switch"} if self.switch_down else set())
        for label, proc in self.lifelines.items():
            if proc.poll() is not None and label not in down:
                host = self.logs[label][0]
                raise RuntimeError(f"{label} on host {host!r} exited ({proc.returncode}): "
                                   f"{self.log_tail(label)}")

    def port_up(self, node: int) -> bool:
        """What NetLR's port monitor sees of node ``node``: for a server, its
        kvserver still running (its SSH lifeline open: the lifeline ends when
        the remote program does); other nodes of the rack are up. The switch
        host's link state is not read: that would be an SSH round trip per
        poll, and netkv-switch's ports are veths or NICs that stay up."""
        if not 0 <= node < len(self.nodes):
            return False
        if node < len(self.servers) and node in self.crashed:
            return False   # killed, or restarted but not serving yet
        proc = self.lifelines.get(f"server{node}") if node < len(self.servers) else None
        return proc is None or proc.poll() is None

    def server_ctl(self, server: int, line: str) -> str:
        from netkv.drivers.netkv_switch import CtlSocket

        sock = CtlSocket(self.folder / f"server{server}.sock")
        try:
            return sock.request(line)
        finally:
            sock.close()

    def server_stats(self, timeout_s: float = 10.0) -> list[dict[str, Any]]:
        """Every kvserver's counters now (its control socket's ``stats``)."""
        self.check_alive()
        out = []
        for i, host in enumerate(self.servers):
            if i in self.crashed:   # its counters as last read before the crash
                out.append(self.last_stats.get(i, {"served": 0}))
                continue
            try:
                out.append(json.loads(self.server_ctl(i, "stats")))
                self.last_stats[i] = out[-1]
            except (OSError, DriverError, ValueError) as exc:
                # a server that died answers nothing: say which, from its lifeline
                deadline = time.monotonic() + timeout_s
                while time.monotonic() < deadline and self.lifelines[f"server{i}"].poll() is None:
                    time.sleep(0.05)
                self.check_alive()
                raise RuntimeError(f"server{i} on host {host.name!r} does not answer: "
                                   f"{exc}") from None
        return out

    def run_clients(self, args_for: list[list[str]], run_s: float, start_delay_ms: float = 20.0,
                    ready_timeout_s: float = 120.0,
                    on_start: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
        """One kvclient per client host; their JSON (as the Mininet rack's)."""
        from netkv.targets.handshake import start_together, wait_all

        procs: list[subprocess.Popen[str]] = []
        fetch: list[tuple[int, str, Path]] = []   # (client, remote, local) histories
        try:
            for j, (host, args) in enumerate(zip(self.clients, args_for, strict=True)):
                rrun = self.remote_run[host.name]
                args = list(args)
                if "--history" in args:  # written there, fetched here
                    k = args.index("--history") + 1
                    local = Path(args[k])
                    args[k] = f"{rrun}/{local.name}"
                    fetch.append((j, args[k], local))
                argv = [str(self.local["kvclient"]), "--protocol", self.spec.protocol,
                        "--id", str(j), "--servers", str(self.spec.servers),
                        "--clients", str(self.spec.clients), "--out", f"{rrun}/client{j}.json",
                        "--tag", self.spec.tag, *args, "--start-at", "stdin"]
                log = f"{rrun}/client{j}.log"
                cmd = shlex.join(self._remote_argv(host.name, argv)) + f" 2>{shlex.quote(log)}"
                procs.append(self.ssh[host.name].popen(cmd, stdin=subprocess.PIPE,
                                                       stdout=subprocess.PIPE,
                                                       stderr=subprocess.PIPE))
                self.logs[f"client{j}"] = (host.name, log)
            start_ns = 0

            def start_text() -> str:
                # one instant for all, in real time (each host converts to its own clock)
                nonlocal start_ns
                now_rt = time.clock_gettime_ns(time.CLOCK_REALTIME)
                start_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + int(start_delay_ms * 1e6)
                return f"@{now_rt + int(start_delay_ms * 1e6)}\n"

            start_together(procs, start_text, ready_timeout_s,
                           lambda j: self.log_tail(f"client{j}"))
            if on_start is not None:
                on_start(start_ns)
            wait_all(procs, run_s, start_delay_ms, lambda j: self.log_tail(f"client{j}"))
            results = []
            for j in range(len(procs)):
                host = self.clients[j]
                raw = self.ssh[host.name].read(f"{self.remote_run[host.name]}/client{j}.json")
                results.append(json.loads(raw))
            for j, remote, local in fetch:
                local.write_bytes(self.ssh[self.clients[j].name].read(remote))
            return results
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()

    def stop(self) -> dict[str, Any]:
        """Stop everything started; the final counters (as the Mininet rack's).
        Each step runs whatever the one before raised: the remote clean-up
        always happens."""
        final: dict[str, Any] = {"servers": [], "coordinators": []}
        try:
            self._stop_lifelines(final)
        finally:
            for fwd in self.forwards:
                fwd.terminate()
                try:
                    fwd.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    fwd.kill()
            self.forwards = []
            self._clean_remote()
        return final

    def _stop_lifelines(self, final: dict[str, Any]) -> None:
        for proc in self.lifelines.values():
            if proc.stdin is not None:
                try:
                    proc.stdin.close()   # the lifeline sends SIGTERM
                except OSError:
                    pass
                proc.stdin = None
        for label, proc in self.lifelines.items():
            try:
                out, _ = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
            last = out.strip().splitlines()[-1] if out and out.strip() else ""
            try:
                report = json.loads(last) if last else {}
            except json.JSONDecodeError:
                report = {}
            if label.startswith("server"):
                final["servers"].append(report)
            elif label.startswith("coord"):
                final["coordinators"].append(report)
            elif label == "switch":
                final["switch"] = next(iter(report.values()), {}) if len(report) == 1 else report
        self.lifelines = {}

    def _clean_remote(self) -> None:
        """Kill what the lifelines missed (recorded pids still carrying this
        run's tag: a pid may have been reused), remove the run folders, end
        the SSH masters."""
        def clean(name: str) -> None:
            ssh = self.ssh[name]
            try:
                ssh.run(kill_and_remove(self.remote_run[name], self.spec.tag), check=False,
                        timeout_s=20)
            except RemoteError:
                pass  # unreachable now: `netkv clean` finds it later
            ssh.close()

        threads = [threading.Thread(target=clean, args=(name,)) for name in self.ssh]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
