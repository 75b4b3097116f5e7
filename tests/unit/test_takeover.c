// SPDX-License-Identifier: MIT
/* Taking an old process's listening sockets over (src/proxy/listener.c): a takeover that
 * fails gives back everything the answer brought, the resync socket included; the settings
 * set at run time there are taken over by the rule of a reload (handover.c); and sockets sent
 * without waiting reach the taker on the lines that name them (fdpass.c). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "hashlb/table.h"
#include "proxy/proxy.h"
#include "runtime/fdpass.h"

/*
 * An upgrade in place whose answer breaks off after its first message (here more descriptors
 * than a message may carry: -EMSGSIZE; a parent silent for 10 s after it: -ETIMEDOUT, the same
 * path). That message brought the old process's resync socket: the new one binds sockets of
 * its own and carries nothing over, so it must close that socket too, not follow it and apply
 * the old one's corrections to settings it never took. The old one sees it closed.
 */
static void test_failed_takeover_closes_the_resync_socket(void **state)
{
	struct hlb_proxy_opts opts = { .n_workers = 1 };
	struct hashlb_error err = { 0 };
	enum { N = HLB_FDPASS_PER_MSG + 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int) * N)];
		struct cmsghdr align;
	} ctl;
	char text[] = "HTTP/1.1 200 OK\r\n", why[128], c;
	struct iovec iov = { .iov_base = text, .iov_len = sizeof(text) - 1 };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = ctl.buf,
			      .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	int sv[2], rs[2], fds[N], null_fd;
	struct hlb_proxy *p;

	(void)state;
	assert_int_equal(hlb_proxy_new(&opts, NULL, &p, &err), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rs), 0);
	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(null_fd >= 0);
	fds[0] = rs[0]; /* the resync socket, first, as the old one sends it */
	for (int i = 1; i < N; i++)
		fds[i] = null_fd;
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * N);
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	assert_int_equal(sendmsg(sv[0], &msg, 0), (ssize_t)iov.iov_len);
	close(rs[0]);
	close(null_fd);

	assert_true(hlb_proxy_take_over_fd(p, sv[1], why, sizeof(why)) < 0);
	assert_int_equal(hlb_proxy_take_resync_fd(p), -1);
	/* the old one's end: EOF, nobody follows it */
	fcntl(rs[1], F_SETFL, O_NONBLOCK);
	assert_int_equal(read(rs[1], &c, 1), 0);
	close(rs[1]);
	close(sv[0]);
	close(sv[1]);
	hlb_proxy_free(p);
}

/*
 * A setting the old process had set at run time (hashlb ctl set) is taken over where the new
 * config leaves it as the old config had it, and only then: one the new config changes is the
 * new config's, as at a reload. A weight past HASHLB_WEIGHT_MAX is no hashlb's, and a cap under
 * kernel steering caps nothing. hashlb ctl upgrade's pre-check counts weights by this rule.
 */
static void test_handover_carries_by_the_rule_of_a_reload(void **state)
{
	struct hashlb_service_cfg svc = { .steering = HASHLB_STEERING_USERSPACE };
	struct hashlb_backend_cfg b = { .weight = 1,
					.max_connections = 0,
					.admin = HASHLB_ADMIN_READY };
	struct hlb_handover_set set;
	const unsigned all = HLB_HANDOVER_CARRY_STATE | HLB_HANDOVER_CARRY_WEIGHT |
			     HLB_HANDOVER_CARRY_MAX_CONNECTIONS;

	(void)state;
	assert_int_equal(hlb_handover_set_parse("set web a admin=drain/ready weight=5/1 "
						"max_connections=9/0 health=up penalty=0.000 "
						"held=no ramp=- addr=127.0.0.1:1 hold=-",
						&set),
			 0);
	assert_int_equal(hlb_handover_carries(&set.s, &svc, &b), all);
	assert_true(hlb_handover_weight_set(&set.s)); /* a line ctl upgrade's pre-check keeps */
	/* each the new config changes stays the new config's, the others carried */
	b.weight = 2;
	assert_int_equal(hlb_handover_carries(&set.s, &svc, &b), all & ~HLB_HANDOVER_CARRY_WEIGHT);
	b.weight = 1;
	b.admin = HASHLB_ADMIN_MAINT;
	b.max_connections = 3;
	assert_int_equal(hlb_handover_carries(&set.s, &svc, &b), HLB_HANDOVER_CARRY_WEIGHT);
	b.admin = HASHLB_ADMIN_READY;
	b.max_connections = 0;
	/* a cap under kernel steering caps nothing */
	svc.steering = HASHLB_STEERING_KERNEL;
	assert_int_equal(hlb_handover_carries(&set.s, &svc, &b),
			 all & ~HLB_HANDOVER_CARRY_MAX_CONNECTIONS);
	svc.steering = HASHLB_STEERING_USERSPACE;
	/* a weight past the most a hashlb takes: not one of its lines */
	set.s.w = HASHLB_WEIGHT_MAX + 1;
	assert_int_equal(hlb_handover_carries(&set.s, &svc, &b), all & ~HLB_HANDOVER_CARRY_WEIGHT);
	assert_false(hlb_handover_weight_set(&set.s));
	/* nothing set at run time (a line for a backend down): nothing carried */
	assert_int_equal(hlb_handover_set_parse("set web a admin=ready/ready weight=1/1 "
						"max_connections=0/0 health=down",
						&set),
			 0);
	assert_int_equal(hlb_handover_carries(&set.s, &svc, &b), 0);
	assert_false(hlb_handover_weight_set(&set.s));
}

