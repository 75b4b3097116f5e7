/* LD_PRELOAD shim for tests: hashlb stops at one point of its start until the test lets
 * it go on, so that a signal lands there and nowhere else. $HLB_TEST_PAUSE_FD is a socket:
 * at the point, the shim writes a byte to it and waits for one back (or its end). The
 * point, $HLB_TEST_PAUSE_AT: "sigprocmask", on the return of the first sigprocmask() that
 * blocks SIGHUP (main()'s first); "open:PATH", before PATH is opened (a config file:
 * it is loading); "bind", before the first bind() of a Unix socket (the admin endpoint's,
 * at a Unix path); "main", at main()'s fopencookie() (its stdout made), before the command
 * runs. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void pause_here(void)
{
	const char *fd_text = getenv("HLB_TEST_PAUSE_FD");
	int fd = fd_text ? atoi(fd_text) : -1;
	int saved = errno;
	char c = 'p';
	ssize_t n;

	if (fd < 0)
		return;
	unsetenv("HLB_TEST_PAUSE_FD"); /* once */
	if (write(fd, &c, 1) == 1) {
		do
			n = read(fd, &c, 1);
		while (n < 0 && errno == EINTR);
	}
	close(fd);
	errno = saved;
}

static int at(const char *point)
{
	const char *s = getenv("HLB_TEST_PAUSE_AT");

	return s && getenv("HLB_TEST_PAUSE_FD") && strncmp(s, point, strlen(point)) == 0;
}

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	static int (*real)(int, const sigset_t *, sigset_t *);
	int r;

	if (!real)
		real = (int (*)(int, const sigset_t *, sigset_t *))dlsym(RTLD_NEXT, "sigprocmask");
	r = real(how, set, old);
	if (how == SIG_BLOCK && set && sigismember(set, SIGHUP) && at("sigprocmask"))
		pause_here();
	return r;
}

FILE *fopencookie(void *cookie, const char *mode, cookie_io_functions_t io)
{
	static FILE *(*real)(void *, const char *, cookie_io_functions_t);

	if (!real)
		real = (FILE * (*)(void *, const char *, cookie_io_functions_t))
			dlsym(RTLD_NEXT, "fopencookie");
	if (at("main"))
		pause_here();
	return real(cookie, mode, io);
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	static int (*real)(int, const struct sockaddr *, socklen_t);

	if (!real)
		real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
	if (addr && addr->sa_family == AF_UNIX && at("bind"))
		pause_here();
	return real(fd, addr, len);
}

#define OPEN(name)                                                                       \
	int name(const char *path, int flags, ...)                                       \
	{                                                                                \
		static int (*real)(const char *, int, ...);                              \
		mode_t mode = 0;                                                         \
		va_list ap;                                                              \
                                                                                         \
		if (flags & (O_CREAT | O_TMPFILE)) {                                     \
			va_start(ap, flags);                                             \
			mode = va_arg(ap, mode_t);                                       \
			va_end(ap);                                                      \
		}                                                                        \
		if (!real)                                                               \
			real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, #name); \
		if (at("open:") && strcmp(getenv("HLB_TEST_PAUSE_AT") + 5, path) == 0)   \
			pause_here();                                                    \
		return real(path, flags, mode);                                          \
	}
OPEN(open)
OPEN(open64)
