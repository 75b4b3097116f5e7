/* SPDX-License-Identifier: MIT */
/*
 * Kernel steering: every map key and value shared by the BPF programs
 * (bpf/steer.bpf.c) and the user-space loader (src/steer/). Fixed-width
 * kernel types only, explicit padding, sizes asserted: the two sides are
 * compiled by different compilers for different targets and must agree on
 * every byte.
 *
 * The maps (see docs/DESIGN-steering.md for why they look like this):
 *
 *   hlb_vips     hash   vip_key -> vip          which (address, port) we serve
 *   hlb_active   array  0 -> u32                the table half in use (0 or 1)
 *   hlb_tables   array  half -> table           per-half scheme, seed, sizes
 *   hlb_backends array  half*cap + idx -> backend
 *   hlb_bslots   array  slot -> backend         what conntrack entries resolve
 *   hlb_slots    array  half*cap + slot/4 -> slots   (Maglev, 4 slots a value)
 *   hlb_points   array  half*cap + i -> ring_point   (ring, sorted)
 *   hlb_buckets  array  half*cap + b -> u32           (ring two-level index)
 *   hlb_flows    lru    flow_key -> flow        connection tracking
 *   hlb_ctcache  percpu array hash(flow_key) -> ct_cache   conntrack hits, per CPU
 *   hlb_ctgen    array  0 -> u32                what makes hlb_ctcache entries valid
 *   hlb_stats    percpu array 0 -> stats
 */
#ifndef HASHLB_STEER_SHARED_H
#define HASHLB_STEER_SHARED_H

#include <linux/types.h>

/* Ring lookup steps at most this many points past its bucket's first one;
 * the loader refuses a table whose max_scan is larger (never seen in
 * practice: the index has about one point per bucket). */
#define HLB_STEER_RING_SCAN_MAX 64
/* IPv6 extension headers walked before giving up (passed to the stack). */
#define HLB_STEER_IPV6_EXT_MAX 4
/* Maglev slots packed into one array value. */
#define HLB_STEER_SLOTS_PER_VALUE 4

#define HLB_STEER_SCHEME_RING 0 /* = HASHLB_SCHEME_RING */
#define HLB_STEER_SCHEME_MAGLEV 1 /* = HASHLB_SCHEME_MAGLEV */
#define HLB_STEER_BACKEND_NONE 0xffffu /* = HASHLB_BACKEND_NONE */

/* A service address. port = 0 marks "this address is a VIP" (inserted for
 * every VIP address) so that fragments, which carry no port, can be told
 * apart from traffic to other hosts. */
struct hlb_steer_vip_key {
	__u8 addr[16]; /* IPv4 as IPv4-mapped IPv6, like the canonical tuple */
	__be16 port;
	__u16 pad;
};

struct hlb_steer_vip {
	__u32 flags; /* HLB_STEER_VIP_F_* */
	__u32 pad;
};

#define HLB_STEER_VIP_F_ADDR_ONLY 1u /* the port-0 marker entry */

/* One table half: everything needed to turn a tuple into a backend index.
 * The seed and key travel with the table, so they flip together with it. */
struct hlb_steer_table {
	__u64 seed;
	__u32 scheme; /* HLB_STEER_SCHEME_* */
	__u32 key_len; /* 16, 18 or 36: bytes of the canonical tuple hashed */
	__u32 m; /* Maglev slots */
	__u32 n_points; /* ring points */
	__u32 bucket_bits; /* ring index: 1 << bucket_bits buckets (+1 entry) */
	__u32 max_scan;
	__u32 n_backends;
	__u32 pad;
};

/* A backend as the data path needs it: where to send a frame. Each backend
 * also has a slot in hlb_bslots that stays its own for as long as it is
 * configured, whatever its index in a table: conntrack entries name the
 * slot (an array index, far cheaper than a hash lookup) and the id, and an
 * entry whose slot now holds another id, or a backend without KEEP, is
 * rescheduled. */
