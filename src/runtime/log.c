// SPDX-License-Identifier: MIT
/*
 * logfmt lines on stderr, one write(2) per line so threads do not
 * interleave; the data plane's lines through a per-thread buffer.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
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

/* "2026-11-30T17:00:00" for <sec>. */
static void format_ts(time_t sec, char *buf, size_t size)
{
	struct tm tm;

	gmtime_r(&sec, &tm);
	if (!strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm))
		buf[0] = '\0';
}

/*
 * One line into <line> (<size> >= 3): the timestamp <ts> with <ms>, the
 * level, <msg> and the pairs of <fmt>, cut to at most <size> bytes, ending
 * with '\n' (no NUL). Returns its length.
 */
static size_t format_line(char *line, size_t size, const char *ts, long ms,
			  enum hlb_log_level level, const char *msg, const char *fmt, va_list ap)
{
	char qbuf[512];
	int n, m;

	n = snprintf(line, size, "ts=%s.%03ldZ level=%s msg=%s", ts, ms, level_names[level],
		     hlb_log_quote(msg, qbuf, sizeof(qbuf)));
	if (n < 0)
		n = 0;
	if (fmt && (size_t)n < size - 2) {
		line[n++] = ' ';
		m = vsnprintf(line + n, size - n, fmt, ap);
		if (m > 0)
			n += m;
	}
	/* cut: the '\n' takes the place of the last character or the NUL */
	if ((size_t)n > size - 1)
		n = size - 1;
	line[n++] = '\n';
	return n;
}

void hlb_log(enum hlb_log_level level, const char *msg, const char *fmt, ...)
{
	char line[HLB_LOG_LINE_MAX], ts[24];
	struct timespec now;
	va_list ap;
	size_t n;

	if (level < min_level)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	format_ts(now.tv_sec, ts, sizeof(ts));
	va_start(ap, fmt);
	n = format_line(line, sizeof(line), ts, now.tv_nsec / 1000000, level, msg, fmt, ap);
	va_end(ap);
	while (write(STDERR_FILENO, line, n) < 0 && errno == EINTR)
		;
}

/* ---- buffered, for the data plane ---------------------------------------- */

static _Atomic uint64_t dropped;

uint64_t hlb_log_dropped(void)
{
	return atomic_load_explicit(&dropped, memory_order_relaxed);
}

static void count_dropped(const char *p, size_t n)
{
	uint64_t lines = 0;

	for (const char *end = p + n; (p = memchr(p, '\n', end - p)); p++)
		lines++;
	atomic_fetch_add_explicit(&dropped, lines, memory_order_relaxed);
}

int hlb_logbuf_init(struct hlb_logbuf *lb, int fd, size_t size)
{
	struct stat st;

	if (size < 2 * HLB_LOG_LINE_MAX)
		return -EINVAL;
	*lb = (struct hlb_logbuf){ .fd = fd, .size = size, .ts_sec = -1 };
	/* Files and terminals do not wait for a reader, and a file system
	 * may answer EAGAIN to RWF_NOWAIT for a page it would have to read. */
	lb->nowait = fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
	lb->buf = malloc(size);
	return lb->buf ? 0 : -ENOMEM;
}

void hlb_logbuf_free(struct hlb_logbuf *lb)
{
	if (lb->buf && lb->tail > lb->head)
		count_dropped(lb->buf + lb->head, lb->tail - lb->head);
	free(lb->buf);
	lb->buf = NULL;
	lb->head = lb->tail = 0;
}

void hlb_logbuf_printf(struct hlb_logbuf *lb, enum hlb_log_level level, const char *msg,
		       const char *fmt, ...)
{
	struct timespec now;
	va_list ap;

	if (level < min_level)
		return;
	if (lb->size - lb->tail < HLB_LOG_LINE_MAX && lb->head) {
		memmove(lb->buf, lb->buf + lb->head, lb->tail - lb->head);
		lb->tail -= lb->head;
		lb->head = 0;
	}
	if (lb->size - lb->tail < HLB_LOG_LINE_MAX) {
		atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	if (now.tv_sec != lb->ts_sec) {
		lb->ts_sec = now.tv_sec;
		format_ts(now.tv_sec, lb->ts, sizeof(lb->ts));
	}
	va_start(ap, fmt);
	lb->tail += format_line(lb->buf + lb->tail, HLB_LOG_LINE_MAX, lb->ts, now.tv_nsec / 1000000,
				level, msg, fmt, ap);
	va_end(ap);
}

static ssize_t logbuf_write(struct hlb_logbuf *lb, const char *p, size_t n)
{
	struct iovec iov = { .iov_base = (void *)p, .iov_len = n };

	if (lb->nowait)
		return pwritev2(lb->fd, &iov, 1, -1, RWF_NOWAIT);
	return write(lb->fd, p, n);
}

size_t hlb_logbuf_flush(struct hlb_logbuf *lb)
{
	while (lb->head < lb->tail) {
		const char *p = lb->buf + lb->head;
		size_t n = lb->tail - lb->head;
		ssize_t r;

		/* Lines are shorter than PIPE_BUF: one ends in every PIPE_BUF bytes. */
		if (n > PIPE_BUF)
			n = (const char *)memrchr(p, '\n', PIPE_BUF) - p + 1;
		r = logbuf_write(lb, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			break;
		if (r <= 0) {
			count_dropped(p, lb->tail - lb->head);
			lb->head = lb->tail;
			break;
		}
		lb->head += r;
	}
	if (lb->head == lb->tail)
		lb->head = lb->tail = 0;
	return lb->tail - lb->head;
}

size_t hlb_logbuf_flush_wait(struct hlb_logbuf *lb, int timeout_ms)
{
	struct pollfd pfd = { .fd = lb->fd, .events = POLLOUT };
	struct timespec t0, t;
	int left = timeout_ms;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (hlb_logbuf_flush(lb) && left > 0) {
		if (poll(&pfd, 1, left) < 0 && errno != EINTR)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		left = timeout_ms -
		       (int)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
	}
	return lb->tail - lb->head;
}
