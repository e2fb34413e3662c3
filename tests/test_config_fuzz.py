"""Config fuzzing: any overrides either validate or are one line and exit 2.

Hypothesis draws group choices and overrides over every key of every group
(the keys of each composed default config, so a new key is fuzzed as soon as
it exists), with valid and invalid values of every type: extreme and
boundary integers, NaN/inf/huge floats, odd strings, interpolations, lists,
mappings, paths that are files, below files or missing, plus misspelled keys
and malformed override syntax. Two layers:

* the schema (``NETKV_FUZZ_EXAMPLES``, default 2000): each drawn value is
  parsed by Hydra's override parser, set into the composed config of the
  drawn group choices and validated, then checked for the target
  (``check_supported``); a config that validates for the simulator must also
  pass the C engine's set-up (``nk_sim_new``), so the schema and the C side
  agree on every bound. Any exception other than a ``ConfigError`` fails.
* the command line (``NETKV_FUZZ_CLI_EXAMPLES``, default 200; a Hydra
  compose costs ~80 ms): ``python -m netkv run`` (also ``--cfg job`` and
  ``-m`` sweeps) in-process up to the point where it would start running:
  exit code 0 or 2, never an exception; on 2 exactly one stderr line
  ``netkv: ...``; nothing written (the directory tree is unchanged).
"""

from __future__ import annotations

import contextlib
import io
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

import netkv.cli as cli
from netkv.config.compose import (GROUPS, ConfigError, compose_raw, group_options, load,
                                  to_container, validate)
from netkv.runner import check_supported

EXAMPLES = int(os.environ.get("NETKV_FUZZ_EXAMPLES", "2000"))
CLI_EXAMPLES = int(os.environ.get("NETKV_FUZZ_CLI_EXAMPLES", "200"))


def fuzz(n: int) -> settings:
    # CI: the same draws every run; NETKV_FUZZ_RANDOM=1 explores new ones
    return settings(max_examples=n, deadline=None, database=None,
                    derandomize=os.environ.get("NETKV_FUZZ_RANDOM") != "1",
                    suppress_health_check=list(HealthCheck))
SHORTCUTS = ("name", "alpha", "write_ratio", "servers", "clients", "seed", "duration", "keys",
             "record_history", "out")


def _leaves(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict) and node:
        out: list[str] = []
        for k, v in node.items():
            out += _leaves(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    return [prefix]


@cache
def composed(choices: tuple[str, ...]) -> DictConfig:
    return compose_raw(list(choices))


@cache
def keys_of(choices: tuple[str, ...]) -> tuple[str, ...]:
    """Every leaf key of the config composed from these group choices."""
    data = to_container(composed(choices))
    groups = [k for g in GROUPS for k in _leaves(data[g], g)]
    return tuple(sorted(set(groups) | set(SHORTCUTS)))


# --- values ------------------------------------------------------------------------

INTS = st.one_of(
    st.integers(-3, 70),
    st.sampled_from([0, 1, 2, 15, 16, 31, 32, 33, 64, 65, 128, 255, 256, 257, 1024, 1025,
                     1896, 1897, 2006, 65_535, 65_536, 1 << 20, (1 << 20) + 1, 1 << 27,
                     (1 << 27) + 1, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 32, 1 << 63,
                     (1 << 64) + 1, -(1 << 63), 10**30, 10**400]),
)
FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(min_value=-2.0, max_value=2.0).map(repr),
    st.sampled_from(["1e400", "-1e400", "1e-400", "1e30", "3601", "3600", "1e12", "1e-320",
                     "0.0", "-0.0", ".5", "5.", "1_000", "0x10", "nan", "inf", "-inf", "NaN",
                     "+inf", "99.999", "100", "100.0", "0.001"]),
)
ODD_STRINGS = st.sampled_from([
    "''", "' '", "a/b", "..", ".", "???", "${alpha}", "${nope}", "${oc.env:HOME}", "[1", "{a:1",
    "null", "~", "true", "false", "yes", "é", "'a b'", "%", "-", "--", "a=b", "'\\0'", "\\",
    "'$(reboot)'", "'*'", "x" * 300, "tofino", "bmv2", "cold", "prewarmed", "all", "by_key",
])
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
LISTS = st.sampled_from([
    "[]", "[1,2]", "[[1]]", "[{size:64,weight:1}]", "[{size:64,weight:0.1},{size:1024,weight:0.9}]",
    "[{size:-1,weight:1}]", "[{size:64,weight:nan}]", "[{size:64}]", "[{server:0,at_s:0.01}]",
    "[{server:99,at_s:0.01}]", "[{server:0,at_s:inf}]", "[{server:0,at_s:0.01,restart_s:0.02}]",
    "{}", "{a:1}", "{size:1}", "[" + ",".join(["{size:1,weight:1}"] * 17) + "]",
])


