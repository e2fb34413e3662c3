/*
 * pegasus.c - the Pegasus switch pipeline (OSDI'20; shared/design/pegasus.md):
 * an in-network coherence directory for the replicated hot keys.
 *
 * Map of this file:
 *   state + named registers  - every register of docs/pegasus.md, by name
 *   rkeys                    - exact-match table keyhash -> idx (open addressing)
 *   selection                - random / rr / wrr / least_loaded, reads and writes
 *   process()                - Algorithm 1 (requests), Algorithm 2 (replies),
 *                              VWRITE (digest §9.1), BYPASS, AMO detector,
 *                              sampling of unreplicated keys to the controller
 *   invariants               - I1, I3, I4 asserted under NETKV_DEBUG
 *   control hooks            - reg_read / reg_write / table_add / table_del
 *
 * Write fan-out (r > 1 targets, digest §3.2/§3.7): the r targets are the
 * consecutive servers start, start+1, ... (mod n) and the write leaves as a
 * multicast to the precomputed group nk_peg_mcast_group(start, r) (installed by
 * the controller; the switch addresses each copy to the node behind its
 * port). Every target applies the write and answers with its own
 * WRITE-REPLY; Algorithm 2 adds each replier at that version; the client
 * completes on the first reply. The copies carry `bitmap` = the target set
 * (without MULTI), which tells servers "one of several copies"
 * (docs/pegasus.md, "Write fan-out"). Pegasus-AMO keeps the single-packet
 * shape: the detector hash(client_id, req_id) mod n gets the write with flag
 * MULTI and `bitmap` = the other targets, executes it first and copies it
 * with RC_REQ (their RC_ACKs join the rset). write_mcast=0 selects that
 * RC_REQ path for every write (the earlier netkv design; for comparison).
 *
 * No allocation on the per-packet path: all arrays are sized from the params
 * string in init.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/pipeline.h"
#include "netkv/rng.h"
#include "netkv/wire.h"
#include "peg_params.h"

/* PEG_N (rset_list stride), PEG_WRR_SLOTS, nk_peg_mcast_group,
 * nk_peg_fanout_round and the initial WRR schedule: netkv/constants.h */
#define PEG_MAX_NODES 4096
#define PEG_RATE_MAX 0xFFFFFFFFu      /* 32-bit saturating counters */

/* The multicast group of the write targets start, start+1, ..., start+r-1
 * (mod n), for 2 <= r <= n <= 32, is nk_peg_mcast_group(start, r): 1..1023
 * (0 is never used: "no multicast" on v1model; netkv-switch and the
 * simulator have NK_MAX_MCAST_GROUPS). The controller installs every group
 * at start (netkv/protocols/pegasus.py, docs/pegasus.md). */

enum peg_sel { SEL_RANDOM = 0, SEL_RR = 1, SEL_WRR = 2, SEL_LEAST_LOADED = 3 };

/* Statistics cells of register `stats` (index -> meaning; docs/pegasus.md). */
enum peg_stat {
	ST_READS = 0,           /* READs to replicated keys */
	ST_WRITES,              /* WRITE/DEL to replicated keys forwarded */
	ST_MISS,                /* requests to unreplicated keys (L3) */
	ST_SAMPLED,             /* of which cloned to the controller */
	ST_BYPASS,              /* BYPASS packets (no directory processing) */
	ST_RESET,               /* Algorithm 2: rset reset (newer version) */
	ST_EXTEND,              /* Algorithm 2: rset extended (same version) */
	ST_STALE,               /* Algorithm 2: older version, no change */
	ST_VWRITE_FWD,          /* VWRITE stamped and forwarded */
	ST_VWRITE_DROP,         /* VWRITE dropped: a write outstanding, or no entry */
	ST_PAUSED_DROP,         /* writes dropped because the key is paused (AMO) */
	ST_NO_ROUTE,            /* no node_fwd entry for the destination */
	ST_TO_CPU,              /* replies addressed to the controller */
	ST_BAD_SERVER,          /* replies with server_id >= n_servers */
	/* the trust boundary (docs/security.md): refusals by reason */
	ST_FORGED_VER,          /* a request from an untrusted port carried VER: overwritten */
	ST_FORGED_FLAGS,        /* ... a client's BYPASS/MULTI/bitmap: cleared */
	ST_HOST_SERVER_OP,      /* a server- or controller-only op from a client port: dropped */
	ST_VER_EXHAUSTED,       /* a write needing a version past 2^64-1: dropped */
	ST_COUNT
};

struct rk_slot {
	uint32_t keyhash;
	uint32_t idx;
	uint8_t used;
};

#define PEG_NREGS 26

