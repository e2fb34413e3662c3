"""The TNA (Tofino) programs p4src/<p>/tna/<p>.p4, checked as the v1model ones
are (tests/test_p4.py): no bf-p4c exists here, so they are checked
statically only and never claimed compiled.

- every register and table name of the C pipeline is declared in the TNA
  program with that exact absolute name (``@name(".x") Register<...>``),
  and nothing else is (but the TNA shell's ``rack_port``);
- each register has the v1model program's size and width, or a width listed
  in ``TNA_WIDTHS`` with the reason (Tofino's stateful ALU words);
- every table of the v1model program has the same key fields and entry
  actions (parameter widths and names);
- every register is accessed through at least one ``RegisterAction`` and
  nothing of v1model (``register<``, ``standard_metadata_t``, ``V1Switch``)
  is left; the program ends in ``Switch(pipe) main``;
- the sources preprocess (cpp) with stand-in core.p4/tna.p4 for each
  supported variant, balanced and with no macro left;
- and each check fails on a doctored copy.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

try:
    from test_p4 import P4SRC, PROGRAMS, ROOT, _strip_c_comments, c_names, p4_objects, p4_text
except ImportError:
    from tests.test_p4 import (P4SRC, PROGRAMS, ROOT, _strip_c_comments, c_names, p4_objects,
                               p4_text)

TNA_PROTOCOLS = ("hash", "pegasus", "netmc")

# tables of the TNA shell (common/tna/shell.p4) that no C pipeline has
TNA_SHELL_TABLES = {"rack_port"}

# (protocol, register) -> (TNA width, why it differs from the v1model width)
TNA_WIDTHS: dict[tuple[str, str], tuple[str, str]] = {
    **{("hash", r): ("32", "a counter in one stateful ALU word")
       for r in ("port_pkts", "dropped", "host_server_op")},
    **{("pegasus", r): ("32", "versions in one stateful ALU word (docs/pegasus.md TNA)")
       for r in ("ver_next", "ver_completed", "ver_last_write")},
    ("pegasus", "stats"): ("32", "a counter in one stateful ALU word"),
    ("pegasus", "wrr_len"): ("16", "Tofino registers are 1, 8, 16 or 32 bits"),
    ("netmc", "stats"): ("32", "a counter in one stateful ALU word"),
}


def tna_path(proto: str) -> Path:
    return P4SRC / proto / "tna" / f"{proto}.p4"


def tna_objects(text: str) -> tuple[dict[str, tuple[str, str, str]], set[str]]:
    """({register: (bit width, size expr, variable)}, tables) declared with an
    absolute @name(".x") in a TNA program."""
    text = _strip_c_comments(text)
    regs = {
        m.group(1): (m.group(2), m.group(3).strip(), m.group(4))
        for m in re.finditer(r'@name\("\.(\w+)"\)\s*Register<\s*bit<(\d+)>\s*,\s*bit<\d+>\s*>'
                             r'\(([^;]*?)\)\s*(\w+)\s*;', text)
    }
    _, tables, _ = p4_objects(text)
    return regs, tables


def _size(expr: str, text: str) -> int:
    defines: dict[str, str] = {}
    for m in re.finditer(r"^\s*#define\s+(\w+)[ \t]+([^\n]+)$", _strip_c_comments(text), re.M):
        defines.setdefault(m.group(1), m.group(2).strip())
    for _ in range(5):
        for name, val in defines.items():
            expr = re.sub(rf"\b{name}\b", val, expr)
    assert re.fullmatch(r"[\d\s*+\-()/]+", expr), f"size {expr!r} is not a constant"
    return int(eval(expr.replace("/", "//")))  # noqa: S307 - digits and operators only


def tna_problems(proto: str, tna: Path) -> list[str]:
    """Everything wrong with ``tna`` against the C pipeline and the v1model
    program of ``proto`` (empty: it agrees)."""
    c, v1, _ = PROGRAMS[proto]
    text = p4_text(tna)
    clean = _strip_c_comments(text)
    regs, tables = tna_objects(text)
    c_regs, c_tables = c_names(c)
    v1_text = p4_text(v1)
    v1_regs, _, _ = p4_objects(v1_text)
    out = []
    out += [f"register {r} of {c.name} missing" for r in sorted(c_regs - set(regs))]
    out += [f"register {r} not in {c.name}" for r in sorted(set(regs) - c_regs)]
    out += [f"table {t} of {c.name} missing" for t in sorted(c_tables - tables)]
    out += [f"table {t} not in {c.name}" for t in sorted(tables - c_tables - TNA_SHELL_TABLES)]
    for name, (width, size, var) in sorted(regs.items()):
        if name in v1_regs:
            v1_width, v1_size = v1_regs[name]
            want = TNA_WIDTHS.get((proto, name), (v1_width, ""))[0]
            if width != want:
                out.append(f"register {name}: bit<{width}>, expected bit<{want}>")
            if _size(size, text) != _size(v1_size, v1_text):
                out.append(f"register {name}: size {size}, v1model has {v1_size}")
        if not re.search(rf"RegisterAction<[^>]*(?:<[^>]*>[^>]*)*>\(\s*{var}\s*\)", clean):
            out.append(f"register {name} has no RegisterAction")
    for v1_only in ("register<", "standard_metadata_t", "V1Switch", "v1model.p4"):
        if v1_only in clean:
            out.append(f"v1model's {v1_only} in a TNA program")
    if "#include <tna.p4>" not in text or not re.search(r"Switch\(\s*pipe\s*\)\s*main\s*;", clean):
        out.append("not a TNA program (#include <tna.p4> ... Switch(pipe) main;)")
    return out


@pytest.mark.parametrize("proto", TNA_PROTOCOLS)
def test_tna_names_widths_and_register_actions_agree(proto: str) -> None:
    assert tna_path(proto).is_file(), f"{tna_path(proto).relative_to(ROOT)} missing"
    assert tna_problems(proto, tna_path(proto)) == []


def _doctored(proto: str, tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the TNA program (includes resolved as from its folder)."""
    src = tna_path(proto)
    text = src.read_text()
    assert old in text, old
    folder = tmp_path / proto / "tna"
    folder.mkdir(parents=True)
    shutil.copytree(P4SRC / "common", tmp_path / "common")
    out = folder / src.name
    out.write_text(text.replace(old, new, 1))
    return out


