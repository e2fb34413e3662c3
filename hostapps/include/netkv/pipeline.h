/*
 * pipeline.h - a switch data plane, written once in C, run by the simulator
 * and by netkv-switch (which decodes frames into `struct nk_msg`, calls the
 * same `process`, and encodes the result).
 *
 * A pipeline is a state struct plus `process(state, msg, meta, actions)`:
 *  - `msg`  the decoded packet; the pipeline may edit header fields (stamp a
 *           version, turn a request into a reply, ...).
 *  - `meta` where it came from and where it is addressed. Nodes are numbered
 *           0..n_servers-1 (servers), then n_servers..n_servers+n_clients-1
 *           (clients). The pipeline may rewrite `meta->dst` (address rewrite,
 *           Pegasus' node_fwd); the switch rewrites the L2/L3 addresses
 *           from it.
 *  - `act`  what to do: drop, forward to a port, multicast to a group (the
 *           switch owns the group -> ports table, like a PRE), recirculate;
 *           and independently, clone a copy of the packet as received to
 *           the controller (to_cpu). A packet the pipeline addresses to the
 *           controller itself is forwarded to cfg->cpu_port.
 *           A reply from the switch (NetCache hit) is "set meta->dst =
 *           meta->src, forward to that node's port, set switch_reply"; the
 *           switch then sends it as if from the node the request addressed
 *           (L2/L3 addresses and UDP ports swapped).
 *
 * The controller (Python, via a SwitchDriver) reaches the state only by
 * name: registers (reg_read/reg_write, one 64-bit cell at a time) and tables
 * (exact-match keys -> action arguments). The names are those of the P4
 * program, so one controller serves the C pipeline and the P4 target.
 * All hooks return 0 on success, NK_PIPE_ENOENT for an unknown name,
 * NK_PIPE_ERANGE for a bad index, NK_PIPE_EFULL when a table is full.
 */
#ifndef NETKV_PIPELINE_H
#define NETKV_PIPELINE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <string.h>

#include "netkv/msg.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NK_PIPE_ENOENT (-1)
#define NK_PIPE_ERANGE (-2)
#define NK_PIPE_EFULL (-3)
#define NK_PIPE_EINVAL (-4)

#define NK_NODE_NONE 0xFFFF

struct nk_pkt_meta {
	uint64_t now_ns;        /* switch clock */
	uint16_t ingress_port;
	uint16_t src;           /* sender node id (NK_NODE_NONE: controller) */
	uint16_t dst;           /* addressed node id; the pipeline may rewrite it */
	uint16_t wire_len;      /* frame length in bytes */
	uint8_t from_cpu;       /* injected by the controller (packet-out) */
	uint8_t recirculated;   /* arrived from the recirculation port */
	/* The embedder's handle of the request this packet carries (the
	 * simulator: its client request slot; 0 = none). A pipeline that keeps
	 * a request and answers it later from another packet (StarCache's
	 * parked reads) stores it with the request and writes it back into
	 * the answering packet's meta, as a switch stores the client's address
	 * and port. netkv-switch: the sender's UDP source port (a readdressed
	 * switch reply goes to the port its cookie names). */
	uint64_t cookie;
};

enum nk_fwd {
	NK_FWD_DROP = 0,
	NK_FWD_PORT = 1,        /* act->port */
	NK_FWD_MCAST = 2,       /* act->mcast_group (switch-owned group table) */
	NK_FWD_RECIRC = 3,      /* back into the ingress via the recirculation port */
};

struct nk_actions {
	uint8_t fwd;            /* enum nk_fwd */
	uint8_t to_cpu;         /* also send a copy to the controller */
	uint8_t switch_reply;   /* the switch answered the request itself */
	uint8_t held;           /* with NK_FWD_DROP: the pipeline kept the request
				 * to answer it later (not counted as a drop) */
	uint16_t port;
	uint16_t mcast_group;
};

struct nk_pipeline_cfg {
	uint32_t n_servers;
	uint32_t n_clients;
	uint32_t n_nodes;           /* entries in node_port */
	const uint16_t *node_port;  /* node id -> egress port (initial node_fwd) */
	uint16_t cpu_port;
	uint16_t recirc_port;
	uint64_t seed;              /* for pipelines that pick at random */
	const char *params;         /* protocol knobs, "key=value;key=value" (may be NULL) */
};

