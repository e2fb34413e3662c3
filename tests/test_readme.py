"""The README's set-up commands are the ones CI runs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def setup_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(.+?)\n```", section)


def test_readme_has_exactly_two_setup_commands():
    commands = setup_commands()
    assert len(commands) == 2
    assert "just run" in commands[0] and commands[1].endswith("just test")


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert setup_commands()[1] in ci


def test_readme_counts_every_paper_claim():
    """The README quotes how many of the Pegasus figures' claims hold as the
    paper states them; the total it quotes is every check of those figures."""
    from netkv.experiments.spec import available, load_experiment

    total = sum(len(load_experiment(name).checks) for name in available()
                if name.startswith("pegasus/"))
    text = " ".join((ROOT / "README.md").read_text().split())
    match = re.search(r"Of the (\d+) claims of Figs\. 7-13, (\d+) hold as the paper states "
                      r"them and (\d+) differ", text)
    assert match, "the README's verdict count is missing"
    claims, holds, differs = (int(g) for g in match.groups())
    assert claims == total and holds + differs == total


def _just() -> str | None:
    # the README installs rust-just into .venv, not on PATH
    beside = Path(sys.executable).parent / "just"
    return str(beside) if beside.is_file() else shutil.which("just")


def _stub(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _fresh_clone(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """The Justfile in ``tmp_path`` with a stub .venv/bin/python that logs
    each call (one line, each argument as it arrived, between bars) and
    stubs of the system tools set-up asks: the environment and the log."""
    shutil.copy(ROOT / "Justfile", tmp_path / "Justfile")
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    log = tmp_path / "python.log"
    # a fresh clone: netkv is not installed, so check_fresh fails and set-up runs
    _stub(venv_bin / "python",
          f'printf "|%s" "$@" >> {log}; echo "|" >> {log}\ncase "$1" in -c) exit 1;; esac')
    fake_bin = tmp_path / "bin"     # the system tools set-up asks, all present
    fake_bin.mkdir()
    _stub(fake_bin / "dpkg-query", "exit 0")
    _stub(fake_bin / "go", "exit 0")
    (tmp_path / "tools" / "porcupine").mkdir(parents=True)
    return {"PATH": f"{fake_bin}:/usr/bin:/bin", "HOME": str(tmp_path)}, log


@pytest.mark.skipif(_just() is None, reason="rust-just not installed (the README's pip install)")
def test_readme_run_command_works_with_just_only_in_the_venv(tmp_path):
    """The README's first command runs `.venv/bin/just run ...` on a fresh
    clone: `just` is not on PATH, so the recipes must call the `just` that
    runs them (set-up, then the run; `just` alone lists the recipes)."""
    just = _just()
    assert just is not None
    env, log = _fresh_clone(tmp_path)
    for args in (["run", "protocol=pegasus", "alpha=1.2"], []):
        proc = subprocess.run([just, *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
    assert "|-m|netkv|run|protocol=pegasus|alpha=1.2|" in log.read_text()
    assert "|-m|pip|install|-q|-e|.[dev]|" in log.read_text()
    # a value with spaces (a value-size mix, docs/configuration.md) stays one
    # argument: `just run` split it at its spaces; so did `just test-py -k`
    mix = "workload.value_size=[{size: 64, weight: 1}, {size: 1024, weight: 1}]"
    for args, logged in ((["run", "--cfg", "job", mix], f"|-m|netkv|run|--cfg|job|{mix}|"),
                         (["test-py", "-k", "a or b"], "|-m|pytest|-q|-k|a or b|")):
        proc = subprocess.run([just, *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0 and logged in log.read_text(), (proc.stderr, logged)


@pytest.mark.skipif(_just() is None, reason="rust-just not installed (the README's pip install)")
def test_bench_recipes_pass_their_options_on(tmp_path):
    """`just bench-sim --no-save` measures without rewriting
    benchmarks/bench-sim.last.json, as the script's option says: the bench
    recipes took no arguments, so a recipe run always rewrote it."""
    just = _just()
    assert just is not None
    env, log = _fresh_clone(tmp_path)
    for args, logged in ((["bench-sim", "--no-save"], "|benchmarks/bench_sim.py|--no-save|"),
                         (["bench-emu", "--rounds", "1"], "|benchmarks/bench_emu.py|--rounds|1|"),
                         (["bench-cli", "--runs", "2"], "|benchmarks/bench_cli.py|--runs|2|")):
        proc = subprocess.run([just, *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0 and logged in log.read_text(), (proc.stderr, logged)


@pytest.mark.skipif(_just() is None, reason="rust-just not installed (the README's pip install)")
def test_just_list_says_what_run_does():
    """`just --list` shows the comment line just above a recipe: `run`'s was
    its note on positional arguments, not what it does."""
    just = _just()
    assert just is not None
    listing = subprocess.run([just, "--list", "--justfile", str(ROOT / "Justfile")],
                             capture_output=True, text=True, check=True).stdout
    line = next(x for x in listing.splitlines() if x.strip().startswith("run "))
    assert "# Run an experiment" in line, line
