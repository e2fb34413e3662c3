/*
 * kvswitch.c - KVSwitch host logic (docs/kvswitch.md; digest §5): the
 * server agent in front of the store, and the client.
 *
 * Server. Each server keeps a small table of the hot keys it is involved in:
 * OWNER (it received REPL_CMD for the key, or a hot write naming it owner)
 * or REPLICA (it received a push or an update for it). A hot write reaches
 * the owner and every replica as the same multicast SET/DEL, stamped by the
 * switch with VER != 0 and FLAGS = owner index + 1 (the switch zeroes both in
 * every other client request):
 *   - owner (FLAGS names it; or unstamped: a cold write): apply, reply to the
 *     client; in strict mode also confirm to the switch (UPDATE_ACK), which
 *     then reads replicas only while the owner holds the same write;
 *   - anyone else: apply as a replica (UPDATE), confirm with UPDATE_ACK
 *     carrying the version it now holds; no reply to the client.
 * UPDATE/UPDATE_DEL (a P4 egress that rewrites the op) are replica updates.
 * REPL_CMD (controller -> owner; VER = the slot's install version, payload
 * `u8 n, n x u8 server`, or `bitmap` where the simulator moves no bytes):
 * become OWNER, bring the stored version up to the install version, push
 * the item (REPL_PUSH) to each listed server. REPL_PUSH: store if not older,
 * UPDATE_ACK. REPL_EVICT (FLAGS = owner index + 1): a replica forgets the
 * role (the bytes stay until overwritten; the switch no longer sends reads
 * there); the owner notes that the key is cold from that version on.
 *
 * Versions. The stored version is the wire VER for hot writes and pushes,
 * stored + 1 for cold writes, so every copy of one write holds the same
 * version. Strict mode (strict=1): a stamped write or push is applied only
 * if not older than what is stored (reordered or duplicated packets never
 * roll a copy back); the owner answers ERROR (the client resends, the switch
 * stamps it anew) to a stamped write older than its copy, and to an
 * unstamped write of a key it knows hot (it passed the switch before the key
 * was installed: applied now it would be newer than the replicas, which the
 * switch still reads); a redirected read carries the version the switch
 * validated, and a replica holding a newer one (the owner may have lost that
 * write) answers ERROR. strict=0: applied unconditionally (the paper).
 * Install versions (controller) are above every cold-write version, so the
 * owner never sees a hot write "older" than its own cold writes.
 *
 * At most once (amo=1): the owner remembers the reply to the last
 * `amo_window` writes of each client (by source node and SEQ) and answers a
 * resent write from it without applying it again, so a write whose reply
 * was lost is not re-applied after a newer one.
 *
 * Client: addresses the key's home; matches replies by SEQ (req_id) and
 * never by source address (a redirected read comes back from a replica).
 * Keys are 16 B on the wire: longer workload keys are cut to their first
 * 16 B (unique there), shorter ones right-aligned with zeros before them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../pipeline/peg_params.h"
#include "netkv/host.h"
#include "netkv/wire.h"

#define KS_TOMBSTONE 0xFFFFFFFFu

enum ks_role { KS_FREE = 0, KS_OWNER = 1, KS_REPLICA = 2 };

struct ks_ent {
	uint8_t key[NK_KVSWITCH_KEY_LEN];
	uint8_t role;
	uint8_t hot;               /* owner: the switch stamps this key's writes */
	uint32_t hot_ver;          /* version of the last hot/cold news (install, write, evict) */
};

struct ks_amo {
	uint32_t req_id;
	uint8_t used;
	uint8_t result;
};

struct ks_server {
	uint32_t id, n_servers, n_clients, strict;
	/* the roles: open addressing, linear probing, sized once at init (4 x
	 * hot_keys slots, at most half of them used); a forgotten role leaves
	 * no tombstone (ent_forget), so the table is never rebuilt */
	struct ks_ent *tab;
	uint32_t cap, used;        /* used: slots holding a role */
	uint64_t full;             /* roles refused: half the table in use */
	uint32_t amo_window;       /* 0: at-most-once off */
	struct ks_amo *amo;        /* [n_clients * amo_window] */
	uint32_t *amo_max;         /* highest SEQ seen per client */
	uint64_t amo_dups, amo_old, retries;
};

