/* Proves hashlb_table_rebuild(): after any change of weights, membership, order or down set, the
 * table is bit-identical to a fresh build, and its errors are the build's. */
// SPDX-License-Identifier: MIT
#include <errno.h>

#include "helpers.h"

#define UNIVERSE 48

/* Names short (hashed in registers) and long (XXH64 over a buffer), as users write them. */
static void universe_name(char *buf, size_t len, uint32_t i)
{
	if (i % 3 == 2)
		snprintf(buf, len, "a-rather-long-backend-name-in-rack-%u", i);
	else
		snprintf(buf, len, "be-%u", i);
}

struct pool {
	char names[UNIVERSE][64];
	struct hashlb_backend_spec spec[UNIVERSE];
	size_t n;
};

/* <t> and <u> are the same table: fingerprint, arrays, backends by index. */
static void assert_same_table(const struct hashlb_table *t, const struct hashlb_table *u)
{
	struct hashlb_table_view a, b;
	uint64_t ks = 77;

	assert_int_equal(hashlb_table_fingerprint(t), hashlb_table_fingerprint(u));
	assert_int_equal(hashlb_table_backend_count(t), hashlb_table_backend_count(u));
	assert_int_equal(hashlb_table_up_count(t), hashlb_table_up_count(u));
	assert_int_equal(hashlb_table_bytes(t), hashlb_table_bytes(u));
	for (uint32_t i = 0; i < hashlb_table_backend_count(t); i++) {
		assert_string_equal(hashlb_table_backend_name(t, i),
				    hashlb_table_backend_name(u, i));
		assert_int_equal(hashlb_table_backend_weight(t, i),
				 hashlb_table_backend_weight(u, i));
		assert_int_equal(hashlb_table_backend_down(t, i), hashlb_table_backend_down(u, i));
	}
	hashlb_table_view(t, &a);
	hashlb_table_view(u, &b);
	assert_int_equal(a.scheme, b.scheme);
	if (a.scheme == HASHLB_SCHEME_MAGLEV) {
		assert_int_equal(a.m, b.m);
		assert_memory_equal(a.slots, b.slots, (size_t)a.m * sizeof(*a.slots));
	} else {
		assert_int_equal(a.n_points, b.n_points);
		assert_memory_equal(a.pos, b.pos, (size_t)a.n_points * sizeof(*a.pos));
		assert_memory_equal(a.owner, b.owner, (size_t)a.n_points * sizeof(*a.owner));
		assert_int_equal(a.bucket_bits, b.bucket_bits);
		assert_int_equal(a.max_scan, b.max_scan);
		assert_memory_equal(a.bucket, b.bucket,
				    (((size_t)1 << a.bucket_bits) + 1) * sizeof(*a.bucket));
	}
	for (int k = 0; k < 2000; k++) {
		uint64_t h = test_next_key(&ks);
		uint32_t pa[4], pb[4];
		size_t na = hashlb_table_preference(t, h, pa, 4);

		assert_int_equal(hashlb_table_lookup(t, h), hashlb_table_lookup(u, h));
		assert_int_equal(na, hashlb_table_preference(u, h, pb, 4));
		assert_memory_equal(pa, pb, na * sizeof(*pa));
	}
}

