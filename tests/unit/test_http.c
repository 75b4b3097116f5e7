// SPDX-License-Identifier: MIT
/*
 * The admin endpoint's request parser (src/control/http_request.c) on
 * buffers alone: a request is answered the same however TCP cut it, and its
 * body, a C string as http.h promises, ends at its Content-Length; and the
 * server (src/control/http.c) answers other requests while one a handler
 * held waits, then sends the held one's answer when given. (The JSON
 * strings of the answers: test_buf.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "control/control.h"
#include "control/http.h"

/* hlb_http_parse() on a copy of <s> in a buffer of its own length + 1, kept in <in>. */
static int parse(const char *s, bool eof, char **in, struct hlb_http_parsed *p)
{
	size_t len = strlen(s);

	*in = malloc(len + 1);
	assert_non_null(*in);
	memcpy(*in, s, len);
	return hlb_http_parse(*in, len, eof, p);
}

static void test_request_in_fragments_waits_then_parses(void **state)
{
	static const char req[] = "POST /set?service=web HTTP/1.1\r\nHost: x\r\n"
				  "Content-Length: 22\r\n\r\nbackend=b1&state=drain";
	struct hlb_http_parsed p;
	char buf[HLB_HTTP_VALUE_MAX + 1], *in;

	(void)state;
	/* every prefix waits for more, and is left as it was */
	for (size_t cut = 0; cut < sizeof(req) - 1; cut++) {
		char part[sizeof(req)];

		memcpy(part, req, cut);
		part[cut] = '\0';
		assert_int_equal(parse(part, false, &in, &p), HLB_HTTP_MORE);
		assert_memory_equal(in, req, cut);
		free(in);
	}
	assert_int_equal(parse(req, false, &in, &p), 200);
	assert_string_equal(p.req.method, "POST");
	assert_string_equal(p.req.path, "/set");
	assert_string_equal(p.req.query, "service=web");
	assert_int_equal(p.req.body_len, 22);
	assert_string_equal(hlb_http_param(&p.req, "state", buf, sizeof(buf)), "drain");
	free(in);
}

/* A request target in the absolute-form, as a client sends it to the endpoint set as its
 * proxy, is answered as its path (RFC 9112, 3.2.2: a server MUST accept it); before, its
 * path was the whole URL, a 404. */
static void test_absolute_form_target(void **state)
{
	static const struct {
		const char *line, *path, *query;
	} cases[] = {
		{ "GET http://127.0.0.1:9901/status?format=text HTTP/1.1", "/status",
		  "format=text" },
		{ "GET HTTPS://[::1]:9901/metrics HTTP/1.1", "/metrics", "" },
		{ "GET http://localhost HTTP/1.1", "/", "" },
		{ "GET http://localhost?format=json HTTP/1.1", "/", "format=json" },
		{ "GET http://?x=1 HTTP/1.1", "/", "x=1" },
		{ "GET ?x=1 HTTP/1.1", "", "x=1" }, /* no path, not the absolute-form: a 404 */
		{ "GET /http://x/status HTTP/1.1", "/http://x/status", "" }, /* origin-form */
		{ "OPTIONS * HTTP/1.1", "*", "" },
	};
	struct hlb_http_parsed p;
	char req[128], *in;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(req, sizeof(req), "%s\r\nHost: x\r\n\r\n", cases[i].line);
		assert_int_equal(parse(req, false, &in, &p), 200);
		assert_string_equal(p.req.path, cases[i].path);
		assert_string_equal(p.req.query, cases[i].query);
		free(in);
	}
}

static void test_client_that_ends_early(void **state)
{
	struct hlb_http_parsed p;
	char *in;

	(void)state;
	assert_int_equal(parse("GET /sta", true, &in, &p), HLB_HTTP_CLOSE);
	free(in);
	assert_int_equal(
		parse("POST /set HTTP/1.1\r\nContent-Length: 9\r\n\r\nstate", true, &in, &p), 400);
	free(in);
}

/* What follows the body (a second request, or more than Content-Length said) is
 * not the body: a handler reading req.body as a string sees the body alone. */
static void test_body_ends_at_its_length(void **state)
{
	static const char req[] = "POST /set HTTP/1.1\r\nContent-Length: 11\r\n\r\nstate=drain"
				  "GET /status HTTP/1.1\r\n\r\n";
	struct hlb_http_parsed p;
	char *in;

	(void)state;
	assert_int_equal(parse(req, false, &in, &p), 200);
	assert_int_equal(p.req.body_len, 11);
	assert_string_equal(p.req.body, "state=drain");
	free(in);
}

/* The request line is the first line: a method, path or version in a header is not one. */
static void test_request_line_is_the_first_line(void **state)
{
	struct hlb_http_parsed p;
	char *in;

	(void)state;
	assert_int_equal(parse("GET\r\nX: /status HTTP/1.1\r\n\r\n", false, &in, &p), 400);
	free(in);
	assert_int_equal(parse("GET /status\r\nX: a HTTP/1.1\r\n\r\n", false, &in, &p), 400);
	free(in);
	assert_int_equal(parse("GET /status HTTP/1.1\r\nX: a b\r\n\r\n", false, &in, &p), 200);
	assert_string_equal(p.req.path, "/status");
	free(in);
}

/* A Content-Length is digits alone, given once: another value is refused, not read as
 * some length (the body taken shorter or longer than the client meant). */
static void test_content_length_digits_once(void **state)
{
	static const char *const bad[] = { "5x", "-1", "+5", "", " ", "5 5", "0x5", "5,5" };
	struct hlb_http_parsed p;
	char req[256], *in;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(req, sizeof(req),
			 "POST /set HTTP/1.1\r\nContent-Length:%s\r\n\r\nstate=drain", bad[i]);
		assert_int_equal(parse(req, false, &in, &p), 400);
		free(in);
	}
	assert_int_equal(parse("POST /set HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5"
			       "\r\n\r\nstate",
			       false, &in, &p),
			 400);
	free(in);
	assert_int_equal(parse("POST /set HTTP/1.1\r\nContent-Length: \t11 \r\n\r\nstate=drain",
			       false, &in, &p),
			 200);
	assert_int_equal(p.req.body_len, 11);
	free(in);
	assert_int_equal(parse("POST /set HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n"
			       "\r\nstate",
			       false, &in, &p),
			 413);
	free(in);
}

static void test_param_given_twice_is_found(void **state)
{
	static const struct {
		const char *query, *body, *twice;
	} cases[] = {
		{ "backend=a&state=drain", "", NULL },
		{ "backend=a&state=drain&backend=b", "", "backend" },
		{ "backend=a", "state=drain&backend=b", "backend" }, /* the query's, in the body */
		{ "", "state=drain&state=ready", "state" },
		{ "ab=1&a=2&b", "abc=3", NULL }, /* names alike are not the same */
		{ "x&x", "", "x" },
		{ "&&a=1&", "&", NULL },
	};
	char buf[72];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct hlb_http_req r = { .method = "POST",
					  .path = "/set",
					  .query = cases[i].query,
					  .body = cases[i].body,
					  .body_len = strlen(cases[i].body) };
		const char *got = hlb_http_param_repeated(&r, buf, sizeof(buf));

		if (cases[i].twice)
			assert_string_equal(got, cases[i].twice);
		else
			assert_null(got);
	}
}

/* A parameter given any number of times (/metrics?name[]=a&name[]=b) is read whole, in the
 * order given, query then body, its name compared decoded: name%5B%5D, the brackets as
 * Prometheus' scrape params write them (Go's url.Values), is name[]. */
static void test_repeated_param_read_in_order(void **state)
{
	static const struct {
		const char *query, *body, *want;
	} cases[] = {
		{ "name[]=a&name%5B%5D=b&x=1&name%5b%5d=c", "name[]=d", "a,b,c,d," },
		{ "", "name[]=%61+b&name[]=", "a b,," }, /* values decoded; an empty one */
		{ "name[]=a&", "&name[]=b", "a,b," },
		{ "name=a&names[]=b&name[]", "name[]x=c",
		  "" }, /* names alike, one without a value */
		{ "", "", "" },
	};
	char v[HLB_HTTP_VALUE_MAX + 1], got[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct hlb_http_req r = { .method = "GET",
					  .path = "/metrics",
					  .query = cases[i].query,
					  .body = cases[i].body,
					  .body_len = strlen(cases[i].body) };
		size_t pos = 0, o = 0;

		got[0] = '\0';
		while (hlb_http_param_next(&r, "name[]", &pos, v, sizeof(v)))
			o += (size_t)snprintf(got + o, sizeof(got) - o, "%s,", v);
		assert_string_equal(got, cases[i].want);
		/* at the end it stays there */
		assert_null(hlb_http_param_next(&r, "name[]", &pos, v, sizeof(v)));
	}
}

static void test_nul_in_the_head_is_refused(void **state)
{
	static const char *const reqs[] = {
		"GET /status\0 HTTP/1.1\r\n\r\n",
		"GET /status HTTP/1.1\r\nX: a\0b\r\n\r\n",
		"\0",
	};
	static const size_t lens[] = { 25, 32, 1 };
	struct hlb_http_parsed p;
	char in[64];

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		/* answered 400 at once, the client done or not (it was closed unanswered at
		 * its FIN, or answered 408 after 10 s) */
		for (int eof = 0; eof < 2; eof++) {
			memcpy(in, reqs[i], lens[i]);
			assert_int_equal(hlb_http_parse(in, lens[i], eof, &p), 400);
			assert_non_null(strstr(p.msg, "NUL"));
		}
	}
	/* after the head, in the body, it is a parameter's: refused as that one, by a path that
	 * takes it (hlb_http_param_refused()) */
	memcpy(in, "POST /set HTTP/1.1\r\nContent-Length: 3\r\n\r\na=\0", 44);
	assert_int_equal(hlb_http_parse(in, 44, false, &p), 200);
	{
		static const char *const a[] = { "a", NULL };
		char why[128];

		assert_non_null(hlb_http_param_refused(&p.req, a, why, sizeof(why)));
		assert_non_null(strstr(why, "parameter a: the value holds a NUL byte"));
	}
}

/* Expect (RFC 9110 10.1.1): a HTTP/1.1 client that asks 100-continue and has not sent its
 * body yet is told to go on (curl waits 1 s for it, then sends the body anyway), unless its
 * head alone is refused, which is answered then; another expectation gets 417; HTTP/1.0's
 * Expect is ignored. Before, none got a 100, and Expect: bogus was served. */
static void test_expect_continue(void **state)
{
	static const char head11[] = "POST /set HTTP/1.1\r\nHost: x\r\nexpect:  100-Continue \r\n"
				     "Content-Length: 9\r\n\r\n";
	static const struct {
		const char *req;
		int status;
		bool send_continue;
	} cases[] = {
		{ "POST /set HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n",
		  HLB_HTTP_MORE, true },
		{ "POST /set HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\nback",
		  HLB_HTTP_MORE, true },
		/* the body whole already: served, no 100 before the answer */
		{ "POST /set HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\nbackend=a",
		  200, false },
		{ "POST /set HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n", 200,
		  false },
		/* HTTP/1.0: ignored (RFC 9110: MUST) */
		{ "POST /set HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n",
		  HLB_HTTP_MORE, false },
		{ "POST /set HTTP/1.0\r\nExpect: x\r\nContent-Length: 1\r\n\r\na", 200, false },
		/* what the head refuses is answered at once, not after a 100 and the body */
		{ "POST /set HTTP/1.1\r\nExpect: 100-continue\r\nOrigin: http://x\r\n"
		  "Content-Length: 9\r\n\r\n",
		  403, false },
		{ "POST /set HTTP/2.0\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n", 505,
		  false },
		{ "POST /set HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 99999\r\n\r\n",
		  413, false },
		/* another expectation, alone or in the list, body whole or not: 417 */
		{ "POST /set HTTP/1.1\r\nExpect: bogus\r\nContent-Length: 9\r\n\r\n", 417, false },
		{ "GET /status HTTP/1.1\r\nExpect: 100-continue, x\r\n\r\n", 417, false },
		{ "GET /status HTTP/1.1\r\nExpect: 100-continue\r\nExpect: x\r\n\r\n", 417, false },
		/* an empty one asks nothing */
		{ "GET /status HTTP/1.1\r\nExpect: \r\n\r\n", 200, false },
		/* a list: its empty elements ignored, 100-continue twice asks it once (a 417) */
		{ "POST /set HTTP/1.1\r\nExpect: 100-continue,\r\nContent-Length: 9\r\n\r\n",
		  HLB_HTTP_MORE, true },
		{ "POST /set HTTP/1.1\r\nExpect: , 100-continue ,100-Continue\r\n"
		  "Content-Length: 9\r\n\r\n",
		  HLB_HTTP_MORE, true },
		{ "GET /status HTTP/1.1\r\nExpect: ,\t,\r\n\r\n", 200, false },
		{ "GET /status HTTP/1.1\r\nExpect: x,100-continue\r\n\r\n", 417, false },
	};
	struct hlb_http_parsed p;
	char *in;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(parse(cases[i].req, false, &in, &p), cases[i].status);
		assert_int_equal(p.send_continue, cases[i].send_continue);
		if (cases[i].status == HLB_HTTP_MORE) /* left as it was */
			assert_memory_equal(in, cases[i].req, strlen(cases[i].req));
		if (cases[i].status == 417)
			assert_non_null(strstr(p.msg, "100-continue"));
		free(in);
	}
	/* the header's name and value in any case, blanks around the value */
	assert_int_equal(parse(head11, false, &in, &p), HLB_HTTP_MORE);
	assert_true(p.send_continue);
	free(in);
}

/*
 * A parameter's name is read decoded by every reader, as its value is: st%61te=drain is the
 * state, and backend=a&b%61ckend=b gives the backend twice. hlb_http_param_unknown() compared
 * names as written: st%61te was refused as unknown, while a too long value of it was refused
 * as state's (hlb_http_param_refused() decoded the names).
 */
static void test_names_read_decoded(void **state)
{
	static const char *const set[] = { "backend", "state", NULL };
	struct hlb_http_parsed p;
	char buf[HLB_HTTP_VALUE_MAX + 1], name[72], *in;

	(void)state;
	assert_int_equal(parse("POST /set?st%61te=drain HTTP/1.1\r\nContent-Length: 11\r\n\r\n"
			       "b%61ckend=a",
			       false, &in, &p),
			 200);
	assert_null(hlb_http_param_unknown(&p.req, set, name, sizeof(name)));
	assert_string_equal(hlb_http_param(&p.req, "state", buf, sizeof(buf)), "drain");
	assert_string_equal(hlb_http_param(&p.req, "backend", buf, sizeof(buf)), "a");
	assert_null(hlb_http_param_repeated(&p.req, name, sizeof(name)));
	free(in);
	assert_int_equal(parse("POST /set?backend=a&st%61tf=x HTTP/1.1\r\nContent-Length: 11\r\n"
			       "\r\nb%61ckend=b",
			       false, &in, &p),
			 200);
	assert_string_equal(hlb_http_param_unknown(&p.req, set, name, sizeof(name)), "st%61tf");
	assert_string_equal(hlb_http_param_repeated(&p.req, name, sizeof(name)), "backend");
	free(in);
}

