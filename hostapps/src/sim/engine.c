/*
 * engine.c - the discrete-event engine behind target=sim (model: sim.h and
 * docs/simulator.md).
 *
 * Layout of this file, top to bottom: event heap, packet pool, the simulated
 * store, links (serialization, faults), the switch (pipeline, multicast,
 * recirculation, CPU channel), servers (workers, FIFO, service times),
 * clients (arrivals, slots, timeouts, replies), the main loop, and the API.
 *
 * Nodes: servers 0..S-1, clients S..S+M-1. Ports: port p < S+M reaches node
 * p; then the CPU port, then the recirculation port. With racks (cfg.racks
 * >= 2) there are 1 + R switches: switch 0 the spine (clients and
 * coordinators on it), switch 1 + r rack r's leaf (servers r*P .. with P =
 * S/R). Each switch's pipeline sees itself as one rack's switch (sim.h
 * "Racks"): its own node ids and ports, translated here at its edge.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/hist.h"
#include "netkv/host.h"
#include "netkv/io.h"
#include "netkv/pcap.h"
#include "netkv/pipeline.h"
#include "netkv/rng.h"
#include "netkv/sim.h"
#include "netkv/wire.h"

#define PS_PER_NS 1000ULL
#define NONE32 0xFFFFFFFFu
#define PRE_RING 16u
#define PRE_ALIAS 8u  /* draw and prefetch the alias entry this many arrivals ahead */
#define PRE_RANK 4u   /* resolve and prefetch the rank entry this many ahead */
#define KEY_CACHE_RANKS (1u << 17)  /* key bytes kept for the hottest ranks */
/* the per-hop path, inlined where GCC would not: a call there costs about
 * as much as the work it does */
#define HOP_INLINE static inline __attribute__((always_inline))

enum ev_type {
	EV_SWITCH_IN = 1,
	EV_HOST_IN = 2,
	EV_DONE = 3,
	EV_TIMEOUT = 4,
	EV_CRASH = 5,
	EV_RESTART = 6,
	EV_DYNAMICS = 7,
	EV_HOSTILE = 8,     /* idx: the hostile client */
	EV_SWITCH_DOWN = 9,
	EV_SWITCH_UP = 10,
};

struct ev {
	uint64_t t;     /* ps */
	uint32_t seq;   /* insertion order, wrap-safe compare */
	uint32_t pl;    /* (index << 4) | type */
};

/* A FIFO of events in (t, seq) order: a ring of cap (a power of two). */
struct lane {
	struct ev *ev;
	uint32_t head, n, cap;
};

/* Where an event waits. A packet on a link arrives after the one before it
 * on that link, and links share one latency, so arrivals over the host
 * links, and a recirculation port's passes, and timers (a fixed timeout
 * after a send), are pushed almost always in time order: those lanes take
 * them; the rest (service completions, out-of-order arrivals) use the heap. */
enum ev_lane {
	LANE_UP,       /* host -> switch (and trunks) */
	LANE_DOWN,     /* switch -> host */
	LANE_RECIRC,   /* a recirculation port's passes */
	LANE_TIMER,    /* request timeouts */
	N_LANES,
	LANE_HEAP = N_LANES,
};

struct pkt {
	struct nk_msg m;
	uint64_t serial;    /* request serial (matches the client slot) */
	uint32_t slot;      /* client request slot, NONE32 if none */
	uint32_t next;      /* free list / server queue / output chain */
	uint32_t out_head;  /* server: outputs produced at service start */
	uint32_t inc;       /* server incarnation at service start */
	uint32_t worker;    /* by-key dispatch: the worker serving it */
	uint16_t src, dst;  /* node ids */
	uint16_t ingress;   /* switch ingress port */
	uint16_t sw;        /* the switch it enters (or last entered) */
	uint16_t wire_len;
	uint8_t from_cpu;
	uint8_t recirculated;
	uint8_t by_switch;  /* the switch answered (act.switch_reply) in its last pass */
};

struct slot {
	uint64_t intended;  /* ps */
	uint64_t serial;
	uint64_t deadline;  /* ps, current timeout */
	struct nk_rank_info ri;
	uint32_t client;
	uint32_t next_free;
	uint32_t rank;      /* popularity rank drawn (key-bytes cache index) */
	uint16_t tries;
	uint8_t live;
	uint8_t write;
};

struct store_ent {
	uint64_t fp;
	uint64_t ver;       /* 0 = empty */
	uint32_t keyhash;
	uint32_t value_len;
};

struct sim_store {
	struct store_ent *e;
	uint32_t cap;       /* power of two */
	uint32_t count;
	const struct nk_workload *wl;
};

/* a FIFO of packets waiting for a worker, linked through pk[].next */
struct pqueue {
	uint32_t head, tail, len;
};

struct wqueue {
	struct pqueue q;
	uint32_t busy;
};

/* a server, or a coordinator host (srv[S + c]: node S + M + c) */
struct server {
	void *hstate;
	uint32_t workers;
	struct wqueue *wq;  /* by-key dispatch: one queue per worker */
	struct sim_store store;
	struct nk_store nkstore;
	double cap;
	uint32_t busy;
	struct pqueue q;    /* one queue for all workers (no by-key dispatch) */
	uint32_t inc;
	uint8_t up;
	uint64_t served;
};

struct client {
	void *hstate;
	uint64_t *core_free; /* ps, one per core (topology.client_cores) */
	uint64_t tx_next;   /* ps: its next packet leaves no earlier (client_max_rps) */
};

struct vown {
	uint64_t ver;       /* 0 = empty */
	uint64_t owner;     /* request serial, or NK_SIM_OWNER_INITIAL */
	uint32_t keyhash;
};

struct cpu_item {
	struct nk_msg m;
	uint16_t src;
};

struct mcast_group {
	uint16_t *ports;
	uint32_t n;
};

/* One switch: its own pipeline state, node -> port map (node_fwd),
 * multicast groups and controller channel, as each physical switch has. */
struct sw {
	void *pstate;
	uint16_t *g2l;                /* racks: global node (and controller) -> its node id here */
	uint32_t n_local, cpu_port, recirc_port;  /* its nodes 0..n_local-1, then CPU, recirc */
	uint16_t *node_port;
	struct nk_pipeline_cfg pcfg;  /* to restart the pipeline with */
	struct mcast_group *mcast;    /* NK_MAX_MCAST_GROUPS */
	struct cpu_item *cpuq;
	uint32_t cpu_head, cpu_len;
	uint64_t switch_free;         /* ps: its FIFO is free from then (switch_mpps) */
	uint64_t recirc_free;         /* ps: its recirculation port is free from then */
	uint64_t packets, drops;      /* processed; dropped by it (pipeline, no route) */
};

struct nk_sim {
	struct nk_sim_cfg cfg;
	const struct nk_workload *wl;
	const struct nk_pipeline_ops *pipe;
	const struct nk_host_ops *host;
	/* the codec's size function for the protocol's own messages (wire_len) */
	nk_wire_size_fn wire_size;
	uint8_t wire_proto;
	struct sw *sw;                /* n_sw switches: [0] the only one, or the spine */
	uint32_t n_sw, ctl_sw;        /* ctl_sw: the one the controller hooks act on */
	uint32_t R, per_rack;         /* racks (0: one switch) and servers per rack */
	uint64_t *trunk_free;         /* 2R links: [r] spine -> leaf r, [R + r] leaf r -> spine */
	uint64_t *trunk_bytes;
	uint8_t order_free;           /* the pipeline's, unless a switch outage is scheduled */
	uint8_t in_order;             /* every packet meets the switch in time order (outage, switch_mpps) */
	uint8_t switch_down;
	/* switch outages' stop times (ps, ascending; all scheduled before the
	 * run), and when the packet the switch handles now reached it: a packet
	 * inside the switch at a stop dies with it (outage_kills) */
	uint64_t *downs;
	uint32_t n_downs;
	uint64_t pass_in;
	uint32_t S, M, C, n_nodes, cpu_port, recirc_port, n_ports;
	uint32_t H;                 /* hostile clients: M - H .. M - 1 */
	double hostile_gap_ps;

	/* time */
	uint64_t now, end_arrivals, end;
	int extended;               /* nk_sim_extend: controller traffic after the run */
	double next_arrival;        /* ps, exact accumulator */
	uint64_t arr_t;             /* next arrival (ps), UINT64_MAX = none */
	double mean_gap_ps;
	int finished;

	/* events: a heap, and FIFO lanes for events that mostly come in time
	 * order (ev_push); pop takes the least (t, seq) of the heap's top and
	 * the lanes' heads, so the order is the one a single heap gives */
	struct ev *heap;
	uint32_t heap_n, heap_cap;
	/* the top was taken (ev_take) but still fills heap[0]: the next insert
	 * takes its place (one sift instead of a pop and an insert; a
	 * completion mostly starts the next service at once), anything else
	 * removes it first (heap_settle) */
	uint8_t heap_hole;
	struct lane lane[N_LANES];
	uint32_t rare_live;         /* events in LANE_RECIRC or LANE_TIMER (ev_next skips both if 0) */
	uint32_t seq;
	uint64_t events;

	/* packets */
	struct pkt *pk;
	uint32_t pk_cap, pk_free;

	/* request slots */
	struct slot *slots;
	uint32_t slot_cap, slot_free;
	uint64_t next_serial;
	uint64_t outstanding;

	/* links: free-at times (ps) */
	uint64_t *up_free;          /* per node */
	uint64_t *down_free;        /* per port */
	uint64_t *up_bytes;         /* per node: bytes serialized on its uplink */
	uint64_t *down_bytes;       /* per port: ... on its downlink */
	uint64_t client_gap_ps;     /* 1 / client_max_rps (0 = unlimited) */
	uint64_t switch_pkt_ps;     /* 1 / switch_mpps (0 = unlimited) */
	uint64_t ser_fx;            /* serialization: ps per byte << 16 (0 = none) */
	double recirc_ps_per_byte;
	uint64_t link_ps, switch_ps, extra_ps, cpu_ps;
	uint8_t *fault_up;          /* per node: faults on its uplink */
	uint8_t *fault_down;        /* per port: faults on its downlink */
	int fast_client;
	uint32_t client_cores;  /* cores per client host: a c-server FIFO of CPU work */

	struct server *srv;
	struct client *cli;

	/* controller channel: capacity of each switch's */
	uint32_t cpu_cap;

	/* workload */
	struct nk_rank_info *ranks; /* sim-private copy when dynamics are on */
	int ranks_owned;
	uint64_t trace_pos;
	uint64_t dyn_period_ps;

	/* pre-drawn ranks: a short pipeline that prefetches the alias entry,
	 * then the rank entry, of requests a few arrivals ahead (the tables
	 * are far bigger than the cache; the draw order is unchanged) */
	uint64_t pre_u[PRE_RING];
	uint32_t pre_rank[PRE_RING];
	uint32_t pre_pos;

	struct nk_zig_exp zig;

	/* rng streams */
	struct nk_rng r_arr, r_key, r_op, r_svc, r_fault, r_dyn, r_host;

	/* measurement */
	/* completed requests: hist_by by who answered (server, switch), the
	 * only ones a completion adds to; hist, all of them, is their sum,
	 * made when read (merged_hist): one bucket written per request, not two */
	struct nk_hist hist;
	struct nk_hist hist_by[2];
	uint64_t window_ps;
	uint32_t n_windows;
	struct nk_hist *whist;
	uint64_t *w_issued, *w_completed, *w_done; /* w_done: by issue window */
	struct nk_sim_stats st;

	/* history (record_history): per request, and version owners */
	struct nk_sim_op *ops;
	uint64_t ops_cap;
	struct vown *vown;
	uint64_t vown_cap, vown_n;

	/* key bytes of the hottest ranks: making a 64 B key is ~15% of a
	 * request's cost, and under skew most requests are for these ranks
	 * (an entry is used only while its rank still holds that key). Made
	 * on a rank's first request, not at set-up: a short run pays only for
	 * the ranks it draws (key_cache_id NONE32: not made yet) */
	uint8_t *key_cache;
	uint32_t *key_cache_id;
	uint32_t key_cache_n;
	/* bytes of a key made (key_size, or fewer when every client reads only
	 * those: host client_key_bytes) and the cache's stride for them: a
	 * KVSwitch client reads 16 B, a quarter of a 64 B key's cost and lines */
	uint32_t key_made, key_stride;

	/* capture (nk_sim_capture): one file per node port, then the CPU port;
	 * NULL when off, so an off capture costs one test per switch hop */
	struct nk_pcap *cap;
	uint8_t *cap_buf;

	/* multigets (cfg.mget_max > 1): each slot's keys and their ranks (the
	 * key-bytes cache index), and per slot a buffer the request's packets
	 * may point into (key lists). Buffers live in fixed blocks that never
	 * move, since packets in flight point into them. */
	struct nk_alias mget_alias;
	uint32_t mget_max;
	struct nk_rank_info *mkeys;   /* slot_cap * mget_max */
	uint32_t *mranks;             /* slot_cap * mget_max */
	uint8_t *mcount;              /* slot -> keys; 0 = a single-key request */
	uint8_t **mbuf;               /* blocks of MBUF_BLOCK slot buffers */
	uint32_t mbuf_blocks, mbuf_len;
	uint64_t tx_ps, key_ps, rx_ps, pair_ps;
	uint8_t svc_plain;            /* per_byte_ns = tx_ns = 0: service_ps's shortcut */

	/* scratch */
	struct nk_host_out hout[NK_HOST_MAX_OUT];
	uint8_t keybuf[NK_MAX_KEY_LEN];
	struct nk_req_key mreq[NK_MAX_REQ_KEYS];
	uint8_t mkeybuf[NK_MAX_REQ_KEYS][NK_MAX_KEY_LEN];
	struct nk_host_out mout[NK_HOST_MAX_REQ_OUT];
};

#define MBUF_BLOCK 4096u

/* ---- event heap (binary, ordered by (t, seq)) ----------------------------- */

static inline int ev_lt(const struct ev *a, const struct ev *b)
{
	return a->t < b->t || (a->t == b->t && (int32_t)(a->seq - b->seq) < 0);
}

/* e into free slot i, risen toward the root past every greater parent */
static inline void heap_rise(struct ev *h, uint32_t i, struct ev e)
{
	while (i) {
		uint32_t p = (i - 1) >> 1;
		if (!ev_lt(&e, &h[p]))
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = e;
}

/* Put e in the heap's first n slots, whose root is free: bottom-up
 * (Floyd): the hole sinks to a leaf along the lesser children, one
 * comparison a level, then e (mostly a late completion) rises from there,
 * mostly not at all. The keys are distinct, so any heap pops the same
 * order. */
static void heap_fill_root(struct ev *h, uint32_t n, struct ev e)
{
	uint32_t i = 0;
	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && ev_lt(&h[c + 1], &h[c]))
			c++;
		h[i] = h[c];
		i = c;
	}
	heap_rise(h, i, e);
}

static int heap_insert(struct nk_sim *s, struct ev e)
{
	if (s->heap_hole) {
		s->heap_hole = 0;
		heap_fill_root(s->heap, s->heap_n, e);
		return 0;
	}
	if (s->heap_n == s->heap_cap) {
		uint32_t nc = s->heap_cap ? s->heap_cap * 2 : 1024;
		struct ev *h = realloc(s->heap, nc * sizeof(*h));
		if (!h)
			return -1;
		s->heap = h;
		s->heap_cap = nc;
	}
	heap_rise(s->heap, s->heap_n++, e);
	return 0;
}