/* One random change of <p>: weights, members, order, down set. */
static void pool_mutate(struct pool *p, uint64_t *rs)
{
	uint32_t what = test_next_key(rs) % 6;
	size_t i = p->n ? test_next_key(rs) % p->n : 0;

	if (what == 0 && p->n) { /* a weight, sometimes to or from 0 */
		p->spec[i].weight = test_next_key(rs) % 5;
	} else if (what == 1 && p->n < UNIVERSE) { /* add a name not in the pool */
		for (uint32_t u = test_next_key(rs) % UNIVERSE;; u = (u + 1) % UNIVERSE) {
			bool used = false;

			for (size_t k = 0; k < p->n; k++)
				used |= !strcmp(p->spec[k].name, p->names[u]);
			if (used)
				continue;
			p->spec[p->n].name = p->names[u];
			p->spec[p->n].weight = 1 + test_next_key(rs) % 4;
			p->spec[p->n].down = test_next_key(rs) % 5 == 0;
			/* at a random place: indices of the others shift */
			struct hashlb_backend_spec tmp = p->spec[i];

			p->spec[i] = p->spec[p->n];
			p->spec[p->n++] = tmp;
			break;
		}
	} else if (what == 2 && p->n > 1) { /* remove one */
		memmove(&p->spec[i], &p->spec[i + 1], (p->n - i - 1) * sizeof(p->spec[0]));
		p->n--;
	} else if (what == 3 && p->n > 1) { /* reorder */
		for (size_t k = p->n - 1; k > 0; k--) {
			size_t j = test_next_key(rs) % (k + 1);
			struct hashlb_backend_spec tmp = p->spec[k];

			p->spec[k] = p->spec[j];
			p->spec[j] = tmp;
		}
	} else if (what == 4 && p->n) { /* the down set only */
		p->spec[i].down = !p->spec[i].down;
	} else if (p->n) { /* several at once, as one reload */
		for (int c = 0; c < 3; c++) {
			i = test_next_key(rs) % p->n;
			p->spec[i].weight = 1 + test_next_key(rs) % 3;
			p->spec[i].down = test_next_key(rs) % 4 == 0;
		}
	}
}

/* <pool> with <n> backends of the universe, every <stride>th, weights 1 to 3, all up. */
static void pool_init(struct pool *pool, size_t n, size_t stride)
{
	memset(pool, 0, sizeof(*pool));
	for (uint32_t u = 0; u < UNIVERSE; u++)
		universe_name(pool->names[u], sizeof(pool->names[u]), u);
	pool->n = n;
	for (size_t i = 0; i < n; i++) {
		pool->spec[i].name = pool->names[i * stride];
		pool->spec[i].weight = 1 + i % 3;
	}
}

/* Rebuilds chained over <steps> random changes, each checked against a fresh build. */
static void run_chain(enum hashlb_scheme scheme, uint32_t param, uint64_t seed, int steps)
{
	struct hashlb_table_params p;
	struct hashlb_table *prev, *fresh, *reb;
	struct hashlb_error e1, e2;
	struct pool pool;
	uint64_t rs = seed * 1000003 + param;
	int changed = 0;

	pool_init(&pool, 20, 2);
	prev = test_build(scheme, param, seed, pool.spec, pool.n);
	for (int s = 0; s < steps; s++) {
		int r1, r2;

		pool_mutate(&pool, &rs);
		p = *hashlb_table_params(prev);
		memset(&e1, 0, sizeof(e1));
		memset(&e2, 0, sizeof(e2));
		r1 = hashlb_table_build(&p, pool.spec, pool.n, &fresh, &e1);
		r2 = hashlb_table_rebuild(prev, pool.spec, pool.n, &reb, &e2);
		assert_int_equal(r1, r2);
		if (r1 < 0) { /* all weights 0: same refusal, keep the previous table */
			assert_int_equal(e1.reason, e2.reason);
			assert_string_equal(e1.msg, e2.msg);
			pool.spec[0].weight = 1;
			continue;
		}
		changed += hashlb_table_fingerprint(reb) != hashlb_table_fingerprint(prev);
		assert_same_table(fresh, reb);
		hashlb_table_free(fresh);
		hashlb_table_free(prev);
		prev = reb; /* the next rebuild starts from a rebuilt table */
	}
	assert_true(changed > steps / 2); /* the changes did change the tables */
	hashlb_table_free(prev);
}

static void test_ring_random_changes(void **state)
{
	for (uint64_t seed = 0; seed < 4; seed++)
		run_chain(HASHLB_SCHEME_RING, 1 + (uint32_t)seed * 5, seed, 150);
}