struct hlb_steer_backend {
	__u64 id; /* XXH64(name, 0): identity for conntrack across tables */
	__u8 dst_mac[6]; /* the backend's MAC */
	__u8 src_mac[6]; /* the egress interface's MAC */
	__u32 ifindex; /* egress; 0 = the interface the packet came in on */
	__u32 flags; /* HLB_STEER_BACKEND_F_* */
	__u32 slot; /* its index in hlb_bslots */
};

/* Established flows stay on this backend (up or draining). Without it the
 * backend is down or removed and its flows are rescheduled. */
#define HLB_STEER_BACKEND_F_KEEP 1u

struct hlb_steer_ring_point {
	__u64 pos;
	__u32 owner;
	__u32 pad;
};

struct hlb_steer_slots {
	__u16 b[HLB_STEER_SLOTS_PER_VALUE];
};

struct hlb_steer_flow_key {
	__u8 src[16];
	__u8 dst[16];
	__be16 sport;
	__be16 dport;
	__u32 pad;
};

struct hlb_steer_flow {
	__u64 backend_id;
	__u32 slot;
	__u32 pad;
};

/* The per-CPU conntrack cache: direct-mapped by a hash of the flow key.
 * Array lookups are inlined by the verifier, so an established packet that
 * hits here makes no kernel call at all (a hash map lookup makes four, each
 * paying the return mitigation). An entry is a copy of the flow's hlb_flows
 * entry, valid only while its gen equals hlb_ctgen's, which the loader bumps
 * after any change that could make a conntrack entry wrong (table, VIPs,
 * flows cleared). */
#define HLB_STEER_CT_CACHE_BITS 12
/* Every this many cache hits the packet goes through hlb_flows instead, so
 * that the LRU still sees the flow in use and does not evict it. */
#define HLB_STEER_CT_CACHE_REFRESH 32

struct hlb_steer_ct_cache {
	struct hlb_steer_flow_key key;
	__u64 backend_id;
	__u32 slot;
	__u32 gen;
	__u32 hits;
	__u32 pad;
};

enum hlb_steer_drop {
	HLB_STEER_DROP_MALFORMED = 0, /* to a VIP, TCP header truncated or bad */
	HLB_STEER_DROP_FRAGMENT, /* IP fragment to a VIP address */
	HLB_STEER_DROP_NO_BACKEND, /* every backend is down */
	HLB_STEER_DROP_TABLE, /* table inconsistent (a loader bug) */
	HLB_STEER_DROP_REDIRECT, /* the redirect helper failed */
	HLB_STEER_DROP_MAX
};

struct hlb_steer_stats {
	__u64 packets; /* TCP packets to a VIP, forwarded */
	__u64 bytes; /* their frame bytes */
	__u64 new_flows; /* scheduled through the table */
	__u64 ct_hits; /* forwarded by their conntrack entry */
	__u64 ct_resched; /* conntrack entry's backend down or gone: rescheduled */
	__u64 passed; /* handed to the stack: not ours (other host, port, non-TCP) */
	__u64 drops[HLB_STEER_DROP_MAX];
};

_Static_assert(sizeof(struct hlb_steer_vip_key) == 20, "vip key layout");
_Static_assert(sizeof(struct hlb_steer_vip) == 8, "vip layout");
_Static_assert(sizeof(struct hlb_steer_table) == 40, "table layout");
_Static_assert(sizeof(struct hlb_steer_backend) == 32, "backend layout");
_Static_assert(sizeof(struct hlb_steer_ring_point) == 16, "ring point layout");
_Static_assert(sizeof(struct hlb_steer_slots) == 8, "slots layout");
_Static_assert(sizeof(struct hlb_steer_flow_key) == 40, "flow key layout");
_Static_assert(sizeof(struct hlb_steer_flow) == 16, "flow layout");
_Static_assert(sizeof(struct hlb_steer_ct_cache) == 64, "ct cache layout");
_Static_assert(sizeof(struct hlb_steer_stats) == (6 + HLB_STEER_DROP_MAX) * 8, "stats layout");

#endif
