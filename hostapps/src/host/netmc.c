/*
 * netmc.c - NetMC's hosts (netmc.md §4-§6), shared by its baselines: one
 * client, one server, differing only in how a multiget leaves the client
 * (params `scheme`):
 *
 *   netmc  the client hashes and sorts the keys by server, writes the hints
 *          (KEYIDX: bit i, from the MSB, = key i ends its group; SRV[j] =
 *          the j-th group's server) and sends ONE packet per W keys; the
 *          switch splits it (pipeline/netmc.c).
 *   climc  the client sends one sub-request per server group (at most W
 *          keys each), one after another, each addressed to that server.
 *
 * Both aggregate on the client: a table indexed by request id (2^17 slots)
 * holding the keys still missing as a bitmap; a sub-reply marks [STARTIDX,
 * STARTIDX + NUMKEY) of its packet, so duplicates and split replies count
 * once, and the request is done (all or nothing) when every key is in.
 * Single-key GET and PUT (the workload's writes) go straight to the key's
 * server.
 *
 * Wire ID (our choice, docs/netmc.md): request id << MC_ID_SHIFT | index,
 * in the client's sorted key list, of the packet's first key. An
 * application multiget of up to 64 keys is one request; its packets (W-key
 * chunks, or CliMC's sub-requests) are told apart by that index, and a
 * reply's keys are index + STARTIDX + i.
 *
 * Server: GET and PUT on the store; MGET reads NUMKEY keys from STARTIDX of
 * the packet's key list and answers MGET_REPLY with those pairs, split at
 * the MTU (each packet its own STARTIDX and NUMKEY). The pairs carry the
 * store's value bytes when it has them (nk_store_ops.value: kvserver), and
 * lengths only otherwise (items NULL: the simulator, whose codec writes a
 * lengths-only pair list).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../pipeline/peg_params.h"
#include "netkv/host.h"
#include "netkv/wire.h"

#include "host_lazy.h"

#define MC_AGG_SLOTS (1u << 17)
#define MC_ID_MASK (UINT32_MAX >> MC_ID_SHIFT)
#define MC_UDP_IP_HDRS 28

enum mc_scheme { MC_NETMC = 0, MC_CLIMC = 1, MC_COORDIMC = 2 };

#define MC_COORD_SLOTS (1u << 14)
/* reply pair bytes built per request (a server's MGET, the coordinator's
 * answer): 32 keys of 64 B with 1 KiB values take 35 KiB */
#define MC_PAIRBUF (256u << 10)
/* the coordinator's ring of sub-reply pair bytes, kept until the answer */
#define MC_ARENA (8u << 20)

/* pair bytes of the reply packets being built, one contiguous run per packet */
struct mc_pairs {
	uint8_t *buf;
	uint32_t used;
};

struct mc_server {
	uint32_t id;
	uint32_t pair_budget;   /* item bytes per reply packet */
	struct mc_pairs pairs;
};

struct mc_agg {
	uint64_t need, got;     /* key bitmaps of the request's sorted list */
	uint32_t id;            /* request id & MC_ID_MASK */
	uint8_t live;
	uint8_t total;
};

struct mc_client {
	uint32_t n_servers;
	uint32_t w;
	uint32_t scheme;
	uint16_t coord;         /* CoordiMC: the coordinator's node */
	struct mc_agg *agg;
	/* a hostile client's key list or forged pair list (client_hostile):
	 * its messages point here, valid as long as the client */
	uint8_t hbuf[NK_NETMC_MAX_KEYS * NK_MAX_KEY_LEN];
};

/* a request the coordinator is serving for a client */
struct mc_pending {
	uint64_t need, got;
	uint32_t id;            /* coordinator id & MC_ID_MASK */
	uint32_t client_req;    /* the client's wire ID */
	uint16_t client;        /* its node */
	uint8_t live, total, op, keylen;
	uint8_t bytes;          /* the sub-replies carried value bytes (in the arena) */
	uint16_t vlen[NK_NETMC_MAX_KEYS];
	uint32_t off[NK_NETMC_MAX_KEYS];  /* pair i in the arena: base + off[i] */
	uint64_t base;          /* the arena position when the request came in */
	uint64_t send_ns;
	uint32_t keyhash;
};

struct mc_coord {
	uint32_t n_servers;
	uint32_t w;
	uint32_t next_id;
	uint32_t pair_budget;
	struct mc_pending *pend;
	uint8_t *arena;         /* MC_ARENA bytes, written at apos % MC_ARENA */
	uint64_t apos;
	struct mc_pairs pairs;
};

static int mc_scheme_of(const char *params, uint32_t *out)
{
	char buf[16];
	*out = MC_NETMC;
	if (!nkp_get(params, "scheme", buf, sizeof buf) || !strcmp(buf, "netmc"))
		return 0;
	if (!strcmp(buf, "climc")) {
		*out = MC_CLIMC;
		return 0;
	}
	if (!strcmp(buf, "coordimc")) {
		*out = MC_COORDIMC;
		return 0;
	}
	return -1;
}

