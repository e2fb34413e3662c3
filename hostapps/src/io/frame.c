/*
 * frame.c - Ethernet/IPv4/UDP parse and build, checksums, rack addressing.
 * Pure functions over caller buffers; the per-packet path of netkv-switch,
 * kvserver (for its bad-packet accounting) and the tests.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "netkv/io.h"
#include "netkv/bytes.h"
#include "netkv/msg.h"
#include "netkv/wire.h"

uint32_t nk_csum_add(uint32_t sum, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t s = sum;
	while (len >= 2) {
		s += (uint32_t)(p[0] << 8 | p[1]);
		p += 2;
		len -= 2;
	}
	if (len)
		s += (uint32_t)p[0] << 8;
	while (s >> 32)
		s = (s & 0xFFFFFFFFu) + (s >> 32);
	while (s >> 16)
		s = (s & 0xFFFF) + (s >> 16);
	return (uint32_t)s;
}

uint16_t nk_ip_csum(const uint8_t *iph, unsigned hlen)
{
	return nk_csum_fold(nk_csum_add(0, iph, hlen));
}

uint16_t nk_udp_csum(uint32_t src_ip, uint32_t dst_ip, const uint8_t *udp, uint16_t udp_len)
{
	uint32_t s = (src_ip >> 16) + (src_ip & 0xFFFF) + (dst_ip >> 16) + (dst_ip & 0xFFFF) +
		     NK_IPPROTO_UDP + udp_len;
	s = nk_csum_add(s, udp, udp_len);
	uint16_t c = nk_csum_fold(s);
	return c ? c : 0xFFFF;
}

int nk_frame_parse(const uint8_t *buf, uint32_t len, struct nk_frame *f)
{
	memset(f, 0, sizeof(*f));
	if (len < NK_ETH_HLEN)
		return NK_FRAME_ETRUNC;
	f->dst_mac = buf;
	f->src_mac = buf + 6;
	f->ethertype = nk_get16(buf + 12);
	if (f->ethertype != NK_ETHERTYPE_IPV4)
		return NK_FRAME_NOT_IP;
	const uint8_t *ip = buf + NK_ETH_HLEN;
	uint32_t avail = len - NK_ETH_HLEN;
	if (avail < NK_IP_HLEN)
		return NK_FRAME_ETRUNC;
	if ((ip[0] >> 4) != 4 || (ip[0] & 0xF) < 5)
		return NK_FRAME_EIHL;
	f->ip_off = NK_ETH_HLEN;
	f->ip_hlen = (uint16_t)((ip[0] & 0xF) * 4);
	if (avail < f->ip_hlen)
		return NK_FRAME_ETRUNC;
	f->ip_len = nk_get16(ip + 2);
	if (f->ip_len < f->ip_hlen)
		return NK_FRAME_ELEN;
	if (f->ip_len > avail)
		return NK_FRAME_ETRUNC;
	if (nk_csum_fold(nk_csum_add(0, ip, f->ip_hlen)) != 0)
		return NK_FRAME_ECSUM;
	f->ttl = ip[8];
	f->ip_proto = ip[9];
	f->src_ip = nk_get32(ip + 12);
	f->dst_ip = nk_get32(ip + 16);
	uint16_t frag = nk_get16(ip + 6);
	if (f->ip_proto != NK_IPPROTO_UDP || (frag & 0x3FFF))
		return NK_FRAME_OTHER_IP;
	const uint8_t *udp = ip + f->ip_hlen;
	uint32_t l4 = (uint32_t)f->ip_len - f->ip_hlen;
	if (l4 < NK_UDP_HLEN)
		return NK_FRAME_ETRUNC;
	f->sport = nk_get16(udp);
	f->dport = nk_get16(udp + 2);
	uint16_t ulen = nk_get16(udp + 4);
	if (ulen < NK_UDP_HLEN || ulen > l4)
		return NK_FRAME_ELEN;
	f->payload_off = (uint16_t)(f->ip_off + f->ip_hlen + NK_UDP_HLEN);
	f->payload_len = (uint16_t)(ulen - NK_UDP_HLEN);
	return NK_FRAME_UDP;
}

uint32_t nk_frame_build_udp(uint8_t *buf, const uint8_t dst_mac[6], const uint8_t src_mac[6],
			    uint32_t src_ip, uint32_t dst_ip, uint16_t sport, uint16_t dport,
			    uint16_t payload_len, uint16_t ip_id)
{
	memcpy(buf, dst_mac, 6);
	memcpy(buf + 6, src_mac, 6);
	nk_put16(buf + 12, NK_ETHERTYPE_IPV4);
	uint8_t *ip = buf + NK_ETH_HLEN;
	uint16_t ip_len = (uint16_t)(NK_IP_HLEN + NK_UDP_HLEN + payload_len);
	ip[0] = 0x45;
	ip[1] = 0;
	nk_put16(ip + 2, ip_len);
	nk_put16(ip + 4, ip_id);
	nk_put16(ip + 6, 0x4000); /* DF */
	ip[8] = 64;
	ip[9] = NK_IPPROTO_UDP;
	nk_put16(ip + 10, 0);
	nk_put32(ip + 12, src_ip);
	nk_put32(ip + 16, dst_ip);
	nk_put16(ip + 10, nk_ip_csum(ip, NK_IP_HLEN));
	uint8_t *udp = ip + NK_IP_HLEN;
	nk_put16(udp, sport);
	nk_put16(udp + 2, dport);
	nk_put16(udp + 4, (uint16_t)(NK_UDP_HLEN + payload_len));
	nk_put16(udp + 6, 0);
	nk_put16(udp + 6, nk_udp_csum(src_ip, dst_ip, udp, (uint16_t)(NK_UDP_HLEN + payload_len)));
	uint32_t flen = NK_HDRS_LEN + payload_len;
	if (flen < 60) {
		memset(buf + flen, 0, 60 - flen);
		flen = 60;
	}
	return flen;
}

