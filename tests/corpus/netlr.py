"""NetLR (docs/netlr.md): clean reads round-robin, a write stamped and
multicast to every live replica, acks counted (strict: AckMask; paper: a
duplicated ack counts twice, W1), a dirty read sent to CRep, a colliding
write NACKed, a forged ack dropped; the baselines on the same program:
Harmonia (dirty set, writes to the head, dirty reads to the tail) and
Hermes (the switch forwards INV/ACK/VAL as addressed)."""

from __future__ import annotations

import dataclasses

from netkv.wire.codec import NETLR_FLAG_SUPERSEDED, Msg, NetlrOp, Proto, encode

from . import CLIENT, CLIENT_PORT, N_SERVERS, Case, Step, frame

PORT = 1234                    # NETLR_PORT
SLOTS = 64
ID = 0x65D5                    # the client's slot hash; the switch masks it
SLOT = ID & (SLOTS - 1)        # 21
OID = 0x0001E240
LIVE = dict(                   # every replica live, as the controller installs it
    tables=[("get_dst_rep_table", [i], [i]) for i in range(N_SERVERS)],
    groups={1: list(range(N_SERVERS))},
)

base = Msg(proto=Proto.NETLR, op=NetlrOp.READ, keyhash=ID, key=OID.to_bytes(4, "big"), req_id=9)
READ = base
WRITE = dataclasses.replace(base, op=NetlrOp.WRITE, req_id=10, value=bytes(range(16)))


def req(m: Msg, dst: int = 3) -> bytes:
    return frame(CLIENT, dst, encode(m), sport=CLIENT_PORT, dport=PORT)


def from_replica(m: Msg, r: int, dst: int = CLIENT) -> bytes:
    return frame(r, dst, encode(m), sport=PORT, dport=CLIENT_PORT if dst == CLIENT else PORT)


def ack(seq: int) -> Msg:
    return dataclasses.replace(WRITE, op=NetlrOp.W_REPLY, ver=seq, value=b"")


STAMPED = dataclasses.replace(WRITE, ver=2)           # seq starts at 1: the first write gets 2
ACK2 = ack(2)
MCAST = {r: [req(STAMPED, r)] for r in range(N_SERVERS)}
WRITE11 = dataclasses.replace(WRITE, req_id=11)      # the same client's next write of the key
MCAST3 = {r: [req(dataclasses.replace(WRITE11, ver=3), r)] for r in range(N_SERVERS)}
SUPERSEDED2 = dataclasses.replace(ACK2, flags=NETLR_FLAG_SUPERSEDED)


def counting(params: str, acks: list[int], commit_at: int | None) -> list[Step]:
    """The write multicast, then replica r's ack for each r in ``acks``;
    the ack at index ``commit_at`` is forwarded to the client (the commit)."""
    steps = [Step(CLIENT, req(WRITE), MCAST, why=f"{params}: every copy addressed to its replica")]
    for i, r in enumerate(acks):
        out = {CLIENT: [from_replica(ACK2, r)]} if i == commit_at else {}
        steps.append(Step(r, from_replica(ACK2, r), out,
                          why="the commit" if i == commit_at else "counted, dropped"))
    return steps


HARMONIA = f"replication=harmonia;slots={SLOTS}"
CHAIN_COPY = dataclasses.replace(WRITE, ver=6, epoch=CLIENT)   # the head's copy names the client
INV = dataclasses.replace(WRITE, op=NetlrOp.INV, ver=(6 << 8) | 0)

