"""Wire formats: the Python codec, the C codec (libnetkv.so via cffi) and the
golden vectors tests/vectors/<protocol>.json must all agree.

- every vector decodes to its JSON fields and re-encodes byte-identical, in
  Python and in C; "error" vectors fail with the named error in both;
- every truncation fails, with the same error code in C and Python;
- random messages (seeded) encode identically in C and Python, and decode back;
- random mutations of the vectors give the same result in C and Python;
- the key hashes agree (C, Python, zlib, mmh3 when installed, known values).
The C half is skipped when libnetkv.so is not built (NETKV_NATIVE_DIR).
"""

from __future__ import annotations

import json
import random
import re
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from netkv.wire import codec
from netkv.wire.codec import (
    KINDS,
    Msg,
    NetmcOp,
    PegasusOp,
    Proto,
    WireError,
    WireErrorCode,
    decode,
    encode,
)

ROOT = Path(__file__).resolve().parents[1]
VECTOR_DIR = ROOT / "tests" / "vectors"
PROTOS = [p.name.lower() for p in Proto]


def load_vectors() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in PROTOS:
        out += json.loads((VECTOR_DIR / f"{name}.json").read_text())
    return out


VECTORS = load_vectors()
VALID = [v for v in VECTORS if "fields" in v]
INVALID = [v for v in VECTORS if "error" in v]

# The nk_msg fields and the value a decoder gives a field the protocol does not carry.
DEFAULTS: dict[str, Any] = {
    "op": 0, "kind": 0, "flags": 0, "result": 0, "server_id": 0xFF, "client_id": 0,
    "load": 0, "epoch": 0, "req_id": 0, "keyhash": 0, "ver": 0, "bitmap": 0, "send_ns": 0,
    "frag_idx": 0, "frag_cnt": 1, "nkeys": 0, "oid": 0, "startidx": 0, "clo": 0,
    "keyidx": 0, "key_slot_len": 0, "key_slots": 0, "hkey": 0, "srv": [0] * 32,
    "key": b"", "value": b"", "items": b"",
}
SCALARS = [k for k, v in DEFAULTS.items() if isinstance(v, int) and k != "hkey"]


def expected(fields: dict[str, Any]) -> dict[str, Any]:
    """The JSON fields, completed with defaults, in Msg's representation."""
    want = dict(DEFAULTS)
    for name, value in fields.items():
        if name in ("key_len", "value_len", "items_len"):
            assert len(bytes.fromhex(fields[name[:-4]])) == value, name
            continue
        assert name in DEFAULTS, f"unknown field {name}"
        if name in ("key", "value", "items"):
            value = bytes.fromhex(value)
        elif name == "hkey":
            value = int(value, 16)
        want[name] = value
    return want


def as_fields(m: Msg) -> dict[str, Any]:
    return {name: (list(getattr(m, name)) if name == "srv" else getattr(m, name))
            for name in DEFAULTS}


def vid(v: dict[str, Any]) -> str:
    return v["name"]


# ---- golden vectors, Python ------------------------------------------------------


@pytest.mark.parametrize("vector", VALID, ids=vid)
def test_python_decodes_vector(vector: dict[str, Any]) -> None:
    data = bytes.fromhex(vector["hex"])
    m = decode(vector["proto"], data)
    assert as_fields(m) == expected(vector["fields"])
    assert encode(m) == data


@pytest.mark.parametrize("vector", INVALID, ids=vid)
def test_python_rejects_bad_vector(vector: dict[str, Any]) -> None:
    with pytest.raises(WireError) as e:
        decode(vector["proto"], bytes.fromhex(vector["hex"]))
    assert e.value.code.name == vector["error"]
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("vector", VALID, ids=vid)
def test_python_truncations_fail(vector: dict[str, Any]) -> None:
    data = bytes.fromhex(vector["hex"])
    for cut in range(len(data)):
        with pytest.raises(WireError):
            decode(vector["proto"], data[:cut])


@pytest.mark.parametrize("proto", PROTOS)
def test_every_op_has_a_vector(proto: str) -> None:
    seen = {v["fields"]["op"] for v in VALID if v["proto"] == proto}
    assert seen >= set(KINDS[Proto[proto.upper()]])


