// SPDX-License-Identifier: MIT
/*
 * The IPv6 neighbour table as rtnetlink's dump gives it (recv() is wrapped at
 * link time and answers what each test scripts): a dump that ends in an error
 * or stops short is an error, not a table; one the kernel marks inconsistent
 * (NLM_F_DUMP_INTR) is read again. And the IPv4 one, /proc/net/arp (fopen64()
 * wrapped: the text each test gives): a read that fails partway is an error.
 * Which backends are on an interface's subnets (getifaddrs() wrapped).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include <cmocka.h>

#include "hashlb/steer.h"

#define REPLY_MAX 8

/* What recv() answers, one reply a call: a buffer, or -errno, or 0 (end). */
struct reply {
	char buf[512] __attribute__((aligned(NLMSG_ALIGNTO)));
	int len; /* < 0: -errno */
};
static struct reply replies[REPLY_MAX];
static unsigned n_replies, next_reply, recvs;

ssize_t __wrap_recv(int fd, void *buf, size_t len, int flags);

ssize_t __wrap_recv(int fd, void *buf, size_t len, int flags)
{
	const struct reply *r;

	(void)fd;
	(void)flags;
	recvs++;
	if (next_reply == n_replies)
		return 0;
	r = &replies[next_reply++];
	if (r->len < 0) {
		errno = -r->len;
		return -1;
	}
	assert_true((size_t)r->len <= len);
	memcpy(buf, r->buf, (size_t)r->len);
	return r->len;
}

static void script_reset(void)
{
	memset(replies, 0, sizeof(replies));
	n_replies = next_reply = recvs = 0;
}

static struct reply *reply_new(void)
{
	assert_true(n_replies < REPLY_MAX);
	return &replies[n_replies++];
}

/* Append a message of <type>, <flags>, <payload> of <size> bytes to <r>. */
static void *msg_add(struct reply *r, uint16_t type, uint16_t flags, size_t size)
{
	struct nlmsghdr *h = (struct nlmsghdr *)(r->buf + r->len);

	assert_true(r->len + NLMSG_SPACE(size) <= sizeof(r->buf));
	memset(h, 0, NLMSG_SPACE(size));
	h->nlmsg_len = NLMSG_LENGTH(size);
	h->nlmsg_type = type;
	h->nlmsg_flags = flags | NLM_F_MULTI;
	h->nlmsg_seq = 1;
	r->len += (int)NLMSG_SPACE(size);
	return NLMSG_DATA(h);
}

/* A complete (REACHABLE) entry of 2001:db8::<last> with MAC 02:..:<last>. */
static void entry_add(struct reply *r, uint8_t last, uint16_t flags)
{
	size_t size = NLMSG_ALIGN(sizeof(struct ndmsg)) + RTA_SPACE(16) + RTA_SPACE(6);
	struct ndmsg *nd = msg_add(r, RTM_NEWNEIGH, flags, size);
	struct rtattr *a = (struct rtattr *)((char *)nd + NLMSG_ALIGN(sizeof(*nd)));
	uint8_t addr[16] = { 0x20, 0x01, 0x0d, 0xb8 }, mac[6] = { 2, 0, 0, 0, 0 };

	nd->ndm_family = AF_INET6;
	nd->ndm_state = NUD_REACHABLE;
	nd->ndm_ifindex = 1;
	addr[15] = mac[5] = last;
	a->rta_type = NDA_DST;
	a->rta_len = RTA_LENGTH(16);
	memcpy(RTA_DATA(a), addr, 16);
	a = (struct rtattr *)((char *)a + RTA_SPACE(16));
	a->rta_type = NDA_LLADDR;
	a->rta_len = RTA_LENGTH(6);
	memcpy(RTA_DATA(a), mac, 6);
}

static void done_add(struct reply *r, int error)
{
	*(int *)msg_add(r, NLMSG_DONE, 0, sizeof(int)) = error;
}

static void error_add(struct reply *r, int error)
{
	struct nlmsgerr *e = msg_add(r, NLMSG_ERROR, 0, sizeof(struct nlmsgerr));

	e->error = error;
}

/* The MAC of 2001:db8::<last> in a table read afresh: 0 or -errno. */
static int lookup(uint8_t last, uint8_t ret_mac[6])
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	struct hashlb_steer_neigh *n = hashlb_steer_neigh_new();
	int ret;

	assert_non_null(n);
	sin6->sin6_family = AF_INET6;
	inet_pton(AF_INET6, "2001:db8::", &sin6->sin6_addr);
	sin6->sin6_addr.s6_addr[15] = last;
	ret = hashlb_steer_neigh_mac(n, &ss, NULL, ret_mac);
	hashlb_steer_neigh_free(n);
	return ret;
}

