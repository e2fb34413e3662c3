"""NetMC (docs/netmc.md "The switch"; digest ../shared/design/netmc.md §3):
a multiget split pass by pass, one group per pass, by the PRE group
{server port, recirculation port} (each recirculated copy fed back in as the
next step), the last group unicast, and the thesis' worked example as the
golden vectors (tests/vectors/netmc.json) hold its passes; a single-server
multiget in one pass;
AddrTable's node, port and PRE group (digest §9.5); W = 32; the baselines'
``split=0`` forwarding a multiget as sent; a GET, a PUT and the replies
forwarded by destination; forged and malformed multigets and a client's
replies dropped and counted (``REFUSALS`` in netkv/protocols/netmc.py), and
what the codec refuses dropped before the pipeline runs.

Every expected header is written from the digest's per-pass algorithm:

    if CLO == 1: OID += 1; STARTIDX += NUMKEY
    n = leading zeros of KEYIDX (W bits) + 1;  KEYIDX <<= n;  NUMKEY = n
    s = SRV[OID];  AddrTable[s] -> node, port, PRE group
    KEYIDX != 0: CLO = 1, the group {port(s), recirculation port}
    else:        unicast to port(s)

The recirculation port is ``LOOP`` (after the CPU port), as in
tests/corpus/starcache.py; netkv-switch gets its ``--loop`` pair for these
cases, so a continuation is seen leaving and is fed back in. Every case pins
all 8 ``stats`` cells (``enum mc_stat``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from netkv.constants import MC_ID_SHIFT, NETMC_PORT_BASE, McStat, mc_mcast_group
from netkv.wire.codec import Msg, NetmcOp, Proto, encode

from . import CLIENT, CLIENT_PORT, N_SERVERS, NODES, Case, Step, frame

LOOP = NODES + 1             # CPU port = NODES, the recirculation port after it
PORT = NETMC_PORT_BASE       # worker 0's port (the switch leaves it as it is)
KEYLEN = 4                   # the thesis' 4 B keys
NETMC = "scheme=netmc;split=1;w=16;mtu=1500"      # pipeline_params() of each scheme
NETMC_W32 = "scheme=netmc;split=1;w=32;mtu=1500"
CLIMC = "scheme=climc;split=0;w=16;mtu=1500"

# as NetmcController.start installs them: server s is node s behind port s,
# its PRE group mc_mcast_group(s) = s + 1 = {port s, recirculation port}
RACK = dict(
    tables=[("addr_table", [s], [s, s, mc_mcast_group(s)]) for s in range(N_SERVERS)],
    groups={mc_mcast_group(s): [s, LOOP] for s in range(N_SERVERS)},
)


def keys(n: int, first: int = 0) -> bytes:
    return b"".join(b"k%03d" % (first + i) for i in range(n))


def mget(n: int, srv: list[int], keyidx: int, req: int = 7, **kw: object) -> Msg:
    """A client's MGET of ``n`` sorted key slots (Algorithm 1): NUMKEY = n,
    OID = STARTIDX = CLO = 0, the wire ID req << 6 | 0 (docs/netmc.md)."""
    m = Msg(proto=Proto.NETMC, op=NetmcOp.MGET, req_id=req << MC_ID_SHIFT, nkeys=n,
            keyidx=keyidx, srv=srv + [0] * (32 - len(srv)), key_slot_len=KEYLEN,
            key_slots=n, items=keys(n), send_ns=1_700_000_000_123_456_789)
    return dataclasses.replace(m, **kw)  # type: ignore[arg-type]


def req(m: Msg | bytes, dst: int) -> bytes:
    """From the client to node ``dst`` (the first group's server, as the
    client addresses an MGET; the switch readdresses each copy)."""
    return frame(CLIENT, dst, m if isinstance(m, bytes) else encode(m), sport=CLIENT_PORT,
                 dport=PORT)


def rep(m: Msg, server: int) -> bytes:
    return frame(server, CLIENT, encode(m), sport=PORT, dport=CLIENT_PORT)


def chain(sent: Msg | bytes, to: int, passes: list[tuple[Msg | bytes, int, str]]) -> list[Step]:
    """The client's MGET addressed to node ``to``, then one step per pass:
    (the header the pass leaves with, the node behind the port it leaves by,
    why). Every pass but the last also leaves by LOOP, and that copy is the
    next step's frame in."""
    steps, port, frame_in = [], CLIENT, req(sent, to)
    for i, (m, node, why) in enumerate(passes):
        out = req(m, node)
        steps.append(Step(port, frame_in, {node: [out], LOOP: [out]}
                          if i + 1 < len(passes) else {node: [out]}, why=why))
        port, frame_in = LOOP, out
    return steps


