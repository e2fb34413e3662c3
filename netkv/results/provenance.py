"""Provenance of a run: enough to say exactly what produced a dataset.

``build()`` names the binary: a content hash of libnetkv.so and of every
host program (each, and all together), the build type and compiler libnetkv
reports (``nk_build_info``), and ``check_fresh`` refuses a run whose
binaries are older than their C sources. ``hardware()`` says what it ran on:
CPU model, cores, load average (before the run here, after it via
``RunDir.note``).
"""

from __future__ import annotations

import hashlib
import os
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
from netkv.config.compose import ConfigError
from netkv.native import LIBRARY_NAME, library_path, native_dir

_PACKAGES = ("netkv", "hydra-core", "omegaconf", "pydantic", "numpy", "polars", "pyarrow", "cffi")
REPO = Path(__file__).resolve().parents[2]
# what the native build is made of (hostapps/tests and fuzz are not installed)
SOURCES = ("CMakeLists.txt", "hostapps/CMakeLists.txt", "hostapps/src", "hostapps/include",
           "hostapps/apps", "hostapps/stacks")
SOURCE_SUFFIXES = (".c", ".h", ".txt")


class StaleBuild(ConfigError):
    """The C library or a program is older than its sources (exit 2)."""


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


def _hash(path: Path) -> str:
    return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()


def _digest(files: dict[str, str]) -> str:
    h = hashlib.blake2b(digest_size=12)
    for name in sorted(files):
        h.update(name.encode() + b"\0" + bytes.fromhex(files[name]))
    return h.hexdigest()


def native_files(nat: Path) -> list[Path]:
    """libnetkv.so and every host program of a native folder: an install
    (``bin/<program>``) or a CMake build folder (programs beside the
    library; its object files are not what runs)."""
    found = [nat / LIBRARY_NAME] if (nat / LIBRARY_NAME).is_file() else []
    for folder in (nat / "bin", nat):
        if folder.is_dir():
            found += [p for p in folder.iterdir() if p.is_file() and not p.is_symlink()
                      and p.suffix == "" and os.access(p, os.X_OK)]
    return sorted(found)


def build_info(lib: Path) -> dict[str, str]:
    """What libnetkv says built it: ``type`` (CMAKE_BUILD_TYPE), ``compiler``,
    ``sanitize`` (nk_build_info, compiled into the library)."""
    import cffi

    ffi = cffi.FFI()
    ffi.cdef("const char *nk_build_info(void);")
    try:
        text = ffi.string(ffi.dlopen(str(lib)).nk_build_info()).decode()
    except (OSError, AttributeError):  # a library from before nk_build_info
        return {"type": "unknown", "compiler": "unknown"}
    return dict(part.partition("=")[::2] for part in text.split(";") if part)


@cache
def build() -> dict[str, Any]:
    """Content hashes of what measures a point: ``files`` (each of
    libnetkv.so and the host programs), ``native`` (all of them), ``python``
    (the netkv package's source) and ``id`` of both; the build ``type`` and
    ``compiler``. Two points measured under different ids may differ for
    reasons no config says, so a run directory never mixes them
    (RunDir.prepare)."""
    nat = native_dir()
    files = {str(p.relative_to(nat)): _hash(p) for p in native_files(nat)}
    native = _digest(files)
    pkg = Path(__file__).resolve().parents[1]
    python = _digest({str(p.relative_to(pkg)): _hash(p)
                      for p in pkg.rglob("*.py") if "_native" not in p.parts})
    ident = hashlib.blake2b(f"{native}:{python}".encode(), digest_size=8).hexdigest()
    return {"id": ident, "native": native, "python": python, "native_dir": str(nat),
            "files": files, **build_info(library_path())}


def source_files(root: Path) -> list[Path]:
    out: list[Path] = []
    for name in SOURCES:
        path = root / name
        if path.is_file():
            out.append(path)
        elif path.is_dir():
            out += [p for p in path.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES]
    return out


def stale(nat: Path, root: Path) -> tuple[Path, Path] | None:
    """(a source, a binary built before that source last changed), or None
    when every binary in ``nat`` is newer than every C source under ``root``."""
    binaries = native_files(nat)
    sources = source_files(root)
    if not binaries or not sources:
        return None
    oldest = min(binaries, key=lambda p: p.stat().st_mtime_ns)
    newest = max(sources, key=lambda p: p.stat().st_mtime_ns)
    if newest.stat().st_mtime_ns > oldest.stat().st_mtime_ns:
        return newest, oldest
    return None


def check_fresh(root: Path | None = None) -> None:
    """Refuse, in one line, to run binaries older than their C sources (a C
    edit not rebuilt would run the old code silently). The sources: this
    netkv's repository, or ``NETKV_SOURCE_DIR`` (the tree a NETKV_NATIVE_DIR
    build was made from); an installed netkv without them has nothing to
    compare."""
    root = root or Path(os.environ.get("NETKV_SOURCE_DIR") or REPO)
    if not (root / "hostapps").is_dir():
        return
    nat = native_dir()
    found = stale(nat, root)
    if found is None:
        return
    source, binary = found
    how = ("`just install` (or `pip install -e .`)" if "NETKV_NATIVE_DIR" not in os.environ
           else "`cmake --build` of the NETKV_NATIVE_DIR build")
    raise StaleBuild(f"the native build is older than its sources ({source.relative_to(root)} "
                     f"changed after {binary.relative_to(nat)} was built): rebuild with {how}")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model", "cpu model")):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def hardware() -> dict[str, Any]:
    """The machine a run measures on: CPU model, cores (online, and usable
    by this process), memory, and the load average when asked."""
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        mem = 0
    return {"cpu_model": _cpu_model(), "cores": os.cpu_count(),
            "usable_cores": len(os.sched_getaffinity(0)), "memory_bytes": mem}


def collect(*, seed: int, target: str, protocol: str, argv: list[str]) -> dict[str, Any]:
    uname = platform.uname()
    return {
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git": git_state(REPO),
        "versions": package_versions(),
        "python": sys.version.split()[0],
        "host": socket.gethostname(),
        "kernel": f"{uname.system} {uname.release}",
        "machine": uname.machine,
        **hardware(),
        "load_before": load_average(),
        "seed": seed,
        "target": target,
        "protocol": protocol,
        "command": argv,
        "build": build(),
    }
