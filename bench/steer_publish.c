// SPDX-License-Identifier: MIT
/*
 * What a table's publication into the kernel costs, in CPU time (the
 * process's, user and system: the kernel copies each element written), for
 * what hashlb run publishes most: one backend of 1,000 down, the next one
 * down the next time (health checks), a ring of 160 points a backend
 * (160,000 points, the kernel's index 2^19 buckets) and Maglev (M 65,537);
 * then Maglev of 5,000 backends in 10,000 slots, where finding each
 * backend's slot is most of the user-space part.
 *
 *   reference: every element of the half written, as every publication
 *              did before the loader kept a copy of each half
 *              (hashlb_steer_tables_unknown() before each);
 *   kept:      only the elements that differ from what the half holds.
 *
 * The two alternate, PUBS publications each, in ROUNDS rounds; the figure is
 * the median round's ms a publication, and their ratio; then the part of it
 * spent in user space (the index, the copies compared), over all rounds.
 *
 *   meson test -C build --benchmark --suite bench steer-publication -v
 *   build/bench/hashlb-bench-steer-publish [ROUNDS]      # default 7
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "../tests/steer/helpers.h"
#include "args.h"

#define BACKENDS_MAX 5000
#define PUBS 8

static const char usage[] = "usage: hashlb-bench-steer-publish [ROUNDS]\n"
			    "  ROUNDS  rounds of each way, interleaved (default 7)\n";

/* The process's CPU time so far, in ms: user (<sys> false) or system. */
static double cpu_ms(bool sys)
{
	struct rusage ru;
	struct timeval tv;

	getrusage(RUSAGE_SELF, &ru);
	tv = sys ? ru.ru_stime : ru.ru_utime;
	return (double)tv.tv_sec * 1e3 + (double)tv.tv_usec / 1e3;
}

/* The tables with backend i down, i = 0..PUBS * 2 (kept and reference
 * alternate over the same ones). */
static struct hashlb_table **tables(enum hashlb_scheme scheme, uint32_t backends, uint32_t n)
{
	static char names[BACKENDS_MAX][16];
	static struct hashlb_backend_spec spec[BACKENDS_MAX];
	struct hashlb_table **t = calloc(n, sizeof(*t));
	struct hashlb_table_params p;
	struct hashlb_error err = { 0 };

	hashlb_table_params_init(&p, scheme);
	p.seed = 7;
	p.ring_v = 160;
	for (uint32_t k = 0; k < n; k++) {
		for (uint32_t i = 0; i < backends; i++) {
			snprintf(names[i], sizeof(names[i]), "b%u", i);
			spec[i] = (struct hashlb_backend_spec){ .name = names[i],
								.weight = 1,
								.down = i == k };
		}
		if (hashlb_table_build(&p, spec, backends, &t[k], &err) < 0) {
			fprintf(stderr, "table build: %s\n", err.msg);
			exit(1);
		}
	}
	return t;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* <backends> in a program of <slots> backend slots. */
static void run(enum hashlb_scheme scheme, uint32_t backends, uint32_t slots, uint32_t rounds)
{
	struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY,
				       .max_backends = slots,
				       .max_ring_points = 160 * backends };
	struct hashlb_steer *s = test_steer_load_opts(&o, NULL);
	uint32_t n = 2 * PUBS * rounds + 2, next = 0;
	struct hashlb_table **t = tables(scheme, backends, n);
	double *ms[2] = { calloc(rounds, sizeof(double)), calloc(rounds, sizeof(double)) };
	double user[2] = { 0, 0 }, all[2] = { 0, 0 };

	/* both halves hold a table first, as in a daemon that has published */
	test_publish(s, t[next++], HASHLB_KEY_4TUPLE, NULL);
	test_publish(s, t[next++], HASHLB_KEY_4TUPLE, NULL);
	for (uint32_t r = 0; r < rounds; r++) {
		for (int way = 0; way < 2; way++) {
			double u0 = cpu_ms(false), s0 = cpu_ms(true), u;

			for (uint32_t i = 0; i < PUBS; i++) {
				if (way == 0)
					hashlb_steer_tables_unknown(s);
				test_publish(s, t[next++], HASHLB_KEY_4TUPLE, NULL);
			}
			u = cpu_ms(false) - u0;
			ms[way][r] = (u + cpu_ms(true) - s0) / PUBS;
			user[way] += u;
			all[way] += ms[way][r] * PUBS;
		}
	}
	for (int way = 0; way < 2; way++)
		qsort(ms[way], rounds, sizeof(double), cmp_double);
	printf("%-7s %u backends (%u slots), one down: reference %7.2f ms (rounds %.2f-%.2f), "
	       "kept %7.2f ms (%.2f-%.2f): %.2fx\n",
	       hashlb_scheme_name(scheme), backends, slots, ms[0][rounds / 2], ms[0][0],
	       ms[0][rounds - 1], ms[1][rounds / 2], ms[1][0], ms[1][rounds - 1],
	       ms[1][rounds / 2] / ms[0][rounds / 2]);
	printf("%-7s user space: reference %.2f ms (%.0f%%), kept %.2f ms (%.0f%%) a "
	       "publication\n",
	       "", user[0] / (PUBS * rounds), 100 * user[0] / all[0], user[1] / (PUBS * rounds),
	       100 * user[1] / all[1]);
	for (uint32_t k = 0; k < n; k++)
		hashlb_table_free(t[k]);
	free(t);
	free(ms[0]);
	free(ms[1]);
	hashlb_steer_free(s);
}

int main(int argc, char **argv)
{
	uint32_t rounds = 7;

	bench_args(argc, argv, 1, usage);
	if (argc > 1)
		rounds = bench_args_u32(argv[0], argv[1], 1000, usage);
	printf("CPU time a publication (user + system), median of %u rounds of %u\n", rounds, PUBS);
	run(HASHLB_SCHEME_RING, 1000, 1000, rounds);
	run(HASHLB_SCHEME_MAGLEV, 1000, 1000, rounds);
	/* a daemon's default: twice the first table's backends */
	run(HASHLB_SCHEME_MAGLEV, 5000, 10000, rounds);
	return 0;
}
