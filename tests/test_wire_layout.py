"""The machine-readable wire layout (netkv.wire.layout) against the codec of
record on every golden vector: the layout the Wireshark dissectors are
generated from reads the same field values the codec decodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from netkv.wire import codec, layout
from netkv.wire.codec import Proto

VECTORS = Path(__file__).parent / "vectors"


def vectors() -> list[dict]:
    out: list[dict] = []
    for p in Proto:
        out += json.loads((VECTORS / f"{p.name.lower()}.json").read_text())
    return out


GOOD = [v for v in vectors() if "fields" in v]
BAD = [v for v in vectors() if "error" in v]


def layout_vs_codec(proto: str, data: bytes) -> dict[str, tuple[object, object]]:
    """Fields where the layout's reading differs from the codec's decode."""
    fmt = layout.FORMATS[codec._proto(proto)]
    parsed = layout.parse(proto, data)
    assert not parsed.problems, parsed.problems
    msg = codec.decode(proto, data)
    diff = {}
    for name, got in layout.msg_values(fmt, parsed).items():
        want = layout.msg_attr(msg, name, got)
        if got != want:
            diff[name] = (got, want)
    return diff


@pytest.mark.parametrize("vec", GOOD, ids=lambda v: v["name"])
def test_layout_reads_what_the_codec_decodes(vec: dict) -> None:
    assert layout_vs_codec(vec["proto"], bytes.fromhex(vec["hex"])) == {}


def test_layout_covers_every_carried_field() -> None:
    """Every field a vector lists (but kind, derived) is mapped by the layout."""
    for vec in GOOD:
        fmt = layout.FORMATS[codec._proto(vec["proto"])]
        parsed = layout.parse(vec["proto"], bytes.fromhex(vec["hex"]))
        mapped = set(layout.msg_values(fmt, parsed)) | {"kind"}
        carried = {k for k, v in vec["fields"].items() if v != "" and not k.endswith("_len")}
        missing = carried - mapped
        assert not missing, (vec["name"], missing)


def test_layout_sizes_match_the_codec() -> None:
    fixed = {
        Proto.PEGASUS: codec.PEGASUS_HDR_LEN + codec.PEGASUS_PAYLOAD_HDR_LEN,
        Proto.NETCACHE: codec.NETCACHE_HDR_LEN,
        Proto.KVSWITCH: codec.KVSWITCH_HDR_LEN,
        Proto.STARCACHE: codec.STARCACHE_HDR_LEN + codec.STARCACHE_PAYLOAD_HDR_LEN,
        Proto.NETLR: codec.NETLR_LEN,
        Proto.NETMC: codec.NETMC_HDR_LEN + codec.NETMC_PAYLOAD_HDR_LEN,
    }
    for proto, want in fixed.items():
        fmt = layout.FORMATS[proto]
        size = sum(f.width or (f.length if isinstance(f.length, int) else 0)
                   for f in fmt.fields if f.ops is None)
        assert size == want, proto


@pytest.mark.parametrize("vec", [v for v in BAD if v["error"] in
                                 ("ETRUNC", "ELEN", "EMAGIC", "EOP")],
                         ids=lambda v: v["name"])
def test_layout_flags_malformed_lengths_magic_and_ops(vec: dict) -> None:
    assert layout.parse(vec["proto"], bytes.fromhex(vec["hex"])).problems


def test_a_wrong_layout_is_caught() -> None:
    """The check can fail: a layout with two fields swapped disagrees."""
    vec = next(v for v in GOOD if v["proto"] == "netcache" and v["fields"]["client_id"])
    fmt = layout.FORMATS[Proto.NETCACHE]
    f = list(fmt.fields)
    i = [x.name for x in f].index("client_id")
    f[i], f[i + 1] = f[i + 1], f[i]  # client_id (u16) and server_id (u8) swapped
    bad = layout.Format(fmt.proto, fmt.title, fmt.ports, fmt.ops, tuple(f))
    saved = layout.FORMATS[Proto.NETCACHE]
    layout.FORMATS[Proto.NETCACHE] = bad
    try:
        assert layout_vs_codec("netcache", bytes.fromhex(vec["hex"])) != {}
    finally:
        layout.FORMATS[Proto.NETCACHE] = saved
