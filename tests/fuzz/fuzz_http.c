/* Fuzzes hlb_http_parse() with what any local client (a web page's too) may send the admin endpoint, whole and in fragments as TCP delivers it, and checks the contract http.h states: a request waits, is answered with an error, or is parsed, the same however it was cut, parsed on from where the last read stopped (hlb_http_parse_next()) as the connection does, each byte looked at a few times at most; what waits is left as it was; a full buffer never waits; the parameters the handlers read decode within bounds. */
// SPDX-License-Identifier: MIT
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what, size_t len)
{
	if (ok)
		return;
	fprintf(stderr, "contract broken at len %zu: %s\n", len, what);
	abort();
}

/* Every parameter name a handler of admin.c asks for, and the lists it checks against. */
static const char *const names[] = { "backend", "client", "format", "max_connections",
				     "service", "state",  "taker",  "top",
				     "vip",	"weight", "",	    NULL };

struct outcome {
	int status;
	bool head;
	char msg[256];
	char method[64], path[64], query[64];
	size_t body_len;
	uint8_t body[64];
};

static bool within(const char *p, const char *in, size_t len)
{
	return p >= in && p <= in + len;
}

/* A string of the request: in the buffer, or one of the parser's own constants. */
static bool string_ok(const char *s, const char *in, size_t len)
{
	return s && (within(s, in, len) ? within(s + strlen(s), in, len)
					: !strcmp(s, "") || !strcmp(s, "GET"));
}

/* The parameters of a parsed request, as the handlers read them. */
static void check_params(const struct hlb_http_req *r, size_t len)
{
	char buf[HLB_HTTP_VALUE_MAX + 1], name[72];

	for (size_t i = 0; names[i]; i++) {
		const char *v = hlb_http_param(r, names[i], buf, sizeof(buf));

		check(!v || (v == buf && strlen(v) <= HLB_HTTP_VALUE_MAX),
		      "a value decodes into the caller's buffer, within HLB_HTTP_VALUE_MAX", len);
	}
	/* Each name present, as the fuzzer wrote it, reads back, or its value is refused (too
	 * long, a NUL) by a path that takes it: a name that decodes to itself, as those do. */
	for (int pass = 0; pass < 2; pass++) {
		const char *s = pass ? r->body : r->query;
		size_t n = pass ? r->body_len : strlen(r->query);
		const char *end = s + n;

		while (s < end) {
			const char *amp = memchr(s, '&', (size_t)(end - s));
			const char *pe = amp ? amp : end;
			const char *eq = memchr(s, '=', (size_t)(pe - s));

			if (eq && (size_t)(eq - s) <= HLB_HTTP_NAME_MAX &&
			    !memchr(s, '\0', (size_t)(eq - s))) {
				const char *const one[] = { name, NULL };
				char why[128];

				memcpy(name, s, (size_t)(eq - s));
				name[eq - s] = '\0';
				if (!strpbrk(name, "%+"))
					check(hlb_http_param(r, name, buf, sizeof(buf)) != NULL ||
						      hlb_http_param_refused(r, one, why,
									     sizeof(why)),
					      "a parameter that is there is found, or refused",
					      len);
			}
			s = pe + 1;
		}
	}
	if (hlb_http_param_unknown(r, names, name, sizeof(name)))
		check(strlen(name) <= 64, "an unknown name is cut at 64 bytes", len);
}

/* The head of <head_len> bytes that hlb_http_parse() said waits for its body: parsed alone
 * (hlb_http_parse_head()) on a copy, it is a request without a body, in the copy. */
static void check_head(const char *in, size_t head_len, size_t len)
{
	char *head = malloc(head_len + 1);
	struct hlb_http_parsed h;

	if (!head)
		abort();
	check(head_len <= len, "the head within what came", len);
	memcpy(head, in, head_len);
	check(hlb_http_parse_head(head, head_len, &h) == 200, "the head parses alone", len);
	check(string_ok(h.req.method, head, head_len) && string_ok(h.req.path, head, head_len) &&
		      string_ok(h.req.query, head, head_len) && h.req.body_len == 0,
	      "method, path and query of the head, no body", len);
	free(head);
}

static void copy_str(char *dst, size_t size, const char *s)
{
	snprintf(dst, size, "%s", s);
}

