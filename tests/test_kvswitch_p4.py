"""p4src/kvswitch/kvswitch.p4 against kvswitch.c, statically (no P4 toolchain
here; the BMv2 golden-vector test is tests/test_p4.py, marked bmv2):

- ``period_reset`` clears in C exactly what the BMv2 semantics reset;
- a cold key lands in the HashPipe cell the P4 hash names (salt, fields, stride);
- KvswitchWireCheck accepts exactly what the codec decodes (golden vectors
  and every op byte);
- the stats cells and the compile-time defines are kvswitch.c's.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import pytest

from netkv.constants import KVS_M
from netkv.pipeline import Pipeline
from netkv.protocols.kvswitch import PERIOD_REGISTERS, KVSwitchP4, p4_defines
from netkv.protocols.plugin import parse_params
from netkv.wire import codec
from netkv.wire.codec import KvswitchOp, Msg, Proto

try:
    from test_p4 import PROGRAMS, _strip_c_comments, c_names, p4_text
except ImportError:
    from tests.test_p4 import PROGRAMS, _strip_c_comments, c_names, p4_text

C_SRC, P4_SRC, _ = PROGRAMS["kvswitch"]
VECTORS = Path(__file__).resolve().parent / "vectors" / "kvswitch.json"
KNOBS = "hot_keys=9;hashpipe_stages=2"      # w = 5
CLIENT = 4


def _p4() -> str:
    return _strip_c_comments(p4_text(P4_SRC))


class Recorder:
    """RegisterCells that remembers what the semantics asked for."""

    def __init__(self) -> None:
        self.resets: list[list[str]] = []
        self.writes: list[tuple[str, int, int]] = []

    def write(self, cells):  # type: ignore[no-untyped-def]
        self.writes += list(cells)

    def reset(self, names):  # type: ignore[no-untyped-def]
        self.resets.append(list(names))

    def resolve(self, name: str, index: int) -> tuple[str, int]:
        return name, index


def test_period_reset_clears_what_bmv2_resets() -> None:
    regs, _ = c_names(C_SRC)
    with Pipeline("kvswitch", n_servers=4, n_clients=1, params=KNOBS) as p:
        for name in regs - {"period_reset"}:
            p.reg_write(name, 0, 1)
        p.reg_write("period_reset", 0, 1)
        cleared = {name for name in regs - {"period_reset"} if p.reg_read(name, 0) == 0}
        assert p.reg_read("period_reset", 0) == 0          # a command, not a value
    assert cleared == set(PERIOD_REGISTERS)
    rec = Recorder()
    sem = KVSwitchP4()
    assert sem.special_registers == {"period_reset"}
    sem.reg_write(rec, "period_reset", 0, 1)
    assert rec.resets == [list(PERIOD_REGISTERS)] and rec.writes == []
    sem.reg_write(rec, "period_reset", 0, 0)              # 0: nothing happens
    assert rec.resets == [list(PERIOD_REGISTERS)]


def _key(i: int) -> bytes:
    return (b"k" * 8) + i.to_bytes(8, "big")


def test_hashpipe_cell_is_the_p4_hash() -> None:
    """A cold GET lands in stage 0 at CRC-32(0xA5, KEY) mod w: the bytes the
    P4 program hashes ({KS_HP_SALT ^ j, ck0_, ck1_}, cell j * w + h)."""
    text = _p4()
    assert re.search(r"const bit<8> KS_HP_SALT = 0xA5;", text)
    assert re.search(r"hash\(h_, HashAlgorithm\.crc32, 32w0,\s*\\?\s*\{ KS_HP_SALT \^ \(bit<8>\)\(j\), "
                     r"ck0_, ck1_ \}", text)
    assert "bit<32> i_ = (j) * KVS_HP_WIDTH + h_;" in text
    w = 5
    moved = 0
    with Pipeline("kvswitch", n_servers=4, n_clients=1, params=KNOBS) as p:
        for i in range(20):
            key = _key(i)
            m = Msg(proto=Proto.KVSWITCH, op=KvswitchOp.GET, req_id=i, key=key)
            assert p.process(codec.encode(m), src=CLIENT, dst=1, port=CLIENT) is not None
            cell = zlib.crc32(bytes([0xA5]) + key) % w
            hi, lo = p.reg_read("HashPipeKeyHi", cell), p.reg_read("HashPipeKeyLo", cell)
            assert (hi, lo) == (int.from_bytes(key[:8], "big"), int.from_bytes(key[8:], "big"))
            assert p.reg_read("HashPipeCount", cell) >= 1   # stage 0 always inserts
            moved += zlib.crc32(bytes([0xA6]) + key) % w != cell
    assert moved, "a different salt would have put some key elsewhere (the check can fail)"


def _wire_ops(text: str) -> set[int]:
    body = text[text.index("control KvswitchWireCheck"):]
    body = body[:body.index("\n}\n")]
    return {int(KvswitchOp[n]) for n in re.findall(r"op == KVSWITCH_OP_(\w+)", body)}


def _p4_accepts(ops: set[int], payload: bytes) -> bool:
    """KvswitchWireCheck on a parsed header (a shorter payload is a parser error)."""
    if len(payload) < 28:
        return False
    vlen = int.from_bytes(payload[2:4], "big")
    return payload[0] in ops and len(payload) == 28 + vlen


def _decodes(payload: bytes) -> bool:
    try:
        codec.decode("kvswitch", payload)
        return True
    except codec.WireError:
        return False


def test_wire_check_accepts_what_the_codec_decodes() -> None:
    import json

    text = _p4()
    ops = _wire_ops(text)
    assert ops == {int(o) for o in KvswitchOp}
    assert re.search(r"const bit<16> KVSWITCH_HDR_BYTES = 28;", text)
    vectors = json.loads(VECTORS.read_text())
    assert any("error" in v for v in vectors)
    for v in vectors:
        payload = bytes.fromhex(v["hex"])
        assert _p4_accepts(ops, payload) == ("error" not in v) == _decodes(payload), v["name"]
    base = bytearray(bytes.fromhex(next(v["hex"] for v in vectors if v["name"] == "kvswitch/GET")))
    for op in range(256):
        base[0] = op
        assert _p4_accepts(ops, bytes(base)) == _decodes(bytes(base)), op
    # the check can fail: a program that forgot one op
    assert not all(_p4_accepts(ops - {int(KvswitchOp.REPL_EVICT)}, bytes.fromhex(v["hex"]))
                   == _decodes(bytes.fromhex(v["hex"])) for v in vectors)


def test_stats_cells_are_kvswitch_c() -> None:
    c = _strip_c_comments(C_SRC.read_text())
    body = c[c.index("enum ks_stat {"):]
    names = re.findall(r"\b(KS_\w+)", body[:body.index("};")])
    assert names[-1] == "KS_NSTATS"
    want = {n: i for i, n in enumerate(names[:-1])}
    got = {n: int(v) for n, v in re.findall(r"const bit<32> (KS_\w+) = (\d+);", _p4())}
    assert got == want
    assert re.search(rf"#define KS_COUNT {len(want)}\b", _p4())


@pytest.mark.parametrize(("knobs", "want"), [
    ("", {"KVS_HOT_KEYS": 10_000, "KVS_HP_STAGES": 4, "KVS_HP_WIDTH": 2500, "KVS_STRICT": 1}),
    ("hot_keys=9;hashpipe_stages=2;strict=0",
     {"KVS_HOT_KEYS": 9, "KVS_HP_STAGES": 2, "KVS_HP_WIDTH": 5, "KVS_STRICT": 0}),
    ("hot_keys=10;hashpipe_stages=3;hashpipe_width=7",
     {"KVS_HOT_KEYS": 10, "KVS_HP_STAGES": 3, "KVS_HP_WIDTH": 7, "KVS_STRICT": 1}),
])
def test_defines_size_the_registers_as_c_does(knobs: str, want: dict[str, int]) -> None:
    assert p4_defines(parse_params(knobs)) == want
    with Pipeline("kvswitch", n_servers=4, n_clients=1, params=knobs) as p:
        cells = want["KVS_HP_STAGES"] * want["KVS_HP_WIDTH"]
        p.reg_read("HashPipeCount", cells - 1)
        with pytest.raises(Exception, match="range"):
            p.reg_read("HashPipeCount", cells)
        p.reg_read("Valid", want["KVS_HOT_KEYS"] - 1)
        p.reg_read("Loadcount", KVS_M - 1)


def test_defines_refuse_what_the_program_cannot_take() -> None:
    with pytest.raises(ValueError, match="hashpipe_stages 9"):
        p4_defines({"hashpipe_stages": "9"})
    with pytest.raises(ValueError, match="hot_keys 0"):
        p4_defines({"hot_keys": "0"})


def test_status_2_is_named_error_in_every_layer() -> None:
    """The digest names KVSwitch's FLAGS status 2 ERROR (§2): C, P4 and the
    Python layouts use KVSWITCH_RESULT_ERROR, never Pegasus' RETRY."""
    from netkv import constants as K
    from netkv.wire.layout import FORMATS

    root = C_SRC.parents[2]
    assert K.KVSWITCH_RESULT_ERROR == K.RESULT_RETRY == 2
    assert "const bit<8> KVSWITCH_RESULT_ERROR = 2;" in (
        root.parent / "p4src" / "common" / "constants.p4").read_text()
    for path in (root / "src" / "host" / "kvswitch.c", root / "src" / "pipeline" / "kvswitch.c",
                 root / "tests" / "test_kvswitch.c", P4_SRC, root.parent / "docs" / "kvswitch.md"):
        text = path.read_text().replace("NK_REPLY_RETRY", "")   # the host API's action, not a status
        assert not re.search(r"\bRETRY\b|RESULT_RETRY", text), path.name
    assert "NK_KVSWITCH_RESULT_ERROR" in (root / "src" / "host" / "kvswitch.c").read_text()
    flags = next(f for f in FORMATS[Proto.KVSWITCH].fields if f.name == "flags")
    assert flags.names[2] == "ERROR"


