"""One rack in Mininet: the topology, the switch node, the running network.

  RackTopo          N servers, M clients and C coordinator hosts (the
                    protocol's, usually none) on one switch; node n (servers,
                    clients, coordinators) gets 10.0.0.(n+1) and MAC
                    02:00:00:00:HH:LL, and is linked to switch port n -
                    netkv's rack plan (io.h)
  SwitchNode        a Mininet ``Switch`` that runs the rack's switch back-end
                    (netkv.backends: netkv-switch, BMv2, ...) on its ports,
                    node n on port n, and its recirculation port on a veth
                    pair whose two ends are the switch's (``<tag>lpo`` out,
                    ``<tag>lpi`` back in) if the back-end has one
  Rack              the running network: built, switch, kvservers (and the
                    coordinators: kvserver --mode coord) started, every pid
                    recorded for ``netkv clean``; runs
                    kvclients for a load point and collects their results
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netkv.mininet.cleanup import RunState, clean_run

if TYPE_CHECKING:
    from netkv.backends.base import SwitchBackend


def node_ip(node: int) -> str:
    n = node + 1
    return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


def node_mac(node: int) -> str:
    n = node + 1
    return f"02:00:00:00:{(n >> 8) & 255:02x}:{n & 255:02x}"


# The controller's address: outside the node plan (netkv-switch maps it to
# NK_NODE_NONE), so replies to packets the controller injected (a Pegasus
# VWRITE's WRITE-REPLY) come back to the CPU port. Servers get a static ARP
# entry for it; nothing answers ARP for it.
CONTROLLER_IP = "10.255.255.254"
CONTROLLER_MAC = "02:00:00:ff:ff:fe"
# copy_store over the kvservers' control sockets: entries per store_dump
# page; per store_merge line at most MERGE_BATCH entries and MERGE_LINE
# characters (ctl.h: at most 64 words, 16 KiB a line)
DUMP_PAGE = 1024
MERGE_BATCH = 48
MERGE_LINE = 16000


class MininetMissing(RuntimeError):
    """Mininet (or root, or mnexec) is not available."""


def check_mininet() -> None:
    import os

    if os.geteuid() != 0:
        raise MininetMissing("target=mininet needs root (network namespaces)")
    if shutil.which("mnexec") is None:
        raise MininetMissing("target=mininet needs mnexec: apt-get install mininet")
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        raise MininetMissing("target=mininet needs the mininet Python package: "
                             "pip install mininet (or apt-get install mininet)") from None


def copy_store(ctl: Callable[[int, str], str], src: int, dst: int) -> int:
    """Out of band (ControlPlane.copy_store): kvserver ``src``'s written
    entries merged into kvserver ``dst`` where newer, over their control
    sockets (``ctl(server, line)``: store_dump pages, store_merge batches);
    how many moved. Every rack's (Mininet's, the testbed's SshRack)."""
    moved, at = 0, "0"
    while at != "end":
        at, *entries = ctl(src, f"store_dump {at} {DUMP_PAGE}").split()
        for line in merge_lines(entries):
            moved += int(ctl(dst, line))
    return moved


def merge_lines(entries: list[str]) -> Iterator[str]:
    """``store_merge`` lines carrying ``entries``, each line at most
    MERGE_BATCH entries and MERGE_LINE characters (64-byte keys and 128-byte
    values: ~400 characters an entry, 48 of them past ctl.h's 16 KiB). An
    entry cannot be split across lines: one that alone makes a line longer
    than MERGE_LINE (a value of ~8 KB, sent hex) is refused with a one-line
    ValueError before any line of ``entries`` is yielded."""
    head = "store_merge"
    for entry in entries:
        if len(head) + 1 + len(entry) > MERGE_LINE:
            raise ValueError(
                f"copy_store: the entry of key hash {entry.split(':', 1)[0]} is "
                f"{len(entry):,} characters, over the {MERGE_LINE - len(head) - 1:,} a "
                f"store_merge line has room for (kvserver's control socket reads 16 KiB "
                f"a line): values this large cannot be copied between servers")
    line, words = head, 0
    for entry in entries:
        if words and (words == MERGE_BATCH or len(line) + 1 + len(entry) > MERGE_LINE):
            yield line
            line, words = head, 0
        line, words = f"{line} {entry}", words + 1
    if words:
        yield line


