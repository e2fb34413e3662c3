"""``reproduce NAME``: load the experiment and hand it to its kind's runner
(a sweep: netkv.experiments.reproduce; a timeline: netkv.experiments.timeline)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from netkv.experiments.checks import CheckResult
from netkv.experiments.pool import Pool
from netkv.experiments.reproduce import reproduce_sweep
from netkv.experiments.spec import load_experiment
from netkv.experiments.timeline import reproduce_timeline


def reproduce(name: str, extra: list[str], out: Path | None, jobs: int | Pool,
              console: Console) -> list[CheckResult]:
    """Run, plot and check experiment ``name``; the checks' results
    (``checks.exit_code`` turns them into the command's exit code)."""
    exp = load_experiment(name)
    if exp.kind == "timeline":
        return reproduce_timeline(exp, name, extra, out, jobs, console)
    return reproduce_sweep(exp, name, extra, out, jobs, console)
