/* SPDX-License-Identifier: MIT */
/*
 * The consistent-hash lookup table: ring-hash or Maglev, one API.
 *
 * A table is built from a list of backends (name, weight, down), a scheme,
 * its parameters and a 64-bit seed, and is immutable afterwards: any number
 * of threads may look up in it without locks. The same inputs give a
 * bit-identical table on every machine, whatever the order of the backend
 * list: placement depends only on each backend's name, weight and the seed,
 * never on its address or its position in the list. Backends are referred to
 * by their index in the list given to hashlb_table_build().
 *
 * Ring: each backend gets V x weight points, point i of backend "name" at
 * XXH64(name || be32(i), seed). A hash maps to the backend of the first point
 * at or after it, wrapping around. Points are kept in a sorted array of
 * 64-bit positions with a parallel array of 16-bit owners, and found through
 * a two-level index (see ring.c for the measurement that chose it over a
 * plain binary search).
 *
 * Maglev: M slots (M prime). Backend "name" has offset = XXH64(name, seed) % M
 * and skip = XXH64(name, ~seed) % (M - 1) + 1; backends take turns in name
 * order, a backend of weight w taking a turn in w of every w_max rounds, each
 * turn claiming the next free slot of its permutation. A hash maps to slot
 * (hash >> 32) * M >> 32 (a multiply, not a division, so BPF computes it the
 * same), whose 16-bit entry names the backend.
 *
 * Health overlay (the minimal-disruption rule). A table is built over all
 * configured backends, up or down (the "full" table); it is a function of the
 * names and weights only. Then:
 *
 *   a hash whose backend in the full table is up keeps that backend;
 *   a hash whose backend in the full table is down gets the backend that the
 *   table built from the survivors alone (same scheme, parameters and seed,
 *   down backends given weight 0) gives it.
 *
 * So no key of a healthy backend ever moves when others go down; the keys of
 * a down backend spread over all survivors in proportion to their weights
 * (for the ring: the next surviving point clockwise, i.e. many neighbours as
 * V grows; for Maglev: the survivors' own permutation slots); the rule
 * depends only on the set that is down, so two instances agree; and when a
 * backend comes back exactly its keys return to it. With two down, when one
 * comes back, the keys of the other go where the survivors' table with it
 * back sends them: for the ring, the same survivor or the one back (a
 * survivor's points stay); for Maglev, a population over one more backend,
 * so a few of them (about 1 in 1,500 slots with 10 backends) move between
 * survivors. The effective table is materialised, so a lookup costs the
 * same with or without backends down.
 * When every backend is down, lookups return HASHLB_BACKEND_NONE.
 */
#ifndef HASHLB_TABLE_H
#define HASHLB_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hashlb/error.h"

enum hashlb_scheme { HASHLB_SCHEME_RING = 0, HASHLB_SCHEME_MAGLEV, HASHLB_SCHEME_MAX };

#define HASHLB_BACKENDS_MAX 65535u /* backend indices fit 16 bits, 0xffff = none */
#define HASHLB_BACKEND_NONE 0xffffu /* lookup result when every backend is down */
#define HASHLB_NAME_MAX 255u /* bytes in a backend name */
#define HASHLB_WEIGHT_MAX 10000u /* weights are 0..HASHLB_WEIGHT_MAX */
#define HASHLB_RING_V_DEFAULT 160u
#define HASHLB_RING_V_MAX 100000u
#define HASHLB_MAGLEV_M_DEFAULT 65537u
#define HASHLB_MAGLEV_M_MIN 3u
#define HASHLB_MAGLEV_M_MAX 16777259u /* a prime just above 2^24 */
#define HASHLB_TABLE_MEM_DEFAULT (256u << 20) /* default memory cap, bytes */

struct hashlb_backend_spec {
	const char *name; /* identity: hashed for placement; borrowed during build */
	uint32_t weight; /* 0..HASHLB_WEIGHT_MAX; 0 = configured but takes no keys */
	bool down; /* down, draining or in maintenance: takes no new keys */
};

