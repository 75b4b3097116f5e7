/* SPDX-License-Identifier: MIT */
/*
 * Private to the data plane: one worker thread, its ring, its provided
 * buffers, its listeners and its connections.
 *
 * Every SQE carries a user_data of (pointer | op), the pointer 16-byte
 * aligned. Fire-and-forget operations (close) use user_data 0 with
 * IOSQE_CQE_SKIP_SUCCESS, so only their failures come back, and are ignored.
 */
#ifndef HASHLB_PROXY_WORKER_H
#define HASHLB_PROXY_WORKER_H

#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "idle.h"
#include "log.h"
#include "proxy.h"
#include "runtime.h"

enum op {
	OP_IGNORE = 0,
	OP_ACCEPT, /* wlistener: multishot accept */
	OP_CONNECT, /* conn */
	OP_RECV, /* conn, half 0: from the client */
	OP_RECV_B, /* conn, half 1: from the backend */
	OP_SEND, /* conn, half 0: to the backend */
	OP_SEND_B, /* conn, half 1: to the client */
	OP_WORKER, /* worker: its own, no pointer; which one is above the op (UD_*) */
	OP_HEADER, /* conn: the client readable while its PROXY header is awaited */
	OP_POLL, /* conn, half 0 spliced: readiness of the client (in) or the backend (out) */
	OP_POLL_B, /* conn, half 1 spliced: readiness of the backend (in) or the client (out) */
	/* conn, queued or its connect slow: the client reset (or closed, abort_on_close) */
	OP_CLIENT_WATCH,
	OP_WATCH, /* conn, half 0 not reading the client (full, or its FIN): its reset (half_watch()) */
	OP_WATCH_B, /* conn, half 1 not reading the backend: its reset */
	OP_OUT, /* conn, half 0: room on the backend, which sent its FIN (half_poll()) */
	OP_OUT_B, /* conn, half 1: room on the client, which sent its FIN */
	OP_MAX
};
#define OP_MASK 15ull
_Static_assert(OP_MAX <= OP_MASK + 1, "an op fits below a pointer's alignment");

/* The worker's own operations (OP_WORKER) */
#define UD_TICK ((1ull << 4) | OP_WORKER) /* periodic timer */
#define UD_WAKE ((2ull << 4) | OP_WORKER) /* eventfd read: commands queued, or a kick */
#define UD_LOG ((3ull << 4) | OP_WORKER) /* multishot poll: room on stderr, log lines waiting */

#define BUF_NONE 0xffffu
/* send_bid of a half whose destination stopped reading: its data was moved
 * out of the pool into <priv> (see conn.c, "Spill") */
#define BUF_PRIV 0xfffeu
/* Connections waiting for room under a max_connections: their queue is
 * tried at once when a slot of one of their services frees on any worker,
 * looked at once when the control plane changes what could give them room
 * (hlb_proxy_kick_queues()) or a failing backend of theirs serves again, at
 * their deadlines, and at each tick (TICK_MS), see conn_queue_run(); walked
 * in the turn the queue starts. The tick of a paused listener comes after
 * this. */
#define QUEUE_RETRY_MS 10
/* the queue walked that long after the first change of its services' seen
 * since its last walk (conn_queue_run()) */
#define QUEUE_SAFETY_MS 1000
#define QUEUE_WALK_NONE UINT64_MAX /* queue_walk_by: no walk due */
/* A client's walk tries up to this many backends (CONN_TRIED_MAX): a queue
 * whose services have more backends than that per client waiting is walked,
 * not fingerprinted (conn_queue_run()) */
#define QUEUE_FP_PER_CLIENT 32
/* a service's name and its NUL (the config allows 64 bytes) */
#define HLB_SERVICE_NAME_SIZE 65
/* listen(2)'s backlog of a service's sockets */
#define LISTEN_BACKLOG 4096

struct hlb_listener {
	atomic_uint refs;
	/* its socket came from the service manager (socket activation): passed to this process,
	 * or to one an upgrade in place replaced, that handed it on (shared) */
	bool inherited;
	/* its sockets are one, a descriptor per worker, not the service manager's as passed:
	 * the manager's handed on by the hashlb this one replaced, or one taken over and not
	 * used (listener_on_taken()); no worker shuts it down as its own (listener_shutdown()) */
	bool shared;
	uint32_t n_taken; /* of its sockets, how many the hashlb it replaces handed over */
	uint32_t n_workers;
	struct sockaddr_storage addr; /* as configured (port 0 = any) */
	socklen_t addr_len;
	struct sockaddr_storage bound; /* as bound: the key for reuse across reloads */
	char bound_name[64];
	char handover_name[64 + HLB_SERVICE_NAME_SIZE]; /* hlb_listener_handover_name() */
	char *name;
	_Atomic(struct hlb_service *) svc; /* one reference */
	/* n_workers, then the extra sockets a hashlb of more workers handed over: worker
	 * i % n_workers accepts on fds[i]; -1 once that worker closed it */
	int *fds;
	uint32_t n_fds;
};

