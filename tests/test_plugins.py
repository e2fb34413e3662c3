"""The three plug-in axes (docs/architecture.md): protocols, switch back-ends,
placements. Targets, drivers and the runner never name a protocol; no import
circle; each protocol is exactly the files docs/adding-a-protocol.md lists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from netkv import protocols
from netkv.wire.codec import Proto

ROOT = Path(__file__).resolve().parents[1]

#: where no protocol may be named (issue #20)
PYTHON_PLACES = ("netkv/targets", "netkv/drivers", "netkv/mininet", "netkv/sim",
                 "netkv/results", "netkv/backends", "netkv/runner.py", "netkv/slo.py",
                 "netkv/cli.py")
C_PLACES = ("hostapps/apps", "hostapps/src/io", "hostapps/src/sim")


def protocol_names() -> set[str]:
    """Every protocol netkv has or is getting: the registry's and the wire formats'."""
    return set(protocols.names()) | {p.name.lower() for p in Proto}


def _files(places: tuple[str, ...], root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    out: list[Path] = []
    for place in places:
        path = root / place
        out += [path] if path.is_file() else sorted(
            p for p in path.rglob("*") if p.suffix in suffixes)
    return out


HELP_KEYWORDS = ("help", "description", "epilog", "usage")


def _docstring_nodes(tree: ast.AST) -> set[int]:
    """Docstrings and command-line help (examples may name a protocol)."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
        if isinstance(node, ast.keyword) and node.arg in HELP_KEYWORDS:
            ids |= {id(n) for n in ast.walk(node.value)}
    return ids


def python_mentions(source: str, names: set[str]) -> list[str]:
    """Protocol names in code: a string literal that is a name or holds one
    as a word (docstrings and comments may explain), or a wire-enum member."""
    tree = ast.parse(source)
    docs = _docstring_nodes(tree)
    members = {p.name for p in Proto}
    word = re.compile(r"\b(" + "|".join(sorted(names)) + r")\b", re.IGNORECASE)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = node.value
            # "hash" is also a plain word ("a content hash"): only as the whole literal
            hit = text.strip().lower() in names or any(
                m.group(1).lower() != "hash" for m in word.finditer(text))
            if hit:
                found.append(f"line {node.lineno}: string {text!r}")
        elif isinstance(node, ast.Attribute) and node.attr in members and isinstance(
                node.value, ast.Name) and node.value.id == "Proto":
            found.append(f"line {node.lineno}: Proto.{node.attr}")
    return found


def _strip_c_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def c_mentions(source: str, names: set[str]) -> list[str]:
    """Protocol names in C code: string literals, ``NK_PROTO_<X>`` and the
    wire header's per-protocol constants (``NK_NETMC_PORT_BASE``, ...)."""
    code = _strip_c_comments(source)
    upper = "|".join(sorted(n.upper() for n in names))
    ident = re.compile(r"\bNK_(PROTO_(" + upper + r")|(" + upper + r")_\w+)\b")
    string = re.compile(r'"([^"\\\n]|\\.)*"')
    found = []
    for lineno, line in enumerate(code.splitlines(), 1):
        for m in ident.finditer(line):
            found.append(f"line {lineno}: {m.group(0)}")
        for m in string.finditer(line):
            lit = m.group(0)[1:-1].lower()
            if lit in names or any(re.search(rf"\b{n}\b", lit) for n in names if n != "hash"):
                found.append(f"line {lineno}: string {m.group(0)}")
    return found


def mentions_under(root: Path) -> dict[str, list[str]]:
    names = protocol_names()
    out: dict[str, list[str]] = {}
    for path in _files(PYTHON_PLACES, root, (".py",)):
        hits = python_mentions(path.read_text(), names)
        if hits:
            out[str(path.relative_to(root))] = hits
    for path in _files(C_PLACES, root, (".c", ".h")):
        hits = c_mentions(path.read_text(), names)
        if hits:
            out[str(path.relative_to(root))] = hits
    return out


