/*
 * hash.c - the static consistent-hashing baseline's switch: L2/L3 forwarding
 * only. Clients address the key's home server themselves (host/plain.c); the
 * switch looks the destination up in `node_fwd` and counts packets.
 *
 * Named state (for a controller or a test):
 *   table    node_fwd[node] -> (port)       exact match on the node id
 *   register port_pkts[port]                packets sent out of each port
 *   register dropped[0]                     packets with no node_fwd entry
 */
#include <stdlib.h>
#include <string.h>

#include "netkv/pipeline.h"

#define HASH_MAX_NODES 4096
#define HASH_MAX_PORTS 4096

struct hash_state {
	uint32_t n_nodes;
	uint16_t node_port[HASH_MAX_NODES];
	uint64_t port_pkts[HASH_MAX_PORTS];
	uint64_t dropped;
};

static int hash_init(void *st, const struct nk_pipeline_cfg *cfg)
{
	struct hash_state *s = st;
	memset(s, 0, sizeof(*s));
	if (cfg->n_nodes > HASH_MAX_NODES)
		return NK_PIPE_ERANGE;
	s->n_nodes = HASH_MAX_NODES;
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
	(void)m;
	nk_fwd_to_node(s->node_port, s->n_nodes, meta, act);
	if (act->fwd == NK_FWD_PORT && act->port < HASH_MAX_PORTS)
		s->port_pkts[act->port]++;
	else
		s->dropped++;
}

static int hash_reg_read(void *st, const char *name, uint32_t idx, uint64_t *val)
{
	struct hash_state *s = st;
	if (!strcmp(name, "port_pkts")) {
		if (idx >= HASH_MAX_PORTS)
			return NK_PIPE_ERANGE;
		*val = s->port_pkts[idx];
		return 0;
	}
	if (!strcmp(name, "dropped")) {
		if (idx)
			return NK_PIPE_ERANGE;
		*val = s->dropped;
		return 0;
	}
	return NK_PIPE_ENOENT;
}

static int hash_reg_write(void *st, const char *name, uint32_t idx, uint64_t val)
{
	struct hash_state *s = st;
	if (!strcmp(name, "port_pkts")) {
		if (idx >= HASH_MAX_PORTS)
			return NK_PIPE_ERANGE;
		s->port_pkts[idx] = val;
		return 0;
	}
	if (!strcmp(name, "dropped")) {
		if (idx)
			return NK_PIPE_ERANGE;
		s->dropped = val;
		return 0;
	}
	return NK_PIPE_ENOENT;
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
	.state_size = sizeof(struct hash_state),
	.order_free = 1,  /* forwarding by destination; counters commute */
	.init = hash_init,
	.fini = hash_fini,
	.process = hash_process,
	.reg_read = hash_reg_read,
	.reg_write = hash_reg_write,
	.table_add = hash_table_add,
	.table_del = hash_table_del,
};
