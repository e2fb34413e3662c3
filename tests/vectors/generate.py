"""Regenerate the golden wire vectors tests/vectors/<protocol>.json.

The JSON files are committed content and the source of truth: tests/test_wire.py
and hostapps/tests/test_wire.c read them and check both codecs against them
independently. Run this only when a format changes on purpose, then review the
diff:  python tests/vectors/generate.py

Each vector: {"name", "proto", "hex", "fields": {...}} for a valid packet, or
{"name", "proto", "hex", "error": "ETRUNC"|...} for one both codecs must reject
(docs/wire.md, "Golden vectors").
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from netkv.wire.codec import (  # noqa: E402
    KINDS,
    MAX_SERVERS,
    NETMC_HDR_LEN,
    NETMC_MAX_KEYS,
    NETMC_N,
    KvswitchOp,
    Msg,
    NetcacheOp,
    NetlrOp,
    NetmcOp,
    PegasusOp,
    Proto,
    Result,
    StarcacheOp,
    crc32,
    decode,
    djb2,
    encode,
    netlr_slot,
    netmc_pack_pairs,
    starcache_hkey,
)

HERE = Path(__file__).resolve().parent
T0 = 1_700_000_000_123_456_789  # a send_ns in 2023, > 2^32: exercises u64

# The nk_msg fields each protocol carries on the wire (besides proto/op/kind);
# every other field must decode to its default.
CARRIED: dict[Proto, tuple[str, ...]] = {
    Proto.PLAIN: ("flags", "keyhash", "client_id", "server_id", "load", "ver", "bitmap",
                  "req_id", "send_ns", "result", "key", "value"),
    Proto.NETCACHE: ("result", "flags", "req_id", "client_id", "server_id", "load",
                     "send_ns", "key", "value"),
    Proto.KVSWITCH: ("result", "req_id", "ver", "key", "value"),
    Proto.STARCACHE: ("req_id", "hkey", "frag_cnt", "flags", "send_ns", "server_id",
                      "frag_idx", "result", "key", "value"),
    Proto.NETLR: ("keyhash", "ver", "key", "req_id", "epoch", "flags", "value"),
    Proto.NETMC: ("req_id", "oid", "nkeys", "keyidx", "startidx", "clo", "srv",
                  "key_slot_len", "key_slots", "result", "send_ns", "key", "value", "items"),
}
CARRIED[Proto.PEGASUS] = CARRIED[Proto.PLAIN]


def fields_of(m: Msg) -> dict[str, Any]:
    out: dict[str, Any] = {"op": int(m.op), "kind": int(m.kind or 0)}
    for name in CARRIED[m.proto]:
        v = getattr(m, name)
        if name in ("key", "value", "items"):
            out[name] = v.hex()
            out[f"{name}_len"] = len(v)
        elif name == "hkey":
            out[name] = f"{v:032x}"
        elif name == "srv":
            out[name] = list(v)
        else:
            out[name] = int(v)
    return out


def vec(name: str, m: Msg) -> dict[str, Any]:
    data = encode(m)
    back = decode(m.proto, data)
    assert encode(back) == data, name
    assert fields_of(back) == fields_of(m), (name, fields_of(back), fields_of(m))
    return {"name": name, "proto": m.proto.name.lower(), "hex": data.hex(),
            "fields": fields_of(back)}


def bad(name: str, proto: Proto, data: bytes, error: str) -> dict[str, Any]:
    try:
        decode(proto, data)
    except Exception as e:  # noqa: BLE001 - checked below
        assert getattr(e, "code").name == error, (name, e)
    else:
        raise AssertionError(f"{name}: decoded")
    return {"name": name, "proto": proto.name.lower(), "hex": data.hex(), "error": error}


def key64(i: int) -> bytes:
    """A 64 B key like the Pegasus workload's."""
    return f"key-{i:08d}-".encode().ljust(64, b"k")


