/* SPDX-License-Identifier: MIT */
/* What hashlb-bench's subcommands share: clocks, medians, client keys. */
#ifndef HASHLB_BENCH_H
#define HASHLB_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "report.h"

struct bench_opts {
	enum report_format format;
	int quick; /* a short run: fewer keys and repetitions */
	const char *command; /* the command line, printed with the results */
};

int bench_schemes(const struct bench_opts *o);
int bench_lookup(const struct bench_opts *o);
int bench_health(const struct bench_opts *o);

/*
 * Nanoseconds of CPU time of the calling thread. Timings use it rather
 * than the wall clock: the benchmark shares its cores with other work,
 * and the time it waits for a CPU is not the cost of what it measures.
 */
static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sorts <v> in place and returns its median. */
double bench_median(double *v, size_t n);

/* SplitMix64 step: deterministic pseudo-random stream. */
static inline uint64_t bench_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/*
 * <n> keys as hashlb hashes them: the src-ip hash, with <seed>, of n
 * distinct IPv4 clients 10.x.y.z (as the canonical IPv4-mapped tuple).
 * Returns a malloc'ed array, or NULL.
 */
uint64_t *bench_client_keys(size_t n, uint64_t seed);
/* The same into <k>, allocated by the caller. */
void bench_client_keys_into(uint64_t *k, size_t n, uint64_t seed);

/* Keeps the optimiser from dropping a computed value. */
static inline void bench_keep(uint64_t v)
{
	__asm__ volatile("" : : "r"(v));
}

#endif
