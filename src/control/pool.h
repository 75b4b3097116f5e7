/* SPDX-License-Identifier: MIT */
/*
 * The pool: every service's backends with their admin state, weight and
 * health, and the rebuild-and-publish machinery. Control thread only.
 *
 * A change of health or admin state rebuilds with hlb_snapshot_refresh(),
 * which reuses the current table's full build (hashlb_table_with_down(): one
 * survivor build and a copy, or copies alone for a flapping backend; only
 * the changed backend's clients move); a
 * change of weights, membership or settings rebuilds from the current
 * table (hlb_snapshot_rebuild(): the ring keeps the points of the backends
 * whose name and weight are unchanged; Maglev repopulates), and a change of
 * scheme or table parameters builds from scratch. The pool writes each
 * backend's admin, healthy and (admin weight command) weight before
 * building: the runtime derives the down set from them
 * (hlb_backend_usable()). Changes are coalesced: the first one schedules a build
 * HLB_POOL_DEBOUNCE_MS later, and builds of a service are at least HLB_POOL_MIN_GAP_MS apart, a gap
 * that doubles while builds keep coming (up to HLB_POOL_MAX_GAP_MS) and resets after a quiet
 * second. So a lone failure is in the table within milliseconds of its verdict, a burst seen at
 * once costs one build, and a stream of changes (checks finding a dead rack's backends one by one)
 * costs about ten builds a second, not one per backend. A Maglev retry table asked for by a worker
 * (hlb_pool_failing()) is built without the debounce, within the same gap.
 *
 * A backend is "down" in the table when its health is down or its admin
 * state is drain or maint. Drain and maint differ in that maint also stops
 * health checks; neither closes a connection.
 */
#ifndef HLB_CONTROL_POOL_H
#define HLB_CONTROL_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "hashlb/config.h"
#include "hashlb/error.h"
#include "runtime/log.h"
#include "runtime/runtime.h"

#include "buf.h"
#include "check.h"
#include "health.h"
#include "loop.h"

#define HLB_POOL_DEBOUNCE_MS 5
#define HLB_POOL_MIN_GAP_MS 20
#define HLB_POOL_MAX_GAP_MS 100
#define HLB_POOL_TICK_MS 50 /* passive failures, flap decay, slow start */
/* A removed backend's series stay this long after it drained: longer than
 * any scrape interval, so that a scrape reads its last counts. */
#define HLB_POOL_DRAINED_KEEP_MS (5 * 60 * 1000)

struct hlb_pool;
struct hlb_pool_service;
struct orphan_was;

/* A backend's counters as the admin endpoint shows them (hlb_pool_backend_totals()): the data
 * path's, and the control plane's of its checks and health. */
struct hlb_pool_totals {
	struct hlb_backend_counters c;
	uint64_t checks_ok, checks_failed, checks_skipped, flaps, passive_holds;
};

