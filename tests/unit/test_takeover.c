// SPDX-License-Identifier: MIT
/* Taking an old process's listening sockets over (src/proxy/listener.c): a takeover that
 * fails gives back everything the answer brought, the resync socket included. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_failed_takeover_closes_the_resync_socket),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