static void test_maglev_random_changes(void **state)
{
	static const uint32_t m[4] = { 53, 251, 1009, 65537 };

	for (uint64_t seed = 0; seed < 4; seed++)
		run_chain(HASHLB_SCHEME_MAGLEV, m[seed], seed, seed == 3 ? 40 : 150);
}

/* <t> is the fresh build of <pool> with <p>, fingerprint and slots, within its bytes_max. */
static void assert_fresh(const struct hashlb_table *t, const struct hashlb_table_params *p,
			 const struct pool *pool, int step)
{
	struct hashlb_table *fresh;
	struct hashlb_table_view a, b;

	assert_int_equal(hashlb_table_build(p, pool->spec, pool->n, &fresh, NULL), 0);
	hashlb_table_view(t, &a);
	hashlb_table_view(fresh, &b);
	if (hashlb_table_fingerprint(t) != hashlb_table_fingerprint(fresh) ||
	    memcmp(a.slots, b.slots, (size_t)a.m * sizeof(*a.slots)) != 0)
		fail_msg("M=%u step %d: not the fresh build's table", a.m, step);
	/* the whole preference list: as many backends as the fresh build has present (a count a
	 * table may take from the one it shares its slots with, not count itself) */
	uint32_t la[UNIVERSE], lb[UNIVERSE];
	size_t na = hashlb_table_preference(t, (uint64_t)step * 0x9e3779b97f4a7c15ull, la,
					    UNIVERSE),
	       nb = hashlb_table_preference(fresh, (uint64_t)step * 0x9e3779b97f4a7c15ull, lb,
					    UNIVERSE);
	if (na != nb || memcmp(la, lb, na * sizeof(*la)) != 0)
		fail_msg("M=%u step %d: a preference list of %zu backends, the fresh build's %zu",
			 a.m, step, na, nb);
	if (hashlb_table_bytes(t) > hashlb_table_bytes_max(p, pool->spec, pool->n))
		fail_msg("M=%u step %d: %zu bytes, above bytes_max %llu", a.m, step,
			 hashlb_table_bytes(t),
			 (unsigned long long)hashlb_table_bytes_max(p, pool->spec, pool->n));
	hashlb_table_free(fresh);
}

/*
 * Health changes and reloads mixed, as a running Maglev service sees them: a backend down or
 * up (often the one that changed last: a flap; down, drained and in maintenance are one to the
 * table), or several at once, each by
 * hashlb_table_with_down() from the table before or from a side table with more down (a retry
 * or ramp table); every other change of pool_mutate() (reweights, adds, removes, reorders) by
 * hashlb_table_rebuild(). Each table is the fresh build's, whatever tables were kept along the
 * way, the side tables too: the effective table depends only on names, weights and the down
 * set.
 */
