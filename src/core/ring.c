// SPDX-License-Identifier: MIT
/*
 * Ring-hash with virtual nodes. Points are generated per backend in name
 * order and sorted by position with a stable bucket sort, so equal
 * positions (a 2^-64 event) are ordered by name: deterministic everywhere.
 *
 * Lookup layout, measured with `hashlb-bench lookup` (bench/lookup.c: ns
 * per lookup with the tuple hash, throughput, CPU time; 2 shared cores of
 * an AMD EPYC KVM guest, Debian 12, gcc 12 -O2; see bench/RESULTS.md):
 *
 *   layout over the same points           10x160  100x160  1000x160
 *   plain binary search (ring-bsearch)      61       91      133
 *   two-level index, ~1 point a bucket      20       23       36
 *   lookup index, kept (ring)                7       10       18
 *   (the tuple hash alone: 4 ns; load average 7-10 on the 2 cores while
 *   measured, figures move by +-20% with it)
 *
 * A binary search is ~17 dependent reads, each a mispredicted branch. The
 * two-level index maps the top bits of a hash to the first point of its
 * bucket, then steps over one or two adjacent positions in a loop; it is
 * exported by hashlb_table_view() because a BPF program walks it with a
 * small bounded loop (max_scan). The lookup index kept for user space has
 * at least one bucket per point, so the steps are at most two and taken
 * without a branch (see ring_index() below); a worker's independent
 * lookups then overlap instead of waiting on mispredictions. An index
 * whose entries name the backend of single-owner buckets was measured too
 * (one read for most lookups, 15-20 ns at 100x160 with the hash): its unpredictable
 * branch cost more than the reads it saved.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <linux/types.h>
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#include "xxh64.h"

#include "table-internal.h"

/*
 * XXH64 of name || be32(j) for names short enough that the whole input is
 * under 32 bytes (the specification's short-input path, in bpf/xxh64.h's
 * steps). The name's whole 8-byte lanes are the same for every point and
 * are folded once into <h0>; the rest, the name's last len % 8 bytes and
 * the point number, is assembled in registers: writing the point number's
 * bytes to memory and reading them back as a lane would stall every point
 * on a failed store-to-load forward.
 */
struct point_hasher {
	uint64_t h0; /* state after the name's whole lanes */
	uint64_t tail; /* the name's last len % 8 bytes, little-endian */
	uint32_t nb; /* len % 8 */
};

static void point_hasher_init(struct point_hasher *ph, const char *name, size_t len, uint64_t seed)
{
	size_t pre = len / 8 * 8;

	ph->h0 = seed + HLB_XXH_P5 + len + 4;
	for (size_t k = 0; k < pre; k += 8)
		ph->h0 = hlb_xxh_lane8(ph->h0, (const __u8 *)name + k);
	ph->nb = (uint32_t)(len - pre);
	ph->tail = 0;
	for (uint32_t k = 0; k < ph->nb; k++)
		ph->tail |= (uint64_t)(uint8_t)name[pre + k] << (8 * k);
}

static inline uint64_t point_hash(const struct point_hasher *ph, uint32_t j)
{
	uint64_t jb = __builtin_bswap32(j), h = ph->h0;
	uint64_t w0 = ph->tail | jb << (8 * ph->nb);
	uint64_t w1 = ph->nb > 4 ? jb >> (8 * (8 - ph->nb)) : 0;
	uint32_t rem = ph->nb + 4;

	if (rem >= 8) {
		h ^= hlb_xxh_round(0, w0);
		h = hlb_xxh_rotl(h, 27) * HLB_XXH_P1 + HLB_XXH_P4;
		w0 = w1;
		rem -= 8;
	}
	if (rem >= 4) {
		h ^= (w0 & 0xffffffffu) * HLB_XXH_P1;
		h = hlb_xxh_rotl(h, 23) * HLB_XXH_P2 + HLB_XXH_P3;
		w0 >>= 32;
		rem -= 4;
	}
	for (; rem; rem--, w0 >>= 8)
		h = hlb_xxh_lane1(h, (__u8)w0);
	return hlb_xxh_avalanche(h);
}

struct point {
	uint64_t pos;
	uint32_t owner;
};

