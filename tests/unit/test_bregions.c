/* Proves that a kernel program's backend slots keep their indices across every growth (src/steer/bregions.h: more backends, more tables, both, in any order), each slot at an index of its own inside the map; that the 16th growth of a program's backends is refused and the 15th is not; and that a found program's region list laying two slots at one index, a slot past its tables' or one of its slots nowhere, is refused. */
// SPDX-License-Identifier: MIT
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bregions.h"

/* A program's hlb_bslots as a loader lays it out. */
struct layout {
	uint32_t tables, cap, n;
	struct hlb_steer_bregion r[BREGIONS_GROWN_MAX];
};

static uint32_t slot_of(const struct layout *l, uint32_t t, uint32_t i)
{
	return bregions_slot(l->r, l->n, l->cap, t, i);
}

/* <l>'s every slot at an index of its own below tables * cap, and its list one a found
 * program's passes (bregions_check()) where it has one. */
static void assert_laid_out(const struct layout *l)
{
	uint32_t all = l->tables * l->cap;
	unsigned char *seen = calloc(all, 1);
	char why[160] = "";

	assert_non_null(seen);
	for (uint32_t t = 0; t < l->tables; t++) {
		for (uint32_t i = 0; i < l->cap; i++) {
			uint32_t at = slot_of(l, t, i);

			assert_true(at < all);
			assert_int_equal(seen[at], 0);
			seen[at] = 1;
		}
	}
	free(seen);
	if (l->n)
		assert_int_equal(
			bregions_check(l->r, l->n, l->tables, l->cap, all, why, sizeof(why)), 0);
}

/* <l> grown to <tables> of <cap>: every slot it had where it was. How many regions. */
static uint32_t grow(struct layout *l, uint32_t tables, uint32_t cap)
{
	struct layout g = { .tables = tables, .cap = cap };

	g.n = bregions_grow(l->r, l->n, l->tables, l->cap, tables, cap, g.r);
	if (g.n > HLB_STEER_BREGIONS_MAX)
		return g.n;
	for (uint32_t t = 0; t < l->tables; t++)
		for (uint32_t i = 0; i < l->cap; i++)
			assert_int_equal(slot_of(&g, t, i), slot_of(l, t, i));
	assert_laid_out(&g);
	*l = g;
	return g.n;
}

/* One table grown, or more tables of the same backends: still t * cap + i, no regions (an
 * older hashlb drives it on). */
static void test_plain(void **state)
{
	struct layout one = { .tables = 1, .cap = 4 }, two = { .tables = 2, .cap = 4 };

	(void)state;
	assert_int_equal(grow(&one, 1, 8), 0);
	assert_int_equal(grow(&one, 3, 16), 0); /* share(): a program of one replaced by 3 */
	assert_int_equal(slot_of(&one, 2, 5), 2 * 16 + 5);
	assert_int_equal(grow(&two, 5, 4), 0);
	assert_int_equal(slot_of(&two, 4, 3), 4 * 4 + 3);
}

/* Several tables' backends grown: appended. Then tables added after, a growth after those,
 * both at once: every slot stays. */
static void test_appended(void **state)
{
	struct layout l = { .tables = 2, .cap = 4 };

	(void)state;
	assert_int_equal(grow(&l, 2, 8), 2);
	/* table 1's slot 5: T * c + t * (c' - c) + (i - c) */
	assert_int_equal(slot_of(&l, 1, 5), 2 * 4 + 1 * 4 + 1);
	assert_int_equal(slot_of(&l, 1, 3), 1 * 4 + 3);
	assert_int_equal(grow(&l, 3, 8), 3); /* a table after a growth */
	assert_int_equal(slot_of(&l, 2, 0), 16);
	assert_int_equal(grow(&l, 3, 16), 4); /* a growth after a table */
	assert_int_equal(slot_of(&l, 2, 8), 24 + 2 * 8);
	assert_int_equal(grow(&l, 5, 20), 6); /* both */
	assert_int_equal(grow(&l, 5, 20), 6); /* ring points only: nothing added */
}

/* A program of 16 regions grows its ring points, not its backends nor its tables: its 16th
 * growth of backends (17 regions) is refused. */
static void test_limit(void **state)
{
	struct layout l = { .tables = 2, .cap = 1 };
	uint32_t k = 1;

	(void)state;
	for (; k < HLB_STEER_BREGIONS_MAX; k++)
		assert_int_equal(grow(&l, 2, l.cap + 1), k + 1);
	assert_int_equal(l.n, HLB_STEER_BREGIONS_MAX);
	assert_int_equal(grow(&l, 2, l.cap), HLB_STEER_BREGIONS_MAX);
	assert_int_equal(grow(&l, 2, l.cap + 1), HLB_STEER_BREGIONS_MAX + 1);
	assert_int_equal(grow(&l, 3, l.cap), HLB_STEER_BREGIONS_MAX + 1);
	assert_int_equal(grow(&l, 3, l.cap + 1), HLB_STEER_BREGIONS_MAX + 2);
	assert_int_equal(l.n, HLB_STEER_BREGIONS_MAX); /* as it was */
}

/* A found program's list (two tables of 8, grown from 4): refused unless a layout. */
static void test_check(void **state)
{
	const struct hlb_steer_bregion good[2] = { { 0, 0, 2, 0, 4 }, { 8, 0, 2, 4, 8 } };
	struct hlb_steer_bregion r[2];
	char why[160];

	(void)state;
	assert_int_equal(bregions_check(good, 2, 2, 8, 16, why, sizeof(why)), 0);
	/* its runs overlap: tables 0's slots 4..7 at table 1's 0..3 (before: found) */
	memcpy(r, good, sizeof(r));
	r[1].base = 4;
	assert_int_equal(bregions_check(r, 2, 2, 8, 16, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "backend slot region (1)"));
	/* two regions of the same slots, 4..7 of each table nowhere (before: found) */
	r[1] = (struct hlb_steer_bregion){ 8, 0, 2, 0, 4 };
	assert_int_equal(bregions_check(r, 2, 2, 8, 16, why, sizeof(why)), -EPROTO);
	/* in a larger map, slots past the tables' 16 (before: found, and the incarnation
	 * scan's array of 16 written past) */
	memcpy(r, good, sizeof(r));
	r[1].base = 20;
	assert_int_equal(bregions_check(r, 2, 2, 8, 32, why, sizeof(why)), -EPROTO);
	/* a map smaller than its tables */
	assert_int_equal(bregions_check(good, 2, 2, 8, 15, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "map of 15 backend slots"));
	/* past its tables, past its backends, short of them, none */
	r[1] = (struct hlb_steer_bregion){ 8, 0, 3, 4, 8 };
	assert_int_equal(bregions_check(r, 2, 2, 8, 16, why, sizeof(why)), -EPROTO);
	r[1] = (struct hlb_steer_bregion){ 8, 0, 2, 4, 9 };
	assert_int_equal(bregions_check(r, 2, 2, 8, 16, why, sizeof(why)), -EPROTO);
	assert_int_equal(bregions_check(good, 1, 2, 8, 16, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "regions of 8 slots, not its 2 tables of 8"));
	assert_int_equal(bregions_check(good, 0, 2, 8, 16, why, sizeof(why)), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_appended),
		cmocka_unit_test(test_limit),
		cmocka_unit_test(test_check),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
