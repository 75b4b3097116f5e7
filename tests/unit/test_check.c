// SPDX-License-Identifier: MIT
/*
 * Active checks on a real loop: a listening port passes, a closed one fails
 * at once, a silent one times out, and running out of fds or a source
 * address gone skips the check rather than failing the backend, and says
 * where and why; a loop late past the deadline fails no
 * check that the backend answered in time; the checks in flight keep to
 * their share of the fds.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "control/check.h"

struct results {
	int ok, failed, n; /* n: results reported */
	uint64_t latency_ns;
	int skipped, skip_err; /* checks not made, and the errno of the last */
	enum hlb_check_skip skip_at;
};

static void done(void *arg, bool ok, uint64_t latency_ns)
{
	struct results *r = arg;

	r->n++;
	if (ok)
		r->ok++;
	else
		r->failed++;
	r->latency_ns = latency_ns;
}

static void skipped(void *arg, enum hlb_check_skip at, int err)
{
	struct results *r = arg;

	r->skipped++;
	r->skip_at = at;
	r->skip_err = err;
}

static int listener_backlog(struct sockaddr_in *sin, int backlog)
{
	socklen_t len = sizeof(*sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	*sin = (struct sockaddr_in){ .sin_family = AF_INET,
				     .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	assert_int_equal(bind(fd, (struct sockaddr *)sin, sizeof(*sin)), 0);
	assert_int_equal(listen(fd, backlog), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)sin, &len), 0);
	return fd;
}

static int listener(struct sockaddr_in *sin)
{
	return listener_backlog(sin, 16);
}

static void run_for(struct hlb_loop *l, uint64_t ms)
{
	uint64_t end = hlb_now_ms() + ms;

	while (hlb_now_ms() < end)
		hlb_loop_run_once(l, 5);
}

/*
 * Run <l> until *<count> reaches <n>, or <ms> passed (a deadline that fails
 * the test, not a measurement: a loaded machine may take its time): the
 * milliseconds it ran.
 */
static uint64_t run_until(struct hlb_loop *l, const int *count, int n, uint64_t ms)
{
	uint64_t start = hlb_now_ms();

	while (*count < n && hlb_now_ms() < start + ms)
		hlb_loop_run_once(l, 5);
	return hlb_now_ms() - start;
}

static void test_listening_port_passes_closed_port_fails(void **state)
{
	struct hlb_loop *l;
	struct sockaddr_in sin;
	struct hlb_check c;
	struct results r = { 0 };
	uint64_t t0;
	int fd;

	assert_int_equal(hlb_loop_new(&l), 0);
	fd = listener(&sin);
	hlb_check_init(&c, (struct sockaddr *)&sin, sizeof(sin), 20, 20, done, &r);
	t0 = hlb_now_ms();
	assert_int_equal(hlb_check_start(&c, l, t0), 0);
	/* Fixed cadence, one check per 20 ms from the first slot (t0): the fifth is
	 * made 4 intervals after it at the earliest; no more than that, a loaded
	 * machine can add. (Timed from run_until()'s own start, a preemption before
	 * it took that time off the 80 ms: 1 run in 20 failed under load.) */
	run_until(l, &r.ok, 5, 10000);
	assert_true(hlb_now_ms() - t0 >= 80);
	assert_int_equal(r.ok, 5);
	assert_int_equal(r.failed, 0);
	assert_true(r.latency_ns > 0);

	close(fd);
	r = (struct results){ 0 };
	run_until(l, &r.failed, 3, 10000);
	assert_int_equal(r.ok, 0);
	assert_true(r.failed >= 3);
	assert_int_equal(c.failed_at, HLB_CHECK_AT_CONNECT); /* why, for the log */
	assert_int_equal(c.failed_err, ECONNREFUSED);
	hlb_check_stop(&c);
	assert_false(hlb_check_running(&c));
	hlb_loop_free(l);
}

/* A loopback port whose accept queue is full (backlog 0, filled): it drops
 * SYNs, so a connect to it hangs until its timeout. */
