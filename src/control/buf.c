// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

static bool buf_reserve(struct hlb_buf *b, size_t n)
{
	size_t cap;
	char *p;

	if (b->oom)
		return false;
	if (b->len + n + 1 <= b->cap)
		return true;
	cap = b->cap ? b->cap : 1024;
	while (cap < b->len + n + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
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

void hlb_buf_printf(struct hlb_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !buf_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
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
		size_t n = utf8_len((const unsigned char *)s);

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