struct hlb_pool_backend {
	struct hlb_pool_service *svc;
	struct hlb_backend *rt; /* one reference */
	uint32_t cfg_weight; /* from the config, to tell a reload's change from ours */
	uint32_t cfg_max_conns; /* the same for max_connections */
	enum hashlb_admin_state cfg_admin;
	enum hashlb_admin_state admin; /* current */
	struct hlb_health health;
	struct hlb_check check;
	/* A reload changed the exchange its checks make while one was under way: that one ends
	 * as it began, its verdict counted, and the checks restart with the new exchange then
	 * (backend_check_renew()). */
	bool check_renew;
	uint32_t idx; /* its place in the config's backends: that of its checks in their spread */
	uint64_t checks_ok, checks_failed;
	uint64_t checks_skipped; /* not made, for a fault of ours (hlb_check_skip_fn) */
	uint64_t check_latency_ns; /* last passed check's time: connect (+ answer) */
	/* check_latency_ns is from before its checks stopped (maint, checks off) and none has
	 * passed since: ctl status's CHECK says "-", as no check of now measured it */
	bool check_latency_old;
	/* its checks' errors while it is down, for the log */
	struct hlb_check_errs check_errs;
	/* its checks failed while it stays up (fewer than fall in a row, the run a passed check
	 * ends), for the log: how many, whether a line of them was logged, and the last one's
	 * error (the one a passive down's episode starts from) */
	uint32_t up_fails;
	bool up_fails_logged;
	uint32_t up_fails_err;
	/* Maglev: its run of failed checks (up_fails) has the retry table made with it down, for
	 * its verdict to copy: its verdict would populate, and no other backend failed at the
	 * run's first (pool.c, backend_failing()) */
	bool up_fails_retry;
	uint32_t seen_run; /* the data plane's connect failures in a row at the last tick */
	/* passive-only health, on trial: its clients established when the trial began */
	uint64_t trial_served;
	uint64_t passive_holds; /* holds of passive-only health begun (hold_until_ms set) */
	uint64_t ramp_start_ms; /* slow start began; 0 = not ramping */
	/* removed and drained: its series go at this + HLB_POOL_DRAINED_KEEP_MS */
	uint64_t drained_ms;
	/* went down under health.close_on_down: its connections are closed once
	 * a table without it is published */
	bool close_pending;
	bool carried_down; /* an upgrade's old process handed it over down */
	/* An orphan: the service a reload removed it with (NULL if none, or short of memory), for
	 * the reload that adds that service back before it drained (pool.c, orphan_take()). */
	char *orphan_of;
	bool orphan_passive_only; /* an orphan whose health was passive-only's */
	/* Its totals in the processes before this one, handed over by an upgrade in place
	 * (hlb_pool_carry_totals()), added where they are shown, not to the counters the data
	 * path and health read: NULL if none. Its gauge (c.active) is 0. */
	struct hlb_pool_totals *carried;
};

