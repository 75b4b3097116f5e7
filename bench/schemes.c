// SPDX-License-Identifier: MIT
/*
 * `hashlb-bench schemes`: the classic comparison of hashing schemes (issue 2
 * item 6), and the experiments of the reference articles in
 * shared/reference (hash % N, the ring with virtual nodes, 30 sets of node
 * names, failure of the most loaded node, weights, rendezvous, jump, hash
 * slots, what a membership change costs a cache and a store). Keys are
 * client addresses hashed the way hashlb hashes them; the articles used MD5
 * of "user:i": the experiments are the same, the digits are not.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "refschemes.h"
#include "hashlb/tuple.h"

static const struct scheme all_schemes[] = {
	{ "modulo", SCHEME_MODULO, 0 },
	{ "ring V=1", SCHEME_RING, 1 },
	{ "ring V=10", SCHEME_RING, 10 },
	{ "ring V=100", SCHEME_RING, 100 },
	{ "ring V=1000", SCHEME_RING, 1000 },
	{ "maglev M=65537", SCHEME_MAGLEV, 65537 },
	{ "maglev M=655373", SCHEME_MAGLEV, 655373 },
	{ "rendezvous", SCHEME_RENDEZVOUS, 0 },
	{ "jump", SCHEME_JUMP, 0 },
	{ "slots 16384", SCHEME_SLOTS, 16384 },
};

#define N_SCHEMES (sizeof(all_schemes) / sizeof(all_schemes[0]))
#define N_NODES 10
#define N_SETS 30

struct ctx {
	const struct bench_opts *o;
	struct report r;
	size_t n_keys; /* keys of the single-set experiments */
	size_t n_keys_set; /* keys per run of the 30-set experiment */
	size_t n_keys_lookup; /* keys of the lookup-by-N timing */
	int reps; /* timing repetitions (median) */
	double xxh_ns; /* reference: one tuple hash, measured in this run */
	uint64_t *keys;
};

struct change {
	double moved_add, to_new, moved_rm, from_removed;
	uint32_t donors, receivers;
	double max, min, cv; /* load of the N nodes before the change */
	double lookup_ns, build_ms;
};

static void load_stats(const uint32_t *owner, size_t nk, uint32_t n, double *ret_max,
		       double *ret_min, double *ret_cv)
{
	uint64_t *count = calloc(n, sizeof(*count));
	double mean = (double)nk / n, var = 0, max = 0, min = 1e300;

	if (!count)
		abort();
	for (size_t k = 0; k < nk; k++)
		count[owner[k]]++;
	for (uint32_t i = 0; i < n; i++) {
		double c = (double)count[i];

		max = c > max ? c : max;
		min = c < min ? c : min;
		var += (c - mean) * (c - mean);
	}
	*ret_max = max / mean;
	*ret_min = min / mean;
	*ret_cv = sqrt(var / n) / mean;
	free(count);
}

static double time_build_ms(const struct scheme *s, const struct nodeset *nodes, int reps)
{
	double t[16];

	if (reps > 16)
		reps = 16;
	for (int i = 0; i < reps; i++) {
		struct placement p;
		uint64_t t0 = bench_now_ns();

		if (placement_build(s, nodes, 0, NULL, &p) < 0)
			abort();
		t[i] = (double)(bench_now_ns() - t0) / 1e6;
		placement_free(&p);
	}
	return bench_median(t, (size_t)reps);
}

static double time_lookup_ns(const struct placement *p, const uint64_t *keys, size_t nk,
			     uint32_t *out, int reps)
{
	double t[16];

	if (reps > 16)
		reps = 16;
	for (int i = 0; i < reps; i++) {
		uint64_t t0 = bench_now_ns();

		placement_lookup_all(p, keys, nk, out);
		t[i] = (double)(bench_now_ns() - t0) / (double)nk;
	}
	return bench_median(t, (size_t)reps);
}

/*
 * N nodes "<prefix>0".."<prefix>N-1"; then node N joins (N -> N+1), or
 * node N-1 leaves (N -> N-1). Keys are compared owner by owner.
 */
