/*
 * kvswitch.c - the KVSwitch switch (Shi et al., Electronics 8(9) 2019;
 * docs/kvswitch.md, ../shared/design/kvswitch.md §3): prediction-driven
 * selective replication with round-robin redirection of hot-key reads.
 *
 * Map of this file:
 *   state + named registers  - RoundRobin, Valid (packed: one M-bit word per
 *                              hot-key slot), Ver (strict mode), HotkeyCount,
 *                              Loadcount, HashPipe (d stages x w slots),
 *                              period_reset (command), stats, n_servers
 *   tables                   - HotkeyTable  (KEY 128 bit -> r, slot, owner)
 *                              ServermapTable ((slot, ordinal) -> server)
 *                              node_fwd (node -> port, as every pipeline)
 *   process()                - client GET/SET/DEL: hot -> counter, GET
 *                              redirected round-robin over valid replicas,
 *                              SET/DEL invalidate all but the owner, stamp VER,
 *                              multicast to the (owner, r) group; cold -> HashPipe;
 *                              UPDATE_ACK from a server -> Valid bit, dropped
 *
 * Merged tables (digest §3, "Implementation notes"): KeyindexTable (base =
 * slot) is the slot HotkeyTable returns; MultigroupTable is a function of
 * (owner, r), both from HotkeyTable (never the address a client chose): the
 * ring placement depends on nothing else, so M * M groups
 * (nk_kvs_mcast_group) serve every key instead of one group per key (K =
 * 10,000 would exceed the switch's group table); ServeroffsetTable is the identity because servers are
 * nodes 0..M-1 here; ServermapTable is keyed by (slot, ordinal) instead of
 * (KEY, ordinal), which HotkeyTable has already resolved to the slot.
 * PorttoserverTable (egress) is the switch shell's per-copy address rewrite.
 * Multicast copies keep their SET/DEL op: the servers tell the owner's copy
 * from a replica's (the owner learned it owns a hot key from REPL_CMD), as
 * in the paper where "servers detect not-my-key themselves".
 *
 * Hot writes carry FLAGS = owner index + 1 in every copy (the servers tell
 * the owner's copy by it).
 *
 * Strict mode (strict=1, default; digest §5): Ver[slot] counts hot writes
 * and is stamped into VER; a replica becomes valid only on an ACK carrying
 * the current Ver[slot], and is read only while the owner's bit is set too
 * (the owner also ACKs hot writes: over UDP its copy can be lost while the
 * replicas apply theirs); a redirected GET carries Ver[slot] in VER, and a
 * replica holding a newer write answers ERROR (the client resends). strict=0 is the paper: the
 * owner stays valid and any ACK validates (the stale read of digest §5 is
 * then possible).
 */
#include <stdlib.h>
#include <string.h>

#include "netkv/pipeline.h"
#include "netkv/wire.h"
#include "key128.h"
#include "peg_params.h"

#define KS_MAX_NODES 4096
#define KS_MAX_KEYS 65535
#define KS_MAX_STAGES 8
#define KS_NO_SERVER 0xFFFF

enum ks_stat {
	KS_HOT_GETS = 0,        /* reads of hot keys */
	KS_REDIRECTS,           /* ... sent to a replica other than the owner */
	KS_INVALID_FALLBACK,    /* ... whose chosen replica was invalid: to the owner */
	KS_HOT_WRITES,          /* writes/deletes of hot keys (multicast) */
	KS_COLD,                /* requests of cold keys (HashPipe) */
	KS_ACKS,                /* UPDATE_ACKs that set a Valid bit */
	KS_STALE_ACKS,          /* UPDATE_ACKs refused (old version, cold key) */
	KS_NO_ROUTE,
	KS_HOST_SERVER_OP,      /* a server/controller-only op from a client port: dropped */
	KS_VER_SATURATED,       /* hot writes past Ver = 2^32-1 (not stamped higher) */
	KS_FORGED,              /* client requests with VER or FLAGS set: zeroed */
	KS_NSTATS
};

#define KS_NREGS 13

