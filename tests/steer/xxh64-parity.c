// SPDX-License-Identifier: MIT
/*
 * Proves that bpf/xxh64.h, the XXH64 the BPF program runs, equals
 * libxxhash's XXH64 for the three tuple lengths (16, 18, 36 bytes), over
 * random inputs and seeds, compiled for the host.
 */
#include <stdint.h>
#include <stdio.h>

#include <linux/types.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#include "xxh64.h"

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

int main(void)
{
	uint64_t state = 1, bad = 0;
	uint8_t buf[40];

	for (int i = 0; i < 1000000; i++) {
		uint64_t seed = i < 1000 ? (uint64_t)i : rnd(&state);

		for (int j = 0; j < 40; j += 8) {
			uint64_t r = rnd(&state);

			for (int b = 0; b < 8; b++)
				buf[j + b] = (uint8_t)(r >> (8 * b));
		}
		bad += hlb_xxh64_16(buf, seed) != XXH64(buf, 16, seed);
		bad += hlb_xxh64_18(buf, seed) != XXH64(buf, 18, seed);
		bad += hlb_xxh64_36(buf, seed) != XXH64(buf, 36, seed);
	}
	printf("xxh64: 3,000,000 hashes (16, 18, 36 bytes), %llu differ from libxxhash\n",
	       (unsigned long long)bad);
	return bad ? 1 : 0;
}
