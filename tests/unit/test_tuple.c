/* Proves the tuple hash is XXH64 over the canonical bytes: known answers, IPv4-mapped equivalence, parsing. */
// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "helpers.h"
#include "tuple-vectors.h"
#include "hashlb/tuple.h"

/*
 * XXH64 written out from its specification with plain 64-bit arithmetic,
 * the way a BPF program computes it: an independent check that the library
 * (libxxhash, inlined) hashes exactly the canonical bytes.
 */
#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static uint64_t rotl(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t rd32(const uint8_t *p)
{
	return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
}

static uint64_t xround(uint64_t acc, uint64_t in)
{
	return rotl(acc + in * P2, 31) * P1;
}

static uint64_t xmerge(uint64_t h, uint64_t v)
{
	return (h ^ xround(0, v)) * P1 + P4;
}

static uint64_t ref_xxh64(const uint8_t *p, size_t len, uint64_t seed)
{
	const uint8_t *end = p + len;
	uint64_t h;

	if (len >= 32) {
		uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;

		for (; end - p >= 32; p += 32) {
			v1 = xround(v1, rd64(p));
			v2 = xround(v2, rd64(p + 8));
			v3 = xround(v3, rd64(p + 16));
			v4 = xround(v4, rd64(p + 24));
		}
		h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
		h = xmerge(h, v1);
		h = xmerge(h, v2);
		h = xmerge(h, v3);
		h = xmerge(h, v4);
	} else {
		h = seed + P5;
	}
	h += len;
	for (; end - p >= 8; p += 8)
		h = rotl(h ^ xround(0, rd64(p)), 27) * P1 + P4;
	if (end - p >= 4) {
		h = rotl(h ^ rd32(p) * P1, 23) * P2 + P3;
		p += 4;
	}
	for (; p < end; p++)
		h = rotl(h ^ *p * P5, 11) * P1;
	h ^= h >> 33;
	h *= P2;
	h ^= h >> 29;
	h *= P3;
	h ^= h >> 32;
	return h;
}

static void test_key_lengths(void **state)
{
	assert_int_equal(hashlb_key_len(HASHLB_KEY_SRC_IP), 16);
	assert_int_equal(hashlb_key_len(HASHLB_KEY_SRC_IP_PORT), 18);
	assert_int_equal(hashlb_key_len(HASHLB_KEY_4TUPLE), 36);
	assert_int_equal(hashlb_key_len(HASHLB_KEY_MAX), 0);
}

/*
 * Golden values: these numbers are what every hashlb instance and the
 * kernel path compute for these tuples. Changing them is a migration.
 */
static void test_known_answers(void **state)
{
	static const enum hashlb_key keys[3] = { HASHLB_KEY_SRC_IP, HASHLB_KEY_SRC_IP_PORT,
						 HASHLB_KEY_4TUPLE };

	for (size_t v = 0; v < sizeof(tuple_vectors) / sizeof(tuple_vectors[0]); v++) {
		const struct tuple_vector *tv = &tuple_vectors[v];
		struct hashlb_tuple t;

		memcpy(&t, tv->bytes, sizeof(t));
		for (int k = 0; k < 3; k++) {
			size_t len = hashlb_key_len(keys[k]);

			assert_int_equal(hashlb_tuple_hash(&t, keys[k], tv->seed), tv->hash[k]);
			assert_int_equal(ref_xxh64(tv->bytes, len, tv->seed), tv->hash[k]);
		}
	}
}

/* The source half of a vector parses to exactly its canonical bytes. */
static void test_parse_gives_canonical_bytes(void **state)
{
	for (size_t v = 0; v < sizeof(tuple_vectors) / sizeof(tuple_vectors[0]); v++) {
		const struct tuple_vector *tv = &tuple_vectors[v];
		struct hashlb_tuple t;

		assert_int_equal(hashlb_tuple_parse_src(tv->src, &t), 0);
		assert_memory_equal(&t, tv->bytes, 18);
		for (int i = 18; i < 36; i++)
			assert_int_equal(((uint8_t *)&t)[i], 0);
		assert_int_equal(hashlb_tuple_hash(&t, HASHLB_KEY_SRC_IP_PORT, tv->seed),
				 tv->hash[1]);
	}
}