/* Stable insertion sort of the points [lo, hi) of <r> by position. */
static void insertion_sort(struct ring *r, uint32_t lo, uint32_t hi)
{
	for (uint32_t i = lo + 1; i < hi; i++) {
		uint64_t p = r->pos[i];
		uint16_t o = r->owner[i];
		uint32_t j = i;

		while (j > lo && r->pos[j - 1] > p) {
			r->pos[j] = r->pos[j - 1];
			r->owner[j] = r->owner[j - 1];
			j--;
		}
		r->pos[j] = p;
		r->owner[j] = o;
	}
}

/* Stable merge sort of a[0..n) with tmp[0..n/2) as scratch. */
static void merge_sort(struct point *a, struct point *tmp, uint32_t n)
{
	uint32_t h = n / 2, i = 0, j = h, k = 0;

	if (n < 2)
		return;
	merge_sort(a, tmp, h);
	merge_sort(a + h, tmp, n - h);
	memcpy(tmp, a, (size_t)h * sizeof(*a));
	while (i < h && j < n) /* k <= j: the right run is never overwritten before it is read */
		a[k++] = a[j].pos < tmp[i].pos ? a[j++] : tmp[i++];
	while (i < h)
		a[k++] = tmp[i++];
}

/* The rare large bucket [lo, hi) of <r>, sorted through <a> (scratch, >= 1.5 x its size). */
static void sort_large(struct ring *r, uint32_t lo, uint32_t hi, struct point *a)
{
	uint32_t size = hi - lo;

	for (uint32_t i = 0; i < size; i++) {
		a[i].pos = r->pos[lo + i];
		a[i].owner = r->owner[lo + i];
	}
	merge_sort(a, a + size, size);
	for (uint32_t i = 0; i < size; i++) {
		r->pos[lo + i] = a[i].pos;
		r->owner[lo + i] = (uint16_t)a[i].owner;
	}
}

/*
 * Stable sort of the points, given as positions <gen> in generation order
 * (backend <order>[0]'s <count>[0] points first, and so on), into <r>'s
 * arrays. Positions are uniform 64-bit hashes, so one distribution by the
 * top bits into about n/4 buckets (a count array that stays in cache)
 * leaves a few points a bucket, sorted in place; a bucket that is
 * unexpectedly large is merge-sorted, so no input is quadratic. Stability
 * orders equal positions (a 2^-64 event) by generation: name order, then
 * point number, the same on every machine.
 */
static int sort_points(const uint64_t *gen, const uint32_t *order, const uint32_t *count,
		       uint32_t n_backends, struct ring *r)
{
	uint32_t bits = 1, shift, *start, largest = 0, n = r->n, k = 0;
	struct point *scratch = NULL;

	while (bits < 24 && (1u << bits) < n / 4)
		bits++;
	shift = 64 - bits;
	start = calloc(((size_t)1 << bits) + 1, sizeof(*start));
	if (!start)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		start[(gen[i] >> shift) + 1]++;
	for (uint32_t b = 1; b <= (1u << bits); b++) {
		largest = start[b] > largest ? start[b] : largest;
		start[b] += start[b - 1];
	}
	if (largest > 64) {
		/* a large bucket: scratch for its merge sort */
		scratch = malloc(((size_t)largest * 3 / 2 + 1) * sizeof(*scratch));
		if (!scratch) {
			free(start);
			return -ENOMEM;
		}
	}
	for (uint32_t o = 0; o < n_backends; o++) {
		for (uint32_t j = 0; j < count[o]; j++, k++) {
			uint32_t d = start[gen[k] >> shift]++;

			r->pos[d] = gen[k];
			r->owner[d] = (uint16_t)order[o];
		}
	}
	/* start[b] is now the end of bucket b */
	for (uint32_t b = 0, begin = 0; b < (1u << bits); b++) {
		uint32_t size = start[b] - begin;

		if (size > 64)
			sort_large(r, begin, start[b], scratch);
		else if (size > 1)
			insertion_sort(r, begin, start[b]);
		begin = start[b];
	}
	free(scratch);
	free(start);
	return 0;
}

/*
 * A ring's points, pos then owner in one block, immutable once sealed and refcounted: the
 * tables hashlb_table_with_down() makes from one share its full ring (10 bytes a point, and a
 * pass over them) rather than copy it, as a table's effective ring with none down shares its
 * full ring's. Each ring holding them holds a reference until ring_free(), on whatever thread.
 */
struct ring_points {
	_Atomic uint32_t refs;
	_Atomic uint32_t accounted; /* rings of accounted tables, hashlb_table_account() */
	uint64_t pos[]; /* n + 1, then the n + 1 owners */
};