/* A HashPipe slot: its three registers side by side (one cache line read
 * per stage, not three), and the CRC of its key (hp_crc(0, k0, k1)), so an
 * evicted key carried to the next stage needs no CRC computed again. */
struct hp_cell {
	uint64_t k0, k1;           /* HashPipeKeyHi, HashPipeKeyLo */
	uint32_t count;            /* HashPipeCount */
	uint32_t crc0;
};

struct kvswitch_state {
	uint32_t K, d, w, strict;
	uint32_t n_servers;
	struct nk_trust trust;
	uint16_t *node_port;
	struct nk_k128 tab;        /* HotkeyTable: KEY -> slot (r, owner in slot_r, slot_owner) */
	uint16_t *servermap;       /* [K * NK_MAX_SERVERS]: slot*32 + ordinal-1 -> server */
	uint8_t *slot_r;           /* r of the key in slot (0: free) */
	uint8_t *slot_owner;       /* its owner (the HotkeyTable action's third argument) */
	/* registers */
	uint8_t *rr;               /* RoundRobin[K] */
	uint32_t *valid;           /* Valid[K]: bit `server` of word `slot` */
	uint32_t *ver;             /* Ver[K] */
	uint32_t *hot_count;       /* HotkeyCount[K] */
	uint32_t *load;            /* Loadcount[NK_MAX_SERVERS] */
	struct hp_cell *hp;        /* HashPipeKeyHi / HashPipeKeyLo / HashPipeCount [d * w] */
	uint64_t period_reset;
	uint64_t stats[KS_NSTATS];
	struct nk_reg_desc regs[KS_NREGS];
	unsigned nregs;
	/* bit p: some server's node_fwd entry is port p (nk_origin_of's scan
	 * of every server, done once per node_fwd or n_servers change instead
	 * of per packet) */
	uint64_t server_ports[(NK_NODE_NONE + 1) / 64];
	uint32_t hp_salt[KS_MAX_STAGES];   /* hp_salts() */
	uint64_t w_fastmod;        /* x % w without a division (hp_index) */
};

static void ks_fini(void *st)
{
	struct kvswitch_state *s = st;
	free(s->node_port);
	free(s->tab.e);
	free(s->servermap);
	free(s->slot_r);
	free(s->slot_owner);
	free(s->rr);
	free(s->valid);
	free(s->ver);
	free(s->hot_count);
	free(s->load);
	free(s->hp);
	memset(s, 0, sizeof(*s));
}

static void hp_salts(struct kvswitch_state *s);

static void server_ports_update(struct kvswitch_state *s)
{
	memset(s->server_ports, 0, sizeof(s->server_ports));
	for (uint32_t i = 0; i < s->trust.n_servers && i < KS_MAX_NODES; i++)
		s->server_ports[s->node_port[i] / 64] |= 1ull << (s->node_port[i] % 64);
}

/* nk_origin_of with the server scan replaced by server_ports */
static enum nk_origin ks_origin(const struct kvswitch_state *s, const struct nk_pkt_meta *meta)
{
	if (meta->from_cpu || meta->recirculated)
		return NK_ORIGIN_TRUSTED;
	for (uint32_t i = 0; i < s->trust.n_trusted; i++)
		if (s->trust.trusted[i] == meta->ingress_port)
			return NK_ORIGIN_TRUSTED;
	uint16_t p = meta->ingress_port;
	return s->server_ports[p / 64] >> (p % 64) & 1 ? NK_ORIGIN_SERVER : NK_ORIGIN_CLIENT;
}

/* stride: bytes between cells (the HashPipe cells' fields), 0: an array */
static void add_reg(struct kvswitch_state *s, const char *name, void *base, uint32_t n,
		    uint8_t esize, uint16_t stride, uint8_t bits)
{
	s->regs[s->nregs++] = (struct nk_reg_desc){ name, base, n, esize, bits, stride };
}

static uint32_t hp_crc(uint32_t stage, uint64_t k0, uint64_t k1);

/* Every slot empty, its key zero (and crc0 that key's). */
static void hp_clear(struct kvswitch_state *s)
{
	size_t hp = (size_t)s->d * s->w;
	uint32_t zero = hp_crc(0, 0, 0);
	for (size_t i = 0; i < hp; i++)
		s->hp[i] = (struct hp_cell){ 0, 0, 0, zero };
}

