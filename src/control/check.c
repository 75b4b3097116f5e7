// SPDX-License-Identifier: MIT
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "proxy/proxyhdr.h"
#include "runtime/runtime.h"

/*
 * Checks in flight hold a socket each, and a check of a backend that does
 * not answer holds it for the whole timeout: tens of thousands of backends
 * behind a dead switch would take every descriptor the forwarder needs for
 * its clients. So the checks in flight (the control thread's, all of them)
 * hold at most a quarter of RLIMIT_NOFILE, read again each second. A check
 * due while they are all taken waits in a FIFO (no timer, no polling) and
 * starts as soon as one ends, its next one at its usual time after that:
 * when more checks are due than the cap allows, every backend is still
 * checked in turn, less often, and the forwarder keeps its descriptors.
 */
static struct {
	uint32_t running; /* checks started and not stopped */
	uint32_t inflight; /* checks holding a socket */
	uint32_t reserved; /* slots given to waiters whose timer is about to start them */
	struct hlb_check *head, *tail; /* waiting for a slot */
	uint64_t cap, read_ms;
} slots = { .cap = UINT64_MAX };

/*
 * The most sockets the checks may hold at once: one per check running, at
 * most the cap. The forwarder leaves them room under the connection cap it
 * derives from the fd limit (hlb_check_fds()), as HAProxy counts a
 * descriptor per checked server in its maxsock: the room is kept whether
 * the checks take it or not, so that neither a check nor a client finds
 * the descriptors gone. Counting only the checks in flight would leave the
 * forwarder the room of quick checks until backends turn silent, and then
 * its connections hold the descriptors the checks need.
 */
static _Atomic uint32_t check_fds;

static void fds_publish(void)
{
	uint64_t n = slots.running < slots.cap ? slots.running : slots.cap;

	atomic_store_explicit(&check_fds, (uint32_t)n, memory_order_relaxed);
}

const _Atomic uint32_t *hlb_check_fds(void)
{
	return &check_fds;
}

/* The cap, the limit read again if a second has passed. */
static uint64_t slots_cap(void)
{
	uint64_t now = hlb_now_ms(), cap = slots.cap;
	struct rlimit rl;

	if (!slots.read_ms || now - slots.read_ms >= 1000) {
		slots.read_ms = now;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
			cap = rl.rlim_cur / 4 > 16 ? rl.rlim_cur / 4 : 16;
		if (cap != slots.cap) {
			slots.cap = cap;
			fds_publish();
		}
	}
	return slots.cap;
}

static bool slots_full(void)
{
	return (uint64_t)slots.inflight + slots.reserved >= slots_cap();
}

static void wait_remove(struct hlb_check *c)
{
	if (!c->waiting)
		return;
	if (c->wait_prev)
		c->wait_prev->wait_next = c->wait_next;
	else
		slots.head = c->wait_next;
	if (c->wait_next)
		c->wait_next->wait_prev = c->wait_prev;
	else
		slots.tail = c->wait_prev;
	c->wait_prev = c->wait_next = NULL;
	c->waiting = false;
}

static void wait_append(struct hlb_check *c)
{
	c->wait_prev = slots.tail;
	c->wait_next = NULL;
	if (slots.tail)
		slots.tail->wait_next = c;
	else
		slots.head = c;
	slots.tail = c;
	c->waiting = true;
}

/* Slots are free: the first waiters get them, each started by its timer now. */
static void wake_waiters(void)
{
	struct hlb_check *w;

	while ((w = slots.head) && !slots_full()) {
		wait_remove(w);
		w->reserved = true;
		slots.reserved++;
		hlb_timer_arm(w->loop, &w->timer, hlb_now_ms());
	}
}

static void reservation_drop(struct hlb_check *c)
{
	if (c->reserved) {
		c->reserved = false;
		slots.reserved--;
	}
}

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

int hlb_check_set_payload(struct hlb_check *c, const void *send, uint32_t send_len,
			  const void *expect, uint32_t expect_len)
{
	uint8_t *s = NULL, *e = NULL;

	if (send_len && !(s = malloc(send_len)))
		return -ENOMEM;
	if (expect_len && !(e = malloc(expect_len))) {
		free(s);
		return -ENOMEM;
	}
	if (s)
		memcpy(s, send, send_len);
	if (e)
		memcpy(e, expect, expect_len);
	free(c->send);
	free(c->expect);
	c->send = s;
	c->send_len = send_len;
	c->expect = e;
	c->expect_len = expect_len;
	return 0;
}

