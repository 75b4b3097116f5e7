/* Fuzzes the admin answers' buffer (src/control/buf.c), which writes every number and name of /metrics and the JSON answers: hlb_buf_shortest() and hlb_buf_u64() read byte for byte as printf writes them ("%.17g" for an integer below 1e17, the first of "%.15g".."%.17g" that reads back otherwise; "%" PRIu64) for any bits; a JSON string or a label value, read back by a strict reader, is the input with each byte that is not UTF-8 as U+FFFD (and, in a label, control bytes but LF dropped); appends of any size at any fill keep every byte. */
// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
	if (ok)
		return;
	fprintf(stderr, "contract broken: %s\n", what);
	abort();
}

/* A shadow of what the buffer must hold, appended to alongside it. */
struct shadow {
	char *p;
	size_t len;
};

static void shadow_put(struct shadow *s, const void *data, size_t n)
{
	s->p = realloc(s->p, s->len + n + 1);
	if (!s->p)
		abort();
	memcpy(s->p + s->len, data, n);
	s->len += n;
}

static void same(const struct hlb_buf *b, const struct shadow *s, const char *what)
{
	check(!b->oom, "no append failed");
	check(b->len == s->len, what);
	check(b->len == 0 || (b->len < b->cap && !memcmp(b->p, s->p, s->len)), what);
	check(!b->p || b->p[b->len] == '\0', "the content a string");
}

/*
 * The well-formed UTF-8 sequence at <s> (<n> bytes left), by the ranges of
 * Unicode's table 3-7 (not by decoding, as buf.c does): its length, or 0.
 */
