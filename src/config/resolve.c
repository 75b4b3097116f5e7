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
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config-internal.h"
#include "hashlb/config.h"

#define RESOLVE_THREADS 16u

struct name_req {
	char host[HASHLB_HOST_MAX + 1];
	char port[6];
	int family; /* AF_UNSPEC, or the service's source family */
	bool done;
	int gai; /* getaddrinfo()'s result */
	int sys_errno; /* with EAI_SYSTEM */
	struct sockaddr_storage addr; /* the answer's first address */
	socklen_t addr_len;
};

struct hashlb_resolve {
	pthread_mutex_t lock;
	pthread_cond_t answered;
	uint32_t n, next, left; /* names; the next to take; not answered yet */
	uint32_t refs; /* the caller and each thread still running */
	bool abandoned; /* the caller has given up: take no further names */
	struct name_req reqs[];
};

static void job_put(struct hashlb_resolve *job)
{
	bool last;

	pthread_mutex_lock(&job->lock);
	last = --job->refs == 0;
	pthread_mutex_unlock(&job->lock);
	if (last) {
		pthread_cond_destroy(&job->answered);
		pthread_mutex_destroy(&job->lock);
		free(job);
	}
}

static void *resolve_thread(void *arg)
{
	struct hashlb_resolve *job = arg;

	for (;;) {
		struct addrinfo hints = { 0 }, *res = NULL;
		struct name_req *q;
		int e;

		pthread_mutex_lock(&job->lock);
		if (job->abandoned || job->next == job->n) {
			pthread_mutex_unlock(&job->lock);
			break;
		}
		q = &job->reqs[job->next++];
		pthread_mutex_unlock(&job->lock);

		hints.ai_family = q->family;
		hints.ai_socktype = SOCK_STREAM;
		hints.ai_protocol = IPPROTO_TCP;
		hints.ai_flags = AI_NUMERICSERV;
		e = getaddrinfo(q->host, q->port, &hints, &res);

		pthread_mutex_lock(&job->lock);
		q->gai = e;
		q->sys_errno = e == EAI_SYSTEM ? errno : 0;
		if (e == 0 && res && res->ai_addrlen <= sizeof(q->addr)) {
			memcpy(&q->addr, res->ai_addr, res->ai_addrlen);
			q->addr_len = res->ai_addrlen;
		} else if (e == 0) {
			q->gai = EAI_NODATA;
		}
		q->done = true;
		job->left--;
		pthread_cond_broadcast(&job->answered);
		pthread_mutex_unlock(&job->lock);
		if (res)
			freeaddrinfo(res);
	}
	job_put(job);
	return NULL;
}

/* Start up to RESOLVE_THREADS threads on <job>; 0 if at least one runs. */
static int job_start(struct hashlb_resolve *job)
{
	uint32_t want = job->n < RESOLVE_THREADS ? job->n : RESOLVE_THREADS, started = 0;
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
		if (pthread_create(&t, &attr, resolve_thread, job) != 0) {
			job_put(job); /* never the last: the caller holds one */
			break;
		}
		started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return started ? 0 : -EAGAIN;
}

/* Wait until every name of <job> is answered or <timeout_ms> passes. */
static void job_wait(struct hashlb_resolve *job, uint32_t timeout_ms)
{
	struct timespec deadline;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += timeout_ms / 1000;
	deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (deadline.tv_nsec >= 1000000000) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&job->lock);
	while (job->left > 0) {
		if (pthread_cond_timedwait(&job->answered, &job->lock, &deadline) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&job->lock);
}

static struct hashlb_resolve *job_new(uint32_t n)
{
	struct hashlb_resolve *job = calloc(1, sizeof(*job) + n * sizeof(job->reqs[0]));
	pthread_condattr_t ca;

	if (!job)
		return NULL;
	if (pthread_condattr_init(&ca) != 0) {
		free(job);
		return NULL;
	}
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&job->answered, &ca);
	pthread_condattr_destroy(&ca);
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

/* The outcome of request <q> for backend <b> of service <s>; <job> locked. */
static int take_answer(struct hashlb_config *c, const struct hashlb_service_cfg *s,
		       struct hashlb_backend_cfg *b, const struct name_req *q, uint32_t timeout_ms,
		       struct hashlb_error *err)
{
	char problem[HASHLB_NAME_MAX * 2 + 160], msg[sizeof(problem) + HASHLB_ADDR_STRLEN + 32];
	const char *family = !s->source_len		      ? ""
			     : s->source.ss_family == AF_INET ? " (as IPv4, the service's source)"
							      : " (as IPv6, the service's source)";

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
	b->addr = q->addr;
	b->addr_len = q->addr_len;
	if (hlb_backend_addr_problem(s, b, problem, sizeof(problem))) {
		char addr[HASHLB_ADDR_STRLEN];

		hashlb_addr_format(&b->addr, addr, sizeof(addr));
		snprintf(msg, sizeof(msg), "%s (the name resolved to %s)", problem, addr);
		return resolve_fail(c, b, err, -EINVAL, msg);
	}
	return 0;
}

int hashlb_config_resolve_start(const struct hashlb_config *c, struct hashlb_resolve **ret_job,
				struct hashlb_error *err)
{
	struct hashlb_resolve *job;
	uint32_t n = 0, k = 0;
	uint16_t port;
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
			q->family = s->source_len ? s->source.ss_family : AF_UNSPEC;
		}
	}
	r = job_start(job);
	if (r < 0) {
		job_put(job);
		return hashlb_err(err, r, HASHLB_ERR_SYSTEM,
				  "cannot start a thread to resolve names");
	}
	*ret_job = job;
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

int hashlb_config_resolve_finish(struct hashlb_config *c, struct hashlb_resolve *job,
				 uint32_t timeout_ms, struct hashlb_error *err)
{
	uint32_t k = 0;
	int r = 0;

	if (!job)
		return 0;
	pthread_mutex_lock(&job->lock);
	job->abandoned = true;
	for (uint32_t i = 0; i < c->n_services && r == 0; i++) {
		struct hashlb_service_cfg *s = &c->services[i];

		for (uint32_t j = 0; j < s->n_backends && r == 0; j++) {
			if (s->backends[j].addr_len)
				continue;
			r = take_answer(c, s, &s->backends[j], &job->reqs[k++], timeout_ms, err);
		}
	}
	pthread_mutex_unlock(&job->lock);
	job_put(job);
	return r;
}

int hashlb_config_resolve(struct hashlb_config *c, uint32_t timeout_ms, struct hashlb_error *err)
{
	struct hashlb_resolve *job;
	int r = hashlb_config_resolve_start(c, &job, err);

	if (r < 0 || !job)
		return r;
	job_wait(job, timeout_ms);
	return hashlb_config_resolve_finish(c, job, timeout_ms, err);
}
