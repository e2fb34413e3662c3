/*
 * ctl.h - the control socket of netkv's programs (netkv-switch today): a
 * Unix stream socket speaking one request line -> one reply line.
 *
 * Request: words separated by spaces, ending in '\n' (<= NK_CTL_LINE_MAX).
 * Reply:   "ok[ <words>]\n" or "err <reason>\n". Lists inside a word are
 *          comma-separated ("table_add node_fwd 3 2", "mcast_set 1 0,2,3").
 * The commands themselves belong to the program (docs/mininet.md lists
 * netkv-switch's); this module does the socket, the framing and the word
 * parsing, without allocation after nk_ctl_open, and never blocks the
 * caller's loop on a slow client for long (SO_SNDTIMEO 200 ms).
 */
#ifndef NETKV_CTL_H
#define NETKV_CTL_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NK_CTL_MAX_CONN 4
#define NK_CTL_LINE_MAX 16384
#define NK_CTL_MAX_WORDS 64
/* the replies to the lines of one read go out in one send: a pipelined batch
 * got one send (and one socket buffer of the reader's) per line, and a
 * reader that fell 200 ms behind lost the connection */
#define NK_CTL_PEND_MAX 65536

struct nk_ctl_conn {
	int fd;
	uint32_t len;
	char buf[NK_CTL_LINE_MAX];
};

/* handler: argv[0] is the command; writes the reply (without the trailing
 * newline) into out[0..cap) and returns its length. A negative return
 * closes the connection after replying. */
typedef int (*nk_ctl_handler)(void *ctx, int argc, char **argv, char *out, size_t cap);

struct nk_ctl {
	int lfd;
	char path[108];
	struct nk_ctl_conn conn[NK_CTL_MAX_CONN];
	char *out;                 /* reply buffer */
	size_t out_cap;
	char *pend;                /* replies not yet sent (NK_CTL_PEND_MAX) */
	size_t pend_len;
};

/* Listen on `path` (an old socket file there is replaced). 0 or -1 + err. */
int nk_ctl_open(struct nk_ctl *c, const char *path, size_t out_cap, char *err, size_t errlen);
void nk_ctl_close(struct nk_ctl *c);
/* Append the listening socket and connections to pfd; returns count. */
int nk_ctl_pollfds(const struct nk_ctl *c, struct pollfd *pfd, int max);
/* Accept, read and answer every complete line available (non-blocking). */
void nk_ctl_service(struct nk_ctl *c, nk_ctl_handler h, void *ctx);

/* Split `line` in place into words; returns argc (<= max). */
int nk_ctl_split(char *line, char **argv, int max);
/* Parse "a,b,c" into out[] (decimal or 0x hex); returns count or -1. */
int nk_ctl_parse_list(const char *s, uint64_t *out, int max);
/* Parse one unsigned (decimal or 0x hex): 0 ok, -1 bad. */
int nk_ctl_parse_u64(const char *s, uint64_t *out);
/* Hex encode n bytes into out (2n + 1 bytes incl. NUL); returns 2n. */
size_t nk_ctl_hex(const uint8_t *b, size_t n, char *out);
/* Hex decode; returns bytes or -1. */
int nk_ctl_unhex(const char *s, uint8_t *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* NETKV_CTL_H */
