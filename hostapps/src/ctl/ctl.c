/* ctl.c - control socket framing and word parsing (ctl.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "netkv/ctl.h"

int nk_ctl_open(struct nk_ctl *c, const char *path, size_t out_cap, char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	c->lfd = -1;
	for (int i = 0; i < NK_CTL_MAX_CONN; i++)
		c->conn[i].fd = -1;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(a.sun_path)) {
		snprintf(err, errlen, "control socket path too long: %s", path);
		return -1;
	}
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	/* never replace what stands at the path unless it is a (stale) socket:
	 * a typo must not delete a file (docs/security.md) */
	struct stat st;
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "control socket %s: exists and is not a socket (refusing to "
			 "replace it; remove it or choose another path)", path);
		return -1;
	}
	c->out = malloc(out_cap);
	c->out_cap = out_cap;
	c->pend = malloc(NK_CTL_PEND_MAX);
	if (!c->out || !c->pend) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	c->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->lfd < 0) {
		snprintf(err, errlen, "socket(AF_UNIX): %s", strerror(errno));
		return -1;
	}
	unlink(path);
	/* owner-only from the start: the control plane is trusted and reachable
	 * only by its owner (umask around bind, then chmod for odd umasks) */
	mode_t old = umask(0177);
	int rc = bind(c->lfd, (struct sockaddr *)&a, sizeof(a));
	umask(old);
	if (rc < 0 || chmod(path, 0600) < 0 || listen(c->lfd, 8) < 0) {
		snprintf(err, errlen, "control socket %s: %s", path, strerror(errno));
		close(c->lfd);
		c->lfd = -1;
		return -1;
	}
	snprintf(c->path, sizeof(c->path), "%s", path);
	return 0;
}

void nk_ctl_close(struct nk_ctl *c)
{
	for (int i = 0; i < NK_CTL_MAX_CONN; i++)
		if (c->conn[i].fd >= 0)
			close(c->conn[i].fd);
	if (c->lfd >= 0) {
		close(c->lfd);
		unlink(c->path);
	}
	free(c->out);
	free(c->pend);
	c->out = NULL;
	c->pend = NULL;
	c->lfd = -1;
}

int nk_ctl_pollfds(const struct nk_ctl *c, struct pollfd *pfd, int max)
{
	int n = 0;
	if (c->lfd >= 0 && n < max)
		pfd[n++] = (struct pollfd){.fd = c->lfd, .events = POLLIN};
	for (int i = 0; i < NK_CTL_MAX_CONN && n < max; i++)
		if (c->conn[i].fd >= 0)
			pfd[n++] = (struct pollfd){.fd = c->conn[i].fd, .events = POLLIN};
	return n;
}

static void drop_conn(struct nk_ctl_conn *k)
{
	close(k->fd);
	k->fd = -1;
	k->len = 0;
}

