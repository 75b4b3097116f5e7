// SPDX-License-Identifier: MIT
/*
 * Maglev population (Eisenbud et al., NSDI 2016, section 3.4) with weighted
 * turns. Each backend walks its own permutation of the M slots,
 * offset + j * skip (mod M), claiming the next free slot on each turn. The
 * permutation is advanced by one addition and one conditional subtraction:
 * no division per step.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "table-internal.h"

struct perm {
	uint32_t next; /* next candidate slot */
	uint32_t skip;
	uint32_t weight;
	uint32_t credit; /* weighted turns: a turn each time credit reaches w_max */
	uint16_t idx;
};

int maglev_populate(uint16_t *slots, uint32_t m, uint64_t seed, char *const *names,
		    const uint32_t *weights, const uint32_t *order, uint32_t n)
{
	struct perm *p;
	uint32_t np = 0, w_max = 0, filled = 0;

	p = calloc(n, sizeof(*p));
	if (!p)
		return -ENOMEM;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = order[k];
		size_t len = strlen(names[i]);

		if (!weights[i])
			continue;
		p[np].next = (uint32_t)(XXH64(names[i], len, seed) % m);
		p[np].skip = (uint32_t)(XXH64(names[i], len, ~seed) % (m - 1)) + 1;
		p[np].weight = weights[i];
		p[np].idx = (uint16_t)i;
		if (weights[i] > w_max)
			w_max = weights[i];
		np++;
	}
	memset(slots, 0xff, (size_t)m * sizeof(*slots));
	if (!np) {
		free(p);
		return 0; /* every slot HASHLB_BACKEND_NONE */
	}

	/*
	 * Rounds over the backends in name order. A backend of weight w gains
	 * w credit per round and takes a turn whenever its credit reaches
	 * w_max, so over R rounds it takes R * w / w_max turns: shares follow
	 * the weights, with integers only (bit-identical everywhere).
	 */
	for (;;) {
		for (uint32_t k = 0; k < np; k++) {
			struct perm *e = &p[k];
			uint32_t c;

			e->credit += e->weight;
			if (e->credit < w_max)
				continue;
			e->credit -= w_max;
			c = e->next;
			while (slots[c] != HASHLB_BACKEND_NONE) {
				c += e->skip;
				if (c >= m)
					c -= m;
			}
			slots[c] = e->idx;
			c += e->skip;
			if (c >= m)
				c -= m;
			e->next = c;
			if (++filled == m) {
				free(p);
				return 0;
			}
		}
	}
}
