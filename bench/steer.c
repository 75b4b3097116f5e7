// SPDX-License-Identifier: MIT
/*
 * Kernel steering cost per packet, measured by the kernel itself
 * (BPF_PROG_TEST_RUN's duration) beside a trivial XDP_PASS program run in
 * the same process on the same packets:
 *
 *   established: one flow's packet repeated (a conntrack hit each time);
 *   new flow:    the program loaded with bench_new_flows, which XORs a
 *                counter into the source address so that every repeat is a
 *                flow never seen (conntrack miss, VIP lookup, table hash and
 *                lookup, conntrack insert: once the table is full, which
 *                takes its size in repeats, every insert evicts the least
 *                recently seen way of its set), for Maglev and ring.
 *
 * One run per syscall would measure the syscall's cold caches and the
 * timer (~90 ns even for XDP_PASS on this VM), not the program.
 *
 *   meson test -C build --benchmark --suite bench steer-testrun -v
 *   build/bench/hashlb-bench-steer [RUNS [CONNTRACK_ENTRIES]]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "../tests/steer/helpers.h"

static const char *const names[] = { "a", "b", "c", "d", "e", "f", "g", "h", "i", "j" };

/* Average ns per run of <fd> over <repeat> runs of one packet. */
static double ns_repeat(int fd, const uint8_t *frame, size_t len, uint32_t repeat)
{
	uint8_t out[512];

	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame, .data_size_in = (uint32_t)len,
		    .data_out = out, .data_size_out = sizeof(out), .repeat = repeat);
	if (bpf_prog_test_run_opts(fd, &o) < 0) {
		perror("BPF_PROG_TEST_RUN");
		exit(1);
	}
	return (double)o.duration;
}

/* The conntrack entries <s> holds (buckets x ways). */
static uint32_t ct_entries(struct hashlb_steer *s)
{
	struct bpf_map_info mi;
	uint32_t len = sizeof(mi);

	memset(&mi, 0, sizeof(mi));
	if (bpf_obj_get_info_by_fd(hashlb_steer_ct_fd(s), &mi, &len) < 0)
		return 0;
	return mi.max_entries * HLB_STEER_CT_WAYS;
}

static void line(const char *what, double ns, double ref, double target)
{
	printf("  %-34s %7.1f ns  %5.2fx the reference  (+%.1f ns)  target <= %.0f ns: %s\n", what,
	       ns, ns / ref, ns - ref, target, ns <= target ? "met" : "NOT met");
}

static struct hashlb_steer *load(bool new_flows, uint32_t flows, const struct hashlb_table *t)
{
	static const char *const vips[] = { "10.0.0.10:80" };
	struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY,
				       .flows = flows,
				       .bench_new_flows = new_flows };
	struct hashlb_error err = { 0 };
	struct hashlb_steer *s;

	if (hashlb_steer_open(&o, t, &s, &err) < 0) {
		fprintf(stderr, "loading: %s\n", err.msg);
		exit(err.reason == HASHLB_ERR_SYSTEM && geteuid() ? 77 : 1);
	}
	test_set_vips(s, vips, 1);
	test_publish(s, t, HASHLB_KEY_SRC_IP, NULL);
	return s;
}

int main(int argc, char **argv)
{
	uint32_t runs = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 2000000;
	uint32_t flows = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 65536;
	struct hashlb_table *mag, *ring;
	struct hashlb_steer *est, *fresh;
	struct test_pkt p = { 0 };
	uint8_t frame[256];
	size_t len;

	mag = test_table(HASHLB_SCHEME_MAGLEV, 1, names, 10, NULL);
	ring = test_table(HASHLB_SCHEME_RING, 1, names, 10, NULL);
	est = load(false, flows, mag);
	fresh = load(true, flows, mag);

	test_v4(p.src, 0xc0000201);
	test_v4(p.dst, 0x0a00000a);
	p.sport = 40000;
	p.dport = 80;
	p.tcp_flags = 0x10;
	p.payload_len = 64;
	len = test_build(&p, frame);
	int fd = hashlb_steer_prog_fd(est, HASHLB_STEER_PROG_XDP);
	int new_fd = hashlb_steer_prog_fd(fresh, HASHLB_STEER_PROG_XDP);
	int pass_fd = hashlb_steer_prog_fd(est, HASHLB_STEER_PROG_PASS);

	ns_repeat(fd, frame, len, 1); /* the flow's first packet */
	printf("kernel steering, ns per packet measured by BPF_PROG_TEST_RUN with repeat=%u "
	       "(10 backends, key src-ip, 64-byte payload)\n",
	       runs);
	double ref = ns_repeat(pass_fd, frame, len, runs);
	double e = ns_repeat(fd, frame, len, runs);
	/* Every run a new flow: many more than the conntrack table holds, so
	 * these include eviction, as a busy balancer's new flows do. */
	double nm = ns_repeat(new_fd, frame, len, runs);

	test_publish(fresh, ring, HASHLB_KEY_SRC_IP, NULL);
	double nr = ns_repeat(new_fd, frame, len, runs);
	double ref2 = ns_repeat(pass_fd, frame, len, runs);

	printf("  %-34s %7.1f ns (%.1f ns at the end)\n", "reference: XDP_PASS", ref, ref2);
	ref = (ref + ref2) / 2;
	line("established flow (conntrack hit)", e, ref, 50);
	line("new flow, Maglev M=65537", nm, ref, 150);
	line("new flow, ring 10 x 160 points", nr, ref, 150);
	printf("  new flow = conntrack miss + VIP match + table hash and lookup + conntrack insert;\n"
	       "  %u new flows a run into %u conntrack entries (sets of %d): once their sets\n"
	       "  are full (after ~%u), every insert evicts the least recently seen entry\n",
	       runs, ct_entries(fresh), HLB_STEER_CT_WAYS, ct_entries(fresh));
	printf("reproduce: meson test -C build --benchmark --suite bench steer-testrun -v\n"
	       "       or: build/bench/hashlb-bench-steer %u %u\n",
	       runs, flows);
	hashlb_steer_free(est);
	hashlb_steer_free(fresh);
	hashlb_table_free(mag);
	hashlb_table_free(ring);
	return 0;
}
