/*
 * kvserver - a UDP key-value server running a protocol's host logic
 * (host.h: the code the simulator's servers run) on a real hash table.
 *
 *   1. arguments: protocol, server id, rack size, the workload's key space
 *      (to preload this server's keys - or every key - at version 1, with
 *      the value sizes the workload gives them), emulated service time;
 *   2. init: the store (open addressing on the key's hash + key bytes: the
 *      keyhash where the wire carries one, else the hash of the key bytes
 *      the wire carries, nk_wire_store_keyhash; written values live in a
 *      preallocated slot pool), the host stack (dgram.h:
 *      kernel UDP in kvserver, DPDK in kvserver-dpdk, the same source);
 *   3. the loop: receive a burst, decode each request (bad ones are
 *      counted by reason and dropped), busy-wait the emulated service time,
 *      run server_handle, encode the replies into a transmit burst, send;
 *   4. SIGUSR1 writes the counters to --stats-file (atomically, with a
 *      sequence number); SIGTERM/SIGINT writes them once more, prints them
 *      as a JSON line and exits 0.
 *
 * --mode coord runs the protocol's coordinator instead (host.h
 * coord_handle: a CPU node of the rack between clients and servers, node
 * servers + clients + id of the rack plan, --coords of them), --mode echo
 * turns it into a plain UDP echo (the benchmark's baseline), --mode sink
 * only counts datagrams. No allocation inside the loop.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "netkv/ctl.h"
#include "netkv/dgram.h"
#include "netkv/host.h"
#include "netkv/io.h"
#include "netkv/rng.h"
#include "netkv/valpat.h"
#include "netkv/wire.h"
#include "netkv/workload.h"

#define MAX_BATCH NK_DGRAM_RX_MAX
#define CANON_MAX 65536
#define WIRE_ERRS 11
#define CTL_POLL_NS 1000000ull    /* control requests are seen within 1 ms under load */

/* wake_flag: any signal, so that a stack's wait returns at once */
static volatile sig_atomic_t stop_flag, dump_flag, wake_flag;

static void on_stop(int sig)
{
	(void)sig;
	stop_flag = 1;
	wake_flag = 1;
}

static void on_dump(int sig)
{
	(void)sig;
	dump_flag = 1;
	wake_flag = 1;
}

/* ---- the store ------------------------------------------------------------- */

struct ent {
	uint32_t keyhash;
	uint8_t used;
	uint8_t key_len;
	uint16_t rsvd;
	uint32_t value_len;
	int32_t slot;             /* value bytes in the pool; -1 = canonical (value id 0) */
	uint64_t ver;
	uint8_t key[NK_MAX_KEY_LEN];
};

struct store {
	struct ent *t;
	uint64_t mask, n, cap_entries;
	uint8_t *pool;            /* slots of max_value bytes */
	uint32_t max_value, slots, slots_used;
	uint64_t full, value_truncated;
	const struct ent *last;   /* entry of the last get (for the reply's value) */
	uint8_t proto;            /* the wire's (enum nk_proto): a merged entry's hash */
};

/* m's key's entry (inserted if asked and absent), filed under its hash as
 * nk_wire_store_keyhash gives it: requests of a wire without a keyhash
 * decode with 0, which would find no preloaded key and put every new one in
 * one probe chain. */
static struct ent *lookup(struct store *s, const struct nk_msg *m, int insert)
{
	const uint8_t *key = m->key;
	uint8_t klen = m->key_len;
	uint32_t kh = nk_wire_store_keyhash(m);
	uint64_t i = nk_mix64(kh) & s->mask;
	for (uint64_t probe = 0; probe <= s->mask; probe++, i = (i + 1) & s->mask) {
		struct ent *e = &s->t[i];
		if (!e->used) {
			if (!insert || s->n >= s->cap_entries) {
				if (insert)
					s->full++;
				return NULL;
			}
			e->used = 1;
			e->keyhash = kh;
			e->key_len = klen;
			memcpy(e->key, key, klen);
			e->slot = -1;
			e->ver = 0;
			e->value_len = 0;
			s->n++;
			return e;
		}
		if (e->keyhash == kh && e->key_len == klen && !memcmp(e->key, key, klen))
			return e;
	}
	return NULL;
}

