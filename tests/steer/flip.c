// SPDX-License-Identifier: MIT
/*
 * Proves that a table update is never seen half-written: while one thread
 * publishes two tables of the same scheme in turn (5 backends under one
 * seed, 7 under another: the same arrays, rewritten), another sends new
 * flows through the XDP program; every packet must go to the backend that
 * one of the two tables names for it, never to a mix of both, never dropped.
 * For Maglev, then for the ring.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "helpers.h"

/* Per scheme: far beyond what a working build needs (~1 s), both within meson's 120 s. */
#define FLIP_DEADLINE_S 40

static const char *const names_a[] = { "a1", "a2", "a3", "a4", "a5" };
static const char *const names_b[] = { "b1", "b2", "b3", "b4", "b5", "b6", "b7" };

static struct hashlb_steer *steer;
static struct hashlb_table *ta, *tb;
static atomic_bool stop;
static atomic_uint flips;

static void *flipper(void *arg)
{
	while (!atomic_load(&stop)) {
		test_publish(steer, atomic_load(&flips) & 1 ? ta : tb, HASHLB_KEY_4TUPLE, NULL);
		atomic_fetch_add(&flips, 1);
	}
	return NULL;
}

static uint32_t want(const struct hashlb_table *t, const struct test_pkt *p, uint64_t seed)
{
	struct hashlb_tuple tu;

	test_tuple(p, &tu);
	return hashlb_table_lookup(t, hashlb_tuple_hash(&tu, HASHLB_KEY_4TUPLE, seed));
}

static void run(enum hashlb_scheme scheme)
{
	uint64_t rng = 5 + scheme, packets = 0, in_a = 0, in_b = 0;
	struct timespec t0, now;
	pthread_t th;
	int fd;

	ta = test_table(scheme, 11, names_a, 5, NULL);
	tb = test_table(scheme, 22, names_b, 7, NULL);
	fd = hashlb_steer_prog_fd(steer, HASHLB_STEER_PROG_XDP);
	test_publish(steer, ta, HASHLB_KEY_4TUPLE, NULL);
	/* New flows only: a conntrack hit would answer for an older table. */
	hashlb_steer_flows_clear(steer);
	atomic_store(&stop, false);
	atomic_store(&flips, 0);
	pthread_create(&th, NULL, flipper, NULL);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 1000; i++, packets++) {
			struct test_pkt p;
			uint8_t frame[256], out[512];
			int v, got;

			test_pkt_random(&p, &rng);
			v = test_run(fd, frame, test_build(&p, frame), out, NULL);
			got = test_frame_backend(out);
			/* Backend i has MAC i in either table. */
			bool a = v == XDP_TX_ && (uint32_t)got == want(ta, &p, 11);
			bool b = v == XDP_TX_ && (uint32_t)got == want(tb, &p, 22);

			in_a += a;
			in_b += b && !a;
			CHECK(a || b, "%s packet %llu: verdict %d backend %d, tables say %u or %u",
			      hashlb_scheme_name(scheme), (unsigned long long)packets, v, got,
			      want(ta, &p, 11), want(tb, &p, 22));
			if (test_failures > 5)
				goto out;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		/*
		 * Until at least 10 flips, a second, and packets steered by
		 * each table: however slow the flipper on a loaded machine.
		 * FLIP_DEADLINE_S only stops a build whose publish hangs.
		 */
	} while (now.tv_sec - t0.tv_sec < FLIP_DEADLINE_S &&
		 (atomic_load(&flips) < 10 || now.tv_sec - t0.tv_sec < 1 || !in_a || !in_b));
out:
	atomic_store(&stop, true);
	pthread_join(th, NULL);
	printf("%s: %llu new flows during %u table flips: %llu by the first table, %llu by the "
	       "second, %d on neither\n",
	       hashlb_scheme_name(scheme), (unsigned long long)packets, atomic_load(&flips),
	       (unsigned long long)in_a, (unsigned long long)in_b, test_failures);
	CHECK(atomic_load(&flips) >= 2, "only %u flips: the test proves little",
	      atomic_load(&flips));
	CHECK(in_a > 0 && in_b > 0, "packets saw only one table");
	hashlb_table_free(ta);
	hashlb_table_free(tb);
}

int main(void)
{
	static const char *const vips[] = { "10.0.0.10:80" };

	steer = test_steer_load(NULL);
	test_set_vips(steer, vips, 1);
	run(HASHLB_SCHEME_MAGLEV);
	run(HASHLB_SCHEME_RING);
	hashlb_steer_free(steer);
	return test_failures ? 1 : 0;
}
