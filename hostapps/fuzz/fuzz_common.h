/*
 * fuzz_common.h - the libFuzzer harness every protocol shares: arbitrary
 * bytes -> the protocol's wire decoder -> (when it decodes) the switch
 * pipeline's per-packet function, the servers' and the clients' host logic
 * (a client first makes a request, or a multiget where the protocol has
 * them, under the message's request id, so that replies find one).
 *
 * Each protocol's fuzz_<p>.c defines FUZZ_PROTOCOL (its name in the pipeline
 * and host registries) and fuzz_setup() (control-plane state that lets
 * packets reach deeper paths, e.g. Pegasus' replicated keys), then includes
 * this file. Built with clang -fsanitize=fuzzer,address,undefined (just
 * fuzz); the crash oracle is the sanitizers plus the codec's own rules:
 *  - decode never reads outside the input (ASan: the input is an exact-size
 *    heap copy);
 *  - whenever decode succeeds, encode(decode(b)) == b (wire.h);
 *  - every message the host logic emits encodes;
 *  - pipeline actions name an existing port;
 *  - the protocol's own invariant on the pipeline's state after each packet,
 *    where fuzz_<p>.c defines one (FUZZ_HAS_CHECK: fuzz_check()).
 *
 * Input: byte 0 = flags (bit 0: run fuzz_setup; bit 1: FUZZ_PARAMS_ALT,
 * the protocol's other mode; bit 2: FUZZ_PARAMS_ALT2, a third mode, and
 * bit 3: FUZZ_PARAMS_ALT3, a fourth, where the harness defines them),
 * byte 1 = sender node,
 * then up to FUZZ_MAX_PKTS packets, each a 2-byte big-endian length and
 * that many bytes. State starts fresh for every input, so every finding
 * replays from its input file alone.
 */
#ifndef NETKV_FUZZ_COMMON_H
#define NETKV_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/host.h"
#include "netkv/pipeline.h"
#include "netkv/wire.h"

#define FUZZ_SERVERS 4
#define FUZZ_CLIENTS 2
#define FUZZ_NODES (FUZZ_SERVERS + FUZZ_CLIENTS)
#define FUZZ_CPU_PORT FUZZ_NODES
#define FUZZ_RECIRC_PORT (FUZZ_NODES + 1)
#define FUZZ_MAX_PKTS 8
#define FUZZ_STORE 64
#define FUZZ_BUF 4096

#ifndef FUZZ_PARAMS
#define FUZZ_PARAMS NULL
#endif
#ifndef FUZZ_PARAMS_ALT
#define FUZZ_PARAMS_ALT FUZZ_PARAMS
#endif

/* a tiny store: key bytes -> (ver, value_len), no allocation */
struct fstore {
	int n;
	struct {
		uint8_t key_len, key[NK_MAX_KEY_LEN];
		uint64_t ver;
		uint32_t vlen;
	} e[FUZZ_STORE];
};

static int fs_find(struct fstore *t, const struct nk_msg *m)
{
	for (int i = 0; i < t->n; i++)
		if (t->e[i].key_len == m->key_len && !memcmp(t->e[i].key, m->key, m->key_len))
			return i;
	return -1;
}

static int fs_get(void *impl, const struct nk_msg *req, uint64_t *ver, uint32_t *vlen)
{
	struct fstore *t = impl;
	int i = fs_find(t, req);
	if (i < 0)
		return 1;
	*ver = t->e[i].ver;
	*vlen = t->e[i].vlen;
	return 0;
}

static int fs_put(void *impl, const struct nk_msg *req, uint64_t ver, uint32_t vlen)
{
	struct fstore *t = impl;
	if (req->key_len > NK_MAX_KEY_LEN)
		abort(); /* the host logic handed the store an impossible key */
	int i = fs_find(t, req);
	if (i < 0) {
		if (t->n >= FUZZ_STORE)
			return -1;
		i = t->n++;
		t->e[i].key_len = req->key_len;
		memcpy(t->e[i].key, req->key, req->key_len);
	}
	t->e[i].ver = ver;
	t->e[i].vlen = vlen;
	return 0;
}

/* value bytes (kvserver's store has them): a pattern of the value's length */
static const uint8_t *fs_value(void *impl, const struct nk_msg *req, uint32_t *vlen)
{
	static uint8_t bytes[65536];
	uint64_t ver;
	if (fs_get(impl, req, &ver, vlen) || *vlen > sizeof bytes)
		return NULL;
	for (uint32_t j = 0; j < *vlen; j++)
		bytes[j] = (uint8_t)(j * 7);
	return bytes;
}