/*
 * A head refused whatever the body (a bad request line 400, a web page's request 403, another
 * HTTP version 505) is answered as soon as it is whole, the body not waited for: it was, and a
 * client that sent its body slowly, or not before an answer, waited for nothing. A good head
 * whose body is to come waits, its length known (head_len), and parses alone into the request
 * it heads, without the body.
 */
static void test_head_refused_before_the_body(void **state)
{
	static const struct {
		const char *req;
		int status;
	} cases[] = {
		{ "POST /set HTTP/2.0\r\nContent-Length: 9\r\n\r\n", 505 },
		{ "POST /set HTTP/1.1\r\nOrigin: http://x\r\nContent-Length: 9\r\n\r\nback", 403 },
		{ "POST  /set HTTP/1.1\r\nContent-Length: 9\r\n\r\n", 400 },
		{ "POST /set HTTP/1.1\r\nContent-Length: 9\r\n\r\nback", HLB_HTTP_MORE },
	};
	static const char good[] = "POST /set?service=web HTTP/1.1\r\nHost: x\r\n"
				   "Content-Length: 22\r\n\r\nbackend=b1";
	struct hlb_http_parsed p, h;
	char *in, head[sizeof(good)];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(parse(cases[i].req, false, &in, &p), cases[i].status);
		assert_false(p.send_continue);
		free(in);
	}
	assert_int_equal(parse(good, false, &in, &p), HLB_HTTP_MORE);
	assert_int_equal(p.head_len, strstr(good, "\r\n\r\n") + 4 - good);
	assert_memory_equal(in, good, sizeof(good) - 1); /* left as it was */
	memcpy(head, in, p.head_len);
	assert_int_equal(hlb_http_parse_head(head, p.head_len, &h), 200);
	assert_string_equal(h.req.method, "POST");
	assert_string_equal(h.req.path, "/set");
	assert_string_equal(h.req.query, "service=web");
	assert_int_equal(h.req.body_len, 0);
	free(in);
	/* not a head alone */
	memcpy(head, "GET / HTTP/1.1\r\n", 16);
	assert_int_equal(hlb_http_parse_head(head, 16, &h), 400);
}

/* A value too long (or holding a NUL) is refused in a parameter the path takes, which
 * hlb_http_param() would read as absent, and only there: /metrics ignores the parameters
 * it does not take whatever their length (a scrape job's module= of 300 bytes was a 400,
 * the scrape got no sample). */
static void test_long_values_refused_only_in_params_taken(void **state)
{
	static const char *const metrics[] = { "name[]", NULL };
	static const char *const set[] = { "backend", "weight", NULL };
	char req[1024], long_v[301], why[128], v[HLB_HTTP_VALUE_MAX + 1], *in;
	struct hlb_http_parsed p;
	size_t pos = 0;

	(void)state;
	memset(long_v, 'x', 300);
	long_v[300] = '\0';
	snprintf(req, sizeof(req), "GET /metrics?module=%s&name[]=up HTTP/1.1\r\n\r\n", long_v);
	assert_int_equal(parse(req, false, &in, &p), 200);
	assert_null(hlb_http_param_refused(&p.req, metrics, why, sizeof(why)));
	assert_string_equal(hlb_http_param_next(&p.req, "name[]", &pos, v, sizeof(v)), "up");
	free(in);
	/* a name[] of 300 bytes is refused, written as clients write the brackets too */
	snprintf(req, sizeof(req), "GET /metrics?name%%5B%%5D=%s HTTP/1.1\r\n\r\n", long_v);
	assert_int_equal(parse(req, false, &in, &p), 200);
	assert_non_null(hlb_http_param_refused(&p.req, metrics, why, sizeof(why)));
	assert_non_null(strstr(why, "the value is longer than 255 bytes"));
	free(in);
	/* in a form body as in the query; 255 bytes (%-encoded or not) are taken */
	snprintf(req, sizeof(req),
		 "POST /set HTTP/1.1\r\nContent-Length: %zu\r\n\r\nbackend=a&weight=%s",
		 strlen("backend=a&weight=") + 300, long_v);
	assert_int_equal(parse(req, false, &in, &p), 200);
	assert_non_null(hlb_http_param_refused(&p.req, set, why, sizeof(why)));
	assert_non_null(strstr(why, "parameter weight: the value is longer than 255 bytes"));
	free(in);
	long_v[253] = '\0';
	snprintf(req, sizeof(req), "POST /set?backend=%%41%s HTTP/1.1\r\n\r\n", long_v);
	assert_int_equal(parse(req, false, &in, &p), 200);
	assert_null(hlb_http_param_refused(&p.req, set, why, sizeof(why)));
	assert_int_equal(strlen(hlb_http_param(&p.req, "backend", v, sizeof(v))), 254);
	free(in);
}

/* A line may end with a LF alone (RFC 9112 2.2: printf 'GET /status HTTP/1.0\n\n' | nc), the
 * request line and the headers alike, mixed with CRLF: before, the request was refused 400
 * "end each line with CRLF". Every reader of the head splits its lines there: the
 * Content-Length after a line ended by a LF alone is read as the body's length. */
static void test_bare_lf_ends_a_line(void **state)
{
	static const char *const reqs[] = {
		"GET /status HTTP/1.0\n\n",
		"GET /status HTTP/1.1\r\nHost: x\n\n",
		"GET /status HTTP/1.1\r\nHost: x\nAccept: */*\r\n\r\n",
		"GET /status HTTP/1.1\nHost: x\r\n\n",
		"GET /status HTTP/1.1\n\r\n",
	};
	static const char post[] = "POST /set HTTP/1.1\nHost: x\nContent-Length: 11\n\n"
				   "state=drainGET / HTTP/1.1\n\n";
	struct hlb_http_parsed p;
	char buf[HLB_HTTP_VALUE_MAX + 1], *in;

	(void)state;
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		assert_int_equal(parse(reqs[i], false, &in, &p), 200);
		assert_string_equal(p.req.method, "GET");
		assert_string_equal(p.req.path, "/status");
		assert_int_equal(p.req.body_len, 0);
		free(in);
	}
	/* a head not ended yet waits, as one in CRLF does */
	assert_int_equal(parse("GET /status HTTP/1.1\nHost: x\n", false, &in, &p), HLB_HTTP_MORE);
	free(in);
	assert_int_equal(parse("GET /status HTTP/1.1\n\r", false, &in, &p), HLB_HTTP_MORE);
	free(in);
	assert_int_equal(parse(post, false, &in, &p), 200);
	assert_int_equal(p.req.body_len, 11);
	assert_string_equal(p.req.body, "state=drain");
	assert_string_equal(hlb_http_param(&p.req, "state", buf, sizeof(buf)), "drain");
	free(in);
	/* the headers after a LF alone are read as headers: a web page's is refused */
	assert_int_equal(parse("POST /set HTTP/1.1\nOrigin: http://x\n\n", false, &in, &p), 403);
	free(in);
	assert_int_equal(
		parse("POST /set HTTP/1.1\nTransfer-Encoding: chunked\n\n", false, &in, &p), 411);
	free(in);
}

/* A CR alone (not before a LF) in the head is refused at once, whoever reads it (RFC 9112
 * 2.2), and so is a header line that one reader could take for a header and another not:
 * a space before its colon, one folded onto the line before, one without a colon. Before,
 * "Content-Length : 11" was no Content-Length: the body was left unread, and the request
 * answered as if it gave no parameter. A body may hold a CR or a LF. */
static void test_bare_cr_and_bad_header_lines_are_refused(void **state)
{
	static const char *const cr[] = {
		"GET /status HTTP/1.1\rHost: x\r\n\r\n",
		"GET /status HTTP/1.1\r\nHost: x\ry\r\n\r\n",
		"GET /status HTTP/1.1\r\n\r\r\n",
		"\r\r",
	};
	static const char *const bad[] = {
		"POST /set HTTP/1.1\r\nContent-Length : 11\r\n\r\nstate=drain",
		"POST /set HTTP/1.1\r\nX: a\r\n Content-Length: 11\r\n\r\nstate=drain",
		"POST /set HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n",
		"GET /status HTTP/1.1\r\nHost\r\n\r\n",
		"GET /status HTTP/1.1\r\n: x\r\n\r\n",
		"GET /status HTTP/1.1\nHost x: y\n\n",
	};
	struct hlb_http_parsed p;
	char *in;

	(void)state;
	for (size_t i = 0; i < sizeof(cr) / sizeof(cr[0]); i++) {
		for (int eof = 0; eof < 2; eof++) {
			assert_int_equal(parse(cr[i], eof, &in, &p), 400);
			assert_non_null(strstr(p.msg, "CR alone"));
			free(in);
		}
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(bad[i], false, &in, &p), 400);
		assert_non_null(strstr(p.msg, "Name: value"));
		free(in);
	}
	assert_int_equal(parse("POST /set HTTP/1.1\r\nContent-Length: 13\r\n\r\nbackend=a\r\r\n\n",
			       false, &in, &p),
			 200);
	free(in);
	/* with a NUL too, the first of them is refused, as the request cut before the other
	 * would be (fuzz_http: the same error however the request was cut) */
	assert_int_equal(hlb_http_parse((char[]){ "GET /\0 HTTP/1.1\r\r\n" }, 18, false, &p), 400);
	assert_non_null(strstr(p.msg, "NUL"));
	assert_int_equal(hlb_http_parse((char[]){ "GET / HTTP/1.1\rx\0\n" }, 18, false, &p), 400);
	assert_non_null(strstr(p.msg, "CR alone"));
}

/* <len> bytes of <req> given to hlb_http_parse_next() in <in> a byte more a call, as read from
 * a client that sends a byte a segment: its answer, the work done into *<scanned>. */
static int parse_bytewise(char *in, const char *req, size_t len, struct hlb_http_parsed *p,
			  size_t *scanned)
{
	struct hlb_http_scan s = { 0 };
	int r = HLB_HTTP_MORE;

	for (size_t n = 1; n <= len && r == HLB_HTTP_MORE; n++) {
		in[n - 1] = req[n - 1]; /* read (over the NUL the last call put after) */
		r = hlb_http_parse_next(in, n, false, &s, p);
	}
	*scanned = s.scanned;
	return r;
}

/* A request that comes a byte a read is looked at once or so, not from its start at each read:
 * 16 KiB of headers were 134M byte comparisons on the control thread (health checks and table
 * builds wait behind it); a head then its body a byte a read, alike. Counted, not timed. */
static void test_request_a_byte_a_read_looked_at_once(void **state)
{
	static const char start[] = "GET /status HTTP/1.1\r\nX-Long: ";
	char *req = malloc(HLB_HTTP_REQ_MAX + 1), *in = malloc(HLB_HTTP_REQ_MAX + 1);
	struct hlb_http_parsed p;
	size_t scanned, len;

	(void)state;
	assert_non_null(req);
	assert_non_null(in);
	/* headers that never end: 413 once the buffer is full */
	memcpy(req, start, sizeof(start) - 1);
	memset(req + sizeof(start) - 1, 'a', HLB_HTTP_REQ_MAX - (sizeof(start) - 1));
	assert_int_equal(parse_bytewise(in, req, HLB_HTTP_REQ_MAX, &p, &scanned), 413);
	assert_true(scanned <= 2 * HLB_HTTP_REQ_MAX);
	/* 8 KiB of head, then 8 KiB of body */
	len = (size_t)snprintf(
		req, HLB_HTTP_REQ_MAX + 1,
		"POST /set HTTP/1.1\r\nX-Long: %08000d\r\nContent-Length: 8000\r\n\r\n", 0);
	memset(req + len, 'b', 8000);
	len += 8000;
	assert_int_equal(parse_bytewise(in, req, len, &p, &scanned), 200);
	assert_int_equal(p.req.body_len, 8000);
	assert_true(scanned <= 4 * len);
	free(req);
	free(in);
}

/* <req> parsed by hlb_http_parse_next() as read in two pieces, cut after <cut> bytes (a copy
 * kept in <in>, as parse()'s). */
static int parse_in_two(const char *req, size_t cut, char **in, struct hlb_http_parsed *p)
{
	struct hlb_http_scan s = { 0 };
	size_t len = strlen(req);
	int r;

	*in = malloc(len + 1);
	assert_non_null(*in);
	memcpy(*in, req, len);
	r = hlb_http_parse_next(*in, cut, false, &s, p);
	(*in)[cut] = req[cut]; /* the rest read, over the NUL put after */
	return r == HLB_HTTP_MORE ? hlb_http_parse_next(*in, len, false, &s, p) : r;
}

/* Parsed a piece then the rest, a request is what it is whole, wherever it was cut: between
 * the CR and the LF of the empty line, or of a line with a CR alone after it. */
static void test_request_cut_anywhere_goes_on(void **state)
{
	static const struct {
		const char *req;
		int status;
	} reqs[] = {
		{ "GET /status?a=b HTTP/1.1\r\nHost: x\r\n\r\n", 200 },
		{ "POST /set HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\na=b",
		  200 },
		{ "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\n\r\n", 200 },
	};
	struct hlb_http_parsed p;
	char *in;

	(void)state;
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++)
		for (size_t cut = 1; cut < strlen(reqs[i].req); cut++) {
			assert_int_equal(parse_in_two(reqs[i].req, cut, &in, &p), reqs[i].status);
			assert_true(p.status != 200 || p.need == strlen(reqs[i].req));
			free(in);
		}
}

/* Empty lines before the request line are skipped, as RFC 9112 2.2 has a server do (a line
 * typed first at nc, a client's CRLF after a body it sent before): it was answered 400, "bad
 * request line". The request after them is read whole, wherever TCP cut it, its headers and
 * body too; the empty lines alone wait for it. */
static void test_empty_lines_before_the_request_line(void **state)
{
	static const struct {
		const char *req;
		int status;
	} reqs[] = {
		{ "\r\nGET /status?a=b HTTP/1.1\r\nHost: x\r\n\r\n", 200 },
		{ "\r\n\n\r\nPOST /set HTTP/1.1\r\nContent-Length: 11\r\n\r\nstate=drain", 200 },
		{ "\nPOST /set HTTP/1.1\r\nOrigin: http://x\r\n\r\n", 403 },
		{ "\r\nGET /status HTTP/2.0\r\n\r\n", 505 },
	};
	struct hlb_http_parsed p;
	char buf[HLB_HTTP_VALUE_MAX + 1], *in;

	(void)state;
	assert_int_equal(parse(reqs[0].req, false, &in, &p), 200);
	assert_string_equal(p.req.method, "GET");
	assert_string_equal(p.req.path, "/status");
	assert_string_equal(p.req.query, "a=b");
	free(in);
	assert_int_equal(parse(reqs[1].req, false, &in, &p), 200);
	assert_string_equal(p.req.method, "POST");
	assert_int_equal(p.req.body_len, 11);
	assert_string_equal(hlb_http_param(&p.req, "state", buf, sizeof(buf)), "drain");
	assert_int_equal(p.need, strlen(reqs[1].req));
	free(in);
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++)
		for (size_t cut = 1; cut < strlen(reqs[i].req); cut++) {
			assert_int_equal(parse_in_two(reqs[i].req, cut, &in, &p), reqs[i].status);
			assert_true(p.status != 200 || p.need == strlen(reqs[i].req));
			free(in);
		}
	/* a HEAD after them is known as one: its error has no body */
	assert_int_equal(
		parse("\r\nHEAD /status HTTP/1.1\r\nContent-Length: x\r\n\r\n", false, &in, &p),
		400);
	assert_true(p.head);
	free(in);
	assert_int_equal(parse("\r\n\r\n", false, &in, &p), HLB_HTTP_MORE);
	free(in);
	assert_int_equal(parse("\r\n", true, &in, &p), HLB_HTTP_CLOSE);
	free(in);
}