static int st_get(void *impl, const struct nk_msg *req, uint64_t *ver, uint32_t *value_len)
{
	struct store *s = impl;
	const struct ent *e = lookup(s, req, 0);
	s->last = e;
	if (!e)
		return 1;
	*ver = e->ver;
	*value_len = e->value_len;
	return 0;
}

static int st_put(void *impl, const struct nk_msg *req, uint64_t ver, uint32_t value_len)
{
	struct store *s = impl;
	struct ent *e = lookup(s, req, 1);
	if (!e)
		return -1;
	e->ver = ver;
	e->value_len = value_len;
	if (req->value && value_len) {
		if (e->slot < 0 && s->slots_used < s->slots)
			e->slot = (int32_t)s->slots_used++;
		if (e->slot >= 0) {
			uint32_t n = value_len < s->max_value ? value_len : s->max_value;
			if (n < value_len)
				s->value_truncated++;
			memcpy(s->pool + (size_t)e->slot * s->max_value, req->value, n);
			if (n < s->max_value)
				memset(s->pool + (size_t)e->slot * s->max_value + n, 0, s->max_value - n);
		} else {
			s->value_truncated++;
		}
	} else {
		e->slot = -1; /* zeros */
	}
	s->last = e;
	return 0;
}

/* preloaded values: value id 0 and its pattern (netkv/valpat.h), so that a
 * reader can tell each byte's place in them too */
static uint8_t canon[CANON_MAX];

/* the value's bytes: its pool slot, or the canonical value */
static const uint8_t *st_value(void *impl, const struct nk_msg *req, uint32_t *value_len)
{
	struct store *s = impl;
	const struct ent *e = s->last;
	if (!e || e->key_len != req->key_len || memcmp(e->key, req->key, req->key_len))
		e = lookup(s, req, 0);
	if (!e)
		return NULL;
	*value_len = e->value_len;
	if (e->slot >= 0 && e->value_len <= s->max_value)
		return s->pool + (size_t)e->slot * s->max_value;
	return e->value_len <= CANON_MAX ? canon : NULL;
}

static const struct nk_store_ops store_ops = {.get = st_get, .put = st_put, .value = st_value};

/* ---- counters ---------------------------------------------------------------- */

struct counters {
	uint64_t rx, tx, served, reads, writes, other_ops, ignored, bad[WIRE_ERRS], encode_err,
		send_err, not_found, dump_seq;
};

static void write_counters(FILE *o, const struct counters *c, const struct store *st, uint32_t id,
			   const char *mode, const struct nk_dgram *io)
{
	static const char *names[WIRE_ERRS] = {"other", "truncated", "magic", "op", "proto",
					       "keylen", "length", "space", "field", "value", "inval"};
	uint64_t bad = 0;
	for (int i = 0; i < WIRE_ERRS; i++)
		bad += c->bad[i];
	fprintf(o, "{\"kvserver\": %u, \"mode\": \"%s\", \"seq\": %" PRIu64 ", \"rx\": %" PRIu64
		   ", \"tx\": %" PRIu64 ", \"served\": %" PRIu64 ", \"reads\": %" PRIu64
		   ", \"writes\": %" PRIu64 ", \"other_ops\": %" PRIu64 ", \"ignored\": %" PRIu64
		   ", \"not_found\": %" PRIu64 ", \"bad\": %" PRIu64,
		id, mode, c->dump_seq, c->rx, c->tx, c->served, c->reads, c->writes, c->other_ops,
		c->ignored, c->not_found, bad);
	for (int i = 0; i < WIRE_ERRS; i++)
		fprintf(o, ", \"bad_%s\": %" PRIu64, names[i], c->bad[i]);
	fprintf(o, ", \"encode_err\": %" PRIu64 ", \"send_err\": %" PRIu64 ", \"keys\": %" PRIu64
		   ", \"store_full\": %" PRIu64 ", \"value_truncated\": %" PRIu64,
		c->encode_err, c->send_err, st->n, st->full, st->value_truncated);
	nk_dgram_json(io, o);
	fputs("}\n", o);
}

