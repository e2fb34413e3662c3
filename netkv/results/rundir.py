"""One run directory: ``config.yaml``, ``provenance.json`` and the tables.

Each measured load point is first stored as its own fragment folder under
``points.d/<key>/`` (one parquet per table, ``point.parquet`` written last as
the commit mark). When the run ends, the run-level tables
(``points.parquet``, ``servers.parquet``, ``timeline.parquet``,
``histograms.parquet``) are built from the fragments, atomically. A run
killed at any instant therefore keeps every finished point (as its
fragment), and a re-run with the same directory finds those points and does
not measure them again.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import yaml

from netkv.loadstats import balance_columns
from netkv.results.atomic import write_parquet, write_text
from netkv.results.noise import COLUMNS as NOISE_COLUMNS
from netkv.targets.base import BY_SOURCE, PointResult

TABLES = ("points", "servers", "timeline", "histograms")
FRAGMENTS = "points.d"


class RunDirConflict(ValueError):
    """The directory already holds a run of a different config."""


# the remedy a run's refusal names; reproduce names its own (--out)
OTHER_OUT = "pass another out=<dir> or remove it"


# what a folder holds, by the file each kind writes there
MARKERS = {"run": "config.yaml", "sweep": "multirun.yaml", "experiment": "experiment.yaml"}


def check_holds(path: Path, kind: str) -> None:
    """Refuse a folder that holds another kind of result (writes nothing):
    load and report read a folder with a run's config.yaml as that run
    alone, so a sweep written into a run's folder, or a run into a sweep's,
    hid the sweep's jobs."""
    def a(what: str) -> str:
        return f"an {what}" if what == "experiment" else f"a {what}"

    for other, marker in MARKERS.items():
        if other != kind and (path / marker).is_file():
            raise RunDirConflict(f"{path} holds {a(other)} ({marker}), not {a(kind)}; "
                                 f"{OTHER_OUT}")


