// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "hashlb/grow.h"
#include "loop.h"

struct hlb_loop {
	int epfd;
	struct hlb_io tio; /* the timerfd */
	uint64_t armed_ms; /* what the timerfd is set to; 0 = disarmed */
	struct hlb_timer **heap;
	size_t n, cap;
	/* The batch being dispatched: a callback may unregister (and free)
	 * another io whose event is still ahead in it, see hlb_loop_del(). */
	struct epoll_event batch[64];
	int batch_n, batch_i;
	uint64_t turns; /* hlb_loop_run_once() calls */
};

uint64_t hlb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t hlb_now_ms(void)
{
	return hlb_now_ns() / 1000000ull;
}

static void timerfd_drain(void *arg, uint32_t events)
{
	struct hlb_loop *l = arg;
	uint64_t n;

	(void)events;
	if (read(l->tio.fd, &n, sizeof(n)) < 0)
		return;
	l->armed_ms = 0;
}

int hlb_loop_new(struct hlb_loop **ret_loop)
{
	struct hlb_loop *l = calloc(1, sizeof(*l));
	int ret;

	if (!l)
		return -ENOMEM;
	l->tio.fd = -1;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		ret = -errno;
		goto err_free;
	}
	l->tio.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (l->tio.fd < 0) {
		ret = -errno;
		goto err_free;
	}
	l->tio.fn = timerfd_drain;
	l->tio.arg = l;
	ret = hlb_loop_add(l, &l->tio, EPOLLIN);
	if (ret < 0)
		goto err_free;
	*ret_loop = l;
	return 0;

err_free:
	hlb_loop_free(l);
	return ret;
}

void hlb_loop_free(struct hlb_loop *l)
{
	if (!l)
		return;
	if (l->tio.fd >= 0)
		close(l->tio.fd);
	if (l->epfd >= 0)
		close(l->epfd);
	free(l->heap);
	free(l);
}

int hlb_loop_fd(const struct hlb_loop *l)
{
	return l->epfd;
}

static int loop_ctl(struct hlb_loop *l, int op, struct hlb_io *io, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = io };

	if (epoll_ctl(l->epfd, op, io->fd, &ev) < 0)
		return -errno;
	return 0;
}

int hlb_loop_add(struct hlb_loop *l, struct hlb_io *io, uint32_t events)
{
	return loop_ctl(l, EPOLL_CTL_ADD, io, events);
}

int hlb_loop_mod(struct hlb_loop *l, struct hlb_io *io, uint32_t events)
{
	return loop_ctl(l, EPOLL_CTL_MOD, io, events);
}

void hlb_loop_del(struct hlb_loop *l, struct hlb_io *io)
{
	for (int i = l->batch_i + 1; i < l->batch_n; i++)
		if (l->batch[i].data.ptr == io)
			l->batch[i].data.ptr = NULL;
	if (io->fd >= 0)
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, io->fd, NULL);
}

void hlb_timer_init(struct hlb_timer *t, hlb_timer_fn fn, void *arg)
{
	t->when_ms = 0;
	t->heap_idx = SIZE_MAX;
	t->fn = fn;
	t->arg = arg;
}

static void heap_set(struct hlb_loop *l, size_t i, struct hlb_timer *t)
{
	l->heap[i] = t;
	t->heap_idx = i;
}

static void heap_up(struct hlb_loop *l, size_t i)
{
	struct hlb_timer *t = l->heap[i];

	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (l->heap[p]->when_ms <= t->when_ms)
			break;
		heap_set(l, i, l->heap[p]);
		i = p;
	}
	heap_set(l, i, t);
}

static void heap_down(struct hlb_loop *l, size_t i)
{
	struct hlb_timer *t = l->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= l->n)
			break;
		if (c + 1 < l->n && l->heap[c + 1]->when_ms < l->heap[c]->when_ms)
			c++;
		if (t->when_ms <= l->heap[c]->when_ms)
			break;
		heap_set(l, i, l->heap[c]);
		i = c;
	}
	heap_set(l, i, t);
}

/* Point the timerfd at the earliest timer; the kernel wakes epoll then. */
static void timerfd_sync(struct hlb_loop *l)
{
	struct itimerspec its = { 0 };
	uint64_t when;

	if (!l->n) {
		if (l->armed_ms) {
			timerfd_settime(l->tio.fd, TFD_TIMER_ABSTIME, &its, NULL);
			l->armed_ms = 0;
		}
		return;
	}
	when = l->heap[0]->when_ms;
	if (when == 0)
		when = 1; /* 0 would disarm */
	if (l->armed_ms == when)
		return;
	its.it_value.tv_sec = when / 1000;
	its.it_value.tv_nsec = (when % 1000) * 1000000;
	timerfd_settime(l->tio.fd, TFD_TIMER_ABSTIME, &its, NULL);
	l->armed_ms = when;
}

int hlb_timer_arm(struct hlb_loop *l, struct hlb_timer *t, uint64_t when_ms)
{
	if (hlb_timer_armed(t)) {
		uint64_t old = t->when_ms;

		t->when_ms = when_ms;
		if (when_ms < old)
			heap_up(l, t->heap_idx);
		else
			heap_down(l, t->heap_idx);
		timerfd_sync(l);
		return 0;
	}
	if (hlb_grow((void **)&l->heap, &l->cap, l->n + 1, sizeof(*l->heap), 64) < 0)
		return -ENOMEM;
	t->when_ms = when_ms;
	l->heap[l->n] = t;
	t->heap_idx = l->n++;
	heap_up(l, t->heap_idx);
	timerfd_sync(l);
	return 0;
}

void hlb_timer_cancel(struct hlb_loop *l, struct hlb_timer *t)
{
	size_t i = t->heap_idx;

	if (i == SIZE_MAX)
		return;
	t->heap_idx = SIZE_MAX;
	l->n--;
	if (i != l->n) {
		struct hlb_timer *last = l->heap[l->n];

		heap_set(l, i, last);
		heap_up(l, i);
		heap_down(l, last->heap_idx);
	}
	timerfd_sync(l);
}

uint64_t hlb_loop_turns(const struct hlb_loop *l)
{
	return l->turns;
}

int hlb_loop_run_once(struct hlb_loop *l, int timeout_ms)
{
	uint64_t now;
	int n, handled;

	l->turns++;
	n = epoll_wait(l->epfd, l->batch, 64, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	l->batch_n = n;
	for (l->batch_i = 0; l->batch_i < n; l->batch_i++) {
		struct hlb_io *io = l->batch[l->batch_i].data.ptr;

		if (io)
			io->fn(io->arg, l->batch[l->batch_i].events);
	}
	l->batch_n = l->batch_i = 0;
	handled = n;
	/* A callback may arm or cancel timers, so take them one at a time. */
	now = hlb_now_ms();
	while (l->n && l->heap[0]->when_ms <= now) {
		struct hlb_timer *t = l->heap[0];

		hlb_timer_cancel(l, t);
		t->fn(t->arg);
		handled++;
	}
	timerfd_sync(l);
	return handled;
}
