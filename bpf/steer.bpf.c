// SPDX-License-Identifier: MIT
/*
 * hashlb kernel steering: XDP and tc programs that send TCP packets for a VIP
 * to the backend that hashlb's consistent-hash table names for the flow, by
 * L2 direct server return (only the Ethernet addresses are rewritten; the IP
 * packet is untouched and the backend answers the client directly).
 *
 * What is done with each packet (docs/DESIGN-steering.md has the why):
 *   - not IPv4/IPv6 (including VLAN-tagged), IPv4/IPv6 header truncated,
 *     not to a VIP address (IPv6 to an IPv4-mapped one included): passed to
 *     the stack;
 *   - IP fragment of TCP to a VIP address: dropped (no port to hash, and
 *     the first fragment alone would split the datagram across backends);
 *     of another protocol: passed, as when whole;
 *   - IPv6: hop-by-hop, destination options and routing headers with no
 *     segments left are walked (up to HLB_STEER_IPV6_EXT_MAX); a routing
 *     header with segments left, a hop-by-hop header not first, or more
 *     extension headers, are passed;
 *   - non-TCP, or TCP to a port that is no VIP: passed; but a path-MTU
 *     message (ICMP fragmentation needed, ICMPv6 packet too big) to a VIP
 *     address quoting a TCP segment from it (a backend's reply) goes by
 *     the flow's conntrack entry, unmarked, if its backend is kept (else
 *     passed): the backend's socket learns the path's MTU;
 *   - IPv4 total length below the header length (IHL): passed;
 *   - TCP to a VIP address with a truncated or bad header, its IP packet
 *     longer than the frame (the IPv4 total length or IPv6 payload length
 *     past the bytes present), or its header past the IP packet's end:
 *     dropped;
 *   - otherwise forwarded: conntrack entry if its backend is kept, else the
 *     active table half (new flow or rescheduled; a SYN whose entry names
 *     a backend that takes no new flow too); a RST that finds no entry of
 *     its own by the table, making none;
 *   - to a closed VIP (hashlb run stopping): forwarded by its conntrack
 *     entry only (not a SYN), else passed to the stack;
 *   - a client's FIN or RST forwarded by its conntrack entry marks the entry
 *     closing, a SYN so forwarded half-open (closing until the handshake's
 *     ACK goes by it: a stop's drain ends once only closing entries are
 *     left).
 *
 * Every map read here is an array, inlined by the verifier: the programs
 * make no kernel call except bpf_redirect (and in tc bpf_skb_pull_data, and
 * bpf_skb_load_bytes for IPv6 extension headers).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "hashlb/steer_shared.h"
#include "xxh64.h"

/* Per-half capacities (entries of one half), set by the loader before load:
 * constants for the verifier. */
const volatile __u32 backends_cap = 1;
const volatile __u32 slots_cap = 1;
const volatile __u32 points_cap = 1;
const volatile __u32 buckets_cap = 1;
/* Tables the maps hold (one a service steered on the interface): table <t>'s
 * half <h> is at (2t + h) * cap of each table array; hlb_bslots holds
 * tables_cap * backends_cap slots. A VIP names its table
 * (HLB_STEER_VIP_TABLE_SHIFT): 1 and table 0 is the layout of before. */
const volatile __u32 tables_cap = 1;
/* The loader's layout of hlb_bslots (struct hlb_steer_bregion), read by a loader that finds
 * the program: the program itself only follows the slots the loader writes. */
const volatile struct hlb_steer_bregion bslot_regions[HLB_STEER_BREGIONS_MAX];
/* Conntrack buckets - 1 (a power of two less one), set by the loader. */
const volatile __u32 ct_mask = 0;
/* The conntrack hash's seed (hlb_steer_ct_hash_words), random, set by the
 * loader: no client can compute which flows share a bucket or a tag. */
const volatile __u64 ct_seed = 0;
/* Benchmarks only: make every packet a new flow (its source address XORed
 * with a counter), so that BPF_PROG_TEST_RUN's repeat measures the new-flow
 * path warm. Zero in production: the verifier removes the code. */
const volatile __u32 bench_new_flows = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * HLB_STEER_VIP_SLOTS);
	__type(key, __u32);
	__type(value, struct hlb_steer_vip);
} hlb_vips SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} hlb_active SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2); /* 2 * tables_cap, set by the loader */
	__type(key, __u32);
	__type(value, struct hlb_steer_table);
} hlb_tables SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2); /* 2 * tables_cap * backends_cap, set by the loader */
	__type(key, __u32);
	__type(value, struct hlb_steer_backend);
} hlb_backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* tables_cap * backends_cap */
	__type(key, __u32);
	__type(value, struct hlb_steer_backend);
} hlb_bslots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct hlb_steer_slots);
} hlb_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct hlb_steer_ring_point);
} hlb_points SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} hlb_buckets SEC(".maps");

/* Mappable: its values start on a page, so every bucket is one cache line,
 * and the loader scans and clears it in place. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* buckets, set by the loader (--flows) */
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct hlb_steer_ct_bucket);
} hlb_ct SEC(".maps");

/* The counters before ct_lost: a size fixed for good (steer_shared.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, HLB_STEER_STATS_SIZE);
} hlb_stats SEC(".maps");

/* The counters added since: read only where they happen, off the
 * established path. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hlb_steer_stats2);
} hlb_stats2 SEC(".maps");

/* Each table's packets and bytes forwarded (a service's, of hashlb run's
 * services sharing the interface): tables_cap entries, set by the loader.
 * Counted only in a program of several tables: of one, they are hlb_stats'
 * packets and bytes (the verifier removes the code). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1); /* tables_cap, set by the loader */
	__type(key, __u32);
	__type(value, struct hlb_steer_tstats);
} hlb_tstats SEC(".maps");

/* Each table's other counters (steer_shared.h says which), as hlb_tstats:
 * counted only in a program of several tables, and off the established path
 * (a new flow, a drop, a pass, a FIN or RST). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1); /* tables_cap, set by the loader */
	__type(key, __u32);
	__type(value, struct hlb_steer_tstats2);
} hlb_tstats2 SEC(".maps");