CASES = [
    Case("netlr/clean reads go round-robin over the live replicas", "netlr", [
        Step(CLIENT, req(READ), {0: [req(READ, 0)]}, why="readdressed to replica 0"),
        Step(CLIENT, req(READ), {1: [req(READ, 1)]}),
        Step(CLIENT, req(READ), {2: [req(READ, 2)]}),
    ], params=f"slots={SLOTS}", **LIVE,
        after={("stats", 0): 3, ("stats", 1): 0, ("DstRepIdx", 0): 3}),
    Case("netlr/strict: a write is stamped and multicast, a dirty read goes to CRep, "
         "the last ack commits", "netlr", [
        Step(CLIENT, req(dataclasses.replace(WRITE, ver=77, flags=3, epoch=5)), MCAST,
             why="the client's seq, flags and epoch cleared (counted); seq 2 stamped"),
        Step(1, from_replica(ACK2, 1), {}, why="AckMask 0b0010, CRep 1"),
        Step(3, from_replica(ACK2, 3), {}, why="AckMask 0b1010, CRep 3"),
        Step(CLIENT, req(READ, 0), {3: [req(READ, 3)]}, why="dirty: to CRep"),
        Step(0, from_replica(ACK2, 0), {}),
        Step(2, from_replica(ACK2, 2), {CLIENT: [from_replica(ACK2, 2)]},
             why="every live replica acked MaxSeq: the commit, the key clean"),
        Step(CLIENT, req(READ), {0: [req(READ, 0)]}, why="clean again: round-robin"),
    ], params=f"slots={SLOTS}", **LIVE,
        after={("dset", SLOT): 0, ("MaxSeq", SLOT): 2, ("AckMask", SLOT): 0b1111,
               ("CRep", SLOT): 2, ("seq", 0): 2, ("stats", 1): 1, ("stats", 2): 1,
               ("stats", 4): 4, ("stats", 6): 1, ("stats", 12): 1}),
    Case("netlr/paper mode: a duplicated ack counts twice and commits early (W1)", "netlr",
         counting("mode=paper", [0, 0, 1, 2], commit_at=3),
         params=f"mode=paper;slots={SLOTS}", **LIVE,
         after={("dset", SLOT): 0, ("NumCRep", SLOT): 4, ("lseq", SLOT): 2, ("stats", 6): 1}),
    Case("netlr/strict: the same duplicate counts once, nothing commits", "netlr",
         counting("strict", [0, 0, 1, 2], commit_at=None),
         params=f"slots={SLOTS}", **LIVE,
         after={("dset", SLOT): OID, ("AckMask", SLOT): 0b0111, ("stats", 6): 0}),
    Case("netlr/strict, ack_superseded: an older write's ack is answered once CRep "
         "holds it", "netlr", [
        Step(CLIENT, req(WRITE), MCAST, why="seq 2; CRep = PIN (0), lseq 0"),
        Step(CLIENT, req(WRITE11), MCAST3, why="seq 3 supersedes it, AckMask 0"),
        Step(1, from_replica(ACK2, 1), {},
             why="dropped: CRep may not hold seq 2 yet, a read could see an older value"),
        Step(0, from_replica(ACK2, 0), {CLIENT: [from_replica(SUPERSEDED2, 0)]},
             why="CRep's own ack: it holds seq 2, lseq 2, forwarded flagged SUPERSEDED"),
        Step(2, from_replica(ACK2, 2), {CLIENT: [from_replica(SUPERSEDED2, 2)]},
             why="so is every later copy (the client keeps the first)"),
    ], params=f"ack_superseded=1;slots={SLOTS}", **LIVE,
        after={("dset", SLOT): OID, ("MaxSeq", SLOT): 3, ("AckMask", SLOT): 0,
               ("CRep", SLOT): 0, ("lseq", SLOT): 2, ("stats", 5): 1, ("stats", 7): 2}),
    Case("netlr/strict: a client WRITE the network duplicated is stamped once", "netlr", [
        Step(CLIENT, req(WRITE), MCAST, why="req_id 10 stamped seq 2"),
        Step(CLIENT, req(WRITE), {},
             why="the copy: stamped again it would be applied after newer writes"),
        Step(CLIENT, req(WRITE11), MCAST3, why="the client's next req_id: seq 3"),
    ], params=f"slots={SLOTS}", **LIVE,
        after={("seq", 0): 3, ("stats", 2): 2, ("stats", 13): 1, ("ReqMax", CLIENT): 11,  # port 4
               ("ReqWin", CLIENT): 0b11}),
    Case("netlr/a write whose slot holds another key is NACKed to its client", "netlr", [
        Step(CLIENT, req(WRITE),
             {CLIENT: [from_replica(dataclasses.replace(WRITE, op=NetlrOp.NACK, value=b""), 3)]},
             why="as if from the replica it addressed, UDP ports swapped"),
    ], params=f"collision_nack=1;slots={SLOTS}", **LIVE, registers=[("dset", SLOT, OID + 1)],
        after={("dset", SLOT): OID + 1, ("seq", 0): 1, ("stats", 3): 1}),
    Case("netlr/an ack from a client port is dropped and counted", "netlr", [
        Step(CLIENT, frame(CLIENT, CLIENT, encode(ACK2), sport=PORT, dport=CLIENT_PORT), {},
             why="a forged W_REPLY would commit a write no replica applied"),
    ], params=f"slots={SLOTS}", **LIVE, registers=[("dset", SLOT, OID), ("MaxSeq", SLOT, 2)],
        after={("dset", SLOT): OID, ("AckMask", SLOT): 0, ("stats", 10): 1}),
    Case("netlr/harmonia: a write goes to the head, a dirty read to the tail, "
         "the tail's completion clears the key", "netlr", [
        Step(CLIENT, req(WRITE, 3), {0: [req(WRITE, 0)]}, why="to the head, unstamped"),
        Step(CLIENT, req(READ, 1), {3: [req(READ, 3)]}, why="dirty: to the tail"),
        Step(0, from_replica(CHAIN_COPY, 0, 1), {1: [from_replica(CHAIN_COPY, 0, 1)]},
             why="the chain's copy, as addressed"),
        Step(3, from_replica(ack(6), 3), {CLIENT: [from_replica(ack(6), 3)]},
             why="the completion: the key clean, whatever its seq"),
        Step(CLIENT, req(READ, 3), {0: [req(READ, 0)]}, why="clean: round-robin"),
    ], params=HARMONIA, **LIVE,
        after={("dset", SLOT): 0, ("seq", 0): 1, ("stats", 0): 2, ("stats", 1): 1,
               ("stats", 2): 1, ("stats", 4): 1, ("stats", 6): 1}),
    Case("netlr/hermes: the switch forwards as addressed and orders nothing", "netlr", [
        Step(CLIENT, req(dataclasses.replace(WRITE, ver=77), 1), {1: [req(WRITE, 1)]},
             why="to the coordinator the client chose, its seq cleared"),
        Step(1, from_replica(INV, 1, 2), {2: [from_replica(INV, 1, 2)]}, why="INV to a peer"),
    ], params=f"replication=hermes;slots={SLOTS}", **LIVE,
        after={("seq", 0): 1, ("dset", SLOT): 0, ("stats", 12): 1}),
]
