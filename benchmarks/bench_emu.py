"""bench-emu: real packets, with and without netkv-switch in the path.

In one run, side by side:
  (a) direct veth between two network namespaces, and
  (b) the same traffic through netkv-switch (protocol pipeline ``hash``):
      packets per second (a blaster into a sink, 64 B UDP payloads) and the
      p50/p99 round trip of a low-rate UDP echo, twice: with the path's
      processes (client, echo server and, on path b, the switch) on one vCPU
      (``--cpu``, the checked figure) and unpinned (reported beside it);
  (c) kvserver's requests/s (hash protocol, reads of preloaded keys) against a
      plain UDP echo server's replies/s, both over the direct veth;
  (d) the host stacks side by side: the kernel pair (kvserver, kvclient)
      and the DPDK pair (kvserver-dpdk, kvclient-dpdk on net_af_packet over
      a veth with no kernel address), each flooded (hash reads: requests/s)
      and at a low rate (round trip p50/p99), unpinned. The DPDK programs
      sleep 20 us between empty polls (--dpdk-idle-us, as the namespace
      rack): on 2 shared vCPUs two programs polling without pause starve
      each other and the kernel's veth delivery (measured: RTT p50 16 ms,
      flood 0.29x the kernel pair); --dpdk-idle-us 0 is the DPDK way on
      dedicated cores. Skipped, and said, when the build has no DPDK programs.

Needs root. The namespaces and veths it makes are named ``nkbench*`` and are
removed at the start (leftovers of a crashed run) and at the end, also on error.
Results go to benchmarks/bench-emu.last.json; the previous file's numbers are
printed next to the new ones.

    python benchmarks/bench_emu.py [--seconds 2] [--rounds 5] [--spin-us 1000] [--rtt-rate 2000] [--cpu 0]
                                   [--parts switch,server,stacks] [--dpdk-idle-us 0]

Why one vCPU for the RTT: on this project's 2-vCPU VMs a wakeup across vCPUs
costs ~20 us (the idle vCPU halts; a pipe ping-pong between two processes is
~5 us round trip on one vCPU, 45-50 us across two), so an unpinned RTT mostly
measures where the scheduler put three processes. On one vCPU every hop is a
local context switch, for both paths alike, and what is left of the
difference is what the switch adds. The switch spins (yielding the vCPU to the
hosts each round) for --spin-us after traffic, longer than the echo's mean gap.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from netkv.native import NativeBuildMissing, program_path  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "bench-emu.last.json"
NS = ("nkbench-a", "nkbench-b", "nkbench-c", "nkbench-d", "nkbench-e", "nkbench-f")
ROOT_IFS = ("nkbenchs0", "nkbenchs1")
DIRECT = ("nkbench-a", "nkbench-b")     # (a): client namespace, server namespace
SWITCHED = ("nkbench-c", "nkbench-d")   # (b): the same through netkv-switch
DPDK_VETH = (("nkbench-e", "nkbenche"), ("nkbench-f", "nkbenchf"))  # (d): server, client
MAC = {1: "02:00:00:00:00:01", 2: "02:00:00:00:00:02"}


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, check=check, capture_output=True, text=True)


def cleanup() -> None:
    for ns in NS:
        sh("ip", "netns", "del", ns, check=False)
    for ifname in (*ROOT_IFS, "nkbencha", "nkbenchb", "nkbenche"):
        sh("ip", "link", "del", ifname, check=False)


def host_side(ns: str, ifname: str, node: int, peer: int) -> None:
    """Address the namespace's end as node ``node - 1`` of the rack plan."""
    sh("ip", "-n", ns, "addr", "add", f"10.0.0.{node}/8", "dev", ifname)
    sh("ip", "-n", ns, "link", "set", ifname, "address", MAC[node])
    sh("ip", "-n", ns, "link", "set", ifname, "up")
    sh("ip", "-n", ns, "link", "set", "lo", "up")
    sh("ip", "netns", "exec", ns, "ethtool", "-K", ifname, "tx", "off")
    sh("ip", "-n", ns, "neigh", "replace", f"10.0.0.{peer}", "lladdr", MAC[peer], "dev", ifname)


