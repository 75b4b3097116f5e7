/* LD_PRELOAD shim for tests (test_proxy_protocol.py's header_refused_then_retried): the
 * first send of a PROXY v2 header to the backend port $HLB_TEST_REFUSE_PORT fails with
 * EPIPE, as to a backend that resets at once. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	static ssize_t (*real)(int, const void *, size_t, int);
	static int refused;
	const char *port = getenv("HLB_TEST_REFUSE_PORT");
	struct sockaddr_in peer;
	socklen_t plen = sizeof(peer);

	if (!real)
		real = (ssize_t(*)(int, const void *, size_t, int))dlsym(RTLD_NEXT, "send");
	if (!refused && port && len >= 12 && !memcmp(buf, "\r\n\r\n\0\r\nQUIT\n", 12) &&
	    getpeername(fd, (struct sockaddr *)&peer, &plen) == 0 && peer.sin_family == AF_INET &&
	    ntohs(peer.sin_port) == atoi(port)) {
		refused = 1;
		errno = EPIPE;
		return -1;
	}
	return real(fd, buf, len, flags);
}