struct hashlb_table_params {
	enum hashlb_scheme scheme;
	uint64_t seed;
	uint32_t ring_v; /* ring points per weight unit; 0 = default */
	uint32_t maglev_m; /* Maglev table size, prime; 0 = default */
	size_t max_bytes; /* memory cap for the table; 0 = default */
};

struct hashlb_table;

/* Fill <p> with defaults for <scheme> (seed 0). */
void hashlb_table_params_init(struct hashlb_table_params *p, enum hashlb_scheme scheme);

/*
 * The first of <names> (<n>, in their order) that an earlier one repeats: 1
 * with its index in <ret_dup> and the earlier one's in <ret_first>, 0 if
 * none, -ENOMEM. O(n log n) (a service may have 65535 backends): what the
 * config and the CLI name in a duplicate-name error, by their own counting.
 */
int hashlb_names_duplicate(const char *const *names, uint32_t n, uint32_t *ret_dup,
			   uint32_t *ret_first);

/*
 * Build a table over <n> backends. On success stores a new table in
 * <ret_table> (free it with hashlb_table_free()) and returns 0; on failure
 * returns a negative errno (-EINVAL for bad input, -E2BIG for the memory cap,
 * -ENOMEM) and fills <err> (may be NULL) with the reason and a message naming
 * the offending backend or parameter. Names are copied.
 */
int hashlb_table_build(const struct hashlb_table_params *p,
		       const struct hashlb_backend_spec *backends, size_t n,
		       struct hashlb_table **ret_table, struct hashlb_error *err);

/*
 * 0 if hashlb_table_build(<p>, <backends>, <n>) would build the table, else
 * the error it would return, with the same reason and message (-ENOMEM
 * aside): the same checks, without building anything. This is what
 * validating a config costs, whatever the table's size.
 */
int hashlb_table_check(const struct hashlb_table_params *p,
		       const struct hashlb_backend_spec *backends, size_t n,
		       struct hashlb_error *err);

/*
 * A table with the same backends, weights and parameters as <base> but the
 * down set <down> (n = hashlb_table_backend_count(base) booleans). Shares
 * base's full table (the Maglev slot array or the ring's points themselves, immutable,
 * freed with the last table holding them; <base> may be freed first), so it costs one
 * survivor build (a fill when one
 * backend is left) plus a copy, or copies alone when <base> has a table of
 * the same backends up at the same weights: its own effective table, or
 * (Maglev) the one it keeps of another down set. A Maglev table built from
 * one with another outage (a backend down that takes turns) keeps that
 * outage's table, the down set a flap goes back to: its survivors' table
 * if base kept it, else its effective table, whose slots of backends down
 * are the survivors' (the full table is the same); one built from a table
 * with every backend up (or only backends of weight 0 down: its full table
 * is its effective one) keeps its own survivors' table, as a build does;
 * one built from a table of the same turns keeps what that one keeps. So a
 * backend that flaps costs copies both ways, whether every other backend
 * is up or some are down for good (an idle backup among them), and a table
 * holds three slot arrays at most: the full, the effective and the kept
 * one (2 bytes a slot each, and a byte a backend for the kept one's down
 * set when it is another's, in hashlb_table_bytes()). This is the rebuild
 * for health changes. Same return convention as hashlb_table_build().
 */
int hashlb_table_with_down(const struct hashlb_table *base, const bool *down,
			   struct hashlb_table **ret_table, struct hashlb_error *err);

/*
 * hashlb_table_with_down(), the same table, made from <also> too (NULL accepted; any table,
 * only read): on Maglev, where <also> is of the same full table (the very array) and its down
 * set takes the same turns, and <base> keeps the table of that down set (a ramp table, made
 * again for each snapshot while a backend ramps), its effective slots are <also>'s, shared
 * rather than merged again; so they are where <also> keeps the survivors' table of that down
 * set (a retry table, made again for each snapshot while a backend fails connects, from a
 * table that keeps none: a population, about 0.5 s at the largest M, each time), and that
 * survivors' table is shared too where the table would keep its own; so they are too where
 * the table keeps <base>'s outage instead (a retry table beside a backend down for good),
 * which leaves no survivors of its own to keep; and wherever its effective entries are the
 * very array <also> holds owner blocks over (weights more than 16 times apart), it holds those
 * blocks too rather than builds them. Each is a pass over M entries fewer (the survivors'
 * table: a population). The table holds the same bytes either way, those arrays shared rather
 * than new.
 */