static int measure_change(const struct scheme *s, const char *prefix, const uint64_t *keys,
			  size_t nk, int timing_reps, struct change *ret)
{
	struct nodeset all, base, add, rm;
	struct placement pb, pa, pr;
	uint32_t *a, *b, *c;
	uint8_t seen_d[N_NODES + 1] = { 0 }, seen_r[N_NODES + 1] = { 0 };
	uint64_t moved = 0, to_new = 0, moved_rm = 0, from_rm = 0;
	struct change res;
	int ret_code;

	memset(&res, 0, sizeof(res));
	ret_code = nodeset_init(&all, N_NODES + 1, prefix);
	if (ret_code < 0)
		return ret_code;
	base = add = rm = all;
	base.n = N_NODES;
	rm.n = N_NODES - 1;
	a = malloc(nk * sizeof(*a));
	b = malloc(nk * sizeof(*b));
	c = malloc(nk * sizeof(*c));
	if (!a || !b || !c || placement_build(s, &base, 0, NULL, &pb) < 0)
		abort();
	if (placement_build(s, &add, 0, &pb, &pa) < 0 || placement_build(s, &rm, 0, &pb, &pr) < 0)
		abort();
	placement_lookup_all(&pb, keys, nk, a);
	placement_lookup_all(&pa, keys, nk, b);
	placement_lookup_all(&pr, keys, nk, c);
	for (size_t k = 0; k < nk; k++) {
		if (a[k] != b[k]) {
			moved++;
			to_new += b[k] == N_NODES;
			seen_d[a[k]] = 1;
		}
		if (a[k] != c[k]) {
			moved_rm++;
			from_rm += a[k] == N_NODES - 1;
			seen_r[c[k]] = 1;
		}
	}
	for (int i = 0; i <= N_NODES; i++) {
		res.donors += seen_d[i];
		res.receivers += seen_r[i];
	}
	res.moved_add = (double)moved / nk;
	res.to_new = moved ? (double)to_new / moved : NAN;
	res.moved_rm = (double)moved_rm / nk;
	res.from_removed = moved_rm ? (double)from_rm / moved_rm : NAN;
	load_stats(a, nk, N_NODES, &res.max, &res.min, &res.cv);
	if (timing_reps) {
		res.lookup_ns = time_lookup_ns(&pb, keys, nk, a, timing_reps);
		res.build_ms = time_build_ms(s, &base, timing_reps);
	}
	placement_free(&pb);
	placement_free(&pa);
	placement_free(&pr);
	free(a);
	free(b);
	free(c);
	nodeset_free(&all);
	*ret = res;
	return 0;
}

/* Reference for the lookup columns: one XXH64 of a tuple, as hashlb hashes a client. */
static double time_tuple_hash_ns(size_t nk, int reps)
{
	double t[16];

	if (reps > 16)
		reps = 16;
	uint64_t *k = bench_client_keys(nk, 0); /* first touch outside the timing */

	if (!k)
		abort();
	for (int i = 0; i < reps; i++) {
		uint64_t t0 = bench_now_ns();

		bench_client_keys_into(k, nk, (uint64_t)i);
		t[i] = (double)(bench_now_ns() - t0) / (double)nk;
	}
	free(k);
	return bench_median(t, (size_t)reps);
}

static void table_change(struct ctx *x, struct change *res)
{
	static const char *const cols[] = {
		"scheme",	 "moved 10->11 %", "x ideal 1/11",    "to the new node %",
		"donors",	 "moved 10->9 %",  "x ideal 1/10",    "from the removed node %",
		"receivers",	 "max/avg",	   "min/avg",	      "stddev/mean",
		"lookup ns/key", "lookup / xxh64", "build ms (N=10)", NULL
	};
	struct report *r = &x->r;

	report_table(r, "change", "Adding and removing one node (N = 10, 1 key set)", cols);
	for (size_t i = 0; i < N_SCHEMES; i++) {
		struct change *c = &res[i];

		if (measure_change(&all_schemes[i], "node-", x->keys, x->n_keys, x->reps, c) < 0)
			abort();
		report_str(r, all_schemes[i].label);
		report_num(r, "%.2f", 100 * c->moved_add);
		report_num(r, "%.2f", c->moved_add * 11);
		report_num(r, "%.1f", 100 * c->to_new);
		report_num(r, "%.0f", c->donors);
		report_num(r, "%.2f", 100 * c->moved_rm);
		report_num(r, "%.2f", c->moved_rm * 10);
		report_num(r, "%.1f", 100 * c->from_removed);
		report_num(r, "%.0f", c->receivers);
		report_num(r, "%.3f", c->max);
		report_num(r, "%.3f", c->min);
		report_num(r, "%.3f", c->cv);
		report_num(r, "%.1f", c->lookup_ns);
		report_num(r, "%.2f", c->lookup_ns / x->xxh_ns);
		report_num(r, "%.3f", c->build_ms);
		report_end_row(r);
	}
	report_end_table(r);
	report_note(
		r,
		"Theory: hash %% N moves N/(N+1) = 90.9%% of keys on 10->11; a consistent scheme "
		"1/(N+1) = 9.09%%, all of them to the new node. A ring with V=1 has max/avg "
		"near H_10 = 2.93 and its spread falls like 1/sqrt(V). Lookup times exclude "
		"the key's hash; the reference, one XXH64 of a client tuple, took %.1f ns "
		"in this run.",
		x->xxh_ns);
}

