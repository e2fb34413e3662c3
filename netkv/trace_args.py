"""``python -m netkv trace``'s arguments, apart from netkv.trace (polars,
the codecs) so that the command line's --help stays fast."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from netkv.argtypes import integer
from netkv.argtypes import seconds as seconds_type


# --show's flows: polars' head(-n) would print all but the last n
count = integer(0)
seconds = seconds_type(above_zero=False)   # --since/--until: after the first request


def key(text: str) -> str:
    """--key: ``#`` then the key hash in hex (any case), or the key as text or
    hex; a ``#`` followed by anything else matched no flow, silently."""
    if text.startswith("#"):
        digits = text[1:].lower()
        if not digits or any(c not in "0123456789abcdef" for c in digits):
            raise argparse.ArgumentTypeError(f"{text!r} (allowed: #<key hash in hex>, e.g. "
                                             "#9f2c01aa, or the key as text or hex)")
        return "#" + digits
    return text


def parquet_file(text: str) -> str:
    """--parquet: checked before the capture is decoded (minutes for a big
    one), not when the table is written."""
    path = Path(text)
    allowed = "(allowed: a file path in a folder you can write)"
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder {allowed}")
    folder = path.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r}: {str(folder)!r} is not a folder you can "
                                         f"write {allowed}")
    return text


def build_parser(ap: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    ap = ap or argparse.ArgumentParser(prog="python -m netkv trace")
    ap.add_argument("path", help="run directory (capture=true), a point's capture folder, or a pcap")
    ap.add_argument("--key", type=key, help="key: text, hex, or #<keyhash hex>")
    ap.add_argument("--op", help="op name of the request, e.g. WRITE")
    ap.add_argument("--client", type=integer(0), help="client node id")
    ap.add_argument("--server", type=integer(0), help="server that answered")
    ap.add_argument("--point", help="load point (substring of its key)")
    ap.add_argument("--only", choices=["replicated", "retried", "dropped", "duplicated", "stale",
                                       "switch"], help="only flows where this happened")
    ap.add_argument("--since", type=seconds, help="seconds after the first request")
    ap.add_argument("--until", type=seconds, help="seconds after the first request")
    ap.add_argument("--servers", type=integer(1), help="servers in the rack (default: config.yaml)")
    ap.add_argument("--show", type=count, default=5, help="flows to print with their hops")
    ap.add_argument("--parquet", type=parquet_file, help="write the (filtered) flows here "
                    "(default: <run>/trace.parquet, or <pcap>.flows.parquet)")
    return ap