void hlb_listener_unref(struct hlb_listener *l);

/* For each of <l>'s sockets that worker <id> accepts on: index <i> of l->fds. */
#define listener_for_each_fd(l, id, i) for (uint32_t i = (id); i < (l)->n_fds; i += (l)->n_workers)

/* One worker's use of a listener. */
struct wlistener {
	struct wlistener *next;
	struct hlb_listener *l; /* one reference */
	int fd;
	uint32_t idx; /* fd is l->fds[idx] */
	bool armed; /* an accept is in flight (multishot, or one at a time: max_connection_rate) */
	bool multishot; /* that accept is multishot */
	bool cancelled; /* it is being cancelled: its -ECANCELED is ours */
	bool closing; /* removed or draining: close once the accept has ended */
	/* its backlog is served before it closes: removed by a reload, or at a stop of the
	 * process that holds it alone (hlb_proxy_drain()) */
	bool serve_backlog;
	bool paused; /* at the fd limit or the connection cap, or over max_connection_rate:
		      * re-armed by the tick */
	uint32_t paused_rate; /* the max_connection_rate that paused it, 0 for the others */
	uint64_t resume_ms;
} __attribute__((aligned(16)));

/* One direction of a connection: half 0 client -> backend, half 1 backend -> client. */
struct half {
	struct half *starved_next; /* in the worker's list of halves waiting for a buffer */
	uint64_t bytes; /* forwarded to the destination, for the connection log */
	uint32_t send_off, send_len; /* the buffer being sent: [off, len) left */
	uint32_t pend_len;
	uint16_t send_bid; /* BUF_NONE when no send is in flight */
	uint16_t pend_bid; /* a received buffer waiting for the send to finish */
	uint8_t idx;
	bool recv_armed;
	bool eof; /* the source sent FIN */
	bool starved;
	/* splice (see conn.c): a bulk direction moves kernel to kernel through a pipe */
	bool splice_want; /* switch once the send in flight is done */
	bool spliced;
	/* MSG_MORE (see conn.c): the send in flight, the parked buffer, and data
	 * the destination's socket holds back for what follows */
	bool send_more : 1, pend_more : 1, corked : 1;
	/* an OP_WATCH multishot poll is armed on the source; the kernel ended one at its FIN */
	bool watch : 1, watch_fin : 1;
	/* the OP_POLL in flight waits for room on the destination; an OP_OUT
	 * multishot poll is armed on it; the half waits for its next report */
	bool poll_out : 1, out_armed : 1, out_wait : 1;
	bool poll_armed : 1; /* an OP_POLL is in flight (half_poll()) */
	bool woken : 1; /* its recv was armed by conn_wake_starved(), not yet completed */
	bool splice_refused : 1; /* counted in splice_refused: once per direction */
	uint32_t bulk; /* bytes forwarded in large reads, until the switch */
	uint32_t pipe_len; /* bytes in the pipe */
	union {
		int pipe[2]; /* read end, write end; valid when spliced */
		/* send_bid == BUF_PRIV: the bytes for the destination, [send_off,
		 * send_len) still to go (never while spliced: a direction moves
		 * to splice only with nothing in flight) */
		uint8_t *priv;
	};
};

enum conn_state {
	CONN_CONNECTING = 0,
	CONN_OPEN,
	CONN_CLOSING,
	CONN_HEADER,
	CONN_QUEUED, /* every backend it may use at its max_connections: waiting in w->queue */
	CONN_LENT, /* was CONN_QUEUED: lent to an upgrade's new process, in w->lent (qnext) */
	CONN_STATE_MAX
};

