// SPDX-License-Identifier: MIT
/*
 * Backend addresses written as "name:port", resolved with the system
 * resolver when a config is loaded (at start, on each reload, by check).
 *
 * All names of a config are asked at once, by up to RESOLVE_THREADS
 * threads, and waited for together up to a deadline: a config of many
 * names costs about one resolver round trip, and a resolver that does not
 * answer costs the deadline, not its own timeout once per name. A reload
 * runs on the control thread, whose health checks and admin endpoint wait
 * for it.
 *
 * A getaddrinfo() past the deadline cannot be interrupted, so its thread
 * is left to finish: the job is shared by the caller and its threads, the
 * last one out frees it, and a job given up takes no further names.
 *
 * Why not glibc's getaddrinfo_a(): its helper threads are created inside
 * glibc, out of the sanitizers' sight, and crashed the ASan build (SIGSEGV
 * in a resolved `hashlb check`, about one run in three); plain threads
 * calling getaddrinfo() are visible to every tool and as fast here.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "config-internal.h"
#include "hashlb/config.h"
#include "hashlb/table.h"
#include "name_pair.h"

#define RESOLVE_THREADS 16u

/*
 * Lookup threads alive in the process, those of jobs given up included: [0]
 * of the rounds (and of a start, a check), [1] of the reloads. Each has its
 * RESOLVE_THREADS: a reload that drops the names of a dead zone is not held
 * by the rounds' lookups stuck on them.
 */
static atomic_uint threads_alive[2];

/* The requests whose getaddrinfo() runs now, of any job (linked by in_next). */
static pthread_mutex_t in_flight_lock = PTHREAD_MUTEX_INITIALIZER;
static struct name_req *in_flight;
/* Broadcast, under in_flight_lock, when a lookup ends and when a thread does
 * (CLOCK_MONOTONIC: set up by in_flight_init(), once). */
static pthread_cond_t in_flight_ended;
static pthread_once_t in_flight_once = PTHREAD_ONCE_INIT;

/* <cond>, whose timed waits read CLOCK_MONOTONIC (deadline_in()): 0, or an errno. */
static int cond_init_monotonic(pthread_cond_t *cond)
{
	pthread_condattr_t ca;
	int r = pthread_condattr_init(&ca);

	if (r != 0)
		return r;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	r = pthread_cond_init(cond, &ca);
	pthread_condattr_destroy(&ca);
	return r;
}

static void in_flight_init(void)
{
	cond_init_monotonic(&in_flight_ended);
}

struct name_req {
	char host[HASHLB_HOST_MAX + 1];
	char port[6];
	int family; /* AF_UNSPEC, or the service's source family */
	bool all; /* each_address: every address, not the first */
	bool done;
	bool busy; /* not asked: a lookup of the name from before still runs */
	bool dup; /* not asked: the answer of reqs[same_as], the same question */
	/* a reload's, asked only once its time had gone waiting for the lookups of
	 * its names still running (job_wait_free()): not answered, it had none */
	bool late;
	bool asked; /* taken by a thread: not, if every thread was held until the deadline */
	uint32_t same_as;
	uint16_t port_num;
	int gai; /* getaddrinfo()'s result */
	int sys_errno; /* with EAI_SYSTEM */
	struct sockaddr_storage addr; /* the answer's first address */
	socklen_t addr_len;
	/* the answer's distinct addresses, sorted (owned): with <all>, the
	 * backends; else what tells whether a backend's last one is still in it */
	struct sockaddr_storage *addrs;
	uint32_t n_addrs;
	struct name_req *in_next; /* in in_flight, while asked */
};

struct hashlb_resolve {
	pthread_mutex_t lock;
	pthread_cond_t answered;
	uint32_t n, next, left; /* names; the next to take; not answered yet */
	uint32_t refs; /* the caller and each thread still running */
	bool reload; /* its threads count in threads_alive[1] */
	bool abandoned; /* the caller has given up: take no further names */
	bool paused; /* a reload runs: take no further names until resumed */
	struct name_req reqs[];
};

static void job_put(struct hashlb_resolve *job)
{
	bool last;

	pthread_mutex_lock(&job->lock);
	last = --job->refs == 0;
	pthread_mutex_unlock(&job->lock);
	if (last) {
		for (uint32_t i = 0; i < job->n; i++)
			free(job->reqs[i].addrs);
		pthread_cond_destroy(&job->answered);
		pthread_mutex_destroy(&job->lock);
		free(job);
	}
}

static socklen_t sockaddr_len(const struct sockaddr_storage *a)
{
	return a->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

/* IPv4 before IPv6, then by address (an IPv6 one's zone aside). */
static int sockaddr_cmp(const void *pa, const void *pb)
{
	const struct sockaddr_storage *a = pa, *b = pb;

	if (a->ss_family != b->ss_family)
		return a->ss_family == AF_INET ? -1 : 1;
	if (a->ss_family == AF_INET)
		return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
			      &((const struct sockaddr_in *)b)->sin_addr, sizeof(struct in_addr));
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
}

/* sockaddr_cmp(), then by zone (a link-local address's interface): the order of
 * an answer's addresses, and of an each_address name's backends. */
static int sockaddr_order(const void *pa, const void *pb)
{
	const struct sockaddr_in6 *a = pa, *b = pb;
	int d = sockaddr_cmp(pa, pb);

	if (d || a->sin6_family != AF_INET6 || a->sin6_scope_id == b->sin6_scope_id)
		return d;
	return a->sin6_scope_id < b->sin6_scope_id ? -1 : 1;
}

/*
 * The distinct IPv4 and IPv6 addresses of <res>, sorted (sockaddr_order()),
 * all of them: how many, 0 if none (*ret NULL), or -ENOMEM.
 */