@dataclass(frozen=True)
class RackSpec:
    """Everything the network needs that is not per load point."""

    protocol: str                          # the hosts' --protocol (a registry name)
    servers: int
    clients: int
    tag: str
    folder: Path
    backend: "SwitchBackend"               # what runs on the switch node
    server_args: tuple[str, ...] = ()      # extra kvserver arguments (workload, service)
    # per-server extra kvserver arguments (e.g. its own --service-ns), if any
    per_server_args: tuple[tuple[str, ...], ...] = ()
    coordinators: int = 0                  # coordinator hosts, nodes after the clients
    coordinator_args: tuple[str, ...] = ()  # their extra kvserver arguments


def switch_ports(node: Any) -> list[Any]:
    """A switch node's data interfaces in port order: the i-th link added
    (node i of the rack plan) is port i, whatever Mininet numbers it."""
    return sorted((i for i in node.intfList() if i.name != "lo"), key=lambda i: node.ports[i])


def loop_ifaces(tag: str) -> tuple[str, str]:
    """The recirculation port's veth pair: (out, in), named with the run's tag."""
    return f"{tag}lpo", f"{tag}lpi"


def make_loop(tag: str) -> tuple[str, str]:
    """Create the switch's loop: a veth pair, both ends up in the switch's
    namespace, quiet (no IPv6, so the kernel sends nothing into it)."""
    out, back = loop_ifaces(tag)
    subprocess.run(["ip", "link", "del", out], capture_output=True)  # a crashed run's
    subprocess.run(["ip", "link", "add", out, "type", "veth", "peer", "name", back],
                   check=True, capture_output=True)
    for iface in (out, back):
        subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{iface}.disable_ipv6=1"],
                       capture_output=True)
        subprocess.run(["ethtool", "-K", iface, "tx", "off"], capture_output=True)
        subprocess.run(["ip", "link", "set", iface, "up"], check=True, capture_output=True)
    return out, back


def _make_switch_class() -> Any:
    from mininet.node import Switch

    class SwitchNode(Switch):
        """The rack's switch back-end on this switch's ports (port i = the
        i-th link added = node i of the rack plan)."""

        def __init__(self, name: str, backend: "SwitchBackend | None" = None,
                     folder: str = "", tag: str = "", state: RunState | None = None,
                     **params: Any) -> None:
            super().__init__(name, dpid="1", **params)
            assert backend is not None
            self.backend, self.folder, self.tag, self.state = backend, Path(folder), tag, state
            self.label = backend.label
            self.proc: subprocess.Popen[str] | None = None
            self.final: dict[str, Any] = {}
            self.loop: tuple[str, str] | None = None

        @property
        def log_path(self) -> Path:
            return self.folder / self.backend.log_name

        def start(self, controllers: list[Any]) -> None:
            del controllers
            ifaces = [intf.name for intf in switch_ports(self)]
            for iface in ifaces:
                # a userspace switch forwards what the kernel left unchecksummed
                subprocess.run(["ethtool", "-K", iface, "tx", "off"], capture_output=True)
            self.loop = make_loop(self.tag) if self.backend.wants_loop() else None
            self.boot()

        def boot(self, closed: bool = False) -> None:
            """Start the back-end's program on the ports (its state as at a
            power-on: what the pipeline's init installs; ``closed``: forwarding
            nothing until opened) and wait until it serves."""
            ifaces = [intf.name for intf in switch_ports(self)]
            for name in self.backend.unix_sockets():   # a killed one's, if any
                (self.folder / name).unlink(missing_ok=True)
            self.proc = self.backend.start(ifaces, self.folder, self.tag, self.loop, closed)
            if self.state:
                self.state.add_pid(self.proc.pid)
            self.backend.ready(self.proc, self.folder)

        def halt(self) -> None:
            """A switch outage: the program killed (SIGKILL, no last word);
            its ports stay, and what reaches them is lost until ``boot``."""
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

        def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's name
            if self.proc is not None:
                self.final = self.backend.stop(self.proc)
            loop = getattr(self, "loop", None)
            if loop is not None:
                subprocess.run(["ip", "link", "del", loop[0]], capture_output=True)
                self.loop = None
            super().stop(deleteIntfs)

    return SwitchNode


