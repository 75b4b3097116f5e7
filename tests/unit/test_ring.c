/* Proves the ring is stable (golden fingerprints), balanced like 1/sqrt(V), weighted, and moves only what it must. */
// SPDX-License-Identifier: MIT
#include <math.h>
#include <xxhash.h>

#include "helpers.h"
#include "table-internal.h"
#include "hashlb/tuple.h"

#define KEYS 200000

/*
 * Golden fingerprints. A ring's points are XXH64(name || be32(i), seed):
 * a change of the hash function, of the point naming or of the seed's use
 * changes these values, and moves clients on every running instance at the
 * upgrade. That is a migration: say so in the release notes, then update
 * the values here.
 */
static void test_golden_fingerprints(void **state)
{
	static const struct test_golden g[] = {
		{ 160, 0, { 1, 1, 1, 1, 1 }, { 0 }, 0x943829858c51ebd2ull, "backend-b" },
		{ 10, 0x5eed, { 1, 2, 3, 1, 1 }, { 0 }, 0x923dda155902f462ull, "backend-b" },
		{ 160,
		  0,
		  { 1, 1, 1, 1, 1 },
		  { 0, 0, 0, 1, 0 },
		  0x12381ea7bd1db955ull,
		  "backend-b" },
	};

	test_check_golden(HASHLB_SCHEME_RING, g, sizeof(g) / sizeof(g[0]));
}

/*
 * Point i of a backend is at XXH64(name || be32(i), seed), as the header
 * documents, for names of every length around XXH64's 4-, 8- and 32-byte
 * steps (the build folds a name's whole lanes once: it must not show).
 */
static void test_point_placement(void **state)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH";

	for (size_t len = 1; len <= 40; len++) {
		char name[48];
		struct hashlb_backend_spec b = { .name = name, .weight = 1 };
		struct hashlb_table_view v;
		struct hashlb_table *t;
		uint8_t buf[48];

		memcpy(name, alphabet, len);
		name[len] = '\0';
		t = test_build(HASHLB_SCHEME_RING, 300, 99, &b, 1);
		hashlb_table_view(t, &v);
		assert_int_equal(v.n_points, 300);
		memcpy(buf, name, len);
		for (uint32_t i = 0; i < 300; i++) {
			uint64_t want;
			bool found = false;

			buf[len] = (uint8_t)(i >> 24);
			buf[len + 1] = (uint8_t)(i >> 16);
			buf[len + 2] = (uint8_t)(i >> 8);
			buf[len + 3] = (uint8_t)i;
			want = XXH64(buf, len + 4, 99);
			for (uint32_t j = 0; j < v.n_points && !found; j++)
				found = v.pos[j] == want;
			if (!found)
				fail_msg("name of %zu bytes: point %u is not at XXH64", len, i);
			if (i)
				assert_true(v.pos[i - 1] <= v.pos[i]);
		}
		hashlb_table_free(t);
	}
}

/* The first point at or after h, wrapping: the definition of a ring lookup. */
static uint32_t brute_find(const struct hashlb_table_view *v, uint64_t h)
{
	for (uint32_t j = 0; j < v->n_points; j++)
		if (v->pos[j] >= h)
			return j;
	return 0;
}

/* The two-level index and the binary search give the definition's answer, at the edges too. */
static void test_lookup_matches_definition(void **state)
{
	static const uint32_t sizes[] = { 1, 2, 3, 7, 100 };
	uint64_t ks = 1;

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		struct test_backends b;
		struct hashlb_table_view v;
		struct hashlb_table *t;

		test_backends_init(&b, sizes[s], "r");
		t = test_build(HASHLB_SCHEME_RING, sizes[s] == 100 ? 16 : 3, 0, b.spec, b.n);
		hashlb_table_view(t, &v);
		for (uint32_t j = 0; j <= v.n_points; j++) {
			uint64_t edge[5] = { 0, UINT64_MAX, test_next_key(&ks), 0, 0 };

			if (j < v.n_points) {
				edge[3] = v.pos[j];
				edge[4] = v.pos[j] + 1;
			}
			for (int e = 0; e < 5; e++) {
				uint32_t want = brute_find(&v, edge[e]);

				assert_int_equal(ring_find(&t->ring, edge[e]), want);
				assert_int_equal(ring_find_bsearch(&t->ring, edge[e]), want);
				assert_int_equal(hashlb_table_lookup(t, edge[e]), v.owner[want]);
			}
		}
		/* the index's promise to BPF: at most max_scan steps from the bucket */
		for (uint32_t bk = 0; bk < (1u << v.bucket_bits); bk++)
			assert_true(v.bucket[bk + 1] - v.bucket[bk] <= v.max_scan);
		assert_int_equal(v.bucket[1u << v.bucket_bits], v.n_points);
		hashlb_table_free(t);
		test_backends_free(&b);
	}
}

/*
 * Spread (stddev/mean of the backends' shares) falls like 1/sqrt(V): each
 * share is a sum of V arcs, so spread * sqrt(V) stays near 1 and each
 * tenfold V divides the spread by about sqrt(10).
 */