static uint32_t key_home(const struct ks_server *s, const uint8_t *key)
{
	return nk_crc32(key, NK_KVSWITCH_KEY_LEN) & (s->cap - 1);
}

static struct ks_ent *ent_find(struct ks_server *s, const uint8_t *key)
{
	for (uint32_t i = key_home(s, key), n = 0; n < s->cap; i = (i + 1) & (s->cap - 1), n++) {
		struct ks_ent *e = &s->tab[i];
		if (e->role == KS_FREE)
			return NULL;
		if (!memcmp(e->key, key, NK_KVSWITCH_KEY_LEN))
			return e;
	}
	return NULL;
}

/* key's entry with `role` (added if absent); NULL, counted in `full`, if
 * half the table holds roles already (no allocation: the table is sized at
 * init) */
static struct ks_ent *ent_set(struct ks_server *s, const uint8_t *key, uint8_t role)
{
	struct ks_ent *e = ent_find(s, key);
	if (e) {
		e->role = role;
		return e;
	}
	if (s->used + 1 > s->cap / 2) {
		s->full++;
		return NULL;
	}
	uint32_t i = key_home(s, key);
	while (s->tab[i].role != KS_FREE)
		i = (i + 1) & (s->cap - 1);
	s->used++;
	memcpy(s->tab[i].key, key, NK_KVSWITCH_KEY_LEN);
	s->tab[i].role = role;
	s->tab[i].hot = 0;
	s->tab[i].hot_ver = 0;
	return &s->tab[i];
}

/* Forget e's role, leaving no tombstone (linear probing's deletion, Knuth's
 * Algorithm R): each later entry of its cluster whose home is not between
 * the freed slot and its own moves back into the freed slot, so every entry
 * stays reachable from its home without a FREE slot on the way. */
static void ent_forget(struct ks_server *s, struct ks_ent *e)
{
	uint32_t mask = s->cap - 1, i = (uint32_t)(e - s->tab), j = i;
	s->tab[i].role = KS_FREE;
	s->used--;
	for (;;) {
		j = (j + 1) & mask;
		if (s->tab[j].role == KS_FREE)
			return;
		uint32_t h = key_home(s, s->tab[j].key);
		/* j's entry may fill i unless its home lies in (i, j], cyclically */
		if (i <= j ? h <= i || h > j : h <= i && h > j) {
			s->tab[i] = s->tab[j];
			s->tab[j].role = KS_FREE;
			i = j;
		}
	}
}

/* The owner's news that `key` is hot (on) or cold (off) as of version `ver`:
 * only news newer than what it last heard counts (reordered REPL_CMD,
 * REPL_EVICT and hot writes). */
static int owner_news(struct ks_server *s, const uint8_t *key, uint32_t ver, int on)
{
	struct ks_ent *e = ent_set(s, key, KS_OWNER);
	if (e && (ver > e->hot_ver || (ver == e->hot_ver && !on))) {
		e->hot = (uint8_t)on;
		e->hot_ver = ver;
		return 1;
	}
	return 0;
}

/* The stored copy at version `ver`, its value kept (a control packet's
 * payload is never a value). */
static void raise_ver(struct nk_store *store, const struct nk_msg *in, uint64_t ver, uint32_t vlen)
{
	struct nk_msg k = *in;
	k.value = NULL;
	store->ops->put(store->impl, &k, ver, vlen);
}

static int ks_server_init(void *st, const struct nk_host_cfg *cfg)
{
	struct ks_server *s = st;
	memset(s, 0, sizeof(*s));
	uint64_t k, strict, amo, win;
	if (nkp_u64(cfg->params, "hot_keys", 10000, &k) ||
	    nkp_u64(cfg->params, "strict", 1, &strict) ||
	    nkp_u64(cfg->params, "amo", 0, &amo) ||
	    nkp_u64(cfg->params, "amo_window", 4096, &win) || k < 1 || k > (1u << 20) ||
	    win < 1 || win > (1u << 16))
		return -1;
	s->id = cfg->id;
	s->n_servers = cfg->n_servers;
	s->n_clients = cfg->n_clients ? cfg->n_clients : 1;
	s->strict = strict != 0;
	s->cap = 16;
	while (s->cap < 4 * k)
		s->cap <<= 1;
	s->tab = calloc(s->cap, sizeof(*s->tab));
	if (!s->tab)
		return -1;
	if (amo) {
		s->amo_window = (uint32_t)win;
		s->amo = calloc((size_t)s->n_clients * win, sizeof(*s->amo));
		s->amo_max = calloc(s->n_clients, sizeof(uint32_t));
		if (!s->amo || !s->amo_max) {
			free(s->tab);
			free(s->amo);
			free(s->amo_max);
			memset(s, 0, sizeof(*s));
			return -1;
		}
	}
	return 0;
}

