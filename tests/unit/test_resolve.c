// SPDX-License-Identifier: MIT
/*
 * Names resolved against answers this test gives (getaddrinfo() is wrapped at
 * link time): what a name's backends are does not depend on the order of its
 * answer, which DNS servers rotate.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hashlb/config.h"

#define ANSWER_MAX 2048

/* The answer every name gets, in this order (set before resolving: the
 * resolver's threads only read it). */
static struct sockaddr_storage answer[ANSWER_MAX];
static size_t answer_n;
static atomic_uint asked; /* getaddrinfo() calls */
/* A lookup of stuck.test waits until released, as one of a resolver that does not answer. */
static pthread_mutex_t stuck_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stuck_cond = PTHREAD_COND_INITIALIZER;
static unsigned stuck_in;
static bool stuck_released;
/* The same for each heldN.test, released on their own (held_released). */
static unsigned held_in;
static bool held_released;
/* Two more such gates: "waitN.test" and "holdN.test" (test_name_not_asked_says_so()). */
struct gate {
	const char *prefix;
	unsigned in;
	bool released;
};
static struct gate gates[] = { { "wait", 0, false }, { "hold", 0, false } };

int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res);
void __wrap_freeaddrinfo(struct addrinfo *res);

int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res)
{
	struct addrinfo *head = NULL, **tail = &head;
	uint16_t port = htons((uint16_t)atoi(service));

	atomic_fetch_add(&asked, 1);
	if (!strcmp(node, "stuck.test")) {
		pthread_mutex_lock(&stuck_lock);
		stuck_in++;
		pthread_cond_broadcast(&stuck_cond);
		while (!stuck_released)
			pthread_cond_wait(&stuck_cond, &stuck_lock);
		pthread_mutex_unlock(&stuck_lock);
	}
	if (!strncmp(node, "held", 4)) {
		pthread_mutex_lock(&stuck_lock);
		held_in++;
		pthread_cond_broadcast(&stuck_cond);
		while (!held_released)
			pthread_cond_wait(&stuck_cond, &stuck_lock);
		pthread_mutex_unlock(&stuck_lock);
	}
	for (size_t g = 0; g < sizeof(gates) / sizeof(gates[0]); g++) {
		if (strncmp(node, gates[g].prefix, 4))
			continue;
		pthread_mutex_lock(&stuck_lock);
		gates[g].in++;
		pthread_cond_broadcast(&stuck_cond);
		while (!gates[g].released)
			pthread_cond_wait(&stuck_cond, &stuck_lock);
		pthread_mutex_unlock(&stuck_lock);
	}
	for (size_t i = 0; i < answer_n; i++) {
		const struct sockaddr_storage *a = &answer[i];
		struct addrinfo *r;

		if (hints->ai_family != AF_UNSPEC && hints->ai_family != a->ss_family)
			continue;
		r = calloc(1, sizeof(*r) + sizeof(*a));
		if (!r)
			break;
		r->ai_family = a->ss_family;
		r->ai_socktype = SOCK_STREAM;
		r->ai_protocol = IPPROTO_TCP;
		r->ai_addr = (struct sockaddr *)(r + 1);
		r->ai_addrlen = a->ss_family == AF_INET ? sizeof(struct sockaddr_in)
							: sizeof(struct sockaddr_in6);
		memcpy(r->ai_addr, a, r->ai_addrlen);
		if (a->ss_family == AF_INET)
			((struct sockaddr_in *)r->ai_addr)->sin_port = port;
		else
			((struct sockaddr_in6 *)r->ai_addr)->sin6_port = port;
		*tail = r;
		tail = &r->ai_next;
	}
	*res = head;
	return head ? 0 : EAI_NONAME;
}

void __wrap_freeaddrinfo(struct addrinfo *res)
{
	while (res) {
		struct addrinfo *next = res->ai_next;

		free(res);
		res = next;
	}
}

static void answer_v4(size_t i, uint32_t host)
{
	struct sockaddr_in *a = (struct sockaddr_in *)&answer[i];

	memset(&answer[i], 0, sizeof(answer[i]));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(host);
}

