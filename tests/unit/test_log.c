// SPDX-License-Identifier: MIT
/*
 * The data plane's buffered log: lines come out whole and in order, in
 * writes of at most PIPE_BUF that end at a line's end; a reader that does
 * not read never blocks the writer (the lines wait for the next flush); a
 * full buffer or a broken output drops lines and counts them; a line too
 * long is cut between pairs; values are quoted and escaped so that a line
 * stays one line of logfmt.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

/* Read everything <fd> holds now (non-blocking) into <buf>. */
static size_t drain(int fd, char *buf, size_t size)
{
	size_t got = 0;
	ssize_t n;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	while (got < size && (n = read(fd, buf + got, size - got)) > 0)
		got += n;
	return got;
}

/* " self_pid=<ours>\n": how each line ends, telling the two processes of an upgrade apart. */
static size_t pid_tail(char *buf, size_t size)
{
	return (size_t)snprintf(buf, size, " self_pid=%d\n", (int)getpid());
}

/* Lines "ts=... level=info msg=connection i=<k> pad=... self_pid=<ours>" for k in [from, to),
 * checked in order. */
static void check_lines(const char *p, size_t len, int from, int to)
{
	const char *end = p + len;
	char tail[32];
	size_t t = pid_tail(tail, sizeof(tail));

	for (int k = from; k < to; k++) {
		const char *nl = memchr(p, '\n', end - p);
		char want[32];

		assert_non_null(nl);
		assert_true(nl + 1 - p > (ptrdiff_t)t);
		assert_memory_equal(nl + 1 - t, tail, t);
		assert_memory_equal(p, "ts=", 3);
		assert_non_null(strstr(p, " level=info msg=connection "));
		snprintf(want, sizeof(want), " i=%d ", k);
		assert_true(memmem(p, nl - p, want, strlen(want)) != NULL);
		p = nl + 1;
	}
	assert_ptr_equal(p, end);
}

static void put_lines(struct hlb_logbuf *lb, int from, int to, int pad)
{
	for (int k = from; k < to; k++)
		hlb_logbuf_printf(lb, HLB_LOG_INFO, "connection", "i=%d pad=%0*d", k, pad, 0);
}

static char *hlb_log_vpairs_test(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	char *kv;

	va_start(ap, fmt);
	kv = hlb_log_vpairs(buf, size, fmt, ap);
	va_end(ap);
	return kv;
}

static void on_alarm(int sig)
{
	(void)sig;
	fail_msg("a flush blocked on a reader that does not read");
}