/* An error answered to a HEAD has no body, as its GET's answer (RFC 9110 9.3.2): the
 * parser says HEAD whatever it refuses, not only once the request line is read. Before,
 * only a request as far as its line knew it, and the errors found before (a Content-Length
 * not digits, Transfer-Encoding, too large, a NUL or bare CR in the head) came with a body. */
static void test_head_is_known_whatever_the_error(void **state)
{
	static const char *const reqs[] = {
		"HEAD /status HTTP/1.1\r\nContent-Length: x\r\n\r\n",
		"HEAD /status HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HEAD /status HTTP/1.1\r\nContent-Length: 99999\r\n\r\n",
		"HEAD /status HTTP/1.1\rHost: x\r\n\r\n",
		"HEAD /status HTTP/2.0\r\n\r\n",
		"HEAD /status HTTP/1.1\r\nSec-Fetch-Site: cross-site\r\n\r\n",
	};
	struct hlb_http_parsed p;
	char *in;

	(void)state;
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		assert_true(parse(reqs[i], false, &in, &p) >= 400);
		assert_true(p.head);
		free(in);
	}
	assert_int_equal(parse("GET /status HTTP/1.1\r\nContent-Length: x\r\n\r\n", false, &in, &p),
			 400);
	assert_false(p.head);
	free(in);
}

/* The handler of test_held_request_waits_alone(): GET /wait is held, the others answered. */
static void hold_wait(void *arg, const struct hlb_http_req *req, struct hlb_http_resp *resp)
{
	uint64_t *held = arg;

	if (!strcmp(req->path, "/wait")) {
		*held = req->id;
		resp->hold = true;
		return;
	}
	resp->ctype = "text/plain";
	hlb_buf_puts(&resp->body, "now\n");
}

/* A client of the endpoint at <sun>, its request <req> sent, then its writing shut down. */
static int client_ask(const struct sockaddr_un *sun, const char *req)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (const struct sockaddr *)sun, sizeof(*sun)), 0);
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	shutdown(fd, SHUT_WR);
	return fd;
}

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

/* Run <l> until <*flag> is set or <fd> (if >= 0) is readable; at most 1000 rounds. */
static void pump(struct hlb_loop *l, const uint64_t *flag, int fd)
{
	for (int i = 0; i < 1000 && !(flag && *flag) && !(fd >= 0 && readable(fd)); i++)
		assert_true(hlb_loop_run_once(l, 10) >= 0);
}

/* The answer on <fd> to its end, into <buf> (<size> bytes, NUL-terminated). */
static const char *answer_of(int fd, char *buf, size_t size)
{
	size_t got = 0;
	ssize_t n;

	while (got < size - 1 && (n = read(fd, buf + got, size - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fd);
	return buf;
}

/* An endpoint of <fn> (<arg>) on a unix socket in a new directory made of <dir>, at <sun>, on
 * a new loop into <*l>. */
static struct hlb_http *unix_server(char *dir, struct sockaddr_un *sun, struct hlb_loop **l,
				    hlb_http_handler fn, void *arg)
{
	struct hashlb_error err = { 0 };
	struct hlb_http *h;

	assert_non_null(mkdtemp(dir));
	snprintf(sun->sun_path, sizeof(sun->sun_path), "%s/admin.sock", dir);
	assert_int_equal(hlb_loop_new(l), 0);
	assert_int_equal(
		hlb_http_new(*l, (const struct sockaddr *)sun, sizeof(*sun), fn, arg, &h, &err), 0);
	return h;
}

/* An endpoint of hold_wait() (<held>): unix_server(). */
static struct hlb_http *hold_wait_server(char *dir, struct sockaddr_un *sun, struct hlb_loop **l,
					 uint64_t *held)
{
	return unix_server(dir, sun, l, hold_wait, held);
}

static void test_held_request_waits_alone(void **state)
{
	char dir[] = "/tmp/hashlb-test-http-XXXXXX", buf[512];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct hlb_http_resp later = { .status = 200, .ctype = "text/plain" };
	struct hlb_http *h;
	struct hlb_loop *l;
	uint64_t held = 0;
	int waits, now;

	(void)state;
	h = hold_wait_server(dir, &sun, &l, &held);
	/* held, its client having shut down writing after it: the connection stays */
	waits = client_ask(&sun, "GET /wait HTTP/1.1\r\nHost: t\r\n\r\n");
	pump(l, &held, -1);
	assert_int_not_equal(held, 0);
	now = client_ask(&sun, "GET /now HTTP/1.1\r\nHost: t\r\n\r\n");
	pump(l, NULL, now);
	assert_non_null(strstr(answer_of(now, buf, sizeof(buf)), "\r\n\r\nnow\n"));
	assert_false(readable(waits));
	/* its answer, given */
	hlb_buf_puts(&later.body, "later\n");
	assert_int_equal(hlb_http_answer(h, held, &later), 0);
	pump(l, NULL, waits);
	answer_of(waits, buf, sizeof(buf));
	assert_true(!strncmp(buf, "HTTP/1.1 200 OK\r\n", 17));
	assert_non_null(strstr(buf, "Content-Length: 6\r\n"));
	assert_non_null(strstr(buf, "\r\n\r\nlater\n"));
	/* answered already, or never held: no connection waits for it */
	later = (struct hlb_http_resp){ .status = 200 };
	hlb_buf_puts(&later.body, "again\n");
	assert_int_equal(hlb_http_answer(h, held, &later), -ENOENT);
	assert_null(later.body.p);
	hlb_http_free(h);
	hlb_loop_free(l);
	rmdir(dir);
}

/* A head_fn that answers a path the endpoint does not have, /nope, 404 from the head alone. */
static bool nope_head(void *arg, const struct hlb_http_req *req, struct hlb_http_resp *resp)
{
	(void)arg;
	if (strcmp(req->path, "/nope"))
		return false;
	resp->status = 404;
	resp->ctype = "text/plain";
	hlb_buf_puts(&resp->body, "nope\n");
	return true;
}

/* A TCP client of 127.0.0.1:<port> (network order) that sent <req>, its writing left open. */
static int tcp_ask(uint16_t port, const char *req)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = port,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (const struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	return fd;
}

/* What came on <fd> once it is readable, <l> run until then (one read, NUL-terminated). */
static const char *read_now(struct hlb_loop *l, int fd, char *buf, size_t size)
{
	ssize_t n;

	pump(l, NULL, fd);
	n = read(fd, buf, size - 1);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/*
 * Whether the client <fd>, answered, can still send <rest> (the rest of its body, in two
 * writes, <l> run between) and ends the connection; it is closed. Closed by the endpoint with
 * the body to come, the first write draws a reset, and the second fails (EPIPE): a client
 * still sending its body then fails before it reads the answer (curl: "Send failure").
 */
static bool body_goes_in(struct hlb_loop *l, int fd, const char *rest)
{
	size_t half = strlen(rest) / 2;
	bool ok = send(fd, rest, half, MSG_NOSIGNAL) == (ssize_t)half;

	for (int i = 0; i < 3; i++)
		assert_true(hlb_loop_run_once(l, 0) >= 0);
	ok = ok && send(fd, rest + half, strlen(rest) - half, MSG_NOSIGNAL) ==
			   (ssize_t)(strlen(rest) - half);
	shutdown(fd, SHUT_WR);
	for (int i = 0; i < 3; i++)
		assert_true(hlb_loop_run_once(l, 0) >= 0);
	close(fd);
	return ok;
}

/* An endpoint of hold_wait() on 127.0.0.1, a port of its own, on a loop of its own. */
struct tcp_end {
	struct hlb_loop *l;
	struct hlb_http *h;
	uint64_t held;
	uint16_t port; /* network order */
};

static void tcp_end_new(struct tcp_end *e)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct hashlb_error err = { 0 };
	struct sockaddr_storage ss;

	e->held = 0;
	assert_int_equal(hlb_loop_new(&e->l), 0);
	assert_int_equal(hlb_http_new(e->l, (const struct sockaddr *)&sin, sizeof(sin), hold_wait,
				      &e->held, &e->h, &err),
			 0);
	assert_int_equal(hlb_http_sockname(e->h, &ss), 0);
	e->port = ((const struct sockaddr_in *)&ss)->sin_port;
}

static void tcp_end_free(struct tcp_end *e)
{
	hlb_http_free(e->h);
	hlb_loop_free(e->l);
}

/*
 * A request answered from its head alone is answered at once, its body not waited for: with
 * Expect: 100-continue, a path the endpoint does not have gets its 404 and no 100 (it got the
 * 100, then the 404 once the body came), a path it has the 100 and then its answer; without,
 * a head refused whatever the body (505) comes before the body. The client may send its body
 * after all (curl does, past its wait): it goes in, read and dropped, not reset.
 */
static void test_answered_before_the_body(void **state)
{
	struct tcp_end e;
	char buf[512];
	int fd;

	(void)state;
	tcp_end_new(&e);
	hlb_http_on_head(e.h, nope_head, NULL);

	fd = tcp_ask(e.port,
		     "POST /nope HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n");
	read_now(e.l, fd, buf, sizeof(buf));
	assert_true(!strncmp(buf, "HTTP/1.1 404 ", 13));
	assert_non_null(strstr(buf, "\r\n\r\nnope\n"));
	assert_true(body_goes_in(e.l, fd, "backend=a"));

	fd = tcp_ask(e.port,
		     "POST /now HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
	assert_string_equal(read_now(e.l, fd, buf, sizeof(buf)), "HTTP/1.1 100 Continue\r\n\r\n");
	assert_int_equal(write(fd, "a=b", 3), 3);
	shutdown(fd, SHUT_WR);
	pump(e.l, NULL, fd);
	assert_non_null(strstr(answer_of(fd, buf, sizeof(buf)), "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(buf, "\r\n\r\nnow\n"));

	fd = tcp_ask(e.port, "POST /now HTTP/2.0\r\nContent-Length: 9\r\n\r\nback");
	assert_true(!strncmp(read_now(e.l, fd, buf, sizeof(buf)), "HTTP/1.1 505 ", 13));
	assert_true(body_goes_in(e.l, fd, "end=a"));
	tcp_end_free(&e);
}

/* Run <l> a few rounds, not waiting. */
static void settle(struct hlb_loop *l)
{
	for (int i = 0; i < 8; i++)
		assert_true(hlb_loop_run_once(l, 0) >= 0);
}

/* A TCP client of 127.0.0.1:<port> that sent <req>, then shut down writing. */
static int tcp_ask_ended(uint16_t port, const char *req)
{
	int fd = tcp_ask(port, req);

	shutdown(fd, SHUT_WR);
	return fd;
}

/* Clients <from> to <to> - 1 of <e> connect, into <fds>, and wait for their request, each
 * accepted before the next connects. */
static void clients_open(struct tcp_end *e, int *fds, int from, int to)
{
	for (int i = from; i < to; i++) {
		fds[i] = tcp_ask(e->port, "");
		settle(e->l);
	}
}

/* The <n> clients <fds> of <e> close: so do their connections, none left to a timer. */
static void clients_end(struct tcp_end *e, const int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
	settle(e->l);
	assert_int_equal(hlb_http_conns(e->h), 0);
}

/* Whether a client of <e> that sent <req> and ended is answered, beginning <status>, and its
 * connection closed at once, not lingering. */
static void closed_once_answered(struct tcp_end *e, const char *req, const char *status)
{
	int fd = tcp_ask_ended(e->port, req);
	char buf[512];

	assert_true(!strncmp(read_now(e->l, fd, buf, sizeof(buf)), status, strlen(status)));
	settle(e->l);
	assert_int_equal(hlb_http_conns(e->h), 0);
	close(fd);
}

/*
 * A held request's client that leaves is let go at once where its socket tells it apart: a
 * reset over TCP, a close over a Unix socket (the connection closed, hlb_http_answer() -ENOENT).
 * A FIN over TCP does not: a client that shut down writing after its request (nc -N) and one
 * that closed its socket send the same, and the first still wants its answer, which it gets
 * (HAProxy without "option abortonclose" does the same, for the same reason).
 */
static void test_held_request_client_leaves(void **state)
{
	char dir[] = "/tmp/hashlb-test-http-XXXXXX", buf[512];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct hlb_http_resp later = { .status = 200, .ctype = "text/plain" };
	struct linger reset = { .l_onoff = 1, .l_linger = 0 };
	struct tcp_end e;
	struct hlb_http *h;
	struct hlb_loop *l;
	uint64_t held = 0;
	int fd;

	(void)state;
	tcp_end_new(&e);
	/* half-closed over TCP: answered */
	fd = tcp_ask(e.port, "GET /wait HTTP/1.1\r\n\r\n");
	shutdown(fd, SHUT_WR);
	pump(e.l, &e.held, -1);
	assert_int_not_equal(e.held, 0);
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), 1);
	hlb_buf_puts(&later.body, "later\n");
	assert_int_equal(hlb_http_answer(e.h, e.held, &later), 0);
	pump(e.l, NULL, fd);
	assert_non_null(strstr(answer_of(fd, buf, sizeof(buf)), "\r\n\r\nlater\n"));
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), 0);
	/* reset over TCP: let go */
	e.held = 0;
	fd = tcp_ask(e.port, "GET /wait HTTP/1.1\r\n\r\n");
	pump(e.l, &e.held, -1);
	assert_int_not_equal(e.held, 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)), 0);
	close(fd);
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), 0);
	later = (struct hlb_http_resp){ .status = 200 };
	hlb_buf_puts(&later.body, "later\n");
	assert_int_equal(hlb_http_answer(e.h, e.held, &later), -ENOENT);
	tcp_end_free(&e);
	/* closed over a Unix socket: let go */
	h = hold_wait_server(dir, &sun, &l, &held);
	fd = client_ask(&sun, "GET /wait HTTP/1.1\r\nHost: t\r\n\r\n");
	pump(l, &held, -1);
	assert_int_not_equal(held, 0);
	close(fd);
	settle(l);
	assert_int_equal(hlb_http_conns(h), 0);
	later = (struct hlb_http_resp){ .status = 200 };
	hlb_buf_puts(&later.body, "later\n");
	assert_int_equal(hlb_http_answer(h, held, &later), -ENOENT);
	hlb_http_free(h);
	hlb_loop_free(l);
	rmdir(dir);
}

