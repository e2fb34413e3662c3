"""kvclient's per-client CSV histories -> one Jepsen-style ``history.jsonl``.

kvclient ``--history`` writes one line per operation::

    client,req_id,op,key,invoke_ns,complete_ns,value,ver,server,status

``op`` is ``r``/``w``; ``invoke_ns`` is the intended send time (the operation
cannot take effect earlier: the request is sent at or after it) and
``complete_ns`` the time the reply was received (CLOCK_MONOTONIC, shared by
every namespace, so clients' times compare); ``status`` is ``ok``,
``not_found`` (a read of an absent key), ``timeout`` (given up after the
retries), ``lost`` (its slot was reused while it was outstanding) or
``unfinished`` (still open at the end). A write's ``value`` is the unique
8-byte id it wrote, ``tag << 48 | (client + 1) << 32 | req_id`` (``tag``:
kvclient's ``--value-tag``, the load point's number, so that values stay
unique over every point a rack runs); a read's is the id in the bytes it
read (0 = a preloaded value).

In the history, keys are ``k<key id>``, the value of client c's write with
req_id r in point p is ``w<p>.<c>.<r>``, the preloaded value is the initial
``null`` (as is a read of an absent key), and timeout/lost/unfinished
operations complete as ``info`` (unknown outcome). Processes come from
netkv.results.history. The servers keep their store from one point to the
next, so a point's reads can return earlier points' writes: a history is
only checkable from the rack's start (MininetTarget writes all the points
recorded so far).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from netkv.results.history import OpColumns, history_lines, write_lines

COLUMNS = ["client", "req_id", "op", "key", "invoke_ns", "complete_ns", "value", "ver", "server",
           "status"]
KNOWN = ("ok", "not_found")
UNKNOWN = ("timeout", "lost", "unfinished")


def value_name(value_id: int) -> str | None:
    """The history value of a written value id (None: the preloaded value)."""
    if value_id == 0:
        return None
    return f"w{value_id >> 48}.{((value_id >> 32) & 0xFFFF) - 1}.{value_id & 0xFFFFFFFF}"


def read_csvs(paths: Iterable[Path]) -> OpColumns:
    client, write, key, invoke, done, ok, value, ver = [], [], [], [], [], [], [], []
    for path in paths:
        with open(path, newline="") as fh:
            rows = csv.reader(fh)
            header = next(rows, None)
            if header != COLUMNS:
                raise ValueError(f"{path}: not a kvclient history (header {header})")
            for lineno, row in enumerate(rows, start=2):
                if len(row) != len(COLUMNS):
                    raise ValueError(f"{path}:{lineno}: {len(row)} fields, expected "
                                     f"{len(COLUMNS)}")
                c, rid, op, k, t_inv, t_done, vid, v, _server, status = row
                if op not in ("r", "w") or status not in KNOWN + UNKNOWN:
                    raise ValueError(f"{path}:{lineno}: bad op {op!r} or status {status!r}")
                is_write = op == "w"
                known = status in KNOWN
                client.append(int(c))
                write.append(is_write)
                key.append(f"k{int(k)}")
                invoke.append(int(t_inv))
                done.append(int(t_done) if known else -1)
                ok.append(known)
                ver.append(int(v))
                vid_i = int(vid)
                if is_write:
                    if ((vid_i >> 32) & 0xFFFF) != (int(c) + 1) & 0xFFFF or \
                            vid_i & 0xFFFFFFFF != int(rid):
                        raise ValueError(f"{path}:{lineno}: write value id {vid_i:#x} is not "
                                         f"client {c}'s request {rid} (value_size < 8?)")
                    value.append(value_name(vid_i))
                elif known and status == "ok":
                    value.append(value_name(vid_i))
                else:
                    value.append(None)  # absent key, or an unknown outcome (not looked at)
    return OpColumns(client=np.asarray(client, dtype=np.int64),
                     write=np.asarray(write, dtype=bool), key=key,
                     invoke_ns=np.asarray(invoke, dtype=np.int64),
                     done_ns=np.asarray(done, dtype=np.int64), ok=np.asarray(ok, dtype=bool),
                     value=value, ver=np.asarray(ver, dtype=np.int64))


def convert(paths: Iterable[Path]) -> list[str]:
    """The history.jsonl lines of these kvclient CSV histories."""
    return history_lines(read_csvs(paths))


def write_history(paths: Iterable[Path], out: Path) -> int:
    """Write history.jsonl atomically; returns the number of operations."""
    ops = read_csvs(paths)
    write_lines(history_lines(ops), out)
    return len(ops)
