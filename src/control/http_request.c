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

/*
 * The name of the parameter at <s> (up to its '=' or <pe>, where it ends), decoded into <buf>
 * (HLB_HTTP_NAME_MAX + 1 bytes): every reader of a request's parameters compares a name so,
 * that none of them takes name%5B%5D, as clients write the brackets, for another name than
 * another does. NULL if it holds a NUL or is longer.
 */
static const char *name_of(const char *s, const char *pe, char *buf)
{
	const char *eq = memchr(s, '=', (size_t)(pe - s));

	return decode(s, eq ? eq : pe, buf, HLB_HTTP_NAME_MAX + 1) < 0 ? NULL : buf;
}

/* A parameter of "a=1&b=2": [s, pe), its '=' at <eq> (NULL if it has none). */
struct param {
	const char *s, *eq, *pe;
};

/*
 * The parameter of "a=1&b=2" at *<at> (which ends at <end>) into <p>, *<at> moved past it and
 * its '&': every reader of a request's parameters walks them so. false once *<at> is <end>.
 */
static bool param_split(const char **at, const char *end, struct param *p)
{
	const char *amp;

	if (*at >= end)
		return false;
	amp = memchr(*at, '&', (size_t)(end - *at));
	p->s = *at;
	p->pe = amp ? amp : end;
	p->eq = memchr(p->s, '=', (size_t)(p->pe - p->s));
	*at = amp ? amp + 1 : end;
	return true;
}

/* Find <name> in "a=1&b=2" and decode its value into buf. */
static const char *param_in(const char *s, size_t len, const char *name, char *buf, size_t size)
{
	const char *end = s + len;
	char got[HLB_HTTP_NAME_MAX + 1];
	struct param p;

	while (param_split(&s, end, &p))
		if (p.eq && name_of(p.s, p.pe, got) && !strcmp(got, name))
			return decode(p.eq + 1, p.pe, buf, size) < 0 ? NULL : buf;
	return NULL;
}

/* Whether <name> is one of <known> (NULL-terminated). */
static bool name_known(const char *name, const char *const *known)
{
	for (size_t k = 0; known[k]; k++)
		if (!strcmp(known[k], name))
			return true;
	return false;
}

/* Why a parameter of "a=1&b=2" whose name, decoded, is one of <known> is refused, or
 * NULL: hlb_http_param_refused()'s, in one part of the request. */
static const char *values_refusal(const char *s, size_t len, const char *const *known, char *why,
				  size_t size)
{
	const char *end = s + len;
	char v[HLB_HTTP_VALUE_MAX + 1], name[HLB_HTTP_NAME_MAX + 1];
	struct param p;

	while (param_split(&s, end, &p)) {
		ssize_t n = 0;

		if (p.eq && name_of(p.s, p.pe, name) && name_known(name, known))
			n = decode(p.eq + 1, p.pe, v, sizeof(v));
		if (n < 0) {
			int nl = (int)(p.eq - p.s < 64 ? p.eq - p.s : 64);

			snprintf(why, size, "parameter %.*s: %s", nl, p.s,
				 n == -1 ? "the value holds a NUL byte (%00)"
					 : "the value is longer than 255 bytes");
			return why;
		}
	}
	return NULL;
}

const char *hlb_http_param_refused(const struct hlb_http_req *r, const char *const *known,
				   char *why, size_t size)
{
	const char *w = values_refusal(r->query, strlen(r->query), known, why, size);

	return w ? w : values_refusal(r->body, r->body_len, known, why, size);
}

const char *hlb_http_param(const struct hlb_http_req *r, const char *name, char *buf, size_t size)
{
	const char *v = param_in(r->query, strlen(r->query), name, buf, size);

	return v ? v : param_in(r->body, r->body_len, name, buf, size);
}

/* The next parameter of "a=1&b=2" from <*pos> (<len> bytes) whose name, decoded, is <name>:
 * its value decoded into <buf>, *pos past it. */
