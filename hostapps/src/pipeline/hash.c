/*
 * hash.c - the static consistent-hashing baseline's switch: L2/L3 forwarding
 * only. Clients address the key's home server themselves (host/hash.c); the
 * switch looks the destination up in `node_fwd` and counts packets.
 *
 * Named state (for a controller or a test):
 *   table    node_fwd[node] -> (port)       exact match on the node id
 *   register port_pkts[port]                packets sent out of each port
 *   register dropped[0]                     packets with no node_fwd entry
 *   register host_server_op[0]              replies from a client port, dropped
 *                                           (docs/security.md)
 *   register n_servers[0]                   servers 0..n-1: their ports are trusted
 *                                           to send replies
 */
#include <stdlib.h>
#include <string.h>

#include "netkv/pipeline.h"
#include "netkv/wire.h"
#include "peg_params.h"

#define HASH_MAX_NODES 4096
#define HASH_MAX_PORTS 4096

struct hash_state {
	uint32_t n_nodes;
	uint16_t node_port[HASH_MAX_NODES];
	uint64_t port_pkts[HASH_MAX_PORTS];
	uint64_t dropped;
	uint64_t host_server_op;
	struct nk_trust trust;
	struct nk_reg_desc regs[4];
	unsigned nregs;
};

static void add_reg(struct hash_state *s, const char *name, void *base, uint32_t n,
		    uint8_t esize, uint8_t bits)
{
	s->regs[s->nregs++] = (struct nk_reg_desc){ name, base, n, esize, bits, 0 };
}

static int hash_init(void *st, const struct nk_pipeline_cfg *cfg)
{
	struct hash_state *s = st;
	memset(s, 0, sizeof(*s));
	if (cfg->n_nodes > HASH_MAX_NODES)
		return NK_PIPE_ERANGE;
	if (nkp_trust(cfg->params, cfg->n_servers, &s->trust))
		return NK_PIPE_EINVAL;
	s->n_nodes = HASH_MAX_NODES;
	add_reg(s, "port_pkts", s->port_pkts, HASH_MAX_PORTS, 8, 64);
	add_reg(s, "dropped", &s->dropped, 1, 8, 64);
	add_reg(s, "host_server_op", &s->host_server_op, 1, 8, 64);
	add_reg(s, "n_servers", &s->trust.n_servers, 1, 4, 8);   /* the trust boundary */
	for (uint32_t i = 0; i < HASH_MAX_NODES; i++)
		s->node_port[i] = i < cfg->n_nodes && cfg->node_port ? cfg->node_port[i] : NK_NODE_NONE;
	return 0;
}

static void hash_fini(void *st)
{
	(void)st;
}

static void hash_process(void *st, struct nk_msg *m, struct nk_pkt_meta *meta,
			 struct nk_actions *act)
{
	struct hash_state *s = st;
	memset(act, 0, sizeof(*act));
	if (m->proto == NK_PROTO_PLAIN && m->op != NK_PEGASUS_OP_READ &&
	    m->op != NK_PEGASUS_OP_WRITE &&
	    nk_origin_of(&s->trust, s->node_port, meta) == NK_ORIGIN_CLIENT) {
		/* a client answering another client's request (a forged reply) */
		s->host_server_op++;
		act->fwd = NK_FWD_DROP;
		return;
	}
	nk_fwd_to_node(s->node_port, s->n_nodes, meta, act);
	if (act->fwd == NK_FWD_PORT && act->port < HASH_MAX_PORTS)
		s->port_pkts[act->port]++;
	else
		s->dropped++;
}

static int hash_reg_read(void *st, const char *name, uint32_t idx, uint64_t *val)
{
	struct hash_state *s = st;
	return nk_reg_read_named(s->regs, s->nregs, name, idx, val);
}

static int hash_reg_write(void *st, const char *name, uint32_t idx, uint64_t val)
{
	struct hash_state *s = st;
	return nk_reg_write_named(s->regs, s->nregs, name, idx, val, NULL);
}

static int hash_table_add(void *st, const char *table, const uint64_t *key, unsigned nkey,
			  const uint64_t *args, unsigned nargs)
{
	struct hash_state *s = st;
	if (strcmp(table, "node_fwd"))
		return NK_PIPE_ENOENT;
	if (nkey != 1 || nargs != 1)
		return NK_PIPE_EINVAL;
	if (key[0] >= HASH_MAX_NODES || args[0] >= NK_NODE_NONE)
		return NK_PIPE_ERANGE;
	s->node_port[key[0]] = (uint16_t)args[0];
	return 0;
}

static int hash_table_del(void *st, const char *table, const uint64_t *key, unsigned nkey)
{
	struct hash_state *s = st;
	if (strcmp(table, "node_fwd"))
		return NK_PIPE_ENOENT;
	if (nkey != 1)
		return NK_PIPE_EINVAL;
	if (key[0] >= HASH_MAX_NODES)
		return NK_PIPE_ERANGE;
	s->node_port[key[0]] = NK_NODE_NONE;
	return 0;
}

const struct nk_pipeline_ops nk_pipeline_hash = {
	.name = "hash",
	.proto = NK_PROTO_PLAIN,
	.udp_port = NK_PEGASUS_PORT, /* the plain format shares Pegasus' port */
	.udp_ports = 1,
	.state_size = sizeof(struct hash_state),
	.never_to_cpu = 1,
	.order_free = 1,  /* forwarding by destination; counters commute */
	.init = hash_init,
	.fini = hash_fini,
	.process = hash_process,
	.reg_read = hash_reg_read,
	.reg_write = hash_reg_write,
	.table_add = hash_table_add,
	.table_del = hash_table_del,
};
