// SPDX-License-Identifier: MIT
/*
 * What a publication costs in bpf() calls: the loader reads the backend
 * slots and writes the table's arrays a batch of elements a call
 * (BPF_MAP_LOOKUP_BATCH, BPF_MAP_UPDATE_BATCH), not one call an element.
 * 5,000 backends (more than one batch) in a program of 10,000 slots: a
 * Maglev table (M 65,537: 16,385 values), then a ring of 2,500 of them and
 * 2,500 others (20,000 points); each steers random new flows as the table
 * says, so the batches wrote what they had to. The calls are counted
 * through syscall(), which libbpf makes each one with: deterministic.
 * Then tables that take one backend out, the next one each time, as health
 * checks do: each publication writes only the elements that differ from
 * what the half it goes into holds (the table before the last), far fewer
 * than the whole half, and steers as its table says.
 * Then two loaders of one program, as across an upgrade (the old process
 * publishes until the new one, which found the program and published, says
 * it is ready): each one's tables steer as they say, though the other wrote
 * the half it writes since it last did.
 * Then two at the same moment, as side by side (both processes publish until
 * the old one is stopped): one publishes from inside the other's window,
 * between its half written and its flip (its abort hook). It waits for the
 * lock the other holds, and is refused after 2 s, its holder named; the
 * other's table is in force, every flow's ACK goes where its SYN went, and
 * the one refused goes in once the other is done. Before, it went in there:
 * the half in force named its backends, the slots the other's.
 */
#include <dlfcn.h>
#include <net/if.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "helpers.h"

#define N_BACKENDS 5000
#define MAX_BACKENDS 10000
/* A few dozen calls: one a batch of 4,096 elements, and the flips. Before,
 * one an element: 46,389 for the Maglev table, 115,540 for the ring, 515
 * for the VIPs (two halves of 256 slots). */
#define MAX_CALLS 100

static unsigned long bpf_calls, bpf_elements; /* BPF_MAP_UPDATE_BATCH's */
/* The next BPF_OBJ_GET_INFO_BY_FD fails with this errno (0: none does). */
static int info_fails;

/* Count the bpf() calls, then make each call with glibc's syscall(), passed
 * six arguments as the kernel takes them (the unused ones ignored). */
