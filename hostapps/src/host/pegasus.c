/*
 * pegasus.c - Pegasus host logic (shared/design/pegasus.md §5, §3.5-3.8, §9.1;
 * docs/pegasus.md "Servers").
 *
 * Server:
 *  - versioned store: a WRITE/DEL is applied only if its VER is newer than the
 *    stored one; READ-REPLY carries the stored version, WRITE-REPLY the
 *    write's version (also when discarded as stale); every reply carries
 *    server_id, bitmap = 1 << server_id and load (requests per window);
 *  - hash collisions: a request whose keyhash belongs to a *different*
 *    replicated key is re-forwarded to its home (request server_id) with
 *    BYPASS; the home answers with BYPASS so the switch skips Algorithm 2;
 *  - write fan-out: the switch multicasts a write to its r targets; each copy
 *    carries `bitmap` = the target set without MULTI, and every target
 *    applies it and answers with its own WRITE-REPLY (never RETRY: see
 *    handle_write);
 *  - AMO (and write_mcast=0): a WRITE with MULTI is applied, answered, and
 *    copied with RC_REQ to every server in `bitmap`; RC_REQ is applied if not
 *    older and answered with RC_ACK (the stored version) to the switch;
 *  - VWRITE (§9.1): raise the version to VER keeping the value, set VIRT,
 *    copy with RC_REQ to `bitmap`, reply WRITE-REPLY(VER); while VIRT is set a
 *    WRITE older than the stored version is answered RETRY;
 *  - AMO (amo=1): a client table (a window of recent REQIDs per client with
 *    the cached reply) answers duplicates without executing them again;
 *  - GC and the replicated-key set through nk_pegasus_server_ctl.
 * Client: address the home server (server_id = home, ver = 0 = unstamped);
 * a reply completes the request, RETRY asks for a retry.
 *
 * Values: the host logic moves lengths; outgoing messages that must carry
 * stored bytes (READ-REPLY, RC_REQ after a VWRITE) have value == NULL and
 * value_len > 0, and the embedder fills the bytes from its store (as for the
 * hash baseline). RC_REQ copies of a WRITE point at the write's bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/host.h"
#include "netkv/wire.h"
#include "pegasus_host.h"
#include "../pipeline/peg_params.h"

/* ---- a small key table: open addressing on keyhash, full-key match -------- */

struct ktab_ent {
	uint32_t keyhash;
	uint8_t used;
	uint8_t key_len;
	uint8_t flag;
	uint8_t rsvd;
	uint64_t val;
	uint8_t key[NK_MAX_KEY_LEN];
};

struct ktab {
	struct ktab_ent *e;
	uint32_t cap, count, max;
};

static int ktab_init(struct ktab *t, uint32_t max)
{
	t->max = max;
	t->cap = 16;
	while (t->cap < 2 * max)
		t->cap <<= 1;
	t->count = 0;
	t->e = calloc(t->cap, sizeof(*t->e));
	return t->e ? 0 : -1;
}

static inline uint32_t ktab_home(const struct ktab *t, uint32_t keyhash)
{
	uint64_t z = (uint64_t)keyhash * 0x9E3779B97F4A7C15ull;
	return (uint32_t)(z >> 32) & (t->cap - 1);
}

static inline int ktab_match(const struct ktab_ent *e, uint32_t keyhash, const uint8_t *key,
			     uint8_t key_len)
{
	return e->keyhash == keyhash &&
	       (!key || (e->key_len == key_len && !memcmp(e->key, key, key_len)));
}

/* key == NULL: match on keyhash only */
static struct ktab_ent *ktab_find(struct ktab *t, uint32_t keyhash, const uint8_t *key,
				  uint8_t key_len)
{
	for (uint32_t i = ktab_home(t, keyhash);; i = (i + 1) & (t->cap - 1)) {
		struct ktab_ent *e = &t->e[i];
		if (!e->used)
			return NULL;
		if (ktab_match(e, keyhash, key, key_len))
			return e;
	}
}