static void ks_server_fini(void *st)
{
	struct ks_server *s = st;
	free(s->tab);
	free(s->amo);
	free(s->amo_max);
	s->tab = NULL;
	s->amo = NULL;
	s->amo_max = NULL;
}

/* The client's at-most-once slot for this write: clients are the nodes after
 * the servers (the simulator's and the rack's addressing); NULL if off or
 * the sender is not a client. */
static struct ks_amo *amo_slot(struct ks_server *s, const struct nk_msg *in, uint16_t src)
{
	if (!s->amo || src < s->n_servers || src - s->n_servers >= s->n_clients)
		return NULL;
	return &s->amo[(size_t)(src - s->n_servers) * s->amo_window + in->req_id % s->amo_window];
}

/* A cold write's version: stored + 1, saturating at the wire's 32-bit VER
 * (a stored 2^32-1, e.g. pushed by a stamped packet, would otherwise give a
 * version no reply can carry: found by fuzz_kvswitch, tests/fuzz/kvswitch/). */
static uint64_t ks_ver_after(int found, uint64_t stored)
{
	uint64_t v = nk_ver_after(found, stored);
	return v > UINT32_MAX ? UINT32_MAX : v;
}

/* The kind of an op a server sends (wire.c's table): a constant where
 * mk_msg is inlined, instead of nk_wire_kind's lookup (~20 instructions a
 * reply). */
static inline uint8_t ks_out_kind(uint8_t op)
{
	switch (op) {
	case NK_KVSWITCH_OP_GET_REPLY:
		return NK_KIND_READ_REPLY;
	case NK_KVSWITCH_OP_SET_REPLY:
	case NK_KVSWITCH_OP_DEL_REPLY:
		return NK_KIND_WRITE_REPLY;
	case NK_KVSWITCH_OP_UPDATE_ACK:
	case NK_KVSWITCH_OP_REPL_PUSH:
		return NK_KIND_CONTROL;
	default:
		return (uint8_t)nk_wire_kind(NK_PROTO_KVSWITCH, op);
	}
}

static void mk_msg(const struct ks_server *s, const struct nk_msg *in, struct nk_msg *r,
		   uint8_t op, uint8_t result)
{
	*r = *in;
	r->op = op;
	r->kind = ks_out_kind(op);
	r->result = result;
	r->server_id = (uint8_t)s->id;
	r->value_len = 0;
	r->value = NULL;
}

/* Store a stamped copy (hot write, update, push) unless it is older than
 * the stored one (strict). 1 if it was applied. */
static int apply_stamped(const struct ks_server *s, struct nk_store *store, const struct nk_msg *in,
			 int found, uint64_t stored, uint32_t vlen)
{
	if (s->strict && found && in->ver < stored)
		return 0;
	store->ops->put(store->impl, in, in->ver, vlen);
	return 1;
}

/* A write of a hot key, as a replica: apply and confirm to the switch. */
static int replica_update(struct ks_server *s, struct nk_store *store, const struct nk_msg *in,
			  int del, struct nk_host_out *out)
{
	uint64_t ver = 0;
	uint32_t vlen = 0;
	int found = store->ops->get(store->impl, in, &ver, &vlen) == 0;
	ent_set(s, in->key, KS_REPLICA);
	if (apply_stamped(s, store, in, found, ver, del ? KS_TOMBSTONE : in->value_len))
		ver = in->ver;
	mk_msg(s, in, &out[0].msg, NK_KVSWITCH_OP_UPDATE_ACK, NK_RESULT_OK);
	out[0].msg.ver = ver;
	out[0].dst = NK_DST_SRC;     /* any address: the switch consumes it */
	return 1;
}