static int lane_grow(struct lane *q)
{
	uint32_t nc = q->cap ? q->cap * 2 : 1024;
	struct ev *v = malloc(nc * sizeof(*v));
	if (!v)
		return -1;
	for (uint32_t i = 0; i < q->n; i++)
		v[i] = q->ev[(q->head + i) & (q->cap - 1)];
	free(q->ev);
	q->ev = v;
	q->head = 0;
	q->cap = nc;
	return 0;
}

/* Schedule event `type` for idx at t, in `lane` if t keeps it in order
 * there (not before its tail), else in the heap. */
HOP_INLINE int ev_push(struct nk_sim *s, uint64_t t, uint32_t type, uint32_t idx,
		       enum ev_lane lane)
{
	struct ev e = {.t = t, .seq = s->seq++, .pl = (idx << 4) | type};
	if (lane < N_LANES) {
		struct lane *q = &s->lane[lane];
		if (!q->n || q->ev[(q->head + q->n - 1) & (q->cap - 1)].t <= t) {
			if (q->n == q->cap && lane_grow(q))
				return -1;
			q->ev[(q->head + q->n++) & (q->cap - 1)] = e;
			if (lane >= LANE_RECIRC)
				s->rare_live++;
			return 0;
		}
	}
	return heap_insert(s, e);
}

static int heap_push(struct nk_sim *s, uint64_t t, uint32_t type, uint32_t idx)
{
	return ev_push(s, t, type, idx, LANE_HEAP);
}

static void heap_pop(struct nk_sim *s)
{
	uint32_t n = --s->heap_n;
	if (n)
		heap_fill_root(s->heap, n, s->heap[n]);
}

/* Remove a taken top that no insert replaced (heap_hole). */
static inline void heap_settle(struct nk_sim *s)
{
	if (s->heap_hole) {
		s->heap_hole = 0;
		heap_pop(s);
	}
}

static inline void lane_min(const struct nk_sim *s, int l, const struct ev **best, int *src)
{
	const struct lane *q = &s->lane[l];
	if (q->n && (!*best || ev_lt(&q->ev[q->head], *best))) {
		*best = &q->ev[q->head];
		*src = l;
	}
}

/* The next event (the least (t, seq) of the heap's top and the lanes'
 * heads) without taking it: its source (LANE_HEAP or a lane), or -1 if
 * none is scheduled. */
static inline int ev_next(const struct nk_sim *s, const struct ev **out)
{
	const struct ev *best = s->heap_n ? &s->heap[0] : NULL;
	int src = best ? LANE_HEAP : -1;
	/* the link lanes, then the two that most runs never use */
	lane_min(s, LANE_UP, &best, &src);
	lane_min(s, LANE_DOWN, &best, &src);
	if (s->rare_live) {
		lane_min(s, LANE_RECIRC, &best, &src);
		lane_min(s, LANE_TIMER, &best, &src);
	}
	*out = best;
	return src;
}

static inline void ev_take(struct nk_sim *s, int src)
{
	if (src == LANE_HEAP) {
		s->heap_hole = 1;  /* removed by the next insert or heap_settle */
		return;
	}
	struct lane *q = &s->lane[src];
	q->head = (q->head + 1) & (q->cap - 1);
	q->n--;
	if (src >= LANE_RECIRC)
		s->rare_live--;
}

static void ev_clear(struct nk_sim *s)
{
	s->heap_n = 0;
	s->heap_hole = 0;
	for (int l = 0; l < N_LANES; l++)
		s->lane[l].n = 0;
	s->rare_live = 0;
}

/* ---- packet pool ------------------------------------------------------------ */

/* The pool doubled (out of line: pkt_alloc's common path stays small
 * enough to inline); -1 if it cannot grow. */
static __attribute__((noinline)) int pkt_grow(struct nk_sim *s)
{
	uint32_t oc = s->pk_cap, nc = oc ? oc * 2 : 4096;
	if (nc > (1u << 27))
		return -1;
	struct pkt *p = realloc(s->pk, (size_t)nc * sizeof(*p));
	if (!p)
		return -1;
	s->pk = p;
	for (uint32_t i = oc; i < nc; i++)
		p[i].next = i + 1 < nc ? i + 1 : NONE32;
	s->pk_free = oc;
	s->pk_cap = nc;
	return 0;
}

static inline uint32_t pkt_alloc(struct nk_sim *s)
{
	if (s->pk_free == NONE32 && pkt_grow(s))
		return NONE32;
	uint32_t i = s->pk_free;
	s->pk_free = s->pk[i].next;
	struct pkt *p = &s->pk[i];
	p->next = NONE32;
	p->out_head = NONE32;
	p->slot = NONE32;
	p->serial = 0;
	p->from_cpu = 0;
	p->recirculated = 0;
	p->by_switch = 0;
	return i;
}

static void pkt_free(struct nk_sim *s, uint32_t i)
{
	s->pk[i].next = s->pk_free;
	s->pk_free = i;
}

static void count_drop(struct nk_sim *s, uint64_t *which)
{
	(*which)++;
	s->st.dropped++;
}

/* ---- the simulated store: preloaded keys, writes kept in a table ---------- */

static uint64_t key_fp(const struct nk_msg *m)
{
	uint64_t fp = 0;
	memcpy(&fp, m->key, m->key_len < 8 ? m->key_len : 8);
	return fp ^ ((uint64_t)m->key_len << 56);
}

static struct store_ent *store_find(struct sim_store *st, uint32_t keyhash, uint64_t fp)
{
	uint32_t mask = st->cap - 1, i = (uint32_t)nk_mix64(keyhash) & mask;
	for (;;) {
		struct store_ent *e = &st->e[i];
		if (!e->ver || (e->keyhash == keyhash && e->fp == fp))
			return e;
		i = (i + 1) & mask;
	}
}

static int store_get(void *impl, const struct nk_msg *req, uint64_t *ver, uint32_t *value_len)
{
	struct sim_store *st = impl;
	if (st->count) {
		struct store_ent *e = store_find(st, req->keyhash, key_fp(req));
		if (e->ver) {
			*ver = e->ver;
			*value_len = e->value_len;
			return 0;
		}
	}
	/* every key is preloaded at version 1 with its workload size */
	*ver = 1;
	*value_len = nk_workload_value_len(st->wl, req->keyhash);
	return 0;
}

static int store_put(void *impl, const struct nk_msg *req, uint64_t ver, uint32_t value_len)
{
	struct sim_store *st = impl;
	if ((st->count + 1) * 4 > st->cap * 3) {
		uint32_t oc = st->cap, nc = oc ? oc * 2 : 1024;
		struct store_ent *old = st->e, *ne = calloc(nc, sizeof(*ne));
		if (!ne)
			return -1;
		st->e = ne;
		st->cap = nc;
		for (uint32_t i = 0; i < oc; i++)
			if (old[i].ver)
				*store_find(st, old[i].keyhash, old[i].fp) = old[i];
		free(old);
	}
	uint64_t fp = key_fp(req);
	struct store_ent *e = store_find(st, req->keyhash, fp);
	if (!e->ver)
		st->count++;
	e->keyhash = req->keyhash;
	e->fp = fp;
	e->ver = ver ? ver : 1;
	e->value_len = value_len;
	return 0;
}

static const struct nk_store_ops sim_store_ops = {.get = store_get, .put = store_put};

static void store_reset(struct sim_store *st)
{
	if (st->e)
		memset(st->e, 0, st->cap * sizeof(*st->e));
	st->count = 0;
}

/* ---- capture ------------------------------------------------------------------ */

#define CAP_BUF_LEN 65536u
#define CTRL_IP 0x0AFFFFFEu  /* the controller's address on Mininet (rack.py) */

/* node -> (IPv4, MAC) of the rack plan; the controller (node S+M) has the
 * Mininet controller's address */
static uint32_t cap_addr(const struct nk_sim *s, uint32_t node, uint8_t mac[6])
{
	if (node >= s->n_nodes) {
		const uint8_t c[6] = {0x02, 0, 0, 0xff, 0xff, 0xfe};
		memcpy(mac, c, 6);
		return CTRL_IP;
	}
	nk_node_mac(node, mac);
	return nk_node_ip(node);
}

/* The frame packet p is on port `port` at t_ps, as a real switch port would
 * show it: Ethernet/IPv4/UDP (both ports the protocol's) around the encoded
 * message; lengths-only values are zeros. */
static void cap_frame(struct nk_sim *s, uint32_t port, uint64_t t_ps, const struct pkt *p)
{
	uint64_t t0 = nk_pcap_clock_ns();
	struct nk_pcap *pc = &s->cap[port == s->cpu_port ? s->n_nodes : port];
	int n = nk_wire_encode(&p->m, s->cap_buf + NK_HDRS_LEN, CAP_BUF_LEN - NK_HDRS_LEN - 64);
	if (n < 0 || n > 65535 - NK_IP_HLEN - NK_UDP_HLEN) {
		pc->missed++;
		pc->busy_ns += nk_pcap_clock_ns() - t0;
		return;
	}
	uint8_t dmac[6], smac[6];
	uint32_t sip = cap_addr(s, p->src, smac);
	uint32_t dip = cap_addr(s, p->dst, dmac);
	uint16_t udp = s->pipe->udp_port;
	uint32_t len = nk_frame_build_udp(s->cap_buf, dmac, smac, sip, dip, udp, udp,
					  (uint16_t)n, 0);
	nk_pcap_write(pc, t_ps / PS_PER_NS, s->cap_buf, len);
	pc->busy_ns += nk_pcap_clock_ns() - t0;
}

static void cap_close(struct nk_sim *s)
{
	if (!s->cap)
		return;
	for (uint32_t i = 0; i <= s->n_nodes; i++)
		nk_pcap_close(&s->cap[i]);
	free(s->cap);
	free(s->cap_buf);
	s->cap = NULL;
	s->cap_buf = NULL;
}

/* ---- links ------------------------------------------------------------------- */

/* serialization time in ps, fixed point (ps per byte << 16) */
static inline uint64_t ser_ps(const struct nk_sim *s, uint32_t bytes)
{
	return ((uint64_t)bytes * s->ser_fx + 0x8000u) >> 16;
}

static uint16_t wire_len(const struct nk_sim *s, const struct nk_msg *m)
{
	int n = s->wire_size && m->proto == s->wire_proto ? s->wire_size(m)
							  : nk_wire_encoded_len(m);
	if (n < 0)
		n = 64;
	n += (int)s->cfg.frame_overhead;
	return (uint16_t)(n > 65535 ? 65535 : n);
}

static void deliver_client(struct nk_sim *s, uint32_t pi, uint64_t t);
static uint64_t vown_get(const struct nk_sim *s, uint32_t keyhash, uint64_t ver);
static void vown_put(struct nk_sim *s, uint32_t keyhash, uint64_t ver, uint64_t owner);
static void switch_in(struct nk_sim *s, uint32_t pi, uint64_t t_in);
HOP_INLINE void deliver_switch(struct nk_sim *s, uint32_t pi, uint64_t arr);
HOP_INLINE void deliver_host(struct nk_sim *s, uint32_t pi, uint64_t arr);

/* Hand packet pi to its next stop at time `arr` (event `type`): one
 * function per type, as every caller's type is a constant */
static inline void deliver(struct nk_sim *s, uint32_t pi, uint64_t arr, uint32_t type)
{
	if (type == EV_SWITCH_IN)
		deliver_switch(s, pi, arr);
	else
		deliver_host(s, pi, arr);
}

/* A link's faults on packet pi that would arrive at `arr`, then its delivery
 * (out of line: most links have none). A duplicate is a fresh copy
 * delivered right after. */
static __attribute__((noinline)) void link_faults(struct nk_sim *s, uint32_t pi, uint64_t arr,
						  uint32_t type)
{
	const struct nk_sim_cfg *c = &s->cfg;
	if (c->loss > 0 && nk_rng_double(&s->r_fault) < c->loss) {
		count_drop(s, &s->st.drop_loss);
		pkt_free(s, pi);
		return;
	}
	arr += s->extra_ps;
	if (c->duplicate > 0 && nk_rng_double(&s->r_fault) < c->duplicate) {
		uint32_t di = pkt_alloc(s);
		if (di != NONE32) {
			s->pk[di] = s->pk[pi];
			s->pk[di].next = NONE32;
			uint64_t darr = arr;
			if (c->reorder > 0 && nk_rng_double(&s->r_fault) < c->reorder)
				darr += (uint64_t)(nk_rng_double(&s->r_fault) * c->reorder_ns * PS_PER_NS);
			deliver(s, di, darr, type);
		}
	}
	if (c->reorder > 0 && nk_rng_double(&s->r_fault) < c->reorder)
		arr += (uint64_t)(nk_rng_double(&s->r_fault) * c->reorder_ns * PS_PER_NS);
	deliver(s, pi, arr, type);
}

/* Put packet pi on a link that is free at *free_at and deliver it (event
 * `type`) after serialization + latency, with faults applied. Inline: four
 * calls a request, each with a constant type. */
static inline void link_send(struct nk_sim *s, uint32_t pi, uint64_t t, uint64_t *free_at,
			     uint64_t *bytes, uint32_t type, int faulty)
{
	uint64_t depart = t > *free_at ? t : *free_at;
	depart += ser_ps(s, s->pk[pi].wire_len);
	*bytes += s->pk[pi].wire_len;
	*free_at = depart;
	uint64_t arr = depart + s->link_ps;
	if (faulty)
		link_faults(s, pi, arr, type);
	else
		deliver(s, pi, arr, type);
}

/* Hand packet pi to its next stop at time `arr`: normally an event; but a
 * reply to a client with no timers, or a packet into an order-free pipeline,
 * has a fate fixed already, so it is processed now, stamped with `arr`. */
HOP_INLINE void deliver_switch(struct nk_sim *s, uint32_t pi, uint64_t arr)
{
	if (s->order_free ||
	    (!s->in_order && s->pipe->order_free_pkt &&
	     s->pipe->order_free_pkt(s->sw[s->pk[pi].sw].pstate, &s->pk[pi].m))) {
		if (arr <= s->end)
			switch_in(s, pi, arr);
		else
			pkt_free(s, pi);
		return;
	}
	/* it waits for its time at the switch: the pipeline may fetch the
	 * tables it will read meanwhile */
	if (s->pipe->prefetch)
		s->pipe->prefetch(s->sw[s->pk[pi].sw].pstate, &s->pk[pi].m);
	ev_push(s, arr, EV_SWITCH_IN, pi, LANE_UP);
}

HOP_INLINE void deliver_host(struct nk_sim *s, uint32_t pi, uint64_t arr)
{
	if (s->fast_client && s->pk[pi].dst >= s->S && s->pk[pi].dst < s->S + s->M) {
		if (arr <= s->end)
			deliver_client(s, pi, arr);
		else
			pkt_free(s, pi);
		return;
	}
	ev_push(s, arr, EV_HOST_IN, pi, LANE_DOWN);
}

/* the client core that frees first (ties: the lowest): work arriving in
 * time order on it makes the client a FIFO queue with client_cores servers */
static inline uint64_t *client_core(struct nk_sim *s, struct client *c)
{
	uint64_t *best = &c->core_free[0];
	for (uint32_t k = 1; k < s->client_cores; k++)
		if (c->core_free[k] < *best)
			best = &c->core_free[k];
	return best;
}

/* the switch a host node is wired to: a server's rack leaf, else the
 * spine (or the only switch) */
