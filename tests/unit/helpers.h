/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the core's unit tests: named backend lists, a
 * deterministic key stream and table builds that must succeed. Every test
 * is deterministic: the same inputs give the same tables on every machine,
 * so a bound that holds here holds everywhere.
 */
#ifndef HASHLB_TEST_HELPERS_H
#define HASHLB_TEST_HELPERS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hashlb/table.h"
#include "hashlb/tuple.h"

#define TEST_NAME_LEN 32

struct test_backends {
	size_t n;
	struct hashlb_backend_spec *spec;
	char (*names)[TEST_NAME_LEN];
};

/* n backends named "<prefix><i>", weight 1, up. */
static inline void test_backends_init(struct test_backends *b, size_t n, const char *prefix)
{
	b->n = n;
	b->spec = calloc(n ? n : 1, sizeof(*b->spec));
	b->names = calloc(n ? n : 1, sizeof(*b->names));
	assert_non_null(b->spec);
	assert_non_null(b->names);
	for (size_t i = 0; i < n; i++) {
		snprintf(b->names[i], TEST_NAME_LEN, "%s%zu", prefix, i);
		b->spec[i].name = b->names[i];
		b->spec[i].weight = 1;
	}
}

static inline void test_backends_free(struct test_backends *b)
{
	free(b->spec);
	free(b->names);
	memset(b, 0, sizeof(*b));
}

/* SplitMix64: a fixed, well-mixed stream of 64-bit keys. */
static inline uint64_t test_next_key(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* <param> is V for the ring, M for Maglev; 0 = default. */
static inline struct hashlb_table *test_build(enum hashlb_scheme scheme, uint32_t param,
					      uint64_t seed, const struct hashlb_backend_spec *b,
					      size_t n)
{
	struct hashlb_table_params p;
	struct hashlb_table *t = NULL;
	struct hashlb_error err;
	uint64_t builds = hashlb_table_builds();
	int r;

	hashlb_table_params_init(&p, scheme);
	p.seed = seed;
	if (param && scheme == HASHLB_SCHEME_RING)
		p.ring_v = param;
	if (param && scheme == HASHLB_SCHEME_MAGLEV)
		p.maglev_m = param;
	r = hashlb_table_build(&p, b, n, &t, &err);
	if (r < 0)
		print_error("build failed: %d %s\n", r, err.msg);
	assert_int_equal(r, 0);
	assert_non_null(t);
	assert_int_equal(hashlb_table_builds(), builds + 1); /* counted */
	/* what a config's validation asks: the same answer, nothing built */
	assert_int_equal(hashlb_table_check(&p, b, n, NULL), 0);
	assert_int_equal(hashlb_table_builds(), builds + 1);
	return t;
}

/*
 * Exact share of every backend (n entries in <ret_share>) from the table's
 * view: Maglev counts slots, the ring sums arc lengths (point j owns the arc
 * that ends at it).
 */
static inline void test_shares(const struct hashlb_table *t, double *ret_share)
{
	struct hashlb_table_view v;

	hashlb_table_view(t, &v);
	for (uint32_t i = 0; i < v.n_backends; i++)
		ret_share[i] = 0;
	if (v.scheme == HASHLB_SCHEME_MAGLEV) {
		for (uint32_t j = 0; j < v.m; j++)
			if (v.slots[j] != HASHLB_BACKEND_NONE)
				ret_share[v.slots[j]] += 1.0 / v.m;
		return;
	}
	if (v.n_points == 1) {
		ret_share[v.owner[0]] = 1.0;
		return;
	}
	for (uint32_t j = 0; j < v.n_points; j++) {
		uint64_t arc = v.pos[j] - v.pos[j ? j - 1 : v.n_points - 1]; /* mod 2^64 */

		ret_share[v.owner[j]] += (double)arc / 18446744073709551616.0;
	}
}

/* max/avg, min/avg and stddev/mean of <share> over <n> backends. */
static inline void test_spread(const double *share, size_t n, double *ret_max, double *ret_min,
			       double *ret_cv)
{
	double sum = 0, max = 0, min = 1e300, var = 0, mean;

	for (size_t i = 0; i < n; i++) {
		sum += share[i];
		max = share[i] > max ? share[i] : max;
		min = share[i] < min ? share[i] : min;
	}
	mean = sum / (double)n;
	for (size_t i = 0; i < n; i++)
		var += (share[i] - mean) * (share[i] - mean);
	*ret_max = max / mean;
	*ret_min = min / mean;
	*ret_cv = __builtin_sqrt(var / (double)n) / mean;
}

/*
 * A golden case: five backends "backend-a".."backend-e" with these weights
 * and down flags, V or M = <param>, <seed>; the table's fingerprint and the
 * backend of the src-ip hash of 192.0.2.1 must be exactly these.
 */
struct test_golden {
	uint32_t param;
	uint64_t seed;
	uint32_t weight[5];
	bool down[5];
	uint64_t fp;
	const char *lookup;
};

static inline void test_check_golden(enum hashlb_scheme scheme, const struct test_golden *g,
				     size_t n)
{
	static const char *const names[5] = { "backend-a", "backend-b", "backend-c", "backend-d",
					      "backend-e" };
	struct hashlb_backend_spec b[5];
	struct hashlb_tuple tu;

	assert_int_equal(hashlb_tuple_parse_src("192.0.2.1", &tu), 0);
	for (size_t k = 0; k < n; k++) {
		uint64_t h = hashlb_tuple_hash(&tu, HASHLB_KEY_SRC_IP, g[k].seed);
		struct hashlb_table *t;

		for (int i = 0; i < 5; i++) {
			b[i].name = names[i];
			b[i].weight = g[k].weight[i];
			b[i].down = g[k].down[i];
		}
		t = test_build(scheme, g[k].param, g[k].seed, b, 5);
		if (hashlb_table_fingerprint(t) != g[k].fp)
			fail_msg("%s golden case %zu: fingerprint %#llx, want %#llx",
				 hashlb_scheme_name(scheme), k,
				 (unsigned long long)hashlb_table_fingerprint(t),
				 (unsigned long long)g[k].fp);
		assert_string_equal(hashlb_table_backend_name(t, hashlb_table_lookup(t, h)),
				    g[k].lookup);
		hashlb_table_free(t);
	}
}

#endif
