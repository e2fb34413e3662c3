/* fuzz_hash.c - libFuzzer harness: the static-hashing baseline (plain wire format). */
#define FUZZ_PROTOCOL "hash"
#include "fuzz_common.h"

static void fuzz_setup(struct rack *r, const struct nk_msg *m)
{
	(void)r;
	(void)m; /* no control-plane state */
}
