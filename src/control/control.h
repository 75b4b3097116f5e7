/* SPDX-License-Identifier: MIT */
/*
 * The control plane as one object: the pool (health, rebuilds, publishing),
 * the admin endpoint and config reloads, all on one control loop. The
 * daemon plugs it in through hlb_control_plug() (plug.c); tests and
 * benchmarks create it directly with their own environment.
 */
#ifndef HLB_CONTROL_CONTROL_H
#define HLB_CONTROL_CONTROL_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "hashlb/config.h"
#include "hashlb/error.h"
#include "hashlb/steer_shared.h"

#include "http.h"
#include "loop.h"
#include "pool.h"

/* A kernel-steered service's program as /metrics shows it (hlb_control.steer_stats). */
struct hlb_steer_sample {
	const char *service; /* borrowed: valid until the control loop's next event */
	struct hlb_steer_stats st; /* summed over CPUs (hashlb_steer_stats()) */
	/* of those counters, the service's own (its table's in its program:
	 * hashlb_steer_tables_stats()): packets and bytes if <own_known> (not of an older
	 * hashlb's program of several tables, which counts no table's own), the others if
	 * <own_all> too (not of one that counts each table's packets and bytes alone) */
	struct hlb_steer_stats own;
	bool own_known, own_all;
	/* conntrack entries of the service's VIPs (its table's in its program) */
	uint64_t flows;
	/* conntrack entries in use, every service's on the interface (the program's) */
	uint64_t interface_flows;
	uint64_t flows_max; /* conntrack entries at most (the program's) */
	/* the service's latest table is not in the kernel (refused, retried): the kernel path
	 * steers by an older one */
	bool table_stale;
	uint64_t tables_refused; /* tables the kernel path refused, since start */
	/* No program now (why, as logged), or one whose counters could not be read (that)
	 * (borrowed, as <service>), the rest unset; NULL with one read. Only
	 * hlb_control_steer_samples_status()'s. */
	const char *none;
	bool attached; /* with <none>: a program is attached, its counters unread */
};

/*
 * The control plane's log; library code never prints itself. <kv> is
 * logfmt pairs ("config=a.yaml services=2") or NULL.
 */
typedef void (*hlb_control_log_fn)(void *arg, enum hlb_log_level level, const char *msg,
				   const char *kv);

/*
 * Kernel steering of the <i>th steered service, for /metrics: 0 with <ret> filled, -ENODEV
 * if it has no program now (attaching failed, or a build without BPF; <ret>'s service and
 * none filled where the reason is known, else <ret> untouched), -ENOENT past the
 * last one. Called for i = 0, 1, ... in one go, each reading from 0 (the services of one
 * program read from one scan of it: run_steer_stats()).
 */
typedef int (*hlb_control_steer_stats_fn)(void *arg, uint32_t i, struct hlb_steer_sample *ret);
/*
 * Kernel steering: 0 if the table of service <c> over backends <names> at <weights> (<n>)
 * fits the program the service has (none yet, or a new one to come: fits), else -E2BIG
 * with <err> naming the service, what it needs and has, and how to make it fit. <next>: the
 * config <c> is of, that a reload or a resolve brings (a program grown for <c> is sized for
 * every other service of it too, so that one reload grows it once), or NULL (a weight set:
 * the other services' configs stay).
 */
typedef int (*hlb_control_steer_fits_fn)(void *arg, const struct hashlb_service_cfg *c,
					 const struct hashlb_config *next, const char *const *names,
					 const uint32_t *weights, const bool *backup, uint32_t n,
					 struct hashlb_error *err);

struct hlb_close_wait;

/* A resolve_every round's errors at most: a name that failed, and its other addresses refused
 * (or a second failure, out of memory...). */
#define HLB_RESOLVE_ERRORS_MAX 2

