/*
 * test_pegasus_pipeline.c - packet-in/packet-out tests of the Pegasus switch
 * pipeline (hostapps/src/pipeline/pegasus.c; docs/pegasus.md).
 *
 * Each test builds nk_msg packets, runs process(), and checks the actions,
 * the edited header fields and the named registers: Algorithm 1 (stamping,
 * rkeys lookup, read selection, write targets), Algorithm 2 (rset reset /
 * extend / no change), BYPASS, VWRITE (§9.1), draining + the removal
 * condition (§9.2), AMO detector, write fan-out (multicast groups, and the
 * RC_REQ path with write_mcast=0), each selection policy,
 * statistics and sampling, the control-plane hooks, and I1/I3/I4 under a
 * randomized packet mix.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/pipeline.h"
#include "netkv/rng.h"
#include "netkv/wire.h"

#include "expect.h"

#define NS 4            /* servers 0..3 */
#define NC 4            /* clients 4..7 */
#define CLIENT0 NS
#define PORT(node) ((node) + 10)   /* node i on port i + 10 */

struct sw {
	const struct nk_pipeline_ops *ops;
	void *st;
};

static struct sw sw_new(const char *params)
{
	struct sw w = { nk_pipeline_find("pegasus"), NULL };
	if (!w.ops) {
		fprintf(stderr, "pegasus pipeline not registered\n");
		exit(2);
	}
	uint16_t ports[NS + NC];
	for (int i = 0; i < NS + NC; i++)
		ports[i] = PORT(i);
	struct nk_pipeline_cfg cfg = {
		.n_servers = NS, .n_clients = NC, .n_nodes = NS + NC, .node_port = ports,
		.cpu_port = 99, .recirc_port = 98, .seed = 42, .params = params,
	};
	w.st = calloc(1, w.ops->state_size);
	if (w.ops->init(w.st, &cfg)) {
		fprintf(stderr, "init failed for params %s\n", params ? params : "(null)");
		exit(2);
	}
	return w;
}

static void sw_free(struct sw *w)
{
	w->ops->fini(w->st);
	free(w->st);
}

static uint64_t rd(struct sw *w, const char *name, uint32_t idx)
{
	uint64_t v = 0xDEADBEEF;
	int rc = w->ops->reg_read(w->st, name, idx, &v);
	if (rc) {
		fprintf(stderr, "reg_read %s[%u] failed %d\n", name, idx, rc);
		failed++;
	}
	return v;
}

static void wr(struct sw *w, const char *name, uint32_t idx, uint64_t v)
{
	int rc = w->ops->reg_write(w->st, name, idx, v);
	if (rc) {
		fprintf(stderr, "reg_write %s[%u] failed %d\n", name, idx, rc);
		failed++;
	}
}

/* The controller's add sequence (docs/pegasus.md "Adding a key"):
 * registers first, the rkeys entry last. */
static void add_key(struct sw *w, uint32_t keyhash, uint32_t idx, uint32_t home)
{
	uint64_t vn = rd(w, "ver_next", 0);
	wr(w, "ver_completed", idx, vn - 1);
	wr(w, "ver_last_write", idx, vn - 1);
	wr(w, "rset_size", idx, 1);
	wr(w, "rset_bitmap", idx, 1u << home);
	wr(w, "rset_list", idx * 32, home);
	wr(w, "rr_key", idx, 0);
	wr(w, "fanout", idx, 1);
	wr(w, "draining", idx, 0);
	wr(w, "paused", idx, 0);
	wr(w, "rate", idx, 0);
	wr(w, "rd_cnt", idx, 0);
	wr(w, "wr_cnt", idx, 0);
	uint64_t k = keyhash, a = idx;
	EXPECT_EQ(w->ops->table_add(w->st, "rkeys", &k, 1, &a, 1), 0);
}

static struct nk_msg req(uint8_t op, uint32_t keyhash, uint8_t home, uint16_t client,
			 uint32_t req_id)
{
	struct nk_msg m;
	memset(&m, 0, sizeof m);
	m.proto = NK_PROTO_PEGASUS;
	m.op = op;
	m.kind = (uint8_t)nk_wire_kind(NK_PROTO_PEGASUS, op);
	m.keyhash = keyhash;
	m.server_id = home;
	m.client_id = client;
	m.req_id = req_id;
	m.frag_cnt = 1;
	return m;
}

static struct nk_msg reply(uint8_t op, uint32_t keyhash, uint8_t sid, uint64_t ver)
{
	struct nk_msg m = req(op, keyhash, sid, 0, 0);
	m.ver = ver;
	m.bitmap = 1u << sid;
	return m;
}

struct out {
	struct nk_actions act;
	struct nk_pkt_meta meta;
};

/* Send m from node src addressed to dst. */
static struct out run(struct sw *w, struct nk_msg *m, uint16_t src, uint16_t dst)
{
	struct out o;
	memset(&o, 0, sizeof o);
	o.meta.src = src;
	o.meta.dst = dst;
	o.meta.ingress_port = src < NS + NC ? PORT(src) : 99;
	o.meta.from_cpu = src == NK_NODE_NONE;
	memset(&o.act, 0xAB, sizeof o.act);
	w->ops->process(w->st, m, &o.meta, &o.act);
	return o;
}

/* Send m arriving on switch port `port` (not a node's: the inter-rack link). */
static struct out run_port(struct sw *w, struct nk_msg *m, uint16_t port, uint16_t dst)
{
	struct out o;
	memset(&o, 0, sizeof o);
	o.meta.src = NK_NODE_NONE;
	o.meta.dst = dst;
	o.meta.ingress_port = port;
	w->ops->process(w->st, m, &o.meta, &o.act);
	return o;
}

/* A WRITE to `key` is dropped without using a version (stats[stat] reaches
 * `count`), and a READ still flows. */
static void expect_write_refused(struct sw *w, uint32_t key, uint8_t home, uint32_t req_id,
				 uint32_t stat, uint64_t count)
{
	uint64_t vn = rd(w, "ver_next", 0);
	struct nk_msg m = req(NK_PEGASUS_OP_WRITE, key, home, CLIENT0, req_id);
	struct out o = run(w, &m, CLIENT0, home);
	EXPECT_EQ(o.act.fwd, NK_FWD_DROP);
	EXPECT_EQ(rd(w, "ver_next", 0), vn);
	EXPECT_EQ(rd(w, "stats", stat), count);
	m = req(NK_PEGASUS_OP_READ, key, home, CLIENT0, req_id + 1);
	o = run(w, &m, CLIENT0, home);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
}

static int popcount32(uint32_t x)
{
	int c = 0;
	for (; x; x &= x - 1)
		c++;
	return c;
}

