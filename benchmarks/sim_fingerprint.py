"""Fingerprint of simulator results, to prove a speed change changes nothing.

Runs hash, kvswitch (read-only and 5% writes), pegasus, netlr, starcache and
netmc on the simulator at fixed seeds (a few seconds each, controllers'
periods included) and prints, per run, a SHA-256 of the full results (stats,
histogram, per-server counts, switch stats, timeline) plus a few readable
numbers. Compare the output before and after a change: it must be identical.

Usage: python benchmarks/sim_fingerprint.py [--requests N]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
from typing import Any

import numpy as np

from bench_sim import ProtocolRun  # this script's folder is on sys.path

RUNS: list[tuple[str, list[str]]] = [
    ("hash", ["servers=16", "keys=100000", "alpha=0.99"]),
    ("kvswitch", ["servers=32", "keys=1000000", "alpha=0.99"]),
    ("kvswitch", ["servers=32", "keys=1000000", "alpha=0.99", "write_ratio=0.05"]),
    ("pegasus", ["alpha=0.99"]),
    # read-only single-key runs, as before the protocols' settings
    # (conf/setting/): digests compare across that change
    ("netlr", ["servers=8", "alpha=0.99", "write_ratio=0"]),
    ("starcache", ["servers=8", "alpha=0.99"]),
    ("netmc", ["servers=8", "alpha=0.99", "write_ratio=0", "workload.multiget.mean=1",
               "slo.reference=hash"]),
]


def _feed(h: Any, obj: Any) -> None:
    if isinstance(obj, np.ndarray):
        h.update(str(obj.dtype).encode() + str(obj.shape).encode())
        h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, dict):
        for k in sorted(obj):
            h.update(repr(k).encode())
            _feed(h, obj[k])
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _feed(h, v)
    else:
        h.update(repr(obj).encode())


def fingerprint(name: str, overrides: list[str], requests: float, seed: int) -> str:
    with ProtocolRun(name, overrides, requests, timeline_ms=1.0) as pr:
        with pr.engine(seed) as (eng, run, ctl):
            st = run()
            h = hashlib.sha256()
            parts: dict[str, Any] = {
                "stats": dataclasses.asdict(st),
                "histogram": eng.histogram(),
                "server_counts": eng.server_counts(),
                "switch_stats": eng.switch_stats(),
                "timeline": eng.timeline(),
            }
            if ctl is not None and hasattr(ctl, "metrics"):
                m = ctl.metrics
                parts["controller"] = m() if callable(m) else m
            _feed(h, parts)
            counts = eng.server_counts()
    return (f"{name:10} {' '.join(overrides):55} issued={st.issued} completed={st.completed} "
            f"events={st.events} p99={st.p99_ns} max_srv={int(counts.max())} "
            f"sha={h.hexdigest()[:16]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=float, default=3e5)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    for name, overrides in RUNS:
        print(fingerprint(name, overrides, args.requests, args.seed), flush=True)


if __name__ == "__main__":
    main()
