"""The experiment file: ``experiments/<paper>/<figure>.yaml`` (docs/experiments.md).

Two kinds, both over named *series* (override lists, e.g. one per protocol)
times the values of one *x* key:

``kind: grid`` (the default)
    Every cell is an ordinary ``run`` (an SLO search) with those overrides.
    ``y`` names the metric to plot; ``checks`` compare cells (``kind:
    compare``, the default check kind).

``kind: timeline``
    A time series at a fixed load. Each series is first searched once (an
    ordinary run with the series' overrides plus ``timeline.search[series]``,
    without the x overrides) for its SLO and max throughput under SLO; then
    every cell runs ONE point at ``timeline.load`` x that max for
    ``timeline.periods`` dynamics periods, cut into ``timeline.window_ms``
    windows. The x values are the panels (e.g. the dynamics kind). Checks:

    ``kind: recovery``      after every popularity change (from
                            ``timeline.warmup_s`` on), the windowed p99 is back
                            under the SLO within ``within_ms`` and stays there
                            until the next change;
    ``kind: no_violation``  at most ``allowed_windows`` windows (from
                            ``warmup_s`` on) have p99 above the SLO.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError,
                      model_validator)

from netkv.config.compose import ConfigError

# Tables store SI base units (rps, ns; docs/results.md); plots and tables
# for people show them scaled (DISPLAY).
METRICS = {
    "max_tput_rps": "max throughput under SLO (Mreq/s)",
    "p50_ns": "p50 latency at max throughput (us)",
    "p99_ns": "p99 latency at max throughput (us)",
    "max_over_mean": "busiest server's load / mean at max throughput",
    "max_server_share": "busiest server's share of requests at max throughput",
    "min_over_max": "balancing efficiency: least / most loaded server at max throughput",
    "slo_ns": "SLO (us)",
    "imbalance": "λ = Σ|L_j − L̄| / (M·L̄) of the requests the servers served",
    "sat_tput_rps": "saturated throughput (fluid: offered load at which the busiest server "
                    "reaches capacity, Mreq/s)",
    "achieved_rps": "served rate at the offered load (Mreq/s)",
}
DISPLAY = {"max_tput_rps": (1e-6, "Mreq/s"), "p50_ns": (1e-3, "us"), "p99_ns": (1e-3, "us"),
           "slo_ns": (1e-3, "us"), "sat_tput_rps": (1e-6, "Mreq/s"),
           "achieved_rps": (1e-6, "Mreq/s"),
           # a grid's point columns by who answered (docs/results.md)
           **{f"{who}_p{q}_ns": (1e-3, "us") for who in ("server", "switch") for q in (50, 99)}}


# A saturating series' cell also holds these, and the experiment's columns,
# as measured at the saturation search's point (``<metric>_at_sat``): the
# papers that report saturated throughput report balance, overflow and
# latency from the same runs.
AT_SAT = ("achieved_rps", "p50_ns", "p99_ns", "max_over_mean", "max_server_share",
          "min_over_max", "imbalance")
SAT_SUFFIX = "_at_sat"


def at_sat(metric: str) -> str:
    return metric + SAT_SUFFIX


def display(metric: str) -> tuple[float, str]:
    """A metric's scale and unit for people (a metric at saturation: its base's)."""
    return DISPLAY.get(metric.removesuffix(SAT_SUFFIX), (1.0, ""))


def shown(metric: str, value: float) -> float:
    """A stored value in the unit people read (Mreq/s, us)."""
    return value * display(metric)[0]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Axis(Strict):
    key: str
    values: list[float | int | str] = Field(min_length=1)
    label: str = ""
    # Extra overrides for particular x values (e.g. alpha 0 -> workload=uniform).
    per_value: dict[str, list[str]] = Field(default_factory=dict)
    # False: ``key`` is no config key, the x values only label their
    # per_value overrides (e.g. a value-size mix by its share of big values)
    override: bool = True

    @model_validator(mode="after")
    def _labels_need_overrides(self) -> "Axis":
        if not self.override:
            missing = [str(v) for v in self.values if not self.per_value.get(str(v))]
            if missing:
                raise ValueError(f"x.override false: every x value needs per_value overrides "
                                 f"(missing: {', '.join(missing)})")
        return self


# x.key naming no config key but each cell's offered load (req/s): every cell
# one point at its x (latency against load), as with ``load_rps``
LOAD_X = "load_rps"


class Metric(Strict):
    metric: str = "max_tput_rps"   # METRICS, or one of the experiment's columns
    label: str = ""


XValue = float | int | str


class Ref(Strict):
    series: str | None = None
    x: XValue | list[XValue] | None = None   # one, several, or "all": every x value
    value: float | None = None           # a constant instead of a cell
    metric: str | None = None            # default: the experiment's y metric
    times: float = 1.0
    # added after ``times``, in the metric's stored unit (ns, rps): "about
    # 1 us above" is plus: 1000 on a latency
    plus: float = 0.0
    # another series' cell at the same x and metric, subtracted before
    # ``times``: a gap between two series ("the gap grows with x")
    minus: str | None = None


class Check(Strict):
    """``kind: compare`` (grid experiments): left op right over cells."""

    kind: Literal["compare"] = "compare"
    claim: str
    paper: str = ""
    left: Ref
    op: Literal[">=", "<=", "within"]
    right: Ref
    tolerance: float = Field(0.0, ge=0.0)
    # all: every compared pair must hold; any: at least one ("as much as
    # 11.8 x": the best x); mean (>= or <= only): the mean over the pairs of
    # left / right holds against 1 ("1.11 x on average": right's ``times``
    # 1.11). Every cell must be measured either way.
    quantifier: Literal["all", "any", "mean"] = "all"
    # Why ours does not reach the paper's value (the check stays at it):
    # a false claim with a reason is "differs", without one "FAIL".
    differs: str = ""

    @model_validator(mode="after")
    def _mean_is_an_ordering(self) -> "Check":
        # a mean of ratios "within" a tolerance would let 1.5 and 0.5 hold
        if self.quantifier == "mean" and self.op == "within":
            raise ValueError(f"check '{self.claim}': quantifier mean with op within "
                             f"(allowed: mean with >= or <=; within with all or any)")
        return self


def ref_xs(ref: Ref, values: list[XValue]) -> list[XValue | None]:
    """The x values a side names: one, a list, or "all" (every x value); a
    constant (``value``) is one value, whatever x it names."""
    if ref.value is not None:
        return [None]
    if ref.x == "all":
        return list(values)
    return list(ref.x) if isinstance(ref.x, list) else [ref.x]


def pairing_error(check: Check, values: list[XValue]) -> str:
    """Why a check's two sides cannot be paired ("" when they can): both
    naming several x values must name as many (paired by position); a side
    with one x (or a constant) pairs with each x of the other."""
    left, right = len(ref_xs(check.left, values)), len(ref_xs(check.right, values))
    if left and right and (left == right or 1 in (left, right)):
        return ""
    return (f"check '{check.claim}': left names {left} x values, right {right} (allowed: "
            f"as many on both sides, paired by position, or one x on either side)")


class RecoveryCheck(Strict):
    """``kind: recovery`` (timeline experiments): after each change, the
    windowed p99 is back under the SLO within ``within_ms`` and stays there
    until the next change (or the end of the run)."""

    kind: Literal["recovery"]
    claim: str
    paper: str = ""
    series: str
    x: float | int | str   # a panel, or "all"
    within_ms: float = Field(gt=0.0)
    differs: str = ""


class NoViolationCheck(Strict):
    """``kind: no_violation`` (timeline experiments): at most
    ``allowed_windows`` windows after the warm-up have p99 above the SLO."""

    kind: Literal["no_violation"]
    claim: str
    paper: str = ""
    series: str
    x: float | int | str   # a panel, or "all"
    allowed_windows: int = Field(0, ge=0)
    differs: str = ""


class ThroughputCheck(Strict):
    """``kind: throughput`` (timeline experiments): the completions per
    window over ``window_s`` [from, to) against ``fraction`` x their level
    over ``reference_s`` (e.g. during an outage <= 0.05 x before it; after a
    restart >= 0.9 x)."""

    kind: Literal["throughput"]
    claim: str
    paper: str = ""
    series: str
    x: float | int | str   # a panel, or "all"
    window_s: tuple[float, float]
    op: Literal[">=", "<="]
    fraction: float = Field(ge=0.0)
    reference_s: tuple[float, float]
    differs: str = ""


class RunCheck(Strict):
    """``kind: run`` (timeline experiments): a value of a long run's point
    (its served rate, latency, completion, or one of the experiment's
    ``columns``, e.g. a controller's overflow ratio) against a constant, in
    every x."""

    kind: Literal["run"]
    claim: str
    paper: str = ""
    series: str
    x: float | int | str   # a panel, or "all"
    metric: str
    op: Literal[">=", "<="]
    value: float
    differs: str = ""


# what a long run's row holds of its point, besides the experiment's columns
RUN_METRICS = ("achieved_rps", "p50_ns", "p99_ns", "completion")

TimelineCheck = RecoveryCheck | NoViolationCheck | ThroughputCheck | RunCheck


def _check_kind(data: Any) -> str:
    if isinstance(data, dict):
        return str(data.get("kind", "compare"))
    return str(getattr(data, "kind", "compare"))


AnyCheck = Annotated[
    Annotated[Check, Tag("compare")]
    | Annotated[RecoveryCheck, Tag("recovery")]
    | Annotated[NoViolationCheck, Tag("no_violation")]
    | Annotated[ThroughputCheck, Tag("throughput")]
    | Annotated[RunCheck, Tag("run")],
    Discriminator(_check_kind),
]


class Timeline(Strict):
    """How a ``kind: timeline`` experiment runs its cells."""

    # Offered load of the long run, as a fraction of the series' max
    # throughput under SLO (found by the search run), or with ``saturate``
    # of its saturated throughput (the search then goes on to saturation,
    # netkv/experiments/saturation.py, as a grid's ``saturate``).
    load: float = Field(gt=0.0, le=2.0)
    saturate: bool = False
    # Extra overrides of the search run, per series (e.g. a cold-start
    # protocol searched in its steady state: protocol.mode=prewarmed).
    search: dict[str, list[str]] = Field(default_factory=dict)
    # The run lasts periods x workload.dynamics.period_s (so periods - 1
    # changes), cut into windows of window_ms (topology.timeline_ms).
    periods: int = Field(4, ge=2)
    window_ms: float = Field(10.0, gt=0.0)
    # Windows and changes before warmup_s are not checked (a cold start).
    warmup_s: float = Field(0.0, ge=0.0)
    # Extra overrides of the long run only (not of the search).
    overrides: list[str] = Field(default_factory=list)


class SloSpec(Strict):
    """One SLO per figure, as the papers define it: ``factor`` x the SLO
    reference's unloaded median on the figure's base configuration
    (``overrides`` + ``base``: the paper's default rack, not a cell's), pinned
    for every series and x. ``per_x`` (the paper's reason) declares the one
    exception: a bound per x value, measured on the base plus that x."""

    base: list[str] = Field(default_factory=list)
    per_x: str = ""


class Experiment(Strict):
    kind: Literal["grid", "timeline"] = "grid"
    description: str
    paper: str = ""
    overrides: list[str] = Field(default_factory=list)
    # grid only: every cell measures ONE point at this offered load (no SLO
    # search); its metrics are that point's (papers that report load balance
    # at a given load, not throughput under an SLO)
    load_rps: float | None = Field(None, gt=0.0)
    # grid with SLO searches only: sat_tput_rps measured at saturation (the
    # load whose own per-server mix keeps the busiest server at capacity;
    # netkv/experiments/saturation.py), not extrapolated from the best point;
    # true: every series, or the series whose mix changes with the load
    saturate: bool | list[str] = False
    # extra columns of the point (points.parquet, e.g. a controller's
    # point_metrics) the experiment plots or checks: name -> label
    columns: dict[str, str] = Field(default_factory=dict)
    x: Axis
    series: dict[str, list[str]] = Field(min_length=1)
    y: Metric = Metric()
    logy: bool = False
    timeline: Timeline | None = None
    slo: SloSpec = SloSpec()
    checks: list[AnyCheck] = Field(default_factory=list)
    notes: str = ""

    def saturates(self, series: str) -> bool:
        """Whether the series' cells measure sat_tput_rps at saturation."""
        return self.saturate is True or (isinstance(self.saturate, list)
                                         and series in self.saturate)

    def fixed_load(self, x: XValue) -> float | None:
        """The offered load of cell x's one point (x.key ``load_rps``: x
        itself; else ``load_rps``), None for an SLO search."""
        return float(x) if self.x.key == LOAD_X else self.load_rps

    @property
    def fixed(self) -> bool:
        """Every cell is one point at a given load (no SLO is judged)."""
        return self.x.key == LOAD_X or self.load_rps is not None

    def metrics(self) -> dict[str, str]:
        """Every metric a plot or check may name: METRICS plus ``columns``,
        and with ``saturate`` both again as measured at saturation."""
        plain = {**METRICS, **self.columns}
        if not self.saturate:
            return plain
        # "at max throughput" (the SLO's best point) would contradict it
        return {**plain, **{at_sat(m): plain[m].replace(" at max throughput", "")
                            + ", at saturation" for m in (*AT_SAT, *self.columns)}}

    def run_metrics(self) -> tuple[str, ...]:
        """What a ``run`` check may name: a long run's own values."""
        return (*RUN_METRICS, *self.columns)

    def _saturated_only(self, metric: str, series: list[str | None], what: str) -> None:
        """A metric at saturation exists only in saturating series' cells."""
        if not metric.endswith(SAT_SUFFIX):
            return
        bad = [s for s in series if s is not None and not self.saturates(s)]
        if bad:
            raise ValueError(f"{what}: '{metric}' is measured at saturation, which series "
                             f"{', '.join(bad)} does not search (allowed: series in "
                             f"saturate)")

    @model_validator(mode="after")
    def _kind_fits(self) -> "Experiment":
        if self.x.key == LOAD_X:
            if self.kind != "grid" or self.load_rps is not None:
                raise ValueError("x.key load_rps: each x is its cell's offered load (allowed: "
                                 "kind: grid, without load_rps)")
            bad = [str(v) for v in self.x.values
                   if isinstance(v, str) or not float(v) > 0]
            if bad:
                raise ValueError(f"x.values: {', '.join(bad)} (allowed: loads > 0 req/s)")
        if self.load_rps is not None and self.kind != "grid":
            raise ValueError("load_rps: a fixed-load cell is a grid experiment's (allowed: "
                             "kind: grid)")
        if self.y.metric not in self.metrics():
            raise ValueError(f"y.metric: '{self.y.metric}' (allowed: "
                             f"{', '.join(self.metrics())})")
        self._saturated_only(self.y.metric, list(self.series), "y.metric")
        clash = [c for c in self.columns if c.endswith(SAT_SUFFIX)]
        if clash:  # the suffix names the values measured at saturation
            raise ValueError(f"columns: {', '.join(clash)} (allowed: names not ending in "
                             f"{SAT_SUFFIX})")
        if (self.kind == "timeline") != (self.timeline is not None):
            raise ValueError("timeline: required with kind: timeline, and only with it")
        if self.kind == "timeline" and self.slo.per_x:
            raise ValueError("slo.per_x: a timeline's searches have no x (allowed: grid only)")
        for series in self.saturate if isinstance(self.saturate, list) else []:
            if series not in self.series:
                raise ValueError(f"saturate: series '{series}' "
                                 f"(allowed: {', '.join(self.series)})")
        if self.saturate and (self.kind != "grid" or self.load_rps is not None
                              or self.x.key == LOAD_X):
            raise ValueError("saturate: measured after an SLO search (allowed: a grid "
                             "experiment whose cells search, without load_rps or x.key "
                             "load_rps)")
        if self.timeline is not None:
            for series in self.timeline.search:
                if series not in self.series:
                    raise ValueError(f"timeline.search: series '{series}' "
                                     f"(allowed: {', '.join(self.series)})")
        for check in self.checks:
            wanted = ("compare" if self.kind == "grid"
                      else "recovery, no_violation, throughput or run")
            if (check.kind == "compare") != (self.kind == "grid"):
                raise ValueError(f"check '{check.claim}': kind '{check.kind}' in a "
                                 f"{self.kind} experiment (allowed: {wanted})")
        return self

    @model_validator(mode="after")
    def _refs_exist(self) -> "Experiment":
        for check in self.checks:
            if not isinstance(check, Check):
                if check.series not in self.series:
                    raise ValueError(f"check '{check.claim}': series '{check.series}' "
                                     f"(allowed: {', '.join(self.series)})")
                if check.x != "all" and check.x not in self.x.values:
                    raise ValueError(f"check '{check.claim}': x = {check.x} is not in x.values")
                if isinstance(check, RunCheck) and check.metric not in self.run_metrics():
                    raise ValueError(f"check '{check.claim}': metric '{check.metric}' "
                                     f"(allowed: {', '.join(self.run_metrics())})")
                continue
            if error := pairing_error(check, list(self.x.values)):
                raise ValueError(error)
            for ref in (check.left, check.right):
                if ref.value is None and ref.series not in self.series:
                    raise ValueError(
                        f"check '{check.claim}': series '{ref.series}' "
                        f"(allowed: {', '.join(self.series)})"
                    )
                named = ref.x if isinstance(ref.x, list) else [ref.x]
                for x in named if ref.value is None and ref.x != "all" else []:
                    if x not in self.x.values:
                        raise ValueError(f"check '{check.claim}': x = {x} is not in x.values")
                if ref.minus is not None and (ref.value is not None
                                              or ref.minus not in self.series):
                    raise ValueError(f"check '{check.claim}': minus '{ref.minus}' "
                                     f"(allowed: a series, on a side that names one: "
                                     f"{', '.join(self.series)})")
                if ref.metric is not None and ref.metric not in self.metrics():
                    raise ValueError(f"check '{check.claim}': metric '{ref.metric}' "
                                     f"(allowed: {', '.join(self.metrics())})")
                if ref.value is None:
                    self._saturated_only(ref.metric or self.y.metric, [ref.series, ref.minus],
                                         f"check '{check.claim}'")
        return self


def experiments_root() -> Path:
    from netkv.config.compose import conf_dir

    return conf_dir().parent / "experiments"


def available() -> list[str]:
    root = experiments_root()
    return sorted(f"{p.parent.name}/{p.stem}" for p in root.glob("*/*.yaml"))


def nearest(name: str, names: list[str]) -> list[str]:
    """The experiments a mistyped name most likely meant: close spellings,
    and every paper's figure of that name (`fig7` is in three papers)."""
    same_figure = [n for n in names if n.rpartition("/")[2] == name.rpartition("/")[2]]
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.8)
    return list(dict.fromkeys([*close, *same_figure]))


def load_experiment(name: str) -> Experiment:
    names = available()
    # only a listed name: a path such as ../conf/config is no experiment
    if name not in names:
        near = nearest(name, names)
        hint = f"did you mean {', '.join(near)}? " if near else ""
        raise ConfigError(f"invalid experiment: '{name}' ({hint}choose one of: "
                          f"{', '.join(names) or 'none'})")
    path = experiments_root() / f"{name}.yaml"
    try:
        return Experiment.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"invalid experiment {name}: {where}: {err['msg']}") from None
