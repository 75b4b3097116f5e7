// SPDX-License-Identifier: MIT
#include <stdarg.h>
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

static void buf_escaped(struct hlb_buf *b, const char *s, bool json)
{
	hlb_buf_put(b, "\"", 1);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			hlb_buf_printf(b, "\\%c", c);
		else if (c == '\n')
			hlb_buf_puts(b, "\\n");
		else if (c < 0x20 && json)
			hlb_buf_printf(b, "\\u%04x", c);
		else if (c >= 0x20)
			hlb_buf_put(b, s, 1);
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