/* Each table's service's name, for hashlb steer --stats without the config:
 * written and read by the loaders alone. Named in code the verifier removes
 * (names_held()), so that the program holds the map: a hashlb that finds the
 * program through its maps finds it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* tables_cap, set by the loader */
	__type(key, __u32);
	__type(value, struct hlb_steer_tname);
} hlb_tnames SEC(".maps");

/*
 * Never read by the programs: the loader updates it as a barrier. An update
 * of a map-in-map waits for every running BPF program to finish
 * (synchronize_rcu), so after it no program still reads the half that was
 * active before the last flip, and that half may be rewritten.
 */
struct hlb_sync_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct hlb_sync_inner);
} hlb_sync SEC(".maps");

enum verdict { V_PASS, V_DROP, V_FORWARD };

#define IPV6_EXTHDR_HOP 0
#define IPV6_EXTHDR_ROUTING 43
#define IPV6_EXTHDR_FRAGMENT 44
#define IPV6_EXTHDR_DSTOPTS 60

/* Whether IPv6 next header <nh> is one that steer() walks. */
static __always_inline int ipv6_walked(__u8 nh)
{
	return nh == IPV6_EXTHDR_HOP || nh == IPV6_EXTHDR_ROUTING || nh == IPV6_EXTHDR_DSTOPTS;
}

static __always_inline struct hlb_steer_stats *stats_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&hlb_stats, &zero);
}

/* The counters of hlb_stats2, off the established path. */
static __always_inline struct hlb_steer_stats2 *stats2_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&hlb_stats2, &zero);
}

static __always_inline enum verdict drop(struct hlb_steer_stats *st, int reason)
{
	if (st && reason >= 0 && reason < HLB_STEER_DROP_MAX)
		st->drops[reason]++;
	return V_DROP;
}

/* Table <tn>'s other counters (hlb_tstats2), NULL in a program of one table
 * (the verifier removes the code: its counters are the program's). */
static __always_inline struct hlb_steer_tstats2 *tstats2_get(__u32 tn)
{
	if (tables_cap < 2)
		return NULL;
	return bpf_map_lookup_elem(&hlb_tstats2, &tn);
}

/* drop() of a packet of table <tn>'s VIP: counted in the table's too. */
static __always_inline enum verdict drop_table(struct hlb_steer_stats *st, __u32 tn, int reason)
{
	struct hlb_steer_tstats2 *ts = tstats2_get(tn);

	if (ts && reason >= 0 && reason < HLB_STEER_DROP_MAX)
		ts->drops[reason]++;
	return drop(st, reason);
}

static __always_inline enum verdict pass(struct hlb_steer_stats *st)
{
	if (st)
		st->passed++;
	return V_PASS;
}

/* hlb_tnames named in the program's code (its map kept with the program), never
 * read: tables_cap is at least 1, so the verifier removes the lookup. */
static __always_inline void names_held(void)
{
	__u32 zero = 0;

	if (tables_cap == 0)
		bpf_map_lookup_elem(&hlb_tnames, &zero);
}

/* The VIP half in use (bit 1 of hlb_active). */
static __always_inline __u32 vip_half(__u32 active)
{
	return (active >> 1) & 1;
}

static __always_inline int vip_eq(const struct hlb_steer_vip *v, __u64 a0, __u64 a1, __be16 port)
{
	const __u64 *va = (const __u64 *)v->addr;

	return (v->flags & HLB_STEER_VIP_F_VALID) && v->port == port && va[0] == a0 && va[1] == a1;
}

/* The index in hlb_vips (half <vh>) of (<a0><a1>, <port>) among the slots
 * after its home <home>, the first <n> - 1 of them (<n>: the home's probe
 * count), or -1. */
static __always_inline int vip_probe(__u32 vh, __u32 home, __u32 n, __u64 a0, __u64 a1, __be16 port)
{
	struct hlb_steer_vip *v;
	__u32 k;
	int i;

#pragma unroll
	for (i = 1; i < HLB_STEER_VIP_PROBES; i++) {
		__u32 idx = (home + i) & (HLB_STEER_VIP_SLOTS - 1);

		if ((__u32)i >= n)
			break;
		k = vh * HLB_STEER_VIP_SLOTS + idx;
		v = bpf_map_lookup_elem(&hlb_vips, &k);
		if (v && vip_eq(v, a0, a1, port))
			return (int)idx;
	}
	return -1;
}

/* The index in hlb_vips (half <vh>) of (<a0><a1>, <port>), or -1. */
static __always_inline int vip_find(__u32 vh, __u64 a0, __u64 a1, __be16 port)
{
	__u32 home = hlb_steer_vip_hash(a0, a1, port), k = vh * HLB_STEER_VIP_SLOTS + home;
	struct hlb_steer_vip *v = bpf_map_lookup_elem(&hlb_vips, &k);
	__u32 n;

	if (!v)
		return -1;
	n = v->probes;
	if (n && vip_eq(v, a0, a1, port))
		return (int)home;
	return vip_probe(vh, home, n, a0, a1, port);
}

/* Whether slot <idx> of hlb_vips (half <vh>), one of the <n> - 1 after home
 * slot <home>, holds (<a0><a1>, <port>): one lookup, where vip_probe()
 * makes up to HLB_STEER_VIP_PROBES - 1. */
static __always_inline int vip_at(__u32 vh, __u32 home, __u32 n, __u32 idx, __u64 a0, __u64 a1,
				  __be16 port)
{
	__u32 d = (idx - home) & (HLB_STEER_VIP_SLOTS - 1), k;
	struct hlb_steer_vip *v;

	if (d == 0 || d >= n)
		return 0;
	k = vh * HLB_STEER_VIP_SLOTS + idx;
	v = bpf_map_lookup_elem(&hlb_vips, &k);
	return v && vip_eq(v, a0, a1, port);
}