/* The control: entries over two replies, then NLMSG_DONE 0: a table. */
static void test_complete_dump(void **state)
{
	uint8_t mac[6];
	struct reply *r;

	(void)state;
	script_reset();
	entry_add(reply_new(), 1, 0);
	r = reply_new();
	entry_add(r, 2, 0);
	done_add(r, 0);
	assert_int_equal(lookup(2, mac), 0);
	assert_int_equal(mac[5], 2);
	assert_int_equal(recvs, 2);
}

/* The kernel ends the dump with an error: the error, not the entries before it
 * (before: 2001:db8::1 found, the table taken as complete). */
static void test_dump_ends_in_error(void **state)
{
	uint8_t mac[6];
	struct reply *r;

	(void)state;
	script_reset();
	r = reply_new();
	entry_add(r, 1, 0);
	done_add(r, -EMSGSIZE);
	assert_int_equal(lookup(1, mac), -EMSGSIZE);

	script_reset();
	r = reply_new();
	entry_add(r, 1, 0);
	error_add(r, -ENOBUFS);
	assert_int_equal(lookup(1, mac), -ENOBUFS);
}

/* A dump that stops short (end of stream, or recv() fails, with no NLMSG_DONE):
 * an error (before: the end of stream was a complete table). */
static void test_dump_cut_short(void **state)
{
	uint8_t mac[6];

	(void)state;
	script_reset();
	entry_add(reply_new(), 1, 0);
	assert_int_equal(lookup(1, mac), -EIO);

	script_reset();
	entry_add(reply_new(), 1, 0);
	reply_new()->len = -ENOBUFS;
	assert_int_equal(lookup(1, mac), -ENOBUFS);
}

/* The table changed under the dump (NLM_F_DUMP_INTR): read again, and the
 * second dump's table used; one that stays inconsistent is -EAGAIN. */
static void test_dump_interrupted(void **state)
{
	uint8_t mac[6];
	struct reply *r;

	(void)state;
	script_reset();
	r = reply_new();
	entry_add(r, 1, NLM_F_DUMP_INTR);
	done_add(r, 0);
	r = reply_new();
	entry_add(r, 3, 0);
	done_add(r, 0);
	assert_int_equal(lookup(1, mac), -ENOENT); /* the first dump's entry is not kept */
	assert_int_equal(next_reply, 2);
	next_reply = 0;
	assert_int_equal(lookup(3, mac), 0);
	assert_int_equal(mac[5], 3);

	script_reset();
	for (int i = 0; i < 4; i++) {
		r = reply_new();
		entry_add(r, 1, NLM_F_DUMP_INTR);
		done_add(r, 0);
	}
	assert_int_equal(lookup(1, mac), -EAGAIN);
}

/* What /proc/net/arp reads as: <arp_text>, then a read error (EIO) if <arp_fails>. */
static const char *arp_text;
static bool arp_fails;
static size_t arp_off;

static ssize_t arp_read(void *cookie, char *buf, size_t size)
{
	size_t n = strlen(arp_text) - arp_off;

	(void)cookie;
	if (n == 0 && arp_fails) {
		errno = EIO;
		return -1;
	}
	if (n > size)
		n = size;
	memcpy(buf, arp_text + arp_off, n);
	arp_off += n;
	return (ssize_t)n;
}

FILE *__real_fopen64(const char *path, const char *mode);
FILE *__wrap_fopen64(const char *path, const char *mode);

FILE *__wrap_fopen64(const char *path, const char *mode)
{
	if (!arp_text || strcmp(path, "/proc/net/arp") != 0)
		return __real_fopen64(path, mode);
	arp_off = 0;
	return fopencookie(NULL, "r", (cookie_io_functions_t){ .read = arp_read });
}

/* The MAC of 10.0.0.<last> in a table read from <text>, failing after it if <fails>. */
static int lookup4(const char *text, bool fails, uint8_t last, uint8_t ret_mac[6])
{
	struct hashlb_steer_neigh *n = hashlb_steer_neigh_new();
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	int ret;

	assert_non_null(n);
	arp_text = text;
	arp_fails = fails;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(0x0a000000u | last);
	ret = hashlb_steer_neigh_mac(n, &ss, NULL, ret_mac);
	hashlb_steer_neigh_free(n);
	arp_text = NULL;
	return ret;
}

