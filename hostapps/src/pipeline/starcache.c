/*
 * starcache.c - the StarCache switch (G. Kim, "Towards Variable-Length
 * In-Network Caching"; docs/starcache.md, digest §3).
 *
 * A cached item lives in a *cache packet* (a read reply with key and value)
 * that loops through the recirculation port; the switch keeps only small
 * per-key state. Map of this file:
 *   state + named registers - per CacheIdx: state (VALID/INVALID/DRAINING),
 *                             pending_writes, pop, qlen/front/rear, ack,
 *                             inloop/stale, write_ts, last_src/last_seq,
 *                             wcount, wmask; the
 *                             request table (keys x S slots): req_ip, req_seq,
 *                             req_ts, req_cookie; hits, overflow, stats
 *   lookup                  - exact-match table HKEY (128 b) -> set_idx(idx,
 *                             home): the key's CacheIdx and home server
 *   process()               - R_REQ hit: park (client, SEQ, LAT) in the key's
 *                             queue, or overflow to the server; W_REQ hit:
 *                             invalidate, FLAG=1; the server's W_REP/F_REP
 *                             revalidates and is multicast to {client, loop};
 *                             F_REQ (the controller's): LAT = the key's write
 *                             count (SC_LAT: CacheIdx, wcount), echoed in its F_REP;
 *                             a cache packet (ingress = recirculation) serves
 *                             the head of its queue (multicast to {client,
 *                             loop}), or loops on, or drops itself when its
 *                             key is invalid or evicted
 *
 * Multi-packet items (digest 8.7): an item of FLAG packets loops as FLAG
 * cache packets (FRAG 0..FLAG-1). The head of the queue stays there for
 * FLAG visits (`ack`), which, the loop being FIFO, are its FLAG fragments;
 * the reply's first fragment revalidates like a single packet and the later
 * ones join the loop behind it. A head that a replaced item's fragments
 * answered in part (ack > 1 at the revalidation: ack 0) is answered once
 * more, with RETRY, and moves on: the client asks the server rather than
 * mix two versions' fragments.
 *
 * Coherence (digest §8.3). `faithful=1` is the paper's 1-bit flag: any W_REP
 * revalidates, so with two writes in flight the first reply puts its value
 * into the loop while the second is pending (a stale read can follow).
 * Default (strict): `pending_writes` counts writes in flight; only the reply
 * that brings it to 0 revalidates and puts a cache packet into the loop.
 * Each counted W_REQ carries its write number (SC_LAT: the CacheIdx and
 * wcount's low 16 bits) in LAT, echoed in its W_REP, and `wmask` holds the
 * numbers in flight: a reply lowers the count
 * only for a write in flight, any other (a duplicate, a write the stuck_us
 * restart gave up on, an uncounted write's reply for a key inserted since
 * its W_REQ passed) invalidates the key instead (late_write).
 * The older cache packets of the key may still be in the loop then (a write
 * whose round trip is shorter than a loop period: every write on Mininet):
 * `inloop` counts the key's packets in the loop and a revalidation marks all
 * but the new one `stale`; the loop is FIFO, so the next `stale` passes of
 * the key are the old packets, and they drop themselves (superseded).
 *
 * A write of a multi-packet item (our choice) is FLAG W_REQ fragments
 * from the client, FLAG and FRAG its shape: its FRAG 0 invalidates and is
 * counted, the switch marks it CACHED ("attach the value": FLAG is taken);
 * the server applies the write once it has every fragment.
 *
 * Trust (docs/security.md): from a client port only R_REQ, W_REQ and CRN_REQ
 * pass (host_server_op); the switch's fields in a request (FLAG 1 of a
 * W_REQ, CACHED) are overwritten and counted (forged_fields); a write to a
 * cached key goes to the key's home, wherever the client sent it
 * (wrong_home): another server's W_REP would put a value the home never
 * stored into the loop.
 *
 * Clients are addressed by node (req_ip holds the client's node id, which
 * the switch maps to its IP) and the embedder's request handle
 * (nk_pkt_meta.cookie: netkv-switch's is the client's UDP port) kept with it.
 * The controller is node S+M behind the CPU port (the simulator's plan; on
 * netkv-switch its address is outside the plan, so meta->dst says none).
 */
#include <stdlib.h>
#include <string.h>

#include "netkv/pipeline.h"
#include "netkv/wire.h"
#include "key128.h"
#include "peg_params.h"

/* SC_STATE_*, SC_STAT_*, SC_MAX_SLOTS_TOTAL, nk_sc_mcast_group():
 * netkv/constants.h (spec/constants.toml) */
