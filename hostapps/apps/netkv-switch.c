/*
 * netkv-switch - a software switch that runs a protocol's C pipeline (the
 * code the simulator runs) on real frames.
 *
 * Read top to bottom, like DPDK's l2fwd:
 *   1. arguments: protocol, ports (one interface each, port i = i-th
 *      --port), rack size, control socket, faults;
 *   2. init: the pipeline state, the ports (AF_PACKET, TPACKET_V2 receive
 *      ring, sendmmsg transmit batches), the pools (delayed frames,
 *      recirculation, controller copies), the control socket;
 *   3. the loop: receive a burst from every port, run each frame through
 *      parse -> decode -> pipeline -> encode -> egress faults -> transmit
 *      batch; release delayed frames that are due; flush; when every ring is
 *      empty, poll() (ports + control socket) until the next packet, the next
 *      delayed frame or the stats tick - never a fixed ring timeout;
 *   4. SIGTERM/SIGINT: print the final counters as one JSON line, exit 0.
 *
 * --closed starts it as a freshly booted switch its control plane has not
 * programmed yet: every frame from a port is dropped and counted (`closed`)
 * until the control socket's `open`; the controller's own packet-outs still
 * go through. A target restarts it so after an outage and opens it once the
 * controller has installed its state again.
 *
 * Frames of the protocol (its UDP port, netkv wire format) go through the
 * pipeline; those that fail to decode are counted and dropped. Other IPv4 is
 * forwarded by destination address (rack plan in io.h), ARP and broadcast
 * are flooded. Nothing is allocated on the per-packet path.
 *
 * Ports: 0..P-1 are the interfaces; P is the CPU (controller) port and P+1
 * the recirculation port, as seen by the pipeline (nk_pipeline_cfg).
 *
 * The recirculation port is a queue of --loop-depth frames drained at
 * --loop-rate frames/s (a port's egress queue and line rate). With --loop
 * OUT,IN (a veth pair whose ends are both this switch's) the frames really
 * leave through OUT and re-enter from IN; without, they re-enter ingress
 * from the queue directly.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "netkv/ctl.h"
#include "netkv/io.h"
#include "netkv/pcap.h"
#include "netkv/msg.h"
#include "netkv/pipeline.h"
#include "netkv/rng.h"
#include "netkv/wire.h"

#define MAX_PORTS 256
#define MAX_NODES 1024
#define MAX_GROUP_PORTS 64
#define RECIRC_SLOTS 256   /* default --loop-depth */
#define RECIRC_MAX 65536
#define LOOP_BURST 16      /* frames the loop may send back to back after an idle spell */
#define CPU_DEPTH 1024    /* default --cpu-queue (netkv passes topology.cpu_queue) */
#define CPU_MAX 65536
#define CPU_SNAP NK_FRAME_MAX /* a frame kept for the controller: whole (a cache packet is ~1.1 KB) */
#define WIRE_ERRS 11      /* -1 .. -10 and "other" */

static volatile sig_atomic_t stop_flag;
/* the handler also writes here: the idle ppoll() has no timeout, and a
 * signal that lands between the stop_flag check and ppoll() must wake it */
static int stop_fd = -1;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
	if (stop_fd >= 0) {
		uint64_t one = 1;
		ssize_t w = write(stop_fd, &one, sizeof(one));
		(void)w;
	}
}

struct fault {
	double loss, dup, reorder;
	uint64_t reorder_ns, delay_ns;
};

struct delayed {
	uint64_t at_ns;
	uint32_t slot;
	uint16_t port;
	uint16_t len;
};

struct cpu_pkt {
	uint16_t port;
	uint16_t len;
	uint8_t data[CPU_SNAP];
};

struct recirc_pkt {
	uint16_t len;
	uint8_t data[NK_FRAME_MAX];
};

struct counters {
	/* held: requests the pipeline kept to answer later (StarCache's parked
	 * reads: act.held), not drops (pipeline.h, as the simulator counts them) */
	uint64_t frames, closed, bad_frame[5], bad_msg[WIRE_ERRS], pipeline, pipe_drop, held, no_route,
		other_ip, flood, non_ip_drop, fault_loss, fault_dup, fault_delayed, delay_full,
		recirc, recirc_drop, loop_tx, loop_rx, cpu_copies, cpu_drops, mcast_copies, switch_replies,
		encode_err, packet_out, port_errors;
};

struct sw {
	/* config */
	const struct nk_pipeline_ops *ops;
	void *pstate;
	struct nk_pipeline_cfg pcfg;
	uint32_t n_ports, n_servers, n_clients, batch;
	uint16_t cpu_port, recirc_port;
	uint16_t node_port[MAX_NODES];     /* L3 plan: node -> port */
	int32_t port_node[MAX_PORTS];       /* port -> node (mcast rewrite) */
	struct nk_port port[MAX_PORTS];
	struct fault fault[MAX_PORTS];
	int any_fault;
	struct nk_rng rng;
	uint32_t sample_every, sample_ctr;
	/* multicast groups */
	uint16_t group_n[NK_MAX_MCAST_GROUPS];
	uint16_t group_port[NK_MAX_MCAST_GROUPS][MAX_GROUP_PORTS];
	/* delayed frames: pool + min-heap on release time */
	uint32_t delay_slots;
	uint8_t (*delay_buf)[NK_FRAME_MAX];
	uint32_t *delay_free;
	uint32_t delay_nfree;
	struct delayed *heap;
	uint32_t heap_n;
	/* recirculation (the loop port's egress queue) and controller rings */
	struct recirc_pkt *recirc;
	uint32_t recirc_head, recirc_tail;
	uint32_t loop_depth;       /* frames the recirculation queue holds */
	uint64_t loop_gap_ns;      /* 1 / --loop-rate (0: unlimited) */
	uint64_t loop_next_ns;     /* earliest departure of the queue's head */
	int have_loop;             /* --loop: a veth pair, out and back in */
	struct nk_port loop_out, loop_in;
	struct cpu_pkt *cpu;
	uint32_t cpu_head, cpu_tail;
	uint32_t cpu_depth;          /* frames queued for the controller at most */
	uint32_t cpu_slots;          /* the ring: a power of two >= cpu_depth, so the
				      * free-running indices wrap with it */
	/* scratch frame for encoding */
	uint8_t scratch[NK_FRAME_MAX];
	struct counters c;
	int closed;                /* --closed until `open`: forward nothing */
	struct nk_ctl ctl;
	int have_ctl;
	uint64_t now;
	uint16_t ip_id;
	/* capture (`capture start`): one file per port, the CPU port's last;
	 * capture_on is the one test an uncaptured frame pays */
	int capture_on;
	struct nk_pcap cap[MAX_PORTS + 1];
};

/* ---- egress: faults, delay heap, transmit ------------------------------------ */

static void heap_push(struct sw *s, struct delayed d)
{
	uint32_t i = s->heap_n++;
	while (i) {
		uint32_t p = (i - 1) / 2;
		if (s->heap[p].at_ns <= d.at_ns)
			break;
		s->heap[i] = s->heap[p];
		i = p;
	}
	s->heap[i] = d;
}

static struct delayed heap_pop(struct sw *s)
{
	struct delayed top = s->heap[0];
	struct delayed last = s->heap[--s->heap_n];
	uint32_t i = 0;
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		uint64_t mv = last.at_ns;
		if (l < s->heap_n && s->heap[l].at_ns < mv) {
			m = l;
			mv = s->heap[l].at_ns;
		}
		if (r < s->heap_n && s->heap[r].at_ns < mv)
			m = r;
		if (m == i)
			break;
		s->heap[i] = s->heap[m];
		i = m;
	}
	if (s->heap_n)
		s->heap[i] = last;
	return top;
}