def stats(**cells: int) -> dict[tuple[str, int], int]:
    """All 8 cells of ``stats``: the named ones, the rest 0."""
    return {("stats", int(c)): cells.get(c.name, 0) for c in McStat}


# ---- a multiget over 3 servers: 5 keys in groups of 2, 1, 2 on servers 1, 2, 3 ------------------
# KEYIDX (W = 16, MSB = key 0): key 1, key 2 and key 4 end their groups
SPLIT3 = mget(5, [1, 2, 3], 0b0110_1000_0000_0000)
# pass 1: n = 1 leading zero + 1 = 2; KEYIDX <<= 2; groups left: CLO = 1, group {1, LOOP}
PASS1 = dataclasses.replace(SPLIT3, nkeys=2, keyidx=0b1010_0000_0000_0000, clo=1)
# pass 2 (recirculated): OID 1, STARTIDX 0 + 2; n = 1; KEYIDX <<= 1; group {2, LOOP}
PASS2 = dataclasses.replace(PASS1, oid=1, startidx=2, nkeys=1, keyidx=0b0100_0000_0000_0000)
# pass 3: OID 2, STARTIDX 2 + 1; n = 2; KEYIDX <<= 2 = 0: the last group, unicast
PASS3 = dataclasses.replace(PASS2, oid=2, startidx=3, nkeys=2, keyidx=0)

# ---- one server: 3 keys on server 2 (only key 2's bit) ------------------------------------------
ONE = mget(3, [2], 0b0010_0000_0000_0000, req=8)
ONE_OUT = dataclasses.replace(ONE, nkeys=3, keyidx=0)             # CLO stays 0: no copy loops
# 16 keys on server 1: n = 16 = W, KEYIDX <<= 16 is 0 within W bits
SIXTEEN = mget(16, [1], 0b0000_0000_0000_0001, req=9)
SIXTEEN_OUT = dataclasses.replace(SIXTEEN, keyidx=0)

# ---- AddrTable: server ids 1 and 3 behind other nodes, ports and groups -------------------------
# server 1 -> node 3, port 3, group 9 = {3, LOOP}; server 3 -> node 0, port 0 (unicast)
ADDR = dict(
    tables=[("addr_table", [1], [3, 3, 9]), ("addr_table", [3], [0, 0, 10])],
    groups={9: [3, LOOP], 10: [0, LOOP]},
)
MOVED = mget(3, [1, 3], 0b1010_0000_0000_0000, req=10)      # key 0 on server 1, keys 1-2 on 3
MOVED1 = dataclasses.replace(MOVED, nkeys=1, keyidx=0b0100_0000_0000_0000, clo=1)
MOVED2 = dataclasses.replace(MOVED1, oid=1, startidx=1, nkeys=2, keyidx=0)

# ---- W = 32: 3 keys, key 0 on server 0, keys 1-2 on server 3 (bit 31 = key 0) -------------------
W32 = mget(3, [0, 3], 0xA000_0000, req=11)
W32_1 = dataclasses.replace(W32, nkeys=1, keyidx=0x4000_0000, clo=1)
W32_2 = dataclasses.replace(W32_1, oid=1, startidx=1, nkeys=2, keyidx=0)

# ---- CliMC: the client's own sub-request for server 2's 2 keys, then a 3-group multiget ---------
CLIMC_SUB = mget(2, [2], 0b0100_0000_0000_0000, req=12)

# ---- single-key ops and replies -----------------------------------------------------------------
GET = Msg(proto=Proto.NETMC, op=NetmcOp.GET, req_id=13, key=b"k042", key_slot_len=KEYLEN,
          key_slots=1, nkeys=1, srv=[3] + [0] * 31)
PUT = dataclasses.replace(GET, op=NetmcOp.PUT, req_id=14, value=b"v" * 256)
GET_REPLY = dataclasses.replace(GET, op=NetmcOp.GET_REPLY, value=b"v" * 256)
PUT_REPLY = dataclasses.replace(GET, op=NetmcOp.PUT_REPLY, req_id=14)
MGET_REPLY = Msg(proto=Proto.NETMC, op=NetmcOp.MGET_REPLY, req_id=7 << MC_ID_SHIFT, nkeys=1,
                 startidx=2, srv=[1, 2, 3] + [0] * 29, key_slot_len=KEYLEN, key_slots=1,
                 items=b"k002" + b"\x00\x03" + b"abc", send_ns=SPLIT3.send_ns)


# ---- the thesis' worked example (Fig. 6), as the golden vectors hold it -----------------------
# keys A, D on server 1, B on 2, C on 3: KEYIDX 0111 (W = 16); tests/vectors/netmc.json
VECTORS = {v["name"]: bytes.fromhex(v["hex"]) for v in json.loads(
    (Path(__file__).resolve().parents[1] / "vectors" / "netmc.json").read_text())}
