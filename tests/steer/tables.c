// SPDX-License-Identifier: MIT
/*
 * Several tables in one program, as hashlb run steers several services on
 * one interface: each service's VIPs (IPv4 and IPv6) go to the backends of
 * its own table; publishing one table, or removing one service's VIPs,
 * leaves the other's new flows on its table and its established flows on
 * their backends, and when the two swap their VIPs (a reload swapping two
 * services' listen) a VIP's old flows, their tuples reused, go by the table
 * of its new service, not to the old one's backends by their entries
 * (swapped()); a VIP another table has is refused; while one table
 * flips between two in a thread, the other's new flows never see it, and its
 * own each go where one of the two says; a table published through a handle
 * that has no VIP list (a takeover) keeps its VIPs served, and one whose idea
 * of its half is stale never writes the half in force; and an older
 * hashlb, of one table, refuses such a program (older_refuses()). Through
 * BPF_PROG_TEST_RUN, Maglev for one table, the ring for the other. A program
 * of one table replaced by one of three keeps its flows (grown()), and is
 * attached in the place of the old one, at the XDP hook or tc, by the handle
 * that loaded it or one that found it (replaced_at()); one put aside by hand
 * is not replaced, and nothing changes (replace_refused()). Each table counts
 * its own new flows, hits, drops and the rest, adding up to the program's
 * (counted()), and a grown program's table 0 goes on from the old one's, its
 * name too.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include "helpers.h"

#define SEED_A 11
#define SEED_B 22
/* Table B's backend i is at test_backend_mac(B_MAC + i): a frame says whose. */
#define B_MAC 100
#define FLOWS 200
/* The flip phase: far beyond what a working build needs (~1 s). */
#define FLIP_DEADLINE_S 40

static const char *const names_a[] = { "a1", "a2", "a3", "a4" };
static const char *const names_b[] = { "b1", "b2", "b3" };
static const char *const vips_a[] = { "10.0.0.10:80", "[fd00::10]:80" };
/* one address shared with A's, another port: its marker is both tables' */
static const char *const vips_b[] = { "10.0.0.20:443", "10.0.0.10:8080" };

static int fd;

/* Publish <t> into <s>, backend i at test_backend_mac(<mac0> + i), the first keeping its
 * flows with <keep> (out of the table, draining: its flows go there by their entries), the
 * slots of the <n_held> backends <held> it drops kept (hashlb_steer_set_table_holding()). */
static void publish_holding(struct hashlb_steer *s, const struct hashlb_table *t, uint32_t mac0,
			    bool keep, const char *const *held, uint32_t n_held)
{
	uint32_t n = hashlb_table_backend_count(t);
	struct hashlb_steer_dest d[8];
	struct hashlb_error err = { 0 };

	memset(d, 0, sizeof(d));
	for (uint32_t i = 0; i < n; i++) {
		test_backend_mac(mac0 + i, d[i].mac);
		memcpy(d[i].src_mac, test_lb_mac, 6);
	}
	d[0].keep_flows = keep;
	if (hashlb_steer_set_table_holding(s, t, HASHLB_KEY_4TUPLE, NULL, d, held, n_held, &err) <
	    0) {
		fprintf(stderr, "set_table: %s\n", err.msg);
		exit(1);
	}
}

static void publish_with(struct hashlb_steer *s, const struct hashlb_table *t, uint32_t mac0,
			 bool keep)
{
	publish_holding(s, t, mac0, keep, NULL, 0);
}

static void publish(struct hashlb_steer *s, const struct hashlb_table *t, uint32_t mac0)
{
	publish_with(s, t, mac0, false);
}

/* Flow <i> of VIP <v> of <vips> (<n>): a client of its own, v6 if the VIP is. */
static void flow(struct test_pkt *p, const char *const *vips, uint32_t v, uint32_t i)
{
	const char *colon = strrchr(vips[v], ':');
	char host[64];

	memset(p, 0, sizeof(*p));
	p->dport = (uint16_t)atoi(colon + 1);
	p->sport = (uint16_t)(1024 + i);
	if (vips[v][0] == '[') {
		memcpy(host, vips[v] + 1, (size_t)(colon - vips[v] - 2));
		host[colon - vips[v] - 2] = 0;
		p->v6 = true;
		inet_pton(AF_INET6, host, p->dst);
		inet_pton(AF_INET6, "fd00:1::", p->src);
		p->src[14] = (uint8_t)(i >> 8);
		p->src[15] = (uint8_t)i;
	} else {
		memcpy(host, vips[v], (size_t)(colon - vips[v]));
		host[colon - vips[v]] = 0;
		test_v4(p->dst, ntohl(inet_addr(host)));
		test_v4(p->src, 0xc0a80000u + i);
	}
}

/* The MAC index <p> (flags <flags>) was sent to, -1 if not forwarded (-2 passed). */
static int send_pkt(struct test_pkt *p, uint8_t flags)
{
	uint8_t frame[256], out[512];
	int v;

	p->tcp_flags = flags;
	v = test_run(fd, frame, test_build(p, frame), out, NULL);
	if (v == XDP_PASS_)
		return -2;
	return v == XDP_TX_ ? test_frame_backend(out) : -1;
}

/* The MAC index <t> names for <p>: its backend's, plus <mac0>. */
static int says(const struct hashlb_table *t, const struct test_pkt *p, uint64_t seed,
		uint32_t mac0)
{
	struct hashlb_tuple tu;

	test_tuple(p, &tu);
	return (int)(mac0 +
		     hashlb_table_lookup(t, hashlb_tuple_hash(&tu, HASHLB_KEY_4TUPLE, seed)));
}

/* Of FLOWS new flows (SYNs, from <first> on) to each VIP of <vips>, how many
 * do not go where <t> says. */
static uint32_t off_table(const char *const *vips, uint32_t n, uint32_t first,
			  const struct hashlb_table *t, uint64_t seed, uint32_t mac0)
{
	uint32_t wrong = 0;

	for (uint32_t v = 0; v < n; v++) {
		for (uint32_t i = first; i < first + FLOWS; i++) {
			struct test_pkt p;

			flow(&p, vips, v, i);
			wrong += send_pkt(&p, 0x02) != says(t, &p, seed, mac0);
		}
	}
	return wrong;
}

/* Each of FLOWS flows (from <first> on) to <vips>'s VIPs, an ACK, goes where
 * <held> says it went; <what> names them in the failures. */
static void still_held(const char *const *vips, uint32_t first, const int *held, const char *what)
{
	for (uint32_t i = 0; i < FLOWS; i++) {
		struct test_pkt p;
		int now;

		flow(&p, vips, i % 2, first + i);
		now = send_pkt(&p, 0x10);
		CHECK(now == held[i], "%s %u: on %d, now %d", what, i, held[i], now);
	}
}

struct flipper {
	struct hashlb_steer *s;
	const struct hashlb_table *t[2];
	uint32_t mac0[2];
	atomic_bool stop;
	atomic_uint flips;
};

static void *flipper(void *arg)
{
	struct flipper *f = arg;

	while (!atomic_load(&f->stop)) {
		uint32_t k = atomic_load(&f->flips) & 1;

		publish(f->s, f->t[k], f->mac0[k]);
		atomic_fetch_add(&f->flips, 1);
	}
	return NULL;
}

/*
 * While <sb>'s table flips between <tb> and <tb3> (b1 dropped, another seed),
 * new flows to A's VIPs each go where <ta> says, to B's where one of B's two
 * says. Ends with <tb> published.
 */
static void flip_b(struct hashlb_steer *sb, const struct hashlb_table *ta,
		   const struct hashlb_table *tb, const struct hashlb_table *tb3)
{
	struct flipper f = { .s = sb, .t = { tb3, tb }, .mac0 = { B_MAC + 1, B_MAC } };
	uint64_t packets = 0, by[2] = { 0, 0 };
	struct timespec t0, now;
	pthread_t th;

	atomic_init(&f.stop, false);
	atomic_init(&f.flips, 0);
	pthread_create(&th, NULL, flipper, &f);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (uint32_t i = 0; i < 500 && test_failures <= 5; i++, packets++) {
			uint32_t n = 20000 + (uint32_t)packets;
			struct test_pkt p;
			int got, b3, b;

			flow(&p, vips_a, n % 2, n);
			got = send_pkt(&p, 0x02);
			CHECK(got == says(ta, &p, SEED_A, 0), "A's flow %u during B's flips: to %d",
			      n, got);
			flow(&p, vips_b, n % 2, n);
			got = send_pkt(&p, 0x02);
			b3 = says(tb3, &p, 33, B_MAC + 1);
			b = says(tb, &p, SEED_B, B_MAC);
			by[0] += got == b3;
			by[1] += got == b && got != b3;
			CHECK(got == b3 || got == b,
			      "B's flow %u during its flips: to %d, its tables say %d or %d", n,
			      got, b, b3);
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		/* at least 10 flips, a second, and both of B's tables seen, however
		 * slow the machine; the deadline only stops a publish that hangs */
	} while (test_failures <= 5 && now.tv_sec - t0.tv_sec < FLIP_DEADLINE_S &&
		 (atomic_load(&f.flips) < 10 || now.tv_sec - t0.tv_sec < 1 || !by[0] || !by[1]));
	atomic_store(&f.stop, true);
	pthread_join(th, NULL);
	CHECK(atomic_load(&f.flips) >= 2 && by[0] && by[1],
	      "B's flips: %u, new flows by each of its tables %llu, %llu: the test proves little",
	      atomic_load(&f.flips), (unsigned long long)by[0], (unsigned long long)by[1]);
	printf("B's table flipped %u times: %llu new flows of each service, A's all by its table\n",
	       atomic_load(&f.flips), (unsigned long long)packets);
	publish(sb, tb, B_MAC);
	/* Its flows, more than the conntrack table holds and all seen within a
	 * tick or two, would leave the flows held below evicted by each other's
	 * inserts, at random: those checks are about tables, not sizing. */
	hashlb_steer_flows_clear(sb);
}

