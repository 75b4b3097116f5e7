// SPDX-License-Identifier: MIT
/*
 * hashlb kernel steering: XDP and tc programs that send TCP packets for a VIP
 * to the backend that hashlb's consistent-hash table names for the flow, by
 * L2 direct server return (only the Ethernet addresses are rewritten; the IP
 * packet is untouched and the backend answers the client directly).
 *
 * What is done with each packet (docs/DESIGN-steering.md has the why):
 *   - not IPv4/IPv6 (including VLAN-tagged), IPv4/IPv6 header truncated,
 *     not to a VIP address: passed to the stack;
 *   - IP fragment to a VIP address: dropped (no port to hash, and the first
 *     fragment alone would split the datagram across backends);
 *   - IPv6: hop-by-hop, destination options and routing headers with no
 *     segments left are walked (up to HLB_STEER_IPV6_EXT_MAX); a routing
 *     header with segments left, or more extension headers, are passed;
 *   - non-TCP, or TCP to a port that is no VIP: passed;
 *   - TCP to a VIP address with a truncated or bad header: dropped;
 *   - otherwise forwarded: conntrack entry if its backend is kept, else the
 *     active table half (new flow or rescheduled).
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
/* Benchmarks only: make every packet a new flow (its source address XORed
 * with a counter), so that BPF_PROG_TEST_RUN's repeat measures the new-flow
 * path warm. Zero in production: the verifier removes the code. */
const volatile __u32 bench_new_flows = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct hlb_steer_vip_key);
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
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct hlb_steer_table);
} hlb_tables SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2); /* 2 * backends_cap, set by the loader */
	__type(key, __u32);
	__type(value, struct hlb_steer_backend);
} hlb_backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* backends_cap */
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

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536); /* set by the loader (--flows) */
	__type(key, struct hlb_steer_flow_key);
	__type(value, struct hlb_steer_flow);
} hlb_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hlb_steer_stats);
} hlb_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1 << HLB_STEER_CT_CACHE_BITS);
	__type(key, __u32);
	__type(value, struct hlb_steer_ct_cache);
} hlb_ctcache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} hlb_ctgen SEC(".maps");

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

/* The parsed packet: the canonical tuple (hash input and flow key). */
struct parsed {
	struct hlb_steer_flow_key key; /* src, dst, sport, dport */
	__u8 tuple[36]; /* canonical layout: src, sport, dst, dport */
};

#define IPV6_EXTHDR_HOP 0
#define IPV6_EXTHDR_ROUTING 43
#define IPV6_EXTHDR_FRAGMENT 44
#define IPV6_EXTHDR_DSTOPTS 60

static __always_inline struct hlb_steer_stats *stats_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&hlb_stats, &zero);
}

static __always_inline enum verdict drop(struct hlb_steer_stats *st, int reason)
{
	if (st && reason >= 0 && reason < HLB_STEER_DROP_MAX)
		st->drops[reason]++;
	return V_DROP;
}

static __always_inline enum verdict pass(struct hlb_steer_stats *st)
{
	if (st)
		st->passed++;
	return V_PASS;
}

/* The flow's hlb_ctcache index. A collision costs only a trip through
 * hlb_flows (the whole key is compared), so a cheap fold does. */
static __always_inline __u32 ct_cache_index(const struct hlb_steer_flow_key *k)
{
	const __u32 *w = (const __u32 *)k;
	__u32 h = w[0] ^ w[1] ^ w[2] ^ w[3] ^ w[4] ^ w[5] ^ w[6] ^ w[7] ^ w[8];

	return (h * 0x9e3779b1u) >> (32 - HLB_STEER_CT_CACHE_BITS);
}

static __always_inline int flow_key_eq(const struct hlb_steer_flow_key *a,
				       const struct hlb_steer_flow_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3]) | (x[4] ^ y[4])) == 0;
}

static __always_inline void ct_cache_fill(struct hlb_steer_ct_cache *ce,
					  const struct hlb_steer_flow_key *k, __u64 backend_id,
					  __u32 slot, __u32 gen)
{
	if (!ce)
		return;
	ce->key = *k;
	ce->backend_id = backend_id;
	ce->slot = slot;
	ce->gen = gen;
	ce->hits = 0;
}

/* Whether <addr> is a VIP address at all (the port-0 marker). */
static __always_inline int is_vip_addr(const __u8 *addr)
{
	struct hlb_steer_vip_key k = {};

	__builtin_memcpy(k.addr, addr, 16);
	return bpf_map_lookup_elem(&hlb_vips, &k) != NULL;
}

static __always_inline void map_v4(__u8 *dst16, __be32 addr)
{
	__builtin_memset(dst16, 0, 10);
	dst16[10] = 0xff;
	dst16[11] = 0xff;
	__builtin_memcpy(dst16 + 12, &addr, 4);
}