struct agg {
	double min, sum, max;
};

static void agg_add(struct agg *a, double v, int first)
{
	if (first) {
		a->min = a->max = a->sum = v;
		return;
	}
	a->min = v < a->min ? v : a->min;
	a->max = v > a->max ? v : a->max;
	a->sum += v;
}

static void table_sets(struct ctx *x)
{
	static const char *const cols[] = {
		"scheme",      "moved min %",  "moved mean %", "moved max %", "to new min %",
		"max/avg min", "max/avg mean", "max/avg max",  "spread mean", NULL
	};
	struct agg moved[N_SCHEMES], to_new[N_SCHEMES], max[N_SCHEMES], cv[N_SCHEMES];
	struct report *r = &x->r;
	char prefix[32];

	for (int set = 0; set < N_SETS; set++) {
		uint64_t *keys = bench_client_keys(x->n_keys_set, 1000 + (uint64_t)set);

		if (!keys)
			abort();
		snprintf(prefix, sizeof(prefix), "s%d-node-", set);
		for (size_t i = 0; i < N_SCHEMES; i++) {
			struct change c;

			if (measure_change(&all_schemes[i], prefix, keys, x->n_keys_set, 0, &c) < 0)
				abort();
			agg_add(&moved[i], c.moved_add, !set);
			agg_add(&to_new[i], c.to_new, !set);
			agg_add(&max[i], c.max, !set);
			agg_add(&cv[i], c.cv, !set);
		}
		free(keys);
	}
	char title[160];

	snprintf(
		title, sizeof(title),
		"10 -> 11 nodes over %d sets of node names (%zu keys each, key hash seed varied too)",
		N_SETS, x->n_keys_set);
	report_table(r, "sets", title, cols);
	for (size_t i = 0; i < N_SCHEMES; i++) {
		report_str(r, all_schemes[i].label);
		report_num(r, "%.2f", 100 * moved[i].min);
		report_num(r, "%.2f", 100 * moved[i].sum / N_SETS);
		report_num(r, "%.2f", 100 * moved[i].max);
		report_num(r, "%.1f", 100 * to_new[i].min);
		report_num(r, "%.3f", max[i].min);
		report_num(r, "%.3f", max[i].sum / N_SETS);
		report_num(r, "%.3f", max[i].max);
		report_num(r, "%.3f", cv[i].sum / N_SETS);
		report_end_row(r);
	}
	report_end_table(r);
	report_note(r, "One ring is one random outcome; over many sets the mean stays near 9.09%% "
		       "for every V, while V narrows the range. Modulo and jump do not depend on "
		       "names, so their range comes from the key sets alone.");
}

/* <nodes> minus node <victim>: names borrowed. */
static int nodeset_without(const struct nodeset *nodes, uint32_t victim, struct nodeset *ret)
{
	struct nodeset s;
	uint32_t k = 0;

	s.n = nodes->n - 1;
	s.name = malloc(s.n * sizeof(*s.name));
	s.weight = malloc(s.n * sizeof(*s.weight));
	if (!s.name || !s.weight) {
		free(s.name);
		free(s.weight);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < nodes->n; i++) {
		if (i == victim)
			continue;
		s.name[k] = nodes->name[i];
		s.weight[k] = nodes->weight[i];
		k++;
	}
	*ret = s;
	return 0;
}