static void run_health_chain(uint32_t m, uint64_t seed, int steps, uint32_t heavy)
{
	struct hashlb_table_params p;
	struct hashlb_table *cur, *side = NULL, *next;
	struct pool pool, side_pool;
	uint64_t rs = seed * 7919 + m;
	size_t last = 0;

	pool_init(&pool, 12, 3);
	for (size_t i = 1; i < pool.n; i++) /* some of weight 0 */
		pool.spec[i].weight = i % 5;
	if (heavy)
		pool.spec[0].weight = heavy;
	cur = test_build(HASHLB_SCHEME_MAGLEV, m, seed, pool.spec, pool.n);
	p = *hashlb_table_params(cur);
	for (int s = 0; s < steps; s++) {
		uint32_t what = test_next_key(&rs) % 10;
		const struct hashlb_table *base = cur;
		bool down[UNIVERSE];

		if (what < 6) { /* a health change */
			size_t i = what < 3 && last < pool.n ? last : test_next_key(&rs) % pool.n;

			pool.spec[i].down = !pool.spec[i].down;
			if (what == 5) /* several at once */
				for (int c = 0; c < 2; c++)
					pool.spec[test_next_key(&rs) % pool.n].down ^= true;
			last = i;
			for (size_t k = 0; k < pool.n; k++)
				down[k] = pool.spec[k].down;
			if (side && test_next_key(&rs) % 2)
				base = side;
			assert_int_equal(hashlb_table_with_down(base, down, &next, NULL), 0);
		} else if (what < 7) { /* a retry or ramp table: the current one, one more down */
			for (size_t k = 0; k < pool.n; k++)
				down[k] = pool.spec[k].down;
			down[test_next_key(&rs) % pool.n] = true;
			hashlb_table_free(side);
			assert_int_equal(hashlb_table_with_down(cur, down, &side, NULL), 0);
			side_pool = pool;
			for (size_t k = 0; k < pool.n; k++) {
				assert_int_equal(hashlb_table_backend_down(side, (uint32_t)k),
						 down[k]);
				side_pool.spec[k].down = down[k];
			}
			/* the side table too, which the next health change may start from */
			assert_fresh(side, &p, &side_pool, s);
			continue;
		} else { /* a reload */
			pool_mutate(&pool, &rs);
			if (heavy) /* the weights kept more than 16 times apart: owner blocks */
				pool.spec[0].weight = heavy;
			if (hashlb_table_rebuild(cur, pool.spec, pool.n, &next, NULL) < 0) {
				pool.spec[0].weight = 1; /* all weights 0: refused, then this */
				assert_int_equal(
					hashlb_table_rebuild(cur, pool.spec, pool.n, &next, NULL),
					0);
			}
			hashlb_table_free(side);
			side = NULL;
		}
		assert_fresh(next, &p, &pool, s);
		hashlb_table_free(cur);
		cur = next;
	}
	hashlb_table_free(side);
	hashlb_table_free(cur);
}

static void test_maglev_health_chain(void **state)
{
	run_health_chain(53, 1, 30000, 0);
	run_health_chain(251, 2, 30000, 0);
	run_health_chain(1009, 3, 5000, 0);
}

/*
 * The same with one backend of weight 100 (whichever is first after a reload) beside weights 0
 * to 4: tables with owner blocks, which a table whose effective slots are those of the table it
 * was made from shares with it, and a table with backends down keeps over its full slots for
 * the return. Every preference list is still the fresh build's. What blocks hold depends on
 * the weights, not on M (64 and 4096 entries whatever M); M=16411 has several large blocks and
 * a short last one, as 65537 has, at a quarter of the cost of a fresh build each step. The
 * steps: this file's lines and branches of the core taken (gcov) are those of 20000, 3000 and
 * 300 steps at M=53, 1009 and 65537, which took six times as long (8.2-9.3 s against 1.4-1.5 s
 * at -O0 with ASan).
 */
static void test_maglev_health_chain_skewed(void **state)
{
	run_health_chain(53, 4, 5000, 100);
	run_health_chain(1009, 5, 1500, 100);
	run_health_chain(16411, 6, 150, 100);
}

/* The default ring (160 points a weight unit): the size the control plane rebuilds. */
static void test_ring_default_size(void **state)
{
	run_chain(HASHLB_SCHEME_RING, 0, 42, 30);
}