def setup() -> None:
    cleanup()
    for ns in NS:
        sh("ip", "netns", "add", ns)
    # (a) direct: a <-> b
    sh("ip", "link", "add", "nkbencha", "type", "veth", "peer", "name", "nkbenchb")
    sh("ip", "link", "set", "nkbencha", "netns", "nkbench-a")
    sh("ip", "link", "set", "nkbenchb", "netns", "nkbench-b")
    host_side("nkbench-a", "nkbencha", 1, 2)
    host_side("nkbench-b", "nkbenchb", 2, 1)
    # (b) switched: c <-> nkbenchs0 [netkv-switch] nkbenchs1 <-> d
    for i, (ns, node, peer) in enumerate((("nkbench-c", 1, 2), ("nkbench-d", 2, 1))):
        sh("ip", "link", "add", f"nkbenchh{i}", "type", "veth", "peer", "name", ROOT_IFS[i])
        sh("ip", "link", "set", f"nkbenchh{i}", "netns", ns)
        host_side(ns, f"nkbenchh{i}", node, peer)
        sh("ip", "link", "set", ROOT_IFS[i], "up")
        sh("ethtool", "-K", ROOT_IFS[i], "tx", "off", check=False)
    # (d) the DPDK pair's veth: plan MACs, no kernel address (only DPDK answers)
    sh("ip", "link", "add", "nkbenche", "type", "veth", "peer", "name", "nkbenchf")
    for node, (ns, ifname) in enumerate(DPDK_VETH, start=1):
        sh("ip", "link", "set", ifname, "netns", ns)
        sh("ip", "-n", ns, "link", "set", ifname, "address", MAC[node])
        sh("ip", "-n", ns, "link", "set", ifname, "up")
        sh("ip", "netns", "exec", ns, "ethtool", "-K", ifname, "tx", "off", check=False)


def on_cpu(cpu: int | None):  # noqa: ANN201 - a Popen preexec_fn or None
    """Pin the child (and what it execs) to one CPU; None leaves it free."""
    return None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))


class Proc:
    """A program we started; stopped by its own pid only."""

    def __init__(self, args: list[str], ns: str | None = None, cpu: int | None = None) -> None:
        cmd = (["ip", "netns", "exec", ns] if ns else []) + args
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  preexec_fn=on_cpu(cpu))

    def stop(self) -> dict:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        out, err = self.p.communicate(timeout=10)
        line = out.strip().splitlines()[-1] if out.strip() else "{}"
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            raise RuntimeError(f"{err.strip()} {out.strip()}") from None


def run_client(ns: str, args: list[str], cpu: int | None = None,
               program: list[str] | None = None) -> dict:
    prog = program or [str(program_path("kvclient"))]
    res = subprocess.run(["ip", "netns", "exec", ns, *prog, *args],
                         capture_output=True, text=True, timeout=120, preexec_fn=on_cpu(cpu))
    if res.returncode:
        raise RuntimeError(f"kvclient failed: {res.stderr.strip()}")
    return json.loads(res.stdout)


def measure_rtt(src: str, dst: str, seconds: float, rtt_rate: float,
                cpu: int | None) -> dict:
    """p50/p99 round trip of a low-rate UDP echo from src to dst."""
    echo = Proc([str(program_path("kvserver")), "--mode", "echo", "--port", "9002"], dst, cpu)
    try:
        time.sleep(0.3)
        res = run_client(src, ["--mode", "echo", "--target", "10.0.0.2:9002",
                               "--rate", str(rtt_rate), "--duration", str(seconds),
                               "--payload", "64"], cpu)
    finally:
        echo.stop()
    return {"p50": res["rtt_ns"]["p50"] / 1e3, "p99": res["rtt_ns"]["p99"] / 1e3,
            "latency_p50": res["latency_ns"]["p50"] / 1e3,
            "completion": res["completed"] / max(res["issued"], 1)}


