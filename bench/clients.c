// SPDX-License-Identifier: MIT
/*
 * max_connections_per_client: what its bookkeeping costs a connection, a
 * claim at routing and a release at close (src/runtime/clients.c), with
 * 100, 5,000 and 100,000 other clients holding connections, against the
 * reference every connection pays already, measured in the same run: the
 * XXH64 hash of its tuple. One thread, then two threads on the same table
 * (two workers accepting at once; this machine has two CPUs).
 *
 *   meson test -C build --benchmark --suite bench clients -v
 *   build/bench/hashlb-bench-clients
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "hashlb/tuple.h"
#include "runtime/clients.h"

#define OPS 2000000
#define ROUNDS 5

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void client_addr(uint32_t k, struct hlb_client_key *key)
{
	uint8_t *addr = key->addr;

	key->keep = 128;
	memset(addr, 0, 16);
	addr[10] = addr[11] = 0xff;
	addr[12] = 10;
	addr[13] = (uint8_t)(k >> 16);
	addr[14] = (uint8_t)(k >> 8);
	addr[15] = (uint8_t)k;
}

struct run {
	struct hlb_clients *t;
	uint32_t live, base; /* connections of clients base..base+live-1 come and go */
	double ns; /* CPU ns per claim + release, best round */
	int bad;
};

static void *churn(void *arg)
{
	struct run *r = arg;
	struct hlb_client_key addr;

	r->ns = 1e18;
	for (int round = 0; round < ROUNDS; round++) {
		uint64_t t0 = cpu_ns();

		for (uint32_t i = 0; i < OPS; i++) {
			client_addr(r->base + i % r->live, &addr);
			if (hlb_clients_claim(r->t, &addr, 1000) != 1)
				r->bad++;
			hlb_clients_release(r->t, &addr);
		}
		double ns = (double)(cpu_ns() - t0) / OPS;

		if (ns < r->ns)
			r->ns = ns;
	}
	return NULL;
}

static double hash_ns(void)
{
	struct hashlb_tuple t;
	volatile uint64_t sink = 0;
	double best = 1e18;

	memset(&t, 0, sizeof(t));
	for (int round = 0; round < ROUNDS; round++) {
		uint64_t t0 = cpu_ns();

		for (uint32_t i = 0; i < OPS; i++) {
			t.src[15] = (uint8_t)i;
			t.src[14] = (uint8_t)(i >> 8);
			sink ^= hashlb_tuple_hash(&t, HASHLB_KEY_SRC_IP_PORT, 42);
		}
		double ns = (double)(cpu_ns() - t0) / OPS;

		if (ns < best)
			best = ns;
	}
	(void)sink;
	return best;
}

int main(int argc, char **argv)
{
	static const uint32_t lives[] = { 100, 5000, 100000 };
	double ref;
	int bad = 0;

	bench_args(argc, argv, 0,
		   "usage: hashlb-bench-clients\n"
		   "  max_connections_per_client: claim and release against the tuple hash\n");
	ref = hash_ns();

	printf("max_connections_per_client bookkeeping, %d claim+release pairs x %d rounds, CPU ns "
	       "per connection (best round)\n\n",
	       OPS, ROUNDS);
	printf("reference: the tuple hash every connection pays, %.1f ns\n\n", ref);
	printf("| clients holding a connection | 1 thread | / hash | 2 threads, each | / hash |\n");
	printf("|---:|---:|---:|---:|---:|\n");
	for (size_t i = 0; i < sizeof(lives) / sizeof(lives[0]); i++) {
		uint32_t live = lives[i];
		struct run one = { 0 }, two[2] = { { 0 } };
		struct hlb_clients *t;
		pthread_t th[2];
		struct hlb_client_key addr;

		if (hlb_clients_new(2 * live + 1000, &t) < 0)
			return 1;
		/* the others: one connection each, held throughout */
		for (uint32_t k = 0; k < live; k++) {
			client_addr(1000000 + k, &addr);
			if (hlb_clients_claim(t, &addr, 1000) != 1)
				bad++;
		}
		one = (struct run){ .t = t, .live = 64, .base = 0 };
		churn(&one);
		for (int j = 0; j < 2; j++) {
			two[j] = (struct run){ .t = t, .live = 64, .base = 64 * (uint32_t)j };
			pthread_create(&th[j], NULL, churn, &two[j]);
		}
		for (int j = 0; j < 2; j++)
			pthread_join(th[j], NULL);
		bad += one.bad + two[0].bad + two[1].bad;
		printf("| %u | %.1f | %.2f | %.1f | %.2f |\n", live, one.ns, one.ns / ref,
		       (two[0].ns + two[1].ns) / 2, (two[0].ns + two[1].ns) / 2 / ref);
		hlb_clients_free(t);
	}
	if (bad)
		printf("\nFAIL: %d claims refused\n", bad);
	printf("\nReproduce: meson test -C build --benchmark --suite bench clients -v\n");
	return bad ? 1 : 0;
}
