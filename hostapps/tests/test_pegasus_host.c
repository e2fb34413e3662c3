/*
 * test_pegasus_host.c - Pegasus host logic (hostapps/src/host/pegasus.c),
 * packet-in/packet-out, then end to end with the switch pipeline.
 *
 * Unit part: versioned store (newer only; stale writes acked with their
 * version), reply fields, RC_REQ/RC_ACK, write fan-out (multicast copies,
 * each answered; MULTI + RC_REQ for AMO), VWRITE + VIRT + RETRY (never for a
 * multicast copy), hash-collision re-forwarding with BYPASS (only from the
 * client its CLIENT_ID names), the AMO
 * client table, GC and the control commands, the client.
 *
 * End-to-end part: a small rack in the test (the pegasus pipeline, 4 servers
 * with in-test stores, 3 clients; the switch's multicast groups are those the
 * controller installs) where packets are delivered in random order and
 * sometimes duplicated, while the test plays the controller (add key,
 * fan-out, VWRITE, draining + removal). Checked throughout: I1, I2 (every
 * rset member stores >= ver_completed when a READ is forwarded), I5 (stored
 * versions never decrease) and the version-based history check of digest §6
 * (a)-(c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/host.h"
#include "netkv/pipeline.h"
#include "netkv/rng.h"
#include "netkv/wire.h"
#include "../src/host/pegasus_host.h"

#include "expect.h"

/* ---- an in-test store: key bytes -> (ver, value_len); checks I5 ----------- */

#define STORE_MAX 64

struct tstore {
	int n;
	struct {
		uint8_t key_len;
		uint8_t key[NK_MAX_KEY_LEN];
		uint64_t ver;
		uint32_t value_len;
	} e[STORE_MAX];
	int i5_violations;
};

static int ts_find(struct tstore *t, const struct nk_msg *m)
{
	for (int i = 0; i < t->n; i++)
		if (t->e[i].key_len == m->key_len && !memcmp(t->e[i].key, m->key, m->key_len))
			return i;
	return -1;
}

static int ts_get(void *impl, const struct nk_msg *req, uint64_t *ver, uint32_t *vlen)
{
	struct tstore *t = impl;
	int i = ts_find(t, req);
	if (i < 0)
		return 1;
	*ver = t->e[i].ver;
	*vlen = t->e[i].value_len;
	return 0;
}

static int ts_put(void *impl, const struct nk_msg *req, uint64_t ver, uint32_t vlen)
{
	struct tstore *t = impl;
	int i = ts_find(t, req);
	if (i < 0) {
		if (t->n >= STORE_MAX)
			return -1;
		i = t->n++;
		t->e[i].key_len = req->key_len;
		memcpy(t->e[i].key, req->key, req->key_len);
	} else if (ver < t->e[i].ver ||
		   (ver == t->e[i].ver && vlen != t->e[i].value_len && ver != UINT64_MAX)) {
		/* I5: never decrease; value changes only with ver (but for the
		 * saturated version 2^64-1: docs/security.md) */
		t->i5_violations++;
	}
	t->e[i].ver = ver;
	t->e[i].value_len = vlen;
	return 0;
}

/* every put, for the history check: (keyhash, version, value_len) */
#define APPLIED_MAX 65536
static struct {
	uint32_t keyhash;
	uint32_t tag;
	uint64_t ver;
} applied[APPLIED_MAX];
static int napplied;

static int ts_put_logged(void *impl, const struct nk_msg *req, uint64_t ver, uint32_t vlen)
{
	if (napplied < APPLIED_MAX) {
		applied[napplied].keyhash = nk_djb2(req->key, req->key_len);
		applied[napplied].ver = ver;
		applied[napplied].tag = vlen;
		napplied++;
	}
	return ts_put(impl, req, ver, vlen);
}

static const struct nk_store_ops ts_ops = {.get = ts_get, .put = ts_put_logged};

static void ts_preload(struct tstore *t, const char *key, uint64_t ver, uint32_t vlen)
{
	struct nk_msg m;
	memset(&m, 0, sizeof m);
	m.key_len = (uint8_t)strlen(key);
	memcpy(m.key, key, m.key_len);
	ts_put(t, &m, ver, vlen);
}

static uint64_t ts_ver(struct tstore *t, const char *key)
{
	struct nk_msg m;
	memset(&m, 0, sizeof m);
	m.key_len = (uint8_t)strlen(key);
	memcpy(m.key, key, m.key_len);
	uint64_t v = 0;
	uint32_t l;
	return ts_get(t, &m, &v, &l) ? 0 : v;
}

/* ---- helpers -------------------------------------------------------------- */

#define NS 4
#define NCL 3

static const struct nk_host_ops *H;

struct srv {
	void *st;
	struct tstore store;
	struct nk_store ns;
};

static void srv_init(struct srv *s, uint32_t id, const char *params)
{
	memset(&s->store, 0, sizeof s->store);
	s->st = calloc(1, H->server_state_size);
	struct nk_host_cfg cfg = { .n_servers = NS, .n_clients = NCL, .id = id, .seed = 1,
				   .params = params };
	if (H->server_init(s->st, &cfg)) {
		fprintf(stderr, "server_init failed\n");
		exit(2);
	}
	s->ns.ops = &ts_ops;
	s->ns.impl = &s->store;
}

static void srv_free(struct srv *s)
{
	H->server_fini(s->st);
	free(s->st);
}

static struct nk_msg mk(uint8_t op, const char *key, uint8_t home, uint64_t ver)
{
	struct nk_msg m;
	memset(&m, 0, sizeof m);
	m.proto = NK_PROTO_PEGASUS;
	m.op = op;
	m.kind = (uint8_t)nk_wire_kind(NK_PROTO_PEGASUS, op);
	m.key_len = (uint8_t)strlen(key);
	memcpy(m.key, key, m.key_len);
	m.keyhash = nk_djb2(m.key, m.key_len);
	m.server_id = home;
	m.ver = ver;
	m.client_id = 1;
	m.req_id = 1;
	m.frag_cnt = 1;
	return m;
}

static int handle(struct srv *s, const struct nk_msg *in, uint16_t src, struct nk_host_out *out)
{
	return H->server_handle(s->st, &s->ns, in, src, out, NK_HOST_MAX_OUT);
}

static int ctl(struct srv *s, const char *line, char *reply, size_t cap)
{
	char buf[512];
	char *argv[16];
	int argc = 0;
	snprintf(buf, sizeof buf, "%s", line);
	for (char *p = strtok(buf, " "); p && argc < 16; p = strtok(NULL, " "))
		argv[argc++] = p;
	return nk_pegasus_server_ctl(s->st, &s->ns, argc, argv, reply, cap);
}

static void hexkey(const char *key, char *out)
{
	for (size_t i = 0; key[i]; i++)
		sprintf(out + 2 * i, "%02x", (unsigned char)key[i]);
}

/* ---- unit tests ------------------------------------------------------------ */

