/* Proves hlb_grow() (include/hashlb/grow.h), the one way every library grows an array: room for what is needed, the first size from empty, doubling past twice the room, and on overflow an error that leaves the array and its room as they were. */
// SPDX-License-Identifier: MIT
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hashlb/grow.h"

/* In a build with -Dsanitize=true (or CI's ThreadSanitizer build), a size that cannot be
 * allocated is NULL, as without (the sanitizer would stop the test instead): that is the
 * failure hlb_grow() must survive. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "allocator_may_return_null=1";
}

/* An array of <n> uint64_t 0..n-1, its room <n>. */
static uint64_t *filled(size_t n)
{
	uint64_t *v = malloc(n * sizeof(*v));

	assert_non_null(v);
	for (size_t i = 0; i < n; i++)
		v[i] = i;
	return v;
}

static void assert_filled(const uint64_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		assert_int_equal(v[i], i);
}

/* From no array: <first> elements, or its doubling past <need> when that is more. */
static void test_empty_grows_to_first(void **state)
{
	uint64_t *v = NULL;
	size_t cap = 0;

	assert_int_equal(hlb_grow((void **)&v, &cap, 1, sizeof(*v), 8), 0);
	assert_non_null(v);
	assert_int_equal(cap, 8);
	v[7] = 7; /* all of it is the caller's */
	free(v);

	v = NULL;
	cap = 0;
	assert_int_equal(hlb_grow((void **)&v, &cap, 8, sizeof(*v), 8), 0);
	assert_int_equal(cap, 8); /* exactly first: not doubled */
	free(v);

	v = NULL;
	cap = 0;
	assert_int_equal(hlb_grow((void **)&v, &cap, 9, sizeof(*v), 4), 0);
	assert_int_equal(cap, 16); /* 4, 8, 16: the first doubling that holds 9 */
	v[15] = 15;
	free(v);
}

/* Room enough: nothing moves, not even a full array (need == cap); one more doubles it. */
static void test_room_enough_changes_nothing(void **state)
{
	uint64_t *v = filled(8), *was = v;
	size_t cap = 8;

	for (size_t need = 0; need <= 8; need++) {
		assert_int_equal(hlb_grow((void **)&v, &cap, need, sizeof(*v), 64), 0);
		assert_ptr_equal(v, was);
		assert_int_equal(cap, 8);
	}
	assert_int_equal(hlb_grow((void **)&v, &cap, 9, sizeof(*v), 64), 0);
	assert_int_equal(cap, 16); /* twice the room, not <first> */
	assert_filled(v, 8);
	free(v);
}

/* A need past twice the room (a batch added at once): doubled until it holds it, kept. */
static void test_need_past_twice_the_room(void **state)
{
	uint64_t *v = filled(8);
	size_t cap = 8;

	assert_int_equal(hlb_grow((void **)&v, &cap, 100, sizeof(*v), 64), 0);
	assert_int_equal(cap, 128); /* 16, 32, 64, 128 */
	assert_filled(v, 8);
	for (size_t i = 8; i < 100; i++)
		v[i] = i;
	assert_int_equal(hlb_grow((void **)&v, &cap, 129, sizeof(*v), 64), 0);
	assert_int_equal(cap, 256);
	assert_filled(v, 100);
	free(v);
}

/*
 * Each overflow an error, -ENOMEM, the array and its room as they were (the array still the
 * caller's, whole): the room's doubling past SIZE_MAX, the byte count past SIZE_MAX, and a
 * byte count that fits but that no allocator gives.
 */
static void test_overflow_leaves_the_array(void **state)
{
	uint64_t *v = filled(4), *was = v;
	size_t cap = 4;

	/* the doubling: 4 * 2^k never reaches SIZE_MAX */
	assert_int_equal(hlb_grow((void **)&v, &cap, SIZE_MAX, sizeof(*v), 64), -ENOMEM);
	assert_ptr_equal(v, was);
	assert_int_equal(cap, 4);
	assert_filled(v, 4);

	/* the bytes: 2^61 elements fit a size_t, their 8 bytes each do not */
	assert_int_equal(hlb_grow((void **)&v, &cap, (SIZE_MAX >> 3) - 1, sizeof(*v), 64), -ENOMEM);
	assert_ptr_equal(v, was);
	assert_int_equal(cap, 4);
	assert_filled(v, 4);

	/* 2^60 elements of 8 bytes: a size_t, but no memory */
	assert_int_equal(hlb_grow((void **)&v, &cap, (size_t)1 << 60, sizeof(*v), 64), -ENOMEM);
	assert_ptr_equal(v, was);
	assert_int_equal(cap, 4);
	assert_filled(v, 4);

	/* and it still grows after */
	assert_int_equal(hlb_grow((void **)&v, &cap, 5, sizeof(*v), 64), 0);
	assert_int_equal(cap, 8);
	assert_filled(v, 4);
	free(v);

	/* from empty: nothing allocated, nothing to free */
	v = NULL;
	cap = 0;
	assert_int_equal(hlb_grow((void **)&v, &cap, SIZE_MAX, 1, 64), -ENOMEM);
	assert_null(v);
	assert_int_equal(cap, 0);
}

/* A room already past half of SIZE_MAX cannot double: an error, not a room that wrapped. */
static void test_room_past_half_does_not_wrap(void **state)
{
	char *v = malloc(1), *was = v;
	size_t cap = SIZE_MAX / 2 + 1; /* as if: hlb_grow() must fail before it looks at v */

	assert_non_null(v);
	assert_int_equal(hlb_grow((void **)&v, &cap, SIZE_MAX / 2 + 2, 1, 64), -ENOMEM);
	assert_ptr_equal(v, was);
	assert_int_equal(cap, SIZE_MAX / 2 + 1);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_grows_to_first),
		cmocka_unit_test(test_room_enough_changes_nothing),
		cmocka_unit_test(test_need_past_twice_the_room),
		cmocka_unit_test(test_overflow_leaves_the_array),
		cmocka_unit_test(test_room_past_half_does_not_wrap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