static inline uint16_t host_switch(const struct nk_sim *s, uint32_t node)
{
	return (uint16_t)(s->R && node < s->S ? 1 + node / s->per_rack : 0);
}

/* Racks: switch k's node id l as a global node. The spine's node r < R is
 * rack r; a packet it sends there goes to the server of the same index in
 * that rack as `orig` (the global node it was addressed to), so a read
 * redirected to another rack is served by the owner's index there. */
static uint32_t sw_global(const struct nk_sim *s, uint32_t k, uint32_t l, uint32_t orig)
{
	const struct sw *w = &s->sw[k];
	uint32_t P = s->per_rack;
	if (l >= w->n_local)
		return l == w->n_local ? s->n_nodes : NK_NODE_NONE;  /* its controller */
	if (k == 0)
		return l < s->R ? l * P + (orig < s->S ? orig % P : 0) : s->S + (l - s->R);
	return l < P ? (k - 1) * P + l : s->S + (l - P);
}

/* host node -> switch; returns when the packet left the host (a client
 * sends at most client_max_rps packets per second: later ones wait) */
static uint64_t host_send(struct nk_sim *s, uint32_t pi, uint64_t t)
{
	struct pkt *p = &s->pk[pi];
	p->wire_len = wire_len(s, &p->m);
	p->sw = host_switch(s, p->src);
	p->ingress = s->R ? s->sw[p->sw].g2l[p->src] : p->src;
	if (s->client_gap_ps && p->src >= s->S && p->src < s->S + s->M) {
		struct client *c = &s->cli[p->src - s->S];
		if (t < c->tx_next)
			t = c->tx_next;
		c->tx_next = t + s->client_gap_ps;
	}
	uint16_t src = p->src;
	link_send(s, pi, t, &s->up_free[src], &s->up_bytes[src], EV_SWITCH_IN, s->fault_up[src]);
	return t;
}

/* ---- the switch ------------------------------------------------------------------ */

static void switch_drop(struct nk_sim *s, uint32_t pi)
{
	s->sw[s->pk[pi].sw].drops++;
	count_drop(s, &s->st.drop_switch);
	pkt_free(s, pi);
}

/* A switch outage stops the switch at a time in [from, to): the stop, else
 * UINT64_MAX. */
static uint64_t outage_within(const struct nk_sim *s, uint64_t from, uint64_t to)
{
	for (uint32_t i = 0; i < s->n_downs && s->downs[i] < to; i++)
		if (s->downs[i] >= from)
			return s->downs[i];
	return UINT64_MAX;
}

/* Packet pi, which reached the switch at pass_in, leaves it at `left` (the
 * end of its serialization out of a port, its return from the recirculation
 * port, its place in the controller's queue): an outage that stops the
 * switch before then kills it, as killing netkv-switch loses what its
 * process holds (drop_outage). What it booked of its port ends at the stop
 * (*busy, if given: the port's queue goes with the switch). 1 if killed. */
static int outage_kills(struct nk_sim *s, uint32_t pi, uint64_t left, uint64_t *busy)
{
	uint64_t d = outage_within(s, s->pass_in, left);
	if (d == UINT64_MAX)
		return 0;
	if (busy && *busy < d)
		*busy = d;
	count_drop(s, &s->st.drop_outage);
	pkt_free(s, pi);
	return 1;
}

/* Over the trunk from the spine to leaf `leaf` (0-based), or from a leaf to
 * the spine, entering the peer on its port toward this switch: the spine's
 * port of that rack; a leaf's port of the sending client (all of them are
 * behind its uplink), or of the first client for anything else. */
static void trunk_send(struct nk_sim *s, uint32_t pi, uint32_t leaf, uint64_t t)
{
	struct pkt *p = &s->pk[pi];
	/* no loop: a leaf has no node id for another rack's servers, so what
	 * it sends up is for a client, which the spine has on its own port */
	uint32_t link;
	if (p->sw == 0) {
		link = leaf;
		p->sw = (uint16_t)(1 + leaf);
		uint32_t in = s->sw[p->sw].g2l[p->src];
		p->ingress = (uint16_t)(in >= s->per_rack && in < s->sw[p->sw].n_local ? in
										: s->per_rack);
	} else {
		link = s->R + p->sw - 1;
		p->ingress = (uint16_t)(p->sw - 1);
		p->sw = 0;
	}
	p->wire_len = wire_len(s, &p->m);  /* as the pipeline left it */
	link_send(s, pi, t, &s->trunk_free[link], &s->trunk_bytes[link], EV_SWITCH_IN,
		  s->cfg.fault_links == NK_FAULT_LINKS_ALL);
}

/* Racks: out of switch k's node port l: to the host if it is wired here,
 * else over the trunk toward its switch. */
static void egress_view(struct nk_sim *s, uint32_t pi, uint32_t l, uint64_t t)
{
	struct pkt *p = &s->pk[pi];
	uint32_t g = sw_global(s, p->sw, l, p->dst);
	p->dst = (uint16_t)g;
	uint32_t at = host_switch(s, g);
	if (at != p->sw) {
		trunk_send(s, pi, p->sw ? 0 : at - 1, t);
		return;
	}
	p->wire_len = wire_len(s, &p->m);
	link_send(s, pi, t, &s->down_free[g], &s->down_bytes[g], EV_HOST_IN, s->fault_down[g]);
}

/* Out of switch port `port`, one of its node ports (< n_local): most
 * packets leave a switch pass this way. */
HOP_INLINE void egress_node(struct nk_sim *s, uint32_t pi, uint16_t port, uint64_t t)
{
	struct pkt *p = &s->pk[pi];
	if (s->R) {
		egress_view(s, pi, port, t);
		return;
	}
	p->dst = port;  /* the port reaches exactly one node */
	p->wire_len = wire_len(s, &p->m);
	if (s->n_downs) {
		uint64_t *f = &s->down_free[port];
		if (outage_kills(s, pi, (t > *f ? t : *f) + ser_ps(s, p->wire_len), f))
			return;
	}
	if (s->cap)
		cap_frame(s, port, t, p);
	link_send(s, pi, t, &s->down_free[port], &s->down_bytes[port], EV_HOST_IN,
		  s->fault_down[port]);
}

static void egress(struct nk_sim *s, uint32_t pi, uint16_t port, uint64_t t)
{
	struct pkt *p = &s->pk[pi];
	struct sw *w = &s->sw[p->sw];
	if (port < w->n_local) {
		egress_node(s, pi, port, t);
		return;
	}
	if (port == w->recirc_port) {
		uint64_t *f = &w->recirc_free;
		uint64_t depart = t > *f ? t : *f;
		if (s->recirc_ps_per_byte > 0)
			depart += (uint64_t)(p->wire_len * s->recirc_ps_per_byte + 0.5);
		if (s->n_downs && outage_kills(s, pi, depart, f))
			return;
		*f = depart;
		p->recirculated = 1;
		s->st.recirculated++;
		p->ingress = (uint16_t)w->recirc_port;
		/* through the heap, even for an order-free pipeline: run at once,
		 * a multiget's whole chain of passes would book this port ahead
		 * of packets that reach it earlier (a false FIFO queue) */
		if (depart <= s->end)
			ev_push(s, depart, EV_SWITCH_IN, pi, LANE_RECIRC);
		else
			pkt_free(s, pi);
	} else if (port == w->cpu_port) {
		if (s->n_downs && outage_kills(s, pi, t, NULL))
			return;  /* (before the capture: a killed packet never left) */
		if (s->cap)
			cap_frame(s, port, t, p);
		s->st.cpu_packets++;
		if (w->cpu_len == s->cpu_cap) {
			s->st.cpu_dropped++;
		} else {
			struct cpu_item *ci = &w->cpuq[(w->cpu_head + w->cpu_len++) % s->cpu_cap];
			ci->m = p->m;
			ci->src = s->R ? w->g2l[p->src] : p->src;
		}
		pkt_free(s, pi);
	} else {
		switch_drop(s, pi);
	}
}

/* A packet's request handle for the pipeline (nk_pkt_meta.cookie): its
 * client slot + 1 above the low 40 bits of its serial; 0 = none. */
#define COOKIE_SERIAL_BITS 40
#define COOKIE_SERIAL_MASK ((1ull << COOKIE_SERIAL_BITS) - 1)

static uint64_t pkt_cookie(const struct pkt *p)
{
	if (p->slot == NONE32)
		return 0;
	return (uint64_t)(p->slot + 1) << COOKIE_SERIAL_BITS | (p->serial & COOKIE_SERIAL_MASK);
}

/* The pipeline made this packet the answer to the request behind `cookie`
 * (a parked read): it completes that request's slot, unless the slot has
 * been reused since (then it is a late duplicate). */
static void pkt_set_cookie(const struct nk_sim *s, struct pkt *p, uint64_t cookie)
{
	uint64_t slot = cookie >> COOKIE_SERIAL_BITS;
	p->slot = NONE32;
	p->serial = 0;
	if (!slot || slot - 1 >= s->slot_cap)
		return;
	const struct slot *sl = &s->slots[slot - 1];
	if ((sl->serial & COOKIE_SERIAL_MASK) == (cookie & COOKIE_SERIAL_MASK)) {
		p->slot = (uint32_t)(slot - 1);
		p->serial = sl->serial;
	}
}

/* History: a client's write the host logic started while handling another
 * packet (a Hermes write stalled until its key turned Valid) is reported
 * by an output carrying that write's cookie with an OK result; the version
 * its key now holds at this server, if nobody owns it yet, is that
 * write's. (A stalled read's reply carries its read's cookie: not a write.) */
static void own_started_writes(struct nk_sim *s, struct server *sv, uint64_t cookie, int n)
{
	for (int i = 0; i < n; i++) {
		const struct nk_msg *m = &s->hout[i].msg;
		uint64_t slot = m->cookie >> COOKIE_SERIAL_BITS;
		if (!m->cookie || m->cookie == cookie || m->result != NK_RESULT_OK || !slot ||
		    slot - 1 >= s->slot_cap)
			continue;
		const struct slot *sl = &s->slots[slot - 1];
		if (!sl->live || !sl->write ||
		    (sl->serial & COOKIE_SERIAL_MASK) != (m->cookie & COOKIE_SERIAL_MASK))
			continue;
		uint64_t ver = 0;
		uint32_t vlen = 0;
		if (sv->nkstore.ops->get(sv->nkstore.impl, m, &ver, &vlen) == 0 &&
		    !vown_get(s, m->keyhash, ver))
			vown_put(s, m->keyhash, ver, sl->serial);
	}
}

static void switch_in(struct nk_sim *s, uint32_t pi, uint64_t t_in)
{
	if (s->switch_down) {  /* a stopped switch forwards nothing */
		count_drop(s, &s->st.drop_outage);
		pkt_free(s, pi);
		return;
	}
	s->pass_in = t_in;
	struct pkt *p = &s->pk[pi];
	struct sw *w = &s->sw[p->sw];
	if (s->switch_pkt_ps) {
		/* switch_mpps: one packet at a time, in arrival order */
		if (t_in < w->switch_free)
			t_in = w->switch_free;
		t_in += s->switch_pkt_ps;
		w->switch_free = t_in;
	}
	s->st.switch_packets++;
	w->packets++;
	uint64_t cookie = pkt_cookie(p);
	struct nk_pkt_meta meta = {
		.now_ns = t_in / PS_PER_NS,
		.ingress_port = p->ingress,
		.src = s->R ? w->g2l[p->src] : p->src,
		.dst = !s->R ? p->dst : p->dst <= s->n_nodes ? w->g2l[p->dst] : NK_NODE_NONE,
		.wire_len = p->wire_len,
		.from_cpu = p->from_cpu,
		.recirculated = p->recirculated,
		.cookie = cookie,
	};
	struct nk_actions act = {0};
	if (s->cap && (p->ingress < s->n_nodes || p->ingress == s->cpu_port))
		cap_frame(s, p->ingress, t_in, p);
	/* to_cpu copies the packet as received, as netkv-switch and the P4
	 * clone do (the pipeline may edit p->m); only pipelines that may ask */
	struct nk_msg received;
	if (!s->pipe->never_to_cpu)
		received = p->m;
	s->pipe->process(w->pstate, &p->m, &meta, &act);
	p->dst = s->R ? (uint16_t)sw_global(s, p->sw, meta.dst, p->dst) : meta.dst;
	if (meta.cookie != cookie)
		pkt_set_cookie(s, p, meta.cookie);
	p->recirculated = 0;
	p->from_cpu = 0;
	uint64_t t = t_in + s->switch_ps;
	p->by_switch = act.switch_reply;
	if (act.to_cpu) {
		uint32_t ci = pkt_alloc(s);
		p = &s->pk[pi];  /* the pool may have moved */
		if (ci != NONE32) {
			s->pk[ci] = *p;
			if (!s->pipe->never_to_cpu)
				s->pk[ci].m = received;
			s->pk[ci].next = NONE32;
			egress(s, ci, (uint16_t)w->cpu_port, t);
		}
	}
	switch (act.fwd) {
	case NK_FWD_PORT:
		if (act.port < w->n_local)
			egress_node(s, pi, act.port, t);
		else
			egress(s, pi, act.port, t);
		break;
	case NK_FWD_RECIRC:
		egress(s, pi, (uint16_t)w->recirc_port, t);
		break;
	case NK_FWD_MCAST: {
		const struct mcast_group *g =
			act.mcast_group < NK_MAX_MCAST_GROUPS ? &w->mcast[act.mcast_group] : NULL;
		if (!g || !g->n) {
			switch_drop(s, pi);
			break;
		}
		for (uint32_t i = 1; i < g->n; i++) {
			uint32_t ci = pkt_alloc(s);
			if (ci == NONE32)
				break;
			s->pk[ci] = s->pk[pi];
			s->pk[ci].next = NONE32;
			egress(s, ci, g->ports[i], t);
		}
		egress(s, pi, g->ports[0], t);
		break;
	}
	default:
		if (!act.held)
			switch_drop(s, pi);
		else
			pkt_free(s, pi);
		break;
	}
}

/* ---- servers ------------------------------------------------------------------- */

static uint64_t service_ps(struct nk_sim *s, struct server *sv, uint32_t bytes, uint32_t work,
			   uint32_t sent)
{
	const struct nk_sim_cfg *c = &s->cfg;
	double mean;
	if (work <= 1 && s->svc_plain && sv->cap == 1.0) {
		/* the formula below is exactly service_ns here (x * 1.0, x + 0.0
		 * and x / 1.0 are exact): spared its division and products */
		mean = c->service_ns;
	} else {
		double keys = work ? work : 1;
		double base = c->per_key_ns < 0 ? c->service_ns * keys
						: c->service_ns + c->per_key_ns * (keys - 1);
		mean = (base + c->per_byte_ns * bytes + c->tx_ns * sent) / sv->cap;
	}
	double x;
	switch (c->service) {
	case NK_SERVICE_EXPONENTIAL:
		x = mean * nk_zig_exp1(&s->zig, &s->r_svc);
		break;
	case NK_SERVICE_LOGNORMAL: {
		double sg = c->lognormal_sigma;
		x = mean * exp(sg * nk_rng_normal(&s->r_svc) - 0.5 * sg * sg);
		break;
	}
	default:
		x = mean;
		break;
	}
	return (uint64_t)(x * PS_PER_NS + 0.5);
}

/* keys a packet carries, for the client's per-key CPU cost */
static inline uint32_t msg_keys(const struct nk_msg *m)
{
	return m->key_slots ? m->key_slots : 1;
}

