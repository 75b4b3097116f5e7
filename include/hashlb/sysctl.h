/* SPDX-License-Identifier: MIT */
/*
 * Reading a sysctl's number from /proc/sys, the one way hashlb's libraries
 * do (header-only, as grow.h: every library has include/).
 */
#ifndef HASHLB_SYSCTL_H
#define HASHLB_SYSCTL_H

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* The number at the start of the file <path> (a /proc/sys path), or -1 when
 * it cannot be read (no such sysctl here, no number). */
static inline long hlb_sysctl_read(const char *path)
{
	char text[32], *end;
	long v = -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n > 0) {
		text[n] = '\0';
		v = strtol(text, &end, 10);
		if (end == text)
			v = -1;
	}
	return v;
}

#endif
