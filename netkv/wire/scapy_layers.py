"""scapy layers for every netkv wire format, for debugging captures and for
building test packets by hand. Importing this module binds them to their UDP
ports (requests on the dst port, replies on the src port):

  PegasusHdr / PlainHdr + PegasusPayload   UDP 5047 (told apart by magic)
  NetcacheHdr                              UDP 5050
  KvswitchHdr                              UDP 8888
  StarcacheHdr + StarcachePayload          UDP 5008
  NetlrHdr                                 UDP 1234
  NetmcHdr + NetmcPayload                  UDP 1000-1015 (and baselines 2000-2015)

Field names are the wire names of docs/wire.md. These classes are for people;
the codec of record is netkv.wire.codec (and hostapps/src/wire.c).
"""

from __future__ import annotations

from typing import Any

from scapy.fields import (
    ByteEnumField,
    ByteField,
    FieldLenField,
    FieldListField,
    FlagsField,
    IntField,
    LongField,
    ShortField,
    StrField,
    StrFixedLenField,
    StrLenField,
    XIntField,
    XLongField,
    XShortField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

from netkv.wire import codec
from netkv.wire.codec import (
    KVSWITCH_PORT,
    NETCACHE_PORT,
    NETLR_PORT,
    NETMC_BASELINE_PORT_BASE,
    NETMC_N,
    NETMC_PORT_BASE,
    PEGASUS_PORT,
    PLAIN_MAGIC,
    STARCACHE_PORT,
)

__all__ = [
    "KVSWITCH_PORT", "LAYERS", "NETCACHE_PORT", "NETLR_PORT", "NETMC_PORT_BASE",
    "PEGASUS_PORT", "STARCACHE_PORT", "KvswitchHdr", "NetcacheHdr", "NetlrHdr", "NetmcHdr",
    "NetmcPayload", "PegasusHdr", "PegasusPayload", "PlainHdr", "StarcacheHdr",
    "StarcachePayload",
]


def _names(ops: Any) -> dict[int, str]:
    return {int(op): op.name for op in ops}


_RESULTS = {0: "OK", 1: "NOT_FOUND", 2: "RETRY"}


# ---- Pegasus / plain -----------------------------------------------------------

def _pegasus_fields(magic: int) -> list[Any]:
    return [
        XShortField("magic", magic),
        ByteEnumField("op", 0, _names(codec.PegasusOp)),
        FlagsField("flags", 0, 8, ["BYPASS", "MULTI"]),
        XIntField("keyhash", 0),
        ShortField("client_id", 0),
        ByteField("server_id", 0xFF),
        ByteField("rsvd", 0),
        ShortField("load", 0),
        LongField("ver", 0),
        XIntField("bitmap", 0),
        IntField("req_id", 0),
    ]


class PegasusHdr(Packet):
    """Pegasus header (30 B, magic 0x5047)."""

    name = "Pegasus"
    fields_desc = _pegasus_fields(codec.PEGASUS_MAGIC)

    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kargs: Any) -> type:
        if _pkt and len(_pkt) >= 2 and int.from_bytes(_pkt[:2], "big") == PLAIN_MAGIC:
            return PlainHdr
        return cls


class PlainHdr(Packet):
    """Static consistent-hashing baseline: the Pegasus layout, magic 0x1573."""

    name = "Plain"
    fields_desc = _pegasus_fields(PLAIN_MAGIC)


class PegasusPayload(Packet):
    """Pegasus/plain payload: send_ns, result, lengths, key, value."""

    name = "PegasusPayload"
    fields_desc = [
        LongField("send_ns", 0),
        ByteEnumField("result", 0, _RESULTS),
        ByteField("rsvd", 0),
        FieldLenField("key_len", None, length_of="key", fmt="!H"),
        FieldLenField("value_len", None, length_of="value", fmt="!I"),
        StrLenField("key", b"", length_from=lambda p: p.key_len),
        StrLenField("value", b"", length_from=lambda p: p.value_len),
    ]


# ---- NetCache ------------------------------------------------------------------------


