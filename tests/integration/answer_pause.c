/* LD_PRELOAD shim for tests (test_upgrade.py's queued_clients_stay_the_new_ones_when_it_is_slow
 * and queued_clients_the_new_process_used_are_reset): the new process's answer for the clients
 * waiting in the old one's queues ("adopted N", sent with sendmsg()) waits
 * $HLB_TEST_ANSWER_PAUSE_MS ms first, as from a process stalled (paging, a loaded machine) past
 * the old process's bound for it; or, with $HLB_TEST_ANSWER_EXIT_ON set, the process waits for
 * that file to exist (at most 60 s) and is killed (SIGKILL) instead of answering, as one that
 * crashed serving the clients it took. Only the new process sends one. With $HLB_TEST_ANSWER_CUT
 * set (test_upgrade.py's queued_clients_of_an_answer_cut_short_are_served_once), the part of the
 * answer that holds that text goes up to the text's end, cut there part way through a line, and
 * every later sendmsg() on that socket fails with ENOMEM, as one may with the kernel short of
 * memory: an answer that cannot go whole. */
#include <dlfcn.h>
#include <errno.h>
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

	const char *cut = getenv("HLB_TEST_ANSWER_CUT");
	static int cut_fd = -1;

	if (!real)
		real = (ssize_t(*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
	if (cut && *cut && fd == cut_fd) {
		errno = ENOMEM;
		return -1;
	}
	if (cut && *cut && msg->msg_iovlen == 1) {
		const char *base = msg->msg_iov[0].iov_base;
		const char *at = memmem(base, msg->msg_iov[0].iov_len, cut, strlen(cut));

		if (at) {
			struct iovec part = { (void *)base, (size_t)(at - base) + strlen(cut) };
			struct msghdr m = *msg;

			m.msg_iov = &part;
			cut_fd = fd;
			return real(fd, &m, flags);
		}
	}
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
