/* pcap.c - bounded pcap capture files (see pcap.h). */
#include "netkv/pcap.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#define PCAP_MAGIC_NS 0xa1b23c4du
#define LINKTYPE_ETHERNET 1u

static void put32(uint8_t *b, uint32_t v)
{
	memcpy(b, &v, 4);  /* native order: the magic tells readers which */
}

uint64_t nk_pcap_clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int nk_pcap_open(struct nk_pcap *p, const char *path, uint32_t snaplen, uint64_t max_bytes,
		 uint64_t max_packets)
{
	memset(p, 0, sizeof(*p));
	if (!path || snaplen == 0 || max_bytes < NK_PCAP_HDR_LEN) {
		errno = EINVAL;
		return -1;
	}
	p->f = fopen(path, "wb");
	if (!p->f)
		return -1;
	p->snaplen = snaplen;
	p->max_bytes = max_bytes;
	p->max_packets = max_packets;
	uint8_t h[NK_PCAP_HDR_LEN];
	uint16_t ver[2] = {2, 4};
	put32(h, PCAP_MAGIC_NS);
	memcpy(h + 4, ver, 4);
	put32(h + 8, 0);
	put32(h + 12, 0);
	put32(h + 16, snaplen);
	put32(h + 20, LINKTYPE_ETHERNET);
	if (fwrite(h, 1, sizeof(h), p->f) != sizeof(h)) {
		fclose(p->f);
		p->f = NULL;
		return -1;
	}
	p->bytes = NK_PCAP_HDR_LEN;
	return 0;
}

void nk_pcap_write(struct nk_pcap *p, uint64_t ts_ns, const uint8_t *frame, uint32_t len)
{
	if (!p->f)
		return;
	uint32_t incl = len < p->snaplen ? len : p->snaplen;
	uint64_t need = (uint64_t)NK_PCAP_REC_HDR_LEN + incl;
	if (p->packets >= p->max_packets || p->bytes + need > p->max_bytes) {
		p->missed++;
		return;
	}
	uint8_t h[NK_PCAP_REC_HDR_LEN];
	put32(h, (uint32_t)(ts_ns / 1000000000u));
	put32(h + 4, (uint32_t)(ts_ns % 1000000000u));
	put32(h + 8, incl);
	put32(h + 12, len);
	fwrite(h, 1, sizeof(h), p->f);
	fwrite(frame, 1, incl, p->f);
	p->packets++;
	p->bytes += need;
}

int nk_pcap_close(struct nk_pcap *p)
{
	if (!p->f)
		return 0;
	int rc = fclose(p->f);
	p->f = NULL;
	return rc ? -1 : 0;
}
