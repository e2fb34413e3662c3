/*
 * netlr.c - the NetLR switch (Kim and Lee, PVLDB 15(7) 2022; docs/netlr.md,
 * ../shared/design/netlr.md §3): in-network leaderless replication. The
 * switch serializes writes with one global seq, multicasts each write to
 * every live replica, counts the replicas' acks and turns the last one into
 * the client's reply; keys with a write in flight ("dirty": dset[id] == oid)
 * have their reads sent to CRep, a replica known to hold the newest acked
 * version, every other read goes round-robin over the live replicas.
 *
 * Map of this file:
 *   registers (per slot)  dset, lseq, CRep, NumCRep (paper mode),
 *                         MaxSeq, AckMask (strict mode; lseq there is the
 *                         newest seq CRep is known to hold)
 *   registers (global)    seq, num_replica, DstRepIdx, LiveMask, PIN, epoch,
 *                         stats, n_servers
 *   registers (per port)  ReqMax, ReqWin (strict, dedup: nl_seen)
 *   tables                get_dst_rep_table (live index -> replica node):
 *                         the round-robin's dense list of live replicas
 *                         (digest §3.5: stable replica ids, this separate
 *                         table instead of renumbering); node_fwd (node ->
 *                         port). Multicast group NETLR_GROUP (1, as in the
 *                         artifact) = the live replicas' ports, kept by the
 *                         controller.
 *   process()             READ, WRITE from clients; W_REPLY from replicas;
 *                         everything else forwarded by destination.
 *
 * Replicas are nodes 0..n_servers-1 and their replica id is their node id
 * (RepID[src] of the paper is the sender's node), at most NETLR_MAX_REPLICAS.
 *
 * Modes (param mode=strict|paper; digest §3.2, §3.4, §9):
 *   paper   Alg. 1/2 as written: WRITE inserts dset, stamps ++seq; W_REPLY
 *           on a dirty key: seq > lseq resets NumCRep to 1, seq == lseq adds
 *           1, older is dropped; CRep = the acking replica; NumCRep ==
 *           num_replica commits. A duplicated ack counts twice (W1), CRep
 *           may move to a replica that lacks a newer write (W2).
 *   strict  (default) MaxSeq = the newest seq issued for the dirty key,
 *           AckMask = which replicas acked it (idempotent), commit when
 *           every live replica has; CRep = PIN when the key turns dirty and
 *           moves only to a replica that acked MaxSeq; lseq = the newest
 *           seq CRep acked (0 at PIN: it holds no write in flight).
 * replication=cr: the chain-replication baseline (digest §7) on the same
 * wire and hosts: the switch only forwards (clients address the head for
 * writes and the tail for reads, replicas the next in the chain), keeping
 * the trust rule and clearing client-set seqs. replication=hermes (the
 * invalidation baseline, host/netlr_hermes.c): the same, forward only.
 * replication=harmonia (netlr_harmonia.c): Harmonia on CR, the in-switch
 * baseline, performance-only (not linearizable, as the paper ran it).
 * Other params: slots (power of 2, default 131072), ack_superseded
 * (strict: forward an older write's ack flagged SUPERSEDED once CRep, which
 * serves the key's reads, holds that write or a newer one: lseq >= its seq),
 * stamp (strict: READs carry the current seq, flagged STAMPED),
 * collision_nack (a WRITE whose slot holds another key becomes a NACK to
 * its client instead of a drop), dedup (strict, default 1: a client WRITE
 * whose req_id its port had stamped already is dropped), boot_empty (no
 * replica live at init: the controller installs them; the plug-in always
 * sets it).
 *
 * seq starts at 1 (our choice): every netkv store preloads keys at version
 * 1, so the first write gets seq 2 and no write shares the preload's version.
 */
#include <stdlib.h>
#include <string.h>

#include "netkv/bytes.h"
#include "netlr.h"
#include "peg_params.h"

