/* fuzz_starcache.c - libFuzzer harness: StarCache (lookup table, per-key
 * queues of parked reads, cache packets in the loop). */
#define FUZZ_PROTOCOL "starcache"
#define FUZZ_PARAMS "keys=8;slots=4"
#define FUZZ_PARAMS_ALT "keys=8;slots=4;faithful=1" /* input flag bit 1: the paper's 1-bit write flag */
#define FUZZ_KEYS 8
#define FUZZ_HAS_CHECK
#include "netkv/constants.h"
#include "fuzz_common.h"

/* the message's HKEY becomes a cached key in the VALID state, as after the
 * controller's insert and a completed fetch (netkv/protocols/starcache.py),
 * so that reads park in its queue and cache packets serve them; the {node,
 * loop} groups need no set-up here (the harness only checks ports). Once
 * per HKEY and input: a `lookup` add overwrites and resets the key's
 * registers, so adding it again for every packet kept no write in flight
 * from one packet to the next (the input's first packet: r->now still 0,
 * the HKEYs of the previous input forgotten). */
static void fuzz_setup(struct rack *r, const struct nk_msg *m)
{
	static uint64_t added[FUZZ_MAX_PKTS][2];
	static int n_added;
	if (!r->now)
		n_added = 0;
	for (int i = 0; i < n_added; i++)
		if (added[i][0] == m->hkey[0] && added[i][1] == m->hkey[1])
			return;
	if (n_added < FUZZ_MAX_PKTS) {
		added[n_added][0] = m->hkey[0];
		added[n_added++][1] = m->hkey[1];
	}
	uint64_t a[2] = { m->hkey[1] % FUZZ_KEYS, m->hkey[0] % FUZZ_SERVERS };   /* idx, home */
	if (r->pipe->table_add(r->pstate, "lookup", m->hkey, 2, a, 2) == 0)
		(void)r->pipe->reg_write(r->pstate, "state", (uint32_t)a[0], SC_STATE_VALID);
}

/* pending_writes counts the write numbers in flight (docs/starcache.md
 * "Registers"): it must equal popcount(wmask) after every packet, or a
 * reply could lower the count for a write no longer counted and let a
 * write in flight pass for a lone one. Faithful mode keeps both 0. Only
 * the packet's own key's cell (fuzz_setup's CacheIdx for its HKEY): two
 * register reads a packet. */
static void fuzz_check(struct rack *r, const struct nk_msg *m)
{
	uint32_t idx = (uint32_t)(m->hkey[1] % FUZZ_KEYS);
	uint64_t pw = 0, wm = 0;
	if (r->pipe->reg_read(r->pstate, "pending_writes", idx, &pw) ||
	    r->pipe->reg_read(r->pstate, "wmask", idx, &wm))
		abort();
	if (pw != (uint64_t)__builtin_popcountll(wm)) {
		fprintf(stderr, "fuzz: key %u: pending_writes %llu, wmask %#llx\n", idx,
			(unsigned long long)pw, (unsigned long long)wm);
		abort();
	}
}
