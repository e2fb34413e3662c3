"""Machine-readable layout of every netkv wire format (docs/wire.md is the prose).

One ``Format`` per protocol: its UDP ports, magic, op table and fields in wire
order. The Wireshark dissectors (``netkv.wire.wireshark``) are generated from
it, and ``parse`` reads a payload by it alone; tests/test_wire_layout.py checks
``parse`` against the codec of record (``netkv.wire.codec``) on every golden
vector, so the layout, the codec and the dissectors cannot drift apart. Op
codes, ports, magics and flag bits are not repeated here: they come from the
shared constants (``netkv.constants``, generated from spec/constants.toml).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from netkv import constants as k
from netkv.constants import Proto
from netkv.wire import codec

INT_WIDTH = {"u8": 1, "u16": 2, "u32": 4, "u64": 8}
REST = "rest"


@dataclass(frozen=True)
class Field:
    """One wire field. ``type`` is u8/u16/u32/u64 (big-endian) or bytes, whose
    ``length`` is a byte count, the name of an earlier field, a product of
    such names ("a*b"), or REST; ``pad``
    rounds that length up to a multiple (zero padding). ``msg`` names the
    ``Msg`` attribute the field decodes to (None: none), for ``msg_ops`` only
    when given (elsewhere the field must be zero). ``ops`` limits the field to
    those ops; ``zero`` marks reserved bytes; ``max`` an inclusive bound;
    ``msg_prefix`` a bytes field whose meaningful part is that many bytes
    (the rest zero padding)."""

    name: str
    type: str
    length: int | str = 0
    msg: str | None = None
    base: str = "dec"
    pad: int = 1
    zero: bool = False
    max: int | None = None
    ops: tuple[str, ...] | None = None
    msg_ops: tuple[str, ...] | None = None
    msg_prefix: str | None = None
    names: dict[int, str] = field(default_factory=dict)
    bits: dict[int, str] = field(default_factory=dict)
    label: str = ""

    @property
    def width(self) -> int:
        return INT_WIDTH.get(self.type, 0)


@dataclass(frozen=True)
class Format:
    proto: Proto
    title: str
    ports: tuple[int, ...]
    ops: type[IntEnum]
    fields: tuple[Field, ...]
    magic: int | None = None  # value of the field named "magic"

    @property
    def name(self) -> str:
        return self.proto.name.lower()

    def op_names(self) -> dict[int, str]:
        return {int(o): o.name for o in self.ops}


def _f(name: str, type_: str, msg: str | None = "", **kw: object) -> Field:
    """A field whose Msg attribute has the same name unless msg says otherwise."""
    return Field(name=name, type=type_, msg=name if msg == "" else msg, **kw)  # type: ignore[arg-type]


_RESULTS = {k.RESULT_OK: "OK", k.RESULT_NOT_FOUND: "NOT_FOUND", k.RESULT_RETRY: "RETRY"}
_NETMC_PORTS = tuple(
    base + w for base in (k.NETMC_PORT_BASE, k.NETMC_BASELINE_PORT_BASE)
    for w in range(16)
)


def _pegasus(proto: Proto, magic: int, title: str) -> Format:
    return Format(proto, title, (k.PEGASUS_PORT,), k.PegasusOp, (
        _f("magic", "u16", None, base="hex"),
        _f("op", "u8"),
        _f("flags", "u8", base="hex", bits={k.PEGASUS_FLAG_BYPASS: "BYPASS",
                                            k.PEGASUS_FLAG_MULTI: "MULTI"}),
        _f("keyhash", "u32", base="hex"),
        _f("client_id", "u16"),
        _f("server_id", "u8"),
        _f("rsvd", "u8", None, zero=True),
        _f("load", "u16"),
        _f("ver", "u64"),
        _f("bitmap", "u32", base="hex"),
        _f("req_id", "u32"),
        _f("send_ns", "u64"),
        _f("result", "u8", names=_RESULTS),
        _f("rsvd2", "u8", None, zero=True),
        _f("key_len", "u16", max=codec.MAX_KEY_LEN),
        _f("value_len", "u32"),
        _f("key", "bytes", length="key_len"),
        _f("value", "bytes", length="value_len"),
    ), magic=magic)


FORMATS: dict[Proto, Format] = {
    Proto.PLAIN: _pegasus(Proto.PLAIN, k.PLAIN_MAGIC, "Plain"),
    Proto.PEGASUS: _pegasus(Proto.PEGASUS, k.PEGASUS_MAGIC, "Pegasus"),
    Proto.NETCACHE: Format(Proto.NETCACHE, "NetCache", (k.NETCACHE_PORT,), k.NetcacheOp, (
        _f("op", "u8"),
        _f("result", "u8", names=_RESULTS),
        _f("flags", "u8", base="hex", bits={k.NETCACHE_FLAG_CACHED: "CACHED",
                                            k.NETCACHE_FLAG_REFRESH: "REFRESH"}),
        _f("key_len", "u8", max=codec.NETCACHE_KEY_LEN),
        _f("seq", "u32", "req_id"),
        _f("client_id", "u16"),
        _f("server_id", "u8"),
        _f("rsvd", "u8", None, zero=True),
        _f("vlen", "u16", "value_len"),
        _f("load", "u16"),
        _f("send_ns", "u64"),
        _f("key", "bytes", length=codec.NETCACHE_KEY_LEN, msg_prefix="key_len"),
        _f("value", "bytes", length="vlen", pad=codec.NETCACHE_VALUE_CHUNK),
    )),
    Proto.KVSWITCH: Format(Proto.KVSWITCH, "KVSwitch", (k.KVSWITCH_PORT,), k.KvswitchOp, (
        _f("op", "u8", base="hex", label="OP"),
        _f("flags", "u8", "result", names={k.RESULT_OK: "OK", k.RESULT_NOT_FOUND: "NOT_FOUND",
                                      k.KVSWITCH_RESULT_ERROR: "ERROR"}, label="FLAGS"),
        _f("vlen", "u16", "value_len", label="VLEN"),
        _f("seq", "u32", "req_id", label="SEQ"),
        _f("ver", "u32", label="VER"),
        _f("key", "bytes", length=codec.KVSWITCH_KEY_LEN, label="KEY"),
        _f("value", "bytes", length="vlen", label="VALUE"),
    )),
    Proto.STARCACHE: Format(Proto.STARCACHE, "StarCache", (k.STARCACHE_PORT,),
                            k.StarcacheOp, (
        _f("op", "u8", label="OP"),
        _f("seq", "u32", "req_id", label="SEQ"),
        _f("hkey", "bytes", length=16, label="HKEY"),
        _f("flag", "u8", "frag_cnt", label="FLAG"),
        _f("cached", "u8", "flags", label="CACHED"),
        _f("lat", "u32", "send_ns", label="LAT"),
        _f("parid", "u8", "server_id", label="PARID"),
        _f("klen", "u16", "key_len", max=codec.MAX_KEY_LEN, label="KLEN"),
        _f("vlen", "u16", "value_len", label="VLEN"),
        _f("frag", "u8", "frag_idx", label="FRAG"),
        _f("result", "u8", names=_RESULTS, max=k.RESULT_RETRY, label="RESULT"),
        _f("key", "bytes", length="klen"),
        _f("value", "bytes", length="vlen"),
    )),
    Proto.NETLR: Format(Proto.NETLR, "NetLR", (k.NETLR_PORT,), k.NetlrOp, (
        _f("op", "u8"),
        _f("id", "u32", "keyhash", base="hex"),
        _f("seq", "u32", "ver"),
        _f("oid", "u32", "key"),
        _f("req_id", "u32"),
        _f("epoch", "u16"),
        _f("flags", "u8", base="hex", bits={k.NETLR_FLAG_SUPERSEDED: "SUPERSEDED",
                                            k.NETLR_FLAG_STAMPED: "STAMPED"}),
        _f("value", "bytes", length=codec.NETLR_VALUE_LEN, msg_ops=("WRITE", "R_REPLY", "INV")),
    )),
    Proto.NETMC: Format(Proto.NETMC, "NetMC", _NETMC_PORTS, k.NetmcOp, (
        _f("op", "u8", label="OP"),
        _f("id", "u32", "req_id", label="ID"),
        _f("oid", "u8", label="OID"),
        _f("numkey", "u8", "nkeys", label="NUMKEY"),
        _f("keyidx", "u32", base="hex", label="KEYIDX"),
        _f("startidx", "u8", label="STARTIDX"),
        _f("clo", "u8", label="CLO"),
        _f("srv", "bytes", length=codec.NETMC_N, label="SRV"),
        _f("keylen", "u8", "key_slot_len", max=codec.MAX_KEY_LEN, label="KEYLEN"),
        _f("nslots", "u8", "key_slots", max=codec.NETMC_MAX_KEYS, label="NSLOTS"),
        _f("result", "u8", names=_RESULTS),
        _f("rsvd", "u8", None, zero=True),
        _f("send_ns", "u64"),
        _f("key", "bytes", length="keylen", ops=("GET", "GET_REPLY", "PUT", "PUT_REPLY")),
        _f("vlen", "u16", "value_len", ops=("GET_REPLY", "PUT")),
        _f("value", "bytes", length="vlen", ops=("GET_REPLY", "PUT")),
        _f("items", "bytes", length="nslots*keylen", ops=("MGET",)),
        _f("items", "bytes", length=REST, ops=("MGET_REPLY",)),
    )),
}


@dataclass
class Parsed:
    """What ``parse`` read: field name -> (offset, length, value), the op
    name, and the problems found (empty for a well-formed payload)."""

    fields: dict[str, tuple[int, int, int | bytes]]
    op: str | None
    problems: list[str]

    def value(self, name: str) -> int | bytes:
        return self.fields[name][2]


def parse(proto: Proto | int | str, data: bytes) -> Parsed:
    """Read a payload by the layout alone (the algorithm the generated Lua
    dissector runs). Never raises on bad bytes: problems are listed."""
    fmt = FORMATS[codec._proto(proto)]
    out: dict[str, tuple[int, int, int | bytes]] = {}
    problems: list[str] = []
    op: str | None = None
    off = 0
    for f in fmt.fields:
        if f.ops is not None and op not in f.ops:
            continue
        if f.width:
            n = f.width
        elif f.length == REST:
            n = len(data) - off
        elif isinstance(f.length, str):
            n = 1
            for ref in f.length.split("*"):
                n *= int(out[ref][2]) if ref in out else 0
        else:
            n = f.length
        n = -(-n // f.pad) * f.pad
        if off + n > len(data):
            problems.append(f"truncated in {f.name}")
            break
        raw = data[off:off + n]
        val: int | bytes = int.from_bytes(raw, "big") if f.width else bytes(raw)
        out[f.name] = (off, n, val)
        off += n
        if f.name == "magic" and val != fmt.magic:
            problems.append(f"magic 0x{int(val):04x}")
        if f.name == "op":
            op = fmt.op_names().get(int(val))
            if op is None:
                problems.append(f"unknown op {val}")
        if f.zero and any(raw):
            problems.append(f"{f.name} not zero")
        if f.max is not None and int(val) > f.max:
            problems.append(f"{f.name} {val} > {f.max}")
    else:
        if off < len(data):
            problems.append(f"{len(data) - off} trailing bytes")
    return Parsed(out, op, problems)


def msg_values(fmt: Format, parsed: Parsed) -> dict[str, int | bytes]:
    """The Msg attributes a parsed payload carries, by the layout's mapping."""
    got: dict[str, int | bytes] = {}
    for f in fmt.fields:
        if f.msg is None or f.name not in parsed.fields:
            continue
        if f.msg_ops is not None and parsed.op not in f.msg_ops:
            continue
        val = parsed.value(f.name)
        if f.msg_prefix is not None:
            val = bytes(val)[:int(parsed.value(f.msg_prefix))]  # type: ignore[index]
        elif f.msg == "value" and f.pad > 1:
            val = bytes(val)[:int(parsed.value(_length_field(fmt, f)))]  # type: ignore[index]
        got[f.msg] = val
    return got