static void answer_v6(size_t i, const char *text, uint32_t scope)
{
	struct sockaddr_in6 *a = (struct sockaddr_in6 *)&answer[i];

	memset(&answer[i], 0, sizeof(answer[i]));
	a->sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, text, &a->sin6_addr), 1);
	a->sin6_scope_id = scope;
}

/* The answer turned by <by>: its <by>-th address first. */
static void answer_rotate(size_t by)
{
	struct sockaddr_storage *v = calloc(answer_n, sizeof(*v));

	assert_non_null(v);
	for (size_t i = 0; i < answer_n; i++)
		v[i] = answer[(i + by) % answer_n];
	memcpy(answer, v, answer_n * sizeof(*v));
	free(v);
}

static struct hashlb_config *resolved(const char *yaml, const struct hashlb_config *last)
{
	struct hashlb_config *c = NULL;
	struct hashlb_error err = { 0 };

	if (hashlb_config_parse(yaml, strlen(yaml), "t.yaml", &c, &err) < 0 ||
	    hashlb_config_resolve_after(c, HASHLB_RESOLVE_TIMEOUT_MS, last, &err) < 0)
		fail_msg("%d:%d: %s", err.line, err.column, err.msg);
	return c;
}

/* Service <s>'s backends, "name=address" each, in order, one string. */
static char *backends_text(const struct hashlb_service_cfg *s)
{
	size_t size = 64 * (s->n_backends + 1), o = 0;
	char *out = calloc(1, size), addr[HASHLB_ADDR_STRLEN];

	assert_non_null(out);
	for (uint32_t j = 0; j < s->n_backends; j++) {
		hashlb_addr_format(&s->backends[j].addr, addr, sizeof(addr));
		o += (size_t)snprintf(
			out + o, size - o, "%s=%s%%%u ", s->backends[j].name, addr,
			s->backends[j].addr.ss_family == AF_INET6
				? ((const struct sockaddr_in6 *)&s->backends[j].addr)->sin6_scope_id
				: 0);
	}
	return out;
}

static const char pool[] = "services:\n  - name: web\n    listen: \"[::1]:80\"\n"
			   "    backends:\n      - name: pool\n        address: pool.test:9\n"
			   "        each_address: true\n";

/*
 * A name of more addresses than each_address takes (1,100 here, 1,024
 * taken): the same backends whatever the answer's order, the lowest
 * addresses. The answer was cut before it was sorted, so a rotated answer
 * gave other members each time it was asked: backends came and went at each
 * resolve_every round.
 */
static void test_each_address_cut_after_sorting(void **state)
{
	struct hashlb_config *c1, *c2;
	char *t1, *t2, first[HASHLB_ADDR_STRLEN], last[HASHLB_ADDR_STRLEN];
	const struct hashlb_service_cfg *s;

	(void)state;
	answer_n = 1100;
	for (size_t i = 0; i < answer_n; i++)
		answer_v4(i, 0x0a000000u + 1 + (uint32_t)i); /* 10.0.0.1 ... */
	answer_rotate(600);
	c1 = resolved(pool, NULL);
	answer_rotate(300);
	c2 = resolved(pool, NULL);
	s = &c1->services[0];
	assert_int_equal(s->n_backends, HASHLB_EACH_ADDRESS_MAX);
	assert_int_equal(c2->services[0].n_backends, HASHLB_EACH_ADDRESS_MAX);
	hashlb_addr_format(&s->backends[0].addr, first, sizeof(first));
	hashlb_addr_format(&s->backends[s->n_backends - 1].addr, last, sizeof(last));
	assert_string_equal(first, "10.0.0.1:9");
	assert_string_equal(last, "10.0.4.0:9"); /* the 1,024th */
	t1 = backends_text(&c1->services[0]);
	t2 = backends_text(&c2->services[0]);
	assert_string_equal(t1, t2);
	free(t1);
	free(t2);
	hashlb_config_free(c1);
	hashlb_config_free(c2);
}

/*
 * One link-local address answered on two interfaces (only NSS modules that
 * give zones do: nss-mdns, nss-resolve, nss-myhostname): one backend, at the
 * same interface whatever the answer's order. The two compared equal and the
 * one kept was the one the sort happened to put first.
 */
