/* Proves the PROXY protocol headers hashlb sends backends are byte for byte what the specification (proxy-protocol.txt, HAProxy 2.6) defines, for IPv4, IPv6 and IPv4-mapped clients and for health checks (LOCAL), and that what cannot be expressed is refused. */
// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v1),    cmocka_unit_test(test_v1_longest),
		cmocka_unit_test(test_v2),    cmocka_unit_test(test_v4_mapped),
		cmocka_unit_test(test_local), cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
