/* SPDX-License-Identifier: MIT */
/*
 * XXH64 for the three fixed lengths of the canonical tuple (16, 18 and 36
 * bytes), written from the xxHash specification (doc/xxhash_spec.md,
 * "XXH64 algorithm") in plain 64-bit arithmetic so that the BPF verifier
 * accepts it and clang unrolls it into straight-line code: no loops, no
 * 128-bit multiply. Must equal XXH64(buf, len, seed) of libxxhash bit for
 * bit; tests/steer/xxh64-parity.c proves it on the host and the BPF parity
 * test proves it in the kernel. Reads are little-endian, as the spec says:
 * BPF and the hosts we build for (x86-64, arm64) are little-endian.
 *
 * Plain C with fixed-width types: included by the BPF program and by the
 * host-side test.
 */
#ifndef HLB_XXH64_H
#define HLB_XXH64_H

#define HLB_XXH_P1 0x9E3779B185EBCA87ULL
#define HLB_XXH_P2 0xC2B2AE3D27D4EB4FULL
#define HLB_XXH_P3 0x165667B19E3779F9ULL
#define HLB_XXH_P4 0x85EBCA77C2B2AE63ULL
#define HLB_XXH_P5 0x27D4EB2F165667C5ULL

static __always_inline __u64 hlb_xxh_rotl(__u64 x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static __always_inline __u64 hlb_xxh_read64(const __u8 *p)
{
	return (__u64)p[0] | (__u64)p[1] << 8 | (__u64)p[2] << 16 | (__u64)p[3] << 24 |
	       (__u64)p[4] << 32 | (__u64)p[5] << 40 | (__u64)p[6] << 48 | (__u64)p[7] << 56;
}

static __always_inline __u64 hlb_xxh_read32(const __u8 *p)
{
	return (__u64)p[0] | (__u64)p[1] << 8 | (__u64)p[2] << 16 | (__u64)p[3] << 24;
}

static __always_inline __u64 hlb_xxh_round(__u64 acc, __u64 input)
{
	acc += input * HLB_XXH_P2;
	acc = hlb_xxh_rotl(acc, 31);
	return acc * HLB_XXH_P1;
}

static __always_inline __u64 hlb_xxh_merge(__u64 acc, __u64 val)
{
	acc ^= hlb_xxh_round(0, val);
	return acc * HLB_XXH_P1 + HLB_XXH_P4;
}

static __always_inline __u64 hlb_xxh_lane8v(__u64 h, __u64 lane)
{
	h ^= hlb_xxh_round(0, lane);
	return hlb_xxh_rotl(h, 27) * HLB_XXH_P1 + HLB_XXH_P4;
}

static __always_inline __u64 hlb_xxh_lane4v(__u64 h, __u64 lane)
{
	h ^= lane * HLB_XXH_P1;
	return hlb_xxh_rotl(h, 23) * HLB_XXH_P2 + HLB_XXH_P3;
}

static __always_inline __u64 hlb_xxh_lane8(__u64 h, const __u8 *p)
{
	return hlb_xxh_lane8v(h, hlb_xxh_read64(p));
}

static __always_inline __u64 hlb_xxh_lane1(__u64 h, __u8 b)
{
	h ^= (__u64)b * HLB_XXH_P5;
	return hlb_xxh_rotl(h, 11) * HLB_XXH_P1;
}

static __always_inline __u64 hlb_xxh_avalanche(__u64 h)
{
	h ^= h >> 33;
	h *= HLB_XXH_P2;
	h ^= h >> 29;
	h *= HLB_XXH_P3;
	h ^= h >> 32;
	return h;
}

/*
 * The same three lengths from the input's little-endian lanes (the values
 * of bytes 0-7, 8-15... read as little-endian words), for callers that hold
 * the tuple in registers: building it in bytes and reading it back costs
 * more than the hash.
 */

/* 16 bytes: lanes <l0>, <l1>. */
static __always_inline __u64 hlb_xxh64_16w(__u64 l0, __u64 l1, __u64 seed)
{
	__u64 h = seed + HLB_XXH_P5 + 16;

	h = hlb_xxh_lane8v(h, l0);
	h = hlb_xxh_lane8v(h, l1);
	return hlb_xxh_avalanche(h);
}

/* 18 bytes: lanes <l0>, <l1>, then bytes 16 and 17. */
static __always_inline __u64 hlb_xxh64_18w(__u64 l0, __u64 l1, __u8 b16, __u8 b17, __u64 seed)
{
	__u64 h = seed + HLB_XXH_P5 + 18;

	h = hlb_xxh_lane8v(h, l0);
	h = hlb_xxh_lane8v(h, l1);
	h = hlb_xxh_lane1(h, b16);
	h = hlb_xxh_lane1(h, b17);
	return hlb_xxh_avalanche(h);
}

/* 36 bytes: one 32-byte stripe (lanes <l0>..<l3>), then the 4-byte lane <l4>. */
static __always_inline __u64 hlb_xxh64_36w(__u64 l0, __u64 l1, __u64 l2, __u64 l3, __u32 l4,
					   __u64 seed)
{
	__u64 v1 = seed + HLB_XXH_P1 + HLB_XXH_P2;
	__u64 v2 = seed + HLB_XXH_P2;
	__u64 v3 = seed;
	__u64 v4 = seed - HLB_XXH_P1;
	__u64 h;

	v1 = hlb_xxh_round(v1, l0);
	v2 = hlb_xxh_round(v2, l1);
	v3 = hlb_xxh_round(v3, l2);
	v4 = hlb_xxh_round(v4, l3);
	h = hlb_xxh_rotl(v1, 1) + hlb_xxh_rotl(v2, 7) + hlb_xxh_rotl(v3, 12) + hlb_xxh_rotl(v4, 18);
	h = hlb_xxh_merge(h, v1);
	h = hlb_xxh_merge(h, v2);
	h = hlb_xxh_merge(h, v3);
	h = hlb_xxh_merge(h, v4);
	h += 36;
	h = hlb_xxh_lane4v(h, l4);
	return hlb_xxh_avalanche(h);
}

/* XXH64 of the first 16 bytes of <p> (the source address). */
static __always_inline __u64 hlb_xxh64_16(const __u8 *p, __u64 seed)
{
	return hlb_xxh64_16w(hlb_xxh_read64(p), hlb_xxh_read64(p + 8), seed);
}

/* XXH64 of the first 18 bytes (source address and port). */
static __always_inline __u64 hlb_xxh64_18(const __u8 *p, __u64 seed)
{
	return hlb_xxh64_18w(hlb_xxh_read64(p), hlb_xxh_read64(p + 8), p[16], p[17], seed);
}

/* XXH64 of 36 bytes (the whole tuple). */
static __always_inline __u64 hlb_xxh64_36(const __u8 *p, __u64 seed)
{
	return hlb_xxh64_36w(hlb_xxh_read64(p), hlb_xxh_read64(p + 8), hlb_xxh_read64(p + 16),
			     hlb_xxh_read64(p + 24), (__u32)hlb_xxh_read32(p + 32), seed);
}

#endif
