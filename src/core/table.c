// SPDX-License-Identifier: MIT
/*
 * The scheme-agnostic table: validation, the full table, the health
 * overlay, lookups, preference lists, shares and the fingerprint. The rule
 * of the overlay is documented in include/hashlb/table.h.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "table-internal.h"

static const char *const scheme_names[HASHLB_SCHEME_MAX] = {
	[HASHLB_SCHEME_RING] = "ring",
	[HASHLB_SCHEME_MAGLEV] = "maglev",
};

const char *hashlb_scheme_name(enum hashlb_scheme s)
{
	return (unsigned)s < HASHLB_SCHEME_MAX ? scheme_names[s] : NULL;
}

int hashlb_scheme_parse(const char *s, enum hashlb_scheme *ret_scheme)
{
	for (unsigned i = 0; i < HASHLB_SCHEME_MAX; i++) {
		if (strcmp(s, scheme_names[i]) == 0) {
			*ret_scheme = (enum hashlb_scheme)i;
			return 0;
		}
	}
	if (strcmp(s, "ring-hash") == 0 || strcmp(s, "ring_hash") == 0) {
		*ret_scheme = HASHLB_SCHEME_RING;
		return 0;
	}
	return -EINVAL;
}

bool hashlb_is_prime(uint64_t n)
{
	if (n < 2)
		return false;
	if (n % 2 == 0)
		return n == 2;
	for (uint64_t d = 3; d * d <= n; d += 2)
		if (n % d == 0)
			return false;
	return true;
}

void hashlb_nearest_primes(uint32_t n, uint32_t *ret_lo, uint32_t *ret_hi)
{
	uint32_t lo, hi;

	for (lo = n - 1; lo > 2 && !hashlb_is_prime(lo); lo--)
		;
	for (hi = n + 1; !hashlb_is_prime(hi); hi++)
		;
	*ret_lo = lo;
	*ret_hi = hi;
}

void hashlb_table_params_init(struct hashlb_table_params *p, enum hashlb_scheme scheme)
{
	memset(p, 0, sizeof(*p));
	p->scheme = scheme;
	p->ring_v = HASHLB_RING_V_DEFAULT;
	p->maglev_m = HASHLB_MAGLEV_M_DEFAULT;
	p->max_bytes = HASHLB_TABLE_MEM_DEFAULT;
}

/*
 * A slot array (full, effective, kept), immutable once filled, shared by the tables that hold it
 * (a table made by hashlb_table_with_down() or hashlb_table_rebuild() holds its source's arrays
 * where they are its own, the full table above all: a service's table, its retry and ramp tables,
 * the next health change's, the next reload's): each holds a reference from its build to its
 * free, so the array lives while any of them does, on whatever thread each is freed (a table's
 * own lifetime is the caller's: published tables are freed once the workers have left them).
 * Only the table that allocated an array writes it, before the build returns.
 */
struct slots_shared {
	_Atomic uint32_t refs;
	_Atomic uint32_t accounted; /* references of accounted tables, hashlb_table_account() */
	/*
	 * What apply_overlay() reads off the array as a table's effective slots, the same for
	 * every table that holds it (its backends of the same names at the same indices): the
	 * backends present, plus 1 (0 until a table computed it), and the fingerprint. A table
	 * all up again takes them here, computed by the build whose effective table the full one
	 * was, rather than read M slots twice. Written once the fingerprint is (release).
	 */
	_Atomic uint32_t present;
	_Atomic uint64_t fp;
	uint16_t slots[];
};

/* A new slot array of <m> entries, one reference held; NULL if no memory. */
static uint16_t *slots_new(uint32_t m)
{
	struct slots_shared *sh = malloc(sizeof(*sh) + (size_t)m * sizeof(sh->slots[0]));

	if (!sh)
		return NULL;
	atomic_init(&sh->refs, 1);
	atomic_init(&sh->accounted, 0);
	atomic_init(&sh->present, 0);
	atomic_init(&sh->fp, 0);
	return sh->slots;
}

static struct slots_shared *slots_shared(const uint16_t *slots)
{
	return (struct slots_shared *)((char *)slots - offsetof(struct slots_shared, slots));
}

/* <slots> (slots_new()'s), one more reference held. */
static uint16_t *slots_ref(const uint16_t *slots)
{
	atomic_fetch_add_explicit(&slots_shared(slots)->refs, 1, memory_order_relaxed);
	return (uint16_t *)slots;
}

/* Drop a reference to <slots> (NULL accepted): freed with the last. */
static void slots_unref(uint16_t *slots)
{
	struct slots_shared *sh;

	if (!slots)
		return;
	sh = slots_shared(slots);
	if (atomic_fetch_sub_explicit(&sh->refs, 1, memory_order_acq_rel) == 1)
		free(sh);
}

static void blocks_unref(uint16_t (*blocks)[OWNER_SET]);

void hashlb_table_free(struct hashlb_table *t)
{
	if (!t)
		return;
	if (t->names)
		free(t->names[0]); /* one block holds every name */
	free(t->names);
	free(t->weights);
	free(t->down);
	free(t->order);
	free(t->name_hash);
	slots_unref(t->slots);
	slots_unref(t->full_slots);
	slots_unref(t->kept_slots);
	free(t->kept_down);
	blocks_unref(t->blocks);
	blocks_unref(t->full_blocks);
	ring_free(&t->full_ring);
	ring_free(&t->ring);
	free(t);
}

static int cmp_order(const void *a, const void *b, void *names)
{
	const char *const *nm = names;

	return strcmp(nm[*(const uint32_t *)a], nm[*(const uint32_t *)b]);
}

/*
 * <order> (n indexes) sorted by <names>; 1 if two share a name, with the first backend (in
 * <names>' order) whose name an earlier one has into *<ret_dup> and that earlier one's into
 * *<ret_first>, else 0.
 */
static int name_order(const char *const *names, uint32_t *order, uint32_t n, uint32_t *ret_dup,
		      uint32_t *ret_first)
{
	uint32_t dup = UINT32_MAX, first = 0, lo = 0;

	for (uint32_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), cmp_order, (void *)names);
	/* in each run of one name, the least index is the earlier one, the next least its
	 * repeat: the least of those repeats is the first */
	for (uint32_t k = 0; k < n; k++) {
		uint32_t min = UINT32_MAX, next = UINT32_MAX;

		for (lo = k; k + 1 < n && strcmp(names[order[k + 1]], names[order[lo]]) == 0; k++)
			;
		for (uint32_t j = lo; j <= k; j++) {
			if (order[j] < min) {
				next = min;
				min = order[j];
			} else if (order[j] < next) {
				next = order[j];
			}
		}
		if (next < dup) {
			dup = next;
			first = min;
		}
	}
	if (dup == UINT32_MAX)
		return 0;
	*ret_dup = dup;
	*ret_first = first;
	return 1;
}

/* name_order(), the repeated name an error (0-based indexes, the earlier first). */
static int name_order_err(const char *const *names, uint32_t *order, uint32_t n,
			  struct hashlb_error *err)
{
	uint32_t dup, first;

	if (name_order(names, order, n, &dup, &first))
		return hashlb_err(err, -EINVAL, HASHLB_ERR_DUPLICATE_NAME,
				  "backends %u and %u have the same name '%s'", first, dup,
				  names[dup]);
	return 0;
}

int hashlb_names_duplicate(const char *const *names, uint32_t n, uint32_t *ret_dup,
			   uint32_t *ret_first)
{
	uint32_t *order;
	int r;

	if (n < 2)
		return 0;
	order = malloc(n * sizeof(*order));
	if (!order)
		return -ENOMEM;
	r = name_order(names, order, n, ret_dup, ret_first);
	free(order);
	return r;
}

/* <p> with hashlb_table_build()'s defaults for what it leaves at 0. */
static struct hashlb_table_params params_with_defaults(const struct hashlb_table_params *p)
{
	struct hashlb_table_params prm = *p;

	if (!prm.ring_v)
		prm.ring_v = HASHLB_RING_V_DEFAULT;
	if (!prm.maglev_m)
		prm.maglev_m = HASHLB_MAGLEV_M_DEFAULT;
	if (!prm.max_bytes)
		prm.max_bytes = HASHLB_TABLE_MEM_DEFAULT;
	return prm;
}

/* Whether <b>'s weights call for owner blocks (table-internal.h): the
 * largest above OWNER_BLOCKS_SKEW times the smallest that is not 0. */
static bool weights_skewed(const struct hashlb_backend_spec *b, size_t n)
{
	uint32_t lo = UINT32_MAX, hi = 0;

	for (size_t i = 0; i < n; i++) {
		if (!b[i].weight)
			continue;
		lo = b[i].weight < lo ? b[i].weight : lo;
		hi = b[i].weight > hi ? b[i].weight : hi;
	}
	return hi > (uint64_t)OWNER_BLOCKS_SKEW * lo;
}

