/* SPDX-License-Identifier: MIT */
/*
 * Active health checks: one non-blocking TCP connect per backend and
 * interval, driven by the control loop (no thread per check). A check passes
 * when the connect completes within the timeout, and, if the check has a
 * payload (hlb_check_set_payload()), when its <send> bytes are written and
 * the reply starts with its <expect> bytes, all within the timeout (as
 * HAProxy's tcp-check send/expect: "PING\r\n" and "+PONG" for Redis, a
 * banner "220 " for SMTP); a connect the loop sees only past that deadline
 * gives the reply the timeout again (check_connected()). For a service that sends backends the PROXY
 * protocol, the protocol's header for a connection of the proxy's own goes
 * first, so that a backend which requires it does not log every check as a
 * broken one. Checks keep a fixed cadence from their first due time, so a
 * pool whose first checks are spread over the interval stays spread.
 */
#ifndef HLB_CONTROL_CHECK_H
#define HLB_CONTROL_CHECK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "loop.h"

/* Called from the loop with each result; <latency_ns> is its time:
 * the connect, and with send/expect until the answer matched. */
typedef void (*hlb_check_done_fn)(void *arg, bool ok, uint64_t latency_ns);

/* Where a check was given up for a fault of ours (hlb_check_skip_fn). */
enum hlb_check_skip {
	HLB_CHECK_SKIP_SOCKET, /* no socket: out of fds or memory */
	HLB_CHECK_SKIP_SOURCE, /* the service's source address cannot be bound (gone) */
	HLB_CHECK_SKIP_CONNECT, /* no local port, no memory */
	HLB_CHECK_SKIP_WATCH, /* the loop cannot watch the socket */
	HLB_CHECK_SKIP_MAX
};

/*
 * Called from the loop instead of <done> for a check not made for want of
 * our own means (hlb_local_error(), or the source address unusable): it
 * says nothing of the backend. <err>: the errno, <at>: where.
 */
typedef void (*hlb_check_skip_fn)(void *arg, enum hlb_check_skip at, int err);

/* "socket", "source", "connect", "watch" */
const char *hlb_check_skip_name(enum hlb_check_skip at);

/* Where a check failed (hlb_check.failed_at), for the log. */
enum hlb_check_at {
	HLB_CHECK_AT_CONNECT, /* refused, unreachable, or no answer to the SYN (ETIMEDOUT) */
	HLB_CHECK_AT_SEND, /* the PROXY header or <send> not written whole */
	/* no answer whole in time (ETIMEDOUT), one that differs from <expect>
	 * (EBADMSG), the connection closed before it (ENODATA) or reset */
	HLB_CHECK_AT_REPLY,
	HLB_CHECK_AT_MAX
};

/* "connect", "send", "reply" */
const char *hlb_check_at_name(enum hlb_check_at at);

/* The bytes of a reply that differs from <expect> kept for the log (hlb_check.reply). */
#define HLB_CHECK_REPLY_MAX 64u

struct hlb_check {
	struct sockaddr_storage addr;
	socklen_t addr_len;
	uint32_t interval_ms;
	uint32_t timeout_ms;
	hlb_check_done_fn done;
	hlb_check_skip_fn skipped; /* NULL: skipped checks are not reported */
	void *arg;
	uint8_t proxy; /* enum hashlb_proxy_protocol: the header each check sends; 0 = none */
	struct sockaddr_storage source; /* the service's source address */
	socklen_t source_len; /* 0 = none */
	/* Why the check just reported failed, for <done> to read: where and the errno. */
	enum hlb_check_at failed_at;
	int failed_err;
	/* With EBADMSG: how the reply began, what came of it in place of <expect> (its
	 * <reply_len> bytes, HLB_CHECK_REPLY_MAX at most, NUL bytes too: a binary protocol's),
	 * for the log to say. */
	uint8_t reply[HLB_CHECK_REPLY_MAX];
	uint32_t reply_len;
	/* private */
	uint8_t *send, *expect; /* owned copies; NULL = none */
	uint32_t send_len, expect_len;
	uint32_t got; /* bytes of <expect> matched so far */
	bool connected; /* the check in flight is past its connect */
	bool spoke; /* it sent bytes (header, <send>) */
	bool fin; /* it passed with the last word (sent, no answer expected): closed with FIN */
	struct hlb_loop *loop;
	struct hlb_timer timer;
	struct hlb_io io; /* fd of the check in flight, -1 if none */
	uint64_t next_ms;
	uint64_t started_ns;
	/* waiting for a slot: too many checks in flight (check.c) */
	struct hlb_check *wait_prev, *wait_next;
	bool waiting; /* in the FIFO */
	bool reserved; /* given a slot, its timer about to start it */
};

/* Fill <c>; nothing runs until hlb_check_start(). */
void hlb_check_init(struct hlb_check *c, const struct sockaddr *addr, socklen_t addr_len,
		    uint32_t interval_ms, uint32_t timeout_ms, hlb_check_done_fn done, void *arg);
/*
 * The exchange each check makes once connected (either may be NULL / 0).
 * The bytes are copied. Returns 0 or -ENOMEM. Freed by hlb_check_stop().
 */
int hlb_check_set_payload(struct hlb_check *c, const void *send, uint32_t send_len,
			  const void *expect, uint32_t expect_len);
/*
 * The next <n> bytes of the reply of the check in flight, read from the
 * backend (<n> = 0: it closed the connection): 1 when the reply now holds
 * all of <expect> (the bytes past it are not looked at), 0 while what came
 * matches and more is due, -1 when it differs or ended short. Pure: what
 * check_io() reads goes through it, and tests and the fuzzer call it alone.
 */
int hlb_check_reply(struct hlb_check *c, const void *buf, size_t n);
/* First check at <first_ms>, then every interval. Returns 0 or -errno. */
int hlb_check_start(struct hlb_check *c, struct hlb_loop *l, uint64_t first_ms);
/*
 * Checks of <c> started (hlb_check_start()) every <interval_ms> from now on, each given
 * <timeout_ms>; the next at <first_ms> unless one is in flight (or waits for a slot): that
 * one ends as it began, and the next comes one new interval after it. A reload that changes
 * only the checks' timing: restarted, a check in flight was aborted, and reloads quicker
 * than a silent backend's timeout had none ever finish.
 */
void hlb_check_retime(struct hlb_check *c, uint32_t interval_ms, uint32_t timeout_ms,
		      uint64_t first_ms);
/* Whether a check of <c> is under way: in flight, or waiting for a slot to start. */
static inline bool hlb_check_busy(const struct hlb_check *c)
{
	return c->io.fd >= 0 || c->waiting || c->reserved;
}
/* Cancel the timer, close a check in flight (no result reported), free the payload. */
void hlb_check_stop(struct hlb_check *c);
static inline bool hlb_check_running(const struct hlb_check *c)
{
	return c->loop != NULL;
}

/*
 * The most sockets the checks may hold at once, all of them: one per check
 * running, at most a quarter of RLIMIT_NOFILE. Kept up to date by the
 * control thread, for the forwarder to read (hlb_proxy_count_fds()).
 */
const _Atomic uint32_t *hlb_check_fds(void);

/*
 * Where in [0, interval) the first check of member <i> of <n> falls, so that
 * n checks sharing an interval are evenly spread (no bursts). <salt>
 * (e.g. a hash of the service name) shifts whole pools against each other.
 */
uint64_t hlb_check_phase(uint32_t interval_ms, uint32_t i, uint32_t n, uint64_t salt);

#endif
