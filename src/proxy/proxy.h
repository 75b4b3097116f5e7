/* SPDX-License-Identifier: MIT */
/*
 * The io_uring data plane as the daemon drives it: a set of worker threads
 * and the listeners they accept on. Control thread only, except where said.
 *
 * A listener is one listen address, shared by all workers: each worker has
 * its own SO_REUSEPORT socket on it, so the kernel spreads connections over
 * the workers. A listener outlives config generations: a reload that keeps
 * an address keeps its sockets (no connection refused during a reload) and
 * only swaps the service it routes to.
 */
#ifndef HASHLB_PROXY_H
#define HASHLB_PROXY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>

#include "hashlb/error.h"
#include "runtime.h"

struct hlb_proxy;
struct hlb_listener;

/* Per-worker tunables; 0 = default. */
struct hlb_proxy_opts {
	uint32_t n_workers;
	uint32_t buf_size; /* bytes per provided buffer, default 64 KiB */
	uint32_t buf_count; /* provided buffers per worker (power of two), default 256 */
	uint32_t ring_entries; /* SQ entries per ring, default 2048 */
	bool pin_cpus; /* pin worker i to the i-th allowed CPU */
	/*
	 * Splice: a direction that has forwarded <splice_after> bytes in large
	 * reads moves to splice (socket -> pipe -> socket, no copy through
	 * user space); 0 = default (256 KiB), UINT32_MAX = never. At most
	 * <splice_pipes> directions over all workers at once (a pipe is two
	 * fds); 0 = default (HLB_SPLICE_PIPES_DEFAULT).
	 */
	uint32_t splice_after;
	uint32_t splice_pipes;
#define HLB_SPLICE_PIPES_DEFAULT 1024
	uint32_t pipe_size; /* F_SETPIPE_SZ of each pipe; 0 = the kernel's (64 KiB) */
	/* Busy polling: after a turn that found work, look for the next
	 * completion this many microseconds before sleeping; 0 = never. */
	uint32_t busy_poll_us;
};

int hlb_proxy_new(const struct hlb_proxy_opts *opts, struct hlb_rcu *rcu,
		  struct hlb_proxy **ret_proxy, struct hashlb_error *err);
/* Start the worker threads; each sets up its ring and buffers first. */
int hlb_proxy_start(struct hlb_proxy *p, struct hashlb_error *err);
/* An eventfd that becomes readable when a worker exits (after hlb_proxy_drain(), or failed). */
int hlb_proxy_exit_fd(const struct hlb_proxy *p);
/*
 * An eventfd that becomes readable when a worker saw a backend of a Maglev
 * service start failing connects (its consecutive_fail went 0 -> 1): the
 * control plane builds the service's retry table at once rather than at its
 * next tick (hlb_snapshot_add_retry()). Then call hlb_proxy_failing_take()
 * before reading the backends' consecutive_fail: a burst of failures is one
 * wake-up, and one after the call is another.
 */
int hlb_proxy_failing_fd(const struct hlb_proxy *p);
void hlb_proxy_failing_take(struct hlb_proxy *p);
/*
 * How many workers have failed: io_uring_enter() failed (EBADR: the kernel
 * lost a completion), and the worker reset its connections, closed its
 * listener sockets and exited (exit fd written), without hlb_proxy_drain().
 */
uint32_t hlb_proxy_failed(const struct hlb_proxy *p);
/*
 * Close the listener sockets of the workers that have failed (they only shut
 * them down, as this thread may be reading their numbers to hand them over),
 * and those of the reloads they left unread: their ports are free again, not
 * held until the process exits. Control thread, once hlb_proxy_failed() has
 * counted them.
 */
void hlb_proxy_close_failed(struct hlb_proxy *p);
/* Whether every worker has exited. */
bool hlb_proxy_done(struct hlb_proxy *p);
/*
 * Stop accepting everywhere; each connection drains until its own deadline, its service's
 * timeouts.drain from the first call (or the one a reload gave its removed backend:
 * hlb_backend.drain_until_ms), then is closed; none past <drain_ms> (HASHLB_DRAIN_NEVER: no
 * bound, a timeouts.drain of never waits for them to end). A later call may only bring that
 * bound closer (0: close them all now). With <serve_backlog> (the first call's counts), the
 * clients waiting in the listening sockets' backlogs are accepted and served before the
 * sockets close, rather than reset by the close: for a stop of the process that holds them
 * alone (not one whose sockets another hashlb took, which serves that backlog; the service
 * manager's are kept open there with theirs whatever this says).
 */
