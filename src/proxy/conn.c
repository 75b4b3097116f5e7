// SPDX-License-Identifier: MIT
/*
 * One proxied TCP connection: accept -> hash -> connect (with a timeout,
 * moving down the preference list on failure) -> forward both directions
 * -> close.
 *
 * Forwarding, per direction (a "half"): one recv with a provided buffer;
 * when it completes, the buffer is sent to the other side and the recv is
 * re-armed at once, so receiving overlaps sending. A second buffer that
 * arrives while the send is still in flight is parked, and the recv is not
 * re-armed until that send completes: a direction never holds more than two
 * buffers (backpressure: a peer that does not read stops us from reading
 * the other peer, and TCP flow control pushes back to the sender).
 *
 * MSG_MORE: when a recv leaves more in the source socket (more data, or the
 * FIN: the kernel reports either as "not empty"), the buffer is sent with
 * MSG_MORE, because what follows is forwarded at once: the next buffer, or
 * shutdown(SHUT_WR), which then goes out in the same segment as the data
 * (a response and its FIN in one packet, not two plus an ACK). Data held
 * back this way is pushed by the next send, by the shutdown or close, or,
 * if the next recv cannot follow at once (no buffer free), by setting
 * TCP_NODELAY again, which pushes what the socket holds.
 *
 * Spill: every send is MSG_DONTWAIT. One that finds the destination full
 * (EAGAIN, or a part sent) moves what is left, and a parked buffer, out of
 * the pool into memory of the direction's own (BUF_PRIV), gives the
 * buffers back and polls the destination for room; the worker then sends
 * with send(2) as room comes, and the direction resumes on buffers once it
 * is all out. A destination that stops reading so holds no pool buffer: a
 * few slow readers cannot take every buffer of a worker and stall all its
 * other connections. What a direction holds stays capped (two buffers'
 * worth); past the worker's spill cap (four pools), a send waits in the
 * kernel holding its buffer, as it always did before.
 *
 * Half-close: when a source sends FIN (recv returns 0) and its last buffer
 * has been sent, the other side gets shutdown(SHUT_WR); the other direction
 * flows on until it ends too, then both sockets are closed. Meanwhile the
 * source that sent FIN is watched for a reset (conn_watch_after_fin()).
 *
 * Splice: a direction that has forwarded splice_after bytes in large reads
 * (a bulk stream, not small requests) moves to splice(2): source socket ->
 * pipe -> destination socket, the bytes never copied through user space.
 * The switch happens between two buffers (no recv is re-armed once it is
 * due; when the last send completes, the pipe takes over). Then the
 * direction has one poll in flight, for the source to become readable or
 * the destination writable, and the worker calls splice() itself with
 * SPLICE_F_NONBLOCK on non-blocking sockets (IORING_OP_SPLICE would run
 * every splice in an io-wq thread). The pipe is the buffer: the source is
 * read only when the pipe is empty, so a destination that does not read
 * stops us from reading the source, as with buffers. A direction stays on
 * buffers when the worker's pipe cap is reached, the connection cap the fd
 * limit allows has no room for a pipe (worker_pipe_room()), or pipe2()
 * fails.
 *
 * Errors (reset, timeout, idle) abort: every request in flight on the two
 * sockets is cancelled and the connection is freed once its last CQE has
 * come back (<inflight> counts them).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <linux/sockios.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hashlb/grow.h"
#include "hashlb/sysctl.h"
#include "clients.h"
#include "control/balance.h"
#include "log.h"
#include "proxyhdr.h"
#include "worker.h"

#define CONN_CHUNK 64
/* A read this large, or of a whole buffer (smaller ones: --buffer-size), counts
 * towards splice_after: small messages never do. */
#define SPLICE_READ_MIN 16384
/* Bytes asked of one splice() from a socket; the pipe's slots bound it. */
#define SPLICE_LEN (1u << 20)
/* Read-write rounds of one direction per readiness, then it polls again (fairness). */
#define SPLICE_ROUNDS 4
/* A connect in flight this long at an idle scan has its client watched (client_watch()). */
#define CONNECT_WATCH_US 100000u

static struct conn *conn_alloc(struct worker *w)
{
	struct conn *c;

	if (!w->free_conns) {
		/* Allocated in chunks, kept until the worker exits: the hot path
		 * reuses them from the free list. Entry 0 links the chunks. */
		struct conn *chunk = aligned_alloc(64, sizeof(*chunk) * CONN_CHUNK);

		if (!chunk)
			return NULL;
		chunk[0].next = w->conn_chunks;
		w->conn_chunks = chunk;
		for (int i = 1; i < CONN_CHUNK; i++) {
			chunk[i].next = w->free_conns;
			w->free_conns = &chunk[i];
		}
	}
	c = w->free_conns;
	w->free_conns = c->next;
	return c;
}

void conn_cache_free(struct worker *w)
{
	struct conn *chunk, *next;

	for (chunk = w->conn_chunks; chunk; chunk = next) {
		next = chunk[0].next;
		free(chunk);
	}
	w->conn_chunks = NULL;
	w->free_conns = NULL;
}

/*
 * Why socket <fd>, found gone (its address or a read of it failed), is gone:
 * the error its peer's reset left on it (ECONNRESET, EPIPE after a FIN), as
 * every other reset is logged, not the ENOTCONN of the call that found it
 * so; ENOTCONN if it holds none.
 */
static int sock_gone_error(int fd)
{
	socklen_t len = sizeof(int);
	int err = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || !err)
		return ENOTCONN;
	return err;
}

/*
 * Close client socket <fd> that hashlb gives up on before any backend
 * served it: with a reset (SO_LINGER 0), never a FIN, which would tell the
 * client that a backend answered with nothing and closed. A plain close
 * sent either, as it happened: a FIN if the client had sent nothing yet,
 * the kernel's reset if its request was there, unread.
 */
static void client_refuse(struct worker *w, int fd)
{
	sock_reset_on_close(fd);
	worker_close_fd(w, fd);
}

static struct conn *conn_of_half(struct half *h)
{
	return (struct conn *)((char *)(h - h->idx) - offsetof(struct conn, h));
}

static void starve_remove(struct worker *w, struct half *h)
{
	struct half **pp = &w->starved_head;

	if (!h->starved)
		return;
	while (*pp && *pp != h)
		pp = &(*pp)->starved_next;
	if (*pp) {
		if (w->starved_back == &h->starved_next)
			w->starved_back = pp;
		*pp = h->starved_next;
		w->n_starved--;
	}
	if (!w->starved_head)
		w->starved_tail = &w->starved_head;
	else if (w->starved_tail == &h->starved_next) {
		struct half *last = w->starved_head;

		while (last->starved_next)
			last = last->starved_next;
		w->starved_tail = &last->starved_next;
	}
	h->starved = false;
	h->starved_next = NULL;
}

/*
 * Arm the recv of half <i>. <poll_first>: the socket is most likely empty
 * (the last recv drained it), so skip the attempt that would fail with
 * EAGAIN and wait for data right away.
 */
static void half_recv(struct worker *w, struct conn *c, int i, bool poll_first)
{
	struct io_uring_sqe *sqe = worker_sqe(w);

	io_uring_prep_recv(sqe, c->fd[i], NULL, w->buf_size, 0);
	if (poll_first)
		sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = 0;
	io_uring_sqe_set_data64(sqe, ud_make(c, OP_RECV + i));
	c->h[i].recv_armed = true;
	c->inflight++;
}

/*
 * Send bytes <off>..<len> of buffer <bid> from half <i>'s source to its
 * destination. <wait>: in the kernel until the destination has room, the
 * spill having been refused (see Spill); otherwise MSG_DONTWAIT while the
 * worker is under its spill cap.
 */
static void half_send(struct worker *w, struct conn *c, int i, uint16_t bid, uint32_t off,
		      uint32_t len, bool more, bool wait)
{
	struct io_uring_sqe *sqe = worker_sqe(w);
	struct half *h = &c->h[i];

	h->send_bid = bid;
	h->send_off = off;
	h->send_len = len;
	h->send_more = more;
	if (!more)
		h->corked = false;
	/* MSG_DONTWAIT: a full destination answers EAGAIN at once (see Spill),
	 * unless the spill cap is reached: then the send waits in the kernel */
	io_uring_prep_send(sqe, c->fd[1 - i], bufring_addr(w, bid) + off, len - off,
			   MSG_NOSIGNAL | (more ? MSG_MORE : 0) |
				   (!wait && w->spilled < w->spill_max ? MSG_DONTWAIT : 0));
	io_uring_sqe_set_data64(sqe, ud_make(c, OP_SEND + i));
	c->inflight++;
}

/* Push what half <i>'s destination holds back after a MSG_MORE send. */
static void half_uncork(struct conn *c, int i)
{
	int one = 1;

	if (!c->h[i].corked)
		return;
	c->h[i].corked = false;
	setsockopt(c->fd[1 - i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/*
 * Half <h>'s recv found the ring empty: it waits in line. <woken>: one that
 * conn_wake_starved() woke goes back where it was, ahead of the halves that
 * were not woken, behind those woken with it that are back already (the
 * kernel hands the ring's buffers to the recvs of a submission in order: a
 * waiter's may come after active connections' that took them all).
 */
static void starve_add(struct worker *w, struct half *h, bool woken)
{
	struct half ***at = woken ? &w->starved_back : &w->starved_tail;

	h->starved = true;
	h->starved_next = **at;
	**at = h;
	if (w->starved_tail == *at)
		w->starved_tail = &h->starved_next;
	*at = &h->starved_next;
	w->n_starved++;
}

/*
 * At the end of a turn (the main loop's, only there), arm the recvs of as
 * many waiters as there are buffers free, first come first. A recv takes a
 * buffer only as its data arrives, so the count does not move as they are
 * woken; waking more sends the others back in line with no buffer (a herd:
 * 40-120 wake-ups per buffer used, 300 connections on 4 buffers). The next
 * turn's end wakes more if buffers are still free: the woken recvs that took
 * one are counted in <bufs_out> by then (they complete at the submit), and
 * one that found no data holds none and waits for it in the kernel. Returns
 * how many were woken: the caller's next turn must not wait for a completion
 * (one that found no data gives none).
 */
uint32_t conn_wake_starved(struct worker *w)
{
	uint32_t avail = w->buf_count - w->bufs_out;
	uint32_t woken = 0;

	while (w->starved_head && woken < avail) {
		struct half *h = w->starved_head;
		struct conn *c = conn_of_half(h);

		w->starved_head = h->starved_next;
		if (!w->starved_head)
			w->starved_tail = &w->starved_head;
		w->n_starved--;
		h->starved = false;
		h->starved_next = NULL;
		if (c->state == CONN_OPEN) {
			h->woken = true;
			half_recv(w, c, h->idx, false);
			woken++;
		}
	}
	w->starved_back = &w->starved_head;
	hlb_stat_add(&w->pub.buffer_wakeups, woken);
	return woken;
}

static const char *const conn_end_names[CONN_END_MAX] = {
	[CONN_END_NONE] = "error",
	[CONN_END_DONE] = "done",
	[CONN_END_CLIENT_RESET] = "client_reset",
	[CONN_END_BACKEND_RESET] = "backend_reset",
	[CONN_END_CLIENT_CLOSED] = "client_closed",
	[CONN_END_IDLE] = "idle_timeout",
	[CONN_END_NO_BACKEND] = "no_backend",
	[CONN_END_CONNECT_FAILED] = "connect_failed",
	[CONN_END_DRAIN] = "drain_timeout",
	[CONN_END_BAD_HEADER] = "bad_header",
	[CONN_END_QUEUE_TIMEOUT] = "queue_timeout",
	[CONN_END_DENIED] = "denied",
	[CONN_END_CLIENT_LIMIT] = "client_limit",
	[CONN_END_CLOSED] = "closed",
	[CONN_END_BACKEND_DOWN] = "backend_down",
	[CONN_END_PRIMARY_UP] = "primary_up",
	[CONN_END_HANDED_OVER] = "handed_over",
	[CONN_END_REJECTED] = "rejected",
	[CONN_END_ERROR] = "error",
};

/* How an established connection that ended as <end> is counted under its backend. */
static enum hlb_end conn_backend_end(enum conn_end end)
{
	switch (end) {
	case CONN_END_DONE:
		return HLB_END_DONE;
	case CONN_END_CLIENT_RESET:
		return HLB_END_CLIENT_RESET;
	case CONN_END_BACKEND_RESET:
		return HLB_END_BACKEND_RESET;
	case CONN_END_IDLE:
		return HLB_END_IDLE;
	case CONN_END_DRAIN:
		return HLB_END_DRAIN;
	case CONN_END_CLOSED:
		return HLB_END_CLOSED;
	case CONN_END_BACKEND_DOWN:
		return HLB_END_BACKEND_DOWN;
	case CONN_END_PRIMARY_UP:
		return HLB_END_PRIMARY_UP;
	default: /* the others end a connection before its backend is reached */
		return HLB_END_ERROR;
	}
}

/* "a.b.c.d:port" or "[v6]:port" of a canonical tuple's source (see tuple.h). */
static void format_client(const uint8_t *src, char *buf, size_t size)
{
	unsigned port = (unsigned)src[16] << 8 | src[17];
	char host[HASHLB_ADDR16_STRLEN];

	hashlb_addr16_format(src, host, sizeof(host));
	snprintf(buf, size, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
}

/* <peer> as format_client() writes a client (an IPv4-mapped one as IPv4); <buf> unchanged if
 * it is no IP address. */
static void format_peer(const struct sockaddr *peer, char *buf, size_t size)
{
	struct hashlb_tuple t;

	if (hashlb_tuple_from_sockaddr(peer, NULL, &t) == 0)
		format_client((const uint8_t *)&t, buf, size);
}

/*
 * The connection's line in the log (log_connections): who, where, how
 * long, how many bytes, why it ended. Into the worker's buffer, written
 * out before the worker next waits: never blocks.
 */
static void conn_log(struct worker *w, struct conn *c)
{
	/* names quoted whole: valid UTF-8 without control bytes (the loader's
	 * rule), so at most each byte doubled ("\\"), and the quotes */
	char client[INET6_ADDRSTRLEN + 10] = "-", qs[160], qb[2 * HASHLB_NAME_MAX + 3];
	char err[32] = "", connect[32] = "", queue[24] = "";
	const char *be = "-", *be_addr = "-";

	/* the line whole, its values at their longest: the address a host name's, the end's name
	 * 15 bytes ("connect_failed") */
	_Static_assert(sizeof("ts=2026-11-30T17:00:00.123Z level=info msg=connection service= "
			      "client= backend= backend_addr= attempts=4294967295 "
			      "duration_ms=4294967295 bytes_in=18446744073709551615 "
			      "bytes_out=18446744073709551615 end= self_pid=-2147483648\n") +
				       sizeof(qs) + sizeof(client) + sizeof(qb) + HASHLB_HOST_MAX +
				       sizeof("[]:65535") + sizeof(queue) + sizeof(connect) +
				       sizeof(err) + 15 <=
			       HLB_LOG_LINE_MAX,
		       "a connection line fits a data plane line");

	if (c->client_set) {
		format_client(c->client, client, sizeof(client));
	} else {
		/* not routed (accept_proxy: no header read): the peer itself */
		struct sockaddr_storage peer;
		socklen_t len = sizeof(peer);

		if (getpeername(c->fd[0], (struct sockaddr *)&peer, &len) == 0)
			format_peer((struct sockaddr *)&peer, client, sizeof(client));
	}
	if (c->be && c->established) {
		be = hlb_log_quote(c->be->name, qb, sizeof(qb));
		/* a reload may write another name of its address (control/pool.c) */
		be_addr = __atomic_load_n(&c->be->address, __ATOMIC_ACQUIRE);
		snprintf(connect, sizeof(connect), " connect_ms=%u.%03u", c->connect_us / 1000,
			 c->connect_us % 1000);
	}
	if (c->was_queued)
		snprintf(queue, sizeof(queue), " queue_ms=%u", c->queue_ms);
	if (c->err && c->end != CONN_END_DONE)
		snprintf(err, sizeof(err), " err=%s", strerrorname_np(c->err) ?: "unknown");
	hlb_logbuf_printf(&w->log, HLB_LOG_INFO, "connection",
			  "service=%s client=%s backend=%s backend_addr=%s attempts=%u%s%s "
			  "duration_ms=%u bytes_in=%" PRIu64 " bytes_out=%" PRIu64 " end=%s%s",
			  hlb_log_quote(c->svc->name, qs, sizeof(qs)), client, be, be_addr,
			  c->tries, queue, connect, worker_clock_fine_ms() - c->start_ms,
			  c->h[0].bytes, c->h[1].bytes, conn_end_names[c->end], err);
}

/*
 * The log line of a client of <svc> refused at once at the service's max_connections
 * (client socket <fd>, still open): no connection was made for it, so one stands in, as
 * it would have ended at once (end=rejected, its peer as the client).
 */
static void conn_log_rejected(struct worker *w, struct hlb_service *svc, int fd)
{
	struct conn c = { .svc = svc, .fd = { fd, -1 }, .end = CONN_END_REJECTED };

	c.start_ms = worker_clock_fine_ms();
	conn_log(w, &c);
}

/* <c>'s client in the service's clients table: its address cut to <keep> bits. */
static void conn_client_key(const struct conn *c, unsigned keep, struct hlb_client_key *ret_key)
{
	memcpy(ret_key->addr, c->client, sizeof(ret_key->addr));
	hashlb_addr16_cut(ret_key->addr, keep);
	ret_key->keep = (uint8_t)keep;
}

/*
 * Give back the slot <c> holds under c->be's max_connections. Connections of
 * the service waiting for one (on any worker) are told to look again.
 */
static void conn_unclaim(struct worker *w, struct conn *c)
{
	hlb_backend_unclaim(c->be);
	c->claimed = false;
	/* a slot of a capped backend freed: clients may be waiting for it (a
	 * backend without a cap frees none, every connection claiming now) */
	if (!atomic_load_explicit(&c->be->max_conns, memory_order_relaxed))
		return;
	/* Pairs with the one of queue_recheck(): either this sees the client
	 * another worker just queued counted and kicks it, or that worker
	 * sees this slot free. A service a reload adds back with the backends
	 * of its removal is that service again (<svc> itself, service_new() in
	 * control/pool.c): its clients wait counted here. It is the kick's
	 * fence too (kick_fence()): between the slot's store and the kick's
	 * loads it is all they need, and only a load comes after it. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&c->svc->queued, memory_order_relaxed))
		worker_kick_queues_fenced(w, c->svc);
}

static void conn_maybe_free(struct worker *w, struct conn *c)
{
	struct hlb_service *svc = c->svc;

	if (c->state != CONN_CLOSING || c->inflight)
		return;
	if (c->log)
		conn_log(w, c);
	if (w->draining && !w->ring_gone) { /* those conn_reset_all() resets are logged there */
		if (c->end == CONN_END_DRAIN) {
			struct hlb_service_wstats *ws = &svc->wstats[w->id];
			_Atomic uint32_t *cut =
				c->drain_signalled ? &ws->drain_signalled : &ws->drain_cut;

			w->drain_timed_out++;
			atomic_store_explicit(cut,
					      atomic_load_explicit(cut, memory_order_relaxed) + 1,
					      memory_order_relaxed);
		} else
			w->drain_finished++;
	}
	for (int i = 0; i < 2; i++) {
		struct half *h = &c->h[i];

		starve_remove(w, h);
		if (h->send_bid == BUF_PRIV) {
			free(h->priv);
			w->spilled -= h->send_len;
		} else if (h->send_bid != BUF_NONE) {
			bufring_put(w, h->send_bid);
		}
		if (h->pend_bid != BUF_NONE)
			bufring_put(w, h->pend_bid);
		if (h->spliced) {
			worker_close_fd(w, h->pipe[0]);
			worker_close_fd(w, h->pipe[1]);
			w->pipes--;
			atomic_store_explicit(&w->pub.pipes, w->pipes, memory_order_relaxed);
		}
		if (c->fd[i] >= 0)
			worker_close_fd(w, c->fd[i]);
	}
	if (c->be) {
		if (c->established) {
			atomic_fetch_sub_explicit(&c->be->active, 1, memory_order_relaxed);
			/* with its log line: the two agree */
			hlb_backend_count_end(c->be, w->id, conn_backend_end(c->end));
		}
		if (c->claimed)
			conn_unclaim(w, c);
		hlb_backend_unref(c->be);
	}
	if (c->per_client) {
		struct hlb_client_key k;

		conn_client_key(c, c->client_keep, &k);
		hlb_clients_release(atomic_load_explicit(&svc->clients, memory_order_relaxed), &k);
	}
	atomic_fetch_sub_explicit(&svc->active, 1, memory_order_relaxed);
	hlb_service_unref(svc);
	free(c->orig);
	c->prev->next = c->next;
	c->next->prev = c->prev;
	w->n_conns--;
	atomic_store_explicit(&w->n_conns_pub, w->n_conns, memory_order_relaxed);
	c->next = w->free_conns;
	w->free_conns = c;
}

/*
 * While <c> is not served yet, waiting in the queue or on a connect that
 * takes long (one still in flight at the idle scan, or a retry after a
 * connect timeout), a poll on its client tells whether the client leaves:
 * a reset (POLLERR, POLLHUP), or, with abort_on_close, its FIN (POLLRDHUP).
 * Data the client sends does not wake it. A reset that came before the
 * poll was armed is reported at once. The poll stays armed from the queue
 * through the connects that follow, until one is established
 * (client_unwatch()) or the connection is aborted. Not armed for a connect
 * that completes before the scan: the connection per request pays no SQE
 * for it.
 */
static void client_watch(struct worker *w, struct conn *c, const struct hlb_snapshot *snap)
{
	struct io_uring_sqe *sqe;

	/* After its FIN, only to drop it from the queue (abort_on_close): the poll fires at once */
	if (c->watch || (c->watch_fin && !(c->state == CONN_QUEUED && snap->abort_on_close)))
		return;
	sqe = worker_sqe(w);
	io_uring_prep_poll_add(sqe, c->fd[0], snap->abort_on_close ? POLLRDHUP : 0);
	io_uring_sqe_set_data64(sqe, ud_make(c, OP_CLIENT_WATCH));
	c->inflight++;
	c->watch = true;
}

/* <c> is served: remove its client watch, if armed. Its CQE (-ECANCELED) clears c->watch. */
static void client_unwatch(struct worker *w, struct conn *c)
{
	struct io_uring_sqe *sqe;

	if (!c->watch)
		return;
	sqe = worker_sqe(w);
	io_uring_prep_poll_remove(sqe, ud_make(c, OP_CLIENT_WATCH));
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, 0);
}

/*
 * The waiting client *<pp> points to (w->queue_head or one's <qnext>), NULL
 * past the last. Every walk of the queue follows its links through this, so
 * that it is counted (queue_steps): what walks cost shows in
 * hashlb_worker_queue_steps_total, which a client that leaves (unlinked by
 * its <qprev>) does not add to.
 */
static struct conn *queue_step(struct worker *w, struct conn *const *pp)
{
	struct conn *c = *pp;

	if (c)
		hlb_stat_add(&w->queue_steps, 1);
	return c;
}

/*
 * Bit 0 of a service's wstats.queue_fp: the service is fresh in the worker's
 * queue, its part (the other 63 bits) not in w->queue_fp (conn_queue_run()).
 */
#define QUEUE_FP_FRESH 1ull

static bool queue_svc_fresh(const struct worker *w, const struct hlb_service *svc)
{
	return svc->wstats[w->id].queue_fp & QUEUE_FP_FRESH;
}

static void queue_svc_set_fresh(struct worker *w, struct hlb_service *svc, bool fresh)
{
	uint64_t *fp = &svc->wstats[w->id].queue_fp;

	*fp = (*fp & ~QUEUE_FP_FRESH) | fresh;
}

/*
 * No client of <svc> waits in the worker's queue any more: while none does, its part of
 * the fingerprint is no client's, and is left out of w->queue_fp (fresh, as one that
 * joins: conn_queue_run()), so that a change it counts meanwhile walks no one, and the
 * client that joins next is tried alone. One not noted since the walk under way began is
 * not in the sum that walk leaves.
 */
static void queue_svc_idle(struct worker *w, struct hlb_service *svc)
{
	struct hlb_service_wstats *ws = &svc->wstats[w->id];

	if (ws->queue_mark != w->queue_svc_mark || queue_svc_fresh(w, svc))
		return;
	w->queue_fp -= ws->queue_fp;
	queue_svc_set_fresh(w, svc, true);
}

/* Take <c> off the worker's queue; *<pp> points to it. Its client watch stays armed. */
static void queue_unlink(struct worker *w, struct conn **pp)
{
	struct conn *c = *pp;

	*pp = c->qnext;
	if (c->qnext)
		c->qnext->qprev = pp;
	else
		w->queue_tail = pp;
	if (w->queue_fresh_at == &c->qnext)
		w->queue_fresh_at = pp;
	c->qnext = NULL;
	c->state = CONN_CONNECTING;
	c->queue_ms = (uint32_t)w->now_ms - c->queue_ms; /* what it waited, in all */
	w->queue_n--;
	atomic_fetch_sub_explicit(&c->svc->queued, 1, memory_order_relaxed);
	if (!--c->svc->wstats[w->id].queue_n) {
		worker_queue_left(w, c->svc);
		queue_svc_idle(w, c->svc);
	}
}

/*
 * <svc> has clients in the worker's queue: one of w->queue_svcs (a reference
 * taken), found by its mark in O(1) whatever the number of services. The
 * array grows as services first wait here and is kept (freed at exit): no
 * memory for it leaves the queue walked every time (queue_svcs_lost).
 * <fresh>: noted as a client joins, not by a walk that read its part.
 */
static void queue_svc_note(struct worker *w, struct hlb_service *svc, bool fresh)
{
	struct hlb_service_wstats *ws = &svc->wstats[w->id];

	if (ws->queue_mark == w->queue_svc_mark)
		return;
	queue_svc_set_fresh(w, svc, fresh);
	if (hlb_grow((void **)&w->queue_svcs, &w->queue_svcs_cap, w->n_queue_svcs + 1,
		     sizeof(*w->queue_svcs), 8) < 0) {
		w->queue_svcs_lost = true;
		return;
	}
	ws->queue_mark = w->queue_svc_mark;
	w->queue_svcs[w->n_queue_svcs++] = hlb_service_ref(svc);
}

/*
 * Out of w->queue_svcs, the services none of whose clients waits here any more
 * (wstats.queue_n 0: queue_svc_idle() left them fresh, their parts out of
 * w->queue_fp): a look reads none of their backends (queue_fingerprint()),
 * queue_fp_cheaper() counts none, and their references go. One whose client
 * joins again is noted again (queue_svc_note()), fresh, as a service new to
 * the queue. Not within a walk of the whole queue, which keeps the old ones
 * first (conn_queue_run()).
 */
static void queue_svcs_drop_idle(struct worker *w)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < w->n_queue_svcs; i++) {
		struct hlb_service *svc = w->queue_svcs[i];

		if (svc->wstats[w->id].queue_n) {
			w->queue_svcs[n++] = svc;
			continue;
		}
		queue_svc_idle(w, svc); /* its part out of w->queue_fp, if not yet */
		svc->wstats[w->id].queue_mark = 0; /* never a worker's mark */
		hlb_service_unref(svc);
	}
	w->n_queue_svcs = n;
}

