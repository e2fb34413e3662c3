/* test_hist.c - log-linear histogram: bucket layout and quantile error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "netkv/hist.h"
#include "netkv/rng.h"

#include "expect.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(void)
{
	struct nk_hist h;
	CHECK(nk_hist_init(&h, NK_HIST_SUB_BITS, NK_HIST_MAX_BITS) == 0, "init");
	struct nk_rng r;
	nk_rng_seed(&r, 42, 0);

	/* every value lies in its bucket, buckets are contiguous */
	for (int i = 0; i < 1000000; i++) {
		uint64_t v = nk_rng_next(&r) >> (20 + nk_rng_below(&r, 44));
		uint32_t b = nk_hist_index(&h, v);
		uint64_t lo = nk_hist_bucket_lower(&h, b), w = nk_hist_bucket_width(&h, b);
		CHECK(lo <= v && v < lo + w, "v=%llu in bucket %u [%llu,+%llu)",
		      (unsigned long long)v, b, (unsigned long long)lo, (unsigned long long)w);
		CHECK((double)w <= ldexp(1.0, -NK_HIST_SUB_BITS) * (double)(lo > 0 ? lo : 1) || w == 1,
		      "bucket %u too wide", b);
		if (failures > 5)
			return 1;
	}
	for (uint32_t b = 0; b + 2 < h.nbuckets; b++)
		CHECK(nk_hist_bucket_lower(&h, b) + nk_hist_bucket_width(&h, b) ==
			      nk_hist_bucket_lower(&h, b + 1), "gap after bucket %u", b);

	/* quantiles of lognormal latencies vs the exact sorted sample */
	const int n = 400000;
	uint64_t *v = malloc(n * sizeof(*v));
	double worst = 0.0;
	for (int i = 0; i < n; i++) {
		v[i] = (uint64_t)(20000.0 * exp(1.2 * nk_rng_normal(&r)));
		nk_hist_add(&h, v[i]);
	}
	qsort(v, n, sizeof(*v), cmp_u64);
	const double qs[] = {0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999};
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		uint64_t rank = (uint64_t)floor(qs[i] * n + 1e-6) + 1u; /* more than q at or below */
		double exact = (double)v[rank - 1];
		double got = nk_hist_quantile(&h, qs[i]);
		double err = fabs(got - exact) / exact;
		if (err > worst)
			worst = err;
		CHECK(err <= 0.01, "q=%g exact=%g hist=%g err=%.4f", qs[i], exact, got, err);
	}
	/* the same buckets, rebuilt from their lower bounds (the Python path) */
	struct nk_hist b;
	CHECK(nk_hist_init(&b, NK_HIST_SUB_BITS, NK_HIST_MAX_BITS) == 0, "init");
	uint64_t *lower = malloc(h.nbuckets * sizeof(*lower));
	for (uint32_t i = 0; i < h.nbuckets; i++)
		lower[i] = nk_hist_bucket_lower(&h, i);
	CHECK(nk_hist_add_buckets(&b, lower, h.counts, h.nbuckets) == 0, "add_buckets");
	CHECK(b.total == h.total, "rebuilt total");
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]) - 1; i++)
		CHECK(nk_hist_quantile(&b, qs[i]) == nk_hist_quantile(&h, qs[i]), "rebuilt q=%g", qs[i]);
	lower[0] = 3u << 20; /* inside a bucket, not its start */
	lower[1] = (3u << 20) + 1u;
	CHECK(nk_hist_add_buckets(&b, lower, h.counts, 2) == -1, "bad lower bound refused");
	free(lower);
	nk_hist_free(&b);

	/* unfinished requests count as infinitely slow: 1% lost and every
	 * completion fast is not "p99 fast" (more than 99% must be within) */
	struct nk_hist f;
	CHECK(nk_hist_init(&f, NK_HIST_SUB_BITS, NK_HIST_MAX_BITS) == 0, "init");
	for (int i = 0; i < 9900; i++)
		nk_hist_add(&f, 1000);
	CHECK(nk_hist_quantile(&f, 0.99) == 1000.0, "p99 of completions");
	CHECK(isinf(nk_hist_quantile_lost(&f, 0.99, 100)), "1%% lost: p99 infinite");
	CHECK(nk_hist_quantile_lost(&f, 0.99, 99) == 1000.0, "under 1%% lost: p99 finite");
	CHECK(isinf(nk_hist_quantile_lost(&f, 0.5, 9901)), "most lost: median infinite");
	CHECK(nk_hist_quantile_lost(&f, 1.0, 0) == 1000.0, "q = 1: the max");
	nk_hist_reset(&f);
	CHECK(nk_hist_quantile_lost(&f, 0.5, 0) == 0.0, "empty: 0");
	CHECK(isinf(nk_hist_quantile_lost(&f, 0.5, 1)), "only lost: infinite");
	nk_hist_free(&f);

	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += (double)v[i];
	CHECK(fabs(nk_hist_mean(&h) - sum / n) < 1e-6 * sum / n, "mean");
	free(v);
	nk_hist_free(&h);
	printf("test_hist: %s (worst quantile error %.4f%%)\n", failures ? "FAILED" : "ok",
	       100.0 * worst);
	return failures ? 1 : 0;
}
