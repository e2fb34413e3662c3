"""Read many run directories back as one polars DataFrame."""

from __future__ import annotations

from pathlib import Path

import polars as pl

TABLE_FILES = {"points": "points.parquet", "servers": "servers.parquet",
               "timeline": "timeline.parquet", "histograms": "histograms.parquet"}


def find_runs(path: Path) -> list[Path]:
    """Run directories at or below ``path`` (a run holds config.yaml)."""
    if (path / "config.yaml").is_file():
        return [path]
    return sorted(p.parent for p in path.rglob("config.yaml") if "points.d" not in p.parts)


def load(*paths: str | Path, table: str = "points") -> pl.DataFrame:
    """Concatenate ``table`` of every run found under ``paths``.

    Each row gains a ``run`` column (the run directory). Runs whose table is
    missing are skipped: a run writes its tables when it ends, so one still
    running or interrupted has its finished points only in ``points.d/``.
    """
    if table not in TABLE_FILES:
        raise ValueError(f"table {table!r} is not one of {', '.join(TABLE_FILES)}")
    frames: list[pl.DataFrame] = []
    for given in paths:
        root = Path(given)
        if not root.exists():
            raise FileNotFoundError(f"no such run directory: {root}")
        for run in find_runs(root):
            file = run / TABLE_FILES[table]
            if not file.is_file():
                continue
            frame = pl.read_parquet(file)
            if frame.is_empty():
                continue
            frames.append(frame.with_columns(run=pl.lit(str(run))))
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="diagonal_relaxed")
