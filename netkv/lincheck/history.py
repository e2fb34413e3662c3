"""Read, validate and pair a Jepsen/Knossos-style ``history.jsonl``.

One JSON object per line (blank lines are ignored)::

    {"process": 3, "type": "invoke", "f": "write", "key": "k7", "value": "v12", "time_ns": 1000}
    {"process": 3, "type": "ok",     "f": "write", "key": "k7", "value": "v12", "time_ns": 2500}
    {"process": 4, "type": "invoke", "f": "read",  "key": "k7", "value": null,  "time_ns": 1200}
    {"process": 4, "type": "ok",     "f": "read",  "key": "k7", "value": "v12", "time_ns": 2600}

- ``process``: integer or string; one sequential stream with at most one
  operation open (``1`` and ``"1"`` are different processes).
- ``type``: ``invoke`` opens an operation; ``ok``, ``fail`` or ``info``
  completes the process's open operation.
- ``f``: ``read`` or ``write`` (a completion must repeat its invoke's ``f``).
- ``key``: string, required on the invoke; optional on the completion, where
  it must match.
- ``value``: string or null. A write's value comes from its invoke (its
  completion may repeat it; it is not looked at). A read's value comes from
  its ``ok`` completion (null: the key was absent; a missing ``value`` counts
  as null).
- ``time_ns``: non-negative integer below 2**63-1; never decreasing within a
  process. Lines of different processes may be interleaved in any order.
- Other fields (``ver``, ...) are ignored.

Pairing (identical in tools/porcupine/main.go):

- ``ok``: the operation took effect once, within [invoke time, ok time]
  (a closed interval, as in Porcupine).
- ``fail``: it definitely did not take effect: dropped.
- ``info`` or never completed: outcome unknown. A read constrains nothing and
  is dropped; a write gets return time +inf (it may take effect at any point
  after its invocation, or never).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

INF = math.inf
_TYPES = ("invoke", "ok", "fail", "info")
_FS = ("read", "write")
_MAX_TIME = 2**63 - 1
_DECODER = json.JSONDecoder()


class HistoryError(ValueError):
    """A malformed history; ``str()`` is one line naming the file and line."""

    def __init__(self, source: str, line: int, msg: str):
        self.source, self.line, self.msg = source, line, msg
        super().__init__(f"{source}:{line}: {msg}")


@dataclass(frozen=True, slots=True)
class Op:
    """One paired operation on one key's register."""

    process: int | str
    f: str  # "read" | "write"
    key: str
    value: str | None  # written value, or the value the read returned
    call: int  # invoke time_ns
    ret: int | float  # completion time_ns; INF when the outcome is unknown
    line: int  # line number of the invoke

    @property
    def pending(self) -> bool:
        return self.ret == INF

    def describe(self) -> str:
        p = json.dumps(self.process)
        v = json.dumps(self.value)
        what = f"write {v}" if self.f == "write" else f"read -> {v}"
        end = "inf)" if self.pending else f"{self.ret}]"
        tail = ", outcome unknown" if self.pending else ""
        return f"process {p} {what} [{self.call}, {end} (line {self.line}{tail})"


@dataclass
class History:
    source: str
    ops: list[Op] = field(default_factory=list)  # ok ops + pending writes, in completion order
    events: int = 0  # non-blank lines
    failed: int = 0  # "fail" completions (dropped)
    dropped_reads: int = 0  # info / never-completed reads (dropped)
    pending_writes: int = 0  # info / never-completed writes (ret = INF)

    def by_key(self) -> dict[str, list[Op]]:
        """Operations per key (each key is an independent register)."""
        out: dict[str, list[Op]] = {}
        for op in self.ops:
            out.setdefault(op.key, []).append(op)
        return out


def _process(rec: dict, err) -> int | str:
    if "process" not in rec or rec["process"] is None:
        raise err('missing "process"')
    p = rec["process"]
    if isinstance(p, bool) or not isinstance(p, int | str):
        raise err(f'"process" must be an integer or a string, got {json.dumps(p)}')
    return p