def pegasus_like(proto: Proto) -> list[dict[str, Any]]:
    p = proto.name.lower()
    k = b"user:42"
    v = bytes(range(128))
    out = []
    base = dict(proto=proto, keyhash=djb2(k), client_id=7, send_ns=T0, key=k)
    out.append(vec(f"{p}/READ", Msg(op=PegasusOp.READ, server_id=3, req_id=1, **base)))
    out.append(vec(f"{p}/WRITE 128 B value", Msg(op=PegasusOp.WRITE, server_id=3, req_id=2,
                                                  value=v, **base)))
    out.append(vec(f"{p}/DEL", Msg(op=PegasusOp.DEL, server_id=3, req_id=3, **base)))
    out.append(vec(f"{p}/READ_REPLY", Msg(op=PegasusOp.READ_REPLY, server_id=5, load=17,
                                          ver=41, bitmap=1 << 5, req_id=1, value=v, **base)))
    out.append(vec(f"{p}/READ_REPLY NOT_FOUND", Msg(op=PegasusOp.READ_REPLY, server_id=5,
                                                    ver=1, bitmap=1 << 5, req_id=4, result=1,
                                                    **base)))
    out.append(vec(f"{p}/WRITE_REPLY", Msg(op=PegasusOp.WRITE_REPLY, server_id=31, load=0xFFFF,
                                           ver=42, bitmap=1 << 31, req_id=2, **base)))
    out.append(vec(f"{p}/WRITE_REPLY RETRY", Msg(op=PegasusOp.WRITE_REPLY, server_id=0, ver=43,
                                                 bitmap=1, req_id=5, result=2, **base)))
    out.append(vec(f"{p}/RC_REQ", Msg(op=PegasusOp.RC_REQ, server_id=2, ver=44,
                                      bitmap=0b1110, req_id=6, value=b"v" * 16, **base)))
    out.append(vec(f"{p}/RC_ACK", Msg(op=PegasusOp.RC_ACK, proto=proto, keyhash=djb2(k),
                                      server_id=9, ver=44, bitmap=1 << 9)))
    out.append(vec(f"{p}/PUT_FWD", Msg(op=PegasusOp.PUT_FWD, server_id=4, ver=45, req_id=7,
                                       value=b"fwd", **base)))
    out.append(vec(f"{p}/VWRITE MULTI", Msg(op=PegasusOp.VWRITE, flags=2, server_id=1,
                                            bitmap=0x0000_00F0, req_id=8, **base)))
    out.append(vec(f"{p}/WRITE BYPASS ver max", Msg(op=PegasusOp.WRITE, flags=1, server_id=6,
                                                    ver=2**64 - 1, req_id=0xFFFFFFFF,
                                                    value=b"", **base)))
    k64 = key64(1)
    out.append(vec(f"{p}/READ max key 64 B", Msg(op=PegasusOp.READ, proto=proto,
                                                 keyhash=djb2(k64), client_id=0xFFFF,
                                                 server_id=0xFF, req_id=9, send_ns=2**64 - 1,
                                                 key=k64)))
    out.append(vec(f"{p}/WRITE 1 KB value", Msg(op=PegasusOp.WRITE, server_id=3, req_id=10,
                                                value=bytes(i & 0xFF for i in range(1024)),
                                                **base)))
    good = encode(Msg(op=PegasusOp.READ, server_id=3, req_id=1, **base))
    other = Proto.PEGASUS if proto is Proto.PLAIN else Proto.PLAIN
    out.append(bad(f"{p}/bad: other protocol's magic", proto,
                   encode(Msg(op=PegasusOp.READ, **{**base, "proto": other})), "EMAGIC"))
    out.append(bad(f"{p}/bad: op 9", proto, good[:2] + b"\x09" + good[3:], "EOP"))
    out.append(bad(f"{p}/bad: truncated header", proto, good[:29], "ETRUNC"))
    out.append(bad(f"{p}/bad: trailing byte", proto, good + b"\0", "ELEN"))
    out.append(bad(f"{p}/bad: reserved byte", proto, good[:11] + b"\x01" + good[12:], "EFIELD"))
    out.append(bad(f"{p}/bad: key_len 65", proto,
                   good[:40] + struct.pack(">H", 65) + good[42:], "EKEYLEN"))
    return out