struct pegasus_state {
	/* configuration */
	uint32_t max_rkeys;
	uint32_t n_nodes;
	uint32_t sample_every;   /* 0 = no sampling */
	uint32_t fanout_div16;   /* fanout_div in sixteenths (PEG_FANOUT_DIV_UNIT) */
	uint8_t selection;
	uint8_t unsafe_skip_version_check;  /* broken on purpose (tests only) */
	uint8_t amo;
	uint8_t fanout_auto;
	uint8_t write_mcast;     /* r > 1 writes by multicast (1) or RC_REQ (0) */
	struct nk_rng rng;
	struct nk_trust trust;   /* which ports may set switch-owned fields */
	/* tables */
	uint16_t *node_port;     /* node_fwd */
	struct rk_slot *rk;      /* rkeys, rk_cap slots (power of two) */
	uint32_t rk_cap, rk_count;
	/* one-cell registers */
	uint64_t ver_next;
	uint64_t n_servers;
	uint64_t rr_all;
	uint64_t wrr_cursor;
	uint64_t wrr_len;
	uint64_t sample_cnt;
	/* per-key registers [max_rkeys] */
	uint64_t *ver_completed;
	uint64_t *ver_last_write;
	uint8_t *rset_size;
	uint32_t *rset_bitmap;
	uint8_t *rset_list;      /* [max_rkeys * PEG_N] */
	uint8_t *rr_key;
	uint32_t *rate, *rd_cnt, *wr_cnt;
	uint8_t *fanout;
	uint8_t *draining;
	uint8_t *paused;
	/* per-server / global registers */
	uint8_t wrr_sched[PEG_WRR_SLOTS];
	uint32_t srv_load[PEG_N];
	uint32_t srv_inflight[PEG_N];
	uint64_t stats[ST_COUNT];
	struct nk_reg_desc regs[PEG_NREGS];
	unsigned nregs;
};

/* ---- init / fini ---------------------------------------------------------- */

static void add_reg(struct pegasus_state *s, const char *name, void *base, uint32_t n,
		    uint8_t esize, uint8_t bits)
{
	s->regs[s->nregs++] = (struct nk_reg_desc){ name, base, n, esize, bits, 0 };
}

static void wrr_uniform(struct pegasus_state *s)
{
	uint32_t n = (uint32_t)s->n_servers;
	s->wrr_len = nk_peg_wrr_len_initial(n);
	for (uint32_t i = 0; i < PEG_WRR_SLOTS; i++)
		s->wrr_sched[i] = (uint8_t)nk_peg_wrr_sched_initial(i, n);
	s->wrr_cursor = 0;
}

static void peg_fini(void *st)
{
	struct pegasus_state *s = st;
	free(s->node_port);
	free(s->rk);
	free(s->ver_completed);
	free(s->ver_last_write);
	free(s->rset_size);
	free(s->rset_bitmap);
	free(s->rset_list);
	free(s->rr_key);
	free(s->rate);
	free(s->rd_cnt);
	free(s->wr_cnt);
	free(s->fanout);
	free(s->draining);
	free(s->paused);
	memset(s, 0, sizeof(*s));
}

static int parse_selection(const char *params, uint8_t *sel)
{
	char buf[32];
	if (!nkp_get(params, "selection", buf, sizeof buf)) {
		*sel = SEL_WRR;
		return 0;
	}
	if (!strcmp(buf, "random"))
		*sel = SEL_RANDOM;
	else if (!strcmp(buf, "rr"))
		*sel = SEL_RR;
	else if (!strcmp(buf, "wrr"))
		*sel = SEL_WRR;
	else if (!strcmp(buf, "least_loaded"))
		*sel = SEL_LEAST_LOADED;
	else
		return -1;
	return 0;
}

