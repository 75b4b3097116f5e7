/* Proves hashlb_table_moved(): the exact share of clients that a change of table sends to another backend (what a reload reports), against lookups and known cases. */
// SPDX-License-Identifier: MIT
#include <math.h>

#include "helpers.h"

static const enum hashlb_scheme schemes[2] = { HASHLB_SCHEME_RING, HASHLB_SCHEME_MAGLEV };

static double moved(const struct hashlb_table *a, const struct hashlb_table *b)
{
	double m = -1;

	assert_int_equal(hashlb_table_moved(a, b, NULL, &m), 0);
	assert_true(m >= 0 && m <= 1);
	return m;
}

/* The fraction of 400,000 keys whose backend's name differs between <a> and <b>: what
 * clients see, looked up one by one. */
static double sampled(const struct hashlb_table *a, const struct hashlb_table *b)
{
	uint64_t state = 42, n = 400000, diff = 0;

	for (uint64_t i = 0; i < n; i++) {
		uint64_t h = test_next_key(&state);
		uint32_t x = hashlb_table_lookup(a, h), y = hashlb_table_lookup(b, h);

		if (x == HASHLB_BACKEND_NONE || y == HASHLB_BACKEND_NONE)
			diff += x != y;
		else
			diff += strcmp(hashlb_table_backend_name(a, x),
				       hashlb_table_backend_name(b, y)) != 0;
	}
	return (double)diff / (double)n;
}

/* 400,000 keys: a standard error under 0.0008 for any fraction; 0.004 is 5 of them */
#define SAMPLED_TOLERANCE 0.004

/* The same backends, in another order: nothing moves. */
static void test_identical_moves_none(void **state)
{
	struct test_backends b, r;

	test_backends_init(&b, 5, "be-");
	test_backends_init(&r, 5, "be-");
	for (size_t i = 0; i < 5; i++)
		r.spec[i].name = b.names[4 - i];
	for (int s = 0; s < 2; s++) {
		struct hashlb_table *t1 = test_build(schemes[s], 0, 7, b.spec, 5);
		struct hashlb_table *t2 = test_build(schemes[s], 0, 7, r.spec, 5);

		assert_true(moved(t1, t1) == 0.0);
		assert_true(moved(t1, t2) == 0.0);
		hashlb_table_free(t1);
		hashlb_table_free(t2);
	}
	test_backends_free(&b);
	test_backends_free(&r);
}

/* A fifth backend added to four of equal weight on a ring: exactly the keys it takes move,
 * its share, about 1/5; every other key keeps its backend. */
static void test_ring_add_moves_the_new_share(void **state)
{
	struct test_backends b;
	double shares[5];

	test_backends_init(&b, 5, "be-");
	struct hashlb_table *four = test_build(HASHLB_SCHEME_RING, 0, 0, b.spec, 4);
	struct hashlb_table *five = test_build(HASHLB_SCHEME_RING, 0, 0, b.spec, 5);
	double m = moved(four, five);

	test_shares(five, shares);
	assert_true(fabs(m - shares[4]) < 1e-12);
	assert_true(m > 0.15 && m < 0.25);
	assert_true(fabs(m - sampled(four, five)) < SAMPLED_TOLERANCE);
	/* the way back moves the same keys */
	assert_true(fabs(moved(five, four) - m) < 1e-12);
	hashlb_table_free(four);
	hashlb_table_free(five);
	test_backends_free(&b);
}

/* One of five removed from Maglev: its keys move, and a few others (Maglev's permutations
 * shift), not many. */
static void test_maglev_remove_moves_its_share_and_a_few(void **state)
{
	struct test_backends b;
	double shares[5];

	test_backends_init(&b, 5, "be-");
	struct hashlb_table *five = test_build(HASHLB_SCHEME_MAGLEV, 0, 0, b.spec, 5);
	struct hashlb_table *four = test_build(HASHLB_SCHEME_MAGLEV, 0, 0, b.spec, 4);
	double m = moved(five, four);

	test_shares(five, shares);
	assert_true(m >= shares[4] - 1e-6);
	assert_true(m < shares[4] + 0.05);
	assert_true(fabs(m - sampled(five, four)) < SAMPLED_TOLERANCE);
	hashlb_table_free(five);
	hashlb_table_free(four);
	test_backends_free(&b);
}

