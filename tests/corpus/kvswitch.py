"""KVSwitch (digest ../shared/design/kvswitch.md §3, docs/kvswitch.md): a cold
key's requests forwarded to the server the client addressed and counted by
HashPipe; a hot key's reads round-robin over its valid copies (RoundRobin,
ServermapTable, the packed Valid word); its writes invalidating every copy,
stamped with Ver and multicast to the (owner, r) group, then revalidated by
UPDATE_ACKs (strict: only at the current Ver; the paper's mode: any);
a new replica validated by the ACK after its REPL_PUSH (§8.4); Loadcount per
server; the trust boundary (server-only ops from a client port, client VER
and FLAGS) and byte-level damage dropped before the pipeline.

Every expected frame and register is written from the digest and
docs/kvswitch.md (see each step's ``why``), not recorded from kvswitch.c.
The hot key is owned by server 1 with r = 2 copies: the ring from the
owner with step ⌊M/r⌋ = 2 (M = 4 here) puts ordinal 2 on server 3."""

from __future__ import annotations

import dataclasses
import zlib

from netkv.constants import KVS_VER_SHIFT, KVSWITCH_PORT, kvs_mcast_group
from netkv.protocols.kvswitch import REFUSALS
from netkv.wire.codec import KvswitchOp, Msg, Proto, encode

from . import CLIENT, CLIENT_PORT, N_SERVERS, Case, Step, frame