static int peg_init(void *st, const struct nk_pipeline_cfg *cfg)
{
	struct pegasus_state *s = st;
	memset(s, 0, sizeof(*s));
	uint64_t max_rkeys, n_servers, amo, sample, fdiv, ver0, unsafe, mcast;
	char buf[16];
	if (nkp_u64(cfg->params, "max_rkeys", 64, &max_rkeys) ||
	    nkp_u64(cfg->params, "n_servers", cfg->n_servers, &n_servers) ||
	    nkp_u64(cfg->params, "amo", 0, &amo) ||
	    nkp_u64(cfg->params, "sample", 128, &sample) ||
	    nkp_u64(cfg->params, "fanout_div16", PEG_FANOUT_DIV_UNIT, &fdiv) ||
	    nkp_u64(cfg->params, "ver_next", PEG_VER_NEXT_INITIAL, &ver0) ||
	    nkp_u64(cfg->params, "unsafe_skip_version_check", 0, &unsafe) ||
	    nkp_u64(cfg->params, "write_mcast", 1, &mcast) ||
	    parse_selection(cfg->params, &s->selection) ||
	    nkp_trust(cfg->params, (uint32_t)n_servers, &s->trust))
		return NK_PIPE_EINVAL;
	if (max_rkeys < 1 || max_rkeys > (1u << 20) || n_servers < 1 || n_servers > PEG_N ||
	    fdiv < 1 || fdiv > 0xFFFF || ver0 < 1 || cfg->n_nodes > PEG_MAX_NODES)
		return NK_PIPE_ERANGE;
	if (nkp_get(cfg->params, "fanout", buf, sizeof buf)) {
		if (!strcmp(buf, "auto"))
			s->fanout_auto = 1;
		else if (strcmp(buf, "reg"))
			return NK_PIPE_EINVAL;
	}
	s->max_rkeys = (uint32_t)max_rkeys;
	s->n_servers = n_servers;
	s->amo = amo != 0;
	s->write_mcast = mcast != 0;
	s->sample_every = (uint32_t)sample;
	s->unsafe_skip_version_check = unsafe != 0;
	s->fanout_div16 = (uint32_t)fdiv;
	s->ver_next = ver0;
	nk_rng_seed(&s->rng, cfg->seed, 0x9e6a5u);

	s->n_nodes = PEG_MAX_NODES;
	s->node_port = malloc(PEG_MAX_NODES * sizeof(uint16_t));
	s->rk_cap = 16;
	while (s->rk_cap < 2 * s->max_rkeys)
		s->rk_cap <<= 1;
	s->rk = calloc(s->rk_cap, sizeof(*s->rk));
	uint32_t k = s->max_rkeys;
	s->ver_completed = calloc(k, sizeof(uint64_t));
	s->ver_last_write = calloc(k, sizeof(uint64_t));
	s->rset_size = calloc(k, 1);
	s->rset_bitmap = calloc(k, sizeof(uint32_t));
	s->rset_list = calloc((size_t)k * PEG_N, 1);
	s->rr_key = calloc(k, 1);
	s->rate = calloc(k, sizeof(uint32_t));
	s->rd_cnt = calloc(k, sizeof(uint32_t));
	s->wr_cnt = calloc(k, sizeof(uint32_t));
	s->fanout = calloc(k, 1);
	s->draining = calloc(k, 1);
	s->paused = calloc(k, 1);
	if (!s->node_port || !s->rk || !s->ver_completed || !s->ver_last_write ||
	    !s->rset_size || !s->rset_bitmap || !s->rset_list || !s->rr_key || !s->rate ||
	    !s->rd_cnt || !s->wr_cnt || !s->fanout || !s->draining || !s->paused) {
		peg_fini(s);
		return NK_PIPE_EFULL;
	}
	for (uint32_t i = 0; i < PEG_MAX_NODES; i++)
		s->node_port[i] = i < cfg->n_nodes && cfg->node_port ? cfg->node_port[i]
								      : NK_NODE_NONE;
	memset(s->fanout, 1, k);
	wrr_uniform(s);

	/* Register names: identical in p4src/pegasus and the Python controller. */
	add_reg(s, "ver_next", &s->ver_next, 1, 8, 64);
	add_reg(s, "ver_completed", s->ver_completed, k, 8, 64);
	add_reg(s, "ver_last_write", s->ver_last_write, k, 8, 64);
	add_reg(s, "rset_size", s->rset_size, k, 1, 8);
	add_reg(s, "rset_bitmap", s->rset_bitmap, k, 4, 32);
	add_reg(s, "rset_list", s->rset_list, k * PEG_N, 1, 8);
	add_reg(s, "rr_key", s->rr_key, k, 1, 8);
	add_reg(s, "rr_all", &s->rr_all, 1, 8, 8);
	add_reg(s, "n_servers", &s->n_servers, 1, 8, 8);
	add_reg(s, "rate", s->rate, k, 4, 32);
	add_reg(s, "rd_cnt", s->rd_cnt, k, 4, 32);
	add_reg(s, "wr_cnt", s->wr_cnt, k, 4, 32);
	add_reg(s, "fanout", s->fanout, k, 1, 8);
	add_reg(s, "draining", s->draining, k, 1, 1);
	add_reg(s, "paused", s->paused, k, 1, 1);
	add_reg(s, "wrr_sched", s->wrr_sched, PEG_WRR_SLOTS, 1, 8);
	add_reg(s, "wrr_cursor", &s->wrr_cursor, 1, 8, 8);
	add_reg(s, "wrr_len", &s->wrr_len, 1, 8, 9);
	add_reg(s, "srv_load", s->srv_load, PEG_N, 4, 32);
	add_reg(s, "srv_inflight", s->srv_inflight, PEG_N, 4, 32);
	add_reg(s, "sample_cnt", &s->sample_cnt, 1, 8, 32);
	add_reg(s, "stats", s->stats, ST_COUNT, 8, 64);
	return 0;
}

/* ---- registers by name ---------------------------------------------------- */

static const struct nk_reg_desc *reg_find(const struct pegasus_state *s, const char *name)
{
	return nk_reg_find(s->regs, s->nregs, name);
}

static int peg_reg_read(void *st, const char *name, uint32_t idx, uint64_t *val)
{
	const struct nk_reg_desc *r = reg_find(st, name);
	if (!r)
		return NK_PIPE_ENOENT;
	if (idx >= r->n)
		return NK_PIPE_ERANGE;
	*val = nk_reg_get(r, idx);
	return 0;
}

