/*
 * netcache.c - the NetCache switch (SOSP'17), as the Pegasus paper's baseline
 * (docs/netcache.md).
 *
 * Map of this file:
 *   state + named registers  - cache slots (valid bit, value length, value
 *                              bytes, last-write id, hit counters), count-min
 *                              sketch, Bloom filter, statistics
 *   cache                    - exact-match table (16 B key, key length) -> idx
 *   process()                - READ hit: answered by the switch (switch_reply);
 *                              READ miss: count-min + Bloom hot-key detection,
 *                              reported to the controller; WRITE/DELETE of a
 *                              cached key: invalidate, mark REFRESH, forward;
 *                              the server's reply refreshes the slot;
 *                              CACHE_UPDATE: the controller's fetch/insert path
 *
 * Coherence: a slot is valid only between a refresh and the next write. A
 * refresh is accepted only from the reply to the *last* write that went
 * through the switch (client_id, req_id recorded at invalidation), or from
 * the answer to the last fetch, so a late reply of an older write never
 * revalidates a stale value (server<->switch links assumed FIFO, as in
 * NetCache).
 */
#include <stdlib.h>
#include <string.h>

#include "netkv/pipeline.h"
#include "netkv/wire.h"
#include "key128.h"
#include "peg_params.h"

/* NK_NETCACHE_FLAG_REFRESH, NC_CM_ROWS, NC_BF_HASHES, NC_HASH_*, and
 * NC_FETCH_CLIENT (client_id of a controller fetch): netkv/constants.h */
#define NC_MAX_NODES 4096

enum nc_stat {
	NS_HITS = 0,           /* reads answered by the switch */
	NS_MISSES,             /* reads to uncached keys */
	NS_INVALID_READS,      /* reads to cached but invalid keys */
	NS_INVALIDATIONS,      /* writes/deletes to cached keys */
	NS_REFRESHES,          /* slots revalidated by a write reply */
	NS_STALE_REFRESH,      /* refreshes refused (older write / too large) */
	NS_FETCHES,            /* controller fetches forwarded */
	NS_UPDATES,            /* slots filled by a fetch answer */
	NS_HOT_REPORTS,        /* hot uncached keys reported */
	NS_NO_ROUTE,
	NS_HOST_SERVER_OP,     /* a server- or controller-only op from a client port: dropped */
	NS_COUNT
};

#define NC_NREGS 17

struct netcache_state {
	uint32_t cache_items, max_value, hot_threshold, cm_width, bf_bits;
	uint32_t n_servers;
	uint16_t cpu_port;         /* the controller's port: fetch answers go there */
	struct nk_trust trust;     /* which ports are servers' (docs/security.md) */
	uint16_t *node_port;
	struct nk_k128 tab;        /* cache: 16 B key -> idx */
	/* per-slot registers */
	uint8_t *cache_valid;
	uint32_t *cache_vlen;
	uint8_t *cache_value;      /* [cache_items * max_value] bytes */
	uint32_t *cache_wcli;      /* client_id of the last invalidating write */
	uint32_t *cache_wreq;      /* its req_id */
	uint32_t *cache_hits;      /* hits per slot (controller reads and resets) */
	/* hot-key detection */
	uint16_t *cm;              /* [NC_CM_ROWS * cm_width] */
	uint8_t *bf;               /* [bf_bits] one byte per bit (P4: bit<1> register) */
	uint64_t sketch_clear;
	uint64_t stats[NS_COUNT];
	struct nk_reg_desc regs[NC_NREGS];  /* esize 0: cache_value (bytes) */
	unsigned nregs;
};

static void nc_fini(void *st)
{
	struct netcache_state *s = st;
	free(s->node_port);
	free(s->tab.e);
	free(s->cache_valid);
	free(s->cache_vlen);
	free(s->cache_value);
	free(s->cache_wcli);
	free(s->cache_wreq);
	free(s->cache_hits);
	free(s->cm);
	free(s->bf);
	memset(s, 0, sizeof(*s));
}

static void add_reg(struct netcache_state *s, const char *name, void *base, uint32_t n,
		    uint8_t esize, uint8_t bits)
{
	s->regs[s->nregs++] = (struct nk_reg_desc){ name, base, n, esize, bits, 0 };
}