struct hlb_control {
	struct hlb_loop *loop; /* borrowed */
	struct hlb_pool *pool;
	struct hlb_rcu *rcu; /* the pool's (may be NULL): frees what a reload replaced */
	struct hlb_http *http; /* NULL when admin is off */
	const struct hashlb_config *cfg; /* current */
	struct hashlb_config *owned_cfg; /* <cfg>, freed with the control */
	char *config_path;
	/* what runs, as started: a reload changes neither (restart only), so
	 * the config it loads is compared with these, not with the last one */
	uint32_t run_workers; /* as configured: 0 = auto */
	struct sockaddr_storage run_admin_addr;
	socklen_t run_admin_addr_len;
	/* the last reload applied: what of its config waits for a restart
	 * ("workers (serving 1, config 4)"), "" for nothing; for its answer */
	bool restart_workers, restart_admin;
	char restart_only[384];
	/* its config's warnings (hashlb_config_warnings()): how many, and the first as
	 * "FILE:LINE:COL: WHAT" ("" for none) */
	uint32_t warnings;
	char first_warning[PATH_MAX + 300];
	/* its services whose clients it placed anew, and the first ("web (seed)") */
	uint32_t rehashed;
	char first_rehashed[128];
	/* the tables it rebuilt, and the share of clients the one that moved most moved */
	struct hlb_pool_moved moved;
	/* its backends that keep a setting made at run time over the config's, and the first
	 * (hlb_pool_overrides()) */
	uint32_t overrides;
	char first_override[128 + HASHLB_NAME_MAX];
	hlb_control_log_fn log;
	void *log_arg;
	/* process-level counters for /metrics and /status */
	uint64_t start_ms;
	time_t start_time;
	uint64_t reloads_ok, reloads_failed;
	time_t last_reload_time;
	bool last_reload_failed;
	bool stopping; /* shutdown began: draining, no reload */
	struct hashlb_error last_reload_err;
	char last_reload_file[256]; /* last_reload_err.file points here */
	/* the errors the last reload refused found in the file (hashlb_error_list's total), 1
	 * when last_reload_err is all: "and 4 more" in its log line and answer, as an operator
	 * fixing the first and reloading again learnt of the next one a reload at a time */
	size_t last_reload_errors;
	/* resolve_every: the current config's text parsed again and its names
	 * resolved off the loop; applied when an address changed */
	struct hlb_timer resolve_timer;
	struct hashlb_config *resolving; /* parsed from cfg->text, being resolved */
	struct hashlb_resolve *resolve_job;
	uint64_t resolve_deadline_ms;
	uint64_t resolves_ok, resolves_failed, resolves_changed;
	/* admin requests refused (503): the last logged count and when, per kind */
	uint64_t refused_logged[HLB_HTTP_REFUSED_MAX], refused_logged_ms[HLB_HTTP_REFUSED_MAX];
	/* the last failed round's errors, in the order said (a name that failed, then its other
	 * addresses refused: at most two a round, resolve_failed()); none when the last one
	 * succeeded. /status's resolve.last_errors, the last of them its last_error */
	char last_resolve_errs[HLB_RESOLVE_ERRORS_MAX][320];
	uint32_t n_last_resolve_errs;
	/* names that keep failing, or addresses refused, logged once and again when
	 * the failure changes (resolve_failed()): what was logged last and when, of
	 * either kind ([0] names, [1] refusals), and the rounds failed in a row;
	 * rounds 0 while every name resolves */
	struct hashlb_error resolve_logged[2];
	uint64_t resolve_logged_ms[2], resolve_fail_rounds;
	/* the daemon, when plugged in (plug.c); opaque here */
	void *daemon;
	uint64_t (*connections)(void *daemon); /* open connections over all workers */
	uint64_t (*max_connections)(void *daemon); /* the cap on them, 0: none */
	/* forwarding worker <i>'s resources; false past the last one */
	bool (*worker_stats)(void *daemon, uint32_t i, struct hlb_worker_stats *ret);
	/* its listening sockets, for GET /sockets (hlb_daemon_listen_fds()) */
	uint32_t (*listen_fds)(void *daemon, pid_t taker, int *fds, const char **addrs,
			       uint32_t max);
	/* after a reload that succeeded, its config in force (may be NULL) */
	void (*reloaded)(void *arg, const struct hashlb_config *cfg);
	void *reloaded_arg;
	/* POST /upgrade and its state in /status (hlb_daemon_upgrade_start(), _state()) */
	int (*upgrade_start)(void *daemon);
	pid_t (*upgrade_state)(void *daemon, const char **ret_how);
	/* POST /reload's RELOADING=1 (<done> false) and READY=1 (true) to the service manager,
	 * as SIGHUP's (hlb_daemon_notify_reload()); NULL: none */
	void (*notify_reload)(void *daemon, bool done);
	/* the hashlb that this one's sockets and run-time settings were handed
	 * to and that still runs, 0: none (hlb_daemon_successor()) */
	pid_t (*successor)(void *daemon);
	/* hashlb ctl close: the same asked of the hashlb this one took over from, if it still
	 * runs (hlb_daemon_close_old()): its pid, 0 if none, -ENOMEM; with a pid,
	 * hlb_control_close_old_done(<wait>, n) follows on the loop, n its count or -1: not
	 * asked (never from within this call, nor once the daemon is freed) */
	pid_t (*close_old)(void *daemon, const char *svc, const char *name,
			   struct hlb_close_wait *wait);
	struct hlb_close_wait *close_waits; /* the answers that wait so (admin.c) */
	hlb_control_steer_stats_fn steer_stats; /* NULL: nothing is steered by this process */
	void *steer_stats_arg;
	hlb_control_steer_fits_fn steer_fits; /* NULL: nothing is steered by this process */
	void *steer_fits_arg;
};

