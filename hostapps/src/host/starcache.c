/*
 * starcache.c - StarCache host logic (docs/starcache.md, digest §5).
 *
 * Server: R_REQ/CRN_REQ -> R_REP with key and value (FLAG = packets in the
 * item, 1); W_REQ -> apply (stored version + 1), W_REP carrying the key,
 * and the new value when the switch marked the write cached (FLAG >= 1), so
 * the switch can put it into the loop; F_REQ from the controller -> F_REP
 * with key and value, back to the controller: at the switch it becomes the
 * key's cache packet (its HKEY computed from its key; FLAG 0 if the key is
 * not stored). A W_REQ whose HKEY is not its key's hash puts nothing into
 * the loop (the W_REP says RETRY and carries no value): a client cannot put
 * one key's value into another key's cache packet.
 * Popularity: every read served is counted in a count-min sketch; "topk"
 * (server_ctl) reports the hottest keys and starts again (digest §4).
 * Hostile client (client_hostile, docs/security.md): forged switch fields,
 * server- and controller-only ops, writes sent away from the key's home,
 * forged HKEYs, replays, oversized values.
 * Client: R_REQ/W_REQ with HKEY = MurmurHash3_x64_128(key); it remembers
 * the key of each outstanding SEQ, and when a read reply carries another key
 * (an HKEY collision, or a cache slot reused by another key) it asks again
 * with a correction request (CRN_REQ), which the switch passes to the
 * server; any resend of a read is one (an earlier attempt may still be
 * parked, its fragments of another version).
 * Multi-packet items (digest 8.7): a value that does not fit one packet
 * with its key (SC_ITEM_BYTES) leaves the server as FLAG fragments of
 * SC_ITEM_BYTES - key bytes each, FRAG = 0..FLAG-1; at the switch each
 * becomes a cache packet of its own. The client reassembles a read by FRAG;
 * a fragment that disagrees with the first on FLAG, or FLAG visits that
 * left a gap (a fragment lost in the loop: the head got another twice), make
 * it ask the server again (CRN_REQ).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/host.h"
#include "netkv/rng.h"
#include "netkv/valpat.h"
#include "netkv/wire.h"

#include "host_lazy.h"

#define SC_PENDING 4096      /* outstanding SEQs a client remembers (ring) */

/* ---- popularity: count-min sketch and top-k (digest §4) ------------------------ *
 * Every read that reaches the server (R_REQ, CRN_REQ) is counted in a
 * count-min sketch of SC_CMS_ROWS rows (the paper's 5 hash functions) and,
 * when its estimate beats the least of them, kept among the SC_TOPK
 * candidates; "topk" reports the candidates and zeroes both, as the paper's
 * servers do after each report. */
#define SC_CMS_ROWS 5
#define SC_CMS_WIDTH 8192        /* counters per row (a power of two) */
#define SC_TOPK 64               /* candidates a server reports */

struct sc_cand {
	uint32_t count;              /* the sketch's estimate when last seen */
	uint32_t keyhash;
	uint8_t key_len;
	uint8_t key[NK_MAX_KEY_LEN];
};

/* A multi-packet write being reassembled (our choice, docs/starcache.md
 * "Multi-packet items"): the client sends FLAG W_REQ fragments of one SEQ;
 * the server applies the write once all are in. SC_WSLOTS writes at a time
 * per server (with all live, an incomplete one gives way: wslot_giving_way;
 * its FRAG 0 is refused, the client sends the write again), each at most
 * SC_WRITE_MAX bytes, whose W_REP fragments fit NK_HOST_MAX_OUT. */
_Static_assert((SC_WRITE_MAX + SC_ITEM_BYTES - NK_MAX_KEY_LEN - 1) / (SC_ITEM_BYTES - NK_MAX_KEY_LEN) <=
	       NK_HOST_MAX_OUT, "a reassembled write's reply must fit the outputs");
#define SC_WSLOTS 16       /* SC_WRITE_MAX: netkv/constants.h */
/* a client holding this many slots gives way first (wslot_giving_way) */
#define SC_WSLOTS_FAIR (SC_WSLOTS / 4)