/*
 * An answer after which the client may still send lingers (what it sends is read until it
 * ends), whatever the answer: a request that came whole and alone, then another sent a moment
 * after (pipelined; it was closed at once, and the second request drew a reset, seen once in
 * 20,000), a request after the one answered, a 503 to a client waiting on Expect over the 64
 * connections; the lingering connection ends when its client does, not on its 2 s timer. A
 * client that ended after its request, answered or refused (400, 411, 505), is closed at once:
 * it sends nothing more. And lingering connections give their place to new ones at the 64.
 */
static void test_lingers_while_the_client_may_send(void **state)
{
	int fds[HLB_HTTP_CONNS_MAX];
	struct tcp_end e;
	char buf[512];
	int fd;

	(void)state;
	tcp_end_new(&e);

	/* whole and alone, its client not ended: a request it sends after the answer goes in */
	fd = tcp_ask(e.port, "GET /now HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(read_now(e.l, fd, buf, sizeof(buf)), "\r\n\r\nnow\n"));
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), 1);
	assert_true(body_goes_in(e.l, fd, "GET /now HTTP/1.1\r\n\r\n"));
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), 0); /* at the client's end, not the timer's */

	/* its client ended: closed once answered, a 200 or a refusal of a whole request */
	closed_once_answered(&e, "GET /now HTTP/1.1\r\n\r\n", "HTTP/1.1 200 ");
	closed_once_answered(&e, "GET /now HTTP/2.0\r\n\r\n", "HTTP/1.1 505 ");
	closed_once_answered(&e, "POST /now HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
			     "HTTP/1.1 411 ");
	closed_once_answered(&e, "GET /now HTTP/1.1\r\nHost\r\n\r\n", "HTTP/1.1 400 ");

	/* a request after it: its answer, then what comes is taken, until the client ends */
	fd = tcp_ask(e.port, "GET /now HTTP/1.1\r\n\r\nGET /n");
	assert_non_null(strstr(read_now(e.l, fd, buf, sizeof(buf)), "\r\n\r\nnow\n"));
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), 1);
	assert_true(body_goes_in(e.l, fd, "ow HTTP/1.1\r\nHost: x\r\n\r\n"));
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), 0); /* at the client's end, not the timer's */

	/* 64 lingering: a new connection is served, the one that lingered longest closed for it,
	 * not the one accepted first (fds[0], its request and answer the last: it may not have
	 * read its answer yet) */
	fds[0] = tcp_ask(e.port, "");
	settle(e.l);
	for (int i = 1; i < HLB_HTTP_CONNS_MAX; i++) {
		fds[i] = tcp_ask(e.port, "GET /now HTTP/2.0\r\n\r\nmore");
		assert_true(!strncmp(read_now(e.l, fds[i], buf, sizeof(buf)), "HTTP/1.1 505 ", 13));
	}
	assert_int_equal(write(fds[0], "GET /now HTTP/2.0\r\n\r\nmore", 25), 25);
	assert_true(!strncmp(read_now(e.l, fds[0], buf, sizeof(buf)), "HTTP/1.1 505 ", 13));
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), HLB_HTTP_CONNS_MAX);
	fd = tcp_ask(e.port, "GET /now HTTP/1.1\r\n\r\n");
	assert_true(!strncmp(read_now(e.l, fd, buf, sizeof(buf)), "HTTP/1.1 200 ", 13));
	close(fd);
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), HLB_HTTP_CONNS_MAX - 1);
	/* a byte to each: the closed one answers it with a reset, which fails the next send */
	assert_int_equal(send(fds[0], "x", 1, MSG_NOSIGNAL), 1);
	assert_int_equal(send(fds[1], "x", 1, MSG_NOSIGNAL), 1);
	settle(e.l);
	assert_int_equal(send(fds[0], "y", 1, MSG_NOSIGNAL), 1); /* still lingering */
	assert_int_equal(send(fds[1], "y", 1, MSG_NOSIGNAL), -1); /* lingered longest: closed */
	clients_end(&e, fds, HLB_HTTP_CONNS_MAX);

	/* 64 waiting for their request: the 503 to one past them that waits on Expect lingers
	 * (it closed at once, and the body the client sends next drew a reset) */
	clients_open(&e, fds, 0, HLB_HTTP_CONNS_MAX);
	fd = tcp_ask(e.port,
		     "POST /now HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
	assert_true(!strncmp(read_now(e.l, fd, buf, sizeof(buf)), "HTTP/1.1 503 ", 13));
	assert_true(body_goes_in(e.l, fd, "a=b"));
	clients_end(&e, fds, HLB_HTTP_CONNS_MAX);
	tcp_end_free(&e);
}

/*
 * A lingering connection closed to make room at the 64 has what its client sent read first:
 * its close is then the FIN behind the answer and no more. Closed with those bytes unread, the
 * socket resets the connection, which discards what of the answer is not sent yet (a large
 * one in the socket's buffer), and the client's next write fails.
 */
static void test_room_made_reads_first(void **state)
{
	int fds[HLB_HTTP_CONNS_MAX];
	struct tcp_end e;
	char buf[512];
	int fd;

	(void)state;
	tcp_end_new(&e);
	for (int i = 0; i < HLB_HTTP_CONNS_MAX; i++) {
		fds[i] = tcp_ask(e.port, "GET /now HTTP/1.1\r\n\r\n");
		assert_non_null(strstr(read_now(e.l, fds[i], buf, sizeof(buf)), "\r\n\r\nnow\n"));
	}
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), HLB_HTTP_CONNS_MAX);
	/* a new connection, then a request from the one that lingered longest: the endpoint
	 * sees the new connection first (epoll reports in the order things came), and closes
	 * fds[0] for it with the request not read yet */
	fd = tcp_ask(e.port, "GET /now HTTP/1.1\r\n\r\n");
	assert_int_equal(send(fds[0], "GET /now HTTP/1.1\r\n\r\n", 21, MSG_NOSIGNAL), 21);
	assert_true(!strncmp(read_now(e.l, fd, buf, sizeof(buf)), "HTTP/1.1 200 ", 13));
	close(fd);
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), HLB_HTTP_CONNS_MAX - 1);
	/* ended, not reset: a write still goes (the reset of a socket closed since comes back
	 * for it; a reset before failed it, EPIPE) */
	assert_int_equal(send(fds[0], "x", 1, MSG_NOSIGNAL), 1);
	assert_int_equal(read(fds[0], buf, sizeof(buf)), 0);
	clients_end(&e, fds, HLB_HTTP_CONNS_MAX);
	tcp_end_free(&e);
}

/*
 * A request that does not come whole in time is answered 408, and the connection lingers: the
 * rest of its body, sent after the answer, goes in, read and dropped, not reset; it ends at
 * the client's end. The endpoint's time, made short here (hlb_http_set_timeouts()), is not
 * measured: the test waits for the answer, however long it takes.
 */
static void test_timeout_408_lingers(void **state)
{
	struct tcp_end e;
	char buf[512];
	int fd;

	(void)state;
	tcp_end_new(&e);
	hlb_http_set_timeouts(e.h, 50, HLB_HTTP_LINGER_MS);
	fd = tcp_ask(e.port, "POST /now HTTP/1.1\r\nContent-Length: 9\r\n\r\nback");
	assert_true(!strncmp(read_now(e.l, fd, buf, sizeof(buf)), "HTTP/1.1 408 ", 13));
	assert_non_null(strstr(buf, "\"the request did not arrive whole within 50 ms\""));
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), 1);
	assert_true(body_goes_in(e.l, fd, "end=a"));
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), 0);
	tcp_end_free(&e);
}

/*
 * Past the 64 connections and the 8 answered 503 once their request is in, a connection is
 * answered 503 at accept, and lingers as any answered one does: the body its client sends
 * after goes in, not reset (it was closed at once, and the client could fail its write before
 * it read the answer); it ends at its client's end. Closed at once if that client has ended.
 */
static void test_busy_at_accept_lingers(void **state)
{
	int fds[HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX];
	int n = HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX;
	struct tcp_end e;
	char buf[512];
	int fd;

	(void)state;
	tcp_end_new(&e);
	/* none of the 72 answered while the test runs, however slowly */
	hlb_http_set_timeouts(e.h, 600000, HLB_HTTP_LINGER_MS);
	clients_open(&e, fds, 0, n);
	assert_int_equal(hlb_http_conns(e.h), n);
	fd = tcp_ask(e.port, "POST /now HTTP/1.1\r\nContent-Length: 9\r\n\r\n");
	assert_true(!strncmp(read_now(e.l, fd, buf, sizeof(buf)), "HTTP/1.1 503 ", 13));
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), n + 1);
	assert_true(body_goes_in(e.l, fd, "backend=a"));
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), n);
	fd = tcp_ask_ended(e.port, "GET /now HTTP/1.1\r\n\r\n");
	assert_true(!strncmp(read_now(e.l, fd, buf, sizeof(buf)), "HTTP/1.1 503 ", 13));
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), n);
	close(fd);
	clients_end(&e, fds, n);
	tcp_end_free(&e);
}

/*
 * A connection over the 64, waiting for its request to answer it 503, takes a place among the
 * 64 that frees before its request comes, and is served: when one of them closes, and when its
 * request comes while one of them, answered, lingers (given up for it, as at accept). It was
 * answered 503 "too many admin connections open (64)" either way.
 */
static void test_busy_served_once_a_place_frees(void **state)
{
	int fds[HLB_HTTP_CONNS_MAX], busy;
	struct tcp_end e;
	char buf[512];

	(void)state;
	tcp_end_new(&e);
	hlb_http_set_timeouts(e.h, 600000, 600000);
	clients_open(&e, fds, 0, HLB_HTTP_CONNS_MAX);
	/* one of the 64 closes */
	busy = tcp_ask(e.port, "");
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), HLB_HTTP_CONNS_MAX + 1);
	close(fds[0]);
	settle(e.l);
	assert_int_equal(write(busy, "GET /now HTTP/1.1\r\n\r\n", 21), 21);
	shutdown(busy, SHUT_WR);
	pump(e.l, NULL, busy);
	assert_non_null(strstr(answer_of(busy, buf, sizeof(buf)), "\r\n\r\nnow\n"));
	fds[0] = tcp_ask(e.port, "");
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), HLB_HTTP_CONNS_MAX);
	/* one of the 64 answered, lingering for its client's end, when the request comes */
	busy = tcp_ask(e.port, "");
	settle(e.l);
	assert_int_equal(write(fds[1], "GET /now HTTP/1.1\r\n\r\n", 21), 21);
	assert_non_null(strstr(read_now(e.l, fds[1], buf, sizeof(buf)), "\r\n\r\nnow\n"));
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), HLB_HTTP_CONNS_MAX + 1);
	assert_int_equal(write(busy, "GET /now HTTP/1.1\r\n\r\n", 21), 21);
	shutdown(busy, SHUT_WR);
	pump(e.l, NULL, busy);
	assert_non_null(strstr(answer_of(busy, buf, sizeof(buf)), "\r\n\r\nnow\n"));
	clients_end(&e, fds, HLB_HTTP_CONNS_MAX);
	tcp_end_free(&e);
}

/* The head of the answer in <buf> (up to its blank line), NUL-terminated in <head>; the body
 * after it. */
static const char *split_answer(const char *buf, char *head, size_t size)
{
	const char *end = strstr(buf, "\r\n\r\n");

	assert_non_null(end);
	assert_true((size_t)(end - buf) < size);
	memcpy(head, buf, (size_t)(end - buf));
	head[end - buf] = '\0';
	return end + 4;
}

/* <answer> is the 503 "too many admin connections", with its body. */
static void assert_busy_answer(const char *answer)
{
	char head[512];

	assert_string_not_equal(answer, "");
	assert_non_null(
		strstr(split_answer(answer, head, sizeof(head)), "too many admin connections"));
	assert_true(!strncmp(head, "HTTP/1.1 503 ", 13));
}

/* A client of <e> that asks and ends, the places full: answered 503, not to keep, with when
 * to try again. */
static void refused_not_kept(struct tcp_end *e)
{
	char buf[512], head[512];
	int fd = tcp_ask_ended(e->port, "GET /now HTTP/1.1\r\n\r\n");

	pump(e->l, NULL, fd);
	split_answer(answer_of(fd, buf, sizeof(buf)), head, sizeof(head));
	assert_true(!strncmp(head, "HTTP/1.1 503 ", 13));
	assert_non_null(strstr(head, "\r\nCache-Control: no-store\r\n"));
	assert_non_null(strstr(head, "\r\nRetry-After: 1\r\n"));
	close(fd);
}

/*
 * A 503, whichever (over the 64 once the request is in, at accept past the 8 more), says not to
 * keep it (Cache-Control: no-store, as every other answer does: a proxy or a browser that kept
 * it answered the next ask with the refusal again) and when to try again (Retry-After). Those
 * at accept had neither.
 */
static void test_refusals_not_kept(void **state)
{
	int fds[HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX];
	int n = HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX;
	struct tcp_end e;

	(void)state;
	tcp_end_new(&e);
	hlb_http_set_timeouts(e.h, 600000, HLB_HTTP_LINGER_MS);
	clients_open(&e, fds, 0, HLB_HTTP_CONNS_MAX);
	refused_not_kept(&e);
	clients_open(&e, fds, HLB_HTTP_CONNS_MAX, n);
	refused_not_kept(&e);
	clients_end(&e, fds, n);
	tcp_end_free(&e);
}

/*
 * A connection counts against the 64 places only while it holds one: with a place free, a
 * new connection takes it, and no connection is given up for it, not one answered 503 over the
 * 64 that lingers for its client's end (which holds no place). Counted by connections, such a
 * 503 made the 64 look full: the one that had lingered longest was closed for the new one,
 * and a byte its client sent then drew a reset.
 */