static int ks_init(void *st, const struct nk_pipeline_cfg *cfg)
{
	struct kvswitch_state *s = st;
	memset(s, 0, sizeof(*s));
	uint64_t k, d, w, strict;
	if (nkp_u64(cfg->params, "hot_keys", 10000, &k) ||
	    nkp_u64(cfg->params, "hashpipe_stages", 4, &d) ||
	    nkp_u64(cfg->params, "hashpipe_width", 0, &w) ||
	    nkp_u64(cfg->params, "strict", 1, &strict) ||
	    nkp_trust(cfg->params, cfg->n_servers, &s->trust))
		return NK_PIPE_EINVAL;
	if (!w)
		w = d ? (k + d - 1) / d : 0;   /* K slots in all (digest §3) */
	if (k < 1 || k > KS_MAX_KEYS || d < 1 || d > KS_MAX_STAGES || w < 1 ||
	    w > (1u << 20) || cfg->n_servers > NK_MAX_SERVERS || cfg->n_nodes > KS_MAX_NODES)
		return NK_PIPE_ERANGE;
	s->K = (uint32_t)k;
	s->d = (uint32_t)d;
	s->w = (uint32_t)w;
	s->strict = strict != 0;
	s->n_servers = cfg->n_servers;
	size_t hp = (size_t)s->d * s->w;
	s->node_port = malloc(KS_MAX_NODES * sizeof(uint16_t));
	nk_k128_init(&s->tab, s->K);
	s->servermap = malloc((size_t)s->K * NK_MAX_SERVERS * sizeof(uint16_t));
	s->slot_r = calloc(s->K, 1);
	s->slot_owner = calloc(s->K, 1);
	s->rr = calloc(s->K, 1);
	s->valid = calloc(s->K, sizeof(uint32_t));
	s->ver = calloc(s->K, sizeof(uint32_t));
	s->hot_count = calloc(s->K, sizeof(uint32_t));
	s->load = calloc(NK_MAX_SERVERS, sizeof(uint32_t));
	s->hp = calloc(hp, sizeof(*s->hp));
	if (!s->node_port || !s->tab.e || !s->servermap || !s->slot_r || !s->slot_owner || !s->rr || !s->valid ||
	    !s->ver || !s->hot_count || !s->load || !s->hp) {
		ks_fini(s);
		return NK_PIPE_EFULL;
	}
	for (uint32_t i = 0; i < KS_MAX_NODES; i++)
		s->node_port[i] = i < cfg->n_nodes && cfg->node_port ? cfg->node_port[i]
								      : NK_NODE_NONE;
	for (size_t i = 0; i < (size_t)s->K * NK_MAX_SERVERS; i++)
		s->servermap[i] = KS_NO_SERVER;
	server_ports_update(s);
	hp_salts(s);
	hp_clear(s);
	s->w_fastmod = UINT64_MAX / s->w + 1;
	add_reg(s, "RoundRobin", s->rr, s->K, 1, 0, 8);
	add_reg(s, "Valid", s->valid, s->K, 4, 0, 32);
	add_reg(s, "Ver", s->ver, s->K, 4, 0, 32);
	add_reg(s, "HotkeyCount", s->hot_count, s->K, 4, 0, 32);
	add_reg(s, "Loadcount", s->load, NK_MAX_SERVERS, 4, 0, 32);
	add_reg(s, "HashPipeKeyHi", &s->hp[0].k0, (uint32_t)hp, 8, sizeof(struct hp_cell), 64);
	add_reg(s, "HashPipeKeyLo", &s->hp[0].k1, (uint32_t)hp, 8, sizeof(struct hp_cell), 64);
	add_reg(s, "HashPipeCount", &s->hp[0].count, (uint32_t)hp, 4, sizeof(struct hp_cell), 32);
	add_reg(s, "period_reset", &s->period_reset, 1, 8, 0, 1);
	add_reg(s, "stats", s->stats, KS_NSTATS, 8, 0, 64);
	add_reg(s, "n_servers", &s->trust.n_servers, 1, 4, 0, 8);   /* the trust boundary */
	return 0;
}

