// SPDX-License-Identifier: MIT
/*
 * Proves the kernel path's own conntrack table (hlb_ct, set-associative),
 * through BPF_PROG_TEST_RUN on a table of a few buckets: a set fills its
 * empty ways before it evicts; a full set evicts the way seen longest ago,
 * an entry idle for hours before any recent one, and a hit makes its way
 * recent again; a closing entry (half-open or FIN'd) goes before open ones
 * up to HLB_STEER_CT_CLOSING_HEAD ticks older; a RST with no entry is steered by the table and takes no
 * way, a RST with one goes by it and leaves it; a client's FIN or RST marks
 * its entry closing and a new connection's handshake (its ACK) unmarks it; a
 * SYN's entry is half-open, not open, and a retransmitted SYN goes by it; an
 * entry not half-open keeps its hash's bit 33, as a program from before
 * half-open reads it; a slot that another backend takes (a new incarnation) does
 * not inherit the old backend's flows, even when its 8-bit incarnation wraps, and the flows the
 * newcomer gets in the wait before it is written into the slot count once; a SYN that shares by chance a live
 * flow's bucket and tag (a real pair, found by a birthday search) does not
 * move it off its draining backend, nor does one whose IPv6 source was
 * computed to share its hash without the program's seed; flows of two VIPs
 * that share a bucket and a tag keep an entry each; a tag that matches by chance never
 * forwards a packet that is not for the VIP the entry names; removing one
 * VIP passes its flows and leaves another VIP's flows on their backends;
 * the VIP table holds 16 VIPs (32 keys), and a VIP keeps its slot while the
 * set around it changes, even one placed past its home slot, whose flows go by
 * their entry's VIP index; and with far
 * more flows than entries, through table changes and a backend going down,
 * no packet is ever sent to a down backend.
 */
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

#define SEED 11u
#define FLOWS_SMALL (HLB_STEER_CT_WAYS * 16) /* 16 buckets */

static int fd, ct_fd, bslots_fd;
static uint32_t n_buckets;
static uint64_t ct_seed; /* the loaded program's */

static struct hashlb_table *build(enum hashlb_scheme scheme, const char *const *names, uint32_t n,
				  const bool *down)
{
	return test_table_w(scheme, SEED, names, n, down, true);
}

/* The conntrack hash of <p>, as the program computes it. */
static uint64_t flow_hash(const struct test_pkt *p)
{
	struct hlb_steer_flow_key k;

	memset(&k, 0, sizeof(k));
	memcpy(k.src, p->src, 16);
	memcpy(k.dst, p->dst, 16);
	k.sport = htons(p->sport);
	k.dport = htons(p->dport);
	return hlb_steer_ct_hash(&k, ct_seed);
}

static uint32_t bucket_of(const struct test_pkt *p)
{
	return (uint32_t)flow_hash(p) & (n_buckets - 1);
}

static uint32_t tag_of(const struct test_pkt *p)
{
	return (uint32_t)(flow_hash(p) >> HLB_STEER_CT_TAG_SHIFT);
}

static void bucket_read(uint32_t b, struct hlb_steer_ct_bucket *ret)
{
	if (bpf_map_lookup_elem(ct_fd, &b, ret) < 0) {
		perror("reading hlb_ct");
		exit(1);
	}
}

static void bucket_write(uint32_t b, const struct hlb_steer_ct_bucket *v)
{
	if (bpf_map_update_elem(ct_fd, &b, v, BPF_ANY) < 0) {
		perror("writing hlb_ct");
		exit(1);
	}
}

/* The way of bucket <b> holding <p>'s tag, or -1. */
static int way_of(const struct hlb_steer_ct_bucket *b, const struct test_pkt *p)
{
	for (int w = 0; w < HLB_STEER_CT_WAYS; w++)
		if (b->way[w] && (uint32_t)(b->way[w] >> HLB_STEER_CT_TAG_SHIFT) == tag_of(p))
			return w;
	return -1;
}

/* Send <p>: the verdict, and in *ret_backend the backend index or -1. */
static int send_pkt(const struct test_pkt *p, int *ret_backend)
{
	uint8_t frame[256], out[512];
	size_t len = test_build(p, frame);
	int v = test_run(fd, frame, len, out, NULL);

	*ret_backend = v == XDP_TX_ ? test_frame_backend(out) : -1;
	return v;
}

static const char *send_name(const struct hashlb_table *t, const struct test_pkt *p)
{
	int b;

	if (send_pkt(p, &b) != XDP_TX_ || b < 0 || (uint32_t)b >= hashlb_table_backend_count(t))
		return NULL;
	return hashlb_table_backend_name(t, (uint32_t)b);
}

static const char *table_says(const struct hashlb_table *t, const struct test_pkt *p)
{
	return test_table_says(t, p, HASHLB_KEY_4TUPLE, SEED);
}

static bool same(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

static void flow_init(struct test_pkt *p, uint64_t *rng, uint32_t vip)
{
	uint64_t r = test_rand(rng);

	memset(p, 0, sizeof(*p));
	test_v4(p->src, (uint32_t)r);
	test_v4(p->dst, vip);
	p->sport = (uint16_t)(r >> 32) | 1024;
	p->dport = 80;
	p->tcp_flags = 0x10;
}

/* <n> flows to 10.0.0.10:80 that all fall in bucket <b>. */
static void flows_in_bucket(uint32_t b, struct test_pkt *out, int n, uint64_t *rng)
{
	for (int i = 0; i < n;) {
		flow_init(&out[i], rng, 0x0a00000a);
		if (bucket_of(&out[i]) == b)
			i++;
	}
}

static struct hlb_steer_stats stats(struct hashlb_steer *s)
{
	struct hlb_steer_stats st;

	hashlb_steer_stats(s, &st);
	return st;
}

/* 1-3: filling a set, evicting the least recently seen, an idle entry. */
static void eviction(struct hashlb_steer *s)
{
	struct test_pkt f[HLB_STEER_CT_WAYS + 3];
	struct hlb_steer_ct_bucket bk;
	struct hlb_steer_stats st0, st1;
	uint64_t rng = 5;
	uint32_t b = 3, count;
	uint16_t base;
	int be, w;

	hashlb_steer_flows_clear(s);
	flows_in_bucket(b, f, HLB_STEER_CT_WAYS + 3, &rng);

	/* 1. Six flows, six ways: nothing evicted, each a conntrack hit. */
	st0 = stats(s);
	for (int i = 0; i < HLB_STEER_CT_WAYS; i++)
		CHECK(send_pkt(&f[i], &be) == XDP_TX_, "flow %d not forwarded", i);
	bucket_read(b, &bk);
	for (int i = 0; i < HLB_STEER_CT_WAYS; i++)
		CHECK(way_of(&bk, &f[i]) >= 0, "flow %d has no way in its set", i);
	for (int i = 0; i < HLB_STEER_CT_WAYS; i++)
		send_pkt(&f[i], &be);
	st1 = stats(s);
	CHECK(st1.ct_evicted == st0.ct_evicted, "a set with empty ways evicted");
	CHECK(st1.new_flows - st0.new_flows == HLB_STEER_CT_WAYS, "new flows %llu",
	      (unsigned long long)(st1.new_flows - st0.new_flows));
	CHECK(st1.ct_hits - st0.ct_hits == HLB_STEER_CT_WAYS, "hits %llu",
	      (unsigned long long)(st1.ct_hits - st0.ct_hits));
	hashlb_steer_flows_count(s, &count);
	CHECK(count == HLB_STEER_CT_WAYS, "%u entries, want %d", count, HLB_STEER_CT_WAYS);

	/* 2. Ages 1..6 ticks (flow i seen i+1 ticks ago; flow 4 the oldest):
	 * a seventh flow takes flow 4's way, the others stay. The ages count
	 * from one tick, the last hit's: the hits above may straddle a tick
	 * (~1 s), and ages counted from each way's own tick could then tie. */
	bucket_read(b, &bk);
	base = bk.seen[way_of(&bk, &f[HLB_STEER_CT_WAYS - 1])];
	for (int i = 0; i < HLB_STEER_CT_WAYS; i++) {
		w = way_of(&bk, &f[i]);
		bk.seen[w] = (uint16_t)(base - (i == 4 ? 9 : i + 1));
	}
	bucket_write(b, &bk);
	st0 = stats(s);
	CHECK(send_pkt(&f[6], &be) == XDP_TX_, "seventh flow not forwarded");
	st1 = stats(s);
	CHECK(st1.ct_evicted - st0.ct_evicted == 1, "evictions %llu, want 1",
	      (unsigned long long)(st1.ct_evicted - st0.ct_evicted));
	bucket_read(b, &bk);
	CHECK(way_of(&bk, &f[4]) < 0, "the least recently seen flow was not the one evicted");
	CHECK(way_of(&bk, &f[6]) >= 0, "the new flow has no way");
	for (int i = 0; i < HLB_STEER_CT_WAYS; i++)
		CHECK(i == 4 || way_of(&bk, &f[i]) >= 0, "flow %d evicted, not the oldest", i);

	/* 3. A hit makes a way recent: flow 5 (now the oldest, 6 ticks) is
	 * seen again, so the next new flow evicts flow 3 (4 ticks). Then an
	 * entry idle for hours (20,000 ticks) goes before any recent one. */
	send_pkt(&f[5], &be);
	CHECK(send_pkt(&f[7], &be) == XDP_TX_, "eighth flow not forwarded");
	bucket_read(b, &bk);
	CHECK(way_of(&bk, &f[5]) >= 0, "a flow seen a moment ago was evicted");
	CHECK(way_of(&bk, &f[3]) < 0, "the oldest after the hit was not evicted");
	w = way_of(&bk, &f[1]);
	for (int i = 0; i < HLB_STEER_CT_WAYS; i++)
		bk.seen[i] = i == w ? (uint16_t)(bk.seen[i] - 20000) : bk.seen[i];
	bucket_write(b, &bk);
	CHECK(send_pkt(&f[8], &be) == XDP_TX_, "ninth flow not forwarded");
	bucket_read(b, &bk);
	CHECK(way_of(&bk, &f[8]) == w, "the idle entry's way was not reused");
	/* The evicted flow is a new flow again: rescheduled by the table. */
	st0 = stats(s);
	send_pkt(&f[1], &be);
	st1 = stats(s);
	CHECK(st1.new_flows - st0.new_flows == 1, "an evicted flow was not scheduled anew");
	printf("eviction: empty ways first, then the least recently seen, then an idle one\n");
}

/*
 * 3a. A full set's closing entries go first, within HLB_STEER_CT_CLOSING_HEAD:
 * a connect's half-open entry (its SYN alone) seen a tick ago goes before open
 * flows seen 2..6 ticks ago (before, the oldest open one went: a SYN flood
 * evicted live flows), and so does a flow's its client's FIN closed; an open
 * entry idle for longer than the head still goes before a closing one used now.
 */
static void evict_closing(struct hashlb_steer *s)
{
	struct test_pkt f[HLB_STEER_CT_WAYS + 3];
	struct hlb_steer_ct_bucket bk;
	uint64_t rng = 17;
	uint32_t b = 5;
	uint16_t base;
	int be, w;

	for (int round = 0; round < 3; round++) {
		/* round 0: f[2] half-open; 1: f[2] FIN-closed; 2: f[2] half-open,
		 * f[4] open and idle a head and a tick longer than f[2] */
		hashlb_steer_flows_clear(s);
		flows_in_bucket(b, f, HLB_STEER_CT_WAYS + 1, &rng);
		for (int i = 0; i < HLB_STEER_CT_WAYS; i++) {
			f[i].tcp_flags = i == 2 && round != 1 ? 0x02 : 0x10; /* SYN, or ACK */
			CHECK(send_pkt(&f[i], &be) == XDP_TX_, "flow %d not forwarded", i);
		}
		if (round == 1) {
			f[2].tcp_flags = 0x11; /* FIN, ACK */
			send_pkt(&f[2], &be);
		}
		bucket_read(b, &bk);
		base = bk.seen[way_of(&bk, &f[HLB_STEER_CT_WAYS - 1])];
		for (int i = 0; i < HLB_STEER_CT_WAYS; i++) {
			w = way_of(&bk, &f[i]);
			CHECK(w >= 0, "round %d: flow %d has no way", round, i);
			if (w < 0)
				return;
			bk.seen[w] = (uint16_t)(base - (i == 2 ? 1 : i + 2));
			if (round == 2 && i == 4)
				bk.seen[w] = (uint16_t)(base - 1 - HLB_STEER_CT_CLOSING_HEAD - 1);
		}
		bucket_write(b, &bk);
		f[HLB_STEER_CT_WAYS].tcp_flags = 0x02;
		CHECK(send_pkt(&f[HLB_STEER_CT_WAYS], &be) == XDP_TX_,
		      "round %d: new flow not forwarded", round);
		bucket_read(b, &bk);
		for (int i = 0; i < HLB_STEER_CT_WAYS; i++) {
			bool gone = i == (round == 2 ? 4 : 2);

			CHECK((way_of(&bk, &f[i]) < 0) == gone, "round %d: flow %d %s", round, i,
			      gone ? "kept, not evicted" : "evicted");
		}
	}
	printf("evict_closing: a half-open or FIN-closed entry seen a tick ago goes before open "
	       "ones 2-6 ticks old, an open one idle past the head before it\n");
}

/*
 * The set of bucket <b> holding flows <f>[0..5] (made by a packet each),
 * <f>[0] last seen at tick <first> and the others 100 + i ticks before the
 * program's tick now, read from the entries just made: into *<ret_now>.
 */
static void set_ages(uint32_t b, const struct test_pkt *f, uint16_t first, bool others,
		     uint16_t *ret_now)
{
	struct hlb_steer_ct_bucket bk;
	int be;

	for (int i = 0; i < HLB_STEER_CT_WAYS; i++)
		CHECK(send_pkt(&f[i], &be) == XDP_TX_, "flow %d not forwarded", i);
	bucket_read(b, &bk);
	*ret_now = bk.seen[way_of(&bk, &f[HLB_STEER_CT_WAYS - 1])];
	for (int i = 0; i < HLB_STEER_CT_WAYS; i++) {
		int w = way_of(&bk, &f[i]);

		CHECK(w >= 0, "flow %d has no way", i);
		if (w < 0)
			continue;
		bk.seen[w] = i == 0 ? first : (uint16_t)(*ret_now - 100 - i);
		if (i > 0 && !others)
			bk.way[w] = 0;
	}
	bucket_write(b, &bk);
}

/* set_ages() from an empty table, then <f>[0]'s entry 0x9000 ticks idle, the
 * others seen 100 ticks ago or so: its way. */
static int ages_one_idle(struct hashlb_steer *s, uint32_t b, const struct test_pkt *f,
			 uint16_t *ret_now)
{
	struct hlb_steer_ct_bucket bk;
	int w;

	hashlb_steer_flows_clear(s);
	set_ages(b, f, 0, true, ret_now);
	bucket_read(b, &bk);
	w = way_of(&bk, &f[0]);
	bk.seen[w] = (uint16_t)(*ret_now - 0x9000);
	bucket_write(b, &bk);
	return w;
}

/* Why a check could not run here (a machine without the feature): the
 * test, its other checks passed, exits 77 saying so rather than pass. */
static const char *not_run;

/*
 * hashlb_steer_ct_age() run by a process of a time namespace whose monotonic
 * clock is <off_s> seconds ahead of the kernel's (CLONE_NEWTIME, as a
 * container may be given): the number of entries it clamped (up to 253), 254
 * if it failed (the offset refused too), -1 if the kernel makes no such
 * namespace.
 */
static int ct_age_in_timens(struct hashlb_steer *s, long off_s)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		FILE *f;
		pid_t c;

		/* the namespace is its children's: the offset set before one is made */
		if (unshare(CLONE_NEWTIME) < 0)
			_exit(255);
		if (!(f = fopen("/proc/self/timens_offsets", "w")))
			_exit(254);
		fprintf(f, "monotonic %ld 0\n", off_s);
		if (fclose(f) != 0)
			_exit(254);
		c = fork();
		if (c == 0) {
			uint32_t n = 0;

			_exit(hashlb_steer_ct_age(s, &n) < 0 ? 254 : n > 253 ? 253 : (int)n);
		}
		if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st))
			_exit(254);
		_exit(WEXITSTATUS(st));
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 254;
	return WEXITSTATUS(st) == 255 ? -1 : WEXITSTATUS(st);
}

