/* SPDX-License-Identifier: MIT */
/*
 * The runtime objects that the data plane (src/proxy/) and the control plane
 * (src/control/) share. This is the contract between them.
 *
 * Threads. One control thread (the process's main thread, running the
 * event loop of daemon.h) and N worker threads (src/proxy/, one io_uring
 * each). Workers are numbered 0..N-1; N is fixed for the life of the process.
 *
 * Backends (struct hlb_backend). One object per configured backend of a
 * service, refcounted: every snapshot that lists it holds one reference and
 * every connection to it holds one. A backend removed by a reload therefore
 * stays valid, with its counters, until its last connection closes. A reload
 * that keeps a backend (same service, same name, same address) keeps the
 * same object, so its counters and health survive. The control plane may
 * write admin, healthy, health_since_ns, admit, listed, close_*, address (a
 * name written otherwise, the old one freed after a grace period) and its own
 * <control> pointer; the workers write the counters; nothing else changes
 * after creation.
 *
 * Snapshots (struct hlb_snapshot). Immutable routing state of one service:
 * the core table (health overlay applied), the backend objects by table
 * index, the hash key and seed, and the per-service settings the workers
 * need (timeouts, limits). The control thread builds a new one on every
 * change (health, admin state, reload) and publishes it with one atomic
 * pointer store (hlb_service_publish()). A snapshot is never modified after
 * publication.
 *
 * Workers. On accept a worker loads the service's snapshot pointer
 * (acquire), hashes the client's tuple, takes the preference list, and takes
 * a reference on the backend it connects to; it never locks. A connection
 * keeps that backend for its whole life, whatever tables are published
 * meanwhile. On a failed connect the worker reloads the current snapshot
 * and moves to the next backend of the preference list.
 *
 * Reclamation (struct hlb_rcu). Quiescent-state based: a worker holds
 * snapshot and service pointers only within one event-loop turn, and is
 * "offline" (holds none) while it sleeps in io_uring_enter(). A retired
 * object is freed once every worker has been offline or passed a quiescent
 * point after the retirement. Retiring never blocks; the control thread's
 * loop runs the due frees (hlb_rcu_poll()).
 *
 * Counters. Each worker owns one cache line of counters per backend and per
 * service and adds to it with plain relaxed stores (single writer, no
 * atomic read-modify-write per I/O); readers sum the lines with
 * hlb_backend_counters_read() / hlb_service_counters_read(). Exceptions,
 * shared atomics touched once per connection, never per I/O: a service's
 * and a backend's <active> (max_connections, bounded load), a backend's
 * <consecutive_fail> and <connect_err> (written only on failures, and the
 * first on the first success after one) and its <rare_ends> (the ends the control plane or a
 * shutdown causes, enum hlb_end).
 *
 * Passive health: a worker counts every refused connect into connect_fail,
 * every timed-out connect into connect_timeout, and into the backend's
 * consecutive_fail (reset to 0 by the next successful connect), unless the
 * connect started before the control plane's last health verdict on the
 * backend (health_since_ns): news of the backend as it was. The control
 * plane reads consecutive_fail (or the deltas of the counters) to apply its
 * 'fall' rule, then publishes a snapshot with the backend down. The workers
 * read it too, on a retry only: backends whose last connect failed are
 * tried after the others, at once, not a tick and a build later. The
 * worker whose failure starts a run (0 -> 1) also wakes the control plane
 * (hlb_proxy_failing_fd()): on Maglev it builds the retry table then
 * rather than at its next tick; with checks off its ticks, which skip such
 * a service's backends otherwise, count the run (passive-only health).
 */
#ifndef HASHLB_RUNTIME_H
#define HASHLB_RUNTIME_H

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "hashlb/config.h"
#include "hashlb/error.h"
#include "hashlb/table.h"
#include "hashlb/tuple.h"

#define HLB_WORKERS_MAX 256u
/* Longest preference list a connection walks: 1 + connect_retries (0..32 in
 * the config). Only 1 + connect_retries entries are computed. */
#define HLB_PREFERENCE_MAX 33u

/* ---- quiescent-state reclamation ---------------------------------------- */

struct hlb_rcu;

/* A domain for <n_readers> reader threads (the workers), ids 0..n-1. */
int hlb_rcu_new(uint32_t n_readers, struct hlb_rcu **ret_rcu);
/* Runs every pending free; call when no reader runs any more. Accepts NULL. */
void hlb_rcu_free(struct hlb_rcu *rcu);

/* Reader side (workers), each with its own id. A reader starts offline. */
void hlb_rcu_online(struct hlb_rcu *rcu, uint32_t id);
void hlb_rcu_offline(struct hlb_rcu *rcu, uint32_t id);
void hlb_rcu_quiescent(struct hlb_rcu *rcu, uint32_t id);

