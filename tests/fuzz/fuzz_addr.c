/* Fuzzes the parsers of addresses written by hand: hashlb_addr_parse() (config addresses), hashlb_name_addr_parse() (a backend's name:port), hashlb_prefix_parse() (accept_proxy_from), hashlb_tuple_parse_src() (hashlb lookup, the admin API's lookup); what they accept reads back the same, and a config address means the same client to lookup. */
// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashlb/config.h"
#include "hashlb/tuple.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FILL 0xa5

static void check(bool ok, const char *what, const char *s)
{
	if (ok)
		return;
	fprintf(stderr, "contract broken for '%s': %s\n", s, what);
	abort();
}

static bool untouched(const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (((const uint8_t *)p)[i] != FILL)
			return false;
	return true;
}

static void fuzz_addr(const char *s)
{
	for (int allow0 = 0; allow0 < 2; allow0++) {
		struct sockaddr_storage ss, again;
		struct hashlb_tuple t, ta;
		socklen_t len, alen;
		char text[80];
		int r;

		memset(&ss, FILL, sizeof(ss));
		memset(&len, FILL, sizeof(len));
		r = hashlb_addr_parse(s, allow0, &ss, &len);
		check(r == 0 || r == -EINVAL, "returns 0 or -EINVAL", s);
		if (r < 0) {
			check(untouched(&ss, sizeof(ss)) && untouched(&len, sizeof(len)),
			      "ret_addr and ret_len written only on success", s);
			continue;
		}
		check((ss.ss_family == AF_INET && len == sizeof(struct sockaddr_in)) ||
			      (ss.ss_family == AF_INET6 && len == sizeof(struct sockaddr_in6)),
		      "an IPv4 or IPv6 address of its own length", s);
		check(allow0 || ((struct sockaddr_in *)&ss)->sin_port != 0,
		      "port 0 only when allowed", s);
		hashlb_addr_format(&ss, text, sizeof(text));
		check(hashlb_addr_parse(text, allow0, &again, &alen) == 0 && alen == len &&
			      memcmp(&again, &ss, len) == 0,
		      "reads back the same", s);
		/* The client a config names, hashlb lookup takes the same. */
		check(hashlb_tuple_parse_src(s, &t) == 0, "hashlb lookup takes a config address",
		      s);
		check(hashlb_tuple_from_sockaddr((struct sockaddr *)&ss, NULL, &ta) == 0 &&
			      memcmp(&t, &ta, sizeof(t)) == 0,
		      "hashlb lookup reads a config address as the config does", s);
	}
}

/* A backend's "name:port": a host name of at most HASHLB_HOST_MAX bytes, never
 * also a numeric address, the input exactly host ':' port. */
static void fuzz_name_addr(const char *s)
{
	char host[HASHLB_HOST_MAX + 1], text[HASHLB_HOST_MAX + 8];
	struct sockaddr_storage ss;
	socklen_t len;
	uint16_t port = 0;
	int r;

	memset(host, FILL, sizeof(host));
	r = hashlb_name_addr_parse(s, host, &port);
	check(r == 0 || r == -EINVAL, "returns 0 or -EINVAL", s);
	if (r < 0) {
		check(untouched(host, sizeof(host)), "ret_host written only on success", s);
		return;
	}
	check(memchr(host, '\0', sizeof(host)) != NULL, "the host fits, terminated", s);
	check(port != 0, "a port 1..65535", s);
	snprintf(text, sizeof(text), "%s:%u", host, port);
	check(strcmp(text, s) == 0 || (s[strlen(host) + 1] == '0'),
	      "reads back as host ':' port (leading zeros aside)", s);
	check(hashlb_addr_parse(s, false, &ss, &len) < 0, "a name is never a numeric address", s);
}

