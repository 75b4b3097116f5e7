// SPDX-License-Identifier: MIT
/*
 * Proves what the kernel path does to each packet, through
 * BPF_PROG_TEST_RUN: a forwarded frame has the backend's and the load
 * balancer's MACs and is otherwise byte for byte the client's (IP and TCP
 * checksums valid, TTL untouched), for XDP and tc; hostile input (truncated
 * headers, IP lengths that disagree with the frame, IP options, IPv6
 * extension headers, fragments, non-TCP, other addresses and ports) is
 * passed or dropped as documented in bpf/steer.bpf.c and never sent to a
 * backend; a path-MTU message about a tracked flow goes to its backend.
 */
#include "helpers.h"

#define TC_ACT_OK_ 0
#define TC_ACT_SHOT_ 2
#define TC_ACT_REDIRECT_ 7

static const char *const names[] = { "alpha", "bravo", "charlie", "delta", "echo" };
#define N_NAMES 5u
#define SEED 42u

static struct hashlb_table *table;
static int xdp_fd, tc_fd;

static void vip4(struct test_pkt *p, uint32_t client)
{
	memset(p, 0, sizeof(*p));
	test_v4(p->src, client);
	test_v4(p->dst, 0x0a00000a);
	p->sport = 40000;
	p->dport = 80;
}

static void vip6(struct test_pkt *p)
{
	memset(p, 0, sizeof(*p));
	p->v6 = true;
	inet_pton(AF_INET6, "2001:db8::7", p->src);
	inet_pton(AF_INET6, "fd00::10", p->dst);
	p->sport = 40001;
	p->dport = 80;
}

static uint32_t expected(const struct test_pkt *p)
{
	struct hashlb_tuple t;

	test_tuple(p, &t);
	return hashlb_table_lookup(table, hashlb_tuple_hash(&t, HASHLB_KEY_4TUPLE, SEED));
}

static bool csum_ok(const uint8_t *frame, size_t len)
{
	bool v6 = frame[12] == 0x86;
	const uint8_t *l3 = frame + 14, *tcp;
	size_t ihl = v6 ? 40 : (size_t)(l3[0] & 0xf) * 4, tcp_len;
	uint32_t sum;

	if (!v6 && csum_fold(csum_add(0, l3, ihl)) != 0)
		return false;
	tcp = l3 + ihl;
	tcp_len = len - 14 - ihl;
	if (v6) {
		uint8_t ph[8] = { 0, 0, (uint8_t)(tcp_len >> 8), (uint8_t)tcp_len, 0, 0, 0, 6 };

		sum = csum_add(csum_add(csum_add(0, l3 + 8, 32), ph, 8), tcp, tcp_len);
	} else {
		uint8_t ph[4] = { 0, 6, (uint8_t)(tcp_len >> 8), (uint8_t)tcp_len };

		sum = csum_add(csum_add(csum_add(0, l3 + 12, 8), ph, 4), tcp, tcp_len);
	}
	return csum_fold(sum) == 0;
}

static void check_forwarded(const char *what, const struct test_pkt *p)
{
	uint8_t in[256], out[512], mac[6];
	uint32_t out_len;
	size_t len = test_build(p, in);
	uint32_t want = expected(p);
	int v;

	test_backend_mac(want, mac);
	for (int prog = 0; prog < 2; prog++) {
		memset(out, 0, sizeof(out));
		v = test_run(prog ? tc_fd : xdp_fd, in, len, out, &out_len);
		CHECK(v == (prog ? TC_ACT_REDIRECT_ : XDP_TX_), "%s (%s): verdict %d", what,
		      prog ? "tc" : "xdp", v);
		CHECK(out_len == len, "%s: length %u, sent %zu", what, out_len, len);
		CHECK(memcmp(out, mac, 6) == 0, "%s (%s): not to backend %u's MAC", what,
		      prog ? "tc" : "xdp", want);
		CHECK(memcmp(out + 6, test_lb_mac, 6) == 0, "%s: source MAC is not the LB's", what);
		CHECK(memcmp(out + 12, in + 12, len - 12) == 0, "%s: IP packet modified", what);
		CHECK(csum_ok(out, len), "%s: bad checksum", what);
		CHECK(p->v6 ? out[14 + 7] == (p->ttl ? p->ttl : 64)
			    : out[14 + 8] == (p->ttl ? p->ttl : 64),
		      "%s: TTL changed", what);
	}
}

