"""Static consistent hashing: no switch state, no controller."""

from __future__ import annotations

from netkv.config.schema import RunConfig


def pipeline_params(cfg: RunConfig) -> str:
    del cfg
    return ""


def sim_controller_factory(cfg: RunConfig) -> None:
    del cfg
    return None


def mininet_controller_factory(cfg: RunConfig) -> None:
    """No controller on target=mininet either."""
    del cfg
    return None
