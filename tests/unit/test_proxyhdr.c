/* Proves the PROXY protocol headers hashlb sends backends are byte for byte what the specification (proxy-protocol.txt, HAProxy 2.6) defines, for IPv4, IPv6 and IPv4-mapped clients and for health checks (LOCAL), and that what cannot be expressed is refused. */
// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include <cmocka.h>

#include "proxy/proxyhdr.h"

static struct sockaddr_in v4(const char *ip, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };

	assert_int_equal(inet_pton(AF_INET, ip, &a.sin_addr), 1);
	return a;
}

static struct sockaddr_in6 v6(const char *ip, uint16_t port)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons(port) };

	assert_int_equal(inet_pton(AF_INET6, ip, &a.sin6_addr), 1);
	return a;
}

/* The v1 header from <src> to <dst> is the text <want>. */
static void expect_v1(const void *src, const void *dst, const char *want)
{
	uint8_t buf[HLB_PROXY_HDR_MAX];
	int n = hlb_proxy_header(HASHLB_PROXY_V1, src, dst, buf);

	assert_int_equal(n, strlen(want));
	assert_memory_equal(buf, want, n);
}

static void test_v1(void **state)
{
	struct sockaddr_in s = v4("192.0.2.7", 51234), d = v4("127.0.0.1", 443);
	struct sockaddr_in6 s6 = v6("2001:db8::7", 1), d6 = v6("::1", 65535);

	expect_v1(&s, &d, "PROXY TCP4 192.0.2.7 127.0.0.1 51234 443\r\n");
	expect_v1(&s6, &d6, "PROXY TCP6 2001:db8::7 ::1 1 65535\r\n");
}

/* The longest v1 header (full IPv6 addresses, 5-digit ports) fits the buffer. */
static void test_v1_longest(void **state)
{
	struct sockaddr_in6 s = v6("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", 65535),
			    d = v6("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffd", 65534);
	uint8_t buf[HLB_PROXY_HDR_MAX + 8];
	const char *want = "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe "
			   "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffd 65535 65534\r\n";
	int n;

	memset(buf, 0xee, sizeof(buf));
	n = hlb_proxy_header(HASHLB_PROXY_V1, (struct sockaddr *)&s, (struct sockaddr *)&d, buf);
	assert_int_equal(n, 104);
	assert_memory_equal(buf, want, n);
	assert_true(n + 1 <= HLB_PROXY_HDR_MAX);
	assert_int_equal(buf[HLB_PROXY_HDR_MAX], 0xee); /* nothing written past it */
}

static void test_v2(void **state)
{
	static const uint8_t want4[] = {
		0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51,
		0x55, 0x49, 0x54, 0x0a, /* signature */
		0x21, 0x11, 0x00, 0x0c, /* v2 PROXY, TCP over IPv4, 12 bytes follow */
		192,  0,    2,	  7,	127,  0,    0,	  1, /* source, destination */
		0xc8, 0x22, 0x01, 0xbb, /* 51234, 443 */
	};
	static const uint8_t want6[] = {
		0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
		0x21, 0x21, 0x00, 0x24, /* v2 PROXY, TCP over IPv6, 36 bytes follow */
		0x20, 0x01, 0x0d, 0xb8, 0,    0,    0,	  0,	0,    0,    0,	  0,
		0,    0,    0,	  7,	0,    0,    0,	  0,	0,    0,    0,	  0,
		0,    0,    0,	  0,	0,    0,    0,	  1,	0x00, 0x01, 0xff, 0xff,
	};
	struct sockaddr_in s = v4("192.0.2.7", 51234), d = v4("127.0.0.1", 443);
	struct sockaddr_in6 s6 = v6("2001:db8::7", 1), d6 = v6("::1", 65535);
	uint8_t buf[HLB_PROXY_HDR_MAX];
	int n;

	n = hlb_proxy_header(HASHLB_PROXY_V2, (struct sockaddr *)&s, (struct sockaddr *)&d, buf);
	assert_int_equal(n, sizeof(want4));
	assert_memory_equal(buf, want4, n);
	n = hlb_proxy_header(HASHLB_PROXY_V2, (struct sockaddr *)&s6, (struct sockaddr *)&d6, buf);
	assert_int_equal(n, sizeof(want6));
	assert_memory_equal(buf, want6, n);
}

/* A client on a dual-stack listener has IPv4-mapped addresses: it is an IPv4 client. */
static void test_v4_mapped(void **state)
{
	struct sockaddr_in6 s = v6("::ffff:192.0.2.7", 51234), d = v6("::ffff:127.0.0.1", 443);
	uint8_t buf[HLB_PROXY_HDR_MAX];
	int n;

	expect_v1(&s, &d, "PROXY TCP4 192.0.2.7 127.0.0.1 51234 443\r\n");
	n = hlb_proxy_header(HASHLB_PROXY_V2, (struct sockaddr *)&s, (struct sockaddr *)&d, buf);
	assert_int_equal(n, 28);
	assert_int_equal(buf[13], 0x11);
}

