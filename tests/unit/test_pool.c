// SPDX-License-Identifier: MIT
/*
 * The pool: health and admin changes rebuild with only the changed
 * backend's clients moving, bursts coalesce into one build, weights rebuild
 * fully, slow start ramps, bounded load skips a hot backend, and a reload
 * applies the difference (settings too), or, short of memory, nothing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control/balance.h"
#include "control/check.h"
#include "control/control.h"
#include "control/loop.h"
#include "control/pool.h"
#include "hashlb/steer.h"
#include "runtime/fdpass.h"

#define N_HASHES 20000

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void backend_fill(struct hashlb_backend_cfg *b, const char *name, uint32_t weight)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&b->addr;

	memset(b, 0, sizeof(*b));
	b->name = strdup(name);
	b->address = strdup("127.0.0.1:9");
	sin->sin_family = AF_INET;
	sin->sin_port = htons(9);
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	b->addr_len = sizeof(*sin);
	b->weight = weight;
}

/* One service "web" with backends b0..b<n-1>, health checks off. */
static struct hashlb_config *config_new(enum hashlb_scheme scheme, uint32_t n)
{
	struct hashlb_config *c = calloc(1, sizeof(*c));
	struct hashlb_service_cfg *s;

	c->services = calloc(1, sizeof(*s));
	c->n_services = 1;
	s = &c->services[0];
	s->name = strdup("web");
	s->listen = strdup("127.0.0.1:0");
	hashlb_table_params_init(&s->table, scheme);
	if (scheme == HASHLB_SCHEME_MAGLEV)
		s->table.maglev_m = 4099;
	s->table.seed = 42;
	s->drain_timeout_ms = 30000;
	s->health = (struct hashlb_health_cfg){
		.enabled = false,
		.interval_ms = 2000,
		.timeout_ms = 1000,
		.rise = 2,
		.fall = 3,
		.passive = true,
		.passive_hold_ms = 10000, /* the config's defaults */
	};
	s->backends = calloc(n, sizeof(*s->backends));
	s->n_backends = n;
	for (uint32_t i = 0; i < n; i++) {
		char name[16];

		snprintf(name, sizeof(name), "b%u", i);
		backend_fill(&s->backends[i], name, 1);
	}
	return c;
}

struct fixture {
	struct hashlb_config *cfg;
	struct hlb_loop *loop;
	struct hlb_rcu *rcu;
	struct hlb_pool_env env;
	struct hlb_pool *pool;
	struct hlb_pool_service *svc;
	uint32_t published;
	uint32_t published_removed; /* of those, into a service removed at the time */
	const struct hlb_snapshot *last;
};

static void on_publish(void *arg, struct hlb_service *svc, const struct hlb_snapshot *snap)
{
	struct fixture *f = arg;

	f->published++;
	f->published_removed += atomic_load(&svc->removed);
	f->last = snap;
}

/* <readers> readers of the RCU domain: online ones hold deferred work back. */
static void fixture_setup_readers(struct fixture *f, enum hashlb_scheme scheme, uint32_t n,
				  uint32_t readers, void (*edit)(struct hashlb_config *))
{
	struct hashlb_error err = { 0 };

	memset(f, 0, sizeof(*f));
	f->cfg = config_new(scheme, n);
	if (edit)
		edit(f->cfg);
	assert_int_equal(hlb_loop_new(&f->loop), 0);
	assert_int_equal(hlb_rcu_new(readers, &f->rcu), 0);
	f->env = (struct hlb_pool_env){ .n_workers = 2, .rcu = f->rcu };
	assert_int_equal(hlb_pool_new(f->cfg, f->loop, &f->env, &f->pool, &err), 0);
	assert_int_equal(hlb_pool_subscribe(f->pool, on_publish, f), 0);
	f->svc = hlb_pool_service_at(f->pool, 0);
}

static int fixture_setup(struct fixture *f, enum hashlb_scheme scheme, uint32_t n)
{
	fixture_setup_readers(f, scheme, n, 0, NULL);
	return 0;
}

static void fixture_teardown(struct fixture *f)
{
	hlb_pool_free(f->pool);
	hlb_rcu_free(f->rcu);
	hlb_loop_free(f->loop);
	hashlb_config_free(f->cfg);
}

/* Swap <f>'s config for <next> (a reload), which must succeed. */
static void fixture_reload(struct fixture *f, struct hashlb_config *next)
{
	struct hashlb_error err = { 0 };

	assert_int_equal(hlb_pool_apply(f->pool, next, NULL, &err), 0);
	hashlb_config_free(f->cfg);
	f->cfg = next;
}

static void backend_fail(struct hlb_pool_backend *b)
{
	for (int i = 0; i < 3; i++)
		hlb_pool_health_result(b, false);
}

static uint32_t *lookups(const struct hlb_snapshot *s)
{
	uint32_t *v = malloc(N_HASHES * sizeof(*v));

	for (uint32_t i = 0; i < N_HASHES; i++)
		v[i] = hashlb_table_lookup(s->table, mix(i));
	return v;
}

static void check_only_moved(const uint32_t *before, const uint32_t *after, uint32_t gone)
{
	uint32_t moved = 0;

	for (uint32_t i = 0; i < N_HASHES; i++) {
		if (before[i] != gone) {
			assert_int_equal(after[i], before[i]);
		} else {
			assert_int_not_equal(after[i], gone);
			moved++;
		}
	}
	assert_true(moved > 0);
}

static void down_moves_only_its_clients(enum hashlb_scheme scheme)
{
	struct fixture f;
	struct hlb_pool_backend *b3;
	uint32_t *before, *after;
	uint64_t fp0;

	fixture_setup(&f, scheme, 10);
	assert_int_equal(hlb_pool_snapshot(f.svc)->generation, 1);
	fp0 = hlb_pool_snapshot(f.svc)->fingerprint;
	before = lookups(hlb_pool_snapshot(f.svc));

	b3 = hlb_pool_backend_find(f.svc, "b3");
	backend_fail(b3);
	assert_false(hlb_pool_backend_up(b3));
	/* counted as the checker's results are (/status, /metrics): the same path */
	assert_int_equal(b3->checks_failed, 3);
	hlb_pool_flush(f.pool);
	assert_int_equal(f.published, 1);
	assert_ptr_equal(f.last, hlb_pool_snapshot(f.svc));
	/* Subscribers find the service's settings (e.g. steering) on it. */
	assert_ptr_equal(f.svc->rt->cfg, &f.cfg->services[0]);
	assert_int_equal(hlb_pool_snapshot(f.svc)->generation, 2);
	assert_int_not_equal(hlb_pool_snapshot(f.svc)->fingerprint, fp0);
	after = lookups(hlb_pool_snapshot(f.svc));
	check_only_moved(before, after, 3);
	free(after);

	/* Back up: exactly its clients return. */
	hlb_pool_health_result(b3, true);
	hlb_pool_health_result(b3, true);
	assert_int_equal(b3->checks_ok, 2);
	hlb_pool_flush(f.pool);
	assert_int_equal(hlb_pool_snapshot(f.svc)->fingerprint, fp0);
	free(before);
	fixture_teardown(&f);
}

static void test_down_moves_only_its_clients_maglev(void **state)
{
	down_moves_only_its_clients(HASHLB_SCHEME_MAGLEV);
}

static void test_down_moves_only_its_clients_ring(void **state)
{
	down_moves_only_its_clients(HASHLB_SCHEME_RING);
}

static void test_burst_coalesces_into_one_build(void **state)
{
	struct fixture f;
	uint64_t rebuilds;

	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 20);
	rebuilds = f.svc->rebuilds;
	for (uint32_t i = 0; i < 8; i++)
		backend_fail(f.svc->backends[i]);
	/* The build is scheduled on the loop, not done per change. */
	assert_true(f.svc->dirty);
	assert_int_equal(f.published, 0);
	for (int i = 0; i < 100 && f.svc->dirty; i++)
		hlb_loop_run_once(f.loop, 10);
	assert_false(f.svc->dirty);
	assert_int_equal(f.svc->rebuilds, rebuilds + 1);
	assert_int_equal(f.published, 1);
	assert_int_equal(hashlb_table_up_count(hlb_pool_snapshot(f.svc)->table), 12);
	assert_true(f.svc->rebuild_ns_last > 0);
	fixture_teardown(&f);
}

/*
 * Run <f>'s loop through <n> more ticks of its service, each begun and done after the call,
 * whatever the time they take on a loaded machine (at most 10 s, that no tick came failing
 * it).
 */
static void loop_ticks(struct fixture *f, uint64_t n)
{
	uint64_t ticks = f->svc->ticks + n;
	uint64_t end = hlb_now_ms() + 10000;

	while (f->svc->ticks < ticks && hlb_now_ms() < end)
		hlb_loop_run_once(f->loop, 100); /* woken by its timers: the tick's */
	assert_true(f->svc->ticks >= ticks);
}

/* The backends <f>'s service's ticks visit while its loop runs through 10 more of them. */
static uint64_t tick_visits_over_ten_ticks(struct fixture *f)
{
	uint64_t visits = f->svc->tick_visits;

	loop_ticks(f, 10);
	return f->svc->tick_visits - visits;
}

/*
 * Checks off, no ramp, no connect failing: a tick visits no backend, at 5,000 as at 5. Each
 * tick (50 ms) read every backend's passive-health counter for nothing, two cache lines each:
 * 80 % of the idle control thread's time at 5,000 backends. (This compared the loop's CPU time
 * at 5,000 backends with that at 5, which a loaded machine made fail 1 run in 16: the visits
 * are what cost, and they are counted.)
 */
static void test_idle_tick_visits_no_backend(void **state)
{
	struct fixture big;

	(void)state;
	fixture_setup(&big, HASHLB_SCHEME_RING, 5000);
	tick_visits_over_ten_ticks(&big); /* the first ticks see every backend */
	assert_int_equal(tick_visits_over_ten_ticks(&big), 0);
	fixture_teardown(&big);
}

/*
 * Maglev, checks off: a backend that keeps failing connects, once the retry table has it down,
 * leaves the ticks nothing to do: they visit no backend. Each tick visited every backend while
 * it failed, until it recovered.
 */
static void big_maglev_table(struct hashlb_config *c)
{
	c->services[0].table.maglev_m = 65537;
	c->services[0].health.passive = false; /* no passive-only health: the retry table alone */
}

static void test_failing_backend_tick_visits_no_backend(void **state)
{
	struct fixture big;

	(void)state;
	fixture_setup_readers(&big, HASHLB_SCHEME_MAGLEV, 5000, 0, big_maglev_table);
	atomic_store(&big.svc->backends[7]->rt->consecutive_fail, 1);
	hlb_pool_failing(big.pool);
	tick_visits_over_ten_ticks(&big); /* the retry table is built and published */
	assert_true(hashlb_table_backend_down(hlb_pool_snapshot(big.svc)->retry_table, 7));
	atomic_store(&big.svc->backends[7]->rt->consecutive_fail, 40); /* still failing */
	assert_int_equal(tick_visits_over_ten_ticks(&big), 0);
	/* it recovers and fails again: the worker's word is acted on as before */
	atomic_store(&big.svc->backends[7]->rt->consecutive_fail, 0);
	atomic_store(&big.svc->backends[9]->rt->consecutive_fail, 1);
	hlb_pool_failing(big.pool);
	tick_visits_over_ten_ticks(&big);
	assert_true(hashlb_table_backend_down(hlb_pool_snapshot(big.svc)->retry_table, 9));
	fixture_teardown(&big);
}

/* Run <f>'s loop for <ms>. */
static void loop_for(struct fixture *f, uint64_t ms)
{
	uint64_t end = hlb_now_ms() + ms;

	while (hlb_now_ms() < end)
		hlb_loop_run_once(f->loop, 10);
}

/*
 * Run <f>'s loop through its service's ticks until one leaves it at rest: the next visits no
 * backend (its first ones visit every one), so that what a test does next is seen only by the
 * way it is told (a worker's word, a reload, ...), not by a tick that would have visited the
 * backends anyway. A wait for a time instead (150 ms) could end before any tick on a loaded
 * machine.
 */
static void loop_to_rest(struct fixture *f)
{
	uint64_t end = hlb_now_ms() + 10000;

	do
		loop_ticks(f, 1);
	while (f->svc->tick_all && hlb_now_ms() < end);
	assert_false(f->svc->tick_all);
}

/*
 * Connects that failed while checks were off, passive health too (ticks that look at no
 * backend), are no passive failures once a reload turns checks on: only those after it count,
 * as when each tick read every backend's run.
 */
static void passive_off(struct hashlb_config *c)
{
	c->services[0].health.passive = false;
}

static void test_checks_turned_on_count_no_failure_from_before(void **state)
{
	struct hashlb_config *next;
	struct hlb_pool_backend *b;
	struct fixture f;
	uint64_t t0;

	(void)state;
	fixture_setup_readers(&f, HASHLB_SCHEME_RING, 3, 0, passive_off);
	b = hlb_pool_backend_find(f.svc, "b1");
	loop_to_rest(&f);
	atomic_store(&b->rt->consecutive_fail, 5); /* fall is 3 */
	loop_ticks(&f, 3); /* ticks that visit no backend */
	next = config_new(HASHLB_SCHEME_RING, 3);
	next->services[0].health.enabled = true;
	next->services[0].health.interval_ms = 600000; /* no check of b1 meanwhile */
	fixture_reload(&f, next);
	loop_ticks(&f, 4); /* each visiting b1 (checks on), a chance to count the 5 */
	assert_true(b->health.up);
	atomic_store(&b->rt->consecutive_fail, 8); /* 3 more: down */
	t0 = hlb_now_ms();
	while (b->health.up && hlb_now_ms() < t0 + 10000) /* a hang guard */
		hlb_loop_run_once(f.loop, 10);
	assert_false(b->health.up);
	fixture_teardown(&f);
}

/*
 * Maglev: a worker's word that a backend fails connects (hlb_pool_failing()) schedules the
 * retry table's build at once, not after a debounce or at the 50 ms tick: the clients
 * retried until it is published take their list's next and move twice. The build has the
 * backend down in the retry table only, and a second word schedules nothing.
 */
static void test_failing_word_builds_the_retry_table_at_once(void **state)
{
	struct fixture f;
	struct hlb_pool_backend *b1;
	const struct hlb_snapshot *snap;
	uint64_t now;

	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 3);
	b1 = hlb_pool_backend_find(f.svc, "b1");
	f.svc->last_build_ms = 0; /* no build within the gap: the start's is long ago */
	atomic_store(&b1->rt->consecutive_fail, 1);
	now = hlb_now_ms();
	hlb_pool_failing(f.pool);
	assert_true(f.svc->dirty);
	assert_true(f.svc->build_timer.when_ms <= now + 1);
	while (f.svc->dirty)
		hlb_loop_run_once(f.loop, 10);
	assert_int_equal(f.published, 1);
	snap = hlb_pool_snapshot(f.svc);
	assert_false(hashlb_table_backend_down(snap->table, 1));
	assert_non_null(snap->retry_table);
	assert_true(hashlb_table_backend_down(snap->retry_table, 1));
	assert_false(hashlb_table_backend_down(snap->retry_table, 0));
	hlb_pool_failing(f.pool);
	assert_false(f.svc->dirty);
	fixture_teardown(&f);
}

/* Run <f>'s loop until its service's scheduled build is made (a hang guard of 10 s). */
static void loop_to_build(struct fixture *f)
{
	uint64_t end = hlb_now_ms() + 10000;

	while (f->svc->dirty && hlb_now_ms() < end)
		hlb_loop_run_once(f->loop, 10);
	assert_false(f->svc->dirty);
}

/*
 * The fingerprint of <f>'s table built anew (hashlb_table_build()) with the backends of
 * <down_mask> down (bit i: backend i); with <like> (NULL accepted), which must send each of
 * N_HASHES hashes where that table does (a fingerprint carried over from a table it was
 * copied from vouches for the slots no more than that table's did).
 */
static uint64_t fresh_fingerprint_like(const struct fixture *f, uint32_t down_mask,
				       const struct hashlb_table *like)
{
	const struct hashlb_service_cfg *c = &f->cfg->services[0];
	struct hashlb_backend_spec *spec = calloc(c->n_backends, sizeof(*spec));
	struct hashlb_table *t;
	uint64_t fp;

	for (uint32_t i = 0; i < c->n_backends; i++)
		spec[i] = (struct hashlb_backend_spec){ c->backends[i].name, c->backends[i].weight,
							(down_mask >> i) & 1 };
	assert_int_equal(hashlb_table_build(&c->table, spec, c->n_backends, &t, NULL), 0);
	for (uint32_t i = 0; like && i < N_HASHES; i++)
		assert_int_equal(hashlb_table_lookup(like, mix(i)), hashlb_table_lookup(t, mix(i)));
	fp = hashlb_table_fingerprint(t);
	hashlb_table_free(t);
	free(spec);
	return fp;
}

/* The fingerprint of <f>'s table built anew with backend <down> down. */
static uint64_t fresh_fingerprint(const struct fixture *f, uint32_t down)
{
	return fresh_fingerprint_like(f, 1u << down, NULL);
}

/* <f>'s table in use is the one built anew with the backends of <down_mask> down. */
static void assert_fresh(const struct fixture *f, uint32_t down_mask)
{
	const struct hlb_snapshot *snap = hlb_pool_snapshot(f->svc);

	assert_int_equal(snap->fingerprint, fresh_fingerprint_like(f, down_mask, snap->table));
}

/*
 * Maglev: a backend's first failed check (fall 3: still up) makes the retry table with it down,
 * its survivors' table; the verdict's table is then a copy of it, not a population (at the
 * largest M, 0.5 s of the control thread after the verdict, the down backend's new clients sent
 * to it meanwhile), and it is exactly the table a build without that backend gives. Before, the
 * retry table came only from the forwarder's failed connects, and a backend found down by its
 * checks alone was populated at the verdict.
 */
static void test_failed_check_prepares_the_verdicts_table(void **state)
{
	const uint32_t m = 4099;
	struct fixture f;
	struct hlb_pool_backend *b3;
	const struct hlb_snapshot *snap;
	struct hashlb_table *retry;
	bool down[10] = { false };

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 10);
	b3 = hlb_pool_backend_find(f.svc, "b3");
	hlb_pool_health_result(b3, false);
	assert_true(hlb_pool_backend_up(b3));
	assert_true(f.svc->dirty);
	loop_to_build(&f);
	snap = hlb_pool_snapshot(f.svc);
	assert_false(hashlb_table_backend_down(snap->table, 3));
	assert_non_null(snap->retry_table);
	assert_true(hashlb_table_backend_down(snap->retry_table, 3));
	assert_int_equal(hashlb_table_up_count(snap->retry_table), 9);
	/* its slots kept past that snapshot's free (a table that shares them) */
	down[3] = true;
	assert_int_equal(hashlb_table_with_down(snap->retry_table, down, &retry, NULL), 0);
	/* a second failed check: built already, nothing to do */
	hlb_pool_health_result(b3, false);
	assert_false(f.svc->dirty);
	hlb_pool_health_result(b3, false); /* fall: down */
	assert_false(hlb_pool_backend_up(b3));
	loop_to_build(&f);
	snap = hlb_pool_snapshot(f.svc);
	assert_true(hashlb_table_backend_down(snap->table, 3));
	assert_int_equal(snap->fingerprint, fresh_fingerprint(&f, 3));
	/* the effective slots are the retry table's, shared: no slot array of its own beside
	 * them and the full ones (a population keeps the survivors' array too) */
	assert_true(hashlb_table_bytes(snap->table) -
			    hashlb_table_bytes_shared(snap->table, retry) <
		    m * sizeof(uint16_t));
	hashlb_table_free(retry);
	fixture_teardown(&f);
}

/*
 * Maglev: a check that passes, ending a backend's run of failed checks, drops the retry table
 * those made (a build at once), and the table in use is the one before, to the fingerprint; it
 * keeps that backend's survivors' table, as a table back up after an outage does, so that its
 * next run of failed checks builds nothing and its verdict copies (a check that fails now and
 * then populated once, not once a run). While another backend fails connects, the build
 * drops the one that recovered from the retry table, which is then the other's alone.
 */
static void test_passed_check_drops_the_prepared_table(void **state)
{
	struct fixture f;
	struct hlb_pool_backend *b3, *b5, *b7;
	const struct hashlb_table *retry;
	uint64_t fp0, published;

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 10);
	b3 = hlb_pool_backend_find(f.svc, "b3");
	b5 = hlb_pool_backend_find(f.svc, "b5");
	b7 = hlb_pool_backend_find(f.svc, "b7");
	fp0 = hlb_pool_snapshot(f.svc)->fingerprint;
	hlb_pool_health_result(b3, false);
	loop_to_build(&f);
	assert_non_null(hlb_pool_snapshot(f.svc)->retry_table);
	hlb_pool_health_result(b3, true);
	assert_true(f.svc->dirty);
	loop_to_build(&f);
	assert_null(hlb_pool_snapshot(f.svc)->retry_table);
	assert_int_equal(hlb_pool_snapshot(f.svc)->fingerprint, fp0);
	assert_true(hlb_pool_backend_up(b3));
	/* b3 fails again: its survivors are at hand, its verdict a copy of them */
	published = f.published;
	hlb_pool_health_result(b3, false);
	assert_false(f.svc->dirty);
	hlb_pool_health_result(b3, false);
	hlb_pool_health_result(b3, false);
	loop_to_build(&f);
	assert_int_equal(f.published, published + 1);
	assert_int_equal(hlb_pool_snapshot(f.svc)->fingerprint, fresh_fingerprint(&f, 3));
	for (uint32_t k = 0; k < f.cfg->services[0].health.rise; k++)
		hlb_pool_health_result(b3, true);
	loop_to_build(&f);

	/* b5 fails connects meanwhile: b7's recovery leaves the retry table to b5 alone, at a
	 * build (one that b5's verdict copies). Before, b7 stayed down in it until b5's verdict:
	 * b5's clients retried away from it were kept off b7, up all along, where they went
	 * once b5 was down (they moved twice), and b5's verdict populated its survivors again. */
	hlb_pool_health_result(b7, false);
	loop_to_build(&f);
	atomic_store(&b5->rt->consecutive_fail, 1);
	hlb_pool_failing(f.pool);
	loop_to_build(&f);
	assert_true(hashlb_table_backend_down(hlb_pool_snapshot(f.svc)->retry_table, 7));
	assert_true(hashlb_table_backend_down(hlb_pool_snapshot(f.svc)->retry_table, 5));
	published = f.published;
	hlb_pool_health_result(b7, true);
	assert_true(f.svc->dirty);
	loop_to_build(&f);
	assert_int_equal(f.published, published + 1);
	retry = hlb_pool_snapshot(f.svc)->retry_table;
	assert_false(hashlb_table_backend_down(hlb_pool_snapshot(f.svc)->table, 7));
	assert_false(hashlb_table_backend_down(retry, 7));
	assert_true(hashlb_table_backend_down(retry, 5));
	assert_int_equal(hashlb_table_fingerprint(retry), fresh_fingerprint(&f, 5));
	fixture_teardown(&f);
}

/*
 * Maglev: a reload or weight change (a full build) between a check that passes and the build it
 * asked for drops the retry table that check ended, as that build would: a later build, for
 * anything else, is made from the table in use, not from the retry table of another backend
 * failing since, which it would keep as its own outage (that backend up all along), its
 * slots held beside the table's own. Before, the pass's mark outlived the full build, and the
 * next build made the table in use from whatever retry table there was then.
 */
static void test_full_build_drops_a_passed_checks_mark(void **state)
{
	struct fixture f;
	struct hlb_pool_backend *b3, *b5, *b7, *b9;
	const struct hlb_snapshot *snap;
	struct hashlb_table *retry, *full;
	bool down[10] = { false };

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 10);
	b3 = hlb_pool_backend_find(f.svc, "b3");
	b5 = hlb_pool_backend_find(f.svc, "b5");
	b7 = hlb_pool_backend_find(f.svc, "b7");
	b9 = hlb_pool_backend_find(f.svc, "b9");
	hlb_pool_health_result(b3, false);
	loop_to_build(&f);
	hlb_pool_health_result(b3, true); /* its retry table to drop at the next build */
	atomic_store(&b5->rt->consecutive_fail, 1);
	hlb_pool_failing(f.pool);
	assert_int_equal(hlb_pool_set_weight(b9, 2), 0); /* that build a full one */
	loop_to_build(&f);
	snap = hlb_pool_snapshot(f.svc);
	assert_non_null(snap->retry_table);
	assert_true(hashlb_table_backend_down(snap->retry_table, 5));
	assert_false(hashlb_table_backend_down(snap->retry_table, 3));
	/* theirs kept past that snapshot's free (tables that share their slots) */
	assert_int_equal(hashlb_table_with_down(snap->table, down, &full, NULL), 0);
	down[5] = true;
	assert_int_equal(hashlb_table_with_down(snap->retry_table, down, &retry, NULL), 0);
	assert_int_equal(hlb_pool_set_admin(b7, HASHLB_ADMIN_MAINT), 0);
	loop_to_build(&f);
	snap = hlb_pool_snapshot(f.svc);
	assert_true(hashlb_table_backend_down(snap->table, 7));
	assert_false(hashlb_table_backend_down(snap->table, 5));
	/* of b5's retry table, the table in use shares what the one before did (the full
	 * entries both turn over), not its slots with b5 down too */
	assert_int_equal(hashlb_table_bytes_shared(snap->table, retry),
			 hashlb_table_bytes_shared(full, retry));
	hashlb_table_free(retry);
	hashlb_table_free(full);
	fixture_teardown(&f);
}

/*
 * Maglev, beside a backend down for good: a first failed check's retry table has both down, a
 * passing check makes the table in use from it, and each table in use is the one a process
 * started anew with the same backends down would build (the clients established, and those
 * of an upgrade's new process, map the same), to every lookup: after that pass, after the
 * verdict that copies it, and once the backend down for good is back.
 */
