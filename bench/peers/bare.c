// SPDX-License-Identifier: MIT
/*
 * bare: the least a user-space TCP forwarder does per request, as a yardstick
 * for the peer benchmark (the "bare" LB of bench/peers/peers.py), not a
 * product. One thread, level-triggered epoll, each byte recv()d into a
 * 16 KiB buffer and send()t straight on; a client goes to backend
 * (its IPv4 address modulo the count). No table, timers, limits, counters,
 * logs or retries: whatever hashlb, HAProxy and nginx spend beyond this is
 * their features and their way of waiting; what this one spends is the
 * kernel's TCP work that every forwarder on recv/send pays.
 *
 * Correct for the benchmark's traffic, not hardened: a send that does not
 * take everything parks the rest and stops reading that side until the
 * peer's EPOLLOUT; a FIN is passed on as shutdown(SHUT_WR); a connection
 * ends when both sides have sent FIN, or at the first error.
 *
 *   bare PORT BACKEND_PORT...      (everything on 127.0.0.1)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF 16384
#define BACKENDS_MAX 16

struct conn;

/* One side of a connection: its socket, and what waits to be sent to it. */
struct end {
	struct conn *c;
	int fd;
	bool eof; /* it sent FIN (passed on to the other side) */
	char *pend; /* bytes for this side that a send did not take */
	size_t pend_off, pend_len;
};

struct conn {
	struct end e[2]; /* 0: client, 1: backend */
	bool connected;
	bool dead; /* closed; freed after the batch of events, which may still name it */
	struct conn *next_dead;
};

static int ep;
static struct conn *graveyard;
static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void watch(struct end *x, int op, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = x };

	epoll_ctl(ep, op, x->fd, &ev);
}

static void conn_free(struct conn *c)
{
	for (int i = 0; i < 2; i++) {
		close(c->e[i].fd); /* leaves the epoll set with it */
		free(c->e[i].pend);
	}
	c->dead = true;
	c->next_dead = graveyard;
	graveyard = c;
}

/* What <x> watches for: its data, unless its peer has bytes parked; sending, if it has. */
static void rewatch(struct end *x)
{
	struct end *peer = &x->c->e[x == &x->c->e[0]];
	uint32_t ev = 0;

	if (!x->eof && !peer->pend_len)
		ev |= EPOLLIN;
	if (x->pend_len)
		ev |= EPOLLOUT;
	watch(x, EPOLL_CTL_MOD, ev);
}

/* Send <len> bytes of <p> to <to>; park what it does not take. 0, or -1 on error. */
static int forward(struct end *to, const char *p, size_t len)
{
	ssize_t n = send(to->fd, p, len, MSG_NOSIGNAL);

	if (n < 0 && errno != EAGAIN)
		return -1;
	if (n < 0)
		n = 0;
	if ((size_t)n == len)
		return 0;
	to->pend = malloc(len - (size_t)n);
	if (!to->pend)
		return -1;
	memcpy(to->pend, p + n, len - (size_t)n);
	to->pend_off = 0;
	to->pend_len = len - (size_t)n;
	return 0;
}

/* <x> is readable: pass what it sent, or its FIN, to its peer. */
static void readable(struct end *x)
{
	static char buf[BUF];
	struct conn *c = x->c;
	struct end *peer = &c->e[x == &c->e[0]];
	ssize_t n = recv(x->fd, buf, sizeof(buf), 0);

	if (n < 0 && errno == EAGAIN)
		return;
	if (n < 0) {
		conn_free(c);
		return;
	}
	if (n == 0) {
		x->eof = true;
		shutdown(peer->fd, SHUT_WR);
		if (peer->eof) {
			conn_free(c);
			return;
		}
		rewatch(x);
		return;
	}
	if (forward(peer, buf, (size_t)n) < 0) {
		conn_free(c);
		return;
	}
	if (peer->pend_len) {
		rewatch(x);
		rewatch(peer);
	}
}