def _leaves(tree: Any, prefix: str = "") -> dict[str, Any]:
    """A config as ``group.key`` -> value (an empty mapping is a value)."""
    if not isinstance(tree, dict) or not tree:
        return {prefix: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(_leaves(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _leaf_text(leaves: dict[str, Any], key: str) -> str:
    # JSON tells 1 from 1.0 and a missing key from a null one
    # default=str: a hand-edited config.yaml may hold a date (2026-01-01)
    return json.dumps(leaves[key], sort_keys=True, default=str) if key in leaves else "(none)"


def config_differences(held: str, new: str, shown: int = 3) -> str:
    """What differs between two config.yaml texts, as ``key: held -> new``
    (the first ``shown`` keys, then how many more); "" when nothing does.
    ``out`` is where the run lives, not what it measured: recorded as typed
    (``runs/...`` when netkv chose it), while the interrupted run's line
    names it as an absolute path, and both name this one directory."""
    try:
        was, now = _leaves(yaml.safe_load(held)), _leaves(yaml.safe_load(new))
    except yaml.YAMLError:
        return "its config.yaml does not parse"
    keys = [k for k in dict.fromkeys([*was, *now])
            if k != "out" and _leaf_text(was, k) != _leaf_text(now, k)]
    parts = [f"{k}: {_leaf_text(was, k)} -> {_leaf_text(now, k)}" for k in keys[:shown]]
    more = f", and {len(keys) - shown} more" if len(keys) > shown else ""
    return ", ".join(parts) + more


def saturated(result: PointResult, requests: np.ndarray) -> tuple[float, str]:
    """The fluid saturated throughput and what saturates first: the offered
    load at which the busiest server (by the requests it served at this
    point's mix) reaches its capacity, min_j cap_j / (L_j / offered) (for
    requests that all reach a server, M·cap·L̄ / max L_j), or earlier one of
    the target's other finite rates (``resource_bounds_rps``: clients,
    switch, links). (NaN, "") where the target knows no capacities."""
    bounds = dict(result.resource_bounds_rps)
    cap = result.server_capacity_rps
    if cap is not None and len(cap) == len(requests) and result.issued > 0:
        per_req = requests / result.issued          # server j's requests per client request
        busy = per_req > 0
        if busy.any():
            bounds["servers"] = float(np.min(np.asarray(cap, dtype=np.float64)[busy]
                                             / per_req[busy]))
    if not bounds:
        return float("nan"), ""
    which = min(bounds, key=lambda k: bounds[k])
    return bounds[which], which


def saturated_rps(result: PointResult, requests: np.ndarray) -> float:
    return saturated(result, requests)[0]


def point_key(offered_rps: float, seed: int) -> str:
    return f"r{offered_rps:.9e}-s{seed}"


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = path

    # --- set-up --------------------------------------------------------------

    def check(self, config_yaml: str) -> None:
        """Refuse a directory that holds a run of another config, or a sweep
        or an experiment (writes nothing)."""
        check_holds(self.path, "run")
        config_file = self.path / "config.yaml"
        if not config_file.is_file():
            return
        differ = config_differences(config_file.read_text(encoding="utf-8"), config_yaml)
        if differ:
            raise RunDirConflict(
                f"run directory {self.path} holds a run of a different config ({differ}); "
                f"{OTHER_OUT}"
            )

    def prepare(self, config_yaml: str, provenance: dict[str, Any]) -> int:
        """Create or reopen the directory; return how many points it holds."""
        self.check(config_yaml)
        self.path.mkdir(parents=True, exist_ok=True)
        for stale in self.path.rglob(".*.tmp"):  # temp files of a killed writer
            stale.unlink(missing_ok=True)
        config_file = self.path / "config.yaml"
        held = len(self.cached_keys())
        if held:
            self._same_build(held, provenance.get("build") or {})
        write_text(config_file, config_yaml)
        provenance = dict(provenance, resumed_points=held)
        # what capture recorded of the points kept (capture.not_captured:
        # points run uncaptured once the budget was reached) outlives a resume
        old = self.path / "provenance.json"
        if held and old.is_file():
            try:
                kept = json.loads(old.read_text(encoding="utf-8")).get("capture")
            except (OSError, ValueError):
                kept = None
            if kept is not None:
                provenance["capture"] = kept
        write_text(self.path / "provenance.json", json.dumps(provenance, indent=2) + "\n")
        return held

    def add_provenance(self, extra: dict[str, Any]) -> None:
        """Merge what is known only once the target is up (its hosts)."""
        if not extra:
            return
        path = self.path / "provenance.json"
        prov = json.loads(path.read_text(encoding="utf-8"))
        write_text(path, json.dumps({**prov, **extra}, indent=2) + "\n")

    def _same_build(self, held: int, build: dict[str, Any]) -> None:
        """Refuse to add points to ones another build measured."""
        try:
            old = json.loads((self.path / "provenance.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = {}
        was = old.get("build") or {}
        if was.get("id") == build.get("id"):
            return
        parts = [k for k in ("native", "python") if was.get(k) != build.get(k)]
        what = " and ".join({"native": "the native library/programs",
                             "python": "the netkv Python code"}[k] for k in parts)
        raise RunDirConflict(
            f"run directory {self.path} holds {held} point(s) measured by another build "
            f"({what} differ: build {was.get('id', 'unknown')}, now {build.get('id')}); "
            f"{OTHER_OUT}"
        )

    def note(self, **fields: Any) -> None:
        """Add ``fields`` to provenance.json (e.g. the load average after the run)."""
        path = self.path / "provenance.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        write_text(path, json.dumps({**data, **fields}, indent=2) + "\n")

    def cached_keys(self) -> set[str]:
        folder = self.path / FRAGMENTS
        if not folder.is_dir():
            return set()
        return {d.name for d in folder.iterdir() if (d / "point.parquet").is_file()}

    # --- points --------------------------------------------------------------

    def load_point(self, key: str) -> PointResult | None:
        folder = self.path / FRAGMENTS / key
        if not (folder / "point.parquet").is_file():
            return None
        row = pl.read_parquet(folder / "point.parquet").row(0, named=True)
        servers = pl.read_parquet(folder / "servers.parquet")
        timeline = pl.read_parquet(folder / "timeline.parquet")
        hist = pl.read_parquet(folder / "histograms.parquet")
        return PointResult(
            offered_rps=row["offered_rps"],
            duration_s=row["duration_s"],
            issued=row["issued"],
            completed=row["completed"],
            completed_late=row.get("completed_late") or 0,  # fragments before the column
            dropped=row["dropped"],
            packets_dropped=row.get("packets_dropped"),
            timeouts=row["timeouts"],
            latency_ns={k: row[f"{k}_ns"] for k in ("mean", "p50", "p90", "p99", "p999")},
            server_requests=servers["requests"].to_numpy().astype(np.int64),
            hist_lower_ns=hist["lower_ns"].to_numpy(),
            hist_counts=hist["count"].to_numpy(),
            timeline={c: timeline[c].to_numpy() for c in timeline.columns if c != "point"},
            switch_replies=row["switch_replies"],
            latency_by_source={k: row[f"{k}_ns"] for k in BY_SOURCE
                               if row.get(f"{k}_ns") is not None},
            retries=row.get("retries") or 0,  # fragments written before the column: 0
            refused={k.removeprefix("refused."): int(v) for k, v in row.items()
                     if k.startswith("refused.") and v is not None},
            forged_replies=row.get("forged_replies") or 0,
            hostile_sent=row.get("hostile_sent") or 0,
            client_packets=row.get("client_packets") or 0,
            request_keys=row.get("request_keys") or 0,
            noise={k: row[k] for k in NOISE_COLUMNS if row.get(k) is not None},
        )

    def store_point(
        self, key: str, phase: str, result: PointResult, columns: dict[str, Any]
    ) -> None:
        folder = self.path / FRAGMENTS / key
        if folder.exists() and not (folder / "point.parquet").exists():
            shutil.rmtree(folder)  # a fragment interrupted before its commit mark
        requests = np.asarray(result.server_requests, dtype=np.int64)
        total = max(int(requests.sum()), 1)
        servers = pl.DataFrame(
            {
                "point": [key] * len(requests),
                "server": np.arange(len(requests), dtype=np.int32),
                "requests": requests,
                "share": requests / total,
            }
        )
        timeline = pl.DataFrame({"point": key, **{k: v for k, v in result.timeline.items()}})
        if timeline.is_empty():
            timeline = pl.DataFrame({"point": pl.Series([], dtype=pl.String)})
        counts = np.asarray(result.hist_counts, dtype=np.int64)
        filled = counts > 0  # an empty bucket says nothing (quantiles skip it too)
        hist = pl.DataFrame(
            {
                "point": [key] * int(filled.sum()),
                "lower_ns": np.asarray(result.hist_lower_ns, dtype=np.float64)[filled],
                "count": counts[filled],
            }
        )
        sat = saturated(result, requests)
        row = {
            "point": key,
            "phase": phase,
            "offered_rps": result.offered_rps,
            "achieved_rps": result.achieved_rps,
            "duration_s": result.duration_s,
            "issued": result.issued,
            "completed": result.completed,
            "completed_late": result.completed_late,
            "dropped": result.dropped,
            "packets_dropped": result.packets_dropped,
            "timeouts": result.timeouts,
            "retries": result.retries,
            "client_packets": result.client_packets,
            "request_keys": result.request_keys,
            "completion": result.completion,
            "switch_replies": result.switch_replies,
            "refused_switch": sum(v for k, v in result.refused.items() if k.startswith("switch.")),
            "refused_servers": sum(v for k, v in result.refused.items()
                                   if k.startswith("servers.")),
            "forged_replies": result.forged_replies,
            "hostile_sent": result.hostile_sent,
            **{f"refused.{k}": int(v) for k, v in result.refused.items()},
            **{f"{k}_ns": float(result.latency_ns.get(k, float("nan")))
               for k in ("mean", "p50", "p90", "p99", "p999")},
            **{f"{k}_ns": float(result.latency_by_source.get(k, float("nan")))
               for k in BY_SOURCE},
            **balance_columns(requests),
            "sat_tput_rps": sat[0],
            "sat_bottleneck": sat[1],
            **result.controller_metrics,
            **{k: result.noise[k] for k in NOISE_COLUMNS if k in result.noise},
            **columns,
        }
        write_parquet(folder / "servers.parquet", servers)
        write_parquet(folder / "timeline.parquet", timeline)
        write_parquet(folder / "histograms.parquet", hist)
        point = pl.DataFrame([row]).with_columns(pl.col("packets_dropped").cast(pl.Int64))
        write_parquet(folder / "point.parquet", point)  # commit mark (null stays i64)

    def finalize_tables(
        self, slo_ns: float | None, slo_met: dict[str, bool], best_key: str | None,
        order: list[str], extra: dict[str, dict[str, Any]] | None = None,
        slo_ns_of: dict[str, float] | None = None,
    ) -> pl.DataFrame:
        """Rebuild the run-level tables from the fragments, in measuring order;
        ``extra``: more columns by point key (repeats: index, load verdict);
        ``slo_ns_of``: a point's own bound where it is not ``slo_ns``
        (independent searches, each under its own)."""
        folder = self.path / FRAGMENTS
        keys = [k for k in order if (folder / k / "point.parquet").is_file()]
        frames: dict[str, list[pl.DataFrame]] = {t: [] for t in TABLES}
        for key in keys:
            frames["points"].append(pl.read_parquet(folder / key / "point.parquet"))
            for table in TABLES[1:]:
                frames[table].append(pl.read_parquet(folder / key / f"{table}.parquet"))
        points = pl.concat(frames["points"], how="diagonal_relaxed") if keys else pl.DataFrame()
        if keys:
            default = slo_ns if slo_ns is not None else float("nan")
            slo_col = (pl.col("point").replace_strict(slo_ns_of, default=default,
                                                     return_dtype=pl.Float64)
                       if slo_ns_of else pl.lit(default, dtype=pl.Float64))
            points = points.with_columns(
                slo_ns=slo_col,
                slo_met=pl.col("point").replace_strict(slo_met, default=None,
                                                       return_dtype=pl.Boolean),
                best=pl.col("point") == (best_key or ""),
            )
            names = sorted({c for row in (extra or {}).values() for c in row})
            points = points.with_columns(**{
                c: pl.col("point").replace_strict(
                    {k: row.get(c) for k, row in (extra or {}).items()}, default=None)
                for c in names})
        write_parquet(self.path / "points.parquet", points)
        for table in TABLES[1:]:
            parts = [f for f in frames[table] if not f.is_empty()]
            frame = pl.concat(parts, how="diagonal_relaxed") if parts else pl.DataFrame()
            write_parquet(self.path / f"{table}.parquet", frame)
        return points