/*
 * A set line longer than a reader's bound (HLB_HANDOVER_LINE_MAX: fields a later version adds
 * after those this one reads, as each version added its own) is read up to the bound, its
 * fields there whole: the backend's state, weight and cap are carried, its address too, and
 * the next line read as any. Before, the whole line was passed over: a drained backend came
 * back in an upgrade (or a rollback) to a version that reads a shorter line than the old one
 * writes.
 */
static void test_handover_line_past_the_bound_keeps_its_fields(void **state)
{
	char text[4096], line[HLB_HANDOVER_LINE_MAX + 1];
	const char *at = text;
	struct hlb_handover_set set;
	int n;

	(void)state;
	n = snprintf(text, sizeof(text),
		     "set web a admin=drain/ready weight=5/1 max_connections=9/0 health=down "
		     "penalty=2.000 held=yes ramp=- addr=127.0.0.1:1 hold=- later=%0*d "
		     "more=%0*d\n"
		     "set web b admin=maint/ready weight=1/1 max_connections=0/0 health=up\n",
		     HLB_HANDOVER_LINE_MAX / 2, 0, HLB_HANDOVER_LINE_MAX / 2, 0);
	assert_true(n > 0 && (size_t)n < sizeof(text));
	assert_true(hlb_handover_next_line(&at, line));
	assert_int_equal(hlb_handover_set_parse(line, &set), 0);
	assert_string_equal(set.name, "a");
	assert_int_equal(set.s.a, HASHLB_ADMIN_DRAIN);
	assert_int_equal(set.s.w, 5);
	assert_int_equal(set.s.max, 9);
	assert_string_equal(set.health, "down");
	assert_non_null(strstr(line, " addr=127.0.0.1:1 hold=- "));
	/* whole fields only: the one across the bound is left out, not cut short */
	assert_null(strstr(line, "more="));
	assert_true(hlb_handover_next_line(&at, line));
	assert_int_equal(hlb_handover_set_parse(line, &set), 0);
	assert_string_equal(set.name, "b");
	assert_int_equal(set.s.a, HASHLB_ADMIN_MAINT);
	assert_string_equal(at, ""); /* the text read to its end */
}

/*
 * The widest set line this version writes (two names of HASHLB_NAME_MAX bytes, every number at
 * the most the config and hashlb ctl set allow, an IPv6 address) is under the bound from which
 * a hashlb of before the addr= field passes the line over whole (HLB_HANDOVER_LINE_OLD_MAX),
 * so that an upgrade in place back to one carries every backend's state, weight and cap.
 * A field added to HLB_HANDOVER_LINE must keep it so.
 */
static void test_handover_widest_line_read_by_older_hashlbs(void **state)
{
	char name[HASHLB_NAME_MAX + 1], line[2048];
	int n;

	(void)state;
	memset(name, 'n', HASHLB_NAME_MAX);
	name[HASHLB_NAME_MAX] = '\0';
	n = snprintf(line, sizeof(line), HLB_HANDOVER_LINE, name, name, "maint", "maint",
		     HASHLB_WEIGHT_MAX, HASHLB_WEIGHT_MAX, HASHLB_MAX_CONNECTIONS_MAX,
		     HASHLB_MAX_CONNECTIONS_MAX, "assumed", 999999.999 /* read below 1e6 */, "yes",
		     "3600000" /* slow_start's most */,
		     "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535",
		     "28800000/28800000/4294967295" /* 8 x passive_hold's most; holds a u32 */);
	print_message("    the widest set line: %d bytes, its newline left out\n", n - 1);
	assert_true(n - 1 < HLB_HANDOVER_LINE_OLD_MAX);
}

