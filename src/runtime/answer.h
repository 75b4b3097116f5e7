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
 * Whether the answer in <buf> (<got> bytes, NUL-terminated, its head ending at <body>, the
 * "\r\n\r\n" that ends it) has fewer bytes after its head than its Content-Length says. An
 * answer without one is taken as it is (false). *<ret_have> and *<ret_want>: the bytes there
 * and said, written when it is cut.
 */
bool hlb_answer_cut(const char *buf, const char *body, size_t got, size_t *ret_have,
		    unsigned long long *ret_want);

#endif