static void dump_stats(const char *path, struct counters *c, const struct store *st, uint32_t id,
		       const char *mode, const struct nk_dgram *io)
{
	if (!path)
		return;
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return;
	c->dump_seq++;
	write_counters(f, c, st, id, mode, io);
	fclose(f);
	rename(tmp, path);
}

/* ---- control socket: the protocol's server commands (Pegasus rkey_add, gc, ...) -- */

struct ctl_ctx {
	const struct nk_host_ops *ops;
	void *hst;
	struct nk_store *store;
	/* for "stats": the counters SIGUSR1 writes to --stats-file, for a
	 * controller that reaches this server only through its socket (a
	 * remote rack, over a forwarded socket) */
	const struct counters *counters;
	struct store *st;           /* store_dump, store_merge, store_newest */
	uint32_t id;
	const char *mode;
	const struct nk_dgram *io;
};

/* "ok {counters}" in out (one line); the JSON of --stats-file. */
static int ctl_stats(const struct ctl_ctx *c, char *out, size_t cap)
{
	if (cap < 4)
		return -1;
	memcpy(out, "ok ", 3);
	FILE *f = fmemopen(out + 3, cap - 3, "w");
	if (!f)
		return snprintf(out, cap, "err stats: %s", strerror(errno));
	write_counters(f, c->counters, c->st, c->id, c->mode, c->io);
	long n = ftell(f);
	fclose(f);
	if (n <= 0 || (size_t)n >= cap - 3)
		return snprintf(out, cap, "err stats: reply too long");
	if (out[3 + n - 1] == '\n')
		n--;
	out[3 + n] = '\0';
	return (int)(3 + n);
}

/* ---- the store over the control socket ----------------------------------------
 * Out-of-band state transfer for replica recovery (ControlPlane.copy_store,
 * newest_version; docs/mininet.md): a written entry is one word
 * KEYHASH:KEY:VER:VALUE (hex, VER decimal); "written" = a version above
 * the preload's 1. */

#define DUMP_MAX 4096
#define DUMP_HEAD 32      /* room for "ok NEXT", written last */

static const uint8_t *ent_value(const struct store *s, const struct ent *e)
{
	if (e->slot >= 0 && e->value_len <= s->max_value)
		return s->pool + (size_t)e->slot * s->max_value;
	return e->value_len <= CANON_MAX ? canon : NULL;
}

/* "store_dump FROM [MAX]": the written entries from table index FROM on, at
 * most MAX: "ok NEXT entry ..." (NEXT: where the next page starts, "end"
 * after the table's last entry). */
static int ctl_store_dump(const struct store *s, int argc, char **argv, char *out, size_t cap)
{
	uint64_t from, max = 256;
	if (argc < 2 || argc > 3 || nk_ctl_parse_u64(argv[1], &from) ||
	    (argc == 3 && (nk_ctl_parse_u64(argv[2], &max) || !max || max > DUMP_MAX)))
		return snprintf(out, cap, "err usage: store_dump FROM [MAX, 1..%d]", DUMP_MAX);
	const size_t head = DUMP_HEAD;
	size_t len = head;
	uint64_t i = from, n = 0;
	for (; i <= s->mask && n < max; i++) {
		const struct ent *e = &s->t[i];
		const uint8_t *v = e->used && e->ver > 1 ? ent_value(s, e) : NULL;
		if (!v)
			continue;
		size_t need = 8 + 1 + 2u * e->key_len + 1 + 20 + 1 + 2u * e->value_len + 2;
		if (len + need >= cap)
			break;                 /* the next page starts here */
		len += (size_t)snprintf(out + len, cap - len, " %08x:", e->keyhash);
		len += nk_ctl_hex(e->key, e->key_len, out + len);
		len += (size_t)snprintf(out + len, cap - len, ":%" PRIu64 ":", e->ver);
		len += nk_ctl_hex(v, e->value_len, out + len);
		n++;
	}
	char first[DUMP_HEAD + 1];
	int h = i > s->mask ? snprintf(first, sizeof first, "ok end")
			    : snprintf(first, sizeof first, "ok %" PRIu64, i);
	memmove(out + h, out + head, len - head);
	memcpy(out, first, (size_t)h);
	out[h + len - head] = '\0';
	return (int)(h + len - head);
}