static void test_versioned_store(void)
{
	current = "versioned store";
	struct srv s;
	srv_init(&s, 2, NULL);
	struct nk_host_out out[NK_HOST_MAX_OUT];
	/* missing key: NOT_FOUND, version 0 */
	struct nk_msg r = mk(NK_PEGASUS_OP_READ, "k1", 2, 0);
	r.send_ns = 123;
	EXPECT_EQ(handle(&s, &r, NS + 1, out), 1);
	EXPECT_EQ(out[0].msg.op, NK_PEGASUS_OP_READ_REPLY);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_NOT_FOUND);
	EXPECT_EQ(out[0].msg.ver, 0);
	EXPECT_EQ(out[0].dst, NK_DST_SRC);
	EXPECT_EQ(out[0].msg.server_id, 2);
	EXPECT_EQ(out[0].msg.bitmap, 4);
	EXPECT_EQ(out[0].msg.send_ns, 123);      /* echoed */
	/* write v5 applied */
	struct nk_msg w = mk(NK_PEGASUS_OP_WRITE, "k1", 2, 5);
	w.value_len = 100;
	EXPECT_EQ(handle(&s, &w, NS, out), 1);
	EXPECT_EQ(out[0].msg.op, NK_PEGASUS_OP_WRITE_REPLY);
	EXPECT_EQ(out[0].msg.kind, NK_KIND_WRITE_REPLY);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(out[0].msg.ver, 5);
	EXPECT_EQ(out[0].msg.value_len, 0);
	EXPECT_EQ(ts_ver(&s.store, "k1"), 5);
	/* stale v3: discarded, still OK with its own version */
	w = mk(NK_PEGASUS_OP_WRITE, "k1", 2, 3);
	w.value_len = 7;
	handle(&s, &w, NS, out);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(out[0].msg.ver, 3);
	EXPECT_EQ(ts_ver(&s.store, "k1"), 5);
	/* read: stored version and length */
	r = mk(NK_PEGASUS_OP_READ, "k1", 2, 0);
	handle(&s, &r, NS, out);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(out[0].msg.ver, 5);
	EXPECT_EQ(out[0].msg.value_len, 100);
	EXPECT(out[0].msg.value == NULL);        /* embedder fills the bytes */
	/* newer v9 applied */
	w = mk(NK_PEGASUS_OP_WRITE, "k1", 2, 9);
	w.value_len = 9;
	handle(&s, &w, NS, out);
	EXPECT_EQ(ts_ver(&s.store, "k1"), 9);
	/* DEL v10: tombstone, reads NOT_FOUND with the version */
	w = mk(NK_PEGASUS_OP_DEL, "k1", 2, 10);
	handle(&s, &w, NS, out);
	EXPECT_EQ(out[0].msg.ver, 10);
	handle(&s, &r, NS, out);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_NOT_FOUND);
	EXPECT_EQ(out[0].msg.ver, 10);
	/* unstamped write (no switch): stored + 1 */
	w = mk(NK_PEGASUS_OP_WRITE, "k1", 2, 0);
	handle(&s, &w, NS, out);
	EXPECT_EQ(out[0].msg.ver, 11);
	EXPECT_EQ(s.store.i5_violations, 0);
	/* load: requests in the previous 1 ms window of send_ns */
	for (int i = 0; i < 5; i++) {
		r = mk(NK_PEGASUS_OP_READ, "k1", 2, 0);
		r.send_ns = 2000000 + (uint64_t)i;
		handle(&s, &r, NS, out);
	}
	r.send_ns = 3000000;
	handle(&s, &r, NS, out);
	EXPECT_EQ(out[0].msg.load, 5);
	/* not ours */
	struct nk_msg other = r;
	other.proto = NK_PROTO_PLAIN;
	EXPECT_EQ(handle(&s, &other, NS, out), 0);
	srv_free(&s);
}

/* The issue's second sequence (#21): one WRITE with VER = 2^64-1 reaches a
 * server (no switch on the path), then unstamped writes. Before, stored + 1
 * wrapped to 0: each later write was judged stale, acked OK and discarded. */
static void test_version_top(void)
{
	current = "version at the top of its range";
	struct srv s;
	srv_init(&s, 1, NULL);
	struct nk_host_out out[NK_HOST_MAX_OUT];
	struct nk_msg w = mk(NK_PEGASUS_OP_WRITE, "top", 1, UINT64_MAX);
	w.value_len = 10;
	handle(&s, &w, NS, out);
	EXPECT_EQ(ts_ver(&s.store, "top"), UINT64_MAX);
	for (uint32_t len = 20; len <= 22; len++) {
		w = mk(NK_PEGASUS_OP_WRITE, "top", 1, 0);
		w.value_len = len;
		EXPECT_EQ(handle(&s, &w, NS, out), 1);
		EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
		EXPECT_EQ(out[0].msg.ver, UINT64_MAX);       /* saturated, never 0 */
		struct nk_msg r = mk(NK_PEGASUS_OP_READ, "top", 1, 0);
		handle(&s, &r, NS, out);
		EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
		EXPECT_EQ(out[0].msg.value_len, len);         /* applied: readable */
	}
	/* a DEL too */
	w = mk(NK_PEGASUS_OP_DEL, "top", 1, 0);
	handle(&s, &w, NS, out);
	struct nk_msg r = mk(NK_PEGASUS_OP_READ, "top", 1, 0);
	handle(&s, &r, NS, out);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_NOT_FOUND);
	EXPECT_EQ(s.store.i5_violations, 0);
	srv_free(&s);
	/* nk_ver_after saturates */
	EXPECT_EQ(nk_ver_after(0, 7), 1);
	EXPECT_EQ(nk_ver_after(1, 7), 8);
	EXPECT_EQ(nk_ver_after(1, UINT64_MAX), UINT64_MAX);
}