/* Each write(): at most PIPE_BUF bytes, whole lines, all lines in order. */
static void test_writes_are_whole_lines(void **state)
{
	static char got[256 * 1024];
	struct hlb_logbuf lb;
	size_t total = 0;
	ssize_t n;
	int sv[2];

	/* SOCK_SEQPACKET keeps each write() a record of its own. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(hlb_logbuf_init(&lb, sv[0], 64 * 1024), 0);
	put_lines(&lb, 0, 150, 300);
	assert_true(hlb_logbuf_pending(&lb));
	assert_int_equal(hlb_logbuf_flush(&lb), 0);
	assert_false(hlb_logbuf_pending(&lb));
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	while ((n = recv(sv[1], got + total, sizeof(got) - total, 0)) > 0) {
		assert_true(n <= PIPE_BUF);
		assert_int_equal(got[total + n - 1], '\n');
		total += n;
	}
	check_lines(got, total, 0, 150);
	hlb_logbuf_free(&lb);
	close(sv[0]);
	close(sv[1]);
}

/* A pipe nobody reads: the flush returns at once, keeps the lines, and writes them later. */
static void test_full_pipe_does_not_block(void **state)
{
	static char got[512 * 1024];
	struct hlb_logbuf lb;
	char path[64], fill[4096];
	size_t total;
	int p[2], w2;

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	/* Fill the pipe through a second, non-blocking open of it: the
	 * buffer's own write end stays blocking, as stderr usually is. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[1]);
	w2 = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	assert_true(w2 >= 0);
	memset(fill, 'x', sizeof(fill));
	fill[sizeof(fill) - 1] = '\n';
	while (write(w2, fill, sizeof(fill)) > 0)
		;
	assert_int_equal(errno, EAGAIN);

	assert_int_equal(hlb_logbuf_init(&lb, p[1], 256 * 1024), 0);
	put_lines(&lb, 0, 100, 100);
	signal(SIGALRM, on_alarm);
	alarm(10);
	assert_true(hlb_logbuf_flush(&lb) > 0);
	alarm(0);
	assert_true(hlb_logbuf_pending(&lb));

	/* The reader catches up: everything arrives, whole and in order. */
	total = drain(p[0], got, sizeof(got));
	assert_true(total > 0 && total % sizeof(fill) == 0);
	assert_int_equal(hlb_logbuf_flush(&lb), 0);
	total = drain(p[0], got, sizeof(got));
	check_lines(got, total, 0, 100);
	hlb_logbuf_free(&lb);
	close(w2);
	close(p[0]);
	close(p[1]);
}

/* A reader that takes a little at a time: lines appended meanwhile queue behind, in order. */
static void test_partial_flushes_keep_order(void **state)
{
	static char got[1024 * 1024];
	struct hlb_logbuf lb;
	uint64_t before = hlb_log_dropped();
	size_t total = 0;
	int p[2], k = 0;

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	/* one page: each flush gets one write of at most PIPE_BUF through */
	assert_true(fcntl(p[1], F_SETPIPE_SZ, 4096) >= 4096);
	assert_int_equal(hlb_logbuf_init(&lb, p[1], 8 * 1024), 0);
	for (int round = 0; round < 20; round++) {
		/* as many lines as fit: the buffer moves what is left to its start */
		while ((lb.size - lb.tail >= HLB_LOG_LINE_MAX || lb.head) && k < 2000) {
			put_lines(&lb, k, k + 1, 250);
			k++;
		}
		hlb_logbuf_flush(&lb);
		total += drain(p[0], got + total, sizeof(got) - total);
	}
	for (int i = 0; i < 100 && hlb_logbuf_flush(&lb); i++)
		total += drain(p[0], got + total, sizeof(got) - total);
	total += drain(p[0], got + total, sizeof(got) - total);
	assert_int_equal(hlb_log_dropped(), before);
	check_lines(got, total, 0, k);
	hlb_logbuf_free(&lb);
	close(p[0]);
	close(p[1]);
}

/* A full buffer drops the line, counts it, and keeps the ones it holds. */
static void test_full_buffer_drops_and_counts(void **state)
{
	static char got[64 * 1024];
	struct hlb_logbuf lb;
	uint64_t before = hlb_log_dropped(), dropped;
	size_t total;
	int p[2];

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(hlb_logbuf_init(&lb, p[1], 2 * HLB_LOG_LINE_MAX), 0);
	/* 100-byte lines: those that leave a line's room fit, the rest drop */
	put_lines(&lb, 0, 20, 50);
	dropped = hlb_log_dropped() - before;
	assert_true(dropped > 0 && dropped < 20);
	assert_int_equal(hlb_logbuf_flush(&lb), 0);
	total = drain(p[0], got, sizeof(got));
	check_lines(got, total, 0, 20 - (int)dropped);
	/* flushed: there is room again */
	put_lines(&lb, 20, 21, 50);
	assert_int_equal(hlb_log_dropped() - before, dropped);
	hlb_logbuf_free(&lb);
	close(p[0]);
	close(p[1]);
}

/* A line longer than HLB_LOG_LINE_MAX is cut, and still ends the line. */
static void test_long_line_is_cut(void **state)
{
	char got[4 * HLB_LOG_LINE_MAX], val[3000], tail[32], want[64];
	struct hlb_logbuf lb;
	const char *nl;
	size_t total;
	int p[2];

	pid_tail(tail, sizeof(tail));
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(hlb_logbuf_init(&lb, p[1], 8 * HLB_LOG_LINE_MAX), 0);
	put_lines(&lb, 0, 1, 3000);
	put_lines(&lb, 1, 2, 10);
	/* a quoted value cut short would leave its quote open: the pair goes whole */
	memset(val, 'v', sizeof(val) - 1);
	val[sizeof(val) - 1] = '\0';
	hlb_logbuf_printf(&lb, HLB_LOG_INFO, "connection", "i=%d q=\"%.900s\" r=\"%s\"", 2, val,
			  val);
	assert_int_equal(hlb_logbuf_flush(&lb), 0);
	total = drain(p[0], got, sizeof(got));
	nl = memchr(got, '\n', total);
	snprintf(want, sizeof(want), " i=0 truncated=true%s", tail);
	assert_memory_equal(nl + 1 - strlen(want), want, strlen(want));
	check_lines(got, total, 0, 3);
	nl = memrchr(got, '\n', total - 1);
	assert_true(total - (nl + 1 - got) <= HLB_LOG_LINE_MAX);
	snprintf(want, sizeof(want), "\" truncated=true%s", tail);
	assert_memory_equal(got + total - strlen(want), want, strlen(want));
	hlb_logbuf_free(&lb);
	close(p[0]);
	close(p[1]);
}

/* A value with what logfmt cannot hold bare is quoted with escapes that keep the line one
 * line of UTF-8, and a value cut to fit is cut at a character, never inside an escape. */
static void test_quote_escapes(void **state)
{
	char buf[64];

	assert_string_equal(hlb_log_quote("plain-1.2:3", buf, sizeof(buf)), "plain-1.2:3");
	assert_string_equal(hlb_log_quote("", buf, sizeof(buf)), "\"\"");
	assert_string_equal(hlb_log_quote("a b=\"c\"\\", buf, sizeof(buf)),
			    "\"a b=\\\"c\\\"\\\\\"");
	assert_string_equal(hlb_log_quote("l\nm\r\t\x01\x1b\x7f", buf, sizeof(buf)),
			    "\"l\\nm\\r\\t\\x01\\x1b\\x7f\"");
	assert_string_equal(hlb_log_quote("\xc3\xa9\xe2\x82\xac", buf, sizeof(buf)),
			    "\"\xc3\xa9\xe2\x82\xac\"");
	/* not UTF-8: a stray byte, a sequence cut short, an overlong '/', a surrogate */
	assert_string_equal(hlb_log_quote("\xff\xc3(\xc0\xaf\xed\xa0\x80", buf, sizeof(buf)),
			    "\"\\xff\\xc3(\\xc0\\xaf\\xed\\xa0\\x80\"");
	assert_string_equal(hlb_log_quote("ab\x01", buf, 6), "\"ab\"");
	assert_string_equal(hlb_log_quote("a\xc3\xa9", buf, 5), "\"a\"");
}

/* Bytes of a given length (a binary health check reply) are quoted whole, a NUL as \x00, and
 * a UTF-8 sequence cut by the length is no character: nothing past the length is read. */
static void test_quote_bytes(void **state)
{
	char buf[64];

	assert_string_equal(hlb_log_quote_n("\0\0\x04OK\x01\xfe", 7, buf, sizeof(buf)),
			    "\"\\x00\\x00\\x04OK\\x01\\xfe\"");
	assert_string_equal(hlb_log_quote_n("abc-and-more", 3, buf, sizeof(buf)), "abc");
	assert_string_equal(hlb_log_quote_n("a\xc3\xa9", 2, buf, sizeof(buf)), "\"a\\xc3\"");
	assert_string_equal(hlb_log_quote_n("a\xc3\xa9", 3, buf, sizeof(buf)), "\"a\xc3\xa9\"");
	assert_string_equal(hlb_log_quote_n("", 0, buf, sizeof(buf)), "\"\"");
	assert_string_equal(hlb_log_quote_n("abcdef", 6, buf, 4), "abc");
	assert_string_equal(hlb_log_quote_n("\0\0", 2, buf, 6), "\"\"");
}

/* An output that is gone (EPIPE): the lines are dropped and counted, not retried forever. */
static void test_broken_output_drops(void **state)
{
	struct hlb_logbuf lb;
	uint64_t before = hlb_log_dropped();
	int p[2];

	signal(SIGPIPE, SIG_IGN);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	close(p[0]);
	assert_int_equal(hlb_logbuf_init(&lb, p[1], 64 * 1024), 0);
	put_lines(&lb, 0, 7, 10);
	assert_int_equal(hlb_logbuf_flush(&lb), 0);
	assert_int_equal(hlb_log_dropped(), before + 7);
	hlb_logbuf_free(&lb);
	close(p[1]);
}

/*
 * hlb_log() on a stream socket (journald's) that nobody reads: the daemon's
 * line waits a bounded time, then is dropped and counted, and the caller
 * (the control plane's event loop) goes on; once the reader is back, lines
 * come out whole again.
 */
static void test_daemon_line_does_not_wait_on_stalled_reader(void **state)
{
	static char got[1 << 20];
	char fill[4096];
	int sv[2], saved = dup(STDERR_FILENO);
	uint64_t before;
	size_t n;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
	memset(fill, 'x', sizeof(fill));
	fill[sizeof(fill) - 1] = '\n';
	while (write(sv[0], fill, sizeof(fill)) > 0) /* full: the reader stalls */
		;
	assert_int_equal(errno, EAGAIN);
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) & ~O_NONBLOCK); /* as stderr usually is */
	assert_int_equal(dup2(sv[0], STDERR_FILENO), STDERR_FILENO);
	hlb_log_output_changed();

	before = hlb_log_dropped();
	signal(SIGALRM, on_alarm);
	alarm(10);
	hlb_log(HLB_LOG_INFO, "reloaded", "config=%s", "x.yaml");
	alarm(0);
	assert_int_equal(hlb_log_dropped(), before + 1);

	n = drain(sv[1], got, sizeof(got)); /* the reader is back */
	assert_true(n > 0 && n % sizeof(fill) == 0);
	hlb_log(HLB_LOG_INFO, "reloaded", "config=%s", "y.yaml");
	n = drain(sv[1], got, sizeof(got));
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	hlb_log_output_changed();
	assert_true(n > 0 && got[n - 1] == '\n' && memmem(got, n, "config=y.yaml", 13));
	assert_int_equal(hlb_log_dropped(), before + 1);
	close(saved);
	close(sv[0]);
	close(sv[1]);
}

