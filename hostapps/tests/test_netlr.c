/*
 * test_netlr.c - packet-in/packet-out tests of NetLR: the switch pipeline
 * (hostapps/src/pipeline/netlr.c) and the replica/client host logic
 * (hostapps/src/host/netlr.c); docs/netlr.md.
 *
 * Covered: clean reads round-robin over the live replicas; a write stamped
 * with ++seq (the client's seq ignored), multicast to group 1, the key
 * dirty with CRep = PIN (strict); dirty reads to CRep; acks counted, the
 * last one forwarded as the commit and the key clean again; strict: a
 * duplicated ack does not count, an older write's ack is dropped (or
 * forwarded SUPERSEDED once CRep holds it), CRep never moves to a replica that acked an older
 * write; paper: the same packets commit early (W1) and move CRep back (W2);
 * collisions dropped or NACKed; a failed replica removed from the
 * round-robin and LiveMask; forged acks from a client port and oid 0
 * dropped; the replica's seq rule and the client's verdicts; a restarted
 * switch (boot_empty, epochs on acks and at the replica).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/bytes.h"
#include "netkv/host.h"
#include "netkv/pipeline.h"
#include "netkv/wire.h"

#include "expect.h"

#define NS 4
#define NC 1
#define CL NS          /* the client's node */

#include "swrig.h"

static struct nk_msg mk(uint8_t op, uint32_t oid, uint32_t id, uint32_t req_id)
{
	struct nk_msg m;
	memset(&m, 0, sizeof m);
	m.proto = NK_PROTO_NETLR;
	m.op = op;
	m.kind = (uint8_t)nk_wire_kind(NK_PROTO_NETLR, op);
	m.key_len = NK_NETLR_OID_LEN;
	nk_put32(m.key, oid);
	m.keyhash = id;
	m.req_id = req_id;
	m.value_len = op == NK_NETLR_OP_WRITE || op == NK_NETLR_OP_R_REPLY ? NK_NETLR_VALUE_LEN : 0;
	m.frag_cnt = 1;
	return m;
}

/* a client READ of (oid, id): the replica it was routed to */
static int read_to(void *st, uint32_t oid, uint32_t id)
{
	struct nk_msg m = mk(NK_NETLR_OP_READ, oid, id, 1);
	uint16_t d;
	struct nk_actions a = sw(st, &m, CL, 0, &d);
	if (a.fwd != NK_FWD_PORT)
		return -1;
	EXPECT_EQ(a.port, 10 + d);
	return d;
}

/* a client WRITE, each with a req_id of its own (strict mode drops one it
 * stamped already): the seq it was given (0 if not multicast) */
static uint32_t next_req = 1000;
static uint32_t write_seq(void *st, uint32_t oid, uint32_t id)
{
	struct nk_msg m = mk(NK_NETLR_OP_WRITE, oid, id, next_req++);
	m.ver = 12345;            /* forged: seq is the switch's */
	struct nk_actions a = sw(st, &m, CL, 0, NULL);
	if (a.fwd != NK_FWD_MCAST)
		return 0;
	EXPECT_EQ(a.mcast_group, 1);
	return (uint32_t)m.ver;
}

/* replica r's W_REPLY for seq: 1 if forwarded to the client (commit) */
static int ack(void *st, uint32_t r, uint32_t oid, uint32_t id, uint32_t seq, uint8_t *flags)
{
	struct nk_msg m = mk(NK_NETLR_OP_W_REPLY, oid, id, 2);
	m.ver = seq;
	uint16_t d;
	struct nk_actions a = sw(st, &m, (uint16_t)r, CL, &d);
	if (flags)
		*flags = m.flags;
	if (a.fwd == NK_FWD_PORT) {
		EXPECT_EQ(d, CL);
		EXPECT_EQ(a.port, 10 + CL);
		return 1;
	}
	EXPECT_EQ(a.fwd, NK_FWD_DROP);
	return 0;
}

#define OID 0x1e240u
#define ID 0x65d5u

/* ---- switch ------------------------------------------------------------------ */

static void test_reads_round_robin(void)
{
	current = "clean reads round-robin";
	void *st = sw_new(NULL);
	for (int i = 0; i < 9; i++)
		EXPECT_EQ(read_to(st, OID, ID), i % NS);
	EXPECT_EQ(reg(st, "stats", 0), 9);          /* NL_READS */
	EXPECT_EQ(reg(st, "stats", 1), 0);          /* no dirty reads */
	sw_free(st);
}

static void test_write_commit(const char *params)
{
	current = params;
	int strict = !strstr(params, "paper");
	void *st = sw_new(params);
	EXPECT_EQ(P->reg_write(st, "PIN", 0, 2), 0);
	uint32_t s = write_seq(st, OID, ID);
	EXPECT_EQ(s, 2);                            /* seq starts at 1: preload is version 1 */
	EXPECT_EQ(reg(st, "dset", ID), OID);
	if (strict) {
		EXPECT_EQ(reg(st, "MaxSeq", ID), 2);
		EXPECT_EQ(reg(st, "CRep", ID), 2);  /* PIN at insertion */
		EXPECT_EQ(read_to(st, OID, ID), 2);
	}
	/* another key in another slot stays clean: round-robin */
	EXPECT_EQ(read_to(st, OID + 1, ID + 1), 0);
	EXPECT_EQ(ack(st, 1, OID, ID, s, NULL), 0);
	EXPECT_EQ(reg(st, "CRep", ID), 1);
	EXPECT_EQ(read_to(st, OID, ID), 1);         /* dirty: CRep */
	EXPECT_EQ(read_to(st, OID, ID), 1);
	EXPECT_EQ(ack(st, 3, OID, ID, s, NULL), 0);
	EXPECT_EQ(ack(st, 0, OID, ID, s, NULL), 0);
	EXPECT_EQ(reg(st, "dset", ID), OID);
	EXPECT_EQ(ack(st, 2, OID, ID, s, NULL), 1); /* the last ack is the reply */
	EXPECT_EQ(reg(st, "dset", ID), 0);
	EXPECT_EQ(reg(st, "CRep", ID), 2);
	/* clean again: round-robin resumes where it was */
	EXPECT_EQ(read_to(st, OID, ID), 1);
	/* a late duplicate of an ack for a clean key is dropped */
	EXPECT_EQ(ack(st, 2, OID, ID, s, NULL), 0);
	EXPECT_EQ(write_seq(st, OID, ID), 3);
	sw_free(st);
}

