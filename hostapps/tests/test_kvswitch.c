/*
 * test_kvswitch.c - packet-in/packet-out tests of KVSwitch: the switch
 * pipeline (hostapps/src/pipeline/kvswitch.c) and its host logic
 * (hostapps/src/host/kvswitch.c); docs/kvswitch.md.
 *
 * Covered: cold keys forwarded and counted by HashPipe (a hot cold key's
 * count is exact, duplicates carried to later stages); HotkeyTable hits
 * count; hot reads round-robin over valid replicas and fall back to the
 * owner; hot writes clear every Valid bit but the owner's, stamp VER and
 * multicast to the (owner, r) group; UPDATE_ACK validates only at the current
 * version (strict) or always (paper); server-only ops from client ports are
 * dropped; Loadcount; period_reset; the server agent: REPL_CMD -> pushes,
 * push -> ACK, owner vs replica copies of a hot write, stale copies not
 * applied (strict) or applied (paper); strict mode's rules (FLAGS names the
 * owner, at-most-once resends, late cold writes answered ERROR until the versioned
 * REPL_EVICT, stamped redirected reads) and the digest's stale read, which
 * the paper's switch serves and strict mode does not; client key mapping and
 * reply matching.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/host.h"
#include "netkv/pipeline.h"
#include "netkv/wire.h"

#include "expect.h"
#include "tstore.h"

/* allocations counted where the sanitizer runtime lets a test see them
 * (just test-c's build): the server agent allocates nothing per packet */
#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
/* the runtime's (sanitizer/allocator_interface.h, not installed with every compiler) */
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
					      void (*free_hook)(const volatile void *));
#define ALLOC_COUNTED 1
static volatile unsigned long n_allocs;
static void on_alloc(const volatile void *p, size_t n)
{
	(void)p;
	(void)n;
	n_allocs++;
}
static void on_free(const volatile void *p)
{
	(void)p;
}
#else
#define ALLOC_COUNTED 0
static volatile unsigned long n_allocs;
#endif

#define NS 4
#define NC 1
#define CL NS          /* the client's node */

#include "swrig.h"

/* ---- rig ------------------------------------------------------------------ */

static struct nk_msg mk(uint8_t op, uint8_t keybyte, uint32_t req_id)
{
	struct nk_msg m;
	memset(&m, 0, sizeof m);
	m.proto = NK_PROTO_KVSWITCH;
	m.op = op;
	m.kind = (uint8_t)nk_wire_kind(NK_PROTO_KVSWITCH, op);
	m.key_len = 16;
	m.key[15] = keybyte;
	m.req_id = req_id;
	m.frag_cnt = 1;
	return m;
}

/* install key `kb` hot in `slot`: owner first, then replicas (digest §4.5) */
static void install(void *st, uint8_t kb, uint32_t slot, const uint16_t *servers, unsigned r)
{
	uint64_t key[2] = { 0, kb };
	for (unsigned o = 1; o <= r; o++) {
		uint64_t k[2] = { slot, o }, a[1] = { servers[o - 1] };
		EXPECT_EQ(P->table_add(st, "ServermapTable", k, 2, a, 1), 0);
	}
	EXPECT_EQ(P->reg_write(st, "Valid", slot, 1u << servers[0]), 0);
	EXPECT_EQ(P->reg_write(st, "RoundRobin", slot, 1), 0);
	uint64_t args[3] = { r, slot, servers[0] };
	EXPECT_EQ(P->table_add(st, "HotkeyTable", key, 2, args, 3), 0);
}

/* ---- switch ------------------------------------------------------------------ */

static void test_cold_and_hashpipe(void)
{
	current = "cold keys, HashPipe";
	void *st = sw_new("hot_keys=8;hashpipe_stages=2");
	uint16_t d;
	for (int i = 0; i < 5; i++) {
		struct nk_msg m = mk(NK_KVSWITCH_OP_GET, 7, (uint32_t)i);
		m.ver = 99;   /* forged: the switch owns VER */
		struct nk_actions a = sw(st, &m, CL, 2, &d);
		EXPECT_EQ(a.fwd, NK_FWD_PORT);
		EXPECT_EQ(a.port, 12);
		EXPECT_EQ(d, 2);
		EXPECT_EQ(m.ver, 0);
	}
	/* one key: its count is exact, in one cell */
	uint64_t total = 0, cells = 0;
	for (uint32_t i = 0; i < 8; i++) {
		uint64_t c = reg(st, "HashPipeCount", i);
		total += c;
		cells += c != 0;
		if (c)
			EXPECT_EQ(reg(st, "HashPipeKeyLo", i), 7);
	}
	EXPECT_EQ(total, 5);
	EXPECT_EQ(cells, 1);
	EXPECT_EQ(reg(st, "Loadcount", 2), 5);
	/* many keys: the total never exceeds what was sent (carried pairs drop) */
	for (int k = 0; k < 40; k++) {
		struct nk_msg m = mk(NK_KVSWITCH_OP_GET, (uint8_t)(100 + k), 0);
		sw(st, &m, CL, 1, NULL);
	}
	total = 0;
	for (uint32_t i = 0; i < 8; i++)
		total += reg(st, "HashPipeCount", i);
	EXPECT(total <= 45 && total >= 8);
	EXPECT_EQ(P->reg_write(st, "period_reset", 0, 1), 0);
	for (uint32_t i = 0; i < 8; i++)
		EXPECT_EQ(reg(st, "HashPipeCount", i), 0);
	EXPECT_EQ(reg(st, "Loadcount", 2), 0);
	EXPECT_EQ(reg(st, "period_reset", 0), 0);
	sw_free(st);
}