static void test_rc_and_fanout(void)
{
	current = "rc and fanout";
	struct srv s;
	srv_init(&s, 1, NULL);
	struct nk_host_out out[NK_HOST_MAX_OUT];
	/* RC_REQ newer: stored, RC_ACK to the switch with the version */
	struct nk_msg rc = mk(NK_PEGASUS_OP_RC_REQ, "hot", 0, 7);
	rc.value_len = 64;
	EXPECT_EQ(handle(&s, &rc, 0, out), 1);
	EXPECT_EQ(out[0].msg.op, NK_PEGASUS_OP_RC_ACK);
	EXPECT_EQ(out[0].msg.ver, 7);
	EXPECT_EQ(out[0].msg.server_id, 1);
	EXPECT_EQ(out[0].msg.bitmap, 2);
	EXPECT_EQ(out[0].msg.keyhash, nk_djb2((const uint8_t *)"hot", 3));
	EXPECT_EQ(ts_ver(&s.store, "hot"), 7);
	/* RC_REQ older: not stored; acked with the stored (newer) version */
	rc.ver = 4;
	handle(&s, &rc, 0, out);
	EXPECT_EQ(out[0].msg.ver, 7);
	EXPECT_EQ(ts_ver(&s.store, "hot"), 7);
	/* WRITE with MULTI: reply + RC_REQ to each listed server but self */
	struct nk_msg w = mk(NK_PEGASUS_OP_WRITE, "hot", 0, 12);
	static const uint8_t bytes[3] = { 1, 2, 3 };
	w.value = bytes;
	w.value_len = 3;
	w.flags = NK_PEGASUS_FLAG_MULTI;
	w.bitmap = (1u << 0) | (1u << 1) | (1u << 3);
	w.client_id = 2;
	int n = handle(&s, &w, NS + 2, out);
	EXPECT_EQ(n, 3);
	EXPECT_EQ(out[0].msg.op, NK_PEGASUS_OP_WRITE_REPLY);
	EXPECT_EQ(out[0].msg.ver, 12);
	EXPECT_EQ(out[0].msg.flags & NK_PEGASUS_FLAG_MULTI, 0);
	EXPECT_EQ(out[1].msg.op, NK_PEGASUS_OP_RC_REQ);
	EXPECT_EQ(out[1].dst, 0);
	EXPECT_EQ(out[2].dst, 3);
	EXPECT_EQ(out[2].msg.ver, 12);
	EXPECT_EQ(out[2].msg.value_len, 3);
	EXPECT(out[2].msg.value == bytes);
	EXPECT_EQ(out[2].msg.server_id, 0);      /* carries the home */
	/* the copy is applied at server 3 and joins by RC_ACK */
	struct srv s3;
	srv_init(&s3, 3, NULL);
	handle(&s3, &out[2].msg, 1, out);
	EXPECT_EQ(out[0].msg.op, NK_PEGASUS_OP_RC_ACK);
	EXPECT_EQ(out[0].msg.ver, 12);
	EXPECT_EQ(ts_ver(&s3.store, "hot"), 12);
	srv_free(&s3);
	srv_free(&s);
}

/* Multicast write fan-out: every target gets the same copy (bitmap = the
 * targets, no MULTI), applies it, and answers with its own WRITE-REPLY; no
 * RC_REQ. A copy older than a VIRT bump is acked OK (never RETRY). */
static void test_mcast_copies(void)
{
	current = "multicast copies";
	struct nk_host_out out[NK_HOST_MAX_OUT];
	struct srv s[3];
	struct nk_msg w = mk(NK_PEGASUS_OP_WRITE, "hot", 0, 12);
	static const uint8_t bytes[3] = { 1, 2, 3 };
	w.value = bytes;
	w.value_len = 3;
	w.bitmap = 0x7;          /* targets 0, 1, 2 */
	w.client_id = 2;
	for (uint32_t id = 0; id < 3; id++) {
		srv_init(&s[id], id, NULL);
		EXPECT_EQ(handle(&s[id], &w, NS + 2, out), 1);
		EXPECT_EQ(out[0].msg.op, NK_PEGASUS_OP_WRITE_REPLY);
		EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
		EXPECT_EQ(out[0].msg.ver, 12);
		EXPECT_EQ(out[0].msg.server_id, id);
		EXPECT_EQ(out[0].msg.bitmap, 1u << id);
		EXPECT_EQ(out[0].msg.req_id, w.req_id);
		EXPECT_EQ(out[0].dst, NK_DST_SRC);       /* to the client */
		EXPECT_EQ(ts_ver(&s[id].store, "hot"), 12);
	}
	/* server 0 gets a VWRITE bump to 20 (VIRT); an older unicast write is
	 * answered RETRY, an older multicast copy OK with its own version */
	struct nk_msg v = mk(NK_PEGASUS_OP_VWRITE, "hot", 0, 20);
	handle(&s[0], &v, NK_NODE_NONE, out);
	EXPECT_EQ(ts_ver(&s[0].store, "hot"), 20);
	struct nk_msg old = mk(NK_PEGASUS_OP_WRITE, "hot", 0, 15);
	old.value_len = 9;
	handle(&s[0], &old, NS, out);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_RETRY);
	old.bitmap = 0x3;
	handle(&s[0], &old, NS, out);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(out[0].msg.ver, 15);
	EXPECT_EQ(ts_ver(&s[0].store, "hot"), 20);    /* discarded */
	EXPECT_EQ(s[0].store.e[0].value_len, 3);
	/* the same copy at server 1 (no VIRT) is applied */
	handle(&s[1], &old, NS, out);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(ts_ver(&s[1].store, "hot"), 15);
	for (int id = 0; id < 3; id++)
		srv_free(&s[id]);
}

static void test_vwrite_retry(void)
{
	current = "vwrite and retry";
	struct srv s;
	srv_init(&s, 0, NULL);
	ts_preload(&s.store, "k", 3, 50);
	struct nk_host_out out[NK_HOST_MAX_OUT];
	char hk[64], reply[256];
	hexkey("k", hk);
	/* VWRITE V=8: version raised, value kept, VIRT, RC_REQ to 2 and 3 */
	struct nk_msg v = mk(NK_PEGASUS_OP_VWRITE, "k", 0, 8);
	v.bitmap = 0xD;    /* 0 (self), 2, 3 */
	int n = handle(&s, &v, NK_NODE_NONE, out);
	EXPECT_EQ(n, 3);
	EXPECT_EQ(out[0].msg.op, NK_PEGASUS_OP_WRITE_REPLY);
	EXPECT_EQ(out[0].msg.ver, 8);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(out[1].msg.op, NK_PEGASUS_OP_RC_REQ);
	EXPECT_EQ(out[1].dst, 2);
	EXPECT_EQ(out[1].msg.value_len, 50);     /* the kept value */
	EXPECT(out[1].msg.value == NULL);
	EXPECT_EQ(out[2].dst, 3);
	EXPECT_EQ(ts_ver(&s.store, "k"), 8);
	EXPECT_EQ(s.store.e[0].value_len, 50);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "virt %s", hk);
	ctl(&s, cmd, reply, sizeof reply);
	EXPECT(!strcmp(reply, "ok 1"));
	/* an older real write (stamped before the bump): RETRY, not OK; the
	 * reply carries the stored version; nothing stored */
	struct nk_msg w = mk(NK_PEGASUS_OP_WRITE, "k", 0, 6);
	w.value_len = 11;
	handle(&s, &w, NS, out);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_RETRY);
	EXPECT_EQ(out[0].msg.ver, 8);
	EXPECT_EQ(ts_ver(&s.store, "k"), 8);
	EXPECT_EQ(s.store.e[0].value_len, 50);
	/* the client retries; the switch restamps 9: applied, VIRT cleared */
	w.ver = 9;
	handle(&s, &w, NS, out);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(ts_ver(&s.store, "k"), 9);
	ctl(&s, cmd, reply, sizeof reply);
	EXPECT(!strcmp(reply, "ok 0"));
	/* now a stale write is OK again (plain discard) */
	w.ver = 7;
	handle(&s, &w, NS, out);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(out[0].msg.ver, 7);
	/* VWRITE older than stored: reply with the stored version, copies at it */
	v.ver = 5;
	n = handle(&s, &v, NK_NODE_NONE, out);
	EXPECT_EQ(out[0].msg.ver, 9);
	EXPECT_EQ(out[1].msg.ver, 9);
	/* VWRITE of a missing key: NOT_FOUND, nothing else */
	struct nk_msg v2 = mk(NK_PEGASUS_OP_VWRITE, "nokey", 0, 20);
	EXPECT_EQ(handle(&s, &v2, NK_NODE_NONE, out), 1);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_NOT_FOUND);
	/* the client: RETRY -> retry, OK -> done, RC_ACK -> ignore */
	void *cst = calloc(1, H->client_state_size);
	struct nk_host_cfg ccfg = { .n_servers = NS, .n_clients = NCL, .id = 0 };
	H->client_init(cst, &ccfg);
	struct nk_msg rep = mk(NK_PEGASUS_OP_WRITE_REPLY, "k", 0, 9);
	rep.result = NK_RESULT_RETRY;
	EXPECT_EQ(H->client_reply(cst, &rep), NK_REPLY_RETRY);
	rep.result = NK_RESULT_OK;
	EXPECT_EQ(H->client_reply(cst, &rep), NK_REPLY_DONE);
	rep.op = NK_PEGASUS_OP_RC_ACK;
	EXPECT_EQ(H->client_reply(cst, &rep), NK_REPLY_IGNORE);
	struct nk_req_spec sp = { .kind = NK_KIND_WRITE, .key_len = 1, .client_id = 2,
				  .home = 3, .req_id = 77, .keyhash = 5, .value_len = 128,
				  .send_ns = 999, .key = (const uint8_t *)"k" };
	struct nk_msg req;
	EXPECT_EQ(H->client_request(cst, &sp, &req), 3);
	EXPECT_EQ(req.op, NK_PEGASUS_OP_WRITE);
	EXPECT_EQ(req.server_id, 3);
	EXPECT_EQ(req.ver, 0);
	EXPECT_EQ(req.value_len, 128);
	EXPECT_EQ(req.req_id, 77);
	EXPECT_EQ(req.proto, NK_PROTO_PEGASUS);
	uint8_t buf[256];
	EXPECT(nk_wire_encode(&req, buf, sizeof buf) > 0);   /* encodable */
	H->client_fini(cst);
	free(cst);
	srv_free(&s);
}