struct silent_port {
	int fd, fill[4];
};

static void silent_port(struct hlb_loop *l, struct sockaddr_in *sin, struct silent_port *sp)
{
	sp->fd = listener_backlog(sin, 0);
	for (int i = 0; i < 4; i++) {
		sp->fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		connect(sp->fill[i], (struct sockaddr *)sin, sizeof(*sin));
	}
	run_for(l, 20);
}

static void silent_port_close(struct silent_port *sp)
{
	for (int i = 0; i < 4; i++)
		close(sp->fill[i]);
	close(sp->fd);
}

/* A port whose accept queue is full drops SYNs: the check times out. */
static void test_silent_port_times_out(void **state)
{
	struct hlb_loop *l;
	struct sockaddr_in sin;
	struct hlb_check c;
	struct results r = { 0 };
	struct silent_port sp;

	assert_int_equal(hlb_loop_new(&l), 0);
	silent_port(l, &sin, &sp);
	hlb_check_init(&c, (struct sockaddr *)&sin, sizeof(sin), 100, 30, done, &r);
	assert_int_equal(hlb_check_start(&c, l, hlb_now_ms()), 0);
	run_until(l, &r.failed, 1, 5000);
	assert_int_equal(r.ok, 0);
	assert_int_equal(r.failed, 1);
	assert_true(r.latency_ns >= 25000000ull); /* ms timer granularity */
	assert_int_equal(c.failed_at, HLB_CHECK_AT_CONNECT);
	assert_int_equal(c.failed_err, ETIMEDOUT);
	hlb_check_stop(&c);
	silent_port_close(&sp);
	hlb_loop_free(l);
}

/* The slots of a check <c> whose every check fails, followed from its done callback. */
struct cadence {
	struct hlb_check *c;
	uint64_t slot; /* the slot of the check in flight */
	int ok, failed; /* results */
	int kept, skipped; /* next slots taken and passed over, not wholly past */
};

static void cadence_done(void *arg, bool ok, uint64_t latency_ns)
{
	struct cadence *k = arg;
	uint32_t iv = k->c->interval_ms;

	k->ok += ok;
	k->failed += !ok;
	/* The next slot had not wholly passed when check_next() ran (before this): the next
	 * check is made in it. */
	if (hlb_now_ms() < k->slot + 2 * iv) {
		if (k->c->next_ms == k->slot + iv)
			k->kept++;
		else
			k->skipped++;
	}
	k->slot = k->c->next_ms;
}

/*
 * A check that takes its whole timeout, equal to the interval (the default timeout for an
 * interval under 1 s), ended as its next slot began, a little after it, and that slot was
 * skipped: a silent backend was checked every other interval and went down after
 * 2 x fall x interval. The next check is made in the next slot, at once: one check per
 * interval. Each check is looked at whose next slot had not wholly passed when it ended
 * (a loop late by a whole interval skips it, rightly). Counting the checks made in 810 ms
 * instead (14 of the 20 slots at least) failed 6 runs in 20 under ASan and load: each
 * check starts where the one before timed out, late by the loop's delay, and the delays
 * add up to whole slots.
 */
static void test_timeout_of_one_interval_keeps_the_cadence(void **state)
{
	struct hlb_loop *l;
	struct sockaddr_in sin;
	struct hlb_check c;
	struct cadence k = { .c = &c };
	struct silent_port sp;
	uint64_t end;

	assert_int_equal(hlb_loop_new(&l), 0);
	silent_port(l, &sin, &sp);
	hlb_check_init(&c, (struct sockaddr *)&sin, sizeof(sin), 100, 100, cadence_done, &k);
	k.slot = hlb_now_ms();
	assert_int_equal(hlb_check_start(&c, l, k.slot), 0);
	end = hlb_now_ms() + 10000; /* a deadline that fails the test, not a measurement */
	while (k.kept + k.skipped < 5 && hlb_now_ms() < end)
		hlb_loop_run_once(l, 5);
	assert_int_equal(k.skipped, 0);
	assert_true(k.kept >= 5);
	assert_int_equal(k.ok, 0);
	hlb_check_stop(&c);
	silent_port_close(&sp);
	hlb_loop_free(l);
}