/* One row of the failure table from the owners before (<a>) and after (<c>, old indices). */
static void failure_row(struct ctx *x, const char *label, const uint32_t *a, const uint32_t *c,
			uint32_t victim)
{
	uint64_t before[N_NODES] = { 0 }, after[N_NODES] = { 0 }, received[N_NODES] = { 0 };
	uint64_t survivors_moved = 0, nk = x->n_keys;
	uint32_t receivers = 0, worst = 0;
	struct report *r = &x->r;
	double max_after = 0;

	for (size_t k = 0; k < nk; k++) {
		before[a[k]]++;
		after[c[k]]++;
		if (a[k] != c[k]) {
			received[c[k]]++;
			survivors_moved += a[k] != victim;
		}
	}
	for (uint32_t i = 0; i < N_NODES; i++) {
		receivers += received[i] > 0;
		if (received[i] > received[worst])
			worst = i;
		if ((double)after[i] > max_after)
			max_after = (double)after[i];
	}
	report_str(r, label);
	report_num(r, "%.1f", 100.0 * before[victim] / nk);
	report_num(r, "%.0f", receivers);
	report_num(r, "%.1f", 100.0 * before[worst] / nk);
	report_num(r, "%.1f", 100.0 * after[worst] / nk);
	report_num(r, "%.2f", before[worst] ? (double)after[worst] / before[worst] : NAN);
	report_num(r, "%.3f", max_after / ((double)nk / (N_NODES - 1)));
	report_num(r, "%.2f", 100.0 * survivors_moved / nk);
	report_end_row(r);
}

static void table_failure(struct ctx *x)
{
	static const char *const cols[] = {
		"scheme",  "victim held %", "receivers",     "top receiver before %",
		"after %", "growth",	    "max/avg after", "keys of survivors moved %",
		NULL
	};
	struct report *r = &x->r;
	uint32_t *a = malloc(x->n_keys * sizeof(*a)), *c = malloc(x->n_keys * sizeof(*c));
	struct nodeset nodes;

	if (!a || !c || nodeset_init(&nodes, N_NODES, "node-") < 0)
		abort();
	report_table(r, "failure", "Removing the most loaded of 10 nodes", cols);
	for (size_t i = 0; i < N_SCHEMES; i++) {
		const struct scheme *s = &all_schemes[i];
		struct placement pb, pr;
		struct nodeset less;
		uint64_t count[N_NODES] = { 0 };
		uint32_t victim = 0, map[N_NODES];
		char label[96];

		if (placement_build(s, &nodes, 0, NULL, &pb) < 0)
			abort();
		placement_lookup_all(&pb, x->keys, x->n_keys, a);
		for (size_t k = 0; k < x->n_keys; k++)
			count[a[k]]++;
		for (uint32_t j = 1; j < N_NODES; j++)
			if (count[j] > count[victim])
				victim = j;
		if (nodeset_without(&nodes, victim, &less) < 0 ||
		    placement_build(s, &less, 0, &pb, &pr) < 0)
			abort();
		placement_lookup_all(&pr, x->keys, x->n_keys, c);
		for (uint32_t j = 0, k = 0; j < N_NODES; j++)
			if (j != victim)
				map[k++] = j;
		for (size_t k = 0; k < x->n_keys; k++)
			c[k] = map[c[k]];
		snprintf(label, sizeof(label), "%s, removed", s->label);
		failure_row(x, label, a, c, victim);

		/* hashlb's health overlay: the victim is down, the table keeps its shape */
		if (s->kind == SCHEME_RING || s->kind == SCHEME_MAGLEV) {
			bool down[N_NODES] = { 0 };
			struct hashlb_table *t;

			down[victim] = true;
			if (hashlb_table_with_down(pb.table, down, &t, NULL) < 0)
				abort();
			for (size_t k = 0; k < x->n_keys; k++)
				c[k] = hashlb_table_lookup(t, x->keys[k]);
			snprintf(label, sizeof(label), "%s, down (hashlb overlay)", s->label);
			failure_row(x, label, a, c, victim);
			hashlb_table_free(t);
		}
		free(less.name);
		free(less.weight);
		placement_free(&pb);
		placement_free(&pr);
	}
	report_end_table(r);
	report_note(
		r,
		"Removed: the scheme rebuilt without the node (modulo and jump renumber, so "
		"survivors' keys move too). Down: hashlb's overlay, where only the victim's keys "
		"move and they spread over the survivors.");
	nodeset_free(&nodes);
	free(a);
	free(c);
}

