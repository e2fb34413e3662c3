/* fuzz_netlr.c - libFuzzer harness: NetLR (dirty slots, seq, ack counting,
 * commits, collisions, the replicas' seq rule; the Hermes baseline's
 * INV/ACK/VAL and stalls; the Harmonia baseline's dirty set and chain). */
#define FUZZ_PROTOCOL "netlr"
#define FUZZ_PARAMS "slots=16;stamp=1;ack_superseded=1;collision_nack=1"
#define FUZZ_PARAMS_ALT "slots=16;mode=paper" /* input flag bit 1: the paper's ack counter */
#define FUZZ_PARAMS_ALT2 "slots=16;replication=hermes" /* bit 2: the Hermes baseline */
#define FUZZ_PARAMS_ALT3 "slots=16;replication=harmonia;collision_nack=1" /* bit 3: Harmonia */
#include "netkv/bytes.h"
#include "fuzz_common.h"

/* the message's slot becomes dirty for its key at its seq, as after the
 * switch multicast that write (MaxSeq and lseq = the message's seq), so
 * that acks reach the counting and commit paths; one live replica fewer
 * than the servers on odd seqs (the controller removed a failed one) */
static void fuzz_setup(struct rack *r, const struct nk_msg *m)
{
	uint32_t id = m->keyhash & 15;
	uint64_t oid = m->key_len == 4 ? nk_get32(m->key) : 1;
	(void)r->pipe->reg_write(r->pstate, "dset", id, oid);
	(void)r->pipe->reg_write(r->pstate, "MaxSeq", id, m->ver);
	(void)r->pipe->reg_write(r->pstate, "lseq", id, m->ver);
	if (m->ver & 1) {
		uint64_t k = FUZZ_SERVERS - 1;
		(void)r->pipe->table_del(r->pstate, "get_dst_rep_table", &k, 1);
		(void)r->pipe->reg_write(r->pstate, "num_replica", 0, FUZZ_SERVERS - 1);
		(void)r->pipe->reg_write(r->pstate, "LiveMask", 0, (1u << (FUZZ_SERVERS - 1)) - 1);
	}
}
