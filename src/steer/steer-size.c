// SPDX-License-Identifier: MIT
/* What a table needs of a kernel program, and how a program is sized for it: one rule for
 * hashlb steer, hashlb run's first program, a program of several tables and one grown in
 * place (shared by the loader and the stub built without BPF). */
#include <stdint.h>

#include "hashlb/steer.h"

/* A program's default capacities: what one sized for a small table has. */
#define SIZE_BACKENDS_MIN 256u
#define SIZE_RING_POINTS_MIN 65536u
/* ring points at most: 4 index buckets a point (HLB_STEER_RING_BUCKETS_PER_POINT), 32-bit */
#define SIZE_RING_POINTS_MAX (UINT32_MAX / 8)

void hashlb_steer_needs(const struct hashlb_table_params *p, const uint32_t *weights,
			const bool *backup, uint32_t n, struct hashlb_steer_needs *ret)
{
	uint64_t sum[2] = { 0, 0 };

	/* the backups are in the table only while no primary is */
	for (uint32_t i = 0; i < n; i++)
		sum[backup && backup[i]] += weights[i];
	ret->backends = n;
	ret->maglev_m = p->maglev_m ? p->maglev_m : HASHLB_MAGLEV_M_DEFAULT;
	/* a Maglev table has no ring: none of its maps' memory (before, vnodes x weights of
	 * ring maps no packet reads); a reload making it a ring grows the program then */
	ret->ring_points = p->scheme != HASHLB_SCHEME_RING
				   ? 0
				   : (p->ring_v ? p->ring_v : HASHLB_RING_V_DEFAULT) *
					     (sum[1] > sum[0] ? sum[1] : sum[0]);
}

void hashlb_steer_size_add(struct hashlb_steer_opts *o, const struct hashlb_steer_needs *need)
{
	uint64_t backends = 2 * (uint64_t)need->backends, points = 2 * need->ring_points;

	if (backends < SIZE_BACKENDS_MIN)
		backends = SIZE_BACKENDS_MIN;
	if (backends > UINT32_MAX)
		backends = UINT32_MAX;
	if (points < SIZE_RING_POINTS_MIN)
		points = SIZE_RING_POINTS_MIN;
	if (points > SIZE_RING_POINTS_MAX)
		points = SIZE_RING_POINTS_MAX;
	if (o->max_backends < backends)
		o->max_backends = (uint32_t)backends;
	if (o->max_maglev_m < HASHLB_MAGLEV_M_DEFAULT)
		o->max_maglev_m = HASHLB_MAGLEV_M_DEFAULT;
	if (o->max_maglev_m < need->maglev_m)
		o->max_maglev_m = need->maglev_m;
	if (o->max_ring_points < points)
		o->max_ring_points = (uint32_t)points;
}
