/* test_workload.c - key bytes, ring placement, alias sampler, dynamics. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/wire.h"
#include "netkv/workload.h"

#include "expect.h"

int main(void)
{
	/* key format: 16-digit hex blocks of mix64(id + b * step) */
	uint8_t k[64];
	char hex[3][17];
	for (int b = 0; b < 3; b++)
		snprintf(hex[b], sizeof(hex[b]), "%016llx",
			 (unsigned long long)nk_mix64(12345 + b * NK_KEY_BLOCK_STEP));
	nk_key_bytes(12345, 40, k);
	for (int i = 0; i < 40; i++)
		CHECK(k[i] == (uint8_t)hex[i / 16][i % 16], "key byte %d", i);
	CHECK(nk_key_hash(12345, 40) == nk_djb2(k, 40), "keyhash = djb2(key bytes)");
	/* a key's first n >= 8 bytes made alone are those of the whole key (the
	 * simulator makes only the bytes a client reads: client_key_bytes) */
	for (unsigned n = 8; n <= 40; n++) {
		uint8_t part[64];
		nk_key_bytes(12345, n, part);
		CHECK(!memcmp(part, k, n), "first %u key bytes made alone", n);
	}
	/* djb2's low bits vary over keys */
	unsigned low[4] = {0};
	for (uint64_t id = 0; id < 4000; id++)
		low[nk_key_hash(id, 64) & 3]++;
	for (int i = 0; i < 4; i++)
		CHECK(low[i] > 800, "keyhash mod 4 = %d: %u of 4000", i, low[i]);

	/* ring: lookup equals a brute-force scan; equal ranges are balanced */
	struct nk_ring ring;
	CHECK(nk_ring_init(&ring, 16, 16, NK_RING_CONSISTENT) == 0, "ring init");
	struct nk_rng r;
	nk_rng_seed(&r, 7, 0);
	for (int i = 0; i < 20000; i++) {
		uint32_t h = (uint32_t)nk_rng_below(&r, NK_KEYHASH_SPACE);
		uint32_t best = UINT32_MAX, owner = ring.owner[0];
		for (uint32_t p = 0; p < ring.n_points; p++)
			if (ring.pos[p] >= h && ring.pos[p] < best) {
				best = ring.pos[p];
				owner = ring.owner[p];
			}
		CHECK(nk_ring_lookup(&ring, h) == owner, "ring lookup %u", h);
		if (failures)
			break;
	}
	nk_ring_free(&ring);
	CHECK(nk_ring_init(&ring, 16, 16, NK_RING_EQUAL_RANGES) == 0, "equal ranges");
	unsigned cnt[16] = {0};
	for (uint64_t h = 0; h < NK_KEYHASH_SPACE; h += 1u << 12)
		cnt[nk_ring_lookup(&ring, (uint32_t)h)]++;
	for (int s = 1; s < 16; s++)
		CHECK(cnt[s] == cnt[0], "equal ranges unbalanced: %u vs %u", cnt[s], cnt[0]);
	CHECK(nk_ring_lookup(&ring, 0) == 0 && nk_ring_lookup(&ring, 0x7FFFFFFF) == 15,
	      "range ends");
	nk_ring_free(&ring);

	/* alias sampler: Zipf 1.2 over 1000 ranks, 20M samples */
	struct nk_workload_cfg wc = {.kind = NK_WL_ZIPF, .n_keys = 1000, .alpha = 1.2, .seed = 3,
				     .key_size = 64, .n_servers = 4, .vnodes = 16,
				     .n_value_classes = 2, .value_sizes = {64, 1024},
				     .value_weights = {0.12, 0.88}};
	char err[200];
	struct nk_workload *wl = nk_workload_new(&wc, err, sizeof(err));
	CHECK(wl != NULL, "workload: %s", err);
	if (!wl)
		return 1;
	const int n = 20000000;
	uint32_t *hits = calloc(wc.n_keys, sizeof(uint32_t));
	for (int i = 0; i < n; i++)
		hits[nk_workload_sample(wl, &r)]++;
	double chi2 = 0.0;
	for (uint32_t i = 0; i < wc.n_keys; i++) {
		double e = wl->probs[i] * n;
		chi2 += (hits[i] - e) * (hits[i] - e) / e;
	}
	/* 999 degrees of freedom: mean 999, sd ~45; 1250 is > 5 sd */
	CHECK(chi2 < 1250.0, "alias chi2 = %.1f", chi2);
	CHECK(fabs(hits[0] / (double)n - wl->probs[0]) < 0.002, "top rank share");
	/* value mix: about 12% of keys have 64 B values */
	unsigned small = 0;
	for (uint32_t i = 0; i < wc.n_keys; i++) {
		small += wl->ranks[i].value_len == 64;
		CHECK(wl->ranks[i].value_len == nk_workload_value_len(wl, wl->ranks[i].keyhash),
		      "value len by keyhash");
		CHECK(wl->ranks[i].home == nk_ring_lookup(&wl->ring, wl->ranks[i].keyhash), "home");
	}
	CHECK(small > 80 && small < 160, "value mix: %u of 1000 small", small);
	/* ranks are a permutation of key ids */
	unsigned char *seen = calloc(wc.n_keys, 1);
	for (uint32_t i = 0; i < wc.n_keys; i++)
		seen[wl->ranks[i].key]++;
	for (uint32_t i = 0; i < wc.n_keys; i++)
		CHECK(seen[i] == 1, "permutation");

	/* dynamics: hot-in puts the coldest keys on top */
	struct nk_rank_info *rk = malloc(wc.n_keys * sizeof(*rk));
	memcpy(rk, wl->ranks, wc.n_keys * sizeof(*rk));
	nk_dynamics_apply(NK_DYN_HOT_IN, rk, wc.n_keys, 100, 0, &r);
	CHECK(rk[0].key == wl->ranks[900].key && rk[99].key == wl->ranks[999].key &&
		      rk[100].key == wl->ranks[0].key, "hot-in");
	memcpy(rk, wl->ranks, wc.n_keys * sizeof(*rk));
	nk_dynamics_apply(NK_DYN_SWAP, rk, wc.n_keys, 10, 0, &r);
	CHECK(rk[0].key == wl->ranks[999].key && rk[999].key == wl->ranks[0].key &&
		      rk[10].key == wl->ranks[10].key, "swap");

	/* YCSB scrambled zipfian: in range, skewed */
	struct nk_workload_cfg yc = wc;
	yc.kind = NK_WL_YCSB;
	yc.alpha = 0.99;
	struct nk_workload *yw = nk_workload_new(&yc, err, sizeof(err));
	CHECK(yw != NULL, "ycsb: %s", err);
	if (yw) {
		memset(hits, 0, wc.n_keys * sizeof(uint32_t));
		for (int i = 0; i < 1000000; i++)
			hits[nk_workload_sample(yw, &r)]++;
		uint32_t mx = 0;
		for (uint32_t i = 0; i < wc.n_keys; i++)
			mx = hits[i] > mx ? hits[i] : mx;
		CHECK(mx > 20000, "ycsb skew: max %u", mx);
		nk_workload_free(yw);
	}
	yc.alpha = 1.2;
	CHECK(nk_workload_new(&yc, err, sizeof(err)) == NULL, "ycsb rejects alpha >= 1");

	free(rk);
	free(seen);
	free(hits);
	nk_workload_free(wl);
	printf("test_workload: %s (alias chi2 %.1f over 999 dof)\n", failures ? "FAILED" : "ok", chi2);
	return failures ? 1 : 0;
}
