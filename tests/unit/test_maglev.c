/* Proves Maglev is stable (golden fingerprints), balanced to 1%, weighted to 1%, and moves about 1/(N+1) on an add. */
// SPDX-License-Identifier: MIT
#include <math.h>
#include <xxhash.h>

#include "helpers.h"
#include "table-internal.h"
#include "hashlb/tuple.h"

/*
 * Golden fingerprints. Maglev's permutations come from XXH64(name, seed) and
 * XXH64(name, ~seed), turns are taken in name order: changing either, or the
 * slot formula, changes these values and moves clients on every running
 * instance at the upgrade. That is a migration: say so in the release
 * notes, then update the values here.
 */
static void test_golden_fingerprints(void **state)
{
	static const struct test_golden g[] = {
		{ 65537, 0, { 1, 1, 1, 1, 1 }, { 0 }, 0xf82985cb7d07086eull, "backend-c" },
		{ 251, 0x5eed, { 1, 2, 3, 1, 1 }, { 0 }, 0x02d1b5747561f868ull, "backend-a" },
		{ 65537,
		  0,
		  { 1, 1, 1, 1, 1 },
		  { 0, 0, 0, 1, 0 },
		  0x5331e79298f4f91dull,
		  "backend-c" },
	};

	test_check_golden(HASHLB_SCHEME_MAGLEV, g, sizeof(g) / sizeof(g[0]));
}

/* The documented permutation and slot formula, checked from outside. */
static void test_placement(void **state)
{
	/* listed in reverse: turns follow name order, not list order */
	struct hashlb_backend_spec b[2] = { { .name = "beta", .weight = 1 },
					    { .name = "alpha", .weight = 1 } };
	const uint32_t m = 65537;
	const uint64_t seed = 77;
	struct hashlb_table_view v;
	struct hashlb_table *t = test_build(HASHLB_SCHEME_MAGLEV, m, seed, b, 2);
	uint32_t off_a = XXH64("alpha", 5, seed) % m,
		 skip_a = XXH64("alpha", 5, ~seed) % (m - 1) + 1;
	uint32_t off_b = XXH64("beta", 4, seed) % m;
	uint64_t ks = 5;

	hashlb_table_view(t, &v);
	assert_int_equal(v.m, m);
	assert_int_equal(v.slots[off_a], 1); /* alpha's first turn */
	if (off_b != off_a)
		assert_int_equal(v.slots[off_b], 0);
	if ((off_a + skip_a) % m != off_b)
		assert_int_equal(v.slots[(off_a + skip_a) % m], 1); /* alpha's second turn */
	for (int k = 0; k < 10000; k++) {
		uint64_t h = test_next_key(&ks);

		assert_int_equal(hashlb_table_lookup(t, h), v.slots[((h >> 32) * m) >> 32]);
	}
	/* the edges of the hash space reach the first and the last slot */
	assert_int_equal(hashlb_table_lookup(t, 0), v.slots[0]);
	assert_int_equal(hashlb_table_lookup(t, UINT64_MAX), v.slots[m - 1]);
	hashlb_table_free(t);
}

/*
 * Equal weights take one slot each a round: slot counts differ by at most one, whatever M
 * (what `hashlb-bench schemes`' balance table says of a small M). With M >= 100 x N every
 * backend holds within 1% of the average.
 */
static void test_balance(void **state)
{
	static const struct {
		uint32_t n, m;
	} c[] = { { 10, 65537 },    { 100, 10007 }, { 655, 65537 }, { 7, 701 },
		  { 1000, 100003 }, { 100, 251 },   { 10, 251 },    { 100, 1021 } };
	double share[1000], max, min, cv;

	for (size_t k = 0; k < sizeof(c) / sizeof(c[0]); k++) {
		struct test_backends b;
		struct hashlb_table *t;

		test_backends_init(&b, c[k].n, "be-");
		t = test_build(HASHLB_SCHEME_MAGLEV, c[k].m, 11, b.spec, b.n);
		test_shares(t, share);
		test_spread(share, b.n, &max, &min, &cv);
		print_message("N=%u M=%u max/avg %.5f min/avg %.5f\n", c[k].n, c[k].m, max, min);
		/* slots: share x M, whole numbers; the most and the fewest one apart at most */
		assert_true((max - min) * c[k].m / c[k].n <= 1.0 + 1e-6);
		if (c[k].m >= 100 * c[k].n) {
			assert_true(max <= 1.01);
			assert_true(min >= 0.99);
		}
		hashlb_table_free(t);
		test_backends_free(&b);
	}
}

