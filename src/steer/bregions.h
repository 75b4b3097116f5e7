/* SPDX-License-Identifier: MIT */
/*
 * The layout of hlb_bslots, the backend slots conntrack entries name (struct hlb_steer_bregion):
 * where table t's slot i is, the regions a growth appends, and whether a found program's list
 * is a layout at all: apart from libbpf, so that the arithmetic is tested
 * (tests/unit/test_bregions.c) without loading a program (16 growths load 16 programs).
 */
#ifndef HASHLB_STEER_BREGIONS_H
#define HASHLB_STEER_BREGIONS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hashlb/steer_shared.h"

/* Room a growth's list needs: a program's, its first region (the slots of before) and two. */
#define BREGIONS_GROWN_MAX (HLB_STEER_BREGIONS_MAX + 3)

/* Table <t>'s backend slot <i> in the layout <r> (<n> regions; none: t * <cap> + i). */
static inline uint32_t bregions_slot(const struct hlb_steer_bregion *r, uint32_t n, uint32_t cap,
				     uint32_t t, uint32_t i)
{
	for (uint32_t k = 0; k < n; k++)
		if (t >= r[k].t_first && t < r[k].t_end && i >= r[k].lo && i < r[k].hi)
			return r[k].base + (t - r[k].t_first) * (r[k].hi - r[k].lo) + (i - r[k].lo);
	return t * cap + i;
}

/* Whether region <r> lays its slots out as t * <cap> + i (a plain layout's). */
static inline bool bregion_plain(const struct hlb_steer_bregion *r, uint32_t cap)
{
	return (r->lo == 0 && r->hi == cap && r->base == r->t_first * cap) ||
	       (r->t_end - r->t_first == 1 && r->base == r->t_first * cap + r->lo);
}

/*
 * Into <ret> (BREGIONS_GROWN_MAX), the layout of a program of <tables> tables of <cap> slots
 * laid out as <r> (<n> regions) grown to <g_tables> of <g_cap>: every slot where it is (its
 * conntrack entries name it), each table's new slots in a region after them, then the new
 * tables'. One that stays t * <g_cap> + i (one table, or no more backends) has none, and an
 * older hashlb can still drive it. How many regions: more than HLB_STEER_BREGIONS_MAX is
 * grown too many times.
 */
static inline uint32_t bregions_grow(const struct hlb_steer_bregion *r, uint32_t n, uint32_t tables,
				     uint32_t cap, uint32_t g_tables, uint32_t g_cap,
				     struct hlb_steer_bregion *ret)
{
	uint32_t at = tables * cap;
	bool plain = true;

	for (uint32_t k = 0; k < n; k++)
		ret[k] = r[k];
	if (n == 0)
		ret[n++] = (struct hlb_steer_bregion){ 0, 0, tables, 0, cap };
	if (g_cap > cap) {
		ret[n++] = (struct hlb_steer_bregion){ at, 0, tables, cap, g_cap };
		at += tables * (g_cap - cap);
	}
	if (g_tables > tables)
		ret[n++] = (struct hlb_steer_bregion){ at, tables, g_tables, 0, g_cap };
	for (uint32_t k = 0; k < n; k++)
		plain &= bregion_plain(&ret[k], g_cap);
	return plain ? 0 : n;
}

/*
 * 0 if <r> (<n> regions) lays out every slot of <tables> tables of <cap> slots, each at its
 * own index of a hlb_bslots of <bslots> entries; else -EPROTO, <why> (<why_n> bytes) saying
 * which region is not. Each region is a rectangle of (table, slot) laid out on one run of
 * indices: disjoint rectangles inside the tables, covering them, and disjoint runs below
 * tables * cap, are every slot at an index of its own. Before, only the bounds and the count
 * were checked: overlapping regions (a found program's, corrupt) put two tables' slots at one
 * index, and one past tables * cap was written past the incarnation scan's array.
 */
static inline int bregions_check(const struct hlb_steer_bregion *r, uint32_t n, uint32_t tables,
				 uint32_t cap, uint32_t bslots, char *why, size_t why_n)
{
	uint64_t all = (uint64_t)tables * cap, covered = 0;

	if (bslots < all) {
		snprintf(why, why_n,
			 "has a map of %u backend slots, fewer than its %u tables of %u", bslots,
			 tables, cap);
		return -EPROTO;
	}
	for (uint32_t k = 0; k < n; k++) {
		const struct hlb_steer_bregion *a = &r[k];
		uint64_t count = (uint64_t)(a->t_end - a->t_first) * (a->hi - a->lo);
		bool bad = a->t_first >= a->t_end || a->t_end > tables || a->lo >= a->hi ||
			   a->hi > cap || a->base + count > all;

		for (uint32_t j = 0; j < k && !bad; j++) {
			const struct hlb_steer_bregion *b = &r[j];
			uint64_t b_count = (uint64_t)(b->t_end - b->t_first) * (b->hi - b->lo);

			bad = (a->t_first < b->t_end && b->t_first < a->t_end && a->lo < b->hi &&
			       b->lo < a->hi) ||
			      (a->base < b->base + b_count && b->base < a->base + count);
		}
		if (bad) {
			snprintf(
				why, why_n,
				"has a backend slot region (%u) out of its %u tables of %u, or over "
				"another",
				k, tables, cap);
			return -EPROTO;
		}
		covered += count;
	}
	if (covered != all) {
		snprintf(why, why_n,
			 "has backend slot regions of %llu slots, not its %u tables of %u",
			 (unsigned long long)covered, tables, cap);
		return -EPROTO;
	}
	return 0;
}

#endif
