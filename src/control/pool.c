// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <xxhash.h>

#include "hashlb/grow.h"
#include "balance.h"
#include "config/name_pair.h"
#include "pool.h"
#include "runtime/clients.h"
#include "runtime/fdpass.h"
#include "runtime/log.h"

/* A backend's address quoted whole: "[host]:port", the host a name of HASHLB_HOST_MAX bytes at
 * most */
#define POOL_ADDRESS_QUOTED HLB_LOG_QUOTED_MAX(HASHLB_HOST_MAX + sizeof("[]:65535"))
/* a backend's name as a log value: it may hold a backslash and UTF-8, which logfmt quotes */
#define POOL_NAME_QUOTED HLB_LOG_QUOTED_MAX(HASHLB_NAME_MAX)

struct subscriber {
	hlb_publish_fn fn;
	void *arg;
};

/*
 * A service a reload removed, until nothing else holds it: its counters (<rt>) and
 * its backends' (<bes>), one reference each, and the bytes of its backends freed before,
 * for the totals it logs then (pool_reap_retired()); or until a reload adding it back
 * within its drain timeout takes it back, totals and all (retired_taken_back()).
 */
struct retired {
	char *name;
	struct hlb_service *rt;
	struct hlb_backend **bes;
	uint32_t n_bes;
	uint64_t gone_in, gone_out;
	/* the counters an upgrade in place carried to it, which a reload adding it back takes
	 * back with <rt>'s: without them its series would go back by as much */
	struct hlb_service_counters carried;
	struct hlb_backend_counters gone_carried; /* its backends' that went, the same way */
	/* its timeouts.drain ends: until then a reload adding it back takes its backends back,
	 * their bytes with them, so its totals wait for it (pool_reap_retired()) */
	uint64_t deadline_ms;
};

struct hlb_pool {
	const struct hashlb_config *cfg;
	struct hlb_loop *loop;
	struct hlb_pool_env env;
	uint64_t generation; /* without env.next_generation */
	struct hlb_pool_service **svcs;
	uint32_t n_svcs;
	/* <svcs> sorted by name (services_index()): what hlb_pool_service_find() and a
	 * reload's matching search, in log n (a scan for each was quadratic in services) */
	struct name_idx *by_name;
	struct subscriber *subs;
	uint32_t n_subs;
	struct hlb_timer tick;
	uint64_t ticks; /* pool_tick() runs */
	/* the backends of services a reload removed (or renamed), draining
	 * until their service's timeouts.drain as a removed backend does */
	struct hlb_pool_backend **orphans;
	uint32_t n_orphans;
	/* during hlb_pool_apply()'s services: those orphans of a service (orphan_of), sorted by
	 * it and by name, for orphan_take(); NULL otherwise */
	struct hlb_pool_backend **orphans_sorted;
	uint32_t n_orphans_sorted;
	struct retired *retired; /* those services, until their totals are logged */
	uint32_t n_retired;
	/* env.handover parsed, sorted by service and backend (hlb_pool_new()); its
	 * HLB_HANDOVER_SEEN backends, sorted the same way */
	struct handover *ho;
	size_t n_ho;
	struct handover_backend *ho_seen;
	size_t n_ho_seen;
	/* errs_budget(): the lines of this second on checks that change no health ("another
	 * error", "backend still up"...), and those not logged since the last one that was */
	uint64_t errs_second_ms;
	uint32_t errs_in_second;
	uint64_t errs_unlogged;
	/* during hlb_pool_apply(): what it changed, if its caller asks (else NULL), and the
	 * lines it wrote about it and left out (HLB_POOL_CHANGE_LINES) */
	struct hlb_pool_changes *changes;
	uint32_t change_lines, changes_unlogged;
	/* during hlb_pool_flush_reload() and hlb_pool_flush_resolve(): what the rebuilds moved
	 * (and which of them), NULL otherwise */
	struct hlb_pool_moved *moved;
};

static void service_schedule(struct hlb_pool_service *s, bool full);
static void service_schedule_in(struct hlb_pool_service *s, bool full, uint64_t debounce_ms);
static bool retry_watch(struct hlb_pool_service *s, uint32_t j, uint64_t debounce_ms);
static void retry_release(struct hlb_pool_backend *b);
static bool verdict_populates(const struct hlb_pool_backend *b);
static bool service_failing(struct hlb_pool_service *s);

static void pool_log(struct hlb_pool *p, enum hlb_log_level level, const char *msg, const char *fmt,
		     ...) __attribute__((format(printf, 4, 5)));

static void pool_log(struct hlb_pool *p, enum hlb_log_level level, const char *msg, const char *fmt,
		     ...)
{
	va_list ap;

	if (!p->env.log)
		return;
	va_start(ap, fmt);
	hlb_log_vto(p->env.log, p->env.arg, level, msg, fmt, ap);
	va_end(ap);
}

/* <b>'s name for a log line's backend=, in <q> (POOL_NAME_QUOTED bytes) */
static const char *backend_qname(const struct hlb_pool_backend *b, char *q)
{
	return hlb_log_quote(b->rt->name, q, POOL_NAME_QUOTED);
}

/* ---- backends ---- */

/* <b>, removed by a reload, drains until <ms> (hlb_now_ms()); 0: taken back. The workers read
 * it too: a stop's drain closes its connections then, not at its service's deadline. */
static void backend_drain_until(struct hlb_pool_backend *b, uint64_t ms)
{
	atomic_store(&b->rt->drain_until_ms, ms);
}

bool hlb_pool_backend_checked(const struct hlb_pool_backend *b)
{
	return b->svc->cfg->health.enabled && b->admin != HASHLB_ADMIN_MAINT;
}

bool hlb_pool_backend_passive_only(const struct hlb_pool_backend *b)
{
	return b->svc->hp.passive_hold_ms && b->admin != HASHLB_ADMIN_MAINT;
}

uint64_t hlb_pool_backend_hold_left_ms(const struct hlb_pool_backend *b, uint64_t now_ms)
{
	uint64_t until = b->health.hold_until_ms;

	/* one that checks turned on since is held no more, though its tick has yet to say so */
	if (!b->svc || !b->svc->hp.passive_hold_ms || until <= now_ms)
		return 0;
	return until - now_ms;
}

bool hlb_pool_backend_up(const struct hlb_pool_backend *b)
{
	return b->admin == HASHLB_ADMIN_READY && b->health.up;
}

/* Whether <b> takes new clients: ready and up, with a weight above 0 (a backup too: with
 * every primary out, it does). */
static bool backend_takes_clients(const struct hlb_pool_backend *b)
{
	return hlb_pool_backend_up(b) && b->rt->weight;
}

bool hlb_pool_takes_clients(const struct hlb_snapshot *snap, uint32_t idx)
{
	return snap && idx < snap->n_backends &&
	       hashlb_table_backend_takes_clients(snap->table, idx);
}

uint32_t hlb_pool_takes_clients_count(const struct hlb_pool_service *s)
{
	const struct hlb_snapshot *snap = hlb_pool_snapshot(s);
	uint32_t n = 0;

	for (uint32_t j = 0; j < s->n_backends; j++)
		n += hlb_pool_takes_clients(snap, j);
	return n;
}

double hlb_pool_service_share(struct hlb_pool_service *s, uint32_t idx)
{
	const struct hlb_snapshot *snap = hlb_pool_snapshot(s);
	uint32_t n = hashlb_table_backend_count(snap->table);

	if (idx >= n)
		return 0.0;
	if (!s->shares || s->shares_gen != snap->generation) {
		double *v = n > s->n_shares || !s->shares ? malloc(n * sizeof(*v)) : s->shares;

		if (!v) /* out of memory: the slow way, a pass for this one */
			return hashlb_table_share(snap->table, idx);
		if (v != s->shares) {
			free(s->shares);
			s->shares = v;
		}
		hashlb_table_shares(snap->table, v);
		s->n_shares = n;
		s->shares_gen = snap->generation;
	}
	return s->shares[idx];
}

/* What clients of <s> waiting in the workers' queues are retried on changed
 * (hlb_pool_env.queue_kick). */
static void pool_queue_kick(struct hlb_pool_service *s)
{
	hlb_service_queue_changed(s->rt);
	if (s->pool->env.queue_kick)
		s->pool->env.queue_kick(s->pool->env.arg, s->rt);
}

/* Start <b>'s slow start at <now>, <elapsed> ms into it (0 but for a ramp the hashlb this one
 * replaces had under way: an upgrade changes no client's lot). */
static void backend_ramp_start(struct hlb_pool_backend *b, uint64_t now, uint64_t elapsed)
{
	uint64_t slow = b->svc->cfg->slow_start_ms;

	if (!slow || elapsed >= slow) {
		atomic_store(&b->rt->admit, HLB_ADMIT_ONE);
		b->ramp_start_ms = 0;
		return;
	}
	atomic_store(&b->rt->admit, (uint32_t)(elapsed * HLB_ADMIT_ONE / slow));
	b->ramp_start_ms = now > elapsed ? now - elapsed : 1;
	b->svc->tick_all = true; /* its ramp goes on at each tick */
}

/*
 * <b> may take clients again at <now> after a while it took no new one, though up: its weight
 * raised from 0, or its state from drain to ready. Its share of the table comes back as that
 * of a backend a reload adds, in slow start; one that is not ready and up ramps when it
 * becomes so (leaving maint, its checks passing).
 */
static void backend_returns(struct hlb_pool_backend *b, uint64_t now)
{
	if (backend_takes_clients(b))
		backend_ramp_start(b, now, 0);
	/* passive-only: a run of failures begun before (drained midway) goes on, and no worker
	 * wakes the control thread for it (only a run's first does): the ticks follow it again */
	if (b->svc->hp.passive_hold_ms)
		b->svc->tick_all = true;
}

/* <b>'s verdict for the workers; connects started before it no longer count
 * toward its passive health (health_since_ns). */
static void backend_set_healthy(struct hlb_pool_backend *b, bool up)
{
	atomic_store(&b->rt->health_since_ns, hlb_now_ns());
	atomic_store(&b->rt->healthy, up);
}

/* A check's error for hlb_check_errs: (1 + <where>, an hlb_check_at or _skip) << 16 | <err>. */
static uint32_t err_code(unsigned where, int err)
{
	return (uint32_t)(where + 1) << 16 | ((uint32_t)err & 0xffff);
}

/* errno <err>'s name ("ECONNREFUSED"), "unknown" for a number glibc has no name for */
static const char *err_name(int err)
{
	const char *name = strerrorname_np(err);

	return name ? name : "unknown";
}

/* Room for check_reply_text()'s " reply=..." */
#define CHECK_REPLY_TEXT_MAX (8 + HLB_LOG_QUOTED_MAX(HLB_CHECK_REPLY_MAX))

/* " at=WHERE err=ERRNO" of a failed check's err_code() <e>, or "" for 0; <buf> holds it. */
static const char *check_err_text(uint32_t e, char *buf, size_t size)
{
	if (!e)
		return "";
	snprintf(buf, size, " at=%s err=%s", hlb_check_at_name((enum hlb_check_at)((e >> 16) - 1)),
		 err_name((int)(e & 0xffff)));
	return buf;
}

/*
 * " reply=..." when <b>'s last check failed as err_code() <e> says, on an answer that differs
 * from expect: how it began instead (hlb_check.reply); else "". <buf> holds it.
 */
static const char *check_reply_text(const struct hlb_pool_backend *b, uint32_t e, char *buf,
				    size_t size)
{
	char q[HLB_LOG_QUOTED_MAX(HLB_CHECK_REPLY_MAX)];

	if ((e & 0xffff) != EBADMSG || b->check.failed_err != EBADMSG)
		return "";
	snprintf(buf, size, " reply=%s",
		 hlb_log_quote_n(b->check.reply, b->check.reply_len, q, sizeof(q)));
	return buf;
}

/*
 * <cause>: what decided it, "checks", "passive" (the forwarder's connects) or
 * "damping"; <err>: the err_code() of the check that took it down (0: none),
 * the first error of the episode its later checks' errors are logged against.
 * Taken down otherwise than by a check, the episode starts from the last
 * failed check of the run before it, if any: the line "health check failed,
 * backend still up" said that error, and the next check failing the same
 * way is no "another error".
 */
static void backend_health_changed(struct hlb_pool_backend *b, uint64_t now, const char *cause,
				   uint32_t err)
{
	char qn[POOL_NAME_QUOTED];
	char why[64], reply[CHECK_REPLY_TEXT_MAX], hold[32] = "";

	if (!b->health.up && b->health.hold_until_ms)
		snprintf(hold, sizeof(hold), " hold_ms=%" PRIu32, b->health.hold_ms);
	if (!b->health.up)
		hlb_check_errs_start(&b->check_errs, err || !b->up_fails ? err : b->up_fails_err,
				     now);
	b->up_fails = 0; /* its "backend down" line ends their episode */
	b->up_fails_logged = false;
	pool_log(b->svc->pool, b->health.up ? HLB_LOG_INFO : HLB_LOG_ERROR,
		 b->health.up ? "backend up" : "backend down",
		 "service=%s backend=%s cause=%s flaps=%" PRIu64 "%s%s%s%s", b->svc->cfg->name,
		 backend_qname(b, qn), cause, b->health.flaps,
		 b->health.suppressed ? " suppressed=flapping" : "",
		 check_err_text(b->health.up ? 0 : err, why, sizeof(why)),
		 b->health.up ? "" : check_reply_text(b, err, reply, sizeof(reply)), hold);
	backend_set_healthy(b, b->health.up);
	if (b->health.up)
		backend_ramp_start(b, now, 0);
	b->close_pending = !b->health.up && b->svc->cfg->health.close_on_down;
	service_schedule(b->svc, false);
}

/*
 * Whether a line on checks that change no health may be logged now: an "another error" one
 * (a backend's failing checks, a service's skipped ones), or a backend's check failed or
 * passed again while it stays up. Each backend and service logs one per change of error, or
 * one per check at most, but thousands of backends whose errors flap, or whose checks fail
 * now and then, would still log thousands a second; the pool logs at most
 * HLB_CHECK_ERRS_PER_S of them a second. <must>: logged whatever the count, and counted (the
 * end of a run whose start was logged: no run is left open in the log). *<ret_unlogged>:
 * the lines not logged since the last one that was, for it to say.
 */
static bool errs_budget(struct hlb_pool *p, uint64_t now, bool must, uint64_t *ret_unlogged)
{
	if (now - p->errs_second_ms >= 1000) {
		p->errs_second_ms = now;
		p->errs_in_second = 0;
	}
	if (p->errs_in_second >= HLB_CHECK_ERRS_PER_S && !must) {
		p->errs_unlogged++;
		return false;
	}
	p->errs_in_second++;
	*ret_unlogged = p->errs_unlogged;
	p->errs_unlogged = 0;
	return true;
}

/* " unlogged=N" for errs_budget()'s <n>, "" for 0; <buf> holds it. */
static const char *unlogged_text(uint64_t n, char *buf, size_t size)
{
	if (!n)
		return "";
	snprintf(buf, size, " unlogged=%" PRIu64, n);
	return buf;
}

/* " passive=N" for a run of failures <n> of which the forwarder's connects saw, "" for 0 */
static const char *passive_text(uint32_t n, char *buf, size_t size)
{
	if (!n)
		return "";
	snprintf(buf, size, " passive=%" PRIu32, n);
	return buf;
}

/*
 * The end of <b>'s run of checks failed while up, if it has one: <reason> NULL for a check
 * that passed ("health check passed, backend stayed up"), else why its checks stop without a
 * verdict ("health check run ended", reason= "maint", "reload" or "stop"); <run>, <passive>:
 * the run (and of it, the forwarder's failed connects). Logged whenever a failure of the run
 * was (errs_budget()'s <must>), so that no run is left open in the log; a run that reaches
 * fall ends in the "backend down" line instead (backend_health_changed()).
 */
static void backend_up_run_end(struct hlb_pool_backend *b, const char *reason, uint32_t run,
			       uint32_t passive, uint64_t now)
{
	char qn[POOL_NAME_QUOTED];
	char why[32] = "", pas[32], more[32];
	bool logged = b->up_fails_logged;
	uint64_t unlogged;

	if (!b->up_fails)
		return; /* no failed check in its run: the forwarder's connects alone */
	b->up_fails = 0;
	b->up_fails_logged = false;
	if (!errs_budget(b->svc->pool, now, logged, &unlogged))
		return;
	if (reason)
		snprintf(why, sizeof(why), " reason=%s", reason);
	pool_log(b->svc->pool, HLB_LOG_INFO,
		 reason ? "health check run ended" : "health check passed, backend stayed up",
		 "service=%s backend=%s%s failed=%" PRIu32 " fall=%" PRIu32 "%s%s",
		 b->svc->cfg->name, backend_qname(b, qn), why, run, b->svc->hp.fall,
		 passive_text(passive, pas, sizeof(pas)),
		 unlogged_text(unlogged, more, sizeof(more)));
}

/* <b>'s checks stop, for <reason> (backend_up_run_end()): its run of failures ends with them. */
static void backend_up_run_stop(struct hlb_pool_backend *b, const char *reason, uint64_t now)
{
	backend_up_run_end(b, reason, b->health.fail_run, b->health.passive_run, now);
}

/*
 * A check of <b>, up before it and after: a failed one is logged with the run of failures
 * toward fall it makes (HAProxy's "option log-health-checks"), and a passed one that ends
 * such a run says so, the episode over; <run>, <passive>: the run (and of it, the
 * forwarder's failed connects) before this check. A backend failing one check in three
 * would otherwise be seen in no line until it went down. All under errs_budget(), the end
 * logged whenever a failure of its run was.
 */
static void backend_check_while_up(struct hlb_pool_backend *b, bool ok, uint32_t err, uint32_t run,
				   uint32_t passive, uint64_t now)
{
	char qn[POOL_NAME_QUOTED];
	const struct hlb_health *h = &b->health;
	char why[64], pas[32], more[32], reply[CHECK_REPLY_TEXT_MAX];
	uint64_t unlogged;

	if (ok) {
		bool ran = b->up_fails != 0 && b->up_fails_retry;

		backend_up_run_end(b, NULL, run, passive, now);
		if (ran)
			retry_release(b);
		return;
	}
	if (!b->up_fails++) {
		/* the scheme first: a ring's checks pay no walk of the backends (a rack of 20,000
		 * failing their first checks walked them 20,000 times, 1.2 s of this thread) */
		b->up_fails_retry = false;
		b->up_fails_retry = b->svc->cfg->table.scheme == HASHLB_SCHEME_MAGLEV &&
				    !service_failing(b->svc) && verdict_populates(b);
	}
	b->up_fails_err = err;
	/* Maglev: its survivors' table made now, as the retry table, for the verdict to copy
	 * (retry_watch()); watched by the ticks until the tables have it down */
	if (retry_watch(b->svc, b->idx, HLB_POOL_DEBOUNCE_MS))
		b->svc->tick_all = true;
	if (!errs_budget(b->svc->pool, now, false, &unlogged))
		return;
	b->up_fails_logged = true;
	pool_log(b->svc->pool, HLB_LOG_WARN, "health check failed, backend still up",
		 "service=%s backend=%s%s failed=%" PRIu32 " fall=%" PRIu32 "%s%s%s",
		 b->svc->cfg->name, backend_qname(b, qn), check_err_text(err, why, sizeof(why)),
		 h->fail_run, b->svc->hp.fall, passive_text(h->passive_run, pas, sizeof(pas)),
		 unlogged_text(unlogged, more, sizeof(more)),
		 check_reply_text(b, err, reply, sizeof(reply)));
}

/* A check's result; <err>: a failed one's err_code(). */
static void backend_check_result(struct hlb_pool_backend *b, bool ok, uint32_t err)
{
	char qn[POOL_NAME_QUOTED];
	uint64_t now = hlb_now_ms(), unlogged;
	uint32_t was, changes, run = b->health.fail_run, passive = b->health.passive_run;
	char now_err[64], was_err[64], more[32], reply[CHECK_REPLY_TEXT_MAX];

	if (hlb_health_check(&b->health, &b->svc->hp, ok, now)) {
		backend_health_changed(b, now, "checks", ok ? 0 : err);
		return;
	}
	if (b->health.up) {
		backend_check_while_up(b, ok, err, run, passive, now);
		return;
	}
	/* still down: a check failing otherwise than the log last said says so */
	if (ok || !hlb_check_errs_note(&b->check_errs, err, now, &was, &changes) ||
	    !errs_budget(b->svc->pool, now, false, &unlogged))
		return;
	pool_log(b->svc->pool, HLB_LOG_WARN, "health checks still failing, another error",
		 "service=%s backend=%s%s was=\"%s\" changes=%" PRIu32 "%s%s", b->svc->cfg->name,
		 backend_qname(b, qn), check_err_text(err, now_err, sizeof(now_err)),
		 was ? check_err_text(was, was_err, sizeof(was_err)) + 1 : "none", changes,
		 unlogged_text(unlogged, more, sizeof(more)),
		 check_reply_text(b, err, reply, sizeof(reply)));
}

/*
 * A check of <b> was not made for a fault of ours: the source address gone
 * from the host (EADDRNOTAVAIL at its bind), no fd, no local port. The
 * backend's health stays as it is: the fault says nothing of it, and the
 * forwarder's connects, failing the same way, count against no backend
 * either. Said once for the service as the first check is skipped (one
 * line, not one per check of each of its backends), and again when checks
 * are made with none skipped for an interval (service_checks_made()).
 */
static void backend_check_renew(struct hlb_pool_backend *b);

static void backend_check_skipped(void *arg, enum hlb_check_skip at, int err)
{
	char qn[POOL_NAME_QUOTED];
	struct hlb_pool_backend *b = arg;
	struct hlb_pool_service *s = b->svc;
	char src[INET6_ADDRSTRLEN] = "none", more[32];
	uint32_t e = err_code(at, err), was, changes;
	uint64_t unlogged = 0;

	backend_check_renew(b);
	b->checks_skipped++;
	s->skips++;
	s->skip_last_ms = hlb_now_ms();
	if (s->skipping &&
	    (!hlb_check_errs_note(&s->skip_errs, e, s->skip_last_ms, &was, &changes) ||
	     !errs_budget(s->pool, s->skip_last_ms, false, &unlogged)))
		return; /* the episode goes on: logged once per change of fault, bounded */
	if (s->cfg->source_len)
		getnameinfo((const struct sockaddr *)&s->cfg->source, s->cfg->source_len, src,
			    sizeof(src), NULL, 0, NI_NUMERICHOST);
	if (!s->skipping) {
		s->skipping = true;
		hlb_check_errs_start(&s->skip_errs, e, s->skip_last_ms);
		pool_log(s->pool, HLB_LOG_WARN, "health checks skipped, health kept",
			 "service=%s backend=%s at=%s source=%s err=%s", s->cfg->name,
			 backend_qname(b, qn), hlb_check_skip_name(at), src, err_name(err));
		return;
	}
	pool_log(s->pool, HLB_LOG_WARN, "health checks still skipped, another error",
		 "service=%s backend=%s at=%s source=%s err=%s was=\"at=%s err=%s\" "
		 "changes=%" PRIu32 "%s",
		 s->cfg->name, backend_qname(b, qn), hlb_check_skip_name(at), src, err_name(err),
		 hlb_check_skip_name((enum hlb_check_skip)((was >> 16) - 1)),
		 err_name((int)(was & 0xffff)), changes,
		 unlogged_text(unlogged, more, sizeof(more)));
}

/* A check of <s> was made: the end of a run of skipped ones, if none was for an interval. */
static void service_checks_made(struct hlb_pool_service *s)
{
	if (!s->skipping || hlb_now_ms() - s->skip_last_ms < s->cfg->health.interval_ms)
		return;
	pool_log(s->pool, HLB_LOG_INFO, "health checks made again", "service=%s skipped=%" PRIu64,
		 s->cfg->name, s->skips);
	s->skipping = false;
	s->skips = 0;
}

static void backend_check_done(void *arg, bool ok, uint64_t latency_ns)
{
	struct hlb_pool_backend *b = arg;

	service_checks_made(b->svc);
	if (ok) {
		b->checks_ok++;
		b->check_latency_ns = latency_ns;
		b->check_latency_old = false;
	} else {
		b->checks_failed++;
	}
	backend_check_result(b, ok, ok ? 0 : err_code(b->check.failed_at, b->check.failed_err));
	backend_check_renew(b);
}

/* Through the checker's callback, as a check reports (a failure as a refused connect). */
void hlb_pool_health_result(struct hlb_pool_backend *b, bool ok)
{
	b->check.failed_at = HLB_CHECK_AT_CONNECT;
	b->check.failed_err = ECONNREFUSED;
	backend_check_done(b, ok, 0);
}

