"""Client retries: on by default when a run injects loss or duplication.

``topology.timeout_us`` and ``topology.retries`` default to ``null`` (auto):
without injected faults no request is ever resent (as in the Pegasus
artifact); with ``target.faults.loss`` or ``duplicate`` > 0 a client resends a
request, with the same request id, after ``TIMEOUT_SLO_MULTIPLE`` x the SLO
bound (the SLO reference's, known before the search), at most ``AUTO_RETRIES``
times. An explicit value, 0 included, is kept as given: ``topology.retries=0``
turns retries off. With ``slo.reference=self`` the bound is known only after
the search's first point, so auto retries stay off there (set
``topology.timeout_us`` to use them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the protocol modules import this one, and schema imports them
    from netkv.config.schema import RunConfig

AUTO_RETRIES = 3  # 1% loss on each of a request's 4 traversals: ~4% lost, 2.4e-6 after 3 resends
TIMEOUT_SLO_MULTIPLE = 2.0  # a request this late has missed the SLO: resend it


def injects_faults(cfg: RunConfig) -> bool:
    f = cfg.target.faults
    return f.loss > 0 or f.duplicate > 0


def will_retry(cfg: RunConfig) -> bool:
    """Whether the clients will resend requests, known before the target is
    built (so that a protocol can turn at-most-once on: Pegasus' ``amo``)."""
    top = cfg.topology
    if top.retries == 0 or top.timeout_us == 0:
        return False
    if top.retries is None and not injects_faults(cfg):
        return False
    if top.timeout_us is not None:
        return True
    return injects_faults(cfg) and (cfg.slo.kind == "fixed" or cfg.slo.reference != "self")


def resolve(cfg: RunConfig, slo_ns: float | None) -> RunConfig:
    """``cfg`` with a concrete client timeout and retry count."""
    top = cfg.topology
    timeout_us = top.timeout_us
    if timeout_us is None:
        on = injects_faults(cfg) and slo_ns is not None and slo_ns > 0
        timeout_us = TIMEOUT_SLO_MULTIPLE * slo_ns / 1e3 if on else 0.0  # type: ignore[operator]
    retries = top.retries
    if retries is None:
        retries = AUTO_RETRIES if injects_faults(cfg) and timeout_us > 0 else 0
    if (timeout_us, retries) == (top.timeout_us, top.retries):
        return cfg
    new_top = top.model_copy(update={"timeout_us": timeout_us, "retries": retries})
    return cfg.model_copy(update={"topology": new_top})


def known_slo_ns(cfg: RunConfig, reference_ns: float | None) -> float | None:
    """The SLO bound before the search: a fixed one, or the reference's."""
    if reference_ns is not None:
        return reference_ns
    if cfg.slo.kind == "fixed" and cfg.slo.p99_us is not None:
        return cfg.slo.p99_us * 1e3
    return None