def test_tna_check_fails_on_a_renamed_register(tmp_path: Path) -> None:
    bad = _doctored("hash", tmp_path, '@name(".dropped")', '@name(".dropped_pkts")')
    assert tna_problems("hash", bad) == ["register dropped of hash.c missing",
                                         "register dropped_pkts not in hash.c"]


def test_tna_check_fails_on_a_register_without_action_or_wrong_width(tmp_path: Path) -> None:
    bad = _doctored("hash", tmp_path, "RegisterAction<bit<32>, bit<32>, bit<32>>(dropped)",
                    "RegisterAction<bit<32>, bit<32>, bit<32>>(port_pkts)")
    assert tna_problems("hash", bad) == ["register dropped has no RegisterAction"]
    bad = _doctored("pegasus", tmp_path / "w", "Register<bit<16>, bit<32>>(1) wrr_len",
                    "Register<bit<9>, bit<32>>(1) wrr_len")
    assert tna_problems("pegasus", bad) == ["register wrr_len: bit<9>, expected bit<16>"]


def test_tna_check_fails_on_v1model_left_in(tmp_path: Path) -> None:
    bad = _doctored("hash", tmp_path, "#include <tna.p4>", "#include <v1model.p4>")
    assert tna_problems("hash", bad) == [
        "v1model's v1model.p4 in a TNA program",
        "not a TNA program (#include <tna.p4> ... Switch(pipe) main;)"]


_CPP = shutil.which("cpp") or shutil.which("gcc")

TNA_VARIANTS = [
    ("hash", {}),
    ("pegasus", {}),
    ("pegasus", {"PEG_SELECTION": 1}),
    ("pegasus", {"PEG_WRITE_MCAST": 0, "PEG_SAMPLE": 0, "PEG_MAX_RKEYS": 128}),
    ("pegasus", {"NETKV_TNA_CPU_PORT": 320}),
    ("netmc", {}),
    ("netmc", {"MC_W": 32}),
    ("netmc", {"MC_SPLIT": 0, "NETKV_TRUSTED_PORT": 6, "NETKV_TNA_RECIRC_PORT": 196}),
]


def _preprocess(src: Path, defines: dict[str, int], tmp_path: Path) -> subprocess.CompletedProcess:
    assert _CPP is not None
    stub = tmp_path / "inc"
    stub.mkdir(exist_ok=True)
    (stub / "core.p4").write_text("")
    (stub / "tna.p4").write_text("")
    cmd = [_CPP] + (["-E"] if _CPP.endswith("gcc") else []) + [
        "-P", "-undef", "-nostdinc", "-x", "c", "-I", str(stub),
        *[f"-D{k}={v}" for k, v in defines.items()], str(src)]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.skipif(_CPP is None, reason="no C preprocessor (cpp/gcc) to expand the P4 sources")
