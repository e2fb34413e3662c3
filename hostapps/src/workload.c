/* workload.c - key bytes, ring placement, alias sampler, popularity tables
 * (the model is described in netkv/workload.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "netkv/wire.h"
#include "netkv/workload.h"

void *nk_big_alloc(size_t size)
{
	void *p = NULL;
	size_t align = 1u << 21;
	if (size < align)
		return malloc(size ? size : 1);
	size = (size + align - 1) & ~(align - 1);
	if (posix_memalign(&p, align, size))
		return NULL;
#ifdef MADV_HUGEPAGE
	/* random lookups into multi-MB tables: huge pages spare a TLB miss */
	madvise(p, size, MADV_HUGEPAGE);
#endif
	return p;
}

/* 8 lowercase hex digits of a 32-bit value, most significant first (SWAR) */
static inline uint64_t hex8(uint32_t x)
{
	uint64_t v = x;
	v = ((v & 0xFFFF0000ULL) << 16) | (v & 0xFFFFULL);
	v = ((v & 0x0000FF000000FF00ULL) << 8) | (v & 0x000000FF000000FFULL);
	v = ((v & 0x00F000F000F000F0ULL) << 4) | (v & 0x000F000F000F000FULL);
	uint64_t letter = ((v + 0x0606060606060606ULL) >> 4) & 0x0101010101010101ULL;
	v += 0x3030303030303030ULL + letter * ('a' - '0' - 10);
	return __builtin_bswap64(v);  /* first digit at the lowest address */
}

/* murmur3's 32-bit finaliser: a bijection of uint32, so the short keys of
 * ids below 2^32 are distinct */
static inline uint32_t fmix32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x85ebca6bu;
	x ^= x >> 13;
	x *= 0xc2b2ae35u;
	return x ^ (x >> 16);
}

void nk_key_bytes(uint64_t id, unsigned key_size, uint8_t *out)
{
	if (key_size > NK_MAX_KEY_LEN)
		key_size = NK_MAX_KEY_LEN;
	if (key_size < 8) {
		/* hex would hold only 4 bits a byte: 4 B keys would be 65,536 */
		uint64_t w = (uint64_t)fmix32((uint32_t)id) << 32 | (nk_mix64(id) & 0xFFFFFFFFu);
		for (unsigned i = 0; i < key_size; i++)
			out[i] = (uint8_t)(w >> (56 - 8 * i));
		return;
	}
	for (unsigned blk = 0; blk * 16 < key_size; blk++) {
		uint64_t x = nk_mix64(id + blk * NK_KEY_BLOCK_STEP);
		uint64_t s[2] = {hex8((uint32_t)(x >> 32)), hex8((uint32_t)x)};
		unsigned n = key_size - blk * 16 < 16 ? key_size - blk * 16 : 16;
		memcpy(out + blk * 16, s, n);
	}
}

uint32_t nk_key_hash(uint64_t id, unsigned key_size)
{
	uint8_t k[NK_MAX_KEY_LEN];
	if (key_size > NK_MAX_KEY_LEN)
		key_size = NK_MAX_KEY_LEN;
	nk_key_bytes(id, key_size, k);
	return nk_djb2(k, key_size);
}

/* ---- ring ------------------------------------------------------------------ */

struct ring_pt {
	uint32_t pos;
	uint16_t owner;
	uint16_t vnode;
};

static int ring_pt_cmp(const void *a, const void *b)
{
	const struct ring_pt *x = a, *y = b;
	if (x->pos != y->pos)
		return x->pos < y->pos ? -1 : 1;
	/* equal positions: deterministic tie-break */
	if (x->owner != y->owner)
		return x->owner < y->owner ? -1 : 1;
	return x->vnode < y->vnode ? -1 : (x->vnode > y->vnode);
}

