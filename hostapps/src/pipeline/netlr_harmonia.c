/*
 * netlr_harmonia.c - Harmonia (Zhu et al., PVLDB 13(3) 2019) on chain
 * replication: NetLR's in-switch baseline (replication=harmonia;
 * docs/netlr.md, digest §7), as the NetLR paper re-implemented it (§7.1).
 *
 * The switch keeps the dirty set, the keys with a write in flight, in
 * NetLR's hash slots (`dset`, one stage: the paper's 128K slots). A client's
 * READ of a clean key goes to any live replica (round-robin, the same
 * `get_dst_rep_table` as NetLR's), of a dirty key to the tail, the replica
 * whose data is committed. A client's WRITE marks its key dirty and goes to
 * the head; the chain carries it down as in CR (host/netlr.c cr_write, the
 * same replicas and clients), and the tail's W_REPLY back through the
 * switch clears the key and reaches the client.
 *
 * NOT LINEARIZABLE, as the paper ran it: a completion clears its key
 * without comparing seqs, so with two writes of a key in flight the first
 * completion makes the key clean while the second is still in the chain,
 * and replicas serve reads without checking the last committed seq. A
 * performance-only baseline.
 *
 * A WRITE whose slot tracks another key is dropped (collision_nack: NACKed),
 * NetLR's rule, so that the two differ only in how writes are coordinated.
 *
 * stats (netlr.h): READS, DIRTY_READS (sent to the tail), WRITES (marked
 * dirty, sent to the head), COLLISIONS, ACKS (completions forwarded),
 * COMMITS (those that cleared their key), NO_REPLICA, BAD_OID.
 */
#include "netlr.h"

#define NL_HEAD 0u      /* CR's head: replica 0, as host/netlr.c's chain */

static void completion(struct netlr_state *s, uint32_t id, uint32_t oid,
		       struct nk_pkt_meta *meta, struct nk_actions *act)
{
	s->stats[NL_ACKS]++;
	if (oid && s->dset[id] == oid) {
		s->dset[id] = 0;           /* no seq compared (paper §7.1) */
		s->stats[NL_COMMITS]++;
	}
	nl_forward(s, meta, act);      /* the client's reply, in any case */
}

void nl_harmonia(struct netlr_state *s, struct nk_msg *m, uint32_t id, uint32_t oid,
		 int from_client, struct nk_pkt_meta *meta, struct nk_actions *act)
{
	if (!from_client) {
		/* the tail's completion; chain copies and R_REPLYs go on as
		 * addressed */
		if (m->op == NK_NETLR_OP_W_REPLY && meta->src < s->n_servers)
			completion(s, id, oid, meta, act);
		else
			nl_forward(s, meta, act);
		return;
	}
	/* a client's READ or WRITE (netlr.c dropped anything else) */
	if (!oid) {
		s->stats[NL_BAD_OID]++;
		act->fwd = NK_FWD_DROP;
		return;
	}
	if (m->op == NK_NETLR_OP_READ) {
		s->stats[NL_READS]++;
		uint32_t rep;
		if (s->dset[id] == oid) {
			/* the tail; none before the controller installed membership */
			rep = s->num_replica ? s->n_servers - 1 : NETLR_NO_REPLICA;
			s->stats[NL_DIRTY_READS]++;
		} else {
			rep = nl_round_robin(s);
		}
		nl_route_to(s, rep, meta, act);
		return;
	}
	uint32_t d = s->dset[id];
	if (d && d != oid) {
		nl_collided(s, m, meta, act);
		return;
	}
	if (!s->num_replica) {
		s->stats[NL_NO_REPLICA]++;
		act->fwd = NK_FWD_DROP;
		return;
	}
	s->dset[id] = oid;
	s->stats[NL_WRITES]++;
	nl_route_to(s, NL_HEAD, meta, act);
}
