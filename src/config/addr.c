// SPDX-License-Identifier: MIT
/*
 * Socket addresses as written in a config: numeric "a.b.c.d:port" and
 * "[v6addr]:port", and, for backends, "name:port" (checked here, resolved
 * by resolve.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashlb/config.h"
#include "hashlb/sysctl.h"

int hashlb_port_parse(const char *s, bool allow_port0, uint16_t *ret_port)
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
		if (hashlb_port_parse(close + 2, allow_port0, &p) < 0)
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
		if (hashlb_port_parse(port, allow_port0, &p) < 0)
			return -EINVAL;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(p);
		*ret_addr = ss;
		*ret_len = sizeof(*sin);
	}
	return 0;
}

/*
 * An RFC 1123 host name: dot-separated labels of 1..63 letters, digits and
 * '-', none starting or ending with '-', at most HASHLB_HOST_MAX bytes (a
 * final dot allowed). The last label must not be all digits, so that a
 * mistyped IPv4 address ("10.0.0.300") is not taken for a name.
 */
static bool host_name_ok(const char *s, size_t n)
{
	size_t label = 0;
	bool digits = true;

	if (n && s[n - 1] == '.')
		n--;
	if (n == 0 || n > HASHLB_HOST_MAX)
		return false;
	for (size_t i = 0; i <= n; i++) {
		char ch = i < n ? s[i] : '.';

		if (ch == '.') {
			if (label == 0 || label > 63 || s[i - 1] == '-')
				return false;
			if (i == n && digits)
				return false;
			label = 0;
			digits = true;
			continue;
		}
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '-'))
			return false;
		if (ch == '-' && label == 0)
			return false;
		if (ch < '0' || ch > '9')
			digits = false;
		label++;
	}
	return true;
}

int hashlb_name_addr_parse(const char *s, char ret_host[HASHLB_HOST_MAX + 1], uint16_t *ret_port)
{
	const char *colon = strrchr(s, ':');
	uint16_t p;

	if (!colon || strchr(s, ':') != colon || !host_name_ok(s, (size_t)(colon - s)))
		return -EINVAL;
	if (hashlb_port_parse(colon + 1, false, &p) < 0)
		return -EINVAL;
	memcpy(ret_host, s, (size_t)(colon - s));
	ret_host[colon - s] = '\0';
	*ret_port = p;
	return 0;
}

bool hashlb_addr_is_name(const char *address)
{
	struct sockaddr_storage ss;
	socklen_t len;

	return hashlb_addr_parse(address, false, &ss, &len) < 0;
}

void hashlb_addr_format(const struct sockaddr_storage *a, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)a;

		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(sin->sin_port));
	} else if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)a;

		inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(sin6->sin6_port));
	} else {
		snprintf(buf, len, "-");
	}
}

int hashlb_prefix_parse(const char *s, struct hashlb_prefix *ret_prefix)
{
	/* bytes, not IN6_IS_ADDR_V4MAPPED(): p.addr is not aligned as an in6_addr */
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
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
	/* An IPv4-mapped prefix (::ffff:a.b.c.d/96+) is the IPv4 prefix it
	 * maps: it then matches an IPv4 client whichever family the listener
	 * has, as an IPv4 prefix matches a mapped one. */
	if (p.family == AF_INET6 && p.len >= 96 && !memcmp(p.addr, v4mapped, sizeof(v4mapped))) {
		memmove(p.addr, p.addr + 12, 4);
		memset(p.addr + 4, 0, sizeof(p.addr) - 4);
		p.family = AF_INET;
		p.len -= 96;
	}
	*ret_prefix = p;
	return 0;
}

/*
 * A prefix list compiled for lookup at accept: the address ranges it
 * covers, one sorted array per family with overlapping and adjacent ranges
 * merged, so a lookup is a binary search, O(log n) for the 4,096 prefixes a
 * service may list, where scanning the list cost every connection
 * microseconds. Addresses are 128-bit integers (IPv4 ones too, in their own
 * array: one type, one search), which the compilers hashlb builds with have
 * on every 64-bit target.
 */
typedef unsigned __int128 u128;

struct range {
	u128 lo, hi;
};

enum { SET_V4, SET_V6 };

struct hashlb_prefix_set {
	struct range *r[2]; /* SET_V4, SET_V6 */
	uint32_t n[2];
};

static u128 load_be(const uint8_t *a, unsigned bytes)
{
	u128 v = 0;

	for (unsigned i = 0; i < bytes; i++)
		v = v << 8 | a[i];
	return v;
}