static int nc_init(void *st, const struct nk_pipeline_cfg *cfg)
{
	struct netcache_state *s = st;
	memset(s, 0, sizeof(*s));
	uint64_t items, maxv, thr, cmw, bfb;
	if (nkp_u64(cfg->params, "cache_items", 10000, &items) ||
	    nkp_u64(cfg->params, "max_value_bytes", NK_NETCACHE_MAX_CACHED_VALUE, &maxv) ||
	    nkp_u64(cfg->params, "hot_threshold", 128, &thr) ||
	    nkp_u64(cfg->params, "cm_width", 65536, &cmw) ||
	    nkp_u64(cfg->params, "bf_bits", 262144, &bfb) ||
	    nkp_trust(cfg->params, cfg->n_servers, &s->trust))
		return NK_PIPE_EINVAL;
	if (items < 1 || items > 65536 || maxv < 1 || maxv > NK_NETCACHE_MAX_CACHED_VALUE ||
	    thr < 1 || thr > 0xFFFF || cmw < 16 || cmw > (1u << 24) || bfb < 64 ||
	    bfb > (1u << 26) || cfg->n_nodes > NC_MAX_NODES)
		return NK_PIPE_ERANGE;
	s->cache_items = (uint32_t)items;
	s->max_value = (uint32_t)maxv;
	s->hot_threshold = (uint32_t)thr;
	s->cm_width = (uint32_t)cmw;
	s->bf_bits = (uint32_t)bfb;
	s->n_servers = cfg->n_servers;
	s->cpu_port = cfg->cpu_port;
	uint32_t k = s->cache_items;
	s->node_port = malloc(NC_MAX_NODES * sizeof(uint16_t));
	nk_k128_init(&s->tab, s->cache_items);
	s->cache_valid = calloc(k, 1);
	s->cache_vlen = calloc(k, sizeof(uint32_t));
	s->cache_value = calloc((size_t)k * s->max_value, 1);
	s->cache_wcli = calloc(k, sizeof(uint32_t));
	s->cache_wreq = calloc(k, sizeof(uint32_t));
	s->cache_hits = calloc(k, sizeof(uint32_t));
	s->cm = calloc((size_t)NC_CM_ROWS * s->cm_width, sizeof(uint16_t));
	s->bf = calloc(s->bf_bits, 1);
	if (!s->node_port || !s->tab.e || !s->cache_valid || !s->cache_vlen || !s->cache_value ||
	    !s->cache_wcli || !s->cache_wreq || !s->cache_hits || !s->cm || !s->bf) {
		nc_fini(s);
		return NK_PIPE_EFULL;
	}
	for (uint32_t i = 0; i < NC_MAX_NODES; i++)
		s->node_port[i] = i < cfg->n_nodes && cfg->node_port ? cfg->node_port[i]
								      : NK_NODE_NONE;
	add_reg(s, "cache_valid", s->cache_valid, k, 1, 1);
	add_reg(s, "cache_vlen", s->cache_vlen, k, 4, 8);
	/* the value as 64-bit words, big-endian: cell idx * (max/8) + w */
	add_reg(s, "cache_value", s->cache_value, k * ((s->max_value + 7) / 8), 0, 64);
	add_reg(s, "cache_wcli", s->cache_wcli, k, 4, 16);
	add_reg(s, "cache_wreq", s->cache_wreq, k, 4, 32);
	add_reg(s, "cache_hits", s->cache_hits, k, 4, 32);
	add_reg(s, "cm_sketch", s->cm, NC_CM_ROWS * s->cm_width, 2, 16);
	add_reg(s, "bloom", s->bf, s->bf_bits, 1, 1);
	add_reg(s, "sketch_clear", &s->sketch_clear, 1, 8, 1);
	add_reg(s, "stats", s->stats, NS_COUNT, 8, 64);
	add_reg(s, "n_servers", &s->trust.n_servers, 1, 4, 8);   /* the trust boundary */
	return 0;
}

/* ---- registers ------------------------------------------------------------- */

static const struct nk_reg_desc *reg_find(const struct netcache_state *s, const char *name)
{
	return nk_reg_find(s->regs, s->nregs, name);
}