static void test_prepared_table_beside_a_backend_down_builds_the_same(void **state)
{
	struct fixture f;
	struct hlb_pool_backend *b1, *b3;
	const struct hlb_snapshot *snap;

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 10);
	b1 = hlb_pool_backend_find(f.svc, "b1");
	b3 = hlb_pool_backend_find(f.svc, "b3");
	backend_fail(b1);
	loop_to_build(&f);
	assert_fresh(&f, 1u << 1);
	hlb_pool_health_result(b3, false);
	loop_to_build(&f);
	snap = hlb_pool_snapshot(f.svc);
	assert_true(hashlb_table_backend_down(snap->retry_table, 1));
	assert_true(hashlb_table_backend_down(snap->retry_table, 3));
	assert_fresh(&f, 1u << 1);
	hlb_pool_health_result(b3, true);
	loop_to_build(&f);
	assert_null(hlb_pool_snapshot(f.svc)->retry_table);
	assert_fresh(&f, 1u << 1);
	backend_fail(b3);
	loop_to_build(&f);
	assert_fresh(&f, 1u << 1 | 1u << 3);
	for (uint32_t k = 0; k < f.cfg->services[0].health.rise; k++)
		hlb_pool_health_result(b1, true);
	loop_to_build(&f);
	assert_fresh(&f, 1u << 3);
	fixture_teardown(&f);
}

/*
 * Maglev: a flap's failed check builds nothing. Back up after an outage, the table keeps the
 * survivors' table of it, so its verdict copies that anyway: a retry table made at its first
 * failed check would be a build more per flap for nothing (flap damping counts on few).
 */
static void test_failed_check_of_a_flap_builds_nothing(void **state)
{
	struct fixture f;
	struct hlb_pool_backend *b3;
	uint32_t published;

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 10);
	b3 = hlb_pool_backend_find(f.svc, "b3");
	backend_fail(b3);
	loop_to_build(&f);
	for (uint32_t k = 0; k < f.cfg->services[0].health.rise; k++)
		hlb_pool_health_result(b3, true);
	assert_true(hlb_pool_backend_up(b3));
	loop_to_build(&f);
	published = f.published;
	hlb_pool_health_result(b3, false);
	assert_false(f.svc->dirty);
	assert_null(hlb_pool_snapshot(f.svc)->retry_table);
	hlb_pool_health_result(b3, false);
	hlb_pool_health_result(b3, false); /* fall: down */
	loop_to_build(&f);
	assert_int_equal(f.published, published + 1);
	assert_true(hashlb_table_backend_down(hlb_pool_snapshot(f.svc)->table, 3));
	assert_int_equal(hlb_pool_snapshot(f.svc)->fingerprint, fresh_fingerprint(&f, 3));
	fixture_teardown(&f);
}

/*
 * Maglev: a failed check while another backend fails builds nothing (a rack going down one by
 * one): a retry table with both down would serve neither verdict but the last, a population
 * more each. The first keeps the table made for it, and its verdict copies it.
 */
static void test_failed_check_beside_another_builds_nothing(void **state)
{
	struct fixture f;
	struct hlb_pool_backend *b3, *b5;
	const struct hlb_snapshot *snap;

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 10);
	b3 = hlb_pool_backend_find(f.svc, "b3");
	b5 = hlb_pool_backend_find(f.svc, "b5");
	hlb_pool_health_result(b3, false);
	loop_to_build(&f);
	hlb_pool_health_result(b5, false);
	assert_false(f.svc->dirty);
	snap = hlb_pool_snapshot(f.svc);
	assert_true(hashlb_table_backend_down(snap->retry_table, 3));
	assert_false(hashlb_table_backend_down(snap->retry_table, 5));
	hlb_pool_health_result(b3, false);
	hlb_pool_health_result(b3, false); /* b3's verdict */
	loop_to_build(&f);
	snap = hlb_pool_snapshot(f.svc);
	assert_true(hashlb_table_backend_down(snap->table, 3));
	assert_false(hashlb_table_backend_down(snap->table, 5));
	assert_int_equal(snap->fingerprint, fresh_fingerprint(&f, 3));
	fixture_teardown(&f);
}

/* 40 backends going down one every 10 ms (checks finding a dead rack one by one). */
static void test_a_stream_of_changes_is_spaced_out(void **state)
{
	struct fixture f;
	uint64_t rebuilds, t0, last_change;

	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 50);
	rebuilds = f.svc->rebuilds;
	t0 = hlb_now_ms();
	for (uint32_t i = 0; i < 40; i++) {
		while (hlb_now_ms() < t0 + 10 * i)
			hlb_loop_run_once(f.loop, 1);
		backend_fail(f.svc->backends[i]);
	}
	/* Every change is in at most HLB_POOL_MAX_GAP_MS after it: the last one's build is
	 * due by then (as scheduled: the time it was seen done took the loop's delays too,
	 * past a bound of 50 ms under load). */
	last_change = hlb_now_ms();
	assert_true(f.svc->dirty &&
		    f.svc->build_timer.when_ms <= last_change + HLB_POOL_MAX_GAP_MS);
	while (f.svc->dirty && hlb_now_ms() < last_change + 10000)
		hlb_loop_run_once(f.loop, 5);
	assert_false(f.svc->dirty);
	assert_int_equal(hashlb_table_up_count(hlb_pool_snapshot(f.svc)->table), 10);
	/* 400 ms of changes: far fewer builds than the 40 changes, or 20 at the minimum gap. */
	assert_true(f.svc->rebuilds - rebuilds <= 10);
	fixture_teardown(&f);
}

static void test_drain_and_maint_take_no_new_clients(void **state)
{
	struct fixture f;
	struct hlb_pool_backend *b;
	uint32_t *before, *after;
	uint64_t fp0;

	fixture_setup(&f, HASHLB_SCHEME_RING, 8);
	fp0 = hlb_pool_snapshot(f.svc)->fingerprint;
	before = lookups(hlb_pool_snapshot(f.svc));
	b = hlb_pool_backend_find(f.svc, "b5");
	assert_int_equal(hlb_pool_set_admin(b, HASHLB_ADMIN_DRAIN), 0);
	hlb_pool_flush(f.pool);
	after = lookups(hlb_pool_snapshot(f.svc));
	check_only_moved(before, after, 5);
	assert_int_equal(atomic_load(&b->rt->admin), HASHLB_ADMIN_DRAIN);
	free(after);

	assert_int_equal(hlb_pool_set_admin(b, HASHLB_ADMIN_MAINT), 0);
	hlb_pool_flush(f.pool);
	after = lookups(hlb_pool_snapshot(f.svc));
	check_only_moved(before, after, 5);
	free(after);

	/* Health checks are off here, so leaving maint is immediate. */
	assert_int_equal(hlb_pool_set_admin(b, HASHLB_ADMIN_READY), 0);
	hlb_pool_flush(f.pool);
	assert_int_equal(hlb_pool_snapshot(f.svc)->fingerprint, fp0);
	assert_int_equal(hlb_pool_set_admin(b, HASHLB_ADMIN_MAX), -EINVAL);
	free(before);
	fixture_teardown(&f);
}

/* The weight change's table (a rebuild from the current one) is the full build's. */
static void weight_change(enum hashlb_scheme scheme)
{
	struct fixture f;
	struct hashlb_backend_spec spec[4];
	struct hashlb_table *ref;
	const struct hlb_snapshot *s;

	fixture_setup(&f, scheme, 4);
	assert_int_equal(hlb_pool_set_weight(f.svc->backends[2], 3), 0);
	assert_int_equal(hlb_pool_set_weight(f.svc->backends[2], HASHLB_WEIGHT_MAX + 1), -EINVAL);
	hlb_pool_flush(f.pool);
	s = hlb_pool_snapshot(f.svc);
	for (uint32_t i = 0; i < 4; i++)
		spec[i] = (struct hashlb_backend_spec){ f.cfg->services[0].backends[i].name,
							i == 2 ? 3 : 1, false };
	assert_int_equal(hashlb_table_build(&f.cfg->services[0].table, spec, 4, &ref, NULL), 0);
	assert_int_equal(s->fingerprint, hashlb_table_fingerprint(ref));
	assert_int_equal(s->up_weight, 6);
	hashlb_table_free(ref);

	/* A weight that fails to build keeps the old table serving. */
	for (uint32_t i = 0; i < 4; i++)
		hlb_pool_set_weight(f.svc->backends[i], 0);
	hlb_pool_flush(f.pool);
	assert_ptr_equal(hlb_pool_snapshot(f.svc), s);
	assert_int_equal(f.svc->rebuilds_failed, 1);
	assert_int_equal(f.svc->last_error.reason, HASHLB_ERR_ALL_WEIGHTS_ZERO);
	fixture_teardown(&f);
}

static void test_weight_change_rebuilds_in_full(void **state)
{
	weight_change(HASHLB_SCHEME_MAGLEV);
	weight_change(HASHLB_SCHEME_RING);
}

/*
 * A backend back up admits a share of its clients that grows with the time since, over
 * slow_start, then all of them. Each share the pool's tick publishes is checked against the
 * time of the loop turn that published it (before and after the turn): not sampled at a
 * fixed 200 ms of a 400 ms ramp, where a tick late under load had the share outside a fifth
 * of the middle (1 run in 10 of the unit tests under ASan and load). A tick is due within
 * HLB_POOL_TICK_MS of the loop's turn before: a turn that began that long after the ramp's
 * first and ended in the ramp ran one, which published a share of it. A ramp without such a
 * turn (a machine that did not schedule the test for most of its second) shows none: the
 * backend goes down and up again for another, up to 10 times.
 */
static void test_slow_start_ramps_admission(void **state)
{
	enum { SLOW = 1000 };
	struct fixture f;
	struct hlb_pool_backend *b;
	uint64_t start, first, before, after, end;
	uint32_t admit, last = 0, ramping = 0;
	bool ticked = false; /* the loop ran a turn with a tick in the ramp */

	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 4);
	f.cfg->services[0].slow_start_ms = SLOW;
	f.svc->hp.half_life_ms = 0; /* ramps again: no flap damping holds the backend down */
	b = f.svc->backends[1];
	assert_int_equal(atomic_load(&b->rt->admit), HLB_ADMIT_ONE);
	for (int ramp = 0; ramp < 10 && !ramping && !ticked; ramp++) {
		backend_fail(b);
		hlb_pool_health_result(b, true);
		hlb_pool_health_result(b, true);
		assert_true(hlb_pool_backend_up(b));
		assert_int_equal(atomic_load(&b->rt->admit), 0);
		start = b->ramp_start_ms;
		last = first = 0;
		end = hlb_now_ms() + 10000; /* a deadline that fails the test, not a measurement */
		while (last < HLB_ADMIT_ONE && hlb_now_ms() < end) {
			before = hlb_now_ms();
			hlb_loop_run_once(f.loop, 10);
			after = hlb_now_ms();
			if (!first)
				first = after;
			else if (before >= first + HLB_POOL_TICK_MS && after < start + SLOW)
				ticked = true;
			admit = atomic_load(&b->rt->admit);
			if (admit == last)
				continue;
			/* a tick of that turn, at a time between <before> and <after> */
			assert_true(admit > last);
			if (admit < HLB_ADMIT_ONE) {
				assert_true(admit >= (before - start) * HLB_ADMIT_ONE / SLOW);
				assert_true(admit <= (after - start) * HLB_ADMIT_ONE / SLOW);
				ramping++;
			} else {
				assert_true(after - start >= SLOW);
			}
			last = admit;
		}
		assert_int_equal(last, HLB_ADMIT_ONE);
	}
	/* a share published in a ramp in which the loop ran a tick */
	assert_true(ramping > 0);
	fixture_teardown(&f);
}

static void test_slow_start_admits_a_stable_fraction(void **state)
{
	for (uint32_t a = 0; a <= HLB_ADMIT_ONE; a += HLB_ADMIT_ONE / 8) {
		uint32_t n = 0;

		for (uint32_t i = 0; i < 100000; i++) {
			bool ok = hlb_slow_start_ok(mix(i), a);

			/* Admitted at a lower fraction: admitted at every higher one. */
			if (a >= HLB_ADMIT_ONE / 8 &&
			    hlb_slow_start_ok(mix(i), a - HLB_ADMIT_ONE / 8))
				assert_true(ok);
			n += ok;
		}
		assert_true(abs((int)n - (int)((uint64_t)a * 100000 / HLB_ADMIT_ONE)) < 1000);
	}
}

static void test_bounded_load_cap(void **state)
{
	/* Off: always fits. */
	assert_true(hlb_bounded_ok(1000, 1, 1000, 4, 0.0));
	/* 4 equal backends, 100 connections, factor 1.25: cap ceil(1.25 * 101 / 4) = 32. */
	assert_true(hlb_bounded_ok(31, 1, 100, 4, 1.25));
	assert_false(hlb_bounded_ok(32, 1, 100, 4, 1.25));
	/* Weight 2 of 5: twice the cap. */
	assert_true(hlb_bounded_ok(50, 2, 100, 5, 1.25));
	assert_false(hlb_bounded_ok(51, 2, 100, 5, 1.25));
	/* An idle service never skips. */
	assert_true(hlb_bounded_ok(0, 1, 0, 100, 1.01));
}

static void test_balance_order_skips_a_hot_backend(void **state)
{
	struct fixture f;
	struct hlb_snapshot *s;
	uint32_t pref[3];
	size_t n;

	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 4);
	f.cfg->services[0].balance_factor = 1.25;
	hlb_pool_set_weight(f.svc->backends[0], 1); /* no-op */
	f.svc->need_full = true;
	f.svc->dirty = true;
	hlb_pool_flush(f.pool);
	s = (struct hlb_snapshot *)hlb_pool_snapshot(f.svc);
	assert_true(s->balance_factor == 1.25);
	n = hashlb_table_preference(s->table, mix(7), pref, 3);
	assert_int_equal(n, 3);
	uint32_t first = pref[0], second = pref[1], third = pref[2];

	/* 100 active in the service, the first choice holds 40 (> 32): skipped. */
	atomic_store(&s->backends[first]->active, 40);
	assert_int_equal(hlb_balance_order(s, mix(7), 100, pref, n), 1);
	assert_int_equal(pref[0], second);
	assert_int_equal(pref[1], third);
	assert_int_equal(pref[2], first);

	/* Slow start not admitting the second either: the third goes first. */
	pref[0] = first, pref[1] = second, pref[2] = third;
	atomic_store(&s->backends[second]->admit, 0);
	assert_int_equal(hlb_balance_order(s, mix(7), 100, pref, n), 2);
	assert_int_equal(pref[0], third);
	assert_int_equal(pref[1], first);
	assert_int_equal(pref[2], second);

	/* Everyone passed over: the order is unchanged, never a refusal. */
	pref[0] = first, pref[1] = second, pref[2] = third;
	atomic_store(&s->backends[third]->active, 40);
	atomic_store(&s->backends[second]->active, 40);
	assert_int_equal(hlb_balance_order(s, mix(7), 100, pref, n), 3);
	assert_int_equal(pref[0], first);
	fixture_teardown(&f);
}

/* calloc() and realloc() (linked with --wrap), failing once for <fail_calloc_size> bytes
 * (calloc()) when set. */
void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_realloc(void *p, size_t size);
static size_t fail_calloc_size;
static uint32_t fail_calloc_nth; /* the nth calloc() or realloc() from now fails, once (0: none) */

void *__wrap_realloc(void *p, size_t size)
{
	if (fail_calloc_nth && --fail_calloc_nth == 0) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_realloc(p, size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	if (fail_calloc_nth && --fail_calloc_nth == 0) {
		errno = ENOMEM;
		return NULL;
	}
	if (fail_calloc_size && n * size == fail_calloc_size) {
		fail_calloc_size = 0;
		errno = ENOMEM;
		return NULL;
	}
	return __real_calloc(n, size);
}

static void count_line(void *arg, enum hlb_log_level level, const char *msg, const char *kv)
{
	(void)level;
	(void)msg;
	(void)kv;
	(*(uint32_t *)arg)++;
}

/* <f> on a service of 4 backends whose pool's log lines count into *<lines> (0 from here). */
static void fixture_setup_counted(struct fixture *f, uint32_t *lines)
{
	struct hashlb_error err = { 0 };

	memset(f, 0, sizeof(*f));
	f->cfg = config_new(HASHLB_SCHEME_MAGLEV, 4);
	assert_int_equal(hlb_loop_new(&f->loop), 0);
	assert_int_equal(hlb_rcu_new(0, &f->rcu), 0);
	f->env = (struct hlb_pool_env){
		.n_workers = 2, .rcu = f->rcu, .log = count_line, .arg = lines
	};
	assert_int_equal(hlb_pool_new(f->cfg, f->loop, &f->env, &f->pool, &err), 0);
	f->svc = hlb_pool_service_at(f->pool, 0);
	*lines = 0;
}

/* The reload of b0's weight 2 and b3 renamed b9, onto <f>'s pool: its result. The pool's
 * first calloc() of <fail_size> bytes fails (0: none), armed once the config is built: the
 * config's own arrays may be of that size too (4 backends' were, once a pool backend grew). */
static int reload_weight_and_rename(struct fixture *f, struct hashlb_config **ret_next,
				    size_t fail_size)
{
	struct hashlb_config *next = config_new(HASHLB_SCHEME_MAGLEV, 4);
	struct hlb_pool_changes changes = { 0 };
	struct hashlb_error err = { 0 };

	next->services[0].backends[0].weight = 2;
	free(next->services[0].backends[3].name);
	next->services[0].backends[3].name = strdup("b9");
	*ret_next = next;
	fail_calloc_size = fail_size;
	return hlb_pool_apply(f->pool, next, &changes, &err);
}

/*
 * A reload that runs out of memory changing a service fails whole: the service stays on the
 * running config, and no line says it changed. Before, the backend it could not make (b9)
 * left the service on its old backends and config, the change lines written before it (b0's
 * weight) stayed in the log, and the reload was applied: its caller freed the old config,
 * which the service still read.
 */
static void test_reload_short_of_memory_changes_nothing(void **state)
{
	struct fixture f;
	struct hashlb_config *next;
	uint32_t lines = 0;

	(void)state;
	fixture_setup_counted(&f, &lines);

	/* b9's */
	assert_int_equal(reload_weight_and_rename(&f, &next, sizeof(struct hlb_pool_backend)),
			 -ENOMEM);
	assert_int_equal(fail_calloc_size, 0); /* it was b9's that failed */
	hashlb_config_free(next);
	assert_int_equal(lines, 0);
	assert_ptr_equal(f.svc->cfg, &f.cfg->services[0]);
	assert_int_equal(hlb_pool_backend_find(f.svc, "b0")->rt->weight, 1);
	assert_non_null(hlb_pool_backend_find(f.svc, "b3"));
	assert_null(hlb_pool_backend_find(f.svc, "b9"));

	/* with the memory: applied, and logged */
	assert_int_equal(reload_weight_and_rename(&f, &next, 0), 0);
	hashlb_config_free(f.cfg);
	f.cfg = next;
	assert_true(lines >= 3); /* b0 changed, b9 added, b3 removed */
	assert_ptr_equal(f.svc->cfg, &next->services[0]);
	assert_int_equal(hlb_pool_backend_find(f.svc, "b0")->rt->weight, 2);
	assert_non_null(hlb_pool_backend_find(f.svc, "b9"));
	fixture_teardown(&f);
}

/* The fixture's config of 4 backends, its service named api, not web: web removed. */
static struct hashlb_config *config_api(void)
{
	struct hashlb_config *c = config_new(HASHLB_SCHEME_MAGLEV, 4);

	free(c->services[0].name);
	c->services[0].name = strdup("api");
	return c;
}

/*
 * <next> applied onto <f>'s pool with the <k>th allocation from now failing: true if the reload
 * made that many, and failed whole (-ENOMEM, no line logged into *<lines>; <next> freed),
 * false if it made fewer and applied (<next> now <f>'s config).
 */
static bool apply_short_of_nth(struct fixture *f, struct hashlb_config *next, uint32_t k,
			       const uint32_t *lines)
{
	struct hlb_pool_changes changes = { 0 };
	struct hashlb_error err = { 0 };
	bool reached;
	int r;

	fail_calloc_nth = k;
	r = hlb_pool_apply(f->pool, next, &changes, &err);
	reached = fail_calloc_nth == 0;
	fail_calloc_nth = 0;
	if (reached) {
		assert_int_equal(r, -ENOMEM);
		hashlb_config_free(next);
		assert_int_equal(*lines, 0);
	} else {
		assert_int_equal(r, 0);
		hashlb_config_free(f->cfg);
		f->cfg = next;
	}
	return reached;
}

/*
 * Each allocation of a reload, made to fail in turn (the 1st, the 2nd, ... until the reload
 * makes no more): it fails whole every time, the service on the running config and backends,
 * no line logged; then, with the memory, it applies. The reload changes b0's weight, renames
 * b2 b8 (a new backend) and takes b3 back from those an earlier reload left draining. An
 * allocation added to service_update(), after the reload has begun to change things, fails
 * this (test_reload_short_of_memory_changes_nothing fails only b9's).
 */
static void test_reload_short_of_any_allocation_changes_nothing(void **state)
{
	uint32_t k;

	(void)state;
	for (k = 1;; k++) {
		struct fixture f;
		struct hashlb_config *next;
		struct hlb_pool_backend *b3;
		uint32_t lines = 0;
		bool reached;

		fixture_setup_counted(&f, &lines);
		b3 = hlb_pool_backend_find(f.svc, "b3");
		fixture_reload(&f, config_new(HASHLB_SCHEME_MAGLEV, 3)); /* b3 removed: it drains */
		next = config_new(HASHLB_SCHEME_MAGLEV, 4);
		next->services[0].backends[0].weight = 2;
		free(next->services[0].backends[2].name);
		next->services[0].backends[2].name = strdup("b8");
		lines = 0;

		reached = apply_short_of_nth(&f, next, k, &lines);
		if (reached) {
			assert_ptr_equal(f.svc->cfg, &f.cfg->services[0]);
			assert_int_equal(f.svc->n_backends, 3);
			assert_int_equal(hlb_pool_backend_find(f.svc, "b0")->rt->weight, 1);
			assert_non_null(hlb_pool_backend_find(f.svc, "b2"));
			assert_null(hlb_pool_backend_find(f.svc, "b8"));
			assert_null(hlb_pool_backend_find(f.svc, "b3"));
		} else { /* every allocation made: applied */
			assert_true(lines >= 4); /* b0 changed, b8 and b3 added, b2 removed */
			assert_ptr_equal(f.svc->cfg, &next->services[0]);
			assert_int_equal(hlb_pool_backend_find(f.svc, "b0")->rt->weight, 2);
			assert_non_null(hlb_pool_backend_find(f.svc, "b8"));
			assert_ptr_equal(hlb_pool_backend_find(f.svc, "b3"), b3); /* taken back */
		}
		hlb_pool_flush(f.pool);
		fixture_teardown(&f);
		if (!reached)
			break;
	}
	assert_true(k > 8); /* the lists, the backends, the service's: each failed once */
}

/*
 * The same for a reload that removes a service (web, renamed api): each allocation failed in
 * turn fails it whole, web serving on, no line logged; then it applies. Before, room for
 * web's backends among the orphans and web's retired entry were made after the changes had
 * begun: short of them, its backends were dropped (their connections never closed at the
 * drain deadline) or its totals logged at once, the reload counted as applied.
 */
static void test_reload_removing_a_service_short_of_any_allocation_changes_nothing(void **state)
{
	uint32_t k;

	(void)state;
	for (k = 1;; k++) {
		struct fixture f;
		struct hashlb_config *next;
		uint32_t lines = 0;
		bool reached;

		fixture_setup_counted(&f, &lines);
		next = config_new(HASHLB_SCHEME_MAGLEV, 4);
		free(next->services[0].name);
		next->services[0].name = strdup("api");

		reached = apply_short_of_nth(&f, next, k, &lines);
		if (reached) {
			assert_ptr_equal(hlb_pool_service_find(f.pool, "web"), f.svc);
			assert_null(hlb_pool_service_find(f.pool, "api"));
			assert_int_equal(f.svc->n_backends, 4);
		} else { /* every allocation made: applied */
			assert_true(lines >= 2); /* web removed, api added */
			assert_null(hlb_pool_service_find(f.pool, "web"));
			assert_non_null(hlb_pool_service_find(f.pool, "api"));
		}
		hlb_pool_flush(f.pool);
		fixture_teardown(&f);
		if (!reached)
			break;
	}
	assert_true(k > 4); /* the lists, api, the room and web's retired entry: each failed once */
}

/*
 * A reload adding back web, removed within its drain timeout, while it removes api: each
 * allocation failed in turn fails it whole, and web's runtime object, which its connections
 * still read, keeps the snapshot it had as retired; then it applies, web again. Before, the
 * reload published the added-back service's snapshot into that object before it could
 * fail: once it failed, web's draining clients were retried to the aborted config's
 * backends, up and never checked.
 */
static void test_reload_adding_back_a_service_short_of_any_allocation_changes_nothing(void **state)
{
	uint32_t k;

	(void)state;
	for (k = 1;; k++) {
		uint32_t lines = 0;
		struct fixture f;
		struct hlb_service *web;
		uint64_t generation;
		bool reached;

		fixture_setup_counted(&f, &lines);
		web = hlb_service_ref(f.svc->rt); /* as a connection of web holds it */
		fixture_reload(&f, config_api());
		generation = hlb_service_snapshot(web)->generation;
		lines = 0;

		reached = apply_short_of_nth(&f, config_new(HASHLB_SCHEME_MAGLEV, 4), k, &lines);
		if (reached) {
			assert_non_null(hlb_pool_service_find(f.pool, "api"));
			assert_null(hlb_pool_service_find(f.pool, "web"));
			assert_true(atomic_load(&web->removed));
			assert_int_equal(hlb_service_snapshot(web)->generation, generation);
		} else { /* every allocation made: applied */
			assert_ptr_equal(hlb_pool_service_find(f.pool, "web")->rt, web);
			assert_false(atomic_load(&web->removed));
			assert_true(hlb_service_snapshot(web)->generation > generation);
		}
		hlb_pool_flush(f.pool);
		fixture_teardown(&f);
		hlb_service_unref(web);
		if (!reached)
			break;
	}
	assert_true(k > 4);
}

/*
 * A reload adding back web, removed within its drain timeout: its routing snapshot is
 * published once it is no longer removed. Before, it was published first, and a worker
 * that read it, with its listener already accepting, could still read the removal and
 * close a client queued there as no_backend.
 */
static void test_added_back_service_is_not_removed_when_its_snapshot_is_published(void **state)
{
	struct fixture f;
	struct hlb_service *web;
	uint32_t published;

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 4);
	web = hlb_service_ref(f.svc->rt); /* as a connection of web holds it */
	fixture_reload(&f, config_api());
	assert_true(atomic_load(&web->removed));
	published = f.published;
	fixture_reload(&f, config_new(HASHLB_SCHEME_MAGLEV, 4));
	assert_ptr_equal(hlb_pool_service_find(f.pool, "web")->rt, web);
	assert_true(f.published > published); /* web's snapshot */
	assert_int_equal(f.published_removed, 0);
	assert_false(atomic_load(&web->removed));
	hlb_pool_flush(f.pool);
	fixture_teardown(&f);
	hlb_service_unref(web);
}