/* Run <frame> through both programs: XDP wants <xdp_v>, tc the matching. */
static void check_verdict(const char *what, const uint8_t *frame, size_t len, int xdp_v)
{
	uint8_t out[512];
	int v = test_run(xdp_fd, frame, len, out, NULL);
	int want_tc = xdp_v == XDP_PASS_ ? TC_ACT_OK_ : TC_ACT_SHOT_;

	CHECK(v == xdp_v, "%s: xdp verdict %d, want %d", what, v, xdp_v);
	CHECK(test_frame_backend(out) < 0, "%s: sent to a backend", what);
	/* BPF_PROG_TEST_RUN refuses an skb whose IP header is truncated (the
	 * stack would not build one either): tc sees only whole IP headers. */
	size_t l3_min = frame[12] == 0x08 && frame[13] == 0x00	 ? 20
			: frame[12] == 0x86 && frame[13] == 0xdd ? 40
								 : 0;

	if (len >= 14 + l3_min) {
		v = test_run(tc_fd, frame, len, out, NULL);
		CHECK(v == want_tc, "%s: tc verdict %d, want %d", what, v, want_tc);
	}
}

/* Insert IPv6 extension headers <types> (8 bytes each; the last one's
 * next header is TCP) after the IPv6 header of <f>. */
static size_t add_v6_ext(uint8_t *f, size_t len, const uint8_t *types, int n, uint8_t seg_left)
{
	size_t ext = (size_t)n * 8, off = 14 + 40;
	uint16_t pl = (uint16_t)(f[18] << 8 | f[19]);

	memmove(f + off + ext, f + off, len - off);
	for (int i = 0; i < n; i++) {
		uint8_t *h = f + off + i * 8;

		memset(h, 0, 8);
		h[0] = i + 1 < n ? types[i + 1] : 6;
		if (types[i] == 43)
			h[3] = seg_left;
	}
	f[14 + 6] = types[0];
	pl = (uint16_t)(pl + ext);
	f[18] = (uint8_t)(pl >> 8);
	f[19] = (uint8_t)pl;
	return len + ext;
}

static void test_forwarding(void)
{
	struct test_pkt p;

	vip4(&p, 0xc0000201);
	p.payload_len = 100;
	p.ttl = 7;
	check_forwarded("ipv4 syn with payload, ttl 7", &p);
	vip4(&p, 0xc0000202);
	p.ttl = 1; /* L2 forwarding is no router hop: TTL 1 passes */
	p.tcp_flags = 0x10;
	check_forwarded("ipv4 ack, ttl 1", &p);
	vip4(&p, 0xc0000203);
	p.ip_opt_len = 12;
	check_forwarded("ipv4 with 12 bytes of options", &p);
	vip6(&p);
	p.payload_len = 33;
	check_forwarded("ipv6", &p);
}

