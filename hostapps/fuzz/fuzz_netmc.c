/* fuzz_netmc.c - libFuzzer harness: NetMC (KeyGroup, SrvIDTable, AddrTable,
 * clone and recirculation passes; the servers' multiget replies). */
#define FUZZ_PROTOCOL "netmc"
#define FUZZ_PARAMS "scheme=netmc;split=1"
#define FUZZ_PARAMS_ALT "scheme=climc;split=0" /* input flag bit 1: the CliMC baseline */
#include "netkv/constants.h"
#include "fuzz_common.h"

/* AddrTable as the controller installs it (netkv/protocols/netmc.py): server
 * s -> node s, its port, its {port, recirculation} group; so that MGETs
 * take every pass */
static void fuzz_setup(struct rack *r, const struct nk_msg *m)
{
	(void)m;
	for (uint64_t s = 0; s < FUZZ_SERVERS; s++) {
		uint64_t args[3] = {s, r->node_port[s], nk_mc_mcast_group(s)};
		(void)r->pipe->table_add(r->pstate, "addr_table", &s, 1, args, 3);
	}
}