/*
 * 3b. The entries' last-seen ticks are 16 bits: an entry idle for a whole
 * wrap (65,536 ticks, 18.6 h at HZ=250) reads as seen now, and a full set's
 * insert takes a live flow's entry before it (the control: the program
 * alone). hashlb_steer_ct_age(), run every hashlb_steer_ct_age_period_ms()
 * (hashlb run does), sets an entry idle longer than HASHLB_STEER_CT_AGE_MAX
 * ticks to that age: run before the wrap, when the entry was 0x9000 ticks
 * idle, it leaves it 0xf000 old at the wrap, and the insert takes it. Its
 * clock is the program's: at the real tick it clamps an entry 0x9000 ticks
 * idle to 0x8000, and none of those seen a hundred ticks ago, run in a time
 * namespace whose monotonic clock is offset as in none.
 */
static void ct_wrap(struct hashlb_steer *s)
{
	struct test_pkt f[HLB_STEER_CT_WAYS + 1];
	struct hlb_steer_ct_bucket bk;
	uint32_t b = 5, n;
	uint64_t rng = 31;
	uint16_t now, late;
	int be, w, kept = 0;

	flows_in_bucket(b, f, HLB_STEER_CT_WAYS + 1, &rng);

	/* the control: f[0] idle a whole wrap, so its tick reads now */
	hashlb_steer_flows_clear(s);
	set_ages(b, f, 0, true, &now);
	bucket_read(b, &bk);
	bk.seen[way_of(&bk, &f[0])] = now;
	bucket_write(b, &bk);
	CHECK(send_pkt(&f[HLB_STEER_CT_WAYS], &be) == XDP_TX_, "seventh flow not forwarded");
	bucket_read(b, &bk);
	for (int i = 1; i < HLB_STEER_CT_WAYS; i++)
		kept += way_of(&bk, &f[i]) >= 0;
	CHECK(way_of(&bk, &f[0]) >= 0 && kept == HLB_STEER_CT_WAYS - 2,
	      "the control: the entry idle a whole wrap %s, %d of 5 live ones kept",
	      way_of(&bk, &f[0]) >= 0 ? "kept" : "evicted", kept);

	/* the clamp at the real tick: the ager's clock is the program's */
	w = ages_one_idle(s, b, f, &now);
	CHECK(hashlb_steer_ct_age(s, &n) == 0 && n == 1, "clamped %u entries, want 1", n);
	bucket_read(b, &bk);
	late = (uint16_t)(now - HASHLB_STEER_CT_AGE_MAX - bk.seen[w]);
	CHECK(late <= 2 || late >= 0xfffe, "clamped to %u ticks old, want 0x8000 (+-2)",
	      (uint16_t)(now - bk.seen[w]));
	for (int i = 1; i < HLB_STEER_CT_WAYS; i++) {
		int wi = way_of(&bk, &f[i]);

		CHECK(wi >= 0 && bk.seen[wi] == (uint16_t)(now - 100 - i),
		      "flow %d seen %u ticks ago changed", i, 100 + i);
	}

	/* a use a tick ahead of the clamp's clock (its estimate of the
	 * program's tick lagging): live, not clamped to look 0x8000 old */
	bucket_read(b, &bk);
	bk.seen[way_of(&bk, &f[1])] = (uint16_t)(now + 1);
	bucket_write(b, &bk);
	CHECK(hashlb_steer_ct_age_at(s, now, &n) == 0 && n == 0,
	      "clamped %u entries with one seen a tick ahead, want 0", n);
	bucket_read(b, &bk);
	CHECK(bk.seen[way_of(&bk, &f[1])] == (uint16_t)(now + 1),
	      "an entry seen a tick ahead of the clamp's clock made %u ticks old",
	      (uint16_t)(now - bk.seen[way_of(&bk, &f[1])]));

	/* the same from a time namespace whose monotonic clock runs 0xc000
	 * ticks ahead (its offset is no jiffy's): before, the ager read its tick
	 * there, f[0] looked 0x5000 ticks old and the live flows 0xc000, clamped
	 * to look older than it */
	struct timespec res;

	CHECK(clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && !res.tv_sec && res.tv_nsec > 0,
	      "CLOCK_MONOTONIC_COARSE's resolution unknown: the time namespace's clamp not tried");
	if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && !res.tv_sec && res.tv_nsec > 0) {
		long off_s = (long)((0xc000ull << HLB_STEER_CT_TICK_SHIFT) * (uint64_t)res.tv_nsec /
				    1000000000ull) +
			     1;
		int got;

		w = ages_one_idle(s, b, f, &now);
		got = ct_age_in_timens(s, off_s);
		if (got < 0) {
			not_run = "no time namespace here (CLONE_NEWTIME): the clamp in one not "
				  "tried";
		} else {
			bucket_read(b, &bk);
			late = (uint16_t)(now - HASHLB_STEER_CT_AGE_MAX - bk.seen[w]);
			CHECK(got == 1 && (late <= 2 || late >= 0xfffe),
			      "in a time namespace %ld s ahead: clamped %d entries, want 1, the "
			      "idle one to %u ticks old, want 0x8000 (+-2)",
			      off_s, got, (uint16_t)(now - bk.seen[w]));
			for (int i = 1; i < HLB_STEER_CT_WAYS; i++) {
				int wi = way_of(&bk, &f[i]);

				CHECK(wi >= 0 && bk.seen[wi] == (uint16_t)(now - 100 - i),
				      "in a time namespace: flow %d seen %u ticks ago made %u "
				      "ticks old",
				      i, 100 + i, wi >= 0 ? (uint16_t)(now - bk.seen[wi]) : 0);
			}
		}
	}

	/* the wrap with the clamp run 0x7000 ticks before it, when f[0] was
	 * 0x9000 ticks idle (the others not made yet: the ager would see them
	 * in its future) */
	hashlb_steer_flows_clear(s);
	set_ages(b, f, 0, false, &now);
	bucket_read(b, &bk);
	w = way_of(&bk, &f[0]);
	bk.seen[w] = now;
	bucket_write(b, &bk);
	CHECK(hashlb_steer_ct_age_at(s, (uint16_t)(now - 0x7000), &n) == 0 && n == 1,
	      "clamped %u entries before the wrap, want 1", n);
	bucket_read(b, &bk);
	CHECK(bk.seen[w] == (uint16_t)(now - 0xf000), "clamped to %u, want now - 0xf000",
	      bk.seen[w]);
	for (int i = 1; i < HLB_STEER_CT_WAYS; i++)
		CHECK(send_pkt(&f[i], &be) == XDP_TX_, "flow %d not forwarded", i);
	bucket_read(b, &bk);
	for (int i = 1; i < HLB_STEER_CT_WAYS; i++) {
		int wi = way_of(&bk, &f[i]);

		CHECK(wi >= 0, "flow %d has no entry", i);
		if (wi >= 0)
			bk.seen[wi] = (uint16_t)(now - 100 - i);
	}
	bucket_write(b, &bk);
	CHECK(send_pkt(&f[HLB_STEER_CT_WAYS], &be) == XDP_TX_, "seventh flow not forwarded");
	bucket_read(b, &bk);
	kept = 0;
	for (int i = 1; i < HLB_STEER_CT_WAYS; i++)
		kept += way_of(&bk, &f[i]) >= 0;
	CHECK(way_of(&bk, &f[0]) < 0 && kept == HLB_STEER_CT_WAYS - 1,
	      "clamped before the wrap: the idle entry %s, %d of 5 live ones kept",
	      way_of(&bk, &f[0]) >= 0 ? "kept" : "evicted", kept);
	printf("wrap: an entry idle a whole wrap read as fresh (a live flow's entry taken "
	       "instead); clamped to 0x8000 ticks every period, it goes first; the clamp's "
	       "clock is the program's\n");
}

/* hashlb_steer_flows_open()'s open entries into *<open>, the closing ones' sum into *<sum>. */
static void flows_open(struct hashlb_steer *s, uint32_t *open, uint64_t *sum)
{
	struct hashlb_steer_flows f = { 0 };

	CHECK(hashlb_steer_flows_open(s, &f) == 0, "hashlb_steer_flows_open failed");
	*open = f.open;
	*sum = f.closing_used;
}

/*
 * 1c. The client's FIN marks its flow's entry closing (counted once, a FIN
 * again not), which still forwards the flow's last packets to its backend;
 * hashlb_steer_flows_open() then counts it out of the open ones, and a use of
 * it (a tick later) changes the closing ones' sum; a new connection on the
 * tuple (to the same backend) unmarks it once its ACK follows its SYN, a RST
 * marks it again. What a
 * stop's drain (hashlb run) ends by.
 */
