/* SPDX-License-Identifier: MIT */
/*
 * The daemon's log: logfmt lines on stderr,
 *   ts=2026-11-30T17:00:00.123Z level=info msg="listening" service=web addr=127.0.0.1:80 self_pid=42
 * each ending with the pid of the process that wrote it (the old and the new
 * process of an upgrade in place write to one stderr; pid= names another one).
 * Used by the daemon and the data plane (never by the core library). The
 * hot path does not log; rare per-connection events are rate-limited by
 * their callers.
 */
#ifndef HASHLB_RUNTIME_LOG_H
#define HASHLB_RUNTIME_LOG_H

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hashlb/error.h>

enum hlb_log_level { HLB_LOG_DEBUG = 0, HLB_LOG_INFO, HLB_LOG_WARN, HLB_LOG_ERROR, HLB_LOG_MAX };

void hlb_log_set_level(enum hlb_log_level level);
/* -EINVAL if <s> is not debug, info, warn or error. */
int hlb_log_level_parse(const char *s, enum hlb_log_level *ret_level);

/*
 * Log <msg> (quoted for you) followed by the key=value pairs of <fmt>
 * (printf-style, may be NULL). Values that may hold spaces or quotes must
 * go through hlb_log_quote(). A line is written whole, however long (one
 * longer than HLB_LOG_LINE_MAX is formatted in memory allocated for it);
 * short of that memory, it keeps the pairs that fit in HLB_LOG_LINE_MAX
 * whole and ends with truncated=true. Waits at most
 * 100 ms for a stalled reader (the control plane logs from its event loop)
 * before the line is dropped and counted (hlb_log_dropped()); once part of
 * it is written, up to 1 s for each further part, as a line cut short
 * joins the next.
 */
