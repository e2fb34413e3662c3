/*
 * msg.h - the decoded request model every netkv protocol shares.
 *
 * Each protocol has its own wire header (wire.h encodes and decodes it), but
 * all of them decode into one `struct nk_msg`, so the simulator, the software
 * switch and the host programs move the same struct around. The switch
 * pipelines read and edit only the header fields here; values are never
 * materialised in the switch (only their length), as on a real ASIC.
 *
 * Field names follow the papers: `ver` and `rset_bitmap`-style `bitmap`
 * (Pegasus, NetLR seq), `hkey` (StarCache's 128-bit hash), `keyidx`/`srv`
 * (NetMC multiget groups), `frag_idx`/`frag_cnt` (multi-packet values).
 */
#ifndef NETKV_MSG_H
#define NETKV_MSG_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "netkv/constants.h"

#ifdef __cplusplus
extern "C" {
#endif

/* enum nk_proto (which wire format a message uses), NK_MAX_SERVERS,
 * NK_SERVER_NONE: netkv/constants.h, generated from spec/constants.toml. */

/* Protocol-independent operation kind; each codec maps its own op codes
 * onto these (the wire op code itself is kept in `op`). */
enum nk_kind {
	NK_KIND_READ = 0,
	NK_KIND_WRITE = 1,
	NK_KIND_READ_REPLY = 2,
	NK_KIND_WRITE_REPLY = 3,
	NK_KIND_MULTIGET = 4,
	NK_KIND_MULTIGET_REPLY = 5,
	NK_KIND_CONTROL = 6,    /* replication, cache update, fetch, ack ... */
};

#define NK_MAX_MULTIGET_KEYS 32  /* NetMC KEYIDX width W <= 32 */
#define NK_MAX_KEY_LEN 64

struct nk_msg {
	uint8_t proto;          /* enum nk_proto */
	uint8_t op;             /* the protocol's own wire op code */
	uint8_t kind;           /* enum nk_kind, derived from op */
	uint8_t flags;          /* protocol flags (Pegasus BYPASS/MULTI, ...) */
	uint8_t result;         /* reply status: 0 OK, 1 NOT_FOUND, 2 RETRY/ERROR */
	uint8_t server_id;      /* home server (request) or replier (reply) */
	uint16_t client_id;
	uint16_t load;          /* server load telemetry carried in replies */
	uint16_t epoch;         /* switch incarnation (NetLR) */
	uint32_t req_id;        /* client-unique request id (SEQ/ID in papers) */
	uint32_t keyhash;       /* 32-bit key hash or slot id */
	uint64_t hkey[2];       /* 128-bit key hash (StarCache), [0] = high */
	uint64_t ver;           /* version / sequence number stamped by a switch */
	uint32_t bitmap;        /* replica bitmap (1 << server_id) */
	uint64_t send_ns;       /* client's intended send time, echoed */
	/* key and value: keys are real bytes; values only carry their length
	 * in the switch, and their bytes in host programs. */
	uint8_t key_len;
	uint8_t key[NK_MAX_KEY_LEN];
	uint32_t value_len;
	uint8_t frag_idx;       /* multi-packet values: fragment index */
	uint8_t frag_cnt;       /* and count (1 = single packet) */
	/* multi-key requests (NetMC) */
	uint8_t nkeys;          /* keys in the request (or in this group) */
	uint8_t oid;            /* current key group */
	uint8_t startidx;       /* first key of the current group */
	uint8_t clo;            /* 1 = recirculated continuation */
	uint32_t keyidx;        /* group-boundary bitmap, MSB-aligned */
	uint8_t srv[NK_MAX_SERVERS];  /* server id per key group */
	/* Added with wire.h (see docs/wire.md, "nk_msg and the codecs"). */
	/* Value bytes: decode points this into the decoded buffer (valid only
	 * while that buffer lives; NULL when value_len == 0); encode copies
	 * value_len bytes from it, or writes value_len zero bytes if NULL (the
	 * simulator moves lengths, not bytes). */
	const uint8_t *value;
	/* NetMC: KEYLEN (bytes per key slot) and NSLOTS (keys, or key-value
	 * pairs, in this packet); `items` points at the MGET key list or the
	 * MGET_REPLY pair list (items_len bytes; NULL on encode = zeros). */
	uint8_t key_slot_len;
	uint8_t key_slots;
	uint16_t items_len;
	const uint8_t *items;
	/* The embedder's handle of the request this message belongs to (the
	 * simulator: its client slot and serial; 0 = none), never on the wire.
	 * Host logic that answers a request later, while handling another
	 * message (Hermes' stalled reads), copies it into that answer so the
	 * answer reaches the request it is for. */
	uint64_t cookie;
};

/* m zeroed, as memset(m, 0, sizeof *m) but in four pieces: GCC makes one
 * 216 B memset a `rep stos` (27 iterations, counted by callgrind, and its
 * start-up), a 64 B one four vector stores. Once a request. */
typedef char nk_msg_zero_fits[sizeof(struct nk_msg) > 192 && sizeof(struct nk_msg) <= 256 ? 1 : -1];
static inline void nk_msg_zero(struct nk_msg *m)
{
	unsigned char *b = (unsigned char *)m;
	memset(b, 0, 64);
	memset(b + 64, 0, 64);
	memset(b + 128, 0, 64);
	memset(b + 192, 0, sizeof(*m) - 192);
}

#ifdef __cplusplus
}
#endif

#endif /* NETKV_MSG_H */