void hlb_proxy_drain(struct hlb_proxy *p, uint32_t drain_ms, bool serve_backlog);
/*
 * Once hlb_proxy_done(): the connections that ended while the workers drained,
 * by themselves (<ret_finished>: any end but the deadline's) and closed at its
 * deadline or by a drain of 0 ms (<ret_timed_out>: end=drain_timeout).
 */
void hlb_proxy_drain_ends(const struct hlb_proxy *p, uint64_t *ret_finished,
			  uint64_t *ret_timed_out);
/* Join the threads (after they exited, or a drain) and free. Accepts NULL. A client handed
 * over (hlb_proxy_adopt()) that no worker read is reset: the process stops, and a worker that
 * drained read its queue before it exited, so only a worker that never ran or failed with no
 * other running leaves one. */
void hlb_proxy_free(struct hlb_proxy *p);
/* Connections open now, over all workers (relaxed reads). */
uint64_t hlb_proxy_connections(const struct hlb_proxy *p);
/* Connections open now, and the clients hlb_proxy_adopt() gave a worker that has not read
 * them yet: each once (one read meanwhile may count one twice, never none). */
uint64_t hlb_proxy_connections_adopting(const struct hlb_proxy *p);
/*
 * At most <n> client connections over all workers (0: no cap), before
 * hlb_proxy_start(): at the cap the listeners pause and new clients wait in
 * their backlogs, as with HAProxy's maxconn. Unless the room left holds a
 * backlog for every listener of every worker, accepts go one at a time, so
 * that it is passed by at most one connection per listener of each worker
 * (a multishot accept takes a whole backlog).
 *
 * With <fds>, <n> is what the fd limit allows for connections alone: each
 * listener socket of each worker, added by a reload too, takes its
 * descriptor and the one connection it may accept over the cap off it (1.5
 * connections), and each splice pipe counts as a connection (two
 * descriptors) while it is held; a direction gets no pipe at the cap.
 */
void hlb_proxy_set_max_connections(struct hlb_proxy *p, uint64_t n, bool fds);
/*
 * With a cap from the fd limit, descriptors the process may hold besides
 * the forwarder's come off it too, two for a connection: <*fds>, kept up to
 * date by their owner (the most sockets health checks may hold at once),
 * read with a relaxed load where the cap is. Before hlb_proxy_start(); the
 * counter outlives the proxy. NULL: none. The sockets the service manager passed, the
 * copies kept of them, and those taken over from the old process not yet a listener's come
 * off it as well, counted by the proxy itself (inh_counted()).
 */
void hlb_proxy_count_fds(struct hlb_proxy *p, const _Atomic uint32_t *fds);
/* The cap in force now (0: none). */
uint64_t hlb_proxy_max_connections(const struct hlb_proxy *p);
/* The cap once the workers hold a socket each of <n_listeners> listeners (0: none). */
uint64_t hlb_proxy_max_connections_with(const struct hlb_proxy *p, uint32_t n_listeners);
/*
 * Something the retry of a waiting client of <svc> reads, other than a slot,
 * changed (a snapshot published, a backend's max_connections or slow start
 * admission, <svc> removed): wake the workers whose queue holds a client of
 * <svc> (its queue_workers), which retry it as for a slot that freed; the
 * others are not woken. Control thread, after the change is stored and
 * counted (hlb_service_queue_changed()).
 */
void hlb_proxy_kick_queues(struct hlb_proxy *p, struct hlb_service *svc);
/*
 * A client waiting in a queue, lent to the process of an upgrade in place (hlb_proxy_lend_queue()):
 * <fd> a duplicate of its socket (the caller's to close), the service it waits for, what is left
 * of its timeouts.queue, and for an accept_proxy client whose header was read, the addresses the
 * header named (<addrs>: [0] the client, [1] where it connected). <worker>, <gen> (the lending)
 * and <idx> (its place among that worker's clients in it) name the connection for
 * hlb_proxy_lent_end(); <read> and <written>, the bytes its socket had given to and taken from
 * a reader and writer as it was lent (lent_mark()), tell whether the new process used it.
 */