/* ---- capture ---------------------------------------------------------------- */

/* file index: a port's own, or the CPU port's (after the last port) */
static void cap_write(struct sw *s, uint32_t file, const uint8_t *f, uint32_t len)
{
	uint64_t t0 = nk_pcap_clock_ns();
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);  /* the hosts' tcpdump clock */
	nk_pcap_write(&s->cap[file], (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec,
		      f, len);
	s->cap[file].busy_ns += nk_pcap_clock_ns() - t0;
}

static void cap_stop(struct sw *s)
{
	s->capture_on = 0;
	for (uint32_t i = 0; i <= s->n_ports; i++)
		nk_pcap_close(&s->cap[i]);
}

static void cpu_push(struct sw *s, uint16_t port, const uint8_t *f, uint32_t len)
{
	if (s->capture_on)
		cap_write(s, s->n_ports, f, len);
	if (s->cpu_tail - s->cpu_head >= s->cpu_depth) {
		s->c.cpu_drops++;
		return;
	}
	struct cpu_pkt *k = &s->cpu[s->cpu_tail++ & (s->cpu_slots - 1)];
	k->port = port;
	k->len = (uint16_t)(len < CPU_SNAP ? len : CPU_SNAP);
	memcpy(k->data, f, k->len);
	s->c.cpu_copies++;
}

static void recirc_push(struct sw *s, const uint8_t *f, uint32_t len)
{
	if (s->recirc_tail - s->recirc_head >= s->loop_depth || len > NK_FRAME_MAX) {
		s->c.recirc_drop++;   /* the loop port's queue is full */
		return;
	}
	struct recirc_pkt *k = &s->recirc[s->recirc_tail++ % s->loop_depth];
	k->len = (uint16_t)len;
	memcpy(k->data, f, len);
	s->c.recirc++;
}

static void delay_push(struct sw *s, uint16_t port, const uint8_t *f, uint32_t len, uint64_t at)
{
	if (!s->delay_nfree) {
		s->c.delay_full++;
		return;
	}
	uint32_t slot = s->delay_free[--s->delay_nfree];
	memcpy(s->delay_buf[slot], f, len);
	heap_push(s, (struct delayed){.at_ns = at, .slot = slot, .port = port, .len = (uint16_t)len});
	s->c.fault_delayed++;
}

/* one copy out of a port, after its faults */
static void egress_one(struct sw *s, uint16_t port, const uint8_t *f, uint32_t len)
{
	const struct fault *ft = &s->fault[port];
	uint64_t extra = ft->delay_ns;
	if (ft->reorder > 0 && nk_rng_double(&s->rng) < ft->reorder)
		extra += nk_rng_below(&s->rng, ft->reorder_ns + 1);
	if (extra)
		delay_push(s, port, f, len, s->now + extra);
	else
		nk_port_tx_copy(&s->port[port], f, len);
}

static void egress(struct sw *s, uint16_t port, const uint8_t *f, uint32_t len)
{
	if (port == s->cpu_port) {
		cpu_push(s, port, f, len);
		return;
	}
	if (port == s->recirc_port) {
		recirc_push(s, f, len);
		return;
	}
	if (port >= s->n_ports) {
		s->c.no_route++;
		return;
	}
	if (s->capture_on)  /* what the switch sends, before the port's faults */
		cap_write(s, port, f, len);
	if (!s->any_fault) {
		nk_port_tx_copy(&s->port[port], f, len);
		return;
	}
	const struct fault *ft = &s->fault[port];
	if (ft->loss > 0 && nk_rng_double(&s->rng) < ft->loss) {
		s->c.fault_loss++;
		return;
	}
	egress_one(s, port, f, len);
	if (ft->dup > 0 && nk_rng_double(&s->rng) < ft->dup) {
		s->c.fault_dup++;
		egress_one(s, port, f, len);
	}
}

static void release_delayed(struct sw *s)
{
	while (s->heap_n && s->heap[0].at_ns <= s->now) {
		struct delayed d = heap_pop(s);
		nk_port_tx_copy(&s->port[d.port], s->delay_buf[d.slot], d.len);
		s->delay_free[s->delay_nfree++] = d.slot;
	}
}

/* ---- the per-frame path ------------------------------------------------------- */

static void handle_frame(struct sw *s, const uint8_t *f, uint32_t len, uint16_t in_port,
			 int from_cpu, int recirculated);

/* The recirculation port sends its queue's head when its rate allows (one
 * frame per loop_gap_ns; after an idle spell up to LOOP_BURST back to back):
 * out of the loop veth, or straight back into ingress without one. Returns
 * the frames that went back into ingress here. */
static uint32_t loop_drain(struct sw *s)
{
	uint32_t n = 0;
	if (s->loop_gap_ns && s->now > LOOP_BURST * s->loop_gap_ns &&
	    s->loop_next_ns < s->now - LOOP_BURST * s->loop_gap_ns)
		s->loop_next_ns = s->now - LOOP_BURST * s->loop_gap_ns;
	for (uint32_t k = 0; k < s->batch && s->recirc_head != s->recirc_tail &&
			     s->loop_next_ns <= s->now; k++) {
		struct recirc_pkt *r = &s->recirc[s->recirc_head++ % s->loop_depth];
		s->loop_next_ns += s->loop_gap_ns;
		if (s->have_loop) {
			nk_port_tx_copy(&s->loop_out, r->data, r->len);
			s->c.loop_tx++;
		} else {
			handle_frame(s, r->data, r->len, s->recirc_port, 0, 1);
			n++;
		}
	}
	if (s->have_loop && s->loop_out.tx_n)
		nk_port_tx_flush(&s->loop_out);
	return n;
}

static int node_port_of(const struct sw *s, int32_t node)
{
	if (node < 0 || node >= MAX_NODES || s->node_port[node] == NK_NODE_NONE)
		return -1;
	return s->node_port[node];
}

/* rewrite the destination to `node` (if it is one) and fix checksums */
static void set_dst_node(uint8_t *f, const struct nk_frame *fr, int32_t node)
{
	if (node < 0)
		return;
	uint8_t mac[6];
	nk_node_mac((uint32_t)node, mac);
	nk_frame_set_dst(f, fr, mac, nk_node_ip((uint32_t)node));
}

static void l3_forward(struct sw *s, const uint8_t *f, uint32_t len, const struct nk_frame *fr,
		       uint16_t in_port)
{
	int p = node_port_of(s, nk_ip_node(fr->dst_ip));
	if (p < 0 || p == in_port) {
		s->c.no_route++;
		return;
	}
	egress(s, (uint16_t)p, f, len);
}

static void flood(struct sw *s, const uint8_t *f, uint32_t len, uint16_t in_port)
{
	s->c.flood++;
	for (uint16_t p = 0; p < s->n_ports; p++)
		if (p != in_port)
			egress(s, p, f, len);
}

static int is_proto_port(const struct sw *s, uint16_t port)
{
	return port >= s->ops->udp_port && port - s->ops->udp_port < s->ops->udp_ports;
}

/* Build the frame to send for the (possibly edited) message: headers from
 * the input frame, payload re-encoded, lengths and checksums fixed. Returns
 * the length, 0 on encode error. */
