/*
 * test_starcache.c - packet-in/packet-out tests of StarCache: the switch
 * pipeline (hostapps/src/pipeline/starcache.c) and its host logic
 * (hostapps/src/host/starcache.c); docs/starcache.md.
 *
 * Covered: config limits (keys x S), misses and not-yet-fetched keys go to
 * the server, the fetch puts a cache packet into the loop, reads park and
 * the cache packet serves the head of the queue (client, SEQ, LAT, request
 * handle restored; multicast to {client, loop}), an idle cache packet loops
 * on, overflow, write invalidation with the pending-write counter (strict)
 * and the 1-bit flag (faithful, the stale read of digest 8.3), DRAINING,
 * eviction, forged server messages, the client's correction request, the
 * server's count-min sketch and top-k report, multi-packet items
 * (fragments, FLAG visits, reassembly, a mismatched fragment, a gap).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/host.h"
#include "netkv/pipeline.h"
#include "netkv/wire.h"
#include "../src/host/host_lazy.h"

#include "expect.h"

#define NS 2
#define NC 2
#define CL NS            /* client node */
#define CTL (NS + NC)    /* the controller's node */
#define RECIRC 98
#define CPU 99
/* a write number or fetch stamp as LAT carries it (starcache.c SC_LAT) */
#define LAT(idx, n) (((uint32_t)(idx) << 16) | ((uint32_t)(n) & 0xFFFFu))

#include "tstore.h"

/* ---- rig ------------------------------------------------------------------ */

struct rig {
	const struct nk_pipeline_ops *P;
	const struct nk_host_ops *H;
	void *sw, *srv, *cli;
	struct tstore store;
	struct nk_store ns;
};

static int rig_try(struct rig *r, const char *params)
{
	memset(r, 0, sizeof *r);
	r->P = nk_pipeline_find("starcache");
	r->H = nk_host_find("starcache");
	if (!r->P || !r->H) {
		fprintf(stderr, "starcache not registered\n");
		exit(2);
	}
	/* node i on port 10 + i; the controller behind the CPU port */
	uint16_t ports[NS + NC + 1] = { 10, 11, 12, 13, CPU };
	struct nk_pipeline_cfg cfg = { .n_servers = NS, .n_clients = NC, .n_nodes = NS + NC + 1,
				       .node_port = ports, .cpu_port = CPU,
				       .recirc_port = RECIRC, .params = params };
	r->sw = calloc(1, r->P->state_size);
	int rc = r->P->init(r->sw, &cfg);
	if (rc) {
		free(r->sw);
		return rc;
	}
	r->srv = calloc(1, r->H->server_state_size);
	r->cli = calloc(1, r->H->client_state_size);
	struct nk_host_cfg hc = { .n_servers = NS, .n_clients = NC, .id = 1 };
	r->H->server_init(r->srv, &hc);
	r->H->client_init(r->cli, &hc);
	r->ns.ops = &ts_ops;
	r->ns.impl = &r->store;
	return 0;
}

static void rig_init(struct rig *r, const char *params)
{
	if (rig_try(r, params)) {
		fprintf(stderr, "init failed: %s\n", params);
		exit(2);
	}
}

static void rig_free(struct rig *r)
{
	r->P->fini(r->sw);
	r->H->server_fini(r->srv);
	r->H->client_fini(r->cli);
	free(r->sw);
	free(r->srv);
	free(r->cli);
}

/* a client request built by the host logic */
static struct nk_msg req(struct rig *r, int write, const char *key, uint32_t req_id)
{
	struct nk_req_spec sp = { .kind = write ? NK_KIND_WRITE : NK_KIND_READ,
				  .key_len = (uint8_t)strlen(key), .client_id = 0, .home = 1,
				  .req_id = req_id, .value_len = write ? 100 + req_id : 0,
				  .send_ns = 1000 + req_id, .key = (const uint8_t *)key };
	struct nk_msg m;
	EXPECT_EQ(r->H->client_request(r->cli, &sp, &m), 1);
	return m;
}

struct out {
	struct nk_actions act;
	struct nk_pkt_meta meta;
};

static uint64_t now_ns;   /* the switch clock sw_in gives the pipeline */

static struct out sw_in(struct rig *r, struct nk_msg *m, uint16_t src, uint16_t dst,
			int recirc, uint64_t cookie)
{
	struct out o;
	memset(&o, 0, sizeof o);
	o.meta = (struct nk_pkt_meta){ .now_ns = now_ns, .src = src, .dst = dst, .cookie = cookie,
				       .recirculated = (uint8_t)recirc,
				       .from_cpu = src == CTL && !recirc };
	o.meta.ingress_port = recirc ? RECIRC : src == CTL ? CPU : (uint16_t)(10 + src);
	memset(&o.act, 0xAB, sizeof o.act);
	r->P->process(r->sw, m, &o.meta, &o.act);
	return o;
}

/* server 1 handles m, returns its only output */
static struct nk_msg serve(struct rig *r, const struct nk_msg *m)
{
	struct nk_host_out out[NK_HOST_MAX_OUT];
	int n = r->H->server_handle(r->srv, &r->ns, m, CL, out, NK_HOST_MAX_OUT);
	EXPECT_EQ(n, 1);
	return out[0].msg;
}

static uint64_t rd(struct rig *r, const char *name, uint32_t idx)
{
	uint64_t v = 0;
	if (r->P->reg_read(r->sw, name, idx, &v))
		failed++;
	return v;
}

static int cache_add(struct rig *r, const char *key, uint32_t idx)
{
	uint64_t h[2], a[2] = { idx, 1 };   /* home: server 1, as req() says */
	nk_starcache_hkey((const uint8_t *)key, strlen(key), h);
	return r->P->table_add(r->sw, "lookup", h, 2, a, 2);
}

/* the controller's fetch: F_REQ through the switch to the server, the
 * F_REP back through the switch; returns the cache packet (the F_REP) */
static struct nk_msg fetch(struct rig *r, const char *key, struct out *o)
{
	struct nk_msg f = req(r, 0, key, 77);
	f.op = NK_STARCACHE_OP_F_REQ;
	f.kind = NK_KIND_CONTROL;
	struct out a = sw_in(r, &f, CTL, 1, 0, 0);
	EXPECT_EQ(a.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(a.act.port, 11);
	struct nk_msg rep = serve(r, &f);
	EXPECT_EQ(rep.op, NK_STARCACHE_OP_F_REP);
	*o = sw_in(r, &rep, 1, CTL, 0, 0);
	return rep;
}

static void seed(struct rig *r, const char *key, uint32_t vlen)
{
	struct nk_msg m = req(r, 0, key, 0);
	ts_put(&r->store, &m, 1, vlen);
}

/* ---- tests ------------------------------------------------------------------ */

static void test_config_limits(void)
{
	current = "config_limits";
	struct rig r;
	EXPECT_EQ(rig_try(&r, "keys=4096;slots=16"), 0);
	rig_free(&r);
	EXPECT_EQ(rig_try(&r, "keys=256;slots=256"), 0);
	EXPECT_EQ(rd(&r, "req_ip", 65535), 0);
	uint64_t v;
	EXPECT_EQ(r.P->reg_read(r.sw, "req_ip", 65536, &v), NK_PIPE_ERANGE);
	EXPECT_EQ(rd(&r, "ack", 255), 1);
	rig_free(&r);
	EXPECT_EQ(rig_try(&r, "keys=4097;slots=16"), NK_PIPE_ERANGE);   /* > 64 Ki slots */
	EXPECT_EQ(rig_try(&r, "keys=0"), NK_PIPE_ERANGE);
	/* keys x slots wraps to 2 in 64 bits: refused, not a 2-slot table */
	EXPECT_EQ(rig_try(&r, "keys=0x5555555555555556;slots=3"), NK_PIPE_ERANGE);
	EXPECT_EQ(rig_try(&r, "faithful=2"), NK_PIPE_ERANGE);
	EXPECT_EQ(rig_try(&r, "slots=abc"), NK_PIPE_EINVAL);
}

static void test_miss_and_unfetched(void)
{
	current = "miss_and_unfetched";
	struct rig r;
	rig_init(&r, "keys=4;slots=4");
	struct nk_msg m = req(&r, 0, "k-uncached", 1);
	struct out o = sw_in(&r, &m, CL, 1, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(o.act.port, 11);
	EXPECT_EQ(rd(&r, "hits", 0), 0);
	/* installed but not fetched: INVALID, the read goes to the server */
	EXPECT_EQ(cache_add(&r, "k-hot", 2), 0);
	m = req(&r, 0, "k-hot", 2);
	o = sw_in(&r, &m, CL, 1, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "pop", 2), 1);
	EXPECT_EQ(rd(&r, "hits", 0), 1);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_INVALID_READS), 1);
	EXPECT_EQ(rd(&r, "qlen", 2), 0);
	rig_free(&r);
}

static void test_park_and_serve(void)
{
	current = "park_and_serve";
	struct rig r;
	rig_init(&r, "keys=4;slots=4");
	seed(&r, "k-hot", 1024);
	EXPECT_EQ(cache_add(&r, "k-hot", 1), 0);
	struct out o;
	struct nk_msg cp = fetch(&r, "k-hot", &o);
	/* the fetch reply validates the key: to the controller and into the loop */
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(o.act.mcast_group, nk_sc_mcast_group(CTL));
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_VALID);
	EXPECT_EQ(cp.value_len, 1024);
	EXPECT_EQ(cp.frag_cnt, 1);

	/* idle: the cache packet loops on, as an R_REP */
	struct nk_msg loop = cp;
	o = sw_in(&r, &loop, NS + NC, CTL, 1, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_RECIRC);
	EXPECT_EQ(loop.op, NK_STARCACHE_OP_R_REP);

	/* two reads park (dropped, held, not forwarded) */
	struct nk_msg a = req(&r, 0, "k-hot", 10), b = req(&r, 0, "k-hot", 11);
	o = sw_in(&r, &a, CL, 1, 0, 0xA1);
	EXPECT_EQ(o.act.fwd, NK_FWD_DROP);
	EXPECT_EQ(o.act.held, 1);
	o = sw_in(&r, &b, CL + 1, 1, 0, 0xB2);
	EXPECT_EQ(o.act.held, 1);
	EXPECT_EQ(rd(&r, "qlen", 1), 2);
	EXPECT_EQ(rd(&r, "req_ip", 1 * 4 + 0), CL);
	EXPECT_EQ(rd(&r, "req_seq", 1 * 4 + 1), 11);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_PARKED), 2);

	/* the cache packet serves the head, then the next */
	o = sw_in(&r, &loop, NS + NC, CTL, 1, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(o.act.mcast_group, nk_sc_mcast_group(CL));
	EXPECT_EQ(o.act.switch_reply, 1);
	EXPECT_EQ(o.meta.dst, CL);
	EXPECT_EQ(o.meta.cookie, 0xA1);
	EXPECT_EQ(loop.req_id, 10);
	EXPECT_EQ(loop.send_ns, 1010);
	EXPECT_EQ(loop.flags, 1);              /* CACHED */
	EXPECT_EQ(loop.value_len, 1024);
	EXPECT_EQ(rd(&r, "qlen", 1), 1);
	/* the client accepts it: its key */
	EXPECT_EQ(r.H->client_reply(r.cli, &loop), NK_REPLY_DONE);
	o = sw_in(&r, &loop, NS + NC, CL, 1, 0);
	EXPECT_EQ(o.meta.dst, CL + 1);
	EXPECT_EQ(o.meta.cookie, 0xB2);
	EXPECT_EQ(loop.req_id, 11);
	EXPECT_EQ(rd(&r, "qlen", 1), 0);
	EXPECT_EQ(rd(&r, "front", 1), 2);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_SERVED), 2);
	rig_free(&r);
}

static void test_overflow(void)
{
	current = "overflow";
	struct rig r;
	rig_init(&r, "keys=2;slots=3");
	EXPECT_EQ(cache_add(&r, "k-hot", 0), 0);
	struct out o;
	fetch(&r, "k-hot", &o);                /* not stored: no cache packet */
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "state", 0), SC_STATE_INVALID);
	seed(&r, "k-hot", 64);
	fetch(&r, "k-hot", &o);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	for (uint32_t i = 0; i < 3; i++) {
		struct nk_msg m = req(&r, 0, "k-hot", 20 + i);
		EXPECT_EQ(sw_in(&r, &m, CL, 1, 0, 0).act.held, 1);
	}
	struct nk_msg m = req(&r, 0, "k-hot", 23);
	o = sw_in(&r, &m, CL, 1, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);     /* queue full: to the server */
	EXPECT_EQ(rd(&r, "overflow", 0), 1);
	EXPECT_EQ(rd(&r, "hits", 0), 4);
	EXPECT_EQ(rd(&r, "rear", 0), 0);       /* wrapped 2 -> 0 */
	rig_free(&r);
}

