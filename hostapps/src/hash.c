/*
 * hash.c - the key hashes every netkv layer shares (client, server,
 * simulator, controller, P4 control plane): djb2 for Pegasus keyhash,
 * MurmurHash3_x64_128 for StarCache HKEY, CRC-32 for NetLR slots and NetMC
 * key placement. netkv/wire/codec.py has the same functions in Python and
 * tests/test_wire.py checks they agree.
 */

#include "netkv/wire.h"
#include "crc32_tables.h"

uint32_t nk_djb2(const uint8_t *key, size_t len)
{
	uint32_t h = 5381;
	for (size_t i = 0; i < len; i++)
		h = h * 33u + key[i];   /* the artifact's djb2, wrapping at 32 bits */
	return h & 0x7FFFFFFFu;     /* the artifact keeps 31 bits */
}

/* ---- MurmurHash3_x64_128, after Austin Appleby's public-domain reference.
 * Blocks are read as little-endian regardless of the host, so the result is
 * the same everywhere (the reference reads native words). */

static inline uint64_t rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t fmix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	k ^= k >> 33;
	return k;
}

static inline uint64_t load_le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

void nk_murmur3_128(const void *key, size_t len, uint32_t seed, uint64_t out[2])
{
	const uint8_t *data = key;
	const size_t nblocks = len / 16;
	const uint64_t c1 = 0x87c37b91114253d5ULL;
	const uint64_t c2 = 0x4cf5ad432745937fULL;
	uint64_t h1 = seed, h2 = seed;

	for (size_t i = 0; i < nblocks; i++) {
		uint64_t k1 = load_le64(data + i * 16);
		uint64_t k2 = load_le64(data + i * 16 + 8);

		k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
		h1 = rotl64(h1, 27); h1 += h2; h1 = h1 * 5 + 0x52dce729;
		k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2;
		h2 = rotl64(h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495ab5;
	}

	const uint8_t *tail = data + nblocks * 16;
	uint64_t k1 = 0, k2 = 0;
	switch (len & 15) {
	case 15: k2 ^= (uint64_t)tail[14] << 48; /* fall through */
	case 14: k2 ^= (uint64_t)tail[13] << 40; /* fall through */
	case 13: k2 ^= (uint64_t)tail[12] << 32; /* fall through */
	case 12: k2 ^= (uint64_t)tail[11] << 24; /* fall through */
	case 11: k2 ^= (uint64_t)tail[10] << 16; /* fall through */
	case 10: k2 ^= (uint64_t)tail[9] << 8;   /* fall through */
	case 9:
		k2 ^= (uint64_t)tail[8];
		k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2;
		/* fall through */
	case 8: k1 ^= (uint64_t)tail[7] << 56;   /* fall through */
	case 7: k1 ^= (uint64_t)tail[6] << 48;   /* fall through */
	case 6: k1 ^= (uint64_t)tail[5] << 40;   /* fall through */
	case 5: k1 ^= (uint64_t)tail[4] << 32;   /* fall through */
	case 4: k1 ^= (uint64_t)tail[3] << 24;   /* fall through */
	case 3: k1 ^= (uint64_t)tail[2] << 16;   /* fall through */
	case 2: k1 ^= (uint64_t)tail[1] << 8;    /* fall through */
	case 1:
		k1 ^= (uint64_t)tail[0];
		k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
		break;
	default:
		break;
	}

	h1 ^= (uint64_t)len;
	h2 ^= (uint64_t)len;
	h1 += h2;
	h2 += h1;
	h1 = fmix64(h1);
	h2 = fmix64(h2);
	h1 += h2;
	h2 += h1;
	out[0] = h1;
	out[1] = h2;
}

void nk_starcache_hkey(const uint8_t *key, size_t len, uint64_t hkey[2])
{
	uint64_t h[2];
	nk_murmur3_128(key, len, 0, h);
	hkey[0] = h[1];   /* mmh3.hash128's integer is h2 << 64 | h1 */
	hkey[1] = h[0];
}

/* ---- CRC-32 (IEEE, reflected), slicing-by-8: eight bytes per step with
 * eight table lookups, then byte-wise for the tail; the same values as the
 * byte-wise loop (tests/test_wire.py checks against zlib). Every request
 * hashes its 16 B key at least once (KVSwitch's server store, HashPipe). */

/* One step: eight bytes of input, w holding them as a little-endian load of
 * the buffer would (its lowest byte first). */
static inline uint32_t crc32_word(uint32_t c, uint64_t w)
{
	const uint32_t (*t)[256] = crc32_tables;
	uint32_t lo = c ^ (uint32_t)w, hi = (uint32_t)(w >> 32);
	return t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^
	       t[4][lo >> 24] ^ t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^
	       t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
}

uint32_t nk_crc32(const uint8_t *buf, size_t len)
{
	uint32_t c = 0xFFFFFFFFu;
	for (; len >= 8; buf += 8, len -= 8)
		c = crc32_word(c, (uint64_t)buf[0] | (uint64_t)buf[1] << 8 | (uint64_t)buf[2] << 16 |
				      (uint64_t)buf[3] << 24 | (uint64_t)buf[4] << 32 |
				      (uint64_t)buf[5] << 40 | (uint64_t)buf[6] << 48 |
				      (uint64_t)buf[7] << 56);
	while (len--)
		c = crc32_tables[0][(c ^ *buf++) & 0xFF] ^ (c >> 8);
	return c ^ 0xFFFFFFFFu;
}

uint32_t nk_crc32_b_k128(uint8_t b0, uint64_t k0, uint64_t k1)
{
	/* the same bytes in the same order as nk_crc32 of the buffer: b0 alone,
	 * then each key word (big-endian in the buffer: byte-swapped here) */
	uint32_t c = crc32_tables[0][0xFFu ^ b0] ^ 0x00FFFFFFu;
	c = crc32_word(c, __builtin_bswap64(k0));
	c = crc32_word(c, __builtin_bswap64(k1));
	return c ^ 0xFFFFFFFFu;
}

uint32_t nk_netlr_slot(uint32_t oid, uint32_t slots)
{
	const uint8_t be[4] = {
		(uint8_t)(oid >> 24), (uint8_t)(oid >> 16),
		(uint8_t)(oid >> 8), (uint8_t)oid,
	};
	return nk_crc32(be, sizeof be) & (slots - 1u);
}
