/*
 * netlr_hermes.c - Hermes (Katsarou et al., ASPLOS 2020) over UDP, NetLR's
 * third baseline (replication=hermes, digest §7, docs/netlr.md), on NetLR's
 * wire and store. The switch only forwards.
 *
 * Any replica coordinates a write: the one the client sends it to.
 *   - WRITE (client): the key must be Valid here with no write of ours in
 *     flight, else the write stalls until it is, and then runs here as if
 *     it had just arrived (Hermes). The coordinator picks the timestamp
 *     (version + 1, its id), packed into the 32-bit seq as version << 8 |
 *     id so that timestamps compare as integers (preloaded keys are at 1);
 *     applies it, and sends INV with the value to every other replica.
 *   - INV: applied if its timestamp is newer than the stored one; the key
 *     turns Invalid; ACK to the coordinator either way.
 *   - ACK: once every other replica acked, the client gets its W_REPLY,
 *     and, unless a newer INV superseded the write meanwhile, the key turns
 *     Valid here and VAL goes to the other replicas.
 *   - VAL: the key turns Valid if the timestamp is still the newest seen.
 *   - READ (client): served locally when Valid, else stalled until Valid.
 * Stalled reads are answered when their key turns Valid, in arrival order
 * with the stalled writes, which then start. A write so started sends its
 * INVs with its own request's cookie: the simulator ties the version it
 * stores to that request (and routes its ACKs and W_REPLY with it).
 * Membership is static (every replica live); no replay of writes whose
 * coordinator fails, and no retransmission of INV/ACK/VAL: a lost message
 * leaves its key Invalid (its reads stall). Runs are loss-free.
 */
#include <string.h>

#include "netlr_hermes.h"

#include "netkv/bytes.h"
#include "netkv/wire.h"

enum { HM_CID_BITS = 8 };

void hm_init(struct hm_state *h, uint32_t id, uint32_t n_servers)
{
	memset(h, 0, sizeof(*h));
	h->id = id;
	h->n = n_servers;
}

static uint32_t hm_home(uint32_t oid)
{
	return (oid * 2654435761u) >> (32 - HM_KEY_BITS);
}

static struct hm_key *hm_find(struct hm_state *h, uint32_t oid)
{
	for (uint32_t i = hm_home(oid);; i = (i + 1) & (HM_KEYS - 1)) {
		if (!h->key[i].oid)
			return NULL;
		if (h->key[i].oid == oid)
			return &h->key[i];
	}
}

/* the key's cell, added if absent; NULL when the table is full */
static struct hm_key *hm_add(struct hm_state *h, uint32_t oid)
{
	uint32_t i = hm_home(oid);
	for (; h->key[i].oid; i = (i + 1) & (HM_KEYS - 1))
		if (h->key[i].oid == oid)
			return &h->key[i];
	if (h->keys >= HM_KEYS_MAX)
		return NULL;
	memset(&h->key[i], 0, sizeof(h->key[i]));
	h->key[i].oid = oid;
	h->keys++;
	return &h->key[i];
}

/* Drop k's cell once Valid with nothing of ours in flight (backward-shift
 * deletion keeps every probe chain unbroken); wakes the stalls. */
static void hm_settle(struct hm_state *h, struct hm_key *k)
{
	if (!k->invalid)
		h->ready = 1;
	if (k->invalid || k->pending)
		return;
	uint32_t i = (uint32_t)(k - h->key);
	for (uint32_t j = (i + 1) & (HM_KEYS - 1); h->key[j].oid; j = (j + 1) & (HM_KEYS - 1)) {
		uint32_t home = hm_home(h->key[j].oid);
		/* j's entry may fill the hole at i unless its home lies in (i, j] */
		int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (!stays) {
			h->key[i] = h->key[j];
			i = j;
		}
	}
	h->key[i].oid = 0;
	h->keys--;
}

static uint32_t oid_of(const struct nk_msg *m)
{
	return nk_get32(m->key);
}

void nl_out(uint32_t id, const struct nk_msg *in, struct nk_host_out *o, uint8_t op,
	    uint64_t ver, uint16_t dst)
{
	struct nk_msg *r = &o->msg;
	*r = *in;
	r->op = op;
	r->kind = (uint8_t)nk_wire_kind(NK_PROTO_NETLR, op);
	r->ver = ver;
	r->result = op == NK_NETLR_OP_NACK ? NK_RESULT_RETRY : NK_RESULT_OK;
	r->server_id = (uint8_t)id;
	r->value_len = op == NK_NETLR_OP_R_REPLY || op == NK_NETLR_OP_INV ? NK_NETLR_VALUE_LEN : 0;
	r->value = NULL;               /* the embedder fills the bytes from the store */
	o->dst = dst;
}

static void hm_msg(const struct hm_state *h, const struct nk_msg *in, struct nk_host_out *o,
		   uint8_t op, uint64_t ver, uint16_t dst)
{
	nl_out(h->id, in, o, op, ver, dst);
	o->msg.flags = 0;
	o->msg.epoch = 0;
}