/* writes W1, W2 to a cached key, both in flight; their replies come back
 * in order (FIFO server and link). Returns the two W_REPs' switch outcomes. */
static void two_writes(struct rig *r, struct nk_msg *rep1, struct out *o1, struct nk_msg *rep2,
		       struct out *o2)
{
	struct nk_msg w1 = req(r, 1, "k-hot", 31), w2 = req(r, 1, "k-hot", 32);
	sw_in(r, &w1, CL, 1, 0, 0);
	EXPECT_EQ(w1.frag_cnt, 1);             /* FLAG: cached */
	sw_in(r, &w2, CL + 1, 1, 0, 0);
	EXPECT_EQ(rd(r, "state", 0), SC_STATE_INVALID);
	*rep1 = serve(r, &w1);
	*rep2 = serve(r, &w2);
	EXPECT_EQ(rep1->value_len, w1.value_len);
	*o1 = sw_in(r, rep1, 1, CL, 0, 0);
	*o2 = sw_in(r, rep2, 1, CL + 1, 0, 0);
}

static void test_write_strict(void)
{
	current = "write_strict";
	struct rig r;
	rig_init(&r, "keys=2;slots=4");
	seed(&r, "k-hot", 64);
	EXPECT_EQ(cache_add(&r, "k-hot", 0), 0);
	struct out o;
	struct nk_msg old = fetch(&r, "k-hot", &o);
	struct nk_msg rep1, rep2;
	struct out o1, o2;
	struct nk_msg w1 = req(&r, 1, "k-hot", 31);
	sw_in(&r, &w1, CL, 1, 0, 0);
	EXPECT_EQ(rd(&r, "pending_writes", 0), 1);
	/* the old cache packet drops itself while the write is in flight */
	old.op = NK_STARCACHE_OP_R_REP;
	EXPECT_EQ(sw_in(&r, &old, CTL, CTL, 1, 0).act.fwd, NK_FWD_DROP);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_LOOP_DROPS), 1);
	/* a read goes to the server meanwhile */
	struct nk_msg rq = req(&r, 0, "k-hot", 40);
	EXPECT_EQ(sw_in(&r, &rq, CL, 1, 0, 0).act.fwd, NK_FWD_PORT);
	rep1 = serve(&r, &w1);
	o1 = sw_in(&r, &rep1, 1, CL, 0, 0);
	EXPECT_EQ(o1.act.fwd, NK_FWD_MCAST);   /* the only write: back to valid */
	EXPECT_EQ(rd(&r, "state", 0), SC_STATE_VALID);

	two_writes(&r, &rep1, &o1, &rep2, &o2);
	EXPECT_EQ(o1.act.fwd, NK_FWD_PORT);    /* W1's reply: to its client only */
	/* W2's too: it was counted while W1 was in flight, and the server
	 * could have applied them in the other order (switch->server
	 * reordering, test_overlapping_writes_applied_out_of_order); the key
	 * stays INVALID until a write counted alone (or the refetch) */
	EXPECT_EQ(o2.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "pending_writes", 0), 0);
	EXPECT_EQ(rd(&r, "state", 0), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_REVALIDATIONS), 1);
	struct nk_msg w3 = req(&r, 1, "k-hot", 33);
	sw_in(&r, &w3, CL + 1, 1, 0, 0);
	rep2 = serve(&r, &w3);
	o2 = sw_in(&r, &rep2, 1, CL + 1, 0, 0);
	EXPECT_EQ(o2.act.fwd, NK_FWD_MCAST);   /* the loop gets the newest */
	EXPECT_EQ(o2.act.mcast_group, nk_sc_mcast_group(CL + 1));
	EXPECT_EQ(rd(&r, "stats", SC_STAT_REVALIDATIONS), 2);
	rig_free(&r);
}

/* The 1-bit flag of the paper: W1's reply revalidates while W2 is in flight,
 * so v1's cache packet loops on next to v2's and answers a read issued after
 * W2 was acknowledged: the stale read of digest 8.3. */
static void test_write_faithful_stale_read(void)
{
	current = "write_faithful_stale_read";
	struct rig r;
	rig_init(&r, "keys=2;slots=4;faithful=1");
	seed(&r, "k-hot", 64);
	EXPECT_EQ(cache_add(&r, "k-hot", 0), 0);
	struct out o;
	fetch(&r, "k-hot", &o);
	struct nk_msg rep1, rep2;
	struct out o1, o2;
	two_writes(&r, &rep1, &o1, &rep2, &o2);
	EXPECT_EQ(o1.act.fwd, NK_FWD_MCAST);   /* v1 enters the loop ... */
	EXPECT_EQ(o2.act.fwd, NK_FWD_MCAST);   /* ... and so does v2 */
	EXPECT(rep2.ver > rep1.ver);
	/* W2 acknowledged; now a read parks and v1's packet comes around first */
	struct nk_msg rq = req(&r, 0, "k-hot", 50);
	EXPECT_EQ(sw_in(&r, &rq, CL, 1, 0, 0).act.held, 1);
	struct nk_msg v1 = rep1;
	o = sw_in(&r, &v1, CTL, CTL, 1, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(v1.req_id, 50);
	EXPECT(v1.ver < rep2.ver);             /* older than the acknowledged write */
	rig_free(&r);

	/* the same sequence in strict mode serves only v2 */
	rig_init(&r, "keys=2;slots=4");
	seed(&r, "k-hot", 64);
	EXPECT_EQ(cache_add(&r, "k-hot", 0), 0);
	fetch(&r, "k-hot", &o);
	two_writes(&r, &rep1, &o1, &rep2, &o2);
	EXPECT_EQ(o1.act.fwd, NK_FWD_PORT);
	rig_free(&r);
}

static void test_draining_and_eviction(void)
{
	current = "draining_and_eviction";
	struct rig r;
	rig_init(&r, "keys=2;slots=4");
	seed(&r, "k-hot", 64);
	EXPECT_EQ(cache_add(&r, "k-hot", 1), 0);
	struct out o;
	struct nk_msg cp = fetch(&r, "k-hot", &o);
	struct nk_msg m = req(&r, 0, "k-hot", 60);
	EXPECT_EQ(sw_in(&r, &m, CL, 1, 0, 7).act.held, 1);
	EXPECT_EQ(r.P->reg_write(r.sw, "state", 1, SC_STATE_DRAINING), 0);
	EXPECT_EQ(r.P->reg_write(r.sw, "state", 1, 3), NK_PIPE_ERANGE);
	EXPECT_EQ(r.P->reg_write(r.sw, "front", 1, 4), NK_PIPE_ERANGE);
	/* new reads go to the server; a write does not invalidate */
	m = req(&r, 0, "k-hot", 61);
	EXPECT_EQ(sw_in(&r, &m, CL, 1, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_DRAINING_READS), 1);
	struct nk_msg w = req(&r, 1, "k-hot", 62);
	sw_in(&r, &w, CL, 1, 0, 0);
	EXPECT_EQ(w.frag_cnt, 0);
	/* the cache packet still serves the parked read, then leaves the loop */
	o = sw_in(&r, &cp, CTL, CTL, 1, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(o.meta.cookie, 7);
	EXPECT_EQ(rd(&r, "qlen", 1), 0);
	EXPECT_EQ(sw_in(&r, &cp, CTL, CL, 1, 0).act.fwd, NK_FWD_DROP);
	/* eviction: the entry goes, a late cache packet drops itself */
	uint64_t h[2];
	nk_starcache_hkey((const uint8_t *)"k-hot", 5, h);
	EXPECT_EQ(r.P->table_del(r.sw, "lookup", h, 2), 0);
	EXPECT_EQ(r.P->table_del(r.sw, "lookup", h, 2), NK_PIPE_ENOENT);
	EXPECT_EQ(sw_in(&r, &cp, CTL, CL, 1, 0).act.fwd, NK_FWD_DROP);
	m = req(&r, 0, "k-hot", 63);
	EXPECT_EQ(sw_in(&r, &m, CL, 1, 0, 0).act.fwd, NK_FWD_PORT);
	/* the table holds `keys` entries */
	EXPECT_EQ(cache_add(&r, "a", 0), 0);
	EXPECT_EQ(cache_add(&r, "b", 1), 0);
	EXPECT_EQ(cache_add(&r, "c", 1), NK_PIPE_EFULL);
	EXPECT_EQ(cache_add(&r, "c", 2), NK_PIPE_ERANGE);
	rig_free(&r);
}

static void test_forged_and_correction(void)
{
	current = "forged_and_correction";
	struct rig r;
	rig_init(&r, "keys=2;slots=4");
	seed(&r, "k-hot", 64);
	EXPECT_EQ(cache_add(&r, "k-hot", 0), 0);
	/* server-only messages from a client port are dropped and counted */
	struct nk_msg f = req(&r, 0, "k-hot", 70);
	f.op = NK_STARCACHE_OP_F_REP;
	f.frag_cnt = 1;
	EXPECT_EQ(sw_in(&r, &f, CL, CTL, 0, 0).act.fwd, NK_FWD_DROP);
	f.op = NK_STARCACHE_OP_R_REP;
	EXPECT_EQ(sw_in(&r, &f, CL, CL + 1, 0, 0).act.fwd, NK_FWD_DROP);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_HOST_SERVER_OP), 2);
	EXPECT_EQ(rd(&r, "state", 0), SC_STATE_INVALID);
	/* a write whose HKEY is k-hot's but whose key is another: the server
	 * attaches nothing, nothing enters the loop */
	struct out o;
	fetch(&r, "k-hot", &o);
	struct nk_msg w = req(&r, 1, "k-other", 71);
	nk_starcache_hkey((const uint8_t *)"k-hot", 5, w.hkey);
	sw_in(&r, &w, CL, 1, 0, 0);
	struct nk_msg rep = serve(&r, &w);
	EXPECT_EQ(rep.result, NK_RESULT_RETRY);
	EXPECT_EQ(rep.value_len, 0);
	rep.result = NK_RESULT_OK;   /* StarCache's wire has no result field */
	EXPECT_EQ(sw_in(&r, &rep, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "state", 0), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "pending_writes", 0), 0);
	/* a read reply with another key: the client corrects (CRN_REQ) */
	struct nk_msg a = req(&r, 0, "k-a", 80);
	struct nk_msg b = req(&r, 0, "k-b", 81);
	b.req_id = 80;
	b.op = NK_STARCACHE_OP_R_REP;
	EXPECT_EQ(r.H->client_reply(r.cli, &b), NK_REPLY_RETRY);
	struct nk_msg c = req(&r, 0, "k-a", 80);
	EXPECT_EQ(c.op, NK_STARCACHE_OP_CRN_REQ);
	EXPECT_EQ(sw_in(&r, &c, CL, 1, 0, 0).act.fwd, NK_FWD_PORT);   /* no cache logic */
	struct nk_msg ca = serve(&r, &c);
	EXPECT_EQ(ca.op, NK_STARCACHE_OP_R_REP);
	EXPECT_EQ(r.H->client_reply(r.cli, &ca), NK_REPLY_DONE);
	(void)a;
	rig_free(&r);
}

/* the trust boundary (docs/security.md): the switch's fields in a client's
 * request are overwritten and counted, a write to a cached key goes to the
 * key's home, a client's fetch request is dropped */
