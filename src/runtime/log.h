/* SPDX-License-Identifier: MIT */
/*
 * The daemon's log: logfmt lines on stderr,
 *   ts=2026-11-30T17:00:00.123Z level=info msg="listening" service=web addr=127.0.0.1:80
 * Used by the daemon and the data plane (never by the core library). The
 * hot path does not log; rare per-connection events are rate-limited by
 * their callers.
 */
#ifndef HASHLB_RUNTIME_LOG_H
#define HASHLB_RUNTIME_LOG_H

#include <stddef.h>

enum hlb_log_level { HLB_LOG_DEBUG = 0, HLB_LOG_INFO, HLB_LOG_WARN, HLB_LOG_ERROR, HLB_LOG_MAX };

void hlb_log_set_level(enum hlb_log_level level);
/* -EINVAL if <s> is not debug, info, warn or error. */
int hlb_log_level_parse(const char *s, enum hlb_log_level *ret_level);

/*
 * Log <msg> (quoted for you) followed by the key=value pairs of <fmt>
 * (printf-style, may be NULL). Values that may hold spaces or quotes must
 * go through hlb_log_quote().
 */
void hlb_log(enum hlb_log_level level, const char *msg, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* <s> as a logfmt value: as is if safe, else double-quoted and escaped. */
const char *hlb_log_quote(const char *s, char *buf, size_t size);

#endif
