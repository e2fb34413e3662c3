"""``python -m netkv report``: one self-contained HTML page per run, sweep or
experiment, rendered by a real browser (headless Chromium, Debian's
package; skipped with the reason where it is not installed)."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from netkv.config.compose import load

TINY = ["servers=4", "keys=1000", "duration=0.02", "slo.max_points=4"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed "
                                    "(apt-get install chromium; `just system-deps` does)")
# where the README's screenshot comes from (set to refresh docs/report-fig7.png)
SCREENSHOT = os.environ.get("NETKV_REPORT_SCREENSHOT")


def render(page: Path, shot: Path | None = None) -> tuple[str, list[str]]:
    """The page's DOM after Chromium loaded it, and every console message it
    logged (a script error, a blocked resource)."""
    assert CHROMIUM is not None
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--enable-logging=stderr", "--v=0", "--window-size=1200,2200"]
    dom = subprocess.run([*args, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120)
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    if shot is not None:
        subprocess.run([*args, f"--screenshot={shot}", page.as_uri()], capture_output=True,
                       timeout=120, check=True)
    return dom.stdout, console


def page_problems(dom: str, console: list[str], figures: int, sections: list[str]) -> list[str]:
    """What makes a rendered report incomplete: a missing figure or section,
    anything loaded from elsewhere, a console message."""
    problems = [f"console: {line}" for line in console]
    drawn = re.findall(r'<figure data-figure="[^"]+">\s*<svg', dom)
    if len(drawn) != figures:
        problems.append(f"{len(drawn)} figures drawn, {figures} expected")
    for title in sections:
        if f"<h2>{title}</h2>" not in dom:
            problems.append(f"no section {title}")
    for ref in re.findall(r'<(?:img|script|link|iframe)[^>]*(?:src|href)="([^"#]+)"', dom):
        problems.append(f"loads {ref}")
    if "</html>" not in dom:
        problems.append("page did not finish")
    return problems


def test_a_run_and_a_sweep_get_one_page_with_figures_provenance_and_noise(tmp_path):
    from netkv.report import report
    from netkv.runner import execute

    for i, extra in enumerate([[], ["protocol=pegasus"]]):
        out = tmp_path / f"r{i}"
        execute(load([*TINY, *extra, f"out={out}"]), out, ["test"], Console(file=io.StringIO()))
    for folder in (tmp_path / "r0", tmp_path):
        text = report(folder).read_text()
        assert text.count("<figure") == 1 and "<svg" in text
        for needle in ("Max throughput under SLO", "Noise per point", "host_busy", "build id",
                       "CPU", "libnetkv.so", "load before"):
            assert needle in text, needle
        for fmt in ("svg", "pdf", "png"):
            assert (folder / "report-figures" / f"latency-throughput.{fmt}").stat().st_size > 0
        assert not re.search(r'(?:src|href)="(?!#)', text)  # nothing loaded from elsewhere
    # the sweep's table names the knobs its runs differ in
    assert "<th>protocol.selection</th>" in text and "<td>wrr</td>" in text


def test_an_interrupted_run_names_the_points_it_kept(tmp_path):
    """A run writes its tables when it ends; one interrupted (Ctrl-C) keeps
    its finished points in points.d/ only. Its page said "No finished point
    yet"; it names them and how to resume, alone and in a sweep."""
    from netkv.report import report
    from netkv.runner import execute

    done, stopped = tmp_path / "done", tmp_path / "stopped"
    execute(load([*TINY, f"out={done}"]), done, ["test"], Console(file=io.StringIO()))
    shutil.copytree(done, stopped)
    for table in stopped.glob("*.parquet"):   # as Ctrl-C leaves it: fragments only
        table.unlink()
    kept = len(list((stopped / "points.d").glob("*/point.parquet")))
    text = report(stopped).read_text()
    assert "No finished point yet" not in text
    assert f"{kept} finished point(s)" in text and f"out={stopped}" in text
    sweep = report(tmp_path).read_text()
    assert "Unfinished runs" in sweep and "<code>stopped</code>" in sweep
    assert "Max throughput under SLO" in sweep   # the finished run as before


@pytest.mark.parametrize("job_name", ["alpha=1.2", "workload.trace=traces/a.csv"])
def test_an_interrupted_sweep_job_is_resumed_with_its_sweep(tmp_path, job_name):
    """A sweep's job (its folder below multirun.yaml's, nested when an
    override value holds a "/") resumes with the sweep's out=, not its own:
    a sweep given the job's folder nests below it."""
    from netkv.report import unfinished_runs

    sweep = tmp_path / "sweep"
    job = sweep / job_name
    (job / "points.d" / "reference").mkdir(parents=True)
    (job / "points.d" / "reference" / "point.parquet").write_bytes(b"")
    (job / "config.yaml").write_text("alpha: 1.2\n")
    (sweep / "multirun.yaml").write_text("{}\n")
    text = unfinished_runs([job], sweep)
    assert f"run its sweep again with <code>out={sweep}</code>" in text, text
    assert f"out={job}" not in text


def test_a_missing_directory_is_one_line(tmp_path, capsys):
    from netkv.cli import main

    assert main(["report", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@needs_chromium
def test_the_browser_check_fails_on_an_incomplete_page(tmp_path):
    good = '<figure data-figure="a"><svg width="10" height="10"></svg></figure>'
    cases = {
        "console": f"<html><body><h2>Figure</h2>{good}<script>console.error('x')</script>"
                   "</body></html>",
        "figure": "<html><body><h2>Figure</h2></body></html>",
        "external": f'<html><body><h2>Figure</h2>{good}<img src="http://example.invalid/a.png">'
                    "</body></html>",
    }
    for name, text in cases.items():
        page = tmp_path / f"{name}.html"
        page.write_text(text)
        dom, console = render(page)
        assert page_problems(dom, console, 1, ["Figure"]), name
    page = tmp_path / "good.html"
    page.write_text(f"<html><body><h2>Figure</h2>{good}</body></html>")
    assert page_problems(*render(page), 1, ["Figure"]) == []


@needs_chromium
@pytest.mark.slow
def test_a_pegasus_figures_report_renders_in_headless_chromium(tmp_path):
    """reproduce pegasus/fig12 on a tiny rack writes report.html beside
    checks.md; Chromium draws every figure and section, loads nothing from
    elsewhere and logs nothing to the console."""
    out = tmp_path / "fig12"
    proc = subprocess.run([sys.executable, "-m", "netkv", "reproduce", "pegasus/fig12", *TINY,
                           "--out", str(out), "--jobs", "1"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1, 3), proc.stderr
    page = out / "report.html"
    assert page.is_file() and (out / "checks.md").is_file()
    for fmt in ("png", "svg", "pdf"):
        assert (out / f"plot.{fmt}").stat().st_size > 0
    shot = tmp_path / "report.png"
    dom, console = render(page, shot)
    assert page_problems(dom, console, 1, ["Figure", "Paper vs measured", "Noise",
                                           "Provenance"]) == []
    for series in ("random", "wrr", "random-det", "wrr-det"):
        assert series in dom
    assert shot.stat().st_size > 10_000
    if SCREENSHOT:
        shutil.copy(shot, SCREENSHOT)
