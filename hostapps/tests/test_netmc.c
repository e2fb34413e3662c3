/*
 * test_netmc.c - NetMC's switch pipeline and hosts (netmc.md §3-§6), packet
 * in / packet out: the thesis' worked example pass by pass, malformed
 * packets dropped and counted, the client's hints and CliMC's sub-requests,
 * the server's reply split at the MTU, all-or-nothing aggregation, and one
 * multiget end to end through switch, servers and client.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/host.h"
#include "netkv/pipeline.h"
#include "netkv/wire.h"
#include "../src/host/host_lazy.h"

#include "expect.h"

#define NS 4
#define NC 1
#define CL NS
#define RECIRC 98
#define CPU 99
#define KL 4

/* ---- a store: every key present, value length = 100 + first key byte ---- */

static int ts_get(void *impl, const struct nk_msg *m, uint64_t *ver, uint32_t *vlen)
{
	uint32_t big = *(const uint32_t *)impl;
	/* the store's keyhash is djb2 of the key bytes (kvserver's too) */
	if (m->key[0] == 'Z' || m->keyhash != nk_djb2(m->key, m->key_len))
		return 1;  /* 'Z...' keys are missing */
	*ver = 1;
	*vlen = big ? big : 100u + m->key[0];
	return 0;
}

static int ts_put(void *impl, const struct nk_msg *m, uint64_t ver, uint32_t vlen)
{
	(void)impl, (void)m, (void)ver, (void)vlen;
	return 0;
}

static const struct nk_store_ops ts_ops = {.get = ts_get, .put = ts_put};

/* the same store with value bytes (as kvserver's): byte j of key k's value
 * is k[0] + j */
static const uint8_t *ts_value(void *impl, const struct nk_msg *m, uint32_t *vlen)
{
	static uint8_t bytes[65536];
	uint64_t ver;
	if (ts_get(impl, m, &ver, vlen))
		return NULL;
	for (uint32_t j = 0; j < *vlen; j++)
		bytes[j] = (uint8_t)(m->key[0] + j);
	return bytes;
}

static const struct nk_store_ops ts_bytes_ops = {.get = ts_get, .put = ts_put,
						 .value = ts_value};

/* every pair of an encoded-and-decoded MGET_REPLY carries its key's bytes;
 * the pairs it holds */
static unsigned check_pairs(const struct nk_msg *rep, uint32_t big)
{
	uint8_t wire[65536];
	struct nk_msg back;
	int n = nk_wire_encode(rep, wire, sizeof wire);
	EXPECT(n > 0);
	EXPECT_EQ(nk_wire_decode(NK_PROTO_NETMC, wire, (size_t)(n > 0 ? n : 0), &back), 0);
	size_t off = 0;
	const uint8_t *key, *value;
	uint16_t vlen;
	unsigned pairs = 0;
	while (nk_wire_netmc_next_pair(&back, &off, &key, &value, &vlen) == 1) {
		pairs++;
		EXPECT_EQ(vlen, key[0] == 'Z' ? 0u : big ? big : 100u + key[0]);
		for (uint32_t j = 0; j < vlen; j++)
			if (value[j] != (uint8_t)(key[0] + j)) {
				EXPECT_EQ(value[j], (uint8_t)(key[0] + j));
				break;
			}
	}
	EXPECT_EQ(pairs, back.nkeys);
	return pairs;
}

struct rig {
	const struct nk_pipeline_ops *P;
	const struct nk_host_ops *H;
	void *sw, *srv, *cli;
	uint32_t big;
	struct nk_store ns;
};

static const uint16_t PORTS[NS + NC + 1] = {10, 11, 12, 13, 14, CPU};