struct sc_wslot {
	uint8_t live, n, got_n, attach, has_bytes;
	uint8_t got[32];             /* one bit per FRAG */
	uint16_t src;
	uint32_t req_id;
	uint64_t hkey[2];
	uint64_t age;                /* when it began (the server's write count) */
	uint32_t len;                /* the value's length, once its last fragment came */
};

struct sc_server {
	uint32_t id;
	uint32_t cms[SC_CMS_ROWS][SC_CMS_WIDTH];
	struct sc_cand cand[SC_TOPK];
	uint32_t n_cand;
	struct sc_wslot w[SC_WSLOTS];
	uint64_t w_count;
	uint64_t w_evicted;          /* live slots that gave way ("wslots") */
	uint8_t *w_bufs;             /* SC_WSLOTS x SC_WRITE_MAX (kvserver: the values'
				      * bytes), allocated at the first fragment with bytes */
};

static uint32_t cms_add(struct sc_server *s, uint32_t keyhash)
{
	uint32_t est = UINT32_MAX;
	for (uint32_t r = 0; r < SC_CMS_ROWS; r++) {
		uint32_t *c = &s->cms[r][nk_mix64(keyhash + r * 0x9E3779B97F4A7C15ull) &
					  (SC_CMS_WIDTH - 1)];
		if (*c < UINT32_MAX)
			(*c)++;
		if (*c < est)
			est = *c;
	}
	return est;
}

static void count_read(struct sc_server *s, const struct nk_msg *in)
{
	uint32_t est = cms_add(s, in->keyhash);
	uint32_t low = 0;
	for (uint32_t i = 0; i < s->n_cand; i++) {
		struct sc_cand *c = &s->cand[i];
		if (c->keyhash == in->keyhash && c->key_len == in->key_len &&
		    !memcmp(c->key, in->key, in->key_len)) {
			c->count = est;
			return;
		}
		if (c->count < s->cand[low].count)
			low = i;
	}
	if (s->n_cand < SC_TOPK)
		low = s->n_cand++;
	else if (est <= s->cand[low].count)
		return;
	struct sc_cand *c = &s->cand[low];
	c->count = est;
	c->keyhash = in->keyhash;
	c->key_len = in->key_len;
	memcpy(c->key, in->key, in->key_len);
}

static int cand_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct sc_cand *)a)->count, y = ((const struct sc_cand *)b)->count;
	return x < y ? 1 : x > y ? -1 : 0;
}

static size_t cand_len(const struct sc_cand *c)
{
	return 1 + 2u * c->key_len + 1 + (size_t)snprintf(NULL, 0, "%u", c->count);
}

/* "topk": "ok n=<N> <hex key>:<count> ..." hottest first, as many as fit in
 * cap; then the sketch and the candidates start again from zero. */
static int report_topk(struct sc_server *s, char *out, size_t cap)
{
	qsort(s->cand, s->n_cand, sizeof(s->cand[0]), cand_cmp);
	uint32_t k = 0;
	size_t len = (size_t)snprintf(NULL, 0, "ok n=%u", s->n_cand);
	while (k < s->n_cand && len + cand_len(&s->cand[k]) < cap)
		len += cand_len(&s->cand[k++]);
	size_t n = (size_t)snprintf(out, cap, "ok n=%u", k);
	for (uint32_t i = 0; i < k; i++) {
		const struct sc_cand *c = &s->cand[i];
		out[n++] = ' ';
		for (uint32_t b = 0; b < c->key_len; b++)
			n += (size_t)snprintf(out + n, cap - n, "%02x", c->key[b]);
		n += (size_t)snprintf(out + n, cap - n, ":%u", c->count);
	}
	memset(s->cms, 0, sizeof(s->cms));
	s->n_cand = 0;
	return (int)n;
}

struct sc_pending {
	uint32_t req_id;
	uint8_t live, correct, key_len;
	uint8_t key[NK_MAX_KEY_LEN];
	/* reassembly of a multi-packet read: FLAG of the first fragment, the
	 * fragments that came (one bit per FRAG), distinct ones, all arrivals */
	uint8_t frag_cnt, frags_got, arrived;
	uint8_t got[32];
	/* the read's value as its pieces came (kvclient's bytes check,
	 * netkv/valpat.h): id from FRAG 0, sum over (position, byte), bytes;
	 * done_vid: the id once complete, NK_VALUE_CORRUPT if the bytes are
	 * not that value's at their places */
	uint64_t vid, sum, done_vid;
	uint32_t bytes;
	uint8_t has_bytes;
};

