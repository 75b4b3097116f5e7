// SPDX-License-Identifier: MIT
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "fdpass.h"

/* Write text[off, end) with <fds> on its first byte, waiting up to 1 s for room. */
static bool send_with_fds(int fd, const char *text, size_t off, size_t end, const int *fds,
			  unsigned n_fds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * HLB_FDPASS_PER_MSG)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	ssize_t n;

	if (n_fds) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
	}
	while (off < end) {
		iov = (struct iovec){ .iov_base = (char *)text + off, .iov_len = end - off };
		n = sendmsg(fd, &msg, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };

			if (poll(&pfd, 1, 1000) <= 0)
				return false;
			continue;
		}
		if (n <= 0)
			return false;
		off += (size_t)n;
		msg.msg_control = NULL; /* the descriptors went with the first byte */
		msg.msg_controllen = 0;
	}
	return true;
}

bool hlb_fdpass_send(int fd, const char *text, size_t len, size_t lines_off, const int *fds,
		     unsigned n_fds)
{
	size_t off = 0, end;
	unsigned sent = 0, k;

	while (off < len) {
		k = n_fds - sent < HLB_FDPASS_PER_MSG ? n_fds - sent : HLB_FDPASS_PER_MSG;
		end = len;
		if (sent + k < n_fds) {
			/* this batch ends with the line of descriptor sent + k - 1 */
			end = lines_off;
			for (unsigned line = 0; line < sent + k && end < len; line++) {
				const char *nl = memchr(text + end, '\n', len - end);

				end = nl ? (size_t)(nl - text) + 1 : len;
			}
		}
		if (!send_with_fds(fd, text, off, end, fds + sent, k))
			return false;
		sent += k;
		off = end;
	}
	return true;
}
