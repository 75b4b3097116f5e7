/* SPDX-License-Identifier: MIT */
/*
 * The hashlb daemon (`hashlb run`): the control thread's event loop, the
 * workers of the data plane, the listeners, and the plug for the control
 * plane.
 *
 * The control thread (the main thread) runs one epoll loop: a signalfd for
 * SIGTERM, SIGINT and SIGHUP, the workers' exit eventfd, the fds and timers
 * that the control plane registers (hlb_daemon_watch(), hlb_daemon_timer_*),
 * and the RCU reclamation of retired snapshots. Nothing here is thread-safe
 * unless said: call it from the control thread (from a callback or a hook).
 *
 * Services. The control plane (hlb_control_plug()) has them: hooks.start
 * creates the services, publishes their snapshots (hlb_service_publish()
 * with hlb_daemon_rcu()) and opens their listeners with the listen
 * transaction below; hooks.reload does the same for SIGHUP.
 *
 * Listeners are kept per address across config generations. A reload runs
 *   hlb_daemon_listen_begin(d);
 *   hlb_daemon_listen(d, addr, ..., svc) for every service of the new config;
 *   hlb_daemon_listen_commit(d)  (or _abort(d) if the reload fails)
 * An address listened on before keeps its sockets (nothing is refused
 * during the reload) and routes to the new service at commit; new addresses
 * are bound in hlb_daemon_listen() (so a bind error fails the reload before
 * anything changed) and start accepting at commit; addresses not listened
 * on again are closed at commit. Established connections are never closed
 * by a reload: they hold their service and backend.
 *
 * Shutdown. SIGTERM or SIGINT (or hlb_daemon_stop()): hooks.stopping runs,
 * every listener closes (new connections are refused), established
 * connections drain, each for up to its service's drain_timeout_ms (or
 * until the deadline the reload that removed its backend or service gave
 * it; none for a drain of never: until they end), then it is closed;
 * hlb_daemon_run() returns 0 once the last one is
 * gone, and every hold released (hlb_daemon_hold(): the kernel path's
 * flows). A second signal ends the drain at once. A worker that fails (its io_uring
 * does: hlb_proxy_failed()) starts the same shutdown, and
 * hlb_daemon_failed() says so.
 *
 * Upgrade in place. SIGUSR2: the executable (the file at the path this
 * process started from, so a new version installed there) runs again with
 * the same command line, as a child, and takes the listening sockets over
 * on a socket pair (fd 3, $HASHLB_UPGRADE_FD), whatever the admin endpoint.
 * When it is ready it says so on that pair; this process then tells the
 * service manager that the child is the main process (MAINPID=) and drains
 * as on SIGTERM. If the child exits first, or is not ready in
 * 60 s (it then gets SIGTERM), the upgrade failed: this process goes on
 * serving.
 */
#ifndef HASHLB_DAEMON_H
#define HASHLB_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "hashlb/config.h"
#include "hashlb/error.h"
#include "runtime.h"

struct hlb_daemon;

struct hlb_daemon_opts {
	uint32_t workers; /* 0: the config's; 0 there: one per CPU */
	bool pin_cpus; /* pin worker i to the i-th allowed CPU */
	uint32_t buf_size; /* provided buffer bytes; 0 = default (64 KiB) */
	uint32_t buf_count; /* provided buffers per worker; 0 = default (256) */
	uint32_t
		splice_after; /* bytes before a bulk direction splices; 0 = default, UINT32_MAX = never */
	uint32_t splice_pipes; /* spliced directions at once, all workers; 0 = default (1024) */
	uint32_t pipe_size; /* bytes per splice pipe; 0 = the kernel's (64 KiB) */
	uint32_t busy_poll_us; /* see struct hlb_proxy_opts; 0 = never */
	/* client connections at once over all workers; 0 = what the fd limit allows */
	uint64_t max_conns;
	/* the command line (argv[0] the program), run again by an upgrade in place; NULL: none */
	char *const *argv;
};