static bool abort_yes(void *arg)
{
	(void)arg;
	return true;
}

/*
 * A's table published through another handle of it, with no VIP list of
 * its own (a hashlb that took the program over, a service sharing a table
 * that served): A's VIPs stay in the program, each new flow by the new table
 * (before, the flip took them out until that handle set them: their
 * established flows passed to the stack, reset). Then the first handle, its
 * idea of A's half stale, writes a table and is stopped before the flip:
 * the one in force stays (before, it wrote over the half in force). Ends
 * with <ta> published through <sa>.
 */
static void taken_over(struct hashlb_steer *sa, const struct hashlb_table *ta,
		       const struct hashlb_table *ta2)
{
	struct hashlb_steer_dest d[8];
	struct hashlb_error err = { 0 };
	struct hashlb_steer *o;
	uint32_t wrong;

	if (hashlb_steer_share(sa, 0, &o, &err) < 0) {
		fprintf(stderr, "share: %s\n", err.msg);
		exit(1);
	}
	publish(o, ta2, 0);
	wrong = off_table(vips_a, 2, 6000, ta2, SEED_A, 0);
	CHECK(wrong == 0,
	      "A's new flows after a publication by a handle without its VIPs: "
	      "%u of %u not where its table says",
	      wrong, 2 * FLOWS);
	memset(d, 0, sizeof(d));
	for (uint32_t i = 0; i < 4; i++) {
		test_backend_mac(i, d[i].mac);
		memcpy(d[i].src_mac, test_lb_mac, 6);
	}
	hashlb_steer_set_abort(sa, abort_yes, NULL);
	CHECK(hashlb_steer_set_table(sa, ta, HASHLB_KEY_4TUPLE, NULL, d, &err) == -ECANCELED,
	      "a publication stopped before its flip: %s", err.msg);
	hashlb_steer_set_abort(sa, NULL, NULL);
	wrong = off_table(vips_a, 2, 7000, ta2, SEED_A, 0);
	CHECK(wrong == 0,
	      "A's new flows after a stopped publication: %u of %u not by the "
	      "table in force",
	      wrong, 2 * FLOWS);
	hashlb_steer_free(o);
	publish(sa, ta, 0);
	wrong = off_table(vips_a, 2, 8000, ta, SEED_A, 0);
	CHECK(wrong == 0, "A's new flows, its first handle's again: %u of %u off", wrong,
	      2 * FLOWS);
	/* their entries, by ta2, would hold flip_b()'s flows whose numbers wrap
	 * onto theirs (a v6 client's 16 bits) */
	hashlb_steer_flows_clear(sa);
}

/*
 * A program of two tables has no map named hlb_buckets (its is
 * hlb_buckets_n), which every hashlb of before several tables requires: that
 * one refuses it as another version's program, where it read it as one table
 * of twice the capacity and wrote over the other's. A program of one table
 * keeps the name: an older hashlb can still take it over.
 */
static void older_refuses(int prog_fd, const struct hashlb_table *t)
{
	struct hashlb_steer *one = test_steer_load(t);
	int one_fd = hashlb_steer_prog_fd(one, HASHLB_STEER_PROG_XDP);
	int old = test_map_of(prog_fd, "hlb_buckets"),
	    renamed = test_map_of(prog_fd, "hlb_buckets_n");
	int kept = test_map_of(one_fd, "hlb_buckets"),
	    one_renamed = test_map_of(one_fd, "hlb_buckets_n");

	CHECK(old < 0 && renamed >= 0,
	      "two tables: map hlb_buckets %s, hlb_buckets_n %s (an older hashlb would take it)",
	      old < 0 ? "absent" : "present", renamed < 0 ? "absent" : "present");
	CHECK(kept >= 0 && one_renamed < 0,
	      "one table: map hlb_buckets %s, hlb_buckets_n %s (an older hashlb could not take it)",
	      kept < 0 ? "absent" : "present", one_renamed < 0 ? "absent" : "present");
	for (int i = 0; i < 4; i++) {
		int m = (int[]){ old, renamed, kept, one_renamed }[i];

		if (m >= 0)
			close(m);
	}
	hashlb_steer_free(one);
}

/* Publish A's <t>, its first backend out and draining (keeping its flows) into <s>: its
 * flows go there by their conntrack entries alone. */
static void publish_drain(struct hashlb_steer *s, const struct hashlb_table *t)
{
	struct hashlb_steer_dest d[4];
	struct hashlb_error err = { 0 };

	memset(d, 0, sizeof(d));
	for (uint32_t i = 0; i < 4; i++) {
		test_backend_mac(i, d[i].mac);
		memcpy(d[i].src_mac, test_lb_mac, 6);
	}
	d[0].keep_flows = true;
	if (hashlb_steer_set_table(s, t, HASHLB_KEY_4TUPLE, NULL, d, &err) < 0) {
		fprintf(stderr, "set_table: %s\n", err.msg);
		exit(1);
	}
}

/*
 * A program of one table replaced by one of three (hashlb_steer_grow(): a
 * reload adds a second service on the interface). A's flows established
 * before go on to their backends by their conntrack entries, a1's too,
 * draining (out of A's table, keeping its flows: only its entry sends them
 * there); A's new flows go by its table, copied, and by the next one it
 * publishes; B, in table 1 of the new program, steers its VIPs by its own
 * table. A program of several tables is not replaced.
 */
static void grown(const struct hashlb_table *ta, const struct hashlb_table *tb)
{
	static const bool down[] = { true, false, false, false };
	struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY,
				       .tables = 3,
				       .max_backends = 300 };
	struct hashlb_table *ta_drain = test_table(HASHLB_SCHEME_MAGLEV, SEED_A, names_a, 4, down);
	struct hashlb_error err = { 0 };
	struct hashlb_steer *sa = test_steer_load(ta), *sb;
	struct hlb_steer_stats st, t[3];
	char name[HLB_STEER_TNAME_MAX + 1];
	int held[FLOWS], saved = fd, on_a1 = 0, m;
	uint32_t wrong;

	fd = hashlb_steer_prog_fd(sa, HASHLB_STEER_PROG_XDP);
	test_set_vips(sa, vips_a, 2);
	publish(sa, ta, 0);
	for (uint32_t i = 0; i < FLOWS; i++) {
		struct test_pkt p;

		flow(&p, vips_a, i % 2, 9000 + i);
		held[i] = send_pkt(&p, 0x02);
		on_a1 += held[i] == 0;
	}
	publish_drain(sa, ta_drain);

	CHECK(hashlb_steer_stats(sa, &st) == 0, "grown: no counters");
	CHECK(hashlb_steer_set_name(sa, "web") == 0, "grown: table not named");
	if (hashlb_steer_grow(sa, &o, &err) < 0) {
		fprintf(stderr, "grow: %s\n", err.msg);
		exit(1);
	}
	fd = hashlb_steer_prog_fd(sa, HASHLB_STEER_PROG_XDP);
	CHECK(hashlb_steer_tables(sa) == 3, "grown: %u tables", hashlb_steer_tables(sa));
	/* table 0's own go on from the program of one table's, every one of them */
	CHECK(hashlb_steer_tables_stats(sa, t) == 0 && t[0].packets == st.packets &&
		      t[0].new_flows == st.new_flows && st.new_flows == FLOWS &&
		      t[0].ct_hits == st.ct_hits && t[0].ct_closing == st.ct_closing &&
		      t[1].new_flows == 0,
	      "grown: table 0's packets %llu new flows %llu, the program of one table's %llu %llu",
	      (unsigned long long)t[0].packets, (unsigned long long)t[0].new_flows,
	      (unsigned long long)st.packets, (unsigned long long)st.new_flows);
	/* and its name (hashlb steer --stats names the table without the config) */
	CHECK(hashlb_steer_table_name(sa, 0, name, sizeof(name)) == 0 && !strcmp(name, "web") &&
		      hashlb_steer_table_name(sa, 1, name, sizeof(name)) == 0 && !name[0],
	      "grown: table 0 not named as before the swap, or table 1 named: '%s'", name);
	m = test_map_of(fd, "hlb_buckets_n");
	CHECK(m >= 0, "grown: no map hlb_buckets_n: an older hashlb would take it");
	if (m >= 0)
		close(m);
	CHECK(on_a1 > 0, "grown: none of %u flows on a1: the test proves little", FLOWS);
	still_held(vips_a, 9000, held, "grown: A's flow");
	wrong = off_table(vips_a, 2, 11000, ta_drain, SEED_A, 0);
	CHECK(wrong == 0, "grown: A's new flows: %u of %u not by its table", wrong, 2 * FLOWS);

	if (hashlb_steer_share(sa, 1, &sb, &err) < 0) {
		fprintf(stderr, "share: %s\n", err.msg);
		exit(1);
	}
	publish(sb, tb, B_MAC);
	test_set_vips(sb, vips_b, 2);
	wrong = off_table(vips_b, 2, 12000, tb, SEED_B, B_MAC);
	CHECK(wrong == 0, "grown: B's new flows: %u of %u not by its table", wrong, 2 * FLOWS);
	publish(sa, ta, 0);
	wrong = off_table(vips_a, 2, 13000, ta, SEED_A, 0);
	CHECK(wrong == 0, "grown: A's new flows, a1 back: %u of %u not by its table", wrong,
	      2 * FLOWS);
	CHECK(hashlb_steer_grow(sa, &o, &err) == -EOPNOTSUPP, "grown: a program of 3 tables grown");
	printf("grown: one table to 3: A's %u flows kept (%d on a1, draining), new flows of A and B "
	       "by their tables\n",
	       FLOWS, on_a1);
	hashlb_steer_free(sb);
	hashlb_steer_free(sa);
	hashlb_table_free(ta_drain);
	fd = saved;
}