#define SC_MAX_NODES 4096
#define SC_NREGS 24
/* write numbers wmask follows: wcount and the 31 before it (32-bit register) */
#define SC_WINDOW 32u
/* A write number or fetch stamp as LAT carries it: the CacheIdx in the high
 * 16 bits (idx < keys <= SC_MAX_SLOTS_TOTAL = 64 Ki), the slot's count in the
 * low 16. wcount is per slot and outlives its tenants: without the slot, a
 * reply from a key's earlier slot could carry a number in flight at its new
 * one (docs/starcache.md "Coherence", (5)). */
#define SC_LAT(idx, n) (((uint32_t)(idx) << 16) | ((uint32_t)(n) & 0xFFFFu))

struct starcache_state {
	uint32_t keys, slots, faithful;
	uint32_t stuck_us;         /* a counted write older than this is lost */
	struct nk_trust trust;
	uint16_t *node_port;
	uint16_t cpu_port, recirc_port;
	uint32_t n_servers, n_clients;
	uint16_t ctl_node;         /* the controller's node: S+M */
	struct nk_k128 tab;        /* lookup: HKEY (hkey[0] high) -> idx */
	/* per CacheIdx */
	uint8_t *state;
	uint16_t *pending_writes;
	uint32_t *pop;
	uint16_t *qlen, *front, *rear;
	uint8_t *ack;
	uint16_t *home;            /* the key's home server (set_idx's action data) */
	uint16_t *inloop, *stale;  /* the key's cache packets in the loop; the oldest to drop */
	uint32_t *write_ts;        /* when the key's last counted write passed (us, wraps) */
	uint32_t *last_src, *last_seq;   /* the key's last counted write: client node, SEQ */
	uint32_t *wcount;          /* the key's counted writes, ever (wraps; never reset):
				    * an F_REQ carries it in LAT (SC_LAT), its F_REP echoes it */
	uint32_t *wmask;           /* strict: bit i set = write number wcount - i is in
				    * flight (its W_REQ carried it in LAT, no W_REP yet) */
	/* request table, keys x slots: ReqIdx = CacheIdx * S + i */
	uint32_t *req_ip;          /* client node id */
	uint32_t *req_seq;         /* SEQ */
	uint32_t *req_ts;          /* LAT */
	uint64_t *req_cookie;      /* the embedder's request handle */
	uint64_t hits, overflow;
	uint64_t stats[SC_STAT_COUNT];
	struct nk_reg_desc regs[SC_NREGS];
	unsigned nregs;
};

static void sc_fini(void *st)
{
	struct starcache_state *s = st;
	free(s->node_port);
	free(s->tab.e);
	free(s->state);
	free(s->pending_writes);
	free(s->pop);
	free(s->qlen);
	free(s->front);
	free(s->rear);
	free(s->ack);
	free(s->home);
	free(s->inloop);
	free(s->stale);
	free(s->write_ts);
	free(s->last_src);
	free(s->last_seq);
	free(s->wcount);
	free(s->wmask);
	free(s->req_ip);
	free(s->req_seq);
	free(s->req_ts);
	free(s->req_cookie);
	memset(s, 0, sizeof(*s));
}

static void add_reg(struct starcache_state *s, const char *name, void *base, uint32_t n,
		    uint8_t esize, uint8_t bits)
{
	s->regs[s->nregs++] = (struct nk_reg_desc){ name, base, n, esize, bits, 0 };
}

static void reset_key(struct starcache_state *s, uint32_t idx)
{
	s->state[idx] = SC_STATE_INVALID;
	s->pending_writes[idx] = 0;
	s->pop[idx] = 0;
	s->qlen[idx] = s->front[idx] = s->rear[idx] = 0;
	s->ack[idx] = 1;
	s->inloop[idx] = s->stale[idx] = 0;
	s->write_ts[idx] = 0;
	s->last_src[idx] = s->last_seq[idx] = 0;
	s->wmask[idx] = 0;   /* a reply of a write counted before: late_write */
}

