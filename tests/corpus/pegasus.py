"""Pegasus: Algorithms 1 and 2 of the paper on one replicated key, the
version stamp, multicast write fan-out, sampling to the controller."""

from __future__ import annotations

import dataclasses

from netkv.constants import peg_mcast_group
from netkv.wire.codec import Msg, PegasusOp, Proto, encode

from . import CLIENT, CLIENT_PORT, N_SERVERS, Case, Step, frame

PORT = 5047
KH = 0x45C1CDA4               # the replicated key's keyhash
PARAMS = "selection=rr;sample=0;max_rkeys=8"

# a key replicated on {1, 2} at version 1 (what the controller installs)
REPLICATED = dict(
    tables=[("rkeys", [KH], [0])],
    registers=[("ver_completed", 0, 1), ("ver_last_write", 0, 1), ("rset_size", 0, 2),
               ("rset_bitmap", 0, 0b0110), ("rset_list", 0, 1), ("rset_list", 1, 2),
               ("fanout", 0, 1)],
)
# every write group, as netkv/protocols/pegasus.py installs them
GROUPS = {peg_mcast_group(s, r): [(s + k) % N_SERVERS for k in range(r)]
          for s in range(N_SERVERS) for r in range(2, N_SERVERS + 1)}

base = Msg(proto=Proto.PEGASUS, op=PegasusOp.READ, keyhash=KH, key=b"user:42", client_id=CLIENT, req_id=7)
READ = dataclasses.replace(base, op=PegasusOp.READ, server_id=3)
WRITE = dataclasses.replace(base, op=PegasusOp.WRITE, server_id=3, value=b"v" * 16)


def req(m: Msg, dst: int = 3) -> bytes:
    return frame(CLIENT, dst, encode(m), sport=CLIENT_PORT, dport=PORT)


def from_server(m: Msg, server: int) -> bytes:
    return frame(server, CLIENT, encode(m), sport=PORT, dport=CLIENT_PORT)


def reply(server: int, ver: int, op: PegasusOp = PegasusOp.WRITE_REPLY) -> Msg:
    return dataclasses.replace(base, op=op, server_id=server, ver=ver, bitmap=1 << server,
                               load=9)


other = dataclasses.replace(WRITE, keyhash=0x1234, key=b"user:7")
rep3, ack3, rep2 = reply(2, 3), reply(3, 3, PegasusOp.RC_ACK), reply(0, 2)

CASES = [
    Case("pegasus/unreplicated write stamped from ver_next", "pegasus", [
        Step(CLIENT, req(other), {3: [req(dataclasses.replace(other, ver=2))]}),
        Step(CLIENT, req(other), {3: [req(dataclasses.replace(other, ver=3))]}),
    ], params=PARAMS, after={("ver_next", 0): 4, ("stats", 2): 2}),
    Case("pegasus/reads rotate over the replica set", "pegasus", [
        Step(CLIENT, req(READ), {1: [req(READ, 1)]}, why="readdressed to replica 1"),
        Step(CLIENT, req(READ), {2: [req(READ, 2)]}, why="then replica 2"),
    ], params=PARAMS, **REPLICATED,
        after={("rd_cnt", 0): 2, ("srv_inflight", 1): 1, ("srv_inflight", 2): 1,
               ("stats", 0): 2}),
    Case("pegasus/fan-out 3 write is multicast to start..start+2", "pegasus", [
        Step(CLIENT, req(WRITE), {p: [req(dataclasses.replace(WRITE, ver=2, bitmap=0b0111), p)]
                                  for p in (0, 1, 2)},
             why="rr start 0, group peg_mcast_group(0, 3); every copy addressed to its node"),
    ], params=PARAMS, tables=REPLICATED["tables"],
        registers=[*REPLICATED["registers"], ("fanout", 0, 3)], groups=GROUPS,
        after={("ver_last_write", 0): 2, ("wr_cnt", 0): 1, ("srv_inflight", 0): 1,
               ("srv_inflight", 2): 1, ("srv_inflight", 3): 0}),
    Case("pegasus/replies: newer resets, same version extends, older is stale", "pegasus", [
        Step(2, from_server(rep3, 2), {CLIENT: [from_server(rep3, 2)]},
             why="version 3 > 1: the replica set becomes {2}"),
        Step(3, from_server(ack3, 3), {}, why="RC_ACK at version 3: {2, 3}, consumed"),
        Step(0, from_server(rep2, 0), {CLIENT: [from_server(rep2, 0)]},
             why="version 2 < 3: stale, no change"),
    ], params=PARAMS, **REPLICATED,
        after={("ver_completed", 0): 3, ("rset_size", 0): 2, ("rset_bitmap", 0): 0b1100,
               ("rset_list", 0): 2, ("rset_list", 1): 3, ("srv_load", 2): 9,
               ("stats", 5): 1, ("stats", 6): 1, ("stats", 7): 1}),
    Case("pegasus/an unreplicated request is sampled to the controller as received", "pegasus", [
        Step(CLIENT, req(other), {3: [req(dataclasses.replace(other, ver=2))]}, cpu=[req(other)]),
    ], params="selection=rr;sample=1;max_rkeys=8", after={("stats", 3): 1}),
]