static void test_spread_follows_sqrt_v(void **state)
{
	static const uint32_t vs[] = { 1, 10, 100, 1000 };
	double cv[4], share[100], max, min;
	struct test_backends b;

	test_backends_init(&b, 100, "node-");
	for (int k = 0; k < 4; k++) {
		struct hashlb_table *t = test_build(HASHLB_SCHEME_RING, vs[k], 0, b.spec, b.n);

		test_shares(t, share);
		test_spread(share, b.n, &max, &min, &cv[k]);
		print_message("V=%u spread %.4f spread*sqrt(V) %.3f max/avg %.3f\n", vs[k], cv[k],
			      cv[k] * sqrt(vs[k]), max);
		assert_in_range((uint64_t)(cv[k] * sqrt(vs[k]) * 1000), 600, 1500);
		if (k) {
			double ratio = cv[k - 1] / cv[k];

			assert_true(ratio > sqrt(10) / 1.5 && ratio < sqrt(10) * 1.5);
		}
		hashlb_table_free(t);
	}
	assert_true(cv[0] / cv[3] > 20); /* ideal sqrt(1000) = 31.6 */
	test_backends_free(&b);
}

/*
 * Adding backend N to N backends: about 1/(N+1) of the keys move, and every
 * key that moves goes to the new backend (points of the others stay put).
 * Removing one: only the removed backend's keys move.
 */
static void test_add_remove_one(void **state)
{
	static const uint32_t ns[] = { 10, 50 };

	for (size_t s = 0; s < 2; s++) {
		uint32_t n = ns[s];
		struct test_backends b;
		struct hashlb_table *small, *big, *less;
		uint64_t ks = 42;
		uint32_t moved = 0, moved_rm = 0;

		test_backends_init(&b, n + 1, "cache-");
		small = test_build(HASHLB_SCHEME_RING, 160, 0, b.spec, n);
		big = test_build(HASHLB_SCHEME_RING, 160, 0, b.spec, n + 1);
		less = test_build(HASHLB_SCHEME_RING, 160, 0, b.spec + 1, n - 1);
		for (int k = 0; k < KEYS; k++) {
			uint64_t h = test_next_key(&ks);
			uint32_t a = hashlb_table_lookup(small, h), c = hashlb_table_lookup(big, h);
			uint32_t r = hashlb_table_lookup(less, h) + 1; /* index in b */

			if (a != c) {
				moved++;
				assert_int_equal(c, n);
			}
			if (a != r) {
				moved_rm++;
				assert_int_equal(a, 0);
			}
		}
		print_message("ring %u->%u moved %.4f (ideal %.4f), %u->%u moved %.4f\n", n, n + 1,
			      (double)moved / KEYS, 1.0 / (n + 1), n, n - 1,
			      (double)moved_rm / KEYS);
		/* V=160: a backend's share is within ~3/sqrt(160) = 25% of fair */
		assert_true(fabs((double)moved / KEYS * (n + 1) - 1) < 0.25);
		assert_true(fabs((double)moved_rm / KEYS * n - 1) < 0.25);
		hashlb_table_free(small);
		hashlb_table_free(big);
		hashlb_table_free(less);
		test_backends_free(&b);
	}
}

/*
 * Weights: a backend of weight w holds V x w points, so its share is its
 * weight fraction within a relative error that shrinks like 1/sqrt(V x w):
 * we allow 4 / sqrt(V x w).
 */
static void test_weights(void **state)
{
	static const uint32_t w[6] = { 1, 1, 2, 3, 5, 10 };
	static const uint32_t vs[] = { 40, 160, 1000 };
	struct test_backends b;
	double share[6];

	test_backends_init(&b, 6, "w-");
	for (int i = 0; i < 6; i++)
		b.spec[i].weight = w[i];
	for (size_t k = 0; k < sizeof(vs) / sizeof(vs[0]); k++) {
		struct hashlb_table *t = test_build(HASHLB_SCHEME_RING, vs[k], 3, b.spec, b.n);

		test_shares(t, share);
		for (int i = 0; i < 6; i++) {
			double want = w[i] / 22.0, err = fabs(share[i] / want - 1);

			if (err > 4 / sqrt(vs[k] * w[i]))
				fail_msg("V=%u weight %u: share %.4f, want %.4f", vs[k], w[i],
					 share[i], want);
			assert_true(fabs(hashlb_table_share(t, i) - share[i]) < 1e-9);
		}
		hashlb_table_free(t);
	}
	/* weight 0: configured, owns nothing */
	b.spec[0].weight = 0;
	struct hashlb_table *t = test_build(HASHLB_SCHEME_RING, 160, 3, b.spec, b.n);

	test_shares(t, share);
	assert_true(share[0] == 0.0);
	assert_true(hashlb_table_share(t, 0) == 0.0);
	hashlb_table_free(t);
	test_backends_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_fingerprints),
		cmocka_unit_test(test_point_placement),
		cmocka_unit_test(test_lookup_matches_definition),
		cmocka_unit_test(test_spread_follows_sqrt_v),
		cmocka_unit_test(test_add_remove_one),
		cmocka_unit_test(test_weights),
	};

	return cmocka_run_group_tests_name("ring", tests, NULL, NULL);
}