/*
 * Adding backend N to N: about 1/(N+1) of the slots change owner, most of
 * them to the new backend. Maglev trades some extra churn for its exact
 * balance, and the extra grows with N/M (measured here: 1.03x ideal at
 * N=10, 1.59x at N=100 with M=65537, 1.24x at N=100 with M=262147), so the
 * bound follows the case, and a larger M must churn less.
 */
static void test_add_one(void **state)
{
	static const struct {
		uint32_t n, m;
		double max_excess; /* moved / ideal */
	} c[] = { { 10, 65537, 1.1 }, { 100, 65537, 2.0 }, { 100, 262147, 1.4 } };
	double excess[3];

	for (size_t s = 0; s < 3; s++) {
		uint32_t n = c[s].n, m = c[s].m, moved = 0, to_new = 0, removed_moved = 0,
			 removed_own = 0;
		struct test_backends b;
		struct hashlb_table *small, *big, *less;
		struct hashlb_table_view vs, vb, vl;

		test_backends_init(&b, n + 1, "cache-");
		small = test_build(HASHLB_SCHEME_MAGLEV, m, 0, b.spec, n);
		big = test_build(HASHLB_SCHEME_MAGLEV, m, 0, b.spec, n + 1);
		less = test_build(HASHLB_SCHEME_MAGLEV, m, 0, b.spec + 1, n - 1);
		hashlb_table_view(small, &vs);
		hashlb_table_view(big, &vb);
		hashlb_table_view(less, &vl);
		for (uint32_t j = 0; j < m; j++) {
			if (vs.slots[j] != vb.slots[j]) {
				moved++;
				to_new += vb.slots[j] == n;
			}
			if (vs.slots[j] != vl.slots[j] + 1u) {
				removed_moved++;
				removed_own += vs.slots[j] == 0;
			}
		}
		print_message(
			"maglev M=%u %u->%u moved %.4f (ideal %.4f), %.3f of them to the new one;"
			" %u->%u moved %.4f, %.3f of them from the removed one\n",
			m, n, n + 1, (double)moved / m, 1.0 / (n + 1), (double)to_new / moved, n,
			n - 1, (double)removed_moved / m, (double)removed_own / removed_moved);
		excess[s] = (double)moved / m * (n + 1);
		assert_true(excess[s] >= 0.99);
		assert_true(excess[s] <= c[s].max_excess);
		assert_true((double)to_new / moved >= 0.6);
		assert_true((double)removed_moved / m * n >= 0.99);
		assert_true((double)removed_moved / m * n <= c[s].max_excess);
		/* every slot of the removed backend moved */
		assert_int_equal(removed_own, (uint32_t)(hashlb_table_share(small, 0) * m + 0.5));
		hashlb_table_free(small);
		hashlb_table_free(big);
		hashlb_table_free(less);
		test_backends_free(&b);
	}
	assert_true(excess[2] < excess[1]);
}

/*
 * Weighted turns: at M=65537 each share is within 1% (relative) of its
 * weight fraction, or within one slot for shares under 100 slots, where
 * a slot is more than 1%.
 */