FIG6 = [VECTORS[f"netmc/MGET {n}"] for n in (
    "3 groups, as sent by the client", "pass 1 (to server 1)",
    "pass 2 (recirculated, to server 2)", "pass 3 (to server 3)")]


def patched(m: Msg, **at: int) -> bytes:
    """``m`` encoded, then the bytes at the given offsets set (fields the
    encoder would refuse): ``op`` 0, ``numkey`` 6."""
    b = bytearray(encode(m))
    for name, v in at.items():
        b[{"op": 0, "numkey": 6}[name]] = v
    return bytes(b)


CASES = [
    Case("netmc/an MGET over 3 servers is split pass by pass, the last group unicast", "netmc",
         chain(SPLIT3, 1, [
             (PASS1, 1, "pass 1: n = 2, NUMKEY 2; group {1, LOOP}; CLO 1 in both copies "
                        "(digest §9.4)"),
             (PASS2, 2, "pass 2: OID 1, STARTIDX 0 + 2, n = 1; readdressed to server 2, "
                        "both copies"),
             (PASS3, 3, "pass 3: OID 2, STARTIDX 3, n = 2, KEYIDX 0: unicast, nothing loops"),
         ]), params=NETMC, **RACK, after=stats(MGETS=1, PASSES=3, CLONES=2)),
    Case("netmc/the thesis' worked example: the golden vectors, pass by pass", "netmc",
         chain(FIG6[0], 1, [
             (FIG6[1], 1, "A, D to server 1: KEYIDX 1100, NUMKEY 2, CLO 1 (set before cloning)"),
             (FIG6[2], 2, "B to server 2: OID 1, STARTIDX 2"),
             (FIG6[3], 3, "C to server 3: OID 2, STARTIDX 3, KEYIDX 0"),
         ]), params=NETMC, **RACK, after=stats(MGETS=1, PASSES=3, CLONES=2)),
    Case("netmc/a single-server MGET goes out in one pass, readdressed, with no copy", "netmc", [
        Step(CLIENT, req(ONE, 0), {2: [req(ONE_OUT, 2)]},
             why="addressed to node 0 by the client: AddrTable[SRV[0] = 2] readdresses it; "
                 "NUMKEY 3, KEYIDX 0, CLO stays 0"),
        Step(CLIENT, req(SIXTEEN, 1), {1: [req(SIXTEEN_OUT, 1)]},
             why="W = 16 keys in one group: n = 16, KEYIDX shifted out entirely"),
    ], params=NETMC, **RACK, after=stats(MGETS=2, PASSES=2)),
    Case("netmc/AddrTable gives each group's node (IP, MAC), port and PRE group", "netmc",
         chain(MOVED, 1, [
             (MOVED1, 3, "server id 1 -> node 3 (10.0.0.4, 02:..:04), group 9 = {3, LOOP}: "
                         "not node, port or group 1"),
             (MOVED2, 0, "server id 3 -> node 0 behind port 0, unicast (the last group)"),
         ]), params=NETMC, **ADDR, after=stats(MGETS=1, PASSES=2, CLONES=1)),
    Case("netmc/W = 32: KEYIDX's groups are read from bit 31", "netmc", chain(W32, 0, [
        (W32_1, 0, "n = 1 from bit 31; group {0, LOOP}"),
        (W32_2, 3, "OID 1, STARTIDX 1, n = 2; KEYIDX << 2 leaves 32 bits: 0, unicast"),
    ]), params=NETMC_W32, **RACK, after=stats(MGETS=1, PASSES=2, CLONES=1)),
    Case("netmc/split=0 (CliMC) forwards a multiget as it was sent", "netmc", [
        Step(CLIENT, req(CLIMC_SUB, 2), {2: [req(CLIMC_SUB, 2)]},
             why="the client's own sub-request for server 2, untouched"),
        Step(CLIENT, req(SPLIT3, 1), {1: [req(SPLIT3, 1)]},
             why="even a 3-group KEYIDX is not split: forwarded to its address, NUMKEY 5"),
        Step(CLIENT, req(dataclasses.replace(CLIMC_SUB, startidx=1, nkeys=1), 2),
             {2: [req(dataclasses.replace(CLIMC_SUB, startidx=1, nkeys=1), 2)]},
             why="STARTIDX is the client's under CliMC (docs/security.md): not FORGED"),
    ], params=CLIMC, **RACK, after=stats(FORWARDED=3)),
    Case("netmc/a GET and a PUT are forwarded by destination, unsplit", "netmc", [
        Step(CLIENT, req(GET, 3), {3: [req(GET, 3)]}, why="single key: L3 only (digest §2)"),
        Step(CLIENT, req(PUT, 3), {3: [req(PUT, 3)]}, why="a write straight to its server"),
    ], params=NETMC, **RACK, after=stats(FORWARDED=2)),
    Case("netmc/replies are forwarded to the client", "netmc", [
        Step(2, rep(MGET_REPLY, 2), {CLIENT: [rep(MGET_REPLY, 2)]},
             why="a server's sub-reply: STARTIDX echoed, untouched"),
        Step(3, rep(GET_REPLY, 3), {CLIENT: [rep(GET_REPLY, 3)]}),
        Step(3, rep(PUT_REPLY, 3), {CLIENT: [rep(PUT_REPLY, 3)]}),
    ], params=NETMC, **RACK, after=stats(FORWARDED=3)),
    Case("netmc/a client's MGET with the switch's OID, STARTIDX or CLO is FORGED", "netmc", [
        Step(CLIENT, req(dataclasses.replace(SPLIT3, oid=1), 1), {},
             why="OID 1 would skip group 0"),
        Step(CLIENT, req(dataclasses.replace(SPLIT3, startidx=2, nkeys=3), 1), {},
             why="STARTIDX 2 would send keys 2.. as group 0's"),
        Step(CLIENT, req(PASS1, 1), {},
             why="CLO 1: a continuation from a client port (a replayed pass)"),
    ], params=NETMC, **RACK, after=stats(FORGED=3)),
    Case("netmc/a malformed MGET is dropped and counted", "netmc", [
        Step(CLIENT, req(mget(3, [1], 0), 1), {}, why="KEYIDX 0: no group"),
        Step(CLIENT, req(mget(3, [1], 0x0001_0000), 1), {},
             why="a bit only above W = 16: KEYIDX 0 within W"),
        Step(CLIENT, req(mget(3, [1], 0b0000_1000_0000_0000), 1), {},
             why="the first group has 5 keys: past the 3-key list"),
        Step(LOOP, req(dataclasses.replace(PASS2, oid=31), 2), {},
             why="a continuation at OID 31: OID 32 is past SRV's 32 entries"),
    ], params=NETMC, **RACK, after=stats(MGETS=3, MALFORMED=4)),
    Case("netmc/an SRV naming no server is dropped (NO_ROUTE)", "netmc", [
        Step(CLIENT, req(mget(2, [9], 0b0100_0000_0000_0000), 1), {},
             why="server 9: no AddrTable entry"),
        Step(CLIENT, req(mget(2, [1, 40], 0b1100_0000_0000_0000), 1),
             {1: [req(mget(2, [1, 40], 0b1000_0000_0000_0000, nkeys=1, clo=1), 1)],
              LOOP: [req(mget(2, [1, 40], 0b1000_0000_0000_0000, nkeys=1, clo=1), 1)]},
             why="group 0's server is real: its sub-request goes out"),
        Step(LOOP, req(mget(2, [1, 40], 0b1000_0000_0000_0000, nkeys=1, clo=1), 1), {},
             why="group 1's server id 40 is past the AddrTable: the continuation drops"),
    ], params=NETMC, **RACK, after=stats(MGETS=2, PASSES=1, CLONES=1, NO_ROUTE=2)),
    Case("netmc/a reply from a client port is dropped (HOST_SERVER_OP)", "netmc", [
        Step(CLIENT, frame(CLIENT, CLIENT, encode(MGET_REPLY), sport=PORT, dport=CLIENT_PORT),
             {}, why="a forged sub-reply would fill an honest client's multiget"),
        Step(CLIENT, req(GET_REPLY, 3), {}, why="addressed to a server: still a reply"),
        Step(CLIENT, req(PUT_REPLY, 0), {}),
    ], params=NETMC, **RACK, after=stats(HOST_SERVER_OP=3)),
    Case("netmc/split=0 drops a client's reply too", "netmc", [
        Step(CLIENT, frame(CLIENT, CLIENT, encode(MGET_REPLY), sport=PORT, dport=CLIENT_PORT),
             {}, why="the trust boundary does not depend on the scheme"),
    ], params=CLIMC, **RACK, after=stats(HOST_SERVER_OP=1)),
    Case("netmc/what the codec refuses never reaches the pipeline", "netmc", [
        Step(CLIENT, req(patched(SPLIT3, numkey=6), 1), {},
             why="NUMKEY 6 past the 5-key list (docs/security.md: bad_msg, no register)"),
        Step(CLIENT, req(patched(SPLIT3, op=6), 1), {}, why="op 6: no such op"),
        Step(CLIENT, req(encode(SPLIT3)[:-1], 1), {}, why="truncated: the last key slot short"),
        Step(CLIENT, req(encode(SPLIT3)[:40], 1), {}, why="truncated: the fixed part cut"),
    ], params=NETMC, **RACK, after=stats()),
]