/* Make "hot" a replicated key at s (rkey_add, `ver` its version or
 * NULL): its keyhash, which the collision tests give other keys. */
static uint32_t add_hot(struct srv *s, const char *ver)
{
	char hk[64], cmd[160], reply[256];
	hexkey("hot", hk);
	uint32_t h = nk_djb2((const uint8_t *)"hot", 3);
	snprintf(cmd, sizeof cmd, "rkey_add %u %s%s%s", h, hk, ver ? " " : "", ver ? ver : "");
	ctl(s, cmd, reply, sizeof reply);
	EXPECT(!strcmp(reply, "ok"));
	return h;
}

static void test_collision(void)
{
	current = "collision";
	/* "hot" is replicated; "cold" pretends to share its keyhash */
	struct srv s;
	srv_init(&s, 1, NULL);
	struct nk_host_out out[NK_HOST_MAX_OUT];
	char cmd[160], reply[256];
	uint32_t h = add_hot(&s, "5");
	struct nk_msg c = mk(NK_PEGASUS_OP_WRITE, "cold", 3, 40);
	c.keyhash = h;
	c.client_id = 2;
	EXPECT_EQ(handle(&s, &c, NS + 2, out), 1);
	EXPECT_EQ(out[0].msg.op, NK_PEGASUS_OP_WRITE);      /* re-forwarded */
	EXPECT_EQ(out[0].dst, 3);
	EXPECT(out[0].msg.flags & NK_PEGASUS_FLAG_BYPASS);
	EXPECT_EQ(out[0].msg.ver, 40);                       /* VER kept */
	EXPECT_EQ(ts_ver(&s.store, "cold"), 0);              /* not applied here */
	/* at the home (3): applied, reply with BYPASS to the client's node */
	struct srv home;
	srv_init(&home, 3, NULL);
	add_hot(&home, NULL);
	struct nk_msg fwd = out[0].msg;
	EXPECT_EQ(handle(&home, &fwd, 1, out), 1);
	EXPECT_EQ(out[0].msg.op, NK_PEGASUS_OP_WRITE_REPLY);
	EXPECT(out[0].msg.flags & NK_PEGASUS_FLAG_BYPASS);
	EXPECT_EQ(out[0].dst, NS + 2);
	EXPECT_EQ(ts_ver(&home.store, "cold"), 40);
	/* directly at the home (switch picked it): applied, BYPASS reply */
	struct nk_msg rd = mk(NK_PEGASUS_OP_READ, "cold", 3, 0);
	rd.keyhash = h;
	handle(&home, &rd, NS, out);
	EXPECT_EQ(out[0].msg.op, NK_PEGASUS_OP_READ_REPLY);
	EXPECT(out[0].msg.flags & NK_PEGASUS_FLAG_BYPASS);
	EXPECT_EQ(out[0].msg.ver, 40);
	EXPECT_EQ(out[0].dst, NK_DST_SRC);
	/* the replicated key itself is served normally, no BYPASS */
	struct nk_msg hot = mk(NK_PEGASUS_OP_READ, "hot", 3, 0);
	handle(&s, &hot, NS, out);
	EXPECT_EQ(out[0].msg.op, NK_PEGASUS_OP_READ_REPLY);
	EXPECT_EQ(out[0].msg.flags & NK_PEGASUS_FLAG_BYPASS, 0);
	/* after rkey_del no collision is detected */
	snprintf(cmd, sizeof cmd, "rkey_del %u", h);
	ctl(&s, cmd, reply, sizeof reply);
	EXPECT(!strcmp(reply, "ok"));
	c.ver = 41;
	handle(&s, &c, NS + 2, out);
	EXPECT_EQ(out[0].msg.op, NK_PEGASUS_OP_WRITE_REPLY);
	ctl(&s, "rkey_del 12", reply, sizeof reply);
	EXPECT(!strncmp(reply, "err", 3));
	ctl(&s, "bogus", reply, sizeof reply);
	EXPECT(!strncmp(reply, "err", 3));
	ctl(&s, "rkey_add x zz", reply, sizeof reply);
	EXPECT(!strncmp(reply, "err", 3));
	srv_free(&home);
	srv_free(&s);
}