/* REPL_CMD's replica list: the payload on the wire, `bitmap` in the simulator. */
static uint32_t repl_targets(const struct ks_server *s, const struct nk_msg *in)
{
	uint32_t set = 0;
	if (in->value && in->value_len >= 1) {
		uint32_t n = in->value[0];
		for (uint32_t i = 0; i < n && 1 + i < in->value_len; i++)
			if (in->value[1 + i] < s->n_servers && in->value[1 + i] < 32)
				set |= 1u << in->value[1 + i];
	} else {
		set = in->bitmap;
	}
	if (s->id < 32)
		set &= ~(1u << s->id);
	if (s->n_servers < 32)
		set &= (1u << s->n_servers) - 1;
	return set;
}

/* A write of a key this server owns: at most once, ERROR where strict mode
 * cannot place it among the replicas' writes, else apply and reply (and in
 * strict mode confirm a stamped one to the switch). */
static int owner_write(struct ks_server *s, struct nk_store *store, const struct nk_msg *in,
		       uint16_t src, int found, uint64_t ver, struct nk_host_out *out, int max_out)
{
	int del = in->op == NK_KVSWITCH_OP_DEL;
	uint8_t op = del ? NK_KVSWITCH_OP_DEL_REPLY : NK_KVSWITCH_OP_SET_REPLY;
	struct nk_msg *r = &out[0].msg;
	struct ks_amo *a = amo_slot(s, in, src);
	if (a) {
		if (a->used && a->req_id == in->req_id) {
			/* a resend (or duplicate): the first attempt's reply, not
			 * applied again and not confirmed (the replicas may hold the
			 * resend's stamp: reads stay on the owner until the next write) */
			s->amo_dups++;
			mk_msg(s, in, r, op, a->result);
			r->ver = 0;
			return 1;
		}
		uint32_t mx = s->amo_max[src - s->n_servers];
		if (mx >= s->amo_window && in->req_id <= mx - s->amo_window) {
			s->amo_old++;
			return 0;    /* too old to tell: its slot was reused */
		}
	}
	uint32_t nvlen = del ? KS_TOMBSTONE : in->value_len;
	int stamped = in->ver != 0;
	if (stamped)
		owner_news(s, in->key, (uint32_t)in->ver, 1);
	const struct ks_ent *e = ent_find(s, in->key);
	int retry = 0;
	if (!stamped && s->strict && e && e->role == KS_OWNER && e->hot)
		retry = 1;   /* passed the switch before the install */
	else if (!stamped)
		store->ops->put(store->impl, in, ks_ver_after(found, ver), nvlen);
	else if (!apply_stamped(s, store, in, found, ver, nvlen))
		retry = 1;   /* older than the owner's copy (reordered, re-installed) */
	if (retry) {
		s->retries++;
		mk_msg(s, in, r, op, NK_KVSWITCH_RESULT_ERROR);
		r->ver = 0;
		return 1;
	}
	mk_msg(s, in, r, op, NK_RESULT_OK);
	r->ver = 0;
	if (a) {
		*a = (struct ks_amo){ in->req_id, 1, NK_RESULT_OK };
		if (in->req_id > s->amo_max[src - s->n_servers])
			s->amo_max[src - s->n_servers] = in->req_id;
	}
	if (!stamped || !s->strict || max_out < 2)
		return 1;
	/* strict mode reads replicas only once the owner confirmed the write
	 * too (its copy may be the one the network lost) */
	mk_msg(s, in, &out[1].msg, NK_KVSWITCH_OP_UPDATE_ACK, NK_RESULT_OK);
	out[1].msg.ver = in->ver;
	out[1].dst = NK_DST_SRC;
	return 2;
}