/* Whether a ring of <n> backends of weight 1 (names_a's), <v> points each, fits <s>'s program. */
static bool fits(struct hashlb_steer *s, uint32_t n, uint32_t v)
{
	static const uint32_t w[] = { 1, 1, 1, 1 };
	static const bool backup[] = { false, false, false, false };
	struct hashlb_table_params p = { .scheme = HASHLB_SCHEME_RING, .ring_v = v };
	struct hashlb_error err = { 0 };

	return hashlb_steer_table_fits(s, &p, names_a, w, backup, n, &err) == 0;
}

/* Table 1 of <sa>'s program shared (returned), A's VIPs and <ta> published into table 0, <tb>
 * and B's VIPs into table 1. */
static struct hashlb_steer *shared_published(struct hashlb_steer *sa, const struct hashlb_table *ta,
					     const struct hashlb_table *tb)
{
	struct hashlb_error err = { 0 };
	struct hashlb_steer *sb;

	if (hashlb_steer_share(sa, 1, &sb, &err) < 0) {
		fprintf(stderr, "share: %s\n", err.msg);
		exit(1);
	}
	test_set_vips(sa, vips_a, 2);
	publish(sa, ta, 0);
	publish(sb, tb, B_MAC);
	test_set_vips(sb, vips_b, 2);
	return sb;
}

/*
 * A program of two tables whose ring points B's next table outgrows replaced
 * by one of larger sizes (hashlb_steer_grow(): a reload, a resolve_every or a
 * weight set that a restart loaded before): A's and B's flows established
 * before go on to their backends (a1's, draining, by their conntrack entries
 * alone), both tables copied, B's handle moved to the
 * new program (hashlb_steer_rebind()) publishes the larger table, A's new
 * flows by its own.
 */
static void resized(const struct hashlb_table *ta, const struct hashlb_table *tb)
{
	struct hashlb_table_view v;
	uint32_t per = (hashlb_table_view(tb, &v), v.n_points / 3);
	struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY,
				       .tables = 2,
				       .max_backends = 4,
				       .max_ring_points = 3 * per };
	struct hashlb_steer_opts larger = { .mode = HASHLB_STEER_LOAD_ONLY,
					    .tables = 2,
					    .max_ring_points = 8 * per };
	static const bool down[] = { true, false, false, false };
	struct hashlb_table *tb4 = test_table(HASHLB_SCHEME_RING, SEED_B, names_a, 4, NULL);
	struct hashlb_table *ta_drain = test_table(HASHLB_SCHEME_MAGLEV, SEED_A, names_a, 4, down);
	struct hashlb_error err = { 0 };
	struct hashlb_steer *sa = test_steer_load_opts(&o, ta), *sb;
	int held_a[FLOWS], held_b[FLOWS], saved = fd, ret, on_a1 = 0;
	uint32_t wrong;

	fd = hashlb_steer_prog_fd(sa, HASHLB_STEER_PROG_XDP);
	sb = shared_published(sa, ta, tb);
	for (uint32_t i = 0; i < FLOWS; i++) {
		struct test_pkt p;

		flow(&p, vips_a, i % 2, 14000 + i);
		held_a[i] = send_pkt(&p, 0x02);
		flow(&p, vips_b, i % 2, 14000 + i);
		held_b[i] = send_pkt(&p, 0x02);
		on_a1 += held_a[i] == 0;
	}
	publish_drain(sa, ta_drain);
	CHECK(on_a1 > 0, "resized: none of %u flows on a1: the test proves little", FLOWS);
	CHECK(fits(sb, 3, per) && !fits(sb, 4, per), "resized: B's ring of 4 fits %u ring points",
	      3 * per);

	ret = hashlb_steer_grow(sa, &o, &err);
	CHECK(ret == -EOPNOTSUPP, "resized: grown to its own sizes: %d %s", ret, err.msg);

	if (hashlb_steer_grow(sa, &larger, &err) < 0 || hashlb_steer_rebind(sb, sa, &err) < 0) {
		fprintf(stderr, "grow: %s\n", err.msg);
		exit(1);
	}
	fd = hashlb_steer_prog_fd(sa, HASHLB_STEER_PROG_XDP);
	CHECK(hashlb_steer_tables(sb) == 2 && fits(sb, 4, per),
	      "resized: B's ring of 4 does not fit");
	still_held(vips_a, 14000, held_a, "resized: A's flow");
	still_held(vips_b, 14000, held_b, "resized: B's flow");
	wrong = off_table(vips_b, 2, 15000, tb, SEED_B, B_MAC);
	CHECK(wrong == 0, "resized: B's new flows by its table copied: %u of %u off", wrong,
	      2 * FLOWS);
	publish(sb, tb4, B_MAC);
	wrong = off_table(vips_b, 2, 16000, tb4, SEED_B, B_MAC);
	CHECK(wrong == 0, "resized: B's new flows by its larger table: %u of %u off", wrong,
	      2 * FLOWS);
	wrong = off_table(vips_a, 2, 16000, ta_drain, SEED_A, 0);
	CHECK(wrong == 0, "resized: A's new flows: %u of %u off", wrong, 2 * FLOWS);
	still_held(vips_a, 14000, held_a, "resized: A's flow after B's larger table");
	publish(sa, ta, 0);
	wrong = off_table(vips_a, 2, 17000, ta, SEED_A, 0);
	CHECK(wrong == 0, "resized: A's new flows, published again: %u of %u off", wrong,
	      2 * FLOWS);
	printf("resized: 2 tables of %u ring points to %u: A's and B's %u flows kept (%d on a1, "
	       "draining), B's ring of 4 published, new flows of A and B by their tables\n",
	       3 * per, 8 * per, FLOWS, on_a1);
	hashlb_steer_free(sb);
	hashlb_steer_free(sa);
	hashlb_table_free(tb4);
	hashlb_table_free(ta_drain);
	fd = saved;
}

/* publish_with() of <t>, its first backend keeping its flows. */
static void publish_keep(struct hashlb_steer *s, const struct hashlb_table *t, uint32_t mac0)
{
	publish_with(s, t, mac0, true);
}

/* Flows <first>.. (FLOWS, SYNs) to <vips>, where they went into <held>; how many went to a
 * backend of MAC index <from> or more. */
static uint32_t establish(const char *const *vips, uint32_t first, int *held, int from)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < FLOWS; i++) {
		struct test_pkt p;

		flow(&p, vips, i % 2, first + i);
		held[i] = send_pkt(&p, 0x02);
		n += held[i] >= from;
	}
	return n;
}

/* The program's rescheduled flows so far (ct_resched): a flow whose entry names a slot that
 * no longer holds its backend. */
static uint64_t resched(struct hashlb_steer *s)
{
	struct hlb_steer_stats st;

	if (hashlb_steer_stats(s, &st) < 0) {
		fprintf(stderr, "no counters\n");
		exit(1);
	}
	return st.ct_resched;
}

