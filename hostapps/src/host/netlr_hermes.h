/*
 * netlr_hermes.h - the Hermes baseline of NetLR (replication=hermes,
 * docs/netlr.md): its replica state, kept inside NetLR's server state.
 */
#ifndef NETKV_NETLR_HERMES_H
#define NETKV_NETLR_HERMES_H

#include <stdint.h>

#include "netkv/host.h"
#include "netkv/wire.h"

#define HM_KEY_BITS 14
#define HM_KEYS (1u << HM_KEY_BITS)  /* keys not Valid at one replica */
#define HM_KEYS_MAX (HM_KEYS / 4 * 3) /* kept below: linear probing stays short */
#define HM_STALLS 1024               /* requests stalled on keys not Valid */

/* A key with a write in flight at this replica (absent = Valid, no write
 * of ours in flight). */
struct hm_key {
	uint32_t oid;           /* 0 = free cell */
	uint32_t ts;            /* newest timestamp seen: version << 8 | coordinator */
	uint32_t own_ts;        /* this replica's write (pending), else 0 */
	uint32_t acks;          /* replicas that acked own_ts (bit per id) */
	uint32_t req_id;        /* its client's request */
	uint16_t client;        /* its client's node */
	uint8_t invalid;        /* 1 until the VAL of ts (or our own commit) */
	uint8_t pending;        /* 1 while own_ts collects acks */
};

/* A client request stalled on a key that is not Valid (the fields its
 * answer needs). */
struct hm_stall {
	uint64_t send_ns, cookie;
	uint32_t oid, keyhash, req_id;
	uint16_t src, client_id;
	uint8_t op, used;
	uint8_t has_value;      /* a write: its value bytes are kept (real packets) */
	uint8_t value[NK_NETLR_VALUE_LEN];
};

struct hm_state {
	uint32_t id, n;
	uint32_t keys;                  /* cells in use */
	uint32_t head, tail;            /* stall ring: [head, tail) */
	uint8_t ready;                  /* a key turned Valid: drain the stalls */
	uint64_t stalled, full, stale_acks, writes, commits;
	uint64_t started;                /* stalled writes started once their key was Valid */
	/* the bytes of the stalled reads one call answers: a stalled write the
	 * same call starts may overwrite them in the store before they are sent */
	uint32_t nrval;
	uint8_t rval[NK_HOST_MAX_OUT][NK_NETLR_VALUE_LEN];
	struct hm_key key[HM_KEYS];
	struct hm_stall stall[HM_STALLS];
};

/* NetLR's message from `in` with op, seq and destination: a reply or
 * copy built by replica `id` (value bytes filled by the embedder) */
void nl_out(uint32_t id, const struct nk_msg *in, struct nk_host_out *o, uint8_t op,
	    uint64_t ver, uint16_t dst);
void hm_init(struct hm_state *h, uint32_t id, uint32_t n_servers);
int hm_handle(struct hm_state *h, struct nk_store *store, const struct nk_msg *in, uint16_t src,
	      struct nk_host_out *out, int max_out);

#endif /* NETKV_NETLR_HERMES_H */
