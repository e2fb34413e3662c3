/* test_frame.c - Ethernet/IPv4/UDP parse and build, checksums, the rack
 * address plan, and the control socket's word parsing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/ctl.h"
#include "netkv/host.h"
#include "netkv/io.h"
#include "netkv/pipeline.h"
#include "netkv/wire.h"

static int failures;
#define CHECK(c)                                                                   \
	do {                                                                       \
		if (!(c)) {                                                        \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c); \
			failures++;                                                \
		}                                                                  \
	} while (0)

/* a frame captured from Linux: 10.0.0.1:5047 -> 10.0.0.2:9000, "hello" */
static uint32_t build(uint8_t *f, const char *payload)
{
	uint8_t d[6], s[6];
	nk_node_mac(1, d);
	nk_node_mac(0, s);
	size_t n = strlen(payload);
	memcpy(f + NK_HDRS_LEN, payload, n);
	return nk_frame_build_udp(f, d, s, nk_node_ip(0), nk_node_ip(1), 5047, 9000, (uint16_t)n, 7);
}

static void test_build_parse(void)
{
	uint8_t f[NK_FRAME_MAX];
	uint32_t len = build(f, "hello");
	CHECK(len == 60); /* padded */
	struct nk_frame fr;
	CHECK(nk_frame_parse(f, len, &fr) == NK_FRAME_UDP);
	CHECK(fr.src_ip == 0x0A000001 && fr.dst_ip == 0x0A000002);
	CHECK(fr.sport == 5047 && fr.dport == 9000);
	CHECK(fr.payload_off == 42 && fr.payload_len == 5);
	CHECK(!memcmp(f + fr.payload_off, "hello", 5));
	/* both checksums verify: the sums over header / pseudo header fold to 0 */
	CHECK(nk_ip_csum(f + 14, 20) == 0);
	uint16_t udp_len = 13;
	uint32_t sum = (fr.src_ip >> 16) + (fr.src_ip & 0xFFFF) + (fr.dst_ip >> 16) +
		       (fr.dst_ip & 0xFFFF) + 17 + udp_len;
	CHECK(nk_csum_fold(nk_csum_add(sum, f + 34, udp_len)) == 0);
	/* the known IPv4 checksum of RFC 1071's example header */
	static const uint8_t rfc[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
					0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
	CHECK(nk_ip_csum(rfc, 20) == 0xb861);
}

static void test_set_dst(void)
{
	uint8_t f[NK_FRAME_MAX], g[NK_FRAME_MAX];
	build(f, "payload!");
	struct nk_frame fr;
	CHECK(nk_frame_parse(f, 60, &fr) == NK_FRAME_UDP);
	uint8_t mac[6];
	nk_node_mac(5, mac);
	nk_frame_set_dst(f, &fr, mac, nk_node_ip(5));
	/* the same frame built from scratch for node 5 */
	uint8_t s[6];
	nk_node_mac(0, s);
	memcpy(g + NK_HDRS_LEN, "payload!", 8);
	nk_frame_build_udp(g, mac, s, nk_node_ip(0), nk_node_ip(5), 5047, 9000, 8, 7);
	CHECK(!memcmp(f, g, 60));
	CHECK(nk_frame_parse(f, 60, &fr) == NK_FRAME_UDP && fr.dst_ip == nk_node_ip(5));
}

static void test_bad_frames(void)
{
	uint8_t f[NK_FRAME_MAX];
	struct nk_frame fr;
	uint32_t len = build(f, "abcdef");
	CHECK(nk_frame_parse(f, 10, &fr) == NK_FRAME_ETRUNC);
	CHECK(nk_frame_parse(f, 30, &fr) == NK_FRAME_ETRUNC);
	uint8_t g[NK_FRAME_MAX];
	memcpy(g, f, len);
	g[14] = 0x44; /* IHL 4 */
	CHECK(nk_frame_parse(g, len, &fr) == NK_FRAME_EIHL);
	memcpy(g, f, len);
	g[24] ^= 1; /* checksum */
	CHECK(nk_frame_parse(g, len, &fr) == NK_FRAME_ECSUM);
	memcpy(g, f, len);
	g[38] = 0xFF; /* UDP length beyond the IP payload */
	CHECK(nk_frame_parse(g, len, &fr) == NK_FRAME_ELEN);
	memcpy(g, f, len);
	g[12] = 0x08;
	g[13] = 0x06; /* ARP */
	CHECK(nk_frame_parse(g, len, &fr) == NK_FRAME_NOT_IP);
	/* random bytes never crash and never report UDP unless well-formed */
	srand(1);
	for (int i = 0; i < 100000; i++) {
		uint32_t n = (uint32_t)(rand() % 200);
		for (uint32_t k = 0; k < n; k++)
			g[k] = (uint8_t)rand();
		if (i & 1) { /* mostly valid headers, damaged */
			memcpy(g, f, len < n ? len : n);
			g[rand() % (n ? n : 1)] ^= (uint8_t)(1 + rand() % 255);
		}
		int st = nk_frame_parse(g, n, &fr);
		if (st == NK_FRAME_UDP)
			CHECK((uint32_t)fr.payload_off + fr.payload_len <= n);
	}
}

static void test_plan(void)
{
	CHECK(nk_ip_node(nk_node_ip(0)) == 0);
	CHECK(nk_ip_node(nk_node_ip(300)) == 300);
	CHECK(nk_ip_node(0x0A000000) == -1);
	CHECK(nk_ip_node(0x0B000001) == -1);
	CHECK(nk_parse_ipv4("10.0.1.44") == 0x0A00012C);
	CHECK(nk_parse_ipv4("nope") == 0);
}

/* A protocol's ports come from its ops (the programs name no protocol):
 * its pipeline and its hosts agree, and match the wire header's. */
static void test_ops_ports(void)
{
	static const struct { const char *name; uint16_t port; } want[] = {
		{"hash", NK_PEGASUS_PORT}, {"pegasus", NK_PEGASUS_PORT}, {"netcache", NK_NETCACHE_PORT},
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		const struct nk_pipeline_ops *p = nk_pipeline_find(want[i].name);
		const struct nk_host_ops *h = nk_host_find(want[i].name);
		CHECK(p && h);
		if (!p || !h)
			continue;
		CHECK(p->udp_port == want[i].port && p->udp_ports >= 1);
		CHECK(h->udp_port == p->udp_port);
		CHECK(h->proto == p->proto);
	}
}

static void test_ctl_words(void)
{
	char line[] = "  table_add  node_fwd 3,0x10 7 ";
	char *argv[8];
	CHECK(nk_ctl_split(line, argv, 8) == 4);
	CHECK(!strcmp(argv[0], "table_add") && !strcmp(argv[3], "7"));
	uint64_t v[4];
	CHECK(nk_ctl_parse_list(argv[2], v, 4) == 2 && v[0] == 3 && v[1] == 16);
	CHECK(nk_ctl_parse_list("-", v, 4) == 0);
	CHECK(nk_ctl_parse_list("1,,2", v, 4) == -1);
	CHECK(nk_ctl_parse_list("1,2,3,4,5", v, 4) == -1);
	CHECK(nk_ctl_parse_list("-1", v, 4) == -1);
	uint64_t x;
	CHECK(nk_ctl_parse_u64("18446744073709551615", &x) == 0 && x == UINT64_MAX);
	CHECK(nk_ctl_parse_u64("12x", &x) == -1 && nk_ctl_parse_u64("", &x) == -1);
	uint8_t b[4] = {0, 0xAB, 0x10, 0xFF}, back[4];
	char hex[9];
	CHECK(nk_ctl_hex(b, 4, hex) == 8 && !strcmp(hex, "00ab10ff"));
	CHECK(nk_ctl_unhex(hex, back, 4) == 4 && !memcmp(b, back, 4));
	CHECK(nk_ctl_unhex("abc", back, 4) == -1 && nk_ctl_unhex("zz", back, 4) == -1);
	CHECK(nk_ctl_unhex("0011223344", back, 4) == -1);
}

int main(void)
{
	test_build_parse();
	test_set_dst();
	test_bad_frames();
	test_plan();
	test_ops_ports();
	test_ctl_words();
	if (failures) {
		fprintf(stderr, "test_frame: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_frame: ok\n");
	return 0;
}