/* ---- server ---------------------------------------------------------------- */

static int mc_server_init(void *st, const struct nk_host_cfg *cfg)
{
	struct mc_server *s = st;
	uint64_t mtu;
	if (nkp_u64(cfg->params, "mtu", MC_MTU, &mtu) ||
	    mtu < MC_UDP_IP_HDRS + NK_NETMC_HDR_LEN + NK_NETMC_PAYLOAD_HDR_LEN + 2 + 64 ||
	    mtu > 65535)
		return -1;
	s->id = cfg->id;
	s->pair_budget = (uint32_t)mtu - MC_UDP_IP_HDRS - NK_NETMC_HDR_LEN -
			 NK_NETMC_PAYLOAD_HDR_LEN;
	s->pairs.buf = NULL;   /* at the first MGET whose pairs carry bytes (mc_server_mget) */
	return 0;
}

static void mc_server_fini(void *st)
{
	struct mc_server *s = st;
	free(s->pairs.buf);
	s->pairs.buf = NULL;
}

const void *nk_netmc_server_pairs_buf(const void *server)
{
	return ((const struct mc_server *)server)->pairs.buf;
}

/* Append one pair (key, vlen, value; value NULL = zeros) to reply r, whose
 * pairs are the last run of pb: the packet's items point at its run. 0, or
 * -1 when the buffer is full. */
static int mc_pair_bytes(struct mc_pairs *pb, struct nk_msg *r, const uint8_t *key,
			 unsigned keylen, const uint8_t *value, uint32_t vlen)
{
	uint32_t pair = keylen + 2 + vlen;
	if (pb->used + pair > MC_PAIRBUF)
		return -1;
	uint8_t *p = pb->buf + pb->used;
	if (r->key_slots == 1)
		r->items = p;  /* the packet's first pair opens its run */
	memcpy(p, key, keylen);
	p[keylen] = (uint8_t)(vlen >> 8);
	p[keylen + 1] = (uint8_t)vlen;
	if (value)
		memcpy(p + keylen + 2, value, vlen);
	else
		memset(p + keylen + 2, 0, vlen);
	pb->used += pair;
	return 0;
}

static void mc_reply_header(struct nk_msg *r, const struct nk_msg *in, uint8_t op, uint8_t kind,
			    uint32_t server)
{
	memset(r, 0, sizeof(*r));
	r->proto = NK_PROTO_NETMC;
	r->op = op;
	r->kind = kind;
	r->req_id = in->req_id;
	r->client_id = in->client_id;
	r->server_id = (uint8_t)server;
	r->keyhash = in->keyhash;
	r->send_ns = in->send_ns;
	r->key_slot_len = in->key_slot_len;
	r->key_slots = 1;
	r->frag_cnt = 1;
}

/* Add one pair (pair bytes, vlen of them value) for key `idx` to the
 * MGET_REPLY being built in out[*k - 1], or open a new one from `tmpl` (to
 * `dst`) when it would pass the budget or NSLOTS: replies split at the MTU,
 * each with its own STARTIDX and NUMKEY (digest §9.7). NULL when out is full. */
static struct nk_msg *mc_pair_add(struct nk_host_out *out, int *k, int max_out,
				  const struct nk_msg *tmpl, uint16_t dst, unsigned idx,
				  uint32_t pair, uint32_t vlen, uint32_t budget)
{
	struct nk_msg *r = *k ? &out[*k - 1].msg : NULL;
	if (!r || (r->items_len + pair > budget && r->key_slots) ||
	    r->key_slots == NK_NETMC_MAX_KEYS) {
		if (*k == max_out)
			return NULL;  /* no room: the client times the request out */
		r = &out[*k].msg;
		out[(*k)++].dst = dst;
		*r = *tmpl;
		r->startidx = (uint8_t)idx;
		r->key_slots = 0;
		r->items_len = 0;
		r->value_len = 0;
	}
	r->key_slots++;
	r->nkeys = r->key_slots;
	r->items_len = (uint16_t)(r->items_len + pair);
	r->value_len += vlen;
	return r;
}

/* MGET: the pairs of keys [STARTIDX, STARTIDX + NUMKEY), as few packets as
 * the MTU allows */