/* <x> can take more: its parked bytes first. */
static void writable(struct end *x)
{
	struct conn *c = x->c;
	ssize_t n;

	if (!c->connected) { /* the backend's connect finished */
		int err = 0;
		socklen_t len = sizeof(err);

		getsockopt(x->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			conn_free(c);
			return;
		}
		c->connected = true;
		watch(&c->e[0], EPOLL_CTL_ADD, EPOLLIN);
		watch(x, EPOLL_CTL_MOD, EPOLLIN);
		return;
	}
	n = send(x->fd, x->pend + x->pend_off, x->pend_len, MSG_NOSIGNAL);
	if (n < 0 && errno == EAGAIN)
		return;
	if (n < 0) {
		conn_free(c);
		return;
	}
	x->pend_off += (size_t)n;
	x->pend_len -= (size_t)n;
	if (x->pend_len)
		return;
	free(x->pend);
	x->pend = NULL;
	rewatch(x);
	rewatch(&c->e[x == &c->e[0]]);
}

static void accept_all(int lfd, const struct sockaddr_in *backends, unsigned n_backends)
{
	for (;;) {
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		int one = 1, fd = accept4(lfd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK), bfd;
		const struct sockaddr_in *be;
		struct conn *c;

		if (fd < 0)
			return;
		be = &backends[ntohl(peer.sin_addr.s_addr) % n_backends];
		bfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		c = calloc(1, sizeof(*c));
		if (bfd < 0 || !c) {
			close(fd);
			if (bfd >= 0)
				close(bfd);
			free(c);
			continue;
		}
		setsockopt(bfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->e[0] = (struct end){ .c = c, .fd = fd };
		c->e[1] = (struct end){ .c = c, .fd = bfd };
		if (connect(bfd, (const struct sockaddr *)be, sizeof(*be)) < 0 &&
		    errno != EINPROGRESS) {
			conn_free(c);
			continue;
		}
		watch(&c->e[1], EPOLL_CTL_ADD, EPOLLOUT); /* the client is read once connected */
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr = { .sin_family = AF_INET }, backends[BACKENDS_MAX];
	struct epoll_event evs[256];
	unsigned n_backends = 0;
	int lfd, one = 1;

	if (argc < 3 || argc - 2 > BACKENDS_MAX) {
		fprintf(stderr, "usage: bare PORT BACKEND_PORT... (1 to %d, on 127.0.0.1)\n",
			BACKENDS_MAX);
		return 2;
	}
	for (int i = 2; i < argc; i++)
		backends[n_backends++] = (struct sockaddr_in){
			.sin_family = AF_INET,
			.sin_port = htons((uint16_t)atoi(argv[i])),
			.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
		};
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	addr.sin_port = htons((uint16_t)atoi(argv[1]));
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ep = epoll_create1(0);
	if (lfd < 0 || ep < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 || /* inherited */
	    bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(lfd, 4096) < 0) {
		perror("bare: listen");
		return 1;
	}
	{
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

		epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	}
	while (!stop) {
		int n = epoll_wait(ep, evs, 256, -1);

		for (int i = 0; i < n; i++) {
			struct end *x = evs[i].data.ptr;
			uint32_t e = evs[i].events;

			if (!x) {
				accept_all(lfd, backends, n_backends);
				continue;
			}
			if (x->c->dead) /* closed earlier in this batch */
				continue;
			if (!x->c->connected) { /* the backend's connect: done or failed */
				writable(x);
				continue;
			}
			if (e & EPOLLOUT)
				writable(x);
			/* an error or a reset shows as a failing recv */
			if (!x->c->dead && (e & (EPOLLIN | EPOLLERR | EPOLLHUP)))
				readable(x);
		}
		while (graveyard) {
			struct conn *c = graveyard;

			graveyard = c->next_dead;
			free(c);
		}
	}
	return 0;
}
