"""target=mininet with the hash protocol: real packets through netkv-switch.

Needs root, mnexec and the built programs (NETKV_NATIVE_DIR); skipped with
the reason otherwise. Each test builds its own small rack and removes it.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from netkv.config.compose import load

pytestmark = pytest.mark.mininet


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "Mininet tests need root"
    if shutil.which("mnexec") is None:
        return "Mininet tests need mnexec (apt-get install mininet)"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet tests need the mininet Python package"
    from netkv.native import NativeBuildMissing, program_path

    try:
        for prog in ("netkv-switch", "kvserver", "kvclient"):
            program_path(prog)
    except NativeBuildMissing as exc:
        return str(exc)
    return None


REASON = _skip_reason()
skip = pytest.mark.skipif(REASON is not None, reason=REASON or "")


def _leftovers(tag: str) -> tuple[list[str], list[str]]:
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = [ln.split(": ")[1].split("@")[0] for ln in links.splitlines() if tag in ln]
    procs = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if tag in cmd:
                procs.append(cmd)
    return names, procs


def _cfg(*overrides: str):
    return load(["target=mininet", "protocol=hash", "keys=20000", "duration=0.5",
                 "topology.timeout_us=0", *overrides])


@skip
def test_low_load_loses_nothing_and_leaves_nothing() -> None:
    from netkv.targets.mininet import MininetTarget

    cfg = _cfg("servers=4", "clients=2", "alpha=1.2", "write_ratio=0.1")
    with MininetTarget(cfg) as target:
        tag = target.state.tag
        res = target.run_point(2000.0, seed=7)
        counters = target.switch_counters()
    assert res.issued > 500
    assert res.completed == res.issued, (res.issued, res.completed, res.timeouts)
    assert res.server_requests.sum() == res.issued
    assert np.isfinite(res.latency_ns["p99"]) and res.latency_ns["p50"] > 0
    assert counters["pipeline"] >= 2 * res.issued
    assert counters["bad_msgs"] == 0 and counters["bad_frames"] == 0
    links, procs = _leftovers(tag)
    assert links == [] and procs == [], (links, procs)


@skip
def test_start_handshake_with_a_million_keys() -> None:
    """The default key space (10^6 keys): every kvclient spends longer building
    its workload than the run lasts; the start handshake (ready -> start time
    on stdin) still gets every client offering load for the whole duration."""
    from netkv.targets.mininet import MininetTarget

    cfg = _cfg("servers=2", "clients=2", "alpha=1.2", "keys=1000000", "duration=0.2",
               "topology.drain_ms=1000")
    assert cfg.target.start_delay_ms <= 50
    with MininetTarget(cfg) as target:
        res = target.run_point(2000.0, seed=3)
    assert res.issued > 250, res.issued  # ~400 expected
    assert res.completed == res.issued
    assert res.timeline["issued"].sum() == res.issued
    # the simulator's columns and meanings (docs/results.md)
    assert list(res.timeline) == ["t_s", "issued", "completed", "lost", "p50_ns", "p99_ns"]
    assert res.timeline["lost"].sum() == res.issued - res.completed
    assert res.timeline["completed"].sum() <= res.completed


@skip
def test_skew_shows_in_server_load() -> None:
    """alpha = 1.2 over 4 servers: hash's busiest server carries well above the mean."""
    from netkv.targets.mininet import MininetTarget

    cfg = _cfg("servers=4", "clients=1", "alpha=1.2", "seed=3")
    with MininetTarget(cfg) as target:
        res = target.run_point(3000.0, seed=11)
    load = res.server_requests
    assert res.completed == res.issued
    assert load.max() / load.mean() > 1.3, load


@skip
def test_faults_injected_by_the_switch() -> None:
    """Loss configured in target.faults drops requests; timeouts account for them."""
    from netkv.targets.mininet import MininetTarget

    cfg = _cfg("servers=2", "clients=1", "target.faults.loss=0.05", "topology.timeout_us=20000")
    with MininetTarget(cfg) as target:
        res = target.run_point(2000.0, seed=5)
        counters = target.switch_counters()
    assert counters["fault_loss"] > 0
    # the point's noise columns: the injected loss shows as the switch's drops
    assert res.noise["switch_dropped"] >= counters["fault_loss"] > 0
    assert res.noise["switch_rx"] >= res.issued and res.noise["switch_malformed"] == 0
    assert 0 < res.noise["servers_rx"] <= res.issued
    assert res.timeouts > 0 and res.completed + res.timeouts + res.dropped >= res.issued
    assert res.completed < res.issued


