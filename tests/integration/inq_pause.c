/* LD_PRELOAD shim for tests (test_upgrade.py's queued_clients_sending_while_lent_are_not_reset):
 * every other ioctl(SIOCINQ) waits $HLB_TEST_INQ_PAUSE_MS ms first, as from a thread preempted
 * between two reads of a socket's counts (a loaded machine) while its peer sends: bytes arrive
 * between what one read says and what the next does. Only the odd-numbered calls (the 1st, 3rd,
 * ...) wait, so that a reader that reads again until its reads agree gets them to agree. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <time.h>

int ioctl(int fd, unsigned long req, ...)
{
	static int (*real)(int, unsigned long, ...);
	static atomic_uint calls;
	const char *ms = getenv("HLB_TEST_INQ_PAUSE_MS");
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!real)
		real = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
	if (ms && req == SIOCINQ && atomic_fetch_add(&calls, 1) % 2 == 0) {
		long v = atol(ms);
		struct timespec t = { .tv_sec = v / 1000, .tv_nsec = (v % 1000) * 1000000 };

		while (nanosleep(&t, &t) < 0) {
		}
	}
	return real(fd, req, arg);
}
