// SPDX-License-Identifier: MIT
/*
 * What a stop's drain look costs the control thread, N services sharing one
 * program (a table each, a VIP each) draining at once: each service's own
 * scan of the conntrack table (hashlb_steer_flows_open() through its handle,
 * as every look did before) against one scan for all of them
 * (hashlb_steer_flows_open_tables(), as a look does now), interleaved rounds
 * in one run, medians and their ratio, and the figures of the two ways checked
 * equal. Measured twice: with ENTRIES new flows made (spread over the VIPs,
 * by BPF_PROG_TEST_RUN), most of the table empty; then with the table full
 * (new flows until 3 times its capacity have been made), as it is once a
 * busy balancer has seen as many flows as it holds: every way in use is
 * looked up among the VIPs, so the full table is the scan's worst case.
 *
 *   ninja -C build bench/hashlb-bench-steer-drain-look &&
 *   build/bench/hashlb-bench-steer-drain-look 8 16000000
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tests/steer/helpers.h"
#include "args.h"

static const char usage[] =
	"usage: hashlb-bench-steer-drain-look [SERVICES [FLOWS [ENTRIES [ROUNDS]]]]\n"
	"  SERVICES  services sharing the program, a table each (default 8, at most 64)\n"
	"  FLOWS     its steering_flows (default 16000000)\n"
	"  ENTRIES   new flows made first, spread over the VIPs (default 200000);\n"
	"            then the table is filled and measured again\n"
	"  ROUNDS    rounds of each way, interleaved (default 7)\n";

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * <per_vip> new flows to each of the <n> VIPs (ports 80..), by the program of
 * <fd> loaded with bench_new_flows (each repeat a flow never seen).
 */
static void flows_make(int fd, uint32_t n, uint64_t per_vip)
{
	for (uint32_t i = 0; i < n; i++) {
		struct test_pkt p = { .dport = (uint16_t)(80 + i),
				      .sport = 1024,
				      .tcp_flags = 0x02 };
		uint8_t buf[256], out[512];
		uint64_t left = per_vip;
		size_t len;

		test_v4(p.dst, 0x0a00000a);
		test_v4(p.src, 0xc0a80001);
		len = test_build(&p, buf);
		while (left) {
			uint32_t r = left > 100000000 ? 100000000 : (uint32_t)left;

			LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = buf,
				    .data_size_in = (uint32_t)len, .data_out = out,
				    .data_size_out = sizeof(out), .repeat = r);
			if (bpf_prog_test_run_opts(fd, &o) < 0) {
				perror("BPF_PROG_TEST_RUN");
				exit(1);
			}
			left -= r;
		}
	}
}

/*
 * <rounds> interleaved rounds of a look of the <n> services of <h>, each its
 * own scan against one scan for all, printed as a line that says what the
 * table holds (<what>). Returns 0, or 1 if the two ways' figures differ.
 */
static int look(struct hashlb_steer **h, uint32_t n, uint32_t rounds, double **ms, const char *what)
{
	struct hashlb_steer_flows each[HASHLB_STEER_TABLES_MAX], one[HASHLB_STEER_TABLES_MAX];
	uint64_t max = hashlb_steer_flows_max(h[0]);
	uint32_t made = 0;

	for (uint32_t r = 0; r < rounds; r++) {
		double t0 = now_ms();

		for (uint32_t i = 0; i < n; i++)
			if (hashlb_steer_flows_open(h[i], &each[i]) < 0)
				return 1;
		ms[0][r] = now_ms() - t0;
		t0 = now_ms();
		if (hashlb_steer_flows_open_tables(h[0], one) < 0)
			return 1;
		ms[1][r] = now_ms() - t0;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (memcmp(&each[i], &one[hashlb_steer_table(h[i])], sizeof(each[i]))) {
			fprintf(stderr, "service %u: %u open alone, %u in the one scan\n", i,
				each[i].open, one[hashlb_steer_table(h[i])].open);
			return 1;
		}
		made += each[i].open;
	}
	qsort(ms[0], rounds, sizeof(double), cmp_double);
	qsort(ms[1], rounds, sizeof(double), cmp_double);
	printf("%u services sharing a program of %llu conntrack entries, %s (%u in use, %.1f%%), "
	       "a drain's look: a scan each %.2f ms (rounds %.2f-%.2f), one scan for all %.2f ms "
	       "(%.2f-%.2f): %.2fx (medians of %u)\n",
	       n, (unsigned long long)max, what, made, 100.0 * made / (double)max,
	       ms[0][rounds / 2], ms[0][0], ms[0][rounds - 1], ms[1][rounds / 2], ms[1][0],
	       ms[1][rounds - 1], ms[0][rounds / 2] / ms[1][rounds / 2], rounds);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "b1", "b2", "b3" };
	uint32_t n = 8, flows = 16000000, entries = 200000, rounds = 7;
	struct hashlb_steer *h[HASHLB_STEER_TABLES_MAX];
	struct hashlb_error err = { 0 };
	struct hashlb_table *t;
	char vips[HASHLB_STEER_TABLES_MAX][32];
	const char *vip[1];
	double *ms[2];
	int fd, ret;

	bench_args(argc, argv, 4, usage);
	if (argc > 1)
		n = bench_args_u32(argv[0], argv[1], HASHLB_STEER_TABLES_MAX, usage);
	if (argc > 2)
		flows = bench_args_u32(argv[0], argv[2], HASHLB_STEER_FLOWS_MAX, usage);
	if (argc > 3)
		entries = bench_args_u32(argv[0], argv[3], 100000000, usage);
	if (argc > 4)
		rounds = bench_args_u32(argv[0], argv[4], 1000, usage);
	if (n < 2)
		bench_args_refuse(argv[0], argv[1], usage);
	ms[0] = calloc(rounds, sizeof(double));
	ms[1] = calloc(rounds, sizeof(double));
	t = test_table(HASHLB_SCHEME_MAGLEV, 7, names, 3, NULL);
	{
		/* every packet a new flow: the table filled by repeats */
		struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY,
					       .tables = n,
					       .flows = flows,
					       .bench_new_flows = true };

		h[0] = test_steer_load_opts(&o, t);
	}
	for (uint32_t i = 1; i < n; i++)
		if (hashlb_steer_share(h[0], i, &h[i], &err) < 0) {
			fprintf(stderr, "share: %s\n", err.msg);
			return 1;
		}
	for (uint32_t i = 0; i < n; i++) {
		snprintf(vips[i], sizeof(vips[i]), "10.0.0.10:%u", 80 + i);
		vip[0] = vips[i];
		test_set_vips(h[i], vip, 1);
		test_publish(h[i], t, HASHLB_KEY_4TUPLE, NULL);
	}
	fd = hashlb_steer_prog_fd(h[0], HASHLB_STEER_PROG_XDP);
	flows_make(fd, n, (entries + n - 1) / n);
	ret = look(h, n, rounds, ms, "mostly empty");
	/* full: 3 x its capacity in new flows leaves few ways empty (a set of 6
	 * gets 18 flows on average) */
	if (ret == 0) {
		flows_make(fd, n, 3 * hashlb_steer_flows_max(h[0]) / n);
		ret = look(h, n, rounds, ms, "full");
	}
	printf("reproduce: build/bench/hashlb-bench-steer-drain-look %u %u %u %u\n", n, flows,
	       entries, rounds);
	for (uint32_t i = n; i-- > 0;)
		hashlb_steer_free(h[i]);
	hashlb_table_free(t);
	free(ms[0]);
	free(ms[1]);
	return ret;
}
