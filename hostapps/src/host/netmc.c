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
 * the MTU (each packet its own STARTIDX and NUMKEY). Values are lengths
 * only here (items NULL: the codec writes a lengths-only pair list): the
 * store interface gives a value's length, not its bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "../pipeline/peg_params.h"
#include "netkv/host.h"
#include "netkv/wire.h"

#define MC_AGG_SLOTS (1u << 17)
#define MC_ID_MASK (UINT32_MAX >> MC_ID_SHIFT)
#define MC_UDP_IP_HDRS 28

enum mc_scheme { MC_NETMC = 0, MC_CLIMC = 1 };

struct mc_server {
	uint32_t id;
	uint32_t pair_budget;   /* item bytes per reply packet */
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
	struct mc_agg *agg;
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
	return 0;
}

static void mc_fini(void *st)
{
	(void)st;
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
	int k = 0;
	struct nk_msg *r = NULL;
	for (unsigned i = first; i < first + n; i++) {
		memcpy(probe.key, in->items + (size_t)i * keylen, keylen);
		probe.keyhash = nk_djb2(probe.key, keylen);
		uint64_t ver = 0;
		uint32_t vlen = 0;
		int found = store->ops->get(store->impl, &probe, &ver, &vlen) == 0;
		if (!found || vlen > UINT16_MAX)
			vlen = 0;
		uint32_t pair = keylen + 2 + vlen;
		if (!r || (r->items_len + pair > s->pair_budget && r->key_slots) ||
		    r->key_slots == NK_NETMC_MAX_KEYS) {
			if (k == max_out)
				return k;  /* no room: the client times the request out */
			r = &out[k].msg;
			out[k++].dst = NK_DST_SRC;
			mc_reply_header(r, in, NK_NETMC_OP_MGET_REPLY, NK_KIND_MULTIGET_REPLY, s->id);
			r->oid = in->oid;
			r->startidx = (uint8_t)i;
			r->key_slots = 0;
		}
		r->key_slots++;
		r->nkeys = r->key_slots;
		r->items_len = (uint16_t)(r->items_len + pair);
		r->value_len += vlen;
		if (!found)
			r->result = NK_RESULT_NOT_FOUND;
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
		break;
	case NK_NETMC_OP_PUT:
		store->ops->put(store->impl, in, nk_ver_after(found, ver), in->value_len);
		mc_reply_header(r, in, NK_NETMC_OP_PUT_REPLY, NK_KIND_WRITE_REPLY, s->id);
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
	    w != NK_NETMC_KEYIDX_BITS || cfg->n_servers > NK_NETMC_N)
		return -1;
	c->w = (uint32_t)w;
	c->n_servers = cfg->n_servers;
	c->agg = calloc(MC_AGG_SLOTS, sizeof(*c->agg));
	return c->agg ? 0 : -1;
}

static void mc_client_fini(void *st)
{
	struct mc_client *c = st;
	free(c->agg);
	c->agg = NULL;
}

static uint16_t mc_client_request(void *st, const struct nk_req_spec *sp, struct nk_msg *m)
{
	(void)st;
	int w = sp->kind == NK_KIND_WRITE;
	memset(m, 0, sizeof(*m));
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
	return sp->home;
}

/* One MGET over sorted keys [first, first + n) of the request, whose
 * servers are srv_of[]: KEYIDX marks each group's last key, SRV lists the
 * groups' servers. */
static void mc_build(const struct mc_client *c, const struct nk_req_spec *sp,
		     const uint8_t *srv_of, unsigned first, unsigned n, struct nk_host_out *o)
{
	struct nk_msg *m = &o->msg;
	memset(m, 0, sizeof(*m));
	m->proto = NK_PROTO_NETMC;
	m->op = NK_NETMC_OP_MGET;
	m->kind = NK_KIND_MULTIGET;
	m->req_id = (sp->req_id & MC_ID_MASK) << MC_ID_SHIFT | first;
	m->client_id = sp->client_id;
	m->server_id = srv_of[first];
	m->send_ns = sp->send_ns;
	m->nkeys = (uint8_t)n;
	m->key_slot_len = sp->key_len;
	m->key_slots = (uint8_t)n;
	m->items = sp->buf + (size_t)first * sp->key_len;
	m->items_len = (uint16_t)(n * sp->key_len);
	m->keyhash = nk_djb2(m->items, sp->key_len);
	m->frag_cnt = 1;
	unsigned g = 0;
	for (unsigned i = 0; i < n; i++) {
		uint8_t s = srv_of[first + i];
		if (i + 1 == n || srv_of[first + i + 1] != s) {
			m->keyidx |= 1u << (c->w - 1 - i);
			m->srv[g++] = s;
		}
	}
	o->dst = srv_of[first];
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
		mc_build(c, sp, srv_of, first, n, &out[k++]);
		first += n;
	}
	return k;
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
	struct mc_agg *a = &c->agg[id & (MC_AGG_SLOTS - 1)];
	if (!a->live || a->id != id || !n || lo + n > a->total)
		return NK_REPLY_IGNORE;  /* stale, or not this request's keys */
	a->got |= (n == 64 ? UINT64_MAX : (1ull << n) - 1) << lo;
	if (a->got != a->need)
		return NK_REPLY_IGNORE;
	a->live = 0;
	return NK_REPLY_DONE;
}

const struct nk_host_ops nk_host_netmc = {
	.name = "netmc",
	.proto = NK_PROTO_NETMC,
	.udp_port = NK_NETMC_PORT_BASE,
	.server_state_size = sizeof(struct mc_server),
	.client_state_size = sizeof(struct mc_client),
	.server_init = mc_server_init,
	.server_fini = mc_fini,
	.server_handle = mc_server_handle,
	.client_init = mc_client_init,
	.client_fini = mc_client_fini,
	.client_request = mc_client_request,
	.client_reply = mc_client_reply,
	.client_multiget = mc_client_multiget,
};