static void nl_fini(void *st)
{
	struct netlr_state *s = st;
	free(s->dset);
	free(s->lseq);
	free(s->maxseq);
	free(s->crep);
	free(s->numcrep);
	free(s->ackmask);
	s->dset = s->lseq = s->maxseq = NULL;
	s->crep = s->numcrep = s->ackmask = NULL;
}

static void add_reg(struct netlr_state *s, const char *name, void *base, uint32_t n,
		    uint8_t esize, uint8_t bits)
{
	s->regs[s->nregs++] = (struct nk_reg_desc){ name, base, n, esize, bits, 0 };
}

static int nl_init(void *st, const struct nk_pipeline_cfg *cfg)
{
	struct netlr_state *s = st;
	memset(s, 0, sizeof(*s));
	char mode[16] = "strict", repl[16] = "netlr";
	uint64_t slots, acks, stamp, nack, boot_empty, dedup;
	nkp_get(cfg->params, "mode", mode, sizeof mode);
	nkp_get(cfg->params, "replication", repl, sizeof repl);
	if (nkp_u64(cfg->params, "slots", 131072, &slots) ||
	    nkp_u64(cfg->params, "ack_superseded", 0, &acks) ||
	    nkp_u64(cfg->params, "stamp", 0, &stamp) ||
	    nkp_u64(cfg->params, "collision_nack", 0, &nack) ||
	    nkp_u64(cfg->params, "boot_empty", 0, &boot_empty) ||
	    nkp_u64(cfg->params, "dedup", 1, &dedup) ||
	    nkp_trust(cfg->params, cfg->n_servers, &s->trust) ||
	    (strcmp(mode, "strict") && strcmp(mode, "paper")) ||
	    (strcmp(repl, "netlr") && strcmp(repl, "cr") && strcmp(repl, "hermes") &&
	     strcmp(repl, "harmonia")))
		return NK_PIPE_EINVAL;
	if (slots < 1 || slots > NETLR_MAX_SLOTS || (slots & (slots - 1)) ||
	    cfg->n_servers > NETLR_MAX_REPLICAS || cfg->n_nodes > NETLR_MAX_NODES)
		return NK_PIPE_ERANGE;
	s->slots = (uint32_t)slots;
	s->strict = !strcmp(mode, "strict");
	s->ack_superseded = acks != 0;
	s->stamp = stamp != 0;
	s->collision_nack = nack != 0;
	s->dedup = s->strict && dedup != 0;
	s->chain = !strcmp(repl, "cr") || !strcmp(repl, "hermes");  /* forward only */
	s->harmonia = !strcmp(repl, "harmonia");
	s->n_servers = cfg->n_servers;
	s->n_nodes = NETLR_MAX_NODES;
	s->dset = calloc(s->slots, sizeof(uint32_t));
	s->lseq = calloc(s->slots, sizeof(uint32_t));
	s->maxseq = calloc(s->slots, sizeof(uint32_t));
	s->crep = calloc(s->slots, 1);
	s->numcrep = calloc(s->slots, 1);
	s->ackmask = calloc(s->slots, 1);
	if (!s->dset || !s->lseq || !s->maxseq || !s->crep || !s->numcrep || !s->ackmask) {
		nl_fini(s);
		return NK_PIPE_EFULL;
	}
	for (uint32_t i = 0; i < NETLR_MAX_NODES; i++)
		s->node_port[i] = i < cfg->n_nodes && cfg->node_port ? cfg->node_port[i]
								      : NK_NODE_NONE;
	/* every replica live until the controller says otherwise; with
	 * boot_empty none, as a switch's registers come up after a (re)start:
	 * nothing is served until the controller has installed membership,
	 * epoch and seq (docs/netlr.md "Switch restart") */
	uint32_t live = boot_empty ? 0 : cfg->n_servers;
	s->num_replica = (uint8_t)live;
	for (uint32_t r = 0; r < live; r++) {
		s->rr[r] = (uint8_t)r;
		s->live_mask |= (uint8_t)(1u << r);
	}
	for (uint32_t r = live; r < NETLR_MAX_REPLICAS; r++)
		s->rr[r] = NETLR_NO_REPLICA;
	s->seq = 1;
	add_reg(s, "dset", s->dset, s->slots, 4, 32);
	add_reg(s, "lseq", s->lseq, s->slots, 4, 32);
	add_reg(s, "CRep", s->crep, s->slots, 1, 8);
	add_reg(s, "NumCRep", s->numcrep, s->slots, 1, 8);
	add_reg(s, "MaxSeq", s->maxseq, s->slots, 4, 32);
	add_reg(s, "AckMask", s->ackmask, s->slots, 1, 8);
	add_reg(s, "seq", &s->seq, 1, 4, 32);
	add_reg(s, "num_replica", &s->num_replica, 1, 1, 8);
	add_reg(s, "DstRepIdx", &s->dst_rep_idx, 1, 1, 8);
	add_reg(s, "LiveMask", &s->live_mask, 1, 1, 8);
	add_reg(s, "PIN", &s->pin, 1, 1, 8);
	add_reg(s, "epoch", &s->epoch, 1, 2, 16);
	add_reg(s, "stats", s->stats, NL_NSTATS, 8, 64);
	add_reg(s, "n_servers", &s->trust.n_servers, 1, 4, 8);   /* the trust boundary */
	add_reg(s, "ReqMax", s->req_max, NETLR_PORTS, 4, 32);
	add_reg(s, "ReqWin", s->req_win, NETLR_PORTS, 8, 64);
	return 0;
}