/*
 * The counters an upgrade in place carried to web and its backends go on when a reload removes
 * web and the next adds it back within its drain timeout, as its own do (it is the service
 * removed, taken back). Without them its series would go back by as much.
 */
static void test_added_back_service_keeps_its_carried_totals(void **state)
{
	struct hlb_service_counters sc;
	struct hlb_pool_totals t;
	struct hlb_service *web;
	struct fixture f;

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 4);
	assert_int_equal(hlb_pool_carry_totals(f.pool, "service-totals web 0 100\n"
						       "totals web b1 0 50\n"),
			 2);
	web = hlb_service_ref(f.svc->rt); /* as a connection of web holds it */
	fixture_reload(&f, config_api());
	fixture_reload(&f, config_new(HASHLB_SCHEME_MAGLEV, 4));
	assert_ptr_equal(hlb_pool_service_find(f.pool, "web")->rt, web);
	hlb_pool_service_totals(hlb_pool_service_find(f.pool, "web"), &sc);
	assert_int_equal(sc.lookups, 100);
	hlb_pool_backend_totals(hlb_pool_backend_find(hlb_pool_service_find(f.pool, "web"), "b1"),
				&t);
	assert_int_equal(t.c.total, 50);
	hlb_pool_flush(f.pool);
	fixture_teardown(&f);
	hlb_service_unref(web);
}

/*
 * web removed, then added back without b3, whose connection still drains: b3 drains as a
 * removed backend of web's (its series in /metrics, not among those drained in /status),
 * and web's bytes count it once, through a second removal and a second add-back that takes
 * it back. Before, it stayed an orphan while web held it among its drained ones: /status
 * said drained while it drained yet, the second removal counted its bytes so far in web's
 * totals and those after nowhere, and the second add-back took it back with those bytes
 * counted again (250 here, of 150).
 */
static void test_orphan_not_taken_back_drains_as_a_removed_backend(void **state)
{
	struct hlb_backend_counters c;
	struct hlb_pool_service *web;
	struct hlb_backend *b3;
	struct fixture f;
	uint64_t in, out;

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 4);
	b3 = hlb_backend_ref(hlb_pool_backend_find(f.svc, "b3")->rt); /* its connection's */
	atomic_store(&b3->claimed, 1);
	atomic_store(&b3->wstats[0].bytes_out, 100);
	fixture_reload(&f, config_api()); /* web removed: b3 drains */
	fixture_reload(&f, config_new(HASHLB_SCHEME_MAGLEV, 3)); /* web back, without b3 */
	web = hlb_pool_service_find(f.pool, "web");
	assert_non_null(web);
	assert_int_equal(web->n_removed, 1);
	assert_ptr_equal(web->removed[0]->rt, b3);
	assert_int_equal(hlb_pool_service_drained(web, &c), 0);
	hlb_pool_service_bytes(web, &in, &out);
	assert_int_equal(out, 100);

	fixture_reload(&f, config_api()); /* web removed again */
	atomic_store(&b3->wstats[0].bytes_out, 150); /* b3 forwards on */
	fixture_reload(&f, config_new(HASHLB_SCHEME_MAGLEV, 4)); /* web back, with b3 */
	web = hlb_pool_service_find(f.pool, "web");
	assert_ptr_equal(hlb_pool_backend_find(web, "b3")->rt, b3); /* taken back */
	hlb_pool_service_bytes(web, &in, &out);
	assert_int_equal(out, 150); /* once */
	assert_int_equal(hlb_pool_service_drained(web, &c), 0);
	assert_int_equal(c.bytes_out, 0);
	atomic_store(&b3->claimed, 0);
	hlb_backend_unref(b3);
	hlb_pool_flush(f.pool);
	fixture_teardown(&f);
}

/*
 * The deadline a stop's drain closes a removed backend's connections at, which the workers read
 * (hlb_backend.drain_until_ms): set by the reload that removes it, or its service, to the
 * control plane's; kept while it drains as an orphan left to its service added back; and 0
 * once a reload takes it back, as an orphan or a removed backend of its service's: its
 * connections then drain at a stop to the service's timeouts.drain from the stop, not cut at
 * the deadline of a removal undone.
 */
static void test_removed_backend_drain_deadline_seen_by_the_workers(void **state)
{
	struct hlb_pool_backend *pb;
	struct hlb_pool_service *web;
	struct hlb_backend *b3;
	struct fixture f;
	uint64_t t0;

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 4);
	b3 = hlb_backend_ref(hlb_pool_backend_find(f.svc, "b3")->rt); /* its connection's */
	atomic_store(&b3->claimed, 1);
	assert_int_equal(atomic_load(&b3->drain_until_ms), 0);

	t0 = hlb_now_ms();
	fixture_reload(&f, config_new(HASHLB_SCHEME_MAGLEV, 3)); /* b3 removed: it drains */
	assert_int_equal(f.svc->n_removed, 1);
	pb = f.svc->removed[0];
	assert_ptr_equal(pb->rt, b3);
	assert_true(atomic_load(&b3->drain_until_ms) >= t0 + 30000);
	fixture_reload(&f, config_new(HASHLB_SCHEME_MAGLEV, 4)); /* taken back */
	assert_ptr_equal(hlb_pool_backend_find(f.svc, "b3")->rt, b3);
	assert_int_equal(atomic_load(&b3->drain_until_ms), 0);

	fixture_reload(&f, config_api()); /* web removed: its backends orphans */
	assert_true(atomic_load(&b3->drain_until_ms) >= t0 + 30000);
	fixture_reload(&f, config_new(HASHLB_SCHEME_MAGLEV, 4)); /* web back, b3 taken back */
	web = hlb_pool_service_find(f.pool, "web");
	assert_ptr_equal(hlb_pool_backend_find(web, "b3")->rt, b3);
	assert_int_equal(atomic_load(&b3->drain_until_ms), 0);

	fixture_reload(&f, config_api()); /* web removed again */
	fixture_reload(&f, config_new(HASHLB_SCHEME_MAGLEV, 3)); /* web back, without b3 */
	web = hlb_pool_service_find(f.pool, "web");
	assert_int_equal(web->n_removed, 1);
	assert_ptr_equal(web->removed[0]->rt, b3); /* draining to its removal's deadline */
	assert_true(atomic_load(&b3->drain_until_ms) >= t0 + 30000);
	assert_int_equal(atomic_load(&b3->drain_until_ms),
			 hlb_pool_backend_drain_deadline(web->removed[0]));
	atomic_store(&b3->claimed, 0);
	hlb_backend_unref(b3);
	hlb_pool_flush(f.pool);
	fixture_teardown(&f);
}

/* <web>'s backends b1 (weight 5), b2 (max_connections 7) and b3 (maint) as set at run time on a
 * config of weight 1, no cap, ready: as an orphan (draining) or as <web>'s again. */
static void assert_set_at_run_time(struct hlb_pool_backend *const *b, bool orphans)
{
	assert_int_equal(b[1]->rt->weight, 5);
	assert_int_equal(b[1]->cfg_weight, 1);
	assert_int_equal(atomic_load(&b[2]->rt->max_conns), 7);
	assert_int_equal(b[2]->cfg_max_conns, 0);
	assert_int_equal(b[3]->admin, HASHLB_ADMIN_MAINT);
	assert_int_equal(b[3]->cfg_admin, HASHLB_ADMIN_READY);
	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(atomic_load(&b[i]->rt->admin),
				 orphans ? HASHLB_ADMIN_DRAIN : (int)b[i]->admin);
}

/*
 * A reload adding back web (removed within its drain timeout, its backends set at run time,
 * b0 down) with b1's weight, b2's cap and b3's state changed, its checks off, each allocation
 * failed in turn: it fails whole, and the orphans it took back keep what was set at run time,
 * the running config's values and their health, no line logged; a reload then adding web back
 * as it was serves them as set. Before, a failed reload gave back only their state and
 * service: b1 served at weight 3 and the later add-back, the config's 1 no change from the
 * rejected 3, found no run-time set to keep; b3 left maint; b0 was up, said in a line.
 */
static void test_reload_adding_back_a_service_that_fails_keeps_what_was_set(void **state)
{
	uint32_t k;

	(void)state;
	for (k = 1;; k++) {
		struct hlb_pool_backend *b[4];
		struct hashlb_config *next;
		struct hlb_pool_service *web;
		uint32_t lines = 0;
		struct fixture f;
		bool reached;

		fixture_setup_counted(&f, &lines);
		for (uint32_t i = 0; i < 4; i++) {
			char name[8];

			snprintf(name, sizeof(name), "b%u", i);
			b[i] = hlb_pool_backend_find(f.svc, name);
		}
		assert_int_equal(hlb_pool_set_weight(b[1], 5), 0);
		hlb_pool_set_max_connections(b[2], 7);
		assert_int_equal(hlb_pool_set_admin(b[3], HASHLB_ADMIN_MAINT), 0);
		backend_fail(b[0]);
		hlb_pool_flush(f.pool);
		fixture_reload(&f, config_api());
		assert_set_at_run_time(b, true);
		next = config_new(HASHLB_SCHEME_MAGLEV, 4); /* its checks off: b0 up */
		next->services[0].backends[1].weight = 3;
		next->services[0].backends[2].max_connections = 9;
		next->services[0].backends[3].admin = HASHLB_ADMIN_DRAIN;
		lines = 0;

		reached = apply_short_of_nth(&f, next, k, &lines);
		web = hlb_pool_service_find(f.pool, "web");
		if (reached) {
			assert_null(web);
			assert_set_at_run_time(b, true);
			assert_false(b[0]->health.up); /* and no line said it up (lines) */
			assert_false(atomic_load(&b[0]->rt->healthy));
			/* added back as it was: as set at run time */
			fixture_reload(&f, config_new(HASHLB_SCHEME_MAGLEV, 4));
			web = hlb_pool_service_find(f.pool, "web");
			for (uint32_t i = 0; i < 4; i++)
				assert_ptr_equal(web->backends[i], b[i]);
			assert_set_at_run_time(b, false);
		} else { /* every allocation made: applied, the config's changes */
			assert_ptr_equal(web->backends[1], b[1]);
			assert_int_equal(b[1]->rt->weight, 3);
			assert_int_equal(atomic_load(&b[2]->rt->max_conns), 9);
			assert_int_equal(b[3]->admin, HASHLB_ADMIN_DRAIN);
			assert_true(b[0]->health.up);
		}
		hlb_pool_flush(f.pool);
		fixture_teardown(&f);
		if (!reached)
			break;
	}
	assert_true(k > 4);
}

static void test_reload_applies_the_difference(void **state)
{
	struct fixture f;
	struct hashlb_config *next;
	struct hashlb_service_cfg *s;
	struct hlb_pool_backend *b1;
	struct hlb_backend *b1_rt;

	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 6);
	b1 = hlb_pool_backend_find(f.svc, "b1");
	b1_rt = b1->rt;
	hlb_pool_set_admin(hlb_pool_backend_find(f.svc, "b2"), HASHLB_ADMIN_DRAIN);
	hlb_pool_flush(f.pool);
	/* Someone is still connected to b5. */
	atomic_store(&hlb_pool_backend_find(f.svc, "b5")->rt->active, 1);

	/* b5 removed, b6 added, b1 weighs 2; b2 stays drained (the config did not change it). */
	next = config_new(HASHLB_SCHEME_MAGLEV, 6);
	s = &next->services[0];
	s->slow_start_ms = 1000;
	free(s->backends[5].name);
	s->backends[5].name = strdup("b6");
	s->backends[1].weight = 2;
	fixture_reload(&f, next);
	hlb_pool_flush(f.pool);

	assert_ptr_equal(f.svc->rt->cfg, &next->services[0]);
	assert_null(hlb_pool_backend_find(f.svc, "b5"));
	assert_non_null(hlb_pool_backend_find(f.svc, "b6"));
	assert_int_equal(atomic_load(&hlb_pool_backend_find(f.svc, "b6")->rt->admit), 0);
	assert_ptr_equal(hlb_pool_backend_find(f.svc, "b1")->rt, b1_rt);
	assert_int_equal(b1_rt->weight, 2);
	assert_int_equal(hlb_pool_backend_find(f.svc, "b2")->admin, HASHLB_ADMIN_DRAIN);
	assert_int_equal(f.svc->n_removed, 1);
	assert_int_equal(atomic_load(&f.svc->removed[0]->rt->admin), HASHLB_ADMIN_DRAIN);
	assert_int_equal(hlb_pool_snapshot(f.svc)->generation, 3);
	assert_int_equal(hashlb_table_backend_count(hlb_pool_snapshot(f.svc)->table), 6);
	{
		/* rebuilt from the previous table: the same as a build from scratch */
		struct hashlb_backend_spec spec[6];
		struct hashlb_table *ref;

		for (uint32_t i = 0; i < 6; i++)
			spec[i] = (struct hashlb_backend_spec){ s->backends[i].name,
								s->backends[i].weight, i == 2 };
		assert_int_equal(hashlb_table_build(&s->table, spec, 6, &ref, NULL), 0);
		assert_int_equal(hlb_pool_snapshot(f.svc)->fingerprint,
				 hashlb_table_fingerprint(ref));
		hashlb_table_free(ref);
	}

	/* Its last connection closes: the removed backend is reaped. */
	atomic_store(&f.svc->removed[0]->rt->active, 0);
	uint64_t t0 = hlb_now_ms();
	while (f.svc->n_removed && hlb_now_ms() < t0 + 10000) /* a hang guard */
		hlb_loop_run_once(f.loop, 10);
	assert_int_equal(f.svc->n_removed, 0);

	/* A config without the service removes it; one with a new service adds it. */
	next = config_new(HASHLB_SCHEME_RING, 3);
	free(next->services[0].name);
	next->services[0].name = strdup("api");
	fixture_reload(&f, next);
	assert_int_equal(hlb_pool_service_count(f.pool), 1);
	assert_null(hlb_pool_service_find(f.pool, "web"));
	assert_non_null(hlb_pool_service_find(f.pool, "api"));
	assert_int_equal(hlb_pool_snapshot(hlb_pool_service_find(f.pool, "api"))->generation, 4);
	fixture_teardown(&f);
}

/* One kernel-steered service "web" whose program's counters (struct hlb_steer_stats) are 710000
 * plus each one's place in the struct, and its own 720000 plus that: each told by its value. */
static int steer_marked(void *arg, uint32_t i, struct hlb_steer_sample *ret)
{
	uint64_t st[sizeof(ret->st) / sizeof(uint64_t)], own[sizeof(st) / sizeof(st[0])];

	(void)arg;
	if (i > 0)
		return -ENOENT;
	for (size_t k = 0; k < sizeof(st) / sizeof(st[0]); k++) {
		st[k] = 710000 + k;
		own[k] = 720000 + k;
	}
	*ret = (struct hlb_steer_sample){ .service = "web", .own_known = true, .own_all = true };
	memcpy(&ret->st, st, sizeof(st));
	memcpy(&ret->own, own, sizeof(own));
	return 0;
}

/*
 * Every counter of a steering program has its /metrics samples: its program's (the interface_
 * families, passed_total, interface_dropped_total), and the service's own where a table counts
 * it (hashlb_steer_stats_field_own()). The families' rows name their counter (metrics.c): one
 * added to the program without a row, or a row whose name is no counter's (its value 0, or
 * its own never shown), was caught only by a root and BPF scenario (test_run.py shared_flows).
 */
static void test_metrics_steer_every_counter(void **state)
{
	struct hlb_control ctl = { 0 };
	struct hlb_steer_sample s;
	struct hlb_buf o = { 0 };
	struct fixture f;
	const char *name;
	uint64_t x;

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_RING, 3);
	ctl.pool = f.pool;
	ctl.cfg = f.cfg;
	ctl.loop = f.loop;
	ctl.steer_stats = steer_marked;
	hlb_metrics_render(&ctl, NULL, 0, &o);
	assert_false(o.oom);
	assert_non_null(strstr(o.p, "\nhashlb_service_steer_packets_total{service=\"web\"} "));
	steer_marked(NULL, 0, &s);
	for (unsigned i = 0; (name = hashlb_steer_stats_field(&s.st, i, &x)) != NULL; i++) {
		char want[32];

		snprintf(want, sizeof(want), "} %" PRIu64 "\n", x);
		if (!strstr(o.p, want))
			fail_msg("counter %s: its program's figure (%" PRIu64 ") in no sample",
				 name, x);
		hashlb_steer_stats_field(&s.own, i, &x);
		snprintf(want, sizeof(want), "} %" PRIu64 "\n", x);
		if (!strstr(o.p, want) != !hashlb_steer_stats_field_own(i, true))
			fail_msg("counter %s: the service's own (%" PRIu64 ") %s", name, x,
				 strstr(o.p, want) ? "shown, not a table's" : "in no sample");
	}
	hlb_buf_free(&o);
	fixture_teardown(&f);
}

/*
 * A reload whose tables pass table_memory with a weight set at run time
 * (hlb_control_weights_fit()) is refused in the loader's words: the cap in its units,
 * ", the default" when the config does not give it, and then at the service, as the
 * loader's refusal (at the table_memory line when given). Before, the default's refusal
 * had line 0 (no position at all) and the cap in bytes only.
 */
static void test_reload_weights_past_table_memory_say_where(void **state)
{
	struct hlb_control ctl = { 0 };
	struct hashlb_config *next;
	struct hashlb_error err = { 0 };
	struct fixture f;
	char want[128], unit[HASHLB_BYTES_STRLEN];
	uint64_t kib;

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_RING, 3);
	ctl.pool = f.pool;
	ctl.cfg = f.cfg;
	next = config_new(HASHLB_SCHEME_RING, 3);
	next->services[0].pos = (struct hashlb_pos){ .line = 4, .column = 5 };
	/* the config's own tables fit, in whole KiB (b1 at weight 4 takes twice as much) */
	kib = (hashlb_service_cfg_table_bytes_max(&next->services[0]) + 1023) / 1024;
	next->table_memory = kib * 1024;
	assert_int_equal(hlb_control_weights_fit(&ctl, next, &err), 0);
	assert_int_equal(hlb_pool_set_weight(hlb_pool_backend_find(f.svc, "b1"), 4), 0);
	hlb_pool_flush(f.pool);

	/* not in the config: the default, at the service */
	assert_int_equal(hlb_control_weights_fit(&ctl, next, &err), -E2BIG);
	assert_int_equal(err.reason, HASHLB_ERR_MEMORY_CAP);
	assert_int_equal(err.line, 4);
	assert_int_equal(err.column, 5);
	hashlb_bytes_format(kib * 1024, unit, sizeof(unit));
	snprintf(want, sizeof(want), "over table_memory %s (%" PRIu64 " bytes, the default)", unit,
		 kib * 1024);
	if (!strstr(err.msg, "service 'web': with the weights set at run time") ||
	    !strstr(err.msg, want))
		fail_msg("got: %s", err.msg);

	/* written: at its line */
	memset(&err, 0, sizeof(err));
	next->table_memory_pos = (struct hashlb_pos){ .line = 1, .column = 15 };
	assert_int_equal(hlb_control_weights_fit(&ctl, next, &err), -E2BIG);
	assert_int_equal(err.line, 1);
	assert_int_equal(err.column, 15);
	snprintf(want, sizeof(want), "over table_memory %s (%" PRIu64 " bytes): raise it", unit,
		 kib * 1024);
	if (!strstr(err.msg, want))
		fail_msg("got: %s", err.msg);
	hashlb_config_free(next);
	fixture_teardown(&f);
}

/*
 * The weights a reload adding back a service an earlier one removed would serve with
 * (hlb_pool_weights_after(), what a kernel-steered service's table is checked against its
 * program with): those of the backends it takes back, set at run time, as for a backend
 * taken back. Before, the config's: b1 read 1, and the reload then served it at 5.
 */
static void test_weights_after_a_service_added_back_are_those_it_serves_with(void **state)
{
	struct hashlb_config *back;
	struct hlb_pool_service *web;
	struct fixture f;
	uint32_t w[4];

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 4);
	assert_int_equal(hlb_pool_set_weight(hlb_pool_backend_find(f.svc, "b1"), 5), 0);
	hlb_pool_flush(f.pool);
	fixture_reload(&f, config_api()); /* web removed, api added */
	hlb_pool_flush(f.pool);

	back = config_new(HASHLB_SCHEME_MAGLEV, 4);
	back->services[0].backends[3].weight = 3; /* one the config changes takes the config's */
	assert_int_equal(hlb_pool_weights_after(f.pool, &back->services[0], w), 0);
	assert_int_equal(w[0], 1);
	assert_int_equal(w[1], 5);
	assert_int_equal(w[3], 3);
	/* the same with the orphans sorted once for a whole config (hlb_control_weights_fit()) */
	memset(w, 0, sizeof(w));
	assert_int_equal(hlb_pool_weights_begin(f.pool), 0);
	assert_int_equal(hlb_pool_weights_after(f.pool, &back->services[0], w), 0);
	hlb_pool_weights_end(f.pool);
	assert_int_equal(w[0], 1);
	assert_int_equal(w[1], 5);
	assert_int_equal(w[3], 3);
	/* the same as the reload then gives them */
	fixture_reload(&f, back);
	hlb_pool_flush(f.pool);
	web = hlb_pool_service_find(f.pool, "web");
	assert_non_null(web);
	for (uint32_t i = 0; i < 4; i++) {
		char name[8];

		snprintf(name, sizeof(name), "b%u", i);
		assert_int_equal(hlb_pool_backend_find(web, name)->rt->weight, w[i]);
	}
	fixture_teardown(&f);
}

/* b2 of web (b0..b2), given the counts <carried> handed over by an upgrade in place if not
 * NULL, counts 7 connections and 100 bytes received, then a reload removes it: the drained
 * aggregate has <total> connections and <out> bytes once it has drained, while its series are
 * kept and after they go, and the rows and it add up to the service's total. */
static void drained_keeps_counts(const char *carried, uint64_t total, uint64_t out)
{
	struct hlb_backend_counters c;
	struct hlb_service_counters sc;
	struct hlb_pool_totals t;
	struct fixture f;
	uint64_t t0, rows = 0;

	fixture_setup(&f, HASHLB_SCHEME_RING, 3);
	if (carried)
		assert_int_equal(hlb_pool_carry_totals(f.pool, carried), 2);
	atomic_store(&hlb_pool_backend_find(f.svc, "b2")->rt->wstats[0].established, 7);
	atomic_store(&hlb_pool_backend_find(f.svc, "b2")->rt->wstats[1].bytes_out, 100);
	atomic_store(&f.svc->rt->wstats[0].total, 7); /* the service's own, as b2's */
	assert_int_equal(hlb_pool_service_drained(f.svc, &c), 0);
	assert_int_equal(c.total, 0);

	fixture_reload(&f, config_new(HASHLB_SCHEME_RING, 2));
	t0 = hlb_now_ms();
	while (f.svc->n_removed && hlb_now_ms() < t0 + 10000) /* a hang guard */
		hlb_loop_run_once(f.loop, 10);
	assert_int_equal(f.svc->n_removed, 0);
	assert_int_equal(f.svc->n_drained, 1); /* kept for its series */
	assert_int_equal(hlb_pool_service_drained(f.svc, &c), 1);
	assert_int_equal(c.total, total);
	assert_int_equal(c.bytes_out, out);

	/* its series kept long enough, and its drain deadline (until which a reload adding it
	 * back takes it back) past: freed at the next tick, its counts kept */
	/* (modulo 2^64, as the tick's now - drained_ms: minutes after boot too) */
	f.svc->drained[0]->drained_ms = hlb_now_ms() - HLB_POOL_DRAINED_KEEP_MS;
	atomic_store(&f.svc->drained[0]->rt->drain_until_ms, hlb_now_ms());
	t0 = hlb_now_ms();
	while (f.svc->n_drained && hlb_now_ms() < t0 + 10000) /* a hang guard */
		hlb_loop_run_once(f.loop, 10);
	assert_int_equal(f.svc->n_drained, 0);
	assert_int_equal(hlb_pool_service_drained(f.svc, &c), 1);
	assert_int_equal(c.total, total);
	assert_int_equal(c.bytes_out, out);
	hlb_pool_service_totals(f.svc, &sc);
	for (uint32_t j = 0; j < f.svc->n_backends; j++) {
		hlb_pool_backend_totals(f.svc->backends[j], &t);
		rows += t.c.total;
	}
	assert_int_equal(rows + c.total, sc.total);
	fixture_teardown(&f);
}

/* The counts of a backend a reload removed stay in its service's drained aggregate
 * (hlb_pool_service_drained(), GET /status "drained") once it has drained, while its series
 * are kept and after they go (HLB_POOL_DRAINED_KEEP_MS): before, they went with its row. */
static void test_drained_backends_keep_their_counts(void **state)
{
	(void)state;
	drained_keeps_counts(NULL, 7, 100);
}

/*
 * The same with counts an upgrade in place carried to the backend and its service: the
 * aggregate has what the row showed, the carried counts too, and the rows and it still add
 * up to the service's totals, which carried theirs. Before, it had the backend's own counts
 * alone, the carried ones lost once it drained (7 connections of 57).
 */
static void test_drained_backends_keep_their_carried_counts(void **state)
{
	(void)state;
	drained_keeps_counts("service-totals web 1 50\ntotals web b2 0 50 0 1000\n", 57, 1100);
}

/* A service of the most backends a service may have (65,535) reloaded with its backends in
 * the reverse order: every backend is matched by its name and kept, with what was set at run
 * time. The match was a scan of the old list for each new backend, n^2 / 2 name compares (45 s
 * of CPU a reload here, the control thread stuck: no checks, no admin; this test ran past its
 * meson timeout); now it takes a sort. */
static void one_point(struct hashlb_config *c)
{
	c->services[0].table.ring_v = 1; /* a ring of one point per backend: a quick build */
}

static void reverse_backends(struct hashlb_config *c)
{
	struct hashlb_service_cfg *s = &c->services[0];

	for (uint32_t i = 0, j = s->n_backends - 1; i < j; i++, j--) {
		struct hashlb_backend_cfg t = s->backends[i];

		s->backends[i] = s->backends[j];
		s->backends[j] = t;
	}
}

