"""Fig. 8a's counting-noise ceiling (a diagnostic, not a model of the switch).

KVSwitch's controller predicts L̂ = α·prev + (1−α)·cur from HotkeyCount
(exact, installed keys) and HashPipe (approximate, the rest) and keeps the K
largest. This replaces both by an exact count of every key's queries in each
period (the same i.i.d. Zipf draws the simulator makes: a multinomial of the
period's queries), with the controller's rule and judge: α, top K, ties in
random order (the controller breaks them by key bytes, unrelated to rank),
|predicted ∩ true top-K| / K averaged over the periods, the first period's
``prev`` the popularity shares as in a prewarmed ``start()`` (negligible next
to counts). What it leaves out, the switch's counters, is what a run's
accuracy below this ceiling is lost to (docs/kvswitch.md "Keys below T").

    python tools/kvswitch_oracle.py --alpha 0.99 --queries 300000 -k 1000 10000

``--sim W`` measures the same inside the simulator instead: fig8's point
(β, 10^6 keys, 3 M req/s, 100 ms periods, 0.3 s) with HashPipe widened to
W cells a stage (kvswitch.c's ``hashpipe_width``; the controller reads them
all), so that every key of a period keeps its own cell: exact counts where
the default K/d cells a stage undercount and evict.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from netkv.sim.engine import zipf_probabilities


def oracle_accuracy(p: np.ndarray, k: int, queries: int, periods: int, alpha_pred: float,
                    rng: np.random.Generator) -> float:
    """Mean over ``periods`` of |top-K of the exact-count prediction ∩ true
    top-K| / K; ``p`` is the popularity by rank (rank 0 hottest)."""
    prev = p.copy()
    acc = []
    for _ in range(periods):
        cur = rng.multinomial(queries, p).astype(np.float64)
        pred = alpha_pred * prev + (1 - alpha_pred) * cur
        top = np.lexsort((rng.random(len(p)), -pred))[:k]
        acc.append(np.count_nonzero(top < k) / k)
        prev = cur
    return float(np.mean(acc))


def sim_accuracy(beta: float, k: int, width: int, keys: int = 1_000_000,
                 duration: float = 0.3) -> list[float]:
    """Per-period accuracy of the controller's own prediction on the
    simulator, HashPipe ``width`` cells a stage (0: kvswitch.c's K/d)."""
    from netkv.config.compose import load
    from netkv.protocols import lookup
    from netkv.targets.sim import SimTarget

    cfg = load(["servers=32", f"keys={keys}", "write_ratio=0", "workload.key_size=16",
                "workload.value_size=128", "protocol=kvswitch", "protocol.period_ms=100",
                f"duration={duration}", f"alpha={beta}", f"protocol.hot_keys={k}"])
    plugin = lookup("kvswitch")
    base = plugin.sim_controller(cfg)

    def factory(engine):  # type: ignore[no-untyped-def]
        epochs = base(engine)
        if width:
            base.last.hp_cells = cfg.protocol.hashpipe_stages * width  # type: ignore[attr-defined]
        factory.last = base.last  # type: ignore[attr-defined]
        return epochs

    params = plugin.pipeline_params(cfg) + (f";hashpipe_width={width}" if width else "")
    tg = SimTarget(cfg, controller_factory=factory, params=params)
    tg.run_point(3e6, 1)
    return list(factory.last.stats.accuracy)  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--alpha", type=float, nargs="+", default=[0.99], help="Zipf skew β")
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=300_000, help="queries per period")
    ap.add_argument("--periods", type=int, default=3)
    ap.add_argument("--alpha-pred", type=float, default=0.5, help="α, weight of the last period")
    ap.add_argument("-k", type=int, nargs="+", default=[1000, 2000, 5000, 10000])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sim", type=int, metavar="W", default=None,
                    help="run the simulator, HashPipe W cells a stage (0: K/d)")
    a = ap.parse_args(argv)
    if a.keys < max(a.k) or min(a.k) < 1 or a.queries < 1 or a.periods < 1 \
            or not 0 <= a.alpha_pred < 1:
        print("kvswitch_oracle: need 1 <= K <= keys, queries >= 1, periods >= 1, "
              "0 <= alpha-pred < 1", file=sys.stderr)
        return 2
    if a.sim is not None and not 0 <= a.sim <= 1 << 20:
        print("kvswitch_oracle: --sim W needs 0 <= W <= 2^20", file=sys.stderr)
        return 2
    for beta in a.alpha:
        if a.sim is not None:
            for k in a.k:
                acc = sim_accuracy(beta, k, a.sim, a.keys)
                print(f"beta {beta}, K={k}, HashPipe width {a.sim or 'K/d'}: per period "
                      + ", ".join(f"{x:.3f}" for x in acc) + f"; mean {np.mean(acc):.3f}")
            continue
        p = zipf_probabilities(a.keys, beta)
        row = [oracle_accuracy(p, k, a.queries, a.periods, a.alpha_pred,
                               np.random.default_rng(a.seed)) for k in a.k]
        print(f"beta {beta}: " + ", ".join(f"K={k}: {x:.3f}" for k, x in zip(a.k, row)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