long syscall(long nr, ...)
{
	static long (*real)(long, ...);
	long a[6];
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (!real)
		real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	if (nr == __NR_bpf)
		bpf_calls++;
	if (nr == __NR_bpf && a[0] == BPF_MAP_UPDATE_BATCH)
		bpf_elements += ((const union bpf_attr *)a[1])->batch.count;
	if (nr == __NR_bpf && a[0] == BPF_OBJ_GET_INFO_BY_FD && info_fails) {
		errno = info_fails;
		info_fails = 0;
		return -1;
	}
	return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* Backends b<first>..b<first + N_BACKENDS - 1>, weight 1, the <down>th out
 * of the table (none if N_BACKENDS or more). */
static struct hashlb_table *big_table_down(enum hashlb_scheme scheme, uint64_t seed, uint32_t first,
					   uint32_t down)
{
	static char names[N_BACKENDS][16];
	static struct hashlb_backend_spec spec[N_BACKENDS];
	struct hashlb_table_params p;
	struct hashlb_table *t;
	struct hashlb_error err = { 0 };

	hashlb_table_params_init(&p, scheme);
	p.seed = seed;
	p.ring_v = 4;
	for (uint32_t i = 0; i < N_BACKENDS; i++) {
		snprintf(names[i], sizeof(names[i]), "b%u", first + i);
		spec[i] = (struct hashlb_backend_spec){ .name = names[i],
							.weight = 1,
							.down = i == down };
	}
	if (hashlb_table_build(&p, spec, N_BACKENDS, &t, &err) < 0) {
		fprintf(stderr, "table build: %s\n", err.msg);
		exit(1);
	}
	return t;
}

static struct hashlb_table *big_table(enum hashlb_scheme scheme, uint64_t seed, uint32_t first)
{
	return big_table_down(scheme, seed, first, N_BACKENDS);
}

/* Publish <t>, count its calls, and send new flows through it. */
static void check_publish(struct hashlb_steer *s, struct hashlb_table *t, uint64_t seed)
{
	int fd = hashlb_steer_prog_fd(s, HASHLB_STEER_PROG_XDP);
	const char *scheme = hashlb_scheme_name(hashlb_table_params(t)->scheme);
	uint64_t rng = seed;
	unsigned long calls;
	uint32_t wrong;

	bpf_calls = 0;
	test_publish(s, t, HASHLB_KEY_4TUPLE, NULL);
	calls = bpf_calls;
	hashlb_steer_flows_clear(s);
	wrong = test_off_table(fd, t, seed, &rng, 20000);
	printf("%s, %u backends: %lu bpf() calls to publish; %u of 20000 new flows off the "
	       "table\n",
	       scheme, N_BACKENDS, calls, wrong);
	CHECK(calls > 0, "%s: no bpf() call counted: libbpf no longer makes them by syscall()",
	      scheme);
	CHECK(calls < MAX_CALLS, "%s: %lu bpf() calls, one an element", scheme, calls);
	CHECK(wrong == 0, "%s: %u new flows not where the table sends them", scheme, wrong);
}

/* Publish <t> into <s>, as a program whose halves' contents it does not know
 * (<whole>) or as one that does; the elements written; every new flow checked. */
static unsigned long publish_counted(struct hashlb_steer *s, struct hashlb_table *t, uint64_t seed,
				     bool whole)
{
	int fd = hashlb_steer_prog_fd(s, HASHLB_STEER_PROG_XDP);
	uint64_t rng = seed;
	uint32_t wrong;

	if (whole)
		hashlb_steer_tables_unknown(s);
	bpf_elements = 0;
	test_publish(s, t, HASHLB_KEY_4TUPLE, NULL);
	hashlb_steer_flows_clear(s);
	wrong = test_off_table(fd, t, seed, &rng, 5000);
	CHECK(wrong == 0, "%s: %u new flows not where the table sends them",
	      hashlb_scheme_name(hashlb_table_params(t)->scheme), wrong);
	return bpf_elements;
}

/* Each publication writes every backend's value twice (its half's, then its
 * slot's): the table's arrays are the rest. */
#define BACKEND_WRITES (2ul * N_BACKENDS)

/* Backend k out of the table, k = 0..5: each publication after the first two
 * writes less than <most> of the table's arrays that the whole half takes (the
 * same table written whole, into a program that knows nothing of its
 * halves). */
static void check_one_down(struct hashlb_steer *s, enum hashlb_scheme scheme, double most)
{
	const char *name = hashlb_scheme_name(scheme);
	unsigned long kept[6], whole = 0;

	for (uint32_t k = 0; k < 6; k++) {
		struct hashlb_table *t = big_table_down(scheme, 33, 0, k);

		kept[k] = publish_counted(s, t, 33, false) - BACKEND_WRITES;
		if (k == 5)
			whole = publish_counted(s, t, 33, true) - BACKEND_WRITES;
		hashlb_table_free(t);
	}
	printf("%s, one backend out, the next each time: %lu, %lu, %lu, %lu table elements "
	       "written; the whole half %lu\n",
	       name, kept[2], kept[3], kept[4], kept[5], whole);
	for (uint32_t k = 2; k < 6; k++)
		CHECK(kept[k] < most * (double)whole,
		      "%s: %lu elements written of %lu, the whole half", name, kept[k], whole);
}

#define IFACE "hlbpub0"

/* Publish <t> (seed <seed>) with <s>, and the number of 5,000 new flows, run
 * through <prog_fd>, that do not go where <t> says. */
static uint32_t publish_off(struct hashlb_steer *s, int prog_fd, struct hashlb_table *t,
			    uint64_t seed)
{
	uint64_t rng = seed;

	test_publish(s, t, HASHLB_KEY_4TUPLE, NULL);
	hashlb_steer_flows_clear(s);
	return test_off_table(prog_fd, t, seed, &rng, 5000);
}

/*
 * <a> attached the program on IFACE, <b> found it (the new process of an
 * upgrade). a: t0 (half 1, then 0), t1 (half 1); b: u (half 0, whole: it
 * knows nothing of it); a: t2 (half 1, as a wrote it), t0 (half 0, which
 * holds u, not the t0 a wrote there); b: u (half 1), t1 (half 0, which holds
 * t0, not the u b wrote there). Each steers 5,000 new flows as it says.
 */
static void check_two_loaders(void)
{
	struct hashlb_steer_opts o = { .iface = IFACE,
				       .mode = HASHLB_STEER_XDP_GENERIC,
				       .max_backends = 16 };
	static const char *const names[] = { "a", "b", "c", "d", "e", "f", "g", "h" };
	static const char *const vips[] = { "10.0.0.10:80" };
	static const bool down1[8] = { [1] = true }, down2[8] = { [2] = true };
	struct hashlb_table *t0 = test_table(HASHLB_SCHEME_MAGLEV, 1, names, 8, NULL);
	struct hashlb_table *t1 = test_table(HASHLB_SCHEME_MAGLEV, 1, names, 8, down1);
	struct hashlb_table *t2 = test_table(HASHLB_SCHEME_MAGLEV, 1, names, 8, down2);
	struct hashlb_table *u = test_table(HASHLB_SCHEME_MAGLEV, 7, names, 8, NULL);
	struct hashlb_error err = { 0 };
	struct hashlb_steer *a, *b;
	uint32_t off[6];
	int fd;

	test_netns_veth(IFACE, "hlbpub1");
	a = test_steer_load_opts(&o, t0);
	fd = hashlb_steer_prog_fd(a, HASHLB_STEER_PROG_XDP);
	test_publish(a, t0, HASHLB_KEY_4TUPLE, NULL); /* a table before the VIP */
	test_set_vips(a, vips, 1);
	off[0] = publish_off(a, fd, t0, 1);
	off[1] = publish_off(a, fd, t1, 1);
	if (hashlb_steer_find(IFACE, HASHLB_STEER_AUTO, &b, &err) < 0) {
		fprintf(stderr, "finding the program: %s\n", err.msg);
		exit(1);
	}
	off[2] = publish_off(b, fd, u, 7);
	off[3] = publish_off(a, fd, t2, 1);
	off[4] = publish_off(a, fd, t0, 1);
	publish_off(b, fd, u, 7);
	off[5] = publish_off(b, fd, t1, 1);
	printf("two loaders: %u, %u, %u, %u, %u, %u of 5000 new flows off the table\n", off[0],
	       off[1], off[2], off[3], off[4], off[5]);
	for (int i = 0; i < 6; i++)
		CHECK(off[i] == 0,
		      "two loaders, publication %d: %u of 5000 new flows off the table", i, off[i]);
	hashlb_steer_free(b);
	hashlb_steer_free(a);
	hashlb_table_free(t0);
	hashlb_table_free(t1);
	hashlb_table_free(t2);
	hashlb_table_free(u);
}

/*
 * A copy made after another loader wrote: <a> attached the program on IFACE
 * and published rings only (no copy of hlb_slots yet), <b> found it and
 * published a Maglev table into each half; then a's first Maglev table,
 * whose copy of the slots it makes now, must not take the half for the
 * all-zero one it loaded: every value that holds backend 0 four times would
 * be left as b wrote it.
 */
static void check_copy_made_late(void)
{
	struct hashlb_steer_opts o = { .iface = IFACE,
				       .mode = HASHLB_STEER_XDP_GENERIC,
				       .max_backends = 16 };
	static const char *const names[] = { "a", "b" };
	static const char *const vips[] = { "10.0.0.10:80" };
	struct hashlb_table *r = test_table(HASHLB_SCHEME_RING, 1, names, 2, NULL);
	struct hashlb_table *t = test_table_w(HASHLB_SCHEME_MAGLEV, 1, names, 2, NULL, true);
	struct hashlb_table *u = test_table_w(HASHLB_SCHEME_MAGLEV, 7, names, 2, NULL, true);
	struct hashlb_error err = { 0 };
	struct hashlb_steer *a, *b;
	uint32_t off;
	int fd;

	a = test_steer_load_opts(&o, t);
	fd = hashlb_steer_prog_fd(a, HASHLB_STEER_PROG_XDP);
	test_publish(a, r, HASHLB_KEY_4TUPLE, NULL);
	test_set_vips(a, vips, 1);
	publish_off(a, fd, r, 1);
	if (hashlb_steer_find(IFACE, HASHLB_STEER_AUTO, &b, &err) < 0) {
		fprintf(stderr, "finding the program: %s\n", err.msg);
		exit(1);
	}
	publish_off(b, fd, u, 7);
	publish_off(b, fd, u, 7);
	off = publish_off(a, fd, t, 1);
	printf("a copy made after another loader wrote: %u of 5000 new flows off the table\n", off);
	CHECK(off == 0,
	      "a copy made after another loader wrote: %u of 5000 new flows off the table", off);
	hashlb_steer_free(b);
	hashlb_steer_free(a);
	hashlb_table_free(r);
	hashlb_table_free(t);
	hashlb_table_free(u);
}

/* Publish <t> with <s>, backend i at test_backend_mac(<base> + i): 0 or -errno. */
static int publish_at(struct hashlb_steer *s, const struct hashlb_table *t, uint32_t base,
		      struct hashlb_error *err)
{
	struct hashlb_steer_dest d[16] = { 0 };

	for (uint32_t i = 0; i < hashlb_table_backend_count(t) && i < 16; i++) {
		test_backend_mac(base + i, d[i].mac);
		memcpy(d[i].src_mac, test_lb_mac, 6);
	}
	return hashlb_steer_set_table(s, t, HASHLB_KEY_4TUPLE, NULL, d, err);
}

/* Of <n> new flows through program <fd>, a SYN then its ACK each: how many
 * ACKs go to another backend than their SYN (*<ret_split>), and how many
 * SYNs are not sent where <t> (seed <seed>, MACs from <base>) says. */
static uint32_t syn_ack(int fd, const struct hashlb_table *t, uint64_t seed, uint32_t base,
			uint32_t n, uint32_t *ret_split)
{
	uint64_t rng = seed + 100;
	uint32_t off = 0, split = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct test_pkt p;
		struct hashlb_tuple tu;
		uint8_t frame[256], out[512];
		int syn, ack;

		test_pkt_random(&p, &rng);
		p.tcp_flags = 0x02; /* SYN */
		test_run(fd, frame, test_build(&p, frame), out, NULL);
		syn = test_frame_backend(out);
		p.tcp_flags = 0x10; /* its ACK */
		test_run(fd, frame, test_build(&p, frame), out, NULL);
		ack = test_frame_backend(out);
		test_tuple(&p, &tu);
		split += syn != ack;
		off += (uint32_t)syn !=
		       base + hashlb_table_lookup(t,
						  hashlb_tuple_hash(&tu, HASHLB_KEY_4TUPLE, seed));
	}
	*ret_split = split;
	return off;
}