/* What a reload says it moved is measured on the tables in use: with b1 in maint (set at
 * run time, which the reload keeps), a fifth backend takes its share of the survivors'
 * clients and nothing else moves; a reload that rebuilds nothing says nothing. */
static void test_reload_says_what_the_tables_in_use_moved(void **state)
{
	struct fixture f;
	struct hlb_pool_moved m;
	const struct hlb_snapshot *snap;
	uint32_t e;

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_RING, 4);
	assert_int_equal(hlb_pool_set_admin(hlb_pool_backend_find(f.svc, "b1"), HASHLB_ADMIN_MAINT),
			 0);
	hlb_pool_flush(f.pool);
	fixture_reload(&f, config_new(HASHLB_SCHEME_RING, 5));
	hlb_pool_flush_reload(f.pool, &m);
	snap = hlb_pool_snapshot(f.svc);
	assert_true(hashlb_table_backend_down(snap->table, 1)); /* still in maint */
	for (e = 0; strcmp(hashlb_table_backend_name(snap->table, e), "b4"); e++)
		;
	assert_int_equal(m.tables, 1);
	assert_string_equal(m.most_service, "web");
	assert_true(m.most > 0.1 && fabs(m.most - hashlb_table_share(snap->table, e)) < 1e-9);
	/* the same config again: nothing rebuilt, nothing moved */
	fixture_reload(&f, config_new(HASHLB_SCHEME_RING, 5));
	hlb_pool_flush_reload(f.pool, &m);
	assert_int_equal(m.tables, 0);
	assert_string_equal(m.most_service, "");
	fixture_teardown(&f);
}

/* A service the reload leaves alone says nothing of what it moved, though a change of its own
 * (b1 set to maint, its build waiting for the debounce) is published with the reload's: the
 * clients b1 gives away are not the reload's doing. It said "moved" for them, the reload's
 * answer counting its table as one the reload rebuilt. */
static void test_reload_says_nothing_of_a_build_it_did_not_ask(void **state)
{
	struct fixture f;
	struct hlb_pool_moved m;

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_RING, 4);
	assert_int_equal(hlb_pool_set_admin(hlb_pool_backend_find(f.svc, "b1"), HASHLB_ADMIN_MAINT),
			 0);
	fixture_reload(&f, config_new(HASHLB_SCHEME_RING, 4));
	hlb_pool_flush_reload(f.pool, &m);
	assert_true(hashlb_table_backend_down(hlb_pool_snapshot(f.svc)->table, 1)); /* published */
	assert_int_equal(m.tables, 0);
	assert_string_equal(m.most_service, "");
	/* the reload's own change after it: said */
	fixture_reload(&f, config_new(HASHLB_SCHEME_RING, 5));
	hlb_pool_flush_reload(f.pool, &m);
	assert_int_equal(m.tables, 1);
	fixture_teardown(&f);
}

static void count_moved_line(void *arg, enum hlb_log_level level, const char *msg, const char *kv)
{
	uint32_t *n = arg;

	(void)level;
	(void)kv;
	n[0] += strcmp(msg, "reload: clients moved") == 0;
	n[1] += strcmp(msg, "reload: more services' clients moved, not logged one by one") == 0;
	n[2] += strcmp(msg, "resolve: clients moved") == 0;
	n[3] += strcmp(msg, "resolve: more services' clients moved, not logged one by one") == 0;
}

/* <n> services "s0".. of <backends> backends each. */
static struct hashlb_config *config_services(uint32_t n, uint32_t backends)
{
	struct hashlb_config *c = config_new(HASHLB_SCHEME_MAGLEV, backends);

	c->services = realloc(c->services, n * sizeof(*c->services));
	assert_non_null(c->services);
	for (uint32_t i = 1; i < n; i++) {
		struct hashlb_config *one = config_new(HASHLB_SCHEME_MAGLEV, backends);

		c->services[i] = one->services[0];
		free(one->services);
		free(one);
	}
	c->n_services = n;
	for (uint32_t i = 0; i < n; i++) {
		char name[16];

		snprintf(name, sizeof(name), "s%u", i);
		free(c->services[i].name);
		c->services[i].name = strdup(name);
	}
	return c;
}

/* A reload that rebuilds many services' tables writes a moved= line for as many as it writes
 * lines of changes (HLB_POOL_CHANGE_LINES), then one counting the others: a reload of
 * thousands of services wrote thousands of them, where its changes take 33 lines at most.
 * The answer's figure is still the most of them all. A resolve_every round, the same, as
 * its own lines. */
static void test_reload_moved_lines_are_bounded(void **state)
{
	const uint32_t n = HLB_POOL_CHANGE_LINES + 8;
	struct hashlb_error err = { 0 };
	struct hlb_pool_moved m;
	uint32_t lines[4] = { 0, 0, 0, 0 };
	struct fixture f;

	(void)state;
	memset(&f, 0, sizeof(f));
	f.cfg = config_services(n, 3);
	assert_int_equal(hlb_loop_new(&f.loop), 0);
	assert_int_equal(hlb_rcu_new(0, &f.rcu), 0);
	f.env = (struct hlb_pool_env){
		.n_workers = 2, .rcu = f.rcu, .log = count_moved_line, .arg = lines
	};
	assert_int_equal(hlb_pool_new(f.cfg, f.loop, &f.env, &f.pool, &err), 0);
	hlb_pool_flush(f.pool);
	fixture_reload(&f, config_services(n, 4));
	hlb_pool_flush_reload(f.pool, &m);
	assert_int_equal(m.tables, n);
	assert_true(m.most > 0.2 && m.most < 0.3); /* a fourth backend's share, Maglev's few */
	assert_int_equal(lines[0], HLB_POOL_CHANGE_LINES);
	assert_int_equal(lines[1], 1);
	/* a resolve_every round that applies a config (hlb_pool_flush_resolve()): the same lines,
	 * as the round's */
	fixture_reload(&f, config_services(n, 5));
	hlb_pool_flush_resolve(f.pool, &m);
	assert_int_equal(m.tables, n);
	assert_int_equal(lines[0], HLB_POOL_CHANGE_LINES);
	assert_int_equal(lines[1], 1);
	assert_int_equal(lines[2], HLB_POOL_CHANGE_LINES);
	assert_int_equal(lines[3], 1);
	fixture_teardown(&f);
}

static void test_reload_matches_many_backends_by_name(void **state)
{
	const uint32_t n = HASHLB_BACKENDS_MAX;
	struct hlb_backend **rt = malloc(n * sizeof(*rt));
	struct hashlb_config *next;
	struct fixture f;
	uint64_t fp;

	fixture_setup_readers(&f, HASHLB_SCHEME_RING, n, 0, one_point);
	for (uint32_t i = 0; i < n; i++)
		rt[i] = f.svc->backends[i]->rt;
	hlb_pool_set_admin(hlb_pool_backend_find(f.svc, "b7"), HASHLB_ADMIN_DRAIN);
	hlb_pool_flush(f.pool);
	fp = hlb_pool_snapshot(f.svc)->fingerprint;

	/* reversed, back, reversed again: three reloads (three times 45 s before) */
	for (int k = 1; k <= 3; k++) {
		next = config_new(HASHLB_SCHEME_RING, n);
		one_point(next);
		if (k % 2)
			reverse_backends(next);
		fixture_reload(&f, next);
		hlb_pool_flush(f.pool);
		assert_int_equal(f.svc->n_backends, n);
		assert_int_equal(f.svc->n_removed, 0);
		for (uint32_t i = 0; i < n; i++)
			assert_ptr_equal(f.svc->backends[k % 2 ? n - 1 - i : i]->rt, rt[i]);
		assert_int_equal(hlb_pool_backend_find(f.svc, "b7")->admin, HASHLB_ADMIN_DRAIN);
		/* the same names and weights: the same table, whatever their order */
		assert_int_equal(hlb_pool_snapshot(f.svc)->fingerprint, fp);
	}
	free(rt);
	fixture_teardown(&f);
}

/*
 * An upgrade's new process carries on what the old one set at run time, a line per backend
 * (HLB_HANDOVER_LINE): 20,000 drained backends, and one reweighted. Each backend scanned the
 * whole text, n^2 sscanf()s: 66 s to start with 8,000 backends down, past the upgrade's
 * 60 s, and this test past its meson timeout; the text is parsed once now.
 */
static void test_handover_of_many_backends(void **state)
{
	const uint32_t n = 20000;
	struct hashlb_error err = { 0 };
	size_t cap = (size_t)n * 96, len = 0;
	char *text = malloc(cap);
	struct fixture f;

	assert_non_null(text);
	len += (size_t)snprintf(text, cap, "4242 7 127.0.0.1:80\n"); /* a socket's line first */
	for (uint32_t i = 0; i < n; i++)
		len += (size_t)snprintf(
			text + len, cap - len,
			"set web b%u admin=drain/ready weight=%u/1 max_connections=0/0 "
			"health=up\n",
			i, i == 7 ? 5 : 1);
	memset(&f, 0, sizeof(f));
	f.cfg = config_new(HASHLB_SCHEME_RING, n);
	one_point(f.cfg);
	assert_int_equal(hlb_loop_new(&f.loop), 0);
	assert_int_equal(hlb_rcu_new(0, &f.rcu), 0);
	f.env = (struct hlb_pool_env){ .n_workers = 2, .rcu = f.rcu, .handover = text };
	assert_int_equal(hlb_pool_new(f.cfg, f.loop, &f.env, &f.pool, &err), 0);
	f.svc = hlb_pool_service_at(f.pool, 0);
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(f.svc->backends[i]->admin, HASHLB_ADMIN_DRAIN);
	assert_int_equal(hlb_pool_backend_find(f.svc, "b7")->rt->weight, 5);
	assert_int_equal(hlb_pool_backend_find(f.svc, "b8")->rt->weight, 1);
	assert_int_equal(hashlb_table_up_count(hlb_pool_snapshot(f.svc)->table), 0);
	free(text);
	fixture_teardown(&f);
}

static void checks_on(struct hashlb_config *c)
{
	c->services[0].health.enabled = true;
}

/*
 * A backend dead from the start is found down (its first verdict, no flap); checks turned off
 * say it up, an up as unverified as the one at start, and turned on again they find it down:
 * that is no flap either. Before, checks turned off started its health over as seen up, each
 * off and on counted a flap and a damping penalty, and three held it down for flapping,
 * though it never served.
 */
static void test_checks_turned_off_up_is_only_assumed(void **state)
{
	struct hashlb_config *next;
	struct hlb_pool_backend *b;
	struct fixture f;

	(void)state;
	fixture_setup_readers(&f, HASHLB_SCHEME_RING, 3, 0, checks_on);
	b = hlb_pool_backend_find(f.svc, "b1");
	backend_fail(b);
	assert_false(b->health.up);
	assert_int_equal(b->health.flaps, 0);
	for (int i = 0; i < 3; i++) {
		next = config_new(HASHLB_SCHEME_RING, 3); /* checks off */
		fixture_reload(&f, next);
		assert_true(b->health.up);
		next = config_new(HASHLB_SCHEME_RING, 3);
		checks_on(next);
		fixture_reload(&f, next);
		backend_fail(b);
		assert_false(b->health.up);
	}
	assert_int_equal(b->health.flaps, 0);
	assert_false(b->health.suppressed);
	assert_true(hlb_health_penalty(&b->health, &f.svc->hp, hlb_now_ms()) == 0.0);
	/* once a check passed it was seen up: its next down is a flap */
	for (int i = 0; i < 2; i++)
		hlb_pool_health_result(b, true);
	assert_true(b->health.up);
	backend_fail(b);
	assert_int_equal(b->health.flaps, 1);
	fixture_teardown(&f);
}

/* Where in the interval (<iv> ms) <b>'s next check falls, from <t0>. */
static uint64_t check_offset(const struct hlb_pool_backend *b, uint64_t t0, uint32_t iv)
{
	return (b->check.next_ms - t0) % iv;
}

/*
 * 1,000 backends leave maint at once (hashlb ctl set POOL ready on an each_address name, or a
 * reload): each started its first check at once, a burst of 1,000 connects, where the docs
 * promise "never a burst". Their first checks now fall as at start, spread evenly over the
 * interval: a tenth of the interval holds a tenth of them. Each one's place is read from the
 * time its own change began, not the first's: a preemption in the middle of the 1,000
 * moved every later one by as long (2 ms a backend), and the tenth it fell in held more:
 * 113 in 1 run of 3 under ThreadSanitizer at nice 19 beside two busy loops.
 */
static void test_leaving_maint_spreads_the_checks(void **state)
{
	enum { N = 1000, BUCKETS = 10 };
	static uint64_t t[N];
	struct fixture f;
	uint32_t count[BUCKETS] = { 0 }, iv;

	fixture_setup_readers(&f, HASHLB_SCHEME_RING, N, 0, checks_on);
	iv = f.cfg->services[0].health.interval_ms;
	for (uint32_t i = 0; i < N; i++)
		assert_int_equal(hlb_pool_set_admin(f.svc->backends[i], HASHLB_ADMIN_MAINT), 0);
	for (uint32_t i = 0; i < N; i++) {
		t[i] = hlb_now_ms();
		assert_int_equal(hlb_pool_set_admin(f.svc->backends[i], HASHLB_ADMIN_READY), 0);
	}
	for (uint32_t i = 0; i < N; i++) {
		assert_true(hlb_check_running(&f.svc->backends[i]->check));
		count[check_offset(f.svc->backends[i], t[i], iv) * BUCKETS / iv]++;
	}
	for (int k = 0; k < BUCKETS; k++) {
		print_message("    %u..%u ms: %u first checks\n", k * iv / BUCKETS,
			      (k + 1) * iv / BUCKETS, count[k]);
		assert_in_range(count[k], N / BUCKETS - 10, N / BUCKETS + 10);
	}
	fixture_teardown(&f);
}

/* A second service "api" with the same backends as "web". */
static void add_api(struct hashlb_config *c)
{
	struct hashlb_config *other = config_new(HASHLB_SCHEME_RING, c->services[0].n_backends);

	checks_on(c);
	checks_on(other);
	c->services = realloc(c->services, 2 * sizeof(*c->services));
	c->services[1] = other->services[0];
	c->n_services = 2;
	free(c->services[1].name);
	c->services[1].name = strdup("api");
	free(other->services);
	free(other);
}

/* How far apart (ms, either way round the interval) two offsets in the interval are. */
static uint64_t apart(uint64_t a, uint64_t b, uint32_t iv)
{
	uint64_t d = (a + iv - b) % iv;

	return d < iv - d ? d : iv - d;
}

/*
 * Checks of two services with as many backends start each shifted by a hash of its name, so
 * that their pools do not line up. A reload that restarts the checks (a health setting
 * changed) spread them with no shift, and the two pools checked in step. They keep the shift
 * they had at start.
 */
static void test_reload_spreads_the_checks_as_at_start(void **state)
{
	struct fixture f;
	struct hashlb_config *next;
	struct hlb_pool_service *api;
	uint64_t t0, at_start, after, setup, reload;
	uint32_t iv;

	/* Each service's checks are placed at the time it is set up: a preemption between the
	 * two (setting up, reloading) moves one against the other by as long. The times both
	 * took are measured, and allowed for: a fixed 10 ms left no room for a loaded machine. */
	t0 = hlb_now_ms();
	fixture_setup_readers(&f, HASHLB_SCHEME_RING, 100, 0, add_api);
	setup = hlb_now_ms() - t0;
	api = hlb_pool_service_at(f.pool, 1);
	iv = f.cfg->services[0].health.interval_ms;
	t0 = hlb_now_ms();
	at_start = apart(check_offset(f.svc->backends[0], t0, iv),
			 check_offset(api->backends[0], t0, iv), iv);
	assert_true(at_start + setup > 20); /* a property of the names "web" and "api" */

	next = config_new(HASHLB_SCHEME_RING, 100);
	add_api(next);
	next->services[0].health.timeout_ms = next->services[1].health.timeout_ms = 500;
	t0 = hlb_now_ms();
	fixture_reload(&f, next);
	reload = hlb_now_ms() - t0;
	t0 = hlb_now_ms();
	after = apart(check_offset(f.svc->backends[0], t0, iv),
		      check_offset(api->backends[0], t0, iv), iv);
	print_message("    web and api %" PRIu64 " ms apart at start, %" PRIu64
		      " ms after the reload (set up in %" PRIu64 " ms, reloaded in %" PRIu64
		      " ms)\n",
		      at_start, after, setup, reload);
	/* as far apart as at start, but for the time each took (and the ms clock's) */
	assert_true(apart(at_start, after, iv) <= setup + reload + 2);
	fixture_teardown(&f);
}

/* A new pool on a <scheme> config as <edit> makes it, given the handover text <ho>; its
 * backend b1. */
static struct hlb_pool_backend *taker_with(struct fixture *f, enum hashlb_scheme scheme,
					   void (*edit)(struct hashlb_config *), const char *ho)
{
	struct hashlb_error err = { 0 };

	memset(f, 0, sizeof(*f));
	f->cfg = config_new(scheme, 3);
	edit(f->cfg);
	assert_int_equal(hlb_loop_new(&f->loop), 0);
	assert_int_equal(hlb_rcu_new(0, &f->rcu), 0);
	f->env = (struct hlb_pool_env){ .n_workers = 2, .rcu = f->rcu, .handover = ho };
	assert_int_equal(hlb_pool_new(f->cfg, f->loop, &f->env, &f->pool, &err), 0);
	f->svc = hlb_pool_service_at(f->pool, 0);
	return hlb_pool_backend_find(f->svc, "b1");
}

/* The same with checks on, on a ring. */
static struct hlb_pool_backend *taker(struct fixture *f, const char *ho)
{
	return taker_with(f, HASHLB_SCHEME_RING, checks_on, ho);
}

/* <b> (checks on, rise 2) seen up, then down, up, down, up, down: held down for flapping at
 * the third (the first verdict after start, up only assumed, would be no flap). */
static void flap_until_held(struct hlb_pool_backend *b)
{
	hlb_pool_health_result(b, true);
	for (int i = 0; i < 3; i++) {
		backend_fail(b);
		if (i < 2) {
			hlb_pool_health_result(b, true);
			hlb_pool_health_result(b, true);
		}
	}
	assert_true(b->health.suppressed);
}

/*
 * A backend held down for flapping, then an upgrade in place: the new process got only
 * "health=down", and the backend came back after <rise> checks, its flapping forgotten
 * (the old one would have held it for a minute more). Its damping goes with it now: held
 * down until the penalty decays, and a penalty short of it still counts the next flap.
 */
static void test_handover_carries_flap_damping(void **state)
{
	struct fixture old, f;
	struct hlb_buf o = { 0 };
	struct hlb_pool_backend *b;

	fixture_setup_readers(&old, HASHLB_SCHEME_RING, 3, 0, checks_on);
	b = hlb_pool_backend_find(old.svc, "b1");
	flap_until_held(b);
	hlb_pool_handover(old.pool, &o);
	assert_non_null(o.p);
	assert_non_null(strstr(o.p, "set web b1 "));
	assert_non_null(strstr(o.p, " held=yes ramp=- addr="));
	fixture_teardown(&old);

	b = taker(&f, o.p);
	assert_false(hlb_pool_backend_up(b));
	assert_true(b->health.suppressed);
	assert_true(hlb_health_penalty(&b->health, &f.svc->hp, hlb_now_ms()) >= 2.5);
	hlb_pool_health_result(b, true); /* rise: its checks pass, yet it stays held */
	hlb_pool_health_result(b, true);
	assert_false(hlb_pool_backend_up(b));
	fixture_teardown(&f);

	/* an older hashlb's line, without the damping: down until <rise> checks pass */
	b = taker(&f, "set web b1 admin=ready/ready weight=1/1 max_connections=0/0 health=down\n");
	assert_false(hlb_pool_backend_up(b));
	hlb_pool_health_result(b, true);
	hlb_pool_health_result(b, true);
	assert_true(hlb_pool_backend_up(b));
	fixture_teardown(&f);

	/* up, with a penalty of two flaps: the next one holds it down */
	b = taker(&f, "set web b1 admin=ready/ready weight=1/1 max_connections=0/0 health=up "
		      "penalty=2.000 held=no\n");
	assert_true(hlb_pool_backend_up(b));
	backend_fail(b);
	assert_true(b->health.suppressed);
	fixture_teardown(&f);
	free(o.p);
}

/*
 * An upgrade in place hands the service's and each backend's counters over (traffic, checks,
 * flaps, ends, the connect histogram), and the new process shows them added to its own, so a
 * Prometheus counter never goes back at an upgrade: a backend of the same name takes them, one
 * not in the new config drops them, a gauge is not carried. The resync's, sent later, can only
 * raise them; values a later version lists past this one's are passed over. Before, every
 * counter began at 0 again in the new process.
 */
static void test_handover_carries_totals(void **state)
{
	struct fixture old, f;
	struct hlb_buf o = { 0 };
	struct hlb_pool_backend *b;
	struct hlb_pool_totals t;
	struct hlb_service_counters sc;

	(void)state;
	fixture_setup_readers(&old, HASHLB_SCHEME_RING, 3, 0, checks_on);
	b = hlb_pool_backend_find(old.svc, "b1");
	atomic_store(&b->rt->wstats[0].established, 5);
	atomic_store(&b->rt->wstats[1].established, 2);
	atomic_store(&b->rt->wstats[1].bytes_out, 4000);
	atomic_store(&b->rt->wstats[0].connect_hist[HLB_CONNECT_BUCKETS], 3);
	atomic_store(&b->rt->active, 4); /* a gauge: not carried */
	b->checks_ok = 9;
	b->health.flaps = 2;
	atomic_store(&old.svc->rt->wstats[1].total, 7);
	hlb_pool_handover_totals(old.pool, &o);
	assert_non_null(o.p);
	/* b0 and b2 counted nothing: no line */
	assert_null(strstr(o.p, " b0 "));
	assert_null(strstr(o.p, " b2 "));
	fixture_teardown(&old);

	b = taker(&f, o.p);
	hlb_pool_backend_totals(b, &t);
	assert_int_equal(t.c.total, 7);
	assert_int_equal(t.c.bytes_out, 4000);
	assert_int_equal(t.c.connect_hist[HLB_CONNECT_BUCKETS], 3);
	assert_int_equal(t.c.active, 0);
	assert_int_equal(t.checks_ok, 9);
	assert_int_equal(t.flaps, 2);
	/* added to what this process counts, not to the counters health reads */
	atomic_store(&b->rt->wstats[0].established, 1);
	hlb_pool_backend_totals(b, &t);
	assert_int_equal(t.c.total, 8);
	assert_int_equal(b->health.flaps, 0);
	assert_null(hlb_pool_backend_find(f.svc, "b0")->carried);
	hlb_pool_service_totals(f.svc, &sc);
	assert_int_equal(sc.total, 7);
	assert_int_equal(sc.active, 0);

	/* the resync's: higher values raise them, lower ones (and a backend or a service not
	 * here, a later version's values past this one's) change nothing */
	assert_int_equal(hlb_pool_carry_totals(f.pool, "totals web b1 0 9 3000 3000\n"
						       "totals web b1 40 6 77 88\n"
						       "totals web b9 0 100\n"
						       "service-totals gone 0 100\n"
						       "service-totals web 1 8 2\n"),
			 2);
	hlb_pool_backend_totals(b, &t);
	assert_int_equal(t.c.total, 10);
	assert_int_equal(t.c.bytes_in, 3000);
	assert_int_equal(t.c.bytes_out, 4000);
	assert_int_equal(t.c.connect_hist[HLB_CONNECT_BUCKETS], 6);
	hlb_pool_service_totals(f.svc, &sc);
	assert_int_equal(sc.total, 8);
	assert_int_equal(sc.rejected, 2);
	fixture_teardown(&f);
	free(o.p);
}

/* Two names of HASHLB_NAME_MAX bytes, for the widest handover lines. */
static void names_widest(struct hashlb_config *c)
{
	char *name = malloc(HASHLB_NAME_MAX + 1);

	memset(name, 'n', HASHLB_NAME_MAX);
	name[HASHLB_NAME_MAX] = '\0';
	free(c->services[0].name);
	c->services[0].name = name;
	free(c->services[0].backends[0].name);
	c->services[0].backends[0].name = strdup(name);
}

/*
 * The totals lines at their widest (two names of HASHLB_NAME_MAX bytes, every value of 20
 * digits) stay under the bound from which a hashlb of before passes a line over whole, or
 * reads it cut (HLB_HANDOVER_LINE_OLD_MAX), as the set lines do: an upgrade in place back to
 * one reads its own lines and passes these over. And the new process reads each back whole.
 */
static void test_handover_totals_widest_lines(void **state)
{
	struct fixture old, f;
	struct hlb_buf o = { 0 };
	struct hlb_pool_backend *b;
	struct hlb_pool_totals t;
	struct hlb_service_counters sc;
	char name[HASHLB_NAME_MAX + 1];
	unsigned lines = 0;
	size_t widest = 0;

	(void)state;
	fixture_setup_readers(&old, HASHLB_SCHEME_RING, 1, 0, names_widest);
	b = old.svc->backends[0];
	b->carried = malloc(sizeof(*b->carried));
	assert_non_null(b->carried);
	memset(b->carried, 0xff, sizeof(*b->carried)); /* every total UINT64_MAX */
	memset(&old.svc->carried, 0xff, sizeof(old.svc->carried));
	hlb_pool_handover_totals(old.pool, &o);
	assert_non_null(o.p);
	for (const char *l = o.p; *l; l = strchr(l, '\n') + 1) {
		size_t len = strcspn(l, "\n");

		widest = len > widest ? len : widest;
		lines++;
	}
	print_message("    the widest totals line: %zu bytes, its newline left out\n", widest);
	assert_true(widest < HLB_HANDOVER_LINE_OLD_MAX);
	assert_int_equal(lines, 7); /* the service's 12 values, the backend's 41 */

	memset(name, 'n', HASHLB_NAME_MAX);
	name[HASHLB_NAME_MAX] = '\0';
	fixture_setup_readers(&f, HASHLB_SCHEME_RING, 1, 0, names_widest);
	assert_int_equal(hlb_pool_carry_totals(f.pool, o.p), 2);
	hlb_pool_backend_totals(hlb_pool_backend_find(f.svc, name), &t);
	assert_true(t.c.total == UINT64_MAX &&
		    t.c.connect_hist[HLB_CONNECT_BUCKETS] == UINT64_MAX &&
		    t.passive_holds == UINT64_MAX);
	hlb_pool_service_totals(f.svc, &sc);
	assert_true(sc.lookups == UINT64_MAX && sc.rate_pauses == UINT64_MAX);
	fixture_teardown(&f);
	fixture_teardown(&old);
	free(o.p);
}