def test_targets_drivers_and_runner_name_no_protocol() -> None:
    found = mentions_under(ROOT)
    assert not found, "protocol named outside its own files:\n" + "\n".join(
        f"  {f}: {h}" for f, hits in found.items() for h in hits)


def test_the_name_check_fails_on_each_kind_of_mention() -> None:
    names = protocol_names()
    assert python_mentions('x = "pegasus"\n', names)
    assert python_mentions('mode = "all" if p == "hash" else "home"\n', names)
    assert python_mentions('raise E(f"no netcache here {x}")\n', names)
    assert python_mentions("p = Proto.NETMC\n", names)
    assert not python_mentions('"""Pegasus, in a docstring."""\nh = "a content hash"\n', names)
    assert not python_mentions('p.add_argument("x", help="e.g. pegasus/fig7")\n', names)
    assert c_mentions("if (s->ops->proto == NK_PROTO_NETMC) return 1;\n", names)
    assert c_mentions("return port == NK_NETMC_PORT_BASE;\n", names)
    assert c_mentions('if (!strcmp(name, "pegasus")) x();\n', names)
    assert not c_mentions("/* Pegasus' NK_PROTO_PEGASUS in a comment */\nint x;\n", names)


# --- no import circle ---------------------------------------------------------------------


def _modules() -> dict[str, Path]:
    mods = {}
    for path in (ROOT / "netkv").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def import_graph() -> dict[str, set[str]]:
    """netkv module -> the netkv modules it imports (at any depth of the code,
    lazily or not; only ``if TYPE_CHECKING:`` blocks are left out). Importing
    a.b.c also runs a.b and a: package edges count too."""
    mods = _modules()

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    def with_parents(name: str) -> set[str]:
        out = set()
        while name:
            if name in mods:
                out.add(name)
            name = name.rpartition(".")[0]
        return out

    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text())
        skip = {id(n) for node in ast.walk(tree)
                if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                for n in ast.walk(node)}
        deps: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        pkg = pkg.rpartition(".")[0]
                    base = f"{pkg}.{base}" if base else pkg
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            for t in targets:
                found = owner(t)
                if found:
                    deps |= with_parents(found)
        deps -= with_parents(mod)  # a module's own packages are already running
        graph[mod] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_in_netkv() -> None:
    found = cycles(import_graph())
    assert not found, f"import circles: {found}"


def test_the_circle_check_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


# --- a protocol is its own files plus registry lines ------------------------------------------


def adding_a_protocol_lists() -> tuple[list[str], list[tuple[str, str]]]:
    """The files a protocol adds and the registry lines it edits, as
    docs/adding-a-protocol.md's two tables list them."""
    text = (ROOT / "docs/adding-a-protocol.md").read_text()
    files = re.findall(r"^\| file \| `([^`]+)` \|", text, re.M)
    lines = re.findall(r"^\| line \| `([^`]+)` \| `([^`]+)` \|", text, re.M)
    return files, lines


def _expand(pattern: str, name: str) -> str:
    wire = protocols.lookup(name).wire.name.lower()
    return pattern.replace("<name>", name).replace("<wire>", wire)


@pytest.mark.parametrize("name", ["hash", "pegasus", "netcache"])
def test_each_protocol_is_the_documented_files(name: str) -> None:
    files, lines = adding_a_protocol_lists()
    assert len(files) >= 6 and len(lines) >= 4, "the lists in docs/adding-a-protocol.md"
    missing = [f for f in (_expand(p, name) for p in files) if not (ROOT / f).exists()]
    assert not missing, f"{name}: documented files missing: {missing}"
    for where, pattern in lines:
        text = (ROOT / where).read_text()
        line = _expand(pattern, name)
        assert line in text, f"{name}: no registry line {line!r} in {where}"


def test_the_file_list_check_fails_for_an_unknown_protocol() -> None:
    files, _ = adding_a_protocol_lists()
    assert any(not (ROOT / p.replace("<name>", "nosuch").replace("<wire>", "nosuch")).exists()
               for p in files)


