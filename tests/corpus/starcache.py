"""StarCache: a read of a cached key parked and answered by its cache packet
coming round the loop, an idle cache packet looping on, a write's
invalidation and the reply that revalidates and enters the loop, the old
cache packet superseded, two overlapping writes whose replies revalidate
nothing, a multi-packet write counted once and its reply's
fragments entering the loop, an evicted or INVALID key's cache packet dropping
itself, a forged reply from a client dropped; RESULT RETRY on the wire: a
fetch reply the switch does not take (an uncached key's, a VALID key's, one
whose F_REQ passed before writes counted since, or before an uncounted
write's reply) goes on with it, a server's RETRY
without value bytes never enters the loop, a refused write's RETRY with the
stored value revalidates like a write that changed nothing.

The recirculation port is ``LOOP`` (the in-process pipeline's recirc port,
the CPU port + 1): a frame sent on it enters as a cache packet, a frame out of
it is what the switch put into the loop. On netkv-switch it is the ``--loop``
pair (OUT, IN) with both host ends watched (tests/test_corpus.py)."""

from __future__ import annotations

import dataclasses

from netkv.constants import (
    SC_ITEM_BYTES,
    SC_LAST_OVERLAP,
    SC_STATE_INVALID,
    SC_STATE_VALID,
    SERVER_NONE,
    STARCACHE_PORT,
    ScStat,
    sc_mcast_group,
)
from netkv.wire.codec import Msg, Proto, Result, StarcacheOp, encode, starcache_hkey

from . import CLIENT, CLIENT_PORT, NODES, Case, Step, frame

LOOP = NODES + 1              # CPU port = NODES, the recirculation port after it
SLOTS = 4
# stuck_us 10 s: on netkv-switch a step waits for the ports' output, so a read
# a step after a write came later than the default 20 ms and restarted the
# count: the write's reply was then a late one, not the case's subject
PARAMS = f"keys=16;slots={SLOTS};stuck_us=10000000"
KEY, OTHER = b"user:000042", b"user:000043"
VALUE = b"v" * 100
IDX, HOME = 2, 3


def words(key: bytes) -> list[int]:
    h = starcache_hkey(key)
    return [h >> 64, h & 0xFFFFFFFFFFFFFFFF]


CACHED = dict(
    tables=[("lookup", words(KEY), [IDX, HOME])],
    registers=[("state", IDX, SC_STATE_VALID), ("inloop", IDX, 1)],
    groups={sc_mcast_group(CLIENT): [CLIENT, LOOP]},
)


def msg(op: StarcacheOp, key: bytes = KEY, **kw: object) -> Msg:
    return dataclasses.replace(Msg(proto=Proto.STARCACHE, op=op, key=key, hkey=starcache_hkey(key),
                                   req_id=11, send_ns=1234, server_id=HOME), **kw)  # type: ignore[arg-type]


def req(m: Msg) -> bytes:
    return frame(CLIENT, HOME, encode(m), sport=CLIENT_PORT, dport=STARCACHE_PORT)


def rep(m: Msg) -> bytes:
    """From the home server to the client (a reply, or a cache packet made of one)."""
    return frame(HOME, CLIENT, encode(m), sport=STARCACHE_PORT, dport=CLIENT_PORT)


READ = msg(StarcacheOp.R_REQ)
# a cache packet as it comes round: the reply that last used it (another SEQ)
LOOPING = msg(StarcacheOp.R_REP, req_id=99, send_ns=7, frag_cnt=1, flags=1,
              server_id=SERVER_NONE, value=VALUE)
SERVED = dataclasses.replace(LOOPING, req_id=READ.req_id, send_ns=READ.send_ns)
WRITE = msg(StarcacheOp.W_REQ, value=b"w" * 100)
WRITE2 = msg(StarcacheOp.W_REQ, req_id=12, value=b"x" * 100)


def lat(n: int) -> int:
    """A write number or fetch stamp n of the key as LAT carries it
    (starcache.c SC_LAT): its CacheIdx in the high 16 bits, n's low 16."""
    return IDX << 16 | n & 0xFFFF


def counted(m: Msg, n: int, **kw: object) -> Msg:
    """A W_REQ as the switch counts it: FLAG 1 (multi-packet: CACHED) and,
    in LAT, its write number n (the key's wcount after counting it)."""
    return dataclasses.replace(m, send_ns=lat(n), **kw)  # type: ignore[arg-type]