static struct ring_points *ring_points(const uint64_t *pos)
{
	return (struct ring_points *)((char *)pos - offsetof(struct ring_points, pos));
}

static int ring_alloc(struct ring *r, uint32_t n)
{
	struct ring_points *rp;

	memset(r, 0, sizeof(*r));
	rp = malloc(sizeof(*rp) + ((size_t)n + 1) * (sizeof(*r->pos) + sizeof(*r->owner)));
	if (!rp)
		return -ENOMEM;
	atomic_init(&rp->refs, 1);
	atomic_init(&rp->accounted, 0);
	r->n = n;
	r->pos = rp->pos;
	r->owner = (uint16_t *)(rp->pos + n + 1);
	return 0;
}

/* The sentinels that let a lookup scan without bounds checks and wrap. */
static void ring_seal(struct ring *r)
{
	r->pos[r->n] = UINT64_MAX;
	r->owner[r->n] = r->n ? r->owner[0] : HASHLB_BACKEND_NONE;
}

int ring_build(struct ring *r, uint32_t v, uint64_t seed, char *const *names,
	       const uint32_t *weights, const uint32_t *order, uint32_t n, uint64_t n_points)
{
	uint64_t *gen;
	uint32_t *count, k = 0;
	uint8_t buf[HASHLB_NAME_MAX + 4];
	int ret;

	gen = malloc((size_t)(n_points ? n_points : 1) * sizeof(*gen));
	count = malloc((size_t)(n ? n : 1) * sizeof(*count));
	if (!gen || !count) {
		free(gen);
		free(count);
		return -ENOMEM;
	}
	for (uint32_t o = 0; o < n; o++) {
		uint32_t i = order[o];
		size_t len = strlen(names[i]);

		count[o] = v * weights[i]; /* validated: the sum is below 2^31 */
		if (len + 4 < 32) {
			struct point_hasher ph;

			point_hasher_init(&ph, names[i], len, seed);
			for (uint32_t j = 0; j < count[o]; j++)
				gen[k++] = point_hash(&ph, j);
			continue;
		}
		memcpy(buf, names[i], len);
		for (uint32_t j = 0; j < count[o]; j++) {
			buf[len] = (uint8_t)(j >> 24);
			buf[len + 1] = (uint8_t)(j >> 16);
			buf[len + 2] = (uint8_t)(j >> 8);
			buf[len + 3] = (uint8_t)j;
			gen[k++] = XXH64(buf, len + 4, seed);
		}
	}
	ret = ring_alloc(r, k);
	if (ret == 0)
		ret = sort_points(gen, order, count, n, r);
	if (ret == 0)
		ring_seal(r);
	else
		ring_free(r);
	free(gen);
	free(count);
	return ret;
}

int ring_rebuild(struct ring *r, const struct ring *prev, const uint32_t *remap, uint32_t v,
		 uint64_t seed, char *const *names, const uint32_t *weights,
		 const uint32_t *fresh_order, uint32_t n_fresh, uint64_t n_points)
{
	struct ring fr;
	uint64_t fresh_points = 0;
	uint32_t j = 0, k = 0;
	int ret;

	for (uint32_t f = 0; f < n_fresh; f++)
		fresh_points += (uint64_t)v * weights[fresh_order[f]];
	ret = ring_build(&fr, v, seed, names, weights, fresh_order, n_fresh, fresh_points);
	if (ret < 0)
		return ret;
	ret = ring_alloc(r, (uint32_t)n_points);
	if (ret < 0) {
		ring_free(&fr);
		return ret;
	}
	/*
	 * One pass over both sorted runs. Equal positions (a 2^-64 event) go
	 * in name order, as ring_build()'s stable sort puts them; the points
	 * of one backend are all in one run, already in point order.
	 */
	for (uint32_t i = 0; i < prev->n; i++) {
		uint32_t o = remap[prev->owner[i]];
		uint64_t p = prev->pos[i];

		if (o == RING_DROP)
			continue;
		while (j < fr.n && (fr.pos[j] < p ||
				    (fr.pos[j] == p && strcmp(names[fr.owner[j]], names[o]) < 0))) {
			r->pos[k] = fr.pos[j];
			r->owner[k++] = fr.owner[j++];
		}
		r->pos[k] = p;
		r->owner[k++] = (uint16_t)o;
	}
	for (; j < fr.n; j++) {
		r->pos[k] = fr.pos[j];
		r->owner[k++] = fr.owner[j];
	}
	ring_free(&fr);
	if (k != n_points) {
		/* <remap> kept a backend whose weight or V changed */
		ring_free(r);
		return -EINVAL;
	}
	ring_seal(r);
	return 0;
}