/* Why a connection ended: the end= of its log line (docs/dataplane.md). */
enum conn_end {
	CONN_END_NONE = 0,
	CONN_END_DONE, /* both sides sent FIN and everything was forwarded */
	CONN_END_CLIENT_RESET, /* the client's socket failed (reset, ...) */
	CONN_END_BACKEND_RESET, /* the backend's socket failed */
	CONN_END_CLIENT_CLOSED, /* accept_proxy: the client closed before a byte */
	CONN_END_IDLE, /* idle_timeout */
	CONN_END_NO_BACKEND, /* no backend to try */
	CONN_END_CONNECT_FAILED, /* every connect tried failed */
	CONN_END_DRAIN, /* shutdown, or its backend removed, past the drain timeout */
	CONN_END_BAD_HEADER, /* accept_proxy: no valid PROXY header in time */
	CONN_END_QUEUE_TIMEOUT, /* queued, and no backend had room within timeouts.queue */
	CONN_END_DENIED, /* allow_clients/deny_clients: a client not served */
	CONN_END_CLIENT_LIMIT, /* the client holds max_connections_per_client already */
	CONN_END_CLOSED, /* hashlb ctl close: its backend's connections closed */
	CONN_END_BACKEND_DOWN, /* health.close_on_down: its backend went down */
	CONN_END_PRIMARY_UP, /* close_on_return: its backend is a backup, another is back */
	CONN_END_HANDED_OVER, /* queued, taken by an upgrade's new process, which serves it */
	CONN_END_REJECTED, /* the service holds its max_connections already */
	CONN_END_ERROR, /* anything else */
	CONN_END_MAX
};

struct conn {
	struct conn *next, *prev; /* the worker's connections */
	struct hlb_service *svc; /* one reference */
	struct hlb_backend *be; /* one reference: kept for the connection's life */
	uint64_t hash;
	int fd[2]; /* client, backend */
	union {
		uint32_t last_ms; /* CONN_HEADER, CONN_OPEN: last activity, worker clock */
		/* CONN_CONNECTING, CONN_QUEUED (no idle timeout): the places in
		 * the table's preference list of the backends tried or passed
		 * over for being full, bit i for place i (conn_connect()) */
		uint32_t tried;
	};
	uint32_t idle_ms;
	/* requests whose last CQE is still to come: a handful (per half a recv,
	 * a send, a poll, a watch and a wait for room; the connect or the
	 * header poll, the client watch). Not the connect's linked timeout nor
	 * the cancels and removals, which carry no connection (user_data 0). */
	uint8_t inflight;
	uint8_t state : 3; /* enum conn_state */
	uint8_t end : 5; /* enum conn_end, set when it starts closing */
	uint8_t tries; /* connects started */
	uint8_t err; /* errno behind <end>, 0 if none */
	bool established : 1; /* counted in the backend's established */
	bool claimed : 1; /* holds a claim on c->be (hlb_backend_claim()) */
	bool nonblock : 1; /* both sockets O_NONBLOCK (set when a direction is spliced) */
	bool lowat : 1; /* SO_RCVLOWAT raised to wait for a split PROXY header */
	bool log : 1; /* log_connections: one log line when it ends */
	bool client_set : 1; /* <client> holds the client hashed */
	bool was_queued : 1; /* <queued_until> is set: a second wait keeps the first deadline */
	bool drain_signalled : 1; /* CONN_END_DRAIN: by a second signal, before its deadline */
	/* <be>'s close_gen when it was chosen (low bits: a close is seen
	 * within a tick, long before 65,536 more of the same backend) */
	uint16_t close_gen;
	/* While connecting: when the connect was submitted (worker_clock_us(),
	 * wrapping: only differences count). Once established: how long that
	 * connect took, in microseconds. */
	uint32_t connect_us;
	uint32_t start_ms; /* accepted, worker_clock_fine_ms() */
	uint8_t client[18]; /* canonical tuple's source address and port (tuple.h) */
	uint8_t proxy : 2; /* enum hashlb_proxy_protocol: header for the backend, from accept */
	bool watch : 1; /* an OP_CLIENT_WATCH poll is in flight on the client */
	/* that watch ended at the client's FIN: not armed again (it would fire at once) */
	bool watch_fin : 1;
	bool per_client : 1; /* counted in svc->clients: <client> cut to <client_keep> bits */
	bool local_fail : 1; /* the last connect failed for want of our own socket */
	/* per_client: the bits of <client> its key kept, from the client_prefix
	 * it was claimed under (a reload may change the service's since) */
	uint8_t client_keep;
	uint32_t queued_until; /* was_queued: worker clock, closed if still waiting then */
	/* the ms it waited in the queue (the log's queue_ms); while CONN_QUEUED, the worker
	 * clock when it joined less what it waited before: each join and leave flips it */
	uint32_t queue_ms;
	struct sockaddr_storage *orig; /* accept_proxy: the client's addresses from its header,
					* [0] source, [1] destination, kept for our own header */
	struct half h[2];
	struct conn *qnext; /* CONN_QUEUED: the next in w->queue; <be> is then the
			     * backend it waits for (one reference, counted in its <waiting>) */
	union {
		/* connect timeout, read at submission: free again once submitted */
		struct __kernel_timespec ts;
		struct {
			/* CONN_QUEUED: the backend whose failed connect sent it
			 * there (one reference), NULL if none: the connect the
			 * queue starts is that failure's retry, counted under
			 * it, and goes elsewhere while that backend is failing */
			struct hlb_backend *retry_of;
			/* CONN_QUEUED: what points to it in w->queue (the
			 * previous one's <qnext>, or w->queue_head), so that an
			 * abort unlinks it without a walk of the queue */
			struct conn **qprev;
		};
		/* CONN_LENT: its lending (hlb_proxy_lend_queue()'s generation) and
		 * its place among the clients this worker lent in it; what points
		 * to it in w->lent (the previous one's <qnext>, or w->lent) */
		struct {
			uint32_t lent_gen, lent_idx;
			struct conn **lprev;
		};
		/* CONN_OPEN: the bytes waiting in its two sockets for their peers'
		 * ACK (SIOCOUTQ, added up) when the idle scan found it quiet, at
		 * <at_ms>; taken before the last activity when <at_ms> is not
		 * after <last_ms> (idle_due()) */
		struct idle_note quiet;
	};
} __attribute__((aligned(16)));