/* a coordinator's CPU for one message: taking it in and sending its outputs */
static uint64_t coord_ps(const struct nk_sim *s, const struct nk_msg *in,
			 const struct nk_host_out *out, int n)
{
	uint64_t t = s->rx_ps + s->pair_ps * msg_keys(in);
	for (int i = 0; i < n; i++)
		t += s->tx_ps + s->key_ps * msg_keys(&out[i].msg);
	return t;
}

/* node id -> index in s->srv (servers, then coordinators) */
static inline uint32_t srv_index(const struct nk_sim *s, uint32_t node)
{
	return node < s->S ? node : node - s->M;
}

static void start_service(struct nk_sim *s, uint32_t sid, uint32_t pi)
{
	struct server *sv = &s->srv[srv_index(s, sid)];
	struct pkt *p = &s->pk[pi];
	sv->busy++;
	if (sid >= s->S) {  /* a coordinator */
		int n = s->host->coord_handle(sv->hstate, &p->m, p->src, s->mout,
					      NK_HOST_MAX_REQ_OUT);
		uint32_t head = NONE32, tail = NONE32;
		for (int i = 0; i < n; i++) {
			uint32_t oi = pkt_alloc(s);
			if (oi == NONE32)
				break;
			p = &s->pk[pi];
			struct pkt *o = &s->pk[oi];
			o->m = s->mout[i].msg;
			o->src = (uint16_t)sid;
			o->dst = s->mout[i].dst == NK_DST_SRC ? p->src : s->mout[i].dst;
			o->slot = p->slot;
			o->serial = p->serial;
			if (tail == NONE32)
				head = oi;
			else
				s->pk[tail].next = oi;
			tail = oi;
		}
		p = &s->pk[pi];
		p->out_head = head;
		p->inc = sv->inc;
		heap_push(s, s->now + coord_ps(s, &p->m, s->mout, n), EV_DONE, pi);
		return;
	}
	uint8_t kind = p->m.kind;
	if (kind == NK_KIND_READ || kind == NK_KIND_WRITE || kind == NK_KIND_MULTIGET)
		sv->served++;
	/* history: which write's value does a newly stored version hold? */
	uint64_t ver_before = 0, ver_after = 0;
	uint32_t vlen_scratch;
	int track = s->cfg.record_history && (kind == NK_KIND_WRITE || kind == NK_KIND_CONTROL);
	if (track)
		sv->nkstore.ops->get(sv->nkstore.impl, &p->m, &ver_before, &vlen_scratch);
	uint64_t cookie = pkt_cookie(p);
	p->m.cookie = cookie;
	int n = s->host->server_handle(sv->hstate, &sv->nkstore, &p->m, p->src, s->hout,
				       NK_HOST_MAX_OUT);
	if (n == 0)
		s->st.server_ignored++;
	if (s->cfg.record_history)
		own_started_writes(s, sv, cookie, n);
	if (track) {
		sv->nkstore.ops->get(sv->nkstore.impl, &p->m, &ver_after, &vlen_scratch);
		if (ver_after != ver_before) {
			/* a client's write (honest, or a hostile one's: its own
			 * serial) holds its own value. A control copy (a push of a
			 * version another server stored first) keeps that version's
			 * writer; a version raised in place (new to the map) holds
			 * the value this server had before. */
			uint64_t owner = kind == NK_KIND_WRITE && p->serial
						 ? p->serial
						 : vown_get(s, p->m.keyhash, ver_after);
			if (!owner)
				owner = vown_get(s, p->m.keyhash, ver_before);
			vown_put(s, p->m.keyhash, ver_after, owner);
		}
	}
	uint32_t bytes = p->m.value_len, head = NONE32, tail = NONE32;
	for (int i = 0; i < n; i++) {
		uint32_t oi = pkt_alloc(s);
		if (oi == NONE32)
			break;
		p = &s->pk[pi];  /* the pool may have moved */
		struct pkt *o = &s->pk[oi];
		o->m = s->hout[i].msg;
		o->src = (uint16_t)sid;
		o->dst = s->hout[i].dst == NK_DST_SRC ? p->src : s->hout[i].dst;
		o->slot = p->slot;
		o->serial = p->serial;
		/* the answer to an earlier request (a stalled Hermes read); 0: the
		 * host logic built the message afresh (NetMC's replies), it
		 * answers this request */
		if (o->m.cookie && o->m.cookie != cookie)
			pkt_set_cookie(s, o, o->m.cookie);
		if (o->m.value_len > bytes)
			bytes = o->m.value_len;
		if (tail == NONE32)
			head = oi;
		else
			s->pk[tail].next = oi;
		tail = oi;
	}
	p = &s->pk[pi];
	p->out_head = head;
	p->inc = sv->inc;
	/* a message the host logic refused (a NUMKEY past its key list) costs
	 * the base: it read none of the keys it claims */
	uint32_t work = n > 0 && p->m.nkeys ? p->m.nkeys : 1;
	heap_push(s, s->now + service_ps(s, sv, bytes, work, (uint32_t)n), EV_DONE, pi);
}

/* Queue packet pi at the tail of q, or drop it if q is at queue_limit. */
static void pq_push(struct nk_sim *s, struct pqueue *q, uint32_t pi)
{
	if (s->cfg.queue_limit && q->len >= s->cfg.queue_limit) {
		count_drop(s, &s->st.drop_queue);
		pkt_free(s, pi);
		return;
	}
	s->pk[pi].next = NONE32;
	if (q->len)
		s->pk[q->tail].next = pi;
	else
		q->head = pi;
	q->tail = pi;
	q->len++;
}

/* The packet at the head of q, taken off it; NONE32 if q is empty. */
static uint32_t pq_pop(struct nk_sim *s, struct pqueue *q)
{
	if (!q->len)
		return NONE32;
	uint32_t pi = q->head;
	q->head = s->pk[pi].next;
	q->len--;
	return pi;
}

/* Drop every packet in q (its server crashed). */
static void pq_drop_all(struct nk_sim *s, struct pqueue *q)
{
	uint32_t pi = q->head;
	for (uint32_t i = 0; i < q->len; i++) {
		uint32_t nx = s->pk[pi].next;
		count_drop(s, &s->st.drop_crash);
		pkt_free(s, pi);
		pi = nx;
	}
	q->len = 0;
}

static void server_in(struct nk_sim *s, uint32_t pi)
{
	uint32_t sid = s->pk[pi].dst;
	struct server *sv = &s->srv[srv_index(s, sid)];
	if (!sv->up) {
		count_drop(s, &s->st.drop_crash);
		pkt_free(s, pi);
		return;
	}
	if (sv->wq) {
		uint32_t w = (uint32_t)(nk_mix64(s->pk[pi].m.keyhash) % s->cfg.workers);
		struct wqueue *q = &sv->wq[w];
		s->pk[pi].worker = w;
		if (!q->busy) {
			q->busy = 1;
			start_service(s, sid, pi);
			return;
		}
		pq_push(s, &q->q, pi);
		return;
	}
	if (sv->busy < sv->workers) {
		start_service(s, sid, pi);
		return;
	}
	pq_push(s, &sv->q, pi);
}

static void free_chain(struct nk_sim *s, uint32_t i)
{
	while (i != NONE32) {
		uint32_t nx = s->pk[i].next;
		pkt_free(s, i);
		i = nx;
	}
}

static void server_done(struct nk_sim *s, uint32_t pi)
{
	struct pkt *p = &s->pk[pi];
	uint32_t sid = p->dst;
	struct server *sv = &s->srv[srv_index(s, sid)];
	uint32_t out = p->out_head, worker = p->worker;
	if (!sv->up || p->inc != sv->inc) {
		/* the server crashed while serving this request */
		count_drop(s, &s->st.drop_crash);
		free_chain(s, out);
		pkt_free(s, pi);
		return;
	}
	pkt_free(s, pi);
	while (out != NONE32) {
		uint32_t nx = s->pk[out].next;
		s->pk[out].next = NONE32;
		host_send(s, out, s->now);
		out = nx;
	}
	sv->busy--;
	if (sv->wq) {
		struct wqueue *q = &sv->wq[worker];
		uint32_t qi = pq_pop(s, &q->q);
		if (qi != NONE32)
			start_service(s, sid, qi);
		else
			q->busy = 0;
		return;
	}
	uint32_t qi = pq_pop(s, &sv->q);
	if (qi != NONE32)
		start_service(s, sid, qi);
}

static void server_crash(struct nk_sim *s, uint32_t sid)
{
	struct server *sv = &s->srv[sid];
	if (!sv->up)
		return;
	sv->up = 0;
	sv->inc++;
	sv->busy = 0;
	pq_drop_all(s, &sv->q);
	for (uint32_t w = 0; sv->wq && w < s->cfg.workers; w++) {
		pq_drop_all(s, &sv->wq[w].q);
		sv->wq[w].busy = 0;
	}
}

static void server_restart(struct nk_sim *s, uint32_t sid)
{
	struct server *sv = &s->srv[sid];
	if (sv->up)
		return;
	store_reset(&sv->store);
	sv->up = 1;
	sv->busy = 0;
	sv->q.len = 0;
}

/* ---- history (record_history) ------------------------------------------------------ */

static struct vown *vown_slot(struct vown *t, uint64_t cap, uint32_t keyhash, uint64_t ver)
{
	uint64_t mask = cap - 1, i = nk_mix64(((uint64_t)keyhash << 32) ^ ver) & mask;
	while (t[i].ver && !(t[i].ver == ver && t[i].keyhash == keyhash))
		i = (i + 1) & mask;
	return &t[i];
}

static uint64_t vown_get(const struct nk_sim *s, uint32_t keyhash, uint64_t ver)
{
	if (ver == 1)
		return NK_SIM_OWNER_INITIAL;  /* every key is preloaded at version 1 */
	if (!s->vown_cap)
		return 0;
	struct vown *e = vown_slot(s->vown, s->vown_cap, keyhash, ver);
	return e->ver ? e->owner : 0;
}

/* Note that (keyhash, ver) holds `owner`'s value; the first note wins. */
static void vown_put(struct nk_sim *s, uint32_t keyhash, uint64_t ver, uint64_t owner)
{
	if (!ver || !owner)
		return;
	if ((s->vown_n + 1) * 2 > s->vown_cap) {
		uint64_t nc = s->vown_cap ? s->vown_cap * 2 : 1u << 16;
		struct vown *nt = calloc(nc, sizeof(*nt));
		if (!nt)
			return;
		for (uint64_t i = 0; i < s->vown_cap; i++)
			if (s->vown[i].ver)
				*vown_slot(nt, nc, s->vown[i].keyhash, s->vown[i].ver) = s->vown[i];
		free(s->vown);
		s->vown = nt;
		s->vown_cap = nc;
	}
	struct vown *e = vown_slot(s->vown, s->vown_cap, keyhash, ver);
	if (e->ver)
		return;
	e->ver = ver;
	e->keyhash = keyhash;
	e->owner = owner;
	s->vown_n++;
}

static struct nk_sim_op *op_rec(struct nk_sim *s, uint64_t serial)
{
	if (!s->cfg.record_history || !serial)
		return NULL;
	if (serial > s->ops_cap) {
		uint64_t nc = s->ops_cap ? s->ops_cap * 2 : 1u << 16;
		while (nc < serial)
			nc *= 2;
		struct nk_sim_op *n = realloc(s->ops, nc * sizeof(*n));
		if (!n)
			return NULL;
		memset(n + s->ops_cap, 0, (nc - s->ops_cap) * sizeof(*n));
		s->ops = n;
		s->ops_cap = nc;
	}
	return &s->ops[serial - 1];
}

/* ---- clients ----------------------------------------------------------------------- */

/* the multiget side tables for nc slots (slot_alloc grows them together) */
static int mget_grow(struct nk_sim *s, uint32_t nc)
{
	size_t k = s->mget_max;
	struct nk_rank_info *mk = realloc(s->mkeys, (size_t)nc * k * sizeof(*mk));
	if (!mk)
		return -1;
	s->mkeys = mk;
	uint32_t *mr = realloc(s->mranks, (size_t)nc * k * sizeof(*mr));
	if (!mr)
		return -1;
	s->mranks = mr;
	uint8_t *mc = realloc(s->mcount, nc);
	if (!mc)
		return -1;
	s->mcount = mc;
	uint32_t nb = (nc + MBUF_BLOCK - 1) / MBUF_BLOCK;
	if (nb > s->mbuf_blocks) {
		uint8_t **b = realloc(s->mbuf, nb * sizeof(*b));
		if (!b)
			return -1;
		s->mbuf = b;
		for (uint32_t i = s->mbuf_blocks; i < nb; i++) {
			b[i] = calloc(MBUF_BLOCK, s->mbuf_len);
			if (!b[i])
				return -1;
			s->mbuf_blocks = i + 1;
		}
	}
	return 0;
}

static uint8_t *slot_buf(const struct nk_sim *s, uint32_t si)
{
	return s->mbuf[si / MBUF_BLOCK] + (size_t)(si % MBUF_BLOCK) * s->mbuf_len;
}

static uint32_t slot_alloc(struct nk_sim *s)
{
	if (s->slot_free == NONE32) {
		uint32_t oc = s->slot_cap, nc = oc ? oc * 2 : 4096;
		if (nc > (1u << 27))
			return NONE32;
		struct slot *sl = realloc(s->slots, (size_t)nc * sizeof(*sl));
		if (!sl)
			return NONE32;
		s->slots = sl;
		if (s->mget_max > 1 && mget_grow(s, nc))
			return NONE32;
		for (uint32_t i = oc; i < nc; i++) {
			sl[i].next_free = i + 1 < nc ? i + 1 : NONE32;
			sl[i].live = 0;
		}
		s->slot_free = oc;
		s->slot_cap = nc;
	}
	uint32_t i = s->slot_free;
	s->slot_free = s->slots[i].next_free;
	return i;
}

static void slot_release(struct nk_sim *s, uint32_t i)
{
	s->slots[i].live = 0;
	s->slots[i].next_free = s->slot_free;
	s->slot_free = i;
	s->outstanding--;
}

static const uint8_t *rank_key(struct nk_sim *s, uint32_t rank, uint32_t key, uint8_t *buf)
{
	if (rank < s->key_cache_n) {
		uint8_t *k = s->key_cache + (size_t)rank * s->key_stride;
		if (s->key_cache_id[rank] != key) {
			nk_key_bytes(key, s->key_made, k);
			s->key_cache_id[rank] = key;
		}
		return k;
	}
	nk_key_bytes(key, s->key_made, buf);
	return buf;
}

/* A multiget: the host logic turns it into packets (one, or one per server,
 * ...), sent one after another by the client's core. */
static void send_mout(struct nk_sim *s, uint32_t si, uint64_t t, int n);

static void send_multiget(struct nk_sim *s, uint32_t si, uint64_t t)
{
	struct slot *sl = &s->slots[si];
	uint32_t m = s->mcount[si];
	const struct nk_rank_info *ri = &s->mkeys[(size_t)si * s->mget_max];
	const uint32_t *rk = &s->mranks[(size_t)si * s->mget_max];
	for (uint32_t j = 0; j < m; j++)
		s->mreq[j] = (struct nk_req_key){
			.key = rank_key(s, rk[j], ri[j].key, s->mkeybuf[j]),
			.keyhash = ri[j].keyhash, .value_len = ri[j].value_len, .home = ri[j].home};
	struct nk_req_spec spec = {
		.kind = NK_KIND_MULTIGET,
		.key_len = (uint8_t)s->wl->cfg.key_size,
		.client_id = (uint16_t)sl->client,
		.home = ri[0].home,
		.req_id = (uint32_t)sl->serial,
		.keyhash = ri[0].keyhash,
		.send_ns = sl->intended / PS_PER_NS,
		.key = s->mreq[0].key,
		.nkeys = (uint8_t)m,
		.keys = s->mreq,
		.buf = slot_buf(s, si),
		.buf_len = s->mbuf_len,
	};
	struct client *c = &s->cli[sl->client];
	int n = s->host->client_multiget(c->hstate, &spec, s->mout, NK_HOST_MAX_REQ_OUT);
	send_mout(s, si, t, n);
}