def netcache() -> list[dict[str, Any]]:
    P = Proto.NETCACHE
    k = b"key-0000000042"  # 14 B, padded to the 16 B slot
    v = bytes(range(128))
    base = dict(proto=P, client_id=3, send_ns=T0, key=k)
    out = [
        vec("netcache/READ", Msg(op=NetcacheOp.READ, server_id=2, req_id=1, **base)),
        vec("netcache/WRITE 100 B value (padded to 112)",
            Msg(op=NetcacheOp.WRITE, server_id=2, req_id=2, value=v[:100], **base)),
        vec("netcache/WRITE 1 KB value (uncacheable size)",
            Msg(op=NetcacheOp.WRITE, server_id=2, req_id=3, value=bytes(1024), **base)),
        vec("netcache/DELETE", Msg(op=NetcacheOp.DELETE, server_id=2, req_id=4, **base)),
        vec("netcache/READ_REPLY served by switch (CACHED)",
            Msg(op=NetcacheOp.READ_REPLY, flags=1, server_id=2, req_id=1, value=v, **base)),
        vec("netcache/READ_REPLY from server NOT_FOUND",
            Msg(op=NetcacheOp.READ_REPLY, result=1, server_id=2, load=12, req_id=5, **base)),
        vec("netcache/WRITE_REPLY", Msg(op=NetcacheOp.WRITE_REPLY, server_id=2, load=3,
                                        req_id=2, **base)),
        vec("netcache/DELETE_REPLY", Msg(op=NetcacheOp.DELETE_REPLY, server_id=2, req_id=4,
                                         **base)),
        vec("netcache/CACHE_UPDATE 128 B", Msg(op=NetcacheOp.CACHE_UPDATE, server_id=2,
                                               proto=P, key=k, value=v)),
        vec("netcache/CACHE_UPDATE_ACK", Msg(op=NetcacheOp.CACHE_UPDATE_ACK, server_id=2,
                                             proto=P, key=k)),
        vec("netcache/HOT_REPORT", Msg(op=NetcacheOp.HOT_REPORT, load=900, proto=P, key=k)),
        vec("netcache/READ max key 16 B zero value",
            Msg(op=NetcacheOp.READ, proto=P, key=b"0123456789abcdef", req_id=6,
                server_id=0xFF)),
    ]
    good = encode(Msg(op=NetcacheOp.READ, server_id=2, req_id=1, **base))
    out += [
        bad("netcache/bad: op 9", P, b"\x09" + good[1:], "EOP"),
        bad("netcache/bad: key_len 17", P, good[:3] + b"\x11" + good[4:], "EKEYLEN"),
        bad("netcache/bad: key padding not zero", P, good[:39] + b"\x01", "EFIELD"),
        bad("netcache/bad: CACHE_UPDATE 129 B", P,
            b"\x06" + good[1:12] + struct.pack(">H", 129) + good[14:] + bytes(144), "EVALUE"),
        bad("netcache/bad: value padding not zero", P,
            encode(Msg(op=NetcacheOp.WRITE, value=b"abc", **{**base, "proto": P}))[:-1]
            + b"\x01", "EFIELD"),
        bad("netcache/bad: truncated value", P,
            encode(Msg(op=NetcacheOp.WRITE, value=b"abc", **base))[:-1], "ETRUNC"),
    ]
    return out


