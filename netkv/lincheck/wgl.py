"""Wing-Gong/Lowe linearizability checker for a read/write register.

The search is Lowe's refinement of Wing & Gong ("Testing for linearizability",
Concurrency Computat.: Pract. Exper. 2017), the algorithm Porcupine's
``checkSingle`` implements:

- the key's call and return events are sorted by time (calls before returns
  on equal times: [call, return] intervals are closed) into a doubly linked
  list;
- walking the list from its head, a call whose operation is legal in the
  current register state is *linearized*: the state is advanced, the call and
  its return are unlinked ("lifted"), the choice is pushed on a stack and the
  walk restarts from the head;
- reaching a return means the operation it closes had to be linearized by
  now but could not be: pop the last choice, re-link it and try the next call
  after it;
- (set of linearized operations, register state) pairs already explored are
  memoized, so each configuration is expanded at most once.

The history is linearizable iff every event gets lifted. Pending writes
(``info`` or never completed) have return time +inf, so the search may place
them anywhere after their call; placing one after everything else is the
same as it never having happened.

The linearized set is a bitset, kept compact as ``(lo, window, pending)``:
operations are numbered in call order (pending writes last, in their own
bitset ``pending``); every operation below ``lo`` is linearized, and bit
``i`` of ``window`` says whether operation ``lo + i`` is. The window spans
only the operations concurrent with the oldest unlinearized one, so memo
entries stay small on long histories. The search is iterative (no recursion
limit) and works per key: linearizability is compositional (local), so a
history is linearizable iff each key's register history is.

Register-specific refinements, none of which changes the verdict (the tests
check them against a brute force and against Porcupine):

- :func:`reduce_pending`: pending writes whose value no read returned are
  dropped; a pending write that is the only writer of a value some read
  returned gets that read's return time (it surely happened before it);
- values that no read returned are one state (DEAD): no read can tell them
  apart;
- forced moves: a legal minimal read, or a dead write onto a DEAD state,
  leaves the state unobservably unchanged, so it can be moved to the front
  of any successful continuation: it is taken first and, if it fails, its
  whole level fails (no alternatives are tried);
- pruning: a write may not overwrite a value that an unlinearized read still
  wants when no unlinearized write of that value is left;
- :func:`quick_violation`: O(n log n) sound checks for a read of a value
  never written, a read from the future and a stale read, so that the common
  violations are reported without an exhaustive search (and explained).

Without these the search is exponential in the number of concurrent writes
(Porcupine's is: it cannot check a single hot key with 32 concurrent
clients); with them a 100k-op single-key history with 128 concurrent clients
takes seconds. Proving a subtle violation still needs an exhaustive search
of everything before it; ``max_states`` bounds that (result unknown).
"""

from __future__ import annotations

import json
import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from netkv.lincheck.history import INF, History, Op

_PREFIX_SHOWN = 3  # last ops of the longest linearizable prefix in explanations


@dataclass
class KeyResult:
    key: str
    ok: bool | None  # None: gave up (timeout)
    ops: int
    explanation: str | None = None
    prefix: list[Op] = field(default_factory=list)  # longest linearizable prefix (failures)
    blocked: Op | None = None  # the op that cannot be linearized after `prefix`


@dataclass
class Result:
    """Outcome of a check. ``ok`` is True, False, or None (unknown: timed out,
    or, for Porcupine, ``out_of_memory``)."""

    ok: bool | None
    ops: int = 0
    keys: int = 0
    pending_writes: int = 0
    explanation: str | None = None  # first failing key's explanation
    failures: list[KeyResult] = field(default_factory=list)
    checker: str = "wgl"
    out_of_memory: bool = False  # Porcupine's helper hit its address-space cap

    def __bool__(self) -> bool:
        return self.ok is True

    def line(self) -> str:
        """One line for humans: the verdict, counts, and the explanation."""
        counts = f"{self.ops} ops, {self.keys} keys, {self.pending_writes} pending writes"
        if self.ok:
            return f"linearizable ({counts})"
        if self.ok is None:
            return f"unknown: {self.explanation or 'timed out'} ({counts})"
        why = f": {self.explanation}" if self.explanation else ""
        return f"not linearizable ({counts}){why}"


def _fmt_value(v: str | None) -> str:
    return json.dumps(v)