_Static_assert(CONN_STATE_MAX <= 8 && CONN_END_MAX <= 32 && HASHLB_PROXY_MAX <= 4,
	       "conn's state, end and proxy bit fields");

/* A client's deadline in the worker's w->queue_dues: it is due at <until>
 * if <c> still waits then under that deadline (the connection is not
 * freed, only reused: see queue_expire()). */
struct queue_due {
	uint32_t until; /* worker clock, as c->queued_until */
	struct conn *c;
};

/* What becomes of a client lent to an upgrade's new process (CMD_LENT_END). */
enum lent_fate {
	LENT_BACK, /* not taken: served here again */
	LENT_TAKEN, /* the new process's: closed here, unreset */
	LENT_RESET, /* back, but the new process read or wrote its stream: reset */
	LENT_FATE_MAX
};

struct cmd {
	struct cmd *next;
	enum { CMD_ADD, CMD_REMOVE, CMD_DRAIN, CMD_LEND, CMD_LENT_END, CMD_ADOPT } type;
	struct hlb_listener *l;
	uint32_t drain_ms;
	bool serve_backlog; /* CMD_DRAIN: hlb_proxy_drain()'s */
	/* CMD_LEND, CMD_LENT_END: the lending (<gen>); CMD_LENT_END: what becomes of each client
	 * the worker lent in it, by its place (<fates>, <n>: enum lent_fate); CMD_ADOPT: <fd> of
	 * <svc> (a reference), <left_ms> of its wait, <waited_ms> already there, <addr> if
	 * <addrs> */
	uint32_t gen;
	uint8_t *fates;
	size_t n;
	int fd;
	struct hlb_service *svc;
	uint32_t left_ms, waited_ms;
	bool addrs;
	struct sockaddr_storage addr[2];
};