/* Bytes of the owner blocks over <entries>: one more small and large block than whole ones. */
static uint64_t owner_blocks_bytes(uint64_t entries)
{
	return ((entries >> OWNER_SMALL_BITS) + 1 + (entries >> OWNER_LARGE_BITS) + 1) * OWNER_SET *
	       sizeof(uint16_t);
}

/* Bytes of a table of <n> backends besides its slots or points. */
static uint64_t table_base_bytes(uint32_t n, uint64_t names_len)
{
	uint64_t per_backend = sizeof(char *) + 4 + 1 + 4 + 8 + 32;

	return sizeof(struct hashlb_table) + names_len + n * per_backend;
}

/* Bytes the table will hold, for the memory cap; UINT64_MAX on overflow. */
static uint64_t table_bytes(const struct hashlb_table_params *p, uint32_t n, uint64_t names_len,
			    uint64_t weight_sum, bool skewed)
{
	uint64_t bytes = table_base_bytes(n, names_len);

	if (p->scheme == HASHLB_SCHEME_MAGLEV) {
		/* full, effective and kept slots, and the kept table's down set */
		bytes += 3ull * p->maglev_m * sizeof(uint16_t) + n;
		if (skewed) /* over the effective and the full slots */
			bytes += 2 * owner_blocks_bytes(p->maglev_m);
	} else {
		uint64_t pts = (uint64_t)p->ring_v * weight_sum;

		/* point indices must stay below 2^31 (ring.c's lookup index) */
		if (pts >= (1ull << 31))
			return UINT64_MAX;
		/* full and effective rings (8 + 2 bytes a point each), the
		 * exported index (<= 4) and the lookup index (<= 16) */
		bytes += pts * (2 * (8 + 2) + 4 + 16);
		bytes += pts * 2 * sizeof(uint64_t) * 2; /* build scratch: two point arrays */
		/* over the effective points: those over the full ones that a table with
		 * backends down keeps (hashlb_table_with_down(), never a build) are less
		 * than the scratch, freed before, which a table made from this one does not
		 * hold: the cap bounds it without them */
		if (skewed)
			bytes += owner_blocks_bytes(pts);
	}
	return bytes;
}

uint64_t hashlb_table_bytes_max(const struct hashlb_table_params *p,
				const struct hashlb_backend_spec *backends, size_t n)
{
	struct hashlb_table_params prm = params_with_defaults(p);
	uint64_t names_len = 0, pts = 0, bytes;
	bool skewed = weights_skewed(backends, n);

	for (size_t i = 0; i < n; i++) {
		names_len += strlen(backends[i].name) + 1;
		pts += backends[i].weight;
	}
	bytes = table_base_bytes((uint32_t)n, names_len);
	if (prm.scheme == HASHLB_SCHEME_MAGLEV)
		/* apply_overlay(): the full, effective and kept slots, the kept
		 * table's down set, and the owner blocks over the effective and the full ones */
		return bytes + 3ull * prm.maglev_m * sizeof(uint16_t) + n +
		       (skewed ? 2 * owner_blocks_bytes(prm.maglev_m) : 0);
	pts *= prm.ring_v;
	if (pts >= (1ull << 31))
		return UINT64_MAX;
	/* The full ring and the effective one, 10 bytes a point and a
	 * sentinel each; ring_index()'s exported index, at most one entry a
	 * point and one more (4 bytes), and its lookup index, fewer than two
	 * a point or two (4 bytes): 32 bytes a point, and a point more; and
	 * the owner blocks over the effective ring's points and the full one's. */
	return bytes + (pts + 1) * (2 * (8 + 2) + 4 + 2 * 4) +
	       (skewed ? 2 * owner_blocks_bytes(pts) : 0);
}

static int validate(const struct hashlb_table_params *p, const struct hashlb_backend_spec *b,
		    size_t n, struct hashlb_error *err)
{
	uint64_t weight_sum = 0, names_len = 0;

	if ((unsigned)p->scheme >= HASHLB_SCHEME_MAX)
		return hashlb_err(err, -EINVAL, HASHLB_ERR_BAD_SCHEME, "unknown scheme %d",
				  (int)p->scheme);
	if (n == 0)
		return hashlb_err(err, -EINVAL, HASHLB_ERR_NO_BACKENDS, "no backends");
	if (n > HASHLB_BACKENDS_MAX)
		return hashlb_err(err, -EINVAL, HASHLB_ERR_TOO_MANY_BACKENDS,
				  "%zu backends: at most %u", n, HASHLB_BACKENDS_MAX);
	for (size_t i = 0; i < n; i++) {
		size_t len = b[i].name ? strlen(b[i].name) : 0;

		if (len == 0 || len > HASHLB_NAME_MAX)
			return hashlb_err(err, -EINVAL, HASHLB_ERR_BAD_NAME,
					  "backend %zu: name must be 1 to %u bytes", i,
					  HASHLB_NAME_MAX);
		if (b[i].weight > HASHLB_WEIGHT_MAX)
			return hashlb_err(err, -EINVAL, HASHLB_ERR_WEIGHT_RANGE,
					  "backend '%s': weight %u out of range 0..%u", b[i].name,
					  b[i].weight, HASHLB_WEIGHT_MAX);
		weight_sum += b[i].weight;
		names_len += len + 1;
	}
	if (weight_sum == 0 && n == 1)
		return hashlb_err(err, -EINVAL, HASHLB_ERR_ALL_WEIGHTS_ZERO,
				  "the only backend has weight 0");
	if (weight_sum == 0)
		return hashlb_err(err, -EINVAL, HASHLB_ERR_ALL_WEIGHTS_ZERO,
				  "all %zu backends have weight 0", n);
	if (p->scheme == HASHLB_SCHEME_RING) {
		if (p->ring_v < 1 || p->ring_v > HASHLB_RING_V_MAX)
			return hashlb_err(err, -EINVAL, HASHLB_ERR_SIZE_RANGE,
					  "ring points per weight %u out of range 1..%u", p->ring_v,
					  HASHLB_RING_V_MAX);
	} else {
		if (p->maglev_m < HASHLB_MAGLEV_M_MIN || p->maglev_m > HASHLB_MAGLEV_M_MAX)
			return hashlb_err(err, -EINVAL, HASHLB_ERR_SIZE_RANGE,
					  "Maglev table size %u out of range %u..%u", p->maglev_m,
					  HASHLB_MAGLEV_M_MIN, HASHLB_MAGLEV_M_MAX);
		if (!hashlb_is_prime(p->maglev_m)) { /* as the config's table_size says it */
			uint32_t lo, hi;

			hashlb_nearest_primes(p->maglev_m, &lo, &hi);
			return hashlb_err(err, -EINVAL, HASHLB_ERR_NOT_PRIME,
					  "Maglev table size %u is not prime (nearest: %u or %u)",
					  p->maglev_m, lo, hi);
		}
		if (p->maglev_m < n)
			return hashlb_err(err, -EINVAL, HASHLB_ERR_SIZE_TOO_SMALL,
					  "Maglev table size %u is smaller than the %zu backends",
					  p->maglev_m, n);
	}
	uint64_t need = table_bytes(p, (uint32_t)n, names_len, weight_sum, weights_skewed(b, n));
	size_t cap = p->max_bytes ? p->max_bytes : HASHLB_TABLE_MEM_DEFAULT;

	/* Checked apart from the cap: with max_bytes = SIZE_MAX the overflow
	 * marker would pass "need > cap". */
	if (need == UINT64_MAX)
		return hashlb_err(err, -E2BIG, HASHLB_ERR_MEMORY_CAP,
				  "ring would have 2^31 points or more");
	/* The figure alone did not say what makes it: the ring's points, or Maglev's M */
	if (need > cap && p->scheme == HASHLB_SCHEME_RING)
		return hashlb_err(
			err, -E2BIG, HASHLB_ERR_MEMORY_CAP,
			"ring of %llu points (vnodes %u x weights summed %llu) needs %llu "
			"bytes to build, above the cap of %zu",
			(unsigned long long)((uint64_t)p->ring_v * weight_sum), p->ring_v,
			(unsigned long long)weight_sum, (unsigned long long)need, cap);
	if (need > cap)
		return hashlb_err(err, -E2BIG, HASHLB_ERR_MEMORY_CAP,
				  "Maglev table of %u slots for %zu backend%s needs %llu bytes to "
				  "build, above the cap of %zu",
				  p->maglev_m, n, n == 1 ? "" : "s", (unsigned long long)need, cap);
	return 0;
}

/* Allocate a table and copy the backend list into it (names, weights, down,
 * name order, name hashes). Duplicate names are found here. */