int nk_ring_init(struct nk_ring *r, unsigned n_servers, unsigned vnodes, enum nk_ring_mode mode)
{
	memset(r, 0, sizeof(*r));
	if (n_servers < 1 || n_servers > 65535 || vnodes < 1 || vnodes > 65535)
		return -1;
	r->n_servers = n_servers;
	r->vnodes = vnodes;
	r->mode = mode;
	if (mode == NK_RING_EQUAL_RANGES || mode == NK_RING_HASH_MOD)
		return 0;
	if (mode != NK_RING_CONSISTENT)
		return -1;
	uint32_t n = n_servers * vnodes;
	struct ring_pt *pts = malloc(n * sizeof(*pts));
	r->pos = malloc(n * sizeof(uint32_t));
	r->owner = malloc(n * sizeof(uint16_t));
	if (!pts || !r->pos || !r->owner) {
		free(pts);
		nk_ring_free(r);
		return -1;
	}
	for (uint32_t s = 0; s < n_servers; s++)
		for (uint32_t v = 0; v < vnodes; v++) {
			struct ring_pt *p = &pts[s * vnodes + v];
			p->pos = (uint32_t)(nk_mix64(((uint64_t)s << 32) | v) & 0x7FFFFFFFu);
			p->owner = (uint16_t)s;
			p->vnode = (uint16_t)v;
		}
	qsort(pts, n, sizeof(*pts), ring_pt_cmp);
	for (uint32_t i = 0; i < n; i++) {
		r->pos[i] = pts[i].pos;
		r->owner[i] = pts[i].owner;
	}
	r->n_points = n;
	free(pts);
	return 0;
}

void nk_ring_free(struct nk_ring *r)
{
	free(r->pos);
	free(r->owner);
	r->pos = NULL;
	r->owner = NULL;
	r->n_points = 0;
}

unsigned nk_ring_lookup(const struct nk_ring *r, uint32_t keyhash)
{
	keyhash &= 0x7FFFFFFFu;
	if (r->mode == NK_RING_HASH_MOD)
		return (unsigned)(nk_mix64(keyhash) % r->n_servers);
	if (r->mode == NK_RING_EQUAL_RANGES) {
		uint64_t ranges = (uint64_t)r->vnodes * r->n_servers;
		uint64_t j = ((uint64_t)keyhash * ranges) >> 31;
		return (unsigned)(j % r->n_servers);
	}
	/* first point >= keyhash, wrapping to point 0 */
	uint32_t lo = 0, hi = r->n_points;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (r->pos[mid] < keyhash)
			lo = mid + 1;
		else
			hi = mid;
	}
	return r->owner[lo == r->n_points ? 0 : lo];
}

/* ---- alias ------------------------------------------------------------------ */

int nk_alias_init(struct nk_alias *a, const double *w, uint32_t n)
{
	a->n = n;
	a->e = nk_big_alloc((size_t)n * sizeof(*a->e));
	double *q = malloc((size_t)n * sizeof(double));
	uint32_t *small = malloc((size_t)n * sizeof(uint32_t));
	uint32_t *large = malloc((size_t)n * sizeof(uint32_t));
	if (!a->e || !q || !small || !large || n == 0) {
		free(q);
		free(small);
		free(large);
		nk_alias_free(a);
		return -1;
	}
	double total = 0.0;
	for (uint32_t i = 0; i < n; i++)
		total += w[i];
	uint32_t ns = 0, nl = 0;
	for (uint32_t i = 0; i < n; i++) {
		q[i] = w[i] * (double)n / total;
		if (q[i] < 1.0)
			small[ns++] = i;
		else
			large[nl++] = i;
	}
	while (ns && nl) {
		uint32_t s = small[--ns], l = large[nl - 1];
		double t = q[s] * 4294967296.0;
		a->e[s].thresh = t >= 4294967295.0 ? UINT32_MAX : (uint32_t)(t + 0.5);
		a->e[s].alias = l;
		q[l] = (q[l] + q[s]) - 1.0;
		if (q[l] < 1.0) {
			nl--;
			small[ns++] = l;
		}
	}
	/* leftovers are full columns (up to rounding): always keep */
	while (nl) {
		uint32_t l = large[--nl];
		a->e[l].thresh = UINT32_MAX;
		a->e[l].alias = l;
	}
	while (ns) {
		uint32_t s = small[--ns];
		a->e[s].thresh = UINT32_MAX;
		a->e[s].alias = s;
	}
	free(q);
	free(small);
	free(large);
	return 0;
}

