// SPDX-License-Identifier: MIT
/*
 * The admin answers' buffer (src/control/buf.c): the numbers /metrics writes
 * without printf read byte for byte as printf's "%.17g" and "%" PRIu64 would
 * write them, and a metric's value in the fewest digits that read back as it
 * (a count of ns in seconds: 0.001234567, not 0.0012345670000000001); JSON strings and label values are UTF-8 whatever bytes a
 * request or a name held; a formatted append is whole whether or not it fits
 * the room the buffer had.
 */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control/buf.h"

/* hlb_buf_shortest(<v>) as printf writes it: an integer below 1e17 (not -0) as "%.17g", whole
 * (hlb_buf_u64(), not printf); any other number in the first of "%.15g" to "%.17g" that
 * reads back as <v>. */
static void assert_as_printf(double v)
{
	struct hlb_buf b = { 0 };
	char want[64];
	int prec = 15;

	if (v > -1e17 && v < 1e17 && v == trunc(v) && !(v == 0 && signbit(v)))
		prec = 17;
	for (; prec <= 17; prec++) {
		snprintf(want, sizeof(want), "%.*g", prec, v);
		if (strtod(want, NULL) == v)
			break;
	}
	if (prec > 17)
		snprintf(want, sizeof(want), "%.17g", v); /* NaN */
	hlb_buf_shortest(&b, v);
	assert_false(b.oom);
	assert_string_equal(b.p, want);
	assert_int_equal(b.len, strlen(want));
	hlb_buf_free(&b);
}

static void assert_u64(uint64_t v)
{
	struct hlb_buf b = { 0 };
	char want[32];

	snprintf(want, sizeof(want), "%" PRIu64, v);
	hlb_buf_u64(&b, v);
	assert_string_equal(b.p, want);
	hlb_buf_free(&b);
}

static void test_shortest_reads_as_printf(void **state)
{
	static const double edges[] = {
		0.0,
		-0.0,
		1.0,
		-1.0,
		0.5,
		1.5,
		65535.0 / 65536.0,
		3.4913000000000003e-05,
		1e16,
		1e17 - 16, /* the last double below 1e17 */
		1e17,
		1e17 + 16,
		-1e17,
		-(1e17 - 16),
		9007199254740992.0, /* 2^53 */
		9007199254740993.0,
		18446744073709551615.0, /* UINT64_MAX as a double: 2^64 */
		9223372036854775807.0, /* 2^63 */
		-9223372036854775808.0,
		1e300,
		-1e-300,
		4.9e-324,
		INFINITY,
		-INFINITY,
		NAN,
	};
	uint64_t x = 0x9e3779b97f4a7c15u;

	(void)state;
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		assert_as_printf(edges[i]);
	for (int i = 0; i < 64; i++) {
		assert_as_printf((double)(UINT64_C(1) << i));
		assert_as_printf((double)((UINT64_C(1) << i) - 1));
		assert_as_printf(ldexp(1.0, -i));
	}
	for (int i = 0; i < 200000; i++) {
		/* xorshift: integers of every length, counters as doubles, fractions */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		assert_as_printf((double)(x >> (x % 64)));
		assert_as_printf((double)(x >> 11) / 1e6);
		assert_as_printf(-(double)(x >> (x % 64)));
	}
}

/* hlb_buf_shortest(<v>): <want> if given; else whatever reads back as <v>, no longer than %.17g. */
static void assert_shortest(double v, const char *want)
{
	struct hlb_buf b = { 0 };
	char g17[64];

	snprintf(g17, sizeof(g17), "%.17g", v);
	hlb_buf_shortest(&b, v);
	assert_false(b.oom);
	if (want)
		assert_string_equal(b.p, want);
	assert_true(strtod(b.p, NULL) == v);
	assert_true(b.len <= strlen(g17));
	assert_int_equal(b.len, strlen(b.p));
	hlb_buf_free(&b);
}

static void test_shortest_reads_back_in_fewer_digits(void **state)
{
	uint64_t x = 0x9e3779b97f4a7c15u;

	(void)state;
	/* seconds of an integer count of ns and us, as /metrics writes them */
	assert_shortest(1234567 / 1e9, "0.001234567");
	assert_shortest(12345 / 1e6, "0.012345");
	assert_shortest(0.1 + 0.2, "0.30000000000000004"); /* 17 digits are needed */
	assert_shortest(1e16, "10000000000000000");
	assert_shortest(1e17, "1e+17");
	assert_shortest(-0.0, "-0");
	assert_shortest(3.4913000000000003e-05, "3.4913e-05");
	for (int i = 0; i < 200000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		assert_shortest((double)(x >> 20) / 1e9, NULL);
		assert_shortest(ldexp((double)(x >> 11), -(int)(x % 80)), NULL);
	}
}

