/*
 * key128.h - private helper of the NetCache, KVSwitch and StarCache pipelines: an
 * exact-match table on a 16 B key (two big-endian 64-bit words, as the
 * controller writes table keys) and a length byte (NetCache: the key's
 * length, so that a key and the same bytes zero-padded differ; 0 for the
 * others) -> one 32-bit value, open addressing with backward-shift
 * deletion. Capacity is fixed at init (no allocation per packet); `max`
 * entries at most.
 */
#ifndef NETKV_KEY128_H
#define NETKV_KEY128_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/msg.h"
#include "netkv/pipeline.h"

struct nk_k128_ent {
	uint64_t k0, k1;
	uint32_t val;
	uint8_t used;
	uint8_t len;     /* the length byte of the match (in the padding) */
};

struct nk_k128 {
	struct nk_k128_ent *e;
	/* per slot: 0 free, else 16 bits of the key's hash (never 0). A miss
	 * reads only these (2 B a slot: a table of 10,000 keys fits L2), not
	 * the 24 B entries; in the same allocation as e (free(e) frees both). */
	uint16_t *tag;
	uint32_t cap, count, max;
};

/* The first 16 B of m's key (zero-padded) as two big-endian words. */
static inline void nk_k128_words(const struct nk_msg *m, uint64_t *k0, uint64_t *k1)
{
	if (m->key_len >= 16) {
		/* the common case, once per switch pass: two loads, byte-swapped
		 * (little-endian hosts, as workload.c's keys assume) */
		uint64_t a, b;
		memcpy(&a, m->key, 8);
		memcpy(&b, m->key + 8, 8);
		*k0 = __builtin_bswap64(a);
		*k1 = __builtin_bswap64(b);
		return;
	}
	uint8_t b[16] = { 0 };
	memcpy(b, m->key, m->key_len < 16 ? m->key_len : 16);
	*k0 = *k1 = 0;
	for (int i = 0; i < 8; i++) {
		*k0 = *k0 << 8 | b[i];
		*k1 = *k1 << 8 | b[8 + i];
	}
}

static inline int nk_k128_init(struct nk_k128 *t, uint32_t max)
{
	t->cap = 16;
	while (t->cap < 2 * max)
		t->cap <<= 1;
	t->count = 0;
	t->max = max;
	t->e = calloc(t->cap, sizeof(*t->e) + sizeof(*t->tag));
	t->tag = t->e ? (uint16_t *)(t->e + t->cap) : NULL;
	return t->e ? 0 : -1;
}

static inline uint64_t nk_k128_hash(uint64_t k0, uint64_t k1)
{
	return (k0 ^ (k1 * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
}

static inline uint32_t nk_k128_home(const struct nk_k128 *t, uint64_t k0, uint64_t k1)
{
	return (uint32_t)(nk_k128_hash(k0, k1) >> 32) & (t->cap - 1);
}

static inline uint16_t nk_k128_tag(uint64_t k0, uint64_t k1)
{
	return (uint16_t)(nk_k128_hash(k0, k1) >> 8) | 1u;
}

/* The entry of (k0, k1, len), or NULL. The hash leaves len out: entries
 * that differ only in it share a probe sequence. */
static inline struct nk_k128_ent *nk_k128_find_len(const struct nk_k128 *t, uint64_t k0,
						   uint64_t k1, uint8_t len)
{
	uint16_t tag = nk_k128_tag(k0, k1);
	for (uint32_t i = nk_k128_home(t, k0, k1);; i = (i + 1) & (t->cap - 1)) {
		if (!t->tag[i])
			return NULL;
		if (t->tag[i] == tag && t->e[i].k0 == k0 && t->e[i].k1 == k1 && t->e[i].len == len)
			return &t->e[i];
	}
}

static inline struct nk_k128_ent *nk_k128_find(const struct nk_k128 *t, uint64_t k0, uint64_t k1)
{
	return nk_k128_find_len(t, k0, k1, 0);
}

/* Insert or modify; *fresh = 1 if inserted. NK_PIPE_EFULL past `max`. */
static inline int nk_k128_put_len(struct nk_k128 *t, uint64_t k0, uint64_t k1, uint8_t len,
				  uint32_t val, int *fresh)
{
	uint32_t i = nk_k128_home(t, k0, k1);
	for (; t->e[i].used; i = (i + 1) & (t->cap - 1)) {
		if (t->e[i].k0 == k0 && t->e[i].k1 == k1 && t->e[i].len == len) {
			t->e[i].val = val;
			*fresh = 0;
			return 0;
		}
	}
	if (t->count >= t->max)
		return NK_PIPE_EFULL;
	t->e[i] = (struct nk_k128_ent){ k0, k1, val, 1, len };
	t->tag[i] = nk_k128_tag(k0, k1);
	t->count++;
	*fresh = 1;
	return 0;
}

static inline int nk_k128_put(struct nk_k128 *t, uint64_t k0, uint64_t k1, uint32_t val, int *fresh)
{
	return nk_k128_put_len(t, k0, k1, 0, val, fresh);
}

/* Delete; *val = the entry's value. NK_PIPE_ENOENT if absent. */
static inline int nk_k128_del_len(struct nk_k128 *t, uint64_t k0, uint64_t k1, uint8_t len,
				  uint32_t *val)
{
	uint32_t mask = t->cap - 1, i = nk_k128_home(t, k0, k1);
	while (t->e[i].used && !(t->e[i].k0 == k0 && t->e[i].k1 == k1 && t->e[i].len == len))
		i = (i + 1) & mask;
	if (!t->e[i].used)
		return NK_PIPE_ENOENT;
	*val = t->e[i].val;
	t->e[i].used = 0;
	t->tag[i] = 0;
	t->count--;
	for (uint32_t j = (i + 1) & mask; t->e[j].used; j = (j + 1) & mask) {
		uint32_t h = nk_k128_home(t, t->e[j].k0, t->e[j].k1);
		int move = i <= j ? (h <= i || h > j) : (h <= i && h > j);
		if (move) {
			t->e[i] = t->e[j];
			t->tag[i] = t->tag[j];
			t->e[j].used = 0;
			t->tag[j] = 0;
			i = j;
		}
	}
	return 0;
}

static inline int nk_k128_del(struct nk_k128 *t, uint64_t k0, uint64_t k1, uint32_t *val)
{
	return nk_k128_del_len(t, k0, k1, 0, val);
}

#endif /* NETKV_KEY128_H */