static __always_inline __u64 tuple_hash(const __u8 *tuple, __u32 key_len, __u64 seed)
{
	if (key_len == 16)
		return hlb_xxh64_16(tuple, seed);
	if (key_len == 18)
		return hlb_xxh64_18(tuple, seed);
	return hlb_xxh64_36(tuple, seed);
}

/* The backend index for <hash> in table half <half>, HLB_STEER_BACKEND_NONE
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

static __always_inline void set_macs(struct ethhdr *eth, const struct hlb_steer_backend *be)
{
	__builtin_memcpy(eth->h_dest, be->dst_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, be->src_mac, ETH_ALEN);
}

/* The backend in <slot> if it is still <id> and keeps its flows, else NULL. */
static __always_inline struct hlb_steer_backend *kept_backend(__u32 slot, __u64 id)
{
	struct hlb_steer_backend *be = bpf_map_lookup_elem(&hlb_bslots, &slot);

	if (be && be->id == id && (be->flags & HLB_STEER_BACKEND_F_KEEP))
		return be;
	return NULL;
}

/* An established flow's packet, to the backend its conntrack entry names. */
static __always_inline enum verdict forward_kept(struct hlb_steer_stats *st, struct ethhdr *eth,
						 const struct hlb_steer_backend *be, __u64 len,
						 __u32 *ret_ifindex)
{
	if (st) {
		st->ct_hits++;
		st->packets++;
		st->bytes += len;
	}
	set_macs(eth, be);
	*ret_ifindex = be->ifindex;
	return V_FORWARD;
}

/*
 * Parse, match, schedule and rewrite. On V_FORWARD, *ret_ifindex is the
 * egress interface (0 = the ingress one).
 */
