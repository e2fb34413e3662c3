/*
 * kvclient - an open-loop Poisson load generator for netkv: the simulator's
 * workload sampler (workload.h) picks keys, the protocol's host logic
 * (host.h) builds requests and judges replies, the host stack (dgram.h:
 * kernel UDP in kvclient, DPDK in kvclient-dpdk, the same source) carries them.
 *
 *   1. arguments: protocol, client id, rack size, rate, duration, workload;
 *   2. init: the workload (same sampler and seed as the simulator), the
 *      outstanding-request table (a ring indexed by req_id), the histogram;
 *   3. the loop: send every request whose intended time has come (a
 *      transmit burst), receive a burst of replies, retire timeouts in
 *      deadline order, then sleep until the next intended send;
 *      latency = reply time - *intended* send time, so a client that falls
 *      behind reports the queueing it caused (no coordinated omission);
 *   4. after the drain: one JSON document with counters, percentiles, the
 *      histogram's non-empty buckets, the per-window timeline and the
 *      replies per server; with --history, one line per operation for the
 *      linearizability checker.
 *
 * --mget-weights w1,...,wK makes every read a multiget of k keys (P(k) ∝
 * w_k; distinct keys from the popularity law, as the simulator draws them),
 * turned into packets by the host logic's client_multiget; a multiget is
 * one request, done when the host logic says every key's reply is in (all
 * or nothing), its latency from the intended send to that reply. Writes stay
 * single-key. --coords C: the rack's coordinator hosts (nodes after the
 * clients), trusted to answer.
 *
 * --mode echo sends raw datagrams of --payload bytes to --target and times
 * the echoes (the benchmark's plain-UDP baseline); --rate 0 sends as fast
 * as it can (--mode blast: no replies expected). --mode hostile sends the
 * protocol's adversarial traffic instead of requests (hostile_run below).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "netkv/dgram.h"
#include "netkv/hist.h"
#include "netkv/host.h"
#include "netkv/io.h"
#include "netkv/rng.h"
#include "netkv/wire.h"
#include "netkv/bytes.h"
#include "netkv/valpat.h"
#include "netkv/workload.h"

#define MAX_BATCH NK_DGRAM_RX_MAX
#define VALBUF 65536u           /* the largest value a write carries */
#define MAX_WINDOWS 100000
#define WIRE_ERRS 11

static volatile sig_atomic_t stop_flag;

static void on_stop(int sig)
{
	(void)sig;
	stop_flag = 1;
}

enum { S_FREE = 0, S_WAIT = 1 };

struct req {
	uint32_t req_id;
	uint8_t state;
	uint8_t kind;
	uint8_t attempts;
	uint8_t rsvd;
	uint32_t key;          /* key id (workload) */
	uint32_t rank;
	uint64_t intended_ns;  /* first intended send time */
	uint64_t sent_ns;      /* when the last attempt was handed to the kernel */
	uint64_t value_id;     /* written value's id */
};

struct tmo {
	uint64_t deadline;
	uint32_t req_id;
	uint32_t attempt;
};

/* One timeline window; the columns mean the same as the simulator's
 * (docs/results.md "timeline.parquet"). */
struct window {
	uint64_t issued;     /* requests whose intended send time is in the window */
	uint64_t completed;  /* completions in the window (h: their latencies) */
	uint64_t done;       /* completions of the requests issued in the window */
	struct nk_hist h;
};

static void usage(FILE *o)
{
	fprintf(o,
		"usage: kvclient --protocol NAME --id C --servers S --clients M --rate RPS --duration S\n"
		"                [--workload zipf|uniform|ycsb --alpha A --keys N --key-size B --value-size B\n"
		"                 --vnodes V --ring consistent|equal|mod --wl-seed N --write-ratio W]\n"
		"                [--seed N] [--drain S] [--timeout-us T --retries R] [--start-at NS|stdin]\n"
		"                [--window-ms W] [--out PATH] [--history PATH [--value-tag N]] [--batch N]\n"
		"                [--first-req-id N] [--tag STR] [--io OPTS]\n"
		"       kvclient --mode hostile --protocol NAME --id C ... (the same workload options)\n"
		"                [--mget-weights W1,W2,... [--coords C]]\n"
		"       kvclient --mode echo|blast --target IP:PORT --rate RPS --duration S [--payload B]\n"
		"       (%s)\n", nk_dgram_usage());
}

struct target {
	uint32_t ip;    /* host byte order */
	uint16_t port;
};

static int parse_target(const char *s, struct target *a)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	if (!colon || (size_t)(colon - s) >= sizeof(host))
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = 0;
	uint32_t ip = nk_parse_ipv4(host);
	if (!ip)
		return -1;
	int port = atoi(colon + 1);
	if (port <= 0 || port > 65535)
		return -1;
	*a = (struct target){.ip = ip, .port = (uint16_t)port};
	return 0;
}

/* Where a reply may come from (docs/security.md): a server of the rack, the
 * switch answering for one (NetCache: the request turned around, so its
 * source is this client's own address), or a coordinator host (nodes
 * coord0 .. coord0 + n_coords - 1), from the protocol's port. Anything else
 * is a forged reply, counted and ignored. */
static int reply_source_ok(const struct nk_dgram_rx *a, uint32_t n_servers, uint32_t self_node,
			   uint32_t coord0, uint32_t n_coords, int port)
{
	int32_t node = nk_ip_node(a->src_ip);
	return a->src_port == port && node >= 0 &&
	       ((uint32_t)node < n_servers || (uint32_t)node == self_node ||
		((uint32_t)node >= coord0 && (uint32_t)node - coord0 < n_coords));
}

/* "w1,w2,...": the multiget size weights (k = 1..n); n, or 0 if malformed */
static uint32_t parse_weights(const char *s, double *w, uint32_t max)
{
	uint32_t n = 0;
	double total = 0;
	while (*s) {
		char *end;
		double v = strtod(s, &end);
		if (end == s || n == max || !isfinite(v) || v < 0)
			return 0;
		w[n++] = v;
		total += v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return 0;
	}
	return total > 0 ? n : 0;
}