/*
 * Create the pool for <cfg> loaded from <config_path>, then open the admin
 * endpoint at cfg->admin_addr (if any). <cfg> is the control's on success,
 * freed when a reload replaces it; on failure it stays the caller's (<err>
 * may point into it).
 */
int hlb_control_new(struct hashlb_config *cfg, const char *config_path, struct hlb_loop *loop,
		    const struct hlb_pool_env *env, hlb_control_log_fn log, void *log_arg,
		    struct hlb_control **ret_ctl, struct hashlb_error *err);
void hlb_control_free(struct hlb_control *ctl); /* accepts NULL */

/* What this process hands the one that replaces it, after the sockets' lines: the run-time
 * settings (hlb_pool_handover()) and its reload counts (HLB_HANDOVER_RELOADS), which the new
 * one's hlb_control_new() carries on from <env>->handover. */
void hlb_control_handover(const struct hlb_control *ctl, struct hlb_buf *o);

/*
 * Re-read the config file: validate it fully, then apply the difference.
 * On error nothing changes, the old config keeps serving, and <err> (also
 * kept for the admin status) says where: file:line:column. <by>: what asked
 * for it, for the log's by= ("admin", "signal"), as `ctl set` says by=admin.
 */
int hlb_control_reload(struct hlb_control *ctl, const char *by, struct hashlb_error *err);

/*
 * Shutdown begins: stop health checks and resolving. The admin endpoint
 * goes on serving the drain (status, metrics, ctl close) unless
 * <close_admin>: another hashlb took the sockets over and serves the same
 * admin address now.
 */
void hlb_control_stop(struct hlb_control *ctl, bool close_admin);
/* The hashlb that took this one's sockets side by side, or an upgrade's new process that
 * failed, has exited: the admin endpoint's Unix path back, if that one left it to nobody
 * (hlb_http_reclaim()), and logged. */
void hlb_control_admin_reclaim(struct hlb_control *ctl);
/* Close the connections to backend <name> of service <svc> (as POST /close does, the each_address
 * entry of that name too), for the hashlb that took over from this one. Returns how many were
 * established; 0 if there is no such service or backend. */
uint64_t hlb_control_close_named(struct hlb_control *ctl, const char *svc, const char *name);

/*
 * Every kernel-steered service's program with its counters read now, each once
 * (ctl->steer_stats), for /metrics and /status: stored in *<ret_v> (the caller frees it; NULL
 * when there is none) and its length in *<ret_n>. -ENOMEM.
 */
int hlb_control_steer_samples(struct hlb_control *ctl, struct hlb_steer_sample **ret_v,
			      uint32_t *ret_n);
/* The same, for /status: also the services with no program whose reason is known, their
 * sample's none set. */
int hlb_control_steer_samples_status(struct hlb_control *ctl, struct hlb_steer_sample **ret_v,
				     uint32_t *ret_n);
