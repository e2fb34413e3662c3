/* test_pcap.c - bounded pcap files: header, records, snap length, size and
 * packet bounds with what they left out counted. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "expect.h"
#include "netkv/pcap.h"

static long file_size(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fclose(f);
	return n;
}

int main(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/tmp/netkv-test-pcap-%d.pcap", (int)getpid());
	uint8_t frame[200];
	for (unsigned i = 0; i < sizeof(frame); i++)
		frame[i] = (uint8_t)i;
	struct nk_pcap p;

	current = "records and snap length";
	EXPECT_EQ(nk_pcap_open(&p, path, 64, 1u << 20, 1000), 0);
	nk_pcap_write(&p, 1234567890123456789ull, frame, 60);
	nk_pcap_write(&p, 1234567890123456790ull, frame, 200); /* cut to 64 */
	EXPECT_EQ(p.packets, 2);
	EXPECT_EQ(p.missed, 0);
	EXPECT_EQ(nk_pcap_close(&p), 0);
	EXPECT_EQ(file_size(path), 24 + 16 + 60 + 16 + 64);
	FILE *f = fopen(path, "rb");
	uint8_t buf[256];
	size_t n = f ? fread(buf, 1, sizeof(buf), f) : 0;
	if (f)
		fclose(f);
	uint32_t magic, sec, nsec, incl, orig;
	memcpy(&magic, buf, 4);
	EXPECT_EQ(magic, 0xa1b23c4du);
	memcpy(&sec, buf + 24 + 16 + 60, 4);
	memcpy(&nsec, buf + 24 + 16 + 60 + 4, 4);
	memcpy(&incl, buf + 24 + 16 + 60 + 8, 4);
	memcpy(&orig, buf + 24 + 16 + 60 + 12, 4);
	EXPECT_EQ(sec, 1234567890u);
	EXPECT_EQ(nsec, 123456790u);
	EXPECT_EQ(incl, 64);
	EXPECT_EQ(orig, 200);
	EXPECT_EQ(n, 24u + 16 + 60 + 16 + 64);
	EXPECT(!memcmp(buf + 24 + 16 + 60 + 16, frame, 64));

	current = "packet bound";
	EXPECT_EQ(nk_pcap_open(&p, path, 64, 1u << 20, 3), 0);
	for (int i = 0; i < 10; i++)
		nk_pcap_write(&p, (uint64_t)i, frame, 60);
	EXPECT_EQ(p.packets, 3);
	EXPECT_EQ(p.missed, 7);
	nk_pcap_close(&p);
	EXPECT_EQ(file_size(path), 24 + 3 * (16 + 60));

	current = "size bound";
	EXPECT_EQ(nk_pcap_open(&p, path, 1500, 24 + 2 * (16 + 100) + 50, 1000), 0);
	for (int i = 0; i < 5; i++)
		nk_pcap_write(&p, (uint64_t)i, frame, 100);
	EXPECT_EQ(p.packets, 2);
	EXPECT_EQ(p.missed, 3);
	nk_pcap_close(&p);
	EXPECT(file_size(path) <= 24 + 2 * (16 + 100) + 50);

	current = "bad arguments";
	EXPECT(nk_pcap_open(&p, "/nonexistent-dir/x.pcap", 64, 1000, 10) < 0);
	EXPECT(nk_pcap_open(&p, path, 0, 1000, 10) < 0);
	nk_pcap_write(&p, 0, frame, 10); /* never opened: a no-op */
	EXPECT_EQ(nk_pcap_close(&p), 0);

	unlink(path);
	printf("test_pcap: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
