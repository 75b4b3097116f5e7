// SPDX-License-Identifier: MIT
/*
 * A worker thread: one io_uring (single issuer, deferred task work), one
 * provided-buffer ring, its own SO_REUSEPORT socket per listener with a
 * multishot accept on each, and the connections it accepted. The control
 * thread talks to it through a command queue and an eventfd the ring reads.
 *
 * Each loop turn submits everything queued and waits for at least one CQE
 * in a single io_uring_enter(), then handles every CQE there is. While it
 * waits, the worker is offline for RCU; it holds snapshot pointers only
 * while it handles CQEs.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hashlb/grow.h"
#include "log.h"
#include "worker.h"

#define TICK_MS 100
#define ACCEPT_PAUSE_MS 100
/* Connection log lines held between two flushes: ~1000 lines of 250 bytes. */
#define LOG_BUF_SIZE (256 * 1024)
/* At exit, how long the last lines may wait for stderr's reader. */
#define LOG_EXIT_WAIT_MS 1000

/*
 * The worker's clock, w->now_ms: CLOCK_MONOTONIC, read once a turn (a vDSO read, some 20 ns).
 * It was CLOCK_MONOTONIC_COARSE, up to a jiffy behind (4 ms at HZ=250) by the time it was
 * read, and by a different lag at each read: an activity stamped by a lagging read and a
 * scan by a fresh one closed connections up to a jiffy before their idle timeout.
 */
static uint64_t clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Completions the CQ had no room for (more completed between two reaps than
 * it holds) wait in the kernel's overflow list (IORING_FEAT_NODROP), which
 * the next io_uring_enter() flushes: count each time the worker is about to
 * enter with some waiting. Completions lost for want of memory for that
 * list are the ring's own count (cq_dropped, read at each tick).
 */
static void worker_cq_check(struct worker *w)
{
	if (IO_URING_READ_ONCE(*w->ring.sq.kflags) & IORING_SQ_CQ_OVERFLOW)
		hlb_stat_add(&w->pub.cq_overflows, 1);
}

void worker_submit_now(struct worker *w)
{
	bufring_refill(w); /* the submit may fill buffers */
	worker_cq_check(w);
	io_uring_submit(&w->ring);
}

struct io_uring_sqe *worker_sqe(struct worker *w)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(&w->ring)))
		worker_submit_now(w);
	return sqe;
}

#if defined(__SANITIZE_THREAD__)
#define WORKER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WORKER_TSAN 1
#endif
#endif

#ifdef WORKER_TSAN
/* <sanitizer/linux_syscall_hooks.h>'s __sanitizer_syscall_pre_close(),
 * declared here: GCC does not install that header. */
void __sanitizer_syscall_pre_impl_close(long fd);
#endif

void worker_close_fd(struct worker *w, int fd)
{
	struct io_uring_sqe *sqe;

	if (w->ring_gone) {
		close(fd);
		return;
	}
	sqe = worker_sqe(w);

#ifdef WORKER_TSAN
	/* ThreadSanitizer tracks descriptors through the close() it
	 * intercepts and never sees this one: the descriptor's next owner
	 * (another worker's socket(), the control thread's open()) would read
	 * as a race with this worker's socket(). Tell it the fd is closed. */
	__sanitizer_syscall_pre_impl_close(fd);
#endif
	io_uring_prep_close(sqe, fd);
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, 0);
}

/* The max_connection_rate of <wl>'s service now, 0 for none. */
static uint32_t wl_rate(const struct wlistener *wl)
{
	struct hlb_service *svc = atomic_load_explicit(&wl->l->svc, memory_order_acquire);
	const struct hlb_snapshot *snap = svc ? hlb_service_snapshot(svc) : NULL;

	return snap ? snap->max_conn_rate : 0;
}

/* The connection cap with <n_wl> listener sockets (0: none): see
 * hlb_proxy_set_max_connections(). */
static uint64_t proxy_cap_with(const struct hlb_proxy *p, uint64_t n_wl)
{
	uint64_t socks;

	if (!p->max_conns || !p->cap_fds)
		return p->max_conns;
	socks = (3 * n_wl + atomic_load_explicit(p->other_fds, memory_order_relaxed) +
		 atomic_load_explicit(&p->n_inh_fds, memory_order_relaxed) + 1) /
		2;
	return p->max_conns > socks ? p->max_conns - socks : 1;
}

/* The connection cap now (0: none). */
static uint64_t proxy_cap(const struct hlb_proxy *p)
{
	return proxy_cap_with(p, atomic_load_explicit(&p->n_wlisteners, memory_order_relaxed));
}

/* How many more connections the process's cap lets in now (UINT64_MAX: no cap). The clients
 * an upgrade handed to a worker that has not read them yet count as connections already, as
 * the control thread counts them (queued_line()): else a worker accepts over the cap the
 * room they hold, and they run over it once read. */
static uint64_t cap_room(const struct worker *w)
{
	uint64_t cap = proxy_cap(w->proxy), n;

	if (!cap)
		return UINT64_MAX;
	n = hlb_proxy_connections_adopting(w->proxy);
	if (w->proxy->cap_fds) /* a splice pipe's two descriptors: one connection's */
		for (uint32_t i = 0; i < w->proxy->n_workers; i++)
			n += atomic_load_explicit(&w->proxy->workers[i].pub.pipes,
						  memory_order_relaxed);
	return n < cap ? cap - n : 0;
}

bool worker_pipe_room(const struct worker *w)
{
	return !w->proxy->cap_fds || cap_room(w) > 0;
}

/*
 * Whether the cap leaves room for multishot accepts: one takes a whole
 * backlog before the worker sees the first, and every listener of every
 * worker may do so at once (an idle service's too, while the others filled
 * the room), so the room must hold a backlog for each.
 */
static bool cap_multishot(const struct worker *w)
{
	uint64_t room = cap_room(w);

	return room == UINT64_MAX ||
	       room / w->proxy->n_workers > (uint64_t)w->n_listeners * (LISTEN_BACKLOG + 1);
}

static void accept_arm(struct worker *w, struct wlistener *wl)
{
	struct io_uring_sqe *sqe = worker_sqe(w);

	/* A multishot accept takes the whole backlog at once; under a rate
	 * limit, or near the cap, one at a time, so that a pause leaves the
	 * rest waiting there. */
	wl->multishot = !wl_rate(wl) && cap_multishot(w);
	if (wl->multishot)
		io_uring_prep_multishot_accept(sqe, wl->fd, NULL, NULL, SOCK_CLOEXEC);
	else
		io_uring_prep_accept(sqe, wl->fd, NULL, NULL, SOCK_CLOEXEC);
	wl->cancelled = false;
	io_uring_sqe_set_data64(sqe, ud_make(wl, OP_ACCEPT));
	wl->armed = true;
	wl->paused = false;
}

/*
 * A listener a reload removed (moved, say, from 127.0.0.1:P to 0.0.0.0:P), or
 * closed by a stop of the process that holds it alone (hlb_proxy_drain()):
 * serve the clients waiting in its backlog, whom closing it would reset.
 * Its socket is this worker's alone (SO_REUSEPORT), so a non-blocking
 * accept empties it; not one the service manager passed (or an upgrade in
 * place handed on: inherited too), which stays open there with its backlog,
 * shared by every worker, for the next start. A shared one taken over and not
 * used (listener_on_taken()) is emptied too, on purpose: nothing else in this
 * process accepts on it then.
 */