static void closing(struct hashlb_steer *s)
{
	struct test_pkt p, q;
	struct hlb_steer_ct_bucket bk;
	struct hlb_steer_stats st0, st1;
	uint64_t rng = 17, sum0, sum1, sum2;
	uint32_t open;
	int be, be2, w;

	hashlb_steer_flows_clear(s);
	CHECK(hashlb_steer_marks_closing(s), "this hashlb's program marks no entry closing");
	flow_init(&p, &rng, 0x0a00000a);
	flow_init(&q, &rng, 0x0a00000a);
	p.tcp_flags = 0x02; /* SYN */
	CHECK(send_pkt(&p, &be) == XDP_TX_, "SYN not forwarded");
	send_pkt(&q, &be2);
	flows_open(s, &open, &sum0);
	CHECK(open == 1, "%u open entries of a flow and a SYN", open);
	p.tcp_flags = 0x10;
	send_pkt(&p, &be2);
	flows_open(s, &open, &sum0);
	CHECK(open == 2, "%u open entries of 2 flows", open);

	st0 = stats(s);
	p.tcp_flags = 0x11; /* FIN ACK, twice */
	CHECK(send_pkt(&p, &be2) == XDP_TX_ && be2 == be, "FIN not to the flow's backend");
	send_pkt(&p, &be2);
	p.tcp_flags = 0x10; /* the ACK of the backend's FIN */
	CHECK(send_pkt(&p, &be2) == XDP_TX_ && be2 == be, "last ACK not to the flow's backend");
	st1 = stats(s);
	CHECK(st1.ct_closing - st0.ct_closing == 1, "ct_closing %llu after a FIN sent twice",
	      (unsigned long long)(st1.ct_closing - st0.ct_closing));
	CHECK(st1.ct_hits - st0.ct_hits == 3 && st1.new_flows == st0.new_flows,
	      "a closing flow's packets: %llu hits, %llu new flows",
	      (unsigned long long)(st1.ct_hits - st0.ct_hits),
	      (unsigned long long)(st1.new_flows - st0.new_flows));
	bucket_read(bucket_of(&p), &bk);
	w = way_of(&bk, &p);
	CHECK(w >= 0 && (bk.way[w] & HLB_STEER_CT_CLOSING), "the FIN did not mark its entry");
	flows_open(s, &open, &sum0);
	CHECK(open == 1, "%u open entries, one flow closing of 2", open);

	/* used a tick after it was last: the sum of the closing ones changes */
	bk.seen[w] = (uint16_t)(bk.seen[w] - 100);
	bucket_write(bucket_of(&p), &bk);
	flows_open(s, &open, &sum1);
	send_pkt(&p, &be2);
	flows_open(s, &open, &sum2);
	CHECK(sum1 != sum0 && sum2 != sum1, "a closing entry used again: its sum unchanged");

	p.tcp_flags = 0x02; /* a new connection on the tuple */
	CHECK(send_pkt(&p, &be2) == XDP_TX_ && be2 == be, "SYN of a reused tuple moved");
	flows_open(s, &open, &sum1);
	CHECK(open == 1 && sum1 != 0, "a reused tuple's SYN: %u open", open);
	p.tcp_flags = 0x10; /* its ACK */
	CHECK(send_pkt(&p, &be2) == XDP_TX_ && be2 == be, "ACK of a reused tuple moved");
	flows_open(s, &open, &sum1);
	CHECK(open == 2 && sum1 == 0, "a handshake did not unmark its entry: %u open", open);
	p.tcp_flags = 0x14; /* RST ACK */
	send_pkt(&p, &be2);
	flows_open(s, &open, &sum1);
	CHECK(open == 1 && stats(s).ct_closing - st0.ct_closing == 2,
	      "a RST did not mark its entry: %u open", open);

	/* A FIN that finds no entry (the flow's was evicted, or it began
	 * before the program) makes one, closing already: a stop's drain does
	 * not wait for it to its deadline. */
	struct test_pkt r;

	flow_init(&r, &rng, 0x0a00000a);
	r.tcp_flags = 0x11; /* FIN ACK */
	st0 = stats(s);
	CHECK(send_pkt(&r, &be2) == XDP_TX_, "an untracked flow's FIN not forwarded");
	st1 = stats(s);
	CHECK(st1.new_flows - st0.new_flows == 1 && st1.ct_closing - st0.ct_closing == 1,
	      "a FIN that made an entry: %llu new flows, %llu closing",
	      (unsigned long long)(st1.new_flows - st0.new_flows),
	      (unsigned long long)(st1.ct_closing - st0.ct_closing));
	bucket_read(bucket_of(&r), &bk);
	w = way_of(&bk, &r);
	CHECK(w >= 0 && (bk.way[w] & HLB_STEER_CT_CLOSING), "a FIN made an entry not closing");
	flows_open(s, &open, &sum1);
	CHECK(open == 1, "%u open entries after an untracked flow's FIN, 1 before", open);
	printf("closing: a client's FIN or RST marks its entry, a new connection's handshake "
	       "unmarks it; the flow's last packets still go by it; a FIN that makes an entry "
	       "makes it closing\n");
}

/*
 * 1e. A program from before half-open compared bits 63..33 of an entry with
 * the hash's (its tag, 31 bits), and hashlb_steer_grow() replaces one program
 * by another over the same conntrack map (an upgrade, or a rollback): the
 * entries of 40 established flows keep the hash's bit 33, so that an older
 * program finds each; and an older program's FIN-closed entries (bit 33 the
 * hash's) stay closing across the flows' last ACKs. Before, the entries of
 * the flows whose hash has bit 33 set were lost to an older program, and this
 * one read that bit as half-open and reopened them.
 */
static void older_layout(struct hashlb_steer *s, const struct hashlb_table *t)
{
	struct hlb_steer_ct_bucket bk;
	struct hashlb_steer_flows fl = { 0 };
	struct test_pkt f[40];
	uint64_t rng = 23;
	uint32_t set = 0, lost = 0, reopened = 0;
	int be, w;

	hashlb_steer_flows_clear(s);
	test_publish(s, t, HASHLB_KEY_4TUPLE, NULL);
	for (int i = 0; i < 40; i++) {
		uint64_t h;

		flow_init(&f[i], &rng, 0x0a00000a);
		h = flow_hash(&f[i]);
		set += (h >> 33) & 1;
		f[i].tcp_flags = 0x02; /* SYN */
		CHECK(send_pkt(&f[i], &be) == XDP_TX_, "SYN %d not forwarded", i);
		f[i].tcp_flags = 0x10; /* its ACK */
		CHECK(send_pkt(&f[i], &be) == XDP_TX_, "ACK %d not forwarded", i);
		bucket_read(bucket_of(&f[i]), &bk);
		w = way_of(&bk, &f[i]);
		lost += w < 0 || (uint32_t)(bk.way[w] >> 33) != (uint32_t)(h >> 33);
	}
	CHECK(set > 0, "no flow whose hash has bit 33 set: the test proves nothing");
	CHECK(lost == 0,
	      "%u of 40 established flows' entries an older program would miss (%u "
	      "hashes with bit 33 set)",
	      lost, set);
	for (int i = 0; i < 40; i++) {
		uint64_t h = flow_hash(&f[i]);

		f[i].tcp_flags = 0x11; /* FIN */
		CHECK(send_pkt(&f[i], &be) == XDP_TX_, "FIN %d not forwarded", i);
		/* as an older program leaves it */
		bucket_read(bucket_of(&f[i]), &bk);
		w = way_of(&bk, &f[i]);
		if (w < 0)
			continue;
		bk.way[w] = (h >> 33) << 33 | (bk.way[w] & 0xffffffffu) | HLB_STEER_CT_CLOSING;
		bucket_write(bucket_of(&f[i]), &bk);
		f[i].tcp_flags = 0x10; /* the last ACK */
		CHECK(send_pkt(&f[i], &be) == XDP_TX_, "last ACK %d not forwarded", i);
		bucket_read(bucket_of(&f[i]), &bk);
		w = way_of(&bk, &f[i]);
		reopened += w < 0 || !(bk.way[w] & HLB_STEER_CT_CLOSING);
	}
	CHECK(reopened == 0 && hashlb_steer_flows_open(s, &fl) == 0 && fl.closing == 40,
	      "an older program's FIN-closed entries: %u reopened by an ACK, %u closing of 40",
	      reopened, fl.closing);
	printf("older layout: 40 established flows' entries match as a program from before "
	       "half-open reads them (%u hashes with bit 33 set); its FIN-closed entries stay "
	       "closing\n",
	       set);
}

/*
 * 1d. A SYN's entry is half-open: counted closing, not open, by
 * hashlb_steer_flows_open() (a connect no backend answered keeps no stop's
 * drain to timeouts.idle), and not as a close (ct_closing); a retransmitted
 * SYN goes by it to the first SYN's backend, though the table has changed
 * since, and the client's ACK makes it open. Before, a SYN's entry was open
 * at once. Then a RST the client did not send marks the entry closing but
 * ends nothing: the flow's next ACK goes by it, not by the new table.
 */
static void half_open(struct hashlb_steer *s, const struct hashlb_table *t)
{
	static const char *const more[] = { "a", "b", "c", "d", "e", "f", "g" };
	struct hashlb_table *t2 = build(HASHLB_SCHEME_MAGLEV, more, 7, NULL);
	struct hashlb_steer_flows fl;
	struct hlb_steer_stats st0, st1;
	struct test_pkt f[40];
	const char *first[40];
	uint64_t rng = 23;
	uint32_t moved = 0, bad = 0, open;
	uint64_t sum;

	hashlb_steer_flows_clear(s);
	test_publish(s, t, HASHLB_KEY_4TUPLE, NULL);
	st0 = stats(s);
	for (int i = 0; i < 40; i++) {
		flow_init(&f[i], &rng, 0x0a00000a);
		f[i].tcp_flags = 0x02; /* SYN */
		first[i] = send_name(t, &f[i]);
		bad += !same(first[i], table_says(t, &f[i]));
	}
	CHECK(bad == 0, "%u SYNs not where the table says", bad);
	CHECK(hashlb_steer_flows_open(s, &fl) == 0 && fl.open == 0 && fl.closing == 40,
	      "40 SYNs: %u open entries, %u closing", fl.open, fl.closing);
	CHECK(stats(s).ct_closing == st0.ct_closing, "a SYN counted as a close");

	test_publish(s, t2, HASHLB_KEY_4TUPLE, NULL);
	st0 = stats(s);
	for (int i = 0; i < 40; i++) {
		moved += !same(first[i], table_says(t2, &f[i]));
		bad += !same(send_name(t2, &f[i]), first[i]); /* the SYN again */
	}
	st1 = stats(s);
	CHECK(moved > 0, "no flow the new table moves: the test proves nothing");
	CHECK(bad == 0 && st1.ct_hits - st0.ct_hits == 40 && st1.new_flows == st0.new_flows,
	      "40 retransmitted SYNs (%u the new table moves): %u elsewhere, %llu hits, %llu new "
	      "flows",
	      moved, bad, (unsigned long long)(st1.ct_hits - st0.ct_hits),
	      (unsigned long long)(st1.new_flows - st0.new_flows));
	flows_open(s, &open, &sum);
	CHECK(open == 0, "%u open entries after retransmitted SYNs", open);

	for (int i = 0; i < 40; i++) {
		f[i].tcp_flags = 0x10; /* the handshake's ACK */
		bad += !same(send_name(t2, &f[i]), first[i]);
	}
	CHECK(hashlb_steer_flows_open(s, &fl) == 0 && fl.open == 40 && fl.closing == 0 && bad == 0,
	      "40 ACKs: %u open entries, %u closing, %u elsewhere", fl.open, fl.closing, bad);
	CHECK(stats(s).ct_closing == st0.ct_closing, "a handshake counted as a close");

	/* A RST the client did not send (any sequence number: the program
	 * checks none, docs/DESIGN-steering.md) marks each entry closing and
	 * ends none: the flows' next packets go by their entries, to their
	 * first backends, not where the table in force says. */
	st0 = stats(s);
	for (int i = 0; i < 40; i++) {
		f[i].tcp_flags = 0x04; /* RST */
		bad += !same(send_name(t2, &f[i]), first[i]);
		f[i].tcp_flags = 0x10;
		bad += !same(send_name(t2, &f[i]), first[i]);
	}
	st1 = stats(s);
	CHECK(bad == 0 && st1.ct_hits - st0.ct_hits == 80 && st1.new_flows == st0.new_flows &&
		      st1.ct_closing - st0.ct_closing == 40,
	      "40 spoofed RSTs and the ACKs after them: %u elsewhere, %llu hits, %llu new flows, "
	      "%llu closing",
	      bad, (unsigned long long)(st1.ct_hits - st0.ct_hits),
	      (unsigned long long)(st1.new_flows - st0.new_flows),
	      (unsigned long long)(st1.ct_closing - st0.ct_closing));
	test_publish(s, t, HASHLB_KEY_4TUPLE, NULL);
	printf("half-open: 40 SYNs' entries closing, not open; retransmitted after a table change "
	       "(%u would move), each to its first backend; open once ACKed; a RST (spoofed) "
	       "and the ACK after it still by the entry\n",
	       moved);
	hashlb_table_free(t2);
}

