"""netkv.wire: the wire formats of every protocol, in Python.

  codec         decode/encode UDP payloads <-> Msg (mirror of the C nk_msg),
                WireError, op code enums, ports, and the shared key hashes
  scapy_layers  scapy Packet classes per protocol, bound to their UDP ports
                (import explicitly; it pulls in scapy)

The C codec (hostapps/src/wire.c) is the same format; tests/vectors/*.json pins
both (docs/wire.md).
"""

from netkv.wire.codec import (
    OPS,
    Kind,
    Msg,
    Proto,
    Result,
    WireError,
    WireErrorCode,
    crc32,
    decode,
    djb2,
    djb2_many,
    encode,
    kind_of,
    murmur3_128,
    netlr_slot,
    netmc_pack_pairs,
    netmc_pairs,
    op_name,
    starcache_hkey,
    strerror,
)

__all__ = [
    "OPS",
    "Kind",
    "Msg",
    "Proto",
    "Result",
    "WireError",
    "WireErrorCode",
    "crc32",
    "decode",
    "djb2",
    "djb2_many",
    "encode",
    "kind_of",
    "murmur3_128",
    "netlr_slot",
    "netmc_pack_pairs",
    "netmc_pairs",
    "op_name",
    "starcache_hkey",
    "strerror",
]