/* RFC 1624: HC' = ~(~HC + ~m + m') for each changed 16-bit word */
static uint16_t csum_replace32(uint16_t check, uint32_t old, uint32_t new_)
{
	uint32_t s = (uint16_t)~check;
	s += (uint16_t)~(old >> 16);
	s += (uint16_t)~(old & 0xFFFF);
	s += new_ >> 16;
	s += new_ & 0xFFFF;
	while (s >> 16)
		s = (s & 0xFFFF) + (s >> 16);
	return (uint16_t)~s;
}

void nk_frame_set_dst(uint8_t *buf, const struct nk_frame *f, const uint8_t mac[6], uint32_t ip)
{
	memcpy(buf, mac, 6);
	uint8_t *iph = buf + f->ip_off;
	uint32_t old = nk_get32(iph + 16);
	if (old == ip)
		return;
	nk_put32(iph + 16, ip);
	nk_put16(iph + 10, csum_replace32(nk_get16(iph + 10), old, ip));
	uint8_t *udp = iph + f->ip_hlen;
	uint16_t uc = nk_get16(udp + 6);
	if (uc) { /* 0 = no UDP checksum: stays 0 */
		uc = csum_replace32(uc, old, ip);
		nk_put16(udp + 6, uc ? uc : 0xFFFF);
	}
}

void nk_frame_set_dport(uint8_t *buf, const struct nk_frame *f, uint16_t port)
{
	uint8_t *udp = buf + f->ip_off + f->ip_hlen;
	uint16_t old = nk_get16(udp + 2);
	if (old == port)
		return;
	nk_put16(udp + 2, port);
	uint16_t uc = nk_get16(udp + 6);
	if (uc) { /* the port is one 16-bit word of the sum: replace it */
		uc = csum_replace32(uc, old, port);
		nk_put16(udp + 6, uc ? uc : 0xFFFF);
	}
}

uint32_t nk_parse_ipv4(const char *s)
{
	struct in_addr a;
	if (!s || inet_pton(AF_INET, s, &a) != 1)
		return 0;
	return ntohl(a.s_addr);
}

uint64_t nk_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