static int peg_reg_write(void *st, const char *name, uint32_t idx, uint64_t val)
{
	struct pegasus_state *s = st;
	const struct nk_reg_desc *r = reg_find(s, name);
	if (!r)
		return NK_PIPE_ENOENT;
	if (idx >= r->n)
		return NK_PIPE_ERANGE;
	/* Values that would make the data plane index out of its arrays. */
	if (!strcmp(name, "n_servers") && (val < 1 || val > PEG_N))
		return NK_PIPE_ERANGE;
	if ((!strcmp(name, "rset_list") || !strcmp(name, "wrr_sched")) && val >= PEG_N)
		return NK_PIPE_ERANGE;
	if (!strcmp(name, "rset_size") && val > PEG_N)
		return NK_PIPE_ERANGE;
	if (!strcmp(name, "wrr_len") && (val < 1 || val > PEG_WRR_SLOTS))
		return NK_PIPE_ERANGE;
	if (!strcmp(name, "wrr_cursor") && val >= PEG_WRR_SLOTS)
		return NK_PIPE_ERANGE;
	nk_reg_set(r, idx, val);
	if (!strcmp(name, "n_servers"))
		s->rr_all %= val;
	return 0;
}

/* ---- rkeys: keyhash -> idx ----------------------------------------------- */

static inline uint32_t rk_home(const struct pegasus_state *s, uint32_t keyhash)
{
	return (uint32_t)(nk_mix64(keyhash) & (s->rk_cap - 1));
}

/* idx, or -1 on a miss */
static int64_t rk_lookup(const struct pegasus_state *s, uint32_t keyhash)
{
	for (uint32_t i = rk_home(s, keyhash), n = 0; n < s->rk_cap;
	     i = (i + 1) & (s->rk_cap - 1), n++) {
		if (!s->rk[i].used)
			return -1;
		if (s->rk[i].keyhash == keyhash)
			return s->rk[i].idx;
	}
	return -1;
}

static int rk_add(struct pegasus_state *s, uint32_t keyhash, uint32_t idx)
{
	uint32_t i = rk_home(s, keyhash);
	while (s->rk[i].used) {
		if (s->rk[i].keyhash == keyhash) {
			s->rk[i].idx = idx;   /* modify */
			return 0;
		}
		i = (i + 1) & (s->rk_cap - 1);
	}
	if (s->rk_count >= s->max_rkeys)
		return NK_PIPE_EFULL;
	s->rk[i] = (struct rk_slot){ keyhash, idx, 1 };
	s->rk_count++;
	return 0;
}

/* Linear-probing delete with backward shift (no tombstones). */
static int rk_del(struct pegasus_state *s, uint32_t keyhash)
{
	uint32_t mask = s->rk_cap - 1, i = rk_home(s, keyhash);
	while (s->rk[i].used && s->rk[i].keyhash != keyhash)
		i = (i + 1) & mask;
	if (!s->rk[i].used)
		return NK_PIPE_ENOENT;
	s->rk[i].used = 0;
	s->rk_count--;
	for (uint32_t j = (i + 1) & mask; s->rk[j].used; j = (j + 1) & mask) {
		uint32_t h = rk_home(s, s->rk[j].keyhash);
		/* can slot j's entry move to the hole at i? (h not in (i, j]) */
		int move = i <= j ? (h <= i || h > j) : (h <= i && h > j);
		if (move) {
			s->rk[i] = s->rk[j];
			s->rk[j].used = 0;
			i = j;
		}
	}
	return 0;
}

static int peg_table_add(void *st, const char *table, const uint64_t *key, unsigned nkey,
			 const uint64_t *args, unsigned nargs)
{
	struct pegasus_state *s = st;
	if (!strcmp(table, "rkeys")) {
		if (nkey != 1 || nargs != 1)
			return NK_PIPE_EINVAL;
		if (key[0] > UINT32_MAX || args[0] >= s->max_rkeys)
			return NK_PIPE_ERANGE;
		return rk_add(s, (uint32_t)key[0], (uint32_t)args[0]);
	}
	if (!strcmp(table, "node_fwd")) {
		if (nkey != 1 || nargs != 1)
			return NK_PIPE_EINVAL;
		if (key[0] >= s->n_nodes || args[0] >= NK_NODE_NONE)
			return NK_PIPE_ERANGE;
		s->node_port[key[0]] = (uint16_t)args[0];
		return 0;
	}
	return NK_PIPE_ENOENT;
}

static int peg_table_del(void *st, const char *table, const uint64_t *key, unsigned nkey)
{
	struct pegasus_state *s = st;
	if (nkey != 1)
		return strcmp(table, "rkeys") && strcmp(table, "node_fwd") ? NK_PIPE_ENOENT
									    : NK_PIPE_EINVAL;
	if (!strcmp(table, "rkeys")) {
		if (key[0] > UINT32_MAX)
			return NK_PIPE_ERANGE;
		return rk_del(s, (uint32_t)key[0]);
	}
	if (!strcmp(table, "node_fwd")) {
		if (key[0] >= s->n_nodes)
			return NK_PIPE_ERANGE;
		s->node_port[key[0]] = NK_NODE_NONE;
		return 0;
	}
	return NK_PIPE_ENOENT;
}