static int sc_init(void *st, const struct nk_pipeline_cfg *cfg)
{
	struct starcache_state *s = st;
	memset(s, 0, sizeof(*s));
	uint64_t keys, slots, faithful, stuck_us;
	if (nkp_u64(cfg->params, "keys", SC_DEFAULT_KEYS, &keys) ||
	    nkp_u64(cfg->params, "slots", SC_DEFAULT_SLOTS, &slots) ||
	    nkp_u64(cfg->params, "faithful", 0, &faithful) ||
	    nkp_u64(cfg->params, "stuck_us", SC_DEFAULT_STUCK_US, &stuck_us) ||
	    nkp_trust(cfg->params, cfg->n_servers, &s->trust))
		return NK_PIPE_EINVAL;
	/* keys bounded first: keys * slots could wrap (keys=0x5555555555555556;
	 * slots=3 is 2), and idx must fit LAT's 16 bits (SC_LAT) */
	if (keys < 1 || slots < 1 || slots > 0xFFFF || keys > SC_MAX_SLOTS_TOTAL ||
	    keys * slots > SC_MAX_SLOTS_TOTAL ||
	    faithful > 1 || stuck_us < 1 || stuck_us > 0x7FFFFFFF || cfg->n_nodes > SC_MAX_NODES)
		return NK_PIPE_ERANGE;
	s->keys = (uint32_t)keys;
	s->slots = (uint32_t)slots;
	s->faithful = (uint32_t)faithful;
	s->stuck_us = (uint32_t)stuck_us;
	s->n_servers = cfg->n_servers;
	s->n_clients = cfg->n_clients;
	s->cpu_port = cfg->cpu_port;
	s->recirc_port = cfg->recirc_port;
	uint32_t k = s->keys, r = s->keys * s->slots;
	s->node_port = malloc(SC_MAX_NODES * sizeof(uint16_t));
	s->state = calloc(k, 1);
	s->pending_writes = calloc(k, sizeof(uint16_t));
	s->pop = calloc(k, sizeof(uint32_t));
	s->qlen = calloc(k, sizeof(uint16_t));
	s->front = calloc(k, sizeof(uint16_t));
	s->rear = calloc(k, sizeof(uint16_t));
	s->ack = calloc(k, 1);
	s->home = calloc(k, sizeof(uint16_t));
	s->inloop = calloc(k, sizeof(uint16_t));
	s->stale = calloc(k, sizeof(uint16_t));
	s->write_ts = calloc(k, sizeof(uint32_t));
	s->last_src = calloc(k, sizeof(uint32_t));
	s->last_seq = calloc(k, sizeof(uint32_t));
	s->wcount = calloc(k, sizeof(uint32_t));
	s->wmask = calloc(k, sizeof(uint32_t));
	s->req_ip = calloc(r, sizeof(uint32_t));
	s->req_seq = calloc(r, sizeof(uint32_t));
	s->req_ts = calloc(r, sizeof(uint32_t));
	s->req_cookie = calloc(r, sizeof(uint64_t));
	if (nk_k128_init(&s->tab, s->keys) || !s->node_port || !s->state || !s->pending_writes || !s->pop || !s->qlen ||
	    !s->front || !s->rear || !s->ack || !s->home || !s->inloop || !s->stale || !s->write_ts || !s->last_src || !s->last_seq || !s->wcount || !s->wmask || !s->req_ip || !s->req_seq || !s->req_ts ||
	    !s->req_cookie) {
		sc_fini(s);
		return NK_PIPE_EFULL;
	}
	for (uint32_t i = 0; i < SC_MAX_NODES; i++)
		s->node_port[i] = i < cfg->n_nodes && cfg->node_port ? cfg->node_port[i]
								      : NK_NODE_NONE;
	s->ctl_node = (uint16_t)(cfg->n_servers + cfg->n_clients);
	if (s->ctl_node < SC_MAX_NODES && s->node_port[s->ctl_node] == NK_NODE_NONE)
		s->node_port[s->ctl_node] = cfg->cpu_port;
	for (uint32_t i = 0; i < k; i++)
		reset_key(s, i);
	add_reg(s, "state", s->state, k, 1, 8);
	add_reg(s, "pending_writes", s->pending_writes, k, 2, 16);
	add_reg(s, "pop", s->pop, k, 4, 32);
	add_reg(s, "qlen", s->qlen, k, 2, 16);
	add_reg(s, "front", s->front, k, 2, 16);
	add_reg(s, "rear", s->rear, k, 2, 16);
	add_reg(s, "ack", s->ack, k, 1, 8);
	add_reg(s, "inloop", s->inloop, k, 2, 16);
	add_reg(s, "stale", s->stale, k, 2, 16);
	add_reg(s, "write_ts", s->write_ts, k, 4, 32);
	add_reg(s, "last_src", s->last_src, k, 4, 32);
	add_reg(s, "last_seq", s->last_seq, k, 4, 32);
	add_reg(s, "wcount", s->wcount, k, 4, 32);
	add_reg(s, "wmask", s->wmask, k, 4, 32);
	add_reg(s, "req_ip", s->req_ip, r, 4, 32);
	add_reg(s, "req_seq", s->req_seq, r, 4, 32);
	add_reg(s, "req_ts", s->req_ts, r, 4, 32);
	add_reg(s, "req_cookie", s->req_cookie, r, 8, 64);
	add_reg(s, "hits", &s->hits, 1, 8, 64);
	add_reg(s, "overflow", &s->overflow, 1, 8, 64);
	add_reg(s, "stats", s->stats, SC_STAT_COUNT, 8, 64);
	add_reg(s, "n_servers", &s->trust.n_servers, 1, 4, 8);   /* the trust boundary */
	return 0;
}