struct hlb_lent {
	int fd;
	uint32_t worker;
	uint32_t gen, idx;
	uint64_t read, written;
	uint32_t left_ms;
	uint32_t waited_ms; /* how long it waited there so far (the log's queue_ms) */
	bool addrs;
	bool refused; /* hlb_proxy_lent_end(): not taken, it is served here */
	struct sockaddr_storage addr[2];
	char svc[65]; /* HLB_SERVICE_NAME_SIZE */
};
/*
 * Ask every worker to lend the clients waiting in its queue: each takes them off its queue
 * (they stay its connections, served by no one, until hlb_proxy_lent_end()). Once each has
 * answered, hlb_proxy_lent_fd() is readable. Control thread; false if a lending is under way.
 */
bool hlb_proxy_lend_queue(struct hlb_proxy *p);
int hlb_proxy_lent_fd(const struct hlb_proxy *p);
/*
 * Once every worker answered: the clients lent, *<ret> (the caller's to free), the one with the
 * least time left first (the longest waiting), and how many were left in the queues, never
 * lent, *<ret_not_lent> (past their deadline, or short of memory or descriptors); -EAGAIN
 * before. Clears the eventfd.
 */
ssize_t hlb_proxy_lent_take(struct hlb_proxy *p, struct hlb_lent **ret, size_t *ret_not_lent);
/* Those of <lent> (<n>) not <refused> are the new process's: closed here without a word to the
 * client; the others go back to their queues, in their order, but for one whose stream the new
 * process read or wrote (it exited serving it): that one is reset, as serving it here would
 * lose or repeat bytes. Only clients of that lending are touched. Closes every <fd>. How many
 * are reset. */
size_t hlb_proxy_lent_end(struct hlb_proxy *p, struct hlb_lent *lent, size_t n);
/*
 * Serve <fd>, a client another hashlb kept waiting in a queue of <svc> (its socket; ours to
 * close from now), as if just accepted, its wait bounded by <left_ms> more; <addr>, if not
 * NULL, the addresses its PROXY header named (it was read). Its slot of the service's
 * max_connections is taken at once, so that the next client's call sees it. The workers take
 * them in turn, a worker that failed or exited passed (its turn spent: the next one does not
 * take two shares). False, <fd> left to the caller, if none is left, without the memory, or if
 * no worker runs (the process stops: the old one keeps the client). Control thread.
 */
bool hlb_proxy_adopt(struct hlb_proxy *p, struct hlb_service *svc, int fd, uint32_t left_ms,
		     uint32_t waited_ms, const struct sockaddr_storage *addr);

/* Worker <i>'s resources (struct hlb_worker_stats); false past the last worker. */
bool hlb_proxy_worker_stats(const struct hlb_proxy *p, uint32_t i, struct hlb_worker_stats *ret);

/*
 * Open one listening socket per worker on <addr> (SO_REUSEPORT, backlog
 * 4096), routing to <svc> (a reference is taken). -errno with <err> filled
 * if the address cannot be bound. <foreign>: another process listens there
 * (hlb_listener_probe()), in the SO_REUSEPORT group the sockets join: the
 * group's program is left as it is, not replaced by hlb_proxy_migrates()'s
 * (the kernel keeps one a group, the last attached): another program's
 * choice of socket stays its own, and no client of its sockets moves to
 * ours as one closes. A hashlb that attached its own (the one an upgrade
 * side by side replaces) left it there.
 */
int hlb_listener_open(struct hlb_proxy *p, const struct sockaddr *addr, socklen_t addr_len,
		      const char *name, struct hlb_service *svc, bool foreign,
		      struct hlb_listener **ret_listener, struct hashlb_error *err);
/*
 * Whether the clients queued on a listening socket of <p> as it closes move to another socket
 * of its SO_REUSEPORT group rather than being reset, whatever net.ipv4.tcp_migrate_req says
 * (a reuseport program attached to each: CAP_BPF, Linux 5.14), the groups
 * another process listened in when they were opened excepted
 * (hlb_listener_open()).
 */