static int answer_addrs(const struct addrinfo *res, struct sockaddr_storage **ret)
{
	struct sockaddr_storage *v;
	uint32_t n = 0, max = 0;
	int kept = 0;

	*ret = NULL;
	for (const struct addrinfo *r = res; r && max < INT32_MAX; r = r->ai_next)
		max++;
	if (!max || !(v = calloc(max, sizeof(*v))))
		return max ? -ENOMEM : 0;
	for (; res && n < max; res = res->ai_next) {
		if ((res->ai_family == AF_INET && res->ai_addrlen == sizeof(struct sockaddr_in)) ||
		    (res->ai_family == AF_INET6 && res->ai_addrlen == sizeof(struct sockaddr_in6)))
			memcpy(&v[n++], res->ai_addr, res->ai_addrlen);
	}
	qsort(v, n, sizeof(*v), sockaddr_order);
	for (uint32_t i = 0; i < n; i++) {
		if (kept == 0 || sockaddr_order(&v[kept - 1], &v[i]) != 0)
			v[kept++] = v[i];
	}
	if (kept == 0) {
		free(v);
		return 0;
	}
	*ret = v;
	return kept;
}

/*
 * An each_address name's members of the <n> addresses <v> (answer_addrs()'s):
 * one per address, at its lowest zone (the backends are named by address, so
 * fe80::1 on two interfaces is one), the first HASHLB_EACH_ADDRESS_MAX. Cut
 * after sorting, they do not depend on the answer's order: cut before, a
 * rotated answer of more gave other members each time.
 */
static uint32_t each_address_members(struct sockaddr_storage *v, uint32_t n)
{
	uint32_t kept = 0;

	for (uint32_t i = 0; i < n && kept < HASHLB_EACH_ADDRESS_MAX; i++) {
		if (kept == 0 || sockaddr_cmp(&v[kept - 1], &v[i]) != 0)
			v[kept++] = v[i];
	}
	return kept;
}

static void *resolve_thread(void *arg)
{
	struct hashlb_resolve *job = arg;
	atomic_uint *alive = &threads_alive[job->reload]; /* the job may be gone at the end */

	for (;;) {
		struct addrinfo hints = { 0 }, *res = NULL;
		struct sockaddr_storage *all = NULL;
		struct name_req *q;
		int n_all = 0;
		bool want_all;
		int e;

		pthread_mutex_lock(&job->lock);
		while (job->next < job->n &&
		       (job->reqs[job->next].busy || job->reqs[job->next].dup))
			job->next++;
		if (job->abandoned || job->paused || job->next == job->n) {
			/* no longer counted before the job is unlocked: a resume
			 * that finds it still alive starts no thread in its place,
			 * and the names left were never asked */
			atomic_fetch_sub(alive, 1);
			pthread_mutex_unlock(&job->lock);
			break;
		}
		q = &job->reqs[job->next++];
		q->asked = true;
		want_all = q->all;
		/* in flight before the job can be given up: a round started then sees it */
		pthread_mutex_lock(&in_flight_lock);
		q->in_next = in_flight;
		in_flight = q;
		pthread_mutex_unlock(&in_flight_lock);
		pthread_mutex_unlock(&job->lock);

		hints.ai_family = q->family;
		hints.ai_socktype = SOCK_STREAM;
		hints.ai_protocol = IPPROTO_TCP;
		hints.ai_flags = AI_NUMERICSERV;
		e = getaddrinfo(q->host, q->port, &hints, &res);
		if (e == 0)
			n_all = answer_addrs(res, &all);
		pthread_mutex_lock(&in_flight_lock);
		for (struct name_req **p = &in_flight; *p; p = &(*p)->in_next) {
			if (*p == q) {
				*p = q->in_next;
				break;
			}
		}
		pthread_cond_broadcast(&in_flight_ended);
		pthread_mutex_unlock(&in_flight_lock);

		pthread_mutex_lock(&job->lock);
		q->gai = e;
		q->sys_errno = e == EAI_SYSTEM ? errno : 0;
		if (e == 0 && want_all) {
			q->addrs = all;
			q->n_addrs = n_all > 0 ? each_address_members(all, (uint32_t)n_all) : 0;
			if (n_all <= 0)
				q->gai = n_all < 0 ? EAI_MEMORY : EAI_NODATA;
		} else if (e == 0 && res && res->ai_addrlen <= sizeof(q->addr)) {
			memcpy(&q->addr, res->ai_addr, res->ai_addrlen);
			q->addr_len = res->ai_addrlen;
			q->addrs = all; /* NULL if out of memory: the first address, then */
			q->n_addrs = n_all > 0 ? (uint32_t)n_all : 0;
		} else if (e == 0) {
			q->gai = EAI_NODATA;
			free(all);
		}
		q->done = true;
		job->left--;
		pthread_cond_broadcast(&job->answered);
		pthread_mutex_unlock(&job->lock);
		if (res)
			freeaddrinfo(res);
	}
	job_put(job);
	pthread_mutex_lock(&in_flight_lock);
	pthread_cond_broadcast(&in_flight_ended);
	pthread_mutex_unlock(&in_flight_lock);
	return NULL;
}

/*
 * Start up to <max> threads on <job>, one per name to ask at most; 0 if at
 * least one runs (or none is needed: every name busy).
 */
static int job_start(struct hashlb_resolve *job, uint32_t max)
{
	uint32_t want = job->left < max ? job->left : max, started = 0;
	sigset_t all, old;
	pthread_attr_t attr;

	if (pthread_attr_init(&attr) != 0)
		return -ENOMEM;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* The threads take no signal: a SIGTERM or SIGHUP must reach the
	 * daemon's signalfd, not end the process in a thread left to finish
	 * a lookup. They inherit this mask; the caller's is restored below. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (uint32_t i = 0; i < want; i++) {
		pthread_t t;

		pthread_mutex_lock(&job->lock);
		job->refs++;
		pthread_mutex_unlock(&job->lock);
		atomic_fetch_add(&threads_alive[job->reload], 1);
		if (pthread_create(&t, &attr, resolve_thread, job) != 0) {
			atomic_fetch_sub(&threads_alive[job->reload], 1);
			job_put(job); /* never the last: the caller holds one */
			break;
		}
		started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return started || !want ? 0 : -EAGAIN;
}

/* The CLOCK_MONOTONIC time <ms> from now. */
static struct timespec deadline_in(uint32_t ms)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (long)(ms % 1000) * 1000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	return t;
}