/* ---- invariants (debug builds) -------------------------------------------- */

#ifdef NETKV_DEBUG
static void peg_panic(const char *what, uint32_t idx, const struct pegasus_state *s)
{
	fprintf(stderr, "pegasus: invariant %s violated at idx %u (size %u bitmap 0x%x "
		"ver_completed %llu ver_next %llu)\n", what, idx, s->rset_size[idx],
		s->rset_bitmap[idx], (unsigned long long)s->ver_completed[idx],
		(unsigned long long)s->ver_next);
	abort();
}

/* I1: 1 <= size <= n; popcount(bitmap) == size; list[0..size) distinct and
 * equal to the set bits. */
static void check_i1(const struct pegasus_state *s, uint32_t idx)
{
	uint32_t size = s->rset_size[idx], seen = 0;
	if (size < 1 || size > s->n_servers)
		peg_panic("I1 (size)", idx, s);
	if ((uint32_t)__builtin_popcount(s->rset_bitmap[idx]) != size)
		peg_panic("I1 (popcount)", idx, s);
	for (uint32_t i = 0; i < size; i++) {
		uint32_t b = 1u << s->rset_list[idx * PEG_N + i];
		if (seen & b)
			peg_panic("I1 (duplicate)", idx, s);
		seen |= b;
	}
	if (seen != s->rset_bitmap[idx])
		peg_panic("I1 (list != bitmap)", idx, s);
}
#define CHECK_I1(s, idx) check_i1((s), (idx))
#define CHECK(cond, what, s, idx) do { if (!(cond)) peg_panic((what), (idx), (s)); } while (0)
#else
#define CHECK_I1(s, idx) ((void)0)
#define CHECK(cond, what, s, idx) ((void)0)
#endif

/* ---- selection ------------------------------------------------------------ */

static inline uint32_t nsrv(const struct pegasus_state *s)
{
	return (uint32_t)s->n_servers;
}

static uint32_t rr_in_rset(struct pegasus_state *s, uint32_t idx)
{
	uint32_t c = s->rr_key[idx];
	if (c >= s->rset_size[idx])
		c = 0;
	s->rr_key[idx] = (uint8_t)(c + 1);
	return s->rset_list[idx * PEG_N + c];
}

static uint32_t wrr_next(struct pegasus_state *s)
{
	uint32_t c = (uint32_t)s->wrr_cursor;
	if (c >= s->wrr_len)
		c = 0;
	s->wrr_cursor = c + 1 >= s->wrr_len ? 0 : c + 1;
	uint32_t srv = s->wrr_sched[c];
	return srv < nsrv(s) ? srv : srv % nsrv(s);
}

/* A READ's (and a VWRITE's) destination: one member of rset[idx]. */
static uint32_t select_read(struct pegasus_state *s, uint32_t idx)
{
	uint32_t size = s->rset_size[idx], base = idx * PEG_N;
	switch (s->selection) {
	case SEL_RANDOM:
		return s->rset_list[base + (uint32_t)(nk_rng_next(&s->rng) % size)];
	case SEL_WRR: {
		uint32_t srv = wrr_next(s);
		if (s->rset_bitmap[idx] & (1u << srv))
			return srv;
		return rr_in_rset(s, idx);
	}
	case SEL_LEAST_LOADED: {
		/* scan from the per-key RR offset so ties rotate */
		uint32_t start = s->rr_key[idx] >= size ? 0 : s->rr_key[idx];
		s->rr_key[idx] = (uint8_t)(start + 1 >= size ? 0 : start + 1);
		uint32_t best = s->rset_list[base + start];
		for (uint32_t k = 1; k < size; k++) {
			uint32_t cand = s->rset_list[base + (start + k) % size];
			if (s->srv_inflight[cand] < s->srv_inflight[best])
				best = cand;
		}
		return best;
	}
	default:
		return rr_in_rset(s, idx);
	}
}

/* The first write target (over all servers); the r targets are start,
 * start+1, ... (mod n), so that a precomputed multicast group per (start, r)
 * covers every choice. least_loaded: the server with the fewest requests in
 * flight, scanning from the rotating offset rr_all (ties: the first). */
static uint32_t select_write_start(struct pegasus_state *s)
{
	uint32_t n = nsrv(s), start;
	switch (s->selection) {
	case SEL_RANDOM:
		return (uint32_t)(nk_rng_next(&s->rng) % n);
	case SEL_WRR:
		return wrr_next(s);
	case SEL_LEAST_LOADED: {
		uint32_t off = (uint32_t)(s->rr_all % n), best = off;
		s->rr_all = (s->rr_all + 1) % n;
		for (uint32_t j = 1; j < n; j++) {
			uint32_t c = (off + j) % n;
			if (s->srv_inflight[c] < s->srv_inflight[best])
				best = c;
		}
		return best;
	}
	default:
		start = (uint32_t)(s->rr_all % n);
		s->rr_all = (s->rr_all + 1) % n;
		return start;
	}
}