/*
 * Call <fn>(<p>) once every reader has been offline or quiescent since this
 * call. Never blocks; any thread. Returns -ENOMEM (and then frees nothing,
 * the caller keeps <p>) only if the deferred entry cannot be allocated.
 */
int hlb_rcu_defer(struct hlb_rcu *rcu, void (*fn)(void *), void *p);
/* The number of readers, i.e. of counter lines per runtime object. */
uint32_t hlb_rcu_readers(const struct hlb_rcu *rcu);
/* Run the frees whose grace period has passed; returns how many remain. */
size_t hlb_rcu_poll(struct hlb_rcu *rcu);
/* Block (sleeping) until everything deferred before this call has been run. */
void hlb_rcu_barrier(struct hlb_rcu *rcu);

/* ---- backends ------------------------------------------------------------ */

/* Why the control plane closes a backend's connections (hlb_backend_close()). */
enum hlb_close_why {
	HLB_CLOSE_NONE = 0,
	HLB_CLOSE_ADMIN, /* hashlb ctl close */
	HLB_CLOSE_DOWN, /* health.close_on_down: its health went down */
	HLB_CLOSE_REMOVED, /* removed by a reload, past timeouts.drain */
	HLB_CLOSE_BACKUP, /* close_on_return: a backup, and another backend is back */
	HLB_CLOSE_MAX
};

/*
 * How a connection that reached its backend (established) ended, as its
 * line in the connection log says it (end=, hlb_end_names[]): counted per
 * backend when the connection is freed (hlb_backend_count_end()). Those
 * before HLB_END_WORKER_MAX, which any connection may meet, go to the
 * worker's own line; the others, only ever the doing of the control plane
 * or of a shutdown (hlb_backend_close(), past timeouts.drain), to shared
 * atomics of the backend: a worker line of their own would cost 64 bytes
 * per backend per worker for counts most backends never move.
 */
enum hlb_end {
	HLB_END_DONE = 0, /* both sides sent FIN and everything was forwarded */
	HLB_END_CLIENT_RESET, /* the client's socket failed (reset, ...) */
	HLB_END_BACKEND_RESET, /* the backend's socket failed */
	HLB_END_IDLE, /* idle_timeout */
	HLB_END_ERROR, /* anything else */
	HLB_END_WORKER_MAX,
	/* shutdown, or removed by a reload, past timeouts.drain */
	HLB_END_DRAIN = HLB_END_WORKER_MAX,
	HLB_END_CLOSED, /* hashlb ctl close */
	HLB_END_BACKEND_DOWN, /* health.close_on_down */
	HLB_END_PRIMARY_UP, /* close_on_return */
	HLB_END_MAX
};

extern const char *const hlb_end_names[HLB_END_MAX];

/*
 * The connect time histogram's buckets (hashlb_backend_connect_seconds):
 * upper bounds in microseconds, from loopback (~50 us) to a SYN
 * retransmitted twice (3 s) and beyond; a last bucket above them (+Inf).
 */
#define HLB_CONNECT_BUCKETS 16
extern const uint32_t hlb_connect_bucket_us[HLB_CONNECT_BUCKETS];

/* The bucket of a connect that took <us>: 0..HLB_CONNECT_BUCKETS. */
static inline unsigned hlb_connect_bucket(uint32_t us)
{
	unsigned i = 0;

	while (i < HLB_CONNECT_BUCKETS && us > hlb_connect_bucket_us[i])
		i++;
	return i;
}

/* One worker's counters for one backend, on cache lines of its own. */
struct hlb_backend_wstats {
	_Atomic uint64_t established; /* connections established */
	_Atomic uint64_t bytes_in; /* client -> backend */
	_Atomic uint64_t bytes_out; /* backend -> client */
	_Atomic uint64_t connect_fail; /* connects refused or failed */
	_Atomic uint64_t connect_timeout; /* connects that timed out */
	_Atomic uint64_t retries; /* connects that moved on from this backend to the next */
	_Atomic uint64_t splices; /* directions switched to splice (kernel-to-kernel) */
	_Atomic uint64_t bytes_spliced; /* of bytes_in + bytes_out, those moved by splice */
	_Atomic uint64_t full; /* clients passed to their next backend: at max_connections */
	_Atomic uint64_t ends[HLB_END_WORKER_MAX]; /* established connections ended, by how */
	/* connects that succeeded, by how long they took (hlb_connect_bucket()) */
	_Atomic uint64_t connect_hist[HLB_CONNECT_BUCKETS + 1];
	_Atomic uint64_t connect_us_sum;
} __attribute__((aligned(64)));
/* four cache lines per backend per worker: 20,000 backends on 64 workers hold 328 MB of them */
_Static_assert(sizeof(struct hlb_backend_wstats) == 256, "a backend's worker counters");