static struct {
	struct hashlb_steer *other;
	const struct hashlb_table *t;
	int ret, tried; /* waited for the lock, tried it once (hashlb run's) */
	struct hashlb_error err, err_tried;
} inside;

/* a's abort hook: b publishes its table in a's window, trying the lock once
 * (as hashlb run does), then waiting for it (as hashlb steer does). */
static bool publish_inside(void *arg)
{
	(void)arg;
	hashlb_steer_set_lock_try(inside.other, true);
	inside.tried = publish_at(inside.other, inside.t, 16, &inside.err_tried);
	hashlb_steer_set_lock_try(inside.other, false);
	inside.ret = publish_at(inside.other, inside.t, 16, &inside.err);
	return false;
}

static void check_at_once(void)
{
	struct hashlb_steer_opts o = { .iface = IFACE,
				       .mode = HASHLB_STEER_XDP_GENERIC,
				       .max_backends = 8 };
	static const char *const n0[] = { "a", "b", "c", "d", "e", "f", "g", "h" };
	static const char *const na[] = { "i", "j", "k", "l", "m", "n", "o", "p" };
	static const char *const nb[] = { "q", "r", "s", "t", "u", "v", "w", "x" };
	static const char *const vips[] = { "10.0.0.10:80" };
	struct hashlb_table *t0 = test_table(HASHLB_SCHEME_MAGLEV, 1, n0, 8, NULL);
	struct hashlb_table *t = test_table(HASHLB_SCHEME_MAGLEV, 3, na, 8, NULL);
	struct hashlb_table *u = test_table(HASHLB_SCHEME_MAGLEV, 7, nb, 8, NULL);
	struct hashlb_error err = { 0 };
	struct hashlb_steer *a, *b;
	uint32_t off[2], split[2];
	char holder[32];
	int fd, ret;

	a = test_steer_load_opts(&o, t0);
	fd = hashlb_steer_prog_fd(a, HASHLB_STEER_PROG_XDP);
	test_publish(a, t0, HASHLB_KEY_4TUPLE, NULL);
	test_set_vips(a, vips, 1);
	if (hashlb_steer_find(IFACE, HASHLB_STEER_AUTO, &b, &err) < 0) {
		fprintf(stderr, "finding the program: %s\n", err.msg);
		exit(1);
	}
	inside.other = b;
	inside.t = u;
	inside.ret = 1;
	hashlb_steer_set_abort(a, publish_inside, NULL);
	ret = publish_at(a, t, 0, &err);
	hashlb_steer_set_abort(a, NULL, NULL);
	CHECK(ret == 0, "the publication waited for: %s", err.msg);
	hashlb_steer_flows_clear(a);
	off[0] = syn_ack(fd, t, 3, 0, 2000, &split[0]);
	printf("two publications at once: the inner one %s (%s); 2000 new flows: %u off the "
	       "outer one's table, %u ACKs to another backend than their SYN\n",
	       inside.ret == 0 ? "went in" : "refused", inside.ret == 0 ? "" : inside.err.msg,
	       off[0], split[0]);
	snprintf(holder, sizeof(holder), "(process %d,", (int)getpid());
	CHECK(inside.ret == -ETIMEDOUT, "a publication inside another's: %d, not -ETIMEDOUT",
	      inside.ret);
	CHECK(inside.ret == 0 || strstr(inside.err.msg, holder),
	      "a publication refused does not name the lock's holder: %s", inside.err.msg);
	CHECK(inside.tried == -EAGAIN && strstr(inside.err_tried.msg, holder),
	      "a publication that only tries the lock, inside another's: %d, not -EAGAIN "
	      "naming the holder (%s)",
	      inside.tried, inside.err_tried.msg);
	CHECK(off[0] == 0 && split[0] == 0,
	      "two publications at once: %u of 2000 new flows off the table, %u ACKs to another "
	      "backend than their SYN",
	      off[0], split[0]);
	/* the one refused, once the other is done */
	ret = publish_at(b, u, 16, &err);
	CHECK(ret == 0, "the publication refused, again: %s", err.msg);
	hashlb_steer_flows_clear(a);
	off[1] = syn_ack(fd, u, 7, 16, 2000, &split[1]);
	printf("then the refused one: %u off its table, %u ACKs split\n", off[1], split[1]);
	CHECK(off[1] == 0 && split[1] == 0,
	      "the publication refused, again: %u of 2000 new flows off its table, %u ACKs to "
	      "another backend than their SYN",
	      off[1], split[1]);
	hashlb_steer_free(b);
	hashlb_steer_free(a);
	hashlb_table_free(t0);
	hashlb_table_free(t);
	hashlb_table_free(u);
}

