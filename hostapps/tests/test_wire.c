/*
 * test_wire.c - the C codec against the golden vectors tests/vectors/<p>.json
 * (run with the repo root as working directory).
 *
 * For every vector: decode its bytes, compare every field with the JSON (and
 * every field the JSON does not list with its default), re-encode and compare
 * byte for byte; every truncation must decode to an error; random mutations
 * must never crash, and any mutation that still decodes must re-encode to the
 * same bytes (the codecs are canonical). Vectors with "error" must decode to
 * that error. Inputs are copied into exactly-sized heap buffers so the
 * sanitizer build catches any read past the end.
 *
 * The JSON reader below is purpose-built and strict: objects, arrays,
 * strings without escapes other than \" and \\, and non-negative integers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>

#include "netkv/wire.h"

static int passed, failed;
static const char *current;   /* vector name, for messages */

static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "FAIL %s: ", current ? current : "-");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* ---- a small strict JSON reader ------------------------------------------ */

enum jtype { J_OBJ, J_ARR, J_STR, J_NUM };

struct jval {
	enum jtype type;
	char *str;             /* J_STR */
	uint64_t num;          /* J_NUM */
	size_t n;              /* J_OBJ / J_ARR entries */
	char **keys;           /* J_OBJ */
	struct jval *items;    /* J_OBJ values / J_ARR elements */
};

struct jparser {
	const char *s;
	size_t pos, len;
	const char *err;
};

static void jskip(struct jparser *p)
{
	while (p->pos < p->len && strchr(" \t\r\n", p->s[p->pos]))
		p->pos++;
}

static int jparse(struct jparser *p, struct jval *v, int depth);

static char *jstring(struct jparser *p)
{
	if (p->pos >= p->len || p->s[p->pos] != '"') {
		p->err = "expected string";
		return NULL;
	}
	p->pos++;
	char *out = malloc(p->len - p->pos + 1);
	size_t n = 0;
	while (p->pos < p->len && p->s[p->pos] != '"') {
		char c = p->s[p->pos++];
		if (c == '\\') {
			if (p->pos >= p->len || (p->s[p->pos] != '"' && p->s[p->pos] != '\\')) {
				p->err = "unsupported escape";
				free(out);
				return NULL;
			}
			c = p->s[p->pos++];
		}
		out[n++] = c;
	}
	if (p->pos >= p->len) {
		p->err = "unterminated string";
		free(out);
		return NULL;
	}
	p->pos++;
	out[n] = 0;
	return out;
}

static int jparse(struct jparser *p, struct jval *v, int depth)
{
	memset(v, 0, sizeof *v);
	if (depth > 16) {
		p->err = "too deep";
		return -1;
	}
	jskip(p);
	if (p->pos >= p->len) {
		p->err = "unexpected end";
		return -1;
	}
	char c = p->s[p->pos];
	if (c == '{' || c == '[') {
		int is_obj = c == '{';
		char close = is_obj ? '}' : ']';
		v->type = is_obj ? J_OBJ : J_ARR;
		p->pos++;
		jskip(p);
		if (p->pos < p->len && p->s[p->pos] == close) {
			p->pos++;
			return 0;
		}
		for (;;) {
			v->items = realloc(v->items, (v->n + 1) * sizeof *v->items);
			if (is_obj) {
				v->keys = realloc(v->keys, (v->n + 1) * sizeof *v->keys);
				jskip(p);
				v->keys[v->n] = jstring(p);
				if (!v->keys[v->n])
					return -1;
				jskip(p);
				if (p->pos >= p->len || p->s[p->pos] != ':') {
					p->err = "expected ':'";
					return -1;
				}
				p->pos++;
			}
			if (jparse(p, &v->items[v->n], depth + 1))
				return -1;
			v->n++;
			jskip(p);
			if (p->pos < p->len && p->s[p->pos] == ',') {
				p->pos++;
				continue;
			}
			if (p->pos < p->len && p->s[p->pos] == close) {
				p->pos++;
				return 0;
			}
			p->err = "expected ',' or closing bracket";
			return -1;
		}
	}
	if (c == '"') {
		v->type = J_STR;
		v->str = jstring(p);
		return v->str ? 0 : -1;
	}
	if (c >= '0' && c <= '9') {
		v->type = J_NUM;
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
			unsigned d = (unsigned)(p->s[p->pos++] - '0');
			if (v->num > (UINT64_MAX - d) / 10) {
				p->err = "integer overflow";
				return -1;
			}
			v->num = v->num * 10 + d;
		}
		if (p->pos < p->len && strchr(".eE-", p->s[p->pos])) {
			p->err = "only non-negative integers are supported";
			return -1;
		}
		return 0;
	}
	p->err = "unexpected character";
	return -1;
}