void nk_alias_free(struct nk_alias *a)
{
	free(a->e);
	a->e = NULL;
	a->n = 0;
}

/* ---- YCSB scrambled Zipfian ---------------------------------------------------- */

#define YCSB_ITEMS 10000000000.0
#define YCSB_ZETAN_099 26.46902820178302

/* zeta(n, theta) = sum_{i=1..n} i^-theta by Euler-Maclaurin after 10^5 exact terms */
static double zeta_approx(double n, double theta)
{
	double m = n < 100000.0 ? n : 100000.0;
	double s = 0.0;
	for (double i = m; i >= 1.0; i -= 1.0)
		s += pow(i, -theta);
	if (n > m) {
		double a = m, b = n;
		s += (pow(b, 1.0 - theta) - pow(a, 1.0 - theta)) / (1.0 - theta);
		s += (pow(b, -theta) - pow(a, -theta)) / 2.0;
		s += -theta / 12.0 * (pow(b, -theta - 1.0) - pow(a, -theta - 1.0));
	}
	return s;
}

uint64_t nk_ycsb_fnv64(uint64_t v)
{
	uint64_t h = 0xCBF29CE484222325ULL;
	for (int i = 0; i < 8; i++) {
		uint64_t octet = v & 0xff;
		v >>= 8;
		h ^= octet;
		h *= 1099511628211ULL;
	}
	int64_t sh = (int64_t)h;
	return sh < 0 ? (uint64_t)(-(sh + 1)) + 1 : (uint64_t)sh;
}

uint32_t nk_workload_sample_ycsb(const struct nk_workload *wl, struct nk_rng *rng)
{
	double u = nk_rng_double(rng);
	double uz = u * wl->y_zetan;
	uint64_t ret;
	if (uz < 1.0)
		ret = 0;
	else if (uz < 1.0 + wl->y_half_pow)
		ret = 1;
	else
		ret = (uint64_t)(wl->y_items * pow(wl->y_eta * u - wl->y_eta + 1.0, wl->y_alpha));
	return (uint32_t)(nk_ycsb_fnv64(ret) % wl->cfg.n_keys);
}

/* ---- workload ------------------------------------------------------------------- */

static uint32_t value_class(const struct nk_workload_cfg *c, uint32_t keyhash)
{
	if (c->n_value_classes <= 1)
		return 0;
	double tot = 0.0;
	for (uint32_t i = 0; i < c->n_value_classes; i++)
		tot += c->value_weights[i];
	double u = (double)(nk_mix64(keyhash ^ nk_mix64(c->seed ^ 0x76616c7565ULL)) >> 11) * 0x1.0p-53 * tot;
	double acc = 0.0;
	for (uint32_t i = 0; i < c->n_value_classes; i++) {
		acc += c->value_weights[i];
		if (u < acc)
			return i;
	}
	return c->n_value_classes - 1;
}

const struct nk_rank_info *nk_workload_rank_table(const struct nk_workload *wl)
{
	return wl->ranks;
}

uint32_t nk_workload_value_len(const struct nk_workload *wl, uint32_t keyhash)
{
	return wl->cfg.value_sizes[value_class(&wl->cfg, keyhash)];
}

#define FAIL(...)                                          \
	do {                                               \
		if (err && errlen)                         \
			snprintf(err, errlen, __VA_ARGS__); \
		nk_workload_free(wl);                      \
		return NULL;                               \
	} while (0)

/* what both constructors check and build first: the config, the ring and
 * an empty rank table */
