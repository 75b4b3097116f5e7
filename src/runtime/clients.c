// SPDX-License-Identifier: MIT
/*
 * Open connections per client (clients.h). Written here: the
 * libraries Debian packages for hash maps (glib's GHashTable, uthash) are
 * neither shared between threads nor bounded in memory; this is one
 * table per shard under a mutex held for a few dozen instructions. A shard
 * starts small and doubles as its clients come (under its lock, a rehash
 * of that shard alone), up to room for every client the table was made
 * for: memory follows the clients there are, and neither a skewed spread
 * over the shards nor a limit raised by a reload finds a shard full.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "clients.h"

struct slot {
	struct hlb_client_key key;
	uint32_t count; /* 0 = empty */
};

struct shard {
	pthread_mutex_t lock;
	uint32_t mask; /* slots - 1, a power of two */
	uint32_t used;
	struct slot *slots;
} __attribute__((aligned(64)));

struct hlb_clients {
	struct shard shards[HLB_CLIENTS_SHARDS];
	uint32_t max_slots; /* a shard's largest size, a power of two */
};

#define SHARD_MIN_SLOTS 16u

static uint64_t key_hash(const struct hlb_client_key *k)
{
	uint64_t a, b, h;

	memcpy(&a, k->addr, 8);
	memcpy(&b, k->addr + 8, 8);
	h = a * 0x9e3779b97f4a7c15ull ^ (b ^ k->keep) * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 31;
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 29);
}

static struct shard *shard_of(struct hlb_clients *t, uint64_t h)
{
	return &t->shards[h % HLB_CLIENTS_SHARDS];
}

static uint32_t home_of(const struct shard *s, uint64_t h)
{
	return (uint32_t)(h / HLB_CLIENTS_SHARDS) & s->mask;
}

static bool key_equal(const struct hlb_client_key *a, const struct hlb_client_key *b)
{
	return a->keep == b->keep && memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

/* The slot holding <k>, or the empty one ending its probe run. Locked. */
static uint32_t slot_find(const struct shard *s, const struct hlb_client_key *k, uint64_t h)
{
	uint32_t i = home_of(s, h);

	while (s->slots[i].count && !key_equal(&s->slots[i].key, k))
		i = (i + 1) & s->mask;
	return i;
}

int hlb_clients_new(uint32_t max_clients, struct hlb_clients **ret_clients)
{
	struct hlb_clients *t = aligned_alloc(64, sizeof(*t));
	/* every client in one shard, kept under 3/4 full */
	uint64_t want = (uint64_t)max_clients * 4 / 3 + 1, n = SHARD_MIN_SLOTS;

	if (!t)
		return -ENOMEM;
	memset(t, 0, sizeof(*t));
	while (n < want && n < (1u << 31))
		n <<= 1;
	t->max_slots = (uint32_t)n;
	for (uint32_t i = 0; i < HLB_CLIENTS_SHARDS; i++) {
		struct shard *s = &t->shards[i];

		pthread_mutex_init(&s->lock, NULL);
		s->mask = SHARD_MIN_SLOTS - 1;
		s->slots = calloc(SHARD_MIN_SLOTS, sizeof(*s->slots));
		if (!s->slots) {
			hlb_clients_free(t);
			return -ENOMEM;
		}
	}
	*ret_clients = t;
	return 0;
}

/* Shard <s> at twice its size, every entry at its place in the new one.
 * Locked. -ENOMEM leaves it as it was. */
static int shard_grow(struct shard *s)
{
	uint32_t n = (s->mask + 1) * 2;
	struct slot *old = s->slots, *v = calloc(n, sizeof(*v));
	uint32_t old_n = s->mask + 1;

	if (!v)
		return -ENOMEM;
	s->slots = v;
	s->mask = n - 1;
	for (uint32_t j = 0; j < old_n; j++) {
		if (old[j].count)
			v[slot_find(s, &old[j].key, key_hash(&old[j].key))] = old[j];
	}
	free(old);
	return 0;
}

void hlb_clients_free(struct hlb_clients *t)
{
	if (!t)
		return;
	for (uint32_t i = 0; i < HLB_CLIENTS_SHARDS; i++) {
		free(t->shards[i].slots);
		pthread_mutex_destroy(&t->shards[i].lock);
	}
	free(t);
}

int hlb_clients_claim(struct hlb_clients *t, const struct hlb_client_key *k, uint32_t limit)
{
	uint64_t h = key_hash(k);
	struct shard *s = shard_of(t, h);
	struct slot *e;
	bool full;
	int r = 1;

	pthread_mutex_lock(&s->lock);
	e = &s->slots[slot_find(s, k, h)];
	full = !e->count && (uint64_t)(s->used + 1) * 4 > (uint64_t)(s->mask + 1) * 3;
	if (e->count >= limit) {
		r = 0;
	} else if (e->count) {
		e->count++;
	} else if (full && (s->mask + 1 >= t->max_slots || shard_grow(s) < 0)) {
		r = -ENOSPC; /* kept under 3/4 full: probe runs stay short */
	} else {
		if (full) /* grown: its place moved */
			e = &s->slots[slot_find(s, k, h)];
		e->key = *k;
		e->count = 1;
		s->used++;
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

void hlb_clients_release(struct hlb_clients *t, const struct hlb_client_key *k)
{
	uint64_t h = key_hash(k);
	struct shard *s = shard_of(t, h);
	uint32_t i, j;

	pthread_mutex_lock(&s->lock);
	i = slot_find(s, k, h);
	if (!s->slots[i].count || --s->slots[i].count) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	/* Backward-shift deletion: pull each later entry of the run whose
	 * home is not in (i, j] into the hole, so no probe stops short. */
	s->used--;
	for (j = i;;) {
		uint32_t home;

		j = (j + 1) & s->mask;
		if (!s->slots[j].count)
			break;
		home = home_of(s, key_hash(&s->slots[j].key));
		if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		s->slots[i] = s->slots[j];
		i = j;
	}
	s->slots[i].count = 0;
	pthread_mutex_unlock(&s->lock);
}

uint32_t hlb_clients_count(struct hlb_clients *t, const struct hlb_client_key *k)
{
	uint64_t h = key_hash(k);
	struct shard *s = shard_of(t, h);
	uint32_t n;

	pthread_mutex_lock(&s->lock);
	n = s->slots[slot_find(s, k, h)].count;
	pthread_mutex_unlock(&s->lock);
	return n;
}

uint64_t hlb_clients_size(struct hlb_clients *t)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < HLB_CLIENTS_SHARDS; i++) {
		pthread_mutex_lock(&t->shards[i].lock);
		n += t->shards[i].used;
		pthread_mutex_unlock(&t->shards[i].lock);
	}
	return n;
}

uint32_t hlb_clients_top(struct hlb_clients *t, uint32_t n, struct hlb_client_count *out)
{
	uint32_t have = 0;

	for (uint32_t i = 0; i < HLB_CLIENTS_SHARDS && n; i++) {
		struct shard *s = &t->shards[i];

		pthread_mutex_lock(&s->lock);
		for (uint32_t j = 0; j <= s->mask; j++) {
			const struct slot *e = &s->slots[j];
			uint32_t k;

			if (!e->count || (have == n && e->count <= out[n - 1].count))
				continue;
			/* insertion into the sorted <out>, the last one dropped when full */
			k = have < n ? have++ : n - 1;
			while (k > 0 && out[k - 1].count < e->count) {
				out[k] = out[k - 1];
				k--;
			}
			out[k].key = e->key;
			out[k].count = e->count;
		}
		pthread_mutex_unlock(&s->lock);
	}
	return have;
}