/* The flags of slot <idx> of hlb_vips (half <vh>), 0 if none: whether it is
 * closed (HLB_STEER_VIP_F_CLOSED: hashlb run stopping), and its table.
 * Asked off the established path only, and by a SYN. */
static __always_inline __u32 vip_flags(__u32 vh, __u32 idx)
{
	__u32 k = vh * HLB_STEER_VIP_SLOTS + (idx & (HLB_STEER_VIP_SLOTS - 1));
	struct hlb_steer_vip *v = bpf_map_lookup_elem(&hlb_vips, &k);

	return v ? v->flags : 0;
}

/* vip_flags() for the new-flow path, which already holds <hv>, the entry
 * at the packet's home slot <home>: a VIP at its home (most) is read there,
 * one map lookup less per new flow; one stored past it is looked up. */
static __always_inline __u32 vip_flags_near(const struct hlb_steer_vip *hv, __u32 home, __u32 vh,
					    __u32 idx)
{
	return idx == home ? hv->flags : vip_flags(vh, idx);
}

/* The table of VIP <idx> (hlb_vips half <vh>), for its counters
 * (hlb_tstats): read where the packet's home entry <hv> is held (a VIP at
 * its home, most: no lookup), and in a program of several tables only. */
static __always_inline __u32 vip_table_near(const struct hlb_steer_vip *hv, __u32 home, __u32 vh,
					    __u32 idx)
{
	if (tables_cap < 2)
		return 0;
	return (vip_flags_near(hv, home, vh, idx) >> HLB_STEER_VIP_TABLE_SHIFT) & 0xff;
}

/* Whether destination <d0><d1> is a VIP address at all (the port-0 marker). */
static __always_inline int is_vip_addr(__u64 d0, __u64 d1)
{
	__u32 zero = 0, *active = bpf_map_lookup_elem(&hlb_active, &zero);

	return active && vip_find(vip_half(*active), d0, d1, 0) >= 0;
}

/*
 * The flow key is built and read as five 64-bit words (w[0..1] source,
 * w[2..3] destination, w[4] ports and padding), in registers: byte stores
 * read back as a word would stall on store forwarding.
 */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the flow key words and the XXH64 lanes are built for little-endian BPF"
#endif
/* The second half of an IPv4-mapped address: 00 00 ff ff a b c d. */
#define V4_MAPPED_HI(a) (0xffff0000ULL | (__u64)(a) << 32)

/* Table <t>'s hash of the canonical tuple (source address cut to its
 * hash_prefix, source port, destination address, destination port) over its
 * first key_len bytes, from the flow key words. */
static __always_inline __u64 tuple_hash(const __u64 *kw, const struct hlb_steer_table *t)
{
	__u64 sport = kw[4] & 0xffff, dport = (kw[4] >> 16) & 0xffff;
	__u64 s0 = kw[0], s1 = kw[1], seed = t->seed;
	__u32 key_len = t->key_len;

	if (t->v4_prefix | t->v6_prefix)
		hlb_steer_src_mask(&s0, &s1, t->v4_prefix, t->v6_prefix);
	if (key_len == 16)
		return hlb_xxh64_16w(s0, s1, seed);
	if (key_len == 18)
		return hlb_xxh64_18w(s0, s1, (__u8)sport, (__u8)(sport >> 8), seed);
	return hlb_xxh64_36w(s0, s1, sport | kw[2] << 16, kw[2] >> 48 | kw[3] << 16,
			     (__u32)(kw[3] >> 48 | dport << 16), seed);
}

/* The backend index for <hash> in table half <half> (2t + h), HLB_STEER_BACKEND_NONE
 * if all are down, or -1 if the table is inconsistent. */
static __always_inline int table_lookup(const struct hlb_steer_table *t, __u32 half, __u64 hash)
{
	if (t->scheme == HLB_STEER_SCHEME_MAGLEV) {
		__u32 slot = (__u32)(((hash >> 32) * (__u64)t->m) >> 32);
		__u32 k = half * slots_cap + slot / HLB_STEER_SLOTS_PER_VALUE;
		struct hlb_steer_slots *s = bpf_map_lookup_elem(&hlb_slots, &k);

		if (!s)
			return -1;
		return s->b[slot % HLB_STEER_SLOTS_PER_VALUE];
	}

	__u32 bits = t->bucket_bits, n = t->n_points, idx, k;
	__u32 b = bits ? (__u32)(hash >> (64 - (bits & 63))) : 0;
	__u32 *first;
	int i;

	if (n == 0)
		return HLB_STEER_BACKEND_NONE;
	k = half * buckets_cap + b;
	first = bpf_map_lookup_elem(&hlb_buckets, &k);
	if (!first)
		return -1;
	idx = *first;
	if (idx & HLB_STEER_RING_DIRECT)
		return idx & 0xffff; /* no point in the bucket: its next point's owner */
	for (i = 0; i <= HLB_STEER_RING_SCAN_MAX; i++) {
		struct hlb_steer_ring_point *p;

		if (idx >= n) {
			idx = 0;
			break;
		}
		k = half * points_cap + idx;
		p = bpf_map_lookup_elem(&hlb_points, &k);
		if (!p)
			return -1;
		if (p->pos >= hash)
			return p->owner;
		idx++;
	}
	if (idx != 0)
		return -1; /* more than max_scan steps: the loader checks this */
	k = half * points_cap;
	struct hlb_steer_ring_point *p0 = bpf_map_lookup_elem(&hlb_points, &k);

	return p0 ? (int)p0->owner : -1;
}

/* 12 bytes in four word moves (a byte-wise copy is 24 instructions): the
 * MACs sit at offsets 8 and 14 of the 8-aligned backend value, so each load
 * is aligned; packet stores need not be. */
