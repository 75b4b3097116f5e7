// SPDX-License-Identifier: MIT
/*
 * Numeric socket addresses as written in a config: "a.b.c.d:port" and
 * "[v6addr]:port". No names are resolved: a config must mean the same thing
 * whatever DNS says when it is loaded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
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

int hashlb_prefix_parse(const char *s, struct hashlb_prefix *ret_prefix)
{
	struct hashlb_prefix p = { 0 };
	char host[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(s, '/');
	size_t hlen = slash ? (size_t)(slash - s) : strlen(s);
	unsigned long len = 0;
	unsigned max;

	if (hlen == 0 || hlen >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	if (inet_pton(AF_INET, host, p.addr) == 1)
		p.family = AF_INET;
	else if (inet_pton(AF_INET6, host, p.addr) == 1)
		p.family = AF_INET6;
	else
		return -EINVAL;
	max = p.family == AF_INET ? 32 : 128;
	if (!slash) {
		len = max;
	} else {
		const char *d = slash + 1;

		if (!*d || strlen(d) > 3)
			return -EINVAL;
		for (; *d; d++) {
			if (*d < '0' || *d > '9')
				return -EINVAL;
			len = len * 10 + (unsigned long)(*d - '0');
		}
		if (len > max)
			return -EINVAL;
	}
	p.len = (uint8_t)len;
	for (unsigned bit = p.len; bit < max; bit++)
		if (p.addr[bit / 8] & (0x80u >> (bit % 8)))
			return -EDOM;
	*ret_prefix = p;
	return 0;
}

static bool prefix_covers(const struct hashlb_prefix *p, int family, const uint8_t *addr)
{
	unsigned full = p->len / 8, rest = p->len % 8;

	if (p->family != family || memcmp(p->addr, addr, full) != 0)
		return false;
	return !rest || ((p->addr[full] ^ addr[full]) & (0xffu << (8 - rest))) == 0;
}

bool hashlb_prefix_match(const struct hashlb_prefix *p, uint32_t n, const struct sockaddr *sa)
{
	const uint8_t *a6 = NULL, *a4 = NULL;

	if (sa->sa_family == AF_INET) {
		a4 = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
	} else if (sa->sa_family == AF_INET6) {
		const struct in6_addr *in6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		a6 = in6->s6_addr;
		if (IN6_IS_ADDR_V4MAPPED(in6))
			a4 = a6 + 12;
	}
	for (uint32_t i = 0; i < n; i++)
		if ((a4 && prefix_covers(&p[i], AF_INET, a4)) ||
		    (a6 && prefix_covers(&p[i], AF_INET6, a6)))
			return true;
	return false;
}

void hashlb_prefix_format(const struct hashlb_prefix *p, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN];

	if (!inet_ntop(p->family, p->addr, host, sizeof(host)))
		snprintf(host, sizeof(host), "?");
	snprintf(buf, len, "%s/%u", host, p->len);
}
