/*
 * test_netcache.c - packet-in/packet-out tests of the NetCache baseline:
 * the switch pipeline (hostapps/src/pipeline/netcache.c) and its host logic
 * (hostapps/src/host/netcache.c); docs/netcache.md.
 *
 * Covered: hits answered by the switch (switch_reply, value bytes), misses
 * forwarded, writes invalidate and the server's reply refreshes, a late reply
 * of an older write never revalidates, the controller's fetch path
 * (CACHE_UPDATE), deletes, count-min + Bloom hot-key reports, the cache size
 * and value size limits, the control hooks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/host.h"
#include "netkv/pipeline.h"
#include "netkv/wire.h"

#include "expect.h"

#ifndef NK_NETCACHE_FLAG_REFRESH
#define NK_NETCACHE_FLAG_REFRESH 0x02
#endif

#define NS 2
#define NC 2
#define CL NS          /* client node */

#include "tstore.h"

/* ---- rig ------------------------------------------------------------------ */

struct rig {
	const struct nk_pipeline_ops *P;
	const struct nk_host_ops *H;
	void *sw;
	void *srv;
	struct tstore store;
	struct nk_store ns;
};

static void rig_init(struct rig *r, const char *params)
{
	memset(r, 0, sizeof *r);
	r->P = nk_pipeline_find("netcache");
	r->H = nk_host_find("netcache");
	if (!r->P || !r->H) {
		fprintf(stderr, "netcache not registered\n");
		exit(2);
	}
	uint16_t ports[NS + NC] = { 10, 11, 12, 13 };   /* node i on port 10 + i */
	struct nk_pipeline_cfg cfg = { .n_servers = NS, .n_clients = NC, .n_nodes = NS + NC,
				       .node_port = ports, .cpu_port = 99, .params = params };
	r->sw = calloc(1, r->P->state_size);
	if (r->P->init(r->sw, &cfg)) {
		fprintf(stderr, "init failed: %s\n", params);
		exit(2);
	}
	r->srv = calloc(1, r->H->server_state_size);
	struct nk_host_cfg hc = { .n_servers = NS, .n_clients = NC, .id = 1 };
	r->H->server_init(r->srv, &hc);
	r->ns.ops = &ts_ops;
	r->ns.impl = &r->store;
}

static void rig_free(struct rig *r)
{
	r->P->fini(r->sw);
	r->H->server_fini(r->srv);
	free(r->sw);
	free(r->srv);
}

static struct nk_msg mk(uint8_t op, const char *key, uint32_t req_id)
{
	struct nk_msg m;
	memset(&m, 0, sizeof m);
	m.proto = NK_PROTO_NETCACHE;
	m.op = op;
	m.kind = (uint8_t)nk_wire_kind(NK_PROTO_NETCACHE, op);
	m.key_len = (uint8_t)strlen(key);
	memcpy(m.key, key, m.key_len);
	m.client_id = 0;
	m.req_id = req_id;
	m.server_id = 1;
	m.frag_cnt = 1;
	return m;
}

static struct nk_actions sw(struct rig *r, struct nk_msg *m, uint16_t src, uint16_t dst,
			    uint16_t *out_dst)
{
	/* node i is behind port 10 + i (rig_init); the controller's is 99 */
	struct nk_pkt_meta meta = { .src = src, .dst = dst, .from_cpu = src == NK_NODE_NONE,
				    .ingress_port = src == NK_NODE_NONE ? 99 : (uint16_t)(10 + src) };
	struct nk_actions act;
	memset(&act, 0xAB, sizeof act);
	r->P->process(r->sw, m, &meta, &act);
	if (out_dst)
		*out_dst = meta.dst;
	return act;
}

/* server 1 handles m, returns its first output */
static struct nk_msg serve(struct rig *r, const struct nk_msg *m, int *n)
{
	struct nk_host_out out[NK_HOST_MAX_OUT];
	*n = r->H->server_handle(r->srv, &r->ns, m, CL, out, NK_HOST_MAX_OUT);
	return out[0].msg;
}

/* the cache table's key: the first 16 B (zero-padded) as two big-endian
 * words, then the key's length (klen bytes of key) */
