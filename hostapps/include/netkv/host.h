/*
 * host.h - a protocol's host logic, written once in C: the server's store
 * rules and the client's request building / reply matching. kvserver,
 * kvclient and the simulator all call these, so the simulated hosts run the
 * code the real ones do.
 *
 * Server: `server_handle(state, store, in, src, out, max_out)` consumes one
 * decoded message and writes up to max_out messages to send, each with a
 * destination node (NK_DST_SRC = back to the sender, the usual reply; or a
 * node id, e.g. Pegasus' RC_REQ to another server). The store is the
 * embedder's (kvserver: a real hash table with values; the simulator: a
 * preloaded store holding versions and value lengths only), reached through
 * `struct nk_store`.
 *
 * Client: `client_request` fills a request from a `struct nk_req_spec` (the
 * key, its keyhash and home server come from the workload) and returns the
 * node to address; `client_reply` says whether a reply completes the request
 * (NK_REPLY_DONE), asks for a retry (NK_REPLY_RETRY, e.g. Pegasus' RETRY
 * result), or is to be ignored. Duplicate suppression by req_id is the
 * embedder's job (it owns the outstanding-request table).
 *
 * Node numbering as in pipeline.h: servers 0..S-1, clients S..S+M-1.
 */
#ifndef NETKV_HOST_H
#define NETKV_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "netkv/msg.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NK_DST_SRC 0xFFFE
#define NK_HOST_MAX_OUT (NK_MAX_SERVERS + 1)
/* An application multiget asks for at most this many keys; the host logic
 * turns it into as many packets as its wire format needs (at most one per
 * key). */
#define NK_MAX_REQ_KEYS 64
#define NK_HOST_MAX_REQ_OUT NK_MAX_REQ_KEYS

struct nk_store_ops {
	/* 0: found, *ver and *value_len set; 1: not found */
	int (*get)(void *impl, const struct nk_msg *req, uint64_t *ver, uint32_t *value_len);
	/* store (ver, value_len) under req's key; 0 on success */
	int (*put)(void *impl, const struct nk_msg *req, uint64_t ver, uint32_t value_len);
	/* Optional (NULL: the store keeps lengths only, as the simulator's):
	 * the bytes of req's key's value (value_len of them, as get gives),
	 * valid until the next store call; NULL if not found. Host logic that
	 * answers a key other than the request's own (a multiget's pairs)
	 * copies them from here. */
	const uint8_t *(*value)(void *impl, const struct nk_msg *req, uint32_t *value_len);
};

struct nk_store {
	const struct nk_store_ops *ops;
	void *impl;
};

struct nk_host_out {
	struct nk_msg msg;
	uint16_t dst;           /* node id, or NK_DST_SRC */
	/* where msg's value bytes start in the stored value, when the embedder
	 * fills them (msg.value NULL): a multi-packet item's later fragments.
	 * The embedder zeroes it before each server_handle, so host logic that
	 * sends whole values never sets it. */
	uint32_t value_off;
	/* 1: msg.value holds bytes the host logic copied when it built the
	 * reply, because a later message of the same call changes the store
	 * (Hermes: a stalled read answered, then a stalled write to its key
	 * started). The embedder sends them as they are instead of the store's
	 * bytes at send time. Zeroed with value_off. */
	uint8_t own_value;
};

struct nk_host_cfg {
	uint32_t n_servers;
	uint32_t n_clients;
	uint32_t id;            /* server id (0..S-1), client id (0..M-1) or coordinator id */
	uint64_t seed;
	const char *params;     /* protocol knobs, "key=value;..." (may be NULL) */
	uint32_t n_coords;      /* coordinator hosts, nodes S+M..S+M+n_coords-1 (usually 0) */
};

/* One key of a multi-key request, as the workload knows it. */
struct nk_req_key {
	const uint8_t *key;     /* key_len bytes (spec->key_len) */
	uint32_t keyhash;
	uint32_t value_len;     /* its stored value size */
	uint16_t home;          /* home server */
};

struct nk_req_spec {
	uint8_t kind;           /* NK_KIND_READ, NK_KIND_WRITE or NK_KIND_MULTIGET */
	uint8_t key_len;
	uint16_t client_id;
	uint16_t home;          /* home server of the key */
	uint32_t req_id;
	uint32_t keyhash;
	uint32_t value_len;     /* bytes written (writes) */
	uint64_t send_ns;       /* intended send time, echoed by the server */
	const uint8_t *key;
	/* NK_KIND_MULTIGET: nkeys distinct keys (the fields above hold the
	 * first); the request is done when every key's value is in */
	uint8_t nkeys;
	const struct nk_req_key *keys;
	/* scratch the request's packets may point into (a key list in `items`):
	 * buf_len >= nkeys * key_len, kept by the embedder until the request
	 * completes or is given up */
	uint8_t *buf;
	uint32_t buf_len;
};

enum nk_reply_verdict {
	NK_REPLY_DONE = 0,
	NK_REPLY_RETRY = 1,
	NK_REPLY_IGNORE = 2,
};

