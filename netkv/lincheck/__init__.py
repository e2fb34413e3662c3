"""Linearizability checking of netkv client histories (``history.jsonl``).

Two independent checkers read the same Jepsen/Knossos-style format (see
docs/linearizability.md and netkv.lincheck.history):

- :func:`check_file`: the Python Wing-Gong/Lowe checker (netkv.lincheck.wgl);
- :func:`check_file_porcupine`: github.com/anishathalye/porcupine through the
  Go helper in tools/porcupine (build it first, see :data:`BUILD_HINT`).

Both treat each key as an independent register (initial value null), drop
``fail`` ops and ``info`` reads, and let ``info`` / never-completed writes take
effect at any time after their invocation, or never.

Porcupine's search can take all the machine's memory on a long, hot history:
the helper runs under an address-space cap (RLIMIT_AS, ``max_memory_gb``,
default :func:`default_max_memory_gb`), and hitting it is a result with no
verdict (``out_of_memory``), not an out-of-memory kill of the machine.

CLI: ``python -m netkv.lincheck FILE [--porcupine] [--timeout S] [--max-memory GB]``
prints one line and exits 0 (linearizable), 1 (not linearizable), 2 (malformed
history or checker unavailable), 3 (unknown: timed out, or Porcupine out of memory).
"""

from __future__ import annotations

import math
import os
import re
import resource
import shutil
import subprocess
import warnings
from pathlib import Path

from netkv.lincheck.history import History, HistoryError, Op, parse_lines, read_history
from netkv.lincheck.wgl import (
    DEFAULT_MAX_STATES,
    KeyResult,
    Result,
    check_history,
    check_register,
    reduce_pending,
)

__all__ = [
    "BUILD_HINT", "DEFAULT_MAX_STATES", "GB", "History", "HistoryError", "KeyResult", "Op", "PorcupineUnavailable",
    "Result", "check_file", "check_file_porcupine", "check_history", "check_register", "default_max_memory_gb",
    "parse_lines", "porcupine_binary", "read_history", "reduce_pending", "verdicts",
]

TOOL_DIR = Path(__file__).resolve().parents[2] / "tools" / "porcupine"
DEFAULT_BINARY = TOOL_DIR / "bin" / "porcupine"
BUILD_HINT = "cd tools/porcupine && GOFLAGS=-mod=mod go build -o bin/porcupine ."


class PorcupineUnavailable(RuntimeError):
    """The Go helper is not built (or not runnable)."""


def check_file(path: str | os.PathLike, *, timeout: float | None = None,
               max_states: int | None = DEFAULT_MAX_STATES) -> Result:
    """Check ``path`` with the Python WGL checker. Raises HistoryError if malformed.

    ``ok`` is None (unknown) past ``timeout`` seconds or ``max_states``
    memoized search configurations for one key.
    """
    return check_history(read_history(path), timeout=timeout, max_states=max_states)


def porcupine_binary(binary: str | os.PathLike | None = None) -> Path:
    """The Go helper: ``binary``, else $NETKV_PORCUPINE, else tools/porcupine/bin/porcupine."""
    b = Path(binary or os.environ.get("NETKV_PORCUPINE") or DEFAULT_BINARY)
    if not (b.is_file() and os.access(b, os.X_OK)):
        raise PorcupineUnavailable(f"porcupine helper not built ({b} missing): run `{BUILD_HINT}`")
    return b


_COUNTS = re.compile(r"\((\d+) ops, (\d+) keys, (\d+) pending writes;?\s*(.*)\)\s*$")
_ERROR = re.compile(r"^error: (.*):(\d+): (.*)$")


GB = 10**9
# A capped Go helper that dies past its cap: "runtime: out of memory ...", or,
# where the cap leaves the runtime no room to start (measured: below 0.75 GB,
# and 1.20-1.25 GB, on amd64), "fatal error: failed to reserve page summary
# memory" / "... allocating heap arena map" with a goroutine dump.
_OUT_OF_MEMORY = re.compile(r"out of memory|errno=12|cannot allocate memory|^fatal error:",
                            re.IGNORECASE | re.MULTILINE)


