// SPDX-License-Identifier: MIT
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "check.h"
#include "proxy/proxyhdr.h"

void hlb_check_init(struct hlb_check *c, const struct sockaddr *addr, socklen_t addr_len,
		    uint32_t interval_ms, uint32_t timeout_ms, hlb_check_done_fn done, void *arg)
{
	memset(c, 0, sizeof(*c));
	if (addr_len > sizeof(c->addr))
		addr_len = sizeof(c->addr);
	memcpy(&c->addr, addr, addr_len);
	c->addr_len = addr_len;
	c->interval_ms = interval_ms ? interval_ms : 1;
	c->timeout_ms = timeout_ms ? timeout_ms : 1;
	c->done = done;
	c->arg = arg;
	c->io.fd = -1;
}

uint64_t hlb_check_phase(uint32_t interval_ms, uint32_t i, uint32_t n, uint64_t salt)
{
	uint64_t base = n ? (uint64_t)interval_ms * i / n : 0;

	return interval_ms ? (base + salt % interval_ms) % interval_ms : 0;
}

static void check_close(struct hlb_check *c)
{
	if (c->io.fd < 0)
		return;
	hlb_loop_del(c->loop, &c->io);
	close(c->io.fd);
	c->io.fd = -1;
}

/* Close the check in flight and schedule the next one. */
static void check_next(struct hlb_check *c)
{
	uint64_t now = hlb_now_ms();

	check_close(c);
	while (c->next_ms <= now)
		c->next_ms += c->interval_ms;
	hlb_timer_arm(c->loop, &c->timer, c->next_ms);
}

/* ... then report the result. */
static void check_finish(struct hlb_check *c, bool ok)
{
	uint64_t lat = hlb_now_ns() - c->started_ns;
	uint8_t hdr[HLB_PROXY_HDR_MAX];
	int n;

	/* The connect alone decides; the header is a courtesy to the backend
	 * (into an empty socket buffer: a failed send changes nothing). */
	if (ok && c->proxy) {
		n = hlb_proxy_local_header(c->proxy, hdr);
		if (n > 0)
			(void)send(c->io.fd, hdr, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	check_next(c);
	c->done(c->arg, ok, lat);
}

/*
 * Errors of our own (no fd left, no local port, no memory) say nothing
 * about the backend: counting them would take every backend down exactly
 * when the process is busiest. Such a check is skipped, not failed.
 */
static bool local_error(int e)
{
	return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM || e == EADDRNOTAVAIL ||
	       e == EAGAIN;
}

static void check_io(void *arg, uint32_t events)
{
	struct hlb_check *c = arg;
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(c->io.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (!err && (events & (EPOLLERR | EPOLLHUP)))
		err = ECONNREFUSED;
	check_finish(c, err == 0);
}

static void check_begin(struct hlb_check *c)
{
	int fd;

	c->started_ns = hlb_now_ns();
	fd = socket(c->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		if (local_error(errno))
			check_next(c);
		else
			check_finish(c, false);
		return;
	}
	c->io.fd = fd;
	c->io.fn = check_io;
	c->io.arg = c;
	if (connect(fd, (struct sockaddr *)&c->addr, c->addr_len) == 0) {
		check_finish(c, true);
		return;
	}
	if (errno != EINPROGRESS) {
		if (local_error(errno))
			check_next(c);
		else
			check_finish(c, false);
		return;
	}
	if (hlb_loop_add(c->loop, &c->io, EPOLLOUT) < 0) {
		check_next(c);
		return;
	}
	hlb_timer_arm(c->loop, &c->timer, c->started_ns / 1000000 + c->timeout_ms);
}

static void check_timer(void *arg)
{
	struct hlb_check *c = arg;

	if (c->io.fd >= 0)
		check_finish(c, false); /* timed out */
	else
		check_begin(c);
}

int hlb_check_start(struct hlb_check *c, struct hlb_loop *l, uint64_t first_ms)
{
	c->loop = l;
	c->next_ms = first_ms;
	hlb_timer_init(&c->timer, check_timer, c);
	return hlb_timer_arm(l, &c->timer, first_ms);
}

void hlb_check_stop(struct hlb_check *c)
{
	if (!c->loop)
		return;
	hlb_timer_cancel(c->loop, &c->timer);
	check_close(c);
	c->loop = NULL;
}