/*
 * A client's PROXY header may name an IPv4-mapped address beside a plain
 * IPv6 one (TCP6 allows any two): they are passed on as IPv6, as they came,
 * not refused for a family mismatch. Found by tests/fuzz/fuzz_proxyhdr.
 */
static void test_mixed_mapped(void **state)
{
	struct sockaddr_in6 s = v6("::f7", 1), d = v6("::ffff:127.0.0.1", 2);
	uint8_t buf[HLB_PROXY_HDR_MAX];
	int n;

	expect_v1(&s, &d, "PROXY TCP6 ::f7 ::ffff:127.0.0.1 1 2\r\n");
	expect_v1(&d, &s, "PROXY TCP6 ::ffff:127.0.0.1 ::f7 2 1\r\n");
	n = hlb_proxy_header(HASHLB_PROXY_V2, (struct sockaddr *)&s, (struct sockaddr *)&d, buf);
	assert_int_equal(n, 52);
	assert_int_equal(buf[13], 0x21);
	assert_memory_equal(buf + 32, &d.sin6_addr, 16);
}

/* Health checks: a connection of the proxy's own, no addresses. */
static void test_local(void **state)
{
	static const uint8_t want2[] = { 0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51,
					 0x55, 0x49, 0x54, 0x0a, 0x20, 0x00, 0x00, 0x00 };
	uint8_t buf[HLB_PROXY_HDR_MAX];
	int n;

	n = hlb_proxy_local_header(HASHLB_PROXY_V1, buf);
	assert_int_equal(n, 15);
	assert_memory_equal(buf, "PROXY UNKNOWN\r\n", 15);
	n = hlb_proxy_local_header(HASHLB_PROXY_V2, buf);
	assert_int_equal(n, sizeof(want2));
	assert_memory_equal(buf, want2, sizeof(want2));
	assert_int_equal(hlb_proxy_local_header(HASHLB_PROXY_OFF, buf), -EINVAL);
}

static void test_refused(void **state)
{
	struct sockaddr_in s = v4("192.0.2.7", 1);
	struct sockaddr_in6 d6 = v6("::1", 2);
	struct sockaddr_un u = { .sun_family = AF_UNIX };
	uint8_t buf[HLB_PROXY_HDR_MAX];

	assert_int_equal(hlb_proxy_header(HASHLB_PROXY_V2, (struct sockaddr *)&s,
					  (struct sockaddr *)&d6, buf),
			 -EAFNOSUPPORT);
	assert_int_equal(hlb_proxy_header(HASHLB_PROXY_V1, (struct sockaddr *)&u,
					  (struct sockaddr *)&u, buf),
			 -EAFNOSUPPORT);
	assert_int_equal(hlb_proxy_header(HASHLB_PROXY_OFF, (struct sockaddr *)&s,
					  (struct sockaddr *)&s, buf),
			 -EINVAL);
}

/* Parse <len> bytes of <buf>: the result, with the addresses formatted "ip port". */
static int parse(const void *buf, size_t len, char *src, char *dst, size_t *need)
{
	struct sockaddr_storage s, d;
	int r = hlb_proxy_parse(buf, len, &s, &d, need);

	src[0] = dst[0] = 0;
	if (r > 0 && s.ss_family != AF_UNSPEC) {
		const struct sockaddr_storage *ss[2] = { &s, &d };
		char *out[2] = { src, dst };

		for (int i = 0; i < 2; i++) {
			char h[INET6_ADDRSTRLEN];
			const void *a;
			uint16_t port;

			if (ss[i]->ss_family == AF_INET) {
				a = &((const struct sockaddr_in *)ss[i])->sin_addr;
				port = ((const struct sockaddr_in *)ss[i])->sin_port;
			} else {
				a = &((const struct sockaddr_in6 *)ss[i])->sin6_addr;
				port = ((const struct sockaddr_in6 *)ss[i])->sin6_port;
			}
			inet_ntop(ss[i]->ss_family, a, h, sizeof(h));
			sprintf(out[i], "%s %u", h, ntohs(port));
		}
	}
	return r;
}

