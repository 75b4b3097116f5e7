// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <string.h>

#include "hashlb/error.h"

int hashlb_verr(struct hashlb_error *err, int ret, enum hashlb_err_reason reason, const char *fmt,
		va_list ap)
{
	if (!err)
		return ret;
	memset(err, 0, sizeof(*err));
	err->reason = reason;
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
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