static const char *param_next_in(const char *s, size_t len, const char *name, size_t *pos,
				 char *buf, size_t size)
{
	const char *end = s + len, *at = s + *pos;
	char got[HLB_HTTP_NAME_MAX + 1];
	struct param p;

	while (param_split(&at, end, &p)) {
		*pos = (size_t)(at - s);
		if (p.eq && name_of(p.s, p.pe, got) && !strcmp(got, name) &&
		    decode(p.eq + 1, p.pe, buf, size) >= 0)
			return buf;
	}
	return NULL;
}

const char *hlb_http_param_next(const struct hlb_http_req *r, const char *name, size_t *pos,
				char *buf, size_t size)
{
	size_t qlen = strlen(r->query), at;
	const char *v;

	if (*pos <= qlen) { /* in the query: *pos its offset there */
		at = *pos;
		v = param_next_in(r->query, qlen, name, &at, buf, size);
		*pos = at < qlen ? at : qlen + 1;
		if (v)
			return v;
	}
	at = *pos - qlen - 1; /* in the body: *pos past the query's end */
	v = param_next_in(r->body, r->body_len, name, &at, buf, size);
	*pos = qlen + 1 + at;
	return v;
}

static const char *name_unknown(const char *s, size_t len, const char *const *known, char *buf,
				size_t size)
{
	const char *end = s + len;
	char got[HLB_HTTP_NAME_MAX + 1];
	struct param p;

	while (param_split(&s, end, &p)) {
		size_t nl = (size_t)((p.eq ? p.eq : p.pe) - p.s);

		/* decoded, as the handler reads it: st%61te=drain was refused as unknown, while
		 * a too long value of it was refused as state's (values_refusal()) */
		if (p.pe > p.s && !(name_of(p.s, p.pe, got) && name_known(got, known))) {
			snprintf(buf, size, "%.*s", (int)(nl < 64 ? nl : 64), p.s);
			return buf;
		}
	}
	return NULL;
}

const char *hlb_http_param_unknown(const struct hlb_http_req *r, const char *const *known,
				   char *buf, size_t size)
{
	const char *n = name_unknown(r->query, strlen(r->query), known, buf, size);

	return n ? n : name_unknown(r->body, r->body_len, known, buf, size);
}

/* Whether a parameter whose name, decoded, is <name> comes in "a=1&b=2" at <s> (<len> bytes). */
static bool name_in(const char *s, size_t len, const char *name)
{
	const char *end = s + len;
	char got[HLB_HTTP_NAME_MAX + 1];
	struct param p;

	while (param_split(&s, end, &p))
		if (p.pe > p.s && name_of(p.s, p.pe, got) && !strcmp(got, name))
			return true;
	return false;
}

const char *hlb_http_param_repeated(const struct hlb_http_req *r, char *buf, size_t size)
{
	const char *parts[2] = { r->query, r->body };
	size_t lens[2] = { strlen(r->query), r->body_len };

	for (int k = 0; k < 2; k++) {
		const char *next = parts[k], *end = next + lens[k];
		struct param p;

		while (param_split(&next, end, &p)) {
			size_t nl = (size_t)((p.eq ? p.eq : p.pe) - p.s);
			char name[HLB_HTTP_NAME_MAX + 1];

			/* again later in this part, or in the body after the query (decoded:
			 * backend=a&b%61ckend=b is backend twice) */
			if (name_of(p.s, p.pe, name) && name[0] &&
			    (name_in(next, (size_t)(end - next), name) ||
			     (k == 0 && name_in(r->body, r->body_len, name)))) {
				snprintf(buf, size, "%.*s", (int)(nl < 64 ? nl : 64), p.s);
				return buf;
			}
		}
	}
	return NULL;
}

/*
 * The line at <p>, up to <end>: where its text ends (at its CRLF, at its LF alone, or at
 * <end>), and into *ret_next where the next line begins (NULL if there is none). Every
 * reader of the head splits it here, so that none of them sees other lines than another.
 */