static size_t utf8_ref(const uint8_t *s, size_t n)
{
	uint8_t lo = 0x80, hi = 0xbf;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, lo = s[0] == 0xe0 ? 0xa0 : 0x80, hi = s[0] == 0xed ? 0x9f : 0xbf;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, lo = s[0] == 0xf0 ? 0x90 : 0x80, hi = s[0] == 0xf4 ? 0x8f : 0xbf;
	else
		return 0;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/* <in> (a string) as the reader must find it: U+FFFD for each byte that is not UTF-8;
 * for a label, control bytes but LF dropped. */
static void expected(struct shadow *want, const uint8_t *in, size_t n, bool json)
{
	for (size_t i = 0; i < n;) {
		size_t k = utf8_ref(in + i, n - i);

		if (!k) {
			shadow_put(want, "\xef\xbf\xbd", 3);
			i++;
			continue;
		}
		if (json || in[i] >= 0x20 || in[i] == '\n')
			shadow_put(want, in + i, k);
		i += k;
	}
}

static int hex(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A code point as UTF-8. */
static void put_cp(struct shadow *s, uint32_t cp)
{
	uint8_t u[4];
	size_t n;

	if (cp < 0x80)
		u[0] = (uint8_t)cp, n = 1;
	else if (cp < 0x800)
		u[0] = (uint8_t)(0xc0 | cp >> 6), u[1] = (uint8_t)(0x80 | (cp & 0x3f)), n = 2;
	else
		u[0] = (uint8_t)(0xe0 | cp >> 12), u[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f)),
		u[2] = (uint8_t)(0x80 | (cp & 0x3f)), n = 3;
	shadow_put(s, u, n);
}

/*
 * <out> read back strictly, as a JSON string (RFC 8259) or a Prometheus label
 * value (the text format: \\, \" and \n escaped, any other UTF-8 as it is),
 * into <got>. Aborts on what such a reader refuses.
 */
static void read_back(const uint8_t *out, size_t n, bool json, struct shadow *got)
{
	size_t i = 1;

	check(n >= 2 && out[0] == '"' && out[n - 1] == '"', "quoted");
	while (i < n - 1) {
		size_t k;

		if (out[i] != '\\') {
			check(out[i] != '"', "a quote inside escaped");
			check(out[i] != '\n', "a line feed escaped");
			check(!json || out[i] >= 0x20,
			      "a JSON string holds no control byte as it is");
			k = utf8_ref(out + i, n - 1 - i);
			check(k != 0, "the output UTF-8");
			shadow_put(got, out + i, k);
			i += k;
			continue;
		}
		check(i + 1 < n - 1, "an escape whole");
		switch (out[i + 1]) {
		case '"':
		case '\\':
			shadow_put(got, out + i + 1, 1);
			i += 2;
			break;
		case 'n':
			shadow_put(got, "\n", 1);
			i += 2;
			break;
		case 'u': {
			uint32_t cp = 0;

			check(json, "a label has no \\u escape");
			check(i + 6 < n, "a \\u escape whole");
			for (int d = 0; d < 4; d++) {
				int x = hex(out[i + 2 + d]);

				check(x >= 0, "a \\u escape in hex");
				cp = cp << 4 | (uint32_t)x;
			}
			check(cp < 0xd800 || cp > 0xdfff, "no lone surrogate escaped");
			put_cp(got, cp);
			i += 6;
			break;
		}
		default:
			check(false, "only the escapes the reader knows");
		}
	}
}

static void fuzz_string(const uint8_t *data, size_t size, bool json)
{
	struct hlb_buf b = { 0 };
	struct shadow want = { 0 }, got = { 0 };
	char *s = malloc(size + 1);
	size_t n;

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	n = strlen(s); /* the string ends at the first NUL, as a name does */
	if (json)
		hlb_buf_json_str(&b, s);
	else
		hlb_buf_label(&b, s);
	check(!b.oom && b.p && b.p[b.len] == '\0', "a string");
	expected(&want, (const uint8_t *)s, n, json);
	read_back((const uint8_t *)b.p, b.len, json, &got);
	check(got.len == want.len && (!want.len || !memcmp(got.p, want.p, want.len)),
	      "read back, the input with U+FFFD for what is not UTF-8");
	free(s);
	free(want.p);
	free(got.p);
	hlb_buf_free(&b);
}

/* What hlb_buf_shortest() writes for <d>, by printf: an integer below 1e17 (not -0) as
 * "%.17g", whole; any other number as the first of "%.15g" to "%.17g" that reads back as
 * <d> (NaN none: "%.17g"). The length. */
static int shortest_want(double d, char *want, size_t size)
{
	int prec = d > -1e17 && d < 1e17 && d == trunc(d) && !(d == 0 && signbit(d)) ? 17 : 15;
	int n = 0;

	for (; prec <= 17; prec++) {
		n = snprintf(want, size, "%.*g", prec, d);
		if (strtod(want, NULL) == d)
			return n;
	}
	return snprintf(want, size, "%.17g", d);
}

/*
 * A sequence of appends to one buffer, each checked against a shadow copy:
 * numbers (any bits), bytes, strings and formatted ones of the sizes the
 * input gives, across the buffer's growth, and resets.
 */
static void fuzz_appends(const uint8_t *data, size_t size)
{
	struct hlb_buf b = { 0 };
	struct shadow s = { 0 };
	char want[64];

	while (size >= 9) {
		uint8_t op = data[0];
		uint64_t x;
		double d;
		int n;

		memcpy(&x, data + 1, 8);
		memcpy(&d, data + 1, 8);
		data += 9;
		size -= 9;
		switch (op % 6) {
		case 0:
			hlb_buf_shortest(&b, d);
			n = shortest_want(d, want, sizeof(want));
			shadow_put(&s, want, (size_t)n);
			same(&b, &s, "hlb_buf_shortest() as printf");
			break;
		case 1:
			hlb_buf_u64(&b, x);
			n = snprintf(want, sizeof(want), "%" PRIu64, x);
			shadow_put(&s, want, (size_t)n);
			same(&b, &s, "hlb_buf_u64() as PRIu64");
			break;
		case 2: {
			/* <x % 5000> bytes of the rest of the input (repeated if short) */
			size_t len = x % 5000;
			char *p = malloc(len + 1);

			if (!p)
				abort();
			for (size_t i = 0; i < len; i++)
				p[i] = size ? (char)data[i % size] : (char)i;
			hlb_buf_put(&b, p, len);
			shadow_put(&s, p, len);
			same(&b, &s, "hlb_buf_put() appends the bytes");
			free(p);
			break;
		}
		case 3: {
			/* a formatted append of <x % 3000> characters */
			int w = (int)(x % 3000);

			hlb_buf_printf(&b, "%*" PRIu64, w, x);
			n = snprintf(NULL, 0, "%*" PRIu64, w, x);
			{
				char *p = malloc((size_t)n + 1);

				if (!p)
					abort();
				snprintf(p, (size_t)n + 1, "%*" PRIu64, w, x);
				shadow_put(&s, p, (size_t)n);
				free(p);
			}
			same(&b, &s, "hlb_buf_printf() whole at any room");
			break;
		}
		case 4:
			hlb_buf_puts(&b, "");
			same(&b, &s, "an empty append changes nothing");
			break;
		case 5:
			hlb_buf_reset(&b);
			s.len = 0;
			same(&b, &s, "a reset empties");
			break;
		}
	}
	hlb_buf_free(&b);
	check(!b.p && !b.len && !b.cap && !b.oom, "freed to empty");
	free(s.p);
}

/* Input: one byte of mode (0: appends; 1: a JSON string; 2: a label value), then its data. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0:
		fuzz_appends(data + 1, size - 1);
		break;
	case 1:
		fuzz_string(data + 1, size - 1, true);
		break;
	case 2:
		fuzz_string(data + 1, size - 1, false);
		break;
	}
	return 0;
}
