/* LD_PRELOAD shim for tests (test_forward.py's pipe_max_size_is_named): the kernel's
 * fs.pipe-max-size taken as HLB_TEST_PIPE_MAX bytes for this process, without lowering the
 * host's: an F_SETPIPE_SZ over it fails with EPERM, as it does without CAP_SYS_RESOURCE, and
 * /proc/sys/fs/pipe-max-size reads that number. For the other causes of a refusal
 * (pipe_causes_are_named): HLB_TEST_PIPE_ERRNO, the errno it fails with instead (a number:
 * 12, ENOMEM); HLB_TEST_PIPE_MAX_READS, what the sysctl's file reads instead (a refusal that
 * is not for it); HLB_TEST_PIPE_SOFT and HLB_TEST_PIPE_HARD, what fs.pipe-user-pages-soft
 * and -hard read. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static long pipe_max(void)
{
	const char *v = getenv("HLB_TEST_PIPE_MAX");

	return v ? atol(v) : 0;
}

int fcntl(int fd, int cmd, ...)
{
	int (*real)(int, int, ...) = (int (*)(int, int, ...))dlsym(RTLD_NEXT, "fcntl");
	va_list ap;
	long arg;

	va_start(ap, cmd);
	arg = va_arg(ap, long);
	va_end(ap);
	if (cmd == F_SETPIPE_SZ && pipe_max() && arg > pipe_max()) {
		errno = getenv("HLB_TEST_PIPE_ERRNO") ? atoi(getenv("HLB_TEST_PIPE_ERRNO")) : EPERM;
		return -1;
	}
	return real(fd, cmd, arg);
}

/* the same call where _FILE_OFFSET_BITS=64 names it so (64-bit: no other difference) */
int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));

/* /proc/sys/fs/pipe-max-size, and the per-user limits if given: a memory file holding the number */
int open(const char *path, int flags, ...)
{
	int (*real)(const char *, int, ...) =
		(int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
	const char *value = NULL;
	char text[32];
	va_list ap;
	mode_t mode;
	int fd;

	va_start(ap, flags);
	mode = va_arg(ap, mode_t);
	va_end(ap);
	if (!pipe_max())
		return real(path, flags, mode);
	if (strcmp(path, "/proc/sys/fs/pipe-max-size") == 0)
		value = getenv("HLB_TEST_PIPE_MAX_READS") ?: getenv("HLB_TEST_PIPE_MAX");
	else if (strcmp(path, "/proc/sys/fs/pipe-user-pages-soft") == 0)
		value = getenv("HLB_TEST_PIPE_SOFT");
	else if (strcmp(path, "/proc/sys/fs/pipe-user-pages-hard") == 0)
		value = getenv("HLB_TEST_PIPE_HARD");
	if (!value)
		return real(path, flags, mode);
	fd = memfd_create("sysctl", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	snprintf(text, sizeof(text), "%s\n", value);
	if (write(fd, text, strlen(text)) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int open64(const char *path, int flags, ...) __attribute__((alias("open")));
