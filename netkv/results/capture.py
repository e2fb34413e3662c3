"""capture=true: one folder of pcap files per load point, and what it holds.

``capture/<point key>/`` in the run directory holds the target's capture files
(netkv-switch or the simulator: ``switch-p<port>.pcap``, ``switch-cpu.pcap``;
Mininet also ``host-<name>.pcap``) and ``capture.json``: the limits, every
file with its packet count and the frames a bound left out, and the point's
wall time. The run's provenance.json gets the capture points and limits.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from netkv.config.schema import RunConfig
from netkv.results.atomic import write_text
from netkv.targets.base import PointResult, Target

FOLDER = "capture"
SUMMARY = "capture.json"


def limits(cfg: RunConfig) -> dict[str, Any]:
    lim = cfg.capture_limits
    return {"snaplen": lim.snaplen, "max_bytes": int(lim.max_mb * 1e6),
            "max_packets": lim.max_packets, "max_total_bytes": int(lim.max_total_mb * 1e6)}


def folder_bytes(run_path: Path) -> int:
    """What the run's capture folder holds (its pcaps and summaries)."""
    root = run_path / FOLDER
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) if root.is_dir() else 0


def run_point(target: Target, cfg: RunConfig, run_path: Path, key: str,
              offered_rps: float, seed: int) -> PointResult:
    """target.run_point, capturing into capture/<key>/ when cfg.capture."""
    if not cfg.capture:
        return target.run_point(offered_rps, seed)
    folder = run_path / FOLDER / key
    if folder.exists():
        shutil.rmtree(folder)  # an interrupted point's partial capture
    if folder_bytes(run_path) >= cfg.capture_limits.max_total_mb * 1e6:
        # the per-file bounds leave a run of many points unbounded (GBs that
        # trace then decodes for minutes): the point runs, uncaptured
        note_provenance(run_path, cfg, skipped=key)
        return target.run_point(offered_rps, seed)
    folder.mkdir(parents=True)
    target.capture_dir = folder
    target.last_capture = None
    t0 = time.perf_counter()
    try:
        result = target.run_point(offered_rps, seed)
    finally:
        target.capture_dir = None
    files = (target.last_capture or {}).get("files", {})
    summary = {
        "point": key,
        "target": cfg.target.name,
        "limits": limits(cfg),
        "wall_s": round(time.perf_counter() - t0, 6),
        "files": files,
        "packets": sum(f["packets"] for f in files.values()),
        "bytes": sum((folder / name).stat().st_size for name in files if (folder / name).exists()),
        "missed": sum(f["missed"] for f in files.values()),
        # the capture's cost: time the switch (or simulator) spent capturing
        # plus the CPU time of the hosts' tcpdumps
        "busy_s": round(sum(f.get("busy_s", 0.0) for f in files.values()), 6),
        "limits_reached": sorted(n for n, f in files.items() if f["missed"]),
    }
    write_text(folder / SUMMARY, json.dumps(summary, indent=2) + "\n")
    note_provenance(run_path, cfg)
    return result


def note_provenance(run_path: Path, cfg: RunConfig, skipped: str | None = None) -> None:
    """Add the capture points (the point folders written) and their files,
    the points not captured (``skipped``: the folder had reached max_total_mb) and the
    limits to the run's provenance.json."""
    path = run_path / "provenance.json"
    prov = json.loads(path.read_text()) if path.exists() else {}
    before = prov.get("capture", {}).get("not_captured", [])
    got = summaries(run_path)
    points = sorted(s["point"] for s in got)
    prov["capture"] = {"enabled": True, "folder": FOLDER, "limits": limits(cfg),
                       "points": points, "files": sorted({f for s in got for f in s["files"]}),
                       "not_captured": sorted({*before, *([skipped] if skipped else [])}
                                              - set(points))}
    write_text(path, json.dumps(prov, indent=2) + "\n")


def not_captured(run_path: Path) -> list[str]:
    """The points that ran uncaptured: the folder had reached max_total_mb."""
    path = run_path / "provenance.json"
    prov = json.loads(path.read_text()) if path.exists() else {}
    return list(prov.get("capture", {}).get("not_captured", []))


def summaries(run_path: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((run_path / FOLDER).glob(f"*/{SUMMARY}"))]


def summary_line(run_path: Path) -> str:
    """The run summary's capture line: what was written, what the bounds left
    out, and the wall time the captured points took."""
    got = summaries(run_path)
    frames = sum(s["packets"] for s in got)
    mb = sum(s["bytes"] for s in got) / 1e6
    wall = sum(s["wall_s"] for s in got)
    busy = sum(s.get("busy_s", 0.0) for s in got)
    line = (f"capture: {frames} frames, {mb:.1f} MB in {len(got)} point folder(s) "
            f"({run_path / FOLDER}); capturing cost {busy:.2f} s "
            f"({100 * busy / wall if wall else 0:.0f}% of the captured points' {wall:.2f} s wall)")
    reached = sorted({f"{s['point']}/{n}" for s in got for n in s["limits_reached"]})
    if reached:
        missed = sum(s["missed"] for s in got)
        line += f"; limits reached in {len(reached)} file(s), {missed} frames left out"
    skipped = not_captured(run_path)
    if skipped:
        line += (f"; {len(skipped)} later point(s) not captured (the folder had reached "
                 "capture_limits.max_total_mb)")
    return line + f"; read it with `python -m netkv trace {run_path}`"