static void test_ipv6_ext(void)
{
	static const uint8_t hop_dst[] = { 0, 60 };
	static const uint8_t dst_hop[] = { 60, 0 };
	static const uint8_t routing[] = { 43 };
	static const uint8_t frag[] = { 44 };
	static const uint8_t five[] = { 0, 60, 60, 60, 60 };
	uint8_t f[512], out[512];
	struct test_pkt p;
	size_t len;
	int v;

	vip6(&p);
	len = add_v6_ext(f, test_build(&p, f), hop_dst, 2, 0);
	v = test_run(xdp_fd, f, len, out, NULL);
	CHECK(v == XDP_TX_ && test_frame_backend(out) == (int)expected(&p),
	      "ipv6 hop-by-hop + dstopts: verdict %d backend %d, want %u", v,
	      test_frame_backend(out), expected(&p));
	len = add_v6_ext(f, test_build(&p, f), routing, 1, 0);
	v = test_run(xdp_fd, f, len, out, NULL);
	CHECK(v == XDP_TX_ && test_frame_backend(out) == (int)expected(&p),
	      "ipv6 routing header, no segments left: verdict %d", v);
	len = add_v6_ext(f, test_build(&p, f), routing, 1, 2);
	check_verdict("ipv6 routing header with segments left", f, len, XDP_PASS_);
	/* Hop-by-hop options anywhere but first (RFC 8200): the stack refuses
	 * them, so they are its to answer (before: forwarded to a backend). */
	len = add_v6_ext(f, test_build(&p, f), dst_hop, 2, 0);
	check_verdict("ipv6 hop-by-hop after destination options", f, len, XDP_PASS_);
	len = add_v6_ext(f, test_build(&p, f), frag, 1, 0);
	check_verdict("ipv6 fragment to the VIP", f, len, XDP_DROP_);
	/* The fragment header names the fragmented part's first header, in
	 * every fragment: not TCP, nor a header TCP may follow, is passed
	 * (before, dropped); a destination options header may hide TCP. */
	len = add_v6_ext(f, test_build(&p, f), frag, 1, 0);
	f[14 + 40] = 58; /* ICMPv6 */
	check_verdict("ipv6 icmpv6 fragment to the VIP", f, len, XDP_PASS_);
	f[14 + 40] = 17; /* UDP */
	check_verdict("ipv6 udp fragment to the VIP", f, len, XDP_PASS_);
	f[14 + 40] = 50; /* ESP: encrypted, no TCP to read (the stack drops it) */
	check_verdict("ipv6 esp fragment to the VIP", f, len, XDP_PASS_);
	f[14 + 40] = 60; /* destination options, then maybe TCP */
	check_verdict("ipv6 fragment of dstopts to the VIP", f, len, XDP_DROP_);
	f[14 + 40] = 51; /* AH, then maybe TCP (before: passed) */
	check_verdict("ipv6 fragment of AH to the VIP", f, len, XDP_DROP_);
	len = add_v6_ext(f, test_build(&p, f), frag, 1, 0);
	check_verdict("ipv6 fragment header cut short, to the VIP", f, 14 + 40 + 4, XDP_DROP_);
	len = add_v6_ext(f, test_build(&p, f), five, 5, 0);
	check_verdict("ipv6 with 5 extension headers", f, len, XDP_PASS_);
	/* Extension header running past the end of the frame. */
	len = add_v6_ext(f, test_build(&p, f), hop_dst, 1, 0);
	f[14 + 40 + 1] = 200;
	check_verdict("ipv6 extension header longer than the frame", f, len, XDP_DROP_);
	/* Extension header cut by the frame's end: a truncated IPv6 header. */
	len = add_v6_ext(f, test_build(&p, f), hop_dst, 1, 0);
	check_verdict("ipv6 extension header cut by the frame's end", f, 14 + 40 + 4, XDP_PASS_);
}

/*
 * The path-MTU message <f> (IPv6 with <v6>) of <len> bytes quoting <n> bytes
 * fewer, its IP length saying so (a quote cut short, not a frame cut): its
 * length.
 */
static size_t pmtu_cut(uint8_t *f, size_t len, int v6, size_t n)
{
	uint16_t l = (uint16_t)(len - n - 14 - (v6 ? 40 : 0)), c;

	f[v6 ? 18 : 16] = (uint8_t)(l >> 8);
	f[v6 ? 19 : 17] = (uint8_t)l;
	if (!v6) {
		f[24] = f[25] = 0;
		c = htons(csum_fold(csum_add(0, f + 14, 20)));
		memcpy(f + 24, &c, 2);
	}
	return len - n;
}

/*
 * A path-MTU message about a flow to the VIP (a router on the backend's
 * reply path could not carry the reply: ICMP fragmentation needed, ICMPv6
 * packet too big, sent to the VIP) goes, unchanged but for the MACs, to the
 * backend the flow's conntrack entry names, whose socket must learn the
 * MTU; counted a conntrack hit, no new flow. With no entry, or any other
 * ICMP, or a quote that is not of TCP from the VIP, it is the LB stack's.
 * Before, every one was passed: the backend never learned the path's MTU.
 */