static void wlistener_serve_backlog(struct worker *w, struct wlistener *wl)
{
	int flags = fcntl(wl->fd, F_GETFL), fd;

	if (wl->l->inherited || flags < 0 || fcntl(wl->fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return;
	while ((fd = accept4(wl->fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		conn_accepted(w, wl, fd);
}

/* Close listener <l>'s socket <i>, one a worker never took (or gives back untaken): -1 first,
 * as wlistener_drop() does. */
static void listener_fd_close(struct hlb_listener *l, uint32_t i)
{
	int fd = l->fds[i];

	if (fd < 0)
		return;
	__atomic_store_n(&l->fds[i], -1, __ATOMIC_RELEASE);
	close(fd);
}

/* The worker is done with <wl>: serve its backlog if it says so (wl->serve_backlog), close its
 * socket, drop its reference. */
static void wlistener_drop(struct worker *w, struct wlistener *wl)
{
	struct wlistener **pp;

	if (wl->serve_backlog)
		wlistener_serve_backlog(w, wl);

	for (pp = &w->listeners; *pp; pp = &(*pp)->next)
		if (*pp == wl) {
			*pp = wl->next;
			break;
		}
	w->n_listeners--;
	atomic_fetch_sub_explicit(&w->proxy->n_wlisteners, 1, memory_order_relaxed);
	/* -1 before the close: the control thread reads fds[] to hand the
	 * sockets over (hlb_listener_fds()), and must not pass on a closed one */
	__atomic_store_n(&wl->l->fds[wl->idx], -1, __ATOMIC_RELEASE);
	close(wl->fd);
	hlb_listener_unref(wl->l);
	free(wl);
}

/* End <wl>'s accept in flight; accept_cqe() then re-arms it, unless paused or closing. */
static void accept_cancel(struct worker *w, struct wlistener *wl)
{
	struct io_uring_sqe *sqe;

	if (!wl->armed || wl->cancelled)
		return;
	wl->cancelled = true;
	sqe = worker_sqe(w);
	io_uring_prep_cancel64(sqe, ud_make(wl, OP_ACCEPT), 0);
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, 0);
}

static void wlistener_close(struct worker *w, struct wlistener *wl)
{
	if (wl->closing)
		return;
	wl->closing = true;
	if (!wl->armed)
		wlistener_drop(w, wl);
	else
		accept_cancel(w, wl);
}

/* Set the tick's timespec (read at the submission) to <ms> from now. */
static void tick_set(struct worker *w, uint64_t ms)
{
	w->tick_ts.tv_sec = (long long)(ms / 1000);
	w->tick_ts.tv_nsec = (long long)(ms % 1000) * 1000000LL;
	w->tick_at = w->now_ms + ms;
}

/* The pending tick fires in <ms>. If it fired already (its completion not handled yet), the
 * update finds none; then the completion arms the next (tick_arm(): a paused listener's
 * pace) and sets queue_tick, whose look at the queue brings it forward (worker_tick_by()). */
static void tick_update(struct worker *w, uint64_t ms)
{
	struct io_uring_sqe *sqe = worker_sqe(w);

	tick_set(w, ms);
	io_uring_prep_timeout_update(sqe, &w->tick_ts, UD_TICK, 0);
	io_uring_sqe_set_data64(sqe, ud_make(NULL, OP_IGNORE));
}

/* The pending tick fires by <at_ms>: brought forward, never put back. */
void worker_tick_by(struct worker *w, uint64_t at_ms)
{
	if (at_ms < w->tick_at)
		tick_update(w, at_ms > w->now_ms ? at_ms - w->now_ms : 1);
}

/* The pending tick fires within QUEUE_RETRY_MS rather than TICK_MS (a queued client's
 * deadline nearer than that keeps it: each accept pause put it back 10 ms). */
static void tick_soon(struct worker *w)
{
	worker_tick_by(w, w->now_ms + QUEUE_RETRY_MS);
}

bool worker_accept_pause(struct worker *w, struct wlistener *wl, uint32_t ms, uint32_t rate)
{
	bool was = !wl->paused;

	if (wl->closing)
		return false;
	wl->paused = true;
	wl->resume_ms = w->now_ms + ms;
	wl->paused_rate = rate;
	if (!was)
		return false;
	accept_cancel(w, wl); /* one at a time: armed only between accepts */
	tick_soon(w);
	return true;
}

void worker_accept_single(struct worker *w, struct wlistener *wl)
{
	if (wl->multishot)
		accept_cancel(w, wl);
}

/*
 * After an accept on <wl>: at the connection cap it pauses (the tick looks
 * again every QUEUE_RETRY_MS), the clients waiting in its backlog; near the
 * cap every listener of the worker accepts one at a time (the tick does the
 * same for the other workers'). A pause for the rate stands: the tick
 * checks the cap before it accepts again.
 */
static void accept_cap(struct worker *w, struct wlistener *wl)
{
	if (!w->proxy->max_conns || wl->closing || wl->paused)
		return;
	if (cap_room(w)) {
		if (!cap_multishot(w))
			for (struct wlistener *l = w->listeners; l; l = l->next)
				if (!l->closing)
					worker_accept_single(w, l);
		return;
	}
	worker_accept_pause(w, wl, QUEUE_RETRY_MS, 0);
	hlb_stat_add(&w->pub.cap_pauses, 1);
	if (w->now_ms - w->last_cap_log > 10000) {
		w->last_cap_log = w->now_ms;
		hlb_log(HLB_LOG_WARN, "connection cap reached, accepts paused",
			"worker=%u max_connections=%" PRIu64, w->id, proxy_cap(w->proxy));
	}
}

static void accept_cqe(struct worker *w, struct wlistener *wl, const struct io_uring_cqe *cqe)
{
	int res = cqe->res;

	if (!(cqe->flags & IORING_CQE_F_MORE))
		wl->armed = false;
	if (res >= 0) {
		/* Even when the listener is closing (a stop, an upgrade, a reload
		 * that moved it): the kernel has established this connection
		 * with a client, closing it now would lose it. Served, and
		 * drained with the rest. */
		conn_accepted(w, wl, res);
		accept_cap(w, wl);
	} else if (res == -ECANCELED && wl->cancelled) {
		/* ended for a pause (the tick accepts again) or to accept one at a time */
	} else if (!wl->closing) {
		/* At the fd limit (EMFILE, ENFILE) or short of memory the
		 * connection stays in the backlog, and any other error may
		 * persist: retrying at once would spin. Pause this listener
		 * until the next tick after the pause. */
		hlb_stat_add(&w->pub.accept_errors, 1);
		if (res == -EMFILE || res == -ENFILE)
			hlb_stat_add(&w->pub.fd_limit, 1);
		if (w->now_ms - w->last_fd_limit_log > 10000) {
			struct hlb_service *svc =
				atomic_load_explicit(&wl->l->svc, memory_order_acquire);

			w->last_fd_limit_log = w->now_ms;
			hlb_log(HLB_LOG_WARN, "accept failed, pausing",
				"worker=%u addr=%s service=%s err=%s", w->id, wl->l->bound_name,
				svc ? svc->name : wl->l->name, strerrorname_np(-res));
		}
		if (!wl->armed) {
			wl->paused = true;
			wl->resume_ms = w->now_ms + ACCEPT_PAUSE_MS;
			wl->paused_rate = 0;
		}
	}
	if (!wl->armed) {
		if (wl->closing)
			wlistener_drop(w, wl);
		else if (!wl->paused)
			accept_arm(w, wl);
	}
}

static void wake_arm(struct worker *w)
{
	struct io_uring_sqe *sqe = worker_sqe(w);

	io_uring_prep_read(sqe, w->wake_fd, &w->wake_val, sizeof(w->wake_val), 0);
	io_uring_sqe_set_data64(sqe, UD_WAKE);
}

static void tick_arm(struct worker *w)
{
	struct io_uring_sqe *sqe = worker_sqe(w);
	bool paused = false;

	for (struct wlistener *wl = w->listeners; wl && !paused; wl = wl->next)
		paused = wl->paused && !wl->closing;
	/* faster while connections wait in a paused listener's backlog, for
	 * its rate; the queue's deadlines bring it forward (worker_tick_by()) */
	tick_set(w, paused ? QUEUE_RETRY_MS : TICK_MS);
	io_uring_prep_timeout(sqe, &w->tick_ts, 0, 0);
	io_uring_sqe_set_data64(sqe, UD_TICK);
}

/* The commands queued for <w>, taken off its queue (the caller's now). */
static struct cmd *cmd_take_all(struct worker *w)
{
	struct cmd *cmd;

	pthread_mutex_lock(&w->cmd_lock);
	cmd = w->cmd_head;
	w->cmd_head = NULL;
	w->cmd_tail = &w->cmd_head;
	pthread_mutex_unlock(&w->cmd_lock);
	return cmd;
}

static void worker_commands(struct worker *w)
{
	struct cmd *cmd, *next;
	struct wlistener *wl, *wnext;

	for (cmd = cmd_take_all(w); cmd; cmd = next) {
		next = cmd->next;
		switch (cmd->type) {
		case CMD_ADD:
			/* its socket, and any extra one it holds in turn (a reference each:
			 * the command's for the first) */
			listener_for_each_fd (cmd->l, w->id, i) {
				if (i != w->id)
					atomic_fetch_add(&cmd->l->refs, 1);
				wl = aligned_alloc(16, sizeof(*wl));
				if (!wl || w->draining) {
					/* cannot serve it: give its socket and reference back */
					free(wl);
					listener_fd_close(cmd->l, i);
					hlb_listener_unref(cmd->l);
					continue;
				}
				*wl = (struct wlistener){ .l = cmd->l,
							  .fd = cmd->l->fds[i],
							  .idx = i };
				wl->next = w->listeners;
				w->listeners = wl;
				w->n_listeners++;
				atomic_fetch_add_explicit(&w->proxy->n_wlisteners, 1,
							  memory_order_relaxed);
				accept_arm(w, wl);
			}
			break;
		case CMD_REMOVE:
			for (wl = w->listeners; wl; wl = wnext) {
				wnext = wl->next;
				if (wl->l == cmd->l) {
					/* a stop's drain closed it already, and
					 * said whether its backlog is served */
					wl->serve_backlog = !w->draining && !wl->closing;
					wlistener_close(w, wl);
				}
			}
			hlb_listener_unref(cmd->l);
			break;
		case CMD_DRAIN:
			/* A later drain may only shorten the deadline: a second
			 * SIGTERM/SIGINT drains with 0 ms, "close them at once".
			 * HASHLB_DRAIN_NEVER: none (UINT64_MAX). */
			if (!w->draining)
				w->drain_start = w->now_ms;
			if (!w->draining ||
			    hashlb_drain_end(w->now_ms, cmd->drain_ms) < w->drain_deadline) {
				w->drain_signalled = w->draining;
				w->draining = true;
				w->drain_deadline = hashlb_drain_end(w->now_ms, cmd->drain_ms);
			}
			for (wl = w->listeners; wl; wl = wnext) {
				wnext = wl->next;
				/* one a reload removed keeps its say */
				if (!wl->closing)
					wl->serve_backlog = cmd->serve_backlog;
				wlistener_close(w, wl);
			}
			break;
		case CMD_LEND:
			conn_queue_lend(w, cmd->gen);
			break;
		case CMD_LENT_END:
			conn_lent_end(w, cmd->gen, cmd->fates, cmd->n);
			free(cmd->fates);
			break;
		case CMD_ADOPT:
			conn_adopt(w, cmd->svc, cmd->fd, cmd->left_ms, cmd->waited_ms,
				   cmd->addrs ? cmd->addr : NULL);
			/* once its connection counts (conn_new()): always counted by one or the
			 * other */
			atomic_fetch_sub_explicit(&w->proxy->adopting, 1, memory_order_release);
			hlb_service_unref(cmd->svc);
			break;
		}
		free(cmd);
	}
}

/* Accept again on each socket taken over whose queue holds a connection (see TAKEOVER_*). */
static void takeover_check(struct worker *w)
{
	for (struct wlistener *wl = w->listeners; wl; wl = wl->next) {
		struct pollfd pfd = { .fd = wl->fd, .events = POLLIN };

		if (wl->l->n_taken && wl->armed && !wl->cancelled && !wl->closing &&
		    poll(&pfd, 1, 0) == 1)
			accept_cancel(w, wl); /* accept_cqe() arms it again */
	}
}

static void worker_tick(struct worker *w)
{
	unsigned epoch = atomic_load_explicit(&hlb_close_epoch, memory_order_acquire);
	unsigned takeover = atomic_load_explicit(&w->proxy->takeover, memory_order_acquire);

	if (w->now_ms >= w->ring_shrink_ms) {
		w->ring_shrink_ms = w->now_ms + 1000;
		bufring_shrink(w);
	}
	if (w->splice_after && w->now_ms >= w->pipe_look_ms)
		worker_pipe_look(w);
	atomic_store_explicit(&w->pub.bufs_out, w->bufs_out, memory_order_relaxed);
	atomic_store_explicit(&w->pub.starved, w->n_starved, memory_order_relaxed);
	atomic_store_explicit(&w->pub.spilled, w->spilled, memory_order_relaxed);
	atomic_store_explicit(&w->pub.cq_dropped, IO_URING_READ_ONCE(*w->ring.cq.koverflow),
			      memory_order_relaxed);
	if (takeover != TAKEOVER_NONE && !w->takeover_done) {
		takeover_check(w);
		w->takeover_done = takeover == TAKEOVER_OLD_GONE;
	}

	for (struct wlistener *wl = w->listeners; wl; wl = wl->next) {
		/* A pause for the rate ends early when a reload changed the rate:
		 * the next accept asks the new one how long to wait. */
		if (wl->paused && !wl->closing && !wl->armed &&
		    (w->now_ms >= wl->resume_ms ||
		     (wl->paused_rate && wl_rate(wl) != wl->paused_rate))) {
			if (cap_room(w))
				accept_arm(w, wl);
			else /* at the cap: its clients wait in the backlog */
				wl->resume_ms = w->now_ms + QUEUE_RETRY_MS;
		} else if (wl->armed && wl->multishot && (wl_rate(wl) || !cap_multishot(w)))
			accept_cancel(w,
				      wl); /* a reload set a rate, or near the cap: one at a time */
	}
	/* a backend's connections to close: look now, not at the next scan */
	if (w->now_ms >= w->next_idle_scan || w->draining || epoch != w->close_epoch) {
		uint64_t every = w->min_idle_ms / 4;

		w->close_epoch = epoch;
		if (every < TICK_MS)
			every = TICK_MS;
		if (every > 1000)
			every = 1000;
		w->next_idle_scan = w->now_ms + every;
		conn_idle_scan(w);
		hlb_stat_add(&w->pub.idle_scans, 1);
	}
}

static void worker_cqe(struct worker *w, const struct io_uring_cqe *cqe)
{
	uint64_t ud = io_uring_cqe_get_data64(cqe);
	enum op op = ud & OP_MASK;
	void *p = (void *)(uintptr_t)(ud & ~OP_MASK);

	switch (op) {
	case OP_IGNORE:
		break;
	case OP_ACCEPT:
		accept_cqe(w, p, cqe);
		break;
	case OP_WORKER:
		if (ud == UD_TICK) {
			w->queue_tick = w->queue_head != NULL; /* cleared by conn_queue_run() */
			worker_tick(w);
			if (!w->exiting)
				tick_arm(w);
		} else if (ud == UD_LOG) {
			/* a wake-up: the loop's next turn flushes (see log_poll_arm()) */
			hlb_stat_add(&w->pub.log_wakeups, 1);
			if (!(cqe->flags & IORING_CQE_F_MORE))
				w->log_poll = w->log_poll_cancelled = false;
		} else if (ud == UD_WAKE) {
			/* Cleared, then the fence that pairs with the kickers'
			 * (queue_wake()): what a kick that found it set changed
			 * is read by the look at the queue that follows. */
			atomic_store_explicit(&w->kick_pending, false, memory_order_relaxed);
			atomic_thread_fence(memory_order_seq_cst);
			w->queue_kick = true; /* commands, or a kick */
			worker_commands(w);
			wake_arm(w);
		}
		break;
	default:
		conn_cqe(w, p, op, cqe);
		break;
	}
}

static int worker_setup(struct worker *w)
{
	struct hlb_proxy *p = w->proxy;
	struct io_uring_params params = { 0 };
	int r;

	if (p->opts.pin_cpus) {
		cpu_set_t allowed, one;
		uint32_t seen = 0;

		if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
			for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
				if (!CPU_ISSET(cpu, &allowed))
					continue;
				if (seen++ == w->id % CPU_COUNT(&allowed)) {
					CPU_ZERO(&one);
					CPU_SET(cpu, &one);
					sched_setaffinity(0, sizeof(one), &one);
					break;
				}
			}
	}
	/* Single issuer + deferred task work: completions are processed only
	 * when this thread enters the kernel to wait, in a batch, without
	 * interrupting it (the ring is created by the thread that uses it). */
	params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
		       IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
	/* busy polling: the kernel flags the SQ ring when a deferred completion is queued */
	if (p->opts.busy_poll_us)
		params.flags |= IORING_SETUP_TASKRUN_FLAG;
	params.cq_entries = p->opts.ring_entries * 4;
	r = io_uring_queue_init_params(p->opts.ring_entries, &w->ring, &params);
	if (r == -EINVAL) {
		params = (struct io_uring_params){ .flags = IORING_SETUP_CQSIZE,
						   .cq_entries = p->opts.ring_entries * 4 };
		r = io_uring_queue_init_params(p->opts.ring_entries, &w->ring, &params);
	}
	if (r < 0)
		return r;
	r = bufring_setup(w);
	if (r < 0) {
		io_uring_queue_exit(&w->ring);
		return r;
	}
	/* malloc'ed, touched only as lines come: nothing resident when off */
	r = hlb_logbuf_init(&w->log, STDERR_FILENO, LOG_BUF_SIZE);
	if (r < 0) {
		bufring_free(w);
		io_uring_queue_exit(&w->ring);
		return r;
	}
	/* Every io_uring_enter() then skips the fd lookup; optional (5.18+). */
	io_uring_register_ring_fd(&w->ring);
	return 0;
}

/*
 * Lines left over because the reader of the pipe or socket is behind: wake
 * when stderr takes bytes again rather than at the next tick, so a backlog
 * drains at the reader's pace and a line begun is finished, and the output
 * lock released, as soon as the reader allows.
 *
 * A multishot poll, armed until the backlog is out (log_poll_stop()): io_uring's
 * poll reports POLLRDHUP whatever its mask, and journald shuts down its side
 * of stderr's stream socket (it never writes back), so a one-shot poll ended
 * at once, without room, each time it was armed: a worker at full CPU for as
 * long as lines waited. The multishot one reports that once, when armed, then
 * only the reader's wake-ups; its reports only wake the loop, whose flush
 * finds out whether there is room.
 */
static void log_poll_arm(struct worker *w)
{
	struct io_uring_sqe *sqe;

	if (w->log_poll || !w->log.wait_reader)
		return; /* another writer's turn: the tick retries (a poll would fire at once) */
	sqe = worker_sqe(w);
	io_uring_prep_poll_multishot(sqe, w->log.fd, POLLOUT);
	io_uring_sqe_set_data64(sqe, UD_LOG);
	w->log_poll = true;
}

/*
 * The backlog is out: the poll would wake the loop each time the reader
 * takes bytes. A cancel, not IORING_OP_POLL_REMOVE, which fails while a
 * wake-up is pending (see conn_finish()); its last CQE clears log_poll.
 */
static void log_poll_stop(struct worker *w)
{
	struct io_uring_sqe *sqe;

	if (w->log_poll_cancelled)
		return;
	sqe = worker_sqe(w);
	io_uring_prep_cancel64(sqe, UD_LOG, 0);
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, 0);
	w->log_poll_cancelled = true;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/*
 * Busy polling (--busy-poll): submit, then look for up to <us> microseconds
 * for a completion to arrive (IORING_SQ_TASKRUN: deferred work queued for
 * this task, which the wait then runs without sleeping). The wake-up it
 * saves costs the CPU that wakes us (an IPI, on a VM an exit) as much as it
 * costs us; the spin costs only us.
 */
static void busy_poll(struct worker *w, uint32_t us)
{
	uint32_t start;

	io_uring_submit(&w->ring);
	start = worker_clock_us();
	do {
		for (int i = 0; i < 32; i++) {
			if (io_uring_cq_ready(&w->ring) ||
			    (IO_URING_READ_ONCE(*w->ring.sq.kflags) & IORING_SQ_TASKRUN))
				return;
			cpu_relax();
		}
	} while (worker_clock_us() - start < us);
}

/* Whether an accept of <w>'s may still post a completion. */
static bool accepts_armed(const struct worker *w)
{
	for (const struct wlistener *wl = w->listeners; wl; wl = wl->next)
		if (wl->armed)
			return true;
	return false;
}

/*
 * Shut down listener <l>'s socket <fd>, unless the service manager passed
 * it (inherited), or the hashlb this one replaced handed it on (shared): the
 * other workers share that one, and the manager keeps it listening for the
 * next hashlb.
 */
static void listener_shutdown(const struct hlb_listener *l, int fd)
{
	if (!l->inherited && !l->shared)
		shutdown(fd, SHUT_RDWR);
}

/*
 * io_uring_enter() failed with <err>, other than for a signal or a full CQ:
 * EBADR, say (the kernel lost a completion for want of memory for its
 * overflow list). The request whose completion was lost is stuck for good,
 * a connection never served again or a client accepted and never seen, and
 * which one cannot be told. The worker cannot go on: tear the
 * ring down (cancelling everything in flight), then give up what the ring
 * served, without it. Its listener sockets stop listening at once, so that
 * the kernel sends new clients to the other workers' (the clients in their
 * backlogs move there too where hlb_proxy_migrates(), else are reset), the
 * service manager's excepted; its connections are reset, client and backend, rather than
 * left open and never served again; and the connections the ring accepted
 * whose completions were not handled yet are reset too. The control thread
 * sees hlb_proxy_failed() and stops the process.
 */
static void worker_fail(struct worker *w, int err)
{
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct wlistener *wl;
	struct cmd *cmd;
	enum { IDLE_PASSES = 8, MAX_PASSES = 256 };
	uint64_t n = 0;
	unsigned head, seen, idle = 0, passes = 0;
	int entered;

	/* Out of their SO_REUSEPORT group at once, their backlogs moved to the
	 * group's other sockets (hlb_proxy_migrates()) or reset: a listening
	 * socket shut down stops listening. Not closed here: the
	 * control thread may be reading l->fds[] to hand the sockets over, and a
	 * closed number could be another socket by then; it closes them itself
	 * once this thread is done (hlb_proxy_close_failed()). */
	for (wl = w->listeners; wl; wl = wl->next)
		listener_shutdown(wl->l, wl->fd);
	/* So are the sockets of the listeners a reload added that this worker
	 * will not read now (left queued, closed the same way); those added
	 * later worker_push() closes. */
	pthread_mutex_lock(&w->cmd_lock);
	w->failed = true;
	for (cmd = w->cmd_head; cmd; cmd = cmd->next)
		if (cmd->type == CMD_ADD)
			listener_for_each_fd (cmd->l, w->id, i)
				listener_shutdown(cmd->l, cmd->l->fds[i]);
	pthread_mutex_unlock(&w->cmd_lock);
	/* Every request cancelled (a poll's pending task work sees the cancel
	 * first), each accept ends with a completion that says so (no
	 * IORING_CQE_F_MORE): reap until all have, resetting the clients
	 * accepted meanwhile, in the CQ or in the kernel's overflow list, which
	 * an enter with GETEVENTS flushes into it (the loss itself was
	 * reported: the enter works again). An accept runs in this thread's
	 * enters only (task work): once all have ended, none is left for the
	 * ring's close to run, which, on a socket still listening (the service
	 * manager's), would install a client's fd nobody knows of (kernels
	 * before 6.17 and the stable updates of September 2025 run it rather
	 * than cancel it). Ends too once an enter brings nothing: the enter
	 * fails, or the completion lost was an accept's last.
	 * A full SQ that a submit cannot empty (worker_sqe() would try for
	 * ever) leaves the accepts uncancelled: reaped as they come. Bounded:
	 * a pass that brings nothing ends it unless the overflow list still
	 * holds completions, IDLE_PASSES such passes at most, and MAX_PASSES in
	 * all (clients arriving without end on an uncancelled accept). */
	sqe = io_uring_get_sqe(&w->ring);
	if (!sqe && io_uring_submit(&w->ring) >= 0)
		sqe = io_uring_get_sqe(&w->ring);
	if (sqe) {
		io_uring_prep_cancel(sqe, NULL, IORING_ASYNC_CANCEL_ANY);
		sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
		io_uring_sqe_set_data64(sqe, 0);
	}
	do {
		entered = io_uring_submit_and_get_events(&w->ring);
		seen = 0;
		io_uring_for_each_cqe (&w->ring, head, cqe) {
			uint64_t ud = io_uring_cqe_get_data64(cqe);

			if ((ud & OP_MASK) == OP_ACCEPT) {
				wl = (struct wlistener *)(uintptr_t)(ud & ~OP_MASK);
				if (!(cqe->flags & IORING_CQE_F_MORE))
					wl->armed = false;
				if (cqe->res >= 0) {
					sock_reset_on_close(cqe->res);
					close(cqe->res);
					n++;
				}
			}
			seen++;
		}
		io_uring_cq_advance(&w->ring, seen);
		idle = seen ? 0 : idle + 1;
	} while (accepts_armed(w) && ++passes < MAX_PASSES &&
		 (seen || (entered >= 0 && idle < IDLE_PASSES &&
			   (IO_URING_READ_ONCE(*w->ring.sq.kflags) & IORING_SQ_CQ_OVERFLOW))));
	io_uring_queue_exit(&w->ring);
	w->ring_gone = true;
	n += conn_reset_all(w, -err);
	hlb_log(HLB_LOG_ERROR, "worker failed: its connections reset",
		"worker=%u connections=%" PRIu64 " listeners=%u err=%s", w->id, n, w->n_listeners,
		strerrorname_np(-err));
}

/*
 * Whether draining worker <w>, which serves nothing more, may exit: not while a command waits
 * in its queue (the turn that reads it looks again). If it may, it refuses commands from now
 * on, under the lock that queues them (gone): a client handed to it (hlb_proxy_adopt()) or
 * passed on to it from a worker that failed (adopt_pass_on()) once it had read its last
 * commands sat unread until the process exited, and was reset then.
 */
bool worker_exit_ready(struct worker *w)
{
	bool empty;

	pthread_mutex_lock(&w->cmd_lock);
	empty = !w->cmd_head;
	if (empty)
		w->gone = true;
	pthread_mutex_unlock(&w->cmd_lock);
	return empty;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct hlb_proxy *p = w->proxy;
	struct io_uring_cqe *cqe;
	uint64_t one = 1;
	unsigned head, n = 0, ready;
	bool wait = true;
	char name[16];
	int r, failed = 0;

	/* for top -H, ps -L, /proc/PID/task/TID/comm, a debugger */
	snprintf(name, sizeof(name), "hlb-worker%u", w->id);
	pthread_setname_np(pthread_self(), name);
	w->now_ms = clock_ms();
	if (w->splice_after)
		worker_pipe_look(w);
	r = worker_setup(w);
	pthread_mutex_lock(&p->start_lock);
	w->setup_ret = r;
	p->n_ready++;
	pthread_cond_broadcast(&p->start_cond);
	pthread_mutex_unlock(&p->start_lock);
	if (r < 0)
		return NULL;

	wake_arm(w);
	tick_arm(w);
	while (!w->exiting) {
		/* Connection log lines of this turn, before the wait: one check a turn. */
		if (hlb_logbuf_pending(&w->log)) {
			if (hlb_logbuf_flush(&w->log))
				log_poll_arm(w);
			else if (w->log_poll)
				log_poll_stop(w);
		}
		if (p->opts.busy_poll_us && n && wait)
			busy_poll(w, p->opts.busy_poll_us);
		worker_cq_check(w);
		hlb_rcu_offline(p->rcu, w->id);
		if (wait)
			r = io_uring_submit_and_wait(&w->ring, 1);
		else /* the recvs woken: see the turn's end */
			r = io_uring_submit_and_get_events(&w->ring);
		hlb_rcu_online(p->rcu, w->id);
		hlb_stat_add(&w->pub.turns, 1);
		if (r < 0 && r != -EINTR && r != -ETIME && r != -EBUSY && r != -EAGAIN) {
			hlb_log(HLB_LOG_ERROR, "io_uring_enter failed", "worker=%u err=%s", w->id,
				strerrorname_np(-r));
			failed = r;
			break;
		}
		/* Every completion handled on w->now_ms was posted before it was read, so that an
		 * activity's stamp (a connection's last_ms) is never earlier than the activity:
		 * those posted during the turn (at a submit made in it) read the clock again. */
		ready = io_uring_cq_ready(&w->ring);
		w->now_ms = clock_ms();
		n = 0;
		io_uring_for_each_cqe (&w->ring, head, cqe) {
			if (n == ready) {
				ready = io_uring_cq_ready(&w->ring);
				w->now_ms = clock_ms();
			}
			worker_cqe(w, cqe);
			n++;
		}
		io_uring_cq_advance(&w->ring, n);
		if (w->queue_head &&
		    (w->queue_kick || w->queue_tick || w->now_ms >= w->queue_next_ms)) {
			conn_queue_run(w);
			if (w->queue_head)
				worker_tick_by(w, w->queue_next_ms);
		}
		if (!w->queue_head && w->n_queue_svcs) /* its last clients left */
			conn_queue_svcs_free(w);
		if (w->draining && !w->n_conns && !w->listeners)
			w->exiting = worker_exit_ready(w);
		/* Recvs waiting for a buffer while some are free: buffers came
		 * back this turn, a recv found the ring empty with buffers in the
		 * stash, or one woken last turn took none (a FIN, an error, or no
		 * data yet: it waits in the kernel, holding none). Woken here
		 * only, once the turn's completions are counted, as many as there
		 * are buffers free. The next turn does not wait: a woken recv
		 * with data (or a FIN, or ENOBUFS) completes at the submit, one
		 * with none does not complete, and nothing else might end the
		 * wait before the tick while the next waiters' buffers are free.
		 * Not waiting, that turn's end passes them on at once. */
		wait = true;
		if (w->starved_head && w->bufs_out < w->buf_count)
			wait = !conn_wake_starved(w);
		/* A kick the worker gave itself within its look at the queue (a
		 * claim given back at once that left room, claim_undone()): the
		 * next turn looks again, and does not wait for a completion. */
		if (w->queue_kick && w->queue_head)
			wait = false;
		bufring_turn_end(w);
	}
	/* The closes of the last connection's sockets (worker_close_fd()) are
	 * still in the submission queue: the turn that freed it ends the
	 * loop. Unsubmitted, io_uring_queue_exit() would drop them and the
	 * sockets stay open until the process exits, which, while another
	 * worker drains, leaves this client without its FIN. */
	io_uring_submit(&w->ring);
	/* a worker stopped by a loss (EBADR) has its count in the metrics */
	atomic_store_explicit(&w->pub.cq_dropped, IO_URING_READ_ONCE(*w->ring.cq.koverflow),
			      memory_order_relaxed);
	hlb_rcu_offline(p->rcu, w->id);
	if (failed)
		worker_fail(w, failed);
	else
		io_uring_queue_exit(&w->ring);
	bufring_free(w);
	conn_queue_svcs_free(w);
	free(w->queue_svcs);
	free(w->queue_dues);
	conn_cache_free(w);
	/* the lines of the connections closed by the drain */
	hlb_logbuf_flush_wait(&w->log, LOG_EXIT_WAIT_MS);
	hlb_logbuf_free(&w->log);
	if (failed) {
		atomic_store_explicit(&w->failed_done, true, memory_order_release);
		atomic_fetch_add(&p->n_failed, 1);
	}
	/* a lending asked of it is answered: it has nothing to lend */
	pthread_mutex_lock(&w->cmd_lock);
	w->gone = true;
	for (struct cmd *cmd = w->cmd_head; cmd; cmd = cmd->next)
		if (cmd->type == CMD_LEND) {
			lent_answer(p, NULL, 0, 0);
			cmd->type = CMD_DRAIN;
		}
	pthread_mutex_unlock(&w->cmd_lock);
	atomic_fetch_add(&p->n_exited, 1);
	if (write(p->exit_fd, &one, sizeof(one)) < 0) {
		/* the counter cannot overflow with N writes: nothing to do */
	}
	return NULL;
}

/*
 * Worker <w>'s bit of svc->queue_workers, set while its queue holds a client
 * of <svc> (its wstats line's queue_n is not 0). Set before the fence of the
 * client's queue_recheck() (proxy/conn.c), which pairs with the kickers'
 * (kick_fence()): either a kick for <svc> sees the bit, or the look that
 * follows in the client's turn sees what the kick was for.
 */
void worker_queue_joined(struct worker *w, struct hlb_service *svc)
{
	atomic_fetch_or_explicit(&svc->queue_workers[w->id / 64], 1ull << (w->id % 64),
				 memory_order_relaxed);
}

void worker_queue_left(struct worker *w, struct hlb_service *svc)
{
	atomic_fetch_and_explicit(&svc->queue_workers[w->id / 64], ~(1ull << (w->id % 64)),
				  memory_order_relaxed);
}

/*
 * Wake <to> to look at its queue again. One eventfd write until it has read
 * it: a kick that finds one pending rides on it. Any thread, after
 * kick_fence().
 *
 * Why a kick that rides is not lost: the caller changed what the look reads
 * (a slot, a snapshot, a cap), then kick_fence(), then loads kick_pending;
 * <to> clears it, then a fence of its own (worker_cqe(), UD_WAKE), then looks.
 * Two seq_cst fences around a store and a load each: either our load sees
 * that clear (false: we write the eventfd, whose read is a look after
 * ours), or the look after the clear sees our change. A true we load is
 * followed by such a clear (every wake-up written is read), so the change
 * is seen by that look or a later one. The load is relaxed, and only one
 * that finds none pending exchanges it: in a burst of kicks the others
 * only read <to>'s line, not write it.
 */
static void queue_wake(struct worker *to)
{
	uint64_t one = 1;

	if (atomic_load_explicit(&to->kick_pending, memory_order_relaxed) ||
	    atomic_exchange_explicit(&to->kick_pending, true, memory_order_relaxed))
		return;
	if (write(to->wake_fd, &one, sizeof(one)) < 0) {
		/* the eventfd counter cannot overflow: nothing to do */
	}
}

/* Before queue_wake_for(): what the caller changed is ordered before its loads
 * of svc->queue_workers and the targets' kick_pending (see there). */
static void kick_fence(void)
{
	atomic_thread_fence(memory_order_seq_cst);
}

/* Wake the workers whose queue holds a client of <svc> (but <self>, NULL: none). */
static void queue_wake_for(struct hlb_proxy *p, const struct hlb_service *svc,
			   const struct worker *self)
{
	for (uint32_t k = 0; k * 64 < p->n_workers; k++) {
		uint64_t bits = atomic_load_explicit(&svc->queue_workers[k], memory_order_relaxed);

		for (; bits; bits &= bits - 1) {
			struct worker *to = &p->workers[k * 64 + (uint32_t)__builtin_ctzll(bits)];

			if (to != self)
				queue_wake(to);
		}
	}
}

void worker_kick_queues_fenced(struct worker *w, struct hlb_service *svc)
{
	if (svc->wstats[w->id].queue_n)
		w->queue_kick = true;
	queue_wake_for(w->proxy, svc, w);
}

void worker_kick_queues(struct worker *w, struct hlb_service *svc)
{
	kick_fence();
	worker_kick_queues_fenced(w, svc);
}

void hlb_proxy_kick_queues(struct hlb_proxy *p, struct hlb_service *svc)
{
	kick_fence();
	queue_wake_for(p, svc, NULL);
}

void worker_failing_seen(struct worker *w)
{
	struct hlb_proxy *p = w->proxy;
	uint64_t one = 1;

	if (atomic_load_explicit(&p->failing_pending, memory_order_relaxed) ||
	    atomic_exchange(&p->failing_pending, true))
		return;
	if (write(p->failing_fd, &one, sizeof(one)) < 0) {
		/* an eventfd write fails only on overflow: the control thread is woken */
	}
}

/* Worker's answer to a CMD_LEND: <n> clients lent, <lent>, and <not_lent> left in its queue;
 * the last one wakes the control thread. False if there was no memory to note them: then they
 * are not lent either. */
bool lent_answer(struct hlb_proxy *p, const struct hlb_lent *lent, size_t n, size_t not_lent)
{
	uint64_t one = 1;
	bool last, noted = true;

	pthread_mutex_lock(&p->lent_lock);
	hlb_grow((void **)&p->lent, &p->lent_cap, p->n_lent + n, sizeof(*p->lent), 64);
	if (p->n_lent + n <= p->lent_cap) {
		if (n)
			memcpy(p->lent + p->n_lent, lent, n * sizeof(*lent));
		p->n_lent += n;
	} else {
		noted = false;
		not_lent += n;
	}
	p->n_not_lent += not_lent;
	last = ++p->lent_answers == p->n_workers;
	pthread_mutex_unlock(&p->lent_lock);
	if (last && write(p->lent_fd, &one, sizeof(one)) < 0) {
		/* an eventfd write fails only on overflow: the control thread is woken */
	}
	return noted;
}

static void worker_push(struct worker *w, struct cmd *cmd);
static bool worker_try_push(struct worker *w, struct cmd *cmd);

bool hlb_proxy_lend_queue(struct hlb_proxy *p)
{
	if (p->lending)
		return false;
	p->lending = true;
	p->lend_gen++;
	for (uint32_t i = 0; i < p->n_workers; i++) {
		struct cmd *cmd = calloc(1, sizeof(*cmd));

		if (!cmd) {
			lent_answer(p, NULL, 0, 0);
			continue;
		}
		cmd->type = CMD_LEND;
		cmd->gen = p->lend_gen;
		worker_push(&p->workers[i], cmd);
	}
	return true;
}

int hlb_proxy_lent_fd(const struct hlb_proxy *p)
{
	return p->lent_fd;
}

static int lent_cmp(const void *a, const void *b)
{
	const struct hlb_lent *x = a, *y = b;

	return x->left_ms < y->left_ms ? -1 : x->left_ms > y->left_ms;
}

ssize_t hlb_proxy_lent_take(struct hlb_proxy *p, struct hlb_lent **ret, size_t *ret_not_lent)
{
	uint64_t v;
	size_t n;

	if (read(p->lent_fd, &v, sizeof(v)) < 0) {
		/* nothing to clear */
	}
	pthread_mutex_lock(&p->lent_lock);
	if (!p->lending || p->lent_answers < p->n_workers) {
		pthread_mutex_unlock(&p->lent_lock);
		return -EAGAIN;
	}
	n = p->n_lent;
	*ret = p->lent;
	*ret_not_lent = p->n_not_lent;
	p->n_not_lent = 0;
	p->lent = NULL;
	p->n_lent = p->lent_cap = 0;
	p->lent_answers = 0;
	pthread_mutex_unlock(&p->lent_lock);
	p->lending = false;
	/* the longest waiting first (of one worker's queue, ties are clients queued in the same
	 * ms) */
	if (n > 1)
		qsort(*ret, n, sizeof(**ret), lent_cmp);
	return (ssize_t)n;
}

/* TCP states past a FIN received (include/net/tcp_states.h, not in the uapi headers) */
enum { LENT_TCP_CLOSE_WAIT = 8, LENT_TCP_LAST_ACK = 9, LENT_TCP_CLOSING = 11 };

/* <fd>'s TCP_INFO, as far as tcpi_bytes_received at least. */
static bool lent_info(int fd, struct tcp_info *ti)
{
	socklen_t len = sizeof(*ti);

	memset(ti, 0, sizeof(*ti));
	return getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len) == 0 &&
	       len >= offsetof(struct tcp_info, tcpi_bytes_received) +
			       sizeof(ti->tcpi_bytes_received);
}

/* How many times lent_mark() reads a socket's counts before it gives up on their agreeing. */
#define LENT_MARK_TRIES 16

bool lent_mark(int fd, uint64_t *ret_read, uint64_t *ret_written)
{
	struct tcp_info ti, again;
	int inq, outq, tries = 0;

	/* TCP_INFO and the ioctls are separate reads: bytes (or a FIN, or an ACK) that arrive
	 * between them are counted in one and not the other, and would look like a read by the
	 * new process. Only counts that a second TCP_INFO finds unchanged agree. */
	do {
		if (++tries > LENT_MARK_TRIES || !lent_info(fd, &ti) ||
		    ioctl(fd, SIOCINQ, &inq) < 0 || ioctl(fd, SIOCOUTQ, &outq) < 0 ||
		    !lent_info(fd, &again))
			return false;
	} while (again.tcpi_bytes_received != ti.tcpi_bytes_received ||
		 again.tcpi_bytes_acked != ti.tcpi_bytes_acked ||
		 again.tcpi_state != ti.tcpi_state);
	/* Received, less what waits to be read, is what a reader took; with a FIN in (from the
	 * client: it is not ours to read), one more, read or not. Acked, and what waits to be, is
	 * what a writer gave (a FIN sent counted: that is a write too). */
	*ret_read = ti.tcpi_bytes_received - (uint64_t)inq -
		    (ti.tcpi_state == LENT_TCP_CLOSE_WAIT || ti.tcpi_state == LENT_TCP_LAST_ACK ||
		     ti.tcpi_state == LENT_TCP_CLOSING);
	*ret_written = ti.tcpi_bytes_acked + (uint64_t)outq;
	return true;
}

/* What becomes of a client the new process did not take: back, unless its stream moved since
 * it was lent (the new process read or wrote it before it exited, or its socket failed). */
static enum lent_fate lent_back_fate(const struct hlb_lent *l)
{
	uint64_t read, written;

	if (!lent_mark(l->fd, &read, &written) || read != l->read || written != l->written)
		return LENT_RESET;
	return LENT_BACK;
}

size_t hlb_proxy_lent_end(struct hlb_proxy *p, struct hlb_lent *lent, size_t n)
{
	size_t reset = 0;
	uint8_t **fates = calloc(p->n_workers, sizeof(*fates));
	size_t *count = calloc(p->n_workers, sizeof(*count));

	/* Each worker's clients of this lending, by their place (conn_lent_end()). Without the
	 * memory to say which were taken, none of a worker's comes back: some are the new
	 * process's. They stay lent until the drain closes them (no reset). */
	for (size_t i = 0; fates && count && i < n; i++)
		if (lent[i].worker < p->n_workers && lent[i].idx >= count[lent[i].worker])
			count[lent[i].worker] = (size_t)lent[i].idx + 1;
	for (uint32_t wi = 0; fates && count && wi < p->n_workers; wi++)
		fates[wi] = count[wi] ? calloc(count[wi], 1) : NULL;
	for (size_t i = 0; fates && count && i < n; i++) {
		uint8_t *f = lent[i].worker < p->n_workers ? fates[lent[i].worker] : NULL;

		if (f) {
			f[lent[i].idx] = lent[i].refused ? lent_back_fate(&lent[i]) : LENT_TAKEN;
			reset += f[lent[i].idx] == LENT_RESET;
		}
	}
	for (uint32_t wi = 0; fates && count && wi < p->n_workers; wi++) {
		struct cmd *cmd = fates[wi] ? calloc(1, sizeof(*cmd)) : NULL;

		if (!cmd) {
			free(fates[wi]);
			continue;
		}
		cmd->type = CMD_LENT_END;
		cmd->gen = lent[0].gen;
		cmd->fates = fates[wi];
		cmd->n = count[wi];
		worker_push(&p->workers[wi], cmd);
	}
	free(fates);
	free(count);
	for (size_t i = 0; i < n; i++)
		close(lent[i].fd);
	return reset;
}

/*
 * Queue the client to adopt <cmd> to the first worker that runs of the <n> from <first> on, in
 * turn (round the workers): how many were passed before it, <n> if none runs. One rule for a
 * client handed over (hlb_proxy_adopt()) and one a failed worker passes on (adopt_pass_on()).
 */
static uint32_t adopt_push(struct hlb_proxy *p, uint32_t first, uint32_t n, struct cmd *cmd)
{
	uint32_t k;

	for (k = 0; k < n; k++)
		if (worker_try_push(&p->workers[(first + k) % p->n_workers], cmd))
			break;
	return k;
}

bool hlb_proxy_adopt(struct hlb_proxy *p, struct hlb_service *svc, int fd, uint32_t left_ms,
		     uint32_t waited_ms, const struct sockaddr_storage *addr)
{
	const struct hlb_snapshot *snap = hlb_service_snapshot(svc);
	uint64_t max = snap ? snap->max_connections : 0;
	/* its slot, counted now: the next line's check sees it whether or not a worker has
	 * served this one yet (conn_new() does not count it again) */
	uint64_t active = atomic_fetch_add_explicit(&svc->active, 1, memory_order_relaxed) + 1;
	uint32_t first, k;
	struct cmd *cmd;

	if (max && active > max) {
		atomic_fetch_sub_explicit(&svc->active, 1, memory_order_relaxed);
		return false;
	}
	cmd = calloc(1, sizeof(*cmd));
	if (!cmd) {
		atomic_fetch_sub_explicit(&svc->active, 1, memory_order_relaxed);
		return false;
	}
	atomic_fetch_add_explicit(&p->adopting, 1, memory_order_relaxed);
	cmd->type = CMD_ADOPT;
	cmd->fd = fd;
	cmd->svc = hlb_service_ref(svc);
	cmd->left_ms = left_ms;
	cmd->waited_ms = waited_ms;
	if (addr) {
		cmd->addrs = true;
		memcpy(cmd->addr, addr, sizeof(cmd->addr));
	}
	/* Round robin over the workers that run: one that failed or exited is passed, its turn
	 * spent, so that the next client starts past the one that took this one (the worker
	 * after a failed one does not take its share too). Each is tried once. Before, the
	 * client was refused when its turn fell to a failed worker, though others ran. */
	first = atomic_fetch_add_explicit(&p->adopt_next, 1, memory_order_relaxed) % p->n_workers;
	k = adopt_push(p, first, p->n_workers, cmd);
	if (k && k < p->n_workers)
		atomic_fetch_add_explicit(&p->adopt_next, k, memory_order_relaxed);
	if (k == p->n_workers) {
		/* No worker runs: refused, <fd> the caller's to close unreset, the old process
		 * keeps its client. Not through cmd_free_unread(): that sets the socket, shared
		 * with the old process, to reset and closes it, so the client would be lost. */
		atomic_fetch_sub_explicit(&p->adopting, 1, memory_order_relaxed);
		atomic_fetch_sub_explicit(&svc->active, 1, memory_order_relaxed);
		hlb_service_unref(cmd->svc);
		free(cmd);
		return false;
	}
	return true;
}

/* Free <cmd>, which worker <w> will never read: close the sockets a CMD_ADD
 * gave it, drop the command's reference. Control thread. */
static void cmd_free_unread(struct worker *w, struct cmd *cmd)
{
	if (cmd->l) {
		if (cmd->type == CMD_ADD)
			listener_for_each_fd (cmd->l, w->id, i)
				listener_fd_close(cmd->l, i);
		hlb_listener_unref(cmd->l);
	}
	if (cmd->type == CMD_ADOPT) {
		/* the slot hlb_proxy_adopt() took for it, and its count among those adopting */
		atomic_fetch_sub_explicit(&cmd->svc->active, 1, memory_order_relaxed);
		atomic_fetch_sub_explicit(&w->proxy->adopting, 1, memory_order_relaxed);
		sock_reset_on_close(cmd->fd); /* its client is reset, as one refused at accept */
		close(cmd->fd);
		hlb_service_unref(cmd->svc);
	}
	if (cmd->type == CMD_LEND)
		lent_answer(w->proxy, NULL, 0, 0);
	free(cmd->fates);
	free(cmd);
}

/* Queue <cmd> for worker <w>, and wake it; false, <cmd> left to the caller, if <w> has failed
 * or exited: it reads no more commands. */
static bool worker_try_push(struct worker *w, struct cmd *cmd)
{
	uint64_t one = 1;
	bool failed;

	cmd->next = NULL;
	pthread_mutex_lock(&w->cmd_lock);
	failed = w->failed || w->gone;
	if (!failed) {
		*w->cmd_tail = cmd;
		w->cmd_tail = &cmd->next;
	}
	pthread_mutex_unlock(&w->cmd_lock);
	if (failed)
		return false;
	if (write(w->wake_fd, &one, sizeof(one)) < 0) {
		/* an eventfd write fails only on overflow: the worker is awake */
	}
	return true;
}

static void worker_push(struct worker *w, struct cmd *cmd)
{
	/* its ring is gone: a socket added would take clients nobody accepts */
	if (!worker_try_push(w, cmd))
		cmd_free_unread(w, cmd);
}

int hlb_proxy_new(const struct hlb_proxy_opts *opts, struct hlb_rcu *rcu,
		  struct hlb_proxy **ret_proxy, struct hashlb_error *err)
{
	struct hlb_proxy *p;

	if (opts->n_workers == 0 || opts->n_workers > HLB_WORKERS_MAX)
		return hashlb_err(err, -EINVAL, HASHLB_ERR_SYSTEM, "workers must be 1..%u",
				  HLB_WORKERS_MAX);
	p = calloc(1, sizeof(*p));
	if (!p)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	p->opts = *opts;
	if (!p->opts.buf_size)
		p->opts.buf_size = 65536;
	if (!p->opts.buf_count)
		p->opts.buf_count = 256;
	if (!p->opts.ring_entries)
		p->opts.ring_entries = 2048;
	if (!p->opts.splice_after)
		p->opts.splice_after = 256 * 1024;
	if (!p->opts.splice_pipes)
		p->opts.splice_pipes = HLB_SPLICE_PIPES_DEFAULT;
	if (p->opts.buf_count & (p->opts.buf_count - 1) || p->opts.buf_count > 32768) {
		free(p);
		return hashlb_err(err, -EINVAL, HASHLB_ERR_SYSTEM,
				  "buffer count must be a power of two up to 32768");
	}
	p->rcu = rcu;
	p->n_workers = opts->n_workers;
	p->taken_pidfd = -1;
	p->resync_fd = -1;
	p->migrate_fd = -2;
	hlb_proxy_count_fds(p, NULL);
	p->exit_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->failing_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->lent_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->workers = calloc(p->n_workers, sizeof(*p->workers));
	if (p->exit_fd < 0 || p->failing_fd < 0 || p->lent_fd < 0 || !p->workers) {
		if (p->exit_fd >= 0)
			close(p->exit_fd);
		if (p->failing_fd >= 0)
			close(p->failing_fd);
		if (p->lent_fd >= 0)
			close(p->lent_fd);
		free(p->workers);
		free(p);
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	}
	pthread_mutex_init(&p->start_lock, NULL);
	pthread_mutex_init(&p->lent_lock, NULL);
	pthread_cond_init(&p->start_cond, NULL);
	for (uint32_t i = 0; i < p->n_workers; i++) {
		struct worker *w = &p->workers[i];

		w->proxy = p;
		w->id = i;
		w->buf_size = p->opts.buf_size;
		w->buf_count = p->opts.buf_count;
		w->splice_after = p->opts.splice_after == UINT32_MAX ? 0 : p->opts.splice_after;
		w->pipe_size = p->opts.pipe_size;
		/* slow readers' data out of the pool: up to four pools' worth */
		w->spill_max = 4ull * w->buf_count * w->buf_size;
		/* --splice-pipes in all: the remainder to the first workers, and
		 * none to a worker past N (its bulk streams stay on buffers) */
		w->pipes_max = p->opts.splice_pipes / p->n_workers +
			       (i < p->opts.splice_pipes % p->n_workers);
		w->conns.next = w->conns.prev = &w->conns;
		w->starved_tail = w->starved_back = &w->starved_head;
		w->cmd_tail = &w->cmd_head;
		w->min_idle_ms = UINT32_MAX;
		w->queue_tail = w->queue_fresh_at = &w->queue_head;
		w->queue_svc_mark = 1;
		w->wake_fd = -1;
		pthread_mutex_init(&w->cmd_lock, NULL);
	}
	*ret_proxy = p;
	return 0;
}

int hlb_proxy_start(struct hlb_proxy *p, struct hashlb_error *err)
{
	int r;

	for (uint32_t i = 0; i < p->n_workers; i++) {
		struct worker *w = &p->workers[i];

		w->wake_fd = eventfd(0, EFD_CLOEXEC);
		if (w->wake_fd < 0)
			return hashlb_err(err, -errno, HASHLB_ERR_SYSTEM, "eventfd: %m");
		r = pthread_create(&w->thread, NULL, worker_main, w);
		if (r)
			return hashlb_err(err, -r, HASHLB_ERR_SYSTEM, "cannot start worker: %s",
					  strerror(r));
		w->started = true;
	}
	pthread_mutex_lock(&p->start_lock);
	while (p->n_ready < p->n_workers)
		pthread_cond_wait(&p->start_cond, &p->start_lock);
	pthread_mutex_unlock(&p->start_lock);
	for (uint32_t i = 0; i < p->n_workers; i++)
		if (p->workers[i].setup_ret < 0) {
			r = p->workers[i].setup_ret;
			return hashlb_err(err, r, HASHLB_ERR_SYSTEM,
					  "cannot set up io_uring for worker %u: %s", i,
					  strerror(-r));
		}
	return 0;
}

int hlb_proxy_exit_fd(const struct hlb_proxy *p)
{
	return p->exit_fd;
}

int hlb_proxy_failing_fd(const struct hlb_proxy *p)
{
	return p->failing_fd;
}

void hlb_proxy_failing_take(struct hlb_proxy *p)
{
	uint64_t v;

	/* cleared first: a worker that finds it clear after the read writes
	 * again, and its failure is seen at the next wake-up if not at this one */
	atomic_store(&p->failing_pending, false);
	if (read(p->failing_fd, &v, sizeof(v)) < 0) {
		/* spurious: nonblocking, nothing to read */
	}
}

uint32_t hlb_proxy_failed(const struct hlb_proxy *p)
{
	return atomic_load(&p->n_failed);
}

bool hlb_proxy_done(struct hlb_proxy *p)
{
	return atomic_load(&p->n_exited) == p->n_workers;
}

void hlb_proxy_set_max_connections(struct hlb_proxy *p, uint64_t n, bool fds)
{
	p->max_conns = n;
	p->cap_fds = fds;
}

void hlb_proxy_count_fds(struct hlb_proxy *p, const _Atomic uint32_t *fds)
{
	static const _Atomic uint32_t none;

	p->other_fds = fds ? fds : &none;
}

uint64_t hlb_proxy_max_connections(const struct hlb_proxy *p)
{
	return proxy_cap(p);
}

uint64_t hlb_proxy_max_connections_with(const struct hlb_proxy *p, uint32_t n_listeners)
{
	return proxy_cap_with(p, (uint64_t)n_listeners * p->n_workers);
}

uint64_t hlb_proxy_connections(const struct hlb_proxy *p)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < p->n_workers; i++)
		n += atomic_load_explicit(&p->workers[i].n_conns_pub, memory_order_relaxed);
	return n;
}

