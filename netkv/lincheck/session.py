"""Read-your-acknowledged-writes: a per-client property weaker than linearizability.

A protocol that is not claimed linearizable (StarCache: a read parked before a
write may be answered by the old cache packet, docs/starcache.md) must still
never hand a client a value older than one the client already knows to be
overwritten. The property checked here:

    For every client c and key k: if c's write of k was acknowledged with
    version v at time t, every read of k that c invokes after t returns a
    version >= v.

Versions order a key's values: the key's home server gives each write the
stored version + 1, so a smaller version is an older value. A write retried
after a lost reply may be applied twice; its acknowledgement carries the
version of the application it answers. Reads invoked at the very instant of
the acknowledgement are not constrained (the client could not have seen it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Violation:
    client: int
    key: int
    read_invoke_ns: int
    read_ver: int
    acked_ver: int      # the client's newest acknowledged write of the key ...
    acked_ns: int       # ... and when its acknowledgement arrived

    def __str__(self) -> str:
        return (f"client {self.client} read key {self.key} at {self.read_invoke_ns} ns and got "
                f"version {self.read_ver}, older than its own write acknowledged with version "
                f"{self.acked_ver} at {self.acked_ns} ns")


@dataclass
class SessionResult:
    reads_checked: int = 0      # ok reads of a key the client had written before
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def check_read_your_writes(client: np.ndarray, write: np.ndarray, key: np.ndarray,
                           invoke_ns: np.ndarray, done_ns: np.ndarray, ok: np.ndarray,
                           ver: np.ndarray) -> SessionResult:
    """The property above over one history: one entry per operation (``ok``:
    completed with a known outcome; ``ver``: the version written, for a
    write, or returned, for a read)."""
    client, key = np.asarray(client, np.int64), np.asarray(key, np.int64)
    write, ok = np.asarray(write, bool), np.asarray(ok, bool)
    invoke_ns, done_ns = np.asarray(invoke_ns, np.int64), np.asarray(done_ns, np.int64)
    ver = np.asarray(ver, np.int64)
    acks = np.flatnonzero(write & ok)
    reads = np.flatnonzero(~write & ok)
    # events in time order; at a tie the read first (it did not see the ack)
    times = np.concatenate([done_ns[acks], invoke_ns[reads]])
    kinds = np.concatenate([np.ones(len(acks), np.int64), np.zeros(len(reads), np.int64)])
    ops = np.concatenate([acks, reads])
    newest: dict[tuple[int, int], tuple[int, int]] = {}   # (client, key) -> (ver, ack time)
    out = SessionResult()
    for e in np.lexsort((kinds, times)):
        i = int(ops[e])
        ck = (int(client[i]), int(key[i]))
        if kinds[e]:
            seen = newest.get(ck)
            if seen is None or ver[i] >= seen[0]:
                newest[ck] = (int(ver[i]), int(done_ns[i]))
            continue
        seen = newest.get(ck)
        if seen is None:
            continue
        out.reads_checked += 1
        if ver[i] < seen[0]:
            out.violations.append(Violation(ck[0], ck[1], int(invoke_ns[i]), int(ver[i]),
                                            seen[0], seen[1]))
    return out
