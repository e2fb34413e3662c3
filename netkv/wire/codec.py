"""Pure-Python codec for every netkv wire format, mirroring hostapps/src/wire.c.

``decode(proto, data) -> Msg`` and ``encode(msg) -> bytes`` follow the C API
(``nk_wire_decode`` / ``nk_wire_encode``) check for check: decoding is strict
(exact lengths, zero reserved bytes and padding), so a successful decode always
re-encodes to the same bytes, and a bad packet raises ``WireError`` whose
``code`` is the same negative NK_WIRE_E* number the C codec returns. Layouts
and choices: docs/wire.md. The key hashes (djb2, MurmurHash3_x64_128, CRC-32)
are here too, equal to hostapps/src/hash.c.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where used: the CLI's `list` stays fast
    import numpy as np

from netkv.constants import (  # generated from spec/constants.toml (re-exported)
    KVSWITCH_PORT,
    MAX_SERVERS,
    NETCACHE_FLAG_CACHED,
    NETCACHE_FLAG_REFRESH,
    NETCACHE_PORT,
    NETLR_FLAG_STAMPED,
    NETLR_FLAG_SUPERSEDED,
    NETLR_PORT,
    NETMC_BASELINE_PORT_BASE,
    NETMC_PORT_BASE,
    NETMC_PORT_MASK,
    PEGASUS_FLAG_BYPASS,
    PEGASUS_FLAG_MULTI,
    PEGASUS_MAGIC,
    PEGASUS_PORT,
    PLAIN_MAGIC,
    RESULT_NOT_FOUND,
    RESULT_OK,
    RESULT_RETRY,
    SERVER_NONE,
    STARCACHE_PORT,
    STARCACHE_REPORT_TCP_PORT,
    KvswitchOp,
    NetcacheOp,
    NetlrOp,
    NetmcOp,
    PegasusOp,
    Proto,
    StarcacheOp,
)

# ---- shared constants (wire.h) -----------------------------------------------

MAX_KEY_LEN = 64


class Kind(IntEnum):
    """enum nk_kind: the protocol-independent operation kind."""

    READ = 0
    WRITE = 1
    READ_REPLY = 2
    WRITE_REPLY = 3
    MULTIGET = 4
    MULTIGET_REPLY = 5
    CONTROL = 6


class Result(IntEnum):
    OK = RESULT_OK
    NOT_FOUND = RESULT_NOT_FOUND
    RETRY = RESULT_RETRY  # Pegasus RETRY (KVSwitch: KVSWITCH_RESULT_ERROR, the same value)


class WireErrorCode(IntEnum):
    """enum nk_wire_error: the C codec's negative return codes."""

    ETRUNC = -1
    EMAGIC = -2
    EOP = -3
    EPROTO = -4
    EKEYLEN = -5
    ELEN = -6
    ESPACE = -7
    EFIELD = -8
    EVALUE = -9
    EINVAL = -10


_ERROR_TEXT = {
    WireErrorCode.ETRUNC: "truncated",
    WireErrorCode.EMAGIC: "bad magic",
    WireErrorCode.EOP: "unknown op code",
    WireErrorCode.EPROTO: "unknown protocol",
    WireErrorCode.EKEYLEN: "key length out of range",
    WireErrorCode.ELEN: "length mismatch (trailing bytes or inconsistent lengths)",
    WireErrorCode.ESPACE: "output buffer too small",
    WireErrorCode.EFIELD: "field out of range",
    WireErrorCode.EVALUE: "value length not allowed",
    WireErrorCode.EINVAL: "invalid argument",
}


class WireError(ValueError):
    """A packet that does not decode (or a message that does not encode)."""

    def __init__(self, code: WireErrorCode, detail: str = "") -> None:
        self.code = WireErrorCode(code)
        text = _ERROR_TEXT[self.code]
        super().__init__(f"{text}: {detail}" if detail else text)


def strerror(code: int) -> str:
    return _ERROR_TEXT.get(WireErrorCode(code), "unknown error") if code < 0 else "ok"


# ---- per-protocol constants ----------------------------------------------------

PEGASUS_HDR_LEN = 30
PEGASUS_PAYLOAD_HDR_LEN = 16