def kvswitch() -> list[dict[str, Any]]:
    P = Proto.KVSWITCH
    k = bytes(8) + (123456789).to_bytes(8, "big")  # integer key id, low 8 bytes
    v = bytes((7 * i) & 0xFF for i in range(128))
    O = KvswitchOp
    out = [
        vec("kvswitch/GET", Msg(proto=P, op=O.GET, req_id=1, key=k)),
        vec("kvswitch/SET 128 B", Msg(proto=P, op=O.SET, req_id=2, key=k, value=v)),
        vec("kvswitch/SET hot stamped ver", Msg(proto=P, op=O.SET, req_id=3, ver=0xFFFFFFFF,
                                                key=k, value=b"x")),
        vec("kvswitch/DEL", Msg(proto=P, op=O.DEL, req_id=4, key=k)),
        vec("kvswitch/UPDATE", Msg(proto=P, op=O.UPDATE, req_id=2, ver=17, key=k, value=v)),
        vec("kvswitch/UPDATE_DEL", Msg(proto=P, op=O.UPDATE_DEL, req_id=4, ver=18, key=k)),
        vec("kvswitch/UPDATE_ACK", Msg(proto=P, op=O.UPDATE_ACK, req_id=2, ver=17, key=k)),
        vec("kvswitch/REPL_CMD push to 3 servers",
            Msg(proto=P, op=O.REPL_CMD, key=k, value=bytes([3, 1, 4, 9]))),
        vec("kvswitch/REPL_PUSH", Msg(proto=P, op=O.REPL_PUSH, key=k, value=v)),
        vec("kvswitch/REPL_EVICT", Msg(proto=P, op=O.REPL_EVICT, key=k)),
        vec("kvswitch/GET_REPLY", Msg(proto=P, op=O.GET_REPLY, req_id=1, ver=17, key=k,
                                      value=v)),
        vec("kvswitch/GET_REPLY NOT_FOUND", Msg(proto=P, op=O.GET_REPLY, result=1, req_id=5,
                                                key=k)),
        vec("kvswitch/SET_REPLY", Msg(proto=P, op=O.SET_REPLY, req_id=2, key=k)),
        vec("kvswitch/DEL_REPLY ERROR", Msg(proto=P, op=O.DEL_REPLY, result=2, req_id=4,
                                            key=k)),
    ]
    good = encode(Msg(proto=P, op=O.SET, req_id=2, key=k, value=b"abc"))
    out += [
        bad("kvswitch/bad: op 0", P, b"\x00" + good[1:], "EOP"),
        bad("kvswitch/bad: truncated value", P, good[:-1], "ETRUNC"),
        bad("kvswitch/bad: trailing byte", P, good + b"\0", "ELEN"),
        bad("kvswitch/bad: truncated key", P, good[:20], "ETRUNC"),
    ]
    return out