void hlb_log(enum hlb_log_level level, const char *msg, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Stderr now is another file (dup2() over it): what hlb_log() found out about the one
 * before (whether a reader may stall it, a non-blocking description of its own of its
 * file) is asked again at the next line. Not while a hlb_logbuf of this thread has a line
 * unfinished. Buffers made before keep what they found (hlb_logbuf_init()).
 */
void hlb_log_output_changed(void);
/*
 * What a line of <level> starts with on stderr: its syslog priority ("<3>" for an error)
 * when stderr is systemd's journal, which keeps it as the entry's priority; "" elsewhere.
 * For what is written to stderr otherwise than by hlb_log() (a config's FILE:LINE:COL).
 */
const char *hlb_log_journal_prefix(enum hlb_log_level level);
/* A notice's ("<5>" on the journal, "" elsewhere): a command's line that is more than
 * information and no error (hashlb ctl's reload that fell back to SIGHUP). */
const char *hlb_log_journal_notice(void);

/*
 * <s> as a logfmt value: as is if plain printable ASCII without '"', '=' or
 * '\', else double-quoted with \" \\ \n \r \t and \xNN (other control
 * bytes, bytes that are not UTF-8), cut at a character to fit <size>:
 * HLB_LOG_QUOTED_MAX(strlen(s)) bytes always hold it whole.
 */
const char *hlb_log_quote(const char *s, char *buf, size_t size);
/*
 * The <n> bytes at <s> (a NUL among them too: \x00) as a logfmt value, as hlb_log_quote()
 * does, always into <buf> (a plain one copied, cut to fit): HLB_LOG_QUOTED_MAX(<n>) bytes
 * always hold it whole.
 */
const char *hlb_log_quote_n(const void *s, size_t n, char *buf, size_t size);

/* The bytes hlb_log_quote() needs for any value of <n> bytes: each one \xNN at most, the
 * quotes and the NUL. */
#define HLB_LOG_QUOTED_MAX(n) (4 * (size_t)(n) + 3)
/* A file's path quoted whole (open() refuses a longer one: ENAMETOOLONG). */
#define HLB_LOG_PATH_MAX HLB_LOG_QUOTED_MAX(PATH_MAX)

/*
 * The pairs of <fmt> formatted whole: into <buf> (<size> bytes) if they fit, else into memory
 * allocated for them, to free() when it is not <buf>. Short of that memory, the pairs that fit
 * in <buf> whole, ending with truncated=true. For the lines of the control plane, never of
 * the data plane's hot path (hlb_logbuf_printf() allocates nothing).
 */
char *hlb_log_vpairs(char *buf, size_t size, const char *fmt, va_list ap);

/* A line's sink: the control plane's and the pool's log callbacks (<kv>: the pairs). */
typedef void (*hlb_log_sink_fn)(void *arg, enum hlb_log_level level, const char *msg,
				const char *kv);
/* <msg> and the pairs of <fmt>, whole (hlb_log_vpairs()), to <sink>. */
void hlb_log_vto(hlb_log_sink_fn sink, void *arg, enum hlb_log_level level, const char *msg,
		 const char *fmt, va_list ap);

/*
 * The key=value pairs of an error in config file <path>, into <buf>:
 * config=PATH line=N column=N err=MSG, without line and column when the
 * error has no position (the file cannot be read, an address cannot be
 * bound). Whole in HLB_LOG_CONFIG_ERROR_MAX bytes (a path open() takes, an
 * error's whole message); in fewer, each value is cut to fit <size>, never
 * inside its quotes. Returns <buf>.
 */
const char *hlb_log_config_error(const char *path, const struct hashlb_error *err, char *buf,
				 size_t size);
/* "config= line=-2147483648 column=-2147483648 err=": 48 bytes, and the values quoted */
#define HLB_LOG_CONFIG_ERROR_MAX \
	(HLB_LOG_PATH_MAX + HLB_LOG_QUOTED_MAX(sizeof(((struct hashlb_error *)0)->msg)) + 64)

/*
 * A thread's buffered log, for lines the data plane writes (one per
 * connection with log_connections): appending never writes and never
 * blocks; hlb_logbuf_flush(), once per event-loop turn, writes whole lines
 * in write()s of at most PIPE_BUF bytes that end at a line's end. On a pipe
 * or a socket it never waits (RWF_NOWAIT): what the reader has not taken
 * stays buffered for the next flush. On a file or a terminal it writes
 * plainly (they take the bytes without waiting for a reader). A line that
 * finds the buffer full is dropped and counted (hlb_log_dropped()). One
 * thread per buffer.
 *
 * No line interleaves with another's: writers take turns on one lock, and
 * on a stream socket (journald's), where a write that does not wait may take
 * part of a line, the thread that left a line unfinished keeps the lock
 * until a later flush finishes it (other buffers wait meanwhile).
 */
/* A line of the data plane at most (longer ones are cut between pairs): every connection line
 * whole (conn_log()); hlb_log() formats longer ones in memory of their own. Under PIPE_BUF. */
#define HLB_LOG_LINE_MAX 2048

struct hlb_logbuf {
	char *buf;
	size_t size;
	size_t head, tail; /* lines not yet written: [head, tail) */
	int fd;
	bool nowait; /* fd is a pipe or a socket: RWF_NOWAIT */
	bool partial; /* a line is written in part: this thread holds the output lock */
	bool wait_reader; /* the last flush stopped because the reader is behind (EAGAIN) */
};

/* <lb> of <size> bytes (at least 2 lines) writing to <fd> (borrowed). 0 or -ENOMEM, -EINVAL. */
int hlb_logbuf_init(struct hlb_logbuf *lb, int fd, size_t size);
/* Lines still buffered are counted as dropped. Accepts a zeroed <lb>. */
void hlb_logbuf_free(struct hlb_logbuf *lb);
/* A line as hlb_log() writes it, appended; dropped and counted if it does not fit: false then
 * (a line below the log level is no drop: true). */
bool hlb_logbuf_printf(struct hlb_logbuf *lb, enum hlb_log_level level, const char *msg,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/*
 * Write what is buffered without blocking (see above). Returns the bytes
 * still buffered (the reader is slow: try again later). A write error other
 * than EAGAIN drops what is buffered, counted.
 */
size_t hlb_logbuf_flush(struct hlb_logbuf *lb);
/* hlb_logbuf_flush() until empty, waiting up to <timeout_ms> for the reader (exit). */
size_t hlb_logbuf_flush_wait(struct hlb_logbuf *lb, int timeout_ms);

static inline bool hlb_logbuf_pending(const struct hlb_logbuf *lb)
{
	return lb->head != lb->tail;
}

/* Lines dropped by every hlb_logbuf of the process (buffer full, write error). */
uint64_t hlb_log_dropped(void);

#endif