# the servers' replies to them echo LAT, the write number
WRITE_REP = msg(StarcacheOp.W_REP, frag_cnt=1, value=WRITE.value, send_ns=lat(1))
WRITE2_REP = msg(StarcacheOp.W_REP, req_id=12, frag_cnt=1, value=WRITE2.value, send_ns=lat(2))
FETCH_REP = msg(StarcacheOp.F_REP, key=OTHER, frag_cnt=1, value=VALUE)
# a fetch reply of the cached key (VALID: a write's reply revalidated it)
LATE_FETCH_REP = msg(StarcacheOp.F_REP, frag_cnt=1, value=VALUE)
# fetch replies whose F_REQ passed the switch when the key's write count
# (wcount) was 5, and 7 (LAT: the switch's stamp, echoed by the server)
FETCH5_REP = msg(StarcacheOp.F_REP, frag_cnt=1, value=VALUE, send_ns=lat(5))
FETCH7_REP = msg(StarcacheOp.F_REP, frag_cnt=1, value=VALUE, send_ns=lat(7))
# the server's answer to a write that passed the switch uncounted (the key
# uncached or DRAINING then): FLAG 0, no value, LAT the client's
UNCOUNTED_REP = msg(StarcacheOp.W_REP, frag_cnt=0)
# the server's answer to a counted W_REQ whose HKEY is not its key's
FORGED_REP = msg(StarcacheOp.W_REP, frag_cnt=1, result=Result.RETRY, send_ns=lat(1))
# the server's answer to a counted multi-packet write whose FRAG 0 came
# without the rest: not applied (RETRY), the key's stored value attached
REFUSED_REP = msg(StarcacheOp.W_REP, frag_cnt=1, result=Result.RETRY, value=VALUE,
                  send_ns=lat(1))


# a write of a 2-packet item (docs/starcache.md, "Multi-packet items"): the
# client sends its 2 fragments (1427 + 573 B of value with the 11 B key)
BIG = bytes(range(256)) * 7 + bytes(208)
CHUNK = SC_ITEM_BYTES - len(KEY)
WFRAG = [msg(StarcacheOp.W_REQ, frag_cnt=2, frag_idx=i, value=BIG[i * CHUNK:(i + 1) * CHUNK])
         for i in range(2)]
WFRAG_REP = [msg(StarcacheOp.W_REP, frag_cnt=2, frag_idx=i, value=BIG[i * CHUNK:(i + 1) * CHUNK],
                 send_ns=lat(1)) for i in range(2)]


def stat(s: ScStat, n: int = 1) -> dict[tuple[str, int], int]:
    return {("stats", int(s)): n}


