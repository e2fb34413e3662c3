"""Provenance that proves the binary (issue #18): per-file content hashes of
libnetkv and the programs, the build type and compiler, the machine and its
load; a binary older than its C sources refuses to run, in one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from netkv.native import native_dir
from netkv.results import provenance
from netkv.results.provenance import SOURCES, stale

REPO = Path(__file__).resolve().parents[1]
TINY = ["servers=4", "keys=1000", "duration=0.02", "slo.max_points=3"]


def copy_sources(dest: Path) -> Path:
    for name in SOURCES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name)
        else:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def set_mtime(paths: list[Path], when: float) -> None:
    for p in paths:
        os.utime(p, (when, when))


def run(out: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "netkv", "run", *TINY, f"out={out}"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def test_provenance_names_the_binary_and_the_machine():
    build = provenance.build()
    names = {Path(f).name for f in build["files"]}
    assert {"libnetkv.so", "kvserver", "kvclient", "netkv-switch"} <= names
    assert all(len(h) == 32 for h in build["files"].values())
    assert build["type"] not in ("", "unknown") and build["compiler"] not in ("", "unknown")
    info = provenance.hardware()
    assert info["cores"] >= 1 and info["usable_cores"] >= 1 and info["cpu_model"]
    assert len(provenance.load_average()) == 3


def test_an_edited_c_source_makes_the_build_stale(tmp_path):
    """Binaries newer than every source: fresh; one C file edited after
    them: stale, naming the file."""
    root = copy_sources(tmp_path / "src")
    nat = tmp_path / "native"
    shutil.copytree(native_dir(), nat)
    sources = provenance.source_files(root)
    binaries = provenance.native_files(nat)
    set_mtime(sources, 1_000_000_000)
    set_mtime(binaries, 1_100_000_000)
    assert stale(nat, root) is None
    edited = root / "hostapps" / "src" / "hist.c"
    edited.write_text(edited.read_text() + "\n/* edited */\n")
    source, binary = stale(nat, root)
    assert source == edited and binary in binaries


def test_a_run_on_binaries_older_than_their_sources_refuses_in_one_line(tmp_path):
    nat = tmp_path / "native"
    shutil.copytree(native_dir(), nat)
    set_mtime(provenance.native_files(nat), 1_000_000_000)  # built in 2001
    out = tmp_path / "run"
    proc = run(out, {"NETKV_NATIVE_DIR": str(nat)})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "older than its sources" in lines[0]
    assert "rebuild with `cmake --build`" in lines[0]
    assert not out.exists()


def cmake(*args: str) -> None:
    subprocess.run(["cmake", *args], check=True, capture_output=True, timeout=600)


@pytest.mark.slow
def test_a_c_edit_refuses_until_rebuilt_and_the_hash_changes(tmp_path):
    """A real build of a copy of the sources; a run records its hashes; a C
    edit makes the next run refuse in one line; the rebuild runs and its
    provenance names another libnetkv."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake not installed")
    root = copy_sources(tmp_path / "src")
    build = tmp_path / "build"
    cmake("-S", str(root), "-B", str(build), "-DNETKV_TESTS=OFF", "-DCMAKE_BUILD_TYPE=Release")
    cmake("--build", str(build), "-j2")
    env = {"NETKV_NATIVE_DIR": str(build / "hostapps"), "NETKV_SOURCE_DIR": str(root)}

    first = run(tmp_path / "a", env)
    assert first.returncode == 0, first.stderr
    before = json.loads((tmp_path / "a" / "provenance.json").read_text())["build"]
    assert before["native_dir"] == str(build / "hostapps") and before["type"] == "Release"

    edited = root / "hostapps" / "src" / "hist.c"
    edited.write_text(edited.read_text() + "\nint nk_provenance_test_edit = 1;\n")
    refused = run(tmp_path / "b", env)
    assert refused.returncode == 2
    assert refused.stderr.strip().count("\n") == 0
    assert "src/hist.c changed after" in refused.stderr

    cmake("--build", str(build), "-j2")
    again = run(tmp_path / "b", env)
    assert again.returncode == 0, again.stderr
    after = json.loads((tmp_path / "b" / "provenance.json").read_text())["build"]
    assert after["files"]["libnetkv.so"] != before["files"]["libnetkv.so"]
    assert after["native"] != before["native"] and after["id"] != before["id"]


@pytest.mark.parametrize("loss", [0.0, 0.005])
def test_provenance_says_what_auto_knobs_resolved_to(loss, tmp_path):
    """With injected loss the clients resend (timeout 2 x the bound, 3
    times) and Pegasus turns at-most-once on, all from `null` knobs that
    config.yaml keeps as null: nothing said what ran. provenance.json does,
    for a search and for a fixed-load point (runner.execute_at)."""
    from io import StringIO

    from rich.console import Console

    from netkv.config.compose import load
    from netkv.runner import execute, execute_at

    cfg = load(["protocol=pegasus", "servers=4", "keys=20000", "duration=0.02",
                "slo.max_points=3", f"target.faults.loss={loss}"])
    assert cfg.topology.timeout_us is None and cfg.topology.retries is None
    execute(cfg, tmp_path / "search", ["t"], Console(file=StringIO()))
    execute_at(cfg, tmp_path / "fixed", ["t"], Console(file=StringIO()), 100_000.0, 50_000.0)
    for run, bound_us in (("search", None), ("fixed", 50.0)):
        prov = json.loads((tmp_path / run / "provenance.json").read_text())
        assert (";amo=1;" in prov["protocol_params"]) == (loss > 0), prov["protocol_params"]
        [used] = prov["client_retries"]
        assert used["retries"] == (3 if loss else 0)
        assert (used["timeout_us"] > 0) == (loss > 0)
        if bound_us and loss:
            assert used["timeout_us"] == pytest.approx(2 * bound_us)


def test_a_probe_without_an_slo_records_no_infinite_timeout():
    """A saturation probe (execute_at with slo_ns inf) under injected loss
    resolved the clients' timeout to inf: provenance.json held `Infinity`,
    which is not JSON. Its clients never resend; it says so."""
    from netkv import retries
    from netkv.config.compose import load
    from netkv.runner import client_retries_used

    cfg = load(["protocol=hash", "target.faults.loss=0.01"])
    used = client_retries_used(retries.resolve(cfg, float("inf")).topology)
    assert used == {"timeout_us": None, "retries": 0}
    json.dumps(used, allow_nan=False)
    assert client_retries_used(retries.resolve(cfg, 50_000.0).topology) == \
        {"timeout_us": 100.0, "retries": 3}


def test_packets_dropped_is_null_without_switch_counters():
    """On BMv2 (no switch counters) the servers' drops alone looked like the
    rack's whole count."""
    from netkv.results.noise import server_noise, switch_noise
    from netkv.targets.mininet import packets_dropped

    servers = server_noise([{"rx": 5, "dropped": 2}], [{}])
    assert packets_dropped({**switch_noise({}, {}), **servers}) is None
    assert packets_dropped({"switch_dropped": 3, **servers}) == 3 + servers["servers_dropped"]