/*
 * In <sa>'s program grown from 2 tables of 4 backends to 8 (widened()), A's slot 4 (a5's, at
 * index 8, the appended region's first; laid out as t * 8 + i it is B's b1's index 4) changes
 * hands (a5 replaced by a9) as its incarnation wraps (255 to 1: fast-forwarded, as steer-ct's
 * incarnation_wrap does, not 255 publications): the scan that clears the entries of that half
 * of the range (ct_clear_incarnations()) clears index 8's, none of B's, whose <held_b> flows
 * (b1's kept by their entries alone, b1 draining, incarnation 1) stay on their backends. How
 * many were on b1.
 */
static uint32_t widened_wrap(struct hashlb_steer *sa, const int *held_b)
{
	static const char *const names_a9[] = { "a1", "a2", "a3", "a4", "a9", "a6", "a7", "a8" };
	static const bool down[] = { true, false, false, false, false, false, false, false };
	struct hashlb_table *ta9 = test_table(HASHLB_SCHEME_MAGLEV, SEED_A, names_a9, 8, down);
	int bslots = test_map_of(fd, "hlb_bslots_r");
	struct hlb_steer_backend be = { 0 };
	uint32_t at = 0, on_b1 = 0;

	for (uint32_t i = 0; i < FLOWS; i++)
		on_b1 += held_b[i] == B_MAC;
	CHECK(on_b1 > 0, "widened: none of B's flows on b1: the wrap proves little");
	for (; bslots >= 0 && bpf_map_lookup_elem(bslots, &at, &be) == 0; at++)
		if (be.id == hashlb_steer_backend_id("a5"))
			break;
	CHECK(at == 8, "widened: a5's slot at index %u, not 8 (the appended region's first)", at);
	be.incarnation = 255;
	CHECK(bslots >= 0 && bpf_map_update_elem(bslots, &at, &be, BPF_ANY) == 0,
	      "widened: a5's incarnation not fast-forwarded");
	publish_keep(sa, ta9, 0);
	CHECK(bpf_map_lookup_elem(bslots, &at, &be) == 0 &&
		      be.id == hashlb_steer_backend_id("a9") && be.incarnation == 1,
	      "widened: index 8 holds not a9 at incarnation 1 (%u)", be.incarnation);
	still_held(vips_b, 30000, held_b, "widened: B's flow across A's slot 4 wrapping");
	if (bslots >= 0)
		close(bslots);
	hashlb_table_free(ta9);
	return on_b1;
}

/*
 * A program of two tables of 4 backends each grown to 8 a table (hashlb_steer_grow(): a reload
 * or a weight set whose table outgrows them). A's and B's flows established before go on to
 * their backends, a1's and b1's (out of their tables, draining) by their conntrack entries
 * alone, none rescheduled; the grown program's hlb_bslots is laid out in regions (named
 * hlb_bslots_r, which a hashlb that knows no regions refuses). A's table of 8 and B's of 6
 * published: new flows by their tables, some to the new backends, whose flows stay there
 * when the other table is published again, as every flow of before. With <found>, B's tables
 * are published through a handle that found the program (a takeover), which reads the regions
 * from the program's read-only data: laid out otherwise, B's new slots would be A's. Before,
 * growing the backends of a program of several tables was refused (a conntrack entry names
 * table t's slot at t * backends_cap, which a growth moved), until a restart.
 */
static void widened(bool found)
{
	static const char *const names_a8[] = { "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8" };
	static const char *const names_b6[] = { "b1", "b2", "b3", "b4", "b5", "b6" };
	static const bool down[] = { true, false, false, false, false, false, false, false };
	const char *how = found ? "widened (found)" : "widened";
	struct hashlb_steer_opts o = { .mode = found ? HASHLB_STEER_XDP_GENERIC
						     : HASHLB_STEER_LOAD_ONLY,
				       .iface = found ? "hlbgrow0" : NULL,
				       .tables = 2,
				       .max_backends = 4 };
	struct hashlb_steer_opts wider = { .tables = 2, .max_backends = 8 };
	struct hashlb_table_params p = { .scheme = HASHLB_SCHEME_MAGLEV };
	static const uint32_t w8[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
	struct hashlb_table *ta = test_table(HASHLB_SCHEME_MAGLEV, SEED_A, names_a, 4, NULL);
	struct hashlb_table *tb = test_table(HASHLB_SCHEME_RING, SEED_B, names_b, 3, NULL);
	struct hashlb_table *ta_d = test_table(HASHLB_SCHEME_MAGLEV, SEED_A, names_a, 4, down);
	struct hashlb_table *tb_d = test_table(HASHLB_SCHEME_RING, SEED_B, names_b, 3, down);
	struct hashlb_table *ta8 = test_table(HASHLB_SCHEME_MAGLEV, SEED_A, names_a8, 8, down);
	struct hashlb_table *tb6 = test_table(HASHLB_SCHEME_RING, SEED_B, names_b6, 6, down);
	struct hashlb_error err = { 0 };
	struct hashlb_steer *sa = test_steer_load_opts(&o, ta), *sb, *pb;
	int held_a[FLOWS], held_b[FLOWS], held_a8[FLOWS], held_b6[FLOWS], saved = fd, on_1 = 0;
	int before = hashlb_steer_prog_fd(sa, HASHLB_STEER_PROG_XDP), plain, regions;
	uint32_t wrong, new_a, new_b;
	uint64_t r0;

	fd = before;
	sb = shared_published(sa, ta, tb);
	establish(vips_a, 30000, held_a, 99);
	establish(vips_b, 30000, held_b, 999);
	for (uint32_t i = 0; i < FLOWS; i++)
		on_1 += (held_a[i] == 0) + (held_b[i] == B_MAC);
	publish_keep(sa, ta_d, 0);
	publish_keep(sb, tb_d, B_MAC);
	CHECK(on_1 > 0, "%s: none of the flows on a1 or b1: the test proves little", how);
	CHECK(hashlb_steer_table_fits(sa, &p, names_a8, w8, NULL, 8, &err) == -E2BIG,
	      "%s: 8 backends fit a program of 4 a table", how);

	r0 = resched(sa);
	if (hashlb_steer_grow(sa, &wider, &err) < 0 || hashlb_steer_rebind(sb, sa, &err) < 0) {
		fprintf(stderr, "%s: grow: %s\n", how, err.msg);
		exit(1);
	}
	fd = hashlb_steer_prog_fd(sa, HASHLB_STEER_PROG_XDP);
	CHECK(fd != before, "%s: the program not replaced", how);
	plain = test_map_of(fd, "hlb_bslots");
	regions = test_map_of(fd, "hlb_bslots_r");
	CHECK(plain < 0 && regions >= 0,
	      "%s: map hlb_bslots %s, hlb_bslots_r %s (a hashlb that knows no regions would "
	      "take it)",
	      how, plain < 0 ? "absent" : "present", regions < 0 ? "absent" : "present");
	if (plain >= 0)
		close(plain);
	if (regions >= 0)
		close(regions);
	CHECK(hashlb_steer_table_fits(sa, &p, names_a8, w8, NULL, 8, &err) == 0,
	      "%s: 8 backends do not fit the program grown: %s", how, err.msg);
	still_held(vips_a, 30000, held_a, "widened: A's flow across the growth");
	still_held(vips_b, 30000, held_b, "widened: B's flow across the growth");

	pb = sb;
	if (found) {
		if (hashlb_steer_find("hlbgrow0", HASHLB_STEER_XDP_GENERIC, &pb, &err) < 0 ||
		    hashlb_steer_use_table(pb, 1) < 0) {
			fprintf(stderr, "%s: find: %s\n", how, err.msg);
			exit(1);
		}
	}
	publish_keep(sa, ta8, 0);
	new_a = establish(vips_a, 31000, held_a8, 4);
	publish_keep(pb, tb6, B_MAC);
	new_b = establish(vips_b, 31000, held_b6, B_MAC + 3);
	CHECK(new_a > 0 && new_b > 0, "%s: new flows on the new backends: A %u, B %u of %u", how,
	      new_a, new_b, FLOWS);
	publish_keep(sa, ta8, 0);
	publish_keep(pb, tb6, B_MAC);
	still_held(vips_a, 30000, held_a, "widened: A's flow of before, 8 backends");
	still_held(vips_b, 30000, held_b, "widened: B's flow of before, 6 backends");
	still_held(vips_a, 31000, held_a8, "widened: A's flow to 8 backends");
	still_held(vips_b, 31000, held_b6, "widened: B's flow to 6 backends");
	CHECK(resched(sa) == r0, "%s: %llu flows rescheduled: their slots moved", how,
	      (unsigned long long)(resched(sa) - r0));
	wrong = off_table(vips_a, 2, 32000, ta8, SEED_A, 0);
	CHECK(wrong == 0, "%s: A's new flows: %u of %u not by its table of 8", how, wrong,
	      2 * FLOWS);
	wrong = off_table(vips_b, 2, 32000, tb6, SEED_B, B_MAC);
	CHECK(wrong == 0, "%s: B's new flows: %u of %u not by its table of 6", how, wrong,
	      2 * FLOWS);
	printf("%s: 2 tables of 4 backends to 8: %u flows kept (%d on a1, b1, draining), new "
	       "flows by tables of 8 and 6 (%u and %u of %u on new backends), none rescheduled\n",
	       how, 2 * FLOWS, on_1, new_a, new_b, FLOWS);
	if (!found) {
		uint32_t on_b1 = widened_wrap(sa, held_b);

		printf("%s: A's slot in the appended region wrapping its incarnation: B's %u flows "
		       "kept (%u on b1, draining)\n",
		       how, FLOWS, on_b1);
	}
	if (pb != sb)
		hashlb_steer_free(pb);
	hashlb_steer_free(sb);
	hashlb_steer_free(sa);
	hashlb_table_free(ta);
	hashlb_table_free(tb);
	hashlb_table_free(ta_d);
	hashlb_table_free(tb_d);
	hashlb_table_free(ta8);
	hashlb_table_free(tb6);
	fd = saved;
}

/*
 * A removed backend's slot held (hashlb_steer_set_table_holding(): it drains) in the
 * publication right after its program of two tables grew from 4 backends a table to 8: B's b3
 * (table 1: its slots of before at 4..7, its new ones appended at 12..15, where t * 8 + i
 * would put them at 8..15) dropped, held, and b4..b7 added, which take free slots, not
 * b3's. Every flow of B's from before goes on to its backend, b3's by its held slot, none
 * rescheduled: the held slot is found at its index in the regions' layout (bslots_read(),
 * slots_held()), and kept there.
 */
static void held_widened(void)
{
	static const char *const names_b6[] = { "b1", "b2", "b4", "b5", "b6", "b7" };
	static const char *const b3[] = { "b3" };
	struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY,
				       .tables = 2,
				       .max_backends = 4 };
	struct hashlb_steer_opts wider = { .tables = 2, .max_backends = 8 };
	struct hashlb_table *ta = test_table(HASHLB_SCHEME_MAGLEV, SEED_A, names_a, 4, NULL);
	struct hashlb_table *tb = test_table(HASHLB_SCHEME_RING, SEED_B, names_b, 3, NULL);
	struct hashlb_table *tb6 = test_table(HASHLB_SCHEME_RING, SEED_B, names_b6, 6, NULL);
	struct hashlb_error err = { 0 };
	struct hashlb_steer *sa = test_steer_load_opts(&o, ta), *sb;
	int held_b[FLOWS], saved = fd;
	uint32_t on_b3 = 0;
	uint64_t r0;

	fd = hashlb_steer_prog_fd(sa, HASHLB_STEER_PROG_XDP);
	sb = shared_published(sa, ta, tb);
	establish(vips_b, 33000, held_b, 0);
	for (uint32_t i = 0; i < FLOWS; i++)
		on_b3 += held_b[i] == B_MAC + 2;
	CHECK(on_b3 > 0, "held widened: none of B's flows on b3: the test proves nothing");
	if (hashlb_steer_grow(sa, &wider, &err) < 0 || hashlb_steer_rebind(sb, sa, &err) < 0) {
		fprintf(stderr, "held widened: grow: %s\n", err.msg);
		exit(1);
	}
	fd = hashlb_steer_prog_fd(sa, HASHLB_STEER_PROG_XDP);
	r0 = resched(sa);
	publish_holding(sb, tb6, B_MAC, false, b3, 1);
	still_held(vips_b, 33000, held_b, "held widened: B's flow, b3 held");
	CHECK(resched(sa) == r0, "held widened: %llu flows rescheduled",
	      (unsigned long long)(resched(sa) - r0));
	printf("held widened: b3's %u flows kept by its held slot in a program grown to 8 "
	       "backends a table, b4..b7 in free slots\n",
	       on_b3);
	hashlb_steer_free(sb);
	hashlb_steer_free(sa);
	hashlb_table_free(ta);
	hashlb_table_free(tb);
	hashlb_table_free(tb6);
	fd = saved;
}

