"""Host stacks on the testbed: how kvserver and kvclient start on a host.

``command`` turns a program's own arguments into the remote command line for
the host's stack (``Inventory.stack_of``):

- ``kernel``: ``env LD_LIBRARY_PATH=<bin> <bin>/kvserver ARGS``;
- ``vma``: the same programs with ``LD_PRELOAD=<vma.lib>`` and the ``VMA_*``
  knobs in the environment (libvma takes over their UDP sockets);
- ``dpdk``: ``<bin>/kvserver-dpdk EAL -- ARGS --io mac=...``, the same source
  on DPDK (hostapps/stacks/dpdk.c). EAL gets the device (``-a <pci>``, or
  ``--no-pci --vdev=net_af_packet0,iface=<nic>`` when the host names no PCI
  address), the cores (``--lcores 0@(<cores>)``: the main lcore on the
  host's cores, or floating over all of them when it names none), the memory
  mode (``--in-memory``; ``--no-shconf`` with ``--no-huge``: every program its
  own memory, no shared files) and the inventory's ``dpdk.eal``. The
  program takes its rack-plan address from its node and its MAC from
  ``--io mac=`` (the plan's: the switch and the other hosts address it with
  no ARP).

Only kvserver and kvclient have stacks; netkv-switch runs as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from netkv.testbed.inventory import Host, Inventory

STACK_PROGRAMS = ("kvserver", "kvclient")
PROGRAMS = (*STACK_PROGRAMS, "netkv-switch")   # what a run starts on hosts (kernel stack)
DPDK_PROGRAMS = tuple(f"{p}-dpdk" for p in STACK_PROGRAMS)


def programs(inv: Inventory, hosts: Sequence[Host]) -> tuple[str, ...]:
    """The programs a rack of these hosts needs beyond the kernel ones."""
    return DPDK_PROGRAMS if any(inv.stack_of(h) == "dpdk" for h in hosts) else ()


def eal_args(inv: Inventory, host: Host, ncpu: int) -> list[str]:
    dpdk = inv.dpdk_of(host)
    cores = ",".join(str(c) for c in host.cores) if host.cores else f"0-{max(ncpu, 1) - 1}"
    device = (["-a", host.pci] if host.pci
              else ["--no-pci", f"--vdev=net_af_packet0,iface={host.nic}"])
    memory = ["--no-shconf"] if "--no-huge" in dpdk.eal else ["--in-memory"]
    return [*device, f"--lcores=0@({cores})", *memory, "--no-telemetry", *dpdk.eal]


def io_options(inv: Inventory, host: Host, mac: str) -> str:
    dpdk = inv.dpdk_of(host)
    opts = [f"mac={mac}", f"idle_us={dpdk.idle_us}"]
    if dpdk.gw_mac:
        opts.append(f"gw={dpdk.gw_mac}")
    return ",".join(opts)


def command(inv: Inventory, host: Host, program: str, bin_dir: str, args: Sequence[str],
            mac: str, ncpu: int, node: bool = True) -> list[str]:
    """The remote argv of ``program`` (a name in ``bin_dir``) with ``args``
    on ``host``; ``mac`` is the host's rack-plan MAC, ``ncpu`` its CPU count;
    ``node``: the host is a server or client of the rack (the switch host's
    programs run on the kernel whatever its stack)."""
    env = ["env", f"LD_LIBRARY_PATH={bin_dir}"]
    stack = inv.stack_of(host) if node and program in STACK_PROGRAMS else "kernel"
    if stack == "vma":
        vma = inv.vma_of(host)
        env += [f"LD_PRELOAD={vma.lib}", *(f"{k}={v}" for k, v in sorted(vma.env.items()))]
    if stack == "dpdk":
        return [*env, f"{bin_dir}/{program}-dpdk", *eal_args(inv, host, ncpu), "--", *args,
                "--io", io_options(inv, host, mac)]
    return [*env, f"{bin_dir}/{program}", *args]
