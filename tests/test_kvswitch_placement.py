"""KVSwitch's replicate-to-all placement (``protocol.placement=all``, Fig.
9a's baseline, docs/kvswitch.md): every key the controller installs has M
copies, in its own records and in the switch (HotkeyTable's r, the Valid
word), prewarmed and cold; the check fails on a controller that places fewer."""

from __future__ import annotations

from typing import Any

import pytest

from netkv.config.compose import ConfigError, load
from netkv.native import NativeBuildMissing, library_path
from netkv.protocols import kvswitch as ks
from netkv.protocols import lookup
from netkv.targets.sim import SimTarget

try:
    library_path()
except NativeBuildMissing as exc:  # pragma: no cover
    pytest.skip(str(exc), allow_module_level=True)

M = 8
K = 40


def run(mode: str, placement: str = "all") -> tuple[ks.KVSwitchController, list[int], Any]:
    """One short sim point; the switch's Valid words as the run ends. A cold
    controller plans every 5 ms period, a prewarmed one keeps its install."""
    cfg = load(["protocol=kvswitch", f"protocol.placement={placement}", f"protocol.mode={mode}",
                f"protocol.hot_keys={K}", "protocol.period_ms=5",
                f"protocol.min_period_queries={2000 if mode == 'cold' else 10**6}", "alpha=0.99", f"servers={M}",
                "keys=10000", "duration=0.05"])
    plugin = lookup("kvswitch")
    inner = plugin.sim_controller(cfg)
    seen: dict[str, Any] = {}

    def factory(eng: Any) -> Any:
        epochs = inner(eng)
        point = epochs.metrics
        sw = epochs.controller.plane.switch

        def metrics() -> dict[str, Any]:
            seen["valid"] = sw.reg_read_range("Valid", 0, K)   # before the engine closes
            return point()

        epochs.metrics = metrics
        return epochs

    tg = SimTarget(cfg, controller_factory=factory, params=plugin.pipeline_params(cfg))
    r = tg.run_point(1e6, 1)
    tg.close()
    assert r.completed == r.issued
    return inner.last, seen["valid"], r


def on_all_servers(ctl: ks.KVSwitchController, valid: list[int], settled: bool) -> bool:
    """Every installed key on all M servers; ``settled``: every copy valid
    (prewarmed installs are valid at once, pushed ones after their ACK)."""
    full = (1 << M) - 1
    for h in ctl.hot.values():
        if sorted(h.servers) != list(range(M)) or h.servers[0] != h.info.owner:
            return False
        word = valid[h.slot]
        if word & ~full or not word >> h.info.owner & 1 or (settled and word != full):
            return False
    return True


def test_prewarmed_replicate_to_all_installs_k_keys_with_m_copies() -> None:
    ctl, valid, r = run("prewarmed")
    assert len(ctl.hot) == K
    assert on_all_servers(ctl, valid, settled=True)
    m = r.controller_metrics
    assert m["replicas_per_server"] == K * (M - 1) / M      # owners not counted
    assert m["threshold_t"] != m["threshold_t"]             # NaN: no threshold


def test_cold_replicate_to_all_learns_keys_and_pushes_m_copies() -> None:
    ctl, valid, _ = run("cold")
    assert ctl.stats.installs > 0 and len(ctl.hot) > K // 2
    assert on_all_servers(ctl, valid, settled=False)
    # the pushes reached the replicas: most keys valid everywhere by the end
    assert sum(valid[h.slot] == (1 << M) - 1 for h in ctl.hot.values()) >= len(ctl.hot) // 2


def test_the_check_fails_on_selective_placement_and_on_a_doctored_controller(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ctl, valid, _ = run("prewarmed", placement="selective")
    assert ctl.hot and not on_all_servers(ctl, valid, settled=True)
    # a controller that drops one copy of each key (r = M − 1 servers)
    real = ks.placement
    monkeypatch.setattr(ks, "placement", lambda o, r, m: real(o, r, m)[:-1] if r == m
                        else real(o, r, m))
    ctl, valid, _ = run("prewarmed")
    assert len(ctl.hot) == K and not on_all_servers(ctl, valid, settled=True)


def test_placement_is_validated() -> None:
    with pytest.raises(ConfigError, match="placement"):
        load(["protocol=kvswitch", "protocol.placement=some"])