struct sc_client {
	struct sc_pending p[SC_PENDING];
};

static int sc_server_init(void *st, const struct nk_host_cfg *cfg)
{
	struct sc_server *s = st;
	memset(s, 0, sizeof(*s));
	s->id = cfg->id;
	return 0;
}

static void sc_server_fini(void *st)
{
	struct sc_server *s = st;
	free(s->w_bufs);
	s->w_bufs = NULL;
}

const void *nk_starcache_server_w_bufs(const void *server)
{
	return ((const struct sc_server *)server)->w_bufs;
}

static void sc_fini(void *st)
{
	(void)st;
}

static int hkey_matches(const struct nk_msg *m)
{
	uint64_t h[2];
	nk_starcache_hkey(m->key, m->key_len, h);
	return h[0] == m->hkey[0] && h[1] == m->hkey[1];
}

static void mk_reply(const struct sc_server *s, const struct nk_msg *in, struct nk_msg *r,
		     uint8_t op, uint8_t result)
{
	*r = *in;
	r->op = op;
	r->kind = (uint8_t)nk_wire_kind(NK_PROTO_STARCACHE, op);
	r->result = result;
	r->server_id = (uint8_t)s->id;   /* PARID */
	r->flags = 0;                    /* CACHED: served by a server */
	r->frag_cnt = 1;
	r->frag_idx = 0;
	r->value_len = 0;
	r->value = NULL;
}

/* Packets an item of vlen value bytes takes with its key (digest 8.7). */
static uint32_t sc_item_frags(uint32_t klen, uint32_t vlen)
{
	uint32_t chunk = SC_ITEM_BYTES - klen;   /* klen <= NK_MAX_KEY_LEN */
	return klen + vlen <= SC_ITEM_BYTES ? 1 : (vlen + chunk - 1) / chunk;
}

/* out[0] carries a whole item: split it into FLAG fragments out[0..FLAG-1]
 * (the embedder fills NULL value bytes). 0 when they do not fit. */
static int fragment(struct nk_host_out *out, int max_out)
{
	const struct nk_msg *r = &out[0].msg;
	uint32_t n = sc_item_frags(r->key_len, r->value_len);
	if (n == 1)
		return 1;
	if (n > UINT8_MAX || n > (uint32_t)max_out)
		return 0;
	uint32_t chunk = SC_ITEM_BYTES - r->key_len, total = r->value_len;
	for (uint32_t i = n; i-- > 0;) {
		out[i] = out[0];
		struct nk_msg *f = &out[i].msg;
		f->frag_cnt = (uint8_t)n;
		f->frag_idx = (uint8_t)i;
		f->value_len = i + 1 < n ? chunk : total - i * chunk;
		f->value = out[0].msg.value ? out[0].msg.value + (size_t)i * chunk : NULL;
		out[i].value_off = i * chunk;   /* where the embedder takes NULL bytes from */
	}
	return (int)n;
}

/* All SC_WSLOTS slots live: the one that gives way to a new write of src.
 * A client holding SC_WSLOTS_FAIR or more gives way first (src's own
 * oldest if src is one, else the oldest of such clients' slots), so a
 * client sending FRAG > 0 fragments of writes it never completes recycles
 * its own slots, not the others'; below that the oldest slot, whoever's,
 * as lost fragments' slots age out. An honest client sends a write's
 * fragments back to back (sc_client_split), so it holds about one slot per
 * write in flight to this server: a quarter of the slots leaves it room
 * and keeps 12 from one client's flood (a flood from 5 hosts or more,
 * each under the bound, still evicts the oldest: docs/starcache.md). */
static struct sc_wslot *wslot_giving_way(struct sc_server *s, uint16_t src)
{
	struct sc_wslot *v = NULL;
	int v_rank = -1;
	for (uint32_t k = 0; k < SC_WSLOTS; k++) {
		struct sc_wslot *c = &s->w[k];
		uint32_t held = 0;
		for (uint32_t j = 0; j < SC_WSLOTS; j++)
			held += s->w[j].src == c->src;
		int rank = held < SC_WSLOTS_FAIR ? 0 : c->src == src ? 2 : 1;
		if (rank > v_rank || (rank == v_rank && c->age < v->age)) {
			v = c;
			v_rank = rank;
		}
	}
	return v;
}