static __always_inline void set_macs(struct ethhdr *eth, const struct hlb_steer_backend *be)
{
	__u8 *e = (__u8 *)eth;

	*(__u32 *)e = *(const __u32 *)be->dst_mac;
	*(__u16 *)(e + 4) = *(const __u16 *)(be->dst_mac + 4);
	*(__u16 *)(e + 6) = *(const __u16 *)be->src_mac;
	*(__u32 *)(e + 8) = *(const __u32 *)(be->src_mac + 2);
}

/* The backend conntrack entry <e> names, if the slot still holds the same
 * backend (incarnation) and it keeps its flows, else NULL. */
static __always_inline struct hlb_steer_backend *kept_backend(__u64 e)
{
	__u32 slot = (__u32)e & 0xffff;
	struct hlb_steer_backend *be = bpf_map_lookup_elem(&hlb_bslots, &slot);

	if (be && be->incarnation == ((e >> HLB_STEER_CT_INC_SHIFT) & 0xff) &&
	    (be->flags & HLB_STEER_BACKEND_F_KEEP))
		return be;
	return NULL;
}

/* An insert's "age" of an empty way: older than any entry's (16 bits, and a head). */
#define CT_WAY_EMPTY 0x20000u

#define TCP_F_FIN 0x01
#define TCP_F_SYN 0x02
#define TCP_F_RST 0x04
#define TCP_F_ACK 0x10

/* The TCP header's flags byte (CWR ... FIN), one load for the three tests. */
static __always_inline __u8 tcp_flags(const struct tcphdr *tcp)
{
	return ((const __u8 *)tcp)[13];
}

/* An entry of table <tn>'s VIP marked closing, counted (ct_closing). */
static __always_inline void ct_closing_count(__u32 tn)
{
	struct hlb_steer_stats2 *st2 = stats2_get();
	struct hlb_steer_tstats2 *ts = tstats2_get(tn);

	if (st2)
		st2->ct_closing++;
	if (ts)
		ts->ct_closing++;
}

/* Entry <e> of the flow of hash <h> as a packet with TCP flags <fl> leaves it: ct_mark()'s
 * rule, for a kept entry and a new one alike. */
static __always_inline __u64 ct_marked(__u64 e, __u64 h, __u8 fl)
{
	/* bit 33 as the hash has it: not half-open; else half-open */
	__u64 open = (e & ~(HLB_STEER_CT_CLOSING | HLB_STEER_CT_HALF_OPEN)) |
		     (h & HLB_STEER_CT_HALF_OPEN);

	if (fl & (TCP_F_FIN | TCP_F_RST))
		return open | HLB_STEER_CT_CLOSING;
	if (fl & TCP_F_SYN)
		return (open ^ HLB_STEER_CT_HALF_OPEN) | HLB_STEER_CT_CLOSING;
	return open;
}

/*
 * Way <way> of <b>, entry <e> of the flow of hash <h>, forwarded a packet with
 * TCP flags <fl>, one of them FIN, SYN or RST, or none of them with <e>
 * half-open: the client's FIN or RST marks it closing, a SYN (a new connection
 * on the tuple, or one retransmitted) half-open and closing, and its first
 * packet with none of the three (the handshake's ACK) open
 * (HLB_STEER_CT_CLOSING, hlb_steer_ct_half_open()). Like the inserts, a plain
 * store: a way another CPU gave to another flow meanwhile would get this entry
 * back (that flow counted once in ct_lost), a window of a few instructions
 * once a flow.
 */
static __always_inline void ct_mark(struct hlb_steer_ct_bucket *b, __u32 way, __u64 e, __u64 h,
				    __u8 fl, __u32 tn)
{
	__u64 m = ct_marked(e, h, fl);

	if (m == e)
		return;
	*(volatile __u64 *)&b->way[way] = m;
	if ((m & HLB_STEER_CT_CLOSING) && !hlb_steer_ct_half_open(m, h))
		ct_closing_count(tn);
}

/* Way <way> of <b>, entry <e> of the flow of hash <h> (of table <tn>'s VIP),
 * used by a packet forwarded by it (<fl> its TCP flags) at tick <now>: its time, written only
 * when it changed (once a tick, not once a packet, so the line stays shared),
 * and its marks (ct_mark()) if the packet has FIN, SYN or RST or the entry is
 * half-open: on an established flow's packet, one test of <e> and <h> more
 * (registers) than before half-open. */
static __always_inline void ct_used(struct hlb_steer_ct_bucket *b, __u32 way, __u64 e, __u64 h,
				    __u32 now, __u8 fl, __u32 tn)
{
	if (b->seen[way] != now)
		b->seen[way] = now;
	if ((fl & (TCP_F_FIN | TCP_F_SYN | TCP_F_RST)) || hlb_steer_ct_half_open(e, h))
		ct_mark(b, way, e, h, fl, tn);
}

/* The packet, counted (in table <tn>'s too), to backend <be>: what every
 * forwarded packet ends with. */
static __always_inline enum verdict forward(struct hlb_steer_stats *st, __u32 tn,
					    struct ethhdr *eth, const struct hlb_steer_backend *be,
					    __u64 len, __u32 *ret_ifindex)
{
	if (st) {
		st->packets++;
		st->bytes += len;
	}
	/* a constant for the verifier: no lookup in a program of one table */
	if (tables_cap > 1) {
		struct hlb_steer_tstats *ts = bpf_map_lookup_elem(&hlb_tstats, &tn);

		if (ts) {
			ts->packets++;
			ts->bytes += len;
		}
	}
	set_macs(eth, be);
	*ret_ifindex = be->ifindex;
	return V_FORWARD;
}

/* An established flow's packet, to the backend its conntrack entry names. */
static __always_inline enum verdict forward_kept(struct hlb_steer_stats *st, __u32 tn,
						 struct ethhdr *eth,
						 const struct hlb_steer_backend *be, __u64 len,
						 __u32 *ret_ifindex)
{
	if (st)
		st->ct_hits++;
	return forward(st, tn, eth, be, len, ret_ifindex);
}

