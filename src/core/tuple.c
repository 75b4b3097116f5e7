// SPDX-License-Identifier: MIT
/* The canonical tuple layout and its seeded XXH64 (see include/hashlb/tuple.h). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <linux/types.h>
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
/*
 * The XXH64 that the BPF steering program runs (bpf/xxh64.h): one
 * implementation of the tuple hash for the kernel and user space, unrolled
 * for each of the three lengths. tests/steer proves it equals libxxhash,
 * tests/unit/test_tuple checks the known answers.
 */
#include "xxh64.h"

#include "hashlb/tuple.h"

static const size_t key_len[HASHLB_KEY_MAX] = {
	[HASHLB_KEY_SRC_IP] = 16,
	[HASHLB_KEY_SRC_IP_PORT] = 18,
	[HASHLB_KEY_4TUPLE] = 36,
};

static const char *const key_names[HASHLB_KEY_MAX] = {
	[HASHLB_KEY_SRC_IP] = "src-ip",
	[HASHLB_KEY_SRC_IP_PORT] = "src-ip-port",
	[HASHLB_KEY_4TUPLE] = "4-tuple",
};

size_t hashlb_key_len(enum hashlb_key key)
{
	return (unsigned)key < HASHLB_KEY_MAX ? key_len[key] : 0;
}

const char *hashlb_key_name(enum hashlb_key key)
{
	return (unsigned)key < HASHLB_KEY_MAX ? key_names[key] : NULL;
}

int hashlb_key_parse(const char *s, enum hashlb_key *ret_key)
{
	static const struct {
		const char *name;
		enum hashlb_key key;
	} names[] = {
		{ "src-ip", HASHLB_KEY_SRC_IP },
		{ "src_ip", HASHLB_KEY_SRC_IP },
		{ "source-ip", HASHLB_KEY_SRC_IP },
		{ "src-ip-port", HASHLB_KEY_SRC_IP_PORT },
		{ "src_ip_port", HASHLB_KEY_SRC_IP_PORT },
		{ "4-tuple", HASHLB_KEY_4TUPLE },
		{ "4tuple", HASHLB_KEY_4TUPLE },
		{ "four-tuple", HASHLB_KEY_4TUPLE },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcasecmp(s, names[i].name) == 0) {
			*ret_key = names[i].key;
			return 0;
		}
	}
	return -EINVAL;
}

static int put_addr(const struct sockaddr *sa, uint8_t addr[16], uint8_t port[2])
{
	if (!sa) {
		memset(addr, 0, 16);
		memset(port, 0, 2);
		return 0;
	}
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		memset(addr, 0, 10);
		addr[10] = 0xff;
		addr[11] = 0xff;
		memcpy(addr + 12, &sin->sin_addr, 4);
		memcpy(port, &sin->sin_port, 2);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

		memcpy(addr, &sin6->sin6_addr, 16);
		memcpy(port, &sin6->sin6_port, 2);
		return 0;
	}
	return -EAFNOSUPPORT;
}

int hashlb_tuple_from_sockaddr(const struct sockaddr *src, const struct sockaddr *dst,
			       struct hashlb_tuple *ret_tuple)
{
	struct hashlb_tuple t;
	int r;

	r = put_addr(src, t.src, t.sport);
	if (r < 0)
		return r;
	r = put_addr(dst, t.dst, t.dport);
	if (r < 0)
		return r;
	*ret_tuple = t;
	return 0;
}

