/*
 * host_lazy.h - for tests only: the buffers host logic allocates at their
 * first use, not at init (hundreds of KiB to MiB each, needed only where
 * value bytes move or a client multigets), so a test can tell that an init,
 * and traffic without value bytes (the simulator's), allocated none. Each
 * returns the buffer of a state its host logic initialised, NULL while it
 * is not allocated.
 */
#ifndef NETKV_HOST_LAZY_H
#define NETKV_HOST_LAZY_H

#ifdef __cplusplus
extern "C" {
#endif

/* StarCache server: the write reassembly's bytes (starcache.c w_bufs) */
const void *nk_starcache_server_w_bufs(const void *server);
/* NetMC server: the reply pairs' bytes (netmc.c pairs.buf) */
const void *nk_netmc_server_pairs_buf(const void *server);
/* NetMC client: the multigets' aggregation table (netmc.c agg) */
const void *nk_netmc_client_agg(const void *client);

#ifdef __cplusplus
}
#endif

#endif /* NETKV_HOST_LAZY_H */
