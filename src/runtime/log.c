// SPDX-License-Identifier: MIT
/*
 * logfmt lines on stderr, one writer at a time so threads do not interleave;
 * the data plane's lines through a per-thread buffer.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <hashlb/error.h>

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

/* The length of the well-formed UTF-8 sequence at <p> (<n> bytes), 0 if it is not one. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	uint32_t cp, min;
	size_t len;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		len = 2, cp = p[0] & 0x1f, min = 0x80;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		len = 3, cp = p[0] & 0x0f, min = 0x800;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		len = 4, cp = p[0] & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* Whether the <n> bytes at <p> make a logfmt value as they are. */
static bool quote_plain(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] <= ' ' || p[i] >= 0x7f || p[i] == '"' || p[i] == '=' || p[i] == '\\')
			return false;
	return n > 0;
}

/* The <n> bytes at <s>, no plain value, quoted into <buf> (hlb_log_quote()). */
static const char *quote_into(const unsigned char *p, size_t n, char *buf, size_t size)
{
	const unsigned char *end = p + n;
	size_t o = 0, len;

	if (size < 3)
		return "\"\"";
	buf[o++] = '"';
	for (; p < end; p += len) {
		char esc[5];
		const char *out = esc;
		size_t w = 2; /* the bytes written for the one at <p> */

		len = 1;
		if (*p == '"' || *p == '\\')
			esc[0] = '\\', esc[1] = (char)*p;
		else if (*p == '\n')
			memcpy(esc, "\\n", 2);
		else if (*p == '\r')
			memcpy(esc, "\\r", 2);
		else if (*p == '\t')
			memcpy(esc, "\\t", 2);
		else if (*p < ' ' || *p == 0x7f || (len = utf8_len(p, (size_t)(end - p))) == 0)
			len = 1, w = (size_t)snprintf(esc, sizeof(esc), "\\x%02x", *p);
		else
			out = (const char *)p, w = len;
		if (o + w + 2 > size) /* and the closing quote, the NUL */
			break;
		memcpy(buf + o, out, w);
		o += w;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

/*
 * Plain printable ASCII without '"', '=' or '\' goes out as is; anything else
 * is quoted, with \" \\ \n \r \t, and \xNN for the other control bytes and
 * for bytes that are not UTF-8 (a file name may hold any): the line stays
 * one line of valid UTF-8 and what the value held can be read back. Cut (at
 * a character, never inside an escape) to fit <size>.
 */
const char *hlb_log_quote(const char *s, char *buf, size_t size)
{
	size_t n = strlen(s);

	return quote_plain((const unsigned char *)s, n) ? s
							: quote_into((const void *)s, n, buf, size);
}

const char *hlb_log_quote_n(const void *s, size_t n, char *buf, size_t size)
{
	size_t o = n < size ? n : size - 1;

	if (!size || !quote_plain(s, n))
		return quote_into(s, n, buf, size);
	memcpy(buf, s, o);
	buf[o] = '\0';
	return buf;
}

/*
 * Append " <key>=<s>" (no space first when <n> is 0) to <buf> of <size> bytes holding <n>,
 * <s> as a logfmt value (hlb_log_quote()) cut to fit, never inside its quotes. The new length.
 */
static size_t put_value(char *buf, size_t size, size_t n, const char *key, const char *s)
{
	size_t k = strlen(key) + (n ? 2 : 1), len;
	const char *v;

	if (n + k + 3 > size) /* the pair, with at least "" as its value, and the NUL */
		return n;
	snprintf(buf + n, size - n, "%s%s=", n ? " " : "", key);
	n += k;
	v = hlb_log_quote(s, buf + n, size - n);
	len = strlen(v);
	if (v != buf + n) { /* plain: as is, cut to fit */
		if (len > size - n - 1)
			len = size - n - 1;
		memcpy(buf + n, v, len);
		buf[n + len] = '\0';
	}
	return n + len;
}

const char *hlb_log_config_error(const char *path, const struct hashlb_error *err, char *buf,
				 size_t size)
{
	size_t n;
	int r;

	if (!size)
		return buf;
	buf[0] = '\0';
	/* "err=" keeps room for a message however long the path: what went wrong is the point */
	n = put_value(buf, size > 64 ? size - 64 : size, 0, "config", path);
	if (err->line > 0) {
		r = snprintf(buf + n, size - n, " line=%d column=%d", err->line, err->column);
		if (r > 0)
			n = n + (size_t)r < size ? n + (size_t)r : n;
		buf[n] = '\0';
	}
	put_value(buf, size, n, "err", err->msg);
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

/* format_ts() of <sec>, formatted again only when the second changes: the lines of one second
 * reuse it, hlb_log()'s and the buffered log's alike. Each thread its own (both are called
 * from several), valid until this thread's next call. */
static const char *log_ts(time_t sec)
{
	static _Thread_local time_t ts_sec = (time_t)-1;
	static _Thread_local char ts[24];

	if (sec != ts_sec) {
		ts_sec = sec;
		format_ts(sec, ts, sizeof(ts));
	}
	return ts;
}

/*
 * The end of the last whole key=value pair of <p> (logfmt, <n> bytes, the
 * start of a pair at <p>) that ends at or before <limit>; <p> if none does.
 */
static const char *last_pair_end(const char *p, size_t n, const char *limit)
{
	const char *end = p + n, *last = p;

	while (p < end) {
		while (p < end && *p != '=' && *p != ' ')
			p++;
		if (p < end && *p == '=' && p + 1 < end && p[1] == '"') {
			for (p += 2; p < end && *p != '"'; p++)
				if (*p == '\\')
					p++;
			if (p >= end)
				break; /* the closing quote is cut off */
			p++;
		} else {
			while (p < end && *p != ' ')
				p++;
			if (p == end)
				break; /* the value may be cut short */
		}
		if (p > limit)
			break;
		last = p;
		while (p < end && *p == ' ')
			p++;
	}
	return last;
}

#define CUT_MARK " truncated=true"
#define LOG_PID_KEY " self_pid="
#define LOG_PID_MAX (sizeof(LOG_PID_KEY "-2147483648") - 1)

/*
 * " self_pid=<this process's pid>", the end of every line: formatted once, not for each line
 * (an snprintf() and, in hlb_log(), a getpid() call a line, the connection log's among them),
 * when the process starts and again in the child of a fork() (pthread_atfork()). An upgrade
 * runs a new process (posix_spawn()), which formats its own at its start. Written only while
 * the process has one thread (its start, a child just forked), read by any after.
 */
static char self_pid[LOG_PID_MAX + 1];
static size_t self_pid_len;

/* self_pid formatted for getpid(): async-signal-safe (no snprintf()), since a child forked
 * from threads may only call such functions. */
static void self_pid_format(void)
{
	char digits[16];
	unsigned v = (unsigned)getpid(); /* a pid is positive */
	size_t n = 0, len = sizeof(LOG_PID_KEY) - 1;

	do
		digits[n++] = (char)('0' + v % 10);
	while ((v /= 10));
	memcpy(self_pid, LOG_PID_KEY, len);
	while (n)
		self_pid[len++] = digits[--n];
	self_pid[len] = '\0';
	self_pid_len = len;
}

/*
 * Whether stderr is systemd's journal: $JOURNAL_STREAM names the device and inode of the
 * stream it gave the service (systemd.exec(5)); a file or pipe a shell of that service
 * redirected stderr to is not it. Each line then starts with its syslog priority (<3> error
 * ... <7> debug), which journald takes off and keeps as the entry's PRIORITY (the unit's
 * SyslogLevelPrefix=, on by default), so journalctl -p warning shows the warnings and errors:
 * otherwise every line is the stream's level, info.
 */
static atomic_bool on_journal;
static const char level_prefix[HLB_LOG_MAX][4] = { "<7>", "<6>", "<4>", "<3>" };

static void journal_look(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char c;

	atomic_store(&on_journal, e && sscanf(e, "%llu:%llu%c", &dev, &ino, &c) == 2 &&
					  fstat(STDERR_FILENO, &st) == 0 && st.st_dev == dev &&
					  st.st_ino == ino);
}

const char *hlb_log_journal_prefix(enum hlb_log_level level)
{
	return atomic_load_explicit(&on_journal, memory_order_relaxed) ? level_prefix[level] : "";
}

const char *hlb_log_journal_notice(void)
{
	return atomic_load_explicit(&on_journal, memory_order_relaxed) ? "<5>" : "";
}

__attribute__((constructor)) static void self_pid_init(void)
{
	journal_look();
	self_pid_format();
	/* the child's lines carry its pid, not its parent's */
	pthread_atfork(NULL, NULL, self_pid_format);
}

/*
 * One line into <line> (<size> >= 6 + LOG_PID_MAX): on the journal its priority, the
 * timestamp <ts> with <ms>, the level, <msg>, the pairs of <fmt> and self_pid, ending with
 * '\n' (no NUL). A
 * line that would be longer than <size> bytes keeps the pairs that fit whole and ends
 * with truncated=true: a value cut short (a quote never closed) would make it no logfmt.
 * Returns its length.
 */
static size_t format_line(char *line, size_t size, const char *ts, long ms,
			  enum hlb_log_level level, const char *msg, const char *fmt, va_list ap,
			  size_t *ret_need)
{
	char qbuf[512];
	size_t start, t = self_pid_len;
	int n, m;

	/* the pid last: after an upgrade in place both processes write to one stderr, and
	 * the lines keep starting ts= level= msg= with the pairs right after, as they did */
	size -= t;
	n = snprintf(line, size, "%sts=%s.%03ldZ level=%s msg=%s", hlb_log_journal_prefix(level),
		     ts, ms, level_names[level], hlb_log_quote(msg, qbuf, sizeof(qbuf)));
	if (n < 0)
		n = 0;
	if ((size_t)n > size - 1)
		n = size - 1;
	start = (size_t)n + 1;
	if (fmt && start < size - 1) {
		line[n] = ' ';
		m = vsnprintf(line + start, size - start, fmt, ap);
		if (m > 0 && start + (size_t)m <= size - 1) {
			n = start + m;
		} else if (m > 0 && size > sizeof(CUT_MARK) + start) {
			if (ret_need) /* the line whole, its pid, '\n' and vsnprintf's NUL */
				*ret_need = start + (size_t)m + t + 2;
			/* cut: what vsnprintf wrote ends at size - 1 (its NUL) */
			const char *end = last_pair_end(line + start, size - 1 - start,
							line + size - sizeof(CUT_MARK));

			n = end - line;
			if (end == line + start)
				n--; /* no pair fits: not two spaces */
			memcpy(line + n, CUT_MARK, sizeof(CUT_MARK) - 1);
			n += sizeof(CUT_MARK) - 1;
		}
	}
	memcpy(line + n, self_pid, t);
	n += t;
	line[n++] = '\n';
	return n;
}

/*
 * Writers take turns on stderr under this lock. A buffer whose write took
 * part of a line keeps it (lb->partial) until a later flush of the same
 * thread finishes the line; <held> is that buffer, for the thread's own
 * hlb_log() calls meanwhile.
 *
 * hlb_log() never waits for a stalled reader for long: the control plane
 * logs from its event loop, which must go on answering. It waits up to
 * LOG_WAIT_MS for its turn and for room, then drops its line (counted);
 * once part of a line is written, up to LOG_FINISH_MS for each further
 * part, since a line cut short leaves the next one joined to it. Once a
 * line was dropped for want of room, the next ones do not wait at all
 * until one goes out whole: a burst of lines (a hundred backends going
 * down) to a reader that stopped costs LOG_WAIT_MS once, not per line,
 * nor per thread: a thread that finds the lock taken then does not wait.
 */
#define LOG_WAIT_MS 100
#define LOG_FINISH_MS 1000

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t dropped; /* lines, see hlb_log_dropped() */
static atomic_bool stalled; /* a line found no room in LOG_WAIT_MS: wait no more */
static _Thread_local struct hlb_logbuf *held;

static void out_release(struct hlb_logbuf *lb)
{
	lb->partial = false;
	held = NULL;
	pthread_mutex_unlock(&out_lock);
}

/*
 * Whether <fd> is a pipe, a socket or a terminal: a reader may stall it (a terminal
 * too: one paused by ^S, a pty whose ssh session stalls), so it is written without
 * waiting (write_nowait()).
 */
static bool fd_nowait(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) ||
				       (S_ISCHR(st.st_mode) && isatty(fd)));
}

/*
 * fd_nowait(STDERR_FILENO), asked once, not for each line (an fstat and an ioctl): -1 not
 * asked yet, as after hlb_log_output_changed(). Under out_lock.
 */
static int stderr_nowait = -1;

/*
 * A named pipe's (mkfifo: stderr to a FIFO a log reader holds open) and a terminal's
 * writes refuse RWF_NOWAIT with EOPNOTSUPP, the kernel allowing it on pipe(2)'s ends
 * and sockets only: that dropped every line to a FIFO, and a terminal, written with
 * write(), blocked the workers when its reader stalled. Their lines go through an open
 * file description of our own on the same file, O_NONBLOCK, opened as the first one
 * is refused (through /proc/self/fd: stderr's own stays blocking, shared with whoever
 * started hashlb, and an upgrade's new process inherits that one). <own_of>: the
 * descriptor it stands for, -1 none. Under out_lock.
 *
 * A terminal, unlike a pipe (PIPE_BUF), takes what fits of a write that does not wait,
 * and tells no room beforehand: a line to a stalled one may go out in part. Our own
 * lines still take turns (out_lock, lb->partial), but another process on the same
 * terminal (the other side of an upgrade in place) may write inside the part written.
 */
static int own_fd = -1, own_of = -1;
/* Why no description of our own could be opened (own_of set, own_fd -1), to be said once; 0 none. */
static atomic_int own_errno;

/*
 * A new O_NONBLOCK open file description of <fd>'s file, -1 with errno. Opening it through
 * /proc/self/fd takes the file's permissions: a terminal of another user (hashlb run after su,
 * or as a user of its own on a terminal root opened) is refused (EACCES), as is any file
 * without /proc; a terminal that is hashlb's controlling one then opens as /dev/tty, which
 * any of its processes may.
 */
static int own_open(int fd)
{
	/* O_NOCTTY: a terminal opened again must not become hashlb's controlling one */
	int flags = O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, r, err;
	unsigned ptn;
	char path[32];
	pid_t sid;

	/* a pty's master side: opened by its name (/dev/ptmx), it would be a new pty's, read by none */
	if (ioctl(fd, TIOCGPTN, &ptn) == 0) {
		errno = EOPNOTSUPP;
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	r = open(path, flags);
	if (r >= 0 || errno == ENXIO) /* ENXIO: a FIFO without a reader */
		return r;
	err = errno;
	/* TIOCGSID answers on the controlling terminal only (/dev/tty's own st_rdev is not its) */
	r = ioctl(fd, TIOCGSID, &sid) == 0 ? open("/dev/tty", flags) : -1;
	if (r < 0)
		errno = err;
	return r;
}

/*
 * pwritev2(RWF_NOWAIT) of <iov> to <fd>, or write() to a non-blocking
 * description of our own of its file where <fd> refuses it. -1 with errno as pwritev2's.
 */
static ssize_t write_nowait(int fd, const struct iovec *iov)
{
	ssize_t r;

	if (fd == own_of) /* none of our own: written as to a file (said once, own_errno) */
		return writev(own_fd >= 0 ? own_fd : fd, iov, 1);
	r = pwritev2(fd, iov, 1, -1, RWF_NOWAIT);
	if (r >= 0 || errno != EOPNOTSUPP || own_of >= 0)
		return r;
	own_fd = own_open(fd);
	if (own_fd < 0 && errno == ENXIO) /* no reader: dropped (EPIPE), tried again next time */
		return writev(fd, iov, 1);
	own_of = fd;
	if (own_fd < 0) /* not tried again at each write: it would fail as this did */
		atomic_store_explicit(&own_errno, errno, memory_order_relaxed);
	return writev(own_fd >= 0 ? own_fd : fd, iov, 1);
}

/*
 * <n> bytes to <fd>, never blocking in write(): up to <wait_ms> for room
 * before anything is written, up to LOG_FINISH_MS for each further part.
 * The bytes written.
 */
static size_t write_bounded(int fd, bool nowait, const char *p, size_t n, int wait_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	size_t done = 0;

	while (done < n) {
		struct iovec iov = { .iov_base = (void *)(p + done), .iov_len = n - done };
		ssize_t r = nowait ? write_nowait(fd, &iov) : write(fd, p + done, n - done);
		int ready;

		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0 || errno != EAGAIN)
			break; /* the reader is gone */
		ready = poll(&pfd, 1, done ? LOG_FINISH_MS : wait_ms);
		if (ready == 0 || (ready < 0 && errno != EINTR))
			break;
	}
	return done;
}

/*
 * The rest of <lb>'s unfinished line; if the reader takes nothing of it
 * for LOG_FINISH_MS, the rest is dropped (and counted).
 */
static void finish_line(struct hlb_logbuf *lb)
{
	const char *p = lb->buf + lb->head;
	const char *nl = memchr(p, '\n', lb->tail - lb->head);
	size_t n = nl ? (size_t)(nl - p) + 1 : lb->tail - lb->head;

	if (write_bounded(lb->fd, lb->nowait, p, n, LOG_FINISH_MS) < n)
		atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
	lb->head += n;
	if (lb->head == lb->tail)
		lb->head = lb->tail = 0;
}

/*
 * Take the output lock within LOG_WAIT_MS; at once or not at all while the
 * reader stalls, since its holder may be waiting on that reader.
 */
static bool out_lock_within(void)
{
	struct timespec t;

	if (atomic_load_explicit(&stalled, memory_order_relaxed))
		return pthread_mutex_trylock(&out_lock) == 0;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += LOG_WAIT_MS * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return pthread_mutex_timedlock(&out_lock, &t) == 0;
}

void hlb_log(enum hlb_log_level level, const char *msg, const char *fmt, ...)
{
	char stack[HLB_LOG_LINE_MAX], *line = stack, *big;
	const char *ts;
	char qbuf[64];
	size_t n, need = 0, written;
	struct timespec now;
	long ms;
	va_list ap;
	int err;

	if (level < min_level)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	ts = log_ts(now.tv_sec);
	ms = now.tv_nsec / 1000000;
	va_start(ap, fmt);
	n = format_line(line, sizeof(stack), ts, ms, level, msg, fmt, ap, &need);
	va_end(ap);
	/* not the data plane's hot path (hlb_logbuf_printf()): a long line is formatted again,
	 * whole, in memory of its own; short of it, the line cut stands */
	if (need && (big = malloc(need))) {
		line = big;
		va_start(ap, fmt);
		n = format_line(line, need, ts, ms, level, msg, fmt, ap, NULL);
		va_end(ap);
	}
	if (held) { /* this thread's buffer left a line unfinished: end it first */
		finish_line(held);
	} else if (!out_lock_within()) {
		atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
		goto out;
	}
	if (stderr_nowait < 0)
		stderr_nowait = fd_nowait(STDERR_FILENO);
	written = write_bounded(STDERR_FILENO, stderr_nowait, line, n,
				atomic_load_explicit(&stalled, memory_order_relaxed) ? 0
										     : LOG_WAIT_MS);
	if (written < n)
		atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
	/* nothing of it went: the reader stalls; all of it: it reads again */
	if (written == 0 || written == n)
		atomic_store_explicit(&stalled, written == 0, memory_order_relaxed);
	if (held)
		out_release(held);
	else
		pthread_mutex_unlock(&out_lock);
out:
	if (line != stack)
		free(line);
	err = atomic_exchange_explicit(&own_errno, 0, memory_order_relaxed);
	if (err) /* once: own_of is set, it is not tried again */
		hlb_log(HLB_LOG_WARN,
			"stderr not opened again to be written without waiting: a reader of it that "
			"stalls stalls hashlb",
			"err=%s", hlb_log_quote(strerror(err), qbuf, sizeof(qbuf)));
}

void hlb_log_output_changed(void)
{
	pthread_mutex_lock(&out_lock);
	journal_look();
	stderr_nowait = -1;
	if (own_fd >= 0)
		close(own_fd);
	own_fd = own_of = -1;
	pthread_mutex_unlock(&out_lock);
}

char *hlb_log_vpairs(char *buf, size_t size, const char *fmt, va_list ap)
{
	char *big;
	va_list aq;
	int m;

	va_copy(aq, ap);
	m = vsnprintf(buf, size, fmt, aq);
	va_end(aq);
	if (m < 0 || (size_t)m < size)
		return buf;
	big = malloc((size_t)m + 1);
	if (big) {
		vsnprintf(big, (size_t)m + 1, fmt, ap);
		return big;
	}
	if (size > sizeof(CUT_MARK)) { /* cut between pairs, as a line is (format_line()) */
		char *end = (char *)last_pair_end(buf, size - 1, buf + size - sizeof(CUT_MARK));

		if (end == buf)
			memcpy(buf, CUT_MARK + 1, sizeof(CUT_MARK) - 1);
		else
			memcpy(end, CUT_MARK, sizeof(CUT_MARK));
	}
	return buf;
}

void hlb_log_vto(hlb_log_sink_fn sink, void *arg, enum hlb_log_level level, const char *msg,
		 const char *fmt, va_list ap)
{
	char buf[HLB_LOG_LINE_MAX], *kv = hlb_log_vpairs(buf, sizeof(buf), fmt, ap);

	sink(arg, level, msg, kv);
	if (kv != buf)
		free(kv);
}

/* ---- buffered, for the data plane ---------------------------------------- */

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
	if (size < 2 * HLB_LOG_LINE_MAX)
		return -EINVAL;
	*lb = (struct hlb_logbuf){ .fd = fd, .size = size };
	/* Files do not wait for a reader, and a file system may answer
	 * EAGAIN to RWF_NOWAIT for a page it would have to read. */
	lb->nowait = fd_nowait(fd);
	lb->buf = malloc(size);
	return lb->buf ? 0 : -ENOMEM;
}