struct hlb_pool_service {
	struct hlb_pool *pool;
	struct hlb_service *rt; /* one reference */
	const struct hashlb_service_cfg *cfg; /* borrowed from the pool's config */
	struct hlb_pool_backend **backends; /* config order = table order */
	uint32_t n_backends;
	uint32_t taker_hint; /* where service_others_take_clients() found one last (a hint) */
	struct hlb_pool_backend **removed; /* draining after a reload */
	uint32_t n_removed;
	/* Removed and drained: kept for their counters' series in /metrics
	 * (HLB_POOL_DRAINED_KEEP_MS), and until their drain deadline for a reload
	 * that adds them back, what was set at run time with them. */
	struct hlb_pool_backend **drained;
	uint32_t n_drained;
	/* The counters of the removed backends that drained and were freed, and
	 * how many: hlb_pool_service_bytes() and hlb_pool_service_drained() still
	 * count them. */
	struct hlb_backend_counters gone;
	uint32_t n_gone;
	/* Of those, the counts an upgrade in place carried to them (hlb_pool_carry_totals()):
	 * hlb_pool_service_drained() alone counts them, with those of <drained> (as /status
	 * shows them), so that its rows and "drained" add up to the service's totals, which
	 * carried theirs; not the process's own, hlb_pool_service_bytes(). */
	struct hlb_backend_counters gone_carried;
	/* Of those, the ones a worker still holds (one reference each): a client
	 * waiting in its queue after a failed connect counts that failure's retry
	 * under the backend that failed once it is served, however long after.
	 * Read live, and added to <gone> once nothing else holds them
	 * (service_let_go()). */
	struct hlb_backend **gone_held;
	uint32_t n_gone_held;
	/* Made by a reload adding back a service retired within its drain timeout: its first
	 * snapshot, published into the retired service's <rt> only once nothing can fail the
	 * reload any more (hlb_pool_apply()): that one's connections read it. NULL otherwise. */
	struct hlb_snapshot *unpublished;
	/* Made by a reload that takes orphans back (orphan_take()): [i], backends[i] as it was
	 * if it is one, given back so if the reload fails (orphan_give_back()); NULL once it is
	 * applied (orphans_adopted()), or with no orphans to take. */
	struct orphan_was *orphans_was;
	struct hlb_health_params hp;
	/* Checks skipped for a fault of ours (the source address gone, no fd):
	 * logged when the first is, and when checks are made again with none
	 * skipped for an interval; <skips> counts those of the episode. */
	bool skipping;
	uint64_t skip_last_ms, skips;
	struct hlb_check_errs skip_errs; /* where << 16 | errno of those skipped, for the log */
	bool dirty, need_full;
	/* the next build drops a retry table made for failed checks, and is made from it (pool.c,
	 * retry_release()) */
	bool retry_released;
	uint32_t failing_hint; /* the backend a walk for one failing found last (pool.c) */
	/* the reload under way asked for a build: the next, if it has one, says what it moved
	 * (hlb_pool_flush_reload()) */
	bool reload_pending;
	/* the reload under way moved its listener so that its clients' 4-tuples change (said
	 * placed_anew=listen) */
	bool listen_rehashed;
	/* Whether the tick visits every backend (pool_tick()): checks on, a
	 * ramp begun, a connect failing on Maglev (hlb_pool_failing()) that
	 * the retry table does not have down yet, a reload; cleared by a tick
	 * that finds none of these. <seen_stale>: ticks skipped the backends,
	 * their seen_run is old. */
	bool tick_all, seen_stale;
	/* passive-only health: the first of its backends' holds ends then, when a tick visits
	 * them though <tick_all> is not set; 0 = none held */
	uint64_t hold_next_ms;
	uint64_t ticks, tick_visits; /* the pool's ticks, and the backends they visited */
	struct hlb_timer build_timer;
	uint64_t last_build_ms;
	uint64_t gap_ms; /* current minimum between two builds */
	uint64_t rebuilds, rebuilds_failed;
	uint64_t rebuild_ns_last, rebuild_ns_total, rebuild_ns_max;
	/* its counters in the processes before this one (hlb_pool_carry_totals()); the gauges
	 * (active, queued) 0 */
	struct hlb_service_counters carried;
	struct hashlb_error last_error; /* of the last failed build */
	/* Each backend's share of the published table of generation <shares_gen>
	 * (hlb_pool_service_share()), <n_shares> of them; NULL until asked for. */
	double *shares;
	uint32_t n_shares;
	uint64_t shares_gen;
};

/* Called on the control thread after each publish, e.g. kernel steering. */
/* (The handover of run-time settings to an upgrade's new process: hlb_pool_handover().) */
typedef void (*hlb_publish_fn)(void *arg, struct hlb_service *svc, const struct hlb_snapshot *snap);

/*
 * What the pool needs from the daemon. Every function may be NULL (tests):
 * generations then count per pool, and services listen nowhere.
 */
struct hlb_pool_env {
	uint32_t n_workers; /* counter lines per runtime object; 0: the rcu's readers */
	struct hlb_rcu *rcu; /* frees replaced snapshots */
	void *arg;
	uint64_t (*next_generation)(void *arg);
	/* The daemon's listen transaction (daemon.h): every service of a
	 * config is listened for between begin and commit; abort undoes. */
	void (*listen_begin)(void *arg);
	int (*listen)(void *arg, const struct hashlb_service_cfg *cfg, struct hlb_service *svc,
		      struct hashlb_error *err);
	void (*listen_commit)(void *arg);
	void (*listen_abort)(void *arg);
	/* What a client of <svc> waiting for room under a max_connections is retried on
	 * changed, but a slot (the workers see those): a snapshot published, a backend's
	 * max_connections or slow start admission, a service removed. The workers whose
	 * clients of <svc> wait look at them again at once, not at their next tick
	 * (hlb_proxy_kick_queues()). */
	void (*queue_kick)(void *arg, struct hlb_service *svc);
	/* Health changes, skipped checks and failed builds, as logfmt pairs in <kv>. */
	void (*log)(void *arg, enum hlb_log_level level, const char *msg, const char *kv);
	/* The HLB_HANDOVER_LINE lines of the hashlb this one replaces (an upgrade), applied to
	 * the backends as they are created; NULL if none. Borrowed during hlb_pool_new(). */
	const char *handover;
};