struct nk_pipeline_ops {
	const char *name;           /* "hash", "pegasus", ... (= protocol.name) */
	uint8_t proto;              /* enum nk_proto of the wire format */
	/* The protocol's UDP ports, [udp_port, udp_port + udp_ports): what the
	 * switch classifies as the protocol's traffic (the rest is forwarded
	 * as plain IP). */
	uint16_t udp_port;
	uint16_t udp_ports;
	size_t state_size;
	/* 1 if process() does not depend on the order or time of packets (only
	 * on the packet itself): the simulator may then run it when the packet
	 * is sent rather than when it reaches the switch (one event fewer per
	 * hop). Stateful protocols (Pegasus, NetCache) leave it 0. */
	uint8_t order_free;
	/* 1 if process() never sets act->to_cpu: the simulator then skips the
	 * copy of the packet as received that a to_cpu clone needs (~200 B per
	 * switch pass). A pipeline that sets it anyway sends the edited packet. */
	uint8_t never_to_cpu;
	/* For a pipeline that is not order_free: 1 if process() of this one
	 * packet neither depends on the order or time of packets nor changes
	 * what later packets see (a reply a stateful pipeline only forwards),
	 * so the simulator may run it when the packet is sent, as for an
	 * order_free pipeline. NULL: no packet is. */
	int (*order_free_pkt)(const void *st, const struct nk_msg *m);
	/* A hint, or NULL: this packet will reach process() soon (the
	 * simulator calls it when a packet sent to the switch will wait for
	 * its arrival there, not for one it processes at once); warm the cache
	 * lines of the tables process() will read for it. Changes nothing. */
	void (*prefetch)(const void *st, const struct nk_msg *m);
	int (*init)(void *st, const struct nk_pipeline_cfg *cfg);
	void (*fini)(void *st);
	void (*process)(void *st, struct nk_msg *m, struct nk_pkt_meta *meta,
			struct nk_actions *act);
	int (*reg_read)(void *st, const char *name, uint32_t idx, uint64_t *val);
	int (*reg_write)(void *st, const char *name, uint32_t idx, uint64_t val);
	int (*table_add)(void *st, const char *table, const uint64_t *key, unsigned nkey,
			 const uint64_t *args, unsigned nargs);
	int (*table_del)(void *st, const char *table, const uint64_t *key, unsigned nkey);
};

/* The pipeline registered under `name`, or NULL. */
const struct nk_pipeline_ops *nk_pipeline_find(const char *name);

/* Helper shared by pipelines: forward by meta->dst through a node->port map. */
static inline void nk_fwd_to_node(const uint16_t *node_port, uint32_t n_nodes,
				  const struct nk_pkt_meta *meta, struct nk_actions *act)
{
	if (meta->dst < n_nodes && node_port[meta->dst] != NK_NODE_NONE) {
		act->fwd = NK_FWD_PORT;
		act->port = node_port[meta->dst];
	} else {
		act->fwd = NK_FWD_DROP;
	}
}

/* The trust boundary (docs/security.md). Where a packet entered the switch,
 * never its addresses (any host can forge those), decides what it may carry:
 * switch-owned header fields (Pegasus' VER, ...) and server-only message
 * types (replies, cache and replica updates, acks) are honoured only from a
 * server's port, the controller, recirculation, or a port configured as
 * trusted (the inter-rack link of multi-rack Pegasus). Every other port is a
 * client's: untrusted. */
enum nk_origin {
	NK_ORIGIN_CLIENT = 0,
	NK_ORIGIN_SERVER = 1,
	NK_ORIGIN_TRUSTED = 2,
};

#define NK_MAX_TRUSTED_PORTS 8

struct nk_trust {
	uint32_t n_servers;
	uint32_t n_trusted;
	uint16_t trusted[NK_MAX_TRUSTED_PORTS];
};

/* `node_port` is the pipeline's node -> port table (node_fwd): servers are
 * nodes 0..n_servers-1, so a server's port is node_port[s]. */
static inline enum nk_origin nk_origin_of(const struct nk_trust *t, const uint16_t *node_port,
					  const struct nk_pkt_meta *meta)
{
	if (meta->from_cpu || meta->recirculated)
		return NK_ORIGIN_TRUSTED;
	for (uint32_t i = 0; i < t->n_trusted; i++)
		if (t->trusted[i] == meta->ingress_port)
			return NK_ORIGIN_TRUSTED;
	for (uint32_t s = 0; s < t->n_servers; s++)
		if (node_port[s] == meta->ingress_port)
			return NK_ORIGIN_SERVER;
	return NK_ORIGIN_CLIENT;
}

