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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--alpha", type=float, nargs="+", default=[0.99], help="Zipf skew β")
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=300_000, help="queries per period")
    ap.add_argument("--periods", type=int, default=3)
    ap.add_argument("--alpha-pred", type=float, default=0.5, help="α, weight of the last period")
    ap.add_argument("-k", type=int, nargs="+", default=[1000, 2000, 5000, 10000])
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    if a.keys < max(a.k) or min(a.k) < 1 or a.queries < 1 or a.periods < 1 \
            or not 0 <= a.alpha_pred < 1:
        print("kvswitch_oracle: need 1 <= K <= keys, queries >= 1, periods >= 1, "
              "0 <= alpha-pred < 1", file=sys.stderr)
        return 2
    for beta in a.alpha:
        p = zipf_probabilities(a.keys, beta)
        row = [oracle_accuracy(p, k, a.queries, a.periods, a.alpha_pred,
                               np.random.default_rng(a.seed)) for k in a.k]
        print(f"beta {beta}: " + ", ".join(f"K={k}: {x:.3f}" for k, x in zip(a.k, row)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