/* The control plane's plug. Every member but start and reload may be NULL. */
struct hlb_daemon_hooks {
	void *arg;
	/*
	 * Before the workers accept: create the services from <cfg>, publish
	 * their first snapshots, and open their listeners (listen transaction).
	 * On success <cfg> is the hook's to free (the daemon reads it no more):
	 * kept to hlb_daemon_free(), the config a process started with stayed
	 * beside each one a reload loaded, 31 MB at 100,000 backends. On
	 * failure the daemon keeps it.
	 */
	int (*start)(struct hlb_daemon *d, struct hashlb_config *cfg, void *arg,
		     struct hashlb_error *err);
	/* SIGHUP: read hlb_daemon_config_path() again. */
	void (*reload)(struct hlb_daemon *d, void *arg);
	/* Shutdown begins: stop health checks, close the admin endpoint. */
	void (*stopping)(struct hlb_daemon *d, void *arg);
	/* How long the connections a reload left draining (removed backends and services, no
	 * longer among the listeners' services) have left to drain: the drain may last that
	 * long (each ends at its own deadline). NULL: 0. */
	uint32_t (*drain_left_ms)(struct hlb_daemon *d, void *arg);
	/* The workers have exited: free the control plane's state. */
	void (*stopped)(struct hlb_daemon *d, void *arg);
	/* An upgrade in place: write the HLB_HANDOVER_LINE lines (runtime/fdpass.h) of what was
	 * set at run time onto <f>, for the new process. */
	void (*handover)(struct hlb_daemon *d, void *arg, FILE *f);
	/* Started by an upgrade in place, and ready: <text> is what hooks.handover of the old
	 * process writes now (HLB_FDPASS_RESYNC), for the health its checks found since. */
	void (*resync)(struct hlb_daemon *d, void *arg, const char *text);
	/* Started by an upgrade in place, and ready: the old process has stopped (it sends
	 * HLB_FDPASS_RESYNC_END as it does, on its loop, so it publishes no table after it), or
	 * this one cannot tell any more (no resync socket: a hashlb of before; it ended early).
	 * Once, after hooks.resync if that comes. Started otherwise (side by side, or not by an
	 * upgrade): once it listens. */
	void (*old_stopped)(struct hlb_daemon *d, void *arg);
	/* Handed over, draining: the new process asks to close the connections to backend <name>
	 * of service <svc> (hashlb ctl close). Returns how many were established. */
	uint64_t (*close)(struct hlb_daemon *d, void *arg, const char *svc, const char *name);
	/* A worker saw a backend start failing connects (hlb_proxy_failing_fd()):
	 * one call per burst of them. */
	void (*failing)(struct hlb_daemon *d, void *arg);
	/* The last hashlb this one's listening sockets were given to (GET /sockets, side by
	 * side), or the new process of an upgrade in place before it was ready, has exited, and
	 * this one serves on, not stopping: its admin endpoint's Unix path, which that one may
	 * have bound over it, is to be taken back. */
	void (*taker_exited)(struct hlb_daemon *d, void *arg);
};

/*
 * A daemon for <cfg> (ownership taken, also on failure) loaded from
 * <config_path>. Sets up signals (blocks SIGTERM, SIGINT, SIGQUIT, SIGHUP,
 * SIGUSR1 and SIGUSR2 for signalfd, but SIGINT or SIGQUIT the process
 * ignores, which it leaves ignored; ignores SIGPIPE), raises the fd soft
 * limit to the hard limit,
 * and creates the workers (not started).
 */
int hlb_daemon_new(struct hashlb_config *cfg, const char *config_path,
		   const struct hlb_daemon_opts *opts, struct hlb_daemon **ret_daemon,
		   struct hashlb_error *err);
void hlb_daemon_set_hooks(struct hlb_daemon *d, const struct hlb_daemon_hooks *hooks);
/*
 * Start the workers and the services, then run the loop until shutdown
 * completes. Returns 0 after a clean drain, a negative errno (and <err>) if
 * it could not start.
 */
int hlb_daemon_run(struct hlb_daemon *d, struct hashlb_error *err);
/*
 * Once hlb_daemon_run() returned: whether a worker failed (its io_uring did)
 * while it ran. The daemon then stopped as on SIGTERM, and the run should
 * count as failed (hashlb run exits 1), for the service manager to restart it.
 */
bool hlb_daemon_failed(const struct hlb_daemon *d);
/* Begin the shutdown as on SIGTERM (from a callback of the loop). */
void hlb_daemon_stop(struct hlb_daemon *d);
void hlb_daemon_free(struct hlb_daemon *d); /* accepts NULL */

