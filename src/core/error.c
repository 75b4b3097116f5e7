// SPDX-License-Identifier: MIT
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashlb/error.h"

static bool quote_opens(const char *src, size_t i)
{
	return src[i] == '\'' && (i == 0 || src[i - 1] == ' ' || src[i - 1] == '(');
}

static bool quote_closes(const char *src, size_t i)
{
	char c = src[i + 1];

	return src[i] == '\'' && (c == '\0' || c == ' ' || c == ',' || c == ':' || c == ')');
}

/*
 * In <src> (<len> bytes), the longest value in single quotes ("'...'": opened at the start or
 * after a space or '(', closed before the end, a space, ',', ':' or ')'): its first byte in
 * *<ret_at>, its length returned; 0 if none.
 */
static size_t longest_quoted(const char *src, size_t len, size_t *ret_at)
{
	size_t best = 0;

	for (size_t i = 0; i < len; i++) {
		size_t j = i + 1;

		if (!quote_opens(src, i))
			continue;
		while (j < len && !quote_closes(src, j))
			j++;
		if (j == len)
			break;
		if (j - i - 1 > best) {
			best = j - i - 1;
			*ret_at = i + 1;
		}
		i = j;
	}
	return best;
}

static bool hex_digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* The length of the escape a config error writes for a byte it cannot show (config.c's
 * one_line(): \n \t \r, \xHH, \uHHHH) at <s>, of the <n> bytes left; 0 if none is there. */
static size_t escape_len(const char *s, size_t n)
{
	if (n < 2 || s[0] != '\\')
		return 0;
	if (s[1] == 'n' || s[1] == 't' || s[1] == 'r')
		return 2;
	if (s[1] == 'x' && n >= 4 && hex_digits(s + 2, 2))
		return 4;
	if (s[1] == 'u' && n >= 6 && hex_digits(s + 2, 4))
		return 6;
	return 0;
}

/* Where the escape <at> is within (of <src>'s <n> bytes) starts, or <at> if it is within none:
 * the nearest backslash before it, an escape's body holding none. */
static size_t escape_start(const char *src, size_t n, size_t at)
{
	for (size_t b = at; b-- > 0 && at - b < 6;) {
		if (src[b] == '\\')
			return at < b + escape_len(src + b, n - b) ? b : at;
	}
	return at;
}

/* <n> bytes of <src> joined by "..." from its <head> first and its <tail> last, into <dst>;
 * each end cut back to a UTF-8 character's start, and out of an escape (escape_len(): a cut
 * in one left "\u20..." and "...b", a 'b' the value does not hold). Returns the bytes
 * written. */
static size_t cut_join(char *dst, const char *src, size_t n, size_t head, size_t tail)
{
	size_t from = n - tail, b;

	while (from < n && ((unsigned char)src[from] & 0xc0) == 0x80)
		from++;
	b = escape_start(src, n, from);
	if (b != from)
		from = b + escape_len(src + b, n - b);
	while (head && ((unsigned char)src[head] & 0xc0) == 0x80)
		head--;
	head = escape_start(src, n, head);
	memcpy(dst, src, head);
	memcpy(dst + head, "...", 3);
	memcpy(dst + head + 3, src + from, n - from);
	return head + 3 + (n - from);
}

/* The fewest bytes of a quoted value kept when it is cut: fewer, and the middle is cut. */
#define FIT_QUOTED_MIN 16

void hashlb_err_fit(char *dst, size_t size, const char *src)
{
	size_t len = strlen(src), at = 0, q, keep, o;

	if (len < size || size < 8) {
		snprintf(dst, size, "%s", src);
		return;
	}
	/* What is wrong is said around the value it quotes ("name 'x...x' must be 1 to 255
	 * bytes ..."): the longest quoted value is cut in its middle, the rest kept whole, if
	 * that is enough; else the message itself is, keeping both its ends. */
	q = longest_quoted(src, len, &at);
	if (q && len - q + 3 + FIT_QUOTED_MIN <= size - 1) {
		keep = size - 1 - (len - q) - 3;
		memcpy(dst, src, at);
		o = at + cut_join(dst + at, src + at, q, keep / 2, keep - keep / 2);
		memcpy(dst + o, src + at + q, len - at - q + 1);
		return;
	}
	o = cut_join(dst, src, len, size - 1 - 3 - (size - 1) / 2, (size - 1) / 2);
	dst[o] = '\0';
}

int hashlb_verr(struct hashlb_error *err, int ret, enum hashlb_err_reason reason, const char *fmt,
		va_list ap)
{
	va_list again;
	char *full;
	int n;

	if (!err)
		return ret;
	memset(err, 0, sizeof(*err));
	err->reason = reason;
	va_copy(again, ap);
	n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	if (n >= (int)sizeof(err->msg) && (full = malloc((size_t)n + 1))) {
		vsnprintf(full, (size_t)n + 1, fmt, again);
		hashlb_err_fit(err->msg, sizeof(err->msg), full);
		free(full);
	}
	va_end(again);
	return ret;
}

int hashlb_err(struct hashlb_error *err, int ret, enum hashlb_err_reason reason, const char *fmt,
	       ...)
{
	va_list ap;

	va_start(ap, fmt);
	ret = hashlb_verr(err, ret, reason, fmt, ap);
	va_end(ap);
	return ret;
}

static const char *const reason_names[HASHLB_ERR_MAX] = {
	[HASHLB_ERR_NONE] = "none",
	[HASHLB_ERR_NO_BACKENDS] = "no-backends",
	[HASHLB_ERR_TOO_MANY_BACKENDS] = "too-many-backends",
	[HASHLB_ERR_BAD_NAME] = "bad-name",
	[HASHLB_ERR_DUPLICATE_NAME] = "duplicate-name",
	[HASHLB_ERR_ALL_WEIGHTS_ZERO] = "all-weights-zero",
	[HASHLB_ERR_WEIGHT_RANGE] = "weight-range",
	[HASHLB_ERR_SIZE_RANGE] = "size-range",
	[HASHLB_ERR_NOT_PRIME] = "not-prime",
	[HASHLB_ERR_SIZE_TOO_SMALL] = "size-too-small",
	[HASHLB_ERR_MEMORY_CAP] = "memory-cap",
	[HASHLB_ERR_BAD_SCHEME] = "bad-scheme",
	[HASHLB_ERR_NOMEM] = "no-memory",
	[HASHLB_ERR_CONFIG] = "config",
	[HASHLB_ERR_SYSTEM] = "system",
	[HASHLB_ERR_LOOP] = "loop",
};

const char *hashlb_err_reason_name(enum hashlb_err_reason reason)
{
	if ((unsigned)reason >= HASHLB_ERR_MAX)
		return "unknown";
	return reason_names[reason];
}