/* ---- registers ------------------------------------------------------------- */

static int sc_reg_read(void *st, const char *name, uint32_t idx, uint64_t *val)
{
	struct starcache_state *s = st;
	return nk_reg_read_named(s->regs, s->nregs, name, idx, val);
}

static int sc_reg_write(void *st, const char *name, uint32_t idx, uint64_t val)
{
	struct starcache_state *s = st;
	const struct nk_reg_desc *r = nk_reg_find(s->regs, s->nregs, name);
	/* queue pointers index the key's S slots; a state is one of three */
	if (r && idx < r->n &&
	    (((r->base == s->front || r->base == s->rear) && val >= s->slots) ||
	     (r->base == s->qlen && val > s->slots) ||
	     (r->base == s->state && val > SC_STATE_DRAINING)))
		return NK_PIPE_ERANGE;
	return nk_reg_write_named(s->regs, s->nregs, name, idx, val, NULL);
}

/* ---- lookup table: HKEY -> CacheIdx ------------------------------------------ */

static int node_fwd_op(struct starcache_state *s, const uint64_t *key, unsigned nkey,
		       const uint64_t *args, unsigned nargs, int add)
{
	if (nkey != 1 || (add && nargs != 1))
		return NK_PIPE_EINVAL;
	if (key[0] >= SC_MAX_NODES || (add && args[0] >= NK_NODE_NONE))
		return NK_PIPE_ERANGE;
	s->node_port[key[0]] = add ? (uint16_t)args[0] : NK_NODE_NONE;
	return 0;
}

static int sc_table_add(void *st, const char *table, const uint64_t *key, unsigned nkey,
			const uint64_t *args, unsigned nargs)
{
	struct starcache_state *s = st;
	if (!strcmp(table, "node_fwd"))
		return node_fwd_op(s, key, nkey, args, nargs, 1);
	if (strcmp(table, "lookup"))
		return NK_PIPE_ENOENT;
	if (nkey != 2 || nargs != 2)
		return NK_PIPE_EINVAL;
	if (args[0] >= s->keys || args[1] >= s->n_servers)
		return NK_PIPE_ERANGE;
	int fresh;
	int rc = nk_k128_put(&s->tab, key[0], key[1], (uint32_t)args[0], &fresh);
	if (rc)
		return rc;
	/* a new entry starts INVALID with an empty queue: reads go to the
	 * server until the controller's fetch brings the cache packet */
	reset_key(s, (uint32_t)args[0]);
	s->home[args[0]] = (uint16_t)args[1];
	return 0;
}

static int sc_table_del(void *st, const char *table, const uint64_t *key, unsigned nkey)
{
	struct starcache_state *s = st;
	if (!strcmp(table, "node_fwd"))
		return node_fwd_op(s, key, nkey, NULL, 0, 0);
	if (strcmp(table, "lookup"))
		return NK_PIPE_ENOENT;
	if (nkey != 2)
		return NK_PIPE_EINVAL;
	uint32_t idx;
	int rc = nk_k128_del(&s->tab, key[0], key[1], &idx);
	if (rc)
		return rc;
	/* the key's cache packet drops itself on its next pass (a miss) */
	s->state[idx] = SC_STATE_INVALID;
	return 0;
}

/* ---- process ------------------------------------------------------------------- */

/* the node a packet is for: outside the rack plan = the controller */
static uint16_t dst_node(const struct starcache_state *s, const struct nk_pkt_meta *meta)
{
	return meta->dst == NK_NODE_NONE ? s->ctl_node : meta->dst;
}

static void forward(struct starcache_state *s, struct nk_pkt_meta *meta, struct nk_actions *act)
{
	struct nk_pkt_meta to = *meta;
	to.dst = dst_node(s, meta);
	nk_fwd_to_node(s->node_port, SC_MAX_NODES, &to, act);
	if (act->fwd == NK_FWD_DROP)
		s->stats[SC_STAT_NO_ROUTE]++;
}

/* A copy to meta->dst and a copy into the loop: the PRE group of the
 * destination node ({its port, the recirculation port}, set by the
 * controller). */
static void to_node_and_loop(const struct starcache_state *s, const struct nk_pkt_meta *meta,
			     struct nk_actions *act)
{
	act->fwd = NK_FWD_MCAST;
	act->mcast_group = (uint16_t)nk_sc_mcast_group(dst_node(s, meta));
}