static void test_out_of_fds_skips_the_check(void **state)
{
	struct rlimit old, rl;
	struct hlb_loop *l;
	struct sockaddr_in sin;
	struct hlb_check c;
	struct results r = { 0 };
	int fd, probe;

	assert_int_equal(hlb_loop_new(&l), 0);
	fd = listener(&sin);
	getrlimit(RLIMIT_NOFILE, &old);
	/* No fd above the ones open now. */
	probe = dup(0);
	close(probe);
	rl = old;
	rl.rlim_cur = (rlim_t)probe;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	hlb_check_init(&c, (struct sockaddr *)&sin, sizeof(sin), 20, 20, done, &r);
	c.skipped = skipped;
	assert_int_equal(hlb_check_start(&c, l, hlb_now_ms()), 0);
	run_until(l, &r.skipped, 1, 10000);
	setrlimit(RLIMIT_NOFILE, &old);
	assert_int_equal(r.failed, 0);
	assert_int_equal(r.ok, 0);
	assert_true(r.skipped >= 1);
	assert_int_equal(r.skip_at, HLB_CHECK_SKIP_SOCKET);
	assert_int_equal(r.skip_err, EMFILE);
	/* And it resumes once fds are available again. */
	run_until(l, &r.ok, 1, 10000);
	assert_true(r.ok >= 1);
	hlb_check_stop(&c);
	close(fd);
	hlb_loop_free(l);
}

/*
 * The service's source address gone from the host (here one it never had,
 * 192.0.2.77): the bind fails with EADDRNOTAVAIL, and the check was skipped
 * without a word, the backend's health frozen with nothing to tell why. It
 * is still skipped, neither passed nor failed, and reported with where and
 * why, at each check's time.
 */
static void test_source_gone_skips_and_says_why(void **state)
{
	struct hlb_loop *l;
	struct sockaddr_in sin, *src;
	struct hlb_check c;
	struct results r = { 0 };
	int fd;

	assert_int_equal(hlb_loop_new(&l), 0);
	fd = listener(&sin);
	hlb_check_init(&c, (struct sockaddr *)&sin, sizeof(sin), 20, 20, done, &r);
	c.skipped = skipped;
	src = (struct sockaddr_in *)&c.source;
	src->sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, "192.0.2.77", &src->sin_addr), 1);
	c.source_len = sizeof(*src);
	assert_int_equal(hlb_check_start(&c, l, hlb_now_ms()), 0);
	run_until(l, &r.skipped, 3, 10000);
	assert_true(r.skipped >= 3);
	assert_int_equal(r.skip_at, HLB_CHECK_SKIP_SOURCE);
	assert_int_equal(r.skip_err, EADDRNOTAVAIL);
	assert_int_equal(r.n, 0);

	/* the address back (here: one the host has): checks are made again */
	assert_int_equal(inet_pton(AF_INET, "127.0.0.1", &src->sin_addr), 1);
	run_until(l, &r.ok, 1, 10000);
	assert_true(r.ok >= 1);
	assert_int_equal(r.failed, 0);
	hlb_check_stop(&c);
	close(fd);
	hlb_loop_free(l);
}

/* A backend on listener <fd> for <n> connections, answering at once: each is sent <greet>
 * (if not NULL) as it is accepted, and <answer> (if not NULL) once it sent <ask_len> bytes.
 * <accepted>: the connections accepted (and greeted) so far. Static in the tests: a failed
 * assertion leaves the thread running, which must not read a frame gone. */
struct prompt_backend {
	pthread_t thread;
	int fd, n, conns[128];
	const char *greet, *answer;
	size_t ask_len;
	atomic_int accepted;
};