static void test_places_counted_not_connections(void **state)
{
	int fds[HLB_HTTP_CONNS_MAX], busy, fd;
	struct tcp_end e;
	char buf[512];

	(void)state;
	tcp_end_new(&e);
	hlb_http_set_timeouts(e.h, 600000, 600000);
	clients_open(&e, fds, 0, HLB_HTTP_CONNS_MAX);
	/* over the 64: answered 503, it lingers (its client has not ended) */
	busy = tcp_ask(e.port, "GET /now HTTP/1.1\r\n\r\n");
	assert_true(!strncmp(read_now(e.l, busy, buf, sizeof(buf)), "HTTP/1.1 503 ", 13));
	/* one of the 64 answered, lingering too (it keeps its place); another closes */
	assert_int_equal(write(fds[1], "GET /now HTTP/1.1\r\n\r\n", 21), 21);
	assert_non_null(strstr(read_now(e.l, fds[1], buf, sizeof(buf)), "\r\n\r\nnow\n"));
	close(fds[0]);
	fds[0] = -1;
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), HLB_HTTP_CONNS_MAX);
	/* 63 places held: the new one takes the 64th, every other connection left as it is */
	fd = tcp_ask(e.port, "GET /now HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(read_now(e.l, fd, buf, sizeof(buf)), "\r\n\r\nnow\n"));
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), HLB_HTTP_CONNS_MAX + 1);
	assert_int_equal(send(busy, "x", 1, MSG_NOSIGNAL), 1);
	assert_int_equal(send(fds[1], "x", 1, MSG_NOSIGNAL), 1);
	settle(e.l);
	assert_int_equal(send(busy, "y", 1, MSG_NOSIGNAL), 1); /* lingering still: no reset */
	assert_int_equal(send(fds[1], "y", 1, MSG_NOSIGNAL), 1);
	close(fd);
	close(busy);
	fds[0] = tcp_ask(e.port, "");
	clients_end(&e, fds, HLB_HTTP_CONNS_MAX);
	tcp_end_free(&e);
}

/*
 * <e> given the 64 and the 8 more connections, into <fds> (HLB_HTTP_CONNS_MAX +
 * HLB_HTTP_BUSY_MAX of them, none answered while a test runs), then one more that sent
 * nothing: answered 503 at accept once a byte of its request comes. That one.
 */
static int busy_at_accept(struct tcp_end *e, int *fds)
{
	int fd;

	hlb_http_set_timeouts(e->h, 600000, HLB_HTTP_LINGER_MS);
	for (int i = 0; i < HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX; i++) {
		fds[i] = tcp_ask(e->port, "");
		settle(e->l);
	}
	fd = tcp_ask(e->port, "");
	settle(e->l);
	assert_false(readable(fd)); /* its answer waits for a byte of the request */
	return fd;
}

/*
 * The 503 at accept (past the 64 and the 8) to a HEAD has no body however its request comes:
 * a byte at a time after the connection, or not at all (then with the body, as to a GET, a
 * tenth of the endpoint's timeout later). It went by the bytes that had come with the
 * connection, and a HEAD sent after it got the body.
 */
static void test_busy_at_accept_head_sent_late(void **state)
{
	int fds[HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX];
	int n = HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX, fd;
	struct tcp_end e;
	char buf[512], head[512];
	const char *body;

	(void)state;
	tcp_end_new(&e);
	/* accepted with nothing sent; then HE, then the rest */
	fd = busy_at_accept(&e, fds);
	assert_int_equal(write(fd, "HE", 2), 2);
	settle(e.l);
	assert_int_equal(write(fd, "AD /now HTTP/1.1\r\n\r\n", 20), 20);
	shutdown(fd, SHUT_WR);
	pump(e.l, NULL, fd);
	body = split_answer(answer_of(fd, buf, sizeof(buf)), head, sizeof(head));
	assert_true(!strncmp(head, "HTTP/1.1 503 ", 13));
	assert_non_null(strstr(head, "\r\nContent-Length: 60"));
	assert_string_equal(body, "");
	/* a GET sent a moment after the connect: with the body */
	fd = tcp_ask(e.port, "");
	settle(e.l);
	assert_int_equal(write(fd, "GET /now HTTP/1.1\r\n\r\n", 21), 21);
	shutdown(fd, SHUT_WR);
	pump(e.l, NULL, fd);
	assert_busy_answer(answer_of(fd, buf, sizeof(buf)));
	/* nothing sent: answered at its time, with the body */
	hlb_http_set_timeouts(e.h, 50, HLB_HTTP_LINGER_MS);
	fd = tcp_ask(e.port, "");
	pump(e.l, NULL, fd);
	assert_busy_answer(read_now(e.l, fd, buf, sizeof(buf)));
	close(fd);
	clients_end(&e, fds, n);
	tcp_end_free(&e);
}

/*
 * accept4() (linked with --wrap=accept4): while <accept_aborts> is above 0, a call fails
 * ECONNABORTED (and counts it down), as for a connection its client reset while it waited in
 * the listener's queue (Linux mostly accepts such a one, its reset read after).
 */
static int accept_aborts;
/* with <accept_then> at or above 0, the first call sends <accept_then_sends> on that socket
 * first (a client's bytes that come while the queue drains), and sets it to -1 */
static int accept_then = -1;
static const char *accept_then_sends;
int __real_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
int __wrap_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);

int __wrap_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	if (accept_then >= 0) {
		size_t n = strlen(accept_then_sends);

		assert_int_equal(write(accept_then, accept_then_sends, n), (ssize_t)n);
		accept_then = -1;
	}
	if (accept_aborts > 0) {
		accept_aborts--;
		errno = ECONNABORTED;
		return -1;
	}
	return __real_accept4(fd, addr, len, flags);
}

/*
 * epoll_wait() (linked with --wrap=epoll_wait): with <epoll_then> at or above 0, the call sends
 * <epoll_then_sends> on that socket once it has returned, and sets it to -1: a client's bytes
 * that come after the loop looked at its sockets, as its timers run.
 */
static int epoll_then = -1;
static const char *epoll_then_sends;
int __real_epoll_wait(int epfd, struct epoll_event *events, int max, int timeout);
int __wrap_epoll_wait(int epfd, struct epoll_event *events, int max, int timeout);

int __wrap_epoll_wait(int epfd, struct epoll_event *events, int max, int timeout)
{
	int n = __real_epoll_wait(epfd, events, max, timeout);
	int saved = errno;

	if (epoll_then >= 0) {
		size_t len = strlen(epoll_then_sends);

		assert_int_equal(write(epoll_then, epoll_then_sends, len), (ssize_t)len);
		epoll_then = -1;
	}
	errno = saved;
	return n;
}

/* <l> run once, its timers past due (<ms> is longer than each of them), <fd> sending <bytes>
 * as they run: after the loop looked at its sockets. */
static void run_due_as_sent(struct hlb_loop *l, unsigned ms, int fd, const char *bytes)
{
	usleep(ms * 1000);
	epoll_then = fd;
	epoll_then_sends = bytes;
	assert_true(hlb_loop_run_once(l, 0) >= 0);
	assert_int_equal(epoll_then, -1);
}

/*
 * The answer on <fd> as answer_of(), which ended as the connection did (a FIN), not with a
 * reset: a socket closed with bytes of its client unread resets the connection, which fails a
 * client still sending and can discard an answer its client has not read yet.
 */
static const char *answer_unreset(int fd, char *buf, size_t size)
{
	socklen_t len = sizeof(int);
	size_t got = 0;
	ssize_t n = 0;
	int err = -1;

	while (got < size - 1 && (n = read(fd, buf + got, size - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	assert_int_equal(n, 0);
	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
	assert_int_equal(err, 0);
	close(fd);
	return buf;
}

/* The answer <answer>, its head put in <head>: the 503 of a connection given up at a handover,
 * which says why. */
static void assert_handed_over(const char *answer, char *head, size_t size)
{
	const char *body = split_answer(answer, head, size);

	assert_true(!strncmp(head, "HTTP/1.1 503 ", 13));
	assert_non_null(strstr(body, "handed its admin address over"));
}

/*
 * At a handover (an upgrade: hlb_http_free_handed_over()), a connection whose request was not
 * carried out is answered 503, to be sent again to the newer hashlb: one whose request has not
 * come whole (a HEAD among them without the body, however little of it came), and one still
 * in the listener's queue, not accepted yet (closed with the listener, it was reset). A
 * request its handler held was carried out: it is not answered 503 (sent again, a POST /close
 * closed the connections of then), but told so. Each 503 has Retry-After and no-store.
 */
static void test_handover_503_only_to_requests_not_carried_out(void **state)
{
	struct tcp_end e;
	char buf[512], head[512];
	const char *body;
	int part, he, held, queued;

	(void)state;
	tcp_end_new(&e);
	part = tcp_ask(e.port, "GET /now HT");
	he = tcp_ask(e.port, "HE");
	held = tcp_ask(e.port, "POST /wait HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
	pump(e.l, &e.held, -1);
	assert_int_not_equal(e.held, 0);
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), 3);
	/* its whole request sent before the handover, unread: read first, not a reset */
	queued = tcp_ask(e.port, "POST /now HTTP/1.1\r\nContent-Length: 9\r\n\r\nbackend=a");
	hlb_http_free_handed_over(e.h);
	hlb_loop_free(e.l);

	body = split_answer(answer_of(part, buf, sizeof(buf)), head, sizeof(head));
	assert_true(!strncmp(head, "HTTP/1.1 503 ", 13));
	assert_non_null(strstr(head, "\r\nCache-Control: no-store\r\n"));
	assert_non_null(strstr(head, "\r\nRetry-After: 1\r\n"));
	assert_non_null(strstr(body, "handed its admin address over"));
	body = split_answer(answer_of(he, buf, sizeof(buf)), head, sizeof(head));
	assert_true(!strncmp(head, "HTTP/1.1 503 ", 13));
	assert_string_equal(body, "");
	body = split_answer(answer_of(held, buf, sizeof(buf)), head, sizeof(head));
	assert_true(strncmp(head, "HTTP/1.1 503 ", 13) != 0);
	assert_null(strstr(head, "Retry-After"));
	assert_non_null(strstr(body, "the request was carried out"));
	assert_handed_over(answer_unreset(queued, buf, sizeof(buf)), head, sizeof(head));
}

/*
 * The listener's queue drained at a handover goes past a connection its client reset while
 * it waited, whether accept4() reports it (ECONNABORTED) or accepts it (Linux, the reset read
 * after): the connections queued behind it are answered 503 all the same, not reset with the
 * listener.
 */
static void test_handover_drain_passes_over_aborted(void **state)
{
	struct linger reset = { .l_onoff = 1, .l_linger = 0 };
	struct tcp_end e;
	char buf[512], head[512];
	int gone, queued;

	(void)state;
	tcp_end_new(&e);
	gone = tcp_ask(e.port, "GET /now HTTP/1.1\r\n\r\n");
	assert_int_equal(setsockopt(gone, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)), 0);
	close(gone);
	queued = tcp_ask(e.port, "GET /now HTTP/1.1\r\n\r\n");
	accept_aborts = 2;
	hlb_http_free_handed_over(e.h);
	assert_int_equal(accept_aborts, 0); /* both aborts taken by the drain, and gone past */
	hlb_loop_free(e.l);
	assert_handed_over(answer_unreset(queued, buf, sizeof(buf)), head, sizeof(head));
}

/*
 * A client still sending its body when the handover answers it 503 (the request not come
 * whole): what comes while the listener's queue drains, after the answer, is read before the
 * close too, so the connection ends with a FIN behind the answer, not a reset.
 */
static void test_handover_reads_what_comes_while_the_queue_drains(void **state)
{
	struct tcp_end e;
	char buf[512], head[512];
	int part;

	(void)state;
	tcp_end_new(&e);
	part = tcp_ask(e.port, "POST /now HTTP/1.1\r\nContent-Length: 9\r\n\r\nback");
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), 1);
	accept_then = part;
	accept_then_sends = "end=a";
	hlb_http_free_handed_over(e.h);
	assert_int_equal(accept_then, -1);
	hlb_loop_free(e.l);
	assert_handed_over(answer_unreset(part, buf, sizeof(buf)), head, sizeof(head));
}

/*
 * A connection answered 503 at accept that waits for its request's first byte, given up
 * before the loop saw that byte (a handover, or a newer one taking its place), goes by the
 * bytes that have come: a HEAD without the body. It was answered as one to which nothing had
 * come, with the body, the byte there unread.
 */
static void test_busy_at_accept_given_up_reads_what_came(void **state)
{
	int fds[HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX];
	int n = HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX, fd;
	struct tcp_end e;
	char buf[512], head[512];
	const char *body;

	(void)state;
	tcp_end_new(&e);
	fd = busy_at_accept(&e, fds);
	/* the HEAD comes, the loop not run since: given up at a handover */
	assert_int_equal(write(fd, "HEAD /now HTTP/1.1\r\n\r\n", 22), 22);
	shutdown(fd, SHUT_WR);
	hlb_http_free_handed_over(e.h);
	hlb_loop_free(e.l);
	body = split_answer(answer_of(fd, buf, sizeof(buf)), head, sizeof(head));
	assert_true(!strncmp(head, "HTTP/1.1 503 ", 13));
	assert_string_equal(body, "");
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/*
 * At a handover, a connection answered 503 at accept that still waits for its request's first
 * byte (sent or not: the loop has not seen it) is answered as the others whose request was not
 * carried out, "handed over", to be sent again to the newer hashlb: it got "too many admin
 * connections", which the newer one has not.
 */
static void test_handover_answers_busy_at_accept(void **state)
{
	int fds[HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX];
	int n = HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX, sent, silent;
	struct tcp_end e;
	char buf[512], head[512];
	const char *body;

	(void)state;
	tcp_end_new(&e);
	sent = busy_at_accept(&e, fds);
	silent = tcp_ask(e.port, "");
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), n + 2);
	assert_int_equal(write(sent, "GET /now HTTP/1.1\r\n\r\n", 21), 21);
	hlb_http_free_handed_over(e.h);
	hlb_loop_free(e.l);
	body = split_answer(answer_unreset(sent, buf, sizeof(buf)), head, sizeof(head));
	assert_true(!strncmp(head, "HTTP/1.1 503 ", 13));
	assert_non_null(strstr(head, "\r\nRetry-After: 1\r\n"));
	assert_non_null(strstr(body, "handed its admin address over"));
	assert_handed_over(answer_of(silent, buf, sizeof(buf)), head, sizeof(head));
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/*
 * At a handover, a connection answered 503 at accept ("too many admin connections") whose
 * client still sends its request's body reads what comes while the listener's queue drains
 * before its close, as the connections accepted do: its end a FIN behind the answer. Closed
 * before the drain, those bytes met a closed socket, and the reset could discard the 503.
 */