static void test_each_address_zones(void **state)
{
	struct hashlb_config *c1, *c2;
	char *t1, *t2;

	(void)state;
	answer_n = 3;
	answer_v6(0, "fe80::1", 3);
	answer_v6(1, "fe80::1", 2);
	answer_v6(2, "2001:db8::1", 0);
	c1 = resolved(pool, NULL);
	answer_rotate(1);
	c2 = resolved(pool, NULL);
	t1 = backends_text(&c1->services[0]);
	t2 = backends_text(&c2->services[0]);
	assert_string_equal(t1, "pool@2001:db8::1=[2001:db8::1]:9%0 pool@fe80::1=[fe80::1]:9%2 ");
	assert_string_equal(t1, t2);
	free(t1);
	free(t2);
	hashlb_config_free(c1);
	hashlb_config_free(c2);
}

static const char three[] = "services:\n"
			    "  - name: x\n    listen: 127.0.0.1:80\n    backends:\n"
			    "      - name: a\n        address: alpha.test:9\n"
			    "  - name: y\n    listen: 127.0.0.1:81\n    backends:\n"
			    "      - name: a\n        address: alpha.test:9\n"
			    "      - name: b\n        address: alpha.test:9\n"
			    "  - name: z\n    listen: 127.0.0.1:82\n    backends:\n"
			    "      - name: a\n        address: alpha.test:10\n";

/* The same services, written in another order, z/a at the same address as written. */
static const char three_moved[] = "services:\n"
				  "  - name: z\n    listen: 127.0.0.1:82\n    backends:\n"
				  "      - name: a\n        address: alpha.test:9\n"
				  "  - name: y\n    listen: 127.0.0.1:81\n    backends:\n"
				  "      - name: b\n        address: alpha.test:9\n"
				  "      - name: a\n        address: alpha.test:9\n"
				  "  - name: x\n    listen: 127.0.0.1:80\n    backends:\n"
				  "      - name: a\n        address: alpha.test:9\n";

static uint32_t addr_v4(const struct hashlb_config *c, const char *svc, const char *name)
{
	const struct hashlb_service_cfg *s = hashlb_config_service(c, svc);

	assert_non_null(s);
	for (uint32_t j = 0; j < s->n_backends; j++) {
		if (!strcmp(s->backends[j].name, name))
			return ntohl(((const struct sockaddr_in *)&s->backends[j].addr)
					     ->sin_addr.s_addr);
	}
	fail_msg("no backend %s/%s", svc, name);
	return 0;
}

/*
 * A config resolved after another (a reload): each backend of the same
 * service, name and address as written stays at the address it had while
 * the answer still has it, whatever the order of the answer or of the
 * config; one written otherwise (z/a, another port) takes the answer's
 * first address, and one whose address left the answer its new first one.
 */
static void test_resolved_after(void **state)
{
	struct hashlb_config *last, *c;
	struct hashlb_service_cfg *y;

	(void)state;
	answer_n = 3;
	for (size_t i = 0; i < answer_n; i++)
		answer_v4(i, 0x0a000001u + (uint32_t)i); /* 10.0.0.1 .2 .3 */
	last = resolved(three, NULL);
	assert_int_equal(addr_v4(last, "y", "b"), 0x0a000001u);
	/* as resolve_every's rounds leave them: y/b at .3, y/a at .2 */
	y = (struct hashlb_service_cfg *)hashlb_config_service(last, "y");
	((struct sockaddr_in *)&y->backends[0].addr)->sin_addr.s_addr = htonl(0x0a000002u);
	((struct sockaddr_in *)&y->backends[1].addr)->sin_addr.s_addr = htonl(0x0a000003u);

	answer_rotate(1); /* .2 .3 .1 */
	c = resolved(three_moved, last);
	assert_int_equal(addr_v4(c, "x", "a"), 0x0a000001u);
	assert_int_equal(addr_v4(c, "y", "a"), 0x0a000002u);
	assert_int_equal(addr_v4(c, "y", "b"), 0x0a000003u);
	assert_int_equal(addr_v4(c, "z", "a"), 0x0a000002u); /* alpha.test:10 before */
	hashlb_config_free(c);

	answer_n = 2; /* .2 .3: x/a's .1 is gone */
	c = resolved(three, last);
	assert_int_equal(addr_v4(c, "x", "a"), 0x0a000002u);
	assert_int_equal(addr_v4(c, "y", "a"), 0x0a000002u);
	assert_int_equal(addr_v4(c, "y", "b"), 0x0a000003u);
	hashlb_config_free(c);
	hashlb_config_free(last);
}