static uint32_t build_out(struct sw *s, const uint8_t *in, const struct nk_frame *fr,
			  const struct nk_msg *m)
{
	uint8_t *o = s->scratch;
	uint32_t hdr = fr->payload_off;
	memcpy(o, in, hdr);
	int n = nk_wire_encode(m, o + hdr, NK_FRAME_MAX - hdr);
	if (n < 0) {
		s->c.encode_err++;
		return 0;
	}
	uint8_t *ip = o + fr->ip_off;
	uint16_t ip_len = (uint16_t)(fr->ip_hlen + NK_UDP_HLEN + n);
	ip[2] = (uint8_t)(ip_len >> 8);
	ip[3] = (uint8_t)ip_len;
	ip[10] = ip[11] = 0;
	uint16_t c = nk_ip_csum(ip, fr->ip_hlen);
	ip[10] = (uint8_t)(c >> 8);
	ip[11] = (uint8_t)c;
	uint8_t *udp = ip + fr->ip_hlen;
	uint16_t ulen = (uint16_t)(NK_UDP_HLEN + n);
	udp[4] = (uint8_t)(ulen >> 8);
	udp[5] = (uint8_t)ulen;
	udp[6] = udp[7] = 0;
	c = nk_udp_csum(fr->src_ip, fr->dst_ip, udp, ulen);
	udp[6] = (uint8_t)(c >> 8);
	udp[7] = (uint8_t)c;
	uint32_t len = hdr + (uint32_t)n;
	if (len < 60) {
		memset(o + len, 0, 60 - len);
		len = 60;
	}
	return len;
}

/* A reply from the switch (act.switch_reply) goes back to its sender as if
 * the node it addressed had answered: MACs, IPv4 addresses and UDP ports
 * swapped, so the client's socket, connected or not, accepts it (a source
 * equal to its own address is dropped by Linux). Both checksums are sums
 * over words that only trade places: they stay valid. */
static void swap_ends(uint8_t *f, const struct nk_frame *fr)
{
	uint8_t t[6];
	memcpy(t, f, 6);
	memcpy(f, f + 6, 6);
	memcpy(f + 6, t, 6);
	uint8_t *ip = f + fr->ip_off;
	memcpy(t, ip + 12, 4);
	memcpy(ip + 12, ip + 16, 4);
	memcpy(ip + 16, t, 4);
	uint8_t *udp = ip + fr->ip_hlen;
	memcpy(t, udp, 2);
	memcpy(udp, udp + 2, 2);
	memcpy(udp + 2, t, 2);
}

static void send_to_port(struct sw *s, uint8_t *f, uint32_t len, const struct nk_frame *fr,
			 uint16_t port, int32_t dst_node)
{
	set_dst_node(f, fr, dst_node);
	egress(s, port, f, len);
}

static void handle_frame(struct sw *s, const uint8_t *f, uint32_t len, uint16_t in_port,
			 int from_cpu, int recirculated)
{
	struct nk_frame fr;
	s->c.frames++;
	if (s->capture_on && !recirculated)
		cap_write(s, from_cpu ? s->n_ports : in_port, f, len);
	if (s->closed && !from_cpu) {
		s->c.closed++;   /* not programmed yet: nothing goes through */
		return;
	}
	int st = nk_frame_parse(f, len, &fr);
	if (st < 0) {
		s->c.bad_frame[-st]++;
		return;
	}
	if (recirculated && (st == NK_FRAME_NOT_IP || st == NK_FRAME_OTHER_IP ||
			     !(is_proto_port(s, fr.dport) || is_proto_port(s, fr.sport)))) {
		s->c.non_ip_drop++;   /* only the pipeline's packets loop */
		return;
	}
	if (st == NK_FRAME_NOT_IP) {
		if (fr.dst_mac[0] & 1) { /* broadcast / multicast: ARP and friends */
			flood(s, f, len, in_port);
			return;
		}
		int32_t node = fr.dst_mac[0] == 0x02 ? (int32_t)((fr.dst_mac[4] << 8 | fr.dst_mac[5]) - 1) : -1;
		int p = node_port_of(s, node);
		if (p < 0 || p == in_port) {
			s->c.non_ip_drop++;
			return;
		}
		egress(s, (uint16_t)p, f, len);
		return;
	}
	if (st == NK_FRAME_OTHER_IP || !(is_proto_port(s, fr.dport) || is_proto_port(s, fr.sport))) {
		s->c.other_ip++;
		l3_forward(s, f, len, &fr, in_port);
		return;
	}

	struct nk_msg m, orig;
	int r = nk_wire_decode(s->ops->proto, f + fr.payload_off, fr.payload_len, &m);
	if (r < 0) {
		s->c.bad_msg[-r < WIRE_ERRS ? -r : 0]++;
		return;
	}
	orig = m;
	int32_t src = nk_ip_node(fr.src_ip), dst = nk_ip_node(fr.dst_ip);
	struct nk_pkt_meta meta = {
		.now_ns = s->now,
		.ingress_port = in_port,
		.src = src >= 0 ? (uint16_t)src : NK_NODE_NONE,
		.dst = dst >= 0 ? (uint16_t)dst : NK_NODE_NONE,
		.wire_len = (uint16_t)len,
		.from_cpu = (uint8_t)from_cpu,
		.recirculated = (uint8_t)recirculated,
		/* the request handle a pipeline may keep (a cache's parked
		 * reads): here the sender's UDP port, as a switch keeps it */
		.cookie = fr.sport,
	};
	uint16_t dst0 = meta.dst;
	struct nk_actions act = {0};
	s->ops->process(s->pstate, &m, &meta, &act);
	s->c.pipeline++;
	if (s->sample_every && ++s->sample_ctr >= s->sample_every) {
		s->sample_ctr = 0;
		act.to_cpu = 1;
	}
	if (act.to_cpu)
		cpu_push(s, in_port, f, len);
	if (act.switch_reply)
		s->c.switch_replies++;
	if (act.fwd == NK_FWD_DROP) {
		if (act.held)
			s->c.held++;
		else
			s->c.pipe_drop++;
		return;
	}

	/* the frame to send: the input verbatim if the pipeline left the message
	 * alone, else re-encoded */
	uint8_t *out;
	uint32_t olen;
	if (!memcmp(&m, &orig, sizeof(m))) {
		memcpy(s->scratch, f, len);
		out = s->scratch;
		olen = len;
	} else {
		olen = build_out(s, f, &fr, &m);
		if (!olen)
			return;
		out = s->scratch;
	}
	int32_t ndst = meta.dst != dst0 && meta.dst != NK_NODE_NONE ? (int32_t)meta.dst : -1;
	if (act.switch_reply) {
		if (meta.dst == meta.src)
			swap_ends(out, &fr);   /* a request answered: back to its sender */
		else   /* another packet (a cache packet) answers a kept request */
			nk_frame_set_dport(out, &fr, (uint16_t)meta.cookie);
	}

	switch (act.fwd) {
	case NK_FWD_PORT:
		send_to_port(s, out, olen, &fr, act.port, ndst);
		break;
	case NK_FWD_RECIRC:
		set_dst_node(out, &fr, ndst);
		recirc_push(s, out, olen);
		break;
	case NK_FWD_MCAST: {
		if (act.mcast_group >= NK_MAX_MCAST_GROUPS || !s->group_n[act.mcast_group]) {
			s->c.no_route++;
			break;
		}
		uint16_t n = s->group_n[act.mcast_group];
		for (uint16_t i = 0; i < n; i++) {
			uint16_t p = s->group_port[act.mcast_group][i];
			int32_t node = p < s->n_ports ? s->port_node[p] : -1;
			/* every copy is addressed to the node behind its port; the
			 * rewrite is in place, so it is redone for each copy */
			send_to_port(s, out, olen, &fr, p, node >= 0 ? node : ndst >= 0 ? ndst : dst);
			s->c.mcast_copies++;
		}
		break;
	}
	default:
		s->c.pipe_drop++;
	}
}