uint64_t hlb_proxy_connections_adopting(const struct hlb_proxy *p)
{
	/* first: one a worker has read since is among its connections (acquire: its count,
	 * stored before, is seen) */
	uint64_t adopting = atomic_load_explicit(&p->adopting, memory_order_acquire);

	return adopting + hlb_proxy_connections(p);
}

bool hlb_proxy_worker_stats(const struct hlb_proxy *p, uint32_t i, struct hlb_worker_stats *ret)
{
	const struct worker *w;

	if (i >= p->n_workers)
		return false;
	w = &p->workers[i];
	*ret = (struct hlb_worker_stats){
		.connections = atomic_load_explicit(&w->n_conns_pub, memory_order_relaxed),
		.buffers = w->buf_count,
		.buffers_in_use = atomic_load_explicit(&w->pub.bufs_out, memory_order_relaxed),
		.buffer_waiters = atomic_load_explicit(&w->pub.starved, memory_order_relaxed),
		.buffer_waits = atomic_load_explicit(&w->pub.buffer_waits, memory_order_relaxed),
		.buffer_wakeups =
			atomic_load_explicit(&w->pub.buffer_wakeups, memory_order_relaxed),
		.pipes = atomic_load_explicit(&w->pub.pipes, memory_order_relaxed),
		.pipes_max = w->splice_after ? w->pipes_max : 0,
		.splice_refused =
			atomic_load_explicit(&w->pub.splice_refused, memory_order_relaxed),
		.pipes_small = atomic_load_explicit(&w->pub.pipes_small, memory_order_relaxed),
		.accept_errors = atomic_load_explicit(&w->pub.accept_errors, memory_order_relaxed),
		.fd_limit = atomic_load_explicit(&w->pub.fd_limit, memory_order_relaxed),
		.cap_pauses = atomic_load_explicit(&w->pub.cap_pauses, memory_order_relaxed),
		.spilled = atomic_load_explicit(&w->pub.spilled, memory_order_relaxed),
		.spill_max = w->spill_max,
		.spills = atomic_load_explicit(&w->pub.spills, memory_order_relaxed),
		.cq_overflows = atomic_load_explicit(&w->pub.cq_overflows, memory_order_relaxed),
		.queue_deadline_looks =
			atomic_load_explicit(&w->queue_deadline_looks, memory_order_relaxed),
		.queue_served_woken =
			atomic_load_explicit(&w->queue_served_woken, memory_order_relaxed),
		.queue_served_tick =
			atomic_load_explicit(&w->queue_served_tick, memory_order_relaxed),
		.queue_tries = atomic_load_explicit(&w->queue_tries, memory_order_relaxed),
		.resets_taken = atomic_load_explicit(&w->pub.resets_taken, memory_order_relaxed),
		.cancels_by_fd = atomic_load_explicit(&w->cancels_by_fd, memory_order_relaxed),
		.log_wakeups = atomic_load_explicit(&w->pub.log_wakeups, memory_order_relaxed),
		.turns = atomic_load_explicit(&w->pub.turns, memory_order_relaxed),
		.queue_looks = atomic_load_explicit(&w->queue_looks, memory_order_relaxed),
		.queue_looks_woken =
			atomic_load_explicit(&w->queue_looks_woken, memory_order_relaxed),
		.queue_fp_reads = atomic_load_explicit(&w->queue_fp_reads, memory_order_relaxed),
		.queue_steps = atomic_load_explicit(&w->queue_steps, memory_order_relaxed),
		.cq_dropped = atomic_load_explicit(&w->pub.cq_dropped, memory_order_relaxed),
		.idle_scans = atomic_load_explicit(&w->pub.idle_scans, memory_order_relaxed),
	};
	return true;
}