/*
 * Create the pool for <cfg> (borrowed until hlb_pool_apply() hands it a new
 * one), publish every service's first snapshot, listen, and start the
 * health checks on <loop>.
 */
int hlb_pool_new(const struct hashlb_config *cfg, struct hlb_loop *loop,
		 const struct hlb_pool_env *env, struct hlb_pool **ret_pool,
		 struct hashlb_error *err);
/* Stops the checks and drops the pool's references. Accepts NULL. */
void hlb_pool_free(struct hlb_pool *p);

int hlb_pool_subscribe(struct hlb_pool *p, hlb_publish_fn fn, void *arg);

/* What a reload changed (hlb_pool_apply()). A service added or removed counts its backends
 * as added or removed; a backend whose name stays at a new address is changed. */
struct hlb_pool_changes {
	uint32_t services_added, services_removed, services_changed;
	uint32_t backends_added, backends_removed, backends_changed;
	/* services whose clients the reload placed anew (scheme, seed, table size, ring points,
	 * hash key or prefix changed), and the first of them as "web (seed,hash_key)" */
	uint32_t services_rehashed;
	char first_rehashed[128];
};

/* The lines a reload writes at most on what it changed: the others are counted in one. */
#define HLB_POOL_CHANGE_LINES 32

/*
 * Apply a new, validated config: services and backends are matched by name
 * (a backend whose address changed is a new backend); new services are
 * created, every service is listened for and what the running ones' updates
 * allocate is allocated first, and if that fails (-errno, <err> says why)
 * nothing changed, no line of it logged. Then new backends come with slow
 * start, removed ones drain (until their last connection or the drain
 * timeout), changed weights and settings rebuild the table. <cfg> is
 * borrowed from now on; on success the previous one may be freed
 * (snapshots copy what workers read).
 * With <ret_changes>, what changed is logged, one line a service or backend
 * (HLB_POOL_CHANGE_LINES at most, then one line counting the others), and
 * counted into <ret_changes>; NULL: neither (a caller that logs its own).
 */
int hlb_pool_apply(struct hlb_pool *p, const struct hashlb_config *cfg,
		   struct hlb_pool_changes *ret_changes, struct hashlb_error *err);

/*
 * The weight hlb_pool_apply(<cfg>) would give each backend of service <c> of <cfg> (its
 * c->n_backends, in order, into <ret_weights>): the config's, or one set at run time
 * that the config does not change. -ENOMEM.
 */
int hlb_pool_weights_after(struct hlb_pool *p, const struct hashlb_service_cfg *c,
			   uint32_t *ret_weights);
/*
 * Around hlb_pool_weights_after() for each service of a config: the orphans it looks up
 * for a service not running (one a reload adds back) sorted once, not once a service.
 * Begin: -ENOMEM (then nothing to end). Not within hlb_pool_apply().
 */
int hlb_pool_weights_begin(struct hlb_pool *p);
void hlb_pool_weights_end(struct hlb_pool *p);
/*
 * Whether a backend of <p> (running, removed and draining, or of a removed service) has a
 * weight set at run time other than its config's: only then may a config whose tables
 * build make one that does not once applied (the weights set at run time kept,
 * hlb_pool_weights_after()). A scan, reading no name.
 */
bool hlb_pool_weight_set(const struct hlb_pool *p);

/*
 * The most bytes <s>'s table may take (hashlb_service_cfg_weights_bytes_max()) with the
 * weights of its backends in force: some set at run time, or taken over at an upgrade. Its
 * config's where its backends are not its config's (as the loader counted it). UINT64_MAX
 * short of memory. What table_memory counts it at: POST /set's and the new process's look.
 */
uint64_t hlb_pool_service_bytes_max(const struct hlb_pool_service *s);

