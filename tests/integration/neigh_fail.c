/* LD_PRELOAD shim for tests: /proc/net/arp gives $HLB_TEST_ARP, then fails with EIO;
 * with $HLB_TEST_NETLINK_FAIL, recv() on a netlink socket fails with ENOBUFS. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static size_t off;

static ssize_t arp_read(void *c, char *buf, size_t size)
{
	const char *text = getenv("HLB_TEST_ARP");
	size_t n = strlen(text) - off;

	(void)c;
	if (n == 0) {
		errno = EIO;
		return -1;
	}
	n = n < size ? n : size;
	memcpy(buf, text + off, n);
	off += n;
	return (ssize_t)n;
}

static FILE *arp_open(const char *name, const char *path, const char *mode)
{
	FILE *(*real)(const char *, const char *) =
		(FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, name);

	if (!getenv("HLB_TEST_ARP") || strcmp(path, "/proc/net/arp"))
		return real(path, mode);
	off = 0;
	return fopencookie(NULL, "r", (cookie_io_functions_t){ .read = arp_read });
}

FILE *fopen(const char *path, const char *mode)
{
	return arp_open("fopen", path, mode);
}
FILE *fopen64(const char *path, const char *mode)
{
	return arp_open("fopen64", path, mode);
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	ssize_t (*real)(int, void *, size_t, int) =
		(ssize_t(*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
	int dom = 0;
	socklen_t dl = sizeof(dom);

	if (getenv("HLB_TEST_NETLINK_FAIL") &&
	    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &dl) == 0 && dom == AF_NETLINK) {
		errno = ENOBUFS;
		return -1;
	}
	return real(fd, buf, len, flags);
}