/* A fragment of a multi-packet write into its slot. 1 when the write is
 * complete: *q becomes the whole write (its value the slot's bytes, or
 * NULL where none moved; FLAG 1 if the switch marked its FRAG 0 CACHED).
 * -1 for a FRAG 0 that does not complete its write: the client sends FRAG
 * 0 last (sc_client_split), so the rest was lost, reordered or never sent
 * (a hostile client); the write is refused and its slot freed (a FRAG 0
 * that finds no slot of its write takes none; one that finds no memory for
 * the buffers leaves the slot as it is). */
static int write_fragment(struct sc_server *s, uint16_t src, struct nk_msg *q)
{
	uint32_t chunk = SC_ITEM_BYTES - q->key_len, n = q->frag_cnt, i = q->frag_idx;
	/* every fragment but the last is a full chunk (the item's layout) */
	if (i + 1 < n ? q->value_len != chunk : !q->value_len || q->value_len > chunk)
		return i ? 0 : -1;
	if ((uint64_t)i * chunk + q->value_len > SC_WRITE_MAX)
		return i ? 0 : -1;
	/* 512 KiB of buffers only where bytes move (kvserver; the simulator
	 * sends none): an init that mapped them cost every server set-up, most
	 * of a fuzzer's execution under ASan. Without memory a FRAG > 0 is
	 * lost and a FRAG 0 refused (RETRY), its write's slot kept: the
	 * client sends the write again. */
	if (q->value && !s->w_bufs && !(s->w_bufs = calloc(SC_WSLOTS, SC_WRITE_MAX)))
		return i ? 0 : -1;
	struct sc_wslot *w = NULL, *spare = NULL;
	for (uint32_t k = 0; k < SC_WSLOTS && !w; k++) {
		struct sc_wslot *c = &s->w[k];
		if (c->live && c->src == src && c->req_id == q->req_id &&
		    c->hkey[0] == q->hkey[0] && c->hkey[1] == q->hkey[1])
			w = c;
		else if (!c->live && !spare)
			spare = c;
	}
	if (w && w->n != n) {
		w->live = 0;           /* another shape under this SEQ: it starts
					* over in this slot */
		spare = w;
		w = NULL;
	}
	if (!w && !i)
		return -1;             /* a FRAG 0 alone completes nothing: refused
					* before it takes a slot (one would give
					* way: an honest partial write evicted by
					* a lone FRAG 0) */
	if (!w) {
		if (!spare) {
			spare = wslot_giving_way(s, src);
			s->w_evicted++;
		}
		w = spare;
		memset(w, 0, sizeof(*w));
		w->live = 1;
		w->n = (uint8_t)n;
		w->src = src;
		w->req_id = q->req_id;
		w->hkey[0] = q->hkey[0];
		w->hkey[1] = q->hkey[1];
		w->age = s->w_count++;
		w->has_bytes = 1;
	}
	uint8_t bit = (uint8_t)(1u << (i & 7));
	if (w->got[i >> 3] & bit)
		return 0;              /* a duplicate (FRAG > 0: FRAG 0 ends the slot) */
	w->got[i >> 3] |= bit;
	w->got_n++;
	if (!i)
		w->attach = q->flags;  /* CACHED: the switch counted this write */
	if (i + 1 == n)
		w->len = i * chunk + q->value_len;
	uint8_t *buf = s->w_bufs ? s->w_bufs + (size_t)(w - s->w) * SC_WRITE_MAX : NULL;
	if (q->value)
		memcpy(buf + (size_t)i * chunk, q->value, q->value_len);
	else
		w->has_bytes = 0;
	if (w->got_n < n) {
		if (i)
			return 0;
		w->live = 0;
		return -1;
	}
	w->live = 0;
	q->frag_cnt = w->attach ? 1 : 0;
	q->frag_idx = 0;
	q->flags = 0;
	q->value_len = w->len;
	q->value = w->has_bytes ? buf : NULL;
	return 1;
}

