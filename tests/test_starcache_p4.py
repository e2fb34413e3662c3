"""p4src/starcache/starcache.p4 against starcache.c.

Statically (no P4 toolchain here; names, sizes and preprocessing:
tests/test_p4.py and tests/test_constants.py):

- what the BMv2 driver writes next to a ``lookup`` insert and delete
  (StarCacheP4) is exactly what starcache.c's table_add resets and its
  table_del sets;
- the compile-time defines follow the params, and refuse what starcache.c
  refuses.

On BMv2 (marked bmv2: skipped with one line without p4c/simple_switch_grpc),
PTF style: the golden vectors through the program with nothing cached.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from netkv.constants import SC_STATE_DRAINING, SC_STATE_INVALID, ScStat
from netkv.pipeline import Pipeline
from netkv.protocols.starcache import KEY_RESET, StarCacheP4, hkey_words, p4_defines
from netkv.wire import codec
from netkv.wire.codec import StarcacheOp

try:
    from test_p4 import (CLIENT, N_SERVERS, PROGRAMS, _vectors, c_names, frame, needs_bmv2,
                         needs_root, rack_factory)
except ImportError:
    from tests.test_p4 import (CLIENT, N_SERVERS, PROGRAMS, _vectors, c_names, frame,
                               needs_bmv2, needs_root, rack_factory)

__all__ = ["rack_factory"]   # the fixture, for the BMv2 test

C_SRC = PROGRAMS["starcache"][0]


class Recorder:
    """RegisterCells that remembers what the semantics wrote."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, int, int]] = []

    def write(self, cells):  # type: ignore[no-untyped-def]
        self.writes += list(cells)

    def reset(self, names):  # type: ignore[no-untyped-def]
        raise AssertionError(f"no register reset expected: {names}")

    def resolve(self, name: str, index: int) -> tuple[str, int]:
        return name, index


def _dirty(p: Pipeline, idx: int) -> None:
    for name in ("state", "pending_writes", "pop", "qlen", "front", "rear", "ack", "inloop",
                 "stale", "write_ts", "last_src", "last_seq", "wcount", "wmask"):
        p.reg_write(name, idx, SC_STATE_DRAINING if name == "state" else 2)


def test_lookup_insert_and_delete_do_what_starcache_c_does() -> None:
    regs, _ = c_names(C_SRC)
    key = hkey_words(b"k-hot")
    with Pipeline("starcache", n_servers=4, n_clients=1, params="keys=4;slots=4") as p:
        _dirty(p, 2)
        before = {n: p.reg_read(n, 2) for n in sorted(regs) if n not in
                  ("hits", "overflow", "stats", "n_servers")}
        p.table_add("lookup", key, [2, 1])
        after = {n: p.reg_read(n, 2) for n in before}
        p.table_delete("lookup", key)
        deleted = {n: p.reg_read(n, 2) for n in before}
    c_reset = {n: v for n, v in after.items() if v != before[n]}
    sem, rec = StarCacheP4(), Recorder()
    sem.before_table_add(rec, "lookup", key, [2, 1])
    assert {n: v for n, i, v in rec.writes if i == 2} == c_reset == dict(KEY_RESET)
    assert len(rec.writes) == len(KEY_RESET)
    rec.writes.clear()
    sem.after_table_delete(rec, "lookup", key)
    c_deleted = {n: v for n, v in deleted.items() if v != after[n]}
    assert rec.writes == [("state", 2, SC_STATE_INVALID)]
    assert c_deleted in ({}, {"state": SC_STATE_INVALID})   # INVALID already after the insert
    assert deleted["state"] == SC_STATE_INVALID
    rec.writes.clear()
    sem.after_table_delete(rec, "lookup", key)               # unknown now: nothing
    sem.before_table_add(rec, "node_fwd", [5], [5])          # other tables: nothing
    assert rec.writes == []


def test_defines_follow_the_params() -> None:
    loop = {"SC_LOOP_OUT": 510, "SC_LOOP_IN": 511}   # the plug-in's loop_ports
    assert p4_defines({}) == {"SC_KEYS": 4096, "SC_SLOTS": 16, "SC_FAITHFUL": 0,
                              "SC_STUCK_US": 20000, **loop}
    assert p4_defines({"keys": "256", "slots": "256", "faithful": "1", "stuck_us": "5"}) == {
        "SC_KEYS": 256, "SC_SLOTS": 256, "SC_FAITHFUL": 1, "SC_STUCK_US": 5, **loop}
    for bad in ({"keys": "4097"}, {"slots": "0"}, {"faithful": "2"}, {"stuck_us": "0"}):
        with pytest.raises(ValueError, match="starcache"):
            p4_defines(bad)


# ---- BMv2 -------------------------------------------------------------------------


def _sc_frame(m: codec.Msg, src: int, dst: int) -> bytes:
    return frame(src, dst, codec.encode(m), sport=40000 if src == CLIENT else 5008,
                 dport=5008 if dst < N_SERVERS else 40000)


@needs_bmv2
@needs_root
def test_vectors_with_nothing_cached(rack_factory: Any) -> None:
    """Nothing in `lookup`: a client's R_REQ, W_REQ and CRN_REQ go to server 3
    (a W_REQ's FLAG, FRAG and CACHED zeroed), the servers' messages reach the
    client untouched, a client's server-only op is dropped and counted, and
    an undecodable vector is dropped."""
    rack = rack_factory("starcache", p4_defines({"keys": "4", "slots": "4"}),
                        {"keys": "4", "slots": "4"})
    assert rack.drv is not None
    refused = forged = 0
    for v in _vectors("starcache"):
        payload = bytes.fromhex(v["hex"])
        if "error" in v:
            data = frame(CLIENT, 3, payload, sport=40000, dport=5008)
            assert rack.send(CLIENT, data) == {}, v["name"]
            continue
        m = codec.decode("starcache", payload)
        request = m.op in (StarcacheOp.R_REQ, StarcacheOp.W_REQ, StarcacheOp.CRN_REQ)
        if request:
            out = m
            if m.op == StarcacheOp.W_REQ:
                forged += int(m.frag_cnt != 0 or m.frag_idx != 0 or m.flags != 0)
                out = dataclasses.replace(m, frag_cnt=0, frag_idx=0, flags=0)
            elif m.flags:
                forged += 1
                out = dataclasses.replace(m, flags=0)
            got = rack.send(CLIENT, _sc_frame(m, CLIENT, 3))
            assert got == {3: [_sc_frame(out, CLIENT, 3)]}, v["name"]
        else:
            data = _sc_frame(m, 1, CLIENT)
            assert rack.send(1, data) == {CLIENT: [data]}, v["name"]
            assert rack.send(CLIENT, _sc_frame(m, CLIENT, 1)) == {}, v["name"]
            refused += 1
    assert rack.drv.reg_read("stats", int(ScStat.HOST_SERVER_OP)) == refused > 0
    assert rack.drv.reg_read("stats", int(ScStat.FORGED_FIELDS)) == forged