/* ---- control socket --------------------------------------------------------- */

#define OUT(...) (size_t)snprintf(out + n, n < cap ? cap - n : 0, __VA_ARGS__)

#define MAX_FAULT_DELAY_NS 100000000000ull /* 1e8 us: no overflow of the delay heap's clock */

static int parse_double_kv(const char *w, const char *key, double *out)
{
	size_t k = strlen(key);
	if (strncmp(w, key, k) || w[k] != '=')
		return 0;
	char *end;
	double v = strtod(w + k + 1, &end);
	/* NaN, inf, negatives and empty values are refused: a NaN rate would
	 * compare false everywhere and slip through every range check */
	if (*end || end == w + k + 1 || !isfinite(v) || v < 0)
		return -1;
	*out = v;
	return 1;
}

static void update_any_fault(struct sw *s)
{
	s->any_fault = 0;
	for (uint32_t p = 0; p < s->n_ports; p++) {
		const struct fault *f = &s->fault[p];
		if (f->loss > 0 || f->dup > 0 || f->reorder > 0 || f->delay_ns)
			s->any_fault = 1;
	}
}

/* "fault <port|all> loss=F dup=F reorder=F reorder_us=F delay_us=F" (argv from 1) */
static int set_fault(struct sw *s, int argc, char **argv, char *why, size_t whylen)
{
	uint32_t lo = 0, hi = s->n_ports;
	if (strcmp(argv[0], "all")) {
		uint64_t p;
		if (nk_ctl_parse_u64(argv[0], &p) || p >= s->n_ports) {
			snprintf(why, whylen, "bad port %s (0..%u or all)", argv[0], s->n_ports - 1);
			return -1;
		}
		lo = (uint32_t)p;
		hi = lo + 1;
	}
	struct fault f = s->fault[lo];
	for (int i = 1; i < argc; i++) {
		double v = 0;
		int r;
		if ((r = parse_double_kv(argv[i], "loss", &v)) == 1)
			f.loss = v;
		else if (r == 0 && (r = parse_double_kv(argv[i], "dup", &v)) == 1)
			f.dup = v;
		else if (r == 0 && (r = parse_double_kv(argv[i], "reorder", &v)) == 1)
			f.reorder = v;
		else if (r == 0 && (r = parse_double_kv(argv[i], "reorder_us", &v)) == 1)
			f.reorder_ns = v > 1e8 ? UINT64_MAX : (uint64_t)(v * 1000.0);
		else if (r == 0 && (r = parse_double_kv(argv[i], "delay_us", &v)) == 1)
			f.delay_ns = v > 1e8 ? UINT64_MAX : (uint64_t)(v * 1000.0);
		if (r != 1 || f.loss > 1 || f.dup > 1 || f.reorder > 1 ||
		    f.reorder_ns > MAX_FAULT_DELAY_NS || f.delay_ns > MAX_FAULT_DELAY_NS) {
			snprintf(why, whylen, "bad fault setting %s (loss|dup|reorder=0..1, "
				 "reorder_us|delay_us=0..1e8 us)", argv[i]);
			return -1;
		}
	}
	for (uint32_t p = lo; p < hi; p++)
		s->fault[p] = f;
	update_any_fault(s);
	return 0;
}

/* A port whose poll reports an error (POLLERR/POLLHUP/POLLNVAL): reading
 * SO_ERROR clears a transient error, so that the next poll sleeps again; an
 * interface that no longer exists (its namespace went away with a killed
 * run) ends the switch, which would otherwise spin on the error forever.
 * Returns -1 to stop. */
static int port_errors(struct sw *s, const struct pollfd *pfd)
{
	for (uint32_t p = 0; p < s->n_ports; p++) {
		if (!(pfd[p].revents & (POLLERR | POLLHUP | POLLNVAL)))
			continue;
		s->c.port_errors++;
		int e = 0;
		socklen_t el = sizeof(e);
		(void)getsockopt(s->port[p].fd, SOL_SOCKET, SO_ERROR, &e, &el);
		if ((pfd[p].revents & POLLNVAL) || if_nametoindex(s->port[p].name) !=
							      (unsigned)s->port[p].ifindex) {
			fprintf(stderr, "netkv-switch: port %s is gone (%s): stopping\n",
				s->port[p].name, e ? strerror(e) : "interface deleted");
			return -1;
		}
	}
	return 0;
}

static size_t put_counters(struct sw *s, char *out, size_t n, size_t cap)
{
	static const char *frame_err[5] = {"", "truncated", "ihl", "length", "ip_csum"};
	static const char *msg_err[WIRE_ERRS] = {"other", "truncated", "magic", "op", "proto",
						 "keylen", "length", "space", "field", "value", "inval"};
	n += OUT(" frames=%" PRIu64 " pipeline=%" PRIu64 " pipe_drop=%" PRIu64 " held=%" PRIu64
		 " no_route=%" PRIu64 " other_ip=%" PRIu64 " flood=%" PRIu64 " non_ip_drop=%" PRIu64,
		 s->c.frames, s->c.pipeline, s->c.pipe_drop, s->c.held, s->c.no_route, s->c.other_ip,
		 s->c.flood, s->c.non_ip_drop);
	n += OUT(" port_errors=%" PRIu64 " closed=%" PRIu64, s->c.port_errors, s->c.closed);
	uint64_t bad_f = 0, bad_m = 0;
	for (int i = 1; i < 5; i++) {
		bad_f += s->c.bad_frame[i];
		n += OUT(" bad_frame.%s=%" PRIu64, frame_err[i], s->c.bad_frame[i]);
	}
	for (int i = 0; i < WIRE_ERRS; i++) {
		bad_m += s->c.bad_msg[i];
		n += OUT(" bad_msg.%s=%" PRIu64, msg_err[i], s->c.bad_msg[i]);
	}
	n += OUT(" bad_frames=%" PRIu64 " bad_msgs=%" PRIu64, bad_f, bad_m);
	n += OUT(" fault_loss=%" PRIu64 " fault_dup=%" PRIu64 " fault_delayed=%" PRIu64
		 " delay_full=%" PRIu64 " delay_queued=%u recirc=%" PRIu64 " recirc_drop=%" PRIu64
		 " loop_tx=%" PRIu64 " loop_rx=%" PRIu64 " loop_queued=%u cpu_copies=%" PRIu64 " cpu_drops=%" PRIu64 " cpu_queued=%u mcast_copies=%" PRIu64
		 " switch_replies=%" PRIu64 " encode_err=%" PRIu64 " packet_out=%" PRIu64,
		 s->c.fault_loss, s->c.fault_dup, s->c.fault_delayed, s->c.delay_full, s->heap_n,
		 s->c.recirc, s->c.recirc_drop, s->c.loop_tx, s->c.loop_rx,
		 s->recirc_tail - s->recirc_head, s->c.cpu_copies, s->c.cpu_drops,
		 s->cpu_tail - s->cpu_head, s->c.mcast_copies, s->c.switch_replies, s->c.encode_err,
		 s->c.packet_out);
	for (uint32_t p = 0; p < s->n_ports; p++) {
		struct nk_port *pt = &s->port[p];
		nk_port_kernel_drops(pt);
		n += OUT(" p%u.rx=%" PRIu64 " p%u.tx=%" PRIu64 " p%u.tx_err=%" PRIu64
			 " p%u.rx_ring_drop=%" PRIu64,
			 p, pt->rx_pkts, p, pt->tx_pkts, p, pt->tx_errors, p, pt->rx_drops_kernel);
	}
	return n;
}