/* Summed counters of one backend, as read by the control plane. */
struct hlb_backend_counters {
	uint64_t active; /* established connections open now */
	uint64_t total; /* established ever */
	uint64_t bytes_in;
	uint64_t bytes_out;
	uint64_t connect_fail;
	uint64_t connect_timeout;
	uint64_t retries;
	uint64_t splices;
	uint64_t bytes_spliced;
	uint64_t full;
	uint64_t ends[HLB_END_MAX]; /* established connections ended, by how */
	uint64_t connect_hist[HLB_CONNECT_BUCKETS + 1]; /* per bucket, not cumulative */
	uint64_t connect_us_sum;
};

struct hlb_backend {
	atomic_uint refs;
	uint32_t n_workers;
	char *name;
	/* as configured, "host:port"; a reload that writes it as another name of
	 * the same address replaces it (release), the one before freed after a
	 * grace period: workers load it with acquire */
	char *address;
	struct sockaddr_storage addr;
	socklen_t addr_len;
	uint32_t weight; /* configured */
	bool backup; /* takes clients only while no other can (control thread only) */
	_Atomic int admin; /* enum hashlb_admin_state; written by the control plane */
	atomic_bool healthy; /* last verdict of the health checker; starts true */
	atomic_bool listed; /* takes clients in its service's last published table */
	atomic_uint consecutive_fail; /* passive health, see above */
	/* the errno of the last failed connect counted in <consecutive_fail>
	 * (ETIMEDOUT for a timeout), for the log of a passive down */
	atomic_uint connect_err;
	/* CLOCK_MONOTONIC ns when <healthy> last changed; 0: never */
	atomic_uint_fast64_t health_since_ns;
	atomic_uint_fast64_t active; /* established connections open now (shared) */
	/* max_connections: 0 = none; else a cap on <claimed> */
	atomic_uint max_conns;
	/* Clients queued for it (timeouts.queue; it was their first full
	 * choice): while any wait, a newcomer finds it full, so a slot that
	 * frees goes to one that waited. */
	atomic_uint waiting;
	/* The workers whose queue holds a client that found it at its cap (a
	 * bit each, set and cleared by that worker: proxy/conn.c,
	 * queue_want()), for a walk of that queue to look for room there. */
	atomic_uint_fast64_t queue_wanted[HLB_WORKERS_MAX / 64];
	/* Connections connecting or open, each claimed before its connect
	 * (hlb_backend_claim()) so that no two workers overshoot max_conns
	 * between them; counted without a cap too, so that a cap set later
	 * (hashlb ctl set, a reload) counts the connections already open. */
	atomic_uint_fast64_t claimed;
	/* Slow start: new clients admitted per 65536 of those whose first
	 * choice it is (src/control/balance.h); 65536 = all, the default. */
	atomic_uint admit;
	/* Bumped by hlb_backend_close(): each connection keeps the value it
	 * found when it chose this backend, and a worker closes those whose
	 * value is older, with <close_why> as the reason. */
	atomic_uint close_gen;
	_Atomic int close_why; /* enum hlb_close_why of the last close */
	/* Removed by a reload (it drains, or it is an orphan of a service a
	 * reload removed): when its connections are closed, CLOCK_MONOTONIC
	 * in ms, the control plane's deadline, which a stop's drain keeps
	 * (a worker reads it only while it drains); 0 if not removed;
	 * UINT64_MAX, never, for a timeouts.drain of never. */
	_Atomic uint64_t drain_until_ms;
	/* the ends from HLB_END_WORKER_MAX on (hlb_backend_count_end()) */
	_Atomic uint64_t rare_ends[HLB_END_MAX - HLB_END_WORKER_MAX];
	void *control; /* the control plane's own state; the runtime never reads it */
	void (*control_free)(void *control); /* called when the backend is freed, may be NULL */
	struct hlb_backend_wstats *wstats; /* n_workers lines */
};

/* A backend from its configuration, one reference held by the caller. */
int hlb_backend_new(const struct hashlb_backend_cfg *cfg, uint32_t n_workers,
		    struct hlb_backend **ret_backend);
struct hlb_backend *hlb_backend_ref(struct hlb_backend *b);
void hlb_backend_unref(struct hlb_backend *b); /* accepts NULL; any thread */
/*
 * Take one of <b>'s <max> connections (0: no cap) for a connection about to
 * connect: false if they are all taken. Every claim is given back once with
 * hlb_backend_unclaim(), when that connect fails or the connection ends.
 */
static inline bool hlb_backend_claim(struct hlb_backend *b, uint32_t max)
{
	if (atomic_fetch_add_explicit(&b->claimed, 1, memory_order_relaxed) < max || !max)
		return true;
	atomic_fetch_sub_explicit(&b->claimed, 1, memory_order_relaxed);
	return false;
}

static inline void hlb_backend_unclaim(struct hlb_backend *b)
{
	atomic_fetch_sub_explicit(&b->claimed, 1, memory_order_relaxed);
}

