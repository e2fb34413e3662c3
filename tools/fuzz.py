"""Run the libFuzzer harnesses (hostapps/fuzz/fuzz_<protocol>.c).

For each protocol: replay every regression input under tests/fuzz/<protocol>/
(each a finding, fixed), then fuzz for --seconds, seeded with the golden
vectors (tests/vectors/<format>.json) and the regression inputs. A finding
stops with its input saved under build/fuzz/findings/; once fixed, copy it to
tests/fuzz/<protocol>/ so it stays a regression test. Prints executions and
coverage per harness. Usage: python tools/fuzz.py [--seconds S] [--runs N] [protocol ...]
(--runs: stop after N executions instead, e.g. the 10^6 of docs/robustness.md).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "fuzz"
VECTORS = {"hash": "plain", "pegasus": "pegasus", "netcache": "netcache", "kvswitch": "kvswitch",
           "starcache": "starcache", "netmc": "netmc",
           "netlr": "netlr"}


def seed_inputs(protocol: str, corpus: Path) -> int:
    """One input per golden vector, and one per pair of them (a request and
    its reply), in the harness' framing: flags, sender, (u16 length, bytes)*."""
    corpus.mkdir(parents=True, exist_ok=True)
    packets = [bytes.fromhex(v["hex"]) for v in
               json.loads((ROOT / "tests" / "vectors" / f"{VECTORS[protocol]}.json").read_text())]
    frame = lambda p: len(p).to_bytes(2, "big") + p  # noqa: E731
    n = 0
    for i, p in enumerate(packets):
        for flags in (0, 1, 3):
            (corpus / f"vec{i}-f{flags}").write_bytes(bytes([flags, i]) + frame(p))
            n += 1
        q = packets[(i + 1) % len(packets)]
        (corpus / f"pair{i}").write_bytes(bytes([1, 4]) + frame(p) + frame(q) + frame(p))
        n += 1
    return n


def run(protocol: str, seconds: int, runs: int | None = None) -> bool:
    harness = BUILD / "hostapps" / f"fuzz_{protocol}"
    if not harness.exists():
        sys.exit(f"fuzz: {harness} is missing: run `just fuzz-build`")
    regressions = sorted(p for p in (ROOT / "tests" / "fuzz" / protocol).glob("*")
                         if not p.name.startswith("."))
    if regressions:
        r = subprocess.run([str(harness), *map(str, regressions)], capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr[-4000:])
            print(f"fuzz_{protocol}: a regression input under tests/fuzz/{protocol}/ fails again")
            return False
    corpus = BUILD / "corpus" / protocol
    seed_inputs(protocol, corpus)
    findings = BUILD / "findings"
    findings.mkdir(parents=True, exist_ok=True)
    limit = f"-runs={runs}" if runs else f"-max_total_time={seconds}"
    args = [str(harness), limit, "-print_final_stats=1",
            f"-artifact_prefix={findings}/{protocol}-", "-max_len=2048", "-timeout=10",
            str(corpus)]
    if regressions:
        args.append(str(ROOT / "tests" / "fuzz" / protocol))
    r = subprocess.run(args, capture_output=True, text=True)
    execs = re.search(r"stat::number_of_executed_units:\s*(\d+)", r.stderr)
    cov = re.findall(r"cov: (\d+) ft: (\d+)", r.stderr)
    edges = f"{cov[-1][0]} edges, {cov[-1][1]} features" if cov else "?"
    took = f"{runs:,} runs" if runs else f"{seconds} s"
    print(f"fuzz_{protocol}: {int(execs.group(1)) if execs else 0:,} executions ({took}), "
          f"coverage {edges}, {len(regressions)} regression input(s)")
    if r.returncode != 0:
        print(r.stderr[-6000:])
        found = sorted(findings.glob(f"{protocol}-*"))
        print(f"fuzz_{protocol}: FINDING {found[-1] if found else '?'}: fix it, then copy the "
              f"input to tests/fuzz/{protocol}/")
        return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=300)
    ap.add_argument("--runs", type=int, default=None,
                    help="stop each harness after this many executions instead of --seconds")
    ap.add_argument("protocols", nargs="*", default=list(VECTORS))
    args = ap.parse_args()
    ok = [run(p, args.seconds, args.runs) for p in args.protocols]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    raise SystemExit(main())