static char *line_end(char *p, const char *end, char **ret_next)
{
	char *lf = memchr(p, '\n', (size_t)(end - p));

	if (!lf) {
		*ret_next = NULL;
		return (char *)end;
	}
	*ret_next = lf + 1;
	return lf > p && lf[-1] == '\r' ? lf - 1 : lf;
}

/*
 * The value of header <name> in the header lines <hdrs> ("Name: value\r\n...",
 * NUL-terminated; NULL if none), spaces trimmed, copied into <buf>. NULL if
 * absent.
 */
static const char *header(char *hdrs, const char *name, char *buf, size_t size)
{
	size_t nl = strlen(name);
	const char *hend = hdrs ? hdrs + strlen(hdrs) : NULL; /* once: not at each line */

	for (char *p = hdrs, *next; p && *p; p = next) {
		const char *end = line_end(p, hend, &next);

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
static const char *browser_refusal(char *hdrs, bool get, char *why, size_t size)
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

/*
 * Why the request at <in> is refused by its request line and headers alone (they end at
 * <hdr_end>): a malformed request line 400, an HTTP version other than 1.1 and 1.0 505, a
 * web page's request 403 (p->status and p->msg); 0 if it is not. <in> is left as it was;
 * into *ret_sp1 and *ret_sp2 the spaces around the request target, into *ret_v11 whether
 * it is HTTP/1.1.
 */
static int head_refused(char *in, char *hdr_end, struct hlb_http_parsed *p, char **ret_sp1,
			char **ret_sp2, bool *ret_v11)
{
	char *sp1, *sp2, *hdrs, *version, *eol, saved, saved_end = *hdr_end;
	size_t vlen, ml;
	int status = 0;

	*hdr_end = '\0'; /* the head a string of its own while it is read, as it is after */
	/* the request line alone: METHOD, PATH and version are in it, not in a header */
	eol = line_end(in, hdr_end, &hdrs);
	saved = *eol;
	*eol = '\0';
	sp1 = strchr(in, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	*eol = saved;
	version = sp2 ? sp2 + 1 : NULL;
	vlen = version ? (size_t)(eol - version) : 0;
	ml = sp1 ? (size_t)(sp1 - in) : 0;
	if (!sp1 || !sp2 || sp1 == in || sp2 == sp1 + 1) {
		status = parsed_error(p, 400, "bad request line: give METHOD PATH HTTP/1.1");
	} else if (vlen != 8 ||
		   (memcmp(version, "HTTP/1.1", 8) && memcmp(version, "HTTP/1.0", 8))) {
		/* HTTP/x.y of another version: 505; anything else: 400 */
		bool other = vlen == 8 && !memcmp(version, "HTTP/", 5) &&
			     isdigit((unsigned char)version[5]) && version[6] == '.' &&
			     isdigit((unsigned char)version[7]);

		status = parsed_error(p, other ? 505 : 400,
				      other ? "this endpoint speaks HTTP/1.1 and HTTP/1.0"
					    : "bad request line: give METHOD PATH HTTP/1.1");
	} else if (browser_refusal(hdrs,
				   (ml == 3 && !memcmp(in, "GET", 3)) ||
					   (ml == 4 && !memcmp(in, "HEAD", 4)),
				   p->why, sizeof(p->why))) {
		status = parsed_error(p, 403, p->why);
	}
	*hdr_end = saved_end;
	if (!status) {
		*ret_sp1 = sp1;
		*ret_sp2 = sp2;
		*ret_v11 = !memcmp(version, "HTTP/1.1", 8);
	}
	return status;
}

/* The request in <in> is whole: its request line and headers end at <hdr_end>, its body of
 * <body_len> bytes begins at <body>. Parse it in place into <p>. */
static int request_parse(char *in, char *hdr_end, char *body, size_t body_len,
			 struct hlb_http_parsed *p)
{
	char *sp1, *sp2, *q, *target;
	bool v11;
	int status = head_refused(in, hdr_end, p, &sp1, &sp2, &v11);

	if (status)
		return status;
	*hdr_end = '\0';
	*sp1 = *sp2 = '\0';
	p->req.method = p->head ? "GET" : in; /* HEAD: the GET's answer, without its body */
	target = sp1 + 1;
	/* the absolute-form (GET http://127.0.0.1:9901/status), which RFC 9112 (3.2.2) has a
	 * server accept, as a client set to use the endpoint as its proxy sends it: its path
	 * is what follows the authority, "/" if nothing does, written over the authority's
	 * last byte (or the scheme's last '/') so that it stays in <in> (was a 404, "no such
	 * endpoint: http://...") */
	if (!strncasecmp(target, "http://", 7) || !strncasecmp(target, "https://", 8)) {
		target = strstr(target, "://") + 3;
		target += strcspn(target, "/?");
		if (*target != '/')
			*--target = '/';
	}
	q = strchr(target, '?');
	if (q)
		*q = '\0';
	p->req.path = target;
	p->req.query = q ? q + 1 : "";
	p->req.body_len = body_len;
	p->req.body = body_len ? body : "";
	/* a string of its own: what follows it (a second request, or more than
	 * Content-Length said) is not the body */
	body[body_len] = '\0';
	p->status = 200;
	return p->status;
}

/*
 * The value of a Content-Length header, [v, end): digits alone, with blanks
 * around them. Anything else ("5x", "-1", "+5", "5, 5", empty) is not read as
 * some number, which would take the body to be another length than the
 * client meant.
 */
static bool content_length(const char *v, const char *end, size_t *ret)
{
	size_t n = 0, digits = 0;

	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	for (; v < end && isdigit((unsigned char)*v); v++, digits++) {
		if (n > HLB_HTTP_REQ_MAX) /* too large either way: no overflow */
			continue;
		n = n * 10 + (size_t)(*v - '0');
	}
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	if (!digits || v != end)
		return false;
	*ret = n;
	return true;
}

/*
 * Where the head (the request line and the header lines) of the <len> bytes at <in> ends:
 * at its first empty line past the request line (those before it skipped: s->start, where the
 * head begins), each line ended by CRLF or by a LF alone (RFC 9112 2.2 lets a
 * recipient take one: printf 'GET /status HTTP/1.0\n\n' | nc). Into *ret_end where the
 * text of its last line ends, into *ret_body where the body begins; *ret_end NULL while
 * the head is not whole. Returns why it is refused, or NULL: a NUL byte or a CR alone
 * (not before a LF: RFC 9112 2.2) met first, in the bytes' order, so that however TCP cut
 * the request its error is the same and comes as soon as it does. Goes on from where <s> says
 * the last call with fewer of these bytes stopped (s->pos), so that a head that comes a byte a
 * read is looked at once, not once per read.
 */
static const char *head_find(char *in, size_t len, struct hlb_http_scan *s, char **ret_end,
			     char **ret_body)
{
	size_t i;

	*ret_end = NULL;
	/* from where the last call stopped: the bytes before are as they were */
	for (i = s->pos; i < len; i++) {
		size_t eol;

		s->scanned++;
		if (in[i] == '\0') {
			/* the request line and headers would never end (closed unanswered at the
			 * client's FIN, 408 after 10 s without) */
			return "a NUL byte in the request line or headers";
		}
		if (in[i] == '\r' && i + 1 < len && in[i + 1] != '\n')
			return "a CR alone in the request line or headers: end each line with CRLF";
		if (in[i] != '\n')
			continue;
		eol = i && in[i - 1] == '\r' ? i - 1 : i;
		if (eol == s->line && s->line == s->start) {
			/* an empty line before the request line, which RFC 9112 2.2 has a server
			 * ignore (a client's CRLF after a body it sent before, a line typed
			 * first): it was answered 400, "bad request line" */
			s->start = s->line = i + 1;
			continue;
		}
		if (eol == s->line) {
			s->pos = i; /* found again at once, by the next call */
			*ret_end = in + s->last;
			*ret_body = in + i + 1;
			return NULL;
		}
		s->last = eol;
		s->line = i + 1;
	}
	/* a CR last is looked at again with the byte after it: a CRLF (CRLFCRLF) cut there */
	s->pos = len && in[len - 1] == '\r' ? len - 1 : len;
	return NULL;
}

/* A byte of a header's name (a token: RFC 9110 5.6.2). */
static bool tchar(int c)
{
	return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

#define EXPECT_CONTINUE 1u /* Expect: 100-continue */
#define EXPECT_OTHER 2u /* an expectation other than that one */

/*
 * What the value [v, end) of an Expect line asks: EXPECT_CONTINUE and EXPECT_OTHER or'ed, 0 if
 * it is empty. The field is a list (RFC 9110 10.1.1, 5.6.1), its empty elements ignored: a
 * "100-continue," or "100-continue, 100-continue" asks a 100 alone (it was a 417).
 */
static unsigned expect_read(const char *v, const char *end)
{
	unsigned expect = 0;

	while (v < end) {
		const char *comma = memchr(v, ',', (size_t)(end - v));
		const char *e = comma ? comma : end;

		while (v < e && (*v == ' ' || *v == '\t'))
			v++;
		while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		/* case-insensitive, as RFC 9110 has it */
		if (e > v)
			expect |= e - v == 12 && !strncasecmp(v, "100-continue", 12)
					  ? EXPECT_CONTINUE
					  : EXPECT_OTHER;
		v = comma ? comma + 1 : end;
	}
	return expect;
}

/*
 * The header lines <hdrs> (NUL-terminated; NULL if none), each "Name: value": the body's
 * length into *ret_body_len (0 without a Content-Length), whether one line names
 * Transfer-Encoding into *ret_te, and what the Expect lines ask into *ret_expect
 * (EXPECT_* or'ed, 0 if none). Returns why they are refused, or NULL: a line that is
 * not a name of its own then a colon ("Content-Length : 5", a line folded onto the one
 * before, one without a colon: RFC 9112 5.1 and 5.2) would be read as no header by one
 * reader and another by another, and a Content-Length not digits alone, or given twice,
 * would take the body to be another length than the client meant.
 */
static const char *fields_read(char *hdrs, size_t *ret_body_len, bool *ret_te, unsigned *ret_expect)
{
	size_t body_len = 0;
	bool cl = false, te = false;
	unsigned expect = 0;
	const char *hend = hdrs ? hdrs + strlen(hdrs) : NULL; /* once: not at each line */

	for (char *p = hdrs, *next; p && *p; p = next) {
		const char *end = line_end(p, hend, &next), *n = p;

		while (n < end && tchar((unsigned char)*n))
			n++;
		if (n == p || n == end || *n != ':')
			return "a header line is not Name: value (no space before the colon, "
			       "none folded)";
		if (n - p == 14 && !strncasecmp(p, "content-length", 14)) {
			if (cl || !content_length(n + 1, end, &body_len))
				return "give one Content-Length, of digits alone";
			cl = true;
		}
		te |= n - p == 17 && !strncasecmp(p, "transfer-encoding", 17);
		if (n - p == 6 && !strncasecmp(p, "expect", 6))
			expect |= expect_read(n + 1, end);
	}
	*ret_body_len = body_len;
	*ret_te = te;
	*ret_expect = expect;
	return NULL;
}

int hlb_http_parse_next(char *in, size_t len, bool eof, struct hlb_http_scan *s,
			struct hlb_http_parsed *p)
{
	char *hdr_end, *body, *hdrs, *sp1, *sp2, *head, saved;
	const char *msg;
	size_t body_len = 0;
	bool te = false, v11, whole;
	unsigned expect = 0;
	int status;

	*p = (struct hlb_http_parsed){ 0 };
	in[len] = '\0';
	/* known from the start: an error answered to a HEAD has no body either */
	p->head = !strncmp(in + s->start, "HEAD ", 5);
	if (s->need && len < s->need) {
		/* the head whole and good, the body still coming, as the last call found: nothing
		 * to look at again until the body is whole (its head was read once per read) */
		if (eof)
			return parsed_error(p, 400, "the body is shorter than its Content-Length");
		p->need = s->need;
		p->head_len = s->head_len;
		p->send_continue = s->send_continue;
		return parsed_error(p, HLB_HTTP_MORE, NULL);
	}
	msg = head_find(in, len, s, &hdr_end, &body);
	head = in + s->start; /* past the empty lines before the request line */
	p->head = !strncmp(head, "HEAD ", 5);
	if (msg)
		return parsed_error(p, 400, msg);
	if (!hdr_end) {
		if (len == HLB_HTTP_REQ_MAX)
			return parsed_error(p, 413, "request too large");
		return parsed_error(p, eof ? HLB_HTTP_CLOSE : HLB_HTTP_MORE, NULL);
	}
	s->scanned += (size_t)(body - in); /* read below, once or twice for a request */
	/* the head a string of its own while its headers are read, as it was after */
	saved = *hdr_end;
	*hdr_end = '\0';
	line_end(head, hdr_end, &hdrs);
	msg = fields_read(hdrs, &body_len, &te, &expect);
	*hdr_end = saved;
	if (msg)
		return parsed_error(p, 400, msg);
	if (te) {
		/* a chunked body is not read: its parameters would go unseen, and the
		 * request be answered as if it had given none */
		return parsed_error(
			p, 411,
			"send the body with a Content-Length (Transfer-Encoding is not read)");
	}
	if (body_len > HLB_HTTP_REQ_MAX - (size_t)(body - in))
		return parsed_error(p, 413, "request too large");
	p->need = (size_t)(body - in) + body_len;
	whole = p->need <= len;
	/*
	 * What the head alone refuses is answered as soon as it is whole, not after a body that
	 * would not change it (400, 403, 505). Expect (RFC 9110 10.1.1), of HTTP/1.1 (one of
	 * HTTP/1.0 is ignored): a client that asks 100-continue waits for it before sending its
	 * body (curl: 1 s), which the connection sends otherwise (p->send_continue); another
	 * expectation is not met: 417.
	 */
	if ((expect & EXPECT_OTHER) || !whole) {
		status = head_refused(head, hdr_end, p, &sp1, &sp2, &v11);
		if (status)
			return status;
		if (v11 && (expect & EXPECT_OTHER))
			return parsed_error(p, 417,
					    "an Expect this endpoint does not meet: it meets "
					    "100-continue alone");
		p->send_continue = v11 && (expect & EXPECT_CONTINUE) && !whole;
	}
	if (!whole) {
		if (eof)
			return parsed_error(p, 400, "the body is shorter than its Content-Length");
		p->head_len = (size_t)(body - in);
		s->need = p->need;
		s->head_len = p->head_len;
		s->send_continue = p->send_continue;
		return parsed_error(p, HLB_HTTP_MORE,
				    NULL); /* the rest of the body is on its way */
	}
	return request_parse(head, hdr_end, body, body_len, p);
}

int hlb_http_parse(char *in, size_t len, bool eof, struct hlb_http_parsed *p)
{
	struct hlb_http_scan s = { 0 };

	return hlb_http_parse_next(in, len, eof, &s, p);
}

int hlb_http_parse_head(char *head, size_t len, struct hlb_http_parsed *p)
{
	struct hlb_http_scan s = { 0 };
	char *hdr_end, *body;

	*p = (struct hlb_http_parsed){ 0 };
	head[len] = '\0';
	if (head_find(head, len, &s, &hdr_end, &body) || !hdr_end || body != head + len)
		return parsed_error(p, 400, "not a request's head");
	p->head = !strncmp(head + s.start, "HEAD ", 5);
	return request_parse(head + s.start, hdr_end, body, 0, p);
}