bool hlb_proxy_migrates(struct hlb_proxy *p);
/*
 * Whether another process listens where a bind of <addr> collides already
 * (<addr>, or a wildcard of its port covering it, or any address of the port
 * for a wildcard <addr>; an IPv4 address written either way, a.b.c.d or
 * [::ffff:a.b.c.d]): 0 if not (or if all the sockets listening there are this
 * process's: one passed or taken over and not used yet, a removed listener's
 * that a worker still closes, <addr> a wildcard or not), else -errno of a bind
 * there without SO_REUSEPORT (-EADDRINUSE). A listener's own bind, with
 * SO_REUSEPORT, succeeds beside any socket of the same user that sets it
 * (another hashlb's), and the kernel then splits the clients between the two
 * processes: what a reload must refuse.
 */
int hlb_listener_probe(struct hlb_proxy *p, const struct sockaddr *addr, socklen_t addr_len);
/*
 * <err> filled for a listener of service <name> of <p> that could not be bound to <addr>
 * (-errno <ret>; hashlb_listen_err()), <ret> returned. -EADDRINUSE where no other process
 * listens is said as what it is: a socket <p> holds from the service manager, which has no
 * SO_REUSEPORT, refuses it; else hlb_bind_err() says it.
 */
int hlb_listener_err(struct hlb_proxy *p, int ret, const struct sockaddr *addr, const char *name,
		     struct hashlb_error *err);
/*
 * Socket activation: take the listening sockets the service manager passed
 * (LISTEN_PID is this process, LISTEN_FDS of them from fd 3; the variables
 * are then unset). hlb_listener_open() on one of their addresses shares that
 * socket between the workers instead of binding its own, so connections
 * wait in its backlog while hashlb restarts. Returns how many, 0 if none
 * were passed, or -errno with <err> filled (a socket that is not a listening
 * TCP socket).
 */
int hlb_proxy_adopt_listeners(struct hlb_proxy *p, struct hashlb_error *err);
uint32_t hlb_proxy_inherited_count(const struct hlb_proxy *p);
/* Inherited socket <i> (< the count adopted): its address in <buf>, whether a listener uses it. */
bool hlb_proxy_inherited(const struct hlb_proxy *p, uint32_t i, char *buf, size_t size);
/*
 * Upgrades: take over the listening sockets of the hashlb running on the
 * same config, from its admin endpoint at <admin> (GET /sockets: on a Unix
 * socket they come with SCM_RIGHTS; over TCP each line names the process
 * and descriptor, copied with pidfd_getfd(2)). Called before
 * any listener opens: hlb_listener_open() on their address then uses them,
 * one per worker, binding more if this process has more workers, keeping
 * the rest if it has fewer (its workers accept on them in turn). The same
 * sockets go on listening in this process when the old one stops, so not
 * even a connection in their accept queues is lost, whatever
 * net.ipv4.tcp_migrate_req says. An old process slow to answer (its
 * control thread busy) is waited for, and the wait logged every 2 s, until
 * it has been silent for 10 s (stopped or stuck: -ETIMEDOUT); each part of
 * its answer starts that anew. Returns how many were taken (0 when no
 * hashlb answers there, or it cannot hand over: <why> then says so when
 * something answered), or -errno.
 */
int hlb_proxy_take_over(struct hlb_proxy *p, const struct sockaddr *admin, socklen_t len, char *why,
			size_t why_size);
/* The same from the Unix socket <fd> on which the old process writes that answer unasked (an
 * upgrade in place: it started this one with <fd>), with the same wait. <fd> stays the caller's. */
int hlb_proxy_take_over_fd(struct hlb_proxy *p, int fd, char *why, size_t why_size);
/* The process that handed the sockets over (SO_PEERCRED, or its answer), 0 if none were taken. */
pid_t hlb_proxy_taken_from(const struct hlb_proxy *p);
/*
 * Whether <match> says yes to one of the sockets taken over: its address and the service
 * it listened for there ("" unknown).
 */
bool hlb_proxy_taken_any(const struct hlb_proxy *p,
			 bool (*match)(void *arg, const struct sockaddr_storage *addr,
				       const char *svc),
			 void *arg);