static void *prompt_backend_serve(void *arg)
{
	struct prompt_backend *b = arg;
	char buf[64];

	for (int i = 0; i < b->n; i++) {
		b->conns[i] = accept(b->fd, NULL, NULL);
		if (b->conns[i] >= 0 && b->greet)
			(void)!write(b->conns[i], b->greet, strlen(b->greet));
		atomic_fetch_add(&b->accepted, 1);
	}
	for (int i = 0; i < b->n && b->answer; i++)
		if (b->conns[i] >= 0 && recv(b->conns[i], buf, b->ask_len, MSG_WAITALL) > 0)
			(void)!write(b->conns[i], b->answer, strlen(b->answer));
	return NULL;
}

/*
 * 100 checks of <b> (sending <send>, expecting <expect>; NULL: none) connect, and the loop
 * is then held past their deadline, as a busy control thread is, before it runs again:
 * every check passes, the backend having answered at once. The loop is held until the
 * backend has accepted (and greeted) every connection, not for a fixed 60 ms past a 20 ms
 * deadline: the backend's thread, not scheduled in those 60 ms on a loaded machine, had
 * answered nothing, and all 100 checks failed (4 runs in 20 under ASan and load). An
 * answer to a payload, which the loop sends only as it runs again, has the timeout again
 * from then: 1 s, not 20 ms, for the backend's thread to be scheduled.
 */
static void late_loop_passes(struct prompt_backend *b, const char *send, const char *expect)
{
	enum { N = 100, TIMEOUT_MS = 1000 };
	static struct hlb_check c[N];
	struct hlb_loop *l;
	struct sockaddr_in sin;
	struct results r = { 0 };
	uint64_t now = hlb_now_ms(), started, end;

	assert_int_equal(hlb_loop_new(&l), 0);
	b->fd = listener_backlog(&sin, 1024);
	b->n = N;
	for (int i = 0; i < N; i++) {
		hlb_check_init(&c[i], (struct sockaddr *)&sin, sizeof(sin), 10000, TIMEOUT_MS, done,
			       &r);
		assert_int_equal(hlb_check_set_payload(&c[i], send, send ? strlen(send) : 0, expect,
						       expect ? strlen(expect) : 0),
				 0);
		assert_int_equal(hlb_check_start(&c[i], l, now), 0);
	}
	assert_int_equal(pthread_create(&b->thread, NULL, prompt_backend_serve, b), 0);
	while (hlb_now_ms() <= now)
		usleep(1000);
	hlb_loop_run_once(l, 0); /* the N checks connect (their timers were due) */
	started = hlb_now_ms();
	assert_int_equal(r.ok + r.failed, 0);
	/* the thread is busy until the backend has done what it does at once, and past the
	 * checks' deadline (a deadline of 10 s for the backend fails the test) */
	end = started + 10000;
	while ((atomic_load(&b->accepted) < N || hlb_now_ms() <= started + TIMEOUT_MS) &&
	       hlb_now_ms() < end)
		usleep(1000);
	assert_int_equal(atomic_load(&b->accepted), N);
	run_until(l, &r.n, N, 10000);
	assert_int_equal(r.failed, 0);
	assert_int_equal(r.ok, N);
	for (int i = 0; i < N; i++)
		hlb_check_stop(&c[i]);
	pthread_join(b->thread, NULL);
	for (int i = 0; i < N; i++)
		close(b->conns[i]);
	close(b->fd);
	hlb_loop_free(l);
}

/*
 * The control thread busy past the checks' deadline (a large /metrics, a reload, or not
 * scheduled) with more connected checks than one epoll_wait() batch (64): the loop ran the
 * timers after the first batch, and failed every check whose connect it had not read yet,
 * though the backend answered at once. 2-3 % of checks failed so, and backends went down,
 * with 1,200 checked every 100 ms on a loaded host. The socket is looked at before a check
 * is failed at its deadline: all pass.
 */
static void test_late_loop_is_not_a_timeout(void **state)
{
	static struct prompt_backend b;

	late_loop_passes(&b, NULL, NULL);
}