/*
 * Whether a connect to a backend (a health check's or a client's) failed for
 * want of our own resources (no fd, no local port, no memory): that says
 * nothing of the backend, and counting it against the backend would take
 * every backend down exactly when the process is busiest.
 */
static inline bool hlb_local_error(int e)
{
	return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM || e == EADDRNOTAVAIL ||
	       e == EAGAIN;
}

/* Whether <a> and <b> are the same IPv4 or IPv6 address and port. */
static inline bool hlb_sockaddr_same(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

		return x->sin6_port == y->sin6_port &&
		       memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0 &&
		       x->sin6_scope_id == y->sin6_scope_id;
	}
	return false;
}

/*
 * Bind <fd> to a service's source address (port 0) before its connect. The
 * port is picked at connect time for the destination (IP_BIND_ADDRESS_NO_PORT),
 * not at bind, so one source address does not run out of ports at ~28,000
 * connections across all backends but per backend. 0 or -errno.
 */
static inline int hlb_bind_source(int fd, const struct sockaddr_storage *src, socklen_t len)
{
	int one = 1;

	(void)setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	return bind(fd, (const struct sockaddr *)src, len) < 0 ? -errno : 0;
}

/*
 * Close every connection to <b> established or connecting now; those that
 * choose it afterwards stay. Any thread; never blocks. The workers close
 * them within a tick (about 100 ms: each sees hlb_close_epoch move), each
 * counted under its backend's ends (the end its <why> gives, see
 * conn_closed_by_control()) and logged with it.
 */
void hlb_backend_close(struct hlb_backend *b, enum hlb_close_why why);
/* Moves with every hlb_backend_close() of the process: a worker that sees
 * it move looks over its connections. */
extern atomic_uint hlb_close_epoch;

/*
 * source: client: mark <fd> (of <family>) transparent, so that it may bind
 * an address of another host (IP_TRANSPARENT, IPV6_TRANSPARENT; needs
 * CAP_NET_ADMIN). 0 or -errno.
 */
static inline int hlb_sock_transparent(int fd, int family)
{
	int one = 1;

	if (family == AF_INET6)
		return setsockopt(fd, SOL_IPV6, IPV6_TRANSPARENT, &one, sizeof(one)) < 0 ? -errno
											 : 0;
	return setsockopt(fd, SOL_IP, IP_TRANSPARENT, &one, sizeof(one)) < 0 ? -errno : 0;
}

/* Whether the backend takes new clients: admin ready and healthy. */
bool hlb_backend_usable(const struct hlb_backend *b);
void hlb_backend_counters_read(const struct hlb_backend *b, struct hlb_backend_counters *ret);
/* Add <c> to <sum>, field by field (the gauge <active> too). */
void hlb_backend_counters_add(struct hlb_backend_counters *sum,
			      const struct hlb_backend_counters *c);

/*
 * A forwarding worker's bounded resources, for /metrics
 * (hlb_proxy_worker_stats()): what an operator needs to see when a cap bites.
 * Gauges are as of the worker's last tick (100 ms).
 */
struct hlb_worker_stats {
	uint64_t connections; /* open now */
	uint64_t buffers; /* receive buffers (--buffers) */
	uint64_t buffers_in_use; /* held by connections */
	uint64_t buffer_waiters; /* directions waiting for a free buffer */
	uint64_t buffer_waits; /* times a direction found every buffer in use */
	uint64_t buffer_wakeups; /* times a waiting direction was woken to try again */
	uint64_t pipes, pipes_max; /* directions spliced now; the cap (--splice-pipes) */
	uint64_t splice_refused; /* a bulk stream kept on buffers: the cap reached, or no pipe */
	uint64_t pipes_small; /* splice pipes the kernel gave less than asked */
	uint64_t accept_errors; /* accepts that failed (the fd limit, memory): listener paused */
	uint64_t fd_limit; /* EMFILE/ENFILE on an accept or a backend socket */
	uint64_t cap_pauses; /* times a listener paused at the connection cap */
	uint64_t spilled, spill_max; /* bytes of stopped readers held out of the pool; the cap */
	uint64_t spills; /* times a direction's data moved out of the pool */
	uint64_t cq_overflows; /* times completions waited in the kernel's CQ overflow list */
	uint64_t cq_dropped; /* completions the kernel lost: no memory for that list */
	uint64_t queue_deadline_looks; /* waiting clients looked at for their deadline alone */
	/* waiting clients sent to a connect by a look at the queue it was woken for (a slot
	 * freed, a change of the control plane's, ...), and by one of its own (the tick) */
	uint64_t queue_served_woken, queue_served_tick;
	uint64_t queue_tries; /* waiting clients tried for a backend by a look at the queue */
	uint64_t resets_taken; /* resets found taken by a send waiting to their socket */
	uint64_t cancels_by_fd; /* a closing connection's requests cancelled by descriptor */
	uint64_t queue_looks; /* looks at the queue (conn_queue_run()) */
	/* of those, the looks it was woken for: a slot freed, a change of the control plane's */
	uint64_t queue_looks_woken;
	uint64_t queue_fp_reads; /* backends read by those looks' fingerprints */
	uint64_t log_wakeups; /* wake-ups by stderr's poll for room for connection log lines */
	uint64_t turns; /* turns of the worker's loop: one per wait for completions */
	uint64_t queue_steps; /* waiting clients read following the queue's links */
	uint64_t idle_scans; /* walks of every connection: idle, drain, closes by the control */
};

