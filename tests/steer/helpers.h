/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the kernel steering tests: build TCP frames, run the XDP
 * program on them with BPF_PROG_TEST_RUN, check results. A test that cannot
 * run here (not root, no BPF) exits 77 and says why.
 */
#ifndef HLB_STEER_TEST_HELPERS_H
#define HLB_STEER_TEST_HELPERS_H

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>

#include "hashlb/steer.h"
#include "hashlb/table.h"
#include "hashlb/tuple.h"

#define XDP_ABORTED_ 0
#define XDP_DROP_ 1
#define XDP_PASS_ 2
#define XDP_TX_ 3
#define XDP_REDIRECT_ 4

static int test_failures __attribute__((unused));

#define CHECK(cond, ...)                                                                         \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                            \
			fprintf(stderr, "\n");                                                   \
			test_failures++;                                                         \
		}                                                                                \
	} while (0)

/* Deterministic PRNG (splitmix64) so a failure reproduces. */
static inline uint64_t test_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static const uint8_t test_lb_mac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 };
static const uint8_t test_client_mac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x02 };

/* Backend i's MAC encodes i, so the rewritten frame says which was chosen. */
static inline void test_backend_mac(uint32_t i, uint8_t mac[6])
{
	mac[0] = 0x02;
	mac[1] = 0x68;
	mac[2] = 0x6c;
	mac[3] = 0x62;
	mac[4] = (uint8_t)(i >> 8);
	mac[5] = (uint8_t)i;
}

/* The backend index a rewritten frame was sent to, or -1. */
static inline int test_frame_backend(const uint8_t *frame)
{
	if (frame[0] != 0x02 || frame[1] != 0x68 || frame[2] != 0x6c || frame[3] != 0x62)
		return -1;
	return frame[4] << 8 | frame[5];
}

static inline uint32_t csum_add(uint32_t sum, const void *data, size_t len)
{
	const uint8_t *p = data;

	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		sum += (uint32_t)(p[len - 1] << 8);
	return sum;
}

static inline uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

struct test_pkt {
	bool v6;
	uint8_t src[16], dst[16]; /* IPv4 in the last 4 bytes of a mapped address */
	uint16_t sport, dport; /* host order */
	uint8_t tcp_flags; /* TH_* bits of byte 13 */
	uint8_t ttl;
	uint32_t ip_opt_len; /* IPv4 options (multiple of 4, NOPs) */
	uint32_t payload_len;
};