/* The queue is empty: its services' references given back, their marks no longer count. */
void conn_queue_svcs_free(struct worker *w)
{
	for (uint32_t i = 0; i < w->n_queue_svcs; i++)
		hlb_service_unref(w->queue_svcs[i]);
	w->n_queue_svcs = 0;
	w->queue_svcs_lost = false;
	w->queue_svc_mark++;
}

/* <c> no longer waits for backend <be> (its c->be while it was queued). */
static void queue_release(struct hlb_backend *be)
{
	atomic_fetch_sub_explicit(&be->waiting, 1, memory_order_relaxed);
	hlb_backend_unref(be);
}

/*
 * A client in the worker's queue found <be> at its max_connections: a walk
 * looks for room there (queue_fingerprint()). Only this worker writes its
 * bit, and only it reads it.
 */
static void queue_want(const struct worker *w, struct hlb_backend *be)
{
	atomic_uint_fast64_t *word = &be->queue_wanted[w->id / 64];
	uint64_t bit = 1ull << (w->id % 64);

	if (!(atomic_load_explicit(word, memory_order_relaxed) & bit))
		atomic_fetch_or_explicit(word, bit, memory_order_relaxed);
}

/* No client in the worker's queue is known to want <be> any more. */
static void queue_unwant(const struct worker *w, struct hlb_backend *be)
{
	atomic_uint_fast64_t *word = &be->queue_wanted[w->id / 64];
	uint64_t bit = 1ull << (w->id % 64);

	if (atomic_load_explicit(word, memory_order_relaxed) & bit)
		atomic_fetch_and_explicit(word, ~bit, memory_order_relaxed);
}

static bool queue_wants(const struct worker *w, const struct hlb_backend *be)
{
	return atomic_load_explicit(&be->queue_wanted[w->id / 64], memory_order_relaxed) &
	       (1ull << (w->id % 64));
}

/* A client that stays in the queue, or just entered it, wants what conn_connect() found full. */
static void queue_want_seen(const struct worker *w)
{
	for (uint32_t i = 0; i < w->n_full_seen; i++)
		queue_want(w, w->full_seen[i]);
}

/*
 * A client of <svc> that just entered the queue, counted now (the service's
 * <queued>, and if it is the first of <svc> here, <joined>, the worker's bit
 * of svc->queue_workers): a slot that frees on another worker from now on
 * kicks this one (conn_unclaim()), and so does any change for <svc>. One
 * that freed between the client's failed claim and that count found it not
 * counted, and kicked none: it is looked for here, and the queue looked at
 * this turn if one is free. So is a change for <svc> that found the bit not
 * set, if one may have come since the client read what it changed: it is
 * counted before that kick (hlb_service_queue_changed(), release), and the
 * client read after the last walk of the whole queue that read the count
 * (queue_changes_seen(), acquire) and so saw every change counted before.
 * Either a change's kick loads the bit after this fence, or the count loaded
 * here is the change's or later.
 */
static void queue_recheck(struct worker *w, struct hlb_service *svc, bool joined)
{
	/* pairs with conn_unclaim()'s and claim_undone()'s, and with kick_fence() */
	atomic_thread_fence(memory_order_seq_cst);
	if (joined && atomic_load_explicit(&svc->queue_changes, memory_order_relaxed) !=
			      svc->wstats[w->id].queue_seen)
		w->queue_kick = true;
	for (uint32_t i = 0; i < w->n_full_seen; i++) {
		const struct hlb_backend *be = w->full_seen[i];
		uint32_t cap = atomic_load_explicit(&be->max_conns, memory_order_relaxed);

		if (cap && atomic_load_explicit(&be->claimed, memory_order_relaxed) < cap)
			w->queue_kick = true;
	}
}

/* Whether deadline <a> comes before <b> (worker clock, wrapping). */
static bool due_before(const struct queue_due *a, const struct queue_due *b)
{
	return (int32_t)(a->until - b->until) < 0;
}

/* Heap <h> of <n> entries: entry <i> moved down to its place. */
static void dues_sift_down(struct queue_due *h, uint32_t n, uint32_t i)
{
	struct queue_due d = h[i];

	for (uint32_t k; (k = 2 * i + 1) < n; i = k) {
		if (k + 1 < n && due_before(&h[k + 1], &h[k]))
			k++;
		if (!due_before(&h[k], &d))
			break;
		h[i] = h[k];
	}
	h[i] = d;
}

/* Whether <d> is the deadline of a client still waiting. */
static bool due_waits(const struct queue_due *d)
{
	return d->c->state == CONN_QUEUED && d->c->queued_until == d->until;
}

/*
 * Room in w->queue_dues for one more deadline: false if no memory. The
 * entries of clients that left are dropped as their deadlines come, and
 * all at once when they could be as many as those that wait: once the heap
 * holds twice what it kept at the last clean-up (so that a clean-up, a
 * look at each entry, costs each wait two looks at most).
 */
static bool queue_due_room(struct worker *w)
{
	struct queue_due *h = w->queue_dues;

	if (w->n_queue_dues >= 2 * w->queue_dues_kept + 64) {
		uint32_t n = 0;

		for (uint32_t i = 0; i < w->n_queue_dues; i++)
			if (due_waits(&h[i]))
				h[n++] = h[i];
		for (uint32_t i = n / 2; i-- > 0;)
			dues_sift_down(h, n, i);
		w->n_queue_dues = w->queue_dues_kept = n;
	}
	return hlb_grow((void **)&w->queue_dues, &w->queue_dues_cap, w->n_queue_dues + 1,
			sizeof(*w->queue_dues), 64) == 0;
}

/* <c> waits until c->queued_until: noted (after queue_due_room()). */
static void queue_due_add(struct worker *w, struct conn *c)
{
	struct queue_due *h = w->queue_dues, d = { .until = c->queued_until, .c = c };
	uint32_t i = w->n_queue_dues++;

	for (uint32_t p; i && due_before(&d, &h[p = (i - 1) / 2]); i = p)
		h[i] = h[p];
	h[i] = d;
}

/* Whether the earliest deadline in w->queue_dues has come (its client may have left). */
static bool queue_due(const struct worker *w)
{
	return w->n_queue_dues && (int32_t)((uint32_t)w->now_ms - w->queue_dues[0].until) >= 0;
}

/* When the queue is due next: its earliest deadline, or the walk due anyway (if any). */
static void queue_next(struct worker *w)
{
	w->queue_next_ms = w->queue_walk_by;
	if (w->n_queue_dues) {
		int32_t in = (int32_t)(w->queue_dues[0].until - (uint32_t)w->now_ms);
		uint64_t at = w->now_ms + (uint64_t)(in > 0 ? in : 0);

		if (at < w->queue_next_ms)
			w->queue_next_ms = at;
	}
}

/*
 * Close the clients whose deadline came, that no walk of the queue could
 * serve (conn_queue_run()), the earliest first: each costs the look at its
 * own entry, and that of a client that left before its deadline, not a
 * look at the clients that still wait.
 */
static void queue_expire(struct worker *w)
{
	while (queue_due(w)) {
		struct queue_due d = w->queue_dues[0];

		w->queue_dues[0] = w->queue_dues[--w->n_queue_dues];
		dues_sift_down(w->queue_dues, w->n_queue_dues, 0);
		hlb_stat_add(&w->queue_deadline_looks, 1);
		if (!due_waits(&d))
			continue; /* left, or waits again under a deadline of its own (noted) */
		hlb_stat_add(&d.c->svc->wstats[w->id].queue_timeouts, 1);
		conn_abort(w, d.c, CONN_END_QUEUE_TIMEOUT);
	}
}

/*
 * Whether half <i> of established <c> owes its destination bytes: read from
 * its source and not delivered yet (a send in flight or waiting, a buffer
 * parked, a spill, a pipe not empty), or taken by hashlb's socket there and
 * not read yet (their sender counts them as sent: its kernel acknowledged
 * them). One ioctl when it holds none: at an end, never per I/O.
 */
static bool half_owes(const struct conn *c, int i)
{
	const struct half *h = &c->h[i];
	int unread = 0;

	if (h->send_bid != BUF_NONE || h->pend_bid != BUF_NONE || (h->spliced && h->pipe_len))
		return true;
	return !h->eof && ioctl(c->fd[i], SIOCINQ, &unread) == 0 && unread > 0;
}

/* Cancel the request <ud> of a connection; its own CQE says when it ended. */
static void conn_cancel(struct worker *w, uint64_t ud)
{
	struct io_uring_sqe *sqe = worker_sqe(w);

	io_uring_prep_cancel64(sqe, ud, 0);
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, 0);
}

/*
 * Cancel each request <c> has in flight, by its user data: a lookup in one
 * bucket of the ring's table of polls. A cancel by descriptor walks the
 * whole table, every poll of every connection of the worker: a mass close
 * (a drain's deadline, ctl close, a backend down) cost the square of the
 * connections (6,000 at a drain's deadline: 1.7 CPU seconds, the workers
 * stalled), and so did thousands of connects to a backend that drops SYNs
 * timing out together (7,000: 3.9 CPU seconds). Not served yet, <c> has at
 * most its connect (its backend socket open while connecting), its PROXY
 * header's poll and its client watch. False, with nothing sent, if <c> has
 * a request in flight that its state and flags do not tell (the caller
 * cancels by descriptor).
 */