static void test_amo(void)
{
	current = "amo";
	struct srv s;
	srv_init(&s, 2, "amo=1;amo_window=4");
	struct nk_host_out out[NK_HOST_MAX_OUT];
	char reply[512];
	struct nk_msg w = mk(NK_PEGASUS_OP_WRITE, "a", 2, 10);
	w.client_id = 1;
	w.req_id = 100;
	w.value_len = 1;
	handle(&s, &w, NS + 1, out);
	EXPECT_EQ(out[0].msg.ver, 10);
	EXPECT_EQ(ts_ver(&s.store, "a"), 10);
	/* the retry was restamped 12 but must not execute again: cached reply */
	w.ver = 12;
	w.value_len = 2;
	handle(&s, &w, NS + 1, out);
	EXPECT_EQ(out[0].msg.op, NK_PEGASUS_OP_WRITE_REPLY);
	EXPECT_EQ(out[0].msg.ver, 10);
	EXPECT_EQ(ts_ver(&s.store, "a"), 10);
	/* out-of-order REQIDs within the window all execute once */
	for (uint32_t id = 104; id >= 101; id--) {
		w.req_id = id;
		w.ver = 20 + id;
		handle(&s, &w, NS + 1, out);
		EXPECT_EQ(out[0].msg.ver, 20 + id);
	}
	EXPECT_EQ(ts_ver(&s.store, "a"), 124);
	/* 100 is now out of the 4-wide window: too old to tell, dropped */
	w.req_id = 100;
	w.ver = 200;
	EXPECT_EQ(handle(&s, &w, NS + 1, out), 0);
	/* another client's same req_id is independent */
	w.client_id = 2;
	w.req_id = 104;
	w.ver = 300;
	handle(&s, &w, NS + 2, out);
	EXPECT_EQ(out[0].msg.ver, 300);
	/* table export / import (promotion copies the home's entries) */
	int len = ctl(&s, "amo_get 1", reply, sizeof reply);
	EXPECT(len > 3 && !strncmp(reply, "ok ", 3));
	EXPECT(strstr(reply, "104:0:124") != NULL);
	struct srv t;
	srv_init(&t, 0, "amo=1;amo_window=4");
	ctl(&t, "amo_put 1 104 0 124", reply, sizeof reply);
	EXPECT(!strcmp(reply, "ok"));
	w.client_id = 1;
	w.req_id = 104;
	w.ver = 400;
	handle(&t, &w, NS + 1, out);
	EXPECT_EQ(out[0].msg.ver, 124);        /* answered from the copied entry */
	EXPECT_EQ(ts_ver(&t.store, "a"), 0);   /* not executed */
	ctl(&t, "amo_put 9 1 0 1", reply, sizeof reply);
	EXPECT(!strncmp(reply, "err", 3));
	/* a RETRY is not cached: the retry executes */
	struct srv v;
	srv_init(&v, 0, "amo=1");
	ts_preload(&v.store, "a", 3, 1);
	struct nk_msg vw = mk(NK_PEGASUS_OP_VWRITE, "a", 0, 8);
	handle(&v, &vw, NK_NODE_NONE, out);
	w.client_id = 0;
	w.req_id = 5;
	w.ver = 6;
	handle(&v, &w, NS, out);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_RETRY);
	w.ver = 9;
	handle(&v, &w, NS, out);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(ts_ver(&v.store, "a"), 9);
	srv_free(&v);
	srv_free(&t);
	srv_free(&s);
}

/* A collision is re-forwarded with its CLIENT_ID, which the home trusts (a
 * server sent it): only from that client's own node. Before, a hostile node
 * naming client 2 filled client 2's AMO slot at the home through the
 * forwarding server, and client 2's later write with that REQID was
 * answered from the table and never applied (docs/security.md). */
static void test_collision_spoof(void)
{
	current = "collision spoof";
	struct srv s, home;
	srv_init(&s, 1, "amo=1");
	srv_init(&home, 3, "amo=1");
	struct nk_host_out out[NK_HOST_MAX_OUT];
	uint32_t h = add_hot(&s, NULL);
	add_hot(&home, NULL);
	/* client 1's node (NS + 1) sends a colliding WRITE naming client 2 */
	struct nk_msg x = mk(NK_PEGASUS_OP_WRITE, "evil", 3, 40);
	x.keyhash = h;
	x.client_id = 2;
	x.req_id = 42;
	EXPECT_EQ(handle(&s, &x, NS + 1, out), 0);          /* dropped, not forwarded */
	x.op = NK_PEGASUS_OP_READ;
	x.kind = NK_KIND_READ;
	EXPECT_EQ(handle(&s, &x, NS + 1, out), 0);          /* no reply to client 2 either */
	EXPECT_EQ(handle(&s, &x, NK_NODE_NONE, out), 0);
	/* client 2's own colliding request is still re-forwarded */
	EXPECT_EQ(handle(&s, &x, NS + 2, out), 1);
	EXPECT_EQ(out[0].dst, 3);
	/* client 2's write with REQID 42 is applied at the home, not answered
	 * from a slot someone else filled */
	struct nk_msg w = mk(NK_PEGASUS_OP_WRITE, "mine", 3, 50);
	w.client_id = 2;
	w.req_id = 42;
	EXPECT_EQ(handle(&home, &w, NS + 2, out), 1);
	EXPECT_EQ(out[0].msg.ver, 50);
	EXPECT_EQ(ts_ver(&home.store, "mine"), 50);
	EXPECT_EQ(ts_ver(&home.store, "evil"), 0);
	srv_free(&home);
	srv_free(&s);
}

static void test_gc(void)
{
	current = "gc";
	struct srv s;
	srv_init(&s, 1, NULL);
	struct nk_host_out out[NK_HOST_MAX_OUT];
	char cmd[200], reply[512], h1[64], h2[64], h3[64];
	hexkey("k1", h1);
	hexkey("k2", h2);
	hexkey("k3", h3);
	uint32_t kh1 = nk_djb2((const uint8_t *)"k1", 2), kh2 = nk_djb2((const uint8_t *)"k2", 2);
	snprintf(cmd, sizeof cmd, "rkey_add %u %s 1", kh1, h1);
	ctl(&s, cmd, reply, sizeof reply);
	snprintf(cmd, sizeof cmd, "rkey_add %u %s 1", kh2, h2);
	ctl(&s, cmd, reply, sizeof reply);
	/* copies of k1, k2 (home 0) and k3 (home 0, never replicated), and a
	 * key this server is home of (never collected) */
	const char *keys[3] = { "k1", "k2", "k3" };
	for (int i = 0; i < 3; i++) {
		struct nk_msg rc = mk(NK_PEGASUS_OP_RC_REQ, keys[i], 0, 10);
		handle(&s, &rc, 0, out);
	}
	struct nk_msg own = mk(NK_PEGASUS_OP_WRITE, "mine", 1, 10);
	handle(&s, &own, NS, out);
	/* k3 is not replicated: dropped; k1, k2 current: kept */
	ctl(&s, "gc", reply, sizeof reply);
	snprintf(cmd, sizeof cmd, "ok 1 %s", h3);
	EXPECT(!strcmp(reply, cmd));
	/* k1's ver_completed moves past our copy: obsolete */
	snprintf(cmd, sizeof cmd, "rkey_ver %u 11", kh1);
	ctl(&s, cmd, reply, sizeof reply);
	EXPECT(!strcmp(reply, "ok"));
	ctl(&s, "gc", reply, sizeof reply);
	snprintf(cmd, sizeof cmd, "ok 1 %s", h1);
	EXPECT(!strcmp(reply, cmd));
	/* k2 demoted: dropped */
	snprintf(cmd, sizeof cmd, "rkey_del %u", kh2);
	ctl(&s, cmd, reply, sizeof reply);
	ctl(&s, "gc", reply, sizeof reply);
	snprintf(cmd, sizeof cmd, "ok 1 %s", h2);
	EXPECT(!strcmp(reply, cmd));
	ctl(&s, "gc", reply, sizeof reply);
	EXPECT(!strcmp(reply, "ok 0 "));
	srv_free(&s);
}