struct worker {
	struct hlb_proxy *proxy;
	uint32_t id;
	pthread_t thread;
	bool started;
	struct io_uring ring;
	/* provided buffers, group 0 */
	struct io_uring_buf_ring *br;
	size_t br_size;
	uint8_t *bufs;
	size_t bufs_size;
	uint32_t buf_size, buf_count, buf_mask;
	uint32_t bufs_out; /* buffers held by connections */
	/* free buffers not in the ring, the last one given back on top (bufring.c) */
	uint16_t *stash;
	uint32_t stash_n;
	uint32_t ring_want; /* free buffers the ring holds at the end of a turn */
	uint32_t turn_bufs,
		turn_bufs_max; /* buffers received this turn, most in one since the last shrink */
	uint64_t ring_shrink_ms; /* the next bufring_shrink() */
	/* splice */
	uint32_t splice_after; /* 0 = never */
	uint32_t pipes, pipes_max; /* spliced directions now, and the cap (2 fds each) */
	uint32_t pipe_size; /* 0: leave the kernel's */
	bool pipes_may_be_small; /* worker_pipe_look() */
	long pipe_max_size; /* fs.pipe-max-size with --pipe-size, else 0; -1: unread */
	long pipe_user_soft, pipe_user_hard; /* fs.pipe-user-pages-soft; -hard with --pipe-size */
	uint64_t pipe_look_ms; /* the next worker_pipe_look() */
	/* halves waiting for a buffer, in the order they are to be woken; a woken
	 * one that found none again goes back at <starved_back> (conn.c) */
	struct half *starved_head, **starved_tail, **starved_back;
	uint32_t n_starved; /* halves in that list */
	uint64_t spilled, spill_max; /* bytes moved out of the pool (BUF_PRIV), and the cap */
	/* for hlb_proxy_worker_stats(): counters as they happen, gauges at each
	 * tick but <pipes>, stored as it changes (the connection cap counts it) */
	struct {
		_Atomic uint32_t bufs_out, starved, pipes;
		_Atomic uint64_t spilled;
		_Atomic uint64_t buffer_waits, buffer_wakeups, splice_refused, accept_errors,
			fd_limit, spills;
		_Atomic uint64_t pipes_small; /* pipe_size_check() */
		_Atomic uint64_t cap_pauses;
		_Atomic uint64_t cq_overflows; /* worker_cq_check() */
		_Atomic uint64_t resets_taken; /* half_reset_taken() */
		_Atomic uint64_t log_wakeups; /* UD_LOG completions: stderr's poll for room */
		_Atomic uint64_t turns; /* worker_main()'s loop turns */
		_Atomic uint64_t idle_scans; /* conn_idle_scan() calls */
		_Atomic uint32_t cq_dropped; /* the ring's own count, at each tick */
	} pub;
	/* connections */
	struct conn conns; /* list head */
	uint64_t n_conns;
	_Atomic uint64_t n_conns_pub; /* for hlb_proxy_connections() */
	struct conn *free_conns;
	struct conn *conn_chunks;
	/* connections waiting for room under a backend's max_connections, FIFO */
	struct conn *queue_head, **queue_tail;
	bool queue_kick; /* a slot may have freed: retry the queue this turn */
	/* set by conn_connect(): the first candidate it found at its
	 * max_connections, NULL if none; read by conn_no_backend() right after */
	struct hlb_backend *first_full;
	/* and every candidate it found at its max_connections, or passed over
	 * as such (one per place of its list at most) */
	struct hlb_backend *full_seen[HLB_PREFERENCE_MAX];
	uint32_t n_full_seen;
	bool queue_tick; /* the tick fired: look at the queue for what changed */
	/* look at the queue by then: a deadline, the walk due anyway (conn_queue_run()) */
	uint64_t queue_next_ms;
	/* What the last walk of the queue saw, so that the next one is skipped
	 * while nothing changed (conn_queue_run()): the services of the
	 * clients waiting (a reference each, each marked with queue_svc_mark
	 * in its wstats line; queue_svcs_lost: one could not be kept, no
	 * memory, and the queue is walked every time until it empties), the
	 * fingerprint of their routing state (queue_fingerprint()) and the
	 * walk due anyway (QUEUE_SAFETY_MS after a look that saw one of their
	 * counts of changes move, queue_changes_seen(); QUEUE_WALK_NONE). */
	struct hlb_service **queue_svcs;
	uint32_t n_queue_svcs;
	size_t queue_svcs_cap;
	uint64_t queue_svc_mark;
	bool queue_svcs_lost;
	uint64_t queue_fp;
	/* The link (queue_head or a client's qnext) after which the clients
	 * that joined since the last look that tried the fresh services' wait
	 * (conn_queue_run()): those of a fresh service are among them. */
	struct conn **queue_fresh_at;
	uint32_t queue_n; /* the clients in the queue */
	uint32_t queue_dues_kept; /* in queue_dues after its last clean-up (queue_due_room()) */
	uint64_t queue_walk_by;
	uint32_t min_idle_ms;
	uint64_t next_idle_scan;
	unsigned close_epoch; /* hlb_close_epoch at the last scan */
	/* listeners */
	struct wlistener *listeners;
	uint32_t n_listeners; /* in that list */
	/* commands from the control thread */
	pthread_mutex_t cmd_lock;
	struct cmd *cmd_head, **cmd_tail;
	/* under cmd_lock: it exits (worker_exit_ready()) or has exited, commands are read no
	 * more (worker_push() frees them, and a CMD_LEND is answered for it: none lent) */
	bool gone;
	/* under cmd_lock: the ring failed (worker_fail()), commands are read no more */
	bool failed;
	/* set last by a worker that failed, before it counts itself in n_failed: its listeners
	 * and unread commands are the control thread's now (hlb_proxy_close_failed()) */
	atomic_bool failed_done;
	int wake_fd;
	uint64_t wake_val;
	/* CLOCK_MONOTONIC in ms, read once per loop turn (and again for the
	 * completions posted during it): never later than a completion handled */
	uint64_t now_ms;
	struct __kernel_timespec tick_ts;
	bool draining;
	bool takeover_done; /* checked after the old hashlb exited */
	/* draining: since when (now_ms at the stop), and the latest a connection is closed
	 * (the stop's longest drain, UINT64_MAX for never, or now after a second signal:
	 * conn_idle_scan(); each one's own deadline is conn_drain_own()'s) */
	uint64_t drain_start, drain_deadline;
	bool drain_signalled; /* a later drain shortened it: a second signal's "now" */
	/* connections freed while draining: ended by themselves, and closed at
	 * its deadline (end=drain_timeout); read once the worker has exited
	 * (hlb_proxy_drain_ends()) */
	uint64_t drain_finished, drain_timed_out;
	bool exiting;
	/* io_uring_enter() failed: the ring is torn down, worker_close_fd() closes at once */
	bool ring_gone;
	uint64_t last_fd_limit_log, last_cap_log;
	struct hlb_logbuf log; /* connection log lines, flushed once per loop turn */
	bool log_poll; /* the UD_LOG multishot poll is armed (until its last CQE) */
	bool log_poll_cancelled; /* the backlog is out: it is being cancelled */
	int setup_ret;
	/* Last, so that the fields above, read per I/O, keep their places. */
	uint64_t tick_at; /* when the tick armed last fires (worker clock) */
	/* The deadlines of the clients waiting, the earliest first: a binary
	 * min-heap, an entry for each wait, whose client may have left since
	 * (queue_expire()). Kept (freed at exit); emptied with the queue. */
	struct queue_due *queue_dues;
	uint32_t n_queue_dues;
	size_t queue_dues_cap;
	/* for hlb_proxy_worker_stats(), as <pub>: clients waiting looked at
	 * for their deadline alone (queue_expire()) */
	_Atomic uint64_t queue_deadline_looks;
	/* waiting clients sent to a connect (conn_queue_run()): at a look it was woken for,
	 * and at one of its own (the tick, a deadline, the walk due anyway) */
	_Atomic uint64_t queue_served_woken, queue_served_tick;
	_Atomic uint64_t queue_tries; /* waiting clients tried for a backend (conn_queue_run()) */
	/* looks at the queue (conn_queue_run()), those it was woken for (w->queue_kick), and
	 * the backends their fingerprints read */
	_Atomic uint64_t queue_looks, queue_looks_woken, queue_fp_reads;
	_Atomic uint64_t cancels_by_fd; /* conn_abort(): cancels by descriptor sent */
	/* waiting clients read following the queue's links (from w->queue_head or
	 * one's <qnext>) through queue_step(), by a look or anything else that walks
	 * it: a client that leaves is taken off by its <qprev>, reading none */
	_Atomic uint64_t queue_steps;
	/* a wake-up for the queue is written to wake_fd and not read yet: another kick
	 * writes none (queue_wake()) */
	atomic_bool kick_pending;
	/* CONN_LENT: the clients lent to an upgrade's new process (conn_queue_lend()), in
	 * their queue's order, linked by <qnext> and <lprev> */
	struct conn *lent;
};