static void sin4(struct sockaddr_in *s, const char *a, uint16_t port)
{
	memset(s, 0, sizeof(*s));
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, a, &s->sin_addr), 1);
}

static void sin6(struct sockaddr_in6 *s, const char *a, uint16_t port)
{
	memset(s, 0, sizeof(*s));
	s->sin6_family = AF_INET6;
	s->sin6_port = htons(port);
	assert_int_equal(inet_pton(AF_INET6, a, &s->sin6_addr), 1);
}

/* A client seen as 192.0.2.1 or as ::ffff:192.0.2.1 (dual-stack listener) hashes the same. */
static void test_ipv4_mapped_equivalence(void **state)
{
	struct sockaddr_in s4, d4;
	struct sockaddr_in6 s6, d6;
	struct hashlb_tuple a, b, c, d;

	sin4(&s4, "192.0.2.1", 12345);
	sin4(&d4, "198.51.100.7", 80);
	sin6(&s6, "::ffff:192.0.2.1", 12345);
	sin6(&d6, "::ffff:198.51.100.7", 80);
	assert_int_equal(
		hashlb_tuple_from_sockaddr((struct sockaddr *)&s4, (struct sockaddr *)&d4, &a), 0);
	assert_int_equal(
		hashlb_tuple_from_sockaddr((struct sockaddr *)&s6, (struct sockaddr *)&d6, &b), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_memory_equal(&a, tuple_vectors[0].bytes, sizeof(a));
	for (int k = 0; k < HASHLB_KEY_MAX; k++)
		assert_int_equal(hashlb_tuple_hash(&a, k, 7), hashlb_tuple_hash(&b, k, 7));

	assert_int_equal(hashlb_tuple_parse_src("192.0.2.1:12345", &c), 0);
	assert_int_equal(hashlb_tuple_parse_src("[::ffff:192.0.2.1]:12345", &d), 0);
	assert_memory_equal(&c, &d, sizeof(c));
	assert_int_equal(hashlb_tuple_hash(&c, HASHLB_KEY_SRC_IP, 0), tuple_vectors[0].hash[0]);
}

/* The key selects what affinity means: src-ip ignores the port, the others do not. */
static void test_key_scope(void **state)
{
	struct hashlb_tuple a, b;

	assert_int_equal(hashlb_tuple_parse_src("192.0.2.1:1000", &a), 0);
	assert_int_equal(hashlb_tuple_parse_src("192.0.2.1:1001", &b), 0);
	assert_int_equal(hashlb_tuple_hash(&a, HASHLB_KEY_SRC_IP, 1),
			 hashlb_tuple_hash(&b, HASHLB_KEY_SRC_IP, 1));
	assert_int_not_equal(hashlb_tuple_hash(&a, HASHLB_KEY_SRC_IP_PORT, 1),
			     hashlb_tuple_hash(&b, HASHLB_KEY_SRC_IP_PORT, 1));
	/* the seed is part of the hash */
	assert_int_not_equal(hashlb_tuple_hash(&a, HASHLB_KEY_SRC_IP, 1),
			     hashlb_tuple_hash(&a, HASHLB_KEY_SRC_IP, 2));
	/* the 4-tuple sees the destination */
	b = a;
	b.dport[1] = 1;
	assert_int_equal(hashlb_tuple_hash(&a, HASHLB_KEY_SRC_IP_PORT, 1),
			 hashlb_tuple_hash(&b, HASHLB_KEY_SRC_IP_PORT, 1));
	assert_int_not_equal(hashlb_tuple_hash(&a, HASHLB_KEY_4TUPLE, 1),
			     hashlb_tuple_hash(&b, HASHLB_KEY_4TUPLE, 1));
}

static uint64_t src_ip_hash(const char *src, uint8_t v4, uint8_t v6)
{
	struct hashlb_src_prefix p = { v4, v6 };
	struct hashlb_tuple t;

	assert_int_equal(hashlb_tuple_parse_src(src, &t), 0);
	hashlb_tuple_mask_src(&t, &p);
	return hashlb_tuple_hash(&t, HASHLB_KEY_SRC_IP, 0x0123456789abcdefull);
}

/* hash_prefix: clients of one prefix share a key, others do not, and the default is today's hash. */
static void test_src_prefix(void **state)
{
	static const struct hashlb_src_prefix whole[] = { { 0, 0 }, { 32, 128 }, { 0, 128 } };
	struct hashlb_src_prefix v4_1 = { 1, 0 }, v6_8 = { 0, 8 }, both = { 24, 64 };
	struct hashlb_tuple t, u;

	/* whole addresses: the known answers, every key, byte for byte */
	for (size_t i = 0; i < sizeof(tuple_vectors) / sizeof(tuple_vectors[0]); i++) {
		memcpy(&t, tuple_vectors[i].bytes, sizeof(t));
		hashlb_tuple_mask_src(&t, NULL);
		for (size_t w = 0; w < sizeof(whole) / sizeof(whole[0]); w++)
			hashlb_tuple_mask_src(&t, &whole[w]);
		assert_memory_equal(&t, tuple_vectors[i].bytes, sizeof(t));
		for (int k = 0; k < HASHLB_KEY_MAX; k++)
			assert_int_equal(hashlb_tuple_hash(&t, k, tuple_vectors[i].seed),
					 tuple_vectors[i].hash[k]);
	}
	assert_int_equal(src_ip_hash("192.0.2.1", 32, 128), 0xf24513edae98d004ull);

	/* IPv6 privacy addresses of one /64 */
	assert_int_equal(src_ip_hash("2001:db8:1:2:aaaa:bbbb:cccc:dddd", 0, 64),
			 src_ip_hash("2001:db8:1:2::7", 0, 64));
	assert_int_not_equal(src_ip_hash("2001:db8:1:2:aaaa:bbbb:cccc:dddd", 0, 0),
			     src_ip_hash("2001:db8:1:2::7", 0, 0));
	assert_int_not_equal(src_ip_hash("2001:db8:1:2::7", 0, 64),
			     src_ip_hash("2001:db8:1:3::7", 0, 64));
	/* the masked key is the prefix's own address's: zeros past it */
	assert_int_equal(src_ip_hash("2001:db8:1:2:aaaa::1", 0, 64),
			 src_ip_hash("2001:db8:1:2::", 0, 0));
	assert_int_equal(src_ip_hash("2001:db8:1:2::1", 0, 61), src_ip_hash("2001:db8:1::", 0, 0));

	/* an IPv4 /24 (a carrier NAT pool), and a prefix off a byte boundary */
	assert_int_equal(src_ip_hash("198.51.100.7", 24, 0), src_ip_hash("198.51.100.200", 24, 0));
	assert_int_not_equal(src_ip_hash("198.51.100.7", 0, 0),
			     src_ip_hash("198.51.100.200", 0, 0));
	assert_int_not_equal(src_ip_hash("198.51.100.7", 24, 0),
			     src_ip_hash("198.51.101.7", 24, 0));
	assert_int_equal(src_ip_hash("10.0.16.1", 20, 0), src_ip_hash("10.0.31.255", 20, 0));
	assert_int_equal(src_ip_hash("10.0.31.255", 20, 0), src_ip_hash("10.0.16.0", 0, 0));
	assert_int_not_equal(src_ip_hash("10.0.16.1", 20, 0), src_ip_hash("10.0.32.1", 20, 0));
	/* through a dual-stack listener: the IPv4 prefix, not the IPv6 one */
	assert_int_equal(src_ip_hash("::ffff:198.51.100.7", 24, 64),
			 src_ip_hash("198.51.100.0", 0, 0));

	/* the IPv4 prefix masks a.b.c.d only, never the ::ffff: mapping; the
	 * IPv6 one never touches an IPv4 client; port and destination stay */
	memcpy(&t, tuple_vectors[0].bytes, sizeof(t));
	u = t;
	hashlb_tuple_mask_src(&t, &v6_8);
	assert_memory_equal(&t, &u, sizeof(t));
	hashlb_tuple_mask_src(&t, &v4_1);
	assert_int_equal(t.src[10], 0xff);
	assert_int_equal(t.src[11], 0xff);
	assert_int_equal(t.src[12], 128); /* 192 = 0b11000000, its first bit */
	assert_int_equal(t.src[13] | t.src[14] | t.src[15], 0);
	assert_memory_equal(t.sport, u.sport, sizeof(u) - sizeof(u.src));
	memcpy(&t, tuple_vectors[2].bytes, sizeof(t));
	u = t;
	hashlb_tuple_mask_src(&t, &both);
	assert_memory_equal(t.src, u.src, 8);
	for (int i = 8; i < 16; i++)
		assert_int_equal(t.src[i], 0);
	assert_memory_equal(t.sport, u.sport, sizeof(u) - sizeof(u.src));
}

/* <src> cut by {v4, v6} as client_prefix names a client (/clients): its text. */
static const char *prefix_name(const char *src, uint8_t v4, uint8_t v6)
{
	static char buf[HASHLB_ADDR16_PREFIX_STRLEN];
	struct hashlb_src_prefix p = { v4, v6 };
	struct hashlb_tuple t;
	unsigned keep;

	assert_int_equal(hashlb_tuple_parse_src(src, &t), 0);
	keep = hashlb_src_prefix_keep(&p, t.src);
	hashlb_addr16_cut(t.src, keep);
	hashlb_addr16_format_prefix(t.src, keep, buf, sizeof(buf));
	return buf;
}

/* client_prefix: a client's prefix in its own family's length, the whole address as it is. */
static void test_prefix_names(void **state)
{
	(void)state;
	assert_string_equal(prefix_name("198.51.100.7", 24, 64), "198.51.100.0/24");
	assert_string_equal(prefix_name("::ffff:198.51.100.7", 24, 64), "198.51.100.0/24");
	assert_string_equal(prefix_name("198.51.100.7", 32, 64), "198.51.100.7");
	assert_string_equal(prefix_name("198.51.100.7", 0, 0), "198.51.100.7");
	assert_string_equal(prefix_name("10.0.31.255", 20, 128), "10.0.16.0/20");
	assert_string_equal(prefix_name("2001:db8:1:2:aaaa:bbbb:cccc:dddd", 24, 64),
			    "2001:db8:1:2::/64");
	assert_string_equal(prefix_name("2001:db8:1:2::7", 24, 128), "2001:db8:1:2::7");
	assert_string_equal(prefix_name("2001:db8:1:ffff::1", 32, 49), "2001:db8:1:8000::/49");
	assert_string_equal(prefix_name("2001:db8::1", 32, 1), "::/1");
	assert_int_equal(hashlb_src_prefix_keep(NULL, (const uint8_t[16]){ 0x20 }), 128);
}

static void test_from_sockaddr_errors(void **state)
{
	struct sockaddr_un su = { .sun_family = AF_UNIX };
	struct sockaddr_in s4;
	struct hashlb_tuple t, before;

	memset(&t, 0xaa, sizeof(t));
	before = t;
	sin4(&s4, "192.0.2.1", 1);
	assert_int_equal(hashlb_tuple_from_sockaddr((struct sockaddr *)&su, NULL, &t),
			 -EAFNOSUPPORT);
	assert_int_equal(
		hashlb_tuple_from_sockaddr((struct sockaddr *)&s4, (struct sockaddr *)&su, &t),
		-EAFNOSUPPORT);
	/* ret_ is written only on success */
	assert_memory_equal(&t, &before, sizeof(t));
	/* a NULL destination is zeros */
	assert_int_equal(hashlb_tuple_from_sockaddr((struct sockaddr *)&s4, NULL, &t), 0);
	for (int i = 18; i < 36; i++)
		assert_int_equal(((uint8_t *)&t)[i], 0);
}

static void test_parse_src(void **state)
{
	static const char *const bad[] = {
		"",
		":80",
		"192.0.2.1:",
		"192.0.2.1:65536",
		"192.0.2.1:-1",
		"192.0.2.1:8x",
		"192.0.2.256",
		"[2001:db8::1",
		"[2001:db8::1]x",
		"host.example",
		"[]:80",
		"1.2.3.4.5",
		/* looser than a config's address: found by tests/fuzz/fuzz_addr */
		"[::]:\t3",
		"192.0.2.1: 80",
		"192.0.2.1:+80",
		"192.0.2.1:-0",
		"192.0.2.1:000080",
		"[192.0.2.1]:80",
		"[192.0.2.1]",
		/* a zone is an IPv6 address's only, one name of under IF_NAMESIZE */
		"192.0.2.1%eth0",
		"192.0.2.1%eth0:80",
		"fe80::1%",
		"[fe80::1%]:80",
		"fe80::1%eth0:80",
		"fe80::1%a%b",
		"fe80::1%0123456789abcdef",
		"%eth0",
		/* and a name as interfaces have them: no bracket, space or control */
		"::%0]",
		"[::%0]]:80",
		"fe80::1%eth 0",
		"fe80::1%eth\t0",
	};
	struct hashlb_tuple t;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (hashlb_tuple_parse_src(bad[i], &t) != -EINVAL)
			fail_msg("'%s' was accepted", bad[i]);
	}
	assert_int_equal(hashlb_tuple_parse_src("2001:db8::1", &t), 0);
	assert_int_equal(t.src[0], 0x20);
	assert_int_equal(t.src[15], 1);
	assert_int_equal(t.sport[0] | t.sport[1], 0);
	assert_int_equal(hashlb_tuple_parse_src("[2001:db8::1]:443", &t), 0);
	assert_int_equal(t.sport[0], 0x01);
	assert_int_equal(t.sport[1], 0xbb);
	assert_int_equal(hashlb_tuple_parse_src("10.1.2.3", &t), 0);
	assert_int_equal(t.src[10], 0xff);
	assert_int_equal(t.src[12], 10);
	assert_int_equal(hashlb_tuple_parse_src("10.1.2.3:080", &t), 0); /* as a config reads it */
	assert_int_equal(t.sport[1], 80);
	assert_int_equal(hashlb_tuple_parse_src("[::1]", &t), 0);
	{
		/* a link-local client as ip and ss write it: its zone is not hashed */
		struct hashlb_tuple z;

		assert_int_equal(hashlb_tuple_parse_src("[fe80::1]:443", &t), 0);
		assert_int_equal(hashlb_tuple_parse_src("[fe80::1%eth0]:443", &z), 0);
		assert_memory_equal(&t, &z, sizeof(t));
		assert_int_equal(hashlb_tuple_parse_src("fe80::1", &t), 0);
		assert_int_equal(hashlb_tuple_parse_src("fe80::1%2", &z), 0);
		assert_memory_equal(&t, &z, sizeof(t));
	}
}