/* ---- end to end: switch + servers + clients + controller ------------------ */

#define E2E_KEYS 3
#define QMAX 4096
#define HMAX 4096

struct pkt {
	struct nk_msg m;
	uint16_t src, dst;
	uint8_t at_switch;      /* 1: not yet through the switch */
};

struct op_rec {
	uint8_t write, done;
	uint16_t client;
	uint32_t key;
	uint32_t tag;           /* value written (value_len) / read */
	uint64_t ver;
	uint64_t t_inv, t_resp;
};

struct e2e {
	const struct nk_pipeline_ops *P;
	void *sw;
	struct srv srv[NS];
	struct pkt q[QMAX];
	int nq;
	struct nk_rng rng;
	uint64_t now;
	struct op_rec ops[HMAX];
	int nops;
	int outstanding[NCL];     /* op index or -1 */
	/* version -> tag of the real write stamped with it */
	uint64_t wver[HMAX * 4];
	uint32_t wtag[HMAX * 4];
	uint8_t wkey[HMAX * 4];
	uint64_t ext[E2E_KEYS];   /* highest version externalized to a client */
	int nw;
	int i2_bad, i1_bad, lost;
	int mcast, bad_group;     /* multicast writes; bad group ids */
	const char *keys[E2E_KEYS];
	uint8_t home[E2E_KEYS];
	int replicated[E2E_KEYS];
	int vwrite_fwd;
};

static void e2e_send(struct e2e *e, const struct nk_msg *m, uint16_t src, uint16_t dst)
{
	if (e->nq >= QMAX) {
		e->lost++;
		return;
	}
	e->q[e->nq++] = (struct pkt){ *m, src, dst, 1 };
}

static int key_of(struct e2e *e, const struct nk_msg *m)
{
	for (int k = 0; k < E2E_KEYS; k++)
		if (m->key_len == strlen(e->keys[k]) && !memcmp(m->key, e->keys[k], m->key_len))
			return k;
	return -1;
}

static uint64_t swr(struct e2e *e, const char *name, uint32_t idx)
{
	uint64_t v = 0;
	e->P->reg_read(e->sw, name, idx, &v);
	return v;
}

static void sww(struct e2e *e, const char *name, uint32_t idx, uint64_t v)
{
	if (e->P->reg_write(e->sw, name, idx, v))
		failed++;
}

static void check_i1(struct e2e *e, uint32_t idx)
{
	uint64_t size = swr(e, "rset_size", idx), bm = swr(e, "rset_bitmap", idx);
	uint32_t seen = 0;
	int ok = size >= 1 && size <= NS;
	for (uint32_t i = 0; ok && i < size; i++) {
		uint32_t b = 1u << swr(e, "rset_list", idx * 32 + i);
		ok = !(seen & b);
		seen |= b;
	}
	if (!ok || seen != bm)
		e->i1_bad++;
}

/* The switch step of one packet. */
static void e2e_switch(struct e2e *e, struct pkt *p)
{
	struct nk_pkt_meta meta = { .now_ns = e->now, .src = p->src, .dst = p->dst,
				    .from_cpu = p->src == NK_NODE_NONE };
	struct nk_actions act;
	int k = key_of(e, &p->m);
	int is_write = p->m.op == NK_PEGASUS_OP_WRITE && !(p->m.flags & NK_PEGASUS_FLAG_BYPASS);
	uint64_t vw_before = swr(e, "stats", 8);
	e->P->process(e->sw, &p->m, &meta, &act);
	if (is_write && k >= 0 && e->nw < HMAX * 4) {
		/* record the version the switch stamped and the value it carries */
		e->wver[e->nw] = p->m.ver;
		e->wtag[e->nw] = p->m.value_len;
		e->wkey[e->nw] = (uint8_t)k;
		e->nw++;
	}
	if (p->m.op == NK_PEGASUS_OP_VWRITE && swr(e, "stats", 8) > vw_before)
		e->vwrite_fwd++;
	if (k >= 0 && e->replicated[k]) {
		check_i1(e, (uint32_t)k);
		if (p->m.op == NK_PEGASUS_OP_READ && act.fwd == NK_FWD_PORT) {
			/* I2: every rset member stores >= the latest version of k
			 * externalized so far (ver_completed itself right after an
			 * add is only an upper bound: ver_next - 1) */
			uint64_t bm = swr(e, "rset_bitmap", (uint32_t)k);
			for (int sidx = 0; sidx < NS; sidx++)
				if (bm >> sidx & 1 &&
				    ts_ver(&e->srv[sidx].store, e->keys[k]) < e->ext[k])
					e->i2_bad++;
		}
	}
	if (k >= 0 && act.fwd == NK_FWD_PORT && meta.dst >= NS && meta.dst < NS + NCL &&
	    (p->m.op == NK_PEGASUS_OP_READ_REPLY || p->m.op == NK_PEGASUS_OP_WRITE_REPLY) &&
	    p->m.result == NK_RESULT_OK && p->m.ver > e->ext[k])
		e->ext[k] = p->m.ver;
	if (act.fwd == NK_FWD_PORT) {
		p->dst = meta.dst;
		p->at_switch = 0;
	} else if (act.fwd == NK_FWD_MCAST) {
		/* the controller's group start*32 + r-1 = servers start..start+r-1
		 * (mod n), node i behind port i: one copy per member, each
		 * addressed to its node; p becomes the first */
		uint32_t start = act.mcast_group / 32, r = act.mcast_group % 32 + 1;
		if (!act.mcast_group || start >= NS || r < 2 || r > NS) {
			e->bad_group++;
			p->dst = NK_NODE_NONE;
			return;
		}
		e->mcast++;
		for (uint32_t i = 1; i < r; i++) {
			if (e->nq >= QMAX) {
				e->lost++;
				continue;
			}
			e->q[e->nq++] = (struct pkt){ p->m, p->src,
						      (uint16_t)((start + i) % NS), 0 };
		}
		p->dst = (uint16_t)start;
		p->at_switch = 0;
	} else {
		p->dst = NK_NODE_NONE;   /* dropped or consumed */
	}
}

/* The value a read at version `ver` of key k must return: the stamped
 * write's, or for a virtual version the latest real write below it that was
 * applied somewhere. */
static uint32_t tag_of_version(struct e2e *e, int k, uint64_t ver, int *found)
{
	*found = 0;
	for (int i = 0; i < e->nw; i++)
		if (e->wkey[i] == k && e->wver[i] == ver) {
			*found = 1;
			return e->wtag[i];
		}
	uint32_t kh = nk_djb2((const uint8_t *)e->keys[k], strlen(e->keys[k]));
	uint64_t best = 1;
	uint32_t tag = 0;
	*found = 1;    /* the initial value (version 1, tag 0) at worst */
	for (int i = 0; i < napplied; i++) {
		if (applied[i].keyhash != kh || applied[i].ver >= ver || applied[i].ver <= best)
			continue;
		for (int j = 0; j < e->nw; j++)
			if (e->wkey[j] == k && e->wver[j] == applied[i].ver) {
				best = applied[i].ver;
				tag = applied[i].tag;
				break;
			}
	}
	return tag;
}