def reduce_pending(ops: Sequence[Op]) -> list[Op]:
    """Simplify one key's pending writes without changing the verdict.

    - A pending write whose value no read returned is dropped: in any
      linearization no read sits between it and the next write (that read
      would return its value), so removing it changes nothing; conversely it
      can always be placed last.
    - A pending write that is the only write of its (non-null) value, which
      some read returned, definitely happened, before every read of that
      value: its return time becomes the earliest such read's return (never
      below its own call).

    Pending writes otherwise have return time +inf and can be linearized
    anywhere later, which makes the search exponential in their number.
    """
    if not any(op.ret == INF for op in ops):
        return list(ops)
    writers: dict[str | None, int] = {None: 1}  # the initial null counts as a write of null
    first_read: dict[str | None, int | float] = {}
    for op in ops:
        if op.f == "write":
            writers[op.value] = writers.get(op.value, 0) + 1
        elif op.ret < first_read.get(op.value, INF):
            first_read[op.value] = op.ret
    out = []
    for op in ops:
        if op.ret == INF:
            if op.value not in first_read:
                continue
            if writers[op.value] == 1:
                op = replace(op, ret=max(op.call, first_read[op.value]))
        out.append(op)
    return out


def quick_violation(ops: Sequence[Op]) -> tuple[Op, str] | None:
    """Cheap sound checks on one key, O(n log n), run before the search
    (which must otherwise explore everything before a violation to prove it):
    a read of a value that no write wrote; a read that ended before every
    write of its value began; a stale read (every write of its value was
    followed, in real time, by a completed write of another value that ended
    before the read began). Returns (read, reason) or None.
    """
    writes = [op for op in ops if op.f == "write"]
    first_call: dict[str | None, int | float] = {None: -INF}  # the initial null
    for w in writes:
        if w.call < first_call.get(w.value, INF):
            first_call[w.value] = w.call
    # suffix minima over writes sorted by call: the two smallest return
    # times with distinct values among writes with call >= that position
    ws = sorted(writes, key=lambda w: w.call)
    calls = [w.call for w in ws]
    suf: list[tuple] = [None] * (len(ws) + 1)
    best = (INF, None, None)  # (ret, value, op)
    second = (INF, None, None)  # smallest ret with a value != best's
    suf[len(ws)] = (best, second)
    for i in range(len(ws) - 1, -1, -1):
        w = ws[i]
        c = (w.ret, w.value, w)
        if c[0] < best[0]:
            if w.value != best[1]:
                second = best
            best = c
        elif c[0] < second[0] and w.value != best[1]:
            second = c
        suf[i] = (best, second)

    def overwritten_by(t, v):
        """The earliest-returning write of a value != v called after time t."""
        b, s2 = suf[bisect_right(calls, t)]
        return b if b[1] != v else s2

    # latest[v]: over the writes of v (and the initial null), the latest
    # time by which some other value was surely written over it
    latest: dict[str | None, tuple] = {}
    for src in [None, *writes]:
        v, t = (None, -INF) if src is None else (src.value, src.ret)
        o = overwritten_by(t, v)
        if o[0] > latest.get(v, (-INF,))[0]:
            latest[v] = (o[0], o[2])
    for r in ops:
        if r.f != "read":
            continue
        if r.value not in first_call:
            return r, "returned a value that no write (ok or unknown) wrote"
        if first_call[r.value] > r.ret:
            return r, "returned a value whose writes all began after it ended"
        t, w = latest[r.value]
        if t < r.call:
            return r, ("is stale: every write of its value (or the initial null) was "
                       "overwritten by a completed write of another value before it began "
                       f"(the last such: {w.describe()})")
    return None


DEFAULT_MAX_STATES = 4_000_000  # memoized configurations per key (~0.5 GB) before giving up
_EXPLAIN_STATES = 200_000  # for the unpruned explanation search