def paths(tmp: Path) -> st.SearchStrategy[str]:
    return st.sampled_from([
        str(tmp / "a-file"), str(tmp / "a-file" / "below"), str(tmp / "missing" / "deep"),
        str(tmp / "trace.txt"), "/etc/passwd", "/proc/netkv-fuzz", "/", "relative/dir",
        str(tmp / "old-run"),
    ])


def values(tmp: Path) -> st.SearchStrategy[str]:
    return st.one_of(INTS.map(str), FLOATS, ODD_STRINGS, TEXT, LISTS, paths(tmp),
                     st.sampled_from(["true", "false", "null"]))


def overrides(tmp: Path) -> st.SearchStrategy[list[str]]:
    @st.composite
    def draw(d: st.DrawFn) -> list[str]:
        choices = []
        for group in ("protocol", "target", "workload", "slo"):
            if d(st.integers(0, 3)) == 0:
                continue
            opts = group_options(group)
            choice = d(st.one_of(st.sampled_from(opts), st.sampled_from(opts),
                                 st.sampled_from(["foo", "5", "''", "[hash]"])))
            choices.append(f"{group}={choice}")
        valid = [c for c in choices if c.split("=", 1)[1] in group_options(c.split("=")[0])]
        keys = keys_of(tuple(valid))
        out = list(choices)
        for _ in range(d(st.integers(0, 4))):
            key = d(st.one_of(st.sampled_from(keys), st.sampled_from(keys),
                              st.sampled_from(keys).map(lambda k: k + "x"),
                              st.sampled_from(["alpah", "protocol.nope", "hydra.run.dir",
                                               "target.faults.nope", "topology.server"])))
            value = d(values(tmp))
            form = d(st.integers(0, 19))
            if form == 0:
                out.append(f"+{key}={value}")
            elif form == 1:
                out.append(f"~{key}")
            elif form == 2:
                out.append(key)
            else:
                out.append(f"{key}={value}")
        return out

    return draw()


# --- the property ------------------------------------------------------------------


def snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def call(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def fuzz_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "a-file").write_text("not a directory\n")
    (tmp_path / "trace.txt").write_text("R 1\nW 2\n3\n")
    (tmp_path / "old-run").mkdir()
    (tmp_path / "old-run" / "config.yaml").write_text("name: another run\n")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    launched: list[list[str]] = []
    monkeypatch.setattr(cli, "launch", lambda o, m, p: launched.append(list(o)) or 0)
    # a run that would start claims its default run directory just before
    # launch (mocked): what validation alone writes must be nothing
    monkeypatch.setattr(cli, "claim_out", lambda o, m: o)
    return tmp_path


def check(argv: list[str], root: Path) -> None:
    before = snapshot(root)
    code, out, err = call(argv)
    assert "Traceback" not in err, (argv, err)
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("netkv: "), (argv, err)
    else:
        assert err == "", (argv, err)
    assert snapshot(root) == before, (argv, snapshot(root) - before)


@st.composite
def schema_draw(d: st.DrawFn, tmp: Path) -> tuple[tuple[str, ...], list[tuple[str, str]]]:
    # every group named (an omitted one is its default): 48 compositions, each cached
    choices = tuple(f"{g}={d(st.sampled_from(group_options(g)))}"
                    for g in ("protocol", "target", "workload", "slo"))
    keys = keys_of(choices)
    pairs = [(d(st.sampled_from(keys)), d(values(tmp))) for _ in range(d(st.integers(1, 4)))]
    return choices, pairs


def sim_engine_accepts(cfg: Any) -> None:
    """The C engine's set-up accepts a config the schema accepted."""
    from netkv.sim.engine import SimEngine, Workload

    if cfg.target.name != "sim":
        return
    if cfg.workload.keys > 5_000:  # a large key space only costs memory here
        data = cfg.model_dump(mode="json")
        data["keys"] = data["workload"]["keys"] = 5_000
        data["workload"]["dynamics"]["hot_pool"] = min(data["workload"]["dynamics"]["hot_pool"],
                                                       5_000)
        try:
            cfg = validate(data)
        except ConfigError:
            return
    with Workload.from_config(cfg) as workload:
        SimEngine(cfg, workload, offered_rps=1.0, seed=cfg.seed).close()