static int sc_server_handle(void *st, struct nk_store *store, const struct nk_msg *msg,
			    uint16_t src, struct nk_host_out *out, int max_out)
{
	struct sc_server *s = st;
	if (max_out < 1 || msg->proto != NK_PROTO_STARCACHE)
		return 0;
	/* the wire carries no keyhash: the store's key hash is the key's
	 * (the workload's keyhash: the whole key is on the wire) */
	struct nk_msg q = *msg;
	q.keyhash = nk_wire_store_keyhash(msg);
	int refused = 0;
	if (q.op == NK_STARCACHE_OP_W_REQ && q.frag_cnt >= 2) {
		int rc = write_fragment(s, src, &q);
		if (!rc)
			return 0;          /* a multi-packet write: not all of it yet */
		refused = rc < 0;
	}
	const struct nk_msg *in = &q;
	uint64_t ver = 0;
	uint32_t vlen = 0;
	int found = store->ops->get(store->impl, in, &ver, &vlen) == 0;
	struct nk_msg *r = &out[0].msg;
	out[0].dst = NK_DST_SRC;
	if (refused) {
		/* a FRAG 0 without the rest of its write: not applied. The
		 * switch counted it (CACHED): the reply says RETRY (the client
		 * sends the write again) and carries the key's stored value,
		 * which revalidates the key like a write that changed nothing,
		 * so a write never completed keeps the key INVALID for one
		 * round trip, not until stuck_ms (docs/starcache.md) */
		int counted = q.flags != 0;
		mk_reply(s, in, r, NK_STARCACHE_OP_W_REP, NK_RESULT_RETRY);
		r->ver = ver;
		r->frag_cnt = counted ? 1 : 0;
		if (counted && found && hkey_matches(in))
			r->value_len = vlen;   /* the embedder fills the stored bytes */
		return fragment(out, max_out);
	}
	if (in->op == NK_STARCACHE_OP_R_REQ || in->op == NK_STARCACHE_OP_CRN_REQ)
		count_read(s, in);
	switch (in->op) {
	case NK_STARCACHE_OP_R_REQ:
	case NK_STARCACHE_OP_CRN_REQ:
	case NK_STARCACHE_OP_F_REQ:
		mk_reply(s, in, r,
			 in->op == NK_STARCACHE_OP_F_REQ ? NK_STARCACHE_OP_F_REP
							 : NK_STARCACHE_OP_R_REP,
			 found ? NK_RESULT_OK : NK_RESULT_NOT_FOUND);
		r->ver = ver;
		r->value_len = found ? vlen : 0;   /* the embedder fills the bytes */
		/* an F_REP echoes its F_REQ's LAT (send_ns, mk_reply): the
		 * switch's stamp, the key's write count when the fetch passed;
		 * the switch takes the F_REP only if no write was counted since */
		if (in->op == NK_STARCACHE_OP_F_REQ) {
			/* the cache packet's HKEY is its key's, whatever the
			 * request said */
			nk_starcache_hkey(in->key, in->key_len, r->hkey);
			if (!found)
				r->frag_cnt = 0;   /* nothing to put into the loop */
		}
		return fragment(out, max_out);
	case NK_STARCACHE_OP_W_REQ: {
		uint64_t nv = nk_ver_after(found, ver);
		store->ops->put(store->impl, in, nv, in->value_len);
		mk_reply(s, in, r, NK_STARCACHE_OP_W_REP, NK_RESULT_OK);
		r->ver = nv;
		r->frag_cnt = in->frag_cnt ? 1 : 0;   /* the switch counted it */
		if (in->frag_cnt && hkey_matches(in)) {
			r->value_len = in->value_len;  /* cached: the new value rides along */
			r->value = in->value;
		} else if (in->frag_cnt) {
			r->result = NK_RESULT_RETRY;   /* forged HKEY: nothing for the loop */
		}
		return fragment(out, max_out);
	}
	default:
		return 0;
	}
}