/* Wait until every name of <job> is answered or <deadline> passes. */
static void job_wait(struct hashlb_resolve *job, const struct timespec *deadline)
{
	pthread_mutex_lock(&job->lock);
	while (job->left > 0) {
		if (pthread_cond_timedwait(&job->answered, &job->lock, deadline) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&job->lock);
}

static struct hashlb_resolve *job_new(uint32_t n)
{
	struct hashlb_resolve *job = calloc(1, sizeof(*job) + n * sizeof(job->reqs[0]));

	if (!job)
		return NULL;
	if (cond_init_monotonic(&job->answered) != 0) {
		free(job);
		return NULL;
	}
	pthread_mutex_init(&job->lock, NULL);
	job->n = job->left = n;
	job->refs = 1;
	return job;
}

static int resolve_fail(struct hashlb_config *c, const struct hashlb_backend_cfg *b,
			struct hashlb_error *err, int ret, const char *msg)
{
	ret = hashlb_err(err, ret, HASHLB_ERR_CONFIG, "%s", msg);
	if (err) {
		err->file = c->path;
		err->line = b->address_pos.line;
		err->column = b->address_pos.column;
	}
	return ret;
}

/*
 * resolve_fail() for the names resolved, their backends refused (<reason>: what is wrong with
 * them, not HASHLB_ERR_CONFIG, a name's failure): a round tells it from a name that failed by
 * it, and says so (hashlb_config_resolve()).
 */
static int resolve_refused(struct hashlb_config *c, const struct hashlb_backend_cfg *b,
			   struct hashlb_error *err, enum hashlb_err_reason reason, const char *msg)
{
	int ret = resolve_fail(c, b, err, -EINVAL, msg);

	if (err)
		err->reason = reason;
	return ret;
}

/*
 * -EINVAL, with its reason, if backend <b> of service <s> has an address
 * (a name's answer) that no connect can use: 0.0.0.0, the service's own,
 * a zone-less link-local one, one of the other family than the source.
 */
static int address_refused(struct hashlb_config *c, const struct hashlb_service_cfg *s,
			   const struct hashlb_backend_cfg *b, struct hashlb_error *err)
{
	char problem[HASHLB_NAME_MAX * 2 + 160], msg[sizeof(problem) + HASHLB_ADDR_STRLEN + 32];
	char addr[HASHLB_ADDR_STRLEN];

	if (!hlb_backend_addr_problem(s, b, problem, sizeof(problem)))
		return 0;
	hashlb_addr_format(&b->addr, addr, sizeof(addr));
	snprintf(msg, sizeof(msg), "%s (the name resolved to %s)", problem, addr);
	return resolve_fail(c, b, err, -EINVAL, msg);
}

/* The outcome of request <q> for backend <b> of service <s>; <job> locked. */
static int take_answer(struct hashlb_config *c, const struct hashlb_service_cfg *s,
		       struct hashlb_backend_cfg *b, const struct name_req *q, uint32_t timeout_ms,
		       struct hashlb_error *err)
{
	char msg[HASHLB_NAME_MAX * 2 + 160 + HASHLB_ADDR_STRLEN + 32];
	int fam = hlb_service_backend_family(s);
	const char *family = fam == AF_UNSPEC ? ""
			     : s->source_len  ? fam == AF_INET ? " (as IPv4, the service's source)"
							       : " (as IPv6, the service's source)"
			     : fam == AF_INET ? " (as IPv4, the service's clients: source: client)"
					      : " (as IPv6, the service's clients: source: client)";

	if (q->busy) {
		snprintf(msg, sizeof(msg),
			 "backend '%s': the name in '%s' was not asked again: its lookup of an "
			 "earlier round or reload still waits on the resolver",
			 b->name, b->address);
		return resolve_fail(c, b, err, -EBUSY, msg);
	}
	if (!q->done && q->late) {
		/* not the name's doing: say whose (it may come first in the file) */
		snprintf(msg, sizeof(msg),
			 "backend '%s': the name in '%s' was not asked in time: the %u ms went "
			 "waiting for lookups of the config's names still running (an earlier "
			 "round's or reload's, the resolver not answering)",
			 b->name, b->address, timeout_ms);
		return resolve_fail(c, b, err, -ETIMEDOUT, msg);
	}
	if (!q->done && !q->asked) {
		/* not the resolver's answer to it: it had none to give */
		snprintf(msg, sizeof(msg),
			 "backend '%s': the name in '%s' was not asked: the %u ms went with "
			 "every lookup thread (%u at most) held by lookups still waiting on the "
			 "resolver",
			 b->name, b->address, timeout_ms, RESOLVE_THREADS);
		return resolve_fail(c, b, err, -ETIMEDOUT, msg);
	}
	if (!q->done) {
		snprintf(msg, sizeof(msg),
			 "backend '%s': the name in '%s' did not resolve: no answer within %u ms",
			 b->name, b->address, timeout_ms);
		return resolve_fail(c, b, err, -ETIMEDOUT, msg);
	}
	if (q->gai == EAI_NONAME || q->gai == EAI_NODATA || q->gai == EAI_ADDRFAMILY) {
		snprintf(msg, sizeof(msg), "backend '%s': the name in '%s' does not resolve%s: %s",
			 b->name, b->address, family, gai_strerror(q->gai));
		return resolve_fail(c, b, err, -ENOENT, msg);
	}
	if (q->gai != 0) {
		snprintf(msg, sizeof(msg), "backend '%s': the name in '%s' did not resolve: %s",
			 b->name, b->address,
			 q->gai == EAI_SYSTEM ? strerror(q->sys_errno) : gai_strerror(q->gai));
		return resolve_fail(c, b, err, -EAGAIN, msg);
	}
	if (!b->each_address) {
		b->addr = q->addr;
		b->addr_len = q->addr_len;
		return address_refused(c, s, b, err);
	}
	/* every address, before expand() takes them: one no connect can use
	 * fails the name as a whole, as a name that does not resolve does */
	for (uint32_t i = 0; i < q->n_addrs; i++) {
		struct hashlb_backend_cfg e = *b;

		e.addr = q->addrs[i];
		e.addr_len = sockaddr_len(&q->addrs[i]);
		if (address_refused(c, s, &e, err) < 0)
			return -EINVAL;
	}
	return 0;
}

/* What an each_address entry gives for address <a>: the entry with its name. */
static int expanded(const struct hashlb_backend_cfg *b, const struct sockaddr_storage *a,
		    struct hashlb_backend_cfg *e)
{
	char ip[INET6_ADDRSTRLEN];
	const void *raw = a->ss_family == AF_INET
				  ? (const void *)&((const struct sockaddr_in *)a)->sin_addr
				  : (const void *)&((const struct sockaddr_in6 *)a)->sin6_addr;

	*e = *b;
	e->each_address = false;
	e->addr = *a;
	e->addr_len = sockaddr_len(a);
	inet_ntop(a->ss_family, raw, ip, sizeof(ip));
	e->name = e->address = NULL;
	e->answer = NULL;
	e->n_answer = 0;
	if (asprintf(&e->name, "%s@%s", b->name, ip) < 0) {
		e->name = NULL;
		return -ENOMEM;
	}
	e->address = strdup(b->address);
	e->from_name = strdup(b->name);
	return e->address && e->from_name ? 0 : -ENOMEM;
}

static void backends_free(struct hashlb_backend_cfg *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].address);
		free(v[i].from_name);
		free(v[i].answer);
	}
	free(v);
}

