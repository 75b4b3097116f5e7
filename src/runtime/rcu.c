// SPDX-License-Identifier: MIT
/*
 * Quiescent-state based reclamation for the snapshots and services that
 * workers read without locks (the contract is in runtime.h).
 *
 * A global grace-period counter <gp> only grows. Each reader publishes the
 * value of <gp> it last saw at a quiescent point, or 0 while offline. An
 * object retired when <gp> became E may be freed once every reader is
 * offline or has published a value >= E: such a reader has read <gp> after
 * the object was unpublished, so it cannot hold the old pointer.
 *
 * The reader side costs one store and one fence per event-loop turn, and no
 * shared write: each reader's slot has its own cache line.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "runtime.h"

struct rcu_slot {
	_Atomic uint64_t seen; /* 0 = offline */
} __attribute__((aligned(64)));

struct rcu_entry {
	struct rcu_entry *next;
	uint64_t epoch;
	void (*fn)(void *);
	void *p;
};

struct hlb_rcu {
	_Atomic uint64_t gp __attribute__((aligned(64)));
	uint32_t n_readers;
	pthread_mutex_t lock; /* the pending list; never taken by readers */
	struct rcu_entry *head, **tail;
	size_t n_pending;
	struct rcu_slot *slots;
};

int hlb_rcu_new(uint32_t n_readers, struct hlb_rcu **ret_rcu)
{
	struct hlb_rcu *rcu;

	rcu = aligned_alloc(64, sizeof(*rcu));
	if (!rcu)
		return -ENOMEM;
	*rcu = (struct hlb_rcu){ .n_readers = n_readers };
	atomic_init(&rcu->gp, 1);
	rcu->slots = aligned_alloc(64, sizeof(struct rcu_slot) * (n_readers ? n_readers : 1));
	if (!rcu->slots) {
		free(rcu);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n_readers; i++)
		atomic_init(&rcu->slots[i].seen, 0);
	pthread_mutex_init(&rcu->lock, NULL);
	rcu->tail = &rcu->head;
	*ret_rcu = rcu;
	return 0;
}

void hlb_rcu_free(struct hlb_rcu *rcu)
{
	struct rcu_entry *e, *next;

	if (!rcu)
		return;
	for (e = rcu->head; e; e = next) {
		next = e->next;
		e->fn(e->p);
		free(e);
	}
	pthread_mutex_destroy(&rcu->lock);
	free(rcu->slots);
	free(rcu);
}

void hlb_rcu_online(struct hlb_rcu *rcu, uint32_t id)
{
	atomic_store_explicit(&rcu->slots[id].seen,
			      atomic_load_explicit(&rcu->gp, memory_order_acquire),
			      memory_order_relaxed);
	/* Pairs with the fence in hlb_rcu_poll(): either the poller sees us
	 * online, or we see every pointer unpublished before its check. */
	atomic_thread_fence(memory_order_seq_cst);
}

void hlb_rcu_offline(struct hlb_rcu *rcu, uint32_t id)
{
	atomic_store_explicit(&rcu->slots[id].seen, 0, memory_order_release);
}

void hlb_rcu_quiescent(struct hlb_rcu *rcu, uint32_t id)
{
	atomic_store_explicit(&rcu->slots[id].seen,
			      atomic_load_explicit(&rcu->gp, memory_order_acquire),
			      memory_order_release);
}

int hlb_rcu_defer(struct hlb_rcu *rcu, void (*fn)(void *), void *p)
{
	struct rcu_entry *e;

	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->next = NULL;
	e->fn = fn;
	e->p = p;
	pthread_mutex_lock(&rcu->lock);
	e->epoch = atomic_fetch_add_explicit(&rcu->gp, 1, memory_order_seq_cst) + 1;
	*rcu->tail = e;
	rcu->tail = &e->next;
	rcu->n_pending++;
	pthread_mutex_unlock(&rcu->lock);
	return 0;
}

/* The oldest grace period some online reader may still be in. */
static uint64_t rcu_min_seen(struct hlb_rcu *rcu)
{
	uint64_t min = UINT64_MAX;

	atomic_thread_fence(memory_order_seq_cst);
	for (uint32_t i = 0; i < rcu->n_readers; i++) {
		uint64_t s = atomic_load_explicit(&rcu->slots[i].seen, memory_order_acquire);

		if (s && s < min)
			min = s;
	}
	return min;
}

uint32_t hlb_rcu_readers(const struct hlb_rcu *rcu)
{
	return rcu->n_readers;
}

size_t hlb_rcu_poll(struct hlb_rcu *rcu)
{
	struct rcu_entry *done = NULL, **done_tail = &done, *e, *next;
	uint64_t min;
	size_t left;

	pthread_mutex_lock(&rcu->lock);
	if (!rcu->head) {
		pthread_mutex_unlock(&rcu->lock);
		return 0;
	}
	min = rcu_min_seen(rcu);
	while (rcu->head && rcu->head->epoch <= min) {
		e = rcu->head;
		rcu->head = e->next;
		e->next = NULL;
		*done_tail = e;
		done_tail = &e->next;
		rcu->n_pending--;
	}
	if (!rcu->head)
		rcu->tail = &rcu->head;
	left = rcu->n_pending;
	pthread_mutex_unlock(&rcu->lock);

	/* Outside the lock: a free function may retire more objects. */
	for (e = done; e; e = next) {
		next = e->next;
		e->fn(e->p);
		free(e);
	}
	return left;
}

void hlb_rcu_barrier(struct hlb_rcu *rcu)
{
	uint64_t target = atomic_load_explicit(&rcu->gp, memory_order_seq_cst);

	for (;;) {
		bool pending;

		hlb_rcu_poll(rcu);
		pthread_mutex_lock(&rcu->lock);
		pending = rcu->head && rcu->head->epoch <= target;
		pthread_mutex_unlock(&rcu->lock);
		if (!pending)
			return;
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
}
