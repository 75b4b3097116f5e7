/* SPDX-License-Identifier: MIT */
/*
 * Tuple hashing: the canonical byte layout of a TCP connection's tuple and
 * the seeded hash of the part of it that a service's hash key selects.
 *
 * Canonical layout (36 bytes, no padding, everything in network byte order):
 *
 *   offset  0: source address, 16 bytes (IPv4 as IPv4-mapped IPv6 ::ffff:a.b.c.d)
 *   offset 16: source port, 2 bytes big-endian
 *   offset 18: destination address, 16 bytes (same mapping)
 *   offset 34: destination port, 2 bytes big-endian
 *
 * The hash is XXH64 over a prefix of that layout, with the service's 64-bit
 * seed: 16 bytes for HASHLB_KEY_SRC_IP, 18 for HASHLB_KEY_SRC_IP_PORT, 36 for
 * HASHLB_KEY_4TUPLE; a service's hash_prefix zeroes the source address's bits
 * past its prefix first (hashlb_tuple_mask_src()). Mapping IPv4 into IPv6 makes a client reaching a
 * dual-stack listener as ::ffff:a.b.c.d hash like one reaching an IPv4
 * listener. XXH64 was chosen over XXH3 because a BPF program computes it over
 * these fixed lengths with plain 64-bit arithmetic (no 128-bit multiply, no
 * secret); bpf/ computes exactly this function and a parity test proves it.
 *
 * Changing this layout or the function moves every client: it is a migration.
 */
#ifndef HASHLB_TUPLE_H
#define HASHLB_TUPLE_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

struct sockaddr;

enum hashlb_key {
	HASHLB_KEY_SRC_IP = 0, /* client affinity */
	HASHLB_KEY_SRC_IP_PORT, /* per client socket */
	HASHLB_KEY_4TUPLE, /* per connection */
	HASHLB_KEY_MAX
};

struct hashlb_tuple {
	uint8_t src[16];
	uint8_t sport[2]; /* big-endian */
	uint8_t dst[16];
	uint8_t dport[2]; /* big-endian */
};

_Static_assert(sizeof(struct hashlb_tuple) == 36, "canonical tuple is 36 bytes");

/* Number of leading bytes of the canonical tuple that <key> hashes. */
size_t hashlb_key_len(enum hashlb_key key);

/* "src-ip", "src-ip-port", "4-tuple"; NULL for an invalid key. */
const char *hashlb_key_name(enum hashlb_key key);
/* Parse a key name (the ones above, also "src_ip", "source-ip"...); -EINVAL if unknown. */
int hashlb_key_parse(const char *s, enum hashlb_key *ret_key);

/*
 * Fill <ret_tuple> from a client address <src> and the local address <dst>
 * (either may be AF_INET or AF_INET6; <dst> may be NULL: zeros). Returns 0
 * or -EAFNOSUPPORT.
 */
int hashlb_tuple_from_sockaddr(const struct sockaddr *src, const struct sockaddr *dst,
			       struct hashlb_tuple *ret_tuple);

/*
 * Parse "ADDR", "ADDR:PORT", "[V6]:PORT" or "V6" into the source half of a
 * tuple (destination zeroed); an IPv6 address may carry a zone ("%eth0"),
 * which is not hashed. Returns 0 or -EINVAL.
 */
int hashlb_tuple_parse_src(const char *s, struct hashlb_tuple *ret_tuple);

/* A canonical 16-byte address as text: "a.b.c.d" when IPv4-mapped, else IPv6. */
#define HASHLB_ADDR16_STRLEN 46
void hashlb_addr16_format(const uint8_t addr[16], char *buf, size_t size);

/*
 * A canonical address cut to its first <keep> bits (hashlb_addr16_cut()) as
 * text: the address alone when <keep> is 128, else with its length in its
 * own family: "198.51.100.0/24" (keep 120), "2001:db8:1:2::/64".
 */
#define HASHLB_ADDR16_PREFIX_STRLEN (HASHLB_ADDR16_STRLEN + 4)
void hashlb_addr16_format_prefix(const uint8_t addr[16], unsigned keep, char *buf, size_t size);

/*
 * How much of a client's address a service hashes (hash_prefix): the
 * leading <v4> bits of an IPv4 address, <v6> of an IPv6 one; 0 = all of it
 * (32, 128: the default, exactly the unmasked hash). Clients of one prefix
 * then share a backend: IPv6 privacy addresses that rotate in their /64,
 * carrier NAT pools. Applies to HASHLB_KEY_SRC_IP only (the config refuses
 * it with the other keys: their port changes with every connection anyway).
 */
struct hashlb_src_prefix {
	uint8_t v4; /* 0..32, 0 = 32 */
	uint8_t v6; /* 0..128, 0 = 128 */
};

/* Whether <p> keeps whole addresses (NULL does). */
static inline int hashlb_src_prefix_is_whole(const struct hashlb_src_prefix *p)
{
	return !p || ((p->v4 == 0 || p->v4 >= 32) && (p->v6 == 0 || p->v6 >= 128));
}

/* Whether <a> and <b> keep the same bits of every address (0 and the whole length alike). */
static inline int hashlb_src_prefix_equal(const struct hashlb_src_prefix *a,
					  const struct hashlb_src_prefix *b)
{
	return (a->v4 % 32) == (b->v4 % 32) && (a->v6 % 128) == (b->v6 % 128);
}

/* What of a service decides the hash of its clients (a table's seed is its seed too). */
struct hashlb_client_hash {
	uint64_t seed;
	enum hashlb_key key;
	struct hashlb_src_prefix prefix; /* src-ip only */
	bool accept_proxy; /* the address hashed is the PROXY header's client */
	/* of the second compared: it listens on another address than the first, which the
	 * 4-tuple key hashes (the address a client connects to) unless a PROXY header gives it */
	bool listen_moved;
};

/*
 * Whether a client hashes otherwise under <b> than under <a>: 1 with what changed in
 * <what> (<size> bytes) as "seed,hash_key,hash_prefix,accept_proxy,listen" (those of them
 * that did), else 0 with <what> "".
 */
int hashlb_client_hash_changed(const struct hashlb_client_hash *a,
			       const struct hashlb_client_hash *b, char *what, size_t size);

/*
 * How many leading bits of canonical address <addr> <p> keeps: 96 + p->v4
 * for an IPv4-mapped address (::ffff:a.b.c.d), so the mapping stays and only
 * a.b.c.d is cut; p->v6 for another; 128 when whole (NULL: 128).
 */
unsigned hashlb_src_prefix_keep(const struct hashlb_src_prefix *p, const uint8_t addr[16]);

/* Zero the bits of canonical address <addr> past its first <keep> (0..128). */
void hashlb_addr16_cut(uint8_t addr[16], unsigned keep);

/*
 * Zero the bits of <t>'s source address past <p>'s prefix
 * (hashlb_src_prefix_keep()). The source port and the destination are left
 * as they are. NULL masks nothing.
 */
void hashlb_tuple_mask_src(struct hashlb_tuple *t, const struct hashlb_src_prefix *p);

/* XXH64 of the key's prefix of <t> with <seed>. */
uint64_t hashlb_tuple_hash(const struct hashlb_tuple *t, enum hashlb_key key, uint64_t seed);

#endif