/*
 * Service <s>'s each_address entries, answered by <q_of> (the request of
 * each of its backends, by index; NULL for an address written as numbers),
 * replaced with one backend per address; then the names and the table
 * checked again, as the loader does. (The requests are given per backend:
 * a backend of a name resolved by take_answer() has its address set by
 * now, and cannot be told from one written as numbers.)
 */
static int expand(struct hashlb_config *c, struct hashlb_service_cfg *s,
		  const struct name_req *const *q_of, struct hashlb_error *err)
{
	char msg[HASHLB_NAME_MAX * 2 + 160 + HASHLB_ADDR_STRLEN + 64];
	struct hashlb_error cerr = { 0 };
	struct hashlb_backend_cfg *v;
	uint64_t n = 0;
	uint32_t o = 0, dup, first;
	int r;

	for (uint32_t j = 0; j < s->n_backends; j++)
		n += s->backends[j].each_address ? q_of[j]->n_addrs : 1;
	if (n > HASHLB_BACKENDS_MAX) {
		snprintf(msg, sizeof(msg),
			 "service '%s' has %llu backends once its names are resolved: at most %u",
			 s->name, (unsigned long long)n, HASHLB_BACKENDS_MAX);
		/* -EINVAL as the table's own refusal (-E2BIG is table_memory's) */
		return resolve_refused(c, &s->backends[0], err, HASHLB_ERR_TOO_MANY_BACKENDS, msg);
	}
	v = calloc(n, sizeof(*v));
	if (!v)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	for (uint32_t j = 0; j < s->n_backends; j++) {
		struct hashlb_backend_cfg *b = &s->backends[j];
		const struct name_req *q = q_of[j];

		if (!b->each_address) {
			v[o++] = *b;
			*b = (struct hashlb_backend_cfg){ 0 }; /* moved */
			continue;
		}
		for (uint32_t a = 0; a < q->n_addrs; a++) {
			r = expanded(b, &q->addrs[a], &v[o++]);
			if (r < 0) {
				backends_free(v, o);
				return hashlb_err(err, r, HASHLB_ERR_NOMEM, "out of memory");
			}
		}
	}
	/* The entries left are each_address ones, now expanded, and moved-out zeroes. */
	backends_free(s->backends, s->n_backends);
	s->backends = v;
	s->n_backends = (uint32_t)n;

	r = hlb_duplicate_backend(s, &dup, &first);
	if (r < 0)
		return hashlb_err(err, r, HASHLB_ERR_NOMEM, "out of memory");
	if (r > 0) {
		const struct hashlb_backend_cfg *b =
			s->backends[dup].from_name ? &s->backends[dup] : &s->backends[first];

		snprintf(msg, sizeof(msg),
			 "backend '%s' (each_address) gives the name '%s', which another backend "
			 "of service '%s' has",
			 b->from_name, b->name, s->name);
		return resolve_refused(c, b, err, HASHLB_ERR_DUPLICATE_NAME, msg);
	}
	r = hashlb_service_cfg_check_table(s, &cerr);
	if (r < 0 && cerr.reason == HASHLB_ERR_NOMEM)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	if (r < 0) {
		snprintf(msg, sizeof(msg), "service '%s', its names resolved: %s", s->name,
			 cerr.msg);
		/* -EINVAL as the loader's (a table's own cap too: -E2BIG is table_memory's),
		 * the table's reason kept (a Maglev table_size below the backends, the build's
		 * cap) */
		return resolve_refused(c, &s->backends[0], err, cerr.reason, msg);
	}
	return 0;
}

/*
 * Whether a lookup of <q>'s question runs now (of a job given up, or of a
 * reload): the same host and family, the port aside (it asks nothing). A
 * lookup of both families does not hold one of IPv4 only: a DNS server that
 * drops AAAA queries (some middleboxes do) holds the first to its timeout
 * and answers the second at once.
 */
static bool in_flight_locked(const struct name_req *q)
{
	for (const struct name_req *f = in_flight; f; f = f->in_next) {
		if (f->family == q->family && !strcasecmp(f->host, q->host))
			return true;
	}
	return false;
}

static bool host_in_flight(const struct name_req *q)
{
	bool found;

	pthread_mutex_lock(&in_flight_lock);
	found = in_flight_locked(q);
	pthread_mutex_unlock(&in_flight_lock);
	return found;
}

/*
 * For a reload: wait, up to <deadline>, until no lookup of <job>'s names
 * runs and a thread of the reloads' RESOLVE_THREADS is free. The lookups of a round
 * given up as the reload began end in milliseconds, a dead resolver's at its
 * timeout: the reload failed when a round was under way ("was not asked
 * again"), and fails after its deadline behind a dead resolver, as before.
 */
