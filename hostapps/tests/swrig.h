/* swrig.h - the switch rig of the C protocol tests that drive one pipeline
 * and its host logic by hand: NS servers and NC clients (the includer
 * defines both), node i on port 10 + i, the CPU on port 99.
 *
 * P, H: the pipeline and host logic under test (main sets them);
 * sw_new, sw_free: a switch with the given params; sw: one packet through
 * it; reg: a register's value. */
#ifndef NETKV_TEST_SWRIG_H
#define NETKV_TEST_SWRIG_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/host.h"
#include "netkv/pipeline.h"

#include "expect.h"

static const struct nk_pipeline_ops *P;
static const struct nk_host_ops *H;

static void *sw_new(const char *params)
{
	static uint16_t ports[NS + NC];
	for (uint16_t i = 0; i < NS + NC; i++)
		ports[i] = (uint16_t)(10 + i);   /* node i on port 10 + i */
	struct nk_pipeline_cfg cfg = { .n_servers = NS, .n_clients = NC, .n_nodes = NS + NC,
				       .node_port = ports, .cpu_port = 99, .params = params };
	void *st = calloc(1, P->state_size);
	if (P->init(st, &cfg)) {
		fprintf(stderr, "init failed: %s\n", params);
		exit(2);
	}
	return st;
}

static void sw_free(void *st)
{
	P->fini(st);
	free(st);
}

static struct nk_actions sw(void *st, struct nk_msg *m, uint16_t src, uint16_t dst,
			    uint16_t *out_dst)
{
	struct nk_pkt_meta meta = { .src = src, .dst = dst, .from_cpu = src == NK_NODE_NONE,
				    .ingress_port = src == NK_NODE_NONE ? 99 : (uint16_t)(10 + src) };
	struct nk_actions act;
	memset(&act, 0xAB, sizeof act);
	P->process(st, m, &meta, &act);
	if (out_dst)
		*out_dst = meta.dst;
	return act;
}

static uint64_t reg(void *st, const char *name, uint32_t i)
{
	uint64_t v = 0xDEAD;
	EXPECT_EQ(P->reg_read(st, name, i, &v), 0);
	return v;
}

#endif /* NETKV_TEST_SWRIG_H */