struct hlb_rcu *hlb_daemon_rcu(const struct hlb_daemon *d);
const char *hlb_daemon_config_path(const struct hlb_daemon *d);
/* A process-wide increasing number for the next snapshot's generation. */
uint64_t hlb_daemon_next_generation(struct hlb_daemon *d);
/* Connections open now over all workers. */
uint64_t hlb_daemon_connections(const struct hlb_daemon *d);
/* The cap on them (--max-connections, else what the fd limit allows); 0: none. */
uint64_t hlb_daemon_max_connections(const struct hlb_daemon *d);
/*
 * Descriptors the control plane may hold (<*fds>, the most its health
 * checks may hold at once, kept up to date by it): a cap derived from the fd
 * limit leaves them room (hlb_proxy_count_fds()). Before hlb_daemon_run().
 */
void hlb_daemon_count_fds(struct hlb_daemon *d, const _Atomic uint32_t *fds);
/*
 * The most descriptors the admin endpoint holds for its connections, when
 * the config has one: kept out of the cap the fd limit allows, beside the
 * reserve. Before hlb_daemon_run().
 */
void hlb_daemon_admin_fds(struct hlb_daemon *d, uint32_t n);
/* Worker <i>'s resources; false past the last worker. */
bool hlb_daemon_worker_stats(const struct hlb_daemon *d, uint32_t i, struct hlb_worker_stats *ret);
/* What gives clients of <svc> waiting in the queues room changed: hlb_proxy_kick_queues(). */
void hlb_daemon_kick_queues(struct hlb_daemon *d, struct hlb_service *svc);
/* The listening sockets of every listener (not those of the service manager), for a hashlb
 * that takes over (GET /sockets?taker=PID); <addrs>[i] "ADDR SERVICE" of fds[i]. None once
 * stopping. Giving any to a <taker> (its pid; 0: unknown, someone by hand) counts as handing
 * over while that process lives (hlb_daemon_handed_over()). */
uint32_t hlb_daemon_listen_fds(struct hlb_daemon *d, pid_t taker, int *fds, const char **addrs,
			       uint32_t max);
/*
 * Upgrade in place, as on SIGUSR2 (from a callback of the loop): start the
 * new process. Returns its pid, or -EALREADY (one under way), -ESHUTDOWN
 * (stopping), -ECHILD (PID 1 of a PID namespace: HLB_UPGRADE_PID1), -errno if
 * it could not be started (logged). <by>: what asked for it, for the log's by=
 * ("signal", "admin").
 */
int hlb_daemon_upgrade_start(struct hlb_daemon *d, const char *by);
/* Why a container's init cannot upgrade in place, for the log and the admin endpoint. */
#define HLB_UPGRADE_PID1                                                               \
	"this hashlb is PID 1 of its PID namespace (a container's init): the new one " \
	"would be killed with everything in it when this one exits"
/*
 * The upgrade under way (its pid, *<ret_how> NULL), else the last one that
 * failed (its pid, or -1 if no process could be started; *<ret_how> how),
 * else 0.
 */
pid_t hlb_daemon_upgrade_state(const struct hlb_daemon *d, const char **ret_how);

/*
 * The config was reloaded here: if an upgrade in place is under way, its new
 * process may have read the file before that; it is sent SIGHUP once ready.
 * <cfg>, the config loaded: its services' max_connections are checked against
 * the fd limit, as at start.
 */
void hlb_daemon_reloaded(struct hlb_daemon *d, const struct hashlb_config *cfg);
/*
 * Tell the service manager a reload begins (RELOADING=1), or has ended (READY=1, applied or
 * refused: the old config serves on): around every reload, SIGHUP's and the admin
 * endpoint's alike, which the unit's systemctl reload goes through.
 */
void hlb_daemon_notify_reload(struct hlb_daemon *d, bool done);
/* The run-time settings the hashlb this one took over from handed over (HLB_HANDOVER_LINE
 * lines), NULL if none: for the control plane's first services. */