int hashlb_table_with_down_from(const struct hashlb_table *base, const bool *down,
				const struct hashlb_table *also, struct hashlb_table **ret_table,
				struct hashlb_error *err);

/*
 * The table hashlb_table_build(hashlb_table_params(<prev>), <backends>, <n>)
 * would give, bit for bit, built faster by reusing <prev>: the rebuild for a
 * change of weights or membership. Backends are matched by name (their
 * order may differ from prev's); for the ring, the points of every backend
 * whose name and weight are unchanged are kept and only the others' are
 * generated and merged in; for Maglev, whose population depends on every
 * weight, the survivors' table is carried over when the backends that are
 * up did not change (a down backend reweighted or removed), and so is the
 * table of another down set that a table keeps (hashlb_table_with_down())
 * while those backends down again would leave the same survivors: a
 * survivors' table whatever else changed, an effective table while the
 * full one is kept (the backends that take turns unchanged: another order,
 * an address, a backend of weight 0). A table with backends down that
 * takes turns keeps such a table of another down set (the set a flap goes
 * back to) rather than its own survivors' table, as hashlb_table_with_down()
 * does, when <prev> kept one from a health change; else its own, as a
 * build does. Where the backends that take turns keep their indices too
 * (the same order), every such slot array is prev's own, shared (immutable,
 * freed with the last table holding it; <prev> may be freed first), not a
 * copy. Same validation, errors and return convention as
 * hashlb_table_build(); <prev> is only read.
 */
int hashlb_table_rebuild(const struct hashlb_table *prev,
			 const struct hashlb_backend_spec *backends, size_t n,
			 struct hashlb_table **ret_table, struct hashlb_error *err);

/* Accepts NULL. */
void hashlb_table_free(struct hashlb_table *t);

/*
 * The tables this process built so far (hashlb_table_build(), _rebuild(),
 * _with_down(), counted as each succeeds): what loads and reloads cost in
 * table builds, hashlb_table_check() building none.
 */
uint64_t hashlb_table_builds(void);

/* The backend index for <hash>, or HASHLB_BACKEND_NONE if all are down. */
uint32_t hashlb_table_lookup(const struct hashlb_table *t, uint64_t hash);

/*
 * The preference list for <hash>: up to <k> distinct up backends, the first
 * being hashlb_table_lookup()'s answer, the next ones the backends to try
 * when a connect fails (ring: the next distinct owners clockwise; Maglev:
 * the next distinct owners of the following slots). Stable for a given
 * table. Returns how many were written to <ret_idx>. Weights far apart
 * (10,000:1) cost a few hundred entries read, not the thousands between a
 * small backend's entries: when they are more than 16 times apart, the
 * table keeps which backends own each block of 64 and of 4096 entries, and
 * a block of backends listed already is stepped over whole.
 */
size_t hashlb_table_preference(const struct hashlb_table *t, uint64_t hash, uint32_t *ret_idx,
			       size_t k);

/*
 * A 64-bit fingerprint of the effective table's contents (the scheme, every
 * slot or point and the name of its backend), independent of the order of
 * the backend list: equal fingerprints mean equal routing.
 */
uint64_t hashlb_table_fingerprint(const struct hashlb_table *t);

enum hashlb_scheme hashlb_table_scheme(const struct hashlb_table *t);
const struct hashlb_table_params *hashlb_table_params(const struct hashlb_table *t);
uint32_t hashlb_table_backend_count(const struct hashlb_table *t);
uint32_t hashlb_table_up_count(const struct hashlb_table *t);
const char *hashlb_table_backend_name(const struct hashlb_table *t, uint32_t idx);
uint32_t hashlb_table_backend_weight(const struct hashlb_table *t, uint32_t idx);
bool hashlb_table_backend_down(const struct hashlb_table *t, uint32_t idx);
/* Whether backend <idx> of <t> takes clients: not down, and of a weight above 0 (one of
 * weight 0 is not down but in no slot). What "up" and "in_table" say in hashlb table,
 * /status and /table. */