/* The health overlay: a backend down moves exactly its own keys, in both schemes. */
static void test_down_moves_exactly_its_keys(void **state)
{
	struct test_backends b;
	bool down[6] = { false, false, true, false, false, false };
	double shares[6];

	test_backends_init(&b, 6, "be-");
	b.spec[3].weight = 3;
	for (int s = 0; s < 2; s++) {
		struct hashlb_table *full = test_build(schemes[s], 0, 9, b.spec, 6), *less = NULL;
		double m;

		assert_int_equal(hashlb_table_with_down(full, down, &less, NULL), 0);
		m = moved(full, less);
		test_shares(full, shares);
		/* Maglev's slots are not all of one size: up to 2^-32 apart each */
		assert_true(fabs(m - shares[2]) < 1e-6);
		hashlb_table_free(full);
		hashlb_table_free(less);
	}
	test_backends_free(&b);
}

/* Another scheme, table size or ring points: the same hashes, other tables; the exact
 * figure is what lookups find. */
static void test_other_tables_match_lookups(void **state)
{
	struct test_backends b;

	test_backends_init(&b, 7, "node-");
	b.spec[1].weight = 4;
	struct hashlb_table *ring = test_build(HASHLB_SCHEME_RING, 0, 3, b.spec, 7);
	struct hashlb_table *ring_v = test_build(HASHLB_SCHEME_RING, 40, 3, b.spec, 7);
	struct hashlb_table *mag = test_build(HASHLB_SCHEME_MAGLEV, 0, 3, b.spec, 7);
	struct hashlb_table *mag_m = test_build(HASHLB_SCHEME_MAGLEV, 251, 3, b.spec, 7);

	assert_true(fabs(moved(ring, mag) - sampled(ring, mag)) < SAMPLED_TOLERANCE);
	assert_true(fabs(moved(mag, ring) - moved(ring, mag)) < 1e-12);
	assert_true(fabs(moved(ring, ring_v) - sampled(ring, ring_v)) < SAMPLED_TOLERANCE);
	assert_true(fabs(moved(mag, mag_m) - sampled(mag, mag_m)) < SAMPLED_TOLERANCE);
	hashlb_table_free(ring);
	hashlb_table_free(ring_v);
	hashlb_table_free(mag);
	hashlb_table_free(mag_m);
	test_backends_free(&b);
}

/* Every backend down on one side: every key moves (to or from no backend); renamed
 * backends are other backends. */