def measure_pps(src: str, dst: str, seconds: float) -> dict:
    """Packets per second of a blaster into a sink."""
    server = str(program_path("kvserver"))
    sink = Proc([server, "--mode", "sink", "--port", "9001"], dst)
    try:
        time.sleep(0.3)
        blast = run_client(src, ["--mode", "blast", "--target", "10.0.0.2:9001", "--rate", "0",
                                 "--duration", str(seconds), "--payload", "64", "--drain", "0"])
        time.sleep(0.2)
    finally:
        got = sink.stop()
    return {"sent_pps": blast["sent_packets"] / seconds, "pps": got["rx"] / seconds}


def measure_round(seconds: float, rtt_rate: float, cpu: int, switch_pid: int) -> tuple[dict, dict]:
    """One round, each measurement of the direct path right before the same
    one through the switch: pps, the RTT on one vCPU (the switch moved there
    for the while), the RTT unpinned."""
    direct = measure_pps(*DIRECT, seconds)
    switched = measure_pps(*SWITCHED, seconds)
    for pinned in (True, False):
        where = cpu if pinned else None
        key = "" if pinned else "unpinned_"
        d = measure_rtt(*DIRECT, seconds, rtt_rate, where)
        all_cpus = os.sched_getaffinity(0)
        if pinned:
            os.sched_setaffinity(switch_pid, {cpu})
        try:
            s = measure_rtt(*SWITCHED, seconds, rtt_rate, where)
        finally:
            with contextlib.suppress(ProcessLookupError):  # a dead switch: keep its error
                os.sched_setaffinity(switch_pid, all_cpus)
        for out, res in ((direct, d), (switched, s)):
            out[f"{key}rtt_p50_us"], out[f"{key}rtt_p99_us"] = res["p50"], res["p99"]
            if pinned:
                out["latency_p50_us"], out["echo_completion"] = res["latency_p50"], res["completion"]
    return direct, switched


def measure_server(seconds: float) -> dict:
    """kvserver (hash reads) vs a plain UDP echo, both flooded over the direct veth."""
    server = str(program_path("kvserver"))
    out: dict = {}
    keys = "10000"
    common = ["--servers", "1", "--clients", "1", "--keys", keys, "--key-size", "16",
              "--value-size", "64"]
    kv = Proc([server, "--protocol", "hash", "--id", "0", *common], "nkbench-a")
    try:
        time.sleep(0.5)
        # the client is node 1 (10.0.0.2); the server is node 0 (10.0.0.1)
        run_client("nkbench-b", ["--protocol", "hash", "--id", "0", *common, "--rate", "0",
                                 "--duration", str(seconds), "--drain", "0.2"])
    finally:
        got = kv.stop()
    out["kvserver_rps"] = got["served"] / seconds
    echo = Proc([server, "--mode", "echo", "--port", "9003"], "nkbench-a")
    try:
        time.sleep(0.3)
        run_client("nkbench-b", ["--mode", "echo", "--target", "10.0.0.1:9003", "--rate", "0",
                                 "--duration", str(seconds), "--payload", "64", "--drain", "0.2"])
    finally:
        got = echo.stop()
    out["echo_rps"] = got["tx"] / seconds
    out["kvserver_vs_echo"] = out["kvserver_rps"] / out["echo_rps"] if out["echo_rps"] else 0.0
    return out


def dpdk_built() -> bool:
    try:
        return all(program_path(p).is_file() for p in ("kvserver-dpdk", "kvclient-dpdk"))
    except NativeBuildMissing:
        return False


def stack_program(prog: str, stack: str, ifname: str, idle_us: int) -> tuple[list[str], list[str]]:
    """(argv before the program's arguments, arguments after them) on a stack."""
    if stack == "kernel":
        return [str(program_path(prog))], []
    eal = ["--no-huge", "--no-pci", "--no-shconf", "--no-telemetry", "--log-level=lib.eal:warning",
           f"--vdev=net_af_packet0,iface={ifname}", f"--lcores=0@(0-{(os.cpu_count() or 1) - 1})"]
    return [str(program_path(f"{prog}-dpdk")), *eal, "--"], ["--io", f"idle_us={idle_us}"]