/* Pegasus-AMO detector node: CRC-32 over client_id (BE u16) | req_id (BE u32). */
static uint32_t amo_detector(const struct pegasus_state *s, const struct nk_msg *m)
{
	const uint8_t b[6] = {
		(uint8_t)(m->client_id >> 8), (uint8_t)m->client_id,
		(uint8_t)(m->req_id >> 24), (uint8_t)(m->req_id >> 16),
		(uint8_t)(m->req_id >> 8), (uint8_t)m->req_id,
	};
	return nk_crc32(b, sizeof b) % nsrv(s);
}

/* Write fan-out r: the per-key `fanout` register (set by the controller each
 * epoch), or with fanout=auto computed here from the epoch's counters:
 * r = clamp(round(rd / (wr + 1) / fanout_div), 1, n), fanout_div in sixteenths. */
static uint32_t write_fanout(const struct pegasus_state *s, uint32_t idx)
{
	uint64_t r;
	if (s->fanout_auto) {
		r = nk_peg_fanout_round(s->rd_cnt[idx], s->wr_cnt[idx], s->fanout_div16);
	} else {
		r = s->fanout[idx];
	}
	if (r < 1)
		r = 1;
	if (r > nsrv(s))
		r = nsrv(s);
	return (uint32_t)r;
}

/* ---- process -------------------------------------------------------------- */

static void forward(struct pegasus_state *s, struct nk_pkt_meta *meta, struct nk_actions *act)
{
	nk_fwd_to_node(s->node_port, s->n_nodes, meta, act);
	if (act->fwd == NK_FWD_DROP)
		s->stats[ST_NO_ROUTE]++;
}

/* A request (READ/WRITE/DEL, any key, BYPASS or not) leaving for server
 * meta->dst: one more in flight there (least_loaded's metric). */
static void forward_request(struct pegasus_state *s, struct nk_pkt_meta *meta,
			    struct nk_actions *act)
{
	forward(s, meta, act);
	if (act->fwd == NK_FWD_PORT && meta->dst < PEG_N &&
	    s->srv_inflight[meta->dst] < UINT32_MAX)
		s->srv_inflight[meta->dst]++;
}

/* A write multicast to the servers of `targets`: one more in flight at
 * each (the group's ports are the controller's; it is not checked here). */
static void forward_mcast(struct pegasus_state *s, uint32_t start, uint32_t r,
			  uint32_t targets, struct nk_actions *act)
{
	act->fwd = NK_FWD_MCAST;
	act->mcast_group = (uint16_t)nk_peg_mcast_group(start, r);
	for (uint32_t t = 0; t < PEG_N; t++)
		if ((targets >> t & 1) && s->srv_inflight[t] < UINT32_MAX)
			s->srv_inflight[t]++;
}

static inline void sat_inc(uint32_t *c)
{
	if (*c < PEG_RATE_MAX)
		(*c)++;
}

/* Algorithm 2 on a reply / RC_ACK (or a PUT_FWD leaving a server). */
static void directory_update(struct pegasus_state *s, const struct nk_msg *m)
{
	int64_t hit = rk_lookup(s, m->keyhash);
	if (hit < 0)
		return;
	uint32_t idx = (uint32_t)hit, sid = m->server_id;
	if (sid >= nsrv(s)) {
		s->stats[ST_BAD_SERVER]++;
		return;
	}
	uint32_t bit = 1u << sid, base = idx * PEG_N;
	if (m->ver > s->ver_completed[idx]) {
		s->ver_completed[idx] = m->ver;
		s->rset_size[idx] = 1;
		s->rset_bitmap[idx] = bit;
		s->rset_list[base] = (uint8_t)sid;
		s->stats[ST_RESET]++;
	} else if (m->ver == s->ver_completed[idx] || s->unsafe_skip_version_check) {
		/* (the unsafe variant also admits stale replicas: a deliberately
		 * broken directory that the linearizability tests must catch) */
		if (!(s->rset_bitmap[idx] & bit)) {
			uint32_t size = s->rset_size[idx];
			if (size < PEG_N) {
				s->rset_bitmap[idx] |= bit;
				s->rset_list[base + size] = (uint8_t)sid;
				s->rset_size[idx] = (uint8_t)(size + 1);
				s->stats[ST_EXTEND]++;
			}
		}
	} else {
		s->stats[ST_STALE]++;
	}
	CHECK_I1(s, idx);
	CHECK(m->ver <= s->ver_completed[idx], "I3", s, idx);   /* I3 */
}

/* ver_next = max(ver_next, ver + 1) for a version stamped elsewhere (a
 * trusted port: multi-rack). -1 (refused) when ver + 1 would wrap. */
static int ver_follow(struct pegasus_state *s, uint64_t ver)
{
	if (ver == UINT64_MAX) {
		s->stats[ST_VER_EXHAUSTED]++;
		return -1;
	}
	if (ver >= s->ver_next)
		s->ver_next = ver + 1;
	return 0;
}