static void test_pmtu(struct hashlb_steer *s)
{
	struct hlb_steer_stats st0, st1;
	uint8_t f[512], out[512], mac[6];
	struct test_pkt p;
	uint32_t out_len;
	size_t len;
	int v;

	for (int fam = 0; fam < 2; fam++) {
		const char *fn = fam ? "icmpv6 packet too big" : "icmp fragmentation needed";
		size_t quote = 14 + (fam ? 40 : 20) + 8; /* the quoted IP header */

		if (fam)
			vip6(&p);
		else
			vip4(&p, 0xc0000210);
		p.sport = 40100;
		len = test_pmtu_message(&p, f);
		check_verdict(fn, f, len, XDP_PASS_); /* no entry yet */
		check_forwarded("the flow's syn", &p);
		hashlb_steer_stats(s, &st0);
		test_backend_mac(expected(&p), mac);
		for (int prog = 0; prog < 2; prog++) {
			v = test_run(prog ? tc_fd : xdp_fd, f, len, out, &out_len);
			CHECK(v == (prog ? TC_ACT_REDIRECT_ : XDP_TX_) && out_len == len &&
				      memcmp(out, mac, 6) == 0 &&
				      memcmp(out + 6, test_lb_mac, 6) == 0 &&
				      memcmp(out + 12, f + 12, len - 12) == 0,
			      "%s about a tracked flow (%s): verdict %d, to backend %d, want %u",
			      fn, prog ? "tc" : "xdp", v, test_frame_backend(out), expected(&p));
		}
		hashlb_steer_stats(s, &st1);
		CHECK(st1.ct_hits - st0.ct_hits == 2 && st1.new_flows == st0.new_flows,
		      "%s: %llu hits (want 2), %llu new flows (want 0)", fn,
		      (unsigned long long)(st1.ct_hits - st0.ct_hits),
		      (unsigned long long)(st1.new_flows - st0.new_flows));
		/* Not about a flow from the VIP, not TCP, not a path-MTU message,
		 * or cut short: the LB stack's, as before. */
		f[quote + (fam ? 8 : 12) + 3] ^= 1; /* the quote's source: not the VIP */
		check_verdict("a quote from another address", f, len, XDP_PASS_);
		f[quote + (fam ? 8 : 12) + 3] ^= 1;
		f[quote + (fam ? 6 : 9)] = 17;
		check_verdict("a quote of udp", f, len, XDP_PASS_);
		f[quote + (fam ? 6 : 9)] = 6;
		f[14 + (fam ? 40 : 20) + 1] = fam ? 1 : 3; /* code: port unreachable */
		check_verdict("another icmp error about the flow", f, len, XDP_PASS_);
		f[14 + (fam ? 40 : 20) + 1] = 0;
		f[14 + (fam ? 40 : 20)] = fam ? 1 : 11; /* type: unreachable, time exceeded */
		check_verdict("another icmp type about the flow", f, len, XDP_PASS_);
		len = test_pmtu_message(&p, f);
		check_verdict("a quote cut short of its ports", f, len - 6, XDP_PASS_);
		/* RFC 792's 8 bytes of the TCP header, which the backend's stack
		 * reads (ports and sequence number) and refuses a message without:
		 * a quote of the ports alone, or of 7 bytes, is not sent to it
		 * (before: forwarded, the backend dropping it as an error). */
		len = pmtu_cut(f, test_pmtu_message(&p, f), fam, 4);
		check_verdict("a quote of the tcp ports alone", f, len, XDP_PASS_);
		len = pmtu_cut(f, test_pmtu_message(&p, f), fam, 1);
		check_verdict("a quote of 7 bytes of tcp", f, len, XDP_PASS_);
	}
}