static const struct nk_store_ops fs_ops = {.get = fs_get, .put = fs_put, .value = fs_value};

struct rack {
	const struct nk_pipeline_ops *pipe;
	const struct nk_host_ops *host;
	void *pstate;
	void *srv[FUZZ_SERVERS], *cli[FUZZ_CLIENTS];
	struct fstore store[FUZZ_SERVERS];
	struct nk_store st[FUZZ_SERVERS];
	uint16_t node_port[FUZZ_NODES];
	uint64_t now;
};

/* per protocol (fuzz_<p>.c): control-plane state for message m */
static void fuzz_setup(struct rack *r, const struct nk_msg *m);
#ifdef FUZZ_HAS_CHECK
/* per protocol, optional: abort unless the pipeline's state after message
 * m (as it came in, before the switch rewrote it) keeps the invariant */
static void fuzz_check(struct rack *r, const struct nk_msg *m);
#endif

static void must_encode(const struct nk_msg *m)
{
	static uint8_t buf[FUZZ_BUF];
	if (m->value_len > 2048)
		return; /* the frame layer refuses these; encode would only say ESPACE */
	int rc = nk_wire_encode(m, buf, sizeof buf);
	if (rc < 0) {
		fprintf(stderr, "fuzz: a message that does not encode (error %d): proto %u op %u "
				"flags %u result %u key_len %u value_len %u ver %llu\n", rc, m->proto,
			m->op, m->flags, m->result, m->key_len, m->value_len,
			(unsigned long long)m->ver);
		abort();
	}
}

static void deliver_to_client(struct rack *r, uint16_t client, const struct nk_msg *m)
{
	if (client < FUZZ_CLIENTS)
		(void)r->host->client_reply(r->cli[client], m);
}

static void deliver_to_server(struct rack *r, uint16_t server, const struct nk_msg *m,
			      uint16_t src, int depth)
{
	static struct nk_host_out out[NK_HOST_MAX_OUT];
	if (server >= FUZZ_SERVERS || depth > 2)
		return;
	int n = r->host->server_handle(r->srv[server], &r->st[server], m, src, out,
				       NK_HOST_MAX_OUT);
	if (n < 0 || n > NK_HOST_MAX_OUT)
		return;
	struct nk_host_out copy[NK_HOST_MAX_OUT];
	memcpy(copy, out, (size_t)n * sizeof(copy[0]));
	for (int i = 0; i < n; i++) {
		must_encode(&copy[i].msg);
		uint16_t dst = copy[i].dst == NK_DST_SRC ? src : copy[i].dst;
		if (dst < FUZZ_SERVERS)
			deliver_to_server(r, dst, &copy[i].msg, server, depth + 1);
		else if (dst < FUZZ_NODES)
			deliver_to_client(r, (uint16_t)(dst - FUZZ_SERVERS), &copy[i].msg);
	}
}

/* The states' memory (slot 0 the switch's, then the servers', the
 * clients'), allocated once and kept from one input to the next: a calloc
 * per input (StarCache's clients take 576 KiB each, NetLR's servers 441
 * KiB) came from fresh pages under ASan, whose quarantine holds freed
 * chunks back, and faulting those in was most of an execution. Zeroed
 * before each init, as calloc did: every input starts from the same state. */
static void *rack_mem(unsigned slot, size_t size)
{
	static void *mem[1 + FUZZ_SERVERS + FUZZ_CLIENTS];
	if (!size)
		size = 1;
	if (!mem[slot] && !(mem[slot] = malloc(size)))
		abort();
	memset(mem[slot], 0, size);
	return mem[slot];
}

