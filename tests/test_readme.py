"""The README's set-up commands are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

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