static int nc_reg_read(void *st, const char *name, uint32_t idx, uint64_t *val)
{
	struct netcache_state *s = st;
	const struct nk_reg_desc *r = reg_find(s, name);
	if (!r)
		return NK_PIPE_ENOENT;
	if (idx >= r->n)
		return NK_PIPE_ERANGE;
	if (r->esize == 0) {     /* cache_value: 8 bytes big-endian, zero past max */
		uint32_t per = (s->max_value + 7) / 8, slot = idx / per, w = idx % per;
		uint64_t v = 0;
		for (uint32_t b = 0; b < 8; b++) {
			uint32_t off = w * 8 + b;
			v = v << 8 | (off < s->max_value ? s->cache_value[(size_t)slot * s->max_value + off] : 0);
		}
		*val = v;
		return 0;
	}
	*val = nk_reg_get(r, idx);
	return 0;
}

static int nc_reg_write(void *st, const char *name, uint32_t idx, uint64_t val)
{
	struct netcache_state *s = st;
	const struct nk_reg_desc *r = reg_find(s, name);
	if (!r)
		return NK_PIPE_ENOENT;
	if (idx >= r->n)
		return NK_PIPE_ERANGE;
	if (r == reg_find(s, "cache_vlen") && val > s->max_value)
		return NK_PIPE_ERANGE;      /* the value size limit */
	if (r->esize == 0) {
		uint32_t per = (s->max_value + 7) / 8, slot = idx / per, w = idx % per;
		for (uint32_t b = 0; b < 8; b++) {
			uint32_t off = w * 8 + b;
			if (off < s->max_value)
				s->cache_value[(size_t)slot * s->max_value + off] =
					(uint8_t)(val >> (56 - 8 * b));
		}
		return 0;
	}
	nk_reg_set(r, idx, val);
	if (!strcmp(name, "sketch_clear") && nk_reg_get(r, idx)) {
		/* control action: clear the count-min sketch and the Bloom filter */
		memset(s->cm, 0, (size_t)NC_CM_ROWS * s->cm_width * sizeof(uint16_t));
		memset(s->bf, 0, s->bf_bits);
		s->sketch_clear = 0;
	}
	return 0;
}

/* ---- cache table: 16 B key -> idx ----------------------------------------- */

static int nc_table_add(void *st, const char *table, const uint64_t *key, unsigned nkey,
			const uint64_t *args, unsigned nargs)
{
	struct netcache_state *s = st;
	if (!strcmp(table, "node_fwd")) {
		if (nkey != 1 || nargs != 1)
			return NK_PIPE_EINVAL;
		if (key[0] >= NC_MAX_NODES || args[0] >= NK_NODE_NONE)
			return NK_PIPE_ERANGE;
		s->node_port[key[0]] = (uint16_t)args[0];
		return 0;
	}
	if (strcmp(table, "cache"))
		return NK_PIPE_ENOENT;
	if (nkey != 3 || nargs != 1)
		return NK_PIPE_EINVAL;
	if (args[0] >= s->cache_items || key[2] > NK_NETCACHE_KEY_LEN)
		return NK_PIPE_ERANGE;
	int fresh, rc = nk_k128_put_len(&s->tab, key[0], key[1], (uint8_t)key[2],
					(uint32_t)args[0], &fresh);
	if (rc)
		return rc;
	if (!fresh) {
		s->cache_valid[args[0]] = 0;
		return 0;
	}
	/* a new entry is invalid until filled (fetch or register writes) */
	s->cache_valid[args[0]] = 0;
	s->cache_wcli[args[0]] = NC_FETCH_CLIENT;
	s->cache_wreq[args[0]] = 0xFFFFFFFFu;
	return 0;
}

static int nc_table_del(void *st, const char *table, const uint64_t *key, unsigned nkey)
{
	struct netcache_state *s = st;
	if (!strcmp(table, "node_fwd")) {
		if (nkey != 1)
			return NK_PIPE_EINVAL;
		if (key[0] >= NC_MAX_NODES)
			return NK_PIPE_ERANGE;
		s->node_port[key[0]] = NK_NODE_NONE;
		return 0;
	}
	if (strcmp(table, "cache"))
		return NK_PIPE_ENOENT;
	if (nkey != 3)
		return NK_PIPE_EINVAL;
	if (key[2] > NK_NETCACHE_KEY_LEN)
		return NK_PIPE_ENOENT;
	uint32_t idx;
	int rc = nk_k128_del_len(&s->tab, key[0], key[1], (uint8_t)key[2], &idx);
	if (!rc)
		s->cache_valid[idx] = 0;
	return rc;
}