/* ---- control plane --------------------------------------------------------- */

static int nl_reg_read(void *st, const char *name, uint32_t idx, uint64_t *val)
{
	struct netlr_state *s = st;
	return nk_reg_read_named(s->regs, s->nregs, name, idx, val);
}

static int nl_reg_write(void *st, const char *name, uint32_t idx, uint64_t val)
{
	struct netlr_state *s = st;
	if ((!strcmp(name, "num_replica") && val > NETLR_MAX_REPLICAS) ||
	    ((!strcmp(name, "PIN") || !strcmp(name, "CRep")) && val >= NETLR_MAX_REPLICAS))
		return NK_PIPE_ERANGE;
	return nk_reg_write_named(s->regs, s->nregs, name, idx, val, NULL);
}

static int nl_table_add(void *st, const char *table, const uint64_t *key, unsigned nkey,
			const uint64_t *args, unsigned nargs)
{
	struct netlr_state *s = st;
	if (nkey != 1 || nargs != 1)
		return strcmp(table, "node_fwd") && strcmp(table, "get_dst_rep_table")
			       ? NK_PIPE_ENOENT : NK_PIPE_EINVAL;
	if (!strcmp(table, "node_fwd")) {
		if (key[0] >= NETLR_MAX_NODES || args[0] >= NK_NODE_NONE)
			return NK_PIPE_ERANGE;
		s->node_port[key[0]] = (uint16_t)args[0];
		return 0;
	}
	if (!strcmp(table, "get_dst_rep_table")) {
		if (key[0] >= NETLR_MAX_REPLICAS || args[0] >= s->n_servers)
			return NK_PIPE_ERANGE;
		s->rr[key[0]] = (uint8_t)args[0];
		return 0;
	}
	return NK_PIPE_ENOENT;
}

static int nl_table_del(void *st, const char *table, const uint64_t *key, unsigned nkey)
{
	struct netlr_state *s = st;
	if (strcmp(table, "node_fwd") && strcmp(table, "get_dst_rep_table"))
		return NK_PIPE_ENOENT;
	if (nkey != 1)
		return NK_PIPE_EINVAL;
	if (!strcmp(table, "node_fwd")) {
		if (key[0] >= NETLR_MAX_NODES)
			return NK_PIPE_ERANGE;
		s->node_port[key[0]] = NK_NODE_NONE;
		return 0;
	}
	if (key[0] >= NETLR_MAX_REPLICAS)
		return NK_PIPE_ERANGE;
	if (s->rr[key[0]] == NETLR_NO_REPLICA)
		return NK_PIPE_ENOENT;
	s->rr[key[0]] = NETLR_NO_REPLICA;
	return 0;
}

