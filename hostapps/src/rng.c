/* rng.c - ziggurat tables for exponential variates (netkv/rng.h). */
#include <math.h>

#include "netkv/rng.h"

void nk_zig_exp_init(struct nk_zig_exp *z)
{
	const double m2 = 4294967296.0;
	double de = 7.697117470131487, te = de, ve = 3.949659822581572e-3;
	double q = ve / exp(-de);
	z->k[0] = (uint32_t)((de / q) * m2);
	z->k[1] = 0;
	z->w[0] = q / m2;
	z->w[255] = de / m2;
	z->f[0] = 1.0;
	z->f[255] = exp(-de);
	for (int i = 254; i >= 1; i--) {
		de = -log(ve / de + exp(-de));
		z->k[i + 1] = (uint32_t)((de / te) * m2);
		te = de;
		z->f[i] = exp(-de);
		z->w[i] = de / m2;
	}
}

/* the rejection path, taken ~1.1% of the time */
double nk_zig_exp_tail(const struct nk_zig_exp *z, struct nk_rng *r, uint64_t u)
{
	for (;;) {
		uint32_t i = (uint32_t)(u & 255u), j = (uint32_t)(u >> 32);
		if (j < z->k[i])
			return (double)j * z->w[i];
		if (i == 0)
			return 7.697117470131487 - log(nk_rng_open01(r));
		double x = (double)j * z->w[i];
		if (z->f[i] + nk_rng_double(r) * (z->f[i - 1] - z->f[i]) < exp(-x))
			return x;
		u = nk_rng_next(r);
	}
}
