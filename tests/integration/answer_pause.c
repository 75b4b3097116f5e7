/* LD_PRELOAD shim for tests (test_upgrade.py's queued_clients_stay_the_new_ones_when_it_is_slow):
 * the new process's answer for the clients waiting in the old one's queues ("adopted N", sent
 * with sendmsg()) waits $HLB_TEST_ANSWER_PAUSE_MS ms first, as from a process stalled (paging,
 * a loaded machine) past the old process's bound for it. Only the new process sends one. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	static ssize_t (*real)(int, const struct msghdr *, int);
	const char *ms = getenv("HLB_TEST_ANSWER_PAUSE_MS");

	if (!real)
		real = (ssize_t(*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
	for (size_t i = 0; ms && i < msg->msg_iovlen; i++)
		if (memmem(msg->msg_iov[i].iov_base, msg->msg_iov[i].iov_len, "adopted ", 8)) {
			long v = atol(ms);
			struct timespec t = { .tv_sec = v / 1000, .tv_nsec = (v % 1000) * 1000000 };

			while (nanosleep(&t, &t) < 0) {
			}
			break;
		}
	return real(fd, msg, flags);
}