/* Write the frame of <p> into <buf> (>= 256 bytes); returns its length. */
static inline size_t test_build(const struct test_pkt *p, uint8_t *buf)
{
	uint8_t *l3 = buf + 14, *tcp;
	size_t l3_len, tcp_len = 20 + p->payload_len;
	uint32_t sum;

	memcpy(buf, test_lb_mac, 6);
	memcpy(buf + 6, test_client_mac, 6);
	/* The IP header starts at byte 14, not aligned for struct iphdr or
	 * struct ipv6hdr (4 bytes): each is built aside and copied in. Before,
	 * it was written in place, which -Dsanitize=true stops at. */
	if (!p->v6) {
		struct iphdr ip;
		size_t ihl = 20 + p->ip_opt_len;
		uint16_t check;

		buf[12] = 0x08;
		buf[13] = 0x00;
		memset(&ip, 0, sizeof(ip));
		ip.version = 4;
		ip.ihl = (uint8_t)(ihl / 4);
		ip.tot_len = htons((uint16_t)(ihl + tcp_len));
		ip.id = htons(0x1234);
		ip.frag_off = htons(0x4000); /* DF */
		ip.ttl = p->ttl ? p->ttl : 64;
		ip.protocol = IPPROTO_TCP;
		memcpy(&ip.saddr, p->src + 12, 4);
		memcpy(&ip.daddr, p->dst + 12, 4);
		memcpy(l3, &ip, sizeof(ip));
		memset(l3 + 20, 1, p->ip_opt_len); /* NOP options */
		check = htons(csum_fold(csum_add(0, l3, ihl)));
		memcpy(l3 + offsetof(struct iphdr, check), &check, sizeof(check));
		l3_len = ihl;
	} else {
		struct ipv6hdr ip6;

		buf[12] = 0x86;
		buf[13] = 0xdd;
		memset(&ip6, 0, sizeof(ip6));
		ip6.version = 6;
		ip6.payload_len = htons((uint16_t)tcp_len);
		ip6.nexthdr = IPPROTO_TCP;
		ip6.hop_limit = p->ttl ? p->ttl : 64;
		memcpy(&ip6.saddr, p->src, 16);
		memcpy(&ip6.daddr, p->dst, 16);
		memcpy(l3, &ip6, sizeof(ip6));
		l3_len = 40;
	}
	tcp = l3 + l3_len;
	memset(tcp, 0, tcp_len);
	tcp[0] = (uint8_t)(p->sport >> 8);
	tcp[1] = (uint8_t)p->sport;
	tcp[2] = (uint8_t)(p->dport >> 8);
	tcp[3] = (uint8_t)p->dport;
	tcp[7] = 1; /* seq */
	tcp[12] = 5 << 4;
	tcp[13] = p->tcp_flags ? p->tcp_flags : 0x02; /* SYN */
	tcp[14] = 0xff; /* window */
	for (uint32_t i = 0; i < p->payload_len; i++)
		tcp[20 + i] = (uint8_t)i;
	/* Pseudo header. */
	if (!p->v6) {
		uint8_t ph[4] = { 0, IPPROTO_TCP, (uint8_t)(tcp_len >> 8), (uint8_t)tcp_len };

		sum = csum_add(0, p->src + 12, 4);
		sum = csum_add(sum, p->dst + 12, 4);
		sum = csum_add(sum, ph, 4);
	} else {
		uint8_t ph[8] = { 0, 0,		 (uint8_t)(tcp_len >> 8), (uint8_t)tcp_len, 0, 0,
				  0, IPPROTO_TCP };

		sum = csum_add(0, p->src, 16);
		sum = csum_add(sum, p->dst, 16);
		sum = csum_add(sum, ph, 8);
	}
	sum = csum_add(sum, tcp, tcp_len);
	uint16_t c = csum_fold(sum);

	tcp[16] = (uint8_t)(c >> 8);
	tcp[17] = (uint8_t)c;
	return 14 + l3_len + tcp_len;
}

/*
 * A path-MTU message about flow <p> (to the VIP) into <f>: what a router on
 * the backend's reply path sends the VIP, the replies' source, when it
 * cannot carry one: ICMP "fragmentation needed" (MTU 1400) or ICMPv6
 * "packet too big", from the flow's client address for simplicity, quoting
 * the reply's IP header and the first 8 bytes of its TCP header. Its length.
 */
static inline size_t test_pmtu_message(const struct test_pkt *p, uint8_t *f)
{
	struct test_pkt reply = *p, outer = *p;
	size_t hdr = p->v6 ? 40 : 20, quoted = hdr + 8;
	uint8_t inner[256], *icmp = f + 14 + hdr;

	memcpy(reply.src, p->dst, 16);
	memcpy(reply.dst, p->src, 16);
	reply.sport = p->dport;
	reply.dport = p->sport;
	reply.tcp_flags = 0x10;
	test_build(&reply, inner);
	/* A packet to the VIP whose TCP header and payload are the message. */
	outer.payload_len = (uint32_t)(8 + quoted - 20);
	test_build(&outer, f);
	memset(icmp, 0, 8);
	memcpy(icmp + 8, inner + 14, quoted);
	icmp[0] = p->v6 ? 2 : 3; /* packet too big; destination unreachable */
	icmp[1] = p->v6 ? 0 : 4; /* fragmentation needed */
	icmp[6] = 0x05; /* MTU 1400 */
	icmp[7] = 0x78;
	f[14 + (p->v6 ? 6 : 9)] = p->v6 ? 58 : 1;
	if (!p->v6) { /* the header's checksum, after its protocol */
		uint16_t c;

		f[24] = f[25] = 0;
		c = htons(csum_fold(csum_add(0, f + 14, 20)));
		memcpy(f + 24, &c, 2);
	}
	return 14 + hdr + 8 + quoted;
}

/* The canonical tuple of <p>. */
static inline void test_tuple(const struct test_pkt *p, struct hashlb_tuple *t)
{
	memcpy(t->src, p->src, 16);
	memcpy(t->dst, p->dst, 16);
	t->sport[0] = (uint8_t)(p->sport >> 8);
	t->sport[1] = (uint8_t)p->sport;
	t->dport[0] = (uint8_t)(p->dport >> 8);
	t->dport[1] = (uint8_t)p->dport;
}