/* ---- registers ------------------------------------------------------------- */

static int ks_reg_read(void *st, const char *name, uint32_t idx, uint64_t *val)
{
	struct kvswitch_state *s = st;
	return nk_reg_read_named(s->regs, s->nregs, name, idx, val);
}

static int ks_reg_write(void *st, const char *name, uint32_t idx, uint64_t val)
{
	struct kvswitch_state *s = st;
	const struct nk_reg_desc *r = NULL;
	int rc = nk_reg_write_named(s->regs, s->nregs, name, idx, val, &r);
	if (rc)
		return rc;
	if (r->base == &s->trust.n_servers)
		server_ports_update(s);
	if (r->base == &s->hp[0].k0 || r->base == &s->hp[0].k1)
		s->hp[idx].crc0 = hp_crc(0, s->hp[idx].k0, s->hp[idx].k1);
	if (r->base == &s->period_reset && s->period_reset) {
		/* control action: the per-period statistics start again (digest §4.1) */
		hp_clear(s);
		memset(s->hot_count, 0, s->K * sizeof(uint32_t));
		memset(s->load, 0, NK_MAX_SERVERS * sizeof(uint32_t));
		s->period_reset = 0;
	}
	return 0;
}

/* ---- HotkeyTable: 16 B key -> (r, slot, owner) ------------------------------ */

static int tab_add(struct kvswitch_state *s, const uint64_t *key, const uint64_t *args)
{
	if (args[0] < 1 || args[0] > NK_MAX_SERVERS || args[1] >= s->K || args[2] >= s->n_servers)
		return NK_PIPE_ERANGE;
	const struct nk_k128_ent *old = nk_k128_find(&s->tab, key[0], key[1]);
	if (old && old->val != args[1])
		s->slot_r[old->val] = 0;
	int fresh, rc = nk_k128_put(&s->tab, key[0], key[1], (uint32_t)args[1], &fresh);
	if (!rc) {
		s->slot_r[args[1]] = (uint8_t)args[0];
		s->slot_owner[args[1]] = (uint8_t)args[2];
	}
	return rc;
}

static int ks_table_add(void *st, const char *table, const uint64_t *key, unsigned nkey,
			const uint64_t *args, unsigned nargs)
{
	struct kvswitch_state *s = st;
	if (!strcmp(table, "node_fwd")) {
		if (nkey != 1 || nargs != 1)
			return NK_PIPE_EINVAL;
		if (key[0] >= KS_MAX_NODES || args[0] >= NK_NODE_NONE)
			return NK_PIPE_ERANGE;
		s->node_port[key[0]] = (uint16_t)args[0];
		server_ports_update(s);
		return 0;
	}
	if (!strcmp(table, "HotkeyTable")) {
		if (nkey != 2 || nargs != 3)
			return NK_PIPE_EINVAL;
		return tab_add(s, key, args);
	}
	if (!strcmp(table, "ServermapTable")) {
		if (nkey != 2 || nargs != 1)
			return NK_PIPE_EINVAL;
		if (key[0] >= s->K || key[1] < 1 || key[1] > NK_MAX_SERVERS ||
		    args[0] >= s->n_servers)
			return NK_PIPE_ERANGE;
		s->servermap[key[0] * NK_MAX_SERVERS + key[1] - 1] = (uint16_t)args[0];
		return 0;
	}
	return NK_PIPE_ENOENT;
}