/*
 * Closed with RST (SO_LINGER 0), not FIN: the side that closes first with
 * FIN holds the connection in TIME_WAIT for 60 s, and a check is one
 * connection an interval (6,000 a minute per backend at 10 ms, each
 * holding a port of the 28,000 toward that backend). HAProxy's checks do
 * the same, but close with FIN when they passed with the last word (the
 * PROXY header or a <send> that no answer follows): a server that reads
 * the connection's last bytes and then a reset logs every check as a
 * broken connection (Postfix did, haproxy#187), which the header is sent
 * to spare it. So do we. A connect-only check, one whose answer came and
 * one that failed are over with nothing the backend still has to read.
 */
static void check_close(struct hlb_check *c)
{
	struct linger rst = { .l_onoff = 1, .l_linger = 0 };
	bool fin = c->fin;

	c->connected = c->spoke = c->fin = false;
	c->got = 0;
	if (c->io.fd < 0)
		return;
	hlb_loop_del(c->loop, &c->io);
	if (!fin)
		(void)setsockopt(c->io.fd, SOL_SOCKET, SO_LINGER, &rst, sizeof(rst));
	close(c->io.fd);
	c->io.fd = -1;
	slots.inflight--;
	wake_waiters();
}

/*
 * Close the check in flight and schedule the next one: the next slot of the
 * cadence after the one just made (<next_ms>), at once if that slot has
 * begun. A check of a silent backend takes its whole timeout, which may be
 * the interval (the default below 1 s): it ends as its next slot begins, a
 * little after, and skipping that slot checked such a backend every other
 * interval, taking it down in 2 x fall x interval. Slots wholly past (a
 * check that waited for a descriptor slot, a stalled loop) are skipped: no
 * burst of checks to catch up.
 */
static void check_next(struct hlb_check *c)
{
	uint64_t now = hlb_now_ms();

	check_close(c);
	c->next_ms += c->interval_ms;
	while (c->next_ms + c->interval_ms <= now)
		c->next_ms += c->interval_ms;
	hlb_timer_arm(c->loop, &c->timer, c->next_ms > now ? c->next_ms : now);
}

/* Not made, for a fault of ours: no result, the next one at its time; then say so. */
static void check_skip(struct hlb_check *c, enum hlb_check_skip at, int err)
{
	check_next(c);
	if (c->skipped)
		c->skipped(c->arg, at, err);
}

const char *hlb_check_skip_name(enum hlb_check_skip at)
{
	static const char *const names[HLB_CHECK_SKIP_MAX] = {
		[HLB_CHECK_SKIP_SOCKET] = "socket",
		[HLB_CHECK_SKIP_SOURCE] = "source",
		[HLB_CHECK_SKIP_CONNECT] = "connect",
		[HLB_CHECK_SKIP_WATCH] = "watch",
	};

	return (unsigned)at < HLB_CHECK_SKIP_MAX ? names[at] : "?";
}

const char *hlb_check_at_name(enum hlb_check_at at)
{
	static const char *const names[HLB_CHECK_AT_MAX] = {
		[HLB_CHECK_AT_CONNECT] = "connect",
		[HLB_CHECK_AT_SEND] = "send",
		[HLB_CHECK_AT_REPLY] = "reply",
	};

	return (unsigned)at < HLB_CHECK_AT_MAX ? names[at] : "?";
}

/* ... then report the result. */
static void check_finish(struct hlb_check *c, bool ok)
{
	uint64_t lat = hlb_now_ns() - c->started_ns;

	c->fin = ok && c->spoke && !c->expect_len;
	check_next(c);
	c->done(c->arg, ok, lat);
}

/* Failed at <at> with errno <err>: reported as check_finish() does. */
static void check_fail(struct hlb_check *c, enum hlb_check_at at, int err)
{
	c->failed_at = at;
	c->failed_err = err;
	check_finish(c, false);
}

/* 0 if send() of <len> bytes wrote them all, else its errno (EAGAIN: a short write). */
static int check_send_all(struct hlb_check *c, const void *buf, size_t len)
{
	ssize_t n = send(c->io.fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);

	return n == (ssize_t)len ? 0 : n < 0 ? errno : EAGAIN;
}

/*
 * Connected: the PROXY header (a courtesy to the backend when it is all
 * the check sends), then the payload. Both go into an empty socket buffer
 * (at most HLB_PROXY_HDR_MAX + 1 KiB): a short write is a failure. 0, or
 * the errno of the send that failed.
 */