def check_register(ops: Sequence[Op], key: str = "", *, explain: bool = True,
                   deadline: float | None = None, reduce: bool = True,
                   max_states: int | None = DEFAULT_MAX_STATES, quick: bool = True) -> KeyResult:
    """Check one key's operations against a register (initial value null).

    Gives up (``ok`` None) past ``deadline`` (a time.monotonic() value) or
    after ``max_states`` memoized configurations (None: no limit). With
    ``explain``, a failing check is re-run once to record the longest
    linearizable prefix and the operation that blocks it. ``reduce`` applies
    :func:`reduce_pending` first (same verdict, much faster with many
    pending writes). ``quick`` runs :func:`quick_violation` first.
    """
    if reduce:
        ops = reduce_pending(ops)
    found = quick_violation(ops) if quick else None
    if found is not None:
        bad, why = found
        return KeyResult(key, False, len(ops), f"key {json.dumps(key)}: {bad.describe()} {why}",
                         [], bad)
    ok = _search(ops, False, deadline, max_states)
    if ok is None:
        why = ("timed out" if deadline is not None and time.monotonic() > deadline
               else f"gave up after {max_states} configurations")
        return KeyResult(key, None, len(ops), f"key {json.dumps(key)}: {why}")
    if ok or not explain:
        return KeyResult(key, ok, len(ops))
    # record without the overwrite pruning (its longest prefix ends at the
    # operation that really gets stuck, usually a read), unless that is too slow
    found = _search(ops, True, deadline, _EXPLAIN_STATES, prune=False)
    if found is None:
        found = _search(ops, True, None, max_states)
    if found is None:
        return KeyResult(key, False, len(ops), f"key {json.dumps(key)}: not linearizable")
    _, best, blocked_i = found
    prefix = [ops[i] for i in best]
    state = next((op.value for op in reversed(prefix) if op.f == "write"), None)
    blocked = ops[blocked_i]
    shown = "; ".join(op.describe() for op in prefix[-_PREFIX_SHOWN:])
    more = "... " if len(prefix) > _PREFIX_SHOWN else ""
    text = (f"key {json.dumps(key)}: longest linearizable prefix has {len(prefix)} of {len(ops)} ops"
            + (f" ({more}{shown})" if prefix else "")
            + f"; then the register holds {_fmt_value(state)} and "
            f"{blocked.describe()} cannot be linearized")
    return KeyResult(key, False, len(ops), text, prefix, blocked)


DEAD = 0  # the state id of every value that no read returned


