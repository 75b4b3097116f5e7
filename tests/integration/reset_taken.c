/* LD_PRELOAD shim for tests: hashlb's splice() from a socket that fails with ECONNRESET
 * returns 0 instead, the reset's error taken as a reader takes it, when the socket had no room
 * for more at hashlb's last read from it (a send of hashlb's may then wait in the kernel on
 * it). So hashlb's splice finds the end of the reset socket as it does when its own send, as it
 * waits, took the error first: a race that a test otherwise arranges only in some runs. A
 * socket with room holds no such send: its reset stays the splice's own, as it would be. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/types.h>

#define FDS 65536
static unsigned char full[FDS]; /* at its last read, the socket had no room: 1 */

ssize_t splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
	       unsigned int flags)
{
	static ssize_t (*real)(int, loff_t *, int, loff_t *, size_t, unsigned int);
	struct pollfd p = { .fd = fd_in, .events = POLLOUT };
	struct stat st;
	ssize_t n;
	int err;

	if (!real)
		real = (ssize_t(*)(int, loff_t *, int, loff_t *, size_t, unsigned int))dlsym(
			RTLD_NEXT, "splice");
	n = real(fd_in, off_in, fd_out, off_out, len, flags);
	err = errno;
	if (fd_in < 0 || fd_in >= FDS || fstat(fd_in, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		errno = err;
		return n;
	}
	if (n < 0 && err == ECONNRESET && full[fd_in])
		return 0;
	if (n >= 0 || err == EAGAIN)
		full[fd_in] = poll(&p, 1, 0) == 0;
	errno = err;
	return n;
}