/* Entry 0 of per-CPU map <name> of program <prog>: <n> words <v> on CPU 0, 0 on the others. */
static void percpu_write(int prog, const char *name, const uint64_t *v, size_t n)
{
	int m = test_map_of(prog, name), ncpu = libbpf_num_possible_cpus();
	uint64_t *per = ncpu > 0 ? calloc((size_t)ncpu, n * 8) : NULL;
	uint32_t zero = 0;

	if (m < 0 || !per) {
		fprintf(stderr, "no map %s, or no memory\n", name);
		exit(1);
	}
	memcpy(per, v, n * 8);
	if (bpf_map_update_elem(m, &zero, per, BPF_ANY) < 0) {
		fprintf(stderr, "%s: %s\n", name, strerror(errno));
		exit(1);
	}
	free(per);
	close(m);
}

/*
 * The counters of <st> a table counts of its own, written out by hand from docs/steering.md
 * ("each table counts its own too"): packets, bytes, new flows, rescheduled, evicted, lost,
 * untracked RSTs, closed passes, closing marks and the drops with every backend down or of an
 * inconsistent table; its ct_hits (its packets less its new flows and untracked RSTs: <st>'s
 * are so); its passed are its closed_passed. Every other 0: passed, drop_malformed and
 * drop_fragment "stay the interface's alone", redirect the program never counts. Not taken
 * from the field table the code reads (hashlb_steer_stats_field_tabled()): a wrong flag there
 * would be the expectation too.
 */
static struct hlb_steer_stats own_of(const struct hlb_steer_stats *st)
{
	struct hlb_steer_stats o = { 0 };

	o.packets = st->packets;
	o.bytes = st->bytes;
	o.new_flows = st->new_flows;
	o.ct_hits = st->ct_hits;
	o.ct_resched = st->ct_resched;
	o.ct_evicted = st->ct_evicted;
	o.ct_lost = st->ct_lost;
	o.rst_untracked = st->rst_untracked;
	o.passed = st->closed_passed;
	o.closed_passed = st->closed_passed;
	o.ct_closing = st->ct_closing;
	o.drops[HLB_STEER_DROP_NO_BACKEND] = st->drops[HLB_STEER_DROP_NO_BACKEND];
	o.drops[HLB_STEER_DROP_TABLE] = st->drops[HLB_STEER_DROP_TABLE];
	return o;
}

/* <what>: <t> holds exactly the counters of <st> a table counts of its own (own_of()). */
static void own_only(const char *what, const struct hlb_steer_stats *t,
		     const struct hlb_steer_stats *st)
{
	struct hlb_steer_stats own = own_of(st);
	const char *name;
	uint64_t x, v;

	for (unsigned i = 0; (name = hashlb_steer_stats_field(t, i, &x)); i++) {
		hashlb_steer_stats_field(&own, i, &v);
		CHECK(x == v, "%s: a table's %s %llu, want %llu", what, name, (unsigned long long)x,
		      (unsigned long long)v);
	}
}

/*
 * A table's own counters are those docs/steering.md names (own_of()) in every place that
 * makes them: a program of one table's (all the program's, but the
 * others), and table 0's of a program of several grown from it (seeded from those). Every
 * counter of the program set to a figure of its own, drop_redirect too, which the program
 * never counts (before, the seed copied it into table 0's and the program of one table
 * showed it as its table's, while --stats, /status and /metrics showed none).
 */
static void own_rule(const struct hashlb_table *ta)
{
	struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY, .tables = 3 };
	struct hashlb_steer *sa = test_steer_load(ta);
	struct hlb_steer_stats want, st, t[3];
	struct hashlb_error err = { 0 };
	uint64_t *w = (uint64_t *)&want;
	const char *name;
	uint64_t x;
	int prog = hashlb_steer_prog_fd(sa, HASHLB_STEER_PROG_XDP);

	test_set_vips(sa, vips_a, 2);
	publish(sa, ta, 0);
	for (unsigned i = 0; i < sizeof(want) / 8; i++)
		w[i] = 100 + i;
	/* a table's ct_hits is its packets less its new flows and untracked RSTs */
	want.packets = 10000;
	want.ct_hits = want.packets - want.new_flows - want.rst_untracked;
	percpu_write(prog, "hlb_stats", w, HLB_STEER_STATS_SIZE / 8);
	percpu_write(prog, "hlb_stats2", w + HLB_STEER_STATS_SIZE / 8,
		     sizeof(struct hlb_steer_stats2) / 8);
	CHECK(hashlb_steer_stats(sa, &st) == 0 && !memcmp(&st, &want, sizeof(st)),
	      "own rule: the program's counters not as written");
	for (unsigned i = 0; (name = hashlb_steer_stats_field(&st, i, &x)); i++)
		CHECK(x != 0, "own rule: the program's %s 0: the test proves little", name);
	CHECK(hashlb_steer_tables_stats(sa, t) == 0, "own rule: one table: no table's counters");
	own_only("own rule: one table", &t[0], &want);
	if (hashlb_steer_grow(sa, &o, &err) < 0) {
		fprintf(stderr, "grow: %s\n", err.msg);
		exit(1);
	}
	CHECK(hashlb_steer_tables_stats(sa, t) == 0, "own rule: grown: no table's counters");
	own_only("own rule: grown, table 0", &t[0], &want);
	printf("own rule: a table's counters those the rule names, of a program of one table "
	       "and of table 0 of one grown from it\n");
	hashlb_steer_free(sa);
}

