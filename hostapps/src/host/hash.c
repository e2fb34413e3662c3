/*
 * hash.c - host logic of the static consistent-hashing baseline ("hash",
 * wire format NK_PROTO_PLAIN: Pegasus' layout with the 0x1573 magic).
 *
 * Client: address the key's home server (server_id = home). Server: serve
 * READ from the store (READ_REPLY with the stored version and value length,
 * NOT_FOUND if absent) and apply WRITE (the server numbers its own versions:
 * stored + 1, as nothing stamps them in this baseline). Other ops are ignored.
 */
#include <stddef.h>
#include <string.h>

#include "netkv/host.h"
#include "netkv/wire.h"

struct plain_server {
	uint32_t id;
};

static int plain_server_init(void *st, const struct nk_host_cfg *cfg)
{
	struct plain_server *s = st;
	s->id = cfg->id;
	return 0;
}

static void plain_fini(void *st)
{
	(void)st;
}

static int plain_server_handle(void *st, struct nk_store *store, const struct nk_msg *in,
			       uint16_t src, struct nk_host_out *out, int max_out)
{
	struct plain_server *s = st;
	(void)src;
	if (max_out < 1 || in->proto != NK_PROTO_PLAIN)
		return 0;
	uint64_t ver = 0;
	uint32_t vlen = 0;
	int found = store->ops->get(store->impl, in, &ver, &vlen) == 0;
	struct nk_msg *r = &out[0].msg;
	out[0].dst = NK_DST_SRC;
	*r = *in;
	/* the request's bytes are not the reply's: a READ's value (if any) is not
	 * the stored one, and its length is the store's; the embedder fills them */
	r->value = NULL;
	r->server_id = (uint8_t)s->id;
	r->bitmap = s->id < 32 ? 1u << s->id : 0;
	switch (in->op) {
	case NK_PEGASUS_OP_READ:
		r->op = NK_PEGASUS_OP_READ_REPLY;
		r->kind = NK_KIND_READ_REPLY;
		r->result = found ? NK_RESULT_OK : NK_RESULT_NOT_FOUND;
		r->ver = found ? ver : 0;
		r->value_len = found ? vlen : 0;
		return 1;
	case NK_PEGASUS_OP_WRITE:
		ver = nk_ver_after(found, ver);
		store->ops->put(store->impl, in, ver, in->value_len);
		r->op = NK_PEGASUS_OP_WRITE_REPLY;
		r->kind = NK_KIND_WRITE_REPLY;
		r->result = NK_RESULT_OK;
		r->ver = ver;
		r->value_len = 0;
		return 1;
	default:
		return 0;
	}
}

static int plain_client_init(void *st, const struct nk_host_cfg *cfg)
{
	(void)st;
	(void)cfg;
	return 0;
}

static uint16_t plain_client_request(void *st, const struct nk_req_spec *sp, struct nk_msg *m)
{
	(void)st;
	/* zero everything but the key bytes, which are overwritten below */
	memset(m, 0, offsetof(struct nk_msg, key));
	memset((uint8_t *)m + offsetof(struct nk_msg, value_len), 0,
	       sizeof(*m) - offsetof(struct nk_msg, value_len));
	m->proto = NK_PROTO_PLAIN;
	int w = sp->kind == NK_KIND_WRITE;
	m->op = w ? NK_PEGASUS_OP_WRITE : NK_PEGASUS_OP_READ;
	m->kind = w ? NK_KIND_WRITE : NK_KIND_READ;
	m->server_id = (uint8_t)(sp->home < NK_SERVER_NONE ? sp->home : NK_SERVER_NONE);
	m->client_id = sp->client_id;
	m->req_id = sp->req_id;
	m->keyhash = sp->keyhash;
	m->send_ns = sp->send_ns;
	m->key_len = sp->key_len;
	memcpy(m->key, sp->key, sp->key_len);
	m->value_len = w ? sp->value_len : 0;
	m->frag_cnt = 1;
	m->nkeys = 1;
	return sp->home;
}

static int plain_client_reply(void *st, const struct nk_msg *r)
{
	(void)st;
	if (r->kind != NK_KIND_READ_REPLY && r->kind != NK_KIND_WRITE_REPLY)
		return NK_REPLY_IGNORE;
	return r->result == NK_RESULT_RETRY ? NK_REPLY_RETRY : NK_REPLY_DONE;
}

/* A hostile client's message (host.h client_hostile, docs/security.md):
 * spoofed replies (the switch drops them), a forged version (servers number
 * their own), a replay of an honest client's ids, an oversized value. */
static uint16_t plain_client_hostile(void *st, uint64_t draw, const struct nk_req_spec *sp,
				     uint16_t victim, uint32_t n_servers, struct nk_msg *m)
{
	struct nk_req_spec w = *sp;
	w.kind = NK_KIND_WRITE;
	uint16_t dst = plain_client_request(st, &w, m);
	switch (draw % 5) {
	case 0:
	case 1:
		m->op = draw % 5 ? NK_PEGASUS_OP_READ_REPLY : NK_PEGASUS_OP_WRITE_REPLY;
		m->client_id = victim;
		m->ver = UINT64_MAX;
		m->server_id = (uint8_t)sp->home;
		dst = (uint16_t)(n_servers + victim);
		break;
	case 2:
		m->ver = UINT64_MAX;
		break;
	case 3:
		m->client_id = victim;
		break;
	default:
		m->value_len = 8000;
		break;
	}
	m->kind = (uint8_t)nk_wire_kind(NK_PROTO_PLAIN, m->op);
	return dst;
}

const struct nk_host_ops nk_host_hash = {
	.name = "hash",
	.proto = NK_PROTO_PLAIN,
	.udp_port = NK_PEGASUS_PORT,
	.server_state_size = sizeof(struct plain_server),
	.client_state_size = 1,
	.server_init = plain_server_init,
	.server_fini = plain_fini,
	.server_handle = plain_server_handle,
	.client_init = plain_client_init,
	.client_fini = plain_fini,
	.client_request = plain_client_request,
	.client_reply = plain_client_reply,
	.client_hostile = plain_client_hostile,
};
