// SPDX-License-Identifier: MIT
/*
 * The control plane's targets, measured in-process on the real pool and
 * runtime objects:
 *
 *  1. Rebuild and publish for 1,000 backends, Maglev M=65537 and ring
 *     1,000 x 160 points: a health change (one backend down: the overlay
 *     rebuild), a weight change of that down backend and one with every
 *     backend up (hashlb_table_rebuild() from the current table), against
 *     the core's own hashlb_table_build() of the same table measured in the
 *     same run; and the core's rebuild alone for one weight change.
 *     Target: <= 5 ms.
 *  2. From a backend's death to the new table published: real listeners,
 *     TCP-connect checks (interval 100 ms, fall 3), one listener closed at a
 *     random moment; the time until a snapshot without it is published,
 *     against fall x interval. Target: <= fall x interval + 50 ms.
 *
 *  3. A Maglev backend's first down found by its checks alone, at the largest
 *     M: the control thread's CPU at its first failed check (fall 3: still
 *     up) and at its verdict (the third), each with the build it schedules,
 *     and the verdict's build and publish in wall time: how long after the
 *     verdict its clients are still sent to it; and before it, a failed
 *     check of another that the next one passed (a run that recovers). --first-down
 *     runs this alone (to alternate two binaries).
 *  4. A rack of 20,000 backends failing their first checks (--rack, alone).
 *
 *   meson test -C build --benchmark --suite bench control -v
 *   build/bench/hashlb-bench-control [--quick | --first-down | --rack]
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "control/loop.h"
#include "control/pool.h"

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A config text: one service, <n> backends on <ports> (or port 9), health as given. */
static char *config_text(const char *scheme_kv, uint32_t n, const uint16_t *ports,
			 const char *health)
{
	size_t cap = 256 + (size_t)n * 96, len = 0;
	char *s = malloc(cap);

	len += (size_t)snprintf(s + len, cap - len,
				"admin: off\nservices:\n  - name: bench\n    listen: 127.0.0.1:0\n"
				"    %s\n    health:\n%s    backends:\n",
				scheme_kv, health);
	for (uint32_t i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len,
					"      - name: backend-%u\n        address: 127.0.0.1:%u\n",
					i, ports ? ports[i] : 9);
	return s;
}

static struct hashlb_config *config_load(const char *text)
{
	struct hashlb_config *cfg;
	struct hashlb_error err = { 0 };

	if (hashlb_config_parse(text, strlen(text), "bench", &cfg, &err) < 0) {
		fprintf(stderr, "bench config: %d:%d: %s\n", err.line, err.column, err.msg);
		exit(1);
	}
	return cfg;
}

