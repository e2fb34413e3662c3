/*
 * workload.h - keys, placement and popularity: what every netkv client asks for.
 *
 * Keys. Key id i (0 <= i < N) has the bytes nk_key_bytes(i, key_size): the
 *   concatenation of 16-character blocks, block b being the 16 lowercase hex
 *   digits of nk_mix64(i + b * NK_KEY_BLOCK_STEP), cut to key_size bytes
 *   (8..64). Block 0 is a bijection of i, so keys are unique for key_size
 *   >= 16 (8-15 B keys are unique only with high probability). Keys shorter
 *   than 8 B are binary: the big-endian bytes of fmix32(i) << 32 | (low 32
 *   bits of nk_mix64(i)), cut to key_size, so 4-7 B keys are distinct for
 *   i < 2^32 (4 hex digits would give only 65,536 keys). Example:
 *   id 0, 20 B -> "e220a8397b1dcdaf" + the first 4 digits of block 1.
 *   (Blocks differ so that djb2's low bits vary: a repeated block would make
 *   a 64 B key's djb2 constant mod 4.) keyhash = nk_djb2(key bytes)
 *   (Pegasus' djb2 & 0x7FFFFFFF), the hash every layer routes on.
 *
 * Placement. A key's home server is found on a ring over the 2^31 keyhash
 * space:
 *   NK_RING_CONSISTENT   `vnodes` points per server at pseudo-random
 *                        positions nk_mix64(server << 32 | vnode) & 0x7FFFFFFF;
 *                        home = owner of the first point >= keyhash (wrapping).
 *   NK_RING_HASH_MOD     hash mod N: home = nk_mix64(keyhash) mod n. The
 *                        finaliser matters for keys shorter than 8 B: their
 *                        djb2 differs only in the low ~23 bits, so on the
 *                        other rings they all fall on one arc (one or two servers).
 *   NK_RING_EQUAL_RANGES the Pegasus artifact: the space is cut into
 *                        vnodes * n equal ranges, range j -> server j mod n.
 *
 * Popularity. Requests draw a *rank* r (0 = hottest) and look up the rank's
 * key in a `struct nk_rank_info` table; ranks map to keys by a seeded
 * permutation, so hot keys land on random servers. Zipf(alpha) over N keys
 * is sampled exactly with a Vose alias table over p_r ∝ (r+1)^-alpha (any
 * alpha >= 0, O(1) per sample); uniform draws the rank directly; YCSB's
 * scrambled Zipfian (Gray's approximation over 10^10 items + FNV-64 scramble)
 * is offered for comparison with YCSB-based papers (alpha < 1 only).
 *
 * Value sizes. A key's value size is fixed, or drawn once per key from a
 * weighted mix by nk_mix64(keyhash ^ seed) - so every layer that knows the
 * keyhash knows the stored size.
 */
#ifndef NETKV_WORKLOAD_H
#define NETKV_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "netkv/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NK_KEYHASH_SPACE (1ULL << 31)
#define NK_MAX_VALUE_CLASSES 16
#define NK_KEY_BLOCK_STEP 0x632be59bd9b4e019ULL

void nk_key_bytes(uint64_t id, unsigned key_size, uint8_t *out);

/* malloc for big random-access tables: 2 MB aligned, huge pages advised
 * (release with free()). */
void *nk_big_alloc(size_t size);
uint32_t nk_key_hash(uint64_t id, unsigned key_size);

/* ---- placement ---------------------------------------------------------- */

enum nk_ring_mode {
	NK_RING_CONSISTENT = 0,
	NK_RING_EQUAL_RANGES = 1,
	NK_RING_HASH_MOD = 2,
};

struct nk_ring {
	uint32_t n_servers;
	uint32_t vnodes;
	uint32_t mode;
	uint32_t n_points;
	uint32_t *pos;      /* sorted ring positions */
	uint16_t *owner;    /* server of each position */
};

int nk_ring_init(struct nk_ring *r, unsigned n_servers, unsigned vnodes,
		 enum nk_ring_mode mode);
void nk_ring_free(struct nk_ring *r);
unsigned nk_ring_lookup(const struct nk_ring *r, uint32_t keyhash);

/* ---- alias sampler -------------------------------------------------------- */

struct nk_alias_entry {
	uint32_t thresh;    /* keep column i if low 32 bits < thresh */
	uint32_t alias;
};

struct nk_alias {
	uint32_t n;
	struct nk_alias_entry *e;
};

/* Vose's alias method over weights w[0..n) (need not be normalised). */
int nk_alias_init(struct nk_alias *a, const double *w, uint32_t n);
void nk_alias_free(struct nk_alias *a);

static inline uint32_t nk_alias_sample(const struct nk_alias *a, uint64_t u)
{
	uint32_t i = (uint32_t)(((u >> 32) * (uint64_t)a->n) >> 32);
	const struct nk_alias_entry *e = &a->e[i];
	return (uint32_t)u < e->thresh ? i : e->alias;
}

