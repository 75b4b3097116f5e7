/* SPDX-License-Identifier: MIT */
/*
 * The idle rule of an open connection (conn_idle() in conn.c) apart from its
 * sockets, so that its 32-bit millisecond arithmetic is tested across the
 * wrap (tests/unit/test_idle.c).
 */
#ifndef HASHLB_PROXY_IDLE_H
#define HASHLB_PROXY_IDLE_H

#include <stdbool.h>
#include <stdint.h>

/* The bytes a quiet connection's sockets held for their peers (<outq>), at <at_ms>. */
struct idle_note {
	uint32_t outq, at_ms;
};

/*
 * Whether a connection last active at <*last_ms> is idle at <now> under
 * <idle_ms> (not 0), <note> its last note (at_ms == last_ms: none). Quiet
 * for half its timeout, it has <outq>(<arg>) noted; at its timeout, fewer
 * bytes held than noted is progress: <*last_ms> moves to just before the new
 * note. <outq> is read at most once per half timeout of quiet.
 *
 * A note older than the last activity is none, and is brought up to it
 * here: the difference, read as signed, then never wraps. Left behind, on a
 * connection busy for 24.8 days after its last note it read as a current
 * note: no note was taken at half the timeout, and a slow reader was closed
 * by a comparison with a note weeks old.
 */
static inline bool idle_due(uint32_t now, uint32_t idle_ms, uint32_t *last_ms,
			    struct idle_note *note, uint32_t (*outq)(const void *arg),
			    const void *arg)
{
	uint32_t quiet = now - *last_ms, q;
	bool noted;

	if ((int32_t)(note->at_ms - *last_ms) < 0)
		note->at_ms = *last_ms;
	noted = note->at_ms != *last_ms;
	if (quiet < idle_ms / 2 || (quiet <= idle_ms && noted))
		return false;
	q = outq(arg);
	if (quiet > idle_ms && (!noted || q >= note->outq))
		return true;
	if (quiet > idle_ms) /* the peers took bytes since the note */
		*last_ms = now - 1; /* before the note, compared at the next idle time */
	note->outq = q;
	note->at_ms = now;
	return false;
}

#endif