/*
 * The same with a check that expects a banner (expect "220 ", nothing sent, as for SMTP):
 * every backend connected and sent its banner in time, but the loop read the connects of
 * all but one epoll_wait() batch only at their deadline, found them connected there, and
 * failed them without looking for the banner that had waited in the socket all along
 * (37 of the 100).
 */
static void test_late_loop_is_not_a_timeout_for_a_banner(void **state)
{
	static struct prompt_backend b = { .greet = "220 ready\r\n" };

	late_loop_passes(&b, NULL, "220 ");
}

/*
 * The same with a check that sends "PING\r\n" and expects "+PONG": the loop read the
 * connects only past their deadline, and the payload went out as the check was failed:
 * the backend, which answers at once, had no time at all to (37 to 100 of the 100 failed).
 * A connect seen past the deadline gives the answer the timeout again: the loop's delay
 * is not the backend's.
 */
static void test_late_loop_is_not_a_timeout_for_an_answer(void **state)
{
	static struct prompt_backend b = { .answer = "+PONG\r\n", .ask_len = 6 };

	late_loop_passes(&b, "PING\r\n", "+PONG");
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/*
 * Checks of backends that do not answer hold their socket for the whole timeout: 40,000
 * backends behind a dead subnet took all 20,000 descriptors, and the forwarder refused
 * clients of every service. The checks in flight hold at most a quarter of RLIMIT_NOFILE;
 * the others wait their turn, and every one is made.
 */
static void test_checks_in_flight_are_capped(void **state)
{
	enum { N = 150 };
	static struct hlb_check c[N];
	struct rlimit old, rl;
	struct hlb_loop *l;
	struct sockaddr_in sin;
	struct results r = { 0 };
	struct silent_port sp;
	int base;

	assert_int_equal(hlb_loop_new(&l), 0);
	silent_port(l, &sin, &sp); /* full: SYNs are dropped, connects hang */
	getrlimit(RLIMIT_NOFILE, &old);
	rl = old;
	rl.rlim_cur = 400; /* checks in flight: 100 at most */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	usleep(1100000); /* the cap follows the limit within a second */
	base = open_fds();
	for (int i = 0; i < N; i++) {
		/* a 1 s timeout: none may end before it */
		hlb_check_init(&c[i], (struct sockaddr *)&sin, sizeof(sin), 10000, 1000, done, &r);
		assert_int_equal(hlb_check_start(&c[i], l, hlb_now_ms()), 0);
	}
	/* One turn of the loop, whose first slots are due: 100 connect (a socket each), 50
	 * wait. Their 1 s is counted from that turn, whose timers are read once: none ends in
	 * it, however late it runs. (The loop was run for 40 ms instead: a machine that did
	 * not schedule the test for a second of those had the 100 time out in them.) */
	hlb_loop_run_once(l, 0);
	assert_int_equal(open_fds() - base, 100); /* the cap, reached */
	assert_int_equal(r.failed, 0);
	run_until(l, &r.failed, N, 10000); /* 100 time out, then the 50 that waited */
	assert_int_equal(r.failed, N);
	assert_int_equal(r.ok, 0);
	for (int i = 0; i < N; i++)
		hlb_check_stop(&c[i]);
	setrlimit(RLIMIT_NOFILE, &old);
	silent_port_close(&sp);
	hlb_loop_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_listening_port_passes_closed_port_fails),
		cmocka_unit_test(test_silent_port_times_out),
		cmocka_unit_test(test_timeout_of_one_interval_keeps_the_cadence),
		cmocka_unit_test(test_out_of_fds_skips_the_check),
		cmocka_unit_test(test_source_gone_skips_and_says_why),
		cmocka_unit_test(test_late_loop_is_not_a_timeout),
		cmocka_unit_test(test_late_loop_is_not_a_timeout_for_a_banner),
		cmocka_unit_test(test_late_loop_is_not_a_timeout_for_an_answer),
		cmocka_unit_test(test_checks_in_flight_are_capped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