def _length_field(fmt: Format, f: Field) -> str:
    assert isinstance(f.length, str)
    return f.length


def msg_attr(msg: codec.Msg, name: str, like: int | bytes) -> int | bytes:
    """A Msg attribute in the layout's representation (bytes or int)."""
    val = getattr(msg, name)
    if isinstance(like, bytes):
        if isinstance(val, list):
            return bytes(val)
        if isinstance(val, int):
            return val.to_bytes(len(like), "big")
    elif isinstance(val, bytes):
        return int.from_bytes(val, "big")
    return val  # type: ignore[no-any-return]


def decode_prefix(proto: Proto | int | str, data: bytes) -> codec.Msg | None:
    """The message a payload cut short (a capture's snap length) still shows:
    every field before the cut, by the layout; None without an op code. The
    codec of record refuses such payloads, rightly: use this only to read
    captures."""
    p = codec._proto(proto)
    fmt = FORMATS[p]
    parsed = parse(p, data)
    if parsed.op is None or any(not x.startswith("truncated") for x in parsed.problems):
        return None
    vals = msg_values(fmt, parsed)
    kw: dict[str, object] = {}
    for name, val in vals.items():
        if name in ("key_len", "value_len", "items_len", "op"):
            continue
        if name == "hkey":
            kw[name] = int.from_bytes(bytes(val), "big")  # type: ignore[arg-type]
        elif name == "srv":
            kw[name] = list(bytes(val))  # type: ignore[arg-type]
        elif name == "key" and isinstance(val, int):
            kw[name] = val.to_bytes(4, "big")
        else:
            kw[name] = val
    return codec.Msg(proto=p, op=int(parsed.value("op")), **kw)  # type: ignore[arg-type]