class NetcacheHdr(Packet):
    """NetCache baseline header (40 B) and its 16 B-padded value area."""

    name = "NetCache"
    fields_desc = [
        ByteEnumField("op", 0, _names(codec.NetcacheOp)),
        ByteEnumField("result", 0, _RESULTS),
        FlagsField("flags", 0, 8, ["CACHED"]),
        ByteField("key_len", 0),
        IntField("seq", 0),
        ShortField("client_id", 0),
        ByteField("server_id", 0xFF),
        ByteField("rsvd", 0),
        ShortField("vlen", 0),
        ShortField("load", 0),
        LongField("send_ns", 0),
        StrFixedLenField("key", b"", codec.NETCACHE_KEY_LEN),
        StrLenField("value", b"", length_from=lambda p: -(-p.vlen // 16) * 16),
    ]


# ---- KVSwitch ---------------------------------------------------------------------------


class KvswitchHdr(Packet):
    """KVSwitch header (28 B) and value."""

    name = "KVSwitch"
    fields_desc = [
        ByteEnumField("op", 0x01, _names(codec.KvswitchOp)),
        ByteEnumField("flags", 0, {0: "OK", 1: "NOT_FOUND", 2: "ERROR"}),
        FieldLenField("vlen", None, length_of="value", fmt="!H"),
        IntField("seq", 0),
        IntField("ver", 0),
        StrFixedLenField("key", b"", codec.KVSWITCH_KEY_LEN),
        StrLenField("value", b"", length_from=lambda p: p.vlen),
    ]


# ---- StarCache ----------------------------------------------------------------------------


class StarcacheHdr(Packet):
    """StarCache header: 22 B core + 6 B measurement extension."""

    name = "StarCache"
    fields_desc = [
        ByteEnumField("op", 1, _names(codec.StarcacheOp)),
        IntField("seq", 0),
        XLongField("hkey_hi", 0),
        XLongField("hkey_lo", 0),
        ByteField("flag", 0),
        ByteField("cached", 0),
        IntField("lat", 0),
        ByteField("parid", 0),
    ]


class StarcachePayload(Packet):
    """StarCache payload preamble, key and value (or value fragment)."""

    name = "StarCachePayload"
    fields_desc = [
        FieldLenField("klen", None, length_of="key", fmt="!H"),
        FieldLenField("vlen", None, length_of="value", fmt="!H"),
        ByteField("frag", 0),
        ByteField("rsvd", 0),
        StrLenField("key", b"", length_from=lambda p: p.klen),
        StrLenField("value", b"", length_from=lambda p: p.vlen),
    ]


# ---- NetLR --------------------------------------------------------------------------------


class NetlrHdr(Packet):
    """NetLR fixed 36 B message."""

    name = "NetLR"
    fields_desc = [
        ByteEnumField("op", 0, _names(codec.NetlrOp)),
        XIntField("id", 0),
        IntField("seq", 0),
        IntField("oid", 0),
        IntField("req_id", 0),
        ShortField("epoch", 0),
        FlagsField("flags", 0, 8, ["SUPERSEDED", "STAMPED"]),
        StrFixedLenField("value", b"", codec.NETLR_VALUE_LEN),
    ]


# ---- NetMC ----------------------------------------------------------------------------------


class NetmcHdr(Packet):
    """NetMC fixed part: 13 B + SRV[N] (N = 32)."""

    name = "NetMC"
    fields_desc = [
        ByteEnumField("op", 0, _names(codec.NetmcOp)),
        IntField("id", 0),
        ByteField("oid", 0),
        ByteField("numkey", 0),
        XIntField("keyidx", 0),
        ByteField("startidx", 0),
        ByteField("clo", 0),
        FieldListField("srv", [0] * NETMC_N, ByteField("", 0), count_from=lambda p: NETMC_N),
    ]


class NetmcPayload(Packet):
    """NetMC payload preamble and the key slots / key-value pairs (raw)."""

    name = "NetMCPayload"
    fields_desc = [
        ByteField("keylen", 4),
        ByteField("nslots", 1),
        ByteEnumField("result", 0, _RESULTS),
        ByteField("rsvd", 0),
        LongField("send_ns", 0),
        StrField("items", b""),
    ]


LAYERS: dict[str, type[Packet]] = {
    "plain": PlainHdr,
    "pegasus": PegasusHdr,
    "netcache": NetcacheHdr,
    "kvswitch": KvswitchHdr,
    "starcache": StarcacheHdr,
    "netlr": NetlrHdr,
    "netmc": NetmcHdr,
}


def _bind_port(layer: type[Packet], port: int) -> None:
    bind_layers(UDP, layer, dport=port)
    bind_layers(UDP, layer, sport=port)


_bind_port(PegasusHdr, PEGASUS_PORT)
_bind_port(NetcacheHdr, NETCACHE_PORT)
_bind_port(KvswitchHdr, KVSWITCH_PORT)
_bind_port(StarcacheHdr, STARCACHE_PORT)
_bind_port(NetlrHdr, NETLR_PORT)
for _worker in range(16):
    _bind_port(NetmcHdr, NETMC_PORT_BASE + _worker)
    _bind_port(NetmcHdr, NETMC_BASELINE_PORT_BASE + _worker)
bind_layers(PegasusHdr, PegasusPayload)
bind_layers(PlainHdr, PegasusPayload)
bind_layers(StarcacheHdr, StarcachePayload)
bind_layers(NetmcHdr, NetmcPayload)