static void table_weights(struct ctx *x)
{
	static const char *const cols[] = { "scheme",		"small-1 %",	 "small-2 %",
					    "big (weight 2) %", "worst error %", NULL };
	static const char *const names[3] = { "small-1", "small-2", "big" };
	struct report *r = &x->r;
	uint32_t *a = malloc(x->n_keys * sizeof(*a));
	struct nodeset nodes;

	if (!a || nodeset_init(&nodes, 3, "w") < 0)
		abort();
	for (int i = 0; i < 3; i++) {
		free(nodes.name[i]);
		nodes.name[i] = strdup(names[i]);
		if (!nodes.name[i])
			abort();
	}
	nodes.weight[2] = 2;
	report_table(r, "weights", "Weights 1:1:2 (ideal 25% / 25% / 50%)", cols);
	for (size_t i = 0; i < N_SCHEMES; i++) {
		uint64_t count[3] = { 0 };
		struct placement p;
		double worst = 0;

		if (placement_build(&all_schemes[i], &nodes, 0, NULL, &p) < 0)
			abort();
		placement_lookup_all(&p, x->keys, x->n_keys, a);
		for (size_t k = 0; k < x->n_keys; k++)
			count[a[k]]++;
		report_str(r, all_schemes[i].label);
		for (int j = 0; j < 3; j++) {
			double share = (double)count[j] / x->n_keys, want = j == 2 ? 0.5 : 0.25;

			report_num(r, "%.2f", 100 * share);
			if (fabs(share / want - 1) > worst)
				worst = fabs(share / want - 1);
		}
		report_num(r, "%.1f", 100 * worst);
		report_end_row(r);
		placement_free(&p);
	}
	report_end_table(r);
	report_note(r, "Modulo and jump take one bucket per weight unit, slots a quota per weight, "
		       "rendezvous scores -w/ln(u), ring V x w points, Maglev w turns per round.");
	nodeset_free(&nodes);
	free(a);
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

static void table_modulo(struct ctx *x)
{
	static const char *const cols[] = { "change", "moved %", "theory 1 - min/lcm %", NULL };
	static const uint32_t changes[][2] = { { 10, 11 }, { 10, 9 }, { 100, 101 }, { 10, 20 } };
	struct report *r = &x->r;

	report_table(r, "modulo", "hash % N when N changes", cols);
	for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++) {
		uint64_t from = changes[i][0], to = changes[i][1], moved = 0;
		uint64_t lcm = from / gcd(from, to) * to, lo = from < to ? from : to;
		char label[32];

		for (size_t k = 0; k < x->n_keys; k++)
			moved += x->keys[k] % from != x->keys[k] % to;
		snprintf(label, sizeof(label), "%u -> %u", changes[i][0], changes[i][1]);
		report_str(r, label);
		report_num(r, "%.2f", 100.0 * moved / x->n_keys);
		report_num(r, "%.2f", 100.0 * (1 - (double)lo / lcm));
		report_end_row(r);
	}
	report_end_table(r);
}

/* The articles' two costings, from the moves measured above (10 -> 11). */
static void table_cost(struct ctx *x, const struct change *res)
{
	static const char *const cols[] = { "scheme",	"cold keys %",	      "database RPS after",
					    "x normal", "data moved of 3 TB", "per donor",
					    NULL };
	struct report *r = &x->r;
	char buf[32];

	report_table(
		r, "cost",
		"What adding an 11th node costs: a cache of 100,000 RPS at 95% hits, a store of "
		"3 TB",
		cols);
	for (size_t i = 0; i < N_SCHEMES; i++) {
		const struct change *c = &res[i];
		double rps = 100000 * (0.05 + 0.95 * c->moved_add);

		report_str(r, all_schemes[i].label);
		report_num(r, "%.1f", 100 * c->moved_add);
		report_num(r, "%.0f", rps);
		report_num(r, "%.1f", rps / 5000);
		snprintf(buf, sizeof(buf), "%.0f GB", 3000 * c->moved_add);
		report_str(r, buf);
		snprintf(buf, sizeof(buf), "%.0f GB",
			 c->donors ? 3000 * c->moved_add / c->donors : 0.0);
		report_str(r, buf);
		report_end_row(r);
	}
	report_end_table(r);
}

/*
 * The share of the keys whose point (or slot) in <v> is followed by one of the same node,
 * exactly: Maglev's slots, or the ring's arcs, each ending at its point, summed.
 */