static struct ktab_ent *ktab_put(struct ktab *t, uint32_t keyhash, const uint8_t *key,
				 uint8_t key_len)
{
	uint32_t i = ktab_home(t, keyhash);
	for (;; i = (i + 1) & (t->cap - 1)) {
		struct ktab_ent *e = &t->e[i];
		if (!e->used)
			break;
		if (ktab_match(e, keyhash, key, key_len))
			return e;
	}
	if (t->count >= t->max)
		return NULL;
	struct ktab_ent *e = &t->e[i];
	memset(e, 0, sizeof(*e));
	e->used = 1;
	e->keyhash = keyhash;
	e->key_len = key_len;
	memcpy(e->key, key, key_len);
	t->count++;
	return e;
}

static void ktab_del(struct ktab *t, struct ktab_ent *e)
{
	uint32_t mask = t->cap - 1, i = (uint32_t)(e - t->e);
	t->e[i].used = 0;
	t->count--;
	for (uint32_t j = (i + 1) & mask; t->e[j].used; j = (j + 1) & mask) {
		uint32_t h = ktab_home(t, t->e[j].keyhash);
		int move = i <= j ? (h <= i || h > j) : (h <= i && h > j);
		if (move) {
			t->e[i] = t->e[j];
			t->e[j].used = 0;
			i = j;
		}
	}
}

/* ---- server --------------------------------------------------------------- */

struct amo_ent {
	uint32_t req_id;
	uint8_t used;
	uint8_t result;
	uint64_t ver;
};

struct peg_server {
	uint32_t id, n_servers, n_clients;
	uint8_t amo;
	uint32_t amo_window;       /* REQIDs remembered per client */
	struct amo_ent *amo_tab;   /* [n_clients * amo_window] */
	uint32_t *amo_max;         /* highest REQID seen per client */
	struct ktab rkeys;         /* replicated keys: val = ver_completed */
	struct ktab virt;          /* keys with VIRT set */
	struct ktab copies;        /* non-home copies held: val = home */
	uint64_t load_window_ns, win_idx;
	uint32_t win_count, win_last;
};

static void peg_server_fini(void *st)
{
	struct peg_server *s = st;
	free(s->amo_tab);
	free(s->amo_max);
	free(s->rkeys.e);
	free(s->virt.e);
	free(s->copies.e);
	memset(s, 0, sizeof(*s));
}

static int peg_server_init(void *st, const struct nk_host_cfg *cfg)
{
	struct peg_server *s = st;
	memset(s, 0, sizeof(*s));
	uint64_t amo, win, max_rkeys, max_virt, max_copies, load_us;
	if (nkp_u64(cfg->params, "amo", 0, &amo) ||
	    nkp_u64(cfg->params, "amo_window", 64, &win) ||
	    nkp_u64(cfg->params, "host_max_rkeys", 4096, &max_rkeys) ||
	    nkp_u64(cfg->params, "max_virt", 4096, &max_virt) ||
	    nkp_u64(cfg->params, "max_copies", 65536, &max_copies) ||
	    nkp_u64(cfg->params, "load_window_us", 1000, &load_us))
		return -1;
	if (win < 1 || win > 4096 || !max_rkeys || !max_virt || !max_copies || !load_us ||
	    max_rkeys > (1u << 24) || max_virt > (1u << 24) || max_copies > (1u << 24))
		return -1;
	s->id = cfg->id;
	s->n_servers = cfg->n_servers;
	s->n_clients = cfg->n_clients ? cfg->n_clients : 1;
	s->amo = amo != 0;
	s->amo_window = (uint32_t)win;
	s->load_window_ns = load_us * 1000;
	if (ktab_init(&s->rkeys, (uint32_t)max_rkeys) || ktab_init(&s->virt, (uint32_t)max_virt) ||
	    ktab_init(&s->copies, (uint32_t)max_copies))
		goto fail;
	if (s->amo) {
		s->amo_tab = calloc((size_t)s->n_clients * s->amo_window, sizeof(*s->amo_tab));
		s->amo_max = calloc(s->n_clients, sizeof(uint32_t));
		if (!s->amo_tab || !s->amo_max)
			goto fail;
	}
	return 0;
fail:
	peg_server_fini(s);
	return -1;
}

static uint16_t server_load(struct peg_server *s, const struct nk_msg *in)
{
	uint64_t w = in->send_ns / s->load_window_ns;
	if (in->kind == NK_KIND_READ || in->kind == NK_KIND_WRITE) {
		if (w > s->win_idx) {
			s->win_last = w == s->win_idx + 1 ? s->win_count : 0;
			s->win_idx = w;
			s->win_count = 0;
		}
		s->win_count++;
	}
	return (uint16_t)(s->win_last > 0xFFFF ? 0xFFFF : s->win_last);
}