static bool conn_cancel_each(struct worker *w, struct conn *c)
{
	bool connect = c->state == CONN_CONNECTING && c->fd[1] >= 0;
	bool header = c->state == CONN_HEADER;
	uint32_t n = c->watch + connect + header;

	for (int i = 0; i < 2; i++) {
		const struct half *h = &c->h[i];

		n += h->recv_armed + h->poll_armed + h->watch + h->out_armed +
		     (h->send_bid != BUF_NONE && h->send_bid != BUF_PRIV);
	}
	if (n != c->inflight)
		return false;
	for (int i = 0; i < 2; i++) {
		const struct half *h = &c->h[i];

		if (h->recv_armed)
			conn_cancel(w, ud_make(c, OP_RECV + i));
		if (h->send_bid != BUF_NONE && h->send_bid != BUF_PRIV)
			conn_cancel(w, ud_make(c, OP_SEND + i));
		if (h->poll_armed)
			conn_cancel(w, ud_make(c, OP_POLL + i));
		if (h->watch)
			conn_cancel(w, ud_make(c, OP_WATCH + i));
		if (h->out_armed)
			conn_cancel(w, ud_make(c, OP_OUT + i));
	}
	if (connect)
		conn_cancel(w, ud_make(c, OP_CONNECT));
	if (header)
		conn_cancel(w, ud_make(c, OP_HEADER));
	if (c->watch)
		conn_cancel(w, ud_make(c, OP_CLIENT_WATCH));
	return true;
}

/* Take <c>, CONN_LENT, off w->lent. */
static void lent_unlink(struct conn *c)
{
	*c->lprev = c->qnext;
	if (c->qnext)
		c->qnext->lprev = c->lprev;
	c->qnext = NULL;
}

void conn_abort(struct worker *w, struct conn *c, enum conn_end end)
{
	bool cancelled;

	if (c->state == CONN_CLOSING)
		return;
	/* Not served yet (reading its PROXY header, connecting, queued):
	 * whatever the end, the client is reset (client_refuse()). Not one
	 * lent to an upgrade's new process: the socket may be its now (the
	 * lender closes its copy, SO_LINGER is the socket's). */
	if (c->state == CONN_LENT)
		lent_unlink(c);
	else if (c->state != CONN_OPEN)
		sock_reset_on_close(c->fd[0]);
	/* Established, closed by hashlb (a timeout, a drain, ctl close): a
	 * side whose stream it cuts short is reset, as a reset would have it;
	 * a FIN would pass what it got off as the whole stream. A side owed
	 * nothing gets a FIN. (A reset's ends reset the other side already.) */
	else if (end != CONN_END_CLIENT_RESET && end != CONN_END_BACKEND_RESET &&
		 end != CONN_END_ERROR)
		for (int i = 0; i < 2; i++)
			if (half_owes(c, i))
				sock_reset_on_close(c->fd[1 - i]);
	if (c->state == CONN_QUEUED) {
		queue_unlink(w, c->qprev);
		queue_release(c->be);
		c->be = NULL;
		hlb_backend_unref(c->retry_of);
	}
	cancelled = conn_cancel_each(w, c);
	c->state = CONN_CLOSING;
	c->end = end;
	for (int i = 0; i < 2; i++) {
		starve_remove(w, &c->h[i]);
		if (!cancelled && c->inflight && c->fd[i] >= 0) {
			struct io_uring_sqe *sqe = worker_sqe(w);

			io_uring_prep_cancel_fd(sqe, c->fd[i], IORING_ASYNC_CANCEL_ALL);
			sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
			io_uring_sqe_set_data64(sqe, 0);
			hlb_stat_add(&w->cancels_by_fd, 1);
		}
	}
	conn_maybe_free(w, c);
}

/*
 * The errno to log for socket <fd>, found gone with EPIPE: ECONNRESET if
 * its peer reset it. The kernel names a reset EPIPE when it comes after the
 * peer's FIN (a client that sent its request and half-closed, then closed
 * with the answer unread: a common end), and a send finds EPIPE on a socket
 * reset whose error another reader took, or that io_uring swallowed in a
 * send that had sent a part. Either way the socket is closed (TCP_CLOSE)
 * without hashlb having shut it. Only a timeout closes one so too, and
 * every timeout leaves its retransmissions or probes counted (none is
 * counted before the first, and the peer's ACKs zero the probes), but one:
 * user_timeout on a peer whose window stays closed, that ACKs each probe.
 * So with a user_timeout set, or when the socket cannot tell, EPIPE stays.
 */
static int sock_epipe_why(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int ut = 0;
	socklen_t ut_len = sizeof(ut);

	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
	    len < offsetof(struct tcp_info, tcpi_backoff) || ti.tcpi_state != TCP_CLOSE ||
	    ti.tcpi_retransmits || ti.tcpi_probes ||
	    getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, &ut_len) < 0 || ut)
		return EPIPE;
	return ECONNRESET;
}

/*
 * Socket <side> (0 client, 1 backend) failed with errno <err>: abort. The
 * other side is reset too (SO_LINGER 0: its close sends RST, not FIN), as it
 * would be without hashlb between them: a FIN would tell it the stream ended
 * complete, and a backend would take a truncated upload, or a client a
 * truncated response, for the whole of it.
 */
static void conn_reset(struct worker *w, struct conn *c, int side, int err)
{
	if (c->fd[1 - side] >= 0)
		sock_reset_on_close(c->fd[1 - side]);
	if (err == EPIPE && c->fd[side] >= 0)
		err = sock_epipe_why(c->fd[side]);
	c->err = (uint8_t)err;
	conn_abort(w, c, side ? CONN_END_BACKEND_RESET : CONN_END_CLIENT_RESET);
}

/*
 * The recv of half <i>, in flight when <c> was reset, ended with <res>. A
 * socket the kernel gave up on (TCP_USER_TIMEOUT, keepalive, a reset) holds
 * its error for one reader only: when that was this recv, run by io_uring
 * before the send or splice into the same socket whose EPIPE (the socket
 * shut, its error taken) reset <c>, the recv has the reason, and the log
 * line (written when <c> is freed) gets it rather than EPIPE.
 */
static void conn_reset_why(struct conn *c, int i, int res)
{
	enum conn_end end = i ? CONN_END_BACKEND_RESET : CONN_END_CLIENT_RESET;

	if (c->end == end && c->err == EPIPE && res < 0 && res != -ECANCELED && res != -EPIPE &&
	    res != -ENOBUFS)
		c->err = (uint8_t)-res;
}

/*
 * io_uring failed a request of <c> with errno <err> (a poll), or the ring
 * itself: the streams cannot go on. Reset both ends, client and backend
 * (SO_LINGER 0): a FIN would tell either the stream ended complete.
 */
static void conn_fail(struct worker *w, struct conn *c, int err)
{
	/* Not a lent client's: the new process may hold its socket (see conn_abort()). */
	for (int i = c->state == CONN_LENT; i < 2; i++)
		if (c->fd[i] >= 0)
			sock_reset_on_close(c->fd[i]);
	c->err = (uint8_t)err;
	conn_abort(w, c, CONN_END_ERROR);
}

/*
 * The worker's ring is gone (io_uring_enter() failed with <err>, see
 * worker_main()): every request in flight went with it, so no connection
 * can be served further. Reset each one, client and backend (SO_LINGER 0:
 * a FIN would tell either end the stream ended complete), and free it now:
 * w->ring_gone makes worker_close_fd() close at once. One that was closing
 * already keeps the end it had (a reset, or both FINs forwarded). Returns
 * how many there were.
 */
uint64_t conn_reset_all(struct worker *w, int err)
{
	uint64_t n = 0;

	while (w->conns.next != &w->conns) {
		struct conn *c = w->conns.next;

		/* their CQEs will never come: nothing holds the connection now */
		c->inflight = 0;
		if (c->state == CONN_CLOSING) {
			conn_maybe_free(w, c);
		} else {
			conn_fail(w, c, err);
		}
		n++;
	}
	return n;
}

/*
 * Close the connection once both directions are done: the multishot polls
 * still armed (half_watch(), half_out_arm()), which nothing else would end,
 * are cancelled here, and <c> is freed with the last CQE.
 */
static void conn_finish(struct worker *w, struct conn *c)
{
	c->state = CONN_CLOSING;
	c->end = CONN_END_DONE;
	/* Their last CQEs (-ECANCELED) clear the flags and free c. A cancel,
	 * not IORING_OP_POLL_REMOVE: that fails (-EALREADY) while a wake-up of
	 * the poll is pending, as when it was armed in this same turn on a
	 * socket past its FIN, and the poll, multishot, would stay for good. */
	for (int i = 0; i < 2; i++) {
		if (c->h[i].watch)
			conn_cancel(w, ud_make(c, OP_WATCH + i));
		if (c->h[i].out_armed)
			conn_cancel(w, ud_make(c, OP_OUT + i));
	}
	conn_maybe_free(w, c);
}

static bool half_done(const struct half *h)
{
	return h->eof && h->send_bid == BUF_NONE;
}

/*
 * Half <i> waits for <events> on <fd>: its source readable (POLLIN, spliced)
 * or its destination's room (POLLOUT). A one-shot poll; but io_uring
 * reports POLLRDHUP whatever the mask, so once the destination has sent its
 * FIN such a poll ends at once, and polled again it would end at once again:
 * a worker spinning at full CPU for as long as a client that half-closed
 * (or a backend) reads slowly. Then half_out_arm() waits for the room.
 */
static void half_poll(struct worker *w, struct conn *c, int i, int fd, unsigned int events)
{
	struct half *h = &c->h[i];
	struct io_uring_sqe *sqe;

	h->poll_out = events == POLLOUT;
	if (h->poll_out && h->out_armed) {
		h->out_wait = true; /* the multishot poll reports the next room */
		return;
	}
	sqe = worker_sqe(w);
	io_uring_prep_poll_add(sqe, fd, events);
	io_uring_sqe_set_data64(sqe, ud_make(c, OP_POLL + i));
	c->inflight++;
	h->poll_armed = true;
}

/*
 * Half <i>'s destination sent its FIN, and it waits for room on it: a
 * multishot poll, armed until the connection ends, reports each time room
 * comes (a wake-up for room, after a send found none); those that report
 * only the FIN are passed over.
 */
static void half_out_arm(struct worker *w, struct conn *c, int i)
{
	struct io_uring_sqe *sqe = worker_sqe(w);

	io_uring_prep_poll_multishot(sqe, c->fd[1 - i], POLLOUT);
	io_uring_sqe_set_data64(sqe, ud_make(c, OP_OUT + i));
	c->inflight++;
	c->h[i].out_armed = true;
	c->h[i].out_wait = true;
}

/*
 * No recv is armed on half <i>'s source: it stopped reading because its
 * destination does not take more (spilled, a send waiting in the kernel, a
 * full pipe), or the source sent its FIN. Nothing would see it reset. Watch
 * it with a multishot poll (io_uring reports POLLERR, POLLHUP and POLLRDHUP
 * whatever the mask; data and room to write do not wake it): a reset then
 * reaches the other side at once, as it would without hashlb between them,
 * not once the destination reads again, nor never, the idle timeout closing
 * the destination with a FIN after a truncated stream. Multishot, because a
 * FIN leaves the socket reporting POLLRDHUP: a one-shot poll would end there
 * and miss a reset that follows. The poll stays until the connection ends
 * (conn_finish() removes it, an abort cancels it).
 */
static void half_watch(struct worker *w, struct conn *c, int i)
{
	struct half *h = &c->h[i];
	struct io_uring_sqe *sqe;

	if (h->watch || h->watch_fin || h->recv_armed || c->state != CONN_OPEN)
		return;
	sqe = worker_sqe(w);
	io_uring_prep_poll_multishot(sqe, c->fd[i], 0);
	io_uring_sqe_set_data64(sqe, ud_make(c, OP_WATCH + i));
	c->inflight++;
	h->watch = true;
}

/*
 * The watch of half <i>'s source fired with <res>; <more>: it stays armed.
 * May free <c>.
 */
static void half_watch_done(struct worker *w, struct conn *c, int i, int res, bool more)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (!more)
		c->h[i].watch = false;
	if (res < 0)
		return; /* cannot watch: a reset is found when it is read again, as before */
	if (!(res & POLLERR)) {
		/* its FIN: read in its turn. A watch the kernel ended is not
		 * armed again: it would fire at once, and again. */
		if (!more)
			c->h[i].watch_fin = true;
		return;
	}
	getsockopt(c->fd[i], SOL_SOCKET, SO_ERROR, &err, &len);
	conn_reset(w, c, i, err ? err : ECONNRESET); /* may free c */
}

/*
 * The source of half <i> sent FIN and all it sent has been forwarded. While
 * the other direction goes on, nothing reads that source any more: the idle
 * scan watches it (conn_watch_after_fin()).
 */
static void half_finish(struct worker *w, struct conn *c, int i)
{
	if (half_done(&c->h[1 - i])) {
		conn_finish(w, c);
		return;
	}
	/* A plain syscall: IORING_OP_SHUTDOWN is punted to an io-wq thread,
	 * which costs far more than the syscall itself. */
	shutdown(c->fd[1 - i], SHUT_WR);
}

/*
 * A source that sent its FIN may reset after it (a close with data unread,
 * or SO_LINGER 0): a watch tells, so that the other side is reset too, as
 * without hashlb between them, rather than left open until the idle
 * timeout. Armed by the idle scan, not at the FIN: most connections end
 * within a scan of their first FIN (a response and its FIN, then the
 * client's), and a watch armed and removed for each cost 2.5% of the
 * connection-per-request workload's CPU. A reset before the arm is seen at
 * once (the socket's error stays), so one is passed on within a scan.
 */
static void conn_watch_after_fin(struct worker *w, struct conn *c)
{
	for (int i = 0; i < 2; i++)
		if (half_done(&c->h[i]))
			half_watch(w, c, i);
}

/*
 * Half <i>'s source read its end (a recv or a splice of 0 bytes): whether
 * that was a reset, not a FIN. A reset leaves its error on the socket for
 * one reader only, and the other half's send to the same socket, waiting
 * in the kernel (past the spill cap) or spilled, may take it first: io_uring
 * then completes that send with the error, or with the bytes it had sent
 * (the error lost), and reading the socket, shut both ways, gives its end.
 * Passed on as a FIN, it would tell the other side the stream ended
 * complete. Such a socket is closed (POLLHUP) with no error left (no
 * POLLERR); one that sent its FIN is not closed, and one reset after its
 * FIN still holds the error, which its watch passes on after the FIN
 * (half_watch()). Only asked while that send is pending: nothing else
 * takes a socket's error unseen. Counted (resets_taken): a test can tell
 * that the race it arranged happened.
 */
static bool half_reset_taken(struct worker *w, const struct conn *c, int i)
{
	struct pollfd p = { .fd = c->fd[i] };

	if (c->h[1 - i].send_bid == BUF_NONE)
		return false;
	if (poll(&p, 1, 0) != 1 || (p.revents & (POLLHUP | POLLERR)) != POLLHUP)
		return false;
	hlb_stat_add(&w->pub.resets_taken, 1);
	return true;
}

/* <n> bytes of half <i> delivered to its destination (buffers or splice). */
static void half_count(struct worker *w, struct conn *c, int i, uint32_t n)
{
	struct hlb_backend_wstats *bs = &c->be->wstats[w->id];

	hlb_stat_add(i == 0 ? &bs->bytes_in : &bs->bytes_out, n);
	c->h[i].bytes += n;
	c->last_ms = (uint32_t)w->now_ms;
}

/*
 * splice() from a socket stops at the urgent mark (a byte sent MSG_OOB):
 * it reads nothing there, with EAGAIN, while poll() reports the socket
 * readable, so polling again would spin for good; and with 0, as at the
 * stream's end, once the peer's FIN is queued behind the mark, which would
 * drop what follows the mark and pass the FIN on (and the urgent byte left
 * unread would have the close reset the peer). Only recv() steps over the
 * urgent byte (dropped, as on buffers and by the peers: not in-line).
 * <n> is what the splice from half <i>'s source returned: if it read
 * nothing (0, or -1 with EAGAIN) and the source is at the mark, read what
 * follows the mark into the (empty) pipe: the bytes read (> 0), 0 at the
 * end, -1 with errno set (EAGAIN: nothing follows yet). Otherwise <n>, its
 * errno kept.
 */
static ssize_t half_splice_urgent(struct conn *c, int i, ssize_t n)
{
	char buf[PIPE_BUF];
	int err = errno, mark = 0;

	if (n > 0 || (n < 0 && err != EAGAIN))
		return n;
	if (ioctl(c->fd[i], SIOCATMARK, &mark) < 0 || !mark) {
		errno = err;
		return n;
	}
	n = recv(c->fd[i], buf, sizeof(buf), MSG_DONTWAIT);
	/* the pipe is empty: a write of up to PIPE_BUF bytes goes in whole */
	if (n > 0 && write(c->h[i].pipe[1], buf, (size_t)n) != n) {
		errno = EIO; /* cannot happen; never as EAGAIN, which would lose the bytes */
		return -1;
	}
	return n;
}

/*
 * Move what is ready on spliced half <i>: empty the pipe into the
 * destination, then refill it from the source, until one of them would
 * block (then poll it) or the source has ended. May free <c>.
 */
