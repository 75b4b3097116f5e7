/* SPDX-License-Identifier: MIT */
/*
 * Errors returned by hashlb's libraries. Library code never prints: it
 * fills a struct hashlb_error and returns a negative errno; main() prints.
 */
#ifndef HASHLB_ERROR_H
#define HASHLB_ERROR_H

#include <stdarg.h>
#include <stddef.h>

enum hashlb_err_reason {
	HASHLB_ERR_NONE = 0,
	HASHLB_ERR_NO_BACKENDS, /* the backend list is empty */
	HASHLB_ERR_TOO_MANY_BACKENDS, /* more than HASHLB_BACKENDS_MAX */
	HASHLB_ERR_BAD_NAME, /* empty name or longer than HASHLB_NAME_MAX */
	HASHLB_ERR_DUPLICATE_NAME, /* two backends with the same name */
	HASHLB_ERR_ALL_WEIGHTS_ZERO, /* no backend has a positive weight */
	HASHLB_ERR_WEIGHT_RANGE, /* weight above HASHLB_WEIGHT_MAX */
	HASHLB_ERR_SIZE_RANGE, /* V or M outside its range */
	HASHLB_ERR_NOT_PRIME, /* Maglev M is not prime */
	HASHLB_ERR_SIZE_TOO_SMALL, /* Maglev M smaller than the backend count */
	HASHLB_ERR_MEMORY_CAP, /* the table would exceed the memory cap */
	HASHLB_ERR_BAD_SCHEME, /* unknown scheme */
	HASHLB_ERR_NOMEM, /* allocation failed */
	HASHLB_ERR_CONFIG, /* config file error: see file/line/column */
	HASHLB_ERR_SYSTEM, /* a system call failed: see msg */
	HASHLB_ERR_LOOP, /* services would forward to one another in a ring */
	HASHLB_ERR_MAX
};

struct hashlb_error {
	enum hashlb_err_reason reason;
	/* Position in a config file; file is NULL and line/column 0 otherwise. */
	const char *file;
	int line;
	int column;
	char msg[256];
};

/*
 * Record an error in <err> (which may be NULL) and return <ret>, so that
 * callers can write "return hashlb_err(err, -EINVAL, REASON, fmt, ...)".
 */
int hashlb_err(struct hashlb_error *err, int ret, enum hashlb_err_reason reason, const char *fmt,
	       ...) __attribute__((format(printf, 4, 5)));
int hashlb_verr(struct hashlb_error *err, int ret, enum hashlb_err_reason reason, const char *fmt,
		va_list ap);

/*
 * <src> into <dst> (<size> bytes): whole if it fits; else, if that is enough,
 * its longest value in single quotes cut in its middle ("'bbb...bbb'", at UTF-8
 * characters, and between the escapes a config error writes, never in one: \u200b,
 * \x01, \n), the rest whole, so that what a message says before and after a
 * long quoted value is kept ("backend name '...' must be 1 to 255 bytes ...":
 * the middle of the message cut, as before, lost the rule); else its start
 * and its end joined by "...".
 */
void hashlb_err_fit(char *dst, size_t size, const char *src);

/* A short stable identifier for <reason>, e.g. "duplicate-name". */
const char *hashlb_err_reason_name(enum hashlb_err_reason reason);

#endif