/* Send the n packets of one request in s->mout (a multiget's, a split
 * write's): one core builds and sends them, one after another. */
static void send_mout(struct nk_sim *s, uint32_t si, uint64_t t, int n)
{
	struct slot *sl = &s->slots[si];
	struct client *c = &s->cli[sl->client];
	uint64_t *core = client_core(s, c);
	uint64_t ts = t > *core ? t : *core;
	ts += s->cpu_ps;
	uint64_t sent = ts;
	for (int i = 0; i < n; i++) {
		uint32_t pi = pkt_alloc(s);
		if (pi == NONE32)
			break;
		struct pkt *p = &s->pk[pi];
		p->m = s->mout[i].msg;
		p->src = (uint16_t)(s->S + sl->client);
		p->dst = s->mout[i].dst;
		p->slot = si;
		p->serial = sl->serial;
		ts += s->tx_ps + s->key_ps * msg_keys(&p->m);
		s->st.client_packets++;
		sent = host_send(s, pi, ts);
	}
	*core = ts;
	if (sent > ts)
		ts = sent;      /* the timeout runs from the last packet's departure */
	if (s->cfg.timeout_ns > 0) {
		sl->deadline = ts + (uint64_t)(s->cfg.timeout_ns * PS_PER_NS);
		ev_push(s, sl->deadline, EV_TIMEOUT, si, LANE_TIMER);
	}
}

/* build the slot's request and put it on the client's uplink at time t */
static void send_request(struct nk_sim *s, uint32_t si, uint64_t t)
{
	struct slot *sl = &s->slots[si];
	if (s->mget_max > 1 && s->mcount[si]) {
		send_multiget(s, si, t);
		return;
	}
	uint32_t pi = pkt_alloc(s);
	if (pi == NONE32)
		return;
	struct pkt *p = &s->pk[pi];
	const uint8_t *key = rank_key(s, sl->rank, sl->ri.key, s->keybuf);
	struct nk_req_spec spec = {
		.kind = sl->write ? NK_KIND_WRITE : NK_KIND_READ,
		.key_len = (uint8_t)s->wl->cfg.key_size,
		.client_id = (uint16_t)sl->client,
		.home = sl->ri.home,
		.req_id = (uint32_t)sl->serial,
		.keyhash = sl->ri.keyhash,
		.value_len = sl->ri.value_len,
		.send_ns = sl->intended / PS_PER_NS,
		.key = key,
	};
	struct client *c = &s->cli[sl->client];
	uint16_t dst = s->host->client_request(c->hstate, &spec, &p->m);
	if (s->host->client_split) {
		/* a request the wire carries in several packets (a multi-packet
		 * write) */
		int n = s->host->client_split(c->hstate, &p->m, dst, s->mout, NK_HOST_MAX_REQ_OUT);
		if (n != 1) {
			pkt_free(s, pi);
			send_mout(s, si, t, n);
			return;
		}
	}
	p->src = (uint16_t)(s->S + sl->client);
	p->dst = dst;
	p->slot = si;
	p->serial = sl->serial;
	/* the client's cores: requests queue behind each other's CPU cost */
	uint64_t *core = client_core(s, c);
	uint64_t ts = t > *core ? t : *core;
	ts += s->cpu_ps + s->tx_ps + s->key_ps;
	*core = ts;
	s->st.client_packets++;
	ts = host_send(s, pi, ts);
	if (s->cfg.timeout_ns > 0) {
		sl->deadline = ts + (uint64_t)(s->cfg.timeout_ns * PS_PER_NS);
		ev_push(s, sl->deadline, EV_TIMEOUT, si, LANE_TIMER);
	}
}

/* stage 1: draw the sample PRE_ALIAS arrivals ahead */
static inline void pre_draw(struct nk_sim *s, uint32_t pos)
{
	const struct nk_workload *wl = s->wl;
	uint32_t k = pos & (PRE_RING - 1);
	if (wl->cfg.kind == NK_WL_ZIPF) {
		uint64_t u = nk_rng_next(&s->r_key);
		s->pre_u[k] = u;
		uint32_t i = (uint32_t)(((u >> 32) * (uint64_t)wl->alias.n) >> 32);
		__builtin_prefetch(&wl->alias.e[i]);
	} else {
		uint32_t r = nk_workload_sample(wl, &s->r_key);
		s->pre_rank[k] = r;
		__builtin_prefetch(&s->ranks[r]);
	}
}

/* stage 2: resolve the alias draw PRE_RANK arrivals ahead */
static inline void pre_resolve(struct nk_sim *s, uint32_t pos)
{
	const struct nk_workload *wl = s->wl;
	if (wl->cfg.kind != NK_WL_ZIPF)
		return;
	uint32_t k = pos & (PRE_RING - 1);
	uint32_t r = nk_alias_sample(&wl->alias, s->pre_u[k]);
	s->pre_rank[k] = r;
	__builtin_prefetch(&s->ranks[r]);
	if (r < s->key_cache_n) {
		__builtin_prefetch(&s->key_cache_id[r]);
		__builtin_prefetch(s->key_cache + (size_t)r * s->key_stride);
	}
}

static void pre_init(struct nk_sim *s)
{
	if (s->wl->cfg.kind == NK_WL_TRACE)
		return;
	for (uint32_t p = 0; p < PRE_ALIAS; p++)
		pre_draw(s, p);
	for (uint32_t p = 0; p < PRE_RANK; p++)
		pre_resolve(s, p);
}

static inline uint32_t pre_next(struct nk_sim *s)
{
	uint32_t pos = s->pre_pos++;
	pre_draw(s, pos + PRE_ALIAS);
	pre_resolve(s, pos + PRE_RANK);
	return s->pre_rank[pos & (PRE_RING - 1)];
}

/* A multiget's size k (1..mget_max) and its keys: `first` and k - 1 more
 * from the popularity distribution, distinct (a repeated key is drawn again,
 * a few times, as a client dedups its keys). Returns k. */
static uint8_t mget_draw(struct nk_sim *s, uint32_t si, uint32_t first)
{
	uint32_t k = nk_alias_sample(&s->mget_alias, nk_rng_next(&s->r_op)) + 1;
	struct nk_rank_info *ri = &s->mkeys[(size_t)si * s->mget_max];
	uint32_t *rk = &s->mranks[(size_t)si * s->mget_max];
	ri[0] = s->ranks[first];
	rk[0] = first;
	uint32_t n = 1;
	for (uint32_t tries = 0; n < k && tries < 8 * k; tries++) {
		uint32_t r = pre_next(s);
		uint32_t key = s->ranks[r].key, j = 0;
		while (j < n && ri[j].key != key)
			j++;
		if (j < n)
			continue;
		ri[n] = s->ranks[r];
		rk[n++] = r;
	}
	return (uint8_t)n;
}

static void arrival(struct nk_sim *s)
{
	uint64_t t = s->now;
	/* draw the next arrival first (exact accumulator); arrivals are kept
	 * outside the heap: the loop compares arr_t with the heap's top */
	s->next_arrival += s->mean_gap_ps * nk_zig_exp1(&s->zig, &s->r_arr);
	if (s->next_arrival < (double)s->end_arrivals)
		s->arr_t = (uint64_t)s->next_arrival;
	else
		s->arr_t = UINT64_MAX;

	uint32_t si = slot_alloc(s);
	if (si == NONE32)
		return;
	struct slot *sl = &s->slots[si];
	const struct nk_workload *wl = s->wl;
	uint32_t rank;
	int write;
	if (wl->cfg.kind == NK_WL_TRACE) {
		uint64_t pos = s->trace_pos++ % wl->cfg.trace_len;
		rank = wl->trace_keys[pos];
		write = wl->trace_ops ? wl->trace_ops[pos] != 0
				      : (s->cfg.write_ratio > 0 && nk_rng_double(&s->r_op) < s->cfg.write_ratio);
	} else {
		rank = pre_next(s);
		write = s->cfg.write_ratio > 0 && nk_rng_double(&s->r_op) < s->cfg.write_ratio;
	}
	sl->ri = s->ranks[rank];
	sl->write = (uint8_t)write;
	sl->intended = t;
	sl->serial = s->next_serial++;
	uint32_t honest = s->M - s->H;
	sl->client = (uint32_t)(honest > 1 ? nk_rng_below(&s->r_arr, honest) : 0);
	sl->tries = 0;
	sl->live = 1;
	s->outstanding++;
	s->st.issued++;
	sl->rank = rank;
	if (s->mget_max > 1)
		s->mcount[si] = write ? 0 : mget_draw(s, si, rank);
	s->st.req_keys += s->mget_max > 1 && s->mcount[si] ? s->mcount[si] : 1;
	struct nk_sim_op *rec = op_rec(s, sl->serial);
	if (rec) {
		rec->invoke_ns = t / PS_PER_NS;
		rec->client = sl->client;
		rec->key = sl->ri.key;
		rec->keyhash = sl->ri.keyhash;
		rec->write = (uint8_t)write;
		rec->outcome = NK_SIM_OP_OPEN;
	}
	if (s->n_windows) {
		uint64_t w = t / s->window_ps;
		if (w < s->n_windows)
			s->w_issued[w]++;
	}
	send_request(s, si, t);
}

static void complete(struct nk_sim *s, uint32_t si, uint64_t t, int by_switch)
{
	struct slot *sl = &s->slots[si];
	uint64_t lat = (t - sl->intended + PS_PER_NS / 2) / PS_PER_NS;
	nk_hist_add(&s->hist_by[by_switch != 0], lat);
	s->st.completed++;
	/* a request the switch answered: its completing reply is the switch's
	 * (kvclient's definition, docs/mininet.md): not every switch reply
	 * packet (a multi-packet item's fragments, a RETRY head, a reply to a
	 * hostile client or one lost on the way) */
	if (by_switch)
		s->st.switch_replies++;
	if (t > s->end_arrivals)  /* a backlog drained: not the run's served rate */
		s->st.completed_late++;
	if (s->n_windows) {
		uint64_t w = t / s->window_ps;
		if (w < s->n_windows) {
			s->w_completed[w]++;
			nk_hist_add(&s->whist[w], lat);
		}
		w = sl->intended / s->window_ps;
		if (w < s->n_windows)
			s->w_done[w]++;
	}
	slot_release(s, si);
}

/* A hostile client's next message (docs/security.md): an ordinary request
 * for a workload key, turned into adversarial traffic by the protocol's
 * client_hostile; replies to it are dropped at the hostile node. */
static void hostile_send(struct nk_sim *s, uint32_t h)
{
	uint64_t t = s->now;
	uint64_t next = t + (uint64_t)(s->hostile_gap_ps * nk_zig_exp1(&s->zig, &s->r_host));
	if (next < s->end_arrivals)
		heap_push(s, next, EV_HOSTILE, h);
	uint32_t pi = pkt_alloc(s);
	if (pi == NONE32)
		return;
	uint32_t rank = nk_workload_sample(s->wl, &s->r_host);
	const struct nk_rank_info *ri = &s->ranks[rank];
	nk_key_bytes(ri->key, s->wl->cfg.key_size, s->keybuf);
	uint32_t client = s->M - s->H + h, honest = s->M - s->H;
	struct nk_req_spec spec = {
		.kind = NK_KIND_WRITE, .key_len = (uint8_t)s->wl->cfg.key_size,
		.client_id = (uint16_t)client, .home = ri->home,
		/* a recent request id: what a replay or a spoofed reply would use */
		.req_id = (uint32_t)(s->next_serial > 1 ? s->next_serial - 1 : 1),
		.keyhash = ri->keyhash, .value_len = ri->value_len,
		.send_ns = t / PS_PER_NS, .key = s->keybuf,
	};
	uint16_t victim = (uint16_t)(honest > 1 ? nk_rng_below(&s->r_host, honest) : 0);
	struct pkt *p = &s->pk[pi];
	p->m.frag_cnt = 1;
	p->dst = s->host->client_hostile(s->cli[client].hstate, nk_rng_next(&s->r_host), &spec,
					 victim, s->S, &p->m);
	p->src = (uint16_t)(s->S + client);
	p->slot = NONE32;
	p->serial = 0;
	if (p->m.kind == NK_KIND_WRITE) {
		/* a write that may take effect: in the history as a write of its
		 * own value that is never acknowledged (pending), so checkers see
		 * what it did to the honest clients' keys */
		p->serial = s->next_serial++;
		struct nk_sim_op *rec = op_rec(s, p->serial);
		if (rec) {
			*rec = (struct nk_sim_op){ .invoke_ns = t / PS_PER_NS, .client = client,
						   .key = ri->key, .keyhash = ri->keyhash, .write = 1,
						   .outcome = NK_SIM_OP_TIMEOUT };
		}
	}
	s->st.hostile_sent++;
	host_send(s, pi, t);
}

static void deliver_client(struct nk_sim *s, uint32_t pi, uint64_t t)
{
	struct pkt *p = &s->pk[pi];
	uint32_t si = p->slot;
	if (p->dst >= s->S + s->M - s->H) {
		pkt_free(s, pi);     /* a hostile client does not listen */
		return;
	}
	if (si == NONE32) {
		/* not the answer to any request of this client: a spoofed reply
		 * (counted and ignored, as kvclient does) */
		s->st.forged_replies++;
		pkt_free(s, pi);
		return;
	}
	if (si >= s->slot_cap || !s->slots[si].live || s->slots[si].serial != p->serial) {
		s->st.dup_replies++;
		pkt_free(s, pi);
		return;
	}
	struct slot *sl = &s->slots[si];
	if (s->rx_ps || s->pair_ps) {
		/* the client's first free core takes the reply */
		uint64_t *core = client_core(s, &s->cli[sl->client]);
		uint64_t start = t > *core ? t : *core;
		*core = start + s->rx_ps + s->pair_ps * msg_keys(&p->m);
		t = *core;
	}
	int v = s->host->client_reply(s->cli[sl->client].hstate, &p->m);
	uint64_t reply_ver = p->m.ver;
	uint8_t reply_found = p->m.result != 1;  /* 1 = NOT_FOUND in every codec */
	int by_switch = p->by_switch;
	pkt_free(s, pi);
	if (v == NK_REPLY_DONE) {
		struct nk_sim_op *rec = s->ops ? op_rec(s, sl->serial) : NULL;
		if (rec) {
			rec->outcome = NK_SIM_OP_OK;
			rec->done_ns = t / PS_PER_NS;
			rec->ver = reply_ver;
			rec->found = reply_found;
		}
		complete(s, si, t, by_switch);
	} else if (v == NK_REPLY_RETRY) {
		s->st.retries++;
		send_request(s, si, t);
	}
}