static void half_splice_pump(struct worker *w, struct conn *c, int i)
{
	struct hlb_backend_wstats *bs = &c->be->wstats[w->id];
	struct half *h = &c->h[i];
	bool drained = false;
	ssize_t n;

	for (int round = 0;; round++) {
		while (h->pipe_len) {
			n = splice(h->pipe[0], NULL, c->fd[1 - i], NULL, h->pipe_len,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0) {
				h->pipe_len -= n;
				half_count(w, c, i, n);
				hlb_stat_add(&bs->bytes_spliced, n);
				continue;
			}
			if (n < 0 && errno == EAGAIN) {
				half_poll(w, c, i, c->fd[1 - i], POLLOUT);
				half_watch(w, c, i);
				return;
			}
			/* reset, or the peer closed */
			conn_reset(w, c, 1 - i, n < 0 ? errno : EPIPE);
			return;
		}
		if (h->eof) {
			half_finish(w, c, i);
			return;
		}
		/* A read that left the socket empty: wait for more rather than
		 * try a read that fails. */
		if (drained || round >= SPLICE_ROUNDS) {
			half_poll(w, c, i, c->fd[i], POLLIN);
			return;
		}
		n = splice(c->fd[i], NULL, h->pipe[1], NULL, SPLICE_LEN,
			   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		n = half_splice_urgent(c, i, n); /* n unless it read nothing at the mark */
		if (n > 0) {
			h->pipe_len = n;
			drained = n < SPLICE_READ_MIN;
		} else if (n == 0) {
			if (half_reset_taken(w, c, i)) {
				conn_reset(w, c, i, ECONNRESET);
				return;
			}
			h->eof = true;
		} else if (errno == EAGAIN) {
			half_poll(w, c, i, c->fd[i], POLLIN);
			return;
		} else {
			conn_reset(w, c, i, errno);
			return;
		}
	}
}

/* Half <h> stays on buffers for now, a bulk stream without a pipe: counted once, not at each try. */
static void half_splice_refused(struct worker *w, struct half *h)
{
	if (h->splice_refused)
		return;
	h->splice_refused = true;
	hlb_stat_add(&w->pub.splice_refused, 1);
}

/* The inode of the initial user namespace's nsfs file (PROC_USER_INIT_INO, fixed since 3.8) */
#define USER_NS_INIT_INO 0xEFFFFFFDUL

/* Whether this thread holds capability <cap> in the kernel's own user namespace, where the
 * pipe limits look (capable()): in another one (a container's) its capabilities do not count.
 * Told by the namespace itself, not its uid_map: one of a container can map every uid as the
 * initial one does ("0 0 4294967295"). */
static bool pipe_capable(int cap)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];
	struct stat st;

	if (stat("/proc/self/ns/user", &st) < 0 || st.st_ino != USER_NS_INIT_INO)
		return false;
	if (syscall(SYS_capget, &hdr, data) < 0)
		return false;
	return data[cap / 32].effective & (1u << (cap % 32));
}

/*
 * Whether a new pipe of this process can get less than the kernel's 16 pages: only without
 * CAP_SYS_RESOURCE and CAP_SYS_ADMIN, and with fs.pipe-user-pages-soft not 0; and
 * fs.pipe-max-size, for a refused --pipe-size. Read at the worker's start and every
 * PIPE_LOOK_MS (the sysctls can change); while the pipes cannot be small, no new pipe is asked
 * its size (F_GETPIPE_SZ), which a healthy host paid for each spliced direction.
 */
void worker_pipe_look(struct worker *w)
{
	w->pipe_look_ms = w->now_ms + PIPE_LOOK_MS;
	w->pipe_user_soft = hlb_sysctl_read("/proc/sys/fs/pipe-user-pages-soft");
	w->pipes_may_be_small = !pipe_capable(CAP_SYS_RESOURCE) && !pipe_capable(CAP_SYS_ADMIN) &&
				w->pipe_user_soft != 0;
	if (w->pipe_size) {
		w->pipe_max_size = hlb_sysctl_read("/proc/sys/fs/pipe-max-size");
		w->pipe_user_hard = hlb_sysctl_read("/proc/sys/fs/pipe-user-pages-hard");
	}
}

/* The bytes F_SETPIPE_SZ makes of <size>: a power of two pages (round_pipe_size()). */
static long pipe_round(long size)
{
	long r = sysconf(_SC_PAGESIZE);

	while (r < size)
		r <<= 1;
	return r;
}

/* What pipe_size_check() says of each cause, in this order: the message, the key of the
 * figure that tells it (if any), and the fix. */
static const struct {
	unsigned cause;
	const char *msg, *key, *note;
} small_pipe_says[] = {
	{ SMALL_PIPE_MAX, "splice pipes smaller than asked: --pipe-size over fs.pipe-max-size",
	  "pipe_max_size=",
	  "without CAP_SYS_RESOURCE the kernel refuses a pipe larger than fs.pipe-max-size: raise "
	  "fs.pipe-max-size to --pipe-size, give hashlb CAP_SYS_RESOURCE "
	  "(AmbientCapabilities=CAP_SYS_RESOURCE in its unit), or lower --pipe-size" },
	{ SMALL_PIPE_USER, "splice pipes smaller than asked: the kernel's per-user pipe limit",
	  NULL,
	  "without CAP_SYS_RESOURCE a user's new pipes get 8 KiB, and none grows, once its pipes "
	  "(every process of the user counted) hold more than fs.pipe-user-pages-soft pages (16384 "
	  "by default: 1,024 pipes of 64 KiB): give hashlb CAP_SYS_RESOURCE "
	  "(AmbientCapabilities=CAP_SYS_RESOURCE in its unit), raise fs.pipe-user-pages-soft (0: "
	  "no limit), or lower --splice-pipes" },
	{ SMALL_PIPE_HARD, "splice pipes smaller than asked: the kernel's hard per-user pipe limit",
	  "pipe_user_pages_hard=",
	  "without CAP_SYS_RESOURCE the kernel refuses a user's pipe to grow past "
	  "fs.pipe-user-pages-hard pages (every process of the user counted), and past it a new "
	  "pipe cannot be had at all: give hashlb CAP_SYS_RESOURCE "
	  "(AmbientCapabilities=CAP_SYS_RESOURCE in its unit), raise fs.pipe-user-pages-hard (0: "
	  "no limit), or lower --pipe-size or --splice-pipes" },
	{ SMALL_PIPE_FAILED, "splice pipes smaller than asked: the kernel could not grow them",
	  "error=",
	  "F_SETPIPE_SZ failed, not for a limit of the kernel's (ENOMEM: its memory for the larger "
	  "pipe, or hashlb's memory cgroup, at its limit): lower --pipe-size" },
};

/*
 * Whether new pipe <fd> got less than it asks for (--pipe-size, or the kernel's 16 pages), and
 * if so count it and warn, once per process for each cause, every cause it has. Without
 * CAP_SYS_RESOURCE (or CAP_SYS_ADMIN) the kernel gives each new pipe of a user whose pipes hold
 * more than fs.pipe-user-pages-soft pages in all 2 pages (8 KiB), and refuses (EPERM)
 * F_SETPIPE_SZ to grow a pipe past that limit or past fs.pipe-user-pages-hard; without
 * CAP_SYS_RESOURCE it refuses (EPERM) a --pipe-size over fs.pipe-max-size, before it looks
 * at the user's pipes; and it can fail to allocate the larger pipe (ENOMEM). Silently, a
 * spliced direction then moves 8 KiB (or 64 KiB) a round trip. F_SETPIPE_SZ answers the
 * size it gave; without it the pipe is asked (F_GETPIPE_SZ) only while its pipes can be small
 * (worker_pipe_look()). <set_ret> is F_SETPIPE_SZ's return, errno still its own if it failed.
 */
static void pipe_size_check(struct worker *w, int fd, int set_ret)
{
	int set_errno = set_ret < 0 ? errno : 0; /* before another call sets errno */
	long page = sysconf(_SC_PAGESIZE), full = 16L * page;
	long want = w->pipe_size ? (long)w->pipe_size : full;
	long max = w->pipe_max_size, soft = w->pipe_user_soft, hard = w->pipe_user_hard;
	unsigned causes = 0;
	int got;

	if (set_ret > 0)
		got = set_ret;
	else if (w->pipes_may_be_small)
		got = fcntl(fd, F_GETPIPE_SZ);
	else if (w->pipe_size) /* refused: the kernel's 16 pages, which it cannot have cut */
		got = (int)full;
	else
		return;
	if (!set_errno && (got < 0 || got >= want))
		return;
	hlb_stat_add(&w->pub.pipes_small, 1);
	/* made smaller than the kernel's 16 pages as it was created: the soft limit alone does
	 * that, whatever refused --pipe-size (fs.pipe-max-size is looked at first, and was
	 * said alone) */
	if (got >= 0 && got < full)
		causes |= SMALL_PIPE_USER;
	if (set_errno == EPERM && max > 0 && pipe_round(want) > max)
		causes |= SMALL_PIPE_MAX;
	else if (set_errno == EPERM)
		/* the user's pipes: each limit that is set (0: none). Which one refused is not
		 * told, and with both set the user may be over both: naming the lower alone sent
		 * the operator to raise a limit that left the other refusing */
		causes |= (soft != 0 ? SMALL_PIPE_USER : 0) | (hard > 0 ? SMALL_PIPE_HARD : 0);
	else if (set_errno) /* ENOMEM: no limit, no sysctl that raises it */
		causes |= SMALL_PIPE_FAILED;
	if (!causes) /* smaller than asked with no failure: cut by the soft limit */
		causes = SMALL_PIPE_USER;
	causes &= ~atomic_fetch_or(&w->proxy->small_pipe_said, causes);
	for (size_t i = 0; i < sizeof(small_pipe_says) / sizeof(small_pipe_says[0]); i++) {
		unsigned cause = small_pipe_says[i].cause;
		const char *key = small_pipe_says[i].key;
		char value[32] = "";

		if (!(causes & cause))
			continue;
		if (cause == SMALL_PIPE_MAX)
			snprintf(value, sizeof(value), "%ld", max);
		else if (cause == SMALL_PIPE_HARD)
			snprintf(value, sizeof(value), "%ld", hard);
		else if (cause == SMALL_PIPE_FAILED)
			snprintf(value, sizeof(value), "%s",
				 strerrorname_np(set_errno) ?: "unknown");
		hlb_log(HLB_LOG_WARN, small_pipe_says[i].msg,
			"worker=%u pipe_bytes=%d want_bytes=%ld%s%s%s note=\"%s\"", w->id, got,
			want, key ? " " : "", key ? key : "", value, small_pipe_says[i].note);
	}
}

/*
 * Half <i> is due to splice and has nothing in flight: give it a pipe, or
 * keep it on buffers if the cap is reached or no pipe can be had. May free
 * <c>.
 */
static void half_splice_start(struct worker *w, struct conn *c, int i)
{
	struct half *h = &c->h[i];

	h->splice_want = false;
	if (w->pipes >= w->pipes_max || !worker_pipe_room(w) ||
	    pipe2(h->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		half_splice_refused(w, h);
		h->bulk = 0; /* try again after as many bytes */
		half_recv(w, c, i, false);
		return;
	}
	/* on failure, the kernel's size: counted, said once (pipe_size_check()) */
	pipe_size_check(w, h->pipe[1],
			w->pipe_size ? fcntl(h->pipe[1], F_SETPIPE_SZ, w->pipe_size) : 0);
	if (!c->nonblock) {
		/* splice() on a socket waits unless the socket is non-blocking;
		 * io_uring's own recv and send do not care. */
		fcntl(c->fd[0], F_SETFL, O_NONBLOCK);
		fcntl(c->fd[1], F_SETFL, O_NONBLOCK);
		c->nonblock = true;
	}
	w->pipes++;
	atomic_store_explicit(&w->pub.pipes, w->pipes, memory_order_relaxed);
	h->spliced = true;
	h->pipe_len = 0;
	hlb_stat_add(&c->be->wstats[w->id].splices, 1);
	half_splice_pump(w, c, i);
}

/* After a recv of <n> bytes on half <i>: whether the direction should move to splice. */
static bool half_splice_due(struct worker *w, struct half *h, uint32_t n)
{
	if (!w->splice_after || (n < SPLICE_READ_MIN && n < w->buf_size))
		return false;
	h->bulk += n;
	if (h->bulk < w->splice_after)
		return false;
	if (w->pipes < w->pipes_max)
		return true;
	half_splice_refused(w, h); /* it switches when a pipe frees */
	return false;
}

/*
 * Half <i>'s send is all out (its buffer given back, or its spill freed):
 * go on with what waits, the FIN, the switch to splice, or the next recv.
 * May free <c>.
 */
static void half_sent(struct worker *w, struct conn *c, int i)
{
	struct half *h = &c->h[i];

	h->send_bid = BUF_NONE;
	if (h->send_more) {
		h->corked = true;
		/* starved or moving to splice: no data follows at once */
		if (!h->recv_armed && h->pend_bid == BUF_NONE && !h->eof)
			half_uncork(c, i);
	}
	if (h->pend_bid != BUF_NONE) {
		uint16_t bid = h->pend_bid;

		h->pend_bid = BUF_NONE;
		half_send(w, c, i, bid, 0, h->pend_len, h->pend_more, false);
		if (!h->splice_want)
			half_recv(w, c, i, false);
	} else if (h->eof) {
		half_finish(w, c, i);
	} else if (h->splice_want) {
		half_splice_start(w, c, i); /* may free c */
	} else if (!h->recv_armed && !h->starved) {
		half_recv(w, c, i, false); /* after a spill, whose recv appended */
	}
}

/*
 * Half <i>'s destination is full (its send answered EAGAIN, or sent a
 * part): move the rest of the buffer, and the one parked behind it, out of
 * the pool, and wait for room. False, with nothing changed, over the spill
 * cap or short of memory.
 */
static bool half_spill(struct worker *w, struct conn *c, int i)
{
	struct half *h = &c->h[i];
	uint32_t left = h->send_len - h->send_off;
	uint32_t pend = h->pend_bid != BUF_NONE ? h->pend_len : 0;
	uint8_t *p;

	if (w->spilled + left + pend > w->spill_max || !(p = malloc(left + pend)))
		return false;
	memcpy(p, bufring_addr(w, h->send_bid) + h->send_off, left);
	bufring_put(w, h->send_bid);
	if (pend) {
		memcpy(p + left, bufring_addr(w, h->pend_bid), pend);
		bufring_put(w, h->pend_bid);
		h->pend_bid = BUF_NONE;
	}
	h->send_bid = BUF_PRIV;
	h->priv = p;
	h->send_off = 0;
	h->send_len = left + pend;
	h->send_more = false; /* what the destination holds back goes with the rest */
	w->spilled += left + pend;
	hlb_stat_add(&w->pub.spills, 1);
	half_poll(w, c, i, c->fd[1 - i], POLLOUT);
	half_watch(w, c, i);
	return true;
}

/* A recv of <n> bytes in buffer <bid> on spilled half <i>: into the spill too, if it fits the cap. */
static bool half_spill_append(struct worker *w, struct half *h, uint16_t bid, uint32_t n)
{
	uint8_t *p;

	if (w->spilled + n > w->spill_max || !(p = realloc(h->priv, h->send_len + n)))
		return false;
	memcpy(p + h->send_len, bufring_addr(w, bid), n);
	bufring_put(w, bid);
	h->priv = p;
	h->send_len += n;
	w->spilled += n;
	return true;
}

/* Spilled half <i>'s destination has room: send what it can take. May free <c>. */
static void half_spill_flush(struct worker *w, struct conn *c, int i)
{
	struct half *h = &c->h[i];

	while (h->send_off < h->send_len) {
		ssize_t n = send(c->fd[1 - i], h->priv + h->send_off, h->send_len - h->send_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0) {
			half_count(w, c, i, (uint32_t)n);
			h->send_off += (uint32_t)n;
		} else if (n < 0 && errno == EAGAIN) {
			half_poll(w, c, i, c->fd[1 - i], POLLOUT);
			return;
		} else {
			conn_reset(w, c, 1 - i, n < 0 ? errno : EPIPE); /* may free c */
			return;
		}
	}
	free(h->priv);
	w->spilled -= h->send_len;
	h->corked = false;
	half_sent(w, c, i); /* may free c */
}

static void conn_fail_no_backend(struct worker *w, struct conn *c)
{
	/* Our own socket failed (no fd, the source address gone, a client of
	 * the other family with source: client): not the backends' doing, and
	 * not counted as a service without one (an alarm). */
	if (c->local_fail) {
		conn_abort(w, c, CONN_END_ERROR);
		return;
	}
	hlb_stat_add(&c->svc->wstats[w->id].no_backend, 1);
	conn_abort(w, c, c->tries ? CONN_END_CONNECT_FAILED : CONN_END_NO_BACKEND);
}

/*
 * No backend could be tried for <c>, as the conn_connect() just before found
 * (or none was called: w->first_full is NULL). If it passed over one for
 * being at its max_connections and the service has a queue, wait for room
 * on that one (up to timeouts.queue from the first wait); otherwise close.
 * <failed>: the backend whose connect just failed, if that is what this
 * follows (borrowed; the queue takes a reference of its own).
 */
static void conn_no_backend(struct worker *w, struct conn *c, const struct hlb_snapshot *snap,
			    struct hlb_backend *failed)
{
	bool joined;

	if (!w->first_full || !snap->queue_timeout_ms) {
		conn_fail_no_backend(w, c);
		return;
	}
	if (!w->queue_head) /* the deadlines noted are all of clients that left */
		w->n_queue_dues = w->queue_dues_kept = 0;
	if (!queue_due_room(w)) {
		conn_abort(w, c, CONN_END_ERROR); /* no memory to note its deadline */
		return;
	}
	if (!c->was_queued) {
		c->was_queued = true;
		c->queued_until = (uint32_t)w->now_ms + snap->queue_timeout_ms;
		hlb_stat_add(&c->svc->wstats[w->id].queued, 1);
	}
	if (!w->queue_head) {
		/* Walked this turn whatever changed, as for a kick: one given since
		 * this client's conn_connect() read what it read (a slot that
		 * freed on another worker, a snapshot, a backend serving again)
		 * found the worker's bit of svc->queue_workers (or the service's
		 * <queued>) not set yet, and woke none. The fence of
		 * queue_recheck() below pairs with the kicker's (kick_fence()):
		 * either it saw the bit set, or this walk sees its change. */
		w->queue_walk_by = w->now_ms;
		w->queue_kick = true;
	}
	joined = !c->svc->wstats[w->id].queue_n++;
	if (joined)
		worker_queue_joined(w, c->svc);
	queue_svc_note(w, c->svc, true);
	c->state = CONN_QUEUED;
	c->queue_ms = (uint32_t)w->now_ms - c->queue_ms; /* a second wait adds to the first */
	c->be = hlb_backend_ref(w->first_full);
	c->retry_of = failed ? hlb_backend_ref(failed) : NULL;
	atomic_fetch_add_explicit(&c->be->waiting, 1, memory_order_relaxed);
	c->qnext = NULL;
	c->qprev = w->queue_tail;
	*w->queue_tail = c;
	w->queue_tail = &c->qnext;
	w->queue_n++;
	atomic_fetch_add_explicit(&c->svc->queued, 1, memory_order_relaxed);
	queue_due_add(w, c); /* after CONN_QUEUED: a second wait is noted again */
	queue_next(w);
	if (!w->queue_kick) /* else the look this turn brings the tick forward after it */
		worker_tick_by(w, w->queue_next_ms);
	queue_want_seen(w);
	queue_recheck(w, c->svc, joined);
	client_watch(w, c, snap); /* armed already if it came back from a retry */
}

/* The client watch of <c> completed with <res>. May free <c>. */
static void conn_client_watch_done(struct worker *w, struct conn *c, int res)
{
	int err = 0;
	socklen_t len = sizeof(err);

	c->watch = false;
	if (c->state != CONN_QUEUED && c->state != CONN_CONNECTING) {
		/* removed once served, or fired as it was: a reset is read there */
		conn_maybe_free(w, c);
		return;
	}
	if (res < 0)
		return; /* cannot watch: it waits for its turn or its connect, as without the watch */
	/* Its FIN alone (io_uring always reports POLLRDHUP): a client that
	 * sent its request and half-closed keeps its place and its connect,
	 * unless abort_on_close drops it from the queue. Not watched any more
	 * (the poll would fire again at once): a reset after that is found at
	 * its turn, or when its connect ends. */
	if (!(res & (POLLERR | POLLHUP)) &&
	    (c->state != CONN_QUEUED || !hlb_service_snapshot(c->svc)->abort_on_close)) {
		c->watch_fin = true;
		return;
	}
	if (c->state == CONN_QUEUED)
		hlb_stat_add(&c->svc->wstats[w->id].queue_aborts, 1);
	/* While connecting, the abort cancels the connect and closes its
	 * socket: the backend gets no connection for a client that left. */
	if (res & (POLLERR | POLLHUP)) {
		getsockopt(c->fd[0], SOL_SOCKET, SO_ERROR, &err, &len);
		conn_reset(w, c, 0, err ? err : ECONNRESET);
	} else {
		conn_abort(w, c, CONN_END_CLIENT_CLOSED); /* its FIN */
	}
}

/*
 * TCP keepalive on <fd>: a peer that vanished without a FIN or RST (a host
 * gone, a NAT or firewall that forgot the flow) is found after
 * idle + interval * count seconds, and the connection closed, instead of
 * holding both sockets until the idle timeout, or forever with idle: 0. Only
 * while nothing is in flight to it: the kernel does not probe while data
 * waits for an ACK or for room in the peer's window, and then the idle
 * timeout, the kernel's retransmission limit, or user_timeout
 * (TCP_USER_TIMEOUT, off by default: it also ends a live peer whose window
 * stays closed that long) finds it. Best effort: a failure leaves the
 * socket as the kernel made it.
 */
static void sock_keepalive(int fd, const struct hashlb_keepalive_cfg *k)
{
	int one = 1, idle = (int)k->idle_s, intvl = (int)k->interval_s, cnt = (int)k->count;

	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	if (k->user_timeout_ms) {
		int ut = (int)k->user_timeout_ms;

		setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut));
	}
}