static void bench_rebuild(const char *label, const char *scheme_kv, int reps)
{
	char *text = config_text(scheme_kv, 1000, NULL, "      enabled: false\n");
	struct hashlb_config *cfg = config_load(text);
	struct hashlb_backend_spec *spec = calloc(1000, sizeof(*spec));
	double *ref = calloc(reps, sizeof(double)), *down = calloc(reps, sizeof(double));
	double *full = calloc(reps, sizeof(double)), *wall = calloc(reps, sizeof(double));
	double *up = calloc(reps, sizeof(double)), *core = calloc(reps, sizeof(double));
	struct hlb_pool_env env = { .n_workers = 1 };
	struct hlb_pool_service *s;
	struct hlb_loop *loop;
	struct hlb_pool *pool;
	struct hashlb_error err = { 0 };

	if (hlb_loop_new(&loop) < 0 || hlb_pool_new(cfg, loop, &env, &pool, &err) < 0) {
		fprintf(stderr, "bench: %s\n", err.msg);
		exit(1);
	}
	s = hlb_pool_service_at(pool, 0);
	for (uint32_t i = 0; i < 1000; i++)
		spec[i] =
			(struct hashlb_backend_spec){ cfg->services[0].backends[i].name, 1, false };
	for (int r = 0; r < reps; r++) {
		struct hashlb_table *t, *t2;
		struct hlb_pool_backend *b = s->backends[(r * 37) % 1000];
		struct hlb_pool_backend *c = s->backends[(r * 37 + 1) % 1000];
		uint64_t t0 = cpu_ns();

		hashlb_table_build(&cfg->services[0].table, spec, 1000, &t, NULL);
		ref[r] = (double)(cpu_ns() - t0) / 1e6;
		spec[(r * 37) % 1000].weight = 2;
		t0 = cpu_ns();
		hashlb_table_rebuild(t, spec, 1000, &t2, NULL);
		core[r] = (double)(cpu_ns() - t0) / 1e6;
		spec[(r * 37) % 1000].weight = 1;
		hashlb_table_free(t);
		hashlb_table_free(t2);

		/* Health: one backend down (fall results), build + publish. */
		for (uint32_t k = 0; k < cfg->services[0].health.fall; k++)
			hlb_pool_health_result(b, false);
		t0 = cpu_ns();
		hlb_pool_flush(pool);
		down[r] = (double)(cpu_ns() - t0) / 1e6;
		wall[r] = (double)s->rebuild_ns_last / 1e6;
		/* Weight of the down backend: a rebuild + publish. */
		hlb_pool_set_weight(b, 2);
		t0 = cpu_ns();
		hlb_pool_flush(pool);
		full[r] = (double)(cpu_ns() - t0) / 1e6;
		hlb_pool_set_weight(b, 1);
		for (uint32_t k = 0; k < cfg->services[0].health.rise; k++)
			hlb_pool_health_result(b, true);
		hlb_pool_flush(pool);
		/* Weight of a backend, every backend up: a rebuild + publish. */
		hlb_pool_set_weight(c, 2);
		t0 = cpu_ns();
		hlb_pool_flush(pool);
		up[r] = (double)(cpu_ns() - t0) / 1e6;
		hlb_pool_set_weight(c, 1);
		hlb_pool_flush(pool);
	}
	double mref = median(ref, reps), mdown = median(down, reps), mfull = median(full, reps);
	double mwall = median(wall, reps), mup = median(up, reps), mcore = median(core, reps);

	printf("%-24s core build %7.2f ms, core rebuild (one weight) %6.2f ms (%.2fx build)\n"
	       "%-24s rebuild+publish: health %6.2f ms (%.2fx core build, wall %.2f ms) | "
	       "weight, backend down %6.2f ms (%.2fx) | weight, all up %6.2f ms (%.2fx) | "
	       "target 5 ms: %s\n",
	       label, mref, mcore, mcore / mref, "", mdown, mdown / mref, mwall, mfull,
	       mfull / mref, mup, mup / mref,
	       mdown <= 5.0 && mfull <= 5.0 && mup <= 5.0 ? "met" : "NOT met");
	hlb_pool_free(pool);
	hlb_loop_free(loop);
	hashlb_config_free(cfg);
	free(text);
	free(spec);
	free(ref);
	free(down);
	free(full);
	free(wall);
	free(up);
	free(core);
}

/*
 * Section 3 for <n> backends over <m> slots, <reps> backends in turn (each another: a table back
 * up keeps the last outage's survivors, and the same one down again is a copy, not a first
 * down), checks off but their results given as the checker gives them.
 */