static double next_same_share(const struct hashlb_table_view *v)
{
	long double arcs = 0;
	uint64_t n = 0;

	if (v->scheme == HASHLB_SCHEME_MAGLEV) {
		for (uint32_t j = 0; j < v->m; j++)
			n += v->slots[j] == v->slots[j + 1 == v->m ? 0 : j + 1];
		return (double)n / v->m;
	}
	if (v->n_points < 2)
		return 0;
	for (uint32_t j = 0; j < v->n_points; j++) {
		uint32_t k = j + 1 == v->n_points ? 0 : j + 1;

		if (v->owner[j] == v->owner[k])
			arcs += (long double)(v->pos[j] - v->pos[j ? j - 1 : v->n_points - 1]);
	}
	return (double)(arcs / 18446744073709551616.0L);
}

/* Seeds the "next point on the same node" figure is also taken over: with N = 10 one seed is
 * a draw of 10 nodes' permutations (Maglev) or points, which moves it by a factor of two. */
#define REPLICA_SEEDS 64u

/*
 * Replicas and retries on distinct nodes (the articles' get_nodes, Dynamo's
 * preference list): the point (or slot) after a key's often belongs to the
 * same node, so the next point is not a second node; hashlb's preference
 * list skips to the next distinct one.
 */
static void table_replicas(struct ctx *x)
{
	static const char *const cols[] = { "scheme",
					    "next point on the same node %",
					    "the same over 64 seeds, exact: mean (min-max)",
					    "preference lists of 3 distinct nodes %",
					    "second choices of node-0's keys: nodes",
					    "busiest second choice x fair",
					    NULL };
	struct report *r = &x->r;
	struct nodeset nodes;

	if (nodeset_init(&nodes, N_NODES, "node-") < 0)
		abort();
	report_table(r, "replicas", "Replicas and connect retries on distinct nodes (N = 10)",
		     cols);
	for (size_t i = 0; i < N_SCHEMES; i++) {
		const struct scheme *s = &all_schemes[i];
		uint64_t same = 0, distinct = 0, second[N_NODES] = { 0 }, of0 = 0, top = 0;
		struct hashlb_table_view v;
		struct placement p;
		uint32_t seconds = 0;
		double s_lo, s_hi, s_sum;
		char range[48];

		if (s->kind != SCHEME_RING && s->kind != SCHEME_MAGLEV)
			continue;
		if (placement_build(s, &nodes, 0, NULL, &p) < 0)
			abort();
		hashlb_table_view(p.table, &v);
		for (size_t k = 0; k < x->n_keys; k++) {
			uint64_t h = x->keys[k];
			uint32_t pref[3], first, next;
			size_t got = hashlb_table_preference(p.table, h, pref, 3);

			if (v.scheme == HASHLB_SCHEME_MAGLEV) {
				uint32_t j = (uint32_t)(((h >> 32) * v.m) >> 32);

				first = v.slots[j];
				next = v.slots[j + 1 == v.m ? 0 : j + 1];
			} else {
				uint32_t j = 0, lo = 0, hi = v.n_points;

				while (lo < hi) { /* first point >= h */
					uint32_t mid = lo + (hi - lo) / 2;

					if (v.pos[mid] < h)
						lo = mid + 1;
					else
						hi = mid;
				}
				j = lo == v.n_points ? 0 : lo;
				first = v.owner[j];
				next = v.owner[j + 1 == v.n_points ? 0 : j + 1];
			}
			same += first == next;
			distinct += got == 3 && pref[0] != pref[1] && pref[1] != pref[2] &&
				    pref[0] != pref[2];
			if (pref[0] == 0 && got > 1) {
				second[pref[1]]++;
				of0++;
			}
		}
		for (uint32_t j = 0; j < N_NODES; j++) {
			seconds += second[j] > 0;
			top = second[j] > top ? second[j] : top;
		}
		s_lo = s_hi = s_sum = 100 * next_same_share(&v);
		placement_free(&p);
		for (uint64_t seed = 1; seed < REPLICA_SEEDS; seed++) {
			double pct;

			if (placement_build(s, &nodes, seed, NULL, &p) < 0)
				abort();
			hashlb_table_view(p.table, &v);
			pct = 100 * next_same_share(&v);
			placement_free(&p);
			s_lo = pct < s_lo ? pct : s_lo;
			s_hi = pct > s_hi ? pct : s_hi;
			s_sum += pct;
		}
		report_str(r, s->label);
		report_num(r, "%.1f", 100.0 * same / x->n_keys);
		snprintf(range, sizeof(range), "%.1f (%.1f-%.1f)", s_sum / REPLICA_SEEDS, s_lo,
			 s_hi);
		report_str(r, range);
		report_num(r, "%.1f", 100.0 * distinct / x->n_keys);
		report_num(r, "%.0f", seconds);
		report_num(r, "%.2f", of0 ? (double)top * (N_NODES - 1) / of0 : NAN);
		report_end_row(r);
	}
	report_end_table(r);
	report_note(r,
		    "With V=1 the next point is always another node but always the same one; "
		    "with more points per node the next point is often the same node, and "
		    "hashlb_table_preference() skips it: retries and replicas land on distinct "
		    "nodes, spread over many of them. The first column is seed 0's, over the keys; "
		    "the next, exact over 64 seeds: 1/N = 10 %% on average for V >= 10 and "
		    "both M, but one seed gives 1 to 28 %% with Maglev (and ring V=10): "
		    "whether a node owns runs of adjacent slots is a draw per node and seed "
		    "(RESULTS.md), not a "
		    "property of M.");
	nodeset_free(&nodes);
}