static void test_u64_reads_as_printf(void **state)
{
	uint64_t x = 1;

	(void)state;
	assert_u64(0);
	assert_u64(UINT64_MAX);
	for (int i = 0; i < 20; i++, x *= 10) {
		assert_u64(x - 1);
		assert_u64(x);
	}
}

/* JSON strings (hlb_buf_json_str()) and Prometheus label values (hlb_buf_label()). */
static void test_strings_are_escaped_utf8(void **state)
{
	static const struct {
		bool json;
		const char *in, *out;
	} cases[] = {
		{ true, NULL, "null" },
		{ true, "web-1", "\"web-1\"" },
		{ true, "q\"b\\\n\x01", "\"q\\\"b\\\\\\n\\u0001\"" },
		{ true, "\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80",
		  "\"\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80\"" },
		/* ?service=%FF%FE, echoed in "no service '...'" */
		{ true, "\xff\xfe", "\"\\ufffd\\ufffd\"" },
		{ true, "a\xc3(", "\"a\\ufffd(\"" }, /* a sequence cut by an ASCII byte */
		{ true, "\xc0\xaf", "\"\\ufffd\\ufffd\"" }, /* overlong '/' */
		{ true, "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"" }, /* a surrogate */
		{ true, "\xf4\x90\x80\x80",
		  "\"\\ufffd\\ufffd\\ufffd\\ufffd\"" }, /* past U+10FFFF */
		{ true, "x\xe2\x82", "\"x\\ufffd\\ufffd\"" }, /* cut short by the end */
		{ true, "plain ASCII run\x7f, then \"", "\"plain ASCII run\x7f, then \\\"\"" },
		{ false, "web-1", "\"web-1\"" },
		{ false, "", "\"\"" },
		{ false, "a\\b\"c\nd", "\"a\\\\b\\\"c\\nd\"" },
		{ false, "\\\\", "\"\\\\\\\\\"" },
		{ false, "x\x01y\x1fz\x7f", "\"xyz\x7f\"" }, /* control bytes dropped, DEL kept */
		{ false,
		  "b\xc3\xa4"
		  "ck \xe2\x82\xac",
		  "\"b\xc3\xa4"
		  "ck \xe2\x82\xac\"" },
		{ false,
		  "a\xff"
		  "b",
		  "\"a\xef\xbf\xbd"
		  "b\"" }, /* not UTF-8: U+FFFD */
		{ false, "x\xe2\x82", "\"x\xef\xbf\xbd\xef\xbf\xbd\"" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct hlb_buf b = { 0 };

		if (cases[i].json)
			hlb_buf_json_str(&b, cases[i].in);
		else
			hlb_buf_label(&b, cases[i].in);
		assert_false(b.oom);
		assert_string_equal(b.p, cases[i].out);
		hlb_buf_free(&b);
	}
}

/* Appends that fit the room left, and that do not, by one byte and by much. */
static void test_printf_whole_at_any_room(void **state)
{
	char want[4096];
	size_t want_len = 0;

	(void)state;
	for (size_t first = 0; first < 1100; first += 7) {
		struct hlb_buf b = { 0 };

		want_len = 0;
		for (size_t i = 0; i < first; i++)
			hlb_buf_put(&b, "a", 1);
		memset(want, 'a', first);
		want_len = first;
		for (int k = 0; k < 40; k++) {
			int n = snprintf(want + want_len, sizeof(want) - want_len, "<%d:%0*d>", k,
					 k * 3, k);

			hlb_buf_printf(&b, "<%d:%0*d>", k, k * 3, k);
			want_len += (size_t)n;
		}
		assert_false(b.oom);
		assert_int_equal(b.len, want_len);
		assert_memory_equal(b.p, want, want_len);
		assert_int_equal(b.p[b.len], '\0');
		hlb_buf_free(&b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shortest_reads_as_printf),
		cmocka_unit_test(test_shortest_reads_back_in_fewer_digits),
		cmocka_unit_test(test_u64_reads_as_printf),
		cmocka_unit_test(test_strings_are_escaped_utf8),
		cmocka_unit_test(test_printf_whole_at_any_room),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
