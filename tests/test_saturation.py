"""netkv.experiments.saturation: the saturated throughput searched at
saturation, on a fake point whose mix worsens past a load (as StarCache's
loop overflows), so the fluid bound of a lower point overstates it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from netkv.config.compose import load
from netkv.experiments import saturation


def fake_points(true_sat: float, calls: list[float]) -> Any:
    def execute_at(cfg: Any, out: Path, argv: list[str], console: Any, load_rps: float,
                   slo_ns: float, workloads: Any = None) -> pl.DataFrame:
        calls.append(load_rps)
        # below true_sat the busiest server is under capacity: its bound is
        # above the load; past it the mix worsens and the bound falls below
        bound = true_sat * 1.05 if load_rps <= true_sat else true_sat * 0.9
        return pl.DataFrame([{"sat_tput_rps": bound, "completion": 1.0}])
    return execute_at


def test_bisects_to_the_load_whose_own_mix_saturates(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    calls: list[float] = []
    monkeypatch.setattr("netkv.runner.execute_at", fake_points(7.4e6, calls))
    sat, probes = saturation.saturation_rps(load([]), tmp_path, [], 4.0e6, 8.1e6)
    assert calls[0] == 8.1e6 and probes == len(calls) <= saturation.MAX_PROBES
    assert 7.0e6 <= sat <= 7.4e6, sat  # never above the true saturation


def test_a_stable_mix_keeps_the_fluid_bound(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    calls: list[float] = []
    monkeypatch.setattr("netkv.runner.execute_at", fake_points(9.0e6, calls))
    assert saturation.saturation_rps(load([]), tmp_path, [], 4.0e6, 8.1e6) == (8.1e6, 1)


def test_unanswered_requests_are_not_sustainable() -> None:
    assert saturation.sustainable(1e6, 1.1e6, 1.0, 0.99, 0.02)
    assert not saturation.sustainable(1e6, 1.1e6, 0.9, 0.99, 0.02)
    assert not saturation.sustainable(1e6, 0.9e6, 1.0, 0.99, 0.02)


def test_saturate_names_series_or_all() -> None:
    from netkv.experiments.spec import load_experiment

    exp = load_experiment("starcache/fig9")
    assert exp.saturates("starcache") and not exp.saturates("nocache")
    assert exp.model_copy(update={"saturate": True}).saturates("nocache")
    assert not exp.model_copy(update={"saturate": False}).saturates("starcache")


def test_saturate_names_series_of_a_searching_grid() -> None:
    import pytest
    from pydantic import ValidationError

    from netkv.experiments.spec import Experiment

    base = {"description": "t", "x": {"key": "alpha", "values": [0, 0.99]},
            "series": {"hash": ["protocol=hash"], "starcache": ["protocol=starcache"]}}
    assert Experiment.model_validate({**base, "saturate": ["starcache"]}).saturates("starcache")
    assert not Experiment.model_validate({**base, "saturate": ["starcache"]}).saturates("hash")
    with pytest.raises(ValidationError, match="saturate: series 'starcach'"):
        Experiment.model_validate({**base, "saturate": ["starcach"]})
    with pytest.raises(ValidationError, match="saturate: measured after an SLO search"):
        Experiment.model_validate({**base, "saturate": True, "load_rps": 1e6})