/*
 * A socket for a connection to <be>, set up as <snap> says (source address,
 * TCP_NODELAY, keepalive), or -errno.
 */
/*
 * source: client: bind <fd>, a socket of <family>, to the client's address
 * <src> (canonical, tuple.h), port 0. -EAFNOSUPPORT for a client of the
 * other family: no address it could have there.
 */
static int bind_client(int fd, int family, const uint8_t src[16])
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	struct sockaddr_storage ss = { .ss_family = (sa_family_t)family };
	bool v4 = !memcmp(src, v4mapped, sizeof(v4mapped));
	socklen_t len;
	int r;

	if (family == AF_INET && v4) {
		memcpy(&((struct sockaddr_in *)&ss)->sin_addr, src + 12, 4);
		len = sizeof(struct sockaddr_in);
	} else if (family == AF_INET6 && !v4) {
		memcpy(&((struct sockaddr_in6 *)&ss)->sin6_addr, src, 16);
		len = sizeof(struct sockaddr_in6);
	} else {
		return -EAFNOSUPPORT;
	}
	r = hlb_sock_transparent(fd, family);
	return r < 0 ? r : hlb_bind_source(fd, &ss, len);
}

static int backend_socket(struct worker *w, const struct hlb_snapshot *snap,
			  const struct hlb_backend *be, const struct conn *c)
{
	int fd = socket(be->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP), r, one = 1;

	if (fd < 0) {
		r = -errno;
		if (r == -EMFILE || r == -ENFILE)
			hlb_stat_add(&w->pub.fd_limit, 1);
		if ((r == -EMFILE || r == -ENFILE) && w->now_ms - w->last_fd_limit_log > 10000) {
			w->last_fd_limit_log = w->now_ms;
			hlb_log(HLB_LOG_WARN, "file descriptor limit reached, connection refused",
				"worker=%u", w->id);
		}
		return r;
	}
	/* EADDRNOTAVAIL: the address left this host since the config was applied */
	if (snap->source_len && (r = hlb_bind_source(fd, &snap->source, snap->source_len)) < 0) {
		worker_close_fd(w, fd);
		return r;
	}
	if (snap->source_client && (r = bind_client(fd, be->addr.ss_family, c->client)) < 0) {
		worker_close_fd(w, fd);
		return r;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (snap->keepalive.enabled)
		sock_keepalive(fd, &snap->keepalive);
	return fd;
}

/*
 * The backend <table> gives <hash> goes second in <prefs> (<n> of at most
 * <max> table indices), after the client's own backend, which <table> has
 * down: where the client stays while that one is out.
 */
static void second_from(const struct hashlb_table *table, uint64_t hash, uint32_t *prefs, size_t *n,
			size_t max)
{
	uint32_t r = hashlb_table_lookup(table, hash);
	size_t j = 1;

	if (r == HASHLB_BACKEND_NONE || max < 2)
		return;
	while (j < *n && prefs[j] != r)
		j++;
	if (j == *n && *n < max)
		(*n)++;
	else if (j == *n)
		j--; /* the list is full: its last one gives way */
	memmove(prefs + 2, prefs + 1, (j - 1) * sizeof(*prefs));
	prefs[1] = r;
}

/*
 * A client's own backend <prefs>[0] failed and is down in the snapshot's
 * retry table (Maglev, see hlb_snapshot_add_retry()): the backend that table
 * gives goes next, where the client stays once the failing backends are
 * marked down, instead of the list's next (which would move it a second
 * time then). If that one is in slow start and does not admit the client
 * yet, the backend the table with the ramping ones down too gives, where
 * it stays while the ramp lasts (the one failing may be the stand-in
 * ramp_first() chose: the retry table gives the client its own again).
 */
static void retry_first(const struct hlb_snapshot *snap, uint64_t hash, uint32_t *prefs, size_t *n,
			size_t max)
{
	const struct hashlb_table *table = snap->retry_table;
	uint32_t r = hashlb_table_lookup(table, hash);

	if (snap->retry_ramp_table && r != HASHLB_BACKEND_NONE &&
	    !hlb_slow_start_ok(
		    hash, atomic_load_explicit(&snap->backends[r]->admit, memory_order_relaxed)))
		table = snap->retry_ramp_table;
	second_from(table, hash, prefs, n, max);
}

/*
 * A client's own backend <prefs>[0] is in slow start and does not admit it
 * yet (Maglev, see hlb_snapshot_add_ramp()): the backend the ramp table
 * gives goes next, where the client was while its own was out, instead of
 * the list's next, a third backend for most of them, which it would leave
 * again once admitted. hlb_balance_order() then puts the own one after it.
 */
static void ramp_first(const struct hlb_snapshot *snap, uint64_t hash, uint32_t *prefs, size_t *n,
		       size_t max)
{
	const struct hlb_backend *own = snap->backends[prefs[0]];

	if (!hashlb_table_backend_down(snap->ramp_table, prefs[0]) ||
	    hlb_slow_start_ok(hash, atomic_load_explicit(&own->admit, memory_order_relaxed)))
		return;
	second_from(snap->ramp_table, hash, prefs, n, max);
}

/*
 * Whether the last connect to <be> failed (refused or timed out, by any
 * worker): consecutive_fail, set by the worker that saw the failure as it
 * completes, where the tables only learn of it at the control plane's next
 * tick and build. Cleared by the next connect to the backend that
 * succeeds, so a backend that refused briefly is failing only until its
 * own clients get through again.
 */
static bool failing(const struct hlb_backend *be)
{
	return atomic_load_explicit(&be->consecutive_fail, memory_order_relaxed) != 0;
}

/* failing() of table index <b> of <snap> */
static bool backend_failing(const struct hlb_snapshot *snap, uint32_t b)
{
	return failing(snap->backends[b]);
}

/* Whether one of the <n> table indices of <prefs> but <except> is failing (backend_failing()). */
static bool other_failing(const struct hlb_snapshot *snap, const uint32_t *prefs, size_t n,
			  const struct hlb_backend *except)
{
	for (size_t i = 0; i < n; i++)
		if (snap->backends[prefs[i]] != except && backend_failing(snap, prefs[i]))
			return true;
	return false;
}

/*
 * A retry: the failing backends of <prefs> (<n> table indices) go after the
 * others, each part in its order, so that a retry takes a backend that is
 * not known to fail while one is left, and one that is only if none is (it
 * may be back: it is never left out). Returns how many are not failing.
 */
static size_t failing_last(const struct hlb_snapshot *snap, uint32_t *prefs, size_t n)
{
	uint32_t failing[HLB_PREFERENCE_MAX];
	size_t i, kept = 0, n_fail = 0;

	for (i = 0; i < n; i++) {
		if (backend_failing(snap, prefs[i]))
			failing[n_fail++] = prefs[i];
		else
			prefs[kept++] = prefs[i];
	}
	memcpy(prefs + kept, failing, n_fail * sizeof(*prefs));
	return kept;
}

/* The place of <be> among the <n> table indices of <prefs>, or <n> if it has none. */
static size_t list_find(const struct hlb_snapshot *snap, const uint32_t *prefs, size_t n,
			const struct hlb_backend *be)
{
	size_t k = 0;

	while (k < n && snap->backends[prefs[k]] != be)
		k++;
	return k;
}

/* Places of the table's list that c->tried tells apart, one bit each. */
#define CONN_TRIED_MAX 32u

/* Position of table index <b> in <raw> (<n> entries), or CONN_TRIED_MAX (no bit of c->tried) if absent. */
static unsigned raw_position(const uint32_t *raw, size_t n, uint32_t b)
{
	for (size_t i = 0; i < n && i < CONN_TRIED_MAX; i++)
		if (raw[i] == b)
			return (unsigned)i;
	return CONN_TRIED_MAX;
}

/*
 * A claim on <be> (max_connections <cap>) for <c> was given back at once:
 * over the cap, or its connect not started. Counted meanwhile, it may have
 * made a slot that freed then look taken to the queue the slot's kick sent
 * to look (worker_kick_queues()): if there is room now, kick again. So too
 * to a client that joined a queue meanwhile, whose queue_recheck() found the
 * slot taken by this claim: the fence, between the claim given back and the
 * load of <queued>, pairs with that one's, as conn_unclaim()'s does (without
 * it, relaxed, the load may come before the store is seen, and each side
 * miss the other's: a client left waiting with the slot free, for its
 * queue_timeout). It is the kick's fence too. Only with a cap, the backend
 * found full: not on a connection's path.
 */
static void claim_undone(struct worker *w, const struct conn *c, struct hlb_backend *be,
			 uint32_t cap)
{
	if (!cap)
		return;
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&c->svc->queued, memory_order_relaxed) &&
	    atomic_load_explicit(&be->claimed, memory_order_relaxed) < cap)
		worker_kick_queues_fenced(w, c->svc);
}

/*
 * Connect to the first backend of the client's preference list in <snap>
 * (reordered by bounded load and slow start) that it has not tried or
 * passed over for being full (c->tried); on a retry (<failed>: the backend
 * whose connect failed, just now or before the client waited in the queue)
 * never that one, and those known to fail last (failing_last()), the list
 * lengthened past them if it has any. With timeouts.queue, a retry that
 * passed over a full backend, now or before the failure, waits for room
 * there (w->first_full) rather than try one known to fail. Returns false if
 * no candidate is left.
 */
static bool conn_connect(struct worker *w, struct conn *c, const struct hlb_snapshot *snap,
			 const struct hlb_backend *failed)
{
	uint32_t prefs[HLB_PREFERENCE_MAX], raw[HLB_PREFERENCE_MAX];
	size_t max = 1 + (size_t)snap->connect_retries, n, n_raw, n_ok, i;
	struct io_uring_sqe *sqe;
	struct hlb_backend *be;
	unsigned pos;
	uint32_t cap;
	int fd;

	if (max > HLB_PREFERENCE_MAX)
		max = HLB_PREFERENCE_MAX;
	w->first_full = NULL;
	w->n_full_seen = 0;
	n = hashlb_table_preference(snap->table, c->hash, prefs, max);
	/* A retry whose list holds other backends known to fail than the one
	 * that just did (a rack gone, its backends not down in the table yet):
	 * the list goes on past them, as far as c->tried tells places apart,
	 * so that the retries left go to backends not known to fail
	 * (failing_last() below). The one that failed takes no place either:
	 * the list is one longer, as the table gives it once that one is down
	 * (on a ring, the same list without it), so that a full backend passed
	 * over leaves the next one to a retry. The attempts stay
	 * 1 + connect_retries. */
	if (failed && n == max && max < CONN_TRIED_MAX) {
		size_t was = max;

		if (other_failing(snap, prefs, n, failed))
			max = CONN_TRIED_MAX;
		else if (list_find(snap, prefs, n, failed) < n)
			max++;
		if (max != was)
			n = hashlb_table_preference(snap->table, c->hash, prefs, max);
	}
	n_raw = n; /* ramp_first() and retry_first() may add one that has no place there */
	memcpy(raw, prefs, n * sizeof(*prefs));
	if (n && snap->ramp_table)
		ramp_first(snap, c->hash, prefs, &n, max);
	/* Bounded load and slow start may move backends down the list. */
	hlb_balance_order(snap, c->hash,
			  atomic_load_explicit(&c->svc->active, memory_order_relaxed), prefs, n);
	n_ok = n;
	if (!failed) {
		c->tried = 0;
	} else {
		/* What was tried is kept by its place in the table's list, not in
		 * the reordered one: that order follows the backends' load and
		 * ramp, which may have changed while the connect waited, and a
		 * position there skipped the client's own backend, untried, once
		 * its slow start admitted it. The table may have changed since
		 * too (that backend marked down, most likely): if the backend
		 * left the list, the list is another, tried from its start. */
		size_t k = list_find(snap, prefs, n, failed);

		if (k == n)
			c->tried = 0;
		if (k == 0 && snap->retry_table &&
		    hashlb_table_backend_down(snap->retry_table, prefs[0]))
			retry_first(snap, c->hash, prefs, &n, max);
		n_ok = failing_last(snap, prefs, n);
	}
	for (i = 0;; i++) {
		if (i >= n)
			return false;
		/* the rest are known to fail: a client that may wait for room
		 * waits, its tries kept for a backend that has some */
		if (i == n_ok && w->first_full && snap->queue_timeout_ms)
			return false;
		be = snap->backends[prefs[i]];
		pos = raw_position(raw, n_raw, prefs[i]);
		if (be == failed)
			continue;
		if (pos < CONN_TRIED_MAX && (c->tried & (1u << pos))) {
			/* passed over for being full before this retry (one
			 * tried and failed is failing, or serves again): with
			 * a queue, still a place to wait for room, as one
			 * found full now is */
			if (failed && snap->queue_timeout_ms &&
			    atomic_load_explicit(&be->max_conns, memory_order_relaxed) &&
			    !failing(be)) {
				if (!w->first_full)
					w->first_full = be;
				w->full_seen[w->n_full_seen++] = be;
			}
			continue;
		}
		if (pos < CONN_TRIED_MAX)
			c->tried |= 1u << pos;
		/* a backend at its max_connections: as if it refused */
		cap = atomic_load_explicit(&be->max_conns, memory_order_relaxed);
		/* clients waiting for it come before a newcomer */
		if (!cap || c->was_queued ||
		    !atomic_load_explicit(&be->waiting, memory_order_relaxed)) {
			if (hlb_backend_claim(be, cap))
				break;
			claim_undone(w, c, be, cap);
		}
		/* counted once per client: not again at each retry of the queue */
		if (!c->was_queued)
			hlb_stat_add(&be->wstats[w->id].full, 1);
		if (!w->first_full)
			w->first_full = be;
		w->full_seen[w->n_full_seen++] = be;
	}
	fd = backend_socket(w, snap, be, c);
	if (fd < 0) {
		/* ours (no fd, the source address gone): no backend is to blame */
		c->err = (uint8_t)-fd;
		c->local_fail = true;
		w->first_full = NULL; /* not a wait for room that would end this */
		hlb_backend_unclaim(be);
		claim_undone(w, c, be, cap);
		return false;
	}
	c->be = hlb_backend_ref(be);
	c->close_gen = (uint16_t)atomic_load_explicit(&be->close_gen, memory_order_acquire);
	c->claimed = true;
	c->fd[1] = fd;
	c->tries++;
	c->ts.tv_sec = snap->connect_timeout_ms / 1000;
	c->ts.tv_nsec = (long long)(snap->connect_timeout_ms % 1000) * 1000000;

	/* the connect and its linked timeout must go in the same submission */
	if (io_uring_sq_space_left(&w->ring) < 2)
		worker_submit_now(w);
	c->connect_us = worker_clock_us();
	sqe = worker_sqe(w);
	io_uring_prep_connect(sqe, fd, (const struct sockaddr *)&be->addr, be->addr_len);
	sqe->flags |= IOSQE_IO_LINK;
	io_uring_sqe_set_data64(sqe, ud_make(c, OP_CONNECT));
	sqe = worker_sqe(w);
	/* Not counted in c->inflight, and not naming c: its CQE (it fired, or
	 * it was cancelled as the connect ended) may come after c is freed.
	 * The timespec is read as the SQE is submitted, c alive then. */
	io_uring_prep_link_timeout(sqe, &c->ts, 0);
	io_uring_sqe_set_data64(sqe, 0);
	c->inflight++;
	return true;
}