static void drop(struct starcache_state *s, enum sc_stat why, struct nk_actions *act)
{
	s->stats[why]++;
	act->fwd = NK_FWD_DROP;
}

/* A cache packet of key idx drops itself. */
static void leave_loop(struct starcache_state *s, uint32_t idx, enum sc_stat why,
		       struct nk_actions *act)
{
	if (s->inloop[idx])
		s->inloop[idx]--;
	drop(s, why, act);
}

/* R_REQ to a cached key: park it, or send it to the server. */
static void read_request(struct starcache_state *s, uint32_t idx, const struct nk_msg *m,
			 struct nk_pkt_meta *meta, struct nk_actions *act)
{
	if (s->pop[idx] < UINT32_MAX)
		s->pop[idx]++;
	s->hits++;
	if (s->state[idx] == SC_STATE_INVALID && s->pending_writes[idx] &&
	    (uint32_t)(meta->now_ns / 1000) - s->write_ts[idx] > s->stuck_us) {
		/* no write has reached the key for longer than any write's round
		 * trip: the counted ones whose reply never came were lost (a W_REQ
		 * dropped after the switch, or its W_REP), and would keep the key
		 * INVALID forever; with none in flight the count can restart
		 * (the watchdog then refetches the key); a reply of one of them
		 * that comes after all is no longer in flight: late_write */
		s->pending_writes[idx] = 0;
		s->wmask[idx] = 0;
		s->stats[SC_STAT_STUCK_WRITES]++;
	}
	if (s->state[idx] != SC_STATE_VALID) {
		/* a write in flight (INVALID) or an eviction (DRAINING) */
		s->stats[s->state[idx] == SC_STATE_DRAINING ? SC_STAT_DRAINING_READS
							     : SC_STAT_INVALID_READS]++;
		forward(s, meta, act);
		return;
	}
	if (s->qlen[idx] >= s->slots) {
		s->overflow++;
		forward(s, meta, act);
		return;
	}
	uint32_t i = s->rear[idx];
	s->rear[idx] = (uint16_t)((i + 1) % s->slots);
	s->qlen[idx]++;
	size_t r = (size_t)idx * s->slots + i;
	s->req_ip[r] = meta->src;
	s->req_seq[r] = m->req_id;
	s->req_ts[r] = (uint32_t)m->send_ns;
	s->req_cookie[r] = meta->cookie;
	s->stats[SC_STAT_PARKED]++;
	act->fwd = NK_FWD_DROP;
	act->held = 1;          /* a cache packet will answer */
}

/* A cache packet's pass: serve the head of its key's queue, loop on, or
 * drop itself. */
static void cache_packet(struct starcache_state *s, int64_t hit, struct nk_msg *m,
			 struct nk_pkt_meta *meta, struct nk_actions *act)
{
	m->op = NK_STARCACHE_OP_R_REP;     /* first loop after a W_REP/F_REP */
	m->kind = NK_KIND_READ_REPLY;
	uint32_t idx = (uint32_t)hit;
	if (hit < 0) {
		drop(s, SC_STAT_LOOP_DROPS, act);   /* evicted */
		return;
	}
	if (s->stale[idx]) {
		/* an older packet of the key than the newest write's (FIFO loop) */
		s->stale[idx]--;
		leave_loop(s, idx, SC_STAT_SUPERSEDED, act);
		return;
	}
	if (s->state[idx] == SC_STATE_INVALID) {
		leave_loop(s, idx, SC_STAT_LOOP_DROPS, act);   /* a write in flight */
		return;
	}
	if (!s->qlen[idx]) {
		if (s->state[idx] == SC_STATE_DRAINING) {
			leave_loop(s, idx, SC_STAT_LOOP_DROPS, act);  /* drained */
			return;
		}
		act->fwd = NK_FWD_RECIRC;
		s->stats[SC_STAT_LOOPS]++;
		return;
	}
	uint32_t i = s->front[idx], flag = m->frag_cnt ? m->frag_cnt : 1;
	int restart = !s->ack[idx];
	if (!restart && s->ack[idx] < flag) {
		s->ack[idx]++;          /* multi-packet item: the head waits for all */
	} else {
		s->qlen[idx]--;
		s->front[idx] = (uint16_t)((i + 1) % s->slots);
		s->ack[idx] = 1;
	}
	size_t r = (size_t)idx * s->slots + i;
	meta->dst = (uint16_t)s->req_ip[r];
	meta->cookie = s->req_cookie[r];
	m->req_id = s->req_seq[r];
	m->send_ns = s->req_ts[r];
	m->flags = 1;           /* CACHED */
	m->server_id = NK_SERVER_NONE;   /* no server answered: clients count it as the switch's */
	/* a head some fragments of an older version of the item answered
	 * (ack 0): this one would complete it with a mix; the client asks
	 * the server (a correction) and the head moves on */
	m->result = restart ? NK_RESULT_RETRY : NK_RESULT_OK;
	if (meta->dst >= s->n_servers)
		m->client_id = (uint16_t)(meta->dst - s->n_servers);
	s->stats[SC_STAT_SERVED]++;
	act->switch_reply = 1;
	to_node_and_loop(s, meta, act);
}

