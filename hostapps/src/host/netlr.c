/*
 * netlr.c - NetLR host logic (docs/netlr.md; digest §5): the replica in
 * front of the shared store, and the client.
 *
 * Replica. The store keeps, per key, the value and the seq of the write
 * that wrote it (its version; preloaded keys are at 1, the switch's seq
 * starts there). A replica never orders anything itself: the switch's seq
 * is the order.
 *   - READ: R_REPLY to the sender with the value and the stored seq (so a
 *     history can tell which write it read). A STAMPED read (strict mode
 *     with stamps) whose stored seq is above the stamp gets a NACK: the
 *     replica already applied a write issued after the read was routed.
 *   - WRITE (stamped by the switch): applied if its seq is not older than
 *     the stored one, then W_REPLY (no value) to the client, through the
 *     switch that counts it. An equal seq is a duplicate copy: re-applied
 *     and re-acked. An older one is discarded with no reply (paper).
 *     So is a write stamped with an older switch epoch than the newest the
 *     replica has seen: a copy from before a switch restart, whose seq is
 *     not ordered against the restarted switch's (docs/netlr.md).
 * Keys are handled in arrival order (digest §5 "per-key FIFO"): the
 * simulator's by-key dispatch or one worker.
 *
 * replication=cr: chain replication, the baseline (cr_write below);
 * replication=harmonia runs the same chain (the switch routes the reads).
 * replication=hermes: Hermes, the invalidation baseline (netlr_hermes.c).
 *
 * Client: the switch routes every request (reads to a replica, writes to
 * all), so it addresses any replica; `oid` (the key on the wire) is the
 * CRC32 of the workload key (0, reserved for empty slots, becomes 1) and
 * `id` the workload's 32-bit key hash, which the switch masks to its
 * slots (the paper leaves the hash open; this one is also the simulator's
 * store and history key). Values are NetLR's fixed 16 B. W_REPLY and
 * R_REPLY complete a request, NACK asks for a retry.
 */
#include <stdio.h>
#include <string.h>

#include "../pipeline/peg_params.h"
#include "netlr_hermes.h"

#include "netkv/bytes.h"
#include "netkv/host.h"
#include "netkv/wire.h"

/* replication=netlr (default), cr (the chain-replication baseline),
 * hermes (the invalidation baseline) or harmonia (Harmonia on CR: these
 * same CR replicas and clients, the switch routes reads and tracks the
 * dirty set, pipeline/netlr_harmonia.c) */
static int nl_repl_mode(const char *params, uint32_t *cr, uint32_t *hermes)
{
	char mode[16] = "netlr";
	nkp_get(params, "replication", mode, sizeof mode);
	*cr = !strcmp(mode, "cr") || !strcmp(mode, "harmonia");
	*hermes = !strcmp(mode, "hermes");
	return *cr || *hermes || !strcmp(mode, "netlr") ? 0 : -1;
}

struct nl_server {
	uint32_t id, n_servers, cr, hermes;
	uint64_t stale;            /* writes discarded: older seq, or older switch epoch */
	uint64_t nacks;            /* stamped reads refused */
	uint64_t refused;          /* CR: writes not from the chain's predecessor */
	uint16_t epoch;            /* the newest switch epoch seen in a write */
	struct hm_state hm;        /* replication=hermes */
};

static int nl_server_init(void *st, const struct nk_host_cfg *cfg)
{
	struct nl_server *s = st;
	memset(s, 0, sizeof(*s));
	s->id = cfg->id;
	s->n_servers = cfg->n_servers;
	hm_init(&s->hm, cfg->id, cfg->n_servers);
	return nl_repl_mode(cfg->params, &s->cr, &s->hermes);
}

static void nl_server_fini(void *st)
{
	(void)st;
}

static void reply(const struct nl_server *s, const struct nk_msg *in, struct nk_host_out *o,
		  uint8_t op, uint64_t ver, uint8_t result)
{
	nl_out(s->id, in, o, op, ver, NK_DST_SRC);
	o->msg.result = result;
	o->msg.flags = in->flags & NK_NETLR_FLAG_STAMPED ? 0 : in->flags;
}

/* Chain replication (the baseline, digest §7): the head (replica 0) orders
 * a client's write with the key's next version, every replica applies it
 * and passes it on, the tail (replica n-1) replies to the client; reads go
 * to the tail. A copy older than the stored version is discarded. */