static void test_hostile(void)
{
	static const uint8_t frag_hdr[] = { 44 };
	uint8_t f[512];
	struct test_pkt p;
	size_t len;

	vip4(&p, 0xc0000204);
	len = test_build(&p, f);
	check_verdict("ethernet header and 1 byte", f, 15, XDP_PASS_);
	check_verdict("ipv4 header truncated", f, 14 + 12, XDP_PASS_);
	check_verdict("tcp header truncated to 2 bytes", f, 14 + 20 + 2, XDP_DROP_);
	check_verdict("tcp header truncated to 12 bytes", f, 14 + 20 + 12, XDP_DROP_);

	len = test_build(&p, f);
	f[14] = 0x44; /* IHL 4 */
	check_verdict("ipv4 ihl 4", f, len, XDP_PASS_);
	len = test_build(&p, f);
	f[14] = 0x4f; /* IHL 15: 60 bytes, past the end of a 54-byte frame */
	check_verdict("ipv4 ihl past the frame", f, 14 + 20 + 20, XDP_PASS_);
	len = test_build(&p, f);
	f[14] = 0x65; /* version 6 in an IPv4 ethertype */
	check_verdict("ipv4 ethertype with version 6", f, len, XDP_PASS_);
	len = test_build(&p, f);
	f[14 + 20 + 12] = 0x40; /* data offset 4 */
	check_verdict("tcp data offset 4", f, len, XDP_DROP_);
	len = test_build(&p, f);
	f[14 + 20 + 12] = 0xf0; /* data offset 15: options past the frame */
	check_verdict("tcp data offset past the frame", f, len, XDP_DROP_);

	len = test_build(&p, f);
	f[14 + 6] = 0x20; /* MF */
	check_verdict("ipv4 first fragment to the VIP", f, len, XDP_DROP_);
	len = test_build(&p, f);
	f[14 + 6] = 0x00;
	f[14 + 7] = 0x10; /* offset 128 */
	check_verdict("ipv4 later fragment to the VIP", f, len, XDP_DROP_);
	/* Not TCP (every IPv4 fragment names its protocol): the LB's stack
	 * reassembles it, as it takes the unfragmented packet (a large ping
	 * to the VIP address). Before, dropped as fragments. */
	len = test_build(&p, f);
	f[14 + 6] = 0x20;
	f[14 + 9] = 17; /* UDP */
	check_verdict("ipv4 udp first fragment to the VIP", f, len, XDP_PASS_);
	len = test_build(&p, f);
	f[14 + 7] = 0x10;
	f[14 + 9] = 1; /* ICMP */
	check_verdict("ipv4 icmp later fragment to the VIP", f, len, XDP_PASS_);
	/* IPv6's extension header numbers are protocols like others in IPv4
	 * (before: an IPv4 fragment of protocol 0, 43, 44 or 60 was dropped) */
	f[14 + 9] = 60;
	check_verdict("ipv4 fragment of protocol 60 to the VIP", f, len, XDP_PASS_);
	f[14 + 9] = 50; /* ESP */
	check_verdict("ipv4 esp fragment to the VIP", f, len, XDP_PASS_);
	test_v4(p.dst, 0x0a000063);
	len = test_build(&p, f);
	f[14 + 6] = 0x20;
	check_verdict("ipv4 fragment to another host", f, len, XDP_PASS_);

	vip4(&p, 0xc0000205);
	len = test_build(&p, f);
	f[14 + 9] = 17; /* UDP */
	check_verdict("udp to the VIP", f, len, XDP_PASS_);
	f[14 + 9] = 1; /* ICMP */
	check_verdict("icmp to the VIP", f, len, XDP_PASS_);
	p.dport = 81;
	len = test_build(&p, f);
	check_verdict("tcp to the VIP address, another port", f, len, XDP_PASS_);
	p.dport = 80;
	test_v4(p.dst, 0x0a00000b);
	len = test_build(&p, f);
	check_verdict("tcp to another address, the VIP port", f, len, XDP_PASS_);
	vip6(&p);
	p.dport = 443;
	len = test_build(&p, f);
	check_verdict("tcp to the IPv6 VIP address, another port", f, len, XDP_PASS_);
	/* The IPv4 VIP as an IPv4-mapped IPv6 address: another address. */
	vip6(&p);
	inet_pton(AF_INET6, "::ffff:10.0.0.10", p.dst);
	len = test_build(&p, f);
	check_verdict("ipv6 tcp to the ipv4 VIP, ipv4-mapped", f, len, XDP_PASS_);
	len = add_v6_ext(f, test_build(&p, f), frag_hdr, 1, 0);
	check_verdict("ipv6 fragment to the ipv4 VIP, ipv4-mapped", f, len, XDP_PASS_);

	vip4(&p, 0xc0000206);
	len = test_build(&p, f);
	f[12] = 0x08;
	f[13] = 0x06; /* ARP */
	check_verdict("arp", f, len, XDP_PASS_);
	f[12] = 0x81;
	f[13] = 0x00; /* 802.1Q */
	check_verdict("vlan-tagged", f, len, XDP_PASS_);
}

