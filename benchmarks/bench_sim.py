"""Benchmark the simulator (``just bench-sim``).

Prints, side by side with the numbers of the previous run (kept in
benchmarks/bench-sim.last.json, rewritten by every run):

  1. simulated requests per second of protocol=hash on one core (16 servers,
     1 M keys, Zipf 0.99 and uniform, at 80% of the busiest server's
     capacity, 4 M requests, best of 3), and simulated events per second;
  1b. the same for protocol=kvswitch (32 servers, K = 10,000, prewarmed, its
     controller's periods included; issue #9's goal: >= 3 M per core);
  2. the wall time of one full skew sweep with SLO search
     (netkv.slo.search_throughput): 6 points, uniform and Zipf
     0.9/0.95/0.99/1.1/1.2, default config (duration 0.2 s per load point),
     plus each point's throughput under the SLO relative to uniform.

Usage: python benchmarks/bench_sim.py [--no-save] [--duration S]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from netkv.config.compose import load
from netkv.native import library_path
from netkv.sim.analysis import expected_server_shares
from netkv.sim.engine import SimEngine, Stats
from netkv.targets.sim import SimTarget

LAST = Path(__file__).with_name("bench-sim.last.json")
SWEEP_ALPHAS = (0.0, 0.9, 0.95, 0.99, 1.1, 1.2)
REPEATS = 3


def engine_speed(alpha: float, requests: float = 4e6) -> dict[str, float]:
    """Requests and events per CPU second of one engine run on one core (no
    Python in the loop). CPU time of this thread, not wall time: on a shared
    2-core machine the wall clock also counts time spent waiting for a core."""
    overrides = ["servers=16", "keys=1000000", f"alpha={alpha}", "topology.timeline_ms=0"]
    if alpha == 0.0:
        overrides.append("workload=uniform")
    cfg = load(overrides)
    with SimTarget(cfg) as target:
        busiest = float(expected_server_shares(target.workload).max())
        srv = cfg.topology.server
        rate = 0.8 * (1e9 / srv.service_ns) / busiest
        cfg = cfg.model_copy(update={"duration": requests / rate})
        walls = []
        for _ in range(REPEATS):  # best of REPEATS: the machine may be shared
            with SimEngine(cfg, target.workload, rate, seed=1) as eng:
                t0 = time.thread_time()
                st = eng.run()
                walls.append(time.thread_time() - t0)
        wall = min(walls)
    return {"requests_per_s": st.issued / wall, "events_per_s": st.events / wall,
            "requests": float(st.issued), "wall_s": wall}


class ProtocolRun:
    """A protocol's simulator load point at 80% of capacity for about
    `requests` requests, its controller's periods included (the controller's
    set-up, e.g. prewarming, happens in `engine`, outside any timing)."""

    def __init__(self, name: str, overrides: list[str], requests: float,
                 timeline_ms: float = 0.0) -> None:
        from netkv.protocols import lookup

        self.cfg = load([f"protocol={name}", f"topology.timeline_ms={timeline_ms}", *overrides])
        self.plugin = lookup(name)
        self.factory = self.plugin.sim_controller(self.cfg)
        epoch_ms = getattr(self.cfg.protocol, "epoch_ms", None)
        self.epoch_s = epoch_ms / 1e3 if self.factory and epoch_ms else None
        self.requests = requests
        self.target = SimTarget(self.cfg)

    def __enter__(self) -> "ProtocolRun":
        self.target.__enter__()
        self.rate = 0.8 * self.target.capacity_hint_rps()
        self.cfg = self.cfg.model_copy(update={"duration": self.requests / self.rate})
        return self

    def __exit__(self, *exc: object) -> None:
        self.target.__exit__(*exc)

    @contextmanager
    def engine(self, seed: int) -> Iterator[tuple[SimEngine, Callable[[], Stats], object]]:
        """(engine, run, controller): run() runs the whole load point."""
        with SimEngine(self.cfg, self.target.workload, self.rate, seed,
                       self.plugin.pipeline_params(self.cfg)) as eng:
            ctl = self.factory(eng) if self.factory else None
            yield eng, (lambda: eng.run(ctl, self.epoch_s if ctl else None)), ctl


def protocol_speed(name: str, overrides: list[str], requests: float = 4e6) -> dict[str, float]:
    """engine_speed for a protocol with a controller: the engine and the
    controller's epochs (Python) in the loop, the controller's set-up
    (prewarming) not."""
    with ProtocolRun(name, overrides, requests) as pr:
        walls = []
        for _ in range(REPEATS):
            with pr.engine(1) as (_eng, run, _ctl):
                t0 = time.thread_time()
                st = run()
                walls.append(time.thread_time() - t0)
        wall = min(walls)
    return {"requests_per_s": st.issued / wall, "events_per_s": st.events / wall}


def skew_sweep(duration: float | None) -> dict[str, float]:
    from netkv.slo import search_throughput

    out: dict[str, float] = {}
    t_all = time.perf_counter()
    points = 0
    for alpha in SWEEP_ALPHAS:
        overrides = [f"alpha={alpha}"] + (["workload=uniform"] if alpha == 0.0 else [])
        if duration:
            overrides.append(f"duration={duration}")
        cfg = load(overrides)
        with SimTarget(cfg) as target:
            def measure(rate: float, phase: str) -> object:
                return target.run_point(rate, cfg.seed)

            res = search_throughput(measure, target.capacity_hint_rps(), cfg.slo)
        points += 1 + len(res.points)
        out[f"tput_alpha_{alpha:g}"] = res.max_throughput_rps
    out["sweep_wall_s"] = time.perf_counter() - t_all
    out["sweep_load_points"] = float(points)
    base = out["tput_alpha_0"]
    for alpha in SWEEP_ALPHAS[1:]:
        out[f"rel_alpha_{alpha:g}"] = out[f"tput_alpha_{alpha:g}"] / base if base else 0.0
    return out


def git_rev() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True,
                              cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def cpu() -> str:
    """The processor and its caches: the same code runs at different speeds
    on different hosts of this VM (KVSwitch's time is mostly cache misses),
    so a comparison across runs must name them."""
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    caches = []
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            if kind != "Instruction":
                caches.append(f"L{(index / 'level').read_text().strip()} "
                              f"{(index / 'size').read_text().strip()}")
        except OSError:
            continue
    return f"{model}, {os.cpu_count()} CPUs" + (f", {' '.join(caches)}" if caches else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-save", action="store_true", help="do not rewrite the .last.json")
    ap.add_argument("--duration", type=float, default=None,
                    help="seconds of simulated time per sweep load point (default: config)")
    args = ap.parse_args()

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    new: dict[str, float] = {}
    z = engine_speed(0.99)
    u = engine_speed(0.0)
    new["hash_zipf099_requests_per_s"] = z["requests_per_s"]
    new["hash_zipf099_events_per_s"] = z["events_per_s"]
    new["hash_uniform_requests_per_s"] = u["requests_per_s"]
    new["hash_uniform_events_per_s"] = u["events_per_s"]
    k = protocol_speed("kvswitch", ["servers=32", "keys=1000000", "alpha=0.99"])
    new["kvswitch_zipf099_requests_per_s"] = k["requests_per_s"]
    new["kvswitch_zipf099_events_per_s"] = k["events_per_s"]
    new.update(skew_sweep(args.duration))

    old: dict = {}
    if LAST.is_file():
        old = json.loads(LAST.read_text())
    prev = old.get("results", {})
    print(f"bench-sim  ({library_path()})")
    print(f"{'metric':34} {'previous':>14} {'now':>14} {'change':>8}")
    for key, val in new.items():
        was = prev.get(key)
        change = f"{(val / was - 1) * 100:+.1f}%" if was else ""
        fmt = (lambda v: f"{v / 1e6:.2f} M") if "per_s" in key or key.startswith("tput") \
            else (lambda v: f"{v:.3f}")
        print(f"{key:34} {fmt(was) if was is not None else '-':>14} {fmt(val):>14} {change:>8}")
    load = os.getloadavg()[0]
    if old:
        print(f"previous run: {old.get('when', '?')} at {old.get('git', '?')} on {old.get('host', '?')}"
              f" ({old.get('cpu', 'cpu not recorded')}; load average {old.get('load', '?')})")
    print(f"this run: {cpu()}; load average {load:.2f}")
    verdict = "PASS" if new["hash_zipf099_requests_per_s"] >= 5e6 else "BELOW"
    print(f"target >= 5 M simulated requests/s on one core (hash, zipf 0.99): {verdict}")
    kv = "PASS" if new["kvswitch_zipf099_requests_per_s"] >= 3e6 else "BELOW"
    print(f"target >= 3 M simulated requests/s on one core (kvswitch, zipf 0.99): {kv}")
    if not args.no_save:
        LAST.write_text(json.dumps({
            "when": time.strftime("%Y-%m-%d %H:%M:%S"),
            "git": git_rev(),
            "host": f"{platform.node()} {platform.machine()} {platform.processor() or ''}".strip(),
            "python": platform.python_version(),
            "cpu": cpu(),
            "load": round(load, 2),
            "results": new,
        }, indent=2) + "\n")


if __name__ == "__main__":
    main()