static void test_trust(void)
{
	current = "trust";
	struct rig r;
	rig_init(&r, "keys=2;slots=4");
	seed(&r, "k-hot", 64);
	EXPECT_EQ(cache_add(&r, "k-hot", 0), 0);
	uint64_t h[2], a[2] = { 1, NS };   /* home must be a server */
	nk_starcache_hkey((const uint8_t *)"k-x", 3, h);
	EXPECT_EQ(r.P->table_add(r.sw, "lookup", h, 2, a, 2), NK_PIPE_ERANGE);
	EXPECT_EQ(r.P->table_add(r.sw, "lookup", h, 2, a, 1), NK_PIPE_EINVAL);
	struct out o;
	fetch(&r, "k-hot", &o);
	EXPECT_EQ(rd(&r, "state", 0), SC_STATE_VALID);
	/* honest requests: nothing counted */
	struct nk_msg m = req(&r, 0, "k-hot", 1);
	sw_in(&r, &m, CL, 1, 0, 0);
	m = req(&r, 1, "k-cold", 2);
	sw_in(&r, &m, CL, 1, 0, 0);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_FORGED_FIELDS), 0);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_WRONG_HOME), 0);
	/* an uncached write claiming FLAG 1 ("cached: attach the value") and CACHED */
	m = req(&r, 1, "k-cold", 3);
	m.frag_cnt = 1;
	m.flags = 1;
	o = sw_in(&r, &m, CL, 1, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(m.frag_cnt, 0);
	EXPECT_EQ(m.frag_idx, 0);
	EXPECT_EQ(m.flags, 0);
	EXPECT_EQ(serve(&r, &m).value_len, 0);   /* the server attaches nothing */
	/* a fragment of a multi-packet write claiming CACHED (the switch's
	 * "attach"): FLAG and FRAG are the write's shape and stay, CACHED goes */
	m = req(&r, 1, "k-cold", 33);
	m.frag_cnt = 9;
	m.frag_idx = 3;
	m.flags = 1;
	sw_in(&r, &m, CL, 1, 0, 0);
	EXPECT_EQ(m.frag_cnt, 9);
	EXPECT_EQ(m.frag_idx, 3);
	EXPECT_EQ(m.flags, 0);
	/* a read with CACHED set */
	m = req(&r, 0, "k-cold", 4);
	m.flags = 1;
	sw_in(&r, &m, CL, 1, 0, 0);
	EXPECT_EQ(m.flags, 0);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_FORGED_FIELDS), 3);
	/* a write of the cached key sent to server 0: the switch sends it to
	 * its home (server 1), whose reply alone revalidates the key */
	m = req(&r, 1, "k-hot", 5);
	o = sw_in(&r, &m, CL, 0, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(o.act.port, 11);
	EXPECT_EQ(o.meta.dst, 1);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_WRONG_HOME), 1);
	EXPECT_EQ(rd(&r, "pending_writes", 0), 1);
	struct nk_msg rep = serve(&r, &m);
	o = sw_in(&r, &rep, 1, CL, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);   /* revalidated: client and loop */
	EXPECT_EQ(rd(&r, "state", 0), SC_STATE_VALID);
	/* an uncached write to another server stays that client's business */
	m = req(&r, 1, "k-cold", 6);
	EXPECT_EQ(sw_in(&r, &m, CL, 0, 0, 0).act.port, 10);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_WRONG_HOME), 1);
	/* a client's fetch request and forged write reply: dropped */
	m = req(&r, 0, "k-hot", 7);
	m.op = NK_STARCACHE_OP_F_REQ;
	EXPECT_EQ(sw_in(&r, &m, CL, 1, 0, 0).act.fwd, NK_FWD_DROP);
	m = req(&r, 1, "k-hot", 8);
	m.op = NK_STARCACHE_OP_W_REP;
	m.frag_cnt = 1;
	EXPECT_EQ(sw_in(&r, &m, CL, CL + 1, 0, 0).act.fwd, NK_FWD_DROP);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_HOST_SERVER_OP), 2);
	rig_free(&r);
}

/* a counted write whose W_REQ or W_REP was lost: once no write has reached
 * the key for stuck_us, a read restarts the count (digest 8.3) */
static void test_stuck_writes(void)
{
	current = "stuck_writes";
	struct rig r;
	rig_init(&r, "keys=2;slots=4;stuck_us=500");
	seed(&r, "k-hot", 64);
	EXPECT_EQ(cache_add(&r, "k-hot", 0), 0);
	struct out o;
	fetch(&r, "k-hot", &o);
	now_ns = 1000000;
	struct nk_msg w = req(&r, 1, "k-hot", 1);
	sw_in(&r, &w, CL, 1, 0, 0);          /* counted; its reply is lost */
	EXPECT_EQ(rd(&r, "pending_writes", 0), 1);
	EXPECT_EQ(rd(&r, "write_ts", 0), 1000);
	now_ns += 500000;                     /* 500 us: not yet */
	struct nk_msg m = req(&r, 0, "k-hot", 2);
	EXPECT_EQ(sw_in(&r, &m, CL, 1, 0, 0).act.port, 11);
	EXPECT_EQ(rd(&r, "pending_writes", 0), 1);
	now_ns += 1000;
	m = req(&r, 0, "k-hot", 3);
	EXPECT_EQ(sw_in(&r, &m, CL, 1, 0, 0).act.port, 11);   /* still to the server */
	EXPECT_EQ(rd(&r, "pending_writes", 0), 0);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_STUCK_WRITES), 1);
	EXPECT_EQ(rd(&r, "state", 0), SC_STATE_INVALID);
	/* the refetch revalidates it */
	fetch(&r, "k-hot", &o);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(rd(&r, "state", 0), SC_STATE_VALID);
	now_ns = 0;
	rig_free(&r);
	EXPECT_EQ(rig_try(&r, "stuck_us=0"), NK_PIPE_ERANGE);
}

/* A rig whose key (vlen value bytes) is cached at idx and fetched: VALID,
 * its cache packet in the loop. */
static void cached_key(struct rig *r, const char *params, const char *key, uint32_t vlen,
		       uint32_t idx)
{
	rig_init(r, params);
	seed(r, key, vlen);
	EXPECT_EQ(cache_add(r, key, idx), 0);
	struct out o;
	fetch(r, key, &o);
	EXPECT_EQ(rd(r, "state", idx), SC_STATE_VALID);
}

/* Two counted writes whose replies come back swapped (reordered between
 * server and switch): the older reply comes last, pending_writes 0, and must
 * not put its older value into the loop (a client that saw the newer write
 * acknowledged would read the older value); only the reply of the last
 * write the switch counted (last_src, last_seq) revalidates. */
