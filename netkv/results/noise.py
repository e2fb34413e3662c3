"""Noise indicators per load point: how busy the machine was, and what the
switch and the servers dropped, so that a bad point can be told from a slow
protocol (docs/results.md "Noise columns").

``host_*`` columns come from the kernel (``/proc/stat``, the load average)
on every target; the ``switch_*`` and ``servers_*`` columns from the
switch's and the servers' own counters, where the target runs real programs
(Mininet, testbed).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from netkv.targets.base import PointResult

HOST_COLUMNS = ("wall_s", "host_busy", "host_steal", "host_load1", "steal_remeasured")
RACK_COLUMNS = ("switch_rx", "switch_dropped", "switch_malformed",
                "servers_rx", "servers_dropped", "servers_malformed")
COLUMNS = (*HOST_COLUMNS, *RACK_COLUMNS)

# netkv-switch's counters (`counters` on its control socket) that are a frame
# it received and did not forward as the pipeline asked: policy drops
# (pipe_drop: the program said so; no_route), faults it injected
# (fault_loss), full queues (delay_full, recirc_drop, cpu_drops), the
# kernel's (per port rx_ring_drop), send errors, and what it dropped while
# closed after a restart (closed: not programmed yet).
SWITCH_DROPS = ("pipe_drop", "no_route", "non_ip_drop", "fault_loss", "delay_full",
                "recirc_drop", "cpu_drops", "port_errors", "encode_err", "closed")
SWITCH_PORT_DROPS = (".rx_ring_drop", ".tx_err")
SWITCH_MALFORMED = ("bad_frames", "bad_msgs")
# kvserver's stats: a request it could not answer (send/encode errors, a full
# store) and one it could not parse (bad: every wire error)
SERVER_DROPS = ("send_err", "encode_err", "store_full")


# On a virtual machine the hypervisor's "steal" (the vCPU ready but not
# run) is the dominant latency noise on real packets: measured here, a
# Mininet point at 2,500 req/s with 11% steal had p50 437 us and p99 4.8 ms
# against 200 us and 0.5-1.7 ms with none (docs/results.md "Noise columns").
STEAL_WARN = 0.02


def cpu_times(stat: Path = Path("/proc/stat")) -> tuple[int, int, int]:
    """(busy, total, steal) jiffies of every CPU of the machine since boot."""
    try:
        fields = stat.read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return 0, 0, 0
    values = [int(v) for v in fields[:8]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values)
    steal = values[7] if len(values) > 7 else 0
    return total - idle, total, steal


def busy_fraction(before: tuple[int, ...], after: tuple[int, ...]) -> float:
    """The share of the machine's CPU time spent not idle between two samples."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else float("nan")


def steal_fraction(before: tuple[int, int, int], after: tuple[int, int, int]) -> float:
    """The share of the machine's CPU time the hypervisor took between two
    samples (0 on bare metal)."""
    total = after[1] - before[1]
    return (after[2] - before[2]) / total if total > 0 else float("nan")


def steal_note(results: Sequence["PointResult"]) -> str:
    """'; hypervisor steal up to X%' when a point's steal passed STEAL_WARN
    (its latency is then the virtual machine's more than the protocol's)."""
    steals = [r.noise.get("host_steal", float("nan")) for r in results]
    worst = max((s for s in steals if s == s), default=0.0)
    return f"; hypervisor steal up to {100 * worst:.0f}%" if worst > STEAL_WARN else ""


def measure(run: Callable[[], "PointResult"]) -> "PointResult":
    """``run()`` with the host columns (wall time, busy share, load) added
    to its noise."""
    before, t0 = cpu_times(), time.perf_counter()
    result = run()
    wall = time.perf_counter() - t0
    after = cpu_times()
    result.noise.update(wall_s=wall, host_busy=busy_fraction(before, after),
                        host_steal=steal_fraction(before, after), host_load1=os.getloadavg()[0])
    return result


def measure_until_calm(run: Callable[[], "PointResult"], max_steal: float,
                       retries: int) -> "PointResult":
    """``measure(run)``, again while the hypervisor took more than
    ``max_steal`` of the CPU time, at most ``retries`` more times; the last
    measurement is kept (a stolen one only when every try was), with
    ``steal_remeasured`` = how many were discarded."""
    result = measure(run)
    tries = 0
    while tries < retries and result.noise["host_steal"] > max_steal:
        tries += 1
        result = measure(run)
    result.noise["steal_remeasured"] = tries
    return result


def _delta(after: Mapping[str, Any], before: Mapping[str, Any], key: str) -> int:
    return int(after.get(key, 0)) - int(before.get(key, 0))


def switch_noise(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """The switch's frames received, dropped and malformed during a point
    (nothing when the back-end reports no such counters, e.g. BMv2)."""
    if "frames" not in after:
        return {}
    port_keys = [k for k in after if k.endswith(SWITCH_PORT_DROPS)]
    return {
        "switch_rx": _delta(after, before, "frames"),
        "switch_dropped": sum(_delta(after, before, k) for k in (*SWITCH_DROPS, *port_keys)),
        "switch_malformed": sum(_delta(after, before, k) for k in SWITCH_MALFORMED),
    }


def server_noise(before: Sequence[Mapping[str, Any]],
                 after: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Every server's requests received, dropped and malformed during a point, summed."""
    pairs = list(zip(after, before, strict=True))
    return {
        "servers_rx": sum(_delta(a, b, "rx") for a, b in pairs),
        "servers_dropped": sum(_delta(a, b, k) for a, b in pairs for k in SERVER_DROPS),
        "servers_malformed": sum(_delta(a, b, "bad") for a, b in pairs),
    }