/*
 * A publication whose lock file cannot be named (hlb_active's id unread) runs
 * unlocked and says why: the errno of that read. Before, the errno of the
 * stale lock files' sweep that came after it: "No such file or directory"
 * for an EPERM, where a stale file was swept (one made here, of a map id
 * the kernel never gives: above INT_MAX, and this process's own, so that a
 * run beside this one makes none this one's check finds) or /run/hashlb was
 * not there.
 */
static void check_unlocked_says_why(void)
{
	static const char *const vips[] = { "10.0.0.10:80" };
	struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY, .max_backends = 16 };
	struct hashlb_steer *s = test_steer_load_opts(&o, NULL);
	const char *why;
	char stale[64];
	FILE *f;

	if (mkdir("/run/hashlb", 0755) < 0 && errno != EEXIST) {
		perror("/run/hashlb");
		exit(1);
	}
	snprintf(stale, sizeof(stale), "/run/hashlb/steer-%u.lock",
		 4294967295u - (unsigned)getpid());
	f = fopen(stale, "w");
	if (!f) {
		perror("a stale lock file");
		exit(1);
	}
	fclose(f);
	info_fails = EPERM;
	test_set_vips(s, vips, 1);
	why = hashlb_steer_unlocked(s);
	printf("hlb_active's id unread: unlocked, %s\n", why ? why : "(not said)");
	CHECK(why && strstr(why, strerror(EPERM)), "unlocked, hlb_active's id unread: %s, not %s",
	      why ? why : "(not said)", strerror(EPERM));
	CHECK(access(stale, F_OK) < 0,
	      "a stale lock file (no such map) left after a publication's sweep");
	unlink(stale);
	hashlb_steer_free(s);
}

