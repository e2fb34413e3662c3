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
    violations: list[Violation | ValueViolation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def _events(write: np.ndarray, ok: np.ndarray, invoke_ns: np.ndarray,
            done_ns: np.ndarray) -> list[tuple[int, bool]]:
    """(operation, is an acknowledgement) in time order: acknowledged writes
    at their acknowledgement, completed reads at their invocation; at a tie
    the read first (it did not see the ack)."""
    acks = np.flatnonzero(write & ok)
    reads = np.flatnonzero(~write & ok)
    times = np.concatenate([done_ns[acks], invoke_ns[reads]])
    kinds = np.concatenate([np.ones(len(acks), np.int64), np.zeros(len(reads), np.int64)])
    ops = np.concatenate([acks, reads])
    return [(int(ops[e]), bool(kinds[e])) for e in np.lexsort((kinds, times))]


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
    newest: dict[tuple[int, int], tuple[int, int]] = {}   # (client, key) -> (ver, ack time)
    out = SessionResult()
    for i, is_ack in _events(write, ok, invoke_ns, done_ns):
        ck = (int(client[i]), int(key[i]))
        if is_ack:
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


@dataclass(frozen=True)
class ValueViolation:
    client: int
    key: int
    read_invoke_ns: int
    read_value: int     # the value id read (0: the preloaded value)
    acked_value: int    # the client's newest acknowledged write of the key
    why: str

    def __str__(self) -> str:
        return (f"client {self.client} read key {self.key} at {self.read_invoke_ns} ns and got "
                f"{self.read_value:#x} after its own write {self.acked_value:#x} was "
                f"acknowledged: {self.why}")


def check_read_your_writes_by_value(client: np.ndarray, write: np.ndarray, key: np.ndarray,
                                    invoke_ns: np.ndarray, done_ns: np.ndarray, ok: np.ndarray,
                                    value: np.ndarray) -> SessionResult:
    """The same property where the wire carries no versions (StarCache on
    real packets: kvclient's histories hold the unique value id each write
    wrote and each read returned, 0 = preloaded). Without versions a value
    is known to be older than the client's acknowledged write w only by real
    time: a read after w's acknowledgement fails when it returns the
    preloaded value, a value no write in the history wrote, or the value of
    an acknowledged write that completed before w was invoked. Writes of
    unknown outcome (not ``ok``) may take effect at any time."""
    client, key = np.asarray(client, np.int64), np.asarray(key, np.int64)
    write, ok = np.asarray(write, bool), np.asarray(ok, bool)
    invoke_ns, done_ns = np.asarray(invoke_ns, np.int64), np.asarray(done_ns, np.int64)
    value = np.asarray(value, np.uint64)
    writer = {int(value[i]): i for i in np.flatnonzero(write)}
    newest: dict[tuple[int, int], int] = {}   # (client, key) -> its newest acked write
    out = SessionResult()
    for i, is_ack in _events(write, ok, invoke_ns, done_ns):
        ck = (int(client[i]), int(key[i]))
        if is_ack:
            newest[ck] = i
            continue
        w = newest.get(ck)
        if w is None:
            continue
        out.reads_checked += 1
        v = int(value[i])
        u = writer.get(v)
        why = ("the preloaded value" if v == 0 else
               "a value nobody wrote" if u is None or int(key[u]) != ck[1] else
               "a write that completed before it began"
               if u != w and ok[u] and done_ns[u] < invoke_ns[w] else "")
        if why:
            out.violations.append(ValueViolation(ck[0], ck[1], int(invoke_ns[i]), v,
                                                 int(value[w]), why))
    return out