/*
 * While the hashlb that handed its sockets over still runs, an accept of
 * its may take the wake-up for a connection and then be cancelled as it
 * stops accepting, or die with it: the connection would wait in the queue
 * for the next one to arrive. Workers check the queues of sockets taken
 * over at each tick until it has exited (once more after that).
 */
enum { TAKEOVER_NONE, TAKEOVER_OLD_ALIVE, TAKEOVER_OLD_GONE };

/*
 * A listening socket the service manager passed (LISTEN_FDS), or one a
 * running hashlb handed over at start (taken: one per worker of it).
 */
struct inherited {
	int fd; /* kept open until the proxy is freed: a reload may use it again;
		 * a taken one belongs to the listener that uses it (-1 here) */
	struct sockaddr_storage addr;
	bool used; /* a listener took it */
	bool taken; /* handed over by the hashlb this one replaces */
	/* taken, the service manager's socket handed on in place (a listener's copies of one
	 * socket, fds_shared()): from its first listener on, <fd> is a copy kept open as for one
	 * the manager passed, that a reload may use again (inherited_for()) */
	bool kept;
	char svc[HLB_SERVICE_NAME_SIZE]; /* taken: the service it listened for there, "": unknown */
	char handover[80]; /* its line's "ADDRESS SERVICE" (hlb_proxy_inherited_unused()) */
};