/*
 * A connection for client socket <fd> of <svc>: counted against
 * max_connections (over it: reset and counted), allocated and linked; <counted>: it was
 * already (an adopted client's slot, taken by hlb_proxy_adopt()). On failure <fd> is closed
 * with a reset (client_refuse()), the count given back, and NULL returned.
 */
static struct conn *conn_new(struct worker *w, struct hlb_service *svc,
			     const struct hlb_snapshot *snap, int fd, bool counted)
{
	uint64_t active =
		counted ? 0 : atomic_fetch_add_explicit(&svc->active, 1, memory_order_relaxed) + 1;
	struct conn *c;

	if (snap->max_connections && active > snap->max_connections) {
		atomic_fetch_sub_explicit(&svc->active, 1, memory_order_relaxed);
		hlb_stat_add(&svc->wstats[w->id].rejected, 1);
		if (snap->log_connections)
			conn_log_rejected(w, svc, fd);
		client_refuse(w, fd);
		return NULL;
	}
	c = conn_alloc(w);
	if (!c) {
		atomic_fetch_sub_explicit(&svc->active, 1, memory_order_relaxed);
		client_refuse(w, fd);
		return NULL;
	}
	memset(c, 0, sizeof(*c));
	c->svc = hlb_service_ref(svc);
	c->fd[0] = fd;
	c->fd[1] = -1;
	c->state = CONN_CONNECTING;
	c->proxy = (uint8_t)snap->proxy_protocol;
	c->log = snap->log_connections;
	c->idle_ms = snap->idle_timeout_ms;
	c->last_ms = (uint32_t)w->now_ms;
	c->start_ms = c->log ? worker_clock_fine_ms() : 0;
	for (int i = 0; i < 2; i++) {
		c->h[i].idx = i;
		c->h[i].send_bid = BUF_NONE;
		c->h[i].pend_bid = BUF_NONE;
		c->h[i].pipe[0] = c->h[i].pipe[1] = -1;
	}
	c->next = &w->conns;
	c->prev = w->conns.prev;
	w->conns.prev->next = c;
	w->conns.prev = c;
	w->n_conns++;
	atomic_store_explicit(&w->n_conns_pub, w->n_conns, memory_order_relaxed);
	if (c->idle_ms && c->idle_ms < w->min_idle_ms)
		w->min_idle_ms = c->idle_ms;
	return c;
}

/* Wait for the client to be readable (its PROXY header), to hang up, or to send urgent data. */
static void conn_header_poll(struct worker *w, struct conn *c)
{
	struct io_uring_sqe *sqe = worker_sqe(w);

	io_uring_prep_poll_add(sqe, c->fd[0], POLLIN | POLLPRI | POLLRDHUP);
	io_uring_sqe_set_data64(sqe, ud_make(c, OP_HEADER));
	c->inflight++;
}

/*
 * Client socket <fd>'s addresses: [0] the client's, [1] the one it
 * connected to (only if <want_dst>). Multishot accept writes every peer
 * address into the same buffer, so it cannot be trusted for a batch: ask
 * the socket.
 */
static int client_addrs(int fd, struct sockaddr_storage addr[2], bool want_dst)
{
	socklen_t l0 = sizeof(addr[0]), l1 = sizeof(addr[1]);

	if (getpeername(fd, (struct sockaddr *)&addr[0], &l0) < 0 ||
	    (want_dst && getsockname(fd, (struct sockaddr *)&addr[1], &l1) < 0))
		return -errno;
	return 0;
}

/*
 * Count <c> among its client's open connections (max_connections_per_client:
 * the address in c->client cut to the snapshot's client_prefix, the length
 * kept in <c> for the release); false if the client holds the limit already:
 * then <c> is closed and counted. A table with no room for a new client
 * lets it through uncounted rather than refuse it.
 */
static bool conn_claim_client(struct worker *w, struct conn *c, const struct hlb_snapshot *snap)
{
	struct hlb_clients *t = atomic_load_explicit(&c->svc->clients, memory_order_acquire);
	struct hlb_client_key k;
	int r;

	c->client_keep = (uint8_t)hashlb_src_prefix_keep(&snap->client_prefix, c->client);
	conn_client_key(c, c->client_keep, &k);
	r = t ? hlb_clients_claim(t, &k, snap->max_per_client) : -ENOSPC;
	if (r == 0) {
		hlb_stat_add(&c->svc->wstats[w->id].client_limited, 1);
		conn_abort(w, c, CONN_END_CLIENT_LIMIT);
		return false;
	}
	c->per_client = r == 1;
	return true;
}

/* Hash the client at addr[0] (and addr[1] for the 4-tuple key) and connect. May free <c>. */
static void conn_route(struct worker *w, struct conn *c, const struct hlb_snapshot *snap,
		       const struct sockaddr_storage addr[2])
{
	const struct sockaddr *dst = (const struct sockaddr *)&addr[1];
	const struct sockaddr *src = (const struct sockaddr *)&addr[0];
	struct hashlb_tuple t;

	if (hashlb_tuple_from_sockaddr(src, snap->key == HASHLB_KEY_4TUPLE ? dst : NULL, &t) < 0) {
		conn_abort(w, c, CONN_END_ERROR);
		return;
	}
	hlb_stat_add(&c->svc->wstats[w->id].lookups, 1);
	/* for the connection log: cheaper kept than a branch on it; the
	 * client as it is, before hash_prefix masks it for the hash */
	memcpy(c->client, &t, sizeof(c->client));
	hashlb_tuple_mask_src(&t, &snap->hash_prefix);
	c->hash = hashlb_tuple_hash(&t, snap->key, snap->seed);
	c->client_set = true; /* before a refusal, so that its log line names the client */
	if ((snap->allow_clients && !hashlb_prefix_set_match(snap->allow_clients, src)) ||
	    (snap->deny_clients && hashlb_prefix_set_match(snap->deny_clients, src))) {
		hlb_stat_add(&c->svc->wstats[w->id].denied, 1);
		conn_abort(w, c, CONN_END_DENIED);
		return;
	}
	if (snap->max_per_client && !conn_claim_client(w, c, snap))
		return;
	if (!conn_connect(w, c, snap, NULL))
		conn_no_backend(w, c, snap, NULL);
}

/*
 * Whether the peer of accepted socket <fd> is in the service's
 * accept_proxy_from list: only those may name a client in a PROXY header.
 * A peer gone already (reset before its address could be read: a front
 * proxy's TCP check that resets) is not an untrusted source: -1, and the
 * caller handles it as the reset it is.
 */
static int proxy_sender_trusted(int fd, const struct hlb_snapshot *snap,
				struct sockaddr_storage *ret_peer)
{
	socklen_t len = sizeof(*ret_peer);

	if (getpeername(fd, (struct sockaddr *)ret_peer, &len) < 0)
		return -1;
	return hashlb_prefix_set_match(snap->proxy_from, (const struct sockaddr *)ret_peer);
}

/*
 * A connection to <svc> from <peer>, not in its accept_proxy_from, refused: the counter alone
 * cannot tell an operator who it is (a front proxy left out of the list, a scan). Logged at
 * most once a second by each worker for each service, since a flood of them must not flood
 * the log: each line says how many this worker refused for the service without a line since
 * its last one (suppressed=). Into the worker's buffer: never blocks.
 */
static void log_untrusted(struct worker *w, struct hlb_service *svc,
			  const struct sockaddr_storage *peer)
{
	struct hlb_service_wstats *ws = &svc->wstats[w->id];
	char source[INET6_ADDRSTRLEN + 10] = "-", qs[160];

	if (ws->untrusted_log_ms && w->now_ms - ws->untrusted_log_ms < 1000) {
		ws->untrusted_unlogged++;
		return;
	}
	ws->untrusted_log_ms = w->now_ms ?: 1;
	format_peer((const struct sockaddr *)peer, source, sizeof(source));
	/* A line dropped (the buffer full: the log's reader behind) told of none: it, and those it
	 * would have counted, go to the next line's suppressed=. */
	if (hlb_logbuf_printf(&w->log, HLB_LOG_WARN,
			      "connection from a source not in accept_proxy_from, reset",
			      "service=%s source=%s worker=%u suppressed=%" PRIu32,
			      hlb_log_quote(svc->name, qs, sizeof(qs)), source, w->id,
			      ws->untrusted_unlogged))
		ws->untrusted_unlogged = 0;
	else
		ws->untrusted_unlogged++;
}

void conn_accepted(struct worker *w, struct wlistener *wl, int fd)
{
	struct sockaddr_storage addr[2];
	struct hlb_snapshot *snap;
	struct hlb_service *svc;
	struct conn *c;

	svc = atomic_load_explicit(&wl->l->svc, memory_order_acquire);
	snap = svc ? hlb_service_snapshot(svc) : NULL;
	if (!snap) {
		client_refuse(w, fd);
		return;
	}
	if (snap->proxy_from && proxy_sender_trusted(fd, snap, &addr[0]) == 0) {
		hlb_stat_add(&svc->wstats[w->id].untrusted, 1);
		log_untrusted(w, svc, &addr[0]);
		client_refuse(w, fd);
		return;
	}
	if (snap->max_conn_rate) {
		struct timespec ts;
		uint64_t wait;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		wait = hlb_service_rate_take(svc, snap->max_conn_rate,
					     (uint64_t)ts.tv_sec * 1000000000u +
						     (uint64_t)ts.tv_nsec);
		/* served all the same: it is accepted, and counted in the rate */
		if (wait && worker_accept_pause(w, wl, (uint32_t)((wait + 999999) / 1000000),
						snap->max_conn_rate))
			hlb_stat_add(&svc->wstats[w->id].rate_pauses, 1);
		else
			worker_accept_single(w, wl);
	}
	c = conn_new(w, svc, snap, fd, false);
	if (!c)
		return;
	if (snap->keepalive.enabled)
		sock_keepalive(fd, &snap->keepalive);
	if (snap->accept_proxy) {
		/* The client's address is in its PROXY header: hash once it is
		 * read, within the connect timeout (the idle scan enforces it). */
		c->state = CONN_HEADER;
		c->idle_ms = snap->connect_timeout_ms;
		if (c->idle_ms < w->min_idle_ms)
			w->min_idle_ms = c->idle_ms;
		conn_header_poll(w, c);
	} else if (client_addrs(fd, addr, snap->key == HASHLB_KEY_4TUPLE) < 0) {
		conn_reset(w, c, 0, sock_gone_error(fd)); /* the client is gone already */
	} else {
		conn_route(w, c, snap, addr);
	}
}

/*
 * Whether an urgent byte (sent MSG_OOB) waits unread on socket <fd>, whose
 * poll reported <events>. POLLPRI alone cannot say: io_uring reports the
 * events a wake-up came with, and every wake-up by new data comes with
 * POLLPRI; so it only tells when to ask (rarely: a header not whole yet).
 */
static bool sock_urgent_pending(int fd, int events)
{
	char b;

	return (events & POLLPRI) && recv(fd, &b, 1, MSG_OOB | MSG_PEEK | MSG_DONTWAIT) == 1;
}

/* A client that sent no valid PROXY header: closed and counted. */
static void conn_bad_header(struct worker *w, struct conn *c)
{
	hlb_stat_add(&c->svc->wstats[w->id].bad_header, 1);
	conn_abort(w, c, CONN_END_BAD_HEADER);
}

/*
 * The client of an accept_proxy service is readable (<events>): read its
 * PROXY header, then hash by the addresses it names (a LOCAL or UNKNOWN
 * header: by the connection's own) and connect. The header is first
 * peeked, and only a complete one is taken from the socket, so the bytes
 * after it stay there for forwarding. A header split across segments
 * raises SO_RCVLOWAT to the length still missing and polls again. May
 * free <c>.
 */
