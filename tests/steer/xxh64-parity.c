// SPDX-License-Identifier: MIT
/*
 * Proves that bpf/xxh64.h, the XXH64 the BPF program runs, equals
 * libxxhash's XXH64 for the three tuple lengths (16, 18, 36 bytes), over
 * random inputs and seeds, compiled for the host; and that the program's
 * hash_prefix masking of the source address words (hlb_steer_src_mask, in
 * include/hashlb/steer_shared.h) hashes what zeroing the address's bits past
 * the prefix does, for every prefix length, IPv4-mapped and IPv6.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <linux/types.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#include "xxh64.h"
#include "hashlb/steer_shared.h"

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* The address bytes past <keep> bits zeroed, one bit at a time. */
static void mask_bits(uint8_t a[16], unsigned keep)
{
	for (unsigned bit = keep; bit < 128; bit++)
		a[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));
}

/* hlb_steer_src_mask's hash against XXH64 of the address masked bit by bit. */
static uint64_t masked_keys(uint64_t *state)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	uint64_t bad = 0;

	for (int i = 0; i < 200000; i++) {
		uint64_t r0 = rnd(state), r1 = rnd(state), seed = rnd(state);
		__u64 w0, w1;
		unsigned v4 = (unsigned)(rnd(state) % 33), v6 = (unsigned)(rnd(state) % 129);
		int is_v4 = i & 1;
		uint8_t a[16];

		memcpy(a, &r0, 8);
		memcpy(a + 8, &r1, 8);
		if (is_v4)
			memcpy(a, mapped, sizeof(mapped));
		memcpy(&w0, a, 8);
		memcpy(&w1, a + 8, 8);
		hlb_steer_src_mask(&w0, &w1, v4, v6);
		mask_bits(a, is_v4 ? 96 + (v4 ? v4 : 32) : (v6 ? v6 : 128));
		bad += hlb_xxh64_16w(w0, w1, seed) != XXH64(a, 16, seed);
	}
	return bad;
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
	{
		uint64_t mbad = masked_keys(&state);

		printf("xxh64: 200,000 source addresses cut to random prefixes (IPv4-mapped and "
		       "IPv6), %llu differ from masking bit by bit\n",
		       (unsigned long long)mbad);
		bad += mbad;
	}
	return bad ? 1 : 0;
}
