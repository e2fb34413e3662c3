/*
 * sim.h - the discrete-event simulator of one rack (target=sim).
 *
 * What is simulated (docs/simulator.md has the full model):
 *  - clients: one open-loop Poisson stream at `offered_rps`, each arrival
 *    given to one of M clients uniformly (so each client is Poisson at
 *    offered/M); a per-request client CPU cost (one core per client);
 *    timeouts and retries (same req_id) when timeout_ns > 0;
 *  - links: one up- and one downlink per node, per-hop latency, optional
 *    bandwidth (serialization of the frame; FIFO per link);
 *  - the switch: the protocol's C pipeline (pipeline.h) on every packet,
 *    a pipeline latency, ports, multicast groups, a recirculation port with
 *    finite bandwidth, and a bounded packet channel to the controller;
 *  - servers: W workers, one FIFO queue, service = (base + per_byte * bytes)
 *    / capacity with a deterministic, exponential or lognormal distribution,
 *    the protocol's C host logic (host.h) on a preloaded store, crash and
 *    restart at given times;
 *  - faults on every link traversal: loss, duplication, reordering (an extra
 *    random delay for a fraction of packets) and a constant extra delay;
 *  - popularity changes (workload.h dynamics) every period.
 *
 * Time is kept in picoseconds (uint64); the API speaks ns or seconds.
 * Events are ordered by (time, insertion sequence), so one config and seed
 * give bit-identical results. The engine never allocates on the per-event
 * path once its pools have grown to the run's peak.
 *
 * Nodes: servers 0..S-1, clients S..S+M-1, coordinators S+M..S+M+C-1
 * (n_coords, usually 0), the controller S+M+C. Ports: port p < S+M+C
 * reaches node p; port S+M+C is the CPU port, S+M+C+1 recirculation.
 *
 * Racks (racks = R >= 2, P = S/R servers a rack): 1 + R switches, each
 * with its own pipeline state, node -> port map and multicast groups, all
 * running the same pipeline: switch 0, the spine, has the clients and
 * coordinators; switch 1 + r, rack r's leaf, servers r*P .. r*P + P - 1,
 * linked to the spine by one trunk. Each pipeline (and its controller)
 * sees its switch as one rack's, numbered as above with its own "servers":
 * the spine's are the R racks (node r, port r: the trunk to leaf r), a
 * leaf's its P servers (node i = server r*P + i); then the M clients (on a
 * leaf all behind the uplink), the coordinators, the controller, CPU and
 * recirculation ports. The engine translates at each switch's edge; what
 * the spine sends to rack r goes to the server of the same index in rack r
 * as the node it was addressed to (a redirected read is served there by
 * the owner's index).
 *
 * Epochs: nk_sim_run_until(t) processes every event up to t and returns;
 * the caller (Python) runs the protocol's controller through the reg/table/
 * cpu hooks, then calls run_until again.
 */
#ifndef NETKV_SIM_H
#define NETKV_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "netkv/msg.h"
#include "netkv/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

enum nk_service {
	NK_SERVICE_DETERMINISTIC = 0,
	NK_SERVICE_EXPONENTIAL = 1,
	NK_SERVICE_LOGNORMAL = 2,
};

/* Faults hit every traversal of the chosen links (a request and its reply
 * cross 4 links: client up, server down, server up, client down). */
enum nk_fault_links {
	NK_FAULT_LINKS_ALL = 0,
	NK_FAULT_LINKS_CLIENTS = 1,  /* client <-> switch links only */
	NK_FAULT_LINKS_SERVERS = 2,  /* server <-> switch links only */
};

/* How a server's workers share requests. */
enum nk_dispatch {
	NK_DISPATCH_SHARED = 0,  /* one FIFO, any free worker (M/M/W) */
	NK_DISPATCH_BY_KEY = 1,  /* worker = keyhash mod W, one FIFO each: keys are
				  * partitioned over cores (RSS/per-core stores), so
				  * a hot key can use only one core of its server */
};

#define NK_SIM_MAX_CLIENT_CORES 1024u  /* topology.client_cores (schema.py says the same) */

