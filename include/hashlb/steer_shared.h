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
 *   hlb_vips     array  vhalf*256 + i -> vip    which (address, port) we serve,
 *                                               open addressed by hlb_steer_vip_hash
 *   hlb_active   array  0 -> u32                bit 0: the table half in use,
 *                                               bit 1: the VIP half in use,
 *                                               bit 2: a hashlb run drives it,
 *                                               bit 3: clsact ours, bit 4: its
 *                                               attacher detaches it (loader only)
 *   hlb_tables   array  th -> table             per-half scheme, seed, sizes
 *   hlb_backends array  th*cap + idx -> backend
 *   hlb_bslots   array  slot -> backend         what conntrack entries resolve
 *   hlb_slots    array  th*cap + slot/4 -> slots   (Maglev, 4 slots a value)
 *   hlb_points   array  th*cap + i -> ring_point   (ring, sorted)
 *   hlb_buckets  array  th*cap + b -> u32           (ring two-level index)
 *
 * th = 2 * table + half: a VIP's entry names its table (HLB_STEER_VIP_TABLE_SHIFT)
 * and which half is in force (HLB_STEER_VIP_F_HALF); tables_cap tables, 1
 * unless the loader sets more (then th is the half alone, as before).
 *   hlb_ct       array  hash(flow) & mask -> ct_bucket   connection tracking
 *   hlb_stats    percpu array 0 -> stats (up to ct_lost: its size is fixed)
 *   hlb_stats2   percpu array 0 -> stats2       counters added since
 *   hlb_tstats   percpu array table -> tstats   each table's packets and bytes
 *                                               (a program of several tables)
 *   hlb_tstats2  percpu array table -> tstats2  each table's other counters
 *                                               (a program of several tables)
 *   hlb_tnames   array  table -> tname          each table's service's name
 *                                               (the loader's: never read here)
 *
 * Every map the data path reads is an array: the verifier inlines array
 * lookups (a bounds check and an add), where a hash map lookup or update is
 * a chain of kernel calls.
 */
#ifndef HASHLB_STEER_SHARED_H
#define HASHLB_STEER_SHARED_H

#include <linux/types.h>

/* Shared functions are inlined on both sides: in BPF a call to a function
 * that clang keeps out of line is a BPF-to-BPF call, which costs a return. */
#define HLB_STEER_INLINE static inline __attribute__((always_inline))

/* Ring lookup steps at most this many points past its bucket's first one;
 * the loader refuses a table whose max_scan is larger (never seen in
 * practice: the index has about one point per bucket). */
#define HLB_STEER_RING_SCAN_MAX 64
/* IPv6 extension headers walked before giving up (passed to the stack). */
#define HLB_STEER_IPV6_EXT_MAX 4
/* The kernel's ring index has about this many buckets a point (the loader
 * builds it, finer than the core's), so that most buckets hold no point. */
#define HLB_STEER_RING_BUCKETS_PER_POINT 4
/* A ring bucket that holds no point: every hash in it goes to the next
 * point's owner, kept in the low 16 bits with this flag; no scan. Otherwise
 * the entry is the index of the first point at or after the bucket. */
#define HLB_STEER_RING_DIRECT 0x80000000u
/* Maglev slots packed into one array value. */
#define HLB_STEER_SLOTS_PER_VALUE 4

#define HLB_STEER_SCHEME_RING 0 /* = HASHLB_SCHEME_RING */
#define HLB_STEER_SCHEME_MAGLEV 1 /* = HASHLB_SCHEME_MAGLEV */
#define HLB_STEER_BACKEND_NONE 0xffffu /* = HASHLB_BACKEND_NONE */

/* The VIP table: open addressed, HLB_STEER_VIP_SLOTS entries a half. A key
 * lives at most HLB_STEER_VIP_PROBES - 1 slots past its home slot
 * (hlb_steer_vip_hash), and the home slot's probes says how many slots from
 * it hold keys of that home, so that an address that is no VIP costs one
 * lookup. An entry keeps its index for as long as it is served: conntrack
 * entries name it. */
/* hlb_active bit 2, set by hashlb run on the program it drives: its tables
 * come from its config and health checks, so hashlb steer --update must not
 * replace them. The programs never read it. */
#define HLB_STEER_ACTIVE_DAEMON 4u
/* hlb_active bit 3: the loader created the clsact qdisc its tc filter is on,
 * so whoever detaches the filter (hashlb steer --detach after --keep, a
 * hashlb run that took the program over) removes the qdisc too, if nothing
 * else is on it. The programs never read it. */
#define HLB_STEER_ACTIVE_CLSACT 8u
/* hlb_active bit 4: the process that attached the program detaches it when
 * it ends (opened without keep: a foreground hashlb steer; hashlb run sets
 * bit 2 too), so hashlb steer --detach must not pull it from under that
 * process while it lives. The programs never read it. */
#define HLB_STEER_ACTIVE_OWNED 16u

#define HLB_STEER_VIP_SLOTS 256
#define HLB_STEER_VIP_PROBES 8
/* Keys (VIP ports plus one address marker per VIP address) at most. */
#define HLB_STEER_VIPS_MAX 64

/* A service address. port = 0 marks "this address is a VIP" (an entry for
 * every VIP address) so that fragments, which carry no port, can be told
 * apart from traffic to other hosts. */
struct hlb_steer_vip {
	__u8 addr[16]; /* IPv4 as IPv4-mapped IPv6, like the canonical tuple */
	__be16 port;
	__u8 probes; /* slots from this one that hold keys whose home it is */
	/* Of a home slot whose probes is 2 or more: bit i set if no key of
	 * this home stored past it has hlb_steer_vip_bit() i, so that a
	 * packet whose bit it is, to no VIP (or to the key here, matched
	 * first), is passed without a conntrack lookup. 0: not known (an
	 * older hashlb's loader wrote padding here): every packet is looked
	 * up, as before. */
	__u8 absent;
	__u32 flags; /* HLB_STEER_VIP_F_* */
} __attribute__((aligned(8)));

#define HLB_STEER_VIP_F_VALID 1u /* the slot holds a key */
#define HLB_STEER_VIP_F_ADDR_ONLY 2u /* the port-0 marker entry */
/* Closed (hashlb run stopping, its listener closed): the VIP's established
 * flows go on by their conntrack entries, to a backend that keeps them; every
 * other packet to it (a SYN, a flow with no entry or whose backend is gone) is
 * passed to the stack, which refuses a new connection as the daemon does.
 * Read by programs whose hlb_stats2 has closed_passed: an older one ignores it. */
#define HLB_STEER_VIP_F_CLOSED 4u
/* Its table is in the half that hlb_active's bit 0 does not name: each table
 * flips alone, by a flip of the VIP half whose entries of its VIPs say so
 * (an older hashlb's loader writes 0: the half of bit 0, as before). */
#define HLB_STEER_VIP_F_HALF 8u
/* Bits 8..15 of flags: the VIP's table (one a service on the interface),
 * below the program's tables_cap. 0 (an older hashlb's loader): the first,
 * the one table there was. */
#define HLB_STEER_VIP_TABLE_SHIFT 8

/* The VIP table's hash of (address, port): <a0>, <a1> the address's two
 * 64-bit halves as loaded from memory (both sides run on the same CPU). Its
 * top 8 bits are the home slot, the 3 below them the key's bit in absent. */
HLB_STEER_INLINE __u64 hlb_steer_vip_mix(__u64 a0, __u64 a1, __be16 port)
{
	__u64 h = (a0 * 0x9e3779b97f4a7c15ULL) ^ (a1 * 0xc2b2ae3d27d4eb4fULL) ^
		  ((__u64)port * 0x165667b19e3779f9ULL);

	h ^= h >> 32;
	return h * 0x9e3779b97f4a7c15ULL;
}

/* The home slot of (address, port) (hlb_steer_vip_mix). */
HLB_STEER_INLINE __u32 hlb_steer_vip_hash(__u64 a0, __u64 a1, __be16 port)
{
	return (__u32)(hlb_steer_vip_mix(a0, a1, port) >> 56); /* 8 bits: HLB_STEER_VIP_SLOTS */
}

/* The bit of absent that stands for a key of hlb_steer_vip_mix() <mix>. */
HLB_STEER_INLINE __u32 hlb_steer_vip_bit(__u64 mix)
{
	return (__u32)(mix >> 48) & 7;
}

/* One table half: everything needed to turn a tuple into a backend index.
 * The seed and key travel with the table, so they flip together with it. */
struct hlb_steer_table {
	__u64 seed;
	__u32 scheme; /* HLB_STEER_SCHEME_* */
	__u32 key_len; /* 16, 18 or 36: bytes of the canonical tuple hashed */
	__u32 m; /* Maglev slots */
	__u32 n_points; /* ring points */
	__u32 bucket_bits; /* ring index: 1 << bucket_bits buckets */
	__u32 max_scan;
	__u32 n_backends;
	/* hash_prefix (hlb_steer_src_mask): the source address bits hashed,
	 * 0 = all. Once padding: a table an older hashlb wrote reads 0. */
	__u8 v4_prefix; /* 0..32 */
	__u8 v6_prefix; /* 0..128 */
	/* Loader only (the programs never read it): which publication wrote the
	 * half, so that a loader that keeps a copy of what it wrote (steer.c,
	 * struct shadow) sees that another loader wrote the half since (the two
	 * processes of an upgrade). 0: an older loader's (it was padding);
	 * HLB_STEER_STAMP_WRITING: being written. */
	__u16 stamp;
};
#define HLB_STEER_STAMP_WRITING 0xffffu

/* An address's first <bits> bits (0..64) as a mask of the 64-bit word that
 * a little-endian load of its 8 bytes gives (the BPF program's words). */
HLB_STEER_INLINE __u64 hlb_steer_prefix_word(__u32 bits)
{
	if (bits >= 64)
		return ~0ULL;
	if (bits == 0)
		return 0;
	return __builtin_bswap64(~0ULL << (64 - bits));
}

/*
 * The source address words <*w0>, <*w1> (its 16 canonical bytes loaded as
 * two little-endian words) cut to a table's prefix, as the core's
 * hashlb_tuple_mask_src(): an IPv4-mapped address (::ffff:a.b.c.d) keeps
 * 96 + <v4> bits, another <v6>; 0 keeps all. Only the table's hash sees the
 * masked address: conntrack keys the flow by its whole tuple.
 */
HLB_STEER_INLINE void hlb_steer_src_mask(__u64 *w0, __u64 *w1, __u32 v4, __u32 v6)
{
	__u32 keep;

	if (*w0 == 0 && (__u32)*w1 == 0xffff0000u)
		keep = 96 + (v4 && v4 < 32 ? v4 : 32);
	else
		keep = v6 && v6 < 128 ? v6 : 128;
	*w0 &= hlb_steer_prefix_word(keep);
	*w1 &= hlb_steer_prefix_word(keep > 64 ? keep - 64 : 0);
}

/* A backend as the data path needs it: where to send a frame. Each backend
 * also has a slot in hlb_bslots that stays its own for as long as it is
 * configured, whatever its index in a table: conntrack entries name the
 * slot (an array index, far cheaper than a hash lookup) and the id, and an
 * entry whose slot now holds another id, or a backend without KEEP, is
 * rescheduled. */
struct hlb_steer_backend {
	__u64 id; /* XXH64(name, 0): which backend holds the slot (loader only) */
	__u8 dst_mac[6]; /* the backend's MAC */
	__u8 src_mac[6]; /* the egress interface's MAC */
	__u32 ifindex; /* egress; 0 = the interface the packet came in on */
	__u32 flags; /* HLB_STEER_BACKEND_F_* */
	__u16 slot; /* its index in hlb_bslots */
	__u8 incarnation; /* 1..255, the next each time the slot changes hands */
	__u8 pad;
};

/* Established flows stay on this backend (up or draining). Without it the
 * backend is down or removed and its flows are rescheduled. */
#define HLB_STEER_BACKEND_F_KEEP 1u
/* Takes no new flow: out of the table (draining, maint, a backup the others
 * replaced, or down) or in it at weight 0. A SYN whose conntrack entry names it, a client's new
 * connection from the tuple of one that ended, is scheduled by the table;
 * the flow's other packets keep it while it has KEEP. A loader that does not
 * set it (an older hashlb's) leaves such SYNs on the entry's backend. */
#define HLB_STEER_BACKEND_F_OUT 2u

struct hlb_steer_ring_point {
	__u64 pos;
	__u32 owner;
	__u32 pad;
};

struct hlb_steer_slots {
	__u16 b[HLB_STEER_SLOTS_PER_VALUE];
};

/* What identifies a flow: the conntrack hash's input. */
struct hlb_steer_flow_key {
	__u8 src[16];
	__u8 dst[16];
	__be16 sport;
	__be16 dport;
	__u32 pad; /* zero */
} __attribute__((aligned(8)));

/*
 * Connection tracking: hashlb's own set-associative table in an array map
 * (docs/DESIGN-steering.md says why). hlb_steer_ct_hash(flow) picks a bucket
 * (its low bits) and a tag (its top 30 bits). A bucket is one cache line of
 * HLB_STEER_CT_WAYS ways; each way is one aligned 64-bit word written with a
 * single store, so a reader on another CPU sees a whole entry or none:
 *
 *   bits 63..34  tag          the flow's hash's top 30 bits
 *   bit  33      half-open    the hash's bit 33, flipped while no packet but
 *                             the client's SYN has used it yet
 *                             (hlb_steer_ct_half_open())
 *   bit  32      closing      the client sent its FIN or RST, or, half-open,
 *                             only its SYN (HLB_STEER_CT_CLOSING)
 *   bits 31..24  vip          its index in hlb_vips (a way matches a flow by
 *                             tag and vip: one VIP's flows never take
 *                             another's entries)
 *   bits 23..16  incarnation  the backend slot's, when the entry was made
 *                             (the loader clears a slot's stale entries
 *                             before its incarnation wraps onto theirs)
 *   bits 15..0   slot         the backend's slot in hlb_bslots
 *
 * 0 is an empty way (incarnations start at 1). seen[w] is the coarse time
 * (jiffies >> HLB_STEER_CT_TICK_SHIFT, 16 bits, wrapping) way w was last
 * used: an insert takes the way with the flow's tag and vip, else an empty one, else
 * the one seen longest ago (a closing one HLB_STEER_CT_CLOSING_HEAD ticks older
 * than it is). ext holds, in its bits 5w..5w+4, bits 26..30 of
 * the hash of way w's flow (in neither the bucket index, at most 2^26
 * buckets, nor the tag): read only by a SYN whose entry names a backend that
 * takes no new flow, to tell a reused tuple from a tag matched by chance.
 *
 * An entry is marked closing by a packet from the client with FIN or RST that
 * it forwards: the flow is ending, and a stop's drain (hashlb run) ends once
 * every entry left is closing and unused (docs/steering.md). A SYN that makes
 * or uses an entry (a new connection, a new one on the tuple, a retransmitted
 * SYN) marks it half-open and closing; the client's next packet without SYN,
 * FIN or RST (its ACK of the handshake) clears both: a connect no backend
 * answered is no open flow, so a drain ends once it has gone unused as a
 * closed flow does, not after timeouts.idle. Either way it is still forwarded
 * by, like any other, and evicted like one HLB_STEER_CT_CLOSING_HEAD ticks
 * older. Programs whose hlb_stats2 has ct_closing mark entries closing; in an
 * older one's, bit 32 is part of the tag. A program from before half-open had its tag in bits
 * 63..33, bit 33 the hash's: so an entry not half-open keeps it, and the two read each other's open
 * and closing entries alike (a program grown from the other's keeps its conntrack map,
 * hashlb_steer_grow(): an upgrade, or a rollback). An older program finds no half-open entry (a
 * handshake's ACK then scheduled by the table, counted in ct_lost); before, it missed every entry
 * this one had written whose hash has bit 33 set, half the established flows, and this one read
 * half of the older one's as half-open and reopened the closing ones among them.
 */
#define HLB_STEER_CT_WAYS 6
/*
 * An insert into a full set takes the way seen longest ago, an entry marked
 * closing counted this many ticks older than it is (16: 4 s at HZ=1000, 16 s at
 * HZ=250): a connect's half-open entry, which a SYN flood makes one a packet,
 * goes before the set's open flows used in that time, so a flood evicts its own
 * entries first. The entry cannot say whether it is half-open (its bit 33 is
 * relative to the flow's hash) or closed by its client's FIN or RST: both get
 * the head. A head, not a rank: a flow half-closed by its client and still
 * ACKing its server's data (used this tick) keeps its entry over an open one
 * idle for longer than the head, most likely a client gone.
 */
#define HLB_STEER_CT_CLOSING_HEAD 16
#define HLB_STEER_CT_TICK_SHIFT 8 /* 256 jiffies: ~1 s at HZ=250 */
#define HLB_STEER_CT_TAG_SHIFT 34
#define HLB_STEER_CT_HALF_OPEN (1ULL << 33)
#define HLB_STEER_CT_CLOSING (1ULL << 32)
#define HLB_STEER_CT_VIP_SHIFT 24
#define HLB_STEER_CT_INC_SHIFT 16
#define HLB_STEER_CT_EXT_SHIFT 26 /* the hash's bits kept in ext */
#define HLB_STEER_CT_EXT_BITS 5
#define HLB_STEER_CT_EXT_MASK ((1u << HLB_STEER_CT_EXT_BITS) - 1)

struct hlb_steer_ct_bucket {
	__u64 way[HLB_STEER_CT_WAYS];
	__u16 seen[HLB_STEER_CT_WAYS];
	__u32 ext; /* an older hashlb's program: 0, never read */
};

/* Whether conntrack entry <e> of the flow of hash <h> is half-open: its bit 33
 * is not the hash's. */
HLB_STEER_INLINE int hlb_steer_ct_half_open(__u64 e, __u64 h)
{
	return ((e ^ h) & HLB_STEER_CT_HALF_OPEN) != 0;
}

HLB_STEER_INLINE __u64 hlb_steer_ct_entry(__u32 tag, __u32 vip, __u32 incarnation, __u32 slot)
{
	return (__u64)tag << HLB_STEER_CT_TAG_SHIFT |
	       (__u64)(vip & 0xff) << HLB_STEER_CT_VIP_SHIFT |
	       (__u64)(incarnation & 0xff) << HLB_STEER_CT_INC_SHIFT | (slot & 0xffff);
}

/*
 * The flow's conntrack hash, of the key's five 64-bit words: not the table's seeded hash (which may
 * cover fewer fields: a source-address key would put all of a client's flows in one bucket with one
 * tag), a cheap one of every field. Five independent multiplies (the key's 64-bit words, each XORed
 * with <seed> first), then murmur3's finaliser so that every bit of the key reaches the bucket bits
 * and the tag. <seed> is the program's own, random (its ct_seed): without it the sum of products is
 * linear enough that a client who knows another flow's tuple computes at once an IPv6 source whose
 * hash is that flow's (bucket, tag and all), and takes or evicts its entry at will.
 */
HLB_STEER_INLINE __u64 hlb_steer_ct_hash_words(__u64 w0, __u64 w1, __u64 w2, __u64 w3, __u64 w4,
					       __u64 seed)
{
	__u64 h = ((w0 ^ seed) * 0x9e3779b97f4a7c15ULL) ^ ((w1 ^ seed) * 0xc2b2ae3d27d4eb4fULL) ^
		  ((w2 ^ seed) * 0x165667b19e3779f9ULL) ^ ((w3 ^ seed) * 0xd6e8feb86659fd93ULL) ^
		  ((w4 ^ seed) * 0x27d4eb2f165667c5ULL);

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

/* The same of a key in memory (its five 64-bit words as loaded). */
HLB_STEER_INLINE __u64 hlb_steer_ct_hash(const struct hlb_steer_flow_key *k, __u64 seed)
{
	__u64 w[5];

	__builtin_memcpy(w, k, sizeof(w));
	return hlb_steer_ct_hash_words(w[0], w[1], w[2], w[3], w[4], seed);
}

enum hlb_steer_drop {
	HLB_STEER_DROP_MALFORMED = 0, /* to a VIP, TCP header or packet truncated, bad */
	HLB_STEER_DROP_FRAGMENT, /* IP fragment to a VIP address */
	HLB_STEER_DROP_NO_BACKEND, /* every backend is down */
	HLB_STEER_DROP_TABLE, /* table inconsistent (a loader bug) */
	HLB_STEER_DROP_REDIRECT, /* the redirect helper failed */
	HLB_STEER_DROP_MAX
};

/*
 * The counters, summed over CPUs by the loader. hlb_stats holds the fields
 * before ct_lost (HLB_STEER_STATS_SIZE bytes), a size fixed for good: a hashlb
 * of another version reads a program this one loaded (an upgrade, a rollback),
 * and those from before hlb_stats2 copy exactly that many bytes a CPU into
 * their buffer (a larger value would overrun it). Counters added since are in
 * hlb_stats2 (struct hlb_steer_stats2), read by its value size: a program
 * without it (an older hashlb's) reads 0 there.
 */
struct hlb_steer_stats {
	__u64 packets; /* TCP packets to a VIP, forwarded */
	__u64 bytes; /* their frame bytes */
	__u64 new_flows; /* scheduled through the table */
	__u64 ct_hits; /* forwarded by their conntrack entry */
	__u64 ct_resched; /* conntrack entry's backend down or gone: rescheduled */
	__u64 ct_evicted; /* a new flow took a live way of its set (the set was full) */
	__u64 passed; /* handed to the stack: not ours (other host, port, non-TCP) */
	__u64 drops[HLB_STEER_DROP_MAX];
	/* hlb_stats2 from here on */
	/* A packet that is not a SYN found no conntrack entry for its flow: the
	 * entry was evicted while the flow lived (or the flow began before the
	 * program was attached). Scheduled again by the current table, which
	 * moves the flow if the table changed since it began. */
	__u64 ct_lost;
	/* A RST that found no conntrack entry of its own: forwarded by the
	 * table (in packets, bytes), no entry made; neither a new flow nor
	 * lost (docs/DESIGN-steering.md). */
	__u64 rst_untracked;
	/* A packet to a closed VIP (HLB_STEER_VIP_F_CLOSED) that no conntrack
	 * entry keeps: passed to the stack (in passed too). */
	__u64 closed_passed;
	/* A client's FIN or RST marked its flow's conntrack entry closing
	 * (HLB_STEER_CT_CLOSING): once a flow, a FIN retransmitted not again. */
	__u64 ct_closing;
};

/* hlb_stats2's value: new counters go at its end. */
struct hlb_steer_stats2 {
	__u64 ct_lost;
	__u64 rst_untracked;
	__u64 closed_passed;
	__u64 ct_closing;
};

/* hlb_tstats' value: one table's (a service's) share of hlb_stats' packets
 * and bytes. Counted by a program of several tables only; a program an
 * older hashlb loaded has no hlb_tstats. */
struct hlb_steer_tstats {
	__u64 packets;
	__u64 bytes;
};

/*
 * hlb_tstats2's value: one table's (a service's) share of the counters other
 * than packets and bytes, those counted where the packet's VIP, and so its
 * table, is known. Counted by a program of several tables only; a program an
 * older hashlb loaded has no hlb_tstats2 (hlb_tstats keeps its 16 bytes for
 * good: an older hashlb reads it into a buffer of that size). Not here: a
 * table's ct_hits, its packets less its new_flows and rst_untracked (each
 * packet forwarded is one of the three), so that the established path makes
 * no second lookup; passed, of which a table's are its closed_passed alone
 * (every other is passed before a VIP is found); and the drops for a packet
 * whose port was not read (malformed, fragment), whose slots stay 0. New
 * counters go at its end: it is read by its value size.
 */
struct hlb_steer_tstats2 {
	__u64 new_flows;
	__u64 ct_resched;
	__u64 ct_evicted;
	__u64 ct_lost;
	__u64 rst_untracked;
	__u64 closed_passed;
	__u64 ct_closing;
	__u64 drops[HLB_STEER_DROP_MAX];
};

/*
 * The size of hlb_tstats2's value as the first hashlb that had it made it (its 12 counters):
 * the least a found program's may be. A newer hashlb's struct may be larger, counters added
 * at its end, and it must still find and read an older hashlb's program of values this size
 * (the counters past them read 0): a reader's floor is this figure, never sizeof(struct
 * hlb_steer_tstats2), which grows with the struct and would refuse every older program.
 */
#define HLB_STEER_TSTATS2_SIZE_MIN 96

/* hlb_tnames' value: the name of the service whose table it is (hashlb run's, written as it
 * takes the table, or hashlb steer -c's as it publishes; "" if none said, as hashlb steer's
 * without -c, an --update's too), NUL-padded, without a NUL at HLB_STEER_TNAME_MAX bytes: a
 * service's name, at most that. */
#define HLB_STEER_TNAME_MAX 64

/*
 * A region of hlb_bslots, the backend slots conntrack entries name: tables [t_first, t_end)'s
 * slots [lo, hi) of each table, table t's slot i at base + (t - t_first) * (hi - lo) + (i - lo).
 * A program of several tables whose backends grew (hashlb_steer_grow()) keeps every slot where
 * its entries name it and appends a region for the new ones: the loader's list, in the
 * program's read-only data (bslot_regions, unused entries all zero: hi == lo), since the
 * program itself only follows the slot numbers the loader writes. None (all zero): table t's
 * slot i at t * backends_cap + i, the layout of before. Such a program's hlb_bslots is named
 * HLB_STEER_BSLOTS_REGIONS_NAME: a hashlb that knows no regions finds no hlb_bslots there and
 * refuses it as another version's, where it would have written table t's slots at
 * t * backends_cap, over another table's.
 */
struct hlb_steer_bregion {
	__u32 base, t_first, t_end, lo, hi;
};
#define HLB_STEER_BREGIONS_MAX 16
#define HLB_STEER_BSLOTS_REGIONS_NAME "hlb_bslots_r"
struct hlb_steer_tname {
	char name[HLB_STEER_TNAME_MAX];
};

#define HLB_STEER_STATS_SIZE __builtin_offsetof(struct hlb_steer_stats, ct_lost)

_Static_assert(sizeof(struct hlb_steer_vip) == 24, "vip layout");
_Static_assert(sizeof(struct hlb_steer_tstats2) >= HLB_STEER_TSTATS2_SIZE_MIN,
	       "hlb_tstats2 grows at its end, never shrinks");
_Static_assert(sizeof(struct hlb_steer_table) == 40, "table layout");
_Static_assert(sizeof(struct hlb_steer_backend) == 32, "backend layout");
/* The program copies the MACs as aligned words (bpf/steer.bpf.c, set_macs). */
_Static_assert(__builtin_offsetof(struct hlb_steer_backend, dst_mac) == 8, "dst_mac offset");
_Static_assert(__builtin_offsetof(struct hlb_steer_backend, src_mac) == 14, "src_mac offset");
_Static_assert(sizeof(struct hlb_steer_ring_point) == 16, "ring point layout");
_Static_assert(sizeof(struct hlb_steer_slots) == 8, "slots layout");
_Static_assert(sizeof(struct hlb_steer_flow_key) == 40, "flow key layout");
_Static_assert(sizeof(struct hlb_steer_ct_bucket) == 64, "ct bucket layout: one cache line");
_Static_assert((HLB_STEER_CT_WAYS * HLB_STEER_CT_EXT_BITS) <= 32, "ct ext bits fit");
_Static_assert(HLB_STEER_STATS_SIZE == (7 + HLB_STEER_DROP_MAX) * 8, "hlb_stats' layout: fixed");
_Static_assert(HLB_STEER_STATS_SIZE == 96, "hlb_stats' size: fixed (older hashlb read it so)");
_Static_assert(sizeof(struct hlb_steer_stats) ==
		       HLB_STEER_STATS_SIZE + sizeof(struct hlb_steer_stats2),
	       "stats: hlb_stats then hlb_stats2");

#endif