/* What hlb_proxy_header() writes, hlb_proxy_parse() reads back, whole or cut anywhere. */
static void test_parse_round_trip(void **state)
{
	struct sockaddr_in s = v4("192.0.2.7", 51234), d = v4("127.0.0.1", 443);
	struct sockaddr_in6 s6 = v6("2001:db8::7", 1), d6 = v6("::1", 65535);
	const struct sockaddr *src[2] = { (void *)&s, (void *)&s6 },
			      *dst[2] = { (void *)&d, (void *)&d6 };
	const char *want_src[2] = { "192.0.2.7 51234", "2001:db8::7 1" };
	const char *want_dst[2] = { "127.0.0.1 443", "::1 65535" };
	uint8_t buf[HLB_PROXY_HDR_MAX + 16];
	char ps[64], pd[64];
	size_t need;

	for (int v = HASHLB_PROXY_V1; v <= HASHLB_PROXY_V2; v++)
		for (int f = 0; f < 2; f++) {
			int n = hlb_proxy_header(v, src[f], dst[f], buf);

			memcpy(buf + n, "GET /", 5); /* the client's bytes follow */
			assert_int_equal(parse(buf, n + 5, ps, pd, &need), n);
			assert_string_equal(ps, want_src[f]);
			assert_string_equal(pd, want_dst[f]);
			for (int cut = 0; cut < n; cut++) {
				need = 0;
				assert_int_equal(parse(buf, cut, ps, pd, &need), 0);
				assert_true(need > (size_t)cut && need <= (size_t)n);
			}
		}
}

static void test_parse_local(void **state)
{
	uint8_t buf[HLB_PROXY_IN_MAX];
	char ps[64], pd[64];
	size_t need;
	int n;

	assert_int_equal(parse("PROXY UNKNOWN\r\nx", 16, ps, pd, &need), 15);
	assert_string_equal(ps, "");
	assert_int_equal(parse("PROXY UNKNOWN ffff::1 ::1 1 2\r\n", 31, ps, pd, &need), 31);
	assert_string_equal(ps, "");
	n = hlb_proxy_local_header(HASHLB_PROXY_V2, buf);
	assert_int_equal(parse(buf, n, ps, pd, &need), 16);
	assert_string_equal(ps, "");
}

/* Leave the stack below the caller full of non-zero bytes. */
static void __attribute__((noinline)) dirty_stack(void)
{
	volatile uint8_t junk[8192];

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = 0xa5;
}

/*
 * A header that names no address (v1 UNKNOWN, v2 LOCAL, v2 over UNIX
 * sockets) gives AF_UNSPEC and nothing else: no stack bytes in the rest of
 * the addresses. Found by tests/fuzz/fuzz_proxyhdr (two parses of one
 * header differed).
 */
static void test_parse_unspec_zero(void **state)
{
	static const uint8_t v2_unix[16 + 216] = { 0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51,
						   0x55, 0x49, 0x54, 0x0a, 0x21, 0x31, 0x00, 216 };
	struct sockaddr_storage s, d, zero;
	uint8_t local[HLB_PROXY_HDR_MAX];
	const struct {
		const void *buf;
		size_t len;
	} hdrs[] = {
		{ "PROXY UNKNOWN\r\n", 15 },
		{ local, (size_t)hlb_proxy_local_header(HASHLB_PROXY_V2, local) },
		{ v2_unix, sizeof(v2_unix) },
	};
	size_t need;

	memset(&zero, 0, sizeof(zero));
	for (size_t i = 0; i < sizeof(hdrs) / sizeof(hdrs[0]); i++) {
		memset(&s, 0xa5, sizeof(s));
		memset(&d, 0xa5, sizeof(d));
		dirty_stack();
		assert_int_equal(hlb_proxy_parse(hdrs[i].buf, hdrs[i].len, &s, &d, &need),
				 (int)hdrs[i].len);
		assert_memory_equal(&s, &zero, sizeof(zero));
		assert_memory_equal(&d, &zero, sizeof(zero));
	}
}

/* v2 with TLVs after the addresses (as AWS NLB sends): skipped, the addresses kept. */
static void test_parse_v2_tlvs(void **state)
{
	struct sockaddr_in s = v4("198.51.100.9", 4000), d = v4("10.0.0.1", 80);
	uint8_t buf[HLB_PROXY_IN_MAX + 1];
	char ps[64], pd[64];
	size_t need;
	int n = hlb_proxy_header(HASHLB_PROXY_V2, (void *)&s, (void *)&d, buf);

	memcpy(buf + n,
	       "\x04\x00\x03"
	       "abc"
	       "\x20\x00\x01\x01",
	       10); /* NOOP and SSL TLVs */
	buf[15] = (uint8_t)(buf[15] + 10);
	assert_int_equal(parse(buf, n + 10, ps, pd, &need), n + 10);
	assert_string_equal(ps, "198.51.100.9 4000");
	assert_string_equal(pd, "10.0.0.1 80");
	/* longer than hashlb takes */
	buf[14] = (HLB_PROXY_IN_MAX - 16 + 1) >> 8;
	buf[15] = (HLB_PROXY_IN_MAX - 16 + 1) & 0xff;
	assert_int_equal(parse(buf, 16, ps, pd, &need), -EPROTO);
}