void hlb_proxy_drain(struct hlb_proxy *p, uint32_t drain_ms, bool serve_backlog)
{
	for (uint32_t i = 0; i < p->n_workers; i++) {
		struct cmd *cmd = calloc(1, sizeof(*cmd));

		if (!cmd)
			continue;
		cmd->type = CMD_DRAIN;
		cmd->drain_ms = drain_ms;
		cmd->serve_backlog = serve_backlog;
		worker_push(&p->workers[i], cmd);
	}
}

void hlb_proxy_drain_ends(const struct hlb_proxy *p, uint64_t *ret_finished,
			  uint64_t *ret_timed_out)
{
	uint64_t finished = 0, timed_out = 0;

	/* each worker wrote them before its n_exited increment, which
	 * hlb_proxy_done() read */
	for (uint32_t i = 0; i < p->n_workers; i++) {
		finished += p->workers[i].drain_finished;
		timed_out += p->workers[i].drain_timed_out;
	}
	*ret_finished = finished;
	*ret_timed_out = timed_out;
}

/* Queue <type> for <l> on every worker; each command holds a reference. */
static void listener_broadcast(struct hlb_proxy *p, struct hlb_listener *l, int type)
{
	for (uint32_t i = 0; i < p->n_workers; i++) {
		struct cmd *cmd = calloc(1, sizeof(*cmd));

		if (!cmd)
			continue;
		atomic_fetch_add(&l->refs, 1);
		cmd->type = type;
		cmd->l = l;
		worker_push(&p->workers[i], cmd);
	}
}