static int range_cmp(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Sort <r> and merge the ranges that overlap or touch; the new count. */
static uint32_t ranges_merge(struct range *r, uint32_t n)
{
	uint32_t out = 0;

	if (!n)
		return 0; /* <r> is NULL: not even qsort() may see it */
	qsort(r, n, sizeof(*r), range_cmp);
	for (uint32_t i = 0; i < n; i++) {
		struct range *last = out ? &r[out - 1] : NULL;

		if (last && (last->hi == ~(u128)0 || r[i].lo <= last->hi + 1)) {
			if (r[i].hi > last->hi)
				last->hi = r[i].hi;
			continue;
		}
		r[out++] = r[i];
	}
	return out;
}

/* Whether <x> is in one of the <n> sorted, disjoint ranges of <r>. */
static bool ranges_find(const struct range *r, uint32_t n, u128 x)
{
	uint32_t lo = 0, hi = n; /* the answer is the last range in [0, lo) */

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (r[mid].lo <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && x <= r[lo - 1].hi;
}

int hashlb_prefix_set_new(const struct hashlb_prefix *p, uint32_t n,
			  struct hashlb_prefix_set **ret_set)
{
	struct hashlb_prefix_set *set;
	uint32_t count[2] = { 0, 0 };

	for (uint32_t i = 0; i < n; i++) {
		if (p[i].family == AF_INET && p[i].len <= 32)
			count[SET_V4]++;
		else if (p[i].family == AF_INET6 && p[i].len <= 128)
			count[SET_V6]++;
		else
			return -EINVAL;
	}
	set = calloc(1, sizeof(*set));
	if (!set)
		return -ENOMEM;
	for (int f = SET_V4; f <= SET_V6; f++) {
		if (count[f] && !(set->r[f] = malloc(count[f] * sizeof(struct range)))) {
			hashlb_prefix_set_free(set);
			return -ENOMEM;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		int f = p[i].family == AF_INET ? SET_V4 : SET_V6;
		unsigned bits = f == SET_V4 ? 32 : 128;
		/* the host part's mask: the low (bits - len) bits, 1..128 of them */
		u128 host = p[i].len == bits ? 0 : ~(u128)0 >> (128 - bits + p[i].len);
		u128 lo = load_be(p[i].addr, bits / 8) & ~host;

		set->r[f][set->n[f]++] = (struct range){ lo, lo | host };
	}
	for (int f = SET_V4; f <= SET_V6; f++)
		set->n[f] = ranges_merge(set->r[f], set->n[f]);
	*ret_set = set;
	return 0;
}

bool hashlb_prefix_set_match(const struct hashlb_prefix_set *set, const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		return ranges_find(set->r[SET_V4], set->n[SET_V4],
				   load_be((const uint8_t *)&in->sin_addr, 4));
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *in6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		/* A v4 client of a [::] listener is matched as the v4 address it
		 * is, by the v4 prefixes alone: through a 0.0.0.0 listener no v6
		 * prefix (::/0) names it either, and the listener must not decide. */
		if (IN6_IS_ADDR_V4MAPPED(in6))
			return ranges_find(set->r[SET_V4], set->n[SET_V4],
					   load_be(in6->s6_addr + 12, 4));
		return ranges_find(set->r[SET_V6], set->n[SET_V6], load_be(in6->s6_addr, 16));
	}
	return false;
}

void hashlb_prefix_set_free(struct hashlb_prefix_set *set)
{
	if (!set)
		return;
	free(set->r[SET_V4]);
	free(set->r[SET_V6]);
	free(set);
}

void hashlb_prefix_format(const struct hashlb_prefix *p, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN];

	if (!inet_ntop(p->family, p->addr, host, sizeof(host)))
		snprintf(host, sizeof(host), "?");
	snprintf(buf, len, "%s/%u", host, p->len);
}

/*
 * Why a bind of <where> drew EACCES, in words an operator acts on (in <buf> if
 * need be): a Unix socket's directory, or a TCP port below the kernel's
 * net.ipv4.ip_unprivileged_port_start (1024 unless the sysctl says otherwise)
 * bound without CAP_NET_BIND_SERVICE; "" for another port (a security module's
 * or a cgroup's BPF refusal, which the errno alone does not tell apart).
 */
static const char *listen_eacces_hint(const char *where, char *buf, size_t len)
{
	const char *colon = strrchr(where, ':');
	long start;
	uint16_t port;

	if (!strncmp(where, "unix:", 5))
		return " (this user may not create a file in that directory)";
	if (!colon || hashlb_port_parse(colon + 1, false, &port) < 0)
		return "";
	start = hlb_sysctl_read("/proc/sys/net/ipv4/ip_unprivileged_port_start");
	if (start < 0)
		start = 1024;
	if (port >= start)
		return "";
	snprintf(buf, len,
		 " (ports below %ld need CAP_NET_BIND_SERVICE: run as root, or grant it, as a "
		 "unit's AmbientCapabilities= does)",
		 start);
	return buf;
}

int hashlb_listen_err(struct hashlb_error *err, int ret, const char *service, const char *where)
{
	char eacces[256];
	const char *hint = ret == -EADDRINUSE	   ? " (another process listens there)"
			   : ret == -EADDRNOTAVAIL ? " (no interface of this host has that address)"
			   : ret == -EACCES ? listen_eacces_hint(where, eacces, sizeof(eacces))
			   /* a Unix socket's; the shipped unit's ProtectSystem=strict makes
			    * all of /run read-only but its RuntimeDirectory */
			   : ret == -EROFS ? " (the shipped systemd unit's ProtectSystem=strict "
					     "leaves /run/hashlb/ writable: put it there)"
					   : "";

	if (!service)
		return hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "admin: cannot listen on %s: %s%s",
				  where, strerror(-ret), hint);
	return hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "service '%s': cannot listen on %s: %s%s",
			  service, where, strerror(-ret), hint);
}