@skip
def test_switch_driver_roundtrip() -> None:
    """Control socket: tables, registers, multicast groups, faults, CPU packets."""
    from netkv.drivers.base import DriverError
    from netkv.targets.mininet import MininetTarget

    cfg = _cfg("servers=2", "clients=1")
    with MininetTarget(cfg) as target:
        drv = target.driver
        assert drv is not None
        assert "protocol=hash" in drv.ping()
        drv.table_add("node_fwd", [9], [1])
        drv.table_delete("node_fwd", [9])
        with pytest.raises(DriverError):
            drv.table_add("no_such_table", [1], [1])
        drv.reg_write("dropped", 0, 0)
        assert drv.reg_read("dropped", 0) == 0
        with pytest.raises(DriverError):
            drv.reg_read("port_pkts", 1 << 30)
        drv.mcast_set(3, [0, 1])
        assert drv.request("mcast_get 3") == "0,1"
        drv.cpu_sample(1)
        res = target.run_point(500.0, seed=1)
        pkts = drv.cpu_poll(16)
        drv.cpu_sample(0)
        assert res.completed == res.issued
        assert pkts and all(len(p.frame) >= 42 for p in pkts)
        # the sampled frame, sent back through the pipeline, is forwarded again
        before = drv.counters()["pipeline"]
        drv.packet_out(pkts[0].frame)
        assert drv.counters()["pipeline"] >= before + 1


@skip
def test_full_run_twice_writes_the_results_schema(tmp_path, monkeypatch) -> None:
    """The whole `run` path (SLO search, results writer) on target=mininet,
    twice in a row; nothing is left behind."""
    import polars as pl
    from rich.console import Console

    import netkv.runner as runner
    from netkv.mininet.cleanup import STATE_ROOT
    from netkv.targets.mininet import MininetTarget

    monkeypatch.setattr(runner, "make_target", lambda cfg, workloads=None: MininetTarget(cfg))
    cfg = _cfg("servers=4", "clients=1", "alpha=1.2", "duration=0.25", "target.max_rps=8000",
               "slo.max_points=4")
    for i in range(2):
        out = tmp_path / f"run{i}"
        points = runner.execute(cfg, out, ["test"], Console(quiet=True))
        assert not points.is_empty()
        for table in ("points", "servers", "timeline", "histograms"):
            assert (out / f"{table}.parquet").is_file(), table
        servers = pl.read_parquet(out / "servers.parquet")
        assert servers.height >= 4
        noise = pl.read_parquet(out / "points.parquet").filter(pl.col("phase") != "reference")
        assert (noise["switch_rx"] >= noise["issued"]).all() and (noise["servers_rx"] > 0).all()
        assert (noise["wall_s"] > 0).all() and noise["host_load1"].is_not_null().all()
    import json

    def owner(folder: "os.PathLike[str]") -> int:
        try:
            with open(os.path.join(folder, "state.json")) as f:
                return int(json.load(f)["owner"])
        except (OSError, ValueError, KeyError):
            return -1

    # this process's runs only: other runs on the machine may be alive
    live = [p for p in (STATE_ROOT.iterdir() if STATE_ROOT.exists() else [])
            if owner(p) == os.getpid()]
    assert live == [], live


CRASHER = r"""
import sys, time
from netkv.config.compose import load
from netkv.targets.mininet import MininetTarget
t = MininetTarget(load(["target=mininet", "protocol=hash", "servers=2", "clients=1",
                        "keys=2000"]))
print(t.state.tag, flush=True)
time.sleep(60)
"""


@skip
def test_clean_removes_what_a_crashed_run_left() -> None:
    import signal
    import sys

    from netkv.mininet.cleanup import clean

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.Popen([sys.executable, "-c", CRASHER], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": root})
    try:
        tag = p.stdout.readline().strip()
        assert tag.startswith("nk"), tag
        links, procs = _leftovers(tag)
        assert links and procs  # the rack is up
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    removed = clean()
    assert any(r.startswith("process") for r in removed), removed
    assert any(r.startswith("state") for r in removed), removed
    links, procs = _leftovers(tag)
    assert links == [] and procs == [], (links, procs)
    assert clean() == []


def test_kvclient_refuses_to_start_after_its_end() -> None:
    """A kvclient whose start time (here: on stdin) is already past its end
    exits non-zero with one line instead of measuring nothing (no root needed)."""
    import time

    from netkv.native import NativeBuildMissing, program_path

    try:
        prog = str(program_path("kvclient"))
    except NativeBuildMissing as exc:
        pytest.skip(str(exc))
    p = subprocess.Popen([prog, "--protocol", "hash", "--id", "0", "--servers", "1",
                          "--clients", "1", "--keys", "1000", "--rate", "100", "--duration", "0.1",
                          "--port", "0", "--start-at", "stdin"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "ready"
    past = time.clock_gettime_ns(time.CLOCK_MONOTONIC) - 1_000_000_000
    out, err = p.communicate(f"{past}\n", timeout=10)
    assert p.returncode == 1, (p.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "after the end" in lines[0], err