struct hlb_proxy {
	struct hlb_proxy_opts opts;
	struct inherited *inh;
	uint32_t n_inh;
	uint32_t n_taken; /* of inh, the last ones: taken over */
	pid_t taken_from; /* the hashlb that handed them over */
	char *handover; /* its "set ..." lines (hlb_proxy_handover()), NULL if none */
	int taken_pidfd; /* its pidfd until hlb_proxy_take_pidfd(); -1 if none */
	/* an upgrade in place: where the old process sends its health again once this one is
	 * ready, until hlb_proxy_take_resync_fd(); -1 if none */
	int resync_fd;
	int migrate_fd; /* listen_socket()'s reuseport program: -2 not loaded yet, -1 none */
	bool from_parent; /* hlb_proxy_take_over_fd() reads its answer */
	atomic_uint takeover; /* TAKEOVER_*: whether workers watch the sockets taken over */
	struct hlb_rcu *rcu;
	struct worker *workers;
	uint32_t n_workers;
	uint64_t max_conns; /* hlb_proxy_set_max_connections(), 0: none */
	bool cap_fds; /* the fd budget: listener sockets and splice pipes take their share */
	_Atomic uint32_t n_wlisteners; /* listener sockets the workers hold */
	_Atomic uint32_t n_inh_fds; /* descriptors inh[] holds (inh_counted()), off the cap too */
	const _Atomic uint32_t *other_fds; /* hlb_proxy_count_fds(); never NULL */
	int exit_fd;
	_Atomic uint32_t n_exited;
	/* of those, the workers whose ring failed (hlb_proxy_failed()) */
	_Atomic uint32_t n_failed;
	/* hlb_proxy_failing_fd(): written once per burst (failing_pending) */
	int failing_fd;
	atomic_bool failing_pending;
	/* hlb_proxy_lend_queue(): the clients lent so far, and the workers that answered */
	pthread_mutex_t lent_lock;
	struct hlb_lent *lent;
	size_t n_lent, lent_cap;
	size_t n_not_lent; /* those left in the queues (lent_answer()) */
	uint32_t lent_answers;
	bool lending; /* control thread: asked, not taken yet */
	uint32_t lend_gen; /* control thread: the last lending's generation */
	int lent_fd;
	_Atomic uint32_t adopt_next; /* hlb_proxy_adopt(): the worker of the next */
	/* hlb_proxy_adopt()'s clients no worker has read yet (hlb_proxy_connections_adopting()) */
	_Atomic uint64_t adopting;
	_Atomic unsigned small_pipe_said; /* pipe_size_check(): SMALL_PIPE_*, once per process */
	pthread_mutex_t start_lock;
	pthread_cond_t start_cond;
	uint32_t n_ready;
};

/* SO_LINGER 0: the close of <fd> sends RST, not FIN. */
static inline void sock_reset_on_close(int fd)
{
	static const struct linger abort_linger = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_linger, sizeof(abort_linger));
}

static inline uint64_t ud_make(void *p, enum op op)
{
	return (uint64_t)(uintptr_t)p | op;
}

/*
 * A microsecond clock for connect times (CLOCK_MONOTONIC through the vDSO,
 * tens of ns; read twice per connect, never per request), wrapping at 2^32.
 */
static inline uint64_t worker_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint32_t worker_clock_us(void)
{
	return (uint32_t)(worker_clock_ns() / 1000u);
}

/*
 * Milliseconds of CLOCK_MONOTONIC now, wrapping at 2^32, for a
 * connection's logged duration: w->now_ms is the same clock read at the
 * turn's start, and a duration from it could come out shorter than the
 * connect_ms inside it. Read twice per connection.
 */
static inline uint32_t worker_clock_fine_ms(void)
{
	return (uint32_t)(worker_clock_ns() / 1000000u);
}

/* Submit before the turn's end (the SQ full, or a linked pair needs room): the ring of
 * buffers is topped up first, since the submit may fill buffers. */
void worker_submit_now(struct worker *w);
/* An SQE, submitting first if the SQ is full. Never NULL. */
struct io_uring_sqe *worker_sqe(struct worker *w);
void worker_close_fd(struct worker *w, int fd);
/* A slot of a backend of <svc> freed, or one serves again (its change
 * counted first, hlb_service_queue_changed()): every worker whose queue
 * holds a client of <svc> (this one included) retries its queue. */
void worker_kick_queues(struct worker *w, struct hlb_service *svc);
/* The same, after a seq_cst fence of the caller's that follows the change
 * with no store between that the kick's pairings need ordered: it stands
 * for the kick's own (conn_unclaim(), claim_undone() in proxy/conn.c). */
