"""Atomic file writes: write a temp file in the same folder, fsync, rename.

A run killed at any instant (Ctrl-C, SIGKILL, power) leaves either the old
file or the new one, never a torn one. Temp files start with '.' and end in
'.tmp' so readers skip them and ``clean`` can remove leftovers.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import polars as pl


def write_with(path: Path, writer: Callable[[Path], None]) -> None:
    """Call ``writer(tmp_path)`` and move the result to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        writer(tmp)
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp's 0600 would hide results from the group
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def umask() -> int:
    """The process's umask, read without changing it (os.umask would set it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def write_text(path: Path, text: str) -> None:
    write_with(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_parquet(path: Path, frame: pl.DataFrame) -> None:
    write_with(path, lambda tmp: frame.write_parquet(tmp, compression="zstd"))


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