static int ks_table_del(void *st, const char *table, const uint64_t *key, unsigned nkey)
{
	struct kvswitch_state *s = st;
	if (!strcmp(table, "node_fwd")) {
		if (nkey != 1)
			return NK_PIPE_EINVAL;
		if (key[0] >= KS_MAX_NODES)
			return NK_PIPE_ERANGE;
		s->node_port[key[0]] = NK_NODE_NONE;
		server_ports_update(s);
		return 0;
	}
	if (!strcmp(table, "HotkeyTable")) {
		if (nkey != 2)
			return NK_PIPE_EINVAL;
		uint32_t slot;
		int rc = nk_k128_del(&s->tab, key[0], key[1], &slot);
		if (!rc)
			s->slot_r[slot] = 0;
		return rc;
	}
	if (!strcmp(table, "ServermapTable")) {
		if (nkey != 2)
			return NK_PIPE_EINVAL;
		if (key[0] >= s->K || key[1] < 1 || key[1] > NK_MAX_SERVERS)
			return NK_PIPE_ERANGE;
		uint16_t *c = &s->servermap[key[0] * NK_MAX_SERVERS + key[1] - 1];
		if (*c == KS_NO_SERVER)
			return NK_PIPE_ENOENT;
		*c = KS_NO_SERVER;
		return 0;
	}
	return NK_PIPE_ENOENT;
}

/* ---- HashPipe (Sivaraman et al., SOSR'17): cold keys becoming hot ----------- */

/* CRC32 of (per-stage salt, 16 B key) (digest §3: CRC32, distinct salts) */
static uint32_t hp_crc(uint32_t stage, uint64_t k0, uint64_t k1)
{
	/* the bytes (0xA5 ^ stage, k0 and k1 big-endian), as nk_crc32 of them */
	return nk_crc32_b_k128((uint8_t)(0xA5 ^ stage), k0, k1);
}

/* Stage j's CRC is stage 0's XOR a constant: CRC is affine, so for messages
 * of one length crc(x) ^ crc(y) depends on x ^ y only, here the salts. One
 * CRC per carried key instead of one per stage, the same indexes. */
static void hp_salts(struct kvswitch_state *s)
{
	for (uint32_t j = 0; j < KS_MAX_STAGES; j++)
		s->hp_salt[j] = hp_crc(j, 0, 0) ^ hp_crc(0, 0, 0);
}

static uint32_t hp_index(const struct kvswitch_state *s, uint32_t stage, uint32_t crc0)
{
	/* x % w by two multiplications (Lemire's fastmod, exact for 32-bit x
	 * and w >= 1) instead of a division per stage of every cold key */
	uint64_t low = s->w_fastmod * (crc0 ^ s->hp_salt[stage]);
	return stage * s->w + (uint32_t)(((unsigned __int128)low * s->w) >> 64);
}

static void hashpipe(struct kvswitch_state *s, uint64_t k0, uint64_t k1)
{
	/* stage 1 always inserts; later stages keep the larger count */
	uint64_t ck0 = k0, ck1 = k1;
	uint32_t cc = 1, crc0 = hp_crc(0, ck0, ck1);
	for (uint32_t j = 0; j < s->d; j++) {
		struct hp_cell *c = &s->hp[hp_index(s, j, crc0)];
		if (c->count && c->k0 == ck0 && c->k1 == ck1) {
			c->count += cc;
			return;
		}
		if (!c->count) {
			*c = (struct hp_cell){ ck0, ck1, cc, crc0 };
			return;
		}
		if (j == 0 || c->count < cc) {
			struct hp_cell t = *c;
			*c = (struct hp_cell){ ck0, ck1, cc, crc0 };
			ck0 = t.k0;
			ck1 = t.k1;
			cc = t.count;
			crc0 = t.crc0;
			/* the cells the carried key meets next, fetched together
			 * rather than one miss after another (it mostly stays
			 * carried: a later swap needs a smaller count) */
			if (j == 0)
				for (uint32_t k = 1; k < s->d; k++)
					__builtin_prefetch(&s->hp[hp_index(s, k, crc0)]);
		}
	}
	/* whatever is still carried is dropped */
}

/* ---- process ----------------------------------------------------------------- */

static void forward(struct kvswitch_state *s, struct nk_pkt_meta *meta, struct nk_actions *act)
{
	nk_fwd_to_node(s->node_port, KS_MAX_NODES, meta, act);
	if (act->fwd == NK_FWD_DROP)
		s->stats[KS_NO_ROUTE]++;
}

static void count_load(struct kvswitch_state *s, uint32_t server)
{
	if (server < s->n_servers && s->load[server] < 0xFFFFFFFFu)
		s->load[server]++;
}