static void backend_check_start(struct hlb_pool_backend *b, uint64_t first_ms)
{
	const struct hashlb_health_cfg *h = &b->svc->cfg->health;

	hlb_check_stop(&b->check);
	b->check_renew = false;
	if (!hlb_pool_backend_checked(b)) {
		b->check_latency_old = true;
		return;
	}
	hlb_check_init(&b->check, (const struct sockaddr *)&b->rt->addr, b->rt->addr_len,
		       h->interval_ms, h->timeout_ms, backend_check_done, b);
	b->check.skipped = backend_check_skipped;
	if (h->port) {
		/* the same host, its health endpoint: it expects no PROXY header */
		if (b->check.addr.ss_family == AF_INET)
			((struct sockaddr_in *)&b->check.addr)->sin_port = htons(h->port);
		else
			((struct sockaddr_in6 *)&b->check.addr)->sin6_port = htons(h->port);
	} else {
		b->check.proxy = (uint8_t)b->svc->cfg->proxy_protocol;
	}
	b->check.source = b->svc->cfg->source;
	b->check.source_len = b->svc->cfg->source_len;
	/* out of memory: a connect-only check rather than none */
	(void)hlb_check_set_payload(&b->check, h->send, h->send_len, h->expect, h->expect_len);
	hlb_check_start(&b->check, b->svc->pool->loop, first_ms);
}

/*
 * Start <b>'s checks from <now> at its place in the spread of its service's
 * pool over the interval (hlb_check_phase(): member b->idx of the config's
 * n_backends), shifted by a hash of the service's name so that the pools of
 * different services do not line up. At start, after a reload that restarts
 * checks and leaving maint alike: 1,000 backends set ready at once check
 * over an interval, never in a burst of 1,000 connects.
 */
static uint64_t backend_check_first(struct hlb_pool_backend *b, uint64_t now)
{
	const struct hashlb_service_cfg *c = b->svc->cfg;
	uint64_t salt = XXH64(c->name, strlen(c->name), 0);
	uint64_t first = now + hlb_check_phase(c->health.interval_ms, b->idx, c->n_backends, salt);

	/* Checks already made (a reload that changes them): the next at its time if sooner, the
	 * slot after one in flight (which the restart aborts: a burst of those at once would
	 * spread no more). Put off to their place from each reload, reloads every 50 ms checked
	 * a backend of a 300 ms interval never. */
	if (b->check.loop) {
		uint64_t next = b->check.next_ms > now ? b->check.next_ms
						       : b->check.next_ms + b->check.interval_ms;

		if (next < first)
			first = next > now ? next : now;
	}
	return first;
}

static void backend_check_spread(struct hlb_pool_backend *b, uint64_t now)
{
	backend_check_start(b, backend_check_first(b, now));
}

/* The check under way when a reload changed the exchange has reported (or was skipped): the
 * checks go on with the config's exchange, the next at the slot it was given. */
static void backend_check_renew(struct hlb_pool_backend *b)
{
	if (b->check_renew && hlb_check_running(&b->check) && !hlb_check_busy(&b->check))
		backend_check_start(b, b->check.next_ms);
}

/* A reload changed only the timing of <b>'s checks (interval, timeout): a check in flight
 * finishes (hlb_check_retime()), the next at backend_check_first()'s time. */
static void backend_check_retime(struct hlb_pool_backend *b, uint64_t now)
{
	const struct hashlb_health_cfg *h = &b->svc->cfg->health;

	hlb_check_retime(&b->check, h->interval_ms, h->timeout_ms, backend_check_first(b, now));
}

static void backend_free(struct hlb_pool_backend *b)
{
	if (!b)
		return;
	hlb_check_stop(&b->check);
	hlb_backend_unref(b->rt);
	free(b->orphan_of);
	free(b->carried);
	free(b);
}

static struct hlb_pool_backend *backend_new(struct hlb_pool_service *s,
					    const struct hashlb_backend_cfg *c)
{
	struct hlb_pool_backend *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->svc = s;
	if (hlb_backend_new(c, s->pool->env.n_workers, &b->rt) < 0) {
		free(b);
		return NULL;
	}
	b->check.io.fd = -1;
	b->cfg_weight = c->weight;
	b->cfg_max_conns = c->max_connections;
	b->cfg_admin = c->admin;
	b->admin = c->admin;
	atomic_store(&b->rt->admin, (int)c->admin);
	atomic_store(&b->rt->healthy, true);
	atomic_store(&b->rt->admit, HLB_ADMIT_ONE);
	hlb_health_assume_up(&b->health, hlb_now_ms());
	return b;
}

/*
 * Start <b>'s health over in state <up> (no penalty, no runs), keeping its
 * flap count: hashlb_backend_flaps_total is a counter, and a series that
 * goes back to 0 within one process reads as a reset that lost the flaps.
 * Up is only assumed, as at start (no check passed it: checks turned off,
 * or the old hashlb's word at an upgrade): its first down is no flap.
 * A run of checks failed while up is dropped unlogged: the caller ends it in
 * the log (a backend leaving maint has none; a backend checked no more ended
 * it with backend_up_run_stop(); an upgrade's verdict logs its up or down line).
 */
static void backend_health_restart(struct hlb_pool_backend *b, bool up, uint64_t now)
{
	uint64_t flaps = b->health.flaps;

	if (up)
		hlb_health_assume_up(&b->health, now);
	else
		hlb_health_init(&b->health, false, now);
	b->health.flaps = flaps;
	hlb_check_errs_start(&b->check_errs, 0, now);
	b->up_fails = 0;
	b->up_fails_logged = false;
}

int hlb_pool_set_admin(struct hlb_pool_backend *b, enum hashlb_admin_state st)
{
	enum hashlb_admin_state old = b->admin;
	uint64_t now = hlb_now_ms();

	if ((unsigned)st >= HASHLB_ADMIN_MAX)
		return -EINVAL;
	if (st == old)
		return 0;
	b->admin = st;
	atomic_store(&b->rt->admin, (int)st);
	if (old == HASHLB_ADMIN_MAINT) {
		/* Its health is unknown after maintenance: down until <rise> checks pass. */
		if (hlb_pool_backend_checked(b)) {
			backend_health_restart(b, false, now);
			backend_set_healthy(b, false);
			backend_check_spread(b, now);
		} else {
			backend_ramp_start(b, now, 0);
			/* its flap damping forgotten, as a checked one's (one held down for
			 * flapping is back once its hold is over: the next tick says it); a
			 * hold of passive-only health, if any, goes on: the operator vouched
			 * for its flapping being over, not for what its connects said */
			hlb_health_forget_damping(&b->health, now);
			b->svc->tick_all = true;
		}
	} else if (old == HASHLB_ADMIN_DRAIN && st == HASHLB_ADMIN_READY) {
		backend_returns(b, now);
	} else if (st == HASHLB_ADMIN_MAINT) {
		backend_up_run_stop(b, "maint", now);
		hlb_check_stop(&b->check);
		b->check_latency_old = true;
	}
	if (b->svc->hp.passive_hold_ms) /* the last taking clients gone: one held is released */
		b->svc->tick_all = true;
	service_schedule(b->svc, false);
	return 0;
}

void hlb_pool_set_max_connections(struct hlb_pool_backend *b, uint32_t max)
{
	/* a cap that changes may give waiting clients room; one set again to what it is, as
	 * each reload does for kernel steering, gives none */
	if (atomic_exchange(&b->rt->max_conns, max) != max)
		pool_queue_kick(b->svc);
}

int hlb_pool_set_weight(struct hlb_pool_backend *b, uint32_t weight)
{
	uint32_t was = b->rt->weight;

	if (weight > HASHLB_WEIGHT_MAX)
		return -EINVAL;
	if (weight == was)
		return 0;
	b->rt->weight = weight;
	if (!was)
		backend_returns(b, hlb_now_ms());
	if (!weight && b->svc->hp.passive_hold_ms) /* as hlb_pool_set_admin() */
		b->svc->tick_all = true;
	service_schedule(b->svc, true);
	return 0;
}

bool hlb_pool_log_set(const struct hlb_pool_backend *b, const enum hashlb_admin_state *was_state,
		      const uint32_t *was_weight, const uint32_t *was_max)
{
	char qn[POOL_NAME_QUOTED];
	char state[64] = "", weight[64] = "", max[96] = "";
	uint32_t cap = atomic_load(&b->rt->max_conns);

	if (was_state && *was_state != b->admin)
		snprintf(state, sizeof(state), " state=%s state_was=%s",
			 hashlb_admin_state_name(b->admin), hashlb_admin_state_name(*was_state));
	if (was_weight && *was_weight != b->rt->weight)
		snprintf(weight, sizeof(weight), " weight=%u weight_was=%u", b->rt->weight,
			 *was_weight);
	if (was_max && *was_max != cap)
		snprintf(max, sizeof(max), " max_connections=%u max_connections_was=%u", cap,
			 *was_max);
	if (!state[0] && !weight[0] && !max[0])
		return false;
	pool_log(b->svc->pool, HLB_LOG_INFO, "backend set", "service=%s backend=%s by=admin%s%s%s",
		 b->svc->cfg->name, backend_qname(b, qn), state, weight, max);
	return true;
}

void hlb_pool_log_set_unchanged(const struct hlb_pool_service *s, const char *name, uint32_t n)
{
	char qn[POOL_NAME_QUOTED];

	pool_log(s->pool, HLB_LOG_INFO, "backend set: nothing changed",
		 "service=%s backend=%s by=admin backends=%u", s->cfg->name,
		 hlb_log_quote(name, qn, sizeof(qn)), n);
}

void hlb_pool_log_set_leaves_none(const struct hlb_pool_service *s)
{
	pool_log(s->pool, HLB_LOG_WARN, "backend set: no backend takes clients",
		 "service=%s by=admin backends=%u", s->cfg->name, s->n_backends);
}

uint64_t hlb_pool_close_connections(struct hlb_pool_backend *b)
{
	char qn[POOL_NAME_QUOTED], q[POOL_ADDRESS_QUOTED];
	uint64_t n = atomic_load(&b->rt->active);

	/* address= and removed=1: a close reaches the backend of that name and those
	 * a reload removed or moved that still drain, a line each, told apart */
	hlb_backend_close(b->rt, HLB_CLOSE_ADMIN);
	pool_log(b->svc->pool, HLB_LOG_INFO, "closing a backend's connections",
		 "service=%s backend=%s address=%s%s established=%" PRIu64 " by=admin",
		 b->svc->cfg->name, backend_qname(b, qn),
		 hlb_log_quote(b->rt->address, q, sizeof(q)),
		 hlb_pool_backend_drain_deadline(b) ? " removed=1" : "", n);
	return n;
}

/* ---- build and publish ---- */

static uint64_t pool_next_generation(struct hlb_pool *p)
{
	if (p->env.next_generation)
		return p->env.next_generation(p->env.arg);
	return ++p->generation;
}

/*
 * Maglev: whether <b> going down from the table in use would populate its survivors' table
 * (hashlb_table_with_down_populates()), rather than copy one the table keeps (a flap's down
 * again). Short of memory: no (its verdict populates then, as before).
 */
static bool verdict_populates(const struct hlb_pool_backend *b)
{
	const struct hlb_pool_service *s = b->svc;
	const struct hlb_snapshot *snap = hlb_service_snapshot(s->rt);
	bool *down, pop;

	if (s->cfg->table.scheme != HASHLB_SCHEME_MAGLEV || !snap || b->idx >= snap->n_backends ||
	    snap->backends[b->idx] != b->rt || !(down = calloc(snap->n_backends, sizeof(*down))))
		return false;
	for (uint32_t j = 0; j < snap->n_backends; j++)
		down[j] = j == b->idx || hashlb_table_backend_down(snap->table, j);
	pop = hashlb_table_with_down_populates(snap->table, down);
	free(down);
	return pop;
}

/*
 * Whether <b> fails: its last connects failed (the forwarder's word), or its checks fail while
 * it is still up (a run toward fall) and its verdict would populate its survivors' table. On
 * Maglev either makes the retry table with it down (service_add_retry()): for the checks,
 * that is the survivors' table the verdict then copies rather than populates (about 0.5 s of
 * the control thread at the largest M, which moves to the first failed check, <fall> - 1
 * intervals before the verdict). A flap's down again copies the table's kept survivors at
 * its verdict anyway: no table, nor build, at its failed checks. Nor while another backend
 * fails (a rack going down): a table of them all would serve none of their verdicts but
 * the last, each a population more (backend_check_while_up() decides at a run's first).
 */
static bool backend_failing(const struct hlb_pool_backend *b)
{
	return atomic_load_explicit(&b->rt->consecutive_fail, memory_order_relaxed) != 0 ||
	       (b->up_fails != 0 && b->up_fails_retry);
}

/* Whether a backend of <s> fails (backend_failing()): the one found last looked at first, for
 * in a rack going down it fails still as each of the others' first failed check asks (a walk
 * of them each, 20,000 backends' in 1.2 s of this thread). */
static bool service_failing(struct hlb_pool_service *s)
{
	if (s->failing_hint < s->n_backends && backend_failing(s->backends[s->failing_hint]))
		return true;
	for (uint32_t j = 0; j < s->n_backends; j++) {
		if (backend_failing(s->backends[j])) {
			s->failing_hint = j;
			return true;
		}
	}
	return false;
}

/*
 * Maglev: the backends whose last connects failed (not yet down, or
 * already) are down in <snap>'s retry table, so that a client retried away
 * from one goes where it stays once they are down (see retry_watch()).
 * While a backend is in slow start, the ramping ones are down too in a
 * second table, for a client that table sends to one that does not admit
 * it yet: it goes where it stays while the ramp lasts (see retry_first()).
 * <cur>, the snapshot <snap> replaces (NULL accepted), lends its retry
 * tables' slots where they are the new ones' (hlb_snapshot_add_retry()).
 */
static void service_add_retry(struct hlb_pool_service *s, struct hlb_snapshot *snap,
			      const struct hlb_snapshot *cur)
{
	bool *failing, any = false, ramps = false;

	if (s->cfg->table.scheme != HASHLB_SCHEME_MAGLEV || snap->n_backends != s->n_backends)
		return;
	for (uint32_t j = 0; j < s->n_backends && !any; j++)
		any = backend_failing(s->backends[j]);
	if (!any || !(failing = calloc(s->n_backends, sizeof(*failing))))
		return;
	for (uint32_t j = 0; j < s->n_backends; j++)
		failing[j] =
			snap->backends[j] == s->backends[j]->rt && backend_failing(s->backends[j]);
	hlb_snapshot_add_retry(snap, failing, cur);
	for (uint32_t j = 0; j < s->n_backends; j++) {
		if (snap->backends[j] == s->backends[j]->rt && s->backends[j]->ramp_start_ms)
			ramps = failing[j] = true;
	}
	if (ramps && snap->retry_table)
		hlb_snapshot_add_retry_ramp(snap, failing, cur);
	free(failing);
}

/*
 * Maglev: the backends in slow start are down in <snap>'s ramp table, so
 * that a client its own backend does not admit yet stays where it was while
 * that backend was out (see conn_connect()). Every ramp starts with a build
 * (the backend came up, left maint or drain, its weight was raised from 0,
 * or a reload added it); one that ended
 * admits every client, and its place in the ramp table is never read.
 * <cur>, the snapshot <snap> replaces (NULL accepted), lends its ramp
 * table's owner blocks (hlb_snapshot_add_ramp()).
 */
static void service_add_ramp(struct hlb_pool_service *s, struct hlb_snapshot *snap,
			     const struct hlb_snapshot *cur)
{
	bool *ramping, any = false;

	if (s->cfg->table.scheme != HASHLB_SCHEME_MAGLEV || snap->n_backends != s->n_backends)
		return;
	for (uint32_t j = 0; j < s->n_backends && !any; j++)
		any = s->backends[j]->ramp_start_ms != 0;
	if (!any || !(ramping = calloc(s->n_backends, sizeof(*ramping))))
		return;
	for (uint32_t j = 0; j < s->n_backends; j++)
		ramping[j] = snap->backends[j] == s->backends[j]->rt &&
			     s->backends[j]->ramp_start_ms != 0;
	hlb_snapshot_add_ramp(snap, ramping, cur);
	free(ramping);
}

static int service_build(struct hlb_pool_service *s, struct hlb_snapshot **ret_snap,
			 struct hashlb_error *err)
{
	const struct hlb_snapshot *cur = hlb_service_snapshot(s->rt);
	uint64_t gen = pool_next_generation(s->pool);
	/* this build drops the retry table a passed check ended, whichever it is: a full one
	 * too, or the mark outlived it, and a later build made the table in use from the retry
	 * table of another backend failing by then (retry_release()) */
	bool from_retry = s->retry_released;
	struct hlb_backend **rts;
	int ret;

	s->retry_released = false;
	if (cur && !s->need_full) {
		/* settings unchanged since <cur> (else need_full); a retry table dropped keeps
		 * its survivors in the table (retry_release()) */
		ret = from_retry ? hlb_snapshot_refresh_from_retry(cur, s->cfg, gen, ret_snap, err)
				 : hlb_snapshot_refresh(cur, s->cfg, gen, ret_snap, err);
		if (ret == 0) {
			service_add_retry(s, *ret_snap, cur);
			service_add_ramp(s, *ret_snap, cur);
		}
		return ret;
	}
	rts = calloc(s->n_backends ? s->n_backends : 1, sizeof(*rts));
	if (!rts)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	for (uint32_t i = 0; i < s->n_backends; i++)
		rts[i] = s->backends[i]->rt;
	/* A weight or membership change: reuse what the current table can give. */
	ret = hlb_snapshot_rebuild(cur, s->cfg, rts, gen, ret_snap, err);
	free(rts);
	if (ret == 0) {
		s->need_full = false;
		service_add_retry(s, *ret_snap, cur);
		service_add_ramp(s, *ret_snap, cur);
	}
	return ret;
}

/*
 * The service's table of connections per client, made before the first
 * snapshot that sets max_connections_per_client is published: room for as
 * many clients as the process can hold connections (two descriptors
 * each), whatever max_connections says now (a reload may raise it; the
 * table's memory follows the clients present, not this bound). Out of
 * memory: the limit is not enforced (logged), nothing else fails.
 */
static void service_clients_table(struct hlb_pool_service *s, const struct hlb_snapshot *snap)
{
	struct rlimit rl = { 0 };
	struct hlb_clients *t;
	uint64_t room;

	if (!snap->max_per_client || atomic_load(&s->rt->clients))
		return;
	getrlimit(RLIMIT_NOFILE, &rl);
	room = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 22) ? 1u << 21
									: rl.rlim_cur / 2;
	if (hlb_clients_new((uint32_t)room, &t) < 0) {
		pool_log(s->pool, HLB_LOG_ERROR,
			 "out of memory for max_connections_per_client, not enforced", "service=%s",
			 s->cfg->name);
		return;
	}
	atomic_store_explicit(&s->rt->clients, t, memory_order_release);
}

struct deferred_close {
	struct hlb_backend *rt; /* one reference */
	enum hlb_close_why why;
};

/* A close once no worker can still choose the backend from a table that had
 * it, unless what called for it has passed by then: a down backend is up
 * again, a backup is back in the table. */
static void backend_close_deferred(void *arg)
{
	struct deferred_close *d = arg;
	bool still = true;

	if (d->why == HLB_CLOSE_DOWN)
		still = !atomic_load(&d->rt->healthy);
	else if (d->why == HLB_CLOSE_BACKUP)
		still = !atomic_load(&d->rt->listed);
	if (still)
		hlb_backend_close(d->rt, d->why);
	hlb_backend_unref(d->rt);
	free(d);
}

/*
 * Close <rt>'s connections after a grace period, when every worker has left
 * the table published before: a client that reconnects at once finds the
 * new table, and a connection that chose <rt> from the old one is among
 * those closed.
 */
static void backend_close_after_publish(struct hlb_pool *p, struct hlb_backend *rt,
					enum hlb_close_why why)
{
	struct deferred_close *d = malloc(sizeof(*d));

	if (!d) { /* out of memory: now */
		hlb_backend_close(rt, why);
		return;
	}
	*d = (struct deferred_close){ hlb_backend_ref(rt), why };
	if (!p->env.rcu || hlb_rcu_defer(p->env.rcu, backend_close_deferred, d) < 0)
		backend_close_deferred(d); /* no workers, or out of memory: now */
}

static void service_publish(struct hlb_pool_service *s, struct hlb_snapshot *snap)
{
	struct hlb_pool *p = s->pool;

	service_clients_table(s, snap);
	/* -ENOMEM leaks the old snapshot rather than freeing it early. */
	hlb_service_publish(s->rt, snap, p->env.rcu);
	for (uint32_t i = 0; i < p->n_subs; i++)
		p->subs[i].fn(p->subs[i].arg, s->rt, snap);
	pool_queue_kick(s);
	for (uint32_t i = 0; i < s->n_backends; i++) {
		struct hlb_pool_backend *b = s->backends[i];
		/* the snapshot's backends are s->backends' objects, in that order */
		bool now_in = i < snap->n_backends && snap->backends[i] == b->rt &&
			      !hashlb_table_backend_down(snap->table, i);
		bool was_in = atomic_exchange(&b->rt->listed, now_in);

		if (b->close_pending) { /* health.close_on_down */
			b->close_pending = false;
			if (!b->health.up)
				backend_close_after_publish(p, b->rt, HLB_CLOSE_DOWN);
		}
		/* close_on_return: a backup out of the table while it could serve,
		 * that is because another backend takes clients again */
		if (was_in && !now_in && s->cfg->backends[i].close_on_return &&
		    hlb_pool_backend_up(b))
			backend_close_after_publish(p, b->rt, HLB_CLOSE_BACKUP);
	}
}

/* What of <snap>'s service decides its clients' hashes; <listen_moved>: the service listens
 * elsewhere than under the snapshot it is compared with. */
static struct hashlb_client_hash snapshot_client_hash(const struct hlb_snapshot *snap,
						      bool listen_moved)
{
	return (struct hashlb_client_hash){ snap->seed, snap->key, snap->hash_prefix,
					    snap->accept_proxy, listen_moved };
}

static bool addr_equal(const struct sockaddr_storage *a, socklen_t al,
		       const struct sockaddr_storage *b, socklen_t bl);

/* hashlb_same_server: backend <i> of a snapshot (<arg>: the two, in use and next) and <j>
 * of the next are one server, at one address (a reload that gives a name another address
 * keeps its place in the table, but sends its clients to another server) */
static bool snapshot_same_server(uint32_t i, uint32_t j, void *arg)
{
	const struct hlb_snapshot *const *two = arg;
	const struct hlb_backend *a = two[0]->backends[i], *b = two[1]->backends[j];

	return addr_equal(&a->addr, a->addr_len, &b->addr, b->addr_len);
}

/*
 * <s>'s table in use (<cur>) replaced by a reload's (<next>): the share of its clients
 * sent to another server (another backend, or its own at another address), logged and
 * counted into the pool's <moved>. What clients feel is the table in use, health and all,
 * not the config's: compared as published.
 */
static void service_moved(struct hlb_pool_service *s, const struct hlb_snapshot *cur,
			  const struct hlb_snapshot *next)
{
	struct hlb_pool_moved *m = s->pool->moved;
	bool by_resolve = m->by_resolve;
	double moved = 0;
	char what[64];
	/* the reload's own listener transaction said it (listen_rehashes()) */
	struct hashlb_client_hash hc = snapshot_client_hash(cur, false),
				  hn = snapshot_client_hash(next, s->listen_rehashed);
	bool anew = hashlb_client_hash_changed(&hc, &hn, what, sizeof(what));
	const struct hlb_snapshot *two[2] = { cur, next };
	struct hashlb_same_server same = { snapshot_same_server, two };
	int ret = anew ? hashlb_table_rehash_moved(cur->table, next->table, &same, &moved)
		       : hashlb_table_moved(cur->table, next->table, &same, &moved);

	if (ret < 0) /* short of memory: the figure is not known, the reload applies */
		return;
	/* a line a service, as many as the lines of what changed; the others counted in one
	 * (pool_flush_moved()) */
	if (m->tables < HLB_POOL_CHANGE_LINES && anew)
		pool_log(s->pool, HLB_LOG_INFO,
			 by_resolve ? "resolve: clients moved" : "reload: clients moved",
			 "service=%s moved=%.4f placed_anew=%s", s->cfg->name, moved, what);
	else if (m->tables < HLB_POOL_CHANGE_LINES)
		pool_log(s->pool, HLB_LOG_INFO,
			 by_resolve ? "resolve: clients moved" : "reload: clients moved",
			 "service=%s moved=%.4f", s->cfg->name, moved);
	m->tables++;
	if (moved > m->most || !m->most_service[0]) {
		m->most = moved;
		snprintf(m->most_service, sizeof(m->most_service), "%s", s->cfg->name);
	}
}