/* A server's reply carries the key's item for the loop: value bytes, and
 * RESULT OK; or, on a W_REP, RETRY: a write the server refused (a
 * multi-packet write's FRAG 0 without the rest), which carries the stored
 * value (a forged HKEY's RETRY carries none). An F_REP's RETRY never loops. */
static int carries_item(const struct nk_msg *m, int write)
{
	return m->value_len && (m->result == NK_RESULT_OK ||
				(write && m->result == NK_RESULT_RETRY));
}

/* The key's next write number (wcount + 1), taken by a counted write and
 * by a late reply alike. Strict: wmask's window moves with it; a write
 * still in flight 32 later write numbers on (late replies included) falls
 * out of it, is no longer counted in pending_writes, and its reply, if it
 * comes, is a late one. */
static void next_write_number(struct starcache_state *s, uint32_t idx)
{
	s->wcount[idx]++;
	if (s->faithful)
		return;
	if ((s->wmask[idx] >> (SC_WINDOW - 1)) && s->pending_writes[idx])
		s->pending_writes[idx]--;
	s->wmask[idx] <<= 1;
}

/* Strict: a counted write's W_REP whose write number (its W_REQ's LAT,
 * echoed) is not in flight: a duplicate of a reply already seen, the
 * reply of a write the stuck_us restart took as lost, or one older than
 * wmask's window; or an uncounted write's W_REP (FLAG 0) for a key now
 * cached and not DRAINING. It lowers no count (the write it answers is
 * not counted any more: lowering it again would let a write still in
 * flight pass for a lone one), and its write may have reached the server
 * after the value the loop holds was read: the key goes INVALID, no write
 * in flight may revalidate it (last OVERLAP), and the write number moves
 * on so that a fetch's F_REP stamped before is refused; the watchdog
 * refetches. */
static void late_write(struct starcache_state *s, uint32_t idx, struct nk_pkt_meta *meta,
		       struct nk_actions *act)
{
	s->state[idx] = SC_STATE_INVALID;
	s->last_src[idx] = SC_LAST_OVERLAP;
	next_write_number(s, idx);
	s->stats[SC_STAT_LATE_WRITES]++;
	forward(s, meta, act);
}

/* The server's W_REP or F_REP for a cached key: revalidate and put the new
 * value into the loop, or just pass it on. */