static void jfree(struct jval *v)
{
	for (size_t i = 0; i < v->n; i++) {
		jfree(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->str);
}

static const struct jval *jget(const struct jval *obj, const char *key)
{
	if (obj->type != J_OBJ)
		return NULL;
	for (size_t i = 0; i < obj->n; i++)
		if (!strcmp(obj->keys[i], key))
			return &obj->items[i];
	return NULL;
}

/* hex string -> bytes (malloc'd, at least 1 byte); -1 if malformed */
static long unhex(const char *hex, uint8_t **out)
{
	size_t n = strlen(hex);
	if (n % 2)
		return -1;
	*out = malloc(n / 2 + 1);
	for (size_t i = 0; i < n / 2; i++) {
		unsigned byte;
		if (sscanf(hex + 2 * i, "%2x", &byte) != 1 ||
		    !strchr("0123456789abcdef", hex[2 * i]) ||
		    !strchr("0123456789abcdef", hex[2 * i + 1])) {
			free(*out);
			return -1;
		}
		(*out)[i] = (uint8_t)byte;
	}
	return (long)(n / 2);
}

/* ---- field descriptors: the JSON names are the nk_msg names --------------- */

enum ftype { F_U8, F_U16, F_U32, F_U64 };

struct fdesc {
	const char *name;
	enum ftype type;
	size_t off;
	uint64_t dflt;
};

#define FD(f, t, d) { #f, t, offsetof(struct nk_msg, f), d }
static const struct fdesc scalar_fields[] = {
	FD(op, F_U8, 0), FD(kind, F_U8, 0), FD(flags, F_U8, 0), FD(result, F_U8, 0),
	FD(server_id, F_U8, NK_SERVER_NONE), FD(client_id, F_U16, 0), FD(load, F_U16, 0),
	FD(epoch, F_U16, 0), FD(req_id, F_U32, 0), FD(keyhash, F_U32, 0), FD(ver, F_U64, 0),
	FD(bitmap, F_U32, 0), FD(send_ns, F_U64, 0), FD(frag_idx, F_U8, 0),
	FD(frag_cnt, F_U8, 1), FD(nkeys, F_U8, 0), FD(oid, F_U8, 0), FD(startidx, F_U8, 0),
	FD(clo, F_U8, 0), FD(keyidx, F_U32, 0), FD(key_slot_len, F_U8, 0),
	FD(key_slots, F_U8, 0),
};
#undef FD
#define N_SCALARS (sizeof scalar_fields / sizeof scalar_fields[0])

static uint64_t read_field(const struct nk_msg *m, const struct fdesc *f)
{
	const uint8_t *p = (const uint8_t *)m + f->off;
	uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
	switch (f->type) {
	case F_U8: memcpy(&u8, p, 1); return u8;
	case F_U16: memcpy(&u16, p, 2); return u16;
	case F_U32: memcpy(&u32, p, 4); return u32;
	default: memcpy(&u64, p, 8); return u64;
	}
}

/* compare a byte field (key / value / items) with "<name>" and "<name>_len" */
static int check_bytes(const struct jval *fields, const char *name,
		       const uint8_t *got, size_t got_len)
{
	char len_name[32];
	snprintf(len_name, sizeof len_name, "%s_len", name);
	const struct jval *hex = jget(fields, name), *len = jget(fields, len_name);
	if (!hex) {
		if (len) {
			fail("%s without %s", len_name, name);
			return 1;
		}
		if (got_len != 0) {
			fail("%s: expected none, got %zu bytes", name, got_len);
			return 1;
		}
		return 0;
	}
	if (hex->type != J_STR || !len || len->type != J_NUM) {
		fail("%s needs a hex string and an integer %s", name, len_name);
		return 1;
	}
	uint8_t *want;
	long n = unhex(hex->str, &want);
	int bad = 0;
	if (n < 0 || (uint64_t)n != len->num) {
		fail("%s: malformed hex or length mismatch with %s", name, len_name);
		bad = 1;
	} else if ((size_t)n != got_len) {
		fail("%s: length %zu, want %ld", name, got_len, n);
		bad = 1;
	} else if (n && (!got || memcmp(got, want, (size_t)n))) {
		fail("%s: bytes differ", name);
		bad = 1;
	}
	free(want);
	return bad;
}

static int check_fields(const struct nk_msg *m, const struct jval *fields)
{
	int bad = 0;
	static const char *const known_other[] = {
		"key", "key_len", "value", "value_len", "items", "items_len", "hkey", "srv",
	};
	/* every JSON name must be a field we know: a typo must not pass silently */
	for (size_t i = 0; i < fields->n; i++) {
		int known = 0;
		for (size_t j = 0; j < N_SCALARS; j++)
			known |= !strcmp(fields->keys[i], scalar_fields[j].name);
		for (size_t j = 0; j < sizeof known_other / sizeof *known_other; j++)
			known |= !strcmp(fields->keys[i], known_other[j]);
		if (!known) {
			fail("unknown field \"%s\"", fields->keys[i]);
			bad = 1;
		}
	}
	for (size_t j = 0; j < N_SCALARS; j++) {
		const struct fdesc *f = &scalar_fields[j];
		const struct jval *v = jget(fields, f->name);
		uint64_t want = f->dflt;
		if (v) {
			if (v->type != J_NUM) {
				fail("%s is not an integer", f->name);
				bad = 1;
				continue;
			}
			want = v->num;
		}
		uint64_t got = read_field(m, f);
		if (got != want) {
			fail("%s = %llu, want %llu%s", f->name, (unsigned long long)got,
			     (unsigned long long)want, v ? "" : " (default)");
			bad = 1;
		}
	}
	bad |= check_bytes(fields, "key", m->key, m->key_len);
	bad |= check_bytes(fields, "value", m->value, m->value_len);
	bad |= check_bytes(fields, "items", m->items, m->items_len);
	if ((m->value_len == 0) != (m->value == NULL)) {
		fail("value pointer must be NULL exactly when value_len is 0");
		bad = 1;
	}
	for (size_t i = m->key_len; i < NK_MAX_KEY_LEN; i++)
		if (m->key[i]) {
			fail("key bytes past key_len are not zero");
			bad = 1;
			break;
		}

	const struct jval *hk = jget(fields, "hkey");
	uint64_t want_hkey[2] = { 0, 0 };
	if (hk) {
		uint8_t *b;
		if (hk->type != J_STR || unhex(hk->str, &b) != 16) {
			fail("hkey must be 32 hex digits");
			return 1;
		}
		for (int i = 0; i < 8; i++) {
			want_hkey[0] = (want_hkey[0] << 8) | b[i];
			want_hkey[1] = (want_hkey[1] << 8) | b[8 + i];
		}
		free(b);
	}
	if (m->hkey[0] != want_hkey[0] || m->hkey[1] != want_hkey[1]) {
		fail("hkey differs");
		bad = 1;
	}

	const struct jval *srv = jget(fields, "srv");
	for (size_t i = 0; i < NK_MAX_SERVERS; i++) {
		uint64_t want = 0;
		if (srv) {
			if (srv->type != J_ARR || srv->n != NK_MAX_SERVERS ||
			    srv->items[i].type != J_NUM) {
				fail("srv must be an array of %d integers", NK_MAX_SERVERS);
				return 1;
			}
			want = srv->items[i].num;
		}
		if (m->srv[i] != want) {
			fail("srv[%zu] = %u, want %llu", i, m->srv[i], (unsigned long long)want);
			bad = 1;
		}
	}
	return bad;
}

/* ---- per-vector checks ----------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* decode from an exactly-sized heap copy, so ASan sees any over-read */
static int decode_exact(enum nk_proto proto, const uint8_t *bytes, size_t len,
			struct nk_msg *m)
{
	uint8_t *copy = malloc(len ? len : 1);
	if (len)
		memcpy(copy, bytes, len);
	int rc = nk_wire_decode(proto, len ? copy : NULL, len, m);
	if (rc == 0 && len) {
		/* the message points into `copy`: re-encode before freeing it */
		uint8_t *again = malloc(len);
		int n = nk_wire_encode(m, again, len);
		if (n != (int)len || memcmp(again, copy, len))
			rc = 1;   /* decodes but not canonical: caller reports */
		free(again);
	}
	free(copy);
	return rc;
}

static int error_code(const char *name)
{
	static const struct { const char *name; int code; } codes[] = {
		{ "ETRUNC", NK_WIRE_ETRUNC }, { "EMAGIC", NK_WIRE_EMAGIC },
		{ "EOP", NK_WIRE_EOP }, { "EPROTO", NK_WIRE_EPROTO },
		{ "EKEYLEN", NK_WIRE_EKEYLEN }, { "ELEN", NK_WIRE_ELEN },
		{ "ESPACE", NK_WIRE_ESPACE }, { "EFIELD", NK_WIRE_EFIELD },
		{ "EVALUE", NK_WIRE_EVALUE }, { "EINVAL", NK_WIRE_EINVAL },
	};
	for (size_t i = 0; i < sizeof codes / sizeof *codes; i++)
		if (!strcmp(codes[i].name, name))
			return codes[i].code;
	return 0;
}

/* nk_wire_has says what the format carries (keyhash, server_id): a field
 * it carries survives encode and decode with another value; one it does not
 * decodes to its default (a store then hashes the key bytes instead,
 * nk_wire_store_keyhash; kvclient tells who answered by the sender). */
static int check_carried(const struct nk_msg *m, size_t len)
{
	unsigned has = nk_wire_has((enum nk_proto)m->proto);
	struct nk_msg x = *m, y;
	uint8_t out[4096];
	x.keyhash = m->keyhash ^ 0x5A5A5A5Au;
	x.server_id = m->server_id == 3 ? 4 : 3;
	int n = len <= sizeof out ? nk_wire_encode(&x, out, sizeof out) : -1;
	if (n < 0 || nk_wire_decode((enum nk_proto)m->proto, out, (size_t)n, &y)) {
		fail("re-encode with another keyhash: %d", n);
		return 1;
	}
	int bad = 0;
	if (!!(has & NK_WIRE_HAS_KEYHASH) != (y.keyhash == x.keyhash) ||
	    (!(has & NK_WIRE_HAS_KEYHASH) && (m->keyhash || y.keyhash))) {
		fail("nk_wire_has says keyhash %s, decode gives %u for %u",
		     has & NK_WIRE_HAS_KEYHASH ? "carried" : "not carried", y.keyhash, x.keyhash);
		bad = 1;
	}
	if (!!(has & NK_WIRE_HAS_REPLIER) != (y.server_id == x.server_id) ||
	    (!(has & NK_WIRE_HAS_REPLIER) && (m->server_id != NK_SERVER_NONE ||
						y.server_id != NK_SERVER_NONE))) {
		fail("nk_wire_has says server_id %s, decode gives %u for %u",
		     has & NK_WIRE_HAS_REPLIER ? "carried" : "not carried", y.server_id, x.server_id);
		bad = 1;
	}
	uint32_t want = has & NK_WIRE_HAS_KEYHASH ? m->keyhash : nk_djb2(m->key, m->key_len);
	if (nk_wire_store_keyhash(m) != want) {
		fail("nk_wire_store_keyhash = %u, want %u", nk_wire_store_keyhash(m), want);
		bad = 1;
	}
	return bad;
}

static int check_valid_vector(enum nk_proto proto, const uint8_t *bytes, size_t len,
			      const struct jval *fields)
{
	struct nk_msg m;
	int bad = 0;
	int rc = nk_wire_decode(proto, bytes, len, &m);
	if (rc) {
		fail("decode: %s", nk_wire_strerror(rc));
		return 1;
	}
	bad |= check_fields(&m, fields);
	bad |= check_carried(&m, len);

	uint8_t *out = malloc(len + 64);
	int n = nk_wire_encode(&m, out, len + 64);
	if (n != (int)len || memcmp(out, bytes, len)) {
		fail("re-encode differs (%d bytes, want %zu)", n, len);
		bad = 1;
	}
	if (nk_wire_encoded_len(&m) != (int)len) {
		fail("nk_wire_encoded_len = %d, want %zu", nk_wire_encoded_len(&m), len);
		bad = 1;
	}
	if (nk_wire_encode(&m, out, len - 1) != NK_WIRE_ESPACE) {
		fail("encode into cap-1 bytes must give ESPACE");
		bad = 1;
	}
	/* value NULL on encode writes zeros of the same length */
	if (m.value_len) {
		struct nk_msg z = m;
		z.value = NULL;
		n = nk_wire_encode(&z, out, len + 64);
		if (n != (int)len) {
			fail("encode with value == NULL: %d", n);
			bad = 1;
		}
	}
	free(out);

	/* NetMC pair walker: MGET_REPLY pairs fill the item list exactly */
	if (proto == NK_PROTO_NETMC && m.op == NK_NETMC_OP_MGET_REPLY) {
		size_t off = 0;
		const uint8_t *k, *v;
		uint16_t vlen;
		unsigned pairs = 0;
		while ((rc = nk_wire_netmc_next_pair(&m, &off, &k, &v, &vlen)) == 1)
			pairs++;
		if (rc != 0 || pairs != m.key_slots || off != m.items_len) {
			fail("pair walker: rc %d, %u pairs of %u", rc, pairs, m.key_slots);
			bad = 1;
		}
	}

	for (size_t cut = 0; cut < len; cut++) {
		rc = decode_exact(proto, bytes, cut, &m);
		if (rc >= 0) {
			fail("truncation to %zu of %zu bytes decoded", cut, len);
			bad = 1;
			break;
		}
	}

	/* mutations: flip bytes, and also grow or shrink the packet */
	uint8_t *mut = malloc(len + 16);
	for (int trial = 0; trial < 1000; trial++) {
		size_t mlen = len;
		memcpy(mut, bytes, len);
		int flips = 1 + (int)(rng() % 4);
		for (int f = 0; f < flips; f++)
			mut[rng() % len] ^= (uint8_t)(1 + rng() % 255);
		if (trial % 4 == 3) {
			size_t extra = rng() % 16;
			for (size_t i = 0; i < extra; i++)
				mut[len + i] = (uint8_t)rng();
			mlen = len + extra;
		} else if (trial % 4 == 2) {
			mlen = rng() % (len + 1);
		}
		rc = decode_exact(proto, mut, mlen, &m);
		if (rc > 0) {
			fail("mutation decodes but does not re-encode to the same bytes");
			bad = 1;
			break;
		}
	}
	free(mut);
	return bad;
}

static const char *const proto_files[NK_PROTO_COUNT] = {
	"plain", "pegasus", "netcache", "kvswitch", "starcache", "netlr", "netmc",
};

static void run_file(enum nk_proto proto)
{
	char path[128];
	snprintf(path, sizeof path, "tests/vectors/%s.json", proto_files[proto]);
	current = path;
	FILE *f = fopen(path, "rb");
	if (!f) {
		fail("cannot open (run from the repo root)");
		failed++;
		return;
	}
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *text = malloc((size_t)size + 1);
	size_t got = fread(text, 1, (size_t)size, f);
	fclose(f);
	text[got] = 0;

	struct jparser p = { text, 0, got, NULL };
	struct jval root;
	if (jparse(&p, &root, 0) == 0) {
		jskip(&p);
		if (p.pos != p.len)
			p.err = "trailing text";
	}
	if (p.err || root.type != J_ARR || root.n == 0) {
		fail("JSON: %s at byte %zu", p.err ? p.err : "not a non-empty array", p.pos);
		failed++;
		jfree(&root);
		free(text);
		return;
	}

	uint8_t ops_seen[256] = { 0 };
	for (size_t i = 0; i < root.n; i++) {
		const struct jval *v = &root.items[i];
		const struct jval *name = jget(v, "name"), *pr = jget(v, "proto"),
				  *hex = jget(v, "hex"), *fields = jget(v, "fields"),
				  *err = jget(v, "error");
		current = (name && name->type == J_STR) ? name->str : path;
		if (!name || !pr || !hex || pr->type != J_STR || hex->type != J_STR ||
		    strcmp(pr->str, proto_files[proto]) || !fields == !err || v->n != 4) {
			fail("malformed vector (needs name, proto=%s, hex, fields|error)",
			     proto_files[proto]);
			failed++;
			continue;
		}
		uint8_t *bytes;
		long len = unhex(hex->str, &bytes);
		if (len <= 0) {
			fail("bad hex");
			failed++;
			continue;
		}
		int bad;
		if (err) {
			struct nk_msg m;
			int want = err->type == J_STR ? error_code(err->str) : 0;
			int rc = decode_exact(proto, bytes, (size_t)len, &m);
			bad = want == 0 || rc != want;
			if (bad)
				fail("decoded to %d (%s), want %s", rc, nk_wire_strerror(rc),
				     err->type == J_STR ? err->str : "?");
		} else {
			bad = fields->type != J_OBJ ||
			      check_valid_vector(proto, bytes, (size_t)len, fields);
			const struct jval *op = jget(fields, "op");
			if (op && op->type == J_NUM && op->num < 256)
				ops_seen[op->num] = 1;
		}
		free(bytes);
		if (bad)
			failed++;
		else
			passed++;
	}

	/* every op of the protocol has at least one vector */
	current = path;
	for (int op = 0; op < 256; op++) {
		if (nk_wire_kind(proto, (uint8_t)op) >= 0 && !ops_seen[op]) {
			fail("no vector for op %d (%s)", op, nk_wire_op_name(proto, (uint8_t)op));
			failed++;
		}
	}
	jfree(&root);
	free(text);
}

/* ---- hashes and API edges --------------------------------------------------- */

static void check(int ok, const char *what)
{
	current = "api";
	if (ok) {
		passed++;
	} else {
		fail("%s", what);
		failed++;
	}
}

static void test_hashes(void)
{
	const uint8_t *hello = (const uint8_t *)"hello";
	const uint8_t *digits = (const uint8_t *)"123456789";
	uint64_t h[2], hk[2];

	check(nk_djb2(hello, 5) == 261238937u, "djb2(\"hello\")");
	check(nk_djb2(hello, 0) == 5381u, "djb2(\"\")");
	check(nk_crc32(digits, 9) == 0xCBF43926u, "crc32 check value");
	check(nk_crc32(digits, 0) == 0, "crc32(\"\")");
	/* the salted-key form equals nk_crc32 of its 17 bytes */
	uint64_t x = 0x9E3779B97F4A7C15ULL;
	int crc_same = 1;
	for (int i = 0; i < 1000; i++) {
		uint8_t b[17];
		uint64_t k0 = x * (2 * (uint64_t)i + 1), k1 = ~x ^ ((uint64_t)i << 29);
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		b[0] = (uint8_t)(i * 37);
		for (int j = 0; j < 8; j++) {
			b[1 + j] = (uint8_t)(k0 >> (56 - 8 * j));
			b[9 + j] = (uint8_t)(k1 >> (56 - 8 * j));
		}
		crc_same &= nk_crc32_b_k128(b[0], k0, k1) == nk_crc32(b, sizeof b);
	}
	check(crc_same, "crc32_b_k128 = crc32 of its 17 bytes");
	nk_murmur3_128(hello, 5, 0, h);
	check(h[0] == 0xcbd8a7b341bd9b02ULL && h[1] == 0x5b1e906a48ae1d19ULL,
	      "murmur3_128(\"hello\", 0)");
	nk_murmur3_128(hello, 0, 0, h);
	check(h[0] == 0 && h[1] == 0, "murmur3_128(\"\", 0)");
	nk_starcache_hkey(hello, 5, hk);
	check(hk[0] == 0x5b1e906a48ae1d19ULL && hk[1] == 0xcbd8a7b341bd9b02ULL,
	      "starcache hkey = h2:h1");
	check(nk_netlr_slot(123456, 131072) ==
	      (nk_crc32((const uint8_t *)"\x00\x01\xe2\x40", 4) & 131071u), "netlr slot");
}

static void test_api_edges(void)
{
	struct nk_msg m;
	uint8_t buf[64] = { 0 };
	check(nk_wire_decode(NK_PROTO_COUNT, buf, sizeof buf, &m) == NK_WIRE_EPROTO,
	      "decode: unknown protocol");
	check(nk_wire_decode(NK_PROTO_PEGASUS, buf, sizeof buf, NULL) == NK_WIRE_EINVAL,
	      "decode: NULL out");
	check(nk_wire_decode(NK_PROTO_NETLR, NULL, 0, &m) == NK_WIRE_ETRUNC,
	      "decode: empty buffer");
	check(nk_wire_encode(NULL, buf, sizeof buf) == NK_WIRE_EINVAL, "encode: NULL msg");
	memset(&m, 0, sizeof m);
	m.proto = NK_PROTO_KVSWITCH;
	m.op = NK_KVSWITCH_OP_GET;
	m.key_len = 15;
	check(nk_wire_encode(&m, buf, sizeof buf) == NK_WIRE_EKEYLEN, "kvswitch: 15 B key");
	m.key_len = 16;
	m.ver = 1ULL << 32;
	check(nk_wire_encode(&m, buf, sizeof buf) == NK_WIRE_EFIELD, "kvswitch: ver > 32 bits");
	m.ver = 0;
	m.op = 0x7F;
	check(nk_wire_encode(&m, buf, sizeof buf) == NK_WIRE_EOP, "kvswitch: unknown op");
	m.proto = NK_PROTO_NETLR;
	m.op = NK_NETLR_OP_WRITE;
	m.key_len = 4;
	m.value_len = 15;
	check(nk_wire_encode(&m, buf, sizeof buf) == NK_WIRE_EVALUE, "netlr: 15 B value");
	m.proto = 200;
	check(nk_wire_encode(&m, buf, sizeof buf) == NK_WIRE_EPROTO, "encode: unknown protocol");
	check(!strcmp(nk_wire_strerror(NK_WIRE_ETRUNC), "truncated"), "strerror");
	check(!strcmp(nk_wire_op_name(NK_PROTO_NETMC, NK_NETMC_OP_MGET), "MGET"), "op name");
	check(!strcmp(nk_wire_proto_name(NK_PROTO_STARCACHE), "starcache"), "proto name");

	/* random garbage of every length never crashes */
	uint8_t junk[256];
	int ok = 1;
	for (int trial = 0; trial < 20000; trial++) {
		size_t len = rng() % sizeof junk;
		for (size_t i = 0; i < len; i++)
			junk[i] = (uint8_t)rng();
		enum nk_proto proto = (enum nk_proto)(rng() % NK_PROTO_COUNT);
		if (decode_exact(proto, junk, len, &m) > 0)
			ok = 0;
	}
	check(ok, "random garbage: any successful decode re-encodes identically");
}

int main(void)
{
	for (int p = 0; p < NK_PROTO_COUNT; p++)
		run_file((enum nk_proto)p);
	test_hashes();
	test_api_edges();
	printf("test_wire: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