static void conn_header_ready(struct worker *w, struct conn *c, int events)
{
	struct sockaddr_storage addr[2];
	const struct hlb_snapshot *snap;
	uint8_t buf[HLB_PROXY_IN_MAX];
	size_t need = 0;
	ssize_t n;
	int r, lowat;

	if (events < 0) {
		c->err = (uint8_t)-events;
		conn_abort(w, c, CONN_END_ERROR);
		return;
	}
	n = recv(c->fd[0], buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && errno == EAGAIN) {
		/* Nothing but an urgent byte, the client's first: no header
		 * starts so, and the socket reports it (POLLPRI) until it is
		 * read: polled again, it would return at once, for ever. */
		if (sock_urgent_pending(c->fd[0], events)) {
			conn_bad_header(w, c);
			return;
		}
		conn_header_poll(w, c);
		return;
	}
	if (n == 0) {
		/* closed before a byte: a TCP check, not a bad header */
		conn_abort(w, c, CONN_END_CLIENT_CLOSED);
		return;
	}
	if (n < 0) {
		/* reset (a TCP check that ends with RST, or a client gone): not a bad header */
		conn_reset(w, c, 0, errno);
		return;
	}
	r = hlb_proxy_parse(buf, (size_t)n, &addr[0], &addr[1], &need);
	/* Not a header, or the client stopped short of one: it hung up, or
	 * sent an urgent byte inside it. A read stops at the urgent mark, so
	 * that header is never whole, yet the socket stays readable: polled
	 * again, it would return at once, for ever. */
	if (r < 0 || (r == 0 && ((events & POLLRDHUP) || sock_urgent_pending(c->fd[0], events)))) {
		conn_bad_header(w, c);
		return;
	}
	if (r == 0) {
		lowat = (int)need;
		setsockopt(c->fd[0], SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
		c->lowat = true;
		conn_header_poll(w, c);
		return;
	}
	if (recv(c->fd[0], buf, (size_t)r, MSG_DONTWAIT) != r) {
		conn_reset(w, c, 0, sock_gone_error(c->fd[0]));
		return;
	}
	if (c->lowat) {
		lowat = 1;
		setsockopt(c->fd[0], SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
		c->lowat = false;
	}
	if (addr[0].ss_family == AF_UNSPEC) {
		if (client_addrs(c->fd[0], addr, true) < 0) {
			conn_reset(w, c, 0, sock_gone_error(c->fd[0]));
			return;
		}
	} else {
		/* Our own header to the backend passes the client on (c->proxy),
		 * and an upgrade's new process it is lent to hashes it again
		 * (conn_queue_lend()). Without the memory, the header would name
		 * the front proxy as the client: closed instead. */
		c->orig = malloc(sizeof(addr));
		if (!c->orig) {
			c->err = ENOMEM;
			conn_abort(w, c, CONN_END_ERROR);
			return;
		}
		memcpy(c->orig, addr, sizeof(addr));
	}
	snap = hlb_service_snapshot(c->svc);
	c->state = CONN_CONNECTING;
	c->idle_ms = snap->idle_timeout_ms;
	c->last_ms = (uint32_t)w->now_ms;
	conn_route(w, c, snap, addr);
}

/*
 * The PROXY protocol header, before any of the client's bytes: the
 * client's address and the one it connected to. A plain send(): the
 * connection is fresh, its empty send buffer takes the header whole, and
 * no recv of the client is armed yet, so nothing can overtake it. -EIO if
 * the backend did not take it, -errno of the client's reset if it is gone
 * (sock_gone_error()).
 */
static int conn_send_proxy_header(struct conn *c)
{
	struct sockaddr_storage own[2];
	const struct sockaddr_storage *addr = c->orig; /* from the header the client came with */
	uint8_t hdr[HLB_PROXY_HDR_MAX];
	int n;

	if (!addr) {
		/* a client gone (reset while its connect was in flight): its reset's error */
		if (client_addrs(c->fd[0], own, true) < 0)
			return -sock_gone_error(c->fd[0]);
		addr = own;
	}
	n = hlb_proxy_header(c->proxy, (const struct sockaddr *)&addr[0],
			     (const struct sockaddr *)&addr[1], hdr);
	if (n < 0)
		return n;
	/* kept until a backend took the header: the next backend of a retry
	 * needs the same client */
	if (send(c->fd[1], hdr, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n)
		return -EIO;
	free(c->orig);
	c->orig = NULL;
	return 0;
}

/*
 * Whether the client on <fd> reset (or is otherwise gone) while hashlb was
 * not reading it: its errno, else 0. A FIN is not gone: its request may be
 * whole, and the answer still wanted. One poll(2) (and a getsockopt() if
 * gone), on a retry, or at the end of a connect that took CONNECT_WATCH_US
 * or more (conn_connect_done()): not per connection.
 */
static int client_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = 0 };
	socklen_t len = sizeof(int);
	int err = 0;

	if (poll(&p, 1, 0) != 1 || !(p.revents & (POLLERR | POLLHUP)))
		return 0;
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
	return err ? err : ECONNRESET;
}

/*
 * Whether <c>'s connect to <be>, ending now, started before the control
 * plane's last health verdict on <be>: it tells how the backend was then.
 * A connect whose SYN a dead backend dropped fails at its timeout; with a
 * timeout longer than rise x interval, that came after the checks had
 * brought the backend back up, and took it, healthy, down again.
 */
static bool connect_predates_verdict(const struct conn *c, const struct hlb_backend *be)
{
	uint64_t since = atomic_load_explicit(&be->health_since_ns, memory_order_relaxed);
	uint64_t now = worker_clock_ns();
	/* connect_us holds its start while it connects (wrapping: a difference) */
	uint64_t took = (uint64_t)(uint32_t)((uint32_t)(now / 1000u) - c->connect_us) * 1000u;

	return since && now - took < since;
}

static void conn_connect_done(struct worker *w, struct conn *c, int res)
{
	struct hlb_backend *failed = c->be;
	struct hlb_backend_wstats *bs = &failed->wstats[w->id];
	const struct hlb_snapshot *snap;
	uint32_t took = worker_clock_us() - c->connect_us;
	int err;

	/* A connect that took long may have outlived its client, unwatched (the
	 * idle scan watches one only once it is CONNECT_WATCH_US old, and may
	 * not have come since): a client that reset meanwhile is found now,
	 * before the backend is sent a header or counted as serving it, and its
	 * connection reset. A quick one is not checked (no syscall per
	 * connection): a reset within it is read by the client's first recv. */
	if (res == 0 && took >= CONNECT_WATCH_US && (err = client_gone(c->fd[0]))) {
		conn_reset(w, c, 0, err); /* may free c */
		return;
	}
	if (res == 0 && c->proxy) {
		int r = conn_send_proxy_header(c);

		if (r == -EIO) {
			res = r; /* the backend took no header: as a failed connect */
		} else if (r < 0) {
			conn_reset(w, c, 0, -r); /* the client is gone */
			return;
		}
	}
	if (res == 0) {
		client_unwatch(w, c);
		c->connect_us = took;
		c->state = CONN_OPEN;
		c->established = true;
		c->err = 0;
		c->last_ms = (uint32_t)w->now_ms;
		c->quiet.at_ms = c->last_ms; /* none noted yet */
		hlb_stat_add(&bs->established, 1);
		hlb_stat_add(&bs->connect_hist[hlb_connect_bucket(c->connect_us)], 1);
		hlb_stat_add(&bs->connect_us_sum, c->connect_us);
		atomic_fetch_add_explicit(&failed->active, 1, memory_order_relaxed);
		hlb_stat_add(&c->svc->wstats[w->id].total, 1);
		if (atomic_load_explicit(&failed->consecutive_fail, memory_order_relaxed)) {
			atomic_store_explicit(&failed->consecutive_fail, 0, memory_order_relaxed);
			/* it serves again: clients waiting that passed over it as failing */
			hlb_service_queue_changed(c->svc);
			worker_kick_queues(w, c->svc);
		}
		/* the client may have sent already; a backend rarely speaks first */
		half_recv(w, c, 0, false);
		half_recv(w, c, 1, true);
		return;
	}
	/* -ECANCELED: the linked timeout fired (aborts are handled before) */
	if (res == -ECANCELED || res == -ETIMEDOUT) {
		hlb_stat_add(&bs->connect_timeout, 1);
		c->err = ETIMEDOUT;
	} else {
		hlb_stat_add(&bs->connect_fail, 1);
		c->err = (uint8_t)-res;
	}
	/* Passive health: a failure of our own is not counted (it took every
	 * backend down at once when the local ports ran out, and kept them
	 * down: their checks, short of a port too, are skipped), nor one that
	 * predates the backend's health (connect_predates_verdict()). The
	 * client is still retried elsewhere. The first of a run wakes the
	 * control plane (worker_failing_seen()): on Maglev its retry table
	 * says where the clients retried away from it stay, and with checks
	 * off its ticks count the run (passive-only health). */
	snap = hlb_service_snapshot(c->svc);
	if (!hlb_local_error(-res) && !connect_predates_verdict(c, failed)) {
		uint32_t run;

		/* before the count, which the control plane reads first (release) */
		atomic_store_explicit(&failed->connect_err, c->err, memory_order_relaxed);
		run = atomic_fetch_add_explicit(&failed->consecutive_fail, 1, memory_order_release);
		if (run == 0)
			worker_failing_seen(w);
	}
	worker_close_fd(w, c->fd[1]);
	c->fd[1] = -1;
	if (c->claimed)
		conn_unclaim(w, c);
	c->be = NULL;
	if (c->tries > snap->connect_retries) {
		w->first_full = NULL; /* its tries are used up: closed, not queued */
	} else if ((err = client_gone(c->fd[0]))) {
		/* It reset while this connect waited (a timeout, most likely):
		 * the next backend would get a connection reset at once. */
		hlb_backend_unref(failed);
		conn_reset(w, c, 0, err); /* may free c */
		return;
	} else if (conn_connect(w, c, snap, failed)) {
		hlb_stat_add(&bs->retries, 1);
		hlb_backend_unref(failed);
		/* After a timeout the next may take as long: watch now, not at
		 * the scan. A refused connect was quick, as the next most likely
		 * is: the scan watches it if not. */
		if (c->err == ETIMEDOUT)
			client_watch(w, c, snap);
		return;
	}
	conn_no_backend(w, c, snap, failed); /* may free c */
	hlb_backend_unref(failed);
}

/* A report of room on half <i>'s destination: pump or flush what waits. May free <c>. */
static void half_room(struct worker *w, struct conn *c, int i)
{
	if (c->h[i].spliced)
		half_splice_pump(w, c, i);
	else
		half_spill_flush(w, c, i);
}

void conn_cqe(struct worker *w, struct conn *c, enum op op, const struct io_uring_cqe *cqe)
{
	bool armed = cqe->flags & IORING_CQE_F_MORE; /* a multishot poll, still armed */
	int res = cqe->res, i;
	struct half *h;

	if (!armed)
		c->inflight--;
	switch (op) {
	case OP_CONNECT:
		if (c->state == CONN_CLOSING)
			break;
		conn_connect_done(w, c, res);
		return;
	case OP_RECV:
	case OP_RECV_B: {
		uint16_t bid = BUF_NONE;
		bool woken;

		i = op - OP_RECV;
		h = &c->h[i];
		h->recv_armed = false;
		woken = h->woken;
		h->woken = false;
		if (cqe->flags & IORING_CQE_F_BUFFER) {
			bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
			w->bufs_out++;
			w->turn_bufs++;
		}
		if (c->state == CONN_CLOSING) {
			if (bid != BUF_NONE)
				bufring_put(w, bid);
			conn_reset_why(c, i, res);
			break;
		}
		if (res > 0) {
			bool more = cqe->flags & IORING_CQE_F_SOCK_NONEMPTY;

			c->last_ms = (uint32_t)w->now_ms;
			if (half_splice_due(w, h, res))
				h->splice_want = true;
			/* no recv follows a switch to splice: nothing to wait for */
			more = more && !h->splice_want;
			if (h->send_bid == BUF_NONE) {
				half_send(w, c, i, bid, 0, res, more, false);
				if (!h->splice_want)
					half_recv(w, c, i, !more);
			} else if (h->send_bid == BUF_PRIV && half_spill_append(w, h, bid, res)) {
				/* no recv until the spill is out, as with a parked buffer */
				half_watch(w, c, i);
			} else {
				h->pend_bid = bid;
				h->pend_len = res;
				h->pend_more = more;
				if (h->send_bid == BUF_PRIV)
					half_watch(w, c, i);
			}
			return;
		}
		if (bid != BUF_NONE)
			bufring_put(w, bid);
		if (res == 0) {
			if (half_reset_taken(w, c, i)) {
				conn_reset(w, c, i, ECONNRESET); /* may free c */
				return;
			}
			h->eof = true;
			if (h->send_bid == BUF_NONE)
				half_finish(w, c, i);
			return;
		}
		if (res == -ENOBUFS) {
			bufring_starved(w);
			half_uncork(c, i); /* the data that follows must wait */
			starve_add(w, h, woken);
			hlb_stat_add(&w->pub.buffer_waits, 1);
			return;
		}
		conn_reset(w, c, i, -res);
		return;
	}
	case OP_SEND:
	case OP_SEND_B: {
		i = op - OP_SEND;
		h = &c->h[i];
		if (c->state == CONN_CLOSING) {
			/* taken by the destination before the abort (the other
			 * side's reset, in the same batch of completions): the
			 * client has those bytes, so they count as forwarded */
			if (res > 0)
				half_count(w, c, i, (uint32_t)res);
			break;
		}
		/* 0 cannot happen for a non-empty TCP send; never resend forever.
		 * EAGAIN: MSG_DONTWAIT found the destination full (see Spill). */
		if (res == 0 || (res < 0 && res != -EAGAIN)) {
			conn_reset(w, c, 1 - i, res < 0 ? -res : EPIPE); /* may free c */
			return;
		}
		if (res > 0) {
			half_count(w, c, i, (uint32_t)res);
			h->send_off += res;
		}
		if (h->send_off < h->send_len) {
			/* refused (over the cap, or no memory): wait in the kernel,
			 * or MSG_DONTWAIT would answer EAGAIN again at once, and
			 * again, for as long as the destination does not read */
			if (!half_spill(w, c, i)) {
				half_send(w, c, i, h->send_bid, h->send_off, h->send_len,
					  h->send_more, true);
				half_watch(w, c, i);
			}
			return;
		}
		bufring_put(w, h->send_bid);
		half_sent(w, c, i); /* may free c */
		return;
	}
	case OP_HEADER:
		if (c->state == CONN_CLOSING)
			break;
		conn_header_ready(w, c, res); /* may free c */
		return;
	case OP_CLIENT_WATCH:
		conn_client_watch_done(w, c, res); /* may free c */
		return;
	case OP_WATCH:
	case OP_WATCH_B:
		if (c->state == CONN_CLOSING) {
			if (!armed)
				c->h[op - OP_WATCH].watch = false;
			break;
		}
		half_watch_done(w, c, op - OP_WATCH, res, armed); /* may free c */
		return;
	case OP_POLL:
	case OP_POLL_B:
		c->h[op - OP_POLL].poll_armed = false;
		if (c->state == CONN_CLOSING)
			break;
		if (res < 0) {
			conn_fail(w, c, -res);
			return;
		}
		i = op - OP_POLL;
		if (c->h[i].poll_out && !(res & (POLLOUT | POLLERR | POLLHUP))) {
			half_out_arm(w, c, i); /* the destination's FIN, no room */
			return;
		}
		half_room(w, c, i); /* may free c */
		return;
	case OP_OUT:
	case OP_OUT_B:
		h = &c->h[op - OP_OUT];
		if (!armed)
			h->out_armed = false;
		if (c->state == CONN_CLOSING)
			break;
		if (!h->out_wait)
			return; /* room it does not wait for now */
		if (res < 0) { /* ended, and not by us */
			conn_fail(w, c, -res);
			return;
		}
		if (res & (POLLOUT | POLLERR | POLLHUP)) {
			h->out_wait = false;
			half_room(w, c, op - OP_OUT); /* may free c */
		} else if (!armed) { /* ended with no room: poll again */
			h->out_wait = false;
			half_poll(w, c, op - OP_OUT, c->fd[1 - (op - OP_OUT)], POLLOUT);
		}
		return;
	default:
		break;
	}
	conn_maybe_free(w, c);
}

/*
 * Whether hlb_backend_close() closed <c>'s backend since <c> chose it; if
 * so, close <c> with that close's reason (counted under its backend when it
 * is freed, as every end).
 */
static bool conn_closed_by_control(struct worker *w, struct conn *c)
{
	static const uint8_t ends[HLB_CLOSE_MAX] = {
		[HLB_CLOSE_NONE] = CONN_END_ERROR,
		[HLB_CLOSE_ADMIN] = CONN_END_CLOSED,
		[HLB_CLOSE_DOWN] = CONN_END_BACKEND_DOWN,
		[HLB_CLOSE_REMOVED] = CONN_END_DRAIN, /* its backend removed, past its drain */
		[HLB_CLOSE_BACKUP] = CONN_END_PRIMARY_UP,
	};
	unsigned gen = atomic_load_explicit(&c->be->close_gen, memory_order_acquire);
	int why;

	if ((uint16_t)gen == c->close_gen)
		return false;
	why = atomic_load_explicit(&c->be->close_why, memory_order_relaxed);
	if (why <= HLB_CLOSE_NONE || why >= HLB_CLOSE_MAX)
		why = HLB_CLOSE_NONE;
	conn_abort(w, c, ends[why]);
	return true;
}

/* Bytes <c>'s two sockets hold that their peers have not acknowledged yet. */
static uint32_t conn_outq(const void *arg)
{
	const struct conn *c = arg;
	uint32_t sum = 0;

	for (int i = 0; i < 2; i++) {
		int n;

		if (ioctl(c->fd[i], SIOCOUTQ, &n) == 0 && n > 0)
			sum += (uint32_t)n;
	}
	return sum;
}

/*
 * Whether open connection <c> is past its idle timeout: nothing forwarded
 * either way for that long, nor any byte that hashlb's sockets already held
 * taken by the peer meanwhile. A client that reads a long response slowly
 * takes bytes all along while hashlb's socket to it, full, takes none: its
 * kernel wakes a writer only once a third of the send buffer is free, which
 * a reader of a few KB/s reaches after minutes. So a connection quiet for
 * half its idle timeout has its sockets' unacknowledged bytes noted, and at
 * its idle time fewer of them is progress: the wait starts again from now
 * (idle_due()). A peer that stopped reading (zero window) or vanished
 * acknowledges nothing, and is closed as before. Two ioctl()s per quiet
 * period of a connection; none on a busy one.
 */
static bool conn_idle(struct worker *w, struct conn *c)
{
	return c->idle_ms &&
	       idle_due((uint32_t)w->now_ms, c->idle_ms, &c->last_ms, &c->quiet, conn_outq, c);
}

/*
 * When the drain of worker <w> closes <c> by its own deadline: the one a reload gave its
 * backend as it removed it (that of its service, when it removed the service), else its
 * service's timeouts.drain after the stop began. The scan closes it at w->drain_deadline if
 * that comes first (the longest of those, or, after a second signal, now). Read at each scan
 * of the drain alone: nothing of it on the path of a read or a send.
 */
static uint64_t conn_drain_own(const struct worker *w, struct conn *c)
{
	/* A client waiting in the queue holds the backend it first found full (conn_no_backend()),
	 * which a reload may have removed since while it waits for others of its service: that
	 * backend's deadline is not its own. Before, the stop closed it there (drain 2s, its
	 * service's 60s). A removed service's waiting client keeps its removal's deadline. */
	bool theirs = c->be && (c->state != CONN_QUEUED ||
				atomic_load_explicit(&c->svc->removed, memory_order_relaxed));
	uint64_t until =
		theirs ? atomic_load_explicit(&c->be->drain_until_ms, memory_order_relaxed) : 0;

	if (!until) /* UINT64_MAX for never, as the removal's */
		return hashlb_drain_end(w->drain_start,
					hlb_service_snapshot(c->svc)->drain_timeout_ms);
	return until;
}

/*
 * Closes the connections idle past their timeout, and the rest the scan does. Idle is timed on
 * w->now_ms, CLOCK_MONOTONIC read after the completions it stamps were posted: a stamp
 * (last_ms) is never earlier than its activity, and the scan's now never later than the
 * scan. So a connection is closed after more than its idle_ms (both ms truncated: "> idle_ms"
 * between them is more than idle_ms between the true times), never before, late by up to
 * the time between two scans.
 */
void conn_idle_scan(struct worker *w)
{
	struct conn *c, *next;
	uint32_t now_us = worker_clock_us();

	for (c = w->conns.next; c != &w->conns; c = next) {
		next = c->next;
		/* an established connection ends with a FIN, as with the other
		 * timeouts; one not served yet is reset (conn_abort()) */
		if (w->draining && w->now_ms >= w->drain_deadline) {
			/* the longest drain's end, or a second signal's before their own */
			c->drain_signalled = w->drain_signalled && w->now_ms < conn_drain_own(w, c);
			conn_abort(w, c, CONN_END_DRAIN);
			continue;
		}
		if (w->draining && w->now_ms >= conn_drain_own(w, c)) {
			conn_abort(w, c, CONN_END_DRAIN);
			continue;
		}
		if (c->state == CONN_CONNECTING && c->fd[1] >= 0 &&
		    now_us - c->connect_us >= CONNECT_WATCH_US) /* a connect that takes long */
			client_watch(w, c, hlb_service_snapshot(c->svc));
		else if (c->state == CONN_HEADER &&
			 (uint32_t)w->now_ms - c->last_ms > c->idle_ms) /* no header in time */
			conn_bad_header(w, c);
		else if (c->state == CONN_OPEN && conn_idle(w, c))
			conn_abort(w, c, CONN_END_IDLE);
		else if (c->state == CONN_OPEN && !conn_closed_by_control(w, c))
			conn_watch_after_fin(w, c);
	}
}

static uint64_t fp_mix(uint64_t h, uint64_t v)
{
	h = (h ^ v) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

/* Free slots on backends that waiting clients want, as a walk of the queue hands them on. */
#define QUEUE_ROOMS 16
struct queue_rooms {
	struct hlb_backend *be[QUEUE_ROOMS]; /* borrowed from the snapshots */
	uint32_t left[QUEUE_ROOMS]; /* the slots of be[i] no client of the walk took yet */
	uint32_t n;
	uint64_t total; /* of left[] */
	bool many; /* more backends than that had room: not counted */
};

/* A client of the walk took a slot of <be>, or (<gone>) found it full: all taken. */
static void rooms_take(struct queue_rooms *r, const struct hlb_backend *be, bool gone)
{
	for (uint32_t i = 0; i < r->n; i++) {
		if (r->be[i] != be || !r->left[i])
			continue;
		uint32_t took = gone ? r->left[i] : 1;

		r->left[i] -= took;
		r->total -= took;
	}
}

/*
 * What the conn_connect() of a client waiting in the worker's queue reads,
 * but the backends' claims (a slot that frees kicks the queue, see
 * worker_kick_queues()) and loads (bounded load reorders a list tried in
 * full): for each service of the queue (w->queue_svcs) its snapshot (by
 * generation, each publication's own) and whether a reload removed it, and
 * for each backend of the snapshot its max_connections, its slow start
 * admission (ramp_first(), retry_first()) and whether it is failing(). One
 * value, mixed: while it stays, a walk would find the clients as the last.
 * The sum of a part for each service, each noted in the worker's line of
 * the service (wstats.queue_fp): the value of any set of them, in any
 * order, is known without reading them again (conn_queue_run()).
 * Into <rooms>, the free slots of the backends a waiting client found full
 * (queue_wants()): while it stays and none has room, no client can be served.
 * Into <ret_changed>, whether a service's queue_changes moved since the last
 * walk of the whole queue read it (queue_changes_seen()): exact where the
 * value may collide.
 * A fresh service (joined since, or with no client waiting:
 * queue_svc_fresh()) is left out of the value and of <ret_changed>, its
 * part noted all the same; into <ret_fresh>, whether one has clients.
 * The backends read are counted (queue_fp_reads): what the look costs.
 */
static uint64_t queue_fingerprint(struct worker *w, struct queue_rooms *rooms, bool *ret_changed,
				  bool *ret_fresh)
{
	bool changed = false, fresh = false;
	uint64_t h = 0;

	rooms->n = 0;
	rooms->total = 0;
	rooms->many = false;
	for (uint32_t i = 0; i < w->n_queue_svcs; i++) {
		struct hlb_service *svc = w->queue_svcs[i];
		const struct hlb_snapshot *snap = hlb_service_snapshot(svc);
		uint64_t part;

		bool svc_fresh = queue_svc_fresh(w, svc);

		changed |= !svc_fresh &&
			   atomic_load_explicit(&svc->queue_changes, memory_order_relaxed) !=
				   svc->wstats[w->id].queue_seen;
		fresh |= svc_fresh && svc->wstats[w->id].queue_n;
		part = fp_mix(0, snap->generation << 1 |
					 atomic_load_explicit(&svc->removed, memory_order_relaxed));
		hlb_stat_add(&w->queue_fp_reads, snap->n_backends);
		for (uint32_t b = 0; b < snap->n_backends; b++) {
			struct hlb_backend *be = snap->backends[b];
			uint32_t cap = atomic_load_explicit(&be->max_conns, memory_order_relaxed);
			uint32_t admit = atomic_load_explicit(&be->admit, memory_order_relaxed);
			uint64_t claimed;

			part = fp_mix(part, (uint64_t)cap << 32 | admit);
			part = fp_mix(part, failing(be));
			if (!cap || !queue_wants(w, be))
				continue;
			claimed = atomic_load_explicit(&be->claimed, memory_order_relaxed);
			if (claimed >= cap)
				continue;
			if (rooms->n == QUEUE_ROOMS) {
				rooms->many = true;
				continue;
			}
			rooms->be[rooms->n] = be;
			rooms->left[rooms->n++] = cap - (uint32_t)claimed;
			rooms->total += cap - claimed;
		}
		part &= ~QUEUE_FP_FRESH;
		svc->wstats[w->id].queue_fp = part | svc_fresh;
		h += svc_fresh ? 0 : part;
	}
	*ret_changed = changed;
	*ret_fresh = fresh;
	return h;
}

/*
 * After a walk of the whole queue, the fingerprint of the services its
 * clients left waiting (those of the look's, fewer if it served the last of
 * one): what the next look's is while nothing changes (the parts this look
 * read, summed), so that a service leaving the queue, or the order of those
 * left changing, is no change that walks it again.
 */
static uint64_t queue_fp_left(const struct worker *w)
{
	uint64_t h = 0;

	for (uint32_t i = 0; i < w->n_queue_svcs; i++) {
		uint64_t part = w->queue_svcs[i]->wstats[w->id].queue_fp;

		h += part & QUEUE_FP_FRESH ? 0 : part; /* fresh: none of its clients waits */
	}
	return h;
}

/*
 * Whether queue_fingerprint() costs less than the walk it would spare: it
 * reads every backend of the queue's services, a walk at most
 * QUEUE_FP_PER_CLIENT per client waiting. One client waiting for a backend
 * of 10,000 cost the worker ten times the walks it spared (0.10 CPU seconds
 * in 3 s, the walks 0.01).
 */
static bool queue_fp_cheaper(const struct worker *w)
{
	uint64_t n = 0;

	if (w->queue_svcs_lost)
		return false; /* not all known: walked every time */
	for (uint32_t i = 0; i < w->n_queue_svcs; i++)
		n += hlb_service_snapshot(w->queue_svcs[i])->n_backends;
	return n <= (uint64_t)w->queue_n * QUEUE_FP_PER_CLIENT;
}

/*
 * A walk of the whole queue (or, <fresh_only>, of its fresh services'
 * clients) starts: it reads what each of its services changed so far,
 * stored before each was counted (hlb_service_queue_changed()). Only this
 * worker writes and reads its line's queue_seen. A service that joins the
 * queue later keeps what an earlier walk read: older, or as new.
 */
static void queue_changes_seen(struct worker *w, bool fresh_only)
{
	for (uint32_t i = 0; i < w->n_queue_svcs; i++) {
		struct hlb_service *svc = w->queue_svcs[i];

		if (fresh_only && !queue_svc_fresh(w, svc))
			continue;
		svc->wstats[w->id].queue_seen =
			atomic_load_explicit(&svc->queue_changes, memory_order_acquire);
	}
}

/* A walk of the whole queue will tell again which backends its clients want (queue_want()). */
static void queue_unwant_all(struct worker *w)
{
	for (uint32_t i = 0; i < w->n_queue_svcs; i++) {
		const struct hlb_snapshot *snap = hlb_service_snapshot(w->queue_svcs[i]);

		for (uint32_t b = 0; b < snap->n_backends; b++)
			queue_unwant(w, snap->backends[b]);
	}
}

/*
 * Try the waiting connections again, oldest first, each from the start of
 * its preference list in the current table: those that find room connect,
 * those past their deadline are closed, those with no backend left at all
 * (all down now) are closed as without a queue. One that waits after a
 * failed connect is retried as conn_connect_done() retries while the
 * backend that failed still is failing(): not on that one, and rather
 * waiting on than trying those known to fail; the connect it starts is
 * counted as that failure's retry.
 *
 * The whole queue is tried when queue_fingerprint() changed (a client's
 * list may be another), QUEUE_SAFETY_MS after the first look since the
 * last such walk that saw its services' count of changes move (for what
 * the rest misses: a fingerprint's collision, which takes a change, and
 * every change that gives room is counted, then kicks; with no such change
 * nothing is walked however long the clients wait, whatever kicks: another
 * service's slow start, a slot of a backend none of them wants), and always
 * while the fingerprint would cost more than the walk (queue_fp_cheaper()).
 * Otherwise a waiting client can be served only by a slot that freed on a
 * backend it found full: the clients are tried, in order, only while such
 * a slot is left (queue_rooms). A slot that frees costs the clients it is
 * handed to, not the queue. A service that joined the queue since (fresh:
 * its part of the fingerprint not known) costs its own clients, not the
 * queue's: they are tried once more after its part is read, from the
 * first client that joined since (w->queue_fresh_at), so that a change
 * between a client's own try and that read is not missed. The deadlines that came and that no walk
 * served are found in w->queue_dues (queue_expire()): each costs its own
 * client, not the queue. Run when kicked (w->queue_kick: for a service of
 * its clients, a slot freed on any worker, a change of the control plane's,
 * a failing backend serving again; a command) and at each tick while
 * clients wait, when it walks only for the whole queue.
 */
void conn_queue_run(struct worker *w)
{
	struct conn **pp = &w->queue_head, *c;
	uint32_t n_old;
	bool gated, kicked = w->queue_kick, whole;
	struct queue_rooms rooms = { 0 };
	bool changed = false, fresh = false, past_fresh = false, skipped = false;
	uint64_t fp;

	queue_svcs_drop_idle(w);
	n_old = w->n_queue_svcs;
	gated = queue_fp_cheaper(w);
	fp = gated ? queue_fingerprint(w, &rooms, &changed, &fresh) : 0;
	hlb_stat_add(&w->queue_looks, 1);
	if (kicked)
		hlb_stat_add(&w->queue_looks_woken, 1);
	w->queue_kick = w->queue_tick = false;
	/* Any look, kicked or not: its tick may come between a change and the
	 * kick for it, which then finds nothing new since this look. */
	if (changed && w->queue_walk_by == QUEUE_WALK_NONE)
		w->queue_walk_by = w->now_ms + QUEUE_SAFETY_MS;
	whole = !gated || fp != w->queue_fp || w->now_ms >= w->queue_walk_by ||
		(kicked && rooms.many);
	if (!whole && !kicked) /* a slot that freed kicks: tried then */
		rooms.n = rooms.total = 0;
	/* No fresh service, and not kicked, or kicked but no slot is free that a
	 * waiting client may take: no client to try, only the deadlines that came. */
	if (!whole && !fresh && !rooms.total) {
		queue_expire(w);
		queue_next(w);
		return;
	}
	if (!whole && fresh)
		queue_changes_seen(w, true);
	if (whole) {
		queue_changes_seen(w, false);
		w->queue_walk_by = QUEUE_WALK_NONE; /* until the next kick */
		/* The services of the clients left waiting, noted after the old
		 * ones (given back after the walk, which may free connections),
		 * and the backends they want. */
		w->queue_svcs_lost = false;
		w->queue_svc_mark++;
		if (gated)
			queue_unwant_all(w);
	}
	for (;;) {
		const struct hlb_snapshot *snap;
		bool expired, connecting;
		struct hlb_backend *wanted, *failed;

		/* No slot left: the rest cannot be served but the fresh services'
		 * clients, all past w->queue_fresh_at; their deadlines: below. */
		if (!whole && !rooms.total) {
			if (!fresh)
				break;
			if (!past_fresh)
				pp = w->queue_fresh_at;
		}
		past_fresh |= pp == w->queue_fresh_at;
		if (!(c = queue_step(w, pp)))
			break;
		if (!whole && !rooms.total && !queue_svc_fresh(w, c->svc)) {
			skipped = true;
			pp = &c->qnext;
			continue;
		}
		snap = hlb_service_snapshot(c->svc);
		expired = (int32_t)((uint32_t)w->now_ms - c->queued_until) >= 0;
		wanted = c->be; /* conn_connect() sets c->be */
		failed = c->retry_of; /* conn_connect() writes c->ts over it */
		hlb_stat_add(&w->queue_tries, 1);
		c->be = NULL;
		c->tried = 0; /* the whole list again: its full backends may have room */
		w->first_full = NULL;
		w->n_full_seen = 0;
		/* A service a reload removed: its backends drain and take no new
		 * client, so none is left for it (closed as no_backend below). */
		connecting = !atomic_load_explicit(&c->svc->removed, memory_order_relaxed) &&
			     conn_connect(w, c, snap, failed && failing(failed) ? failed : NULL);
		for (uint32_t i = 0; i < w->n_full_seen; i++)
			rooms_take(&rooms, w->full_seen[i], true);
		if (!connecting && w->first_full && !expired) {
			c->be = wanted;
			c->retry_of = failed;
			c->qprev = pp; /* with retry_of, where conn_connect() may write */
			queue_want_seen(w);
			queue_svc_note(w, c->svc, false);
			pp = &c->qnext; /* still no room */
			continue;
		}
		queue_unlink(w, pp);
		queue_release(wanted);
		if (failed && connecting)
			hlb_stat_add(&failed->wstats[w->id].retries, 1);
		hlb_backend_unref(failed);
		if (connecting) {
			hlb_stat_add(kicked ? &w->queue_served_woken : &w->queue_served_tick, 1);
			rooms_take(&rooms, c->be, false);
			continue;
		}
		if (w->first_full) {
			hlb_stat_add(&c->svc->wstats[w->id].queue_timeouts, 1);
			conn_abort(w, c, CONN_END_QUEUE_TIMEOUT);
		} else {
			conn_fail_no_backend(w, c);
		}
	}
	/* Every client tried: a slot still free was tried by every client
	 * that waits, none wants its backend. */
	if (!c && !skipped)
		for (uint32_t i = 0; i < rooms.n; i++)
			if (rooms.left[i])
				queue_unwant(w, rooms.be[i]);
	queue_expire(w);
	queue_next(w);
	if (!whole && fresh) {
		/* the fresh parts were read before their clients' tries; those of services
		 * with none waiting stay out */
		for (uint32_t i = 0; i < w->n_queue_svcs; i++) {
			struct hlb_service *svc = w->queue_svcs[i];

			queue_svc_set_fresh(w, svc, !svc->wstats[w->id].queue_n);
		}
		w->queue_fp = queue_fp_left(w);
	}
	if (whole || fresh)
		w->queue_fresh_at = w->queue_tail;
	if (!whole)
		return;
	for (uint32_t i = 0; i < n_old; i++)
		hlb_service_unref(w->queue_svcs[i]);
	memmove(w->queue_svcs, w->queue_svcs + n_old,
		(w->n_queue_svcs - n_old) * sizeof(*w->queue_svcs));
	w->n_queue_svcs -= n_old;
	/* The parts were read before the walk: a change during it is seen next time. Each
	 * service left was one of the look's, its part read (not gated: fp is 0, none read). */
	w->queue_fp = gated ? queue_fp_left(w) : fp;
}

/*
 * An upgrade in place: lend each client waiting in the queue to the new process, which asks
 * for them (hlb_proxy_lend_queue(), lending <gen>). Each is taken off the queue, with its
 * counts, into w->lent, its socket duplicated for the control thread to pass, and the bytes
 * its socket had given to a reader and taken from a writer noted (lent_mark()): if it comes
 * back, more would be the new process's doing. Its client watch stays, but does nothing while
 * it is lent (conn_client_watch_done()): a client that leaves meanwhile is closed here,
 * unreset, if the new process takes it, else its end is found once it is tried for a backend
 * again (conn_lent_end()). A client past its deadline, or whose socket cannot be duplicated or
 * noted, stays. Answers with lent_answer().
 */
void conn_queue_lend(struct worker *w, uint32_t gen)
{
	struct hlb_lent *lent = NULL;
	struct conn **pp = &w->queue_head, **lt = &w->lent, *c;
	size_t n = 0, cap = 0;

	while (*lt) /* in the queue's order, after any lent before */
		lt = &(*lt)->qnext;

	while ((c = queue_step(w, pp))) {
		int32_t left = (int32_t)(c->queued_until - (uint32_t)w->now_ms);
		const struct hlb_snapshot *snap = hlb_service_snapshot(c->svc);
		uint64_t read, written;
		struct hlb_lent *l;
		int fd;

		if (left <= 0 || (snap->accept_proxy && !c->orig) ||
		    strlen(c->svc->name) >= sizeof(lent->svc) ||
		    !lent_mark(c->fd[0], &read, &written)) {
			pp = &c->qnext;
			continue;
		}
		if (hlb_grow((void **)&lent, &cap, n + 1, sizeof(*lent), 64) < 0)
			break;
		fd = fcntl(c->fd[0], F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			break; /* no descriptor left: the rest stay */
		l = &lent[n];
		memset(l, 0, sizeof(*l));
		l->fd = fd;
		l->worker = w->id;
		l->gen = gen;
		l->idx = (uint32_t)n++;
		l->read = read;
		l->written = written;
		l->left_ms = (uint32_t)left;
		strcpy(l->svc, c->svc->name);
		if (c->orig) {
			l->addrs = true;
			memcpy(l->addr, c->orig, sizeof(l->addr));
		}
		queue_unlink(w, pp);
		l->waited_ms = c->queue_ms; /* its waits so far, queue_unlink() added up */
		queue_release(c->be);
		c->be = NULL;
		hlb_backend_unref(c->retry_of);
		c->state = CONN_LENT;
		c->lent_gen = gen;
		c->lent_idx = l->idx;
		c->qnext = NULL;
		c->lprev = lt;
		*lt = c;
		lt = &c->qnext;
	}
	/* what is left in the queue was not lent */
	if (!lent_answer(w->proxy, lent, n, w->queue_n)) {
		for (size_t i = 0; i < n; i++)
			close(lent[i].fd);
		conn_lent_end(w, gen, NULL, 0);
	}
	free(lent);
}

/*
 * Lending <gen> ends: what becomes of each client this worker lent in it, <fates>[its place]
 * (enum lent_fate; NULL: all come back). Those taken are closed here, without a word to them
 * (end=handed_over). Those whose stream the new process used before it exited are reset. The
 * others come back: tried for a backend again, and waiting again, in the queue's order, under
 * their first deadline if none has room. Clients of other lendings stay as they are. One walk
 * of w->lent.
 */
void conn_lent_end(struct worker *w, uint32_t gen, const uint8_t *fates, size_t n)
{
	struct conn **pp = &w->lent, *c, *back = NULL, **tail = &back;

	while ((c = *pp)) {
		enum lent_fate fate = LENT_BACK;

		if (c->lent_gen != gen) {
			pp = &c->qnext;
			continue;
		}
		if (fates && c->lent_idx < n)
			fate = (enum lent_fate)fates[c->lent_idx];
		if (fate == LENT_TAKEN) {
			conn_abort(w, c, CONN_END_HANDED_OVER); /* off w->lent: *pp is the next */
			continue;
		}
		if (fate == LENT_RESET) {
			/* the new process has exited: the socket is this one's alone */
			sock_reset_on_close(c->fd[0]);
			c->err = EPROTO;
			conn_abort(w, c, CONN_END_ERROR);
			continue;
		}
		lent_unlink(c);
		*tail = c;
		tail = &c->qnext;
	}
	while ((c = back)) {
		const struct hlb_snapshot *snap = hlb_service_snapshot(c->svc);

		back = c->qnext;
		c->qnext = NULL;
		c->state = CONN_CONNECTING;
		c->tried = 0;
		w->first_full = NULL;
		w->n_full_seen = 0;
		if (!conn_connect(w, c, snap, NULL))
			conn_no_backend(w, c, snap, NULL);
	}
}

/*
 * <fd>: a client another hashlb kept waiting in a queue of <svc>, served as if just accepted
 * (conn_accepted(): keepalive, allow/deny, per client; its slot of the service's
 * max_connections taken already, by hlb_proxy_adopt()), its wait bounded by the <left_ms> it
 * had left there, the <waited_ms> it waited there counted in its queue_ms. <addr>: the
 * addresses its PROXY header named (read there), else its socket's own. Takes <fd>.
 */
void conn_adopt(struct worker *w, struct hlb_service *svc, int fd, uint32_t left_ms,
		uint32_t waited_ms, const struct sockaddr_storage *addr)
{
	const struct hlb_snapshot *snap = hlb_service_snapshot(svc);
	struct sockaddr_storage own[2];
	struct conn *c;

	if (!snap) {
		atomic_fetch_sub_explicit(&svc->active, 1, memory_order_relaxed);
		client_refuse(w, fd);
		return;
	}
	c = conn_new(w, svc, snap, fd, true);
	if (!c)
		return;
	if (snap->keepalive.enabled)
		sock_keepalive(fd, &snap->keepalive);
	c->was_queued = true;
	c->queue_ms = waited_ms; /* a wait here adds to it (conn_no_backend()) */
	c->queued_until = (uint32_t)w->now_ms + (left_ms ? left_ms : 1);
	if (addr) {
		if (c->proxy) {
			c->orig = malloc(2 * sizeof(*addr));
			if (!c->orig) {
				c->err = ENOMEM;
				conn_abort(w, c, CONN_END_ERROR);
				return;
			}
			memcpy(c->orig, addr, 2 * sizeof(*addr));
		}
		conn_route(w, c, snap, addr);
	} else if (client_addrs(fd, own, snap->key == HASHLB_KEY_4TUPLE) < 0) {
		conn_reset(w, c, 0, sock_gone_error(fd));
	} else {
		conn_route(w, c, snap, own);
	}
}