static void server_update(struct starcache_state *s, int64_t hit, struct nk_msg *m,
			  struct nk_pkt_meta *meta, struct nk_actions *act)
{
	uint32_t idx = (uint32_t)hit;
	int write = m->op == NK_STARCACHE_OP_W_REP;
	if (hit < 0 || s->state[idx] == SC_STATE_DRAINING) {
		if (!write)
			m->result = NK_RESULT_RETRY;   /* the controller's fetch failed */
		forward(s, meta, act);
		return;
	}
	if (m->frag_idx) {
		/* a later fragment of a multi-packet item (digest 8.7): the
		 * first decided; this one joins the loop only behind the
		 * item's fragments before it (strict: exactly FRAG packets of
		 * the key loop that are not stale) */
		int join = carries_item(m, write) && s->state[idx] == SC_STATE_VALID &&
			   (s->faithful || (!s->pending_writes[idx] &&
					    s->inloop[idx] - s->stale[idx] == m->frag_idx));
		if (!join) {
			if (!write)
				m->result = NK_RESULT_RETRY;
			else
				s->stats[SC_STAT_STALE_UPDATES]++;
			forward(s, meta, act);
			return;
		}
		if (!s->faithful && s->inloop[idx] < UINT16_MAX)
			s->inloop[idx]++;
		to_node_and_loop(s, meta, act);
		return;
	}
	/* FLAG >= 1: the reply of a write this switch counted (of a
	 * multi-packet item, its first fragment counts); FLAG 0: of a write
	 * that passed while the key was uncached or DRAINING */
	if (write && !s->faithful) {
		/* strict: the reply clears its write's number (LAT, stamped
		 * on the W_REQ) if that write is in flight. An uncounted
		 * write's reply (its LAT is the client's) is late too: the key
		 * was inserted since its W_REQ passed, and the insert's fetch
		 * may have overtaken it and read an older value (the F_REP,
		 * stamped with no write in flight, would loop it). A number
		 * stamped at another slot (the key's before it was deleted and
		 * re-added here) is late too: its low bits may be in flight here */
		uint32_t lat = (uint32_t)m->send_ns;
		uint32_t d = (s->wcount[idx] - lat) & 0xFFFFu;
		if (!m->frag_cnt || lat >> 16 != idx || d >= SC_WINDOW ||
		    !((s->wmask[idx] >> d) & 1u)) {
			late_write(s, idx, meta, act);
			return;
		}
		s->wmask[idx] &= ~(1u << d);
		if (s->pending_writes[idx])
			s->pending_writes[idx]--;
	}
	/* a reply without value bytes (an uncached write, a W_REQ whose HKEY
	 * is not its key's: RETRY, an empty item) or an F_REP's RETRY puts
	 * nothing into the loop; a refused write's RETRY with the stored
	 * value revalidates like a write that changed nothing */
	/* strict: a write's reply revalidates only if it answers the last
	 * write the switch counted; with server->switch FIFO that reply is the
	 * last to come, but a reordered older reply can come after it (count
	 * 0 then) and would put its older value into the loop */
	/* the reply's destination as the packet names it (NK_NODE_NONE for
	 * the controller's address), as last_src keeps the write's source and
	 * as the P4 twin compares them */
	int last = s->last_src[idx] == meta->dst && s->last_seq[idx] == m->req_id;
	/* strict: a fetch's reply only for a key that is not VALID (not
	 * fetched yet, or the watchdog's refetch, which invalidates first): a
	 * late F_REP (reordered behind a write's reply that revalidated the
	 * key) would mark the newer packet stale and loop its older value */
	/* strict: and only if no write was counted since its F_REQ passed
	 * (the F_REQ's stamp, echoed in LAT, is the key's write count now):
	 * otherwise the server may have read the value before writes that
	 * were then applied and answered (an overlap's replies revalidate
	 * nothing, so the count is back to 0 and the key INVALID), and the
	 * late F_REP would loop a value older than their acknowledgements */
	int fresh = (uint32_t)m->send_ns == SC_LAT(idx, s->wcount[idx]);
	int ok = m->frag_cnt && carries_item(m, write) && (s->faithful ||
		 (!s->pending_writes[idx] && s->state[idx] != SC_STATE_VALID &&
		  (write ? last : fresh)));
	if (!ok) {
		/* no value (an uncached write), a RETRY (a W_REQ whose HKEY is
		 * not its key's), an older write's reply while another is in flight
		 * (strict), or a duplicate: the loop keeps what it has */
		if (!write)
			m->result = NK_RESULT_RETRY;
		else if (m->frag_cnt)
			s->stats[SC_STAT_STALE_UPDATES]++;
		forward(s, meta, act);
		return;
	}
	s->state[idx] = SC_STATE_VALID;
	/* the head's next visits bring the new item; if older fragments
	 * answered it already, the next visit tells it to ask the server */
	s->ack[idx] = s->ack[idx] == 1 ? 1 : 0;   /* 0 stays: two writes in a row */
	if (!s->faithful) {
		/* the key's packets in the loop now are older: they go (the
		 * paper's 1-bit mode keeps them, digest 8.3) */
		s->stale[idx] = s->inloop[idx];
		if (s->inloop[idx] < UINT16_MAX)
			s->inloop[idx]++;
	}
	s->stats[write ? SC_STAT_REVALIDATIONS : SC_STAT_FETCHES]++;
	to_node_and_loop(s, meta, act);
}

