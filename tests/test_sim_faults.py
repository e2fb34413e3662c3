"""Fault injection, crashes and timeouts in the simulator."""

from __future__ import annotations

import pytest

from netkv.config.compose import load
from netkv.native import NativeBuildMissing, library_path

try:
    library_path()
except NativeBuildMissing as exc:  # pragma: no cover - depends on the build
    pytest.skip(f"libnetkv not built: {exc}", allow_module_level=True)

from netkv.targets.sim import SimTarget

RATE = 400_000  # well below saturation at alpha 0.99 (busiest server ~45% busy)
BASE = ["servers=16", "keys=100000", "alpha=0.99", "duration=0.5"]


def run(*overrides: str, seed: int = 1):
    with SimTarget(load([*BASE, *overrides])) as target:
        return target.run_point(RATE, seed)


def test_no_faults_complete_everything() -> None:
    r = run()
    assert r.issued > 150_000
    assert r.completed == r.issued and r.dropped == 0 and r.timeouts == 0
    assert r.packets_dropped == 0 and r.completion == 1.0


@pytest.mark.parametrize("links,hops", [("all", 4), ("clients", 2), ("servers", 2)])
def test_loss_lowers_completion_accordingly(links: str, hops: int) -> None:
    # loss applies to every traversal of a chosen link; a request and its
    # reply cross 4 links (2 client-side, 2 server-side)
    r = run("target.faults.loss=0.01", f"target.faults.links={links}")
    expected = 0.99**hops
    assert r.completion == pytest.approx(expected, abs=0.002)
    assert r.dropped == r.issued - r.completed
    assert r.packets_dropped == r.dropped  # each lost request lost exactly one packet
    assert r.timeouts == 0  # no client timeouts configured: lost requests stay unfinished


def test_retries_recover_losses() -> None:
    r = run("target.faults.loss=0.01", "topology.timeout_us=500", "topology.retries=6")
    assert r.completion == 1.0
    # packets were lost, no request was: `dropped` counts requests (it
    # counted packets on the simulator, requests on Mininet)
    assert r.packets_dropped > 0 and r.dropped == 0 and r.timeouts == 0
    # a retried request's latency includes its timeout
    assert r.latency_ns["p999"] > 500_000


def test_duplication_and_reordering_keep_completion() -> None:
    r = run("target.faults.duplicate=0.05", "target.faults.reorder=0.1",
            "target.faults.reorder_us=20")
    assert r.completion == 1.0
    clean = run()
    assert r.latency_ns["p99"] > clean.latency_ns["p99"]


def test_extra_delay_adds_to_every_hop() -> None:
    clean = run()
    slow = run("target.faults.delay_us=3")
    # 4 hops x 3 us, with the same seed and therefore the same arrivals
    assert slow.latency_ns["p50"] - clean.latency_ns["p50"] == pytest.approx(12_000, rel=0.02)


def test_server_crash_and_restart() -> None:
    r = run("+target.faults.crashes=[{server: 3, at_s: 0.1, restart_s: 0.3}]",
            "topology.timeline_ms=50")
    share = r.server_requests[3] / r.server_requests.sum()
    assert r.completion < 1.0
    lost = r.timeline["lost"]   # by the window the request was issued in
    t = r.timeline["t_s"]
    assert lost[(t >= 0.1) & (t < 0.3)].sum() == r.issued - r.completed
    assert lost[t < 0.1].sum() == 0 and lost[t >= 0.3].sum() == 0
    # the crashed server's requests during 0.2 s of the 0.5 s run are lost;
    # it served during the other 0.3 s, so lost / served-share = 0.2 / 0.3
    lost = 1.0 - r.completion
    assert lost == pytest.approx(share * 0.2 / 0.3, rel=0.15)


def test_queue_limit_drops_under_overload() -> None:
    with SimTarget(load([*BASE, "topology.server.queue_limit=64"])) as target:
        r = target.run_point(3_000_000, 1)
    assert r.packets_dropped > 0 and r.completion < 0.95
    assert r.dropped == r.issued - r.completed
    # bounded queues bound the tail of what completed ...
    from netkv.quantile import quantiles
    assert quantiles(r.hist_lower_ns, r.hist_counts, [0.99])[0] < 64 * 5000 * 8
    # ... but over every issued request (over 1% lost) the p99 is unbounded
    assert r.latency_ns["p99"] == float("inf")


def test_the_slo_reference_runs_without_hostile_clients_or_timed_faults(tmp_path) -> None:
    """The reference is the unloaded rack that fixes the SLO bound: it ran
    the hostile client's traffic (636 messages beside 1,253 honest requests)
    and the run's crashes and switch outages (a hash reference with an
    outage completed 58%). Link faults, which every request meets, stay."""
    import polars as pl

    from netkv.cli import main
    from netkv.runner import reference_config

    cfg = load(["protocol=pegasus", "servers=4", "clients=3", "topology.hostile_clients=1",
                "target.faults.loss=0.001",
                "target.faults.crashes=[{server: 3, at_s: 0.02}]",
                "target.faults.switch_outages=[{at_s: 0.03, restart_s: 0.04}]"])
    ref = reference_config(cfg)
    assert ref.topology.hostile_clients == 0 and ref.topology.clients == 3
    assert not ref.target.faults.crashes and not ref.target.faults.switch_outages
    assert ref.target.faults.loss == 0.001
    out = tmp_path / "r"
    assert main(["run", "protocol=pegasus", "servers=4", "clients=3", "keys=20000",
                 "duration=0.05", "slo.max_points=2", "topology.hostile_clients=1",
                 "topology.hostile_rps=2000",
                 "target.faults.crashes=[{server: 3, at_s: 0.02}]", f"out={out}"]) == 0
    points = pl.read_parquet(out / "points.parquet")
    reference = points.filter(pl.col("phase") == "reference")
    assert reference["hostile_sent"].to_list() == [0]
    assert reference["completion"].to_list() == [1.0]
    assert (points.filter(pl.col("phase") != "reference")["hostile_sent"] > 0).all()