/* Build and publish <s> now. On failure the old snapshot keeps serving. */
static int service_rebuild(struct hlb_pool_service *s)
{
	struct hlb_snapshot *snap;
	uint64_t t0 = hlb_now_ns(), dt, now;
	char q[HLB_LOG_QUOTED_MAX(sizeof(s->last_error.msg))];
	int ret;

	hlb_timer_cancel(s->pool->loop, &s->build_timer);
	s->dirty = false;
	ret = service_build(s, &snap, &s->last_error);
	if (ret < 0) {
		s->rebuilds_failed++;
		pool_log(s->pool, HLB_LOG_ERROR,
			 "table build failed, the previous table keeps serving",
			 "service=%s err=%s", s->cfg->name,
			 hlb_log_quote(s->last_error.msg, q, sizeof(q)));
		return ret;
	}
	if (s->pool->moved && s->reload_pending && hlb_service_snapshot(s->rt))
		service_moved(s, hlb_service_snapshot(s->rt), snap);
	service_publish(s, snap);
	dt = hlb_now_ns() - t0;
	s->rebuilds++;
	s->rebuild_ns_last = dt;
	s->rebuild_ns_total += dt;
	if (dt > s->rebuild_ns_max)
		s->rebuild_ns_max = dt;
	/* Builds that keep coming (checks finding a dead rack's backends one by
	 * one over an interval) are spaced out more and more, up to
	 * HLB_POOL_MAX_GAP_MS; a quiet second resets the gap. */
	now = hlb_now_ms();
	if (s->last_build_ms && now - s->last_build_ms < 1000)
		s->gap_ms =
			s->gap_ms * 2 > HLB_POOL_MAX_GAP_MS ? HLB_POOL_MAX_GAP_MS : s->gap_ms * 2;
	else
		s->gap_ms = HLB_POOL_MIN_GAP_MS;
	s->last_build_ms = now;
	return 0;
}

static void service_build_timer(void *arg)
{
	service_rebuild(arg);
}

/* A build <debounce_ms> from now, or at the gap's end; one scheduled earlier stays. */
static void service_schedule_in(struct hlb_pool_service *s, bool full, uint64_t debounce_ms)
{
	uint64_t when = hlb_now_ms() + debounce_ms;

	s->need_full |= full;
	if (s->last_build_ms && when < s->last_build_ms + s->gap_ms)
		when = s->last_build_ms + s->gap_ms;
	if (s->dirty && s->build_timer.when_ms <= when)
		return;
	s->dirty = true;
	hlb_timer_arm(s->pool->loop, &s->build_timer, when);
}

static void service_schedule(struct hlb_pool_service *s, bool full)
{
	service_schedule_in(s, full, HLB_POOL_DEBOUNCE_MS);
}

void hlb_pool_flush(struct hlb_pool *p)
{
	for (uint32_t i = 0; i < p->n_svcs; i++)
		if (p->svcs[i]->dirty)
			service_rebuild(p->svcs[i]);
}

/* hlb_pool_flush_reload() and hlb_pool_flush_resolve(): <by_resolve>, the latter */
static void pool_flush_moved(struct hlb_pool *p, bool by_resolve, struct hlb_pool_moved *ret_moved)
{
	struct hlb_pool_moved moved = { .by_resolve = by_resolve };

	p->moved = &moved;
	hlb_pool_flush(p);
	p->moved = NULL;
	/* a reload of thousands of services: the log bounded, as for the changes */
	if (moved.tables > HLB_POOL_CHANGE_LINES)
		pool_log(p, HLB_LOG_INFO,
			 by_resolve ? "resolve: more services' clients moved, not logged one by one"
				    : "reload: more services' clients moved, not logged one by one",
			 "more=%u most=%.4f service=%s", moved.tables - HLB_POOL_CHANGE_LINES,
			 moved.most, moved.most_service);
	for (uint32_t i = 0; i < p->n_svcs; i++)
		p->svcs[i]->reload_pending = false;
	if (ret_moved)
		*ret_moved = moved;
}

void hlb_pool_flush_reload(struct hlb_pool *p, struct hlb_pool_moved *ret_moved)
{
	pool_flush_moved(p, false, ret_moved);
}

void hlb_pool_flush_resolve(struct hlb_pool *p, struct hlb_pool_moved *ret_moved)
{
	pool_flush_moved(p, true, ret_moved);
}

/* ---- the tick: passive failures, flap decay, slow start, drained backends ---- */

/*
 * Whether a backend of <b>'s service other than <b> takes clients (a backup too: with every
 * primary out, it does). Passive-only health holds out no service's last one (as its only
 * one): with every backend dead at once, held out, they would refuse every client for up to
 * 8 holds, though the first may be back already, where trying it costs a refused connect.
 */
static bool service_others_take_clients(const struct hlb_pool_backend *b)
{
	struct hlb_pool_service *s = b->svc;

	/* from where the last look found one, around: with every backend failing in one tick
	 * (an outage), each look from the first backend passed every one already taken down
	 * before it, N^2/2 steps that tick (2 * 10^9 at 65,535 backends); from the hint, each
	 * backend taken down is passed over once */
	for (uint32_t k = 0; k < s->n_backends; k++) {
		uint32_t j = (uint32_t)(((uint64_t)s->taker_hint + k) % s->n_backends);
		const struct hlb_pool_backend *o = s->backends[j];

		if (o != b && backend_takes_clients(o)) {
			s->taker_hint = j;
			return true;
		}
	}
	return false;
}

/* The clients <b> has been connected to, by every worker. */
static uint64_t backend_served(const struct hlb_pool_backend *b)
{
	struct hlb_backend_counters c;

	hlb_backend_counters_read(b->rt, &c);
	return c.total;
}

/* <b>, held by passive-only health, is up on trial: its failures before the hold are no run of
 * now, and its next one starts a run, which wakes the control thread */
static void backend_trial_start(struct hlb_pool_backend *b)
{
	atomic_store_explicit(&b->rt->consecutive_fail, 0, memory_order_relaxed);
	b->seen_run = 0;
	b->trial_served = backend_served(b);
}

static void backend_tick(struct hlb_pool_backend *b, uint64_t now)
{
	/* every backend every tick: only its run of failed connects, not the
	 * whole counters (their histogram and all), which cost 30 % of a CPU at
	 * 65,535 backends. Failures followed by a successful connect are not a
	 * failing backend: a run shorter than the last one seen was restarted
	 * by a connect that succeeded, and only its own failures count (all the
	 * failures since the last tick did, whenever the last connect failed:
	 * a backend refusing one connect in several went down, though it never
	 * failed <fall> in a row). A success missed that way (the new run as
	 * long already) counts the same. */
	uint32_t run = atomic_load_explicit(&b->rt->consecutive_fail, memory_order_acquire);
	bool succeeded = run < b->seen_run;
	uint32_t fresh = succeeded ? run : run - b->seen_run;
	const char *cause = NULL;
	uint32_t err = 0;

	b->seen_run = run;
	/* on trial, its run was 0: a connect that succeeded left it so, and only the count of
	 * clients served tells it (read at its failure, not at each tick) */
	if (fresh && !succeeded && b->health.trial && backend_served(b) != b->trial_served)
		succeeded = true;
	/* passive-only: the last backend taking clients is held out by none of its failures */
	if (fresh && hlb_pool_backend_passive_only(b) && hlb_pool_backend_up(b) &&
	    !service_others_take_clients(b))
		fresh = 0;
	if (hlb_pool_backend_checked(b) || hlb_pool_backend_passive_only(b)) {
		bool held = !b->health.raw_up, hold = b->health.hold_until_ms;

		if (b->svc->cfg->health.passive &&
		    hlb_health_passive(&b->health, &b->svc->hp, fresh, succeeded, now)) {
			cause = "passive";
			/* the forwarder's connect error, as a check's at connect: the down
			 * line says it, and a check failing the same way next is none other */
			err = atomic_load_explicit(&b->rt->connect_err, memory_order_relaxed);
			err = err ? err_code(HLB_CHECK_AT_CONNECT, (int)err) : 0;
		}
		b->passive_holds += !hold && b->health.hold_until_ms; /* a hold begun */
		held &= !b->health.raw_up;
		/* two changes: back where it was */
		if (hlb_health_tick(&b->health, &b->svc->hp, now))
			cause = cause ? NULL : held && b->health.raw_up ? "hold_over" : "damping";
		if (held && b->health.raw_up)
			backend_trial_start(b);
	}
	if (cause)
		backend_health_changed(b, now, cause, err); /* 0 unless passive */
	if (b->ramp_start_ms) {
		uint64_t slow = b->svc->cfg->slow_start_ms;
		uint64_t el = now - b->ramp_start_ms;

		if (!slow || el >= slow) {
			atomic_store(&b->rt->admit, HLB_ADMIT_ONE);
			b->ramp_start_ms = 0;
			/* its ramp table (Maglev) is read no more: the next build drops it */
			if (hlb_pool_snapshot(b->svc) && hlb_pool_snapshot(b->svc)->ramp_table)
				service_schedule(b->svc, false);
		} else {
			atomic_store(&b->rt->admit, (uint32_t)(el * HLB_ADMIT_ONE / slow));
		}
		pool_queue_kick(b->svc); /* it admits more clients */
	}
}

/*
 * Free removed backend <b> of <s> (NULL: of a service a reload removed),
 * its bytes kept in <s>'s (hlb_pool_service_bytes()): the operator bills
 * on them, and the process's last word on a service (its totals at exit)
 * must not lose those of a backend removed before.
 */
static void service_forget_backend(struct hlb_pool_service *s, struct hlb_pool_backend *b)
{
	struct hlb_backend_counters c;
	struct hlb_backend **v;

	if (s) {
		s->n_gone++;
		if (b->carried)
			hlb_backend_counters_add(&s->gone_carried, &b->carried->c);
		/* held elsewhere (acquire: what a worker counted before it let go is
		 * read): kept to be read live until it is let go, if there is room */
		if (atomic_load_explicit(&b->rt->refs, memory_order_acquire) > 1 &&
		    (v = realloc(s->gone_held, (s->n_gone_held + 1) * sizeof(*v)))) {
			s->gone_held = v;
			v[s->n_gone_held++] = hlb_backend_ref(b->rt);
		} else {
			hlb_backend_counters_read(b->rt, &c);
			hlb_backend_counters_add(&s->gone, &c);
		}
	}
	backend_free(b);
}

/* The backends of <s> that drained and went whose counters were read once
 * nothing else held them: added to <gone>, let go (at each tick, and at the end). */
static void service_let_go(struct hlb_pool_service *s, bool all)
{
	struct hlb_backend_counters c;
	uint32_t i = 0;

	while (i < s->n_gone_held) {
		struct hlb_backend *rt = s->gone_held[i];

		if (!all && atomic_load_explicit(&rt->refs, memory_order_acquire) > 1) {
			i++;
			continue;
		}
		hlb_backend_counters_read(rt, &c);
		hlb_backend_counters_add(&s->gone, &c);
		hlb_backend_unref(rt);
		s->gone_held[i] = s->gone_held[--s->n_gone_held];
	}
}

/* <s>'s counters of the backends that drained and went: <gone>, and those still held read now. */
static void service_gone_read(const struct hlb_pool_service *s, struct hlb_backend_counters *ret)
{
	struct hlb_backend_counters sum = s->gone, c;

	for (uint32_t i = 0; i < s->n_gone_held; i++) {
		hlb_backend_counters_read(s->gone_held[i], &c);
		hlb_backend_counters_add(&sum, &c);
	}
	*ret = sum;
}

uint32_t hlb_pool_service_drained(const struct hlb_pool_service *s,
				  struct hlb_backend_counters *ret)
{
	struct hlb_backend_counters sum;
	struct hlb_pool_totals t;

	/* as their rows showed them: an upgrade in place's carried counts too, as the
	 * service's totals have them */
	service_gone_read(s, &sum);
	hlb_backend_counters_add(&sum, &s->gone_carried);
	for (uint32_t i = 0; i < s->n_drained; i++) {
		hlb_pool_backend_totals(s->drained[i], &t);
		hlb_backend_counters_add(&sum, &t.c);
	}
	*ret = sum;
	return s->n_gone + s->n_drained;
}

void hlb_pool_service_bytes(const struct hlb_pool_service *s, uint64_t *ret_in, uint64_t *ret_out)
{
	struct hlb_backend_counters c;
	uint64_t in, out;

	service_gone_read(s, &c);
	in = c.bytes_in;
	out = c.bytes_out;
	for (uint32_t j = 0; j < hlb_pool_service_series(s); j++) {
		hlb_backend_counters_read(hlb_pool_service_series_at(s, j)->rt, &c);
		in += c.bytes_in;
		out += c.bytes_out;
	}
	*ret_in = in;
	*ret_out = out;
}

/* A service's last word: its counters as this process ends them. <removed>: a reload
 * removed it, and its last connection is gone. */
static void log_totals(struct hlb_pool *p, const char *name, const struct hlb_service *rt,
		       uint64_t sent, uint64_t received, bool removed)
{
	char q[2 * HASHLB_NAME_MAX + 3];
	struct hlb_service_counters c;

	const char *qn = hlb_log_quote(name, q, sizeof(q));

	hlb_service_counters_read(rt, &c);
	if (c.drain_cut)
		pool_log(p, HLB_LOG_WARN, "drain timeout: connections closed",
			 "service=%s%s connections=%" PRIu64, qn, removed ? " removed=1" : "",
			 c.drain_cut);
	if (c.drain_signalled) /* no timeout: the operator asked for it */
		pool_log(p, HLB_LOG_WARN, "drain cut: connections closed",
			 "service=%s%s connections=%" PRIu64 " reason=second_signal", qn,
			 removed ? " removed=1" : "", c.drain_signalled);
	pool_log(p, HLB_LOG_INFO, "service totals",
		 "service=%s%s lookups=%" PRIu64 " connections=%" PRIu64 " rejected=%" PRIu64
		 " no_backend=%" PRIu64 " queue_timeouts=%" PRIu64 " queue_aborts=%" PRIu64
		 " denied=%" PRIu64 " client_limited=%" PRIu64 " bad_headers=%" PRIu64
		 " untrusted=%" PRIu64 " sent_bytes=%" PRIu64 " received_bytes=%" PRIu64,
		 qn, removed ? " removed=1" : "", c.lookups, c.total, c.rejected, c.no_backend,
		 c.queue_timeouts, c.queue_aborts, c.denied, c.client_limited, c.bad_header,
		 c.untrusted, sent, received);
}

static void retired_free(struct retired *r)
{
	for (uint32_t i = 0; i < r->n_bes; i++)
		hlb_backend_unref(r->bes[i]);
	free(r->bes);
	hlb_service_unref(r->rt);
	free(r->name);
}

/*
 * What keeping <s> as a retired service takes (retire_keep()), into <ret_r>, made before
 * the reload that removes it changes anything; -ENOMEM (nothing held). <p>'s retired have
 * their room (retiring_prepare()).
 */
static int retire_prepare(struct hlb_pool_service *s, struct retired *ret_r)
{
	uint32_t n = hlb_pool_service_series(s);
	struct retired r = { .name = strdup(s->cfg->name),
			     .bes = calloc(n ? n : 1, sizeof(*r.bes)) };

	if (!r.name || !r.bes) {
		free(r.name);
		free(r.bes);
		return -ENOMEM;
	}
	*ret_r = r;
	return 0;
}

/*
 * <s>, which a reload removes, is kept as a retired service, with what <r> holds
 * (retire_prepare(), taken over): a reload removing it takes its series out of /metrics,
 * and the bytes its connections go on forwarding as they drain would be counted nowhere
 * an operator sees; it logs its totals once they are gone.
 */
static void retire_keep(struct hlb_pool *p, struct hlb_pool_service *s, struct retired *r)
{
	struct hlb_backend_counters gone;

	service_gone_read(s, &gone);
	r->gone_in = gone.bytes_in;
	r->gone_out = gone.bytes_out;
	for (uint32_t j = 0; j < hlb_pool_service_series(s); j++)
		r->bes[r->n_bes++] = hlb_backend_ref(hlb_pool_service_series_at(s, j)->rt);
	r->rt = hlb_service_ref(s->rt);
	r->carried = s->carried;
	r->gone_carried = s->gone_carried;
	p->retired[p->n_retired++] = *r;
	*r = (struct retired){ 0 };
}

/* Log the totals of the retired services nothing else holds any more, their last connection
 * gone and their listener closed in every worker, and their drain timeout over (<now>), when
 * a reload adding them back can no longer take their backends back, bytes and all (<all>:
 * every one, the process ending), and let them go. The reference a worker drops last
 * (release) orders what it counted before our read of it (acquire). */
static bool orphans_left(const struct hlb_pool *p, const struct retired *r);

static void pool_reap_retired(struct hlb_pool *p, bool all, uint64_t now)
{
	uint32_t i = 0;

	while (i < p->n_retired) {
		struct retired *r = &p->retired[i];
		uint64_t in = r->gone_in, out = r->gone_out;
		struct hlb_backend_counters c;

		/* held by more than us: a connection, or a worker's listener (whose backlog
		 * that worker serves as it reads the removal, after the reload) */
		if (!all && (atomic_load_explicit(&r->rt->refs, memory_order_acquire) > 1 ||
			     (now < r->deadline_ms &&
			      /* timeouts.drain: never ends with its connections, the last of
			       * its orphans' gone (reap_drained()) */
			      (r->deadline_ms != UINT64_MAX || orphans_left(p, r))))) {
			i++;
			continue;
		}
		for (uint32_t j = 0; j < r->n_bes; j++) {
			hlb_backend_counters_read(r->bes[j], &c);
			in += c.bytes_in;
			out += c.bytes_out;
		}
		log_totals(p, r->name, r->rt, in, out, true);
		retired_free(r);
		p->retired[i] = p->retired[--p->n_retired];
	}
}

/* Whether an orphan of retired <r> is left (reap_drained() drops them at the tick past their
 * deadline: until then, orphan_take() may take them back). Its own: another retired entry
 * of its name, held past its deadline (a connection closing), has none left. */
static bool orphans_left(const struct hlb_pool *p, const struct retired *r)
{
	for (uint32_t i = 0; i < p->n_orphans; i++) {
		const struct hlb_pool_backend *o = p->orphans[i];

		if (!o->orphan_of || strcmp(o->orphan_of, r->name))
			continue;
		for (uint32_t k = 0; k < r->n_bes; k++)
			if (r->bes[k] == o->rt)
				return true;
	}
	return false;
}

/*
 * The retired service named <name> whose drain timeout is not over at <now>, or whose
 * orphans are left, or NULL: a reload adding it back takes its counters back
 * (service_new()), as it takes its backends (orphan_take()). At most one is: a reload
 * adding the service back in between took the one before.
 */
static struct retired *retired_find(struct hlb_pool *p, const char *name, uint64_t now)
{
	for (uint32_t i = 0; i < p->n_retired; i++) {
		struct retired *r = &p->retired[i];

		if (!strcmp(r->name, name) && (now < r->deadline_ms || orphans_left(p, r)))
			return r;
	}
	return NULL;
}

static int ptr_cmp(const void *x, const void *y)
{
	uintptr_t a = (uintptr_t) * (void *const *)x, b = (uintptr_t) * (void *const *)y;

	return a < b ? -1 : a > b;
}

/*
 * The orphans of retired <r> that the reload adding back its service <s> did not take back
 * (orphans_adopted()): <s>'s removed backends again, draining to their deadline as one a
 * reload removed from it (room made by service_new()), their entry in <r> NULL. Left
 * orphans while <s> counted them among its drained, they were said drained while they
 * drained yet; a second removal of <s> counted their bytes so far in its totals and those
 * after nowhere, and a second add-back took them back with those bytes counted again.
 */
static void orphans_left_to(struct hlb_pool *p, struct hlb_pool_service *s, struct retired *r)
{
	uint32_t n = 0;

	qsort(r->bes, r->n_bes, sizeof(*r->bes), ptr_cmp);
	for (uint32_t k = 0; k < p->n_orphans; k++) {
		struct hlb_pool_backend *o = p->orphans[k];
		struct hlb_backend **hit = NULL;

		if (o->orphan_of && !strcmp(o->orphan_of, r->name))
			hit = bsearch(&o->rt, r->bes, r->n_bes, sizeof(*r->bes), ptr_cmp);
		if (!hit) {
			p->orphans[n++] = o;
			continue;
		}
		hlb_backend_unref(*hit); /* <o> holds its own */
		*hit = NULL;
		free(o->orphan_of);
		o->orphan_of = NULL;
		o->svc = s;
		s->removed[s->n_removed++] = o;
	}
	p->n_orphans = n;
}

/*
 * The reload that adds back the retired service whose counters <s> took (service_new())
 * is applied: <s> is that service again, its connections kept counted under its
 * max_connections, its counters going on, and the retired one goes without its totals
 * line (<s> logs them). The backends its orphans_adopted() did not take back drain as
 * <s>'s removed ones (orphans_left_to()); those gone already are counted among <s>'s gone
 * (room made by service_new()), with the bytes of those freed before. Before, the service
 * added back was a new one: its counters began at 0 beside its backends' kept ones, and its
 * max_connections let in as many again as the connections it kept.
 */
static void retired_taken_back(struct hlb_pool *p, struct hlb_pool_service *s)
{
	for (uint32_t i = 0; i < p->n_retired; i++) {
		struct retired *r = &p->retired[i];

		if (r->rt != s->rt)
			continue;
		orphans_left_to(p, s, r);
		for (uint32_t k = 0; k < r->n_bes; k++) {
			if (!r->bes[k])
				continue; /* draining as <s>'s removed backend */
			s->gone_held[s->n_gone_held++] = r->bes[k]; /* its reference with it */
			s->n_gone++;
		}
		s->gone.bytes_in += r->gone_in;
		s->gone.bytes_out += r->gone_out;
		s->carried = r->carried;
		hlb_backend_counters_add(&s->gone_carried, &r->gone_carried);
		r->n_bes = 0;
		/* no longer removed since its snapshot was published (hlb_pool_apply()) */
		retired_free(r); /* its reference to <rt>: <s> holds its own */
		p->retired[i] = p->retired[--p->n_retired];
		return;
	}
}

void hlb_pool_log_totals(struct hlb_pool *p)
{
	uint64_t in, out;

	for (uint32_t i = 0; i < p->n_svcs; i++) {
		hlb_pool_service_bytes(p->svcs[i], &in, &out);
		log_totals(p, p->svcs[i]->cfg->name, p->svcs[i]->rt, in, out, false);
	}
	pool_reap_retired(p, true, 0);
}

uint32_t hlb_pool_service_series(const struct hlb_pool_service *s)
{
	return s->n_backends + s->n_removed + s->n_drained;
}

const struct hlb_pool_backend *hlb_pool_service_series_at(const struct hlb_pool_service *s,
							  uint32_t j)
{
	if (j < s->n_backends)
		return s->backends[j];
	j -= s->n_backends;
	return j < s->n_removed ? s->removed[j] : s->drained[j - s->n_removed];
}

/*
 * Removed backend <b> of <s> has drained: its series stay in /metrics for
 * HLB_POOL_DRAINED_KEEP_MS, so that a scrape reads what it counted since
 * the last one (the bytes and closes of its last connections). Freed at
 * once when out of memory.
 */
static void service_keep_drained(struct hlb_pool_service *s, struct hlb_pool_backend *b,
				 uint64_t now)
{
	struct hlb_pool_backend **v = realloc(s->drained, (s->n_drained + 1) * sizeof(*v));

	if (!v) {
		service_forget_backend(s, b);
		return;
	}
	s->drained = v;
	b->drained_ms = now;
	s->drained[s->n_drained++] = b;
}

/* Free the drained backends of <s> kept long enough. */
static void service_drop_drained(struct hlb_pool_service *s, uint64_t now)
{
	uint32_t i = 0;

	while (i < s->n_drained) {
		struct hlb_pool_backend *b = s->drained[i];

		/* and until its drain deadline: a reload adding it back takes it back until
		 * then, what was set at run time with it (service_gone_find()) */
		if (now - b->drained_ms >= HLB_POOL_DRAINED_KEEP_MS &&
		    now >= hlb_pool_backend_drain_deadline(b)) {
			service_forget_backend(s, b);
			s->drained[i] = s->drained[--s->n_drained];
		} else {
			i++;
		}
	}
}

/*
 * Drop the draining backends of <v> whose connections ended, closing them
 * past their deadline (logged: the reload that removed them said it would); <s>: their
 * service, which keeps them a while for their series (service_keep_drained()), NULL for the
 * orphans of a service
 * a reload removed. A connection counts from its connect on (claimed), not
 * once established (active): one still connecting when the reload removed
 * its backend is established to it later, and must be in its series and
 * closed at its deadline like the others. Those closed at the deadline are
 * still counted in its series as they end, moments later.
 */
static void reap_drained(struct hlb_pool *p, struct hlb_pool_service *s,
			 struct hlb_pool_backend **v, uint32_t *n, uint64_t now)
{
	char qn[POOL_NAME_QUOTED];
	char q[POOL_ADDRESS_QUOTED];
	uint32_t i = 0;

