"""``python -m netkv.lincheck FILE [--porcupine] [--timeout S] [--max-states N] [--max-memory GB]``: one line; exit 0/1/2/3, 130 if interrupted."""

from __future__ import annotations

import sys

from netkv.argtypes import OneLineParser, gigabytes, integer, seconds
from netkv.config.core import EXIT_INTERRUPTED
from netkv.lincheck import (
    DEFAULT_MAX_STATES,
    HistoryError,
    PorcupineUnavailable,
    check_file,
    check_file_porcupine,
    default_max_memory_gb,
)


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(
        prog="python -m netkv.lincheck", error_prefix="error: ",
        description="Check a netkv history.jsonl for linearizability (one register per key). "
        "Exit 0: linearizable, 1: not linearizable, 2: malformed history or checker "
        "unavailable, 3: unknown (timed out, or Porcupine out of memory), 130: interrupted "
        "(Ctrl-C; no verdict).")
    ap.add_argument("file", help="history.jsonl")
    ap.add_argument("--porcupine", action="store_true",
                    help="use Porcupine (the Go helper in tools/porcupine) instead of the "
                    "Python Wing-Gong/Lowe checker")
    ap.add_argument("--timeout", type=seconds(above_zero=True), default=None, metavar="S",
                    help="give up after S seconds (exit 3)")
    ap.add_argument("--max-states", type=integer(0, note="; 0: no limit"), default=DEFAULT_MAX_STATES, metavar="N",
                    help="Python checker: give up (exit 3) after N memoized search "
                    f"configurations for one key (default {DEFAULT_MAX_STATES}; 0: no limit)")
    ap.add_argument("--max-memory", type=gigabytes(), default=None, metavar="GB",
                    help="Porcupine: cap its address space at GB (10^9 bytes); past it, "
                    "no verdict (exit 3). Default: half the physical memory "
                    f"({default_max_memory_gb():.3g} GB here)")
    a = ap.parse_args(argv)
    try:
        if a.porcupine:
            res = check_file_porcupine(a.file, timeout=a.timeout, max_memory_gb=a.max_memory)
        else:
            res = check_file(a.file, timeout=a.timeout, max_states=a.max_states or None)
    except HistoryError as e:
        print(f"error: {e}")
        return 2
    except PorcupineUnavailable as e:
        print(f"error: {e}")
        return 2
    except OSError as e:   # the file, named once (not "[Errno 2] ...")
        print(f"error: {e.filename or a.file}: {e.strerror or e} (allowed: a history.jsonl "
              "that netkv wrote)")
        return 2
    except KeyboardInterrupt:   # Ctrl-C: one line, as every netkv command (no traceback)
        print("error: interrupted (no verdict)")
        return EXIT_INTERRUPTED
    print(res.line())
    return {True: 0, False: 1, None: 3}[res.ok]


if __name__ == "__main__":
    sys.exit(main())
