/*
 * netcache.c - NetCache host logic (docs/netcache.md).
 *
 * Server: READ -> READ_REPLY (stored length; NOT_FOUND if absent or
 * deleted); WRITE -> apply (the server numbers versions itself: stored + 1),
 * WRITE_REPLY; when the switch marked the write REFRESH (the key is cached)
 * the reply carries the new value so the switch can refresh its copy;
 * DELETE -> tombstone, DELETE_REPLY; CACHE_UPDATE from the controller (a
 * fetch, value_len 0) -> CACHE_UPDATE carrying the stored value (at most
 * NK_NETCACHE_MAX_CACHED_VALUE bytes, else result RETRY and no value).
 * Client: address the home server; keys longer than 16 B are cut to their
 * first 16 B (netkv workload keys are unique in their first 16 bytes).
 */
#include <string.h>

#include "netkv/host.h"
#include "netkv/wire.h"

#define NC_TOMBSTONE 0xFFFFFFFFu

struct nc_server {
	uint32_t id;
};

static int nc_server_init(void *st, const struct nk_host_cfg *cfg)
{
	struct nc_server *s = st;
	s->id = cfg->id;
	return 0;
}

static void nc_fini(void *st)
{
	(void)st;
}

static void mk_reply(const struct nc_server *s, const struct nk_msg *in, struct nk_msg *r,
		     uint8_t op, uint8_t result)
{
	*r = *in;
	r->op = op;
	r->kind = (uint8_t)nk_wire_kind(NK_PROTO_NETCACHE, op);
	r->result = result;
	r->server_id = (uint8_t)s->id;
	r->flags &= (uint8_t)~NK_NETCACHE_FLAG_CACHED;
	r->value_len = 0;
	r->value = NULL;
}

static int nc_server_handle(void *st, struct nk_store *store, const struct nk_msg *in,
			    uint16_t src, struct nk_host_out *out, int max_out)
{
	struct nc_server *s = st;
	(void)src;
	if (max_out < 1 || in->proto != NK_PROTO_NETCACHE)
		return 0;
	uint64_t ver = 0;
	uint32_t vlen = 0;
	int found = store->ops->get(store->impl, in, &ver, &vlen) == 0;
	int live = found && vlen != NC_TOMBSTONE;
	struct nk_msg *r = &out[0].msg;
	out[0].dst = NK_DST_SRC;
	switch (in->op) {
	case NK_NETCACHE_OP_READ:
		mk_reply(s, in, r, NK_NETCACHE_OP_READ_REPLY,
			 live ? NK_RESULT_OK : NK_RESULT_NOT_FOUND);
		r->value_len = live ? vlen : 0;   /* the embedder fills the bytes */
		return 1;
	case NK_NETCACHE_OP_WRITE:
		store->ops->put(store->impl, in, nk_ver_after(found, ver), in->value_len);
		mk_reply(s, in, r, NK_NETCACHE_OP_WRITE_REPLY, NK_RESULT_OK);
		if (in->flags & NK_NETCACHE_FLAG_REFRESH) {
			r->flags |= NK_NETCACHE_FLAG_REFRESH;
			r->value_len = in->value_len;
			r->value = in->value;
		}
		return 1;
	case NK_NETCACHE_OP_DELETE:
		store->ops->put(store->impl, in, nk_ver_after(found, ver), NC_TOMBSTONE);
		mk_reply(s, in, r, NK_NETCACHE_OP_DELETE_REPLY, NK_RESULT_OK);
		r->flags &= (uint8_t)~NK_NETCACHE_FLAG_REFRESH;
		return 1;
	case NK_NETCACHE_OP_CACHE_UPDATE:
		if (in->value_len)
			return 0;                 /* not a fetch */
		mk_reply(s, in, r, NK_NETCACHE_OP_CACHE_UPDATE, NK_RESULT_OK);
		if (!live)
			r->result = NK_RESULT_NOT_FOUND;
		else if (vlen > NK_NETCACHE_MAX_CACHED_VALUE)
			r->result = NK_RESULT_RETRY;
		else
			r->value_len = vlen;
		return 1;
	default:
		return 0;
	}
}

static int nc_client_init(void *st, const struct nk_host_cfg *cfg)
{
	(void)st;
	(void)cfg;
	return 0;
}