int ring_filter(struct ring *r, const struct ring *full, const bool *down)
{
	uint32_t k = 0;
	int ret;

	for (uint32_t j = 0; j < full->n; j++)
		k += !down[full->owner[j]];
	if (k == full->n) {
		/* nothing to drop: read the full ring's points */
		ring_share(r, full);
		r->borrowed = true;
		return 0;
	}
	ret = ring_alloc(r, k);
	if (ret < 0)
		return ret;
	k = 0;
	for (uint32_t j = 0; j < full->n; j++) {
		if (down[full->owner[j]])
			continue;
		r->pos[k] = full->pos[j];
		r->owner[k] = full->owner[j];
		k++;
	}
	ring_seal(r);
	return 0;
}

void ring_share(struct ring *r, const struct ring *src)
{
	memset(r, 0, sizeof(*r));
	atomic_fetch_add_explicit(&ring_points(src->pos)->refs, 1, memory_order_relaxed);
	r->n = src->n;
	r->pos = src->pos;
	r->owner = src->owner;
}

/*
 * Both indexes, from one count of the points per lookup bucket.
 *
 * The lookup index has 2^hot_bits >= n buckets, so a bucket holds at most
 * two points but for a few percent of them. Its entry is the bucket's
 * first point (or the first one after it, for an empty bucket), and the
 * answer is that point or one of the next two: a lookup reads the entry,
 * then compares the hash with two positions without a branch, the
 * sentinels stopping the steps at n and doing the wrap. A bucket of more
 * than two points is flagged and scanned.
 *
 * The exported index has 2^bucket_bits <= n buckets, each the union of
 * 2^(hot_bits - bucket_bits) lookup buckets, so its entries (the first
 * point of each bucket) are read off the same count.
 */
int ring_index(struct ring *r)
{
	uint32_t hb = 1, eb = 0, nb, ne, shift, *hot, run = 0, max_scan = 0;

	while (hb < 26 && (1ull << hb) < r->n)
		hb++;
	while (eb < hb && (2ull << eb) <= r->n)
		eb++;
	nb = 1u << hb;
	ne = 1u << eb;
	shift = 64 - hb;
	hot = calloc(nb, sizeof(*hot));
	r->bucket = malloc(((size_t)ne + 1) * sizeof(*r->bucket));
	if (!hot || !r->bucket) {
		free(hot);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < r->n; i++)
		hot[r->pos[i] >> shift]++;
	for (uint32_t b = 0; b < nb; b++) {
		run += hot[b];
		hot[b] = run; /* the end of bucket b: one past its last point */
	}
	for (uint32_t e = 0; e < ne; e++) {
		uint32_t first = e << (hb - eb);

		r->bucket[e] = first ? hot[first - 1] : 0;
		if (e && r->bucket[e] - r->bucket[e - 1] > max_scan)
			max_scan = r->bucket[e] - r->bucket[e - 1];
	}
	r->bucket[ne] = r->n;
	if (r->n - r->bucket[ne - 1] > max_scan)
		max_scan = r->n - r->bucket[ne - 1];
	r->bucket_bits = eb;
	r->max_scan = max_scan;
	/* from the last bucket down, so that the previous end is still there */
	for (uint32_t b = nb; b-- > 0;) {
		uint32_t end = hot[b], begin = b ? hot[b - 1] : 0;

		hot[b] = begin | (end - begin > 2 ? RING_HOT_LONG : 0);
	}
	r->hot = hot;
	r->hot_shift = shift;
	return 0;
}

uint32_t ring_find_bsearch(const struct ring *r, uint64_t hash)
{
	uint32_t lo = 0, hi = r->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (r->pos[mid] < hash)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == r->n ? 0 : lo;
}

uint64_t ring_points_account(const struct ring *r, bool add)
{
	return r->pos ? table_accounted_step(&ring_points(r->pos)->accounted, add,
					     ring_points_bytes(r))
		      : 0;
}

void ring_free(struct ring *r)
{
	struct ring_points *rp = r->pos ? ring_points(r->pos) : NULL;

	if (rp && atomic_fetch_sub_explicit(&rp->refs, 1, memory_order_acq_rel) == 1)
		free(rp);
	free(r->bucket);
	free(r->hot);
	memset(r, 0, sizeof(*r));
}