/* Helpers shared by pipelines: a register array addressed by name, as
 * reg_read/reg_write see it. Cells are `esize` bytes in memory; writes are
 * masked to `bits`. */
struct nk_reg_desc {
	const char *name;
	void *base;
	uint32_t n;             /* cells */
	uint8_t esize;          /* bytes per cell in memory (1, 2, 4, 8) */
	uint8_t bits;           /* width: writes are masked to it */
	/* bytes from one cell to the next, 0: esize (an array). A field of
	 * an array of structs: registers read together per packet then
	 * share a cache line. */
	uint16_t stride;
};

static inline const struct nk_reg_desc *nk_reg_find(const struct nk_reg_desc *regs,
						    unsigned nregs, const char *name)
{
	for (unsigned i = 0; i < nregs; i++)
		if (!strcmp(regs[i].name, name))
			return &regs[i];
	return NULL;
}

static inline uint64_t nk_reg_get(const struct nk_reg_desc *r, uint32_t i)
{
	if (r->stride) {
		const uint8_t *c = (const uint8_t *)r->base + (size_t)i * r->stride;
		switch (r->esize) {
		case 1: return *c;
		case 2: return *(const uint16_t *)(const void *)c;
		case 4: return *(const uint32_t *)(const void *)c;
		default: return *(const uint64_t *)(const void *)c;
		}
	}
	switch (r->esize) {
	case 1: return ((const uint8_t *)r->base)[i];
	case 2: return ((const uint16_t *)r->base)[i];
	case 4: return ((const uint32_t *)r->base)[i];
	default: return ((const uint64_t *)r->base)[i];
	}
}

static inline void nk_reg_set(const struct nk_reg_desc *r, uint32_t i, uint64_t v)
{
	if (r->bits < 64)
		v &= (1ull << r->bits) - 1;
	if (r->stride) {
		uint8_t *c = (uint8_t *)r->base + (size_t)i * r->stride;
		switch (r->esize) {
		case 1: *c = (uint8_t)v; break;
		case 2: *(uint16_t *)(void *)c = (uint16_t)v; break;
		case 4: *(uint32_t *)(void *)c = (uint32_t)v; break;
		default: *(uint64_t *)(void *)c = v; break;
		}
		return;
	}
	switch (r->esize) {
	case 1: ((uint8_t *)r->base)[i] = (uint8_t)v; break;
	case 2: ((uint16_t *)r->base)[i] = (uint16_t)v; break;
	case 4: ((uint32_t *)r->base)[i] = (uint32_t)v; break;
	default: ((uint64_t *)r->base)[i] = v; break;
	}
}

/* A pipeline's reg_read/reg_write over its register table: 0,
 * NK_PIPE_ENOENT (no such name) or NK_PIPE_ERANGE (index). `*hit` (may be
 * NULL) is the register written, for pipelines with command registers. */
static inline int nk_reg_read_named(const struct nk_reg_desc *regs, unsigned nregs,
				    const char *name, uint32_t idx, uint64_t *val)
{
	const struct nk_reg_desc *r = nk_reg_find(regs, nregs, name);
	if (!r)
		return NK_PIPE_ENOENT;
	if (idx >= r->n)
		return NK_PIPE_ERANGE;
	*val = nk_reg_get(r, idx);
	return 0;
}

static inline int nk_reg_write_named(const struct nk_reg_desc *regs, unsigned nregs,
				     const char *name, uint32_t idx, uint64_t val,
				     const struct nk_reg_desc **hit)
{
	const struct nk_reg_desc *r = nk_reg_find(regs, nregs, name);
	if (!r)
		return NK_PIPE_ENOENT;
	if (idx >= r->n)
		return NK_PIPE_ERANGE;
	nk_reg_set(r, idx, val);
	if (hit)
		*hit = r;
	return 0;
}

/* The hash baseline (pipeline/hash.c): forwards by destination only. */
extern const struct nk_pipeline_ops nk_pipeline_hash;

#ifdef __cplusplus
}
#endif

#endif /* NETKV_PIPELINE_H */
