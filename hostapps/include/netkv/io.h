/*
 * io.h - real packets for netkv's programs: Ethernet/IPv4/UDP frames, node
 * addressing, checksums, and batched AF_PACKET ports.
 *
 *   nk_frame_*   parse a received frame into its L2/L3/L4 fields (strict:
 *                truncated frames, bad IHL, lengths that disagree, a bad IPv4
 *                header checksum are errors the caller counts), and build one
 *                (headers + checksums) around a payload already in place.
 *   nk_node_*    the addressing plan of a netkv rack: node n (servers
 *                0..S-1, then clients) has IPv4 10.0.0.0 + n + 1 and MAC
 *                02:00:00:00:HH:LL with HHLL = n + 1. The switch maps
 *                addresses to node ids and back with these, no tables.
 *   nk_port_*    one switch port on a network interface: an AF_PACKET socket
 *                with a TPACKET_V2 receive ring (per-frame status words, so
 *                poll() wakes on the first packet - no block timeout as in
 *                TPACKET_V3) and sendmmsg() transmit batches from
 *                preallocated buffers. No allocation after nk_port_open.
 */
#ifndef NETKV_IO_H
#define NETKV_IO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <linux/if_packet.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NK_ETH_HLEN 14
#define NK_IP_HLEN 20
#define NK_UDP_HLEN 8
#define NK_HDRS_LEN (NK_ETH_HLEN + NK_IP_HLEN + NK_UDP_HLEN) /* 42 */
#define NK_ETHERTYPE_IPV4 0x0800
#define NK_ETHERTYPE_ARP 0x0806
#define NK_IPPROTO_UDP 17
#define NK_FRAME_MAX 2048          /* buffer per frame (no jumbo frames) */

/* ---- frames --------------------------------------------------------------- */

enum nk_frame_status {
	NK_FRAME_UDP = 0,          /* a well-formed IPv4/UDP frame */
	NK_FRAME_OTHER_IP = 1,     /* well-formed IPv4, not UDP (or a fragment) */
	NK_FRAME_NOT_IP = 2,       /* not IPv4 (ARP, IPv6, ...) */
	NK_FRAME_ETRUNC = -1,      /* shorter than its headers say */
	NK_FRAME_EIHL = -2,        /* IPv4 version/IHL invalid */
	NK_FRAME_ELEN = -3,        /* IPv4 total length or UDP length inconsistent */
	NK_FRAME_ECSUM = -4,       /* IPv4 header checksum wrong */
};

struct nk_frame {
	const uint8_t *dst_mac;
	const uint8_t *src_mac;
	uint16_t ethertype;
	uint16_t ip_off;           /* offset of the IPv4 header */
	uint16_t ip_hlen;          /* its length (IHL * 4) */
	uint16_t ip_len;           /* IPv4 total length */
	uint8_t ip_proto;
	uint8_t ttl;
	uint32_t src_ip;           /* host byte order */
	uint32_t dst_ip;
	uint16_t sport;            /* host byte order */
	uint16_t dport;
	uint16_t payload_off;      /* offset of the UDP payload */
	uint16_t payload_len;      /* UDP length - 8 */
};

/* Parse buf[0..len). Returns an enum nk_frame_status. */
int nk_frame_parse(const uint8_t *buf, uint32_t len, struct nk_frame *f);

/* Write Ethernet/IPv4/UDP headers in buf[0..42) for a payload of
 * payload_len bytes already at buf+42, with both checksums (UDP over the
 * payload too). Returns the frame length (>= 60: short frames are padded
 * with zeros, which the caller's buffer must have room for). */
uint32_t nk_frame_build_udp(uint8_t *buf, const uint8_t dst_mac[6], const uint8_t src_mac[6],
			    uint32_t src_ip, uint32_t dst_ip, uint16_t sport, uint16_t dport,
			    uint16_t payload_len, uint16_t ip_id);

/* Rewrite the destination (MAC, IPv4) of a parsed UDP frame in place and fix
 * both checksums incrementally (RFC 1624). */
void nk_frame_set_dst(uint8_t *buf, const struct nk_frame *f, const uint8_t mac[6],
		      uint32_t ip);
/* The same for the UDP destination port. */
void nk_frame_set_dport(uint8_t *buf, const struct nk_frame *f, uint16_t port);

/* ones'-complement sum of buf (not folded), and folding */
uint32_t nk_csum_add(uint32_t sum, const void *buf, size_t len);
static inline uint16_t nk_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	return (uint16_t)~sum;
}
/* IPv4 header checksum (the field itself must be zero or is skipped: the
 * sum over a header including a correct checksum folds to 0). */
uint16_t nk_ip_csum(const uint8_t *iph, unsigned hlen);
/* UDP checksum over pseudo header + UDP header + payload (udp->check = 0
 * while computing); 0 is sent as 0xFFFF. */
uint16_t nk_udp_csum(uint32_t src_ip, uint32_t dst_ip, const uint8_t *udp, uint16_t udp_len);

/* ---- rack addressing -------------------------------------------------------- */

#define NK_NODE_NET 0x0A000000u    /* 10.0.0.0/8 */
#define NK_NODE_MAX 65000u