CASES = [
    Case("starcache/an uncached read goes to its server", "starcache", [
        Step(CLIENT, req(msg(StarcacheOp.R_REQ, key=OTHER)),
             {HOME: [req(msg(StarcacheOp.R_REQ, key=OTHER))]}),
    ], params=PARAMS, **CACHED, after={("hits", 0): 0, **stat(ScStat.PARKED, 0)}),
    Case("starcache/a read of a cached key parks; its cache packet answers it", "starcache", [
        Step(CLIENT, req(READ), {}, why="parked: nothing leaves the switch"),
        Step(LOOP, rep(LOOPING), {CLIENT: [rep(SERVED)], LOOP: [rep(SERVED)]},
             why="the head's client, SEQ, LAT and UDP port; one copy back into the loop"),
        Step(LOOP, rep(SERVED), {LOOP: [rep(SERVED)]},
             why="the queue is empty again: the cache packet loops on as it is"),
    ], params=PARAMS, **CACHED,
        after={("hits", 0): 1, ("pop", IDX): 1, ("qlen", IDX): 0, ("front", IDX): 1,
               ("req_ip", IDX * SLOTS): CLIENT, ("req_seq", IDX * SLOTS): READ.req_id,
               ("req_cookie", IDX * SLOTS): CLIENT_PORT, **stat(ScStat.PARKED),
               **stat(ScStat.SERVED), **stat(ScStat.LOOPS)}),
    Case("starcache/a write invalidates; its reply revalidates and enters the loop", "starcache", [
        Step(CLIENT, req(WRITE), {HOME: [req(counted(WRITE, 1, frag_cnt=1))]},
             why="FLAG 1: the server attaches the new value to its reply; LAT: its write "
                 "number, which the reply echoes"),
        Step(CLIENT, req(READ), {HOME: [req(READ)]}, why="INVALID: reads go to the server"),
        Step(HOME, rep(WRITE_REP), {CLIENT: [rep(WRITE_REP)], LOOP: [rep(WRITE_REP)]},
             why="the PRE group {client, loop}"),
        Step(LOOP, rep(LOOPING), {},
             why="the old cache packet, marked stale by the revalidation, drops itself"),
    ], params=PARAMS, **CACHED,
        after={("state", IDX): SC_STATE_VALID, ("pending_writes", IDX): 0, ("inloop", IDX): 1,
               ("stale", IDX): 0, **stat(ScStat.INVALIDATIONS), **stat(ScStat.INVALID_READS),
               **stat(ScStat.REVALIDATIONS), **stat(ScStat.SUPERSEDED)}),
    Case("starcache/overlapping writes: neither reply revalidates", "starcache", [
        Step(CLIENT, req(WRITE), {HOME: [req(counted(WRITE, 1, frag_cnt=1))]}),
        Step(CLIENT, req(WRITE2), {HOME: [req(counted(WRITE2, 2, frag_cnt=1))]},
             why="counted while the first is in flight: last_src SC_LAST_OVERLAP (the server "
                 "may apply the two in the other order)"),
        Step(HOME, rep(WRITE_REP), {CLIENT: [rep(WRITE_REP)]}),
        Step(HOME, rep(WRITE2_REP), {CLIENT: [rep(WRITE2_REP)]},
             why="the count reaches 0, but no reply of an overlap is known to carry the "
                 "stored value: to the client only, the key stays INVALID"),
    ], params=PARAMS, **CACHED,
        after={("state", IDX): SC_STATE_INVALID, ("pending_writes", IDX): 0,
               ("last_src", IDX): SC_LAST_OVERLAP, ("inloop", IDX): 1,
               **stat(ScStat.INVALIDATIONS, 2), **stat(ScStat.REVALIDATIONS, 0),
               **stat(ScStat.STALE_UPDATES, 2)}),
    Case("starcache/a multi-packet write is counted once; its reply's fragments enter the loop",
         "starcache", [
        Step(CLIENT, req(WFRAG[1]), {HOME: [req(WFRAG[1])]},
             why="FRAG 1 (the client sends FRAG 0 last): to the server untouched, not counted"),
        Step(CLIENT, req(WFRAG[0]), {HOME: [req(counted(WFRAG[0], 1, flags=1))]},
             why="FRAG 0 invalidates and is counted; FLAG 2 is the write's shape, so the "
                 "switch says 'attach the value' in CACHED"),
        Step(HOME, rep(WFRAG_REP[0]), {CLIENT: [rep(WFRAG_REP[0])], LOOP: [rep(WFRAG_REP[0])]},
             why="the reply's first fragment revalidates: {client, loop}"),
        Step(HOME, rep(WFRAG_REP[1]), {CLIENT: [rep(WFRAG_REP[1])], LOOP: [rep(WFRAG_REP[1])]},
             why="the second joins behind it (one unstale packet of the key loops)"),
    ], params=PARAMS, **CACHED,
        after={("state", IDX): SC_STATE_VALID, ("pending_writes", IDX): 0, ("inloop", IDX): 3,
               ("stale", IDX): 1, **stat(ScStat.INVALIDATIONS), **stat(ScStat.REVALIDATIONS),
               **stat(ScStat.FORGED_FIELDS, 0)}),
    Case("starcache/a cache packet of a key no longer cached drops itself", "starcache", [
        Step(LOOP, rep(dataclasses.replace(LOOPING, key=OTHER, hkey=starcache_hkey(OTHER))), {}),
    ], params=PARAMS, **CACHED, after={**stat(ScStat.LOOP_DROPS)}),
    Case("starcache/a cache packet of an INVALID key drops itself", "starcache", [
        Step(LOOP, rep(LOOPING), {}),
    ], params=PARAMS, tables=CACHED["tables"], groups=CACHED["groups"],
        registers=[("state", IDX, SC_STATE_INVALID), ("inloop", IDX, 1)],
        after={("inloop", IDX): 0, **stat(ScStat.LOOP_DROPS)}),
    Case("starcache/a fetch reply the switch does not take goes on with RETRY", "starcache", [
        Step(HOME, rep(FETCH_REP),
             {CLIENT: [rep(dataclasses.replace(FETCH_REP, result=Result.RETRY))]},
             why="not cached: RESULT 2 in the preamble, the controller fetches again"),
    ], params=PARAMS, **CACHED, after={**stat(ScStat.FETCHES, 0)}),
    Case("starcache/a fetch reply for a VALID key goes on with RETRY", "starcache", [
        Step(HOME, rep(LATE_FETCH_REP),
             {CLIENT: [rep(dataclasses.replace(LATE_FETCH_REP, result=Result.RETRY))]},
             why="a late one (a write's reply revalidated the key): its older value stays "
                 "out of the loop and the looping packet is not marked stale"),
    ], params=PARAMS, **CACHED,
        after={("inloop", IDX): 1, ("stale", IDX): 0, **stat(ScStat.FETCHES, 0)}),
    Case("starcache/a fetch reply older than writes counted since its F_REQ goes on with RETRY",
         "starcache", [
        Step(CLIENT, req(WRITE), {HOME: [req(counted(WRITE, 6, frag_cnt=1))]},
             why="counted: wcount 6"),
        Step(CLIENT, req(WRITE2), {HOME: [req(counted(WRITE2, 7, frag_cnt=1))]},
             why="counted while the first is in flight (an overlap): wcount 7"),
        Step(HOME, rep(counted(WRITE_REP, 6)), {CLIENT: [rep(counted(WRITE_REP, 6))]}),
        Step(HOME, rep(counted(WRITE2_REP, 7)), {CLIENT: [rep(counted(WRITE2_REP, 7))]},
             why="an overlap revalidates nothing: count 0, the key INVALID"),
        Step(HOME, rep(FETCH5_REP),
             {CLIENT: [rep(dataclasses.replace(FETCH5_REP, result=Result.RETRY))]},
             why="its F_REQ passed at wcount 5: the server may have read the value before "
                 "both writes, acknowledged since; refused, the controller fetches again"),
        Step(HOME, rep(FETCH7_REP), {CLIENT: [rep(FETCH7_REP)], LOOP: [rep(FETCH7_REP)]},
             why="no write counted since its F_REQ passed: taken, {destination, loop}"),
    ], params=PARAMS, tables=CACHED["tables"], groups=CACHED["groups"],
        registers=[("state", IDX, SC_STATE_INVALID), ("wcount", IDX, 5)],
        after={("state", IDX): SC_STATE_VALID, ("pending_writes", IDX): 0, ("wcount", IDX): 7,
               ("inloop", IDX): 1, ("stale", IDX): 0, **stat(ScStat.FETCHES),
               **stat(ScStat.REVALIDATIONS, 0), **stat(ScStat.STALE_UPDATES, 2)}),
    Case("starcache/an uncounted write's reply for a key inserted since invalidates it",
         "starcache", [
        Step(HOME, rep(FETCH5_REP), {CLIENT: [rep(FETCH5_REP)], LOOP: [rep(FETCH5_REP)]},
             why="the insert's fetch, stamped 5 with no write in flight: taken, though it "
                 "overtook a write that passed while the key was uncached"),
        Step(HOME, rep(UNCOUNTED_REP), {CLIENT: [rep(UNCOUNTED_REP)]},
             why="that write's reply (FLAG 0): the fetch may have read before it; late: "
                 "INVALID, last_src SC_LAST_OVERLAP, wcount moves on"),
        Step(CLIENT, req(READ), {HOME: [req(READ)]},
             why="the writer's next read goes to the server, not to the fetched value"),
    ], params=PARAMS, tables=CACHED["tables"], groups=CACHED["groups"],
        registers=[("state", IDX, SC_STATE_INVALID), ("wcount", IDX, 5)],
        after={("state", IDX): SC_STATE_INVALID, ("wcount", IDX): 6, ("pending_writes", IDX): 0,
               ("last_src", IDX): SC_LAST_OVERLAP, **stat(ScStat.LATE_WRITES),
               **stat(ScStat.FETCHES), **stat(ScStat.INVALID_READS)}),
    Case("starcache/a fetch reply behind an uncounted write's reply goes on with RETRY",
         "starcache", [
        Step(HOME, rep(UNCOUNTED_REP), {CLIENT: [rep(UNCOUNTED_REP)]},
             why="a write that passed while the key was uncached: late, wcount moves on"),
        Step(HOME, rep(FETCH5_REP),
             {CLIENT: [rep(dataclasses.replace(FETCH5_REP, result=Result.RETRY))]},
             why="stamped 5 before that write's reply: the server may have read before the "
                 "write; refused, the controller fetches again"),
    ], params=PARAMS, tables=CACHED["tables"], groups=CACHED["groups"],
        registers=[("state", IDX, SC_STATE_INVALID), ("wcount", IDX, 5)],
        after={("state", IDX): SC_STATE_INVALID, ("wcount", IDX): 6,
               **stat(ScStat.LATE_WRITES), **stat(ScStat.FETCHES, 0)}),
    Case("starcache/a server's RETRY without value bytes does not revalidate or loop",
         "starcache", [
        Step(CLIENT, req(WRITE), {HOME: [req(counted(WRITE, 1, frag_cnt=1))]}),
        Step(HOME, rep(FORGED_REP), {CLIENT: [rep(FORGED_REP)]},
             why="the counted write's reply (pending_writes 0), RETRY without a value: "
                 "to the client only"),
    ], params=PARAMS, **CACHED,
        after={("state", IDX): SC_STATE_INVALID, ("pending_writes", IDX): 0,
               **stat(ScStat.REVALIDATIONS, 0), **stat(ScStat.STALE_UPDATES, 1)}),
    Case("starcache/a refused write's RETRY with the stored value revalidates", "starcache", [
        Step(CLIENT, req(WFRAG[0]), {HOME: [req(counted(WFRAG[0], 1, flags=1))]},
             why="a multi-packet write's FRAG 0 alone: invalidates and is counted"),
        Step(HOME, rep(REFUSED_REP), {CLIENT: [rep(REFUSED_REP)], LOOP: [rep(REFUSED_REP)]},
             why="the server refused it (RETRY: the client sends it again) and attached the "
                 "stored value: pending_writes 0, VALID, {client, loop}, as a write that "
                 "changed nothing"),
    ], params=PARAMS, **CACHED,
        after={("state", IDX): SC_STATE_VALID, ("pending_writes", IDX): 0, ("inloop", IDX): 2,
               ("stale", IDX): 1, **stat(ScStat.REVALIDATIONS), **stat(ScStat.STALE_UPDATES, 0)}),
    Case("starcache/a duplicated write reply lowers no count and invalidates the key",
         "starcache", [
        Step(CLIENT, req(WRITE), {HOME: [req(counted(WRITE, 1, frag_cnt=1))]}),
        Step(CLIENT, req(WRITE2), {HOME: [req(counted(WRITE2, 2, frag_cnt=1))]}),
        Step(HOME, rep(WRITE_REP), {CLIENT: [rep(WRITE_REP)]},
             why="write 1's number cleared: write 2 still in flight"),
        Step(HOME, rep(WRITE_REP), {CLIENT: [rep(WRITE_REP)]},
             why="the duplicate: write 1 is not in flight; counting it again would leave "
                 "write 2 uncounted (the next write a lone one). Late: INVALID, last_src "
                 "SC_LAST_OVERLAP, wcount moves on (a fetch stamped before is refused)"),
        Step(HOME, rep(WRITE2_REP), {CLIENT: [rep(WRITE2_REP)]}),
    ], params=PARAMS, **CACHED,
        after={("state", IDX): SC_STATE_INVALID, ("pending_writes", IDX): 0, ("wmask", IDX): 0,
               ("wcount", IDX): 3, ("last_src", IDX): SC_LAST_OVERLAP,
               **stat(ScStat.LATE_WRITES), **stat(ScStat.REVALIDATIONS, 0),
               **stat(ScStat.STALE_UPDATES, 2)}),
    Case("starcache/a reply from a client port is dropped", "starcache", [
        Step(CLIENT, req(LOOPING), {},
             why="a forged reply would enter the loop and answer other clients"),
    ], params=PARAMS, **CACHED, after={("inloop", IDX): 1, **stat(ScStat.HOST_SERVER_OP)}),
]
