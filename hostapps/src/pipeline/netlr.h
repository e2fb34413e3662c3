/*
 * netlr.h - the NetLR switch's state (pipeline/netlr.c), shared with its
 * Harmonia variant (pipeline/netlr_harmonia.c, replication=harmonia):
 * one state, one register table, the same round-robin and routing.
 */
#ifndef NETKV_PIPELINE_NETLR_H
#define NETKV_PIPELINE_NETLR_H

#include <stdint.h>

#include "netkv/pipeline.h"
#include "netkv/wire.h"

#define NETLR_MAX_NODES 4096
#define NETLR_MAX_REPLICAS 8
#define NETLR_MAX_SLOTS (1u << 20)
#define NETLR_GROUP 1
#define NETLR_NO_REPLICA 0xFF

enum netlr_stat {
	NL_READS = 0,         /* client READs routed */
	NL_DIRTY_READS,       /* ... of a dirty key, sent to CRep */
	NL_WRITES,            /* client WRITEs multicast */
	NL_COLLISIONS,        /* WRITEs whose slot held another key: dropped (or NACKed) */
	NL_ACKS,              /* W_REPLYs counted */
	NL_STALE_ACKS,        /* W_REPLYs dropped: clean key, older seq, other epoch */
	NL_COMMITS,           /* W_REPLYs forwarded to the client as the commit */
	NL_SUPERSEDED,        /* older writes' acks forwarded flagged SUPERSEDED */
	NL_NO_REPLICA,        /* requests dropped: no live replica */
	NL_BAD_OID,           /* requests for the reserved oid 0: dropped */
	NL_HOST_SERVER_OP,    /* replies/NACKs from a client port: dropped */
	NL_NO_ROUTE,
	NL_FORGED_FIELDS,     /* client requests carrying seq, flags or epoch: cleared */
	NL_DUP_WRITES,        /* strict: a client WRITE whose req_id was stamped already: dropped */
	NL_OLD_WRITES,        /* strict: ... too old for its client's window to tell: dropped */
	NL_NSTATS
};

#define NL_NREGS 16
#define NETLR_REQ_WINDOW 64   /* req_ids a client's ReqWin remembers below ReqMax */
#define NETLR_PORTS 4096      /* ReqMax/ReqWin cells: ingress ports 0..4095 */

struct netlr_state {
	uint32_t slots, strict, ack_superseded, stamp, collision_nack, chain, harmonia, dedup;
	uint32_t n_servers, n_nodes;
	struct nk_trust trust;
	uint16_t node_port[NETLR_MAX_NODES];
	/* per slot */
	uint32_t *dset, *lseq, *maxseq;
	uint8_t *crep, *numcrep, *ackmask;
	/* global */
	uint32_t seq;
	uint8_t num_replica, dst_rep_idx, live_mask, pin;
	uint16_t epoch;
	uint8_t rr[NETLR_MAX_REPLICAS];    /* get_dst_rep_table */
	/* per ingress port (strict, dedup): the highest WRITE req_id stamped and
	 * which of the NETLR_REQ_WINDOW below it were (bit i: ReqMax - i) */
	uint32_t req_max[NETLR_PORTS];       /* ReqMax */
	uint64_t req_win[NETLR_PORTS];       /* ReqWin */
	uint64_t stats[NL_NSTATS];
	struct nk_reg_desc regs[NL_NREGS];
	unsigned nregs;
};

/* helpers of netlr.c the Harmonia variant routes with */
void nl_forward(struct netlr_state *s, struct nk_pkt_meta *meta, struct nk_actions *act);
uint32_t nl_round_robin(struct netlr_state *s);
void nl_route_to(struct netlr_state *s, uint32_t rep, struct nk_pkt_meta *meta,
		 struct nk_actions *act);
void nl_collided(struct netlr_state *s, struct nk_msg *m, struct nk_pkt_meta *meta,
		 struct nk_actions *act);

/* replication=harmonia (netlr_harmonia.c): a client's READ or WRITE, or a
 * replica's W_REPLY; everything else is forwarded by destination */
void nl_harmonia(struct netlr_state *s, struct nk_msg *m, uint32_t id, uint32_t oid,
		 int from_client, struct nk_pkt_meta *meta, struct nk_actions *act);

#endif