NETCACHE_HDR_LEN = 40
NETCACHE_KEY_LEN = 16
NETCACHE_VALUE_CHUNK = 16
NETCACHE_MAX_CACHED_VALUE = 128

KVSWITCH_HDR_LEN = 28
KVSWITCH_KEY_LEN = 16

STARCACHE_HDR_LEN = 28
STARCACHE_PAYLOAD_HDR_LEN = 6

NETLR_LEN = 36
NETLR_VALUE_LEN = 16
NETLR_OID_LEN = 4

NETMC_N = 32
NETMC_KEYIDX_BITS = 32   # KEYIDX on the wire (W = 16 or 32 is the rack's)
NETMC_HDR_LEN = 13 + NETMC_N
NETMC_PAYLOAD_HDR_LEN = 12
NETMC_MAX_KEYS = NETMC_KEYIDX_BITS


OPS: dict[Proto, type[IntEnum]] = {
    Proto.PLAIN: PegasusOp,
    Proto.PEGASUS: PegasusOp,
    Proto.NETCACHE: NetcacheOp,
    Proto.KVSWITCH: KvswitchOp,
    Proto.STARCACHE: StarcacheOp,
    Proto.NETLR: NetlrOp,
    Proto.NETMC: NetmcOp,
}

_K = Kind
KINDS: dict[Proto, dict[int, Kind]] = {
    Proto.PEGASUS: {
        PegasusOp.READ: _K.READ, PegasusOp.WRITE: _K.WRITE, PegasusOp.DEL: _K.WRITE,
        PegasusOp.READ_REPLY: _K.READ_REPLY, PegasusOp.WRITE_REPLY: _K.WRITE_REPLY,
        PegasusOp.RC_REQ: _K.CONTROL, PegasusOp.RC_ACK: _K.CONTROL,
        PegasusOp.PUT_FWD: _K.WRITE, PegasusOp.VWRITE: _K.CONTROL,
    },
    Proto.NETCACHE: {
        NetcacheOp.READ: _K.READ, NetcacheOp.WRITE: _K.WRITE, NetcacheOp.DELETE: _K.WRITE,
        NetcacheOp.READ_REPLY: _K.READ_REPLY, NetcacheOp.WRITE_REPLY: _K.WRITE_REPLY,
        NetcacheOp.DELETE_REPLY: _K.WRITE_REPLY, NetcacheOp.CACHE_UPDATE: _K.CONTROL,
        NetcacheOp.CACHE_UPDATE_ACK: _K.CONTROL, NetcacheOp.HOT_REPORT: _K.CONTROL,
    },
    Proto.KVSWITCH: {
        KvswitchOp.GET: _K.READ, KvswitchOp.SET: _K.WRITE, KvswitchOp.DEL: _K.WRITE,
        KvswitchOp.UPDATE: _K.CONTROL, KvswitchOp.UPDATE_DEL: _K.CONTROL,
        KvswitchOp.UPDATE_ACK: _K.CONTROL, KvswitchOp.REPL_CMD: _K.CONTROL,
        KvswitchOp.REPL_PUSH: _K.CONTROL, KvswitchOp.REPL_EVICT: _K.CONTROL,
        KvswitchOp.GET_REPLY: _K.READ_REPLY, KvswitchOp.SET_REPLY: _K.WRITE_REPLY,
        KvswitchOp.DEL_REPLY: _K.WRITE_REPLY,
    },
    Proto.STARCACHE: {
        StarcacheOp.R_REQ: _K.READ, StarcacheOp.W_REQ: _K.WRITE,
        StarcacheOp.R_REP: _K.READ_REPLY, StarcacheOp.W_REP: _K.WRITE_REPLY,
        StarcacheOp.F_REQ: _K.CONTROL, StarcacheOp.F_REP: _K.CONTROL,
        StarcacheOp.CRN_REQ: _K.READ,
    },
    Proto.NETLR: {
        NetlrOp.READ: _K.READ, NetlrOp.R_REPLY: _K.READ_REPLY, NetlrOp.WRITE: _K.WRITE,
        NetlrOp.W_REPLY: _K.WRITE_REPLY, NetlrOp.NACK: _K.CONTROL,
        NetlrOp.INV: _K.CONTROL, NetlrOp.ACK: _K.CONTROL, NetlrOp.VAL: _K.CONTROL,
    },
    Proto.NETMC: {
        NetmcOp.GET: _K.READ, NetmcOp.GET_REPLY: _K.READ_REPLY, NetmcOp.PUT: _K.WRITE,
        NetmcOp.PUT_REPLY: _K.WRITE_REPLY, NetmcOp.MGET: _K.MULTIGET,
        NetmcOp.MGET_REPLY: _K.MULTIGET_REPLY,
    },
}
KINDS[Proto.PLAIN] = KINDS[Proto.PEGASUS]