static int err_pipe(char *out, size_t cap, int r)
{
	const char *w = r == NK_PIPE_ENOENT ? "no such name" : r == NK_PIPE_ERANGE ? "index out of range"
			: r == NK_PIPE_EFULL ? "table full" : "invalid arguments";
	return snprintf(out, cap, "err %s", w);
}

/* `capture start DIR SNAPLEN MAX_BYTES MAX_PACKETS`: DIR/switch-p<N>.pcap
 * per port and DIR/switch-cpu.pcap; `capture stop`: close them and report
 * per file packets written / frames a bound left out / ns spent capturing */
static int cap_ctl(struct sw *s, int argc, char **argv, char *out, size_t cap)
{
	size_t n = 0;
	if (argc == 2 && !strcmp(argv[1], "stop")) {
		n += OUT("ok");
		for (uint32_t i = 0; i <= s->n_ports; i++) {
			if (i < s->n_ports)
				n += OUT(" switch-p%u.pcap=", i);
			else
				n += OUT(" switch-cpu.pcap=");
			n += OUT("%" PRIu64 "/%" PRIu64 "/%" PRIu64, s->cap[i].packets,
				 s->cap[i].missed, s->cap[i].busy_ns);
		}
		cap_stop(s);
		return (int)n;
	}
	uint64_t snap, maxb, maxp;
	if (argc != 6 || strcmp(argv[1], "start") || nk_ctl_parse_u64(argv[3], &snap) ||
	    nk_ctl_parse_u64(argv[4], &maxb) || nk_ctl_parse_u64(argv[5], &maxp) || !snap ||
	    snap > 65535)
		return snprintf(out, cap, "err usage: capture start DIR SNAPLEN MAX_BYTES MAX_PACKETS"
				" | capture stop");
	cap_stop(s);
	char path[4096];
	for (uint32_t i = 0; i <= s->n_ports; i++) {
		if (i < s->n_ports)
			snprintf(path, sizeof(path), "%s/switch-p%u.pcap", argv[2], i);
		else
			snprintf(path, sizeof(path), "%s/switch-cpu.pcap", argv[2]);
		if (nk_pcap_open(&s->cap[i], path, (uint32_t)snap, maxb, maxp) < 0) {
			int e = errno;
			cap_stop(s);
			return snprintf(out, cap, "err cannot write %s: %s", path, strerror(e));
		}
	}
	s->capture_on = 1;
	return snprintf(out, cap, "ok");
}