/* Set the IPv4 total length or the IPv6 payload length of frame <f>. */
static void set_ip_len(uint8_t *f, uint16_t v)
{
	size_t off = f[12] == 0x86 ? 14 + 4 : 14 + 2;

	f[off] = (uint8_t)(v >> 8);
	f[off + 1] = (uint8_t)v;
}

/* <p> built with IP length field <ip_len>, through both programs. */
static void check_ip_len(const char *what, const struct test_pkt *p, uint16_t ip_len, int xdp_v)
{
	uint8_t f[512];
	size_t len = test_build(p, f);

	set_ip_len(f, ip_len);
	check_verdict(what, f, len, xdp_v);
}

/* Run <frame> through tc as a GRO packet (gso_size set): tc's verdict. */
static int tc_run_gso(const uint8_t *frame, size_t len, uint8_t *out)
{
	struct __sk_buff ctx = { .gso_segs = 2, .gso_size = 1000 };

	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame, .data_size_in = (uint32_t)len,
		    .data_out = out, .data_size_out = 512, .ctx_in = &ctx,
		    .ctx_size_in = sizeof(ctx), .repeat = 1);
	if (bpf_prog_test_run_opts(tc_fd, &o) < 0) {
		fprintf(stderr, "BPF_PROG_TEST_RUN with gso_size: %s\n", strerror(errno));
		exit(1);
	}
	return (int)o.retval;
}

/*
 * The IP length fields against the frame: a total length below the IPv4
 * header is a bad header (passed, like IHL < 5); an IP packet longer than
 * the frame, or whose TCP header ends past the packet's length, is a
 * truncated TCP packet (dropped if to a VIP address, passed if not). Before,
 * all of these were forwarded to a backend. Ethernet padding (the frame
 * longer than the IP packet) is forwarded, whole.
 */