	while (i < *n) {
		struct hlb_pool_backend *b = v[i];
		uint64_t held = atomic_load(&b->rt->claimed);

		/* timeouts.drain: never ends with its last connection, and so does the time a
		 * reload adding it back takes it back (service_gone_find(), orphan_take()): kept
		 * to a deadline never reached, a drained one was kept for good, and so was its
		 * removed service (pool_reap_retired()) */
		if (held == 0 && hlb_pool_backend_drain_deadline(b) == UINT64_MAX)
			backend_drain_until(b, now);
		/* an orphan of a service (orphan_of) with none is kept to its deadline too: a
		 * reload adding its service back takes it back until then (orphan_take()) */
		if ((held == 0 && (s || !b->orphan_of)) ||
		    now >= hlb_pool_backend_drain_deadline(b)) {
			if (held) {
				/* a removed service's backends (orphans) have none */
				char svc[HASHLB_NAME_MAX + 16] = "";

				if (b->svc)
					snprintf(svc, sizeof(svc), "service=%s ",
						 b->svc->cfg->name);
				pool_log(p, HLB_LOG_WARN,
					 "drain timeout: closing a removed backend's connections",
					 "%sbackend=%s address=%s connections=%" PRIu64, svc,
					 backend_qname(b, qn),
					 hlb_log_quote(b->rt->address, q, sizeof(q)), held);
				hlb_backend_close(b->rt, HLB_CLOSE_REMOVED);
			}
			if (s)
				service_keep_drained(s, b, now);
			else
				backend_free(b);
			v[i] = v[--*n];
		} else {
			i++;
		}
	}
}

/*
 * Maglev: backend <j> of <s> fails connects, or checks, but is still in the table
 * (backend_failing()). Its
 * clients are retried on the next backend of their preference list, which
 * on Maglev is mostly not where they go once it is marked down (the table
 * built from the survivors): they would move twice. So unless the current
 * retry table has it down already, the next build makes one with every
 * such backend down (a rebuild, one survivor build), and retries away from
 * them go there (conn_connect()); its verdict then copies that table (refresh_base()
 * in runtime.c) rather than populate the survivors' again. <debounce_ms>: when, see
 * service_schedule_in().
 * Whether the ticks must still watch it: failing, and the published tables
 * do not have it down yet (no snapshot of these backends, or a build to come).
 * Once they do, nothing is left to do while it fails, and a new run of
 * failures after it recovers is the worker's word again (hlb_pool_failing()),
 * or its next failed check's (backend_check_while_up()).
 */
static bool retry_watch(struct hlb_pool_service *s, uint32_t j, uint64_t debounce_ms)
{
	const struct hlb_snapshot *snap;

	if (s->cfg->table.scheme != HASHLB_SCHEME_MAGLEV || !backend_failing(s->backends[j]))
		return false;
	snap = hlb_service_snapshot(s->rt);
	if (!snap || j >= snap->n_backends || snap->backends[j] != s->backends[j]->rt)
		return true;
	if (hashlb_table_backend_down(snap->table, j) ||
	    (snap->retry_table && hashlb_table_backend_down(snap->retry_table, j)))
		return false;
	service_schedule_in(s, false, debounce_ms);
	return true;
}

/*
 * Maglev: <b>'s run of failed checks ended with a check passed. The retry table made for them
 * (retry_watch()) is dropped at a build, when no backend of the service fails any more (the
 * next snapshot then has no retry table). The table of that build is made from it (need_full
 * aside), and keeps its survivors' table, as a table back up after an outage keeps that
 * outage's: 2 bytes a slot where the retry table held 4, and <b>'s next run of failed checks,
 * or its verdict, copies it rather than populate it again. With another failing connects
 * meanwhile (down in that table too), the build makes the retry table of the others alone:
 * else the clients retried away from them were kept off <b>, up all along, and went to it
 * once they were down (moved twice), and their verdict, its down set another, populated.
 */
static void retry_release(struct hlb_pool_backend *b)
{
	struct hlb_pool_service *s = b->svc;
	const struct hlb_snapshot *snap = hlb_service_snapshot(s->rt);

	if (s->cfg->table.scheme != HASHLB_SCHEME_MAGLEV || !snap || !snap->retry_table)
		return;
	if (!service_failing(s))
		s->retry_released = true;
	else if (b->idx >= snap->n_backends || snap->backends[b->idx] != b->rt ||
		 !hashlb_table_backend_down(snap->retry_table, b->idx))
		return;
	service_schedule(s, false);
}

void hlb_pool_failing(struct hlb_pool *p)
{
	for (uint32_t i = 0; i < p->n_svcs; i++) {
		struct hlb_pool_service *s = p->svcs[i];

		if (s->hp.passive_hold_ms) /* passive-only health counts the failures */
			s->tick_all = true;
		if (s->cfg->table.scheme != HASHLB_SCHEME_MAGLEV)
			continue;
		/* no debounce: the worker's news is one per burst already, and
		 * every connect retried meanwhile may land where it will not stay */
		for (uint32_t j = 0; j < s->n_backends; j++)
			retry_watch(s, j, 0);
		s->tick_all = true; /* watched by the ticks until its tables have it down */
	}
}

/*
 * Passive-only health holds out none of <s>'s backends while it is the last that takes clients
 * (backend_tick()), but an operator (drain, maint, weight 0) or a reload taking the last other
 * one out leaves those held before held until their holds end (up to 8 holds, or a flap
 * penalty's decay), with no backend taking clients. So <b>, held but ready with a weight, the
 * one back first by itself (service_first_back()), is released then: up on trial at once, as
 * at its hold's end, its flap damping forgotten, all of it (as when it leaves maint), said
 * cause=last_backend; as the last one, its failures count for nothing until another takes
 * clients again.
 */
static void backend_release_last(struct hlb_pool_backend *b, uint64_t now)
{
	bool held = !b->health.raw_up;

	/* all its damping, not only what held it: a penalty kept, short of holding it, would
	 * hold it for flapping at its next down, while one released held for flapping starts
	 * from none */
	hlb_health_forget_damping(&b->health, now);
	if (b->health.hold_until_ms) /* unlike on leaving maint: the release is of its hold too */
		b->health.hold_until_ms = now;
	if (!hlb_health_tick(&b->health, &b->svc->hp, now))
		return;
	if (held && b->health.raw_up)
		backend_trial_start(b);
	backend_health_changed(b, now, "last_backend", 0);
}

/* Whether <b> (passive-only health) is held out of taking clients it could take: ready with a
 * weight, down for a hold or for flapping */
static bool backend_held_out(const struct hlb_pool_backend *b)
{
	return b->admin == HASHLB_ADMIN_READY && b->rt->weight && !b->health.up &&
	       (b->health.hold_until_ms || b->health.suppressed);
}

/*
 * Of <s>'s backends held out by passive-only health (one at least), the one the ticks would let
 * up first: its hold's end, or its penalty's decay if held for flapping, whichever is later (one
 * held for flapping alone, its hold over or carried over an upgrade without one, has no hold end,
 * but is out until its damping decays, maybe 100 s past another's hold). The first of those
 * equal. Looked for only when none takes clients: a log2() and exp2() a backend.
 */
static struct hlb_pool_backend *service_first_back(const struct hlb_pool_service *s, uint64_t now)
{
	struct hlb_pool_backend *first = NULL;
	uint64_t first_at = 0;

	for (uint32_t j = 0; j < s->n_backends; j++) {
		struct hlb_pool_backend *b = s->backends[j];
		uint64_t at;

		if (!backend_held_out(b))
			continue;
		at = hlb_health_back_at(&b->health, &s->hp, now);
		if (!first || at < first_at) {
			first = b;
			first_at = at;
		}
	}
	return first;
}

/*
 * Each backend of <s>, at a tick: its passive health and flap decay (checks
 * on), its ramp, and on Maglev its failing connects (retry_watch()). Only
 * while one of them may be under way (s->tick_all): with checks off, every
 * backend every 50 ms read two cache lines for nothing, 80 % of the idle
 * control thread's time at 5,000 backends. Whether any still is, for the
 * next tick.
 */
static bool service_tick_backends(struct hlb_pool_service *s, uint64_t now)
{
	bool again = s->cfg->health.enabled, taken = false, held_out = false;
	uint64_t hold_next = 0;

	for (uint32_t j = 0; j < s->n_backends; j++) {
		struct hlb_pool_backend *b = s->backends[j];

		if (s->seen_stale) /* the failures of the ticks skipped are not fresh */
			b->seen_run = atomic_load_explicit(&b->rt->consecutive_fail,
							   memory_order_relaxed);
		backend_tick(b, now);
		again |= retry_watch(s, j, HLB_POOL_DEBOUNCE_MS) || b->ramp_start_ms;
		taken |= backend_takes_clients(b);
		held_out |= s->hp.passive_hold_ms && backend_held_out(b);
		/* passive-only: a run of failures of a backend taking clients (up, ready, weight
		 * above 0; one that takes them again is followed again: backend_returns()) to
		 * follow (a new run is the worker's word: hlb_pool_failing(); one that gets no
		 * connect more is watched as every backend is with checks on), one held down
		 * for flapping until its penalty decays, and the first hold to end, for
		 * pool_tick() (one in maint waits for it to leave: hlb_pool_set_admin()) */
		if (!hlb_pool_backend_passive_only(b))
			continue;
		again |= (b->seen_run && backend_takes_clients(b)) || b->health.suppressed;
		if (b->health.hold_until_ms && (!hold_next || b->health.hold_until_ms < hold_next))
			hold_next = b->health.hold_until_ms;
	}
	/* none takes clients: the first held to come back does (<hold_next> maybe its: a spare
	 * visit) */
	if (held_out && !taken)
		backend_release_last(service_first_back(s, now), now);
	s->seen_stale = false;
	s->tick_visits += s->n_backends;
	s->hold_next_ms = hold_next;
	return again;
}

static void pool_tick(void *arg)
{
	struct hlb_pool *p = arg;
	uint64_t now = hlb_now_ms();

	p->ticks++;
	for (uint32_t i = 0; i < p->n_svcs; i++) {
		struct hlb_pool_service *s = p->svcs[i];

		s->ticks++;
		if (s->tick_all || (s->hold_next_ms && now >= s->hold_next_ms))
			s->tick_all = service_tick_backends(s, now);
		else if (!s->hp.passive_hold_ms) /* passive-only: each run's start wakes it */
			s->seen_stale = true;
		reap_drained(p, s, s->removed, &s->n_removed, now);
		service_drop_drained(s, now);
		service_let_go(s, false);
	}
	reap_drained(p, NULL, p->orphans, &p->n_orphans, now);
	pool_reap_retired(p, false, now);
	hlb_timer_arm(p->loop, &p->tick, now + HLB_POOL_TICK_MS);
}

/* Checks off in <c>: no verdict holds <b> down any more. Whether it was (unsaid:
 * backend_unchecked_up() says it). <was_passive_only>: its health was passive-only's before. */
static bool backend_unchecked_set_up(struct hlb_pool_backend *b, const struct hashlb_service_cfg *c,
				     bool was_passive_only, uint64_t now)
{
	/* passive-only no more (checks on, passive off, a lone backend): its trial and hold growth
	 * end now, not at a tick that runs only while passive-only applies (a reload bringing
	 * it back would otherwise hold it at its next failure, for twice the hold before) */
	if (!b->svc->hp.passive_hold_ms)
		hlb_health_passive_end(&b->health);
	if (c->health.enabled || b->health.up)
		return false;
	/* held by passive-only health, which the new config keeps: until its hold is over, or
	 * held for flapping until its penalty decays (a checked one's damping ends here) */
	if ((b->health.hold_until_ms || (was_passive_only && b->health.suppressed)) &&
	    hashlb_service_passive_only(c) == HASHLB_PASSIVE_ONLY_APPLIES)
		return false;
	backend_health_restart(b, true, now);
	backend_set_healthy(b, true);
	return true;
}

/* <b> of <c>, held down by a verdict, up without a check for <cause>: said. */
static void backend_up_log(const struct hlb_pool_backend *b, const struct hashlb_service_cfg *c,
			   const char *cause)
{
	char qn[POOL_NAME_QUOTED];

	/* its "backend down" line had no end: it took clients again unsaid */
	pool_log(b->svc->pool, HLB_LOG_INFO, "backend up",
		 "service=%s backend=%s cause=%s flaps=%" PRIu64, c->name, backend_qname(b, qn),
		 cause, b->health.flaps);
}

/* <b>, held down by a verdict, up as checks are off in <c>: said. */
static void backend_unchecked_up_log(const struct hlb_pool_backend *b,
				     const struct hashlb_service_cfg *c)
{
	backend_up_log(b, c, "unchecked");
}

/* Checks off in <c>: no verdict holds <b> down any more. Whether it was (said). */
static bool backend_unchecked_up(struct hlb_pool_backend *b, const struct hashlb_service_cfg *c,
				 bool was_passive_only, uint64_t now)
{
	if (!backend_unchecked_set_up(b, c, was_passive_only, now))
		return false;
	backend_unchecked_up_log(b, c);
	return true;
}

/* ---- orphans: the backends of services a reload removed ---- */

static bool addr_equal(const struct sockaddr_storage *a, socklen_t al,
		       const struct sockaddr_storage *b, socklen_t bl)
{
	return al == bl && !memcmp(a, b, al);
}

/*
 * From <hit>, an element of sorted <base> (of <size> bytes each) that bsearch() found equal
 * to <key> under <cmp>, back to the first equal to it: bsearch() hits any of them, and a name
 * may stand more than once (at other addresses).
 */
static void *sorted_first(const void *key, const void *base, const void *hit, size_t size,
			  int (*cmp)(const void *key, const void *e))
{
	const char *h = hit;

	while (h > (const char *)base && !cmp(key, h - size))
		h -= size;
	return (void *)h;
}

/* Orphans <x> and <y> (of a service) by service, then name. */
static int orphan_cmp(const void *x, const void *y)
{
	const struct hlb_pool_backend *a = *(struct hlb_pool_backend *const *)x;
	const struct hlb_pool_backend *b = *(struct hlb_pool_backend *const *)y;

	return hlb_name_pair_cmp(a->orphan_of, a->rt->name, b->orphan_of, b->rt->name);
}

/*
 * Before a reload's services are made: <p>'s orphans of a service, sorted (orphan_cmp()),
 * for orphan_take(), a lookup each rather than a scan of them all per backend added
 * (orphans_sorted_end() ends it). -ENOMEM.
 */
static int orphans_sorted_begin(struct hlb_pool *p)
{
	uint32_t n = 0;

	p->orphans_sorted = calloc(p->n_orphans ? p->n_orphans : 1, sizeof(*p->orphans_sorted));
	if (!p->orphans_sorted)
		return -ENOMEM;
	for (uint32_t k = 0; k < p->n_orphans; k++)
		if (p->orphans[k]->orphan_of)
			p->orphans_sorted[n++] = p->orphans[k];
	qsort(p->orphans_sorted, n, sizeof(*p->orphans_sorted), orphan_cmp);
	p->n_orphans_sorted = n;
	return 0;
}

/* The reload's services are made: those orphans they took (<svc> set) leave the orphans. */
static void orphans_sorted_end(struct hlb_pool *p)
{
	uint32_t n = 0;

	for (uint32_t k = 0; k < p->n_orphans; k++)
		if (!p->orphans[k]->svc)
			p->orphans[n++] = p->orphans[k];
	p->n_orphans = n;
	free(p->orphans_sorted);
	p->orphans_sorted = NULL;
	p->n_orphans_sorted = 0;
}

/* The orphan of service <svc> named and addressed as <nb> not yet taken (orphan_take()),
 * looked up in the orphans sorted (orphans_sorted_begin()); NULL if none. */
static struct hlb_pool_backend *orphan_find(const struct hlb_pool *p, const char *svc,
					    const struct hashlb_backend_cfg *nb)
{
	struct hlb_pool_backend key = { .orphan_of = (char *)svc }, *k = &key, **hit, **end;
	struct hlb_backend key_rt = { 0 };

	if (!p->n_orphans_sorted)
		return NULL;
	key_rt.name = (char *)nb->name;
	key.rt = &key_rt;
	hit = bsearch(&k, p->orphans_sorted, p->n_orphans_sorted, sizeof(*hit), orphan_cmp);
	if (!hit)
		return NULL;
	hit = sorted_first(&k, p->orphans_sorted, hit, sizeof(*hit), orphan_cmp);
	end = p->orphans_sorted + p->n_orphans_sorted;
	for (; hit < end && !orphan_cmp(hit, &k); hit++) {
		struct hlb_pool_backend *o = *hit;

		if (!o->svc && addr_equal(&o->rt->addr, o->rt->addr_len, &nb->addr, nb->addr_len))
			return o;
	}
	return NULL;
}

/* What taking an orphan back changes of it (service_new(): the config's settings, its checks
 * off), as it was: the reload may fail yet (orphan_give_back()). */
struct orphan_was {
	uint32_t idx, cfg_weight, cfg_max_conns, up_fails, weight, max_conns, admit;
	enum hashlb_admin_state cfg_admin, admin;
	struct hlb_health health;
	struct hlb_check_errs check_errs;
	bool check_latency_old, up_fails_logged, backup, healthy;
	uint64_t ramp_start_ms, health_since_ns;
};

/*
 * What taking orphan <b> back changes of it, one list both ways: into <was> (<back> false,
 * orphan_take()), or back from it (<back> true, orphan_give_back()), so that no field is
 * kept on one side and missed on the other.
 */
static void orphan_was_move(struct hlb_pool_backend *b, struct orphan_was *was, bool back)
{
#define WAS(f, x)                     \
	do {                          \
		if (back)             \
			(x) = was->f; \
		else                  \
			was->f = (x); \
	} while (0)
#define WAS_ATOMIC(f, x)                            \
	do {                                        \
		if (back)                           \
			atomic_store(&(x), was->f); \
		else                                \
			was->f = atomic_load(&(x)); \
	} while (0)
	WAS(idx, b->idx);
	WAS(cfg_weight, b->cfg_weight);
	WAS(cfg_max_conns, b->cfg_max_conns);
	WAS(cfg_admin, b->cfg_admin);
	WAS(admin, b->admin);
	WAS(health, b->health);
	WAS(check_errs, b->check_errs);
	WAS(check_latency_old, b->check_latency_old);
	WAS(up_fails, b->up_fails);
	WAS(up_fails_logged, b->up_fails_logged);
	WAS(ramp_start_ms, b->ramp_start_ms);
	WAS(weight, b->rt->weight);
	WAS(backup, b->rt->backup);
	WAS_ATOMIC(max_conns, b->rt->max_conns);
	WAS_ATOMIC(admit, b->rt->admit);
	WAS_ATOMIC(healthy, b->rt->healthy);
	WAS_ATOMIC(health_since_ns, b->rt->health_since_ns);
#undef WAS_ATOMIC
#undef WAS
}

/*
 * The orphan of service <svc> named and addressed as <nb>, taken back for <s> with its
 * connections and what was set at run time, whether it held connections or not: a reload
 * adds back the service an earlier one removed (a config written in two steps, a removal
 * undone) within its drain timeout, and its connections must not be cut at the drain deadline
 * while it serves again, nor a backend set to maint at run time take clients, as a backend's
 * are not and does not (service_reclaim()). NULL if none (or outside hlb_pool_apply()). It
 * leaves the orphans at orphans_sorted_end(), and stays orphan_of its service until the
 * reload is applied (orphans_adopted()): one that fails gives it back (service_free()).
 */
static struct hlb_pool_backend *orphan_take(struct hlb_pool *p, struct hlb_pool_service *s,
					    const char *svc, const struct hashlb_backend_cfg *nb)
{
	struct hlb_pool_backend *o = orphan_find(p, svc, nb);

	if (!o)
		return NULL;
	orphan_was_move(o, &s->orphans_was[s->n_backends], false);
	o->svc = s;
	return o;
}

/* Orphan <b> taken back by orphan_take() for a reload that failed: an orphan
 * again, at its deadline, as it was before (<was>): what the rejected config gave it
 * (service_new()) would otherwise stay, and what was set at run time be lost (the array
 * has its place: taking it out kept it; while the reload's services are made, it is
 * still there). */
static void orphan_give_back(struct hlb_pool *p, struct hlb_pool_backend *b, struct orphan_was *was)
{
	hlb_check_stop(&b->check);
	orphan_was_move(b, was, true);
	atomic_store(&b->rt->admin, (int)HASHLB_ADMIN_DRAIN);
	b->svc = NULL;
	if (!p->orphans_sorted)
		p->orphans[p->n_orphans++] = b;
}

/* Whether <b> has a state, weight or max_connections set at run time (hashlb ctl set) where its
 * config says another: what a reload keeps (hlb_pool_overrides()), an upgrade carries
 * (hlb_pool_handover()) and a backend taken back by a reload keeps. */
static bool backend_set_at_run_time(const struct hlb_pool_backend *b)
{
	return b->admin != b->cfg_admin || b->rt->weight != b->cfg_weight ||
	       atomic_load(&b->rt->max_conns) != b->cfg_max_conns;
}

/* Backend <b> of <s>, taken back by the reload under way (service_reclaim(), orphan_take())
 * and given the config's settings: what was set at run time and stays with it, said (none:
 * nothing). */
static void service_reclaim_log(struct hlb_pool_service *s, const struct hlb_pool_backend *b)
{
	char qn[POOL_NAME_QUOTED];

	if (backend_set_at_run_time(b))
		pool_log(s->pool, HLB_LOG_INFO,
			 "backend added back: what was set at run time stays",
			 "service=%s backend=%s state=%s weight=%u max_connections=%u",
			 s->cfg->name, backend_qname(b, qn), hashlb_admin_state_name(b->admin),
			 b->rt->weight, atomic_load(&b->rt->max_conns));
}

/*
 * The reload that took <s>'s orphans back is applied: they serve again, no
 * deadline. The service retired with them leaves their counters out of the
 * totals it logs once its last connection ends: <s> counts them now, the
 * bytes of their whole life with the rest (counted once).
 */
static void orphans_adopted(struct hlb_pool *p, struct hlb_pool_service *s)
{
	uint64_t held = 0;

	for (uint32_t j = 0; j < s->n_backends; j++) {
		struct hlb_pool_backend *b = s->backends[j];

		if (!b->orphan_of)
			continue;
		held += atomic_load(&b->rt->claimed);
		for (uint32_t i = 0; i < p->n_retired; i++) {
			struct retired *r = &p->retired[i];

			for (uint32_t k = 0; k < r->n_bes && !strcmp(r->name, b->orphan_of); k++) {
				if (r->bes[k] != b->rt)
					continue;
				hlb_backend_unref(r->bes[k]);
				r->bes[k] = r->bes[--r->n_bes];
				break;
			}
		}
		free(b->orphan_of);
		b->orphan_of = NULL;
		backend_drain_until(b, 0);
		/* held down, up as its checks are off (service_new()) */
		if (!s->orphans_was[j].health.up && b->health.up)
			backend_unchecked_up_log(b, s->cfg);
		service_reclaim_log(s, b);
	}
	free(s->orphans_was); /* none given back now */
	s->orphans_was = NULL;
	/* the drain its removal logged ends here, none closed */
	if (held)
		pool_log(p, HLB_LOG_INFO, "service added back: its draining connections stay",
			 "service=%s connections=%" PRIu64, s->cfg->name, held);
}

/* What a reload changed of a kept backend: its settings as they were (backend_cfg_apply()). */
struct backend_change {
	unsigned what; /* BACKEND_CHANGED_* */
	uint32_t weight, max_conns;
	bool backup, close_on_return;
	enum hashlb_admin_state admin;
	/* the config's before, for a change to what was set at run time already */
	uint32_t cfg_weight, cfg_max_conns;
	enum hashlb_admin_state cfg_admin;
	const char *address; /* BACKEND_CHANGED_ADDRESS: the one it leaves */
};

enum {
	BACKEND_CHANGED_WEIGHT = 1u << 0,
	BACKEND_CHANGED_BACKUP = 1u << 1,
	BACKEND_CHANGED_MAX_CONNS = 1u << 2,
	BACKEND_CHANGED_STATE = 1u << 3,
	BACKEND_CHANGED_ADDRESS = 1u << 4,
	BACKEND_CHANGED_CLOSE_ON_RETURN = 1u << 5,
};

/*
 * Whether the reload under way may write one more line on what it changed: at
 * most HLB_POOL_CHANGE_LINES (a reload of 5,000 new backends writes no 5,000
 * lines), those left out counted for hlb_pool_apply() to say. False too when
 * its caller asked for no such line (a re-resolution, which writes its own).
 */
static bool change_line(struct hlb_pool *p)
{
	if (!p->changes)
		return false;
	if (p->change_lines < HLB_POOL_CHANGE_LINES) {
		p->change_lines++;
		return true;
	}
	p->changes_unlogged++;
	return false;
}

/* A backend of <s> added or removed by the reload under way: counted, and logged. */
static void change_backend(struct hlb_pool_service *s, const struct hlb_pool_backend *b, bool added)
{
	char qn[POOL_NAME_QUOTED], qa[POOL_ADDRESS_QUOTED];
	struct hlb_pool *p = s->pool;

	if (!p->changes)
		return;
	if (added)
		p->changes->backends_added++;
	else
		p->changes->backends_removed++;
	if (change_line(p))
		pool_log(p, HLB_LOG_INFO,
			 added ? "reload: backend added" : "reload: backend removed",
			 "service=%s backend=%s address=%s weight=%u", s->cfg->name,
			 backend_qname(b, qn), hlb_log_quote(b->rt->address, qa, sizeof(qa)),
			 b->rt->weight);
}