static int rack_init(struct rack *r, const char *params)
{
	memset(r, 0, sizeof(*r));
	r->pipe = nk_pipeline_find(FUZZ_PROTOCOL);
	r->host = nk_host_find(FUZZ_PROTOCOL);
	if (!r->pipe || !r->host)
		abort();
	for (uint16_t i = 0; i < FUZZ_NODES; i++)
		r->node_port[i] = i;
	struct nk_pipeline_cfg pc = {FUZZ_SERVERS, FUZZ_CLIENTS, FUZZ_NODES, r->node_port,
				     FUZZ_CPU_PORT, FUZZ_RECIRC_PORT, 1, params};
	r->pstate = rack_mem(0, r->pipe->state_size);
	if (r->pipe->init(r->pstate, &pc))
		abort();
	for (uint32_t i = 0; i < FUZZ_SERVERS; i++) {
		struct nk_host_cfg hc = {.n_servers = FUZZ_SERVERS, .n_clients = FUZZ_CLIENTS, .id = i,
					 .seed = 1, .params = params};
		r->srv[i] = rack_mem(1 + i, r->host->server_state_size);
		if (r->host->server_init(r->srv[i], &hc))
			abort();
		r->st[i] = (struct nk_store){&fs_ops, &r->store[i]};
	}
	for (uint32_t i = 0; i < FUZZ_CLIENTS; i++) {
		struct nk_host_cfg hc = {.n_servers = FUZZ_SERVERS, .n_clients = FUZZ_CLIENTS, .id = i,
					 .seed = 1, .params = params};
		r->cli[i] = rack_mem(1 + FUZZ_SERVERS + i, r->host->client_state_size);
		if (r->host->client_init(r->cli[i], &hc))
			abort();
	}
	return 0;
}

static void rack_fini(struct rack *r)
{
	for (uint32_t i = 0; i < FUZZ_SERVERS; i++)
		r->host->server_fini(r->srv[i]);
	for (uint32_t i = 0; i < FUZZ_CLIENTS; i++)
		r->host->client_fini(r->cli[i]);
	r->pipe->fini(r->pstate);
}

/* a client issues a request, so that its reply matching has something to match */
static void client_requests(struct rack *r, const struct nk_msg *m)
{
	struct nk_req_spec spec = {.kind = (uint8_t)(m->req_id & 1), .key_len = m->key_len,
				   .client_id = (uint16_t)FUZZ_SERVERS, .home = (uint16_t)(m->keyhash % FUZZ_SERVERS),
				   .req_id = m->req_id, .keyhash = m->keyhash,
				   .value_len = m->value_len > 1024 ? 1024 : m->value_len,
				   .send_ns = m->send_ns, .key = m->key};
	if (spec.key_len == 0 || spec.key_len > NK_MAX_KEY_LEN)
		return;
	struct nk_msg out;
	memset(&out, 0, sizeof(out));
	(void)r->host->client_request(r->cli[0], &spec, &out);
	must_encode(&out);
}

/* ... and, where the host logic multigets (NetMC), a multiget under the
 * message's request id, so that the client's aggregation has a request for
 * the MGET_REPLYs that follow (or this one) to fill: 1-8 distinct keys
 * made from the message's (first) key, its last byte the key's index, on servers
 * from its keyhash. Every packet it sends must encode. */
static void client_multigets(struct rack *r, const struct nk_msg *m)
{
	static struct nk_host_out out[NK_HOST_MAX_REQ_OUT];
	static uint8_t keys[8][NK_MAX_KEY_LEN], buf[8 * NK_MAX_KEY_LEN];
	struct nk_req_key k[8];
	unsigned n = 1 + (m->req_id >> 1) % 8;
	/* a one-key message's key, or a multi-key one's first slot */
	uint8_t kl = m->key_len ? m->key_len : m->key_slot_len;
	const uint8_t *key = m->key_len ? m->key : m->items;
	if (!r->host->client_multiget || !kl || kl > NK_MAX_KEY_LEN || !key ||
	    (!m->key_len && m->items_len < kl))
		return;
	for (unsigned j = 0; j < n; j++) {
		memcpy(keys[j], key, kl);
		keys[j][kl - 1] = (uint8_t)j;
		k[j] = (struct nk_req_key){.key = keys[j], .keyhash = m->keyhash + j,
					   .value_len = 256,
					   .home = (uint16_t)((m->keyhash + j) % FUZZ_SERVERS)};
	}
	struct nk_req_spec spec = {.kind = NK_KIND_MULTIGET, .key_len = kl,
				   .client_id = (uint16_t)FUZZ_SERVERS, .home = k[0].home,
				   .req_id = m->req_id, .keyhash = k[0].keyhash,
				   .send_ns = m->send_ns, .key = keys[0], .nkeys = (uint8_t)n,
				   .keys = k, .buf = buf, .buf_len = sizeof buf};
	int np = r->host->client_multiget(r->cli[0], &spec, out, NK_HOST_MAX_REQ_OUT);
	if (np < 0 || np > NK_HOST_MAX_REQ_OUT) {
		fprintf(stderr, "fuzz: client_multiget returned %d (0..%d)\n", np,
			NK_HOST_MAX_REQ_OUT);
		abort();
	}
	for (int i = 0; i < np; i++)
		must_encode(&out[i].msg);
}