/* "store_merge ENTRY ...": each entry stored where it is newer than what the
 * store holds (a copy never rolls a key back); "ok APPLIED". */
static int ctl_store_merge(struct store *s, int argc, char **argv, char *out, size_t cap)
{
	static uint8_t value[CANON_MAX > 65536 ? CANON_MAX : 65536];
	uint64_t applied = 0;
	for (int a = 1; a < argc; a++) {
		char *f[5], *p = argv[a];
		int nf = 0;
		while (p && nf < 5) {
			f[nf++] = p;
			p = strchr(p, ':');
			if (p)
				*p++ = '\0';
		}
		uint8_t kh[4];
		uint64_t ver;
		struct nk_msg m;
		memset(&m, 0, sizeof m);
		m.proto = s->proto;   /* a wire without keyhash: the store hashes the key */
		int klen = nf == 4 ? nk_ctl_unhex(f[1], m.key, sizeof m.key) : -1;
		int vlen = klen > 0 ? nk_ctl_unhex(f[3], value, sizeof value) : -1;
		if (vlen < 0 || nk_ctl_unhex(f[0], kh, sizeof kh) != 4 ||
		    nk_ctl_parse_u64(f[2], &ver) || ver < 2)
			return snprintf(out, cap, "err entry %d: KEYHASH:KEY:VER:VALUE (hex, "
					"VER decimal >= 2)", a);
		m.keyhash = (uint32_t)kh[0] << 24 | (uint32_t)kh[1] << 16 | (uint32_t)kh[2] << 8 | kh[3];
		m.key_len = (uint8_t)klen;
		m.value = value;
		m.value_len = (uint32_t)vlen;
		uint64_t have;
		uint32_t have_len;
		if (st_get(s, &m, &have, &have_len) == 0 && have >= ver)
			continue;
		if (st_put(s, &m, ver, (uint32_t)vlen))
			return snprintf(out, cap, "err store full after %" PRIu64 " entries", applied);
		applied++;
	}
	return snprintf(out, cap, "ok %" PRIu64, applied);
}

/* "store_newest": the highest version the store holds. */
static int ctl_store_newest(const struct store *s, char *out, size_t cap)
{
	uint64_t top = 0;
	for (uint64_t i = 0; i <= s->mask; i++)
		if (s->t[i].used && s->t[i].ver > top)
			top = s->t[i].ver;
	return snprintf(out, cap, "ok %" PRIu64, top);
}

static int ctl_handler(void *ctx, int argc, char **argv, char *out, size_t cap)
{
	struct ctl_ctx *c = ctx;
	if (!strcmp(argv[0], "ping"))
		return snprintf(out, cap, "ok kvserver");
	if (!strcmp(argv[0], "stats") && argc == 1)
		return ctl_stats(c, out, cap);
	if (!strcmp(argv[0], "store_dump"))
		return ctl_store_dump(c->st, argc, argv, out, cap);
	if (!strcmp(argv[0], "store_merge"))
		return ctl_store_merge(c->st, argc, argv, out, cap);
	if (!strcmp(argv[0], "store_newest") && argc == 1)
		return ctl_store_newest(c->st, out, cap);
	if (!c->ops || !c->ops->server_ctl)
		return snprintf(out, cap, "err protocol has no server commands");
	int n = c->ops->server_ctl(c->hst, c->store, argc, argv, out, cap);
	return n < 0 ? snprintf(out, cap, "err command failed") : n;
}

/* ---- main ---------------------------------------------------------------------- */

static void usage(FILE *o)
{
	fprintf(o,
		"usage: kvserver --protocol NAME --id N --servers S --clients M\n"
		"                [--keys N --key-size B --value-size B --vnodes V --ring consistent|equal|mod\n"
		"                 --wl-seed N --preload home|all|none] [--service-ns NS [--service exp|det]]\n"
		"                [--port P] [--batch N] [--max-value B] [--value-slots N]\n"
		"                [--stats-file PATH] [--stats] [--mode kv|coord|echo|sink] [--params STR]\n"
		"                [--coords C]\n"
		"                [--ctl PATH] [--tag STR] [--io OPTS]\n"
		"       (%s)\n", nk_dgram_usage());
}