static int table_alloc(const struct hashlb_table_params *p, const struct hashlb_backend_spec *b,
		       uint32_t n, struct hashlb_table **ret_t, struct hashlb_error *err)
{
	struct hashlb_table *t;
	size_t names_len = 0;
	char *s;
	int ret;

	t = calloc(1, sizeof(*t));
	if (!t)
		goto nomem;
	t->params = *p;
	if (!t->params.max_bytes)
		t->params.max_bytes = HASHLB_TABLE_MEM_DEFAULT;
	t->n = n;
	t->skewed = weights_skewed(b, n);
	for (uint32_t i = 0; i < n; i++)
		names_len += strlen(b[i].name) + 1;
	t->names = calloc(n, sizeof(*t->names));
	t->weights = calloc(n, sizeof(*t->weights));
	t->down = calloc(n, sizeof(*t->down));
	t->order = calloc(n, sizeof(*t->order));
	t->name_hash = calloc(n, sizeof(*t->name_hash));
	s = malloc(names_len);
	if (!t->names || !t->weights || !t->down || !t->order || !t->name_hash || !s) {
		free(s);
		goto nomem;
	}
	for (uint32_t i = 0; i < n; i++) {
		size_t len = strlen(b[i].name);

		memcpy(s, b[i].name, len + 1);
		t->names[i] = s;
		s += len + 1;
		t->weights[i] = b[i].weight;
		t->down[i] = b[i].down;
		t->name_hash[i] = XXH64(t->names[i], len, 0);
	}
	ret = name_order_err((const char *const *)t->names, t->order, n, err);
	if (ret < 0) {
		hashlb_table_free(t);
		return ret;
	}
	*ret_t = t;
	return 0;
nomem:
	hashlb_table_free(t);
	return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
}

static void fingerprint(struct hashlb_table *t)
{
	XXH64_state_t st;
	uint64_t buf[512];
	uint32_t k = 0;
	uint8_t scheme = (uint8_t)t->params.scheme;

	XXH64_reset(&st, 0x686173686c620000ull);
	XXH64_update(&st, &scheme, 1);
#define PUT(v)                                               \
	do {                                                 \
		buf[k++] = (v);                              \
		if (k == 512) {                              \
			XXH64_update(&st, buf, sizeof(buf)); \
			k = 0;                               \
		}                                            \
	} while (0)
	if (t->params.scheme == HASHLB_SCHEME_MAGLEV) {
		PUT(t->params.maglev_m);
		for (uint32_t j = 0; j < t->params.maglev_m; j++)
			PUT(t->slots[j] == HASHLB_BACKEND_NONE ? 0 : t->name_hash[t->slots[j]]);
	} else {
		PUT(t->ring.n);
		for (uint32_t j = 0; j < t->ring.n; j++) {
			PUT(t->ring.pos[j]);
			PUT(t->name_hash[t->ring.owner[j]]);
		}
	}
#undef PUT
	XXH64_update(&st, buf, k * sizeof(buf[0]));
	t->fingerprint = XXH64_digest(&st);
}

/* Add owner <o> to the set <set> of <*n>; past OWNER_SET owners (or for
 * HASHLB_BACKEND_NONE) the set is "many": *n = OWNER_SET + 1. */
static void owner_set_add(uint16_t *set, uint32_t *n, uint16_t o)
{
	if (*n > OWNER_SET)
		return;
	for (uint32_t i = 0; i < *n; i++)
		if (set[i] == o)
			return;
	if (o == HASHLB_BACKEND_NONE || *n == OWNER_SET)
		*n = OWNER_SET + 1;
	else
		set[(*n)++] = o;
}

/* A block's summary: its owners, the first repeated to fill it; or OWNER_MANY first. */
static void owner_set_store(uint16_t *dst, const uint16_t *set, uint32_t n)
{
	for (uint32_t i = 0; i < OWNER_SET; i++)
		dst[i] = n == 0 || n > OWNER_SET ? OWNER_MANY : set[i < n ? i : 0];
}

/*
 * Owner blocks, immutable once built and refcounted as the slot arrays are: a table whose
 * effective entries are another's very array (hashlb_table_with_down() and
 * hashlb_table_rebuild() where they share it) holds that table's blocks too, a pass over M
 * entries fewer. Each table holds those of its own effective entries alone.
 */
struct blocks_shared {
	_Atomic uint32_t refs;
	_Atomic uint32_t accounted; /* references of accounted tables, hashlb_table_account() */
	uint32_t entries; /* the entries summarised, for blocks_bytes() */
	uint16_t blocks[][OWNER_SET];
};

static struct blocks_shared *blocks_shared(const uint16_t (*blocks)[OWNER_SET])
{
	return (struct blocks_shared *)((char *)blocks - offsetof(struct blocks_shared, blocks));
}

/* The bytes of <blocks> (NULL: 0). */
static size_t blocks_bytes(const uint16_t (*blocks)[OWNER_SET])
{
	return blocks ? owner_blocks_bytes(blocks_shared(blocks)->entries) : 0;
}

/* Drop a reference to <blocks> (NULL accepted): freed with the last. */
static void blocks_unref(uint16_t (*blocks)[OWNER_SET])
{
	struct blocks_shared *sh;

	if (!blocks)
		return;
	sh = blocks_shared(blocks);
	if (atomic_fetch_sub_explicit(&sh->refs, 1, memory_order_acq_rel) == 1)
		free(sh);
}

/* The owner blocks over the <n> owners <own> into <ret_blocks>, one reference held. -ENOMEM. */
static int owner_blocks_build(const uint16_t *own, uint32_t n, uint16_t (**ret_blocks)[OWNER_SET])
{
	uint32_t n_small = (n >> OWNER_SMALL_BITS) + 1, n_large = (n >> OWNER_LARGE_BITS) + 1;
	struct blocks_shared *sh =
		malloc(sizeof(*sh) + (size_t)(n_small + n_large) * sizeof(sh->blocks[0]));
	uint16_t(*small)[OWNER_SET];
	const uint32_t per_large = 1u << (OWNER_LARGE_BITS - OWNER_SMALL_BITS);

	if (!sh)
		return -ENOMEM;
	atomic_init(&sh->refs, 1);
	atomic_init(&sh->accounted, 0);
	sh->entries = n;
	small = sh->blocks;
	for (uint32_t q = 0; q < n_large; q++) {
		uint16_t lset[OWNER_SET];
		uint32_t ln = 0;

		for (uint32_t r = q * per_large; r < n_small && r < (q + 1) * per_large; r++) {
			uint16_t set[OWNER_SET], last = 0;
			uint32_t sn = 0, end = (r + 1) << OWNER_SMALL_BITS;

			/* an owner the entry before had is in the set already, and a set of
			 * many stays so: with weights far apart most entries repeat the one
			 * before (a pool of 2), or a block has many owners within its first
			 * entries (hundreds of backends), where every entry was looked up */
			for (uint32_t j = r << OWNER_SMALL_BITS;
			     j < end && j < n && sn <= OWNER_SET; j++) {
				if (sn && own[j] == last)
					continue;
				last = own[j];
				owner_set_add(set, &sn, last);
			}
			owner_set_store(small[r], set, sn);
			if (sn > OWNER_SET)
				ln = OWNER_SET + 1;
			for (uint32_t i = 0; i < sn && i < OWNER_SET; i++)
				owner_set_add(lset, &ln, set[i]);
		}
		owner_set_store(small[n_small + q], lset, ln);
	}
	*ret_blocks = small;
	return 0;
}

/* Whether a population with the backends <key> says down at weight 0 (NULL: none) takes the
 * same turns, so fills the same slots, as one with those <down> says down: <t>'s weights. */
static bool same_turns(const struct hashlb_table *t, const bool *key, const bool *down)
{
	for (uint32_t i = 0; i < t->n; i++)
		if ((key && key[i]) != (down && down[i]) && t->weights[i])
			return false;
	return true;
}

/* Backends down that own slots, up to which slots_merge() compares each slot with them. */
#define MERGE_DOWN_MAX 4u

typedef uint16_t slots_x8 __attribute__((vector_size(16)));

/*
 * t->slots: t->full_slots, but <src>'s slot where the full table's backend is down. With up to
 * MERGE_DOWN_MAX backends down that own slots (a flap, an outage or two), 8 slots a step
 * compared with their indices, where a look-up of t->down per slot (and GCC's -O2 cost model
 * for the plain loop) keeps it a slot a step: M slots at 2 bytes read twice and written once
 * either way, and the same table.
 */