static void test_key_names(void **state)
{
	enum hashlb_key k;

	for (int i = 0; i < HASHLB_KEY_MAX; i++) {
		assert_int_equal(hashlb_key_parse(hashlb_key_name(i), &k), 0);
		assert_int_equal(k, i);
	}
	assert_null(hashlb_key_name(HASHLB_KEY_MAX));
	assert_int_equal(hashlb_key_parse("SRC-IP", &k), 0);
	assert_int_equal(k, HASHLB_KEY_SRC_IP);
	assert_int_equal(hashlb_key_parse("5-tuple", &k), -EINVAL);
	assert_int_equal(hashlb_key_parse("src ip", &k), -EINVAL);
}

/* The other spellings the docs list (README, configs/full.yaml): a config written with
 * them keeps working, each the key its canonical name is. */
static void test_key_aliases(void **state)
{
	static const struct {
		const char *alias;
		enum hashlb_key key;
	} aliases[] = {
		{ "src_ip", HASHLB_KEY_SRC_IP },
		{ "source-ip", HASHLB_KEY_SRC_IP },
		{ "src_ip_port", HASHLB_KEY_SRC_IP_PORT },
		{ "4tuple", HASHLB_KEY_4TUPLE },
		{ "four-tuple", HASHLB_KEY_4TUPLE },
		{ "Src_IP_Port", HASHLB_KEY_SRC_IP_PORT },
	};
	enum hashlb_key k;

	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
		assert_int_equal(hashlb_key_parse(aliases[i].alias, &k), 0);
		assert_int_equal(k, aliases[i].key);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_lengths),
		cmocka_unit_test(test_known_answers),
		cmocka_unit_test(test_parse_gives_canonical_bytes),
		cmocka_unit_test(test_ipv4_mapped_equivalence),
		cmocka_unit_test(test_key_scope),
		cmocka_unit_test(test_src_prefix),
		cmocka_unit_test(test_prefix_names),
		cmocka_unit_test(test_from_sockaddr_errors),
		cmocka_unit_test(test_parse_src),
		cmocka_unit_test(test_key_names),
		cmocka_unit_test(test_key_aliases),
	};

	return cmocka_run_group_tests_name("tuple", tests, NULL, NULL);
}