struct nk_sim_cfg {
	const char *protocol;     /* pipeline and host logic name ("hash") */
	const char *params;       /* protocol knobs for pipeline/host init (may be NULL) */
	uint32_t n_servers;
	uint32_t n_clients;
	uint64_t seed;
	double offered_rps;
	double duration_s;        /* arrivals in [0, duration) */
	double drain_s;           /* then at most this long for stragglers */
	double write_ratio;
	/* links and switch */
	double link_latency_ns;   /* per hop, one way */
	double link_gbps;         /* 0 = no serialization delay */
	double switch_latency_ns;
	double recirc_gbps;       /* recirculation port bandwidth (0 = unlimited) */
	uint32_t frame_overhead;  /* bytes added to the UDP payload on the wire */
	uint32_t cpu_queue;       /* controller channel capacity (packets) */
	/* servers */
	uint32_t workers;
	uint32_t service;         /* enum nk_service */
	double service_ns;
	double per_byte_ns;
	double lognormal_sigma;
	const double *capacity;   /* n_servers capacity factors (NULL = all 1) */
	uint32_t queue_limit;     /* per-server queue bound (0 = unbounded) */
	uint32_t dispatch;        /* enum nk_dispatch */
	/* clients */
	double client_cpu_ns;
	double timeout_ns;        /* 0 = no timeouts */
	uint32_t retries;
	/* Client CPU per packet (one core per client, shared by sending and
	 * receiving): each packet sent costs tx_ns + key_ns per key it carries,
	 * each reply received rx_ns + pair_ns per key it answers. With rx or
	 * pair costs, replies wait for the client's core. */
	double client_tx_ns;
	double client_key_ns;
	double client_rx_ns;
	double client_pair_ns;
	/* server CPU per extra key of a multi-key request (< 0: = service_ns,
	 * each key a whole request's cost) */
	double per_key_ns;
	/* multiget requests: mget_max > 1 draws each read's size k in
	 * 1..mget_max with probability mget_weights[k-1] (normalised here);
	 * writes stay single-key. mget_max <= 1: single-key requests. */
	uint32_t mget_max;
	const double *mget_weights;
	/* coordinator hosts (nodes S+M..S+M+n_coords-1) running the host
	 * logic's coord_handle on coord_cores cores each (one FIFO); a message
	 * costs the client CPU costs above: rx + pair per key in, tx + key per
	 * key for each message out */
	uint32_t n_coords;
	uint32_t coord_cores;
	/* faults, on every link traversal */
	double loss;
	double duplicate;
	double reorder;           /* fraction of packets held back ... */
	double reorder_ns;        /* ... by a uniform extra delay in [0, reorder_ns] */
	double extra_delay_ns;    /* constant extra one-way delay per hop */
	uint32_t fault_links;     /* enum nk_fault_links: which links the faults hit */
	/* popularity dynamics (enum nk_dyn_kind) */
	uint32_t dyn_kind;
	double dyn_period_s;
	uint32_t dyn_count;
	uint32_t dyn_hot_pool;
	/* measurement */
	double window_s;          /* timeline window (0 = no timeline) */
	uint32_t record_history;  /* keep every request's outcome (nk_sim_history) */
	/* hostile clients (docs/security.md): the last hostile_clients of the
	 * n_clients send the protocol's adversarial traffic (host.h
	 * client_hostile), each Poisson at hostile_rps during the arrivals;
	 * honest arrivals go to the others */
	uint32_t hostile_clients;
	double hostile_rps;
	/* finite rates (0 = unlimited): each client sends at most client_max_rps
	 * packets per second (its NIC or packet generator: packets queue at
	 * the client); the switch processes at most switch_mpps million
	 * packets per second (one FIFO in front of the pipeline, unbounded) */
	double client_max_rps;
	double switch_mpps;
	/* server CPU per message a server sends, besides service_ns per
	 * message it takes in (0: replies are part of service_ns) */
	double tx_ns;
	/* cores per client host (0 = 1): each packet sent or reply taken runs
	 * on the core that frees first, so a host with c cores does up to c of
	 * the costs above at once (a multiget's packets stay on one core) */
	uint32_t client_cores;
	/* switches: 0 or 1 = one rack on one switch; R >= 2 = a spine and R
	 * leaves of n_servers / R servers each (above) */
	uint32_t racks;
};

#define NK_SIM_MAX_RACKS 64u  /* topology.racks (schema.py says the same) */