static void hot_get(struct kvswitch_state *s, uint32_t slot, struct nk_msg *m,
		    struct nk_pkt_meta *meta)
{
	uint32_t r = s->slot_r[slot];
	uint32_t o = s->rr[slot];
	/* digest §3 step 3: write back o + 1, or 1 once o >= r */
	s->rr[slot] = (uint8_t)(o >= r ? 1 : o + 1);
	s->stats[KS_HOT_GETS]++;
	/* a stale cell (0, or > r after a shrink) is a ServermapTable miss: the
	 * read stays at the owner (digest §4 "Update ordering") */
	if (o < 1 || o > r)
		return;
	uint16_t srv = s->servermap[slot * NK_MAX_SERVERS + o - 1];
	uint32_t owner = s->slot_owner[slot];
	if (srv == KS_NO_SERVER || srv == meta->dst)
		return;                        /* ServermapTable miss, or the owner */
	/* strict: a replica is read only once the owner has confirmed the same
	 * write (its copy may have been lost: replicas would be newer) */
	uint32_t need = 1u << srv;
	if (s->strict)
		need |= 1u << owner;
	if ((s->valid[slot] & need) == need) {
		meta->dst = srv;
		s->stats[KS_REDIRECTS]++;
		if (s->strict)
			m->ver = s->ver[slot];   /* the version the replica must not exceed */
	} else {
		s->stats[KS_INVALID_FALLBACK]++;
	}
}

static void hot_write(struct kvswitch_state *s, uint32_t slot, struct nk_msg *m,
		      struct nk_pkt_meta *meta, struct nk_actions *act)
{
	s->stats[KS_HOT_WRITES]++;
	/* the owner is HotkeyTable's, not the address the client chose: a
	 * write sent to a replica still reaches the owner and every copy */
	uint32_t owner = s->slot_owner[slot], r = s->slot_r[slot];
	/* every replica is invalid until it acknowledges this write (packed
	 * Valid: one word per slot); the paper keeps the owner valid (its copy
	 * travels over TCP), strict mode waits for the owner's ACK too */
	s->valid[slot] = s->strict ? 0 : 1u << owner;
	if (s->ver[slot] < 0xFFFFFFFFu)
		s->ver[slot]++;
	else
		s->stats[KS_VER_SATURATED]++;
	m->ver = s->ver[slot];
	/* FLAGS names the owner's copy (its server index + 1): a server that
	 * has not yet heard REPL_CMD still knows to answer the client */
	m->result = (uint8_t)(owner + 1);
	if (r < 2) {
		/* r = 1 (install_below_t: hot below T): the owner only, unicast,
		 * whatever server the client addressed (a replica would store
		 * it as a copy and answer no one, the version used up) */
		meta->dst = (uint16_t)owner;
		count_load(s, meta->dst);
		forward(s, meta, act);
		return;
	}
	/* MultigroupTable: the (owner, r) group; Loadcount counts each copy
	 * (the P4 program counts them at egress) */
	uint32_t members = 0;
	for (uint32_t o = 1; o <= r; o++) {
		uint16_t srv = s->servermap[slot * NK_MAX_SERVERS + o - 1];
		if (srv != KS_NO_SERVER && !(members & (1u << srv))) {
			members |= 1u << srv;
			count_load(s, srv);
		}
	}
	act->fwd = NK_FWD_MCAST;
	act->mcast_group = (uint16_t)nk_kvs_mcast_group(owner, r);
}

/* a client's request; everything else is a reply, a push or a confirm */
static int ks_is_request(uint8_t op)
{
	return op == NK_KVSWITCH_OP_GET || op == NK_KVSWITCH_OP_SET ||
	       op == NK_KVSWITCH_OP_DEL;
}