def measure_stack(stack: str, seconds: float, rtt_rate: float, idle_us: int) -> dict:
    """One stack's pair over a direct veth: hash reads flooded (client
    completions/s) and at rtt_rate (latency from the intended send, and the
    round trip from the real one)."""
    (ns_s, if_s), (ns_c, if_c) = DPDK_VETH if stack == "dpdk" else (
        (DIRECT[0], "nkbencha"), (DIRECT[1], "nkbenchb"))
    common = ["--servers", "1", "--clients", "1", "--keys", "10000", "--key-size", "16",
              "--value-size", "64", "--protocol", "hash", "--id", "0"]
    pre, post = stack_program("kvserver", stack, if_s, idle_us)
    kv = Proc([*pre, *common, *post], ns_s)
    cpre, cpost = stack_program("kvclient", stack, if_c, idle_us)
    try:
        time.sleep(1.0)  # EAL and the port come up
        flood = run_client(ns_c, [*common, "--rate", "0", "--duration", str(seconds),
                                  "--drain", "0.2", *cpost], program=cpre)
        low = run_client(ns_c, [*common, "--rate", str(rtt_rate), "--duration", str(seconds),
                                "--drain", "0.2", *cpost], program=cpre)
    finally:
        served = kv.stop()
    if served.get("stack", "kernel") != stack or low.get("stack", "kernel") != stack:
        raise RuntimeError(f"the {stack} pair did not run on {stack}: {served.get('stack')}")
    return {"kv_rps": flood["completed"] / seconds,
            "completion": low["completed"] / max(low["issued"], 1),
            "latency_p50_us": low["latency_ns"]["p50"] / 1e3,
            "latency_p99_us": low["latency_ns"]["p99"] / 1e3,
            "rtt_p50_us": low["rtt_ns"]["p50"] / 1e3, "rtt_p99_us": low["rtt_ns"]["p99"] / 1e3}