/* <n> packets with <flags> of flows <first>.. of VIP <v> of <vips>: how many forwarded. */
static uint32_t send_n(const char *const *vips, uint32_t v, uint32_t first, uint32_t n,
		       uint8_t flags)
{
	uint32_t sent = 0;

	for (uint32_t i = first; i < first + n; i++) {
		struct test_pkt p;

		flow(&p, vips, v, i);
		sent += send_pkt(&p, flags) >= 0;
	}
	return sent;
}

/*
 * Each table counts its own, in a program of two: A's new flows (SYNs), their ACKs
 * (conntrack hits), FINs (closing), untracked RSTs, ACKs that find no entry (lost), and B's
 * new flows, drops with every backend down and packets passed while closed, each in its
 * own table's figures, the other's 0, and the two adding up to the program's.
 */
static void counted(const struct hashlb_table *ta, const struct hashlb_table *tb)
{
	static const bool all_down[] = { true, true, true };
	struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY, .tables = 2 };
	struct hashlb_table *tb_down = test_table(HASHLB_SCHEME_RING, SEED_B, names_b, 3, all_down);
	struct hlb_steer_stats t[2], st;
	struct hashlb_error err = { 0 };
	struct hashlb_steer *sa = test_steer_load_opts(&o, ta), *sb;
	int saved = fd, own;
	const uint64_t *a, *b, *all;

	if (hashlb_steer_share(sa, 1, &sb, &err) < 0) {
		fprintf(stderr, "share: %s\n", err.msg);
		exit(1);
	}
	fd = hashlb_steer_prog_fd(sa, HASHLB_STEER_PROG_XDP);
	test_set_vips(sa, vips_a, 2);
	publish(sa, ta, 0);
	publish(sb, tb, B_MAC);
	test_set_vips(sb, vips_b, 2);

	CHECK(send_n(vips_a, 0, 100, 10, 0x02) == 10, "A's SYNs not forwarded"); /* new 10 */
	CHECK(send_n(vips_a, 0, 100, 10, 0x10) == 10, "A's ACKs not forwarded"); /* hits 10 */
	CHECK(send_n(vips_a, 1, 200, 3, 0x10) == 3, "A's lost ACKs not forwarded"); /* new, lost */
	CHECK(send_n(vips_a, 0, 100, 4, 0x11) == 4, "A's FINs not forwarded"); /* hits, closing */
	CHECK(send_n(vips_a, 1, 300, 2, 0x04) == 2, "A's RSTs not forwarded"); /* untracked */
	CHECK(send_n(vips_b, 0, 100, 6, 0x02) == 6, "B's SYNs not forwarded"); /* new 6 */
	publish(sb, tb_down, B_MAC);
	CHECK(send_n(vips_b, 1, 400, 5, 0x02) == 0, "B's SYNs forwarded, every backend down");
	test_vips(sb, vips_b, 2, true);
	CHECK(send_n(vips_b, 1, 500, 7, 0x02) == 0, "B's SYNs to a closed VIP forwarded");

	own = hashlb_steer_tables_stats(sa, t);
	CHECK(own == 0, "counted: tables_stats %d, not each table's all", own);
	CHECK(hashlb_steer_stats(sa, &st) == 0, "counted: no program counters");
	CHECK(t[0].packets == 29 && t[0].new_flows == 13 && t[0].ct_hits == 14 &&
		      t[0].ct_lost == 3 && t[0].rst_untracked == 2 && t[0].ct_closing == 4 &&
		      t[0].drops[HLB_STEER_DROP_NO_BACKEND] == 0 && t[0].closed_passed == 0,
	      "counted: A's packets %llu new %llu hits %llu lost %llu rst %llu closing %llu no "
	      "backend %llu closed %llu, want 29 13 14 3 2 4 0 0",
	      (unsigned long long)t[0].packets, (unsigned long long)t[0].new_flows,
	      (unsigned long long)t[0].ct_hits, (unsigned long long)t[0].ct_lost,
	      (unsigned long long)t[0].rst_untracked, (unsigned long long)t[0].ct_closing,
	      (unsigned long long)t[0].drops[HLB_STEER_DROP_NO_BACKEND],
	      (unsigned long long)t[0].closed_passed);
	CHECK(t[1].packets == 6 && t[1].new_flows == 6 && t[1].ct_hits == 0 && t[1].ct_lost == 0 &&
		      t[1].ct_closing == 0 && t[1].drops[HLB_STEER_DROP_NO_BACKEND] == 5 &&
		      t[1].closed_passed == 7 && t[1].passed == 7,
	      "counted: B's packets %llu new %llu hits %llu lost %llu closing %llu no backend "
	      "%llu closed %llu passed %llu, want 6 6 0 0 0 5 7 7",
	      (unsigned long long)t[1].packets, (unsigned long long)t[1].new_flows,
	      (unsigned long long)t[1].ct_hits, (unsigned long long)t[1].ct_lost,
	      (unsigned long long)t[1].ct_closing,
	      (unsigned long long)t[1].drops[HLB_STEER_DROP_NO_BACKEND],
	      (unsigned long long)t[1].closed_passed, (unsigned long long)t[1].passed);
	/* every counter a table counts: the two tables' add up to the program's */
	a = (const uint64_t *)&t[0];
	b = (const uint64_t *)&t[1];
	all = (const uint64_t *)&st;
	for (unsigned i = 0; i < sizeof(st) / 8; i++) {
		if (i == offsetof(struct hlb_steer_stats, passed) / 8 ||
		    i == offsetof(struct hlb_steer_stats, drops) / 8 + HLB_STEER_DROP_MALFORMED ||
		    i == offsetof(struct hlb_steer_stats, drops) / 8 + HLB_STEER_DROP_FRAGMENT)
			continue;
		CHECK(a[i] + b[i] == all[i],
		      "counted: word %u of the counters: %llu + %llu, the "
		      "program's %llu",
		      i, (unsigned long long)a[i], (unsigned long long)b[i],
		      (unsigned long long)all[i]);
	}
	printf("counted: each of two tables its own new flows, hits, lost, untracked RSTs, "
	       "closing, no-backend drops and closed passes, adding up to the program's\n");
	hashlb_steer_free(sb);
	hashlb_steer_free(sa);
	hashlb_table_free(tb_down);
	fd = saved;
}

/* The id of program <fd>, 0 if unknown. */
static uint32_t prog_id(int prog_fd)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	return bpf_obj_get_info_by_fd(prog_fd, &info, &len) == 0 ? info.id : 0;
}

/*
 * A program of one table attached to hlbgrow0 at the hook of <mode>, grown
 * to 3 tables: the new one is attached in its place (hashlb_steer_attached()
 * asks the hook for its id), the old one no more, and freeing the handle
 * detaches the new one. With <found>, the handle that grows it found it (a
 * takeover): the new program has the seed the old one was loaded with, read
 * from its .rodata, or every conntrack entry would be another flow's.
 */
static void replaced_at(enum hashlb_steer_mode mode, bool found, const struct hashlb_table *t)
{
	struct hashlb_steer_opts o = { .iface = "hlbgrow0", .mode = mode, .keep = found };
	struct hashlb_steer_opts o3 = { .tables = 3 };
	enum hashlb_steer_prog which =
		mode == HASHLB_STEER_TC ? HASHLB_STEER_PROG_TC : HASHLB_STEER_PROG_XDP;
	const char *how = found ? "found" : "loaded";
	struct hashlb_error err = { 0 };
	struct hashlb_steer *s = test_steer_load_opts(&o, t);
	uint32_t before = prog_id(hashlb_steer_prog_fd(s, which)), after;
	uint64_t seed = hashlb_steer_ct_seed(s);

	CHECK(hashlb_steer_attached(s), "%s: not attached", hashlb_steer_mode_name(mode));
	if (found) {
		hashlb_steer_free(s); /* kept: an orphan */
		if (hashlb_steer_find("hlbgrow0", mode, &s, &err) < 0) {
			fprintf(stderr, "find at %s: %s\n", hashlb_steer_mode_name(mode), err.msg);
			exit(1);
		}
		hashlb_steer_set_keep(s, false);
	}
	if (hashlb_steer_grow(s, &o3, &err) < 0) {
		fprintf(stderr, "grow at %s (%s): %s\n", hashlb_steer_mode_name(mode), how,
			err.msg);
		exit(1);
	}
	after = prog_id(hashlb_steer_prog_fd(s, which));
	CHECK(after && after != before && hashlb_steer_attached(s),
	      "%s (%s): program %u replaced by %u, attached: %d", hashlb_steer_mode_name(mode), how,
	      before, after, hashlb_steer_attached(s));
	CHECK(hashlb_steer_ct_seed(s) == seed, "%s (%s): conntrack seed %llx, was %llx",
	      hashlb_steer_mode_name(mode), how, (unsigned long long)hashlb_steer_ct_seed(s),
	      (unsigned long long)seed);
	hashlb_steer_free(s);
	CHECK(hashlb_steer_find("hlbgrow0", mode, &s, &err) == -ENOENT,
	      "%s (%s): the grown program stayed attached after its handle's free",
	      hashlb_steer_mode_name(mode), how);
	printf("%s (%s): program %u of one table replaced by %u of 3 in place\n",
	       hashlb_steer_mode_name(mode), how, before, after);
}