static void test_handover_reads_what_comes_to_busy_at_accept(void **state)
{
	int fds[HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX];
	int n = HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX, fd;
	struct tcp_end e;
	char buf[512];

	(void)state;
	tcp_end_new(&e);
	fd = busy_at_accept(&e, fds);
	assert_int_equal(write(fd, "POST /now HTTP/1.1\r\nContent-Length: 9\r\n\r\nback", 45), 45);
	pump(e.l, NULL, fd);
	assert_true(readable(fd)); /* answered 503, lingering: not read here, as a client that
				    * sends its whole request before it reads */
	accept_then = fd;
	accept_then_sends = "end=a";
	hlb_http_free_handed_over(e.h);
	assert_int_equal(accept_then, -1);
	hlb_loop_free(e.l);
	assert_busy_answer(answer_unreset(fd, buf, sizeof(buf)));
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* The descriptors the process has open. */
static int fds_open(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = -1; /* the directory's own */

	assert_non_null(d);
	for (struct dirent *de; (de = readdir(d));)
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Whether <l> ends the <conns>th connection of <h>'s with nothing else happening (its timer's
 * doing: a loop not woken for it would wait, one that spins would run its 10 rounds at once). */
static bool ends_alone(struct hlb_loop *l, struct hlb_http *h, unsigned conns)
{
	for (int i = 0; i < 10 && hlb_http_conns(h) >= conns; i++)
		assert_true(hlb_loop_run_once(l, 5000) >= 0);
	return hlb_http_conns(h) == conns - 1;
}

/*
 * A connection lingering for its client's end, and a 503 lingering at accept, end at their
 * time with nothing else happening: the loop's timer wakes it for them; until then nothing
 * wakes it. Of the 503s, the one answered longest ago gives its place to a 65th. Freed, the
 * endpoint closes every descriptor it holds, the 503s lingering among them.
 */
static void test_linger_ends_at_its_time(void **state)
{
	int fds[HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX], shed[65], fd;
	int n = HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX, before = fds_open();
	struct tcp_end e;
	char buf[512];

	(void)state;
	tcp_end_new(&e);
	hlb_http_set_timeouts(e.h, 600000, 600000);
	fd = tcp_ask(e.port, "GET /now HTTP/1.1\r\n\r\n");
	assert_true(!strncmp(read_now(e.l, fd, buf, sizeof(buf)), "HTTP/1.1 200 ", 13));
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), 1);
	assert_int_equal(hlb_loop_run_once(e.l, 0), 0); /* lingering: nothing to do */
	close(fd);
	settle(e.l);
	hlb_http_set_timeouts(e.h, 600000, 20);
	fd = tcp_ask(e.port, "GET /now HTTP/1.1\r\n\r\n");
	assert_true(!strncmp(read_now(e.l, fd, buf, sizeof(buf)), "HTTP/1.1 200 ", 13));
	assert_true(ends_alone(e.l, e.h, 1));
	close(fd);

	/* 72 connections held, then 503s at accept */
	clients_open(&e, fds, 0, n);
	fd = tcp_ask(e.port, "POST /now HTTP/1.1\r\nContent-Length: 9\r\n\r\n");
	assert_true(!strncmp(read_now(e.l, fd, buf, sizeof(buf)), "HTTP/1.1 503 ", 13));
	assert_true(ends_alone(e.l, e.h, n + 1));
	close(fd);
	hlb_http_set_timeouts(e.h, 600000, 600000);
	for (int i = 0; i < 65; i++) {
		shed[i] = tcp_ask(e.port, "POST /now HTTP/1.1\r\nContent-Length: 9\r\n\r\n");
		assert_true(
			!strncmp(read_now(e.l, shed[i], buf, sizeof(buf)), "HTTP/1.1 503 ", 13));
	}
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), n + 64);
	assert_int_equal(hlb_loop_run_once(e.l, 0), 0); /* lingering: nothing to do */
	/* the first given up: its client's body draws a reset; the second's goes in */
	assert_int_equal(send(shed[0], "back", 4, MSG_NOSIGNAL), 4);
	assert_int_equal(send(shed[1], "back", 4, MSG_NOSIGNAL), 4);
	settle(e.l);
	assert_int_equal(send(shed[0], "end=a", 5, MSG_NOSIGNAL), -1);
	assert_int_equal(send(shed[1], "end=a", 5, MSG_NOSIGNAL), 5);
	/* one more, its time short (the others' long): ends at it, not at theirs */
	hlb_http_set_timeouts(e.h, 600000, 20);
	fd = tcp_ask(e.port, "POST /now HTTP/1.1\r\nContent-Length: 9\r\n\r\n");
	assert_true(!strncmp(read_now(e.l, fd, buf, sizeof(buf)), "HTTP/1.1 503 ", 13));
	assert_true(ends_alone(e.l, e.h, n + 64));
	close(fd);
	tcp_end_free(&e);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	for (int i = 0; i < 65; i++)
		close(shed[i]);
	assert_int_equal(fds_open(), before);
}

/*
 * A new endpoint that fails to start on the path of a live one (an upgrade's new hashlb,
 * whose loop cannot watch its socket) leaves the path to the live one. The socket was renamed
 * over the path before the loop watched it: the path named a closed socket, and every client
 * was refused until the old hashlb took the path back.
 */
static void test_failed_start_leaves_the_path(void **state)
{
	char dir[] = "/tmp/hashlb-test-http-XXXXXX", buf[512];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct hashlb_error err = { 0 };
	struct hlb_http *old, *h = NULL;
	struct hlb_loop *l, *broken;
	uint64_t held = 0;
	int fd, devnull;

	(void)state;
	old = hold_wait_server(dir, &sun, &l, &held);
	/* a loop whose epoll descriptor is no epoll: hlb_loop_add() fails (EINVAL) */
	assert_int_equal(hlb_loop_new(&broken), 0);
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(devnull >= 0);
	assert_true(dup3(devnull, hlb_loop_fd(broken), O_CLOEXEC) >= 0);
	close(devnull);
	assert_true(hlb_http_new(broken, (const struct sockaddr *)&sun, sizeof(sun), hold_wait,
				 &held, &h, &err) < 0);
	assert_null(h);
	/* the old one still answers there */
	fd = client_ask(&sun, "GET /now HTTP/1.1\r\nHost: t\r\n\r\n");
	pump(l, NULL, fd);
	assert_non_null(strstr(answer_of(fd, buf, sizeof(buf)), "\r\n\r\nnow\n"));
	hlb_loop_free(broken);
	hlb_http_free(old);
	hlb_loop_free(l);
	assert_int_equal(rmdir(dir), 0); /* and no name of its own left beside it */
}

/*
 * open64() (linked with --wrap=open64: open() with 64-bit offsets): with <steal_devnull> set, the
 * next open of /dev/null first takes the lowest free descriptor into <stolen>, as a worker's accept
 * at the fd limit can between the endpoint's close of a connection and its opening of the reserve
 * again.
 */
int __real_open64(const char *path, int flags, ...);
int __wrap_open64(const char *path, int flags, ...);
static bool steal_devnull;
static int stolen = -1;

int __wrap_open64(const char *path, int flags, ...)
{
	int mode = 0;

	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;

		va_start(ap, flags);
		mode = va_arg(ap, int);
		va_end(ap);
	}
	if (steal_devnull && !strcmp(path, "/dev/null")) {
		steal_devnull = false;
		stolen = __real_open64("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	return __real_open64(path, flags, mode);
}

/* Every descriptor of the process taken: the soft limit before (<was>), and the /dev/null
 * opened up to it (<fill>), for fd_limit_undo(). */
struct fd_limit {
	struct rlimit was;
	int fill[256];
	int n_fill;
};

/* The soft limit lowered to 64 past the descriptor <fd>, then every descriptor below it taken. */
static void fd_limit_reach(struct fd_limit *f, int fd)
{
	struct rlimit low;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &f->was), 0);
	low = f->was;
	low.rlim_cur = (rlim_t)fd + 64 < f->was.rlim_cur ? (rlim_t)fd + 64 : f->was.rlim_cur;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	f->n_fill = 0;
	while (f->n_fill < (int)(sizeof(f->fill) / sizeof(*f->fill)) &&
	       (fd = __real_open64("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		f->fill[f->n_fill++] = fd;
	assert_int_equal(errno, EMFILE);
}

/* fd_limit_reach() undone: before a test's verdict, which would leave the next at the limit. */
static void fd_limit_undo(struct fd_limit *f)
{
	while (f->n_fill)
		close(f->fill[--f->n_fill]);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &f->was), 0);
}

/*
 * At the fd limit the endpoint answers with the descriptor it keeps in reserve, and takes
 * it back when that connection closes: in one step (dup3() over the connection's slot). It
 * closed the connection, then opened /dev/null again, and a descriptor the forwarder took in
 * between (its accepts retry at the limit) left it none: the next request waited in the
 * backlog for good (forward-3's fd_limit_admin timed out so once in CI).
 */
static void test_reserve_kept_at_the_fd_limit(void **state)
{
	char dir[] = "/tmp/hashlb-test-http-XXXXXX", buf[512];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct fd_limit f;
	struct hlb_http *h;
	struct hlb_loop *l;
	bool answered_a, answered_b;
	uint64_t held = 0;
	int a, b;

	(void)state;
	h = hold_wait_server(dir, &sun, &l, &held);
	/* two clients in the backlog, then every descriptor taken */
	a = client_ask(&sun, "GET /now HTTP/1.1\r\nHost: t\r\n\r\n");
	b = client_ask(&sun, "GET /now HTTP/1.1\r\nHost: t\r\n\r\n");
	fd_limit_reach(&f, b);
	/* a's answer on the reserve; its slot, freed, is taken at once */
	steal_devnull = true;
	pump(l, NULL, a);
	answered_a = readable(a);
	/* b's, on the reserve again */
	pump(l, NULL, b);
	steal_devnull = false;
	answered_b = readable(b);
	if (answered_b)
		answered_b = strstr(answer_of(b, buf, sizeof(buf)), "\r\n\r\nnow\n") != NULL;
	else
		close(b);
	/* undone before the verdict, which would leave the next test at the limit */
	close(a);
	if (stolen >= 0)
		close(stolen);
	stolen = -1;
	fd_limit_undo(&f);
	assert_true(answered_a);
	assert_true(answered_b);
	hlb_http_free(h);
	hlb_loop_free(l);
	rmdir(dir);
}

/*
 * At the fd limit, a connection answered that lingers for its client's end holds a descriptor,
 * the reserve's maybe, that another client needs: it gives it up, as it gives its place at the
 * 64 (what its client sent read first). It held it until its client's end or its 2 s: every
 * admin request waited in the backlog meanwhile, retried every 100 ms, where the client that
 * lingered (one that reads its answer and is slow to close its socket) had ended long since.
 */
static void test_lingering_gives_its_descriptor_at_the_fd_limit(void **state)
{
	bool answered_a, lingers_a, answered_b;
	struct fd_limit f;
	struct tcp_end e;
	char buf[512];
	int a, b;

	(void)state;
	tcp_end_new(&e);
	/* lingering ends only at its client's end, or when its place is needed */
	hlb_http_set_timeouts(e.h, 600000, 600000);
	/* two clients in the backlog, their writing left open, then every descriptor taken */
	a = tcp_ask(e.port, "GET /now HTTP/1.1\r\n\r\n");
	b = tcp_ask(e.port, "GET /now HTTP/1.1\r\n\r\n");
	fd_limit_reach(&f, b);
	/* a's answer, on the reserve; a reads it, and lingers (its client has not ended) */
	pump(e.l, NULL, a);
	answered_a =
		readable(a) && !strncmp(read_now(e.l, a, buf, sizeof(buf)), "HTTP/1.1 200 ", 13);
	settle(e.l);
	lingers_a = hlb_http_conns(e.h) == 1;
	/* b's, on the descriptor a gives up */
	pump(e.l, NULL, b);
	answered_b =
		readable(b) && !strncmp(read_now(e.l, b, buf, sizeof(buf)), "HTTP/1.1 200 ", 13);
	fd_limit_undo(&f);
	close(a);
	close(b);
	assert_true(answered_a);
	assert_true(lingers_a);
	assert_true(answered_b);
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), 0);
	tcp_end_free(&e);
}

/*
 * At a handover at the fd limit, the connections still in the listener's queue are answered on
 * the reserve, as at accept, one after the other (its slot taken back after each): the drain
 * stopped at the first EMFILE, and every one of them was reset with the listener.
 */
static void test_handover_drain_at_the_fd_limit(void **state)
{
	char bufs[2][512], head[512];
	struct fd_limit f;
	struct tcp_end e;
	int queued[2];

	(void)state;
	tcp_end_new(&e);
	queued[0] = tcp_ask(e.port, "GET /now HTTP/1.1\r\n\r\n");
	queued[1] = tcp_ask(e.port, "POST /now HTTP/1.1\r\nContent-Length: 9\r\n\r\nbackend=a");
	fd_limit_reach(&f, queued[1]);
	hlb_http_free_handed_over(e.h);
	/* undone before the verdict, which would leave the next test at the limit */
	fd_limit_undo(&f);
	hlb_loop_free(e.l);
	for (int i = 0; i < 2; i++) {
		assert_handed_over(answer_unreset(queued[i], bufs[i], sizeof(bufs[i])), head,
				   sizeof(head));
	}
}

/*
 * A handover at the fd limit, the reserve held by the connection <held> of <e> (accepted on
 * it, <conns> connections in all then): a client queued behind it is answered all the same,
 * and so is <held>, neither reset.
 */
static void assert_drain_past_the_reserve(struct tcp_end *e, int held, unsigned conns)
{
	int queued = tcp_ask(e->port, "GET /now HTTP/1.1\r\n\r\n");
	char buf[512], head[512];
	struct fd_limit f;

	fd_limit_reach(&f, queued);
	assert_true(hlb_loop_run_once(e->l, 0) >= 0);
	assert_int_equal(hlb_http_conns(e->h), conns); /* <held> on the reserve, <queued> waits */
	hlb_http_free_handed_over(e->h);
	/* undone before the verdict, which would leave the next test at the limit */
	fd_limit_undo(&f);
	hlb_loop_free(e->l);
	assert_handed_over(answer_unreset(queued, buf, sizeof(buf)), head, sizeof(head));
	assert_handed_over(answer_unreset(held, buf, sizeof(buf)), head, sizeof(head));
}

/*
 * At a handover at the fd limit, the reserve held by a connection answered 503 at accept (past
 * the 64 and the 8, accepted on it), the connections still in the listener's queue are
 * answered all the same: that one gives its descriptor up, what its client sent read first, as
 * one that lingers would (accept_room()). Kept open through the drain, as the others answered,
 * it held the reserve: the drain stopped at the first EMFILE, and the queue was reset with the
 * listener.
 */