/* Stop every health check (shutdown), ending in the log the runs of checks failed while up. */
void hlb_pool_stop_checks(struct hlb_pool *p);
/*
 * How long the connections still held by backends a reload removed (or by those of a service it
 * removed) have left to drain, at most: a stop or an upgrade drains that long at least, not to
 * cut them before the deadline their removal gave them. 0 for none; HASHLB_DRAIN_NEVER for a
 * removal whose timeouts.drain was never, that holds connections yet.
 */
uint32_t hlb_pool_drain_left_ms(const struct hlb_pool *p);
/*
 * At a stop, a line for each service with connections, and when its drain closes them at the
 * latest (`msg="service draining" service=S connections=N drain_timeout_ms=T`): its
 * timeouts.drain from now; with `backend=B removed=1` those a removed backend of it still
 * holds, and with `removed=1` alone those of a service a reload removed, each to the end of the
 * drain its reload gave it. drain_timeout_ms=never for a timeouts.drain of never: until they end.
 */
void hlb_pool_log_draining(struct hlb_pool *p);

uint32_t hlb_pool_service_count(const struct hlb_pool *p);
/* The pool's ticks so far (every HLB_POOL_TICK_MS): health, drains' ends, reaping. */
uint64_t hlb_pool_ticks(const struct hlb_pool *p);
struct hlb_pool_service *hlb_pool_service_at(struct hlb_pool *p, uint32_t i);
/*
 * The backends of <s> that have series in /metrics: its backends (0 ..
 * n_backends - 1), then those a reload removed that drain, then those
 * drained and kept a while (HLB_POOL_DRAINED_KEEP_MS).
 */
uint32_t hlb_pool_service_series(const struct hlb_pool_service *s);
const struct hlb_pool_backend *hlb_pool_service_series_at(const struct hlb_pool_service *s,
							  uint32_t j);
/*
 * The bytes <s> forwarded, client to backend in *<ret_in> and back in
 * *<ret_out>: its backends', those a reload removed that drain or drained,
 * and those gone (the per-backend counters go with a backend).
 */
void hlb_pool_service_bytes(const struct hlb_pool_service *s, uint64_t *ret_in, uint64_t *ret_out);
/*
 * The counters of the backends of <s> that a reload removed and that drained (those kept a
 * while for their series, and those gone since), summed into *<ret>, and how many they are:
 * with its backends' and those draining, they add up to the service's.
 */
uint32_t hlb_pool_service_drained(const struct hlb_pool_service *s,
				  struct hlb_backend_counters *ret);

/*
 * Log each service's counters as this process ends them (`msg="service totals"`), and
 * those of the services a reload removed whose totals are not logged yet (each logs them,
 * `removed=1`, once its last connection is gone).
 */
void hlb_pool_log_totals(struct hlb_pool *p);
struct hlb_pool_service *hlb_pool_service_find(struct hlb_pool *p, const char *name);
/*
 * The names of <s>'s backends a reload removed that still drain at <now> (hlb_now_ms()): before
 * their drain deadline, or with timeouts.drain never, while the pool keeps them (until
 * HLB_POOL_DRAINED_KEEP_MS after their last connection of the daemon's). At most <cap> into
 * <names> (borrowed until the pool's next tick or reload); returns how many there are. Kernel
 * steering keeps their slots for their established flows meanwhile (src/cli/run_steer.c).
 */
uint32_t hlb_pool_service_draining_names(const struct hlb_pool_service *s, uint64_t now,
					 const char **names, uint32_t cap);
struct hlb_pool_backend *hlb_pool_backend_find(struct hlb_pool_service *s, const char *name);

/* Admin commands. -EINVAL for a bad value. Take effect with the next build. */
int hlb_pool_set_admin(struct hlb_pool_backend *b, enum hashlb_admin_state st);
int hlb_pool_set_weight(struct hlb_pool_backend *b, uint32_t weight);
/* A cap needs no build: workers read it at each connect, and clients waiting are told now. */
void hlb_pool_set_max_connections(struct hlb_pool_backend *b, uint32_t max);
/*
 * Log what an admin request (POST /set) changed of <b>: each setting it gave that differs
 * from the value it had before (<was_*>; NULL: not given), as <b> has it now with that
 * value. Whether it logged (false: nothing of <b> changed).
 */
