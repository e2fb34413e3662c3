"""Where the C build lives: the shared library and the host programs.

scikit-build-core installs them under ``netkv/_native/`` (next to this file in
a wheel, or in site-packages for an editable install). ``NETKV_NATIVE_DIR``
overrides the search, e.g. to point the tests at a sanitizer build.
"""

from __future__ import annotations

import os
import sysconfig
from functools import cache
from pathlib import Path

LIBRARY_NAME = "libnetkv.so"


class NativeBuildMissing(RuntimeError):
    """The C library or a program was not built or installed."""


def _candidate_dirs() -> list[Path]:
    dirs: list[Path] = []
    override = os.environ.get("NETKV_NATIVE_DIR")
    if override:
        dirs.append(Path(override))
    dirs.append(Path(__file__).resolve().parent / "_native")
    dirs.append(Path(sysconfig.get_paths()["platlib"]) / "netkv" / "_native")
    return dirs


@cache
def native_dir() -> Path:
    """The folder holding libnetkv.so and bin/."""
    for d in _candidate_dirs():
        if (d / LIBRARY_NAME).is_file():
            return d
    searched = ", ".join(str(d) for d in _candidate_dirs())
    raise NativeBuildMissing(
        f"{LIBRARY_NAME} not found (searched {searched}); run `just setup` to build it"
    )


def library_path() -> Path:
    return native_dir() / LIBRARY_NAME


def program_path(name: str) -> Path:
    """A host program: ``bin/<name>`` when installed, ``<name>`` in a CMake build dir."""
    base = native_dir()
    for path in (base / "bin" / name, base / name):
        if path.is_file():
            return path
    raise NativeBuildMissing(
        f"program {name!r} not built (expected {base / 'bin' / name}); run `just setup`"
    )