void hlb_listener_start(struct hlb_proxy *p, struct hlb_listener *l)
{
	listener_broadcast(p, l, CMD_ADD);
}

void hlb_listener_close(struct hlb_proxy *p, struct hlb_listener *l)
{
	listener_broadcast(p, l, CMD_REMOVE);
	hlb_listener_unref(l);
}

/*
 * A client hlb_proxy_adopt() handed to worker <w>, which failed or exited before it read it
 * (<cmd>): to the next worker that runs, its slot and its count among those adopting kept.
 * The new process had said it taken, and the old one closed its copy: reset with the failed
 * worker's commands (as before), it was lost. False if no worker runs (the caller resets it).
 */
static bool adopt_pass_on(struct worker *w, struct cmd *cmd)
{
	uint32_t others = w->proxy->n_workers - 1;

	return adopt_push(w->proxy, w->id + 1, others, cmd) < others;
}

/*
 * The listeners of worker <w>, which has exited, or failed (worker_fail():
 * shut down but kept open), closed and their references dropped; so are those
 * of the commands it did not read, but for its clients to adopt, passed on
 * to another worker while one runs (adopt_pass_on()) if <pass_on>.
 */
static void worker_listeners_free(struct worker *w, bool pass_on)
{
	struct cmd *cmd, *next;

	while (w->listeners) {
		w->listeners->serve_backlog = false;
		wlistener_drop(w, w->listeners);
	}
	for (cmd = cmd_take_all(w); cmd; cmd = next) {
		next = cmd->next;
		if (pass_on && cmd->type == CMD_ADOPT && adopt_pass_on(w, cmd))
			continue;
		cmd_free_unread(w, cmd);
	}
}