/*
 * Whether the ICMP message at <icmp> (ICMPv6 with <v6>), in the IP packet
 * ending at offset <ip_end> of the frame at <data>, is a path-MTU message
 * (fragmentation needed; packet too big) quoting a TCP segment whose source
 * is the packet's destination <kw>[2..3]: a backend's reply from the VIP, on
 * a path that could not carry it. Then <kw> is the key of the flow's client
 * side (the quote's destination its source, the ports swapped), for the
 * flow's conntrack entry: the backend's stack must learn the path's MTU.
 * The quote must hold 8 bytes of the TCP header, as RFC 792 guarantees: the
 * backend's stack refuses a shorter one (it reads the sequence number too,
 * to check the message against the socket's window), so it is not sent one.
 */
static __always_inline int pmtu_quote(void *data, __u8 *icmp, void *data_end, __u64 ip_end, int v6,
				      __u64 *kw)
{
	__u32 *ports, p;

	if (v6) {
		struct ipv6hdr *in6 = (void *)(icmp + 8);
		const __u64 *a = (const __u64 *)&in6->saddr;

		ports = (void *)(in6 + 1);
		if ((void *)(ports + 2) > data_end || icmp[0] != 2 || icmp[1] != 0 ||
		    in6->version != 6 || in6->nexthdr != IPPROTO_TCP || a[0] != kw[2] ||
		    a[1] != kw[3])
			return 0;
		kw[0] = a[2];
		kw[1] = a[3];
	} else {
		struct iphdr *in = (void *)(icmp + 8);

		/* The quote's first fragment, or whole: its ports are there. */
		if ((void *)(in + 1) > data_end || icmp[0] != 3 || icmp[1] != 4 ||
		    in->version != 4 || in->ihl < 5 || in->protocol != IPPROTO_TCP ||
		    (in->frag_off & bpf_htons(0x1fff)) || V4_MAPPED_HI(in->saddr) != kw[3])
			return 0;
		ports = (void *)in + in->ihl * 4;
		if ((void *)(ports + 2) > data_end)
			return 0;
		kw[0] = 0;
		kw[1] = V4_MAPPED_HI(in->daddr);
	}
	if ((__u64)((void *)(ports + 2) - data) > ip_end)
		return 0; /* the quote past the IP packet's length */
	p = *ports;
	kw[4] = p >> 16 | (p & 0xffff) << 16;
	return 1;
}

/*
 * Parse, match, schedule and rewrite the frame at <data> (<len> bytes in
 * all: in tc, more than the linear part <data>..<data_end>). <gso>: a GRO
 * packet (tc only), whose IP length field may be 0 past 64 KiB (BIG TCP):
 * then the frame's length stands for it. On V_FORWARD, *ret_ifindex is the
 * egress interface (0 = the ingress one).
 */