def test_fuzzed_values_validate_or_are_config_errors(fuzz_dir: Path) -> None:
    parser = OverridesParser.create()

    @fuzz(EXAMPLES)
    @given(schema_draw(fuzz_dir))
    def prop(draw: tuple[tuple[str, ...], list[tuple[str, str]]]) -> None:
        choices, pairs = draw
        cfg = composed(choices).copy()
        for key, text in pairs:
            try:
                value = parser.parse_override(f"{key}={text}").value()
                OmegaConf.update(cfg, key, value, merge=False)
            except Exception:  # noqa: BLE001 - the CLI layer fuzzes Hydra's parser
                return
        try:
            data = to_container(cfg)
            run = validate(data)
            check_supported(run)
        except ConfigError as exc:
            assert len(str(exc).splitlines()) == 1, str(exc)
            return
        sim_engine_accepts(run)

    prop()


@pytest.mark.slow
def test_fuzzed_overrides_validate_or_fail_in_one_line(fuzz_dir: Path) -> None:
    @fuzz(CLI_EXAMPLES)
    @given(overrides(fuzz_dir), st.sampled_from(["run", "run", "run", "cfg", "sweep"]))
    def prop(ov: list[str], mode: str) -> None:
        if mode == "cfg":
            check(["run", "--cfg", "job", *ov], fuzz_dir)
        elif mode == "sweep":
            check(["run", "-m", "seed=1,2", *ov], fuzz_dir)
        else:
            check(["run", *ov], fuzz_dir)

    prop()


def test_fuzzed_reproduce_arguments_fail_in_one_line(fuzz_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``reproduce``: bad --jobs, --out, experiment names and extra overrides."""
    import netkv.experiments.reproduce as rep
    import netkv.experiments.timeline as tl  # before the patch: it binds run_cell at import

    ran: list[str] = []
    for module in (rep, tl):
        monkeypatch.setattr(module, "run_cell", lambda *a: ran.append("cell") or {})

    @fuzz(30)
    @given(st.sampled_from(["pegasus/fig9", "pegasus/nope", "../x", ""]),
           st.sampled_from(["0", "-1", "2", "x", "1e3", "300"]),
           st.one_of(st.none(), paths(fuzz_dir)),
           st.lists(st.sampled_from(["alpha=-1", "keys=1e12", "duration=inf", "alpha=1e400",
                                     "name=a/b", "protocol=foo"]), min_size=1, max_size=2))
    def prop(name: str, jobs: str, out: str | None, extra: list[str]) -> None:
        argv = ["reproduce", name, *extra, "--jobs", jobs, *(["--out", out] if out else [])]
        before = snapshot(fuzz_dir)
        code, _, err = call(argv)
        assert code == 2, (argv, code, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("netkv: "), (argv, err)
        assert snapshot(fuzz_dir) == before
        assert not ran

    prop()


ISSUE_VALUES = [
    # the first paragraph of issue #16, each refused with one line and exit 2
    ["keys=1000000000000"], ["out=/etc/passwd"], ["duration=1e30"], ["workload=trace"],
    ["alpha=1e400"], ["name=a/b"], ["target.faults.loss=nan"], ["target=mininet",
                                                                 "workload.value_size=1897"],
    ["out="], ["clients=2000"], ["alpha=inf"], ["topology.timeline_ms=0.000001",
                                                "duration=3600"],
]


@pytest.mark.parametrize("overrides", ISSUE_VALUES, ids=[" ".join(o) for o in ISSUE_VALUES])
def test_issue_values_are_refused_before_anything_is_written(overrides: list[str],
                                                              fuzz_dir: Path) -> None:
    before = snapshot(fuzz_dir)
    code, _, err = call(["run", *overrides])
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("netkv: "), err
    assert snapshot(fuzz_dir) == before


def test_reproduce_jobs_zero_is_refused(fuzz_dir: Path) -> None:
    code, _, err = call(["reproduce", "pegasus/fig9", "--jobs", "0"])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--jobs" in err


def test_the_property_fails_on_a_traceback(fuzz_dir: Path, monkeypatch) -> None:
    """The check itself can fail: a validator that raises escapes as an exception."""
    import netkv.cli

    def broken(overrides: list[str], multirun: bool) -> None:
        raise OverflowError("integer does not fit 'uint32_t'")

    monkeypatch.setattr(netkv.cli, "validate_all", broken)
    with pytest.raises(OverflowError):
        check(["run", "alpha=1"], fuzz_dir)

