/* fuzz_netcache.c - libFuzzer harness: NetCache (the switch cache). */
#define FUZZ_PROTOCOL "netcache"
#define FUZZ_PARAMS "cache_items=16"
#include "fuzz_common.h"

/* the cache is filled by the protocol's own packets (CACHE_UPDATE from a
 * server); nothing to install */
static void fuzz_setup(struct rack *r, const struct nk_msg *m)
{
	(void)r;
	(void)m;
}
