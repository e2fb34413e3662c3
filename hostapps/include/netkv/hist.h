/*
 * hist.h - log-linear latency histogram (HdrHistogram-style).
 *
 * Values are non-negative integers (the simulator records nanoseconds).
 * With `sub_bits` = S, values below 2^(S+1) get one bucket each (exact);
 * above, every power-of-two range [2^k, 2^(k+1)) is cut into 2^S equal
 * buckets, so a bucket is at most 2^-S of its lower bound wide. Quantiles
 * report the bucket midpoint, hence a relative error of at most 2^-(S+1)
 * (S = 7: <= 0.39 %, well inside the 1 % the spec asks for).
 *
 * Buckets: index(v) = v                         if v < 2^(S+1)
 *                   = shift*2^S + (v >> shift)  otherwise, shift = msb(v) - S
 * Values >= 2^max_bits are clamped into the last bucket (and counted in
 * `clamped`); `max` keeps the true maximum.
 */
#ifndef NETKV_HIST_H
#define NETKV_HIST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NK_HIST_SUB_BITS 7      /* default: 128 buckets per octave */
#define NK_HIST_MAX_BITS 44     /* default range: < 2^44 ns (~4.9 hours) */

struct nk_hist {
	uint32_t sub_bits;
	uint32_t max_bits;
	uint32_t nbuckets;
	uint64_t *counts;
	uint64_t total;
	uint64_t clamped;
	uint64_t sum;     /* exact sum of recorded values (mean without bucket error) */
	uint64_t min;
	uint64_t max;
};

/* 0 on success, -1 on bad parameters or allocation failure. */
int nk_hist_init(struct nk_hist *h, unsigned sub_bits, unsigned max_bits);
void nk_hist_free(struct nk_hist *h);
void nk_hist_reset(struct nk_hist *h);
/* dst += src; both must have the same sub_bits/max_bits. 0 or -1. */
int nk_hist_merge(struct nk_hist *dst, const struct nk_hist *src);

/* number of buckets for (sub_bits, max_bits) */
uint32_t nk_hist_nbuckets(unsigned sub_bits, unsigned max_bits);
uint64_t nk_hist_bucket_lower(const struct nk_hist *h, uint32_t idx);
uint64_t nk_hist_bucket_width(const struct nk_hist *h, uint32_t idx);

/* The one quantile of netkv (Python calls it through cffi: netkv/quantile.py).
 * Over N = total + lost values, the `lost` ones (requests that never
 * completed) counted as infinitely slow: the value of rank floor(q * N) + 1
 * (at most N), i.e. the smallest value with MORE than a fraction q of all N
 * at or below it, reported as its bucket's midpoint (clamped to the observed
 * range). So "quantile(0.99) <= bound" means more than 99% of the requests
 * finished within the bound. INFINITY when that rank falls among the lost;
 * 0 if N = 0. */
double nk_hist_quantile_lost(const struct nk_hist *h, double q, uint64_t lost);
/* nk_hist_quantile_lost(h, q, 0) */
double nk_hist_quantile(const struct nk_hist *h, double q);
/* Add values from non-empty buckets given by their lower bounds (as
 * nk_sim_hist and kvclient's JSON list them): counts[i] values anywhere in
 * the bucket starting at lower[i], so min/max widen to the bucket bounds.
 * 0, or -1 (nothing added) if a lower bound does not start a bucket. */
int nk_hist_add_buckets(struct nk_hist *h, const uint64_t *lower, const uint64_t *counts,
			uint32_t n);
double nk_hist_mean(const struct nk_hist *h);

static inline uint32_t nk_hist_index(const struct nk_hist *h, uint64_t v)
{
	uint32_t s = h->sub_bits;
	if (v < (2ULL << s))
		return (uint32_t)v;
	uint32_t msb = 63u - (uint32_t)__builtin_clzll(v);
	if (msb >= h->max_bits)
		return h->nbuckets - 1;
	uint32_t shift = msb - s;
	return (shift << s) + (uint32_t)(v >> shift);
}

static inline void nk_hist_add(struct nk_hist *h, uint64_t v)
{
	uint32_t i = nk_hist_index(h, v);
	if (v >> h->max_bits)
		h->clamped++;
	h->counts[i]++;
	h->total++;
	h->sum += v;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

#ifdef __cplusplus
}
#endif

#endif /* NETKV_HIST_H */