void hlb_proxy_close_failed(struct hlb_proxy *p)
{
	for (uint32_t i = 0; i < p->n_workers; i++)
		if (atomic_load_explicit(&p->workers[i].failed_done, memory_order_acquire))
			worker_listeners_free(&p->workers[i], true);
}

void hlb_proxy_free(struct hlb_proxy *p)
{
	if (!p)
		return;
	if (!hlb_proxy_done(p))
		hlb_proxy_drain(p, 0, false);
	for (uint32_t i = 0; i < p->n_workers; i++) {
		struct worker *w = &p->workers[i];

		if (w->started)
			pthread_join(w->thread, NULL);
		/* All are gone: a client left in a queue here is reset (cmd_free_unread()), and
		 * rightly, for none could be served by another worker. A worker exits by itself
		 * only once it failed (its queue passed on to one that runs while one does:
		 * hlb_proxy_close_failed()), or drained, and a drain is every worker's, as the
		 * process stops (the number of workers changes on restart only); a worker that
		 * drained exits only with its queue empty and takes none after
		 * (worker_exit_ready()). So the clients reset here are those of workers that
		 * never ran, or handed to one that failed when no other ran. */
		worker_listeners_free(w, false);
		if (w->wake_fd >= 0)
			close(w->wake_fd);
		pthread_mutex_destroy(&w->cmd_lock);
	}
	close(p->exit_fd);
	close(p->failing_fd);
	close(p->lent_fd);
	for (size_t i = 0; i < p->n_lent; i++)
		close(p->lent[i].fd);
	free(p->lent);
	pthread_mutex_destroy(&p->lent_lock);
	if (p->taken_pidfd >= 0)
		close(p->taken_pidfd);
	if (p->resync_fd >= 0)
		close(p->resync_fd);
	if (p->migrate_fd >= 0)
		close(p->migrate_fd);
	for (uint32_t i = 0; i < p->n_inh; i++)
		if (p->inh[i].fd >= 0)
			close(p->inh[i].fd);
	free(p->inh);
	free(p->handover);
	free(p->workers);
	free(p);
}