static void slots_merge(struct hashlb_table *t, const uint16_t *src)
{
	const uint16_t *full = t->full_slots;
	uint16_t *dst = t->slots, x[MERGE_DOWN_MAX];
	uint32_t m = t->params.maglev_m, n_down = 0, j = 0;
	slots_x8 vx[MERGE_DOWN_MAX];

	for (uint32_t i = 0; i < t->n && n_down <= MERGE_DOWN_MAX; i++)
		if (t->down[i] && t->weights[i] && n_down++ < MERGE_DOWN_MAX)
			x[n_down - 1] = (uint16_t)i;
	if (n_down == 0 || n_down > MERGE_DOWN_MAX) {
		for (; j < m; j++)
			dst[j] = t->down[full[j]] ? src[j] : full[j];
		return;
	}
	for (uint32_t q = 0; q < MERGE_DOWN_MAX; q++) /* the first again where fewer */
		vx[q] = (slots_x8){ 0 } + x[q < n_down ? q : 0];
	for (; j + 8 <= m; j += 8) {
		slots_x8 f, s, eq;

		memcpy(&f, full + j, sizeof(f));
		memcpy(&s, src + j, sizeof(s));
		eq = (slots_x8)((f == vx[0]) | (f == vx[1]) | (f == vx[2]) | (f == vx[3]));
		f = (f & ~eq) | (s & eq);
		memcpy(dst + j, &f, sizeof(f));
	}
	for (; j < m; j++)
		dst[j] = t->down[full[j]] ? src[j] : full[j];
}

/*
 * t->slots from t->full_slots and t->down: the full table itself when no backend down takes
 * turns (those down weigh 0: they own no slot in it; the ring borrows so too); else its slots
 * of backends down taken from <src> (M slots: the survivors' table of t->down's turns, or the
 * effective table of those turns over the same full table, whose slots there are the
 * survivors'), or from the survivors' population when <src> is NULL, which is then left in
 * *<ret_surv> for the caller to keep or free (NULL otherwise).
 */
static int maglev_effective(struct hashlb_table *t, const uint16_t *src, uint16_t **ret_surv)
{
	uint32_t m = t->params.maglev_m;
	uint16_t *surv = NULL;
	uint32_t *w;
	int ret;

	*ret_surv = NULL;
	if (same_turns(t, NULL, t->down)) {
		t->slots = slots_ref(t->full_slots);
		return 0;
	}
	t->slots = slots_new(m);
	if (!t->slots)
		return -ENOMEM;
	if (!src) {
		surv = slots_new(m);
		w = malloc((size_t)t->n * sizeof(*w));
		if (!surv || !w) {
			slots_unref(surv);
			free(w);
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < t->n; i++)
			w[i] = t->down[i] ? 0 : t->weights[i];
		ret = maglev_populate(surv, m, t->params.seed, t->names, w, t->order, t->n);
		free(w);
		if (ret < 0) {
			slots_unref(surv);
			return ret;
		}
		src = surv;
	}
	slots_merge(t, src);
	*ret_surv = surv;
	return 0;
}

/* The down set of <t>'s kept table (table-internal.h). */
static const bool *kept_key(const struct hashlb_table *t)
{
	return t->kept_down ? t->kept_down : t->down;
}

/* <t>'s fingerprint is <fp> and <present> backends own its slots: its effective slots are
 * those of a table that has them (the names the same, the indices maybe renumbered), so
 * apply_overlay() need not read them all again (M x 8 bytes hashed, and M slots counted). */
static void fingerprint_set(struct hashlb_table *t, uint64_t fp, uint32_t present)
{
	t->fingerprint = fp;
	t->n_present = present;
	t->fingerprinted = true;
}

/* The fingerprint of <t>'s effective table of the down set <key> (t->down or t->kept_down)
 * over its full table into *<ret_fp>, and the backends present in it into *<ret_present>, if
 * <t> knows them. */
static bool fingerprint_of(const struct hashlb_table *t, const bool *key, uint64_t *ret_fp,
			   uint32_t *ret_present)
{
	if (key && key == t->down) {
		*ret_fp = t->fingerprint;
		*ret_present = t->n_present;
	} else if (key && key == t->kept_down && t->kept_fingerprinted) {
		*ret_fp = t->kept_fingerprint;
		*ret_present = t->kept_present;
	} else {
		return false;
	}
	return true;
}

/* <t>'s kept table of another down set is <src>'s effective table of <key>, of the
 * fingerprint and backends present <src> knows for it, if it does (the full tables the same,
 * the names too). */
static void kept_fingerprint_from(struct hashlb_table *t, const struct hashlb_table *src,
				  const bool *key)
{
	t->kept_fingerprinted = fingerprint_of(src, key, &t->kept_fingerprint, &t->kept_present);
}

/*
 * Keep <slots> (a reference, taken: dropped on failure; the survivors' table of <key> if
 * <survivors>, else the effective table of <key> over t's full table) as <t>'s kept table;
 * <key> NULL: t->down, the table's own outage. Another table's array is kept by a reference
 * (slots_ref()), not a copy: M x 2 bytes and a pass less for each health change.
 */
static int kept_set(struct hashlb_table *t, uint16_t *slots, const bool *key, bool survivors)
{
	if (key) {
		t->kept_down = malloc(t->n * sizeof(*t->kept_down));
		if (!t->kept_down) {
			slots_unref(slots);
			return -ENOMEM;
		}
		memcpy(t->kept_down, key, t->n * sizeof(*t->kept_down));
	}
	t->kept_slots = slots;
	t->kept_survivors = survivors;
	return 0;
}

/* t->n_present: the distinct backends that own slots or points of the effective table. */
static int table_present(struct hashlb_table *t)
{
	uint32_t *present = calloc(t->n, sizeof(*present));

	if (!present)
		return -ENOMEM;
	if (t->params.scheme == HASHLB_SCHEME_MAGLEV) {
		for (uint32_t j = 0; j < t->params.maglev_m; j++)
			if (t->slots[j] != HASHLB_BACKEND_NONE)
				present[t->slots[j]] = 1;
	} else {
		for (uint32_t j = 0; j < t->ring.n; j++)
			present[t->ring.owner[j]] = 1;
	}
	t->n_present = 0;
	for (uint32_t i = 0; i < t->n; i++)
		t->n_present += present[i];
	free(present);
	return 0;
}

/*
 * t->n_present and the fingerprint of <t>'s effective table: a Maglev array's are read off it
 * once, by the first table whose effective slots it is, and kept with it (struct slots_shared)
 * for the others.
 */
static int table_summary(struct hashlb_table *t)
{
	struct slots_shared *sh;
	uint32_t known;
	int ret;

	if (t->params.scheme != HASHLB_SCHEME_MAGLEV) {
		ret = table_present(t);
		if (ret == 0 && !t->fingerprinted)
			fingerprint(t);
		return ret;
	}
	sh = slots_shared(t->slots);
	known = atomic_load_explicit(&sh->present, memory_order_acquire);
	if (known) {
		if (!t->fingerprinted)
			fingerprint_set(t, atomic_load_explicit(&sh->fp, memory_order_relaxed),
					known - 1);
		return 0;
	}
	/* fingerprinted: both taken from a table of the same effective slots (fingerprint_set()),
	 * a flap's down again from the table it came back in among them */
	if (!t->fingerprinted) {
		ret = table_present(t);
		if (ret < 0)
			return ret;
		fingerprint(t);
	}
	atomic_store_explicit(&sh->fp, t->fingerprint, memory_order_relaxed);
	atomic_store_explicit(&sh->present, t->n_present + 1, memory_order_release);
	return 0;
}

/*
 * Of <t>'s bytes, those of its refcounted arrays, which hashlb_table_account() counts once
 * however many accounted tables hold them: Maglev's full, effective (if its own) and kept slots,
 * the ring's full points and effective ones (if its own), and the owner blocks. Worked out, not
 * kept: the table's size is in what hashlb_table_bytes() and the memory cap count.
 */
static size_t table_bytes_refcounted(const struct hashlb_table *t)
{
	size_t n = blocks_bytes(t->blocks) + blocks_bytes(t->full_blocks);

	if (t->params.scheme == HASHLB_SCHEME_MAGLEV)
		return n + (1 + (t->slots != t->full_slots) + (t->kept_slots != NULL)) *
				   (size_t)t->params.maglev_m * sizeof(uint16_t);
	return n + ring_points_bytes(&t->full_ring) +
	       (t->ring.borrowed ? 0 : ring_points_bytes(&t->ring));
}

/* The owners of <t>'s effective entries (Maglev slots, ring points), and how many. */
static const uint16_t *table_owners(const struct hashlb_table *t, uint32_t *ret_n)
{
	bool maglev = t->params.scheme == HASHLB_SCHEME_MAGLEV;

	*ret_n = maglev ? t->params.maglev_m : t->ring.n;
	return maglev ? t->slots : t->ring.owner;
}

/* The owners of <t>'s full entries (Maglev's full slots, the full ring's points), and how
 * many: table_owners()'s when none that owns any is down, the same array. */
static const uint16_t *table_full_owners(const struct hashlb_table *t, uint32_t *ret_n)
{
	bool maglev = t->params.scheme == HASHLB_SCHEME_MAGLEV;

	*ret_n = maglev ? t->params.maglev_m : t->full_ring.n;
	return maglev ? t->full_slots : t->full_ring.owner;
}

/* The owner blocks <t> holds over the <n> owners <own> (its effective or its full entries, by
 * array), or NULL. */