static void test_hot_reads(void)
{
	current = "hot reads: round robin over valid replicas";
	void *st = sw_new("hot_keys=8");
	uint16_t servers[3] = { 1, 2, 3 };     /* owner 1 */
	install(st, 9, 5, servers, 3);
	uint16_t d;
	/* only the owner is valid: every read stays with it, RR advances */
	for (int i = 0; i < 3; i++) {
		struct nk_msg m = mk(NK_KVSWITCH_OP_GET, 9, 0);
		sw(st, &m, CL, 1, &d);
		EXPECT_EQ(d, 1);
	}
	EXPECT_EQ(reg(st, "RoundRobin", 5), 1);
	EXPECT_EQ(reg(st, "HotkeyCount", 5), 3);
	/* replicas 2 and 3 confirm (strict: at the current version 0) */
	for (uint16_t s = 2; s <= 3; s++) {
		struct nk_msg ack = mk(NK_KVSWITCH_OP_UPDATE_ACK, 9, 0);
		struct nk_actions a = sw(st, &ack, s, CL, NULL);
		EXPECT_EQ(a.fwd, NK_FWD_DROP);
	}
	EXPECT_EQ(reg(st, "Valid", 5), 0xE);
	uint16_t seen[3];
	for (int i = 0; i < 3; i++) {
		struct nk_msg m = mk(NK_KVSWITCH_OP_GET, 9, 0);
		struct nk_actions a = sw(st, &m, CL, 1, &seen[i]);
		EXPECT_EQ(a.fwd, NK_FWD_PORT);
		EXPECT_EQ(a.port, 10 + seen[i]);
	}
	EXPECT_EQ(seen[0], 1);
	EXPECT_EQ(seen[1], 2);
	EXPECT_EQ(seen[2], 3);
	EXPECT_EQ(reg(st, "Loadcount", 2), 1);
	EXPECT_EQ(reg(st, "Loadcount", 1), 4);
	/* a forged ACK from the client's port is dropped and changes nothing */
	P->reg_write(st, "Valid", 5, 0x2);
	struct nk_msg f = mk(NK_KVSWITCH_OP_UPDATE_ACK, 9, 0);
	struct nk_actions a = sw(st, &f, CL, 1, NULL);
	EXPECT_EQ(a.fwd, NK_FWD_DROP);
	EXPECT_EQ(reg(st, "Valid", 5), 0x2);
	EXPECT_EQ(reg(st, "stats", 8), 1);
	/* an ACK for a cold key is consumed */
	struct nk_msg c = mk(NK_KVSWITCH_OP_UPDATE_ACK, 77, 0);
	a = sw(st, &c, 2, CL, NULL);
	EXPECT_EQ(a.fwd, NK_FWD_DROP);
	/* removed from HotkeyTable: cold again */
	uint64_t key[2] = { 0, 9 };
	EXPECT_EQ(P->table_del(st, "HotkeyTable", key, 2), 0);
	EXPECT_EQ(P->table_del(st, "HotkeyTable", key, 2), NK_PIPE_ENOENT);
	struct nk_msg m = mk(NK_KVSWITCH_OP_GET, 9, 0);
	sw(st, &m, CL, 1, &d);
	EXPECT_EQ(d, 1);
	EXPECT_EQ(reg(st, "HotkeyCount", 5), 6);
	sw_free(st);
}

static void test_hot_writes(int strict)
{
	current = strict ? "hot writes, strict" : "hot writes, paper (strict=0)";
	void *st = sw_new(strict ? "hot_keys=8" : "hot_keys=8;strict=0");
	uint16_t servers[3] = { 0, 2, 3 };     /* owner 0 */
	install(st, 4, 2, servers, 3);
	P->reg_write(st, "Ver", 2, 1u << 20);
	P->reg_write(st, "Valid", 2, 0xD);
	struct nk_msg w = mk(NK_KVSWITCH_OP_SET, 4, 1);
	w.value_len = 10;
	uint16_t d;
	struct nk_actions a = sw(st, &w, CL, 0, &d);
	EXPECT_EQ(a.fwd, NK_FWD_MCAST);
	EXPECT_EQ(a.mcast_group, nk_kvs_mcast_group(0, 3));
	EXPECT_EQ(a.mcast_group, 2);
	EXPECT_EQ(w.ver, (1u << 20) + 1);
	EXPECT_EQ(w.result, 0 + 1);                 /* FLAGS: the owner, server 0 */
	EXPECT_EQ(reg(st, "Valid", 2), strict ? 0x0 : 0x1);
	EXPECT_EQ(reg(st, "Loadcount", 0) + reg(st, "Loadcount", 2) + reg(st, "Loadcount", 3), 3);
	/* a second write before the first's ACKs: the old ACK is refused (strict) */
	struct nk_msg w2 = mk(NK_KVSWITCH_OP_SET, 4, 2);
	sw(st, &w2, CL, 0, &d);
	struct nk_msg ack = mk(NK_KVSWITCH_OP_UPDATE_ACK, 4, 0);
	ack.ver = w.ver;
	sw(st, &ack, 2, CL, NULL);
	EXPECT_EQ(reg(st, "Valid", 2), strict ? 0x0 : 0x5);
	ack.ver = w2.ver;
	sw(st, &ack, 3, CL, NULL);
	EXPECT_EQ(reg(st, "Valid", 2), strict ? 0x8 : 0xD);
	/* strict: replica 3 is valid but not read until the owner confirms */
	P->reg_write(st, "RoundRobin", 2, 3);
	struct nk_msg g3 = mk(NK_KVSWITCH_OP_GET, 4, 0);
	sw(st, &g3, CL, 0, &d);
	EXPECT_EQ(d, strict ? 0 : 3);
	sw(st, &ack, 0, CL, NULL);              /* the owner's ACK */
	EXPECT_EQ(reg(st, "Valid", 2), strict ? 0x9 : 0xD);
	P->reg_write(st, "RoundRobin", 2, 3);
	g3 = mk(NK_KVSWITCH_OP_GET, 4, 0);
	g3.ver = 99;                            /* a client's VER is never kept */
	sw(st, &g3, CL, 0, &d);
	EXPECT_EQ(d, 3);
	EXPECT_EQ(g3.ver, strict ? w2.ver : 0);  /* the version replica 3 confirmed */
	/* a client's FLAGS is never kept either (it would name an owner) */
	struct nk_msg cold = mk(NK_KVSWITCH_OP_SET, 66, 0);
	cold.result = 3;
	sw(st, &cold, CL, 1, &d);
	EXPECT_EQ(cold.result, 0);
	EXPECT_EQ(cold.ver, 0);
	/* a hot write a client addresses to a replica: HotkeyTable's owner
	 * decides the group and FLAGS, not the address (docs/security.md) */
	struct nk_msg wr = mk(NK_KVSWITCH_OP_SET, 4, 3);
	wr.result = 3;
	a = sw(st, &wr, CL, 2, &d);
	EXPECT_EQ(a.fwd, NK_FWD_MCAST);
	EXPECT_EQ(a.mcast_group, nk_kvs_mcast_group(0, 3));
	EXPECT_EQ(wr.result, 0 + 1);
	EXPECT_EQ(reg(st, "Valid", 2), strict ? 0x0 : 0x1);
	/* hot reads never see an invalid replica */
	P->reg_write(st, "Valid", 2, 0x1);
	for (int i = 0; i < 6; i++) {
		struct nk_msg m = mk(NK_KVSWITCH_OP_GET, 4, 0);
		sw(st, &m, CL, 0, &d);
		EXPECT_EQ(d, 0);
	}
	EXPECT(reg(st, "stats", 2) >= 4);
	sw_free(st);
}