static void e2e_client_issue(struct e2e *e, int c, struct nk_rng *rng, uint32_t *tagseq)
{
	if (e->nops >= HMAX)
		return;
	int k = (int)(nk_rng_next(rng) % E2E_KEYS);
	int write = nk_rng_next(rng) % 3 == 0;
	struct op_rec *o = &e->ops[e->nops];
	memset(o, 0, sizeof *o);
	o->write = (uint8_t)write;
	o->client = (uint16_t)c;
	o->key = (uint32_t)k;
	o->t_inv = e->now;
	o->tag = write ? (*tagseq)++ : 0;
	e->outstanding[c] = e->nops++;
	struct nk_req_spec sp = { .kind = write ? NK_KIND_WRITE : NK_KIND_READ,
				  .key_len = (uint8_t)strlen(e->keys[k]),
				  .client_id = (uint16_t)c, .home = e->home[k],
				  .req_id = (uint32_t)e->nops, .keyhash = nk_djb2(
					  (const uint8_t *)e->keys[k], strlen(e->keys[k])),
				  .value_len = o->tag, .send_ns = e->now,
				  .key = (const uint8_t *)e->keys[k] };
	struct nk_msg m;
	uint16_t dst = H->client_request(NULL, &sp, &m);
	e2e_send(e, &m, (uint16_t)(NS + c), dst);
}

static void e2e_deliver(struct e2e *e, struct pkt *p)
{
	if (p->dst < NS) {
		struct nk_host_out out[NK_HOST_MAX_OUT];
		int n = handle(&e->srv[p->dst], &p->m, p->src, out);
		for (int i = 0; i < n; i++)
			e2e_send(e, &out[i].msg, p->dst,
				 out[i].dst == NK_DST_SRC ? p->src : out[i].dst);
		return;
	}
	if (p->dst >= NS && p->dst < NS + NCL) {
		int c = p->dst - NS, oi = e->outstanding[c];
		if (oi < 0 || p->m.req_id != (uint32_t)oi + 1)
			return;      /* a late duplicate */
		int v = H->client_reply(NULL, &p->m);
		if (v == NK_REPLY_IGNORE)
			return;
		struct op_rec *o = &e->ops[oi];
		if (v == NK_REPLY_RETRY) {
			/* resend the same request (same REQID), restamped */
			struct nk_req_spec sp = { .kind = o->write ? NK_KIND_WRITE : NK_KIND_READ,
						  .key_len = (uint8_t)strlen(e->keys[o->key]),
						  .client_id = (uint16_t)c, .home = e->home[o->key],
						  .req_id = (uint32_t)oi + 1,
						  .keyhash = nk_djb2((const uint8_t *)e->keys[o->key],
								     strlen(e->keys[o->key])),
						  .value_len = o->tag, .send_ns = e->now,
						  .key = (const uint8_t *)e->keys[o->key] };
			struct nk_msg m;
			uint16_t dst = H->client_request(NULL, &sp, &m);
			e2e_send(e, &m, (uint16_t)(NS + c), dst);
			return;
		}
		o->done = 1;
		o->ver = p->m.ver;
		if (!o->write)
			o->tag = p->m.result == NK_RESULT_OK ? p->m.value_len : 0;
		o->t_resp = e->now;
		e->outstanding[c] = -1;
	}
	/* NK_NODE_NONE: a reply to the controller; dropped */
}

/* One random event: deliver a queued packet (any order), maybe duplicate. */
static void e2e_step(struct e2e *e)
{
	if (!e->nq)
		return;
	e->now++;
	int i = (int)(nk_rng_next(&e->rng) % (uint64_t)e->nq);
	struct pkt p = e->q[i];
	if (nk_rng_next(&e->rng) % 50 == 0 && e->nq < QMAX)
		e->q[e->nq++] = p;                  /* duplicate stays queued */
	e->q[i] = e->q[--e->nq];
	if (p.at_switch) {
		e2e_switch(e, &p);
		if (p.dst != NK_NODE_NONE && e->nq < QMAX)
			e->q[e->nq++] = p;          /* second hop, reordered too */
		return;
	}
	e2e_deliver(e, &p);
}

static void e2e_drain(struct e2e *e)
{
	for (int guard = 0; e->nq && guard < 100000; guard++)
		e2e_step(e);
}

static void ctl_all(struct e2e *e, const char *line)
{
	char reply[256];
	for (int s = 0; s < NS; s++)
		ctl(&e->srv[s], line, reply, sizeof reply);
}

/* controller: add key k (digest §4 + §9.3) */
static void ctrl_add(struct e2e *e, int k)
{
	char hk[64], line[200];
	hexkey(e->keys[k], hk);
	uint32_t kh = nk_djb2((const uint8_t *)e->keys[k], strlen(e->keys[k]));
	snprintf(line, sizeof line, "rkey_add %u %s", kh, hk);
	ctl_all(e, line);        /* servers learn the set before the switch */
	uint64_t vn = swr(e, "ver_next", 0);
	sww(e, "ver_completed", (uint32_t)k, vn - 1);
	sww(e, "ver_last_write", (uint32_t)k, vn - 1);
	sww(e, "rset_size", (uint32_t)k, 1);
	sww(e, "rset_bitmap", (uint32_t)k, 1u << e->home[k]);
	sww(e, "rset_list", (uint32_t)k * 32, e->home[k]);
	sww(e, "rr_key", (uint32_t)k, 0);
	sww(e, "draining", (uint32_t)k, 0);
	sww(e, "fanout", (uint32_t)k, 1 + (uint32_t)k % 3);
	uint64_t key = kh, idx = (uint64_t)k;
	if (e->P->table_add(e->sw, "rkeys", &key, 1, &idx, 1))
		failed++;
	e->replicated[k] = 1;
}

static void ctrl_vwrite(struct e2e *e, int k)
{
	struct nk_msg v = mk(NK_PEGASUS_OP_VWRITE, e->keys[k], e->home[k], 0);
	v.bitmap = (1u << NS) - 1;     /* copy to every server */
	e2e_send(e, &v, NK_NODE_NONE, e->home[k]);
}

/* controller: removal per §9.2; returns 1 once removed */
static int ctrl_try_remove(struct e2e *e, int k, uint64_t L)
{
	uint64_t vc = swr(e, "ver_completed", (uint32_t)k);
	uint64_t bm = swr(e, "rset_bitmap", (uint32_t)k);
	if (vc < L)
		return 0;
	if (!(bm >> e->home[k] & 1)) {
		struct nk_msg v = mk(NK_PEGASUS_OP_VWRITE, e->keys[k], e->home[k], 0);
		v.bitmap = 1u << e->home[k];
		e2e_send(e, &v, NK_NODE_NONE, e->home[k]);
		return 0;
	}
	uint64_t key = nk_djb2((const uint8_t *)e->keys[k], strlen(e->keys[k]));
	if (e->P->table_del(e->sw, "rkeys", &key, 1))
		failed++;
	sww(e, "draining", (uint32_t)k, 0);
	e->replicated[k] = 0;
	char line[64];
	snprintf(line, sizeof line, "rkey_del %llu", (unsigned long long)key);
	ctl_all(e, line);
	return 1;
}