def test_vectors_cover_edge_cases() -> None:
    names = " ".join(v["name"] for v in VECTORS)
    for needle in ("max key", "zero-length value", "multi-packet fragment", "MGET 3 groups"):
        assert needle in names


# ---- layouts written out by hand from docs/wire.md (independent of the codec) -------


def test_pegasus_layout_by_hand() -> None:
    key, value = b"k1", b"vv"
    hdr = struct.pack(">HBBIHBBHQII", 0x5047, 1, 0x01, 0x1234, 7, 3, 0, 9, 42, 1 << 3, 99)
    pay = struct.pack(">QBBHI", 5, 0, 0, 2, 2) + key + value
    assert len(hdr) == 30
    m = decode("pegasus", hdr + pay)
    assert (m.op, m.flags, m.keyhash, m.client_id, m.server_id, m.load, m.ver, m.bitmap,
            m.req_id, m.send_ns, m.key, m.value) == (
        PegasusOp.WRITE, codec.PEGASUS_FLAG_BYPASS, 0x1234, 7, 3, 9, 42, 8, 99, 5, key, value)
    with pytest.raises(WireError) as e:
        decode("plain", hdr + pay)
    assert e.value.code is WireErrorCode.EMAGIC
    assert decode("plain", b"\x15\x73" + hdr[2:] + pay).op == PegasusOp.WRITE


def test_netmc_worked_example_by_hand() -> None:
    # netmc.md §3: keys A,D (server 1), B (2), C (3); KEYIDX 0x7000
    srv = bytes([1, 2, 3]) + bytes(29)
    hdr = struct.pack(">BIBBIBB", 4, 100, 0, 4, 0x7000, 0, 0) + srv
    assert len(hdr) == 13 + 32
    keys = b"A\0\0\0D\0\0\0B\0\0\0C\0\0\0"
    data = hdr + struct.pack(">BBBBQ", 4, 4, 0, 0, 1_700_000_000_123_456_789) + keys
    m = decode("netmc", data)
    assert (m.op, m.nkeys, m.keyidx, m.srv[:3], m.items) == (NetmcOp.MGET, 4, 0x7000,
                                                              [1, 2, 3], keys)
    assert any(v["hex"] == data.hex() for v in VALID)


def test_netlr_layout_by_hand() -> None:
    value = bytes(range(16))
    data = struct.pack(">BIIIIHB", 2, 7, 8, 0x01E240, 9, 3, 2) + value
    assert len(data) == 36
    m = decode("netlr", data)
    assert (m.keyhash, m.ver, m.key, m.req_id, m.epoch, m.flags, m.value) == (
        7, 8, b"\x00\x01\xe2\x40", 9, 3, 2, value)


# ---- hashes ----------------------------------------------------------------------------


def test_hash_known_values() -> None:
    assert codec.djb2(b"hello") == 261238937
    assert codec.djb2(b"") == 5381
    assert codec.crc32(b"123456789") == 0xCBF43926
    assert codec.murmur3_128(b"hello") == (0xCBD8A7B341BD9B02, 0x5B1E906A48AE1D19)
    assert codec.murmur3_128(b"") == (0, 0)
    assert codec.starcache_hkey(b"hello") == 0x5B1E906A48AE1D19CBD8A7B341BD9B02


def test_hashes_match_references() -> None:
    rng = random.Random(7)
    keys = [rng.randbytes(rng.randrange(0, 80)) for _ in range(300)]
    for k in keys:
        assert codec.crc32(k) == zlib.crc32(k)
    mmh3 = pytest.importorskip("mmh3")
    for k in keys:
        for seed in (0, 1, 0xDEADBEEF):
            h1, h2 = codec.murmur3_128(k, seed)
            assert (h2 << 64) | h1 == mmh3.hash128(k, seed, signed=False)
        assert codec.starcache_hkey(k) == mmh3.hash128(k, 0, signed=False)


def test_djb2_many_matches_djb2() -> None:
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 256, size=(200, 64), dtype=np.uint8)
    got = codec.djb2_many(keys)
    assert got.dtype == np.uint32
    assert [int(x) for x in got] == [codec.djb2(bytes(row)) for row in keys]


# ---- random messages ---------------------------------------------------------------------