const char *hlb_daemon_handover(const struct hlb_daemon *d);
/* The answer of hlb_daemon_close_old(): <own> as given, <n> as said there. */
typedef void (*hlb_daemon_close_old_fn)(struct hlb_daemon *d, void *arg, uint64_t own, int64_t n);
/*
 * hashlb ctl close in a process that took the sockets over from one that still runs (and
 * drains): ask that one to close its connections to backend <name> of service <svc> too, and
 * those of an older one it took over from in turn. Returns that process's pid, 0 if none
 * runs, or -ENOMEM. With a pid, <done>(d, <arg>, <own>, n) is called once, later, on the
 * daemon's loop (never from within this call): n how many it closed, or -1 if it could not be
 * asked (it came through GET /sockets, or is a hashlb of before, or did not answer within 2 s
 * of the request). Nothing blocks: the requests go one at a time, each answered (<done>) in
 * the order asked. Not called once the daemon is freed, which frees what waits.
 */
pid_t hlb_daemon_close_old(struct hlb_daemon *d, const char *svc, const char *name,
			   hlb_daemon_close_old_fn done, void *arg, uint64_t own);
/* The hashlb this process took its listening sockets over from, the one it replaces (its
 * pid: it still runs while this one starts), or 0. */
pid_t hlb_daemon_taken_from(const struct hlb_daemon *d);
/* It handed them to the hashlb that replaces it (SIGUSR2 and the new one became ready, or
 * GET /sockets from a hashlb that still runs): what outlives it (kernel steering) is left to
 * that one. */
bool hlb_daemon_handed_over(const struct hlb_daemon *d);
/* That hashlb's pid, 0 if none (or it has exited). */
pid_t hlb_daemon_successor(const struct hlb_daemon *d);

/* ---- listen transaction -------------------------------------------------- */
void hlb_daemon_listen_begin(struct hlb_daemon *d);
int hlb_daemon_listen(struct hlb_daemon *d, const struct sockaddr *addr, socklen_t addr_len,
		      const char *name, struct hlb_service *svc, struct hashlb_error *err);
void hlb_daemon_listen_commit(struct hlb_daemon *d);
void hlb_daemon_listen_abort(struct hlb_daemon *d);

/* ---- event loop ---------------------------------------------------------- */
typedef void (*hlb_daemon_fd_fn)(struct hlb_daemon *d, int fd, uint32_t events, void *arg);
typedef void (*hlb_daemon_timer_fn)(struct hlb_daemon *d, void *arg);
struct hlb_daemon_timer;

/* Call <fn> when <fd> has any of <events> (EPOLLIN...). The caller keeps the fd. */
int hlb_daemon_watch(struct hlb_daemon *d, int fd, uint32_t events, hlb_daemon_fd_fn fn, void *arg);
/* Stop watching <fd>; safe from within its callback. Call before closing it. */
void hlb_daemon_unwatch(struct hlb_daemon *d, int fd);
/*
 * A timer firing after <after_ms>, then every <every_ms> (0: once; it then
 * stays allocated until hlb_daemon_timer_del() or the daemon's end).
 */
int hlb_daemon_timer_add(struct hlb_daemon *d, uint64_t after_ms, uint64_t every_ms,
			 hlb_daemon_timer_fn fn, void *arg, struct hlb_daemon_timer **ret_timer);
/* Re-arm: fire after <after_ms>, then every <every_ms>. */
int hlb_daemon_timer_set(struct hlb_daemon_timer *t, uint64_t after_ms, uint64_t every_ms);
/* Safe from within its callback. Accepts NULL. */
void hlb_daemon_timer_del(struct hlb_daemon *d, struct hlb_daemon_timer *t);

struct hlb_daemon_hold;
typedef void (*hlb_daemon_hold_fn)(struct hlb_daemon *d, void *arg);
/*
 * Shutdown: something besides the workers' connections still drains (the kernel path's
 * flows, steering: kernel): hlb_daemon_run() returns only once every hold is released
 * (hlb_daemon_release()), the workers done too. A second signal calls <now>(<d>, <arg>),
 * which should end it then (release it). From hooks.stopping on. -ENOMEM.
 */
int hlb_daemon_hold(struct hlb_daemon *d, hlb_daemon_hold_fn now, void *arg,
		    struct hlb_daemon_hold **ret_hold);
/* The hold ends (from its <now> too). Accepts NULL. */
void hlb_daemon_release(struct hlb_daemon *d, struct hlb_daemon_hold *h);

#endif
