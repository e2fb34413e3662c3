/*
 * netmc.c - NetMC's switch (netmc.md §3): split a multiget into one
 * sub-request per key group, statelessly, by multicast and recirculation.
 *
 * Per pass of an MGET (params `split=1`; the baselines' `split=0` only
 * forwards, as their port range is L3-only on a real switch):
 *
 *   if CLO == 1:  OID += 1; STARTIDX += NUMKEY   (NUMKEY = previous group)
 *   n = leading zeros of KEYIDX (W bits) + 1     (KeyGroup; KEYIDX 0: drop)
 *   KEYIDX <<= n; NUMKEY = n
 *   s = SRV[OID] (SrvIDTable); addr_table[s] -> node, port, mgid
 *   KEYIDX != 0: CLO = 1, multicast to mgid = {server port, recirculation
 *                port}: the copy to the server is the sub-request, the
 *                recirculated one the continuation
 *   else:        unicast to the server (the last group)
 *
 * A multiget of g groups costs g passes and g - 1 recirculations; every
 * sub-request carries the whole key list (the server reads NUMKEY keys from
 * STARTIDX). OID, STARTIDX and CLO are the switch's: a client's packet with
 * any of them non-zero is forged (FORGED); KEYIDX = 0, a group past the key
 * list or OID >= the SRV entries is malformed (MALFORMED): both counted and
 * dropped. Everything else (GET, PUT,
 * replies) is forwarded by destination; a reply from a client's port is
 * dropped (docs/security.md).
 *
 * Named state (docs/netmc.md):
 *   table    node_fwd[node] -> (port)
 *   table    addr_table[srv_id] -> (node, port, mgid)   AddrTable (§9.5)
 *   register stats[MC_STAT_COUNT]   enum mc_stat (constants.h)
 *   register n_servers[0]           servers' ports are trusted for replies
 */
#include <string.h>

#include "netkv/pipeline.h"
#include "netkv/wire.h"
#include "peg_params.h"

#define MC_MAX_NODES 4096

struct mc_addr {
	uint16_t node, port, mgid;
	uint8_t valid;
};

struct mc_state {
	uint32_t n_nodes;
	uint32_t split;
	uint32_t w;
	uint16_t node_port[MC_MAX_NODES];
	struct mc_addr addr[NK_NETMC_N];
	uint64_t stats[MC_STAT_COUNT];
	struct nk_trust trust;
	struct nk_reg_desc regs[2];
};

static int mc_init(void *st, const struct nk_pipeline_cfg *cfg)
{
	struct mc_state *s = st;
	memset(s, 0, sizeof(*s));
	uint64_t split, w;
	if (cfg->n_nodes > MC_MAX_NODES || cfg->n_servers > NK_NETMC_N)
		return NK_PIPE_ERANGE;
	if (nkp_trust(cfg->params, cfg->n_servers, &s->trust) ||
	    nkp_u64(cfg->params, "split", 1, &split) || split > 1 ||
	    nkp_u64(cfg->params, "w", MC_KEYIDX_W, &w) || (w != 16 && w != 32))
		return NK_PIPE_EINVAL;
	s->split = (uint32_t)split;
	s->w = (uint32_t)w;
	s->n_nodes = MC_MAX_NODES;
	for (uint32_t i = 0; i < MC_MAX_NODES; i++)
		s->node_port[i] = i < cfg->n_nodes && cfg->node_port ? cfg->node_port[i] : NK_NODE_NONE;
	s->regs[0] = (struct nk_reg_desc){"stats", s->stats, MC_STAT_COUNT, 8, 64, 0};
	s->regs[1] = (struct nk_reg_desc){"n_servers", &s->trust.n_servers, 1, 4, 8, 0};
	return 0;
}

static void mc_fini(void *st)
{
	(void)st;
}

static void mc_forward(struct mc_state *s, struct nk_pkt_meta *meta, struct nk_actions *act)
{
	nk_fwd_to_node(s->node_port, s->n_nodes, meta, act);
	s->stats[act->fwd == NK_FWD_PORT ? MC_STAT_FORWARDED : MC_STAT_NO_ROUTE]++;
}

/* KeyGroup: the current group's size, leading zeros of KEYIDX + 1 (0 if
 * KEYIDX is 0) */
static unsigned mc_group_size(uint32_t keyidx, unsigned w)
{
	for (unsigned n = 1; n <= w; n++)
		if (keyidx & (1u << (w - n)))
			return n;
	return 0;
}