static void one_packet(struct rack *r, const uint8_t *data, size_t len, uint16_t src,
		       int setup)
{
	/* an exact-size copy, so that ASan sees any read past the end */
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf)
		return;
	memcpy(buf, data, len);
	struct nk_msg m;
	int rc = nk_wire_decode(r->pipe->proto, buf, len, &m);
	if (rc < 0) {
		free(buf);
		return;
	}
	static uint8_t again[FUZZ_BUF];
	int n = nk_wire_encode(&m, again, sizeof again);
	if (n != (int)len || memcmp(again, buf, len)) {
		fprintf(stderr, "fuzz: decode succeeded but encode(decode(b)) != b (%d vs %zu bytes)\n",
			n, len);
		abort();
	}
	if (setup)
		fuzz_setup(r, &m);
	if (m.kind == NK_KIND_READ || m.kind == NK_KIND_WRITE)
		client_requests(r, &m);
	if (m.kind == NK_KIND_MULTIGET || m.kind == NK_KIND_MULTIGET_REPLY)
		client_multigets(r, &m);

	/* the switch */
	struct nk_msg sw = m;
	struct nk_pkt_meta meta = {.now_ns = r->now += 1000, .ingress_port = r->node_port[src],
				   .src = src, .dst = (uint16_t)(m.server_id < FUZZ_SERVERS ? m.server_id
						: FUZZ_SERVERS + m.client_id % FUZZ_CLIENTS),
				   .wire_len = (uint16_t)(len + 42), .from_cpu = 0, .recirculated = 0};
	struct nk_actions act;
	memset(&act, 0, sizeof(act));
	r->pipe->process(r->pstate, &sw, &meta, &act);
	if (act.fwd == NK_FWD_PORT && act.port > FUZZ_RECIRC_PORT) {
		fprintf(stderr, "fuzz: pipeline forwards to port %u (ports 0..%u)\n", act.port,
			FUZZ_RECIRC_PORT);
		abort();
	}
#ifdef FUZZ_HAS_CHECK
	fuzz_check(r, &m);
#endif
	if (act.fwd != NK_FWD_DROP)
		must_encode(&sw);
	if (act.fwd == NK_FWD_PORT && act.port < FUZZ_SERVERS)
		deliver_to_server(r, act.port, &sw, src, 0);
	else if (act.fwd == NK_FWD_PORT && act.port < FUZZ_NODES)
		deliver_to_client(r, (uint16_t)(act.port - FUZZ_SERVERS), &sw);

	/* the hosts, straight from the wire as well (a packet the switch let by
	 * or a sender on the hosts' own segment) */
	deliver_to_server(r, (uint16_t)(m.keyhash % FUZZ_SERVERS), &m, src, 0);
	deliver_to_client(r, (uint16_t)(m.client_id % FUZZ_CLIENTS), &m);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	struct rack r;
#if defined(FUZZ_PARAMS_ALT3)
	rack_init(&r, data[0] & 8 ? FUZZ_PARAMS_ALT3 : data[0] & 4 ? FUZZ_PARAMS_ALT2
		  : data[0] & 2 ? FUZZ_PARAMS_ALT : FUZZ_PARAMS);
#elif defined(FUZZ_PARAMS_ALT2)
	rack_init(&r, data[0] & 4 ? FUZZ_PARAMS_ALT2 : data[0] & 2 ? FUZZ_PARAMS_ALT : FUZZ_PARAMS);
#else
	rack_init(&r, data[0] & 2 ? FUZZ_PARAMS_ALT : FUZZ_PARAMS);
#endif
	int setup = data[0] & 1;
	uint16_t src = (uint16_t)(data[1] % FUZZ_NODES);
	size_t off = 2;
	for (int k = 0; k < FUZZ_MAX_PKTS && off + 2 <= size; k++) {
		size_t len = ((size_t)data[off] << 8) | data[off + 1];
		off += 2;
		if (len > size - off)
			len = size - off;
		one_packet(&r, data + off, len, src, setup);
		off += len;
		src = (uint16_t)((src + 1) % FUZZ_NODES);
	}
	rack_fini(&r);
	return 0;
}

#endif /* NETKV_FUZZ_COMMON_H */
