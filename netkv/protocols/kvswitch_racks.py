"""Fig. 7f's two-level KVSwitch (32 racks x 32 servers) in the fluid model.

The paper's scalability run puts KVSwitch at the spine, with racks as its
"servers", and at every rack's leaf over its servers (digest §8.12); a read
the spine redirects to a rack that does not own the key is served there by
the server of the owner's index (every key is on every server, as in the
simulator's preload). This module plans both levels with the controller's
own prewarmed rules (``plan_threshold``: T lowered by γ until the fluid
max/mean − 1 <= ε; r = min(⌈L/T⌉, M) copies on the ring): the spine on the
workload's popularity, each leaf on what reaches it after the spine. It
gives the per-server load shares those plans leave, exactly (no sampling,
no periods): the plans a multi-switch simulator would install, and the
balance they can reach. It is not that simulator (docs/kvswitch.md,
"Fig. 7f").

``python -m netkv.protocols.kvswitch_racks --alpha 0.99`` prints λ over the
servers for Original, leaves only, spine only and spine + leaves.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np

from netkv.loadstats import imbalance_factor
from netkv.protocols.kvswitch_plan import fluid_loads, plan_threshold

LEVELS = {"original": (False, False), "leaves": (False, True), "spine": (True, False),
          "spine+leaves": (True, True)}


@dataclass
class RackPlan:
    loads: np.ndarray        # (racks, per_rack): each server's share of the load
    spine_keys: int          # keys the spine replicates over racks
    leaf_keys: list[int]     # keys each leaf replicates over its servers

    @property
    def imbalance(self) -> float:
        return imbalance_factor(self.loads.ravel())


def owners_equal_ranges(keyhash: np.ndarray, n: int, vnodes: int = 16) -> np.ndarray:
    """The owner of each keyhash among n servers (nk_ring_lookup's equal
    ranges: 16·n equal ranges of the 2^31 keyhash space, range j -> j mod n)."""
    kh = keyhash.astype(np.uint64) & np.uint64(0x7FFFFFFF)
    return ((kh * np.uint64(vnodes * n)) >> np.uint64(31)) % np.uint64(n)


def _level(shares: np.ndarray, owners: np.ndarray, m: int, k: int, epsilon: float,
           gamma: float, rest: np.ndarray) -> np.ndarray:
    """One switch's plan: copies per key (1 = not installed) for the K
    largest of ``shares`` (fractions of this switch's load), the others
    and ``rest`` staying on their owners."""
    rs = np.ones(len(shares), dtype=np.int64)
    if not len(shares):
        return rs
    top = np.argsort(-shares, kind="stable")[:k]
    others = np.ones(len(shares), dtype=bool)
    others[top] = False
    rest = rest + np.bincount(owners[others], weights=shares[others], minlength=m)
    t = plan_threshold(shares[top], owners[top], m, 1.0 / m, epsilon, gamma, rest)
    rs[top] = np.where(shares[top] > t, np.minimum(np.ceil(shares[top] / t), m), 1)
    return rs


def after_spine(shares: np.ndarray, owner: np.ndarray, racks: int, per_rack: int, k: int,
                epsilon: float, gamma: float,
                spine: bool = True) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """The spine's plan (copies per key over racks) and what reaches each
    leaf after it: per leaf, the keys (indexes into ``shares``) and the
    share of the whole load each brings there (key i's share / r on each of
    its r racks, at the owner's index). The rest of the load (1 − Σ shares)
    is spread evenly over every server (equal ranges)."""
    n = racks * per_rack
    cold = (1.0 - float(shares.sum())) / n
    rack = owner // per_rack
    rs = (_level(shares, rack, racks, k, epsilon, gamma, np.full(racks, cold * per_rack))
          if spine else np.ones(len(shares), dtype=np.int64))
    copies = np.repeat(np.arange(len(shares)), rs)
    ordinal = np.arange(len(copies)) - np.repeat(np.cumsum(rs) - rs, rs)
    at_rack = (rack[copies] + ordinal * np.maximum(1, racks // rs[copies])) % racks
    load = shares[copies] / rs[copies]
    return rs, [(copies[at_rack == j], load[at_rack == j]) for j in range(racks)]


def plan_racks(shares: np.ndarray, owner: np.ndarray, racks: int, per_rack: int, k: int,
               epsilon: float, gamma: float, spine: bool = True,
               leaves: bool = True) -> RackPlan:
    """Plan the spine (racks as servers) then each leaf. ``shares``: the
    popularity of the tracked keys; the rest of the load (1 − Σ shares) is
    spread evenly over every server (equal ranges, the controller's
    assumption). ``owner``: each key's server, 0..racks·per_rack − 1, rack
    = owner // per_rack."""
    cold = (1.0 - float(shares.sum())) / (racks * per_rack)
    idx = owner % per_rack
    rs, reach = after_spine(shares, owner, racks, per_rack, k, epsilon, gamma, spine)
    loads = np.zeros((racks, per_rack))
    leaf_keys = []
    for j, (keys, sh) in enumerate(reach):
        ow = idx[keys]
        total = per_rack * cold + float(sh.sum())
        rest = np.full(per_rack, cold)
        r_leaf = (_level(sh / total, ow, per_rack, k, epsilon, gamma, rest / total)
                  if leaves else np.ones(len(sh), dtype=np.int64))
        leaf_keys.append(int((r_leaf > 1).sum()))
        loads[j] = fluid_loads(sh, ow, r_leaf, per_rack, rest)
    return RackPlan(loads, int((rs > 1).sum()), leaf_keys)


def workload_keys(keys: int, alpha: float, tracked: int) -> tuple[np.ndarray, np.ndarray]:
    """The simulator's key space (keyhash per rank) and Zipf shares of its
    ``tracked`` most popular keys."""
    from netkv.config.compose import load
    from netkv.sim.engine import Workload, zipf_probabilities

    cfg = load(["protocol=kvswitch", "servers=32", f"keys={keys}", f"alpha={alpha}"])
    with Workload.from_config(cfg) as wl:
        keyhash = wl.rank_info()["keyhash"][:tracked].copy()
    return keyhash, zipf_probabilities(keys, alpha)[:tracked]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m netkv.protocols.kvswitch_racks",
                                 description="Fig. 7f's two-level KVSwitch in the fluid model")
    ap.add_argument("--alpha", type=float, default=0.99)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--racks", type=int, default=32)
    ap.add_argument("--per-rack", type=int, default=32)
    ap.add_argument("--hot-keys", type=int, default=10_000)
    ap.add_argument("--epsilon", type=float, default=0.05)
    ap.add_argument("--gamma", type=float, default=0.8)
    a = ap.parse_args(argv)
    if not (a.alpha > 0 and a.keys >= a.hot_keys >= 1 and 1 <= a.racks <= 64
            and 1 <= a.per_rack <= 32 and a.epsilon > 0 and 0 < a.gamma < 1):
        print("kvswitch_racks: need alpha > 0, keys >= hot-keys >= 1, racks 1..64, "
              "per-rack 1..32 (the packed Valid word), epsilon > 0, 0 < gamma < 1",
              file=sys.stderr)
        return 2
    keyhash, shares = workload_keys(a.keys, a.alpha, min(a.keys, 4 * a.hot_keys))
    owner = owners_equal_ranges(keyhash, a.racks * a.per_rack).astype(np.int64)
    for name, (spine, leaves) in LEVELS.items():
        p = plan_racks(shares, owner, a.racks, a.per_rack, a.hot_keys, a.epsilon, a.gamma,
                       spine, leaves)
        print(f"{name:>13}: λ = {p.imbalance:.4f}, max/mean = "
              f"{p.loads.max() / p.loads.mean():.3f}, spine keys {p.spine_keys}, "
              f"leaf keys {min(p.leaf_keys)}-{max(p.leaf_keys)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
