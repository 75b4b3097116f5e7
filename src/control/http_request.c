// SPDX-License-Identifier: MIT
/*
 * The admin endpoint's requests, parsed: what any local client sends (a web
 * page's too), with no socket and no loop, so that it is tested and fuzzed
 * on a buffer alone (tests/fuzz/fuzz_http.c).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "http.h"

static int hex(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decode the value [v, end) into buf (<size> bytes, NUL-terminated): its length, or -1
 * if it holds a NUL (%00 would cut it short: "a%00zz" is not "a"), -2 if it is too long. */
static ssize_t decode(const char *v, const char *end, char *buf, size_t size)
{
	size_t o = 0;

	for (; v < end; v++) {
		int c = (unsigned char)*v;

		if (c == '+')
			c = ' ';
		else if (c == '%' && end - v > 2 && hex(v[1]) >= 0 && hex(v[2]) >= 0) {
			c = hex(v[1]) * 16 + hex(v[2]);
			v += 2;
		}
		if (c == 0)
			return -1;
		if (o + 1 >= size)
			return -2;
		buf[o++] = (char)c;
	}
	buf[o] = '\0';
	return (ssize_t)o;
}

/* Find <name> in "a=1&b=2" and decode its value into buf. */
static const char *param_in(const char *s, size_t len, const char *name, char *buf, size_t size)
{
	size_t nl = strlen(name);
	const char *end = s + len;

	while (s < end) {
		const char *amp = memchr(s, '&', (size_t)(end - s));
		const char *pe = amp ? amp : end;

		if ((size_t)(pe - s) > nl && !memcmp(s, name, nl) && s[nl] == '=')
			return decode(s + nl + 1, pe, buf, size) < 0 ? NULL : buf;
		s = pe + 1;
	}
	return NULL;
}

/*
 * Why a parameter of "a=1&b=2" is refused, or NULL: every value must decode
 * to at most HLB_HTTP_VALUE_MAX bytes with no NUL, so that a handler never
 * reads a present but unusable value as absent (and answers "give
 * weight=N", or applies the rest of a request without it).
 */
static const char *params_refusal(const char *s, size_t len, char *why, size_t size)
{
	const char *end = s + len;
	char v[HLB_HTTP_VALUE_MAX + 1];

	while (s < end) {
		const char *amp = memchr(s, '&', (size_t)(end - s));
		const char *pe = amp ? amp : end;
		const char *eq = memchr(s, '=', (size_t)(pe - s));
		ssize_t n = eq ? decode(eq + 1, pe, v, sizeof(v)) : 0;

		if (n < 0) {
			int nl = (int)(eq - s < 64 ? eq - s : 64);

			snprintf(why, size, "parameter %.*s: %s", nl, s,
				 n == -1 ? "the value holds a NUL byte (%00)"
					 : "the value is longer than 255 bytes");
			return why;
		}
		s = pe + 1;
	}
	return NULL;
}

const char *hlb_http_param(const struct hlb_http_req *r, const char *name, char *buf, size_t size)
{
	const char *v = param_in(r->query, strlen(r->query), name, buf, size);

	return v ? v : param_in(r->body, r->body_len, name, buf, size);
}

static const char *name_unknown(const char *s, size_t len, const char *const *known, char *buf,
				size_t size)
{
	const char *end = s + len;

	while (s < end) {
		const char *amp = memchr(s, '&', (size_t)(end - s));
		const char *pe = amp ? amp : end;
		const char *eq = memchr(s, '=', (size_t)(pe - s));
		size_t nl = (size_t)((eq ? eq : pe) - s), k;

		for (k = 0; known[k]; k++)
			if (strlen(known[k]) == nl && !memcmp(known[k], s, nl))
				break;
		if (pe > s && !known[k]) {
			snprintf(buf, size, "%.*s", (int)(nl < 64 ? nl : 64), s);
			return buf;
		}
		s = pe + 1;
	}
	return NULL;
}

const char *hlb_http_param_unknown(const struct hlb_http_req *r, const char *const *known,
				   char *buf, size_t size)
{
	const char *n = name_unknown(r->query, strlen(r->query), known, buf, size);

	return n ? n : name_unknown(r->body, r->body_len, known, buf, size);
}

/* The name of the parameter at <s> (up to '=' or '&' or <end>): its length. */
static size_t name_len(const char *s, const char *end)
{
	const char *amp = memchr(s, '&', (size_t)(end - s));
	const char *pe = amp ? amp : end;
	const char *eq = memchr(s, '=', (size_t)(pe - s));

	return (size_t)((eq ? eq : pe) - s);
}

/* Whether the parameter named [name, name + nl) comes in "a=1&b=2" at <s> (<len> bytes). */
static bool name_in(const char *s, size_t len, const char *name, size_t nl)
{
	const char *end = s + len;

	while (s < end) {
		const char *amp = memchr(s, '&', (size_t)(end - s));

		if (name_len(s, end) == nl && !memcmp(s, name, nl))
			return true;
		s = amp ? amp + 1 : end;
	}
	return false;
}

