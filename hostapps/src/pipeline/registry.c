/* registry.c - name -> pipeline. A new protocol adds two lines here
 * (its extern and its entry; docs/adding-a-protocol.md). */
#include <string.h>

#include "netkv/pipeline.h"

extern const struct nk_pipeline_ops nk_pipeline_hash;
extern const struct nk_pipeline_ops nk_pipeline_pegasus;
extern const struct nk_pipeline_ops nk_pipeline_netcache;
extern const struct nk_pipeline_ops nk_pipeline_kvswitch;
extern const struct nk_pipeline_ops nk_pipeline_starcache;
extern const struct nk_pipeline_ops nk_pipeline_netmc;
extern const struct nk_pipeline_ops nk_pipeline_netlr;

static const struct nk_pipeline_ops *const pipelines[] = {
	&nk_pipeline_hash,
	&nk_pipeline_pegasus,
	&nk_pipeline_netcache,
	&nk_pipeline_kvswitch,
	&nk_pipeline_starcache,
	&nk_pipeline_netmc,
	&nk_pipeline_netlr,
};

const struct nk_pipeline_ops *nk_pipeline_find(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < sizeof(pipelines) / sizeof(pipelines[0]); i++)
		if (!strcmp(pipelines[i]->name, name))
			return pipelines[i];
	return NULL;
}
