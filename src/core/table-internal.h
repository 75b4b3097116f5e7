/* SPDX-License-Identifier: MIT */
/*
 * Private to the core: the table's representation and the per-scheme
 * builders. Benchmarks include it to measure layouts against each other.
 */
#ifndef HASHLB_TABLE_INTERNAL_H
#define HASHLB_TABLE_INTERNAL_H

#include <stdatomic.h>

#include "hashlb/table.h"

struct ring {
	uint32_t n; /* points */
	uint64_t *pos; /* n + 1: sorted ascending, then a UINT64_MAX sentinel */
	uint16_t *owner; /* n + 1: backend index of each point, then owner[0] again */
	bool borrowed; /* pos and owner are the full ring's (shared: see ring.c) */
	/* The exported two-level index (hashlb_table_view, BPF): 2^bucket_bits <= n. */
	uint32_t bucket_bits;
	uint32_t *bucket; /* (1 << bucket_bits) + 1 entries, see hashlb_table_view */
	uint32_t max_scan;
	/* The lookup index of user space: 2^hot_bits >= 2n buckets, see ring.c. */
	uint32_t hot_shift; /* 64 - hot_bits */
	uint32_t *hot;
};

/* A hot entry with this bit set starts a bucket of more than two points. */
#define RING_HOT_LONG 0x80000000u

/*
 * The owners of the effective table's entries (Maglev slots, ring points)
 * by block, for the preference walk (table.c): a block whose owners are all
 * in the list already is stepped over whole. Kept when the weights are
 * skewed (OWNER_BLOCKS_SKEW), where the walk would otherwise read the
 * entries of the large backends by the thousand to reach a small one.
 */
#define OWNER_BLOCKS_SKEW 16u /* kept when the largest weight > 16 x the smallest (not 0) */
#define OWNER_SET 4u /* owners a block's summary names */
#define OWNER_MANY 0xffffu /* first owner of a summary: more than OWNER_SET of them */
#define OWNER_SMALL_BITS 6u /* 64 entries a small block */
#define OWNER_LARGE_BITS 12u /* 4096 a large one */

struct hashlb_table {
	struct hashlb_table_params params;
	uint32_t n; /* backends */
	uint32_t n_up; /* backends not down */
	uint32_t n_present; /* distinct backends that own slots/points in the effective table */
	bool skewed; /* the weights call for owner blocks */
	char **names; /* caller's order; one allocation holds the strings */
	uint32_t *weights;
	bool *down;
	uint32_t *order; /* backend indices sorted by name: the build order */
	uint64_t *name_hash; /* XXH64(name, 0): the fingerprint's stand-in for a name */

	/* Maglev: the full table (all backends) and the effective one. Every slot array
	 * (these and kept_slots) is refcounted and immutable once built, shared with the tables
	 * hashlb_table_with_down() and hashlb_table_rebuild() make from this one where it is
	 * theirs as it is (see table.c); t->slots holds its own reference when it is the full
	 * table. */
	uint16_t *full_slots;
	uint16_t *slots;
	/*
	 * The kept table, so that a down set the service comes back to (a flap, a
	 * ramp's or a retry table) costs a copy, not a population: one more slot
	 * array, of the three counted. Either the survivors' own population of its
	 * down set (kept_survivors: the same whatever the full table, so a rebuild
	 * may carry it over a repopulation) or the effective table of that down set
	 * over this full table (hashlb_table_with_down() keeps the full table, so it
	 * serves as well there: its slots of backends down are the survivors'). Its
	 * down set is kept_down, or t->down itself when that is NULL (the
	 * survivors' table of the table's own outage, as a build keeps it). Never
	 * one whose down backends all weigh 0: that is the full table.
	 */
	uint16_t *kept_slots;
	bool *kept_down;
	bool kept_survivors;
	/* With kept_down, when kept_fingerprinted: the fingerprint of the effective table of
	 * kept_down over this full table and the backends present in it, which a table of that
	 * down set copies, not computes. */
	bool kept_fingerprinted;
	uint32_t kept_present;
	uint64_t kept_fingerprint;
	/* Ring: the full ring (all backends) and the effective one (up only). */
	struct ring full_ring;
	struct ring ring;

	/* The owner blocks over slots or ring.owner: (n >> OWNER_SMALL_BITS) + 1
	 * small ones, then the large ones; NULL when not kept. */
	uint16_t (*blocks)[OWNER_SET];
	/* With backends down that own entries, the owner blocks over full_slots or
	 * full_ring.owner where the table it was made from held them (its own, with none
	 * down): a return to all up takes them, not builds them. NULL otherwise. */
	uint16_t (*full_blocks)[OWNER_SET];

	uint64_t fingerprint;
	/* fingerprint and n_present copied from a table of the same effective slots */
	bool fingerprinted;
	size_t bytes;
};