static struct nk_workload *workload_start(const struct nk_workload_cfg *cfg, char *err,
					  size_t errlen)
{
	struct nk_workload *wl = calloc(1, sizeof(*wl));
	if (!wl)
		return NULL;
	wl->cfg = *cfg;
	wl->cfg.trace_keys = NULL;
	wl->cfg.trace_ops = NULL;
	uint32_t n = cfg->n_keys;
	if (n < 1)
		FAIL("workload.keys: must be >= 1");
	if (cfg->key_size < 1 || cfg->key_size > NK_MAX_KEY_LEN)
		FAIL("workload.key_size: %u (allowed: 1..%d)", cfg->key_size, NK_MAX_KEY_LEN);
	if (cfg->n_value_classes < 1 || cfg->n_value_classes > NK_MAX_VALUE_CLASSES)
		FAIL("workload.value_size: 1..%d size classes", NK_MAX_VALUE_CLASSES);
	if (cfg->n_servers < 1 || cfg->n_servers > 65535)
		FAIL("servers: %u", cfg->n_servers);
	if (nk_ring_init(&wl->ring, cfg->n_servers, cfg->vnodes, (enum nk_ring_mode)cfg->ring_mode))
		FAIL("ring: bad parameters (servers %u, vnodes %u, mode %u)", cfg->n_servers,
		     cfg->vnodes, cfg->ring_mode);
	wl->ranks = nk_big_alloc((size_t)n * sizeof(*wl->ranks));
	if (!wl->ranks)
		FAIL("out of memory (%u keys)", n);
	return wl;
}

const struct nk_alias_entry *nk_workload_alias_table(const struct nk_workload *wl)
{
	return wl->alias.e;
}

struct nk_workload *nk_workload_from_tables(const struct nk_workload_cfg *cfg,
					    const struct nk_rank_info *ranks,
					    const struct nk_alias_entry *alias, char *err,
					    size_t errlen)
{
	struct nk_workload *wl = NULL;
	if (cfg->kind != NK_WL_ZIPF && cfg->kind != NK_WL_UNIFORM)
		FAIL("workload tables: zipf or uniform only (kind %u)", cfg->kind);
	if (!ranks || (cfg->kind == NK_WL_ZIPF && !alias))
		FAIL("workload tables: missing %s table", ranks ? "alias" : "rank");
	wl = workload_start(cfg, err, errlen);
	if (!wl)
		return NULL;
	uint32_t n = cfg->n_keys;
	memcpy(wl->ranks, ranks, (size_t)n * sizeof(*ranks));
	if (cfg->kind == NK_WL_ZIPF) {
		/* the alias table as nk_alias_init left it; probs stay NULL (only
		 * nk_alias_init reads them) */
		wl->alias.e = nk_big_alloc((size_t)n * sizeof(*alias));
		if (!wl->alias.e)
			FAIL("out of memory (alias table)");
		memcpy(wl->alias.e, alias, (size_t)n * sizeof(*alias));
		wl->alias.n = n;
	}
	return wl;
}

