/* Fuzzes hlb_proxy_parse() with what a client may send first, and checks the contract proxyhdr.h states: lengths, "need more" for every prefix of a header, nothing written on error, addresses that hlb_proxy_header() writes back. */
// SPDX-License-Identifier: MIT
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/proxyhdr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FILL 0xa5 /* what an out-parameter holds until the parser writes it */
#define NEED_UNSET ((size_t)-1)

static void check(bool ok, const char *what, size_t len)
{
	if (ok)
		return;
	fprintf(stderr, "contract broken at len %zu: %s\n", len, what);
	abort();
}

struct result {
	int r;
	size_t need;
	struct sockaddr_storage src, dst;
};

static bool untouched(const struct sockaddr_storage *ss)
{
	const uint8_t *p = (const uint8_t *)ss;

	for (size_t i = 0; i < sizeof(*ss); i++)
		if (p[i] != FILL)
			return false;
	return true;
}

static bool family_ok(int family)
{
	return family == AF_UNSPEC || family == AF_INET || family == AF_INET6;
}

/*
 * hlb_proxy_parse() on a heap copy of exactly <len> bytes (so that ASan
 * sees a read past them), with the checks that hold for any input.
 */
static struct result parse(const uint8_t *buf, size_t len)
{
	uint8_t *copy = malloc(len ? len : 1);
	struct result res;

	if (!copy)
		abort();
	memcpy(copy, buf, len);
	memset(&res, FILL, sizeof(res));
	res.need = NEED_UNSET;
	res.r = hlb_proxy_parse(copy, len, &res.src, &res.dst, &res.need);
	free(copy);

	check(res.r == 0 || res.r == -EPROTO || res.r > 0, "returns 0, -EPROTO or a length", len);
	if (res.r > 0) {
		check((size_t)res.r <= len, "a header no longer than the bytes given", len);
		check(res.r <= HLB_PROXY_IN_MAX, "a header no longer than HLB_PROXY_IN_MAX", len);
		check(res.need == NEED_UNSET, "ret_need written only when more is needed", len);
		check(family_ok(res.src.ss_family) && family_ok(res.dst.ss_family),
		      "addresses of family AF_UNSPEC, AF_INET or AF_INET6", len);
		check(res.src.ss_family == res.dst.ss_family,
		      "the client's and the connected-to address of one family", len);
	} else if (res.r == 0) {
		check(res.need != NEED_UNSET, "ret_need written when more is needed", len);
		check(res.need > len, "more needed: more than the bytes given", len);
		check(res.need <= HLB_PROXY_IN_MAX,
		      "more needed: no more than HLB_PROXY_IN_MAX (a peek buffer's size)", len);
	} else {
		check(res.need == NEED_UNSET, "ret_need not written on error", len);
	}
	if (res.r <= 0)
		check(untouched(&res.src) && untouched(&res.dst),
		      "ret_src and ret_dst written only on success", len);
	return res;
}

/* <ss> with an IPv4-mapped IPv6 address taken as the IPv4 address, for comparing. */
static struct sockaddr_storage canonical(const struct sockaddr_storage *ss)
{
	const struct sockaddr_in6 *in6 = (const void *)ss;
	struct sockaddr_storage c;

	memset(&c, 0, sizeof(c));
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;
		struct sockaddr_in *o = (void *)&c;

		o->sin_family = AF_INET;
		o->sin_addr = in->sin_addr;
		o->sin_port = in->sin_port;
	} else if (ss->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
		struct sockaddr_in *o = (void *)&c;

		o->sin_family = AF_INET;
		memcpy(&o->sin_addr, &in6->sin6_addr.s6_addr[12], 4);
		o->sin_port = in6->sin6_port;
	} else if (ss->ss_family == AF_INET6) {
		struct sockaddr_in6 *o = (void *)&c;

		o->sin6_family = AF_INET6;
		o->sin6_addr = in6->sin6_addr;
		o->sin6_port = in6->sin6_port;
	}
	return c;
}

static bool same_endpoint(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	struct sockaddr_storage ca = canonical(a), cb = canonical(b);

	return memcmp(&ca, &cb, sizeof(ca)) == 0;
}

/*
 * The addresses a client's header named, passed on to a backend
 * (proxy_protocol v1 and v2 of an accept_proxy service), read back the same.
 */
static void check_pass_on(const struct result *res)
{
	for (int v = HASHLB_PROXY_V1; v <= HASHLB_PROXY_V2; v++) {
		uint8_t hdr[HLB_PROXY_HDR_MAX];
		struct result back;
		int n;

		n = hlb_proxy_header(v, (const struct sockaddr *)&res->src,
				     (const struct sockaddr *)&res->dst, hdr);
		check(n > 0, "the addresses of a header that parses can be passed on", (size_t)n);
		check(n <= HLB_PROXY_HDR_MAX, "a header no longer than HLB_PROXY_HDR_MAX",
		      (size_t)n);
		back = parse(hdr, (size_t)n);
		check(back.r == n, "a header hlb_proxy_header() writes parses whole", (size_t)n);
		check(same_endpoint(&back.src, &res->src) && same_endpoint(&back.dst, &res->dst),
		      "the addresses passed on are the ones received", (size_t)n);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct result whole = parse(data, size), res;

	if (whole.r > 0) {
		size_t hlen = (size_t)whole.r;

		/* Every prefix of a header waits for more, and never for more than the header. */
		for (size_t cut = 0; cut < hlen; cut++) {
			res = parse(data, cut);
			check(res.r == 0, "a prefix of a header needs more", cut);
			check(res.need <= hlen, "a prefix needs no more than the whole header",
			      cut);
		}
		/* The bytes after the header (the client's own) change nothing. */
		res = parse(data, hlen);
		check(res.r == whole.r, "the header alone has the same length", hlen);
		check(memcmp(&res.src, &whole.src, sizeof(res.src)) == 0 &&
			      memcmp(&res.dst, &whole.dst, sizeof(res.dst)) == 0,
		      "the header alone names the same addresses", hlen);
		if (whole.src.ss_family != AF_UNSPEC)
			check_pass_on(&whole);
	} else if (whole.r == 0) {
		/* What waits for more has no prefix that is already wrong or complete. */
		for (size_t cut = 0; cut < size; cut++)
			check(parse(data, cut).r == 0, "a prefix of what needs more needs more",
			      cut);
	}
	return 0;
}
