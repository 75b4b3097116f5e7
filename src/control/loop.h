/* SPDX-License-Identifier: MIT */
/*
 * The control thread's event loop: fd callbacks and millisecond timers over
 * one epoll fd. Timers live in a min-heap and arm one timerfd, so the whole
 * loop is a single pollable fd (hlb_loop_fd()): it runs on its own with
 * hlb_loop_run_once(), or nests in another loop (an io_uring poll, a parent
 * epoll) that calls hlb_loop_run_once(l, 0) when the fd is readable. Nothing
 * here is thread-safe: one loop, one thread.
 */
#ifndef HLB_CONTROL_LOOP_H
#define HLB_CONTROL_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hlb_loop;

typedef void (*hlb_io_fn)(void *arg, uint32_t events);
typedef void (*hlb_timer_fn)(void *arg);

/* A registered fd; owned by the caller, which keeps it alive while registered. */
struct hlb_io {
	int fd;
	hlb_io_fn fn;
	void *arg;
};

/* A timer; owned by the caller. Zero-initialise, then hlb_timer_init(). */
struct hlb_timer {
	uint64_t when_ms; /* CLOCK_MONOTONIC milliseconds */
	size_t heap_idx; /* SIZE_MAX when not armed */
	hlb_timer_fn fn;
	void *arg;
};

/* CLOCK_MONOTONIC in milliseconds and nanoseconds. */
uint64_t hlb_now_ms(void);
uint64_t hlb_now_ns(void);

int hlb_loop_new(struct hlb_loop **ret_loop);
/* Accepts NULL. Registered fds are not closed: their owners close them. */
void hlb_loop_free(struct hlb_loop *l);
/* The epoll fd: readable when an fd or a timer is due. */
int hlb_loop_fd(const struct hlb_loop *l);

/* Register <io> for <events> (EPOLLIN...). Returns 0 or -errno. */
int hlb_loop_add(struct hlb_loop *l, struct hlb_io *io, uint32_t events);
int hlb_loop_mod(struct hlb_loop *l, struct hlb_io *io, uint32_t events);
/* Unregister before closing io->fd. Accepts an unregistered io. */
void hlb_loop_del(struct hlb_loop *l, struct hlb_io *io);

void hlb_timer_init(struct hlb_timer *t, hlb_timer_fn fn, void *arg);
/* (Re)arm <t> to fire once at <when_ms>. Returns 0 or -ENOMEM. */
int hlb_timer_arm(struct hlb_loop *l, struct hlb_timer *t, uint64_t when_ms);
void hlb_timer_cancel(struct hlb_loop *l, struct hlb_timer *t);
static inline bool hlb_timer_armed(const struct hlb_timer *t)
{
	return t->heap_idx != SIZE_MAX;
}

/*
 * Wait up to <timeout_ms> (-1: forever, 0: do not block) for events, run
 * their callbacks, then run every due timer. Returns the number of events
 * and timers handled or -errno (-EINTR is returned as 0).
 */
int hlb_loop_run_once(struct hlb_loop *l, int timeout_ms);

/* The times hlb_loop_run_once() ran: a loop woken at once again and again spins. */
uint64_t hlb_loop_turns(const struct hlb_loop *l);

#endif