static int mc_server_mget(struct mc_server *s, struct nk_store *store, const struct nk_msg *in,
			  struct nk_host_out *out, int max_out)
{
	unsigned keylen = in->key_slot_len, first = in->startidx, n = in->nkeys;
	if (!in->items || !keylen || !n || first + n > in->key_slots ||
	    in->items_len < (size_t)in->key_slots * keylen)
		return 0;
	struct nk_msg probe;
	memset(&probe, 0, sizeof(probe));
	probe.proto = NK_PROTO_NETMC;
	probe.key_len = (uint8_t)keylen;
	struct nk_msg tmpl;
	mc_reply_header(&tmpl, in, NK_NETMC_OP_MGET_REPLY, NK_KIND_MULTIGET_REPLY, s->id);
	tmpl.oid = in->oid;
	int k = 0, bytes = store->ops->value != NULL;
	/* 256 KiB only where bytes move (kvserver; the simulator's store has
	 * none): allocated at every init it cost each set-up, most of a
	 * fuzzer's execution under ASan */
	if (bytes && !s->pairs.buf && !(s->pairs.buf = malloc(MC_PAIRBUF)))
		return 0;      /* the client times the request out */
	s->pairs.used = 0;
	for (unsigned i = first; i < first + n; i++) {
		memcpy(probe.key, in->items + (size_t)i * keylen, keylen);
		probe.keyhash = nk_wire_store_keyhash(&probe);
		uint64_t ver = 0;
		uint32_t vlen = 0;
		int found = store->ops->get(store->impl, &probe, &ver, &vlen) == 0;
		if (!found || vlen > UINT16_MAX - 2 - keylen)
			vlen = 0;
		const uint8_t *value = NULL;
		if (bytes && vlen) {
			uint32_t have = 0;
			value = store->ops->value(store->impl, &probe, &have);
			if (have != vlen)
				value = NULL;  /* zeros rather than a short read */
		}
		if (bytes && s->pairs.used + keylen + 2 + vlen > MC_PAIRBUF)
			break;  /* the client times the request out */
		struct nk_msg *r = mc_pair_add(out, &k, max_out, &tmpl, NK_DST_SRC, i,
					       keylen + 2 + vlen, vlen, s->pair_budget);
		if (!r)
			break;
		if (!found)
			r->result = NK_RESULT_NOT_FOUND;
		if (bytes)
			(void)mc_pair_bytes(&s->pairs, r, probe.key, keylen, value, vlen);
	}
	return k;
}

static int mc_server_handle(void *st, struct nk_store *store, const struct nk_msg *in,
			    uint16_t src, struct nk_host_out *out, int max_out)
{
	struct mc_server *s = st;
	(void)src;
	if (max_out < 1 || in->proto != NK_PROTO_NETMC)
		return 0;
	if (in->op == NK_NETMC_OP_MGET)
		return mc_server_mget(s, store, in, out, max_out);
	/* the wire carries no keyhash (a decoded GET/PUT has 0): the store's,
	 * as for a multiget's keys (the workload's: the whole key is on the wire) */
	struct nk_msg req = *in;
	req.keyhash = nk_wire_store_keyhash(in);
	in = &req;
	uint64_t ver = 0;
	uint32_t vlen = 0;
	int found = store->ops->get(store->impl, in, &ver, &vlen) == 0;
	struct nk_msg *r = &out[0].msg;
	out[0].dst = NK_DST_SRC;
	switch (in->op) {
	case NK_NETMC_OP_GET:
		mc_reply_header(r, in, NK_NETMC_OP_GET_REPLY, NK_KIND_READ_REPLY, s->id);
		r->result = found ? NK_RESULT_OK : NK_RESULT_NOT_FOUND;
		r->value_len = found && vlen <= UINT16_MAX ? vlen : 0;
		r->ver = found ? ver : 0;
		break;
	case NK_NETMC_OP_PUT:
		ver = nk_ver_after(found, ver);
		store->ops->put(store->impl, in, ver, in->value_len);
		mc_reply_header(r, in, NK_NETMC_OP_PUT_REPLY, NK_KIND_WRITE_REPLY, s->id);
		r->ver = ver;
		break;
	default:
		return 0;
	}
	r->key_len = in->key_len;
	memcpy(r->key, in->key, in->key_len);
	return 1;
}

/* ---- client ---------------------------------------------------------------- */

static int mc_client_init(void *st, const struct nk_host_cfg *cfg)
{
	struct mc_client *c = st;
	uint64_t w;
	if (mc_scheme_of(cfg->params, &c->scheme) || nkp_u64(cfg->params, "w", MC_KEYIDX_W, &w) ||
	    (w != 16 && w != 32) || cfg->n_servers > NK_NETMC_N)
		return -1;
	if (c->scheme == MC_COORDIMC && !cfg->n_coords)
		return -1;
	c->w = (uint32_t)w;
	c->n_servers = cfg->n_servers;
	c->coord = (uint16_t)(cfg->n_servers + cfg->n_clients);
	c->agg = NULL;   /* at the first multiget (mc_client_multiget) */
	return 0;
}

static void mc_client_fini(void *st)
{
	struct mc_client *c = st;
	free(c->agg);
	c->agg = NULL;
}

const void *nk_netmc_client_agg(const void *client)
{
	return ((const struct mc_client *)client)->agg;
}

