/*
 * valpat.h - the bytes kvclient writes into a value: its value id (8 B, big
 * endian) then a pattern of that id and each byte's position. A reader that
 * knows where a piece of a value sits (a multi-packet item's fragment) can
 * tell whether the piece holds the written bytes at their place, not only
 * the right id. kvserver's preloaded values are value id 0's pattern.
 */
#ifndef NETKV_VALPAT_H
#define NETKV_VALPAT_H

#include <stdint.h>

#include "netkv/bytes.h"

/* byte `pos` of the value written with id `vid` */
static inline uint8_t nk_valpat_byte(uint64_t vid, uint32_t pos)
{
	if (pos < 8)
		return (uint8_t)(vid >> (56 - 8 * pos));
	/* top byte of a Weyl sequence: no short period, so a piece read from
	 * the wrong offset disagrees */
	return (uint8_t)((vid * 0x9E3779B97F4A7C15ull + pos * 0xBF58476D1CE4E5B9ull) >> 56);
}

static inline void nk_valpat_fill(uint8_t *buf, uint32_t len, uint64_t vid)
{
	for (uint32_t p = 0; p < len; p++)
		buf[p] = nk_valpat_byte(vid, p);
}

/* splitmix64's finaliser: a (position, byte) pair's term, nonlinear so
 * that bytes moved to other positions change the sum */
static inline uint64_t nk_valpat_term(uint32_t pos, uint8_t b)
{
	uint64_t z = ((uint64_t)pos << 8 | b) + 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* An order-free sum over (position, byte) pairs: the sums of a value's
 * pieces add up to the whole value's. */
static inline uint64_t nk_valpat_sum(const uint8_t *b, uint32_t len, uint32_t off)
{
	uint64_t s = 0;
	for (uint32_t i = 0; i < len; i++)
		s += nk_valpat_term(off + i, b[i]);
	return s;
}

/* The sum of the whole value written with id vid, len bytes. */
static inline uint64_t nk_valpat_expected(uint64_t vid, uint32_t len)
{
	uint64_t s = 0;
	for (uint32_t p = 0; p < len; p++)
		s += nk_valpat_term(p, nk_valpat_byte(vid, p));
	return s;
}

#endif /* NETKV_VALPAT_H */