def test_plugins_agree_with_their_c_pipelines() -> None:
    """A protocol's wire format and UDP port, as its Python plug-in and its
    C pipeline (what netkv-switch classifies by) each state them."""
    from netkv.pipeline import _load

    ffi, lib = _load()
    for name in protocols.names():
        ops = lib.nk_pipeline_find(name.encode())
        assert ops != ffi.NULL, name
        plug = protocols.lookup(name)
        assert (ops.proto, ops.udp_port) == (int(plug.wire), plug.udp_port), name
        assert ops.udp_ports >= 1


def test_plugins_agree_with_their_registry_names() -> None:
    for name in protocols.names():
        plug = protocols.lookup(name)
        assert plug.name == name
        assert plug.config.model_fields["name"].annotation.__args__ == (name,)
        assert (ROOT / "conf/protocol" / f"{name}.yaml").is_file()
        assert plug.p4 is None or (ROOT / "p4src" / plug.p4.source).is_file()



# --- back-ends and the reference protocol are config values ---------------------------------


@pytest.mark.parametrize("target", ["sim", "mininet"])
def test_a_switch_backend_that_does_not_exist_is_one_line_on_every_target(
        target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from netkv.cli import main

    out = tmp_path / "run"
    code = main(["run", f"target={target}", "target.switch=tofino", f"out={out}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "target.switch = 'tofino'" in err and "allowed: netkv" in err
    assert not out.exists()  # refused before anything was written


def test_bmv2_is_not_a_simulator_backend(capsys: pytest.CaptureFixture[str]) -> None:
    from netkv.cli import main

    assert main(["run", "target=sim", "target.switch=bmv2"]) == 2
    assert "allowed: netkv" in capsys.readouterr().err


def test_slo_reference_is_a_protocol_or_self(capsys: pytest.CaptureFixture[str]) -> None:
    from netkv.cli import main
    from netkv.config.compose import load
    from netkv.runner import reference_config

    assert main(["run", "slo.reference=nosuch"]) == 2
    err = capsys.readouterr().err
    assert "slo.reference = 'nosuch'" in err and "self" in err and "hash" in err
    cfg = load(["protocol=pegasus", "protocol.virtual_nodes=8", "slo.reference=netcache"])
    ref = reference_config(cfg)
    assert ref.protocol.name == "netcache" and ref.protocol.virtual_nodes == 8
    assert ref.workload.kind == "uniform" and ref.workload.write_ratio == 0.0
    assert reference_config(load(["protocol=pegasus"])).protocol.name == "hash"


def _wire_carries_client_id(wire: "Proto") -> bool:
    """Whether a wire format's header has CLIENT_ID: every golden vector,
    decoded, given another client id and re-encoded, decodes with it."""
    import dataclasses
    import json

    from netkv.wire.codec import WireError, decode, encode

    name = {Proto.PLAIN: "plain"}.get(wire, wire.name.lower())
    vectors = json.loads((Path(__file__).parent / "vectors" / f"{name}.json").read_text())
    seen = []
    for v in vectors:
        try:
            msg = decode(wire, bytes.fromhex(v["hex"]))
        except WireError:
            continue  # a vector of what must be refused
        back = decode(wire, encode(dataclasses.replace(msg, client_id=0x1234)))
        seen.append(back.client_id == 0x1234)
    assert seen and (all(seen) or not any(seen)), f"{name}: CLIENT_ID carried by some ops only"
    return all(seen)


@pytest.mark.parametrize("name", protocols.names())
def test_kvclient_matches_client_ids_only_where_the_wire_has_them(name: str) -> None:
    """kvclient drops a reply whose CLIENT_ID is not its own as forged; where
    the header has no CLIENT_ID every reply decodes as client 0, so clients
    1.. would drop all of theirs (KVSwitch on Mininet with two clients
    completed 51 %): the host logic's no_client_id must follow the wire."""
    from netkv.sim import native

    _, lib = native.load()
    wire = protocols.lookup(name).wire
    assert bool(lib.nk_host_checks_client_id(name.encode())) == _wire_carries_client_id(wire)