static void rig_init(struct rig *r, const char *params)
{
	memset(r, 0, sizeof *r);
	r->P = nk_pipeline_find("netmc");
	r->H = nk_host_find("netmc");
	if (!r->P || !r->H) {
		fprintf(stderr, "netmc not registered\n");
		exit(2);
	}
	struct nk_pipeline_cfg cfg = {.n_servers = NS, .n_clients = NC, .n_nodes = NS + NC + 1,
				      .node_port = PORTS, .cpu_port = CPU, .recirc_port = RECIRC,
				      .params = params};
	r->sw = calloc(1, r->P->state_size);
	r->srv = calloc(1, r->H->server_state_size);
	r->cli = calloc(1, r->H->client_state_size);
	struct nk_host_cfg hc = {.n_servers = NS, .n_clients = NC, .id = 2, .params = params};
	if (r->P->init(r->sw, &cfg) || r->H->server_init(r->srv, &hc) ||
	    r->H->client_init(r->cli, &hc)) {
		fprintf(stderr, "init failed: %s\n", params);
		exit(2);
	}
	/* AddrTable: server s -> node s, its port, group s + 1 */
	for (uint64_t s = 0; s < NS; s++) {
		uint64_t args[3] = {s, PORTS[s], nk_mc_mcast_group(s)};
		EXPECT_EQ(r->P->table_add(r->sw, "addr_table", &s, 1, args, 3), 0);
	}
	r->ns.ops = &ts_ops;
	r->ns.impl = &r->big;
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

static uint64_t stat(struct rig *r, unsigned cell)
{
	uint64_t v = 0;
	r->P->reg_read(r->sw, "stats", cell, &v);
	return v;
}

static void pass(struct rig *r, struct nk_msg *m, int recirculated, struct nk_actions *act)
{
	struct nk_pkt_meta meta = {.ingress_port = recirculated ? RECIRC : PORTS[CL], .src = CL,
				   .dst = 1, .recirculated = (uint8_t)recirculated};
	r->P->process(r->sw, m, &meta, act);
	m->server_id = (uint8_t)meta.dst;  /* where it went (for the test) */
}

/* keys "A".."D" padded to KL; homes: A, D on 1, B on 2, C on 3 (the thesis' example) */
static uint8_t KEYS[64][KL];
static struct nk_req_key RK[64];

static void spec_of(struct nk_req_spec *sp, const char *names, const uint16_t *homes,
		    uint8_t *buf, uint32_t req_id)
{
	unsigned n = (unsigned)strlen(names);
	for (unsigned i = 0; i < n; i++) {
		memset(KEYS[i], 0, KL);
		KEYS[i][0] = (uint8_t)names[i];
		RK[i] = (struct nk_req_key){.key = KEYS[i], .keyhash = nk_djb2(KEYS[i], KL),
					    .value_len = 0, .home = homes[i]};
	}
	*sp = (struct nk_req_spec){.kind = NK_KIND_MULTIGET, .key_len = KL, .req_id = req_id,
				   .nkeys = (uint8_t)n, .keys = RK, .buf = buf, .buf_len = 64 * KL,
				   .key = KEYS[0], .home = homes[0]};
}

/* ---- the switch ------------------------------------------------------------ */

static void test_worked_example(void)
{
	current = "worked example: 3 groups, 3 passes";
	struct rig r;
	rig_init(&r, "");
	uint8_t buf[64 * KL];
	struct nk_req_spec sp;
	const uint16_t homes[] = {1, 2, 3, 1};
	spec_of(&sp, "ABCD", homes, buf, 7);
	struct nk_host_out out[NK_HOST_MAX_REQ_OUT];
	EXPECT_EQ(r.H->client_multiget(r.cli, &sp, out, NK_HOST_MAX_REQ_OUT), 1);
	struct nk_msg m = out[0].msg;
	EXPECT_EQ(m.keyidx, 0x7000);          /* 0111 then twelve 0s */
	EXPECT_EQ(m.srv[0], 1);
	EXPECT_EQ(m.srv[1], 2);
	EXPECT_EQ(m.srv[2], 3);
	EXPECT_EQ(m.srv[3], 0);
	EXPECT_EQ(m.nkeys, 4);
	EXPECT_EQ(m.oid + m.startidx + m.clo, 0);
	EXPECT_EQ(out[0].dst, 1);
	EXPECT(!memcmp(m.items, "A\0\0\0D\0\0\0B\0\0\0C\0\0\0", 16));  /* A, D, B, C */

	struct nk_actions act;
	pass(&r, &m, 0, &act);
	EXPECT_EQ(act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(act.mcast_group, nk_mc_mcast_group(1));
	EXPECT_EQ(m.nkeys, 2);
	EXPECT_EQ(m.keyidx, 0xC000);
	EXPECT_EQ(m.startidx, 0);
	EXPECT_EQ(m.oid, 0);
	EXPECT_EQ(m.clo, 1);
	EXPECT_EQ(m.server_id, 1);
	pass(&r, &m, 1, &act);
	EXPECT_EQ(act.fwd, NK_FWD_MCAST);
	EXPECT_EQ(act.mcast_group, nk_mc_mcast_group(2));
	EXPECT_EQ(m.oid, 1);
	EXPECT_EQ(m.startidx, 2);
	EXPECT_EQ(m.nkeys, 1);
	EXPECT_EQ(m.keyidx, 0x8000);
	EXPECT_EQ(m.server_id, 2);
	pass(&r, &m, 1, &act);
	EXPECT_EQ(act.fwd, NK_FWD_PORT);
	EXPECT_EQ(act.port, PORTS[3]);
	EXPECT_EQ(m.oid, 2);
	EXPECT_EQ(m.startidx, 3);
	EXPECT_EQ(m.nkeys, 1);
	EXPECT_EQ(m.keyidx, 0);
	EXPECT_EQ(m.server_id, 3);
	EXPECT_EQ(stat(&r, MC_STAT_MGETS), 1);
	EXPECT_EQ(stat(&r, MC_STAT_PASSES), 3);
	EXPECT_EQ(stat(&r, MC_STAT_CLONES), 2);
	rig_free(&r);
}

static void test_one_group_and_full_width(void)
{
	current = "one group of 16: one pass, unicast";
	struct rig r;
	rig_init(&r, "");
	struct nk_msg m = {.proto = NK_PROTO_NETMC, .op = NK_NETMC_OP_MGET,
			   .kind = NK_KIND_MULTIGET, .nkeys = 16, .keyidx = 0x0001,
			   .key_slots = 16, .srv = {2}};
	struct nk_actions act;
	pass(&r, &m, 0, &act);
	EXPECT_EQ(act.fwd, NK_FWD_PORT);
	EXPECT_EQ(act.port, PORTS[2]);
	EXPECT_EQ(m.nkeys, 16);
	EXPECT_EQ(m.keyidx, 0);
	rig_free(&r);
}

/* one pass of m from a client's port (or recirculated): dropped, and the
 * stats cell counts `count` */
static void dropped_as(struct rig *r, struct nk_msg *m, int recirculated, unsigned cell,
		       uint64_t count)
{
	struct nk_actions act;
	pass(r, m, recirculated, &act);
	EXPECT_EQ(act.fwd, NK_FWD_DROP);
	EXPECT_EQ(stat(r, cell), count);
}

static void test_malformed_dropped(void)
{
	struct rig r;
	rig_init(&r, "");
	current = "client packet with CLO = 1";
	struct nk_msg m = {.proto = NK_PROTO_NETMC, .op = NK_NETMC_OP_MGET,
			   .kind = NK_KIND_MULTIGET, .nkeys = 2, .keyidx = 0xC000, .clo = 1,
			   .key_slots = 2, .srv = {1, 2}};
	dropped_as(&r, &m, 0, MC_STAT_FORGED, 1);
	current = "client packet with OID or STARTIDX set (the switch's fields)";
	m.clo = 0;
	m.oid = 1;
	dropped_as(&r, &m, 0, MC_STAT_FORGED, 2);
	m.oid = 0;
	m.startidx = 1;
	m.nkeys = 1;
	m.keyidx = 0x8000;
	dropped_as(&r, &m, 0, MC_STAT_FORGED, 3);
	EXPECT_EQ(stat(&r, MC_STAT_MGETS), 0);
	current = "KEYIDX 0";
	m.startidx = 0;
	m.nkeys = 2;
	m.keyidx = 0;
	dropped_as(&r, &m, 0, MC_STAT_MALFORMED, 1);
	current = "OID past SRV";
	m.keyidx = 0x8000;
	m.clo = 1;
	m.oid = NK_NETMC_N - 1;
	dropped_as(&r, &m, 1, MC_STAT_MALFORMED, 2);
	current = "a group past the packet's key list";
	m = (struct nk_msg){.proto = NK_PROTO_NETMC, .op = NK_NETMC_OP_MGET, .nkeys = 2,
			    .keyidx = 0x2000, .key_slots = 2, .srv = {1}};  /* group of 3 keys */
	dropped_as(&r, &m, 0, MC_STAT_MALFORMED, 3);
	EXPECT_EQ(stat(&r, MC_STAT_FORGED), 3);
	current = "server with no AddrTable entry";
	m = (struct nk_msg){.proto = NK_PROTO_NETMC, .op = NK_NETMC_OP_MGET, .nkeys = 1,
			    .keyidx = 0x8000, .key_slots = 1, .srv = {9}};
	dropped_as(&r, &m, 0, MC_STAT_NO_ROUTE, 1);
	current = "a reply from a client's port";
	m = (struct nk_msg){.proto = NK_PROTO_NETMC, .op = NK_NETMC_OP_MGET_REPLY,
			    .kind = NK_KIND_MULTIGET_REPLY, .nkeys = 1, .key_slots = 1};
	dropped_as(&r, &m, 0, MC_STAT_HOST_SERVER_OP, 1);
	rig_free(&r);
}

static void test_baseline_switch_only_forwards(void)
{
	current = "split=0: an MGET is forwarded by destination";
	struct rig r;
	rig_init(&r, "split=0;scheme=climc");
	struct nk_msg m = {.proto = NK_PROTO_NETMC, .op = NK_NETMC_OP_MGET,
			   .kind = NK_KIND_MULTIGET, .nkeys = 2, .keyidx = 0x4000, .key_slots = 2,
			   .srv = {3}};
	struct nk_actions act;
	pass(&r, &m, 0, &act);
	EXPECT_EQ(act.fwd, NK_FWD_PORT);
	EXPECT_EQ(act.port, PORTS[1]);
	EXPECT_EQ(m.keyidx, 0x4000);
	EXPECT_EQ(stat(&r, MC_STAT_PASSES), 0);
	rig_free(&r);
}

/* ---- the client ------------------------------------------------------------ */

static void test_climc_sub_requests(void)
{
	current = "CliMC: one sub-request per server, in server order";
	struct rig r;
	rig_init(&r, "scheme=climc;split=0");
	uint8_t buf[64 * KL];
	struct nk_req_spec sp;
	const uint16_t homes[] = {1, 2, 3, 1};
	spec_of(&sp, "ABCD", homes, buf, 7);
	struct nk_host_out out[NK_HOST_MAX_REQ_OUT];
	EXPECT_EQ(r.H->client_multiget(r.cli, &sp, out, NK_HOST_MAX_REQ_OUT), 3);
	EXPECT_EQ(out[0].dst, 1);
	EXPECT_EQ(out[1].dst, 2);
	EXPECT_EQ(out[2].dst, 3);
	EXPECT_EQ(out[0].msg.nkeys, 2);
	EXPECT_EQ(out[0].msg.keyidx, 0x4000);
	EXPECT_EQ(out[1].msg.nkeys, 1);
	EXPECT_EQ(out[0].msg.req_id, 7u << MC_ID_SHIFT | 0);
	EXPECT_EQ(out[1].msg.req_id, 7u << MC_ID_SHIFT | 2);
	EXPECT_EQ(out[2].msg.req_id, 7u << MC_ID_SHIFT | 3);
	EXPECT(!memcmp(out[1].msg.items, "B\0\0\0", KL));
	rig_free(&r);
}

static void test_chunks_above_w(void)
{
	current = "20 keys, W = 16: two wire multigets";
	struct rig r;
	rig_init(&r, "");
	uint8_t buf[64 * KL];
	struct nk_req_spec sp;
	uint16_t homes[20];
	for (int i = 0; i < 20; i++)
		homes[i] = (uint16_t)(i % NS);
	spec_of(&sp, "abcdefghijklmnopqrst", homes, buf, 9);
	struct nk_host_out out[NK_HOST_MAX_REQ_OUT];
	EXPECT_EQ(r.H->client_multiget(r.cli, &sp, out, NK_HOST_MAX_REQ_OUT), 2);
	EXPECT_EQ(out[0].msg.nkeys, 16);
	EXPECT_EQ(out[1].msg.nkeys, 4);
	EXPECT_EQ(out[1].msg.req_id & 63, 16);
	EXPECT_EQ(out[0].msg.keyidx & 1, 1);  /* the chunk's last key ends a group */
	/* the wire carries them: encode and decode each */
	for (int i = 0; i < 2; i++) {
		uint8_t wire[2048];
		struct nk_msg back;
		int n = nk_wire_encode(&out[i].msg, wire, sizeof wire);
		EXPECT(n > 0);
		EXPECT_EQ(nk_wire_decode(NK_PROTO_NETMC, wire, (size_t)n, &back), 0);
		EXPECT_EQ(back.keyidx, out[i].msg.keyidx);
		EXPECT_EQ(back.key_slots, out[i].msg.key_slots);
	}
	rig_free(&r);

	current = "20 keys, W = 32: one wire multiget, split by the switch in 4 passes";
	rig_init(&r, "w=32");
	spec_of(&sp, "abcdefghijklmnopqrst", homes, buf, 10);
	EXPECT_EQ(r.H->client_multiget(r.cli, &sp, out, NK_HOST_MAX_REQ_OUT), 1);
	struct nk_msg m = out[0].msg;
	EXPECT_EQ(m.nkeys, 20);
	/* five keys per server, sorted: groups end at keys 4, 9, 14, 19 */
	EXPECT_EQ(m.keyidx, 1u << 27 | 1u << 22 | 1u << 17 | 1u << 12);
	uint8_t wire[2048];
	struct nk_msg back;
	int n = nk_wire_encode(&m, wire, sizeof wire);
	EXPECT_EQ(n, NK_NETMC_HDR_LEN + NK_NETMC_PAYLOAD_HDR_LEN + 20 * KL);
	EXPECT_EQ(nk_wire_decode(NK_PROTO_NETMC, wire, (size_t)(n > 0 ? n : 0), &back), 0);
	EXPECT_EQ(back.keyidx, m.keyidx);
	struct nk_actions act;
	for (unsigned g = 0; g < 4; g++) {
		pass(&r, &m, g > 0, &act);
		EXPECT_EQ(m.server_id, g);
		EXPECT_EQ(m.startidx, 5 * g);
		EXPECT_EQ(m.nkeys, 5);
		EXPECT_EQ(act.fwd, g < 3 ? NK_FWD_MCAST : NK_FWD_PORT);
	}
	EXPECT_EQ(m.keyidx, 0);
	rig_free(&r);
}

/* ---- server and aggregation ----------------------------------------------- */

/* an MGET as a server gets it: keys A, D, B, Z (Z missing), the group
 * [startidx, startidx + nkeys) */
static struct nk_msg server_mget(uint32_t req, unsigned nkeys, unsigned startidx)
{
	static const uint8_t items[4 * KL] = "A\0\0\0D\0\0\0B\0\0\0Z\0\0\0";
	return (struct nk_msg){.proto = NK_PROTO_NETMC, .op = NK_NETMC_OP_MGET,
			       .kind = NK_KIND_MULTIGET, .req_id = req, .nkeys = (uint8_t)nkeys,
			       .startidx = (uint8_t)startidx, .key_slot_len = KL, .key_slots = 4,
			       .items = items, .items_len = sizeof items};
}

static void test_server_reply_and_mtu_split(void)
{
	current = "server: NUMKEY pairs from STARTIDX";
	struct rig r;
	rig_init(&r, "");
	struct nk_msg in = server_mget(77, 2, 2);
	struct nk_host_out out[NK_HOST_MAX_OUT];
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &in, CL, out, NK_HOST_MAX_OUT), 1);
	struct nk_msg *rep = &out[0].msg;
	EXPECT_EQ(rep->op, NK_NETMC_OP_MGET_REPLY);
	EXPECT_EQ(rep->req_id, 77);
	EXPECT_EQ(rep->startidx, 2);
	EXPECT_EQ(rep->nkeys, 2);
	EXPECT_EQ(rep->value_len, 100 + 'B');  /* Z is missing: vlen 0 */
	EXPECT_EQ(rep->result, NK_RESULT_NOT_FOUND);
	EXPECT_EQ(rep->items_len, 2 * (KL + 2) + 100 + 'B');
	/* lengths only: the codec writes a pair list that decodes */
	uint8_t wire[4096];
	struct nk_msg back;
	int n = nk_wire_encode(rep, wire, sizeof wire);
	EXPECT_EQ(n, NK_NETMC_HDR_LEN + NK_NETMC_PAYLOAD_HDR_LEN + rep->items_len);
	EXPECT_EQ(nk_wire_decode(NK_PROTO_NETMC, wire, (size_t)n, &back), 0);
	EXPECT_EQ(nk_wire_encoded_len(rep), n);

	current = "server: 1000 B values split one pair per 1500 B packet";
	r.big = 1000;
	in.startidx = 0;
	in.nkeys = 3;
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &in, CL, out, NK_HOST_MAX_OUT), 3);
	EXPECT_EQ(out[1].msg.startidx, 1);
	EXPECT_EQ(out[2].msg.startidx, 2);
	EXPECT_EQ(out[2].msg.nkeys, 1);
	current = "server: a group past the key list is refused";
	in.startidx = 3;
	in.nkeys = 2;
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &in, CL, out, NK_HOST_MAX_OUT), 0);
	rig_free(&r);
}