/* W1: a duplicated ack. Strict counts replicas, the paper counts acks. */
static void test_duplicate_ack(int strict)
{
	current = strict ? "W1 duplicate ack (strict)" : "W1 duplicate ack (paper)";
	void *st = sw_new(strict ? "mode=strict" : "mode=paper");
	uint32_t s = write_seq(st, OID, ID);
	EXPECT_EQ(ack(st, 0, OID, ID, s, NULL), 0);
	EXPECT_EQ(ack(st, 0, OID, ID, s, NULL), 0);
	EXPECT_EQ(ack(st, 1, OID, ID, s, NULL), 0);
	/* replica 3 has not applied the write */
	int committed = ack(st, 2, OID, ID, s, NULL);
	EXPECT_EQ(committed, strict ? 0 : 1);
	if (strict)
		EXPECT_EQ(ack(st, 3, OID, ID, s, NULL), 1);
	sw_free(st);
}

/* W2: CRep moving back to a replica that lacks a newer write. */
static void test_crep_backwards(int strict)
{
	current = strict ? "W2 CRep backwards (strict)" : "W2 CRep backwards (paper)";
	void *st = sw_new(strict ? "mode=strict" : "mode=paper");
	uint32_t s1 = write_seq(st, OID, ID), s2 = write_seq(st, OID, ID);
	EXPECT_EQ(s2, s1 + 1);
	/* A = 0 applied both writes and acks s1; B = 1 acks s1 (lost s2) */
	EXPECT_EQ(ack(st, 0, OID, ID, s1, NULL), 0);
	EXPECT_EQ(ack(st, 1, OID, ID, s1, NULL), 0);
	if (strict) {
		EXPECT_EQ(reg(st, "CRep", ID), 0);  /* PIN, untouched by old acks */
		EXPECT_EQ(ack(st, 0, OID, ID, s2, NULL), 0);
		EXPECT_EQ(reg(st, "CRep", ID), 0);
		EXPECT_EQ(reg(st, "AckMask", ID), 1);
	} else {
		EXPECT_EQ(reg(st, "CRep", ID), 1);  /* B serves reads: stale */
	}
	sw_free(st);
}

static void test_superseded(void)
{
	current = "older write's ack: dropped, or SUPERSEDED";
	void *st = sw_new("ack_superseded=1");
	uint32_t s1 = write_seq(st, OID, ID), s2 = write_seq(st, OID, ID);
	uint8_t flags = 0;
	EXPECT_EQ(ack(st, 1, OID, ID, s1, &flags), 0);   /* nobody acked s2 yet */
	EXPECT_EQ(ack(st, 2, OID, ID, s2, NULL), 0);
	EXPECT_EQ(ack(st, 1, OID, ID, s1, &flags), 1);
	EXPECT_EQ(flags, NK_NETLR_FLAG_SUPERSEDED);
	EXPECT_EQ(reg(st, "dset", ID), OID);             /* still dirty */
	sw_free(st);
	/* every ack of s1 after s2's multicast and before any ack of s2: the
	 * reply comes with CRep's (PIN's) ack, since CRep then holds s1 */
	st = sw_new("ack_superseded=1");
	EXPECT_EQ(P->reg_write(st, "PIN", 0, 2), 0);
	s1 = write_seq(st, OID, ID);
	s2 = write_seq(st, OID, ID);
	EXPECT_EQ(ack(st, 1, OID, ID, s1, NULL), 0);     /* CRep may lack s1 */
	EXPECT_EQ(ack(st, 2, OID, ID, s1, &flags), 1);   /* CRep holds s1 */
	EXPECT_EQ(flags, NK_NETLR_FLAG_SUPERSEDED);
	EXPECT_EQ(reg(st, "lseq", ID), s1);
	EXPECT_EQ(ack(st, 3, OID, ID, s1, NULL), 1);     /* and so later copies */
	EXPECT_EQ(read_to(st, OID, ID), 2);
	sw_free(st);
	/* CRep acked s1 before s2 was issued: the other acks of s1 are answered */
	st = sw_new("ack_superseded=1");
	s1 = write_seq(st, OID, ID);
	EXPECT_EQ(ack(st, 3, OID, ID, s1, NULL), 0);     /* counted: CRep = 3 */
	s2 = write_seq(st, OID, ID);
	EXPECT_EQ(ack(st, 1, OID, ID, s1, &flags), 1);
	EXPECT_EQ(flags, NK_NETLR_FLAG_SUPERSEDED);
	/* the key turning dirty again starts from PIN, which holds no write in flight */
	EXPECT_EQ(ack(st, 0, OID, ID, s2, NULL), 0);
	EXPECT_EQ(ack(st, 1, OID, ID, s2, NULL), 0);
	EXPECT_EQ(ack(st, 2, OID, ID, s2, NULL), 0);
	EXPECT_EQ(ack(st, 3, OID, ID, s2, NULL), 1);     /* committed: clean */
	uint32_t s3 = write_seq(st, OID, ID), s4 = write_seq(st, OID, ID);
	EXPECT_EQ(reg(st, "lseq", ID), 0);
	EXPECT_EQ(ack(st, 1, OID, ID, s3, NULL), 0);     /* PIN (0) may lack s3 */
	EXPECT_EQ(s4, s3 + 1);
	sw_free(st);
	st = sw_new(NULL);
	s1 = write_seq(st, OID, ID);
	s2 = write_seq(st, OID, ID);
	EXPECT_EQ(ack(st, 2, OID, ID, s2, NULL), 0);
	EXPECT_EQ(ack(st, 1, OID, ID, s1, NULL), 0);     /* default: dropped */
	sw_free(st);
}

/* one WRITE, req_id r, from node src: its seq, 0 if dropped */
static uint32_t write_req(void *st, uint16_t src, uint32_t r)
{
	struct nk_msg m = mk(NK_NETLR_OP_WRITE, OID, ID, r);
	struct nk_actions a = sw(st, &m, src, 0, NULL);
	return a.fwd == NK_FWD_MCAST ? (uint32_t)m.ver : 0;
}

/* A client WRITE the network duplicated is stamped once (strict): a delayed
 * copy stamped again would be applied a second time, after newer writes. */
