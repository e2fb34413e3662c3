/*
 * dpdk.c - the DPDK stack under kvserver-dpdk and kvclient-dpdk (dgram.h):
 * one ethdev port, one RX and one TX queue, frames from an mbuf pool.
 *
 * Addressing is the rack plan's, with no ARP: this host is IPv4 ip= (default
 * the plan address of its node, io.h) with the port's MAC (or mac=); a
 * datagram to a plan address goes to that node's plan MAC (nk_node_mac), or
 * to gw= for every destination when the rack routes by IP through one next
 * hop. Received frames are parsed by frame.c; only well-formed UDP to our
 * address and port reaches the program (the rest is counted and dropped).
 * The port is promiscuous: the filter is ours, by IPv4 address.
 *
 * Waiting is polling (the DPDK way: a core per program); idle_us=N sleeps
 * N us between empty polls instead, for machines whose cores are shared
 * (the namespace rack: a busy loop per program there would starve the
 * others).
 *
 *   kvserver-dpdk --no-huge --no-pci --vdev=net_af_packet0,iface=eth1 --in-memory \
 *       -- --protocol hash --id 0 ... --io idle_us=20
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include "netkv/bytes.h"
#include "netkv/dgram.h"
#include "netkv/io.h"

#define NK_DPDK_PORT_DEFAULT 49152   /* a client's source port when none is bound */

struct nk_dgram {
	uint16_t port_id;
	uint16_t udp_port;
	uint32_t ip;
	uint8_t mac[6];
	uint8_t gw[6];
	int has_gw;
	uint32_t idle_us;
	uint16_t ip_id;
	struct rte_mempool *pool;
	/* received, not yet handed to the program */
	struct rte_mbuf *pend[NK_DGRAM_RX_MAX];
	uint16_t pend_i, pend_n;
	/* handed to the program in the last burst: freed by the next recv */
	struct rte_mbuf *held[NK_DGRAM_RX_MAX];
	uint16_t held_n;
	struct rte_mbuf *tx[NK_DGRAM_TX_MAX];
	uint32_t tx_n;
	struct rte_mbuf *tx_cur;     /* the slot returned and not yet committed */
	struct nk_dgram_stats st;
};

const char *nk_dgram_stack(void)
{
	return "dpdk";
}

const char *nk_dgram_usage(void)
{
	return "DPDK stack: PROGRAM [EAL args] -- [program args] [--io ip=A,mac=M,gw=M,"
	       "port_id=N,idle_us=N,rxd=N,txd=N,mbufs=N]";
}

int nk_dgram_preinit(int *argc, char ***argv, char *err, size_t errlen)
{
	char **av = *argv;
	if (*argc == 2 && (!strcmp(av[1], "--help") || !strcmp(av[1], "-h")))
		return 0;
	int r = rte_eal_init(*argc, av);
	if (r < 0) {
		snprintf(err, errlen, "DPDK EAL init failed (%s): give EAL arguments, then --, then "
				      "the program's", rte_strerror(rte_errno));
		return -1;
	}
	/* EAL left the program's name at av[r] */
	*argc -= r;
	*argv = av + r;
	optind = 1;
	return 0;
}

static int parse_mac(const char *s, uint8_t mac[6])
{
	struct rte_ether_addr a;
	if (rte_ether_unformat_addr(s, &a) < 0)
		return -1;
	memcpy(mac, a.addr_bytes, 6);
	return 0;
}

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 0);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

struct dpdk_opts {
	uint32_t ip, port_id, idle_us, rxd, txd, mbufs;
	uint8_t mac[6], gw[6];
	int has_mac, has_gw;
};

/* "key=value,..." -> o; 0, or -1 with err naming the bad item */
static int parse_opts(const char *spec, struct dpdk_opts *o, char *err, size_t errlen)
{
	char buf[512];
	if (!spec || !*spec)
		return 0;
	if (strlen(spec) >= sizeof(buf)) {
		snprintf(err, errlen, "--io: too long");
		return -1;
	}
	strcpy(buf, spec);
	char *save = NULL;
	for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		if (!eq) {
			snprintf(err, errlen, "--io %s: KEY=VALUE expected", item);
			return -1;
		}
		*eq = 0;
		const char *k = item, *v = eq + 1;
		int bad;
		if (!strcmp(k, "ip"))
			bad = !(o->ip = nk_parse_ipv4(v));
		else if (!strcmp(k, "mac"))
			bad = parse_mac(v, o->mac) || !(o->has_mac = 1);
		else if (!strcmp(k, "gw"))
			bad = parse_mac(v, o->gw) || !(o->has_gw = 1);
		else if (!strcmp(k, "port_id"))
			bad = parse_u32(v, 0, RTE_MAX_ETHPORTS - 1, &o->port_id);
		else if (!strcmp(k, "idle_us"))
			bad = parse_u32(v, 0, 1000000, &o->idle_us);
		else if (!strcmp(k, "rxd"))
			bad = parse_u32(v, 64, 16384, &o->rxd);
		else if (!strcmp(k, "txd"))
			bad = parse_u32(v, 64, 16384, &o->txd);
		else if (!strcmp(k, "mbufs"))
			bad = parse_u32(v, 1023, 1u << 20, &o->mbufs);
		else {
			snprintf(err, errlen, "--io %s: unknown option (allowed: ip, mac, gw, port_id, "
					      "idle_us, rxd, txd, mbufs)", k);
			return -1;
		}
		if (bad) {
			snprintf(err, errlen, "--io %s=%s: bad value", k, v);
			return -1;
		}
	}
	return 0;
}