/* The reply kind that answers a request kind (msg.h enum nk_kind). */
static uint8_t reply_kind(uint8_t kind)
{
	switch (kind) {
	case NK_KIND_READ: return NK_KIND_READ_REPLY;
	case NK_KIND_WRITE: return NK_KIND_WRITE_REPLY;
	case NK_KIND_MULTIGET: return NK_KIND_MULTIGET_REPLY;
	default: return 0xFF;
	}
}

/* Sleep until CLOCK_MONOTONIC reaches t, whatever wakes us (signals,
 * early timer returns): loop until the time has really come. */
static void sleep_until(uint64_t t)
{
	struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
	while (!stop_flag && nk_now_ns() < t)
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

/* The request req_id for the workload key ri (its bytes into keybuf): a
 * read, or a write of the key's value size; send_ns its intended send time. */
static struct nk_req_spec req_spec(const struct nk_rank_info *ri, uint8_t kind, uint32_t key_size,
				   uint32_t client_id, uint32_t req_id, uint64_t send_ns,
				   uint8_t *keybuf)
{
	nk_key_bytes(ri->key, key_size, keybuf);
	return (struct nk_req_spec){
		.kind = kind, .key_len = (uint8_t)key_size,
		.client_id = (uint16_t)client_id, .home = ri->home,
		.req_id = req_id, .keyhash = ri->keyhash,
		.value_len = kind == NK_KIND_WRITE ? ri->value_len : 0,
		.send_ns = send_ns, .key = keybuf,
	};
}

/* A written value's id, unique per rack run: tag (the load point) |
 * client + 1 | req_id. */
static uint64_t value_id(uint64_t value_tag, uint32_t client_id, uint32_t req_id)
{
	return value_tag << 48 | (uint64_t)((client_id + 1) & 0xFFFF) << 32 | req_id;
}

/* What a resend of a request needs: the protocol's client logic, the
 * workload's rank table and the host stack. */
struct resender {
	const struct nk_host_ops *ops;
	void *hst;
	const struct nk_workload *wl;
	uint32_t key_size, client_id;
	struct nk_dgram *io;
	int port;
	uint8_t *keybuf, *valbuf;
	struct nk_host_out *out;     /* NK_HOST_MAX_REQ_OUT packets of a split request */
};

/* Queue request m (to dst) as the packets the host logic sends it as: one,
 * or several where its wire format splits it (client_split: StarCache's
 * multi-packet writes, value bytes pointing into m's), the first into
 * `first`. Returns the packets queued, 0 if none. */
static int queue_request(const struct nk_host_ops *ops, void *hst, const struct nk_msg *m,
			 uint16_t dst, struct nk_host_out *out, struct nk_dgram *io, uint8_t *first,
			 uint16_t port)
{
	int np = 1;
	if (ops->client_split) {
		np = ops->client_split(hst, m, dst, out, NK_HOST_MAX_REQ_OUT);
	} else {
		out[0].msg = *m;
		out[0].dst = dst;
	}
	int queued = 0;
	for (int i = 0; i < np; i++) {
		uint8_t *b = i ? nk_dgram_tx_slot(io) : first;
		int len = b ? nk_wire_encode(&out[i].msg, b, NK_DGRAM_PAYLOAD_MAX) : -1;
		if (len < 0)
			continue;  /* a fragment never seen: the client's timeout resends */
		nk_dgram_tx_commit(io, (uint32_t)len, nk_node_ip(out[i].dst), port);
		queued++;
	}
	return queued;
}

/* Send request q again with its own req_id (after RETRY or a timeout).
 * 1 if the datagram was handed to the stack. */
static int resend(const struct resender *rs, const struct req *q)
{
	struct nk_req_spec sp = req_spec(&rs->wl->ranks[q->rank], q->kind, rs->key_size,
					 rs->client_id, q->req_id, q->intended_ns, rs->keybuf);
	struct nk_msg rq;
	uint16_t dst = rs->ops->client_request(rs->hst, &sp, &rq);
	if (q->kind == NK_KIND_WRITE && rq.value_len >= 8) {
		nk_valpat_fill(rs->valbuf, rq.value_len < VALBUF ? rq.value_len : VALBUF, q->value_id);
		rq.value = rs->valbuf;
	}
	uint8_t *pkt = nk_dgram_tx_slot(rs->io);
	if (!pkt || queue_request(rs->ops, rs->hst, &rq, dst, rs->out, rs->io, pkt,
				  (uint16_t)rs->port) <= 0)
		return 0;
	return nk_dgram_tx_flush(rs->io) > 0;
}

/* --start-at stdin: everything is built; say so and read the start time
 * from stdin: CLOCK_MONOTONIC ns, or "@" and CLOCK_REALTIME ns (clients on
 * different hosts, whose monotonic clocks differ, start together when their
 * real-time clocks are synchronised). The CLOCK_MONOTONIC start; 0 on error. */
static uint64_t handshake_start(void)
{
	char line[64];
	fputs("ready\n", stdout);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 0;
	int realtime = line[0] == '@';
	const char *num = line + realtime;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(num, &end, 10);
	if (errno || end == num || (*end && *end != '\n'))
		return 0;
	if (!realtime)
		return (uint64_t)v;
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	uint64_t now_rt = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
	uint64_t now = nk_now_ns();
	/* a start already past (or a clock far off) starts now */
	return v > now_rt ? now + (v - now_rt) : now;
}

static void json_hist(FILE *o, const struct nk_hist *h)
{
	fputs("\"hist\": [", o);
	int first = 1;
	for (uint32_t i = 0; i < h->nbuckets; i++) {
		if (!h->counts[i])
			continue;
		fprintf(o, "%s[%" PRIu64 ", %" PRIu64 "]", first ? "" : ", ", nk_hist_bucket_lower(h, i),
			h->counts[i]);
		first = 0;
	}
	fputs("]", o);
}

static void json_latency(FILE *o, const char *name, const struct nk_hist *h)
{
	fprintf(o, "\"%s\": {\"mean\": %.1f, \"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, "
		   "\"p999\": %.1f, \"max\": %" PRIu64 "}",
		name, nk_hist_mean(h), nk_hist_quantile(h, 0.5), nk_hist_quantile(h, 0.9),
		nk_hist_quantile(h, 0.99), nk_hist_quantile(h, 0.999), h->total ? h->max : 0);
}

/* --mode hostile (docs/security.md, topology.hostile_clients): Poisson at
 * --rate until the end of the run, an ordinary write of a workload key turned
 * into adversarial traffic by the protocol's client_hostile (forged versions
 * and sequence numbers, server-only ops, replayed ids, spoofed replies,
 * oversized values), as the simulator's hostile clients send. The victim
 * whose identity it borrows is a client with a lower id (the orchestrator
 * gives hostile clients the last ids). A message larger than a datagram
 * goes out truncated, so oversized values arrive as truncated messages.
 * Nothing is listened for. A write that may take effect goes into the
 * history as a write of unknown outcome (status timeout), so that checkers
 * account for what it did to the honest clients' keys. */
struct hostile {
	const struct nk_host_ops *ops;
	void *hst;
	struct nk_workload *wl;
	struct nk_dgram *io;
	FILE *hf;
	uint32_t id, n_servers, key_size, next_id, batch;
	uint16_t port;
	uint64_t t0, t_end, value_tag;
	double mean_gap;
	uint64_t sent, send_err;
};

static void hostile_run(struct hostile *c, struct nk_rng *rng, uint8_t *keybuf, uint8_t *valbuf)
{
	static uint8_t frame[NK_DGRAM_PAYLOAD_MAX + 65536 + 256];
	struct nk_dgram_rx rx[MAX_BATCH];
	uint64_t next_send = c->t0 + (uint64_t)nk_rng_exp(rng, c->mean_gap);
	while (!stop_flag) {
		uint64_t now = nk_now_ns();
		if (now >= c->t_end)
			break;
		uint32_t nt = 0;
		while (next_send <= now && next_send < c->t_end && nt < c->batch) {
			uint8_t *b = nk_dgram_tx_slot(c->io);
			if (!b)
				break;
			const struct nk_rank_info *ri = &c->wl->ranks[nk_workload_sample(c->wl, rng)];
			uint32_t rid = c->next_id++;
			uint64_t vid = value_id(c->value_tag, c->id, rid);
			struct nk_req_spec sp = req_spec(ri, NK_KIND_WRITE, c->key_size, c->id, rid,
							 next_send, keybuf);
			uint16_t victim = (uint16_t)(c->id ? nk_rng_below(rng, c->id) : 0);
			struct nk_msg m;
			uint16_t dst = c->ops->client_hostile(c->hst, nk_rng_next(rng), &sp, victim,
							      c->n_servers, &m);
			if (m.value_len && !m.value) {
				/* our bytes: the id and its pattern, as honest writes carry
				 * (netkv/valpat.h), so that a reader checking each byte
				 * sees this write's id, not corruption */
				m.value = valbuf;
				nk_valpat_fill(valbuf, m.value_len < VALBUF ? m.value_len : VALBUF, vid);
			} else if (m.value_len >= 8 && m.value == valbuf) {
				nk_put64(valbuf, vid);
			}
			int n = nk_wire_encode(&m, frame, sizeof(frame));
			next_send += (uint64_t)nk_rng_exp(rng, c->mean_gap);
			if (n < 0) {
				c->send_err++;
				continue;
			}
			uint32_t len = n > NK_DGRAM_PAYLOAD_MAX ? NK_DGRAM_PAYLOAD_MAX : (uint32_t)n;
			memcpy(b, frame, len);
			nk_dgram_tx_commit(c->io, len, nk_node_ip(dst), c->port);
			if (c->hf && m.kind == NK_KIND_WRITE)
				fprintf(c->hf, "%u,%u,w,%u,%" PRIu64 ",-1,%" PRIu64 ",0,-1,timeout\n",
					c->id, rid, ri->key, now, vid);
			nt++;
		}
		if (nt) {
			unsigned w = nk_dgram_tx_flush(c->io);
			c->sent += w;
			c->send_err += nt - w;
		}
		while (nk_dgram_recv(c->io, rx, MAX_BATCH) > 0)
			; /* replies to forged requests: not ours to judge */
		if (next_send > now)
			nk_dgram_wait(c->io, NULL, 0, next_send < c->t_end ? next_send : c->t_end,
				      &stop_flag);
	}
}

/* A multiget for request sp (its first key drawn by the caller): its size
 * from the alias table, k - 1 more distinct keys from the popularity law (a
 * repeat is drawn again, a few times, as the simulator's clients do), the
 * host logic's packets encoded into the stack, the first into `first`.
 * Returns the packets queued (sp->nkeys set), 0 if the host logic made none. */
static int send_multiget(struct nk_req_spec *sp, const struct nk_workload *wl, struct nk_rng *rng,
			 const struct nk_alias *sizes, struct nk_req_key *mk,
			 uint8_t (*keys)[NK_MAX_KEY_LEN], uint8_t *scratch,
			 const struct nk_host_ops *ops, void *hst, struct nk_host_out *out,
			 struct nk_dgram *io, uint8_t *first, uint16_t port, uint32_t first_id)
{
	uint32_t want = nk_alias_sample(sizes, nk_rng_next(rng)) + 1, n = 1;
	uint32_t klen = sp->key_len, ids[NK_MAX_REQ_KEYS];
	memcpy(keys[0], sp->key, klen);
	mk[0] = (struct nk_req_key){.key = keys[0], .keyhash = sp->keyhash, .home = sp->home};
	ids[0] = first_id;
	for (uint32_t tries = 0; n < want && tries < 8 * want; tries++) {
		const struct nk_rank_info *ri = &wl->ranks[nk_workload_sample(wl, rng)];
		uint32_t j = 0;
		while (j < n && ids[j] != ri->key)
			j++;
		if (j < n)
			continue;
		ids[n] = ri->key;
		nk_key_bytes(ri->key, klen, keys[n]);
		mk[n] = (struct nk_req_key){.key = keys[n], .keyhash = ri->keyhash,
					    .value_len = ri->value_len, .home = ri->home};
		n++;
	}
	sp->kind = NK_KIND_MULTIGET;
	sp->nkeys = (uint8_t)n;
	sp->keys = mk;
	sp->buf = scratch;
	sp->buf_len = NK_MAX_REQ_KEYS * NK_MAX_KEY_LEN;
	int np = ops->client_multiget(hst, sp, out, NK_HOST_MAX_REQ_OUT);
	int queued = 0;
	for (int i = 0; i < np; i++) {
		uint8_t *b = i ? nk_dgram_tx_slot(io) : first;
		int len = b ? nk_wire_encode(&out[i].msg, b, NK_DGRAM_PAYLOAD_MAX) : -1;
		if (len < 0)
			continue;  /* never seen: the client times the multiget out */
		nk_dgram_tx_commit(io, (uint32_t)len, nk_node_ip(out[i].dst), port);
		queued++;
	}
	return np > 0 ? queued : 0;
}

int main(int argc, char **argv)
{
	const char *proto = NULL, *out_path = NULL, *hist_path = NULL, *mode = "kv", *target = NULL;
	const char *wl_kind = "zipf", *ring = "consistent", *params = NULL;
	uint32_t id = 0, n_servers = 1, n_clients = 1, keys = 1000, key_size = 64, value_size = 128;
	uint32_t vnodes = 16, retries = 0, batch = 32, payload = 64, n_coords = 0, mget_max = 0;
	double mget_w[NK_MAX_REQ_KEYS];
	struct nk_alias mget_alias = {0};
	double rate = 1000, duration = 1, drain = 0.5, alpha = 0.99, write_ratio = 0, timeout_us = 0;
	double window_ms = 0;
	uint64_t seed = 1, wl_seed = 1, start_at = 0, value_tag = 0, first_req_id = 1;
	int port = -1, start_stdin = 0;
	const char *io_opts = NULL;
	char ioerr[256];
	/* DPDK's EAL takes the arguments before `--` (the kernel stack none) */
	if (nk_dgram_preinit(&argc, &argv, ioerr, sizeof(ioerr))) {
		fprintf(stderr, "kvclient: %s\n", ioerr);
		return 2;
	}
	static const struct option opts[] = {
		{"protocol", required_argument, 0, 'p'}, {"id", required_argument, 0, 'i'},
		{"servers", required_argument, 0, 'S'},  {"clients", required_argument, 0, 'M'},
		{"rate", required_argument, 0, 'R'},     {"duration", required_argument, 0, 'D'},
		{"drain", required_argument, 0, 'd'},    {"workload", required_argument, 0, 'W'},
		{"alpha", required_argument, 0, 'A'},    {"keys", required_argument, 0, 'k'},
		{"key-size", required_argument, 0, 'K'}, {"value-size", required_argument, 0, 'V'},
		{"vnodes", required_argument, 0, 'n'},   {"ring", required_argument, 0, 'r'},
		{"wl-seed", required_argument, 0, 'w'},  {"write-ratio", required_argument, 0, 'x'},
		{"seed", required_argument, 0, 's'},     {"timeout-us", required_argument, 0, 'T'},
		{"retries", required_argument, 0, 'y'},  {"start-at", required_argument, 0, 'z'},
		{"window-ms", required_argument, 0, 'o'}, {"out", required_argument, 0, 'O'},
		{"history", required_argument, 0, 'H'},  {"batch", required_argument, 0, 'b'},
		{"mode", required_argument, 0, 'm'},     {"target", required_argument, 0, 'g'},
		{"payload", required_argument, 0, 'L'},  {"port", required_argument, 0, 'P'},
		{"params", required_argument, 0, 'a'},   {"tag", required_argument, 0, 't'},
		{"value-tag", required_argument, 0, 'v'}, {"first-req-id", required_argument, 0, 'F'},
		{"io", required_argument, 0, 'I'},
		{"mget-weights", required_argument, 0, 'G'}, {"coords", required_argument, 0, 'C'},
		{"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'p': proto = optarg; break;
		case 'i': id = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'S': n_servers = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'M': n_clients = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'R': rate = strtod(optarg, NULL); break;
		case 'D': duration = strtod(optarg, NULL); break;
		case 'd': drain = strtod(optarg, NULL); break;
		case 'W': wl_kind = optarg; break;
		case 'A': alpha = strtod(optarg, NULL); break;
		case 'k': keys = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'K': key_size = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'V': value_size = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'n': vnodes = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'r': ring = optarg; break;
		case 'w': wl_seed = strtoull(optarg, NULL, 0); break;
		case 'x': write_ratio = strtod(optarg, NULL); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'T': timeout_us = strtod(optarg, NULL); break;
		case 'y': retries = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'z':
			if (!strcmp(optarg, "stdin"))
				start_stdin = 1;
			else
				start_at = strtoull(optarg, NULL, 0);
			break;
		case 'o': window_ms = strtod(optarg, NULL); break;
		case 'O': out_path = optarg; break;
		case 'H': hist_path = optarg; break;
		case 'b': batch = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'm': mode = optarg; break;
		case 'g': target = optarg; break;
		case 'L': payload = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'P': port = atoi(optarg); break;
		case 'a': params = optarg; break;
		case 't': break;
		case 'v': value_tag = strtoull(optarg, NULL, 0) & 0xFFFF; break;
		case 'F': first_req_id = strtoull(optarg, NULL, 0); break;
		case 'I': io_opts = optarg; break;
		case 'C': n_coords = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'G':
			mget_max = parse_weights(optarg, mget_w, NK_MAX_REQ_KEYS);
			if (!mget_max) {
				fprintf(stderr, "kvclient: --mget-weights %s: not 1..%d comma-separated "
						"weights >= 0 with a positive sum\n", optarg, NK_MAX_REQ_KEYS);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	int m_kv = !strcmp(mode, "kv"), m_echo = !strcmp(mode, "echo"), m_blast = !strcmp(mode, "blast");
	int m_hostile = !strcmp(mode, "hostile");
	int keyed = m_kv || m_hostile;   /* a protocol's client: host logic, workload */
	if (optind != argc || !(keyed || m_echo || m_blast) || (keyed && !proto) ||
	    (!keyed && !target) || (m_hostile && rate <= 0) || rate < 0 || duration <= 0 || batch == 0 || batch > MAX_BATCH ||
	    key_size == 0 || key_size > NK_MAX_KEY_LEN || payload < 16 || payload > 1472 ||
	    n_servers == 0 || window_ms < 0) {
		usage(stderr);
		return 2;
	}

	/* protocol, workload */
	const struct nk_host_ops *ops = NULL;
	void *hst = NULL;
	struct nk_workload *wl = NULL;
	struct target tgt = {0};
	if (keyed) {
		ops = nk_host_find(proto);
		if (!ops || !ops->client_request) {
			fprintf(stderr, "kvclient: no host logic named '%s'\n", proto);
			return 2;
		}
		if (m_hostile && !ops->client_hostile) {
			fprintf(stderr, "kvclient: protocol '%s' has no hostile traffic "
					"(--mode hostile needs host logic with client_hostile)\n", proto);
			return 2;
		}
		if (mget_max && !ops->client_multiget) {
			fprintf(stderr, "kvclient: protocol '%s' has no multigets (drop --mget-weights)\n",
				proto);
			return 2;
		}
		if (mget_max && (hist_path || retries)) {
			fprintf(stderr, "kvclient: --mget-weights: not with --history or --retries > 0 "
					"(a multiget is not resent; its history has no single key)\n");
			return 2;
		}
		if (mget_max && nk_alias_init(&mget_alias, mget_w, mget_max)) {
			fprintf(stderr, "kvclient: out of memory\n");
			return 1;
		}
		hst = calloc(1, ops->client_state_size ? ops->client_state_size : 1);
		struct nk_host_cfg hc = {.n_servers = n_servers, .n_clients = n_clients, .id = id,
					 .seed = seed, .params = params, .n_coords = n_coords};
		if (!hst || (ops->client_init && ops->client_init(hst, &hc))) {
			fprintf(stderr, "kvclient: host logic '%s' init failed\n", proto);
			return 2;
		}
		if (port < 0)
			port = ops->udp_port;
		struct nk_workload_cfg wc = {
			.kind = !strcmp(wl_kind, "uniform") ? NK_WL_UNIFORM
				: !strcmp(wl_kind, "ycsb") ? NK_WL_YCSB : NK_WL_ZIPF,
			.n_keys = keys, .alpha = alpha, .seed = wl_seed, .key_size = key_size,
			.n_servers = n_servers, .vnodes = vnodes,
			.ring_mode = !strcmp(ring, "equal") ? NK_RING_EQUAL_RANGES
				: !strcmp(ring, "mod") ? NK_RING_HASH_MOD : NK_RING_CONSISTENT,
			.n_value_classes = 1, .value_sizes = {value_size}, .value_weights = {1.0},
		};
		if (strcmp(wl_kind, "zipf") && strcmp(wl_kind, "uniform") && strcmp(wl_kind, "ycsb")) {
			fprintf(stderr, "kvclient: workload '%s' not supported (zipf, uniform, ycsb)\n", wl_kind);
			return 2;
		}
		char err[256];
		wl = nk_workload_new(&wc, err, sizeof(err));
		if (!wl) {
			fprintf(stderr, "kvclient: workload: %s\n", err);
			return 2;
		}
	} else if (parse_target(target, &tgt)) {
		fprintf(stderr, "kvclient: bad --target %s (IP:PORT)\n", target);
		return 2;
	}

	/* outstanding table: enough slots for everything in flight */
	double span = duration + drain + (timeout_us > 0 ? timeout_us * 1e-6 * (retries + 1) : 0);
	uint64_t need = (uint64_t)(rate * span * 1.2) + 1024, cap = 1024;
	while (cap < need && cap < (1u << 24))
		cap <<= 1;
	struct req *tab = calloc(cap, sizeof(*tab));
	struct tmo *tq = timeout_us > 0 ? calloc(cap, sizeof(*tq)) : NULL;
	uint64_t tq_head = 0, tq_tail = 0, tmo_ns = (uint64_t)(timeout_us * 1000.0);
	struct nk_hist h, hr; /* latency from the intended send; round trip from the real one */
	uint64_t n_windows = 0, win_ns = (uint64_t)(window_ms * 1e6);
	if (win_ns) {
		n_windows = (uint64_t)((duration + drain) * 1e9 / (double)win_ns) + 2;
		if (n_windows > MAX_WINDOWS)
			n_windows = MAX_WINDOWS;
	}
	struct window *win = n_windows ? calloc(n_windows, sizeof(*win)) : NULL;
	/* completed requests by who answered: per server, the switch itself,
	 * another node (a coordinator) */
	uint64_t *per_server = calloc(n_servers + 2, sizeof(uint64_t));
	uint64_t *sw_replies = per_server ? per_server + n_servers : NULL;
	uint64_t *other_replies = per_server ? per_server + n_servers + 1 : NULL;
	/* a format that names its replier (nk_wire_has) names none in the
	 * switch's own reply (NK_SERVER_NONE); without one, the switch never
	 * completes a request (it answers no read in such a protocol's
	 * pipeline), and the sender's address says which server answered */
	int names_replier = m_kv && (nk_wire_has(ops->proto) & NK_WIRE_HAS_REPLIER);
	if (!tab || (timeout_us > 0 && !tq) || nk_hist_init(&h, NK_HIST_SUB_BITS, NK_HIST_MAX_BITS) ||
	    nk_hist_init(&hr, NK_HIST_SUB_BITS, NK_HIST_MAX_BITS) ||
	    (n_windows && !win) || !per_server) {
		fprintf(stderr, "kvclient: out of memory\n");
		return 1;
	}
	for (uint64_t i = 0; i < n_windows; i++)
		if (nk_hist_init(&win[i].h, 5, NK_HIST_MAX_BITS)) {
			fprintf(stderr, "kvclient: out of memory\n");
			return 1;
		}
	FILE *hf = NULL;
	if (hist_path) {
		hf = fopen(hist_path, "w");
		if (!hf) {
			fprintf(stderr, "kvclient: %s: %s\n", hist_path, strerror(errno));
			return 1;
		}
		setvbuf(hf, NULL, _IOFBF, 1 << 20);
		fputs("client,req_id,op,key,invoke_ns,complete_ns,value,ver,server,status\n", hf);
	}

	/* the host stack; a kv client is node n_servers + id of the rack plan */
	if (port > 65535) {
		fprintf(stderr, "kvclient: --port %d is not a UDP port\n", port);
		return 2;
	}
	struct nk_dgram_cfg iocfg = {.port = (uint16_t)(keyed ? port : 0), .node = n_servers + id,
				     .opts = io_opts};
	struct nk_dgram *io = nk_dgram_open(&iocfg, ioerr, sizeof(ioerr));
	if (!io) {
		fprintf(stderr, "kvclient: %s\n", ioerr);
		return 1;
	}
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	struct sigaction sa = {.sa_handler = on_stop};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* a SIGKILLed orchestrator must not leave us behind: SIGTERM stops us
	 * the same way as a normal end */
	if (nk_exit_with_parent(SIGTERM) < 0) {
		fprintf(stderr, "kvclient: the process that started it is gone\n");
		return 1;
	}

	struct nk_dgram_rx rx[MAX_BATCH];
	static uint8_t keybuf[NK_MAX_KEY_LEN], valbuf[VALBUF];
	/* a multiget's keys, and the scratch its packets point into */
	static uint8_t mkeys[NK_MAX_REQ_KEYS][NK_MAX_KEY_LEN], mscratch[NK_MAX_REQ_KEYS * NK_MAX_KEY_LEN];
	static struct nk_req_key mreq[NK_MAX_REQ_KEYS];
	static struct nk_host_out mout[NK_HOST_MAX_REQ_OUT];
	const struct resender rs = {.ops = ops, .hst = hst, .wl = wl, .key_size = key_size,
				    .client_id = id, .io = io, .port = port,
				    .keybuf = keybuf, .valbuf = valbuf, .out = mout};

	struct nk_rng rng;
	nk_rng_seed(&rng, seed, 0xC11E + id);
	if (start_stdin) {
		start_at = handshake_start();
		if (!start_at) {
			fprintf(stderr, "kvclient %u: --start-at stdin: no start time (CLOCK_MONOTONIC ns) "
					"on stdin\n", id);
			return 1;
		}
	}
	uint64_t t0 = start_at ? start_at : nk_now_ns();
	uint64_t t_end = t0 + (uint64_t)(duration * 1e9), t_stop = t_end + (uint64_t)(drain * 1e9);
	{
		uint64_t now = nk_now_ns();
		if (now >= t_end) {
			fprintf(stderr, "kvclient %u: ready %.1f ms after the end of its run (start %" PRIu64
					", end %" PRIu64 "): nothing would be measured; start it earlier "
					"(--start-at stdin)\n",
				id, (double)(now - t_end) * 1e-6, t0, t_end);
			return 1;
		}
	}
	sleep_until(t0);
	/* stray datagrams that arrived before the start (a previous point's
	 * stragglers) are not ours */
	while (nk_dgram_recv(io, rx, MAX_BATCH) > 0)
		;
	if (m_hostile) {
		struct hostile hc = {.ops = ops, .hst = hst, .wl = wl, .io = io, .hf = hf, .id = id,
				     .n_servers = n_servers, .key_size = key_size, .batch = batch,
				     .next_id = (uint32_t)(first_req_id ? first_req_id : 1),
				     .port = (uint16_t)port, .t0 = t0, .t_end = t_end,
				     .value_tag = value_tag, .mean_gap = 1e9 / rate};
		hostile_run(&hc, &rng, keybuf, valbuf);
		if (hf)
			fclose(hf);
		FILE *out = out_path ? fopen(out_path, "w") : stdout;
		if (!out) {
			fprintf(stderr, "kvclient: %s: %s\n", out_path, strerror(errno));
			return 1;
		}
		fprintf(out, "{\"kvclient\": %u, \"mode\": \"hostile\", \"rate\": %.3f, "
			     "\"duration_s\": %.6f, \"t0_ns\": %" PRIu64 ", \"hostile_sent\": %" PRIu64
			     ", \"send_errors\": %" PRIu64 ", \"next_req_id\": %u",
			id, rate, duration, t0, hc.sent, hc.send_err, hc.next_id);
		nk_dgram_json(io, out);
		fputs("}\n", out);
		if (out != stdout)
			fclose(out);
		else
			fflush(stdout);
		free(tab);
		free(tq);
		free(per_server);
		nk_hist_free(&h);
		nk_hist_free(&hr);
		for (uint64_t i = 0; i < n_windows; i++)
			nk_hist_free(&win[i].h);
		free(win);
		if (ops->client_fini)
			ops->client_fini(hst);
		free(hst);
		nk_workload_free(wl);
		nk_dgram_close(io);
		return 0;
	}
	double mean_gap = rate > 0 ? 1e9 / rate : 0;
	uint64_t next_send = t0 + (rate > 0 ? (uint64_t)nk_rng_exp(&rng, mean_gap) : 0);
	uint64_t issued = 0, completed = 0, timeouts = 0, n_retries = 0, dup = 0, bad = 0, late = 0;
	uint64_t overrun = 0, send_err = 0, outstanding = 0, unknown = 0, sent_pkts = 0, last_done = t0;
	uint64_t forged = 0, multigets = 0, request_keys = 0;
	uint64_t bad_by[WIRE_ERRS] = {0};
	/* req_ids go on from one run to the next on the same servers (--first-req-id):
	 * Pegasus-AMO servers remember recent req_ids per client */
	uint32_t next_id = (uint32_t)(first_req_id ? first_req_id : 1);

	while (!stop_flag) {
		uint64_t now = nk_now_ns();
		if (now >= t_stop || (now >= t_end && outstanding == 0 && !m_blast))
			break;
		/* 1. every request whose intended time has come */
		uint32_t nt = 0, npk = 0;  /* requests, and packets queued since the last flush */
		while (now < t_end && next_send <= now && nt < batch) {
			if (npk + NK_HOST_MAX_REQ_OUT > NK_DGRAM_TX_MAX) {  /* room for a multiget */
				unsigned w = nk_dgram_tx_flush(io);
				sent_pkts += w;
				send_err += npk - w;
				npk = 0;
			}
			/* no transmit buffer now (the stack counts it): due requests
			 * wait for the flush below */
			uint8_t *b = nk_dgram_tx_slot(io);
			if (!b)
				break;
			uint32_t rid = next_id++;
			struct req *q = &tab[rid & (cap - 1)];
			if (q->state == S_WAIT) { /* the ring lapped a request: it is lost */
				overrun++;
				outstanding--;
				if (tab && q->state == S_WAIT && hf)
					fprintf(hf, "%u,%u,%c,%u,%" PRIu64 ",-1,%" PRIu64 ",0,-1,lost\n", id,
						q->req_id, q->kind == NK_KIND_WRITE ? 'w' : 'r', q->key,
						q->intended_ns, q->value_id);
			}
			q->req_id = rid;
			q->intended_ns = next_send;
			q->sent_ns = now;
			q->attempts = 1;
			q->state = S_WAIT;
			if (m_kv) {
				uint32_t rank = nk_workload_sample(wl, &rng);
				const struct nk_rank_info *ri = &wl->ranks[rank];
				int w = write_ratio > 0 && nk_rng_double(&rng) < write_ratio;
				q->key = ri->key;
				q->rank = rank;
				q->kind = w ? NK_KIND_WRITE : NK_KIND_READ;
				q->value_id = w ? value_id(value_tag, id, rid) : 0;
				struct nk_req_spec sp = req_spec(ri, q->kind, key_size, id, rid, next_send,
								 keybuf);
				if (mget_max && !w) {
					int n = send_multiget(&sp, wl, &rng, &mget_alias, mreq, mkeys, mscratch,
							      ops, hst, mout, io, b, (uint16_t)port, ri->key);
					if (n <= 0) {
						send_err++;
						q->state = S_FREE;
						next_send += (uint64_t)nk_rng_exp(&rng, mean_gap);
						continue;
					}
					q->kind = NK_KIND_MULTIGET;
					multigets++;
					request_keys += sp.nkeys;
					npk += (uint32_t)n;
					goto sent;
				}
				request_keys++;
				struct nk_msg m;
				uint16_t dst = ops->client_request(hst, &sp, &m);
				if (w && m.value_len >= 8) {
					/* every byte, so that a reader can check each at its place */
					nk_valpat_fill(valbuf, m.value_len < VALBUF ? m.value_len : VALBUF,
						       q->value_id);
					m.value = valbuf;
				}
				int n = queue_request(ops, hst, &m, dst, mout, io, b, (uint16_t)port);
				if (n <= 0) {
					send_err++;
					q->state = S_FREE;
					next_send += (uint64_t)nk_rng_exp(&rng, mean_gap);
					continue;
				}
				npk += (uint32_t)n;
			} else {
				memset(b, 0, payload);
				nk_put64(b, rid);
				nk_put64(b + 8, next_send);
				nk_dgram_tx_commit(io, payload, tgt.ip, tgt.port);
				q->kind = NK_KIND_READ;
				npk++;
			}
		sent:
			if (tq) {
				tq[tq_tail & (cap - 1)] = (struct tmo){now + tmo_ns, rid, 1};
				tq_tail++;
			}
			if (win) {
				uint64_t wi = (next_send - t0) / win_ns;
				if (wi < n_windows)
					win[wi].issued++;
			}
			issued++;
			outstanding++;
			if (m_blast) {
				q->state = S_FREE;
				outstanding--;
			}
			nt++;
			next_send += rate > 0 ? (uint64_t)nk_rng_exp(&rng, mean_gap) : 0;
			if (rate == 0)
				next_send = now;
		}
		if (npk) {
			unsigned w = nk_dgram_tx_flush(io);
			sent_pkts += w;
			send_err += npk - w;
		}

		/* 2. replies */
		int got = 0;
		int r = m_blast ? 0 : (int)nk_dgram_recv(io, rx, MAX_BATCH);
		uint64_t rnow = r > 0 ? nk_now_ns() : now;
		for (int i = 0; i < r; i++) {
			uint32_t len = rx[i].len;
			uint32_t rid;
			struct nk_msg m;
			if (m_kv) {
				int e = nk_wire_decode(ops->proto, rx[i].data, len, &m);
				if (e < 0) {
					bad++;
					bad_by[-e < WIRE_ERRS ? -e : 0]++;
					continue;
				}
				rid = ops->reply_req_id ? ops->reply_req_id(&m) : m.req_id;
			} else {
				if (len < 16) {
					bad++;
					continue;
				}
				rid = (uint32_t)nk_get64(rx[i].data);
			}
			got++;
			struct req *q = &tab[rid & (cap - 1)];
			if (m_kv && !reply_source_ok(&rx[i], n_servers, n_servers + id,
						     n_servers + n_clients, n_coords, port)) {
				forged++;   /* not from a server or the switch */
				continue;
			}
			if (q->req_id != rid || q->state != S_WAIT) {
				if (q->req_id == rid)
					dup++;
				else
					unknown++;
				continue;
			}
			/* a control message asking this request to be resent (NetLR's
			 * NACK: a Hermes write stalled on an Invalid key) is one too */
			int resend_ask = m_kv && m.kind == NK_KIND_CONTROL &&
					 ops->client_reply(hst, &m) == NK_REPLY_RETRY;
			if (m_kv && ((!ops->no_client_id && m.client_id != id) ||
				     (m.kind != reply_kind(q->kind) && !resend_ask))) {
				forged++;   /* not the answer to this request */
				continue;
			}
			if (m_kv) {
				int v = ops->client_reply(hst, &m);
				if (v == NK_REPLY_IGNORE)
					continue;
				if (v == NK_REPLY_RETRY) {
					/* resend at once with the same req_id */
					if (resend(&rs, q))
						n_retries++;
					q->sent_ns = rnow;
					continue;
				}
				int32_t from = names_replier ? (m.server_id < n_servers ? m.server_id : -1)
							     : nk_ip_node(rx[i].src_ip);
				if (from >= 0 && (uint32_t)from < n_servers)
					per_server[from]++;
				else if (names_replier)
					(*sw_replies)++;
				else
					(*other_replies)++;
			}
			uint64_t lat = rnow > q->intended_ns ? rnow - q->intended_ns : 0;
			nk_hist_add(&h, lat);
			nk_hist_add(&hr, rnow > q->sent_ns ? rnow - q->sent_ns : 0);
			if (win) {
				uint64_t wi = (rnow - t0) / win_ns;
				if (wi < n_windows) {
					win[wi].completed++;
					nk_hist_add(&win[wi].h, lat);
				}
				wi = (q->intended_ns - t0) / win_ns;
				if (wi < n_windows)
					win[wi].done++;
			}
			if (rnow > t_end)
				late++;
			if (hf) {
				uint64_t vid = q->value_id;
				if (m_kv && q->kind == NK_KIND_READ)
					vid = ops->read_value_id ? ops->read_value_id(hst, &m)
					      : m.value && m.value_len >= 8 ? nk_get64(m.value) : 0;
				fprintf(hf, "%u,%u,%c,%u,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%d,%s\n",
					id, rid, q->kind == NK_KIND_WRITE ? 'w' : 'r', q->key, q->intended_ns,
					rnow, vid, m_kv ? m.ver : 0, m_kv ? (int)m.server_id : -1,
					m_kv && m.result == NK_RESULT_NOT_FOUND ? "not_found" : "ok");
			}
			q->state = S_FREE;
			completed++;
			outstanding--;
			last_done = rnow;
		}

		/* 3. timeouts, in deadline order: retry with the same req_id, or give up */
		while (tq && tq_head != tq_tail && tq[tq_head & (cap - 1)].deadline <= rnow) {
			struct tmo t = tq[tq_head & (cap - 1)];
			tq_head++;
			struct req *q = &tab[t.req_id & (cap - 1)];
			if (q->req_id != t.req_id || q->state != S_WAIT || q->attempts != t.attempt)
				continue;
			if (q->attempts <= retries && m_kv) {
				q->attempts++;
				(void)resend(&rs, q);
				n_retries++;
				q->sent_ns = rnow;
				tq[tq_tail & (cap - 1)] = (struct tmo){rnow + tmo_ns, q->req_id, q->attempts};
				tq_tail++;
				continue;
			}
			timeouts++;
			outstanding--;
			q->state = S_FREE;
			if (hf)
				fprintf(hf, "%u,%u,%c,%u,%" PRIu64 ",-1,%" PRIu64 ",0,-1,timeout\n", id, q->req_id,
					q->kind == NK_KIND_WRITE ? 'w' : 'r', q->key, q->intended_ns, q->value_id);
		}

		/* 4. nothing to do right now: sleep until the next send (or a reply) */
		if (got || r > 0)
			continue;
		uint64_t wake = now < t_end ? next_send : t_stop;
		if (tq && tq_head != tq_tail && tq[tq_head & (cap - 1)].deadline < wake)
			wake = tq[tq_head & (cap - 1)].deadline;
		if (wake > t_stop)
			wake = t_stop;
		if (m_blast || rate == 0)
			continue;
		nk_dgram_wait(io, NULL, 0, wake, &stop_flag);
	}

	/* requests still outstanding: neither completed nor timed out */
	if (hf) {
		for (uint64_t i = 0; i < cap; i++) {
			struct req *q = &tab[i];
			if (q->state == S_WAIT)
				fprintf(hf, "%u,%u,%c,%u,%" PRIu64 ",-1,%" PRIu64 ",0,-1,unfinished\n", id,
					q->req_id, q->kind == NK_KIND_WRITE ? 'w' : 'r', q->key, q->intended_ns,
					q->value_id);
		}
		fclose(hf);
	}

	FILE *out = out_path ? fopen(out_path, "w") : stdout;
	if (!out) {
		fprintf(stderr, "kvclient: %s: %s\n", out_path, strerror(errno));
		return 1;
	}
	uint64_t bad_total = bad;
	fprintf(out, "{\"kvclient\": %u, \"mode\": \"%s\", \"rate\": %.3f, \"duration_s\": %.6f, "
		     "\"t0_ns\": %" PRIu64 ", \"issued\": %" PRIu64 ", \"sent_packets\": %" PRIu64
		     ", \"completed\": %" PRIu64 ", \"timeouts\": %" PRIu64 ", \"retries\": %" PRIu64
		     ", \"unfinished\": %" PRIu64 ", \"overrun\": %" PRIu64 ", \"dup_replies\": %" PRIu64
		     ", \"unknown_replies\": %" PRIu64 ", \"forged_replies\": %" PRIu64
		     ", \"bad_replies\": %" PRIu64 ", \"send_errors\": %" PRIu64
		     ", \"late\": %" PRIu64 ", \"last_done_s\": %.6f, \"next_req_id\": %u, "
		     "\"multigets\": %" PRIu64 ", \"request_keys\": %" PRIu64 ", ",
		id, mode, rate, duration, t0, issued, sent_pkts, completed, timeouts, n_retries,
		outstanding, overrun, dup, unknown, forged, bad_total, send_err, late,
		(double)(last_done - t0) * 1e-9, next_id, multigets, request_keys);
	json_latency(out, "latency_ns", &h);
	fputs(", ", out);
	json_latency(out, "rtt_ns", &hr);
	fputs(", ", out);
	json_hist(out, &h);
	fputs(", \"server_replies\": [", out);
	for (uint32_t s = 0; s < n_servers; s++)
		fprintf(out, "%s%" PRIu64, s ? ", " : "", per_server[s]);
	fprintf(out, "], \"switch_replies\": %" PRIu64 ", \"other_replies\": %" PRIu64, *sw_replies,
		*other_replies);
	nk_dgram_json(io, out);
	fprintf(out, ", \"timeline\": {\"window_s\": %.6f, \"issued\": [", win_ns * 1e-9);
	for (uint64_t i = 0; i < n_windows; i++)
		fprintf(out, "%s%" PRIu64, i ? ", " : "", win[i].issued);
	fputs("], \"completed\": [", out);
	for (uint64_t i = 0; i < n_windows; i++)
		fprintf(out, "%s%" PRIu64, i ? ", " : "", win[i].completed);
	fputs("], \"lost\": [", out);
	for (uint64_t i = 0; i < n_windows; i++)
		fprintf(out, "%s%" PRIu64, i ? ", " : "", win[i].issued - win[i].done);
	/* each window's buckets: the target pools every client's before taking
	 * a quantile (a max over clients' p99s is not the rack's p99) */
	fputs("], \"sub_bits\": 5, \"hist\": [", out);
	for (uint64_t i = 0; i < n_windows; i++) {
		fputs(i ? ", {" : "{", out);
		json_hist(out, &win[i].h);
		fputs("}", out);
	}
	fputs("]}}\n", out);
	if (out != stdout)
		fclose(out);
	else
		fflush(stdout);

	for (uint64_t i = 0; i < n_windows; i++)
		nk_hist_free(&win[i].h);
	free(win);
	nk_hist_free(&h);
	nk_hist_free(&hr);
	free(tab);
	free(tq);
	free(per_server);
	if (ops && ops->client_fini)
		ops->client_fini(hst);
	free(hst);
	nk_workload_free(wl);
	nk_alias_free(&mget_alias);
	nk_dgram_close(io);
	return 0;
}