static inline void test_v4(uint8_t a[16], uint32_t host_order)
{
	memset(a, 0, 10);
	a[10] = a[11] = 0xff;
	a[12] = (uint8_t)(host_order >> 24);
	a[13] = (uint8_t)(host_order >> 16);
	a[14] = (uint8_t)(host_order >> 8);
	a[15] = (uint8_t)host_order;
}

/* Run the program <fd> once on <in>; the verdict, the frame out in <out>. */
static inline int test_run(int fd, const void *in, size_t len, void *out, uint32_t *ret_out_len)
{
	uint8_t scratch[512];

	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = in, .data_size_in = (uint32_t)len,
		    .data_out = out ? out : scratch, .data_size_out = sizeof(scratch), .repeat = 1);
	if (bpf_prog_test_run_opts(fd, &o) < 0) {
		fprintf(stderr, "BPF_PROG_TEST_RUN (%zu bytes): %s\n", len, strerror(errno));
		exit(1);
	}
	if (ret_out_len)
		*ret_out_len = o.data_size_out;
	return (int)o.retval;
}

/* Set the program's constant <name> (<size> bytes of .rodata) before its load. */
static inline void test_set_rodata(struct bpf_object *obj, const char *name, const void *value,
				   size_t size)
{
	struct bpf_map *map = bpf_object__find_map_by_name(obj, ".rodata");
	struct btf *btf = bpf_object__btf(obj);
	const struct btf_var_secinfo *vs;
	const struct btf_type *sec;
	size_t have = 0;
	char *data = map ? (char *)bpf_map__initial_value(map, &have) : NULL;
	int id = btf ? btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC) : -1;

	sec = id > 0 ? btf__type_by_id(btf, (uint32_t)id) : NULL;
	for (unsigned i = 0; data && sec && i < btf_vlen(sec); i++) {
		vs = btf_var_secinfos(sec) + i;
		if (strcmp(btf__name_by_offset(btf, btf__type_by_id(btf, vs->type)->name_off),
			   name) == 0 &&
		    vs->size == size && vs->offset + size <= have) {
			memcpy(data + vs->offset, value, size);
			return;
		}
	}
	fprintf(stderr, "no constant %s of %zu bytes in the program\n", name, size);
	exit(1);
}

/*
 * Into a network namespace of this process's own, with a veth <iface> (up) to <peer>. Exits
 * 77, the reason said, where this machine cannot: not root, no network namespaces (unshare:
 * EPERM in a container without CAP_SYS_ADMIN, EINVAL in a kernel without them), no ip(8), no
 * veth driver (ip: "Unknown device type"); 1 on any other failure, a real one. It exited 1
 * for all of them but not root: a machine without veth failed the test.
 */
static inline void test_netns_veth(const char *iface, const char *peer)
{
	char cmd[160], out[512] = "";
	size_t n = 0;
	int status;
	FILE *f;

	if (geteuid() != 0) {
		printf("SKIP: needs root (a network namespace, BPF)\n");
		exit(77);
	}
	if (unshare(CLONE_NEWNET) < 0) {
		int e = errno;

		printf("%s: a network namespace: %s\n", e == EPERM || e == EINVAL ? "SKIP" : "FAIL",
		       strerror(e));
		exit(e == EPERM || e == EINVAL ? 77 : 1);
	}
	snprintf(cmd, sizeof(cmd),
		 "ip link add %s type veth peer name %s 2>&1 && ip link set %s up 2>&1", iface,
		 peer, iface);
	f = popen(cmd, "r");
	if (!f) {
		perror("popen ip");
		exit(1);
	}
	while (n + 1 < sizeof(out) && fgets(out + n, (int)(sizeof(out) - n), f))
		n += strlen(out + n);
	status = pclose(f);
	if (status == 0)
		return;
	while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
		out[--n] = '\0';
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		printf("SKIP: no ip(8) to make a veth (iproute2): %s\n", out);
		exit(77);
	}
	if (strstr(out, "Unknown device type")) {
		printf("SKIP: this kernel has no veth driver (ip: %s)\n", out);
		exit(77);
	}
	fprintf(stderr, "a veth %s in a network namespace: %s (ip exit status %d)\n", iface, out,
		WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	exit(1);
}