static void test_ip_lengths(void)
{
	uint8_t f[512], out[512], mac[6];
	struct test_pkt p;
	uint32_t out_len;
	size_t len;
	int v;

	vip4(&p, 0xc0000207);
	check_ip_len("ipv4 total length 12, below the header", &p, 12, XDP_PASS_);
	check_ip_len("ipv4 total length 0", &p, 0, XDP_PASS_);
	p.ip_opt_len = 8;
	check_ip_len("ipv4 total length 24, below its 28-byte header", &p, 24, XDP_PASS_);
	p.ip_opt_len = 0;
	check_ip_len("ipv4 total length 1 past the frame", &p, 20 + 20 + 1, XDP_DROP_);
	p.payload_len = 100;
	check_ip_len("ipv4 total length 1500, 160 bytes present", &p, 1500, XDP_DROP_);
	p.payload_len = 0;
	check_ip_len("ipv4 total length 30: tcp header past the packet's end", &p, 30, XDP_DROP_);
	check_ip_len("ipv4 total length 20: no tcp header", &p, 20, XDP_DROP_);
	test_v4(p.dst, 0x0a000063);
	check_ip_len("ipv4 total length past the frame, another host", &p, 1500, XDP_PASS_);

	vip6(&p);
	check_ip_len("ipv6 payload length 1 past the frame", &p, 20 + 1, XDP_DROP_);
	check_ip_len("ipv6 payload length 10: tcp header past the packet's end", &p, 10, XDP_DROP_);
	check_ip_len("ipv6 payload length 0", &p, 0, XDP_DROP_);
	static const uint8_t hop[] = { 0 };

	len = add_v6_ext(f, test_build(&p, f), hop, 1, 0);
	set_ip_len(f, 8 + 12);
	check_verdict("ipv6 payload length 20 with an 8-byte hop-by-hop header", f, len, XDP_DROP_);
	inet_pton(AF_INET6, "fd00::99", p.dst);
	check_ip_len("ipv6 payload length past the frame, another host", &p, 1000, XDP_PASS_);

	/* Ethernet padding: a 54-byte frame padded to 60 is forwarded whole. */
	vip4(&p, 0xc0000208);
	len = test_build(&p, f);
	memset(f + len, 0, 6);
	test_backend_mac(expected(&p), mac);
	for (int prog = 0; prog < 2; prog++) {
		v = test_run(prog ? tc_fd : xdp_fd, f, len + 6, out, &out_len);
		CHECK(v == (prog ? TC_ACT_REDIRECT_ : XDP_TX_) && out_len == len + 6 &&
			      memcmp(out, mac, 6) == 0,
		      "padded frame (%s): verdict %d, %u bytes", prog ? "tc" : "xdp", v, out_len);
	}

	/* A GRO packet past 64 KiB (BIG TCP) has a length field of 0: tc
	 * takes the frame's length for it. */
	vip4(&p, 0xc0000209);
	p.payload_len = 100;
	len = test_build(&p, f);
	set_ip_len(f, 0);
	v = tc_run_gso(f, len, out);
	CHECK(v == TC_ACT_REDIRECT_ && test_frame_backend(out) == (int)expected(&p),
	      "ipv4 gro packet, total length 0: tc verdict %d", v);
	set_ip_len(f, (uint16_t)(len - 14 + 1));
	v = tc_run_gso(f, len, out);
	CHECK(v == TC_ACT_SHOT_, "ipv4 gro packet, total length past it: tc verdict %d", v);
	vip6(&p);
	p.payload_len = 100;
	len = test_build(&p, f);
	set_ip_len(f, 0);
	v = tc_run_gso(f, len, out);
	CHECK(v == TC_ACT_REDIRECT_ && test_frame_backend(out) == (int)expected(&p),
	      "ipv6 gro packet, payload length 0: tc verdict %d", v);
}

static void test_counters(struct hashlb_steer *s)
{
	struct hlb_steer_stats st;

	CHECK(hashlb_steer_stats(s, &st) == 0, "stats");
	CHECK(st.packets > 0 && st.bytes > 0 && st.new_flows > 0, "forwarding not counted");
	CHECK(st.passed > 0, "passed not counted");
	CHECK(st.drops[HLB_STEER_DROP_MALFORMED] > 0, "malformed drops not counted");
	CHECK(st.drops[HLB_STEER_DROP_FRAGMENT] > 0, "fragment drops not counted");
	CHECK(st.drops[HLB_STEER_DROP_TABLE] == 0, "table drops: %llu",
	      (unsigned long long)st.drops[HLB_STEER_DROP_TABLE]);
}

int main(void)
{
	static const char *const vips[] = { "10.0.0.10:80", "[fd00::10]:80" };
	struct hashlb_steer *s;

	table = test_table(HASHLB_SCHEME_MAGLEV, SEED, names, N_NAMES, NULL);
	s = test_steer_load(table);
	xdp_fd = hashlb_steer_prog_fd(s, HASHLB_STEER_PROG_XDP);
	tc_fd = hashlb_steer_prog_fd(s, HASHLB_STEER_PROG_TC);
	test_publish(s, table, HASHLB_KEY_4TUPLE, NULL);
	test_set_vips(s, vips, 2);

	test_forwarding();
	test_ipv6_ext();
	test_hostile();
	test_pmtu(s);
	test_ip_lengths();
	test_counters(s);

	hashlb_steer_free(s);
	hashlb_table_free(table);
	if (!test_failures)
		printf("packet correctness and hostile input: all checks passed\n");
	return test_failures ? 1 : 0;
}
