// SPDX-License-Identifier: MIT
/*
 * Maglev population (Eisenbud et al., NSDI 2016, section 3.4) with weighted
 * turns. Each backend walks its own permutation of the M slots,
 * offset + j * skip (mod M), claiming the next free slot on each turn. The
 * permutation is advanced by one addition and one conditional subtraction:
 * no division per step. Measured with `hashlb-bench lookup` (build ms,
 * M=65537, N=100): 2 ms with probes on the slot array, 1.3 with the bitmap
 * of taken slots, 1.15 with the arithmetic tail below as well.
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
	uint32_t back; /* m - skip: c + skip wraps iff c >= back */
	uint32_t inv; /* skip^-1 mod m, for the last turns */
	uint32_t weight;
	uint32_t credit; /* weighted turns: a turn each time credit reaches w_max */
	uint16_t idx;
};

/*
 * The last MAGLEV_TAIL turns, when few slots are free and probing walks
 * M / free taken slots a turn (the M x ln M total is mostly there), find the
 * next free slot of a permutation arithmetically instead: slot s comes
 * t = (s - next) / skip (mod M) steps after next, and the free slot with
 * the smallest t is exactly the one probing would reach. One multiply and
 * one modulo per free slot, at most MAGLEV_TAIL of them.
 */
#define MAGLEV_TAIL 128u

/* a^-1 mod m (m prime, 0 < a < m), by the extended Euclidean algorithm. */
static uint32_t mod_inverse(uint32_t a, uint32_t m)
{
	int64_t t = 0, nt = 1, r = m, nr = a;

	while (nr) {
		int64_t q = r / nr, tmp;

		tmp = t - q * nt;
		t = nt;
		nt = tmp;
		tmp = r - q * nr;
		r = nr;
		nr = tmp;
	}
	return (uint32_t)(t < 0 ? t + m : t);
}

/* Claim the free slot that <e>'s permutation reaches first; remove it from <free>. */
static uint32_t tail_claim(const struct perm *e, uint32_t *free_slots, uint32_t *n_free, uint32_t m)
{
	uint64_t best_t = UINT64_MAX;
	uint32_t best = 0, c;

	for (uint32_t q = 0; q < *n_free; q++) {
		uint32_t s = free_slots[q];
		uint64_t d = s >= e->next ? s - e->next : s + m - e->next;
		uint64_t t = d * e->inv % m;

		if (t < best_t) {
			best_t = t;
			best = q;
		}
	}
	c = free_slots[best];
	free_slots[best] = free_slots[--*n_free];
	return c;
}

int maglev_populate(uint16_t *slots, uint32_t m, uint64_t seed, char *const *names,
		    const uint32_t *weights, const uint32_t *order, uint32_t n)
{
	struct perm *p;
	uint64_t *taken;
	uint32_t np = 0, w_max = 0, filled = 0, free_slots[MAGLEV_TAIL], n_free = 0;
	bool tail = false;

	p = calloc(n, sizeof(*p));
	/* Which slots are taken, one bit each: the probes of the last turns
	 * (M x ln M of them in all) stay in L1 instead of walking the 2-byte
	 * slot array. */
	taken = calloc(((size_t)m + 63) / 64, sizeof(*taken));
	if (!p || !taken) {
		free(p);
		free(taken);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = order[k];
		size_t len = strlen(names[i]);

		if (!weights[i])
			continue;
		p[np].next = (uint32_t)(XXH64(names[i], len, seed) % m);
		p[np].skip = (uint32_t)(XXH64(names[i], len, ~seed) % (m - 1)) + 1;
		p[np].back = m - p[np].skip;
		p[np].weight = weights[i];
		p[np].idx = (uint16_t)i;
		if (weights[i] > w_max)
			w_max = weights[i];
		np++;
	}
	if (!np) {
		memset(slots, 0xff, (size_t)m * sizeof(*slots));
		free(p);
		free(taken);
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
			uint32_t c, skip, back;

			e->credit += e->weight;
			if (e->credit < w_max)
				continue;
			e->credit -= w_max;
			if (!tail && m - filled <= MAGLEV_TAIL) {
				tail = true;
				for (uint32_t s = 0; s < m; s++)
					if (!(taken[s / 64] >> (s % 64) & 1))
						free_slots[n_free++] = s;
				for (uint32_t q = 0; q < np; q++)
					p[q].inv = mod_inverse(p[q].skip, m);
			}
			/* locals: with -fno-strict-aliasing the stores to
			 * taken[] would otherwise reload them every probe */
			skip = e->skip;
			back = e->back;
			if (tail) {
				c = tail_claim(e, free_slots, &n_free, m);
			} else {
				c = e->next;
				while (taken[c / 64] >> (c % 64) & 1) {
					/* c + skip mod m as one subtraction
					 * and a select: a 2-cycle chain per
					 * probe, not 3 */
					uint32_t wrapped = c - back;

					c = c < back ? c + skip : wrapped;
				}
				taken[c / 64] |= 1ull << (c % 64);
			}
			slots[c] = e->idx;
			e->next = c < back ? c + skip : c - back;
			if (++filled == m) {
				free(p);
				free(taken);
				return 0;
			}
		}
	}
}