static void timeout(struct nk_sim *s, uint32_t si)
{
	struct slot *sl = &s->slots[si];
	if (!sl->live || sl->deadline != s->now)
		return;  /* completed, or a newer attempt owns the timer */
	if (sl->tries < s->cfg.retries) {
		sl->tries++;
		s->st.retries++;
		send_request(s, si, s->now);
		return;
	}
	s->st.timeouts++;
	struct nk_sim_op *rec = s->ops ? op_rec(s, sl->serial) : NULL;
	if (rec)
		rec->outcome = NK_SIM_OP_TIMEOUT;
	slot_release(s, si);
}

/* A switch stops as a killed netkv-switch does: the messages queued for the
 * controller go with it (drop_outage), as did, at their egress
 * (outage_kills), the packets inside it then: in its pipeline or queues,
 * or on its recirculation port. Packets reaching it are lost until it
 * restarts (switch_in). */
static void switch_stop(struct nk_sim *s)
{
	struct sw *w = &s->sw[0];  /* outages are refused with racks */
	s->switch_down = 1;
	for (; w->cpu_len; w->cpu_len--)
		count_drop(s, &s->st.drop_outage);
	w->cpu_head = 0;
}

/* A switch restarts empty: the pipeline's state (tables, registers) and the
 * multicast groups are gone until the controller installs them again; its
 * queues too (what was in them died at the stop). */
static void switch_restart(struct nk_sim *s)
{
	struct sw *w = &s->sw[0];  /* outages are refused with racks */
	if (!s->switch_down)
		return;
	if (s->pipe->fini)
		s->pipe->fini(w->pstate);
	memset(w->pstate, 0, s->pipe->state_size);
	if (s->pipe->init(w->pstate, &w->pcfg))
		return;  /* it initialised once with the same config */
	for (uint32_t g = 0; g < NK_MAX_MCAST_GROUPS; g++) {
		free(w->mcast[g].ports);
		w->mcast[g].ports = NULL;
		w->mcast[g].n = 0;
	}
	w->switch_free = w->recirc_free = 0;
	s->switch_down = 0;
	s->st.switch_restarts++;
}

/* ---- main loop ------------------------------------------------------------------- */

static void dispatch(struct nk_sim *s, uint32_t type, uint32_t idx)
{
	switch (type) {
	case EV_SWITCH_IN:
		switch_in(s, idx, s->now);
		break;
	case EV_HOST_IN:
		if (s->pk[idx].dst < s->S || s->pk[idx].dst >= s->S + s->M)
			server_in(s, idx);  /* a server or a coordinator */
		else
			deliver_client(s, idx, s->now);
		break;
	case EV_DONE:
		server_done(s, idx);
		break;
	case EV_TIMEOUT:
		timeout(s, idx);
		break;
	case EV_CRASH:
		server_crash(s, idx);
		break;
	case EV_SWITCH_DOWN:
		switch_stop(s);
		break;
	case EV_SWITCH_UP:
		switch_restart(s);
		break;
	case EV_RESTART:
		server_restart(s, idx);
		break;
	case EV_HOSTILE:
		hostile_send(s, idx);
		break;
	case EV_DYNAMICS:
		if (!s->ranks_owned)
			break;
		nk_dynamics_apply((enum nk_dyn_kind)s->cfg.dyn_kind, s->ranks, s->wl->cfg.n_keys,
				  s->cfg.dyn_count, s->cfg.dyn_hot_pool, &s->r_dyn);
		s->st.dyn_changes++;
		if (s->now + s->dyn_period_ps < s->end_arrivals)
			heap_push(s, s->now + s->dyn_period_ps, EV_DYNAMICS, 0);
		break;
	default:
		break;
	}
}

int nk_sim_run_until(struct nk_sim *s, double t_ns)
{
	if (s->finished)
		return 1;
	uint64_t limit = t_ns <= 0 ? 0 : (uint64_t)(t_ns * PS_PER_NS);
	if (limit > s->end)
		limit = s->end;
	uint64_t n = 0;
	for (;;) {
		/* an arrival goes before a heap event at the same time */
		const struct ev *top;
		heap_settle(s);
		int src = ev_next(s, &top);
		if (src >= 0 && top->t < s->arr_t) {
			struct ev e = *top;
			if (e.t > limit)
				break;
			ev_take(s, src);
			s->now = e.t;
			dispatch(s, e.pl & 15u, e.pl >> 4);
		} else if (s->arr_t != UINT64_MAX) {
			if (s->arr_t > limit)
				break;
			s->now = s->arr_t;
			arrival(s);
		} else {
			break;
		}
		n++;
		if (!s->outstanding && s->now >= s->end_arrivals && !s->extended) {
			/* every request is settled and no more will arrive:
			 * what remains (timers, stray copies) cannot change the
			 * measurement */
			ev_clear(s);
			s->arr_t = UINT64_MAX;
			break;
		}
	}
	s->events += n;
	if (s->now < limit)
		s->now = limit;
	heap_settle(s);
	const struct ev *rest;
	if ((ev_next(s, &rest) < 0 && s->arr_t == UINT64_MAX) || s->now >= s->end) {
		s->finished = 1;
		return 1;
	}
	return 0;
}

void nk_sim_run(struct nk_sim *s)
{
	while (!nk_sim_run_until(s, (double)s->end / PS_PER_NS))
		;
}

double nk_sim_now_ns(const struct nk_sim *s)
{
	return (double)s->now / PS_PER_NS;
}

double nk_sim_end_ns(const struct nk_sim *s)
{
	return (double)s->end / PS_PER_NS;
}

/* ---- setup ------------------------------------------------------------------------- */

void nk_sim_free(struct nk_sim *s)
{
	if (!s)
		return;
	cap_close(s);
	if (s->srv) {
		for (uint32_t i = 0; i < s->S + s->C; i++) {
			if (s->srv[i].hstate && s->host && i < s->S && s->host->server_fini)
				s->host->server_fini(s->srv[i].hstate);
			if (s->srv[i].hstate && s->host && i >= s->S && s->host->coord_fini)
				s->host->coord_fini(s->srv[i].hstate);
			free(s->srv[i].hstate);
			free(s->srv[i].store.e);
			free(s->srv[i].wq);
		}
	}
	if (s->cli) {
		for (uint32_t i = 0; i < s->M; i++) {
			if (s->cli[i].hstate && s->host && s->host->client_fini)
				s->host->client_fini(s->cli[i].hstate);
			free(s->cli[i].hstate);
			free(s->cli[i].core_free);
		}
	}
	for (uint32_t k = 0; s->sw && k < s->n_sw; k++) {
		struct sw *w = &s->sw[k];
		if (w->pstate && s->pipe && s->pipe->fini && w->pcfg.node_port)
			s->pipe->fini(w->pstate);
		free(w->node_port);
		free(w->g2l);
		free(w->pstate);
		free(w->cpuq);
		for (uint32_t g = 0; w->mcast && g < NK_MAX_MCAST_GROUPS; g++)
			free(w->mcast[g].ports);
		free(w->mcast);
	}
	free(s->sw);
	free(s->downs);
	free(s->trunk_free);
	free(s->trunk_bytes);
	free(s->srv);
	free(s->ops);
	free(s->vown);
	free(s->key_cache);
	free(s->key_cache_id);
	free(s->cli);
	free(s->heap);
	for (int l = 0; l < N_LANES; l++)
		free(s->lane[l].ev);
	free(s->pk);
	free(s->slots);
	free(s->mkeys);
	free(s->mranks);
	free(s->mcount);
	for (uint32_t b = 0; b < s->mbuf_blocks; b++)
		free(s->mbuf[b]);
	free(s->mbuf);
	nk_alias_free(&s->mget_alias);
	free(s->up_free);
	free(s->down_free);
	free(s->up_bytes);
	free(s->down_bytes);
	free(s->fault_up);
	free(s->fault_down);
	if (s->ranks_owned)
		free(s->ranks);
	nk_hist_free(&s->hist);
	nk_hist_free(&s->hist_by[0]);
	nk_hist_free(&s->hist_by[1]);
	if (s->whist) {
		for (uint32_t w = 0; w < s->n_windows; w++)
			nk_hist_free(&s->whist[w]);
		free(s->whist);
	}
	free(s->w_issued);
	free(s->w_completed);
	free(s->w_done);
	free(s);
}

