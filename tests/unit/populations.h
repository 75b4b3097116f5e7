/* SPDX-License-Identifier: MIT */
/*
 * The core's Maglev populations counted, for a test that links with
 * -Wl,--wrap=maglev_populate (tests/unit/meson.build): what a table costs,
 * about 1 s of CPU each at the largest M, where a copy costs a tenth.
 * Include it once per test executable.
 */
#ifndef HASHLB_TEST_POPULATIONS_H
#define HASHLB_TEST_POPULATIONS_H

#include <stdint.h>

static unsigned populations;

int __real_maglev_populate(uint16_t *slots, uint32_t m, uint64_t seed, char *const *names,
			   const uint32_t *weights, const uint32_t *order, uint32_t n);
int __wrap_maglev_populate(uint16_t *slots, uint32_t m, uint64_t seed, char *const *names,
			   const uint32_t *weights, const uint32_t *order, uint32_t n);

int __wrap_maglev_populate(uint16_t *slots, uint32_t m, uint64_t seed, char *const *names,
			   const uint32_t *weights, const uint32_t *order, uint32_t n)
{
	populations++;
	return __real_maglev_populate(slots, m, seed, names, weights, order, n);
}

#endif
