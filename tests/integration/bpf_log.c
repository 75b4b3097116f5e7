/* LD_PRELOAD shim for tests: each bpf() call libbpf makes (through syscall()) is
 * appended to the file $HLB_TEST_BPF_LOG as a line "<command> <CLOCK_REALTIME s>",
 * so that a test counts the calls a moment of the process made. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

long syscall(long nr, ...)
{
	static long (*real)(long, ...);
	static int fd = -2;
	struct timespec ts;
	char line[64];
	long a[6];
	va_list ap;
	int n;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (!real)
		real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	if (nr == __NR_bpf) {
		if (fd == -2)
			fd = getenv("HLB_TEST_BPF_LOG")
				     ? open(getenv("HLB_TEST_BPF_LOG"),
					    O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)
				     : -1;
		clock_gettime(CLOCK_REALTIME, &ts);
		n = snprintf(line, sizeof(line), "%ld %lld.%09ld\n", a[0], (long long)ts.tv_sec,
			     ts.tv_nsec);
		if (fd >= 0 && write(fd, line, (size_t)n) < 0)
			fd = -1;
	}
	return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