/* ---- hot-key detection ----------------------------------------------------- */

static uint32_t row_hash(uint32_t row, uint64_t k0, uint64_t k1)
{
	uint8_t b[20];
	b[0] = (uint8_t)row;
	b[1] = NC_HASH_SEED0;
	b[2] = NC_HASH_SEED1;
	b[3] = (uint8_t)(row * NC_HASH_ROW_MUL);
	for (int i = 0; i < 8; i++) {
		b[4 + i] = (uint8_t)(k0 >> (56 - 8 * i));
		b[12 + i] = (uint8_t)(k1 >> (56 - 8 * i));
	}
	return nk_crc32(b, sizeof b);
}

/* count-min update + estimate; Bloom test-and-set when hot. 1 = report. */
static int hot_detect(struct netcache_state *s, uint64_t k0, uint64_t k1)
{
	uint32_t est = 0xFFFF;
	for (uint32_t r = 0; r < NC_CM_ROWS; r++) {
		uint16_t *c = &s->cm[r * s->cm_width + row_hash(r, k0, k1) % s->cm_width];
		if (*c < 0xFFFF)
			(*c)++;
		if (*c < est)
			est = *c;
	}
	if (est < s->hot_threshold)
		return 0;
	int seen = 1;
	for (uint32_t h = 0; h < NC_BF_HASHES; h++) {
		uint8_t *b = &s->bf[row_hash(NC_CM_ROWS + h, k0, k1) % s->bf_bits];
		if (!*b)
			seen = 0;
		*b = 1;
	}
	return !seen;
}

/* ---- process ----------------------------------------------------------------- */

static void forward(struct netcache_state *s, struct nk_pkt_meta *meta, struct nk_actions *act)
{
	nk_fwd_to_node(s->node_port, NC_MAX_NODES, meta, act);
	if (act->fwd == NK_FWD_DROP)
		s->stats[NS_NO_ROUTE]++;
}

static void store_value(struct netcache_state *s, uint32_t idx, const struct nk_msg *m)
{
	uint8_t *dst = &s->cache_value[(size_t)idx * s->max_value];
	if (m->value)
		memcpy(dst, m->value, m->value_len);
	else
		memset(dst, 0, m->value_len);
	s->cache_vlen[idx] = m->value_len;
	s->cache_valid[idx] = 1;
}