/*
 * A setting's part of a "reload: backend changed" line, into <buf>: " KEY=NOW KEY_was=WAS", what
 * it served before; or, when that stays (the config now gives what was set at run time),
 * " KEY=NOW KEY_config_was=CFG_WAS": what changed is the config's (not "weight=3 weight_was=3").
 */
static void setting_was(char *buf, size_t size, const char *key, const char *now, const char *was,
			const char *cfg_was)
{
	bool kept = !strcmp(now, was);

	snprintf(buf, size, " %s=%s %s_%swas=%s", key, now, key, kept ? "config_" : "",
		 kept ? cfg_was : was);
}

/* A number as text, for setting_was(). */
struct u32_text {
	char s[12];
};

static struct u32_text u32_text(uint32_t v)
{
	struct u32_text t;

	snprintf(t.s, sizeof(t.s), "%u", v);
	return t;
}

/* Backend <b> of <s> the reload under way changed as <chg> says (its settings in effect before). */
static void change_backend_settings(struct hlb_pool_service *s, const struct hlb_pool_backend *b,
				    const struct backend_change *chg)
{
	char qn[POOL_NAME_QUOTED], qa[POOL_ADDRESS_QUOTED], qw[POOL_ADDRESS_QUOTED];
	char address[sizeof(" address_was=") + POOL_ADDRESS_QUOTED] = "";
	char weight[64] = "", backup[48] = "", max[80] = "", state[64] = "", cor[64] = "";
	struct hlb_pool *p = s->pool;

	if (!p->changes || !chg->what)
		return;
	p->changes->backends_changed++;
	if (!change_line(p))
		return;
	if (chg->what & BACKEND_CHANGED_WEIGHT)
		setting_was(weight, sizeof(weight), "weight", u32_text(b->rt->weight).s,
			    u32_text(chg->weight).s, u32_text(chg->cfg_weight).s);
	if (chg->what & BACKEND_CHANGED_BACKUP)
		snprintf(backup, sizeof(backup), " backup=%s backup_was=%s",
			 b->rt->backup ? "true" : "false", chg->backup ? "true" : "false");
	if (chg->what & BACKEND_CHANGED_CLOSE_ON_RETURN)
		snprintf(cor, sizeof(cor), " close_on_return=%s close_on_return_was=%s",
			 s->cfg->backends[b->idx].close_on_return ? "true" : "false",
			 chg->close_on_return ? "true" : "false");
	if (chg->what & BACKEND_CHANGED_MAX_CONNS)
		setting_was(max, sizeof(max), "max_connections",
			    u32_text(atomic_load(&b->rt->max_conns)).s, u32_text(chg->max_conns).s,
			    u32_text(chg->cfg_max_conns).s);
	if (chg->what & BACKEND_CHANGED_STATE)
		setting_was(state, sizeof(state), "state", hashlb_admin_state_name(b->admin),
			    hashlb_admin_state_name(chg->admin),
			    hashlb_admin_state_name(chg->cfg_admin));
	if (chg->what & BACKEND_CHANGED_ADDRESS)
		snprintf(address, sizeof(address), " address_was=%s",
			 hlb_log_quote(chg->address, qw, sizeof(qw)));
	pool_log(p, HLB_LOG_INFO, "reload: backend changed",
		 "service=%s backend=%s address=%s%s%s%s%s%s%s", s->cfg->name, backend_qname(b, qn),
		 hlb_log_quote(b->rt->address, qa, sizeof(qa)), address, weight, backup, cor, max,
		 state);
}

/*
 * <b> (kept by a reload: the same name and address) takes the config's
 * settings <nb> of service <c>, those set at run time staying unless the
 * config changes them; whether the table changes. <chg> (or NULL) gets
 * the config's settings it changed, as they were in effect (one set at
 * run time, not the config's before: what <b> served with).
 */
static bool backend_cfg_apply(struct hlb_pool_backend *b, const struct hashlb_backend_cfg *nb,
			      const struct hashlb_service_cfg *c, struct backend_change *chg)
{
	struct backend_change was = { 0 };
	bool full = false;

	if (nb->weight != b->cfg_weight) {
		was.what |= BACKEND_CHANGED_WEIGHT;
		was.weight = b->rt->weight;
		was.cfg_weight = b->cfg_weight;
		b->cfg_weight = nb->weight;
		b->rt->weight = nb->weight;
		if (!was.weight)
			backend_returns(b, hlb_now_ms());
		full = true;
	}
	if (nb->backup != b->rt->backup) {
		was.what |= BACKEND_CHANGED_BACKUP;
		was.backup = b->rt->backup;
		b->rt->backup = nb->backup;
		full = true;
	}
	/* a cap the config changes applies to new connections at
	 * once (none is closed); one set at runtime stays otherwise,
	 * but not into kernel steering, which counts no connection
	 * (its config refuses a cap, and so does /set) */
	if (nb->max_connections != b->cfg_max_conns || c->steering == HASHLB_STEERING_KERNEL) {
		if (nb->max_connections != b->cfg_max_conns) {
			was.what |= BACKEND_CHANGED_MAX_CONNS;
			was.max_conns = atomic_load(&b->rt->max_conns);
			was.cfg_max_conns = b->cfg_max_conns;
		}
		b->cfg_max_conns = nb->max_connections;
		hlb_pool_set_max_connections(b, nb->max_connections);
	}
	if (nb->admin != b->cfg_admin) {
		was.what |= BACKEND_CHANGED_STATE;
		was.admin = b->admin;
		was.cfg_admin = b->cfg_admin;
		b->cfg_admin = nb->admin;
		hlb_pool_set_admin(b, nb->admin);
	}
	if (chg) {
		chg->what |= was.what;
		chg->weight = was.weight;
		chg->backup = was.backup;
		chg->max_conns = was.max_conns;
		chg->admin = was.admin;
		chg->cfg_weight = was.cfg_weight;
		chg->cfg_max_conns = was.cfg_max_conns;
		chg->cfg_admin = was.cfg_admin;
	}
	return full;
}

/* ---- services ---- */

static void service_health_params(struct hlb_pool_service *s)
{
	const struct hashlb_health_cfg *h = &s->cfg->health;

	s->hp.rise = h->rise ? h->rise : 1;
	s->hp.fall = h->fall ? h->fall : 1;
	s->hp.half_life_ms = hlb_health_half_life(h->interval_ms, s->hp.rise, s->hp.fall);
	/* checks off: the forwarder's failed connects alone take a backend down, for a hold */
	s->hp.passive_hold_ms = hashlb_service_passive_only(s->cfg) == HASHLB_PASSIVE_ONLY_APPLIES
					? h->passive_hold_ms
					: 0;
}

/* Start every backend's checks, spread evenly over the interval. */
static void service_checks_start(struct hlb_pool_service *s)
{
	uint64_t now = hlb_now_ms();

	for (uint32_t i = 0; i < s->n_backends; i++)
		backend_check_spread(s->backends[i], now);
}

/* Stops checks and timers, drops the backends and the runtime service. */
static void service_free(struct hlb_pool_service *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->n_backends; i++) {
		struct hlb_pool_backend *b = s->backends[i];

		if (b->orphan_of) /* taken back by a reload that failed: an orphan again */
			orphan_give_back(s->pool, b, &s->orphans_was[i]);
		else
			backend_free(b);
	}
	for (uint32_t i = 0; i < s->n_removed; i++)
		backend_free(s->removed[i]);
	for (uint32_t i = 0; i < s->n_drained; i++)
		backend_free(s->drained[i]);
	service_let_go(s, true);
	hlb_timer_cancel(s->pool->loop, &s->build_timer);
	free(s->backends);
	free(s->removed);
	free(s->drained);
	free(s->gone_held);
	free(s->shares);
	hlb_snapshot_free(s->unpublished); /* never read: no RCU */
	free(s->orphans_was);
	/* retired, or taken back by a reload that failed: it reads no config of ours */
	if (s->rt && atomic_load(&s->rt->removed))
		s->rt->cfg = NULL;
	hlb_service_unref(s->rt);
	free(s);
}

/* A flap penalty below this is not handed over: every backend that ever went down keeps
 * one that only tends to 0, and a line each would be carried for nothing. */
#define HANDOVER_PENALTY_MIN 0.05

void hlb_pool_handover(const struct hlb_pool *p, struct hlb_buf *o)
{
	uint64_t now = hlb_now_ms();

	for (uint32_t i = 0; i < p->n_svcs; i++) {
		const struct hlb_pool_service *s = p->svcs[i];

		for (uint32_t j = 0; j < s->n_backends; j++) {
			const struct hlb_pool_backend *b = s->backends[j];
			uint32_t max = atomic_load(&b->rt->max_conns);
			double pen = hlb_health_penalty(&b->health, &s->hp, now);
			char ramp[24] = "-", addr[HASHLB_ADDR_STRLEN], hold[48] = "-";
			/* in maint too: held still as it leaves (hlb_pool_set_admin()) */
			bool holds = s->hp.passive_hold_ms && b->health.holds;
			bool assumed = b->health.up && b->health.assumed;

			hashlb_addr_format(&b->rt->addr, addr, sizeof(addr));
			if (hashlb_addr_is_name(b->rt->address) && !strchr(b->rt->name, '@'))
				hlb_buf_printf(o, HLB_HANDOVER_RESOLVED, s->cfg->name, b->rt->name,
					       b->rt->address, addr);
			/* each by name and address: one this process never had (the new config's),
			 * or had at another address, was seen up by no check of it */
			if (hlb_pool_backend_checked(b) && b->health.up && !b->health.assumed)
				hlb_buf_printf(o, HLB_HANDOVER_SEEN, s->cfg->name, b->rt->name,
					       addr);
			if (!backend_set_at_run_time(b) && b->health.up &&
			    pen < HANDOVER_PENALTY_MIN && !b->ramp_start_ms && !holds)
				continue;
			if (holds)
				snprintf(hold, sizeof(hold), "%" PRIu64 "/%" PRIu32 "/%" PRIu32,
					 b->health.hold_until_ms > now
						 ? b->health.hold_until_ms - now
						 : 0,
					 b->health.hold_ms, b->health.holds);
			if (b->ramp_start_ms)
				snprintf(ramp, sizeof(ramp), "%" PRIu64,
					 now > b->ramp_start_ms ? now - b->ramp_start_ms : 0);
			hlb_buf_printf(o, HLB_HANDOVER_LINE, s->cfg->name, b->rt->name,
				       hashlb_admin_state_name(b->admin),
				       hashlb_admin_state_name(b->cfg_admin), b->rt->weight,
				       b->cfg_weight, max, b->cfg_max_conns,
				       !b->health.up ? "down"
				       : assumed     ? "assumed"
						     : "up",
				       pen, b->health.suppressed ? "yes" : "no", ramp, addr, hold);
		}
	}
}

/*
 * A backend a line of the hashlb this one replaces names: its service, its name and the address
 * it connected to there (as written, from a process of before; NULL: none sent). An
 * HLB_HANDOVER_SEEN line is that alone (a backend its checks saw up), and the first member of
 * an HLB_HANDOVER_LINE's struct handover: both sorted and looked up so (handover_find()).
 */
struct handover_backend {
	char *svc, *name, *address;
};

/* One HLB_HANDOVER_LINE of the hashlb this one replaces, parsed. */
struct handover {
	struct handover_backend at; /* first: handover_find() */
	struct hlb_handover_settings set;
	bool down;
	bool assumed; /* up only as assumed there (health=assumed) */
	double penalty; /* flap damping; 0 from a process that sent none */
	bool held; /* the penalty held it down */
	/* in slow start there, ramp_ms into it; false from a process that sent none */
	bool ramping;
	uint64_t ramp_ms;
	/* passive-only health there: <holds> in a row, the last <hold_ms> long, <hold_left_ms> of
	 * it left (0: up on trial); holds 0 if none, or from a process that sent none */
	uint64_t hold_left_ms;
	uint32_t hold_ms, holds;
};

/* Of two arrays whose elements begin with a struct handover_backend: by service, then name. */
static int handover_cmp(const void *x, const void *y)
{
	const struct handover_backend *a = x, *b = y;

	return hlb_name_pair_cmp(a->svc, a->name, b->svc, b->name);
}

/* The element of <v> (<n> of <size> bytes, each beginning with a struct handover_backend,
 * sorted by handover_cmp()) for backend <name> of service <svc>, or NULL. */
static void *handover_find(const void *v, size_t n, size_t size, const char *svc, const char *name)
{
	struct handover_backend key = { .svc = (char *)svc, .name = (char *)name };

	return n ? bsearch(&key, v, n, size, handover_cmp) : NULL;
}

static void handover_backend_free(struct handover_backend *b)
{
	free(b->svc);
	free(b->name);
	free(b->address);
}

static void handover_free(struct hlb_pool *p)
{
	for (size_t i = 0; i < p->n_ho; i++)
		handover_backend_free(&p->ho[i].at);
	free(p->ho);
	p->ho = NULL;
	p->n_ho = 0;
	for (size_t i = 0; i < p->n_ho_seen; i++)
		handover_backend_free(&p->ho_seen[i]);
	free(p->ho_seen);
	p->ho_seen = NULL;
	p->n_ho_seen = 0;
}

/*
 * Whether <address>, of a line of the old process, is the endpoint backend <b> is here,
 * compared as a reload compares them, by the address connected to: one written otherwise (a
 * host name of that address, or the address for the name) is that endpoint, and one written
 * alike whose name resolves elsewhere here is another (compared as written, those two were
 * taken the other way round). An address that is no number (a line of a process that sent
 * it as written) is compared as written.
 */
static bool handover_endpoint_is(const struct hlb_pool_backend *b, const char *address)
{
	struct sockaddr_storage ss;
	socklen_t len;

	if (hashlb_addr_parse(address, true, &ss, &len) == 0)
		return addr_equal(&ss, len, &b->rt->addr, b->rt->addr_len);
	return b->rt->address && !strcmp(address, b->rt->address);
}

/*
 * Whether backend <b> of service <svc>, up here as at start (assumed), was seen up by the old
 * process's checks, at the endpoint it connects to here (its HLB_HANDOVER_SEEN line, compared
 * by handover_endpoint_is(); <h>: its
 * HLB_HANDOVER_LINE, NULL if none): then its next down is a flap, as it would have been
 * there. Only where both check it. One the old process did not have (added by this config),
 * or had at another address, no check saw up: it stays assumed.
 */
static bool handover_seen_up(const struct hlb_pool *p, const struct hlb_pool_backend *b,
			     const char *svc, const struct handover *h)
{
	const struct handover_backend *s;

	if (!b->health.up || !b->health.assumed || !hlb_pool_backend_checked(b) || !p->n_ho_seen ||
	    (h && (h->down || h->assumed)))
		return false;
	s = handover_find(p->ho_seen, p->n_ho_seen, sizeof(*p->ho_seen), svc, b->rt->name);
	return s && handover_endpoint_is(b, s->address);
}

/*
 * Whether <h>, the old process's line for backend <b>, is of the endpoint <b> is here: its
 * health, flap damping and slow start were of that address (a process that sent none: taken
 * at its word). One the new config moved starts as a reload starts it, up assumed.
 * Compared as handover_endpoint_is() compares them.
 */
static bool handover_same_address(const struct hlb_pool_backend *b, const struct handover *h)
{
	return !h->at.address || handover_endpoint_is(b, h->at.address);
}

/*
 * Parse <text> (the old hashlb's answer: a line per socket, then a
 * HLB_HANDOVER_LINE per backend it had changed or found down) once, sorted
 * for a bsearch per backend: a scan of the whole text per backend cost
 * n^2 sscanf()s, 66 s to start with 8,000 backends down. Out of memory:
 * what was parsed so far.
 */
static void handover_parse(struct hlb_pool *p, const char *text)
{
	size_t cap = 0, seen_cap = 0;

	for (const char *l = text; l && *l;) {
		char s[HASHLB_NAME_MAX + 1], name[HASHLB_NAME_MAX + 1];
		char addr[320]; /* an address as written: HASHLB_HOST_MAX and a port */
		char line[HLB_HANDOVER_LINE_MAX + 1], held[4] = "";
		struct hlb_handover_set set;
		struct handover h = { 0 };
		const char *pf;

		if (!hlb_handover_next_line(&l, line))
			continue;
		if (sscanf(line, "seen %255s %255s %319s", s, name, addr) == 3) {
			struct handover_backend sn = { strdup(s), strdup(name), strdup(addr) };

			if (!sn.svc || !sn.name || !sn.address ||
			    hlb_grow((void **)&p->ho_seen, &seen_cap, p->n_ho_seen + 1,
				     sizeof(*p->ho_seen), 64) < 0) {
				handover_backend_free(&sn);
				break;
			}
			p->ho_seen[p->n_ho_seen++] = sn;
			continue;
		}
		if (hlb_handover_set_parse(line, &set) < 0)
			continue;
		h.set = set.s;
		h.down = !strcmp(set.health, "down");
		h.assumed = !strcmp(set.health, "assumed");
		/* the damping, after the fields every version sends (none: an older one) */
		pf = strstr(line, " penalty=");
		if (pf && sscanf(pf, " penalty=%lf held=%3s", &h.penalty, held) >= 1 &&
		    h.penalty >= 0 && h.penalty < 1e6)
			h.held = !strcmp(held, "yes");
		else
			h.penalty = 0;
		/* the slow start, after those (none, or "-": not ramping, or an older one) */
		pf = strstr(line, " ramp=");
		h.ramping = pf && sscanf(pf, " ramp=%" SCNu64, &h.ramp_ms) == 1;
		/* a passive-only hold, after those (none, or "-": none, or an older one) */
		pf = strstr(line, " hold=");
		if (!pf || sscanf(pf, " hold=%" SCNu64 "/%" SCNu32 "/%" SCNu32, &h.hold_left_ms,
				  &h.hold_ms, &h.holds) != 3)
			h.holds = 0;
		/* the address connected to, after those (none: an older one) */
		pf = strstr(line, " addr=");
		if (pf && sscanf(pf, " addr=%319s", addr) == 1 && !(h.at.address = strdup(addr)))
			break;
		h.at.svc = strdup(set.svc);
		h.at.name = strdup(set.name);
		if (!h.at.svc || !h.at.name ||
		    hlb_grow((void **)&p->ho, &cap, p->n_ho + 1, sizeof(*p->ho), 64) < 0) {
			handover_backend_free(&h.at);
			break;
		}
		p->ho[p->n_ho++] = h;
	}
	if (p->n_ho)
		qsort(p->ho, p->n_ho, sizeof(*p->ho), handover_cmp);
	if (p->n_ho_seen)
		qsort(p->ho_seen, p->n_ho_seen, sizeof(*p->ho_seen), handover_cmp);
}

/*
 * The passive-only hold of backend <b> there (<h>, holds in it), carried on where passive-only
 * health applies here too: held down for what is left of it (at most the longest hold of this
 * config; one hold of this process's hashlb_backend_passive_holds_total), else up on trial, the
 * next hold as long as it would have been there. Said in <what>.
 */
static void handover_passive_hold(struct hlb_pool_backend *b, const struct handover *h, char *what)
{
	uint32_t max = b->svc->hp.passive_hold_ms * HLB_PASSIVE_HOLD_GROWTH;
	uint64_t now = hlb_now_ms();

	if (h->down && h->hold_left_ms) {
		hlb_health_init(&b->health, false, now);
		b->health.hold_until_ms = now + (h->hold_left_ms < max ? h->hold_left_ms : max);
		/* a hold under way here, counted as those begun here are: /status and /metrics
		 * would say held, for so long, by none of its holds */
		b->passive_holds++;
		atomic_store(&b->rt->healthy, false);
		strcat(what, ",down");
	} else {
		b->health.trial = true; /* up only assumed, as at a hold's end */
	}
	b->health.hold_ms = h->hold_ms < max ? h->hold_ms : max;
	b->health.holds = h->holds;
	strcat(what, ",passive_hold");
}

/*
 * What the hashlb this one replaces had set at run time for backend <b> of
 * service <c> (its HLB_HANDOVER_LINE, parsed), carried on as hlb_handover_carries()
 * says (<bc>: <b>'s config), the rule hashlb ctl upgrade's pre-check counts by too.
 * Before the first build, so the first table already has it.
 */
static void backend_handover(struct hlb_pool_backend *b, const struct hashlb_service_cfg *c,
			     const struct hashlb_backend_cfg *bc)
{
	const char *svc = c->name;
	char qn[POOL_NAME_QUOTED];
	struct hlb_pool *p = b->svc->pool;
	struct handover *h = handover_find(p->ho, p->n_ho, sizeof(*p->ho), svc, b->rt->name);
	char ramp[32] = "", what[80] = ""; /* what[]: the settings carried, ",a,b" */
	bool here, passive;
	unsigned carry;

	passive = hlb_pool_backend_passive_only(b);
	/* seen up there: its next down is a flap (not logged: most backends are) */
	if (handover_seen_up(p, b, svc, h))
		b->health.assumed = false;
	if (!h)
		return;
	/* state, weight and cap go with the name, as at a reload; health with the endpoint */
	here = handover_same_address(b, h);
	carry = hlb_handover_carries(&h->set, c, bc);
	if (carry & HLB_HANDOVER_CARRY_STATE) {
		b->admin = h->set.a;
		atomic_store(&b->rt->admin, (int)h->set.a);
		strcat(what, ",state");
	}
	if (carry & HLB_HANDOVER_CARRY_WEIGHT) {
		b->rt->weight = h->set.w;
		strcat(what, ",weight");
	}
	if (carry & HLB_HANDOVER_CARRY_MAX_CONNECTIONS) {
		atomic_store(&b->rt->max_conns, h->set.max);
		strcat(what, ",max_connections");
	}
	if (h->down && here && hlb_pool_backend_checked(b)) {
		/* as the old one last saw it, until <rise> checks pass here */
		hlb_health_init(&b->health, false, hlb_now_ms());
		atomic_store(&b->rt->healthy, false);
		b->carried_down = true;
		strcat(what, ",down");
	}
	/* in maint too (its state, carried above, or the config's): held still as it leaves */
	if (here && b->svc->hp.passive_hold_ms && h->holds)
		handover_passive_hold(b, h, what);
	if (h->penalty > 0 && here && (hlb_pool_backend_checked(b) || passive)) {
		/* its flapping goes on counting: one held down stays so until the penalty
		 * decays, as it would have in the old one, not up after <rise> checks */
		b->health.penalty = h->penalty;
		b->health.penalty_ms = hlb_now_ms();
		if (passive && h->held && b->health.up) {
			/* held for flapping alone, its hold over: raw up, out until it decays */
			b->health.up = false;
			atomic_store(&b->rt->healthy, false);
		}
		b->health.suppressed = h->held && !b->health.up;
		/* it flapped there: seen up, its next down is a flap (on trial: no flap) */
		b->health.assumed = b->health.trial;
		strcat(what, ",flap_damping");
	}
	if (h->ramping && here && b->health.up) {
		/* its slow start goes on where it was: not started here, it would admit all its
		 * clients at once (a backend starts up and not ramping) */
		backend_ramp_start(b, hlb_now_ms(), h->ramp_ms);
		if (b->ramp_start_ms)
			snprintf(ramp, sizeof(ramp), " slow_start=%.3f",
				 (double)atomic_load(&b->rt->admit) / HLB_ADMIT_ONE);
		strcat(what, ",slow_start");
	}
	/* carried= says which: a backend that only flapped once shows the config's
	 * state, weight and cap, and would read as nothing carried */
	if (what[0])
		pool_log(p, HLB_LOG_INFO, "run-time settings carried over from the old hashlb",
			 "service=%s backend=%s carried=%s state=%s weight=%u max_connections=%u "
			 "health=%s%s%s",
			 svc, backend_qname(b, qn), what + 1, hashlb_admin_state_name(b->admin),
			 b->rt->weight, atomic_load(&b->rt->max_conns),
			 b->health.up ? "up" : "down", b->health.suppressed ? " held=flapping" : "",
			 ramp);
}

uint32_t hlb_pool_resync(struct hlb_pool *p, const char *text)
{
	uint64_t now = hlb_now_ms();
	uint32_t n = 0;

	handover_free(p);
	handover_parse(p, text);
	for (uint32_t i = 0; i < p->n_svcs; i++) {
		struct hlb_pool_service *s = p->svcs[i];

		for (uint32_t j = 0; j < s->n_backends; j++) {
			struct hlb_pool_backend *b = s->backends[j];
			struct handover *h = handover_find(p->ho, p->n_ho, sizeof(*p->ho),
							   s->cfg->name, b->rt->name);
			bool here = h && handover_same_address(b, h);
			bool down = here && h->down;

			/* unchanged there since this one started, or decided here since; up only
			 * assumed at first, seen up there since: its next down is a flap */
			if (!hlb_pool_backend_checked(b) || down == b->carried_down ||
			    b->health.changes) {
				if (!b->health.changes && handover_seen_up(p, b, s->cfg->name, h))
					b->health.assumed = false;
				continue;
			}
			backend_health_restart(b, !down, now);
			if (handover_seen_up(p, b, s->cfg->name, h))
				b->health.assumed = false; /* a check passed it there */
			if (here && h->penalty > 0) {
				b->health.penalty = h->penalty;
				b->health.penalty_ms = now;
				b->health.suppressed = h->held && down;
				b->health.assumed = false; /* it flapped there: seen up */
			}
			b->carried_down = down;
			backend_health_changed(b, now, "old_hashlb", 0);
			/* back up there while this one started: its ramp began there, not now */
			if (!down && here && h->ramping)
				backend_ramp_start(b, now, h->ramp_ms);
			n++;
		}
	}
	handover_free(p);
	return n;
}