def starcache() -> list[dict[str, Any]]:
    P = Proto.STARCACHE
    k = b"0123456789abcdef"  # 16 B keys (the paper's)
    hk = starcache_hkey(k)
    lat = T0 & 0xFFFFFFFF
    O = StarcacheOp
    base = dict(proto=P, hkey=hk, key=k, server_id=2)
    v = bytes(range(128))
    out = [
        vec("starcache/R_REQ", Msg(op=O.R_REQ, req_id=1, frag_cnt=0, send_ns=lat, **base)),
        vec("starcache/W_REQ cached (FLAG=1 set by switch)",
            Msg(op=O.W_REQ, req_id=2, frag_cnt=1, send_ns=lat, value=v, **base)),
        vec("starcache/W_REQ uncached", Msg(op=O.W_REQ, req_id=3, frag_cnt=0, send_ns=lat,
                                            value=v, **base)),
        vec("starcache/R_REP served by cache (CACHED)",
            Msg(op=O.R_REP, req_id=1, frag_cnt=1, flags=1, send_ns=lat, value=v, **base)),
        vec("starcache/R_REP from server zero-length value",
            Msg(op=O.R_REP, req_id=4, frag_cnt=1, send_ns=lat, **base)),
        vec("starcache/W_REP with value attached",
            Msg(op=O.W_REP, req_id=2, frag_cnt=1, send_ns=lat, value=v, **base)),
        vec("starcache/W_REP uncached", Msg(op=O.W_REP, req_id=3, frag_cnt=0, send_ns=lat,
                                            **base)),
        vec("starcache/F_REQ", Msg(op=O.F_REQ, req_id=77, frag_cnt=0, **base)),
        vec("starcache/F_REP single packet", Msg(op=O.F_REP, req_id=77, frag_cnt=1, value=v,
                                                 **base)),
        vec("starcache/F_REP the switch did not take (RESULT RETRY)",
            Msg(op=O.F_REP, req_id=77, frag_cnt=1, value=v, result=Result.RETRY, **base)),
        vec("starcache/W_REP to a forged HKEY (RESULT RETRY, no value)",
            Msg(op=O.W_REP, req_id=2, frag_cnt=1, send_ns=lat, result=Result.RETRY, **base)),
        vec("starcache/R_REP key not stored (RESULT NOT_FOUND)",
            Msg(op=O.R_REP, req_id=4, frag_cnt=1, send_ns=lat, result=Result.NOT_FOUND, **base)),
        vec("starcache/CRN_REQ", Msg(op=O.CRN_REQ, req_id=5, frag_cnt=0, send_ns=lat, **base)),
        vec("starcache/seq wrap, LAT max", Msg(op=O.R_REQ, req_id=0xFFFFFFFF, frag_cnt=0,
                                               send_ns=0xFFFFFFFF, **base)),
        vec("starcache/R_REQ max key 64 B",
            Msg(op=O.R_REQ, proto=P, hkey=starcache_hkey(key64(2)), key=key64(2), req_id=6,
                frag_cnt=0, server_id=0)),
    ]
    # a 3-packet item of 16 B key + 1416 B value per packet (starcache.md §2)
    for i in range(3):
        out.append(vec(f"starcache/F_REP multi-packet fragment {i} of 3",
                       Msg(op=O.F_REP, req_id=78, frag_cnt=3, frag_idx=i,
                           value=bytes([0x30 + i]) * 1416, **base)))
    out.append(vec("starcache/R_REP cache packet fragment 2 of 3 (CACHED)",
                   Msg(op=O.R_REP, req_id=9, frag_cnt=3, frag_idx=2, flags=1, send_ns=lat,
                       value=b"\x32" * 1416, **base)))
    good = encode(Msg(op=O.R_REQ, req_id=1, frag_cnt=0, send_ns=lat, **base))
    out += [
        bad("starcache/bad: op 0", P, b"\x00" + good[1:], "EOP"),
        bad("starcache/bad: op 8", P, b"\x08" + good[1:], "EOP"),
        bad("starcache/bad: FRAG >= FLAG", P,
            encode(Msg(op=O.F_REP, frag_cnt=2, frag_idx=1, **base))[:21] + b"\x01"
            + encode(Msg(op=O.F_REP, frag_cnt=2, frag_idx=1, **base))[22:], "EFIELD"),
        bad("starcache/bad: RESULT 3", P, good[:33] + b"\x03" + good[34:], "EFIELD"),
        bad("starcache/bad: klen 65", P, good[:28] + struct.pack(">H", 65) + good[30:],
            "EKEYLEN"),
        bad("starcache/bad: core header only (22 B)", P, good[:22], "ETRUNC"),
    ]
    return out


def netlr() -> list[dict[str, Any]]:
    P = Proto.NETLR
    O = NetlrOp
    oid = 0x0001E240  # 123456
    key = oid.to_bytes(4, "big")
    slot = netlr_slot(oid, 131072)
    v = bytes(range(0xA0, 0xB0))
    base = dict(proto=P, keyhash=slot, key=key)
    out = [
        vec("netlr/READ", Msg(op=O.READ, req_id=1, **base)),
        vec("netlr/READ strict-mode stamp", Msg(op=O.READ, req_id=2, ver=99, flags=2,
                                                epoch=3, **base)),
        vec("netlr/R_REPLY", Msg(op=O.R_REPLY, req_id=1, ver=98, value=v, **base)),
        vec("netlr/WRITE (client, unstamped)", Msg(op=O.WRITE, req_id=3, value=v, **base)),
        vec("netlr/WRITE stamped by switch", Msg(op=O.WRITE, req_id=3, ver=100, flags=2,
                                                 epoch=3, value=v, **base)),
        vec("netlr/W_REPLY", Msg(op=O.W_REPLY, req_id=3, ver=100, epoch=3, **base)),
        vec("netlr/W_REPLY SUPERSEDED", Msg(op=O.W_REPLY, req_id=4, ver=101, flags=1,
                                            epoch=0xFFFF, **base)),
        vec("netlr/NACK", Msg(op=O.NACK, req_id=5, epoch=3, **base)),
        vec("netlr/WRITE zero value, max ids",
            Msg(op=O.WRITE, proto=P, keyhash=0xFFFFFFFF, key=b"\xff" * 4,
                req_id=0xFFFFFFFF, ver=0xFFFFFFFF, value=bytes(16))),
        # Hermes (replication=hermes): the timestamp (version 2, coordinator 1) in ver
        vec("netlr/INV (Hermes, timestamp version 2 from replica 1)",
            Msg(op=O.INV, req_id=3, ver=0x201, value=v, **base)),
        vec("netlr/ACK (Hermes)", Msg(op=O.ACK, req_id=3, ver=0x201, **base)),
        vec("netlr/VAL (Hermes)", Msg(op=O.VAL, req_id=3, ver=0x201, **base)),
    ]
    good = encode(Msg(op=O.READ, req_id=1, **base))
    ack = encode(Msg(op=O.ACK, req_id=3, ver=0x201, **base))
    out += [
        bad("netlr/bad: op 8", P, b"\x08" + good[1:], "EOP"),
        bad("netlr/bad: 35 B", P, good[:35], "ETRUNC"),
        bad("netlr/bad: 37 B", P, good + b"\0", "ELEN"),
        bad("netlr/bad: ACK with a value", P, ack[:20] + b"\x01" + ack[21:], "EFIELD"),
        bad("netlr/bad: READ with a value", P, good[:20] + b"\x01" + good[21:], "EFIELD"),
    ]
    assert slot == crc32(key) & (131072 - 1)
    return out