/*
 * One reference of an accounted table (hashlb_table_account()) more (<add>) or fewer on a
 * shared array of <bytes> whose count of such references is <accounted>: the bytes the
 * accounted total gains or loses, <bytes> at the first reference or the last, else 0.
 */
static inline uint64_t table_accounted_step(_Atomic uint32_t *accounted, bool add, uint64_t bytes)
{
	if (add)
		return atomic_fetch_add_explicit(accounted, 1, memory_order_relaxed) == 0 ? bytes
											  : 0;
	return atomic_fetch_sub_explicit(accounted, 1, memory_order_relaxed) == 1 ? bytes : 0;
}

/*
 * hashlb_table_preference(), also saying in <ret_reads> (may be NULL) how
 * many entries and block summaries it read: what the walk costs.
 */
size_t table_preference_walk(const struct hashlb_table *t, uint64_t hash, uint32_t *ret_idx,
			     size_t k, uint64_t *ret_reads);

/* Fill <slots> (M entries) by Maglev population over the backends in <order>
 * with <weights> (0 = takes no turn). Returns 0 or -ENOMEM. */
int maglev_populate(uint16_t *slots, uint32_t m, uint64_t seed, char *const *names,
		    const uint32_t *weights, const uint32_t *order, uint32_t n);

static inline uint32_t maglev_slot(uint64_t hash, uint32_t m)
{
	return (uint32_t)(((hash >> 32) * (uint64_t)m) >> 32);
}

/* Build the full ring: V x weight points per backend (no index). */
int ring_build(struct ring *r, uint32_t v, uint64_t seed, char *const *names,
	       const uint32_t *weights, const uint32_t *order, uint32_t n, uint64_t n_points);
/* remap[] entry of a backend of the previous ring whose points go. */
#define RING_DROP UINT32_MAX
/*
 * The full ring over the same V and seed as <prev>, reusing its points:
 * remap[o] is the new index of <prev>'s backend o when its name and weight
 * are unchanged, RING_DROP otherwise; <fresh_order> lists the backends
 * whose points are generated (new or reweighted), in name order. The
 * result is ring_build()'s over all new backends (<n_points> points), in
 * one linear merge instead of a sort. -ENOMEM, or -EINVAL when the counts
 * do not add up.
 */
int ring_rebuild(struct ring *r, const struct ring *prev, const uint32_t *remap, uint32_t v,
		 uint64_t seed, char *const *names, const uint32_t *weights,
		 const uint32_t *fresh_order, uint32_t n_fresh, uint64_t n_points);
/* Keep the points of <full> whose owner is not down, into <r>; shares
 * <full>'s points (ring_share()) when none is down. */
int ring_filter(struct ring *r, const struct ring *full, const bool *down);
/* <src>'s points (not its index) into <r>: the same arrays, one more reference held
 * (freed with the last ring_free() of the rings holding them). Never fails. */
void ring_share(struct ring *r, const struct ring *src);
/* The bytes hashlb_table_bytes() counts for <r>'s points: 10 a point and the sentinel. */
static inline size_t ring_points_bytes(const struct ring *r)
{
	return ((size_t)r->n + 1) * (sizeof(*r->pos) + sizeof(*r->owner));
}
/* table_accounted_step() on <r>'s points (0 for a ring without). */
uint64_t ring_points_account(const struct ring *r, bool add);
/* Build both indexes over r->pos. */
int ring_index(struct ring *r);
void ring_free(struct ring *r);

/* The backend of <hash>: HASHLB_BACKEND_NONE for an empty ring. */
static inline uint32_t ring_lookup(const struct ring *r, uint64_t hash)
{
	uint32_t e = r->hot[hash >> r->hot_shift], i = e & ~RING_HOT_LONG;

	if (__builtin_expect(e & RING_HOT_LONG, 0)) {
		while (r->pos[i] < hash)
			i++;
		return r->owner[i];
	}
	/* at most two points in the bucket: the answer is i, i + 1 or
	 * i + 2, found without a branch; the sentinel stops at n */
	i += r->pos[i] < hash;
	i += r->pos[i] < hash;
	return r->owner[i]; /* owner[n] is owner[0]: the wrap */
}

/* Index of the first point with pos >= hash (wrapping to 0) through the
 * exported index, as BPF walks it; r->n > 0. */
static inline uint32_t ring_find(const struct ring *r, uint64_t hash)
{
	uint64_t b = r->bucket_bits ? hash >> (64 - r->bucket_bits) : 0;
	uint32_t i = r->bucket[b], end = r->bucket[b + 1];

	while (i < end && r->pos[i] < hash)
		i++;
	return i == r->n ? 0 : i;
}

/* The same answer by a plain binary search (kept for the layout benchmark). */
uint32_t ring_find_bsearch(const struct ring *r, uint64_t hash);

#endif