static int sc_server_ctl(void *st, struct nk_store *store, int argc, char **argv, char *out,
			 size_t cap)
{
	(void)store;
	if (!cap)
		return 0;
	const struct sc_server *s = st;
	int n;
	if (argc == 1 && !strcmp(argv[0], "topk"))
		return report_topk(st, out, cap);
	if (argc == 1 && !strcmp(argv[0], "wslots")) {
		/* the write reassembly: slots live now, live ones given way */
		uint32_t live = 0;
		for (uint32_t k = 0; k < SC_WSLOTS; k++)
			live += s->w[k].live;
		n = snprintf(out, cap, "ok live=%u evicted=%llu", live,
			     (unsigned long long)s->w_evicted);
	} else {
		n = snprintf(out, cap, "err unknown command (allowed: topk, wslots)");
	}
	return n < 0 ? 0 : (size_t)n >= cap ? (int)cap - 1 : n;
}

static int sc_client_init(void *st, const struct nk_host_cfg *cfg)
{
	(void)cfg;
	memset(st, 0, sizeof(struct sc_client));
	return 0;
}

/* A write of a multi-packet item goes as its fragments (our choice: the
 * paper fragments only what servers send), FLAG and FRAG set as in a
 * reply, FRAG 0 last; the switch counts its FRAG 0. */
static int sc_client_split(void *st, const struct nk_msg *req, uint16_t dst,
			   struct nk_host_out *out, int max_out)
{
	(void)st;
	if (max_out < 1)
		return 0;
	memset(&out[0], 0, sizeof(out[0]));
	out[0].msg = *req;
	out[0].dst = dst;
	if (req->op != NK_STARCACHE_OP_W_REQ)
		return 1;
	if (req->value_len > SC_WRITE_MAX)
		return 0;
	int n = fragment(out, max_out);
	if (n > 1) {
		/* FRAG 0 last: the server takes a FRAG 0 without the rest as
		 * a write never completed and refuses it at once */
		struct nk_host_out f0 = out[0];
		memmove(&out[0], &out[1], (size_t)(n - 1) * sizeof(out[0]));
		out[n - 1] = f0;
	}
	return n;
}

static uint16_t sc_client_request(void *st, const struct nk_req_spec *sp, struct nk_msg *m)
{
	struct sc_client *c = st;
	struct sc_pending *p = &c->p[sp->req_id % SC_PENDING];
	int w = sp->kind == NK_KIND_WRITE;
	/* a resend of a read (after RETRY or a timeout) asks the server: the
	 * first attempt may still be parked, and its cache-served fragments,
	 * of another version of the item after a write, would mix with the
	 * new attempt's (cache-served replies are ignored from then on) */
	int correct = p->live && p->req_id == sp->req_id && (p->correct || !w);
	if (correct)
		p->correct = 1;
	if (!(p->live && p->req_id == sp->req_id)) {
		p->req_id = sp->req_id;
		p->live = 1;
		p->correct = 0;
	}
	p->frag_cnt = p->frags_got = p->arrived = 0;   /* a resend reassembles anew */
	p->vid = p->sum = p->done_vid = 0;
	p->bytes = 0;
	p->has_bytes = 0;
	memset(p->got, 0, sizeof(p->got));
	p->key_len = sp->key_len < NK_MAX_KEY_LEN ? sp->key_len : NK_MAX_KEY_LEN;
	memcpy(p->key, sp->key, p->key_len);

	nk_msg_zero(m);
	m->proto = NK_PROTO_STARCACHE;
	m->op = w ? NK_STARCACHE_OP_W_REQ
		  : correct ? NK_STARCACHE_OP_CRN_REQ : NK_STARCACHE_OP_R_REQ;
	m->kind = w ? NK_KIND_WRITE : NK_KIND_READ;
	m->server_id = (uint8_t)(sp->home < NK_SERVER_NONE ? sp->home : NK_SERVER_NONE);
	m->client_id = sp->client_id;
	m->req_id = sp->req_id;
	m->keyhash = sp->keyhash;    /* not on the wire; the simulator's store uses it */
	m->send_ns = sp->send_ns;
	m->key_len = p->key_len;
	memcpy(m->key, sp->key, m->key_len);
	nk_starcache_hkey(m->key, m->key_len, m->hkey);
	m->value_len = w ? sp->value_len : 0;
	m->nkeys = 1;
	return sp->home;
}

/* One distinct piece of a read's value, at its place in the item
 * (FRAG x (SC_ITEM_BYTES - key)); the simulator moves no bytes. */
