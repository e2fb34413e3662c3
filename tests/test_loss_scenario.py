"""Loss as a first-class scenario (simulator).

With ``target.faults.loss=0.01`` and ``duplicate=0.01`` and nothing else
about retries, clients resend lost requests (same request id) after 2 x the
SLO bound, at most 3 times: completion stays >= 0.999 at the best point,
retries are a dataset column, a point meets a p90 SLO, and Pegasus' histories
stay linearizable. Without retries (``topology.retries=0``) completion falls
and the summary says why.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from netkv.config.compose import load
from netkv.lincheck import check_file
from netkv.retries import AUTO_RETRIES, resolve
from netkv.runner import execute, make_target

LOSSY = ["target.faults.loss=0.01", "target.faults.duplicate=0.01"]
SMALL = ["servers=4", "clients=2", "keys=20000", "duration=0.05", "slo.percentile=90"]


def run(tmp_path: Path, *overrides: str) -> tuple[pl.DataFrame, str]:
    cfg = load([*SMALL, *overrides, f"out={tmp_path / 'run'}"])
    console = Console(record=True, width=200)
    points = execute(cfg, tmp_path / "run", [], console)
    return points, console.export_text()


@pytest.mark.parametrize("protocol", ["hash", "pegasus", "netcache"])
def test_one_percent_loss_and_duplication_meet_a_p90_slo(tmp_path: Path, protocol: str) -> None:
    points, text = run(tmp_path, f"protocol={protocol}", *LOSSY)
    best = points.filter(pl.col("best"))
    assert best.height == 1, text
    assert best["completion"][0] >= 0.999
    measured = points.filter(pl.col("phase") != "reference")
    assert (measured["retries"] > 0).all()  # every point lost and resent requests
    assert "clients resend after" in text


def test_retries_off_lose_requests_and_the_summary_says_why(tmp_path: Path) -> None:
    points, text = run(tmp_path, "protocol=hash", *LOSSY, "topology.retries=0",
                       "slo.min_completion=0.999")
    assert (points["retries"] == 0).all()
    unloaded = points.filter(pl.col("phase") == "unloaded")
    assert unloaded["completion"][0] < 0.99
    assert "no load point met the SLO" in text and "completion" in text
    assert "client retries are off" in text


def test_auto_retries_follow_the_faults() -> None:
    clean = load(SMALL)
    assert resolve(clean, 50_000.0).topology.retries == 0
    assert resolve(clean, 50_000.0).topology.timeout_us == 0.0
    lossy = resolve(load([*SMALL, *LOSSY]), 50_000.0).topology
    assert lossy.retries == AUTO_RETRIES and lossy.timeout_us == pytest.approx(100.0)
    explicit = resolve(load([*SMALL, *LOSSY, "topology.timeout_us=0"]), 50_000.0).topology
    assert explicit.timeout_us == 0.0 and explicit.retries == 0


@pytest.mark.parametrize("amo", [None, "false"], ids=["amo-auto", "amo-off"])
def test_pegasus_histories_linearizable_with_loss_duplication_and_retries(tmp_path, amo) -> None:
    """amo unset (auto) turns at-most-once on with the retries: linearizable.
    Forced off, a resent write is applied twice and the checker catches it
    (why auto turns AMO on)."""
    cfg = load(["protocol=pegasus", "servers=4", "clients=4", "keys=200", "alpha=1.2",
                "write_ratio=0.3", "record_history=true", "duration=0.1",
                "protocol.replicated_keys=4", *LOSSY,
                *([f"protocol.amo={amo}"] if amo else [])])
    timeout = resolve(cfg, 60_000.0).topology  # a 60 us SLO, as the hash reference gives
    path = tmp_path / "history.jsonl"
    with make_target(cfg) as target:
        target.set_client_retries(timeout.timeout_us or 0.0, timeout.retries or 0)
        point = target.run_point(200_000, 11)
        assert target.write_history(path)
    assert point.retries > 0 and point.completion >= 0.999
    assert check_file(path, timeout=120).ok is (amo is None)