def median_of(rounds: list[dict]) -> dict:
    keys = rounds[0].keys()
    return {k: float(sorted(r[k] for r in rounds)[len(rounds) // 2]) for k in keys}


def median_added(direct: list[dict], switched: list[dict], key: str) -> float:
    """The switch's added latency: the median over rounds of (switched -
    direct) measured back to back in the same round. This machine's speed
    drifts between rounds (a direct p50 of 34 us in one round, 46 in the
    next), and pairing cancels what both paths of a round share, which a
    difference of the two medians does not."""
    diffs = sorted(s[key] - d[key] for d, s in zip(direct, switched))
    return float(diffs[len(diffs) // 2])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--spin-us", type=float, default=1000.0,
                    help="netkv-switch busy-polls this long after traffic before sleeping")
    ap.add_argument("--rtt-rate", type=float, default=2000.0, help="echo requests/s for the RTT")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds (medians reported)")
    ap.add_argument("--cpu", type=int, default=0,
                    help="the vCPU the RTT measurement's processes share (see above)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--parts", default="switch,server,stacks",
                    help="comma-separated: switch (a, b), server (c), stacks (d)")
    ap.add_argument("--dpdk-idle-us", type=int, default=20,
                    help="the DPDK programs sleep this long between empty polls (0: poll)")
    ap.add_argument("--capture", type=Path, metavar="DIR",
                    help="netkv-switch captures every port into DIR (capture=true's cost; "
                         "snaplen 256, at most 2 M frames per port)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench-emu: needs root (network namespaces)", file=sys.stderr)
        return 2
    previous = json.loads(args.out.read_text()) if args.out.is_file() else None
    result: dict = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "seconds": args.seconds,
                    "spin_us": args.spin_us, "rtt_rate": args.rtt_rate, "cpus": os.cpu_count(),
                    "rtt_cpu": args.cpu}
    parts = set(args.parts.split(","))
    unknown = parts - {"switch", "server", "stacks"}
    if unknown:
        print(f"bench-emu: --parts {sorted(unknown)[0]!r} unknown (switch, server, stacks)",
              file=sys.stderr)
        return 2
    result["checks"], result["pass"] = {}, {}
    try:
        setup()
        if "switch" in parts:
            measure_switch(args, result)
        if "server" in parts:
            server = [measure_server(args.seconds) for _ in range(args.rounds)]
            result["server"] = median_of(server)
            result.setdefault("rounds", {})["server"] = server
        if "stacks" in parts:
            measure_stacks(args, result)
    finally:
        cleanup()
    c, ok = result["checks"], result["pass"]
    if "switch" in parts:
        d, s = result["direct"], result["switch"]
        c["switch_pps_ratio"] = s["pps"] / d["pps"] if d["pps"] else 0.0
        c["switch_added_p50_us"] = median_added(result["rounds"]["direct"],
                                                result["rounds"]["switch"], "rtt_p50_us")
        c["unpinned_switch_added_p50_us"] = median_added(
            result["rounds"]["direct"], result["rounds"]["switch"], "unpinned_rtt_p50_us")
        ok["switch_pps_ge_50pct"] = c["switch_pps_ratio"] >= 0.5
        ok["switch_adds_le_15us_p50"] = c["switch_added_p50_us"] <= 15.0
    if "server" in parts:
        c["kvserver_vs_echo"] = result["server"]["kvserver_vs_echo"]
        ok["kvserver_ge_80pct_echo"] = c["kvserver_vs_echo"] >= 0.8
    if "dpdk" in result.get("stacks", {}):
        k, p = result["stacks"]["kernel"], result["stacks"]["dpdk"]
        c["dpdk_vs_kernel_rps"] = p["kv_rps"] / k["kv_rps"] if k["kv_rps"] else 0.0
        ok["dpdk_pair_completes_99pct"] = p["completion"] >= 0.99
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result, previous, args.out)
    return 0


def measure_switch(args: argparse.Namespace, result: dict) -> None:
    """(a) and (b): alternate the two paths and keep medians: this machine's
    speed drifts from one second to the next, so one-shot comparisons are noisy."""
    direct, switched = [], []
    ctl = ["--ctl", "/tmp/nkbench-switch.sock"] if args.capture else []
    switch = Proc([str(program_path("netkv-switch")), "--protocol", "hash", "--servers", "1",
                   "--clients", "1", "--port", ROOT_IFS[0], "--port", ROOT_IFS[1],
                   "--spin-us", str(args.spin_us), *ctl])
    time.sleep(0.3)
    if args.capture:
        from netkv.drivers.netkv_switch import CtlSocket

        args.capture.mkdir(parents=True, exist_ok=True)
        sock = CtlSocket.wait(ctl[1])
        sock.request(f"capture start {args.capture.resolve()} 256 1000000000 2000000")
        result["capture"] = str(args.capture)
    try:
        for _ in range(args.rounds):
            d, s = measure_round(args.seconds, args.rtt_rate, args.cpu, switch.p.pid)
            direct.append(d)
            switched.append(s)
    finally:
        result["switch_counters"] = switch.stop().get("netkv_switch", {})
    result["direct"], result["switch"] = median_of(direct), median_of(switched)
    result.setdefault("rounds", {}).update(direct=direct, switch=switched)


def measure_stacks(args: argparse.Namespace, result: dict) -> None:
    """(d): the kernel pair and the DPDK pair, alternating, medians."""
    stacks = ["kernel", "dpdk"] if dpdk_built() else ["kernel"]
    if len(stacks) == 1:
        result["stacks_note"] = "kvserver-dpdk not built (no libdpdk-dev): DPDK pair skipped"
        print(f"bench-emu: {result['stacks_note']}", file=sys.stderr)
    rounds: dict[str, list[dict]] = {st: [] for st in stacks}
    for _ in range(args.rounds):
        for st in stacks:
            rounds[st].append(measure_stack(st, args.seconds, args.rtt_rate, args.dpdk_idle_us))
    result["stacks"] = {st: median_of(r) for st, r in rounds.items()}
    result["dpdk_idle_us"] = args.dpdk_idle_us
    result.setdefault("rounds", {})["stacks"] = rounds


def print_table(new: dict, old: dict | None, path: Path) -> None:
    rows = [
        ("direct veth pps (sink rx)", ("direct", "pps"), "{:,.0f}"),
        ("netkv-switch pps (sink rx)", ("switch", "pps"), "{:,.0f}"),
        ("  ratio switch/direct", ("checks", "switch_pps_ratio"), "{:.2f}"),
        ("direct veth RTT p50 (us), one vCPU", ("direct", "rtt_p50_us"), "{:.1f}"),
        ("direct veth RTT p99 (us), one vCPU", ("direct", "rtt_p99_us"), "{:.1f}"),
        ("netkv-switch RTT p50 (us), one vCPU", ("switch", "rtt_p50_us"), "{:.1f}"),
        ("netkv-switch RTT p99 (us), one vCPU", ("switch", "rtt_p99_us"), "{:.1f}"),
        ("  added p50 (us), one vCPU *", ("checks", "switch_added_p50_us"), "{:.1f}"),
        ("direct veth RTT p50 (us), unpinned", ("direct", "unpinned_rtt_p50_us"), "{:.1f}"),
        ("netkv-switch RTT p50 (us), unpinned", ("switch", "unpinned_rtt_p50_us"), "{:.1f}"),
        ("  added p50 (us), unpinned *", ("checks", "unpinned_switch_added_p50_us"), "{:.1f}"),
        ("kvserver req/s", ("server", "kvserver_rps"), "{:,.0f}"),
        ("UDP echo replies/s", ("server", "echo_rps"), "{:,.0f}"),
        ("  ratio kvserver/echo", ("checks", "kvserver_vs_echo"), "{:.2f}"),
        ("kernel pair kv req/s (flood)", ("stacks", "kernel", "kv_rps"), "{:,.0f}"),
        ("DPDK pair kv req/s (flood)", ("stacks", "dpdk", "kv_rps"), "{:,.0f}"),
        ("  ratio DPDK/kernel", ("checks", "dpdk_vs_kernel_rps"), "{:.2f}"),
        ("kernel pair RTT p50 (us)", ("stacks", "kernel", "rtt_p50_us"), "{:.1f}"),
        ("DPDK pair RTT p50 (us)", ("stacks", "dpdk", "rtt_p50_us"), "{:.1f}"),
        ("kernel pair RTT p99 (us)", ("stacks", "kernel", "rtt_p99_us"), "{:.1f}"),
        ("DPDK pair RTT p99 (us)", ("stacks", "dpdk", "rtt_p99_us"), "{:.1f}"),
        ("kernel pair latency p50 (us)", ("stacks", "kernel", "latency_p50_us"), "{:.1f}"),
        ("DPDK pair latency p50 (us)", ("stacks", "dpdk", "latency_p50_us"), "{:.1f}"),
    ]

    def get(d: dict | None, path: tuple[str, ...]) -> float | None:
        try:
            v: object = d
            for k in path:
                v = v[k]  # type: ignore[index]
            return float(v) if d else None  # type: ignore[arg-type]
        except (KeyError, TypeError):
            return None

    print(f"{'bench-emu':34} {'this run':>14} {'previous':>14}")
    for label, cell, fmt in rows:
        a, b = get(new, cell), get(old, cell)
        print(f"{label:34} {fmt.format(a) if a is not None else '-':>14} "
              f"{fmt.format(b) if b is not None else '-':>14}")
    print("  * median over rounds of (switched - direct), each pair measured back to back")
    for k, ok in new["pass"].items():
        print(f"  {'PASS' if ok else 'FAIL'}  {k}")
    print(f"results: {path}")


if __name__ == "__main__":
    raise SystemExit(main())