/* I1 from the registers. */
static int i1_holds(struct sw *w, uint32_t idx)
{
	uint64_t size = rd(w, "rset_size", idx), bm = rd(w, "rset_bitmap", idx);
	uint64_t n = rd(w, "n_servers", 0);
	if (size < 1 || size > n || (uint64_t)popcount32((uint32_t)bm) != size)
		return 0;
	uint32_t seen = 0;
	for (uint32_t i = 0; i < size; i++) {
		uint32_t b = 1u << rd(w, "rset_list", idx * 32 + i);
		if (seen & b)
			return 0;
		seen |= b;
	}
	return seen == bm;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_unreplicated(void)
{
	current = "unreplicated";
	struct sw w = sw_new("sample=4;selection=rr");
	EXPECT_EQ(rd(&w, "ver_next", 0), 2);
	/* READ: L3-forwarded to the addressed home, header unchanged */
	struct nk_msg m = req(NK_PEGASUS_OP_READ, 0x1234, 2, CLIENT0, 1);
	struct nk_msg before = m;
	struct out o = run(&w, &m, CLIENT0, 2);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(o.act.port, PORT(2));
	EXPECT_EQ(o.meta.dst, 2);
	EXPECT_EQ(o.act.to_cpu, 0);
	EXPECT(memcmp(&m, &before, sizeof m) == 0);
	/* WRITE: stamped from the global ver_next even though unreplicated */
	m = req(NK_PEGASUS_OP_WRITE, 0x1234, 2, CLIENT0, 2);
	o = run(&w, &m, CLIENT0, 2);
	EXPECT_EQ(m.ver, 2);
	EXPECT_EQ(o.act.port, PORT(2));
	m = req(NK_PEGASUS_OP_DEL, 0x99, 1, CLIENT0, 3);
	o = run(&w, &m, CLIENT0, 1);
	EXPECT_EQ(m.ver, 3);
	EXPECT_EQ(rd(&w, "ver_next", 0), 4);
	/* 1-in-4 sampling to the controller: the 4th unreplicated request */
	m = req(NK_PEGASUS_OP_READ, 0x55, 0, CLIENT0, 4);
	o = run(&w, &m, CLIENT0, 0);
	EXPECT_EQ(o.act.to_cpu, 1);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);   /* the original still goes on */
	EXPECT_EQ(rd(&w, "stats", 3), 1);    /* ST_SAMPLED */
	EXPECT_EQ(rd(&w, "stats", 2), 4);    /* ST_MISS */
	for (int i = 0; i < 3; i++) {
		m = req(NK_PEGASUS_OP_READ, 0x55, 0, CLIENT0, 5);
		o = run(&w, &m, CLIENT0, 0);
		EXPECT_EQ(o.act.to_cpu, 0);
	}
	m = req(NK_PEGASUS_OP_READ, 0x55, 0, CLIENT0, 5);
	o = run(&w, &m, CLIENT0, 0);
	EXPECT_EQ(o.act.to_cpu, 1);
	/* unknown destination: dropped and counted */
	m = req(NK_PEGASUS_OP_READ, 0x55, 0, CLIENT0, 6);
	o = run(&w, &m, CLIENT0, 200);
	EXPECT_EQ(o.act.fwd, NK_FWD_DROP);
	EXPECT_EQ(rd(&w, "stats", 11), 1);   /* ST_NO_ROUTE */
	sw_free(&w);

	/* sampling off */
	w = sw_new("sample=0");
	for (int i = 0; i < 300; i++) {
		m = req(NK_PEGASUS_OP_READ, 0x55, 0, CLIENT0, 5);
		o = run(&w, &m, CLIENT0, 0);
		EXPECT(o.act.to_cpu == 0 || i < 0);
	}
	sw_free(&w);
}

