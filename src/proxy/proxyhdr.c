// SPDX-License-Identifier: MIT
/*
 * PROXY protocol headers, written by hand: the format is a few lines of the
 * specification (haproxy.org/download/2.6/doc/proxy-protocol.txt) and
 * Debian packages no C library for it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxyhdr.h"

static const uint8_t v2_signature[12] = { 0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
					  0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a };

/* An address and port, IPv4-mapped IPv6 taken as IPv4 when <unmap>. */
struct endpoint {
	int family;
	const void *addr; /* 4 or 16 bytes, network order */
	uint16_t port; /* network order */
};

static int endpoint_of(const struct sockaddr *sa, bool unmap, struct endpoint *ep)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		*ep = (struct endpoint){ AF_INET, &in->sin_addr, in->sin_port };
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		if (unmap && IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
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
	if (endpoint_of(src, true, &s) < 0 || endpoint_of(dst, true, &d) < 0)
		return -EAFNOSUPPORT;
	/* One IPv4-mapped address beside a plain IPv6 one (a client's PROXY
	 * header may name both): the pair goes as IPv6, as it came. */
	if (s.family != d.family) {
		endpoint_of(src, false, &s);
		endpoint_of(dst, false, &d);
	}
	if (s.family != d.family)
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

/* <ss> = <family> address <addr> (4 or 16 bytes) and port <port_be> (2 bytes), network order. */
static void endpoint_set(struct sockaddr_storage *ss, int family, const void *addr,
			 const void *port_be)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET) {
		struct sockaddr_in *in = (void *)ss;

		in->sin_family = AF_INET;
		memcpy(&in->sin_addr, addr, 4);
		memcpy(&in->sin_port, port_be, 2);
	} else {
		struct sockaddr_in6 *in6 = (void *)ss;

		in6->sin6_family = AF_INET6;
		memcpy(&in6->sin6_addr, addr, 16);
		memcpy(&in6->sin6_port, port_be, 2);
	}
}

/* An address and a port of a v1 header into <ss>; false if either is not valid. */
static bool v1_endpoint(int family, const char *host, const char *port, struct sockaddr_storage *ss)
{
	uint8_t addr[16];
	unsigned long p = 0;
	uint16_t port_be;

	/* 1 to 5 decimal digits, no sign, no leading zero */
	if (!*port || (port[0] == '0' && port[1]) || strlen(port) > 5 ||
	    strspn(port, "0123456789") != strlen(port))
		return false;
	p = strtoul(port, NULL, 10);
	if (p > 65535 || inet_pton(family, host, addr) != 1)
		return false;
	port_be = htons((uint16_t)p);
	endpoint_set(ss, family, addr, &port_be);
	return true;
}

/* "PROXY TCP4 src dst sport dport\r\n", "PROXY TCP6 ...", "PROXY UNKNOWN...\r\n" (at most 107 bytes). */
static int parse_v1(const uint8_t *buf, size_t len, struct sockaddr_storage *src,
		    struct sockaddr_storage *dst, size_t *need)
{
	const uint8_t *crlf = NULL;
	char line[108], *f[6], *save = NULL, *t;
	int n = 0, family;
	size_t hlen;

	for (size_t i = 0; i + 1 < len && i + 1 < 107; i++)
		if (buf[i] == '\r' && buf[i + 1] == '\n') {
			crlf = buf + i;
			break;
		}
	if (!crlf) {
		if (len >= 107)
			return -EPROTO;
		*need = len + 1; /* the length is known only at the CRLF */
		return 0;
	}
	hlen = (size_t)(crlf - buf) + 2;
	memcpy(line, buf, hlen - 2);
	line[hlen - 2] = 0;
	if (strlen(line) != hlen - 2) /* a NUL inside */
		return -EPROTO;
	if (strncmp(line, "PROXY UNKNOWN", 13) == 0 && (line[13] == 0 || line[13] == ' ')) {
		src->ss_family = dst->ss_family = AF_UNSPEC;
		return (int)hlen;
	}
	/* exactly one space between fields (strtok_r() below would take more) */
	if (strstr(line, "  ") || (hlen > 2 && line[hlen - 3] == ' '))
		return -EPROTO;
	for (t = strtok_r(line, " ", &save); t && n < 6; t = strtok_r(NULL, " ", &save))
		f[n++] = t;
	if (n != 6 || t || strcmp(f[0], "PROXY") != 0) /* <t>: a seventh field */
		return -EPROTO;
	if (strcmp(f[1], "TCP4") == 0)
		family = AF_INET;
	else if (strcmp(f[1], "TCP6") == 0)
		family = AF_INET6;
	else
		return -EPROTO;
	if (!v1_endpoint(family, f[2], f[4], src) || !v1_endpoint(family, f[3], f[5], dst))
		return -EPROTO;
	return (int)hlen;
}

static int parse_v2(const uint8_t *buf, size_t len, struct sockaddr_storage *src,
		    struct sockaddr_storage *dst, size_t *need)
{
	size_t body, total, alen;
	int family;

	if (len < 16) {
		*need = 16;
		return 0;
	}
	body = (size_t)buf[14] << 8 | buf[15];
	total = 16 + body;
	if ((buf[12] & 0xf0) != 0x20 || (buf[12] & 0x0f) > 1 || total > HLB_PROXY_IN_MAX)
		return -EPROTO;
	if (len < total) {
		*need = total;
		return 0;
	}
	src->ss_family = dst->ss_family = AF_UNSPEC;
	if ((buf[12] & 0x0f) == 0) /* LOCAL: the connection's own addresses */
		return (int)total;
	family = buf[13] == 0x11 ? AF_INET : buf[13] == 0x21 ? AF_INET6 : AF_UNSPEC;
	if (family != AF_UNSPEC) {
		/* the same layout hlb_proxy_header() writes */
		alen = family == AF_INET ? 4 : 16;
		if (body < 2 * alen + 4)
			return -EPROTO; /* too short for its addresses */
		endpoint_set(src, family, buf + 16, buf + 16 + 2 * alen);
		endpoint_set(dst, family, buf + 16 + alen, buf + 18 + 2 * alen);
	}
	return (int)total; /* other families (UDP, UNIX, UNSPEC): no TCP addresses */
}

int hlb_proxy_parse(const uint8_t *buf, size_t len, struct sockaddr_storage *ret_src,
		    struct sockaddr_storage *ret_dst, size_t *ret_need)
{
	static const char v1_sig[] = "PROXY ";
	/* zero: a header that names no address returns no stack bytes either */
	struct sockaddr_storage src = { 0 }, dst = { 0 };
	size_t n;
	int r;

	/* Which version: decided by a prefix; a partial prefix waits for more. */
	n = len < 6 ? len : 6;
	if (memcmp(buf, v1_sig, n) == 0) {
		if (len < 6) {
			*ret_need = 6;
			return 0;
		}
		r = parse_v1(buf, len, &src, &dst, ret_need);
	} else {
		n = len < sizeof(v2_signature) ? len : sizeof(v2_signature);
		if (memcmp(buf, v2_signature, n) != 0)
			return -EPROTO;
		if (len < sizeof(v2_signature)) {
			*ret_need = 16;
			return 0;
		}
		r = parse_v2(buf, len, &src, &dst, ret_need);
	}
	/* Parsed into locals: a header refused halfway leaves the caller's untouched. */
	if (r > 0) {
		*ret_src = src;
		*ret_dst = dst;
	}
	return r;
}