static int check_send(struct hlb_check *c)
{
	uint8_t hdr[HLB_PROXY_HDR_MAX];
	int n = c->proxy ? hlb_proxy_local_header(c->proxy, hdr) : 0, err;

	bool payload = c->send_len || c->expect_len;

	/* a header that does not go out fails only a check that exchanges more */
	if (n > 0 && (err = check_send_all(c, hdr, (size_t)n)) && payload)
		return err;
	c->spoke = n > 0;
	if (!c->send_len)
		return 0;
	c->spoke = true;
	return check_send_all(c, c->send, c->send_len);
}

/* c->reply: the <got> bytes of <expect> that matched, then <buf>'s <n>. */
static void check_reply_keep(struct hlb_check *c, const uint8_t *buf, size_t n)
{
	size_t o = 0;

	for (; o < c->got + n && o < HLB_CHECK_REPLY_MAX; o++)
		c->reply[o] = o < c->got ? c->expect[o] : buf[o - c->got];
	c->reply_len = (uint32_t)o;
}

int hlb_check_reply(struct hlb_check *c, const void *buf, size_t n)
{
	size_t want = c->expect_len - c->got;

	if (n > want)
		n = want; /* what follows <expect> is the backend's own */
	if (want && (n == 0 || memcmp(buf, c->expect + c->got, n) != 0)) {
		check_reply_keep(c, buf, n);
		return -1;
	}
	c->got += (uint32_t)n;
	return c->got == c->expect_len ? 1 : 0;
}

/*
 * The reply so far: 1 when it holds all of <expect>, 0 for more; -EBADMSG if
 * it differs, -ENODATA if it ended short, -errno if the recv failed.
 */
static int check_read(struct hlb_check *c)
{
	uint8_t buf[1024];
	ssize_t n;
	int r;

	while (c->got < c->expect_len) {
		size_t want = c->expect_len - c->got;

		n = recv(c->io.fd, buf, want < sizeof(buf) ? want : sizeof(buf), MSG_DONTWAIT);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		r = hlb_check_reply(c, buf, (size_t)n);
		if (r < 0)
			return n ? -EBADMSG : -ENODATA;
		if (r > 0)
			return r;
	}
	return 1;
}

/*
 * The connect succeeded: send, then wait for the reply if one is expected.
 * The timer armed at the start bounds the reply, unless the connect is seen
 * only past that deadline: the control thread was busy (a reload, a large
 * /metrics, more events than one epoll_wait() batch), and the payload goes
 * out only now. The backend then had no time to answer, whether it was
 * asked or speaks first, so the answer gets the timeout again from here:
 * the loop's delay is not the backend's.
 */
static void check_connected(struct hlb_check *c)
{
	uint64_t now = hlb_now_ms();
	int err;

	c->connected = true;
	if ((err = check_send(c))) {
		check_fail(c, HLB_CHECK_AT_SEND, err);
		return;
	}
	if (!c->expect_len) {
		check_finish(c, true);
		return;
	}
	if ((err = hlb_loop_mod(c->loop, &c->io, EPOLLIN | EPOLLRDHUP)) < 0) {
		check_fail(c, HLB_CHECK_AT_REPLY, -err);
		return;
	}
	if (now >= c->started_ns / 1000000 + c->timeout_ms)
		hlb_timer_arm(c->loop, &c->timer, now + c->timeout_ms);
}

