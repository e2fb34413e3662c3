"""capture=true on the simulator, and `netkv trace` on what it wrote: every
completed request of the dataset is accounted for, limits bound the files
and are reported, and capture=false writes nothing."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from netkv.cli import main
from netkv.config.compose import load
from netkv.runner import execute_at
from netkv.trace import flows_frame, mark_stale, trace
from netkv.wire import pcap

COMMON = ["servers=4", "clients=2", "keys=2000", "duration=0.01", "alpha=1.2"]


def _run(tmp_path: Path, *overrides: str, rate: float = 100_000.0) -> tuple[Path, pl.DataFrame]:
    cfg = load([*COMMON, *overrides])
    out = tmp_path / "run"
    points = execute_at(cfg, out, ["test"], Console(file=io.StringIO()), rate, 1e9)
    return out, points


def _flows_by_point(out: Path) -> pl.DataFrame:
    df = flows_frame(trace(out).rows)
    return df.group_by("point").agg(pl.len().alias("flows"),
                                    pl.col("completed").sum().alias("done"),
                                    (pl.col("served_by") == "switch").sum().alias("by_switch"))


@pytest.mark.parametrize("proto", ["hash", "pegasus", "kvswitch"])
def test_trace_accounts_for_every_completed_request(tmp_path: Path, proto: str) -> None:
    out, points = _run(tmp_path, f"protocol={proto}", "write_ratio=0.2", "capture=true")
    got = points.join(_flows_by_point(out), on="point")
    assert got.height == points.height == 1
    row = got.row(0, named=True)
    assert row["completed"] > 500
    assert (row["flows"], row["done"]) == (row["issued"], row["completed"])
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["capture"]["limits"]["snaplen"] == 256
    assert "switch-cpu.pcap" in prov["capture"]["files"]
    assert prov["capture"]["points"] == points["point"].to_list()
    assert prov["capture"]["not_captured"] == []
    summary = json.loads(next(out.glob("capture/*/capture.json")).read_text())
    assert summary["missed"] == 0 and summary["limits_reached"] == []
    assert 0 < summary["busy_s"] < summary["wall_s"]


def test_switch_served_replies_are_told_apart(tmp_path: Path) -> None:
    out, points = _run(tmp_path, "protocol=netcache", "capture=true")
    row = points.join(_flows_by_point(out), on="point").row(0, named=True)
    assert row["switch_replies"] > 100
    assert row["by_switch"] == row["switch_replies"]
    assert (row["flows"], row["done"]) == (row["issued"], row["completed"])


def test_retries_drops_and_duplicates_are_flagged(tmp_path: Path) -> None:
    out, points = _run(tmp_path, "protocol=hash", "capture=true", "target.faults.loss=0.02",
                       "target.faults.duplicate=0.02", "topology.timeout_us=200",
                       "topology.retries=2")
    df = flows_frame(trace(out).rows)
    row = points.row(0, named=True)
    assert df["completed"].sum() == row["completed"]
    assert df.filter(pl.col("retried")).height > 0
    assert df.filter(pl.col("duplicated")).height > 0
    lost = df.filter(~pl.col("completed"))
    assert lost.height == row["issued"] - row["completed"]
    assert lost["dropped"].null_count() == 0


def test_limits_bound_the_files_and_are_reported(tmp_path: Path) -> None:
    out, _ = _run(tmp_path, "protocol=hash", "capture=true", "capture_limits.max_packets=50",
                  "capture_limits.snaplen=64")
    folder = next(out.glob("capture/*"))
    summary = json.loads((folder / "capture.json").read_text())
    assert summary["limits_reached"] and summary["missed"] > 0
    for f in folder.glob("*.pcap"):
        recs = list(pcap.read(f))
        assert len(recs) <= 50
        assert all(len(r.data) <= 64 < r.orig_len for r in recs if r.orig_len > 64)
    # frames cut by the snap length still decode (their headers) and flow
    assert trace(out).rows


def test_capture_off_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = _run(tmp_path, "protocol=hash")
    assert not (out / "capture").exists()
    assert "capture" not in json.loads((out / "provenance.json").read_text())
    # and trace says so in one line, exit 2, instead of an empty table and parquet
    assert main(["trace", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "capture=true" in err, err
    assert not (out / "trace.parquet").exists()
    # a capture/ folder with no pcap yet (a run stopped before its first point)
    (out / "capture" / "p0").mkdir(parents=True)
    assert main(["trace", str(out)]) == 2
    assert "capture=true" in capsys.readouterr().err
    assert not (out / "trace.parquet").exists()


def test_stale_reads_are_marked() -> None:
    """A read sent after a write of version 5 was acknowledged, returning 4."""
    base = {"point": "p", "key": "k", "completed": True}
    rows = [
        {**base, "write": True, "ver": 5, "t_send_ns": 0, "t_reply_ns": 10},
        {**base, "write": False, "ver": 4, "t_send_ns": 20, "t_reply_ns": 30},
        {**base, "write": False, "ver": 4, "t_send_ns": 5, "t_reply_ns": 30},  # concurrent
        {**base, "write": False, "ver": 5, "t_send_ns": 20, "t_reply_ns": 30},
    ]
    mark_stale(rows)
    assert [r.get("stale") for r in rows[1:]] == [True, False, False]


def test_trace_command_filters_and_writes_parquet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, points = _run(tmp_path, "protocol=pegasus", "write_ratio=0.3", "capture=true")
    dest = tmp_path / "flows.parquet"
    assert main(["trace", str(out), "--op", "WRITE", "--parquet", str(dest), "--show", "1"]) == 0
    df = pl.read_parquet(dest)
    assert df.height > 0 and set(df["op"]) == {"WRITE"}
    text = capsys.readouterr().out
    assert "WRITE" in text and "p" in text
    pcap_file = next(out.glob("capture/*/switch-p4.pcap"))
    assert main(["trace", str(pcap_file), "--servers", "4", "--client", "4",
                 "--parquet", str(dest)]) == 0
    df = pl.read_parquet(dest)
    assert df.height > 0 and set(df["client"]) == {4}
    assert main(["trace", str(tmp_path / "nothing")]) == 2


def test_a_trace_filter_that_can_match_nothing_is_refused(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A misspelled --op or a --point of no captured point gave "0 rows",
    exit 0, as if nothing had happened: one line naming what there is,
    exit 2, nothing written."""
    out, _ = _run(tmp_path, "protocol=pegasus", "write_ratio=0.3", "capture=true")
    assert main(["trace", str(out), "--op", "WRTE"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--op 'WRTE' is not an op (allowed: " in err and " WRITE," in err
    assert main(["trace", str(out), "--point", "r9.9e+99"]) == 2
    err = capsys.readouterr().err.strip()
    points = sorted(p.name for p in (out / "capture").iterdir() if p.is_dir())
    assert "\n" not in err and f"(its points: {', '.join(points)})" in err, err
    assert not (out / "trace.parquet").exists()
    assert main(["trace", str(out), "--op", "write", "--point", points[0][:6], "--show", "0"]) == 0


def test_a_run_stops_capturing_at_its_folder_budget(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Per-file bounds left a search of many points unbounded (1.75 GB for a
    0.01 s NetCache search): once capture/ holds max_total_mb, the later
    points run uncaptured, with their results, and the run says which. With
    the default budget every point of the same search is captured."""
    from netkv.results import capture
    from netkv.runner import execute

    def search(out: Path, *extra: str) -> pl.DataFrame:
        cfg = load([*COMMON, "capture=true", "slo.max_points=4", *extra])
        return execute(cfg, out, ["test"], Console(file=io.StringIO()))

    full = search(tmp_path / "full")
    prov = json.loads((tmp_path / "full" / "provenance.json").read_text())
    assert full.height >= 3 and prov["capture"]["points"] == sorted(full["point"].to_list())
    assert prov["capture"]["not_captured"] == []
    assert "not captured" not in capture.summary_line(tmp_path / "full")

    # a budget smaller than any point's capture: the first point's only
    out = tmp_path / "capped"
    capped = search(out, "capture_limits.max_total_mb=0.000001")
    assert capped["point"].to_list() == full["point"].to_list()   # every point ran
    for col in ("achieved_rps", "p99_ns", "completed"):   # and measured the same
        assert capped[col].to_list() == full[col].to_list(), col
    prov = json.loads((out / "provenance.json").read_text())
    assert len(prov["capture"]["points"]) == 1
    assert prov["capture"]["not_captured"] == sorted(set(capped["point"]) -
                                                    set(prov["capture"]["points"]))
    assert len([p for p in (out / "capture").iterdir() if p.is_dir()]) == 1
    assert f"{capped.height - 1} later point(s) not captured" in capture.summary_line(out)
    late = prov["capture"]["not_captured"][0]
    assert main(["trace", str(out), "--point", late]) == 2   # says why it has no flows
    assert f"{late} ran without capture" in capsys.readouterr().err


def test_points_left_uncaptured_are_named_after_a_resume(tmp_path: Path) -> None:
    """A resumed run rewrote provenance.json without its capture record, so
    the points run uncaptured before the interruption (kept, never rerun)
    were no longer named."""
    from netkv.results import capture
    from netkv.runner import execute

    out = tmp_path / "run"
    cfg = load([*COMMON, "capture=true", "slo.max_points=4",
                "capture_limits.max_total_mb=0.000001"])
    points = execute(cfg, out, ["test"], Console(file=io.StringIO()))
    before = json.loads((out / "provenance.json").read_text())["capture"]["not_captured"]
    assert len(before) == points.height - 1 >= 2
    # the same command again: every point kept, the provenance written anew
    again = execute(cfg, out, ["test"], Console(file=io.StringIO()))
    assert again["point"].to_list() == points["point"].to_list()
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["resumed_points"] == points.height
    assert capture.not_captured(out) == before