/* Fill a reply from the request: op, result, version, identity. */
static void mk_reply(struct peg_server *s, const struct nk_msg *in, struct nk_msg *r,
		     uint8_t op, uint8_t result, uint64_t ver, uint16_t load)
{
	*r = *in;
	r->op = op;
	r->kind = (uint8_t)nk_wire_kind(NK_PROTO_PEGASUS, op);
	r->result = result;
	r->ver = ver;
	r->server_id = (uint8_t)s->id;
	r->bitmap = s->id < 32 ? 1u << s->id : 0;
	r->load = load;
	r->flags &= (uint8_t)~NK_PEGASUS_FLAG_MULTI;
	r->value_len = 0;
	r->value = NULL;
}

/* The node a client-facing reply goes to: back to the sender, unless the
 * request was re-forwarded by a server (then the client's node). */
static uint16_t client_dst(const struct peg_server *s, const struct nk_msg *in, uint16_t src)
{
	if (src < s->n_servers)
		return (uint16_t)(s->n_servers + in->client_id);
	return NK_DST_SRC;
}

static void track_copy(struct peg_server *s, const struct nk_msg *m, uint32_t home)
{
	if (home == s->id || home >= s->n_servers)
		return;
	struct ktab_ent *e = ktab_put(&s->copies, m->keyhash, m->key, m->key_len);
	if (e)
		e->val = home;
}

/* RC_REQ copies of (key, ver) to every server of `targets` but self. */
static int emit_rc(struct peg_server *s, const struct nk_msg *in, uint32_t targets,
		   uint64_t ver, uint32_t vlen, const uint8_t *value, uint8_t home,
		   struct nk_host_out *out, int n, int max_out)
{
	for (uint32_t t = 0; t < s->n_servers && t < 32 && n < max_out; t++) {
		if (!(targets >> t & 1) || t == s->id)
			continue;
		struct nk_msg *c = &out[n].msg;
		*c = *in;
		c->op = NK_PEGASUS_OP_RC_REQ;
		c->kind = NK_KIND_CONTROL;
		c->flags = 0;
		c->ver = ver;
		c->server_id = home;     /* RC_REQ carries the key's home */
		c->bitmap = 0;
		c->result = vlen == NK_PEGASUS_TOMBSTONE ? NK_RESULT_NOT_FOUND : NK_RESULT_OK;
		c->value_len = vlen == NK_PEGASUS_TOMBSTONE ? 0 : vlen;
		c->value = vlen == NK_PEGASUS_TOMBSTONE ? NULL : value;
		out[n].dst = (uint16_t)t;
		n++;
	}
	return n;
}

static int handle_read(struct peg_server *s, struct nk_store *store, const struct nk_msg *in,
		       uint16_t src, int bypass, uint16_t load, struct nk_host_out *out)
{
	uint64_t ver = 0;
	uint32_t vlen = 0;
	int found = store->ops->get(store->impl, in, &ver, &vlen) == 0;
	struct nk_msg *r = &out[0].msg;
	int live = found && vlen != NK_PEGASUS_TOMBSTONE;
	mk_reply(s, in, r, NK_PEGASUS_OP_READ_REPLY, live ? NK_RESULT_OK : NK_RESULT_NOT_FOUND,
		 found ? ver : 0, load);
	r->value_len = live ? vlen : 0;
	if (bypass)
		r->flags |= NK_PEGASUS_FLAG_BYPASS;
	out[0].dst = client_dst(s, in, src);
	return 1;
}

/* The at-most-once table trusts a CLIENT_ID only from that client's own
 * node or from a server forwarding it (a chain write): any other sender
 * could fill an honest client's slots with its request ids, and that
 * client's next write with one of them would be acknowledged from the
 * table and never applied (docs/security.md). */
static int amo_sender_ok(const struct peg_server *s, const struct nk_msg *in, uint16_t src)
{
	return src < s->n_servers || src == s->n_servers + in->client_id;
}

static struct amo_ent *amo_slot(struct peg_server *s, const struct nk_msg *in)
{
	if (!s->amo || in->client_id >= s->n_clients)
		return NULL;
	return &s->amo_tab[(size_t)in->client_id * s->amo_window + in->req_id % s->amo_window];
}