static void test_handover_drain_at_the_fd_limit_reserve_shed(void **state)
{
	int fds[HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX];
	int n = HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX;
	struct tcp_end e;

	(void)state;
	tcp_end_new(&e);
	hlb_http_set_timeouts(e.h, 600000, 600000);
	for (int i = 0; i < n; i++) {
		fds[i] = tcp_ask(e.port, "");
		settle(e.l);
	}
	assert_int_equal(hlb_http_conns(e.h), n);
	/* the next one accepted on the reserve, and answered 503 at accept */
	assert_drain_past_the_reserve(&e, tcp_ask(e.port, ""), (unsigned)n + 1);
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/*
 * At a handover at the fd limit, the reserve held by a connection whose request had not come
 * (accepted on it), the connections still in the listener's queue are answered all the same:
 * that one, answered at the handover, gives its descriptor up, what its client sent read
 * first. Kept open through the drain, it held the reserve: the drain stopped at the first
 * EMFILE, and the queue was reset with the listener.
 */
static void test_handover_drain_at_the_fd_limit_reserve_placed(void **state)
{
	struct tcp_end e;

	(void)state;
	tcp_end_new(&e);
	hlb_http_set_timeouts(e.h, 600000, 600000);
	assert_drain_past_the_reserve(&e, tcp_ask(e.port, ""), 1);
}

/*
 * What a client sends as a connection's time runs out, come after the loop looked at its
 * sockets, is read before the timer closes it: a request come whole then is answered (a silent
 * connection was closed with it unread: a reset); what comes to a connection that lingers,
 * answered, or to a 503 at accept that lingers, is read and dropped, and the close is a FIN
 * behind the answer, not a reset that can discard it before its client reads it.
 */
static void test_deadline_reads_what_came_then(void **state)
{
	int fds[HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX];
	int n = HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX, fd;
	struct tcp_end e;
	char buf[512];
	ssize_t got;

	(void)state;
	tcp_end_new(&e);
	hlb_http_set_timeouts(e.h, 50, 50);
	/* silent until its 50 ms are over, its request coming then */
	fd = tcp_ask(e.port, "");
	assert_true(hlb_loop_run_once(e.l, 0) >= 0);
	assert_int_equal(hlb_http_conns(e.h), 1);
	run_due_as_sent(e.l, 100, fd, "GET /now HTTP/1.1\r\n\r\n");
	assert_true(readable(fd));
	got = read(fd, buf, sizeof(buf) - 1);
	buf[got > 0 ? got : 0] = '\0';
	assert_true(!strncmp(buf, "HTTP/1.1 200 ", 13));
	assert_non_null(strstr(buf, "\r\n\r\nnow\n"));
	/* it lingers, its client not ended; a pipelined request comes as its 50 ms end */
	assert_int_equal(hlb_http_conns(e.h), 1);
	run_due_as_sent(e.l, 100, fd, "GET /now HTTP/1.1\r\n\r\n");
	assert_int_equal(hlb_http_conns(e.h), 0);
	assert_string_equal(answer_unreset(fd, buf, sizeof(buf)), "");

	/* a 503 at accept, lingering: the rest of its body comes as its time ends */
	fd = busy_at_accept(&e, fds);
	hlb_http_set_timeouts(e.h, 600000, 50);
	assert_int_equal(write(fd, "POST /now HTTP/1.1\r\nContent-Length: 9\r\n\r\nback", 46), 46);
	assert_true(hlb_loop_run_once(e.l, 0) >= 0);
	assert_int_equal(hlb_http_conns(e.h), n + 1);
	run_due_as_sent(e.l, 100, fd, "end=a");
	assert_int_equal(hlb_http_conns(e.h), n);
	assert_true(!strncmp(answer_unreset(fd, buf, sizeof(buf)), "HTTP/1.1 503 ", 13));
	clients_end(&e, fds, n);
	tcp_end_free(&e);
}

/*
 * A head asking 100-continue come as the connection's time runs out (after the loop looked at
 * its sockets) is answered 408 alone: its body has no time left to come. It got a 100 and then
 * the 408 straight after, told to send a body that would not be read. One its head alone
 * answers (a path the endpoint does not have) is answered so then, as before its deadline.
 */
static void test_deadline_sends_no_continue(void **state)
{
	static const char *const heads[] = {
		"POST /now HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
		"POST /nope HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
	};
	static const char *const status[] = { "HTTP/1.1 408 ", "HTTP/1.1 404 " };
	struct tcp_end e;
	char buf[512];
	ssize_t got;
	int fd;

	(void)state;
	tcp_end_new(&e);
	hlb_http_on_head(e.h, nope_head, NULL);
	hlb_http_set_timeouts(e.h, 50, 50);
	for (int i = 0; i < 2; i++) {
		fd = tcp_ask(e.port, "");
		assert_true(hlb_loop_run_once(e.l, 0) >= 0);
		run_due_as_sent(e.l, 100, fd, heads[i]);
		assert_true(readable(fd));
		got = read(fd, buf, sizeof(buf) - 1);
		buf[got > 0 ? got : 0] = '\0';
		assert_true(!strncmp(buf, status[i], 13));
		close(fd);
	}
	tcp_end_free(&e);
}

/*
 * At a stop (hlb_http_free(), no handover), what the client of a lingering connection sent
 * that the loop has not read yet (a pipelined request), or that of a 503 at accept lingering
 * (the rest of its body), is read before the close, as at its deadline: the close is a FIN
 * behind the answer. It was closed with those bytes unread: a reset, which fails a client
 * still sending and can discard the answer before its client reads it.
 */
static void test_stop_reads_what_came(void **state)
{
	int fds[HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX];
	int n = HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX, fd;
	struct tcp_end e;
	char buf[512];

	(void)state;
	tcp_end_new(&e);
	fd = tcp_ask(e.port, "GET /now HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(read_now(e.l, fd, buf, sizeof(buf)), "\r\n\r\nnow\n"));
	settle(e.l);
	assert_int_equal(hlb_http_conns(e.h), 1); /* lingering, its client not ended */
	assert_int_equal(write(fd, "GET /now HTTP/1.1\r\n\r\n", 21), 21);
	tcp_end_free(&e);
	assert_string_equal(answer_unreset(fd, buf, sizeof(buf)), "");

	tcp_end_new(&e);
	fd = busy_at_accept(&e, fds);
	assert_int_equal(write(fd, "POST /now HTTP/1.1\r\nContent-Length: 9\r\n\r\nback", 46), 46);
	assert_true(hlb_loop_run_once(e.l, 0) >= 0);
	assert_int_equal(hlb_http_conns(e.h), n + 1); /* its 503 written, lingering */
	assert_int_equal(write(fd, "end=a", 5), 5);
	tcp_end_free(&e);
	assert_true(!strncmp(answer_unreset(fd, buf, sizeof(buf)), "HTTP/1.1 503 ", 13));
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* The handler of test_fds_answer_waits_on_the_loop(): GET /fds, FDS_N descriptors
 * (fds_lent[]), a line of FDS_LINE bytes each, GET /more FDS_MORE; any other path "now". */
enum { FDS_N = 600, FDS_LINE = 1024 }; /* 600 KiB of lines: past the socket's 208 KiB */
enum { FDS_MORE = 4000 }; /* nearly the copies every answer may keep (FDS_KEPT_MAX below) */
static int fds_lent[FDS_MORE];
static unsigned fds_served; /* the answers with descriptors fds_answer() gave */

static void fds_answer(void *arg, const struct hlb_http_req *req, struct hlb_http_resp *resp)
{
	unsigned n = !strcmp(req->path, "/fds")	   ? FDS_N
		     : !strcmp(req->path, "/more") ? FDS_MORE
						   : 0;

	(void)arg;
	resp->ctype = "text/plain";
	if (!n) {
		hlb_buf_puts(&resp->body, "now\n");
		return;
	}
	fds_served++;
	for (unsigned i = 0; i < n; i++)
		hlb_buf_printf(&resp->body, "%04u %*s\n", i, FDS_LINE - 6, "");
	resp->fds = fds_lent;
	resp->n_fds = n;
}

/* An endpoint of <fn> (fds_answer() if NULL; unix_server()), its timeout 10 minutes: every
 * descriptor fds_answer() lends the read end of a new pipe, <p>. */
static struct hlb_http *fds_server_of(char *dir, struct sockaddr_un *sun, struct hlb_loop **l,
				      int p[2], hlb_http_handler fn, void *arg)
{
	struct hlb_http *h = unix_server(dir, sun, l, fn ? fn : fds_answer, arg);

	hlb_http_set_timeouts(h, 600000, HLB_HTTP_LINGER_MS);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	for (int i = 0; i < FDS_MORE; i++)
		fds_lent[i] = p[0];
	return h;
}

static struct hlb_http *fds_server(char *dir, struct sockaddr_un *sun, struct hlb_loop **l,
				   int p[2])
{
	return fds_server_of(dir, sun, l, p, NULL, NULL);
}

/*
 * An answer with descriptors riding on its lines (GET /sockets) that does not fit the socket
 * waits for its client on the loop, as any answer: another request is answered meanwhile,
 * and the client that reads later gets it whole, every descriptor with it, though the one lent
 * was closed since (a worker closes a listener's as a reload removes it): those still to go
 * were copied. It waited in poll(), the control thread held (checks, every admin request),
 * and after 1 s the answer was cut short.
 */
/* What a GET /fds's client read on <fd>, to its end (or, <stop> not 0, until <stop>
 * descriptors came), <l> run between reads: its bytes, and the descriptors that came with
 * them, those that are <lent> counted apart. */
struct fds_read {
	size_t got, want;
	unsigned fds, same;
};

static struct fds_read fds_read_all(struct hlb_loop *l, int fd, const struct stat *lent,
				    unsigned stop)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 250)];
		struct cmsghdr align;
	} ctl;
	static char chunk[64 << 10];
	struct fds_read r = { 0 };
	struct stat st;
	ssize_t n = 1;

	/* a bound that fails the test */
	for (int round = 0; n != 0 && (!stop || r.fds < stop) && round < 100000; round++) {
		struct iovec iov = { chunk, sizeof(chunk) };
		struct msghdr msg = { .msg_iov = &iov,
				      .msg_iovlen = 1,
				      .msg_control = ctl.buf,
				      .msg_controllen = sizeof(ctl.buf) };

		assert_true(hlb_loop_run_once(l, 0) >= 0);
		n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			assert_int_equal(errno, EAGAIN);
			continue;
		}
		assert_false(msg.msg_flags & MSG_CTRUNC);
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
			unsigned k = (unsigned)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			for (unsigned i = 0; i < k; i++) {
				int got_fd;

				memcpy(&got_fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(got_fd));
				r.same += fstat(got_fd, &st) == 0 && st.st_ino == lent->st_ino &&
					  st.st_dev == lent->st_dev;
				close(got_fd);
			}
			r.fds += k;
		}
		if (!r.got && n) { /* the head's length, from the first read */
			assert_non_null(memmem(chunk, (size_t)n, "\r\n\r\n", 4));
			r.want = (size_t)((char *)memmem(chunk, (size_t)n, "\r\n\r\n", 4) + 4 -
					  chunk) +
				 FDS_N * (size_t)FDS_LINE;
		}
		r.got += (size_t)n;
	}
	if (stop)
		assert_true(r.fds >= stop);
	else
		assert_int_equal(n, 0);
	return r;
}

/* <r> (fds_read_all()'s) is a GET /fds's answer whole, every descriptor the one lent. */
static void fds_got_whole(struct fds_read r)
{
	assert_int_equal(r.got, r.want);
	assert_int_equal(r.fds, FDS_N);
	assert_int_equal(r.same, FDS_N);
}

/* fds_server()'s endpoint <h> on <l>, its pipe <p>, socket <sun> and <dir>, ended. */
static void fds_server_free(struct hlb_http *h, struct hlb_loop *l, const int p[2],
			    const struct sockaddr_un *sun, const char *dir)
{
	close(p[0]);
	close(p[1]);
	hlb_http_free(h);
	hlb_loop_free(l);
	unlink(sun->sun_path);
	rmdir(dir);
}