static int send_all(int fd, const char *b, size_t n)
{
	while (n) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static int flush_pend(struct nk_ctl *c, struct nk_ctl_conn *k)
{
	size_t n = c->pend_len;
	c->pend_len = 0;
	return n ? send_all(k->fd, c->pend, n) : 0;
}

static int answer(struct nk_ctl *c, struct nk_ctl_conn *k, char *line, nk_ctl_handler h, void *ctx)
{
	char *argv[NK_CTL_MAX_WORDS];
	int argc = nk_ctl_split(line, argv, NK_CTL_MAX_WORDS);
	int n, close_after = 0;
	if (argc == 0) {
		n = snprintf(c->out, c->out_cap, "err empty request");
	} else {
		n = h(ctx, argc, argv, c->out, c->out_cap - 1);
		if (n < 0) {
			close_after = 1;
			n = (int)strnlen(c->out, c->out_cap - 1);
		}
	}
	if (n < 0)
		n = 0;
	if ((size_t)n >= c->out_cap - 1)
		n = (int)c->out_cap - 2;
	c->out[n++] = '\n';
	if (c->pend_len + (size_t)n > NK_CTL_PEND_MAX && flush_pend(c, k) < 0)
		return -1;
	if ((size_t)n > NK_CTL_PEND_MAX) { /* a big reply (cpu_poll): as it is */
		if (send_all(k->fd, c->out, (size_t)n) < 0)
			return -1;
	} else {
		memcpy(c->pend + c->pend_len, c->out, (size_t)n);
		c->pend_len += (size_t)n;
	}
	if (close_after) {
		(void)flush_pend(c, k);
		return -1;
	}
	return 0;
}

void nk_ctl_service(struct nk_ctl *c, nk_ctl_handler h, void *ctx)
{
	for (;;) {
		int fd = accept4(c->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;
		int slot = -1;
		for (int i = 0; i < NK_CTL_MAX_CONN; i++)
			if (c->conn[i].fd < 0) {
				slot = i;
				break;
			}
		if (slot < 0) {
			static const char busy[] = "err too many control connections\n";
			(void)!write(fd, busy, sizeof(busy) - 1);
			close(fd);
			continue;
		}
		struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		/* replies are written blocking (with the timeout above) */
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		c->conn[slot].fd = fd;
		c->conn[slot].len = 0;
	}
	for (int i = 0; i < NK_CTL_MAX_CONN; i++) {
		struct nk_ctl_conn *k = &c->conn[i];
		if (k->fd < 0)
			continue;
		ssize_t r = recv(k->fd, k->buf + k->len, sizeof(k->buf) - 1 - k->len, MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
			drop_conn(k);
			continue;
		}
		if (r < 0)
			continue;
		k->len += (uint32_t)r;
		char *start = k->buf;
		char *nl;
		int dead = 0;
		while (!dead && (nl = memchr(start, '\n', k->len - (uint32_t)(start - k->buf)))) {
			*nl = 0;
			if (nl > start && nl[-1] == '\r')
				nl[-1] = 0;
			dead = answer(c, k, start, h, ctx) < 0;
			start = nl + 1;
		}
		if (!dead)
			dead = flush_pend(c, k) < 0;
		c->pend_len = 0;  /* a dead connection's replies go nowhere */
		if (dead) {
			drop_conn(k);
			continue;
		}
		uint32_t rest = k->len - (uint32_t)(start - k->buf);
		memmove(k->buf, start, rest);
		k->len = rest;
		if (k->len >= sizeof(k->buf) - 1) { /* a line longer than the buffer */
			static const char big[] = "err request line too long\n";
			(void)send_all(k->fd, big, sizeof(big) - 1);
			drop_conn(k);
		}
	}
}

int nk_ctl_split(char *line, char **argv, int max)
{
	int n = 0;
	char *p = line;
	while (*p && n < max) {
		while (*p == ' ' || *p == '\t')
			*p++ = 0;
		if (!*p)
			break;
		argv[n++] = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
	}
	return n;
}

int nk_ctl_parse_u64(const char *s, uint64_t *out)
{
	if (!s || !*s || *s == '-')
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int nk_ctl_parse_list(const char *s, uint64_t *out, int max)
{
	if (!s)
		return -1;
	if (!strcmp(s, "-"))
		return 0;
	int n = 0;
	const char *p = s;
	while (*p) {
		if (n >= max)
			return -1;
		char *end;
		errno = 0;
		if (*p == '-')
			return -1;
		unsigned long long v = strtoull(p, &end, 0);
		if (errno || end == p || (*end && *end != ','))
			return -1;
		out[n++] = v;
		p = *end ? end + 1 : end;
	}
	return n;
}

size_t nk_ctl_hex(const uint8_t *b, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * n] = 0;
	return 2 * n;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int nk_ctl_unhex(const char *s, uint8_t *out, size_t cap)
{
	size_t n = strlen(s);
	if (n % 2 || n / 2 > cap)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return (int)(n / 2);
}