/* Stamp a WRITE (Algorithm 1): a fresh version, unless VER is already set
 * and the packet came from a trusted port (multi-rack: only the head rack
 * stamps; keep VER, ver_next = max). Versions never wrap: -1 (the write is
 * refused) once ver_next reaches 2^64-1. */
static int stamp(struct pegasus_state *s, struct nk_msg *m, enum nk_origin from)
{
	if (m->ver != 0 && from == NK_ORIGIN_TRUSTED)
		return ver_follow(s, m->ver);
	if (s->ver_next == UINT64_MAX) {
		s->stats[ST_VER_EXHAUSTED]++;
		return -1;
	}
	m->ver = s->ver_next++;
	CHECK(s->ver_next > m->ver, "I4 (ver_next wrapped)", s, 0);
	return 0;
}

/* A request from a client port: the switch-owned fields it may not set
 * (VER; BYPASS, MULTI and the target bitmap) are cleared and counted. */
static void sanitize_request(struct pegasus_state *s, struct nk_msg *m)
{
	if (m->ver) {
		m->ver = 0;
		s->stats[ST_FORGED_VER]++;
	}
	uint8_t owned = NK_PEGASUS_FLAG_BYPASS | NK_PEGASUS_FLAG_MULTI;
	if ((m->flags & owned) || m->bitmap) {
		m->flags &= (uint8_t)~owned;
		m->bitmap = 0;
		s->stats[ST_FORGED_FLAGS]++;
	}
}

static void handle_request(struct pegasus_state *s, struct nk_msg *m,
			   struct nk_pkt_meta *meta, struct nk_actions *act, enum nk_origin from)
{
	int is_write = m->op != NK_PEGASUS_OP_READ;
	int64_t hit = rk_lookup(s, m->keyhash);
	if (hit < 0) {
		/* unreplicated: stamp writes, L3-forward to the addressed home
		 * server, sample to the controller */
		if (is_write && stamp(s, m, from)) {
			act->fwd = NK_FWD_DROP;
			return;
		}
		s->stats[ST_MISS]++;
		if (s->sample_every && ++s->sample_cnt >= s->sample_every) {
			s->sample_cnt = 0;
			act->to_cpu = 1;
			s->stats[ST_SAMPLED]++;
		}
		forward_request(s, meta, act);
		return;
	}
	uint32_t idx = (uint32_t)hit;
	if (s->rset_size[idx] == 0) {
		/* entry installed without its registers (controller bug):
		 * treat as unreplicated rather than index an empty rset */
		if (is_write && stamp(s, m, from)) {
			act->fwd = NK_FWD_DROP;
			return;
		}
		forward_request(s, meta, act);
		return;
	}
	if (is_write && s->paused[idx]) {
		s->stats[ST_PAUSED_DROP]++;
		act->fwd = NK_FWD_DROP;
		return;
	}
	sat_inc(&s->rate[idx]);
	if (!is_write) {
		sat_inc(&s->rd_cnt[idx]);
		meta->dst = (uint16_t)select_read(s, idx);
		s->stats[ST_READS]++;
		forward_request(s, meta, act);
		CHECK_I1(s, idx);
		return;
	}
	if (stamp(s, m, from)) {
		act->fwd = NK_FWD_DROP;
		return;
	}
	sat_inc(&s->wr_cnt[idx]);
	s->ver_last_write[idx] = m->ver;
	s->stats[ST_WRITES]++;
	m->flags &= (uint8_t)~NK_PEGASUS_FLAG_MULTI;
	m->bitmap = 0;
	if (s->draining[idx]) {
		/* removal in progress: the home server only (as addressed) */
		forward_request(s, meta, act);
		return;
	}
	uint32_t r = write_fanout(s, idx), n = nsrv(s);
	uint32_t start = select_write_start(s), all = 0;
	for (uint32_t k = 0; k < r; k++)
		all |= 1u << ((start + k) % n);
	if (s->amo) {
		/* the detector goes first and gets the others in `bitmap`
		 * (MULTI); it replaces itself in the pick, or the last pick */
		uint32_t det = amo_detector(s, m);
		uint32_t others = all & ~(1u << det);
		if (!(all & (1u << det)))
			others &= ~(1u << ((start + r - 1) % n));
		if (others) {
			m->flags |= NK_PEGASUS_FLAG_MULTI;
			m->bitmap = others;
		}
		meta->dst = (uint16_t)det;
		forward_request(s, meta, act);
		return;
	}
	meta->dst = (uint16_t)start;
	if (r == 1) {
		forward_request(s, meta, act);
		return;
	}
	if (!s->write_mcast) {
		/* the RC_REQ path: the first target copies to the others */
		m->flags |= NK_PEGASUS_FLAG_MULTI;
		m->bitmap = all & ~(1u << start);
		forward_request(s, meta, act);
		return;
	}
	/* every target gets a copy and answers; `bitmap` (no MULTI) marks the
	 * copies and names the target set */
	m->bitmap = all;
	forward_mcast(s, start, r, all, act);
}

