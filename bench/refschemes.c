// SPDX-License-Identifier: MIT
/*
 * The schemes of the comparison (see refschemes.h). Modulo, rendezvous,
 * jump and slots are reference implementations written for the benchmark,
 * kept simple and textbook-faithful; ring and Maglev call the core library.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "refschemes.h"

int nodeset_init(struct nodeset *s, uint32_t n, const char *prefix)
{
	memset(s, 0, sizeof(*s));
	s->name = calloc(n ? n : 1, sizeof(*s->name));
	s->weight = calloc(n ? n : 1, sizeof(*s->weight));
	if (!s->name || !s->weight) {
		nodeset_free(s);
		return -ENOMEM;
	}
	s->n = n;
	for (uint32_t i = 0; i < n; i++) {
		if (asprintf(&s->name[i], "%s%u", prefix, i) < 0) {
			s->name[i] = NULL;
			nodeset_free(s);
			return -ENOMEM;
		}
		s->weight[i] = 1;
	}
	return 0;
}

void nodeset_free(struct nodeset *s)
{
	if (s->name)
		for (uint32_t i = 0; i < s->n; i++)
			free(s->name[i]);
	free(s->name);
	free(s->weight);
	memset(s, 0, sizeof(*s));
}

void placement_free(struct placement *p)
{
	hashlb_table_free(p->table);
	free(p->list);
	free(p->node_hash);
	free(p->node_weight);
	memset(p, 0, sizeof(*p));
}

/* Buckets for modulo and jump: node i takes weight[i] consecutive buckets. */
static int expand_weights(const struct nodeset *nodes, struct placement *p)
{
	uint32_t total = 0, k = 0;

	for (uint32_t i = 0; i < nodes->n; i++)
		total += nodes->weight[i];
	p->list = malloc((size_t)(total ? total : 1) * sizeof(*p->list));
	if (!p->list)
		return -ENOMEM;
	for (uint32_t i = 0; i < nodes->n; i++)
		for (uint32_t w = 0; w < nodes->weight[i]; w++)
			p->list[k++] = i;
	p->n_list = total;
	return 0;
}

static int32_t find_name(const struct nodeset *nodes, const char *name)
{
	for (uint32_t i = 0; i < nodes->n; i++)
		if (strcmp(nodes->name[i], name) == 0)
			return (int32_t)i;
	return -1;
}

/*
 * Fixed slots. A fresh assignment gives each node a contiguous range in
 * proportion to its weight. After a change, an operator keeps every slot
 * where it is unless its node is gone or holds more than its new quota, and
 * hands those slots to the nodes under quota: the fewest moves possible.
 */
static int slots_build(const struct scheme *s, const struct nodeset *nodes,
		       const struct placement *prev, struct placement *p)
{
	uint32_t ns = s->param, total = 0, n_pool = 0, *quota, *have, *pool;
	int ret = -ENOMEM;

	p->list = malloc((size_t)ns * sizeof(*p->list));
	quota = calloc(nodes->n, sizeof(*quota));
	have = calloc(nodes->n, sizeof(*have));
	pool = malloc((size_t)ns * sizeof(*pool));
	if (!p->list || !quota || !have || !pool)
		goto out;
	p->n_list = ns;
	for (uint32_t i = 0; i < nodes->n; i++)
		total += nodes->weight[i];
	/* quota_i = floor(ns * cum_{i+1} / W) - floor(ns * cum_i / W) */
	uint64_t cum = 0;

	for (uint32_t i = 0; i < nodes->n; i++) {
		uint64_t lo = ns * cum / total;

		cum += nodes->weight[i];
		quota[i] = (uint32_t)(ns * cum / total - lo);
	}
	if (!prev) {
		uint32_t j = 0;

		for (uint32_t i = 0; i < nodes->n; i++)
			for (uint32_t q = 0; q < quota[i]; q++)
				p->list[j++] = i;
		ret = 0;
		goto out;
	}
	/* old owner by name, or the pool */
	for (uint32_t j = 0; j < ns; j++) {
		int32_t o = find_name(nodes, prev->name[prev->list[j]]);

		if (o >= 0 && have[o] < quota[o]) {
			p->list[j] = (uint32_t)o;
			have[o]++;
		} else {
			pool[n_pool++] = j;
		}
	}
	/* the pool to the nodes under quota, in node order */
	for (uint32_t i = 0, k = 0; i < nodes->n; i++)
		while (have[i] < quota[i] && k < n_pool) {
			p->list[pool[k++]] = i;
			have[i]++;
		}
	ret = 0;
out:
	free(quota);
	free(have);
	free(pool);
	return ret;
}