/* One of the r copies of a multicast write (docs/pegasus.md "Write fan-out"):
 * the switch sets `bitmap` = the targets and no MULTI; clients send 0. */
static inline int mcast_copy(const struct nk_msg *in)
{
	return !(in->flags & NK_PEGASUS_FLAG_MULTI) && in->bitmap != 0;
}

static int handle_write(struct peg_server *s, struct nk_store *store, const struct nk_msg *in,
			uint16_t src, int bypass, uint16_t load, struct nk_host_out *out,
			int max_out)
{
	if (s->amo && !amo_sender_ok(s, in, src))
		return 0;   /* ignored: another node's CLIENT_ID */
	struct amo_ent *ae = amo_slot(s, in);
	if (ae) {
		if (ae->used && ae->req_id == in->req_id) {
			/* duplicate: the cached reply, never executed twice */
			mk_reply(s, in, &out[0].msg, NK_PEGASUS_OP_WRITE_REPLY, ae->result,
				 ae->ver, load);
			if (bypass)
				out[0].msg.flags |= NK_PEGASUS_FLAG_BYPASS;
			out[0].dst = client_dst(s, in, src);
			return 1;
		}
		uint32_t mx = s->amo_max[in->client_id];
		if (mx >= s->amo_window && in->req_id <= mx - s->amo_window)
			return 0;   /* too old to tell: its slot was reused */
	}
	uint64_t sv = 0, v = in->ver;
	uint32_t slen = 0;
	int found = store->ops->get(store->impl, in, &sv, &slen) == 0;
	uint8_t result = NK_RESULT_OK;
	uint64_t rver;
	/* unstamped (no Pegasus switch on the path): this server orders it
	 * after what it stores, so it is always applied; at 2^64-1 the version
	 * saturates (nothing can be newer) and the value is still replaced */
	int unstamped = v == 0;
	if (unstamped)
		v = nk_ver_after(found, sv);
	uint32_t nlen = in->op == NK_PEGASUS_OP_DEL ? NK_PEGASUS_TOMBSTONE : in->value_len;
	if (!found || v > sv || unstamped) {
		store->ops->put(store->impl, in, v, nlen);
		struct ktab_ent *ve = ktab_find(&s->virt, in->keyhash, in->key, in->key_len);
		if (ve)
			ktab_del(&s->virt, ve);      /* a real write clears VIRT */
		track_copy(s, in, in->server_id);
		rver = v;
		sv = v;
		slen = nlen;
	} else if (v == sv) {
		rver = v;                            /* the same write again */
	} else if (!mcast_copy(in) && ktab_find(&s->virt, in->keyhash, in->key, in->key_len)) {
		/* §9.1. Not for a multicast copy: its siblings answer OK, and
		 * a RETRY next to an OK would make the client run the write
		 * twice. Nor is it needed: a copy was stamped while the key
		 * was replicated (ver_last_write >= its version), so the VWRITE
		 * was stamped when ver_completed >= that version, and its value
		 * is this write's or a newer one's (docs/pegasus.md). */
		result = NK_RESULT_RETRY;
		rver = sv;
	} else {
		rver = v;                            /* stale: discarded, acked */
	}
	mk_reply(s, in, &out[0].msg, NK_PEGASUS_OP_WRITE_REPLY, result, rver, load);
	if (bypass)
		out[0].msg.flags |= NK_PEGASUS_FLAG_BYPASS;
	out[0].dst = client_dst(s, in, src);
	int n = 1;
	if (ae && result != NK_RESULT_RETRY) {
		*ae = (struct amo_ent){ in->req_id, 1, result, rver };
		if (in->req_id > s->amo_max[in->client_id])
			s->amo_max[in->client_id] = in->req_id;
	}
	if ((in->flags & NK_PEGASUS_FLAG_MULTI) && result == NK_RESULT_OK) {
		/* copy what is stored now (the write, or a newer version) */
		const uint8_t *val = sv == v ? in->value : NULL;
		n = emit_rc(s, in, in->bitmap, sv, slen, val, in->server_id, out, n, max_out);
	}
	return n;
}

