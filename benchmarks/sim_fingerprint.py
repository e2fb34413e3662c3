"""A digest of every protocol's simulated results at fixed seeds.

An engine change meant only to make the simulator faster must leave this
output identical, bit for bit: run it before and after and diff the two
(``python benchmarks/sim_fingerprint.py > before.txt``). Each line is one
protocol's run: its engine counters, latency histogram, per-server counts
and switch statistics, hashed, plus a few readable numbers.

Usage: python benchmarks/sim_fingerprint.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json

import numpy as np

from netkv.config.compose import load
from netkv.protocols import lookup
from netkv.sim.engine import SimEngine
from netkv.targets.sim import SimTarget

# name -> (overrides, offered req/s); small runs, a few seconds each
CASES: dict[str, tuple[list[str], float]] = {
    "hash": (["protocol=hash", "servers=16", "keys=100000", "alpha=0.99",
              "duration=0.05", "write_ratio=0.05"], 1.5e6),
    "pegasus": (["protocol=pegasus", "servers=16", "keys=100000", "alpha=0.99",
                 "duration=0.05", "write_ratio=0.05"], 1.5e6),
    "netcache": (["protocol=netcache", "servers=16", "keys=100000", "alpha=0.99",
                  "duration=0.05", "write_ratio=0.05"], 1.5e6),
    "kvswitch": (["protocol=kvswitch", "servers=32", "keys=1000000", "alpha=0.99",
                  "duration=0.05"], 4e6),
    "kvswitch-writes": (["protocol=kvswitch", "servers=32", "keys=100000", "alpha=0.99",
                         "duration=0.05", "write_ratio=0.05"], 2e6),
    "kvswitch-racks": (["protocol=kvswitch", "servers=64", "topology.kind=racks",
                        "topology.racks=4", "keys=1000000", "alpha=0.99",
                        "duration=0.02"], 4e6),
    "netlr": (["protocol=netlr", "servers=4", "keys=100000", "duration=0.05",
               "write_ratio=0.05", "workload=uniform"], 4e5),
    "starcache": (["protocol=starcache", "servers=16", "keys=100000", "alpha=0.99",
                   "duration=0.05", "write_ratio=0.05"], 1e6),
    "netmc": (["protocol=netmc", "servers=5", "keys=100000", "alpha=0.99",
               "duration=0.05", "workload.multiget.mean=8.6", "write_ratio=0.05",
               "slo.reference=netmc"], 2e5),
}


def digest(name: str, overrides: list[str], rate: float, seed: int = 1) -> str:
    cfg = load(overrides)
    plugin = lookup(cfg.protocol.name)
    factory = plugin.sim_controller(cfg)
    epoch_ms = getattr(cfg.protocol, "epoch_ms", None)
    params = plugin.pipeline_params(cfg)
    with SimTarget(cfg, factory, params) as target:
        with SimEngine(cfg, target.workload, rate, seed, params) as eng:
            ctl = target._controller(eng)  # one per switch with racks
            st = eng.run(ctl, epoch_ms / 1e3 if ctl and epoch_ms else None)
            lower, counts = eng.histogram()
            parts = [json.dumps(st.__dict__ if hasattr(st, "__dict__") else st._asdict(),
                                sort_keys=True, default=str).encode(),
                     np.ascontiguousarray(lower).tobytes(),
                     np.ascontiguousarray(counts).tobytes(),
                     np.ascontiguousarray(eng.server_counts()).tobytes()]
            for k, v in sorted(eng.switch_stats().items()):
                parts.append(k.encode() + np.ascontiguousarray(v).tobytes())
            tl = eng.timeline()
            for k in sorted(tl):
                parts.append(k.encode() + np.ascontiguousarray(tl[k]).tobytes())
    h = hashlib.sha256(b"|".join(parts)).hexdigest()[:16]
    return (f"{name:16s} {h} issued={st.issued} completed={st.completed} "
            f"events={st.events} mean_ns={st.mean_ns:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None, help="case names (default: all)")
    args = ap.parse_args()
    for name, (overrides, rate) in CASES.items():
        if args.only and name not in args.only:
            continue
        print(digest(name, overrides, rate), flush=True)


if __name__ == "__main__":
    main()