/* Give the sockets taken over back (closed here, the old process keeps its own), as if none
 * had been: the old process counts this one as its taker only while it runs. */
void hlb_proxy_take_drop(struct hlb_proxy *p);
/* The lines "set SERVICE BACKEND ..." of its answer (HLB_HANDOVER_LINE): what was set there at
 * run time, for this process to carry on. NULL if none (or no sockets were taken). */
const char *hlb_proxy_handover(const struct hlb_proxy *p);
/* An upgrade in place: the socket on which the old process sends its health again once this
 * one is ready (HLB_FDPASS_RESYNC), now the caller's; -1 if none came (an older hashlb). */
int hlb_proxy_take_resync_fd(struct hlb_proxy *p);
/* Its pidfd, opened when the sockets were taken, now the caller's; -1 if none (or taken before). */
int hlb_proxy_take_pidfd(struct hlb_proxy *p);
/* Whether that process still runs (as far as hlb_proxy_old_gone() was told). */
bool hlb_proxy_old_running(const struct hlb_proxy *p);
/* That process has exited: the workers look at the sockets' queues a last time. */
void hlb_proxy_old_gone(struct hlb_proxy *p);
/* Close the sockets taken over that no listener uses (a service the old one had and this one
 * lacks, or a reload of the old one moved the address while this one started); returns how
 * many. The old one may have closed its copy already: for each whose
 * service <find>(<arg>, NAME) returns (NULL: none), the workers first serve the clients queued
 * there, as a reload that moves an address does; how many such in <ret_served>. */
uint32_t hlb_proxy_release_taken(struct hlb_proxy *p,
				 struct hlb_service *(*find)(void *arg, const char *name),
				 void *arg, uint32_t *ret_served);
/* The listening sockets of <l>, for a hashlb that takes over; those from the service manager
 * only if <inherited> (it passes them to a process it starts itself), one of a single descriptor
 * twice (the taker tells the manager's socket by two descriptors of it). */
uint32_t hlb_listener_fds(const struct hlb_listener *l, bool inherited, int *fds, uint32_t max);
/* The service manager's sockets this process holds that none of the listening sockets <used>
 * [0, <n_used>) is (passed and never used, or kept after a reload removed its address), each
 * twice, for an upgrade in place: in <fds>, with its line's "ADDRESS SERVICE" in <names>
 * (HLB_FDPASS_INHERITED for the service), up to <max>; how many. */
uint32_t hlb_proxy_inherited_unused(struct hlb_proxy *p, const int *used, uint32_t n_used, int *fds,
				    const char **names, uint32_t max);
/* How many of its sockets <l> took over. */
uint32_t hlb_listener_taken(const struct hlb_listener *l);
/* Make the workers accept on it. */
void hlb_listener_start(struct hlb_proxy *p, struct hlb_listener *l);
/* Route new connections to <svc> (reference taken); the old service is released through RCU. */
int hlb_listener_set_service(struct hlb_listener *l, struct hlb_service *svc, struct hlb_rcu *rcu);
/* Stop accepting and close its sockets (workers do it); drops the caller's reference. */
void hlb_listener_close(struct hlb_proxy *p, struct hlb_listener *l);
/* Drop a reference (the daemon's, once the workers have exited). Accepts NULL. */
void hlb_listener_unref(struct hlb_listener *l);
/* The address bound (with the port chosen when the config said port 0). */
const struct sockaddr *hlb_listener_addr(const struct hlb_listener *l, socklen_t *ret_len);
/* The address as configured (port 0 when any port was asked for). */
const struct sockaddr *hlb_listener_configured(const struct hlb_listener *l);
const char *hlb_listener_name(const struct hlb_listener *l);
/* The address actually bound, "127.0.0.1:18080" (the port chosen for port 0). */
const char *hlb_listener_bound(const struct hlb_listener *l);
/* "ADDR SERVICE": where it listens and for which service now, for the hashlb that takes it
 * over (HLB_FDPASS_LINE); valid until the next call. */
const char *hlb_listener_handover_name(struct hlb_listener *l);
bool hlb_listener_inherited(const struct hlb_listener *l); /* from the service manager */
struct hlb_service *hlb_listener_service(const struct hlb_listener *l); /* control thread */

#endif