static void sc_process(void *st, struct nk_msg *m, struct nk_pkt_meta *meta,
		       struct nk_actions *act)
{
	struct starcache_state *s = st;
	memset(act, 0, sizeof(*act));
	if (m->proto != NK_PROTO_STARCACHE) {
		forward(s, meta, act);
		return;
	}
	enum nk_origin from = nk_origin_of(&s->trust, s->node_port, meta);
	if (from == NK_ORIGIN_CLIENT && m->op != NK_STARCACHE_OP_R_REQ &&
	    m->op != NK_STARCACHE_OP_W_REQ && m->op != NK_STARCACHE_OP_CRN_REQ) {
		/* a forged reply would enter the loop and answer other clients */
		drop(s, SC_STAT_HOST_SERVER_OP, act);
		return;
	}
	if (from == NK_ORIGIN_CLIENT) {
		/* CACHED is the switch's to set; FLAG and FRAG of a write too
		 * (FLAG >= 1 would make the server attach the value to its
		 * reply: a cache packet for a key the switch never invalidated) */
		int forged = m->flags != 0 || (m->op == NK_STARCACHE_OP_W_REQ &&
					       m->frag_cnt == 1);
		m->flags = 0;
		if (forged)
			s->stats[SC_STAT_FORGED_FIELDS]++;
	}
	const struct nk_k128_ent *e = nk_k128_find(&s->tab, m->hkey[0], m->hkey[1]);
	int64_t hit = e ? (int64_t)e->val : -1;
	if (meta->recirculated) {
		if (m->op == NK_STARCACHE_OP_R_REP || m->op == NK_STARCACHE_OP_W_REP ||
		    m->op == NK_STARCACHE_OP_F_REP)
			cache_packet(s, hit, m, meta, act);
		else
			drop(s, SC_STAT_LOOP_DROPS, act);
		return;
	}
	switch (m->op) {
	case NK_STARCACHE_OP_R_REQ:
		if (hit < 0)
			forward(s, meta, act);
		else
			read_request(s, (uint32_t)hit, m, meta, act);
		return;
	case NK_STARCACHE_OP_W_REQ: {
		/* FLAG tells the server whether to attach the new value; a write
		 * of a multi-packet item (FLAG >= 2, our choice) keeps FLAG and
		 * FRAG, its shape, and the switch says "attach" in CACHED, set on
		 * its FRAG 0 only: that fragment is the write the key counts */
		int multi = m->frag_cnt >= 2;
		if (!multi)
			m->frag_cnt = 0;
		m->frag_idx = multi ? m->frag_idx : 0;
		m->flags = 0;
		if (hit >= 0 && meta->dst != s->home[hit]) {
			/* only the home's reply may revalidate the key */
			meta->dst = s->home[hit];
			s->stats[SC_STAT_WRONG_HOME]++;
		}
		if (hit >= 0 && s->state[hit] != SC_STATE_DRAINING && !m->frag_idx) {
			s->state[hit] = SC_STATE_INVALID;
			/* a write counted while another is in flight: the
			 * server may apply them in another order than they
			 * passed here (switch->server reordering), so no
			 * reply of the overlap is known to carry the stored
			 * value; none revalidates (the next write counted
			 * alone does, or the watchdog's refetch) */
			int overlap = !s->faithful && s->pending_writes[hit];
			next_write_number(s, hit);
			if (!s->faithful) {
				/* strict: the write's number, in flight until
				 * its W_REP (the server echoes LAT) clears it */
				s->wmask[hit] |= 1u;
				if (s->pending_writes[hit] < UINT16_MAX)
					s->pending_writes[hit]++;
				m->send_ns = SC_LAT(hit, s->wcount[hit]);
			}
			s->write_ts[hit] = (uint32_t)(meta->now_ns / 1000);
			s->last_src[hit] = overlap ? SC_LAST_OVERLAP : meta->src;
			s->last_seq[hit] = m->req_id;
			if (multi)
				m->flags = 1;
			else
				m->frag_cnt = 1;
			s->stats[SC_STAT_INVALIDATIONS]++;
		}
		forward(s, meta, act);
		return;
	}
	case NK_STARCACHE_OP_W_REP:
	case NK_STARCACHE_OP_F_REP:
		server_update(s, hit, m, meta, act);
		return;
	case NK_STARCACHE_OP_F_REQ:
		/* the controller's fetch (a client's is refused above): LAT
		 * carries the key's write count (SC_LAT), which the server echoes in its
		 * F_REP; the switch takes the F_REP only if it is still the
		 * count (server_update). With a counted write in flight the
		 * server may apply it after reading (switch->server
		 * reordering) and, in an overlap, its reply revalidates
		 * nothing: the stamp is one behind, which no count matches
		 * (strict; the fetch is refused and sent again) */
		if (hit >= 0)
			m->send_ns = SC_LAT(hit, s->wcount[hit] -
					    (!s->faithful && s->pending_writes[hit] ? 1u : 0u));
		forward(s, meta, act);
		return;
	default:
		/* CRN_REQ, R_REP from a server */
		forward(s, meta, act);
		return;
	}
}

const struct nk_pipeline_ops nk_pipeline_starcache = {
	.name = "starcache",
	.proto = NK_PROTO_STARCACHE,
	.udp_port = NK_STARCACHE_PORT,
	.udp_ports = 1,
	.state_size = sizeof(struct starcache_state),
	.never_to_cpu = 1,
	.init = sc_init,
	.fini = sc_fini,
	.process = sc_process,
	.reg_read = sc_reg_read,
	.reg_write = sc_reg_write,
	.table_add = sc_table_add,
	.table_del = sc_table_del,
};