def _r1_unicast(p4: str, c: str) -> bool:
    """An r = 1 HotkeyTable entry (install_below_t) is a hot key served by
    its owner alone: both programs multicast a hot write only for r >= 2,
    send an r = 1 write to the owner (not to the server the client
    addressed) and count every hot request in HotkeyCount before choosing
    GET or write."""
    mcast = re.search(r"if \(h_r >= 2\) \{\s*/?\*?[^}]*?sm\.mcast_grp = [^}]*\}\s*else \{"
                      r"\s*(?:/\*.*?\*/\s*)?meta\.dst_node = \(bit<16>\)h_owner;", p4, re.S)
    counted = re.search(r"HotkeyCount\.write\(\(bit<32>\)h_slot, hc \+ 1\);.*?"
                        r"if \(op == KVSWITCH_OP_GET\)", p4, re.S)
    c_uni = re.search(r"if \(r < 2\) \{\s*meta->dst = \(uint16_t\)owner;\s*"
                      r"count_load\(s, meta->dst\);\s*forward\(", c)
    return bool(mcast and counted and c_uni)


def test_an_r1_entry_counts_and_stays_at_the_owner_in_p4_as_in_c() -> None:
    c = _strip_c_comments(C_SRC.read_text())
    assert _r1_unicast(_p4(), c)
    # the check can fail: a program multicasting every hot write
    assert not _r1_unicast(_p4().replace("if (h_r >= 2) {", "if (h_r >= 1) {"), c)
    assert not _r1_unicast(_p4(), c.replace("if (r < 2) {", "if (r < 1) {"))
    # ... or an r = 1 write left at the address the client chose
    assert not _r1_unicast(_p4().replace("meta.dst_node = (bit<16>)h_owner;", ""), c)
    assert not _r1_unicast(_p4(), c.replace("meta->dst = (uint16_t)owner;", ""))
