// SPDX-License-Identifier: MIT
/*
 * Kernel steering cost per packet, measured by the kernel itself
 * (BPF_PROG_TEST_RUN's duration) beside a trivial XDP_PASS program run in
 * the same process on the same packets:
 *
 *   established: one flow's packet repeated (a conntrack hit each time);
 *   established, 4 tables: the same in a program of 4 tables (hashlb run's
 *                services sharing an interface), which also counts the
 *                packet in its table's own counters (hlb_tstats);
 *   established, far VIP: the same, to a VIP stored HLB_STEER_VIP_PROBES - 1
 *                slots past its home slot, behind 7 VIPs of the same home
 *                (the most the VIP table allows): the VIP match's worst case;
 *   no VIP, 8 keys at its home: a packet to a port of that address that is
 *                no VIP, whose home slot is the one of those 8 VIPs: passed,
 *                at once if its bit is absent from the home's (8 bits, those
 *                of the 7 keys past it set), else after the conntrack lookup
 *                and the probe;
 *   new flow:    the program loaded with bench_new_flows, which XORs a
 *                counter into the source address so that every repeat is a
 *                flow never seen (conntrack miss, VIP lookup, table hash and
 *                lookup, conntrack insert), for Maglev and ring; the table is
 *                filled first, so every insert measured evicts the least
 *                recently seen way of its set.
 *
 * RUNS repeats of each path in all, in ROUNDS interleaved rounds: the
 * figure is the median round, so that a burst of load from elsewhere on a
 * shared machine (which lands in one round of one path) does not decide it.
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
#include "args.h"

/* Rounds of each path, interleaved; the figure is their median. */
#define ROUNDS 5

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

static void line(const char *what, double ns, double ref, double target, double lo, double hi)
{
	printf("  %-34s %7.1f ns (%.0f-%.0f)  %5.2fx the reference  (+%.1f ns)  target <= %.0f ns: "
	       "%s\n",
	       what, ns, lo, hi, ns / ref, ns - ref, target, ns <= target ? "met" : "NOT met");
}

/*
 * <vips> (ADDR:PORT strings, buffers of 24) set to 10.0.0.10:80 behind
 * HLB_STEER_VIP_PROBES - 1 other ports of that address with the same home
 * slot, so that the loader, placing keys in order, puts port 80 the farthest
 * from its home a key may be. The address's port-0 marker must not land in
 * that window. Returns how many VIPs; <ret_other> (if not NULL) two ports of
 * the same home that are none of them: [0] one whose bit in the home's absent
 * the keys past it leave clear (passed at once), [1] one whose bit one of
 * them has (looked up in conntrack and probed for, then passed).
 */
static uint32_t far_vips(char (*vips)[24], uint16_t ret_other[2])
{
	uint8_t addr[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 10 };
	uint64_t a0, a1;
	uint32_t home, marker, n = 0, present;
	uint16_t other[2] = { 0, 0 };

	memcpy(&a0, addr, 8);
	memcpy(&a1, addr + 8, 8);
	home = hlb_steer_vip_hash(a0, a1, htons(80));
	marker = hlb_steer_vip_hash(a0, a1, 0);
	if ((marker - home) % HLB_STEER_VIP_SLOTS < HLB_STEER_VIP_PROBES) {
		fprintf(stderr, "far VIP: the marker lands in the window\n");
		exit(1);
	}
	/* port 80, then the keys after the first (at home) */
	present = 1u << hlb_steer_vip_bit(hlb_steer_vip_mix(a0, a1, htons(80)));
	for (uint32_t port = 81; port < 65536 && (!other[0] || !other[1]); port++) {
		uint64_t mix = hlb_steer_vip_mix(a0, a1, htons((uint16_t)port));
		uint32_t bit = 1u << hlb_steer_vip_bit(mix);

		if ((uint32_t)(mix >> 56) != home)
			continue;
		if (n < HLB_STEER_VIP_PROBES - 1) {
			present |= n ? bit : 0;
			snprintf(vips[n++], 24, "10.0.0.10:%u", port);
		} else if (!other[(present & bit) != 0]) {
			other[(present & bit) != 0] = (uint16_t)port;
		}
	}
	snprintf(vips[n++], 24, "10.0.0.10:80");
	if (ret_other)
		memcpy(ret_other, other, sizeof(other));
	return n;
}