def _outage_engine(overrides: list[str], rate: float, outage: bool, protocol: str = "hash"):
    """A SimEngine (entered by the caller) with the switch stopped from 10 ms
    to 20 ms when ``outage``."""
    from netkv.protocols import lookup
    from netkv.sim.engine import SimEngine, Workload

    extra = ["target.faults.switch_outages=[{at_s: 0.01, restart_s: 0.02}]"] if outage else []
    cfg = load([f"protocol={protocol}", "keys=1000", "duration=0.03", *overrides, *extra])
    wl = Workload.from_config(cfg)
    return wl, SimEngine(cfg, wl, rate, 1, lookup(protocol).pipeline_params(cfg))


def test_a_switch_outage_loses_the_packets_inside_the_switch() -> None:
    """Killing netkv-switch loses the frames queued at its ports; the
    simulator's stopped switch still sent its egress queues out over the
    10 ms outage (a 0.1 Gbps downlink to the one client, 100k req/s: a
    backlog of replies). Now a packet still in the switch at the stop
    (its serialization out not finished) is lost and counted (drop_outage):
    nothing the switch sent reaches a client after the stop's first
    microseconds, until the restart."""
    ov = ["servers=4", "clients=1", "record_history=true", "topology.link_gbps=0.1",
          "topology.retries=0", "topology.timeout_us=100000"]
    late = {}
    for outage in (False, True):
        wl, eng = _outage_engine(ov, 100_000, outage)
        with wl, eng:
            st = eng.run()
            done = eng.history()["done_ns"]
        late[outage] = int(((done > 10_005_000) & (done < 20_000_000)).sum())
        if outage:
            assert st.drop_outage > 0 and st.dropped == st.drop_outage
    assert late[False] > 100    # the backlog: replies keep arriving without an outage
    assert late[True] == 0, late


def test_a_switch_outage_loses_the_controllers_queue() -> None:
    """netkv-switch's queue of packets for the controller dies with its
    process; the simulator's kept it across the outage, for the controller
    to read after the restart. Pegasus samples packets to the controller:
    with nobody reading, some wait in the queue at the stop."""
    ov = ["servers=4", "clients=2", "alpha=1.2"]
    lost = {}
    for read in (False, True):   # the same run, its queue read just before the stop or not
        wl, eng = _outage_engine(ov, 200_000, True, "pegasus")
        with wl, eng:
            eng.run_until(0.0099)
            queued = len(eng.cpu_recv(100_000)) if read else 0
            eng.run_until(0.015)     # in the outage: nothing new reaches the queue
            assert eng.cpu_recv(100_000) == []
            st = eng.stats()
            assert st.cpu_dropped == 0   # (a full queue would make the runs differ)
            lost[read] = st.drop_outage
    assert queued > 0
    # the messages read just before the stop are exactly the ones the
    # unread run's stop lost on top (old: both runs lost the same)
    assert lost[False] - lost[True] == queued, (lost, queued)


def _pcap_times_ns(path) -> list[int]:
    """The timestamps (ns) of a nanosecond pcap's frames."""
    import struct

    data = path.read_bytes()
    assert struct.unpack_from("<I", data)[0] == 0xA1B23C4D
    times, off = [], 24
    while off + 16 <= len(data):
        sec, nsec, incl, _ = struct.unpack_from("<IIII", data, off)
        times.append(sec * 10**9 + nsec)
        off += 16 + incl
    return times


def test_a_packet_the_outage_kills_is_not_captured_on_the_cpu_port(tmp_path) -> None:
    """The capture wrote a packet's frame on the CPU port before the outage
    check that kills it: a stopped switch (10 ms to 20 ms) showed frames it
    never sent to the controller. Pegasus samples packets to the CPU port;
    a 1 ms pipeline latency leaves many inside the switch at the stop."""
    ov = ["servers=4", "clients=2", "alpha=1.2", "topology.switch_latency_ns=1000000"]
    wl, eng = _outage_engine(ov, 200_000, True, "pegasus")
    with wl, eng:
        eng.capture(tmp_path, 256, 10**9, 10**7)
        eng.run()
        st = eng.stats()
    assert st.drop_outage > 0
    times = _pcap_times_ns(tmp_path / "switch-cpu.pcap")
    assert times and min(times) < 10_000_000 and max(times) >= 20_000_000, (len(times), times[:3])
    assert [t for t in times if 10_000_000 <= t < 20_000_000] == []