/* r = 1 (install_below_t): a hot write goes to the owner, unicast, whatever
 * server the client addressed; before, it went to the address: server 2
 * stored it as a replica copy at a stamped version and the client got no
 * reply (docs/kvswitch.md "Keys below T"). */
static void test_hot_writes_r1(void)
{
	current = "hot writes, r = 1";
	void *st = sw_new("hot_keys=8");
	uint16_t servers[1] = { 1 };     /* owner 1 */
	install(st, 7, 0, servers, 1);
	for (uint16_t to = 0; to < NS; to++) {
		struct nk_msg w = mk(to & 1 ? NK_KVSWITCH_OP_DEL : NK_KVSWITCH_OP_SET, 7, 10 + to);
		uint16_t d;
		struct nk_actions a = sw(st, &w, CL, to, &d);
		EXPECT_EQ(a.fwd, NK_FWD_PORT);
		EXPECT_EQ(d, 1);
		EXPECT_EQ(w.result, 1 + 1);          /* FLAGS: the owner */
		EXPECT_EQ(w.ver, to + 1u);
	}
	EXPECT_EQ(reg(st, "Loadcount", 1), NS);
	EXPECT_EQ(reg(st, "Loadcount", 0) + reg(st, "Loadcount", 2) + reg(st, "Loadcount", 3), 0);
	sw_free(st);
}

static void test_limits(void)
{
	current = "table limits";
	void *st = sw_new("hot_keys=2");
	uint64_t k1[2] = { 0, 1 }, k2[2] = { 0, 2 }, k3[2] = { 0, 3 };
	uint64_t a0[3] = { 2, 0, 0 }, a1[3] = { 2, 1, 0 }, bad_slot[3] = { 2, 2, 0 };
	uint64_t bad_r[3] = { 33, 0, 0 }, bad_owner[3] = { 2, 0, NS };
	EXPECT_EQ(P->table_add(st, "HotkeyTable", k1, 2, a0, 3), 0);
	EXPECT_EQ(P->table_add(st, "HotkeyTable", k2, 2, a1, 3), 0);
	EXPECT_EQ(P->table_add(st, "HotkeyTable", k3, 2, a1, 3), NK_PIPE_EFULL);
	EXPECT_EQ(P->table_add(st, "HotkeyTable", k1, 2, bad_slot, 3), NK_PIPE_ERANGE);
	EXPECT_EQ(P->table_add(st, "HotkeyTable", k1, 2, bad_r, 3), NK_PIPE_ERANGE);
	EXPECT_EQ(P->table_add(st, "HotkeyTable", k1, 2, bad_owner, 3), NK_PIPE_ERANGE);
	EXPECT_EQ(P->table_add(st, "HotkeyTable", k1, 2, a0, 2), NK_PIPE_EINVAL);
	uint64_t sk[2] = { 0, 1 }, srv[1] = { NS };
	EXPECT_EQ(P->table_add(st, "ServermapTable", sk, 2, srv, 1), NK_PIPE_ERANGE);
	EXPECT_EQ(P->table_add(st, "nope", sk, 2, srv, 1), NK_PIPE_ENOENT);
	uint64_t v;
	EXPECT_EQ(P->reg_read(st, "Valid", 2, &v), NK_PIPE_ERANGE);
	EXPECT_EQ(P->reg_read(st, "nope", 0, &v), NK_PIPE_ENOENT);
	sw_free(st);
	void *bad = calloc(1, P->state_size);
	struct nk_pipeline_cfg cfg = { .n_servers = NS, .params = "hot_keys=0" };
	EXPECT_EQ(P->init(bad, &cfg), NK_PIPE_ERANGE);
	cfg.params = "hashpipe_stages=x";
	EXPECT_EQ(P->init(bad, &cfg), NK_PIPE_EINVAL);
	free(bad);
}

/* ---- hosts ------------------------------------------------------------------ */

/* H->server_handle, and every message it sends carries the kind wire.c's
 * table gives its op: the simulator takes the host logic's kind as it is
 * (kvswitch.c's ks_out_kind spells the common ones out), netkv-switch and
 * kvserver the decoder's, from the table. */
static int serve(void *st, struct nk_store *store, const struct nk_msg *in, uint16_t src,
		 struct nk_host_out *out, int max_out)
{
	int n = H->server_handle(st, store, in, src, out, max_out);
	for (int i = 0; i < n; i++)
		EXPECT_EQ(out[i].msg.kind, (uint8_t)nk_wire_kind(NK_PROTO_KVSWITCH, out[i].msg.op));
	return n;
}