struct nk_host_ops {
	const char *name;       /* = protocol name */
	uint8_t proto;          /* enum nk_proto */
	uint16_t udp_port;      /* the UDP port its hosts listen on */
	size_t server_state_size;
	size_t client_state_size;
	int (*server_init)(void *st, const struct nk_host_cfg *cfg);
	void (*server_fini)(void *st);
	int (*server_handle)(void *st, struct nk_store *store, const struct nk_msg *in,
			     uint16_t src, struct nk_host_out *out, int max_out);
	int (*client_init)(void *st, const struct nk_host_cfg *cfg);
	void (*client_fini)(void *st);
	uint16_t (*client_request)(void *st, const struct nk_req_spec *spec, struct nk_msg *out);
	int (*client_reply)(void *st, const struct nk_msg *reply);
	/* Optional (NULL: reply->req_id): the embedder's request id a reply
	 * answers, for wire formats whose ID says more (NetMC's packet index). */
	uint32_t (*reply_req_id)(const struct nk_msg *reply);
	/* 1 if the wire format carries no client id: a reply is this client's
	 * when it reached the client's address from a trusted source with one of
	 * its request ids (kvclient skips the client-id check). */
	uint8_t no_client_id;
	/* Optional (NULL: the protocol has no multi-key requests): turn a
	 * NK_KIND_MULTIGET spec into the packets the client sends, in sending
	 * order, each with the node it is addressed to (out[i].dst). Returns how
	 * many (1..max_out), or 0 if it cannot. Called again with the same
	 * req_id for a resend. client_reply answers NK_REPLY_DONE only once
	 * every key's reply is in (all or nothing), NK_REPLY_IGNORE before. */
	int (*client_multiget)(void *st, const struct nk_req_spec *spec, struct nk_host_out *out,
			       int max_out);
	/* Optional (NULL: every request is one packet): the packets request
	 * `req` (as client_request built it, addressed to dst) is sent as, in
	 * sending order, when its wire format carries a large value in several
	 * (StarCache's multi-packet writes). Each out[i] has its dst and
	 * value_off: where its value bytes start in the written value (the
	 * embedder fills them when msg.value is NULL, as for a server's
	 * replies). Returns how many (1: req as it is), 0 if it cannot. Called
	 * again for a resend; client_reply judges the replies as for one. */
	int (*client_split)(void *st, const struct nk_msg *req, uint16_t dst,
			    struct nk_host_out *out, int max_out);
	/* Optional (NULL: none): a coordinator host, a CPU node in the rack
	 * that clients send requests to and that talks to the servers for them
	 * (CoordiMC). It handles one message from a client or a server and
	 * writes the messages to send (out[i].dst: a node, or NK_DST_SRC). */
	size_t coord_state_size;
	int (*coord_init)(void *st, const struct nk_host_cfg *cfg);
	void (*coord_fini)(void *st);
	int (*coord_handle)(void *st, const struct nk_msg *in, uint16_t src, struct nk_host_out *out,
			    int max_out);
	/* Optional: a text command from the controller (e.g. Pegasus' rkey_add,
	 * gc), answered "ok ..." or "err ..." in out. NULL if the protocol has none. */
	int (*server_ctl)(void *st, struct nk_store *store, int argc, char **argv, char *out,
			  size_t cap);
	/* Optional: one message of a hostile client (docs/security.md,
	 * topology.hostile_clients): well-formed but wrong traffic that this
	 * protocol's switch and servers must refuse or neutralise - forged
	 * versions and flags, server-only ops, replays, spoofed replies,
	 * oversized values. Built from `sp`, an ordinary request of the hostile
	 * client; `draw` (random) picks the kind; `victim` is an honest client
	 * (its id; its node is n_servers + id) to spoof. Returns the node to
	 * address. NULL: the protocol has no hostile traffic. */
	uint16_t (*client_hostile)(void *st, uint64_t draw, const struct nk_req_spec *sp,
				   uint16_t victim, uint32_t n_servers, struct nk_msg *out);
	/* Optional (NULL: the workload's key bytes as they are): the key this
	 * protocol's messages carry for a workload key (NetLR: its 4 B object
	 * id), so that a server preloads every key under the name requests for
	 * it will use. Writes at most NK_MAX_KEY_LEN bytes to out (which may
	 * be key); returns their length. */
	uint8_t (*wire_key)(const uint8_t *key, uint8_t key_len, uint8_t *out);
	/* Optional (NULL: the first 8 bytes of the reply's value): the value id
	 * (netkv/valpat.h) of the value a read completed by `reply` returned,
	 * for host logic that reassembles a value from several replies;
	 * NK_VALUE_CORRUPT if the bytes are not those of the value with that
	 * id, each at its place. Valid right after client_reply said DONE. */
	uint64_t (*read_value_id)(void *st, const struct nk_msg *reply);
	/* 0, or the most leading bytes of spec->key client_request reads (at
	 * least 8; KVSwitch: its 16 B wire key): the simulator then makes
	 * only those of a workload key, not all key_size of them. */
	uint8_t client_key_bytes;
};

#define NK_VALUE_CORRUPT UINT64_MAX

/* The version a server gives a write it orders itself (nothing stamped
 * it): stored + 1, 1 for a new key. It saturates at 2^64-1 rather than wrap
 * to a version older than the stored one: a wrapped write would be judged
 * stale, acknowledged and discarded (docs/security.md). */
static inline uint64_t nk_ver_after(int found, uint64_t stored)
{
	if (!found)
		return 1;
	return stored == UINT64_MAX ? stored : stored + 1;
}

/* Host logic registered under `name` (the protocol name), or NULL. */
const struct nk_host_ops *nk_host_find(const char *name);
/* 1 if `name`'s host logic has hostile traffic (client_hostile), else 0:
 * lets a config layer refuse topology.hostile_clients before a run. */
int nk_host_has_hostile(const char *name);
/* 1 if kvclient matches `name`'s replies by their CLIENT_ID (the host
 * logic does not set no_client_id), else 0: tests hold it to the wire. */
int nk_host_checks_client_id(const char *name);

/* The static-hashing baseline's hosts (host/hash.c). */
extern const struct nk_host_ops nk_host_hash;

#ifdef __cplusplus
}
#endif

#endif /* NETKV_HOST_H */