/*
 * Totals lines cut short, of another hashlb's making or of a later version, change no counter
 * but the one each value is listed for: an index at or past the list's end (up to UINT64_MAX,
 * or a number that does not fit 64 bits) takes nothing, where before the index wrapped past
 * UINT64_MAX and its next values landed on the list's first counters (connections, bytes).
 * A value that does not fit, a sign, a letter end the line's values; a line with no index, or
 * names and no values, is passed over.
 */
static void test_handover_totals_hostile_lines(void **state)
{
	struct hlb_service_counters sc;
	struct hlb_pool_totals t;
	struct hlb_pool_backend *b;
	struct fixture f;
	const char *whole = "totals web b1 0 18446744073709551615 1234567890123 1234567890123 1 "
			    "2 3 4 5 99\n";

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_RING, 3);
	b = hlb_pool_backend_find(f.svc, "b1");
	hlb_pool_carry_totals(f.pool, "totals web b1 18446744073709551615 7 8 9\n"
				      "totals web b1 18446744073709551610 1 2 3 4 5 6 7 8 9\n"
				      "totals web b1 99999999999999999999999 7 8 9\n"
				      "service-totals web 18446744073709551615 7 8 9\n"
				      "service-totals web 99999999999999999999 7 8 9\n"
				      "totals web b1 41 5 5 5\n"
				      "totals web b1\n"
				      "totals web b1 \n"
				      "totals web\n"
				      "totals web b1 -1 5\n"
				      "totals web b1 x 5\n"
				      "service-totals web\n"
				      "totals  web b1 0 5\n");
	hlb_pool_backend_totals(b, &t);
	assert_int_equal(t.c.total, 0);
	assert_int_equal(t.c.bytes_in, 0);
	assert_int_equal(t.c.bytes_out, 0);
	assert_int_equal(t.c.connect_fail, 0);
	hlb_pool_service_totals(f.svc, &sc);
	assert_int_equal(sc.lookups, 0);
	assert_int_equal(sc.total, 0);
	assert_int_equal(sc.rejected, 0);
	/* the values before one that does not fit (or is signed, or no number) are taken */
	hlb_pool_carry_totals(f.pool, "totals web b1 0 4 99999999999999999999 6\n"
				      "totals web b1 2 5 -6 7\n"
				      "totals web b1 4 8 9x 10\n");
	hlb_pool_backend_totals(b, &t);
	assert_int_equal(t.c.total, 4);
	assert_int_equal(t.c.bytes_in, 0);
	assert_int_equal(t.c.bytes_out, 5);
	assert_int_equal(t.c.connect_fail, 0);
	assert_int_equal(t.c.connect_timeout, 8);
	assert_int_equal(t.c.retries, 0);
	/* a line cut at any byte: no value past the cut, none above the one written */
	for (size_t cut = 0; cut <= strlen(whole); cut++) {
		char *text = strndup(whole, cut);

		assert_non_null(b->carried);
		memset(b->carried, 0, sizeof(*b->carried));
		hlb_pool_carry_totals(f.pool, text);
		hlb_pool_backend_totals(b, &t);
		assert_true(t.c.bytes_in <= 1234567890123 && t.c.bytes_out <= 1234567890123 &&
			    t.c.connect_fail <= 1 && t.c.full <= 99 && !t.checks_ok);
		free(text);
	}
	fixture_teardown(&f);
}

/*
 * Up only as assumed (no check passed it yet) or seen up by a check, handed over as it is:
 * one seen up there went down in the new process as if never known up, its first down no
 * flap (hashlb_backend_flaps_total one short, its damping a flap behind); one only assumed up
 * there must stay so, its first verdict no flap. A process of before, that sends no
 * HLB_HANDOVER_SEEN line, leaves every one assumed; the resync passes one seen since on.
 */
static void test_handover_carries_up_only_assumed(void **state)
{
	const char *seen_b1 = "seen web b1 127.0.0.1:9\n";
	struct fixture old, f;
	struct hlb_buf o = { 0 };
	struct hlb_pool_backend *b;

	fixture_setup_readers(&old, HASHLB_SCHEME_RING, 3, 0, checks_on);
	hlb_pool_health_result(hlb_pool_backend_find(old.svc, "b1"), true); /* seen up */
	hlb_pool_handover(old.pool, &o);
	assert_non_null(o.p);
	assert_non_null(strstr(o.p, "seen web b1 127.0.0.1:9\n"));
	assert_null(strstr(o.p, "seen web b2 "));
	fixture_teardown(&old);

	b = taker(&f, o.p);
	backend_fail(b);
	assert_int_equal(b->health.flaps, 1);
	b = hlb_pool_backend_find(f.svc, "b2");
	assert_true(hlb_pool_backend_up(b));
	backend_fail(b);
	assert_int_equal(b->health.flaps, 0);
	fixture_teardown(&f);
	free(o.p);

	/* a process of before: no line, up only assumed */
	b = taker(&f, "set web b1 admin=ready/ready weight=1/1 max_connections=0/0 health=up\n");
	backend_fail(b);
	assert_int_equal(b->health.flaps, 0);
	fixture_teardown(&f);

	/* assumed at first, seen up there while this one started */
	b = taker(&f, "set web b1 admin=ready/ready weight=1/1 max_connections=0/0 "
		      "health=assumed penalty=0.000 held=no ramp=-\n");
	assert_true(b->health.assumed);
	hlb_pool_resync(f.pool, seen_b1);
	backend_fail(b);
	assert_int_equal(b->health.flaps, 1);
	fixture_teardown(&f);
}

/* Backend b1 of <c> written as <address>, which connects to 127.0.0.<host>:9. */
static void b1_at(struct hashlb_config *c, const char *address, uint8_t host)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&c->services[0].backends[1].addr;

	free(c->services[0].backends[1].address);
	c->services[0].backends[1].address = strdup(address);
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK - 1 + host);
}

/* The new config's b1 at another address than the old one's. */
static void checks_on_b1_moved(struct hashlb_config *c)
{
	checks_on(c);
	b1_at(c, "127.0.0.2:9", 2);
}

/*
 * Seen up by the old process's checks is said of a backend it had, where it had it: one the
 * new config adds, or moves to another address, no check saw up, and its first down there is
 * no flap. The old process's word for a service ("its backends not listed were seen up")
 * made every backend the new config added seen up too, and one moved kept the up seen at its
 * old address.
 */
/* The handover of an old process (config <edit>) with backends b0..b<n-1>, checks on, each
 * seen up. */
static char *handover_all_seen_up_with(uint32_t n, void (*edit)(struct hashlb_config *))
{
	struct fixture old;
	struct hlb_buf o = { 0 };

	fixture_setup_readers(&old, HASHLB_SCHEME_RING, n, 0, edit);
	for (uint32_t i = 0; i < n; i++)
		hlb_pool_health_result(old.svc->backends[i], true);
	hlb_pool_handover(old.pool, &o);
	assert_non_null(o.p);
	fixture_teardown(&old);
	return o.p;
}

static char *handover_all_seen_up(uint32_t n)
{
	return handover_all_seen_up_with(n, checks_on);
}

static void test_handover_seen_up_is_of_the_backends_the_old_one_had(void **state)
{
	/* the old config has b0 alone, the new one adds b1 and b2; the old one has b0..b2, the
	 * new one moves b1. Either way no check saw b1 up where it is now; b0 (b2) one did */
	const struct {
		uint32_t n_old;
		void (*edit)(struct hashlb_config *);
		const char *seen;
	} cases[] = { { 1, checks_on, "b0" }, { 3, checks_on_b1_moved, "b2" } };

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *ho = handover_all_seen_up(cases[i].n_old);
		struct fixture f;
		struct hlb_pool_backend *b = taker_with(&f, HASHLB_SCHEME_RING, cases[i].edit, ho);

		backend_fail(b);
		assert_int_equal(b->health.flaps, 0);
		b = hlb_pool_backend_find(f.svc, cases[i].seen);
		backend_fail(b);
		assert_int_equal(b->health.flaps, 1);
		fixture_teardown(&f);
		free(ho);
	}
}

/* The handover of an old process (config <edit>) whose b1, at 127.0.0.1:9, is held for
 * flapping: its set line says the address it connects to. */
static char *handover_b1_held(void (*edit)(struct hashlb_config *))
{
	struct hlb_buf o = { 0 };
	struct fixture old;

	fixture_setup_readers(&old, HASHLB_SCHEME_RING, 3, 0, edit);
	flap_until_held(hlb_pool_backend_find(old.svc, "b1"));
	hlb_pool_handover(old.pool, &o);
	assert_non_null(o.p);
	assert_non_null(strstr(o.p, " held=yes ramp=- addr=127.0.0.1:9 hold=-\n"));
	fixture_teardown(&old);
	return o.p;
}

/*
 * A backend down and held for flapping in the old process, and a new config that moves it to
 * another address: another endpoint, that no check of either process saw fail. It started
 * down in the new process all the same, held for the old address's flapping, out of its
 * service until the penalty decayed. It starts as a reload that moves it does now, up
 * (assumed); one still at that address is carried down and held, as before.
 */
static void test_handover_health_is_of_the_address(void **state)
{
	struct hlb_buf o = { .p = handover_b1_held(checks_on) };
	struct hlb_pool_backend *b;
	struct fixture f;

	(void)state;

	b = taker_with(&f, HASHLB_SCHEME_RING, checks_on_b1_moved, o.p);
	assert_true(hlb_pool_backend_up(b));
	assert_false(b->health.suppressed);
	assert_true(hlb_health_penalty(&b->health, &f.svc->hp, hlb_now_ms()) == 0);
	backend_fail(b); /* its first down: no flap, as for any backend just started */
	assert_int_equal(b->health.flaps, 0);
	fixture_teardown(&f);

	b = taker(&f, o.p);
	assert_false(hlb_pool_backend_up(b));
	assert_true(b->health.suppressed);
	fixture_teardown(&f);

	/* the same through the resync: down there since, at the address it had there */
	b = taker_with(&f, HASHLB_SCHEME_RING, checks_on_b1_moved, NULL);
	assert_int_equal(hlb_pool_resync(f.pool, o.p), 0);
	assert_true(hlb_pool_backend_up(b));
	fixture_teardown(&f);
	b = taker(&f, NULL);
	assert_int_equal(hlb_pool_resync(f.pool, o.p), 1);
	assert_false(hlb_pool_backend_up(b));
	fixture_teardown(&f);
	free(o.p);
}

/* Checks on, b1 written as a host name that resolved to 127.0.0.1 (the fixture's address). */
static void checks_on_b1_named(struct hashlb_config *c)
{
	checks_on(c);
	b1_at(c, "b1.example.test:9", 1);
}

/* The same name, resolved to another address (DNS moved it). */
static void checks_on_b1_named_elsewhere(struct hashlb_config *c)
{
	checks_on(c);
	b1_at(c, "b1.example.test:9", 3);
}

/*
 * A handed-over health is of the endpoint the backend connected to, as a reload has it: b1,
 * written as a host name of 127.0.0.1, held for flapping, is the same endpoint for a new config
 * that writes it 127.0.0.1:9, and carried down; the same name resolved elsewhere is another
 * endpoint, up (assumed). Compared as written, the first started up (a dead backend taking
 * clients until its checks failed it again) and the second down, held for another address's
 * flapping. A line that wrote the address as written (a name) is still compared so.
 */
static void test_handover_health_is_of_the_endpoint_connected_to(void **state)
{
	static const char named[] = "set web b1 admin=ready/ready weight=1/1 max_connections=0/0 "
				    "health=down penalty=0.000 held=no ramp=- "
				    "addr=b1.example.test:9 hold=-\n";
	struct hlb_buf o = { .p = handover_b1_held(checks_on_b1_named) };
	struct hlb_pool_backend *b;
	struct fixture f;

	(void)state;
	b = taker(&f, o.p); /* written 127.0.0.1:9 now */
	assert_false(hlb_pool_backend_up(b));
	assert_true(b->health.suppressed);
	fixture_teardown(&f);

	b = taker_with(&f, HASHLB_SCHEME_RING, checks_on_b1_named_elsewhere, o.p);
	assert_true(hlb_pool_backend_up(b));
	assert_false(b->health.suppressed);
	fixture_teardown(&f);

	/* and through the resync */
	b = taker(&f, NULL);
	assert_int_equal(hlb_pool_resync(f.pool, o.p), 1);
	assert_false(hlb_pool_backend_up(b));
	fixture_teardown(&f);
	b = taker_with(&f, HASHLB_SCHEME_RING, checks_on_b1_named_elsewhere, NULL);
	assert_int_equal(hlb_pool_resync(f.pool, o.p), 0);
	assert_true(hlb_pool_backend_up(b));
	fixture_teardown(&f);
	free(o.p);

	b = taker_with(&f, HASHLB_SCHEME_RING, checks_on_b1_named_elsewhere, named);
	assert_false(hlb_pool_backend_up(b));
	fixture_teardown(&f);
	b = taker(&f, named);
	assert_true(hlb_pool_backend_up(b));
	fixture_teardown(&f);
}

/* Whether <b> is taken as seen up: its first down is a flap. */
static bool fails_as_a_flap(struct hlb_pool_backend *b)
{
	backend_fail(b);
	return b->health.flaps == 1;
}

/*
 * Seen up by the old process's checks is of the endpoint connected to, as a handed-over health
 * is (test_handover_health_is_of_the_endpoint_connected_to): b1, written as a host name of
 * 127.0.0.1 and seen up, is seen up for a new config that writes it 127.0.0.1:9, and not where
 * the same name resolves elsewhere. Its seen line said the address as written and was compared
 * so: the first's next down was no flap, the second's one. A seen line of a process of before,
 * the address as written, is still compared so.
 */
static void test_handover_seen_up_is_of_the_endpoint_connected_to(void **state)
{
	static const char named[] = "seen web b1 b1.example.test:9\n";
	char *ho = handover_all_seen_up_with(3, checks_on_b1_named);
	struct hlb_pool_backend *b;
	struct fixture f;

	(void)state;
	assert_non_null(strstr(ho, "seen web b1 127.0.0.1:9\n"));
	assert_true(fails_as_a_flap(taker(&f, ho)));
	fixture_teardown(&f);
	assert_false(fails_as_a_flap(
		taker_with(&f, HASHLB_SCHEME_RING, checks_on_b1_named_elsewhere, ho)));
	fixture_teardown(&f);

	/* and through the resync */
	b = taker(&f, NULL);
	hlb_pool_resync(f.pool, ho);
	assert_true(fails_as_a_flap(b));
	fixture_teardown(&f);
	b = taker_with(&f, HASHLB_SCHEME_RING, checks_on_b1_named_elsewhere, NULL);
	hlb_pool_resync(f.pool, ho);
	assert_false(fails_as_a_flap(b));
	fixture_teardown(&f);
	free(ho);

	assert_true(fails_as_a_flap(
		taker_with(&f, HASHLB_SCHEME_RING, checks_on_b1_named_elsewhere, named)));
	fixture_teardown(&f);
	assert_false(fails_as_a_flap(taker(&f, named)));
	fixture_teardown(&f);
}

/*
 * A backend held down for flapping, fixed: the operator need not wait for its penalty to
 * decay (about 100 s with the defaults). maint, then ready, forgets its damping: it starts
 * down and comes back after <rise> passing checks, as docs/control.md tells them.
 */
static void test_maint_then_ready_releases_a_flapping_backend(void **state)
{
	struct fixture f;
	struct hlb_pool_backend *b;

	fixture_setup_readers(&f, HASHLB_SCHEME_RING, 3, 0, checks_on);
	b = hlb_pool_backend_find(f.svc, "b1");
	flap_until_held(b);
	hlb_pool_health_result(b, true); /* its checks pass: still held */
	hlb_pool_health_result(b, true);
	assert_false(hlb_pool_backend_up(b));
	assert_int_equal(hlb_pool_set_admin(b, HASHLB_ADMIN_MAINT), 0);
	assert_int_equal(hlb_pool_set_admin(b, HASHLB_ADMIN_READY), 0);
	assert_false(hlb_pool_backend_up(b)); /* starts down */
	hlb_pool_health_result(b, true);
	hlb_pool_health_result(b, true);
	assert_true(hlb_pool_backend_up(b));
	assert_false(b->health.suppressed);
	fixture_teardown(&f);
}

static void checks_and_slow_start_on(struct hashlb_config *c)
{
	c->services[0].health.enabled = true;
	c->services[0].slow_start_ms = 30000;
}

/*
 * A backend in slow start, then an upgrade in place: the new process started it up and not
 * ramping, admitting all its clients at once, the ramp that protected it forgotten. Its ramp
 * goes on where it was now: the old process hands over how far into it (ms, since the two
 * monotonic clocks differ in origin), and the first table of the new one has it ramping.
 */
static void test_handover_carries_slow_start(void **state)
{
	struct fixture old, f;
	struct hlb_buf o = { 0 };
	struct hlb_pool_backend *b;
	const char *r;
	uint32_t third = (uint32_t)(10000ull * HLB_ADMIT_ONE / 30000);

	fixture_setup_readers(&old, HASHLB_SCHEME_MAGLEV, 3, 0, checks_and_slow_start_on);
	b = hlb_pool_backend_find(old.svc, "b1");
	backend_fail(b); /* back up after its checks: ramping */
	hlb_pool_health_result(b, true);
	hlb_pool_health_result(b, true);
	assert_true(hlb_pool_backend_up(b) && b->ramp_start_ms);
	hlb_pool_handover(old.pool, &o);
	assert_non_null(o.p);
	r = strstr(o.p, "set web b1 ");
	assert_non_null(r);
	r = strstr(r, " ramp=");
	assert_non_null(r);
	assert_true(r[6] >= '0' && r[6] <= '9'); /* ms into it, not "-" */
	fixture_teardown(&old);
	b = taker_with(&f, HASHLB_SCHEME_MAGLEV, checks_and_slow_start_on, o.p);
	assert_true(hlb_pool_backend_up(b) && b->ramp_start_ms);
	assert_true(atomic_load(&b->rt->admit) < HLB_ADMIT_ONE / 10);
	assert_non_null(hlb_pool_snapshot(f.svc)->ramp_table);
	fixture_teardown(&f);
	free(o.p);

	/* a third of the way: it admits a third of its clients, and goes on from there */
	b = taker_with(&f, HASHLB_SCHEME_MAGLEV, checks_and_slow_start_on,
		       "set web b1 admin=ready/ready weight=1/1 max_connections=0/0 health=up "
		       "penalty=1.000 held=no ramp=10000\n");
	assert_int_equal(atomic_load(&b->rt->admit), third);
	assert_non_null(hlb_pool_snapshot(f.svc)->ramp_table);
	fixture_teardown(&f);

	/* ramp over there (not yet cleared by its tick), or none: all its clients */
	b = taker_with(&f, HASHLB_SCHEME_MAGLEV, checks_and_slow_start_on,
		       "set web b1 admin=ready/ready weight=1/1 max_connections=0/0 health=up "
		       "penalty=1.000 held=no ramp=30000\n");
	assert_int_equal(atomic_load(&b->rt->admit), HLB_ADMIT_ONE);
	assert_false(b->ramp_start_ms);
	fixture_teardown(&f);
	b = taker_with(&f, HASHLB_SCHEME_MAGLEV, checks_and_slow_start_on,
		       "set web b1 admin=ready/ready weight=1/1 max_connections=0/0 health=up "
		       "penalty=1.000 held=no ramp=-\n");
	assert_int_equal(atomic_load(&b->rt->admit), HLB_ADMIT_ONE);
	fixture_teardown(&f);

	/* handed over down, back up there while this one started (the resync): its ramp
	 * began there, not at the resync */
	b = taker_with(&f, HASHLB_SCHEME_MAGLEV, checks_and_slow_start_on,
		       "set web b1 admin=ready/ready weight=1/1 max_connections=0/0 health=down "
		       "penalty=1.000 held=no ramp=-\n");
	assert_false(hlb_pool_backend_up(b));
	assert_int_equal(hlb_pool_resync(f.pool, "set web b1 admin=ready/ready weight=1/1 "
						 "max_connections=0/0 health=up penalty=1.000 "
						 "held=no ramp=10000\n"),
			 1);
	assert_true(hlb_pool_backend_up(b));
	assert_int_equal(atomic_load(&b->rt->admit), third);
	fixture_teardown(&f);
}

static void test_reload_turning_checks_off_revives_down_backends(void **state)
{
	struct fixture f;
	struct hashlb_config *next;
	struct hlb_pool_backend *b;

	fixture_setup(&f, HASHLB_SCHEME_RING, 3);
	f.cfg->services[0].health.enabled = true; /* as if checks had been on */
	b = hlb_pool_backend_find(f.svc, "b1");
	backend_fail(b);
	hlb_pool_flush(f.pool);
	assert_int_equal(hashlb_table_up_count(hlb_pool_snapshot(f.svc)->table), 2);
	next = config_new(HASHLB_SCHEME_RING, 3); /* health: enabled false */
	fixture_reload(&f, next);
	hlb_pool_flush(f.pool);
	assert_true(hlb_pool_backend_up(b));
	assert_int_equal(hashlb_table_up_count(hlb_pool_snapshot(f.svc)->table), 3);
	fixture_teardown(&f);
}

/* log_connections lives in the snapshot: a reload changing only it publishes; a refresh keeps
 * it. */
static void test_reload_switches_log_connections(void **state)
{
	struct fixture f;
	struct hashlb_config *next;
	uint64_t gen;

	fixture_setup(&f, HASHLB_SCHEME_RING, 3);
	assert_false(hlb_pool_snapshot(f.svc)->log_connections);
	gen = hlb_pool_snapshot(f.svc)->generation;
	next = config_new(HASHLB_SCHEME_RING, 3);
	next->services[0].log_connections = true;
	fixture_reload(&f, next);
	hlb_pool_flush(f.pool);
	assert_true(hlb_pool_snapshot(f.svc)->generation > gen);
	assert_true(hlb_pool_snapshot(f.svc)->log_connections);
	/* a health change rebuilds from the current snapshot: the setting stays */
	gen = hlb_pool_snapshot(f.svc)->generation;
	backend_fail(hlb_pool_backend_find(f.svc, "b1"));
	hlb_pool_flush(f.pool);
	assert_true(hlb_pool_snapshot(f.svc)->generation > gen);
	assert_true(hlb_pool_snapshot(f.svc)->log_connections);
	fixture_teardown(&f);
}

static void close_on_down_on(struct hashlb_config *c)
{
	c->services[0].health.close_on_down = true;
}

static void backup_close_on_return(struct hashlb_config *c)
{
	c->services[0].backends[0].backup = true;
	c->services[0].backends[0].close_on_return = true;
}

static unsigned gen_of(const struct hlb_pool_backend *b)
{
	return atomic_load(&b->rt->close_gen);
}

/* A worker online through the publish holds the close back; a poll after it went offline
 * runs it: health.close_on_down closes a down backend's connections, not one up again. */
static void test_close_on_down_after_a_grace_period(void **state)
{
	struct fixture f;
	struct hlb_pool_backend *b;

	(void)state;
	fixture_setup_readers(&f, HASHLB_SCHEME_MAGLEV, 4, 1, close_on_down_on);
	b = hlb_pool_backend_find(f.svc, "b2");
	hlb_rcu_online(f.rcu, 0);
	backend_fail(b);
	hlb_pool_flush(f.pool);
	hlb_rcu_poll(f.rcu);
	assert_int_equal(gen_of(b), 0); /* a worker may still hold the table that had it */
	hlb_rcu_offline(f.rcu, 0);
	hlb_rcu_poll(f.rcu);
	assert_int_equal(gen_of(b), 1);
	assert_int_equal(atomic_load(&b->rt->close_why), HLB_CLOSE_DOWN);

	/* down, then up again before the grace period ends: nothing is closed */
	hlb_pool_health_result(b, true);
	hlb_pool_health_result(b, true);
	hlb_pool_flush(f.pool);
	hlb_rcu_online(f.rcu, 0);
	backend_fail(b);
	hlb_pool_flush(f.pool);
	hlb_pool_health_result(b, true);
	hlb_pool_health_result(b, true);
	hlb_pool_flush(f.pool);
	hlb_rcu_offline(f.rcu, 0);
	hlb_rcu_poll(f.rcu);
	assert_int_equal(gen_of(b), 1);
	fixture_teardown(&f);
}

/* A reload that writes a kept backend's address otherwise (another name of that address)
 * gives it the name written; the one before, which a worker may be reading as it logs a
 * connection of it (proxy/conn.c), stays readable until every worker has passed a
 * quiescent point. Before, it was freed at once: "127.0.0.1:9" read back clobbered by the
 * allocator, a heap-use-after-free under ASan. */
static void test_reload_renaming_an_address_frees_the_old_name_after_a_grace_period(void **state)
{
	struct fixture f;
	struct hashlb_config *next;
	struct hlb_backend *rt;
	const char *was;

	(void)state;
	fixture_setup_readers(&f, HASHLB_SCHEME_MAGLEV, 2, 1, NULL);
	rt = hlb_pool_backend_find(f.svc, "b0")->rt;
	hlb_rcu_online(f.rcu, 0);
	was = rt->address; /* a worker's read, in its turn */
	next = config_new(HASHLB_SCHEME_MAGLEV, 2);
	free(next->services[0].backends[0].address);
	next->services[0].backends[0].address = strdup("localhost:9");
	fixture_reload(&f, next);
	hlb_pool_flush(f.pool);
	hlb_rcu_poll(f.rcu);
	assert_ptr_equal(hlb_pool_backend_find(f.svc, "b0")->rt, rt);
	assert_string_equal(rt->address, "localhost:9");
	assert_string_equal(was, "127.0.0.1:9");
	hlb_rcu_offline(f.rcu, 0);
	fixture_teardown(&f); /* the old name freed (ASan: no leak) */
}

/* close_on_return: the backup's connections are closed when a primary is back, unless
 * every primary is gone again by the end of the grace period. */