static int cr_write(struct nl_server *s, struct nk_store *store, const struct nk_msg *in,
		    uint16_t src, int found, uint64_t stored, struct nk_host_out *out, int max_out)
{
	uint64_t ver = in->ver;
	uint16_t client;
	if (s->id == 0 && src >= s->n_servers && src != 0xFFFF) {
		ver = nk_ver_after(found, stored);
		if (ver > UINT32_MAX)
			ver = UINT32_MAX;      /* the wire's seq is 32 bits */
		client = src;
	} else if (s->id > 0 && src == s->id - 1 && in->epoch >= s->n_servers) {
		/* NetLR's header has no client id: the head puts the client's
		 * node in the (in CR unused) epoch field of the chain's copies */
		client = in->epoch;
		if (found && ver < stored) {
			s->stale++;
			return 0;
		}
	} else {
		/* a write that skipped the head (or the chain order) */
		s->refused++;
		return 0;
	}
	if (max_out < 1 || store->ops->put(store->impl, in, ver, NK_NETLR_VALUE_LEN))
		return 0;
	if (s->id + 1 >= s->n_servers) {
		reply(s, in, &out[0], NK_NETLR_OP_W_REPLY, ver, NK_RESULT_OK);
		out[0].msg.epoch = 0;
		out[0].dst = client;
		return 1;
	}
	out[0].msg = *in;
	out[0].msg.ver = ver;
	out[0].msg.epoch = client;
	out[0].msg.value = NULL;       /* the embedder fills the bytes */
	out[0].dst = (uint16_t)(s->id + 1);
	return 1;
}

static int nl_server_handle(void *st, struct nk_store *store, const struct nk_msg *in,
			    uint16_t src, struct nk_host_out *out, int max_out)
{
	struct nl_server *s = st;
	(void)src;
	if (max_out < 1 || in->proto != NK_PROTO_NETLR || in->key_len != NK_NETLR_OID_LEN)
		return 0;
	if (s->hermes)
		return hm_handle(&s->hm, store, in, src, out, max_out);
	uint64_t ver = 0;
	uint32_t vlen = 0;
	int found = store->ops->get(store->impl, in, &ver, &vlen) == 0;
	switch (in->op) {
	case NK_NETLR_OP_READ:
		if ((in->flags & NK_NETLR_FLAG_STAMPED) && found && ver > in->ver) {
			s->nacks++;
			reply(s, in, &out[0], NK_NETLR_OP_NACK, 0, NK_RESULT_RETRY);
			return 1;
		}
		reply(s, in, &out[0], NK_NETLR_OP_R_REPLY, found ? ver : 0,
		      found ? NK_RESULT_OK : NK_RESULT_NOT_FOUND);
		return 1;
	case NK_NETLR_OP_WRITE:
		if (s->cr)
			return cr_write(s, store, in, src, found, ver, out, max_out);
		if ((found && in->ver < ver) || in->epoch < s->epoch) {
			s->stale++;
			return 0;
		}
		s->epoch = in->epoch;
		if (store->ops->put(store->impl, in, in->ver, NK_NETLR_VALUE_LEN))
			return 0;
		reply(s, in, &out[0], NK_NETLR_OP_W_REPLY, in->ver, NK_RESULT_OK);
		return 1;
	default:
		return 0;
	}
}

static int nl_server_ctl(void *st, struct nk_store *store, int argc, char **argv, char *out,
			 size_t cap)
{
	struct nl_server *s = st;
	(void)store;
	/* not "stats": kvserver answers that itself (its own counters), so the
	 * replica's would be out of reach on a real rack */
	if (argc == 1 && !strcmp(argv[0], "replica_stats")) {
		if (s->hermes)
			return snprintf(out, cap,
				 "ok writes=%llu commits=%llu stalled=%llu started=%llu full=%llu",
				 (unsigned long long)s->hm.writes,
				 (unsigned long long)s->hm.commits,
				 (unsigned long long)s->hm.stalled,
				 (unsigned long long)s->hm.started, (unsigned long long)s->hm.full);
		return snprintf(out, cap, "ok stale=%llu nacks=%llu refused=%llu",
				(unsigned long long)s->stale, (unsigned long long)s->nacks,
				(unsigned long long)s->refused);
	}
	return snprintf(out, cap, "err unknown command (allowed: replica_stats)");
}

/* ---- client ------------------------------------------------------------------ */

struct nl_client {
	uint32_t n_servers, cr, hermes;
	uint32_t next;             /* hermes: the replica the next request goes to */
};

static int nl_client_init(void *st, const struct nk_host_cfg *cfg)
{
	struct nl_client *c = st;
	c->n_servers = cfg->n_servers;
	c->next = cfg->id;         /* clients start apart */
	return nl_repl_mode(cfg->params, &c->cr, &c->hermes);
}

static void nl_client_fini(void *st)
{
	(void)st;
}

/* The object id a workload key travels as: its CRC32, 0 (the switch's
 * empty slot) becoming 1. kvserver preloads keys under it. */
static uint8_t nl_wire_key(const uint8_t *key, uint8_t key_len, uint8_t *out)
{
	uint32_t oid = nk_crc32(key, key_len);
	nk_put32(out, oid ? oid : 1);
	return NK_NETLR_OID_LEN;
}