static int ks_server_handle(void *st, struct nk_store *store, const struct nk_msg *in,
			    uint16_t src, struct nk_host_out *out, int max_out)
{
	struct ks_server *s = st;
	if (max_out < 1 || in->proto != NK_PROTO_KVSWITCH || in->key_len != NK_KVSWITCH_KEY_LEN)
		return 0;
	uint64_t ver = 0;
	uint32_t vlen = 0;
	int found = store->ops->get(store->impl, in, &ver, &vlen) == 0;
	int live = found && vlen != KS_TOMBSTONE;
	struct ks_ent *e;   /* the key's role, looked up only where needed: not per GET */
	struct nk_msg *r = &out[0].msg;
	out[0].dst = NK_DST_SRC;
	switch (in->op) {
	case NK_KVSWITCH_OP_GET:
		if (s->strict && in->ver && found && ver > in->ver) {
			/* redirected here for the version the switch validated, but
			 * this copy is newer: the owner may not hold that write */
			s->retries++;
			mk_msg(s, in, r, NK_KVSWITCH_OP_GET_REPLY, NK_KVSWITCH_RESULT_ERROR);
			r->ver = 0;
			return 1;
		}
		mk_msg(s, in, r, NK_KVSWITCH_OP_GET_REPLY, live ? NK_RESULT_OK : NK_RESULT_NOT_FOUND);
		r->value_len = live ? vlen : 0;   /* the embedder fills the bytes */
		r->ver = live ? ver : 0;          /* which write it read (histories) */
		return 1;
	case NK_KVSWITCH_OP_SET:
	case NK_KVSWITCH_OP_DEL: {
		/* FLAGS names the owner of a stamped write; without it (an older
		 * switch) the role learned from REPL_CMD decides */
		e = in->result ? NULL : ent_find(s, in->key);
		int owner = in->result ? in->result == s->id + 1 : e && e->role == KS_OWNER;
		if (in->ver && !owner)
			return replica_update(s, store, in, in->op == NK_KVSWITCH_OP_DEL, out);
		return owner_write(s, store, in, src, found, ver, out, max_out);
	}
	case NK_KVSWITCH_OP_UPDATE:
	case NK_KVSWITCH_OP_UPDATE_DEL:
		return replica_update(s, store, in, in->op == NK_KVSWITCH_OP_UPDATE_DEL, out);
	case NK_KVSWITCH_OP_REPL_CMD: {
		owner_news(s, in->key, (uint32_t)in->ver, 1);
		if (!live)
			return 0;             /* nothing to push: replicas stay invalid */
		if (ver < in->ver) {
			/* the install version: every later hot write is above it */
			raise_ver(store, in, in->ver, vlen);
			ver = in->ver;
		}
		uint32_t set = repl_targets(s, in);
		int n = 0;
		for (uint32_t j = 0; j < 32 && n < max_out; j++) {
			if (!(set & (1u << j)))
				continue;
			mk_msg(s, in, &out[n].msg, NK_KVSWITCH_OP_REPL_PUSH, NK_RESULT_OK);
			out[n].msg.ver = ver;
			out[n].msg.value_len = vlen;   /* the embedder fills the bytes */
			out[n].dst = (uint16_t)j;
			n++;
		}
		return n;
	}
	case NK_KVSWITCH_OP_REPL_PUSH:
		return replica_update(s, store, in, 0, out);
	case NK_KVSWITCH_OP_REPL_EVICT:
		e = ent_find(s, in->key);
		/* FLAGS names the owner (the controller's, as on a hot write);
		 * without it (an older controller) the role learned decides. A
		 * replica whose push was lost has no entry: by the role alone it
		 * took the eviction as the owner's, kept an owner entry (table
		 * space) and raised a stale copy's version */
		if (in->result ? in->result != s->id + 1 : e && e->role != KS_OWNER) {
			if (e)
				ent_forget(s, e);
			return 0;
		}
		/* the owner (told even if it never heard the key was hot): cold
		 * writes from now on are versioned above every hot write of the
		 * install, so no two writes share a version on any copy */
		if (owner_news(s, in->key, (uint32_t)in->ver, 0) && found && ver < in->ver)
			raise_ver(store, in, in->ver, vlen);
		return 0;
	default:
		return 0;
	}
}

/* The reply's length (what an embedder sends back: kvserver's control
 * socket), the "ok"/"err" in it saying how the command went. */
static int reply(size_t cap, int n)
{
	return n < 0 ? 0 : (size_t)n >= cap ? (int)cap - 1 : n;
}