K, D = 20, 4
W = -(-K // D)                      # HashPipe width: K/d cells a stage (digest §3), 5
PARAMS = f"hot_keys={K};hashpipe_stages={D};strict=1"
PAPER = f"hot_keys={K};hashpipe_stages={D};strict=0"

HOT = b"user:000042".rjust(16, b"\0")
COLD = b"user:000077".rjust(16, b"\0")
OWNER, REPLICA, SLOT = 1, 3, 5
R = 2
HOME = 2                            # the cold keys' server (the address the client chose)
INSTALL_VER = 1 << KVS_VER_SHIFT    # period 0's install version (docs: (p + 1) << 20)
GROUP = kvs_mcast_group(OWNER, R)
BOTH = 1 << OWNER | 1 << REPLICA

# docs/kvswitch.md, register `stats`
HOT_GETS, REDIRECTED, INVALID_REPLICA, HOT_WRITES, COLD_REQS, ACKS, ACKS_REFUSED = range(7)
HOST_SERVER_OP = REFUSALS["host_server_op"][1]      # 8
FORGED_FIELDS = REFUSALS["forged_fields"][1]        # 10
assert {r for r, _ in REFUSALS.values()} == {"stats"}


def words(key: bytes) -> list[int]:
    return [int.from_bytes(key[:8], "big"), int.from_bytes(key[8:], "big")]


def installed(valid: int, ver: int = INSTALL_VER, rr: int = 1) -> dict[str, object]:
    """The hot key as the controller installs it (docs: Valid, RoundRobin, Ver,
    the (owner, r) multicast group, ServermapTable, HotkeyTable)."""
    return dict(
        tables=[("ServermapTable", [SLOT, 1], [OWNER]), ("ServermapTable", [SLOT, 2], [REPLICA]),
                ("HotkeyTable", words(HOT), [R, SLOT, OWNER])],
        registers=[("Valid", SLOT, valid), ("RoundRobin", SLOT, rr), ("Ver", SLOT, ver)],
        groups={GROUP: [OWNER, REPLICA]},
    )


def msg(op: KvswitchOp, key: bytes = HOT, **kw: object) -> Msg:
    return dataclasses.replace(Msg(proto=Proto.KVSWITCH, op=op, key=key, req_id=11),
                               **kw)  # type: ignore[arg-type]


def req(m: Msg | bytes, dst: int = OWNER) -> bytes:
    """A client's request (UDP dst port 8888), or a copy of it readdressed to ``dst``."""
    return frame(CLIENT, dst, m if isinstance(m, bytes) else encode(m),
                 sport=CLIENT_PORT, dport=KVSWITCH_PORT)


def from_server(m: Msg, src: int, dst: int = CLIENT) -> bytes:
    return frame(src, dst, encode(m), sport=KVSWITCH_PORT,
                 dport=CLIENT_PORT if dst == CLIENT else KVSWITCH_PORT)


def stats(**cells: int) -> dict[tuple[str, int], int]:
    names = dict(hot_gets=HOT_GETS, redirected=REDIRECTED, invalid=INVALID_REPLICA,
                 hot_writes=HOT_WRITES, cold=COLD_REQS, acks=ACKS, refused_acks=ACKS_REFUSED,
                 host_server_op=HOST_SERVER_OP, forged=FORGED_FIELDS)
    return {("stats", names[n]): v for n, v in cells.items()}


def load(**per: int) -> dict[tuple[str, int], int]:
    """Loadcount of every server (s0..s3), zeros included."""
    return {("Loadcount", s): per.get(f"s{s}", 0) for s in range(N_SERVERS)}


GET = msg(KvswitchOp.GET)
SET = msg(KvswitchOp.SET, value=b"new value")
DEL = msg(KvswitchOp.DEL)
V1 = INSTALL_VER + 1                # Ver after one hot write


def stamped(m: Msg, ver: int) -> Msg:
    """A hot write as every copy leaves the switch: VER = the slot's new Ver,
    FLAGS = the owner's index + 1 (docs/kvswitch.md, "Departures")."""
    return dataclasses.replace(m, ver=ver, result=OWNER + 1)


def fanout(m: Msg, ver: int = V1) -> dict[int, list[bytes]]:
    """The hot write's copies: one to each server of the (owner, r) group."""
    return {s: [req(stamped(m, ver), s)] for s in (OWNER, REPLICA)}


def redirected(ver: int = INSTALL_VER) -> dict[int, list[bytes]]:
    """A hot GET readdressed to the replica (strict: VER = Ver[slot])."""
    return {REPLICA: [req(dataclasses.replace(GET, ver=ver), REPLICA)]}


def ack(ver: int, key: bytes = HOT) -> Msg:
    return msg(KvswitchOp.UPDATE_ACK, key=key, ver=ver)


# ---- HashPipe (digest §3): cell stage·w + CRC-32(0xA5 ^ stage, KEY) mod w ---------------------


def hp_cell(stage: int, key: bytes) -> int:
    return stage * W + zlib.crc32(bytes([0xA5 ^ stage]) + key) % W


# three cold keys (stages 0-based here, 1-based in the digest and the steps' why):
# all share stage 0's cell, B also A's stage-1 cell, C not
HP_A = b"user:000100".rjust(16, b"\0")
HP_B = b"user:000150".rjust(16, b"\0")
HP_C = b"user:000103".rjust(16, b"\0")
assert hp_cell(0, HP_A) == hp_cell(0, HP_B) == hp_cell(0, HP_C)
assert hp_cell(1, HP_A) == hp_cell(1, HP_B) != hp_cell(1, HP_C)
assert hp_cell(2, HP_B) != hp_cell(2, HP_A)


def hp(stage: int, cell_key: bytes, key: bytes | None, count: int) -> dict[tuple[str, int], int]:
    """HashPipe cell of ``cell_key`` in ``stage`` holding ``key`` with ``count``."""
    i = hp_cell(stage, cell_key)
    k0, k1 = words(key) if key is not None else (0, 0)
    return {("HashPipeKeyHi", i): k0, ("HashPipeKeyLo", i): k1, ("HashPipeCount", i): count}


# ---- byte-level damage: the codec refuses it, the pipeline never sees it ------------------------

GOOD = encode(msg(KvswitchOp.GET, key=COLD))
TRUNCATED = GOOD[:20]                                   # 20 of the 28 header bytes
BAD_OP = b"\x7f" + GOOD[1:]                             # no such op (the header has no magic)
OP_ZERO = b"\x00" + GOOD[1:]
SHORT_VALUE = encode(msg(KvswitchOp.SET, key=COLD, value=b"abc"))[:-1]   # VLEN 3, 2 bytes


CASES = [
    Case("kvswitch/a cold read goes to its server untouched, counted by HashPipe", "kvswitch", [
        Step(CLIENT, req(msg(KvswitchOp.GET, key=COLD), HOME),
             {HOME: [req(msg(KvswitchOp.GET, key=COLD), HOME)]},
             why="HotkeyTable miss: HashPipe, then forwarded unchanged (§3 step 2)"),
    ], params=PARAMS, **installed(BOTH),
        after={**hp(0, COLD, COLD, 1), **load(s2=1), ("HotkeyCount", SLOT): 0,
               ("RoundRobin", SLOT): 1, **stats(cold=1, hot_gets=0)}),
    Case("kvswitch/HashPipe: stage 1 always inserts, later stages keep the larger count",
         "kvswitch", [
        Step(CLIENT, req(msg(KvswitchOp.GET, key=HP_A), HOME),
             {HOME: [req(msg(KvswitchOp.GET, key=HP_A), HOME)]}, why="A: stage 1, empty: (A, 1)"),
        Step(CLIENT, req(msg(KvswitchOp.GET, key=HP_A), HOME),
             {HOME: [req(msg(KvswitchOp.GET, key=HP_A), HOME)]}, why="A again: (A, 2)"),
        Step(CLIENT, req(msg(KvswitchOp.GET, key=HP_B), HOME),
             {HOME: [req(msg(KvswitchOp.GET, key=HP_B), HOME)]},
             why="B takes stage 1's cell, (A, 2) carried to stage 2's empty cell"),
        Step(CLIENT, req(msg(KvswitchOp.SET, key=HP_C, value=b"c"), HOME),
             {HOME: [req(msg(KvswitchOp.SET, key=HP_C, value=b"c"), HOME)]},
             why="a cold write counts too: C takes stage 1's cell, (B, 1) carried; stage 2 "
                 "keeps (A, 2), the larger, and carries (B, 1) on to stage 3's empty cell"),
    ], params=PARAMS,
        after={**hp(0, HP_A, HP_C, 1), **hp(1, HP_A, HP_A, 2), **hp(2, HP_B, HP_B, 1),
               **hp(3, HP_A, None, 0), **hp(1, HP_C, None, 0), **load(s2=4), **stats(cold=4)}),
    Case("kvswitch/reads of a hot key alternate over its valid copies", "kvswitch", [
        Step(CLIENT, req(GET), {OWNER: [req(GET)]},
             why="RoundRobin 1: ordinal 1 is the owner, the address the client chose"),
        Step(CLIENT, req(GET), redirected(),
             why="ordinal 2: server 3, its bit and (strict) the owner's set: readdressed, "
                 "VER = Ver[slot] (the version the replica must not exceed)"),
        Step(CLIENT, req(GET), {OWNER: [req(GET)]}, why="o >= r: RoundRobin wrapped to 1"),
    ], params=PARAMS, **installed(BOTH),
        after={("RoundRobin", SLOT): 2, ("HotkeyCount", SLOT): 3, ("Valid", SLOT): BOTH,
               **load(s1=2, s3=1), **stats(hot_gets=3, redirected=1, invalid=0, cold=0),
               **hp(0, HOT, None, 0)}),
    Case("kvswitch/a stale RoundRobin cell (> r after a shrink) sends the read to the owner",
         "kvswitch", [
        Step(CLIENT, req(GET), {OWNER: [req(GET)]},
             why="o = 3 > r = 2: ServermapTable misses, the read stays at the owner (§4 "
                 "'Update ordering'); o >= r writes back 1 (§3 step 3)"),
        Step(CLIENT, req(GET), {OWNER: [req(GET)]}, why="o = 1: the owner, RoundRobin 2"),
        Step(CLIENT, req(GET), redirected(), why="o = 2: the replica"),
    ], params=PARAMS, **installed(BOTH, rr=3),
        after={("RoundRobin", SLOT): 1, ("HotkeyCount", SLOT): 3, **load(s1=2, s3=1),
               **stats(hot_gets=3, redirected=1, invalid=0)}),
    Case("kvswitch/a new replica is read once its ACK after REPL_PUSH arrives", "kvswitch", [
        Step(CLIENT, req(GET), {OWNER: [req(GET)]}, why="ordinal 1, the owner"),
        Step(CLIENT, req(GET), {OWNER: [req(GET)]},
             why="ordinal 2, server 3 not yet valid (install: the owner's bit only): the owner"),
        Step(OWNER, from_server(msg(KvswitchOp.REPL_PUSH, value=b"v"), OWNER, REPLICA),
             {REPLICA: [from_server(msg(KvswitchOp.REPL_PUSH, value=b"v"), OWNER, REPLICA)]},
             why="owner -> new replica: plain forwarding, not a request (no Loadcount)"),
        Step(REPLICA, from_server(ack(INSTALL_VER), REPLICA, OWNER), {},
             why="§8.4: the push's receiver ACKs at the install version: Valid |= bit 3, "
                 "consumed"),
        Step(CLIENT, req(GET), {OWNER: [req(GET)]}, why="ordinal 1"),
        Step(CLIENT, req(GET), redirected(),
             why="ordinal 2 is valid now: redirected"),
    ], params=PARAMS, **installed(1 << OWNER),
        after={("Valid", SLOT): BOTH, ("RoundRobin", SLOT): 1, ("HotkeyCount", SLOT): 4,
               **load(s1=3, s3=1), **stats(hot_gets=4, redirected=1, invalid=1, acks=1,
                                           refused_acks=0)}),
    Case("kvswitch/a hot write invalidates, is stamped and multicast; ACKs revalidate",
         "kvswitch", [
        Step(CLIENT, req(SET), fanout(SET),
             why="the (owner, r) group, each copy addressed to its server; Ver + 1 in VER. "
                 "Copies keep op SET with FLAGS = owner + 1 (docs/kvswitch.md 'Departures': "
                 "our choice over the digest's UPDATE rewrite; the servers tell the owner's "
                 "copy by FLAGS)"),
        Step(CLIENT, req(GET), {OWNER: [req(GET)]}, why="ordinal 1, the owner"),
        Step(REPLICA, from_server(ack(V1), REPLICA), {}, why="the replica's ACK at Ver: bit 3"),
        Step(CLIENT, req(GET), {OWNER: [req(GET)]},
             why="ordinal 2: the replica is valid but (strict) the owner has not confirmed "
                 "the write: the owner"),
        Step(OWNER, from_server(ack(V1), OWNER), {}, why="the owner's ACK (strict): bit 1"),
        Step(CLIENT, req(GET), {OWNER: [req(GET)]}, why="ordinal 1"),
        Step(CLIENT, req(GET), redirected(V1),
             why="both confirmed the write: redirected with VER = the new Ver"),
    ], params=PARAMS, **installed(BOTH),
        after={("Valid", SLOT): BOTH, ("Ver", SLOT): V1, ("RoundRobin", SLOT): 1,
               ("HotkeyCount", SLOT): 5, **load(s1=4, s3=2),
               **stats(hot_writes=1, hot_gets=4, redirected=1, invalid=1, acks=2,
                       refused_acks=0)}),
    Case("kvswitch/strict: a hot DEL, a late ACK of the older version refused", "kvswitch", [
        Step(CLIENT, req(DEL), fanout(DEL),
             why="DELETE is handled like SET (§5): invalidate, stamp, multicast"),
        Step(REPLICA, from_server(ack(INSTALL_VER), REPLICA), {},
             why="ACK.VER != Ver[slot]: refused, consumed (§5 strict mode)"),
        Step(REPLICA, from_server(ack(V1), REPLICA), {}, why="ACK at Ver: bit 3"),
        Step(HOME, from_server(ack(7, COLD), HOME), {},
             why="an ACK of a cold key: just dropped (§3 step 5, our choice)"),
        Step(CLIENT, req(GET), {OWNER: [req(GET)]}, why="ordinal 1"),
        Step(CLIENT, req(GET), {OWNER: [req(GET)]},
             why="ordinal 2: server 3 valid, the owner not: the owner"),
    ], params=PARAMS, **installed(BOTH),
        after={("Valid", SLOT): 1 << REPLICA, ("Ver", SLOT): V1, ("RoundRobin", SLOT): 1,
               **load(s1=3, s3=1),
               **stats(hot_writes=1, acks=1, refused_acks=2, hot_gets=2, invalid=1)}),
    Case("kvswitch/paper mode: the owner stays valid through a write, any ACK validates",
         "kvswitch", [
        Step(CLIENT, req(SET), fanout(SET),
             why="Valid = the owner's bit (§3 step 4). The stamp is the same as in strict "
                 "mode: the digest's VER row ('stamped on hot writes') does not make it "
                 "strict-only, and kvswitch.c and kvswitch.p4 stamp in both modes"),
        Step(CLIENT, req(GET), {OWNER: [req(GET)]}, why="ordinal 1, the owner"),
        Step(CLIENT, req(GET), {OWNER: [req(GET)]}, why="ordinal 2, server 3 invalid"),
        Step(REPLICA, from_server(ack(INSTALL_VER), REPLICA), {},
             why="an ACK of the older version validates (no Ver check: §5's stale read)"),
        Step(CLIENT, req(GET), {OWNER: [req(GET)]}, why="ordinal 1"),
        Step(CLIENT, req(GET), {REPLICA: [req(GET, REPLICA)]},
             why="redirected on the replica's bit alone, VER left 0 (strict-mode only)"),
    ], params=PAPER, **installed(BOTH),
        after={("Valid", SLOT): BOTH, ("Ver", SLOT): V1, ("RoundRobin", SLOT): 1,
               **load(s1=4, s3=2),
               **stats(hot_writes=1, acks=1, refused_acks=0, hot_gets=4, redirected=1,
                       invalid=1)}),
    Case("kvswitch/replies go to the client untouched, counted nowhere", "kvswitch", [
        Step(REPLICA, from_server(msg(KvswitchOp.GET_REPLY, ver=INSTALL_VER, value=b"v"), REPLICA),
             {CLIENT: [from_server(msg(KvswitchOp.GET_REPLY, ver=INSTALL_VER, value=b"v"),
                                   REPLICA)]},
             why="a redirected read's reply comes from the replica's address (§8.11)"),
        Step(OWNER, from_server(msg(KvswitchOp.SET_REPLY), OWNER),
             {CLIENT: [from_server(msg(KvswitchOp.SET_REPLY), OWNER)]}),
    ], params=PARAMS, **installed(BOTH),
        after={**load(), ("HotkeyCount", SLOT): 0, ("RoundRobin", SLOT): 1,
               ("Valid", SLOT): BOTH, **stats(hot_gets=0, hot_writes=0, cold=0)}),
    Case("kvswitch/period_reset clears the period's counts, keeps the hot keys' state",
         "kvswitch", [
        Step(CLIENT, req(GET), {OWNER: [req(GET)]}, why="RoundRobin kept at 1: the owner"),
        Step(CLIENT, req(msg(KvswitchOp.GET, key=COLD), HOME),
             {HOME: [req(msg(KvswitchOp.GET, key=COLD), HOME)]},
             why="HashPipe starts empty: (COLD, 1), not the last period's 4 + 1"),
    ], params=PARAMS, tables=installed(BOTH)["tables"], groups=installed(BOTH)["groups"],
        registers=[*installed(BOTH)["registers"],  # type: ignore[misc]
                   ("HotkeyCount", SLOT, 9), ("Loadcount", OWNER, 7), ("Loadcount", HOME, 5),
                   *[(reg, hp_cell(0, COLD), v) for reg, v in
                     zip(("HashPipeKeyHi", "HashPipeKeyLo", "HashPipeCount"), [*words(COLD), 4])],
                   ("period_reset", 0, 1)],
        after={("HotkeyCount", SLOT): 1, **load(s1=1, s2=1), **hp(0, COLD, COLD, 1),
               ("period_reset", 0): 0, ("Valid", SLOT): BOTH, ("Ver", SLOT): INSTALL_VER,
               ("RoundRobin", SLOT): 2},
    ),
    Case("kvswitch/server-only ops from a client port are dropped and counted", "kvswitch", [
        Step(CLIENT, frame(REPLICA, OWNER, encode(ack(INSTALL_VER)), sport=KVSWITCH_PORT,
                           dport=KVSWITCH_PORT), {},
             why="a forged confirm (server 3's address, the current Ver): would validate a "
                 "stale replica; the port, not the address, decides"),
        Step(CLIENT, req(msg(KvswitchOp.REPL_PUSH, value=b"x"), REPLICA), {},
             why="a forged push would plant a value"),
        Step(CLIENT, req(msg(KvswitchOp.UPDATE, ver=V1, value=b"x"), REPLICA), {}),
        Step(CLIENT, frame(OWNER, CLIENT, encode(msg(KvswitchOp.GET_REPLY, value=b"x")),
                           sport=KVSWITCH_PORT, dport=CLIENT_PORT), {},
             why="a spoofed reply (to the client's own address, from the owner's)"),
    ], params=PARAMS, **installed(1 << OWNER),
        after={("Valid", SLOT): 1 << OWNER, **load(),
               **stats(host_server_op=4, acks=0, refused_acks=0, forged=0)}),
    Case("kvswitch/a client's VER and FLAGS are the switch's: zeroed and counted", "kvswitch", [
        Step(CLIENT, req(msg(KvswitchOp.GET, key=COLD, ver=0xFFFFFFFF, result=3), HOME),
             {HOME: [req(msg(KvswitchOp.GET, key=COLD), HOME)]},
             why="a forged VER would pass a replica's version check, a forged FLAGS make a "
                 "replica answer as the owner"),
        Step(CLIENT, req(dataclasses.replace(SET, ver=V1 + 5, result=REPLICA + 1)),
             fanout(SET),
             why="a hot write carries the switch's Ver and owner, not the client's"),
    ], params=PARAMS, **installed(BOTH),
        after={("Ver", SLOT): V1, ("Valid", SLOT): 0, **load(s1=1, s2=1, s3=1),
               **stats(forged=2, cold=1, hot_writes=1, host_server_op=0)}),
    Case("kvswitch/byte-level damage is dropped before the pipeline", "kvswitch", [
        Step(CLIENT, req(TRUNCATED, HOME), {}, why="20 of 28 header bytes"),
        Step(CLIENT, req(BAD_OP, HOME), {}, why="op 0x7f: no such op (KVSwitch has no magic)"),
        Step(CLIENT, req(OP_ZERO, HOME), {}),
        Step(CLIENT, req(SHORT_VALUE, HOME), {}, why="VLEN past the datagram"),
    ], params=PARAMS,
        after={**load(), **hp(0, COLD, None, 0),
               **stats(cold=0, host_server_op=0, forged=0, hot_gets=0, hot_writes=0)}),
]