/*
 * Balance against points per node and table size, from each table's exact
 * shares of the hash space (hashlb_table_shares()): no key sampling, whose
 * own noise (about 1% per node at 100,000 keys) hides a Maglev table's
 * imbalance. Memory is hashlb_table_bytes() of the table with every node up.
 */
static const struct scheme balance_schemes[] = {
	{ "ring V=1", SCHEME_RING, 1 },
	{ "ring V=10", SCHEME_RING, 10 },
	{ "ring V=16", SCHEME_RING, 16 },
	{ "ring V=100", SCHEME_RING, 100 },
	{ "ring V=160", SCHEME_RING, 160 },
	{ "ring V=256", SCHEME_RING, 256 },
	{ "ring V=1000", SCHEME_RING, 1000 },
	{ "maglev M=251", SCHEME_MAGLEV, 251 },
	{ "maglev M=1021", SCHEME_MAGLEV, 1021 },
	{ "maglev M=4099", SCHEME_MAGLEV, 4099 },
	{ "maglev M=65537", SCHEME_MAGLEV, 65537 },
	{ "maglev M=655373", SCHEME_MAGLEV, 655373 },
};

#define N_BALANCE (sizeof(balance_schemes) / sizeof(balance_schemes[0]))

/* Max share / fair share and stddev / mean of <p>'s exact shares. */
static void share_stats(const struct placement *p, double *shares, double *ret_max, double *ret_cv)
{
	double mean = 1.0 / p->n, max = 0, var = 0;

	hashlb_table_shares(p->table, shares);
	for (uint32_t i = 0; i < p->n; i++) {
		max = shares[i] > max ? shares[i] : max;
		var += (shares[i] - mean) * (shares[i] - mean);
	}
	*ret_max = max / mean;
	*ret_cv = sqrt(var / p->n) / mean;
}

static void table_balance(struct ctx *x)
{
	static const char *const cols[] = { "scheme",
					    "bytes N=10",
					    "max/fair mean N=10",
					    "max/fair worst N=10",
					    "stddev/mean N=10",
					    "bytes N=100",
					    "max/fair mean N=100",
					    "max/fair worst N=100",
					    "stddev/mean N=100",
					    NULL };
	static const uint32_t ns[2] = { 10, 100 };
	struct report *r = &x->r;
	int sets = x->o->quick ? 10 : N_SETS;
	double *shares = malloc(100 * sizeof(*shares));
	char title[160];

	if (!shares)
		abort();
	snprintf(title, sizeof(title),
		 "Balance against points per node and table size (exact shares, %d sets of node "
		 "names)",
		 sets);
	report_table(r, "balance", title, cols);
	for (size_t i = 0; i < N_BALANCE; i++) {
		report_str(r, balance_schemes[i].label);
		for (int j = 0; j < 2; j++) {
			struct agg max, cv;
			size_t bytes = 0;

			for (int set = 0; set < sets; set++) {
				struct nodeset nodes;
				struct placement p;
				char prefix[32];
				double m, c;

				snprintf(prefix, sizeof(prefix), "s%d-node-", set);
				if (nodeset_init(&nodes, ns[j], prefix) < 0 ||
				    placement_build(&balance_schemes[i], &nodes, 0, NULL, &p) < 0)
					abort();
				share_stats(&p, shares, &m, &c);
				agg_add(&max, m, !set);
				agg_add(&cv, c, !set);
				bytes = hashlb_table_bytes(p.table);
				placement_free(&p);
				nodeset_free(&nodes);
			}
			report_num(r, "%.0f", (double)bytes);
			report_num(r, "%.3f", max.sum / sets);
			report_num(r, "%.3f", max.max);
			report_num(r, "%.4f", cv.sum / sets);
		}
		report_end_row(r);
	}
	report_end_table(r);
	report_note(r,
		    "A ring's stddev/mean is about 1/sqrt(V) (0.1 at V=100), its busiest node "
		    "about 1.7 stddevs above fair at N=10 and 2.7 at N=100 (the largest of N "
		    "draws); V=16 and V=256 are Cassandra's num_tokens after and before 4.0, "
		    "V=160 ketama's (and hashlb's default). Equal weights give Maglev nodes slot "
		    "counts at most one apart, so its imbalance is about N/M: at N=100, M=251 "
		    "gives 2 or 3 slots a node (max 1.195x fair). Maglev takes 2 bytes a slot "
		    "whatever N; a ring grows with N x V. Bytes: hashlb_table_bytes() with all "
		    "up.");
	free(shares);
}