static void test_server_value_bytes(void)
{
	current = "server with value bytes: each pair its key's bytes, split at the MTU";
	struct rig r;
	rig_init(&r, "");
	r.ns.ops = &ts_bytes_ops;
	struct nk_msg in = server_mget(78, 4, 0);
	struct nk_host_out out[NK_HOST_MAX_OUT];
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &in, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT(out[0].msg.items != NULL);
	EXPECT_EQ(check_pairs(&out[0].msg, 0), 4);
	r.big = 1000;
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &in, CL, out, NK_HOST_MAX_OUT), 3);
	unsigned pairs = 0;
	for (int i = 0; i < 3; i++)
		pairs += check_pairs(&out[i].msg, 1000);
	EXPECT_EQ(pairs, 4);
	current = "server: a GET finds its key by the bytes (the wire has no keyhash)";
	struct nk_msg get = {.proto = NK_PROTO_NETMC, .op = NK_NETMC_OP_GET, .kind = NK_KIND_READ,
			     .key_len = KL, .key_slot_len = KL, .key_slots = 1, .key = "B"};
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &get, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(out[0].msg.value_len, 1000);
	rig_free(&r);
}

static struct nk_msg reply(uint32_t req, unsigned first, unsigned startidx, unsigned n)
{
	return (struct nk_msg){.proto = NK_PROTO_NETMC, .op = NK_NETMC_OP_MGET_REPLY,
			       .kind = NK_KIND_MULTIGET_REPLY,
			       .req_id = req << MC_ID_SHIFT | first, .startidx = (uint8_t)startidx,
			       .nkeys = (uint8_t)n, .key_slots = (uint8_t)n};
}

