/* hist.c - log-linear histogram (see netkv/hist.h for the bucket layout). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/hist.h"

uint32_t nk_hist_nbuckets(unsigned sub_bits, unsigned max_bits)
{
	return (max_bits - sub_bits + 1u) << sub_bits;
}

int nk_hist_init(struct nk_hist *h, unsigned sub_bits, unsigned max_bits)
{
	memset(h, 0, sizeof(*h));
	if (sub_bits < 1 || sub_bits > 16 || max_bits <= sub_bits + 1 || max_bits > 63)
		return -1;
	h->sub_bits = sub_bits;
	h->max_bits = max_bits;
	h->nbuckets = nk_hist_nbuckets(sub_bits, max_bits);
	h->counts = calloc(h->nbuckets, sizeof(uint64_t));
	if (!h->counts)
		return -1;
	h->min = UINT64_MAX;
	return 0;
}

void nk_hist_free(struct nk_hist *h)
{
	free(h->counts);
	h->counts = NULL;
	h->nbuckets = 0;
}

void nk_hist_reset(struct nk_hist *h)
{
	memset(h->counts, 0, h->nbuckets * sizeof(uint64_t));
	h->total = h->clamped = h->sum = h->max = 0;
	h->min = UINT64_MAX;
}

int nk_hist_merge(struct nk_hist *dst, const struct nk_hist *src)
{
	if (dst->sub_bits != src->sub_bits || dst->max_bits != src->max_bits)
		return -1;
	for (uint32_t i = 0; i < dst->nbuckets; i++)
		dst->counts[i] += src->counts[i];
	dst->total += src->total;
	dst->clamped += src->clamped;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	return 0;
}

uint64_t nk_hist_bucket_lower(const struct nk_hist *h, uint32_t idx)
{
	uint32_t s = h->sub_bits;
	if (idx < (2u << s))
		return idx;
	uint32_t shift = (idx >> s) - 1u;
	uint64_t top = idx - (shift << s);
	return top << shift;
}

uint64_t nk_hist_bucket_width(const struct nk_hist *h, uint32_t idx)
{
	uint32_t s = h->sub_bits;
	if (idx < (2u << s))
		return 1;
	return 1ULL << ((idx >> s) - 1u);
}

/* floor(q * n) + 1, at most n; q * n within 1e-9 (relative) of an integer
 * counts as that integer (0.99 * 10000 is 9899.999... in binary) */
static uint64_t rank_above(double q, uint64_t n)
{
	double x = q * (double)n;
	double r = nearbyint(x);
	if (fabs(x - r) <= 1e-9 * (r > 1.0 ? r : 1.0))
		x = r;
	uint64_t rank = (uint64_t)floor(x) + 1u;
	return rank < n ? rank : n;
}

double nk_hist_quantile_lost(const struct nk_hist *h, double q, uint64_t lost)
{
	uint64_t n = h->total + lost;
	if (!n)
		return 0.0;
	if (q < 0.0)
		q = 0.0;
	if (q > 1.0)
		q = 1.0;
	uint64_t rank = rank_above(q, n);
	if (rank > h->total)
		return INFINITY;
	uint64_t cum = 0;
	for (uint32_t i = 0; i < h->nbuckets; i++) {
		cum += h->counts[i];
		if (cum >= rank) {
			if (i == h->nbuckets - 1 && h->clamped)
				return (double)h->max;
			uint64_t lo = nk_hist_bucket_lower(h, i);
			uint64_t w = nk_hist_bucket_width(h, i);
			double mid = (double)lo + (double)(w - 1) / 2.0;
			/* never report outside the observed range */
			if (mid > (double)h->max)
				mid = (double)h->max;
			if (mid < (double)h->min)
				mid = (double)h->min;
			return mid;
		}
	}
	return (double)h->max;
}

double nk_hist_quantile(const struct nk_hist *h, double q)
{
	return nk_hist_quantile_lost(h, q, 0);
}

int nk_hist_add_buckets(struct nk_hist *h, const uint64_t *lower, const uint64_t *counts,
			uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (nk_hist_bucket_lower(h, nk_hist_index(h, lower[i])) != lower[i])
			return -1;
	for (uint32_t i = 0; i < n; i++) {
		if (!counts[i])
			continue;
		uint32_t b = nk_hist_index(h, lower[i]);
		uint64_t hi = lower[i] + nk_hist_bucket_width(h, b) - 1u;
		h->counts[b] += counts[i];
		h->total += counts[i];
		h->sum += counts[i] * (lower[i] + (hi - lower[i]) / 2u);
		if (lower[i] < h->min)
			h->min = lower[i];
		if (hi > h->max)
			h->max = hi;
	}
	return 0;
}

double nk_hist_mean(const struct nk_hist *h)
{
	return h->total ? (double)h->sum / (double)h->total : 0.0;
}