struct host {
	void *st;
	struct tstore store;
	struct nk_store ns;
};

static void host_init(struct host *h, uint32_t id, const char *params)
{
	memset(h, 0, sizeof *h);
	h->st = calloc(1, H->server_state_size);
	struct nk_host_cfg hc = { .n_servers = NS, .n_clients = NC, .id = id, .params = params };
	EXPECT_EQ(H->server_init(h->st, &hc), 0);
	h->ns.ops = &ts_ops;
	h->ns.impl = &h->store;
}

static void host_free(struct host *h)
{
	H->server_fini(h->st);
	free(h->st);
}

static uint64_t stored_ver(struct host *h, uint8_t kb)
{
	struct nk_msg m = mk(NK_KVSWITCH_OP_GET, kb, 0);
	uint64_t v = 0;
	uint32_t l;
	return ts_get(&h->store, &m, &v, &l) ? 0 : v;
}

static void test_server_agent(int strict)
{
	current = strict ? "server agent, strict" : "server agent, paper";
	const char *params = strict ? "hot_keys=8" : "hot_keys=8;strict=0";
	struct host own, rep;
	host_init(&own, 0, params);
	host_init(&rep, 2, params);
	struct nk_host_out out[NK_HOST_MAX_OUT];
	/* a cold write at the owner: self-versioned, replied */
	struct nk_msg w = mk(NK_KVSWITCH_OP_SET, 4, 1);
	w.value_len = 10;
	EXPECT_EQ(serve(own.st, &own.ns, &w, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_KVSWITCH_OP_SET_REPLY);
	EXPECT_EQ(stored_ver(&own, 4), 1);
	/* REPL_CMD: install version V0, push to servers 2 and 3 (payload) */
	struct nk_msg cmd = mk(NK_KVSWITCH_OP_REPL_CMD, 4, 0);
	uint8_t payload[3] = { 2, 2, 3 };
	cmd.value = payload;
	cmd.value_len = 3;
	cmd.ver = 1u << 20;
	int n = serve(own.st, &own.ns, &cmd, NK_NODE_NONE, out, NK_HOST_MAX_OUT);
	EXPECT_EQ(n, 2);
	EXPECT_EQ(out[0].msg.op, NK_KVSWITCH_OP_REPL_PUSH);
	EXPECT_EQ(out[0].dst, 2);
	EXPECT_EQ(out[1].dst, 3);
	EXPECT_EQ(out[0].msg.ver, 1u << 20);
	EXPECT_EQ(out[0].msg.value_len, 10);
	EXPECT_EQ(stored_ver(&own, 4), 1u << 20);
	/* the simulator's form: bitmap */
	struct nk_msg cmd2 = mk(NK_KVSWITCH_OP_REPL_CMD, 4, 0);
	cmd2.bitmap = 0x9;   /* servers 0 (itself: skipped) and 3 */
	cmd2.value_len = 3;
	cmd2.ver = 1u << 20;
	n = serve(own.st, &own.ns, &cmd2, NK_NODE_NONE, out, NK_HOST_MAX_OUT);
	EXPECT_EQ(n, 1);
	EXPECT_EQ(out[0].dst, 3);
	/* the push at the replica: stored, confirmed with its version */
	struct nk_msg push = out[0].msg;
	EXPECT_EQ(serve(rep.st, &rep.ns, &push, 0, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_KVSWITCH_OP_UPDATE_ACK);
	EXPECT_EQ(out[0].msg.ver, 1u << 20);
	EXPECT_EQ(stored_ver(&rep, 4), 1u << 20);
	/* a hot write (stamped): the owner replies, the replica confirms */
	struct nk_msg hw = mk(NK_KVSWITCH_OP_SET, 4, 7);
	hw.ver = (1u << 20) + 2;
	EXPECT_EQ(serve(own.st, &own.ns, &hw, CL, out, NK_HOST_MAX_OUT), strict ? 2 : 1);
	EXPECT_EQ(out[0].msg.op, NK_KVSWITCH_OP_SET_REPLY);
	EXPECT_EQ(out[0].msg.req_id, 7);
	if (strict) {   /* the owner confirms too: replicas are read only then */
		EXPECT_EQ(out[1].msg.op, NK_KVSWITCH_OP_UPDATE_ACK);
		EXPECT_EQ(out[1].msg.ver, (1u << 20) + 2);
	}
	EXPECT_EQ(stored_ver(&own, 4), (1u << 20) + 2);
	EXPECT_EQ(serve(rep.st, &rep.ns, &hw, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_KVSWITCH_OP_UPDATE_ACK);
	EXPECT_EQ(out[0].msg.ver, (1u << 20) + 2);
	/* an older copy arrives late (reordered): strict keeps the newer one */
	struct nk_msg old = mk(NK_KVSWITCH_OP_SET, 4, 6);
	old.ver = (1u << 20) + 1;
	EXPECT_EQ(serve(rep.st, &rep.ns, &old, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(stored_ver(&rep, 4), strict ? (1u << 20) + 2 : (1u << 20) + 1);
	EXPECT_EQ(out[0].msg.ver, strict ? (1u << 20) + 2 : (1u << 20) + 1);
	EXPECT_EQ(serve(own.st, &own.ns, &old, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_KVSWITCH_OP_SET_REPLY);
	EXPECT_EQ(out[0].msg.result, strict ? NK_KVSWITCH_RESULT_ERROR : NK_RESULT_OK);
	EXPECT_EQ(stored_ver(&own, 4), strict ? (1u << 20) + 2 : (1u << 20) + 1);
	/* a redirected read at the replica: its stored version */
	struct nk_msg g = mk(NK_KVSWITCH_OP_GET, 4, 8);
	EXPECT_EQ(serve(rep.st, &rep.ns, &g, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_KVSWITCH_OP_GET_REPLY);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(out[0].msg.ver, stored_ver(&rep, 4));
	/* a hot delete: a tombstone at the replica, read as NOT_FOUND */
	struct nk_msg del = mk(NK_KVSWITCH_OP_DEL, 4, 9);
	del.ver = (1u << 20) + 3;
	EXPECT_EQ(serve(rep.st, &rep.ns, &del, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_KVSWITCH_OP_UPDATE_ACK);
	EXPECT_EQ(serve(rep.st, &rep.ns, &g, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_NOT_FOUND);
	/* evicted: the replica role is gone (a later stamped copy is a replica
	 * update again, the owner's role is kept) */
	struct nk_msg ev = mk(NK_KVSWITCH_OP_REPL_EVICT, 4, 0);
	EXPECT_EQ(serve(rep.st, &rep.ns, &ev, NK_NODE_NONE, out, NK_HOST_MAX_OUT), 0);
	char line[128];
	char *argv[1] = { "roles" };
	EXPECT_EQ(H->server_ctl(rep.st, &rep.ns, 1, argv, line, sizeof line), (int)strlen(line));
	EXPECT(!strcmp(line, "ok owner=0 replica=0 full=0 amo_dups=0 amo_old=0 retries=0"));
	EXPECT_EQ(H->server_ctl(own.st, &own.ns, 1, argv, line, sizeof line), (int)strlen(line));
	EXPECT(!strcmp(line, strict ? "ok owner=1 replica=0 full=0 amo_dups=0 amo_old=0 retries=1"
				    : "ok owner=1 replica=0 full=0 amo_dups=0 amo_old=0 retries=0"));
	char *own_args[2] = { "own", "000000000000000000000000000000ab" };
	/* the reply's length: kvserver's control socket sends that many bytes */
	EXPECT_EQ(H->server_ctl(rep.st, &rep.ns, 2, own_args, line, sizeof line), 2);
	EXPECT(!strcmp(line, "ok"));
	struct nk_msg hw2 = mk(NK_KVSWITCH_OP_SET, 0xab, 11);
	hw2.ver = 5u << 20;
	EXPECT_EQ(serve(rep.st, &rep.ns, &hw2, CL, out, NK_HOST_MAX_OUT), strict ? 2 : 1);
	EXPECT_EQ(out[0].msg.op, NK_KVSWITCH_OP_SET_REPLY);
	own_args[1] = "00zz";
	EXPECT(H->server_ctl(rep.st, &rep.ns, 2, own_args, line, sizeof line) > 0);
	EXPECT(!strncmp(line, "err ", 4));
	host_free(&own);
	host_free(&rep);
}

/* a store that holds nothing: the role table is what is tested */
static int null_get(void *impl, const struct nk_msg *m, uint64_t *ver, uint32_t *vlen)
{
	(void)impl;
	(void)m;
	(void)ver;
	(void)vlen;
	return 1;
}

static int null_put(void *impl, const struct nk_msg *m, uint64_t ver, uint32_t vlen)
{
	(void)impl;
	(void)m;
	(void)ver;
	(void)vlen;
	return 0;
}

/* key number i: its 16 B in the last four bytes */
static struct nk_msg mk_i(uint8_t op, uint32_t i)
{
	struct nk_msg m = mk(op, 0, i);
	m.key[12] = (uint8_t)(i >> 24);
	m.key[13] = (uint8_t)(i >> 16);
	m.key[14] = (uint8_t)(i >> 8);
	m.key[15] = (uint8_t)i;
	return m;
}

/* the replica role of key i: pushed (1, answered with an UPDATE_ACK) or
 * evicted (0) */
static void role_push(void *st, struct nk_store *ns, uint32_t i)
{
	struct nk_host_out out[NK_HOST_MAX_OUT];
	struct nk_msg p = mk_i(NK_KVSWITCH_OP_REPL_PUSH, i);
	p.ver = 1u << 20;
	EXPECT_EQ(serve(st, ns, &p, 0, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_KVSWITCH_OP_UPDATE_ACK);
}

static void role_evict(void *st, struct nk_store *ns, uint32_t i)
{
	struct nk_host_out out[NK_HOST_MAX_OUT];
	struct nk_msg e = mk_i(NK_KVSWITCH_OP_REPL_EVICT, i);
	e.ver = 2u << 20;
	EXPECT_EQ(serve(st, ns, &e, NK_NODE_NONE, out, NK_HOST_MAX_OUT), 0);
}

static void expect_roles(void *st, struct nk_store *ns, const char *want)
{
	char line[128];
	char *argv[1] = { "roles" };
	H->server_ctl(st, ns, 1, argv, line, sizeof line);
	if (strcmp(line, want))
		fprintf(stderr, "roles: '%s', want '%s'\n", line, want);
	EXPECT(!strcmp(line, want));
}

/* keys whose home slot (CRC-32 of the key, mod the 16 slots of hot_keys=2)
 * is `home`, from key number `from` on */
static uint32_t key_at(uint32_t home, uint32_t from)
{
	for (uint32_t i = from;; i++) {
		struct nk_msg m = mk_i(NK_KVSWITCH_OP_GET, i);
		if ((nk_crc32(m.key, NK_KVSWITCH_KEY_LEN) & 15) == home)
			return i;
	}
}

/* The server agent's role table (docs/kvswitch.md "Design") is made once,
 * 4 x hot_keys slots: thousands of roles pushed and evicted allocate
 * nothing (they used to leave tombstones, and the table was rebuilt with
 * calloc when those filled it); a role beyond half the table is refused and
 * counted in `full`, the push still answered; an eviction inside a cluster
 * (wrapping past the table's end) leaves the keys after it reachable. */
static void test_role_table(void)
{
	current = "role table";
	const struct nk_store_ops ops = { .get = null_get, .put = null_put };
	struct nk_store ns = { .ops = &ops, .impl = NULL };
	void *st = calloc(1, H->server_state_size);
	struct nk_host_cfg hc = { .n_servers = NS, .n_clients = NC, .id = 1,
				  .params = "hot_keys=2" };   /* 16 slots, 8 roles */
	EXPECT_EQ(H->server_init(st, &hc), 0);
	unsigned long before = n_allocs;
	for (uint32_t i = 0; i < 4000; i++) {
		role_push(st, &ns, i);
		if (i % 3 == 2) {        /* three at a time, evicted in another order */
			role_evict(st, &ns, i - 1);
			role_evict(st, &ns, i);
			role_evict(st, &ns, i - 2);
		}
	}
	if (ALLOC_COUNTED)
		EXPECT_EQ(n_allocs - before, 0);
	expect_roles(st, &ns, "ok owner=0 replica=1 full=0 amo_dups=0 amo_old=0 retries=0");
	role_evict(st, &ns, 3999);
	/* full: 8 roles fit, the 9th is refused and counted, until one goes */
	for (uint32_t i = 0; i < 9; i++)
		role_push(st, &ns, 10000 + i);
	expect_roles(st, &ns, "ok owner=0 replica=8 full=1 amo_dups=0 amo_old=0 retries=0");
	role_evict(st, &ns, 10003);
	role_push(st, &ns, 10008);
	expect_roles(st, &ns, "ok owner=0 replica=8 full=1 amo_dups=0 amo_old=0 retries=0");
	for (uint32_t i = 0; i < 9; i++)
		if (i != 3)     /* a key without a role: its eviction would make an owner */
			role_evict(st, &ns, 10000 + i);
	expect_roles(st, &ns, "ok owner=0 replica=0 full=1 amo_dups=0 amo_old=0 retries=0");
	/* a cluster at slots 15, 0, 1, 2 (three keys of home 15, one of home 0):
	 * evicting its first key moves the others back; each is still found
	 * (evicted once: the count drops; pushed again: not a second role) */
	uint32_t a = key_at(15, 0), b = key_at(15, a + 1), c = key_at(15, b + 1);
	uint32_t d = key_at(0, 0);
	role_push(st, &ns, a);
	role_push(st, &ns, b);
	role_push(st, &ns, c);
	role_push(st, &ns, d);
	role_evict(st, &ns, a);
	role_push(st, &ns, d);
	role_push(st, &ns, c);
	expect_roles(st, &ns, "ok owner=0 replica=3 full=1 amo_dups=0 amo_old=0 retries=0");
	role_evict(st, &ns, d);
	role_evict(st, &ns, b);
	expect_roles(st, &ns, "ok owner=0 replica=1 full=1 amo_dups=0 amo_old=0 retries=0");
	role_evict(st, &ns, c);
	expect_roles(st, &ns, "ok owner=0 replica=0 full=1 amo_dups=0 amo_old=0 retries=0");
	H->server_fini(st);
	free(st);
}

/* Strict mode's at-most-once and ordering rules at the servers (docs/kvswitch.md
 * "Strict mode"): FLAGS names the owner, resent writes answered from the AMO
 * table, an unstamped write of a key the owner knows hot is answered ERROR until the
 * versioned REPL_EVICT, a replica newer than a redirected read's VER answers ERROR. */
static void test_strict_rules(void)
{
	current = "strict rules (FLAGS owner, AMO, late cold writes, read stamps)";
	struct host own, rep;
	host_init(&own, 1, "hot_keys=8;amo=1;amo_window=4");
	host_init(&rep, 2, "hot_keys=8;amo=1;amo_window=4");
	struct nk_host_out out[NK_HOST_MAX_OUT];
	/* a stamped write naming server 1 owner, before any REPL_CMD reached
	 * it: answered as the owner (reply + ACK), a replica copy at server 2 */
	struct nk_msg w = mk(NK_KVSWITCH_OP_SET, 5, 100);
	w.ver = 3u << 16;
	w.result = 1 + 1;
	EXPECT_EQ(serve(own.st, &own.ns, &w, CL, out, NK_HOST_MAX_OUT), 2);
	EXPECT_EQ(out[0].msg.op, NK_KVSWITCH_OP_SET_REPLY);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(out[1].msg.op, NK_KVSWITCH_OP_UPDATE_ACK);
	EXPECT_EQ(serve(rep.st, &rep.ns, &w, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_KVSWITCH_OP_UPDATE_ACK);
	/* the same write resent (its reply was lost), stamped anew after a
	 * newer write: answered from the table, not applied, not confirmed */
	struct nk_msg w2 = mk(NK_KVSWITCH_OP_SET, 5, 101);
	w2.ver = (3u << 16) + 1;
	w2.result = 2;
	EXPECT_EQ(serve(own.st, &own.ns, &w2, CL, out, NK_HOST_MAX_OUT), 2);
	w.ver = (3u << 16) + 2;
	EXPECT_EQ(serve(own.st, &own.ns, &w, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(stored_ver(&own, 5), (3u << 16) + 1);
	/* too old to tell (its table slot was reused): dropped */
	for (uint32_t i = 0; i < 4; i++) {
		struct nk_msg c = mk(NK_KVSWITCH_OP_SET, 6, 200 + i);
		EXPECT_EQ(serve(own.st, &own.ns, &c, CL, out, NK_HOST_MAX_OUT), 1);
	}
	struct nk_msg stale = mk(NK_KVSWITCH_OP_SET, 6, 100);
	EXPECT_EQ(serve(own.st, &own.ns, &stale, CL, out, NK_HOST_MAX_OUT), 0);
	/* a cold write of a key the owner knows hot (it passed the switch
	 * before the install): ERROR, the resend is stamped */
	struct nk_msg cw = mk(NK_KVSWITCH_OP_SET, 5, 300);
	EXPECT_EQ(serve(own.st, &own.ns, &cw, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.result, NK_KVSWITCH_RESULT_ERROR);
	EXPECT_EQ(stored_ver(&own, 5), (3u << 16) + 1);
	/* an eviction older than the last hot news changes nothing ... */
	struct nk_msg ev = mk(NK_KVSWITCH_OP_REPL_EVICT, 5, 0);
	ev.ver = 2u << 16;
	EXPECT_EQ(serve(own.st, &own.ns, &ev, NK_NODE_NONE, out, NK_HOST_MAX_OUT), 0);
	cw.req_id = 301;
	EXPECT_EQ(serve(own.st, &own.ns, &cw, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.result, NK_KVSWITCH_RESULT_ERROR);
	/* ... the current one makes the key cold and raises the version to
	 * the eviction's: cold writes are versioned above every hot write */
	ev.ver = 4u << 16;
	EXPECT_EQ(serve(own.st, &own.ns, &ev, NK_NODE_NONE, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(stored_ver(&own, 5), 4u << 16);
	cw.req_id = 302;
	EXPECT_EQ(serve(own.st, &own.ns, &cw, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	EXPECT_EQ(stored_ver(&own, 5), (4u << 16) + 1);
	/* a late REPL_CMD of the evicted install does not make it hot again */
	struct nk_msg cmd = mk(NK_KVSWITCH_OP_REPL_CMD, 5, 0);
	cmd.ver = 3u << 16;
	serve(own.st, &own.ns, &cmd, NK_NODE_NONE, out, NK_HOST_MAX_OUT);
	cw.req_id = 303;
	EXPECT_EQ(serve(own.st, &own.ns, &cw, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	/* a redirected read stamped with the validated version: answered while
	 * the replica holds no newer write, ERROR once it does */
	struct nk_msg g = mk(NK_KVSWITCH_OP_GET, 5, 400);
	g.ver = 3u << 16;
	EXPECT_EQ(serve(rep.st, &rep.ns, &g, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	w2.result = 2;
	EXPECT_EQ(serve(rep.st, &rep.ns, &w2, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_KVSWITCH_OP_UPDATE_ACK);
	EXPECT_EQ(serve(rep.st, &rep.ns, &g, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.result, NK_KVSWITCH_RESULT_ERROR);
	host_free(&own);
	host_free(&rep);
	/* amo off: a resent write is applied again (the failure AMO prevents) */
	host_init(&own, 1, "hot_keys=8");
	w.result = 2;
	w.ver = 7u << 16;
	serve(own.st, &own.ns, &w, CL, out, NK_HOST_MAX_OUT);
	w.ver = (7u << 16) + 5;
	EXPECT_EQ(serve(own.st, &own.ns, &w, CL, out, NK_HOST_MAX_OUT), 2);
	EXPECT_EQ(stored_ver(&own, 5), (7u << 16) + 5);
	host_free(&own);
}

/* REPL_EVICT names the owner in FLAGS: a replica whose push was lost (no
 * role there) forgets nothing and keeps its copy's version; by the role
 * alone it took the eviction as the owner's, kept an owner entry and raised
 * a stale copy to the eviction's version. The owner named, with or without
 * an entry, notes the key cold; FLAGS 0 (an older controller) leaves it to
 * the role. */
static void test_evict_names_the_owner(void)
{
	current = "REPL_EVICT names the owner";
	struct host own, rep;
	host_init(&own, 1, "hot_keys=8");
	host_init(&rep, 2, "hot_keys=8");
	struct nk_host_out out[NK_HOST_MAX_OUT];
	/* an old copy at the replica (a past install's bytes, its role gone) */
	struct nk_msg p = mk(NK_KVSWITCH_OP_REPL_PUSH, 9, 0);
	p.ver = 1u << 20;
	EXPECT_EQ(serve(rep.st, &rep.ns, &p, 0, out, NK_HOST_MAX_OUT), 1);
	struct nk_msg ev = mk(NK_KVSWITCH_OP_REPL_EVICT, 9, 0);
	ev.ver = 1u << 20;
	ev.result = 1 + 1;
	EXPECT_EQ(serve(rep.st, &rep.ns, &ev, NK_NODE_NONE, out, NK_HOST_MAX_OUT), 0);
	expect_roles(rep.st, &rep.ns, "ok owner=0 replica=0 full=0 amo_dups=0 amo_old=0 retries=0");
	/* the next install's push was lost; its eviction reaches the replica */
	ev.ver = 3u << 20;
	EXPECT_EQ(serve(rep.st, &rep.ns, &ev, NK_NODE_NONE, out, NK_HOST_MAX_OUT), 0);
	expect_roles(rep.st, &rep.ns, "ok owner=0 replica=0 full=0 amo_dups=0 amo_old=0 retries=0");
	EXPECT_EQ(stored_ver(&rep, 9), 1u << 20);
	/* the owner, never told: cold from the eviction's version on */
	struct nk_msg w = mk(NK_KVSWITCH_OP_SET, 9, 1);
	EXPECT_EQ(serve(own.st, &own.ns, &w, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(serve(own.st, &own.ns, &ev, NK_NODE_NONE, out, NK_HOST_MAX_OUT), 0);
	expect_roles(own.st, &own.ns, "ok owner=1 replica=0 full=0 amo_dups=0 amo_old=0 retries=0");
	EXPECT_EQ(stored_ver(&own, 9), 3u << 20);
	/* FLAGS 0: the role decides, as before (no role: the owner's path) */
	ev.result = 0;
	EXPECT_EQ(serve(rep.st, &rep.ns, &ev, NK_NODE_NONE, out, NK_HOST_MAX_OUT), 0);
	expect_roles(rep.st, &rep.ns, "ok owner=1 replica=0 full=0 amo_dups=0 amo_old=0 retries=0");
	/* an owner entry at a server FLAGS does not name is not its own */
	ev.result = 1 + 1;
	EXPECT_EQ(serve(rep.st, &rep.ns, &ev, NK_NODE_NONE, out, NK_HOST_MAX_OUT), 0);
	expect_roles(rep.st, &rep.ns, "ok owner=0 replica=0 full=0 amo_dups=0 amo_old=0 retries=0");
	host_free(&own);
	host_free(&rep);
}

/* The stale read of digest §5, end to end through the switch and two servers:
 * W1 and W2 overlap, the replica's ACK for W1 reaches the switch after W2 was
 * stamped. The paper's switch (strict=0) validates the replica on it and
 * redirects a read there, which returns W1 after W2 completed; strict mode
 * refuses that ACK and the read goes to the owner, which holds W2. */
static void test_stale_read(int strict)
{
	current = strict ? "digest's stale read, strict" : "digest's stale read, paper (strict=0)";
	const char *params = strict ? "hot_keys=8" : "hot_keys=8;strict=0";
	void *st = sw_new(params);
	struct host own, rep;
	host_init(&own, 0, params);
	host_init(&rep, 2, params);
	struct nk_host_out out[NK_HOST_MAX_OUT];
	uint16_t servers[2] = { 0, 2 }, d;
	install(st, 4, 1, servers, 2);
	P->reg_write(st, "Ver", 1, 1u << 20);
	P->reg_write(st, "Valid", 1, 0x5);
	/* W1: both copies applied; the replica's ACK is delayed */
	struct nk_msg w1 = mk(NK_KVSWITCH_OP_SET, 4, 1);
	EXPECT_EQ(sw(st, &w1, CL, 0, &d).fwd, NK_FWD_MCAST);
	EXPECT(serve(own.st, &own.ns, &w1, CL, out, NK_HOST_MAX_OUT) >= 1);
	EXPECT_EQ(serve(rep.st, &rep.ns, &w1, CL, out, NK_HOST_MAX_OUT), 1);
	struct nk_msg ack1 = out[0].msg;
	/* W2: the owner applies it and the client has its reply; the replica's
	 * copy is still in flight */
	struct nk_msg w2 = mk(NK_KVSWITCH_OP_SET, 4, 2);
	sw(st, &w2, CL, 0, &d);
	int n = serve(own.st, &own.ns, &w2, CL, out, NK_HOST_MAX_OUT);
	EXPECT_EQ(out[0].msg.op, NK_KVSWITCH_OP_SET_REPLY);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	if (n == 2)
		sw(st, &out[1].msg, 0, CL, NULL);       /* strict: the owner's ACK of W2 */
	/* the late ACK of W1 */
	sw(st, &ack1, 2, CL, NULL);
	/* a read whose round-robin turn is the replica's */
	P->reg_write(st, "RoundRobin", 1, 2);
	struct nk_msg g = mk(NK_KVSWITCH_OP_GET, 4, 3);
	sw(st, &g, CL, 0, &d);
	struct host *at = d == 2 ? &rep : &own;
	EXPECT_EQ(serve(at->st, &at->ns, &g, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.result, NK_RESULT_OK);
	if (strict) {
		EXPECT_EQ(d, 0);
		EXPECT_EQ(out[0].msg.ver, w2.ver);       /* W2: linearizable */
	} else {
		EXPECT_EQ(d, 2);
		EXPECT_EQ(out[0].msg.ver, w1.ver);       /* W1 after W2 completed: stale */
	}
	host_free(&own);
	host_free(&rep);
	sw_free(st);
}

static void test_client(void)
{
	current = "client";
	void *c = calloc(1, H->client_state_size > 0 ? H->client_state_size : 1);
	struct nk_host_cfg hc = { .n_servers = NS, .n_clients = NC, .id = 0 };
	EXPECT_EQ(H->client_init(c, &hc), 0);
	const uint8_t long_key[20] = "0123456789abcdefWXYZ", short_key[3] = "abc";
	struct nk_req_spec sp = { .kind = NK_KIND_READ, .key_len = 20, .home = 3, .req_id = 5,
				  .key = long_key };
	struct nk_msg m;
	EXPECT_EQ(H->client_request(c, &sp, &m), 3);
	EXPECT_EQ(m.key_len, 16);
	EXPECT(!memcmp(m.key, long_key, 16));
	EXPECT_EQ(nk_wire_encoded_len(&m), NK_KVSWITCH_HDR_LEN);
	sp.key = short_key;
	sp.key_len = 3;
	sp.kind = NK_KIND_WRITE;
	sp.value_len = 64;
	H->client_request(c, &sp, &m);
	EXPECT_EQ(m.op, NK_KVSWITCH_OP_SET);
	EXPECT_EQ(m.key[12], 0);
	EXPECT(!memcmp(m.key + 13, "abc", 3));
	struct nk_msg r = mk(NK_KVSWITCH_OP_GET_REPLY, 1, 5);
	EXPECT_EQ(H->client_reply(c, &r), NK_REPLY_DONE);
	r.op = NK_KVSWITCH_OP_UPDATE_ACK;
	EXPECT_EQ(H->client_reply(c, &r), NK_REPLY_IGNORE);
	r.op = NK_KVSWITCH_OP_SET_REPLY;
	r.result = NK_KVSWITCH_RESULT_ERROR;
	EXPECT_EQ(H->client_reply(c, &r), NK_REPLY_RETRY);
	H->client_fini(c);
	free(c);
}

int main(void)
{
	P = nk_pipeline_find("kvswitch");
	H = nk_host_find("kvswitch");
	if (!P || !H) {
		fprintf(stderr, "kvswitch not registered\n");
		return 2;
	}
	test_cold_and_hashpipe();
	test_hot_reads();
	test_hot_writes(1);
	test_hot_writes(0);
	test_hot_writes_r1();
	test_limits();
	test_server_agent(1);
	test_server_agent(0);
	test_strict_rules();
	test_evict_names_the_owner();
	test_stale_read(1);
	test_stale_read(0);
	test_client();
#if ALLOC_COUNTED
	EXPECT_EQ(__sanitizer_install_malloc_and_free_hooks(on_alloc, on_free), 1);
#endif
	test_role_table();
	printf("test_kvswitch: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