def switch_factory(spec: RackSpec, state: RunState) -> Any:
    """The switch node class Mininet builds for ``spec``, its arguments bound."""
    return partial(_make_switch_class(), backend=spec.backend, folder=str(spec.folder),
                   tag=spec.tag, state=state)


class Rack:
    """A running rack: Mininet network, the switch back-end, one kvserver
    per server."""

    def __init__(self, spec: RackSpec, state: RunState) -> None:
        from mininet.link import Link
        from mininet.net import Mininet
        from mininet.node import Host
        from mininet.topo import Topo

        from netkv.native import program_path

        self.spec, self.state = spec, state
        self.servers: list[Any] = []
        self.clients: list[Any] = []
        self.coordinators: list[Any] = []
        self.server_procs: list[subprocess.Popen[str]] = []
        self.crashed: set[int] = set()   # servers whose kvserver was killed (crash_server)
        self.switch_down = False         # the switch program killed (stop_switch)
        self.incarnations: list[int] = [0] * spec.servers   # kvservers started, less one
        # restarts start their kvserver from this one long-lived thread: a
        # kvserver stops when the thread that started it ends (its parent
        # death signal), and a fault's timer thread ends at once
        self._spawner: ThreadPoolExecutor | None = None
        self.coord_procs: list[subprocess.Popen[str]] = []
        self.net: Any = None
        tag = spec.tag

        topo = Topo()
        sw = topo.addSwitch(f"{tag}sw")
        names = [f"{tag}s{i}" for i in range(spec.servers)]
        names += [f"{tag}c{j}" for j in range(spec.clients)]
        names += [f"{tag}k{i}" for i in range(spec.coordinators)]
        for node, name in enumerate(names):
            topo.addHost(name, ip=f"{node_ip(node)}/8", mac=node_mac(node))
            topo.addLink(name, sw)  # switch port `node`
        switch_cls = switch_factory(spec, state)
        try:
            self.net = Mininet(topo=topo, switch=switch_cls, host=Host, link=Link,
                               controller=None, autoSetMacs=False, autoStaticArp=False,
                               build=False, waitConnected=False)
            self.net.build()
            for node in self.net.hosts + self.net.switches:
                if node.shell is not None:
                    state.add_pid(node.shell.pid)
            for host in self.net.hosts:
                intf = host.defaultIntf()
                host.cmd(f"ethtool -K {intf} tx off")
                host.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
                host.cmd(f"ip neigh replace {CONTROLLER_IP} lladdr {CONTROLLER_MAC} "
                         f"dev {intf} nud permanent")
            self.net.staticArp()
            self.net.start()
            self.servers = [self.net.get(n) for n in names[: spec.servers]]
            first_coord = spec.servers + spec.clients
            self.clients = [self.net.get(n) for n in names[spec.servers:first_coord]]
            self.coordinators = [self.net.get(n) for n in names[first_coord:]]
            self._start_servers(str(program_path("kvserver")))
        except BaseException:
            self.stop()
            raise

    @property
    def switch(self) -> Any:
        return self.net.switches[0]

    def _start_servers(self, program: str) -> None:
        """kvserver on every server host, and kvserver --mode coord (the
        protocol's coord_handle) on every coordinator host."""
        common = self._common_args()
        for i in range(len(self.servers)):
            self.server_procs.append(self._launch(self.servers[i], program, f"server{i}",
                                                  self._server_args(i)))
        for i in range(len(self.coordinators)):
            args = [*common, "--mode", "coord", "--id", str(i),
                    "--coords", str(self.spec.coordinators), *self.spec.coordinator_args]
            self.coord_procs.append(self._launch(self.coordinators[i], program, f"coord{i}", args))
        # ready when every one has written its first stats file (it does so
        # once its SIGUSR1 handler is installed)
        deadline = time.monotonic() + 30.0
        names = [f"server{i}" for i in range(len(self.server_procs))]
        names += [f"coord{i}" for i in range(len(self.coord_procs))]
        for name in names:
            while not (self.spec.folder / f"{name}.json").exists():
                self.check_alive()
                if time.monotonic() > deadline:
                    raise RuntimeError(f"kvserver {name} did not start")
                time.sleep(0.01)

    def _common_args(self) -> list[str]:
        return ["--protocol", self.spec.protocol, "--servers", str(self.spec.servers),
                "--clients", str(self.spec.clients), "--tag", self.spec.tag]

    def _server_args(self, i: int) -> list[str]:
        args = [*self._common_args(), "--id", str(i),
                "--ctl", str(self.spec.folder / f"server{i}.sock"), *self.spec.server_args]
        if self.spec.per_server_args:
            args += list(self.spec.per_server_args[i])
        return args

    def _launch(self, host: Any, program: str, name: str,
                args: list[str]) -> subprocess.Popen[str]:
        """``program args`` on ``host``, its stats in ``name``.json and its
        stderr in ``name``.log, its pid recorded."""
        stats = self.spec.folder / f"{name}.json"
        log = open(self.spec.folder / f"{name}.log", "w")  # noqa: SIM115
        p = host.popen([program, *args, "--stats-file", str(stats)], stdout=subprocess.PIPE,
                       stderr=log, text=True)
        log.close()
        self.state.add_pid(p.pid)
        return p

    def server_ctl(self, server: int, line: str) -> str:
        """One command to kvserver ``server``'s protocol logic (Pegasus'
        rkey_add, gc, ...); the text after ``ok``."""
        from netkv.drivers.netkv_switch import CtlSocket

        with_client = CtlSocket(self.spec.folder / f"server{server}.sock")
        try:
            return with_client.request(line)
        finally:
            with_client.close()

    def crash_server(self, server: int) -> None:
        """A replica crash (target.faults.crashes): kvserver ``server`` is
        killed (SIGKILL: no last word); its link stays up, as a crashed
        process's would."""
        p = self.server_procs[server]
        self.crashed.add(server)
        if p.poll() is None:
            p.kill()
            p.wait()

    def restart_server(self, server: int) -> None:
        """A crashed replica restarted (target.faults.crashes restart_s): a
        fresh kvserver with the same arguments, its store preloaded again as
        at the start (what it wrote before the crash is gone); the
        protocol's controller sees its port come back and catches it up."""
        from netkv.native import program_path

        if server not in self.crashed:
            return
        old = self.server_procs[server]
        if old.poll() is None:
            return
        stats = self.spec.folder / f"server{server}.json"
        stats.unlink(missing_ok=True)
        new = self._spawn(self._launch, self.servers[server], str(program_path("kvserver")),
                          f"server{server}", self._server_args(server))
        # its port counts as up (port_up) only once it serves: its first
        # stats file is written after its signal handler and control socket
        deadline = time.monotonic() + 30.0
        while not stats.exists():
            if new.poll() is not None:
                raise RuntimeError(f"kvserver {server} exited with {new.returncode} before "
                                   f"serving: {self._log_tail(f'server{server}')}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"kvserver {server} did not serve within 30 s of its restart")
            time.sleep(0.005)
        self.server_procs[server] = new
        self.incarnations[server] += 1
        self.crashed.discard(server)

    def stop_switch(self) -> None:
        """A switch outage (target.faults.switch_outages): the switch program
        killed; every packet reaching the switch is lost until start_switch."""
        self.switch_down = True
        self.switch.halt()

    def start_switch(self, closed: bool = False) -> None:
        """The switch restarted: a fresh program on the same ports, its state
        empty (the pipeline's init only: the controller installs the rest;
        ``closed``: forwarding nothing until the back-end's ``open``),
        started from the rack's long-lived thread (its parent death signal)."""
        self._spawn(self.switch.boot, closed)
        self.switch_down = False

    def _spawn(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the rack's long-lived thread: a program started
        there outlives the fault thread that asked for it."""
        if self._spawner is None:
            self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="restart")
        return self._spawner.submit(fn, *args).result()

    def _log_tail(self, name: str) -> str:
        """The last line a program of the rack wrote to its log (the cause of its exit)."""
        try:
            lines = (self.spec.folder / f"{name}.log").read_text(errors="replace").split("\n")
        except OSError:
            return "no log"
        return next((x.strip() for x in reversed(lines) if x.strip()), "empty log")[-300:]

    def _store_ctl(self, server: int, line: str) -> str:
        from netkv.drivers.netkv_switch import CtlSocket

        sock = CtlSocket(self.spec.folder / f"server{server}.sock")
        try:
            return sock.request(line)
        finally:
            sock.close()

    def copy_store(self, src: int, dst: int) -> int:
        return copy_store(self._store_ctl, src, dst)

    def newest_version(self, server: int) -> int:
        return int(self._store_ctl(server, "store_newest"))

    def port_up(self, node: int) -> bool:
        """What a switch CPU polling its ports sees of node ``node``: the
        switch-side interface's operstate, and for a server also a running
        kvserver behind it (the digest's heartbeat for a process crash with
        the link still up, read here from the process table)."""
        ports = switch_ports(self.switch)
        if not 0 <= node < len(ports):
            return False
        try:
            state = Path(f"/sys/class/net/{ports[node].name}/operstate").read_text().strip()
        except OSError:
            return False
        if state != "up":
            return False
        return node >= len(self.server_procs) or self.server_procs[node].poll() is None

    def check_alive(self) -> None:
        for i, p in enumerate(self.server_procs):
            if p.poll() is not None and i not in self.crashed:
                log = (self.spec.folder / f"server{i}.log").read_text()[-500:]
                raise RuntimeError(f"kvserver {i} exited with {p.returncode}: {log.strip()}")
        for i, p in enumerate(self.coord_procs):
            if p.poll() is not None:
                log = (self.spec.folder / f"coord{i}.log").read_text()[-500:]
                raise RuntimeError(f"coordinator {i} exited with {p.returncode}: {log.strip()}")
        sw = self.switch
        if not self.switch_down and (sw.proc is None or sw.proc.poll() is not None):
            try:
                log = Path(sw.log_path).read_text(errors="replace")[-500:]
            except OSError:
                log = ""
            raise RuntimeError(f"{sw.label} exited: {log.strip()}")

    def server_stats(self, timeout_s: float = 10.0) -> list[dict[str, Any]]:
        """Every kvserver's counters now (SIGUSR1 -> a fresh stats file)."""
        before = {}
        for i, p in enumerate(self.server_procs):
            f = self.spec.folder / f"server{i}.json"
            before[i] = json.loads(f.read_text())["seq"] if f.exists() else 0
            if i not in self.crashed:
                p.send_signal(signal.SIGUSR1)
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout_s
        for i in range(len(self.server_procs)):
            f = self.spec.folder / f"server{i}.json"
            if i in self.crashed:   # its counters as last dumped before the crash
                out.append(json.loads(f.read_text()) if f.exists() else {"served": 0})
                continue
            while True:
                try:
                    d = json.loads(f.read_text())
                    if d["seq"] > before[i]:
                        out.append(d)
                        break
                except (OSError, json.JSONDecodeError, KeyError):
                    pass
                self.check_alive()
                if time.monotonic() > deadline:
                    raise RuntimeError(f"kvserver {i} does not answer SIGUSR1")
                time.sleep(0.01)
        return out

    def run_clients(self, args_for: list[list[str]], run_s: float, start_delay_ms: float = 20.0,
                    ready_timeout_s: float = 120.0,
                    on_start: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
        """Run one kvclient per client host with the given arguments; their JSON.

        Start handshake: every kvclient builds its workload (alias table,
        permutation: seconds for millions of keys) and then prints ``ready``;
        once all are ready they are sent the same start instant, ``now +
        start_delay_ms`` (CLOCK_MONOTONIC ns, shared by every namespace), on
        stdin (then ``on_start(start_ns)`` is called). ``run_s`` bounds the
        time from that instant to their exit."""
        from netkv.native import program_path
        from netkv.targets.handshake import start_together, wait_all

        program = str(program_path("kvclient"))
        procs: list[subprocess.Popen[str]] = []
        logs = [self.spec.folder / f"client{j}.log" for j in range(len(args_for))]

        def log_tail(j: int) -> str:
            try:
                return logs[j].read_text().strip()[-500:]
            except OSError:
                return ""

        try:
            for j, (host, args) in enumerate(zip(self.clients, args_for, strict=True)):
                out = self.spec.folder / f"client{j}.json"
                out.unlink(missing_ok=True)
                log = open(logs[j], "w")  # noqa: SIM115
                p = host.popen([program, "--protocol", self.spec.protocol, "--id", str(j),
                                "--servers", str(self.spec.servers),
                                "--clients", str(self.spec.clients), "--out", str(out),
                                "--tag", self.spec.tag, *args, "--start-at", "stdin"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                               text=True)
                log.close()
                self.state.add_pid(p.pid)
                procs.append(p)
            # 1. every client's "ready", 2. one start instant for all
            start_ns = 0

            def start_text() -> str:
                nonlocal start_ns
                start_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + int(start_delay_ms * 1e6)
                return f"{start_ns}\n"

            start_together(procs, start_text, ready_timeout_s, log_tail)
            if on_start is not None:
                on_start(start_ns)
            # 3. results
            wait_all(procs, run_s, start_delay_ms, log_tail)
            results = []
            for j in range(len(procs)):
                results.append(json.loads((self.spec.folder / f"client{j}.json").read_text()))
            return results
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                for f in (p.stdin, p.stdout):
                    if f is not None and not f.closed:
                        try:
                            f.close()
                        except OSError:
                            pass

    def stop(self) -> dict[str, Any]:
        """Stop servers, switch and network; return the final counters."""
        final: dict[str, Any] = {"servers": [], "coordinators": []}
        for p in self.server_procs + self.coord_procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for key, procs in (("servers", self.server_procs), ("coordinators", self.coord_procs)):
            for p in procs:
                try:
                    out, _ = p.communicate(timeout=5)
                    last = out.strip().splitlines()[-1] if out and out.strip() else "{}"
                    final[key].append(json.loads(last))
                except (subprocess.TimeoutExpired, json.JSONDecodeError, ValueError):
                    p.kill()
                    p.wait()
        self.server_procs = []
        self.coord_procs = []
        if self._spawner is not None:
            self._spawner.shutdown(wait=False)
            self._spawner = None
        if self.net is not None:
            try:
                nodes = self.net.hosts + self.net.switches
                if all(n.shell is not None and n.shell.poll() is None for n in nodes):
                    self.net.stop()
                    final["switch"] = getattr(self.switch, "final", {})
                else:
                    # a node's shell is gone (killed from outside): Mininet's
                    # stop would wait on it forever; clean_run below removes
                    # the processes and interfaces carrying the tag
                    sw = self.switch
                    if sw.proc is not None and sw.proc.poll() is None:
                        sw.proc.kill()
                        sw.proc.wait()
            finally:
                self.net = None
        clean_run(self.spec.tag, self.state.pids)
        return final