/* one message to every other replica; returns how many */
static int hm_bcast(const struct hm_state *h, const struct nk_msg *in, struct nk_host_out *out,
		    uint8_t op, uint32_t ts)
{
	int k = 0;
	for (uint32_t r = 0; r < h->n; r++)
		if (r != h->id)
			hm_msg(h, in, &out[k++], op, ts, (uint16_t)r);
	return k;
}

static int hm_stall(struct hm_state *h, const struct nk_msg *in, uint16_t src)
{
	if (h->tail - h->head >= HM_STALLS)
		return -1;
	struct hm_stall *q = &h->stall[h->tail++ % HM_STALLS];
	q->send_ns = in->send_ns;
	q->cookie = in->cookie;
	q->oid = oid_of(in);
	q->keyhash = in->keyhash;
	q->req_id = in->req_id;
	q->src = src;
	q->client_id = in->client_id;
	q->op = in->op;
	q->used = 1;
	/* a write's value, to apply when it starts (the simulator's messages
	 * carry lengths only) */
	q->has_value = in->op == NK_NETLR_OP_WRITE && in->value && in->value_len == NK_NETLR_VALUE_LEN;
	if (q->has_value)
		memcpy(q->value, in->value, NK_NETLR_VALUE_LEN);
	h->stalled++;
	return 0;
}

static int hm_write(struct hm_state *h, struct nk_store *store, const struct nk_msg *in,
		    uint16_t src, int found, uint64_t stored, struct nk_host_out *out);

/* A stalled read's reply carries the bytes stored now: a stalled write to
 * its key may start later in the same drain, and the embedder would
 * otherwise send that write's bytes under the old version (a read that
 * returns a write the other replicas have not seen yet). */
static void hm_keep_value(struct hm_state *h, struct nk_store *store, const struct nk_msg *m,
			  int found, struct nk_host_out *o)
{
	uint32_t vlen = 0;
	const uint8_t *b = found && store->ops->value && h->nrval < NK_HOST_MAX_OUT
				   ? store->ops->value(store->impl, m, &vlen) : NULL;
	if (!b || vlen < NK_NETLR_VALUE_LEN)
		return;                 /* lengths only (the simulator): nothing to keep */
	uint8_t *kept = h->rval[h->nrval++];
	memcpy(kept, b, NK_NETLR_VALUE_LEN);
	o->msg.value = kept;
	o->own_value = 1;
}

/* Answer the stalled reads whose key is now Valid (R_REPLY) and start the
 * stalled writes whose key is Valid with nothing of ours in flight, in
 * arrival order, as far as out has room (a write needs n - 1). */
static int hm_drain(struct hm_state *h, struct nk_store *store, struct nk_host_out *out,
		    int max_out)
{
	int k = 0;
	h->ready = 0;
	for (uint32_t i = h->head; i != h->tail; i++) {
		struct hm_stall *q = &h->stall[i % HM_STALLS];
		if (!q->used)
			continue;
		const struct hm_key *c = hm_find(h, q->oid);
		int write = q->op == NK_NETLR_OP_WRITE;
		if (c && (c->invalid || write))
			continue;
		if (k + (int)h->n > max_out) {
			h->ready = 1;          /* the rest on the next message */
			break;
		}
		struct nk_msg m;
		memset(&m, 0, sizeof(m));
		m.proto = NK_PROTO_NETLR;
		m.op = q->op;
		m.key_len = NK_NETLR_OID_LEN;
		nk_put32(m.key, q->oid);
		m.keyhash = q->keyhash;
		m.req_id = q->req_id;
		m.client_id = q->client_id;
		m.send_ns = q->send_ns;
		m.cookie = q->cookie;  /* answers that request, not the one in hand */
		m.frag_cnt = 1;
		m.nkeys = 1;
		m.kind = (uint8_t)nk_wire_kind(NK_PROTO_NETLR, m.op);
		uint64_t ver = 0;
		uint32_t vlen = 0;
		int found = store->ops->get(store->impl, &m, &ver, &vlen) == 0;
		q->used = 0;
		if (write) {
			m.value_len = NK_NETLR_VALUE_LEN;
			m.value = q->has_value ? q->value : NULL;
			h->started++;
			k += hm_write(h, store, &m, q->src, found, ver, out + k);
			continue;
		}
		hm_msg(h, &m, &out[k], NK_NETLR_OP_R_REPLY, found ? ver : 0, q->src);
		if (!found)
			out[k].msg.result = NK_RESULT_NOT_FOUND;
		hm_keep_value(h, store, &m, found, &out[k]);
		k++;
	}
	while (h->head != h->tail && !h->stall[h->head % HM_STALLS].used)
		h->head++;
	return k;
}