/* Worker-side counter update: single writer per line, no atomic RMW. */
static inline void hlb_stat_add(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/* Count an established connection of <b> that ended as <end>, by worker <worker>. */
static inline void hlb_backend_count_end(struct hlb_backend *b, uint32_t worker, enum hlb_end end)
{
	if (end < HLB_END_WORKER_MAX)
		hlb_stat_add(&b->wstats[worker].ends[end], 1);
	else /* rare, and once per connection (as the <active> it leaves) */
		atomic_fetch_add_explicit(&b->rare_ends[end - HLB_END_WORKER_MAX], 1,
					  memory_order_relaxed);
}

/* ---- snapshots ----------------------------------------------------------- */

struct hlb_snapshot {
	uint64_t generation; /* increases with every publication in the process */
	uint64_t fingerprint; /* hashlb_table_fingerprint(table) */
	struct hashlb_table *table; /* owned */
	enum hashlb_key key;
	struct hashlb_src_prefix hash_prefix; /* what of the client address key hashes */
	uint64_t seed;
	uint32_t n_backends; /* == hashlb_table_backend_count(table) */
	struct hlb_backend **backends; /* table index -> backend, one reference each */
	/* the service's settings, from its config */
	uint32_t connect_timeout_ms;
	uint32_t idle_timeout_ms; /* 0 = none */
	uint32_t drain_timeout_ms;
	uint32_t queue_timeout_ms; /* 0 = no queue: closed when every backend is full */
	bool abort_on_close; /* a client's FIN takes it out of the queue */
	uint32_t max_connections; /* 0 = unlimited */
	uint32_t max_per_client; /* max_connections_per_client, 0 = none */
	struct hashlb_src_prefix client_prefix; /* what of its address names a client there */
	uint32_t max_conn_rate; /* max_connection_rate: accepts per second, 0 = none */
	uint32_t connect_retries;
	double balance_factor; /* 0 = off */
	uint64_t up_weight; /* sum of the up backends' weights, for bounded load */
	enum hashlb_proxy_protocol proxy_protocol; /* header sent to backends; 0 = none */
	bool accept_proxy; /* a PROXY header comes first from each client */
	struct hashlb_keepalive_cfg keepalive; /* TCP keepalive on both sockets */
	struct sockaddr_storage source; /* local address of backend connections */
	socklen_t source_len; /* 0 = the kernel's choice */
	bool source_client; /* source: client: from the client's address (IP_TRANSPARENT) */
	struct hashlb_prefix_set *proxy_from; /* owned: who may send it; NULL = anyone */
	struct hashlb_prefix_set *allow_clients; /* owned: NULL = every client */
	struct hashlb_prefix_set *deny_clients; /* owned: NULL = none */
	bool log_connections; /* one log line per connection when it ends */
	/* its tables count in hlb_snapshot_tables_bytes() (snapshot_finish() on): those freed
	 * leave it */
	bool tables_counted;
	/*
	 * Maglev: the table with the backends that fail connects (or checks) but
	 * are not yet down marked down too (hlb_snapshot_add_retry()): a client
	 * retried away from one of them goes where it will stay once they are
	 * down, and their verdict's table is a copy of it (hlb_snapshot_refresh()).
	 * Such a backend is down in it and up in <table>. NULL if none (then a
	 * retry takes the preference list's next).
	 */
	struct hashlb_table *retry_table; /* owned */
	/*
	 * Maglev, while a backend is in slow start: the table with the
	 * ramping backends down too (hlb_snapshot_add_ramp()), where a client
	 * whose own backend does not admit it yet goes: where it was while
	 * that backend was out. NULL if none ramps.
	 */
	struct hashlb_table *ramp_table; /* owned */
	/*
	 * Maglev, while a backend fails and one is in slow start: the table
	 * with both down too (hlb_snapshot_add_retry_ramp()), where a client
	 * that <retry_table> sends to a ramping backend not admitting it yet
	 * goes: where it stays while the ramp lasts. NULL if not both.
	 */
	struct hashlb_table *retry_ramp_table; /* owned */
	/* hashlb_table_bytes() of the tables above, summed, less the arrays the side tables
	 * share with <table> (hashlb_table_bytes_shared()): the service's table_bytes */
	uint64_t tables_bytes;
};

/*
 * The bytes of every table the snapshots alive hold, process-wide: those
 * published (with their retry and ramp tables), those replaced and not yet
 * freed (until the workers have left them, hlb_service_publish()), and those a
 * removed service's connections still hold; a table counts from when its
 * snapshot is complete (or it joins one) to the snapshot's free. Each array
 * tables share (slots, ring points, owner blocks) counts once however many of
 * those tables hold it (a replaced table and the one that replaced it, which
 * shares its full slots, add up to what both hold, not their sum), and not at
 * all while only tables outside any snapshot do: a config's, one being built
 * (hashlb_table_account()). Any thread.
 */
uint64_t hlb_snapshot_tables_bytes(void);

/*
 * What matching a config's services, backends and listen addresses with
 * those running read, process-wide, at start and at each reload: the
 * names compared to find a running service or backend, the listeners read
 * to find a service's. A few per service and backend; a scan of them all
 * for each made a reload quadratic in services (d8a1219). Counted by the
 * control thread (hlb_match_reads_add()), read by any.
 */
uint64_t hlb_match_reads(void);
void hlb_match_reads_add(uint64_t n);

/*
 * Give <s> (not yet published) its retry table: the table with the backends
 * <failing> says (s->n_backends booleans, table order) down as well, i.e.
 * where their clients go once they are down. Only for Maglev, whose
 * preference list does not say that (on a ring the next distinct owner
 * clockwise is where they go), and only if one of them is in the table.
 * Nothing is changed if it cannot be built (a retry then takes the
 * preference list's next backend, as without it). <prev> (NULL accepted;
 * only read, alive for the call) is the snapshot <s> replaces: where its
 * retry table is of the same backends down over the same full table (each
 * snapshot while a backend fails connects before its verdict), the new one
 * shares its slots (hashlb_table_with_down_from()), not populated again
 * (about 0.5 s at the largest M, each snapshot).
 */
void hlb_snapshot_add_retry(struct hlb_snapshot *s, const bool *failing,
			    const struct hlb_snapshot *prev);

/*
 * Give <s> (not yet published), which has a retry table, the table with the
 * backends <failing_or_ramping> says down as well: those failing and those
 * in slow start, for a retry that the retry table sends to a ramping
 * backend not admitting the client yet. Only for Maglev; nothing is changed
 * if it cannot be built (the retry then goes to the ramping backend).
 * <prev>: as hlb_snapshot_add_retry()'s, for its retry-ramp table.
 */
void hlb_snapshot_add_retry_ramp(struct hlb_snapshot *s, const bool *failing_or_ramping,
				 const struct hlb_snapshot *prev);

/*
 * Give <s> (not yet published) its ramp table: the table with the backends
 * <ramping> says (in slow start) down as well. Only for Maglev: a client
 * its own backend does not admit yet takes the next backend of its
 * preference list, which on a ring is where it was while that backend was
 * out, and on Maglev mostly another (it would move twice: there, then back).
 * Nothing is changed if none of them is in the table or it cannot be built.
 * <prev> (NULL accepted; only read, alive for the call) is the snapshot <s>
 * replaces: where the new ramp table's slots are its ramp table's (the same
 * backends down, the table kept: each snapshot while a backend ramps), the
 * owner blocks over them (weights more than 16 times apart) are shared, not
 * built again (a pass over M slots).
 */
void hlb_snapshot_add_ramp(struct hlb_snapshot *s, const bool *ramping,
			   const struct hlb_snapshot *prev);

/*
 * A snapshot for service config <cfg> over <backends> (cfg->n_backends of
 * them, in config order; a reference is taken on each). The table is built
 * over all of them, with those that are not hlb_backend_usable() down;
 * faster from <prev> (may be NULL: a first build) when its table has cfg's
 * table parameters (hashlb_table_rebuild(): a ring keeps the points of every
 * backend whose name and weight are unchanged): the rebuild for a change of
 * weights or membership. <prev> is only read.
 */
int hlb_snapshot_rebuild(const struct hlb_snapshot *prev, const struct hashlb_service_cfg *cfg,
			 struct hlb_backend *const *backends, uint64_t generation,
			 struct hlb_snapshot **ret_snap, struct hashlb_error *err);

/*
 * A snapshot like <cur> (same backends, full table) with the down set
 * recomputed from the backends' current admin and health state: the
 * rebuild for a health or admin change. Costs one survivor build, or a
 * copy when a table of <cur> has one for the same backends down (its
 * retry table's, or the one kept from the outage of the backends that go
 * down again: hashlb_table_with_down()). Its
 * settings come from <cfg>, the config <cur> was built from (or one with
 * the same settings).
 */
int hlb_snapshot_refresh(const struct hlb_snapshot *cur, const struct hashlb_service_cfg *cfg,
			 uint64_t generation, struct hlb_snapshot **ret_snap,
			 struct hashlb_error *err);

/*
 * hlb_snapshot_refresh(), the table made from <cur>'s retry table if it has one (Maglev): it
 * keeps the outage that table has, its survivors' table, as a table back up after an outage
 * does, so that those backends going down next copy it rather than populate it again. For a
 * retry table dropped once the backends down in it recover (a run of failed checks ended).
 */
int hlb_snapshot_refresh_from_retry(const struct hlb_snapshot *cur,
				    const struct hashlb_service_cfg *cfg, uint64_t generation,
				    struct hlb_snapshot **ret_snap, struct hashlb_error *err);

void hlb_snapshot_free(struct hlb_snapshot *s); /* accepts NULL */

/* ---- services ------------------------------------------------------------ */

struct hlb_service_wstats {
	_Atomic uint64_t lookups; /* connections accepted and hashed */
	_Atomic uint64_t total; /* connections forwarded (connected to a backend) */
	_Atomic uint64_t rejected; /* closed at once: over max_connections */
	_Atomic uint64_t no_backend; /* closed: every backend down or every connect failed */
	_Atomic uint64_t bad_header; /* accept_proxy: closed, no valid PROXY header in time */
	_Atomic uint64_t untrusted; /* accept_proxy_from: closed, from a source not listed */
	_Atomic uint64_t denied; /* allow_clients/deny_clients: closed, a client not served */
	_Atomic uint64_t client_limited; /* closed: the client at max_connections_per_client */
	_Atomic uint64_t queued; /* waited for a backend under its max_connections */
	_Atomic uint64_t queue_timeouts; /* closed: no backend had room within timeouts.queue */
	_Atomic uint64_t queue_aborts; /* closed: the client left while waiting in the queue */
	_Atomic uint64_t rate_pauses; /* max_connection_rate: accepting paused */
	/* Not a counter: its worker's own mark while its queue holds clients
	 * of the service (proxy/conn.c, queue_svc_note()); 0 never is. */
	uint64_t queue_mark;
	/* Not a counter: the service's queue_changes its worker's last walk of
	 * the whole queue read (proxy/conn.c, queue_changes_seen()). */
	uint64_t queue_seen;
	/* Not a counter: the clients of the service waiting in its worker's
	 * queue now (proxy/conn.c); while any, its bit of queue_workers is set. */
	uint32_t queue_n;
	/* Connections a stop's drain closed at their deadline, as hlb_proxy_drain_ends()
	 * counts them (with those of drain_signalled): the service's line of them at exit */
	_Atomic uint32_t drain_cut;
	/* Not a counter: the service's part of its worker's last fingerprint of
	 * the queue (proxy/conn.c, queue_fingerprint()), but for bit 0: whether
	 * the service is fresh there, its part not in the worker's queue_fp
	 * (QUEUE_FP_FRESH, conn_queue_run()). */
	uint64_t queue_fp;
	/* Connections a second signal closed before their deadline: a line of their own at
	 * exit, which does not call it a timeout. A third cache line, touched only then. */
	_Atomic uint32_t drain_signalled;
	/* Not counters: when its worker last logged a source not in accept_proxy_from
	 * (now_ms; 0 never), and the refusals it did not log since (proxy/conn.c,
	 * log_untrusted()). On the third line too: touched only by such a refusal. */
	uint32_t untrusted_unlogged;
	uint64_t untrusted_log_ms;
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct hlb_service_wstats) == 192, "a service's worker counters");