def random_msg(rng: random.Random, proto: Proto, op: int) -> Msg:
    """A valid message using exactly the fields the protocol carries."""
    P = Proto
    r8, r16, r32 = (lambda: rng.randrange(256)), (lambda: rng.randrange(1 << 16)), (
        lambda: rng.randrange(1 << 32))
    r64 = lambda: rng.randrange(1 << 64)  # noqa: E731
    m = Msg(proto=proto, op=op)
    if proto in (P.PLAIN, P.PEGASUS):
        m.flags, m.keyhash, m.client_id, m.server_id = r8(), r32() >> 1, r16(), r8()
        m.load, m.ver, m.bitmap, m.req_id = r16(), r64(), r32(), r32()
        m.send_ns, m.result = r64(), rng.randrange(3)
        m.key = rng.randbytes(rng.randrange(65))
        m.value = rng.randbytes(rng.choice([0, 1, 15, 128, 1000]))
    elif proto is P.NETCACHE:
        m.result, m.flags, m.req_id, m.client_id, m.server_id = r8(), r8(), r32(), r16(), r8()
        m.load, m.send_ns = r16(), r64()
        m.key = rng.randbytes(rng.randrange(17)).rstrip(b"\0")
        m.value = rng.randbytes(rng.randrange(129))
    elif proto is P.KVSWITCH:
        m.result, m.req_id, m.ver = r8(), r32(), r32()
        m.key, m.value = rng.randbytes(16), rng.randbytes(rng.randrange(300))
    elif proto is P.STARCACHE:
        m.req_id, m.hkey, m.flags, m.send_ns, m.server_id = r32(), r64() << 64 | r64(), r8(), \
            r32(), r8()
        m.frag_cnt = r8()
        m.frag_idx = rng.randrange(max(m.frag_cnt, 1))
        m.key = rng.randbytes(rng.randrange(65))
        m.value = rng.randbytes(rng.randrange(1500))
    elif proto is P.NETLR:
        m.keyhash, m.ver, m.req_id, m.epoch, m.flags = r32(), r32(), r32(), r16(), r8()
        m.key = rng.randbytes(4)
        m.value = rng.randbytes(16) if op in (codec.NetlrOp.WRITE, codec.NetlrOp.R_REPLY,
                                              codec.NetlrOp.INV) else b""
    else:
        m.req_id, m.oid, m.clo, m.result, m.send_ns = r32(), r8(), r8(), r8(), r64()
        m.keyidx, m.srv = r32(), [r8() for _ in range(32)]
        m.key_slot_len = rng.randrange(1, 65)
        m.nkeys, m.startidx = r8(), r8()
        if op in (NetmcOp.MGET, NetmcOp.MGET_REPLY):
            m.key_slots = rng.randrange(1, 33)
            if op == NetmcOp.MGET:
                m.nkeys = rng.randrange(m.key_slots + 1)
                m.startidx = rng.randrange(m.key_slots - m.nkeys + 1)
                m.items = rng.randbytes(m.key_slots * m.key_slot_len)
            else:
                m.nkeys = m.key_slots
                m.items = codec.netmc_pack_pairs(
                    [(rng.randbytes(m.key_slot_len), rng.randbytes(rng.randrange(40)))
                     for _ in range(m.key_slots)])
        else:
            m.key_slots = 1
            m.key = rng.randbytes(m.key_slot_len)
            if op in (NetmcOp.PUT, NetmcOp.GET_REPLY):
                m.value = rng.randbytes(rng.randrange(300))
    return m


def random_msgs(n_per_op: int, seed: int) -> list[Msg]:
    rng = random.Random(seed)
    return [random_msg(rng, proto, op) for proto in Proto for op in sorted(KINDS[proto])
            for _ in range(n_per_op)]


def test_python_random_roundtrip() -> None:
    for m in random_msgs(30, seed=1):
        data = encode(m)
        back = decode(m.proto, data)
        assert as_fields(back) == as_fields(m), (m.proto, m.op)
        assert encode(back) == data


def test_python_encode_rejects_bad_messages() -> None:
    with pytest.raises(WireError) as e:
        encode(Msg(proto=Proto.KVSWITCH, op=codec.KvswitchOp.GET, key=b"short"))
    assert e.value.code is WireErrorCode.EKEYLEN
    with pytest.raises(WireError) as e:
        encode(Msg(proto=Proto.PEGASUS, op=9))
    assert e.value.code is WireErrorCode.EOP
    with pytest.raises(WireError) as e:
        encode(Msg(proto=Proto.PEGASUS, op=0, client_id=1 << 16))
    assert e.value.code is WireErrorCode.EFIELD
    with pytest.raises(WireError) as e:
        decode("nosuch", b"")
    assert e.value.code is WireErrorCode.EPROTO


