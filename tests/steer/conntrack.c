// SPDX-License-Identifier: MIT
/*
 * Proves the kernel path's connection tracking, through BPF_PROG_TEST_RUN,
 * ring and Maglev: a flow keeps its backend across a table change that would
 * have moved it (a backend added, the list reordered), and so does a
 * path-MTU message about it; a flow whose backend
 * is marked down, or removed, is rescheduled to what the new table says;
 * a draining backend keeps its flows and gets no new ones; the flows of a
 * VIP no longer served are passed; a closed VIP (hashlb run stopping) keeps
 * its established flows and passes every SYN and flow with no entry. The process is pinned to one CPU, then
 * cross_cpu() proves that a reschedule done on one CPU holds on another
 * (the conntrack table is shared by every CPU).
 */
#include <sched.h>

#include "helpers.h"

#define FLOWS 400
#define SEED 7u

static const char *const five[] = { "alpha", "bravo", "charlie", "delta", "echo" };
/* A sixth backend, first: every index shifts, conntrack must not care. */
static const char *const six[] = { "zulu", "alpha", "bravo", "charlie", "delta", "echo" };
/* "charlie" removed. */
static const char *const four[] = { "zulu", "alpha", "bravo", "delta", "echo" };

static int fd;
static struct test_pkt flows[FLOWS];

static const char *table_says(const struct hashlb_table *t, const struct test_pkt *p)
{
	return test_table_says(t, p, HASHLB_KEY_4TUPLE, SEED);
}

/* Send one packet of <p>; the name of the backend it went to in <t>. */
static const char *send_pkt(const struct hashlb_table *t, const struct test_pkt *p)
{
	uint8_t frame[256], out[512];
	size_t len = test_build(p, frame);
	int v = test_run(fd, frame, len, out, NULL), i;

	if (v != XDP_TX_)
		return NULL;
	i = test_frame_backend(out);
	if (i < 0 || (uint32_t)i >= hashlb_table_backend_count(t))
		return NULL;
	return hashlb_table_backend_name(t, (uint32_t)i);
}