@pytest.mark.parametrize(("proto", "defines"), TNA_VARIANTS, ids=lambda v: str(v))
def test_tna_preprocesses(proto: str, defines: dict[str, int], tmp_path: Path) -> None:
    res = _preprocess(tna_path(proto), defines, tmp_path)
    assert res.returncode == 0 and not res.stderr.strip(), res.stderr
    out = res.stdout
    left = re.findall(r"\b(PEG_(?:MAX_RKEYS|SELECTION|AMO|SAMPLE|FANOUT_\w+|WRITE_MCAST|N|WRR_SLOTS|MAX_NODES)|SEL_\w+|ST_COUNT|HASH_MAX_PORTS|NETKV_TNA\w*|NETKV_PARSE_\w+|"
                      r"POW2_\w+|LOWMASK_\w+|MC_W|MC_SPLIT|MC_WMASK|MC_KG|MC_SRV_ACTION|MC_STAT_COUNT|"
                      r"NETMC_N)\b", out)
    assert not left, f"unexpanded macros: {sorted(set(left))}"
    for a, b in ("{}", "()"):
        assert out.count(a) == out.count(b), f"unbalanced {a}{b}"
    assert "#" not in out


@pytest.mark.skipif(_CPP is None, reason="no C preprocessor (cpp/gcc) to expand the P4 sources")
def test_tna_refuses_a_variant_it_does_not_implement(tmp_path: Path) -> None:
    """Least-loaded selection and AMO are v1model-only: the TNA program says
    so in one #error instead of compiling something else."""
    res = _preprocess(tna_path("pegasus"), {"PEG_SELECTION": 3}, tmp_path)
    assert res.returncode != 0 and "not written for TNA" in res.stderr


def _block(text: str, start: int) -> str:
    """The brace-balanced block opening at or after ``start``."""
    i = text.index("{", start)
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j + 1]
    return text[i:]


def table_shapes(text: str) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """{table: (key field names, (action: param widths and names) ...)} of the
    tables with an absolute @name: what a controller's table_add meets
    through the P4Info."""
    text = _strip_c_comments(text)
    params = {m.group(2): (m.group(1), re.sub(r"\s+", " ", m.group(3).strip()))
              for m in re.finditer(r'@name\("\.(\w+)"\)\s*action\s+(\w+)\s*\(([^)]*)\)', text)}
    shapes = {}
    for m in re.finditer(r'@name\("\.(\w+)"\)\s*table\s+\w+', text):
        body = _block(text, m.end())
        keys = tuple(re.findall(r':\s*exact\s*@name\("(\w+)"\)', body))
        acts = re.search(r"actions\s*=\s*\{([^}]*)\}", body)
        names = re.findall(r"(?<!@defaultonly )\b(\w+)\s*;", acts.group(1) if acts else "")
        shapes[m.group(1)] = (keys, tuple(f"{params[a][0]}({params[a][1]})"
                                          for a in names if a in params))
    return shapes


@pytest.mark.parametrize("proto", TNA_PROTOCOLS)
def test_tna_tables_take_the_same_keys_and_arguments(proto: str) -> None:
    """A controller's table_add reaches both programs the same way: every
    shared table has the same key field names and entry actions, with the
    same parameter widths and names (P4Info)."""
    tna = table_shapes(p4_text(tna_path(proto)))
    v1 = table_shapes(p4_text(PROGRAMS[proto][1]))
    assert set(v1) <= set(tna)
    assert {t: tna[t] for t in v1} == v1
    assert v1["node_fwd"] == (("node",), ("set_port(bit<9> port)",))


def test_table_check_fails_on_a_changed_argument(tmp_path: Path) -> None:
    bad = _doctored("pegasus", tmp_path, "action rkeys_hit(bit<32> idx)",
                    "action rkeys_hit(bit<16> idx)")
    v1 = table_shapes(p4_text(PROGRAMS["pegasus"][1]))
    assert table_shapes(p4_text(bad))["rkeys"] != v1["rkeys"]
    assert v1["rkeys"] == (("keyhash",), ("rkeys_hit(bit<32> idx)",))