static void check_io(void *arg, uint32_t events)
{
	struct hlb_check *c = arg;
	int err = 0, r;
	socklen_t len = sizeof(err);

	if (c->connected) {
		r = check_read(c);
		if (r > 0)
			check_finish(c, true);
		else if (r < 0)
			check_fail(c, HLB_CHECK_AT_REPLY, -r);
		return;
	}
	if (getsockopt(c->io.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (!err && (events & (EPOLLERR | EPOLLHUP)))
		err = ECONNREFUSED;
	if (err) {
		check_fail(c, HLB_CHECK_AT_CONNECT, err);
		return;
	}
	check_connected(c);
}

static void check_open(struct hlb_check *c)
{
	int fd, r;

	if (c->reserved) {
		reservation_drop(c); /* its slot, kept for it since one closed */
	} else if (slots_full()) {
		wait_append(c); /* started when a check in flight ends */
		return;
	}
	c->started_ns = hlb_now_ns();
	fd = socket(c->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		if (hlb_local_error(errno)) /* skipped, not failed */
			check_skip(c, HLB_CHECK_SKIP_SOCKET, errno);
		else
			check_fail(c, HLB_CHECK_AT_CONNECT, errno);
		return;
	}
	c->io.fd = fd;
	slots.inflight++;
	c->io.fn = check_io;
	c->io.arg = c;
	/* the source address is gone: ours to fix, not the backend's */
	if (c->source_len && (r = hlb_bind_source(fd, &c->source, c->source_len)) < 0) {
		check_skip(c, HLB_CHECK_SKIP_SOURCE, -r);
		return;
	}
	if (connect(fd, (struct sockaddr *)&c->addr, c->addr_len) == 0) {
		/* at once (loopback); the reply, if awaited, needs the loop */
		if (c->expect_len && (r = hlb_loop_add(c->loop, &c->io, EPOLLOUT)) < 0) {
			check_skip(c, HLB_CHECK_SKIP_WATCH, -r);
			return;
		}
		hlb_timer_arm(c->loop, &c->timer, c->started_ns / 1000000 + c->timeout_ms);
		check_connected(c);
		return;
	}
	if (errno != EINPROGRESS) {
		if (hlb_local_error(errno)) /* skipped, not failed */
			check_skip(c, HLB_CHECK_SKIP_CONNECT, errno);
		else
			check_fail(c, HLB_CHECK_AT_CONNECT, errno);
		return;
	}
	if ((r = hlb_loop_add(c->loop, &c->io, EPOLLOUT)) < 0) {
		check_skip(c, HLB_CHECK_SKIP_WATCH, -r);
		return;
	}
	hlb_timer_arm(c->loop, &c->timer, c->started_ns / 1000000 + c->timeout_ms);
}

/*
 * The check in flight reached its deadline. The loop runs the timers due
 * after the I/O of one epoll_wait() batch (64 events), and late when the
 * control thread was busy (a large /metrics, a reload) or not scheduled:
 * an answer the socket holds already may not have been read yet. So look
 * at the socket once before failing the check: what arrived in time (or
 * in the loop's own delay) is not the backend's timeout.
 */
static void check_deadline(struct hlb_check *c)
{
	struct pollfd p = { .fd = c->io.fd, .events = c->connected ? POLLIN | POLLRDHUP : POLLOUT };
	bool connecting = !c->connected;

	if (poll(&p, 1, 0) == 1 && p.revents) {
		check_io(c, (uint32_t)p.revents); /* poll's bits are epoll's */
		if (c->io.fd < 0)
			return; /* decided: passed, or failed by what the socket says */
		if (connecting && c->connected)
			return; /* connected in time: the answer has its own deadline */
	}
	/* timed out: its connect, or the answer */
	check_fail(c, c->connected ? HLB_CHECK_AT_REPLY : HLB_CHECK_AT_CONNECT, ETIMEDOUT);
}

/* Start the check due, or queue it for a slot. */
static void check_begin(struct hlb_check *c)
{
	check_open(c);
	if (c->io.fd < 0 && !c->waiting)
		wake_waiters(); /* a slot it was given and did not use (no fd, no source) */
}

static void check_timer(void *arg)
{
	struct hlb_check *c = arg;

	if (c->io.fd >= 0)
		check_deadline(c);
	else
		check_begin(c);
}

int hlb_check_start(struct hlb_check *c, struct hlb_loop *l, uint64_t first_ms)
{
	if (!c->loop) {
		slots.running++;
		slots_cap();
		fds_publish();
	}
	c->loop = l;
	c->next_ms = first_ms;
	hlb_timer_init(&c->timer, check_timer, c);
	return hlb_timer_arm(l, &c->timer, first_ms);
}

void hlb_check_retime(struct hlb_check *c, uint32_t interval_ms, uint32_t timeout_ms,
		      uint64_t first_ms)
{
	c->interval_ms = interval_ms ? interval_ms : 1;
	c->timeout_ms = timeout_ms ? timeout_ms : 1;
	if (!c->loop || hlb_check_busy(c))
		return;
	c->next_ms = first_ms;
	hlb_timer_arm(c->loop, &c->timer, first_ms);
}

void hlb_check_stop(struct hlb_check *c)
{
	free(c->send);
	free(c->expect);
	c->send = c->expect = NULL;
	c->send_len = c->expect_len = 0;
	if (!c->loop)
		return;
	hlb_timer_cancel(c->loop, &c->timer);
	wait_remove(c);
	reservation_drop(c);
	check_close(c);
	wake_waiters();
	c->loop = NULL;
	slots.running--;
	fds_publish();
}