static void add_piece(struct sc_pending *p, const struct nk_msg *r)
{
	if (!r->value || !r->value_len)
		return;
	uint32_t off = (uint32_t)r->frag_idx * (SC_ITEM_BYTES - r->key_len);
	if (r->frag_idx == 0 && r->value_len >= 8)
		p->vid = nk_get64(r->value);
	p->sum += nk_valpat_sum(r->value, r->value_len, off);
	p->bytes += r->value_len;
	p->has_bytes = 1;
}

static int sc_client_reply(void *st, const struct nk_msg *r)
{
	struct sc_client *c = st;
	if (r->proto != NK_PROTO_STARCACHE)
		return NK_REPLY_IGNORE;
	if (r->op != NK_STARCACHE_OP_R_REP && r->op != NK_STARCACHE_OP_W_REP)
		return NK_REPLY_IGNORE;
	struct sc_pending *p = &c->p[r->req_id % SC_PENDING];
	if (!p->live || p->req_id != r->req_id)
		return NK_REPLY_DONE;     /* forgotten (ring wrapped): nothing to compare */
	if (r->op == NK_STARCACHE_OP_W_REP && r->result == NK_RESULT_RETRY)
		/* a write the server refused (a multi-packet write whose FRAG 0
		 * came without the rest): send it again; its reply's later
		 * fragments say nothing more */
		return r->frag_idx ? NK_REPLY_IGNORE : NK_REPLY_RETRY;
	if (r->op == NK_STARCACHE_OP_R_REP && p->correct && r->flags)
		/* the correction asked the server: a cache packet answering the
		 * earlier attempt may be of another version of the item, and
		 * its fragment would be mixed with the server's (a write
		 * between: Mininet, tests/test_mininet_starcache.py) */
		return NK_REPLY_IGNORE;
	if (r->op == NK_STARCACHE_OP_R_REP &&
	    (r->key_len != p->key_len || memcmp(r->key, p->key, p->key_len) ||
	     r->result == NK_RESULT_RETRY)) {
		/* another key's value, or the switch's word that the item changed
		 * while its fragments answered us: ask the server */
		p->correct = 1;
		return NK_REPLY_RETRY;
	}
	uint8_t n = r->frag_cnt ? r->frag_cnt : 1;
	if (r->op == NK_STARCACHE_OP_R_REP && (n > 1 || p->frag_cnt)) {
		if (p->frag_cnt && n != p->frag_cnt) {
			/* not a fragment of the item the first one belongs to
			 * (the item changed size, or a forged reply): start over
			 * at the server */
			p->correct = 1;
			return NK_REPLY_RETRY;
		}
		p->frag_cnt = n;
		uint8_t bit = (uint8_t)(1u << (r->frag_idx & 7));
		if (!(p->got[r->frag_idx >> 3] & bit)) {
			p->got[r->frag_idx >> 3] |= bit;
			p->frags_got++;
			add_piece(p, r);
		}
		p->arrived++;
		if (p->frags_got < n) {
			/* FLAG visits of the head came and one fragment twice: the
			 * missing one is not looping; the server has the item */
			if (p->arrived >= n) {
				p->correct = 1;
				return NK_REPLY_RETRY;
			}
			return NK_REPLY_IGNORE;
		}
	}
	if (r->op == NK_STARCACHE_OP_R_REP) {
		if (n == 1)
			add_piece(p, r);
		p->done_vid = !p->has_bytes ? 0
			      : p->sum == nk_valpat_expected(p->vid, p->bytes) ? p->vid
										: NK_VALUE_CORRUPT;
	}
	p->live = 0;
	return NK_REPLY_DONE;
}

static uint64_t sc_read_value_id(void *st, const struct nk_msg *r)
{
	const struct sc_client *c = st;
	const struct sc_pending *p = &c->p[r->req_id % SC_PENDING];
	return p->req_id == r->req_id ? p->done_vid : NK_VALUE_CORRUPT;
}

/* A hostile client's message (host.h client_hostile, docs/security.md):
 * requests carrying the switch's fields (FLAG, FRAG, CACHED: the switch
 * overwrites and counts them), server- and controller-only ops (a forged
 * R_REP, W_REP or F_REP would enter the loop and answer other clients; an
 * F_REQ would make a server launch a cache packet), a write of a cached key
 * sent to another server than its home (the switch sends it home: another
 * server's W_REP would put a value the home never stored into the loop), a
 * write whose HKEY is not its key's (the server puts nothing into the loop),
 * a replayed request id, an oversized value, a multi-packet write's FRAG 0
 * alone (the rest never sent). */