static __always_inline enum verdict steer(void *data, void *data_end, __u64 len, int gso,
					  __u32 *ret_ifindex)
{
	struct hlb_steer_stats *st = stats_get();
	struct ethhdr *eth = data;

	names_held();
	/* The flow key's words: source, destination, ports (+ zero pad). */
	__u64 kw[5];
	__u8 proto, fl = 0; /* fl: the TCP flags, none for a path-MTU message */
	int frag = 0, frag_tcp = 0; /* a fragment; of TCP, or maybe (IPv6) */
	int v6 = 0, pmtu = 0; /* pmtu: a path-MTU message about a flow */
	void *l4;
	/* Offsets in the frame: the L4 header, the IP packet's end (by its
	 * length field, which may be short of the frame: Ethernet padding). */
	__u64 l4_off, ip_end;

	if ((void *)(eth + 1) > data_end)
		return pass(st);

	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		__u32 ihl, tot;

		if ((void *)(ip + 1) > data_end)
			return pass(st);
		ihl = ip->ihl * 4;
		if (ip->version != 4 || ihl < sizeof(*ip))
			return pass(st);
		if ((void *)ip + ihl > data_end)
			return pass(st);
		tot = bpf_ntohs(ip->tot_len);
		if (tot == 0 && gso)
			tot = len - sizeof(*eth);
		if (tot < ihl)
			return pass(st); /* a bad header, like IHL < 5 */
		ip_end = sizeof(*eth) + tot;
		kw[0] = 0;
		kw[1] = V4_MAPPED_HI(ip->saddr);
		kw[2] = 0;
		kw[3] = V4_MAPPED_HI(ip->daddr);
		proto = ip->protocol;
		/* MF set or a non-zero offset: a fragment. */
		frag = (ip->frag_off & bpf_htons(0x3fff)) != 0;
		l4 = (void *)ip + ihl;
		l4_off = sizeof(*eth) + ihl;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		int i;

		if ((void *)(ip6 + 1) > data_end)
			return pass(st);
		if (ip6->version != 6)
			return pass(st);
		v6 = 1;
		const __u64 *a = (const __u64 *)&ip6->saddr;

		kw[0] = a[0];
		kw[1] = a[1];
		kw[2] = a[2];
		kw[3] = a[3];
		/* An IPv4-mapped destination (::ffff:a.b.c.d) is no IPv4 VIP,
		 * though the VIP table keys IPv4 addresses in that form. */
		if (kw[2] == 0 && (__u32)kw[3] == 0xffff0000)
			return pass(st);
		proto = ip6->nexthdr;
		l4 = ip6 + 1;
		l4_off = sizeof(*eth) + sizeof(*ip6);
		ip_end = l4_off + bpf_ntohs(ip6->payload_len);
		if (ip_end == l4_off && gso)
			ip_end = len;
#pragma unroll
		for (i = 0; i < HLB_STEER_IPV6_EXT_MAX; i++) {
			__u8 *ext = l4;

			if (proto == IPV6_EXTHDR_FRAGMENT) {
				frag = 1;
				frag_tcp = 1; /* cut short: unknown, maybe TCP */
				/* The first header of the fragmented part, named
				 * in every fragment: TCP, or a header TCP may
				 * follow (options, routing, AH, a fragment). */
				if ((void *)(ext + 8) <= data_end) {
					proto = ext[0];
					frag_tcp = proto == IPPROTO_TCP || ipv6_walked(proto) ||
						   proto == IPPROTO_AH ||
						   proto == IPV6_EXTHDR_FRAGMENT;
				}
				break;
			}
			if (!ipv6_walked(proto))
				break;
			/* Hop-by-hop options only right after the IPv6 header
			 * (RFC 8200): the stack refuses one later (a parameter
			 * problem), so no backend is sent it. */
			if (i > 0 && proto == IPV6_EXTHDR_HOP)
				return pass(st);
			if ((void *)(ext + 8) > data_end)
				return pass(st);
			/* Segments left: the address is not the final one. */
			if (proto == IPV6_EXTHDR_ROUTING && ext[3] != 0)
				return pass(st);
			proto = ext[0];
			l4 = ext + (ext[1] + 1) * 8;
			l4_off += (ext[1] + 1) * 8;
		}
		if (!frag && ipv6_walked(proto))
			return pass(st); /* more extension headers than we walk */
	} else {
		return pass(st);
	}

	/* A fragment that is, or may be, TCP to a VIP address is dropped; one
	 * that is not TCP goes to the stack, as it would whole. */
	if (frag) {
		if ((proto == IPPROTO_TCP || frag_tcp) && is_vip_addr(kw[2], kw[3]))
			return drop(st, HLB_STEER_DROP_FRAGMENT);
		return pass(st);
	}
	if (proto == (v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP)) {
		/* A path-MTU message about a flow goes by the flow's entry
		 * alone (below); any other ICMP is the LB stack's. */
		if (ip_end > len || !pmtu_quote(data, l4, data_end, ip_end, v6, kw))
			return pass(st);
		pmtu = 1;
	} else if (proto != IPPROTO_TCP) {
		return pass(st);
	} else {
		/* A short or bad TCP header, or a packet cut short (its IP
		 * length past the frame: a truncated frame's TCP header is
		 * usually cut too), is dropped if it is ours, passed if not:
		 * only then is the VIP map asked (the port may be cut off
		 * too). */
		struct tcphdr *tcp = l4;

		if ((void *)(tcp + 1) > data_end || tcp->doff < 5 ||
		    (void *)tcp + tcp->doff * 4 > data_end || ip_end > len ||
		    l4_off + tcp->doff * 4 > ip_end)
			return is_vip_addr(kw[2], kw[3]) ? drop(st, HLB_STEER_DROP_MALFORMED)
							 : pass(st);

		kw[4] = *(__u32 *)tcp; /* sport, dport as in the header; pad 0 */
		fl = tcp_flags(tcp);
		if (bench_new_flows && st)
			kw[1] ^= V4_MAPPED_HI((__u32)st->packets) & ~V4_MAPPED_HI(0);
	}

	/*
	 * The VIP, then conntrack (docs/DESIGN-steering.md): the flow's bucket,
	 * the way with its tag and its VIP's index. An entry of another VIP
	 * never matches, whatever its tag: a flow of one VIP whose bucket and
	 * tag another VIP's flow shares by chance takes a way of its own, and
	 * the flows of a VIP no longer served are passed without the loader
	 * touching them (its index is nobody's, or another VIP's).
	 *
	 * The home slot first: nothing there (no key of that home) is no VIP,
	 * the key there is the VIP. A VIP stored past its home (keys of one
	 * home in a row, up to HLB_STEER_VIP_PROBES) is not probed for on
	 * every packet: an established flow's entry names its slot, which
	 * one lookup confirms (vip_at), where the probe cost up to 7 more
	 * (docs/steering.md, figures). Only a packet whose tag no way holds
	 * probes: a new flow, or one that is no VIP's.
	 */
	__u32 zero = 0, *activep = bpf_map_lookup_elem(&hlb_active, &zero);
	__be16 dport = (__be16)(kw[4] >> 16);
	const __u64 *dst = &kw[2];
	__u32 active, vh, w, way = HLB_STEER_CT_WAYS, home, probes, k;
	int resched = 0, vip;
	struct hlb_steer_vip *hv;
	__u64 e = 0, vmix;

	if (!activep)
		return drop(st, HLB_STEER_DROP_TABLE);
	active = *activep;
	vh = vip_half(active);
	if (dport == 0)
		return pass(st);
	vmix = hlb_steer_vip_mix(dst[0], dst[1], dport);
	home = (__u32)(vmix >> 56);
	k = vh * HLB_STEER_VIP_SLOTS + home;
	hv = bpf_map_lookup_elem(&hlb_vips, &k);
	probes = hv ? hv->probes : 0;
	if (!probes)
		return pass(st);
	vip = vip_eq(hv, dst[0], dst[1], dport) ? (int)home : -1;
	/* Not the key at home, and none past it has this packet's bit: no
	 * VIP, passed before the conntrack hash and lookup it paid before
	 * (a bucket that is no flow's, in a table of megabytes: a cache
	 * miss), and the probe. */
	if (vip < 0 && (probes < 2 || (hv->absent >> hlb_steer_vip_bit(vmix)) & 1))
		return pass(st);

	__u64 h = hlb_steer_ct_hash_words(kw[0], kw[1], kw[2], kw[3], kw[4], ct_seed);
	__u32 bi = (__u32)h & ct_mask, tag = (__u32)(h >> HLB_STEER_CT_TAG_SHIFT);
	__u32 ext = (__u32)(h >> HLB_STEER_CT_EXT_SHIFT) & HLB_STEER_CT_EXT_MASK;
	__u32 now = (__u32)(bpf_jiffies64() >> HLB_STEER_CT_TICK_SHIFT) & 0xffff;
	struct hlb_steer_ct_bucket *b = bpf_map_lookup_elem(&hlb_ct, &bi);
	struct hlb_steer_backend *be;

	if (!b)
		return drop(st, HLB_STEER_DROP_TABLE);