static void test_backup_close_on_return(void **state)
{
	struct fixture f;
	struct hlb_pool_backend *bk, *p1, *p2;

	(void)state;
	fixture_setup_readers(&f, HASHLB_SCHEME_MAGLEV, 3, 1, backup_close_on_return);
	bk = hlb_pool_backend_find(f.svc, "b0");
	p1 = hlb_pool_backend_find(f.svc, "b1");
	p2 = hlb_pool_backend_find(f.svc, "b2");
	assert_false(atomic_load(&bk->rt->listed));
	backend_fail(p1);
	backend_fail(p2);
	hlb_pool_flush(f.pool);
	assert_true(atomic_load(&bk->rt->listed)); /* the primaries down: the backup serves */

	/* p1 back: the backup leaves the table, its connections close after the grace period */
	hlb_rcu_online(f.rcu, 0);
	hlb_pool_health_result(p1, true);
	hlb_pool_health_result(p1, true);
	hlb_pool_flush(f.pool);
	assert_false(atomic_load(&bk->rt->listed));
	hlb_rcu_poll(f.rcu);
	assert_int_equal(gen_of(bk), 0);
	hlb_rcu_offline(f.rcu, 0);
	hlb_rcu_poll(f.rcu);
	assert_int_equal(gen_of(bk), 1);
	assert_int_equal(atomic_load(&bk->rt->close_why), HLB_CLOSE_BACKUP);

	/* p1 down and back, and down again before the grace period ends: the backup serves
	 * again by then, and keeps its connections */
	backend_fail(p1);
	hlb_pool_flush(f.pool);
	hlb_rcu_online(f.rcu, 0);
	hlb_pool_health_result(p1, true);
	hlb_pool_health_result(p1, true);
	hlb_pool_flush(f.pool);
	backend_fail(p1);
	hlb_pool_flush(f.pool);
	assert_true(atomic_load(&bk->rt->listed));
	hlb_rcu_offline(f.rcu, 0);
	hlb_rcu_poll(f.rcu);
	assert_int_equal(gen_of(bk), 1);
	fixture_teardown(&f);
}

/* The log lines of a pool, for the tests that read them. */
struct log_lines {
	char text[16][256];
	uint32_t n;
};

static void log_capture(void *arg, enum hlb_log_level level, const char *msg, const char *kv)
{
	struct log_lines *l = arg;

	(void)level;
	if (l->n < 16)
		snprintf(l->text[l->n], sizeof(l->text[0]), "msg=\"%s\" %s", msg, kv);
	l->n++;
}

/* <f>: a Maglev service of <n> backends with health checks on, its pool logging to <log>(<arg>). */
static void checked_pool(struct fixture *f, uint32_t n,
			 void (*log)(void *, enum hlb_log_level, const char *, const char *),
			 void *arg)
{
	memset(f, 0, sizeof(*f));
	f->cfg = config_new(HASHLB_SCHEME_MAGLEV, n);
	checks_on(f->cfg);
	assert_int_equal(hlb_loop_new(&f->loop), 0);
	assert_int_equal(hlb_rcu_new(0, &f->rcu), 0);
	f->env = (struct hlb_pool_env){ .n_workers = 2, .rcu = f->rcu, .log = log, .arg = arg };
	assert_int_equal(hlb_pool_new(f->cfg, f->loop, &f->env, &f->pool, NULL), 0);
	f->svc = hlb_pool_service_at(f->pool, 0);
}

/*
 * An upgrade's new process says, per backend, which run-time settings it took over
 * from the old one: a backend that flapped once and is up again carries only its flap
 * damping, and the line, with the config's state, weight and cap beside it, read as
 * if nothing was carried (an operator set nothing on it).
 */
static void test_handover_says_what_it_carried(void **state)
{
	struct log_lines l = { 0 };
	struct hashlb_error err = { 0 };
	struct fixture f = { 0 };
	unsigned seen = 0;

	f.cfg = config_new(HASHLB_SCHEME_RING, 3);
	checks_on(f.cfg);
	assert_int_equal(hlb_loop_new(&f.loop), 0);
	assert_int_equal(hlb_rcu_new(0, &f.rcu), 0);
	f.env = (struct hlb_pool_env){
		.n_workers = 2,
		.rcu = f.rcu,
		.log = log_capture,
		.arg = &l,
		.handover = "set web b1 admin=ready/ready weight=1/1 max_connections=0/0 "
			    "health=up penalty=1.000 held=no\n"
			    "set web b2 admin=drain/ready weight=3/1 max_connections=0/0 "
			    "health=down penalty=1.000 held=no\n",
	};
	assert_int_equal(hlb_pool_new(f.cfg, f.loop, &f.env, &f.pool, &err), 0);
	for (uint32_t i = 0; i < l.n && i < 16; i++) {
		if (!strstr(l.text[i], "carried over from the old hashlb"))
			continue;
		if (strstr(l.text[i], "backend=b1 "))
			assert_non_null(strstr(l.text[i], " carried=flap_damping state=ready "));
		else
			assert_non_null(strstr(l.text[i], "backend=b2 carried=state,weight,down,"
							  "flap_damping state=drain weight=3 "));
		seen++;
	}
	/* a line for each: b1's, flap damping alone, is the one this is about */
	assert_int_equal(seen, 2);
	fixture_teardown(&f);
}

/*
 * An upgrade in place takes over the weights set at run time, which table_memory bounds as it
 * bounds the config's (a reload keeping them is refused past it): a new process whose config
 * lowered table_memory, or raised a ring's vnodes, below what those weights take is refused
 * at table_memory, no table built, the old one serving on. Before, it started with tables
 * past its cap, though the loader had counted them within it (the config's weights).
 */
static void test_handover_weights_bounded_by_table_memory(void **state)
{
	static const char *const ho[] = {
		"set web b1 admin=ready/ready weight=4/1 max_connections=0/0 health=up\n",
		"set web b1 admin=ready/ready weight=0/1 max_connections=0/0 health=up\n",
		"set web b1 admin=ready/ready weight=4/1 max_connections=0/0 health=up\n",
	};

	/* 2: table_memory not in the config, the default (line 0): said at the service, as the
	 * loader says it (before, line 0: no position at all) */
	for (int i = 0; i < 3; i++) {
		struct hashlb_error err = { 0 };
		struct fixture f = { 0 };
		int ret;

		f.cfg = config_new(HASHLB_SCHEME_RING, 3);
		/* the config's own tables fit, to the byte */
		f.cfg->table_memory = hashlb_service_cfg_table_bytes_max(&f.cfg->services[0]);
		if (i < 2)
			f.cfg->table_memory_pos = (struct hashlb_pos){ .line = 7, .column = 15 };
		f.cfg->services[0].pos = (struct hashlb_pos){ .line = 9, .column = 5 };
		assert_int_equal(hlb_loop_new(&f.loop), 0);
		assert_int_equal(hlb_rcu_new(0, &f.rcu), 0);
		f.env = (struct hlb_pool_env){ .n_workers = 2, .rcu = f.rcu, .handover = ho[i] };
		ret = hlb_pool_new(f.cfg, f.loop, &f.env, &f.pool, &err);
		if (i != 1) { /* b1 at weight 4: past the cap */
			assert_int_equal(ret, -E2BIG);
			assert_int_equal(err.reason, HASHLB_ERR_MEMORY_CAP);
			assert_int_equal(err.line, i == 0 ? 7 : 9);
			assert_int_equal(err.column, i == 0 ? 15 : 5);
			assert_non_null(
				strstr(err.msg, "service 'web': with the weights set at run time"));
			assert_non_null(strstr(err.msg, "over table_memory"));
			assert_true(!strstr(err.msg, ", the default)") == (i == 0));
			f.pool = NULL;
		} else { /* b1 at weight 0: within it */
			assert_int_equal(ret, 0);
			f.svc = hlb_pool_service_at(f.pool, 0);
			assert_int_equal(hlb_pool_backend_find(f.svc, "b1")->rt->weight, 0);
		}
		fixture_teardown(&f);
	}
}

/*
 * A backend's failing checks and a service's skipped ones say their error,
 * and again each time it changes, not per check: the checker's callbacks
 * fed as its checks would, an error flapping between two for 50 checks.
 */
static void test_check_errors_are_logged_once_per_change(void **state)
{
	struct hlb_check *c;
	struct log_lines l = { 0 };
	struct fixture f;
	uint32_t before;

	checked_pool(&f, 3, log_capture, &l);
	c = &hlb_pool_backend_find(f.svc, "b1")->check;
	for (int i = 0; i < 3; i++) { /* fall: 3 refused */
		c->failed_at = HLB_CHECK_AT_CONNECT, c->failed_err = ECONNREFUSED;
		c->done(c->arg, false, 0);
	}
	assert_int_equal(l.n, 3); /* failed=1 and 2 while it stays up, then down */
	assert_non_null(strstr(l.text[2], "msg=\"backend down\" service=web backend=b1 "
					  "cause=checks flaps=0 at=connect err=ECONNREFUSED"));
	for (int i = 0; i < 50; i++) { /* no answer to the SYN, then flapping */
		c->failed_at = HLB_CHECK_AT_CONNECT;
		c->failed_err = i % 2 ? ECONNREFUSED : ETIMEDOUT;
		c->done(c->arg, false, 0);
	}
	assert_int_equal(l.n, 4);
	assert_string_equal(l.text[3], "msg=\"health checks still failing, another error\" "
				       "service=web backend=b1 at=connect err=ETIMEDOUT "
				       "was=\"at=connect err=ECONNREFUSED\" changes=1");
	c->failed_at = HLB_CHECK_AT_REPLY, c->failed_err = EBADMSG; /* a new one: at once */
	c->done(c->arg, false, 0);
	assert_int_equal(l.n, 5);
	assert_non_null(strstr(l.text[4], "at=reply err=EBADMSG was=\"at=connect err=ETIMEDOUT\" "
					  "changes=50"));

	before = l.n;
	for (int i = 0; i < 50; i++) /* the source address gone, then no fd, by turns */
		c->skipped(c->arg, i % 2 ? HLB_CHECK_SKIP_SOCKET : HLB_CHECK_SKIP_SOURCE,
			   i % 2 ? EMFILE : EADDRNOTAVAIL);
	assert_int_equal(l.n, before + 2);
	assert_non_null(strstr(l.text[before], "msg=\"health checks skipped, health kept\" "
					       "service=web backend=b1 at=source source=none "
					       "err=EADDRNOTAVAIL"));
	assert_non_null(strstr(l.text[before + 1],
			       "msg=\"health checks still skipped, another error\" service=web "
			       "backend=b1 at=socket source=none err=EMFILE "
			       "was=\"at=source err=EADDRNOTAVAIL\" changes=1"));
	fixture_teardown(&f);
}

/* <f>: a ring service of <n> backends, checks off, passive on with a hold of <hold_ms>,
 * its pool logging to <l>. */
static void passive_only_pool(struct fixture *f, uint32_t n, uint32_t hold_ms, struct log_lines *l)
{
	memset(f, 0, sizeof(*f));
	f->cfg = config_new(HASHLB_SCHEME_RING, n);
	f->cfg->services[0].health.passive_hold_ms = hold_ms;
	assert_int_equal(hlb_loop_new(&f->loop), 0);
	assert_int_equal(hlb_rcu_new(0, &f->rcu), 0);
	f->env = (struct hlb_pool_env){
		.n_workers = 2, .rcu = f->rcu, .log = log_capture, .arg = l
	};
	assert_int_equal(hlb_pool_new(f->cfg, f->loop, &f->env, &f->pool, NULL), 0);
	f->svc = hlb_pool_service_at(f->pool, 0);
}

/* The forwarder's failures of <b>: its run now <run>, refused, as a worker counts them and
 * wakes the control thread (hlb_pool_failing()). */
static void forwarder_fails(struct fixture *f, struct hlb_pool_backend *b, uint32_t run)
{
	atomic_store(&b->rt->connect_err, ECONNREFUSED);
	atomic_store(&b->rt->consecutive_fail, run);
	hlb_pool_failing(f->pool);
}

/* Run <f>'s loop until <b>'s health is <up> (a hang guard of 10 s). */
static void loop_until_health(struct fixture *f, const struct hlb_pool_backend *b, bool up)
{
	uint64_t end = hlb_now_ms() + 10000;

	while (b->health.up != up && hlb_now_ms() < end)
		hlb_loop_run_once(f->loop, 10);
	assert_true(b->health.up == up);
}

/* Run <f>'s loop until <b>'s hold is over (a hang guard of 10 s). */
static void loop_until_hold_over(struct fixture *f, const struct hlb_pool_backend *b)
{
	uint64_t end = hlb_now_ms() + 10000;

	while (b->health.hold_until_ms && hlb_now_ms() < end)
		hlb_loop_run_once(f->loop, 10);
	assert_int_equal(b->health.hold_until_ms, 0);
}

/*
 * Checks off (passive on, the default): fall failed connects in a row take a backend down for
 * passive_hold, its clients to the others as any down backend's, then it is up again on trial,
 * its run forgotten; one failed connect then takes it down again, for twice as long. Before, a
 * backend whose process was gone stayed up, every client of its paying a refused connect and a
 * retry. While it is held, the ticks visit no backend (at 1,000 as at 5).
 */
static void test_passive_only_holds_a_failing_backend(void **state)
{
	struct log_lines l = { 0 };
	struct hlb_pool_backend *b;
	struct fixture f;
	uint64_t visits;

	(void)state;
	passive_only_pool(&f, 1000, 5000, &l);
	b = hlb_pool_backend_find(f.svc, "b5");
	tick_visits_over_ten_ticks(&f); /* the first ticks see every backend */
	forwarder_fails(&f, b, 2);
	tick_visits_over_ten_ticks(&f);
	assert_true(b->health.up); /* 2 of fall 3 */
	forwarder_fails(&f, b, 3);
	loop_until_health(&f, b, false);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.text[0], "msg=\"backend down\" service=web backend=b5 cause=passive "
				       "flaps=0 at=connect err=ECONNREFUSED hold_ms=5000");
	hlb_pool_flush(f.pool);
	assert_true(hashlb_table_backend_down(hlb_pool_snapshot(f.svc)->table, 5));
	assert_false(atomic_load(&b->rt->healthy));
	/* held: nothing to watch. Ten ticks are 0.5 s of a 5 s hold; a machine that stalled
	 * this thread past its end (the TSan build runs at nice 19 beside the sanitizer build's
	 * tests) sees the hold's end visit it, and nothing more */
	visits = tick_visits_over_ten_ticks(&f);
	if (!b->health.up)
		assert_int_equal(visits, 0);
	else
		assert_true(visits <= 1);
	loop_until_health(&f, b, true);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.text[1], "msg=\"backend up\" service=web backend=b5 cause=hold_over "
				       "flaps=0");
	assert_true(b->health.trial);
	assert_int_equal(atomic_load(&b->rt->consecutive_fail), 0); /* a new run next */
	hlb_pool_flush(f.pool);
	assert_false(hashlb_table_backend_down(hlb_pool_snapshot(f.svc)->table, 5));
	forwarder_fails(&f, b, 1); /* on trial: one is enough */
	loop_until_health(&f, b, false);
	assert_non_null(strstr(l.text[2], "cause=passive flaps=0 at=connect err=ECONNREFUSED "
					  "hold_ms=10000"));
	fixture_teardown(&f);
}

/* The new config: passive-only health, a hold of 200 ms. */
static void passive_hold_200(struct hashlb_config *c)
{
	c->services[0].health.passive_hold_ms = 200;
}

/* The new config: passive-only health, a hold of 200 ms, b0 and b2 drained. */
static void passive_hold_others_drained(struct hashlb_config *c)
{
	passive_hold_200(c);
	c->services[0].backends[0].admin = HASHLB_ADMIN_DRAIN;
	c->services[0].backends[2].admin = HASHLB_ADMIN_DRAIN;
}

/* The handover of an old process, passive-only (hold <hold_ms>), whose b1 failed <fall> times:
 * held, and if <trial>, then up on trial once its hold was over; then set to <st>. */
static char *handover_passive_held(uint32_t hold_ms, bool trial, enum hashlb_admin_state st)
{
	struct log_lines l = { 0 };
	struct hlb_buf o = { 0 };
	struct hlb_pool_backend *b;
	struct fixture old;

	passive_only_pool(&old, 3, hold_ms, &l);
	b = hlb_pool_backend_find(old.svc, "b1");
	forwarder_fails(&old, b, 3);
	loop_until_health(&old, b, false);
	if (trial)
		loop_until_health(&old, b, true);
	assert_int_equal(hlb_pool_set_admin(b, st), 0);
	hlb_pool_handover(old.pool, &o);
	assert_non_null(o.p);
	fixture_teardown(&old);
	return o.p;
}

/*
 * Passive-only health at an upgrade in place: a backend held by its failed connects stays held
 * in the new process for what is left of its hold, and one up on trial stays on trial, its next
 * hold twice the last. Before, the new process started it up, its holds forgotten: a backend
 * whose process was gone took clients again at once, each paying a failed connect, until
 * <fall> of them held it again, for the first hold's length. A hold carried is one of the new
 * process's holds (it counted none: held, by no hold), and released as any when the backend is
 * left the last that could take clients.
 */
static void test_handover_carries_passive_hold(void **state)
{
	char *ho = handover_passive_held(60000, false, HASHLB_ADMIN_READY);
	struct hlb_pool_backend *b;
	struct fixture f;
	uint64_t now;

	(void)state;
	assert_non_null(strstr(ho, "set web b1 "));
	assert_non_null(strstr(ho, " health=down "));
	b = taker_with(&f, HASHLB_SCHEME_RING, passive_hold_200, ho);
	now = hlb_now_ms();
	assert_false(hlb_pool_backend_up(b));
	assert_false(atomic_load(&b->rt->healthy));
	assert_true(b->health.hold_until_ms > now);
	/* at most this config's longest hold: 8 x 200 ms, not the old config's minute */
	assert_true(b->health.hold_until_ms <= now + 200 * HLB_PASSIVE_HOLD_GROWTH);
	assert_int_equal(b->health.holds, 1);
	/* a hold under way: counted here (before, none was: held, by no hold) */
	assert_int_equal(b->passive_holds, 1);
	assert_true(hlb_pool_backend_hold_left_ms(b, now) > 0);
	loop_until_health(&f, b, true); /* the hold over: up on trial */
	assert_true(b->health.trial);
	assert_int_equal(b->passive_holds, 1);
	fixture_teardown(&f);

	/* the others drained by the new config: the hold carried is released at the first tick,
	 * b1 the last that could take clients */
	b = taker_with(&f, HASHLB_SCHEME_RING, passive_hold_others_drained, ho);
	assert_false(b->health.up);
	assert_int_equal(hlb_pool_backend_find(f.svc, "b0")->admin, HASHLB_ADMIN_DRAIN);
	loop_until_health(&f, b, true);
	assert_true(b->health.trial);
	assert_int_equal(hlb_pool_backend_hold_left_ms(b, hlb_now_ms()), 0);
	fixture_teardown(&f);
	free(ho);

	/* on trial there: one failed connect holds it again, for twice the last hold */
	ho = handover_passive_held(200, true, HASHLB_ADMIN_READY);
	b = taker_with(&f, HASHLB_SCHEME_RING, passive_hold_200, ho);
	assert_true(hlb_pool_backend_up(b));
	assert_true(b->health.trial);
	assert_int_equal(b->passive_holds, 0); /* none under way */
	forwarder_fails(&f, b, 1);
	loop_until_health(&f, b, false);
	assert_int_equal(b->health.hold_ms, 400);
	fixture_teardown(&f);

	/* where checks decide in the new config, the hold is none of theirs */
	b = taker(&f, ho);
	assert_true(hlb_pool_backend_up(b));
	assert_false(b->health.trial);
	fixture_teardown(&f);
	free(ho);
}

/*
 * A backend held by passive-only health and put in maint is held still when it leaves maint,
 * until its hold is over; across an upgrade in place too: the hold is handed over with the
 * state, and ready in the new process, the backend waits for what is left of it. Before, the
 * old process wrote no hold for a backend in maint, and the new one set ready took it up at
 * once, its clients paying its refused connects.
 */
static void test_handover_carries_passive_hold_through_maint(void **state)
{
	char *ho = handover_passive_held(60000, false, HASHLB_ADMIN_MAINT);
	struct hlb_pool_backend *b;
	struct fixture f;

	(void)state;
	assert_non_null(strstr(ho, "set web b1 admin=maint/ready "));
	b = taker_with(&f, HASHLB_SCHEME_RING, passive_hold_200, ho);
	assert_int_equal(b->admin, HASHLB_ADMIN_MAINT);
	assert_true(hlb_pool_backend_hold_left_ms(b, hlb_now_ms()) > 0);
	assert_int_equal(hlb_pool_set_admin(b, HASHLB_ADMIN_READY), 0);
	loop_ticks(&f, 1);
	assert_false(hlb_pool_backend_up(b)); /* held still, as in the old process */
	loop_until_health(&f, b, true); /* the hold over: up on trial */
	assert_true(b->health.trial);
	fixture_teardown(&f);
	free(ho);
}

/*
 * A reload keeps a hold that its config keeps (passive-only health still on: the backend is
 * no more up than before), and one that turns passive off ends it: the backend is up, and
 * says so (cause=unchecked), as one whose checks a reload turns off.
 */
static void test_passive_only_hold_across_reloads(void **state)
{
	struct log_lines l = { 0 };
	struct hashlb_config *next;
	struct hlb_pool_backend *b;
	struct fixture f;

	(void)state;
	passive_only_pool(&f, 3, 60000, &l);
	b = hlb_pool_backend_find(f.svc, "b1");
	forwarder_fails(&f, b, 3);
	loop_until_health(&f, b, false);
	next = config_new(HASHLB_SCHEME_RING, 3);
	next->services[0].health.passive_hold_ms = 30000;
	fixture_reload(&f, next);
	tick_visits_over_ten_ticks(&f);
	assert_false(b->health.up);
	assert_false(atomic_load(&b->rt->healthy));
	assert_int_equal(l.n, 1); /* its down line alone */
	next = config_new(HASHLB_SCHEME_RING, 3);
	next->services[0].health.passive = false;
	fixture_reload(&f, next);
	assert_true(b->health.up);
	assert_true(atomic_load(&b->rt->healthy));
	assert_int_equal(l.n, 2);
	assert_string_equal(l.text[1], "msg=\"backend up\" service=web backend=b1 cause=unchecked "
				       "flaps=0");
	hlb_pool_flush(f.pool);
	assert_false(hashlb_table_backend_down(hlb_pool_snapshot(f.svc)->table, 1));
	fixture_teardown(&f);
}

/* <f>: passive_only_pool() of 3 backends, a hold of 100 ms; its b1 held down by fall failed
 * connects, then up on trial. Returns b1. */
static struct hlb_pool_backend *on_trial(struct fixture *f, struct log_lines *l)
{
	struct hlb_pool_backend *b;

	passive_only_pool(f, 3, 100, l);
	b = hlb_pool_backend_find(f->svc, "b1");
	loop_to_rest(f);
	forwarder_fails(f, b, 3);
	loop_until_health(f, b, false);
	loop_until_health(f, b, true);
	assert_true(b->health.trial);
	return b;
}

/*
 * Passive-only health: a reload that ends it (passive off) ends a backend's trial and the
 * growth of its holds, and one that brings it back starts afresh: fall failed connects take
 * the backend down, for the first hold. Before, the tick that ends them ran only while
 * passive-only applied: the trial outlived the reload, and passive back on, the backend's next
 * failed connect held it at once, for twice the hold.
 */
static void test_passive_only_reload_off_ends_trial(void **state)
{
	struct log_lines l = { 0 };
	struct hashlb_config *next;
	struct hlb_pool_backend *b;
	struct fixture f;

	(void)state;
	b = on_trial(&f, &l);
	next = config_new(HASHLB_SCHEME_RING, 3);
	next->services[0].health.passive = false;
	fixture_reload(&f, next);
	loop_ticks(&f, 1);
	assert_false(b->health.trial);
	assert_int_equal(b->health.holds, 0);
	next = config_new(HASHLB_SCHEME_RING, 3);
	next->services[0].health.passive_hold_ms = 100;
	fixture_reload(&f, next);
	loop_ticks(&f, 1);
	forwarder_fails(&f, b, 1); /* 1 of fall 3 */
	loop_ticks(&f, 1);
	assert_true(b->health.up);
	forwarder_fails(&f, b, 3);
	loop_until_health(&f, b, false);
	assert_int_equal(b->health.hold_ms, 100);
	fixture_teardown(&f);
}

/*
 * Nothing is held by its connects: a service's only backend (nginx's rule: held, it would
 * refuse every client for the hold, though it may be back already), and any backend with
 * passive: false, up whatever its connects as before.
 */
static void test_passive_only_holds_no_lone_backend_nor_with_passive_off(void **state)
{
	for (int passive_off = 0; passive_off < 2; passive_off++) {
		struct log_lines l = { 0 };
		struct hlb_pool_backend *b;
		struct fixture f;

		passive_only_pool(&f, passive_off ? 3 : 1, 2000, &l);
		if (passive_off) { /* the same pool, passive off */
			hlb_pool_free(f.pool);
			f.cfg->services[0].health.passive = false;
			assert_int_equal(hlb_pool_new(f.cfg, f.loop, &f.env, &f.pool, NULL), 0);
			f.svc = hlb_pool_service_at(f.pool, 0);
		}
		b = f.svc->backends[0];
		forwarder_fails(&f, b, 50);
		tick_visits_over_ten_ticks(&f);
		assert_true(b->health.up);
		assert_int_equal(l.n, 0);
		fixture_teardown(&f);
	}
	(void)state;
}

/* <f>: passive_only_pool() of 3 backends, a hold of 100 ms, the config's damping half-life
 * (about 100 s); its b1, which served and failed twice just before, fails fall connects in a
 * row: held down, and for flapping. Returns b1. */
static struct hlb_pool_backend *held_for_flapping(struct fixture *f, struct log_lines *l)
{
	struct hlb_pool_backend *b;

	passive_only_pool(f, 3, 100, l);
	b = hlb_pool_backend_find(f->svc, "b1");
	loop_to_rest(f);
	b->health.assumed = false; /* seen up: a connect succeeded */
	b->health.penalty = 2.0; /* two flaps just before */
	b->health.penalty_ms = hlb_now_ms();
	forwarder_fails(f, b, 3);
	loop_until_health(f, b, false);
	assert_true(b->health.suppressed);
	return b;
}

/*
 * Passive-only health damps a flapping backend as checks do: its third down in a short while
 * holds it down past its hold, until its penalty decays. The ticks then let it up: before, they
 * stopped visiting the service once its hold was over, and it stayed down for good.
 */