struct hlb_service_counters {
	uint64_t active;
	uint64_t lookups;
	uint64_t total;
	uint64_t rejected;
	uint64_t no_backend;
	uint64_t bad_header;
	uint64_t untrusted;
	uint64_t denied;
	uint64_t client_limited;
	uint64_t queued; /* waiting now */
	uint64_t queued_total;
	uint64_t queue_timeouts;
	uint64_t queue_aborts;
	uint64_t rate_pauses;
	uint64_t drain_cut; /* closed by a stop's drain at their deadline */
	uint64_t drain_signalled; /* closed by a second signal before it */
};

/*
 * One service as the workers see it. Refcounted: the daemon's service list,
 * each listener serving it and each of its connections hold a reference, so
 * a service removed by a reload lives until its last connection closes.
 * A reload keeps the object of a service whose name is unchanged.
 */
struct hlb_clients; /* clients.h */

struct hlb_service {
	atomic_uint refs;
	uint32_t n_workers;
	char *name;
	_Atomic(struct hlb_snapshot *) snap; /* current; never NULL once published */
	atomic_uint_fast64_t active; /* connections open now (max_connections) */
	atomic_uint queued; /* of those, waiting in a worker's queue (timeouts.queue) */
	/* Removed by a reload (set by the control plane): its connections
	 * drain, and no new one is made to its backends, which drain too. */
	atomic_bool removed;
	/* max_connections_per_client: open connections per client (its
	 * address cut to client_prefix), made by the control plane before the first snapshot that
	 * sets the limit is published, then kept for the service's life */
	_Atomic(struct hlb_clients *) clients;
	/* max_connection_rate: the theoretical arrival time of the next
	 * connection (CLOCK_MONOTONIC ns), shared by the workers, and the step
	 * (ns per connection) it was counted in: when a reload changes the
	 * rate, what is owed is rescaled to the new one. One lock for both:
	 * apart, a worker still on the old rate could scale the time back up
	 * between another's change of the step and its rescale, and every
	 * worker on the new rate would then pause for what the old one owed. */
	pthread_mutex_t rate_lock;
	uint64_t rate_tat;
	uint64_t rate_step;
	/* The config it was built from: set and read by the control plane only
	 * (workers read the settings copied into the snapshot). */
	struct hashlb_service_cfg *cfg;
	/* Its listener's address as bound (port 0 resolved, "[v6]:port" form),
	 * "" if not listening: written by the daemon, read by the admin API, both
	 * on the control thread. */
	char bound[64];
	/* <bound> as an address, and the one before the last transaction of listeners: where its
	 * clients connected before it, a port-0 listener's port as got (lengths 0 if none) */
	struct sockaddr_storage bound_addr, bound_was;
	socklen_t bound_addr_len, bound_was_len;
	/* Whether the last transaction of listeners left it on another listener than the one
	 * it had (a new one, or another service's: listener_matches() in daemon.c said none of
	 * the listeners was its own), as <bound>: what a reload's "changed=listen" says. */
	bool listener_moved;
	/* Changes of what a client waiting for one of its backends is routed by
	 * (hlb_service_queue_changed()); far from the fields each connection
	 * writes. */
	atomic_uint_fast64_t queue_changes;
	/* The workers whose queue holds a client of it (a bit each, set and
	 * cleared by that worker as its wstats line's queue_n leaves and comes
	 * back to 0: proxy/worker.c, worker_queue_joined()): those its kicks
	 * wake. */
	atomic_uint_fast64_t queue_workers[HLB_WORKERS_MAX / 64];
	void *control; /* the control plane's own state */
	void (*control_free)(void *control);
	struct hlb_service_wstats *wstats; /* n_workers lines */
};