static void test_weights(void **state)
{
	static const uint32_t sets[][4] = { { 1, 1, 2, 0 },
					    { 1, 2, 3, 4 },
					    { 1, 10, 100, 0 },
					    { 7, 3, 9999, 10000 },
					    { 0, 5, 5, 1 } };
	double share[4];

	for (size_t s = 0; s < sizeof(sets) / sizeof(sets[0]); s++) {
		struct test_backends b;
		struct hashlb_table *t;
		double sum = 0;

		test_backends_init(&b, 4, "w-");
		for (int i = 0; i < 4; i++) {
			b.spec[i].weight = sets[s][i];
			sum += sets[s][i];
		}
		t = test_build(HASHLB_SCHEME_MAGLEV, 65537, 0, b.spec, b.n);
		test_shares(t, share);
		for (int i = 0; i < 4; i++) {
			double want = sets[s][i] / sum;

			double tol = 0.01 * want > 1.0 / 65537 ? 0.01 * want : 1.0 / 65537;

			if (fabs(share[i] - want) > tol)
				fail_msg("weights set %zu backend %d: share %.5f want %.5f", s, i,
					 share[i], want);
			assert_true(fabs(hashlb_table_share(t, i) - share[i]) < 1e-12);
		}
		hashlb_table_free(t);
		test_backends_free(&b);
	}
}

/* The memory target: one 16-bit entry per slot. */
static void test_slot_size(void **state)
{
	struct hashlb_table_view v;
	struct test_backends b;
	struct hashlb_table *t;

	assert_int_equal(sizeof(*v.slots), 2);
	test_backends_init(&b, 3, "s-");
	t = test_build(HASHLB_SCHEME_MAGLEV, 65537, 0, b.spec, b.n);
	/* every backend up: one slot array (the full table is the effective one) */
	assert_true(hashlb_table_bytes(t) < 65537 * 2 + 4096);
	hashlb_table_free(t);
	/* one down: full, effective and the survivors' */
	b.spec[1].down = true;
	t = test_build(HASHLB_SCHEME_MAGLEV, 65537, 0, b.spec, b.n);
	assert_true(hashlb_table_bytes(t) > 3 * 65537 * 2 &&
		    hashlb_table_bytes(t) < 3 * 65537 * 2 + 4096);
	hashlb_table_free(t);
	test_backends_free(&b);
}

/*
 * How many of test_extreme_weights_build()'s seeds a build checks: all five in a plain one, the
 * first under a sanitizer. The fingerprints do not depend on the sanitizer; what ASan or TSan
 * adds, the memory and threads of a build at the largest size, one build shows, and each took
 * 5 s of CPU under ASan (-O0), 75 s of CI's ASan run in all.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EXTREME_SEEDS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define EXTREME_SEEDS 1
#endif
#endif
#ifndef EXTREME_SEEDS
#define EXTREME_SEEDS 5
#endif

/*
 * Extreme weights at the largest table: one backend of weight 10,000 among 1,199 of weight 1,
 * M = 16,777,259. Turns came from rounds that visit every backend, M x w_max / (average weight)
 * visits: 13.5 s a build (each rebuild of such a service, a health change too, on the control
 * thread); a heap of each backend's next turn gives the same turns in the same order, so
 * the same table (these fingerprints are the rounds' own), in 0.7 s. Five seeds: 70 s of CPU
 * in a release build before, 160 s in a debug one (past this test's meson timeout).
 */
static void test_extreme_weights_build(void **state)
{
	static const uint64_t fp[5] = { 0xba110c29a5b64126ull, 0x3738ebf5b8f39839ull,
					0x4021238aa4fa4b86ull, 0x567ff9c33a432834ull,
					0x2531b0b0e84da01dull };
	struct hashlb_table_params p;
	struct test_backends b;

	test_backends_init(&b, 1200, "w-");
	b.spec[0].weight = 10000;
	for (uint64_t seed = 0; seed < EXTREME_SEEDS; seed++) {
		struct hashlb_table *t;

		hashlb_table_params_init(&p, HASHLB_SCHEME_MAGLEV);
		p.maglev_m = HASHLB_MAGLEV_M_MAX;
		p.seed = seed;
		assert_int_equal(hashlb_table_build(&p, b.spec, 1200, &t, NULL), 0);
		assert_int_equal(hashlb_table_fingerprint(t), fp[seed]);
		hashlb_table_free(t);
	}
	test_backends_free(&b);
}

/*
 * The paper's population, plainly: turns in rounds over the backends in name order (their
 * names sort as their indices here), one of weight w taking a turn each time its credit reaches
 * the largest weight, each turn probing the slot array from its permutation's next slot. What
 * the core's bitmap, heap and arithmetic tail must give, slot for slot.
 */