struct nk_dgram *nk_dgram_open(const struct nk_dgram_cfg *cfg, char *err, size_t errlen)
{
	struct dpdk_opts o = {.ip = nk_node_ip(cfg->node), .rxd = 1024, .txd = 1024, .mbufs = 8191};
	if (parse_opts(cfg->opts, &o, err, errlen))
		return NULL;
	uint16_t port = (uint16_t)o.port_id;
	if (!rte_eth_dev_is_valid_port(port)) {
		snprintf(err, errlen, "no DPDK port %u (%u available): give EAL a device, e.g. -a PCI "
				      "or --vdev=net_af_packet0,iface=IFNAME",
			 port, rte_eth_dev_count_avail());
		return NULL;
	}
	struct nk_dgram *d = rte_zmalloc("nk_dgram", sizeof(*d), 64);
	if (!d) {
		snprintf(err, errlen, "out of memory (rte_zmalloc)");
		return NULL;
	}
	d->port_id = port;
	d->udp_port = cfg->port ? cfg->port : NK_DPDK_PORT_DEFAULT;
	d->ip = o.ip;
	d->idle_us = o.idle_us;
	d->has_gw = o.has_gw;
	memcpy(d->gw, o.gw, 6);
	int sock = rte_eth_dev_socket_id(port);
	if (sock < 0)
		sock = (int)rte_socket_id();
	char name[32];
	snprintf(name, sizeof(name), "nk_mbufs_%u", port);
	d->pool = rte_pktmbuf_pool_create(name, o.mbufs, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, sock);
	const char *what = "mbuf pool";
	int r = d->pool ? 0 : -rte_errno;
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	uint16_t rxd = (uint16_t)o.rxd, txd = (uint16_t)o.txd;
	if (!r && (r = rte_eth_dev_configure(port, 1, 1, &conf)) < 0)
		what = "configure";
	if (!r && (r = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd)) < 0)
		what = "descriptors";
	if (!r && (r = rte_eth_rx_queue_setup(port, 0, rxd, (unsigned)sock, NULL, d->pool)) < 0)
		what = "RX queue";
	if (!r && (r = rte_eth_tx_queue_setup(port, 0, txd, (unsigned)sock, NULL)) < 0)
		what = "TX queue";
	if (!r && (r = rte_eth_dev_start(port)) < 0)
		what = "start";
	if (r) {
		snprintf(err, errlen, "DPDK port %u: %s: %s", port, what, rte_strerror(-r));
		if (d->pool)
			rte_mempool_free(d->pool);
		rte_free(d);
		return NULL;
	}
	(void)rte_eth_promiscuous_enable(port); /* our filter is by IPv4 address */
	struct rte_ether_addr mac;
	if (o.has_mac)
		memcpy(d->mac, o.mac, 6);
	else if (rte_eth_macaddr_get(port, &mac) == 0)
		memcpy(d->mac, mac.addr_bytes, 6);
	return d;
}

void nk_dgram_close(struct nk_dgram *d)
{
	if (!d)
		return;
	nk_dgram_tx_flush(d);
	if (d->tx_cur)
		rte_pktmbuf_free(d->tx_cur);
	rte_pktmbuf_free_bulk(d->held, d->held_n);
	rte_pktmbuf_free_bulk(d->pend + d->pend_i, (unsigned)(d->pend_n - d->pend_i));
	(void)rte_eth_dev_stop(d->port_id);
	(void)rte_eth_dev_close(d->port_id);
	rte_mempool_free(d->pool);
	rte_free(d);
	(void)rte_eal_cleanup();
}

/* A UDP datagram for us? (checksums: the IPv4 header's in frame.c, the
 * UDP one here, as the kernel stack checks it) */
static int accept_frame(struct nk_dgram *d, struct rte_mbuf *m, struct nk_dgram_rx *rx)
{
	if (m->nb_segs != 1) {
		d->st.rx_bad++;
		return 0;
	}
	const uint8_t *buf = rte_pktmbuf_mtod(m, const uint8_t *);
	struct nk_frame f;
	int s = nk_frame_parse(buf, m->data_len, &f);
	if (s < 0) {
		d->st.rx_bad++;
		return 0;
	}
	if (s != NK_FRAME_UDP || f.dst_ip != d->ip || f.dport != d->udp_port) {
		d->st.rx_other++;
		return 0;
	}
	const uint8_t *udp = buf + f.ip_off + f.ip_hlen;
	if (nk_get16(udp + 6)) {
		uint16_t ulen = (uint16_t)(f.payload_len + NK_UDP_HLEN);
		uint32_t sum = (f.src_ip >> 16) + (f.src_ip & 0xFFFF) + (f.dst_ip >> 16) +
			       (f.dst_ip & 0xFFFF) + NK_IPPROTO_UDP + ulen;
		if (nk_csum_fold(nk_csum_add(sum, udp, ulen)) != 0) {
			d->st.rx_bad++;
			return 0;
		}
	}
	*rx = (struct nk_dgram_rx){.data = buf + f.payload_off, .len = f.payload_len,
				   .src_ip = f.src_ip, .src_port = f.sport};
	return 1;
}

