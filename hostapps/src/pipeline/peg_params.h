/*
 * peg_params.h - private helper of the Pegasus and NetCache pipelines and host
 * logic: read one knob from a "key=value;key=value" params string.
 *
 * Unknown keys are ignored (the Python config layer validates the protocol
 * section; the same string is passed to every component). Values are
 * numbers (decimal or 0x hex) or short words.
 */
#ifndef NETKV_PEG_PARAMS_H
#define NETKV_PEG_PARAMS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netkv/pipeline.h"

/* Copy the value of `key` into buf (NUL-terminated, truncated to cap-1).
 * Returns 1 if the key is present, 0 otherwise. */
static inline int nkp_get(const char *params, const char *key, char *buf, size_t cap)
{
	if (!params || !cap)
		return 0;
	size_t klen = strlen(key);
	const char *p = params;
	while (*p) {
		while (*p == ';' || *p == ' ')
			p++;
		const char *end = strchr(p, ';');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len > klen && !strncmp(p, key, klen) && p[klen] == '=') {
			size_t vlen = len - klen - 1;
			if (vlen >= cap)
				vlen = cap - 1;
			memcpy(buf, p + klen + 1, vlen);
			buf[vlen] = 0;
			return 1;
		}
		if (!end)
			break;
		p = end + 1;
	}
	return 0;
}

/* Numeric knob: *out = value, or `def` when absent. Returns -1 when the value
 * is present but not a number, else 0. */
static inline int nkp_u64(const char *params, const char *key, uint64_t def, uint64_t *out)
{
	char buf[32];
	*out = def;
	if (!nkp_get(params, key, buf, sizeof buf))
		return 0;
	if (!strcmp(buf, "true") || !strcmp(buf, "True")) {
		*out = 1;
		return 0;
	}
	if (!strcmp(buf, "false") || !strcmp(buf, "False")) {
		*out = 0;
		return 0;
	}
	char *e = NULL;
	unsigned long long v = strtoull(buf, &e, 0);
	if (!buf[0] || (e && *e))
		return -1;
	*out = v;
	return 0;
}

/* The trust boundary of a pipeline (pipeline.h, docs/security.md): the rack's
 * servers, and the knob `trusted_ports` = comma-separated switch ports whose
 * packets keep switch-owned fields (the inter-rack link of multi-rack
 * Pegasus; none by default). Returns -1 on a malformed list. */
static inline int nkp_trust(const char *params, uint32_t n_servers, struct nk_trust *t)
{
	char buf[128];
	memset(t, 0, sizeof(*t));
	t->n_servers = n_servers;
	if (!nkp_get(params, "trusted_ports", buf, sizeof buf) || !buf[0])
		return 0;
	for (char *p = buf; *p;) {
		char *e = NULL;
		unsigned long v = strtoul(p, &e, 0);
		if (e == p || v >= 0xFFFF || t->n_trusted >= NK_MAX_TRUSTED_PORTS ||
		    (*e && *e != ','))
			return -1;
		t->trusted[t->n_trusted++] = (uint16_t)v;
		p = *e ? e + 1 : e;
	}
	return 0;
}

#endif /* NETKV_PEG_PARAMS_H */