static void mc_process(void *st, struct nk_msg *m, struct nk_pkt_meta *meta,
		       struct nk_actions *act)
{
	struct mc_state *s = st;
	memset(act, 0, sizeof(*act));
	enum nk_origin origin = nk_origin_of(&s->trust, s->node_port, meta);
	if (m->proto == NK_PROTO_NETMC && origin == NK_ORIGIN_CLIENT &&
	    (m->kind == NK_KIND_READ_REPLY || m->kind == NK_KIND_WRITE_REPLY ||
	     m->kind == NK_KIND_MULTIGET_REPLY)) {
		s->stats[MC_STAT_HOST_SERVER_OP]++;  /* a forged reply */
		return;
	}
	if (m->proto != NK_PROTO_NETMC || m->op != NK_NETMC_OP_MGET || !s->split) {
		mc_forward(s, meta, act);
		return;
	}
	if (origin == NK_ORIGIN_CLIENT && (m->clo || m->oid || m->startidx)) {
		/* OID, STARTIDX and CLO are the switch's (docs/security.md): a
		 * client's multiget starts at group 0, key 0, never recirculated */
		s->stats[MC_STAT_FORGED]++;
		return;
	}
	if (m->clo) {
		m->oid++;
		m->startidx = (uint8_t)(m->startidx + m->nkeys);
	} else {
		s->stats[MC_STAT_MGETS]++;
	}
	uint32_t wmask = s->w >= 32 ? UINT32_MAX : (1u << s->w) - 1;
	uint32_t keyidx = m->keyidx & wmask;
	unsigned n = mc_group_size(keyidx, s->w);
	/* the group must lie in the packet's key list (NSLOTS, a fixed offset
	 * of the preamble): the switch never sends a sub-request the server
	 * would have to refuse */
	if (!n || m->oid >= NK_NETMC_N || (unsigned)m->startidx + n > m->key_slots) {
		s->stats[MC_STAT_MALFORMED]++;
		return;
	}
	uint8_t srv = m->srv[m->oid];  /* SrvIDTable */
	if (srv >= NK_NETMC_N || !s->addr[srv].valid) {
		s->stats[MC_STAT_NO_ROUTE]++;
		return;
	}
	const struct mc_addr *a = &s->addr[srv];
	m->keyidx = n >= s->w ? 0 : (keyidx << n) & wmask;
	m->nkeys = (uint8_t)n;
	meta->dst = a->node;
	s->stats[MC_STAT_PASSES]++;
	if (m->keyidx) {  /* more groups: the continuation recirculates */
		m->clo = 1;
		act->fwd = NK_FWD_MCAST;
		act->mcast_group = a->mgid;
		s->stats[MC_STAT_CLONES]++;
	} else {
		act->fwd = NK_FWD_PORT;
		act->port = a->port;
	}
}

static int mc_reg_read(void *st, const char *name, uint32_t idx, uint64_t *val)
{
	struct mc_state *s = st;
	return nk_reg_read_named(s->regs, 2, name, idx, val);
}

static int mc_reg_write(void *st, const char *name, uint32_t idx, uint64_t val)
{
	struct mc_state *s = st;
	return nk_reg_write_named(s->regs, 2, name, idx, val, NULL);
}

static int mc_table_add(void *st, const char *table, const uint64_t *key, unsigned nkey,
			const uint64_t *args, unsigned nargs)
{
	struct mc_state *s = st;
	if (!strcmp(table, "node_fwd")) {
		if (nkey != 1 || nargs != 1)
			return NK_PIPE_EINVAL;
		if (key[0] >= MC_MAX_NODES || args[0] >= NK_NODE_NONE)
			return NK_PIPE_ERANGE;
		s->node_port[key[0]] = (uint16_t)args[0];
		return 0;
	}
	if (!strcmp(table, "addr_table")) {
		if (nkey != 1 || nargs != 3)
			return NK_PIPE_EINVAL;
		if (key[0] >= NK_NETMC_N || args[0] >= NK_NODE_NONE || args[1] >= NK_NODE_NONE ||
		    args[2] > UINT16_MAX)
			return NK_PIPE_ERANGE;
		s->addr[key[0]] = (struct mc_addr){(uint16_t)args[0], (uint16_t)args[1],
						   (uint16_t)args[2], 1};
		return 0;
	}
	return NK_PIPE_ENOENT;
}

static int mc_table_del(void *st, const char *table, const uint64_t *key, unsigned nkey)
{
	struct mc_state *s = st;
	if (nkey != 1)
		return NK_PIPE_EINVAL;
	if (!strcmp(table, "node_fwd")) {
		if (key[0] >= MC_MAX_NODES)
			return NK_PIPE_ERANGE;
		s->node_port[key[0]] = NK_NODE_NONE;
		return 0;
	}
	if (!strcmp(table, "addr_table")) {
		if (key[0] >= NK_NETMC_N)
			return NK_PIPE_ERANGE;
		s->addr[key[0]].valid = 0;
		return 0;
	}
	return NK_PIPE_ENOENT;
}

const struct nk_pipeline_ops nk_pipeline_netmc = {
	.name = "netmc",
	.proto = NK_PROTO_NETMC,
	.udp_port = NK_NETMC_PORT_BASE,
	.udp_ports = 16,
	.state_size = sizeof(struct mc_state),
	.never_to_cpu = 1,
	.order_free = 1,  /* header-only, stateless but for counters */
	.init = mc_init,
	.fini = mc_fini,
	.process = mc_process,
	.reg_read = mc_reg_read,
	.reg_write = mc_reg_write,
	.table_add = mc_table_add,
	.table_del = mc_table_del,
};