def kind_of(proto: Proto | int, op: int) -> Kind:
    """The nk_kind of a protocol's op code; WireError(EOP) if unknown."""
    try:
        return KINDS[Proto(proto)][op]
    except KeyError:
        raise WireError(WireErrorCode.EOP, f"{Proto(proto).name.lower()} op {op}") from None


def op_name(proto: Proto | int, op: int) -> str:
    try:
        return OPS[Proto(proto)](op).name
    except ValueError:
        return "?"


# ---- the decoded message -------------------------------------------------------


@dataclass
class Msg:
    """Mirror of struct nk_msg (msg.h). Bytes replace pointer+length pairs:
    ``key`` (key_len = len(key)), ``value`` (value_len = len(value)) and NetMC's
    ``items``. ``hkey`` is the 128-bit StarCache HKEY as one integer (C: hkey[0]
    = high 64 bits). ``kind`` is derived from ``op`` when left as None."""

    proto: Proto
    op: int
    kind: int | None = None
    flags: int = 0
    result: int = 0
    server_id: int = SERVER_NONE
    client_id: int = 0
    load: int = 0
    epoch: int = 0
    req_id: int = 0
    keyhash: int = 0
    hkey: int = 0
    ver: int = 0
    bitmap: int = 0
    send_ns: int = 0
    key: bytes = b""
    value: bytes = b""
    frag_idx: int = 0
    frag_cnt: int = 1
    nkeys: int = 0
    oid: int = 0
    startidx: int = 0
    clo: int = 0
    keyidx: int = 0
    srv: list[int] = field(default_factory=lambda: [0] * MAX_SERVERS)
    key_slot_len: int = 0
    key_slots: int = 0
    items: bytes = b""

    def __post_init__(self) -> None:
        self.proto = Proto(self.proto)
        if self.kind is None and self.op in KINDS[self.proto]:
            self.kind = KINDS[self.proto][self.op]

    @property
    def key_len(self) -> int:
        return len(self.key)

    @property
    def value_len(self) -> int:
        return len(self.value)


# ---- helpers ---------------------------------------------------------------------


def _check_total(length: int, total: int) -> None:
    if length < total:
        raise WireError(WireErrorCode.ETRUNC, f"{length} < {total} bytes")
    if length > total:
        raise WireError(WireErrorCode.ELEN, f"{length - total} trailing bytes")


def _zero(b: bytes) -> bool:
    return not any(b)


def _err(code: WireErrorCode, detail: str = "") -> WireError:
    return WireError(code, detail)


# ---- Pegasus / plain -------------------------------------------------------------

_PEG_HDR = struct.Struct(">HBBIHBBHQII")  # 30 B
_PEG_PAY = struct.Struct(">QBBHI")  # 16 B


def _magic(proto: Proto) -> int:
    return PLAIN_MAGIC if proto is Proto.PLAIN else PEGASUS_MAGIC


def _pegasus_decode(proto: Proto, b: bytes) -> Msg:
    fixed = PEGASUS_HDR_LEN + PEGASUS_PAYLOAD_HDR_LEN
    if len(b) < fixed:
        raise _err(WireErrorCode.ETRUNC, f"{len(b)} < {fixed} bytes")
    (magic, op, flags, keyhash, client_id, server_id, rsvd, load, ver, bitmap,
     req_id) = _PEG_HDR.unpack_from(b, 0)
    send_ns, result, rsvd2, key_len, value_len = _PEG_PAY.unpack_from(b, PEGASUS_HDR_LEN)
    if magic != _magic(proto):
        raise _err(WireErrorCode.EMAGIC, f"0x{magic:04x}")
    if op not in KINDS[proto]:
        raise _err(WireErrorCode.EOP, f"op {op}")
    if rsvd or rsvd2:
        raise _err(WireErrorCode.EFIELD, "reserved byte not zero")
    if key_len > MAX_KEY_LEN:
        raise _err(WireErrorCode.EKEYLEN, f"key_len {key_len}")
    _check_total(len(b), fixed + key_len + value_len)
    return Msg(
        proto=proto, op=op, flags=flags, keyhash=keyhash, client_id=client_id,
        server_id=server_id, load=load, ver=ver, bitmap=bitmap, req_id=req_id,
        send_ns=send_ns, result=result, key=bytes(b[fixed:fixed + key_len]),
        value=bytes(b[fixed + key_len:]),
    )