static uint16_t (*blocks_over(const struct hashlb_table *t, const uint16_t *own,
			      uint32_t n))[OWNER_SET]
{
	uint32_t tn;

	if (t->blocks && table_owners(t, &tn) == own && tn == n)
		return t->blocks;
	if (t->full_blocks && table_full_owners(t, &tn) == own && tn == n)
		return t->full_blocks;
	return NULL;
}

/* <blocks> (NULL accepted), one more reference held. */
static uint16_t (*blocks_ref(uint16_t (*blocks)[OWNER_SET]))[OWNER_SET]
{
	if (blocks)
		atomic_fetch_add_explicit(&blocks_shared(blocks)->refs, 1, memory_order_relaxed);
	return blocks;
}

/* The owner blocks <src> or <also> (each NULL accepted) holds over the <n> owners <own>, one
 * reference more held, or NULL. */
static uint16_t (*blocks_take(const struct hashlb_table *src, const struct hashlb_table *also,
			      const uint16_t *own, uint32_t n))[OWNER_SET]
{
	uint16_t(*b)[OWNER_SET] = src ? blocks_over(src, own, n) : NULL;

	if (!b && also)
		b = blocks_over(also, own, n);
	return blocks_ref(b);
}

/* Build the effective table from the full one and t->down; <src> (NULL for a build) is the
 * table <t> is made from, whose owner blocks <t> holds too where they are over the same array
 * (its effective entries, or its full ones that a table with backends down keeps them over),
 * as it does <also>'s over its effective entries (NULL accepted:
 * hashlb_table_with_down_from()). */
static int apply_overlay(struct hashlb_table *t, const struct hashlb_table *src,
			 const struct hashlb_table *also)
{
	int ret = 0;

	t->n_up = 0;
	for (uint32_t i = 0; i < t->n; i++)
		t->n_up += !t->down[i];

	if (t->params.scheme == HASHLB_SCHEME_MAGLEV) {
		uint16_t *surv;

		/* a build: the survivors' table of its outage is kept (hashlb_table_with_down()
		 * and hashlb_table_rebuild() made t->slots already) */
		if (!t->slots) {
			ret = maglev_effective(t, NULL, &surv);
			if (ret < 0)
				return ret;
			t->kept_slots = surv;
			t->kept_survivors = surv != NULL;
		}
	} else {
		ret = ring_filter(&t->ring, &t->full_ring, t->down);
		if (ret < 0)
			return ret;
		ret = ring_index(&t->ring);
		if (ret < 0)
			return ret;
	}
	ret = table_summary(t);
	if (ret < 0)
		return ret;
	if (t->skewed) {
		uint32_t n, full_n;
		const uint16_t *own = table_owners(t, &n), *full = table_full_owners(t, &full_n);

		t->blocks = blocks_take(src, also, own, n);
		if (!t->blocks && (ret = owner_blocks_build(own, n, &t->blocks)) < 0)
			return ret;
		/* with backends down, the blocks over the full entries too where <src> holds
		 * them: the table with them back up takes them rather than builds them. Not
		 * <also>'s: a table made without it would not hold them, and <t> would keep
		 * them alive past <also> (its bytes, table_memory, more than the same table's) */
		if (own != full)
			t->full_blocks = blocks_take(src, NULL, full, full_n);
	}
	t->bytes = table_base_bytes(t->n, 0) + table_bytes_refcounted(t);
	if (t->params.scheme == HASHLB_SCHEME_MAGLEV)
		t->bytes += t->kept_down ? t->n : 0;
	if (t->params.scheme == HASHLB_SCHEME_RING)
		t->bytes += (((size_t)1 << t->ring.bucket_bits) + 1) * 4 +
			    ((size_t)1 << (64 - t->ring.hot_shift)) * 4;
	return 0;
}

static _Atomic uint64_t builds; /* tables built: hashlb_table_builds() */

uint64_t hashlb_table_builds(void)
{
	return atomic_load_explicit(&builds, memory_order_relaxed);
}

/* The last step of every build: the overlay over <t>'s full table if <ret>
 * is 0 (<src>, <also>: apply_overlay()'s), then <t> in <ret_table> (counted); or <t> freed and
 * the error. */
static int table_finish(struct hashlb_table *t, const struct hashlb_table *src,
			const struct hashlb_table *also, int ret, struct hashlb_table **ret_table,
			struct hashlb_error *err)
{
	if (ret == 0)
		ret = apply_overlay(t, src, also);
	if (ret < 0) {
		hashlb_table_free(t);
		return hashlb_err(err, ret, HASHLB_ERR_NOMEM, "out of memory");
	}
	*ret_table = t;
	atomic_fetch_add_explicit(&builds, 1, memory_order_relaxed);
	return 0;
}

int hashlb_table_build(const struct hashlb_table_params *p,
		       const struct hashlb_backend_spec *backends, size_t n,
		       struct hashlb_table **ret_table, struct hashlb_error *err)
{
	struct hashlb_table_params prm = params_with_defaults(p);
	struct hashlb_table *t;
	uint64_t weight_sum = 0;
	int ret;

	ret = validate(&prm, backends, n, err);
	if (ret < 0)
		return ret;
	ret = table_alloc(&prm, backends, (uint32_t)n, &t, err);
	if (ret < 0)
		return ret;
	for (size_t i = 0; i < n; i++)
		weight_sum += backends[i].weight;

	if (prm.scheme == HASHLB_SCHEME_MAGLEV) {
		t->full_slots = slots_new(prm.maglev_m);
		ret = t->full_slots ? maglev_populate(t->full_slots, prm.maglev_m, prm.seed,
						      t->names, t->weights, t->order, t->n)
				    : -ENOMEM;
	} else {
		ret = ring_build(&t->full_ring, prm.ring_v, prm.seed, t->names, t->weights,
				 t->order, t->n, weight_sum * prm.ring_v);
	}
	return table_finish(t, NULL, NULL, ret, ret_table, err);
}

int hashlb_table_check(const struct hashlb_table_params *p,
		       const struct hashlb_backend_spec *backends, size_t n,
		       struct hashlb_error *err)
{
	struct hashlb_table_params prm = params_with_defaults(p);
	const char **names;
	uint32_t *order;
	int ret;

	ret = validate(&prm, backends, n, err);
	if (ret < 0)
		return ret;
	names = calloc(n, sizeof(*names));
	order = calloc(n, sizeof(*order));
	if (!names || !order) {
		ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	} else {
		for (size_t i = 0; i < n; i++)
			names[i] = backends[i].name;
		ret = name_order_err(names, order, (uint32_t)n, err);
	}
	free(names);
	free(order);
	return ret;
}

/*
 * <t>'s effective and kept tables, <t> being hashlb_table_with_down() from <base> (the same
 * backends, weights and full table), by copies where a population costs about 1 s at the
 * largest M. The effective table: base's own when base's down set takes the same turns, or
 * over base's kept table when that is of those turns; else a population. The kept table: with
 * the same turns, base's; else base's own outage (its survivors' table if it kept it, else its
 * effective table) when it has one, the down set a flap goes back to, whether every other
 * backend is up or one is down for good (an idle backup among them); else (base has none
 * down that takes turns) t's own survivors' table, populated or copied from base's kept.
 * <also> (NULL accepted) of the same full table and turns lends its effective table where
 * base's kept table would give it by a merge, where t keeps base's outage, or where <also>
 * keeps t's survivors' table (a retry table made from the previous snapshot's), which t then
 * keeps too where it keeps its own: no population. Three slot arrays at most: the full, the
 * effective and the kept one.
 */
static int maglev_carry_kept(struct hashlb_table *t, const struct hashlb_table *base,
			     const struct hashlb_table *also)
{
	bool same = same_turns(t, base->down, t->down);
	bool base_out = base->slots != base->full_slots;
	bool kept_match = base->kept_slots && same_turns(t, kept_key(base), t->down);
	/* <also>'s effective table is t's own: the same full table, the same turns */
	bool also_same = also && also->n == t->n && also->full_slots == t->full_slots &&
			 same_turns(t, also->down, t->down);
	/* and the survivors' table of t's turns that <also> keeps, if it does (a retry table
	 * keeps its own, as t would): what a population would give t */
	uint16_t *also_surv =
		also_same && also->kept_survivors && same_turns(t, kept_key(also), t->down)
			? also->kept_slots
			: NULL;
	uint16_t *surv;
	uint32_t present;
	uint64_t fp;
	int ret;

	/* an effective table of base's of t's turns over the same full table is t's own; so is
	 * <also>'s where base's kept table would give it by a merge, where t keeps base's outage
	 * (no survivors of its own to keep), or where <also> keeps the survivors a population
	 * would give */
	surv = NULL;
	if (same)
		t->slots = slots_ref(base->slots);
	else if (kept_match && !base->kept_survivors)
		t->slots = slots_ref(base->kept_slots);
	else if ((kept_match || base_out || also_surv) && also_same)
		t->slots = slots_ref(also->slots);
	else if ((ret = maglev_effective(t, kept_match ? base->kept_slots : NULL, &surv)) < 0)
		return ret;
	/* the effective table of those turns over the same full table: base's, or the one its
	 * kept table gives, or <also>'s */
	if ((same && fingerprint_of(base, base->down, &fp, &present)) ||
	    (kept_match && fingerprint_of(base, kept_key(base), &fp, &present)) ||
	    (also_same && fingerprint_of(also, also->down, &fp, &present)))
		fingerprint_set(t, fp, present);
	if (same) { /* base's own outage's survivors are t's own */
		if (base->kept_down)
			kept_fingerprint_from(t, base, base->kept_down);
		return base->kept_slots ? kept_set(t, slots_ref(base->kept_slots), base->kept_down,
						   base->kept_survivors)
					: 0;
	}
	if (base_out) {
		kept_fingerprint_from(t, base, base->down);
		slots_unref(
			surv); /* t's own survivors give way to the outage a flap goes back to */
		if (base->kept_survivors && same_turns(t, kept_key(base), base->down))
			return kept_set(t, slots_ref(base->kept_slots), base->down, true);
		return kept_set(t, slots_ref(base->slots), base->down, false);
	}
	if (surv)
		return kept_set(t, surv, NULL, true);
	if (kept_match && base->kept_survivors)
		return kept_set(t, slots_ref(base->kept_slots), NULL, true);
	if (also_surv) /* t's own survivors, not populated again */
		return kept_set(t, slots_ref(also_surv), NULL, true);
	return 0;
}

