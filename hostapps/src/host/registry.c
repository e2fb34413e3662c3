/* registry.c - name -> host logic. A new protocol adds two lines here
 * (its extern and its entry; docs/adding-a-protocol.md). */
#include <string.h>

#include "netkv/host.h"

extern const struct nk_host_ops nk_host_hash;
extern const struct nk_host_ops nk_host_pegasus;
extern const struct nk_host_ops nk_host_netcache;
extern const struct nk_host_ops nk_host_kvswitch;
extern const struct nk_host_ops nk_host_starcache;
extern const struct nk_host_ops nk_host_netmc;
extern const struct nk_host_ops nk_host_netlr;

static const struct nk_host_ops *const hosts[] = {
	&nk_host_hash,
	&nk_host_pegasus,
	&nk_host_netcache,
	&nk_host_kvswitch,
	&nk_host_starcache,
	&nk_host_netmc,
	&nk_host_netlr,
};

int nk_host_checks_client_id(const char *name)
{
	const struct nk_host_ops *h = nk_host_find(name);
	return h && !h->no_client_id;
}

int nk_host_has_hostile(const char *name)
{
	const struct nk_host_ops *h = nk_host_find(name);
	return h && h->client_hostile;
}

const struct nk_host_ops *nk_host_find(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++)
		if (!strcmp(hosts[i]->name, name))
			return hosts[i];
	return NULL;
}