def _pegasus_encode(m: Msg) -> bytes:
    if len(m.key) > MAX_KEY_LEN:
        raise _err(WireErrorCode.EKEYLEN, f"key_len {len(m.key)}")
    return (
        _PEG_HDR.pack(_magic(m.proto), m.op, m.flags, m.keyhash, m.client_id, m.server_id,
                      0, m.load, m.ver, m.bitmap, m.req_id)
        + _PEG_PAY.pack(m.send_ns, m.result, 0, len(m.key), len(m.value))
        + m.key + m.value
    )


# ---- NetCache ----------------------------------------------------------------------

_NC_HDR = struct.Struct(">BBBBIHBBHHQ16s")  # 40 B


def _nc_area(vlen: int) -> int:
    return -(-vlen // NETCACHE_VALUE_CHUNK) * NETCACHE_VALUE_CHUNK


def _netcache_decode(b: bytes) -> Msg:
    if len(b) < NETCACHE_HDR_LEN:
        raise _err(WireErrorCode.ETRUNC, f"{len(b)} < {NETCACHE_HDR_LEN} bytes")
    (op, result, flags, key_len, seq, client_id, server_id, rsvd, vlen, load, send_ns,
     key) = _NC_HDR.unpack_from(b, 0)
    if op not in KINDS[Proto.NETCACHE]:
        raise _err(WireErrorCode.EOP, f"op {op}")
    if key_len > NETCACHE_KEY_LEN:
        raise _err(WireErrorCode.EKEYLEN, f"key_len {key_len}")
    if rsvd or not _zero(key[key_len:]):
        raise _err(WireErrorCode.EFIELD, "reserved byte or key padding not zero")
    if op == NetcacheOp.CACHE_UPDATE and vlen > NETCACHE_MAX_CACHED_VALUE:
        raise _err(WireErrorCode.EVALUE, f"cached value of {vlen} B > 128 B")
    _check_total(len(b), NETCACHE_HDR_LEN + _nc_area(vlen))
    if not _zero(b[NETCACHE_HDR_LEN + vlen:]):
        raise _err(WireErrorCode.EFIELD, "value padding not zero")
    return Msg(
        proto=Proto.NETCACHE, op=op, result=result, flags=flags, req_id=seq,
        client_id=client_id, server_id=server_id, load=load, send_ns=send_ns,
        key=bytes(key[:key_len]), value=bytes(b[NETCACHE_HDR_LEN:NETCACHE_HDR_LEN + vlen]),
    )


def _netcache_encode(m: Msg) -> bytes:
    if len(m.key) > NETCACHE_KEY_LEN:
        raise _err(WireErrorCode.EKEYLEN, f"key_len {len(m.key)}")
    if len(m.value) > 0xFFFF:
        raise _err(WireErrorCode.EVALUE, f"value_len {len(m.value)}")
    if m.op == NetcacheOp.CACHE_UPDATE and len(m.value) > NETCACHE_MAX_CACHED_VALUE:
        raise _err(WireErrorCode.EVALUE, f"cached value of {len(m.value)} B > 128 B")
    pad = _nc_area(len(m.value)) - len(m.value)
    return (
        _NC_HDR.pack(m.op, m.result, m.flags, len(m.key), m.req_id, m.client_id,
                     m.server_id, 0, len(m.value), m.load, m.send_ns, m.key)
        + m.value + bytes(pad)
    )


# ---- KVSwitch ------------------------------------------------------------------------

_KV_HDR = struct.Struct(">BBHII16s")  # 28 B


def _kvswitch_decode(b: bytes) -> Msg:
    if len(b) < KVSWITCH_HDR_LEN:
        raise _err(WireErrorCode.ETRUNC, f"{len(b)} < {KVSWITCH_HDR_LEN} bytes")
    op, status, vlen, seq, ver, key = _KV_HDR.unpack_from(b, 0)
    if op not in KINDS[Proto.KVSWITCH]:
        raise _err(WireErrorCode.EOP, f"op 0x{op:02x}")
    _check_total(len(b), KVSWITCH_HDR_LEN + vlen)
    return Msg(proto=Proto.KVSWITCH, op=op, result=status, req_id=seq, ver=ver, key=key,
               value=bytes(b[KVSWITCH_HDR_LEN:]))


def _kvswitch_encode(m: Msg) -> bytes:
    if len(m.key) != KVSWITCH_KEY_LEN:
        raise _err(WireErrorCode.EKEYLEN, f"key_len {len(m.key)} != 16")
    if len(m.value) > 0xFFFF:
        raise _err(WireErrorCode.EVALUE, f"value_len {len(m.value)}")
    if m.ver > 0xFFFFFFFF:
        raise _err(WireErrorCode.EFIELD, "ver does not fit 32 bits")
    return _KV_HDR.pack(m.op, m.result, len(m.value), m.req_id, m.ver, m.key) + m.value


# ---- StarCache ---------------------------------------------------------------------------

_SC_HDR = struct.Struct(">BIQQBBIB")  # 28 B
_SC_PAY = struct.Struct(">HHBB")  # 6 B


def _starcache_decode(b: bytes) -> Msg:
    fixed = STARCACHE_HDR_LEN + STARCACHE_PAYLOAD_HDR_LEN
    if len(b) < fixed:
        raise _err(WireErrorCode.ETRUNC, f"{len(b)} < {fixed} bytes")
    op, seq, hi, lo, flag, cached, lat, parid = _SC_HDR.unpack_from(b, 0)
    klen, vlen, frag, result = _SC_PAY.unpack_from(b, STARCACHE_HDR_LEN)
    if op not in KINDS[Proto.STARCACHE]:
        raise _err(WireErrorCode.EOP, f"op {op}")
    if klen > MAX_KEY_LEN:
        raise _err(WireErrorCode.EKEYLEN, f"klen {klen}")
    if result > RESULT_RETRY or frag >= max(flag, 1):
        raise _err(WireErrorCode.EFIELD, f"result {result}, frag {frag} of {flag}")
    _check_total(len(b), fixed + klen + vlen)
    return Msg(
        proto=Proto.STARCACHE, op=op, req_id=seq, hkey=(hi << 64) | lo, frag_cnt=flag,
        flags=cached, send_ns=lat, server_id=parid, frag_idx=frag, result=result,
        key=bytes(b[fixed:fixed + klen]), value=bytes(b[fixed + klen:]),
    )


def _starcache_encode(m: Msg) -> bytes:
    if len(m.key) > MAX_KEY_LEN:
        raise _err(WireErrorCode.EKEYLEN, f"key_len {len(m.key)}")
    if len(m.value) > 0xFFFF:
        raise _err(WireErrorCode.EVALUE, f"value_len {len(m.value)}")
    if m.frag_idx >= max(m.frag_cnt, 1) or not 0 <= m.result <= RESULT_RETRY:
        raise _err(WireErrorCode.EFIELD, f"frag {m.frag_idx} of {m.frag_cnt}, result {m.result}")
    return (
        _SC_HDR.pack(m.op, m.req_id, m.hkey >> 64, m.hkey & 0xFFFFFFFFFFFFFFFF, m.frag_cnt,
                     m.flags, m.send_ns & 0xFFFFFFFF, m.server_id)
        + _SC_PAY.pack(len(m.key), len(m.value), m.frag_idx, m.result)
        + m.key + m.value
    )


# ---- NetLR ---------------------------------------------------------------------------------

_LR = struct.Struct(">BII4sIHB16s")  # 36 B


def _netlr_has_value(op: int) -> bool:
    # Hermes' INV carries the written value to every replica
    return op in (NetlrOp.WRITE, NetlrOp.R_REPLY, NetlrOp.INV)


def _netlr_decode(b: bytes) -> Msg:
    _check_total(len(b), NETLR_LEN)
    op, slot, seq, oid, req_id, epoch, flags, value = _LR.unpack_from(b, 0)
    if op not in KINDS[Proto.NETLR]:
        raise _err(WireErrorCode.EOP, f"op {op}")
    has_value = _netlr_has_value(op)
    if not has_value and not _zero(value):
        raise _err(WireErrorCode.EFIELD, "value area of a value-less op not zero")
    return Msg(proto=Proto.NETLR, op=op, keyhash=slot, ver=seq, key=oid, req_id=req_id,
               epoch=epoch, flags=flags, value=value if has_value else b"")


def _netlr_encode(m: Msg) -> bytes:
    if len(m.key) != NETLR_OID_LEN:
        raise _err(WireErrorCode.EKEYLEN, f"key_len {len(m.key)} != 4 (oid)")
    if m.ver > 0xFFFFFFFF:
        raise _err(WireErrorCode.EFIELD, "ver does not fit 32 bits")
    want = NETLR_VALUE_LEN if _netlr_has_value(m.op) else 0
    if len(m.value) != want:
        raise _err(WireErrorCode.EVALUE, f"value_len {len(m.value)} != {want}")
    return _LR.pack(m.op, m.keyhash, m.ver, m.key, m.req_id, m.epoch, m.flags,
                    m.value.ljust(NETLR_VALUE_LEN, b"\0"))


# ---- NetMC -----------------------------------------------------------------------------------

_MC_HDR = struct.Struct(f">BIBBIBB{NETMC_N}s")  # 13 + N B
_MC_PAY = struct.Struct(">BBBBQ")  # 12 B
_MC_ONE_KEY = (NetmcOp.GET, NetmcOp.PUT_REPLY)
_MC_ONE_PAIR = (NetmcOp.PUT, NetmcOp.GET_REPLY)


def netmc_pairs(items: bytes, keylen: int, npairs: int) -> list[tuple[bytes, bytes]]:
    """Split a NetMC pair list (key[keylen] | vlen u16 | value) into (key, value)
    pairs; WireError ETRUNC/ELEN unless exactly npairs pairs fill it."""
    pairs: list[tuple[bytes, bytes]] = []
    off = 0
    for _ in range(npairs):
        if len(items) - off < keylen + 2:
            raise _err(WireErrorCode.ETRUNC, "pair list")
        (vlen,) = struct.unpack_from(">H", items, off + keylen)
        key = bytes(items[off:off + keylen])
        off += keylen + 2
        if len(items) - off < vlen:
            raise _err(WireErrorCode.ETRUNC, "pair value")
        pairs.append((key, bytes(items[off:off + vlen])))
        off += vlen
    if off != len(items):
        raise _err(WireErrorCode.ELEN, f"{len(items) - off} bytes after {npairs} pairs")
    return pairs


def netmc_pack_pairs(pairs: list[tuple[bytes, bytes]]) -> bytes:
    """Build a NetMC pair list (the keys must already be KEYLEN slots)."""
    return b"".join(k + struct.pack(">H", len(v)) + v for k, v in pairs)


def _netmc_multi_ok(op: int, nslots: int, numkey: int, startidx: int) -> bool:
    if not 1 <= nslots <= NETMC_MAX_KEYS:
        return False
    if op == NetmcOp.MGET:
        return startidx + numkey <= nslots
    return numkey == nslots


def _netmc_decode(b: bytes) -> Msg:
    fixed = NETMC_HDR_LEN + NETMC_PAYLOAD_HDR_LEN
    if len(b) < fixed:
        raise _err(WireErrorCode.ETRUNC, f"{len(b)} < {fixed} bytes")
    op, mid, oid, numkey, keyidx, startidx, clo, srv = _MC_HDR.unpack_from(b, 0)
    keylen, nslots, result, rsvd, send_ns = _MC_PAY.unpack_from(b, NETMC_HDR_LEN)
    if op not in KINDS[Proto.NETMC]:
        raise _err(WireErrorCode.EOP, f"op {op}")
    if not 1 <= keylen <= MAX_KEY_LEN:
        raise _err(WireErrorCode.EKEYLEN, f"keylen {keylen}")
    if rsvd:
        raise _err(WireErrorCode.EFIELD, "reserved byte not zero")
    rest = b[fixed:]
    m = Msg(proto=Proto.NETMC, op=op, req_id=mid, oid=oid, nkeys=numkey, keyidx=keyidx,
            startidx=startidx, clo=clo, srv=list(srv), key_slot_len=keylen,
            key_slots=nslots, result=result, send_ns=send_ns)
    if op in _MC_ONE_KEY or op in _MC_ONE_PAIR:
        if nslots != 1:
            raise _err(WireErrorCode.EFIELD, f"nslots {nslots} != 1")
        if op in _MC_ONE_KEY:
            _check_total(len(rest), keylen)
        else:
            if len(rest) < keylen + 2:
                raise _err(WireErrorCode.ETRUNC, "key-value pair")
            (vlen,) = struct.unpack_from(">H", rest, keylen)
            _check_total(len(rest), keylen + 2 + vlen)
            m.value = bytes(rest[keylen + 2:])
        m.key = bytes(rest[:keylen])
        return m
    if not _netmc_multi_ok(op, nslots, numkey, startidx):
        raise _err(WireErrorCode.EFIELD, f"nslots {nslots}, numkey {numkey}, "
                   f"startidx {startidx}")
    if op == NetmcOp.MGET:
        _check_total(len(rest), nslots * keylen)
    else:
        netmc_pairs(rest, keylen, nslots)
    if len(rest) > 0xFFFF:
        raise _err(WireErrorCode.ELEN, "item list longer than 65535 B")
    m.items = bytes(rest)
    return m


def _netmc_encode(m: Msg) -> bytes:
    if not 1 <= m.key_slot_len <= MAX_KEY_LEN:
        raise _err(WireErrorCode.EKEYLEN, f"key_slot_len {m.key_slot_len}")
    if not 0 <= m.keyidx <= 0xFFFFFFFF:
        raise _err(WireErrorCode.EFIELD, "keyidx does not fit 32 bits")
    srv = bytes(m.srv[:NETMC_N]).ljust(NETMC_N, b"\0")
    multi = m.op in (NetmcOp.MGET, NetmcOp.MGET_REPLY)
    if multi:
        if not _netmc_multi_ok(m.op, m.key_slots, m.nkeys, m.startidx):
            raise _err(WireErrorCode.EFIELD, f"key_slots {m.key_slots}, nkeys {m.nkeys}, "
                       f"startidx {m.startidx}")
        if m.op == NetmcOp.MGET:
            if len(m.items) != m.key_slots * m.key_slot_len:
                raise _err(WireErrorCode.ELEN, "items != key_slots * key_slot_len")
        else:
            try:
                netmc_pairs(m.items, m.key_slot_len, m.key_slots)
            except WireError as e:
                raise _err(WireErrorCode.ELEN, str(e)) from None
        body = m.items
    else:
        if len(m.key) != m.key_slot_len:
            raise _err(WireErrorCode.EKEYLEN, f"key_len {len(m.key)} != key_slot_len")
        body = m.key
        if m.op in _MC_ONE_PAIR:
            if len(m.value) > 0xFFFF:
                raise _err(WireErrorCode.EVALUE, f"value_len {len(m.value)}")
            body += struct.pack(">H", len(m.value)) + m.value
    return (
        _MC_HDR.pack(m.op, m.req_id, m.oid, m.nkeys, m.keyidx, m.startidx, m.clo, srv)
        + _MC_PAY.pack(m.key_slot_len, m.key_slots if multi else 1, m.result, 0, m.send_ns)
        + body
    )


# ---- dispatch ----------------------------------------------------------------------------------


def decode(proto: Proto | int | str, data: bytes) -> Msg:
    """Decode one UDP payload; raises WireError (one line) on any bad input."""
    p = _proto(proto)
    b = bytes(data)
    if p in (Proto.PLAIN, Proto.PEGASUS):
        return _pegasus_decode(p, b)
    if p is Proto.NETCACHE:
        return _netcache_decode(b)
    if p is Proto.KVSWITCH:
        return _kvswitch_decode(b)
    if p is Proto.STARCACHE:
        return _starcache_decode(b)
    if p is Proto.NETLR:
        return _netlr_decode(b)
    return _netmc_decode(b)


_ENCODERS = {
    Proto.PLAIN: _pegasus_encode,
    Proto.PEGASUS: _pegasus_encode,
    Proto.NETCACHE: _netcache_encode,
    Proto.KVSWITCH: _kvswitch_encode,
    Proto.STARCACHE: _starcache_encode,
    Proto.NETLR: _netlr_encode,
    Proto.NETMC: _netmc_encode,
}


def encode(msg: Msg) -> bytes:
    """Encode a message of protocol msg.proto; raises WireError if it cannot."""
    p = _proto(msg.proto)
    if msg.op not in KINDS[p]:
        raise _err(WireErrorCode.EOP, f"{p.name.lower()} op {msg.op}")
    try:
        return _ENCODERS[p](msg)
    except WireError:
        raise
    except (struct.error, ValueError, TypeError) as e:  # a field wider than its C type
        raise _err(WireErrorCode.EFIELD, str(e)) from None


def _proto(proto: Proto | int | str) -> Proto:
    try:
        return Proto[proto.upper()] if isinstance(proto, str) else Proto(proto)
    except (KeyError, ValueError):
        raise _err(WireErrorCode.EPROTO, repr(proto)) from None


# ---- key hashes (hostapps/src/hash.c) ----------------------------------------------------------

_M64 = 0xFFFFFFFFFFFFFFFF


def djb2(key: bytes) -> int:
    """Pegasus keyhash: djb2 with 32-bit wrap, & 0x7FFFFFFF."""
    h = 5381
    for c in key:
        h = (h * 33 + c) & 0xFFFFFFFF
    return h & 0x7FFFFFFF


def djb2_many(keys: np.ndarray) -> np.ndarray:
    """djb2 of many equal-length keys at once: keys is (n, L) uint8 -> (n,) uint32."""
    import numpy as np

    k = np.asarray(keys, dtype=np.uint8)
    h = np.full(k.shape[0], 5381, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for col in range(k.shape[1]):
            h = h * np.uint32(33) + k[:, col].astype(np.uint32)
    return h & np.uint32(0x7FFFFFFF)


def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    k ^= k >> 33
    return k


def murmur3_128(key: bytes, seed: int = 0) -> tuple[int, int]:
    """MurmurHash3_x64_128: returns (h1, h2), C's out[0], out[1]."""
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    h1 = h2 = seed & 0xFFFFFFFF
    n = len(key)
    nblocks = n // 16
    for i in range(nblocks):
        k1 = int.from_bytes(key[16 * i:16 * i + 8], "little")
        k2 = int.from_bytes(key[16 * i + 8:16 * i + 16], "little")
        k1 = (_rotl64((k1 * c1) & _M64, 31) * c2) & _M64
        h1 ^= k1
        h1 = (_rotl64(h1, 27) + h2) & _M64
        h1 = (h1 * 5 + 0x52DCE729) & _M64
        k2 = (_rotl64((k2 * c2) & _M64, 33) * c1) & _M64
        h2 ^= k2
        h2 = (_rotl64(h2, 31) + h1) & _M64
        h2 = (h2 * 5 + 0x38495AB5) & _M64
    tail = key[16 * nblocks:]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl64((k2 * c2) & _M64, 33) * c1) & _M64
    if len(tail) > 0:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl64((k1 * c1) & _M64, 31) * c2) & _M64
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    return h1, h2


def starcache_hkey(key: bytes) -> int:
    """StarCache HKEY = mmh3.hash128(key, 0, signed=False) = h2 << 64 | h1."""
    h1, h2 = murmur3_128(key, 0)
    return (h2 << 64) | h1


def crc32(data: bytes) -> int:
    """CRC-32 (IEEE, reflected); NetLR slots and NetMC key placement."""
    return zlib.crc32(data) & 0xFFFFFFFF


def netlr_slot(oid: int, slots: int) -> int:
    """NetLR slot id: CRC32 of the oid's 4 big-endian bytes, masked to slots."""
    return crc32(oid.to_bytes(4, "big")) & ((slots - 1) & 0xFFFFFFFF)
