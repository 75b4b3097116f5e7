// SPDX-License-Identifier: MIT
/* logfmt lines on stderr, one write(2) per line so threads do not interleave. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static const char *const level_names[HLB_LOG_MAX] = { "debug", "info", "warn", "error" };
static enum hlb_log_level min_level = HLB_LOG_INFO;

void hlb_log_set_level(enum hlb_log_level level)
{
	min_level = level;
}

int hlb_log_level_parse(const char *s, enum hlb_log_level *ret_level)
{
	for (int i = 0; i < HLB_LOG_MAX; i++)
		if (strcmp(s, level_names[i]) == 0) {
			*ret_level = i;
			return 0;
		}
	return -EINVAL;
}

const char *hlb_log_quote(const char *s, char *buf, size_t size)
{
	size_t o = 0;
	bool plain = *s != '\0';

	for (const char *p = s; *p; p++)
		if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || *p == 0x7f)
			plain = false;
	if (plain)
		return s;
	if (size < 3)
		return "\"\"";
	buf[o++] = '"';
	for (const char *p = s; *p && o + 3 < size; p++) {
		if (*p == '"' || *p == '\\')
			buf[o++] = '\\';
		buf[o++] = (*p == '\n' || *p == '\t') ? ' ' : *p;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

void hlb_log(enum hlb_log_level level, const char *msg, const char *fmt, ...)
{
	char line[1024], qbuf[512];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n;

	if (level < min_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s msg=%s",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     ts.tv_nsec / 1000000, level_names[level],
		     hlb_log_quote(msg, qbuf, sizeof(qbuf)));
	if (fmt && n > 0 && (size_t)n < sizeof(line) - 2) {
		line[n++] = ' ';
		va_start(ap, fmt);
		int m = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
		va_end(ap);
		if (m > 0)
			n += m;
	}
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	while (write(STDERR_FILENO, line, n) < 0 && errno == EINTR)
		;
}