static void table_key(const char *key, size_t klen, uint64_t k[3])
{
	uint8_t b[16] = { 0 };
	memcpy(b, key, klen < 16 ? klen : 16);
	k[0] = k[1] = 0;
	for (int i = 0; i < 8; i++) {
		k[0] = k[0] << 8 | b[i];
		k[1] = k[1] << 8 | b[8 + i];
	}
	k[2] = klen < 16 ? klen : 16;
}

static int cache_add(struct rig *r, const char *key, uint32_t idx)
{
	uint64_t k[3], a = idx;
	table_key(key, strlen(key), k);
	return r->P->table_add(r->sw, "cache", k, 3, &a, 1);
}

static uint64_t rd(struct rig *r, const char *name, uint32_t idx)
{
	uint64_t v = 0;
	if (r->P->reg_read(r->sw, name, idx, &v))
		failed++;
	return v;
}

/* a full write round trip through switch, server, switch */
static struct nk_msg do_write(struct rig *r, const char *key, uint32_t req_id,
			      const uint8_t *val, uint32_t vlen)
{
	struct nk_msg w = mk(NK_NETCACHE_OP_WRITE, key, req_id);
	w.value = val;
	w.value_len = vlen;
	sw(r, &w, CL, 1, NULL);
	int n;
	struct nk_msg rep = serve(r, &w, &n);
	sw(r, &rep, 1, CL, NULL);
	return rep;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_hit_miss_write(void)
{
	current = "hit/miss/write";
	struct rig r;
	rig_init(&r, "cache_items=4;hot_threshold=1000");
	static const uint8_t v1[5] = { 'h', 'e', 'l', 'l', 'o' };
	static const uint8_t v2[3] = { 'b', 'y', 'e' };
	/* uncached key: miss, forwarded to the server unchanged */
	struct nk_msg m = mk(NK_NETCACHE_OP_READ, "cold", 1);
	uint16_t dst;
	struct nk_actions a = sw(&r, &m, CL, 1, &dst);
	EXPECT_EQ(a.fwd, NK_FWD_PORT);
	EXPECT_EQ(a.port, 11);
	EXPECT_EQ(a.switch_reply, 0);
	EXPECT_EQ(m.op, NK_NETCACHE_OP_READ);
	EXPECT_EQ(rd(&r, "stats", 1), 1);
	/* write "hot" before it is cached: plain write, no REFRESH */
	struct nk_msg rep = do_write(&r, "hot", 2, v1, 5);
	EXPECT_EQ(rep.op, NK_NETCACHE_OP_WRITE_REPLY);
	EXPECT_EQ(rep.flags & NK_NETCACHE_FLAG_REFRESH, 0);
	/* controller inserts "hot" at slot 2: invalid until filled */
	EXPECT_EQ(cache_add(&r, "hot", 2), 0);
	EXPECT_EQ(rd(&r, "cache_valid", 2), 0);
	m = mk(NK_NETCACHE_OP_READ, "hot", 3);
	a = sw(&r, &m, CL, 1, &dst);
	EXPECT_EQ(a.switch_reply, 0);
	EXPECT_EQ(dst, 1);
	EXPECT_EQ(rd(&r, "stats", 2), 1);     /* read of an invalid entry */
	/* fetch: controller packet-out CACHE_UPDATE -> server -> switch */
	struct nk_msg f = mk(NK_NETCACHE_OP_CACHE_UPDATE, "hot", 77);
	a = sw(&r, &f, NK_NODE_NONE, 1, &dst);
	EXPECT_EQ(a.fwd, NK_FWD_PORT);
	EXPECT_EQ(dst, 1);
	EXPECT_EQ(f.client_id, 0xFFFF);
	int n;
	struct nk_msg fr = serve(&r, &f, &n);
	EXPECT_EQ(n, 1);
	EXPECT_EQ(fr.op, NK_NETCACHE_OP_CACHE_UPDATE);
	EXPECT_EQ(fr.value_len, 5);
	fr.value = r.store.e[0].val;          /* the embedder fills the bytes */
	a = sw(&r, &fr, 1, CL, NULL);
	EXPECT_EQ(a.fwd, NK_FWD_PORT);        /* the ACK itself, to the controller */
	EXPECT_EQ(a.port, 99);
	EXPECT_EQ(a.to_cpu, 0);
	EXPECT_EQ(fr.op, NK_NETCACHE_OP_CACHE_UPDATE_ACK);
	EXPECT_EQ(fr.result, NK_RESULT_OK);
	EXPECT_EQ(rd(&r, "cache_valid", 2), 1);
	EXPECT_EQ(rd(&r, "cache_vlen", 2), 5);
	EXPECT_EQ(rd(&r, "cache_value", 2 * 16), 0x68656c6c6f000000ull);   /* "hello" */
	/* hit: answered by the switch, back to the client, with the bytes */
	m = mk(NK_NETCACHE_OP_READ, "hot", 4);
	a = sw(&r, &m, CL, 1, &dst);
	EXPECT_EQ(a.switch_reply, 1);
	EXPECT_EQ(a.fwd, NK_FWD_PORT);
	EXPECT_EQ(a.port, 12);
	EXPECT_EQ(dst, CL);
	EXPECT_EQ(m.op, NK_NETCACHE_OP_READ_REPLY);
	EXPECT_EQ(m.result, NK_RESULT_OK);
	EXPECT(m.flags & NK_NETCACHE_FLAG_CACHED);
	EXPECT_EQ(m.value_len, 5);
	EXPECT(m.value && !memcmp(m.value, "hello", 5));
	EXPECT_EQ(rd(&r, "cache_hits", 2), 1);
	uint8_t buf[128];
	EXPECT(nk_wire_encode(&m, buf, sizeof buf) > 0);
	/* write: invalidates, REFRESH to the server; its reply refreshes and
	 * reaches the client as a plain reply */
	struct nk_msg w = mk(NK_NETCACHE_OP_WRITE, "hot", 5);
	w.value = v2;
	w.value_len = 3;
	sw(&r, &w, CL, 1, NULL);
	EXPECT(w.flags & NK_NETCACHE_FLAG_REFRESH);
	EXPECT_EQ(rd(&r, "cache_valid", 2), 0);
	m = mk(NK_NETCACHE_OP_READ, "hot", 6);
	a = sw(&r, &m, CL, 1, &dst);
	EXPECT_EQ(a.switch_reply, 0);         /* invalid: to the server */
	rep = serve(&r, &w, &n);
	EXPECT(rep.flags & NK_NETCACHE_FLAG_REFRESH);
	EXPECT_EQ(rep.value_len, 3);
	a = sw(&r, &rep, 1, CL, &dst);
	EXPECT_EQ(a.fwd, NK_FWD_PORT);
	EXPECT_EQ(dst, CL);
	EXPECT_EQ(rep.value_len, 0);
	EXPECT_EQ(rep.flags & NK_NETCACHE_FLAG_REFRESH, 0);
	EXPECT_EQ(rd(&r, "cache_valid", 2), 1);
	m = mk(NK_NETCACHE_OP_READ, "hot", 7);
	a = sw(&r, &m, CL, 1, &dst);
	EXPECT_EQ(a.switch_reply, 1);
	EXPECT(m.value_len == 3 && !memcmp(m.value, "bye", 3));
	/* the client: replies done, the rest ignored */
	EXPECT_EQ(r.H->client_reply(NULL, &m), NK_REPLY_DONE);
	EXPECT_EQ(r.H->client_reply(NULL, &fr), NK_REPLY_IGNORE);
	rig_free(&r);
}

/* The key length is part of the match. A key shorter than 16 B and the
 * same bytes zero-padded (K||0x00) fill the same 16 B: before, a client's
 * write of K||0 invalidated K's slot and its reply refreshed it with a value
 * the servers store under K||0, which the switch then served to READ(K)
 * (docs/security.md). */
static void test_padded_key(void)
{
	current = "padded key";
	struct rig r;
	rig_init(&r, "cache_items=4;hot_threshold=1000");
	EXPECT_EQ(cache_add(&r, "hotkey01", 0), 0);
	EXPECT_EQ(r.P->reg_write(r.sw, "cache_value", 0, 0x474F4F44474F4F44ull), 0); /* GOODGOOD */
	EXPECT_EQ(r.P->reg_write(r.sw, "cache_vlen", 0, 8), 0);
	EXPECT_EQ(r.P->reg_write(r.sw, "cache_valid", 0, 1), 0);
	/* client 1 writes K||0 (9 B): a key of its own, not K's slot */
	struct nk_msg w = mk(NK_NETCACHE_OP_WRITE, "hotkey01", 5);
	w.key_len = 9;
	w.client_id = 1;
	w.value = (const uint8_t *)"EVILEVIL";
	w.value_len = 8;
	sw(&r, &w, CL + 1, 1, NULL);
	EXPECT_EQ(w.flags & NK_NETCACHE_FLAG_REFRESH, 0);
	EXPECT_EQ(rd(&r, "cache_valid", 0), 1);
	EXPECT_EQ(rd(&r, "stats", 3), 0);           /* no invalidation */
	int n;
	struct nk_msg rep = serve(&r, &w, &n);
	rep.flags |= NK_NETCACHE_FLAG_REFRESH;      /* even a server's forged refresh */
	rep.value = (const uint8_t *)"EVILEVIL";
	rep.value_len = 8;
	sw(&r, &rep, 1, CL + 1, NULL);
	EXPECT_EQ(rd(&r, "stats", 4), 0);           /* no refresh */
	/* READ(K): the switch still answers K's value */
	struct nk_msg m = mk(NK_NETCACHE_OP_READ, "hotkey01", 6);
	struct nk_actions a = sw(&r, &m, CL, 1, NULL);
	EXPECT_EQ(a.switch_reply, 1);
	EXPECT(m.value_len == 8 && !memcmp(m.value, "GOODGOOD", 8));
	/* both may be cached, each in its own slot */
	uint64_t k[3], a1 = 1;
	table_key("hotkey01", 9, k);
	EXPECT_EQ(r.P->table_add(r.sw, "cache", k, 3, &a1, 1), 0);
	EXPECT_EQ(r.P->reg_write(r.sw, "cache_vlen", 1, 1), 0);
	EXPECT_EQ(r.P->reg_write(r.sw, "cache_valid", 1, 1), 0);
	m = mk(NK_NETCACHE_OP_READ, "hotkey01", 7);
	m.key_len = 9;
	sw(&r, &m, CL, 1, NULL);
	EXPECT_EQ(m.value_len, 1);
	m = mk(NK_NETCACHE_OP_READ, "hotkey01", 8);
	sw(&r, &m, CL, 1, NULL);
	EXPECT_EQ(m.value_len, 8);
	EXPECT_EQ(r.P->table_del(r.sw, "cache", k, 3), 0);
	m = mk(NK_NETCACHE_OP_READ, "hotkey01", 9);
	a = sw(&r, &m, CL, 1, NULL);
	EXPECT(a.switch_reply == 1 && m.value_len == 8);   /* K's entry stays */
	rig_free(&r);
}

static void test_races_and_limits(void)
{
	current = "races and limits";
	struct rig r;
	rig_init(&r, "cache_items=2;max_value_bytes=64;hot_threshold=1000");
	static uint8_t big[100], small[8] = "abcdefg";
	EXPECT_EQ(cache_add(&r, "k", 0), 0);
	EXPECT_EQ(cache_add(&r, "j", 1), 0);
	EXPECT_EQ(cache_add(&r, "x", 0), NK_PIPE_EFULL);   /* cache size limit */
	EXPECT_EQ(cache_add(&r, "k", 0), 0);               /* re-add modifies */
	EXPECT_EQ(r.P->reg_write(r.sw, "cache_vlen", 0, 65), NK_PIPE_ERANGE);
	EXPECT_EQ(r.P->reg_write(r.sw, "cache_vlen", 0, 64), 0);
	/* two writes W1, W2 pass the switch; W1's reply comes late: refused */
	struct nk_msg w1 = mk(NK_NETCACHE_OP_WRITE, "k", 10), w2 = mk(NK_NETCACHE_OP_WRITE, "k", 11);
	w1.value = small;
	w1.value_len = 3;
	w2.value = small + 3;
	w2.value_len = 4;
	sw(&r, &w1, CL, 1, NULL);
	sw(&r, &w2, CL, 1, NULL);
	int n;
	struct nk_msg r1 = serve(&r, &w1, &n), r2 = serve(&r, &w2, &n);
	sw(&r, &r1, 1, CL, NULL);
	EXPECT_EQ(rd(&r, "cache_valid", 0), 0);
	EXPECT_EQ(rd(&r, "stats", 5), 1);
	sw(&r, &r2, 1, CL, NULL);
	EXPECT_EQ(rd(&r, "cache_valid", 0), 1);
	EXPECT_EQ(rd(&r, "cache_vlen", 0), 4);
	/* a fetch overtaken by a write: the fetch answer is refused */
	struct nk_msg f = mk(NK_NETCACHE_OP_CACHE_UPDATE, "j", 5);
	sw(&r, &f, NK_NODE_NONE, 1, NULL);
	struct nk_msg fr = serve(&r, &f, &n);     /* server: not found */
	EXPECT_EQ(fr.result, NK_RESULT_NOT_FOUND);
	struct nk_msg wj = mk(NK_NETCACHE_OP_WRITE, "j", 20);
	wj.value = small;
	wj.value_len = 2;
	sw(&r, &wj, CL, 1, NULL);
	struct nk_msg rj = serve(&r, &wj, &n);
	f.value_len = 0;
	fr = serve(&r, &f, &n);                   /* now found, 2 bytes */
	EXPECT_EQ(fr.result, NK_RESULT_OK);
	sw(&r, &fr, 1, CL, NULL);
	EXPECT_EQ(fr.result, NK_RESULT_RETRY);     /* ACK says refused */
	EXPECT_EQ(rd(&r, "cache_valid", 1), 0);
	sw(&r, &rj, 1, CL, NULL);                  /* the write's reply fills it */
	EXPECT_EQ(rd(&r, "cache_valid", 1), 1);
	/* value size limit: a 100 B write leaves the entry invalid */
	struct nk_msg rep = do_write(&r, "k", 30, big, 100);
	EXPECT_EQ(rep.value_len, 0);
	EXPECT_EQ(rd(&r, "cache_valid", 0), 0);
	struct nk_msg m = mk(NK_NETCACHE_OP_READ, "k", 31);
	struct nk_actions a = sw(&r, &m, CL, 1, NULL);
	EXPECT_EQ(a.switch_reply, 0);
	/* a 64 B write fits */
	do_write(&r, "k", 32, big, 64);
	EXPECT_EQ(rd(&r, "cache_valid", 0), 1);
	/* delete: invalidated and stays so; the server answers NOT_FOUND */
	struct nk_msg d = mk(NK_NETCACHE_OP_DELETE, "k", 33);
	sw(&r, &d, CL, 1, NULL);
	EXPECT_EQ(d.flags & NK_NETCACHE_FLAG_REFRESH, 0);
	struct nk_msg dr = serve(&r, &d, &n);
	EXPECT_EQ(dr.op, NK_NETCACHE_OP_DELETE_REPLY);
	sw(&r, &dr, 1, CL, NULL);
	EXPECT_EQ(rd(&r, "cache_valid", 0), 0);
	m = mk(NK_NETCACHE_OP_READ, "k", 34);
	sw(&r, &m, CL, 1, NULL);
	struct nk_msg rr = serve(&r, &m, &n);
	EXPECT_EQ(rr.result, NK_RESULT_NOT_FOUND);
	/* eviction: table_del; reads go to the server again */
	uint64_t k[3];
	table_key("j", 1, k);
	EXPECT_EQ(r.P->table_del(r.sw, "cache", k, 3), 0);
	EXPECT_EQ(r.P->table_del(r.sw, "cache", k, 3), NK_PIPE_ENOENT);
	m = mk(NK_NETCACHE_OP_READ, "j", 35);
	a = sw(&r, &m, CL, 1, NULL);
	EXPECT_EQ(a.switch_reply, 0);
	/* controller writes a value directly through the registers */
	EXPECT_EQ(cache_add(&r, "x", 1), 0);
	EXPECT_EQ(r.P->reg_write(r.sw, "cache_value", 1 * 8, 0x4142000000000000ull), 0);
	EXPECT_EQ(r.P->reg_write(r.sw, "cache_vlen", 1, 2), 0);
	EXPECT_EQ(r.P->reg_write(r.sw, "cache_valid", 1, 1), 0);
	m = mk(NK_NETCACHE_OP_READ, "x", 36);
	a = sw(&r, &m, CL, 1, NULL);
	EXPECT_EQ(a.switch_reply, 1);
	EXPECT(m.value_len == 2 && !memcmp(m.value, "AB", 2));
	/* errors */
	uint64_t v;
	EXPECT_EQ(r.P->reg_read(r.sw, "nope", 0, &v), NK_PIPE_ENOENT);
	EXPECT_EQ(r.P->reg_read(r.sw, "cache_valid", 2, &v), NK_PIPE_ERANGE);
	uint64_t a1 = 5;
	EXPECT_EQ(r.P->table_add(r.sw, "cache", k, 3, &a1, 1), NK_PIPE_ERANGE);
	EXPECT_EQ(r.P->table_add(r.sw, "cache", k, 2, &a1, 1), NK_PIPE_EINVAL);
	a1 = 0;
	k[2] = 17;                              /* longer than the wire's 16 B */
	EXPECT_EQ(r.P->table_add(r.sw, "cache", k, 3, &a1, 1), NK_PIPE_ERANGE);
	EXPECT_EQ(r.P->table_del(r.sw, "cache", k, 3), NK_PIPE_ENOENT);
	rig_free(&r);

	/* bad params */
	const struct nk_pipeline_ops *P = nk_pipeline_find("netcache");
	void *st = calloc(1, P->state_size);
	struct nk_pipeline_cfg cfg = { .n_servers = 2, .params = "max_value_bytes=129" };
	EXPECT(P->init(st, &cfg) != 0);
	cfg.params = "cache_items=0";
	EXPECT(P->init(st, &cfg) != 0);
	cfg.params = "cache_items=10000;max_value_bytes=128";
	EXPECT_EQ(P->init(st, &cfg), 0);
	P->fini(st);
	free(st);
}

static void test_hot_keys(void)
{
	current = "hot keys";
	struct rig r;
	rig_init(&r, "cache_items=4;hot_threshold=3");
	int reports = 0;
	for (int i = 0; i < 10; i++) {
		struct nk_msg m = mk(NK_NETCACHE_OP_READ, "popular", (uint32_t)i);
		struct nk_actions a = sw(&r, &m, CL, 1, NULL);
		EXPECT_EQ(a.fwd, NK_FWD_PORT);     /* still served by the server */
		if (a.to_cpu) {
			reports++;
			EXPECT_EQ(i, 2);           /* the 3rd read crosses the threshold */
		}
	}
	EXPECT_EQ(reports, 1);                     /* the Bloom filter dedups */
	/* other keys below the threshold are never reported */
	for (int k = 0; k < 50; k++) {
		char key[16];
		snprintf(key, sizeof key, "c%d", k);
		struct nk_msg m = mk(NK_NETCACHE_OP_READ, key, 1);
		struct nk_actions a = sw(&r, &m, CL, 1, NULL);
		EXPECT_EQ(a.to_cpu, 0);
	}
	/* writes are not counted */
	for (int i = 0; i < 5; i++) {
		struct nk_msg m = mk(NK_NETCACHE_OP_WRITE, "wonly", (uint32_t)i);
		struct nk_actions a = sw(&r, &m, CL, 1, NULL);
		EXPECT_EQ(a.to_cpu, 0);
	}
	EXPECT_EQ(rd(&r, "stats", 8), 1);
	/* epoch reset: clear sketch + Bloom, the key is reported again */
	EXPECT_EQ(r.P->reg_write(r.sw, "sketch_clear", 0, 1), 0);
	for (int i = 0; i < 3; i++) {
		struct nk_msg m = mk(NK_NETCACHE_OP_READ, "popular", 100);
		struct nk_actions a = sw(&r, &m, CL, 1, NULL);
		if (a.to_cpu)
			reports++;
	}
	EXPECT_EQ(reports, 2);
	/* cached keys are not reported */
	EXPECT_EQ(cache_add(&r, "cached", 0), 0);
	for (int i = 0; i < 10; i++) {
		struct nk_msg m = mk(NK_NETCACHE_OP_READ, "cached", 1);
		struct nk_actions a = sw(&r, &m, CL, 1, NULL);
		EXPECT_EQ(a.to_cpu, 0);
	}
	rig_free(&r);
}

static void test_client(void)
{
	current = "client";
	const struct nk_host_ops *H = nk_host_find("netcache");
	const char *key = "0123456789abcdef0123456789abcdef";   /* 32 B: cut to 16 */
	struct nk_req_spec sp = { .kind = NK_KIND_WRITE, .key_len = 32, .client_id = 1,
				  .home = 1, .req_id = 9, .keyhash = 3, .value_len = 128,
				  .key = (const uint8_t *)key };
	struct nk_msg m;
	EXPECT_EQ(H->client_request(NULL, &sp, &m), 1);
	EXPECT_EQ(m.op, NK_NETCACHE_OP_WRITE);
	EXPECT_EQ(m.key_len, 16);
	EXPECT_EQ(m.value_len, 128);
	uint8_t buf[256];
	int len = nk_wire_encode(&m, buf, sizeof buf);
	EXPECT(len > 0);
	struct nk_msg back;
	EXPECT_EQ(nk_wire_decode(NK_PROTO_NETCACHE, buf, (size_t)len, &back), 0);
	EXPECT(!memcmp(back.key, key, 16));
}

/* The trust boundary (docs/security.md): a client port may not refresh the
 * cache (a forged WRITE_REPLY matching its own write) nor answer a fetch. */
static void test_trust(void)
{
	current = "trust boundary";
	struct rig r;
	rig_init(&r, "cache_items=4");
	EXPECT_EQ(cache_add(&r, "hot", 0), 0);
	struct nk_msg w = mk(NK_NETCACHE_OP_WRITE, "hot", 9);
	w.value_len = 3;
	sw(&r, &w, CL, 1, NULL);              /* invalidates; (client 0, req 9) recorded */
	struct nk_msg fake = mk(NK_NETCACHE_OP_WRITE_REPLY, "hot", 9);
	fake.flags = NK_NETCACHE_FLAG_REFRESH;
	fake.value = (const uint8_t *)"evil";
	fake.value_len = 4;
	struct nk_actions a = sw(&r, &fake, CL + 1, CL, NULL);
	EXPECT_EQ(a.fwd, NK_FWD_DROP);
	EXPECT_EQ(rd(&r, "cache_valid", 0), 0);
	/* a CACHE_UPDATE from a client is neither a fetch nor its answer */
	struct nk_msg cu = mk(NK_NETCACHE_OP_CACHE_UPDATE, "hot", 1);
	a = sw(&r, &cu, CL, 1, NULL);
	EXPECT_EQ(a.fwd, NK_FWD_DROP);
	EXPECT_EQ(rd(&r, "stats", 10), 2);    /* NS_HOST_SERVER_OP */
	EXPECT_EQ(rd(&r, "stats", 6), 0);     /* no fetch started */
	/* the same reply from the server's port refreshes */
	fake.value = (const uint8_t *)"good";
	a = sw(&r, &fake, 1, CL, NULL);
	EXPECT_EQ(a.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "cache_valid", 0), 1);
	rig_free(&r);

	/* hash: replies are the servers' */
	const struct nk_pipeline_ops *h = nk_pipeline_find("hash");
	void *hs = calloc(1, h->state_size);
	uint16_t ports[NS + NC] = { 10, 11, 12, 13 };
	struct nk_pipeline_cfg cfg = { .n_servers = NS, .n_clients = NC, .n_nodes = NS + NC,
				       .node_port = ports, .cpu_port = 99 };
	EXPECT_EQ(h->init(hs, &cfg), 0);
	struct nk_msg rep;
	memset(&rep, 0, sizeof rep);
	rep.proto = NK_PROTO_PLAIN;
	rep.op = NK_PEGASUS_OP_READ_REPLY;
	struct nk_pkt_meta meta = { .src = 1, .dst = CL, .ingress_port = 10 + CL + 1 };
	h->process(hs, &rep, &meta, &a);
	EXPECT_EQ(a.fwd, NK_FWD_DROP);
	meta = (struct nk_pkt_meta){ .src = 1, .dst = CL, .ingress_port = 11 };
	h->process(hs, &rep, &meta, &a);
	EXPECT_EQ(a.fwd, NK_FWD_PORT);
	uint64_t v = 0;
	EXPECT_EQ(h->reg_read(hs, "host_server_op", 0, &v), 0);
	EXPECT_EQ(v, 1);
	h->fini(hs);
	free(hs);
}

int main(void)
{
	test_trust();
	test_hit_miss_write();
	test_padded_key();
	test_races_and_limits();
	test_hot_keys();
	test_client();
	printf("test_netcache: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