static uint16_t mc_client_request(void *st, const struct nk_req_spec *sp, struct nk_msg *m)
{
	const struct mc_client *c = st;
	int w = sp->kind == NK_KIND_WRITE;
	nk_msg_zero(m);
	m->proto = NK_PROTO_NETMC;
	m->op = w ? NK_NETMC_OP_PUT : NK_NETMC_OP_GET;
	m->kind = w ? NK_KIND_WRITE : NK_KIND_READ;
	m->req_id = sp->req_id;
	m->client_id = sp->client_id;
	m->server_id = (uint8_t)(sp->home < NK_SERVER_NONE ? sp->home : NK_SERVER_NONE);
	m->keyhash = sp->keyhash;
	m->send_ns = sp->send_ns;
	m->key_len = sp->key_len;
	m->key_slot_len = sp->key_len;
	m->key_slots = 1;
	memcpy(m->key, sp->key, sp->key_len);
	m->value_len = w ? sp->value_len : 0;
	m->frag_cnt = 1;
	m->nkeys = 1;
	/* SRV[0]: the key's server, a hint as the multigets' (our choice; the
	 * wire has no server id), read by CoordiMC's coordinator */
	m->srv[0] = (uint8_t)m->server_id;
	return c->scheme == MC_COORDIMC ? c->coord : sp->home;  /* writes go through it too */
}

/* One MGET over the n key slots (kl bytes each) at items, whose servers
 * are srv_of[0..n), sorted: KEYIDX (W bits) marks each group's last key,
 * SRV lists the groups' servers. Addressed to the first group's server. */
static void mc_mget(struct nk_host_out *o, uint32_t req_id, const uint8_t *items, unsigned kl,
		    const uint8_t *srv_of, unsigned n, unsigned w, uint64_t send_ns)
{
	struct nk_msg *m = &o->msg;
	nk_msg_zero(m);
	m->proto = NK_PROTO_NETMC;
	m->op = NK_NETMC_OP_MGET;
	m->kind = NK_KIND_MULTIGET;
	m->req_id = req_id;
	m->server_id = srv_of[0];
	m->send_ns = send_ns;
	m->nkeys = (uint8_t)n;
	m->key_slot_len = (uint8_t)kl;
	m->key_slots = (uint8_t)n;
	m->items = items;
	m->items_len = (uint16_t)(n * kl);
	m->keyhash = nk_djb2(items, kl);
	m->frag_cnt = 1;
	unsigned g = 0;
	for (unsigned i = 0; i < n; i++) {
		if (i + 1 == n || srv_of[i + 1] != srv_of[i]) {
			m->keyidx |= 1u << (w - 1 - i);
			m->srv[g++] = srv_of[i];
		}
	}
	o->dst = srv_of[0];
}

static int mc_client_multiget(void *st, const struct nk_req_spec *sp, struct nk_host_out *out,
			      int max_out)
{
	struct mc_client *c = st;
	unsigned m = sp->nkeys, kl = sp->key_len;
	if (m < 1 || m > NK_MAX_REQ_KEYS || m > 64 || !sp->keys || !sp->buf || !kl ||
	    sp->buf_len < m * kl)
		return 0;
	/* group the keys by server, ascending (a stable counting sort) */
	unsigned count[NK_NETMC_N + 1] = {0};
	for (unsigned j = 0; j < m; j++) {
		if (sp->keys[j].home >= c->n_servers)
			return 0;
		count[sp->keys[j].home + 1]++;
	}
	for (unsigned s = 1; s <= c->n_servers; s++)
		count[s] += count[s - 1];
	uint8_t srv_of[NK_MAX_REQ_KEYS];
	for (unsigned j = 0; j < m; j++) {
		unsigned pos = count[sp->keys[j].home]++;
		srv_of[pos] = (uint8_t)sp->keys[j].home;
		memcpy(sp->buf + (size_t)pos * kl, sp->keys[j].key, kl);
	}
	/* 3 MiB only for a client that multigets: allocated at every init it
	 * cost each set-up, most of a fuzzer's execution under ASan */
	if (!c->agg && !(c->agg = calloc(MC_AGG_SLOTS, sizeof(*c->agg))))
		return 0;
	struct mc_agg *a = &c->agg[sp->req_id & (MC_AGG_SLOTS - 1)];
	if (!a->live || a->id != (sp->req_id & MC_ID_MASK)) {  /* not a resend */
		a->id = sp->req_id & MC_ID_MASK;
		a->live = 1;
		a->total = (uint8_t)m;
		a->need = m == 64 ? UINT64_MAX : (1ull << m) - 1;
		a->got = 0;
	}
	int k = 0;
	for (unsigned first = 0; first < m && k < max_out;) {
		unsigned n = m - first < c->w ? m - first : c->w;
		if (c->scheme == MC_CLIMC) {  /* one server's keys per packet */
			unsigned end = first + 1;
			while (end < m && end - first < n && srv_of[end] == srv_of[first])
				end++;
			n = end - first;
		}
		mc_mget(&out[k], (sp->req_id & MC_ID_MASK) << MC_ID_SHIFT | first,
			sp->buf + (size_t)first * kl, kl, srv_of + first, n, c->w, sp->send_ns);
		out[k].msg.client_id = sp->client_id;
		if (c->scheme == MC_COORDIMC)
			out[k].dst = c->coord;
		k++;
		first += n;
	}
	return k;
}