static void test_reordered_write_replies(void)
{
	current = "reordered_write_replies";
	struct rig r;
	cached_key(&r, "keys=2;slots=4", "k-hot", 64, 1);
	struct nk_host_out a[NK_HOST_MAX_OUT], b[NK_HOST_MAX_OUT];
	struct nk_msg w1 = req(&r, 1, "k-hot", 60), w2 = req(&r, 1, "k-hot", 61);
	sw_in(&r, &w1, CL, 1, 0, 0);
	sw_in(&r, &w2, CL + 1, 1, 0, 0);
	EXPECT_EQ(rd(&r, "pending_writes", 1), 2);
	EXPECT_EQ(rd(&r, "last_src", 1), SC_LAST_OVERLAP);   /* counted while w1 was in flight */
	EXPECT_EQ(rd(&r, "last_seq", 1), 61);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w1, CL, a, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w2, CL + 1, b, NK_HOST_MAX_OUT), 1);
	EXPECT(a[0].msg.ver < b[0].msg.ver);
	/* the newer reply first: another write still counted, to its client only */
	EXPECT_EQ(sw_in(&r, &b[0].msg, 1, CL + 1, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "pending_writes", 1), 1);
	/* the older one last: the count reaches 0, but it is not the last
	 * counted write's: to its client only, the key stays INVALID (reads go
	 * to the server; the watchdog refetches) */
	EXPECT_EQ(sw_in(&r, &a[0].msg, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "pending_writes", 1), 0);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_REVALIDATIONS), 0);
	/* in order, the last write's reply revalidates */
	struct nk_msg w3 = req(&r, 1, "k-hot", 62);
	sw_in(&r, &w3, CL, 1, 0, 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w3, CL, a, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(sw_in(&r, &a[0].msg, 1, CL, 0, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_VALID);
	rig_free(&r);
}

/* Overlapping counted writes that the server applies in another order
 * than the switch counted them (switch->server reordering): W1 (client A)
 * and W2 (client B) pass, the server applies W2 (version 2) then W1
 * (version 3), the replies come back swapped again: W1's first (A is
 * acknowledged with version 3), W2's last. W2 was the last counted write,
 * but its reply carries the older version: with last = (B, SEQ) it looped
 * it. A write counted while another is in flight marks the key's writes
 * overlapping (last_src SC_LAST_OVERLAP): none of their replies revalidates.
 * The same closes a client reusing its SEQ (X's first write's reply coming
 * last matched last = (X, SEQ)). */
static void test_overlapping_writes_applied_out_of_order(void)
{
	current = "overlapping_writes_applied_out_of_order";
	struct rig r;
	cached_key(&r, "keys=2;slots=4", "k-hot", 64, 1);
	struct nk_host_out a[NK_HOST_MAX_OUT], b[NK_HOST_MAX_OUT], x[NK_HOST_MAX_OUT];
	struct nk_msg w1 = req(&r, 1, "k-hot", 60), w2 = req(&r, 1, "k-hot", 61);
	sw_in(&r, &w1, CL, 1, 0, 0);
	sw_in(&r, &w2, CL + 1, 1, 0, 0);
	/* the server gets them swapped */
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w2, CL + 1, b, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w1, CL, a, NK_HOST_MAX_OUT), 1);
	EXPECT(b[0].msg.ver < a[0].msg.ver);
	EXPECT_EQ(sw_in(&r, &a[0].msg, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	/* W2's reply last: count 0, but its version is older than W1's */
	EXPECT_EQ(sw_in(&r, &b[0].msg, 1, CL + 1, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "pending_writes", 1), 0);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_REVALIDATIONS), 0);
	/* a client reusing its SEQ: X (70), H (71), X (70) again; the server
	 * applies them in order, X's first reply comes last */
	struct nk_msg x1 = req(&r, 1, "k-hot", 70), h = req(&r, 1, "k-hot", 71);
	struct nk_msg x2 = req(&r, 1, "k-hot", 70);
	sw_in(&r, &x1, CL, 1, 0, 0);
	sw_in(&r, &h, CL + 1, 1, 0, 0);
	sw_in(&r, &x2, CL, 1, 0, 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &x1, CL, x, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &h, CL + 1, a, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &x2, CL, b, NK_HOST_MAX_OUT), 1);
	EXPECT(x[0].msg.ver < a[0].msg.ver);
	EXPECT_EQ(sw_in(&r, &a[0].msg, 1, CL + 1, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(sw_in(&r, &b[0].msg, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(sw_in(&r, &x[0].msg, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);   /* not looped */
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_REVALIDATIONS), 0);
	/* the next write counted alone revalidates */
	struct nk_msg w3 = req(&r, 1, "k-hot", 72);
	sw_in(&r, &w3, CL, 1, 0, 0);
	EXPECT_EQ(rd(&r, "last_src", 1), CL);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w3, CL, a, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(sw_in(&r, &a[0].msg, 1, CL, 0, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_VALID);
	rig_free(&r);
}

/* A fetch's reply that comes after a write's reply revalidated the key
 * (reordered between server and switch, or a watchdog refetch answered
 * late) carries an older value: the switch refuses it (RETRY to the
 * controller) and the newer packet keeps looping. Before, with no write in
 * flight, it was taken: the newer packet marked stale and the older value
 * looped. */
static void test_late_fetch_reply(void)
{
	current = "late_fetch_reply";
	struct rig r;
	cached_key(&r, "keys=2;slots=4", "k-hot", 64, 1);
	/* the controller fetches again; the server answers with the stored value */
	struct nk_msg f = req(&r, 0, "k-hot", 78);
	f.op = NK_STARCACHE_OP_F_REQ;
	f.kind = NK_KIND_CONTROL;
	sw_in(&r, &f, CTL, 1, 0, 0);
	struct nk_msg late = serve(&r, &f);
	/* a write passes, is applied and its reply revalidates the key */
	struct nk_msg w = req(&r, 1, "k-hot", 63);
	sw_in(&r, &w, CL, 1, 0, 0);
	struct nk_msg wrep = serve(&r, &w);
	EXPECT(late.ver < wrep.ver);
	EXPECT_EQ(sw_in(&r, &wrep, 1, CL, 0, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_VALID);
	EXPECT_EQ(rd(&r, "stale", 1), 1);
	EXPECT_EQ(rd(&r, "inloop", 1), 2);
	/* the fetch's reply last: refused, the loop keeps the written value */
	struct out o = sw_in(&r, &late, 1, CTL, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(o.act.port, CPU);
	EXPECT_EQ(late.result, NK_RESULT_RETRY);
	EXPECT_EQ(rd(&r, "stale", 1), 1);
	EXPECT_EQ(rd(&r, "inloop", 1), 2);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_FETCHES), 1);   /* the first fetch only */
	rig_free(&r);
}

/* A fetch's reply tied to no write (a review's find): the controller's
 * F_REQ reads v0 at the server, its F_REP is delayed on the server->switch
 * link; two overlapping writes are counted, applied and answered first
 * (count back to 0, the key INVALID: an overlap revalidates nothing), then
 * the late F_REP came with the count 0 and the key not VALID, was taken and
 * looped v0 after both writers were acknowledged. The F_REQ now carries
 * the key's write count (wcount, in LAT), the server echoes it, and an
 * F_REP is taken only if no write was counted since: refused (RETRY to the
 * controller), the key stays INVALID; the fetch sent again is taken. */
static void test_fetch_reply_behind_overlapping_writes(void)
{
	current = "fetch_reply_behind_overlapping_writes";
	struct rig r;
	rig_init(&r, "keys=2;slots=4");
	seed(&r, "k-hot", 64);
	EXPECT_EQ(cache_add(&r, "k-hot", 0), 0);
	struct nk_msg f = req(&r, 0, "k-hot", 78);
	f.op = NK_STARCACHE_OP_F_REQ;
	f.kind = NK_KIND_CONTROL;
	EXPECT_EQ(sw_in(&r, &f, CTL, 1, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ((uint32_t)f.send_ns, rd(&r, "wcount", 0));   /* the switch's stamp */
	struct nk_msg late = serve(&r, &f);                    /* v0, delayed */
	EXPECT_EQ(late.send_ns, f.send_ns);                    /* echoed */
	struct nk_msg rep1, rep2;
	struct out o1, o2;
	two_writes(&r, &rep1, &o1, &rep2, &o2);
	EXPECT_EQ(o1.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(o2.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "pending_writes", 0), 0);
	EXPECT_EQ(rd(&r, "state", 0), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "wcount", 0), (uint64_t)((uint32_t)f.send_ns + 2));
	EXPECT(late.ver < rep2.ver);
	/* the late F_REP: refused, nothing loops */
	struct out o = sw_in(&r, &late, 1, CTL, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(o.act.port, CPU);
	EXPECT_EQ(late.result, NK_RESULT_RETRY);
	EXPECT_EQ(rd(&r, "state", 0), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "inloop", 0), 0);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_FETCHES), 0);
	/* the controller fetches again: no write counted since, taken */
	struct nk_msg cp = fetch(&r, "k-hot", &o);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(cp.ver, rep2.ver);
	EXPECT_EQ(rd(&r, "state", 0), SC_STATE_VALID);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_FETCHES), 1);
	/* a fetch passing while overlapping writes are in flight, that the
	 * server reads before them (switch->server reordering): its stamp is
	 * one behind the count, and the late F_REP is refused too */
	struct nk_msg w4 = req(&r, 1, "k-hot", 36), w5 = req(&r, 1, "k-hot", 37);
	sw_in(&r, &w4, CL, 1, 0, 0);
	sw_in(&r, &w5, CL + 1, 1, 0, 0);
	struct nk_msg f2 = req(&r, 0, "k-hot", 79);
	f2.op = NK_STARCACHE_OP_F_REQ;
	f2.kind = NK_KIND_CONTROL;
	sw_in(&r, &f2, CTL, 1, 0, 0);
	EXPECT_EQ((uint32_t)f2.send_ns + 1, rd(&r, "wcount", 0));
	struct nk_msg late2 = serve(&r, &f2);
	rep1 = serve(&r, &w4);
	rep2 = serve(&r, &w5);
	EXPECT_EQ(sw_in(&r, &rep1, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(sw_in(&r, &rep2, 1, CL + 1, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "state", 0), SC_STATE_INVALID);
	o = sw_in(&r, &late2, 1, CTL, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(late2.result, NK_RESULT_RETRY);
	EXPECT_EQ(rd(&r, "state", 0), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_FETCHES), 1);
	rig_free(&r);
}

/* A duplicated W_REP (a review's find (2), docs/starcache.md
 * "Coherence"): W1 (A) and W2 (B) overlap; W1's reply comes twice. The duplicate
 * lowered the count a second time, to 0 with W2 still in flight, so W3
 * became a lone write; the server got W3 before W2 (switch->server
 * reordering): W2's reply acknowledged B with the newer version and W3's,
 * the last counted write's with the count 0, looped the older one. Each
 * counted W_REQ now carries its write number in LAT (wcount, in wmask
 * until its echoed W_REP clears it): the duplicate's number is not in
 * flight, it lowers nothing and invalidates the key (late_writes). */
static void test_duplicated_write_reply(void)
{
	current = "duplicated_write_reply";
	struct rig r;
	cached_key(&r, "keys=2;slots=4", "k-hot", 64, 1);
	struct nk_host_out a[NK_HOST_MAX_OUT], b[NK_HOST_MAX_OUT], c[NK_HOST_MAX_OUT];
	struct nk_msg w1 = req(&r, 1, "k-hot", 80), w2 = req(&r, 1, "k-hot", 81);
	uint32_t wc = (uint32_t)rd(&r, "wcount", 1);
	sw_in(&r, &w1, CL, 1, 0, 0);
	sw_in(&r, &w2, CL + 1, 1, 0, 0);
	EXPECT_EQ((uint32_t)w1.send_ns, LAT(1, wc + 1));   /* the write numbers, in LAT */
	EXPECT_EQ((uint32_t)w2.send_ns, LAT(1, wc + 2));
	EXPECT_EQ(rd(&r, "wmask", 1), 3);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w1, CL, a, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(a[0].msg.send_ns, w1.send_ns);     /* echoed */
	struct nk_msg dup = a[0].msg;
	EXPECT_EQ(sw_in(&r, &a[0].msg, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "pending_writes", 1), 1);
	EXPECT_EQ(rd(&r, "wmask", 1), 1);   /* W2, the newer number */
	/* the duplicate: W2 is still counted */
	EXPECT_EQ(sw_in(&r, &dup, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "pending_writes", 1), 1);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_LATE_WRITES), 1);
	EXPECT_EQ(rd(&r, "last_src", 1), SC_LAST_OVERLAP);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_INVALID);
	/* W3 overlaps W2; the server applies W3, then W2 */
	struct nk_msg w3 = req(&r, 1, "k-hot", 82);
	sw_in(&r, &w3, CL, 1, 0, 0);
	EXPECT_EQ(rd(&r, "last_src", 1), SC_LAST_OVERLAP);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w3, CL, c, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w2, CL + 1, b, NK_HOST_MAX_OUT), 1);
	EXPECT(c[0].msg.ver < b[0].msg.ver);
	EXPECT_EQ(sw_in(&r, &b[0].msg, 1, CL + 1, 0, 0).act.fwd, NK_FWD_PORT);  /* B acked */
	/* W3's reply last, the count 0: its older version does not loop */
	EXPECT_EQ(sw_in(&r, &c[0].msg, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "pending_writes", 1), 0);
	EXPECT_EQ(rd(&r, "wmask", 1), 0);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_REVALIDATIONS), 0);
	/* B reads: the server answers, not an older cache packet */
	struct nk_msg rq = req(&r, 0, "k-hot", 83);
	EXPECT_EQ(sw_in(&r, &rq, CL + 1, 1, 0, 0).act.port, 11);
	/* the next lone write revalidates */
	struct nk_msg w4 = req(&r, 1, "k-hot", 84);
	sw_in(&r, &w4, CL, 1, 0, 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w4, CL, a, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(sw_in(&r, &a[0].msg, 1, CL, 0, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_VALID);
	/* a duplicate of a reply that revalidated: the key is refetched
	 * (the cost of a duplicate), nothing older loops */
	EXPECT_EQ(sw_in(&r, &a[0].msg, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_LATE_WRITES), 2);
	struct out o;
	fetch(&r, "k-hot", &o);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	rig_free(&r);
	/* the paper's mode: LAT is the client's, no write numbers */
	cached_key(&r, "keys=2;slots=4;faithful=1", "k-hot", 64, 1);
	w1 = req(&r, 1, "k-hot", 80);
	uint64_t lat = w1.send_ns;
	sw_in(&r, &w1, CL, 1, 0, 0);
	EXPECT_EQ(w1.send_ns, lat);
	EXPECT_EQ(rd(&r, "wmask", 1), 0);
	struct nk_msg rep = serve(&r, &w1);
	dup = rep;
	EXPECT_EQ(sw_in(&r, &rep, 1, CL, 0, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(sw_in(&r, &dup, 1, CL, 0, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_LATE_WRITES), 0);
	rig_free(&r);
}

/* After a late write reply: the writer's read goes to the server, the
 * older cache packet (stale, as its F_REP) drops itself, and the next
 * refetch loops the version ver. */
static void refetched_after_late_reply(struct rig *r, struct nk_msg stale, uint32_t read_id,
				       uint64_t ver)
{
	struct nk_msg rq = req(r, 0, "k-hot", read_id);
	struct out o = sw_in(r, &rq, CL, 1, 0, 0);
	EXPECT_EQ(o.act.held, 0);
	EXPECT_EQ(o.act.port, 11);
	stale.op = NK_STARCACHE_OP_R_REP;
	EXPECT_EQ(sw_in(r, &stale, CTL, CTL, 1, 0).act.fwd, NK_FWD_DROP);
	struct nk_msg cp = fetch(r, "k-hot", &o);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(cp.ver, ver);
}

/* The stuck_us restart with a write still in flight (a review's find (3),
 * docs/starcache.md "Coherence"): W1 is counted and delayed past
 * stuck_us; a read restarts the count, the watchdog's refetch overtakes W1
 * and loops v0; then W1 is applied and acknowledged, and its writer's next
 * read was answered by v0's cache packet. W1's reply now finds its write
 * number no longer in flight: the key goes INVALID (v0's packet drops
 * itself, reads go to the server) until the next refetch. And a fetch that
 * read before W1 was applied, whose F_REP comes after W1's reply, is
 * refused (the write number moved on). */
static void test_write_later_than_the_stuck_restart(void)
{
	current = "write_later_than_the_stuck_restart";
	struct rig r;
	cached_key(&r, "keys=2;slots=4;stuck_us=500", "k-hot", 64, 1);
	now_ns = 1000000;
	struct nk_msg w1 = req(&r, 1, "k-hot", 90);
	sw_in(&r, &w1, CL, 1, 0, 0);                /* counted, delayed */
	now_ns += 600000;
	struct nk_msg rq = req(&r, 0, "k-hot", 91);
	EXPECT_EQ(sw_in(&r, &rq, CL + 1, 1, 0, 0).act.port, 11);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_STUCK_WRITES), 1);
	EXPECT_EQ(rd(&r, "pending_writes", 1), 0);
	EXPECT_EQ(rd(&r, "wmask", 1), 0);
	/* the refetch overtakes W1: v0 loops */
	struct out o;
	struct nk_msg v0 = fetch(&r, "k-hot", &o);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_VALID);
	/* W1 applied, its reply: late; to its client only, the key INVALID */
	struct nk_msg rep = serve(&r, &w1);
	EXPECT(rep.ver > v0.ver);
	EXPECT_EQ(sw_in(&r, &rep, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_LATE_WRITES), 1);
	/* the writer reads: to the server; v0's packet drops itself; the
	 * next refetch loops W1's value */
	refetched_after_late_reply(&r, v0, 92, rep.ver);
	/* again, the fetch reading before W2 is applied, its F_REP after
	 * W2's reply: refused */
	struct nk_msg w2 = req(&r, 1, "k-hot", 93);
	sw_in(&r, &w2, CL, 1, 0, 0);
	now_ns += 600000;
	rq = req(&r, 0, "k-hot", 94);
	sw_in(&r, &rq, CL + 1, 1, 0, 0);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_STUCK_WRITES), 2);
	struct nk_msg f = req(&r, 0, "k-hot", 95);
	f.op = NK_STARCACHE_OP_F_REQ;
	f.kind = NK_KIND_CONTROL;
	sw_in(&r, &f, CTL, 1, 0, 0);
	struct nk_msg late = serve(&r, &f);
	rep = serve(&r, &w2);
	EXPECT(late.ver < rep.ver);
	EXPECT_EQ(sw_in(&r, &rep, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	o = sw_in(&r, &late, 1, CTL, 0, 0);
	EXPECT_EQ(o.act.port, CPU);
	EXPECT_EQ(late.result, NK_RESULT_RETRY);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_INVALID);
	now_ns = 0;
	rig_free(&r);
}

/* wmask follows 32 write numbers: a write still in flight 32 later write
 * numbers on (late replies included) falls out (pending_writes stops
 * counting it) and its reply is late; a server's W_REP with any LAT is
 * counted, never a crash. */