def default_max_memory_gb() -> float:
    """The Porcupine helper's default address-space cap: half the machine's
    physical memory, in GB (10^9 bytes). Go reserves about 1.2 GB of address
    space beyond its heap, so the search gets the cap less that."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2 / GB


def _capped(cmd: list[str], cap: int) -> tuple[list[str], object]:
    """``cmd`` run with RLIMIT_AS = ``cap`` bytes (never above a hard limit
    already set): through util-linux's ``prlimit --as=CAP:`` (it sets the
    limit, then execs), else a ``preexec_fn`` (unsafe where the caller runs
    threads, hence only the fallback). Returns (argv, preexec_fn)."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    prlimit = shutil.which("prlimit")
    if prlimit:
        return [prlimit, f"--as={cap}:", "--", *cmd], None
    return cmd, lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def check_file_porcupine(path: str | os.PathLike, *, binary: str | os.PathLike | None = None,
                         timeout: float | None = None, reduce: bool = True,
                         max_memory_gb: float | None = None) -> Result:
    """Check ``path`` with Porcupine (the Go helper). Raises HistoryError if
    malformed, PorcupineUnavailable if the helper is not built. ``reduce``
    False turns off the helper's pending-write reduction (same verdict,
    slower). The helper may use ``max_memory_gb`` of address space (default
    :func:`default_max_memory_gb`); past it the result is unknown (``ok``
    None, ``out_of_memory`` True) and says so."""
    if max_memory_gb is None:
        max_memory_gb = default_max_memory_gb()
    if not (isinstance(max_memory_gb, int | float) and math.isfinite(max_memory_gb)
            and max_memory_gb > 0):
        raise ValueError(f"max_memory_gb={max_memory_gb!r} (allowed: GB, a finite number > 0)")
    b = porcupine_binary(binary)
    cmd = [str(b)]
    if not reduce:
        cmd.append("-reduce=false")
    if timeout is not None:
        cmd += ["-timeout", f"{timeout}s"]
    cmd.append(str(path))
    argv, preexec = _capped(cmd, round(max_memory_gb * GB))
    p = subprocess.run(argv, capture_output=True, text=True, preexec_fn=preexec)
    out = p.stdout.strip().splitlines()
    first = out[0] if out else ""
    if p.returncode not in (0, 1, 3) and not out and _OUT_OF_MEMORY.search(p.stderr):
        return _out_of_memory(path, max_memory_gb)
    if p.returncode == 2:
        m = _ERROR.match(first)
        if m:
            raise HistoryError(m.group(1), int(m.group(2)), m.group(3))
        raise HistoryError(str(path), 0, first or p.stderr.strip() or "porcupine: bad input")
    if p.returncode not in (0, 1, 3) or not out:   # (no line: prlimit itself failed)
        raise PorcupineUnavailable(f"{b} failed (exit {p.returncode}): {p.stderr.strip()[:500]}")
    ok = {0: True, 1: False, 3: None}[p.returncode]
    res = Result(ok, checker="porcupine")
    m = _COUNTS.search(first)
    if m:
        res.ops, res.keys, res.pending_writes = (int(x) for x in m.group(1, 2, 3))
        res.explanation = m.group(4) or None
    if ok is None:
        res.explanation = "timed out"
    return res


def _out_of_memory(path: str | os.PathLike, max_memory_gb: float) -> Result:
    """The helper hit its cap: no verdict, with the history's counts (read
    here: the helper died before printing them)."""
    h = read_history(path)
    res = Result(None, len(h.ops), len(h.by_key()), h.pending_writes, checker="porcupine",
                 out_of_memory=True)
    res.explanation = (f"porcupine: out of memory at {max_memory_gb:.3g} GB on {res.ops} "
                       "operations; no verdict")
    return res


def verdicts(path: str | os.PathLike, *, timeout: float | None = None,
             max_memory_gb: float | None = None) -> list[bool | None]:
    """Both checkers' verdicts on ``path``: WGL's, then Porcupine's where its
    helper is built and stayed within ``max_memory_gb`` (the list is one
    shorter where it did not: a warning says so, and WGL's verdict stands)."""
    results = [check_file(path, timeout=timeout).ok]
    try:
        pc = check_file_porcupine(path, timeout=timeout, max_memory_gb=max_memory_gb)
    except PorcupineUnavailable:
        return results
    if pc.out_of_memory:
        warnings.warn(f"{pc.explanation.removesuffix('; no verdict')}; WGL's verdict stands",
                      stacklevel=2)
    else:
        results.append(pc.ok)
    return results