static int hm_write(struct hm_state *h, struct nk_store *store, const struct nk_msg *in,
		    uint16_t src, int found, uint64_t stored, struct nk_host_out *out)
{
	uint32_t oid = oid_of(in);
	if (hm_find(h, oid)) {
		if (hm_stall(h, in, src) == 0)
			return 0;
		hm_msg(h, in, &out[0], NK_NETLR_OP_NACK, 0, NK_DST_SRC);
		return 1;
	}
	uint64_t version = (found ? stored : 0) >> HM_CID_BITS;
	uint32_t ts = version + 1 >= (UINT32_MAX >> HM_CID_BITS)
			      ? UINT32_MAX     /* the wire's 32-bit seq: saturate */
			      : (uint32_t)((version + 1) << HM_CID_BITS | h->id);
	struct hm_key *k = h->n > 1 ? hm_add(h, oid) : NULL;
	if ((h->n > 1 && !k) || store->ops->put(store->impl, in, ts, NK_NETLR_VALUE_LEN)) {
		h->full++;
		hm_msg(h, in, &out[0], NK_NETLR_OP_NACK, 0, src);   /* src: also when started stalled */
		return 1;
	}
	h->writes++;
	if (!k) {                       /* one replica: nothing to invalidate */
		h->commits++;
		hm_msg(h, in, &out[0], NK_NETLR_OP_W_REPLY, ts, src);
		return 1;
	}
	k->ts = k->own_ts = ts;
	k->acks = 0;
	k->req_id = in->req_id;
	k->client = src;
	k->invalid = 1;
	k->pending = 1;
	return hm_bcast(h, in, out, NK_NETLR_OP_INV, ts);
}

static int hm_inv(struct hm_state *h, struct nk_store *store, const struct nk_msg *in,
		  int found, uint64_t stored, struct nk_host_out *out)
{
	if (!found || in->ver > stored) {
		struct hm_key *k = hm_add(h, oid_of(in));
		if (!k) {               /* cannot mark it Invalid: no ACK */
			h->full++;
			return 0;
		}
		if (store->ops->put(store->impl, in, in->ver, NK_NETLR_VALUE_LEN))
			return 0;
		k->ts = (uint32_t)in->ver;
		k->invalid = 1;
	}
	hm_msg(h, in, &out[0], NK_NETLR_OP_ACK, in->ver, NK_DST_SRC);
	return 1;
}

static int hm_ack(struct hm_state *h, const struct nk_msg *in, uint16_t src,
		  struct nk_host_out *out)
{
	struct hm_key *k = hm_find(h, oid_of(in));
	if (!k || !k->pending || in->ver != k->own_ts) {
		h->stale_acks++;
		return 0;
	}
	k->acks |= 1u << src;
	uint32_t all = (h->n >= 32 ? UINT32_MAX : (1u << h->n) - 1) & ~(1u << h->id);
	if ((k->acks & all) != all)
		return 0;
	h->commits++;
	int n = 0;
	hm_msg(h, in, &out[n], NK_NETLR_OP_W_REPLY, k->own_ts, k->client);
	out[n++].msg.req_id = k->req_id;
	if (k->ts == k->own_ts) {       /* not superseded: the key is Valid */
		n += hm_bcast(h, in, out + n, NK_NETLR_OP_VAL, k->own_ts);
		k->invalid = 0;
	}
	k->pending = 0;
	k->own_ts = 0;
	hm_settle(h, k);
	return n;
}

static void hm_val(struct hm_state *h, const struct nk_msg *in)
{
	struct hm_key *k = hm_find(h, oid_of(in));
	if (!k || !k->invalid || k->ts != in->ver)
		return;                 /* a newer write's INV came in between */
	k->invalid = 0;
	hm_settle(h, k);
}

int hm_handle(struct hm_state *h, struct nk_store *store, const struct nk_msg *in, uint16_t src,
	      struct nk_host_out *out, int max_out)
{
	if (max_out < (int)h->n + 1)
		return 0;
	h->nrval = 0;
	uint64_t ver = 0;
	uint32_t vlen = 0;
	int found = store->ops->get(store->impl, in, &ver, &vlen) == 0;
	int replica = src < h->n && src != h->id;
	int client = src >= h->n && src != 0xFFFF;
	int n = 0;
	switch (in->op) {
	case NK_NETLR_OP_READ: {
		const struct hm_key *k = client ? hm_find(h, oid_of(in)) : NULL;
		if (k && k->invalid) {
			if (hm_stall(h, in, src) == 0)
				return 0;
			hm_msg(h, in, &out[0], NK_NETLR_OP_NACK, 0, NK_DST_SRC);
			return 1;
		}
		hm_msg(h, in, &out[0], NK_NETLR_OP_R_REPLY, found ? ver : 0, NK_DST_SRC);
		if (!found)
			out[0].msg.result = NK_RESULT_NOT_FOUND;
		return 1;
	}
	case NK_NETLR_OP_WRITE:
		if (!client)
			return 0;
		n = hm_write(h, store, in, src, found, ver, out);
		break;
	case NK_NETLR_OP_INV:
		if (!replica)
			return 0;
		n = hm_inv(h, store, in, found, ver, out);
		break;
	case NK_NETLR_OP_ACK:
		if (!replica)
			return 0;
		n = hm_ack(h, in, src, out);
		break;
	case NK_NETLR_OP_VAL:
		if (!replica)
			return 0;
		hm_val(h, in);
		break;
	default:
		return 0;
	}
	if (h->ready)
		n += hm_drain(h, store, out + n, max_out - n);
	return n;
}