/* ---- data plane ------------------------------------------------------------- */

void nl_forward(struct netlr_state *s, struct nk_pkt_meta *meta, struct nk_actions *act)
{
	nk_fwd_to_node(s->node_port, s->n_nodes, meta, act);
	if (act->fwd == NK_FWD_DROP)
		s->stats[NL_NO_ROUTE]++;
}

static uint32_t oid_of(const struct nk_msg *m)
{
	return m->key_len == NK_NETLR_OID_LEN ? nk_get32(m->key) : 0;
}

/* The next live replica, round-robin (DstRepIdx wraps at num_replica). */
uint32_t nl_round_robin(struct netlr_state *s)
{
	uint32_t n = s->num_replica;
	if (!n)
		return NETLR_NO_REPLICA;
	uint32_t i = s->dst_rep_idx;
	if (i >= n)
		i = 0;                 /* the live set shrank under the pointer */
	s->dst_rep_idx = (uint8_t)(i + 1 >= n ? 0 : i + 1);
	return s->rr[i];
}

void nl_route_to(struct netlr_state *s, uint32_t rep, struct nk_pkt_meta *meta,
		 struct nk_actions *act)
{
	if (rep >= s->n_servers) {
		s->stats[NL_NO_REPLICA]++;
		act->fwd = NK_FWD_DROP;
		return;
	}
	meta->dst = (uint16_t)rep;
	nl_forward(s, meta, act);
}

static void nl_read(struct netlr_state *s, struct nk_msg *m, uint32_t id, uint32_t oid,
		    struct nk_pkt_meta *meta, struct nk_actions *act)
{
	s->stats[NL_READS]++;
	uint32_t rep;
	if (s->dset[id] == oid) {
		rep = s->crep[id];
		s->stats[NL_DIRTY_READS]++;
	} else {
		rep = nl_round_robin(s);
	}
	if (s->strict && s->stamp) {
		m->ver = s->seq;
		m->flags |= NK_NETLR_FLAG_STAMPED;
	}
	nl_route_to(s, rep, meta, act);
}

/* A WRITE whose slot tracks another key's write (a hash collision):
 * dropped as the paper does, or NACKed back to its client. */
void nl_collided(struct netlr_state *s, struct nk_msg *m, struct nk_pkt_meta *meta,
		 struct nk_actions *act)
{
	s->stats[NL_COLLISIONS]++;
	if (!s->collision_nack) {
		act->fwd = NK_FWD_DROP;
		return;
	}
	m->op = NK_NETLR_OP_NACK;
	m->kind = NK_KIND_CONTROL;
	m->value_len = 0;
	m->value = NULL;
	meta->dst = meta->src;
	act->switch_reply = 1;
	nl_forward(s, meta, act);
}

/* Strict: has this client's WRITE req_id been stamped before? A copy the
 * network duplicated and delayed would otherwise be stamped again, after
 * newer writes, and applied a second time after its client saw the reply.
 * An anti-replay window per ingress port, i.e. per client host (RFC 4303
 * §3.4.3): req_ids above ReqMax are new, those within NETLR_REQ_WINDOW
 * below it are looked up in ReqWin, older ones cannot be told and are
 * dropped too (the client times out: an unknown outcome, never a second
 * effect). 0: a new req_id. */
static int nl_seen(struct netlr_state *s, uint32_t c, uint32_t req_id)
{
	uint32_t mx = s->req_max[c];
	if (req_id > mx)
		return 0;
	if (mx - req_id >= NETLR_REQ_WINDOW) {
		s->stats[NL_OLD_WRITES]++;
		return 1;
	}
	if (s->req_win[c] >> (mx - req_id) & 1) {
		s->stats[NL_DUP_WRITES]++;
		return 1;
	}
	return 0;
}