static void test_duplicate_write(void)
{
	current = "a duplicated client WRITE is stamped once";
	void *st = sw_new(NULL);
	EXPECT_EQ(write_req(st, CL, 5), 2);
	EXPECT_EQ(write_req(st, CL, 5), 0);               /* the copy: dropped */
	EXPECT_EQ(reg(st, "stats", 13), 1);               /* NL_DUP_WRITES */
	EXPECT_EQ(write_req(st, CL, 9), 3);
	EXPECT_EQ(write_req(st, CL, 7), 4);               /* reordered, but new */
	EXPECT_EQ(write_req(st, CL, 7), 0);
	EXPECT_EQ(write_req(st, CL, 5), 0);
	EXPECT_EQ(reg(st, "stats", 13), 3);
	EXPECT_EQ(write_req(st, CL + 1, 5), 5);           /* another client's req_ids */
	EXPECT_EQ(write_req(st, CL, 9 + 64), 6);          /* the window slides */
	EXPECT_EQ(write_req(st, CL, 10), 7);              /* 63 below: still told apart */
	EXPECT_EQ(write_req(st, CL, 9), 0);               /* 64 below: too old to tell */
	EXPECT_EQ(reg(st, "stats", 14), 1);               /* NL_OLD_WRITES */
	EXPECT_EQ(reg(st, "ReqMax", 10 + CL), 73);
	EXPECT_EQ(write_req(st, CL, 5000), 8);            /* a jump clears the window */
	EXPECT_EQ(reg(st, "ReqWin", 10 + CL), 1);
	/* a spoofed source address counts for the port it came in on */
	struct nk_msg m = mk(NK_NETLR_OP_WRITE, OID, ID, 6000);
	struct nk_pkt_meta meta = { .src = CL + 1, .ingress_port = 10 + CL };
	struct nk_actions a;
	P->process(st, &m, &meta, &a);
	EXPECT_EQ(a.fwd, NK_FWD_MCAST);
	EXPECT_EQ(reg(st, "ReqMax", 10 + CL), 6000);
	EXPECT_EQ(reg(st, "ReqMax", 10 + CL + 1), 5);
	sw_free(st);
	/* a WRITE that collided was not stamped: its resend is */
	st = sw_new("collision_nack=1");
	EXPECT_EQ(P->reg_write(st, "dset", ID, OID + 1), 0);
	EXPECT_EQ(write_req(st, CL, 5), 0);
	EXPECT_EQ(P->reg_write(st, "dset", ID, 0), 0);
	EXPECT_EQ(write_req(st, CL, 5), 2);
	sw_free(st);
	/* dedup=0, or the paper's mode: stamped twice */
	st = sw_new("dedup=0");
	EXPECT_EQ(write_req(st, CL, 5), 2);
	EXPECT_EQ(write_req(st, CL, 5), 3);
	sw_free(st);
	st = sw_new("mode=paper");
	EXPECT_EQ(write_req(st, CL, 5), 2);
	EXPECT_EQ(write_req(st, CL, 5), 3);
	sw_free(st);
}

static void test_collision(void)
{
	current = "collisions";
	void *st = sw_new("slots=16");
	EXPECT(write_seq(st, OID, 3) != 0);
	EXPECT_EQ(write_seq(st, OID + 7, 3 + 16), 0);    /* same slot, other key: dropped */
	EXPECT_EQ(reg(st, "stats", 3), 1);               /* NL_COLLISIONS */
	/* a read of the other key is clean: round-robin, not CRep */
	EXPECT_EQ(read_to(st, OID + 7, 3), 0);
	EXPECT_EQ(read_to(st, OID + 7, 3), 1);
	sw_free(st);
	st = sw_new("slots=16;collision_nack=1");
	EXPECT(write_seq(st, OID, 3) != 0);
	struct nk_msg m = mk(NK_NETLR_OP_WRITE, OID + 7, 3, next_req++);
	uint16_t d;
	struct nk_actions a = sw(st, &m, CL, 0, &d);
	EXPECT_EQ(a.fwd, NK_FWD_PORT);
	EXPECT_EQ(a.port, 10 + CL);
	EXPECT_EQ(a.switch_reply, 1);
	EXPECT_EQ(m.op, NK_NETLR_OP_NACK);
	EXPECT_EQ(m.value_len, 0);
	sw_free(st);
}

/* The controller removes replica 3 (digest §4): round-robin table,
 * num_replica, LiveMask, multicast group (the switch shell's). */
static void test_replica_removed(void)
{
	current = "failed replica removed";
	void *st = sw_new(NULL);
	EXPECT_EQ(read_to(st, OID, ID), 0);
	EXPECT_EQ(read_to(st, OID, ID), 1);
	EXPECT_EQ(read_to(st, OID, ID), 2);   /* DstRepIdx = 3 */
	uint64_t k = 3;
	EXPECT_EQ(P->table_del(st, "get_dst_rep_table", &k, 1), 0);
	EXPECT_EQ(P->reg_write(st, "num_replica", 0, 3), 0);
	EXPECT_EQ(P->reg_write(st, "LiveMask", 0, 0x7), 0);
	for (int i = 0; i < 6; i++)
		EXPECT_EQ(read_to(st, OID, ID), i % 3);   /* the pointer wraps */
	uint32_t s = write_seq(st, OID, ID);
	EXPECT_EQ(ack(st, 0, OID, ID, s, NULL), 0);
	EXPECT_EQ(ack(st, 1, OID, ID, s, NULL), 0);
	EXPECT_EQ(ack(st, 2, OID, ID, s, NULL), 1);   /* 3 live replicas acked */
	/* nothing live: requests are dropped and counted */
	EXPECT_EQ(P->reg_write(st, "num_replica", 0, 0), 0);
	EXPECT_EQ(read_to(st, OID, ID), -1);
	EXPECT_EQ(write_seq(st, OID, ID), 0);
	EXPECT_EQ(reg(st, "stats", 8), 2);            /* NL_NO_REPLICA */
	/* the control plane's bounds */
	EXPECT_EQ(P->reg_write(st, "num_replica", 0, 9), NK_PIPE_ERANGE);
	EXPECT_EQ(P->reg_write(st, "PIN", 0, 8), NK_PIPE_ERANGE);
	uint64_t a = 4;
	EXPECT_EQ(P->table_add(st, "get_dst_rep_table", &k, 1, &a, 1), NK_PIPE_ERANGE);
	EXPECT_EQ(P->table_del(st, "get_dst_rep_table", &k, 1), NK_PIPE_ENOENT);
	EXPECT_EQ(P->table_add(st, "nope", &k, 1, &a, 1), NK_PIPE_ENOENT);
	sw_free(st);
}