static void handle_vwrite(struct pegasus_state *s, struct nk_msg *m,
			  struct nk_pkt_meta *meta, struct nk_actions *act)
{
	int64_t hit = rk_lookup(s, m->keyhash);
	act->fwd = NK_FWD_DROP;
	if (hit < 0 || s->rset_size[hit] == 0) {
		s->stats[ST_VWRITE_DROP]++;
		return;
	}
	uint32_t idx = (uint32_t)hit;
	/* §9.1: forward iff no write to the key is outstanding */
	if (s->ver_last_write[idx] != s->ver_completed[idx]) {
		s->stats[ST_VWRITE_DROP]++;
		return;
	}
	m->ver = 0;
	if (stamp(s, m, NK_ORIGIN_CLIENT))
		return;
	s->ver_last_write[idx] = m->ver;
	meta->dst = (uint16_t)select_read(s, idx);
	s->stats[ST_VWRITE_FWD]++;
	forward_request(s, meta, act);
}

static void peg_process(void *st, struct nk_msg *m, struct nk_pkt_meta *meta,
			struct nk_actions *act)
{
	struct pegasus_state *s = st;
	memset(act, 0, sizeof(*act));
	if (m->proto != NK_PROTO_PEGASUS) {
		forward(s, meta, act);
		return;
	}
	enum nk_origin from = nk_origin_of(&s->trust, s->node_port, meta);
	int request = m->op == NK_PEGASUS_OP_READ || m->op == NK_PEGASUS_OP_WRITE ||
		      m->op == NK_PEGASUS_OP_DEL;
	if (from == NK_ORIGIN_CLIENT) {
		/* clients send requests only; what they may not set is theirs
		 * to lose, never the directory's or the servers' versions */
		if (!request) {
			s->stats[ST_HOST_SERVER_OP]++;
			act->fwd = NK_FWD_DROP;
			return;
		}
		sanitize_request(s, m);
	} else if (from == NK_ORIGIN_SERVER && request && m->ver &&
		   !(m->flags & NK_PEGASUS_FLAG_BYPASS)) {
		m->ver = 0;     /* VER is the switch's; servers only echo it */
		s->stats[ST_FORGED_VER]++;
	}
	int bypass = (m->flags & NK_PEGASUS_FLAG_BYPASS) != 0;
	switch (m->op) {
	case NK_PEGASUS_OP_READ:
	case NK_PEGASUS_OP_WRITE:
	case NK_PEGASUS_OP_DEL:
		if (bypass) {
			s->stats[ST_BYPASS]++;
			forward_request(s, meta, act);
			return;
		}
		handle_request(s, m, meta, act, from);
		return;
	case NK_PEGASUS_OP_READ_REPLY:
	case NK_PEGASUS_OP_WRITE_REPLY:
	case NK_PEGASUS_OP_RC_ACK:
		if (m->op != NK_PEGASUS_OP_RC_ACK && m->server_id < PEG_N &&
		    s->srv_inflight[m->server_id] > 0)
			s->srv_inflight[m->server_id]--;     /* a request answered */
		if (bypass) {
			s->stats[ST_BYPASS]++;
		} else {
			if (m->server_id < PEG_N)
				s->srv_load[m->server_id] = m->load;
			directory_update(s, m);
		}
		if (m->op == NK_PEGASUS_OP_RC_ACK) {
			act->fwd = NK_FWD_DROP;    /* consumed by the switch */
			return;
		}
		if (meta->dst == NK_NODE_NONE || meta->dst >= s->n_nodes) {
			/* the reply to a controller-issued VWRITE */
			s->stats[ST_TO_CPU]++;
			act->to_cpu = 1;
			act->fwd = NK_FWD_DROP;
			return;
		}
		forward(s, meta, act);
		return;
	case NK_PEGASUS_OP_VWRITE:
		if (from != NK_ORIGIN_TRUSTED) {    /* the controller's alone */
			s->stats[ST_HOST_SERVER_OP]++;
			act->fwd = NK_FWD_DROP;
			return;
		}
		handle_vwrite(s, m, meta, act);
		return;
	case NK_PEGASUS_OP_PUT_FWD:
		/* multi-rack (§9.6): a chain-forwarded write leaving a local
		 * server counts as its WRITE-REPLY; keep VER everywhere */
		if (!bypass) {
			if (ver_follow(s, m->ver)) {
				act->fwd = NK_FWD_DROP;
				return;
			}
			if (from == NK_ORIGIN_SERVER)
				directory_update(s, m);
		}
		forward(s, meta, act);
		return;
	default:        /* RC_REQ and anything else: L2/L3 only */
		forward(s, meta, act);
		return;
	}
}

const struct nk_pipeline_ops nk_pipeline_pegasus = {
	.name = "pegasus",
	.proto = NK_PROTO_PEGASUS,
	.udp_port = NK_PEGASUS_PORT,
	.udp_ports = 1,
	.state_size = sizeof(struct pegasus_state),
	.init = peg_init,
	.fini = peg_fini,
	.process = peg_process,
	.reg_read = peg_reg_read,
	.reg_write = peg_reg_write,
	.table_add = peg_table_add,
	.table_del = peg_table_del,
};
