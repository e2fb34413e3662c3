"""Client operations -> a Jepsen/Knossos-style ``history.jsonl``, for every target.

One JSON object per line (docs/results.md, netkv.lincheck.history)::

    {"process": P, "type": "invoke"|"ok"|"info", "f": "read"|"write",
     "key": "<key>", "value": "<value>" or null, "time_ns": T}

Targets describe their operations as columns (``OpColumns``: client, read or
write, key, invoke time, completion time if known, the value written or read)
and this module turns them into lines. Shared by the simulator
(netkv.sim.history) and Mininet (netkv.mininet.history).

A process is one sequential stream of a client: an operation takes the
lowest free stream of its client at invoke and frees it on completion; an
operation with an unknown outcome (timeout, or still open at the end)
completes with ``info`` at the end of the history and its stream is never
reused, as in Jepsen. Events are ordered by time, completions before invokes
at a tie (a stream freed at t can take an operation invoked at t).
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class OpColumns:
    """One entry per operation."""

    client: np.ndarray          # int: the client that issued it
    write: np.ndarray           # bool: write (else read)
    key: list[str]              # the register's name
    invoke_ns: np.ndarray       # int64
    done_ns: np.ndarray         # int64: completion time (ignored where not ok)
    ok: np.ndarray              # bool: completed with a known outcome
    value: list[str | None]     # write: the value written; ok read: the value read (None = null)
    ver: np.ndarray | None = None  # optional: the version seen, written on ok lines as "ver"

    def __len__(self) -> int:
        return len(self.client)


def history_lines(ops: OpColumns) -> list[str]:
    n = len(ops)
    if n == 0:
        return []
    invoke = np.asarray(ops.invoke_ns, dtype=np.int64)
    ok = np.asarray(ops.ok, dtype=bool)
    done = np.asarray(ops.done_ns, dtype=np.int64)
    end = int(max(invoke.max(), done.max())) + 1  # the "info" completions' time
    # events: (time, 0 = completion / 1 = invoke, op index); completions first at a tie
    times = np.concatenate([np.where(ok, done, end), invoke])
    kinds = np.concatenate([np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64)])
    index = np.concatenate([np.arange(n), np.arange(n)])
    order = np.lexsort((index, kinds, times))

    free: dict[int, list[int]] = {}
    process = np.full(n, -1, dtype=np.int64)
    next_process = 0
    lines: list[str] = []
    for ev in order:
        i = int(index[ev])
        client = int(ops.client[i])
        is_write = bool(ops.write[i])
        f = "write" if is_write else "read"
        key = ops.key[i]
        if kinds[ev] == 1:  # invoke
            pool = free.setdefault(client, [])
            if pool:
                proc = heapq.heappop(pool)
            else:
                proc, next_process = next_process, next_process + 1
            process[i] = proc
            lines.append(json.dumps({"process": proc, "type": "invoke", "f": f, "key": key,
                                     "value": ops.value[i] if is_write else None,
                                     "time_ns": int(invoke[i])}))
            continue
        proc = int(process[i])
        if not ok[i]:
            lines.append(json.dumps({"process": proc, "type": "info", "f": f, "key": key,
                                     "value": ops.value[i] if is_write else None,
                                     "time_ns": end}))
            continue
        rec = {"process": proc, "type": "ok", "f": f, "key": key, "value": ops.value[i],
               "time_ns": int(done[i])}
        if ops.ver is not None:
            rec["ver"] = int(ops.ver[i])
        lines.append(json.dumps(rec))
        heapq.heappush(free.setdefault(client, []), proc)
    return lines


def write_lines(lines: list[str], path: Path) -> None:
    """Write history.jsonl atomically."""
    from netkv.results.atomic import write_text

    write_text(Path(path), "\n".join(lines) + ("\n" if lines else ""))