void hlb_logbuf_free(struct hlb_logbuf *lb)
{
	if (lb->partial)
		out_release(lb); /* the line stays unfinished: the reader is gone */
	if (lb->buf && lb->tail > lb->head)
		count_dropped(lb->buf + lb->head, lb->tail - lb->head);
	free(lb->buf);
	lb->buf = NULL;
	lb->head = lb->tail = 0;
}

bool hlb_logbuf_printf(struct hlb_logbuf *lb, enum hlb_log_level level, const char *msg,
		       const char *fmt, ...)
{
	struct timespec now;
	va_list ap;

	if (level < min_level)
		return true;
	if (lb->size - lb->tail < HLB_LOG_LINE_MAX && lb->head) {
		memmove(lb->buf, lb->buf + lb->head, lb->tail - lb->head);
		lb->tail -= lb->head;
		lb->head = 0;
	}
	if (lb->size - lb->tail < HLB_LOG_LINE_MAX) {
		atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
		return false;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	va_start(ap, fmt);
	lb->tail += format_line(lb->buf + lb->tail, HLB_LOG_LINE_MAX, log_ts(now.tv_sec),
				now.tv_nsec / 1000000, level, msg, fmt, ap, NULL);
	va_end(ap);
	return true;
}

static ssize_t logbuf_write(struct hlb_logbuf *lb, const char *p, size_t n)
{
	struct iovec iov = { .iov_base = (void *)p, .iov_len = n };

	if (lb->nowait)
		return write_nowait(lb->fd, &iov);
	return write(lb->fd, p, n);
}

size_t hlb_logbuf_flush(struct hlb_logbuf *lb)
{
	lb->wait_reader = false;
	if (lb->head == lb->tail)
		return 0;
	/* Another writer's turn (or its line unfinished): ours wait for the next flush. */
	if (!lb->partial && pthread_mutex_trylock(&out_lock) != 0)
		return lb->tail - lb->head;
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
		if (r < 0 && errno == EAGAIN) {
			lb->wait_reader = true;
			break;
		}
		if (r <= 0) {
			count_dropped(p, lb->tail - lb->head);
			lb->head = lb->tail;
			lb->partial = false;
			break;
		}
		lb->head += r;
		lb->partial = lb->buf[lb->head - 1] != '\n';
	}
	if (lb->partial) {
		held = lb; /* keep the lock until a later flush ends the line */
	} else {
		held = NULL;
		pthread_mutex_unlock(&out_lock);
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
