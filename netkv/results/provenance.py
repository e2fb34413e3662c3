"""Provenance of a run: enough to say exactly what produced a dataset."""

from __future__ import annotations

import hashlib
import platform
import socket
import subprocess
import sys
from datetime import datetime, timezone
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from netkv import __version__
from netkv.native import native_dir

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


def _digest(files: list[Path], root: Path) -> str:
    h = hashlib.blake2b(digest_size=12)
    for path in sorted(files):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(hashlib.blake2b(path.read_bytes(), digest_size=16).digest())
    return h.hexdigest()


@cache
def build() -> dict[str, str]:
    """Content hashes of what measures a point: ``native`` (libnetkv.so and
    every host program) and ``python`` (the netkv package's source), and
    ``id`` of both. Two points measured under different ids may differ for
    reasons no config says, so a run directory never mixes them
    (RunDir.prepare)."""
    nat = native_dir()
    native = _digest([p for p in nat.rglob("*") if p.is_file() and not p.is_symlink()], nat)
    pkg = Path(__file__).resolve().parents[1]
    python = _digest([p for p in pkg.rglob("*.py") if "_native" not in p.parts], pkg)
    ident = hashlib.blake2b(f"{native}:{python}".encode(), digest_size=8).hexdigest()
    return {"id": ident, "native": native, "python": python}


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
        "build": build(),
    }
