// SPDX-License-Identifier: MIT
/*
 * A stand-in for src/runtime/'s objects, so the control plane's unit tests
 * run without the forwarder: the same contract, no workers, so publishing
 * frees the previous snapshot at once.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

struct hlb_backend *hlb_backend_new(const struct hashlb_backend_cfg *cfg)
{
	struct hlb_backend *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->name = strdup(cfg->name);
	if (!b->name) {
		free(b);
		return NULL;
	}
	atomic_init(&b->refs, 1);
	memcpy(&b->addr, &cfg->addr, sizeof(b->addr));
	b->addr_len = cfg->addr_len;
	b->weight = cfg->weight;
	atomic_init(&b->admin, (int)cfg->admin);
	atomic_init(&b->healthy, true);
	atomic_init(&b->admit, 65536u);
	return b;
}

struct hlb_backend *hlb_backend_ref(struct hlb_backend *b)
{
	atomic_fetch_add(&b->refs, 1);
	return b;
}

void hlb_backend_unref(struct hlb_backend *b)
{
	if (!b || atomic_fetch_sub(&b->refs, 1) != 1)
		return;
	free(b->name);
	free(b);
}

void hlb_snapshot_free(struct hlb_snapshot *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->n_backends; i++)
		hlb_backend_unref(s->backends[i]);
	free(s->backends);
	hashlb_table_free(s->table);
	free(s);
}

void hlb_service_publish(struct hlb_service *svc, struct hlb_snapshot *next, struct hlb_rcu *rcu)
{
	(void)rcu;
	hlb_snapshot_free(atomic_exchange(&svc->snap, next));
}
