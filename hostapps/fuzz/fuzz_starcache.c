/* fuzz_starcache.c - libFuzzer harness: StarCache (lookup table, per-key
 * queues of parked reads, cache packets in the loop). */
#define FUZZ_PROTOCOL "starcache"
#define FUZZ_PARAMS "keys=8;slots=4"
#define FUZZ_PARAMS_ALT "keys=8;slots=4;faithful=1" /* input flag bit 1: the paper's 1-bit write flag */
#include "netkv/constants.h"
#include "fuzz_common.h"

/* the message's HKEY becomes a cached key in the VALID state, as after the
 * controller's insert and a completed fetch (netkv/protocols/starcache.py),
 * so that reads park in its queue and cache packets serve them; the {node,
 * loop} groups need no set-up here (the harness only checks ports) */
static void fuzz_setup(struct rack *r, const struct nk_msg *m)
{
	uint64_t a[2] = { m->hkey[1] % 8, m->hkey[0] % FUZZ_SERVERS };   /* idx, home */
	if (r->pipe->table_add(r->pstate, "lookup", m->hkey, 2, a, 2) == 0)
		(void)r->pipe->reg_write(r->pstate, "state", (uint32_t)a[0], SC_STATE_VALID);
}