static inline uint32_t nk_node_ip(uint32_t node)
{
	return NK_NODE_NET + node + 1;
}

/* node id of an address, or -1 if outside the plan */
static inline int32_t nk_ip_node(uint32_t ip)
{
	uint32_t n = ip - NK_NODE_NET;
	return (ip & 0xFF000000u) == NK_NODE_NET && n >= 1 && n <= NK_NODE_MAX ? (int32_t)(n - 1) : -1;
}

static inline void nk_node_mac(uint32_t node, uint8_t mac[6])
{
	mac[0] = 0x02; mac[1] = 0; mac[2] = 0; mac[3] = 0;
	mac[4] = (uint8_t)((node + 1) >> 8);
	mac[5] = (uint8_t)(node + 1);
}

/* "10.0.0.1" -> host-order address; 0 on error */
uint32_t nk_parse_ipv4(const char *s);

/* ---- AF_PACKET ports --------------------------------------------------------- */

#define NK_PORT_TX_BATCH 64

struct nk_port {
	int fd;
	int ifindex;
	char name[32];
	uint8_t mac[6];
	/* TPACKET_V2 receive ring */
	uint8_t *ring;
	size_t ring_len;
	uint32_t frame_size;
	uint32_t frame_nr;
	uint32_t rx_head;
	/* sendmmsg batch */
	uint32_t tx_n;
	struct mmsghdr tx_msg[NK_PORT_TX_BATCH];
	struct iovec tx_iov[NK_PORT_TX_BATCH];
	uint8_t (*tx_buf)[NK_FRAME_MAX];
	/* counters */
	uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes, tx_errors, rx_drops_kernel;
};

struct nk_port_cfg {
	uint32_t rx_frames;        /* receive ring slots (power of two), 0 = 4096 */
	int qdisc_bypass;          /* PACKET_QDISC_BYPASS on transmit */
	int busy_poll_us;          /* SO_BUSY_POLL (0 = off) */
};

/* Open `ifname` (bring-up is the caller's). 0, or -1 with a message in err. */
int nk_port_open(struct nk_port *p, const char *ifname, const struct nk_port_cfg *cfg,
		 char *err, size_t errlen);
void nk_port_close(struct nk_port *p);

/* Next received frame, or NULL when the ring is empty. The frame stays valid
 * until nk_port_rx_release. */
static inline uint8_t *nk_port_rx_peek(struct nk_port *p, uint32_t *len)
{
	struct tpacket2_hdr *h = (struct tpacket2_hdr *)(p->ring + (size_t)p->rx_head * p->frame_size);
	if (!(__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER))
		return NULL;
	*len = h->tp_snaplen;
	return (uint8_t *)h + h->tp_mac;
}

/* PACKET_OUTGOING etc.: the sll after the header says where it came from */
static inline int nk_port_rx_outgoing(struct nk_port *p)
{
	struct tpacket2_hdr *h = (struct tpacket2_hdr *)(p->ring + (size_t)p->rx_head * p->frame_size);
	const struct sockaddr_ll *sll =
		(const struct sockaddr_ll *)((uint8_t *)h + TPACKET_ALIGN(sizeof(struct tpacket2_hdr)));
	return sll->sll_pkttype == PACKET_OUTGOING;
}

static inline void nk_port_rx_release(struct nk_port *p)
{
	struct tpacket2_hdr *h = (struct tpacket2_hdr *)(p->ring + (size_t)p->rx_head * p->frame_size);
	__atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
	p->rx_head = (p->rx_head + 1) & (p->frame_nr - 1);
}

/* A transmit buffer (NK_FRAME_MAX bytes) to fill; flushes first if the
 * batch is full. Never NULL. */
uint8_t *nk_port_tx_slot(struct nk_port *p);
/* Queue the slot last returned with `len` bytes. */
static inline void nk_port_tx_commit(struct nk_port *p, uint32_t len)
{
	p->tx_iov[p->tx_n].iov_len = len;
	p->tx_n++;
}
/* Send the queued batch (sendmmsg). Returns frames sent. */
int nk_port_tx_flush(struct nk_port *p);
/* Copy a frame into the batch and queue it. */
static inline void nk_port_tx_copy(struct nk_port *p, const uint8_t *frame, uint32_t len)
{
	uint8_t *b = nk_port_tx_slot(p);
	if (len > NK_FRAME_MAX)
		len = NK_FRAME_MAX;
	memcpy(b, frame, len);
	nk_port_tx_commit(p, len);
}

/* Kernel's count of frames dropped because the ring was full (resets it). */
uint64_t nk_port_kernel_drops(struct nk_port *p);

/* ---- time ------------------------------------------------------------------- */

uint64_t nk_now_ns(void);   /* CLOCK_MONOTONIC, shared by every namespace */

/* Ask the kernel to send `sig` when the process that started us dies
 * (PR_SET_PDEATHSIG), so that a SIGKILLed orchestrator leaves no program
 * behind; returns -1 (and the caller exits) if that parent is already gone. */
int nk_exit_with_parent(int sig);

#ifdef __cplusplus
}
#endif

#endif /* NETKV_IO_H */
