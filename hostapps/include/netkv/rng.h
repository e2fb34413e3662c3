/*
 * rng.h - the random streams every netkv component draws from.
 *
 * xoshiro256** (Blackman & Vigna) seeded through splitmix64 from
 * (run seed, stream id): every consumer owns its own `struct nk_rng`, so there
 * is no global state and two runs with the same seed draw the same numbers.
 * Header-only: the simulator calls these on its per-event path.
 */
#ifndef NETKV_RNG_H
#define NETKV_RNG_H

#include <math.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nk_rng {
	uint64_t s[4];
};

/* splitmix64 finaliser: a bijection on 64-bit integers (so distinct inputs
 * give distinct outputs), used for key bytes, ring positions and seeding. */
static inline uint64_t nk_mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline void nk_rng_seed(struct nk_rng *r, uint64_t seed, uint64_t stream)
{
	uint64_t x = nk_mix64(seed) ^ nk_mix64(stream * 0xd1342543de82ef95ULL + 1);
	for (int i = 0; i < 4; i++) {
		x += 0x9e3779b97f4a7c15ULL;
		r->s[i] = nk_mix64(x);
	}
	if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3]))
		r->s[0] = 1;
}

static inline uint64_t nk_rotl64(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* xoshiro256** */
static inline uint64_t nk_rng_next(struct nk_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = nk_rotl64(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = nk_rotl64(s[3], 45);
	return result;
}

/* uniform in [0, 1) with 53 random bits */
static inline double nk_rng_double(struct nk_rng *r)
{
	return (double)(nk_rng_next(r) >> 11) * 0x1.0p-53;
}

/* uniform in (0, 1): never 0, safe for log() */
static inline double nk_rng_open01(struct nk_rng *r)
{
	return ((double)(nk_rng_next(r) >> 11) + 0.5) * 0x1.0p-53;
}

/* uniform integer in [0, n) (Lemire's multiply; bias < n / 2^64) */
static inline uint64_t nk_rng_below(struct nk_rng *r, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)nk_rng_next(r) * n) >> 64);
}

static inline double nk_rng_exp(struct nk_rng *r, double mean)
{
	return -mean * log(nk_rng_open01(r));
}

/* standard normal (Box-Muller, one value per call) */
static inline double nk_rng_normal(struct nk_rng *r)
{
	double u1 = nk_rng_open01(r), u2 = nk_rng_double(r);
	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Exponential variates by Marsaglia & Tsang's ziggurat (256 layers): exact
 * in distribution, ~4x faster than -log(u). Layer from the low 8 bits, the
 * abscissa from the high 32 bits of one 64-bit draw (independent bits).
 * The tables are per-owner (no global state): nk_zig_exp_init() fills them. */
struct nk_zig_exp {
	uint32_t k[256];
	double w[256];
	double f[256];
};

void nk_zig_exp_init(struct nk_zig_exp *z);
double nk_zig_exp_tail(const struct nk_zig_exp *z, struct nk_rng *r, uint64_t u);

/* one Exp(1) variate */
static inline double nk_zig_exp1(const struct nk_zig_exp *z, struct nk_rng *r)
{
	uint64_t u = nk_rng_next(r);
	uint32_t i = (uint32_t)(u & 255u), j = (uint32_t)(u >> 32);
	if (j < z->k[i])
		return (double)j * z->w[i];
	return nk_zig_exp_tail(z, r, u);
}

#ifdef __cplusplus
}
#endif

#endif /* NETKV_RNG_H */
