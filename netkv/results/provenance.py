"""Provenance of a run: enough to say exactly what produced a dataset."""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from netkv import __version__

_PACKAGES = ("netkv", "hydra-core", "omegaconf", "pydantic", "numpy", "polars", "pyarrow", "cffi")


def _git(repo: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def git_state(repo: Path) -> dict[str, Any]:
    commit = _git(repo, "rev-parse", "HEAD")
    status = _git(repo, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    versions["netkv"] = versions["netkv"] or __version__
    return versions


def collect(*, seed: int, target: str, protocol: str, argv: list[str]) -> dict[str, Any]:
    repo = Path(__file__).resolve().parents[2]
    uname = platform.uname()
    return {
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git": git_state(repo),
        "versions": package_versions(),
        "python": sys.version.split()[0],
        "host": socket.gethostname(),
        "kernel": f"{uname.system} {uname.release}",
        "machine": uname.machine,
        "seed": seed,
        "target": target,
        "protocol": protocol,
        "command": argv,
    }