/*
 * A daemon line naming a config path as long as open() takes (PATH_MAX - 1 bytes), all of it
 * escaped (\xNN: the most a value grows), and an error message as long as one gets: the line
 * holds both whole, no truncated=true, the path's value read back byte for byte. Before, a
 * quoted value was cut at 511 bytes and the pairs at 768.
 */
static void test_config_error_line_is_whole(void **state)
{
	static char path[PATH_MAX], want[HLB_LOG_PATH_MAX], kv[HLB_LOG_CONFIG_ERROR_MAX],
		got[1 << 16];
	struct hashlb_error err = { .line = 12, .column = 3 };
	int p[2], saved = dup(STDERR_FILENO);
	const char *q, *at;
	char tail[32];
	size_t n, t = pid_tail(tail, sizeof(tail));

	for (size_t i = 0; i < sizeof(path) - 1; i++)
		path[i] = i % 64 ? '\x01' : '/';
	memset(err.msg, '"', sizeof(err.msg) - 1);
	hlb_log_config_error(path, &err, kv, sizeof(kv));
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_true(fcntl(p[1], F_SETPIPE_SZ, 1 << 16) >= (int)sizeof(kv) + 128);
	assert_int_equal(dup2(p[1], STDERR_FILENO), STDERR_FILENO);
	hlb_log_output_changed();
	hlb_log(HLB_LOG_ERROR, "reload failed, keeping the running config", "%s", kv);
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	hlb_log_output_changed();
	n = drain(p[0], got, sizeof(got) - 1);
	got[n] = '\0';
	assert_true(n > 0 && got[n - 1] == '\n' && !memchr(got, '\n', n - 1));
	assert_null(strstr(got, "truncated"));
	q = hlb_log_quote(path, want, sizeof(want));
	at = strstr(got, " config=");
	assert_non_null(at);
	assert_memory_equal(at + 8, q, strlen(q));
	at += 8 + strlen(q);
	assert_memory_equal(at, " line=12 column=3 err=\"\\\"", 25);
	assert_int_equal(strlen(at), strlen(" line=12 column=3 err=") + 2 + 2 * 255 + t);
	assert_string_equal(got + n - t, tail);
	close(saved);
	close(p[0]);
	close(p[1]);
}

