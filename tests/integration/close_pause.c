/* LD_PRELOAD shim for tests: the first close() of a listening TCP socket bound to
 * $HLB_TEST_CLOSE_PAUSE_ADDR (ADDR:PORT, or [ADDR]:PORT for IPv6) stops until the test lets it go on, so that
 * what runs beside it (a reload) finds that socket still open. $HLB_TEST_PAUSE_FD is a
 * socket: there, the shim writes a byte to it and waits for one back (or its end). Whichever
 * thread closes the socket stops (a worker's), the others go on. With $HLB_TEST_CLOSE_AT_SCAN
 * set, it goes on too as soon as the process opens /proc/self/fd (the reload's look for its own
 * sockets, after its bind collided with that one), and that opendir() returns once the socket
 * is closed: the close lands between the bind and the look. Once the socket is closed, the
 * shim writes 'c' to $HLB_TEST_PAUSE_FD before closing it. */
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static atomic_bool done, at_scan, closed;

/* Whether <fd> listens on TCP at $HLB_TEST_CLOSE_PAUSE_ADDR. */
static int the_socket(int fd)
{
	const char *want = getenv("HLB_TEST_CLOSE_PAUSE_ADDR");
	struct sockaddr_storage a;
	const struct sockaddr_in *a4 = (const struct sockaddr_in *)&a;
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&a;
	socklen_t len = sizeof(a);
	int listening = 0;
	socklen_t ol = sizeof(listening);
	char text[INET6_ADDRSTRLEN + 16], host[INET6_ADDRSTRLEN];

	if (!want || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ol) < 0 || !listening ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		return 0;
	if (a.ss_family == AF_INET && inet_ntop(AF_INET, &a4->sin_addr, host, sizeof(host)))
		snprintf(text, sizeof(text), "%s:%u", host, ntohs(a4->sin_port));
	else if (a.ss_family == AF_INET6 && inet_ntop(AF_INET6, &a6->sin6_addr, host, sizeof(host)))
		snprintf(text, sizeof(text), "[%s]:%u", host, ntohs(a6->sin6_port));
	else
		return 0;
	return strcmp(text, want) == 0;
}

int close(int fd)
{
	static int (*real)(int);
	const char *fd_text = getenv("HLB_TEST_PAUSE_FD");
	int saved = errno;
	char c = 'p';
	ssize_t n;

	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "close");
	if (fd_text && !atomic_load(&done) && the_socket(fd) && !atomic_exchange(&done, true)) {
		int pfd = atoi(fd_text);

		if (write(pfd, &c, 1) == 1) {
			struct pollfd pl = { .fd = pfd, .events = POLLIN };

			/* the test's byte (or its end), or the look at /proc/self/fd */
			while (!atomic_load(&at_scan) && poll(&pl, 1, 10) <= 0)
				;
			do
				n = pl.revents ? read(pfd, &c, 1) : 0;
			while (n < 0 && errno == EINTR);
		}
		errno = saved;
		n = real(fd);
		atomic_store(&closed, true);
		/* said once closed: a client the test connects then cannot reach the old
		 * socket (in u's SO_REUSEPORT group until this close), which would reset it */
		c = 'c';
		if (write(pfd, &c, 1) < 0)
			errno = saved;
		real(pfd);
		errno = saved;
		return (int)n;
	}
	errno = saved;
	return real(fd);
}

DIR *opendir(const char *name)
{
	static DIR *(*real)(const char *);

	if (!real)
		real = (DIR * (*)(const char *)) dlsym(RTLD_NEXT, "opendir");
	if (getenv("HLB_TEST_CLOSE_AT_SCAN") && atomic_load(&done) && !atomic_load(&closed) &&
	    strcmp(name, "/proc/self/fd") == 0) {
		atomic_store(&at_scan, true);
		for (int i = 0; i < 10000 && !atomic_load(&closed); i++) /* 10 s at most */
			usleep(1000);
	}
	return real(name);
}
