/* fuzz_kvswitch.c - libFuzzer harness: KVSwitch (hot-key table, HashPipe). */
#define FUZZ_PROTOCOL "kvswitch"
#define FUZZ_PARAMS "hot_keys=16;amo=1;amo_window=8"
#define FUZZ_PARAMS_ALT "hot_keys=16;strict=0" /* input flag bit 1: versions not enforced */
#include "fuzz_common.h"

/* hot keys are installed by the protocol's own packets (REPL_CMD/PUSH);
 * nothing to set up from outside */
static void fuzz_setup(struct rack *r, const struct nk_msg *m)
{
	(void)r;
	(void)m;
}