static const char arp_head[] =
	"IP address       HW type     Flags       HW address            Mask     Device\n"
	"10.0.0.2         0x1         0x2         02:00:00:00:00:02     *        eth0\n";

/* The control: the entries of a table read to its end. */
static void test_arp_complete(void **state)
{
	uint8_t mac[6];

	(void)state;
	assert_int_equal(lookup4(arp_head, false, 2, mac), 0);
	assert_int_equal(mac[5], 2);
	assert_int_equal(lookup4(arp_head, false, 3, mac), -ENOENT);
}

/* A read of /proc/net/arp that fails after its first lines: the error, for an
 * entry read before it as for one it cut off (before: the table ended there,
 * 10.0.0.2 found and 10.0.0.3 said to have no entry, -ENOENT). */
static void test_arp_read_fails_partway(void **state)
{
	uint8_t mac[6];

	(void)state;
	assert_int_equal(lookup4(arp_head, true, 2, mac), -EIO);
	assert_int_equal(lookup4(arp_head, true, 3, mac), -EIO);
}

/* The interface addresses getifaddrs() gives: <n_ifas> of <ifas>, linked in order. */
static struct ifaddrs ifas[4];
static struct sockaddr_in ifa_addrs[4], ifa_masks[4];
static unsigned n_ifas;

int __wrap_getifaddrs(struct ifaddrs **ret);
void __wrap_freeifaddrs(struct ifaddrs *ifa);

int __wrap_getifaddrs(struct ifaddrs **ret)
{
	for (unsigned i = 0; i < n_ifas; i++)
		ifas[i].ifa_next = i + 1 < n_ifas ? &ifas[i + 1] : NULL;
	*ret = n_ifas ? &ifas[0] : NULL;
	return 0;
}

void __wrap_freeifaddrs(struct ifaddrs *ifa)
{
	(void)ifa;
}

/* An IPv4 address <addr>/<bits> of interface (or label) <name>, after those given. */
static void ifa_add(const char *name, const char *addr, unsigned bits)
{
	unsigned i = n_ifas++;

	ifa_addrs[i] = (struct sockaddr_in){ .sin_family = AF_INET };
	ifa_masks[i] = (struct sockaddr_in){ .sin_family = AF_INET };
	assert_int_equal(inet_pton(AF_INET, addr, &ifa_addrs[i].sin_addr), 1);
	ifa_masks[i].sin_addr.s_addr = htonl(bits ? ~0u << (32 - bits) : 0);
	ifas[i] = (struct ifaddrs){ .ifa_name = (char *)name,
				    .ifa_addr = (struct sockaddr *)&ifa_addrs[i],
				    .ifa_netmask = (struct sockaddr *)&ifa_masks[i] };
}

static int on_subnet(const char *addr, const char *dev)
{
	struct sockaddr_storage ss = { .ss_family = AF_INET };

	assert_int_equal(inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr), 1);
	return hashlb_steer_on_subnet(&ss, dev);
}

/* An IPv4 address with a label ("ip addr add 10.2.0.1/24 dev eth0 label eth0:1") is given
 * under the label: a backend on its subnet is on eth0's (it was said to be on none of
 * eth0's subnets); an interface whose name merely begins so (eth01) is not eth0. */
static void test_subnet_of_a_labelled_address(void **state)
{
	(void)state;
	n_ifas = 0;
	ifa_add("eth0", "10.1.0.1", 24);
	ifa_add("eth0:1", "10.2.0.1", 24);
	ifa_add("eth01", "10.3.0.1", 24);
	ifa_add("eth1:0", "10.4.0.1", 24);
	assert_int_equal(on_subnet("10.1.0.7", "eth0"), 1);
	assert_int_equal(on_subnet("10.2.0.7", "eth0"), 1);
	assert_int_equal(on_subnet("10.3.0.7", "eth0"), 0);
	assert_int_equal(on_subnet("10.4.0.7", "eth0"), 0);
	assert_int_equal(on_subnet("10.4.0.7", "eth1"), 1);
	assert_int_equal(on_subnet("10.9.0.7", "eth0"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_complete_dump),
		cmocka_unit_test(test_dump_ends_in_error),
		cmocka_unit_test(test_dump_cut_short),
		cmocka_unit_test(test_dump_interrupted),
		cmocka_unit_test(test_arp_complete),
		cmocka_unit_test(test_arp_read_fails_partway),
		cmocka_unit_test(test_subnet_of_a_labelled_address),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
