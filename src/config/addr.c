// SPDX-License-Identifier: MIT
/*
 * Numeric socket addresses as written in a config: "a.b.c.d:port" and
 * "[v6addr]:port". No names are resolved: a config must mean the same thing
 * whatever DNS says when it is loaded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "hashlb/config.h"

static int port_parse(const char *s, bool allow_port0, uint16_t *ret_port)
{
	unsigned long v = 0;

	if (!*s || strlen(s) > 5)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*p - '0');
	}
	if (v > 65535 || (v == 0 && !allow_port0))
		return -EINVAL;
	*ret_port = (uint16_t)v;
	return 0;
}

int hashlb_addr_parse(const char *s, bool allow_port0, struct sockaddr_storage *ret_addr,
		      socklen_t *ret_len)
{
	struct sockaddr_storage ss;
	char host[INET6_ADDRSTRLEN + 1];
	const char *colon, *port;
	uint16_t p;
	size_t hlen;

	memset(&ss, 0, sizeof(ss));
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		if (!close || close[1] != ':')
			return -EINVAL;
		hlen = (size_t)(close - s - 1);
		if (hlen == 0 || hlen >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, hlen);
		host[hlen] = '\0';
		if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1)
			return -EINVAL;
		if (port_parse(close + 2, allow_port0, &p) < 0)
			return -EINVAL;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(p);
		*ret_addr = ss;
		*ret_len = sizeof(*sin6);
		return 0;
	}
	colon = strrchr(s, ':');
	if (!colon || strchr(s, ':') != colon)
		return -EINVAL; /* no port, or a bare IPv6 address */
	hlen = (size_t)(colon - s);
	port = colon + 1;
	if (hlen == 0 || hlen >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	{
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		/* inet_pton, unlike inet_aton, takes only the dotted quad. */
		if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
			return -EINVAL;
		if (port_parse(port, allow_port0, &p) < 0)
			return -EINVAL;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(p);
		*ret_addr = ss;
		*ret_len = sizeof(*sin);
	}
	return 0;
}