/*
 * 1b. A RST that finds no entry ends a flow conntrack does not hold: the
 * table steers it, and it takes no way (a full set keeps every live flow),
 * counted as rst_untracked, not as a new flow nor as lost. A RST of a
 * tracked flow goes by its entry, which stays.
 */
static void reset(struct hashlb_steer *s, const struct hashlb_table *t)
{
	struct test_pkt f[2 * HLB_STEER_CT_WAYS];
	struct hlb_steer_ct_bucket bk;
	struct hlb_steer_stats st0, st1;
	uint64_t rng = 29;
	uint32_t b = 6, count;
	int be, bad = 0;

	hashlb_steer_flows_clear(s);
	flows_in_bucket(b, f, 2 * HLB_STEER_CT_WAYS, &rng);
	for (int i = 0; i < HLB_STEER_CT_WAYS; i++)
		send_pkt(&f[i], &be);
	st0 = stats(s);
	for (int i = HLB_STEER_CT_WAYS; i < 2 * HLB_STEER_CT_WAYS; i++) {
		f[i].tcp_flags = 0x04; /* RST */
		bad += !same(send_name(t, &f[i]), table_says(t, &f[i]));
	}
	st1 = stats(s);
	CHECK(bad == 0, "%d of %d RSTs not sent to the table's backend", bad, HLB_STEER_CT_WAYS);
	bucket_read(b, &bk);
	for (int i = 0; i < 2 * HLB_STEER_CT_WAYS; i++)
		CHECK((way_of(&bk, &f[i]) >= 0) == (i < HLB_STEER_CT_WAYS),
		      i < HLB_STEER_CT_WAYS ? "live flow %d evicted by a RST" : "RST %d has a way",
		      i);
	hashlb_steer_flows_count(s, &count);
	CHECK(count == HLB_STEER_CT_WAYS, "%u entries after the RSTs, want %d", count,
	      HLB_STEER_CT_WAYS);
	CHECK(st1.rst_untracked - st0.rst_untracked == HLB_STEER_CT_WAYS &&
		      st1.packets - st0.packets == HLB_STEER_CT_WAYS &&
		      st1.new_flows == st0.new_flows && st1.ct_lost == st0.ct_lost &&
		      st1.ct_evicted == st0.ct_evicted,
	      "%d RSTs with no entry: rst_untracked %llu, packets %llu, new_flows %llu, ct_lost "
	      "%llu, ct_evicted %llu",
	      HLB_STEER_CT_WAYS, (unsigned long long)(st1.rst_untracked - st0.rst_untracked),
	      (unsigned long long)(st1.packets - st0.packets),
	      (unsigned long long)(st1.new_flows - st0.new_flows),
	      (unsigned long long)(st1.ct_lost - st0.ct_lost),
	      (unsigned long long)(st1.ct_evicted - st0.ct_evicted));

	/* A RST of a tracked flow: by its entry, kept. */
	st0 = stats(s);
	f[0].tcp_flags = 0x04;
	CHECK(send_pkt(&f[0], &be) == XDP_TX_, "a tracked flow's RST not forwarded");
	st1 = stats(s);
	bucket_read(b, &bk);
	CHECK(st1.ct_hits - st0.ct_hits == 1 && way_of(&bk, &f[0]) >= 0,
	      "a tracked flow's RST: hits %llu, its entry %s",
	      (unsigned long long)(st1.ct_hits - st0.ct_hits),
	      way_of(&bk, &f[0]) >= 0 ? "kept" : "gone");
	printf("reset: %d RSTs with no entry to a full set: steered by the table, no way taken, "
	       "rst_untracked %llu\n",
	       HLB_STEER_CT_WAYS, (unsigned long long)(st1.rst_untracked));
}

/* 4. A backend removed, its slot given to a newcomer: the old backend's
 * flows go where the table says, not to the newcomer by the slot. <direct>:
 * in one publication, from a,b,c to a,b,e in a program of 3 backend slots,
 * where e's only slot is the one c holds until that table is in force (before,
 * refused: "this table's 3 backends and the 1 it drops from the table in
 * force need 4 backend slots together, the program has 3"); else with a,b
 * published between, which frees c's slot first. */
static void incarnation(struct hashlb_steer *s, bool direct)
{
	static const char *const abc[] = { "a", "b", "c" }, *const ab[] = { "a", "b" },
				 *const abe[] = { "a", "b", "e" };
	struct hashlb_table *t1 = build(HASHLB_SCHEME_MAGLEV, abc, 3, NULL);
	struct hashlb_table *t2 = build(HASHLB_SCHEME_MAGLEV, ab, 2, NULL);
	struct hashlb_table *t3 = build(HASHLB_SCHEME_MAGLEV, abe, 3, NULL);
	struct hlb_steer_stats st0, st1;
	struct test_pkt f[60];
	const char *first[60];
	uint64_t rng = 17;
	uint32_t n_c = 0, n_e = 0, bad = 0;

	hashlb_steer_flows_clear(s);
	test_publish(s, t1, HASHLB_KEY_4TUPLE, NULL);
	for (int i = 0; i < 60; i++) {
		flow_init(&f[i], &rng, 0x0a00000a);
		first[i] = send_name(t1, &f[i]);
	}
	if (!direct)
		test_publish(s, t2, HASHLB_KEY_4TUPLE, NULL); /* c's slot freed */
	test_publish(s, t3, HASHLB_KEY_4TUPLE, NULL); /* e takes it */
	st0 = stats(s);
	for (int i = 0; i < 60; i++) {
		const char *got = send_name(t3, &f[i]);

		if (same(first[i], "c")) {
			n_c++;
			bad += !same(got, table_says(t3, &f[i]));
		} else {
			bad += !same(got, first[i]);
		}
	}
	st1 = stats(s);
	CHECK(n_c > 0, "no flow on c: the test proves nothing");
	CHECK(bad == 0, "%u flows wrong after c's slot went to e", bad);
	CHECK(st1.ct_resched - st0.ct_resched == n_c && st1.ct_hits - st0.ct_hits == 60 - n_c,
	      "c's %u flows: %llu rescheduled, %llu hits of 60", n_c,
	      (unsigned long long)(st1.ct_resched - st0.ct_resched),
	      (unsigned long long)(st1.ct_hits - st0.ct_hits));
	/* and then by their new entries, e's (the slot is e's now) included */
	for (int i = 0; i < 60; i++) {
		if (!same(first[i], "c"))
			continue;
		n_e += same(table_says(t3, &f[i]), "e");
		bad += !same(send_name(t3, &f[i]), table_says(t3, &f[i]));
	}
	CHECK(n_e > 0 && bad == 0 && stats(s).ct_hits - st1.ct_hits == n_c,
	      "c's %u flows, %u of them on e: %u elsewhere, %llu hits", n_c, n_e, bad,
	      (unsigned long long)(stats(s).ct_hits - st1.ct_hits));
	printf("incarnation%s: %u flows of a removed backend rescheduled by the table, not sent "
	       "to the backend that took its slot (%u of them to it by the table, then by their "
	       "entries)\n",
	       direct ? " (one publication, 3 slots)" : "", n_c, n_e);
	hashlb_table_free(t1);
	hashlb_table_free(t2);
	hashlb_table_free(t3);
}

/*
 * 4a. The wait after the flip to a table whose newcomer e takes the slot of
 * c, which it drops (3 slots): the slot holds c until the loader writes e
 * in, after the barrier. A flow the table sends to e meanwhile makes an
 * entry naming e's incarnation, and its next packet finds c's in the slot:
 * scheduled again by the table, to e, its own entry. Counted once, as a new
 * flow with a conntrack hit after it; before, twice in new_flows and once
 * in ct_resched, though it never moved. Simulated: c's value written back
 * into the slot after the publication, as it was during the wait.
 */
static void newcomer_wait(struct hashlb_steer *s)
{
	static const char *const abc[] = { "a", "b", "c" }, *const abe[] = { "a", "b", "e" };
	struct hashlb_table *t1 = build(HASHLB_SCHEME_MAGLEV, abc, 3, NULL);
	struct hashlb_table *t3 = build(HASHLB_SCHEME_MAGLEV, abe, 3, NULL);
	struct hlb_steer_backend c_be, e_be;
	struct hlb_steer_stats st0, st1;
	uint32_t slot, n = 0, bad = 0;
	uint64_t nf, nr;
	struct test_pkt f[8];
	uint64_t rng = 23;
	int be;

	hashlb_steer_flows_clear(s);
	test_publish(s, t1, HASHLB_KEY_4TUPLE, NULL);
	for (slot = 0; bpf_map_lookup_elem(bslots_fd, &slot, &c_be) == 0; slot++)
		if (c_be.id == hashlb_steer_backend_id("c"))
			break;
	CHECK(c_be.id == hashlb_steer_backend_id("c"), "c has no slot");
	test_publish(s, t3, HASHLB_KEY_4TUPLE, NULL);
	CHECK(bpf_map_lookup_elem(bslots_fd, &slot, &e_be) == 0 &&
		      e_be.id == hashlb_steer_backend_id("e"),
	      "e did not take c's slot %u", slot);
	CHECK(bpf_map_update_elem(bslots_fd, &slot, &c_be, BPF_ANY) == 0, "c's slot back");
	while (n < 8) {
		flow_init(&f[n], &rng, 0x0a00000a);
		n += same(table_says(t3, &f[n]), "e");
	}
	st0 = stats(s);
	for (uint32_t i = 0; i < n; i++) {
		f[i].tcp_flags = 0x02;
		bad += send_pkt(&f[i], &be) != XDP_TX_ || be != 2;
		f[i].tcp_flags = 0x10;
		bad += send_pkt(&f[i], &be) != XDP_TX_ || be != 2;
	}
	st1 = stats(s);
	nf = st1.new_flows - st0.new_flows;
	nr = st1.ct_resched - st0.ct_resched;
	CHECK(bad == 0, "%u of %u packets of e's new flows not sent to e", bad, 2 * n);
	CHECK(st1.new_flows - st0.new_flows == n && st1.ct_resched == st0.ct_resched &&
		      st1.ct_hits - st0.ct_hits == n,
	      "%u new flows on e, a SYN and an ACK each, during the wait: new_flows %llu, "
	      "ct_resched %llu, ct_hits %llu",
	      n, (unsigned long long)(st1.new_flows - st0.new_flows),
	      (unsigned long long)(st1.ct_resched - st0.ct_resched),
	      (unsigned long long)(st1.ct_hits - st0.ct_hits));
	/* the wait over: e in its slot, the flows by their entries */
	CHECK(bpf_map_update_elem(bslots_fd, &slot, &e_be, BPF_ANY) == 0, "e's slot");
	st0 = stats(s);
	for (uint32_t i = 0; i < n; i++)
		bad += send_pkt(&f[i], &be) != XDP_TX_ || be != 2;
	st1 = stats(s);
	CHECK(bad == 0 && st1.ct_hits - st0.ct_hits == n && st1.new_flows == st0.new_flows,
	      "after the wait: %u not on e, %llu hits of %u", bad,
	      (unsigned long long)(st1.ct_hits - st0.ct_hits), n);
	printf("newcomer wait: %u flows begun on e while c's slot was still c's, a SYN and an ACK "
	       "each: new_flows %llu, ct_resched %llu\n",
	       n, (unsigned long long)nf, (unsigned long long)nr);
	hashlb_table_free(t1);
	hashlb_table_free(t3);
}

