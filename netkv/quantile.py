"""The one quantile function: libnetkv's ``nk_hist_quantile_lost`` (hist.h),
called through cffi on a histogram rebuilt from its non-empty buckets.

Every target reports latency through it: the simulator's and Mininet's
points (``PointResult.tail_ns``, the SLO test for any ``slo.percentile``) and
Mininet's pooled timeline windows; the simulator's windows call the same C
function inside libnetkv. Requests that never completed count as infinitely
slow (``lost``), and "q-quantile <= bound" means MORE than a fraction q of
the requests finished within the bound (hist.h).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Any

import cffi
import numpy as np

from netkv.native import library_path

SUB_BITS = 7    # NK_HIST_SUB_BITS: points (simulator and kvclient)
MAX_BITS = 44   # NK_HIST_MAX_BITS

CDEF = """
struct nk_hist {
    uint32_t sub_bits; uint32_t max_bits; uint32_t nbuckets; uint64_t *counts;
    uint64_t total; uint64_t clamped; uint64_t sum; uint64_t min; uint64_t max;
};
int nk_hist_init(struct nk_hist *h, unsigned sub_bits, unsigned max_bits);
void nk_hist_free(struct nk_hist *h);
int nk_hist_add_buckets(struct nk_hist *h, const uint64_t *lower, const uint64_t *counts,
                        uint32_t n);
double nk_hist_quantile_lost(const struct nk_hist *h, double q, uint64_t lost);
size_t nk_sim_abi_sizeof(const char *name);
"""


@cache
def _lib() -> tuple[Any, Any]:
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    lib = ffi.dlopen(str(library_path()))
    if lib.nk_sim_abi_sizeof(b"nk_hist") != ffi.sizeof("struct nk_hist"):
        raise RuntimeError("struct nk_hist: netkv/quantile.py no longer matches hist.h")
    return ffi, lib


def quantiles(lower: Sequence[float] | np.ndarray, counts: Sequence[int] | np.ndarray,
              qs: Sequence[float], lost: int = 0, sub_bits: int = SUB_BITS,
              max_bits: int = MAX_BITS) -> list[float]:
    """Quantiles (q in [0, 1]) of a bucketed latency histogram (bucket lower
    bounds and counts, ns), ``lost`` requests counted as infinitely slow:
    inf when the quantile falls among them; 0.0 when there is nothing."""
    ffi, lib = _lib()
    lo = np.ascontiguousarray(np.asarray(lower, dtype=np.float64).astype(np.uint64))
    cnt = np.ascontiguousarray(np.asarray(counts, dtype=np.int64).astype(np.uint64))
    h = ffi.new("struct nk_hist *")
    if lib.nk_hist_init(h, sub_bits, max_bits):
        raise ValueError(f"histogram layout sub_bits={sub_bits} max_bits={max_bits}")
    try:
        if lib.nk_hist_add_buckets(h, ffi.from_buffer("uint64_t[]", lo),
                                   ffi.from_buffer("uint64_t[]", cnt), len(lo)):
            raise ValueError("a histogram lower bound does not start a bucket "
                             f"(sub_bits={sub_bits})")
        return [float(lib.nk_hist_quantile_lost(h, float(q), max(int(lost), 0))) for q in qs]
    finally:
        lib.nk_hist_free(h)


def bucket_lower(values_ns: np.ndarray, sub_bits: int = SUB_BITS) -> np.ndarray:
    """Lower bound of the bucket each value falls in (hist.h's layout)."""
    v = np.asarray(values_ns, dtype=np.float64).round().astype(np.uint64)
    out = v.copy()
    big = v >= (2 << sub_bits)
    if big.any():
        msb = np.floor(np.log2(v[big].astype(np.float64))).astype(np.uint64)
        shift = msb - np.uint64(sub_bits)
        out[big] = (v[big] >> shift) << shift
    return out


def histogram(values_ns: np.ndarray, sub_bits: int = SUB_BITS) -> tuple[np.ndarray, np.ndarray]:
    """(bucket lower bounds, counts) of raw latencies, as a target reports them."""
    lower, counts = np.unique(bucket_lower(values_ns, sub_bits), return_counts=True)
    return lower.astype(np.float64), counts.astype(np.int64)


PERCENTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}


def latency_summary(lower: np.ndarray, counts: np.ndarray, lost: int,
                    mean_ns: float) -> dict[str, float]:
    """A point's ``latency_ns``: the mean of the completions (NaN without
    any: the simulator's histogram says 0, Mininet's clients inf), and the
    percentiles over every issued request (``lost`` ones infinitely slow)."""
    done = int(np.sum(counts))
    mean = mean_ns if done else math.nan
    if done + lost == 0:
        return {"mean": mean, **{k: math.inf for k in PERCENTILES}}
    values = quantiles(lower, counts, list(PERCENTILES.values()), lost)
    return {"mean": mean, **dict(zip(PERCENTILES, values))}