static void bench_first_down(uint32_t m, uint32_t n, int reps)
{
	char kv[64];
	char *text;
	struct hashlb_config *cfg;
	double *check = calloc(reps, sizeof(double)), *verdict = calloc(reps, sizeof(double));
	double *wall = calloc(reps, sizeof(double)), *blip = calloc(reps, sizeof(double));
	struct hlb_pool_env env = { .n_workers = 1 };
	struct hlb_pool_service *s;
	struct hlb_loop *loop;
	struct hlb_pool *pool;
	struct hashlb_error err = { 0 };

	snprintf(kv, sizeof(kv), "scheme: maglev\n    table_size: %u", m);
	text = config_text(kv, n, NULL, "      enabled: false\n");
	cfg = config_load(text);
	if (hlb_loop_new(&loop) < 0 || hlb_pool_new(cfg, loop, &env, &pool, &err) < 0) {
		fprintf(stderr, "bench: %s\n", err.msg);
		exit(1);
	}
	s = hlb_pool_service_at(pool, 0);
	for (int r = 0; r < reps; r++) {
		struct hlb_pool_backend *b = s->backends[(1 + (uint32_t)r * 7) % n];
		struct hlb_pool_backend *other = s->backends[(5 + (uint32_t)r * 7) % n];
		uint64_t t0 = cpu_ns();

		/* first a failed check of another that the next one passed: what a run that
		 * recovers costs (the table then keeps that one's survivors, not b's) */
		hlb_pool_health_result(other, false);
		hlb_pool_flush(pool);
		hlb_pool_health_result(other, true);
		hlb_pool_flush(pool);
		blip[r] = (double)(cpu_ns() - t0) / 1e6;
		t0 = cpu_ns();
		hlb_pool_health_result(b, false);
		hlb_pool_flush(pool);
		check[r] = (double)(cpu_ns() - t0) / 1e6;
		t0 = cpu_ns();
		for (uint32_t k = 1; k < cfg->services[0].health.fall; k++)
			hlb_pool_health_result(b, false);
		hlb_pool_flush(pool);
		verdict[r] = (double)(cpu_ns() - t0) / 1e6;
		wall[r] = (double)s->rebuild_ns_last / 1e6;
		if (hlb_pool_backend_up(b) ||
		    !hashlb_table_backend_down(hlb_pool_snapshot(s)->table, b->idx)) {
			fprintf(stderr, "bench: backend %u not down at its verdict\n", b->idx);
			exit(1);
		}
		for (uint32_t k = 0; k < cfg->services[0].health.rise; k++)
			hlb_pool_health_result(b, true);
		hlb_pool_flush(pool);
	}
	printf("first down M=%u n=%u  %d backends: first failed check %8.2f ms | verdict %8.2f ms "
	       "(wall %8.2f ms: build+publish) | a failed check, then passed %8.2f ms\n",
	       m, n, reps, median(check, reps), median(verdict, reps), median(wall, reps),
	       median(blip, reps));
	hlb_pool_free(pool);
	hlb_loop_free(loop);
	hashlb_config_free(cfg);
	free(text);
	free(check);
	free(verdict);
	free(wall);
	free(blip);
}

/*
 * 4. A rack: each of <n> backends' first failed check (fall 3: all still up), the last backend's
 * first, as a network path to them all failing does: the control thread's CPU for them all
 * (each check's own work alone, no build: hlb_pool_flush() not called), against a passing check
 * of each in the same run. --rack runs this alone.
 */
static void bench_rack(const char *label, const char *scheme_kv, uint32_t n)
{
	char *text = config_text(scheme_kv, n, NULL, "      enabled: false\n");
	struct hashlb_config *cfg = config_load(text);
	struct hlb_pool_env env = { .n_workers = 1 };
	struct hlb_pool_service *s;
	struct hlb_loop *loop;
	struct hlb_pool *pool;
	struct hashlb_error err = { 0 };
	double passed, failed;
	uint64_t t0;

	if (hlb_loop_new(&loop) < 0 || hlb_pool_new(cfg, loop, &env, &pool, &err) < 0) {
		fprintf(stderr, "bench: %s\n", err.msg);
		exit(1);
	}
	s = hlb_pool_service_at(pool, 0);
	/* the reference: a passing check of each, its result read as any */
	t0 = cpu_ns();
	for (uint32_t j = n; j-- > 0;)
		hlb_pool_health_result(s->backends[j], true);
	passed = (double)(cpu_ns() - t0) / 1e6;
	t0 = cpu_ns();
	for (uint32_t j = n; j-- > 0;)
		hlb_pool_health_result(s->backends[j], false);
	failed = (double)(cpu_ns() - t0) / 1e6;
	printf("rack %-16s n=%u: every backend's first failed check %8.2f ms, passing check "
	       "%8.2f ms (%.1fx)\n",
	       label, n, failed, passed, failed / passed);
	hlb_pool_free(pool);
	hlb_loop_free(loop);
	hashlb_config_free(cfg);
	free(text);
}

static int listener(uint16_t *ret_port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) < 0) {
		perror("bench: listener");
		exit(1);
	}
	*ret_port = ntohs(sin.sin_port);
	return fd;
}