const char *hlb_http_param_repeated(const struct hlb_http_req *r, char *buf, size_t size)
{
	const char *parts[2] = { r->query, r->body };
	size_t lens[2] = { strlen(r->query), r->body_len };

	for (int k = 0; k < 2; k++) {
		const char *s = parts[k], *end = s + lens[k];

		while (s < end) {
			const char *amp = memchr(s, '&', (size_t)(end - s));
			const char *next = amp ? amp + 1 : end;
			size_t nl = name_len(s, end);

			/* again later in this part, or in the body after the query */
			if (nl && (name_in(next, (size_t)(end - next), s, nl) ||
				   (k == 0 && name_in(r->body, r->body_len, s, nl)))) {
				snprintf(buf, size, "%.*s", (int)(nl < 64 ? nl : 64), s);
				return buf;
			}
			s = next;
		}
	}
	return NULL;
}

/*
 * The value of header <name> in the header lines <hdrs> ("Name: value\r\n...",
 * NUL-terminated; NULL if none), spaces trimmed, copied into <buf>. NULL if
 * absent.
 */
static const char *header(const char *hdrs, const char *name, char *buf, size_t size)
{
	size_t nl = strlen(name);

	for (const char *p = hdrs; p && *p;) {
		const char *eol = strstr(p, "\r\n");
		const char *end = eol ? eol : p + strlen(p);

		if ((size_t)(end - p) > nl && !strncasecmp(p, name, nl) && p[nl] == ':') {
			const char *v = p + nl + 1;
			size_t n;

			while (v < end && (*v == ' ' || *v == '\t'))
				v++;
			while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
				end--;
			n = (size_t)(end - v) < size - 1 ? (size_t)(end - v) : size - 1;
			memcpy(buf, v, n);
			buf[n] = '\0';
			return buf;
		}
		p = eol ? eol + 2 : NULL;
	}
	return NULL;
}

/*
 * Why a request that a web page made the browser send is refused, or NULL.
 * The admin endpoint serves tools (hashlb ctl, curl, Prometheus), none of
 * which sends these headers; a page on any site could otherwise POST a form
 * to 127.0.0.1:9901/set (cross-site request forgery), or read and change
 * everything through a name of its own that it points at 127.0.0.1 (DNS
 * rebinding: the browser then calls the request same-origin). Browsers
 * mark every request a page makes with Sec-Fetch-Site (all but "none", a
 * URL the user typed), and every POST with Origin.
 */
static const char *browser_refusal(const char *hdrs, bool get, char *why, size_t size)
{
	char v[64];

	if (header(hdrs, "sec-fetch-site", v, sizeof(v)) && strcasecmp(v, "none")) {
		snprintf(why, size,
			 "refused: a request a web page made (Sec-Fetch-Site: %s); the admin "
			 "endpoint serves tools such as hashlb ctl, curl and Prometheus",
			 v);
		return why;
	}
	if (!get && header(hdrs, "origin", v, sizeof(v))) {
		snprintf(why, size,
			 "refused: a request from a web page (Origin: %s); the admin endpoint "
			 "serves tools such as hashlb ctl, curl and Prometheus",
			 v);
		return why;
	}
	return NULL;
}

/* <status> into <p>, with <msg> for an error. */
static int parsed_error(struct hlb_http_parsed *p, int status, const char *msg)
{
	p->status = status;
	p->msg = msg;
	return status;
}

/* The request in <in> is whole: its request line and headers end at <hdr_end>, its body of
 * <body_len> bytes follows. Parse it in place into <p>. */
