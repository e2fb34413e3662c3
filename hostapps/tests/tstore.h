/* tstore.h - the tiny in-test store the C protocol tests hand to their host
 * logic (versions, lengths and up to 256 value bytes per key; the embedder's
 * job in kvserver and the simulator). */
#ifndef NETKV_TEST_TSTORE_H
#define NETKV_TEST_TSTORE_H

#include <stdint.h>
#include <string.h>

#include "netkv/host.h"

struct tstore {
	int n;
	struct {
		uint8_t key[NK_MAX_KEY_LEN], key_len;
		uint64_t ver;
		uint32_t vlen;
		uint8_t val[256];
	} e[16];
};

static int ts_find(struct tstore *t, const struct nk_msg *m)
{
	for (int i = 0; i < t->n; i++)
		if (t->e[i].key_len == m->key_len && !memcmp(t->e[i].key, m->key, m->key_len))
			return i;
	return -1;
}

static int ts_get(void *impl, const struct nk_msg *m, uint64_t *ver, uint32_t *vlen)
{
	struct tstore *t = impl;
	int i = ts_find(t, m);
	if (i < 0)
		return 1;
	*ver = t->e[i].ver;
	*vlen = t->e[i].vlen;
	return 0;
}

static int ts_put(void *impl, const struct nk_msg *m, uint64_t ver, uint32_t vlen)
{
	struct tstore *t = impl;
	int i = ts_find(t, m);
	if (i < 0) {
		i = t->n++;
		t->e[i].key_len = m->key_len;
		memcpy(t->e[i].key, m->key, m->key_len);
	}
	t->e[i].ver = ver;
	t->e[i].vlen = vlen;
	if (m->value && vlen <= sizeof t->e[i].val)
		memcpy(t->e[i].val, m->value, vlen);
	return 0;
}

static const struct nk_store_ops ts_ops = {.get = ts_get, .put = ts_put};

#endif /* NETKV_TEST_TSTORE_H */
