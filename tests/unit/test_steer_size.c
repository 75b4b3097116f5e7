/* Proves the one count of what a table needs of a kernel program (hashlb_steer_needs()) and the one rule a program is sized by (hashlb_steer_size_add()), which a reload's check, hashlb run's programs of one table and of several, and a program grown in place all use: the ring's points at most every primary's or every backup's weights (checked against the tables the running hashlb builds, in each state: neither short of nor past the largest), twice the largest table, never below the defaults, the points capped for the ring index. */
// SPDX-License-Identifier: MIT
#include "hashlb/config.h"
#include "hashlb/steer.h"
#include "helpers.h"

/* A ring's points: vnodes x the larger of the primaries' and the backups' weights (the
 * backups are in the table only while no primary is), none for Maglev; Maglev's M, its
 * default for 0. */
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
	/* no ring: sized for none (before, vnodes x weights of ring maps it never used) */
	assert_int_equal(need.ring_points, 0);
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

/*
 * <c>'s first service's needs, counted by hashlb_steer_needs() from its config, against the
 * ring points of the tables it is served by (hashlb_service_cfg_build_table(): the backup
 * rule as the running hashlb applies it, and the effective ring a program is given,
 * hashlb_table_view()) with every backend up, and with its primaries down: each table within
 * the count, and the larger of them the count itself (not the sum of both groups, which no
 * table holds at once, nor the primaries' alone: a program sized by them could not take the
 * failover's table).
 */
static void needs_against_tables(const char *yaml, uint32_t primaries, uint64_t want)
{
	struct hashlb_config *c = NULL;
	struct hashlb_error err = { 0 };
	const struct hashlb_service_cfg *svc;
	struct hashlb_steer_needs need;
	uint32_t weights[8];
	bool backup[8], down[8] = { false };
	uint64_t most = 0;

	if (hashlb_config_parse(yaml, strlen(yaml), "t.yaml", &c, &err) < 0)
		fail_msg("config: %d:%d: %s", err.line, err.column, err.msg);
	svc = &c->services[0];
	assert_true(svc->n_backends <= 8);
	for (uint32_t i = 0; i < svc->n_backends; i++) {
		weights[i] = svc->backends[i].weight;
		backup[i] = svc->backends[i].backup;
	}
	hashlb_steer_needs(&svc->table, weights, backup, svc->n_backends, &need);
	for (int state = 0; state < 2; state++) {
		struct hashlb_table *t = NULL;
		struct hashlb_table_view v;

		for (uint32_t i = 0; i < primaries; i++)
			down[i] = state == 1;
		assert_int_equal(hashlb_service_cfg_build_table(svc, down, &t, &err), 0);
		hashlb_table_view(t, &v);
		assert_true(v.n_points > 0);
		assert_true(v.n_points <= need.ring_points);
		most = v.n_points > most ? v.n_points : most;
		hashlb_table_free(t);
	}
	assert_int_equal(most, need.ring_points);
	assert_int_equal(need.ring_points, want); /* and the tables were the ones meant */
	hashlb_config_free(c);
}

#define RING_HEAD                                                                \
	"services:\n  - name: web\n    listen: 127.0.0.1:80\n    scheme: ring\n" \
	"    vnodes: 100\n    backends:\n"                                       \
	"      - {name: a, address: '127.0.0.1:9001', weight: 1}\n"              \
	"      - {name: b, address: '127.0.0.1:9002', weight: 2}\n"

/* The count against the tables themselves: backups heavier than the primaries, lighter, and
 * none. */
static void test_needs_tables(void **state)
{
	(void)state;
	/* primaries 300 points, backups 1,200: the failover's table the larger */
	needs_against_tables(RING_HEAD "      - {name: c, address: '127.0.0.1:9003', weight: 5, "
				       "backup: true}\n"
				       "      - {name: d, address: '127.0.0.1:9004', weight: 7, "
				       "backup: true}\n",
			     2, 1200);
	/* primaries 300, the backup 100: the table with every backend up the larger */
	needs_against_tables(RING_HEAD "      - {name: c, address: '127.0.0.1:9003', weight: 1, "
				       "backup: true}\n",
			     2, 300);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_needs),
		cmocka_unit_test(test_needs_tables),
		cmocka_unit_test(test_size_floors_and_twice),
		cmocka_unit_test(test_size_largest_of_each),
		cmocka_unit_test(test_size_points_capped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
