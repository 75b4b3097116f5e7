/* SPDX-License-Identifier: MIT */
/*
 * Open connections per client, for a service's max_connections_per_client:
 * shared by every worker, exact (not a sketch: an operator's limit of 10
 * means 10), each client's count under the lock of one of
 * HLB_CLIENTS_SHARDS shards so workers rarely meet.
 *
 * A client is its canonical 16-byte address (tuple.h: IPv4 as IPv4-mapped
 * IPv6) cut to the service's client_prefix, with the number of bits kept:
 * its port does not count, and a reload that changes the prefix leaves each
 * open connection counted under the key it was claimed with. Each shard is an open-addressing table
 * with linear probing and backward-shift deletion: no tombstones, so a long
 * run of connects and closes never slows the probes down.
 */
#ifndef HLB_CLIENTS_H
#define HLB_CLIENTS_H

#include <stdint.h>

#define HLB_CLIENTS_SHARDS 16u

struct hlb_clients;

/* A client: an address cut to its first <keep> bits (hashlb_addr16_cut()). */
struct hlb_client_key {
	uint8_t addr[16]; /* zeros past <keep> */
	uint8_t keep; /* 1..128, 128 = the whole address */
};

/*
 * A table for up to <max_clients> distinct clients at once: it starts
 * small and grows with the clients present (each shard up to room for all
 * of them, so no spread over the shards fills one first). -ENOMEM or 0.
 */
int hlb_clients_new(uint32_t max_clients, struct hlb_clients **ret_clients);
void hlb_clients_free(struct hlb_clients *t); /* accepts NULL */

/*
 * One more connection of client <k> if it has fewer than <limit> open:
 * 1 (counted: release it once closed), 0 (at its limit: nothing counted),
 * or -ENOSPC when its shard cannot grow (more than <max_clients> there, or
 * out of memory; nothing counted: the caller lets the connection through,
 * so the table's size never refuses a client).
 */
int hlb_clients_claim(struct hlb_clients *t, const struct hlb_client_key *k, uint32_t limit);
/* One connection of <k> closed; it must have been claimed with this key. */
void hlb_clients_release(struct hlb_clients *t, const struct hlb_client_key *k);
/* Open connections of <k> now (tests, the admin API). */
uint32_t hlb_clients_count(struct hlb_clients *t, const struct hlb_client_key *k);
/* Distinct clients with a connection open now. */
uint64_t hlb_clients_size(struct hlb_clients *t);

struct hlb_client_count {
	struct hlb_client_key key;
	uint32_t count;
};

/*
 * The <n> clients with the most connections open now, most first, into
 * <out> (room for <n>); returns how many were written. One shard locked at
 * a time: a view of a moving table, for an operator looking for who holds
 * a backend.
 */
uint32_t hlb_clients_top(struct hlb_clients *t, uint32_t n, struct hlb_client_count *out);

#endif
