/* fuzz_pegasus.c - libFuzzer harness: Pegasus (and its AMO client table). */
#define FUZZ_PROTOCOL "pegasus"
#define FUZZ_PARAMS "max_rkeys=8;host_max_rkeys=16;max_virt=16;max_copies=16"
#define FUZZ_PARAMS_ALT "max_rkeys=8;host_max_rkeys=16;max_virt=16;max_copies=16;amo=1" /* input flag bit 1: Pegasus-AMO */
#include "netkv/constants.h"
#include "fuzz_common.h"

/* the message's key becomes a replicated key (directory entry on the switch,
 * rkey on every server), so that reads and writes take the directory paths */
static void fuzz_setup(struct rack *r, const struct nk_msg *m)
{
	/* as the controller adds a key (netkv/protocols/pegasus.py): the home
	 * alone in the replica set at the current version, then the entry */
	uint64_t key = m->keyhash, idx = m->keyhash % 8, home = m->keyhash % FUZZ_SERVERS, vn = 0;
	uint32_t i = (uint32_t)idx;
	(void)r->pipe->reg_read(r->pstate, "ver_next", 0, &vn);
	(void)r->pipe->reg_write(r->pstate, "ver_completed", i, vn ? vn - 1 : 0);
	(void)r->pipe->reg_write(r->pstate, "ver_last_write", i, vn ? vn - 1 : 0);
	(void)r->pipe->reg_write(r->pstate, "rset_size", i, 1);
	(void)r->pipe->reg_write(r->pstate, "rset_bitmap", i, 1u << home);
	(void)r->pipe->reg_write(r->pstate, "rset_list", i * PEG_N, home);
	(void)r->pipe->table_add(r->pstate, "rkeys", &key, 1, &idx, 1);
	char hash[16], hex[2 * NK_MAX_KEY_LEN + 1], out[256];
	char *argv[3] = {"rkey_add", hash, hex};
	snprintf(hash, sizeof hash, "%u", m->keyhash);
	for (unsigned i = 0; i < m->key_len && i < NK_MAX_KEY_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", m->key[i]);
	hex[2 * (m->key_len < NK_MAX_KEY_LEN ? m->key_len : NK_MAX_KEY_LEN)] = 0;
	for (uint32_t s = 0; s < FUZZ_SERVERS && r->host->server_ctl; s++)
		(void)r->host->server_ctl(r->srv[s], &r->st[s], 3, argv, out, sizeof out);
}