/*
 * A text whose descriptors do not fit one message, sent without waiting (hlb_fdpass_send_some():
 * GET /sockets on the admin endpoint's loop) through a socket that fills, again and again: each
 * batch of HLB_FDPASS_PER_MSG rides on the first byte of the first line that names it (the
 * answer's first byte for the first), every descriptor once, and the text arrives whole, however
 * the socket cut it. The new process reads the descriptors in the order of the lines.
 */
static void test_send_some_batches_ride_on_their_lines(void **state)
{
	enum { N = 2 * HLB_FDPASS_PER_MSG + 7, LINE = 16, HEAD = 8 };
	static char text[HEAD + N * LINE], got_text[sizeof(text)];
	union {
		char buf[CMSG_SPACE(sizeof(int) * HLB_FDPASS_PER_MSG)];
		struct cmsghdr align;
	} ctl;
	struct hlb_fdpass_at at = { 0 };
	int sv[2], p[2], fds[N], sndbuf = 1, r = 0, fulls = 0;
	unsigned batches = 0, came = 0;
	size_t got = 0;

	(void)state;
	memcpy(text, "HEAD\r\n\r\n", HEAD);
	for (int i = 0; i < N; i++) {
		char line[LINE + 1];

		snprintf(line, sizeof(line), "%0*d\n", LINE - 1, i);
		memcpy(text + HEAD + i * LINE, line, LINE);
	}
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	for (int i = 0; i < N; i++)
		fds[i] = p[0];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
	assert_int_equal(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	/* a bound on the rounds, not a measure: each moves a byte or more */
	for (int round = 0; got < sizeof(text) && round < 100000; round++) {
		if (r != 1) {
			r = hlb_fdpass_send_some(sv[0], text, sizeof(text), HEAD, fds, N, &at);
			assert_true(r >= 0);
			fulls += r == 0;
		}
		/* a byte a read: the descriptors come with the read of the byte they ride on */
		for (;;) {
			struct iovec iov = { got_text + got, 1 };
			struct msghdr msg = { .msg_iov = &iov,
					      .msg_iovlen = 1,
					      .msg_control = ctl.buf,
					      .msg_controllen = sizeof(ctl.buf) };
			ssize_t n = recvmsg(sv[1], &msg, MSG_CMSG_CLOEXEC);

			if (n < 0 && errno == EAGAIN)
				break;
			assert_int_equal(n, 1);
			assert_false(msg.msg_flags & MSG_CTRUNC);
			for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm;
			     cm = CMSG_NXTHDR(&msg, cm)) {
				unsigned k = (unsigned)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
				unsigned first = batches * HLB_FDPASS_PER_MSG;

				/* batch b on line b * PER_MSG's first byte; the first on byte 0 */
				assert_int_equal(got, first ? HEAD + (size_t)first * LINE : 0);
				assert_int_equal(k, N - first < HLB_FDPASS_PER_MSG
							    ? N - first
							    : HLB_FDPASS_PER_MSG);
				for (unsigned i = 0; i < k; i++) {
					int fd;

					memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(fd));
					close(fd);
				}
				batches++;
				came += k;
			}
			got++;
		}
	}
	assert_int_equal(r, 1);
	assert_true(fulls > 0); /* the socket filled: sent in parts, as the test means */
	assert_int_equal(at.sent, N);
	assert_int_equal(came, N);
	assert_int_equal(got, sizeof(text));
	assert_memory_equal(got_text, text, sizeof(text));
	close(sv[0]);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_failed_takeover_closes_the_resync_socket),
		cmocka_unit_test(test_handover_carries_by_the_rule_of_a_reload),
		cmocka_unit_test(test_handover_line_past_the_bound_keeps_its_fields),
		cmocka_unit_test(test_handover_widest_line_read_by_older_hashlbs),
		cmocka_unit_test(test_send_some_batches_ride_on_their_lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