/*
 * A reload whose service now listens where a backend of it was (its name still answering
 * that address): the backend does not stay there, a connect to itself, but takes the
 * answer's first address that the config accepts, as a backend not in the config running
 * does. It stayed, past the check that refuses a name's address that is the service's own.
 */
static void test_resolved_after_not_onto_itself(void **state)
{
	static const char before[] = "services:\n"
				     "  - name: x\n    listen: 127.0.0.1:80\n    backends:\n"
				     "      - name: a\n        address: alpha.test:9\n";
	static const char after[] = "services:\n"
				    "  - name: x\n    listen: 10.0.0.2:9\n    backends:\n"
				    "      - name: a\n        address: alpha.test:9\n";
	struct hashlb_config *last, *c;
	struct hashlb_service_cfg *x;

	(void)state;
	answer_n = 2;
	answer_v4(0, 0x0a000001u); /* 10.0.0.1 */
	answer_v4(1, 0x0a000002u); /* 10.0.0.2 */
	last = resolved(before, NULL);
	/* as a round left it: at .2 */
	x = (struct hashlb_service_cfg *)hashlb_config_service(last, "x");
	((struct sockaddr_in *)&x->backends[0].addr)->sin_addr.s_addr = htonl(0x0a000002u);
	c = resolved(after, last);
	assert_int_equal(addr_v4(c, "x", "a"), 0x0a000001u);
	hashlb_config_free(c);
	hashlb_config_free(last);
}

/*
 * A reload whose time goes waiting for a lookup of one of its names that a round left
 * running (a resolver that does not answer): it fails, and says so, not that a name asked
 * only once that time was up (first in the file here) got no answer in time: an operator
 * was sent to a name that resolves.
 */
static void test_reload_behind_a_stuck_lookup(void **state)
{
	static const char stuck[] = "services:\n"
				    "  - name: x\n    listen: 127.0.0.1:80\n    backends:\n"
				    "      - name: s\n        address: stuck.test:9\n";
	static const char both[] = "services:\n"
				   "  - name: x\n    listen: 127.0.0.1:80\n    backends:\n"
				   "      - name: a\n        address: alpha.test:9\n"
				   "      - name: s\n        address: stuck.test:9\n";
	struct hashlb_config *last, *round, *c;
	struct hashlb_resolve *job;
	struct hashlb_error err = { 0 };

	(void)state;
	answer_n = 1;
	answer_v4(0, 0x0a000001u);
	last = resolved(three, NULL);
	assert_int_equal(hashlb_config_parse(stuck, strlen(stuck), "t.yaml", &round, &err), 0);
	assert_int_equal(hashlb_config_resolve_again(round, &job, &err), 0);
	pthread_mutex_lock(&stuck_lock);
	while (!stuck_in)
		pthread_cond_wait(&stuck_cond, &stuck_lock);
	pthread_mutex_unlock(&stuck_lock);
	/* the round given up (as a reload does), its lookup still running */
	assert_true(hashlb_config_resolve_finish(round, job, 0, &err) < 0);
	hashlb_config_free(round);

	assert_int_equal(hashlb_config_parse(both, strlen(both), "t.yaml", &c, &err), 0);
	assert_true(hashlb_config_resolve_after(c, 200, last, &err) < 0);
	assert_null(strstr(err.msg, "no answer within"));
	assert_true(strstr(err.msg, "stuck.test") || strstr(err.msg, "still running"));
	hashlb_config_free(c);
	hashlb_config_free(last);
	pthread_mutex_lock(&stuck_lock);
	stuck_released = true;
	pthread_cond_broadcast(&stuck_cond);
	pthread_mutex_unlock(&stuck_lock);
}

/* Service <svc>'s backend <name>, formatted. */
static void expect_backend(const struct hashlb_config *c, const char *svc, const char *name,
			   const char *want)
{
	const struct hashlb_service_cfg *s = hashlb_config_service(c, svc);
	char addr[HASHLB_ADDR_STRLEN];

	assert_non_null(s);
	for (uint32_t j = 0; j < s->n_backends; j++) {
		if (strcmp(s->backends[j].name, name))
			continue;
		hashlb_addr_format(&s->backends[j].addr, addr, sizeof(addr));
		assert_string_equal(addr, want);
		return;
	}
	fail_msg("no backend %s/%s", svc, name);
}