static void nc_process(void *st, struct nk_msg *m, struct nk_pkt_meta *meta,
		       struct nk_actions *act)
{
	struct netcache_state *s = st;
	memset(act, 0, sizeof(*act));
	if (m->proto != NK_PROTO_NETCACHE) {
		forward(s, meta, act);
		return;
	}
	enum nk_origin from = nk_origin_of(&s->trust, s->node_port, meta);
	if (from == NK_ORIGIN_CLIENT && m->op != NK_NETCACHE_OP_READ &&
	    m->op != NK_NETCACHE_OP_WRITE && m->op != NK_NETCACHE_OP_DELETE) {
		/* a forged reply or cache update would put a value no server
		 * stores into the cache, or answer another client */
		s->stats[NS_HOST_SERVER_OP]++;
		act->fwd = NK_FWD_DROP;
		return;
	}
	uint64_t k0, k1;
	nk_k128_words(m, &k0, &k1);
	/* the key length is part of the match: a key and the same bytes
	 * zero-padded (K and K||0) fill the same 16 B, and a write of one
	 * would invalidate, and its reply refresh, the other's slot with a
	 * value the servers store under another key (docs/security.md) */
	const struct nk_k128_ent *ent = nk_k128_find_len(&s->tab, k0, k1, m->key_len);
	int64_t hit = ent ? (int64_t)ent->val : -1;
	uint32_t idx = hit < 0 ? 0 : (uint32_t)hit;
	switch (m->op) {
	case NK_NETCACHE_OP_READ:
		if (hit >= 0 && s->cache_valid[idx]) {
			/* answered by the switch */
			m->op = NK_NETCACHE_OP_READ_REPLY;
			m->kind = NK_KIND_READ_REPLY;
			m->result = NK_RESULT_OK;
			m->flags |= NK_NETCACHE_FLAG_CACHED;
			m->server_id = NK_SERVER_NONE;   /* no server answered: clients count it as the switch's */
			m->value_len = s->cache_vlen[idx];
			m->value = m->value_len ? &s->cache_value[(size_t)idx * s->max_value] : NULL;
			meta->dst = meta->src;
			act->switch_reply = 1;
			if (s->cache_hits[idx] < 0xFFFFFFFFu)
				s->cache_hits[idx]++;
			s->stats[NS_HITS]++;
			forward(s, meta, act);
			return;
		}
		if (hit >= 0) {
			s->stats[NS_INVALID_READS]++;
		} else {
			s->stats[NS_MISSES]++;
			if (hot_detect(s, k0, k1)) {
				act->to_cpu = 1;     /* the copy is the hot report */
				s->stats[NS_HOT_REPORTS]++;
			}
		}
		forward(s, meta, act);
		return;
	case NK_NETCACHE_OP_WRITE:
	case NK_NETCACHE_OP_DELETE:
		m->flags &= (uint8_t)~NK_NETCACHE_FLAG_REFRESH;
		if (hit >= 0) {
			s->cache_valid[idx] = 0;
			s->cache_wcli[idx] = m->client_id;
			s->cache_wreq[idx] = m->req_id;
			if (m->op == NK_NETCACHE_OP_WRITE)
				m->flags |= NK_NETCACHE_FLAG_REFRESH;
			s->stats[NS_INVALIDATIONS]++;
		}
		forward(s, meta, act);
		return;
	case NK_NETCACHE_OP_WRITE_REPLY:
		if (m->flags & NK_NETCACHE_FLAG_REFRESH) {
			if (hit >= 0 && m->result == NK_RESULT_OK &&
			    s->cache_wcli[idx] == m->client_id && s->cache_wreq[idx] == m->req_id &&
			    m->value_len <= s->max_value) {
				store_value(s, idx, m);
				s->stats[NS_REFRESHES]++;
			} else {
				s->stats[NS_STALE_REFRESH]++;
			}
			/* the client gets a plain reply */
			m->flags &= (uint8_t)~NK_NETCACHE_FLAG_REFRESH;
			m->value_len = 0;
			m->value = NULL;
		}
		forward(s, meta, act);
		return;
	case NK_NETCACHE_OP_CACHE_UPDATE:
		if (from == NK_ORIGIN_TRUSTED) {
			/* controller fetch: remember it, ask the server */
			if (hit < 0) {
				act->fwd = NK_FWD_DROP;
				return;
			}
			s->cache_wcli[idx] = NC_FETCH_CLIENT;
			s->cache_wreq[idx] = m->req_id;
			m->client_id = NC_FETCH_CLIENT;
			m->value_len = 0;
			m->value = NULL;
			s->stats[NS_FETCHES]++;
			forward(s, meta, act);
			return;
		}
		/* the server's answer: fill the slot if no write intervened */
		if (hit >= 0 && m->result == NK_RESULT_OK && s->cache_wcli[idx] == NC_FETCH_CLIENT &&
		    s->cache_wreq[idx] == m->req_id && m->value_len <= s->max_value) {
			store_value(s, idx, m);
			s->stats[NS_UPDATES]++;
			m->result = NK_RESULT_OK;
		} else {
			s->stats[NS_STALE_REFRESH]++;
			m->result = NK_RESULT_RETRY;
		}
		/* acknowledged to the controller */
		m->op = NK_NETCACHE_OP_CACHE_UPDATE_ACK;
		m->kind = NK_KIND_CONTROL;
		m->value_len = 0;
		m->value = NULL;
		/* the ACK itself goes to the controller (not a copy of the
		 * answer as received): the simulator, netkv-switch and the P4
		 * program all hand it op 7 */
		act->fwd = NK_FWD_PORT;
		act->port = s->cpu_port;
		return;
	default:
		forward(s, meta, act);
		return;
	}
}

const struct nk_pipeline_ops nk_pipeline_netcache = {
	.name = "netcache",
	.proto = NK_PROTO_NETCACHE,
	.udp_port = NK_NETCACHE_PORT,
	.udp_ports = 1,
	.state_size = sizeof(struct netcache_state),
	.init = nc_init,
	.fini = nc_fini,
	.process = nc_process,
	.reg_read = nc_reg_read,
	.reg_write = nc_reg_write,
	.table_add = nc_table_add,
	.table_del = nc_table_del,
};