/*
 * 0 if <s>'s table, with the weights its backends took over from the hashlb this one
 * replaces, added to *<sum> (the services' tables made before it), keeps them within the
 * config's table_memory (as a reload that keeps weights set at run time is kept within it,
 * hlb_control_weights_fit()); else -E2BIG with <err> saying so (hashlb_table_memory_add():
 * the loader counted the config's weights only), or -ENOMEM. Before <s>'s build: a table
 * past the cap is never made.
 */
static int handover_table_memory(struct hlb_pool_service *s, uint64_t *sum,
				 struct hashlb_error *err)
{
	return hashlb_table_memory_add(s->pool->cfg, s->cfg, hlb_pool_service_bytes_max(s),
				       HASHLB_TABLE_MEMORY_TAKEN_OVER, sum, err);
}

/* A new service with its first snapshot published; checks not started. <ho_bytes>: with a
 * handover (p->n_ho), the most bytes the services' tables made before it may take, its own
 * added (handover_table_memory()); NULL without one. */
static int service_new(struct hlb_pool *p, const struct hashlb_service_cfg *c, uint64_t *ho_bytes,
		       struct hlb_pool_service **ret_svc, struct hashlb_error *err)
{
	struct hlb_pool_service *s = calloc(1, sizeof(*s));
	struct hlb_snapshot *snap;
	uint64_t t0 = hlb_now_ns();
	struct retired *r;
	int ret = 0;

	if (!s)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	s->pool = p;
	s->cfg = c;
	s->tick_all = true;
	hlb_timer_init(&s->build_timer, service_build_timer, s);
	s->gap_ms = HLB_POOL_MIN_GAP_MS;
	service_health_params(s);
	s->backends = calloc(c->n_backends ? c->n_backends : 1, sizeof(*s->backends));
	/* one removed within its drain timeout: that service again (retired_taken_back()) */
	r = retired_find(p, c->name, hlb_now_ms());
	if (p->n_orphans_sorted)
		s->orphans_was = calloc(c->n_backends ? c->n_backends : 1, sizeof(*s->orphans_was));
	if (!s->backends || (p->n_orphans_sorted && !s->orphans_was))
		ret = -ENOMEM;
	else if (r && (!(s->gone_held = calloc(r->n_bes ? r->n_bes : 1, sizeof(*s->gone_held))) ||
		       !(s->removed = calloc(r->n_bes ? r->n_bes : 1, sizeof(*s->removed)))))
		ret = -ENOMEM;
	else if (r)
		s->rt = hlb_service_ref(r->rt);
	else
		ret = hlb_service_new(c->name, p->env.n_workers, &s->rt);
	if (ret < 0) {
		hashlb_err(err, ret, HASHLB_ERR_NOMEM, "service %s: %s", c->name,
			   ret == -ENOMEM ? "out of memory" : "cannot create");
		goto err_free;
	}
	s->rt->cfg = (struct hashlb_service_cfg *)c; /* subscribers read it */
	for (uint32_t i = 0; i < c->n_backends; i++) {
		struct hlb_pool_backend *b = orphan_take(p, s, c->name, &c->backends[i]);

		if (b) {
			b->idx = i;
			atomic_store(&b->rt->admin, (int)b->admin); /* retiring forced drain */
			backend_cfg_apply(b, &c->backends[i], c, NULL);
			/* said once the reload is applied (orphans_adopted()) */
			backend_unchecked_set_up(b, c, b->orphan_passive_only, hlb_now_ms());
			s->backends[s->n_backends++] = b;
			continue;
		}
		s->backends[i] = backend_new(s, &c->backends[i]);
		if (!s->backends[i]) {
			ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
			goto err_free;
		}
		s->backends[i]->idx = i;
		s->n_backends++;
		if (p->n_ho || p->n_ho_seen)
			backend_handover(s->backends[i], c, &c->backends[i]);
	}
	s->need_full = true;
	/* past table_memory with the weights taken over: said there, no table built */
	ret = p->n_ho && ho_bytes ? handover_table_memory(s, ho_bytes, err) : 0;
	if (ret < 0)
		goto err_free;
	ret = service_build(s, &snap, err);
	if (ret < 0 && ret != -ENOMEM && p->n_ho && err) {
		/* the config's own tables build (the loader checked them): the weights taken
		 * over made this one fail, which the bare build error did not say */
		struct hashlb_error why = *err;

		hashlb_err(err, ret, why.reason,
			   "service '%s', with the weights set at run time in the hashlb it takes "
			   "over from: %s",
			   c->name, why.msg);
		err->line = c->pos.line;
		err->column = c->pos.column;
	}
	if (ret < 0)
		goto err_free;
	if (r)
		s->unpublished = snap; /* the reload may fail yet: not into its <rt> now */
	else
		service_publish(s, snap);
	s->rebuilds++;
	s->rebuild_ns_last = s->rebuild_ns_total = s->rebuild_ns_max = hlb_now_ns() - t0;
	s->last_build_ms = hlb_now_ms();
	*ret_svc = s;
	return 0;

err_free:
	service_free(s);
	return ret;
}

static void pool_listen_begin(struct hlb_pool *p)
{
	if (p->env.listen_begin)
		p->env.listen_begin(p->env.arg);
}

static int pool_listen(struct hlb_pool *p, struct hlb_pool_service *s,
		       const struct hashlb_service_cfg *c, struct hashlb_error *err)
{
	int r = p->env.listen ? p->env.listen(p->env.arg, c, s->rt, err) : 0;

	/* what the host refused (an address in use or not local) is said where
	 * the address is written, as the config's own errors are */
	if (r < 0 && err && !err->line) {
		err->line = c->listen_pos.line;
		err->column = c->listen_pos.column;
	}
	return r;
}

static void pool_listen_end(struct hlb_pool *p, bool commit)
{
	if (commit && p->env.listen_commit)
		p->env.listen_commit(p->env.arg);
	else if (!commit && p->env.listen_abort)
		p->env.listen_abort(p->env.arg);
}

/*
 * Every service's source address must be one of this host's: a config
 * whose every connect would fail (and take each backend down with it) is
 * refused at start or reload, with the line and column of its source key
 * (and no file: hlb_pool_new() and hlb_pool_apply() leave that to their
 * caller).
 */
static int pool_check_sources(const struct hashlb_config *cfg, struct hashlb_error *err)
{
	char text[64];

	for (uint32_t i = 0; i < cfg->n_services; i++) {
		const struct hashlb_service_cfg *c = &cfg->services[i];
		int fd, r;

		if (c->source_client) { /* transparent sockets need CAP_NET_ADMIN */
			fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			r = fd < 0 ? -errno : hlb_sock_transparent(fd, AF_INET);
			if (fd >= 0)
				close(fd);
			if (r < 0) {
				hashlb_err(err, r, HASHLB_ERR_CONFIG,
					   "service '%s': source client needs IP_TRANSPARENT, "
					   "which this process may not set: %s (CAP_NET_ADMIN)",
					   c->name, strerror(-r));
				err->line = c->source_pos.line;
				err->column = c->source_pos.column;
				return r;
			}
			continue;
		}
		if (!c->source_len)
			continue;
		fd = socket(c->source.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		r = fd < 0 ? -errno : hlb_bind_source(fd, &c->source, c->source_len);
		if (fd >= 0)
			close(fd);
		if (r < 0) {
			getnameinfo((const struct sockaddr *)&c->source, c->source_len, text,
				    sizeof(text), NULL, 0, NI_NUMERICHOST);
			hashlb_err(err, r, HASHLB_ERR_CONFIG,
				   "service '%s': source %s cannot be used on this host: %s",
				   c->name, text, strerror(-r));
			/* the caller names the file: <cfg> may not outlive the error */
			err->line = c->source_pos.line;
			err->column = c->source_pos.column;
			return r;
		}
	}
	return 0;
}

/* A backend of a service, or a service, by name: names are unique in a service, and in a pool. */
struct name_idx {
	const char *name;
	uint32_t j;
};

static int name_idx_cmp(const void *a, const void *b)
{
	return strcmp(((const struct name_idx *)a)->name, ((const struct name_idx *)b)->name);
}

/* bsearch()'s: name <key> against entry <e>. */
static int name_idx_key_cmp(const void *key, const void *e)
{
	return strcmp(key, ((const struct name_idx *)e)->name);
}

/* name_idx_key_cmp(), the comparison a name read matching a config (hlb_match_reads()). */
static int name_idx_key_cmp_counted(const void *key, const void *e)
{
	hlb_match_reads_add(1);
	return name_idx_key_cmp(key, e);
}

/* The entry of <sorted> (<n>, by name_idx_cmp()) named <name>, NULL if none. <matching> a
 * config: the names it compared counted (hlb_match_reads()), which the admin endpoint's
 * lookups are not. */
static const struct name_idx *name_idx_find(const struct name_idx *sorted, uint32_t n,
					    const char *name, bool matching)
{
	return bsearch(name, sorted, n, sizeof(*sorted),
		       matching ? name_idx_key_cmp_counted : name_idx_key_cmp);
}

/* <p>'s name index (its by_name, room for n_svcs entries made) filled with its services. */
static void services_index(struct hlb_pool *p)
{
	for (uint32_t j = 0; j < p->n_svcs; j++)
		p->by_name[j] = (struct name_idx){ p->svcs[j]->cfg->name, j };
	qsort(p->by_name, p->n_svcs, sizeof(*p->by_name), name_idx_cmp);
}

int hlb_pool_new(const struct hashlb_config *cfg, struct hlb_loop *loop,
		 const struct hlb_pool_env *env, struct hlb_pool **ret_pool,
		 struct hashlb_error *err)
{
	uint64_t ho_bytes = 0; /* the tables made so far, with the weights taken over */
	struct hlb_pool *p;
	int ret = pool_check_sources(cfg, err);

	if (ret < 0)
		return ret;
	p = calloc(1, sizeof(*p));
	if (!p)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	p->cfg = cfg;
	p->loop = loop;
	p->env = *env;
	if (!p->env.n_workers)
		p->env.n_workers = p->env.rcu ? hlb_rcu_readers(p->env.rcu) : 1;
	if (!p->env.n_workers)
		p->env.n_workers = 1;
	hlb_timer_init(&p->tick, pool_tick, p);
	p->svcs = calloc(cfg->n_services ? cfg->n_services : 1, sizeof(*p->svcs));
	p->by_name = calloc(cfg->n_services ? cfg->n_services : 1, sizeof(*p->by_name));
	if (!p->svcs || !p->by_name) {
		free(p->svcs);
		free(p->by_name);
		free(p);
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	}
	if (p->env.handover)
		handover_parse(p, p->env.handover);
	pool_listen_begin(p);
	for (uint32_t i = 0; i < cfg->n_services && ret == 0; i++) {
		ret = service_new(p, &cfg->services[i], &ho_bytes, &p->svcs[i], err);
		if (ret == 0) {
			p->n_svcs++;
			ret = pool_listen(p, p->svcs[i], &cfg->services[i], err);
		}
	}
	pool_listen_end(p, ret == 0);
	if (ret < 0)
		goto err_free;
	services_index(p);
	if (p->env.handover) /* an upgrade in place's: found by name, so once named */
		hlb_pool_carry_totals(p, p->env.handover);
	p->env.handover = NULL; /* the first services' only, not a reload's */
	handover_free(p);
	for (uint32_t i = 0; i < p->n_svcs; i++)
		service_checks_start(p->svcs[i]);
	ret = hlb_timer_arm(loop, &p->tick, hlb_now_ms() + HLB_POOL_TICK_MS);
	if (ret < 0)
		goto err_free;
	*ret_pool = p;
	return 0;

err_free:
	hlb_pool_free(p);
	return ret;
}

void hlb_pool_stop_checks(struct hlb_pool *p)
{
	uint64_t now = hlb_now_ms();

	for (uint32_t i = 0; i < p->n_svcs; i++) {
		for (uint32_t j = 0; j < p->svcs[i]->n_backends; j++) {
			backend_up_run_stop(p->svcs[i]->backends[j], "stop", now);
			hlb_check_stop(&p->svcs[i]->backends[j]->check);
		}
	}
	hlb_timer_cancel(p->loop, &p->tick);
}

/* The longer of <max> and the time <b>, which a reload removed, has left to drain at <now>
 * (none for one that holds no connection): each read once, its <claimed> going to 0 meanwhile
 * not taking back what another backend left. */
static uint64_t drain_left_max(const struct hlb_pool_backend *b, uint64_t now, uint64_t max)
{
	uint64_t left = hashlb_drain_left(hlb_pool_backend_drain_deadline(b), now);

	return atomic_load(&b->rt->claimed) && left > max ? left : max;
}

uint32_t hlb_pool_drain_left_ms(const struct hlb_pool *p)
{
	uint64_t now = hlb_now_ms(), max = 0;

	for (uint32_t i = 0; i < p->n_svcs; i++)
		for (uint32_t j = 0; j < p->svcs[i]->n_removed; j++)
			max = drain_left_max(p->svcs[i]->removed[j], now, max);
	for (uint32_t i = 0; i < p->n_orphans; i++)
		max = drain_left_max(p->orphans[i], now, max);
	return max > HASHLB_DRAIN_NEVER ? HASHLB_DRAIN_NEVER : (uint32_t)max;
}

/* The connections removed backend <b> still holds at <now>, 0 once past its deadline (the
 * control plane is closing them) */
static uint64_t removed_held(const struct hlb_pool_backend *b, uint64_t now)
{
	return hlb_pool_backend_drain_deadline(b) > now ? atomic_load(&b->rt->claimed) : 0;
}

void hlb_pool_log_draining(struct hlb_pool *p)
{
	uint64_t now = hlb_now_ms();
	char q[POOL_NAME_QUOTED], qb[POOL_NAME_QUOTED], ms[HASHLB_DRAIN_MS_STRLEN];

	for (uint32_t i = 0; i < p->n_svcs; i++) {
		const struct hlb_pool_service *s = p->svcs[i];
		const char *qn = hlb_log_quote(s->cfg->name, q, sizeof(q));
		uint64_t n = atomic_load(&s->rt->active), removed = 0;

		for (uint32_t j = 0; j < s->n_removed; j++)
			removed += removed_held(s->removed[j], now);
		if (n > removed)
			pool_log(p, HLB_LOG_INFO, "service draining",
				 "service=%s connections=%" PRIu64 " drain_timeout_ms=%s", qn,
				 n - removed,
				 hashlb_drain_ms_text(hlb_service_snapshot(s->rt)->drain_timeout_ms,
						      ms));
		for (uint32_t j = 0; j < s->n_removed && removed; j++) {
			const struct hlb_pool_backend *b = s->removed[j];
			uint64_t k = removed_held(b, now);

			if (k)
				pool_log(p, HLB_LOG_INFO, "service draining",
					 "service=%s backend=%s removed=1 connections=%" PRIu64
					 " drain_timeout_ms=%s",
					 qn, backend_qname(b, qb), k,
					 hashlb_drain_ms_text(
						 hashlb_drain_left(
							 hlb_pool_backend_drain_deadline(b), now),
						 ms));
		}
	}
	for (uint32_t i = 0; i < p->n_retired; i++) {
		const struct retired *r = &p->retired[i];
		uint64_t n = atomic_load(&r->rt->active);

		if (n && r->deadline_ms > now)
			pool_log(p, HLB_LOG_INFO, "service draining",
				 "service=%s removed=1 connections=%" PRIu64 " drain_timeout_ms=%s",
				 hlb_log_quote(r->name, q, sizeof(q)), n,
				 hashlb_drain_ms_text(hashlb_drain_left(r->deadline_ms, now), ms));
	}
}

void hlb_pool_free(struct hlb_pool *p)
{
	if (!p)
		return;
	hlb_timer_cancel(p->loop, &p->tick);
	for (uint32_t i = 0; i < p->n_svcs; i++)
		service_free(p->svcs[i]);
	for (uint32_t i = 0; i < p->n_orphans; i++)
		backend_free(p->orphans[i]);
	free(p->orphans);
	for (uint32_t i = 0; i < p->n_retired; i++)
		retired_free(&p->retired[i]);
	free(p->retired);
	free(p->svcs);
	free(p->by_name);
	free(p->subs);
	handover_free(p);
	free(p);
}

int hlb_pool_subscribe(struct hlb_pool *p, hlb_publish_fn fn, void *arg)
{
	struct subscriber *v = realloc(p->subs, (p->n_subs + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	p->subs = v;
	p->subs[p->n_subs++] = (struct subscriber){ fn, arg };
	return 0;
}

uint32_t hlb_pool_overrides(const struct hlb_pool *p, char *first, size_t size)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->n_svcs; i++) {
		const struct hlb_pool_service *s = p->svcs[i];

		for (uint32_t j = 0; j < s->n_backends; j++) {
			const struct hlb_pool_backend *b = s->backends[j];
			uint32_t max = atomic_load(&b->rt->max_conns);

			if (!backend_set_at_run_time(b))
				continue;
			if (n++)
				continue;
			if (b->admin != b->cfg_admin)
				snprintf(first, size, "%s/%s state %s (config: %s)", s->cfg->name,
					 b->rt->name, hashlb_admin_state_name(b->admin),
					 hashlb_admin_state_name(b->cfg_admin));
			else if (b->rt->weight != b->cfg_weight)
				snprintf(first, size, "%s/%s weight %u (config: %u)", s->cfg->name,
					 b->rt->name, b->rt->weight, b->cfg_weight);
			else
				snprintf(first, size, "%s/%s max_connections %u (config: %u)",
					 s->cfg->name, b->rt->name, max, b->cfg_max_conns);
		}
	}
	return n;
}

uint32_t hlb_pool_service_count(const struct hlb_pool *p)
{
	return p->n_svcs;
}

uint64_t hlb_pool_ticks(const struct hlb_pool *p)
{
	return p->ticks;
}

struct hlb_pool_service *hlb_pool_service_at(struct hlb_pool *p, uint32_t i)
{
	return i < p->n_svcs ? p->svcs[i] : NULL;
}

/* <p>'s service named <name>, NULL if none; <matching>: name_idx_find()'s. */
static struct hlb_pool_service *service_find(struct hlb_pool *p, const char *name, bool matching)
{
	const struct name_idx *hit = name_idx_find(p->by_name, p->n_svcs, name, matching);

	return hit ? p->svcs[hit->j] : NULL;
}

struct hlb_pool_service *hlb_pool_service_find(struct hlb_pool *p, const char *name)
{
	return service_find(p, name, false);
}

struct hlb_pool_backend *hlb_pool_backend_find(struct hlb_pool_service *s, const char *name)
{
	for (uint32_t i = 0; i < s->n_backends; i++)
		if (!strcmp(s->backends[i]->rt->name, name))
			return s->backends[i];
	return NULL;
}

/*
 * Whether <b>, removed from <s> by a reload, is still within its drain at <now>: before its
 * deadline; with timeouts.drain never, while the pool keeps it (its deadline, set when its
 * last connection of the daemon's ended, is then only when that was).
 */
static bool removed_draining(const struct hlb_pool_service *s, const struct hlb_pool_backend *b,
			     uint64_t now)
{
	return now < hlb_pool_backend_drain_deadline(b) ||
	       s->cfg->drain_timeout_ms == HASHLB_DRAIN_NEVER;
}

uint32_t hlb_pool_service_draining_names(const struct hlb_pool_service *s, uint64_t now,
					 const char **names, uint32_t cap)
{
	uint32_t n = 0;

	for (uint32_t j = s->n_backends; j < hlb_pool_service_series(s); j++) {
		const struct hlb_pool_backend *b = hlb_pool_service_series_at(s, j);

		if (!removed_draining(s, b, now))
			continue;
		if (n < cap)
			names[n] = b->rt->name;
		n++;
	}
	return n;
}

/* ---- reload ---- */

static bool source_equal(const struct hashlb_service_cfg *a, const struct hashlb_service_cfg *b)
{
	return a->source_client == b->source_client && a->source_len == b->source_len &&
	       (!a->source_len || memcmp(&a->source, &b->source, a->source_len) == 0);
}

/* Whether the checks <a> and <b> make the same exchange (their timing aside): a reload
 * changing only the timing lets a check in flight finish (backend_check_retime()). */
static bool checks_exchange_equal(const struct hashlb_health_cfg *a,
				  const struct hashlb_health_cfg *b)
{
	return a->enabled == b->enabled && a->port == b->port && a->send_len == b->send_len &&
	       a->expect_len == b->expect_len &&
	       (!a->send_len || memcmp(a->send, b->send, a->send_len) == 0) &&
	       (!a->expect_len || memcmp(a->expect, b->expect, a->expect_len) == 0);
}

/* Whether the checks <a> and <b> make are the same: rise and fall count their results (the
 * service's health params), and a reload changing only those restarts no check. */
static bool checks_cfg_equal(const struct hashlb_health_cfg *a, const struct hashlb_health_cfg *b)
{
	return checks_exchange_equal(a, b) && a->interval_ms == b->interval_ms &&
	       a->timeout_ms == b->timeout_ms;
}

static bool table_cfg_equal(const struct hashlb_service_cfg *a, const struct hashlb_service_cfg *b)
{
	return a->table.scheme == b->table.scheme && a->table.seed == b->table.seed &&
	       a->table.ring_v == b->table.ring_v && a->table.maglev_m == b->table.maglev_m &&
	       a->table.max_bytes == b->table.max_bytes;
}

/* A src-ip key's prefix length for <family>'s addresses, whole written either way. */
static unsigned int hash_prefix_len(const struct hashlb_service_cfg *c, bool v6)
{
	if (c->key != HASHLB_KEY_SRC_IP)
		return 0;
	if (v6)
		return c->hash_prefix.v6 ? c->hash_prefix.v6 : 128;
	return c->hash_prefix.v4 ? c->hash_prefix.v4 : 32;
}

/*
 * Whether <s>, going from <old> to <c>, hashes its clients otherwise for its listener's sake:
 * the 4-tuple key hashes the address clients connect to, and the reload's listeners put <s>
 * on another that changes it (a PROXY header's destination is hashed instead with
 * accept_proxy; a wildcard's connections hash the address each reached). Compared as bound
 * (a port-0 listener's port as got: 0.0.0.0:0 to 127.0.0.1:P, P the port it got, moves no
 * client), as configured where the listener says none (no listeners: tests).
 */
static bool listen_rehashes(const struct hlb_pool_service *s, const struct hashlb_service_cfg *old,
			    const struct hashlb_service_cfg *c)
{
	const struct hlb_service *rt = s->rt;

	if (c->key != HASHLB_KEY_4TUPLE || old->key != c->key || old->accept_proxy ||
	    c->accept_proxy || !rt->listener_moved)
		return false;
	if (rt->bound_was_len && rt->bound_addr_len)
		return hashlb_listen_moves_destination(&rt->bound_was, rt->bound_was_len,
						       &rt->bound_addr, rt->bound_addr_len);
	return hashlb_listen_moves_destination(&old->listen_addr, old->listen_addr_len,
					       &c->listen_addr, c->listen_addr_len);
}

/*
 * Service <s> goes from <old> to <c>: if what decides each client's backend changed (scheme,
 * seed, table size or ring points, hash key or prefix, accept_proxy: which address is
 * hashed; the listen address under the 4-tuple key), a warning says so, and which. The
 * table then places every client anew, and most of them reach another backend with their next
 * connection: what a reload of a backend's weight or membership never does, and what a pool
 * of stateful backends cannot take unawares. The "reload: service changed" line said only
 * changed=table, or changed=settings for the key and prefix, as for a timeout.
 */
static void client_hash_changed(struct hlb_pool_service *s, const struct hashlb_service_cfg *old,
				const struct hashlb_service_cfg *c)
{
	const struct hashlb_table_params *a = &old->table, *b = &c->table;
	bool scheme = a->scheme != b->scheme, seed = a->seed != b->seed, key = old->key != c->key;
	bool size = !scheme && b->scheme == HASHLB_SCHEME_MAGLEV && a->maglev_m != b->maglev_m;
	bool vnodes = !scheme && b->scheme == HASHLB_SCHEME_RING && a->ring_v != b->ring_v;
	bool prefix = !key && (hash_prefix_len(old, false) != hash_prefix_len(c, false) ||
			       hash_prefix_len(old, true) != hash_prefix_len(c, true));
	/* the client hashed is the PROXY header's, or the front proxy's without it */
	bool proxy = old->accept_proxy != c->accept_proxy, listen = listen_rehashes(s, old, c);
	char what[96];

	if (!scheme && !seed && !size && !vnodes && !key && !prefix && !proxy && !listen)
		return;
	snprintf(what, sizeof(what), "%s%s%s%s%s%s%s%s", scheme ? ",scheme" : "",
		 seed ? ",seed" : "", size ? ",table_size" : "", vnodes ? ",vnodes" : "",
		 key ? ",hash_key" : "", prefix ? ",hash_prefix" : "", proxy ? ",accept_proxy" : "",
		 listen ? ",listen" : "");
	if (!s->pool->changes->services_rehashed++)
		snprintf(s->pool->changes->first_rehashed, sizeof(s->pool->changes->first_rehashed),
			 "%s (%s)", c->name, what + 1);
	if (!change_line(s->pool))
		return;
	pool_log(s->pool, HLB_LOG_WARN, "reload: clients move to other backends",
		 "service=%s changed=%s note=\"the table places every client anew: many clients' "
		 "next connections reach another backend; established connections stay\"",
		 c->name, what + 1);
}

/*
 * Service <s>, kept by the reload under way, goes from <old> to <c>: what of its own
 * changed (its backends aside) counted, and logged. <settings_changed>: those of
 * service_settings_equal().
 */
static void change_service(struct hlb_pool_service *s, const struct hashlb_service_cfg *old,
			   const struct hashlb_service_cfg *c, bool settings_changed)
{
	const struct hashlb_health_cfg *oh = &old->health, *h = &c->health;
	struct hlb_pool *p = s->pool;
	/* the daemon's rule, as it matched listeners: a config naming the port a port-0
	 * listener got, or going back to port 0, keeps that listener and moves nothing */
	bool table = !table_cfg_equal(old, c), listen = s->rt->listener_moved;
	/* what the comparisons that decide what the reload redoes leave out: read as they
	 * go (rise, fall, slow start, close_on_down), or kernel steering's (run_steer) */
	bool checks = !checks_cfg_equal(oh, h) || oh->rise != h->rise || oh->fall != h->fall ||
		      oh->close_on_down != h->close_on_down || oh->passive != h->passive ||
		      oh->passive_hold_ms != h->passive_hold_ms;
	bool steering = old->steering != c->steering || old->steer_flows != c->steer_flows ||
			!old->steer_interface != !c->steer_interface ||
			(c->steer_interface && strcmp(old->steer_interface, c->steer_interface));
	char what[80];

	settings_changed |= old->slow_start_ms != c->slow_start_ms;
	if (!p->changes || !(settings_changed || table || checks || listen || steering))
		return;
	p->changes->services_changed++;
	if (change_line(p)) {
		snprintf(what, sizeof(what), "%s%s%s%s%s", listen ? ",listen" : "",
			 settings_changed ? ",settings" : "", table ? ",table" : "",
			 checks ? ",checks" : "", steering ? ",steering" : "");
		pool_log(p, HLB_LOG_INFO, "reload: service changed", "service=%s changed=%s",
			 c->name, what + 1);
	}
	client_hash_changed(s, old, c);
}

/* Service <c> added (or <s> removed) by the reload under way: counted with its backends, and
 * logged (one line: not one a backend). */
static void change_service_added(struct hlb_pool *p, const struct hashlb_service_cfg *c, bool added)
{
	char ql[POOL_ADDRESS_QUOTED];

	if (!p->changes)
		return;
	if (added) {
		p->changes->services_added++;
		p->changes->backends_added += c->n_backends;
	} else {
		p->changes->services_removed++;
		p->changes->backends_removed += c->n_backends;
	}
	if (change_line(p))
		pool_log(p, HLB_LOG_INFO,
			 added ? "reload: service added" : "reload: service removed",
			 "service=%s addr=%s backends=%u", c->name,
			 hlb_log_quote(c->listen, ql, sizeof(ql)), c->n_backends);
}

/* Backend <b>, which the reload under way removes from <s>, drains among <s>'s removed (their
 * array has its room: service_prepare()). */
static void service_retire_backend(struct hlb_pool_service *s, struct hlb_pool_backend *b,
				   uint64_t now)
{
	char qn[POOL_NAME_QUOTED];
	char q[POOL_ADDRESS_QUOTED];
	char ms[HASHLB_DRAIN_MS_STRLEN];

	/* the same name and address drained before, its series kept: this
	 * one's draining series takes their place (one series a label set) */
	for (uint32_t i = 0; i < s->n_drained; i++) {
		struct hlb_pool_backend *d = s->drained[i];

		if (!strcmp(d->rt->name, b->rt->name) &&
		    addr_equal(&d->rt->addr, d->rt->addr_len, &b->rt->addr, b->rt->addr_len)) {
			service_forget_backend(s, d);
			s->drained[i] = s->drained[--s->n_drained];
			break;
		}
	}
	backend_up_run_stop(b, "reload", now);
	hlb_check_stop(&b->check);
	backend_drain_until(b, hashlb_drain_end(now, s->cfg->drain_timeout_ms));
	atomic_store(&b->rt->admin, (int)HASHLB_ADMIN_DRAIN);
	s->removed[s->n_removed++] = b;
	/* what a reload will close, and when (one without connections goes
	 * at the next tick, unseen): drain_timeout_ms=never, none */
	if (atomic_load(&b->rt->claimed))
		pool_log(s->pool, HLB_LOG_INFO, "backend removed or moved: its connections drain",
			 "service=%s backend=%s address=%s connections=%" PRIu64
			 " drain_timeout_ms=%s",
			 s->cfg->name, backend_qname(b, qn),
			 hlb_log_quote(b->rt->address, q, sizeof(q)),
			 (uint64_t)atomic_load(&b->rt->claimed),
			 hashlb_drain_ms_text(s->cfg->drain_timeout_ms, ms));
}

/* Removed backend <j> of <s>: one still draining (<removed>), then one drained (<drained>). */
static struct hlb_pool_backend *service_gone_at(const struct hlb_pool_service *s, uint32_t j)
{
	return j < s->n_removed ? s->removed[j] : s->drained[j - s->n_removed];
}

/* The names of <s>'s removed backends (service_gone_at()), sorted, for service_gone_find()
 * (free it); NULL: out of memory. */
static struct name_idx *service_gone_sorted(const struct hlb_pool_service *s)
{
	uint32_t n = s->n_removed + s->n_drained;
	struct name_idx *sorted = calloc(n ? n : 1, sizeof(*sorted));

	if (!sorted)
		return NULL;
	for (uint32_t j = 0; j < n; j++)
		sorted[j] = (struct name_idx){ service_gone_at(s, j)->rt->name, j };
	qsort(sorted, n, sizeof(*sorted), name_idx_cmp);
	return sorted;
}

/*
 * The removed backend of <s> (service_gone_at(), not yet <taken>) that a reload adding back
 * <nb> takes back, or UINT32_MAX: the same name and address, removed by an earlier reload
 * less than its drain timeout ago (<now>), whether it still drains or held no connection
 * then and drained at once. A removal undone within the drain timeout is undone whole: its
 * connections stay, and so does what was set at run time (hashlb ctl set); before, only one
 * still draining connections was taken back, and one without came back as new, with the
 * config's settings (a backend in maint taking clients again). <sorted>: service_gone_sorted().
 */
static uint32_t service_gone_find(const struct hlb_pool_service *s, const struct name_idx *sorted,
				  const uint8_t *taken, const struct hashlb_backend_cfg *nb,
				  uint64_t now)
{
	uint32_t n = s->n_removed + s->n_drained;
	const struct name_idx *hit = n ? name_idx_find(sorted, n, nb->name, true) : NULL;

	if (!hit)
		return UINT32_MAX;
	hit = sorted_first(nb->name, sorted, hit, sizeof(*hit), name_idx_key_cmp);
	for (; hit < sorted + n && !strcmp(hit->name, nb->name); hit++) {
		const struct hlb_pool_backend *r = service_gone_at(s, hit->j);

		if ((taken && taken[hit->j]) ||
		    !addr_equal(&r->rt->addr, r->rt->addr_len, &nb->addr, nb->addr_len))
			continue;
		/* still draining; or drained, until the drain deadline (one closed at it is
		 * past) */
		if (hit->j < s->n_removed || now < hlb_pool_backend_drain_deadline(r))
			return hit->j;
	}
	return UINT32_MAX;
}

/*
 * The backend named and addressed as <nb> among those an earlier reload removed
 * (service_gone_find()), taken back, its connections with it (a config written in two
 * steps, or a removal undone, must not cut them at the drain deadline) and what was set at
 * run time; NULL if none. Marked in <taken>: out of <s>'s removed and drained once the
 * reload's backends are matched (service_gone_compact()).
 */
static struct hlb_pool_backend *service_reclaim(struct hlb_pool_service *s,
						const struct name_idx *sorted, uint8_t *taken,
						const struct hashlb_backend_cfg *nb, uint64_t now)
{
	uint32_t j = service_gone_find(s, sorted, taken, nb, now);
	struct hlb_pool_backend *r;
	char qn[POOL_NAME_QUOTED], q[POOL_ADDRESS_QUOTED];
	uint64_t held;

	if (j == UINT32_MAX)
		return NULL;
	r = service_gone_at(s, j);
	taken[j] = 1;
	held = atomic_load(&r->rt->claimed);
	backend_drain_until(r, 0);
	r->drained_ms = 0;
	atomic_store(&r->rt->admin, (int)r->admin); /* retiring forced drain */
	/* the drain its removal logged ends here, none closed */
	if (held)
		pool_log(s->pool, HLB_LOG_INFO, "backend added back: its draining connections stay",
			 "service=%s backend=%s address=%s connections=%" PRIu64, s->cfg->name,
			 backend_qname(r, qn), hlb_log_quote(r->rt->address, q, sizeof(q)), held);
	return r;
}

/* <s>'s removed backends less those service_reclaim() took back (<taken>), in their order. */
static void service_gone_compact(struct hlb_pool_service *s, const uint8_t *taken)
{
	uint32_t n_removed = s->n_removed, n = 0;

	for (uint32_t k = 0; k < n_removed; k++)
		if (!taken[k])
			s->removed[n++] = s->removed[k];
	s->n_removed = n;
	n = 0;
	for (uint32_t k = 0; k < s->n_drained; k++)
		if (!taken[n_removed + k])
			s->drained[n++] = s->drained[k];
	s->n_drained = n;
}

/*
 * <to> takes <from>'s settings: the config's, and those set at run time; backup
 * too, so that backend_cfg_apply() then tells what the reload changed of them
 * all (before, a backend moved and made a backup in one reload said only its
 * new address).
 */
static void backend_adopt(struct hlb_pool_backend *to, const struct hlb_pool_backend *from)
{
	to->cfg_weight = from->cfg_weight;
	to->rt->weight = from->rt->weight;
	to->rt->backup = from->rt->backup;
	to->cfg_max_conns = from->cfg_max_conns;
	atomic_store(&to->rt->max_conns, atomic_load(&from->rt->max_conns));
	to->cfg_admin = from->cfg_admin;
	hlb_pool_set_admin(to, from->admin);
}

/* What a reload does with a backend it finds running (service_update()). */
enum { BACKEND_RETIRED, BACKEND_KEPT, BACKEND_MOVED /* its name at another address */ };

/*
 * The index in <s>'s backends of the one named <name> not yet <taken>, or
 * <s>->n_backends. Tries position <i> first (a config reloaded with its
 * backends in the same order), else <sorted> (the n_backends names, sorted):
 * a reload of a service of 65,535 backends costs O(n log n), not n^2 / 2.
 */
static uint32_t backend_by_name(const struct hlb_pool_service *s, const struct name_idx *sorted,
				const uint8_t *taken, uint32_t i, const char *name)
{
	const struct name_idx *hit;

	if (i < s->n_backends && !(taken && taken[i] == BACKEND_KEPT)) {
		hlb_match_reads_add(1);
		if (!strcmp(s->backends[i]->rt->name, name))
			return i;
	}
	hit = name_idx_find(sorted, s->n_backends, name, true);
	return hit && !(taken && taken[hit->j] == BACKEND_KEPT) ? hit->j : s->n_backends;
}

/* <s>'s backend names, sorted, for backend_by_name() (free it); NULL: out of memory. */
static struct name_idx *backends_sorted(const struct hlb_pool_service *s)
{
	struct name_idx *sorted = calloc(s->n_backends ? s->n_backends : 1, sizeof(*sorted));

	if (!sorted)
		return NULL;
	for (uint32_t j = 0; j < s->n_backends; j++)
		sorted[j] = (struct name_idx){ s->backends[j]->rt->name, j };
	qsort(sorted, s->n_backends, sizeof(*sorted), name_idx_cmp);
	return sorted;
}

/*
 * hlb_pool_weights_after() for service <c> not running: the weights of the orphans a
 * reload adding it back takes (orphan_take()), if any, with what was set at run time;
 * before, the config's were read, and a table that fitted its program was refused, or one
 * too big let through, by weights the service was not going to serve with.
 */
static int orphans_weights_after(struct hlb_pool *p, const struct hashlb_service_cfg *c,
				 uint32_t *ret_weights)
{
	/* sorted once for all the services by hlb_pool_weights_begin(), else here */
	bool sorted_here = !p->orphans_sorted;

	if (!p->n_orphans)
		return 0;
	if (sorted_here && orphans_sorted_begin(p) < 0)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->n_backends; i++) {
		const struct hashlb_backend_cfg *nb = &c->backends[i];
		const struct hlb_pool_backend *o = orphan_find(p, c->name, nb);

		/* as service_new() takes it: backend_cfg_apply() */
		if (o && nb->weight == o->cfg_weight)
			ret_weights[i] = o->rt->weight;
	}
	if (sorted_here)
		orphans_sorted_end(p); /* none taken: the orphans stay as they were */
	return 0;
}

