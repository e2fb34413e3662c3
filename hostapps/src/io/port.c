/*
 * port.c - one AF_PACKET switch port: TPACKET_V2 receive ring + sendmmsg.
 *
 * Why TPACKET_V2 and not V3: a V3 ring hands frames to user space a block at
 * a time, when the block fills or its retire timer (>= 1 ms) fires, so a
 * lone packet waits up to a millisecond. V2 publishes every frame as soon as
 * it is written, and poll() wakes on it. Receiving costs no system call at
 * all while the ring has frames; transmit batches up to NK_PORT_TX_BATCH
 * frames per sendmmsg.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "netkv/io.h"

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

static int fail(char *err, size_t errlen, const char *what, const char *ifname)
{
	snprintf(err, errlen, "%s %s: %s", what, ifname, strerror(errno));
	return -1;
}

int nk_port_open(struct nk_port *p, const char *ifname, const struct nk_port_cfg *cfg,
		 char *err, size_t errlen)
{
	memset(p, 0, sizeof(*p));
	p->fd = -1;
	snprintf(p->name, sizeof(p->name), "%s", ifname);
	p->ifindex = (int)if_nametoindex(ifname);
	if (!p->ifindex)
		return fail(err, errlen, "no interface", ifname);
	p->fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	if (p->fd < 0)
		return fail(err, errlen, "socket(AF_PACKET) for", ifname);
	int v = TPACKET_V2;
	if (setsockopt(p->fd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v)) < 0)
		return fail(err, errlen, "PACKET_VERSION on", ifname);
	v = 1;
	/* not fatal on old kernels: outgoing frames are also skipped by type */
	(void)setsockopt(p->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &v, sizeof(v));
	if (cfg && cfg->qdisc_bypass)
		(void)setsockopt(p->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &v, sizeof(v));
	if (cfg && cfg->busy_poll_us > 0) {
		v = cfg->busy_poll_us;
		(void)setsockopt(p->fd, SOL_SOCKET, SO_BUSY_POLL, &v, sizeof(v));
	}
	v = 4 << 20;
	(void)setsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));

	uint32_t frames = cfg && cfg->rx_frames ? cfg->rx_frames : 4096;
	if (frames & (frames - 1)) {
		snprintf(err, errlen, "rx_frames %u is not a power of two", frames);
		return -1;
	}
	struct tpacket_req req = {
		.tp_block_size = 1u << 16,
		.tp_frame_size = NK_FRAME_MAX,
		.tp_frame_nr = frames,
	};
	req.tp_block_nr = frames / (req.tp_block_size / req.tp_frame_size);
	if (setsockopt(p->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) < 0)
		return fail(err, errlen, "PACKET_RX_RING on", ifname);
	p->frame_size = req.tp_frame_size;
	p->frame_nr = req.tp_frame_nr;
	p->ring_len = (size_t)req.tp_block_size * req.tp_block_nr;
	p->ring = mmap(NULL, p->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_LOCKED, p->fd, 0);
	if (p->ring == MAP_FAILED)
		p->ring = mmap(NULL, p->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
	if (p->ring == MAP_FAILED) {
		p->ring = NULL;
		return fail(err, errlen, "mmap ring of", ifname);
	}

	struct sockaddr_ll sll = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(ETH_P_ALL),
		.sll_ifindex = p->ifindex,
	};
	if (bind(p->fd, (struct sockaddr *)&sll, sizeof(sll)) < 0)
		return fail(err, errlen, "bind to", ifname);

	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(p->fd, SIOCGIFHWADDR, &ifr) == 0)
		memcpy(p->mac, ifr.ifr_hwaddr.sa_data, 6);
	/* promiscuous: a switch port takes every frame */
	struct packet_mreq mr = {.mr_ifindex = p->ifindex, .mr_type = PACKET_MR_PROMISC};
	(void)setsockopt(p->fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr));

	p->tx_buf = aligned_alloc(64, sizeof(*p->tx_buf) * NK_PORT_TX_BATCH);
	if (!p->tx_buf) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < NK_PORT_TX_BATCH; i++) {
		p->tx_iov[i].iov_base = p->tx_buf[i];
		p->tx_msg[i].msg_hdr.msg_iov = &p->tx_iov[i];
		p->tx_msg[i].msg_hdr.msg_iovlen = 1;
	}
	return 0;
}

void nk_port_close(struct nk_port *p)
{
	if (p->ring)
		munmap(p->ring, p->ring_len);
	if (p->fd >= 0)
		close(p->fd);
	free(p->tx_buf);
	p->ring = NULL;
	p->tx_buf = NULL;
	p->fd = -1;
}

uint8_t *nk_port_tx_slot(struct nk_port *p)
{
	if (p->tx_n == NK_PORT_TX_BATCH)
		nk_port_tx_flush(p);
	return p->tx_buf[p->tx_n];
}

int nk_port_tx_flush(struct nk_port *p)
{
	uint32_t done = 0, errs = 0;
	int spins = 0;
	while (done < p->tx_n) {
		int r = sendmmsg(p->fd, p->tx_msg + done, p->tx_n - done, MSG_DONTWAIT);
		if (r > 0) {
			for (int i = 0; i < r; i++)
				p->tx_bytes += p->tx_iov[done + (uint32_t)i].iov_len;
			done += (uint32_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == ENOBUFS) && spins++ < 64)
			continue;
		/* a frame the kernel refuses (or a full queue): count, skip it */
		p->tx_errors++;
		errs++;
		done++;
	}
	p->tx_pkts += done - errs;
	p->tx_n = 0;
	return (int)done;
}

uint64_t nk_port_kernel_drops(struct nk_port *p)
{
	struct tpacket_stats st;
	socklen_t l = sizeof(st);
	if (getsockopt(p->fd, SOL_PACKET, PACKET_STATISTICS, &st, &l) < 0)
		return 0;
	p->rx_drops_kernel += st.tp_drops;
	return st.tp_drops;
}