int placement_build(const struct scheme *s, const struct nodeset *nodes, uint64_t seed,
		    const struct placement *prev, struct placement *ret)
{
	struct placement p;
	int r = 0;

	memset(&p, 0, sizeof(p));
	p.kind = s->kind;
	p.n = nodes->n;
	p.name = nodes->name;
	switch (s->kind) {
	case SCHEME_RING:
	case SCHEME_MAGLEV: {
		struct hashlb_backend_spec *b = calloc(nodes->n, sizeof(*b));
		struct hashlb_table_params prm;

		if (!b)
			return -ENOMEM;
		for (uint32_t i = 0; i < nodes->n; i++) {
			b[i].name = nodes->name[i];
			b[i].weight = nodes->weight[i];
		}
		hashlb_table_params_init(&prm, s->kind == SCHEME_RING ? HASHLB_SCHEME_RING
								      : HASHLB_SCHEME_MAGLEV);
		prm.seed = seed;
		if (s->kind == SCHEME_RING)
			prm.ring_v = s->param;
		else
			prm.maglev_m = s->param;
		r = hashlb_table_build(&prm, b, nodes->n, &p.table, NULL);
		free(b);
		break;
	}
	case SCHEME_MODULO:
	case SCHEME_JUMP:
		r = expand_weights(nodes, &p);
		break;
	case SCHEME_RENDEZVOUS: {
		bool equal = true;

		p.node_hash = malloc(nodes->n * sizeof(*p.node_hash));
		p.node_weight = malloc(nodes->n * sizeof(*p.node_weight));
		if (!p.node_hash || !p.node_weight) {
			r = -ENOMEM;
			break;
		}
		for (uint32_t i = 0; i < nodes->n; i++) {
			p.node_hash[i] = XXH64(nodes->name[i], strlen(nodes->name[i]), seed);
			p.node_weight[i] = nodes->weight[i];
			equal &= nodes->weight[i] == nodes->weight[0];
		}
		if (equal) {
			free(p.node_weight);
			p.node_weight = NULL;
		}
		break;
	}
	case SCHEME_SLOTS:
		r = slots_build(s, nodes, prev, &p);
		break;
	default:
		r = -EINVAL;
	}
	if (r < 0) {
		placement_free(&p);
		return r;
	}
	*ret = p;
	return 0;
}

/* The score of node <nh> for key <h>: a strong 64-bit mix of both (murmur3's finaliser). */
static inline uint64_t hrw_mix(uint64_t h, uint64_t nh)
{
	uint64_t x = h ^ nh;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static inline uint32_t jump_hash(uint64_t key, uint32_t buckets)
{
	int64_t b = -1, j = 0;

	while (j < buckets) {
		b = j;
		key = key * 2862933555777941757ull + 1;
		j = (int64_t)((double)(b + 1) * ((double)(1ll << 31) / (double)((key >> 33) + 1)));
	}
	return (uint32_t)b;
}

void placement_lookup_all(const struct placement *p, const uint64_t *keys, size_t n, uint32_t *out)
{
	switch (p->kind) {
	case SCHEME_RING:
	case SCHEME_MAGLEV:
		for (size_t k = 0; k < n; k++)
			out[k] = hashlb_table_lookup(p->table, keys[k]);
		break;
	case SCHEME_MODULO:
	case SCHEME_SLOTS: /* a key's slot is h % slots, its node the slot's owner */
		for (size_t k = 0; k < n; k++)
			out[k] = p->list[keys[k] % p->n_list];
		break;
	case SCHEME_JUMP:
		for (size_t k = 0; k < n; k++)
			out[k] = p->list[jump_hash(keys[k], p->n_list)];
		break;
	case SCHEME_RENDEZVOUS:
		for (size_t k = 0; k < n; k++) {
			uint32_t best = 0;

			if (!p->node_weight) {
				uint64_t top = 0;

				for (uint32_t i = 0; i < p->n; i++) {
					uint64_t sc = hrw_mix(keys[k], p->node_hash[i]);

					if (sc > top || i == 0) {
						top = sc;
						best = i;
					}
				}
			} else {
				/* -w / ln(u), u uniform in (0, 1): shares follow weights */
				double top = -INFINITY;

				for (uint32_t i = 0; i < p->n; i++) {
					uint64_t sc = hrw_mix(keys[k], p->node_hash[i]);
					double u = ((double)(sc >> 11) + 0.5) * 0x1p-53;
					double v = -p->node_weight[i] / log(u);

					if (v > top) {
						top = v;
						best = i;
					}
				}
			}
			out[k] = best;
		}
		break;
	default:
		break;
	}
}