/*
 * What hlb_log() found out about stderr is kept, not asked again for each line (an fstat and
 * an ioctl), and asked again once stderr is another file: a file first (written plainly),
 * then a socket nobody reads, whose line is dropped after a bounded wait, not written
 * blocking as to the file before (alarm: it would wait for good).
 */
static void test_output_changed_is_asked_again(void **state)
{
	char fill[4096];
	int sv[2], file, saved = dup(STDERR_FILENO);
	uint64_t before;

	file = memfd_create("log", MFD_CLOEXEC);
	assert_true(file >= 0);
	assert_int_equal(dup2(file, STDERR_FILENO), STDERR_FILENO);
	hlb_log_output_changed();
	hlb_log(HLB_LOG_INFO, "to a file", NULL);
	assert_true(lseek(file, 0, SEEK_END) > 0);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
	memset(fill, 'x', sizeof(fill));
	while (write(sv[0], fill, sizeof(fill)) > 0) /* full: the reader stalls */
		;
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) & ~O_NONBLOCK);
	assert_int_equal(dup2(sv[0], STDERR_FILENO), STDERR_FILENO);
	hlb_log_output_changed();
	before = hlb_log_dropped();
	signal(SIGALRM, on_alarm);
	alarm(10);
	hlb_log(HLB_LOG_INFO, "to a stalled socket", NULL);
	alarm(0);
	assert_int_equal(hlb_log_dropped(), before + 1);
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	hlb_log_output_changed();
	close(saved);
	close(file);
	close(sv[0]);
	close(sv[1]);
}