static void bench_death(int trials)
{
	enum { N = 10, INTERVAL = 100, FALL = 3 };
	double *lat = calloc(trials, sizeof(double)), worst = 0;
	uint64_t seed = (uint64_t)time(NULL);

	for (int t = 0; t < trials; t++) {
		uint16_t ports[N];
		int fds[N];
		char health[128];
		struct hlb_pool_env env = { .n_workers = 1 };
		struct hashlb_error err = { 0 };
		struct hlb_pool_service *s;
		struct hlb_loop *loop;
		struct hlb_pool *pool;
		struct hashlb_config *cfg;
		uint64_t t0, start;
		char *text;

		for (int i = 0; i < N; i++)
			fds[i] = listener(&ports[i]);
		snprintf(health, sizeof(health),
			 "      interval: %dms\n      timeout: %dms\n      fall: %d\n", INTERVAL,
			 INTERVAL, FALL);
		text = config_text("scheme: maglev", N, ports, health);
		cfg = config_load(text);
		if (hlb_loop_new(&loop) < 0 || hlb_pool_new(cfg, loop, &env, &pool, &err) < 0) {
			fprintf(stderr, "bench: %s\n", err.msg);
			exit(1);
		}
		s = hlb_pool_service_at(pool, 0);
		/* Let checks run a while, then kill at a random point of the interval. */
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		start = hlb_now_ms();
		while (hlb_now_ms() < start + 250 + (seed >> 33) % INTERVAL)
			hlb_loop_run_once(loop, 5);
		close(fds[3]);
		t0 = hlb_now_ns();
		/* a snapshot without it: those before (its first failed check's, with the
		 * Maglev table its verdict copies) still send it clients */
		while (!hashlb_table_backend_down(hlb_pool_snapshot(s)->table, 3) &&
		       hlb_now_ns() - t0 < 5000000000ull)
			hlb_loop_run_once(loop, 50);
		lat[t] = (double)(hlb_now_ns() - t0) / 1e6;
		if (lat[t] > worst)
			worst = lat[t];
		if (!hashlb_table_backend_down(hlb_pool_snapshot(s)->table, 3))
			lat[t] = 1e9; /* not in 5 s */
		hlb_pool_free(pool);
		hlb_loop_free(loop);
		hashlb_config_free(cfg);
		free(text);
		for (int i = 0; i < N; i++)
			if (i != 3)
				close(fds[i]);
	}
	double med = median(lat, trials);

	printf("death to new table       %d trials, interval %d ms, fall %d: median %.0f ms, "
	       "worst %.0f ms = %.2fx fall x interval | target <= %d ms: %s\n",
	       trials, INTERVAL, FALL, med, worst, worst / (FALL * INTERVAL), FALL * INTERVAL + 50,
	       worst <= FALL * INTERVAL + 50 ? "met" : "NOT met");
	free(lat);
}

static const char usage[] =
	"usage: hashlb-bench-control [--quick | --first-down | --rack]\n"
	"  --quick       fewer repetitions and trials (a smoke run)\n"
	"  --first-down  a Maglev backend's first down at the largest M alone\n"
	"  --rack        20,000 backends' first failed checks (ring, Maglev) alone\n";

int main(int argc, char **argv)
{
	int quick, reps;

	/* any other word was the full run, "--help" included */
	bench_args(argc, argv, 1, usage);
	if (argc > 1 && strcmp(argv[1], "--quick") && strcmp(argv[1], "--first-down") &&
	    strcmp(argv[1], "--rack"))
		bench_args_refuse(argv[0], argv[1], usage);
	printf("hashlb control plane benchmark (CPU time of the control thread, medians)\n");
	if (argc > 1 && !strcmp(argv[1], "--rack")) {
		bench_rack("ring V=16", "scheme: ring\n    vnodes: 16", 20000);
		bench_rack("maglev M=65537", "scheme: maglev\n    table_size: 65537", 20000);
		printf("reproduce: %s --rack\n", argv[0]);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "--first-down")) {
		bench_first_down(HASHLB_MAGLEV_M_MAX, 10, 3);
		bench_first_down(HASHLB_MAGLEV_M_MAX, 1000, 3);
		printf("reproduce: %s --first-down\n", argv[0]);
		return 0;
	}
	quick = argc > 1;
	reps = quick ? 5 : 21;
	bench_rebuild("maglev M=65537 n=1000", "scheme: maglev\n    table_size: 65537", reps);
	bench_rebuild("ring V=160 n=1000", "scheme: ring\n    vnodes: 160", reps);
	bench_death(quick ? 3 : 10);
	bench_first_down(quick ? 65537 : HASHLB_MAGLEV_M_MAX, 10, 3);
	printf("reproduce: %s%s\n", argv[0], quick ? " --quick" : "");
	return 0;
}