# ---- the C library through cffi -------------------------------------------------------------


def _msg_cdef() -> str:
    """struct nk_msg as cffi source, read from msg.h so it cannot go stale."""
    inc = ROOT / "hostapps" / "include" / "netkv"
    text = (inc / "msg.h").read_text()
    consts = dict(re.findall(r"#define\s+(NK_\w+)\s+(\w+)", text + (inc / "constants.h").read_text()))
    body = re.search(r"struct nk_msg \{(.*?)\n\};", text, re.S)
    assert body, "struct nk_msg not found in msg.h"
    src = re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S)
    src = re.sub(r"\b(NK_\w+)\b", lambda mo: consts.get(mo.group(1), mo.group(1)), src)
    return "struct nk_msg {" + src + "\n};"


CDEF = _msg_cdef() + """
int nk_wire_decode(int proto, const uint8_t *buf, size_t len, struct nk_msg *out);
int nk_wire_encode(const struct nk_msg *m, uint8_t *buf, size_t cap);
int nk_wire_encoded_len(const struct nk_msg *m);
size_t nk_wire_msg_size(void);
const char *nk_wire_strerror(int err);
uint32_t nk_djb2(const uint8_t *key, size_t len);
void nk_murmur3_128(const void *key, size_t len, uint32_t seed, uint64_t out[2]);
void nk_starcache_hkey(const uint8_t *key, size_t len, uint64_t hkey[2]);
uint32_t nk_crc32(const uint8_t *buf, size_t len);
uint32_t nk_netlr_slot(uint32_t oid, uint32_t slots);
"""


@pytest.fixture(scope="module")
def clib() -> Any:
    cffi = pytest.importorskip("cffi")
    from netkv import native

    try:
        path = native.library_path()
    except native.NativeBuildMissing as e:
        pytest.skip(str(e))
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    lib = ffi.dlopen(str(path))
    assert lib.nk_wire_msg_size() == ffi.sizeof("struct nk_msg"), "msg.h layout drift"
    return ffi, lib


def c_decode(clib: Any, proto: Proto | str, data: bytes) -> Msg | int:
    """Decode with C; returns a Msg, or the negative error code."""
    ffi, lib = clib
    p = Proto[proto.upper()] if isinstance(proto, str) else proto
    buf = ffi.new("uint8_t[]", max(len(data), 1))
    ffi.memmove(buf, data, len(data))
    out = ffi.new("struct nk_msg *")
    rc = lib.nk_wire_decode(int(p), buf if data else ffi.NULL, len(data), out)
    if rc:
        return rc
    m = Msg(proto=Proto(out.proto), op=out.op, kind=out.kind)
    for name in SCALARS:
        setattr(m, name, getattr(out, name))
    m.hkey = (out.hkey[0] << 64) | out.hkey[1]
    m.srv = list(out.srv)
    m.key = bytes(out.key[0:out.key_len])
    m.value = ffi.buffer(out.value, out.value_len)[:] if out.value_len else b""
    m.items = ffi.buffer(out.items, out.items_len)[:] if out.items_len else b""
    assert (out.value == ffi.NULL) == (out.value_len == 0)
    return m


def c_encode(clib: Any, m: Msg) -> bytes | int:
    ffi, lib = clib
    c = ffi.new("struct nk_msg *")
    for name in SCALARS:
        setattr(c, name, getattr(m, name))
    c.proto = int(m.proto)
    c.hkey[0], c.hkey[1] = m.hkey >> 64, m.hkey & (2**64 - 1)
    c.srv = list(m.srv)
    c.key_len = len(m.key)  # may exceed NK_MAX_KEY_LEN: the encoder must refuse it
    n_key = min(len(m.key), ffi.sizeof(c.key))
    c.key[0:n_key] = m.key[:n_key]
    keep = [ffi.from_buffer(m.value), ffi.from_buffer(m.items)]
    c.value_len, c.value = len(m.value), keep[0] if m.value else ffi.NULL
    c.items_len, c.items = len(m.items), keep[1] if m.items else ffi.NULL
    cap = lib.nk_wire_encoded_len(c)
    if cap < 0:
        return cap
    buf = ffi.new("uint8_t[]", max(cap, 1))
    n = lib.nk_wire_encode(c, buf, cap)
    return n if n < 0 else ffi.buffer(buf, n)[:]