int hlb_pool_weights_begin(struct hlb_pool *p)
{
	return p->n_orphans ? orphans_sorted_begin(p) : 0;
}

void hlb_pool_weights_end(struct hlb_pool *p)
{
	if (p->orphans_sorted)
		orphans_sorted_end(p); /* none taken: the orphans stay as they were */
}

static bool weight_set(const struct hlb_pool_backend *b)
{
	return b->rt->weight != b->cfg_weight;
}

/* hashlb_service_cfg_weights_bytes_max_fn()'s weight of backend <i> of pool service <arg>:
 * the one in force */
static uint32_t weight_in_force(void *arg, const struct hashlb_service_cfg *c, uint32_t i)
{
	const struct hlb_pool_service *s = arg;

	(void)c;
	return s->backends[i]->rt->weight;
}

uint64_t hlb_pool_service_bytes_max(const struct hlb_pool_service *s)
{
	if (s->n_backends != s->cfg->n_backends) /* not so: the config's, as it counted */
		return hashlb_service_cfg_table_bytes_max(s->cfg);
	return hashlb_service_cfg_weights_bytes_max_fn(s->cfg, weight_in_force, (void *)s);
}

bool hlb_pool_weight_set(const struct hlb_pool *p)
{
	for (uint32_t i = 0; i < p->n_orphans; i++)
		if (weight_set(p->orphans[i]))
			return true;
	for (uint32_t i = 0; i < p->n_svcs; i++) {
		const struct hlb_pool_service *s = p->svcs[i];

		for (uint32_t j = 0; j < s->n_backends; j++)
			if (weight_set(s->backends[j]))
				return true;
		for (uint32_t j = 0; j < s->n_removed + s->n_drained; j++)
			if (weight_set(service_gone_at(s, j)))
				return true;
	}
	return false;
}

int hlb_pool_weights_after(struct hlb_pool *p, const struct hashlb_service_cfg *c,
			   uint32_t *ret_weights)
{
	struct hlb_pool_service *s = service_find(p, c->name, true);
	struct name_idx *sorted, *gone_sorted;
	uint64_t now = hlb_now_ms();

	for (uint32_t i = 0; i < c->n_backends; i++)
		ret_weights[i] = c->backends[i].weight;
	if (!s)
		return orphans_weights_after(p, c, ret_weights);
	sorted = backends_sorted(s);
	gone_sorted = service_gone_sorted(s);
	if (!sorted || !gone_sorted) {
		free(sorted);
		free(gone_sorted);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < c->n_backends; i++) {
		const struct hashlb_backend_cfg *nb = &c->backends[i];
		uint32_t j = backend_by_name(s, sorted, NULL, i, nb->name);
		const struct hlb_pool_backend *b = j < s->n_backends ? s->backends[j] : NULL;

		/* one removed taken back, its name not running meanwhile (service_reclaim()) */
		if (!b && (j = service_gone_find(s, gone_sorted, NULL, nb, now)) != UINT32_MAX)
			b = service_gone_at(s, j);
		/* a setting made at run time stays with the name unless the
		 * config changes it (service_update()) */
		if (b && nb->weight == b->cfg_weight)
			ret_weights[i] = b->rt->weight;
	}
	free(gone_sorted);
	free(sorted);
	return 0;
}

/*
 * What service_update() allocates, made before a reload changes anything (service_prepare()):
 * memory that runs out then fails the reload whole, the running config kept, rather than
 * half-way through a service, its change lines written and the reload applied with that
 * service left on the config the reload frees.
 */
struct service_prep {
	struct hlb_pool_backend **next; /* the backends of the new config, in its order */
	uint8_t *taken; /* what becomes of each running one (BACKEND_KEPT...) */
	struct name_idx *sorted; /* the running ones' names (backends_sorted()) */
	/* the removed ones' names (service_gone_sorted()), and those taken back
	 * (service_reclaim()) */
	struct name_idx *gone_sorted;
	uint8_t *gone_taken;
	/* [i]: a new backend for the config's <i>th, made for each that is not kept at its
	 * address (one taken back from those draining instead is freed) */
	struct hlb_pool_backend **fresh;
	/* [i], NULL if none needs one: the address as written for the config's <i>th kept at its
	 * address, when that is written otherwise (a host name that became another of the same
	 * address); NULL when no backend needs one */
	char **written;
	uint32_t n_fresh; /* the config's backends, <fresh>'s and <written>'s length */
};

static void service_prep_free(struct service_prep *pr)
{
	for (uint32_t i = 0; pr->fresh && i < pr->n_fresh; i++)
		backend_free(pr->fresh[i]);
	for (uint32_t i = 0; pr->written && i < pr->n_fresh; i++)
		free(pr->written[i]);
	free(pr->written);
	free(pr->fresh);
	free(pr->next);
	free(pr->taken);
	free(pr->sorted);
	free(pr->gone_sorted);
	free(pr->gone_taken);
	*pr = (struct service_prep){ 0 };
}

/* Allocate into <ret_pr> what switching <s> to <c> takes; -ENOMEM (nothing held). */
static int service_prepare(struct hlb_pool_service *s, const struct hashlb_service_cfg *c,
			   struct service_prep *ret_pr)
{
	struct service_prep pr = {
		.next = calloc(c->n_backends ? c->n_backends : 1, sizeof(*pr.next)),
		.taken = calloc(s->n_backends ? s->n_backends : 1, sizeof(*pr.taken)),
		.sorted = backends_sorted(s),
		.gone_sorted = service_gone_sorted(s),
		.gone_taken = calloc(s->n_removed + s->n_drained + 1, sizeof(*pr.gone_taken)),
		.fresh = calloc(c->n_backends ? c->n_backends : 1, sizeof(*pr.fresh)),
		.n_fresh = c->n_backends,
	};

	struct hlb_pool_backend **removed;

	if (!pr.next || !pr.taken || !pr.sorted || !pr.gone_sorted || !pr.gone_taken || !pr.fresh)
		goto err_free;
	/* room for each running backend among those draining, should the reload remove it
	 * (service_retire_backend()): short of it, one removed was dropped, its connections
	 * never closed at the drain deadline */
	removed = realloc(s->removed, (s->n_removed + s->n_backends + 1) * sizeof(*removed));
	if (!removed)
		goto err_free;
	s->removed = removed;
	for (uint32_t i = 0; i < c->n_backends; i++) {
		const struct hashlb_backend_cfg *nb = &c->backends[i];
		uint32_t j = backend_by_name(s, pr.sorted, NULL, i, nb->name);

		const char *written = nb->address ? nb->address : "";

		if (j < s->n_backends &&
		    addr_equal(&s->backends[j]->rt->addr, s->backends[j]->rt->addr_len, &nb->addr,
			       nb->addr_len)) {
			if (!strcmp(s->backends[j]->rt->address, written))
				continue;
			if (!pr.written &&
			    !(pr.written = calloc(c->n_backends, sizeof(*pr.written))))
				goto err_free;
			if (!(pr.written[i] = strdup(written)))
				goto err_free;
			continue;
		}
		if (!(pr.fresh[i] = backend_new(s, nb)))
			goto err_free;
	}
	*ret_pr = pr;
	return 0;

err_free:
	service_prep_free(&pr);
	return -ENOMEM;
}

/* Match <s>'s backends against <c> by name and switch <s> to <c>, with what <pr> holds
 * (taken over: freed). */
static void service_update(struct hlb_pool_service *s, const struct hashlb_service_cfg *c,
			   bool settings_changed, struct service_prep *pr)
{
	const struct hashlb_service_cfg *old = s->cfg;
	struct hlb_pool_backend **next = pr->next;
	uint64_t now = hlb_now_ms();
	/* a listen address that the 4-tuple hashes: rebuilt, so that it says what it moved */
	bool full = settings_changed || !table_cfg_equal(old, c) ||
		    old->n_backends != c->n_backends || listen_rehashes(s, old, c);
	bool same_exchange = checks_exchange_equal(&old->health, &c->health) &&
			     old->proxy_protocol == c->proxy_protocol && source_equal(old, c);
	bool recheck = !same_exchange || !checks_cfg_equal(&old->health, &c->health);
	bool was_passive_only = s->hp.passive_hold_ms; /* before service_health_params() */
	uint8_t *taken = pr->taken;
	uint32_t i, j;

	s->listen_rehashed = listen_rehashes(s, old, c);
	change_service(s, old, c, settings_changed);
	/* set where the reload asks for a build (below): one waiting already for a change of
	 * its own (health, hashlb ctl set) is published with the reload's, not its doing */
	s->reload_pending = false;
	s->cfg = c;
	s->rt->cfg = (struct hashlb_service_cfg *)c;
	s->tick_all = true; /* checks on, backends that fail, come or ramp: seen at the next tick */
	service_health_params(s);
	for (i = 0; i < c->n_backends; i++) {
		const struct hashlb_backend_cfg *nb = &c->backends[i];
		struct hlb_pool_backend *b = NULL, *keep = NULL;
		bool start_checks = recheck, same_address;
		struct backend_change chg = { 0 };
		char *was_written = NULL;
		bool back = false;

		j = backend_by_name(s, pr->sorted, taken, i, nb->name);
		if (j < s->n_backends)
			b = s->backends[j];
		/* read from the config as it goes (service_rebuild()): nothing to apply, only to
		 * say */
		if (b && j < old->n_backends &&
		    old->backends[j].close_on_return != nb->close_on_return) {
			chg.what = BACKEND_CHANGED_CLOSE_ON_RETURN;
			chg.close_on_return = old->backends[j].close_on_return;
		}
		same_address =
			b && addr_equal(&b->rt->addr, b->rt->addr_len, &nb->addr, nb->addr_len);
		if (same_address) {
			keep = b;
			taken[j] = BACKEND_KEPT;
			keep->idx = i;
			if (j != i)
				full = true;
			/* its address written otherwise (another host name of that address):
			 * kept, its clients where they are, but the change said as an address's,
			 * and /status and the handover to an upgrade given the name written now */
			if (pr->written && pr->written[i]) {
				was_written = keep->rt->address;
				/* a worker may be reading the one before (its connection
				 * line): freed after a grace period, below */
				__atomic_store_n(&keep->rt->address, pr->written[i],
						 __ATOMIC_RELEASE);
				pr->written[i] = NULL;
				chg.what |= BACKEND_CHANGED_ADDRESS;
				chg.address = was_written;
			}
		} else {
			full = true;
			start_checks = true;
			/* one an earlier reload removed taken back, else a new one
			 * (new, or a new address: the old object drains below) */
			keep = service_reclaim(s, pr->gone_sorted, pr->gone_taken, nb, now);
			back = keep;
			if (!keep) {
				keep = pr->fresh[i];
				pr->fresh[i] = NULL;
				backend_ramp_start(keep, now, 0);
			}
			keep->idx = i;
			/* The same name at a new address (a reload, or resolve_every
			 * following DNS): what was set at run time (hashlb ctl set)
			 * stays with the name, as when the address stays, unless the
			 * config changes that setting (below). A draining one taken
			 * back (the name moved back) takes them too: they are newer
			 * than its own. */
			if (b) {
				backend_adopt(keep, b);
				taken[j] = BACKEND_MOVED;
				chg.what |= BACKEND_CHANGED_ADDRESS;
				chg.address = b->rt->address;
			}
		}
		full |= backend_cfg_apply(keep, nb, c, &chg);
		if (b)
			change_backend_settings(s, keep, &chg);
		else
			change_backend(s, keep, true);
		/* its name down at the old address, up at the new one (assumed, as an added
		 * backend is, until its checks say): said, as every return is (in maint its
		 * health says nothing: it starts down as it leaves) */
		if (b && b != keep && !b->health.up && keep->health.up &&
		    keep->admin != HASHLB_ADMIN_MAINT)
			backend_up_log(keep, c, "moved");
		if (back && !b) /* the name moved back says its address (the change above) */
			service_reclaim_log(s, keep);
		/* no workers: now; out of memory: kept, as an old snapshot is, not freed early */
		if (!s->pool->env.rcu)
			free(was_written);
		else if (was_written)
			hlb_rcu_defer(s->pool->env.rcu, free, was_written);
		b = keep;
		if (start_checks && same_address && same_exchange && hlb_check_running(&b->check)) {
			backend_check_retime(b, now); /* the same checks, at another pace */
		} else if (start_checks && same_address && hlb_pool_backend_checked(b) &&
			   hlb_check_running(&b->check) && hlb_check_busy(&b->check)) {
			/* Another exchange, a check under way: aborted, and each of a storm of
			 * reloads quicker than a check aborting the next, no check ended, and a
			 * silent backend never went down (nor a slow one up). It ends as it
			 * began, counted; the new exchange from the next check on. */
			backend_check_retime(b, now);
			b->check_renew = true;
		} else if (start_checks) {
			if (!hlb_pool_backend_checked(b))
				backend_up_run_stop(b, "reload", now); /* checks turned off */
			backend_check_spread(b, now);
		}
		if (backend_unchecked_up(b, c, was_passive_only, now)) {
			service_schedule(s, false);
			s->reload_pending = true;
		}
		next[i] = b;
	}
	service_gone_compact(s, pr->gone_taken);
	for (j = 0; j < s->n_backends; j++) {
		if (taken[j] == BACKEND_KEPT)
			continue;
		full = true;
		if (taken[j] == BACKEND_RETIRED)
			change_backend(s, s->backends[j], false);
		service_retire_backend(s, s->backends[j], now);
	}
	free(s->backends);
	s->backends = next;
	s->n_backends = c->n_backends;
	pr->next = NULL; /* s->backends now */
	service_prep_free(pr);
	if (full) {
		service_schedule(s, true);
		s->reload_pending = true;
	}
}