/* A program of <tables> tables (0: 1) serving table <t> in its table 0. */
static struct hashlb_steer *load(bool new_flows, uint32_t flows, const struct hashlb_table *t,
				 bool far, uint32_t tables)
{
	static const char *const one[] = { "10.0.0.10:80" };
	char buf[HLB_STEER_VIP_PROBES][24];
	const char *vips[HLB_STEER_VIP_PROBES];
	uint32_t n = 1;
	struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY,
				       .flows = flows,
				       .tables = tables,
				       .bench_new_flows = new_flows };
	struct hashlb_error err = { 0 };
	struct hashlb_steer *s;

	if (hashlb_steer_open(&o, t, &s, &err) < 0) {
		fprintf(stderr, "loading: %s\n", err.msg);
		exit(err.reason == HASHLB_ERR_SYSTEM && geteuid() ? 77 : 1);
	}
	vips[0] = one[0];
	if (far) {
		n = far_vips(buf, NULL);
		for (uint32_t i = 0; i < n; i++)
			vips[i] = buf[i];
	}
	test_set_vips(s, vips, n);
	test_publish(s, t, HASHLB_KEY_SRC_IP, NULL);
	return s;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of <v> (<n> values, sorted in place). */
static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

enum path { P_REF, P_EST, P_EST_TABLES, P_FAR, P_NOVIP, P_NOVIP_SHARED, P_MAG, P_RING, P_MAX };

static const char usage[] =
	"usage: hashlb-bench-steer [RUNS [CONNTRACK_ENTRIES]]\n"
	"  RUNS               repeats of each path in all, 1..1000000000 (default 2000000)\n"
	"  CONNTRACK_ENTRIES  as hashlb steer --flows, 1..402653184 (default 65536)\n";