static void test_algorithm1_2(void)
{
	current = "algorithms 1 and 2";
	struct sw w = sw_new("selection=rr;trusted_ports=50");
	const uint32_t K = 0xABCDE;
	/* some unreplicated writes first, so ver_next has moved */
	struct nk_msg m = req(NK_PEGASUS_OP_WRITE, K, 1, CLIENT0, 1);
	run(&w, &m, CLIENT0, 1);
	EXPECT_EQ(m.ver, 2);
	add_key(&w, K, 5, 1);
	EXPECT_EQ(rd(&w, "ver_completed", 5), 2);
	EXPECT(i1_holds(&w, 5));
	/* READ goes to the only replica, the home */
	m = req(NK_PEGASUS_OP_READ, K, 1, CLIENT0, 2);
	struct out o = run(&w, &m, CLIENT0, 1);
	EXPECT_EQ(o.meta.dst, 1);
	EXPECT_EQ(o.act.port, PORT(1));
	EXPECT_EQ(rd(&w, "rd_cnt", 5), 1);
	EXPECT_EQ(rd(&w, "rate", 5), 1);
	/* the in-flight pre-add write's reply (ver 2 == ver_completed) from the
	 * home: already a member, no change */
	m = reply(NK_PEGASUS_OP_WRITE_REPLY, K, 1, 2);
	o = run(&w, &m, 1, CLIENT0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(o.act.port, PORT(CLIENT0));
	EXPECT_EQ(rd(&w, "rset_size", 5), 1);
	/* WRITE: stamped 3, goes to rr_all's server (0), ver_last_write = 3 */
	m = req(NK_PEGASUS_OP_WRITE, K, 1, CLIENT0, 3);
	o = run(&w, &m, CLIENT0, 1);
	EXPECT_EQ(m.ver, 3);
	EXPECT_EQ(o.meta.dst, 0);
	EXPECT_EQ(o.act.port, PORT(0));
	EXPECT_EQ(rd(&w, "ver_last_write", 5), 3);
	EXPECT_EQ(rd(&w, "wr_cnt", 5), 1);
	EXPECT_EQ(rd(&w, "rate", 5), 2);
	EXPECT_EQ(m.flags & NK_PEGASUS_FLAG_MULTI, 0);
	/* the next write goes to server 1 (global RR over all servers) */
	struct nk_msg m2 = req(NK_PEGASUS_OP_WRITE, K, 1, CLIENT0, 4);
	o = run(&w, &m2, CLIENT0, 1);
	EXPECT_EQ(m2.ver, 4);
	EXPECT_EQ(o.meta.dst, 1);
	/* reads still go to the home: the writes are not externalized yet */
	m = req(NK_PEGASUS_OP_READ, K, 1, CLIENT0, 5);
	o = run(&w, &m, CLIENT0, 1);
	EXPECT_EQ(o.meta.dst, 1);
	/* WRITE-REPLY ver 3 from server 0: newer -> rset = {0} */
	m = reply(NK_PEGASUS_OP_WRITE_REPLY, K, 0, 3);
	run(&w, &m, 0, CLIENT0);
	EXPECT_EQ(rd(&w, "ver_completed", 5), 3);
	EXPECT_EQ(rd(&w, "rset_size", 5), 1);
	EXPECT_EQ(rd(&w, "rset_bitmap", 5), 1);
	EXPECT_EQ(rd(&w, "rset_list", 5 * 32), 0);
	EXPECT(i1_holds(&w, 5));
	m = req(NK_PEGASUS_OP_READ, K, 1, CLIENT0, 6);
	o = run(&w, &m, CLIENT0, 1);
	EXPECT_EQ(o.meta.dst, 0);
	/* RC_ACK ver 3 from server 2: same version, not present -> extend */
	m = reply(NK_PEGASUS_OP_RC_ACK, K, 2, 3);
	o = run(&w, &m, 2, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_DROP);      /* consumed */
	EXPECT_EQ(rd(&w, "rset_size", 5), 2);
	EXPECT_EQ(rd(&w, "rset_bitmap", 5), 0x5);
	EXPECT_EQ(rd(&w, "rset_list", 5 * 32 + 1), 2);
	/* READ-REPLY ver 3 from server 2 again: present -> no change */
	m = reply(NK_PEGASUS_OP_READ_REPLY, K, 2, 3);
	run(&w, &m, 2, CLIENT0);
	EXPECT_EQ(rd(&w, "rset_size", 5), 2);
	/* older version from server 3: no change */
	m = reply(NK_PEGASUS_OP_READ_REPLY, K, 3, 2);
	run(&w, &m, 3, CLIENT0);
	EXPECT_EQ(rd(&w, "rset_size", 5), 2);
	EXPECT_EQ(rd(&w, "ver_completed", 5), 3);
	EXPECT(i1_holds(&w, 5));
	/* reads alternate over {0, 2} (per-key RR within the rset) */
	int seen0 = 0, seen2 = 0;
	for (int i = 0; i < 10; i++) {
		m = req(NK_PEGASUS_OP_READ, K, 1, CLIENT0, 7);
		o = run(&w, &m, CLIENT0, 1);
		seen0 += o.meta.dst == 0;
		seen2 += o.meta.dst == 2;
	}
	EXPECT_EQ(seen0, 5);
	EXPECT_EQ(seen2, 5);
	/* WRITE-REPLY ver 4 from server 1: newer -> reset to {1} */
	m = reply(NK_PEGASUS_OP_WRITE_REPLY, K, 1, 4);
	run(&w, &m, 1, CLIENT0);
	EXPECT_EQ(rd(&w, "rset_bitmap", 5), 0x2);
	EXPECT_EQ(rd(&w, "rset_size", 5), 1);
	EXPECT_EQ(rd(&w, "ver_completed", 5), 4);
	/* I3: after a reply, its ver <= ver_completed (holds for the stale one) */
	m = reply(NK_PEGASUS_OP_WRITE_REPLY, K, 0, 3);
	run(&w, &m, 0, CLIENT0);
	EXPECT(3 <= rd(&w, "ver_completed", 5));
	EXPECT_EQ(rd(&w, "rset_bitmap", 5), 0x2);
	/* counters: stats reset/extend */
	EXPECT(rd(&w, "stats", 5) >= 2);
	EXPECT_EQ(rd(&w, "stats", 6), 1);
	/* a reply with server_id out of range never touches the directory */
	m = reply(NK_PEGASUS_OP_WRITE_REPLY, K, 9, 100);
	m.bitmap = 0;
	run(&w, &m, 1, CLIENT0);
	EXPECT_EQ(rd(&w, "ver_completed", 5), 4);
	/* a reply for an unreplicated key is just forwarded */
	m = reply(NK_PEGASUS_OP_READ_REPLY, 0x777, 3, 50);
	o = run(&w, &m, 3, CLIENT0 + 1);
	EXPECT_EQ(o.act.port, PORT(CLIENT0 + 1));
	/* multi-rack: a WRITE arriving with VER set on the trusted inter-rack
	 * port keeps it, ver_next = max */
	uint64_t vn = rd(&w, "ver_next", 0);
	m = req(NK_PEGASUS_OP_WRITE, 0x777, 3, CLIENT0, 9);
	m.ver = vn + 100;
	run_port(&w, &m, 50, 3);
	EXPECT_EQ(m.ver, vn + 100);
	EXPECT_EQ(rd(&w, "ver_next", 0), vn + 101);
	sw_free(&w);
}

static void test_bypass(void)
{
	current = "bypass";
	struct sw w = sw_new("selection=rr");
	const uint32_t K = 77;
	add_key(&w, K, 0, 3);
	/* a collided key's request re-forwarded by a server: no stamping, no
	 * redirection, no counters */
	struct nk_msg m = req(NK_PEGASUS_OP_WRITE, K, 1, CLIENT0, 1);
	m.flags = NK_PEGASUS_FLAG_BYPASS;
	m.ver = 2;
	uint64_t vn = rd(&w, "ver_next", 0);
	struct out o = run(&w, &m, 3, 1);
	EXPECT_EQ(o.meta.dst, 1);
	EXPECT_EQ(o.act.port, PORT(1));
	EXPECT_EQ(m.ver, 2);
	EXPECT_EQ(rd(&w, "ver_next", 0), vn);
	EXPECT_EQ(rd(&w, "wr_cnt", 0), 0);
	EXPECT_EQ(rd(&w, "ver_last_write", 0), vn - 1);
	/* its reply (newer version) must not reset the hot key's rset */
	m = reply(NK_PEGASUS_OP_WRITE_REPLY, K, 1, 1000);
	m.flags = NK_PEGASUS_FLAG_BYPASS;
	o = run(&w, &m, 1, CLIENT0);
	EXPECT_EQ(o.act.port, PORT(CLIENT0));
	EXPECT_EQ(rd(&w, "rset_bitmap", 0), 1u << 3);
	EXPECT_EQ(rd(&w, "ver_completed", 0), vn - 1);
	/* a BYPASS READ is not redirected either */
	m = req(NK_PEGASUS_OP_READ, K, 1, CLIENT0, 2);
	m.flags = NK_PEGASUS_FLAG_BYPASS;
	o = run(&w, &m, 0, 1);
	EXPECT_EQ(o.meta.dst, 1);
	EXPECT_EQ(rd(&w, "stats", 4), 3);
	/* the same reply without BYPASS would have reset it */
	m = reply(NK_PEGASUS_OP_WRITE_REPLY, K, 1, 1000);
	run(&w, &m, 1, CLIENT0);
	EXPECT_EQ(rd(&w, "rset_bitmap", 0), 1u << 1);
	sw_free(&w);
}

static void test_vwrite(void)
{
	current = "vwrite";
	struct sw w = sw_new("selection=rr");
	const uint32_t K = 4242;
	add_key(&w, K, 2, 1);
	uint64_t vc = rd(&w, "ver_completed", 2);
	/* no write outstanding: stamped, forwarded to the rset (the home),
	 * bitmap (RC targets) preserved */
	struct nk_msg m = req(NK_PEGASUS_OP_VWRITE, K, 1, 0, 0);
	m.bitmap = 0xD;     /* servers 0, 2, 3 */
	struct out o = run(&w, &m, NK_NODE_NONE, 1);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(o.meta.dst, 1);
	EXPECT_EQ(m.ver, vc + 1);
	EXPECT_EQ(m.bitmap, 0xD);
	EXPECT_EQ(rd(&w, "ver_last_write", 2), vc + 1);
	EXPECT_EQ(rd(&w, "stats", 8), 1);
	/* a second VWRITE before the first is externalized: dropped */
	struct nk_msg m2 = req(NK_PEGASUS_OP_VWRITE, K, 1, 0, 0);
	o = run(&w, &m2, NK_NODE_NONE, 1);
	EXPECT_EQ(o.act.fwd, NK_FWD_DROP);
	EXPECT_EQ(rd(&w, "stats", 9), 1);
	/* REP_W(V) from the home: reset to {1} at V, delivered to the CPU */
	m = reply(NK_PEGASUS_OP_WRITE_REPLY, K, 1, vc + 1);
	o = run(&w, &m, 1, NK_NODE_NONE);
	EXPECT_EQ(o.act.fwd, NK_FWD_DROP);
	EXPECT_EQ(o.act.to_cpu, 1);
	EXPECT_EQ(rd(&w, "ver_completed", 2), vc + 1);
	/* RC_ACKs at V from 0, 2, 3 join */
	for (uint8_t sid = 0; sid < 4; sid++) {
		if (sid == 1)
			continue;
		m = reply(NK_PEGASUS_OP_RC_ACK, K, sid, vc + 1);
		run(&w, &m, sid, 1);
	}
	EXPECT_EQ(rd(&w, "rset_size", 2), 4);
	EXPECT_EQ(rd(&w, "rset_bitmap", 2), 0xF);
	EXPECT(i1_holds(&w, 2));
	/* a client write outstanding -> VWRITE dropped */
	m = req(NK_PEGASUS_OP_WRITE, K, 1, CLIENT0, 7);
	run(&w, &m, CLIENT0, 1);
	uint64_t wv = m.ver;
	m2 = req(NK_PEGASUS_OP_VWRITE, K, 1, 0, 0);
	o = run(&w, &m2, NK_NODE_NONE, 1);
	EXPECT_EQ(o.act.fwd, NK_FWD_DROP);
	/* after its reply: forwarded again, to a member chosen like a read */
	m = reply(NK_PEGASUS_OP_WRITE_REPLY, K, 3, wv);
	run(&w, &m, 3, CLIENT0);
	m2 = req(NK_PEGASUS_OP_VWRITE, K, 1, 0, 0);
	o = run(&w, &m2, NK_NODE_NONE, 1);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(o.meta.dst, 3);          /* rset is {3} now */
	EXPECT_EQ(m2.ver, wv + 1);
	/* VWRITE for an unreplicated key: dropped */
	m2 = req(NK_PEGASUS_OP_VWRITE, 999, 1, 0, 0);
	o = run(&w, &m2, NK_NODE_NONE, 1);
	EXPECT_EQ(o.act.fwd, NK_FWD_DROP);
	sw_free(&w);
}

/* §9.2: draining, then delete once ver_completed >= L and home in rset. */
static int removable(struct sw *w, uint32_t idx, uint64_t L, uint32_t home)
{
	return rd(w, "ver_completed", idx) >= L && (rd(w, "rset_bitmap", idx) >> home & 1);
}

static void test_removal(void)
{
	current = "removal";
	struct sw w = sw_new("selection=rr");
	const uint32_t K = 31337, H = 2;
	add_key(&w, K, 7, H);
	/* a write goes to server 0 (not home), outstanding */
	struct nk_msg w1 = req(NK_PEGASUS_OP_WRITE, K, H, CLIENT0, 1);
	struct out o = run(&w, &w1, CLIENT0, H);
	EXPECT_EQ(o.meta.dst, 0);
	/* controller: draining = 1, L = ver_last_write */
	wr(&w, "draining", 7, 1);
	uint64_t L = rd(&w, "ver_last_write", 7);
	EXPECT_EQ(L, w1.ver);
	EXPECT(!removable(&w, 7, L, H));
	/* writes now go to the home only, stamped, no MULTI or multicast even
	 * with fan-out */
	wr(&w, "fanout", 7, 3);
	struct nk_msg w2 = req(NK_PEGASUS_OP_WRITE, K, H, CLIENT0, 2);
	o = run(&w, &w2, CLIENT0, H);
	EXPECT_EQ(o.meta.dst, H);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(w2.flags & NK_PEGASUS_FLAG_MULTI, 0);
	EXPECT_EQ(w2.bitmap, 0);
	EXPECT(w2.ver > L);
	/* w1's reply: ver_completed = L but rset = {0}: home missing */
	struct nk_msg r = reply(NK_PEGASUS_OP_WRITE_REPLY, K, 0, w1.ver);
	run(&w, &r, 0, CLIENT0);
	EXPECT(!removable(&w, 7, L, H));
	/* w2's reply from the home: rset = {home} at a newer version */
	r = reply(NK_PEGASUS_OP_WRITE_REPLY, K, H, w2.ver);
	run(&w, &r, H, CLIENT0);
	EXPECT(removable(&w, 7, L, H));
	/* remove: entry first, then the registers */
	uint64_t k = K;
	EXPECT_EQ(w.ops->table_del(w.st, "rkeys", &k, 1), 0);
	EXPECT_EQ(w.ops->table_del(w.st, "rkeys", &k, 1), NK_PIPE_ENOENT);
	wr(&w, "draining", 7, 0);
	struct nk_msg rq = req(NK_PEGASUS_OP_READ, K, H, CLIENT0, 3);
	o = run(&w, &rq, CLIENT0, H);
	EXPECT_EQ(o.meta.dst, H);
	EXPECT_EQ(rd(&w, "rd_cnt", 7), 0);

	/* the other path: home not in rset and no write coming -> VWRITE with
	 * the home as RC target, then removable */
	add_key(&w, K, 7, H);
	struct nk_msg w3 = req(NK_PEGASUS_OP_WRITE, K, H, CLIENT0, 4);
	o = run(&w, &w3, CLIENT0, H);
	EXPECT(o.meta.dst != H);
	uint32_t dst = o.meta.dst;
	r = reply(NK_PEGASUS_OP_WRITE_REPLY, K, (uint8_t)dst, w3.ver);
	run(&w, &r, (uint16_t)dst, CLIENT0);
	wr(&w, "draining", 7, 1);
	L = rd(&w, "ver_last_write", 7);
	EXPECT(!removable(&w, 7, L, H));
	struct nk_msg vw = req(NK_PEGASUS_OP_VWRITE, K, H, 0, 0);
	vw.bitmap = 1u << H;
	o = run(&w, &vw, NK_NODE_NONE, H);
	EXPECT_EQ(o.meta.dst, dst);        /* chosen like a read: the rset */
	r = reply(NK_PEGASUS_OP_WRITE_REPLY, K, (uint8_t)dst, vw.ver);
	run(&w, &r, (uint16_t)dst, NK_NODE_NONE);
	r = reply(NK_PEGASUS_OP_RC_ACK, K, H, vw.ver);
	run(&w, &r, H, (uint16_t)dst);
	EXPECT(removable(&w, 7, L, H));
	sw_free(&w);
}

/* Group of the write targets start..start+r-1 (docs/pegasus.md). */
static uint16_t group(uint32_t start, uint32_t r)
{
	return (uint16_t)(start * 32 + r - 1);
}

static void test_fanout(void)
{
	current = "fanout";
	struct sw w = sw_new("selection=rr");
	const uint32_t K = 5;
	add_key(&w, K, 1, 0);
	wr(&w, "fanout", 1, 3);
	struct nk_msg m = req(NK_PEGASUS_OP_WRITE, K, 0, CLIENT0, 1);
	struct out o = run(&w, &m, CLIENT0, 0);
	/* rr_all = 0: targets 0, 1, 2 as one multicast to group (0, 3); each
	 * copy is a plain WRITE (no MULTI) with bitmap = the targets */
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(o.act.mcast_group, group(0, 3));
	EXPECT_EQ(o.meta.dst, 0);
	EXPECT_EQ(m.flags & NK_PEGASUS_FLAG_MULTI, 0);
	EXPECT_EQ(m.bitmap, 0x7);
	EXPECT_EQ(m.ver, 2);
	EXPECT_EQ(rd(&w, "stats", 1), 1);            /* one write, whatever r */
	/* every target has one more request in flight */
	for (uint32_t t = 0; t < NS; t++)
		EXPECT_EQ(rd(&w, "srv_inflight", t), t < 3 ? 1u : 0u);
	m = req(NK_PEGASUS_OP_WRITE, K, 0, CLIENT0, 2);
	o = run(&w, &m, CLIENT0, 0);
	EXPECT_EQ(o.act.mcast_group, group(1, 3));
	EXPECT_EQ(m.bitmap, 0xE);
	m = req(NK_PEGASUS_OP_WRITE, K, 0, CLIENT0, 3);
	o = run(&w, &m, CLIENT0, 0);
	EXPECT_EQ(o.act.mcast_group, group(2, 3));   /* wraps: 2, 3, 0 */
	EXPECT_EQ(m.bitmap, 0xD);
	/* Algorithm 2: the first reply resets the rset, the others at the same
	 * version join it (no RC_REQ round) */
	uint64_t v = m.ver;
	struct nk_msg r = reply(NK_PEGASUS_OP_WRITE_REPLY, K, 3, v);
	o = run(&w, &r, 3, CLIENT0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);           /* every reply reaches the client */
	EXPECT_EQ(o.act.port, PORT(CLIENT0));
	EXPECT_EQ(rd(&w, "rset_size", 1), 1);
	EXPECT_EQ(rd(&w, "rset_bitmap", 1), 0x8);
	r = reply(NK_PEGASUS_OP_WRITE_REPLY, K, 0, v);
	run(&w, &r, 0, CLIENT0);
	r = reply(NK_PEGASUS_OP_WRITE_REPLY, K, 2, v);
	o = run(&w, &r, 2, CLIENT0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&w, "rset_size", 1), 3);
	EXPECT_EQ(rd(&w, "rset_bitmap", 1), 0xD);
	EXPECT_EQ(rd(&w, "ver_completed", 1), v);
	EXPECT(i1_holds(&w, 1));
	/* a late reply of an older copy changes nothing */
	r = reply(NK_PEGASUS_OP_WRITE_REPLY, K, 1, v - 1);
	run(&w, &r, 1, CLIENT0);
	EXPECT_EQ(rd(&w, "rset_bitmap", 1), 0xD);
	/* r = 1: unicast, bitmap 0; the client's MULTI/bitmap are never trusted */
	wr(&w, "fanout", 1, 1);
	m = req(NK_PEGASUS_OP_WRITE, K, 0, CLIENT0, 4);
	m.flags = NK_PEGASUS_FLAG_MULTI;
	m.bitmap = 0xF;
	o = run(&w, &m, CLIENT0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(o.act.port, PORT(3));
	EXPECT_EQ(m.flags & NK_PEGASUS_FLAG_MULTI, 0);
	EXPECT_EQ(m.bitmap, 0);
	/* fan-out is clamped to n: the group of all servers */
	wr(&w, "fanout", 1, 200);
	m = req(NK_PEGASUS_OP_WRITE, K, 0, CLIENT0, 5);
	o = run(&w, &m, CLIENT0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(o.act.mcast_group, group(0, NS));
	EXPECT_EQ(m.bitmap, (1u << NS) - 1);
	/* draining: the home only, whatever the fan-out */
	wr(&w, "draining", 1, 1);
	m = req(NK_PEGASUS_OP_WRITE, K, 0, CLIENT0, 6);
	o = run(&w, &m, CLIENT0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(o.meta.dst, 0);
	EXPECT_EQ(m.bitmap, 0);
	sw_free(&w);

	/* the groups of a 32-server rack stay within 1..1023 */
	EXPECT_EQ(group(31, 32), 1023);
	EXPECT_EQ(group(0, 2), 1);

	/* write_mcast=0: the RC_REQ path, one packet to the first target with
	 * MULTI and bitmap = the others */
	w = sw_new("selection=rr;write_mcast=0");
	add_key(&w, K, 1, 0);
	wr(&w, "fanout", 1, 3);
	m = req(NK_PEGASUS_OP_WRITE, K, 0, CLIENT0, 1);
	o = run(&w, &m, CLIENT0, 0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(o.meta.dst, 0);
	EXPECT(m.flags & NK_PEGASUS_FLAG_MULTI);
	EXPECT_EQ(m.bitmap, 0x6);
	m = req(NK_PEGASUS_OP_WRITE, K, 0, CLIENT0, 2);
	o = run(&w, &m, CLIENT0, 0);
	EXPECT_EQ(o.meta.dst, 1);
	EXPECT_EQ(m.bitmap, 0xC);
	sw_free(&w);

	/* fanout=auto: r = clamp(round(rd / (wr + 1) / 4), 1, n) */
	w = sw_new("selection=rr;fanout=auto;fanout_div16=64");
	add_key(&w, K, 1, 0);
	wr(&w, "rd_cnt", 1, 0);
	m = req(NK_PEGASUS_OP_WRITE, K, 0, CLIENT0, 1);
	o = run(&w, &m, CLIENT0, 0);     /* rd 0, wr 1 at decision: r = 1 */
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(m.bitmap, 0);
	wr(&w, "rd_cnt", 1, 23);     /* wr becomes 2: 23 / 3 / 4 = 1.9 -> 2 */
	m = req(NK_PEGASUS_OP_WRITE, K, 0, CLIENT0, 2);
	o = run(&w, &m, CLIENT0, 0);
	EXPECT_EQ(o.act.mcast_group, group(1, 2));
	EXPECT_EQ(popcount32(m.bitmap), 2);
	wr(&w, "rd_cnt", 1, 1000);   /* huge: clamped to n */
	m = req(NK_PEGASUS_OP_WRITE, K, 0, CLIENT0, 3);
	o = run(&w, &m, CLIENT0, 0);
	EXPECT_EQ(o.act.mcast_group, group(2, NS));
	EXPECT_EQ(popcount32(m.bitmap), NS);
	sw_free(&w);
}

static uint32_t crc_detector(uint16_t client, uint32_t req_id, uint32_t n)
{
	const uint8_t b[6] = { (uint8_t)(client >> 8), (uint8_t)client, (uint8_t)(req_id >> 24),
			       (uint8_t)(req_id >> 16), (uint8_t)(req_id >> 8), (uint8_t)req_id };
	return nk_crc32(b, 6) % n;
}

static void test_amo(void)
{
	current = "amo";
	struct sw w = sw_new("selection=rr;amo=1");
	const uint32_t K = 808;
	add_key(&w, K, 3, 2);
	int hist[NS] = { 0 };
	for (uint32_t id = 1; id <= 400; id++) {
		struct nk_msg m = req(NK_PEGASUS_OP_WRITE, K, 2, CLIENT0 + 1, id);
		struct out o = run(&w, &m, CLIENT0 + 1, 2);
		uint32_t det = crc_detector(CLIENT0 + 1, id, NS);
		EXPECT_EQ(o.meta.dst, det);
		EXPECT_EQ(m.bitmap, 0);
		hist[o.meta.dst]++;
		/* a retry (same REQID) reaches the same detector */
		struct nk_msg again = req(NK_PEGASUS_OP_WRITE, K, 2, CLIENT0 + 1, id);
		o = run(&w, &again, CLIENT0 + 1, 2);
		EXPECT_EQ(o.meta.dst, det);
	}
	for (int i = 0; i < NS; i++)
		EXPECT(hist[i] > 50);    /* writes stay load-balanced */
	/* with fan-out 3: detector first, two others in the bitmap */
	wr(&w, "fanout", 3, 3);
	for (uint32_t id = 1000; id < 1050; id++) {
		struct nk_msg m = req(NK_PEGASUS_OP_WRITE, K, 2, CLIENT0, id);
		struct out o = run(&w, &m, CLIENT0, 2);
		EXPECT_EQ(o.meta.dst, crc_detector(CLIENT0, id, NS));
		EXPECT_EQ(popcount32(m.bitmap), 2);
		EXPECT_EQ(m.bitmap & (1u << o.meta.dst), 0);
		EXPECT(m.flags & NK_PEGASUS_FLAG_MULTI);
	}
	/* unreplicated key: the home is the detector */
	struct nk_msg m = req(NK_PEGASUS_OP_WRITE, 9, 1, CLIENT0, 5);
	struct out o = run(&w, &m, CLIENT0, 1);
	EXPECT_EQ(o.meta.dst, 1);
	/* paused: writes dropped (clients retry), reads still served */
	wr(&w, "paused", 3, 1);
	expect_write_refused(&w, K, 2, 6, 10, 1);
	sw_free(&w);
}

static void set_rset(struct sw *w, uint32_t idx, const uint8_t *ids, uint32_t n, uint64_t ver)
{
	uint32_t bm = 0;
	for (uint32_t i = 0; i < n; i++) {
		wr(w, "rset_list", idx * 32 + i, ids[i]);
		bm |= 1u << ids[i];
	}
	wr(w, "rset_size", idx, n);
	wr(w, "rset_bitmap", idx, bm);
	wr(w, "ver_completed", idx, ver);
	wr(w, "ver_last_write", idx, ver);
}

static void test_policies(void)
{
	current = "random";
	const uint32_t K = 1;
	uint8_t ids[3] = { 0, 2, 3 };
	struct sw w = sw_new("selection=random");
	add_key(&w, K, 0, 0);
	set_rset(&w, 0, ids, 3, 1);
	int hist[NS] = { 0 }, whist[NS] = { 0 };
	for (int i = 0; i < 3000; i++) {
		struct nk_msg m = req(NK_PEGASUS_OP_READ, K, 0, CLIENT0, 1);
		struct out o = run(&w, &m, CLIENT0, 0);
		hist[o.meta.dst]++;
		m = req(NK_PEGASUS_OP_WRITE, K, 0, CLIENT0, 1);
		o = run(&w, &m, CLIENT0, 0);
		whist[o.meta.dst]++;
	}
	EXPECT_EQ(hist[1], 0);
	EXPECT(hist[0] > 850 && hist[2] > 850 && hist[3] > 850);
	for (int i = 0; i < NS; i++)
		EXPECT(whist[i] > 600);     /* writes go to any server */
	sw_free(&w);

	current = "rr";
	w = sw_new("selection=rr");
	add_key(&w, K, 0, 0);
	set_rset(&w, 0, ids, 3, 1);
	for (int i = 0; i < 9; i++) {
		struct nk_msg m = req(NK_PEGASUS_OP_READ, K, 0, CLIENT0, 1);
		struct out o = run(&w, &m, CLIENT0, 0);
		EXPECT_EQ(o.meta.dst, ids[i % 3]);
		m = req(NK_PEGASUS_OP_WRITE, K, 0, CLIENT0, 1);
		o = run(&w, &m, CLIENT0, 0);
		EXPECT_EQ(o.meta.dst, (uint32_t)i % NS);
	}
	/* the cursor wraps at a shrunken rset */
	uint8_t one[1] = { 2 };
	set_rset(&w, 0, one, 1, 5);
	struct nk_msg m = req(NK_PEGASUS_OP_READ, K, 0, CLIENT0, 1);
	struct out o = run(&w, &m, CLIENT0, 0);
	EXPECT_EQ(o.meta.dst, 2);
	sw_free(&w);

	current = "wrr";
	w = sw_new("selection=wrr");
	EXPECT_EQ(rd(&w, "wrr_len", 0), 256);
	EXPECT_EQ(rd(&w, "wrr_sched", 5), 1);   /* uniform default */
	add_key(&w, K, 0, 0);
	set_rset(&w, 0, ids, 3, 1);
	/* controller schedule: weights 3:1:0:0 -> [0,0,1,0] x 64 */
	const uint8_t pat[4] = { 0, 0, 1, 0 };
	for (int i = 0; i < 256; i++)
		wr(&w, "wrr_sched", i, pat[i % 4]);
	wr(&w, "wrr_len", 0, 256);
	wr(&w, "wrr_cursor", 0, 0);
	for (int i = 0; i < 8; i++) {
		m = req(NK_PEGASUS_OP_WRITE, K, 0, CLIENT0, 1);
		o = run(&w, &m, CLIENT0, 0);
		EXPECT_EQ(o.meta.dst, pat[i % 4]);
	}
	/* reads: the schedule's server when in the rset (0), else per-key RR */
	wr(&w, "rr_key", 0, 0);
	int want[4] = { 0, 0, 0 /* 1 not in rset: rr -> ids[0]=0 */, 0 };
	for (int i = 0; i < 4; i++) {
		m = req(NK_PEGASUS_OP_READ, K, 0, CLIENT0, 1);
		o = run(&w, &m, CLIENT0, 0);
		EXPECT_EQ(o.meta.dst, want[i]);
	}
	m = req(NK_PEGASUS_OP_READ, K, 0, CLIENT0, 1);   /* slot 0 -> 0 */
	run(&w, &m, CLIENT0, 0);
	m = req(NK_PEGASUS_OP_READ, K, 0, CLIENT0, 1);   /* slot 1 -> 0 */
	run(&w, &m, CLIENT0, 0);
	m = req(NK_PEGASUS_OP_READ, K, 0, CLIENT0, 1);   /* slot 2 -> 1 -> rr: ids[1] */
	o = run(&w, &m, CLIENT0, 0);
	EXPECT_EQ(o.meta.dst, 2);
	/* a shorter schedule: wrr_len 3 with [3, 2, 0] */
	wr(&w, "wrr_sched", 0, 3);
	wr(&w, "wrr_sched", 1, 2);
	wr(&w, "wrr_sched", 2, 0);
	wr(&w, "wrr_len", 0, 3);
	wr(&w, "wrr_cursor", 0, 0);
	const uint32_t sched3[3] = { 3, 2, 0 };
	for (int i = 0; i < 6; i++) {
		m = req(NK_PEGASUS_OP_READ, K, 0, CLIENT0, 1);
		o = run(&w, &m, CLIENT0, 0);
		EXPECT_EQ(o.meta.dst, sched3[i % 3]);
	}
	EXPECT_EQ(w.ops->reg_write(w.st, "wrr_len", 0, 0), NK_PIPE_ERANGE);
	EXPECT_EQ(w.ops->reg_write(w.st, "wrr_len", 0, 257), NK_PIPE_ERANGE);
	EXPECT_EQ(w.ops->reg_write(w.st, "wrr_sched", 0, 32), NK_PIPE_ERANGE);
	sw_free(&w);

	current = "least_loaded";
	w = sw_new("selection=least_loaded");
	add_key(&w, K, 0, 0);
	set_rset(&w, 0, ids, 3, 1);
	/* srv_inflight: +1 per request the switch sends to a server, -1 per
	 * READ/WRITE reply from it; srv_load: the replies' load field */
	const uint16_t loads[NS] = { 50, 1, 10, 30 };
	for (uint8_t sid = 0; sid < NS; sid++) {
		wr(&w, "srv_inflight", sid, loads[sid]);
		m = reply(NK_PEGASUS_OP_READ_REPLY, 12345, sid, 1);
		m.load = (uint16_t)(100 + sid);
		run(&w, &m, sid, CLIENT0);
		EXPECT_EQ(rd(&w, "srv_load", sid), 100 + sid);        /* telemetry */
		EXPECT_EQ(rd(&w, "srv_inflight", sid), loads[sid] - 1u);
	}
	/* in flight now {49, 0, 9, 29}: reads pick the least loaded member of
	 * {0,2,3} = 2 (1 is not a member) */
	m = req(NK_PEGASUS_OP_READ, K, 0, CLIENT0, 1);
	o = run(&w, &m, CLIENT0, 0);
	EXPECT_EQ(o.meta.dst, 2);
	EXPECT_EQ(rd(&w, "srv_inflight", 2), 10);
	/* 2 fills up to 29 and then ties with 3; 0 is never picked */
	int c2 = 0, c3 = 0;
	for (int i = 0; i < 40; i++) {
		m = req(NK_PEGASUS_OP_READ, K, 0, CLIENT0, 1);
		o = run(&w, &m, CLIENT0, 0);
		c2 += o.meta.dst == 2;
		c3 += o.meta.dst == 3;
		EXPECT(o.meta.dst != 0);
	}
	EXPECT(c2 >= 19 && c3 >= 5);
	EXPECT(rd(&w, "srv_inflight", 2) + rd(&w, "srv_inflight", 3) == 10 + 40 + 29);
	/* unreplicated requests count too; RC_ACKs do not decrement */
	uint64_t before = rd(&w, "srv_inflight", 1);
	m = req(NK_PEGASUS_OP_READ, 999, 1, CLIENT0, 1);
	run(&w, &m, CLIENT0, 1);
	EXPECT_EQ(rd(&w, "srv_inflight", 1), before + 1);
	m = reply(NK_PEGASUS_OP_RC_ACK, 999, 1, 1);
	run(&w, &m, 1, 0);
	EXPECT_EQ(rd(&w, "srv_inflight", 1), before + 1);
	/* writes: from the least loaded server overall (1), consecutive ids:
	 * the group (1, 2) = servers {1, 2} */
	wr(&w, "fanout", 0, 2);
	m = req(NK_PEGASUS_OP_WRITE, K, 0, CLIENT0, 1);
	o = run(&w, &m, CLIENT0, 0);
	EXPECT_EQ(o.meta.dst, 1);
	EXPECT_EQ(o.act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(o.act.mcast_group, group(1, 2));
	EXPECT_EQ(m.bitmap, 0x6);
	EXPECT(!(m.bitmap & 1));                 /* 0 is the most loaded */
	sw_free(&w);
}

static void test_control(void)
{
	current = "control";
	struct sw w = sw_new("max_rkeys=8;n_servers=4");
	uint64_t v;
	EXPECT_EQ(w.ops->reg_read(w.st, "nope", 0, &v), NK_PIPE_ENOENT);
	EXPECT_EQ(w.ops->reg_read(w.st, "ver_completed", 8, &v), NK_PIPE_ERANGE);
	EXPECT_EQ(w.ops->reg_read(w.st, "rset_list", 8 * 32 - 1, &v), 0);
	EXPECT_EQ(w.ops->reg_read(w.st, "rset_list", 8 * 32, &v), NK_PIPE_ERANGE);
	EXPECT_EQ(w.ops->reg_write(w.st, "n_servers", 0, 33), NK_PIPE_ERANGE);
	EXPECT_EQ(w.ops->reg_write(w.st, "n_servers", 0, 0), NK_PIPE_ERANGE);
	EXPECT_EQ(w.ops->reg_write(w.st, "rset_size", 0, 33), NK_PIPE_ERANGE);
	EXPECT_EQ(w.ops->reg_write(w.st, "ver_next", 0, 1ull << 40), 0);
	EXPECT_EQ(rd(&w, "ver_next", 0), 1ull << 40);
	EXPECT_EQ(w.ops->reg_write(w.st, "rset_bitmap", 0, 0x1FFFFFFFFull), 0);
	EXPECT_EQ(rd(&w, "rset_bitmap", 0), 0xFFFFFFFFull);   /* 32-bit */
	uint64_t k = 1, a = 8;
	EXPECT_EQ(w.ops->table_add(w.st, "rkeys", &k, 1, &a, 1), NK_PIPE_ERANGE);
	EXPECT_EQ(w.ops->table_add(w.st, "nope", &k, 1, &a, 1), NK_PIPE_ENOENT);
	EXPECT_EQ(w.ops->table_add(w.st, "rkeys", &k, 2, &a, 1), NK_PIPE_EINVAL);
	/* fill the table, then EFULL; delete in a scrambled order and check
	 * every remaining entry still resolves (backward-shift delete) */
	for (uint32_t i = 0; i < 8; i++)
		add_key(&w, 1000 + i * 16, i, i % 4);
	k = 5;
	a = 0;
	EXPECT_EQ(w.ops->table_add(w.st, "rkeys", &k, 1, &a, 1), NK_PIPE_EFULL);
	k = 1000;   /* re-adding an existing key modifies it */
	a = 3;
	EXPECT_EQ(w.ops->table_add(w.st, "rkeys", &k, 1, &a, 1), 0);
	a = 0;
	EXPECT_EQ(w.ops->table_add(w.st, "rkeys", &k, 1, &a, 1), 0);
	const uint32_t order[8] = { 3, 0, 6, 1, 7, 2, 5, 4 };
	int alive[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
	for (int d = 0; d < 8; d++) {
		k = 1000 + order[d] * 16;
		EXPECT_EQ(w.ops->table_del(w.st, "rkeys", &k, 1), 0);
		alive[order[d]] = 0;
		for (uint32_t i = 0; i < 8; i++) {
			struct nk_msg m = req(NK_PEGASUS_OP_READ, 1000 + i * 16, 3, CLIENT0, 1);
			uint64_t before = rd(&w, "rd_cnt", i);
			run(&w, &m, CLIENT0, 3);
			EXPECT_EQ(rd(&w, "rd_cnt", i) - before, (uint64_t)alive[i]);
		}
	}
	/* node_fwd: address rewrite table */
	k = 2;
	a = 77;
	EXPECT_EQ(w.ops->table_add(w.st, "node_fwd", &k, 1, &a, 1), 0);
	struct nk_msg m = req(NK_PEGASUS_OP_READ, 1, 2, CLIENT0, 1);
	struct out o = run(&w, &m, CLIENT0, 2);
	EXPECT_EQ(o.act.port, 77);
	EXPECT_EQ(w.ops->table_del(w.st, "node_fwd", &k, 1), 0);
	o = run(&w, &m, CLIENT0, 2);
	EXPECT_EQ(o.act.fwd, NK_FWD_DROP);
	sw_free(&w);

	/* bad params */
	const struct nk_pipeline_ops *ops = nk_pipeline_find("pegasus");
	void *st = calloc(1, ops->state_size);
	struct nk_pipeline_cfg cfg = { .n_servers = 4, .n_clients = 1, .params = "selection=foo" };
	EXPECT(ops->init(st, &cfg) != 0);
	cfg.params = "n_servers=33";
	EXPECT(ops->init(st, &cfg) != 0);
	cfg.params = "max_rkeys=abc";
	EXPECT(ops->init(st, &cfg) != 0);
	cfg.params = "fanout=sometimes";
	EXPECT(ops->init(st, &cfg) != 0);
	cfg.params = "max_rkeys=2;selection=least_loaded;amo=true;mode=prewarmed";
	EXPECT_EQ(ops->init(st, &cfg), 0);
	ops->fini(st);
	free(st);
}

/* Random packet mix over several keys; after every step: I1 for every key,
 * I3 after each reply, I4 (stamped versions strictly increase, unique). */
static void test_random_invariants(void)
{
	current = "random invariants";
	static const char *policies[] = { "selection=random", "selection=rr", "selection=wrr",
					  "selection=least_loaded;amo=1" };
	for (int p = 0; p < 4; p++) {
		struct sw w = sw_new(policies[p]);
		struct nk_rng rng;
		nk_rng_seed(&rng, 7, (uint64_t)p);
		const int NK = 6;
		for (int i = 0; i < NK; i++) {
			add_key(&w, 100 + (uint32_t)i, (uint32_t)i, (uint32_t)i % NS);
			wr(&w, "fanout", (uint32_t)i, 1 + (uint32_t)i % 3);
		}
		uint64_t last_stamp = 0, written[64];
		int nwritten = 0, bad_i1 = 0, bad_i3 = 0, bad_i4 = 0;
		for (int step = 0; step < 5000; step++) {
			uint32_t key = 100 + (uint32_t)(nk_rng_next(&rng) % (NK + 1));
			int what = (int)(nk_rng_next(&rng) % 4);
			struct nk_msg m;
			if (what == 0) {
				m = req(NK_PEGASUS_OP_READ, key, 0, CLIENT0, (uint32_t)step);
				run(&w, &m, CLIENT0, 0);
			} else if (what == 1) {
				m = req(NK_PEGASUS_OP_WRITE, key, 0, CLIENT0, (uint32_t)step);
				run(&w, &m, CLIENT0, 0);
				if (m.ver <= last_stamp)
					bad_i4++;
				last_stamp = m.ver;
				if (nwritten < 64)
					written[nwritten++] = m.ver;
			} else {
				/* a reply with any version ever stamped (or a fresh one) */
				uint64_t ver = nwritten ? written[nk_rng_next(&rng) % nwritten] : 1;
				uint8_t sid = (uint8_t)(nk_rng_next(&rng) % NS);
				uint8_t op = what == 2 ? NK_PEGASUS_OP_WRITE_REPLY : NK_PEGASUS_OP_RC_ACK;
				m = reply(op, key, sid, ver);
				run(&w, &m, sid, CLIENT0);
				if (key < 100u + NK && ver > rd(&w, "ver_completed", key - 100))
					bad_i3++;
				if (nwritten == 64)
					nwritten = 0;
			}
			for (int i = 0; i < NK; i++)
				if (!i1_holds(&w, (uint32_t)i))
					bad_i1++;
		}
		EXPECT_EQ(bad_i1, 0);
		EXPECT_EQ(bad_i3, 0);
		EXPECT_EQ(bad_i4, 0);
		sw_free(&w);
	}
}

/* The trust boundary (docs/security.md, issue #21): what a client port may
 * not set or send. */
static void test_trust(void)
{
	current = "trust boundary";
	const uint32_t K = 0x4242, HOT = 0x5151;
	struct sw w = sw_new("selection=rr;trusted_ports=50");
	add_key(&w, HOT, 0, 1);
	/* the first sequence: VER = 2^64-2, then VER = 0. Today the
	 * switch keeps the client's VER, ver_next wraps to 0 and the servers
	 * ack later writes as stale. Now the client's VER is overwritten. */
	uint64_t vn = rd(&w, "ver_next", 0);
	struct nk_msg m = req(NK_PEGASUS_OP_WRITE, K, 2, CLIENT0, 1);
	m.ver = UINT64_MAX - 1;
	struct out o = run(&w, &m, CLIENT0, 2);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(m.ver, vn);
	m = req(NK_PEGASUS_OP_WRITE, K, 2, CLIENT0, 2);
	run(&w, &m, CLIENT0, 2);
	EXPECT_EQ(m.ver, vn + 1);
	EXPECT_EQ(rd(&w, "ver_next", 0), vn + 2);
	/* the same on a replicated key, and on a DEL */
	m = req(NK_PEGASUS_OP_WRITE, HOT, 1, CLIENT0, 3);
	m.ver = UINT64_MAX;
	run(&w, &m, CLIENT0, 1);
	EXPECT_EQ(m.ver, vn + 2);
	EXPECT_EQ(rd(&w, "ver_last_write", 0), vn + 2);
	m = req(NK_PEGASUS_OP_DEL, K, 2, CLIENT0, 4);
	m.ver = 7;
	run(&w, &m, CLIENT0, 2);
	EXPECT_EQ(m.ver, vn + 3);
	EXPECT_EQ(rd(&w, "stats", 14), 3);      /* ST_FORGED_VER */
	/* a client's BYPASS (keep VER, no directory) and MULTI/bitmap are
	 * cleared: the write is stamped and redirected like any other */
	m = req(NK_PEGASUS_OP_WRITE, HOT, 1, CLIENT0, 5);
	m.flags = NK_PEGASUS_FLAG_BYPASS | NK_PEGASUS_FLAG_MULTI;
	m.bitmap = 0xF;
	m.ver = UINT64_MAX;
	run(&w, &m, CLIENT0, 1);
	EXPECT_EQ(m.flags, 0);
	EXPECT_EQ(m.bitmap, 0);
	EXPECT_EQ(m.ver, vn + 4);
	EXPECT_EQ(rd(&w, "stats", 15), 1);      /* ST_FORGED_FLAGS */
	EXPECT_EQ(rd(&w, "stats", 4), 0);       /* not taken as BYPASS */
	/* server-only and controller-only ops from a client port: dropped,
	 * the directory untouched */
	static const uint8_t server_ops[] = {
		NK_PEGASUS_OP_READ_REPLY, NK_PEGASUS_OP_WRITE_REPLY, NK_PEGASUS_OP_RC_ACK,
		NK_PEGASUS_OP_RC_REQ, NK_PEGASUS_OP_PUT_FWD, NK_PEGASUS_OP_VWRITE,
	};
	uint64_t vc = rd(&w, "ver_completed", 0), nx = rd(&w, "ver_next", 0);
	for (unsigned i = 0; i < sizeof server_ops; i++) {
		m = reply(server_ops[i], HOT, 3, UINT64_MAX - 1);
		o = run(&w, &m, CLIENT0 + 1, CLIENT0);
		EXPECT_EQ(o.act.fwd, NK_FWD_DROP);
	}
	EXPECT_EQ(rd(&w, "stats", 16), sizeof server_ops);  /* ST_HOST_SERVER_OP */
	EXPECT_EQ(rd(&w, "ver_completed", 0), vc);
	EXPECT_EQ(rd(&w, "rset_bitmap", 0), 1u << 1);
	EXPECT_EQ(rd(&w, "ver_next", 0), nx);
	/* the same reply from the server's own port is Algorithm 2's */
	m = reply(NK_PEGASUS_OP_WRITE_REPLY, HOT, 3, vc + 1);
	o = run(&w, &m, 3, CLIENT0);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(rd(&w, "rset_bitmap", 0), 1u << 3);
	/* a VWRITE is the controller's: dropped from a server port too */
	m = req(NK_PEGASUS_OP_VWRITE, HOT, 1, 0, 0);
	o = run(&w, &m, 2, 1);
	EXPECT_EQ(o.act.fwd, NK_FWD_DROP);
	EXPECT_EQ(rd(&w, "stats", 16), sizeof server_ops + 1);
	/* a server's non-BYPASS request cannot carry VER either */
	m = req(NK_PEGASUS_OP_WRITE, K, 2, CLIENT0, 6);
	m.ver = UINT64_MAX - 1;
	run(&w, &m, 3, 2);
	EXPECT(m.ver < UINT64_MAX - 1);
	/* the trusted port keeps VER, but never past the top of the range */
	nx = rd(&w, "ver_next", 0);
	m = req(NK_PEGASUS_OP_WRITE, K, 2, CLIENT0, 7);
	m.ver = UINT64_MAX;
	o = run_port(&w, &m, 50, 2);
	EXPECT_EQ(o.act.fwd, NK_FWD_DROP);
	EXPECT_EQ(rd(&w, "ver_next", 0), nx);
	m = reply(NK_PEGASUS_OP_PUT_FWD, K, 2, UINT64_MAX);
	o = run_port(&w, &m, 50, 2);
	EXPECT_EQ(o.act.fwd, NK_FWD_DROP);
	EXPECT_EQ(rd(&w, "stats", 17), 2);      /* ST_VER_EXHAUSTED */
	m = req(NK_PEGASUS_OP_WRITE, K, 2, CLIENT0, 8);
	m.ver = UINT64_MAX - 1;
	o = run_port(&w, &m, 50, 2);
	EXPECT_EQ(o.act.fwd, NK_FWD_PORT);
	EXPECT_EQ(m.ver, UINT64_MAX - 1);
	EXPECT_EQ(rd(&w, "ver_next", 0), UINT64_MAX);
	/* ver_next exhausted: writes are refused, never stamped with a
	 * wrapped version (I4); reads still flow */
	expect_write_refused(&w, K, 2, 9, 17, 3);
	expect_write_refused(&w, HOT, 1, 11, 17, 4);
	sw_free(&w);

	/* no trusted port configured: the inter-rack port is a client's */
	w = sw_new("selection=rr");
	m = req(NK_PEGASUS_OP_WRITE, K, 2, CLIENT0, 1);
	m.ver = 1000;
	run_port(&w, &m, 50, 2);
	EXPECT_EQ(m.ver, 2);
	sw_free(&w);
	/* a malformed list is a config error */
	const struct nk_pipeline_ops *ops = nk_pipeline_find("pegasus");
	void *st = calloc(1, ops->state_size);
	uint16_t ports[NS + NC] = {0};
	struct nk_pipeline_cfg cfg = { .n_servers = NS, .n_clients = NC, .n_nodes = NS + NC,
				       .node_port = ports, .params = "trusted_ports=3,x" };
	EXPECT(ops->init(st, &cfg) != 0);
	free(st);
}

int main(void)
{
	test_unreplicated();
	test_algorithm1_2();
	test_bypass();
	test_vwrite();
	test_removal();
	test_fanout();
	test_amo();
	test_policies();
	test_control();
	test_random_invariants();
	test_trust();
	printf("test_pegasus_pipeline: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