void worker_kick_queues_fenced(struct worker *w, struct hlb_service *svc);
/*
 * A backend of a Maglev service started failing connects (its
 * consecutive_fail went 0 -> 1): wake the control thread, which builds its
 * retry table (hlb_proxy_failing_fd()). One eventfd write per burst: the
 * first worker to say so writes, the others find it said.
 */
void worker_failing_seen(struct worker *w);
/*
 * Stop accepting on <wl> for <ms> (max_connection_rate at <rate>): the
 * clients behind wait in its listen backlog; the tick accepts again after
 * <ms>, or as soon as a reload changed the rate. True if it was accepting
 * until now.
 */
bool worker_accept_pause(struct worker *w, struct wlistener *wl, uint32_t ms, uint32_t rate);

/* A rate limit applies to <wl> (a reload set it): end a multishot accept, which takes the
 * whole backlog at once, for one accept at a time. The tick does it too, within ~100 ms. */
void worker_accept_single(struct worker *w, struct wlistener *wl);
/* Whether the cap the fd limit allows has room for one more splice pipe (no such cap: true). */
bool worker_pipe_room(const struct worker *w);
/* Draining worker <w> serves nothing more: whether it may exit (no command waits for it); if
 * so, it refuses commands from now on (gone). The worker's own thread, at a turn's end. */
bool worker_exit_ready(struct worker *w);

/* The queue holds a first client of <svc> now: kicks for <svc> wake the worker from now on. */
void worker_queue_joined(struct worker *w, struct hlb_service *svc);
/* The queue's last client of <svc> left it: they wake it no more. */
void worker_queue_left(struct worker *w, struct hlb_service *svc);
/* The queue is due at <at_ms> (worker clock): the tick fires then at the latest. */
void worker_tick_by(struct worker *w, uint64_t at_ms);

/* bufring.c */
int bufring_setup(struct worker *w);
void bufring_free(struct worker *w);
void bufring_put(struct worker *w, uint16_t bid);
void bufring_refill(struct worker *w);
void bufring_turn_end(struct worker *w);
void bufring_starved(struct worker *w);
void bufring_shrink(struct worker *w);
static inline uint8_t *bufring_addr(struct worker *w, uint16_t bid)
{
	return w->bufs + (size_t)bid * w->buf_size;
}

/* conn.c */
/* The causes of pipes smaller than asked, each said once per process (proxy.small_pipe_said) */
enum small_pipe {
	SMALL_PIPE_USER = 1 << 0, /* fs.pipe-user-pages-soft */
	SMALL_PIPE_MAX = 1 << 1, /* --pipe-size over fs.pipe-max-size */
	SMALL_PIPE_HARD = 1 << 2, /* fs.pipe-user-pages-hard */
	SMALL_PIPE_FAILED = 1 << 3, /* F_SETPIPE_SZ failed otherwise (ENOMEM) */
};

/* How often worker_pipe_look() reads again whether pipes can be small: the sysctl can change */
#define PIPE_LOOK_MS 10000
/* Whether this process's new pipes can be smaller than the kernel's 16 pages (conn.c). */
void worker_pipe_look(struct worker *w);
void conn_accepted(struct worker *w, struct wlistener *wl, int fd);
void conn_cqe(struct worker *w, struct conn *c, enum op op, const struct io_uring_cqe *cqe);
void conn_abort(struct worker *w, struct conn *c, enum conn_end end);
void conn_idle_scan(struct worker *w);
void conn_queue_run(struct worker *w);
void conn_queue_lend(struct worker *w, uint32_t gen);
bool lent_answer(struct hlb_proxy *p, const struct hlb_lent *lent, size_t n, size_t not_lent);
void conn_lent_end(struct worker *w, uint32_t gen, const uint8_t *fates, size_t n);
/* worker.c: <fd>'s bytes given to a reader (read, not counting a FIN) and taken from a writer
 * (written, the FIN counted) so far, in *<ret_read>, *<ret_written>; false if not known. */
bool lent_mark(int fd, uint64_t *ret_read, uint64_t *ret_written);
void conn_adopt(struct worker *w, struct hlb_service *svc, int fd, uint32_t left_ms,
		uint32_t waited_ms, const struct sockaddr_storage *addr);
void conn_queue_svcs_free(struct worker *w);
uint32_t conn_wake_starved(struct worker *w);
void conn_cache_free(struct worker *w);
uint64_t conn_reset_all(struct worker *w, int err);

#endif