static void test_write_number_window(void)
{
	current = "write_number_window";
	struct rig r;
	cached_key(&r, "keys=2;slots=4", "k-hot", 64, 1);
	struct nk_msg w[33];
	for (uint32_t i = 0; i < 33; i++) {
		w[i] = req(&r, 1, "k-hot", 100 + i);
		sw_in(&r, &w[i], CL, 1, 0, 0);
	}
	EXPECT_EQ(rd(&r, "wmask", 1), 0xFFFFFFFFu);
	EXPECT_EQ(rd(&r, "pending_writes", 1), 32);
	struct nk_msg rep = serve(&r, &w[0]);
	EXPECT_EQ(sw_in(&r, &rep, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_LATE_WRITES), 1);
	/* the late reply moved the write number on: w[1] fell out too */
	EXPECT_EQ(rd(&r, "pending_writes", 1), 31);
	EXPECT_EQ(rd(&r, "wmask", 1), 0xFFFFFFFEu);
	for (uint32_t i = 2; i < 33; i++) {
		rep = serve(&r, &w[i]);
		EXPECT_EQ(sw_in(&r, &rep, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	}
	EXPECT_EQ(rd(&r, "pending_writes", 1), 0);
	EXPECT_EQ(rd(&r, "wmask", 1), 0);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_LATE_WRITES), 1);
	/* a server's reply with any write number: counted, to its client */
	static const uint64_t lats[] = { 0, 1, 31, 32, 0x7FFFFFFF, 0xFFFFFFFF, 0x1234567890ull };
	for (unsigned i = 0; i < sizeof lats / sizeof lats[0]; i++) {
		rep = serve(&r, &w[1]);
		rep.send_ns = lats[i];
		EXPECT_EQ(sw_in(&r, &rep, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	}
	EXPECT_EQ(rd(&r, "stats", SC_STAT_LATE_WRITES), 8);
	EXPECT_EQ(rd(&r, "pending_writes", 1), 0);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_INVALID);
	rig_free(&r);
}

/* A key deleted and re-added at another CacheIdx (docs/starcache.md
 * "Coherence", hole (5)): write numbers and fetch stamps count per slot, and
 * a slot's count outlives its tenants, so a reply stamped at the key's old
 * slot could carry a number in flight at the new one. (a) X's write (SEQ
 * 70) is counted at slot 2 as number 70 and applied (v2), its reply
 * delayed; the key is re-inserted at slot 5, whose count sits at 68; the
 * fetch read before X's write, loops v1; B's lone write is acknowledged
 * (v3); X resends SEQ 70, counted alone at slot 5 as number 70; the old
 * reply cleared it (count 0, last = (X, 70)) and looped v2, which B's read
 * then got. (b) An F_REQ stamped 40 at slot 2 reads v1; the key is deleted,
 * A's write passes uncounted and is acknowledged (v2); the key is
 * re-inserted at slot 5 whose count is 40: the old F_REP was fresh and
 * looped v1. LAT now carries the slot too (SC_LAT): both are refused. */
static void test_write_number_across_slots(void)
{
	current = "write_number_across_slots";
	struct rig r;
	uint64_t h[2];
	nk_starcache_hkey((const uint8_t *)"k-hot", 5, h);
	cached_key(&r, "keys=8;slots=4", "k-hot", 64, 2);
	EXPECT_EQ(r.P->reg_write(r.sw, "wcount", 2, 69), 0);
	struct nk_msg wx = req(&r, 1, "k-hot", 70);
	sw_in(&r, &wx, CL, 1, 0, 0);                 /* counted at slot 2: 70 */
	EXPECT_EQ((uint32_t)wx.send_ns, LAT(2, 70));
	EXPECT_EQ(r.P->table_del(r.sw, "lookup", h, 2), 0);
	EXPECT_EQ(cache_add(&r, "k-hot", 5), 0);
	EXPECT_EQ(r.P->reg_write(r.sw, "wcount", 5, 68), 0);
	struct nk_msg f = req(&r, 0, "k-hot", 77);
	f.op = NK_STARCACHE_OP_F_REQ;
	f.kind = NK_KIND_CONTROL;
	sw_in(&r, &f, CTL, 1, 0, 0);
	struct nk_msg v1 = serve(&r, &f);            /* reads before X's write */
	struct nk_msg repx = serve(&r, &wx);         /* X's write applied, reply delayed */
	EXPECT(v1.ver < repx.ver);
	struct out o = sw_in(&r, &v1, 1, CTL, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	/* B's lone write: acknowledged, revalidates */
	struct nk_msg wb = req(&r, 1, "k-hot", 71);
	sw_in(&r, &wb, CL + 1, 1, 0, 0);             /* slot 5: 69 */
	struct nk_msg repb = serve(&r, &wb);
	EXPECT(repb.ver > repx.ver);
	EXPECT_EQ(sw_in(&r, &repb, 1, CL + 1, 0, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(rd(&r, "state", 5), SC_STATE_VALID);
	/* X resends SEQ 70: counted alone at slot 5 as 70 */
	struct nk_msg wx2 = req(&r, 1, "k-hot", 70);
	sw_in(&r, &wx2, CL, 1, 0, 0);
	EXPECT_EQ((uint32_t)wx2.send_ns, LAT(5, 70));
	/* the old reply: stamped at slot 2, late; v2 does not loop */
	o = sw_in(&r, &repx, 1, CL, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "state", 5), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_LATE_WRITES), 1);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_REVALIDATIONS), 1);   /* B's only */
	/* B reads: to the server, not to v2's cache packet */
	struct nk_msg rq = req(&r, 0, "k-hot", 72);
	o = sw_in(&r, &rq, CL + 1, 1, 0, 0);
	EXPECT_EQ(o.act.held, 0);
	EXPECT_EQ(o.act.port, 11);
	/* the resend's reply: still counted, but after the late one it
	 * revalidates nothing; the refetch loops the stored value */
	struct nk_msg repx2 = serve(&r, &wx2);
	EXPECT_EQ(sw_in(&r, &repx2, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "pending_writes", 5), 0);
	EXPECT_EQ(rd(&r, "state", 5), SC_STATE_INVALID);
	struct nk_msg cp = fetch(&r, "k-hot", &o);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	EXPECT(cp.ver >= repb.ver);
	rig_free(&r);

	/* (b) the F_REP's stamp across slots */
	rig_init(&r, "keys=8;slots=4");
	seed(&r, "k-hot", 64);
	EXPECT_EQ(cache_add(&r, "k-hot", 2), 0);
	EXPECT_EQ(r.P->reg_write(r.sw, "wcount", 2, 40), 0);
	f = req(&r, 0, "k-hot", 78);
	f.op = NK_STARCACHE_OP_F_REQ;
	f.kind = NK_KIND_CONTROL;
	sw_in(&r, &f, CTL, 1, 0, 0);
	EXPECT_EQ((uint32_t)f.send_ns, LAT(2, 40));
	struct nk_msg late = serve(&r, &f);          /* v1, delayed */
	EXPECT_EQ(r.P->table_del(r.sw, "lookup", h, 2), 0);
	struct nk_msg wa = req(&r, 1, "k-hot", 73);
	EXPECT_EQ(sw_in(&r, &wa, CL, 1, 0, 0).act.port, 11);   /* uncached: not counted */
	struct nk_msg repa = serve(&r, &wa);
	EXPECT(repa.ver > late.ver);
	EXPECT_EQ(sw_in(&r, &repa, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);   /* A acknowledged */
	EXPECT_EQ(cache_add(&r, "k-hot", 5), 0);
	EXPECT_EQ(r.P->reg_write(r.sw, "wcount", 5, 40), 0);
	o = sw_in(&r, &late, 1, CTL, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(late.result, NK_RESULT_RETRY);
	EXPECT_EQ(rd(&r, "state", 5), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_FETCHES), 0);
	cp = fetch(&r, "k-hot", &o);                 /* the controller's retry */
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(cp.ver, repa.ver);
	rig_free(&r);
}

/* An uncounted write racing an insert (a review's find): X's W_REQ passes
 * while the key is uncached (FLAG 0: not counted); the controller inserts
 * the key and its F_REQ, stamped with no write in flight, overtakes X's
 * W_REQ on the switch->server link; the server reads v1, then applies X's
 * write (v2); the F_REP was taken (VALID, v1 looping), X's W_REP passed to
 * X without touching the key, and X's next read parked and got v1. An
 * uncounted write's reply for a key cached and not DRAINING is now late:
 * the key goes INVALID (v1's packet drops itself, X's read goes to the
 * server) and the write number moves on (an F_REP it overtook is refused). */
/* X's write passes the uncached key (not counted), the key is inserted and
 * its F_REQ overtakes the write to the server: v1 the F_REP (the older
 * value), rep X's W_REP (FLAG 0). */
static void write_then_insert(struct rig *r, const char *params, uint32_t id,
			      struct nk_msg *v1, struct nk_msg *rep)
{
	rig_init(r, params);
	seed(r, "k-hot", 64);
	struct nk_msg w = req(r, 1, "k-hot", id);
	sw_in(r, &w, CL, 1, 0, 0);
	EXPECT_EQ(w.frag_cnt, 0);                  /* uncached: not counted */
	EXPECT_EQ(cache_add(r, "k-hot", 1), 0);
	struct nk_msg f = req(r, 0, "k-hot", id + 1);
	f.op = NK_STARCACHE_OP_F_REQ;
	f.kind = NK_KIND_CONTROL;
	sw_in(r, &f, CTL, 1, 0, 0);
	*v1 = serve(r, &f);                        /* overtook X's write */
	*rep = serve(r, &w);
	EXPECT(v1->ver < rep->ver);
	EXPECT_EQ(rep->frag_cnt, 0);
}

static void test_uncounted_write_racing_an_insert(void)
{
	current = "uncounted_write_racing_an_insert";
	struct rig r;
	struct nk_msg v1, rep;
	write_then_insert(&r, "keys=2;slots=4", 110, &v1, &rep);
	struct out o = sw_in(&r, &v1, 1, CTL, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);        /* nothing in flight: taken */
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_VALID);
	/* X's reply: late; to X only, the key INVALID */
	o = sw_in(&r, &rep, 1, CL, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(o.act.port, 12);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_LATE_WRITES), 1);
	EXPECT_EQ(rd(&r, "pending_writes", 1), 0);
	/* X reads: to the server, not parked for v1; v1's packet drops
	 * itself; the refetch loops X's value */
	refetched_after_late_reply(&r, v1, 112, rep.ver);
	rig_free(&r);
	/* the replies swapped on the way back (X's first): the F_REP, stamped
	 * before, is refused; the key stays INVALID for the next fetch */
	write_then_insert(&r, "keys=2;slots=4", 113, &v1, &rep);
	EXPECT_EQ(sw_in(&r, &rep, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	o = sw_in(&r, &v1, 1, CTL, 0, 0);
	EXPECT_EQ(o.act.port, CPU);
	EXPECT_EQ(v1.result, NK_RESULT_RETRY);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_FETCHES), 0);
	/* an uncounted write's reply for a DRAINING key or one not cached
	 * passes as before (nothing of the key loops that it could be
	 * newer than) */
	fetch(&r, "k-hot", &o);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(r.P->reg_write(r.sw, "state", 1, SC_STATE_DRAINING), 0);
	struct nk_msg w = req(&r, 1, "k-hot", 115);
	sw_in(&r, &w, CL, 1, 0, 0);
	EXPECT_EQ(w.frag_cnt, 0);
	rep = serve(&r, &w);
	struct nk_msg rep2 = rep;
	EXPECT_EQ(sw_in(&r, &rep, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_DRAINING);
	uint64_t h[2];
	nk_starcache_hkey((const uint8_t *)"k-hot", 5, h);
	EXPECT_EQ(r.P->table_del(r.sw, "lookup", h, 2), 0);
	EXPECT_EQ(sw_in(&r, &rep2, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_LATE_WRITES), 1);
	rig_free(&r);
	/* the paper's mode: unchanged, the uncounted reply touches nothing */
	write_then_insert(&r, "keys=2;slots=4;faithful=1", 116, &v1, &rep);
	EXPECT_EQ(sw_in(&r, &v1, 1, CTL, 0, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(sw_in(&r, &rep, 1, CL, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_VALID);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_LATE_WRITES), 0);
	rig_free(&r);
}

/* The controller's write through netkv-switch or BMv2: its address is
 * outside the rack plan, so the W_REQ's source and its reply's destination
 * are both NK_NODE_NONE; the reply answers the last counted write (the P4
 * twin compares the raw nodes). Before, C compared last_src (NONE) with the
 * destination mapped to the controller's node id: the reply was refused
 * and the key stayed INVALID. */
static void test_controller_write_reply(void)
{
	current = "controller_write_reply";
	struct rig r;
	cached_key(&r, "keys=2;slots=4", "k-hot", 64, 1);
	struct nk_msg w = req(&r, 1, "k-hot", 64);
	struct out o;
	memset(&o, 0, sizeof o);
	o.meta = (struct nk_pkt_meta){ .now_ns = now_ns, .src = NK_NODE_NONE, .dst = 1,
				       .from_cpu = 1, .ingress_port = CPU };
	r.P->process(r.sw, &w, &o.meta, &o.act);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&r, "last_src", 1), NK_NODE_NONE);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_INVALID);
	struct nk_msg rep = serve(&r, &w);
	EXPECT_EQ(sw_in(&r, &rep, 1, NK_NODE_NONE, 0, 0).act.fwd, NK_FWD_MCAST);  /* {CPU, loop} */
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_VALID);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_REVALIDATIONS), 1);
	rig_free(&r);
}