static uint16_t nl_client_request(void *st, const struct nk_req_spec *sp, struct nk_msg *m)
{
	struct nl_client *c = st;
	nk_msg_zero(m);
	m->proto = NK_PROTO_NETLR;
	int w = sp->kind == NK_KIND_WRITE;
	m->op = w ? NK_NETLR_OP_WRITE : NK_NETLR_OP_READ;
	m->kind = w ? NK_KIND_WRITE : NK_KIND_READ;
	m->server_id = NK_SERVER_NONE;
	m->client_id = sp->client_id;
	m->req_id = sp->req_id;
	m->keyhash = sp->keyhash;
	m->send_ns = sp->send_ns;
	if (sp->key)
		m->key_len = nl_wire_key(sp->key, (uint8_t)sp->key_len, m->key);
	else
		m->key_len = nl_wire_key((const uint8_t *)"", 0, m->key);
	m->value_len = w ? NK_NETLR_VALUE_LEN : 0;
	m->frag_cnt = 1;
	m->nkeys = 1;
	if (c->cr)                     /* writes to the head, reads to the tail */
		return (uint16_t)(w || !c->n_servers ? 0 : c->n_servers - 1);
	if (c->hermes && c->n_servers)  /* any replica serves and coordinates: */
		return (uint16_t)(c->next++ % c->n_servers);  /* spread (a hot key too) */
	return sp->home;               /* any replica: the switch routes */
}

static int nl_client_reply(void *st, const struct nk_msg *r)
{
	(void)st;
	if (r->proto != NK_PROTO_NETLR)
		return NK_REPLY_IGNORE;
	if (r->op == NK_NETLR_OP_NACK)
		return NK_REPLY_RETRY;
	if (r->op == NK_NETLR_OP_R_REPLY || r->op == NK_NETLR_OP_W_REPLY)
		return NK_REPLY_DONE;
	return NK_REPLY_IGNORE;
}

/* A hostile client's message (host.h client_hostile, docs/security.md):
 * an ordinary write of a workload key, turned into one of the kinds below.
 * NetLR's messages are a fixed 36 B: a longer one is byte-level damage
 * (tests/test_badpackets.py), not a message this function can build. */
static uint16_t nl_client_hostile(void *st, uint64_t draw, const struct nk_req_spec *sp,
				  uint16_t victim, uint32_t n_servers, struct nk_msg *m)
{
	static const uint32_t forged_seq[] = { 0xFFFFFFFFu, 0xFFFFFFFEu, 1u << 31, 3 };
	struct nk_req_spec w = *sp;
	w.kind = NK_KIND_WRITE;
	uint16_t dst = nl_client_request(st, &w, m);
	uint32_t seq = forged_seq[(draw >> 8) % 4];
	switch (draw % 8) {
	case 0:         /* a write at a forged seq, flags and epoch: applied over
			 * newer writes, or making every later write stale */
		m->ver = seq;
		m->flags = NK_NETLR_FLAG_STAMPED | NK_NETLR_FLAG_SUPERSEDED;
		m->epoch = 0xFFFF;
		break;
	case 1:         /* a read with a forged stamp: replicas would NACK it */
		m->op = NK_NETLR_OP_READ;
		m->value_len = 0;
		m->ver = draw >> 16 & 1 ? seq : 0;
		m->flags = NK_NETLR_FLAG_STAMPED;
		break;
	case 2:         /* a forged ack: would commit a write no replica applied,
			 * or move CRep to a replica that lacks the write */
		m->op = NK_NETLR_OP_W_REPLY;
		m->value_len = 0;
		m->ver = seq;
		break;
	case 3:         /* a spoofed reply to an honest client, with its own
			 * request ids (all clients count from the same start) */
		m->op = draw >> 16 & 1 ? NK_NETLR_OP_R_REPLY : NK_NETLR_OP_W_REPLY;
		m->value_len = m->op == NK_NETLR_OP_R_REPLY ? NK_NETLR_VALUE_LEN : 0;
		m->ver = seq;
		dst = (uint16_t)(n_servers + victim);
		break;
	case 4:         /* a forged NACK: the honest client would retry */
		m->op = NK_NETLR_OP_NACK;
		m->value_len = 0;
		dst = (uint16_t)(n_servers + victim);
		break;
	case 5:         /* the reserved oid 0 (the switch's empty slot) */
		nk_put32(m->key, 0);
		break;
	default:        /* a write addressed to a replica (CR: past the head) */
		if (n_servers)
			dst = (uint16_t)((draw >> 12) % n_servers);
		break;
	}
	m->kind = (uint8_t)nk_wire_kind(NK_PROTO_NETLR, m->op);
	return dst;
}

const struct nk_host_ops nk_host_netlr = {
	.name = "netlr",
	.proto = NK_PROTO_NETLR,
	.udp_port = NK_NETLR_PORT,
	.no_client_id = 1,   /* the header has no CLIENT_ID: decoded as 0 */
	.server_state_size = sizeof(struct nl_server),
	.client_state_size = sizeof(struct nl_client),
	.server_init = nl_server_init,
	.server_fini = nl_server_fini,
	.server_handle = nl_server_handle,
	.client_init = nl_client_init,
	.client_fini = nl_client_fini,
	.client_request = nl_client_request,
	.client_reply = nl_client_reply,
	.server_ctl = nl_server_ctl,
	.client_hostile = nl_client_hostile,
	.wire_key = nl_wire_key,
};
