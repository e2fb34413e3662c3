/*
 * kernel.c - the kernel UDP stack under kvserver and kvclient (dgram.h): one
 * socket bound to the port, recvmmsg bursts into preallocated buffers,
 * sendmmsg bursts from them. libvma, when LD_PRELOADed, takes over exactly
 * these calls (the testbed's `stack: vma`).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "netkv/dgram.h"
#include "netkv/io.h"

struct nk_dgram {
	int fd;
	uint8_t rbuf[NK_DGRAM_RX_MAX][NK_DGRAM_PAYLOAD_MAX];
	struct mmsghdr rmsg[NK_DGRAM_RX_MAX];
	struct iovec riov[NK_DGRAM_RX_MAX];
	struct sockaddr_in rsrc[NK_DGRAM_RX_MAX];
	uint32_t tx_n;
	uint8_t tbuf[NK_DGRAM_TX_MAX][NK_DGRAM_PAYLOAD_MAX];
	struct mmsghdr tmsg[NK_DGRAM_TX_MAX];
	struct iovec tiov[NK_DGRAM_TX_MAX];
	struct sockaddr_in tdst[NK_DGRAM_TX_MAX];
	struct nk_dgram_stats st;
};

const char *nk_dgram_stack(void)
{
	return "kernel";
}

const char *nk_dgram_usage(void)
{
	return "kernel UDP stack (no --io options)";
}

int nk_dgram_preinit(int *argc, char ***argv, char *err, size_t errlen)
{
	(void)argc;
	(void)argv;
	(void)err;
	(void)errlen;
	return 0;
}

struct nk_dgram *nk_dgram_open(const struct nk_dgram_cfg *cfg, char *err, size_t errlen)
{
	if (cfg->opts && *cfg->opts) {
		snprintf(err, errlen, "--io %s: the kernel stack takes no options", cfg->opts);
		return NULL;
	}
	struct nk_dgram *d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	d->fd = socket(AF_INET, SOCK_DGRAM, 0);
	int one = 1, bufsz = 8 << 20;
	struct sockaddr_in me = {.sin_family = AF_INET, .sin_port = htons(cfg->port),
				 .sin_addr.s_addr = htonl(INADDR_ANY)};
	if (d->fd >= 0) {
		setsockopt(d->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(d->fd, SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof(bufsz));
		setsockopt(d->fd, SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof(bufsz));
	}
	if (d->fd < 0 || bind(d->fd, (struct sockaddr *)&me, sizeof(me)) < 0) {
		snprintf(err, errlen, "bind UDP port %u: %s", cfg->port, strerror(errno));
		if (d->fd >= 0)
			close(d->fd);
		free(d);
		return NULL;
	}
	for (uint32_t i = 0; i < NK_DGRAM_RX_MAX; i++) {
		d->riov[i] = (struct iovec){d->rbuf[i], NK_DGRAM_PAYLOAD_MAX};
		d->rmsg[i].msg_hdr = (struct msghdr){.msg_name = &d->rsrc[i],
						     .msg_iov = &d->riov[i], .msg_iovlen = 1};
	}
	for (uint32_t i = 0; i < NK_DGRAM_TX_MAX; i++) {
		d->tiov[i] = (struct iovec){d->tbuf[i], 0};
		d->tmsg[i].msg_hdr = (struct msghdr){.msg_name = &d->tdst[i],
						     .msg_namelen = sizeof(d->tdst[i]),
						     .msg_iov = &d->tiov[i], .msg_iovlen = 1};
	}
	return d;
}

void nk_dgram_close(struct nk_dgram *d)
{
	if (!d)
		return;
	close(d->fd);
	free(d);
}

unsigned nk_dgram_recv(struct nk_dgram *d, struct nk_dgram_rx *rx, unsigned max)
{
	if (max > NK_DGRAM_RX_MAX)
		max = NK_DGRAM_RX_MAX;
	for (unsigned i = 0; i < max; i++)
		d->rmsg[i].msg_hdr.msg_namelen = sizeof(d->rsrc[i]);
	int r = recvmmsg(d->fd, d->rmsg, max, MSG_DONTWAIT, NULL);
	if (r <= 0)
		return 0;
	for (int i = 0; i < r; i++)
		rx[i] = (struct nk_dgram_rx){.data = d->rbuf[i], .len = d->rmsg[i].msg_len,
					     .src_ip = ntohl(d->rsrc[i].sin_addr.s_addr),
					     .src_port = ntohs(d->rsrc[i].sin_port)};
	return (unsigned)r;
}

uint8_t *nk_dgram_tx_slot(struct nk_dgram *d)
{
	if (d->tx_n == NK_DGRAM_TX_MAX)
		nk_dgram_tx_flush(d);
	return d->tbuf[d->tx_n];
}

void nk_dgram_tx_commit(struct nk_dgram *d, uint32_t len, uint32_t dst_ip, uint16_t dst_port)
{
	d->tiov[d->tx_n].iov_len = len;
	d->tdst[d->tx_n] = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(dst_port),
						.sin_addr.s_addr = htonl(dst_ip)};
	d->tx_n++;
}

unsigned nk_dgram_tx_flush(struct nk_dgram *d)
{
	uint32_t done = 0, sent = 0;
	while (done < d->tx_n) {
		int w = sendmmsg(d->fd, d->tmsg + done, d->tx_n - done, 0);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) { /* the datagram the kernel refused: count, skip it */
			d->st.tx_drop++;
			done++;
			continue;
		}
		done += (uint32_t)w;
		sent += (uint32_t)w;
	}
	d->tx_n = 0;
	return sent;
}

void nk_dgram_wait(struct nk_dgram *d, struct pollfd *extra, unsigned n_extra,
		   uint64_t deadline_ns, const volatile sig_atomic_t *wake)
{
	uint64_t now = nk_now_ns();
	if (deadline_ns <= now || (wake && *wake))
		return;
	uint64_t dt = deadline_ns - now;
	struct pollfd p[1 + 16];
	if (n_extra > 16)
		n_extra = 16;
	p[0] = (struct pollfd){.fd = d->fd, .events = POLLIN};
	for (unsigned i = 0; i < n_extra; i++)
		p[1 + i] = extra[i];
	struct timespec ts = {(time_t)(dt / 1000000000ull), (long)(dt % 1000000000ull)};
	int r = ppoll(p, 1 + n_extra, &ts, NULL);
	for (unsigned i = 0; i < n_extra; i++)
		extra[i].revents = r > 0 ? p[1 + i].revents : 0;
}

void nk_dgram_get_stats(const struct nk_dgram *d, struct nk_dgram_stats *s)
{
	*s = d->st;
}
