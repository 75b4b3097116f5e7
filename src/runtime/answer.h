/* SPDX-License-Identifier: MIT */
/*
 * An HTTP answer of the admin endpoint read to the end of its stream, by hashlb ctl or by
 * the hashlb that takes its sockets over (GET /sockets): whether it came whole. The endpoint
 * gives every answer its length and closes the connection after it; a stream that ends
 * before it is an answer cut short (hashlb killed, or stopping, as it wrote it).
 */
#ifndef HASHLB_RUNTIME_ANSWER_H
#define HASHLB_RUNTIME_ANSWER_H
#include <stdbool.h>
#include <stddef.h>

/*
 * The Content-Length of the answer in <buf> (NUL-terminated, its head ending at <body>, the
 * "\r\n\r\n" that ends it): into *<ret_has> whether it gives one, into *<ret_want> its value.
 * Returns why it cannot be read, or NULL: a value that is not digits alone ("-5", which
 * strtoull() read as 2^64 - 5), past 2^64, or two different values, in one header ("5, 6")
 * or two (RFC 9112 6.3: an answer whose length is not known, which a client must not take
 * as one length or the other).
 */
const char *hlb_answer_length(const char *buf, const char *body, bool *ret_has,
			      unsigned long long *ret_want);

/*
 * Whether the answer in <buf> (<got> bytes, NUL-terminated, its head ending at <body>, the
 * "\r\n\r\n" that ends it) has fewer bytes after its head than its Content-Length says. An
 * answer without one is taken as it is (false). *<ret_have> and *<ret_want>: the bytes there
 * and said, written when it is cut. One whose Content-Length cannot be read
 * (hlb_answer_length()) is not cut: its reader refuses it first.
 */
bool hlb_answer_cut(const char *buf, const char *body, size_t got, size_t *ret_have,
		    unsigned long long *ret_want);

#endif