struct nk_sim *nk_sim_new(const struct nk_sim_cfg *cfg, const struct nk_workload *wl,
			  char *err, size_t errlen)
{
	struct nk_sim *s = NULL;
#define FAIL(...)                                          \
	do {                                               \
		if (err && errlen)                         \
			snprintf(err, errlen, __VA_ARGS__); \
		nk_sim_free(s);                            \
		return NULL;                               \
	} while (0)
	if (!cfg || !wl)
		FAIL("nk_sim_new: NULL config or workload");
	s = calloc(1, sizeof(*s));
	if (!s)
		FAIL("out of memory");
	s->cfg = *cfg;
	s->cfg.capacity = NULL;
	s->wl = wl;
	s->S = cfg->n_servers;
	s->M = cfg->n_clients;
	s->C = cfg->n_coords;
	if (s->S < 1 || s->M < 1 || s->C > 64 || s->S + s->M + s->C > 4000)
		FAIL("servers + clients + coordinators: %u + %u + %u (allowed: 1.., 1.., 0..64 and "
		     "total < 4000)", s->S, s->M, s->C);
	if (wl->cfg.n_servers != s->S)
		FAIL("workload placement is for %u servers, sim has %u", wl->cfg.n_servers, s->S);
	if (cfg->workers < 1)
		FAIL("topology.server.workers: must be >= 1");
	if (!(cfg->offered_rps >= 0) || !(cfg->duration_s > 0) || !(cfg->drain_s >= 0))
		FAIL("offered rate, duration and drain must be >= 0 (duration > 0)");
	if (cfg->dispatch > NK_DISPATCH_BY_KEY)
		FAIL("topology.server.dispatch: %u unknown", cfg->dispatch);
	if (cfg->service > NK_SERVICE_LOGNORMAL)
		FAIL("topology.server.service: %u unknown", cfg->service);
	s->pipe = nk_pipeline_find(cfg->protocol);
	s->host = nk_host_find(cfg->protocol);
	if (s->host) {
		s->wire_proto = s->host->proto;
		s->wire_size = nk_wire_size_of(s->wire_proto);
	}
	if (!s->pipe || !s->host)
		FAIL("protocol %s: no %s in the C library", cfg->protocol ? cfg->protocol : "(null)",
		     !s->pipe ? "switch pipeline" : "host logic");
	s->H = cfg->hostile_clients;
	if (s->H >= s->M)
		FAIL("topology.hostile_clients: %u (allowed: 0..%u, fewer than the clients)", s->H,
		     s->M - 1);
	if (s->H && !s->host->client_hostile)
		FAIL("topology.hostile_clients: protocol %s has no hostile traffic", cfg->protocol);
	if (s->H && !(cfg->hostile_rps > 0))
		FAIL("topology.hostile_rps: must be > 0 with hostile clients");
	if (s->C && (!s->host->coord_handle || !s->host->coord_init || cfg->coord_cores < 1))
		FAIL("protocol %s: no coordinator host logic (or coordinator cores < 1)",
		     cfg->protocol);
	s->n_nodes = s->S + s->M + s->C;
	s->cpu_port = s->n_nodes;
	s->recirc_port = s->n_nodes + 1;
	if (cfg->racks > 1) {
		if (cfg->racks > NK_SIM_MAX_RACKS || s->S % cfg->racks)
			FAIL("topology.racks: %u for %u servers (allowed: 2..%u dividing the servers)",
			     cfg->racks, s->S, NK_SIM_MAX_RACKS);
		s->R = cfg->racks;
		s->per_rack = s->S / s->R;
	}
	s->n_ports = s->n_nodes + 2;
	s->n_sw = 1 + s->R;
	s->order_free = s->pipe->order_free;

	/* switches */
	s->cpu_cap = cfg->cpu_queue ? cfg->cpu_queue : 1;
	s->sw = calloc(s->n_sw, sizeof(*s->sw));
	s->trunk_free = calloc(2 * s->R + 1, sizeof(uint64_t));
	s->trunk_bytes = calloc(2 * s->R + 1, sizeof(uint64_t));
	if (!s->sw || !s->trunk_free || !s->trunk_bytes)
		FAIL("out of memory (switches)");
	for (uint32_t k = 0; k < s->n_sw; k++) {
		struct sw *w = &s->sw[k];
		/* its servers: the racks (the spine), its rack's (a leaf), or all;
		 * then the clients and coordinators, then its controller */
		uint32_t srv = !s->R ? s->S : k ? s->per_rack : s->R;
		w->n_local = srv + s->M + s->C;
		w->cpu_port = w->n_local;
		w->recirc_port = w->n_local + 1;
		/* node_fwd: node l on port l; the controller behind the CPU port */
		uint16_t *node_port = malloc((w->n_local + 1) * sizeof(uint16_t));
		w->g2l = malloc((s->n_nodes + 1) * sizeof(uint16_t));
		w->pstate = calloc(1, s->pipe->state_size);
		w->mcast = calloc(NK_MAX_MCAST_GROUPS, sizeof(*w->mcast));
		w->cpuq = malloc(s->cpu_cap * sizeof(*w->cpuq));
		if (!node_port || !w->g2l || !w->pstate || !w->mcast || !w->cpuq) {
			free(node_port);
			FAIL("out of memory (pipeline state)");
		}
		for (uint32_t i = 0; i <= w->n_local; i++)
			node_port[i] = (uint16_t)(i < w->n_local ? i : w->cpu_port);
		for (uint32_t g = 0; g <= s->n_nodes; g++) {
			uint32_t l = g;
			if (s->R && g >= s->S)
				l = srv + (g - s->S);  /* clients, coordinators, controller */
			else if (s->R && !k)
				l = g / s->per_rack;   /* a server: its rack */
			else if (s->R)
				l = host_switch(s, g) == k ? g % s->per_rack : NK_NODE_NONE;
			w->g2l[g] = (uint16_t)l;
		}
		struct nk_pipeline_cfg pc = {
			.n_servers = srv, .n_clients = s->M, .n_nodes = w->n_local + 1,
			.node_port = node_port,
			.cpu_port = (uint16_t)w->cpu_port, .recirc_port = (uint16_t)w->recirc_port,
			.seed = nk_mix64(cfg->seed ^ 0x70697065ULL ^ ((uint64_t)k << 40)),
			.params = cfg->params,
		};
		w->node_port = node_port;  /* kept: a restart initialises the pipeline again */
		w->pcfg = pc;
		int rc = s->pipe->init(w->pstate, &pc);
		if (rc)
			FAIL("protocol %s: pipeline init failed (%d)", cfg->protocol, rc);
	}

	/* hosts */
	s->srv = calloc(s->S + s->C, sizeof(*s->srv));
	s->cli = calloc(s->M, sizeof(*s->cli));
	if (!s->srv || !s->cli)
		FAIL("out of memory (hosts)");
	for (uint32_t i = 0; i < s->S; i++) {
		struct server *sv = &s->srv[i];
		sv->hstate = calloc(1, s->host->server_state_size ? s->host->server_state_size : 1);
		if (!sv->hstate)
			FAIL("out of memory (server state)");
		struct nk_host_cfg hc = {.n_servers = s->S, .n_clients = s->M, .id = i,
					 .n_coords = s->C,
					 .seed = nk_mix64(cfg->seed ^ (0x73727600ULL + i)),
					 .params = cfg->params};
		if (s->host->server_init(sv->hstate, &hc))
			FAIL("protocol %s: server %u init failed", cfg->protocol, i);
		sv->workers = cfg->workers;
		sv->store.wl = wl;
		sv->nkstore.ops = &sim_store_ops;
		sv->nkstore.impl = &sv->store;
		if (cfg->dispatch == NK_DISPATCH_BY_KEY) {
			sv->wq = calloc(cfg->workers, sizeof(*sv->wq));
			if (!sv->wq)
				FAIL("out of memory (worker queues)");
		}
		sv->cap = cfg->capacity ? cfg->capacity[i] : 1.0;
		if (!(sv->cap > 0))
			FAIL("server %u: capacity factor must be > 0", i);
		sv->up = 1;
	}
	for (uint32_t i = 0; i < s->C; i++) {
		struct server *co = &s->srv[s->S + i];
		co->hstate = calloc(1, s->host->coord_state_size ? s->host->coord_state_size : 1);
		if (!co->hstate)
			FAIL("out of memory (coordinator state)");
		struct nk_host_cfg hc = {.n_servers = s->S, .n_clients = s->M, .id = i,
					 .n_coords = s->C,
					 .seed = nk_mix64(cfg->seed ^ (0x636f6f00ULL + i)),
					 .params = cfg->params};
		if (s->host->coord_init(co->hstate, &hc))
			FAIL("protocol %s: coordinator %u init failed", cfg->protocol, i);
		co->workers = cfg->coord_cores;
		co->cap = 1.0;
		co->up = 1;
	}
	if (cfg->client_cores > NK_SIM_MAX_CLIENT_CORES)
		FAIL("topology.client_cores: %u (allowed: 1..%u)", cfg->client_cores,
		     NK_SIM_MAX_CLIENT_CORES);
	s->client_cores = cfg->client_cores ? cfg->client_cores : 1;  /* 0: a zeroed cfg's default */
	for (uint32_t i = 0; i < s->M; i++) {
		struct client *c = &s->cli[i];
		c->hstate = calloc(1, s->host->client_state_size ? s->host->client_state_size : 1);
		c->core_free = calloc(s->client_cores, sizeof(*c->core_free));
		if (!c->hstate || !c->core_free)
			FAIL("out of memory (client state)");
		struct nk_host_cfg hc = {.n_servers = s->S, .n_clients = s->M, .id = i,
					 .n_coords = s->C,
					 .seed = nk_mix64(cfg->seed ^ (0x636c6900ULL + i)),
					 .params = cfg->params};
		if (s->host->client_init(c->hstate, &hc))
			FAIL("protocol %s: client %u init failed", cfg->protocol, i);
	}

	/* links */
	s->up_free = calloc(s->n_nodes, sizeof(uint64_t));
	s->down_free = calloc(s->n_ports, sizeof(uint64_t));
	s->up_bytes = calloc(s->n_nodes, sizeof(uint64_t));
	s->down_bytes = calloc(s->n_ports, sizeof(uint64_t));
	if (!s->up_free || !s->down_free || !s->up_bytes || !s->down_bytes)
		FAIL("out of memory (links)");
	if (!(cfg->tx_ns >= 0))
		FAIL("topology.server.tx_ns: must be >= 0");
	if (!(cfg->client_max_rps >= 0) || !(cfg->switch_mpps >= 0))
		FAIL("topology.client_max_rps, switch_mpps: must be >= 0 (0 = unlimited)");
	s->client_gap_ps = cfg->client_max_rps > 0
		? (uint64_t)(1e12 / cfg->client_max_rps + 0.5) : 0;
	s->switch_pkt_ps = cfg->switch_mpps > 0 ? (uint64_t)(1e6 / cfg->switch_mpps + 0.5) : 0;
	if (s->switch_pkt_ps) {
		s->order_free = 0;   /* the switch's FIFO needs packets in time order */
		s->in_order = 1;
	}
	s->ser_fx = cfg->link_gbps > 0 ? (uint64_t)(8000.0 / cfg->link_gbps * 65536.0 + 0.5) : 0;
	s->recirc_ps_per_byte = cfg->recirc_gbps > 0 ? 8000.0 / cfg->recirc_gbps : 0.0;
	s->link_ps = (uint64_t)(cfg->link_latency_ns * PS_PER_NS + 0.5);
	s->switch_ps = (uint64_t)(cfg->switch_latency_ns * PS_PER_NS + 0.5);
	s->extra_ps = (uint64_t)(cfg->extra_delay_ns * PS_PER_NS + 0.5);
	s->cpu_ps = (uint64_t)(cfg->client_cpu_ns * PS_PER_NS + 0.5);
	int faults = cfg->loss > 0 || cfg->duplicate > 0 || cfg->reorder > 0 || cfg->extra_delay_ns > 0;
	s->fault_up = calloc(s->n_nodes, 1);
	s->fault_down = calloc(s->n_ports, 1);
	if (!s->fault_up || !s->fault_down)
		FAIL("out of memory (links)");
	if (cfg->fault_links > NK_FAULT_LINKS_SERVERS)
		FAIL("target.faults.links: %u unknown", cfg->fault_links);
	for (uint32_t i = 0; faults && i < s->n_nodes; i++) {
		int is_srv = i < s->S;
		int on = cfg->fault_links == NK_FAULT_LINKS_ALL ||
			 (cfg->fault_links == NK_FAULT_LINKS_SERVERS && is_srv) ||
			 (cfg->fault_links == NK_FAULT_LINKS_CLIENTS && !is_srv);
		s->fault_up[i] = s->fault_down[i] = (uint8_t)on;
	}
	s->tx_ps = (uint64_t)(cfg->client_tx_ns * PS_PER_NS + 0.5);
	s->key_ps = (uint64_t)(cfg->client_key_ns * PS_PER_NS + 0.5);
	s->rx_ps = (uint64_t)(cfg->client_rx_ns * PS_PER_NS + 0.5);
	s->pair_ps = (uint64_t)(cfg->client_pair_ns * PS_PER_NS + 0.5);
	if (!(cfg->client_tx_ns >= 0) || !(cfg->client_key_ns >= 0) || !(cfg->client_rx_ns >= 0) ||
	    !(cfg->client_pair_ns >= 0))
		FAIL("topology.client_*_ns: must be >= 0");
	/* a reply that costs the client CPU must wait for its core, in time order */
	s->fast_client = !(cfg->timeout_ns > 0) && !s->rx_ps && !s->pair_ps;
	s->svc_plain = cfg->per_byte_ns == 0 && cfg->tx_ns == 0;
	if (cfg->mget_max > 1) {
		if (cfg->mget_max > NK_MAX_REQ_KEYS || !cfg->mget_weights)
			FAIL("workload.multiget.max_keys: %u (allowed: 1..%u)", cfg->mget_max,
			     NK_MAX_REQ_KEYS);
		if (!s->host->client_multiget)
			FAIL("protocol %s: no multiget requests (allowed: workload.multiget.mean = 1)",
			     cfg->protocol);
		if (wl->cfg.kind == NK_WL_TRACE)
			FAIL("workload.multiget: not with a trace workload (allowed: mean = 1)");
		double total = 0;
		for (uint32_t k = 0; k < cfg->mget_max; k++) {
			if (!(cfg->mget_weights[k] >= 0) || !isfinite(cfg->mget_weights[k]))
				FAIL("workload.multiget: size weight %u is %g (allowed: finite, >= 0)",
				     k + 1, cfg->mget_weights[k]);
			total += cfg->mget_weights[k];
		}
		if (!(total > 0) || nk_alias_init(&s->mget_alias, cfg->mget_weights, cfg->mget_max))
			FAIL("workload.multiget: the size weights sum to 0");
		s->mget_max = cfg->mget_max;
		s->mbuf_len = s->mget_max * wl->cfg.key_size;
	}

	/* workload */
	if (cfg->dyn_kind != NK_DYN_NONE && wl->cfg.kind != NK_WL_TRACE) {
		s->ranks = nk_big_alloc((size_t)wl->cfg.n_keys * sizeof(*s->ranks));
		if (!s->ranks)
			FAIL("out of memory (rank table)");
		memcpy(s->ranks, wl->ranks, (size_t)wl->cfg.n_keys * sizeof(*s->ranks));
		s->ranks_owned = 1;
	} else {
		s->ranks = wl->ranks;
	}
	/* a key's first n >= 8 bytes are made alone as they are in the whole
	 * key (nk_key_bytes: 16 B blocks), if it has 8 or more; a multiget's
	 * client reads its keys whole */
	s->key_made = wl->cfg.key_size;
	s->key_stride = NK_MAX_KEY_LEN;
	if (s->host->client_key_bytes >= 8 && s->host->client_key_bytes < wl->cfg.key_size &&
	    s->mget_max <= 1) {
		s->key_made = s->host->client_key_bytes;
		s->key_stride = (s->key_made + 15) & ~15u;
	}
	if (wl->cfg.kind != NK_WL_TRACE) {
		uint32_t n = wl->cfg.n_keys < KEY_CACHE_RANKS ? wl->cfg.n_keys : KEY_CACHE_RANKS;
		s->key_cache = nk_big_alloc((size_t)n * s->key_stride);
		s->key_cache_id = malloc((size_t)n * sizeof(uint32_t));
		if (!s->key_cache || !s->key_cache_id)
			FAIL("out of memory (key cache)");
		memset(s->key_cache_id, 0xFF, (size_t)n * sizeof(uint32_t));  /* NONE32: no key id */
		s->key_cache_n = n;
	}

	/* rng streams */
	nk_rng_seed(&s->r_arr, cfg->seed, 1);
	nk_rng_seed(&s->r_key, cfg->seed, 2);
	nk_rng_seed(&s->r_op, cfg->seed, 3);
	nk_rng_seed(&s->r_svc, cfg->seed, 4);
	nk_rng_seed(&s->r_fault, cfg->seed, 5);
	nk_rng_seed(&s->r_dyn, cfg->seed, 6);
	nk_rng_seed(&s->r_host, cfg->seed, 7);

	/* time and measurement */
	s->end_arrivals = (uint64_t)(cfg->duration_s * 1e12);
	s->end = s->end_arrivals + (uint64_t)(cfg->drain_s * 1e12);
	if (nk_hist_init(&s->hist, NK_HIST_SUB_BITS, NK_HIST_MAX_BITS) ||
	    nk_hist_init(&s->hist_by[0], NK_HIST_SUB_BITS, NK_HIST_MAX_BITS) ||
	    nk_hist_init(&s->hist_by[1], NK_HIST_SUB_BITS, NK_HIST_MAX_BITS))
		FAIL("out of memory (histogram)");
	if (cfg->window_s > 0) {
		s->window_ps = (uint64_t)(cfg->window_s * 1e12);
		if (!s->window_ps)
			FAIL("timeline window too small");
		uint64_t nw = (s->end + s->window_ps - 1) / s->window_ps;
		if (nw > 1000000)
			FAIL("timeline: %llu windows (max 1e6); raise the window",
			     (unsigned long long)nw);
		s->n_windows = (uint32_t)nw;
		s->whist = calloc(nw, sizeof(*s->whist));
		s->w_issued = calloc(nw, sizeof(uint64_t));
		s->w_completed = calloc(nw, sizeof(uint64_t));
		s->w_done = calloc(nw, sizeof(uint64_t));
		if (!s->whist || !s->w_issued || !s->w_completed || !s->w_done)
			FAIL("out of memory (timeline)");
		for (uint32_t w = 0; w < nw; w++)
			if (nk_hist_init(&s->whist[w], 5, 40))
				FAIL("out of memory (timeline)");
	}

	pre_init(s);
	s->pk_free = NONE32;
	s->slot_free = NONE32;
	s->next_serial = 1;
	nk_zig_exp_init(&s->zig);
	s->arr_t = UINT64_MAX;
	if (cfg->offered_rps > 0) {
		s->mean_gap_ps = 1e12 / cfg->offered_rps;
		s->next_arrival = s->mean_gap_ps * nk_zig_exp1(&s->zig, &s->r_arr);
		if (s->next_arrival < (double)s->end_arrivals)
			s->arr_t = (uint64_t)s->next_arrival;
	}
	if (s->H) {
		s->hostile_gap_ps = 1e12 / cfg->hostile_rps;
		for (uint32_t h = 0; h < s->H; h++)
			heap_push(s, (uint64_t)(s->hostile_gap_ps * nk_zig_exp1(&s->zig, &s->r_host)),
				  EV_HOSTILE, h);
	}
	if (s->ranks_owned) {
		if (!(cfg->dyn_period_s > 0))
			FAIL("workload.dynamics.period_s: must be > 0");
		s->dyn_period_ps = (uint64_t)(cfg->dyn_period_s * 1e12);
		if (s->dyn_period_ps < s->end_arrivals)
			heap_push(s, s->dyn_period_ps, EV_DYNAMICS, 0);
	}
	return s;
#undef FAIL
}

/* ---- results ------------------------------------------------------------------------ */

/* s->hist, all completed requests: the sum of hist_by[0] and [1], exactly
 * what adding each request to it as well would have given. */
static const struct nk_hist *merged_hist(const struct nk_sim *s)
{
	struct nk_hist *h = (struct nk_hist *)&s->hist;  /* derived data, kept in s */
	const struct nk_hist *a = &s->hist_by[0], *b = &s->hist_by[1];
	for (uint32_t i = 0; i < h->nbuckets; i++)
		h->counts[i] = a->counts[i] + b->counts[i];
	h->total = a->total + b->total;
	h->clamped = a->clamped + b->clamped;
	h->sum = a->sum + b->sum;
	h->min = a->min < b->min ? a->min : b->min;
	h->max = a->max > b->max ? a->max : b->max;
	return h;
}

void nk_sim_stats(const struct nk_sim *s, struct nk_sim_stats *out)
{
	const struct nk_hist *all = merged_hist(s);
	*out = s->st;
	out->now_s = (double)s->now / 1e12;
	out->finished = s->finished;
	out->events = s->events;
	out->unfinished = s->outstanding;
	out->mean_ns = nk_hist_mean(all);
	out->p50_ns = nk_hist_quantile(all, 0.50);
	out->p90_ns = nk_hist_quantile(all, 0.90);
	out->p99_ns = nk_hist_quantile(all, 0.99);
	out->p999_ns = nk_hist_quantile(all, 0.999);
	out->max_ns = all->total ? (double)all->max : 0.0;
	out->n_windows = s->n_windows;
	out->hist_buckets = all->nbuckets;
	/* NaN: no request of that kind completed */
	const struct nk_hist *srv = &s->hist_by[0], *sw = &s->hist_by[1];
	out->server_p50_ns = srv->total ? nk_hist_quantile(srv, 0.50) : NAN;
	out->server_p99_ns = srv->total ? nk_hist_quantile(srv, 0.99) : NAN;
	out->switch_p50_ns = sw->total ? nk_hist_quantile(sw, 0.50) : NAN;
	out->switch_p99_ns = sw->total ? nk_hist_quantile(sw, 0.99) : NAN;
}

uint32_t nk_sim_hist(const struct nk_sim *s, uint64_t *lower_ns, uint64_t *counts, uint32_t n)
{
	const struct nk_hist *all = counts ? merged_hist(s) : &s->hist;
	for (uint32_t i = 0; i < n && i < all->nbuckets; i++) {
		if (lower_ns)
			lower_ns[i] = nk_hist_bucket_lower(all, i);
		if (counts)
			counts[i] = all->counts[i];
	}
	return all->nbuckets;
}

void nk_sim_server_counts(const struct nk_sim *s, uint64_t *out)
{
	for (uint32_t i = 0; i < s->S; i++)
		out[i] = s->srv[i].served;
}

