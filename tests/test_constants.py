"""One source for the constants every layer shares (spec/constants.toml).

- the generated C header, P4 include and Python module are current;
- the register and table tables of the spec equal what the C pipelines
  register (probed in-process: every name answers, its size is where
  reg_read turns ERANGE, its width is what an all-ones write reads back as)
  and what the P4 programs declare (registers, tables with key and argument
  widths, actions, default actions), so a register renamed or resized on
  either side fails here;
- the spec's formulas are what C computes: the initial WRR schedule (and
  every other non-zero register after init) equals the BMv2 driver's
  initial writes, the multicast group ids fit P4Runtime, NetCache's sketch
  row hash (seeds) lands where the Python controller reads.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from netkv import constants as K
from netkv.drivers import bmv2
from netkv.drivers.base import DriverError
from netkv.pipeline import Pipeline
from netkv.protocols.netcache import row_hash
from netkv.wire.codec import Msg, NetcacheOp, Proto, encode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import gen_constants  # noqa: E402

try:
    from test_p4 import PROGRAMS, _strip_c_comments, c_names, p4_objects, p4_text
except ImportError:
    from tests.test_p4 import PROGRAMS, _strip_c_comments, c_names, p4_objects, p4_text

# knobs the probes use, and the symbols of the spec's cell expressions
KNOBS = {"hash": "", "pegasus": "max_rkeys=8", "netcache": "cache_items=16;max_value_bytes=64;cm_width=32;bf_bits=128",
         "kvswitch": "hot_keys=9;hashpipe_stages=2", "starcache": "keys=5;slots=3",
         "netlr": "slots=16", "netmc": "w=16"}
SYMBOLS = {"hash": {}, "pegasus": {"K": 8},
           "netcache": {"ITEMS": 16, "WORDS": 8, "CM_WIDTH": 32, "BF_BITS": 128},
           "kvswitch": {"HOT_KEYS": 9, "HP_STAGES": 2, "HP_WIDTH": 5},
           "starcache": {"KEYS": 5, "SLOTS": 3}, "netlr": {"NL_SLOTS": 16}, "netmc": {}}


def _cells(expr: str, symbols: dict[str, int]) -> int:
    for name, v in symbols.items():
        expr = re.sub(rf"\b{name}\b", str(v), expr)
    assert re.fullmatch(r"[\d\s*+()]+", expr), f"cells {expr!r}: unknown symbol"
    return int(eval(expr))  # noqa: S307 - digits and operators only


# ---- generated files ----------------------------------------------------------------


def test_generated_files_are_current() -> None:
    assert gen_constants.stale() == [], "run `just constants` (tools/gen_constants.py)"


def test_a_changed_spec_makes_them_stale(tmp_path: Path) -> None:
    spec = tmp_path / "constants.toml"
    spec.write_text(gen_constants.SPEC.read_text().replace(
        "PEGASUS_PORT = [5047,", "PEGASUS_PORT = [5048,"))
    changed = gen_constants.outputs(gen_constants.load(spec))
    for path, text in changed.items():
        assert text != path.read_text(), path
    assert "#define NK_PEGASUS_PORT 5048" in changed[gen_constants.C_OUT]
    assert "const bit<16> PEGASUS_PORT = 5048;" in changed[gen_constants.P4_OUT]
    assert "PEGASUS_PORT = 5048" in changed[gen_constants.PY_OUT]


def test_formula_with_an_unknown_name_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "constants.toml"
    spec.write_text(gen_constants.SPEC.read_text().replace(
        'expr = "i % n"', 'expr = "i % n_servers"'))
    with pytest.raises(ValueError, match="unknown name 'n_servers'"):
        gen_constants.outputs(gen_constants.load(spec))


# ---- registers and tables: C ------------------------------------------------------------


def _c_bits(proto: str, p: Pipeline, name: str) -> int:
    """The width a register masks writes to: an all-ones write read back,
    or its nk_reg_desc bits where the pipeline refuses such a value or does
    not keep it (sketch_clear is a command)."""
    try:
        p.reg_write(name, 0, 2**64 - 1)
        bits = p.reg_read(name, 0).bit_length()
    except DriverError:
        bits = 0
    if not bits:
        text = _strip_c_comments(PROGRAMS[proto][0].read_text())
        m = re.search(rf'add_reg\(\s*\w+\s*,\s*"{name}"\s*,[^;]*,\s*(\d+)\s*\)\s*;', text)
        assert m, f"{name}: keeps no all-ones value and has no add_reg() registration"
        bits = int(m.group(1))
    return bits


def c_registers(proto: str) -> dict[str, tuple[int, int]]:
    """{name: (bits, cells)} of a C pipeline, probed in-process."""
    regs, _ = c_names(PROGRAMS[proto][0])
    out = {}
    with Pipeline(proto, n_servers=4, n_clients=1, params=KNOBS[proto]) as p:
        for name in sorted(regs):
            lo, hi = 1, 1 << 22          # reg_read succeeds below the size
            while lo < hi:
                mid = (lo + hi + 1) // 2
                try:
                    p.reg_read(name, mid - 1)
                    lo = mid
                except DriverError:
                    hi = mid - 1
            out[name] = (_c_bits(proto, p, name), lo)
    return out


@pytest.mark.parametrize("proto", sorted(K.REGISTERS))
def test_c_registrations_equal_the_spec(proto: str) -> None:
    want = {n: (bits, _cells(cells, SYMBOLS[proto])) for n, (bits, cells) in K.REGISTERS[proto].items()}
    assert c_registers(proto) == want
    _, tables = c_names(PROGRAMS[proto][0])
    assert tables == set(K.TABLES[proto])


def test_the_c_probe_sees_a_resized_register() -> None:
    """The probe can fail: a different max_rkeys changes every K register."""
    with Pipeline("pegasus", n_servers=4, n_clients=1, params="max_rkeys=9") as p:
        p.reg_read("rset_size", 8)
        with pytest.raises(DriverError, match="out of range"):
            p.reg_read("rset_size", 9)
    assert K.REGISTERS["pegasus"]["rset_size"] == (8, "K")


# ---- registers and tables: P4 -----------------------------------------------------------


def _p4_defaults(text: str) -> dict[str, str]:
    defines: dict[str, str] = {}
    for m in re.finditer(r"^\s*#define\s+(\w+)[ \t]+([^\n]+)", text, re.M):
        defines.setdefault(m.group(1), m.group(2).strip())
    return defines


def _p4_size(expr: str, defines: dict[str, str]) -> int:
    for _ in range(6):
        for name, val in defines.items():
            expr = re.sub(rf"\b{name}\b", f"({val})", expr)
    assert re.fullmatch(r"[\d\s*+\-()/]+", expr), f"size {expr!r} is not a constant"
    return int(eval(expr.replace("/", "//")))  # noqa: S307


def p4_tables(text: str) -> dict[str, dict[str, object]]:
    """{table: keys [(name, bits)], action, args [(name, bits)], default} as declared."""
    widths = {name: int(bits) for bits, name in re.findall(r"bit<(\d+)>\s+(\w+)\s*[;=,)]", text)}
    actions = {m.group(1): [(n, int(b)) for b, n in re.findall(r"bit<(\d+)>\s+(\w+)", m.group(2))]
               for m in re.finditer(r'@name\("\.\w+"\)\s*action\s+(\w+)\s*\(([^)]*)\)', text)}
    out: dict[str, dict[str, object]] = {}
    for m in re.finditer(r'@name\("\.(\w+)"\)\s*table\s+\w+\s*\{', text):
        depth, end = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        body = text[m.end():end]
        keys = [(name, widths[expr.split(".")[-1]]) for expr, name in
                re.findall(r"([\w.]+)\s*:\s*exact\s*@name\(\"(\w+)\"\)", body)]
        acts = re.search(r"actions\s*=\s*\{(.*?)\}", body, re.S)
        assert acts, m.group(1)
        items = [a.split() for a in acts.group(1).split(";") if a.strip()]
        entry = [a[-1] for a in items if "@defaultonly" not in a]
        default = re.search(r"default_action\s*=\s*(\w+)", body)
        out[m.group(1)] = {"keys": keys, "action": entry[0], "args": actions.get(entry[0], []),
                           "default": default.group(1) if default else None}
    return out


@pytest.mark.parametrize("proto", sorted(K.REGISTERS))
def test_p4_declarations_equal_the_spec(proto: str) -> None:
    text = _strip_c_comments(p4_text(PROGRAMS[proto][1]))
    regs, _, _ = p4_objects(text)
    defines = _p4_defaults(text)
    p4_symbols = {"K": "PEG_MAX_RKEYS", "ITEMS": "NC_CACHE_ITEMS", "WORDS": "NC_WORDS",
                  "CM_WIDTH": "NC_CM_WIDTH", "BF_BITS": "NC_BF_BITS", "HOT_KEYS": "KVS_HOT_KEYS",
                  "HP_STAGES": "KVS_HP_STAGES", "HP_WIDTH": "KVS_HP_WIDTH",
                  "KEYS": "SC_KEYS", "SLOTS": "SC_SLOTS"}
    want = {}
    for n, (bits, cells) in K.REGISTERS[proto].items():
        for sym, macro in p4_symbols.items():
            cells = re.sub(rf"\b{sym}\b", macro, cells)
        want[n] = (bits, _p4_size(cells, defines))
    got = {n: (int(bits), _p4_size(size, defines)) for n, (bits, size) in regs.items()}
    assert got == want
    assert p4_tables(text) == {t: {**v, "keys": [tuple(k) for k in v["keys"]],  # type: ignore[union-attr]
                                   "args": [tuple(a) for a in v["args"]]}  # type: ignore[union-attr]
                               for t, v in K.TABLES[proto].items()}


def test_the_p4_parser_sees_a_resized_register_and_a_narrower_key() -> None:
    text = _strip_c_comments(p4_text(PROGRAMS["pegasus"][1]))
    regs, _, _ = p4_objects(text.replace("register<bit<8>>(PEG_MAX_RKEYS) rset_size",
                                         "register<bit<16>>(PEG_MAX_RKEYS) rset_size"))
    assert regs["rset_size"][0] == "16"
    narrow = p4_tables(text.replace("bit<32> keyhash;", "bit<16> keyhash;"))
    assert narrow["rkeys"]["keys"] == [("keyhash", 16)]


# ---- formulas and ids ---------------------------------------------------------------------


@pytest.mark.parametrize("proto", sorted(K.REGISTERS))
@pytest.mark.parametrize("n", [1, 3, 4, 7, 32])
def test_bmv2_initial_writes_are_the_c_pipelines_init(proto: str, n: int) -> None:
    """Every register cell the C pipeline's init leaves non-zero is written by
    the BMv2 driver after pushing the program (BMv2 starts at 0), and nothing
    else: the protocol's ``P4Program.initial_registers`` (Pegasus: the initial
    WRR schedule, ver_next, n_servers, fanout; every program: n_servers, which
    tells server ports from client ports)."""
    from netkv.protocols import lookup

    knobs = KNOBS[proto]
    if n > lookup(proto).config.model_fields["max_servers"].default:
        pytest.skip(f"{proto} takes at most its max_servers servers")
    with Pipeline(proto, n_servers=n, n_clients=1, params=knobs) as p:
        c_init = {(name, i): v for name, (_, cells) in K.REGISTERS[proto].items()
                  for i in range(_cells(cells, SYMBOLS[proto]))
                  if (v := p.reg_read(name, i))}
    p4 = lookup(proto).p4
    assert p4 is not None
    writes = {(name, i): v for name, i, v in p4.initial_registers(n, bmv2.parse_params(knobs))
              if v}
    assert writes == c_init
    if proto == "pegasus":
        assert c_init[("wrr_len", 0)] == K.peg_wrr_len_initial(n)


def test_multicast_group_ids_fit_p4runtime() -> None:
    groups = {K.peg_mcast_group(s, r) for n in range(2, K.PEG_N + 1)
              for s in range(n) for r in range(2, n + 1)}
    assert 1 <= min(groups) and max(groups) < K.FLOOD_MCAST_GRP <= K.MCAST_GRP_MAX == 0x7FFF


def test_netcache_row_hash_seeds_agree() -> None:
    """A READ miss bumps one count-min cell per row: C puts it where the
    controller (netcache.row_hash, the spec's seeds) reads."""
    key = b"user:000042"
    width = SYMBOLS["netcache"]["CM_WIDTH"]
    with Pipeline("netcache", n_servers=4, n_clients=1, params=KNOBS["netcache"]) as p:
        m = Msg(proto=Proto.NETCACHE, op=NetcacheOp.READ, key=key, client_id=4)
        assert p.process(encode(m), src=4, dst=1, port=4) is not None
        hot = [i for i in range(K.NC_CM_ROWS * width) if p.reg_read("cm_sketch", i)]
    assert hot == sorted(r * width + row_hash(r, key) % width for r in range(K.NC_CM_ROWS))