int main(void)
{
	static const char *const vips[] = { "10.0.0.10:80" };
	struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY,
				       .max_backends = MAX_BACKENDS,
				       .max_ring_points = 4 * N_BACKENDS };
	struct hashlb_steer *s = test_steer_load_opts(&o, NULL);
	struct hashlb_table *t;

	bpf_calls = 0;
	test_set_vips(s, vips, 1);
	printf("VIPs: %lu bpf() calls\n", bpf_calls);
	CHECK(bpf_calls < 10, "VIPs: %lu bpf() calls, one a slot", bpf_calls);
	t = big_table(HASHLB_SCHEME_MAGLEV, 11, 0);
	check_publish(s, t, 11);
	hashlb_table_free(t);
	/* half of the backends replaced: new slots filled, old ones cleared */
	t = big_table(HASHLB_SCHEME_RING, 22, N_BACKENDS / 2);
	check_publish(s, t, 22);
	hashlb_table_free(t);
	check_one_down(s, HASHLB_SCHEME_MAGLEV, 0.05);
	check_one_down(s, HASHLB_SCHEME_RING, 0.5);
	hashlb_steer_free(s);
	check_two_loaders();
	check_copy_made_late();
	check_at_once();
	check_unlocked_says_why();
	return test_failures ? 1 : 0;
}