static int ctl_handler(void *ctx, int argc, char **argv, char *out, size_t cap)
{
	struct sw *s = ctx;
	const char *cmd = argv[0];
	size_t n = 0;
	uint64_t a, b;
	if (!strcmp(cmd, "ping")) {
		return snprintf(out, cap, "ok netkv-switch protocol=%s ports=%u cpu_port=%u recirc_port=%u",
				s->ops->name, s->n_ports, s->cpu_port, s->recirc_port);
	}
	if (!strcmp(cmd, "reg_read") && argc == 3) {
		if (nk_ctl_parse_u64(argv[2], &a) || a > UINT32_MAX)
			return snprintf(out, cap, "err bad index");
		if (!s->ops->reg_read)
			return snprintf(out, cap, "err pipeline has no registers");
		int r = s->ops->reg_read(s->pstate, argv[1], (uint32_t)a, &b);
		return r ? err_pipe(out, cap, r) : snprintf(out, cap, "ok %" PRIu64, b);
	}
	if (!strcmp(cmd, "reg_read_range") && argc == 4) { /* name first count */
		uint64_t cnt;
		if (nk_ctl_parse_u64(argv[2], &a) || nk_ctl_parse_u64(argv[3], &cnt) || cnt > 4096 ||
		    a + cnt > UINT32_MAX)
			return snprintf(out, cap, "err bad range");
		if (!s->ops->reg_read)
			return snprintf(out, cap, "err pipeline has no registers");
		n += OUT("ok");
		for (uint64_t i = 0; i < cnt; i++) {
			int r = s->ops->reg_read(s->pstate, argv[1], (uint32_t)(a + i), &b);
			if (r)
				return err_pipe(out, cap, r);
			n += OUT("%s%" PRIu64, i ? "," : " ", b);
		}
		return (int)n;
	}
	if (!strcmp(cmd, "reg_write") && argc == 4) {
		if (nk_ctl_parse_u64(argv[2], &a) || a > UINT32_MAX || nk_ctl_parse_u64(argv[3], &b))
			return snprintf(out, cap, "err bad index or value");
		if (!s->ops->reg_write)
			return snprintf(out, cap, "err pipeline has no registers");
		int r = s->ops->reg_write(s->pstate, argv[1], (uint32_t)a, b);
		return r ? err_pipe(out, cap, r) : snprintf(out, cap, "ok");
	}
	if (!strcmp(cmd, "table_add") && (argc == 3 || argc == 4)) {
		uint64_t key[16], args[16];
		int nk = nk_ctl_parse_list(argv[2], key, 16);
		int na = argc == 4 ? nk_ctl_parse_list(argv[3], args, 16) : 0;
		if (nk < 0 || na < 0)
			return snprintf(out, cap, "err bad key or argument list");
		if (!s->ops->table_add)
			return snprintf(out, cap, "err pipeline has no tables");
		int r = s->ops->table_add(s->pstate, argv[1], key, (unsigned)nk, args, (unsigned)na);
		return r ? err_pipe(out, cap, r) : snprintf(out, cap, "ok");
	}
	if (!strcmp(cmd, "table_del") && argc == 3) {
		uint64_t key[16];
		int nk = nk_ctl_parse_list(argv[2], key, 16);
		if (nk < 0)
			return snprintf(out, cap, "err bad key list");
		if (!s->ops->table_del)
			return snprintf(out, cap, "err pipeline has no tables");
		int r = s->ops->table_del(s->pstate, argv[1], key, (unsigned)nk);
		return r ? err_pipe(out, cap, r) : snprintf(out, cap, "ok");
	}
	if (!strcmp(cmd, "mcast_set") && argc == 3) {
		uint64_t ports[MAX_GROUP_PORTS];
		int np = nk_ctl_parse_list(argv[2], ports, MAX_GROUP_PORTS);
		if (nk_ctl_parse_u64(argv[1], &a) || a >= NK_MAX_MCAST_GROUPS)
			return snprintf(out, cap, "err group %s (allowed: 0..%u)", argv[1],
					NK_MAX_MCAST_GROUPS - 1);
		if (np < 0)
			return snprintf(out, cap, "err bad port list (allowed: up to %u ports, "
					"comma-separated)", MAX_GROUP_PORTS);
		for (int i = 0; i < np; i++)
			if (ports[i] >= s->n_ports && ports[i] != s->cpu_port && ports[i] != s->recirc_port)
				return snprintf(out, cap, "err port %" PRIu64 " out of range", ports[i]);
		for (int i = 0; i < np; i++)
			s->group_port[a][i] = (uint16_t)ports[i];
		s->group_n[a] = (uint16_t)np;
		return snprintf(out, cap, "ok");
	}
	if (!strcmp(cmd, "mcast_get") && argc == 2) {
		if (nk_ctl_parse_u64(argv[1], &a) || a >= NK_MAX_MCAST_GROUPS)
			return snprintf(out, cap, "err group %s (allowed: 0..%u)", argv[1],
					NK_MAX_MCAST_GROUPS - 1);
		n += OUT("ok");
		for (int i = 0; i < s->group_n[a]; i++)
			n += OUT("%s%u", i ? "," : " ", s->group_port[a][i]);
		if (!s->group_n[a])
			n += OUT(" -");
		return (int)n;
	}
	if (!strcmp(cmd, "counters") && argc == 1) {
		n += OUT("ok");
		return (int)put_counters(s, out, n, cap);
	}
	if (!strcmp(cmd, "reset_counters") && argc == 1) {
		memset(&s->c, 0, sizeof(s->c));
		for (uint32_t p = 0; p < s->n_ports; p++) {
			struct nk_port *pt = &s->port[p];
			nk_port_kernel_drops(pt);
			pt->rx_pkts = pt->rx_bytes = pt->tx_pkts = pt->tx_bytes = pt->tx_errors = 0;
			pt->rx_drops_kernel = 0;
		}
		return snprintf(out, cap, "ok");
	}
	if (!strcmp(cmd, "fault") && argc >= 2) {
		char why[160];
		if (set_fault(s, argc - 1, argv + 1, why, sizeof(why)))
			return snprintf(out, cap, "err %s", why);
		return snprintf(out, cap, "ok");
	}
	if (!strcmp(cmd, "fault_get") && argc == 2) {
		if (nk_ctl_parse_u64(argv[1], &a) || a >= s->n_ports)
			return snprintf(out, cap, "err bad port");
		const struct fault *f = &s->fault[a];
		return snprintf(out, cap, "ok loss=%g dup=%g reorder=%g reorder_us=%g delay_us=%g",
				f->loss, f->dup, f->reorder, f->reorder_ns / 1e3, f->delay_ns / 1e3);
	}
	if (!strcmp(cmd, "cpu_sample") && argc == 2) {
		if (nk_ctl_parse_u64(argv[1], &a) || a > UINT32_MAX)
			return snprintf(out, cap, "err bad rate (0 = off, N = every Nth packet)");
		s->sample_every = (uint32_t)a;
		s->sample_ctr = 0;
		return snprintf(out, cap, "ok");
	}
	if (!strcmp(cmd, "cpu_poll") && argc == 2) {
		if (nk_ctl_parse_u64(argv[1], &a))
			return snprintf(out, cap, "err bad count");
		uint32_t avail = s->cpu_tail - s->cpu_head;
		uint32_t k = (uint32_t)(a < avail ? a : avail);
		/* each packet needs <= 2*CPU_SNAP + 8 bytes of reply */
		uint32_t fit = (uint32_t)((cap - 32) / (2 * CPU_SNAP + 8));
		if (k > fit)
			k = fit;
		n += OUT("ok %u", k);
		for (uint32_t i = 0; i < k; i++) {
			struct cpu_pkt *p = &s->cpu[s->cpu_head++ & (s->cpu_slots - 1)];
			n += OUT(" %u:", p->port);
			if (n + 2u * p->len + 1 < cap)
				n += nk_ctl_hex(p->data, p->len, out + n);
		}
		return (int)n;
	}
	if (!strcmp(cmd, "packet_out") && argc == 3) {
		uint8_t frame[NK_FRAME_MAX];
		int len = nk_ctl_unhex(argv[2], frame, sizeof(frame));
		if (len < 0)
			return snprintf(out, cap, "err bad hex frame");
		s->c.packet_out++;
		s->now = nk_now_ns();
		if (!strcmp(argv[1], "pipeline")) {
			handle_frame(s, frame, (uint32_t)len, s->cpu_port, 1, 0);
		} else {
			if (nk_ctl_parse_u64(argv[1], &a) || a >= s->n_ports)
				return snprintf(out, cap, "err bad port (a port number or 'pipeline')");
			egress(s, (uint16_t)a, frame, (uint32_t)len);
		}
		for (uint32_t p = 0; p < s->n_ports; p++)
			if (s->port[p].tx_n)
				nk_port_tx_flush(&s->port[p]);
		return snprintf(out, cap, "ok");
	}
	if (!strcmp(cmd, "capture"))
		return cap_ctl(s, argc, argv, out, cap);
	if (!strcmp(cmd, "open") && argc == 1) {
		s->closed = 0;
		return snprintf(out, cap, "ok");
	}
	if (!strcmp(cmd, "quit")) {
		stop_flag = 1;
		snprintf(out, cap, "ok bye");
		return -1;
	}
	return snprintf(out, cap, "err unknown command or arguments: %s (see docs/mininet.md)", cmd);
}

/* ---- main ------------------------------------------------------------------- */

/* The loop veth lives in the switch's namespace (on Mininet the root one):
 * nothing deletes it when the run dies, so the switch, which exits with its
 * parent, takes it with it (deleting one end deletes the pair). */
static void loop_delete(const char *name)
{
	pid_t p = fork();
	if (p == 0) {
		execlp("ip", "ip", "link", "del", name, (char *)NULL);
		_exit(127);
	}
	if (p > 0)
		waitpid(p, NULL, 0);
}

/* A queue depth in 1..max: 0, or -1 for anything else (the whole text is
 * the number, range-checked before it is narrowed: 2^32 + 1 is not 1). */