/*
 * One question asked once: backends of one host on several ports, the name
 * written in another case, each take the answer at their own port; an
 * each_address entry of it and a service of another family ask their own.
 * Each backend asked for itself (5 lookups here, one per backend).
 */
static void test_one_lookup_per_question(void **state)
{
	static const char yaml[] =
		"services:\n"
		"  - name: x\n    listen: 127.0.0.1:80\n    backends:\n"
		"      - name: a\n        address: pool.test:9\n"
		"      - name: b\n        address: POOL.test:10\n"
		"      - name: d\n        address: pool.test:13\n"
		"      - name: p\n        address: pool.test:12\n"
		"        each_address: true\n"
		"  - name: y\n    listen: 127.0.0.1:81\n    source: 127.0.0.1\n"
		"    backends:\n      - name: c\n        address: pool.test:11\n";
	struct hashlb_config *c;

	(void)state;
	answer_n = 2;
	answer_v4(0, 0x0a000002u);
	answer_v4(1, 0x0a000001u);
	atomic_store(&asked, 0);
	c = resolved(yaml, NULL);
	assert_int_equal(atomic_load(&asked), 3);
	expect_backend(c, "x", "a", "10.0.0.2:9");
	expect_backend(c, "x", "b", "10.0.0.2:10");
	expect_backend(c, "x", "d", "10.0.0.2:13");
	expect_backend(c, "x", "p@10.0.0.1", "10.0.0.1:12");
	expect_backend(c, "x", "p@10.0.0.2", "10.0.0.2:12");
	expect_backend(c, "y", "c", "10.0.0.2:11");
	hashlb_config_free(c);
}

/*
 * A round paused (as while a reload runs) takes no further name, its lookups under way
 * ending with their answers kept; resumed (the reload failed), it asks the names left, and
 * every one is answered: the round goes on as if no reload had come.
 */
static void test_round_paused_and_resumed(void **state)
{
	char yaml[4096];
	struct hashlb_config *round;
	struct hashlb_resolve *job;
	struct hashlb_error err = { 0 };
	unsigned in = 0;
	int o;

	(void)state;
	/* the answer as set before: the lookup of the test before may still read it */
	o = snprintf(yaml, sizeof(yaml),
		     "services:\n  - name: x\n    listen: 127.0.0.1:80\n"
		     "    backends:\n");
	for (int i = 0; i < 20; i++) /* more than the round's 16 threads */
		o += snprintf(yaml + o, sizeof(yaml) - (size_t)o,
			      "      - name: b%d\n        address: held%d.test:9\n", i, i);
	assert_int_equal(hashlb_config_parse(yaml, strlen(yaml), "t.yaml", &round, &err), 0);
	atomic_store(&asked, 0);
	assert_int_equal(hashlb_config_resolve_again(round, &job, &err), 0);
	/* each thread it started (16, less those of an earlier test still ending) held in
	 * its first lookup */
	for (int i = 0; i < 500 && !in; i++) { /* a hang guard */
		usleep(10 * 1000);
		pthread_mutex_lock(&stuck_lock);
		in = held_in;
		pthread_mutex_unlock(&stuck_lock);
	}
	assert_true(in > 0);
	usleep(200 * 1000);
	pthread_mutex_lock(&stuck_lock);
	in = held_in;
	pthread_mutex_unlock(&stuck_lock);
	assert_true(in <= 16);
	hashlb_resolve_pause(job);
	pthread_mutex_lock(&stuck_lock);
	held_released = true;
	pthread_cond_broadcast(&stuck_cond);
	pthread_mutex_unlock(&stuck_lock);
	usleep(100 * 1000); /* room to ask more, were it not paused */
	assert_int_equal(atomic_load(&asked), in);
	assert_false(hashlb_resolve_done(job));

	assert_int_equal(hashlb_resolve_resume(job, &err), 0);
	for (int i = 0; i < 1000 && !hashlb_resolve_done(job); i++) /* a hang guard */
		usleep(10 * 1000);
	assert_true(hashlb_resolve_done(job));
	assert_int_equal(atomic_load(&asked), 20);
	assert_int_equal(hashlb_config_resolve_finish(round, job, 5000, &err), 0);
	for (uint32_t j = 0; j < round->services[0].n_backends; j++)
		assert_true(round->services[0].backends[j].addr_len > 0);
	hashlb_config_free(round);
}