uint32_t nk_sim_link_bytes(const struct nk_sim *s, uint64_t *up, uint64_t *down, uint32_t n)
{
	for (uint32_t i = 0; i < s->n_nodes && i < n; i++) {
		if (up)
			up[i] = s->up_bytes[i];
		if (down)
			down[i] = s->down_bytes[i];
	}
	return s->n_nodes;
}

uint32_t nk_sim_timeline(const struct nk_sim *s, uint64_t *issued, uint64_t *completed,
			 uint64_t *lost, double *p50_ns, double *p99_ns, uint32_t n)
{
	for (uint32_t w = 0; w < n && w < s->n_windows; w++) {
		if (issued)
			issued[w] = s->w_issued[w];
		if (completed)
			completed[w] = s->w_completed[w];
		/* the window's lost requests count as infinitely slow, as a
		 * point's do: an outage's windows are over any SLO */
		uint64_t gone = s->w_issued[w] - s->w_done[w];
		if (lost)
			lost[w] = gone;
		if (p50_ns)
			p50_ns[w] = nk_hist_quantile_lost(&s->whist[w], 0.50, gone);
		if (p99_ns)
			p99_ns[w] = nk_hist_quantile_lost(&s->whist[w], 0.99, gone);
	}
	return s->n_windows;
}

/* ---- controller hooks -------------------------------------------------------------- */

int nk_sim_reg_read(struct nk_sim *s, const char *name, uint32_t idx, uint64_t *val)
{
	void *st = s->sw[s->ctl_sw].pstate;
	return s->pipe->reg_read ? s->pipe->reg_read(st, name, idx, val) : NK_PIPE_ENOENT;
}

int nk_sim_reg_read_range(struct nk_sim *s, const char *name, uint32_t first, uint32_t count,
			  uint64_t *out)
{
	for (uint32_t i = 0; i < count; i++) {
		int rc = nk_sim_reg_read(s, name, first + i, &out[i]);
		if (rc)
			return rc;
	}
	return 0;
}

int nk_sim_reg_write(struct nk_sim *s, const char *name, uint32_t idx, uint64_t val)
{
	void *st = s->sw[s->ctl_sw].pstate;
	return s->pipe->reg_write ? s->pipe->reg_write(st, name, idx, val) : NK_PIPE_ENOENT;
}

int nk_sim_table_add(struct nk_sim *s, const char *table, const uint64_t *key, unsigned nkey,
		     const uint64_t *args, unsigned nargs)
{
	void *st = s->sw[s->ctl_sw].pstate;
	return s->pipe->table_add ? s->pipe->table_add(st, table, key, nkey, args, nargs)
				  : NK_PIPE_ENOENT;
}

int nk_sim_table_del(struct nk_sim *s, const char *table, const uint64_t *key, unsigned nkey)
{
	void *st = s->sw[s->ctl_sw].pstate;
	return s->pipe->table_del ? s->pipe->table_del(st, table, key, nkey) : NK_PIPE_ENOENT;
}

int nk_sim_mcast_set(struct nk_sim *s, uint32_t group, const uint16_t *ports, uint32_t n)
{
	if (group >= NK_MAX_MCAST_GROUPS)
		return -1;
	for (uint32_t i = 0; i < n; i++)
		if (ports[i] > s->sw[s->ctl_sw].recirc_port)
			return -1;
	uint16_t *p = NULL;
	if (n) {
		p = malloc(n * sizeof(uint16_t));
		if (!p)
			return -1;
		memcpy(p, ports, n * sizeof(uint16_t));
	}
	struct mcast_group *g = &s->sw[s->ctl_sw].mcast[group];
	free(g->ports);
	g->ports = p;
	g->n = n;
	return 0;
}

uint32_t nk_sim_cpu_recv(struct nk_sim *s, struct nk_msg *out, uint16_t *src, uint32_t max)
{
	struct sw *w = &s->sw[s->ctl_sw];
	uint32_t n = 0;
	while (n < max && w->cpu_len) {
		struct cpu_item *ci = &w->cpuq[w->cpu_head];
		out[n] = ci->m;
		if (src)
			src[n] = ci->src;
		w->cpu_head = (w->cpu_head + 1) % s->cpu_cap;
		w->cpu_len--;
		n++;
	}
	return n;
}

uint64_t nk_sim_history(const struct nk_sim *s, struct nk_sim_op *out, uint64_t n)
{
	uint64_t issued = s->next_serial - 1;
	uint64_t have = issued < s->ops_cap ? issued : s->ops_cap;
	if (out && n)
		memcpy(out, s->ops, (n < have ? n : have) * sizeof(*out));
	return have;
}

uint64_t nk_sim_version_owners(const struct nk_sim *s, uint32_t *keyhash, uint64_t *ver,
			       uint64_t *owner, uint64_t n)
{
	uint64_t k = 0;
	for (uint64_t i = 0; i < s->vown_cap; i++) {
		const struct vown *e = &s->vown[i];
		if (!e->ver)
			continue;
		if (k < n) {
			keyhash[k] = e->keyhash;
			ver[k] = e->ver;
			owner[k] = e->owner;
		}
		k++;
	}
	return k;
}

int nk_sim_server_ctl(struct nk_sim *s, uint32_t server, const char *line, char *out, size_t cap)
{
	if (server >= s->S || !s->host->server_ctl || !line)
		return -1;
	char buf[1024];
	char *argv[16];
	int argc = 0;
	snprintf(buf, sizeof(buf), "%s", line);
	for (char *tok = strtok(buf, " \t\n"); tok && argc < 16; tok = strtok(NULL, " \t\n"))
		argv[argc++] = tok;
	if (!argc)
		return -1;
	struct server *sv = &s->srv[server];
	return s->host->server_ctl(sv->hstate, &sv->nkstore, argc, argv, out, cap);
}

int nk_sim_extend(struct nk_sim *s, double extra_ns)
{
	if (!(extra_ns > 0))
		return -1;
	s->end = s->now + (uint64_t)(extra_ns * PS_PER_NS);
	s->extended = 1;
	/* the run's stray packets (copies, hostile traffic) were discarded
	 * with the event heap when it ended: free the workers they held */
	for (uint32_t i = 0; i < s->S; i++) {
		struct server *sv = &s->srv[i];
		sv->busy = 0;
		sv->q.len = 0;
		if (sv->wq)
			for (uint32_t w = 0; w < s->cfg.workers; w++)
				sv->wq[w].busy = sv->wq[w].q.len = 0;
	}
	s->finished = 0;
	return 0;
}

int nk_sim_cpu_send(struct nk_sim *s, const struct nk_msg *m, uint16_t dst)
{
	uint32_t pi = pkt_alloc(s);
	if (pi == NONE32)
		return -1;
	struct pkt *p = &s->pk[pi];
	p->m = *m;
	p->src = (uint16_t)s->n_nodes;  /* the controller's node id */
	p->dst = s->R ? (uint16_t)sw_global(s, s->ctl_sw, dst, NK_NODE_NONE) : dst;
	p->ingress = (uint16_t)s->sw[s->ctl_sw].cpu_port;
	p->sw = (uint16_t)s->ctl_sw;
	p->from_cpu = 1;
	p->wire_len = wire_len(s, m);
	if (heap_push(s, s->now, EV_SWITCH_IN, pi))
		return -1;
	s->finished = 0;
	return 0;
}

int nk_sim_schedule_crash(struct nk_sim *s, uint32_t server, double t_ns, double restart_ns)
{
	if (server >= s->S || t_ns < 0)
		return -1;
	uint64_t t = (uint64_t)(t_ns * PS_PER_NS);
	if (t < s->now)
		t = s->now;
	if (heap_push(s, t, EV_CRASH, server))
		return -1;
	if (restart_ns >= 0) {
		uint64_t r = (uint64_t)(restart_ns * PS_PER_NS);
		if (r < t)
			r = t;
		if (heap_push(s, r, EV_RESTART, server))
			return -1;
	}
	return 0;
}

int nk_sim_schedule_switch_outage(struct nk_sim *s, double t_ns, double restart_ns)
{
	if (t_ns < 0 || s->R)
		return -1;  /* with racks: not modelled (which switch?) */
	uint64_t t = (uint64_t)(t_ns * PS_PER_NS);
	if (t < s->now)
		t = s->now;
	uint64_t *downs = realloc(s->downs, (s->n_downs + 1) * sizeof(*downs));
	if (!downs)
		return -1;
	s->downs = downs;
	uint32_t i = s->n_downs++;
	for (; i && downs[i - 1] > t; i--)
		downs[i] = downs[i - 1];
	downs[i] = t;
	if (heap_push(s, t, EV_SWITCH_DOWN, 0))
		return -1;
	if (restart_ns >= 0) {
		uint64_t r = (uint64_t)(restart_ns * PS_PER_NS);
		if (heap_push(s, r < t ? t : r, EV_SWITCH_UP, 0))
			return -1;
	}
	/* packets meet the switch in time order, so that none is processed by
	 * the pipeline before it is down, or by the empty one before it is up */
	s->order_free = 0;
	s->in_order = 1;
	return 0;
}

int nk_sim_server_up(const struct nk_sim *s, uint32_t server)
{
	return server < s->S ? s->srv[server].up : -1;
}

int64_t nk_sim_store_merge(struct nk_sim *s, uint32_t from, uint32_t to)
{
	if (from >= s->S || to >= s->S || from == to)
		return -1;
	const struct sim_store *src = &s->srv[from].store;
	struct sim_store *dst = &s->srv[to].store;
	int64_t n = 0;
	for (uint32_t i = 0; i < src->cap; i++) {
		const struct store_ent *e = &src->e[i];
		if (!e->ver)
			continue;
		struct store_ent *d = dst->count ? store_find(dst, e->keyhash, e->fp) : NULL;
		if (d && d->ver >= e->ver)
			continue;
		/* store_put keys by the message's key bytes: rebuild them from fp */
		struct nk_msg m;
		memset(&m, 0, sizeof(m));
		m.keyhash = e->keyhash;
		m.key_len = (uint8_t)(e->fp >> 56);
		uint64_t fp = e->fp & ~(0xFFull << 56);
		memcpy(m.key, &fp, m.key_len < 8 ? m.key_len : 8);
		if (key_fp(&m) != e->fp || store_put(dst, &m, e->ver, e->value_len))
			return -1;
		n++;
	}
	return n;
}

int64_t nk_sim_store_newest(const struct nk_sim *s, uint32_t server)
{
	if (server >= s->S)
		return -1;
	const struct sim_store *st = &s->srv[server].store;
	uint64_t newest = 0;
	for (uint32_t i = 0; i < st->cap; i++)
		if (st->e[i].ver > newest)
			newest = st->e[i].ver;
	return newest > INT64_MAX ? INT64_MAX : (int64_t)newest;
}

uint32_t nk_sim_rank_keys(const struct nk_sim *s, uint32_t *out, uint32_t n)
{
	uint32_t nk = s->wl->cfg.n_keys;
	for (uint32_t i = 0; i < n && i < nk; i++)
		out[i] = s->ranks[i].key;
	return nk;
}

int nk_sim_capture(struct nk_sim *s, const char *dir, uint32_t snaplen, uint64_t max_bytes,
		   uint64_t max_packets, char *err, size_t errlen)
{
	cap_close(s);
	if (s->R) {
		snprintf(err, errlen, "capture: one switch only (allowed: topology.kind = rack)");
		return -1;
	}
	s->cap = calloc(s->n_nodes + 1, sizeof(*s->cap));
	s->cap_buf = calloc(1, CAP_BUF_LEN);
	if (!s->cap || !s->cap_buf) {
		snprintf(err, errlen, "capture: out of memory");
		cap_close(s);
		return -1;
	}
	char path[4096];
	for (uint32_t i = 0; i <= s->n_nodes; i++) {
		if (i < s->n_nodes)
			snprintf(path, sizeof(path), "%s/switch-p%u.pcap", dir, i);
		else
			snprintf(path, sizeof(path), "%s/switch-cpu.pcap", dir);
		if (nk_pcap_open(&s->cap[i], path, snaplen, max_bytes, max_packets) < 0) {
			snprintf(err, errlen, "capture: cannot write %s: %s", path, strerror(errno));
			cap_close(s);
			return -1;
		}
	}
	return 0;
}

uint32_t nk_sim_capture_stats(struct nk_sim *s, uint64_t *packets, uint64_t *missed,
			      uint64_t *busy_ns, uint32_t n)
{
	if (!s->cap)
		return 0;
	uint32_t k = 0;
	for (; k <= s->n_nodes && k < n; k++) {
		fflush(s->cap[k].f);
		packets[k] = s->cap[k].packets;
		missed[k] = s->cap[k].missed;
		busy_ns[k] = s->cap[k].busy_ns;
	}
	return k;
}

uint32_t nk_sim_switches(const struct nk_sim *s)
{
	return s->n_sw;
}

int nk_sim_select_switch(struct nk_sim *s, uint32_t sw)
{
	if (sw >= s->n_sw)
		return -1;
	s->ctl_sw = sw;
	return 0;
}

uint32_t nk_sim_switch_stats(const struct nk_sim *s, uint64_t *packets, uint64_t *dropped,
			     uint64_t *up_bytes, uint64_t *down_bytes, uint32_t n)
{
	for (uint32_t k = 0; k < s->n_sw && k < n; k++) {
		if (packets)
			packets[k] = s->sw[k].packets;
		if (dropped)
			dropped[k] = s->sw[k].drops;
		/* a leaf's trunk: toward the spine, and from it */
		if (up_bytes)
			up_bytes[k] = k ? s->trunk_bytes[s->R + k - 1] : 0;
		if (down_bytes)
			down_bytes[k] = k ? s->trunk_bytes[k - 1] : 0;
	}
	return s->n_sw;
}

uint32_t nk_sim_cpu_port(const struct nk_sim *s)
{
	return s->sw[s->ctl_sw].cpu_port;
}

uint32_t nk_sim_recirc_port(const struct nk_sim *s)
{
	return s->sw[s->ctl_sw].recirc_port;
}

/* ---- ABI check for bindings (cffi ABI mode re-declares these structs) ------ */

size_t nk_sim_abi_sizeof(const char *name)
{
	if (!strcmp(name, "nk_msg"))
		return sizeof(struct nk_msg);
	if (!strcmp(name, "nk_sim_cfg"))
		return sizeof(struct nk_sim_cfg);
	if (!strcmp(name, "nk_sim_stats"))
		return sizeof(struct nk_sim_stats);
	if (!strcmp(name, "nk_workload_cfg"))
		return sizeof(struct nk_workload_cfg);
	if (!strcmp(name, "nk_rank_info"))
		return sizeof(struct nk_rank_info);
	if (!strcmp(name, "nk_alias_entry"))
		return sizeof(struct nk_alias_entry);
	if (!strcmp(name, "nk_sim_op"))
		return sizeof(struct nk_sim_op);
	/* netkv/pipeline.py: a pipeline run in-process */
	if (!strcmp(name, "nk_pkt_meta"))
		return sizeof(struct nk_pkt_meta);
	if (!strcmp(name, "nk_actions"))
		return sizeof(struct nk_actions);
	if (!strcmp(name, "nk_pipeline_cfg"))
		return sizeof(struct nk_pipeline_cfg);
	if (!strcmp(name, "nk_pipeline_ops"))
		return sizeof(struct nk_pipeline_ops);
	/* netkv/quantile.py: the one quantile function */
	if (!strcmp(name, "nk_hist"))
		return sizeof(struct nk_hist);
	return 0;
}