/* the request a reply answers: the wire ID without its packet index */
static uint32_t mc_reply_req_id(const struct nk_msg *r)
{
	return r->kind == NK_KIND_MULTIGET_REPLY ? r->req_id >> MC_ID_SHIFT : r->req_id;
}

static int mc_client_reply(void *st, const struct nk_msg *r)
{
	struct mc_client *c = st;
	if (r->proto != NK_PROTO_NETMC)
		return NK_REPLY_IGNORE;
	if (r->kind == NK_KIND_READ_REPLY || r->kind == NK_KIND_WRITE_REPLY)
		return NK_REPLY_DONE;
	if (r->kind != NK_KIND_MULTIGET_REPLY)
		return NK_REPLY_IGNORE;
	uint32_t id = r->req_id >> MC_ID_SHIFT;
	unsigned lo = (r->req_id & ((1u << MC_ID_SHIFT) - 1)) + r->startidx, n = r->nkeys;
	if (!c->agg)
		return NK_REPLY_IGNORE;  /* no multiget sent */
	struct mc_agg *a = &c->agg[id & (MC_AGG_SLOTS - 1)];
	if (!a->live || a->id != id || !n || lo + n > a->total)
		return NK_REPLY_IGNORE;  /* stale, or not this request's keys */
	a->got |= (n == 64 ? UINT64_MAX : (1ull << n) - 1) << lo;
	if (a->got != a->need)
		return NK_REPLY_IGNORE;
	a->live = 0;
	return NK_REPLY_DONE;
}

/* ---- a hostile client ------------------------------------------------------ *
 * One message of a hostile client (host.h client_hostile, docs/security.md),
 * built from sp (a workload key of the hostile client), one kind per draw:
 *
 *   0  MGET with a forged OID          the switch's: dropped, FORGED
 *   1  MGET with a forged STARTIDX     (NUMKEY shortened to fit the list)
 *   2  MGET with CLO = 1               a "continuation" from a client
 *   3  MGET whose KEYIDX has a group past the key list, or is 0: MALFORMED
 *   4  MGET whose SRV names a server the rack lacks: NO_ROUTE
 *   5  MGET with NUMKEY past the key list (the switch overwrites NUMKEY;
 *      the codec and the server refuse it: only the simulator moves it)
 *   6  a spoofed MGET_REPLY to an honest client, its recent wire ID, a pair
 *      of a forged value: HOST_SERVER_OP
 *   7  a spoofed GET_REPLY or PUT_REPLY to an honest client, or an
 *      MGET_REPLY to the coordinator (CoordiMC) or a server: HOST_SERVER_OP
 *   8  a replay: a PUT under an honest client's recent request id
 *   9  oversized: a PUT of 8000 B, or an MGET of 32 slots of 64 B (past a
 *      datagram: kvclient sends it truncated, the decoders refuse it)
 *
 * MGETs go where the scheme sends them (the first group's server, CoordiMC's
 * coordinator); their keys are the hostile client's key repeated. */
#define MC_HOSTILE_VALUE 8000

/* an MGET of n copies of sp's key (one group, sp's home), as the scheme
 * sends it */
static uint16_t mc_hostile_mget(struct mc_client *c, const struct nk_req_spec *sp, unsigned n,
				unsigned kl, struct nk_msg *m)
{
	if (kl > NK_MAX_KEY_LEN)
		kl = NK_MAX_KEY_LEN;
	for (unsigned i = 0; i < n; i++) {
		memset(c->hbuf + (size_t)i * kl, 0, kl);
		memcpy(c->hbuf + (size_t)i * kl, sp->key, sp->key_len < kl ? sp->key_len : kl);
	}
	uint8_t srv_of[NK_NETMC_MAX_KEYS];
	memset(srv_of, (uint8_t)(sp->home < c->n_servers ? sp->home : 0), sizeof srv_of);
	struct nk_host_out o;
	/* the hints cover at most W keys; an oversized list has more slots */
	mc_mget(&o, (sp->req_id & MC_ID_MASK) << MC_ID_SHIFT, c->hbuf, kl, srv_of,
		n < c->w ? n : c->w, c->w, sp->send_ns);
	*m = o.msg;
	m->client_id = sp->client_id;
	m->key_slots = (uint8_t)n;
	m->items_len = (uint16_t)(n * kl);
	return c->scheme == MC_COORDIMC ? c->coord : o.dst;
}

