/* SPDX-License-Identifier: MIT */
/*
 * Every scheme that `hashlb-bench schemes` compares, behind one interface:
 * build a placement of keys on a set of nodes, then look keys up.
 *
 * Ring and Maglev are hashlb's own tables (src/core), measured as the
 * product runs them. Modulo, rendezvous, jump hash and fixed hash slots are
 * written here: they are reference schemes that the comparison needs, not
 * product code, so they live with the benchmark and nothing links them.
 */
#ifndef HASHLB_BENCH_REFSCHEMES_H
#define HASHLB_BENCH_REFSCHEMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hashlb/table.h"

enum scheme_kind {
	SCHEME_MODULO = 0, /* list[h % n] */
	SCHEME_RING, /* hashlb ring, V points per weight unit */
	SCHEME_MAGLEV, /* hashlb Maglev, M slots */
	SCHEME_RENDEZVOUS, /* highest random weight, weighted by -w / ln(u) */
	SCHEME_JUMP, /* Lamping & Veach jump consistent hash */
	SCHEME_SLOTS, /* fixed hash slots moved by an operator (Redis Cluster) */
	SCHEME_KIND_MAX
};

struct scheme {
	const char *label;
	enum scheme_kind kind;
	uint32_t param; /* ring V, Maglev M, number of slots */
};

struct nodeset {
	uint32_t n;
	char **name;
	uint32_t *weight;
};

struct placement {
	enum scheme_kind kind;
	uint32_t n; /* nodes */
	char **name; /* borrowed from the nodeset */
	struct hashlb_table *table; /* ring, Maglev */
	uint32_t *list; /* modulo, jump: node per bucket (weights expanded); slots: node per slot */
	uint32_t n_list;
	uint64_t *node_hash; /* rendezvous */
	double *node_weight; /* rendezvous; NULL when all weights are equal */
};

/*
 * Place <nodes> with <s> and <seed>. <prev> (may be NULL) is the placement
 * before a membership change: only fixed slots use it, since an operator
 * moves the fewest slots from the old assignment (nodes matched by name).
 * Returns 0 or a negative errno.
 */
int placement_build(const struct scheme *s, const struct nodeset *nodes, uint64_t seed,
		    const struct placement *prev, struct placement *ret);
void placement_free(struct placement *p);

/* Node index of each of the <n> keys into <out>. */
void placement_lookup_all(const struct placement *p, const uint64_t *keys, size_t n, uint32_t *out);

/* <n> nodes named "<prefix><i>", weight 1. */
int nodeset_init(struct nodeset *s, uint32_t n, const char *prefix);
void nodeset_free(struct nodeset *s);

#endif
