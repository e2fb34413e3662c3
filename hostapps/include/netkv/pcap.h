/*
 * pcap.h - bounded pcap capture files (netkv-switch ports, simulator ports).
 *
 * Classic pcap with nanosecond timestamps (magic 0xa1b23c4d, Ethernet link
 * type), written through one stdio buffer allocated at open: nothing is
 * allocated per packet. Every file is bounded: frames are cut to `snaplen`,
 * and once the next record would pass `max_bytes` (file size) or
 * `max_packets`, the file stops growing and the frames that did not fit are
 * counted in `missed` - a capture never fills the disk, and says what it
 * left out.
 */
#ifndef NETKV_PCAP_H
#define NETKV_PCAP_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NK_PCAP_HDR_LEN 24
#define NK_PCAP_REC_HDR_LEN 16

struct nk_pcap {
	FILE *f;
	uint32_t snaplen;
	uint64_t max_bytes;     /* file size bound, header included */
	uint64_t max_packets;
	uint64_t packets;       /* records written */
	uint64_t bytes;         /* file size so far */
	uint64_t missed;        /* frames left out once a bound was reached */
	uint64_t busy_ns;       /* time the caller spent capturing (it adds it) */
};

/* CLOCK_MONOTONIC in ns: callers time their capture work with it, so that a
 * run with capture on reports what capture cost it */
uint64_t nk_pcap_clock_ns(void);

/* Create `path` and write the file header. 0, or -1 with errno set. */
int nk_pcap_open(struct nk_pcap *p, const char *path, uint32_t snaplen, uint64_t max_bytes,
		 uint64_t max_packets);
/* Append one frame of `len` bytes (cut to snaplen) stamped ts_ns. */
void nk_pcap_write(struct nk_pcap *p, uint64_t ts_ns, const uint8_t *frame, uint32_t len);
/* Flush and close (a closed or never-opened nk_pcap is a no-op). 0 or -1. */
int nk_pcap_close(struct nk_pcap *p);

#ifdef __cplusplus
}
#endif

#endif /* NETKV_PCAP_H */