/*
 * Whether every service of <cfg>, with the weights applying it would give
 * (hlb_pool_weights_after(): a weight set at run time stays unless the config changes it),
 * has a table: 0, else its error with <err> at the config's position saying why (every
 * backend at weight 0, or a table too large, by weights set with hashlb ctl set); and
 * every kernel-steered one fits its program (ctl->steer_fits), and all of them
 * <cfg>'s table_memory (with weights set at run time kept), else -E2BIG (or -ENOMEM). A
 * config that fails is refused whole: applied, its table would not build (the old one
 * serving, the reload said applied), or stay out of the kernel, and every later one
 * (health changes) with them.
 */
int hlb_control_weights_fit(struct hlb_control *ctl, const struct hashlb_config *cfg,
			    struct hashlb_error *err);
/* The service <i> of those hlb_control_table_memory() counts, in *<ret_s>, and the most bytes
 * its table may take (hashlb_service_cfg_weights_bytes_max()); UINT64_MAX short of memory. */
typedef uint64_t (*hlb_control_table_bytes_fn)(void *arg, uint32_t i,
					       const struct hashlb_service_cfg **ret_s);
/*
 * table_memory's rule (hashlb_table_memory_add()) over <n> services with the weights <by> says,
 * each counted at <bytes>'s: 0 while their sum, *<total>, stays within <cfg>'s cap; else
 * -E2BIG, *<total> the sum over all of them, <err> (may be NULL) saying so at the first service
 * past it, as the loader says it (its file left to the caller); or -ENOMEM, <err> saying so.
 * POST /set's rule (a weight raised), a reload's (weights set at run time kept) and hashlb ctl
 * upgrade's pre-check (the weights the new process takes over).
 */
int hlb_control_table_memory(const struct hashlb_config *cfg, uint32_t n,
			     enum hashlb_table_memory_by by, hlb_control_table_bytes_fn bytes,
			     void *arg, uint64_t *total, struct hashlb_error *err);
/* The sample of service <name> in <v> (<n> long), or NULL: it has no program now. */
const struct hlb_steer_sample *hlb_control_steer_sample_of(const struct hlb_steer_sample *v,
							   uint32_t n, const char *name);

/* The admin endpoint's routes (admin.c). */
void hlb_admin_handle(void *ctl, const struct hlb_http_req *req, struct hlb_http_resp *resp);
/* Its answer to a request from the head alone (hlb_http_head_fn): a path it does not have 404,
 * a method the path does not take 405. */
bool hlb_admin_head(void *ctl, const struct hlb_http_req *req, struct hlb_http_resp *resp);
/* How many descriptors its answer to <req> carries at most (hlb_http_fds_fn): GET /sockets's. */
unsigned hlb_admin_fds(void *ctl, const struct hlb_http_req *req);
/* The old process's answer to a close that waits for it (hlb_control.close_old): <n> its
 * count, -1 if it could not be asked. The answer goes to the client; <wait> is freed. */
void hlb_control_close_old_done(struct hlb_close_wait *wait, int64_t n);
/* The closes that wait answered now without the old process's count, which is not waited for
 * (this one hands its admin address over): they were carried out here, never to be answered as
 * requests that were not (hlb_http_free_handed_over()). Each stays until its
 * hlb_control_close_old_done(). */
void hlb_control_close_waits_answer(struct hlb_control *ctl);
/* Free the closes that still wait (the client gets no answer). */
void hlb_control_close_waits_free(struct hlb_control *ctl);
/*
 * Prometheus text exposition (metrics.c), appended to <out>: of everything, or with
 * <names_len> > 0 of the families <names> names (names back to back, each ending in its NUL:
 * a family's name, or a histogram's sample name NAME_bucket, NAME_sum, NAME_count), each
 * family whole; a name of no family adds nothing.
 */
void hlb_metrics_render(struct hlb_control *ctl, const char *names, size_t names_len,
			struct hlb_buf *out);
/* The descriptors this process has open now (hashlb_process_open_fds; metrics.c). */
unsigned hlb_process_open_fds(void);
/* Field <i> of <s>: its value into <ret_value> and its key in /status's "workers" ("turns"),
 * NULL past the last (metrics.c, which lists them with their families). */
const char *hlb_worker_stats_field(const struct hlb_worker_stats *s, unsigned i,
				   uint64_t *ret_value);

#endif