/* Rebuild that must fail exactly as the build with prev's params does. */
static void expect_same_error(const struct hashlb_table *prev, const struct hashlb_backend_spec *b,
			      size_t n, int want_ret, enum hashlb_err_reason want_reason)
{
	struct hashlb_table *t = (struct hashlb_table *)(uintptr_t)0x1;
	struct hashlb_error e1, e2;
	int r1, r2;

	memset(&e1, 0, sizeof(e1));
	memset(&e2, 0, sizeof(e2));
	r1 = hashlb_table_build(hashlb_table_params(prev), b, n, &t, &e1);
	r2 = hashlb_table_rebuild(prev, b, n, &t, &e2);
	if (r2 != want_ret || e2.reason != want_reason)
		fail_msg("want %d %s, got %d %s: %s", want_ret, hashlb_err_reason_name(want_reason),
			 r2, hashlb_err_reason_name(e2.reason), e2.msg);
	assert_int_equal(r1, r2);
	assert_int_equal(e1.reason, e2.reason);
	assert_string_equal(e1.msg, e2.msg);
	assert_ptr_equal(t, (struct hashlb_table *)(uintptr_t)0x1);
	assert_int_equal(hashlb_table_rebuild(prev, b, n, &t, NULL), want_ret);
}

static void test_errors(void **state)
{
	static const enum hashlb_scheme schemes[2] = { HASHLB_SCHEME_RING, HASHLB_SCHEME_MAGLEV };

	for (int s = 0; s < 2; s++) {
		struct hashlb_table_params p;
		struct hashlb_table *prev;
		struct test_backends b, many;
		char long_name[HASHLB_NAME_MAX + 2];

		test_backends_init(&b, 4, "be-");
		prev = test_build(schemes[s], 0, 3, b.spec, 4);
		expect_same_error(prev, b.spec, 0, -EINVAL, HASHLB_ERR_NO_BACKENDS);
		b.spec[2].name = NULL;
		expect_same_error(prev, b.spec, 4, -EINVAL, HASHLB_ERR_BAD_NAME);
		memset(long_name, 'x', sizeof(long_name) - 1);
		long_name[sizeof(long_name) - 1] = '\0';
		b.spec[2].name = long_name;
		expect_same_error(prev, b.spec, 4, -EINVAL, HASHLB_ERR_BAD_NAME);
		b.spec[2].name = b.names[1];
		expect_same_error(prev, b.spec, 4, -EINVAL, HASHLB_ERR_DUPLICATE_NAME);
		b.spec[2].name = b.names[2];
		b.spec[3].weight = HASHLB_WEIGHT_MAX + 1;
		expect_same_error(prev, b.spec, 4, -EINVAL, HASHLB_ERR_WEIGHT_RANGE);
		for (int i = 0; i < 4; i++)
			b.spec[i].weight = 0;
		expect_same_error(prev, b.spec, 4, -EINVAL, HASHLB_ERR_ALL_WEIGHTS_ZERO);
		test_backends_init(&many, HASHLB_BACKENDS_MAX + 1, "m-");
		expect_same_error(prev, many.spec, HASHLB_BACKENDS_MAX + 1, -EINVAL,
				  HASHLB_ERR_TOO_MANY_BACKENDS);
		test_backends_free(&many);
		hashlb_table_free(prev);

		/* prev's memory cap holds for the rebuild */
		for (int i = 0; i < 4; i++)
			b.spec[i].weight = 1;
		hashlb_table_params_init(&p, schemes[s]);
		p.max_bytes = s == 0 ? 200000 : 450000;
		assert_int_equal(hashlb_table_build(&p, b.spec, 4, &prev, NULL), 0);
		if (s == 0) {
			b.spec[0].weight = 50;
			expect_same_error(prev, b.spec, 4, -E2BIG, HASHLB_ERR_MEMORY_CAP);
		} else {
			/* Maglev's size does not grow with weights: the same cap passes */
			struct hashlb_table *t;

			b.spec[0].weight = 50;
			assert_int_equal(hashlb_table_rebuild(prev, b.spec, 4, &t, NULL), 0);
			hashlb_table_free(t);
		}
		hashlb_table_free(prev);
		test_backends_free(&b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_random_changes),
		cmocka_unit_test(test_maglev_random_changes),
		cmocka_unit_test(test_maglev_health_chain),
		cmocka_unit_test(test_maglev_health_chain_skewed),
		cmocka_unit_test(test_ring_default_size),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