static bool job_wait_free(const struct hashlb_resolve *job, const struct timespec *deadline)
{
	bool busy;

	pthread_mutex_lock(&in_flight_lock);
	for (;;) {
		busy = atomic_load(&threads_alive[1]) >= RESOLVE_THREADS;
		for (uint32_t i = 0; i < job->n && !busy; i++)
			busy = in_flight_locked(&job->reqs[i]);
		if (!busy || pthread_cond_timedwait(&in_flight_ended, &in_flight_lock, deadline) ==
				     ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&in_flight_lock);
	return busy;
}

/*
 * Mark <job>'s names whose lookup from before still runs as not asked
 * (busy, answered as failed); how many threads it may start then, of the
 * RESOLVE_THREADS of its kind (a round's, a reload's) in the process;
 * -EBUSY if none and a name is to be asked.
 */
static int job_again(struct hashlb_resolve *job, uint32_t *max, struct hashlb_error *err)
{
	uint32_t alive = atomic_load(&threads_alive[job->reload]);

	for (uint32_t i = 0; i < job->n; i++) {
		struct name_req *q = &job->reqs[i];

		if (q->dup || !host_in_flight(q))
			continue;
		q->busy = q->done = true;
		q->gai = EAI_AGAIN;
		job->left--;
	}
	*max = alive < RESOLVE_THREADS ? RESOLVE_THREADS - alive : 0;
	if (*max == 0 && job->left > 0 && job->reload)
		return hashlb_err(
			err, -EBUSY, HASHLB_ERR_SYSTEM,
			"names not asked: %u lookups of earlier reloads still wait on the "
			"resolver (at most %u at once)",
			alive, RESOLVE_THREADS);
	if (*max == 0 && job->left > 0)
		return hashlb_err(err, -EBUSY, HASHLB_ERR_SYSTEM,
				  "round skipped: %u lookups of an earlier one still wait on the "
				  "resolver",
				  alive);
	return 0;
}

/* The same question: host (case aside), family, and every address or not. */
static int req_cmp(const void *pa, const void *pb)
{
	const struct name_req *a = *(const struct name_req *const *)pa;
	const struct name_req *b = *(const struct name_req *const *)pb;
	int d = strcasecmp(a->host, b->host);

	if (d)
		return d;
	if (a->family != b->family)
		return a->family < b->family ? -1 : 1;
	if (a->all != b->all)
		return a->all ? 1 : -1;
	return a < b ? -1 : a > b; /* the first written asks */
}

/*
 * Mark each of <job>'s requests that asks what an earlier one does (the same
 * host on other ports, in another service) as its dup, not asked: each
 * backend asked for itself, as many lookups and DNS queries per round as
 * backends of one host. 0, or -ENOMEM.
 */
static int job_dedupe(struct hashlb_resolve *job)
{
	struct name_req **v = calloc(job->n, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < job->n; i++)
		v[i] = &job->reqs[i];
	qsort(v, job->n, sizeof(*v), req_cmp);
	for (uint32_t i = 1, first = 0; i < job->n; i++) {
		const struct name_req *o = v[first];

		if (strcasecmp(o->host, v[i]->host) || o->family != v[i]->family ||
		    o->all != v[i]->all) {
			first = i;
			continue;
		}
		v[i]->dup = true;
		v[i]->same_as = (uint32_t)(o - job->reqs);
		job->left--;
	}
	free(v);
	return 0;
}

static void set_port(struct sockaddr_storage *a, uint16_t port)
{
	if (a->ss_family == AF_INET)
		((struct sockaddr_in *)a)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)a)->sin6_port = htons(port);
}

/* Dup <q> answered as <o> was, at its own port; <job> locked. */
static void req_copy(struct name_req *q, const struct name_req *o)
{
	q->done = o->done;
	q->busy = o->busy;
	q->asked = o->asked;
	q->gai = o->gai;
	q->sys_errno = o->sys_errno;
	q->addr = o->addr;
	q->addr_len = o->addr_len;
	if (q->addr_len)
		set_port(&q->addr, q->port_num);
	if (!o->n_addrs)
		return;
	q->addrs = calloc(o->n_addrs, sizeof(*q->addrs));
	if (!q->addrs) {
		if (q->all)
			q->gai = EAI_MEMORY;
		return;
	}
	q->n_addrs = o->n_addrs;
	for (uint32_t i = 0; i < q->n_addrs; i++) {
		q->addrs[i] = o->addrs[i];
		set_port(&q->addrs[i], q->port_num);
	}
}

/* How start() asks: every name (at start, by check), or as job_again() says. */
enum ask { ASK_ALL, ASK_ROUND, ASK_RELOAD, ASK_MAX };

/* <deadline>: with ASK_RELOAD, how long to wait for the lookups still running. */
static int start(const struct hashlb_config *c, enum ask ask, const struct timespec *deadline,
		 struct hashlb_resolve **ret_job, struct hashlb_error *err)
{
	struct hashlb_resolve *job;
	uint32_t n = 0, k = 0, max = RESOLVE_THREADS;
	uint16_t port;
	bool late;
	int r;

	for (uint32_t i = 0; i < c->n_services; i++) {
		for (uint32_t j = 0; j < c->services[i].n_backends; j++)
			n += !c->services[i].backends[j].addr_len;
	}
	if (n == 0) {
		*ret_job = NULL;
		return 0;
	}
	job = job_new(n);
	if (!job)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	job->reload = ask == ASK_RELOAD;
	for (uint32_t i = 0; i < c->n_services; i++) {
		const struct hashlb_service_cfg *s = &c->services[i];

		for (uint32_t j = 0; j < s->n_backends; j++) {
			struct name_req *q = &job->reqs[k];

			if (s->backends[j].addr_len)
				continue;
			k++;
			/* checked when the config was parsed */
			if (hashlb_name_addr_parse(s->backends[j].address, q->host, &port) < 0) {
				job_put(job);
				return hashlb_err(err, -EINVAL, HASHLB_ERR_CONFIG,
						  "'%s' is no name:port", s->backends[j].address);
			}
			snprintf(q->port, sizeof(q->port), "%u", port);
			q->port_num = port;
			q->family = hlb_service_backend_family(s);
			q->all = s->backends[j].each_address;
		}
	}
	r = job_dedupe(job);
	if (r < 0) {
		job_put(job);
		return hashlb_err(err, r, HASHLB_ERR_NOMEM, "out of memory");
	}
	pthread_once(&in_flight_once, in_flight_init);
	late = ask == ASK_RELOAD && job_wait_free(job, deadline);
	if (ask != ASK_ALL && (r = job_again(job, &max, err)) < 0) {
		job_put(job);
		return r;
	}
	for (uint32_t i = 0; i < job->n && late; i++)
		job->reqs[i].late = true;
	r = job_start(job, max);
	if (r < 0) {
		job_put(job);
		return hashlb_err(err, r, HASHLB_ERR_SYSTEM,
				  "cannot start a thread to resolve names");
	}
	*ret_job = job;
	return 0;
}