unsigned nk_dgram_recv(struct nk_dgram *d, struct nk_dgram_rx *rx, unsigned max)
{
	if (d->held_n) {
		rte_pktmbuf_free_bulk(d->held, d->held_n);
		d->held_n = 0;
	}
	if (d->pend_i == d->pend_n) {
		d->pend_i = 0;
		d->pend_n = rte_eth_rx_burst(d->port_id, 0, d->pend, NK_DGRAM_RX_MAX);
	}
	unsigned n = 0;
	while (d->pend_i < d->pend_n && n < max) {
		struct rte_mbuf *m = d->pend[d->pend_i++];
		d->st.rx_frames++;
		d->held[d->held_n++] = m;
		n += (unsigned)accept_frame(d, m, &rx[n]);
	}
	return n;
}

uint8_t *nk_dgram_tx_slot(struct nk_dgram *d)
{
	if (d->tx_n == NK_DGRAM_TX_MAX)
		nk_dgram_tx_flush(d);
	if (!d->tx_cur) {
		d->tx_cur = rte_pktmbuf_alloc(d->pool);
		if (!d->tx_cur) {
			d->st.tx_nobuf++;
			return NULL;
		}
	}
	return rte_pktmbuf_mtod(d->tx_cur, uint8_t *) + NK_HDRS_LEN;
}

void nk_dgram_tx_commit(struct nk_dgram *d, uint32_t len, uint32_t dst_ip, uint16_t dst_port)
{
	struct rte_mbuf *m = d->tx_cur;
	uint8_t dst_mac[6];
	if (!m)
		return;
	if (d->has_gw) {
		memcpy(dst_mac, d->gw, 6);
	} else {
		int32_t node = nk_ip_node(dst_ip);
		if (node < 0) {
			d->st.tx_noroute++;
			return; /* the slot is reused by the next tx_slot */
		}
		nk_node_mac((uint32_t)node, dst_mac);
	}
	d->tx_cur = NULL;
	uint32_t flen = nk_frame_build_udp(rte_pktmbuf_mtod(m, uint8_t *), dst_mac, d->mac, d->ip,
					   dst_ip, d->udp_port, dst_port, (uint16_t)len, d->ip_id++);
	m->data_len = (uint16_t)flen;
	m->pkt_len = flen;
	d->tx[d->tx_n++] = m;
}

unsigned nk_dgram_tx_flush(struct nk_dgram *d)
{
	uint32_t sent = 0;
	int spins = 0;
	while (sent < d->tx_n) {
		uint16_t k = rte_eth_tx_burst(d->port_id, 0, d->tx + sent, (uint16_t)(d->tx_n - sent));
		sent += k;
		if (!k && ++spins > 64)
			break;
	}
	if (sent < d->tx_n) { /* the port stayed full: count, drop */
		rte_pktmbuf_free_bulk(d->tx + sent, d->tx_n - sent);
		d->st.tx_drop += d->tx_n - sent;
	}
	d->tx_n = 0;
	return sent;
}

void nk_dgram_wait(struct nk_dgram *d, struct pollfd *extra, unsigned n_extra,
		   uint64_t deadline_ns, const volatile sig_atomic_t *wake)
{
	for (unsigned i = 0; i < n_extra; i++)
		extra[i].revents = 0;
	for (uint32_t spin = 0;; spin++) {
		if (d->pend_i < d->pend_n)
			return;
		d->pend_i = 0;
		d->pend_n = rte_eth_rx_burst(d->port_id, 0, d->pend, NK_DGRAM_RX_MAX);
		if (d->pend_n || (wake && *wake))
			return;
		uint64_t now = nk_now_ns();
		if (now >= deadline_ns)
			return;
		if (d->idle_us) {
			uint64_t dt = (uint64_t)d->idle_us * 1000u;
			if (dt > deadline_ns - now)
				dt = deadline_ns - now;
			struct timespec ts = {(time_t)(dt / 1000000000ull), (long)(dt % 1000000000ull)};
			if (ppoll(extra, n_extra, &ts, NULL) > 0)
				return;
		} else if (n_extra && (spin & 1023) == 0 && poll(extra, n_extra, 0) > 0) {
			return;
		}
	}
}

void nk_dgram_get_stats(const struct nk_dgram *d, struct nk_dgram_stats *s)
{
	*s = d->st;
}
