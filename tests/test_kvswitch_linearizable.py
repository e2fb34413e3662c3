"""KVSwitch's client histories are linearizable in strict mode (digest §5;
docs/kvswitch.md "Strict mode"), with 5% writes, while the controller installs
and evicts hot keys and the network loses, duplicates and reorders 1% of the
packets; checked by the Python WGL checker and, where the Go helper is built,
Porcupine. With strict mode off (the paper) the same run is not linearizable:
the stale reads the digest predicts (the exact sequence is test_stale_read in
hostapps/tests/test_kvswitch.c). Without at-most-once, resent writes are
re-applied after newer ones."""

from __future__ import annotations

from pathlib import Path

from netkv.config.compose import load
from netkv.lincheck import check_file
from netkv.lincheck import verdicts as check_verdicts
from netkv.runner import make_target

BASE = ["protocol=kvswitch", "servers=4", "clients=4", "keys=200", "alpha=1.2",
        "write_ratio=0.05", "record_history=true", "duration=0.1",
        "protocol.mode=cold", "protocol.hot_keys=16", "protocol.period_ms=2",
        "protocol.min_period_queries=100", "protocol.epsilon=0.01",
        "workload.dynamics.kind=hot-in", "workload.dynamics.period_s=0.02",
        "workload.dynamics.count=10"]
FAULTS = ["target.faults.loss=0.01", "target.faults.duplicate=0.01",
          "target.faults.reorder=0.01", "target.faults.reorder_us=50",
          "topology.timeout_us=2000", "topology.retries=3"]


def history(tmp_path: Path, overrides: list[str], name: str) -> tuple[Path, object, object]:
    cfg = load([*BASE, *FAULTS, *overrides])
    path = tmp_path / f"{name}.jsonl"
    with make_target(cfg) as target:
        point = target.run_point(200_000, 11)
        assert target.write_history(path)
        stats = target.last_engine_stats
        factory = target.controller_factory
    assert point.issued > 10_000
    assert stats.drop_loss > 100 and stats.retries > 100   # the faults happened
    return path, getattr(factory, "last", None), stats


def verdicts(path: Path) -> list[bool | None]:
    return check_verdicts(path, timeout=120)


def test_strict_mode_is_linearizable_while_keys_move_under_faults(tmp_path):
    path, ctl, _ = history(tmp_path, [], "strict")
    assert ctl is not None and ctl.stats.installs > 20 and ctl.stats.evictions > 10
    assert all(v is True for v in verdicts(path))


def test_strict_mode_stays_linearizable_with_r1_entries(tmp_path):
    """install_below_t: keys below T enter HotkeyTable with r = 1 and move
    between r = 1, r > 1 and cold as the hot set shifts (ε = 0.3: T stays
    high enough that some hot keys are below it; at 0.01 all get r = M)."""
    path, ctl, _ = history(tmp_path, ["protocol.install_below_t=true", "protocol.epsilon=0.3"],
                           "below-t")
    assert ctl is not None and ctl.stats.installs > 20 and ctl.stats.evictions > 10
    assert any(len(h.servers) == 1 for h in ctl.hot.values())
    assert any(len(h.servers) > 1 for h in ctl.hot.values())
    assert all(v is True for v in verdicts(path))


def test_paper_mode_serves_stale_reads(tmp_path):
    path, _, _ = history(tmp_path, ["protocol.strict=false"], "paper")
    result = check_file(path, timeout=120)
    assert result.ok is False and "read" in (result.explanation or "")
    assert all(v is False for v in verdicts(path))


def test_without_at_most_once_resent_writes_break_it(tmp_path):
    path, _, _ = history(tmp_path, ["protocol.amo=false"], "no-amo")
    assert all(v is False for v in verdicts(path))


def test_strict_mode_stays_linearizable_across_a_switch_restart(tmp_path):
    """A switch outage at 40-45 ms: the switch is back empty, the controller
    evicts every key it had installed at its owner (not its replicas: docs/kvswitch.md; versions
    above the old switch's) and installs again, the prewarmed keys by
    REPL_CMD (a replica may have missed the last write before the outage, so
    none is valid before the owner's push), the cold ones as it learns."""
    outage = "target.faults.switch_outages=[{at_s: 0.04, restart_s: 0.045}]"
    for mode in ("cold", "prewarmed"):
        path, ctl, stats = history(tmp_path, [outage, f"protocol.mode={mode}"], f"outage-{mode}")
        assert stats.switch_restarts == 1 and stats.drop_outage > 0
        assert ctl is not None and len(ctl.hot) > 0
        # WGL only: Porcupine's search on the cold run's history gave no
        # verdict in 2 min at 7.4 GB, and the kernel killed it at 24 GB
        # (19,716 ops, 200 keys, one pending write), while WGL decides it
        # at once (a replica marked valid too early makes it False)
        assert check_file(path, timeout=120).ok is True, mode