bool hlb_pool_log_set(const struct hlb_pool_backend *b, const enum hashlb_admin_state *was_state,
		      const uint32_t *was_weight, const uint32_t *was_max);
/* Log that an admin request (POST /set) of <name> in <s>, applied to its <n> backends, changed
 * none of them: each had the settings it gave already. */
void hlb_pool_log_set_unchanged(const struct hlb_pool_service *s, const char *name, uint32_t n);
/* Warn that after an admin request (POST /set) no backend of <s> takes clients
 * (hlb_pool_takes_clients_count() 0): its new clients are refused. */
void hlb_pool_log_set_leaves_none(const struct hlb_pool_service *s);
/*
 * The backends whose state, weight or max_connections is one set at run time (hashlb ctl
 * set) where their config says another: what a reload keeps and a restart drops. The first
 * is described into <first> (<size> bytes: "web/web-3 state drain (config: ready)"), left
 * alone when there is none.
 */
uint32_t hlb_pool_overrides(const struct hlb_pool *p, char *first, size_t size);
/* An HLB_HANDOVER_LINE for each backend with a setting made at run time, onto <o>: what an
 * upgrade's new process carries on (hlb_pool_env.handover). */
void hlb_pool_handover(const struct hlb_pool *p, struct hlb_buf *o);
/*
 * <text>: the old process's HLB_HANDOVER_LINE lines again, as they were once this one got
 * ready (HLB_FDPASS_RESYNC). A backend that its checks found down, or up again, since the
 * lines this one started from, and on which this one's own checks have not decided yet, takes
 * that health (and its flap damping) at once rather than after <fall> or <rise> checks here.
 * Returns how many changed.
 */
uint32_t hlb_pool_resync(struct hlb_pool *p, const char *text);
/* The HLB_HANDOVER_TOTALS and HLB_HANDOVER_SERVICE_TOTALS lines of <p>'s services and
 * configured backends onto <o>, for an upgrade in place's new process to go on from. */
void hlb_pool_handover_totals(const struct hlb_pool *p, struct hlb_buf *o);
/*
 * <text>'s HLB_HANDOVER_TOTALS and HLB_HANDOVER_SERVICE_TOTALS lines (an upgrade in place's, at
 * the start and again at the resync) taken as the carried counters of the services and
 * backends of those names here, each value kept if higher already (a counter shown never goes
 * back); those of a name not here are dropped. Returns the backends and services that took
 * some.
 */
uint32_t hlb_pool_carry_totals(struct hlb_pool *p, const char *text);
/* <b>'s counters as shown (GET /metrics, /status): its own, and those carried over. */
void hlb_pool_backend_totals(const struct hlb_pool_backend *b, struct hlb_pool_totals *ret);
/* <s>'s counters as shown: its own, and those carried over. */
void hlb_pool_service_totals(const struct hlb_pool_service *s, struct hlb_service_counters *ret);
/*
 * Close <b>'s connections, established or connecting now (hashlb ctl
 * close): the workers close them within about 100 ms, end=closed; the
 * backend keeps its state and takes new clients as before. Logged; returns
 * how many were established.
 */
uint64_t hlb_pool_close_connections(struct hlb_pool_backend *b);

/* Whether <b> is ready and healthy: it could take clients (a backup may
 * still be kept out of the table, and weight 0 takes none). */
bool hlb_pool_backend_up(const struct hlb_pool_backend *b);
/* Whether <b>'s health is the forwarder's connects alone, for a hold (hlb_health_params'
 * passive_hold_ms): passive-only health applies to its service (hashlb_service_passive_only():
 * checks off, passive on, not its only backend), and it is not in maint. */
bool hlb_pool_backend_passive_only(const struct hlb_pool_backend *b);

