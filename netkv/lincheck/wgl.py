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
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from netkv.lincheck.history import INF, History, Op

_PREFIX_SHOWN = 3  # last ops of the longest linearizable prefix in explanations
_WANT = True


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
    """Outcome of a check. ``ok`` is True, False, or None (unknown: timed out)."""

    ok: bool | None
    ops: int = 0
    keys: int = 0
    pending_writes: int = 0
    explanation: str | None = None  # first failing key's explanation
    failures: list[KeyResult] = field(default_factory=list)
    checker: str = "wgl"

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


def check_register(ops: Sequence[Op], key: str = "", *, explain: bool = True,
                   deadline: float | None = None, reduce: bool = True) -> KeyResult:
    """Check one key's operations against a register (initial value null).

    ``deadline`` is a time.monotonic() value; past it the result is unknown.
    With ``explain``, a failing check is re-run once to record the longest
    linearizable prefix and the operation that blocks it. ``reduce`` applies
    :func:`reduce_pending` first (same verdict, much faster with many
    pending writes).
    """
    if reduce:
        ops = reduce_pending(ops)
    ok = _search(ops, False, deadline)
    if ok is not False or not explain:
        return KeyResult(key, ok, len(ops))
    _, best, blocked_i, state = _search(ops, True, None)
    prefix = [ops[i] for i in best]
    blocked = ops[blocked_i]
    shown = "; ".join(op.describe() for op in prefix[-_PREFIX_SHOWN:])
    more = "... " if len(prefix) > _PREFIX_SHOWN else ""
    text = (f"key {json.dumps(key)}: longest linearizable prefix has {len(prefix)} of {len(ops)} ops"
            + (f" ({more}{shown})" if prefix else "")
            + f"; then the register holds {_fmt_value(state)} and "
            f"{blocked.describe()} cannot be linearized")
    return KeyResult(key, False, len(ops), text, prefix, blocked)


def _search(ops: Sequence[Op], record: bool, deadline: float | None):
    """WGL search. Returns True / False / None (timeout); with ``record``,
    (False, best_prefix_indices, blocked_index, state) on failure."""
    n = len(ops)
    if n == 0:
        return True
    # number ops: completed ones by call time, pending writes after them
    order = sorted(range(n), key=lambda i: (ops[i].ret == INF, ops[i].call))
    n_done = sum(1 for op in ops if op.ret != INF)
    # intern values: None -> 0
    vid: dict[str | None, int] = {None: 0}
    is_write = [False] * n
    val = [0] * n
    ret_t = [0] * n
    for r, i in enumerate(order):
        op = ops[i]
        is_write[r] = op.f == "write"
        ret_t[r] = op.ret
        val[r] = vid.setdefault(op.value, len(vid))
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

    cache: set = set()
    stack: list = []
    st = 0
    lo = 0
    win = 0
    pend = 0
    best_len = -1
    best: list[int] = []
    blocked = -1
    best_state = 0
    steps = 0
    e = nxt[head]
    fresh = True
    chosen = -1
    while nxt[head] != -1:
        if fresh:
            # A new level. Among the minimal calls (those before the first
            # return), prefer a legal read: it needs no alternatives (see
            # below). Failing that, try first a write of the value that the
            # minimal read returning earliest wants; if that write fails, the
            # level restarts from the head (the memo skips it).
            fresh = False
            x = e
            want = -1
            want_t = INF
            while match[x] >= 0:
                rx = node_op[x]
                if not is_write[rx]:
                    if val[rx] == st:
                        e = x
                        break
                    if ret_t[rx] < want_t:
                        want_t = ret_t[rx]
                        want = val[rx]
                x = nxt[x]
            else:
                if want >= 0 and _WANT:
                    x = e
                    while match[x] >= 0:
                        rx = node_op[x]
                        if is_write[rx] and val[rx] == want:
                            if x != e:
                                e = chosen = x
                            break
                        x = nxt[x]
        mt = match[e]
        if mt >= 0:  # a call: try to linearize its op now
            r = node_op[e]
            if is_write[r]:
                nst = val[r]
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
                stack.append((e, st, lo, win, pend, e == chosen))
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
                if deadline is not None and not steps & 1023 and time.monotonic() > deadline:
                    return None
                continue
            if is_write[r]:
                e = nxt[e]
                continue
            # a read leading to an explored (failed) configuration: see below
        elif record and len(stack) > best_len:
            # a return: its op should have been linearized by now
            best_len = len(stack)
            best = [order[node_op[s[0]]] for s in stack]
            blocked = order[node_op[e]]
            best_state = st
        # Backtrack. A read that is legal and minimal (all ops that returned
        # before its call are linearized) can be moved to the front of any
        # successful continuation (it changes no state), so if linearizing
        # it next fails, every other choice at that level fails too: keep
        # popping until a write choice, then try the next call after it.
        while True:
            if not stack:
                if record:
                    return False, best, blocked, _state_value(vid, best_state)
                return False
            e, st, lo, win, pend, restart = stack.pop()
            mt = match[e]
            # unlift: re-link the return, then the call
            p, q = prv[mt], nxt[mt]
            nxt[p] = mt
            if q != -1:
                prv[q] = mt
            p, q = prv[e], nxt[e]
            nxt[p] = e
            prv[q] = e
            if is_write[node_op[e]]:
                break
        e = nxt[head] if restart else nxt[e]
    return True


def _state_value(vid: dict[str | None, int], s: int) -> str | None:
    for v, i in vid.items():
        if i == s:
            return v
    return None


def check_history(h: History, *, timeout: float | None = None, first_only: bool = False) -> Result:
    """Check every key of ``h``. ``first_only`` stops at the first failing key."""
    deadline = None if timeout is None else time.monotonic() + timeout
    by_key = h.by_key()
    res = Result(True, len(h.ops), len(by_key), h.pending_writes)
    for key in sorted(by_key):
        kr = check_register(by_key[key], key, deadline=deadline)
        if kr.ok is None:
            res.ok = None
            res.explanation = f"timed out after {timeout} s (at key {json.dumps(key)})"
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
