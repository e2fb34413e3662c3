"""Benchmark the command line's start-up (``just bench-cli``).

Runs ``python -m netkv --help`` and ``python -m netkv list`` 10 times each
(after one warm-up) and prints the mean, min and max wall time against the
goal of 0.5 s (issue #18: lazy imports, nothing but argparse for --help).
The machine's load average is printed too: on a busy shared machine the
times are higher than on an idle one.

Usage: python benchmarks/bench_cli.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

GOAL_S = 0.5


def timed(args: list[str], runs: int) -> list[float]:
    cmd = [sys.executable, "-m", "netkv", *args]
    subprocess.run(cmd, capture_output=True, check=True)  # warm the file cache
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for what in (["--help"], ["list"]):
        times = timed(what, args.runs)
        mean = statistics.mean(times)
        verdict = "ok" if mean <= GOAL_S else "over the goal"
        print(f"python -m netkv {' '.join(what):<7} mean {mean:.3f} s  min {min(times):.3f} s  "
              f"max {max(times):.3f} s  ({args.runs} runs; goal {GOAL_S} s: {verdict})")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
