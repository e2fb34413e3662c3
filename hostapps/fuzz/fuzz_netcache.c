/* fuzz_netcache.c - libFuzzer harness: NetCache (the switch cache). */
#define FUZZ_PROTOCOL "netcache"
#define FUZZ_PARAMS "cache_items=16"
#include "fuzz_common.h"

/* the first message's key (16 B words and its length: the cache table's
 * match) becomes a cached key, valid with an empty value, as after the
 * controller's prewarm, so that reads hit, writes invalidate and replies
 * refresh; other keys with the same 16 B but another length must miss */
static void fuzz_setup(struct rack *r, const struct nk_msg *m)
{
	uint64_t k[3] = { 0, 0, m->key_len }, idx = m->key_len % 16;
	for (unsigned i = 0; i < 16; i++)
		k[i / 8] = k[i / 8] << 8 | (i < m->key_len ? m->key[i] : 0);
	if (r->pipe->table_add(r->pstate, "cache", k, 3, &idx, 1) == 0)
		(void)r->pipe->reg_write(r->pstate, "cache_valid", (uint32_t)idx, 1);
}