/* the req_id is stamped: remember it (after nl_seen said it is new) */
static void nl_mark(struct netlr_state *s, uint32_t c, uint32_t req_id)
{
	uint32_t mx = s->req_max[c];
	if (req_id > mx) {
		uint32_t d = req_id - mx;
		s->req_win[c] = d >= NETLR_REQ_WINDOW ? 1 : s->req_win[c] << d | 1;
		s->req_max[c] = req_id;
	} else {
		s->req_win[c] |= (uint64_t)1 << (mx - req_id);
	}
}

static void nl_write(struct netlr_state *s, struct nk_msg *m, uint32_t id, uint32_t oid,
		     struct nk_pkt_meta *meta, struct nk_actions *act)
{
	uint32_t c = meta->ingress_port;  /* who sent it: never its source address */
	int dedup = s->dedup && c < NETLR_PORTS;
	if (dedup && nl_seen(s, c, m->req_id)) {
		act->fwd = NK_FWD_DROP;
		return;
	}
	uint32_t d = s->dset[id];
	if (d && d != oid)
		return nl_collided(s, m, meta, act);
	if (!s->num_replica) {
		s->stats[NL_NO_REPLICA]++;
		act->fwd = NK_FWD_DROP;
		return;
	}
	if (dedup)
		nl_mark(s, c, m->req_id);   /* a collided or unserved one may come again */
	s->dset[id] = oid;
	s->seq++;
	m->ver = s->seq;
	m->epoch = s->epoch;
	if (s->strict) {
		if (!d) {
			s->crep[id] = s->pin;      /* W4: never a stale CRep */
			s->lseq[id] = 0;           /* PIN holds no write in flight */
		}
		s->maxseq[id] = s->seq;
		s->ackmask[id] = 0;
	}
	s->stats[NL_WRITES]++;
	act->fwd = NK_FWD_MCAST;
	act->mcast_group = NETLR_GROUP;
}

static void drop_ack(struct netlr_state *s, struct nk_actions *act)
{
	s->stats[NL_STALE_ACKS]++;
	act->fwd = NK_FWD_DROP;
}

static void commit(struct netlr_state *s, uint32_t id, struct nk_pkt_meta *meta,
		   struct nk_actions *act)
{
	s->dset[id] = 0;
	s->stats[NL_COMMITS]++;
	nl_forward(s, meta, act);         /* this ack is the client's reply */
}

static void nl_ack(struct netlr_state *s, struct nk_msg *m, uint32_t id, uint32_t oid,
		   struct nk_pkt_meta *meta, struct nk_actions *act)
{
	uint32_t r = meta->src;          /* RepID[src]: a replica's id is its node */
	/* an ack of an earlier switch incarnation's write counts for nothing */
	if (!oid || s->dset[id] != oid || m->ver > UINT32_MAX || m->epoch != s->epoch)
		return drop_ack(s, act);
	uint32_t seq = (uint32_t)m->ver;
	if (!s->strict) {
		/* paper Alg. 2 */
		if (seq > s->lseq[id]) {
			s->lseq[id] = seq;
			s->numcrep[id] = 1;
		} else if (seq == s->lseq[id]) {
			s->numcrep[id]++;
		} else {
			return drop_ack(s, act);
		}
		s->crep[id] = (uint8_t)r;
		s->stats[NL_ACKS]++;
		if (s->numcrep[id] == s->num_replica)
			return commit(s, id, meta, act);
		act->fwd = NK_FWD_DROP;
		return;
	}
	if (seq == s->maxseq[id]) {
		s->ackmask[id] |= (uint8_t)(1u << r);
		s->crep[id] = (uint8_t)r;
		s->lseq[id] = seq;
		s->stats[NL_ACKS]++;
		if ((s->ackmask[id] & s->live_mask) == s->live_mask)
			return commit(s, id, meta, act);
		act->fwd = NK_FWD_DROP;
		return;
	}
	/* an ack means the replica stored seq: CRep's own raises what it holds */
	if (seq < s->maxseq[id] && r == s->crep[id] && seq > s->lseq[id])
		s->lseq[id] = seq;
	if (seq < s->maxseq[id] && s->ack_superseded && seq <= s->lseq[id]) {
		/* the replica serving the key's reads (CRep) holds this write or
		 * a newer one: no read after this reply can see an older value */
		m->flags |= NK_NETLR_FLAG_SUPERSEDED;
		s->stats[NL_SUPERSEDED]++;
		nl_forward(s, meta, act);
		return;
	}
	drop_ack(s, act);
}