/*
 * 4c. A backend a reload removed, draining (hashlb_steer_set_table_holding()),
 * in a program of 3 slots: a,c,b (c in slot 1, b in 2). The table a,e drops b
 * and c, holding c: e takes b's slot, not c's (the first dropped one, which
 * it took before); c's flows go on to c by their entries, b's are
 * rescheduled. Then a,e,f, c still held: no slot is left but c's, which f
 * takes, c's flows rescheduled by the table, none sent to f by the slot.
 */
static void held_slot(struct hashlb_steer *s)
{
	static const char *const acb[] = { "a", "c", "b" }, *const ae[] = { "a", "e" },
				 *const aef[] = { "a", "e", "f" }, *const aec[] = { "a", "e", "c" },
				 *const c[] = { "c" };
	struct hashlb_table *t1 = build(HASHLB_SCHEME_MAGLEV, acb, 3, NULL);
	struct hashlb_table *t2 = build(HASHLB_SCHEME_MAGLEV, ae, 2, NULL);
	struct hashlb_table *t3 = build(HASHLB_SCHEME_MAGLEV, aef, 3, NULL);
	struct hashlb_table *t_aec = build(HASHLB_SCHEME_MAGLEV, aec, 3, NULL);
	struct hlb_steer_stats st0, st1;
	struct test_pkt f[60];
	const char *first[60];
	uint64_t rng = 29;
	uint32_t n_b = 0, n_c = 0, bad = 0;
	int be;

	hashlb_steer_flows_clear(s);
	test_publish(s, t1, HASHLB_KEY_4TUPLE, NULL);
	for (int i = 0; i < 60; i++) {
		flow_init(&f[i], &rng, 0x0a00000a);
		first[i] = send_name(t1, &f[i]);
		n_b += same(first[i], "b");
		n_c += same(first[i], "c");
	}
	CHECK(n_b > 0 && n_c > 0, "flows on b %u, on c %u: the test proves nothing", n_b, n_c);
	test_publish_holding(s, t2, HASHLB_KEY_4TUPLE, NULL, NULL, c, 1);
	st0 = stats(s);
	for (int i = 0; i < 60; i++) {
		/* c's by its slot (its MAC, index 1 in a,c,b), the others where a,e says */
		if (same(first[i], "c"))
			bad += send_pkt(&f[i], &be) != XDP_TX_ || be != 1;
		else if (same(first[i], "b"))
			bad += !same(send_name(t2, &f[i]), table_says(t2, &f[i]));
		else
			bad += !same(send_name(t2, &f[i]), first[i]);
	}
	st1 = stats(s);
	CHECK(bad == 0 && st1.ct_resched - st0.ct_resched == n_b,
	      "c held, b dropped: %u flows wrong; ct_resched %llu, b's %u", bad,
	      (unsigned long long)(st1.ct_resched - st0.ct_resched), n_b);
	/* c added back within its drain (the pool takes it back: held no more): it takes
	 * its own slot again, incarnation and all, and its flows go on to it, at its new
	 * index's MAC, none rescheduled */
	test_publish(s, t_aec, HASHLB_KEY_4TUPLE, NULL);
	st0 = stats(s);
	for (int i = 0; i < 60; i++)
		if (same(first[i], "c"))
			bad += send_pkt(&f[i], &be) != XDP_TX_ || be != 2;
	st1 = stats(s);
	CHECK(bad == 0 && st1.ct_resched == st0.ct_resched,
	      "c added back: %u of its %u flows not on it; ct_resched %llu", bad, n_c,
	      (unsigned long long)(st1.ct_resched - st0.ct_resched));
	test_publish_holding(s, t3, HASHLB_KEY_4TUPLE, NULL, NULL, c, 1);
	st0 = stats(s);
	for (int i = 0; i < 60; i++)
		if (same(first[i], "c"))
			bad += !same(send_name(t3, &f[i]), table_says(t3, &f[i]));
	st1 = stats(s);
	CHECK(bad == 0 && st1.ct_resched - st0.ct_resched == n_c,
	      "c's slot taken by f: %u of c's %u flows not where the table says; ct_resched %llu",
	      bad, n_c, (unsigned long long)(st1.ct_resched - st0.ct_resched));
	printf("held slot: c's %u flows kept while it drained, e taking b's slot (b's %u flows "
	       "rescheduled); f, with no other slot left, took c's: its flows rescheduled\n",
	       n_c, n_b);
	hashlb_table_free(t1);
	hashlb_table_free(t2);
	hashlb_table_free(t3);
	hashlb_table_free(t_aec);
}

/* The table of "a" and "r<k>", then "r0" if <r0>, equal weights. */
static struct hashlb_table *a_and_r(uint32_t k, bool r0)
{
	char name[16];
	const char *names[3] = { "a", name, "r0" };

	snprintf(name, sizeof(name), "r%u", k);
	return build(HASHLB_SCHEME_MAGLEV, names, r0 ? 3 : 2, NULL);
}

/*
 * 4b. A slot given to another backend 255 times (its 8-bit incarnation back
 * where it was) while a flow of its first backend, r0, is idle; r0 is then
 * configured again (in another slot): the flow goes back to r0, as the
 * table says, not to the backend in its old slot now. Before, its entry
 * matched again, and the flow went to that backend (a reset). The
 * slot is fast-forwarded (its incarnation written as ~240 reassignments
 * would leave it, short of the half of the range the flow's entry is in:
 * 510 real publications take half a minute); the rest are real.
 */
static void incarnation_wrap(struct hashlb_steer *s)
{
	static const char *const a_only[] = { "a" };
	struct hashlb_table *ta = build(HASHLB_SCHEME_MAGLEV, a_only, 1, NULL);
	struct hashlb_table *t0 = a_and_r(0, false), *tk;
	struct hlb_steer_stats st0, st1;
	struct hlb_steer_ct_bucket bk;
	struct hlb_steer_backend sb;
	struct test_pkt f, g;
	uint64_t rng = 41;
	uint32_t k, k_last, slot, inc0;
	int be, w;

	hashlb_steer_flows_clear(s);
	test_publish(s, ta, HASHLB_KEY_4TUPLE, NULL); /* every slot but a's free */
	test_publish(s, t0, HASHLB_KEY_4TUPLE, NULL);
	for (slot = 0; bpf_map_lookup_elem(bslots_fd, &slot, &sb) == 0; slot++)
		if (sb.id == hashlb_steer_backend_id("r0"))
			break;
	CHECK(sb.id == hashlb_steer_backend_id("r0"), "r0 has no slot");
	inc0 = sb.incarnation;
	/* The r<k> that will hold the slot at incarnation inc0 again, after
	 * the fast-forward below; a flow on r0 that the table with r<k> and r0
	 * sends to r0 again, and a flow of a (whose slot stays a's). */
	k_last = inc0 < 128 ? 5 + inc0 : inc0 - 123;
	tk = a_and_r(k_last, true);
	do
		flow_init(&f, &rng, 0x0a00000a);
	while (!same(table_says(t0, &f), "r0") || !same(table_says(tk, &f), "r0"));
	do
		flow_init(&g, &rng, 0x0a00000a);
	while (!same(table_says(t0, &g), "a"));
	hashlb_table_free(tk);
	tk = NULL;
	f.tcp_flags = 0x02;
	CHECK(send_pkt(&f, &be) == XDP_TX_ && be == 1, "the flow did not open on r0 (%d)", be);
	f.tcp_flags = 0x10;
	CHECK(send_pkt(&g, &be) == XDP_TX_ && be == 0, "a's flow did not open on a (%d)", be);
	bucket_read(bucket_of(&f), &bk);
	w = way_of(&bk, &f);
	CHECK(w >= 0 && ((uint32_t)bk.way[w] & 0xffffff) == (slot | inc0 << HLB_STEER_CT_INC_SHIFT),
	      "the flow's entry does not name r0's slot %u, incarnation %u", slot, inc0);

	test_publish(s, ta, HASHLB_KEY_4TUPLE, NULL); /* r0's slot freed */
	CHECK(bpf_map_lookup_elem(bslots_fd, &slot, &sb) == 0 && sb.id == 0, "slot %u not freed",
	      slot);
	sb.incarnation = inc0 < 128 ? 250 : 123;
	CHECK(bpf_map_update_elem(bslots_fd, &slot, &sb, BPF_ANY) == 0, "fast-forward");
	/* Each r<k> takes the slot r<k-1> left (the lowest free one); r0
	 * comes back with the last, in another. */
	for (k = 1; k <= k_last; k++) {
		hashlb_table_free(tk);
		tk = a_and_r(k, k == k_last);
		test_publish(s, tk, HASHLB_KEY_4TUPLE, NULL);
		if (k < k_last)
			test_publish(s, ta, HASHLB_KEY_4TUPLE, NULL);
	}
	CHECK(bpf_map_lookup_elem(bslots_fd, &slot, &sb) == 0 && sb.incarnation == inc0 &&
		      sb.id == hashlb_steer_backend_id(hashlb_table_backend_name(tk, 1)),
	      "slot %u: incarnation %u, want %u", slot, sb.incarnation, inc0);

	st0 = stats(s);
	CHECK(send_pkt(&g, &be) == XDP_TX_ && be == 0, "a's flow went to %d", be);
	st1 = stats(s);
	CHECK(st1.ct_hits - st0.ct_hits == 1, "a's flow lost its entry as r0's slot wrapped");
	st0 = st1;
	CHECK(send_pkt(&f, &be) == XDP_TX_ && be == 2,
	      "the idle flow of r0 went to %s by its stale entry after its slot changed hands "
	      "255 times, not to r0, configured again",
	      be == 1	? hashlb_table_backend_name(tk, 1)
	      : be == 0 ? "a"
			: "nowhere");
	st1 = stats(s);
	CHECK(st1.ct_hits == st0.ct_hits, "the stale entry was taken for a hit");
	printf("incarnation wrap: a flow idle while its slot changed hands 255 times went back to "
	       "its backend, not to r%u in its old slot; a's flow kept its entry\n",
	       k_last);
	hashlb_table_free(tk);
	hashlb_table_free(t0);
	hashlb_table_free(ta);
}

/* 5. Tags that match by chance: an entry whose tag equals that of a flow
 * to another address (no VIP) or to another VIP never forwards it there;
 * a flow of the same VIP sharing a tag goes to the entry's backend, a live
 * one (the documented, harmless case). */
static void tag_collision(struct hashlb_steer *s, const struct hashlb_table *t)
{
	struct test_pkt owner, other, same_vip;
	struct hlb_steer_ct_bucket bk;
	uint64_t rng = 23;
	uint32_t b;
	int be, be_owner, w;

	hashlb_steer_flows_clear(s);
	flow_init(&owner, &rng, 0x0a00000a);
	CHECK(send_pkt(&owner, &be_owner) == XDP_TX_, "owner flow not forwarded");

	/* A flow to 10.0.0.99 (no VIP): forge its tag into the owner's way,
	 * moved to its bucket. */
	flow_init(&other, &rng, 0x0a000063);
	b = bucket_of(&owner);
	bucket_read(b, &bk);
	w = way_of(&bk, &owner);
	uint64_t e = bk.way[w];
	struct hlb_steer_ct_bucket ob;

	bucket_read(bucket_of(&other), &ob);
	ob.way[0] = ((uint64_t)tag_of(&other) << HLB_STEER_CT_TAG_SHIFT) | (e & 0xffffffffu);
	bucket_write(bucket_of(&other), &ob);
	CHECK(send_pkt(&other, &be) == XDP_PASS_,
	      "a packet to an address that is no VIP was forwarded by a matching tag");

	/* A flow of the same VIP with a forged shared tag: the entry's backend. */
	/* Another bucket, and a flow the table sends elsewhere. */
	do
		flow_init(&same_vip, &rng, 0x0a00000a);
	while (bucket_of(&same_vip) == bucket_of(&other) ||
	       same(table_says(t, &same_vip), hashlb_table_backend_name(t, (uint32_t)be_owner)));
	bucket_read(bucket_of(&same_vip), &ob);
	ob.way[1] = ((uint64_t)tag_of(&same_vip) << HLB_STEER_CT_TAG_SHIFT) | (e & 0xffffffffu);
	bucket_write(bucket_of(&same_vip), &ob);
	CHECK(send_pkt(&same_vip, &be) == XDP_TX_ && be == be_owner,
	      "a shared tag did not give the entry's backend (%d, want %d)", be, be_owner);
	CHECK(same(send_name(t, &owner), hashlb_table_backend_name(t, (uint32_t)be_owner)),
	      "the owner flow moved");
	printf("tag collision: another address passed, the same VIP on the entry's backend\n");
}

