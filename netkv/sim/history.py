"""Turn the simulator's request records into a Jepsen/Knossos-style history.

One JSON object per line (docs/results.md, docs/linearizability.md):
``{"process", "type": invoke|ok|info, "f": read|write, "key", "value", "time_ns"}``
plus ``ver``. Values name the write that produced them: a write of request
``n`` writes ``"w<n>"``; a read returns the value of the write that its
version belongs to (the engine tracks, per key and version, which write's
value a server stores, through copies and virtual writes). The preloaded
value is the register's initial state, ``null``.

A process is one sequential stream of a client: an operation takes the
lowest free stream of its client at invoke and frees it on completion; an
operation with an unknown outcome (timeout, or still open at the end)
completes with ``info`` and its stream is never reused, as in Jepsen.
"""

from __future__ import annotations

import heapq
import json
from pathlib import Path

import numpy as np

from netkv.sim.native import OP_OK, OWNER_INITIAL


def history_lines(ops: np.ndarray, owners: dict[tuple[int, int], int]) -> list[str]:
    n = len(ops)
    if n == 0:
        return []
    invoke = ops["invoke_ns"].astype(np.int64)
    done = ops["done_ns"].astype(np.int64)
    ok = ops["outcome"] == OP_OK
    end = int(max(invoke.max(), done.max())) + 1
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
        rec = ops[i]
        client = int(rec["client"])
        f = "write" if rec["write"] else "read"
        key = f"k{int(rec['key'])}"
        if kinds[ev] == 1:  # invoke
            pool = free.setdefault(client, [])
            if pool:
                proc = heapq.heappop(pool)
            else:
                proc, next_process = next_process, next_process + 1
            process[i] = proc
            value = f"w{i + 1}" if rec["write"] else None
            lines.append(json.dumps({"process": proc, "type": "invoke", "f": f, "key": key,
                                     "value": value, "time_ns": int(invoke[i])}))
            continue
        proc = int(process[i])
        if not ok[i]:
            value = f"w{i + 1}" if rec["write"] else None
            lines.append(json.dumps({"process": proc, "type": "info", "f": f, "key": key,
                                     "value": value, "time_ns": end}))
            continue
        ver = int(rec["ver"])
        if rec["write"]:
            value: str | None = f"w{i + 1}"
        elif not rec["found"]:
            value = None
        else:
            owner = OWNER_INITIAL if ver == 1 else owners.get((int(rec["keyhash"]), ver))
            if owner == OWNER_INITIAL:
                value = None
            elif owner is None:
                value = f"unattributed-v{ver}"  # no server ever stored this version
            else:
                value = f"w{owner}"
        lines.append(json.dumps({"process": proc, "type": "ok", "f": f, "key": key,
                                 "value": value, "time_ns": int(done[i]), "ver": ver}))
        heapq.heappush(free.setdefault(client, []), proc)
    return lines


def write_history(ops: np.ndarray, owners: dict[tuple[int, int], int], path: Path) -> int:
    """Write history.jsonl atomically; returns the number of operations."""
    from netkv.results.atomic import write_text

    lines = history_lines(ops, owners)
    write_text(path, "\n".join(lines) + ("\n" if lines else ""))
    return len(ops)