struct nk_workload *nk_workload_new(const struct nk_workload_cfg *cfg, char *err, size_t errlen)
{
	struct nk_workload *wl = workload_start(cfg, err, errlen);
	if (!wl)
		return NULL;
	uint32_t n = cfg->n_keys;
	for (uint32_t i = 0; i < n; i++)
		wl->ranks[i].key = i;
	if (cfg->kind == NK_WL_ZIPF || cfg->kind == NK_WL_UNIFORM) {
		/* ranks -> keys by a seeded Fisher-Yates permutation */
		struct nk_rng rng;
		nk_rng_seed(&rng, cfg->seed, 0x7065726dULL);
		for (uint32_t i = n - 1; i > 0; i--) {
			uint32_t j = (uint32_t)nk_rng_below(&rng, (uint64_t)i + 1);
			uint32_t t = wl->ranks[i].key;
			wl->ranks[i].key = wl->ranks[j].key;
			wl->ranks[j].key = t;
		}
		wl->probs = malloc((size_t)n * sizeof(double));
		if (!wl->probs)
			FAIL("out of memory (%u keys)", n);
		double alpha = cfg->kind == NK_WL_UNIFORM ? 0.0 : cfg->alpha;
		double tot = 0.0;
		/* sum from the smallest term for accuracy */
		for (uint32_t r = n; r-- > 0;) {
			wl->probs[r] = alpha == 0.0 ? 1.0 : pow((double)r + 1.0, -alpha);
			tot += wl->probs[r];
		}
		for (uint32_t r = 0; r < n; r++)
			wl->probs[r] /= tot;
		if (cfg->kind == NK_WL_ZIPF && nk_alias_init(&wl->alias, wl->probs, n))
			FAIL("out of memory (alias table)");
	} else if (cfg->kind == NK_WL_YCSB) {
		double th = cfg->alpha;
		if (!(th > 0.0 && th < 1.0))
			FAIL("workload.alpha: %g (ycsb's scrambled Zipfian needs 0 < alpha < 1)", th);
		wl->y_items = YCSB_ITEMS;
		wl->y_theta = th;
		wl->y_zetan = fabs(th - 0.99) < 1e-12 ? YCSB_ZETAN_099 : zeta_approx(YCSB_ITEMS, th);
		double zeta2 = 1.0 + pow(0.5, th);
		wl->y_half_pow = pow(0.5, th);
		wl->y_alpha = 1.0 / (1.0 - th);
		wl->y_eta = (1.0 - pow(2.0 / YCSB_ITEMS, 1.0 - th)) / (1.0 - zeta2 / wl->y_zetan);
	} else if (cfg->kind == NK_WL_TRACE) {
		if (!cfg->trace_keys || !cfg->trace_len)
			FAIL("workload.trace: empty trace");
		wl->trace_keys = malloc(cfg->trace_len * sizeof(uint32_t));
		if (!wl->trace_keys)
			FAIL("out of memory (trace)");
		for (uint64_t i = 0; i < cfg->trace_len; i++) {
			if (cfg->trace_keys[i] >= n)
				FAIL("workload.trace: key id %u at line %llu >= keys (%u)",
				     cfg->trace_keys[i], (unsigned long long)i + 1, n);
			wl->trace_keys[i] = cfg->trace_keys[i];
		}
		if (cfg->trace_ops) {
			wl->trace_ops = malloc(cfg->trace_len);
			if (!wl->trace_ops)
				FAIL("out of memory (trace)");
			memcpy(wl->trace_ops, cfg->trace_ops, cfg->trace_len);
		}
	} else {
		FAIL("workload.kind: %u unknown", cfg->kind);
	}
	for (uint32_t r = 0; r < n; r++) {
		struct nk_rank_info *ri = &wl->ranks[r];
		ri->keyhash = nk_key_hash(ri->key, cfg->key_size);
		ri->home = (uint16_t)nk_ring_lookup(&wl->ring, ri->keyhash);
		ri->vclass = (uint16_t)value_class(cfg, ri->keyhash);
		ri->value_len = cfg->value_sizes[ri->vclass];
	}
	return wl;
}
#undef FAIL

void nk_workload_free(struct nk_workload *wl)
{
	if (!wl)
		return;
	nk_ring_free(&wl->ring);
	nk_alias_free(&wl->alias);
	free(wl->ranks);
	free(wl->probs);
	free(wl->trace_keys);
	free(wl->trace_ops);
	free(wl);
}

void nk_dynamics_apply(enum nk_dyn_kind kind, struct nk_rank_info *ranks, uint32_t n,
		       uint32_t count, uint32_t hot_pool, struct nk_rng *rng)
{
	if (count > n)
		count = n;
	if (hot_pool > n)
		hot_pool = n;
	if (!count)
		return;
	switch (kind) {
	case NK_DYN_HOT_IN: {
		/* rotate right by `count`: the coldest keys become the hottest */
		struct nk_rank_info tmp[256];
		uint32_t done = 0;
		while (done < count) {
			uint32_t k = count - done < 256 ? count - done : 256;
			memcpy(tmp, &ranks[n - k], k * sizeof(*tmp));
			memmove(&ranks[k], &ranks[0], (size_t)(n - k) * sizeof(*ranks));
			memcpy(&ranks[0], tmp, k * sizeof(*tmp));
			done += k;
		}
		break;
	}
	case NK_DYN_RANDOM:
		for (uint32_t i = 0; i < count; i++) {
			uint32_t a = (uint32_t)nk_rng_below(rng, hot_pool);
			uint32_t b = (uint32_t)nk_rng_below(rng, n);
			struct nk_rank_info t = ranks[a];
			ranks[a] = ranks[b];
			ranks[b] = t;
		}
		break;
	case NK_DYN_SWAP:
		for (uint32_t i = 0; i < count && i < n - 1 - i; i++) {
			struct nk_rank_info t = ranks[i];
			ranks[i] = ranks[n - 1 - i];
			ranks[n - 1 - i] = t;
		}
		break;
	default:
		break;
	}
}