static void ks_process(void *st, struct nk_msg *m, struct nk_pkt_meta *meta,
		       struct nk_actions *act)
{
	struct kvswitch_state *s = st;
	memset(act, 0, sizeof(*act));
	if (m->proto != NK_PROTO_KVSWITCH) {
		forward(s, meta, act);
		return;
	}
	enum nk_origin from = ks_origin(s, meta);
	int request = ks_is_request(m->op);
	if (from == NK_ORIGIN_CLIENT && !request) {
		/* a forged ACK would validate a stale replica; forged pushes,
		 * updates and replies would plant values or answer others */
		s->stats[KS_HOST_SERVER_OP]++;
		act->fwd = NK_FWD_DROP;
		return;
	}
	if (!request && m->op != NK_KVSWITCH_OP_UPDATE_ACK) {
		forward(s, meta, act);        /* replies and REPL_*: plain forwarding */
		return;
	}
	uint64_t k0, k1;
	nk_k128_words(m, &k0, &k1);
	const struct nk_k128_ent *e = nk_k128_find(&s->tab, k0, k1);
	if (m->op == NK_KVSWITCH_OP_UPDATE_ACK) {
		/* "confirm" from a replica: valid again if it applied the latest
		 * write (strict) or any write (paper); always consumed */
		if (e && meta->src < s->n_servers &&
		    (!s->strict || m->ver == s->ver[e->val])) {
			s->valid[e->val] |= 1u << meta->src;
			s->stats[KS_ACKS]++;
		} else {
			s->stats[KS_STALE_ACKS]++;
		}
		act->fwd = NK_FWD_DROP;
		return;
	}
	if (from == NK_ORIGIN_CLIENT) {
		/* VER and FLAGS are the switch's (docs/security.md): a forged VER
		 * would pass a replica's version check, a forged FLAGS would make
		 * a replica answer the client as if it were the owner */
		if (m->ver || m->result)
			s->stats[KS_FORGED]++;
		m->ver = 0;
		m->result = 0;
	}
	if (!e) {
		s->stats[KS_COLD]++;
		hashpipe(s, k0, k1);
		count_load(s, meta->dst);
		forward(s, meta, act);
		return;
	}
	uint32_t slot = e->val;
	/* the slot's ServermapTable row, wanted after RoundRobin's cell (read
	 * first: its value picks the entry) */
	__builtin_prefetch(&s->servermap[slot * NK_MAX_SERVERS]);
	if (s->hot_count[slot] < 0xFFFFFFFFu)
		s->hot_count[slot]++;
	if (m->op == NK_KVSWITCH_OP_GET) {
		hot_get(s, slot, m, meta);
		count_load(s, meta->dst);
		forward(s, meta, act);
		return;
	}
	hot_write(s, slot, m, meta, act);
}

/* Replies and REPL_* are only forwarded (ks_process): no table, register or
 * RR cell is read or written for them (a client's forged one is dropped and
 * counted: counters commute). */
static int ks_order_free_pkt(const void *st, const struct nk_msg *m)
{
	(void)st;
	return m->proto == NK_PROTO_KVSWITCH && !ks_is_request(m->op) &&
	       m->op != NK_KVSWITCH_OP_UPDATE_ACK;
}

/* A request's HotkeyTable slot: tag, then entry, read by ks_process (two
 * cache misses per request on a 10,000-key table otherwise). */
static void ks_prefetch(const void *st, const struct nk_msg *m)
{
	const struct kvswitch_state *s = st;
	if (m->proto != NK_PROTO_KVSWITCH || !ks_is_request(m->op))
		return;
	uint64_t k0, k1;
	nk_k128_words(m, &k0, &k1);
	uint32_t i = nk_k128_home(&s->tab, k0, k1);
	__builtin_prefetch(&s->tab.tag[i]);
	__builtin_prefetch(&s->tab.e[i]);
}

const struct nk_pipeline_ops nk_pipeline_kvswitch = {
	.name = "kvswitch",
	.proto = NK_PROTO_KVSWITCH,
	.udp_port = NK_KVSWITCH_PORT,
	.udp_ports = 1,
	.state_size = sizeof(struct kvswitch_state),
	.never_to_cpu = 1,
	.order_free_pkt = ks_order_free_pkt,
	.prefetch = ks_prefetch,
	.init = ks_init,
	.fini = ks_fini,
	.process = ks_process,
	.reg_read = ks_reg_read,
	.reg_write = ks_reg_write,
	.table_add = ks_table_add,
	.table_del = ks_table_del,
};