static void test_aggregation_all_or_nothing(void)
{
	current = "aggregation: done when every key is in, duplicates once";
	struct rig r;
	rig_init(&r, "");
	uint8_t buf[64 * KL];
	struct nk_req_spec sp;
	const uint16_t homes[] = {1, 2, 3, 1};
	spec_of(&sp, "ABCD", homes, buf, 5);
	struct nk_host_out out[NK_HOST_MAX_REQ_OUT];
	struct nk_msg a = reply(5, 0, 0, 2), b = reply(5, 0, 2, 1), c = reply(5, 0, 3, 1);
	/* before any multiget (no aggregation table yet): stale */
	EXPECT_EQ(r.H->client_reply(r.cli, &a), NK_REPLY_IGNORE);
	r.H->client_multiget(r.cli, &sp, out, NK_HOST_MAX_REQ_OUT);
	struct nk_msg other = reply(6, 0, 3, 1), past = reply(5, 0, 3, 2);
	EXPECT_EQ(r.H->client_reply(r.cli, &a), NK_REPLY_IGNORE);
	EXPECT_EQ(r.H->client_reply(r.cli, &b), NK_REPLY_IGNORE);
	EXPECT_EQ(r.H->client_reply(r.cli, &b), NK_REPLY_IGNORE);      /* duplicate */
	EXPECT_EQ(r.H->client_reply(r.cli, &other), NK_REPLY_IGNORE);  /* not this request */
	EXPECT_EQ(r.H->client_reply(r.cli, &past), NK_REPLY_IGNORE);   /* keys it never asked */
	EXPECT_EQ(r.H->client_reply(r.cli, &c), NK_REPLY_DONE);
	EXPECT_EQ(r.H->client_reply(r.cli, &c), NK_REPLY_IGNORE);      /* late */
	rig_free(&r);
}