static int handle_rc_req(struct peg_server *s, struct nk_store *store, const struct nk_msg *in,
			 uint16_t load, struct nk_host_out *out)
{
	uint64_t sv = 0;
	uint32_t slen = 0;
	int found = store->ops->get(store->impl, in, &sv, &slen) == 0;
	if (!found || in->ver >= sv) {
		uint32_t nlen = in->result == NK_RESULT_NOT_FOUND ? NK_PEGASUS_TOMBSTONE
								  : in->value_len;
		store->ops->put(store->impl, in, in->ver, nlen);
		track_copy(s, in, in->server_id);
		sv = in->ver;
	}
	/* RC_ACK with the version now stored (>= the copy's) */
	struct nk_msg *a = &out[0].msg;
	mk_reply(s, in, a, NK_PEGASUS_OP_RC_ACK, NK_RESULT_OK, sv, load);
	a->flags = 0;
	out[0].dst = NK_DST_SRC;   /* consumed by the switch */
	return 1;
}

static int handle_vwrite(struct peg_server *s, struct nk_store *store, const struct nk_msg *in,
			 uint16_t load, struct nk_host_out *out, int max_out)
{
	uint64_t sv = 0;
	uint32_t slen = 0;
	int found = store->ops->get(store->impl, in, &sv, &slen) == 0;
	struct nk_msg *r = &out[0].msg;
	out[0].dst = NK_DST_SRC;
	if (!found) {
		mk_reply(s, in, r, NK_PEGASUS_OP_WRITE_REPLY, NK_RESULT_NOT_FOUND, 0, load);
		return 1;
	}
	if (in->ver > sv) {
		struct ktab_ent *ve = ktab_put(&s->virt, in->keyhash, in->key, in->key_len);
		if (!ve) {
			/* cannot remember VIRT: refuse, the controller retries */
			mk_reply(s, in, r, NK_PEGASUS_OP_WRITE_REPLY, NK_RESULT_RETRY, sv, load);
			return 1;
		}
		store->ops->put(store->impl, in, in->ver, slen);   /* keep the value */
		sv = in->ver;
	}
	/* reply with the version now stored (V, or a newer real write) */
	mk_reply(s, in, r, NK_PEGASUS_OP_WRITE_REPLY, NK_RESULT_OK, sv, load);
	return emit_rc(s, in, in->bitmap, sv, slen, NULL, in->server_id, out, 1, max_out);
}

static int peg_server_handle(void *st, struct nk_store *store, const struct nk_msg *in,
			     uint16_t src, struct nk_host_out *out, int max_out)
{
	struct peg_server *s = st;
	if (max_out < 1 || in->proto != NK_PROTO_PEGASUS)
		return 0;
	uint16_t load = server_load(s, in);
	int bypass = (in->flags & NK_PEGASUS_FLAG_BYPASS) != 0;
	switch (in->op) {
	case NK_PEGASUS_OP_READ:
	case NK_PEGASUS_OP_WRITE:
	case NK_PEGASUS_OP_DEL:
		if (!bypass) {
			struct ktab_ent *rk = ktab_find(&s->rkeys, in->keyhash, NULL, 0);
			if (rk && (rk->key_len != in->key_len ||
				   memcmp(rk->key, in->key, in->key_len))) {
				/* a cold key colliding with a replicated one */
				if (in->server_id != s->id && in->server_id < s->n_servers) {
					/* re-forwarded with its CLIENT_ID, where the
					 * home trusts it (a server sent it) and
					 * replies to that client's node: only from
					 * that client's own node, or any node could
					 * fill another client's AMO slots and answer
					 * its requests (amo_sender_ok, docs/security.md) */
					if (src != s->n_servers + in->client_id)
						return 0;
					out[0].msg = *in;
					out[0].msg.flags |= NK_PEGASUS_FLAG_BYPASS;
					out[0].msg.flags &= (uint8_t)~NK_PEGASUS_FLAG_MULTI;
					out[0].msg.bitmap = 0;
					out[0].dst = in->server_id;
					return 1;
				}
				bypass = 1;   /* we are its home: reply with BYPASS */
			}
		}
		if (in->op == NK_PEGASUS_OP_READ)
			return handle_read(s, store, in, src, bypass, load, out);
		return handle_write(s, store, in, src, bypass, load, out, max_out);
	case NK_PEGASUS_OP_RC_REQ:
		return handle_rc_req(s, store, in, load, out);
	case NK_PEGASUS_OP_VWRITE:
		return handle_vwrite(s, store, in, load, out, max_out);
	default:
		return 0;
	}
}

