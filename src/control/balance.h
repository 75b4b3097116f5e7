/* SPDX-License-Identifier: MIT */
/*
 * Which backend of a client's preference list takes a new connection: the
 * data plane's side of bounded load and slow start, as pure functions over
 * the snapshot (header-only, so the forwarder and tests call them without
 * linking the control plane). The forwarder calls hlb_balance_order() once
 * per accepted connection, after hashlb_table_preference(), then connects to
 * pref[0] and retries along pref[1..] as before.
 *
 * Bounded load (a service's balance_factor f > 0, as HAProxy's
 * hash-balance-factor and Envoy's hash_balance_factor): a backend of weight w
 * may hold at most ceil(f x (A + 1) x w / W) connections, A being the
 * service's active connections and W the total weight of its up backends;
 * a backend at its cap is passed over for the next one of the list. The +1
 * counts the connection being placed, so an idle service never skips.
 *
 * Slow start: a backend that came up or was added admits only a fraction
 * (b->admit / HLB_ADMIT_ONE, raised by the control thread over slow_start_ms)
 * of the clients whose first choice it is; the others go to their next
 * backend (on Maglev, the one the snapshot's ramp_table gives them, put
 * second by the forwarder before this reorders: where they were while the
 * backend was out). The fraction is taken over a mix of the client's hash, so the
 * admitted clients are always the same ones and stay as the ramp rises, and
 * two instances agree.
 *
 * Neither rule ever refuses a connection: backends passed over keep their
 * order at the end of the list, and if all are passed over the list is
 * unchanged.
 */
#ifndef HLB_CONTROL_BALANCE_H
#define HLB_CONTROL_BALANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/runtime.h"

#define HLB_ADMIT_ONE 65536u

static inline bool hlb_bounded_ok(uint64_t active, uint32_t weight, uint64_t svc_active,
				  uint64_t up_weight, double factor)
{
	double x;
	uint64_t cap;

	if (!(factor > 0.0) || !up_weight)
		return true;
	/* ceil() by hand, so that callers need not link libm */
	x = factor * (double)(svc_active + 1) * (double)weight / (double)up_weight;
	cap = (uint64_t)x;
	if ((double)cap < x)
		cap++;
	return active < cap;
}

static inline bool hlb_slow_start_ok(uint64_t hash, uint32_t admit)
{
	uint64_t x = hash + 0x9e3779b97f4a7c15ull;

	if (admit >= HLB_ADMIT_ONE)
		return true;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	return (uint32_t)(x & 0xffff) < admit;
}

/*
 * Reorder <pref> (<n> table indices of <s>, from hashlb_table_preference()
 * for <hash>) so that backends that may take the connection come first, in
 * their order, then the others in theirs. <svc_active> is the service's
 * active connection count. Returns how many were passed over.
 */
static inline size_t hlb_balance_order(const struct hlb_snapshot *s, uint64_t hash,
				       uint64_t svc_active, uint32_t *pref, size_t n)
{
	uint32_t skipped[16];
	size_t i, kept = 0, n_skip = 0;

	if (n > 16)
		n = 16;
	for (i = 0; i < n; i++) {
		const struct hlb_backend *b = s->backends[pref[i]];
		uint64_t active = atomic_load_explicit(&b->active, memory_order_relaxed);
		uint32_t admit = atomic_load_explicit(&b->admit, memory_order_relaxed);
		uint32_t w = hashlb_table_backend_weight(s->table, pref[i]);

		if (hlb_slow_start_ok(hash, admit) &&
		    hlb_bounded_ok(active, w, svc_active, s->up_weight, s->balance_factor))
			pref[kept++] = pref[i];
		else
			skipped[n_skip++] = pref[i];
	}
	for (i = 0; i < n_skip; i++)
		pref[kept + i] = skipped[i];
	return n_skip;
}

#endif
