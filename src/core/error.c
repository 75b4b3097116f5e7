// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashlb/error.h"

void hashlb_err_fit(char *dst, size_t size, const char *src)
{
	size_t len = strlen(src), head, tail;

	if (len < size || size < 8) {
		snprintf(dst, size, "%s", src);
		return;
	}
	/* what is wrong is often said after the quoted value: keep both ends */
	tail = len - (size - 1) / 2;
	while (tail < len && ((unsigned char)src[tail] & 0xc0) == 0x80)
		tail++;
	head = size - 1 - 3 - (len - tail);
	while (head && ((unsigned char)src[head] & 0xc0) == 0x80)
		head--;
	memcpy(dst, src, head);
	memcpy(dst + head, "...", 3);
	memcpy(dst + head + 3, src + tail, len - tail + 1);
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
};

const char *hashlb_err_reason_name(enum hashlb_err_reason reason)
{
	if ((unsigned)reason >= HASHLB_ERR_MAX)
		return "unknown";
	return reason_names[reason];
}