int hashlb_config_resolve_start(const struct hashlb_config *c, struct hashlb_resolve **ret_job,
				struct hashlb_error *err)
{
	return start(c, ASK_ALL, NULL, ret_job, err);
}

int hashlb_config_resolve_again(const struct hashlb_config *c, struct hashlb_resolve **ret_job,
				struct hashlb_error *err)
{
	return start(c, ASK_ROUND, NULL, ret_job, err);
}

void hashlb_resolve_pause(struct hashlb_resolve *job)
{
	pthread_mutex_lock(&job->lock);
	job->paused = true;
	pthread_mutex_unlock(&job->lock);
}

/* Whether a lookup of another job asks <q>'s question now; in_flight_lock held. */
static bool in_flight_elsewhere(const struct hashlb_resolve *job, const struct name_req *q)
{
	for (const struct name_req *f = in_flight; f; f = f->in_next) {
		if (f >= job->reqs && f < job->reqs + job->n)
			continue; /* its own: another question (deduplicated) */
		if (f->family == q->family && !strcasecmp(f->host, q->host))
			return true;
	}
	return false;
}

int hashlb_resolve_resume(struct hashlb_resolve *job, struct hashlb_error *err)
{
	uint32_t alive, max, todo = 0;

	pthread_mutex_lock(&job->lock);
	job->paused = false;
	/* the names not taken yet whose lookup (a reload's, given up at its
	 * deadline) still runs: not asked again, as job_again() has it */
	pthread_mutex_lock(&in_flight_lock);
	for (uint32_t i = job->next; i < job->n; i++) {
		struct name_req *q = &job->reqs[i];

		if (q->dup || q->busy)
			continue;
		if (!in_flight_elsewhere(job, q)) {
			todo++;
			continue;
		}
		q->busy = q->done = true;
		q->gai = EAI_AGAIN;
		job->left--;
	}
	pthread_mutex_unlock(&in_flight_lock);
	pthread_mutex_unlock(&job->lock);
	/* its threads that still run (a lookup begun before the pause) go on
	 * too: counted among those alive */
	alive = atomic_load(&threads_alive[job->reload]);
	max = alive < RESOLVE_THREADS ? RESOLVE_THREADS - alive : 0;
	if (max > todo)
		max = todo;
	if (max && job_start(job, max) < 0)
		return hashlb_err(err, -EAGAIN, HASHLB_ERR_SYSTEM,
				  "cannot start a thread to resolve names");
	return 0;
}

bool hashlb_resolve_done(struct hashlb_resolve *job)
{
	bool done;

	pthread_mutex_lock(&job->lock);
	done = job->left == 0;
	pthread_mutex_unlock(&job->lock);
	return done;
}

/* A name asked and not answered with an address (no answer in time, or an error). */
static bool name_failed(const struct name_req *q)
{
	return !q->done || q->gai != 0;
}

/*
 * The backends of the config running that a name gave, sorted by service
 * and name (an each_address one's by its entry's name): each name of a round
 * finds its own in log time. Scanned for each name (and the backends by name
 * in the control plane's comparison), a round cost the control thread 274 ms
 * at 5,000 named backends and 903 ms at 10,000; 92 and 108 ms sorted.
 */
struct last_ref {
	const char *svc;
	const char *name; /* from_name, or name */
	const struct hashlb_backend_cfg *b;
};

struct last_index {
	struct last_ref *v;
	uint32_t n;
};

int hlb_name_pair_cmp(const char *svc_a, const char *name_a, const char *svc_b, const char *name_b)
{
	int d = strcmp(svc_a, svc_b);

	return d ? d : strcmp(name_a, name_b);
}

static int last_ref_cmp(const void *pa, const void *pb)
{
	const struct last_ref *a = pa, *b = pb;

	return hlb_name_pair_cmp(a->svc, a->name, b->svc, b->name);
}

/* <ix> over <last>'s backends written with a host name: 0, or -ENOMEM. */
static int last_index_build(const struct hashlb_config *last, struct last_index *ix)
{
	uint32_t n = 0;

	*ix = (struct last_index){ 0 };
	for (uint32_t i = 0; i < last->n_services; i++) {
		for (uint32_t j = 0; j < last->services[i].n_backends; j++) {
			const struct hashlb_backend_cfg *lb = &last->services[i].backends[j];

			n += lb->addr_len && lb->address && hashlb_addr_is_name(lb->address);
		}
	}
	if (n && !(ix->v = calloc(n, sizeof(*ix->v))))
		return -ENOMEM;
	for (uint32_t i = 0; i < last->n_services; i++) {
		const struct hashlb_service_cfg *ls = &last->services[i];

		for (uint32_t j = 0; j < ls->n_backends; j++) {
			const struct hashlb_backend_cfg *lb = &ls->backends[j];

			if (lb->addr_len && lb->address && hashlb_addr_is_name(lb->address))
				ix->v[ix->n++] = (struct last_ref){
					ls->name, lb->from_name ? lb->from_name : lb->name, lb
				};
		}
	}
	if (ix->n)
		qsort(ix->v, ix->n, sizeof(*ix->v), last_ref_cmp);
	return 0;
}