/* Bits 26..30 of the conntrack hash: in neither the bucket index (at most
 * 2^26 buckets) nor the tag. */
static uint32_t ext_of(const struct test_pkt *p)
{
	return (uint32_t)(flow_hash(p) >> 26) & 0x1f;
}

static int key_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The i-th flow of the collision search: 10.128.x.y, ports 1024.., to
 * 10.0.0.10:80, or with <two_vips> every odd one to 10.0.0.20:80. */
static void search_flow(uint32_t i, struct test_pkt *p, bool two_vips)
{
	memset(p, 0, sizeof(*p));
	test_v4(p->src, 0x0a800000u | (i >> 10));
	test_v4(p->dst, two_vips && (i & 1) ? 0x0a000014 : 0x0a00000a);
	p->sport = (uint16_t)(1024 + (i & 1023));
	p->dport = 80;
}

/*
 * Two real flows that share a bucket and a tag (a birthday search: 2^21
 * tuples into 16 buckets x 2^32 tags) but differ in the hash's other bits,
 * or with <two_vips> in their VIP: false when none is found.
 */
static bool colliding_pair(struct test_pkt *a, struct test_pkt *b, bool two_vips)
{
	enum { N = 1 << 21 };
	uint64_t *k = malloc(N * sizeof(*k));
	bool found = false;

	if (!k)
		exit(1);
	for (uint32_t i = 0; i < N; i++) {
		struct test_pkt p;

		search_flow(i, &p, two_vips);
		k[i] = ((uint64_t)tag_of(&p) << 4 | bucket_of(&p)) << 21 | i;
	}
	qsort(k, N, sizeof(*k), key_cmp);
	for (uint32_t i = 1; i < N && !found; i++) {
		if (k[i] >> 21 != k[i - 1] >> 21)
			continue;
		search_flow((uint32_t)(k[i - 1] & (N - 1)), a, two_vips);
		search_flow((uint32_t)(k[i] & (N - 1)), b, two_vips);
		found = two_vips ? memcmp(a->dst, b->dst, 16) != 0 : ext_of(a) != ext_of(b);
	}
	free(k);
	return found;
}

static const char *const abcde[] = { "a", "b", "c", "d", "e" };

/*
 * <live> opens (SYN, then ACK) on the backend a Maglev table of abcde[] gives
 * it; that backend drains (out of the table, its flows kept); <syn>'s SYN
 * follows. Returns <live>'s backend, -1 if it was not forwarded; in
 * *ret_after the backend <live>'s next ACK reaches, in *ret_syn the SYN's.
 */
static int drain_then_syn(struct hashlb_steer *s, struct test_pkt *live, struct test_pkt *syn,
			  int *ret_after, int *ret_syn)
{
	struct hashlb_table *t = build(HASHLB_SCHEME_MAGLEV, abcde, 5, NULL), *td;
	bool down[5] = { false }, drain[5] = { false };
	int x;

	hashlb_steer_flows_clear(s);
	test_publish(s, t, HASHLB_KEY_4TUPLE, NULL);
	live->tcp_flags = 0x02;
	if (send_pkt(live, &x) != XDP_TX_ || x < 0 || x >= 5) {
		hashlb_table_free(t);
		return -1;
	}
	live->tcp_flags = 0x10;
	send_pkt(live, &x);
	down[x] = drain[x] = true;
	td = build(HASHLB_SCHEME_MAGLEV, abcde, 5, down);
	test_publish(s, td, HASHLB_KEY_4TUPLE, drain);
	syn->tcp_flags = 0x02;
	send_pkt(syn, ret_syn);
	if (send_pkt(live, ret_after) != XDP_TX_)
		*ret_after = -1;
	test_publish(s, t, HASHLB_KEY_4TUPLE, NULL);
	hashlb_table_free(t);
	hashlb_table_free(td);
	return x;
}

/*
 * 5b. A SYN that shares by chance the bucket and tag of a live flow on a
 * draining backend is no reused tuple: the live flow keeps its entry and
 * its backend (the SYN follows the entry, consistently with its ACKs).
 * Before, the SYN was scheduled by the table into that way, and the live
 * flow's next packet went to the SYN's backend.
 */
static void syn_collision(struct hashlb_steer *s)
{
	struct test_pkt live, syn;
	int x, got_syn, got_live;

	CHECK(colliding_pair(&live, &syn, false),
	      "no colliding pair found: the test proves nothing");
	/* two flows: of two clients, or of one from two ports (the search's flows
	 * share a source by 1,024: the first pair found did, by chance, once in CI) */
	CHECK(bucket_of(&live) == bucket_of(&syn) && tag_of(&live) == tag_of(&syn) &&
		      (memcmp(live.src, syn.src, 16) != 0 || live.sport != syn.sport),
	      "the pair does not collide");
	x = drain_then_syn(s, &live, &syn, &got_live, &got_syn);
	CHECK(x >= 0 && got_live == x, "a colliding SYN moved the live flow of draining %s to %d",
	      x >= 0 ? abcde[x] : "?", got_live);
	syn.tcp_flags = 0x10;
	CHECK(send_pkt(&syn, &x) == XDP_TX_ && x == got_syn,
	      "the colliding flow's ACK went to %d, its SYN to %d", x, got_syn);
	printf("SYN collision: a SYN sharing a draining flow's bucket and tag left it on its "
	       "backend\n");
}

/*
 * 5c. Flows of two VIPs that share by chance a bucket and a tag (a real pair)
 * each keep an entry of their own: the second VIP's SYN leaves the first's
 * live flow on its draining backend, and both go on by their entries. Before,
 * an entry of another VIP counted as the flow's way: the SYN was scheduled
 * into it, and the live flow's next packet, finding the other VIP's entry,
 * was scheduled again by the table (off its draining backend), each flow
 * taking the way back from the other on its every packet.
 */
static void vip_collision(struct hashlb_steer *s)
{
	static const char *const two[] = { "10.0.0.10:80", "10.0.0.20:80" }, *const one[] = {
		"10.0.0.10:80"
	};
	struct test_pkt live, syn;
	struct hlb_steer_stats st0, st1;
	int x, got_syn, got_live, again;

	CHECK(colliding_pair(&live, &syn, true),
	      "no colliding pair of two VIPs found: the test proves nothing");
	CHECK(bucket_of(&live) == bucket_of(&syn) && tag_of(&live) == tag_of(&syn) &&
		      memcmp(live.dst, syn.dst, 16) != 0,
	      "the pair does not collide across VIPs");
	test_set_vips(s, two, 2);
	x = drain_then_syn(s, &live, &syn, &got_live, &got_syn);
	CHECK(x >= 0 && got_live == x,
	      "another VIP's colliding SYN moved the live flow of draining %s to %d",
	      x >= 0 ? abcde[x] : "?", got_live);
	st0 = stats(s);
	syn.tcp_flags = 0x10;
	CHECK(send_pkt(&syn, &again) == XDP_TX_ && again == got_syn,
	      "the other VIP's flow's ACK went to %d, its SYN to %d", again, got_syn);
	CHECK(send_pkt(&live, &again) == XDP_TX_ && again == got_live,
	      "the live flow's next ACK went to %d, before to %d", again, got_live);
	st1 = stats(s);
	CHECK(st1.ct_hits - st0.ct_hits == 2 && st1.new_flows == st0.new_flows,
	      "two ACKs of two tracked flows: hits %llu, new flows %llu",
	      (unsigned long long)(st1.ct_hits - st0.ct_hits),
	      (unsigned long long)(st1.new_flows - st0.new_flows));
	test_set_vips(s, one, 1);
	printf("VIP collision: flows of two VIPs sharing a bucket and a tag kept an entry each\n");
}

/* The inverse of odd <c> modulo 2^64 (Newton's iteration). */
static uint64_t inverse(uint64_t c)
{
	uint64_t x = c;

	for (int i = 0; i < 5; i++)
		x *= 2 - c * x;
	return x;
}

/*
 * 5c. What a client who knows another flow's tuple could do with a public
 * conntrack hash: compute (no search) an IPv6 source, in the same /64, whose
 * flow hashes exactly as the victim's under the hash without a seed, and
 * send its SYN once the victim's backend drains. The program's own random
 * seed makes the crafted flow collide no more than any other; before (no
 * seed) it shared bucket, tag and ext bits, its SYN was taken for the
 * victim's reused tuple, and the victim moved.
 */
static void crafted_collision(struct hashlb_steer *s)
{
	static const char *const vips[] = { "10.0.0.10:80", "[fd00::10]:80" };
	static const uint64_t c[5] = { 0x9e3779b97f4a7c15ULL, 0xc2b2ae3d27d4eb4fULL,
				       0x165667b19e3779f9ULL, 0xd6e8feb86659fd93ULL,
				       0x27d4eb2f165667c5ULL };
	struct hlb_steer_flow_key kv, ka;
	struct test_pkt victim, attacker;
	uint64_t wv[5], wa[5], x = 0;
	int be, got, got_syn;

	memset(&victim, 0, sizeof(victim));
	victim.v6 = true;
	inet_pton(AF_INET6, "fd01::1:2:3:4", victim.src);
	inet_pton(AF_INET6, "fd00::10", victim.dst);
	victim.sport = 40000;
	victim.dport = 80;
	attacker = victim;
	attacker.sport = 40001;
	memset(&kv, 0, sizeof(kv));
	memcpy(kv.src, victim.src, 16);
	memcpy(kv.dst, victim.dst, 16);
	kv.sport = htons(victim.sport);
	kv.dport = htons(victim.dport);
	ka = kv;
	ka.sport = htons(attacker.sport);
	memcpy(wv, &kv, sizeof(wv));
	memcpy(wa, &ka, sizeof(wa));
	/* w1 (the source's interface id) such that the products' XOR is the victim's */
	for (int i = 0; i < 5; i++)
		x ^= wv[i] * c[i] ^ (i == 1 ? 0 : wa[i] * c[i]);
	wa[1] = x * inverse(c[1]);
	memcpy(attacker.src + 8, &wa[1], 8);
	memcpy(ka.src + 8, &wa[1], 8);
	CHECK(hlb_steer_ct_hash(&ka, 0) == hlb_steer_ct_hash(&kv, 0) &&
		      memcmp(&ka, &kv, sizeof(ka)) != 0,
	      "the crafted flow does not collide under the unseeded hash");

	test_set_vips(s, vips, 2);
	be = drain_then_syn(s, &victim, &attacker, &got, &got_syn);
	CHECK(be >= 0 && got == be,
	      "a SYN crafted to collide moved the victim off draining %s to %d",
	      be >= 0 ? abcde[be] : "?", got);
	printf("crafted collision: an IPv6 source computed to share the victim's unseeded hash "
	       "left it on its backend\n");
	test_set_vips(s, vips, 1);
}

/* 6. Two VIPs; one removed: its flows are passed, the other's keep their
 * backend across a table change (conntrack hits, not the new table). */
static void vip_removal(struct hashlb_steer *s)
{
	static const char *const two[] = { "10.0.0.10:80", "10.0.0.20:443" }, *const only20[] = {
		"10.0.0.20:443"
	};
	static const char *const five[] = { "a", "b", "c", "d", "e" }, *const six[] = { "z", "a",
											"b", "c",
											"d", "e" };
	struct hashlb_table *t5 = build(HASHLB_SCHEME_RING, five, 5, NULL);
	struct hashlb_table *t6 = build(HASHLB_SCHEME_RING, six, 6, NULL);
	struct test_pkt f10[100], f20[100];
	const char *first[100];
	uint64_t rng = 31;
	uint32_t bad = 0, passed = 0, moved = 0;
	int be;

	test_set_vips(s, two, 2);
	hashlb_steer_flows_clear(s);
	test_publish(s, t5, HASHLB_KEY_4TUPLE, NULL);
	for (int i = 0; i < 100; i++) {
		flow_init(&f10[i], &rng, 0x0a00000a);
		flow_init(&f20[i], &rng, 0x0a000014);
		f20[i].dport = 443;
		CHECK(send_pkt(&f10[i], &be) == XDP_TX_, "VIP 1 flow not forwarded");
		first[i] = send_name(t5, &f20[i]);
	}
	test_set_vips(s, only20, 1);
	test_publish(s, t6, HASHLB_KEY_4TUPLE, NULL);
	for (int i = 0; i < 100; i++) {
		passed += send_pkt(&f10[i], &be) == XDP_PASS_;
		moved += !same(table_says(t6, &f20[i]), first[i]);
		bad += !same(send_name(t6, &f20[i]), first[i]);
	}
	CHECK(passed == 100, "%u of 100 flows of the removed VIP passed", passed);
	CHECK(moved > 0, "the new table moves no flow: the test proves nothing");
	CHECK(bad == 0, "%u flows of the VIP still served changed backend", bad);
	printf("VIP removal: its flows passed, the other VIP's %u flows kept (%u would have "
	       "moved)\n",
	       100 - bad, moved);
	hashlb_table_free(t5);
	hashlb_table_free(t6);
}