/*
 * Something a waiting client of <svc> is routed by, other than a slot,
 * changed (a snapshot published, a backend's max_connections, slow start
 * admission or serving again, the service removed): counted, any thread,
 * after the change is stored and before the workers are woken for it
 * (hlb_proxy_kick_queues(), worker_kick_queues()). A worker whose queue
 * holds no client of <svc> sees no change of its own in it, and its safety
 * net's walk is not armed (conn_queue_run()). Release: a worker that reads
 * the count (acquire) reads the change too (queue_recheck() in proxy/conn.c).
 */
static inline void hlb_service_queue_changed(struct hlb_service *svc)
{
	atomic_fetch_add_explicit(&svc->queue_changes, 1, memory_order_release);
}

/*
 * max_connection_rate: count one more connection accepted at <now_ns>
 * (CLOCK_MONOTONIC) against <rate> per second, with a burst of one second's
 * worth (GCRA: the theoretical arrival time, under the service's rate lock).
 * Returns 0 if it
 * was within the rate, else how many ns accepting should pause for the
 * rate to allow the next one. A connection over the rate is still counted,
 * so a burst overshot by the connections already accepted is paid back
 * by a longer pause: over time the rate holds exactly. A new <rate> (a
 * reload) applies at once: the connections taken over the old rate are
 * paid back at the new one.
 */
uint64_t hlb_service_rate_take(struct hlb_service *svc, uint32_t rate, uint64_t now_ns);

int hlb_service_new(const char *name, uint32_t n_workers, struct hlb_service **ret_service);
struct hlb_service *hlb_service_ref(struct hlb_service *s);
void hlb_service_unref(struct hlb_service *s); /* accepts NULL; any thread */
void hlb_service_counters_read(const struct hlb_service *s, struct hlb_service_counters *ret);

/* The current snapshot. Workers: only while online. Control thread: any time. */
static inline struct hlb_snapshot *hlb_service_snapshot(struct hlb_service *s)
{
	return atomic_load_explicit(&s->snap, memory_order_acquire);
}

/*
 * Publish <next> (ownership taken) as <svc>'s snapshot; the previous one is
 * freed through <rcu> once every worker has passed a quiescent point, or at
 * once if <rcu> is NULL (no worker reads it: tests).
 * Control thread only (one publisher per service). Returns -ENOMEM if the
 * old snapshot could not be queued for freeing (then it is leaked, not
 * freed early: correctness first).
 */
int hlb_service_publish(struct hlb_service *svc, struct hlb_snapshot *next, struct hlb_rcu *rcu);

#endif
