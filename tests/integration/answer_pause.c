/* LD_PRELOAD shim for tests (test_upgrade.py's queued_clients_stay_the_new_ones_when_it_is_slow
 * and queued_clients_the_new_process_used_are_reset): the new process's answer for the clients
 * waiting in the old one's queues ("adopted N", sent with sendmsg()) waits
 * $HLB_TEST_ANSWER_PAUSE_MS ms first, as from a process stalled (paging, a loaded machine) past
 * the old process's bound for it; or, with $HLB_TEST_ANSWER_EXIT_ON set, the process waits for
 * that file to exist (at most 60 s) and is killed (SIGKILL) instead of answering, as one that
 * crashed serving the clients it took. Only the new process sends one. */
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void exit_when(const char *path)
{
	struct timespec t = { .tv_nsec = 10 * 1000000 };

	for (int i = 0; i < 6000 && access(path, F_OK) < 0; i++)
		nanosleep(&t, NULL);
	raise(SIGKILL);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	static ssize_t (*real)(int, const struct msghdr *, int);
	const char *ms = getenv("HLB_TEST_ANSWER_PAUSE_MS");
	const char *exit_on = getenv("HLB_TEST_ANSWER_EXIT_ON");

	if (!real)
		real = (ssize_t(*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
	for (size_t i = 0; (ms || exit_on) && i < msg->msg_iovlen; i++)
		if (memmem(msg->msg_iov[i].iov_base, msg->msg_iov[i].iov_len, "adopted ", 8)) {
			long v = ms ? atol(ms) : 0;
			struct timespec t = { .tv_sec = v / 1000, .tv_nsec = (v % 1000) * 1000000 };

			if (exit_on)
				exit_when(exit_on);
			while (nanosleep(&t, &t) < 0) {
			}
			break;
		}
	return real(fd, msg, flags);
}