def parse_lines(lines: Iterable[str | bytes], source: str = "<history>") -> History:
    """Parse history lines; raise HistoryError (one line) on the first bad one."""
    h = History(source)
    open_ops: dict[int | str, tuple[int, str, str, str | None, int]] = {}
    last_time: dict[int | str, int] = {}
    ops = h.ops
    decode = _DECODER.raw_decode
    lineno = 0

    def err(msg: str) -> HistoryError:
        return HistoryError(source, lineno, msg)

    for lineno, text in enumerate(lines, 1):
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as e:
                raise err(f"not UTF-8: {e.reason}") from None
        text = text.strip()
        if not text:
            continue
        h.events += 1

        if not text.startswith("{"):
            raise err("not a JSON object")
        try:
            rec, end = decode(text)
        except json.JSONDecodeError as e:
            raise err(f"invalid JSON: {e.msg} (column {e.colno})") from None
        if end != len(text):
            raise err(f"invalid JSON: extra data (column {end + 1})")
        if not isinstance(rec, dict):
            raise err("not a JSON object")
        proc = _process(rec, err)
        typ = rec.get("type")
        if typ is None:
            raise err('missing "type"')
        if typ not in _TYPES:
            raise err(f"unknown type {json.dumps(typ)} (expected invoke, ok, fail or info)")
        f = rec.get("f")
        if f is None:
            raise err('missing "f"')
        if f not in _FS:
            raise err(f"unknown f {json.dumps(f)} (expected read or write)")
        t = rec.get("time_ns")
        if t is None:
            raise err('missing "time_ns"')
        if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < _MAX_TIME:
            raise err(f'"time_ns" must be a non-negative integer below 2^63-1, got {json.dumps(t)}')
        val = rec.get("value")
        if val is not None and not isinstance(val, str):
            raise err(f'"value" must be a string or null, got {json.dumps(val)}')
        key = rec.get("key")
        if key is not None and not isinstance(key, str):
            raise err(f'"key" must be a string, got {json.dumps(key)}')
        prev = last_time.get(proc)
        if prev is not None and t < prev:
            raise err(f"time_ns {t} goes backwards for process {json.dumps(proc)} "
                      f"(previous event at {prev})")
        last_time[proc] = t
        o = open_ops.get(proc)
        if typ == "invoke":
            if o is not None:
                raise err(f"second invoke for process {json.dumps(proc)}, whose operation "
                          f"from line {o[0]} is still open")
            if key is None:
                raise err('missing "key"')
            open_ops[proc] = (lineno, f, key, val if f == "write" else None, t)
            continue
        if o is None:
            raise err(f"{json.dumps(typ)} completion for process {json.dumps(proc)} "
                      "without an open invoke")
        oline, of, okey, oval, ocall = o
        if f != of:
            raise err(f"completion f {json.dumps(f)} does not match the invoke on line {oline}")
        if key is not None and key != okey:
            raise err(f"completion key {json.dumps(key)} does not match the invoke on line "
                      f"{oline} ({json.dumps(okey)})")
        del open_ops[proc]
        if typ == "ok":
            ops.append(Op(proc, of, okey, oval if of == "write" else val, ocall, t, oline))
        elif typ == "fail":
            h.failed += 1
        elif of == "write":  # info write: may or may not have taken effect
            ops.append(Op(proc, of, okey, oval, ocall, INF, oline))
            h.pending_writes += 1
        else:  # info read: constrains nothing
            h.dropped_reads += 1
    # operations still open at the end: outcome unknown, like "info"
    for proc, (oline, of, okey, oval, ocall) in sorted(open_ops.items(), key=lambda kv: kv[1][0]):
        if of == "write":
            ops.append(Op(proc, of, okey, oval, ocall, INF, oline))
            h.pending_writes += 1
        else:
            h.dropped_reads += 1
    return h


def read_history(path: str | Path) -> History:
    """Read and validate ``path`` (a history.jsonl)."""
    path = Path(path)
    with path.open("rb") as fh:
        return parse_lines(fh, str(path))
