/*
 * dgram.h - the host stack under kvserver and kvclient: UDP datagrams in
 * bursts, with one interface and two implementations (hostapps/stacks/):
 *
 *   kernel.c  kernel UDP: recvmmsg/sendmmsg on one socket (kvserver,
 *             kvclient; libvma accelerates exactly this under LD_PRELOAD)
 *   dpdk.c    DPDK: one ethdev port (a NIC, or net_af_packet on a Linux
 *             interface), frames built and parsed by frame.c, addresses from
 *             the rack plan (io.h) with no ARP (kvserver-dpdk, kvclient-dpdk)
 *
 * The programs are one source each, linked once per stack, so the protocol
 * host logic and the main loop are the same whatever carries the packets.
 * Buffers come from preallocated slots (kernel) or an mbuf pool (DPDK):
 * nothing is allocated per packet.
 *
 * Use: nk_dgram_preinit (DPDK's EAL takes its arguments, before `--`),
 * nk_dgram_open; then in the loop nk_dgram_recv a burst (valid until the
 * next recv), nk_dgram_tx_slot / nk_dgram_tx_commit each reply, then
 * nk_dgram_tx_flush; nk_dgram_wait when there is nothing to do.
 */
#ifndef NETKV_DGRAM_H
#define NETKV_DGRAM_H

#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NK_DGRAM_RX_MAX 64         /* datagrams per recv burst, at most */
#define NK_DGRAM_TX_MAX 128        /* queued datagrams before an implicit flush */
#define NK_DGRAM_PAYLOAD_MAX 1472  /* UDP payload in one 1500-byte IPv4 packet */

struct nk_dgram;

struct nk_dgram_cfg {
	uint16_t port;           /* local UDP port; 0 = any (kernel) or 49152 (DPDK) */
	uint32_t node;           /* this host's node in the rack plan (its default address) */
	const char *opts;        /* --io KEY=VALUE,... for the stack (NULL: defaults) */
};

struct nk_dgram_rx {
	const uint8_t *data;     /* UDP payload */
	uint32_t len;
	uint32_t src_ip;         /* host byte order */
	uint16_t src_port;
};

/* What the stack counted beyond the programs' own counters. */
struct nk_dgram_stats {
	uint64_t rx_frames;      /* frames taken from the port (DPDK) */
	uint64_t rx_other;       /* not a UDP datagram for us: ARP, other address/port (dropped) */
	uint64_t rx_bad;         /* bad frame or UDP checksum (dropped) */
	uint64_t tx_nobuf;       /* no transmit buffer (mbuf pool empty) */
	uint64_t tx_drop;        /* the port or socket refused a datagram */
	uint64_t tx_noroute;     /* destination outside the rack plan and no gateway MAC */
};

/* "kernel" or "dpdk" */
const char *nk_dgram_stack(void);

/* One line on the stack's own arguments, for the program's usage text. */
const char *nk_dgram_usage(void);

/* Before the program parses its own arguments: DPDK initialises its EAL
 * from the arguments up to `--` and leaves *argc and *argv with the program's
 * name and the rest (getopt reset); the kernel stack takes nothing. 0, or
 * -1 with a message in err. A lone --help is left to the program. */
int nk_dgram_preinit(int *argc, char ***argv, char *err, size_t errlen);

/* NULL with a one-line message in err (bad --io option, no port, bind). */
struct nk_dgram *nk_dgram_open(const struct nk_dgram_cfg *cfg, char *err, size_t errlen);
void nk_dgram_close(struct nk_dgram *d);

/* Up to max (<= NK_DGRAM_RX_MAX) datagrams received now, never blocking;
 * the previous burst's buffers are released. */
unsigned nk_dgram_recv(struct nk_dgram *d, struct nk_dgram_rx *rx, unsigned max);

/* A buffer for one datagram's payload (NK_DGRAM_PAYLOAD_MAX bytes), or NULL
 * if the stack has none free (counted as tx_nobuf; the caller drops it).
 * Flushes first when NK_DGRAM_TX_MAX are queued. */
uint8_t *nk_dgram_tx_slot(struct nk_dgram *d);
/* Queue the slot last returned: len payload bytes to dst_ip:dst_port. */
void nk_dgram_tx_commit(struct nk_dgram *d, uint32_t len, uint32_t dst_ip, uint16_t dst_port);
/* Send what is queued; returns the datagrams handed to the socket/port
 * (the others are counted in tx_drop). */
unsigned nk_dgram_tx_flush(struct nk_dgram *d);

/* Wait until a datagram may be ready, one of extra[] (e.g. control
 * sockets) is ready (its revents set), *wake is set (a signal handler's
 * flag) or CLOCK_MONOTONIC passes deadline_ns. The kernel stack sleeps in
 * ppoll; DPDK polls the port (sleeping idle_us between empty polls if
 * --io idle_us=N says so). */
void nk_dgram_wait(struct nk_dgram *d, struct pollfd *extra, unsigned n_extra,
		   uint64_t deadline_ns, const volatile sig_atomic_t *wake);

void nk_dgram_get_stats(const struct nk_dgram *d, struct nk_dgram_stats *s);

/* `, "stack": "...", "io_rx_other": N, ...` for a program's JSON report. */
static inline void nk_dgram_json(const struct nk_dgram *d, FILE *o)
{
	struct nk_dgram_stats s;
	nk_dgram_get_stats(d, &s);
	fprintf(o, ", \"stack\": \"%s\", \"io_rx_frames\": %llu, \"io_rx_other\": %llu, "
		   "\"io_rx_bad\": %llu, \"io_tx_nobuf\": %llu, \"io_tx_drop\": %llu, "
		   "\"io_tx_noroute\": %llu",
		nk_dgram_stack(), (unsigned long long)s.rx_frames, (unsigned long long)s.rx_other,
		(unsigned long long)s.rx_bad, (unsigned long long)s.tx_nobuf,
		(unsigned long long)s.tx_drop, (unsigned long long)s.tx_noroute);
}

#ifdef __cplusplus
}
#endif

#endif /* NETKV_DGRAM_H */