bool hashlb_table_backend_takes_clients(const struct hashlb_table *t, uint32_t idx);
/*
 * Whether the backends <down> says down (n = hashlb_table_backend_count(t)
 * booleans) differ from <t>'s down set only in backends of weight 0, which
 * take no turn: hashlb_table_with_down(<t>, <down>) is then a copy of t's
 * effective table.
 */
bool hashlb_table_down_same(const struct hashlb_table *t, const bool *down);
/*
 * Whether hashlb_table_with_down(<t>, <down>) (n booleans, as above) populates a survivors'
 * table (Maglev: about 0.5 s at the largest M), rather than take <t>'s effective slots, merge
 * from the survivors' table it keeps of a down set of the same turns (a flap's down again), or
 * share the full slots (those down weigh 0). False on the ring, whose overlay is a filter.
 */
bool hashlb_table_with_down_populates(const struct hashlb_table *t, const bool *down);
/* Fraction of the hash space (ring) or of the slots (Maglev) that goes to <idx>. */
double hashlb_table_share(const struct hashlb_table *t, uint32_t idx);
/*
 * Every backend's share at once into <ret_shares> (hashlb_table_backend_count()
 * of them), each equal to hashlb_table_share()'s: one pass over the table,
 * where a call per backend costs a pass each (n x M for a listing of them all).
 */
void hashlb_table_shares(const struct hashlb_table *t, double *ret_shares);
/*
 * Whether backend <from_i> of one table and <to_i> of another, of one name, are one server
 * to their clients: the tables know names, their callers addresses. A backend that keeps
 * its name (and its place in the table) but gets another address sends its clients to
 * another server, which for a stateful backend is a move.
 */
struct hashlb_same_server {
	bool (*fn)(uint32_t from_i, uint32_t to_i, void *arg);
	void *arg;
};
/*
 * The fraction of the hash space (0..1) whose backend differs between <from> and <to>,
 * backends matched by name (their indices may differ) and, with <same> (NULL: the name
 * alone), by what it says: a name it says is another server in <to> is counted as a
 * backend <from> did not have. The share of clients, for uniformly spread keys, that a
 * change from one table to the other sends to another server. Exact, both effective
 * tables walked side by side, interval by interval (the ring's arcs, Maglev's slots over
 * the hashes each takes), in O(points or slots); the schemes may differ. A hash that no
 * backend takes in one (every backend down) and one in the other counts as moved. Into
 * <ret_moved>; 0, or -ENOMEM.
 */
int hashlb_table_moved(const struct hashlb_table *from, const struct hashlb_table *to,
		       const struct hashlb_same_server *same, double *ret_moved);
/*
 * The fraction of clients expected on another backend when their hashes change too (a
 * new seed, hash key or prefix: the two placements independent), from the tables'
 * shares: 1 - sum over backend names of share in <from> x share in <to>, the names that
 * <same> (as hashlb_table_moved()'s) says are another server left out; 0 when every
 * backend is down in both (no client has a backend in either, as hashlb_table_moved()
 * counts it). Into <ret_moved>; 0, or -ENOMEM.
 */
int hashlb_table_rehash_moved(const struct hashlb_table *from, const struct hashlb_table *to,
			      const struct hashlb_same_server *same, double *ret_moved);
/* Bytes of memory the table holds, those it shares with another table included. */
size_t hashlb_table_bytes(const struct hashlb_table *t);
/*
 * The bytes a total of the tables a caller holds (hlb_snapshot_tables_bytes(): those of the
 * snapshots alive) gains as <t> joins it: the bytes it holds alone (outside the arrays that
 * tables share: Maglev's slot arrays, a ring's points, the owner blocks), and each array
 * tables share that <t> holds and no table in the total holds already, so that each counts
 * once however many tables of the total hold it (where a sum of hashlb_table_bytes() counts
 * it once a table: a table and the one hashlb_table_with_down() or hashlb_table_rebuild() made
 * from it, up to 96 MiB twice at the largest M), and not at all while only tables outside it
 * do (one being built, a config's check, a table held for another use). Add what it returns
 * to the total. hashlb_table_unaccount() returns what the total loses as <t> leaves it: call
 * it once for each hashlb_table_account(), before hashlb_table_free(<t>). An array knows how
 * many accounted tables hold it, not which total: one such total per process. Any thread.
 */