static uint16_t sc_client_hostile(void *st, uint64_t draw, const struct nk_req_spec *sp,
				  uint16_t victim, uint32_t n_servers, struct nk_msg *m)
{
	struct nk_req_spec w = *sp;
	w.kind = NK_KIND_WRITE;
	uint16_t dst = sc_client_request(st, &w, m);
	uint16_t other = n_servers > 1 ? (uint16_t)((sp->home + 1 + (draw >> 16) % (n_servers - 1)) %
						    n_servers)
				       : dst;
	uint8_t forged = (uint8_t)(1 + (draw >> 8) % 255);
	switch (draw % 10) {
	case 0:         /* a write with the switch's FLAG ("cached: attach the value"), FRAG, CACHED */
		if (draw >> 40 & 1) {
			/* or a well-formed multi-packet write's FRAG 0 alone, the
			 * rest never sent: the switch counts the write
			 * (docs/starcache.md "Multi-packet items") */
			m->frag_cnt = 2;
			m->frag_idx = 0;
			m->value_len = SC_ITEM_BYTES - m->key_len;
			break;
		}
		m->frag_cnt = forged;
		m->frag_idx = (uint8_t)((draw >> 24) % forged);   /* < FLAG: encodable */
		m->flags = 1;
		break;
	case 1:         /* a read claiming to be a cache packet's answer */
		m->op = NK_STARCACHE_OP_R_REQ;
		m->value_len = 0;
		m->flags = 1;
		m->frag_cnt = forged;
		break;
	case 2:         /* a spoofed reply to an honest client, as if served from the loop */
		m->op = NK_STARCACHE_OP_R_REP;
		m->flags = 1;
		m->frag_cnt = 1;
		m->server_id = NK_SERVER_NONE;
		dst = (uint16_t)(n_servers + victim);
		break;
	case 3:         /* a forged write reply with a value: would revalidate the key
			 * and put the value into the loop */
		m->op = NK_STARCACHE_OP_W_REP;
		m->frag_cnt = 1;
		m->value_len = 7;   /* a length no honest write has */
		dst = draw >> 32 & 1 ? (uint16_t)(n_servers + victim) : dst;
		break;
	case 4:         /* a forged fetch reply: a cache packet */
		m->op = NK_STARCACHE_OP_F_REP;
		m->frag_cnt = 1;
		m->value_len = 7;
		break;
	case 5:         /* a fetch request: the controller's */
		m->op = NK_STARCACHE_OP_F_REQ;
		m->value_len = 0;
		break;
	case 6:         /* a write sent to another server than the key's home */
		dst = other;
		break;
	case 7:         /* a write of another key under this key's HKEY ('!' is no
			 * workload key's byte: the keys are hex) */
		m->key[0] = '!';
		break;
	case 8:         /* a replay of a recent request id, as a read */
		m->op = draw >> 32 & 1 ? NK_STARCACHE_OP_R_REQ : NK_STARCACHE_OP_CRN_REQ;
		m->value_len = 0;
		break;
	default:        /* an oversized value */
		m->value_len = 8000;
		break;
	}
	m->kind = (uint8_t)nk_wire_kind(NK_PROTO_STARCACHE, m->op);
	return dst;
}

const struct nk_host_ops nk_host_starcache = {
	.name = "starcache",
	.proto = NK_PROTO_STARCACHE,
	.udp_port = NK_STARCACHE_PORT,
	.no_client_id = 1,   /* the header has no CLIENT_ID: decoded as 0 */
	.server_state_size = sizeof(struct sc_server),
	.client_state_size = sizeof(struct sc_client),
	.server_init = sc_server_init,
	.server_fini = sc_server_fini,
	.server_handle = sc_server_handle,
	.server_ctl = sc_server_ctl,
	.client_init = sc_client_init,
	.client_fini = sc_fini,
	.client_request = sc_client_request,
	.client_reply = sc_client_reply,
	.client_split = sc_client_split,
	.read_value_id = sc_read_value_id,
	.client_hostile = sc_client_hostile,
};