def netmc() -> list[dict[str, Any]]:
    P = Proto.NETMC
    O = NetmcOp

    def slot(name: bytes, keylen: int = 4) -> bytes:
        return name.ljust(keylen, b"\0")

    def srv(*ids: int) -> list[int]:
        return list(ids) + [0] * (NETMC_N - len(ids))

    k = slot(b"A")
    out = [
        vec("netmc/GET", Msg(proto=P, op=O.GET, req_id=1, key_slot_len=4, key_slots=1, key=k,
                             send_ns=T0)),
        vec("netmc/GET_REPLY", Msg(proto=P, op=O.GET_REPLY, req_id=1, key_slot_len=4,
                                   key_slots=1, key=k, value=b"value-A", send_ns=T0)),
        vec("netmc/GET_REPLY missing key", Msg(proto=P, op=O.GET_REPLY, req_id=2, result=1,
                                               key_slot_len=4, key_slots=1, key=k)),
        vec("netmc/PUT", Msg(proto=P, op=O.PUT, req_id=3, key_slot_len=4, key_slots=1, key=k,
                             value=bytes(range(64)))),
        vec("netmc/PUT zero-length value", Msg(proto=P, op=O.PUT, req_id=4, key_slot_len=4,
                                               key_slots=1, key=k)),
        vec("netmc/PUT_REPLY", Msg(proto=P, op=O.PUT_REPLY, req_id=3, key_slot_len=4,
                                   key_slots=1, key=k)),
        vec("netmc/GET max key slot 64 B", Msg(proto=P, op=O.GET, req_id=5, key_slot_len=64,
                                               key_slots=1, key=key64(3))),
    ]
    # the thesis' worked example (netmc.md §3): keys A,D on server 1, B on 2, C on 3
    keys = b"".join(slot(x) for x in (b"A", b"D", b"B", b"C"))
    out += [
        vec("netmc/MGET 3 groups, as sent by the client",
            Msg(proto=P, op=O.MGET, req_id=100, nkeys=4, keyidx=0x7000, srv=srv(1, 2, 3),
                key_slot_len=4, key_slots=4, items=keys, send_ns=T0)),
        # CLO 1: set before cloning, so the sub-request carries it too (§9.4)
        vec("netmc/MGET pass 1 (to server 1)",
            Msg(proto=P, op=O.MGET, req_id=100, nkeys=2, keyidx=0xC000, clo=1,
                srv=srv(1, 2, 3), key_slot_len=4, key_slots=4, items=keys, send_ns=T0)),
        vec("netmc/MGET pass 2 (recirculated, to server 2)",
            Msg(proto=P, op=O.MGET, req_id=100, oid=1, nkeys=1, keyidx=0x8000, startidx=2,
                clo=1, srv=srv(1, 2, 3), key_slot_len=4, key_slots=4, items=keys,
                send_ns=T0)),
        vec("netmc/MGET pass 3 (to server 3)",
            Msg(proto=P, op=O.MGET, req_id=100, oid=2, nkeys=1, keyidx=0, startidx=3, clo=1,
                srv=srv(1, 2, 3), key_slot_len=4, key_slots=4, items=keys, send_ns=T0)),
        vec("netmc/MGET 16 keys in 16 groups (W and SRV limits)",
            Msg(proto=P, op=O.MGET, req_id=101, nkeys=16, keyidx=0xFFFF,
                srv=srv(*range(16, 32)), key_slot_len=8, key_slots=16,
                items=b"".join(i.to_bytes(8, "big") for i in range(16)))),
        vec("netmc/MGET 32 keys in 32 groups (W = 32 and SRV limits)",
            Msg(proto=P, op=O.MGET, req_id=102, nkeys=32, keyidx=0xFFFFFFFF,
                srv=srv(*range(32)), key_slot_len=8, key_slots=32,
                items=b"".join(i.to_bytes(8, "big") for i in range(32)))),
        vec("netmc/MGET_REPLY group of 2",
            Msg(proto=P, op=O.MGET_REPLY, req_id=100, nkeys=2, keyidx=0xC000, srv=srv(1, 2, 3),
                key_slot_len=4, key_slots=2, send_ns=T0,
                items=netmc_pack_pairs([(slot(b"A"), b"value-A"), (slot(b"D"), b"vD")]))),
        vec("netmc/MGET_REPLY missing key (vlen 0)",
            Msg(proto=P, op=O.MGET_REPLY, req_id=100, oid=2, nkeys=1, startidx=3, clo=1,
                srv=srv(1, 2, 3), key_slot_len=4, key_slots=1, result=1,
                items=netmc_pack_pairs([(slot(b"C"), b"")]))),
    ]
    good = encode(Msg(proto=P, op=O.MGET, req_id=100, nkeys=4, keyidx=0x7000,
                      srv=srv(1, 2, 3), key_slot_len=4, key_slots=4, items=keys))
    pre = NETMC_HDR_LEN  # then KEYLEN, the number of key slots, ...
    over = NETMC_MAX_KEYS + 1
    out += [
        bad("netmc/bad: op 6", P, b"\x06" + good[1:], "EOP"),
        bad("netmc/bad: MGET one key slot short", P, good[:-4], "ETRUNC"),
        bad("netmc/bad: MGET NUMKEY beyond the key list", P,
            good[:6] + b"\x05" + good[7:], "EFIELD"),
        bad("netmc/bad: keylen 0", P, good[:pre] + b"\x00" + good[pre + 1:], "EKEYLEN"),
        bad("netmc/bad: fixed part only", P, good[:pre], "ETRUNC"),
        bad(f"netmc/bad: MGET {over} slots (more than W = {NETMC_MAX_KEYS})", P,
            good[:6] + bytes([over]) + good[7:pre + 1] + bytes([over]) + good[pre + 2:]
            + bytes((over - 4) * 4), "EFIELD"),
    ]
    return out


def render() -> dict[str, str]:
    """Each protocol's vector file, as text (tests compare it with the committed one)."""
    groups = {
        "plain": pegasus_like(Proto.PLAIN),
        "pegasus": pegasus_like(Proto.PEGASUS),
        "netcache": netcache(),
        "kvswitch": kvswitch(),
        "starcache": starcache(),
        "netlr": netlr(),
        "netmc": netmc(),
    }
    out = {}
    for name, vectors in groups.items():
        proto = Proto[name.upper()]
        covered = {v["fields"]["op"] for v in vectors if "fields" in v}
        missing = set(KINDS[proto]) - covered
        assert not missing, (name, missing)
        out[name] = "[\n" + ",\n".join(json.dumps(v) for v in vectors) + "\n]\n"
    assert MAX_SERVERS == NETMC_N
    return out


def main() -> None:
    for name, text in render().items():
        (HERE / f"{name}.json").write_text(text)
        print(f"{name}: {len(json.loads(text))} vectors")


if __name__ == "__main__":
    main()