static int request_parse(char *in, char *hdr_end, size_t body_len, struct hlb_http_parsed *p)
{
	char *sp1, *sp2, *q, *hdrs, *version;
	size_t vlen;

	*hdr_end = '\0';
	/* the request line alone: METHOD, PATH and version are in it, not in a header */
	hdrs = strstr(in, "\r\n");
	if (hdrs)
		*hdrs = '\0';
	sp1 = strchr(in, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (hdrs)
		*hdrs = '\r';
	if (!sp1 || !sp2 || sp1 == in || sp2 == sp1 + 1)
		return parsed_error(p, 400, "bad request line: give METHOD PATH HTTP/1.1");
	version = sp2 + 1;
	vlen = hdrs ? (size_t)(hdrs - version) : strlen(version);
	if (vlen != 8 || (memcmp(version, "HTTP/1.1", 8) && memcmp(version, "HTTP/1.0", 8))) {
		/* HTTP/x.y of another version: 505; anything else: 400 */
		bool other = vlen == 8 && !memcmp(version, "HTTP/", 5) &&
			     isdigit((unsigned char)version[5]) && version[6] == '.' &&
			     isdigit((unsigned char)version[7]);

		return parsed_error(p, other ? 505 : 400,
				    other ? "this endpoint speaks HTTP/1.1 and HTTP/1.0"
					  : "bad request line: give METHOD PATH HTTP/1.1");
	}
	*sp1 = *sp2 = '\0';
	if (browser_refusal(hdrs ? hdrs + 2 : NULL, !strcmp(in, "GET") || !strcmp(in, "HEAD"),
			    p->why, sizeof(p->why)))
		return parsed_error(p, 403, p->why);
	p->req.method = p->head ? "GET" : in; /* HEAD: the GET's answer, without its body */
	p->req.path = sp1 + 1;
	q = strchr(sp1 + 1, '?');
	if (q)
		*q = '\0';
	p->req.query = q ? q + 1 : "";
	p->req.body_len = body_len;
	p->req.body = body_len ? hdr_end + 4 : "";
	/* a string of its own: what follows it (a second request, or more than
	 * Content-Length said) is not the body */
	hdr_end[4 + body_len] = '\0';
	if (params_refusal(p->req.query, strlen(p->req.query), p->why, sizeof(p->why)) ||
	    params_refusal(p->req.body, p->req.body_len, p->why, sizeof(p->why)))
		return parsed_error(p, 400, p->why);
	p->status = 200;
	return p->status;
}

/*
 * The value of a Content-Length header at <v> (after its colon, up to its
 * line's end): digits alone, with blanks around them. Anything else ("5x",
 * "-1", "+5", "5, 5", empty) is not read as some number, which would take
 * the body to be another length than the client meant.
 */
static bool content_length(const char *v, size_t *ret)
{
	size_t n = 0, digits = 0;

	while (*v == ' ' || *v == '\t')
		v++;
	for (; isdigit((unsigned char)*v); v++, digits++) {
		if (n > HLB_HTTP_REQ_MAX) /* too large either way: no overflow */
			continue;
		n = n * 10 + (size_t)(*v - '0');
	}
	while (*v == ' ' || *v == '\t')
		v++;
	if (!digits || (*v && strncmp(v, "\r\n", 2)))
		return false;
	*ret = n;
	return true;
}

/*
 * Whether the first <len> bytes of <in> (the request line and headers) hold a line ended
 * by a LF alone (printf 'GET /status HTTP/1.0\n\n'): its head would never end in CRLF CRLF,
 * and the request would wait for its 408 (or be closed unanswered at the client's FIN).
 * No prefix of a good request holds one, so it is refused as soon as it comes.
 */
static bool bare_lf(const char *in, size_t len)
{
	for (const char *lf = memchr(in, '\n', len); lf;
	     lf = memchr(lf + 1, '\n', len - (size_t)(lf + 1 - in)))
		if (lf == in || lf[-1] != '\r')
			return true;
	return false;
}

int hlb_http_parse(char *in, size_t len, bool eof, struct hlb_http_parsed *p)
{
	char *hdr_end, *cl, *nul;
	size_t body_len = 0;
	bool te, cl_ok;

	*p = (struct hlb_http_parsed){ 0 };
	in[len] = '\0';
	/* known from the start: an error answered to a HEAD has no body either */
	p->head = !strncmp(in, "HEAD ", 5);
	hdr_end = strstr(in, "\r\n\r\n");
	nul = hdr_end ? NULL : memchr(in, '\0', len);
	/* whichever of a bare LF and a NUL comes first: the error of a request cut short there */
	if (bare_lf(in, hdr_end ? (size_t)(hdr_end - in) : nul ? (size_t)(nul - in) : len))
		return parsed_error(p, 400, "end each line with CRLF (\\r\\n), not a bare LF");
	if (nul) {
		/* the search stopped at it: the request line and headers would never end
		 * (closed unanswered at the client's FIN, 408 after 10 s without) */
		return parsed_error(p, 400, "a NUL byte in the request line or headers");
	}
	if (!hdr_end) {
		if (len == HLB_HTTP_REQ_MAX)
			return parsed_error(p, 413, "request too large");
		return parsed_error(p, eof ? HLB_HTTP_CLOSE : HLB_HTTP_MORE, NULL);
	}
	*hdr_end = '\0'; /* for strcasestr; request_parse sets it again */
	cl = strcasestr(in, "\r\ncontent-length:");
	cl_ok = !cl ||
		(content_length(cl + 17, &body_len) && !strcasestr(cl + 17, "\r\ncontent-length:"));
	te = strcasestr(in, "\r\ntransfer-encoding:") != NULL;
	*hdr_end = '\r';
	if (!cl_ok)
		return parsed_error(p, 400, "give one Content-Length, of digits alone");
	if (te) {
		/* a chunked body is not read: its parameters would go unseen, and the
		 * request be answered as if it had given none */
		return parsed_error(
			p, 411,
			"send the body with a Content-Length (Transfer-Encoding is not read)");
	}
	if (body_len > HLB_HTTP_REQ_MAX - (size_t)(hdr_end + 4 - in))
		return parsed_error(p, 413, "request too large");
	if ((size_t)(hdr_end + 4 - in) + body_len > len) {
		if (eof)
			return parsed_error(p, 400, "the body is shorter than its Content-Length");
		return parsed_error(p, HLB_HTTP_MORE,
				    NULL); /* the rest of the body is on its way */
	}
	return request_parse(in, hdr_end, body_len, p);
}