/* The i-th VIP of a set: IPv4 for even i, IPv6 for odd, a port each. */
static void vip_name(int set, int i, char *buf, size_t len)
{
	if (i % 2 == 0)
		snprintf(buf, len, "10.%d.0.%d:%d", set, i + 1, 8000 + i);
	else
		snprintf(buf, len, "[fd%02x::%x]:%d", set, i + 1, 8000 + i);
}

static void vip_flow(int set, int i, struct test_pkt *p, uint64_t *rng)
{
	uint64_t r = test_rand(rng);

	memset(p, 0, sizeof(*p));
	if (i % 2 == 0) {
		test_v4(p->src, (uint32_t)r);
		test_v4(p->dst, 0x0a000000u | (uint32_t)set << 16 | (uint32_t)(i + 1));
	} else {
		p->v6 = true;
		p->src[0] = 0xfd;
		p->src[1] = 0x99;
		memcpy(p->src + 8, &r, 8);
		p->dst[0] = 0xfd;
		p->dst[1] = (uint8_t)set;
		p->dst[15] = (uint8_t)(i + 1);
	}
	p->sport = (uint16_t)(r >> 48) | 1024;
	p->dport = (uint16_t)(8000 + i);
	p->tcp_flags = 0x10;
}

/* 7. The VIP table full (16 VIPs, IPv4 and IPv6: 32 keys with the address
 * markers), then half replaced: every VIP's flows forwarded; the VIPs kept
 * keep their index, so their flows stay on their backends across a table
 * change; the removed ones' flows are passed; the new ones' scheduled. */
static void vip_table(struct hashlb_steer *s)
{
	static const char *const five[] = { "a", "b", "c", "d", "e" }, *const six[] = { "z", "a",
											"b", "c",
											"d", "e" };
	enum { NV = 16, PER = 8 };
	struct hashlb_table *t5 = build(HASHLB_SCHEME_MAGLEV, five, 5, NULL);
	struct hashlb_table *t6 = build(HASHLB_SCHEME_MAGLEV, six, 6, NULL);
	char names1[NV][64], names2[NV][64];
	const char *set1[NV], *set2[NV];
	struct test_pkt f1[NV][PER], f2[NV / 2][PER];
	const char *first[NV][PER];
	uint32_t bad = 0, passed = 0, moved = 0, fresh = 0;
	uint64_t rng = 53;
	int be;

	for (int i = 0; i < NV; i++) {
		vip_name(1, i, names1[i], sizeof(names1[i]));
		set1[i] = names1[i];
		/* Set 2: the first half of set 1, then 8 new VIPs. */
		if (i < NV / 2) {
			set2[i] = names1[i];
		} else {
			vip_name(2, i - NV / 2, names2[i], sizeof(names2[i]));
			set2[i] = names2[i];
		}
	}
	test_set_vips(s, set1, NV);
	hashlb_steer_flows_clear(s);
	test_publish(s, t5, HASHLB_KEY_4TUPLE, NULL);
	for (int i = 0; i < NV; i++) {
		for (int k = 0; k < PER; k++) {
			vip_flow(1, i, &f1[i][k], &rng);
			first[i][k] = send_name(t5, &f1[i][k]);
			bad += !same(first[i][k], table_says(t5, &f1[i][k]));
		}
	}
	CHECK(bad == 0, "%u flows of 16 VIPs not forwarded by the table", bad);
	test_set_vips(s, set2, NV);
	test_publish(s, t6, HASHLB_KEY_4TUPLE, NULL);
	bad = 0;
	for (int i = 0; i < NV; i++) {
		for (int k = 0; k < PER; k++) {
			if (i >= NV / 2) {
				passed += send_pkt(&f1[i][k], &be) == XDP_PASS_;
				continue;
			}
			moved += !same(table_says(t6, &f1[i][k]), first[i][k]);
			bad += !same(send_name(t6, &f1[i][k]), first[i][k]);
		}
	}
	for (int i = 0; i < NV / 2; i++) {
		for (int k = 0; k < PER; k++) {
			vip_flow(2, i, &f2[i][k], &rng);
			fresh += same(send_name(t6, &f2[i][k]), table_says(t6, &f2[i][k]));
		}
	}
	CHECK(moved > 0, "the new table moves no flow: the test proves nothing");
	CHECK(bad == 0, "%u flows of kept VIPs changed backend when the VIP set changed", bad);
	CHECK(passed == NV / 2 * PER, "%u of %d flows of removed VIPs passed", passed,
	      NV / 2 * PER);
	CHECK(fresh == NV / 2 * PER, "%u of %d flows of new VIPs forwarded by the table", fresh,
	      NV / 2 * PER);
	printf("VIP table: 16 VIPs (32 keys), 8 replaced: kept VIPs' flows stayed (%u would have "
	       "moved), removed ones' passed, new ones' scheduled\n",
	       moved);
	hashlb_table_free(t5);
	hashlb_table_free(t6);
}

/* The VIP mix (hlb_steer_vip_mix) of <p>'s destination. */
static uint64_t vip_mix_of(const struct test_pkt *p)
{
	uint64_t a0, a1;

	memcpy(&a0, p->dst, 8);
	memcpy(&a1, p->dst + 8, 8);
	return hlb_steer_vip_mix(a0, a1, htons(p->dport));
}

static uint32_t vip_home(const struct test_pkt *p)
{
	return (uint32_t)(vip_mix_of(p) >> 56);
}

/* <port>[0] and the next two ports after it of address <addr> with the same
 * home slot in <port>[1..2]; that home. */
static uint32_t ports_of_home(uint32_t addr, uint16_t port[3])
{
	struct test_pkt p = { 0 };
	uint32_t home;
	int found = 1;

	test_v4(p.dst, addr);
	p.dport = port[0];
	home = vip_home(&p);
	for (uint32_t q = port[0] + 1u; q < 65535 && found < 3; q++) {
		p.dport = (uint16_t)q;
		if (vip_home(&p) == home)
			port[found++] = (uint16_t)q;
	}
	CHECK(found == 3, "no three ports with one home slot");
	return home;
}

/* 8. Three ports of one address with the same home slot: the second is
 * placed past the first. The first removed and the third added, the second
 * keeps its slot (a layout made anew from the list, which names it first,
 * would move it to its home, and its flows would fail the VIP check and be
 * rescheduled by the new table). */
static void vip_probing(struct hashlb_steer *s)
{
	static const char *const five[] = { "a", "b", "c", "d", "e" }, *const six[] = { "z", "a",
											"b", "c",
											"d", "e" };
	enum { PER = 60 };
	struct hashlb_table *t5 = build(HASHLB_SCHEME_MAGLEV, five, 5, NULL);
	struct hashlb_table *t6 = build(HASHLB_SCHEME_MAGLEV, six, 6, NULL);
	uint16_t port[3] = { 1000, 0, 0 };
	char n[3][32];
	struct test_pkt f[PER];
	const char *first[PER];
	uint32_t bad = 0, moved = 0;
	uint64_t rng = 59;

	ports_of_home(0x0a030001, port);
	for (int i = 0; i < 3; i++)
		snprintf(n[i], sizeof(n[i]), "10.3.0.1:%u", port[i]);
	const char *set_a[] = { n[0], n[1] }, *set_b[] = { n[1], n[2] };

	test_set_vips(s, set_a, 2);
	hashlb_steer_flows_clear(s);
	test_publish(s, t5, HASHLB_KEY_4TUPLE, NULL);
	for (int i = 0; i < PER; i++) {
		flow_init(&f[i], &rng, 0x0a030001);
		f[i].dport = port[1];
		first[i] = send_name(t5, &f[i]);
		bad += first[i] == NULL;
	}
	/* Found past its home slot: the home's probe count covers it. */
	CHECK(bad == 0, "%u new flows of the VIP past its home slot not forwarded", bad);
	test_set_vips(s, set_b, 2);
	test_publish(s, t6, HASHLB_KEY_4TUPLE, NULL);
	for (int i = 0; i < PER; i++) {
		moved += !same(table_says(t6, &f[i]), first[i]);
		bad += !same(send_name(t6, &f[i]), first[i]);
	}
	CHECK(moved > 0, "the new table moves no flow: the test proves nothing");
	CHECK(bad == 0,
	      "%u flows of a VIP past its home slot changed backend when the VIP "
	      "before it was replaced",
	      bad);
	printf("VIP probing: a VIP placed past its home slot keeps its index when the one "
	       "before it goes (%u flows would have moved)\n",
	       moved);
	hashlb_table_free(t5);
	hashlb_table_free(t6);
}

/*
 * 8b. A VIP stored past its home slot: its established flows are matched by
 * the entry's VIP index, which one lookup confirms (the program no longer
 * probes for the VIP on every packet). The entry of a flow to it goes by
 * that entry; one with its tag that names the VIP at the home slot (another
 * port) does not, the flow is scheduled by the table; and a packet to a port
 * of the same home that is no VIP, an entry with its tag naming the far
 * VIP's index, is passed.
 */
static void vip_far_entry(struct hashlb_steer *s)
{
	struct hashlb_table *t = build(HASHLB_SCHEME_MAGLEV, abcde, 5, NULL);
	struct test_pkt f, g, nv;
	struct hlb_steer_ct_bucket bk;
	struct hlb_steer_stats st0, st1;
	uint16_t port[3] = { 2000, 0, 0 };
	uint32_t home, vfar, bf;
	uint64_t rng = 61, ef = 0, eg = 0;
	char n[2][32];
	int x, y, got, w;

	home = ports_of_home(0x0a030002, port);
	snprintf(n[0], sizeof(n[0]), "10.3.0.2:%u", port[0]);
	snprintf(n[1], sizeof(n[1]), "10.3.0.2:%u", port[1]);
	const char *vips[] = { n[0], n[1] };

	test_set_vips(s, vips, 2);
	hashlb_steer_flows_clear(s);
	test_publish(s, t, HASHLB_KEY_4TUPLE, NULL);
	/* f and g to the far VIP, on two backends */
	flow_init(&f, &rng, 0x0a030002);
	f.dport = port[1];
	CHECK(send_pkt(&f, &x) == XDP_TX_, "a new flow of the VIP past its home not forwarded");
	do {
		flow_init(&g, &rng, 0x0a030002);
		g.dport = port[1];
		CHECK(send_pkt(&g, &y) == XDP_TX_,
		      "a new flow of the VIP past its home not forwarded");
	} while (y == x);
	bf = bucket_of(&f);
	bucket_read(bf, &bk);
	w = way_of(&bk, &f);
	CHECK(w >= 0, "no entry for the far VIP's flow");
	ef = w >= 0 ? bk.way[w] : 0;
	vfar = (uint32_t)(ef >> HLB_STEER_CT_VIP_SHIFT) & 0xff;
	CHECK(vfar != home, "the second VIP of one home is at its home slot: the test proves "
			    "nothing");
	bucket_read(bucket_of(&g), &bk);
	if (way_of(&bk, &g) >= 0)
		eg = bk.way[way_of(&bk, &g)];
	st0 = stats(s);
	CHECK(send_pkt(&f, &got) == XDP_TX_ && got == x, "the far VIP's flow moved: %d, was %d",
	      got, x);
	st1 = stats(s);
	CHECK(st1.ct_hits - st0.ct_hits == 1 && st1.new_flows == st0.new_flows,
	      "the far VIP's established flow was not a conntrack hit");

	/* f's way names g's backend: by its VIP's index, it goes there */
	bucket_read(bf, &bk);
	bk.way[w] = (ef & ~0xffffffffull) | (eg & 0x00ffffffull) |
		    (uint64_t)vfar << HLB_STEER_CT_VIP_SHIFT;
	bucket_write(bf, &bk);
	CHECK(send_pkt(&f, &got) == XDP_TX_ && got == y,
	      "an entry naming the far VIP's index was not followed: %d, want %d", got, y);
	/* ... by the index of the VIP at the home slot: not f's, scheduled */
	bucket_read(bf, &bk);
	bk.way[w] = (ef & ~0xffffffffull) | (eg & 0x00ffffffull) |
		    (uint64_t)home << HLB_STEER_CT_VIP_SHIFT;
	bucket_write(bf, &bk);
	st0 = stats(s);
	CHECK(send_pkt(&f, &got) == XDP_TX_ && got == x,
	      "an entry naming the home slot's VIP sent the far VIP's flow to %d, want %d", got, x);
	st1 = stats(s);
	CHECK(st1.new_flows - st0.new_flows == 1, "that flow was not scheduled anew");

	/* a port of that home that is no VIP, its tag in a way naming the far VIP */
	flow_init(&nv, &rng, 0x0a030002);
	nv.dport = port[2];
	bucket_read(bucket_of(&nv), &bk);
	bk.way[0] = (uint64_t)tag_of(&nv) << HLB_STEER_CT_TAG_SHIFT | (eg & 0x00ffffffull) |
		    (uint64_t)vfar << HLB_STEER_CT_VIP_SHIFT;
	bucket_write(bucket_of(&nv), &bk);
	CHECK(send_pkt(&nv, &got) == XDP_PASS_,
	      "a packet to a port that is no VIP was forwarded by an entry naming a VIP");
	printf("VIP past its home: its flows go by their entry's VIP index (slot %u, home %u); "
	       "an entry naming another VIP, or a port that is none, not followed\n",
	       vfar, home);
	hashlb_table_free(t);
}