static void fuzz_prefix(const char *s)
{
	struct hashlb_prefix p, again;
	struct hashlb_prefix_set *set;
	char text[HASHLB_PREFIX_STRLEN];
	int r;

	memset(&p, FILL, sizeof(p));
	r = hashlb_prefix_parse(s, &p);
	check(r == 0 || r == -EINVAL || r == -EDOM, "returns 0, -EINVAL or -EDOM", s);
	if (r < 0) {
		check(untouched(&p, sizeof(p)), "ret_prefix written only on success", s);
		return;
	}
	check((p.family == AF_INET && p.len <= 32) || (p.family == AF_INET6 && p.len <= 128),
	      "a family and a length within it", s);
	for (unsigned bit = p.len; bit < 128; bit++)
		check(!(p.addr[bit / 8] & (0x80u >> (bit % 8))), "no bit set past the length", s);
	hashlb_prefix_format(&p, text, sizeof(text));
	check(hashlb_prefix_parse(text, &again) == 0 && memcmp(&again, &p, sizeof(p)) == 0,
	      "reads back the same", s);
	/* Its own first address lies in it. */
	if (hashlb_prefix_set_new(&p, 1, &set) < 0)
		abort(); /* out of memory: not the input's fault */
	if (p.family == AF_INET) {
		struct sockaddr_in in = { .sin_family = AF_INET };

		memcpy(&in.sin_addr, p.addr, 4);
		check(hashlb_prefix_set_match(set, (struct sockaddr *)&in), "covers its address",
		      s);
	} else {
		struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };

		memcpy(&in6.sin6_addr, p.addr, 16);
		check(hashlb_prefix_set_match(set, (struct sockaddr *)&in6), "covers its address",
		      s);
	}
	hashlb_prefix_set_free(set);
}

/* <s> is "ADDR", "V6" or "[V6]": an address with no port. */
static bool bare_address(const char *s)
{
	char host[INET6_ADDRSTRLEN + 1];
	uint8_t a[16];
	size_t n = strlen(s);

	if (inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1)
		return true;
	if (n < 3 || n - 2 >= sizeof(host) || s[0] != '[' || s[n - 1] != ']')
		return false;
	memcpy(host, s + 1, n - 2);
	host[n - 2] = '\0';
	return inet_pton(AF_INET6, host, a) == 1;
}

/* <s> without an IPv6 zone ("%eth0", up to a ']' or the end) into <out> of <size>. */
static void zone_cut(const char *s, char *out, size_t size)
{
	const char *pct = strchr(s, '%'), *end = pct ? strchr(pct, ']') : NULL;

	if (!pct)
		snprintf(out, size, "%s", s);
	else
		snprintf(out, size, "%.*s%s", (int)(pct - s), s, end ? end : "");
}

static void fuzz_tuple(const char *s)
{
	struct sockaddr_storage ss;
	struct hashlb_tuple t, again;
	char host[INET6_ADDRSTRLEN], text[80], plain[128];
	socklen_t len;
	int r;

	memset(&t, FILL, sizeof(t));
	r = hashlb_tuple_parse_src(s, &t);
	check(r == 0 || r == -EINVAL, "returns 0 or -EINVAL", s);
	if (r < 0) {
		check(untouched(&t, sizeof(t)), "ret_tuple written only on success", s);
		return;
	}
	/* The forms tuple.h names, with a port as a config writes one (and
	 * maybe a zone, which is not hashed). */
	zone_cut(s, plain, sizeof(plain));
	check(strlen(s) >= sizeof(plain) || bare_address(plain) ||
		      hashlb_addr_parse(plain, true, &ss, &len) == 0,
	      "hashlb lookup takes an address alone or a config address, nothing looser", s);
	for (size_t i = 0; i < sizeof(t.dst); i++)
		check(t.dst[i] == 0, "the destination zeroed", s);
	check(!t.dport[0] && !t.dport[1], "the destination port zeroed", s);
	inet_ntop(AF_INET6, t.src, host, sizeof(host));
	snprintf(text, sizeof(text), "[%s]:%u", host, t.sport[0] << 8 | t.sport[1]);
	check(hashlb_tuple_parse_src(text, &again) == 0 && memcmp(&again, &t, sizeof(t)) == 0,
	      "reads back the same", s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The parsers take C strings: what the fuzzer gives, cut at a NUL. */
	char *s = malloc(size + 1);

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	fuzz_addr(s);
	fuzz_name_addr(s);
	fuzz_prefix(s);
	fuzz_tuple(s);
	free(s);
	return 0;
}
