"""The experiment file: ``experiments/<paper>/<figure>.yaml``.

An experiment is a grid: named *series* (override lists, e.g. one per
protocol) times the values of one *x* key (e.g. ``alpha``). Every cell is an
ordinary ``run`` with those overrides. ``y`` names the metric to plot and
``checks`` state the paper's claims as comparisons between cells.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from netkv.config.compose import ConfigError

METRICS = {
    "max_tput_mrps": "max throughput under SLO (Mreq/s)",
    "p50_us": "p50 latency at max throughput (us)",
    "p99_us": "p99 latency at max throughput (us)",
    "max_over_mean": "busiest server's load / mean at max throughput",
    "max_server_share": "busiest server's share of requests at max throughput",
    "slo_us": "SLO (us)",
}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Axis(Strict):
    key: str
    values: list[float | int | str] = Field(min_length=1)
    label: str = ""
    # Extra overrides for particular x values (e.g. alpha 0 -> workload=uniform).
    per_value: dict[str, list[str]] = Field(default_factory=dict)


class Metric(Strict):
    metric: str = "max_tput_mrps"
    label: str = ""

    @model_validator(mode="after")
    def _known(self) -> "Metric":
        if self.metric not in METRICS:
            raise ValueError(f"y.metric: '{self.metric}' (allowed: {', '.join(METRICS)})")
        return self


class Ref(Strict):
    series: str | None = None
    x: float | int | str | None = None   # "all": every x value
    value: float | None = None           # a constant instead of a cell
    metric: str | None = None            # default: the experiment's y metric
    times: float = 1.0


class Check(Strict):
    claim: str
    paper: str = ""
    left: Ref
    op: Literal[">=", "<=", "within"]
    right: Ref
    tolerance: float = Field(0.0, ge=0.0)


class Experiment(Strict):
    description: str
    paper: str = ""
    overrides: list[str] = Field(default_factory=list)
    x: Axis
    series: dict[str, list[str]] = Field(min_length=1)
    y: Metric = Metric()
    logy: bool = False
    checks: list[Check] = Field(default_factory=list)
    notes: str = ""

    @model_validator(mode="after")
    def _refs_exist(self) -> "Experiment":
        for check in self.checks:
            for ref in (check.left, check.right):
                if ref.value is None and ref.series not in self.series:
                    raise ValueError(
                        f"check '{check.claim}': series '{ref.series}' "
                        f"(allowed: {', '.join(self.series)})"
                    )
                if ref.value is None and ref.x != "all" and ref.x not in self.x.values:
                    raise ValueError(f"check '{check.claim}': x = {ref.x} is not in x.values")
                if ref.metric is not None and ref.metric not in METRICS:
                    raise ValueError(f"check '{check.claim}': metric '{ref.metric}'")
        return self


def experiments_root() -> Path:
    from netkv.config.compose import conf_dir

    return conf_dir().parent / "experiments"


def available() -> list[str]:
    root = experiments_root()
    return sorted(f"{p.parent.name}/{p.stem}" for p in root.glob("*/*.yaml"))


def load_experiment(name: str) -> Experiment:
    path = experiments_root() / f"{name}.yaml"
    if not path.is_file():
        choices = ", ".join(available()) or "none"
        raise ConfigError(f"invalid experiment: '{name}' (choose one of: {choices})")
    try:
        return Experiment.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"invalid experiment {name}: {where}: {err['msg']}") from None