static int frames_arg(const char *arg, uint32_t max, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(arg, &end, 0);
	if (end == arg || *end || errno || arg[0] == '-' || v < 1 || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static void usage(FILE *o)
{
	fprintf(o,
		"usage: netkv-switch --protocol NAME --servers S --clients M --port IF [--port IF ...]\n"
		"                    [--ctl PATH] [--seed N] [--params STR] [--batch N]\n"
		"                    [--fault PORT|all:loss=F,dup=F,reorder=F,reorder_us=F,delay_us=F]\n"
		"                    [--delay-slots N] [--spin-us US] [--stats] [--tag STR] [--coords C]\n"
		"                    [--loop OUT,IN] [--loop-rate PPS] [--loop-depth N] [--closed]\n"
		"                    [--cpu-queue N]\n"
		"Port i is the i-th --port; node n (servers, then clients, then C coordinator\n"
		"hosts) is behind port n.\n"
		"The recirculation port (P+1) queues --loop-depth frames (256) and sends\n"
		"--loop-rate frames/s (0 = unlimited), through the veth pair OUT->IN if given.\n"
		"The CPU port queues --cpu-queue frames (%d) for the controller; more are\n"
		"dropped and counted (cpu_drops).\n"
		"--closed: forward nothing (every frame from a port dropped, counted as\n"
		"`closed`) until the control socket's `open`.\n", CPU_DEPTH);
}

static void print_counters_json(struct sw *s, FILE *o)
{
	/* the control reply, as a JSON object */
	static char buf[65536];
	size_t n = put_counters(s, buf, 0, sizeof(buf));
	fputs("{\"netkv_switch\": {", o);
	char *save = NULL;
	int first = 1;
	for (char *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(w, '=');
		if (!eq)
			continue;
		*eq = 0;
		fprintf(o, "%s\"%s\": %s", first ? "" : ", ", w, eq + 1);
		first = 0;
	}
	fputs("}}\n", o);
	(void)n;
	fflush(o);
}

int main(int argc, char **argv)
{
	static struct sw s; /* large: ports, groups */
	const char *ifnames[MAX_PORTS];
	const char *faults[64];
	int nfaults = 0;
	const char *proto = NULL, *ctl_path = NULL, *params = NULL;
	uint64_t seed = 1;
	int stats = 0;
	uint64_t spin_ns = 0;
	const char *loop = NULL;
	double loop_rate = 0;
	char *endp;
	s.loop_depth = RECIRC_SLOTS;
	s.cpu_depth = CPU_DEPTH;
	uint32_t n_coords = 0;
	s.batch = 64;
	s.delay_slots = 16384;
	static const struct option opts[] = {
		{"protocol", required_argument, 0, 'p'}, {"port", required_argument, 0, 'i'},
		{"servers", required_argument, 0, 'S'},  {"clients", required_argument, 0, 'M'},
		{"ctl", required_argument, 0, 'c'},      {"seed", required_argument, 0, 's'},
		{"params", required_argument, 0, 'P'},   {"batch", required_argument, 0, 'b'},
		{"fault", required_argument, 0, 'f'},    {"delay-slots", required_argument, 0, 'd'},
		{"stats", no_argument, 0, 'v'},          {"tag", required_argument, 0, 't'},
		{"spin-us", required_argument, 0, 'u'},
		{"loop", required_argument, 0, 'L'},     {"loop-rate", required_argument, 0, 'R'},
		{"loop-depth", required_argument, 0, 'D'},
		{"coords", required_argument, 0, 'C'},   {"closed", no_argument, 0, 'x'},
		{"cpu-queue", required_argument, 0, 'Q'},
		{"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'p': proto = optarg; break;
		case 'i':
			if (s.n_ports >= MAX_PORTS) {
				fprintf(stderr, "netkv-switch: at most %d ports\n", MAX_PORTS);
				return 2;
			}
			ifnames[s.n_ports++] = optarg;
			break;
		case 'S': s.n_servers = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'M': s.n_clients = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'C': n_coords = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'c': ctl_path = optarg; break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'P': params = optarg; break;
		case 'b': s.batch = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'f':
			if (nfaults < 64)
				faults[nfaults++] = optarg;
			break;
		case 'd': s.delay_slots = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'v': stats = 1; break;
		case 'u': spin_ns = (uint64_t)(strtod(optarg, NULL) * 1000.0); break;
		case 't': break; /* a marker for `netkv clean`, nothing else */
		case 'x': s.closed = 1; break;
		case 'L': loop = optarg; break;
		case 'R':
			loop_rate = strtod(optarg, &endp);
			if (*endp || !isfinite(loop_rate) || loop_rate < 0 || loop_rate > 1e9) {
				fprintf(stderr, "netkv-switch: --loop-rate %s: frames/s in 0..1e9 (0 = unlimited)\n", optarg);
				return 2;
			}
			break;
		case 'D':
			if (frames_arg(optarg, RECIRC_MAX, &s.loop_depth)) {
				fprintf(stderr, "netkv-switch: --loop-depth %s: frames in 1..%d\n", optarg, RECIRC_MAX);
				return 2;
			}
			break;
		case 'Q':
			if (frames_arg(optarg, CPU_MAX, &s.cpu_depth)) {
				fprintf(stderr, "netkv-switch: --cpu-queue %s: frames in 1..%d\n", optarg, CPU_MAX);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!proto || !s.n_ports || optind != argc) {
		usage(stderr);
		return 2;
	}
	s.ops = nk_pipeline_find(proto);
	if (!s.ops) {
		fprintf(stderr, "netkv-switch: no pipeline named '%s'\n", proto);
		return 2;
	}
	uint32_t n_nodes = s.n_servers + s.n_clients + (n_coords <= MAX_NODES ? n_coords : MAX_NODES + 1);
	if (!n_nodes)
		n_nodes = s.n_ports;
	if (n_nodes > MAX_NODES || s.batch == 0 || s.batch > 1024 || s.delay_slots == 0) {
		fprintf(stderr, "netkv-switch: bad rack size, batch or delay slots\n");
		return 2;
	}
	s.cpu_port = (uint16_t)s.n_ports;
	s.recirc_port = (uint16_t)(s.n_ports + 1);
	for (uint32_t i = 0; i < MAX_NODES; i++)
		s.node_port[i] = i < n_nodes && i < s.n_ports ? (uint16_t)i : NK_NODE_NONE;
	for (uint32_t p = 0; p < MAX_PORTS; p++)
		s.port_node[p] = p < n_nodes && p < s.n_ports ? (int32_t)p : -1;
	nk_rng_seed(&s.rng, seed, 0x5357);

	s.pcfg = (struct nk_pipeline_cfg){
		.n_servers = s.n_servers, .n_clients = s.n_clients, .n_nodes = n_nodes,
		.node_port = s.node_port, .cpu_port = s.cpu_port, .recirc_port = s.recirc_port,
		.seed = seed, .params = params,
	};
	s.pstate = aligned_alloc(64, (s.ops->state_size + 63) & ~(size_t)63);
	if (!s.pstate || s.ops->init(s.pstate, &s.pcfg)) {
		fprintf(stderr, "netkv-switch: pipeline '%s' init failed (params: %s)\n", proto,
			params ? params : "none");
		return 2;
	}

	char err[256];
	struct nk_port_cfg pc = {.rx_frames = 4096, .qdisc_bypass = 1};
	for (uint32_t p = 0; p < s.n_ports; p++)
		if (nk_port_open(&s.port[p], ifnames[p], &pc, err, sizeof(err))) {
			fprintf(stderr, "netkv-switch: %s\n", err);
			return 1;
		}
	if (loop) {
		char names[2 * IFNAMSIZ + 2];
		snprintf(names, sizeof(names), "%s", loop);
		char *comma = strchr(names, ',');
		if (!comma || !comma[1]) {
			fprintf(stderr, "netkv-switch: --loop %s: expected OUT,IN (two interfaces)\n", loop);
			return 2;
		}
		*comma = 0;
		if (nk_port_open(&s.loop_out, names, &pc, err, sizeof(err)) ||
		    nk_port_open(&s.loop_in, comma + 1, &pc, err, sizeof(err))) {
			fprintf(stderr, "netkv-switch: --loop: %s\n", err);
			return 1;
		}
		s.have_loop = 1;
	}
	s.loop_gap_ns = loop_rate > 0 ? (uint64_t)(1e9 / loop_rate + 0.5) : 0;
	for (int i = 0; i < nfaults; i++) {
		char spec[256], *words[8];
		snprintf(spec, sizeof(spec), "%s", faults[i]);
		char *colon = strchr(spec, ':');
		int nw = 0;
		if (colon) {
			*colon = 0;
			words[nw++] = spec;
			for (char *t = strtok(colon + 1, ","); t && nw < 8; t = strtok(NULL, ","))
				words[nw++] = t;
		}
		if (!colon || set_fault(&s, nw, words, err, sizeof(err))) {
			fprintf(stderr, "netkv-switch: --fault %s: %s\n", faults[i], colon ? err : "expected PORT:k=v,...");
			return 2;
		}
	}
	s.delay_buf = aligned_alloc(64, sizeof(*s.delay_buf) * s.delay_slots);
	s.delay_free = calloc(s.delay_slots, sizeof(uint32_t));
	s.heap = calloc(s.delay_slots, sizeof(struct delayed));
	s.recirc = calloc(s.loop_depth, sizeof(struct recirc_pkt));
	for (s.cpu_slots = 1; s.cpu_slots < s.cpu_depth; s.cpu_slots <<= 1)
		;
	s.cpu = calloc(s.cpu_slots, sizeof(struct cpu_pkt));
	if (!s.delay_buf || !s.delay_free || !s.heap || !s.recirc || !s.cpu) {
		fprintf(stderr, "netkv-switch: out of memory\n");
		return 1;
	}
	for (uint32_t i = 0; i < s.delay_slots; i++)
		s.delay_free[i] = s.delay_slots - 1 - i;
	s.delay_nfree = s.delay_slots;
	if (ctl_path) {
		if (nk_ctl_open(&s.ctl, ctl_path, 1 << 20, err, sizeof(err))) {
			fprintf(stderr, "netkv-switch: %s\n", err);
			return 1;
		}
		s.have_ctl = 1;
	}

	stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (stop_fd < 0) {
		perror("netkv-switch: eventfd");
		return 1;
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* a SIGKILLed orchestrator must not leave us behind: SIGTERM stops us
	 * the same way as a normal end */
	if (nk_exit_with_parent(SIGTERM) < 0) {
		fprintf(stderr, "netkv-switch: the process that started it is gone\n");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	fprintf(stderr, "netkv-switch: protocol %s, %u ports, %u servers, %u clients, ready%s\n",
		proto, s.n_ports, s.n_servers, s.n_clients, s.closed ? " (closed until `open`)" : "");

	struct pollfd pfd[MAX_PORTS + 2 + NK_CTL_MAX_CONN];
	uint64_t next_stats = nk_now_ns() + 1000000000ull, last_ctl = 0;
	uint64_t last_frames = 0, last_busy = 0;
	while (!stop_flag) {
		s.now = nk_now_ns();
		uint32_t got = 0;

		/* 1. the recirculation port: what its rate lets out of the
		 * queue (at most one burst per round), and what came back */
		got += loop_drain(&s);
		if (s.have_loop) {
			uint32_t len;
			uint8_t *f;
			for (uint32_t k = 0; k < s.batch && (f = nk_port_rx_peek(&s.loop_in, &len)); k++) {
				if (!nk_port_rx_outgoing(&s.loop_in)) {
					s.c.loop_rx++;
					handle_frame(&s, f, len, s.recirc_port, 0, 1);
					got++;
				}
				nk_port_rx_release(&s.loop_in);
			}
		}
		/* 2. a burst from every port */
		for (uint32_t p = 0; p < s.n_ports; p++) {
			struct nk_port *pt = &s.port[p];
			uint32_t len;
			uint8_t *f;
			for (uint32_t k = 0; k < s.batch && (f = nk_port_rx_peek(pt, &len)); k++) {
				if (!nk_port_rx_outgoing(pt)) {
					pt->rx_pkts++;
					pt->rx_bytes += len;
					handle_frame(&s, f, len, (uint16_t)p, 0, 0);
					got++;
				}
				nk_port_rx_release(pt);
			}
		}
		/* 3. delayed frames that are due, then send every batch */
		if (s.heap_n)
			release_delayed(&s);
		for (uint32_t p = 0; p < s.n_ports; p++)
			if (s.port[p].tx_n)
				nk_port_tx_flush(&s.port[p]);

		/* 4. control socket: when idle, or every millisecond under load */
		int idle = got == 0 && (s.recirc_head == s.recirc_tail || s.loop_next_ns > s.now);
		if (s.have_ctl && !idle && s.now - last_ctl > 1000000ull) {
			last_ctl = s.now;
			int nc = nk_ctl_pollfds(&s.ctl, pfd, NK_CTL_MAX_CONN + 1);
			if (poll(pfd, (nfds_t)nc, 0) > 0)
				nk_ctl_service(&s.ctl, ctl_handler, &s);
		}
		if (stats && s.now >= next_stats) {
			next_stats += 1000000000ull;
			fprintf(stderr, "netkv-switch: %" PRIu64 " frames/s, %" PRIu64 " delayed queued %u\n",
				s.c.frames - last_frames, s.c.fault_delayed, s.heap_n);
			last_frames = s.c.frames;
		}
		if (!idle) {
			last_busy = s.now;
			continue;
		}
		/* busy-poll a little after traffic: a sleeping switch pays a wakeup
		 * (tens of microseconds on a VM) on every packet of a quiet flow */
		if (s.now - last_busy < spin_ns && !stop_flag) {
			sched_yield(); /* let a host process on this core run */
			continue;
		}

		/* 5. sleep until a frame, a control request, a delayed frame or the tick */
		int nfd = 0;
		for (uint32_t p = 0; p < s.n_ports; p++)
			pfd[nfd++] = (struct pollfd){.fd = s.port[p].fd, .events = POLLIN};
		pfd[nfd++] = (struct pollfd){.fd = stop_fd, .events = POLLIN};
		if (s.have_loop)
			pfd[nfd++] = (struct pollfd){.fd = s.loop_in.fd, .events = POLLIN};
		int ctl_first = nfd;
		if (s.have_ctl)
			nfd += nk_ctl_pollfds(&s.ctl, pfd + nfd, NK_CTL_MAX_CONN + 1);
		uint64_t wake = stats ? next_stats : UINT64_MAX;
		if (s.heap_n && s.heap[0].at_ns < wake)
			wake = s.heap[0].at_ns;
		if (s.recirc_head != s.recirc_tail && s.loop_next_ns < wake)
			wake = s.loop_next_ns;   /* the loop's next departure */
		uint64_t now = nk_now_ns();
		struct timespec ts = {0, 0};
		if (wake > now) {
			uint64_t d = wake - now;
			ts.tv_sec = (time_t)(d / 1000000000ull);
			ts.tv_nsec = (long)(d % 1000000000ull);
		}
		int r = ppoll(pfd, (nfds_t)nfd, wake == UINT64_MAX ? NULL : &ts, NULL);
		if (r < 0 && errno != EINTR) {
			perror("netkv-switch: ppoll");
			break;
		}
		if (r > 0 && port_errors(&s, pfd) < 0)
			break;
		if (s.have_ctl && r > 0) {
			int any = 0;
			for (int i = ctl_first; i < nfd; i++)
				any |= pfd[i].revents != 0;
			if (any) {
				s.now = nk_now_ns();
				last_ctl = s.now;
				nk_ctl_service(&s.ctl, ctl_handler, &s);
			}
		}
	}

	print_counters_json(&s, stdout);
	cap_stop(&s);
	if (s.have_ctl)
		nk_ctl_close(&s.ctl);
	for (uint32_t p = 0; p < s.n_ports; p++)
		nk_port_close(&s.port[p]);
	if (s.have_loop) {
		char out_name[sizeof(s.loop_out.name)];
		memcpy(out_name, s.loop_out.name, sizeof(out_name));
		nk_port_close(&s.loop_out);
		nk_port_close(&s.loop_in);
		loop_delete(out_name);
	}
	s.ops->fini(s.pstate);
	free(s.pstate);
	free(s.delay_buf);
	free(s.delay_free);
	free(s.heap);
	free(s.recirc);
	free(s.cpu);
	return 0;
}