static void test_passive_only_flapping_backend_comes_back(void **state)
{
	struct log_lines l = { 0 };
	struct hlb_pool_backend *b;
	struct fixture f;

	(void)state;
	b = held_for_flapping(&f, &l);
	/* the penalty decays in a test's time from now: a short half-life from the start let a
	 * slow loop (a loaded machine) see the penalty below the bar before the third down */
	f.svc->hp.half_life_ms = 200;
	loop_until_health(&f, b, true); /* hold over, penalty decayed: up */
	assert_false(b->health.suppressed);
	assert_non_null(strstr(l.text[l.n - 1], "msg=\"backend up\" service=web backend=b1"));
	fixture_teardown(&f);
}

/*
 * Passive-only health, a backend held down for flapping, its hold over, then an upgrade in
 * place: it stays out in the new process until its penalty decays. Before, the new process
 * started it up, its flapping forgotten, and it took clients again at once.
 */
static void test_handover_carries_passive_flap_damping(void **state)
{
	struct log_lines l = { 0 };
	struct hlb_buf o = { 0 };
	struct hlb_pool_backend *b;
	struct fixture old, f;

	(void)state;
	b = held_for_flapping(&old, &l);
	loop_until_hold_over(&old, b); /* its hold of 100 ms over: held for flapping alone */
	loop_ticks(&old, 2);
	assert_false(b->health.up);
	assert_true(b->health.raw_up);
	hlb_pool_handover(old.pool, &o);
	assert_non_null(o.p);
	assert_non_null(strstr(o.p, " held=yes "));
	fixture_teardown(&old);

	b = taker_with(&f, HASHLB_SCHEME_RING, passive_hold_200, o.p);
	assert_false(hlb_pool_backend_up(b));
	assert_false(atomic_load(&b->rt->healthy));
	assert_true(b->health.suppressed);
	assert_true(hlb_health_penalty(&b->health, &f.svc->hp, hlb_now_ms()) >= HLB_FLAP_REUSE);
	loop_until_hold_over(&f, b); /* past the hold of this config: still out, its penalty */
	loop_ticks(&f, 2); /* decaying */
	assert_false(hlb_pool_backend_up(b));
	fixture_teardown(&f);
	free(o.p);
}

/*
 * Passive-only health, a backend held down for flapping: maint then ready takes it back once its
 * hold is over, without waiting for the decay (about 100 s), as with checks on (docs/control.md,
 * "Flap damping"). Before, leaving maint forgot the damping of a checked backend only.
 */
static void test_passive_only_maint_then_ready_releases_a_flapping_backend(void **state)
{
	struct log_lines l = { 0 };
	struct hlb_pool_backend *b;
	struct fixture f;

	(void)state;
	b = held_for_flapping(&f, &l); /* the penalty decays in 100 s */
	assert_int_equal(hlb_pool_set_admin(b, HASHLB_ADMIN_MAINT), 0);
	assert_int_equal(hlb_pool_set_admin(b, HASHLB_ADMIN_READY), 0);
	assert_false(b->health.suppressed);
	assert_int_equal(b->health.flaps, 1); /* a counter: kept */
	loop_until_health(&f, b, true); /* its hold over: on trial */
	assert_true(b->health.trial);
	assert_string_equal(l.text[l.n - 1], "msg=\"backend up\" service=web backend=b1 "
					     "cause=hold_over flaps=1");
	fixture_teardown(&f);
	/* its hold over before it leaves maint, held by damping alone: released at the next
	 * tick, said as damping's end (docs/control.md, "Passive-only health") */
	l = (struct log_lines){ 0 };
	b = held_for_flapping(&f, &l);
	loop_until_hold_over(&f, b); /* held for flapping alone */
	assert_false(b->health.up);
	assert_int_equal(hlb_pool_set_admin(b, HASHLB_ADMIN_MAINT), 0);
	assert_int_equal(hlb_pool_set_admin(b, HASHLB_ADMIN_READY), 0);
	loop_until_health(&f, b, true);
	assert_string_equal(l.text[l.n - 1], "msg=\"backend up\" service=web backend=b1 "
					     "cause=damping flaps=1");
	fixture_teardown(&f);
}

/*
 * Passive-only health: a reload that keeps it keeps a backend held down for flapping past its
 * hold, as it keeps a hold (the backend is no more up than before); so does one that adds back
 * its service, which the reload before removed, taking the backend back (an orphan). Before,
 * the reload brought it up (cause=unchecked), its damping forgotten, as if its checks had been
 * turned off, and after it had been kept, taking the orphan back did still.
 */
static void test_passive_only_reload_keeps_flap_damping(void **state)
{
	for (int removed = 0; removed < 2; removed++) {
		struct log_lines l = { 0 };
		struct hashlb_config *next;
		struct hlb_pool_backend *b;
		struct fixture f;
		size_t n;

		b = held_for_flapping(&f, &l); /* the penalty decays in 100 s */
		loop_until_hold_over(&f, b); /* held for flapping alone */
		assert_false(b->health.up);
		if (removed)
			fixture_reload(&f, config_api()); /* web removed: its backends orphans */
		n = l.n;
		next = config_new(HASHLB_SCHEME_RING, 3);
		next->services[0].health.passive_hold_ms = 200;
		fixture_reload(&f, next);
		f.svc = hlb_pool_service_find(f.pool, "web"); /* added back: maybe a new one */
		assert_ptr_equal(hlb_pool_backend_find(f.svc, "b1"), b);
		loop_ticks(&f, 1);
		assert_false(b->health.up);
		assert_true(b->health.suppressed);
		assert_false(atomic_load(&b->rt->healthy));
		for (size_t i = n; i < l.n; i++) /* no up line */
			assert_null(strstr(l.text[i], "msg=\"backend up\""));
		fixture_teardown(&f);
	}
	(void)state;
}

/*
 * Passive-only health never holds out the last backend of a service that takes clients: with
 * every one of them dead at once, the last one left stays up, its failures counting for nothing,
 * so that the first to come back serves its clients at once rather than refuse all of them for
 * up to 8 holds (the rule that keeps a service's only backend up, and Envoy's ejection cap).
 * Once another takes clients again (its hold over), its failures count again.
 */
static void test_passive_only_keeps_the_last_backend_up(void **state)
{
	struct log_lines l = { 0 };
	struct hlb_pool_backend *a, *b;
	struct fixture f;

	(void)state;
	passive_only_pool(&f, 2, 60000, &l);
	a = f.svc->backends[0];
	b = f.svc->backends[1];
	loop_to_rest(&f);
	forwarder_fails(&f, a, 3);
	loop_until_health(&f, a, false);
	forwarder_fails(&f, b, 3);
	loop_ticks(&f, 1);
	assert_true(b->health.up); /* the last one up */
	forwarder_fails(&f, b, 10);
	loop_ticks(&f, 1);
	assert_true(b->health.up);
	a->health.hold_until_ms = f.svc->hold_next_ms = hlb_now_ms(); /* a's hold over */
	loop_until_health(&f, a, true); /* on trial */
	assert_true(b->health.up);
	forwarder_fails(&f, b, 13); /* three more: b down, a up */
	loop_until_health(&f, b, false);
	assert_true(a->health.up);
	fixture_teardown(&f);
}

/*
 * Passive-only health: held backends are released when an operator (drain, weight 0) or a
 * reload takes the last other one out: the one whose hold ends first is up on trial at once,
 * said cause=last_backend, and as the last it is held out by none of its failures; once
 * another takes clients, its next failure holds it for twice the hold before. Before, the rule
 * that keeps the last backend up prevented new holds only: those held stayed held until their
 * holds ended (up to 8 holds), and no backend took clients.
 */
static void test_passive_only_releases_a_held_backend_left_last(void **state)
{
	struct log_lines l = { 0 };
	struct hlb_pool_backend *b0, *b1, *b2;
	struct hashlb_config *next;
	struct fixture f;

	(void)state;
	passive_only_pool(&f, 3, 60000, &l);
	b0 = hlb_pool_backend_find(f.svc, "b0");
	b1 = hlb_pool_backend_find(f.svc, "b1");
	b2 = hlb_pool_backend_find(f.svc, "b2");
	loop_to_rest(&f);
	forwarder_fails(&f, b0, 3);
	loop_until_health(&f, b0, false);
	loop_for(&f, 20); /* b1's hold ends after b0's */
	forwarder_fails(&f, b1, 3);
	loop_until_health(&f, b1, false);
	assert_int_equal(hlb_pool_set_admin(b2, HASHLB_ADMIN_DRAIN), 0);
	loop_until_health(&f, b0, true); /* the first hold to end */
	assert_true(b0->health.trial);
	assert_false(b1->health.up);
	assert_string_equal(l.text[l.n - 1], "msg=\"backend up\" service=web backend=b0 "
					     "cause=last_backend flaps=0");
	hlb_pool_flush(f.pool);
	assert_false(hashlb_table_backend_down(hlb_pool_snapshot(f.svc)->table, 0));
	forwarder_fails(&f, b0, 5); /* the last: counted for nothing */
	loop_ticks(&f, 3);
	assert_true(b0->health.up);
	assert_int_equal(hlb_pool_set_admin(b2, HASHLB_ADMIN_READY), 0);
	forwarder_fails(&f, b0, 6); /* another takes clients: on trial, held at once, longer */
	loop_until_health(&f, b0, false);
	assert_int_equal(b0->health.hold_ms, 120000);

	/* weight 0 by hlb_pool_set_weight (ctl set): b1 released, its hold the first to end now */
	assert_int_equal(hlb_pool_set_weight(b2, 0), 0);
	loop_until_health(&f, b1, true);
	assert_false(b0->health.up);
	assert_int_equal(hlb_pool_set_weight(b2, 1), 0);
	forwarder_fails(&f, b1, 1); /* on trial: one failure holds it again */
	loop_until_health(&f, b1, false);

	/* a reload that drains b2: b0 released (both held for 120 s now, b0's since before) */
	next = config_new(HASHLB_SCHEME_RING, 3);
	next->services[0].health.passive_hold_ms = 60000;
	next->services[0].backends[2].admin = HASHLB_ADMIN_DRAIN;
	fixture_reload(&f, next);
	assert_int_equal(b2->admin, HASHLB_ADMIN_DRAIN);
	loop_until_health(&f, b0, true);
	assert_false(b1->health.up);
	assert_true(b2->health.up);
	fixture_teardown(&f);
}

/*
 * Passive-only health: the backend released as the last that could take clients has all its
 * flap damping forgotten, as on leaving maint, not only what held it. Held for its hold alone,
 * its penalty short of holding it for flapping (it flapped once before), then released, it
 * serves and goes down again: held for its hold, not for flapping. Before, the release forgot
 * the damping of one held for flapping only, this one kept its penalty, and that down held it
 * out for flapping for about 100 s.
 */
static void test_passive_only_release_forgets_all_damping(void **state)
{
	struct log_lines l = { 0 };
	struct hlb_pool_backend *b0, *b1;
	struct fixture f;

	(void)state;
	passive_only_pool(&f, 2, 60000, &l);
	b0 = hlb_pool_backend_find(f.svc, "b0");
	b1 = hlb_pool_backend_find(f.svc, "b1");
	loop_to_rest(&f);
	b0->health.assumed = false; /* seen up: a connect succeeded */
	b0->health.penalty = 1.0; /* a flap just before */
	b0->health.penalty_ms = hlb_now_ms();
	forwarder_fails(&f, b0, 3);
	loop_until_health(&f, b0, false);
	assert_false(b0->health.suppressed); /* held for its hold: a penalty of 2 */
	assert_int_equal(hlb_pool_set_admin(b1, HASHLB_ADMIN_DRAIN), 0);
	loop_until_health(&f, b0, true);
	assert_string_equal(l.text[l.n - 1], "msg=\"backend up\" service=web backend=b0 "
					     "cause=last_backend flaps=1");
	assert_int_equal(hlb_pool_set_admin(b1, HASHLB_ADMIN_READY), 0);
	atomic_fetch_add(&b0->rt->wstats[1].established, 1); /* a client served: trial over */
	forwarder_fails(&f, b0, 1);
	loop_ticks(&f, 1);
	assert_false(b0->health.trial);
	forwarder_fails(&f, b0, 3); /* fall in a row: a flap */
	loop_until_health(&f, b0, false);
	assert_int_equal(b0->health.flaps, 2);
	assert_false(b0->health.suppressed);
	assert_true(hlb_pool_backend_hold_left_ms(b0, hlb_now_ms()) > 0);
	fixture_teardown(&f);
}

/*
 * Passive-only health, no backend left taking clients: of those held, the one released is the
 * one the ticks would let up first, one held for flapping counting until its penalty decays.
 * Before, b1, held for flapping alone (its hold over, or carried over an upgrade with its
 * damping and no hold), had no hold end and went ahead of b0, whose hold ended in 30 s, though
 * its own damping had about 100 s to run: the flapping one took the clients.
 */
static void test_passive_only_release_prefers_the_soonest_back(void **state)
{
	for (int upgraded = 0; upgraded < 2; upgraded++) {
		struct log_lines l = { 0 };
		struct hlb_pool_backend *b0, *b1, *b2;
		struct hlb_buf o = { 0 };
		struct fixture f;

		b1 = held_for_flapping(&f, &l); /* the penalty decays in about 100 s */
		loop_until_hold_over(&f, b1); /* held for flapping alone */
		if (upgraded) {
			hlb_pool_handover(f.pool, &o);
			assert_non_null(o.p);
			fixture_teardown(&f);
			b1 = taker_with(&f, HASHLB_SCHEME_RING, passive_hold_200, o.p);
			assert_int_equal(b1->health.hold_until_ms, 0);
			loop_ticks(&f, 1); /* no rest: b1's damping keeps the ticks visiting */
		}
		assert_false(b1->health.up);
		assert_true(b1->health.suppressed);
		b0 = hlb_pool_backend_find(f.svc, "b0");
		b2 = hlb_pool_backend_find(f.svc, "b2");
		forwarder_fails(&f, b0, 3);
		loop_until_health(&f, b0, false);
		b0->health.hold_until_ms = hlb_now_ms() + 30000; /* its hold ends in 30 s */
		assert_int_equal(hlb_pool_set_admin(b2, HASHLB_ADMIN_DRAIN), 0);
		loop_until_health(&f, b0, true);
		assert_true(b0->health.trial);
		if (!upgraded)
			assert_string_equal(l.text[l.n - 1],
					    "msg=\"backend up\" service=web "
					    "backend=b0 cause=last_backend flaps=0");
		loop_ticks(&f, 2);
		assert_false(b1->health.up);
		assert_true(b1->health.suppressed);
		fixture_teardown(&f);
		free(o.p);
	}
	(void)state;
}

/*
 * Passive-only health: each hold is counted (hashlb_backend_passive_holds_total, /status
 * passive_holds) and its time left given (hashlb_backend_passive_hold_remaining_seconds,
 * /status hold_left_ms): 0 once over, or once a reload turned the checks on. Before, only the
 * log's down line said a backend was held, and for how long.
 */
static void test_passive_only_holds_counted_with_their_time_left(void **state)
{
	struct log_lines l = { 0 };
	struct hashlb_config *next;
	struct hlb_pool_backend *b;
	struct fixture f;
	uint64_t until;

	(void)state;
	b = on_trial(&f, &l); /* held once (100 ms), now on trial */
	assert_int_equal(b->passive_holds, 1);
	assert_int_equal(hlb_pool_backend_hold_left_ms(b, hlb_now_ms()), 0);
	forwarder_fails(&f, b, 1); /* on trial: held again, for 200 ms */
	loop_until_health(&f, b, false);
	assert_int_equal(b->passive_holds, 2);
	until = b->health.hold_until_ms;
	assert_int_equal(hlb_pool_backend_hold_left_ms(b, until - 150), 150);
	assert_int_equal(hlb_pool_backend_hold_left_ms(b, until), 0);
	assert_int_equal(hlb_pool_backend_hold_left_ms(hlb_pool_backend_find(f.svc, "b0"), until),
			 0);
	next = config_new(HASHLB_SCHEME_RING, 3); /* checks on: held no more */
	next->services[0].health.enabled = true;
	fixture_reload(&f, next);
	assert_int_equal(hlb_pool_backend_hold_left_ms(b, until - 150), 0);
	assert_int_equal(b->passive_holds, 2);
	fixture_teardown(&f);
}

/*
 * A backend on trial after its hold that serves a client is on trial no more: its next failed
 * connect is one of fall, not a new hold twice as long. A worker's successful connect resets
 * the run only when it is not 0 already, and on trial it is: before, the control thread never
 * saw the success, and the backend stayed on trial for good, the first refused connect hours
 * later holding it out at once, for the hold grown before, with no flap counted.
 */
static void test_passive_only_trial_ends_with_a_served_client(void **state)
{
	struct log_lines l = { 0 };
	struct hlb_pool_backend *b;
	struct fixture f;

	(void)state;
	b = on_trial(&f, &l);
	atomic_fetch_add(&b->rt->wstats[1].established, 1); /* a client served */
	forwarder_fails(&f, b, 1); /* then one refused: 1 of fall 3 */
	loop_ticks(&f, 1);
	assert_true(b->health.up);
	assert_false(b->health.trial);
	assert_int_equal(b->health.fail_run, 1);
	forwarder_fails(&f, b, 3); /* fall in a row: the first hold again, a flap */
	loop_until_health(&f, b, false);
	assert_int_equal(b->health.hold_ms, 100);
	assert_int_equal(b->health.flaps, 1);
	fixture_teardown(&f);
}

/*
 * Passive-only health: a backend drained in the middle of a run of failures, then set ready
 * again, is still watched by the ticks: a worker wakes the control thread only at a run's first
 * failure, and this run had begun. Before, the ticks had stopped visiting it while drained (it
 * took no client), and it stayed up for good once ready, every client of its refused.
 */
static void test_passive_only_run_goes_on_after_drain(void **state)
{
	struct log_lines l = { 0 };
	struct hlb_pool_backend *b;
	struct fixture f;

	(void)state;
	passive_only_pool(&f, 3, 60000, &l);
	b = hlb_pool_backend_find(f.svc, "b1");
	loop_to_rest(&f);
	forwarder_fails(&f, b, 2); /* 2 of fall 3 */
	loop_ticks(&f, 1);
	assert_int_equal(hlb_pool_set_admin(b, HASHLB_ADMIN_DRAIN), 0);
	loop_to_rest(&f); /* the ticks let the service be */
	assert_int_equal(hlb_pool_set_admin(b, HASHLB_ADMIN_READY), 0);
	/* the run goes on, and no wake: a worker wakes the control thread at a run's first */
	atomic_store(&b->rt->consecutive_fail, 5);
	loop_until_health(&f, b, false);
	assert_non_null(strstr(l.text[l.n - 1], "msg=\"backend down\" service=web backend=b1 "
						"cause=passive"));
	fixture_teardown(&f);
}

/*
 * Passive-only health: a backend set to weight 0 midway through a run of failures takes no
 * client, so its run cannot grow: the ticks stop visiting the service's backends (1,000 here),
 * and follow the run again once its weight is back. Before, they visited every backend at
 * every tick for as long as it stayed at weight 0, what test_idle_tick_visits_no_backend
 * guards against.
 */
static void test_passive_only_weight_0_run_not_followed(void **state)
{
	struct log_lines l = { 0 };
	struct hlb_pool_backend *b;
	struct fixture f;

	(void)state;
	passive_only_pool(&f, 1000, 60000, &l);
	b = hlb_pool_backend_find(f.svc, "b5");
	tick_visits_over_ten_ticks(&f); /* the first ticks see every backend */
	forwarder_fails(&f, b, 2); /* 2 of fall 3 */
	loop_ticks(&f, 1);
	assert_int_equal(hlb_pool_set_weight(b, 0), 0);
	tick_visits_over_ten_ticks(&f); /* the one after the change */
	assert_int_equal(tick_visits_over_ten_ticks(&f), 0);
	assert_int_equal(hlb_pool_set_weight(b, 1), 0);
	atomic_store(&b->rt->consecutive_fail, 3); /* no wake: the run's first was before */
	loop_until_health(&f, b, false);
	fixture_teardown(&f);
}

/* A checked pool whose checks the test makes (logged into <l>), and its backend b1. */
static struct hlb_pool_backend *passive_pool(struct fixture *f, struct log_lines *l)
{
	checked_pool(f, 3, log_capture, l);
	for (uint32_t i = 0; i < f->svc->n_backends; i++)
		hlb_check_stop(&f->svc->backends[i]->check);
	return hlb_pool_backend_find(f->svc, "b1");
}

/* Run the pool's loop until its tick has read the forwarder's failures: <n> lines logged. */
static void tick_until_logged(struct fixture *f, struct log_lines *l, uint32_t n)
{
	for (int i = 0; i < 100 && l->n < n; i++)
		hlb_loop_run_once(f->loop, 20);
	assert_int_equal(l->n, n);
}

/*
 * A backend whose checks were failing (ECONNREFUSED) while it stayed up, taken down by the
 * forwarder's failed connects (cause=passive): its next check failing the same way is no
 * "another error" (it was, was="none"), and one failing otherwise names ECONNREFUSED as the
 * error before it. The "backend down" line itself names no check's error.
 */
static void test_passive_down_keeps_the_checks_error(void **state)
{
	struct hlb_pool_backend *b;
	struct log_lines l = { 0 };
	struct fixture f;
	struct hlb_check *c;

	b = passive_pool(&f, &l);
	c = &b->check;
	for (int i = 0; i < 2; i++) { /* fall is 3: still up */
		c->failed_at = HLB_CHECK_AT_CONNECT, c->failed_err = ECONNREFUSED;
		c->done(c->arg, false, 0);
	}
	assert_int_equal(l.n, 2);
	assert_non_null(strstr(l.text[1], "msg=\"health check failed, backend still up\" "
					  "service=web backend=b1 at=connect err=ECONNREFUSED "
					  "failed=2 fall=3"));
	atomic_store(&b->rt->consecutive_fail, 1); /* a connect of the forwarder failed */
	tick_until_logged(&f, &l, 3);
	assert_string_equal(l.text[2], "msg=\"backend down\" service=web backend=b1 "
				       "cause=passive flaps=0");
	c->failed_at = HLB_CHECK_AT_CONNECT, c->failed_err = ECONNREFUSED;
	c->done(c->arg, false, 0);
	assert_int_equal(l.n, 3);
	c->failed_at = HLB_CHECK_AT_CONNECT, c->failed_err = ETIMEDOUT;
	c->done(c->arg, false, 0);
	assert_int_equal(l.n, 4);
	assert_string_equal(l.text[3], "msg=\"health checks still failing, another error\" "
				       "service=web backend=b1 at=connect err=ETIMEDOUT "
				       "was=\"at=connect err=ECONNREFUSED\" changes=1");
	fixture_teardown(&f);
}

/*
 * A backend taken down by the forwarder's failed connects, the error of the last one known
 * (ECONNREFUSED): the down line gives it as a check's, and a check refused next is no
 * "another error". Before, the line gave none, and that check's line said was="none".
 */
static void test_passive_down_says_the_connect_error(void **state)
{
	struct hlb_pool_backend *b;
	struct log_lines l = { 0 };
	struct fixture f;
	struct hlb_check *c;

	b = passive_pool(&f, &l);
	c = &b->check;
	atomic_store(&b->rt->connect_err, ECONNREFUSED);
	atomic_store(&b->rt->consecutive_fail, 3); /* fall: 3 connects of the forwarder failed */
	tick_until_logged(&f, &l, 1);
	assert_string_equal(l.text[0], "msg=\"backend down\" service=web backend=b1 "
				       "cause=passive flaps=0 at=connect err=ECONNREFUSED");
	c->failed_at = HLB_CHECK_AT_CONNECT, c->failed_err = ECONNREFUSED;
	c->done(c->arg, false, 0);
	assert_int_equal(l.n, 1);
	fixture_teardown(&f);
}

/* health.passive: false with checks on: the forwarder's failed connects count toward no fall,
 * the checks alone take a backend down. */
static void test_passive_off_with_checks_counts_no_connect(void **state)
{
	struct hlb_pool_backend *b;
	struct log_lines l = { 0 };
	struct fixture f;

	(void)state;
	b = passive_pool(&f, &l);
	f.cfg->services[0].health.passive = false; /* read at each tick */
	forwarder_fails(&f, b, 50);
	tick_visits_over_ten_ticks(&f);
	assert_true(b->health.up);
	assert_int_equal(l.n, 0);
	backend_fail(b); /* fall checks */
	assert_false(b->health.up);
	fixture_teardown(&f);
}

/* Counts the "another error" lines; keeps the last. */
struct err_lines {
	uint32_t n;
	char last[256];
};

static void err_capture(void *arg, enum hlb_log_level level, const char *msg, const char *kv)
{
	struct err_lines *l = arg;

	(void)level;
	if (!strstr(msg, "another error"))
		return;
	l->n++;
	snprintf(l->last, sizeof(l->last), "msg=\"%s\" %s", msg, kv);
}

/*
 * 30 backends down (refused), whose errors all change at once (their host gone): each would
 * log its change (the bound is per backend), thousands a second with thousands of backends.
 * The pool logs HLB_CHECK_ERRS_PER_S of them a second; the next line, a second on, says how
 * many were not. The pool's second begins at its first such line: changes made within one
 * second of the first check's result all fall in it. A machine that did not schedule the
 * test for a second of those spread them over two, in which more are logged, rightly: the
 * pool is set up again for another try, up to 10.
 */
static void test_error_lines_are_bounded_for_the_pool(void **state)
{
	enum { N = 30 };
	struct err_lines l;
	struct fixture f;
	struct hlb_check *c[N];
	uint64_t t0 = 0;

	for (int try = 0; try < 10; try++) {
		if (try)
			fixture_teardown(&f);
		l = (struct err_lines){ 0 };
		checked_pool(&f, N, err_capture, &l);
		f.svc->hp.fall =
			1; /* no "backend still up" lines first: they spend the same budget */
		t0 = hlb_now_ms();
		for (uint32_t i = 0; i < N; i++) {
			char name[16];

			snprintf(name, sizeof(name), "b%u", i);
			c[i] = &hlb_pool_backend_find(f.svc, name)->check;
			for (int k = 0; k < 3; k++) { /* fall: 3 refused */
				c[i]->failed_at = HLB_CHECK_AT_CONNECT,
				c[i]->failed_err = ECONNREFUSED;
				c[i]->done(c[i]->arg, false, 0);
			}
		}
		assert_int_equal(l.n, 0);
		for (uint32_t i = 0; i < N; i++) { /* each: no answer to the SYN now */
			c[i]->failed_at = HLB_CHECK_AT_CONNECT, c[i]->failed_err = ETIMEDOUT;
			c[i]->done(c[i]->arg, false, 0);
		}
		if (hlb_now_ms() - t0 < 1000)
			break;
	}
	assert_true(hlb_now_ms() - t0 < 1000);
	assert_int_equal(l.n, HLB_CHECK_ERRS_PER_S);
	usleep(1100000); /* the next second */
	c[0]->failed_at = HLB_CHECK_AT_REPLY, c[0]->failed_err = EBADMSG;
	c[0]->done(c[0]->arg, false, 0);
	assert_int_equal(l.n, HLB_CHECK_ERRS_PER_S + 1);
	assert_non_null(strstr(l.last, "backend=b0 at=reply err=EBADMSG"));
	assert_non_null(strstr(l.last, " unlogged=20"));
	fixture_teardown(&f);
}

