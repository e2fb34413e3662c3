"""The testbed's hosts: ``conf/inventory/<name>.yaml``, a Hydra config group.

A host has an SSH address, a user and a key, its roles (``server``,
``client``, ``switch``, ``coordinator``: a CPU host of the rack that a
protocol's clients send requests to, CoordiMC's, docs/netmc.md), its data
NIC and, for the switch, its data ports in inventory order (port i is wired
to the i-th server, then the clients, then the coordinators; a run's nodes
are numbered servers, clients, coordinators, netkv's rack plan), the cores
to use and its host stack. Servers, clients and coordinators are taken in
inventory order. Host keys
are pinned: ``known_hosts`` is the one file ssh trusts (no host key is ever
accepted unseen).

Host stacks (what carries kvserver's and kvclient's UDP; docs/testbed.md):
``kernel`` (the kernel's sockets), ``dpdk`` (kvserver-dpdk/kvclient-dpdk on
an ethdev port: the NIC at ``pci``, or net_af_packet on ``nic`` when no PCI
address is given; EAL and port options in ``dpdk``), ``vma`` (the kernel
programs with libvma preloaded; its path and ``VMA_*`` knobs in ``vma``). A
host's ``stack`` (and ``dpdk``/``vma``) default to the inventory's, so
``inventory.stack=dpdk`` switches a whole rack.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from netkv.config.base import Strict

Role = Literal["server", "client", "switch", "coordinator"]
Stack = Literal["kernel", "dpdk", "vma"]
MAC = r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$"


class Dpdk(Strict):
    """EAL and port options of the DPDK programs (``stack: dpdk``)."""

    # extra EAL arguments, e.g. [--no-huge, -m, "128"] on a host without
    # hugepages; the device (-a PCI, or --no-pci --vdev=net_af_packet0,iface=NIC),
    # the cores (--lcores) and the memory mode (--in-memory, or --no-shconf
    # with --no-huge) are added from the host's entry
    eal: list[str] = []
    # sleep this long between empty polls (0: poll without pause, a core per
    # program, the DPDK way; > 0 where cores are shared, as in the namespace rack)
    idle_us: int = Field(0, ge=0, le=1_000_000)
    # every datagram to this MAC (a rack routing by IP through one next hop);
    # None: each node's rack-plan MAC, with no ARP
    gw_mac: str | None = Field(None, pattern=MAC)


class Vma(Strict):
    """libvma under the kernel programs (``stack: vma``): LD_PRELOAD and knobs."""

    lib: str = Field("/usr/lib/libvma.so", min_length=1)   # path on the host
    # VMA_* environment knobs, e.g. {VMA_SPEC: latency, VMA_RX_POLL: "-1"}
    env: dict[str, str] = {}

    @model_validator(mode="after")
    def _knobs(self) -> "Vma":
        bad = sorted(k for k in self.env if not k.startswith("VMA_") or not k.isidentifier())
        if bad:
            raise ValueError(f"vma.env: {bad[0]!r} is not a VMA_* variable")
        return self


class Build(Strict):
    """How the C programs reach a host (docs/testbed.md "Builds"): ``push``
    copies this machine's build (same OS and libc needed); ``source`` builds
    on the host from the sources, with its compiler and ``cmake_args``."""
    mode: Literal["push", "source"] = "push"
    cmake_args: list[str] = []
    timeout_s: float = Field(1800.0, gt=0, le=86400)


class Host(Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,11}$")
    ssh: str = Field(min_length=1)          # address or name on the management network
    port: int = Field(22, ge=1, le=65535)
    user: str = Field("root", min_length=1)
    key: str = Field(min_length=1)           # private key file
    roles: list[Role] = Field(min_length=1)
    nic: str = "eth1"                        # data NIC (servers, clients)
    ports: list[str] = []                    # switch: data port i = ports[i] (node i)
    # switch: its recirculation port, two interfaces wired to each other
    # (out, in: a veth pair or a cable), for a protocol whose program loops
    # packets (the plug-in's needs_loop); empty: none
    loop: list[str] = Field([], max_length=2)
    pci: str | None = None                   # data NIC's PCI address (DPDK)
    cores: list[int] = []                    # cores to pin to (empty: any)
    stack: Stack | None = None               # None: the inventory's
    dpdk: Dpdk | None = None                 # None: the inventory's
    vma: Vma | None = None                   # None: the inventory's
    build: Build | None = None               # None: the inventory's
    workdir: str = "/tmp/netkv-testbed"      # remote folder for binaries and run state
    # folders put first on PATH for netkv's commands there: where programs
    # netkv does not push live (e.g. BMv2's simple_switch_grpc in /opt/p4/bin)
    path: list[str] = []

    @model_validator(mode="after")
    def _loop_pair(self) -> "Host":
        bad = [p for p in self.path if not p.startswith("/") or ":" in p]
        if bad:
            raise ValueError(f"host {self.name!r}: path entry {bad[0]!r} (allowed: absolute "
                             "folders without ':')")
        if self.loop and (len(self.loop) != 2 or self.loop[0] == self.loop[1]):
            raise ValueError(f"host {self.name!r}: loop = {self.loop} (allowed: two "
                             "interfaces, out and in, wired to each other)")
        return self


class Inventory(Strict):
    name: str = Field(min_length=1)
    description: str = ""
    known_hosts: str = ""                    # pinned host keys (ssh UserKnownHostsFile)
    stack: Stack = "kernel"                  # every host's unless it names its own
    dpdk: Dpdk = Dpdk()
    vma: Vma = Vma()
    build: Build = Build()
    hosts: list[Host] = []

    @model_validator(mode="after")
    def _unique(self) -> "Inventory":
        names = [h.name for h in self.hosts]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"inventory.hosts: host name {dup[0]!r} appears twice")
        return self

    def with_role(self, role: Role) -> list[Host]:
        return [h for h in self.hosts if role in h.roles]

    def stack_of(self, host: Host) -> Stack:
        return host.stack or self.stack

    def dpdk_of(self, host: Host) -> Dpdk:
        return host.dpdk or self.dpdk

    def vma_of(self, host: Host) -> Vma:
        return host.vma or self.vma

    def build_of(self, host: Host) -> Build:
        return host.build or self.build

    def check_rack(self, servers: int, clients: int, coordinators: int = 0) -> None:
        """Raise ValueError (one line) unless this inventory holds a rack of
        ``servers`` servers, ``clients`` clients and ``coordinators``
        coordinator hosts that netkv can run."""
        where = f"inventory {self.name!r}"
        if not self.hosts:
            raise ValueError(f"target=testbed needs an inventory with hosts ({where} has none; "
                             "choose one: inventory=<name>, conf/inventory/)")
        if not self.known_hosts:
            raise ValueError(f"{where}: known_hosts is required (host keys are pinned)")
        have_s, have_c = len(self.with_role("server")), len(self.with_role("client"))
        if have_s < servers or have_c < clients:
            raise ValueError(f"{where} has {have_s} servers and {have_c} clients; the run "
                             f"asks for servers={servers} clients={clients}")
        switches = self.with_role("switch")
        if len(switches) != 1:
            raise ValueError(f"{where}: exactly one host must have role switch "
                             f"(found {len(switches)})")
        if len(switches[0].ports) < servers + clients:
            raise ValueError(f"{where}: switch {switches[0].name!r} lists "
                             f"{len(switches[0].ports)} ports; the rack needs "
                             f"{servers + clients} (servers, then clients)")
        if not coordinators:
            return
        have_k = len(self.with_role("coordinator"))
        if have_k < coordinators:
            raise ValueError(f"{where} has {have_k} coordinator hosts; the protocol needs "
                             f"{coordinators} (a host with role coordinator)")
        wired = have_s + have_c + coordinators
        if len(switches[0].ports) < wired:
            raise ValueError(f"{where}: switch {switches[0].name!r} lists "
                             f"{len(switches[0].ports)} ports; the rack needs {wired} (every "
                             "server, then every client, then the coordinators)")