/* Load the programs with <o>, or exit 77 when this machine cannot (not root). */
static inline struct hashlb_steer *test_steer_load_opts(const struct hashlb_steer_opts *o,
							const struct hashlb_table *first)
{
	struct hashlb_steer *s;
	struct hashlb_error err = { 0 };
	int ret;

	ret = hashlb_steer_open(o, first, &s, &err);
	if (ret == -EPERM || ret == -EACCES) {
		printf("SKIP: loading BPF programs needs root (CAP_BPF, CAP_NET_ADMIN): %s\n",
		       err.msg);
		exit(77);
	}
	if (ret < 0) {
		fprintf(stderr, "steer open: %s\n", err.msg);
		exit(1);
	}
	return s;
}

/* A file descriptor of program <prog_fd>'s map named <name>, or -1: none. */
static inline int test_map_of(int prog_fd, const char *name)
{
	uint32_t ids[32], len;
	struct bpf_prog_info pi;
	struct bpf_map_info mi;

	memset(&pi, 0, sizeof(pi));
	pi.nr_map_ids = 32;
	pi.map_ids = (uint64_t)(uintptr_t)ids;
	len = sizeof(pi);
	if (bpf_obj_get_info_by_fd(prog_fd, &pi, &len) < 0)
		exit(1);
	for (uint32_t i = 0; i < pi.nr_map_ids && i < 32; i++) {
		int m = bpf_map_get_fd_by_id(ids[i]);

		memset(&mi, 0, sizeof(mi));
		len = sizeof(mi);
		if (m >= 0 && bpf_obj_get_info_by_fd(m, &mi, &len) == 0 &&
		    strcmp(mi.name, name) == 0)
			return m;
		if (m >= 0)
			close(m);
	}
	return -1;
}

/* Load the programs with the default options (see test_steer_load_opts). */
static inline struct hashlb_steer *test_steer_load(const struct hashlb_table *first)
{
	struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY };

	return test_steer_load_opts(&o, first);
}

/* The name of the backend <t> gives <p> hashed by <key> and <seed>, or NULL
 * if none. */
static inline const char *test_table_says(const struct hashlb_table *t, const struct test_pkt *p,
					  enum hashlb_key key, uint64_t seed)
{
	struct hashlb_tuple tu;
	uint32_t i;

	test_tuple(p, &tu);
	i = hashlb_table_lookup(t, hashlb_tuple_hash(&tu, key, seed));
	return i == HASHLB_BACKEND_NONE ? NULL : hashlb_table_backend_name(t, i);
}

/* Publish <t> hashed by <key> over addresses cut to <prefix> (NULL: whole),
 * with backend i at test_backend_mac(i), the slots of the <n_held> backends
 * <held> it drops kept for their flows (hashlb_steer_set_table_holding()). */
static inline void test_publish_holding(struct hashlb_steer *s, const struct hashlb_table *t,
					enum hashlb_key key, const struct hashlb_src_prefix *prefix,
					const bool *drain, const char *const *held, uint32_t n_held)
{
	uint32_t n = hashlb_table_backend_count(t);
	struct hashlb_steer_dest *d = calloc(n, sizeof(*d));
	struct hashlb_error err = { 0 };

	for (uint32_t i = 0; i < n; i++) {
		test_backend_mac(i, d[i].mac);
		memcpy(d[i].src_mac, test_lb_mac, 6);
		d[i].keep_flows = drain && drain[i];
	}
	if (hashlb_steer_set_table_holding(s, t, key, prefix, d, held, n_held, &err) < 0) {
		fprintf(stderr, "set_table: %s\n", err.msg);
		exit(1);
	}
	free(d);
}

static inline void test_publish_prefix(struct hashlb_steer *s, const struct hashlb_table *t,
				       enum hashlb_key key, const struct hashlb_src_prefix *prefix,
				       const bool *drain)
{
	test_publish_holding(s, t, key, prefix, drain, NULL, 0);
}

/* Publish <t> with backend i at test_backend_mac(i). */
static inline void test_publish(struct hashlb_steer *s, const struct hashlb_table *t,
				enum hashlb_key key, const bool *drain)
{
	test_publish_prefix(s, t, key, NULL, drain);
}

/* A table of <names> (<down> may be NULL): weights 1, 2, 3, 1, ... by
 * position, or all 1 with <equal> (then two lists that share names give
 * those names the same weight, whatever their positions). */
