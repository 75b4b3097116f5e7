// SPDX-License-Identifier: MIT
/*
 * Proves that the kernel path picks exactly the backend the core library
 * picks: 100,000 random IPv4 and IPv6 tuples per table, through the XDP
 * program with BPF_PROG_TEST_RUN, ring and Maglev, with and without down
 * backends, for each hash key, against hashlb_table_lookup(); then 40,000
 * more hashed by src-ip cut to 10 hash_prefix lengths a table (the ends,
 * either side of the 64-bit word boundary, /24 and /64, then random ones:
 * the program's masking against hashlb_tuple_mask_src(); xxh64-parity
 * checks the mask arithmetic for every length), from clients packed in a
 * few prefixes so that masking changes the backends they get.
 */
#include "helpers.h"

#define TUPLES 100000
#define PREFIX_TUPLES 40000
/* tuples a prefix: each one a table publication (a grace period) */
#define PREFIX_BATCH 4000

static const char *const names[] = {
	"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"
};
#define N_NAMES (sizeof(names) / sizeof(names[0]))

static void run_variant(struct hashlb_steer *s, int fd, enum hashlb_scheme scheme, bool with_down,
			uint64_t *rng)
{
	bool down[N_NAMES] = { false };
	uint64_t seed = test_rand(rng);
	struct hashlb_table *t;
	uint32_t mismatches = 0, tuples = 0;

	if (with_down) {
		down[1] = true;
		down[4] = true;
	}
	t = test_table(scheme, seed, names, N_NAMES, down);
	/* every key with whole addresses, then src-ip (HASHLB_KEY_MAX) by prefix */
	for (enum hashlb_key pass = 0; pass <= HASHLB_KEY_MAX; pass++) {
		enum hashlb_key key = pass == HASHLB_KEY_MAX ? HASHLB_KEY_SRC_IP : pass;
		uint32_t per_key = pass == HASHLB_KEY_MAX
					   ? PREFIX_TUPLES
					   : TUPLES / HASHLB_KEY_MAX +
						     (key == 0 ? TUPLES % HASHLB_KEY_MAX : 0);
		struct hashlb_src_prefix prefix = { 0, 0 };
		uint64_t base = test_rand(rng), base2 = test_rand(rng);

		test_publish(s, t, key, NULL);
		/* Fresh flows only: the table is what is under test here. */
		hashlb_steer_flows_clear(s);
		for (uint32_t i = 0; i < per_key; i++, tuples++) {
			struct test_pkt p = { .v6 = i & 1 };
			uint8_t frame[256], out[512];
			struct hashlb_tuple tu;
			uint64_t r = test_rand(rng);
			uint16_t sport = (uint16_t)(r >> 32);
			uint32_t want;
			size_t len;
			int verdict, got;

			if (pass == HASHLB_KEY_MAX && i % PREFIX_BATCH == 0) {
				/* the ends (0 = whole), the 64-bit word's either
				 * side, the usual ones, then random lengths */
				static const struct hashlb_src_prefix fixed[] = {
					{ 24, 64 },  { 0, 0 },	{ 1, 1 },   { 32, 128 },
					{ 31, 127 }, { 8, 63 }, { 17, 65 },
				};
				uint64_t lr = test_rand(rng);
				uint32_t b = i / PREFIX_BATCH;

				prefix.v4 = (uint8_t)(lr % 33);
				prefix.v6 = (uint8_t)((lr >> 8) % 129);
				if (b < sizeof(fixed) / sizeof(fixed[0]))
					prefix = fixed[b];
				test_publish_prefix(s, t, key, &prefix, NULL);
				hashlb_steer_flows_clear(s);
			}
			if (pass == HASHLB_KEY_MAX) {
				/* clients in few prefixes: a shared random base,
				 * random bits only past bit 16 (IPv4) or 48 */
				uint64_t r2 = test_rand(rng);

				if (p.v6) {
					/* bytes 0..5 of the base, 6..7 random */
					r = (base & 0xffffffffffffull) | (r & ~0xffffffffffffull);
				} else {
					r = (base & 0xffff0000u) | (r & 0xffff);
				}
				base2 ^= r2 & (r2 >> 7) & (r2 >> 13); /* few bits change */
			}
			if (p.v6) {
				uint64_t r2 = pass == HASHLB_KEY_MAX ? base2 ^ test_rand(rng) % 3
								     : test_rand(rng);

				memcpy(p.src, &r, 8);
				memcpy(p.src + 8, &r2, 8);
				p.src[0] = 0x20; /* global unicast, never the VIP */
				inet_pton(AF_INET6, "fd00::10", p.dst);
			} else {
				test_v4(p.src, (uint32_t)r);
				test_v4(p.dst, 0x0a00000a); /* 10.0.0.10 */
			}
			p.sport = sport;
			p.dport = 80;
			len = test_build(&p, frame);
			test_tuple(&p, &tu);
			if (pass == HASHLB_KEY_MAX)
				hashlb_tuple_mask_src(&tu, &prefix);
			want = hashlb_table_lookup(t, hashlb_tuple_hash(&tu, key, seed));
			verdict = test_run(fd, frame, len, out, NULL);
			got = test_frame_backend(out);
			if (verdict != XDP_TX_ || (uint32_t)got != want) {
				if (mismatches++ < 5)
					fprintf(stderr,
						"%s key=%s prefix=/%u,/%u down=%d v6=%d: verdict "
						"%d backend %d, core says %u\n",
						hashlb_scheme_name(scheme), hashlb_key_name(key),
						prefix.v4, prefix.v6, with_down, p.v6, verdict, got,
						want);
			}
		}
	}
	printf("%-6s %-10s %u tuples (IPv4 and IPv6, every key, src-ip by prefix): %u "
	       "mismatches\n",
	       hashlb_scheme_name(scheme), with_down ? "2 down" : "all up", tuples, mismatches);
	CHECK(mismatches == 0, "%u of %u tuples disagree with the core", mismatches, tuples);
	hashlb_table_free(t);
}

int main(void)
{
	static const char *const vips[] = { "10.0.0.10:80", "[fd00::10]:80" };
	uint64_t rng = 0x68617368u;
	struct hashlb_steer *s = test_steer_load(NULL);
	int fd = hashlb_steer_prog_fd(s, HASHLB_STEER_PROG_XDP);

	test_set_vips(s, vips, 2);
	for (int scheme = 0; scheme < HASHLB_SCHEME_MAX; scheme++)
		for (int d = 0; d < 2; d++)
			run_variant(s, fd, scheme, d, &rng);
	hashlb_steer_free(s);
	return test_failures ? 1 : 0;
}