def _search(ops: Sequence[Op], record: bool, deadline: float | None,
            max_states: int | None = None, prune: bool = True):
    """WGL search. Returns True / False / None (gave up: deadline or more
    than ``max_states`` memoized configurations); with ``record``,
    (False, best_prefix_indices, blocked_index) on failure."""
    n = len(ops)
    if n == 0:
        return True
    # number ops: completed ones by call time, pending writes after them
    order = sorted(range(n), key=lambda i: (ops[i].ret == INF, ops[i].call))
    n_done = sum(1 for op in ops if op.ret != INF)
    # Intern values. Values that no read returned are all equivalent (no
    # future read can tell them apart), so they share the state id DEAD.
    vid: dict[str | None, int] = {}
    for op in ops:
        if op.f == "read" and op.value not in vid:
            vid[op.value] = len(vid) + 1
    is_write = [False] * n
    val = [0] * n
    for r, i in enumerate(order):
        op = ops[i]
        is_write[r] = op.f == "write"
        val[r] = vid.get(op.value, DEAD)
    # events sorted by (time, return-after-call); node j in 0..2n-1, head = 2n
    ev = []
    for r, i in enumerate(order):
        op = ops[i]
        ev.append((op.call, 0, r))
        ev.append((op.ret, 1, r))
    ev.sort()
    m2 = 2 * n
    head = m2
    nxt = list(range(1, m2 + 1)) + [0]
    nxt[m2 - 1] = -1
    prv = [m2] + list(range(0, m2 - 1)) + [-1]
    nxt[head] = 0
    node_op = [r for (_, _, r) in ev]
    match = [-1] * m2
    ret_node = [0] * n
    for j, (_, kind, r) in enumerate(ev):
        if kind:
            ret_node[r] = j
    for j, (_, kind, r) in enumerate(ev):
        if not kind:
            match[j] = ret_node[r]
    # forced[r]: linearizing op r leaves the state unchanged in a way no
    # read can observe (a read of the current value; a dead write onto a
    # dead state). Such an op, legal and minimal (every op that returned
    # before its call is linearized), can be moved to the front of any
    # successful continuation, so it needs no alternatives: take it as soon
    # as it is legal, and if that fails, its whole level fails.

    # unlinearized writes of / reads wanting each value: overwriting a value
    # that some unlinearized read wants, when no unlinearized write of it is
    # left, can never lead to a linearization (prune that choice early)
    n_vals = len(vid) + 1
    left_w = [0] * n_vals
    left_r = [0] * n_vals
    for r in range(n):
        if is_write[r]:
            left_w[val[r]] += 1
        else:
            left_r[val[r]] += 1

    cache: set = set()
    stack: list = []
    st = vid.get(None, DEAD)
    lo = 0
    win = 0
    pend = 0
    best_len = -1
    best: list[int] = []
    blocked = -1
    steps = 0
    e = nxt[head]
    fresh = True
    while nxt[head] != -1:
        if fresh:
            # a new level: look for a forced op among the minimal calls
            # (those before the first return)
            fresh = False
            x = e
            while match[x] >= 0:
                rx = node_op[x]
                if val[rx] == st and (not is_write[rx] or st == DEAD):
                    e = x
                    break
                x = nxt[x]
        mt = match[e]
        if mt >= 0:  # a call: try to linearize its op now
            r = node_op[e]
            if is_write[r]:
                nst = val[r]
                if prune and nst != st and left_r[st] and not left_w[st]:
                    e = nxt[e]
                    continue
            elif val[r] == st:
                nst = st
            else:
                e = nxt[e]
                continue
            if r < n_done:
                j = r - lo
                nwin = win | (1 << j)
                nlo = lo
                if j == 0:  # drop the run of trailing ones
                    t = ((nwin + 1) & ~nwin).bit_length() - 1
                    nwin >>= t
                    nlo += t
                npend = pend
            else:
                nlo, nwin, npend = lo, win, pend | (1 << (r - n_done))
            k = (nlo, nwin, npend, nst)
            if k not in cache:
                cache.add(k)
                if is_write[r]:
                    left_w[nst] -= 1
                else:
                    left_r[nst] -= 1
                stack.append((e, st, lo, win, pend))
                st, lo, win, pend = nst, nlo, nwin, npend
                # lift e and its return mt
                p, q = prv[e], nxt[e]
                nxt[p] = q
                prv[q] = p
                p, q = prv[mt], nxt[mt]
                nxt[p] = q
                if q != -1:
                    prv[q] = p
                e = nxt[head]
                fresh = True
                steps += 1
                if not steps & 1023 and (
                        (deadline is not None and time.monotonic() > deadline)
                        or (max_states is not None and len(cache) > max_states)):
                    return None
                continue
            if not (nst == st and (not is_write[r] or st == DEAD)):
                e = nxt[e]
                continue
            # a forced op leading to an explored (failed) configuration:
            # this level fails
        elif record and len(stack) > best_len:
            # a return: its op should have been linearized by now
            best_len = len(stack)
            best = [order[node_op[s[0]]] for s in stack]
            blocked = order[node_op[e]]
        # Backtrack: pop choices until one that was not forced, then try the
        # next call after it.
        while True:
            if not stack:
                if record:
                    return False, best, blocked
                return False
            e, st, lo, win, pend = stack.pop()
            mt = match[e]
            # unlift: re-link the return, then the call
            p, q = prv[mt], nxt[mt]
            nxt[p] = mt
            if q != -1:
                prv[q] = mt
            p, q = prv[e], nxt[e]
            nxt[p] = e
            prv[q] = e
            r = node_op[e]
            if is_write[r]:
                left_w[val[r]] += 1
                if val[r] != st or st != DEAD:
                    break
            else:
                left_r[val[r]] += 1
        e = nxt[e]
    return True


def check_history(h: History, *, timeout: float | None = None, first_only: bool = False,
                  max_states: int | None = DEFAULT_MAX_STATES) -> Result:
    """Check every key of ``h`` (keys in sorted order).

    ``first_only`` stops at the first failing key; ``timeout`` (seconds, for
    the whole history) and ``max_states`` (per key) bound the search: past
    them the result is unknown (``ok`` None).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    by_key = h.by_key()
    res = Result(True, len(h.ops), len(by_key), h.pending_writes)
    for key in sorted(by_key):
        kr = check_register(by_key[key], key, deadline=deadline, max_states=max_states)
        if kr.ok is None:
            res.ok = None
            res.explanation = kr.explanation
            return res
        if not kr.ok:
            res.ok = False
            res.failures.append(kr)
            if res.explanation is None:
                res.explanation = kr.explanation
                if first_only:
                    break
    if len(res.failures) > 1:
        res.explanation += f" (and {len(res.failures) - 1} more failing keys)"
    return res
