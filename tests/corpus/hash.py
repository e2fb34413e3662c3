"""The hash baseline: forward by destination, count, drop what does not
decode as the plain format (its magic is 0x1573)."""

from __future__ import annotations

from netkv.wire.codec import Msg, PegasusOp, Proto, encode

from . import CLIENT, CLIENT_PORT, Case, Step, frame

PORT = 5047


def _plain(**kw: object) -> bytes:
    return encode(Msg(proto=Proto.PLAIN, keyhash=0x45C1CDA4, key=b"user:42", client_id=CLIENT,
                      **kw))  # type: ignore[arg-type]


def _req(payload: bytes, dst: int) -> bytes:
    return frame(CLIENT, dst, payload, sport=CLIENT_PORT, dport=PORT)


read = _req(_plain(op=PegasusOp.READ, server_id=2, req_id=1), 2)
reply = frame(1, CLIENT, _plain(op=PegasusOp.WRITE_REPLY, server_id=1, req_id=2, ver=5),
              sport=PORT, dport=CLIENT_PORT)
peg_magic = _req(encode(Msg(proto=Proto.PEGASUS, op=PegasusOp.READ, keyhash=1, key=b"k",
                            client_id=CLIENT)), 2)

CASES = [
    Case("hash/forward by destination", "hash", [
        Step(CLIENT, read, {2: [read]}, why="a plain READ goes to its home server untouched"),
        Step(1, reply, {CLIENT: [reply]}, why="a server's reply goes to the client"),
    ], after={("port_pkts", 2): 1, ("port_pkts", CLIENT): 1, ("dropped", 0): 0}),
    Case("hash/another protocol's magic is dropped", "hash", [
        Step(CLIENT, peg_magic, {}, why="Pegasus magic: nk_wire_decode(PLAIN) refuses it"),
    ], after={("port_pkts", 2): 0}),
]