/*
 * A program of one table at hlbgrow0's generic XDP hook, put aside by hand
 * for another (the second handle's): its replacement fails, saying so, and
 * changes nothing: the handle keeps its one table and the program, the other
 * stays at the hook (XDP_FLAGS_REPLACE names the program it replaces).
 */
static void replace_refused(const struct hashlb_table *t)
{
	struct hashlb_steer_opts o = { .iface = "hlbgrow0", .mode = HASHLB_STEER_XDP_GENERIC };
	struct hashlb_steer_opts o3 = { .tables = 3 };
	struct hashlb_error err = { 0 };
	struct hashlb_steer *s = test_steer_load_opts(&o, t), *other = test_steer_load(t);
	int other_fd = hashlb_steer_prog_fd(other, HASHLB_STEER_PROG_XDP);
	LIBBPF_OPTS(bpf_xdp_attach_opts, xo,
		    .old_prog_fd = hashlb_steer_prog_fd(s, HASHLB_STEER_PROG_XDP));
	LIBBPF_OPTS(bpf_xdp_query_opts, xq);
	int ret;

	if (bpf_xdp_attach(hashlb_steer_ifindex(s), other_fd,
			   XDP_FLAGS_SKB_MODE | XDP_FLAGS_REPLACE, &xo) < 0) {
		perror("putting another program in its place");
		exit(1);
	}
	ret = hashlb_steer_grow(s, &o3, &err);
	CHECK(ret < 0 && strstr(err.msg, "replacing the program attached"),
	      "a program put aside grown: %d %s", ret, err.msg);
	CHECK(hashlb_steer_tables(s) == 1, "a failed replacement left %u tables",
	      hashlb_steer_tables(s));
	CHECK(bpf_xdp_query(hashlb_steer_ifindex(s), XDP_FLAGS_SKB_MODE, &xq) == 0 &&
		      xq.skb_prog_id == prog_id(other_fd),
	      "the program in its place is no longer at the hook: %u", xq.skb_prog_id);
	printf("a program put aside: not replaced: %s\n", err.msg);
	bpf_xdp_detach(hashlb_steer_ifindex(s), XDP_FLAGS_SKB_MODE, NULL);
	hashlb_steer_set_keep(s, true); /* nothing of its own to detach */
	hashlb_steer_free(s);
	hashlb_steer_free(other);
}

/*
 * A and B swap their VIPs, as hashlb run does for two services that swap
 * their listen addresses in one reload (set_vip(): A's VIPs leave the
 * program, B takes them, then A takes B's). A flow established while A served
 * a VIP, its tuple used again once B serves it (a client's SYN from the same
 * port, the old flow's ACKs), goes where B's table says, not by its entry to
 * A's backend; and B's old flows, now to A's VIPs, by A's table. Before, a
 * VIP back in the program took the index it had (its home slot, freed) and
 * the entries of its old owner, which name that index, matched it: a new
 * connection to B's address was served by A's backend.
 */
static void swapped(struct hashlb_steer *sa, struct hashlb_steer *sb, const struct hashlb_table *ta,
		    const struct hashlb_table *tb)
{
	struct hashlb_error err = { 0 };
	uint32_t by_entry = 0;

	test_set_vips(sa, vips_a, 2);
	publish(sa, ta, 0);
	publish(sb, tb, B_MAC);
	for (uint32_t i = 0; i < FLOWS; i++) {
		struct test_pkt a, b;

		flow(&a, vips_a, i % 2, 9000 + i);
		flow(&b, vips_b, i % 2, 9000 + i);
		CHECK(send_pkt(&a, 0x02) == says(ta, &a, SEED_A, 0) &&
			      send_pkt(&b, 0x02) == says(tb, &b, SEED_B, B_MAC),
		      "flow %u before the swap not where its table says", i);
	}
	CHECK(hashlb_steer_set_vips(sa, NULL, 0, &err) == 0, "A's VIPs removed: %s", err.msg);
	test_set_vips(sb, vips_a, 2);
	test_set_vips(sa, vips_b, 2);
	for (uint32_t i = 0; i < FLOWS; i++) {
		struct test_pkt a, b;
		int syn, ack;

		flow(&a, vips_a, i % 2, 9000 + i);
		syn = send_pkt(&a, 0x02);
		ack = send_pkt(&a, 0x10);
		by_entry += syn < B_MAC || ack < B_MAC;
		CHECK(syn == says(tb, &a, SEED_B, B_MAC) && ack == syn,
		      "flow %u of A's old VIP, now B's: SYN to %d, ACK to %d, B's table says %d", i,
		      syn, ack, says(tb, &a, SEED_B, B_MAC));
		flow(&b, vips_b, i % 2, 9000 + i);
		ack = send_pkt(&b, 0x10);
		CHECK(ack == says(ta, &b, SEED_A, 0),
		      "flow %u of B's old VIP, now A's: ACK to %d, A's table says %d", i, ack,
		      says(ta, &b, SEED_A, 0));
	}
	CHECK(by_entry == 0, "%u of %u flows of B's new VIPs went to A's backends by A's entries",
	      by_entry, FLOWS);
	printf("VIPs swapped: %u old flows of each VIP went by its new service's table\n", FLOWS);
}