static void plain_population(uint16_t *slots, uint32_t m, uint64_t seed,
			     const struct hashlb_backend_spec *b, uint32_t n)
{
	uint32_t *next = calloc(n, sizeof(*next)), *skip = calloc(n, sizeof(*skip));
	uint32_t *credit = calloc(n, sizeof(*credit)), w_max = 0, filled = 0;

	assert_non_null(next);
	assert_non_null(skip);
	assert_non_null(credit);
	for (uint32_t i = 0; i < n; i++) {
		size_t len = strlen(b[i].name);

		next[i] = (uint32_t)(XXH64(b[i].name, len, seed) % m);
		skip[i] = (uint32_t)(XXH64(b[i].name, len, ~seed) % (m - 1)) + 1;
		if (b[i].weight > w_max)
			w_max = b[i].weight;
	}
	memset(slots, 0xff, (size_t)m * sizeof(*slots));
	while (filled < m) {
		for (uint32_t i = 0; i < n && filled < m; i++) {
			if (!b[i].weight || (credit[i] += b[i].weight) < w_max)
				continue;
			credit[i] -= w_max;
			while (slots[next[i]] != HASHLB_BACKEND_NONE)
				next[i] = (next[i] + skip[i]) % m;
			slots[next[i]] = (uint16_t)i;
			next[i] = (next[i] + skip[i]) % m;
			filled++;
		}
	}
	free(next);
	free(skip);
	free(credit);
}

/*
 * The table with all up, and with the first backend down (its slots to the survivors' own
 * population: what a first down builds), equal to the plain population's slot for slot, at
 * sizes where the bitmap, the arithmetic tail (the last 128 free slots) and the weighted
 * rounds all take part. The golden fingerprints pin a few tables; this pins the algorithm.
 */
static void test_population_plain(void **state)
{
	static const struct {
		uint32_t m, n, weight_mod;
	} cases[] = { { 1000003, 1000, 1 }, { 65537, 10, 3 }, { 251, 7, 2 } };

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		uint32_t m = cases[c].m, n = cases[c].n;
		struct hashlb_backend_spec *b = calloc(n, sizeof(*b));
		char(*names)[16] = calloc(n, sizeof(*names));
		uint16_t *full = malloc((size_t)m * sizeof(*full));
		uint16_t *surv = malloc((size_t)m * sizeof(*surv));
		struct hashlb_table_params p;
		struct hashlb_table_view v;
		struct hashlb_table *t;

		assert_true(b && names && full && surv);
		for (uint32_t i = 0; i < n; i++) {
			snprintf(names[i], sizeof(names[i]), "p-%05u", i);
			b[i].name = names[i];
			b[i].weight = 1 + i % cases[c].weight_mod;
		}
		hashlb_table_params_init(&p, HASHLB_SCHEME_MAGLEV);
		p.maglev_m = m;
		p.seed = 0x5eed + c;
		plain_population(full, m, p.seed, b, n);
		b[0].weight = 0;
		plain_population(surv, m, p.seed, b, n);
		b[0].weight = 1;
		for (int down = 0; down < 2; down++) {
			b[0].down = down;
			assert_int_equal(hashlb_table_build(&p, b, n, &t, NULL), 0);
			hashlb_table_view(t, &v);
			for (uint32_t j = 0; j < m; j++) {
				uint16_t want = down && full[j] == 0 ? surv[j] : full[j];

				if (v.slots[j] != want)
					fail_msg(
						"M=%u N=%u down=%d: slot %u is %u, the plain population's %u",
						m, n, down, j, v.slots[j], want);
			}
			hashlb_table_free(t);
		}
		free(surv);
		free(full);
		free(names);
		free(b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_fingerprints),
		cmocka_unit_test(test_placement),
		cmocka_unit_test(test_balance),
		cmocka_unit_test(test_add_one),
		cmocka_unit_test(test_weights),
		cmocka_unit_test(test_slot_size),
		cmocka_unit_test(test_extreme_weights_build),
		cmocka_unit_test(test_population_plain),
	};

	return cmocka_run_group_tests_name("maglev", tests, NULL, NULL);
}