int main(int argc, char **argv)
{
	uint32_t runs = 2000000, flows = 65536;
	static const char *const what[P_MAX] = {
		[P_REF] = "reference: XDP_PASS",
		[P_EST] = "established flow (conntrack hit)",
		[P_EST_TABLES] = "established, 4 tables (own counts)",
		[P_FAR] = "established, VIP 7 slots past home",
		[P_NOVIP] = "no VIP, 8 keys at home, bit absent",
		[P_NOVIP_SHARED] = "no VIP, 8 keys at home, bit shared",
		[P_MAG] = "new flow, Maglev M=65537",
		[P_RING] = "new flow, ring 10 x 160 points",
	};
	double ns[P_MAX][ROUNDS], med[P_MAX], lo[P_MAX], hi[P_MAX];
	struct hashlb_table *mag, *ring;
	struct hashlb_steer *est, *est4, *far, *novip, *fresh_mag, *fresh_ring;
	uint8_t frame_shared[256];
	struct test_pkt p = { 0 };
	int fd[P_MAX];
	uint8_t frame[256], frame_novip[256];
	const uint8_t *frames[P_MAX];
	char buf[HLB_STEER_VIP_PROBES][24];
	uint32_t per_round;
	uint16_t other[2] = { 0, 0 };
	size_t len, lens[P_MAX];

	/* "--help" was RUNS 0, a run of one repeat a round printed as the figures */
	bench_args(argc, argv, 2, usage);
	if (argc > 1)
		runs = bench_args_u32(argv[0], argv[1], 1000000000, usage);
	if (argc > 2)
		flows = bench_args_u32(argv[0], argv[2], 402653184, usage);
	mag = test_table(HASHLB_SCHEME_MAGLEV, 1, names, 10, NULL);
	ring = test_table(HASHLB_SCHEME_RING, 1, names, 10, NULL);
	est = load(false, flows, mag, false, 0);
	est4 = load(false, flows, mag, false, 4);
	far = load(false, flows, mag, true, 0);
	novip = load(false, flows, mag, true, 0);
	fresh_mag = load(true, flows, mag, false, 0);
	fresh_ring = load(true, flows, ring, false, 0);

	test_v4(p.src, 0xc0000201);
	test_v4(p.dst, 0x0a00000a);
	p.sport = 40000;
	p.dport = 80;
	p.tcp_flags = 0x10;
	p.payload_len = 64;
	len = test_build(&p, frame);
	far_vips(buf, other);
	for (int k = 0; k < P_MAX; k++) {
		frames[k] = frame;
		lens[k] = len;
	}
	p.dport = other[0];
	lens[P_NOVIP] = test_build(&p, frame_novip);
	frames[P_NOVIP] = frame_novip;
	p.dport = other[1];
	lens[P_NOVIP_SHARED] = test_build(&p, frame_shared);
	frames[P_NOVIP_SHARED] = frame_shared;
	fd[P_REF] = hashlb_steer_prog_fd(est, HASHLB_STEER_PROG_PASS);
	fd[P_EST] = hashlb_steer_prog_fd(est, HASHLB_STEER_PROG_XDP);
	fd[P_EST_TABLES] = hashlb_steer_prog_fd(est4, HASHLB_STEER_PROG_XDP);
	fd[P_FAR] = hashlb_steer_prog_fd(far, HASHLB_STEER_PROG_XDP);
	fd[P_NOVIP] = hashlb_steer_prog_fd(novip, HASHLB_STEER_PROG_XDP);
	fd[P_NOVIP_SHARED] = fd[P_NOVIP];
	fd[P_MAG] = hashlb_steer_prog_fd(fresh_mag, HASHLB_STEER_PROG_XDP);
	fd[P_RING] = hashlb_steer_prog_fd(fresh_ring, HASHLB_STEER_PROG_XDP);

	ns_repeat(fd[P_EST], frame, len, 1); /* the flow's first packet */
	ns_repeat(fd[P_EST_TABLES], frame, len, 1);
	ns_repeat(fd[P_FAR], frame, len, 1);
	/* Fill the conntrack tables first (twice their size in new flows):
	 * every insert measured then evicts, as a busy balancer's do. */
	ns_repeat(fd[P_MAG], frame, len, 2 * ct_entries(fresh_mag));
	ns_repeat(fd[P_RING], frame, len, 2 * ct_entries(fresh_ring));
	/* Interleaved rounds: a burst of load from elsewhere on the machine
	 * lands in one round of one path, and the median drops it. */
	per_round = runs / ROUNDS ? runs / ROUNDS : 1;
	for (int r = 0; r < ROUNDS; r++)
		for (int k = 0; k < P_MAX; k++)
			ns[k][r] = ns_repeat(fd[k], frames[k], lens[k], per_round);
	for (int k = 0; k < P_MAX; k++) {
		lo[k] = hi[k] = ns[k][0];
		for (int r = 1; r < ROUNDS; r++) {
			lo[k] = ns[k][r] < lo[k] ? ns[k][r] : lo[k];
			hi[k] = ns[k][r] > hi[k] ? ns[k][r] : hi[k];
		}
		med[k] = median(ns[k], ROUNDS);
	}

	/* every repeat to the far VIP steered, none passed: it was matched */
	struct hlb_steer_stats st;

	if (hashlb_steer_stats(far, &st) < 0 || st.passed || st.packets != per_round * ROUNDS + 1) {
		fprintf(stderr, "far VIP: its packets were not steered\n");
		return 1;
	}
	/* every repeat of the program of 4 tables counted in its table 0's own */
	struct hlb_steer_stats ts[4];

	if (hashlb_steer_tables_stats(est4, ts) < 0 || ts[0].packets != per_round * ROUNDS + 1 ||
	    ts[1].packets) {
		fprintf(stderr, "4 tables: the packets not counted in their table's own\n");
		return 1;
	}
	/* and every one to the port that is no VIP passed */
	if (hashlb_steer_stats(novip, &st) < 0 || st.packets ||
	    st.passed != 2 * per_round * ROUNDS) {
		fprintf(stderr, "no VIP: its packets were not all passed\n");
		return 1;
	}
	printf("kernel steering, ns per packet measured by BPF_PROG_TEST_RUN: %d interleaved rounds\n"
	       "of repeat=%u each, median (range); 10 backends, key src-ip, 64-byte payload\n",
	       ROUNDS, per_round);
	printf("  %-34s %7.1f ns (%.0f-%.0f)\n", what[P_REF], med[P_REF], lo[P_REF], hi[P_REF]);
	line(what[P_EST], med[P_EST], med[P_REF], 50, lo[P_EST], hi[P_EST]);
	line(what[P_EST_TABLES], med[P_EST_TABLES], med[P_REF], 50, lo[P_EST_TABLES],
	     hi[P_EST_TABLES]);
	line(what[P_FAR], med[P_FAR], med[P_REF], 50, lo[P_FAR], hi[P_FAR]);
	line(what[P_NOVIP], med[P_NOVIP], med[P_REF], 50, lo[P_NOVIP], hi[P_NOVIP]);
	line(what[P_NOVIP_SHARED], med[P_NOVIP_SHARED], med[P_REF], 50, lo[P_NOVIP_SHARED],
	     hi[P_NOVIP_SHARED]);
	line(what[P_MAG], med[P_MAG], med[P_REF], 150, lo[P_MAG], hi[P_MAG]);
	line(what[P_RING], med[P_RING], med[P_REF], 150, lo[P_RING], hi[P_RING]);
	printf("  new flow = conntrack miss + VIP match + table hash and lookup + conntrack insert\n"
	       "  that evicts: every repeat is a flow never seen, %u conntrack entries (sets of %d)\n"
	       "  filled before measuring, so each insert replaces its set's least recently seen\n",
	       ct_entries(fresh_mag), HLB_STEER_CT_WAYS);
	printf("reproduce: meson test -C build --benchmark --suite bench steer-testrun -v\n"
	       "       or: build/bench/hashlb-bench-steer %u %u\n",
	       runs, flows);
	hashlb_steer_free(est);
	hashlb_steer_free(est4);
	hashlb_steer_free(far);
	hashlb_steer_free(novip);
	hashlb_steer_free(fresh_mag);
	hashlb_steer_free(fresh_ring);
	hashlb_table_free(mag);
	hashlb_table_free(ring);
	return 0;
}
