"""NetCache: hits answered by the switch (as if by the server the client
addressed), hot-key detection in the sketch, write invalidation, the
controller's fetch answered to the controller."""

from __future__ import annotations

import dataclasses

from netkv.constants import (
    NC_CM_ROWS,
    NC_FETCH_CLIENT,
    NETCACHE_FLAG_CACHED,
    NETCACHE_FLAG_REFRESH,
    SERVER_NONE,
)
from netkv.protocols.netcache import row_hash, table_key
from netkv.wire.codec import Msg, NetcacheOp, Proto, Result, encode

from . import CLIENT, CLIENT_PORT, Case, Step, frame

PORT = 5050
CONTROLLER = 200              # an address outside the rack plan
CM_WIDTH = 32
PARAMS = f"cache_items=16;max_value_bytes=64;hot_threshold=2;cm_width={CM_WIDTH};bf_bits=128"
KEY = b"user:000042"
VALUE = b"hello"

CACHED = dict(
    tables=[("cache", table_key(KEY), [0])],
    registers=[("cache_valid", 0, 1), ("cache_vlen", 0, len(VALUE)),
               ("cache_value", 0, int.from_bytes(VALUE.ljust(8, b"\0"), "big"))],
)

base = Msg(proto=Proto.NETCACHE, op=NetcacheOp.READ, key=KEY, client_id=CLIENT, req_id=11, server_id=3)
READ = dataclasses.replace(base, op=NetcacheOp.READ)
WRITE = dataclasses.replace(base, op=NetcacheOp.WRITE, value=b"world")
HIT = dataclasses.replace(READ, op=NetcacheOp.READ_REPLY, result=Result.OK,
                          flags=NETCACHE_FLAG_CACHED, value=VALUE, server_id=SERVER_NONE)
FETCH_ANSWER = dataclasses.replace(base, op=NetcacheOp.CACHE_UPDATE, client_id=NC_FETCH_CLIENT,
                                   req_id=77, value=VALUE)
ACK = dataclasses.replace(FETCH_ANSWER, op=NetcacheOp.CACHE_UPDATE_ACK, value=b"")


def req(m: Msg) -> bytes:
    return frame(CLIENT, 3, encode(m), sport=CLIENT_PORT, dport=PORT)


def sketch_cells(key: bytes, count: int) -> dict[tuple[str, int], int]:
    return {("cm_sketch", r * CM_WIDTH + row_hash(r, key) % CM_WIDTH): count
            for r in range(NC_CM_ROWS)}


fetch_answer = frame(3, CONTROLLER, encode(FETCH_ANSWER), sport=PORT, dport=PORT)

CASES = [
    Case("netcache/read hit answered by the switch as the server", "netcache", [
        Step(CLIENT, req(READ),
             {CLIENT: [frame(3, CLIENT, encode(HIT), sport=PORT, dport=CLIENT_PORT)]},
             why="source = the server the client addressed, UDP ports swapped: "
                 "a Linux client's socket accepts it"),
    ], params=PARAMS, **CACHED, after={("cache_hits", 0): 1, ("stats", 0): 1}),
    Case("netcache/read misses count in the sketch; a hot key is reported once", "netcache", [
        Step(CLIENT, req(READ), {3: [req(READ)]}),
        Step(CLIENT, req(READ), {3: [req(READ)]}, cpu=[req(READ)],
             why="estimate 2 = hot_threshold: the copy as received is the report"),
        Step(CLIENT, req(READ), {3: [req(READ)]}, why="the Bloom filter has it: no report"),
    ], params=PARAMS, after={**sketch_cells(KEY, 3), ("stats", 1): 3, ("stats", 8): 1}),
    Case("netcache/a write invalidates a cached key and asks for the value", "netcache", [
        Step(CLIENT, req(WRITE),
             {3: [req(dataclasses.replace(WRITE, flags=NETCACHE_FLAG_REFRESH))]}),
    ], params=PARAMS, **CACHED,
        after={("cache_valid", 0): 0, ("cache_wcli", 0): CLIENT, ("cache_wreq", 0): 11,
               ("stats", 3): 1}),
    Case("netcache/a fetch answer fills the slot, acknowledged to the controller", "netcache", [
        Step(3, fetch_answer, {},
             cpu=[frame(3, CONTROLLER, encode(ACK), sport=PORT, dport=PORT)],
             why="CACHE_UPDATE_ACK (op 7), the value stripped, goes to the CPU port"),
    ], params=PARAMS, tables=CACHED["tables"],
        registers=[("cache_wcli", 0, NC_FETCH_CLIENT), ("cache_wreq", 0, 77)],
        after={("cache_valid", 0): 1, ("cache_vlen", 0): len(VALUE), ("stats", 7): 1}),
]