/*
 * hlb_http_parse_next() on a heap buffer of exactly <len> + 1 bytes holding <data>
 * (so that ASan sees a read past them), going on from <s> (the earlier calls' on fewer of
 * these bytes), with the checks that hold for any input.
 */
static struct outcome parse(const uint8_t *data, size_t len, bool eof, struct hlb_http_scan *s)
{
	char *in = malloc(len + 1);
	struct hlb_http_parsed p;
	struct outcome o;
	int r;

	if (!in)
		abort();
	memset(&o, 0, sizeof(o)); /* padding too: outcomes are compared whole */
	memcpy(in, data, len);
	memset(&p, 0xa5, sizeof(p));
	r = hlb_http_parse_next(in, len, eof, s, &p);
	o.status = r;
	check(r == p.status, "returns p->status", len);
	switch (r) {
	case HLB_HTTP_MORE:
		check(!eof, "waits for more only while the client may send it", len);
		check(len < HLB_HTTP_REQ_MAX, "a full buffer never waits (nothing more is read)",
		      len);
		check(!memcmp(in, data, len), "what waits is left as it was", len);
		check(!p.send_continue || p.head_len, "a 100 only once the head is whole", len);
		if (p.head_len)
			check_head(in, p.head_len, len);
		break;
	case HLB_HTTP_CLOSE:
		check(eof, "closes unanswered only a client that ended", len);
		break;
	case 200:
		check(string_ok(p.req.method, in, len) && string_ok(p.req.path, in, len) &&
			      string_ok(p.req.query, in, len),
		      "method, path and query strings of the request", len);
		check(p.req.body_len <= len, "a body within the request", len);
		check(p.req.body_len == 0 || (within(p.req.body, in, len) &&
					      within(p.req.body + p.req.body_len, in, len)),
		      "the body in the buffer", len);
		check(p.req.body[p.req.body_len] == '\0',
		      "the body a string ending at its Content-Length", len);
		check_params(&p.req, len);
		o.head = p.head;
		copy_str(o.method, sizeof(o.method), p.req.method);
		copy_str(o.path, sizeof(o.path), p.req.path);
		copy_str(o.query, sizeof(o.query), p.req.query);
		o.body_len = p.req.body_len;
		memcpy(o.body, p.req.body, p.req.body_len < 64 ? p.req.body_len : 64);
		break;
	case 400:
	case 403:
	case 411:
	case 413:
	case 417:
	case 505:
		check(p.msg && p.msg[0], "an error says why", len);
		check(p.msg != p.why || memchr(p.why, '\0', sizeof(p.why)),
		      "an error's reason terminated", len);
		o.head = p.head;
		copy_str(o.msg, sizeof(o.msg), p.msg);
		break;
	default:
		check(false, "returns MORE, CLOSE, 200 or an error status", len);
	}
	free(in);
	return o;
}

/*
 * Input: one byte of mode, then what the client sends. Mode bit 0: the
 * client shuts down writing after it; bits 1..7: the size of the fragments
 * it arrives in (0: all at once, 1: byte by byte, ...). The real connection
 * parses what it holds after each read and stops at the first answer.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outcome whole, split;
	struct hlb_http_scan ws = { 0 }, ss = { 0 };
	size_t frag, len = 0;
	bool eof;

	if (size < 1)
		return 0;
	eof = data[0] & 1;
	frag = data[0] >> 1;
	data++;
	size--;
	if (size > HLB_HTTP_REQ_MAX)
		size = HLB_HTTP_REQ_MAX; /* the connection reads no more */
	whole = parse(data, size, eof, &ws);
	if (!frag)
		return 0;
	memset(&split, 0, sizeof(split));
	split.status = HLB_HTTP_MORE;
	while (len < size && split.status == HLB_HTTP_MORE) {
		len = len + frag < size ? len + frag : size;
		split = parse(data, len, false, &ss);
	}
	if (split.status == HLB_HTTP_MORE && eof)
		split = parse(data, len, true, &ss);
	check(split.status == whole.status, "the same answer however the request was cut", len);
	check(!memcmp(&split, &whole, sizeof(split)),
	      "the same request or error however it was cut", len);
	/* a byte a read: its head once, not from its start at each read (quadratic) */
	check(ss.scanned <= 4 * len + 4, "each byte looked at a few times at most", len);
	return 0;
}