static bool prefixes_equal(const struct hashlb_prefix *a, uint32_t na,
			   const struct hashlb_prefix *b, uint32_t nb)
{
	if (na != nb)
		return false;
	for (uint32_t i = 0; i < na; i++)
		if (a[i].family != b[i].family || a[i].len != b[i].len ||
		    memcmp(a[i].addr, b[i].addr, sizeof(a[i].addr)) != 0)
			return false;
	return true;
}

static bool service_settings_equal(const struct hashlb_service_cfg *a,
				   const struct hashlb_service_cfg *b)
{
	return a->key == b->key && a->hash_prefix.v4 == b->hash_prefix.v4 &&
	       a->hash_prefix.v6 == b->hash_prefix.v6 &&
	       a->connect_timeout_ms == b->connect_timeout_ms &&
	       a->idle_timeout_ms == b->idle_timeout_ms &&
	       a->drain_timeout_ms == b->drain_timeout_ms &&
	       a->queue_timeout_ms == b->queue_timeout_ms &&
	       a->abort_on_close == b->abort_on_close && a->max_connections == b->max_connections &&
	       a->max_connections_per_client == b->max_connections_per_client &&
	       a->client_prefix.v4 == b->client_prefix.v4 &&
	       a->client_prefix.v6 == b->client_prefix.v6 &&
	       a->max_connection_rate == b->max_connection_rate &&
	       a->connect_retries == b->connect_retries && a->balance_factor == b->balance_factor &&
	       a->proxy_protocol == b->proxy_protocol && a->accept_proxy == b->accept_proxy &&
	       a->keepalive.enabled == b->keepalive.enabled &&
	       a->keepalive.idle_s == b->keepalive.idle_s &&
	       a->keepalive.interval_s == b->keepalive.interval_s &&
	       a->keepalive.count == b->keepalive.count &&
	       a->keepalive.user_timeout_ms == b->keepalive.user_timeout_ms &&
	       prefixes_equal(a->proxy_from, a->n_proxy_from, b->proxy_from, b->n_proxy_from) &&
	       prefixes_equal(a->allow_clients, a->n_allow_clients, b->allow_clients,
			      b->n_allow_clients) &&
	       prefixes_equal(a->deny_clients, a->n_deny_clients, b->deny_clients,
			      b->n_deny_clients) &&
	       a->log_connections == b->log_connections && source_equal(a, b);
}

/* <b> of <s>, which a reload removes: one of <p>'s orphans, which a reload adding <s> back
 * takes back (orphan_take()), its health as it was (passive-only's or not) */
static void backend_orphan(struct hlb_pool *p, struct hlb_pool_service *s,
			   struct hlb_pool_backend *b)
{
	b->orphan_passive_only = s->hp.passive_hold_ms;
	b->svc = NULL;
	b->orphan_of = strdup(s->cfg->name); /* NULL: not taken back */
	p->orphans[p->n_orphans++] = b;
}

/*
 * A service a reload removed, or renamed: its listener is closed already;
 * its connections drain like a removed backend's, until the service's
 * timeouts.drain, then are closed (their backends, which they reference,
 * wait among the pool's orphans, whose array has their room: retiring_prepare()).
 * The service itself goes now.
 */
static void pool_retire_service(struct hlb_pool *p, struct hlb_pool_service *s, struct retired *r,
				uint64_t now)
{
	uint64_t deadline = hashlb_drain_end(now, s->cfg->drain_timeout_ms), held = 0;
	char ms[HASHLB_DRAIN_MS_STRLEN];
	uint32_t k = 0;

	for (uint32_t i = 0; i < s->n_backends; i++) {
		held += atomic_load(&s->backends[i]->rt->claimed);
		backend_up_run_stop(s->backends[i], "reload", now);
	}
	r->deadline_ms = deadline;
	for (uint32_t i = 0; i < s->n_removed + s->n_drained; i++) {
		const struct hlb_pool_backend *b =
			i < s->n_removed ? s->removed[i] : s->drained[i - s->n_removed];
		uint64_t until = hlb_pool_backend_drain_deadline(b);

		held += i < s->n_removed ? atomic_load(&b->rt->claimed) : 0;
		if (until > r->deadline_ms)
			r->deadline_ms = until;
	}
	if (held)
		pool_log(p, HLB_LOG_INFO, "service removed: its connections drain",
			 "service=%s connections=%" PRIu64 " drain_timeout_ms=%s", s->cfg->name,
			 held, hashlb_drain_ms_text(s->cfg->drain_timeout_ms, ms));
	atomic_store(&s->rt->removed, true);
	pool_queue_kick(s); /* its waiting clients are closed: they reconnect to a service */
	/* its config is freed with the one this reload replaces, while the
	 * workers may hold <rt> longer: nothing reads it until a reload adding
	 * the service back takes <rt> back with its own (service_new()) */
	s->rt->cfg = NULL;
	retire_keep(p, s, r);
	for (uint32_t i = 0; i < s->n_backends; i++) {
		struct hlb_pool_backend *b = s->backends[i];

		hlb_check_stop(&b->check);
		backend_drain_until(b, deadline);
		atomic_store(&b->rt->admin, (int)HASHLB_ADMIN_DRAIN);
		backend_orphan(p, s, b);
	}
	for (uint32_t i = 0; i < s->n_removed; i++) /* already draining: their deadline */
		backend_orphan(p, s, s->removed[i]);
	/* drained, their removal not final yet: a reload adding the service back takes them
	 * back, as one adding them back to it would have (service_reclaim()), until their
	 * deadline; those past it, kept for their series alone, go with the service */
	for (uint32_t i = 0; i < s->n_drained; i++) {
		struct hlb_pool_backend *b = s->drained[i];

		if (now >= hlb_pool_backend_drain_deadline(b)) {
			s->drained[k++] = b;
			continue;
		}
		backend_orphan(p, s, b);
	}
	s->n_drained = k;
	s->n_backends = s->n_removed = 0;
	service_free(s);
}

/*
 * What removing each running service that <kept> does not mark takes, made before a reload
 * changes anything: room among <p>'s orphans for its backends (pool_retire_service()) and
 * among its retired services for it, and what keeping it retired holds, into <retiring>
 * (retire_prepare(); [j]: the running service j's). -ENOMEM, what was made into <retiring>
 * freed by retiring_free().
 */
static int retiring_prepare(struct hlb_pool *p, const bool *kept, struct retired *retiring)
{
	size_t n = p->n_orphans + 1, n_retired = p->n_retired + 1;
	struct hlb_pool_backend **v;
	struct retired *rv;

	for (uint32_t j = 0; j < p->n_svcs; j++) {
		if (kept[j])
			continue;
		n += p->svcs[j]->n_backends + p->svcs[j]->n_removed + p->svcs[j]->n_drained;
		n_retired++;
		if (retire_prepare(p->svcs[j], &retiring[j]) < 0)
			return -ENOMEM;
	}
	if (!(v = realloc(p->orphans, n * sizeof(*v))))
		return -ENOMEM;
	p->orphans = v;
	if (!(rv = realloc(p->retired, n_retired * sizeof(*rv))))
		return -ENOMEM;
	p->retired = rv;
	return 0;
}

static void retiring_free(struct retired *retiring, uint32_t n)
{
	for (uint32_t j = 0; retiring && j < n; j++) {
		free(retiring[j].name);
		free(retiring[j].bes);
	}
	free(retiring);
}

int hlb_pool_apply(struct hlb_pool *p, const struct hashlb_config *cfg,
		   struct hlb_pool_changes *ret_changes, struct hashlb_error *err)
{
	struct hlb_pool_changes changes = { 0 };
	struct hlb_pool_service **next =
		calloc(cfg->n_services ? cfg->n_services : 1, sizeof(*next));
	bool *kept = calloc(p->n_svcs ? p->n_svcs : 1, sizeof(*kept));
	bool *fresh = calloc(cfg->n_services ? cfg->n_services : 1, sizeof(*fresh));
	/* <cfg>'s services by name, <p>'s index once they run */
	struct name_idx *by_name = calloc(cfg->n_services ? cfg->n_services : 1, sizeof(*by_name));
	const struct name_idx *hit;
	struct service_prep *prep = NULL;
	/* [j]: what retiring the running service j takes, if the reload removes it */
	struct retired *retiring = calloc(p->n_svcs ? p->n_svcs : 1, sizeof(*retiring));
	uint32_t n_running = p->n_svcs;
	int ret = 0;
	uint32_t i, j;

	if (!next || !kept || !fresh || !by_name || !retiring) {
		ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		goto out;
	}
	ret = pool_check_sources(cfg, err);
	if (ret < 0)
		goto out;
	/* Listen for every service of <cfg>, creating the new ones: this is what
	 * can fail, so it comes before any change to the running services. */
	if (orphans_sorted_begin(p) < 0) {
		ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		goto out;
	}
	pool_listen_begin(p);
	for (i = 0; i < cfg->n_services && ret == 0; i++) {
		const struct hashlb_service_cfg *c = &cfg->services[i];

		hit = name_idx_find(p->by_name, p->n_svcs, c->name, true);
		j = hit && !kept[hit->j] ? hit->j : p->n_svcs;
		if (j < p->n_svcs) {
			kept[j] = true;
			next[i] = p->svcs[j];
		} else {
			ret = service_new(p, c, NULL, &next[i], err);
			fresh[i] = ret == 0;
		}
		if (ret == 0)
			ret = pool_listen(p, next[i], c, err);
	}
	orphans_sorted_end(p);
	/* What the running services' updates allocate, before any changes: short of memory,
	 * the reload fails whole (its listeners undone), no line of its changes written. */
	if (ret == 0 && !(prep = calloc(cfg->n_services ? cfg->n_services : 1, sizeof(*prep))))
		ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	for (i = 0; i < cfg->n_services && ret == 0; i++)
		if (!fresh[i] && service_prepare(next[i], &cfg->services[i], &prep[i]) < 0)
			ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM,
					 "out of memory to update service '%s'",
					 cfg->services[i].name);
	if (ret == 0 && retiring_prepare(p, kept, retiring) < 0)
		ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	/* Nothing can fail it now: a retired service taken back serves the new config's
	 * snapshot, before its listener starts. Before, service_new() published it into the
	 * retired <rt> at once, and a reload failing after left the retired service's
	 * connections retried to the aborted config's backends. It is no longer removed
	 * before that snapshot is published (release: a worker that reads the snapshot reads
	 * that too): a client of it that a worker queued, seeing the new snapshot but still
	 * the removal, was closed as no_backend (removed was cleared by retired_taken_back(),
	 * after the listener started). */
	for (i = 0; i < cfg->n_services && ret == 0; i++) {
		if (fresh[i] && next[i]->unpublished) {
			atomic_store(&next[i]->rt->removed, false);
			service_publish(next[i], next[i]->unpublished);
			next[i]->unpublished = NULL;
		}
	}
	pool_listen_end(p, ret == 0);
	if (ret < 0) {
		for (i = 0; i < cfg->n_services; i++)
			if (fresh[i])
				service_free(next[i]);
		goto out;
	}
	p->changes = ret_changes ? &changes : NULL;
	p->change_lines = p->changes_unlogged = 0;
	for (i = 0; i < cfg->n_services; i++) {
		const struct hashlb_service_cfg *c = &cfg->services[i];

		if (fresh[i]) {
			change_service_added(p, c, true);
			orphans_adopted(p, next[i]);
			retired_taken_back(p, next[i]);
			service_checks_start(next[i]);
			continue;
		}
		service_update(next[i], c, !service_settings_equal(next[i]->cfg, c), &prep[i]);
	}
	for (j = 0; j < p->n_svcs; j++) {
		if (kept[j])
			continue;
		change_service_added(p, p->svcs[j]->cfg, false);
		pool_retire_service(p, p->svcs[j], &retiring[j], hlb_now_ms());
	}
	if (p->changes_unlogged)
		pool_log(p, HLB_LOG_INFO, "reload: more changes, not logged one by one", "more=%u",
			 p->changes_unlogged);
	p->changes = NULL;
	if (ret_changes)
		*ret_changes = changes;
	free(p->svcs);
	p->svcs = next;
	p->n_svcs = cfg->n_services;
	free(p->by_name);
	p->by_name = by_name;
	services_index(p);
	p->cfg = cfg;
	next = NULL;
	by_name = NULL;
out:
	for (i = 0; prep && i < cfg->n_services; i++)
		service_prep_free(&prep[i]);
	free(prep);
	retiring_free(retiring, n_running);
	free(next);
	free(kept);
	free(fresh);
	free(by_name);
	return ret;
}

/* ---- the counters an upgrade in place carries over ---- */

#define TOTAL(f) offsetof(struct hlb_pool_totals, f)
/*
 * A backend's totals in the order its HLB_HANDOVER_TOTALS lines list them: the order is the
 * format, read by index by every version, so a counter added goes at its end (its ends and
 * connect buckets by name too: a new end, or bucket, is added there, not where its enum or
 * array puts it). Gauges are not carried: they say what is now, in this process.
 */
static const size_t backend_totals[] = {
	TOTAL(c.total),
	TOTAL(c.bytes_in),
	TOTAL(c.bytes_out),
	TOTAL(c.connect_fail),
	TOTAL(c.connect_timeout),
	TOTAL(c.retries),
	TOTAL(c.splices),
	TOTAL(c.bytes_spliced),
	TOTAL(c.full),
	TOTAL(checks_ok),
	TOTAL(checks_failed),
	TOTAL(checks_skipped),
	TOTAL(flaps),
	TOTAL(passive_holds),
	TOTAL(c.ends[HLB_END_DONE]),
	TOTAL(c.ends[HLB_END_CLIENT_RESET]),
	TOTAL(c.ends[HLB_END_BACKEND_RESET]),
	TOTAL(c.ends[HLB_END_IDLE]),
	TOTAL(c.ends[HLB_END_ERROR]),
	TOTAL(c.ends[HLB_END_DRAIN]),
	TOTAL(c.ends[HLB_END_CLOSED]),
	TOTAL(c.ends[HLB_END_BACKEND_DOWN]),
	TOTAL(c.ends[HLB_END_PRIMARY_UP]),
	TOTAL(c.connect_us_sum),
	TOTAL(c.connect_hist[0]),
	TOTAL(c.connect_hist[1]),
	TOTAL(c.connect_hist[2]),
	TOTAL(c.connect_hist[3]),
	TOTAL(c.connect_hist[4]),
	TOTAL(c.connect_hist[5]),
	TOTAL(c.connect_hist[6]),
	TOTAL(c.connect_hist[7]),
	TOTAL(c.connect_hist[8]),
	TOTAL(c.connect_hist[9]),
	TOTAL(c.connect_hist[10]),
	TOTAL(c.connect_hist[11]),
	TOTAL(c.connect_hist[12]),
	TOTAL(c.connect_hist[13]),
	TOTAL(c.connect_hist[14]),
	TOTAL(c.connect_hist[15]),
	TOTAL(c.connect_hist[16]),
};
#undef TOTAL
/* an end or a bucket added must be added to the list above (at its end) */
_Static_assert(HLB_END_MAX == 9 && HLB_CONNECT_BUCKETS == 16, "backend_totals[]");

#define TOTAL(f) offsetof(struct hlb_service_counters, f)
/* A service's, the same way (HLB_HANDOVER_SERVICE_TOTALS). */
static const size_t service_totals[] = {
	TOTAL(lookups),	     TOTAL(total),	    TOTAL(rejected),	 TOTAL(no_backend),
	TOTAL(bad_header),   TOTAL(untrusted),	    TOTAL(denied),	 TOTAL(client_limited),
	TOTAL(queued_total), TOTAL(queue_timeouts), TOTAL(queue_aborts), TOTAL(rate_pauses),
};
#undef TOTAL

#define N_TOTALS(v) (sizeof(v) / sizeof((v)[0]))

static uint64_t *total_at(void *counters, size_t off)
{
	return (uint64_t *)((char *)counters + off);
}

static uint64_t total_of(const void *counters, size_t off)
{
	return *(const uint64_t *)((const char *)counters + off);
}

/* Add the totals <from> lists at <offs> (<n>) to <to>. */
static void totals_add(void *to, const void *from, const size_t *offs, size_t n)
{
	for (size_t k = 0; k < n; k++)
		*total_at(to, offs[k]) += total_of(from, offs[k]);
}

void hlb_pool_backend_totals(const struct hlb_pool_backend *b, struct hlb_pool_totals *ret)
{
	struct hlb_pool_totals t = { .checks_ok = b->checks_ok,
				     .checks_failed = b->checks_failed,
				     .checks_skipped = b->checks_skipped,
				     .flaps = b->health.flaps,
				     .passive_holds = b->passive_holds };

	hlb_backend_counters_read(b->rt, &t.c);
	if (b->carried)
		totals_add(&t, b->carried, backend_totals, N_TOTALS(backend_totals));
	*ret = t;
}

void hlb_pool_service_totals(const struct hlb_pool_service *s, struct hlb_service_counters *ret)
{
	hlb_service_counters_read(s->rt, ret);
	totals_add(ret, &s->carried, service_totals, N_TOTALS(service_totals));
}

/* The lines of the totals <v> lists at <offs> (<n>), each <head> (<head_len> bytes: its kind
 * and names) then the index of its first value: one per stretch of HLB_HANDOVER_TOTALS_PER_LINE
 * not all 0. Written without printf: 20,000 backends are 800,000 values, 0.46 s with it. */
static void totals_lines(struct hlb_buf *o, const char *head, size_t head_len, const void *v,
			 const size_t *offs, size_t n)
{
	for (size_t k = 0; k < n; k += HLB_HANDOVER_TOTALS_PER_LINE) {
		size_t end =
			n - k < HLB_HANDOVER_TOTALS_PER_LINE ? n : k + HLB_HANDOVER_TOTALS_PER_LINE;
		size_t i = k;

		while (i < end && !total_of(v, offs[i]))
			i++;
		if (i == end)
			continue;
		hlb_buf_put(o, head, head_len);
		hlb_buf_put(o, " ", 1);
		hlb_buf_u64(o, k);
		for (i = k; i < end; i++) {
			hlb_buf_put(o, " ", 1);
			hlb_buf_u64(o, total_of(v, offs[i]));
		}
		hlb_buf_put(o, "\n", 1);
	}
}

void hlb_pool_handover_totals(const struct hlb_pool *p, struct hlb_buf *o)
{
	char head[sizeof("service-totals ") + 2 * HASHLB_NAME_MAX + 2];

	for (uint32_t i = 0; i < p->n_svcs; i++) {
		const struct hlb_pool_service *s = p->svcs[i];
		struct hlb_service_counters sc;
		int len;

		hlb_pool_service_totals(s, &sc);
		len = snprintf(head, sizeof(head), HLB_HANDOVER_SERVICE_TOTALS, s->cfg->name);
		totals_lines(o, head, (size_t)len, &sc, service_totals, N_TOTALS(service_totals));
		/* not those a reload removed: the new config, this one's, has them no more */
		for (uint32_t j = 0; j < s->n_backends; j++) {
			const struct hlb_pool_backend *b = s->backends[j];
			struct hlb_pool_totals t;

			hlb_pool_backend_totals(b, &t);
			len = snprintf(head, sizeof(head), HLB_HANDOVER_TOTALS, s->cfg->name,
				       b->rt->name);
			totals_lines(o, head, (size_t)len, &t, backend_totals,
				     N_TOTALS(backend_totals));
		}
	}
}

/* The field of *<at> up to its next space (or its end), *<at> past that space: <out>
 * (<size> bytes) if it fits, NUL-terminated; false, if empty or longer. */
static bool totals_field(const char **at, char *out, size_t size)
{
	size_t len = strcspn(*at, " ");

	if (!len || len >= size)
		return false;
	memcpy(out, *at, len);
	out[len] = '\0';
	*at += len + ((*at)[len] == ' ');
	return true;
}

/* The values of a totals line at <v> (its first at index <first>) into <to> at <offs> (<n>):
 * each one this version knows of, kept if higher already; those past them (a later
 * version's) passed over: the walk ends at the list's end (an index near UINT64_MAX wrapped to
 * its first counters). A field that is not a number of 64 bits alone ends the line's values. */
static void totals_take(void *to, const size_t *offs, size_t n, uint64_t first, const char *v)
{
	for (uint64_t k = first; k < n; k++) {
		char *end;
		uint64_t x;

		while (*v == ' ')
			v++;
		if (*v < '0' || *v > '9')
			return;
		errno = 0;
		x = strtoull(v, &end, 10);
		if (errno || (*end && *end != ' '))
			return;
		v = end;
		if (x > total_of(to, offs[k]))
			*total_at(to, offs[k]) = x;
	}
}

/* <s>'s backend named <name>, NULL if none: by <*sorted>, <*sorted_of>'s names sorted (made
 * anew for another service: lines come a service at a time), a bsearch, for 20,000 backends
 * are 100,000 lines; a walk of the backends if that is short of memory. */
static struct hlb_pool_backend *totals_backend(struct hlb_pool_service *s, const char *name,
					       struct name_idx **sorted,
					       const struct hlb_pool_service **sorted_of)
{
	const struct name_idx *hit;

	if (s != *sorted_of) {
		free(*sorted);
		*sorted = backends_sorted(s);
		*sorted_of = s;
	}
	if (!*sorted)
		return hlb_pool_backend_find(s, name);
	hit = name_idx_find(*sorted, s->n_backends, name, false);
	return hit ? s->backends[hit->j] : NULL;
}

uint32_t hlb_pool_carry_totals(struct hlb_pool *p, const char *text)
{
	const struct hlb_pool_service *sorted_of = NULL;
	struct name_idx *sorted = NULL;
	const void *last = NULL;
	uint32_t n = 0;

	for (const char *l = text; l && *l;) {
		char line[HLB_HANDOVER_LINE_MAX + 1], kind[16];
		char svc[HASHLB_NAME_MAX + 1], name[HASHLB_NAME_MAX + 1];
		struct hlb_pool_service *s;
		struct hlb_pool_backend *b;
		const char *at = line;
		bool service;
		char *end;
		uint64_t first;

		if (!hlb_handover_next_line(&l, line) || !totals_field(&at, kind, sizeof(kind)))
			continue;
		service = !strcmp(kind, "service-totals");
		if ((!service && strcmp(kind, "totals")) || !totals_field(&at, svc, sizeof(svc)) ||
		    (!service && !totals_field(&at, name, sizeof(name))) || *at < '0' || *at > '9')
			continue;
		errno = 0;
		first = strtoull(at, &end, 10);
		if (errno || !(s = hlb_pool_service_find(p, svc))) /* ERANGE: past every list */
			continue;
		if (service) {
			totals_take(&s->carried, service_totals, N_TOTALS(service_totals), first,
				    end);
			n += last != s;
			last = s;
			continue;
		}
		b = totals_backend(s, name, &sorted, &sorted_of);
		if (!b || (!b->carried && !(b->carried = calloc(1, sizeof(*b->carried)))))
			continue; /* a backend the new config removed drops its totals */
		totals_take(b->carried, backend_totals, N_TOTALS(backend_totals), first, end);
		n += last != b;
		last = b;
	}
	free(sorted);
	return n;
}