uint64_t hashlb_table_account(const struct hashlb_table *t);
uint64_t hashlb_table_unaccount(const struct hashlb_table *t);
/*
 * Of hashlb_table_bytes(<t>), those <other> holds too: on Maglev, the slot arrays (2 bytes a
 * slot each; the full, effective and kept ones) that the two share rather than copy, one of
 * them made from the other by hashlb_table_with_down() or hashlb_table_rebuild(), or both
 * from a third; on the ring, the full ring's points (10 bytes a point), which
 * hashlb_table_with_down() shares; and the owner blocks (weights more than 16 times apart) when
 * the two share them, over one array (the effective entries of both, or the full ones a
 * table with backends down keeps them over); else 0. What a table made from
 * <other> adds to the memory held while both live.
 */
size_t hashlb_table_bytes_shared(const struct hashlb_table *t, const struct hashlb_table *other);
/*
 * The most bytes a table of <p> over <backends> (<n>, which
 * hashlb_table_check() accepts) holds once built, whichever of them are
 * down: never less than hashlb_table_bytes() of it, plus the backends'
 * names, which that leaves out. For Maglev, a table with a backend down:
 * three arrays of M slots and a byte a backend (the full, effective and
 * kept slots, and the kept table's down set), where one with all up (or
 * those down of weight 0) holds one (two when it keeps the table of an
 * outage, hashlb_table_with_down()); for the ring, two rings and their
 * indexes; with weights more than 16 times apart, the
 * owner blocks of the preference lists (1/8 byte a slot or point), twice: over the effective
 * entries, and over the full ones that a table with backends down keeps from the table with
 * all up it was made from (hashlb_table_with_down()), for the return. A
 * build's scratch, freed before it returns, is not counted (the max_bytes
 * cap counts it). Computed from the parameters, nothing built; UINT64_MAX
 * when the ring would have 2^31 points or more.
 */
uint64_t hashlb_table_bytes_max(const struct hashlb_table_params *p,
				const struct hashlb_backend_spec *backends, size_t n);

/*
 * A read-only view of the effective table's arrays, for exporting it (the
 * kernel steering maps, dumps). Pointers stay valid while <t> lives.
 */
struct hashlb_table_view {
	enum hashlb_scheme scheme;
	uint32_t n_backends;
	/* Maglev */
	uint32_t m;
	const uint16_t *slots; /* m entries: backend index or HASHLB_BACKEND_NONE */
	/* Ring: n_points points sorted by position; lookup(h) is the first
	 * point with pos >= h, or point 0 if none. */
	uint32_t n_points;
	const uint64_t *pos;
	const uint16_t *owner;
	/* Two-level index: bucket[h >> (64 - bucket_bits)] is the index of the
	 * first point with pos >= (bucket << (64 - bucket_bits)); it has
	 * (1 << bucket_bits) + 1 entries, the last being n_points. From
	 * there at most max_scan points are stepped over before the answer. */
	uint32_t bucket_bits;
	const uint32_t *bucket;
	uint32_t max_scan;
};

void hashlb_table_view(const struct hashlb_table *t, struct hashlb_table_view *ret_view);

/* "ring", "maglev"; NULL if invalid. */
const char *hashlb_scheme_name(enum hashlb_scheme s);
/* -EINVAL if unknown. */
int hashlb_scheme_parse(const char *s, enum hashlb_scheme *ret_scheme);

/* Whether <n> is prime (deterministic, for n < 2^32). */
bool hashlb_is_prime(uint64_t n);
/* The primes nearest <n> (not prime, 3..HASHLB_MAGLEV_M_MAX), below and above, for an error. */
void hashlb_nearest_primes(uint32_t n, uint32_t *ret_lo, uint32_t *ret_hi);

#endif
