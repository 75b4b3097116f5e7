// SPDX-License-Identifier: MIT
/*
 * PROXY protocol headers, written by hand: the format is a few lines of the
 * specification (haproxy.org/download/2.6/doc/proxy-protocol.txt) and
 * Debian packages no C library for it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "proxyhdr.h"

static const uint8_t v2_signature[12] = { 0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
					  0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a };

/* An address and port, IPv4-mapped IPv6 taken as IPv4. */
struct endpoint {
	int family;
	const void *addr; /* 4 or 16 bytes, network order */
	uint16_t port; /* network order */
};

static int endpoint_of(const struct sockaddr *sa, struct endpoint *ep)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		*ep = (struct endpoint){ AF_INET, &in->sin_addr, in->sin_port };
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
			*ep = (struct endpoint){ AF_INET, &in6->sin6_addr.s6_addr[12],
						 in6->sin6_port };
		else
			*ep = (struct endpoint){ AF_INET6, &in6->sin6_addr, in6->sin6_port };
		return 0;
	}
	return -EAFNOSUPPORT;
}

int hlb_proxy_header(enum hashlb_proxy_protocol version, const struct sockaddr *src,
		     const struct sockaddr *dst, uint8_t *buf)
{
	struct endpoint s, d;
	size_t alen;

	if (version != HASHLB_PROXY_V1 && version != HASHLB_PROXY_V2)
		return -EINVAL;
	if (endpoint_of(src, &s) < 0 || endpoint_of(dst, &d) < 0 || s.family != d.family)
		return -EAFNOSUPPORT;
	alen = s.family == AF_INET ? 4 : 16;
	if (version == HASHLB_PROXY_V1) {
		char sh[INET6_ADDRSTRLEN], dh[INET6_ADDRSTRLEN];

		inet_ntop(s.family, s.addr, sh, sizeof(sh));
		inet_ntop(d.family, d.addr, dh, sizeof(dh));
		return snprintf((char *)buf, HLB_PROXY_HDR_MAX, "PROXY TCP%c %s %s %u %u\r\n",
				s.family == AF_INET ? '4' : '6', sh, dh, ntohs(s.port),
				ntohs(d.port));
	}
	memcpy(buf, v2_signature, sizeof(v2_signature));
	buf[12] = 0x21; /* version 2, command PROXY */
	buf[13] = s.family == AF_INET ? 0x11 : 0x21; /* TCP over IPv4 / IPv6 */
	buf[14] = 0;
	buf[15] = (uint8_t)(2 * alen + 4); /* length of what follows: 12 or 36 */
	memcpy(buf + 16, s.addr, alen);
	memcpy(buf + 16 + alen, d.addr, alen);
	memcpy(buf + 16 + 2 * alen, &s.port, 2);
	memcpy(buf + 18 + 2 * alen, &d.port, 2);
	return (int)(20 + 2 * alen);
}

int hlb_proxy_local_header(enum hashlb_proxy_protocol version, uint8_t *buf)
{
	if (version == HASHLB_PROXY_V1) {
		memcpy(buf, "PROXY UNKNOWN\r\n", 15);
		return 15;
	}
	if (version != HASHLB_PROXY_V2)
		return -EINVAL;
	memcpy(buf, v2_signature, sizeof(v2_signature));
	buf[12] = 0x20; /* version 2, command LOCAL */
	buf[13] = 0x00; /* UNSPEC: no addresses follow */
	buf[14] = buf[15] = 0;
	return 16;
}