/* every message a hostile client sends is one the switch refuses, rewrites
 * or passes as an ordinary request (host.h client_hostile) */
static void test_hostile_messages(void)
{
	current = "hostile_messages";
	struct rig r;
	rig_init(&r, "keys=2;slots=4");
	struct nk_req_spec sp = { .kind = NK_KIND_WRITE, .key_len = 5, .home = 1, .req_id = 9,
				  .value_len = 64, .key = (const uint8_t *)"k-hot" };
	int seen[10] = { 0 };
	for (uint64_t d = 0; d < 40; d++) {
		struct nk_msg m;
		uint64_t kind = d % 10, draw = kind + 10 * (d * 2654435761ull);
		uint16_t dst = r.H->client_hostile(r.cli, draw, &sp, 1, NS, &m);
		seen[kind]++;
		EXPECT_EQ(m.proto, NK_PROTO_STARCACHE);
		EXPECT_EQ(m.kind, nk_wire_kind(NK_PROTO_STARCACHE, m.op));
		EXPECT(dst < NS + NC);
		uint8_t buf[16384];
		uint8_t val[8000] = { 0 };
		if (m.value_len && !m.value)
			m.value = val;
		int n = nk_wire_encode(&m, buf, sizeof buf);
		if (n <= 0)
			fprintf(stderr, "kind %u op %u vlen %u: %d\n", (unsigned)kind, m.op, m.value_len, n);
		EXPECT(n > 0);
	}
	for (int k = 0; k < 10; k++)
		EXPECT_EQ(seen[k], 4);
	rig_free(&r);
}

/* the server's count-min sketch and top-k report (digest §4) */
static void test_topk_report(void)
{
	current = "topk_report";
	struct rig r;
	rig_init(&r, "keys=2;slots=4");
	char out[4096];
	char *argv[] = { "topk" };
	/* key "k-<i>" read i times (i = 1..80): more keys than candidates */
	for (uint32_t i = 1; i <= 80; i++) {
		char key[8];
		snprintf(key, sizeof key, "k-%02u", i);
		for (uint32_t n = 0; n < i; n++) {
			struct nk_msg m = req(&r, 0, key, 1000 * i + n);
			serve(&r, &m);
		}
	}
	struct nk_msg w = req(&r, 1, "k-80", 9);   /* writes are not reads */
	serve(&r, &w);
	int n = r.H->server_ctl(r.srv, &r.ns, 1, argv, out, sizeof out);
	EXPECT_EQ(n, (int)strlen(out));
	EXPECT_EQ(strncmp(out, "ok n=64 ", 8), 0);
	/* hottest first, exact for the hottest (no collisions among 80 keys
	 * in 5 x 8192 counters), and the 64 hottest are there */
	EXPECT_EQ(strncmp(out + 8, "6b2d3830:80 6b2d3739:79 ", 24), 0);
	EXPECT(strstr(out, " 6b2d3137:17") != NULL);
	EXPECT(strstr(out, " 6b2d3136:") == NULL);
	/* zeroed after the report */
	n = r.H->server_ctl(r.srv, &r.ns, 1, argv, out, sizeof out);
	EXPECT_EQ(strcmp(out, "ok n=0"), 0);
	/* a reply too small for every candidate keeps the hottest */
	struct nk_msg m = req(&r, 0, "k-01", 1);
	serve(&r, &m);
	m = req(&r, 0, "k-02", 2);
	serve(&r, &m);
	serve(&r, &m);
	n = r.H->server_ctl(r.srv, &r.ns, 1, argv, out, 20);
	EXPECT_EQ(strcmp(out, "ok n=1 6b2d3032:2"), 0);
	char *bad[] = { "topk", "x" };
	r.H->server_ctl(r.srv, &r.ns, 2, bad, out, sizeof out);
	EXPECT_EQ(strncmp(out, "err", 3), 0);
	rig_free(&r);
}

/* multi-packet items (digest 8.7): the server splits an item that does not
 * fit one packet into FLAG fragments, each a cache packet of its own; the
 * head of the queue gets FLAG visits; the client reassembles by FRAG and
 * asks the server again on a mismatched fragment or a gap */
static void test_multi_packet(void)
{
	current = "multi_packet";
	struct rig r;
	rig_init(&r, "keys=4;slots=4");
	seed(&r, "k-big", 4000);   /* 5 B key: 1433 value bytes per packet -> 3 */
	EXPECT_EQ(cache_add(&r, "k-big", 1), 0);
	struct nk_msg f = req(&r, 0, "k-big", 77);
	f.op = NK_STARCACHE_OP_F_REQ;
	f.kind = NK_KIND_CONTROL;
	sw_in(&r, &f, CTL, 1, 0, 0);
	struct nk_host_out out[NK_HOST_MAX_OUT];
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &f, CTL, out, NK_HOST_MAX_OUT), 3);
	struct nk_msg cp[3];
	for (int i = 0; i < 3; i++) {
		cp[i] = out[i].msg;
		EXPECT_EQ(cp[i].op, NK_STARCACHE_OP_F_REP);
		EXPECT_EQ(cp[i].frag_cnt, 3);
		EXPECT_EQ(cp[i].frag_idx, i);
		EXPECT_EQ(cp[i].value_len, i < 2 ? 1433u : 4000u - 2 * 1433u);
		EXPECT_EQ(nk_wire_encoded_len(&cp[i]) > 0, 1);
	}
	EXPECT_EQ(nk_wire_encoded_len(&cp[0]), NK_STARCACHE_HDR_LEN +
						NK_STARCACHE_PAYLOAD_HDR_LEN + SC_ITEM_BYTES);
	/* fewer outputs than fragments: nothing (a partial item would loop) */
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &f, CTL, out, 2), 0);
	/* fragment 0 validates the key; 2 before 1 does not join (it would
	 * break the item's order in the loop): back to the controller, RETRY */
	struct out o = sw_in(&r, &cp[0], 1, CTL, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_VALID);
	struct nk_msg early = cp[2];
	o = sw_in(&r, &early, 1, CTL, 0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(early.result, NK_RESULT_RETRY);
	EXPECT_EQ(sw_in(&r, &cp[1], 1, CTL, 0, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(sw_in(&r, &cp[2], 1, CTL, 0, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(rd(&r, "inloop", 1), 3);

	/* a read parks; the head stays for FLAG = 3 visits, one per fragment */
	struct nk_msg a = req(&r, 0, "k-big", 10);
	EXPECT_EQ(sw_in(&r, &a, CL, 1, 0, 0xA1).act.held, 1);
	int verdict[3];
	for (int i = 0; i < 3; i++) {
		o = sw_in(&r, &cp[i], NS + NC, CTL, 1, 0);
		EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
		EXPECT_EQ(cp[i].req_id, 10);
		EXPECT_EQ(o.meta.cookie, 0xA1);
		EXPECT_EQ(rd(&r, "qlen", 1), i < 2 ? 1 : 0);
		verdict[i] = r.H->client_reply(r.cli, &cp[i]);
	}
	EXPECT_EQ(verdict[0], NK_REPLY_IGNORE);
	EXPECT_EQ(verdict[1], NK_REPLY_IGNORE);
	EXPECT_EQ(verdict[2], NK_REPLY_DONE);
	EXPECT_EQ(rd(&r, "ack", 1), 1);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_SERVED), 3);

	/* a fragment of another item size (FLAG 2 after FLAG 3) is refused:
	 * the client asks the server (CRN_REQ) */
	struct nk_msg b = req(&r, 0, "k-big", 11);
	EXPECT_EQ(sw_in(&r, &b, CL, 1, 0, 0xB2).act.held, 1);
	sw_in(&r, &cp[0], NS + NC, CTL, 1, 0);
	EXPECT_EQ(r.H->client_reply(r.cli, &cp[0]), NK_REPLY_IGNORE);
	struct nk_msg odd = cp[1];
	odd.frag_cnt = 2;
	odd.req_id = 11;
	EXPECT_EQ(r.H->client_reply(r.cli, &odd), NK_REPLY_RETRY);
	EXPECT_EQ(req(&r, 0, "k-big", 11).op, NK_STARCACHE_OP_CRN_REQ);
	sw_in(&r, &cp[1], NS + NC, CTL, 1, 0);
	sw_in(&r, &cp[2], NS + NC, CTL, 1, 0);   /* the head's last visit */
	EXPECT_EQ(rd(&r, "qlen", 1), 0);

	/* a fragment lost in the loop: the head's 3 visits bring 0, 1, 0;
	 * the gap makes the client ask the server, whose 3 fragments
	 * complete the read */
	struct nk_msg c = req(&r, 0, "k-big", 12);
	EXPECT_EQ(sw_in(&r, &c, CL, 1, 0, 0xC3).act.held, 1);
	int order[3] = { 0, 1, 0 };
	for (int i = 0; i < 3; i++) {
		struct nk_msg v = cp[order[i]];
		sw_in(&r, &v, NS + NC, CTL, 1, 0);
		verdict[i] = r.H->client_reply(r.cli, &v);
	}
	EXPECT_EQ(verdict[0], NK_REPLY_IGNORE);
	EXPECT_EQ(verdict[1], NK_REPLY_IGNORE);
	EXPECT_EQ(verdict[2], NK_REPLY_RETRY);
	EXPECT_EQ(rd(&r, "qlen", 1), 0);
	struct nk_msg crn = req(&r, 0, "k-big", 12);
	EXPECT_EQ(crn.op, NK_STARCACHE_OP_CRN_REQ);
	EXPECT_EQ(sw_in(&r, &crn, CL, 1, 0, 0).act.fwd, NK_FWD_PORT);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &crn, CL, out, NK_HOST_MAX_OUT), 3);
	/* a cache packet still answering the first attempt: not mixed with the
	 * server's fragments (it may be another version of the item) */
	struct nk_msg late = cp[1];
	late.req_id = 12;
	EXPECT_EQ(late.flags, 1);
	EXPECT_EQ(r.H->client_reply(r.cli, &late), NK_REPLY_IGNORE);
	EXPECT_EQ(r.H->client_reply(r.cli, &out[2].msg), NK_REPLY_IGNORE);
	EXPECT_EQ(r.H->client_reply(r.cli, &out[0].msg), NK_REPLY_IGNORE);
	EXPECT_EQ(r.H->client_reply(r.cli, &out[1].msg), NK_REPLY_DONE);

	/* a write: the W_REP's 3 fragments replace the 3 in the loop (the
	 * first revalidates, the others join; the old ones are stale) */
	static uint8_t wval[3000];
	for (size_t i = 0; i < sizeof wval; i++)
		wval[i] = (uint8_t)(i * 7);
	struct nk_msg w = req(&r, 1, "k-big", 20);
	w.value_len = sizeof wval;
	w.value = wval;
	sw_in(&r, &w, CL, 1, 0, 0);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_INVALID);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w, CL, out, NK_HOST_MAX_OUT), 3);
	for (int i = 0; i < 3; i++) {
		EXPECT_EQ(out[i].msg.op, NK_STARCACHE_OP_W_REP);
		EXPECT_EQ(out[i].msg.frag_cnt, 3);
		/* each fragment carries its own slice of the new value */
		EXPECT(out[i].msg.value == wval + i * 1433);
		EXPECT_EQ(out[i].msg.value_len, i < 2 ? 1433u : 3000u - 2 * 1433u);
		EXPECT_EQ(sw_in(&r, &out[i].msg, 1, CL, 0, 0).act.fwd, NK_FWD_MCAST);
	}
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_VALID);
	EXPECT_EQ(rd(&r, "pending_writes", 1), 0);
	EXPECT_EQ(rd(&r, "stale", 1), 3);
	EXPECT_EQ(rd(&r, "inloop", 1), 6);
	EXPECT_EQ(sw_in(&r, &cp[0], NS + NC, CTL, 1, 0).act.fwd, NK_FWD_DROP);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_SUPERSEDED), 1);
	rig_free(&r);
}

/* A write of a multi-packet item (our choice, docs/starcache.md): the
 * client sends it as FLAG W_REQ fragments; the switch counts FRAG 0 and
 * marks it CACHED; the server applies the whole value once every fragment
 * is in, in any order, and its W_REP fragments replace the loop's. */