static int map_of(int prog_fd, const char *name);

/*
 * 8c. Eight VIPs of one home slot (the most a home holds: seven stored past
 * it), and 40 ports of that home that are none: each VIP's new flows are
 * forwarded and their next packets are conntrack hits, each other port is
 * passed; the home slot's absent names the bits no key past it has, so that
 * the others whose bit it is are passed before the conntrack lookup (before,
 * it was padding, 0, and every one was looked up). Then absent cleared, as
 * an older hashlb's loader leaves it: the same, every packet looked up. And
 * the program reads it: all set, the VIPs past home are passed.
 */
static void vip_absent(struct hashlb_steer *s)
{
	enum { OTHERS = 40 };
	struct hashlb_table *t = build(HASHLB_SCHEME_MAGLEV, abcde, 5, NULL);
	struct test_pkt p = { 0 }, f;
	struct hlb_steer_stats st0, st1;
	struct hlb_steer_vip hv;
	uint16_t vport[HLB_STEER_VIP_PROBES], oport[OTHERS];
	char n[HLB_STEER_VIP_PROBES][32];
	const char *vips[HLB_STEER_VIP_PROBES];
	uint32_t nv = 0, no = 0, home, key, active = 0, zero = 0, present = 0, cut = 0;
	uint64_t rng = 67;
	int vips_fd = map_of(fd, "hlb_vips"), active_fd = map_of(fd, "hlb_active"), got;

	test_v4(p.dst, 0x0a030003);
	p.dport = 3000;
	home = vip_home(&p);
	for (uint32_t q = 3000; q < 65535 && no < OTHERS; q++) {
		p.dport = (uint16_t)q;
		if (vip_home(&p) != home)
			continue;
		if (nv < HLB_STEER_VIP_PROBES) {
			/* stored in order: the first at home, the rest past it */
			present |= nv ? 1u << hlb_steer_vip_bit(vip_mix_of(&p)) : 0;
			vport[nv] = (uint16_t)q;
			snprintf(n[nv], sizeof(n[nv]), "10.3.0.3:%u", q);
			vips[nv] = n[nv];
			nv++;
		} else {
			oport[no++] = (uint16_t)q;
		}
	}
	CHECK(no == OTHERS, "no %d ports of one home", HLB_STEER_VIP_PROBES + OTHERS);
	test_set_vips(s, vips, nv);
	hashlb_steer_flows_clear(s);
	test_publish(s, t, HASHLB_KEY_4TUPLE, NULL);
	bpf_map_lookup_elem(active_fd, &zero, &active);
	key = ((active >> 1) & 1) * HLB_STEER_VIP_SLOTS + home;
	CHECK(bpf_map_lookup_elem(vips_fd, &key, &hv) == 0 && hv.probes == HLB_STEER_VIP_PROBES &&
		      hv.absent == (uint8_t)~present,
	      "the home slot: probes %u, absent %02x, want %u and %02x", hv.probes, hv.absent,
	      HLB_STEER_VIP_PROBES, (uint8_t)~present);
	for (uint32_t i = 0; i < no; i++) {
		p.dport = oport[i];
		cut += (hv.absent >> hlb_steer_vip_bit(vip_mix_of(&p))) & 1;
	}
	CHECK(cut > 0 && cut < no, "%u of %u other ports cut by absent: the test proves nothing",
	      cut, no);
	for (int pass = 0; pass < 2; pass++) {
		uint32_t bad = 0;

		st0 = stats(s);
		for (uint32_t i = 0; i < nv; i++) {
			flow_init(&f, &rng, 0x0a030003);
			f.dport = vport[i];
			f.tcp_flags = 0x02;
			bad += send_pkt(&f, &got) != XDP_TX_;
			f.tcp_flags = 0x10;
			bad += send_pkt(&f, &got) != XDP_TX_;
		}
		for (uint32_t i = 0; i < no; i++) {
			flow_init(&f, &rng, 0x0a030003);
			f.dport = oport[i];
			bad += send_pkt(&f, &got) != XDP_PASS_;
		}
		st1 = stats(s);
		CHECK(bad == 0 && st1.new_flows - st0.new_flows == nv &&
			      st1.ct_hits - st0.ct_hits == nv && st1.passed - st0.passed == no,
		      "%s: %u packets wrong; of %u VIPs, new flows %llu, hits %llu; of %u others, "
		      "passed %llu",
		      pass ? "absent cleared" : "absent set", bad, nv,
		      (unsigned long long)(st1.new_flows - st0.new_flows),
		      (unsigned long long)(st1.ct_hits - st0.ct_hits), no,
		      (unsigned long long)(st1.passed - st0.passed));
		/* as an older hashlb's loader writes it */
		hv.absent = 0;
		CHECK(bpf_map_update_elem(vips_fd, &key, &hv, BPF_ANY) == 0, "absent cleared");
	}
	/* The program reads it: absent saying every bit is clear (wrongly),
	 * the VIPs past home are taken for none and passed; the one at home
	 * is still matched first. */
	hv.absent = 0xff;
	CHECK(bpf_map_update_elem(vips_fd, &key, &hv, BPF_ANY) == 0, "absent all set");
	flow_init(&f, &rng, 0x0a030003);
	f.dport = vport[HLB_STEER_VIP_PROBES - 1];
	CHECK(send_pkt(&f, &got) == XDP_PASS_, "absent 0xff: a VIP past its home not passed");
	f.dport = vport[0];
	CHECK(send_pkt(&f, &got) == XDP_TX_, "absent 0xff: the VIP at home not forwarded");
	printf("VIP absent bits: 8 VIPs of one home served, 40 other ports of that home passed, "
	       "%u of them before the conntrack lookup; the same with absent 0 (an older "
	       "loader's)\n",
	       cut);
	close(vips_fd);
	close(active_fd);
	hashlb_table_free(t);
}

/* 7. Far more flows than entries, rounds of all of them, a table change and
 * a backend down between rounds: every packet forwarded, none to a down
 * backend, the evicted flows rescheduled by the table. */
static void overload(struct hashlb_steer *s)
{
	static const char *const names[] = { "a", "b", "c", "d", "e", "f" };
	enum { N = 3000, ROUNDS = 4 };
	static struct test_pkt f[N];
	bool down[6] = { false, false, true, false, false, false };
	struct hashlb_table *up = build(HASHLB_SCHEME_MAGLEV, names, 6, NULL);
	struct hashlb_table *dn = build(HASHLB_SCHEME_MAGLEV, names, 6, down);
	struct hlb_steer_stats st0, st1;
	uint64_t rng = 41;
	uint32_t bad = 0, to_down = 0;
	int be;

	hashlb_steer_flows_clear(s);
	for (int i = 0; i < N; i++)
		flow_init(&f[i], &rng, 0x0a00000a);
	st0 = stats(s);
	for (int r = 0; r < ROUNDS; r++) {
		const struct hashlb_table *t = r % 2 ? dn : up;

		test_publish(s, t, HASHLB_KEY_4TUPLE, NULL);
		for (int i = 0; i < N; i++) {
			bad += send_pkt(&f[i], &be) != XDP_TX_;
			to_down += t == dn && be == 2;
		}
	}
	st1 = stats(s);
	CHECK(bad == 0, "%u packets not forwarded", bad);
	CHECK(to_down == 0, "%u packets sent to the down backend", to_down);
	CHECK(st1.ct_evicted - st0.ct_evicted > N, "only %llu evictions: the table was not full",
	      (unsigned long long)(st1.ct_evicted - st0.ct_evicted));
	printf("overload: %d flows in %u entries, %llu evictions, no packet to a down backend\n", N,
	       n_buckets * HLB_STEER_CT_WAYS,
	       (unsigned long long)(st1.ct_evicted - st0.ct_evicted));
	hashlb_table_free(up);
	hashlb_table_free(dn);
}

/* Load the programs with <flows> conntrack entries, serving 10.0.0.10:80
 * with <t>; make them the ones the tests run. */
/* A file descriptor of program <prog_fd>'s map <name>. */
static int map_of(int prog_fd, const char *name)
{
	int m = test_map_of(prog_fd, name);

	if (m >= 0)
		return m;
	fprintf(stderr, "no map %s\n", name);
	exit(1);
}

/* <max_backends>: 0 for the default */
static struct hashlb_steer *load(uint32_t flows, uint32_t max_backends,
				 const struct hashlb_table *t)
{
	static const char *const vips[] = { "10.0.0.10:80" };
	struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY,
				       .flows = flows,
				       .max_backends = max_backends };
	struct bpf_map_info mi;
	uint32_t mlen = sizeof(mi);
	struct hashlb_steer *s = test_steer_load_opts(&o, NULL);
	fd = hashlb_steer_prog_fd(s, HASHLB_STEER_PROG_XDP);
	ct_fd = hashlb_steer_ct_fd(s);
	memset(&mi, 0, sizeof(mi));
	if (bpf_obj_get_info_by_fd(ct_fd, &mi, &mlen) < 0)
		exit(1);
	n_buckets = mi.max_entries;
	ct_seed = hashlb_steer_ct_seed(s);
	bslots_fd = map_of(fd, "hlb_bslots");
	test_set_vips(s, vips, 1);
	test_publish(s, t, HASHLB_KEY_4TUPLE, NULL);
	return s;
}

int main(void)
{
	static const char *const names[] = { "a", "b", "c", "d", "e" };
	struct hashlb_table *t = build(HASHLB_SCHEME_MAGLEV, names, 5, NULL);
	struct hashlb_table *t3 = build(HASHLB_SCHEME_MAGLEV, names, 3, NULL);
	struct hashlb_steer *s;

	/* A few buckets: sets fill with a handful of flows. */
	s = load(FLOWS_SMALL, 0, t);
	CHECK(n_buckets == 16, "--flows %d gave %u buckets, want 16", FLOWS_SMALL, n_buckets);
	eviction(s);
	evict_closing(s);
	ct_wrap(s);
	reset(s, t);
	syn_collision(s);
	vip_collision(s);
	overload(s);
	hashlb_steer_free(s);

	/* The default size: no eviction gets in the way. */
	s = load(0, 0, t);
	CHECK(n_buckets * HLB_STEER_CT_WAYS >= 65536, "default size %u buckets", n_buckets);
	closing(s);
	half_open(s, t);
	older_layout(s, t);
	tag_collision(s, t);
	crafted_collision(s);
	incarnation(s, false);
	incarnation_wrap(s);
	vip_removal(s);
	vip_table(s);
	vip_probing(s);
	vip_far_entry(s);
	vip_absent(s);
	hashlb_steer_free(s);

	/* 3 backend slots: a table's new backends take the slots of those it
	 * drops */
	s = load(0, 3, t3);
	incarnation(s, true);
	newcomer_wait(s);
	held_slot(s);
	hashlb_steer_free(s);
	hashlb_table_free(t3);
	hashlb_table_free(t);
	if (!test_failures && not_run) {
		printf("SKIP: %s (every other check passed)\n", not_run);
		return 77;
	}
	return test_failures ? 1 : 0;
}