struct nk_sim_stats {
	double now_s;
	int finished;
	uint64_t events;
	uint64_t issued;          /* requests issued (intended sends) */
	uint64_t completed;       /* ... that got their final reply */
	uint64_t timeouts;        /* ... given up after the last retry */
	uint64_t retries;
	uint64_t unfinished;      /* ... still outstanding when the run ended */
	uint64_t dup_replies;     /* replies for already-completed requests */
	uint64_t switch_replies;  /* requests answered by the switch (and killed by an
				   * outage before they left it) */
	uint64_t dropped;         /* packets lost, for any reason (sum below) */
	uint64_t drop_loss;       /* link loss fault */
	uint64_t drop_queue;      /* server queue full */
	uint64_t drop_crash;      /* at or in a crashed server */
	uint64_t drop_switch;     /* pipeline drop */
	uint64_t drop_outage;     /* arrived at a stopped switch, or in it when it stopped */
	uint64_t cpu_packets;     /* copies sent to the controller channel */
	uint64_t cpu_dropped;     /* ... dropped because the channel was full */
	uint64_t dyn_changes;     /* popularity changes applied */
	uint64_t hostile_sent;    /* messages the hostile clients sent */
	uint64_t forged_replies;  /* replies an honest client ignored: not its request's */
	uint64_t server_ignored;  /* messages a server's host logic answered with nothing */
	uint64_t client_packets;  /* packets the clients sent (first tries and resends) */
	uint64_t req_keys;        /* keys asked for by issued requests */
	uint64_t recirculated;    /* packets through the recirculation port */
	uint64_t switch_restarts; /* the switch came back (empty) after an outage */
	double mean_ns, p50_ns, p90_ns, p99_ns, p999_ns, max_ns;
	uint32_t n_windows;
	uint32_t hist_buckets;
	/* quantiles of the completed requests by who sent the final reply:
	 * a server, or the switch itself (a cache); NaN if none */
	double server_p50_ns, server_p99_ns, switch_p50_ns, switch_p99_ns;
	uint64_t switch_packets;  /* packets the pipeline processed (recirculations too;
				   * and those an outage then killed) */
	uint64_t completed_late;  /* completions after the arrivals ended (in the drain) */
};

struct nk_sim;

/* NULL on error, with a one-line reason in err. `wl` must outlive the sim. */
struct nk_sim *nk_sim_new(const struct nk_sim_cfg *cfg, const struct nk_workload *wl,
			  char *err, size_t errlen);
void nk_sim_free(struct nk_sim *sim);

/* Process every event with time <= t_ns. Returns 1 when the run is over
 * (all requests done or drain time reached), 0 otherwise. */
int nk_sim_run_until(struct nk_sim *sim, double t_ns);
/* Run to the end (no epochs). */
void nk_sim_run(struct nk_sim *sim);
double nk_sim_now_ns(const struct nk_sim *sim);
double nk_sim_end_ns(const struct nk_sim *sim);

void nk_sim_stats(const struct nk_sim *sim, struct nk_sim_stats *out);
/* Latency histogram (ns): fills up to n buckets; returns the bucket count. */
uint32_t nk_sim_hist(const struct nk_sim *sim, uint64_t *lower_ns, uint64_t *counts, uint32_t n);
/* Requests served per server (n_servers entries). */
void nk_sim_server_counts(const struct nk_sim *sim, uint64_t *out);
/* Bytes (frames, overhead included) serialized on each host's uplink (`up`,
 * one per node: servers, clients, coordinators) and on each switch port's
 * downlink (`down`, the same nodes): what link_gbps bounds. Returns the
 * node count; n entries at most are written to each. */
uint32_t nk_sim_link_bytes(const struct nk_sim *sim, uint64_t *up, uint64_t *down, uint32_t n);
/* Timeline, per window of window_s (docs/results.md "timeline.parquet"):
 * issued = requests whose intended send time is in the window; completed =
 * completions in the window; lost = requests issued in the window that
 * never completed (timed out, or still open at the end); p50/p99 = the
 * quantiles of the completions' latencies with the lost counted as
 * infinitely slow (nk_hist_quantile_lost: inf when the quantile falls among
 * them; 0 if the window has neither). Returns the number of windows. */
uint32_t nk_sim_timeline(const struct nk_sim *sim, uint64_t *issued, uint64_t *completed,
			 uint64_t *lost, double *p50_ns, double *p99_ns, uint32_t n);