int hashlb_tuple_parse_src(const char *s, struct hashlb_tuple *ret_tuple)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *port_str = NULL;
	struct sockaddr_storage ss;
	unsigned long port = 0;
	bool bracketed = s[0] == '[';
	const char *colon, *zone;
	size_t len;

	memset(&ss, 0, sizeof(ss));
	if (bracketed) {
		const char *end = strchr(s, ']');

		if (!end || (end[1] != '\0' && end[1] != ':'))
			return -EINVAL;
		len = (size_t)(end - s - 1);
		if (end[1] == ':')
			port_str = end + 2;
		s++;
	} else {
		colon = strchr(s, ':');
		if (colon && strchr(colon + 1, ':'))
			colon = NULL; /* bare IPv6 address */
		len = colon ? (size_t)(colon - s) : strlen(s);
		if (colon)
			port_str = colon + 1;
	}
	/* An IPv6 zone (fe80::1%eth0, as ip and ss write a link-local peer)
	 * is not hashed: the data path hashes the address alone. */
	zone = memchr(s, '%', len);
	if (zone) {
		size_t zlen = len - (size_t)(zone - s) - 1;

		if (zlen == 0 || zlen >= IF_NAMESIZE)
			return -EINVAL;
		/* a name as interfaces have them: no bracket, colon, space, ... */
		for (size_t i = 1; i <= zlen; i++)
			if (!isalnum((unsigned char)zone[i]) && !strchr("-_.@", zone[i]))
				return -EINVAL;
		len = (size_t)(zone - s);
	}
	if (len == 0 || len >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, len);
	host[len] = '\0';
	if (port_str) {
		/* 1 to 5 digits, as a config's port: no sign, no spaces */
		size_t n = strlen(port_str);

		if (n == 0 || n > 5 || strspn(port_str, "0123456789") != n)
			return -EINVAL;
		port = strtoul(port_str, NULL, 10);
		if (port > 65535)
			return -EINVAL;
	}

	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

	/* brackets hold an IPv6 address only, as in a config */
	if (!bracketed && !zone && inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
	} else if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
	} else {
		return -EINVAL;
	}
	return hashlb_tuple_from_sockaddr((struct sockaddr *)&ss, NULL, ret_tuple);
}

uint64_t hashlb_tuple_hash(const struct hashlb_tuple *t, enum hashlb_key key, uint64_t seed)
{
	const __u8 *p = (const __u8 *)t;

	switch (key) {
	case HASHLB_KEY_SRC_IP:
		return hlb_xxh64_16(p, seed);
	case HASHLB_KEY_SRC_IP_PORT:
		return hlb_xxh64_18(p, seed);
	default:
		return hlb_xxh64_36(p, seed);
	}
}

static int addr_is_v4mapped(const uint8_t addr[16])
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return memcmp(addr, v4mapped, sizeof(v4mapped)) == 0;
}

unsigned hashlb_src_prefix_keep(const struct hashlb_src_prefix *p, const uint8_t addr[16])
{
	if (hashlb_src_prefix_is_whole(p))
		return 128;
	if (addr_is_v4mapped(addr))
		return 96 + (p->v4 && p->v4 < 32 ? p->v4 : 32);
	return p->v6 && p->v6 < 128 ? p->v6 : 128;
}

void hashlb_addr16_cut(uint8_t addr[16], unsigned keep)
{
	for (unsigned i = keep / 8; i < 16; i++) {
		unsigned bits = i == keep / 8 ? keep % 8 : 0;

		addr[i] &= (uint8_t)(0xff00u >> bits);
	}
}

void hashlb_tuple_mask_src(struct hashlb_tuple *t, const struct hashlb_src_prefix *p)
{
	hashlb_addr16_cut(t->src, hashlb_src_prefix_keep(p, t->src));
}

void hashlb_addr16_format(const uint8_t addr[16], char *buf, size_t size)
{
	if (addr_is_v4mapped(addr))
		inet_ntop(AF_INET, addr + 12, buf, (socklen_t)size);
	else
		inet_ntop(AF_INET6, addr, buf, (socklen_t)size);
}

void hashlb_addr16_format_prefix(const uint8_t addr[16], unsigned keep, char *buf, size_t size)
{
	size_t n;

	hashlb_addr16_format(addr, buf, size);
	if (keep >= 128)
		return;
	n = strlen(buf);
	snprintf(buf + n, size - n, "/%u", addr_is_v4mapped(addr) ? keep - 96 : keep);
}

int hashlb_client_hash_changed(const struct hashlb_client_hash *a,
			       const struct hashlb_client_hash *b, char *what, size_t size)
{
	bool seed = a->seed != b->seed, key = a->key != b->key;
	bool prefix = !key && b->key == HASHLB_KEY_SRC_IP &&
		      !hashlb_src_prefix_equal(&a->prefix, &b->prefix);
	bool proxy = a->accept_proxy != b->accept_proxy;
	/* the 4-tuple's destination: the listen address, or the PROXY header's with accept_proxy */
	bool listen = !key && !proxy && b->key == HASHLB_KEY_4TUPLE && !b->accept_proxy &&
		      b->listen_moved;

	snprintf(what, size, "%s%s%s%s%s", seed ? ",seed" : "", key ? ",hash_key" : "",
		 prefix ? ",hash_prefix" : "", proxy ? ",accept_proxy" : "",
		 listen ? ",listen" : "");
	if (what[0]) /* the leading comma */
		memmove(what, what + 1, strlen(what));
	return seed || key || prefix || proxy || listen;
}
