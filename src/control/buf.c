// SPDX-License-Identifier: MIT
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashlb/grow.h"
#include "buf.h"

static bool buf_reserve(struct hlb_buf *b, size_t n)
{
	if (b->oom)
		return false;
	if (n > SIZE_MAX - 1 - b->len ||
	    hlb_grow((void **)&b->p, &b->cap, b->len + n + 1, 1, 1024) < 0) {
		b->oom = true;
		return false;
	}
	return true;
}

void hlb_buf_put(struct hlb_buf *b, const void *data, size_t n)
{
	if (!buf_reserve(b, n))
		return;
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void hlb_buf_puts(struct hlb_buf *b, const char *s)
{
	hlb_buf_put(b, s, strlen(s));
}

/* Formatted once into the room the buffer has, again only when it did not fit. */
void hlb_buf_printf(struct hlb_buf *b, const char *fmt, ...)
{
	size_t room = b->cap > b->len ? b->cap - b->len : 0;
	va_list ap;
	int n;

	if (b->oom)
		return;
	va_start(ap, fmt);
	n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n < 0) {
		if (room)
			b->p[b->len] = '\0';
		return;
	}
	if ((size_t)n >= room) {
		if (!buf_reserve(b, (size_t)n)) {
			if (room)
				b->p[b->len] = '\0';
			return;
		}
		va_start(ap, fmt);
		vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

void hlb_buf_u64(struct hlb_buf *b, uint64_t v)
{
	char d[20], *p = d + sizeof(d);

	do
		*--p = (char)('0' + v % 10);
	while (v /= 10);
	hlb_buf_put(b, p, (size_t)(d + sizeof(d) - p));
}

/* <v> if it is an integer below 1e17, as %.17g writes it (whole, without a point
 * or an exponent), and true; false, nothing written, for any other number. */
static bool put_integer(struct hlb_buf *b, double v)
{
	if (!(v > -1e17 && v < 1e17 && v == (double)(int64_t)v && !(v == 0 && signbit(v))))
		return false;
	if (v < 0) {
		hlb_buf_put(b, "-", 1);
		v = -v;
	}
	hlb_buf_u64(b, (uint64_t)v);
	return true;
}

void hlb_buf_shortest(struct hlb_buf *b, double v)
{
	char s[32];

	if (put_integer(b, v))
		return;
	/* A count of ns over 1e9 is seldom exact in binary: %.17g wrote
	 * 1234567 ns as 0.0012345670000000001, where 0.001234567 reads back
	 * as the same double. Every double 15 digits name does. */
	for (int prec = 15; prec < 17; prec++) {
		snprintf(s, sizeof(s), "%.*g", prec, v);
		if (strtod(s, NULL) == v) {
			hlb_buf_puts(b, s);
			return;
		}
	}
	hlb_buf_printf(b, "%.17g", v);
}

/*
 * The length of the UTF-8 character at <s> (1 to 4), or 0 if the bytes there
 * are not one: a stray continuation byte, a sequence cut short, an overlong
 * form, a surrogate or a code point past U+10FFFF.
 */
static size_t utf8_len(const unsigned char *s)
{
	size_t n;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) /* a NUL ends it here too */
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/*
 * <s> quoted and escaped, as a JSON string or a Prometheus label value.
 * Both must be UTF-8; bytes that are not (a name in a request: ?service=%FF,
 * echoed in the error) become U+FFFD, which a client's JSON parser takes
 * rather than failing on the whole answer.
 */
static void buf_escaped(struct hlb_buf *b, const char *s, bool json)
{
	hlb_buf_put(b, "\"", 1);
	while (s && *s) {
		unsigned char c = (unsigned char)*s;
		size_t n;

		if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
			/* a run of plain ASCII (most names are all of it): in one put */
			const unsigned char *e = (const unsigned char *)s + 1;

			while (*e >= 0x20 && *e < 0x80 && *e != '"' && *e != '\\')
				e++;
			hlb_buf_put(b, s, (size_t)((const char *)e - s));
			s = (const char *)e;
			continue;
		}
		n = utf8_len((const unsigned char *)s);
		if (c == '"' || c == '\\')
			hlb_buf_printf(b, "\\%c", c);
		else if (c == '\n')
			hlb_buf_puts(b, "\\n");
		else if (c < 0x20 && json)
			hlb_buf_printf(b, "\\u%04x", c);
		else if (!n)
			hlb_buf_puts(b, json ? "\\ufffd" : "\xef\xbf\xbd");
		else if (c >= 0x20)
			hlb_buf_put(b, s, n);
		s += n ? n : 1;
	}
	hlb_buf_put(b, "\"", 1);
}

void hlb_buf_json_str(struct hlb_buf *b, const char *s)
{
	if (!s)
		hlb_buf_puts(b, "null");
	else
		buf_escaped(b, s, true);
}

void hlb_buf_label(struct hlb_buf *b, const char *s)
{
	buf_escaped(b, s, false);
}

void hlb_buf_reset(struct hlb_buf *b)
{
	b->len = 0;
	b->oom = false;
	if (b->p)
		b->p[0] = '\0';
}

void hlb_buf_free(struct hlb_buf *b)
{
	free(b->p);
	*b = (struct hlb_buf){ 0 };
}
