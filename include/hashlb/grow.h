/* SPDX-License-Identifier: MIT */
/*
 * Growing an array by doubling its capacity, the one way every library of
 * hashlb makes room. Header-only (every library has include/), and inline
 * so that the data plane's callers pay one compare when there is room.
 */
#ifndef HASHLB_GROW_H
#define HASHLB_GROW_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/*
 * Make room in the array *<p>, of *<cap> elements of <elem> bytes, for
 * <need> elements: its capacity doubles (from <first>, or 1 if that is 0,
 * when it is 0) until it holds <need>. Returns 0; or -ENOMEM when memory runs out
 * or the size would overflow, *<p> and *<cap> then as they were (the array
 * still the caller's to free).
 */
static inline int hlb_grow(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
	size_t ncap = *cap ? *cap : first ? first : 1;
	void *np;

	if (need <= *cap)
		return 0;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -ENOMEM;
		ncap *= 2;
	}
	np = reallocarray(*p, ncap, elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

#endif
