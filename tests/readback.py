"""The read-back rule of the hostile-client tests, one rule for every history form.

After a run with hostile clients, each key is read once more; a read-back is
lost when the key has acknowledged writes and the value read is not one they
allow: no reply, the key's initial (preloaded) value, a value no write
carries, or the value of an acknowledged write that completed before the
latest acknowledged write began (values are unique per write; a write never
acknowledged - a hostile client's - may take effect at any time after it was
sent). tests/test_hostile_mininet.py adapts kvclient's CSV rows to it,
tests/test_hostile_sim.py the engine's numpy history.

- Write: the write whose value a read-back returned.
- lost_write: the rule; why a key's read-back is lost, or None.
"""

from __future__ import annotations

from dataclasses import dataclass

INITIAL = "the initial (preloaded) value"


@dataclass(frozen=True)
class Write:
    """A write whose value was read: its name in messages, whether it was
    acknowledged and when it completed."""

    name: str
    acked: bool
    complete_ns: int


def lost_write(key: int, latest_acked_invoke_ns: int | None,
               read: Write | str | None) -> str | None:
    """Why key's read-back is lost, or None if it is not. latest_acked_invoke_ns:
    when the key's latest acknowledged write began (None: no acknowledged write);
    read: the Write whose value was read, INITIAL, the name of a value no write
    carries, or None for no reply."""
    if latest_acked_invoke_ns is None:
        return None
    if read is None:
        return f"key {key}: no read-back reply"
    if read == INITIAL:
        return f"key {key}: {INITIAL} read after acked writes"
    if isinstance(read, str):
        return f"key {key}: read value {read}, which nobody wrote"
    if read.acked and read.complete_ns < latest_acked_invoke_ns:
        return f"key {key}: read {read.name}, superseded by a later acked write"
    return None