static void test_hostile(void)
{
	current = "forged acks, oid 0, bad params";
	void *st = sw_new(NULL);
	uint32_t s = write_seq(st, OID, ID);
	/* a W_REPLY from the client's port would commit an unapplied write */
	for (int r = 0; r < NS; r++) {
		struct nk_msg m = mk(NK_NETLR_OP_W_REPLY, OID, ID, 2);
		m.ver = s;
		EXPECT_EQ(sw(st, &m, CL, CL, NULL).fwd, NK_FWD_DROP);
	}
	EXPECT_EQ(reg(st, "stats", 10), NS);          /* NL_HOST_SERVER_OP */
	EXPECT_EQ(reg(st, "AckMask", ID), 0);
	EXPECT_EQ(read_to(st, 0, 0), -1);
	EXPECT_EQ(write_seq(st, 0, 0), 0);
	EXPECT_EQ(reg(st, "stats", 9), 2);            /* NL_BAD_OID */
	/* an ack of oid 0 for an empty slot is not "dirty" */
	EXPECT_EQ(ack(st, 0, 0, 5, 0, NULL), 0);
	/* a stamp from a client is cleared (write_seq's forged seqs counted too) */
	EXPECT_EQ(reg(st, "stats", 12), 2);           /* NL_FORGED_FIELDS */
	struct nk_msg m = mk(NK_NETLR_OP_READ, OID, ID, 1);
	m.ver = 77;
	m.flags = NK_NETLR_FLAG_STAMPED;
	sw(st, &m, CL, 0, NULL);
	EXPECT_EQ(m.ver, 0);
	EXPECT_EQ(m.flags, 0);
	EXPECT_EQ(reg(st, "stats", 12), 3);
	/* a write at a forged seq and epoch gets the switch's */
	m = mk(NK_NETLR_OP_WRITE, OID + 1, ID + 1, next_req++);
	m.ver = 0xFFFFFFFFu;
	m.epoch = 0xFFFF;
	m.flags = NK_NETLR_FLAG_SUPERSEDED;
	EXPECT_EQ(sw(st, &m, CL, 0, NULL).fwd, NK_FWD_MCAST);
	EXPECT_EQ(m.ver, s + 1);
	EXPECT_EQ(m.epoch, 0);
	EXPECT_EQ(m.flags, 0);
	EXPECT_EQ(reg(st, "stats", 12), 4);
	/* an honest request (nothing set) is not counted */
	m = mk(NK_NETLR_OP_READ, OID, ID, 4);
	sw(st, &m, CL, 0, NULL);
	EXPECT_EQ(reg(st, "stats", 12), 4);
	sw_free(st);
	/* the hostile client's messages: every kind, each well formed */
	void *c = calloc(1, H->client_state_size);
	struct nk_host_cfg hc = { .n_servers = NS, .n_clients = 2 };
	EXPECT_EQ(H->client_init(c, &hc), 0);
	const uint8_t key[] = "user000000000042";
	struct nk_req_spec sp = { .kind = NK_KIND_WRITE, .key_len = 16, .home = 1, .req_id = 9,
				  .keyhash = 0x1234, .key = key };
	uint8_t buf[64], seen[8] = { 0 };
	for (uint64_t d = 0; d < 64; d++) {
		uint16_t dst = H->client_hostile(c, d * 0x1001, &sp, 0, NS, &m);
		uint8_t val[NK_NETLR_VALUE_LEN] = { 0 };
		if (m.value_len)
			m.value = val;
		EXPECT_EQ(nk_wire_encode(&m, buf, sizeof buf), NK_NETLR_LEN);
		EXPECT(dst <= NS);
		seen[(d * 0x1001) % 8] = 1;
		if ((d * 0x1001) % 8 == 3 || (d * 0x1001) % 8 == 4)
			EXPECT_EQ(dst, NS);                       /* the victim's node */
	}
	for (int k = 0; k < 8; k++)
		EXPECT(seen[k]);
	H->client_fini(c);
	free(c);
	struct nk_pipeline_cfg cfg = { .n_servers = NS, .n_clients = NC, .params = "mode=nope" };
	void *bad = calloc(1, P->state_size);
	EXPECT_EQ(P->init(bad, &cfg), NK_PIPE_EINVAL);
	cfg.params = "slots=1000";
	EXPECT_EQ(P->init(bad, &cfg), NK_PIPE_ERANGE);
	cfg.params = NULL;
	cfg.n_servers = 9;
	EXPECT_EQ(P->init(bad, &cfg), NK_PIPE_ERANGE);
	free(bad);
}

static void test_stamps(void)
{
	current = "strict stamps";
	void *st = sw_new("stamp=1");
	write_seq(st, OID, ID);
	struct nk_msg m = mk(NK_NETLR_OP_READ, OID, ID, 1);
	sw(st, &m, CL, 0, NULL);
	EXPECT_EQ(m.ver, 2);
	EXPECT_EQ(m.flags, NK_NETLR_FLAG_STAMPED);
	sw_free(st);
}

/* ---- hosts -------------------------------------------------------------------- */

struct tstore {
	int found;
	uint64_t ver;
	uint32_t vlen;
};

static int ts_get(void *impl, const struct nk_msg *m, uint64_t *ver, uint32_t *vlen)
{
	struct tstore *t = impl;
	(void)m;
	if (!t->found)
		return 1;
	*ver = t->ver;
	*vlen = t->vlen;
	return 0;
}

static int ts_put(void *impl, const struct nk_msg *m, uint64_t ver, uint32_t vlen)
{
	struct tstore *t = impl;
	(void)m;
	t->found = 1;
	t->ver = ver;
	t->vlen = vlen;
	return 0;
}

static const struct nk_store_ops ts_ops = {.get = ts_get, .put = ts_put};

/* a store that keeps the value bytes too (kvserver's, not the simulator's) */
struct tbstore {
	struct tstore t;        /* first: ts_get reads it */
	uint8_t bytes[NK_NETLR_VALUE_LEN];
};

static int ts_put_bytes(void *impl, const struct nk_msg *m, uint64_t ver, uint32_t vlen)
{
	struct tbstore *t = impl;
	if (m->value && m->value_len == NK_NETLR_VALUE_LEN)
		memcpy(t->bytes, m->value, NK_NETLR_VALUE_LEN);
	return ts_put(impl, m, ver, vlen);
}

static const uint8_t *ts_value(void *impl, const struct nk_msg *m, uint32_t *vlen)
{
	struct tbstore *t = impl;
	(void)m;
	*vlen = t->t.vlen;
	return t->t.found ? t->bytes : NULL;
}

static const struct nk_store_ops ts_bytes_ops = {.get = ts_get, .put = ts_put_bytes,
						 .value = ts_value};