static void split_write(struct rig *r, const char *key, uint32_t id, const uint8_t *val,
			uint32_t vlen, struct nk_host_out *w)
{
	struct nk_msg m = req(r, 1, key, id);
	m.value_len = vlen;
	m.value = val;
	int n = r->H->client_split(r->cli, &m, 1, w, NK_HOST_MAX_REQ_OUT);
	EXPECT_EQ(n, (int)((vlen + 1432) / 1433));
	/* sent FRAG 1 .. FLAG-1, then FRAG 0 (the server refuses a FRAG 0
	 * without the rest); w[i] below is FRAG i */
	for (int i = 0; i < n; i++)
		EXPECT_EQ(w[i].msg.frag_idx, (i + 1) % n);
	if (n > 1) {
		struct nk_host_out f0 = w[n - 1];
		memmove(&w[1], &w[0], (size_t)(n - 1) * sizeof(w[0]));
		w[0] = f0;
	}
}

static void test_multi_packet_write(void)
{
	current = "multi_packet_write";
	struct rig r;
	rig_init(&r, "keys=4;slots=4");
	seed(&r, "k-big", 1000);   /* one cache packet until the write */
	EXPECT_EQ(cache_add(&r, "k-big", 1), 0);
	struct out o;
	struct nk_host_out out[NK_HOST_MAX_OUT], w[NK_HOST_MAX_REQ_OUT];
	fetch(&r, "k-big", &o);
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_VALID);
	static uint8_t val[3000];
	for (size_t i = 0; i < sizeof val; i++)
		val[i] = (uint8_t)(i * 13 + 1);
	/* a read or a one-packet write is one packet */
	struct nk_msg one = req(&r, 1, "k-big", 29);
	EXPECT_EQ(r.H->client_split(r.cli, &one, 1, w, NK_HOST_MAX_REQ_OUT), 1);
	EXPECT_EQ(w[0].msg.frag_cnt, 0);
	split_write(&r, "k-big", 30, val, sizeof val, w);
	for (int i = 0; i < 3; i++) {
		EXPECT_EQ(w[i].dst, 1);
		EXPECT_EQ(w[i].msg.op, NK_STARCACHE_OP_W_REQ);
		EXPECT_EQ(w[i].msg.frag_cnt, 3);
		EXPECT_EQ(w[i].msg.frag_idx, i);
		EXPECT(w[i].msg.value == val + i * 1433);
		EXPECT_EQ(w[i].value_off, i * 1433u);
		uint8_t buf[2048];
		EXPECT(nk_wire_encode(&w[i].msg, buf, sizeof buf) <= 1472);   /* one datagram */
	}
	one.value_len = sizeof val;
	EXPECT_EQ(r.H->client_split(r.cli, &one, 1, out, 2), 0);   /* no room */
	/* the switch: FRAG 0 invalidates, is counted and marked CACHED; the
	 * others pass untouched */
	for (int i = 0; i < 3; i++) {
		o = sw_in(&r, &w[i].msg, CL, 1, 0, 0);
		EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
		EXPECT_EQ(w[i].msg.flags, i == 0);
		EXPECT_EQ(w[i].msg.frag_cnt, 3);
	}
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_INVALID);
	EXPECT_EQ(rd(&r, "pending_writes", 1), 1);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_INVALIDATIONS), 1);
	EXPECT_EQ(rd(&r, "stats", SC_STAT_FORGED_FIELDS), 0);
	/* the server: out of order, a duplicate; applied on FRAG 0 (sent last) */
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[2].msg, CL, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[1].msg, CL, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[2].msg, CL, out, NK_HOST_MAX_OUT), 0);
	struct nk_msg probe = req(&r, 0, "k-big", 0);
	uint64_t ver = 0;
	uint32_t vlen = 0;
	EXPECT_EQ(ts_ops.get(&r.store, &probe, &ver, &vlen), 0);
	EXPECT_EQ(vlen, 1000);                  /* not applied yet */
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[0].msg, CL, out, NK_HOST_MAX_OUT), 3);
	EXPECT_EQ(ts_ops.get(&r.store, &probe, &ver, &vlen), 0);
	EXPECT_EQ(vlen, 3000);
	EXPECT_EQ(ver, 2);
	uint32_t same = 0;
	for (int i = 0; i < 3; i++) {
		struct nk_msg *f = &out[i].msg;
		EXPECT_EQ(f->op, NK_STARCACHE_OP_W_REP);
		EXPECT_EQ(f->frag_cnt, 3);
		EXPECT_EQ(f->frag_idx, i);
		EXPECT_EQ(f->value_len, i < 2 ? 1433u : 3000u - 2 * 1433u);
		same += f->value && !memcmp(f->value, val + i * 1433, f->value_len);
		EXPECT_EQ(sw_in(&r, f, 1, CL, 0, 0).act.fwd, NK_FWD_MCAST);
	}
	EXPECT_EQ(same, 3);                     /* the written bytes, each at its place */
	EXPECT_EQ(rd(&r, "state", 1), SC_STATE_VALID);
	EXPECT_EQ(rd(&r, "pending_writes", 1), 0);
	EXPECT_EQ(rd(&r, "stale", 1), 1);       /* the fetched item's packet goes */
	EXPECT_EQ(rd(&r, "inloop", 1), 4);
	EXPECT_EQ(r.H->client_reply(r.cli, &out[0].msg), NK_REPLY_DONE);

	/* an uncached key's multi-packet write: nothing attached */
	seed(&r, "k-cold", 100);
	split_write(&r, "k-cold", 31, val, sizeof val, w);
	int n = 0;
	for (int k = 1; k <= 3; k++) {
		int i = k % 3;      /* the client's order: FRAG 0 last */
		sw_in(&r, &w[i].msg, CL, 1, 0, 0);
		EXPECT_EQ(w[i].msg.flags, 0);
		n = r.H->server_handle(r.srv, &r.ns, &w[i].msg, CL, out, NK_HOST_MAX_OUT);
	}
	EXPECT_EQ(n, 1);
	EXPECT_EQ(out[0].msg.frag_cnt, 0);
	EXPECT_EQ(out[0].msg.value_len, 0);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	/* a middle fragment that is not a full chunk never completes a write:
	 * its FRAG 0 is refused (RETRY; not counted: nothing attached) */
	split_write(&r, "k-cold", 32, val, sizeof val, w);
	w[1].msg.value_len = 1000;
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[1].msg, CL, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[2].msg, CL, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[0].msg, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_STARCACHE_OP_W_REP);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_RETRY);
	EXPECT_EQ(out[0].msg.frag_cnt, 0);
	EXPECT_EQ(out[0].msg.value_len, 0);
	/* another client's fragments under the same SEQ are another write */
	split_write(&r, "k-cold", 34, val, sizeof val, w);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[1].msg, CL + 1, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[2].msg, CL, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[1].msg, CL, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[0].msg, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	rig_free(&r);
}

/* Fragments without bytes (the simulator's: the embedder fills none) need
 * no buffers, which a server allocates at its first fragment with bytes:
 * none after init, reads and a bytes-less write, which is applied; a later
 * write with bytes allocates them and is applied too (test_multi_packet_write
 * checks the bytes). An init that allocated them again (512 KiB per
 * server set-up: most of a fuzzer's execution under ASan) fails this. */
static void test_multi_packet_write_without_bytes(void)
{
	current = "multi_packet_write_without_bytes";
	static const uint8_t val[3000];   /* zeros: a value's bytes are not what this checks */
	struct nk_host_out out[NK_HOST_MAX_OUT], w[NK_HOST_MAX_REQ_OUT];
	struct rig r;
	rig_init(&r, "keys=4;slots=4");
	EXPECT(!nk_starcache_server_w_bufs(r.srv));
	seed(&r, "k-sim", 100);
	struct nk_msg rd1 = req(&r, 0, "k-sim", 39);
	EXPECT_EQ(serve(&r, &rd1).result, NK_RESULT_OK);
	split_write(&r, "k-sim", 40, val, sizeof val, w);
	int n = 0;
	for (int i = 2; i >= 0; i--) {
		w[i].msg.value = NULL;
		n = r.H->server_handle(r.srv, &r.ns, &w[i].msg, CL, out, NK_HOST_MAX_OUT);
	}
	EXPECT_EQ(n, 1);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT(!nk_starcache_server_w_bufs(r.srv));   /* no bytes moved: none taken */
	struct nk_msg probe = req(&r, 0, "k-sim", 0);
	uint64_t ver = 0;
	uint32_t vlen = 0;
	EXPECT_EQ(ts_ops.get(&r.store, &probe, &ver, &vlen), 0);
	EXPECT_EQ(vlen, 3000);                  /* applied, no bytes moved */
	split_write(&r, "k-sim", 41, val, sizeof val, w);
	n = r.H->server_handle(r.srv, &r.ns, &w[2].msg, CL, out, NK_HOST_MAX_OUT);
	EXPECT(nk_starcache_server_w_bufs(r.srv) != NULL);   /* the first fragment with bytes */
	for (int i = 1; i >= 0; i--)
		n = r.H->server_handle(r.srv, &r.ns, &w[i].msg, CL, out, NK_HOST_MAX_OUT);
	EXPECT_EQ(n, 1);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	rig_free(&r);
}

/* A multi-packet write's FRAG 0 alone (a hostile client's, or the rest
 * lost): the switch counts it; the server refuses it at once (RETRY, no
 * slot kept) with the key's stored value, which revalidates the key. Before,
 * the server kept it and never answered: pending_writes stayed up, each such
 * FRAG 0 refreshed write_ts, and the key stayed INVALID (reads to the
 * server) for as long as they came faster than stuck_ms. */
static void test_lone_frag0_is_refused(void)
{
	current = "lone_frag0_is_refused";
	struct rig r;
	cached_key(&r, "keys=4;slots=4", "k-big", 1000, 1);
	struct nk_host_out out[NK_HOST_MAX_OUT], w[NK_HOST_MAX_REQ_OUT];
	static uint8_t val[3000];
	memset(val, 0x33, sizeof val);
	for (uint32_t k = 0; k < 3; k++) {
		split_write(&r, "k-big", 40 + k, val, sizeof val, w);
		EXPECT_EQ(sw_in(&r, &w[0].msg, CL, 1, 0, 0).act.fwd, NK_FWD_PORT);
		EXPECT_EQ(w[0].msg.flags, 1);          /* counted */
		EXPECT_EQ(rd(&r, "state", 1), SC_STATE_INVALID);
		EXPECT_EQ(rd(&r, "pending_writes", 1), 1);
		int n = r.H->server_handle(r.srv, &r.ns, &w[0].msg, CL, out, NK_HOST_MAX_OUT);
		EXPECT_EQ(n, 1);
		struct nk_msg *f = &out[0].msg;
		EXPECT_EQ(f->op, NK_STARCACHE_OP_W_REP);
		EXPECT_EQ(f->result, NK_RESULT_RETRY);  /* not applied */
		EXPECT_EQ(f->frag_cnt, 1);
		EXPECT_EQ(f->value_len, 1000u);         /* the stored value */
		EXPECT_EQ(f->ver, 1);
		struct nk_msg echo = *f;
		EXPECT_EQ(sw_in(&r, f, 1, CL, 0, 0).act.fwd, NK_FWD_MCAST);   /* {client, loop} */
		EXPECT_EQ(rd(&r, "state", 1), SC_STATE_VALID);
		EXPECT_EQ(rd(&r, "pending_writes", 1), 0);
		/* the client sends the write again */
		EXPECT_EQ(r.H->client_reply(r.cli, &echo), NK_REPLY_RETRY);
	}
	struct nk_msg probe = req(&r, 0, "k-big", 0);
	uint64_t ver = 0;
	uint32_t vlen = 0;
	EXPECT_EQ(ts_ops.get(&r.store, &probe, &ver, &vlen), 0);
	EXPECT_EQ(vlen, 1000);                          /* none applied */
	EXPECT_EQ(rd(&r, "stats", SC_STAT_REVALIDATIONS), 3);
	/* the rest of the last write, then its FRAG 0 again: applied */
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[1].msg, CL, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[2].msg, CL, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[0].msg, CL, out, NK_HOST_MAX_OUT), 3);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(ts_ops.get(&r.store, &probe, &ver, &vlen), 0);
	EXPECT_EQ(vlen, 3000);
	rig_free(&r);
}

/* A lone FRAG 0 finds no slot of its write: refused without taking one.
 * Before, it took the oldest live slot first (all 16 live: an honest
 * partial write's), then refused itself: the honest write's FRAG 0 was then
 * refused too (RETRY, a resend of the whole write). */