/* The key NetCache carries for a workload key (host.h wire_key): its first
 * 16 B, a shorter key as it is. out may be key. */
static uint8_t nc_wire_key(const uint8_t *key, uint8_t key_len, uint8_t *out)
{
	uint8_t n = key_len < NK_NETCACHE_KEY_LEN ? key_len : NK_NETCACHE_KEY_LEN;
	memmove(out, key, n);
	return n;
}

static uint16_t nc_client_request(void *st, const struct nk_req_spec *sp, struct nk_msg *m)
{
	(void)st;
	nk_msg_zero(m);
	m->proto = NK_PROTO_NETCACHE;
	int w = sp->kind == NK_KIND_WRITE;
	m->op = w ? NK_NETCACHE_OP_WRITE : NK_NETCACHE_OP_READ;
	m->kind = w ? NK_KIND_WRITE : NK_KIND_READ;
	m->server_id = (uint8_t)(sp->home < NK_SERVER_NONE ? sp->home : NK_SERVER_NONE);
	m->client_id = sp->client_id;
	m->req_id = sp->req_id;
	m->keyhash = sp->keyhash;    /* not on the wire; the simulator's store uses it */
	m->send_ns = sp->send_ns;
	m->key_len = nc_wire_key(sp->key, sp->key_len, m->key);
	m->value_len = w ? sp->value_len : 0;
	m->frag_cnt = 1;
	m->nkeys = 1;
	return sp->home;
}

static int nc_client_reply(void *st, const struct nk_msg *r)
{
	(void)st;
	if (r->proto != NK_PROTO_NETCACHE)
		return NK_REPLY_IGNORE;
	if (r->op != NK_NETCACHE_OP_READ_REPLY && r->op != NK_NETCACHE_OP_WRITE_REPLY &&
	    r->op != NK_NETCACHE_OP_DELETE_REPLY)
		return NK_REPLY_IGNORE;
	return NK_REPLY_DONE;
}

/* A hostile client's message (host.h client_hostile, docs/security.md): a
 * forged refresh (a WRITE_REPLY with REFRESH carrying a value no server
 * stores), a forged fetch answer, a spoofed reply, a request with the
 * switch's REFRESH flag, a replay of an honest client's ids, an oversized
 * value. */
static uint16_t nc_client_hostile(void *st, uint64_t draw, const struct nk_req_spec *sp,
				  uint16_t victim, uint32_t n_servers, struct nk_msg *m)
{
	struct nk_req_spec w = *sp;
	w.kind = NK_KIND_WRITE;
	uint16_t dst = nc_client_request(st, &w, m);
	switch (draw % 6) {
	case 0:         /* the refresh of an honest client's write */
		m->op = NK_NETCACHE_OP_WRITE_REPLY;
		m->flags = NK_NETCACHE_FLAG_REFRESH;
		m->client_id = victim;
		m->value_len = 7;   /* a length no honest write has */
		dst = (uint16_t)(n_servers + victim);
		break;
	case 1:         /* the answer to a controller fetch */
		m->op = NK_NETCACHE_OP_CACHE_UPDATE;
		m->value_len = 7;
		break;
	case 2:         /* a spoofed reply */
		m->op = NK_NETCACHE_OP_READ_REPLY;
		m->client_id = victim;
		dst = (uint16_t)(n_servers + victim);
		break;
	case 3:
		m->flags = NK_NETCACHE_FLAG_REFRESH | NK_NETCACHE_FLAG_CACHED;
		break;
	case 4:
		m->client_id = victim;
		break;
	default:
		m->value_len = 8000;
		break;
	}
	m->kind = (uint8_t)nk_wire_kind(NK_PROTO_NETCACHE, m->op);
	return dst;
}

const struct nk_host_ops nk_host_netcache = {
	.name = "netcache",
	.proto = NK_PROTO_NETCACHE,
	.udp_port = NK_NETCACHE_PORT,
	.server_state_size = sizeof(struct nc_server),
	.client_state_size = 1,
	.server_init = nc_server_init,
	.server_fini = nc_fini,
	.server_handle = nc_server_handle,
	.client_init = nc_client_init,
	.client_fini = nc_fini,
	.client_request = nc_client_request,
	.client_reply = nc_client_reply,
	.client_hostile = nc_client_hostile,
	.wire_key = nc_wire_key,     /* kvserver preloads the 16 B its requests carry */
};