static uint16_t mc_client_hostile(void *st, uint64_t draw, const struct nk_req_spec *sp,
				  uint16_t victim, uint32_t n_servers, struct nk_msg *m)
{
	struct mc_client *c = st;
	unsigned kl = sp->key_len ? sp->key_len : 1, n = 2 + (unsigned)(draw >> 8) % 6;
	uint64_t sub = draw >> 16;
	uint32_t victim_id = (sp->req_id & MC_ID_MASK) << MC_ID_SHIFT;
	uint16_t to_victim = (uint16_t)(n_servers + victim), dst;
	switch (draw % 10) {
	case 0:
		dst = mc_hostile_mget(c, sp, n, kl, m);
		m->oid = (uint8_t)(1 + sub % (NK_NETMC_N - 1));
		return dst;
	case 1:
		dst = mc_hostile_mget(c, sp, n, kl, m);
		m->startidx = (uint8_t)(1 + sub % (n - 1));
		m->nkeys = (uint8_t)(n - m->startidx);
		return dst;
	case 2:
		dst = mc_hostile_mget(c, sp, n, kl, m);
		m->clo = 1;
		return dst;
	case 3:
		dst = mc_hostile_mget(c, sp, n, kl, m);
		/* the first group ends past the list (n + 1 keys), or no group */
		m->keyidx = sub & 1 ? 0 : 1u << (c->w - 1 - n);
		return dst;
	case 4:
		dst = mc_hostile_mget(c, sp, n, kl, m);
		m->srv[0] = (uint8_t)(n_servers < NK_NETMC_N
					      ? n_servers + sub % (NK_NETMC_N - n_servers)
					      : NK_NETMC_N - 1);
		return dst;
	case 5:
		dst = mc_hostile_mget(c, sp, n, kl, m);
		m->nkeys = (uint8_t)(n + 1 + sub % 200);
		return dst;
	case 6:
	case 7: {
		int mget = draw % 10 == 6 || sub % 3 == 2;
		if (!mget) {  /* a GET_REPLY or PUT_REPLY for the victim's request */
			struct nk_req_spec w = *sp;
			w.kind = sub & 1 ? NK_KIND_WRITE : NK_KIND_READ;
			(void)mc_client_request(c, &w, m);
			m->op = sub & 1 ? NK_NETMC_OP_PUT_REPLY : NK_NETMC_OP_GET_REPLY;
			m->value_len = sub & 1 ? 0 : 8;
			m->server_id = (uint8_t)sp->home;
			m->ver = UINT64_MAX;
			m->kind = (uint8_t)nk_wire_kind(NK_PROTO_NETMC, m->op);
			return to_victim;
		}
		/* one pair: the hostile client's key with a forged 8 B value */
		memset(c->hbuf, 0, kl + 2 + 8);
		memcpy(c->hbuf, sp->key, sp->key_len < kl ? sp->key_len : kl);
		c->hbuf[kl + 1] = 8;
		memset(c->hbuf + kl + 2, 0xEE, 8);
		memset(m, 0, sizeof(*m));
		m->proto = NK_PROTO_NETMC;
		m->op = NK_NETMC_OP_MGET_REPLY;
		m->kind = NK_KIND_MULTIGET_REPLY;
		m->req_id = victim_id;
		m->server_id = (uint8_t)sp->home;
		m->send_ns = sp->send_ns;
		m->nkeys = m->key_slots = 1;
		m->key_slot_len = (uint8_t)kl;
		m->items = c->hbuf;
		m->items_len = (uint16_t)(kl + 2 + 8);
		m->value_len = 8;
		m->frag_cnt = 1;
		if (draw % 10 == 6)
			return to_victim;
		/* into the coordinator's aggregation (its own ids are small), or
		 * a server */
		m->req_id = (uint32_t)(sub % 64) << MC_ID_SHIFT;
		return c->scheme == MC_COORDIMC ? c->coord : (uint16_t)sp->home;
	}
	case 8: {
		struct nk_req_spec w = *sp;
		w.kind = NK_KIND_WRITE;
		dst = mc_client_request(c, &w, m);
		m->req_id = sp->req_id;  /* an honest client's recent id */
		m->client_id = victim;
		return dst;
	}
	default:
		if (sub & 1) {
			struct nk_req_spec w = *sp;
			w.kind = NK_KIND_WRITE;
			dst = mc_client_request(c, &w, m);
			m->value_len = MC_HOSTILE_VALUE;
			return dst;
		}
		return mc_hostile_mget(c, sp, NK_NETMC_MAX_KEYS, NK_MAX_KEY_LEN, m);
	}
}

