/* SPDX-License-Identifier: MIT */
/*
 * The pool: every service's backends with their admin state, weight and
 * health, and the rebuild-and-publish machinery. Control thread only.
 *
 * Each service keeps a "base" table, the full build over its backends and
 * their current weights with none down. A change of health or admin state
 * rebuilds with hashlb_table_with_down(base, down) (one survivor build and a
 * copy; only the changed backend's clients move); a change of weights,
 * membership, scheme or parameters rebuilds the base first. Changes are
 * coalesced: the first one schedules a build HLB_POOL_DEBOUNCE_MS later,
 * and builds of a service are at least HLB_POOL_MIN_GAP_MS apart, so a burst
 * of changes (a switch dying under 100 backends) costs one build.
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
#include "runtime/runtime.h"

#include "check.h"
#include "health.h"
#include "loop.h"

#define HLB_POOL_DEBOUNCE_MS 5
#define HLB_POOL_MIN_GAP_MS 20
#define HLB_POOL_TICK_MS 50 /* passive failures, flap decay, slow start */

struct hlb_pool;
struct hlb_pool_service;

struct hlb_pool_backend {
	struct hlb_pool_service *svc;
	struct hlb_backend *rt; /* one reference */
	char *address; /* as configured */
	uint32_t cfg_weight; /* from the config, to tell a reload's change from ours */
	enum hashlb_admin_state cfg_admin;
	enum hashlb_admin_state admin; /* current */
	struct hlb_health health;
	struct hlb_check check;
	uint64_t checks_ok, checks_failed;
	uint64_t check_latency_ns; /* last passed check's connect time */
	uint64_t seen_connect_fail; /* data plane counter at the last tick */
	uint64_t ramp_start_ms; /* slow start began; 0 = not ramping */
	uint64_t drain_deadline_ms; /* removed by a reload: drop after this */
};

struct hlb_pool_service {
	struct hlb_pool *pool;
	struct hlb_service *rt;
	const struct hashlb_service_cfg *cfg; /* borrowed from the pool's config */
	struct hlb_pool_backend **backends; /* table order */
	uint32_t n_backends;
	struct hlb_pool_backend **removed; /* draining after a reload */
	uint32_t n_removed;
	struct hlb_health_params hp;
	struct hashlb_table *base; /* full table, none down */
	bool dirty, need_full;
	struct hlb_timer build_timer;
	uint64_t last_build_ms;
	uint64_t generation;
	uint64_t rebuilds, rebuilds_failed;
	uint64_t rebuild_ns_last, rebuild_ns_total, rebuild_ns_max;
	struct hashlb_error last_error; /* of the last failed build */
};

/* Called on the control thread after each publish, e.g. kernel steering. */
typedef void (*hlb_publish_fn)(void *arg, struct hlb_service *svc, const struct hlb_snapshot *snap);

/* What the data plane must do when a reload adds or removes a service. */
struct hlb_pool_hooks {
	/* A new service (also each one at hlb_pool_new()): open its listeners. */
	int (*service_added)(void *arg, struct hlb_service *svc);
	/* A service is gone: close its listeners; the pool drops its reference. */
	void (*service_removed)(void *arg, struct hlb_service *svc);
	/* Its listen address changed: reopen (svc->cfg is the new one). */
	int (*service_relisten)(void *arg, struct hlb_service *svc);
	void *arg;
};

/*
 * Create the pool for <cfg> (which it borrows until hlb_pool_apply() hands
 * it a new one; the caller keeps it alive) and publish every service's first
 * snapshot; health checks start on <loop>. <rcu> may be NULL when no worker
 * reads the snapshots (tests): old snapshots are then freed at once.
 */
int hlb_pool_new(const struct hashlb_config *cfg, struct hlb_loop *loop, struct hlb_rcu *rcu,
		 const struct hlb_pool_hooks *hooks, struct hlb_pool **ret_pool,
		 struct hashlb_error *err);
void hlb_pool_free(struct hlb_pool *p);

int hlb_pool_subscribe(struct hlb_pool *p, hlb_publish_fn fn, void *arg);

/*
 * Apply a new, already validated config: services and backends are matched
 * by name; new ones are added (backends with slow start), removed backends
 * drain, changed ones are updated. <cfg> is borrowed from now on; the
 * previous one may be freed once this returns 0. On failure nothing changed.
 */
int hlb_pool_apply(struct hlb_pool *p, const struct hashlb_config *cfg, struct hashlb_error *err);

uint32_t hlb_pool_service_count(const struct hlb_pool *p);
struct hlb_pool_service *hlb_pool_service_at(struct hlb_pool *p, uint32_t i);
struct hlb_pool_service *hlb_pool_service_find(struct hlb_pool *p, const char *name);
struct hlb_pool_backend *hlb_pool_backend_find(struct hlb_pool_service *s, const char *name);

/* Admin commands. -EINVAL for a bad value. Take effect with the next build. */
int hlb_pool_set_admin(struct hlb_pool_backend *b, enum hashlb_admin_state st);
int hlb_pool_set_weight(struct hlb_pool_backend *b, uint32_t weight);

/* Whether <b> takes new clients in the current table. */
bool hlb_pool_backend_up(const struct hlb_pool_backend *b);
/* The service's published snapshot (control thread: no reclamation race). */
const struct hlb_snapshot *hlb_pool_snapshot(const struct hlb_pool_service *s);

/* Build and publish every dirty service now (tests, benchmarks). */
void hlb_pool_flush(struct hlb_pool *p);

/* Feed a health result as the checker would (tests). */
void hlb_pool_health_result(struct hlb_pool_backend *b, bool ok);

#endif
