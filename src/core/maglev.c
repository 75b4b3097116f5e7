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

/* The population's state, shared by the two ways of ordering the turns below. */
struct pop {
	uint16_t *slots;
	uint64_t *taken;
	struct perm *p;
	uint32_t m, np, filled, n_free;
	uint32_t free_slots[MAGLEV_TAIL];
	bool tail;
};

/* <e> takes its turn: the next free slot of its permutation. True once the table is full. */
static inline bool take_turn(struct pop *st, struct perm *e)
{
	uint32_t c, skip, back, m = st->m;
	uint64_t *taken = st->taken;

	if (!st->tail && m - st->filled <= MAGLEV_TAIL) {
		st->tail = true;
		for (uint32_t s = 0; s < m; s++)
			if (!(taken[s / 64] >> (s % 64) & 1))
				st->free_slots[st->n_free++] = s;
		for (uint32_t q = 0; q < st->np; q++)
			st->p[q].inv = mod_inverse(st->p[q].skip, m);
	}
	/* locals: with -fno-strict-aliasing the stores to taken[] would
	 * otherwise reload them every probe */
	skip = e->skip;
	back = e->back;
	if (st->tail) {
		c = tail_claim(e, st->free_slots, &st->n_free, m);
	} else {
		c = e->next;
		while (taken[c / 64] >> (c % 64) & 1) {
			/* c + skip mod m as one subtraction and a select: a
			 * 2-cycle chain per probe, not 3 */
			uint32_t wrapped = c - back;

			c = c < back ? c + skip : wrapped;
		}
		taken[c / 64] |= 1ull << (c % 64);
	}
	st->slots[c] = e->idx;
	e->next = c < back ? c + skip : c - back;
	return ++st->filled == m;
}

/* A backend's next turn: round <round> (1-based), backend <k> of the name order. */
struct due {
	uint64_t round;
	uint32_t k;
};

static inline bool due_before(const struct due *a, const struct due *b)
{
	return a->round < b->round || (a->round == b->round && a->k < b->k);
}

static void due_down(struct due *h, uint32_t n, uint32_t i)
{
	struct due x = h[i];

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && due_before(&h[c + 1], &h[c]))
			c++;
		if (!due_before(&h[c], &x))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = x;
}

/*
 * The turns of the rounds below in the same order, (round, name order),
 * taken from a heap of each backend's next turn instead of visiting every
 * backend every round: with weight w against w_max a backend has had
 * floor(r * w / w_max) turns after round r (its credit stays in
 * 0..w_max-1), so its turn t + 1 comes in round ceil((t + 1) * w_max / w).
 * The rounds cost O(rounds x backends), M x w_max / (average weight): 13.5 s
 * for one backend of weight 10,000 among 1,199 of weight 1 at the largest
 * M; the heap O(M log n) whatever the weights.
 */
static int populate_by_heap(struct pop *st, uint32_t w_max)
{
	struct due *h = malloc((size_t)st->np * sizeof(*h));
	uint32_t n = st->np;

	if (!h)
		return -ENOMEM;
	for (uint32_t k = 0; k < n; k++)
		h[k] = (struct due){ ((uint64_t)w_max + st->p[k].weight - 1) / st->p[k].weight, k };
	for (uint32_t i = n / 2; i-- > 0;)
		due_down(h, n, i);
	for (;;) {
		struct perm *e = &st->p[h[0].k];

		if (take_turn(st, e))
			break;
		e->credit++; /* here: the turns taken */
		h[0].round = ((uint64_t)e->credit + 1) * w_max / e->weight +
			     (((uint64_t)e->credit + 1) * w_max % e->weight != 0);
		due_down(h, n, 0);
	}
	free(h);
	return 0;
}

int maglev_populate(uint16_t *slots, uint32_t m, uint64_t seed, char *const *names,
		    const uint32_t *weights, const uint32_t *order, uint32_t n)
{
	struct pop st = { .slots = slots, .m = m };
	struct perm *p;
	uint64_t *taken, w_sum = 0;
	uint32_t np = 0, w_max = 0;
	int r;

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
		w_sum += weights[i];
		np++;
	}
	if (!np) {
		memset(slots, 0xff, (size_t)m * sizeof(*slots));
		free(p);
		free(taken);
		return 0; /* every slot HASHLB_BACKEND_NONE */
	}
	if (np == 1) {
		/* one backend takes every turn, so every slot (its permutation
		 * visits them all): a fill, not M random probes and stores, which
		 * took 0.5 s at the largest M (a pool of 2 with one down) */
		for (uint32_t j = 0; j < m; j++)
			slots[j] = p[0].idx;
		free(p);
		free(taken);
		return 0;
	}
	st.p = p;
	st.np = np;
	st.taken = taken;

	/*
	 * Rounds over the backends in name order. A backend of weight w gains
	 * w credit per round and takes a turn whenever its credit reaches
	 * w_max, so over R rounds it takes R * w / w_max turns: shares follow
	 * the weights, with integers only (bit-identical everywhere). When
	 * most visits of a round would find no turn due (w_max above 4 times
	 * the average weight), the same turns come from a heap instead.
	 */
	if ((uint64_t)w_max * np > 4 * w_sum) {
		r = populate_by_heap(&st, w_max);
		free(p);
		free(taken);
		return r;
	}
	for (;;) {
		for (uint32_t k = 0; k < np; k++) {
			struct perm *e = &p[k];

			e->credit += e->weight;
			if (e->credit < w_max)
				continue;
			e->credit -= w_max;
			if (take_turn(&st, e)) {
				free(p);
				free(taken);
				return 0;
			}
		}
	}
}
