/* SPDX-License-Identifier: MIT */
/*
 * The runtime objects that the data plane (src/proxy/) and the control plane
 * (src/control/) share. This is the contract between them:
 *
 * - The control thread owns the pool: services and their backends, with
 *   admin state, health and weight. On every change it builds a new
 *   immutable struct hlb_snapshot for the service (a core table plus the
 *   addresses and counters of its backends) and publishes it with one atomic
 *   pointer store (hlb_service_publish()).
 * - Workers load the service's snapshot pointer once per accept (acquire),
 *   never lock, and keep using the backend they picked for the life of the
 *   connection. A connection holds a reference on its struct hlb_backend
 *   (not on the snapshot), so a backend removed by a reload stays valid until
 *   its last connection closes.
 * - Old snapshots are freed by quiescent-state reclamation: each worker bumps
 *   its quiescent counter once per event-loop turn, when it holds no snapshot
 *   pointer; hlb_rcu_synchronize() waits until every worker has passed one.
 * - Counters are per-backend atomics (relaxed): workers add, the admin
 *   endpoint reads. Passive health: workers count connect failures and
 *   timeouts into connect_fail; the control thread reads the deltas.
 */
#ifndef HASHLB_RUNTIME_H
#define HASHLB_RUNTIME_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "hashlb/config.h"
#include "hashlb/table.h"

struct hlb_backend_stats {
	atomic_uint_fast64_t active; /* established connections now */
	atomic_uint_fast64_t total; /* connections established */
	atomic_uint_fast64_t bytes_in; /* client -> backend */
	atomic_uint_fast64_t bytes_out; /* backend -> client */
	atomic_uint_fast64_t connect_fail; /* refused or timed out connects */
	atomic_uint_fast64_t retries; /* connects that moved on from this backend */
};

/* One configured backend. Refcounted: the pool holds one reference, every
 * connection to it and every snapshot that lists it one each. */
struct hlb_backend {
	atomic_uint refs;
	char *name;
	struct sockaddr_storage addr;
	socklen_t addr_len;
	uint32_t weight; /* configured */
	_Atomic int admin; /* enum hashlb_admin_state */
	atomic_bool healthy; /* last verdict of the health checker */
	/* Slow start: new clients admitted per 65536 of those whose choice it is
	 * (see src/control/balance.h); 65536 = all. Set by the control thread. */
	atomic_uint admit;
	/* Removed by a reload and its drain timeout has passed: workers close
	 * its remaining connections. */
	atomic_bool evict;
	struct hlb_backend_stats stats;
};

struct hlb_backend *hlb_backend_new(const struct hashlb_backend_cfg *cfg);
struct hlb_backend *hlb_backend_ref(struct hlb_backend *b);
void hlb_backend_unref(struct hlb_backend *b); /* accepts NULL */

/* An immutable routing snapshot of one service. */
struct hlb_snapshot {
	uint64_t generation;
	uint64_t fingerprint;
	struct hashlb_table *table; /* owned */
	enum hashlb_key key;
	uint64_t seed;
	uint32_t n_backends; /* == hashlb_table_backend_count(table) */
	struct hlb_backend **backends; /* table index -> backend; one reference each */
	double balance_factor; /* 0 = off */
	uint64_t up_weight; /* sum of the up backends' weights, for bounded load */
};

void hlb_snapshot_free(struct hlb_snapshot *s); /* accepts NULL */

struct hlb_rcu; /* quiescent-state reclamation domain, one per process */

/* One service as the workers see it. */
struct hlb_service {
	char *name;
	_Atomic(struct hlb_snapshot *) snap; /* current; swapped by the control thread */
	atomic_uint_fast64_t active; /* connections now, for max_connections */
	atomic_uint_fast64_t total;
	atomic_uint_fast64_t rejected; /* over max_connections */
	atomic_uint_fast64_t no_backend; /* every backend down or failed */
	atomic_uint_fast64_t lookups;
	struct hashlb_service_cfg *cfg; /* current settings (timeouts, limits) */
};

/*
 * Publish <next> as <svc>'s snapshot; the previous one is handed to <rcu>
 * and freed once every worker has passed a quiescent point. Control thread.
 */
void hlb_service_publish(struct hlb_service *svc, struct hlb_snapshot *next, struct hlb_rcu *rcu);

#endif