static void test_none_and_renamed(void **state)
{
	struct test_backends b, c;
	bool down[3] = { true, true, true };

	test_backends_init(&b, 3, "be-");
	test_backends_init(&c, 3, "other-");
	for (int s = 0; s < 2; s++) {
		struct hashlb_table *up = test_build(schemes[s], 0, 0, b.spec, 3), *none = NULL;
		struct hashlb_table *other = test_build(schemes[s], 0, 0, c.spec, 3);

		assert_int_equal(hashlb_table_with_down(up, down, &none, NULL), 0);
		assert_true(moved(up, none) == 1.0);
		assert_true(moved(none, up) == 1.0);
		assert_true(moved(none, none) == 0.0);
		assert_true(moved(up, other) == 1.0);
		hashlb_table_free(up);
		hashlb_table_free(none);
		hashlb_table_free(other);
	}
	test_backends_free(&b);
	test_backends_free(&c);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The first hash of each interval of <t> into <starts> (at <*n>): a ring's arc begins past a
 * point, a Maglev slot i at h32 = ceil(i * 2^32 / M). */
static void interval_starts(const struct hashlb_table *t, uint64_t *starts, size_t *n)
{
	struct hashlb_table_view v;

	hashlb_table_view(t, &v);
	if (v.scheme == HASHLB_SCHEME_MAGLEV)
		for (uint64_t i = 0; i < v.m; i++)
			starts[(*n)++] = ((((uint64_t)i << 32) + v.m - 1) / v.m) << 32;
	else
		for (uint32_t i = 0; i < v.n_points; i++)
			if (v.pos[i] != UINT64_MAX)
				starts[(*n)++] = v.pos[i] + 1;
}

static const char *name_or_none(const struct hashlb_table *t, uint32_t idx)
{
	return idx == HASHLB_BACKEND_NONE ? "" : hashlb_table_backend_name(t, idx);
}

/* The exact share by lookups: the hash space cut at every interval start of either table,
 * each piece looked up at both ends (it must be one backend throughout), those whose
 * backend differs summed. */
static double looked_up_exactly(const struct hashlb_table *a, const struct hashlb_table *b)
{
	struct hashlb_table_view va, vb;
	size_t n = 0, cap;
	uint64_t *starts;
	double moved = 0;

	hashlb_table_view(a, &va);
	hashlb_table_view(b, &vb);
	cap = 1 + (size_t)va.m + va.n_points + vb.m + vb.n_points;
	starts = malloc(cap * sizeof(*starts));
	assert_non_null(starts);
	starts[n++] = 0;
	interval_starts(a, starts, &n);
	interval_starts(b, starts, &n);
	qsort(starts, n, sizeof(*starts), u64_cmp);
	for (size_t i = 0; i < n; i++) {
		uint64_t first = starts[i], last;
		size_t j = i + 1;
		bool diff;

		while (j < n && starts[j] == first)
			j++;
		last = j < n ? starts[j] - 1 : UINT64_MAX;
		diff = strcmp(name_or_none(a, hashlb_table_lookup(a, first)),
			      name_or_none(b, hashlb_table_lookup(b, first))) != 0;
		assert_true(diff == (strcmp(name_or_none(a, hashlb_table_lookup(a, last)),
					    name_or_none(b, hashlb_table_lookup(b, last))) != 0));
		if (diff)
			moved += ldexp((double)(last - first) + 1.0, -64);
		i = j - 1;
	}
	free(starts);
	return moved;
}

/* Every pair of tables, of either scheme, sizes, points and backends, one down: the figure
 * is the one lookups find piece by piece (to a double's rounding), Maglev of one size (the
 * slot-by-slot comparison) as any. */
static void test_exact_against_lookups(void **state)
{
	static const uint32_t params[2][3] = { { 0, 2, 40 }, { 0, 7, 251 } };
	struct test_backends b;
	bool down[4] = { false, true, false, false };

	test_backends_init(&b, 4, "be-");
	b.spec[0].weight = 3;
	for (int s1 = 0; s1 < 2; s1++)
		for (int s2 = 0; s2 < 2; s2++)
			for (int p1 = 0; p1 < 3; p1++)
				for (int p2 = 0; p2 < 3; p2++) {
					struct hashlb_table *x = test_build(
						schemes[s1], params[s1][p1], 5, b.spec, 3);
					struct hashlb_table *y = test_build(
						schemes[s2], params[s2][p2], 5, b.spec, 4);
					struct hashlb_table *yd = NULL;

					assert_int_equal(hashlb_table_with_down(y, down, &yd, NULL),
							 0);
					assert_true(fabs(moved(x, y) - looked_up_exactly(x, y)) <
						    1e-12);
					assert_true(fabs(moved(y, x) - looked_up_exactly(y, x)) <
						    1e-12);
					assert_true(fabs(moved(y, yd) - looked_up_exactly(y, yd)) <
						    1e-12);
					assert_true(fabs(moved(x, yd) - looked_up_exactly(x, yd)) <
						    1e-12);
					hashlb_table_free(x);
					hashlb_table_free(y);
					hashlb_table_free(yd);
				}
	test_backends_free(&b);
}

/* New hashes (a seed): placements independent, 1 - sum of products of the shares; four
 * equal backends keep a quarter of their clients, and lookups under two seeds agree. */
static void test_rehash(void **state)
{
	struct test_backends b;
	struct hashlb_table *a, *c;
	double m = -1;

	test_backends_init(&b, 4, "be-");
	a = test_build(HASHLB_SCHEME_MAGLEV, 0, 0, b.spec, 4);
	c = test_build(HASHLB_SCHEME_MAGLEV, 0, 1, b.spec, 4);
	assert_int_equal(hashlb_table_rehash_moved(a, c, NULL, &m), 0);
	assert_true(fabs(m - 0.75) < 1e-3);
	hashlb_table_free(a);
	hashlb_table_free(c);
	test_backends_free(&b);
}

/* New hashes with every backend down on both sides (a seed changed during an outage): no
 * client had a backend, nor has one, so none moves, as hashlb_table_moved() counts a hash no
 * backend takes in either; down on one side only, every one moves. Before, the shares alone
 * (each 0) said every client moved. */
static void test_rehash_none_to_none(void **state)
{
	struct test_backends b;
	bool down[3] = { true, true, true };

	test_backends_init(&b, 3, "be-");
	for (int s = 0; s < 2; s++) {
		struct hashlb_table *a = test_build(schemes[s], 0, 0, b.spec, 3);
		struct hashlb_table *c = test_build(schemes[s], 0, 1, b.spec, 3);
		struct hashlb_table *an = NULL, *cn = NULL;
		double m = -1;

		assert_int_equal(hashlb_table_with_down(a, down, &an, NULL), 0);
		assert_int_equal(hashlb_table_with_down(c, down, &cn, NULL), 0);
		assert_int_equal(hashlb_table_rehash_moved(an, cn, NULL, &m), 0);
		assert_true(m == 0.0);
		assert_int_equal(hashlb_table_rehash_moved(a, cn, NULL, &m), 0);
		assert_true(m == 1.0);
		assert_int_equal(hashlb_table_rehash_moved(an, c, NULL, &m), 0);
		assert_true(m == 1.0);
		hashlb_table_free(a);
		hashlb_table_free(c);
		hashlb_table_free(an);
		hashlb_table_free(cn);
	}
	test_backends_free(&b);
}

struct readdressed {
	const struct hashlb_table *from, *to;
	const char *name; /* the backend at another address */
	unsigned calls;
};

/* hashlb_same_server: <r->name> is at another address; the two indices are of one name */
static bool same_unless_readdressed(uint32_t i, uint32_t j, void *arg)
{
	struct readdressed *r = arg;
	const char *name = hashlb_table_backend_name(r->from, i);

	r->calls++;
	assert_string_equal(name, hashlb_table_backend_name(r->to, j));
	return strcmp(name, r->name) != 0;
}

/* A backend that keeps its name and place but gets another address sends its clients to
 * another server: its share counts as moved, in the same table as in a reordered one (the
 * indices given are each table's own), and with new hashes it keeps none of its clients.
 * Before, the figure matched names alone: 0 for such a change. */
static void test_readdressed_moves_its_share(void **state)
{
	struct test_backends b, r;
	double m = -1;

	test_backends_init(&b, 4, "be-");
	test_backends_init(&r, 4, "be-");
	for (int i = 0; i < 4; i++) /* the same backends, in reverse order */
		r.spec[i] = b.spec[3 - i];
	for (int s = 0; s < 2; s++) {
		struct hashlb_table *x = test_build(schemes[s], 0, 5, b.spec, 4);
		struct hashlb_table *y = test_build(schemes[s], 0, 5, r.spec, 4);
		struct readdressed ra = { x, x, "be-1", 0 }, rb = { x, y, "be-1", 0 };
		struct hashlb_same_server sa = { same_unless_readdressed, &ra },
					  sb = { same_unless_readdressed, &rb };

		assert_true(moved(x, y) == 0);
		/* (Maglev's share counts slots, the figure the hashes each takes: 2^32 / M,
		 * rounded either way) */
		assert_int_equal(hashlb_table_moved(x, x, &sa, &m), 0);
		assert_true(fabs(m - hashlb_table_share(x, 1)) < 1e-6);
		assert_true(ra.calls == 4);
		assert_int_equal(hashlb_table_moved(x, y, &sb, &m), 0);
		assert_true(fabs(m - hashlb_table_share(x, 1)) < 1e-6);
		hashlb_table_free(x);
		hashlb_table_free(y);
	}
	{
		struct hashlb_table *x = test_build(HASHLB_SCHEME_MAGLEV, 0, 0, b.spec, 4);
		struct hashlb_table *y = test_build(HASHLB_SCHEME_MAGLEV, 0, 1, b.spec, 4);
		struct readdressed rr = { x, y, "be-1", 0 };
		struct hashlb_same_server sr = { same_unless_readdressed, &rr };

		/* three of four equal backends keep a sixteenth each */
		assert_int_equal(hashlb_table_rehash_moved(x, y, &sr, &m), 0);
		assert_true(fabs(m - 13.0 / 16) < 1e-3);
		hashlb_table_free(x);
		hashlb_table_free(y);
	}
	test_backends_free(&r);
	test_backends_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_identical_moves_none),
		cmocka_unit_test(test_ring_add_moves_the_new_share),
		cmocka_unit_test(test_maglev_remove_moves_its_share_and_a_few),
		cmocka_unit_test(test_down_moves_exactly_its_keys),
		cmocka_unit_test(test_other_tables_match_lookups),
		cmocka_unit_test(test_none_and_renamed),
		cmocka_unit_test(test_rehash),
		cmocka_unit_test(test_rehash_none_to_none),
		cmocka_unit_test(test_readdressed_moves_its_share),
		cmocka_unit_test(test_exact_against_lookups),
	};

	return cmocka_run_group_tests_name("moved", tests, NULL, NULL);
}
