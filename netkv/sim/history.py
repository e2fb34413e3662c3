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
completes with ``info`` and its stream is never reused, as in Jepsen
(netkv.results.history, shared with target=mininet).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from netkv.results.history import OpColumns, write_lines
from netkv.results.history import history_lines as shared_history_lines
from netkv.sim.native import OP_OK, OWNER_INITIAL


def history_lines(ops: np.ndarray, owners: dict[tuple[int, int], int]) -> list[str]:
    n = len(ops)
    if n == 0:
        return []
    ok = ops["outcome"] == OP_OK
    values: list[str | None] = []
    for i in range(n):
        rec = ops[i]
        ver = int(rec["ver"])
        if rec["write"]:
            values.append(f"w{i + 1}")
        elif not ok[i] or not rec["found"]:
            values.append(None)
        else:
            owner = OWNER_INITIAL if ver == 1 else owners.get((int(rec["keyhash"]), ver))
            if owner == OWNER_INITIAL:
                values.append(None)
            elif owner is None:
                values.append(f"unattributed-v{ver}")  # no server ever stored this version
            else:
                values.append(f"w{owner}")
    return shared_history_lines(OpColumns(
        client=ops["client"], write=ops["write"].astype(bool),
        key=[f"k{int(k)}" for k in ops["key"]], invoke_ns=ops["invoke_ns"],
        done_ns=ops["done_ns"], ok=ok, value=values, ver=ops["ver"]))


def write_history(ops: np.ndarray, owners: dict[tuple[int, int], int], path: Path) -> int:
    """Write history.jsonl atomically; returns the number of operations."""
    write_lines(history_lines(ops, owners), path)
    return len(ops)
