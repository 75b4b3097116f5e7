/* Fuzzes hlb_check_reply() with what a backend answers a health check with send/expect, in the pieces recv() hands the check, and checks the contract check.h states: it passes when the reply starts with <expect>, whatever follows, fails when it differs or ends short, and waits while it matches so far, however it was cut. */
// SPDX-License-Identifier: MIT
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define EXPECT_MAX 1024 /* the config's CHECK_PAYLOAD_MAX */

static void check(bool ok, const char *what, size_t len)
{
	if (ok)
		return;
	fprintf(stderr, "contract broken at %zu bytes of reply: %s\n", len, what);
	abort();
}

static void done(void *arg, bool ok, uint64_t latency_ns)
{
	(void)arg, (void)ok, (void)latency_ns;
}

/*
 * Input: the length of <expect> (two bytes, modulo EXPECT_MAX + 1), a mode
 * byte, <expect>, then the backend's reply. Mode bit 0: the backend closes
 * after its reply; bit 1: pieces longer than what is still expected (as a
 * caller that does not bound its reads would pass); bits 2..7: the size of
 * the pieces (0: as recv() into the check's 1 KiB buffer).
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct hlb_check c;
	size_t elen, off = 0, want_ok;
	bool closes, over;
	unsigned piece;
	const uint8_t *reply;
	size_t rlen;
	int r = 0;

	if (size < 3)
		return 0;
	elen = (size_t)(data[0] << 8 | data[1]) % (EXPECT_MAX + 1);
	closes = data[2] & 1;
	over = data[2] & 2;
	piece = data[2] >> 2;
	data += 3;
	size -= 3;
	if (elen > size)
		elen = size;
	reply = data + elen;
	rlen = size - elen;

	hlb_check_init(&c, (struct sockaddr *)&sin, sizeof(sin), 1000, 1000, done, NULL);
	if (hlb_check_set_payload(&c, "x", 1, data, (uint32_t)elen) < 0)
		abort(); /* out of memory: not the input's fault */
	/* What the verdict must be: the reply starts with <expect>. */
	want_ok = rlen >= elen && !memcmp(reply, data, elen);
	while (off < rlen && c.got < c.expect_len) {
		size_t want = c.expect_len - c.got;
		size_t n = piece ? piece : 1024;
		uint8_t *copy;

		if (!over && n > want)
			n = want;
		if (n > rlen - off)
			n = rlen - off;
		copy = malloc(n ? n : 1); /* exactly its bytes, for ASan */
		if (!copy)
			abort();
		memcpy(copy, reply + off, n);
		r = hlb_check_reply(&c, copy, n);
		free(copy);
		off += n;
		check(r >= -1 && r <= 1, "returns 1, 0 or -1", off);
		check(c.got <= c.expect_len, "never matched past <expect>", off);
		if (r != 0)
			break;
	}
	if (c.expect_len == 0) {
		check(c.got == 0, "nothing expected, nothing matched", off);
	} else if (r == 0 && closes) {
		r = hlb_check_reply(&c, NULL, 0);
		check(r == (c.got == c.expect_len ? 1 : -1), "a reply that ends short fails", off);
	}
	if (c.expect_len) {
		check((r == 1) == want_ok || (r == 0 && !closes),
		      "passes exactly when the reply starts with <expect>", off);
		check(r != -1 || !want_ok, "fails only a reply that differs or ends short", off);
		check(r != 0 || (!closes && rlen < elen && !memcmp(reply, data, rlen)),
		      "waits only while what came matches and the backend may send more", off);
	}
	hlb_check_stop(&c);
	return 0;
}