static bool same(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

/* Equal weights: the lists differ, a weight tied to the position would too. */
static struct hashlb_table *equal_weights(enum hashlb_scheme scheme, const char *const *names,
					  uint32_t n)
{
	return test_table_w(scheme, SEED, names, n, NULL, true);
}

/* <t> with every backend of <names> at weight 1 but <zero>, at 0. */
static struct hashlb_table *weight0(enum hashlb_scheme scheme, const char *const *names, uint32_t n,
				    const char *zero)
{
	struct hashlb_backend_spec spec[8] = { 0 };
	struct hashlb_table_params p;
	struct hashlb_error err = { 0 };
	struct hashlb_table *t;

	hashlb_table_params_init(&p, scheme);
	p.seed = SEED;
	for (uint32_t i = 0; i < n; i++) {
		spec[i].name = names[i];
		spec[i].weight = strcmp(names[i], zero) != 0;
	}
	CHECK(hashlb_table_build(&p, spec, n, &t, &err) == 0, "weight 0 table: %s", err.msg);
	return t;
}

/*
 * A new connection from the tuple of one that ended (its client reused the
 * source port; entries are never freed), <t> published, <out> in it taking
 * no new flow (<why>): if the tuple's entry names <out>, its SYN goes where
 * the table says and the rest of it follows; on another backend it stays (a
 * tag that matched by chance must not move a live flow). Before, every one
 * went by the old entry: a client cycling through its ports kept such a
 * backend busy for good. <first>: each flow's backend, updated.
 */
static void reuse(struct hashlb_steer *s, const struct hashlb_table *t, const char *out,
		  const char *why, const char **first, const char *sn)
{
	struct hlb_steer_stats sy0, sy1;
	uint32_t reused = 0, to_out = 0, off_table = 0, astray = 0, moved_up = 0;

	hashlb_steer_stats(s, &sy0);
	for (int i = 0; i < FLOWS; i++) {
		struct test_pkt p = flows[i];
		bool on_out = same(first[i], out);
		const char *want = on_out ? table_says(t, &p) : first[i], *got;

		p.tcp_flags = 0x02; /* SYN */
		got = send_pkt(t, &p);
		reused += on_out;
		to_out += same(got, out);
		off_table += on_out && !same(got, want);
		moved_up += !on_out && !same(got, want);
		p.tcp_flags = 0x10; /* its ACK */
		astray += !same(send_pkt(t, &p), want);
		for (int k = 0; k < 6; k++) /* a name <t>, freed after, does not hold */
			if (same(six[k], want))
				first[i] = six[k];
	}
	hashlb_steer_stats(s, &sy1);
	CHECK(reused > 0, "%s: no flow on %s: the test proves nothing", sn, out);
	CHECK(to_out == 0 && off_table == 0 && astray == 0 && moved_up == 0,
	      "%s: SYNs reusing %u tuples (%u of %s's, %s): %u to it, %u of its off the table, "
	      "%u others moved, %u ACKs after them astray",
	      sn, FLOWS, reused, out, why, to_out, off_table, moved_up, astray);
	CHECK(sy1.new_flows - sy0.new_flows == reused && sy1.ct_resched == sy0.ct_resched &&
		      sy1.ct_hits - sy0.ct_hits == 2 * FLOWS - reused,
	      "%s: %llu new flows (want %u), %llu rescheduled (want 0), %llu hits (want %u)", sn,
	      (unsigned long long)(sy1.new_flows - sy0.new_flows), reused,
	      (unsigned long long)(sy1.ct_resched - sy0.ct_resched),
	      (unsigned long long)(sy1.ct_hits - sy0.ct_hits), 2 * FLOWS - reused);
	printf("%s: %u reused tuples of the flows of %s, %s: new connections by the table\n", sn,
	       reused, out, why);
}

static void run(struct hashlb_steer *s, enum hashlb_scheme scheme)
{
	struct hashlb_table *t5 = equal_weights(scheme, five, 5);
	struct hashlb_table *t6 = equal_weights(scheme, six, 6);
	struct hashlb_table *t4 = equal_weights(scheme, four, 5);
	const char *first[FLOWS];
	uint32_t moved = 0, kept = 0, bad = 0, n_down = 0;
	struct hlb_steer_stats st0, st1;
	uint64_t rng = 99;
	const char *sn = hashlb_scheme_name(scheme);

	hashlb_steer_flows_clear(s);
	for (int i = 0; i < FLOWS; i++) {
		uint64_t r = test_rand(&rng);

		memset(&flows[i], 0, sizeof(flows[i]));
		test_v4(flows[i].src, (uint32_t)r);
		test_v4(flows[i].dst, 0x0a00000a);
		flows[i].sport = (uint16_t)(r >> 32) | 1;
		flows[i].dport = 80;
	}

	/* 1. Established under the 5-backend table. */
	test_publish(s, t5, HASHLB_KEY_4TUPLE, NULL);
	for (int i = 0; i < FLOWS; i++) {
		first[i] = send_pkt(t5, &flows[i]);
		bad += !same(first[i], table_says(t5, &flows[i]));
	}
	CHECK(bad == 0, "%s: %u new flows not on the table's backend", sn, bad);

	/* 2. A sixth backend, listed first: flows the new table would move stay. */
	hashlb_steer_stats(s, &st0);
	test_publish(s, t6, HASHLB_KEY_4TUPLE, NULL);
	bad = 0;
	for (int i = 0; i < FLOWS; i++) {
		flows[i].tcp_flags = 0x10; /* ACK */
		moved += !same(table_says(t6, &flows[i]), first[i]);
		bad += !same(send_pkt(t6, &flows[i]), first[i]);
	}
	hashlb_steer_stats(s, &st1);
	CHECK(moved > 0, "%s: the new table moves no flow: the test proves nothing", sn);
	CHECK(bad == 0,
	      "%s: %u of %u established flows changed backend when one was added "
	      "(%u would have moved)",
	      sn, bad, FLOWS, moved);
	CHECK(st1.ct_hits - st0.ct_hits == FLOWS, "%s: %llu conntrack hits, want %u", sn,
	      (unsigned long long)(st1.ct_hits - st0.ct_hits), FLOWS);
	printf("%s: backend added: %u of %u flows would have moved, all %u kept their backend\n",
	       sn, moved, FLOWS, FLOWS);

	/* A path-MTU message about each goes by its entry too (to the backend
	 * whose reply it quotes), the table's choice for the moved ones. */
	bad = 0;
	for (int i = 0; i < FLOWS; i++) {
		uint8_t frame[256], out[512];
		size_t len = test_pmtu_message(&flows[i], frame);
		int v = test_run(fd, frame, len, out, NULL), b = test_frame_backend(out);

		bad += v != XDP_TX_ || b < 0 || (uint32_t)b >= hashlb_table_backend_count(t6) ||
		       !same(hashlb_table_backend_name(t6, (uint32_t)b), first[i]);
	}
	CHECK(bad == 0, "%s: %u of %u path-MTU messages not to their flow's backend", sn, bad,
	      FLOWS);

	/* A new flow goes where the new table says. */
	{
		struct test_pkt p = flows[0];

		p.sport ^= 0x8000;
		p.tcp_flags = 0;
		CHECK(same(send_pkt(t6, &p), table_says(t6, &p)), "%s: new flow off the table", sn);
	}

	/* 3. "bravo" draining: its flows stay, it gets no new flow. */
	bool drain[6] = { false, false, true, false, false, false };
	struct hashlb_table *td;

	CHECK(hashlb_table_with_down(t6, drain, &td, NULL) == 0, "with_down");
	test_publish(s, td, HASHLB_KEY_4TUPLE, drain);
	bad = 0;
	for (int i = 0; i < FLOWS; i++)
		bad += !same(send_pkt(td, &flows[i]), first[i]);
	CHECK(bad == 0, "%s: %u flows moved while their backend drains", sn, bad);
	for (int i = 0; i < 200; i++) {
		struct test_pkt p = flows[i];

		p.sport ^= 0x4000;
		p.tcp_flags = 0;
		CHECK(!same(send_pkt(td, &p), "bravo"), "%s: new flow sent to a draining backend",
		      sn);
	}
	reuse(s, td, "bravo", "draining", first, sn);
	hashlb_table_free(td);

	/* 3b. "charlie" at weight 0: in the table, taking no new flow. */
	struct hashlb_table *tw = weight0(scheme, six, 6, "charlie");

	test_publish(s, tw, HASHLB_KEY_4TUPLE, NULL);
	reuse(s, tw, "charlie", "at weight 0", first, sn);
	hashlb_table_free(tw);

	/* 4. "alpha" down: its flows go where the table says, others stay. */
	bool down[6] = { false, true, false, false, false, false };
	struct hashlb_table *tdown;

	CHECK(hashlb_table_with_down(t6, down, &tdown, NULL) == 0, "with_down");
	hashlb_steer_stats(s, &st0);
	test_publish(s, tdown, HASHLB_KEY_4TUPLE, NULL);
	bad = 0;
	kept = 0;
	for (int i = 0; i < FLOWS; i++) {
		const char *got = send_pkt(tdown, &flows[i]);

		if (same(first[i], "alpha")) {
			n_down++;
			bad += !same(got, table_says(tdown, &flows[i])) || same(got, "alpha");
		} else {
			kept += same(got, first[i]);
		}
	}
	hashlb_steer_stats(s, &st1);
	CHECK(n_down > 0, "%s: no flow on alpha", sn);
	CHECK(bad == 0, "%s: %u flows of the down backend not rescheduled to the table's choice",
	      sn, bad);
	CHECK(kept == FLOWS - n_down, "%s: %u flows of healthy backends moved", sn,
	      FLOWS - n_down - kept);
	CHECK(st1.ct_resched - st0.ct_resched == n_down, "%s: %llu rescheduled, want %u", sn,
	      (unsigned long long)(st1.ct_resched - st0.ct_resched), n_down);
	printf("%s: backend down: %u flows rescheduled, %u kept\n", sn, n_down, kept);
	hashlb_table_free(tdown);

	/* 5. Back to all up, then "charlie" removed from the list. */
	test_publish(s, t6, HASHLB_KEY_4TUPLE, NULL);
	for (int i = 0; i < FLOWS; i++)
		first[i] = send_pkt(t6, &flows[i]);
	test_publish(s, t4, HASHLB_KEY_4TUPLE, NULL);
	bad = 0;
	for (int i = 0; i < FLOWS; i++) {
		const char *got = send_pkt(t4, &flows[i]);

		bool ok = same(first[i], "charlie") ? same(got, table_says(t4, &flows[i]))
						    : same(got, first[i]);

		if (!ok && bad++ < 3)
			fprintf(stderr, "flow %d: was %s, now %s, table says %s\n", i, first[i],
				got, table_says(t4, &flows[i]));
	}
	CHECK(bad == 0, "%s: %u flows wrong after a backend was removed", sn, bad);

	/* 5b. The VIP closed (hashlb run stopping): its established flows go on by
	 * their entries; a SYN (a reused tuple's too: a new connection) and a flow
	 * with no entry are passed to the stack, which refuses them, counted in
	 * closed_passed; served again, new flows are forwarded. */
	{
		static const char *const vip[] = { "10.0.0.10:80" };
		uint32_t on = 0, passed = 0, fresh = 0;
		struct hlb_steer_stats c0, c1;
		const char *now[FLOWS];

		for (int i = 0; i < FLOWS; i++)
			now[i] = send_pkt(t4, &flows[i]);
		hashlb_steer_stats(s, &c0);
		test_vips(s, vip, 1, true);
		for (int i = 0; i < FLOWS; i++) {
			uint8_t frame[256], out[512];
			struct test_pkt p = flows[i];

			on += same(send_pkt(t4, &p), now[i]);
			p.tcp_flags = 0x02; /* SYN */
			passed +=
				test_run(fd, frame, test_build(&p, frame), out, NULL) == XDP_PASS_;
			p.sport ^= 0x2000;
			p.tcp_flags = 0x10; /* no entry */
			passed +=
				test_run(fd, frame, test_build(&p, frame), out, NULL) == XDP_PASS_;
		}
		hashlb_steer_stats(s, &c1);
		CHECK(on == FLOWS && passed == 2 * FLOWS && c1.new_flows == c0.new_flows &&
			      c1.closed_passed - c0.closed_passed == 2 * FLOWS,
		      "%s: VIP closed: %u of %u flows on their backend, %u of %u new ones passed "
		      "(closed_passed %llu), %llu new flows",
		      sn, on, FLOWS, passed, 2 * FLOWS,
		      (unsigned long long)(c1.closed_passed - c0.closed_passed),
		      (unsigned long long)(c1.new_flows - c0.new_flows));
		test_set_vips(s, vip, 1);
		for (int i = 0; i < 50; i++) {
			struct test_pkt p = flows[i];

			p.sport ^= 0x2000;
			p.tcp_flags = 0x02;
			fresh += same(send_pkt(t4, &p), table_says(t4, &p));
		}
		CHECK(fresh == 50, "%s: VIP served again: %u of 50 new flows forwarded", sn, fresh);
		printf("%s: VIP closed: %u flows on their backend, %u SYNs and flows with no entry "
		       "passed\n",
		       sn, on, passed);
	}

	/* 6. The VIP no longer served: its established flows are passed, not
	 * forwarded (a conntrack hit is honoured only while the VIP its entry
	 * names is served). */
	static const char *const other[] = { "10.0.0.11:80" };
	static const char *const vip[] = { "10.0.0.10:80" };
	uint8_t frame[256], out[512];
	size_t len = test_build(&flows[0], frame);

	test_set_vips(s, other, 1);
	CHECK(test_run(fd, frame, len, out, NULL) == XDP_PASS_,
	      "%s: a flow of a removed VIP is still forwarded", sn);
	test_set_vips(s, vip, 1);

	hashlb_table_free(t4);
	hashlb_table_free(t5);
	hashlb_table_free(t6);
}

static bool pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) == 0;
}