/* Wait (a hang guard of 5 s) until <n> lookups are held at gate <g>. */
static void gate_wait(struct gate *g, unsigned n)
{
	unsigned in = 0;

	for (int i = 0; i < 500 && in < n; i++) {
		usleep(10 * 1000);
		pthread_mutex_lock(&stuck_lock);
		in = g->in;
		pthread_mutex_unlock(&stuck_lock);
	}
	assert_true(in >= n);
}

static void gate_open(struct gate *g)
{
	pthread_mutex_lock(&stuck_lock);
	g->released = true;
	pthread_cond_broadcast(&stuck_cond);
	pthread_mutex_unlock(&stuck_lock);
}

/* A config of one service, its backends at <n> names "<prefix>N.test". */
static struct hashlb_config *gated_config(const char *prefix, int n)
{
	char yaml[4096];
	struct hashlb_config *c;
	struct hashlb_error err = { 0 };
	int o = snprintf(yaml, sizeof(yaml),
			 "services:\n  - name: x\n    listen: 127.0.0.1:80\n    backends:\n");

	for (int i = 0; i < n; i++)
		o += snprintf(yaml + o, sizeof(yaml) - (size_t)o,
			      "      - name: %s%d\n        address: %s%d.test:9\n", prefix, i,
			      prefix, i);
	assert_int_equal(hashlb_config_parse(yaml, strlen(yaml), "t.yaml", &c, &err), 0);
	return c;
}

/*
 * A round resumed while every lookup thread of its kind is held by lookups still waiting on
 * the resolver (here another job's, standing for those a round's threads still counted as
 * they left) starts none: a name it had not taken yet is never asked. It fails at the
 * deadline saying so, not "no answer within": the resolver was never asked for it, and an
 * operator was sent to a DNS server that had nothing to answer.
 */
static void test_name_not_asked_says_so(void **state)
{
	struct hashlb_config *round = gated_config("wait", 40), *other = gated_config("hold", 16);
	struct hashlb_resolve *job, *held;
	struct hashlb_error err = { 0 };

	(void)state;
	/* the answer as set before: the lookups of the tests before may still read it */
	assert_int_equal(hashlb_config_resolve_again(round, &job, &err), 0);
	gate_wait(&gates[0], 1); /* its threads (16 at most) wait, most names not taken */
	hashlb_resolve_pause(job);
	gate_open(&gates[0]); /* answered: its threads leave, paused */
	usleep(200 * 1000);
	assert_int_equal(hashlb_config_resolve_start(other, &held, &err), 0);
	gate_wait(&gates[1], 16); /* the other job's 16 lookups hold every thread */
	assert_int_equal(hashlb_resolve_resume(job, &err), 0);
	usleep(100 * 1000);
	assert_false(hashlb_resolve_done(job)); /* the names left not asked */
	assert_true(hashlb_config_resolve_finish(round, job, 100, &err) < 0);
	print_message("%s\n", err.msg);
	assert_null(strstr(err.msg, "no answer within"));
	assert_non_null(strstr(err.msg, "was not asked"));
	gate_open(&gates[1]);
	for (int i = 0; i < 500 && !hashlb_resolve_done(held); i++) /* a hang guard */
		usleep(10 * 1000);
	assert_int_equal(hashlb_config_resolve_finish(other, held, 5000, &err), 0);
	hashlb_config_free(round);
	hashlb_config_free(other);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_address_cut_after_sorting),
		cmocka_unit_test(test_each_address_zones),
		cmocka_unit_test(test_resolved_after),
		cmocka_unit_test(test_resolved_after_not_onto_itself),
		cmocka_unit_test(test_one_lookup_per_question),
		cmocka_unit_test(test_reload_behind_a_stuck_lookup),
		cmocka_unit_test(test_round_paused_and_resumed),
		cmocka_unit_test(test_name_not_asked_says_so),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