/* ---- the workload --------------------------------------------------------- */

enum nk_wl_kind {
	NK_WL_ZIPF = 0,
	NK_WL_UNIFORM = 1,
	NK_WL_YCSB = 2,
	NK_WL_TRACE = 3,
};

enum nk_dyn_kind {
	NK_DYN_NONE = 0,
	NK_DYN_HOT_IN = 1,   /* the `count` coldest keys jump to the top ranks */
	NK_DYN_RANDOM = 2,   /* `count` keys from the hottest `hot_pool` swap with random keys */
	NK_DYN_SWAP = 3,     /* the `count` hottest and `count` coldest swap popularity */
};

struct nk_workload_cfg {
	uint32_t kind;            /* enum nk_wl_kind */
	uint32_t n_keys;
	double alpha;
	uint64_t seed;            /* permutation, value classes */
	uint32_t key_size;        /* 1..64 */
	uint32_t n_servers;
	uint32_t vnodes;
	uint32_t ring_mode;       /* enum nk_ring_mode */
	uint32_t n_value_classes; /* 1 = fixed size */
	uint32_t value_sizes[NK_MAX_VALUE_CLASSES];
	double value_weights[NK_MAX_VALUE_CLASSES];
	/* trace replay: key ids (and ops: 0 read, 1 write; NULL = use write_ratio) */
	const uint32_t *trace_keys;
	const uint8_t *trace_ops;
	uint64_t trace_len;
};

/* What a request needs to know about the key at one rank. 16 bytes. */
struct nk_rank_info {
	uint32_t key;        /* key id */
	uint32_t keyhash;    /* nk_djb2(key bytes) */
	uint16_t home;       /* home server on the ring */
	uint16_t vclass;     /* value-size class */
	uint32_t value_len;  /* value size in bytes */
};

struct nk_workload {
	struct nk_workload_cfg cfg;
	struct nk_ring ring;
	struct nk_alias alias;       /* zipf only */
	struct nk_rank_info *ranks;  /* rank -> key info (ycsb/trace: key id -> info) */
	double *probs;               /* zipf/uniform: exact probability of each rank */
	/* ycsb (Gray et al.) constants */
	double y_items, y_theta, y_zetan, y_eta, y_alpha, y_half_pow;
	uint32_t *trace_keys;
	uint8_t *trace_ops;
};

/* Build everything (O(N)); NULL on error with a message in err. */
struct nk_workload *nk_workload_new(const struct nk_workload_cfg *cfg, char *err, size_t errlen);
void nk_workload_free(struct nk_workload *wl);

/* the rank table (n_keys entries), for bindings that treat the struct as opaque */
const struct nk_rank_info *nk_workload_rank_table(const struct nk_workload *wl);

/* the alias table (n_keys entries; NULL unless zipf), likewise */
const struct nk_alias_entry *nk_workload_alias_table(const struct nk_workload *wl);

/* The workload nk_workload_new(cfg) would build, from the tables another
 * one built with the same cfg exported (zipf/uniform: rank table, and for
 * zipf the alias table), copied in: a figure's processes build each
 * workload once (netkv/sim/workload_cache.py). NULL on error. */
struct nk_workload *nk_workload_from_tables(const struct nk_workload_cfg *cfg,
					    const struct nk_rank_info *ranks,
					    const struct nk_alias_entry *alias, char *err,
					    size_t errlen);

/* value size of a key, from its keyhash (the store's preloaded size) */
uint32_t nk_workload_value_len(const struct nk_workload *wl, uint32_t keyhash);

/* Draw one rank (index into a rank table) for zipf/uniform/ycsb. Traces
 * are replayed in order by the caller (wl->trace_keys, cyclically). */
uint32_t nk_workload_sample_ycsb(const struct nk_workload *wl, struct nk_rng *rng);

static inline uint32_t nk_workload_sample(const struct nk_workload *wl, struct nk_rng *rng)
{
	switch (wl->cfg.kind) {
	case NK_WL_ZIPF:
		return nk_alias_sample(&wl->alias, nk_rng_next(rng));
	case NK_WL_UNIFORM:
		return (uint32_t)nk_rng_below(rng, wl->cfg.n_keys);
	default:
		return nk_workload_sample_ycsb(wl, rng);
	}
}

/* Popularity change on a rank table (a sim-private copy). */
void nk_dynamics_apply(enum nk_dyn_kind kind, struct nk_rank_info *ranks, uint32_t n,
		       uint32_t count, uint32_t hot_pool, struct nk_rng *rng);

/* YCSB's FNV-1 64-bit hash of a long (8 bytes, low first), as Java abs(). */
uint64_t nk_ycsb_fnv64(uint64_t v);

#ifdef __cplusplus
}
#endif

#endif /* NETKV_WORKLOAD_H */
