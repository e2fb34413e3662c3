"""Killing a sweep mid-way and re-running it loses nothing and recomputes nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from netkv.results import load

SWEEP = ["-m", "alpha=0.9,1.2", "servers=4", "keys=10000", "duration=1.0",
         "hydra.launcher.n_jobs=2"]


def run(out: Path, *, kill_after_points: int | None = None) -> subprocess.CompletedProcess | None:
    cmd = [sys.executable, "-m", "netkv", "run", *SWEEP, f"out={out}"]
    if kill_after_points is None:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if len(fragments(out)) >= kill_after_points:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep finished before it could be killed"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return None


def fragments(out: Path) -> dict[str, int]:
    """Committed point fragments -> inode of their commit mark."""
    return {str(p.parent.relative_to(out)): p.stat().st_ino
            for p in out.glob("*/points.d/*/point.parquet")}


@pytest.mark.slow
def test_killed_sweep_resumes_without_recomputing(tmp_path):
    out = tmp_path / "sweep"
    run(out, kill_after_points=3)
    before = fragments(out)
    assert len(before) >= 3
    # No torn files: every table that exists parses (a write cut short by
    # SIGKILL can only leave a hidden temp file, which readers never open).
    for parquet in out.rglob("*.parquet"):
        pl.read_parquet(parquet)
    assert all(p.name.startswith(".") for p in out.rglob("*.tmp"))

    run(out)
    after = fragments(out)
    # Nothing lost, nothing re-measured (atomic rewrites would change the inode).
    for key, inode in before.items():
        assert after.get(key) == inode, key
    assert len(after) > len(before)
    assert not list(out.rglob("*.tmp"))  # the resumed run removed the leftovers

    # And the result equals an uninterrupted sweep's.
    fresh = tmp_path / "fresh"
    run(fresh)
    cols = ["alpha", "point", "offered_rps", "completed", "p99_ns", "slo_met", "best"]
    resumed = load(out).select(cols).sort(["alpha", "point"])
    clean = load(fresh).select(cols).sort(["alpha", "point"])
    assert resumed.equals(clean)
    # the SLO reference rows say what they ran: uniform (alpha 0)
    assert set(resumed["alpha"].to_list()) == {0.0, 0.9, 1.2}
    measured = load(out).filter(pl.col("phase") != "reference")
    assert set(measured["alpha"].to_list()) == {0.9, 1.2}


def test_record_history_is_kept_with_each_point(tmp_path):
    out = tmp_path / "hist"
    subprocess.run([sys.executable, "-m", "netkv", "run", "protocol=pegasus", "servers=4",
                    "keys=1000", "duration=0.02", "write_ratio=0.2", "record_history=true",
                    f"out={out}"], capture_output=True, text=True, timeout=300, check=True)
    points = list(out.glob("points.d/*/point.parquet"))
    histories = list(out.glob("points.d/*/history.jsonl"))
    assert points and len(histories) == len(points) - 1  # all but the hash SLO reference
    from netkv.lincheck import check_file

    assert check_file(histories[0]).ok


def test_resume_refuses_points_another_build_measured(tmp_path, monkeypatch):
    """Cached points were keyed on config.yaml alone, and provenance was
    rewritten with the new commit: a rerun after a code change silently
    mixed old and new measurements."""
    from io import StringIO

    from rich.console import Console

    from netkv.config.compose import load as compose
    from netkv.results import provenance
    from netkv.results.rundir import RunDirConflict
    from netkv.runner import execute

    cfg = compose(["protocol=hash", "servers=2", "keys=1000", "duration=0.02",
                   "slo.max_points=3", f"out={tmp_path}"])
    quiet = Console(file=StringIO())
    execute(cfg, tmp_path, ["t"], quiet)
    real = provenance.build()
    marks = {p: p.stat().st_ino for p in tmp_path.glob("points.d/*/point.parquet")}
    assert marks

    other = {**real, "native": "0" * 24, "id": "feedfacefeedface"}
    monkeypatch.setattr(provenance, "build", lambda: other)
    with pytest.raises(RunDirConflict) as err:
        execute(cfg, tmp_path, ["t"], quiet)
    message = str(err.value)
    assert "\n" not in message
    assert f"measured by another build (the native library/programs differ: build " \
           f"{real['id']}, now feedfacefeedface)" in message
    assert {p: p.stat().st_ino for p in tmp_path.glob("points.d/*/point.parquet")} == marks

    monkeypatch.setattr(provenance, "build", lambda: real)   # the same build resumes
    execute(cfg, tmp_path, ["t"], quiet)
    assert {p: p.stat().st_ino for p in tmp_path.glob("points.d/*/point.parquet")} == marks


def test_cli_refuses_a_mixed_build_in_one_line(tmp_path):
    out = tmp_path / "run"
    args = [sys.executable, "-m", "netkv", "run", "protocol=hash", "servers=2", "keys=1000",
            "duration=0.02", "slo.max_points=3", f"out={out}"]
    subprocess.run(args, capture_output=True, text=True, timeout=300, check=True)
    prov = out / "provenance.json"
    import json

    data = json.loads(prov.read_text())
    data["build"] = {**data["build"], "python": "x", "id": "0123456789abcdef"}
    prov.write_text(json.dumps(data))
    got = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert got.returncode == 2
    assert got.stderr.count("\n") == 1 and "another build (the netkv Python code differ" \
        in got.stderr, got.stderr
