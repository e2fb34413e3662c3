"""capture=true on Mininet (real packets through netkv-switch): per-port and
per-host captures, `netkv trace` accounts for every completed request of the
dataset, and the simulator's capture of the same config takes the same
per-request hop sequences. Needs root and Mininet (skipped otherwise)."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console
from test_mininet_hash import REASON

from netkv.config.compose import load
from netkv.runner import execute_at
from netkv.trace import Flow, flows_frame, role_signature, trace

pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(REASON is not None, reason=REASON or "")]

RATE = 500.0


def _overrides(proto: str, target: str) -> list[str]:
    return [f"target={target}", f"protocol={proto}", "keys=2000", "duration=1", "servers=4",
            "clients=2", "alpha=1.2", "write_ratio=0.2", "topology.timeout_us=0",
            "capture=true", "seed=3"]


def _run(tmp: Path, proto: str, target: str) -> tuple[Path, pl.DataFrame]:
    out = tmp / f"{proto}-{target}"
    cfg = load(_overrides(proto, target))
    return out, execute_at(cfg, out, ["test"], Console(file=io.StringIO()), RATE, 1e9)


@pytest.fixture(scope="module", params=["hash", "pegasus"])
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    tmp = tmp_path_factory.mktemp(request.param)
    return request.param, _run(tmp, request.param, "mininet"), _run(tmp, request.param, "sim")


def test_every_port_and_host_is_captured_and_every_request_accounted_for(runs) -> None:  # noqa: ANN001
    proto, (out, points), _ = runs
    folder = next(out.glob("capture/*"))
    names = {p.name for p in folder.glob("*.pcap")}
    want = {f"switch-p{i}.pcap" for i in range(6)} | {"switch-cpu.pcap"}
    want |= {f"host-s{i}.pcap" for i in range(4)} | {"host-c0.pcap", "host-c1.pcap"}
    assert names == want
    summary = json.loads((folder / "capture.json").read_text())
    assert summary["missed"] == 0 and summary["packets"] > 0
    assert summary["busy_s"] > 0
    t = trace(out)
    df = flows_frame(t.rows)
    row = points.row(0, named=True)
    assert row["completed"] > 0.9 * RATE
    assert df.height == row["issued"], proto
    assert int(df["completed"].sum()) == row["completed"], proto
    # the hosts' captures saw the same requests leave and their replies arrive
    flows = next(iter(t.flows.values()))
    for r in df.filter(pl.col("completed")).iter_rows(named=True):
        seen = {(f.where, f.inbound) for f in flows[(r["client"], r["req_id"])].frames}
        host = f"host:c{r['client'] - 4}"
        assert {(host, False), (host, True)} <= seen, r


def _shapes(flows: dict[tuple[int, int], Flow], op: str | None) -> Counter:
    """Role signatures of the completed flows (CPU copies, which the
    controller samples by wall or simulated time, left out)."""
    got: Counter = Counter()
    for fl in flows.values():
        sig = tuple(h for h in role_signature(fl) if h[0] != "cpu")
        done = sig and sig[-1][:2] == ("client", "out") and sig[-1][2].endswith("REPLY")
        if done and (op is None or sig[0][2] == op):
            got[sig] += 1
    return got


def test_sim_and_mininet_take_the_same_hop_sequences(runs) -> None:  # noqa: ANN001
    proto, (real_out, _), (sim_out, _) = runs
    real = trace(real_out).flows
    sim = trace(sim_out).flows
    assert len(real) == len(sim) == 1
    # hash: every request; Pegasus: reads (a write's fan-out follows the
    # controller's epochs, which tick in wall time on Mininet)
    op = None if proto == "hash" else "READ"
    real_shapes = _shapes(next(iter(real.values())), op)
    sim_shapes = _shapes(next(iter(sim.values())), op)
    assert set(real_shapes) == set(sim_shapes), (real_shapes, sim_shapes)
    common = {("client", "in", o) for o in ("READ", "WRITE")}
    assert all(s[0] in common for s in real_shapes)
