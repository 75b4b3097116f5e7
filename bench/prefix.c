// SPDX-License-Identifier: MIT
/*
 * accept_proxy_from at accept: the cost of deciding whether a connection's
 * source may send a PROXY header, with the compiled prefix set (sorted,
 * merged ranges, a binary search) against the reference, a scan of the
 * list as written (what hashlb did before), measured in the same run, for
 * lists of 16, 256 and 4,096 prefixes (the most a service may list). Each
 * lookup's answer is checked against the scan's.
 *
 *   meson test -C build --benchmark --suite bench prefix -v
 *   build/bench/hashlb-bench-prefix
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "hashlb/config.h"

#define LOOKUPS 200000
#define ROUNDS 5

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The reference: whether the first <len> bits of <a> and <b> agree. */
static bool covers(const struct hashlb_prefix *p, int family, const uint8_t *a)
{
	unsigned full = p->len / 8, rest = p->len % 8;

	if (p->family != family || memcmp(p->addr, a, full) != 0)
		return false;
	return !rest || ((p->addr[full] ^ a[full]) & (0xffu << (8 - rest))) == 0;
}

static bool scan(const struct hashlb_prefix *p, uint32_t n, const struct sockaddr_storage *ss)
{
	const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;

	for (uint32_t i = 0; i < n; i++)
		if (ss->ss_family == AF_INET
			    ? covers(&p[i], AF_INET, (const uint8_t *)&in->sin_addr)
			    : covers(&p[i], AF_INET6, in6->sin6_addr.s6_addr))
			return true;
	return false;
}

/* <n> prefixes: /16../32 in 10/8 and /48../64 in 2001:db8::/32, half each. */
static void make_prefixes(struct hashlb_prefix *p, uint32_t n, unsigned *seed)
{
	for (uint32_t i = 0; i < n; i++) {
		memset(&p[i], 0, sizeof(p[i]));
		if (i % 2) {
			uint32_t a = 0x0a000000u | ((uint32_t)rand_r(seed) & 0xffffffu);

			p[i].family = AF_INET;
			p[i].len = (uint8_t)(16 + rand_r(seed) % 17);
			a &= p[i].len == 32 ? ~0u : ~(~0u >> p[i].len);
			a = htonl(a);
			memcpy(p[i].addr, &a, 4);
		} else {
			p[i].family = AF_INET6;
			p[i].len = (uint8_t)(48 + rand_r(seed) % 17);
			p[i].addr[0] = 0x20;
			p[i].addr[1] = 0x01;
			p[i].addr[2] = 0x0d;
			p[i].addr[3] = 0xb8;
			for (unsigned b = 4; b < 8; b++)
				p[i].addr[b] = (uint8_t)rand_r(seed);
			for (unsigned bit = p[i].len; bit < 128; bit++)
				p[i].addr[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));
		}
	}
}

/* Sources: from the prefixes' own ranges or random in the same networks. */
static void make_sources(struct sockaddr_storage *ss, const struct hashlb_prefix *p, uint32_t n,
			 unsigned *seed)
{
	for (uint32_t i = 0; i < LOOKUPS; i++) {
		const struct hashlb_prefix *q = &p[(uint32_t)rand_r(seed) % n];

		memset(&ss[i], 0, sizeof(ss[i]));
		if (q->family == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)&ss[i];
			uint32_t a = 0x0a000000u | ((uint32_t)rand_r(seed) & 0xffffffu);

			in->sin_family = AF_INET;
			if (rand_r(seed) % 2) {
				memcpy(&a, q->addr, 4);
				a = ntohl(a) |
				    (q->len == 32 ? 0 : (uint32_t)rand_r(seed) & (~0u >> q->len));
			}
			in->sin_addr.s_addr = htonl(a);
		} else {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss[i];

			in6->sin6_family = AF_INET6;
			memcpy(in6->sin6_addr.s6_addr, q->addr, 16);
			for (unsigned b = rand_r(seed) % 2 ? 4 : 8; b < 16; b++)
				in6->sin6_addr.s6_addr[b] = (uint8_t)rand_r(seed);
		}
	}
}

int main(int argc, char **argv)
{
	static const uint32_t sizes[] = { 16, 256, 4096 };
	struct sockaddr_storage *ss;
	struct hashlb_prefix *p;
	unsigned seed = 1;
	int bad = 0;

	bench_args(argc, argv, 0,
		   "usage: hashlb-bench-prefix\n"
		   "  accept_proxy_from: the compiled prefix set against a scan of the list\n");
	ss = calloc(LOOKUPS, sizeof(*ss));
	p = calloc(4096, sizeof(*p));
	if (!ss || !p)
		return 1;
	printf("accept_proxy_from lookups, %d sources x %d rounds, CPU ns per lookup (best round)\n\n",
	       LOOKUPS, ROUNDS);
	printf("| prefixes | scan of the list (reference) | compiled set | set / scan | sources listed |\n");
	printf("|---:|---:|---:|---:|---:|\n");
	for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
		uint32_t n = sizes[t], hits = 0;
		struct hashlb_prefix_set *set;
		double best_scan = 1e18, best_set = 1e18;
		volatile bool sink = false;

		make_prefixes(p, n, &seed);
		make_sources(ss, p, n, &seed);
		if (hashlb_prefix_set_new(p, n, &set) < 0)
			return 1;
		for (uint32_t i = 0; i < LOOKUPS; i++) {
			bool want = scan(p, n, &ss[i]);

			hits += want;
			if (hashlb_prefix_set_match(set, (const struct sockaddr *)&ss[i]) != want)
				bad++;
		}
		for (int r = 0; r < ROUNDS; r++) {
			uint64_t t0 = cpu_ns();

			for (uint32_t i = 0; i < LOOKUPS; i++)
				sink ^= scan(p, n, &ss[i]);
			uint64_t t1 = cpu_ns();

			for (uint32_t i = 0; i < LOOKUPS; i++)
				sink ^= hashlb_prefix_set_match(set,
								(const struct sockaddr *)&ss[i]);
			uint64_t t2 = cpu_ns();

			if ((double)(t1 - t0) < best_scan)
				best_scan = (double)(t1 - t0);
			if ((double)(t2 - t1) < best_set)
				best_set = (double)(t2 - t1);
		}
		printf("| %u | %.1f | %.1f | %.3f | %.0f %% |\n", n, best_scan / LOOKUPS,
		       best_set / LOOKUPS, best_set / best_scan, 100.0 * hits / LOOKUPS);
		hashlb_prefix_set_free(set);
	}
	if (bad)
		printf("\nFAIL: %d lookups disagree with the scan\n", bad);
	printf("\nReproduce: meson test -C build --benchmark --suite bench prefix -v\n");
	free(ss);
	free(p);
	return bad ? 1 : 0;
}
