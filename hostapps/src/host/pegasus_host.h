/*
 * pegasus_host.h - the Pegasus server's control commands (host/pegasus.c).
 *
 * The controller reaches a Pegasus server's soft state (the replicated-key
 * set used to detect hash collisions and for GC, the AMO client table) with
 * text commands in the style of ctl.h: argv[0] is the command, the reply is
 * "ok[ <words>]" or "err <reason>" written into out[0..cap). Keys are hex.
 *
 *   rkey_add <keyhash> <hexkey> [ver_completed]   replicated key (full bytes)
 *   rkey_del <keyhash>                            no longer replicated
 *   rkey_ver <keyhash> <ver_completed>            GC snapshot of ver_completed
 *   gc                                            drop obsolete copies; reply
 *                                                 "ok <n> <hexkey>,<hexkey>..."
 *                                                 (the embedder deletes them
 *                                                 from its store)
 *   amo_get <client_id>                           "ok <req_id>:<result>:<ver>,..."
 *   amo_put <client_id> <req_id> <result> <ver>   install / merge an entry
 *   virt <hexkey>                                 "ok 0|1": VIRT flag of a key
 *
 * Returns the reply length (as nk_ctl_handler does). The same signature is
 * proposed for an optional `server_ctl` hook in host.h (docs/pegasus.md).
 */
#ifndef NETKV_PEGASUS_HOST_H
#define NETKV_PEGASUS_HOST_H

#include <stddef.h>

#include "netkv/host.h"

#ifdef __cplusplus
extern "C" {
#endif

int nk_pegasus_server_ctl(void *st, struct nk_store *store, int argc, char **argv,
			  char *out, size_t cap);

/* Tombstone marker for DEL: stored as value_len (reads answer NOT_FOUND
 * with the tombstone's version). */
#define NK_PEGASUS_TOMBSTONE 0xFFFFFFFFu

#ifdef __cplusplus
}
#endif

#endif /* NETKV_PEGASUS_HOST_H */