/* ---- history (record_history) -------------------------------------------- *
 * One record per request, indexed by its serial (req_id) - 1. A read's `ver`
 * is the version it returned; a write's, the version of its reply. Which
 * write a version holds is known from the servers: whenever a server's
 * stored version of a key changes from a to b, the engine notes b's owner -
 * the request being applied for a client write, or a's owner for control
 * traffic that copies or re-versions a value (RC_REQ, VWRITE). */
enum nk_sim_outcome {
	NK_SIM_OP_OPEN = 0,       /* no final reply when the run ended */
	NK_SIM_OP_OK = 1,
	NK_SIM_OP_TIMEOUT = 2,    /* given up after the last retry */
};

#define NK_SIM_OWNER_INITIAL UINT64_MAX  /* the preloaded value */

struct nk_sim_op {
	uint64_t invoke_ns;       /* intended send time */
	uint64_t done_ns;         /* completion time (OK only) */
	uint64_t ver;             /* version read or written (OK only) */
	uint32_t client;
	uint32_t key;             /* key id */
	uint32_t keyhash;
	uint8_t write;
	uint8_t outcome;          /* enum nk_sim_outcome */
	uint8_t found;            /* read: the key existed */
	uint8_t rsvd;
};

/* Copies up to n records; returns how many requests were issued. */
uint64_t nk_sim_history(const struct nk_sim *sim, struct nk_sim_op *out, uint64_t n);
/* Version owners: (keyhash, ver) -> the serial of the write whose value it
 * holds, or NK_SIM_OWNER_INITIAL. Copies up to n; returns the total. */
uint64_t nk_sim_version_owners(const struct nk_sim *sim, uint32_t *keyhash, uint64_t *ver,
			       uint64_t *owner, uint64_t n);

/* ---- controller hooks (between epochs) ----------------------------------- */
/* A control command to server `server`'s host logic (host.h server_ctl),
 * e.g. "rkey_add <keyhash> <hexkey>". Returns its status; the reply text is
 * in out. -1 if the protocol has no control commands. */
int nk_sim_server_ctl(struct nk_sim *sim, uint32_t server, const char *line, char *out,
		      size_t cap);
int nk_sim_reg_read(struct nk_sim *sim, const char *name, uint32_t idx, uint64_t *val);
/* cells first..first+count-1 into out (a controller's bulk read, as a
 * switch's Thrift register_read of a range); the first error, 0 if none */
int nk_sim_reg_read_range(struct nk_sim *sim, const char *name, uint32_t first, uint32_t count,
			  uint64_t *out);
int nk_sim_reg_write(struct nk_sim *sim, const char *name, uint32_t idx, uint64_t val);
int nk_sim_table_add(struct nk_sim *sim, const char *table, const uint64_t *key, unsigned nkey,
		     const uint64_t *args, unsigned nargs);
int nk_sim_table_del(struct nk_sim *sim, const char *table, const uint64_t *key, unsigned nkey);
/* Multicast group -> egress ports (replaces the group). 0 or -1. */
int nk_sim_mcast_set(struct nk_sim *sim, uint32_t group, const uint16_t *ports, uint32_t n);
/* Packets the pipeline sent to the CPU port: pops up to max (oldest first). */
uint32_t nk_sim_cpu_recv(struct nk_sim *sim, struct nk_msg *out, uint16_t *src, uint32_t max);
/* Packet-out: inject m into the switch ingress from the CPU port now,
 * addressed to node dst. Its source is the controller's node id, S+M (the
 * node behind the CPU port), so replies come back through nk_sim_cpu_recv.
 * 0 or -1. */
int nk_sim_cpu_send(struct nk_sim *sim, const struct nk_msg *m, uint16_t dst);
/* After the run: let controller traffic (nk_sim_cpu_send) run for extra_ns
 * more of simulated time, e.g. to read every acknowledged key back through
 * the switch and the servers (no client traffic is left). 0 or -1. */
int nk_sim_extend(struct nk_sim *sim, double extra_ns);
/* Server crash at t_ns (queue and in-service requests lost, arrivals
 * dropped), restart at restart_ns (< 0: never) with its store reset. */