int main(void)
{
	struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY, .tables = 2 };
	struct hashlb_table *ta, *ta2, *tb, *tb2, *tb3;
	struct hashlb_steer *sa, *sb = NULL;
	struct hashlb_error err = { 0 };
	int held[FLOWS];
	uint32_t moved = 0, wrong;

	ta = test_table(HASHLB_SCHEME_MAGLEV, SEED_A, names_a, 4, NULL);
	ta2 = test_table(HASHLB_SCHEME_MAGLEV, SEED_A, names_a, 2, NULL);
	tb = test_table(HASHLB_SCHEME_RING, SEED_B, names_b, 3, NULL);
	tb2 = test_table(HASHLB_SCHEME_RING, SEED_B, names_b + 1, 2, NULL);
	tb3 = test_table(HASHLB_SCHEME_RING, 33, names_b + 1, 2, NULL);
	sa = test_steer_load_opts(&o, ta);
	fd = hashlb_steer_prog_fd(sa, HASHLB_STEER_PROG_XDP);
	CHECK(hashlb_steer_tables(sa) == 2, "tables: %u", hashlb_steer_tables(sa));
	counted(ta, tb);
	own_rule(ta);
	older_refuses(fd, ta);
	CHECK(hashlb_steer_share(sa, 2, &sb, &err) == -ERANGE, "table 2 of 2 shared");
	if (hashlb_steer_share(sa, 1, &sb, &err) < 0) {
		fprintf(stderr, "share: %s\n", err.msg);
		return 1;
	}
	/* A: VIPs first, then its table; B: the other way round */
	test_set_vips(sa, vips_a, 2);
	publish(sa, ta, 0);
	publish(sb, tb, B_MAC);
	test_set_vips(sb, vips_b, 2);

	wrong = off_table(vips_a, 2, 0, ta, SEED_A, 0);
	CHECK(wrong == 0, "A's new flows: %u of %u not where its table says", wrong, 2 * FLOWS);
	wrong = off_table(vips_b, 2, 0, tb, SEED_B, B_MAC);
	CHECK(wrong == 0, "B's new flows: %u of %u not where its table says", wrong, 2 * FLOWS);
	taken_over(sa, ta, ta2);
	flip_b(sb, ta, tb, tb3);

	/* A VIP of A's is refused to B, and B's stay as they were. */
	CHECK(hashlb_steer_set_vips(sb, NULL, 0, &err) == 0, "B's VIPs cleared: %s", err.msg);
	{
		struct sockaddr_storage ss = { 0 };
		struct sockaddr_in *s4 = (void *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(80);
		inet_pton(AF_INET, "10.0.0.10", &s4->sin_addr);
		CHECK(hashlb_steer_set_vips(sb, &ss, 1, &err) == -EEXIST, "A's VIP taken by B: %s",
		      err.msg);
	}
	test_set_vips(sb, vips_b, 2);

	/* B's flows established (SYN), then A's table changes, many times. */
	for (uint32_t i = 0; i < FLOWS; i++) {
		struct test_pkt p;

		flow(&p, vips_b, i % 2, 5000 + i);
		held[i] = send_pkt(&p, 0x02);
	}
	for (int k = 0; k < 6; k++)
		publish(sa, k % 2 ? ta2 : ta, 0); /* ta2 last */
	wrong = off_table(vips_a, 2, 1000, ta2, SEED_A, 0);
	CHECK(wrong == 0, "A's new flows after its update: %u of %u off", wrong, 2 * FLOWS);
	wrong = off_table(vips_b, 2, 1000, tb, SEED_B, B_MAC);
	CHECK(wrong == 0, "B's new flows after A's update: %u of %u off", wrong, 2 * FLOWS);

	/* B's table changes (b1 goes): its flows on b2, b3 stay, b1's move;
	 * A's go on by ta2. */
	publish(sb, tb2, B_MAC + 1);
	for (uint32_t i = 0; i < FLOWS; i++) {
		struct test_pkt p;
		int now;

		flow(&p, vips_b, i % 2, 5000 + i);
		now = send_pkt(&p, 0x10);
		if (held[i] == B_MAC)
			moved += now != B_MAC;
		else
			CHECK(now == held[i], "B's flow %u: on %d, now %d", i, held[i], now);
	}
	CHECK(moved > 0, "no flow of b1's in %u", FLOWS);
	wrong = off_table(vips_a, 2, 2000, ta2, SEED_A, 0);
	CHECK(wrong == 0, "A's new flows after B's update: %u of %u off", wrong, 2 * FLOWS);
	wrong = off_table(vips_b, 2, 2000, tb2, SEED_B, B_MAC + 1);
	CHECK(wrong == 0, "B's new flows after its update: %u of %u off", wrong, 2 * FLOWS);

	/* A's VIPs go (its service removed): its packets are passed, B's
	 * established flows stay where they are, its new ones by tb2. */
	for (uint32_t i = 0; i < FLOWS; i++) {
		struct test_pkt p;

		flow(&p, vips_b, i % 2, 5000 + i);
		held[i] = send_pkt(&p, 0x10);
	}
	/* and A's: its flows above began by SYNs alone, their entries half-open
	 * (counted closing) until an ACK goes by them */
	for (uint32_t i = 0; i < FLOWS; i++) {
		struct test_pkt p;

		flow(&p, vips_a, i % 2, 9000 + i);
		send_pkt(&p, 0x10);
	}
	/* A stop's drain counts a service's own flows (hashlb_steer_flows_open()):
	 * each table its VIPs' entries, none once its VIPs left the program (a
	 * service whose drain ended first). Before, both counted every entry of
	 * the program, so one's drain waited for the other's flows, and for
	 * entries of VIPs no packet reaches any more. */
	struct hashlb_steer_flows fa, fb, fa2, fb2;
	uint32_t all = 0;

	CHECK(hashlb_steer_flows_open(sa, &fa) == 0 && hashlb_steer_flows_open(sb, &fb) == 0 &&
		      hashlb_steer_flows_count(sa, &all) == 0,
	      "counting the flows failed");
	CHECK(fa.open >= FLOWS && fb.open >= FLOWS && fa.open + fb.open <= all,
	      "open flows: A %u, B %u, of %u entries", fa.open, fb.open, all);
	/* Each service's conntrack entries in /metrics (hashlb_steer_flows_table()):
	 * its table's, open or closing, and the program's beside them; the two
	 * tables' add up to the program's. Before, each service showed the
	 * program's. */
	uint32_t na, nb, alla, allb;

	CHECK(hashlb_steer_flows_table(sa, &na, &alla) == 0 &&
		      hashlb_steer_flows_table(sb, &nb, &allb) == 0,
	      "counting each table's entries failed");
	CHECK(na == fa.open + fa.closing && nb == fb.open + fb.closing && alla == all &&
		      allb == all && na + nb == all,
	      "each table's entries: A %u (%u open, %u closing), B %u (%u, %u), of %u and %u "
	      "(%u in use)",
	      na, fa.open, fa.closing, nb, fb.open, fb.closing, alla, allb, all);
	/* Every table's at once, in one scan, through either handle
	 * (hashlb_steer_flows_tables(): under hashlb run, one a scrape for all the
	 * services of a program): each table's as its own handle counts them. */
	uint32_t nt[HASHLB_STEER_TABLES_MAX], allt;

	CHECK(hashlb_steer_flows_tables(sb, nt, &allt) == 0 && nt[hashlb_steer_table(sa)] == na &&
		      nt[hashlb_steer_table(sb)] == nb && allt == all,
	      "every table's entries at once: A %u (%u alone), B %u (%u alone), of %u (%u)",
	      nt[hashlb_steer_table(sa)], na, nt[hashlb_steer_table(sb)], nb, allt, all);
	/* A stop's drain looks at every table's open flows at once, in one scan
	 * (hashlb_steer_flows_open_tables(): one a look for all the services of a
	 * program draining): each table's what its own handle finds, open and
	 * closing, and the sums that tell whether they were used since. */
	struct hashlb_steer_flows ft[HASHLB_STEER_TABLES_MAX], *fta, *ftb;

	CHECK(hashlb_steer_flows_open_tables(sb, ft) == 0, "every table's open flows failed");
	fta = &ft[hashlb_steer_table(sa)];
	ftb = &ft[hashlb_steer_table(sb)];
	CHECK(!memcmp(fta, &fa, sizeof(fa)) && !memcmp(ftb, &fb, sizeof(fb)),
	      "every table's open flows at once: A %u open, %u closing (%u, %u alone), B %u, %u "
	      "(%u, %u alone), their sums the same: %d, %d",
	      fta->open, fta->closing, fa.open, fa.closing, ftb->open, ftb->closing, fb.open,
	      fb.closing, fta->open_used == fa.open_used && fta->closing_used == fa.closing_used,
	      ftb->open_used == fb.open_used && ftb->closing_used == fb.closing_used);
	CHECK(hashlb_steer_set_vips(sa, NULL, 0, &err) == 0, "A's VIPs removed: %s", err.msg);
	CHECK(hashlb_steer_flows_open(sa, &fa2) == 0 && hashlb_steer_flows_open(sb, &fb2) == 0,
	      "counting the flows failed");
	CHECK(fa2.open == 0 && fb2.open == fb.open,
	      "once A's VIPs left: A %u open flows (%u before), B %u (%u before)", fa2.open,
	      fa.open, fb2.open, fb.open);
	/* A's entries cleared with its VIPs: B's are all the program holds */
	CHECK(hashlb_steer_flows_table(sa, &na, &alla) == 0 &&
		      hashlb_steer_flows_table(sb, &nb, &allb) == 0 && na == 0 &&
		      nb == fb.open + fb.closing && alla == nb && allb == nb,
	      "once A's VIPs left: A %u entries, B %u (%u before), of %u and %u", na, nb,
	      fb.open + fb.closing, alla, allb);
	for (uint32_t i = 0; i < 20; i++) {
		struct test_pkt p;

		flow(&p, vips_a, i % 2, 3000 + i);
		CHECK(send_pkt(&p, 0x02) == -2, "A's flow %u not passed once A is gone", i);
	}
	publish(sb, tb, B_MAC); /* b1 back: flows kept where they are */
	still_held(vips_b, 5000, held, "B's flow after A went");
	wrong = off_table(vips_b, 2, 4000, tb, SEED_B, B_MAC);
	CHECK(wrong == 0, "B's new flows after A went: %u of %u off", wrong, 2 * FLOWS);
	swapped(sa, sb, ta, tb);

	hashlb_steer_free(sb);
	hashlb_steer_free(sa);

	/* Sizes past a map's 32-bit count are refused, not wrapped: 64 tables of
	 * 8M ring points need 2^32 ring index buckets (before, a map of 0). */
	{
		struct hashlb_steer_opts big = { .mode = HASHLB_STEER_LOAD_ONLY,
						 .tables = 64,
						 .max_ring_points = 8u << 20 };
		struct hashlb_steer *sbig = NULL;
		int ret = hashlb_steer_open(&big, NULL, &sbig, &err);

		CHECK(ret == -E2BIG && strstr(err.msg, "ring index buckets"),
		      "64 tables of 8M ring points: %d %s", ret, err.msg);
		hashlb_steer_free(sbig);
	}
	grown(ta, tb);
	resized(ta, tb);
	test_netns_veth("hlbgrow0", "hlbgrow1");
	for (int found = 0; found < 2; found++) {
		replaced_at(HASHLB_STEER_XDP_GENERIC, found, ta);
		replaced_at(HASHLB_STEER_TC, found, ta);
	}
	replace_refused(ta);
	widened(false);
	widened(true);
	held_widened();
	hashlb_table_free(ta);
	hashlb_table_free(ta2);
	hashlb_table_free(tb);
	hashlb_table_free(tb2);
	hashlb_table_free(tb3);
	if (test_failures)
		return 1;
	printf("ok: two tables in one program, each VIP on its own\n");
	return 0;
}