/* ---- the CoordiMC coordinator ---------------------------------------------- *
 * A client's MGET (with the client's hints: the simulated coordinator reads
 * the groups from KEYIDX and SRV instead of hashing, as the host logic has no
 * placement ring; its CPU is charged per key all the same) becomes one
 * sub-request per group under the coordinator's own id; the sub-replies are
 * aggregated with the same bitmap and answered to the client as its own
 * MGET_REPLY, split at the MTU. A PUT is forwarded to its server (the
 * client's hint in SRV[0]) and the reply back. Sub-replies with pair bytes (real hosts)
 * are kept in a ring arena until the answer, which carries them; the
 * simulator's lengths-only sub-replies spread their value bytes evenly over
 * their pairs. */

static void mc_coord_fini(void *st)
{
	struct mc_coord *c = st;
	free(c->pend);
	free(c->arena);
	free(c->pairs.buf);
	c->pend = NULL;
	c->arena = NULL;
	c->pairs.buf = NULL;
}

static int mc_coord_init(void *st, const struct nk_host_cfg *cfg)
{
	struct mc_coord *c = st;
	struct mc_server tmp;
	memset(c, 0, sizeof(*c));   /* pointers NULL: a fini after any failed init is safe */
	if (mc_server_init(&tmp, cfg))
		return -1;
	uint64_t w;
	if (nkp_u64(cfg->params, "w", MC_KEYIDX_W, &w) || (w != 16 && w != 32))
		return -1;
	c->pair_budget = tmp.pair_budget;
	c->pairs = tmp.pairs;
	c->pairs.buf = malloc(MC_PAIRBUF);   /* a server's comes at its first MGET */
	c->n_servers = cfg->n_servers;
	c->w = (uint32_t)w;
	c->pend = calloc(MC_COORD_SLOTS, sizeof(*c->pend));
	c->arena = malloc(MC_ARENA);
	if (c->pend && c->arena && c->pairs.buf)
		return 0;
	mc_coord_fini(c);   /* a failed init leaves nothing allocated, whatever the caller does */
	return -1;
}

/* Keep a sub-reply's pairs (keys lo..lo+n-1) in the arena; 0, or -1 if the
 * pair list is malformed. A pair never straddles the arena's end. */
static int mc_coord_keep(struct mc_coord *c, struct mc_pending *p, const struct nk_msg *in,
			 unsigned lo, unsigned n)
{
	size_t off = 0;
	const uint8_t *key, *value;
	uint16_t vlen;
	for (unsigned i = 0; i < n; i++) {
		if (nk_wire_netmc_next_pair(in, &off, &key, &value, &vlen) != 1)
			return -1;
		uint32_t len = (uint32_t)p->keylen + 2 + vlen;
		if (c->apos % MC_ARENA + len > MC_ARENA)
			c->apos += MC_ARENA - c->apos % MC_ARENA;
		memcpy(c->arena + c->apos % MC_ARENA, key, (size_t)p->keylen + 2 + vlen);
		p->off[lo + i] = (uint32_t)(c->apos - p->base);
		p->vlen[lo + i] = vlen;
		c->apos += len;
	}
	p->bytes = 1;
	return 0;
}

static struct mc_pending *mc_coord_open(struct mc_coord *c, const struct nk_msg *in, uint16_t src)
{
	uint32_t id = c->next_id++ & MC_ID_MASK;
	struct mc_pending *p = &c->pend[id & (MC_COORD_SLOTS - 1)];
	memset(p, 0, offsetof(struct mc_pending, vlen));
	p->id = id;
	p->live = 1;
	p->client = src;
	p->client_req = in->req_id;
	p->op = in->op;
	p->keylen = in->key_slot_len;
	p->send_ns = in->send_ns;
	p->keyhash = in->keyhash;
	p->base = c->apos;
	return p;
}

/* the aggregated pairs back to the client, split at the MTU */
static int mc_coord_answer(struct mc_coord *c, struct mc_pending *p, struct nk_host_out *out,
			   int max_out)
{
	struct nk_msg tmpl;
	memset(&tmpl, 0, sizeof(tmpl));
	tmpl.proto = NK_PROTO_NETMC;
	tmpl.op = NK_NETMC_OP_MGET_REPLY;
	tmpl.kind = NK_KIND_MULTIGET_REPLY;
	tmpl.req_id = p->client_req;
	tmpl.keyhash = p->keyhash;
	tmpl.send_ns = p->send_ns;
	tmpl.key_slot_len = p->keylen;
	tmpl.frag_cnt = 1;
	int k = 0;
	p->live = 0;
	if (p->bytes && c->apos - p->base > MC_ARENA)
		return 0;  /* the ring overwrote its pairs: the client times it out */
	c->pairs.used = 0;
	for (unsigned i = 0; i < p->total; i++) {
		uint32_t len = (uint32_t)p->keylen + 2 + p->vlen[i];
		if (p->bytes && c->pairs.used + len > MC_PAIRBUF)
			break;
		struct nk_msg *r = mc_pair_add(out, &k, max_out, &tmpl, p->client, i, len,
					       p->vlen[i], c->pair_budget);
		if (!r)
			break;
		if (p->bytes) {
			const uint8_t *pair = c->arena + (p->base + p->off[i]) % MC_ARENA;
			(void)mc_pair_bytes(&c->pairs, r, pair, p->keylen, pair + p->keylen + 2,
					    p->vlen[i]);
		}
	}
	return k;
}

