/* LD_PRELOAD shim for tests (test_upgrade_lend.py's queued_clients_cut_short_by_the_fd_limit):
 * the first message recvmsg() reads with at least HLB_TEST_FDS_CUT_MIN descriptors (SCM_RIGHTS)
 * is cut as the kernel cuts one for a process at its fd limit: its last HLB_TEST_FDS_CUT
 * descriptors closed, left out of its control message, and MSG_CTRUNC set. Only that one: the
 * fd limit itself would hit a process on a guess of its peers' timing. Only a batch that large
 * is cut: the listening sockets an upgrade passes are a few, the clients lent come 250 a
 * message (HLB_FDPASS_PER_MSG). */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static atomic_bool done;

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	ssize_t (*real)(int, struct msghdr *, int) =
		(ssize_t(*)(int, struct msghdr *, int))dlsym(RTLD_NEXT, "recvmsg");
	const char *min = getenv("HLB_TEST_FDS_CUT_MIN"), *cut = getenv("HLB_TEST_FDS_CUT");
	ssize_t n = real(fd, msg, flags);

	if (n <= 0 || !min || !cut || atomic_load(&done))
		return n;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int), c = (size_t)atol(cut);
		int *fds = (int *)CMSG_DATA(cm);

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
		    k < (size_t)atol(min) || c > k || atomic_exchange(&done, true))
			continue;
		for (size_t i = k - c; i < k; i++)
			close(fds[i]);
		cm->cmsg_len = CMSG_LEN((k - c) * sizeof(int));
		/* as the kernel leaves it: the control data ends with this message's (else the
		 * reader's CMSG_NXTHDR() takes the closed descriptors' numbers for a header) */
		msg->msg_controllen = (size_t)((char *)cm - (char *)msg->msg_control) +
				      CMSG_SPACE((k - c) * sizeof(int));
		msg->msg_flags |= MSG_CTRUNC;
		break;
	}
	return n;
}