static inline struct hashlb_table *test_table_w(enum hashlb_scheme scheme, uint64_t seed,
						const char *const *names, uint32_t n,
						const bool *down, bool equal)
{
	struct hashlb_backend_spec spec[64];
	struct hashlb_table_params p;
	struct hashlb_table *t;
	struct hashlb_error err = { 0 };

	hashlb_table_params_init(&p, scheme);
	p.seed = seed;
	for (uint32_t i = 0; i < n; i++) {
		spec[i].name = names[i];
		spec[i].weight = equal ? 1 : 1 + (i % 3);
		spec[i].down = down && down[i];
	}
	if (hashlb_table_build(&p, spec, n, &t, &err) < 0) {
		fprintf(stderr, "table build: %s\n", err.msg);
		exit(1);
	}
	return t;
}

static inline struct hashlb_table *test_table(enum hashlb_scheme scheme, uint64_t seed,
					      const char *const *names, uint32_t n,
					      const bool *down)
{
	return test_table_w(scheme, seed, names, n, down, false);
}

/* A packet of a flow to 10.0.0.10:80 from a random client (<rng>), flags 0. */
static inline void test_pkt_random(struct test_pkt *p, uint64_t *rng)
{
	uint64_t r = test_rand(rng);

	memset(p, 0, sizeof(*p));
	test_v4(p->src, (uint32_t)r);
	test_v4(p->dst, 0x0a00000a);
	p->sport = (uint16_t)(r >> 32);
	p->dport = 80;
}

/* Of <n> new flows to 10.0.0.10:80 from random clients (<rng>) through
 * program <fd>, how many are not sent to the backend <t> names for them
 * hashed by the 4-tuple and <seed>. */
static inline uint32_t test_off_table(int fd, const struct hashlb_table *t, uint64_t seed,
				      uint64_t *rng, uint32_t n)
{
	uint32_t wrong = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct test_pkt p;
		struct hashlb_tuple tu;
		uint8_t frame[256], out[512];
		uint32_t want;
		int v;

		test_pkt_random(&p, rng);
		v = test_run(fd, frame, test_build(&p, frame), out, NULL);
		test_tuple(&p, &tu);
		want = hashlb_table_lookup(t, hashlb_tuple_hash(&tu, HASHLB_KEY_4TUPLE, seed));
		wrong += v != XDP_TX_ || (uint32_t)test_frame_backend(out) != want;
	}
	return wrong;
}

/* Serve the <n> VIPs "ADDR:PORT" or "[ADDR6]:PORT" of <vips>, closed if <closed>
 * (hashlb_steer_close_vips()); exits on failure. */
static inline void test_vips(struct hashlb_steer *s, const char *const *vips, uint32_t n,
			     bool closed)
{
	struct sockaddr_storage ss[HLB_STEER_VIPS_MAX];
	struct hashlb_error err = { 0 };

	memset(ss, 0, sizeof(ss));
	for (uint32_t i = 0; i < n; i++) {
		char host[64];
		const char *colon = strrchr(vips[i], ':');
		int port = atoi(colon + 1);

		if (vips[i][0] == '[') {
			struct sockaddr_in6 *s6 = (void *)&ss[i];

			memcpy(host, vips[i] + 1, (size_t)(colon - vips[i] - 2));
			host[colon - vips[i] - 2] = 0;
			s6->sin6_family = AF_INET6;
			s6->sin6_port = htons((uint16_t)port);
			inet_pton(AF_INET6, host, &s6->sin6_addr);
		} else {
			struct sockaddr_in *s4 = (void *)&ss[i];

			memcpy(host, vips[i], (size_t)(colon - vips[i]));
			host[colon - vips[i]] = 0;
			s4->sin_family = AF_INET;
			s4->sin_port = htons((uint16_t)port);
			inet_pton(AF_INET, host, &s4->sin_addr);
		}
	}
	if ((closed ? hashlb_steer_close_vips(s, ss, n, &err)
		    : hashlb_steer_set_vips(s, ss, n, &err)) < 0) {
		fprintf(stderr, "%s: %s\n", closed ? "close_vips" : "set_vips", err.msg);
		exit(1);
	}
}

static inline void test_set_vips(struct hashlb_steer *s, const char *const *vips, uint32_t n)
{
	test_vips(s, vips, n, false);
}

#endif