int nk_sim_schedule_crash(struct nk_sim *sim, uint32_t server, double t_ns, double restart_ns);
/* Switch outage at t_ns: every packet reaching the switch is dropped
 * (drop_outage) until restart_ns (< 0: never), and so is every packet in it
 * at t_ns (its pipeline, its ports' queues, its recirculation port, the
 * controller channel's queue), as a killed netkv-switch loses them. Every
 * outage is scheduled before the run. At restart_ns the pipeline starts
 * again from its init state with no multicast groups: the controller must
 * install its tables again (switch_restarts counts restarts). 0 or -1. */
int nk_sim_schedule_switch_outage(struct nk_sim *sim, double t_ns, double restart_ns);
/* Port status of a server's link as a switch CPU polls it (a Tofino's
 * $PORT_UP): 1 while the server is up, 0 while crashed. -1: no such server. */
int nk_sim_server_up(const struct nk_sim *sim, uint32_t server);
/* Out-of-band state transfer (a recovering replica's catch-up): every key
 * `from` has written is stored at `to` unless `to` already holds a newer
 * version of it. Returns the number of keys copied, or -1. */
int64_t nk_sim_store_merge(struct nk_sim *sim, uint32_t from, uint32_t to);
/* The highest version `server`'s store holds (out of band, as a restarted
 * switch's controller reads it to resume its write order past every stored
 * write). -1: no such server. */
int64_t nk_sim_store_newest(const struct nk_sim *sim, uint32_t server);
/* Current rank -> key table (after dynamics): n entries. */
uint32_t nk_sim_rank_keys(const struct nk_sim *sim, uint32_t *out, uint32_t n);

/* sizeof(struct <name>) for "nk_msg", "nk_sim_cfg", "nk_sim_stats",
 * "nk_workload_cfg", "nk_rank_info" (0 if unknown): lets ABI-mode bindings
 * check their struct declarations. */
size_t nk_sim_abi_sizeof(const char *name);

/* ---- capture (capture=true) ---------------------------------------------- *
 * From now on, write every frame the switch receives or sends on a node port
 * or the CPU port to <dir>/switch-p<port>.pcap / switch-cpu.pcap: the
 * message encoded by the real codec in the rack plan's Ethernet/IPv4/UDP
 * (values the sim keeps as lengths are zeros), stamped with simulated time
 * (ingress: arrival at the switch, egress: departure). Each file is bounded
 * by snaplen, max_bytes and max_packets (pcap.h). Files are in event order,
 * so timestamps may step back slightly (an order-free pipeline runs a packet
 * when it is sent). Closed by nk_sim_free. 0, or -1 with a reason in err. */
int nk_sim_capture(struct nk_sim *sim, const char *dir, uint32_t snaplen, uint64_t max_bytes,
		   uint64_t max_packets, char *err, size_t errlen);
/* Per capture file (node ports, then the CPU port): records written, frames
 * left out by a bound, and the wall time spent capturing (encoding, framing,
 * writing: the capture's cost); flushes the files. Returns the file count. */
uint32_t nk_sim_capture_stats(struct nk_sim *sim, uint64_t *packets, uint64_t *missed,
			      uint64_t *busy_ns, uint32_t n);

/* ---- several switches (racks >= 2) ------------------------------------------ */
/* 1, or 1 + racks (0 = the spine, 1 + r = rack r's leaf). */
uint32_t nk_sim_switches(const struct nk_sim *sim);
/* The switch the controller hooks (reg_*, table_*, mcast_set, cpu_recv,
 * cpu_send) act on from now on; 0 at start. 0, or -1: no such switch. */
int nk_sim_select_switch(struct nk_sim *sim, uint32_t sw);
/* Per switch: packets its pipeline processed, packets it dropped
 * (pipeline drops, no route, an empty group), and for a leaf the bytes
 * serialized on its trunk toward the spine (up) and from it (down; 0 for
 * the spine). Returns the switch count; n entries at most are written to
 * each (any may be NULL). */
uint32_t nk_sim_switch_stats(const struct nk_sim *sim, uint64_t *packets, uint64_t *dropped,
			     uint64_t *up_bytes, uint64_t *down_bytes, uint32_t n);

/* Node/port numbering used by the sim (of the selected switch). */
uint32_t nk_sim_cpu_port(const struct nk_sim *sim);
uint32_t nk_sim_recirc_port(const struct nk_sim *sim);

#ifdef __cplusplus
}
#endif

#endif /* NETKV_SIM_H */