static void table_lookup_by_n(struct ctx *x)
{
	static const char *const cols[] = {
		"scheme",	   "ns/key N=10", "ns/key N=100", "ns/key N=1000", "N=1000 / N=10",
		"build ms N=1000", NULL
	};
	static const uint32_t ns[3] = { 10, 100, 1000 };
	struct report *r = &x->r;
	uint32_t *out = malloc(x->n_keys_lookup * sizeof(*out));

	if (!out)
		abort();
	report_table(r, "lookup-by-n", "Lookup cost as the pool grows (key hash excluded)", cols);
	for (size_t i = 0; i < N_SCHEMES; i++) {
		double t[3], build = 0;

		for (int j = 0; j < 3; j++) {
			struct nodeset nodes;
			struct placement p;

			if (nodeset_init(&nodes, ns[j], "node-") < 0 ||
			    placement_build(&all_schemes[i], &nodes, 0, NULL, &p) < 0)
				abort();
			t[j] = time_lookup_ns(&p, x->keys, x->n_keys_lookup, out, x->reps);
			if (j == 2)
				build = time_build_ms(&all_schemes[i], &nodes, x->reps);
			placement_free(&p);
			nodeset_free(&nodes);
		}
		report_str(r, all_schemes[i].label);
		report_num(r, "%.1f", t[0]);
		report_num(r, "%.1f", t[1]);
		report_num(r, "%.1f", t[2]);
		report_num(r, "%.1f", t[2] / t[0]);
		report_num(r, "%.3f", build);
		report_end_row(r);
	}
	report_end_table(r);
	report_note(r, "Rendezvous scores every node (O(N)); jump is O(log N) steps; the ring is a "
		       "search over N x V points through hashlb's index; Maglev, modulo and slots "
		       "are one index.");
	free(out);
}

int bench_schemes(const struct bench_opts *o)
{
	struct change res[N_SCHEMES];
	struct ctx x;

	memset(&x, 0, sizeof(x));
	x.o = o;
	x.n_keys = o->quick ? 100000 : 1000000;
	x.n_keys_set = o->quick ? 10000 : 100000;
	x.n_keys_lookup = o->quick ? 20000 : 100000;
	x.reps = o->quick ? 3 : 5;
	x.keys = bench_client_keys(x.n_keys, 0);
	if (!x.keys)
		return -ENOMEM;
	x.xxh_ns = time_tuple_hash_ns(x.n_keys, x.reps);

	report_begin(&x.r, o->format, stdout, o->command);
	report_note(&x.r,
		    "hashing schemes compared on %zu client keys (src-ip XXH64 of 10.x.y.z)%s; "
		    "ring and Maglev are hashlb's tables, the others reference implementations in "
		    "bench/refschemes.c.",
		    x.n_keys, o->quick ? ", quick run" : "");
	table_change(&x, res);
	table_sets(&x);
	table_failure(&x);
	table_weights(&x);
	table_modulo(&x);
	table_cost(&x, res);
	table_replicas(&x);
	table_lookup_by_n(&x);
	table_balance(&x);
	report_end(&x.r);
	free(x.keys);
	return 0;
}