static void test_replica(void)
{
	current = "replica seq rule";
	struct nk_host_cfg cfg = { .n_servers = NS, .n_clients = NC, .id = 2 };
	void *sv = calloc(1, H->server_state_size);
	EXPECT_EQ(H->server_init(sv, &cfg), 0);
	struct tstore t = { 1, 1, 16 };
	struct nk_store store = {.ops = &ts_ops, .impl = &t};
	struct nk_host_out out[NK_HOST_MAX_OUT];
	struct nk_msg w = mk(NK_NETLR_OP_WRITE, OID, ID, 5);
	w.ver = 7;
	EXPECT_EQ(H->server_handle(sv, &store, &w, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_NETLR_OP_W_REPLY);
	EXPECT_EQ(out[0].msg.ver, 7);
	EXPECT_EQ(out[0].msg.value_len, 0);
	EXPECT_EQ(out[0].msg.req_id, 5);
	EXPECT_EQ(out[0].dst, NK_DST_SRC);
	EXPECT_EQ(t.ver, 7);
	uint8_t buf[64];
	EXPECT_EQ(nk_wire_encode(&out[0].msg, buf, sizeof buf), NK_NETLR_LEN);
	/* a duplicate copy: re-applied, re-acked */
	EXPECT_EQ(H->server_handle(sv, &store, &w, CL, out, NK_HOST_MAX_OUT), 1);
	/* an older write: discarded, no reply */
	w.ver = 6;
	EXPECT_EQ(H->server_handle(sv, &store, &w, CL, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(t.ver, 7);
	struct nk_msg r = mk(NK_NETLR_OP_READ, OID, ID, 6);
	EXPECT_EQ(H->server_handle(sv, &store, &r, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_NETLR_OP_R_REPLY);
	EXPECT_EQ(out[0].msg.ver, 7);
	EXPECT_EQ(out[0].msg.value_len, NK_NETLR_VALUE_LEN);
	EXPECT_EQ(out[0].msg.server_id, 2);
	EXPECT_EQ(nk_wire_encode(&out[0].msg, buf, sizeof buf), NK_NETLR_LEN);
	/* a stamped read routed before write 7 was issued */
	r.flags = NK_NETLR_FLAG_STAMPED;
	r.ver = 6;
	EXPECT_EQ(H->server_handle(sv, &store, &r, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_NETLR_OP_NACK);
	EXPECT_EQ(nk_wire_encode(&out[0].msg, buf, sizeof buf), NK_NETLR_LEN);
	r.ver = 7;
	EXPECT_EQ(H->server_handle(sv, &store, &r, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_NETLR_OP_R_REPLY);
	EXPECT_EQ(out[0].msg.flags, 0);
	/* replies and other protocols are not a replica's business */
	struct nk_msg a = mk(NK_NETLR_OP_W_REPLY, OID, ID, 6);
	EXPECT_EQ(H->server_handle(sv, &store, &a, CL, out, NK_HOST_MAX_OUT), 0);
	/* replica_stats, not stats (kvserver's own): a reply's length, as
	 * kvserver sends back */
	char text[128], *argv[1] = { "replica_stats" };
	EXPECT_EQ(H->server_ctl(sv, &store, 1, argv, text, sizeof text),
		  (int)strlen("ok stale=1 nacks=1 refused=0"));
	EXPECT(!strcmp(text, "ok stale=1 nacks=1 refused=0"));
	argv[0] = "stats";
	EXPECT(H->server_ctl(sv, &store, 1, argv, text, sizeof text) > 0);
	EXPECT(!strncmp(text, "err unknown command", 19));
	H->server_fini(sv);
	free(sv);
}

/* A restarted switch (docs/netlr.md "Switch restart"): with boot_empty it
 * serves nothing until the controller installs membership; an ack stamped
 * with another epoch counts for nothing; a replica refuses a write of an
 * older epoch than the newest it has seen, whatever its seq. */
static void test_switch_restart(void)
{
	current = "switch restart: boot_empty, epochs";
	void *st = sw_new("boot_empty=1");
	EXPECT_EQ(reg(st, "num_replica", 0), 0);
	EXPECT_EQ(reg(st, "LiveMask", 0), 0);
	EXPECT_EQ(read_to(st, OID, ID), -1);        /* no live replica */
	EXPECT_EQ(write_seq(st, OID, ID), 0);
	EXPECT_EQ(reg(st, "stats", 8), 2);          /* NL_NO_REPLICA */
	/* the controller: a new epoch, seq resumed, the replicas live */
	EXPECT_EQ(P->reg_write(st, "epoch", 0, 1), 0);
	EXPECT_EQ(P->reg_write(st, "seq", 0, 100), 0);
	for (uint64_t r = 0; r < NS; r++)
		EXPECT_EQ(P->table_add(st, "get_dst_rep_table", &r, 1, &r, 1), 0);
	EXPECT_EQ(P->reg_write(st, "num_replica", 0, NS), 0);
	EXPECT_EQ(P->reg_write(st, "LiveMask", 0, 0xF), 0);
	EXPECT_EQ(read_to(st, OID, ID), 0);
	struct nk_msg w = mk(NK_NETLR_OP_WRITE, OID, ID, 2);
	struct nk_actions a = sw(st, &w, CL, 0, NULL);
	EXPECT_EQ(a.fwd, NK_FWD_MCAST);
	EXPECT_EQ(w.ver, 101);
	EXPECT_EQ(w.epoch, 1);                      /* stamped with the epoch */
	/* acks echo the write's epoch; one of epoch 0 (the last incarnation's
	 * write with the same seq) is dropped */
	for (uint32_t r = 0; r < NS; r++) {
		struct nk_msg k = mk(NK_NETLR_OP_W_REPLY, OID, ID, 2);
		k.ver = 101;
		k.epoch = 0;
		EXPECT_EQ(sw(st, &k, (uint16_t)r, CL, NULL).fwd, NK_FWD_DROP);
	}
	EXPECT_EQ(reg(st, "AckMask", ID), 0);
	int committed = 0;
	for (uint32_t r = 0; r < NS; r++) {
		struct nk_msg k = mk(NK_NETLR_OP_W_REPLY, OID, ID, 2);
		k.ver = 101;
		k.epoch = 1;
		committed += sw(st, &k, (uint16_t)r, CL, NULL).fwd == NK_FWD_PORT;
	}
	EXPECT_EQ(committed, 1);
	sw_free(st);

	struct nk_host_cfg cfg = { .n_servers = NS, .n_clients = NC, .id = 1 };
	void *sv = calloc(1, H->server_state_size);
	EXPECT_EQ(H->server_init(sv, &cfg), 0);
	struct tstore t = { 1, 1, 16 };
	struct nk_store store = {.ops = &ts_ops, .impl = &t};
	struct nk_host_out out[NK_HOST_MAX_OUT];
	struct nk_msg nw = mk(NK_NETLR_OP_WRITE, OID, ID, 5);
	nw.ver = 10;
	nw.epoch = 1;
	EXPECT_EQ(H->server_handle(sv, &store, &nw, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.epoch, 1);
	/* a copy from before the restart, seq above the new one: refused */
	struct nk_msg old = nw;
	old.ver = 50;
	old.epoch = 0;
	EXPECT_EQ(H->server_handle(sv, &store, &old, CL, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(t.ver, 10);
	nw.ver = 11;
	EXPECT_EQ(H->server_handle(sv, &store, &nw, CL, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(t.ver, 11);
	H->server_fini(sv);
	free(sv);
}

static void test_client(void)
{
	current = "client";
	void *c = calloc(1, H->client_state_size);
	struct nk_host_cfg cfg = { .n_servers = NS, .n_clients = NC };
	EXPECT_EQ(H->client_init(c, &cfg), 0);
	const uint8_t key[] = "user000000000042";
	struct nk_req_spec sp = { .kind = NK_KIND_WRITE, .key_len = 16, .client_id = 0, .home = 3,
				  .req_id = 11, .keyhash = 0xabcdef, .value_len = 100, .key = key };
	struct nk_msg m;
	EXPECT_EQ(H->client_request(c, &sp, &m), 3);
	EXPECT_EQ(m.op, NK_NETLR_OP_WRITE);
	EXPECT_EQ(m.keyhash, 0xabcdef);
	EXPECT_EQ(nk_get32(m.key), nk_crc32(key, 16));
	/* kvserver preloads the key under the same object id */
	uint8_t wk[NK_MAX_KEY_LEN];
	EXPECT_EQ(H->wire_key(key, 16, wk), NK_NETLR_OID_LEN);
	EXPECT(!memcmp(wk, m.key, NK_NETLR_OID_LEN));
	EXPECT_EQ(m.value_len, NK_NETLR_VALUE_LEN);
	uint8_t buf[64];
	EXPECT_EQ(nk_wire_encode(&m, buf, sizeof buf), NK_NETLR_LEN);
	struct nk_msg r = mk(NK_NETLR_OP_W_REPLY, 1, 1, 11);
	EXPECT_EQ(H->client_reply(c, &r), NK_REPLY_DONE);
	r = mk(NK_NETLR_OP_R_REPLY, 1, 1, 11);
	EXPECT_EQ(H->client_reply(c, &r), NK_REPLY_DONE);
	r = mk(NK_NETLR_OP_NACK, 1, 1, 11);
	EXPECT_EQ(H->client_reply(c, &r), NK_REPLY_RETRY);
	r = mk(NK_NETLR_OP_WRITE, 1, 1, 11);
	EXPECT_EQ(H->client_reply(c, &r), NK_REPLY_IGNORE);
	H->client_fini(c);
	free(c);
}

/* The chain-replication baseline on the same pipeline and hosts. */
static void test_chain(void)
{
	current = "chain replication";
	const char *params = "replication=cr";
	void *st = sw_new(params);
	struct nk_msg m = mk(NK_NETLR_OP_WRITE, OID, ID, 4);
	m.ver = 99;
	uint16_t d;
	struct nk_actions a = sw(st, &m, CL, 0, &d);
	EXPECT_EQ(a.fwd, NK_FWD_PORT);
	EXPECT_EQ(a.port, 10);              /* the head, as addressed */
	EXPECT_EQ(m.ver, 0);                /* clients do not order writes */
	m = mk(NK_NETLR_OP_W_REPLY, OID, ID, 4);
	EXPECT_EQ(sw(st, &m, CL, CL, NULL).fwd, NK_FWD_DROP);
	sw_free(st);

	void *sv[NS];
	struct tstore t[NS];
	struct nk_store store[NS];
	for (uint32_t i = 0; i < NS; i++) {
		struct nk_host_cfg cfg = { .n_servers = NS, .n_clients = NC, .id = i, .params = params };
		sv[i] = calloc(1, H->server_state_size);
		EXPECT_EQ(H->server_init(sv[i], &cfg), 0);
		t[i] = (struct tstore){ 1, 5, 16 };
		store[i] = (struct nk_store){ &ts_ops, &t[i] };
	}
	struct nk_host_out out[NK_HOST_MAX_OUT];
	struct nk_msg w = mk(NK_NETLR_OP_WRITE, OID, ID, 4);
	uint16_t src = CL;
	for (uint32_t i = 0; i < NS; i++) {
		EXPECT_EQ(H->server_handle(sv[i], &store[i], &w, src, out, NK_HOST_MAX_OUT), 1);
		EXPECT_EQ(t[i].ver, 6);         /* the head's order: stored + 1 */
		if (i + 1 < NS) {
			EXPECT_EQ(out[0].msg.op, NK_NETLR_OP_WRITE);
			EXPECT_EQ(out[0].dst, i + 1);
		} else {
			EXPECT_EQ(out[0].msg.op, NK_NETLR_OP_W_REPLY);
			EXPECT_EQ(out[0].dst, CL);      /* the client's node, carried by the head */
			EXPECT_EQ(out[0].msg.ver, 6);
			EXPECT_EQ(out[0].msg.epoch, 0);
		}
		w = out[0].msg;
		src = (uint16_t)i;
	}
	/* a stale copy from the predecessor is discarded */
	w = mk(NK_NETLR_OP_WRITE, OID, ID, 5);
	w.ver = 3;
	w.epoch = CL;
	EXPECT_EQ(H->server_handle(sv[2], &store[2], &w, 1, out, NK_HOST_MAX_OUT), 0);
	/* a write that skips the head, or comes from another than the
	 * predecessor, or names no client, is refused and not applied */
	w.ver = 50;
	EXPECT_EQ(H->server_handle(sv[2], &store[2], &w, CL, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(H->server_handle(sv[2], &store[2], &w, 0, out, NK_HOST_MAX_OUT), 0);
	w.epoch = 1;
	EXPECT_EQ(H->server_handle(sv[2], &store[2], &w, 1, out, NK_HOST_MAX_OUT), 0);
	w = mk(NK_NETLR_OP_WRITE, OID, ID, 6);
	EXPECT_EQ(H->server_handle(sv[0], &store[0], &w, 1, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(t[2].ver, 6);
	EXPECT_EQ(t[0].ver, 6);
	char text[96], cmd[] = "replica_stats";
	char *argv[] = { cmd };
	EXPECT_EQ(H->server_ctl(sv[2], &store[2], 1, argv, text, sizeof text),
		  (int)strlen("ok stale=1 nacks=0 refused=3"));
	EXPECT(!strcmp(text, "ok stale=1 nacks=0 refused=3"));
	for (uint32_t i = 0; i < NS; i++) {
		H->server_fini(sv[i]);
		free(sv[i]);
	}
	void *c = calloc(1, H->client_state_size);
	struct nk_host_cfg cc = { .n_servers = NS, .n_clients = NC, .params = params };
	EXPECT_EQ(H->client_init(c, &cc), 0);
	const uint8_t key[] = "k1";
	struct nk_req_spec sp = { .kind = NK_KIND_WRITE, .key_len = 2, .home = 2, .key = key };
	EXPECT_EQ(H->client_request(c, &sp, &m), 0);          /* head */
	sp.kind = NK_KIND_READ;
	EXPECT_EQ(H->client_request(c, &sp, &m), NS - 1);     /* tail */
	cc.params = "replication=raft";
	EXPECT_EQ(H->client_init(c, &cc), -1);
	free(c);
}

/* Harmonia on CR (replication=harmonia, pipeline/netlr_harmonia.c): clean
 * reads round-robin over every replica, a client's write marks the key
 * dirty and goes to the head (wherever it was addressed), dirty reads go
 * to the tail, the tail's completion clears the key whatever its seq (two
 * writes in flight: the first completion already makes the key clean:
 * the weakness the paper kept), a colliding write is dropped. */
static void test_harmonia(void)
{
	current = "harmonia";
	void *st = sw_new("replication=harmonia");
	for (int i = 0; i < 8; i++)
		EXPECT_EQ(read_to(st, OID, ID), i % NS);
	struct nk_msg m = mk(NK_NETLR_OP_WRITE, OID, ID, 7);
	m.ver = 77;                            /* forged: cleared */
	uint16_t d;
	struct nk_actions a = sw(st, &m, CL, NS - 1, &d);
	EXPECT_EQ(a.fwd, NK_FWD_PORT);
	EXPECT_EQ(d, 0);                       /* the head, not the tail it named */
	EXPECT_EQ(a.port, 10);
	EXPECT_EQ(m.ver, 0);                   /* the head orders it */
	EXPECT_EQ(reg(st, "dset", ID), OID);
	for (int i = 0; i < 3; i++)
		EXPECT_EQ(read_to(st, OID, ID), NS - 1);   /* dirty: the tail */
	EXPECT_EQ(read_to(st, OID + 1, ID + 1), 0);   /* another key: round-robin */
	/* a second write of the key while the first is in the chain */
	m = mk(NK_NETLR_OP_WRITE, OID, ID, 8);
	EXPECT_EQ(sw(st, &m, CL, 0, NULL).fwd, NK_FWD_PORT);
	/* a colliding key in the same slot: dropped, counted */
	m = mk(NK_NETLR_OP_WRITE, OID + 7, ID, 9);
	EXPECT_EQ(sw(st, &m, CL, 0, NULL).fwd, NK_FWD_DROP);
	EXPECT_EQ(reg(st, "stats", 3), 1);     /* NL_COLLISIONS */
	/* chain copies between replicas pass as addressed, the key stays dirty */
	m = mk(NK_NETLR_OP_WRITE, OID, ID, 7);
	m.ver = 6;
	m.epoch = CL;
	a = sw(st, &m, 1, 2, &d);
	EXPECT_EQ(a.fwd, NK_FWD_PORT);
	EXPECT_EQ(d, 2);
	EXPECT_EQ(m.ver, 6);
	EXPECT_EQ(reg(st, "dset", ID), OID);
	/* the first write's completion from the tail: the key is clean though
	 * the second write is still in flight (no seq compared) */
	EXPECT_EQ(ack(st, NS - 1, OID, ID, 6, NULL), 1);
	EXPECT_EQ(reg(st, "dset", ID), 0);
	EXPECT_EQ(read_to(st, OID, ID), 1);    /* round-robin again: may be stale */
	/* the second completion is still the client's reply */
	EXPECT_EQ(ack(st, NS - 1, OID, ID, 7, NULL), 1);
	EXPECT_EQ(reg(st, "stats", 0), 13);    /* NL_READS */
	EXPECT_EQ(reg(st, "stats", 1), 3);     /* NL_DIRTY_READS */
	EXPECT_EQ(reg(st, "stats", 2), 2);     /* NL_WRITES */
	EXPECT_EQ(reg(st, "stats", 4), 2);     /* NL_ACKS: completions forwarded */
	EXPECT_EQ(reg(st, "stats", 6), 1);     /* NL_COMMITS: that cleared the key */
	EXPECT_EQ(reg(st, "seq", 0), 1);       /* the switch orders nothing */
	/* a forged completion from a client port is dropped */
	m = mk(NK_NETLR_OP_W_REPLY, OID, ID, 8);
	EXPECT_EQ(sw(st, &m, CL, CL, NULL).fwd, NK_FWD_DROP);
	sw_free(st);
	/* no replica installed (boot_empty): nothing served */
	st = sw_new("replication=harmonia;boot_empty=1");
	EXPECT_EQ(read_to(st, OID, ID), -1);
	m = mk(NK_NETLR_OP_WRITE, OID, ID, 7);
	EXPECT_EQ(sw(st, &m, CL, 0, NULL).fwd, NK_FWD_DROP);
	EXPECT_EQ(reg(st, "stats", 8), 2);     /* NL_NO_REPLICA */
	sw_free(st);
	/* the hosts are CR's: writes to the head, reads to the tail */
	void *c = calloc(1, H->client_state_size);
	struct nk_host_cfg cc = { .n_servers = NS, .n_clients = NC,
				  .params = "replication=harmonia" };
	EXPECT_EQ(H->client_init(c, &cc), 0);
	const uint8_t key[] = "k1";
	struct nk_req_spec sp = { .kind = NK_KIND_WRITE, .key_len = 2, .home = 2, .key = key };
	EXPECT_EQ(H->client_request(c, &sp, &m), 0);
	sp.kind = NK_KIND_READ;
	EXPECT_EQ(H->client_request(c, &sp, &m), NS - 1);
	free(c);
}

/* Hermes (replication=hermes), packet by packet: replica 0 coordinates a
 * write, replica 1 stalls a read of the Invalid key until the VAL, the
 * client gets its W_REPLY once replicas 1..3 acked, a second write to the
 * key stalls at the coordinator and starts there once the key is Valid
 * (its INVs carry its request's cookie and value). */
static void test_hermes(void)
{
	current = "hermes";
	struct nk_host_cfg cfg = { .n_servers = NS, .n_clients = NC, .id = 0,
				   .params = "replication=hermes" };
	void *co = calloc(1, H->server_state_size), *r1 = calloc(1, H->server_state_size);
	EXPECT_EQ(H->server_init(co, &cfg), 0);
	cfg.id = 1;
	EXPECT_EQ(H->server_init(r1, &cfg), 0);
	struct tbstore b0 = { { 1, 1, 16 }, "preloaded" }, b1 = { { 1, 1, 16 }, "preloaded" };
	struct tstore *t0 = &b0.t, *t1 = &b1.t;
	struct nk_store s0 = {.ops = &ts_bytes_ops, .impl = &b0},
			s1 = {.ops = &ts_bytes_ops, .impl = &b1};
	struct nk_host_out out[NK_HOST_MAX_OUT];
	struct nk_msg w = mk(NK_NETLR_OP_WRITE, OID, ID, 5);
	static const uint8_t v1[NK_NETLR_VALUE_LEN] = "first write!!!!";
	w.value = v1;
	w.value_len = NK_NETLR_VALUE_LEN;
	/* timestamp (version 1, coordinator 0): above the preload's 1 */
	EXPECT_EQ(H->server_handle(co, &s0, &w, CL, out, NK_HOST_MAX_OUT), NS - 1);
	EXPECT_EQ(t0->ver, 1u << 8 | 0);
	for (int i = 0; i < NS - 1; i++) {
		EXPECT_EQ(out[i].msg.op, NK_NETLR_OP_INV);
		EXPECT_EQ(out[i].dst, i + 1);
		EXPECT_EQ(out[i].msg.value_len, NK_NETLR_VALUE_LEN);
	}
	struct nk_msg inv = out[0].msg;
	/* a read at the coordinator stalls too (its write is in flight) */
	struct nk_msg r = mk(NK_NETLR_OP_READ, OID, ID, 6);
	EXPECT_EQ(H->server_handle(co, &s0, &r, CL, out, NK_HOST_MAX_OUT), 0);
	/* replica 1 applies the INV and acks; its reads stall */
	EXPECT_EQ(H->server_handle(r1, &s1, &inv, 0, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_NETLR_OP_ACK);
	EXPECT_EQ(out[0].msg.ver, 1u << 8);
	EXPECT_EQ(t1->ver, 1u << 8);
	struct nk_msg ack = out[0].msg;
	r.cookie = 77;
	EXPECT_EQ(H->server_handle(r1, &s1, &r, CL, out, NK_HOST_MAX_OUT), 0);
	/* a forged INV from a client is refused */
	EXPECT_EQ(H->server_handle(r1, &s1, &inv, CL, out, NK_HOST_MAX_OUT), 0);
	/* a second write at the coordinator stalls */
	struct nk_msg w2 = mk(NK_NETLR_OP_WRITE, OID, ID, 7);
	static const uint8_t v2[NK_NETLR_VALUE_LEN] = "second write!!!";
	w2.value = v2;
	w2.value_len = NK_NETLR_VALUE_LEN;
	w2.cookie = 99;
	EXPECT_EQ(H->server_handle(co, &s0, &w2, CL, out, NK_HOST_MAX_OUT), 0);
	/* acks: two are not enough; a duplicate does not count twice */
	EXPECT_EQ(H->server_handle(co, &s0, &ack, 1, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(H->server_handle(co, &s0, &ack, 1, out, NK_HOST_MAX_OUT), 0);
	EXPECT_EQ(H->server_handle(co, &s0, &ack, 2, out, NK_HOST_MAX_OUT), 0);
	/* the last: W_REPLY to the client, VAL to 1..3, then the stalled read
	 * answered and the stalled write started: its INVs at timestamp
	 * (version 2, coordinator 0), its value stored */
	int n = H->server_handle(co, &s0, &ack, 3, out, NK_HOST_MAX_OUT);
	EXPECT_EQ(n, 1 + (NS - 1) + 1 + (NS - 1));
	EXPECT_EQ(out[0].msg.op, NK_NETLR_OP_W_REPLY);
	EXPECT_EQ(out[0].msg.req_id, 5);
	EXPECT_EQ(out[0].dst, CL);
	EXPECT_EQ(out[1].msg.op, NK_NETLR_OP_VAL);
	EXPECT_EQ(out[NS].msg.op, NK_NETLR_OP_R_REPLY);
	EXPECT_EQ(out[NS].msg.req_id, 6);
	/* the read is answered before the second write starts: it carries the
	 * first write's bytes, kept when it was answered, though the store
	 * holds the second's when the embedder sends it (before: the second's
	 * bytes under the first's version, on real packets) */
	EXPECT_EQ(out[NS].own_value, 1);
	EXPECT(out[NS].msg.value && !memcmp(out[NS].msg.value, v1, NK_NETLR_VALUE_LEN));
	EXPECT(!memcmp(b0.bytes, v2, NK_NETLR_VALUE_LEN));
	for (int i = 0; i < NS - 1; i++) {
		const struct nk_msg *iv = &out[NS + 1 + i].msg;
		EXPECT_EQ(iv->op, NK_NETLR_OP_INV);
		EXPECT_EQ(iv->req_id, 7);
		EXPECT_EQ(iv->ver, 2u << 8);
		EXPECT_EQ(iv->cookie, 99);
		EXPECT_EQ(out[NS + 1 + i].dst, i + 1);
	}
	EXPECT_EQ(t0->ver, 2u << 8);
	uint8_t buf[64];
	for (int i = 0; i < n; i++)
		EXPECT_EQ(nk_wire_encode(&out[i].msg, buf, sizeof buf), NK_NETLR_LEN);
	struct nk_msg val = out[1].msg;
	/* an older INV (from coordinator 0 at version 0) is acked, not applied */
	struct nk_msg old = inv;
	old.ver = 2;
	EXPECT_EQ(H->server_handle(r1, &s1, &old, 2, out, NK_HOST_MAX_OUT), 1);
	EXPECT_EQ(out[0].msg.op, NK_NETLR_OP_ACK);
	EXPECT_EQ(t1->ver, 1u << 8);
	/* VAL wakes replica 1's stalled read, answering that request */
	n = H->server_handle(r1, &s1, &val, 0, out, NK_HOST_MAX_OUT);
	EXPECT_EQ(n, 1);
	EXPECT_EQ(out[0].msg.op, NK_NETLR_OP_R_REPLY);
	EXPECT_EQ(out[0].msg.ver, 1u << 8);
	EXPECT_EQ(out[0].msg.cookie, 77);
	EXPECT_EQ(out[0].dst, CL);
	/* Valid again: reads are served at once */
	EXPECT_EQ(H->server_handle(r1, &s1, &r, CL, out, NK_HOST_MAX_OUT), 1);
	char text[128], *argv[1] = { "replica_stats" };
	EXPECT_EQ(H->server_ctl(co, &s0, 1, argv, text, sizeof text),
		  (int)strlen("ok writes=2 commits=1 stalled=2 started=1 full=0"));
	EXPECT(!strcmp(text, "ok writes=2 commits=1 stalled=2 started=1 full=0"));
	H->server_fini(co);
	H->server_fini(r1);
	free(co);
	free(r1);
	/* the switch only forwards */
	void *sw = sw_new("replication=hermes");
	EXPECT(sw != NULL);
	sw_free(sw);
}

int main(void)
{
	P = nk_pipeline_find("netlr");
	H = nk_host_find("netlr");
	if (!P || !H) {
		fprintf(stderr, "netlr not registered\n");
		return 2;
	}
	test_reads_round_robin();
	test_write_commit("mode=strict");
	test_write_commit("mode=paper");
	test_duplicate_ack(1);
	test_duplicate_ack(0);
	test_crep_backwards(1);
	test_crep_backwards(0);
	test_superseded();
	test_duplicate_write();
	test_collision();
	test_replica_removed();
	test_hostile();
	test_stamps();
	test_replica();
	test_switch_restart();
	test_client();
	test_chain();
	test_harmonia();
	test_hermes();
	printf("test_netlr: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