def py_result(proto: Proto | str, data: bytes) -> Msg | int:
    try:
        return decode(proto, data)
    except WireError as e:
        return int(e.code)


@pytest.mark.parametrize("vector", VALID, ids=vid)
def test_c_decodes_vector(clib: Any, vector: dict[str, Any]) -> None:
    data = bytes.fromhex(vector["hex"])
    m = c_decode(clib, vector["proto"], data)
    assert isinstance(m, Msg), codec.strerror(m)
    assert as_fields(m) == expected(vector["fields"])
    assert c_encode(clib, m) == data


@pytest.mark.parametrize("vector", INVALID, ids=vid)
def test_c_rejects_bad_vector(clib: Any, vector: dict[str, Any]) -> None:
    rc = c_decode(clib, vector["proto"], bytes.fromhex(vector["hex"]))
    assert rc == WireErrorCode[vector["error"]]


def test_truncations_agree(clib: Any) -> None:
    for v in VALID:
        data = bytes.fromhex(v["hex"])
        for cut in range(len(data)):
            c = c_decode(clib, v["proto"], data[:cut])
            assert isinstance(c, int) and c < 0, (v["name"], cut)
            assert c == py_result(v["proto"], data[:cut]), (v["name"], cut)


def test_random_messages_agree(clib: Any) -> None:
    for m in random_msgs(20, seed=2):
        data = encode(m)
        assert c_encode(clib, m) == data, (m.proto, m.op)
        back = c_decode(clib, m.proto, data)
        assert isinstance(back, Msg)
        assert as_fields(back) == as_fields(m)


def test_random_mutations_agree(clib: Any) -> None:
    rng = random.Random(5)
    for v in VALID:
        data = bytes.fromhex(v["hex"])
        for _ in range(60):
            mut = bytearray(data)
            for _ in range(rng.randrange(1, 4)):
                mut[rng.randrange(len(mut))] = rng.randrange(256)
            if rng.random() < 0.3:
                mut = mut[:rng.randrange(len(mut) + 1)] + rng.randbytes(rng.randrange(3))
            c, p = c_decode(clib, v["proto"], bytes(mut)), py_result(v["proto"], bytes(mut))
            if isinstance(p, Msg):
                assert isinstance(c, Msg) and as_fields(c) == as_fields(p), v["name"]
                assert encode(p) == bytes(mut)
            else:
                assert c == p, (v["name"], mut.hex())


def test_c_encode_errors_agree(clib: Any) -> None:
    bad = [
        Msg(proto=Proto.KVSWITCH, op=codec.KvswitchOp.GET, key=b"short"),
        Msg(proto=Proto.KVSWITCH, op=codec.KvswitchOp.GET, key=bytes(16), ver=1 << 32),
        Msg(proto=Proto.NETLR, op=codec.NetlrOp.WRITE, key=bytes(4), value=bytes(15)),
        Msg(proto=Proto.NETLR, op=codec.NetlrOp.READ, key=bytes(4), value=bytes(16)),
        Msg(proto=Proto.NETCACHE, op=codec.NetcacheOp.CACHE_UPDATE, value=bytes(129)),
        Msg(proto=Proto.NETCACHE, op=codec.NetcacheOp.READ, key=bytes(17)),
        Msg(proto=Proto.STARCACHE, op=codec.StarcacheOp.F_REP, frag_cnt=2, frag_idx=2),
        Msg(proto=Proto.NETMC, op=NetmcOp.GET, key_slot_len=4, key=bytes(3)),
        Msg(proto=Proto.NETMC, op=NetmcOp.MGET, key_slot_len=4, key_slots=2, nkeys=2,
            items=bytes(7)),
        Msg(proto=Proto.NETMC, op=NetmcOp.MGET_REPLY, key_slot_len=4, key_slots=1, nkeys=1,
            items=bytes(4) + b"\x00\x05abc"),
        Msg(proto=Proto.NETMC, op=NetmcOp.MGET, key_slot_len=4, key_slots=33, nkeys=33,
            items=bytes(132)),
        Msg(proto=Proto.PEGASUS, op=PegasusOp.READ, key=bytes(65)),
    ]
    for m in bad:
        with pytest.raises(WireError) as e:
            encode(m)
        assert c_encode(clib, m) == int(e.value.code), (m.proto, m.op, e.value)