/* The server's pair bytes and the client's aggregation table (3 MiB) are
 * allocated at their first use: none after init, single-key requests, a
 * stray reply, or MGETs from a store without value bytes (the
 * simulator's); the first multiget and the first MGET with bytes take
 * them. An init that allocated them again (each set-up's cost: most of a
 * fuzzer's execution under ASan) fails this. */
static void test_buffers_allocated_at_first_use(void)
{
	current = "lazy buffers: none until a multiget, or an MGET with value bytes";
	struct rig r;
	rig_init(&r, "");
	EXPECT(!nk_netmc_server_pairs_buf(r.srv));
	EXPECT(!nk_netmc_client_agg(r.cli));
	struct nk_host_out out[NK_HOST_MAX_REQ_OUT];
	uint8_t buf[64 * KL];
	struct nk_req_spec sp;
	const uint16_t homes[] = {1, 2, 3, 1};
	spec_of(&sp, "ABCD", homes, buf, 9);
	for (int w = 0; w < 2; w++) {   /* a GET and a PUT, served and answered */
		struct nk_req_spec one = sp;
		one.kind = w ? NK_KIND_WRITE : NK_KIND_READ;
		one.keyhash = RK[0].keyhash;
		struct nk_msg m;
		r.H->client_request(r.cli, &one, &m);
		EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &m, CL, out, NK_HOST_MAX_OUT), 1);
		EXPECT_EQ(r.H->client_reply(r.cli, &out[0].msg), NK_REPLY_DONE);
	}
	struct nk_msg stray = reply(9, 0, 0, 2);
	EXPECT_EQ(r.H->client_reply(r.cli, &stray), NK_REPLY_IGNORE);
	struct nk_msg in = server_mget(79, 4, 0);
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &in, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.nkeys, 4);         /* lengths only */
	EXPECT(!nk_netmc_server_pairs_buf(r.srv));
	EXPECT(!nk_netmc_client_agg(r.cli));
	EXPECT(r.H->client_multiget(r.cli, &sp, out, NK_HOST_MAX_REQ_OUT) > 0);
	EXPECT(nk_netmc_client_agg(r.cli) != NULL);
	r.ns.ops = &ts_bytes_ops;
	EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &in, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT(nk_netmc_server_pairs_buf(r.srv) != NULL);
	rig_free(&r);
}