int hashlb_table_with_down(const struct hashlb_table *base, const bool *down,
			   struct hashlb_table **ret_table, struct hashlb_error *err)
{
	return hashlb_table_with_down_from(base, down, NULL, ret_table, err);
}

int hashlb_table_with_down_from(const struct hashlb_table *base, const bool *down,
				const struct hashlb_table *also, struct hashlb_table **ret_table,
				struct hashlb_error *err)
{
	struct hashlb_backend_spec *specs;
	struct hashlb_table *t;
	int ret;

	specs = calloc(base->n, sizeof(*specs));
	if (!specs)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	for (uint32_t i = 0; i < base->n; i++) {
		specs[i].name = base->names[i];
		specs[i].weight = base->weights[i];
		specs[i].down = down[i];
	}
	ret = table_alloc(&base->params, specs, base->n, &t, err);
	free(specs);
	if (ret < 0)
		return ret;

	if (base->params.scheme == HASHLB_SCHEME_MAGLEV) {
		/* the same full table: base's array, shared (nor is it written again) */
		t->full_slots = slots_ref(base->full_slots);
		ret = maglev_carry_kept(t, base, also);
	} else {
		/* the same full ring: base's points, shared */
		ring_share(&t->full_ring, &base->full_ring);
	}
	return table_finish(t, base, also, ret, ret_table, err);
}

/*
 * Pair <t>'s backends with <prev>'s by name (both orders are by name: one
 * merge pass). by_name[i] is the new index of prev's backend i if <t> has
 * a backend of that name, RING_DROP otherwise; remap[i] the same if the
 * weight is unchanged too. <fresh> gets the backends of <t> without such a
 * match (new or reweighted), in name order.
 */
static void table_pair(const struct hashlb_table *prev, const struct hashlb_table *t,
		       uint32_t *by_name, uint32_t *remap, uint32_t *fresh, uint32_t *ret_n_fresh)
{
	uint32_t a = 0, n_fresh = 0;

	for (uint32_t i = 0; i < prev->n; i++)
		by_name[i] = remap[i] = RING_DROP;
	for (uint32_t k = 0; k < t->n; k++) {
		uint32_t i = t->order[k], pi;
		int c = 1;

		while (a < prev->n && (c = strcmp(prev->names[prev->order[a]], t->names[i])) < 0)
			a++;
		if (a == prev->n || c != 0) {
			fresh[n_fresh++] = i;
			continue;
		}
		pi = prev->order[a];
		by_name[pi] = i;
		if (prev->weights[pi] == t->weights[i])
			remap[pi] = i;
		else
			fresh[n_fresh++] = i;
	}
	*ret_n_fresh = n_fresh;
}

/*
 * Whether a population over <prev>'s backends with those <key> says down (NULL: none) at
 * weight 0 takes the same turns, so fills the same slots renumbered by <by_name>
 * (table_pair()'s), as one over <t>'s with those <t_key> says down: the same names at the
 * same weights.
 */
static bool same_turns_renamed(const struct hashlb_table *prev, const bool *key,
			       const struct hashlb_table *t, const bool *t_key,
			       const uint32_t *by_name)
{
	uint32_t n_prev = 0, n_new = 0;

	for (uint32_t k = 0; k < t->n; k++)
		n_new += !(t_key && t_key[k]) && t->weights[k];
	for (uint32_t i = 0; i < prev->n; i++) {
		uint32_t w = key && key[i] ? 0 : prev->weights[i], k = by_name[i];

		if (!w)
			continue;
		if (k == RING_DROP || (t_key && t_key[k]) || t->weights[k] != w)
			return false;
		n_prev++;
	}
	return n_new == n_prev;
}

/*
 * Whether <map> (table_pair()'s by_name or remap) leaves the index of every backend of <prev>
 * that takes turns (weight > 0) as it is: prev's slot arrays, which name no other, then need
 * no renumbering, and the rebuild holds them by a reference (slots_ref()) rather than a copy.
 */
static bool index_kept(const struct hashlb_table *prev, const uint32_t *map)
{
	for (uint32_t i = 0; i < prev->n; i++)
		if (prev->weights[i] && map[i] != i)
			return false;
	return true;
}

/* <src> (M slots of <prev>'s backends, slots_new()'s) renumbered by <by_name>: a new array, or
 * <src> itself, one more reference held, when <same_index> (index_kept()); NULL if no memory. */
static uint16_t *slots_rename(const uint16_t *src, uint32_t m, const uint32_t *by_name,
			      bool same_index)
{
	uint16_t *dst;

	if (same_index)
		return slots_ref(src);
	dst = slots_new(m);
	if (!dst)
		return NULL;
	for (uint32_t j = 0; j < m; j++)
		dst[j] = src[j] == HASHLB_BACKEND_NONE ? HASHLB_BACKEND_NONE
						       : (uint16_t)by_name[src[j]];
	return dst;
}

/* A table of <prev>'s that a rebuild may carry over: its slots, their down set (NULL: none
 * down) and whether they are a survivors' population (else an effective table over prev's
 * full table, of use only while the rebuild keeps that). */
struct kept_cand {
	const uint16_t *slots;
	const bool *key;
	bool survivors;
};

/*
 * Carry <prev>'s tables over to <t> (hashlb_table_rebuild()), renumbered, where they give the
 * same slots: the survivors' tables whose survivors take the same turns (names and weights),
 * and while the full table is prev's renumbered (<full_kept>), the effective tables too. The
 * effective table: from prev's kept table, its own, or its full table (the survivors' of
 * those of prev that take turns) when one is of t's down set; else a population. The kept
 * table, as hashlb_table_with_down() keeps one: prev's outage or prev's kept table, of another
 * down set, when the same backends down again would take the same turns in <t>, so that a
 * reload that leaves them (another address, the order, a backend of weight 0, the weight of
 * one of those down) does not make the next down of a backend that flapped, or its return, a
 * population again; else, as a build's, the survivors' table of t's outage when t has one and
 * it is at hand. Where t has one, prev's kept table of another down set only (its own outage
 * is a down set the reload changed): a chain of rebuilds alone holds what a build holds.
 */