#pragma unroll
	for (w = 0; w < HLB_STEER_CT_WAYS; w++) {
		__u32 ev;

		e = b->way[w];
		if (!e || (__u32)(e >> HLB_STEER_CT_TAG_SHIFT) != tag)
			continue;
		ev = (__u32)(e >> HLB_STEER_CT_VIP_SHIFT) & 0xff;
		if (vip >= 0 ? ev == (__u32)vip
			     : vip_at(vh, home, probes, ev, dst[0], dst[1], dport)) {
			vip = (int)ev;
			way = w;
			break;
		}
	}
	if (vip < 0) {
		vip = vip_probe(vh, home, probes, dst[0], dst[1], dport);
		if (vip < 0)
			return pass(st);
	}
	if (way < HLB_STEER_CT_WAYS) {
		be = kept_backend(e);
		/* A SYN (no ACK) opens a connection: one whose tuple's entry
		 * names a backend that takes no new flow (draining, maint,
		 * weight 0: a client reused a source port) is a new flow,
		 * scheduled by the table into this way. Unless the hash's ext
		 * bits differ: then the tag matched by chance, the entry is a
		 * live flow's, and the SYN follows it like its ACKs will. A
		 * closed VIP's SYN never follows an entry (vip_flags()). */
		if (be &&
		    !((fl & (TCP_F_SYN | TCP_F_ACK)) == TCP_F_SYN &&
		      (((be->flags & HLB_STEER_BACKEND_F_OUT) &&
			((b->ext >> (way * HLB_STEER_CT_EXT_BITS)) & HLB_STEER_CT_EXT_MASK) ==
				ext) ||
		       (vip_flags_near(hv, home, vh, (__u32)vip) & HLB_STEER_VIP_F_CLOSED)))) {
			__u32 kt = vip_table_near(hv, home, vh, (__u32)vip);

			/* A path-MTU message neither marks nor ages it. */
			if (!pmtu)
				ct_used(b, way, e, h, now, fl, kt);
			return forward_kept(st, kt, eth, be, len, ret_ifindex);
		}
		resched = !be; /* its backend down or gone */
	}
	/* A path-MTU message whose flow has no entry, or whose backend is not
	 * kept: no backend is known to have sent the reply it quotes. */
	if (pmtu)
		return pass(st);
	/* Closed (hashlb run stopping): nothing new is steered, whatever the
	 * table; the stack refuses it, as the daemon's closed listener does.
	 * The same entry names the VIP's table and its half: no other lookup
	 * (and none at all for a VIP at its home slot: <hv> is its entry). */
	__u32 vf = vip_flags_near(hv, home, vh, (__u32)vip);

	/* Table <tn>'s half in force: hlb_active's bit 0, unless the VIP's
	 * entry says the other (each table flips alone, with the VIP half). */
	__u32 tn = (vf >> HLB_STEER_VIP_TABLE_SHIFT) & 0xff;
	struct hlb_steer_tstats2 *ts;

	if (vf & HLB_STEER_VIP_F_CLOSED) {
		struct hlb_steer_stats2 *st2 = stats2_get();

		if (st2)
			st2->closed_passed++;
		ts = tstats2_get(tn);
		if (ts)
			ts->closed_passed++;
		return pass(st);
	}

	__u32 half = (active ^ (vf / HLB_STEER_VIP_F_HALF)) & 1;
	struct hlb_steer_table *t;
	int idx;

	if (tn >= tables_cap)
		return drop(st, HLB_STEER_DROP_TABLE);
	half += 2 * tn;

	t = bpf_map_lookup_elem(&hlb_tables, &half);
	if (!t)
		return drop_table(st, tn, HLB_STEER_DROP_TABLE);
	idx = table_lookup(t, half, tuple_hash(kw, t));
	if (idx < 0)
		return drop_table(st, tn, HLB_STEER_DROP_TABLE);
	if (idx == HLB_STEER_BACKEND_NONE)
		return drop_table(st, tn, HLB_STEER_DROP_NO_BACKEND);
	if ((__u32)idx >= backends_cap)
		return drop_table(st, tn, HLB_STEER_DROP_TABLE);
	__u32 bk = half * backends_cap + idx;

	be = bpf_map_lookup_elem(&hlb_backends, &bk);
	if (!be)
		return drop_table(st, tn, HLB_STEER_DROP_TABLE);

	/*
	 * Its entry names the backend the table picks, slot and incarnation,
	 * and only the slot says otherwise: the wait after a flip, before the
	 * loader writes the slots of the table now in force (a newcomer in
	 * the slot of a backend it drops, a backend back in the table). The
	 * flow is where its entry says, a hit, as once the slot is written.
	 * Before, each of its packets until then counted as a new flow again
	 * and as rescheduled, though it never moved.
	 */
	if (resched && way < HLB_STEER_CT_WAYS &&
	    ((__u32)e & 0xffffff) ==
		    ((__u32)be->incarnation << HLB_STEER_CT_INC_SHIFT | be->slot)) {
		ct_used(b, way, e, h, now, fl, tn);
		return forward_kept(st, tn, eth, be, len, ret_ifindex);
	}

	/*
	 * A RST with no entry of its own ends a flow that conntrack does not
	 * hold (evicted, begun before the program, or none at all: a stray
	 * RST answering a backend's retransmitted FIN). Steered by the table,
	 * but no entry made: it would only take a live flow's way, since no
	 * packet of the flow follows. Not a new flow, nor lost: rst_untracked.
	 */
	if ((fl & TCP_F_RST) && !resched) {
		struct hlb_steer_stats2 *st2 = stats2_get();

		if (st2)
			st2->rst_untracked++;
		ts = tstats2_get(tn);
		if (ts)
			ts->rst_untracked++;
		return forward(st, tn, eth, be, len, ret_ifindex);
	}

	/*
	 * The way: the one with this tag (a reschedule, or a tag shared with
	 * another flow of the set), else an empty one, else the one seen
	 * longest ago (ages wrap at 16 bits: the loader clamps those idle
	 * longer than HASHLB_STEER_CT_AGE_MAX, hashlb_steer_ct_age(), so that
	 * none idle for a whole wrap looks young), an entry marked closing
	 * (half-open: a SYN alone, or its client's FIN or RST gone by) aged
	 * HLB_STEER_CT_CLOSING_HEAD ticks more: a SYN flood's entries go before
	 * the busy flows of their set, not after.
	 */
	int evicted = 0;

	if (way >= HLB_STEER_CT_WAYS) {
		__u32 oldest = 0, age;

		way = 0;
#pragma unroll
		for (w = 0; w < HLB_STEER_CT_WAYS; w++) {
			__u64 we = b->way[w];

			if (we == 0) {
				way = w;
				oldest = CT_WAY_EMPTY;
				break;
			}
			age = (now - b->seen[w]) & 0xffff;
			if (we & HLB_STEER_CT_CLOSING)
				age += HLB_STEER_CT_CLOSING_HEAD;
			if (w == 0 || age > oldest) {
				oldest = age;
				way = w;
			}
		}
		evicted = oldest != CT_WAY_EMPTY;
	}
	if (way < HLB_STEER_CT_WAYS) {
		/* One aligned 64-bit store: readers see the old entry or this. */
		__u32 sh = way * HLB_STEER_CT_EXT_BITS;
		/* A FIN or RST that makes the entry (a flow rescheduled or
		 * evicted as it closes) makes it closing, a SYN half-open,
		 * marked as ct_mark() marks a kept entry (bit 33 the hash's, as
		 * an older program's tag has it, where open): a stop's drain
		 * need not wait for it. */
		__u64 ne = ct_marked(hlb_steer_ct_entry(tag, (__u32)vip, be->incarnation, be->slot),
				     h, fl);

		if (fl & (TCP_F_FIN | TCP_F_RST))
			ct_closing_count(tn);
		*(volatile __u64 *)&b->way[way] = ne;
		b->seen[way] = now;
		/* Not atomic with the entry: two CPUs inserting into one set at
		 * once may leave a way's ext wrong, and a reused tuple's SYN
		 * then goes by its entry, as before ext was kept. */
		b->ext = (b->ext & ~(HLB_STEER_CT_EXT_MASK << sh)) | ext << sh;
	}
	if (st) {
		st->new_flows++;
		st->ct_resched += resched;
		st->ct_evicted += evicted;
	}
	/* Past the handshake with no entry: the flow's entry was evicted while
	 * it lived (docs/steering.md, sizing). A SYN is a new flow. */
	int lost = !resched && !(fl & TCP_F_SYN);

	if (lost) {
		struct hlb_steer_stats2 *st2 = stats2_get();

		if (st2)
			st2->ct_lost++;
	}
	ts = tstats2_get(tn);
	if (ts) {
		ts->new_flows++;
		ts->ct_resched += resched;
		ts->ct_evicted += evicted;
		ts->ct_lost += lost;
	}
	return forward(st, tn, eth, be, len, ret_ifindex);
}