/* one multiget through switch (passes and clones), servers and the client */
static void run_end_to_end(const char *params, unsigned want_packets)
{
	struct rig r;
	rig_init(&r, params);
	uint8_t buf[64 * KL];
	struct nk_req_spec sp;
	const uint16_t homes[] = {3, 0, 3, 1, 2, 0, 3};
	spec_of(&sp, "ABCDEFG", homes, buf, 11);
	struct nk_host_out req[NK_HOST_MAX_REQ_OUT], out[NK_HOST_MAX_OUT];
	int n = r.H->client_multiget(r.cli, &sp, req, NK_HOST_MAX_REQ_OUT);
	EXPECT_EQ(n, want_packets);
	struct nk_msg queue[64];
	int recirc[64], head = 0, tail = 0, done = 0, at_servers = 0;
	unsigned keys_seen = 0;
	for (int i = 0; i < n; i++) {
		queue[tail] = req[i].msg;
		recirc[tail++] = 0;
	}
	while (head < tail && tail < 60) {
		struct nk_msg m = queue[head];
		int rc = recirc[head++];
		struct nk_pkt_meta meta = {.ingress_port = rc ? RECIRC : PORTS[CL], .src = CL,
					   .dst = m.server_id, .recirculated = (uint8_t)rc};
		struct nk_actions act;
		r.P->process(r.sw, &m, &meta, &act);
		if (act.fwd == NK_FWD_MCAST) {  /* {server, recirculation} */
			queue[tail] = m;
			recirc[tail++] = 1;
		} else {
			EXPECT_EQ(act.fwd, NK_FWD_PORT);
		}
		at_servers++;
		int k = r.H->server_handle(r.srv, &r.ns, &m, CL, out, NK_HOST_MAX_OUT);
		for (int j = 0; j < k; j++) {
			keys_seen += out[j].msg.nkeys;
			/* the reply's values are what single GETs of its keys return */
			uint32_t want = 0;
			for (unsigned p = 0; p < out[j].msg.nkeys; p++) {
				struct nk_msg get = {.proto = NK_PROTO_NETMC, .op = NK_NETMC_OP_GET,
						     .kind = NK_KIND_READ, .key_len = KL,
						     .key_slot_len = KL, .key_slots = 1};
				memcpy(get.key, m.items + (size_t)(out[j].msg.startidx + p) * KL, KL);
				struct nk_host_out g[NK_HOST_MAX_OUT];
				EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &get, CL, g, NK_HOST_MAX_OUT), 1);
				want += g[0].msg.value_len;
			}
			EXPECT_EQ(out[j].msg.value_len, want);
			/* the server answered the keys of its own group */
			for (unsigned p = 0; p < out[j].msg.nkeys; p++)
				EXPECT_EQ(homes[strchr("ABCDEFG", m.items[(out[j].msg.startidx + p) *
									    KL]) - "ABCDEFG"],
					  meta.dst);
			done += r.H->client_reply(r.cli, &out[j].msg) == NK_REPLY_DONE;
		}
	}
	EXPECT_EQ(at_servers, 4);  /* one sub-request per server group */
	EXPECT_EQ(keys_seen, 7);
	EXPECT_EQ(done, 1);
	rig_free(&r);
}

static void test_end_to_end(void)
{
	current = "end to end: NetMC, one packet from the client";
	run_end_to_end("", 1);
	current = "end to end: CliMC, one packet per server";
	run_end_to_end("scheme=climc;split=0", 4);
}

/* a coordinator beside r's client, which becomes a CoordiMC client and
 * sends it a multiget of 7 keys on the 4 servers (into req) */
static void *coord_rig(struct rig *r, struct nk_host_out *req)
{
	const struct nk_host_ops *H = r->H;
	void *co = calloc(1, H->coord_state_size);
	struct nk_host_cfg hc = {.n_servers = NS, .n_clients = NC, .n_coords = 1};
	EXPECT_EQ(H->coord_init(co, &hc), 0);
	H->client_fini(r->cli);
	hc.params = "scheme=coordimc;split=0";
	EXPECT_EQ(H->client_init(r->cli, &hc), 0);
	static uint8_t buf[64 * KL];
	struct nk_req_spec sp;
	const uint16_t homes[] = {3, 0, 3, 1, 2, 0, 3};
	spec_of(&sp, "ABCDEFG", homes, buf, 21);
	EXPECT_EQ(H->client_multiget(r->cli, &sp, req, NK_HOST_MAX_REQ_OUT), 1);
	return co;
}