static void busy_wait(uint64_t until)
{
	while (nk_now_ns() < until)
		__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	const char *proto = NULL, *stats_file = NULL, *params = NULL, *preload = "home";
	const char *mode = "kv", *ring = "consistent", *service = "det", *ctl_path = NULL;
	uint32_t id = 0, n_servers = 1, n_clients = 1, keys = 0, key_size = 64, value_size = 128;
	uint32_t vnodes = 16, batch = 32, max_value = 1024, value_slots = 65536, n_coords = 0;
	uint64_t wl_seed = 1, service_ns = 0;
	int port = -1, stats = 0;
	const char *io_opts = NULL;
	char ioerr[256];
	/* DPDK's EAL takes the arguments before `--` (the kernel stack none) */
	if (nk_dgram_preinit(&argc, &argv, ioerr, sizeof(ioerr))) {
		fprintf(stderr, "kvserver: %s\n", ioerr);
		return 2;
	}
	static const struct option opts[] = {
		{"protocol", required_argument, 0, 'p'}, {"id", required_argument, 0, 'i'},
		{"servers", required_argument, 0, 'S'},  {"clients", required_argument, 0, 'M'},
		{"keys", required_argument, 0, 'k'},     {"key-size", required_argument, 0, 'K'},
		{"value-size", required_argument, 0, 'V'}, {"vnodes", required_argument, 0, 'n'},
		{"ring", required_argument, 0, 'r'},     {"wl-seed", required_argument, 0, 'w'},
		{"preload", required_argument, 0, 'l'},  {"service-ns", required_argument, 0, 'e'},
		{"service", required_argument, 0, 'E'},  {"port", required_argument, 0, 'P'},
		{"batch", required_argument, 0, 'b'},    {"max-value", required_argument, 0, 'x'},
		{"value-slots", required_argument, 0, 'X'}, {"stats-file", required_argument, 0, 'f'},
		{"stats", no_argument, 0, 'v'},          {"mode", required_argument, 0, 'm'},
		{"params", required_argument, 0, 'a'},   {"tag", required_argument, 0, 't'},
		/* popularity does not matter to a server: accepted so that one
		 * workload argument list serves kvserver and kvclient */
		{"workload", required_argument, 0, 'W'}, {"alpha", required_argument, 0, 'A'},
		{"ctl", required_argument, 0, 'c'},      {"io", required_argument, 0, 'I'},
		{"coords", required_argument, 0, 'C'},
		{"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'p': proto = optarg; break;
		case 'i': id = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'S': n_servers = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'M': n_clients = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'k': keys = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'K': key_size = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'V': value_size = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'n': vnodes = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'r': ring = optarg; break;
		case 'w': wl_seed = strtoull(optarg, NULL, 0); break;
		case 'l': preload = optarg; break;
		case 'e': service_ns = strtoull(optarg, NULL, 0); break;
		case 'E': service = optarg; break;
		case 'P': port = atoi(optarg); break;
		case 'b': batch = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'x': max_value = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'X': value_slots = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'f': stats_file = optarg; break;
		case 'c': ctl_path = optarg; break;
		case 'I': io_opts = optarg; break;
		case 'C': n_coords = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'v': stats = 1; break;
		case 'm': mode = optarg; break;
		case 'a': params = optarg; break;
		case 't': case 'W': case 'A': break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	int m_coord = !strcmp(mode, "coord");
	int m_kv = !strcmp(mode, "kv") || m_coord, m_echo = !strcmp(mode, "echo");
	int m_sink = !strcmp(mode, "sink");
	if (optind != argc || !(m_kv || m_echo || m_sink) || batch == 0 || batch > MAX_BATCH ||
	    (m_kv && !proto) || (m_coord && id >= n_coords) || key_size == 0 || key_size > NK_MAX_KEY_LEN || n_servers == 0 ||
	    max_value == 0 || max_value > CANON_MAX) {
		usage(stderr);
		return 2;
	}
	const struct nk_host_ops *ops = NULL;
	void *hst = NULL;
	if (m_kv) {
		ops = nk_host_find(proto);
		if (!ops || !ops->server_handle) {
			fprintf(stderr, "kvserver: no host logic named '%s'\n", proto);
			return 2;
		}
		if (m_coord && !ops->coord_handle) {
			fprintf(stderr, "kvserver: protocol '%s' has no coordinator (allowed: --mode kv)\n",
				proto);
			return 2;
		}
		size_t size = m_coord ? ops->coord_state_size : ops->server_state_size;
		hst = calloc(1, size ? size : 1);
		struct nk_host_cfg hc = {.n_servers = n_servers, .n_clients = n_clients, .id = id,
					 .seed = wl_seed, .params = params, .n_coords = n_coords};
		if (!hst || (m_coord ? ops->coord_init(hst, &hc) : ops->server_init(hst, &hc))) {
			fprintf(stderr, "kvserver: host logic '%s' init failed\n", proto);
			return 2;
		}
		if (port < 0)
			port = ops->udp_port;
	}
	if (port < 0)
		port = 9000;

	/* the store, preloaded from the workload's key space */
	static struct store st;
	uint64_t want = keys ? keys : 1024;
	if (strcmp(preload, "all") && n_servers)
		want = want / n_servers * 2 + 1024;  /* home keys (with ring slack) + new keys */
	want += want / 4;
	uint64_t cap = 1024;
	while (cap < want * 2)
		cap <<= 1;
	st.t = calloc(cap, sizeof(struct ent));
	st.mask = cap - 1;
	st.cap_entries = cap * 3 / 4;
	st.max_value = max_value;
	st.slots = value_slots;
	st.proto = ops ? ops->proto : 0;
	st.pool = calloc((size_t)value_slots ? value_slots : 1, max_value);
	if (!st.t || !st.pool) {
		fprintf(stderr, "kvserver: out of memory for %" PRIu64 " entries\n", cap);
		return 1;
	}
	if (m_kv && !m_coord && keys && strcmp(preload, "none")) {
		struct nk_workload_cfg wc = {
			.kind = NK_WL_UNIFORM, .n_keys = keys, .seed = wl_seed, .key_size = key_size,
			.n_servers = n_servers, .vnodes = vnodes,
			.ring_mode = !strcmp(ring, "equal") ? NK_RING_EQUAL_RANGES
				: !strcmp(ring, "mod") ? NK_RING_HASH_MOD : NK_RING_CONSISTENT,
			.n_value_classes = 1, .value_sizes = {value_size}, .value_weights = {1.0},
		};
		char err[256];
		struct nk_workload *wl = nk_workload_new(&wc, err, sizeof(err));
		if (!wl) {
			fprintf(stderr, "kvserver: workload: %s\n", err);
			return 2;
		}
		int all = !strcmp(preload, "all");
		struct nk_msg k;
		memset(&k, 0, sizeof k);
		k.proto = ops->proto;
		for (uint32_t i = 0; i < keys; i++) {
			const struct nk_rank_info *ri = &wl->ranks[i];
			if (!all && ri->home != id)
				continue;
			nk_key_bytes(ri->key, key_size, k.key);
			/* under the key the protocol's requests carry (NetLR: an
			 * oid; NetCache, KVSwitch: 16 B) and the hash the store
			 * gives them (the workload's keyhash where the wire carries it) */
			k.key_len = (uint8_t)key_size;
			if (ops->wire_key)
				k.key_len = ops->wire_key(k.key, k.key_len, k.key);
			k.keyhash = ri->keyhash;
			struct ent *e = lookup(&st, &k, 1);
			if (!e)
				break;
			e->ver = 1;
			e->value_len = ri->value_len;
		}
		nk_workload_free(wl);
	}
	nk_valpat_fill(canon, CANON_MAX, 0);
	struct nk_store store = {.ops = &store_ops, .impl = &st};
	static struct nk_ctl ctl;
	static struct counters c;
	struct ctl_ctx cctx = {.ops = ops, .hst = hst, .store = &store, .counters = &c, .st = &st,
			       .id = id, .mode = mode};
	if (port > 65535) {
		fprintf(stderr, "kvserver: --port %d is not a UDP port\n", port);
		return 2;
	}
	if (ctl_path) {
		char err[256];
		if (nk_ctl_open(&ctl, ctl_path, 1 << 20, err, sizeof(err))) {
			fprintf(stderr, "kvserver: %s\n", err);
			return 1;
		}
	}

	/* a coordinator is node servers + clients + id of the rack plan */
	uint32_t node = m_coord ? n_servers + n_clients + id : id;
	struct nk_dgram_cfg iocfg = {.port = (uint16_t)port, .node = node, .opts = io_opts};
	struct nk_dgram *io = nk_dgram_open(&iocfg, ioerr, sizeof(ioerr));
	if (!io) {
		fprintf(stderr, "kvserver: %s\n", ioerr);
		return 1;
	}
	cctx.io = io;
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	struct sigaction sa = {.sa_handler = on_stop};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* a SIGKILLed orchestrator must not leave us behind: SIGTERM stops us
	 * the same way as a normal end */
	if (nk_exit_with_parent(SIGTERM) < 0) {
		fprintf(stderr, "kvserver: the process that started it is gone\n");
		return 1;
	}
	struct sigaction sd = {.sa_handler = on_dump};
	sigaction(SIGUSR1, &sd, NULL);
	/* handlers are in place: the first stats file says "ready" */
	dump_stats(stats_file, &c, &st, id, mode, io);

	/* receive and transmit bursts */
	struct nk_dgram_rx rx[MAX_BATCH];
	struct pollfd pfd[NK_CTL_MAX_CONN + 1];
	uint64_t next_ctl = 0;
	struct nk_rng srng;
	nk_rng_seed(&srng, wl_seed, 0x5E5 + id);
	int exp_service = !strcmp(service, "exp");
	struct nk_host_out outs[NK_HOST_MAX_OUT];
	uint64_t next_stats = nk_now_ns() + 1000000000ull, last_served = 0;
	fprintf(stderr, "kvserver %u: %s mode, %s stack, UDP port %d, %" PRIu64 " keys preloaded, "
			"ready\n", id, mode, nk_dgram_stack(), port, st.n);

	while (!stop_flag) {
		if (dump_flag) {
			dump_flag = 0;
			dump_stats(stats_file, &c, &st, id, mode, io);
		}
		uint64_t now = nk_now_ns();
		unsigned np = 0;
		if (ctl_path && now >= next_ctl) {
			/* control requests between bursts, also under load */
			next_ctl = now + CTL_POLL_NS;
			np = (unsigned)nk_ctl_pollfds(&ctl, pfd, NK_CTL_MAX_CONN + 1);
			if (poll(pfd, np, 0) > 0)
				nk_ctl_service(&ctl, ctl_handler, &cctx);
		}
		if (stats && now >= next_stats) {
			next_stats = now + 1000000000ull;
			fprintf(stderr, "kvserver %u: %" PRIu64 " req/s, rx %" PRIu64 " bad %" PRIu64 "\n", id,
				c.served - last_served, c.rx, c.bad[0] + c.bad[1] + c.bad[2] + c.bad[3]);
			last_served = c.served;
		}
		unsigned r = nk_dgram_recv(io, rx, batch);
		if (!r) {
			/* wait for a datagram or a control request (or a signal) */
			wake_flag = 0;
			np = ctl_path ? (unsigned)nk_ctl_pollfds(&ctl, pfd, NK_CTL_MAX_CONN + 1) : 0;
			nk_dgram_wait(io, pfd, np, nk_now_ns() + 100000000ull, &wake_flag);
			int ctl_ready = 0;
			for (unsigned i = 0; i < np; i++)
				ctl_ready |= pfd[i].revents != 0;
			if (ctl_ready)
				nk_ctl_service(&ctl, ctl_handler, &cctx);
			continue;
		}
		c.rx += r;
		if (m_sink)
			continue;
		uint32_t nt = 0;
		for (unsigned i = 0; i < r; i++) {
			uint32_t len = rx[i].len;
			if (m_echo) {
				uint8_t *b = nk_dgram_tx_slot(io);
				if (!b) {
					c.send_err++;
					continue;
				}
				memcpy(b, rx[i].data, len);
				nk_dgram_tx_commit(io, len, rx[i].src_ip, rx[i].src_port);
				nt++;
				continue;
			}
			struct nk_msg m;
			int e = nk_wire_decode(ops->proto, rx[i].data, len, &m);
			if (e < 0) {
				c.bad[-e < WIRE_ERRS ? -e : 0]++;
				continue;
			}
			if (service_ns) {
				uint64_t d = exp_service ? (uint64_t)nk_rng_exp(&srng, (double)service_ns) : service_ns;
				busy_wait(nk_now_ns() + d);
			}
			int32_t src = nk_ip_node(rx[i].src_ip);
			st.last = NULL;
			uint16_t from = src >= 0 ? (uint16_t)src : 0xFFFF;
			for (int k = 0; k < NK_HOST_MAX_OUT; k++) {
				outs[k].value_off = 0;   /* host.h: whole values unless set */
				outs[k].own_value = 0;
			}
			int no = m_coord ? ops->coord_handle(hst, &m, from, outs, NK_HOST_MAX_OUT)
					 : ops->server_handle(hst, &store, &m, from, outs, NK_HOST_MAX_OUT);
			int request = m.kind == NK_KIND_READ || m.kind == NK_KIND_WRITE ||
				      m.kind == NK_KIND_MULTIGET;
			if (m.kind == NK_KIND_READ || m.kind == NK_KIND_MULTIGET)
				c.reads++;
			else if (m.kind == NK_KIND_WRITE)
				c.writes++;
			else
				c.other_ops++;
			/* a coordinator answers a client's request only once every
			 * sub-reply is in: nothing to send yet is not ignoring it */
			if (no <= 0 && !(m_coord && no == 0 && !request)) {
				c.ignored++;
				continue;
			}
			if (request)
				c.served++;
			/* nt stays below NK_DGRAM_TX_MAX: one flush below sends the burst */
			for (int k = 0; k < no && nt < NK_DGRAM_TX_MAX; k++) {
				struct nk_msg *om = &outs[k].msg;
				if (om->kind == NK_KIND_READ_REPLY && om->result == NK_RESULT_NOT_FOUND)
					c.not_found++;
				/* bytes that come from the store (READ-REPLY, a replica
				 * copy): the host logic leaves value NULL, we fill it */
				if (!m_coord && om->value_len && !outs[k].own_value &&
				    (!om->value || om->kind == NK_KIND_READ_REPLY)) {
					const struct ent *le = st.last;
					if (!le || le->key_len != om->key_len ||
					    memcmp(le->key, om->key, om->key_len))
						le = lookup(&st, om, 0);
					/* a fragment's bytes from its own place in the value */
					uint64_t end = (uint64_t)outs[k].value_off + om->value_len;
					om->value = le && le->slot >= 0 && le->value_len <= st.max_value &&
							    end <= st.max_value
							    ? st.pool + (size_t)le->slot * st.max_value +
								      outs[k].value_off
							    : end <= CANON_MAX ? canon + outs[k].value_off : NULL;
				}
				uint8_t *b = nk_dgram_tx_slot(io);
				if (!b) {
					c.send_err++;
					continue;
				}
				int n = nk_wire_encode(om, b, NK_DGRAM_PAYLOAD_MAX);
				if (n < 0) {
					c.encode_err++;
					continue;
				}
				if (outs[k].dst == NK_DST_SRC)
					nk_dgram_tx_commit(io, (uint32_t)n, rx[i].src_ip, rx[i].src_port);
				else
					nk_dgram_tx_commit(io, (uint32_t)n, nk_node_ip(outs[k].dst),
							   (uint16_t)port);
				nt++;
			}
		}
		unsigned sent = nk_dgram_tx_flush(io);
		c.tx += sent;
		c.send_err += nt - sent;
	}
	dump_stats(stats_file, &c, &st, id, mode, io);
	write_counters(stdout, &c, &st, id, mode, io);
	fflush(stdout);
	/* the state is the coordinator's in coord mode: server_fini would read
	 * it as a server's and free what is not a pointer */
	if (ops && m_coord && ops->coord_fini)
		ops->coord_fini(hst);
	else if (ops && !m_coord && ops->server_fini)
		ops->server_fini(hst);
	free(hst);
	free(st.t);
	free(st.pool);
	if (ctl_path)
		nk_ctl_close(&ctl);
	nk_dgram_close(io);
	return 0;
}