static __always_inline enum verdict steer(void *data, void *data_end, __u32 *ret_ifindex)
{
	struct hlb_steer_stats *st = stats_get();
	struct ethhdr *eth = data;
	struct parsed pk = {};
	struct tcphdr *tcp;
	__u8 proto;
	int frag = 0;
	void *l4;

	if ((void *)(eth + 1) > data_end)
		return pass(st);

	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		__u32 ihl;

		if ((void *)(ip + 1) > data_end)
			return pass(st);
		ihl = ip->ihl * 4;
		if (ip->version != 4 || ihl < sizeof(*ip))
			return pass(st);
		if ((void *)ip + ihl > data_end)
			return pass(st);
		map_v4(pk.key.src, ip->saddr);
		map_v4(pk.key.dst, ip->daddr);
		proto = ip->protocol;
		/* MF set or a non-zero offset: a fragment. */
		frag = (ip->frag_off & bpf_htons(0x3fff)) != 0;
		l4 = (void *)ip + ihl;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		int i;

		if ((void *)(ip6 + 1) > data_end)
			return pass(st);
		if (ip6->version != 6)
			return pass(st);
		__builtin_memcpy(pk.key.src, &ip6->saddr, 16);
		__builtin_memcpy(pk.key.dst, &ip6->daddr, 16);
		proto = ip6->nexthdr;
		l4 = ip6 + 1;
#pragma unroll
		for (i = 0; i < HLB_STEER_IPV6_EXT_MAX; i++) {
			__u8 *ext = l4;

			if (proto == IPV6_EXTHDR_FRAGMENT) {
				frag = 1;
				break;
			}
			if (proto != IPV6_EXTHDR_HOP && proto != IPV6_EXTHDR_ROUTING &&
			    proto != IPV6_EXTHDR_DSTOPTS)
				break;
			if ((void *)(ext + 8) > data_end)
				return pass(st);
			/* Segments left: the address is not the final one. */
			if (proto == IPV6_EXTHDR_ROUTING && ext[3] != 0)
				return pass(st);
			proto = ext[0];
			l4 = ext + (ext[1] + 1) * 8;
		}
		if (!frag && (proto == IPV6_EXTHDR_HOP || proto == IPV6_EXTHDR_ROUTING ||
			      proto == IPV6_EXTHDR_DSTOPTS))
			return pass(st); /* more extension headers than we walk */
	} else {
		return pass(st);
	}

	if (frag) {
		if (is_vip_addr(pk.key.dst))
			return drop(st, HLB_STEER_DROP_FRAGMENT);
		return pass(st);
	}
	if (proto != IPPROTO_TCP)
		return pass(st);

	/* A short or bad TCP header is dropped if it is ours, passed if not:
	 * only then is the VIP map asked (the port may be cut off too). */
	tcp = l4;
	if ((void *)(tcp + 1) > data_end || tcp->doff < 5 || (void *)tcp + tcp->doff * 4 > data_end)
		return is_vip_addr(pk.key.dst) ? drop(st, HLB_STEER_DROP_MALFORMED) : pass(st);

	pk.key.sport = tcp->source;
	pk.key.dport = tcp->dest;
	if (bench_new_flows && st) {
		__u32 c = (__u32)st->packets;

		pk.key.src[12] ^= c;
		pk.key.src[13] ^= c >> 8;
		pk.key.src[14] ^= c >> 16;
		pk.key.src[15] ^= c >> 24;
	}

	/*
	 * Conntrack first: a flow has an entry only if it was sent to a VIP
	 * (the loader deletes the entries of a VIP it stops serving), so a hit
	 * is the whole check for an established flow. Traffic that is not ours
	 * pays two lookups (conntrack, then VIP) instead of one: an LB's
	 * interface mostly carries its VIPs'.
	 *
	 * This CPU's cache first: a copy of the flow's entry, no kernel call.
	 * The generation is read before anything else, so an entry filled from
	 * maps that a concurrent update is changing carries the old one and
	 * is invalid once the loader bumps it.
	 */
	__u32 zero = 0, ci = ct_cache_index(&pk.key);
	__u32 *genp = bpf_map_lookup_elem(&hlb_ctgen, &zero);
	__u32 gen = genp ? *genp : 0;
	struct hlb_steer_ct_cache *ce = bpf_map_lookup_elem(&hlb_ctcache, &ci);
	struct hlb_steer_backend *be;
	int resched = 0;

	if (ce && gen && ce->gen == gen && flow_key_eq(&ce->key, &pk.key) &&
	    (++ce->hits % HLB_STEER_CT_CACHE_REFRESH) != 0) {
		__u32 slot = ce->slot;

		be = kept_backend(slot, ce->backend_id);
		if (be)
			return forward_kept(st, eth, be, data_end - data, ret_ifindex);
	}

	struct hlb_steer_flow *fl = bpf_map_lookup_elem(&hlb_flows, &pk.key);

	if (fl) {
		__u32 slot = fl->slot;

		be = kept_backend(slot, fl->backend_id);
		if (be) {
			if (gen)
				ct_cache_fill(ce, &pk.key, fl->backend_id, slot, gen);
			return forward_kept(st, eth, be, data_end - data, ret_ifindex);
		}
		resched = 1;
	} else {
		struct hlb_steer_vip_key vk = {};

		__builtin_memcpy(vk.addr, pk.key.dst, 16);
		vk.port = tcp->dest;
		if (vk.port == 0 || !bpf_map_lookup_elem(&hlb_vips, &vk))
			return pass(st);
	}

	__builtin_memcpy(pk.tuple, pk.key.src, 16);
	__builtin_memcpy(pk.tuple + 16, &pk.key.sport, 2);
	__builtin_memcpy(pk.tuple + 18, pk.key.dst, 16);
	__builtin_memcpy(pk.tuple + 34, &pk.key.dport, 2);

	__u32 half;
	__u32 *active = bpf_map_lookup_elem(&hlb_active, &zero);
	struct hlb_steer_table *t;
	int idx;

	if (!active)
		return drop(st, HLB_STEER_DROP_TABLE);
	half = *active & 1;
	t = bpf_map_lookup_elem(&hlb_tables, &half);
	if (!t)
		return drop(st, HLB_STEER_DROP_TABLE);
	idx = table_lookup(t, half, tuple_hash(pk.tuple, t->key_len, t->seed));
	if (idx < 0)
		return drop(st, HLB_STEER_DROP_TABLE);
	if (idx == HLB_STEER_BACKEND_NONE)
		return drop(st, HLB_STEER_DROP_NO_BACKEND);
	if ((__u32)idx >= backends_cap)
		return drop(st, HLB_STEER_DROP_TABLE);
	__u32 bk = half * backends_cap + idx;

	be = bpf_map_lookup_elem(&hlb_backends, &bk);
	if (!be)
		return drop(st, HLB_STEER_DROP_TABLE);

	/* Not copied into the cache here: a new flow's packets pay nothing for
	 * it, and its next packet fills the cache from hlb_flows. */
	struct hlb_steer_flow nf = { .backend_id = be->id, .slot = be->slot };

	bpf_map_update_elem(&hlb_flows, &pk.key, &nf, BPF_ANY);
	if (st) {
		st->new_flows++;
		st->ct_resched += resched;
		st->packets++;
		st->bytes += data_end - data;
	}
	set_macs(eth, be);
	*ret_ifindex = be->ifindex;
	return V_FORWARD;
}

SEC("xdp")
int hlb_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 ifindex = 0;

	switch (steer(data, data_end, &ifindex)) {
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

SEC("tc")
int hlb_tc(struct __sk_buff *skb)
{
	void *data, *data_end;
	__u32 ifindex = 0;

	/* Make the headers we parse linear (a no-op when they already are):
	 * Ethernet, IPv6 with a few extension headers, TCP with options. */
	bpf_skb_pull_data(skb, skb->len < 256 ? skb->len : 256);
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;

	switch (steer(data, data_end, &ifindex)) {
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