/*
 * 7. Flows seen on CPU 0 under "alpha"; "alpha" down, and the flows'
 * packets arrive on CPU 1: rescheduled there. "alpha" up again, packets on
 * CPU 0: they must stay where CPU 1 rescheduled them (the conntrack entry),
 * not go back to "alpha" by anything CPU 0 remembers of them.
 */
static bool cross_cpu_not_run; /* the machine lacks a second CPU: the run ends 77 */

static void cross_cpu(struct hashlb_steer *s)
{
	struct hashlb_table *t5 = equal_weights(HASHLB_SCHEME_MAGLEV, five, 5), *tdown;
	bool down[5] = { true, false, false, false, false };
	const char *first[FLOWS], *moved_to[FLOWS];
	uint32_t bad = 0, n_alpha = 0;

	if (!pin(1) || !pin(0)) {
		printf("cross-CPU check not run: fewer than 2 CPUs usable\n");
		hashlb_table_free(t5);
		cross_cpu_not_run = true;
		return;
	}
	CHECK(hashlb_table_with_down(t5, down, &tdown, NULL) == 0, "with_down");
	hashlb_steer_flows_clear(s);
	test_publish(s, t5, HASHLB_KEY_4TUPLE, NULL);
	for (int i = 0; i < FLOWS; i++) {
		first[i] = send_pkt(t5, &flows[i]);
		for (int k = 0; k < 3; k++) /* conntrack hits */
			bad += !same(send_pkt(t5, &flows[i]), first[i]);
	}
	CHECK(bad == 0, "cross-CPU: %u packets of established flows moved", bad);

	test_publish(s, tdown, HASHLB_KEY_4TUPLE, NULL);
	pin(1);
	for (int i = 0; i < FLOWS; i++)
		moved_to[i] = send_pkt(tdown, &flows[i]);

	test_publish(s, t5, HASHLB_KEY_4TUPLE, NULL);
	pin(0);
	bad = 0;
	for (int i = 0; i < FLOWS; i++) {
		n_alpha += same(first[i], "alpha");
		bad += !same(send_pkt(t5, &flows[i]),
			     same(first[i], "alpha") ? moved_to[i] : first[i]);
	}
	CHECK(n_alpha > 0, "cross-CPU: no flow on alpha: the test proves nothing");
	CHECK(bad == 0, "cross-CPU: %u flows not where their conntrack entry says", bad);
	printf("cross-CPU: %u flows rescheduled on CPU 1 stay there on CPU 0\n", n_alpha);
	hashlb_table_free(tdown);
	hashlb_table_free(t5);
}

int main(void)
{
	static const char *const vips[] = { "10.0.0.10:80" };
	struct hashlb_steer *s = test_steer_load(NULL);

	fd = hashlb_steer_prog_fd(s, HASHLB_STEER_PROG_XDP);
	test_set_vips(s, vips, 1);
	pin(0);
	run(s, HASHLB_SCHEME_MAGLEV);
	run(s, HASHLB_SCHEME_RING);
	cross_cpu(s);
	hashlb_steer_free(s);
	/* every other check ran: a failure says so; else the one not run is not a pass */
	return test_failures ? 1 : cross_cpu_not_run ? 77 : 0;
}