/* ---- control commands ----------------------------------------------------- */

static int parse_u64(const char *p, uint64_t *v)
{
	char *e = NULL;
	if (!p || !*p || *p == '-')
		return -1;
	*v = strtoull(p, &e, 0);
	return *e ? -1 : 0;
}

static int unhex(const char *h, uint8_t *out, size_t cap)
{
	size_t n = strlen(h);
	if (n % 2 || n / 2 > cap)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(h + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	return (int)(n / 2);
}

static size_t put_hex(char *out, size_t cap, size_t at, const uint8_t *b, size_t n)
{
	static const char d[] = "0123456789abcdef";
	for (size_t i = 0; i < n && at + 2 < cap; i++) {
		out[at++] = d[b[i] >> 4];
		out[at++] = d[b[i] & 15];
	}
	if (at < cap)
		out[at] = 0;
	return at;
}

static int reply_str(char *out, size_t cap, const char *s)
{
	int n = snprintf(out, cap, "%s", s);
	return n < 0 ? 0 : (size_t)n >= cap ? (int)cap - 1 : n;
}

int nk_pegasus_server_ctl(void *st, struct nk_store *store, int argc, char **argv, char *out,
			  size_t cap)
{
	struct peg_server *s = st;
	uint64_t a, b, c, d;
	uint8_t key[NK_MAX_KEY_LEN];
	if (argc < 1 || !cap)
		return reply_str(out, cap, "err usage");
	const char *cmd = argv[0];
	if (!strcmp(cmd, "rkey_add") && (argc == 3 || argc == 4)) {
		int kl = unhex(argv[2], key, sizeof key);
		if (parse_u64(argv[1], &a) || a > UINT32_MAX || kl < 0)
			return reply_str(out, cap, "err bad argument");
		b = 0;
		if (argc == 4 && parse_u64(argv[3], &b))
			return reply_str(out, cap, "err bad argument");
		struct ktab_ent *e = ktab_find(&s->rkeys, (uint32_t)a, NULL, 0);
		if (e && (e->key_len != kl || memcmp(e->key, key, (size_t)kl)))
			ktab_del(&s->rkeys, e);      /* another key with that hash */
		e = ktab_put(&s->rkeys, (uint32_t)a, key, (uint8_t)kl);
		if (!e)
			return reply_str(out, cap, "err full");
		if (b > e->val)
			e->val = b;
		return reply_str(out, cap, "ok");
	}
	if (!strcmp(cmd, "rkey_del") && argc == 2) {
		if (parse_u64(argv[1], &a) || a > UINT32_MAX)
			return reply_str(out, cap, "err bad argument");
		struct ktab_ent *e = ktab_find(&s->rkeys, (uint32_t)a, NULL, 0);
		if (!e)
			return reply_str(out, cap, "err no such key");
		ktab_del(&s->rkeys, e);
		return reply_str(out, cap, "ok");
	}
	if (!strcmp(cmd, "rkey_ver") && argc == 3) {
		if (parse_u64(argv[1], &a) || a > UINT32_MAX || parse_u64(argv[2], &b))
			return reply_str(out, cap, "err bad argument");
		struct ktab_ent *e = ktab_find(&s->rkeys, (uint32_t)a, NULL, 0);
		if (!e)
			return reply_str(out, cap, "err no such key");
		if (b > e->val)
			e->val = b;
		return reply_str(out, cap, "ok");
	}
	if (!strcmp(cmd, "gc") && argc == 1) {
		/* drop non-home copies that are obsolete (older than the key's
		 * ver_completed) or whose key is no longer replicated */
		char list[8192];
		size_t at = 0;
		unsigned dropped = 0;
		for (uint32_t i = 0; i < s->copies.cap;) {
			struct ktab_ent *e = &s->copies.e[i];
			if (!e->used) {
				i++;
				continue;
			}
			struct ktab_ent *rk = ktab_find(&s->rkeys, e->keyhash, e->key, e->key_len);
			int drop = !rk;
			if (rk) {
				struct nk_msg q;
				memset(&q, 0, sizeof q);
				q.proto = NK_PROTO_PEGASUS;
				q.keyhash = e->keyhash;
				q.key_len = e->key_len;
				memcpy(q.key, e->key, e->key_len);
				uint64_t sv = 0;
				uint32_t sl = 0;
				int found = store->ops->get(store->impl, &q, &sv, &sl) == 0;
				drop = !found || sv < rk->val;
			}
			if (!drop) {
				i++;
				continue;
			}
			if (at + 2 * e->key_len + 2 < sizeof list) {
				if (dropped)
					list[at++] = ',';
				at = put_hex(list, sizeof list, at, e->key, e->key_len);
			}
			dropped++;
			ktab_del(&s->copies, e);    /* slot i may now hold a shifted entry */
		}
		list[at] = 0;
		int n = snprintf(out, cap, "ok %u %s", dropped, list);
		return n < 0 ? 0 : (size_t)n >= cap ? (int)cap - 1 : n;
	}
	if (!strcmp(cmd, "amo_get") && argc == 2) {
		if (!s->amo)
			return reply_str(out, cap, "err amo off");
		if (parse_u64(argv[1], &a) || a >= s->n_clients)
			return reply_str(out, cap, "err bad argument");
		size_t at = (size_t)snprintf(out, cap, "ok");
		const struct amo_ent *row = &s->amo_tab[a * s->amo_window];
		int first = 1;
		for (uint32_t i = 0; i < s->amo_window && at < cap; i++) {
			if (!row[i].used)
				continue;
			int n = snprintf(out + at, cap - at, "%s%u:%u:%llu", first ? " " : ",",
					 row[i].req_id, row[i].result,
					 (unsigned long long)row[i].ver);
			if (n < 0 || (size_t)n >= cap - at)
				return reply_str(out, cap, "err reply too long");
			at += (size_t)n;
			first = 0;
		}
		return (int)at;
	}
	if (!strcmp(cmd, "amo_put") && argc == 5) {
		if (!s->amo)
			return reply_str(out, cap, "err amo off");
		if (parse_u64(argv[1], &a) || a >= s->n_clients || parse_u64(argv[2], &b) ||
		    b > UINT32_MAX || parse_u64(argv[3], &c) || c > 255 || parse_u64(argv[4], &d))
			return reply_str(out, cap, "err bad argument");
		struct amo_ent *e = &s->amo_tab[a * s->amo_window + b % s->amo_window];
		if (!e->used || e->req_id <= b)
			*e = (struct amo_ent){ (uint32_t)b, 1, (uint8_t)c, d };
		if (b > s->amo_max[a])
			s->amo_max[a] = (uint32_t)b;
		return reply_str(out, cap, "ok");
	}
	if (!strcmp(cmd, "virt") && argc == 2) {
		int kl = unhex(argv[1], key, sizeof key);
		if (kl < 0)
			return reply_str(out, cap, "err bad argument");
		uint32_t h = nk_djb2(key, (size_t)kl);
		return reply_str(out, cap, ktab_find(&s->virt, h, key, (uint8_t)kl) ? "ok 1" : "ok 0");
	}
	return reply_str(out, cap, "err unknown command");
}

/* ---- client --------------------------------------------------------------- */

static int peg_client_init(void *st, const struct nk_host_cfg *cfg)
{
	(void)st;
	(void)cfg;
	return 0;
}

static void peg_client_fini(void *st)
{
	(void)st;
}

static uint16_t peg_client_request(void *st, const struct nk_req_spec *sp, struct nk_msg *m)
{
	(void)st;
	nk_msg_zero(m);
	m->proto = NK_PROTO_PEGASUS;
	int w = sp->kind == NK_KIND_WRITE;
	m->op = w ? NK_PEGASUS_OP_WRITE : NK_PEGASUS_OP_READ;
	m->kind = w ? NK_KIND_WRITE : NK_KIND_READ;
	m->server_id = (uint8_t)(sp->home < NK_SERVER_NONE ? sp->home : NK_SERVER_NONE);
	m->client_id = sp->client_id;
	m->req_id = sp->req_id;
	m->keyhash = sp->keyhash;
	m->ver = 0;                    /* unstamped: the switch stamps writes */
	m->send_ns = sp->send_ns;
	m->key_len = sp->key_len;
	memcpy(m->key, sp->key, sp->key_len);
	m->value_len = w ? sp->value_len : 0;
	m->frag_cnt = 1;
	m->nkeys = 1;
	return sp->home;
}

static int peg_client_reply(void *st, const struct nk_msg *r)
{
	(void)st;
	if (r->proto != NK_PROTO_PEGASUS ||
	    (r->op != NK_PEGASUS_OP_READ_REPLY && r->op != NK_PEGASUS_OP_WRITE_REPLY))
		return NK_REPLY_IGNORE;
	return r->result == NK_RESULT_RETRY ? NK_REPLY_RETRY : NK_REPLY_DONE;
}

/* A hostile client's message (host.h client_hostile, docs/security.md): what
 * the switch must overwrite (VER, BYPASS, MULTI/bitmap) or drop (server- and
 * controller-only ops), and what the servers must survive (replays of an
 * honest client's ids, directly or through a replica's collision
 * re-forwarding, an oversized value). */
static uint16_t peg_client_hostile(void *st, uint64_t draw, const struct nk_req_spec *sp,
				   uint16_t victim, uint32_t n_servers, struct nk_msg *m)
{
	static const uint64_t forged_ver[] = { UINT64_MAX, UINT64_MAX - 1, 1ull << 63, 3 };
	struct nk_req_spec w = *sp;
	w.kind = NK_KIND_WRITE;
	uint16_t dst = peg_client_request(st, &w, m);
	uint64_t ver = forged_ver[(draw >> 8) % 4];
	switch (draw % 10) {
	case 0:         /* the WRITE: a forged VER */
		m->ver = ver;
		break;
	case 1:         /* ... that BYPASS would keep */
		m->ver = ver;
		m->flags = NK_PEGASUS_FLAG_BYPASS;
		break;
	case 2:         /* forged copy targets */
		m->flags = NK_PEGASUS_FLAG_MULTI;
		m->bitmap = 0xFFFFFFFFu;
		break;
	case 3:         /* a spoofed reply to an honest client's recent request */
	case 4:
		m->op = draw % 10 == 3 ? NK_PEGASUS_OP_WRITE_REPLY : NK_PEGASUS_OP_READ_REPLY;
		m->client_id = victim;
		m->ver = ver;
		m->server_id = (uint8_t)sp->home;
		m->bitmap = sp->home < 32 ? 1u << sp->home : 0;
		dst = (uint16_t)(n_servers + victim);
		break;
	case 5:         /* directory poisoning: an RC_ACK at a huge version */
		m->op = NK_PEGASUS_OP_RC_ACK;
		m->ver = ver;
		m->bitmap = sp->home < 32 ? 1u << sp->home : 0;
		break;
	case 6:         /* a replica copy at a huge version, to a server */
		m->op = NK_PEGASUS_OP_RC_REQ;
		m->ver = ver;
		break;
	case 7:         /* the controller's virtual write, and a chain write */
		m->op = draw >> 16 & 1 ? NK_PEGASUS_OP_VWRITE : NK_PEGASUS_OP_PUT_FWD;
		m->ver = ver;
		break;
	case 8:         /* a replay of an honest client's request id ... */
		m->client_id = victim;
		if (draw >> 16 & 1 && m->key_len) {
			/* ... as a collision: the key's keyhash (a replicated
			 * key's, for a hot one) with other key bytes, which a
			 * replica would re-forward to the home, where a server's
			 * CLIENT_ID is trusted (the sender check must come first) */
			m->key[m->key_len - 1] ^= 0x5A;
		}
		break;
	default:        /* an oversized value */
		m->value_len = 8000;
		break;
	}
	m->kind = (uint8_t)nk_wire_kind(NK_PROTO_PEGASUS, m->op);
	return dst;
}

const struct nk_host_ops nk_host_pegasus = {
	.name = "pegasus",
	.proto = NK_PROTO_PEGASUS,
	.udp_port = NK_PEGASUS_PORT,
	.server_state_size = sizeof(struct peg_server),
	.client_state_size = 1,
	.server_init = peg_server_init,
	.server_fini = peg_server_fini,
	.server_handle = peg_server_handle,
	.client_init = peg_client_init,
	.client_fini = peg_client_fini,
	.client_request = peg_client_request,
	.client_reply = peg_client_reply,
	.server_ctl = nk_pegasus_server_ctl,
	.client_hostile = peg_client_hostile,
};