static void test_lone_frag0_keeps_no_slot(void)
{
	current = "lone_frag0_keeps_no_slot";
	struct rig r;
	rig_init(&r, "keys=4;slots=4");
	seed(&r, "k-cold", 100);
	struct nk_host_out out[NK_HOST_MAX_OUT], w[NK_HOST_MAX_REQ_OUT];
	static uint8_t val[3000];
	memset(val, 0x5a, sizeof val);
	for (uint32_t k = 0; k < 16; k++) {     /* every slot an honest partial write */
		split_write(&r, "k-cold", 100 + k, val, sizeof val, w);
		EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[1].msg, CL, out, NK_HOST_MAX_OUT), 0);
		EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[2].msg, CL, out, NK_HOST_MAX_OUT), 0);
	}
	/* a hostile client's FRAG 0 alone: refused */
	split_write(&r, "k-cold", 200, val, sizeof val, w);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[0].msg, CL + 1, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_RETRY);
	/* every honest write's FRAG 0, the oldest first, completes it */
	for (uint32_t k = 0; k < 16; k++) {
		split_write(&r, "k-cold", 100 + k, val, sizeof val, w);
		EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[0].msg, CL, out, NK_HOST_MAX_OUT), 1);
		EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	}
	rig_free(&r);
}

/* One client floods FRAG > 0 fragments of many writes (distinct SEQs, none
 * ever completed) while another's write is in progress: a client holding
 * SC_WSLOTS / 4 slots or more gives way first (its own oldest when it asks
 * for one more), so the flood recycles the flooder's slots and the other
 * write, and a third client's begun beside the flood, complete. Before,
 * the oldest slot gave way whoever held it: the 16th flooded write evicted
 * the other client's, whose FRAG 0 was then refused (RETRY, a resend). */
static void test_fragment_flood_keeps_others_writes(void)
{
	current = "fragment_flood_keeps_others_writes";
	enum { HONEST = CL, FLOOD = CL + 1, THIRD = CTL };
	struct rig r;
	rig_init(&r, "keys=4;slots=4");
	seed(&r, "k-cold", 100);
	struct nk_host_out out[NK_HOST_MAX_OUT], w[NK_HOST_MAX_REQ_OUT];
	struct nk_host_out honest[NK_HOST_MAX_REQ_OUT], third[NK_HOST_MAX_REQ_OUT];
	static uint8_t val[3000];
	memset(val, 0x6b, sizeof val);
	split_write(&r, "k-cold", 300, val, sizeof val, honest);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &honest[1].msg, HONEST, out, NK_HOST_MAX_OUT), 0);
	for (uint32_t k = 0; k < 64; k++) {     /* 4 x the slots, each write's FRAG 1 only */
		split_write(&r, "k-cold", 1000 + k, val, sizeof val, w);
		EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[1].msg, FLOOD, out, NK_HOST_MAX_OUT), 0);
	}
	/* a third client's write begun now takes one of the flooder's slots */
	split_write(&r, "k-cold", 301, val, sizeof val, third);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &third[2].msg, THIRD, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &third[1].msg, THIRD, out, NK_HOST_MAX_OUT), 0);
	/* the honest write's remaining fragments, FRAG 0 last: applied */
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &honest[2].msg, HONEST, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &honest[0].msg, HONEST, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &third[0].msg, THIRD, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	/* 15 of the 64 flooded writes took free slots; 49 and the third
	 * client's first fragment each took one of the flooder's */
	char line[64], *argv[] = { "wslots" };
	EXPECT(r.H->server_ctl(r.srv, &r.ns, 1, argv, line, sizeof line) > 0);
	EXPECT(!strcmp(line, "ok live=14 evicted=50"));
	rig_free(&r);
}

/* The bound is 4 slots (SC_WSLOTS_FAIR): an honest write begun first, then
 * a client holding `heavy` slots and single-slot clients filling the rest;
 * a new client's write takes the heavy client's oldest slot at 4, the
 * oldest overall (the honest one's) at 3. Returns the honest write's
 * result once its FRAG 0 comes. */
static uint8_t honest_write_beside(uint32_t heavy)
{
	enum { HONEST = CL, HEAVY = CL + 1, SINGLE = CL + 2 };
	struct rig r;
	rig_init(&r, "keys=4;slots=4");
	seed(&r, "k-cold", 100);
	struct nk_host_out out[NK_HOST_MAX_OUT], w[NK_HOST_MAX_REQ_OUT];
	struct nk_host_out honest[NK_HOST_MAX_REQ_OUT];
	static uint8_t val[3000];
	memset(val, 0x6b, sizeof val);
	split_write(&r, "k-cold", 300, val, sizeof val, honest);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &honest[1].msg, HONEST, out, NK_HOST_MAX_OUT), 0);
	for (uint32_t k = 0; k < 15; k++) {   /* 15 more: every slot live */
		split_write(&r, "k-cold", 1000 + k, val, sizeof val, w);
		uint32_t from = k < heavy ? HEAVY : SINGLE + k;
		EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[1].msg, from, out, NK_HOST_MAX_OUT), 0);
	}
	split_write(&r, "k-cold", 2000, val, sizeof val, w);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[1].msg, SINGLE + 100, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &honest[2].msg, HONEST, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &honest[0].msg, HONEST, out, NK_HOST_MAX_OUT), 1);
	uint8_t result = out[0].msg.result;
	rig_free(&r);
	return result;
}

static void test_fragment_slot_bound_is_four(void)
{
	current = "fragment_slot_bound_is_four";
	EXPECT_EQ(honest_write_beside(4), NK_RESULT_OK);
	EXPECT(honest_write_beside(3) != NK_RESULT_OK);   /* the oldest gave way */
}

/* A read that a replaced item's FRAG 1 answered must not be completed by
 * the new item's FRAG 0 (two versions' bytes): the switch answers it once
 * more with RETRY and the client asks the server (Mininet showed the mix). */
static void test_item_replaced_mid_answer(void)
{
	current = "item_replaced_mid_answer";
	struct rig r;
	rig_init(&r, "keys=4;slots=4");
	seed(&r, "k-two", 2000);   /* 5 B key: 2 packets */
	EXPECT_EQ(cache_add(&r, "k-two", 2), 0);
	struct nk_msg f = req(&r, 0, "k-two", 77);
	f.op = NK_STARCACHE_OP_F_REQ;
	f.kind = NK_KIND_CONTROL;
	sw_in(&r, &f, CTL, 1, 0, 0);
	struct nk_host_out out[NK_HOST_MAX_OUT], w[NK_HOST_MAX_REQ_OUT];
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &f, CTL, out, NK_HOST_MAX_OUT), 2);
	struct nk_msg cp[2] = { out[0].msg, out[1].msg };
	EXPECT_EQ(sw_in(&r, &cp[0], 1, CTL, 0, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(sw_in(&r, &cp[1], 1, CTL, 0, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(sw_in(&r, &cp[0], NS + NC, CTL, 1, 0).act.fwd, NK_FWD_RECIRC);   /* idle */
	/* a read parks; the item's FRAG 1 answers it first */
	struct nk_msg a = req(&r, 0, "k-two", 10);
	EXPECT_EQ(sw_in(&r, &a, CL, 1, 0, 0).act.held, 1);
	EXPECT_EQ(sw_in(&r, &cp[1], NS + NC, CTL, 1, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(cp[1].req_id, 10);
	EXPECT_EQ(cp[1].result, NK_RESULT_OK);
	EXPECT_EQ(r.H->client_reply(r.cli, &cp[1]), NK_REPLY_IGNORE);
	EXPECT_EQ(rd(&r, "ack", 2), 2);
	/* two writes replace the item before a FRAG 0 comes round */
	static uint8_t val[2000];
	for (uint32_t k = 0; k < 2; k++) {
		memset(val, 0x5A + (int)k, sizeof val);
		split_write(&r, "k-two", 11 + k, val, sizeof val, w);
		sw_in(&r, &w[0].msg, CL, 1, 0, 0);
		sw_in(&r, &w[1].msg, CL, 1, 0, 0);
		/* INVALID: the item in the loop drops itself */
		struct nk_msg l0 = k ? out[0].msg : cp[0], l1 = k ? out[1].msg : cp[1];
		EXPECT_EQ(sw_in(&r, &l0, NS + NC, CTL, 1, 0).act.fwd, NK_FWD_DROP);
		EXPECT_EQ(sw_in(&r, &l1, NS + NC, CTL, 1, 0).act.fwd, NK_FWD_DROP);
		EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[1].msg, CL, out, NK_HOST_MAX_OUT), 0);
		EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &w[0].msg, CL, out, NK_HOST_MAX_OUT), 2);
		EXPECT_EQ(sw_in(&r, &out[0].msg, 1, CL, 0, 0).act.fwd, NK_FWD_MCAST);
		EXPECT_EQ(rd(&r, "ack", 2), 0);     /* the head holds an older fragment */
		EXPECT_EQ(sw_in(&r, &out[1].msg, 1, CL, 0, 0).act.fwd, NK_FWD_MCAST);
	}
	/* the new FRAG 0 would complete the read with a mix: RETRY instead */
	struct nk_msg n0 = out[0].msg;
	EXPECT_EQ(sw_in(&r, &n0, NS + NC, CTL, 1, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(n0.req_id, 10);
	EXPECT_EQ(n0.result, NK_RESULT_RETRY);
	EXPECT_EQ(rd(&r, "qlen", 2), 0);
	EXPECT_EQ(rd(&r, "ack", 2), 1);
	EXPECT_EQ(r.H->client_reply(r.cli, &n0), NK_REPLY_RETRY);
	EXPECT_EQ(req(&r, 0, "k-two", 10).op, NK_STARCACHE_OP_CRN_REQ);
	/* a read resent after a timeout asks the server, and a cache packet
	 * still answering its first attempt is not mixed in */
	struct nk_msg t = req(&r, 0, "k-two", 14);
	EXPECT_EQ(t.op, NK_STARCACHE_OP_R_REQ);
	EXPECT_EQ(sw_in(&r, &t, CL, 1, 0, 0).act.held, 1);
	struct nk_msg t0 = out[0].msg;
	sw_in(&r, &t0, NS + NC, CTL, 1, 0);
	EXPECT_EQ(t0.req_id, 14);
	EXPECT_EQ(r.H->client_reply(r.cli, &t0), NK_REPLY_IGNORE);
	EXPECT_EQ(req(&r, 0, "k-two", 14).op, NK_STARCACHE_OP_CRN_REQ);   /* the timeout's resend */
	struct nk_msg t1 = out[1].msg;
	sw_in(&r, &t1, NS + NC, CTL, 1, 0);
	EXPECT_EQ(t1.req_id, 14);
	EXPECT_EQ(r.H->client_reply(r.cli, &t1), NK_REPLY_IGNORE);
	struct nk_msg crn = req(&r, 0, "k-two", 14);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &crn, CL, w, NK_HOST_MAX_OUT), 2);
	EXPECT_EQ(r.H->client_reply(r.cli, &w[0].msg), NK_REPLY_IGNORE);
	EXPECT_EQ(r.H->client_reply(r.cli, &w[1].msg), NK_REPLY_DONE);
	/* the next read gets the new item whole */
	struct nk_msg b = req(&r, 0, "k-two", 20);
	EXPECT_EQ(sw_in(&r, &b, CL, 1, 0, 0).act.held, 1);
	struct nk_msg n1 = out[1].msg;
	EXPECT_EQ(sw_in(&r, &n1, NS + NC, CTL, 1, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(sw_in(&r, &n0, NS + NC, CTL, 1, 0).act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(n1.result, NK_RESULT_OK);
	EXPECT_EQ(n0.result, NK_RESULT_OK);
	EXPECT_EQ(r.H->client_reply(r.cli, &n1), NK_REPLY_IGNORE);
	EXPECT_EQ(r.H->client_reply(r.cli, &n0), NK_REPLY_DONE);
	rig_free(&r);
}

int main(void)
{
	test_config_limits();
	test_miss_and_unfetched();
	test_park_and_serve();
	test_overflow();
	test_write_strict();
	test_write_faithful_stale_read();
	test_draining_and_eviction();
	test_forged_and_correction();
	test_trust();
	test_stuck_writes();
	test_hostile_messages();
	test_topk_report();
	test_multi_packet();
	test_multi_packet_write();
	test_multi_packet_write_without_bytes();
	test_lone_frag0_is_refused();
	test_lone_frag0_keeps_no_slot();
	test_fragment_flood_keeps_others_writes();
	test_fragment_slot_bound_is_four();
	test_reordered_write_replies();
	test_late_fetch_reply();
	test_fetch_reply_behind_overlapping_writes();
	test_overlapping_writes_applied_out_of_order();
	test_controller_write_reply();
	test_duplicated_write_reply();
	test_write_later_than_the_stuck_restart();
	test_write_number_window();
	test_write_number_across_slots();
	test_uncounted_write_racing_an_insert();
	test_item_replaced_mid_answer();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