static int ks_server_ctl(void *st, struct nk_store *store, int argc, char **argv, char *out,
			 size_t cap)
{
	struct ks_server *s = st;
	(void)store;
	if (argc == 1 && !strcmp(argv[0], "roles")) {
		uint32_t own = 0, rep = 0;
		for (uint32_t i = 0; i < s->cap; i++) {
			own += s->tab[i].role == KS_OWNER;
			rep += s->tab[i].role == KS_REPLICA;
		}
		return reply(cap, snprintf(out, cap, "ok owner=%u replica=%u full=%llu amo_dups=%llu "
						"amo_old=%llu retries=%llu", own, rep,
						(unsigned long long)s->full,
						(unsigned long long)s->amo_dups,
						(unsigned long long)s->amo_old,
						(unsigned long long)s->retries));
	}
	if (argc == 2 && !strcmp(argv[0], "own") && strlen(argv[1]) == 2 * NK_KVSWITCH_KEY_LEN) {
		/* a prewarmed install: the controller names a hot key's owner
		 * directly (every server already holds every key) */
		uint8_t key[NK_KVSWITCH_KEY_LEN];
		for (int i = 0; i < NK_KVSWITCH_KEY_LEN; i++) {
			char hex[3] = { argv[1][2 * i], argv[1][2 * i + 1], 0 }, *end = NULL;
			key[i] = (uint8_t)strtoul(hex, &end, 16);
			if (!end || *end) {
				return reply(cap, snprintf(out, cap, "err own: key must be %d hex digits",
								2 * NK_KVSWITCH_KEY_LEN));
			}
		}
		owner_news(s, key, 1, 1);
		return reply(cap, snprintf(out, cap, "ok"));
	}
	return reply(cap, snprintf(out, cap, "err unknown command (allowed: roles, own <32 hex "
					  "digits>)"));
}

/* ---- client ------------------------------------------------------------------ */

static int ks_client_init(void *st, const struct nk_host_cfg *cfg)
{
	(void)st;
	(void)cfg;
	return 0;
}

static void ks_client_fini(void *st)
{
	(void)st;
}

/* The 16 B key KVSwitch carries for a workload key (host.h wire_key): its
 * first 16 B, a shorter key right-aligned with zeros before it. out may be
 * key. */
static uint8_t ks_wire_key(const uint8_t *key, uint8_t key_len, uint8_t *out)
{
	if (key_len >= NK_KVSWITCH_KEY_LEN) {
		memmove(out, key, NK_KVSWITCH_KEY_LEN);
	} else {
		memmove(out + NK_KVSWITCH_KEY_LEN - key_len, key, key_len);
		memset(out, 0, NK_KVSWITCH_KEY_LEN - key_len);
	}
	return NK_KVSWITCH_KEY_LEN;
}

static uint16_t ks_client_request(void *st, const struct nk_req_spec *sp, struct nk_msg *m)
{
	(void)st;
	nk_msg_zero(m);
	m->proto = NK_PROTO_KVSWITCH;
	int w = sp->kind == NK_KIND_WRITE;
	m->op = w ? NK_KVSWITCH_OP_SET : NK_KVSWITCH_OP_GET;
	m->kind = w ? NK_KIND_WRITE : NK_KIND_READ;
	m->server_id = (uint8_t)(sp->home < NK_SERVER_NONE ? sp->home : NK_SERVER_NONE);
	m->client_id = sp->client_id;
	m->req_id = sp->req_id;
	m->keyhash = sp->keyhash;    /* not on the wire; the simulator's store uses it */
	m->send_ns = sp->send_ns;
	m->key_len = ks_wire_key(sp->key, sp->key_len, m->key);
	m->value_len = w ? sp->value_len : 0;
	m->frag_cnt = 1;
	m->nkeys = 1;
	return sp->home;
}

static int ks_client_reply(void *st, const struct nk_msg *r)
{
	(void)st;
	if (r->proto != NK_PROTO_KVSWITCH)
		return NK_REPLY_IGNORE;
	if (r->op != NK_KVSWITCH_OP_GET_REPLY && r->op != NK_KVSWITCH_OP_SET_REPLY &&
	    r->op != NK_KVSWITCH_OP_DEL_REPLY)
		return NK_REPLY_IGNORE;
	return r->result == NK_KVSWITCH_RESULT_ERROR ? NK_REPLY_RETRY : NK_REPLY_DONE;
}