SEC("xdp")
int hlb_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 ifindex = 0;

	switch (steer(data, data_end, data_end - data, 0, &ifindex)) {
	case V_PASS:
		return XDP_PASS;
	case V_DROP:
		return XDP_DROP;
	default:
		break;
	}
	if (ifindex == 0 || ifindex == ctx->ingress_ifindex)
		return XDP_TX;
	return bpf_redirect(ifindex, 0);
}

/*
 * The bytes of <skb> that steer() may read, when they exceed the first 256
 * (an IPv6 packet whose extension headers are large), else 0: Ethernet,
 * IPv6, the extension headers steer() walks, the largest TCP header. Read
 * with bpf_skb_load_bytes, which reaches the non-linear part, only for
 * IPv6 with an extension header first.
 */
static __always_inline __u32 tc_headers_len(struct __sk_buff *skb, void *data, void *data_end)
{
	struct ipv6hdr *ip6 = data + sizeof(struct ethhdr);
	__u32 off = sizeof(struct ethhdr) + sizeof(*ip6);
	__u8 ext[2], nh;
	int i;

	if ((void *)(ip6 + 1) > data_end || skb->protocol != bpf_htons(ETH_P_IPV6))
		return 0;
	nh = ip6->nexthdr;
#pragma unroll
	for (i = 0; i < HLB_STEER_IPV6_EXT_MAX && ipv6_walked(nh); i++) {
		if (bpf_skb_load_bytes(skb, off, ext, sizeof(ext)) < 0)
			break;
		nh = ext[0];
		off += (ext[1] + 1) * 8;
	}
	off += 60;
	return off > 256 ? off : 0;
}

SEC("tc")
int hlb_tc(struct __sk_buff *skb)
{
	void *data, *data_end;
	__u32 ifindex = 0, need;

	/* A VLAN tag the driver or the stack took out of the frame is in the
	 * skb's metadata, not in the data: tagged frames are passed, as when
	 * the tag is in the frame (XDP sees no such metadata: steering.md). */
	if (skb->vlan_present) {
		pass(stats_get());
		return TC_ACT_OK;
	}
	/* Make the headers we parse linear (a no-op when they already are):
	 * Ethernet, IPv4 with options or IPv6 with small extension headers,
	 * TCP with options; more for large IPv6 extension headers. Never all
	 * of a GSO packet: that would copy 64 KiB. */
	bpf_skb_pull_data(skb, skb->len < 256 ? skb->len : 256);
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	need = tc_headers_len(skb, data, data_end);
	if (need) {
		bpf_skb_pull_data(skb, skb->len < need ? skb->len : need);
		data = (void *)(long)skb->data;
		data_end = (void *)(long)skb->data_end;
	}

	switch (steer(data, data_end, skb->len, skb->gso_size != 0, &ifindex)) {
	case V_PASS:
		return TC_ACT_OK;
	case V_DROP:
		return TC_ACT_SHOT;
	default:
		break;
	}
	return bpf_redirect(ifindex ? ifindex : skb->ifindex, 0);
}

/* The reference for the benchmark: the cheapest program there is. */
SEC("xdp")
int hlb_xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