static int maglev_keep_kept(struct hashlb_table *t, const struct hashlb_table *prev,
			    const uint32_t *by_name, bool full_kept)
{
	const struct kept_cand own = { prev->kept_down ? NULL : prev->kept_slots, prev->down,
				       true },
			       out = { prev->slots != prev->full_slots ? prev->slots : NULL,
				       prev->down, false },
			       kept = { prev->kept_slots, kept_key(prev), prev->kept_survivors },
			       full = { prev->full_slots, NULL, true };
	/* the effective table's sources, the survivors' first; then the kept table's */
	const struct kept_cand *src[] = { &kept, &full, &out }, *spare[] = { &own, &out, &kept };
	const struct kept_cand *eff = NULL, *eff_own = NULL;
	uint32_t m = t->params.maglev_m;
	uint16_t *buf = NULL, *surv = NULL;
	bool own_surv = false, *t_key, same_index = index_kept(prev, by_name);
	uint32_t present;
	uint64_t fp;
	int ret = 0;

	if (!same_turns(t, NULL, t->down)) {
		for (size_t c = 0; c < 3 && !eff; c++)
			if (src[c]->slots && (src[c]->survivors || full_kept) &&
			    same_turns_renamed(prev, src[c]->key, t, t->down, by_name))
				eff = src[c];
		/* an effective table of t's turns over prev's full table, kept, is t's own: shared
		 * (same_index) or renamed, a pass fewer than over a survivors' table */
		for (size_t c = 0; c < 3 && full_kept && !eff_own; c++)
			if (src[c]->slots && !src[c]->survivors &&
			    same_turns_renamed(prev, src[c]->key, t, t->down, by_name))
				eff_own = src[c];
		if (eff_own && !(t->slots = slots_rename(eff_own->slots, m, by_name, same_index)))
			return -ENOMEM;
		if (eff && eff->survivors &&
		    !(buf = slots_rename(eff->slots, m, by_name, same_index)))
			return -ENOMEM;
		if (!eff_own && (ret = maglev_effective(t, buf, &surv)) < 0) {
			slots_unref(buf);
			return ret;
		}
		/* the full table prev's: t's effective table is prev's of eff's down set, renamed
		 * (the fingerprint hashes names, not indices) */
		if (full_kept && ((eff_own && fingerprint_of(prev, eff_own->key, &fp, &present)) ||
				  (eff && fingerprint_of(prev, eff->key, &fp, &present))))
			fingerprint_set(t, fp, present);
		/* t's own survivors' table, kept as a build keeps it if no other is */
		own_surv = !eff || eff->survivors;
		if (!eff)
			buf = surv;
	} else {
		t->slots = slots_ref(t->full_slots);
	}
	t_key = malloc(t->n * sizeof(*t_key));
	if (!t_key) {
		slots_unref(buf);
		return -ENOMEM;
	}
	for (size_t c = 0; c < 3; c++) {
		if (!spare[c]->slots || !(spare[c]->survivors || full_kept))
			continue;
		/* over t's own survivors' table, only the table prev kept of another down set
		 * (hashlb_table_with_down()'s): a rebuild that changed the down set holds what a
		 * build holds */
		if (own_surv && (spare[c] != &kept || !prev->kept_down))
			continue;
		/* a backend new in t: as down in that set as it is in t's */
		memcpy(t_key, t->down, t->n * sizeof(*t_key));
		for (uint32_t i = 0; i < prev->n; i++)
			if (by_name[i] != RING_DROP)
				t_key[by_name[i]] = spare[c]->key[i];
		/* not one of the full table's turns, nor of t's own: those need no copy */
		if (same_turns(t, NULL, t_key) || same_turns(t, t->down, t_key) ||
		    !same_turns_renamed(prev, spare[c]->key, t, t_key, by_name))
			continue;
		slots_unref(buf); /* t's own, if any */
		buf = slots_rename(spare[c]->slots, m, by_name, same_index);
		if (!buf) {
			free(t_key);
			return -ENOMEM;
		}
		t->kept_slots = buf;
		t->kept_down = t_key;
		t->kept_survivors = spare[c]->survivors;
		if (full_kept)
			kept_fingerprint_from(t, prev, spare[c]->key);
		return 0;
	}
	free(t_key);
	if (own_surv)
		return kept_set(t, buf, NULL, true);
	slots_unref(buf);
	return 0;
}

/*
 * Maglev's full table from <prev>'s: the population depends on every
 * backend's weight, so it is redone unless the backends that take turns
 * (weight > 0) are the same, names and weights; then prev's slots are
 * kept, and *<ret_kept> says so: prev's array itself, shared, when those
 * backends keep their indices too (a reload that changes an address, a
 * backend of weight 0, the down set), else a copy renumbered.
 */
static int maglev_rebuild(struct hashlb_table *t, const struct hashlb_table *prev,
			  const uint32_t *remap, const uint32_t *fresh, uint32_t n_fresh,
			  bool *ret_kept)
{
	uint32_t m = t->params.maglev_m;
	bool same = true;

	for (uint32_t f = 0; f < n_fresh && same; f++)
		same = t->weights[fresh[f]] == 0;
	for (uint32_t i = 0; i < prev->n && same; i++)
		same = remap[i] != RING_DROP || prev->weights[i] == 0;
	*ret_kept = same;
	if (same) { /* remap is by_name on every backend in the slots */
		t->full_slots = slots_rename(prev->full_slots, m, remap, index_kept(prev, remap));
		return t->full_slots ? 0 : -ENOMEM;
	}
	t->full_slots = slots_new(m);
	if (!t->full_slots)
		return -ENOMEM;
	return maglev_populate(t->full_slots, m, t->params.seed, t->names, t->weights, t->order,
			       t->n);
}

int hashlb_table_rebuild(const struct hashlb_table *prev,
			 const struct hashlb_backend_spec *backends, size_t n,
			 struct hashlb_table **ret_table, struct hashlb_error *err)
{
	const struct hashlb_table_params *prm = &prev->params;
	uint32_t *by_name, *remap, *fresh, n_fresh;
	struct hashlb_table *t;
	uint64_t weight_sum = 0;
	int ret;

	/* prev's params are already normalised, as hashlb_table_build() does */
	ret = validate(prm, backends, n, err);
	if (ret < 0)
		return ret;
	ret = table_alloc(prm, backends, (uint32_t)n, &t, err);
	if (ret < 0)
		return ret;
	for (size_t i = 0; i < n; i++)
		weight_sum += backends[i].weight;
	by_name = malloc((size_t)prev->n * sizeof(*by_name));
	remap = malloc((size_t)prev->n * sizeof(*remap));
	fresh = malloc(n * sizeof(*fresh));
	ret = by_name && remap && fresh ? 0 : -ENOMEM;
	if (ret == 0) {
		table_pair(prev, t, by_name, remap, fresh, &n_fresh);
		if (prm->scheme == HASHLB_SCHEME_MAGLEV) {
			bool full_kept;

			ret = maglev_rebuild(t, prev, remap, fresh, n_fresh, &full_kept);
			if (ret == 0)
				ret = maglev_keep_kept(t, prev, by_name, full_kept);
		} else
			ret = ring_rebuild(&t->full_ring, &prev->full_ring, remap, prm->ring_v,
					   prm->seed, t->names, t->weights, fresh, n_fresh,
					   weight_sum * prm->ring_v);
	}
	free(by_name);
	free(remap);
	free(fresh);
	return table_finish(t, prev, NULL, ret, ret_table, err);
}

uint32_t hashlb_table_lookup(const struct hashlb_table *t, uint64_t hash)
{
	if (t->params.scheme == HASHLB_SCHEME_MAGLEV)
		return t->slots[maglev_slot(hash, t->params.maglev_m)];
	return ring_lookup(&t->ring, hash);
}

static bool seen(const uint32_t *idx, size_t k, uint32_t b)
{
	for (size_t i = 0; i < k; i++)
		if (idx[i] == b)
			return true;
	return false;
}

/* Whether every owner of the block summary <set> is among <idx> (<k>). */
static bool block_seen(const uint16_t *set, const uint32_t *idx, size_t k)
{
	if (set[0] == OWNER_MANY)
		return false;
	for (uint32_t i = 0; i < OWNER_SET; i++)
		if (!seen(idx, k, set[i]))
			return false;
	return true;
}

size_t table_preference_walk(const struct hashlb_table *t, uint64_t hash, uint32_t *ret_idx,
			     size_t k, uint64_t *ret_reads)
{
	const uint16_t(*small)[OWNER_SET] = t->blocks, (*large)[OWNER_SET];
	const uint16_t *own;
	uint32_t n, j, left;
	uint64_t reads = 0;
	size_t got = 0;

	if (k > t->n_present)
		k = t->n_present;
	if (t->params.scheme == HASHLB_SCHEME_MAGLEV) {
		own = t->slots;
		n = t->params.maglev_m;
		j = maglev_slot(hash, n);
	} else {
		own = t->ring.owner;
		n = t->ring.n;
		j = k ? ring_find(&t->ring, hash) : 0;
	}
	large = small ? small + (n >> OWNER_SMALL_BITS) + 1 : NULL;
	/* The next entries from the hash's, wrapping around, each new owner
	 * taken; a block whose owners are all taken already is stepped over. */
	for (left = k ? n : 0; left && got < k;) {
		uint32_t len = 0, b;

		if (small && !(j & ((1u << OWNER_SMALL_BITS) - 1))) {
			if (!(j & ((1u << OWNER_LARGE_BITS) - 1))) {
				reads++;
				if (block_seen(large[j >> OWNER_LARGE_BITS], ret_idx, got))
					len = 1u << OWNER_LARGE_BITS;
			}
			if (!len) {
				reads++;
				if (block_seen(small[j >> OWNER_SMALL_BITS], ret_idx, got))
					len = 1u << OWNER_SMALL_BITS;
			}
		}
		if (len) {
			len = len < n - j ? len : n - j;
			left = left > len ? left - len : 0;
			j += len;
		} else {
			b = own[j++];
			reads++;
			left--;
			if (b != HASHLB_BACKEND_NONE && !seen(ret_idx, got, b))
				ret_idx[got++] = b;
		}
		if (j == n)
			j = 0;
	}
	if (ret_reads)
		*ret_reads = reads;
	return got;
}

