/*
 * bytes.h - network byte order loads and stores, shared by the wire codecs,
 * the frame parser and the host programs.
 */
#ifndef NETKV_BYTES_H
#define NETKV_BYTES_H

#include <stdint.h>

static inline uint16_t nk_get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t nk_get32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
	       (uint32_t)p[3];
}

static inline uint64_t nk_get64(const uint8_t *p)
{
	return ((uint64_t)nk_get32(p) << 32) | nk_get32(p + 4);
}

static inline void nk_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void nk_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void nk_put64(uint8_t *p, uint64_t v)
{
	nk_put32(p, (uint32_t)(v >> 32));
	nk_put32(p + 4, (uint32_t)v);
}

#endif /* NETKV_BYTES_H */