/*
 * Checks failing while the backend stays up (fewer than fall in a row) are logged, each with
 * the run toward fall, and the passed check that ends the run says so: before, nothing was,
 * and a backend failing one check in three was seen in no line until it went down.
 */
static void test_checks_failing_while_up_are_logged(void **state)
{
	struct log_lines l = { 0 };
	struct fixture f;
	struct hlb_check *c;

	checked_pool(&f, 3, log_capture, &l); /* fall 3 */
	c = &hlb_pool_backend_find(f.svc, "b1")->check;
	c->done(c->arg, true, 0); /* passes: nothing */
	for (int i = 0; i < 2; i++) {
		c->failed_at = HLB_CHECK_AT_CONNECT, c->failed_err = ECONNREFUSED;
		c->done(c->arg, false, 0);
	}
	c->done(c->arg, true, 0);
	c->done(c->arg, true, 0); /* the run ended: nothing more */
	assert_int_equal(l.n, 3);
	assert_string_equal(l.text[0], "msg=\"health check failed, backend still up\" service=web "
				       "backend=b1 at=connect err=ECONNREFUSED failed=1 fall=3");
	assert_string_equal(l.text[1], "msg=\"health check failed, backend still up\" service=web "
				       "backend=b1 at=connect err=ECONNREFUSED failed=2 fall=3");
	assert_string_equal(l.text[2], "msg=\"health check passed, backend stayed up\" service=web "
				       "backend=b1 failed=2 fall=3");
	assert_true(hlb_pool_backend_up(hlb_pool_backend_find(f.svc, "b1")));
	fixture_teardown(&f);
}

/* The "service totals" lines of a pool, for the tests that read them. */
static void totals_capture(void *arg, enum hlb_log_level level, const char *msg, const char *kv)
{
	if (strcmp(msg, "service totals") == 0)
		log_capture(arg, level, msg, kv);
}

static void drain_capture(void *arg, enum hlb_log_level level, const char *msg, const char *kv)
{
	if (strstr(msg, "drain") || strcmp(msg, "service totals") == 0)
		log_capture(arg, level, msg, kv);
}

/* Run <f>'s loop for <ticks> pool ticks at least. */
static void run_ticks(struct fixture *f, uint32_t ticks)
{
	uint64_t until = hlb_now_ms() + ticks * HLB_POOL_TICK_MS;

	while (hlb_now_ms() < until)
		hlb_loop_run_once(f->loop, 10);
}

/* Whether one of <l>'s lines has <a> and <b>. */
static bool logged(const struct log_lines *l, const char *a, const char *b)
{
	for (uint32_t i = 0; i < l->n && i < 16; i++)
		if (strstr(l->text[i], a) && strstr(l->text[i], b))
			return true;
	return false;
}

/*
 * timeouts.drain: never. A backend a reload removes while it holds a connection drains with
 * no deadline: ticks later it still drains, its connection not closed, a stop's drain left
 * never, each line saying drain_timeout_ms=never (not a deadline overflowed to a number).
 * Once its last connection ends it is drained, its deadline that moment: not kept for good,
 * nor taken back by a reload. A service removed so keeps its counters while a connection
 * holds it, and logs its totals once let go, not at a deadline never reached.
 */
static void test_drain_never_lasts_until_the_connections_end(void **state)
{
	struct log_lines l = { 0 };
	struct hashlb_config *next;
	struct hlb_backend *b3, *b1;
	struct hlb_service *web;
	struct fixture f;
	uint32_t gen;
	uint64_t until;

	(void)state;
	memset(&f, 0, sizeof(f));
	f.cfg = config_new(HASHLB_SCHEME_MAGLEV, 4);
	f.cfg->services[0].drain_timeout_ms = HASHLB_DRAIN_NEVER;
	assert_int_equal(hlb_loop_new(&f.loop), 0);
	assert_int_equal(hlb_rcu_new(0, &f.rcu), 0);
	f.env = (struct hlb_pool_env){
		.n_workers = 2, .rcu = f.rcu, .log = drain_capture, .arg = &l
	};
	assert_int_equal(hlb_pool_new(f.cfg, f.loop, &f.env, &f.pool, NULL), 0);
	f.svc = hlb_pool_service_at(f.pool, 0);
	b3 = hlb_backend_ref(hlb_pool_backend_find(f.svc, "b3")->rt); /* its connection's */
	atomic_store(&b3->claimed, 1);
	gen = atomic_load(&b3->close_gen);

	next = config_new(HASHLB_SCHEME_MAGLEV, 3); /* b3 removed */
	next->services[0].drain_timeout_ms = HASHLB_DRAIN_NEVER;
	fixture_reload(&f, next);
	assert_int_equal(f.svc->n_removed, 1);
	assert_int_equal(atomic_load(&b3->drain_until_ms), UINT64_MAX);
	assert_true(logged(&l, "backend removed or moved", "backend=b3 "));
	assert_true(logged(&l, "backend removed or moved", "drain_timeout_ms=never"));
	run_ticks(&f, 4);
	assert_int_equal(f.svc->n_removed, 1); /* still draining, nothing closed */
	assert_int_equal(atomic_load(&b3->close_gen), gen);
	assert_int_equal(hlb_pool_drain_left_ms(f.pool), HASHLB_DRAIN_NEVER);
	hlb_pool_log_draining(f.pool);
	assert_true(logged(&l, "service draining",
			   "backend=b3 removed=1 connections=1 drain_timeout_ms=never"));

	atomic_store(&b3->claimed, 0); /* its client closed */
	run_ticks(&f, 4);
	assert_int_equal(f.svc->n_removed, 0);
	until = atomic_load(&b3->drain_until_ms);
	assert_true(until != 0 && until <= hlb_now_ms());
	assert_int_equal(hlb_pool_drain_left_ms(f.pool), 0);
	assert_int_equal(atomic_load(&b3->close_gen), gen);
	next = config_new(HASHLB_SCHEME_MAGLEV, 4); /* b3 back: a new one, its drain over */
	next->services[0].drain_timeout_ms = HASHLB_DRAIN_NEVER;
	fixture_reload(&f, next);
	assert_ptr_not_equal(hlb_pool_backend_find(f.svc, "b3")->rt, b3);
	hlb_backend_unref(b3);

	/* the service removed, a connection of it to b1 open */
	web = hlb_service_ref(f.svc->rt);
	atomic_store(&web->active, 1);
	b1 = hlb_backend_ref(hlb_pool_backend_find(f.svc, "b1")->rt);
	atomic_store(&b1->claimed, 1);
	fixture_reload(&f, config_api());
	assert_true(logged(&l, "service removed: its connections drain",
			   "service=web connections=1 drain_timeout_ms=never"));
	assert_int_equal(atomic_load(&b1->drain_until_ms), UINT64_MAX);
	run_ticks(&f, 4);
	assert_false(logged(&l, "service totals", "service=web"));
	assert_int_equal(hlb_pool_drain_left_ms(f.pool), HASHLB_DRAIN_NEVER);
	hlb_pool_log_draining(f.pool);
	assert_true(logged(&l, "service draining",
			   "service=web removed=1 connections=1 drain_timeout_ms=never"));
	atomic_store(&b1->claimed, 0); /* its client closed, the connection freed */
	atomic_store(&web->active, 0);
	hlb_backend_unref(b1);
	hlb_service_unref(web);
	until = hlb_now_ms() + 10000; /* a bound, not a threshold: the next tick does it */
	while (!logged(&l, "service totals", "service=web") && hlb_now_ms() < until)
		hlb_loop_run_once(f.loop, 10);
	assert_true(logged(&l, "service totals", "service=web removed=1"));
	assert_int_equal(hlb_pool_drain_left_ms(f.pool), 0);
	fixture_teardown(&f);
}

/*
 * A service a reload removes logs its totals once nothing can count for it any more: not while
 * a worker still holds it (its listener, whose backlog the worker serves when it reads the
 * removal, after the reload), though no connection of it is open. "api", held by nothing, logs
 * at the next tick; "web", held as a worker's listener holds it, logs once let go, with the
 * client that worker served from the backlog meanwhile. Before, "web" logged at that tick too,
 * lookups=0 connections=0, and the client it served after was counted nowhere.
 */
static void test_a_removed_service_logs_its_totals_once_let_go(void **state)
{
	struct log_lines l = { 0 };
	struct hashlb_config *next;
	struct hlb_service *web;
	struct fixture f;

	(void)state;
	memset(&f, 0, sizeof(f));
	f.cfg = config_new(HASHLB_SCHEME_MAGLEV, 3);
	add_api(f.cfg);
	for (uint32_t i = 0; i < f.cfg->n_services; i++) {
		f.cfg->services[i].health.enabled = false;
		/* no drain timeout for a reload to take their backends back in: the totals wait
		 * for it too (removed_service_undone_keeps_what_was_set_at_run_time) */
		f.cfg->services[i].drain_timeout_ms = 0;
	}
	assert_int_equal(hlb_loop_new(&f.loop), 0);
	assert_int_equal(hlb_rcu_new(0, &f.rcu), 0);
	f.env = (struct hlb_pool_env){
		.n_workers = 2, .rcu = f.rcu, .log = totals_capture, .arg = &l
	};
	assert_int_equal(hlb_pool_new(f.cfg, f.loop, &f.env, &f.pool, NULL), 0);
	web = hlb_service_ref(hlb_pool_service_find(f.pool, "web")->rt); /* a worker's listener */
	next = config_new(HASHLB_SCHEME_MAGLEV, 3);
	free(next->services[0].name);
	next->services[0].name = strdup("new");
	fixture_reload(&f, next);
	while (l.n == 0)
		hlb_loop_run_once(f.loop, 10);
	assert_int_equal(l.n, 1);
	assert_non_null(strstr(l.text[0], "service=api removed=1 lookups=0 connections=0"));
	/* the worker reads the removal: a client from the backlog served, the listener let go */
	atomic_fetch_add(&web->wstats[1].lookups, 1);
	atomic_fetch_add(&web->wstats[1].total, 1);
	hlb_service_unref(web);
	while (l.n == 1)
		hlb_loop_run_once(f.loop, 10);
	assert_int_equal(l.n, 2);
	assert_non_null(strstr(l.text[1], "service=web removed=1 lookups=1 connections=1"));
	fixture_teardown(&f);
}

/*
 * web removed (no drain timeout) and its runtime object still held past it (a connection
 * closing), added back as a new one, removed again within its drain timeout and added back:
 * the service added back is the one removed last, whose orphans it takes back. Before, the
 * first retired entry of the name was taken whenever orphans of that name were left, the
 * older one's included: web came back as the object removed first, its connections counted
 * in another, its queue kicked by none of their slots.
 */
static void test_service_added_back_is_the_one_removed_last(void **state)
{
	struct fixture f;
	struct hlb_service *first, *second;
	uint64_t until;

	(void)state;
	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 4);
	first = hlb_service_ref(f.svc->rt); /* a connection that outlives its drain */
	f.cfg->services[0].drain_timeout_ms = 0;
	fixture_reload(&f, config_api()); /* web removed: its orphans' deadline now */
	until = hlb_now_ms() + 3 * HLB_POOL_TICK_MS;
	while (hlb_now_ms() < until) /* the ticks that drop them */
		hlb_loop_run_once(f.loop, 10);
	hlb_loop_run_once(f.loop, 0);

	fixture_reload(&f, config_new(HASHLB_SCHEME_MAGLEV, 4)); /* web again, api removed */
	second = hlb_pool_service_find(f.pool, "web")->rt;
	assert_ptr_not_equal(second, first); /* past its drain, its orphans gone: a new one */
	fixture_reload(&f, config_api()); /* web removed again, within its drain timeout */
	fixture_reload(&f, config_new(HASHLB_SCHEME_MAGLEV, 4));
	assert_ptr_equal(hlb_pool_service_find(f.pool, "web")->rt, second);
	assert_true(atomic_load(&first->removed));
	hlb_service_unref(first);
	fixture_teardown(&f);
}

/*
 * A run of checks failed while up that its checks stop before ending (no verdict) ends in one
 * line saying why: a reload removing the backend or turning checks off (reason=reload), maint
 * (reason=maint). A reload that only restarts the checks (a new interval) does not end it:
 * its failures still count toward fall. Before, none of these ended in the log: the runs
 * stayed open there for good.
 */
static void test_a_run_its_checks_stop_is_ended_in_the_log(void **state)
{
	struct log_lines l = { 0 };
	struct hashlb_config *next;
	struct fixture f;

	checked_pool(&f, 4, log_capture, &l); /* fall 3 */
	for (uint32_t i = 0; i < 4; i++) {
		char name[16];
		struct hlb_check *c;

		snprintf(name, sizeof(name), "b%u", i);
		c = &hlb_pool_backend_find(f.svc, name)->check;
		c->failed_at = HLB_CHECK_AT_CONNECT, c->failed_err = ECONNREFUSED;
		c->done(c->arg, false, 0);
	}
	assert_int_equal(l.n, 4);
	next = config_new(HASHLB_SCHEME_MAGLEV, 4);
	checks_on(next);
	next->services[0].health.interval_ms = 3000; /* the checks restart: the runs go on */
	fixture_reload(&f, next);
	assert_int_equal(l.n, 4);
	next = config_new(HASHLB_SCHEME_MAGLEV, 3); /* b3 removed */
	checks_on(next);
	fixture_reload(&f, next);
	assert_int_equal(l.n, 5);
	assert_string_equal(l.text[4], "msg=\"health check run ended\" service=web backend=b3 "
				       "reason=reload failed=1 fall=3");
	assert_int_equal(hlb_pool_set_admin(hlb_pool_backend_find(f.svc, "b2"), HASHLB_ADMIN_MAINT),
			 0);
	assert_int_equal(l.n, 6);
	assert_string_equal(l.text[5], "msg=\"health check run ended\" service=web backend=b2 "
				       "reason=maint failed=1 fall=3");
	fixture_reload(&f, config_new(HASHLB_SCHEME_MAGLEV, 3)); /* checks off */
	assert_int_equal(l.n, 8);
	assert_string_equal(l.text[6], "msg=\"health check run ended\" service=web backend=b0 "
				       "reason=reload failed=1 fall=3");
	assert_string_equal(l.text[7], "msg=\"health check run ended\" service=web backend=b1 "
				       "reason=reload failed=1 fall=3");
	hlb_pool_stop_checks(f.pool); /* every run ended already: nothing more */
	assert_int_equal(l.n, 8);
	fixture_teardown(&f);
}

/* Counts the lines of checks failing while up and of their runs' ends; keeps the first end. */
struct up_lines {
	uint32_t failed, passed;
	char first_end[256];
};

static void up_capture(void *arg, enum hlb_log_level level, const char *msg, const char *kv)
{
	struct up_lines *l = arg;

	(void)level;
	if (!strcmp(msg, "health check failed, backend still up"))
		l->failed++;
	if (strcmp(msg, "health check passed, backend stayed up"))
		return;
	if (!l->passed++)
		snprintf(l->first_end, sizeof(l->first_end), "msg=\"%s\" %s", msg, kv);
}

/*
 * 30 backends each failing one check at once (a switch hiccups): the pool logs
 * HLB_CHECK_ERRS_PER_S of them, and as they pass again, the end of each run it logged, over
 * the budget if it must (no run is left open in the log), the first saying how many lines
 * were not logged; the runs it did not log end unlogged too.
 */
static void test_checks_failing_while_up_are_bounded_for_the_pool(void **state)
{
	enum { N = 30 };
	struct up_lines l = { 0 };
	struct fixture f;
	struct hlb_check *c[N];

	checked_pool(&f, N, up_capture, &l);
	for (uint32_t i = 0; i < N; i++) {
		char name[16];

		snprintf(name, sizeof(name), "b%u", i);
		c[i] = &hlb_pool_backend_find(f.svc, name)->check;
		c[i]->failed_at = HLB_CHECK_AT_CONNECT, c[i]->failed_err = ETIMEDOUT;
		c[i]->done(c[i]->arg, false, 0);
	}
	assert_int_equal(l.failed, HLB_CHECK_ERRS_PER_S);
	for (uint32_t i = 0; i < N; i++)
		c[i]->done(c[i]->arg, true, 0);
	assert_int_equal(l.passed, HLB_CHECK_ERRS_PER_S);
	assert_string_equal(l.first_end, "msg=\"health check passed, backend stayed up\" "
					 "service=web backend=b0 failed=1 fall=3 unlogged=20");
	fixture_teardown(&f);
}

/* <c>'s backend b3 (config_new()) at 127.0.0.1:10, not :9. */
static struct hashlb_config *b3_moved(struct hashlb_config *c)
{
	struct hashlb_backend_cfg *b = &c->services[0].backends[3];

	free(b->address);
	b->address = strdup("127.0.0.1:10");
	((struct sockaddr_in *)&b->addr)->sin_port = htons(10);
	return c;
}

/* The fixture's config of 4 backends without b3: b3 removed. */
static struct hashlb_config *config_no_b3(void)
{
	return config_new(HASHLB_SCHEME_MAGLEV, 3);
}

static struct hlb_backend *web_b3(struct fixture *f)
{
	return hlb_pool_backend_find(hlb_pool_service_find(f->pool, "web"), "b3")->rt;
}

/*
 * b3 removed by <removal>'s config, added at another address and removed again, all within
 * the drain timeout: added back at its first address, it is the one removed there (its
 * connections and run-time settings with it), though its name stands twice among those
 * removed, which a binary search finds either of.
 */
static void added_back_at_its_address(struct hashlb_config *(*removal)(void))
{
	struct hlb_backend *at_9;
	struct fixture f;

	fixture_setup(&f, HASHLB_SCHEME_MAGLEV, 4);
	at_9 = web_b3(&f);
	fixture_reload(&f, removal());
	fixture_reload(&f, b3_moved(config_new(HASHLB_SCHEME_MAGLEV, 4)));
	assert_ptr_not_equal(web_b3(&f), at_9);
	fixture_reload(&f, removal());
	fixture_reload(&f, config_new(HASHLB_SCHEME_MAGLEV, 4));
	assert_ptr_equal(web_b3(&f), at_9);
	fixture_teardown(&f);
}

/* b3 removed from web: service_gone_find() reads each removed b3. */
static void test_backend_added_back_is_the_one_at_its_address(void **state)
{
	(void)state;
	added_back_at_its_address(config_no_b3);
}

/* web removed (b3 at :9 left an orphan when web came back with b3 at :10): orphan_find()
 * reads each of web's b3 among the orphans. */
static void test_orphan_taken_back_is_the_one_at_its_address(void **state)
{
	(void)state;
	added_back_at_its_address(config_api);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_down_moves_only_its_clients_maglev),
		cmocka_unit_test(test_down_moves_only_its_clients_ring),
		cmocka_unit_test(test_burst_coalesces_into_one_build),
		cmocka_unit_test(test_failing_word_builds_the_retry_table_at_once),
		cmocka_unit_test(test_failed_check_prepares_the_verdicts_table),
		cmocka_unit_test(test_passed_check_drops_the_prepared_table),
		cmocka_unit_test(test_full_build_drops_a_passed_checks_mark),
		cmocka_unit_test(test_prepared_table_beside_a_backend_down_builds_the_same),
		cmocka_unit_test(test_failed_check_of_a_flap_builds_nothing),
		cmocka_unit_test(test_failed_check_beside_another_builds_nothing),
		cmocka_unit_test(test_a_stream_of_changes_is_spaced_out),
		cmocka_unit_test(test_drain_and_maint_take_no_new_clients),
		cmocka_unit_test(test_weight_change_rebuilds_in_full),
		cmocka_unit_test(test_slow_start_ramps_admission),
		cmocka_unit_test(test_slow_start_admits_a_stable_fraction),
		cmocka_unit_test(test_bounded_load_cap),
		cmocka_unit_test(test_balance_order_skips_a_hot_backend),
		cmocka_unit_test(test_reload_applies_the_difference),
		cmocka_unit_test(test_weights_after_a_service_added_back_are_those_it_serves_with),
		cmocka_unit_test(test_reload_weights_past_table_memory_say_where),
		cmocka_unit_test(test_metrics_steer_every_counter),
		cmocka_unit_test(test_drained_backends_keep_their_counts),
		cmocka_unit_test(test_drained_backends_keep_their_carried_counts),
		cmocka_unit_test(test_reload_turning_checks_off_revives_down_backends),
		cmocka_unit_test(test_reload_matches_many_backends_by_name),
		cmocka_unit_test(test_handover_of_many_backends),
		cmocka_unit_test(test_handover_carries_flap_damping),
		cmocka_unit_test(test_handover_carries_totals),
		cmocka_unit_test(test_added_back_service_keeps_its_carried_totals),
		cmocka_unit_test(test_handover_totals_widest_lines),
		cmocka_unit_test(test_handover_totals_hostile_lines),
		cmocka_unit_test(test_handover_carries_up_only_assumed),
		cmocka_unit_test(test_handover_seen_up_is_of_the_backends_the_old_one_had),
		cmocka_unit_test(test_handover_health_is_of_the_address),
		cmocka_unit_test(test_handover_health_is_of_the_endpoint_connected_to),
		cmocka_unit_test(test_handover_seen_up_is_of_the_endpoint_connected_to),
		cmocka_unit_test(test_handover_carries_passive_hold),
		cmocka_unit_test(test_handover_carries_passive_hold_through_maint),
		cmocka_unit_test(test_handover_carries_passive_flap_damping),
		cmocka_unit_test(test_maint_then_ready_releases_a_flapping_backend),
		cmocka_unit_test(test_handover_carries_slow_start),
		cmocka_unit_test(test_reload_switches_log_connections),
		cmocka_unit_test(test_close_on_down_after_a_grace_period),
		cmocka_unit_test(test_passive_only_holds_a_failing_backend),
		cmocka_unit_test(test_passive_only_holds_no_lone_backend_nor_with_passive_off),
		cmocka_unit_test(test_passive_only_flapping_backend_comes_back),
		cmocka_unit_test(test_passive_only_trial_ends_with_a_served_client),
		cmocka_unit_test(test_passive_only_run_goes_on_after_drain),
		cmocka_unit_test(test_passive_only_reload_keeps_flap_damping),
		cmocka_unit_test(test_passive_only_weight_0_run_not_followed),
		cmocka_unit_test(test_passive_only_keeps_the_last_backend_up),
		cmocka_unit_test(test_passive_only_release_forgets_all_damping),
		cmocka_unit_test(test_passive_only_release_prefers_the_soonest_back),
		cmocka_unit_test(test_passive_only_holds_counted_with_their_time_left),
		cmocka_unit_test(test_passive_only_releases_a_held_backend_left_last),
		cmocka_unit_test(test_passive_only_maint_then_ready_releases_a_flapping_backend),
		cmocka_unit_test(test_passive_only_hold_across_reloads),
		cmocka_unit_test(test_passive_only_reload_off_ends_trial),
		cmocka_unit_test(test_passive_off_with_checks_counts_no_connect),
		cmocka_unit_test(
			test_reload_renaming_an_address_frees_the_old_name_after_a_grace_period),
		cmocka_unit_test(test_backup_close_on_return),
		cmocka_unit_test(test_leaving_maint_spreads_the_checks),
		cmocka_unit_test(test_reload_spreads_the_checks_as_at_start),
		cmocka_unit_test(test_check_errors_are_logged_once_per_change),
		cmocka_unit_test(test_handover_says_what_it_carried),
		cmocka_unit_test(test_handover_weights_bounded_by_table_memory),
		cmocka_unit_test(test_passive_down_keeps_the_checks_error),
		cmocka_unit_test(test_passive_down_says_the_connect_error),
		cmocka_unit_test(test_error_lines_are_bounded_for_the_pool),
		cmocka_unit_test(test_checks_failing_while_up_are_logged),
		cmocka_unit_test(test_checks_failing_while_up_are_bounded_for_the_pool),
		cmocka_unit_test(test_a_run_its_checks_stop_is_ended_in_the_log),
		cmocka_unit_test(test_a_removed_service_logs_its_totals_once_let_go),
		cmocka_unit_test(test_idle_tick_visits_no_backend),
		cmocka_unit_test(test_failing_backend_tick_visits_no_backend),
		cmocka_unit_test(test_checks_turned_on_count_no_failure_from_before),
		cmocka_unit_test(test_checks_turned_off_up_is_only_assumed),
		cmocka_unit_test(test_reload_short_of_memory_changes_nothing),
		cmocka_unit_test(test_reload_short_of_any_allocation_changes_nothing),
		cmocka_unit_test(
			test_reload_removing_a_service_short_of_any_allocation_changes_nothing),
		cmocka_unit_test(
			test_reload_adding_back_a_service_short_of_any_allocation_changes_nothing),
		cmocka_unit_test(
			test_added_back_service_is_not_removed_when_its_snapshot_is_published),
		cmocka_unit_test(test_orphan_not_taken_back_drains_as_a_removed_backend),
		cmocka_unit_test(test_removed_backend_drain_deadline_seen_by_the_workers),
		cmocka_unit_test(test_drain_never_lasts_until_the_connections_end),
		cmocka_unit_test(test_reload_adding_back_a_service_that_fails_keeps_what_was_set),
		cmocka_unit_test(test_service_added_back_is_the_one_removed_last),
		cmocka_unit_test(test_backend_added_back_is_the_one_at_its_address),
		cmocka_unit_test(test_orphan_taken_back_is_the_one_at_its_address),
		cmocka_unit_test(test_reload_says_what_the_tables_in_use_moved),
		cmocka_unit_test(test_reload_says_nothing_of_a_build_it_did_not_ask),
		cmocka_unit_test(test_reload_moved_lines_are_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