static int mc_coord_handle(void *st, const struct nk_msg *in, uint16_t src,
			   struct nk_host_out *out, int max_out)
{
	struct mc_coord *c = st;
	if (in->proto != NK_PROTO_NETMC || max_out < 1)
		return 0;
	if (in->op == NK_NETMC_OP_MGET) {
		unsigned n = in->key_slots, kl = in->key_slot_len;
		if (!in->items || !kl || !n || n > c->w ||
		    in->items_len < (size_t)n * kl)
			return 0;
		uint8_t srv_of[NK_NETMC_MAX_KEYS];
		unsigned g = 0;
		for (unsigned i = 0; i < n; i++) {  /* the groups the hints give */
			srv_of[i] = in->srv[g < NK_NETMC_N ? g : NK_NETMC_N - 1];
			/* hints naming no server: refused before a pending slot is
			 * taken, so a hostile request cannot hold (and a burst of
			 * them cannot recycle) an honest request's slot */
			if (srv_of[i] >= c->n_servers)
				return 0;
			if (in->keyidx & (1u << (c->w - 1 - i)))
				g++;
		}
		struct mc_pending *p = mc_coord_open(c, in, src);
		p->total = (uint8_t)n;
		p->need = (1ull << n) - 1;
		int k = 0;
		for (unsigned first = 0; first < n && k < max_out;) {
			unsigned end = first + 1;
			while (end < n && srv_of[end] == srv_of[first])
				end++;
			mc_mget(&out[k++], p->id << MC_ID_SHIFT | first,
				in->items + (size_t)first * kl, kl, srv_of + first, end - first, c->w,
				in->send_ns);
			first = end;
		}
		return k;
	}
	if (in->op == NK_NETMC_OP_PUT || in->op == NK_NETMC_OP_GET) {
		if (in->srv[0] >= c->n_servers)
			return 0;  /* the client's hint names no server */
		struct mc_pending *p = mc_coord_open(c, in, src);
		out[0].msg = *in;
		out[0].msg.req_id = p->id << MC_ID_SHIFT;
		out[0].dst = in->srv[0];
		return 1;
	}
	/* a server's reply (only a server's: the switch drops replies from
	 * client ports, and a reply from any other node is not one) */
	if (src >= c->n_servers)
		return 0;
	uint32_t id = in->req_id >> MC_ID_SHIFT;
	struct mc_pending *p = &c->pend[id & (MC_COORD_SLOTS - 1)];
	if (!p->live || p->id != id)
		return 0;
	if (in->op == NK_NETMC_OP_PUT_REPLY || in->op == NK_NETMC_OP_GET_REPLY) {
		out[0].msg = *in;
		out[0].msg.req_id = p->client_req;
		out[0].dst = p->client;
		p->live = 0;
		return 1;
	}
	if (in->op != NK_NETMC_OP_MGET_REPLY || p->op != NK_NETMC_OP_MGET)
		return 0;
	unsigned lo = (in->req_id & ((1u << MC_ID_SHIFT) - 1)) + in->startidx, n = in->nkeys;
	if (!n || lo + n > p->total)
		return 0;
	uint64_t bits = ((1ull << n) - 1) << lo;
	if (!(p->got & bits)) {
		if (in->items) {
			if (in->key_slot_len != p->keylen || mc_coord_keep(c, p, in, lo, n))
				return 0;
		} else {  /* lengths only: spread the value bytes over its pairs */
			for (unsigned i = 0; i < n; i++)
				p->vlen[lo + i] = (uint16_t)(in->value_len / n);
		}
	}
	p->got |= bits;
	return p->got == p->need ? mc_coord_answer(c, p, out, max_out) : 0;
}

const struct nk_host_ops nk_host_netmc = {
	.name = "netmc",
	.proto = NK_PROTO_NETMC,
	.udp_port = NK_NETMC_PORT_BASE,
	.server_state_size = sizeof(struct mc_server),
	.client_state_size = sizeof(struct mc_client),
	.server_init = mc_server_init,
	.server_fini = mc_server_fini,
	.server_handle = mc_server_handle,
	.client_init = mc_client_init,
	.client_fini = mc_client_fini,
	.client_request = mc_client_request,
	.client_reply = mc_client_reply,
	.reply_req_id = mc_reply_req_id,
	.no_client_id = 1,
	.client_multiget = mc_client_multiget,
	.coord_state_size = sizeof(struct mc_coord),
	.coord_init = mc_coord_init,
	.coord_fini = mc_coord_fini,
	.coord_handle = mc_coord_handle,
	.client_hostile = mc_client_hostile,
};
