/* Proves the one count of what a table needs of a kernel program (hashlb_steer_needs()) and the one rule a program is sized by (hashlb_steer_size_add()), which a reload's check, hashlb run's programs of one table and of several, and a program grown in place all use: the ring's points at most every primary's or every backup's weights, twice the largest table, never below the defaults, the points capped for the ring index. */
// SPDX-License-Identifier: MIT
#include "hashlb/steer.h"
#include "helpers.h"

/* A ring's points: vnodes x the larger of the primaries' and the backups' weights (the
 * backups are in the table only while no primary is); Maglev's M, its default for 0. */
static void test_needs(void **state)
{
	struct hashlb_table_params p = { .scheme = HASHLB_SCHEME_RING, .ring_v = 100 };
	const uint32_t weights[] = { 1, 2, 3, 10 };
	const bool backup[] = { false, false, false, true };
	struct hashlb_steer_needs need;

	(void)state;
	hashlb_steer_needs(&p, weights, backup, 4, &need);
	assert_int_equal(need.backends, 4);
	assert_int_equal(need.ring_points, 100 * 10);
	assert_int_equal(need.maglev_m, HASHLB_MAGLEV_M_DEFAULT);

	hashlb_steer_needs(&p, weights, backup, 3, &need); /* no backup */
	assert_int_equal(need.ring_points, 100 * 6);

	p = (struct hashlb_table_params){ .scheme = HASHLB_SCHEME_MAGLEV, .maglev_m = 131071 };
	hashlb_steer_needs(&p, weights, NULL, 4, &need); /* NULL: none a backup */
	assert_int_equal(need.maglev_m, 131071);
	assert_int_equal(need.ring_points, HASHLB_RING_V_DEFAULT * 16);
}

/* Twice the table, never below 256 backends, Maglev's default M, 65,536 ring points. */
static void test_size_floors_and_twice(void **state)
{
	struct hashlb_steer_opts o = { 0 };

	(void)state;
	hashlb_steer_size_add(&o,
			      &(struct hashlb_steer_needs){ .backends = 3, .ring_points = 480 });
	assert_int_equal(o.max_backends, 256);
	assert_int_equal(o.max_maglev_m, HASHLB_MAGLEV_M_DEFAULT);
	assert_int_equal(o.max_ring_points, 65536);

	hashlb_steer_size_add(&o, &(struct hashlb_steer_needs){ .backends = 300,
								.maglev_m = 131071,
								.ring_points = 120000 });
	assert_int_equal(o.max_backends, 600);
	assert_int_equal(o.max_maglev_m, 131071); /* a table's M as it is: a prime */
	assert_int_equal(o.max_ring_points, 240000);
}

/* Of several tables, each capacity the largest table's, whichever table it is. */
static void test_size_largest_of_each(void **state)
{
	struct hashlb_steer_opts o = { 0 };

	(void)state;
	hashlb_steer_size_add(
		&o, &(struct hashlb_steer_needs){ .backends = 1000, .ring_points = 1000 });
	hashlb_steer_size_add(&o, &(struct hashlb_steer_needs){ .backends = 2,
								.maglev_m = 655373,
								.ring_points = 70000 });
	hashlb_steer_size_add(&o, &(struct hashlb_steer_needs){ .backends = 5 });
	assert_int_equal(o.max_backends, 2000);
	assert_int_equal(o.max_maglev_m, 655373);
	assert_int_equal(o.max_ring_points, 140000);
}

/* Points past what the ring index's 32-bit buckets take are capped (a sum of weights that
 * large is refused then, by the program's check), not wrapped into a small size. */
static void test_size_points_capped(void **state)
{
	struct hashlb_steer_opts o = { 0 };

	(void)state;
	hashlb_steer_size_add(&o, &(struct hashlb_steer_needs){ .ring_points = 1ull << 33 });
	assert_int_equal(o.max_ring_points, UINT32_MAX / 8);
	hashlb_steer_size_add(&o, &(struct hashlb_steer_needs){ .ring_points = 1ull << 31 });
	assert_int_equal(o.max_ring_points, UINT32_MAX / 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_needs),
		cmocka_unit_test(test_size_floors_and_twice),
		cmocka_unit_test(test_size_largest_of_each),
		cmocka_unit_test(test_size_points_capped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