/* The ms left of <b>'s hold of passive-only health at <now_ms> (hlb_now_ms()); 0: not held. */
uint64_t hlb_pool_backend_hold_left_ms(const struct hlb_pool_backend *b, uint64_t now_ms);
/* Whether <b>'s health is checked: its service checks, and it is not in maint. */
bool hlb_pool_backend_checked(const struct hlb_pool_backend *b);
/* Whether backend <idx> of <snap> takes new clients: in its table, not
 * down (a standby backup is), weight above 0. */
bool hlb_pool_takes_clients(const struct hlb_snapshot *snap, uint32_t idx);
/* How many backends of <s>'s published snapshot take new clients. */
uint32_t hlb_pool_takes_clients_count(const struct hlb_pool_service *s);
/*
 * Backend <idx>'s share of <s>'s published table (hashlb_table_share()): 0 past its
 * backends. Every backend's is computed at the first call for a table, in one pass over it,
 * and kept until another is published: a scrape of thousands of services at 65,537 slots
 * walks no table that has not changed since the one before.
 */
double hlb_pool_service_share(struct hlb_pool_service *s, uint32_t idx);
/* <b>, removed by a reload, drains until this (hlb_now_ms()): its runtime's drain_until_ms,
 * which the workers read too; 0 if not removed; UINT64_MAX until its last connection ends,
 * for a timeouts.drain of never (hashlb_drain_end()). */
static inline uint64_t hlb_pool_backend_drain_deadline(const struct hlb_pool_backend *b)
{
	return atomic_load_explicit(&b->rt->drain_until_ms, memory_order_relaxed);
}

/* The service's published snapshot (control thread: no reclamation race). */
static inline const struct hlb_snapshot *hlb_pool_snapshot(const struct hlb_pool_service *s)
{
	return hlb_service_snapshot(s->rt);
}

/*
 * A worker saw a backend start failing connects (hlb_daemon_hooks.failing):
 * a Maglev service with a failing backend that its retry table does not
 * have down yet builds one now (or at the end of its gap between builds),
 * not at the next tick; a service with passive-only health has its
 * backends visited by the ticks again, which count the run. One scan of
 * the backends per call.
 */
void hlb_pool_failing(struct hlb_pool *p);

/* Build and publish every dirty service now (tests, benchmarks). */
void hlb_pool_flush(struct hlb_pool *p);

/* What the tables a reload rebuilt moved (hlb_pool_flush_reload()). */
struct hlb_pool_moved {
	uint32_t tables; /* services whose table the reload rebuilt */
	double most; /* the largest share of a service's clients moved, 0..1 */
	char most_service[128]; /* its service, "" if none */
	bool by_resolve; /* hlb_pool_flush_resolve()'s, its lines a resolve_every round's */
};

/*
 * hlb_pool_flush() right after hlb_pool_apply(): each service the reload updated and
 * rebuilds says, in a line of its own (msg="reload: clients moved" service=S moved=F),
 * the share of its clients that the table published sends to another server than the
 * table in use before (another backend, or its own at a new address: hashlb_table_moved(),
 * health included; with a new seed, hash key, prefix, accept_proxy, or a listen address
 * the 4-tuple key hashes, the share two independent placements give, said
 * placed_anew=WHAT), counted into <ret_moved> (may be NULL). Past HLB_POOL_CHANGE_LINES
 * such lines, one more counts the others and names the most of all.
 */
void hlb_pool_flush_reload(struct hlb_pool *p, struct hlb_pool_moved *ret_moved);
/*
 * The same after hlb_pool_apply() of a resolve_every round whose names moved backends, its
 * lines msg="resolve: clients moved" service=S moved=F (a backend at a new address moves its
 * clients to another server).
 */
void hlb_pool_flush_resolve(struct hlb_pool *p, struct hlb_pool_moved *ret_moved);

/* Feed a health result as the checker does, through its callback: the verdict, counters
 * (checks_ok, checks_failed) and log of a check's (tests, benchmarks). */
void hlb_pool_health_result(struct hlb_pool_backend *b, bool ok);

#endif
