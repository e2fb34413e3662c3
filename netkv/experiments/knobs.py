"""Which config keys two cells of a check really differ in.

A check compares two cells; if their resolved configs differ only in knobs
that are dead in that workload (AMO without writes, a selection policy with
nothing replicated), both sides are the same measurement and the check
cannot fail. A protocol names its dead knobs in ``dead_knobs(cfg)`` (its own
module, netkv/protocols/<p>.py); a protocol without one has none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from netkv.config.schema import RunConfig
from netkv.protocols import PROTOCOLS, lookup
from netkv.results.columns import flatten

if TYPE_CHECKING:
    from netkv.experiments.spec import Experiment

IGNORED = {"name", "out"}  # labels, not knobs


def dead_knobs(cfg: RunConfig) -> set[str]:
    if cfg.protocol.name not in PROTOCOLS:
        return set()
    return set(lookup(cfg.protocol.name).dead_knobs(cfg))


def live_differences(a: RunConfig, b: RunConfig) -> dict[str, tuple[Any, Any]]:
    """Keys whose values differ between ``a`` and ``b`` and that are live in
    at least one of them."""
    fa, fb = flatten(a.model_dump(mode="json")), flatten(b.model_dump(mode="json"))
    dead = dead_knobs(a) & dead_knobs(b)
    return {k: (fa.get(k), fb.get(k)) for k in sorted(fa.keys() | fb.keys())
            if k not in IGNORED and k not in dead and fa.get(k) != fb.get(k)}


def dead_comparisons(exp: "Experiment", extra: list[str] | None = None) -> list[str]:
    """Every compared pair of cells of a grid experiment whose configs differ
    in no live knob, as "claim: left vs right (differ only in ...)"."""
    from netkv.config.compose import load
    from netkv.experiments.checks import pairs
    from netkv.experiments.reproduce import cells
    from netkv.experiments.spec import Check

    configs: dict[tuple[str, str], RunConfig] = {}

    def config(series: str, x: object) -> RunConfig:
        key = (series, str(x))
        if key not in configs:
            cell = next(c for c in cells(exp, list(extra or []))
                        if c.series == series and str(c.x) == str(x))
            configs[key] = load(list(cell.overrides))
        return configs[key]

    found = []
    for check in exp.checks:
        if not isinstance(check, Check) or check.left.value is not None \
                or check.right.value is not None:
            continue
        assert check.left.series is not None and check.right.series is not None
        for x, rx in pairs(check, exp):
            if (check.left.series, str(x)) == (check.right.series, str(rx)):
                continue  # two metrics of one cell: one measurement, two quantities
            if exp.fixed_load(x) != exp.fixed_load(rx):
                continue  # measured at two offered loads (x.key load_rps)
            a, b = config(check.left.series, x), config(check.right.series, rx)
            if not live_differences(a, b):
                every = flatten(a.model_dump(mode="json"))
                other = flatten(b.model_dump(mode="json"))
                dead = sorted(k for k in every if k not in IGNORED and every[k] != other.get(k))
                found.append(f"{check.claim}: {check.left.series}@{x} vs "
                             f"{check.right.series}@{rx} differ only in dead knobs "
                             f"({', '.join(dead) or 'nothing'})")
    return found