static void test_parse_malformed(void **state)
{
	static const char *const bad_v1[] = {
		"PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n", /* port out of range */
		"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n", /* leading zero */
		"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", /* a field missing */
		"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", /* one too many */
		"PROXY TCP4 1.2.3.400 5.6.7.8 1 2\r\n", /* not an address */
		"PROXY TCP4 ::1 ::1 1 2\r\n", /* the wrong family */
		"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
		"PROXY TCP4 1.2.3.4 5.6.7.8 1 -2\r\n",
		"PROXY TCP4 1.2.3.4 5.6.7.8 1 +2\r\n", /* digits only */
		"GET / HTTP/1.1\r\n", /* no header at all */
		"PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n", /* one space between fields, exactly */
		"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",
		"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n",
	};
	uint8_t v2[16 + 12], buf[200];
	char ps[64], pd[64];
	size_t need;

	for (size_t i = 0; i < sizeof(bad_v1) / sizeof(bad_v1[0]); i++)
		assert_int_equal(parse(bad_v1[i], strlen(bad_v1[i]), ps, pd, &need), -EPROTO);
	/* not quite the v2 signature */
	assert_int_equal(parse("\r\n\r\n\0\r\nQUIX\n\x21\x11\0\0", 16, ps, pd, &need), -EPROTO);
	/* no CRLF within the 107 bytes v1 allows */
	memset(buf, 'a', sizeof(buf));
	memcpy(buf, "PROXY TCP6 ", 11);
	assert_int_equal(parse(buf, 106, ps, pd, &need), 0);
	assert_int_equal(parse(buf, 107, ps, pd, &need), -EPROTO);
	/* a NUL inside a v1 line */
	assert_int_equal(parse("PROXY TCP4 1.2.3.4\0 5.6.7.8 1 2\r\n", 33, ps, pd, &need), -EPROTO);
	/* v2: version 1, command 2, TCP4 with a short body */
	struct sockaddr_in s = v4("1.2.3.4", 1), d = v4("5.6.7.8", 2);

	assert_int_equal(hlb_proxy_header(HASHLB_PROXY_V2, (void *)&s, (void *)&d, v2), 28);
	v2[12] = 0x11;
	assert_int_equal(parse(v2, 28, ps, pd, &need), -EPROTO);
	v2[12] = 0x22;
	assert_int_equal(parse(v2, 28, ps, pd, &need), -EPROTO);
	v2[12] = 0x21;
	v2[15] = 8;
	assert_int_equal(parse(v2, 24, ps, pd, &need), -EPROTO);
}

/*
 * A header refused after its first address was read leaves the caller's
 * addresses as they were (ret_* are written only on success): found by
 * tests/fuzz/fuzz_proxyhdr.
 */
static void test_parse_refused_untouched(void **state)
{
	static const char bad_dst_port[] = "PROXY TCP6 2001:db8::7 ::1 1 05535\r\n";
	struct sockaddr_storage s, d, fill;
	struct sockaddr_in a = v4("1.2.3.4", 1), b = v4("5.6.7.8", 2);
	uint8_t v2[HLB_PROXY_HDR_MAX];
	size_t need = 0;

	memset(&fill, 0xa5, sizeof(fill));
	s = d = fill;
	assert_int_equal(
		hlb_proxy_parse((const uint8_t *)bad_dst_port, strlen(bad_dst_port), &s, &d, &need),
		-EPROTO);
	assert_memory_equal(&s, &fill, sizeof(fill));
	assert_memory_equal(&d, &fill, sizeof(fill));
	/* v2, TCP over IPv4 with a body too short for its addresses */
	assert_int_equal(hlb_proxy_header(HASHLB_PROXY_V2, (void *)&a, (void *)&b, v2), 28);
	v2[15] = 8;
	assert_int_equal(hlb_proxy_parse(v2, 24, &s, &d, &need), -EPROTO);
	assert_memory_equal(&s, &fill, sizeof(fill));
	assert_memory_equal(&d, &fill, sizeof(fill));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v1),
		cmocka_unit_test(test_v1_longest),
		cmocka_unit_test(test_v2),
		cmocka_unit_test(test_v4_mapped),
		cmocka_unit_test(test_mixed_mapped),
		cmocka_unit_test(test_local),
		cmocka_unit_test(test_parse_round_trip),
		cmocka_unit_test(test_parse_local),
		cmocka_unit_test(test_parse_unspec_zero),
		cmocka_unit_test(test_parse_v2_tlvs),
		cmocka_unit_test(test_parse_malformed),
		cmocka_unit_test(test_parse_refused_untouched),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