/* The first of <ix>'s backends of service <s> and name <name>, or ix->n. */
static uint32_t last_first(const struct last_index *ix, const struct hashlb_service_cfg *s,
			   const char *name)
{
	struct last_ref key = { s->name, name, NULL };
	uint32_t lo = 0, hi = ix->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (last_ref_cmp(&ix->v[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Whether the backend of <r> was given by backend <b>'s entry: the same name,
 * the same address as written, and an each_address entry's backend for one.
 */
static bool last_of(const struct last_ref *r, const struct hashlb_backend_cfg *b)
{
	const struct hashlb_backend_cfg *lb = r->b;

	return !strcmp(r->name, b->name) && !strcmp(lb->address, b->address) &&
	       !lb->from_name == !b->each_address;
}

/* Service <s>'s backend <b> (not each_address) in <ix>, resolved; or NULL. */
static const struct hashlb_backend_cfg *last_backend(const struct last_index *ix,
						     const struct hashlb_service_cfg *s,
						     const struct hashlb_backend_cfg *b)
{
	for (uint32_t i = last_first(ix, s, b->name);
	     i < ix->n && !strcmp(ix->v[i].svc, s->name) && !strcmp(ix->v[i].name, b->name); i++) {
		if (last_of(&ix->v[i], b))
			return ix->v[i].b;
	}
	return NULL;
}

/*
 * Backend <b> of service <s> resolved by <q>: if the address the config
 * running (<ix>) has for it is still in the answer, it stays there. A name of
 * several addresses is answered in an order that DNS servers rotate (BIND's
 * rrset-order cyclic): taking the first each time moved the backend each
 * round, a new backend with its slow start and health verdict begun again.
 * Unless <s> refuses that address now (a reload moved its listen address
 * there): the backend takes the answer's first, checked already.
 */
static void stay_put(const struct last_index *ix, const struct hashlb_service_cfg *s,
		     struct hashlb_backend_cfg *b, const struct name_req *q)
{
	const struct hashlb_backend_cfg *lb = last_backend(ix, s, b);
	char problem[HASHLB_NAME_MAX * 2 + 160];
	struct hashlb_backend_cfg e;

	if (!lb || lb->addr_len != b->addr_len)
		return;
	for (uint32_t i = 0; i < q->n_addrs; i++) {
		if (sockaddr_len(&q->addrs[i]) == lb->addr_len &&
		    !memcmp(&q->addrs[i], &lb->addr, lb->addr_len)) {
			e = *b;
			e.addr = lb->addr;
			if (!hlb_backend_addr_problem(s, &e, problem, sizeof(problem)))
				b->addr = lb->addr;
			return;
		}
	}
}

/*
 * The name of backend <b> of service <s> did not resolve: what the config
 * running (<ix>, of the same text) has for it, into <b> (a backend's
 * address) or a new request in *ret_q (an each_address entry's addresses).
 * 0, -ENOENT when it has nothing for it, or -ENOMEM.
 */
static int keep_last(const struct last_index *ix, const struct hashlb_service_cfg *s,
		     struct hashlb_backend_cfg *b, struct name_req **ret_q)
{
	const struct hashlb_backend_cfg *kept;
	uint32_t first = last_first(ix, s, b->name), end = first, n = 0;
	struct name_req *q;

	if (!b->each_address) {
		if (!(kept = last_backend(ix, s, b)))
			return -ENOENT;
		b->addr = kept->addr;
		b->addr_len = kept->addr_len;
		return 0;
	}
	for (; end < ix->n && !strcmp(ix->v[end].svc, s->name) && !strcmp(ix->v[end].name, b->name);
	     end++)
		n += last_of(&ix->v[end], b);
	if (!n)
		return -ENOENT;
	q = calloc(1, sizeof(*q));
	if (q)
		q->addrs = calloc(n, sizeof(*q->addrs));
	if (!q || !q->addrs) {
		free(q);
		return -ENOMEM;
	}
	for (uint32_t i = first; i < end; i++) {
		if (last_of(&ix->v[i], b))
			q->addrs[q->n_addrs++] = ix->v[i].b->addr;
	}
	qsort(q->addrs, q->n_addrs, sizeof(*q->addrs), sockaddr_order);
	q->done = true;
	*ret_q = q;
	return 0;
}

/*
 * table_memory counted again over <c>'s backends as resolved: an
 * each_address entry is as many backends as its name has addresses, and
 * a ring's table as many times the points. Past it: -E2BIG, HASHLB_ERR_MEMORY_CAP,
 * the names resolved (a round says it so, not as names that failed).
 */
static int table_memory_again(struct hashlb_config *c, struct hashlb_error *err)
{
	int r = 0;

	c->table_bytes = 0;
	for (uint32_t i = 0; i < c->n_services && r == 0; i++) {
		const struct hashlb_service_cfg *s = &c->services[i];

		r = hashlb_table_memory_add(c, s, hashlb_service_cfg_table_bytes_max(s),
					    HASHLB_TABLE_MEMORY_RESOLVED, &c->table_bytes, err);
		/* -E2BIG, as every table_memory refusal: the round tells it from a name's
		 * failure by its reason (before, -EINVAL, as a name's) */
		if (r == -E2BIG && err)
			err->file = c->path;
	}
	return r;
}

/* <b>'s answer, <q>'s addresses, kept with it (out of memory: none kept). */
static void answer_keep(struct hashlb_backend_cfg *b, const struct name_req *q)
{
	free(b->answer);
	b->answer = NULL;
	b->n_answer = 0;
	if (!q->n_addrs || !(b->answer = calloc(q->n_addrs, sizeof(*b->answer))))
		return;
	memcpy(b->answer, q->addrs, q->n_addrs * sizeof(*b->answer));
	b->n_answer = q->n_addrs;
}

static int kept_cmp(const void *pa, const void *pb)
{
	const struct hashlb_addr_kept *a = pa, *b = pb;

	return hlb_name_pair_cmp(a->svc, a->name, b->svc, b->name);
}

uint32_t hashlb_config_keep_addresses(struct hashlb_config *c, struct hashlb_addr_kept *v,
				      uint32_t n)
{
	char problem[HASHLB_NAME_MAX * 2 + 160];
	uint32_t moved = 0;

	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), kept_cmp);
	for (uint32_t i = 0; i < c->n_services; i++) {
		struct hashlb_service_cfg *s = &c->services[i];

		for (uint32_t j = 0; j < s->n_backends; j++) {
			struct hashlb_backend_cfg *b = &s->backends[j], e;
			struct hashlb_addr_kept key = { .svc = s->name, .name = b->name };
			const struct hashlb_addr_kept *k;
			socklen_t len;

			if (!b->n_answer || !(k = bsearch(&key, v, n, sizeof(*v), kept_cmp)) ||
			    strcmp(k->address, b->address))
				continue;
			len = sockaddr_len(&k->addr);
			if (len == b->addr_len && !memcmp(&k->addr, &b->addr, len))
				continue; /* there already */
			for (uint32_t a = 0; a < b->n_answer; a++) {
				if (sockaddr_len(&b->answer[a]) != len ||
				    memcmp(&b->answer[a], &k->addr, len))
					continue;
				e = *b;
				e.addr = k->addr;
				e.addr_len = len;
				if (!hlb_backend_addr_problem(s, &e, problem, sizeof(problem))) {
					b->addr = k->addr;
					b->addr_len = len;
					moved++;
				}
				break;
			}
		}
	}
	return moved;
}

/*
 * -EINVAL if the names' answers make services of <c> forward to one another in a
 * ring (hlb_services_loop()), at the address of the backend that closes it, as
 * a name resolved to its own service's address is refused (address_refused()).
 * Reason HASHLB_ERR_LOOP, not a name's failure: a round of resolve_every says the
 * names resolved and their addresses refused (it said "names not resolved").
 */
static int loop_again(struct hashlb_config *c, struct hashlb_error *err)
{
	char msg[2 * HASHLB_NAME_MAX + 512];
	uint32_t si, bi;
	int r = hlb_services_loop(c, &si, &bi, msg, sizeof(msg));

	if (r < 0)
		return hashlb_err(err, r, HASHLB_ERR_NOMEM, "out of memory");
	return r ? resolve_refused(c, &c->services[si].backends[bi], err, HASHLB_ERR_LOOP, msg) : 0;
}

/*
 * hashlb_config_resolve_finish(); with <last>, a backend stays at the address
 * <last> has for it while the answer still has it (stay_put()), and with
 * <keep> too, _finish_keep(): a name that failed keeps what <last> has for
 * it (its first failure into <failed>).
 */
static int finish(struct hashlb_config *c, struct hashlb_resolve *job, uint32_t timeout_ms,
		  const struct hashlb_config *last, bool keep, struct hashlb_error *failed,
		  struct hashlb_error *err)
{
	struct last_index ix = { 0 };
	uint32_t k = 0;
	int r = 0;

	if (failed)
		*failed = (struct hashlb_error){ 0 };
	if (!job)
		return 0;
	if (last && last_index_build(last, &ix) < 0)
		r = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	pthread_mutex_lock(&job->lock);
	job->abandoned = true;
	for (uint32_t i = 0; i < c->n_services && r == 0; i++) {
		struct hashlb_service_cfg *s = &c->services[i];
		uint32_t n = s->n_backends ? s->n_backends : 1;
		const struct name_req **q_of = calloc(n, sizeof(*q_of));
		/* requests of our own, for the each_address entries kept (a thread
		 * still asking a name may yet write into the job's) */
		struct name_req **kept = calloc(n, sizeof(*kept));
		bool each = false;

		if (!q_of || !kept) {
			free(q_of);
			free(kept);
			r = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
			break;
		}
		for (uint32_t j = 0; j < s->n_backends && r == 0; j++) {
			struct hashlb_backend_cfg *b = &s->backends[j];
			struct hashlb_error e = { 0 };

			if (b->addr_len)
				continue;
			if (job->reqs[k].dup)
				req_copy(&job->reqs[k], &job->reqs[job->reqs[k].same_as]);
			q_of[j] = &job->reqs[k++];
			each |= b->each_address;
			r = take_answer(c, s, b, q_of[j], timeout_ms, &e);
			if (r == 0 && !b->each_address)
				answer_keep(b, q_of[j]);
			if (r == 0 && last && !b->each_address)
				stay_put(&ix, s, b, q_of[j]);
			/* no answer, or one no connect can use (-EINVAL) */
			if (r < 0 && last && keep && (name_failed(q_of[j]) || r == -EINVAL)) {
				int kr = keep_last(&ix, s, b, &kept[j]);

				if (kr == 0) {
					if (kept[j])
						q_of[j] = kept[j];
					if (failed && failed->reason == HASHLB_ERR_NONE)
						*failed = e;
					r = 0;
				} else if (kr == -ENOMEM) {
					r = hashlb_err(&e, kr, HASHLB_ERR_NOMEM, "out of memory");
				}
			}
			if (r < 0 && err)
				*err = e;
		}
		if (r == 0 && each)
			r = expand(c, s, q_of, err);
		for (uint32_t j = 0; j < n; j++) { /* expand() changed s->n_backends */
			if (kept[j])
				free(kept[j]->addrs);
			free(kept[j]);
		}
		free(kept);
		free(q_of);
	}
	pthread_mutex_unlock(&job->lock);
	job_put(job);
	free(ix.v);
	if (r == 0)
		r = table_memory_again(c, err);
	if (r == 0)
		r = loop_again(c, err);
	return r;
}

int hashlb_config_resolve_finish(struct hashlb_config *c, struct hashlb_resolve *job,
				 uint32_t timeout_ms, struct hashlb_error *err)
{
	return finish(c, job, timeout_ms, NULL, false, NULL, err);
}

int hashlb_config_resolve_finish_keep(struct hashlb_config *c, struct hashlb_resolve *job,
				      uint32_t timeout_ms, const struct hashlb_config *last,
				      struct hashlb_error *failed, struct hashlb_error *err)
{
	return finish(c, job, timeout_ms, last, true, failed, err);
}

int hashlb_config_resolve_after(struct hashlb_config *c, uint32_t timeout_ms,
				const struct hashlb_config *last, struct hashlb_error *err)
{
	struct timespec deadline = deadline_in(timeout_ms);
	struct hashlb_resolve *job;
	/* a reload: lookups of earlier rounds and reloads may still run */
	int r = start(c, last ? ASK_RELOAD : ASK_ALL, &deadline, &job, err);

	if (r < 0 || !job)
		return r;
	job_wait(job, &deadline);
	return finish(c, job, timeout_ms, last, false, NULL, err);
}

int hashlb_config_resolve(struct hashlb_config *c, uint32_t timeout_ms, struct hashlb_error *err)
{
	return hashlb_config_resolve_after(c, timeout_ms, NULL, err);
}