/* seq, flags and epoch are the switch's (docs/security.md): a client's are
 * cleared, and counted when it set any */
static void clear_switch_fields(struct netlr_state *s, struct nk_msg *m)
{
	if (m->ver || m->flags || m->epoch)
		s->stats[NL_FORGED_FIELDS]++;
	m->ver = 0;
	m->flags = 0;
	m->epoch = 0;
}

static void nl_process(void *st, struct nk_msg *m, struct nk_pkt_meta *meta,
		       struct nk_actions *act)
{
	struct netlr_state *s = st;
	memset(act, 0, sizeof(*act));
	if (m->proto != NK_PROTO_NETLR) {
		nl_forward(s, meta, act);
		return;
	}
	enum nk_origin from = nk_origin_of(&s->trust, s->node_port, meta);
	int request = m->op == NK_NETLR_OP_READ || m->op == NK_NETLR_OP_WRITE;
	if (from == NK_ORIGIN_CLIENT && !request) {
		/* a forged W_REPLY would commit a write no replica applied */
		s->stats[NL_HOST_SERVER_OP]++;
		act->fwd = NK_FWD_DROP;
		return;
	}
	if (meta->from_cpu || s->chain) {
		/* the controller addresses replicas itself; chain replication's
		 * hosts address the head, the next replica, the tail */
		if (from == NK_ORIGIN_CLIENT)
			clear_switch_fields(s, m);
		nl_forward(s, meta, act);
		return;
	}
	uint32_t id = m->keyhash & (s->slots - 1);
	uint32_t oid = oid_of(m);
	if (s->harmonia) {
		if (from == NK_ORIGIN_CLIENT)
			clear_switch_fields(s, m);
		nl_harmonia(s, m, id, oid, from == NK_ORIGIN_CLIENT, meta, act);
		return;
	}
	if (request) {
		if (from == NK_ORIGIN_CLIENT)
			clear_switch_fields(s, m);  /* seq and stamps are the switch's */
		if (!oid) {
			s->stats[NL_BAD_OID]++;
			act->fwd = NK_FWD_DROP;
			return;
		}
		if (m->op == NK_NETLR_OP_READ)
			nl_read(s, m, id, oid, meta, act);
		else
			nl_write(s, m, id, oid, meta, act);
		return;
	}
	if (m->op == NK_NETLR_OP_W_REPLY && meta->src < s->n_servers) {
		nl_ack(s, m, id, oid, meta, act);
		return;
	}
	nl_forward(s, meta, act);                 /* R_REPLY, NACK: to the client */
}

const struct nk_pipeline_ops nk_pipeline_netlr = {
	.name = "netlr",
	.proto = NK_PROTO_NETLR,
	.udp_port = NK_NETLR_PORT,
	.udp_ports = 1,
	.state_size = sizeof(struct netlr_state),
	.never_to_cpu = 1,
	.init = nl_init,
	.fini = nl_fini,
	.process = nl_process,
	.reg_read = nl_reg_read,
	.reg_write = nl_reg_write,
	.table_add = nl_table_add,
	.table_del = nl_table_del,
};
