/* SPDX-License-Identifier: MIT */
/*
 * Known answers of hashlb_tuple_hash(): XXH64 over the canonical tuple bytes
 * (include/hashlb/tuple.h) for the three hash keys. Every implementation of
 * the tuple hash (user space, the BPF steering program, a peer instance)
 * must give exactly these values: test_tuple checks the library, the kernel
 * parity test can include this header to check bpf/.
 *
 * Changing the layout or the hash function changes these values and moves
 * every client to another backend: it is a migration, not a refactor.
 */
#ifndef HASHLB_TUPLE_VECTORS_H
#define HASHLB_TUPLE_VECTORS_H

#include <stdint.h>

struct tuple_vector {
	const char *src; /* hashlb_tuple_parse_src() form of the source half */
	uint8_t bytes[36]; /* the canonical tuple */
	uint64_t seed;
	uint64_t hash[3]; /* HASHLB_KEY_SRC_IP, _SRC_IP_PORT, _4TUPLE */
};

#define TV_V4_SRC 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1, 0x30, 0x39
#define TV_V4_DST 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 51, 100, 7, 0, 80
#define TV_V6_SRC 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x01, 0xbb
#define TV_V6_DST 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0x1f, 0x90

/* 192.0.2.1:12345 -> 198.51.100.7:80 and [2001:db8::1]:443 -> [2001:db8::2]:8080 */
static const struct tuple_vector tuple_vectors[] = {
	{ "192.0.2.1:12345",
	  { TV_V4_SRC, TV_V4_DST },
	  0,
	  { 0xde3cbbe5a2240bf0ull, 0x5027ee3b581bd28cull, 0x9bff5bed843946b9ull } },
	{ "192.0.2.1:12345",
	  { TV_V4_SRC, TV_V4_DST },
	  0x0123456789abcdefull,
	  { 0xf24513edae98d004ull, 0xdb6dc1a006dc68faull, 0x90df2b75e16f6b6dull } },
	{ "[2001:db8::1]:443",
	  { TV_V6_SRC, TV_V6_DST },
	  0,
	  { 0x97f11e0685f67ae8ull, 0x4ec77c66eb2f1ceeull, 0xea78e5f3e226b9ceull } },
	{ "[2001:db8::1]:443",
	  { TV_V6_SRC, TV_V6_DST },
	  0x0123456789abcdefull,
	  { 0x7cbfa03e2f32a21cull, 0xe5a344805047e2cdull, 0xf20af4767dc9dc34ull } },
	{ "::", { 0 }, 0, { 0xaf09f71516247c32ull, 0x41b4d1c910c1a58dull, 0x65b3a875a2520cd1ull } },
};

#endif