static void test_fds_answer_waits_on_the_loop(void **state)
{
	char dir[] = "/tmp/hashlb-test-http-XXXXXX", buf[512];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct hlb_http *h;
	struct hlb_loop *l;
	struct stat lent;
	struct fds_read r;
	int p[2], slow, other;

	(void)state;
	h = fds_server(dir, &sun, &l, p);
	assert_int_equal(fstat(p[0], &lent), 0);
	slow = client_ask(&sun, "GET /fds HTTP/1.1\r\nHost: t\r\n\r\n");
	pump(l, NULL, slow); /* answered, as far as the socket takes it */
	assert_true(readable(slow));
	close(p[0]);
	other = client_ask(&sun, "GET /now HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_non_null(strstr(read_now(l, other, buf, sizeof(buf)), "\r\n\r\nnow\n"));
	close(other);
	r = fds_read_all(l, slow, &lent, 0); /* read now, to its end */
	close(slow);
	close(p[1]);
	fds_got_whole(r);
	hlb_http_free(h);
	hlb_loop_free(l);
	unlink(sun.sun_path);
	rmdir(dir);
}

/*
 * Answers with descriptors that wait on the loop for clients that read nothing (GET /sockets
 * over the admin socket, nothing read) keep copies of those still to go, at most
 * FDS_KEPT_MAX of them together (http.c's HTTP_FDS_KEPT_MAX, one GET /sockets's most); past
 * that, an answer waits in poll() for its client as where none can be copied, 1 s, cut short.
 * Before, each kept its own: up to 64 answers' worth, 262,144 descriptors, for 10 s a client,
 * taken from those the workers' clients need.
 */
enum { FDS_KEPT_MAX = 4096, FDS_SLOW = 12 }; /* 12 answers of 600: each keeps 400 or so */
static void test_fds_answers_keep_a_bounded_count(void **state)
{
	char dir[] = "/tmp/hashlb-test-http-XXXXXX";
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int p[2], slow[FDS_SLOW], before, at_start = fds_open();
	struct hlb_http *h;
	struct hlb_loop *l;

	(void)state;
	h = fds_server(dir, &sun, &l, p);
	before = fds_open();
	for (int i = 0; i < FDS_SLOW; i++) {
		slow[i] = client_ask(&sun, "GET /fds HTTP/1.1\r\nHost: t\r\n\r\n");
		pump(l, NULL, slow[i]); /* answered, as far as the socket takes it */
		assert_true(readable(slow[i]));
	}
	/* both ends of each connection (the endpoint's closed where it cut its answer short),
	 * and the copies */
	assert_true(fds_open() - before <= 2 * FDS_SLOW + FDS_KEPT_MAX);
	for (int i = 0; i < FDS_SLOW; i++)
		close(slow[i]);
	close(p[0]);
	close(p[1]);
	hlb_http_free(h);
	hlb_loop_free(l);
	assert_int_equal(fds_open(), at_start); /* every copy closed */
	unlink(sun.sun_path);
	rmdir(dir);
}

/* fds_answer()'s count of the descriptors of its answer (hlb_http_on_fds()). */
static unsigned fds_count(void *arg, const struct hlb_http_req *req)
{
	(void)arg;
	return !strcmp(req->path, "/fds") ? FDS_N : !strcmp(req->path, "/more") ? FDS_MORE : 0;
}

/*
 * With the count of the descriptors an answer carries known before it is served
 * (hlb_http_on_fds(), as GET /sockets's is), a request whose answer would pass the copies
 * every answer may keep together waits on the loop, its handler not run, until the others'
 * copies go; its client then gets it whole, every descriptor with it, as the others' do.
 * Before, its answer waited in poll() for its client, the control thread held (checks, every
 * admin request) up to 1 s, then was cut short: a client that had not read by then lost it.
 */
static void test_fds_answers_past_the_copies_wait_on_the_loop(void **state)
{
	char dir[] = "/tmp/hashlb-test-http-XXXXXX";
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int p[2], slow[FDS_SLOW], before, waiting = 0;
	struct hlb_http *h;
	struct hlb_loop *l;
	struct stat lent;

	(void)state;
	h = fds_server(dir, &sun, &l, p);
	hlb_http_on_fds(h, fds_count, NULL);
	assert_int_equal(fstat(p[0], &lent), 0);
	before = fds_open();
	for (int i = 0; i < FDS_SLOW; i++) {
		slow[i] = client_ask(&sun, "GET /fds HTTP/1.1\r\nHost: t\r\n\r\n");
		for (int k = 0; k < 20; k++) /* accepted and read: answered, or waiting */
			assert_true(hlb_loop_run_once(l, 0) >= 0);
		waiting += !readable(slow[i]);
	}
	/* 12 answers of 600 pass the 4,096 copies: the last ones wait, nothing sent yet */
	assert_true(waiting > 0);
	assert_true(fds_open() - before <= 2 * FDS_SLOW + FDS_KEPT_MAX);
	/* each read in turn, to its end: the copies of one read whole go, and those waiting are
	 * answered in their turn */
	for (int i = 0; i < FDS_SLOW; i++) {
		struct fds_read r = fds_read_all(l, slow[i], &lent, 0);

		close(slow[i]);
		fds_got_whole(r);
	}
	assert_int_equal(hlb_http_refused(h, HLB_HTTP_REFUSED_UNREAD), 0);
	fds_server_free(h, l, p, &sun, dir);
}

/*
 * A request waiting for room in the copies (as above) is served as soon as the answers that
 * hold them are read far enough, not only once one is read whole: the client of GET /more
 * (FDS_MORE descriptors) takes a part of it and stops, and the GET /fds that waited gets its
 * answer whole meanwhile. Before, only an answer read whole (or closed) woke the waiters: it
 * waited for a client that may take the rest minutes later, and was answered 503 after the
 * endpoint's timeout though the room had come long before.
 */
static void test_fds_answer_read_in_part_makes_room(void **state)
{
	char dir[] = "/tmp/hashlb-test-http-XXXXXX";
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int p[2], holder, waiter;
	struct hlb_http *h;
	struct hlb_loop *l;
	struct stat lent;
	struct fds_read r;

	(void)state;
	h = fds_server(dir, &sun, &l, p);
	hlb_http_on_fds(h, fds_count, NULL);
	assert_int_equal(fstat(p[0], &lent), 0);
	holder = client_ask(&sun, "GET /more HTTP/1.1\r\nHost: t\r\n\r\n");
	pump(l, NULL, holder); /* answered, as far as the socket takes it: the rest copied */
	waiter = client_ask(&sun, "GET /fds HTTP/1.1\r\nHost: t\r\n\r\n");
	for (int k = 0; k < 20; k++) /* accepted and read: waiting, nothing sent */
		assert_true(hlb_loop_run_once(l, 0) >= 0);
	assert_false(readable(waiter));
	/* a part read: FDS_KEPT_MAX - FDS_N copies at most are left, room for the waiter's */
	r = fds_read_all(l, holder, &lent, FDS_MORE - (FDS_KEPT_MAX - FDS_N));
	assert_true(r.fds < FDS_MORE);
	fds_got_whole(fds_read_all(l, waiter, &lent, 0));
	assert_int_equal(hlb_http_refused(h, HLB_HTTP_REFUSED_UNREAD), 0);
	close(waiter);
	close(holder);
	fds_server_free(h, l, p, &sun, dir);
}

/*
 * A request that waits for room in the copies and finds none within the endpoint's timeout
 * (made short here, hlb_http_set_timeouts(), after the answer that holds them began: its
 * client has 10 minutes) is answered 503, to ask again, counted as an answer not read; its
 * handler never ran: nothing was handed over (GET /sockets names no taker).
 */
static void test_fds_answer_without_room_in_time_is_refused(void **state)
{
	char dir[] = "/tmp/hashlb-test-http-XXXXXX", buf[1024];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int p[2], holder, waiter;
	struct hlb_http *h;
	struct hlb_loop *l;
	unsigned served;

	(void)state;
	h = fds_server(dir, &sun, &l, p);
	hlb_http_on_fds(h, fds_count, NULL);
	holder = client_ask(&sun, "GET /more HTTP/1.1\r\nHost: t\r\n\r\n");
	pump(l, NULL, holder); /* answered, as far as the socket takes it: the rest copied */
	served = fds_served;
	hlb_http_set_timeouts(h, 50, HLB_HTTP_LINGER_MS);
	waiter = client_ask(&sun, "GET /fds HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_true(!strncmp(read_now(l, waiter, buf, sizeof(buf)), "HTTP/1.1 503 ", 13));
	assert_non_null(strstr(buf, "leave no room for this one's"));
	assert_int_equal(fds_served, served);
	assert_int_equal(hlb_http_refused(h, HLB_HTTP_REFUSED_UNREAD), 1);
	close(waiter);
	close(holder);
	fds_server_free(h, l, p, &sun, dir);
}

/* The admin endpoint's GET /sockets (hlb_admin_handle(), hlb_admin_fds()) beside
 * fds_answer()'s GET /more, which holds the copies: a daemon whose listen_fds() hands
 * FDS_N descriptors over. */
static uint32_t sockets_listen_fds(void *daemon, pid_t taker, int *fds, const char **addrs,
				   uint32_t max)
{
	(void)daemon;
	(void)taker;
	for (uint32_t i = 0; i < FDS_N && i < max; i++) {
		fds[i] = fds_lent[0];
		addrs[i] = "127.0.0.1:1 s";
	}
	return FDS_N < max ? FDS_N : max;
}

static void sockets_or_more(void *arg, const struct hlb_http_req *req, struct hlb_http_resp *resp)
{
	if (!strcmp(req->path, "/more"))
		fds_answer(NULL, req, resp);
	else
		hlb_admin_handle(arg, req, resp);
}

static unsigned sockets_or_more_count(void *arg, const struct hlb_http_req *req)
{
	return !strcmp(req->path, "/more") ? FDS_MORE : hlb_admin_fds(arg, req);
}

/*
 * A GET /sockets that its handler refuses (format=json, a taker that is no pid, a parameter it
 * does not take) gets that refusal at once while the descriptor copies are full: it carries
 * no descriptor, so it waits for no room. Before, it waited like one that hands the sockets
 * over, and was answered 503 after the endpoint's timeout instead of its 400. One that hands
 * them over still waits (its 503 here, the timeout made short).
 */
static void test_fds_refused_sockets_does_not_wait(void **state)
{
	static const char *const refused[] = {
		"/sockets?format=json", "/sockets?taker=x",    "/sockets?taker=0",
		"/sockets?bogus=1",	"/sockets?format=xml",
	};
	char dir[] = "/tmp/hashlb-test-http-XXXXXX", buf[1024], ask[128];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct hlb_control ctl = { .listen_fds = sockets_listen_fds };
	int p[2], holder, waiter;
	struct hlb_http *h;
	struct hlb_loop *l;

	(void)state;
	h = fds_server_of(dir, &sun, &l, p, sockets_or_more, &ctl);
	hlb_http_on_fds(h, sockets_or_more_count, &ctl);
	holder = client_ask(&sun, "GET /more HTTP/1.1\r\nHost: t\r\n\r\n");
	pump(l, NULL, holder); /* answered, as far as the socket takes it: the rest copied */
	hlb_http_set_timeouts(h, 50, HLB_HTTP_LINGER_MS);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		snprintf(ask, sizeof(ask), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", refused[i]);
		waiter = client_ask(&sun, ask);
		read_now(l, waiter, buf, sizeof(buf));
		if (strncmp(buf, "HTTP/1.1 400 ", 13))
			fail_msg("GET %s: %.60s", refused[i], buf);
		close(waiter);
	}
	waiter = client_ask(&sun, "GET /sockets HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_true(!strncmp(read_now(l, waiter, buf, sizeof(buf)), "HTTP/1.1 503 ", 13));
	close(waiter);
	close(holder);
	fds_server_free(h, l, p, &sun, dir);
}

/* The handler of test_slow_reader_gets_the_whole_answer(): GET /big, BIG bytes. */
enum { BIG = 5 << 19 }; /* 2.5 MiB: 4 s at 640 KiB/s, past a unix socket's 208 KiB in flight */
/* the endpoint's timeout in test_slow_reader_gets_the_whole_answer(): 20 times the client's
 * pause between reads, as 10 s were 25 times its 400 ms; shorter than the answer takes */
enum { SLOW_TIMEOUT_MS = 2000 };

static void big_answer(void *arg, const struct hlb_http_req *req, struct hlb_http_resp *resp)
{
	(void)arg;
	(void)req;
	resp->ctype = "text/plain";
	for (int i = 0; i < BIG / 4096; i++)
		hlb_buf_printf(&resp->body, "%4095s\n", "");
}

/*
 * A client that reads a large answer slowly, but reads (a scraper of a /metrics of 20,000
 * backends, 64 MB, on a loaded machine), takes it whole. The answer was cut 10 s after the
 * connection came, however it went: test_upgrade's reads of such a /metrics broke off with
 * 54-58 of 64 MB under load. The 10 s are now counted from the last byte the client took:
 * one that stops reading is still let go.
 */
static void test_slow_reader_gets_the_whole_answer(void **state)
{
	char dir[] = "/tmp/hashlb-test-http-XXXXXX", head[256];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct hashlb_error err = { 0 };
	static char chunk[64 << 10];
	struct hlb_http *h;
	struct hlb_loop *l;
	size_t got = 0, head_len = 0, want = 0;
	uint64_t start, next, end;
	ssize_t n;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/admin.sock", dir);
	assert_int_equal(hlb_loop_new(&l), 0);
	assert_int_equal(hlb_http_new(l, (const struct sockaddr *)&sun, sizeof(sun), big_answer,
				      NULL, &h, &err),
			 0);
	hlb_http_set_timeouts(h, SLOW_TIMEOUT_MS, HLB_HTTP_LINGER_MS);
	fd = client_ask(&sun, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
	start = next = hlb_now_ms();
	end = start + 60000; /* a deadline that fails the test, not a measurement */
	/* 64 KiB every 100 ms, the endpoint's loop run meanwhile, until the answer ends */
	for (n = 1; n > 0 && hlb_now_ms() < end;) {
		assert_true(hlb_loop_run_once(l, 10) >= 0);
		if (hlb_now_ms() < next || !readable(fd))
			continue;
		next = hlb_now_ms() + 100;
		n = read(fd, chunk, sizeof(chunk));
		if (n <= 0)
			break;
		if (head_len < sizeof(head) - 1) { /* the head, from the first read */
			size_t k = (size_t)n < sizeof(head) - 1 - head_len
					   ? (size_t)n
					   : sizeof(head) - 1 - head_len;

			memcpy(head + head_len, chunk, k);
			head_len += k;
			head[head_len] = '\0';
		}
		got += (size_t)n;
	}
	close(fd);
	assert_non_null(strstr(head, "Content-Length: 2621440\r\n"));
	want = BIG + (size_t)(strstr(head, "\r\n\r\n") + 4 - head);
	print_message("    %zu of %zu bytes in %.1f s\n", got, want,
		      (double)(hlb_now_ms() - start) / 1000);
	/* it did take longer than the timeout (a bound below: a slow machine only adds) */
	assert_true(hlb_now_ms() - start > SLOW_TIMEOUT_MS);
	assert_int_equal(got, want);
	hlb_http_free(h);
	hlb_loop_free(l);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_in_fragments_waits_then_parses),
		cmocka_unit_test(test_client_that_ends_early),
		cmocka_unit_test(test_absolute_form_target),
		cmocka_unit_test(test_body_ends_at_its_length),
		cmocka_unit_test(test_request_line_is_the_first_line),
		cmocka_unit_test(test_content_length_digits_once),
		cmocka_unit_test(test_param_given_twice_is_found),
		cmocka_unit_test(test_repeated_param_read_in_order),
		cmocka_unit_test(test_nul_in_the_head_is_refused),
		cmocka_unit_test(test_long_values_refused_only_in_params_taken),
		cmocka_unit_test(test_expect_continue),
		cmocka_unit_test(test_head_refused_before_the_body),
		cmocka_unit_test(test_names_read_decoded),
		cmocka_unit_test(test_bare_lf_ends_a_line),
		cmocka_unit_test(test_bare_cr_and_bad_header_lines_are_refused),
		cmocka_unit_test(test_empty_lines_before_the_request_line),
		cmocka_unit_test(test_head_is_known_whatever_the_error),
		cmocka_unit_test(test_request_a_byte_a_read_looked_at_once),
		cmocka_unit_test(test_request_cut_anywhere_goes_on),
		cmocka_unit_test(test_held_request_waits_alone),
		cmocka_unit_test(test_failed_start_leaves_the_path),
		cmocka_unit_test(test_answered_before_the_body),
		cmocka_unit_test(test_held_request_client_leaves),
		cmocka_unit_test(test_lingers_while_the_client_may_send),
		cmocka_unit_test(test_room_made_reads_first),
		cmocka_unit_test(test_timeout_408_lingers),
		cmocka_unit_test(test_busy_at_accept_lingers),
		cmocka_unit_test(test_busy_served_once_a_place_frees),
		cmocka_unit_test(test_refusals_not_kept),
		cmocka_unit_test(test_places_counted_not_connections),
		cmocka_unit_test(test_busy_at_accept_head_sent_late),
		cmocka_unit_test(test_handover_503_only_to_requests_not_carried_out),
		cmocka_unit_test(test_handover_drain_passes_over_aborted),
		cmocka_unit_test(test_handover_reads_what_comes_while_the_queue_drains),
		cmocka_unit_test(test_busy_at_accept_given_up_reads_what_came),
		cmocka_unit_test(test_handover_answers_busy_at_accept),
		cmocka_unit_test(test_handover_reads_what_comes_to_busy_at_accept),
		cmocka_unit_test(test_fds_answer_waits_on_the_loop),
		cmocka_unit_test(test_fds_answers_keep_a_bounded_count),
		cmocka_unit_test(test_fds_answers_past_the_copies_wait_on_the_loop),
		cmocka_unit_test(test_fds_answer_read_in_part_makes_room),
		cmocka_unit_test(test_fds_answer_without_room_in_time_is_refused),
		cmocka_unit_test(test_fds_refused_sockets_does_not_wait),
		cmocka_unit_test(test_linger_ends_at_its_time),
		cmocka_unit_test(test_reserve_kept_at_the_fd_limit),
		cmocka_unit_test(test_lingering_gives_its_descriptor_at_the_fd_limit),
		cmocka_unit_test(test_handover_drain_at_the_fd_limit),
		cmocka_unit_test(test_handover_drain_at_the_fd_limit_reserve_shed),
		cmocka_unit_test(test_handover_drain_at_the_fd_limit_reserve_placed),
		cmocka_unit_test(test_deadline_reads_what_came_then),
		cmocka_unit_test(test_deadline_sends_no_continue),
		cmocka_unit_test(test_stop_reads_what_came),
		cmocka_unit_test(test_slow_reader_gets_the_whole_answer),
	};

	/* as hashlb does (hlb_daemon_new()): an answer written to a client that reset fails
	 * EPIPE, the process not killed (test_handover_drain_passes_over_aborted) */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
