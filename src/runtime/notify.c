// SPDX-License-Identifier: MIT
/*
 * systemd's notify protocol, written out rather than linked from libsystemd:
 * it is one datagram on a Unix socket, documented as a stable interface in
 * sd_notify(3) for exactly this, and the rest of libsystemd (and its -dev
 * package, which no other part of hashlb needs) would come with it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify.h"

int hlb_notify(const char *fmt, ...)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char msg[512];
	size_t plen;
	va_list ap;
	int fd, n, r = 0;

	if (!path || !*path)
		return 0;
	plen = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || plen >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, plen);
	if (path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract namespace */
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(msg))
		return -EMSGSIZE;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (sendto(fd, msg, (size_t)n, MSG_NOSIGNAL, (const struct sockaddr *)&sa,
		   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen)) < 0)
		r = -errno;
	close(fd);
	return r;
}