/* Whether the <n> bytes at <p> are lines each ending " self_pid=<pid>\n", <lines> of them. */
static bool lines_of(const char *p, size_t n, int lines, pid_t pid)
{
	char tail[32];
	size_t t = (size_t)snprintf(tail, sizeof(tail), " self_pid=%d\n", (int)pid);
	const char *end = p + n;

	for (; lines; lines--) {
		const char *nl = memchr(p, '\n', end - p);

		if (!nl || (size_t)(nl + 1 - p) < t || memcmp(nl + 1 - t, tail, t))
			return false;
		p = nl + 1;
	}
	return p == end;
}

/*
 * A child forked from a process that logged ends its lines with its own pid, not its parent's:
 * the daemon's (hlb_log()) and those of a buffer made before the fork (hlb_logbuf) alike.
 * self_pid= is formatted once a process rather than once a line, and again in a forked child.
 * (A buffer kept the pid of the process that made it.)
 */
static void test_forked_child_says_its_pid(void **state)
{
	struct hlb_logbuf lb;
	char got[4 * HLB_LOG_LINE_MAX];
	int p[2], status;
	size_t n;
	pid_t child;

	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(hlb_logbuf_init(&lb, p[1], 4 * HLB_LOG_LINE_MAX), 0);
	hlb_logbuf_printf(&lb, HLB_LOG_INFO, "parent", "i=%d", 1);
	assert_int_equal(hlb_logbuf_flush(&lb), 0);
	n = drain(p[0], got, sizeof(got));
	assert_true(lines_of(got, n, 1, getpid()));

	child = fork();
	assert_true(child >= 0);
	if (child == 0) { /* no cmocka here: its verdict is the parent's */
		if (dup2(p[1], STDERR_FILENO) < 0)
			_exit(1);
		hlb_log_output_changed();
		hlb_log(HLB_LOG_INFO, "child", "i=%d", 2);
		hlb_logbuf_printf(&lb, HLB_LOG_INFO, "child", "i=%d", 3);
		_exit(hlb_logbuf_flush(&lb) == 0 ? 0 : 1);
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	n = drain(p[0], got, sizeof(got));
	assert_true(lines_of(got, n, 2, child));
	/* the parent's lines still its own */
	hlb_logbuf_printf(&lb, HLB_LOG_INFO, "parent", "i=%d", 4);
	assert_int_equal(hlb_logbuf_flush(&lb), 0);
	n = drain(p[0], got, sizeof(got));
	assert_true(lines_of(got, n, 1, getpid()));
	hlb_logbuf_free(&lb);
	close(p[0]);
	close(p[1]);
}

/* The control plane's pairs (hlb_log_vpairs()) whole however long, in memory of their own
 * past the caller's buffer; in it when they fit. */
static void test_pairs_are_whole(void **state)
{
	char buf[64], *kv, val[3000];

	memset(val, 'v', sizeof(val) - 1);
	val[sizeof(val) - 1] = '\0';
	kv = hlb_log_vpairs_test(buf, sizeof(buf), "a=%d", 1);
	assert_ptr_equal(kv, buf);
	assert_string_equal(kv, "a=1");
	kv = hlb_log_vpairs_test(buf, sizeof(buf), "a=1 v=\"%s\" z=2", val);
	assert_ptr_not_equal(kv, buf);
	assert_int_equal(strlen(kv), 4 + 3 + sizeof(val) - 1 + 1 + 4);
	assert_string_equal(kv + strlen(kv) - 4, " z=2");
	free(kv);
}

/*
 * A daemon line's ts= is the UTC second it was logged in, to the second, across a change of
 * second: hlb_log() formats the second once and reuses it while it lasts (each thread its
 * own). Lines 5 ms apart, 400 of them: 2 s at least, so the second changes under them.
 */
static void test_daemon_line_stamped_with_its_second(void **state)
{
	int sv[2], saved = dup(STDERR_FILENO), seconds = 0, wrong = -1;
	time_t last = (time_t)-1;
	char got[4096], line[4096] = "";

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(dup2(sv[0], STDERR_FILENO), STDERR_FILENO);
	hlb_log_output_changed();
	for (int i = 0; i < 400 && wrong < 0; i++) {
		struct timespec before, after;
		struct tm tm = { 0 };
		time_t at = (time_t)-1;
		size_t n;

		/* the clock hlb_log() reads (time() may lag it by a tick) */
		clock_gettime(CLOCK_REALTIME, &before);
		hlb_log(HLB_LOG_INFO, "tick", "i=%d", i);
		clock_gettime(CLOCK_REALTIME, &after);
		n = drain(sv[1], got, sizeof(got) - 1);
		got[n] = '\0';
		if (n > 3 && !strncmp(got, "ts=", 3) &&
		    strptime(got + 3, "%Y-%m-%dT%H:%M:%S.", &tm))
			at = timegm(&tm);
		if (at < before.tv_sec || at > after.tv_sec) {
			wrong = i;
			snprintf(line, sizeof(line), "%s", got);
		}
		seconds += at != last;
		last = at;
		usleep(5000);
	}
	/* stderr back first: cmocka says there why an assertion failed */
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	hlb_log_output_changed();
	if (wrong >= 0)
		fail_msg("line %d stamped out of its second: %s", wrong, line);
	assert_true(seconds >= 2);
	close(saved);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* first: the stderr it finds a file is the first hlb_log() of the process asks of */
		cmocka_unit_test(test_output_changed_is_asked_again),
		cmocka_unit_test(test_writes_are_whole_lines),
		cmocka_unit_test(test_full_pipe_does_not_block),
		cmocka_unit_test(test_partial_flushes_keep_order),
		cmocka_unit_test(test_full_buffer_drops_and_counts),
		cmocka_unit_test(test_long_line_is_cut),
		cmocka_unit_test(test_quote_escapes),
		cmocka_unit_test(test_quote_bytes),
		cmocka_unit_test(test_broken_output_drops),
		cmocka_unit_test(test_daemon_line_does_not_wait_on_stalled_reader),
		cmocka_unit_test(test_daemon_line_stamped_with_its_second),
		cmocka_unit_test(test_config_error_line_is_whole),
		cmocka_unit_test(test_pairs_are_whole),
		cmocka_unit_test(test_forked_child_says_its_pid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
