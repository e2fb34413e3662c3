"""``build.mode: source``: build the C programs on the hosts themselves.

For a rack whose hosts do not share this machine's OS and libc (a pushed
binary would not run there), the sources (``CMakeLists.txt`` and the C
files under ``hostapps/``) go to each host as one archive and are built there with the
host's own compiler, once per source version: the folder
``<workdir>/bin/src-<hash>/`` (``<hash>``: the sources' and the CMake
arguments' content) ends up holding what a push would have put there, the
library beside the programs, so everything after this step is the same.

Builds on one host are serialised by ``flock`` on the folder, so hosts that
share a file system (the namespace rack) build once and the others find it
done. A failure is one line naming the host, the step and the end of the
build log, which stays on the host.
"""

from __future__ import annotations

import hashlib
import io
import shlex
import tarfile
from collections.abc import Sequence
from pathlib import Path

from netkv.config.core import ConfigError
from netkv.results import provenance


class SourceTreeMissing(ConfigError):
    """This installation of netkv has no C sources (a wheel, not a clone)."""


def source_root() -> Path:
    root = Path(__file__).resolve().parents[2]
    if not all((root / s).exists() for s in provenance.SOURCES):
        raise SourceTreeMissing(
            f"build.mode=source needs netkv's C sources (CMakeLists.txt, hostapps/) beside the "
            f"netkv package, not found in {root} (use a clone, or build.mode=push)")
    return root


def source_files(root: Path) -> list[Path]:
    """Every file the C build reads (the set whose changes make a local build
    stale, netkv.results.provenance), in a stable order."""
    return sorted(provenance.source_files(root))


def build_id(root: Path, cmake_args: Sequence[str]) -> str:
    """``src-<hash>``: the sources' paths and contents and the CMake arguments."""
    h = hashlib.sha256()
    for p in source_files(root):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    h.update("\0".join(cmake_args).encode())
    return f"src-{h.hexdigest()[:16]}"


def archive(root: Path) -> bytes:
    """The sources as a gzipped tar (paths relative to the project root)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in source_files(root):
            tar.add(p, arcname=str(p.relative_to(root)), recursive=False)
    return buf.getvalue()


def script(workdir: str, build: str, cmake_args: Sequence[str], programs: Sequence[str],
           library: str) -> str:
    """The remote shell script: unpack ``<workdir>/src/<build>.tar.gz``,
    configure, build, install, and copy the library and ``programs`` into
    ``<workdir>/bin/<build>/`` (its ``.complete`` marks it done). Prints
    ``built`` or ``cached``; on failure, exits non-zero after printing the
    step that failed and the end of its log."""
    q = shlex.quote
    src = f"{workdir}/src/{build}"
    rbin = f"{workdir}/bin/{build}"
    args = " ".join(q(a) for a in ("-DCMAKE_BUILD_TYPE=Release", "-DNETKV_TESTS=OFF",
                                   *cmake_args))
    names = " ".join(q(p) for p in programs)
    return f"""set -u
src={q(src)}; bin={q(rbin)}
mkdir -p "$src" || exit 1
exec 9>"$src.lock"
flock 9
if [ -f "$bin/.complete" ]; then echo cached; exit 0; fi
fail() {{ echo "step $1 failed: $(tail -c 400 "$src/build.log" | tr '\\n' ' ')"; exit 1; }}
command -v cmake >/dev/null || {{ echo "step configure failed: cmake not found"; exit 1; }}
rm -rf "$src/tree" "$src/build" "$src/inst" && mkdir -p "$src/tree" || exit 1
tar xzf "$src.tar.gz" -C "$src/tree" > "$src/build.log" 2>&1 || fail unpack
cmake -S "$src/tree" -B "$src/build" {args} >> "$src/build.log" 2>&1 || fail configure
cmake --build "$src/build" -j "$(nproc)" >> "$src/build.log" 2>&1 || fail compile
cmake --install "$src/build" --prefix "$src/inst" >> "$src/build.log" 2>&1 || fail install
mkdir -p "$bin" || exit 1
cp "$src/inst/netkv/_native/"{q(library)} "$bin/" || exit 1
for p in {names}; do
  [ -x "$src/inst/netkv/_native/bin/$p" ] || {{ echo "step install failed: $p was not built there \
(see $src/build.log)"; exit 1; }}
  cp "$src/inst/netkv/_native/bin/$p" "$bin/" || exit 1
done
touch "$bin/.complete"
echo built
"""