def test_c_hashes_agree(clib: Any) -> None:
    ffi, lib = clib
    rng = random.Random(11)
    for _ in range(300):
        k = rng.randbytes(rng.randrange(0, 100))
        seed = rng.choice([0, 1, rng.randrange(1 << 32)])
        assert lib.nk_djb2(k, len(k)) == codec.djb2(k)
        assert lib.nk_crc32(k, len(k)) == zlib.crc32(k)
        out = ffi.new("uint64_t[2]")
        lib.nk_murmur3_128(k, len(k), seed, out)
        assert (out[0], out[1]) == codec.murmur3_128(k, seed)
        lib.nk_starcache_hkey(k, len(k), out)
        assert (out[0] << 64) | out[1] == codec.starcache_hkey(k)
        oid = rng.randrange(1 << 32)
        assert lib.nk_netlr_slot(oid, 131072) == codec.netlr_slot(oid, 131072)


def test_c_strerror_matches_python(clib: Any) -> None:
    ffi, lib = clib
    for code in WireErrorCode:
        assert ffi.string(lib.nk_wire_strerror(int(code))).decode() == codec.strerror(code)


# ---- scapy layers -------------------------------------------------------------------------------


def test_scapy_layers_dissect_vectors() -> None:
    pytest.importorskip("scapy")
    from scapy.layers.inet import IP, UDP

    from netkv.wire import scapy_layers as sl

    ports = {"plain": sl.PEGASUS_PORT, "pegasus": sl.PEGASUS_PORT,
             "netcache": sl.NETCACHE_PORT, "kvswitch": sl.KVSWITCH_PORT,
             "starcache": sl.STARCACHE_PORT, "netlr": sl.NETLR_PORT,
             "netmc": sl.NETMC_PORT_BASE + 3}
    for v in VALID:
        data = bytes.fromhex(v["hex"])
        pkt = IP(bytes(IP() / UDP(sport=40000, dport=ports[v["proto"]]) / data))
        layer = sl.LAYERS[v["proto"]]
        assert layer in pkt, v["name"]
        hdr = pkt[layer]
        assert hdr.op == v["fields"]["op"], v["name"]
        assert bytes(hdr) == data, v["name"]  # header + payload rebuild identically
        # a reply, matched on the source port
        rep = IP(bytes(IP() / UDP(sport=ports[v["proto"]], dport=40000) / data))
        assert layer in rep, v["name"]


def _generator():  # noqa: ANN202 - the script module, loaded by path
    import importlib.util
    spec = importlib.util.spec_from_file_location("vector_generate", VECTOR_DIR / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stale_vector_files(rendered: dict[str, str], folder: Path) -> list[str]:
    """The files in ``folder`` that differ from what the generator renders."""
    return [name for name, text in sorted(rendered.items())
            if not (folder / f"{name}.json").exists()
            or (folder / f"{name}.json").read_text() != text]


def test_generator_reproduces_the_committed_vectors() -> None:
    """tests/vectors/generate.py is how the vectors change: a file edited by
    hand drifts from it (netlr.json and netmc.json did) and the next
    regeneration silently drops the edit."""
    rendered = _generator().render()
    assert sorted(rendered) == sorted(PROTOS)
    assert stale_vector_files(rendered, VECTOR_DIR) == []


def test_generator_check_fails_on_a_hand_edited_file(tmp_path: Path) -> None:
    rendered = _generator().render()
    for name in rendered:
        (tmp_path / f"{name}.json").write_text((VECTOR_DIR / f"{name}.json").read_text())
    edited = json.loads(rendered["netmc"])
    edited[0]["name"] += " (edited)"
    (tmp_path / "netmc.json").write_text("[\n" + ",\n".join(json.dumps(v) for v in edited) + "\n]\n")
    (tmp_path / "netlr.json").unlink()
    assert stale_vector_files(rendered, tmp_path) == ["netlr", "netmc"]