static void e2e_check_history(struct e2e *e)
{
	int bad_a = 0, bad_b = 0, bad_c = 0, done = 0;
	for (int i = 0; i < e->nops; i++) {
		struct op_rec *a = &e->ops[i];
		if (!a->done)
			continue;
		done++;
		if (!a->write) {
			int found;
			uint32_t tag = tag_of_version(e, (int)a->key, a->ver, &found);
			if (a->ver > 1 && (!found || tag != a->tag))
				bad_a++;     /* (a) value of write v */
			if (a->ver <= 1 && a->tag != 0)
				bad_a++;
		}
		for (int j = 0; j < e->nops; j++) {
			struct op_rec *b = &e->ops[j];
			if (!b->done || b->key != a->key || a->t_resp >= b->t_inv)
				continue;
			/* a finished before b started */
			if (b->ver < a->ver || (b->write && b->ver == a->ver))
				bad_b++;
		}
		if (!a->write && a->ver > 1) {
			/* (c): the write with that version was invoked before */
			int ok = 0;
			for (int j = 0; j < e->nops; j++) {
				struct op_rec *w = &e->ops[j];
				if (w->write && w->key == a->key && w->t_inv < a->t_resp)
					ok = 1;
			}
			if (!ok)
				bad_c++;
		}
	}
	EXPECT(done > 200);
	EXPECT_EQ(bad_a, 0);
	EXPECT_EQ(bad_b, 0);
	EXPECT_EQ(bad_c, 0);
}

static void test_end_to_end(const char *params, uint64_t seed)
{
	current = params;
	static struct e2e E;
	struct e2e *e = &E;
	memset(e, 0, sizeof *e);
	napplied = 0;
	e->P = nk_pipeline_find("pegasus");
	e->sw = calloc(1, e->P->state_size);
	uint16_t ports[NS + NCL];
	for (int i = 0; i < NS + NCL; i++)
		ports[i] = (uint16_t)i;
	struct nk_pipeline_cfg cfg = { .n_servers = NS, .n_clients = NCL,
				       .n_nodes = NS + NCL, .node_port = ports, .seed = seed,
				       .params = params };
	if (e->P->init(e->sw, &cfg)) {
		failed++;
		return;
	}
	for (int s = 0; s < NS; s++)
		srv_init(&e->srv[s], (uint32_t)s, params);
	e->keys[0] = "alpha";
	e->keys[1] = "bravo";
	e->keys[2] = "charlie";
	for (int k = 0; k < E2E_KEYS; k++) {
		e->home[k] = (uint8_t)(k % NS);
		/* the home holds the initial value (version 1, tag 0) */
		ts_preload(&e->srv[e->home[k]].store, e->keys[k], 1, 0);
	}
	for (int c = 0; c < NCL; c++)
		e->outstanding[c] = -1;
	nk_rng_seed(&e->rng, seed, 1);
	struct nk_rng crng;
	nk_rng_seed(&crng, seed, 2);
	uint32_t tagseq = 1;
	uint64_t L[E2E_KEYS] = { 0 };
	int phase[E2E_KEYS] = { 0 };   /* 0 cold, 1 replicated, 2 draining */
	for (int round = 0; round < 3000; round++) {
		for (int c = 0; c < NCL; c++)
			if (e->outstanding[c] < 0 && nk_rng_next(&crng) % 2)
				e2e_client_issue(e, c, &crng, &tagseq);
		/* the controller acts now and then, with packets in flight */
		if (round % 97 == 50) {
			int k = (int)(nk_rng_next(&crng) % E2E_KEYS);
			if (phase[k] == 0) {
				ctrl_add(e, k);
				phase[k] = 1;
			} else if (phase[k] == 1) {
				if (nk_rng_next(&crng) % 2) {
					ctrl_vwrite(e, k);
				} else {
					sww(e, "draining", (uint32_t)k, 1);
					L[k] = swr(e, "ver_last_write", (uint32_t)k);
					phase[k] = 2;
				}
			}
		}
		for (int k = 0; k < E2E_KEYS; k++)
			if (phase[k] == 2 && round % 13 == 0 && ctrl_try_remove(e, k, L[k]))
				phase[k] = 0;
		for (int s = 0; s < 3; s++)
			e2e_step(e);
	}
	e2e_drain(e);
	EXPECT_EQ(e->lost, 0);
	EXPECT_EQ(e->i1_bad, 0);
	EXPECT_EQ(e->i2_bad, 0);
	int i5 = 0;
	for (int s = 0; s < NS; s++)
		i5 += e->srv[s].store.i5_violations;
	EXPECT_EQ(i5, 0);
	EXPECT(e->vwrite_fwd > 0);
	EXPECT_EQ(e->bad_group, 0);
	if (!strstr(params, "amo=1") && !strstr(params, "write_mcast=0"))
		EXPECT(e->mcast > 0);
	else
		EXPECT_EQ(e->mcast, 0);
	e2e_check_history(e);
	/* removal guarantee: a removed key's home holds >= every externalized
	 * (acknowledged) version */
	for (int k = 0; k < E2E_KEYS; k++) {
		if (e->replicated[k])
			continue;
		uint64_t maxv = 0;
		for (int i = 0; i < e->nops; i++)
			if (e->ops[i].done && e->ops[i].key == (uint32_t)k && e->ops[i].ver > maxv &&
			    e->ops[i].write)
				maxv = e->ops[i].ver;
		EXPECT(ts_ver(&e->srv[e->home[k]].store, e->keys[k]) >= maxv);
	}
	for (int s = 0; s < NS; s++)
		srv_free(&e->srv[s]);
	e->P->fini(e->sw);
	free(e->sw);
}

int main(void)
{
	H = nk_host_find("pegasus");
	if (!H || !nk_pipeline_find("pegasus")) {
		fprintf(stderr, "pegasus host logic / pipeline not registered\n");
		return 2;
	}
	test_versioned_store();
	test_version_top();
	test_rc_and_fanout();
	test_mcast_copies();
	test_vwrite_retry();
	test_collision();
	test_amo();
	test_collision_spoof();
	test_gc();
	test_end_to_end("selection=rr", 1);
	test_end_to_end("selection=random", 2);
	test_end_to_end("selection=wrr", 3);
	test_end_to_end("selection=least_loaded", 4);
	test_end_to_end("selection=random;amo=1", 5);
	test_end_to_end("selection=rr;fanout=auto;fanout_div16=16", 6);
	test_end_to_end("selection=wrr;write_mcast=0", 7);
	printf("test_pegasus_host: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