static void coordimc_round_trip(int bytes)
{
	struct rig r;
	rig_init(&r, "split=0");  /* the client is set up below, with its coordinator */
	if (bytes)
		r.ns.ops = &ts_bytes_ops;
	const struct nk_host_ops *H = r.H;
	struct nk_host_out req[NK_HOST_MAX_REQ_OUT], sub[NK_HOST_MAX_REQ_OUT];
	struct nk_host_out rep[NK_HOST_MAX_OUT], fin[NK_HOST_MAX_REQ_OUT];
	void *co = coord_rig(&r, req);
	EXPECT_EQ(req[0].dst, NS + NC);  /* the coordinator's node */
	int g = H->coord_handle(co, &req[0].msg, CL, sub, NK_HOST_MAX_REQ_OUT);
	EXPECT_EQ(g, 4);  /* one sub-request per server */
	int done = 0, answers = 0;
	for (int i = 0; i < g; i++) {
		EXPECT_EQ(sub[i].dst, sub[i].msg.srv[0]);
		int k = H->server_handle(r.srv, &r.ns, &sub[i].msg, NS + NC, rep, NK_HOST_MAX_OUT);
		EXPECT_EQ(k, 1);
		/* over the wire, as a real coordinator gets it (the pairs' bytes
		 * must survive the wire's buffer, reused below) */
		uint8_t wire[4096];
		struct nk_msg got = rep[0].msg;
		if (bytes) {
			int len = nk_wire_encode(&rep[0].msg, wire, sizeof wire);
			EXPECT_EQ(nk_wire_decode(NK_PROTO_NETMC, wire, (size_t)(len > 0 ? len : 0), &got),
				  0);
		}
		if (i + 1 == g)  /* the last sub-reply, from a client's node: not a server's */
			EXPECT_EQ(H->coord_handle(co, &got, CL, fin, NK_HOST_MAX_REQ_OUT), 0);
		int n = H->coord_handle(co, &got, sub[i].dst, fin, NK_HOST_MAX_REQ_OUT);
		if (bytes)
			memset(wire, 0xEE, sizeof wire);
		EXPECT_EQ(n, i + 1 == g ? 1 : 0);  /* answered once every key is in */
		for (int j = 0; j < n; j++) {
			answers++;
			EXPECT_EQ(fin[j].dst, CL);
			EXPECT_EQ(fin[j].msg.nkeys, 7);
			EXPECT_EQ(fin[j].msg.req_id, req[0].msg.req_id);
			EXPECT(bytes ? fin[j].msg.items != NULL : fin[j].msg.items == NULL);
			if (bytes)
				EXPECT_EQ(check_pairs(&fin[j].msg, 0), 7);
			done += H->client_reply(r.cli, &fin[j].msg) == NK_REPLY_DONE;
		}
	}
	EXPECT_EQ(answers, 1);
	EXPECT_EQ(done, 1);
	current = "CoordiMC: a write goes through the coordinator";
	struct nk_msg put;
	struct nk_req_spec w = {.kind = NK_KIND_WRITE, .key_len = KL, .home = 2, .req_id = 22,
				.key = KEYS[0], .value_len = 10};
	EXPECT_EQ(H->client_request(r.cli, &w, &put), NS + NC);
	EXPECT_EQ(H->coord_handle(co, &put, CL, sub, NK_HOST_MAX_REQ_OUT), 1);
	EXPECT_EQ(sub[0].dst, 2);
	EXPECT_EQ(H->server_handle(r.srv, &r.ns, &sub[0].msg, NS + NC, rep, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(H->coord_handle(co, &rep[0].msg, 2, fin, NK_HOST_MAX_REQ_OUT), 1);
	EXPECT_EQ(fin[0].dst, CL);
	EXPECT_EQ(fin[0].msg.req_id, 22);
	EXPECT_EQ(H->client_reply(r.cli, &fin[0].msg), NK_REPLY_DONE);
	EXPECT_EQ(H->coord_handle(co, &rep[0].msg, 2, fin, NK_HOST_MAX_REQ_OUT), 0);  /* late */
	H->coord_fini(co);
	free(co);
	rig_free(&r);
}

static void test_coordimc_round_trip(void)
{
	current = "CoordiMC: one packet to the coordinator, one reply back";
	coordimc_round_trip(0);
	current = "CoordiMC: the servers' value bytes reach the client through the coordinator";
	coordimc_round_trip(1);
}

/* A multiget whose SRV hints name no server is refused before the
 * coordinator takes a pending slot: a burst of them (more than its 2^14
 * slots) must not recycle the slot of an honest multiget still in flight. */
static void test_coordimc_bad_hints_hold_no_slot(void)
{
	current = "CoordiMC: hints naming no server take no pending slot";
	struct rig r;
	rig_init(&r, "split=0");
	const struct nk_host_ops *H = r.H;
	struct nk_host_out req[NK_HOST_MAX_REQ_OUT], sub[NK_HOST_MAX_REQ_OUT];
	struct nk_host_out rep[NK_HOST_MAX_OUT], fin[NK_HOST_MAX_REQ_OUT];
	void *co = coord_rig(&r, req);
	struct nk_host_out junk[NK_HOST_MAX_REQ_OUT];
	int g = H->coord_handle(co, &req[0].msg, CL, sub, NK_HOST_MAX_REQ_OUT);
	EXPECT_EQ(g, 4);
	/* the same multiget, its second group's server forged out of range
	 * (the first group valid) */
	struct nk_msg bad = req[0].msg;
	bad.srv[1] = NS + 7;
	int sent = 0;
	for (int i = 0; i < 1 << 15; i++)
		sent += H->coord_handle(co, &bad, CL, junk, NK_HOST_MAX_REQ_OUT);
	EXPECT_EQ(sent, 0);
	int answers = 0;
	for (int i = 0; i < g; i++) {
		EXPECT_EQ(H->server_handle(r.srv, &r.ns, &sub[i].msg, NS + NC, rep,
					   NK_HOST_MAX_OUT), 1);
		answers += H->coord_handle(co, &rep[0].msg, sub[i].dst, fin, NK_HOST_MAX_REQ_OUT);
	}
	EXPECT_EQ(answers, 1);  /* the honest multiget still completes */
	EXPECT_EQ(fin[0].msg.nkeys, 7);
	H->coord_fini(co);
	free(co);
	rig_free(&r);
}

/* A hostile client's messages (client_hostile, docs/security.md), each kind
 * from a client's port: the switch refuses the switch-owned fields and the
 * server-only ops by reason, neutralises NUMKEY, forwards the rest (its own
 * traffic); the codec refuses NUMKEY past the list and the oversized MGET
 * truncated to a datagram. */
static void test_hostile_messages(void)
{
	struct rig r;
	rig_init(&r, "");
	uint8_t key[8] = "k0000001";
	struct nk_req_spec sp = {.kind = NK_KIND_WRITE, .key_len = 8, .home = 2, .req_id = 77,
				 .keyhash = nk_djb2(key, 8), .value_len = 100, .key = key};
	static const unsigned want[10] = {
		MC_STAT_FORGED, MC_STAT_FORGED, MC_STAT_FORGED, MC_STAT_MALFORMED, MC_STAT_NO_ROUTE,
		MC_STAT_PASSES, MC_STAT_HOST_SERVER_OP, MC_STAT_HOST_SERVER_OP, MC_STAT_FORWARDED,
		MC_STAT_FORWARDED};
	unsigned seen[10] = {0};
	for (uint64_t i = 0; i < 400; i++) {
		uint64_t draw = i * 0x9E3779B97F4A7C15ull;
		draw = draw - draw % 10 + i % 10;
		unsigned kind = (unsigned)(draw % 10);
		struct nk_msg m;
		uint16_t dst = r.H->client_hostile(r.cli, draw, &sp, 0, NS, &m);
		current = "hostile: a well-formed message to a node of the rack";
		EXPECT_EQ(m.proto, NK_PROTO_NETMC);
		EXPECT(dst < NS + NC);
		EXPECT_EQ(m.kind, (uint8_t)nk_wire_kind(NK_PROTO_NETMC, m.op));
		static uint8_t wire[16384];
		int len = nk_wire_encode(&m, wire, sizeof wire);
		if (kind == 5) {
			current = "hostile: NUMKEY past the key list: the codec refuses it";
			EXPECT(len < 0);
			struct nk_host_out out[NK_HOST_MAX_OUT];
			EXPECT_EQ(r.H->server_handle(r.srv, &r.ns, &m, CL, out, NK_HOST_MAX_OUT), 0);
		} else {
			EXPECT(len > 0);
		}
		if (kind == 9 && m.op == NK_NETMC_OP_MGET) {
			current = "hostile: an oversized MGET, truncated to a datagram, decodes as truncated";
			struct nk_msg back;
			EXPECT(len > 1472);
			EXPECT(nk_wire_decode(NK_PROTO_NETMC, wire, 1472, &back) < 0);
		}
		current = "hostile: the switch refuses or neutralises each kind, by reason";
		uint64_t before[MC_STAT_COUNT];
		for (unsigned c = 0; c < MC_STAT_COUNT; c++)
			before[c] = stat(&r, c);
		struct nk_actions act;
		struct nk_pkt_meta meta = {.ingress_port = PORTS[CL], .src = CL, .dst = dst};
		r.P->process(r.sw, &m, &meta, &act);
		/* the oversized MGET is a valid one in-process: split as any */
		unsigned cell = kind == 9 && m.op == NK_NETMC_OP_MGET ? MC_STAT_PASSES : want[kind];
		EXPECT_EQ(stat(&r, cell), before[cell] + 1);
		int refused = cell != MC_STAT_PASSES && cell != MC_STAT_FORWARDED;
		EXPECT_EQ(act.fwd == NK_FWD_DROP, refused);
		if (kind == 5)  /* NUMKEY: the switch's, overwritten by the pass */
			EXPECT(m.startidx + m.nkeys <= m.key_slots);
		seen[kind]++;
	}
	for (unsigned k = 0; k < 10; k++)
		EXPECT(seen[k] == 40);
	rig_free(&r);
}

static void test_bad_params_refused(void)
{
	current = "params: W other than 16 or 32, an unknown scheme";
	const struct nk_host_ops *H = nk_host_find("netmc");
	const struct nk_pipeline_ops *P = nk_pipeline_find("netmc");
	void *c = calloc(1, H->client_state_size), *sw = calloc(1, P->state_size);
	struct nk_host_cfg hc = {.n_servers = NS, .params = "w=24"};
	EXPECT(H->client_init(c, &hc) != 0);
	hc.params = "scheme=other";
	EXPECT(H->client_init(c, &hc) != 0);
	struct nk_pipeline_cfg cfg = {.n_servers = NS, .params = "split=2"};
	EXPECT(P->init(sw, &cfg) != 0);
	cfg.params = "w=24";
	EXPECT(P->init(sw, &cfg) != 0);
	void *co = calloc(1, H->coord_state_size);
	hc.params = "w=24";
	EXPECT(H->coord_init(co, &hc) != 0);
	free(co);
	free(c);
	free(sw);
}

int main(void)
{
	test_worked_example();
	test_one_group_and_full_width();
	test_malformed_dropped();
	test_baseline_switch_only_forwards();
	test_climc_sub_requests();
	test_chunks_above_w();
	test_server_reply_and_mtu_split();
	test_server_value_bytes();
	test_aggregation_all_or_nothing();
	test_buffers_allocated_at_first_use();
	test_end_to_end();
	test_coordimc_round_trip();
	test_coordimc_bad_hints_hold_no_slot();
	test_hostile_messages();
	test_bad_params_refused();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