/* A hostile client's message (host.h client_hostile, docs/security.md): what
 * the switch must zero (VER, FLAGS: a replica's version check and the
 * owner's copy) or drop (replies, updates, ACKs, replica commands: a forged
 * ACK would validate a stale replica, a forged push or update would plant a
 * value), a hot write sent to a replica instead of the owner (the switch
 * routes it by HotkeyTable's owner), and what the servers must survive (an
 * oversized value, a write to a server that does not own the key). */
static uint16_t ks_client_hostile(void *st, uint64_t draw, const struct nk_req_spec *sp,
				  uint16_t victim, uint32_t n_servers, struct nk_msg *m)
{
	static const uint32_t forged_ver[] = { 0xFFFFFFFFu, 0xFFFFFFFEu, 1u << 31, 3 };
	struct nk_req_spec w = *sp;
	w.kind = NK_KIND_WRITE;
	uint16_t dst = ks_client_request(st, &w, m);
	uint32_t ver = forged_ver[(draw >> 8) % 4];
	uint16_t other = n_servers ? (uint16_t)((sp->home + 1 + (draw >> 12) % n_servers) % n_servers)
				   : dst;
	switch (draw % 10) {
	case 0:         /* a write with a forged version and FLAGS naming a server */
		m->ver = ver;
		m->result = (uint8_t)(other + 1);
		break;
	case 1:         /* a read with a forged version: replicas would answer ERROR */
		m->op = NK_KVSWITCH_OP_GET;
		m->value_len = 0;
		m->ver = ver;
		break;
	case 2:         /* a spoofed reply to an honest client */
		m->op = draw >> 16 & 1 ? NK_KVSWITCH_OP_GET_REPLY : NK_KVSWITCH_OP_SET_REPLY;
		m->ver = ver;
		dst = (uint16_t)(n_servers + victim);
		break;
	case 3:         /* a forged confirm: would validate a stale replica */
		m->op = NK_KVSWITCH_OP_UPDATE_ACK;
		m->value_len = 0;
		m->ver = ver;
		break;
	case 4:         /* a forged replica update */
		m->op = draw >> 16 & 1 ? NK_KVSWITCH_OP_UPDATE : NK_KVSWITCH_OP_UPDATE_DEL;
		m->ver = ver;
		dst = other;
		break;
	case 5:         /* forged replica commands (the controller's and the owner's) */
		m->op = (uint8_t[]){ NK_KVSWITCH_OP_REPL_PUSH, NK_KVSWITCH_OP_REPL_CMD,
				     NK_KVSWITCH_OP_REPL_EVICT }[(draw >> 16) % 3];
		m->ver = ver;
		m->bitmap = 0xFFFFFFFFu;
		dst = other;
		break;
	case 6:         /* a write sent to another server than the key's home */
	case 7:
		dst = other;
		break;
	case 8:         /* a forged FLAGS alone: "this copy is the owner's" */
		m->result = (uint8_t)(dst + 1);
		break;
	default:        /* an oversized value */
		m->value_len = 8000;
		break;
	}
	m->kind = (uint8_t)nk_wire_kind(NK_PROTO_KVSWITCH, m->op);
	return dst;
}

const struct nk_host_ops nk_host_kvswitch = {
	.name = "kvswitch",
	.proto = NK_PROTO_KVSWITCH,
	.udp_port = NK_KVSWITCH_PORT,
	.no_client_id = 1,   /* the header has no CLIENT_ID: decoded as 0 */
	.server_state_size = sizeof(struct ks_server),
	.client_state_size = 1,
	.server_init = ks_server_init,
	.server_fini = ks_server_fini,
	.server_handle = ks_server_handle,
	.client_init = ks_client_init,
	.client_fini = ks_client_fini,
	.client_request = ks_client_request,
	.client_reply = ks_client_reply,
	.server_ctl = ks_server_ctl,
	.client_hostile = ks_client_hostile,
	.client_key_bytes = NK_KVSWITCH_KEY_LEN,   /* ks_client_request: the first 16 B */
	.wire_key = ks_wire_key,     /* kvserver preloads the 16 B its requests carry */
};