size_t hashlb_table_preference(const struct hashlb_table *t, uint64_t hash, uint32_t *ret_idx,
			       size_t k)
{
	return table_preference_walk(t, hash, ret_idx, k, NULL);
}

uint64_t hashlb_table_fingerprint(const struct hashlb_table *t)
{
	return t->fingerprint;
}

enum hashlb_scheme hashlb_table_scheme(const struct hashlb_table *t)
{
	return t->params.scheme;
}

const struct hashlb_table_params *hashlb_table_params(const struct hashlb_table *t)
{
	return &t->params;
}

uint32_t hashlb_table_backend_count(const struct hashlb_table *t)
{
	return t->n;
}

uint32_t hashlb_table_up_count(const struct hashlb_table *t)
{
	return t->n_up;
}

const char *hashlb_table_backend_name(const struct hashlb_table *t, uint32_t idx)
{
	return idx < t->n ? t->names[idx] : NULL;
}

uint32_t hashlb_table_backend_weight(const struct hashlb_table *t, uint32_t idx)
{
	return idx < t->n ? t->weights[idx] : 0;
}

bool hashlb_table_backend_down(const struct hashlb_table *t, uint32_t idx)
{
	return idx < t->n ? t->down[idx] : true;
}

bool hashlb_table_backend_takes_clients(const struct hashlb_table *t, uint32_t idx)
{
	return !hashlb_table_backend_down(t, idx) && hashlb_table_backend_weight(t, idx) > 0;
}

bool hashlb_table_down_same(const struct hashlb_table *t, const bool *down)
{
	return same_turns(t, t->down, down);
}

/* maglev_carry_kept()'s choices with no <also>: a population where none of them serves */
bool hashlb_table_with_down_populates(const struct hashlb_table *t, const bool *down)
{
	return t->params.scheme == HASHLB_SCHEME_MAGLEV && !same_turns(t, t->down, down) &&
	       !(t->kept_slots && same_turns(t, kept_key(t), down)) && !same_turns(t, NULL, down);
}

double hashlb_table_share(const struct hashlb_table *t, uint32_t idx)
{
	if (idx >= t->n)
		return 0.0;
	if (t->params.scheme == HASHLB_SCHEME_MAGLEV) {
		uint32_t c = 0;

		for (uint32_t j = 0; j < t->params.maglev_m; j++)
			c += t->slots[j] == idx;
		return (double)c / t->params.maglev_m;
	}
	/* Point j owns the arc (pos[j-1], pos[j]]; point 0 the wrapping arc. */
	const struct ring *r = &t->ring;
	long double sum = 0;

	for (uint32_t j = 0; j < r->n; j++) {
		if (r->owner[j] != idx)
			continue;
		if (j)
			sum += (long double)(r->pos[j] - r->pos[j - 1]);
		else
			sum += (long double)(r->pos[0] - r->pos[r->n - 1]); /* mod 2^64 */
	}
	if (r->n == 1)
		return r->owner[0] == idx ? 1.0 : 0.0;
	return (double)(sum / 18446744073709551616.0L);
}

void hashlb_table_shares(const struct hashlb_table *t, double *ret_shares)
{
	if (t->params.scheme == HASHLB_SCHEME_MAGLEV) {
		uint32_t *c = calloc(t->n ? t->n : 1, sizeof(*c));

		if (!c) { /* out of memory: the slow way, one pass per backend */
			for (uint32_t i = 0; i < t->n; i++)
				ret_shares[i] = hashlb_table_share(t, i);
			return;
		}
		for (uint32_t j = 0; j < t->params.maglev_m; j++)
			if (t->slots[j] < t->n) /* not HASHLB_BACKEND_NONE */
				c[t->slots[j]]++;
		for (uint32_t i = 0; i < t->n; i++)
			ret_shares[i] = (double)c[i] / t->params.maglev_m;
		free(c);
		return;
	}
	/* The sums of hashlb_table_share(), each added to in the same order. */
	const struct ring *r = &t->ring;
	long double *sum = calloc(t->n ? t->n : 1, sizeof(*sum));

	if (!sum) {
		for (uint32_t i = 0; i < t->n; i++)
			ret_shares[i] = hashlb_table_share(t, i);
		return;
	}
	for (uint32_t j = 0; j < r->n; j++) {
		if (r->owner[j] >= t->n)
			continue;
		if (j)
			sum[r->owner[j]] += (long double)(r->pos[j] - r->pos[j - 1]);
		else
			sum[r->owner[0]] += (long double)(r->pos[0] - r->pos[r->n - 1]);
	}
	for (uint32_t i = 0; i < t->n; i++)
		ret_shares[i] = r->n == 1 ? (r->owner[0] == i ? 1.0 : 0.0)
					  : (double)(sum[i] / 18446744073709551616.0L);
	free(sum);
}

size_t hashlb_table_bytes(const struct hashlb_table *t)
{
	return t->bytes;
}

/* Of hashlb_table_bytes(<t>), those outside the arrays that tables share: what the table holds
 * alone, which hashlb_table_account() counts for it whatever other tables hold. */
static size_t table_bytes_unshared(const struct hashlb_table *t)
{
	return t->bytes - table_bytes_refcounted(t);
}

/* table_accounted_step() on each shared array <t> holds, a step a reference: what the accounted
 * total gains (<add>) or loses with <t> besides table_bytes_unshared(<t>). */
static uint64_t table_account_shared(const struct hashlb_table *t, bool add)
{
	uint64_t m = (uint64_t)t->params.maglev_m * sizeof(uint16_t), n = 0;
	uint16_t *const slots[] = { t->full_slots, t->slots, t->kept_slots };

	if (t->blocks)
		n += table_accounted_step(&blocks_shared(t->blocks)->accounted, add,
					  blocks_bytes(t->blocks));
	if (t->full_blocks)
		n += table_accounted_step(&blocks_shared(t->full_blocks)->accounted, add,
					  blocks_bytes(t->full_blocks));
	if (t->params.scheme != HASHLB_SCHEME_MAGLEV)
		return n + ring_points_account(&t->full_ring, add) +
		       ring_points_account(&t->ring, add);
	for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++)
		if (slots[i])
			n += table_accounted_step(&slots_shared(slots[i])->accounted, add, m);
	return n;
}

uint64_t hashlb_table_account(const struct hashlb_table *t)
{
	return table_bytes_unshared(t) + table_account_shared(t, true);
}

uint64_t hashlb_table_unaccount(const struct hashlb_table *t)
{
	return table_bytes_unshared(t) + table_account_shared(t, false);
}

/* Whether <slots> is one of <t>'s slot arrays. */
static bool slots_held(const struct hashlb_table *t, const uint16_t *slots)
{
	return slots && (slots == t->full_slots || slots == t->slots || slots == t->kept_slots);
}

/* Whether <other> holds <blocks> (NULL: no). */
static bool blocks_held(const struct hashlb_table *other, const uint16_t (*blocks)[OWNER_SET])
{
	return blocks && (blocks == other->blocks || blocks == other->full_blocks);
}

/* The bytes of <t>'s owner blocks that <other> holds too. */
static size_t blocks_shared_bytes(const struct hashlb_table *t, const struct hashlb_table *other)
{
	return (blocks_held(other, t->blocks) ? blocks_bytes(t->blocks) : 0) +
	       (blocks_held(other, t->full_blocks) ? blocks_bytes(t->full_blocks) : 0);
}

size_t hashlb_table_bytes_shared(const struct hashlb_table *t, const struct hashlb_table *other)
{
	size_t n = 0;

	if (other->params.scheme != t->params.scheme)
		return 0;
	/* the full ring's points (table_bytes_refcounted()) */
	if (t->params.scheme == HASHLB_SCHEME_RING)
		return (t->full_ring.pos == other->full_ring.pos ? ring_points_bytes(&t->full_ring)
								 : 0) +
		       blocks_shared_bytes(t, other);
	/* the arrays apply_overlay() counts in t->bytes */
	n += slots_held(other, t->full_slots);
	n += t->slots != t->full_slots && slots_held(other, t->slots);
	n += slots_held(other, t->kept_slots);
	return n * t->params.maglev_m * sizeof(*t->full_slots) + blocks_shared_bytes(t, other);
}

void hashlb_table_view(const struct hashlb_table *t, struct hashlb_table_view *ret_view)
{
	struct hashlb_table_view v;

	memset(&v, 0, sizeof(v));
	v.scheme = t->params.scheme;
	v.n_backends = t->n;
	if (t->params.scheme == HASHLB_SCHEME_MAGLEV) {
		v.m = t->params.maglev_m;
		v.slots = t->slots;
	} else {
		v.n_points = t->ring.n;
		v.pos = t->ring.pos;
		v.owner = t->ring.owner;
		v.bucket_bits = t->ring.bucket_bits;
		v.bucket = t->ring.bucket;
		v.max_scan = t->ring.max_scan;
	}
	*ret_view = v;
}
