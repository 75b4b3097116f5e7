/* SPDX-License-Identifier: MIT */
/*
 * A small HTTP/1.1 server for the admin endpoint, on the control loop: one
 * request per connection (Connection: close), requests up to 16 KiB, bodies
 * of any size going out. Enough for Prometheus, curl and hashlb ctl; not a
 * general web server. TCP (loopback by default) or a Unix socket.
 */
#ifndef HLB_CONTROL_HTTP_H
#define HLB_CONTROL_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "hashlb/error.h"

#include "buf.h"
#include "loop.h"

struct hlb_http;

struct hlb_http_req {
	const char *method; /* "GET", "POST"... */
	const char *path; /* "/status" */
	const char *query; /* after '?', "" if none */
	const char *body; /* POST body, "" if none; NUL-terminated */
	size_t body_len;
	bool local; /* came over the Unix socket (the only one that can carry descriptors) */
	int fd; /* the connection's socket (borrowed): who asks, for a handler that must know */
	uint64_t id; /* this request's among the endpoint's, for hlb_http_answer() */
};

struct hlb_http_resp {
	int status; /* 200 if left alone */
	const char *ctype; /* "application/json" if left alone */
	const char *allow; /* a 405's Allow header: the methods the path takes */
	struct hlb_buf body;
	/* Descriptors sent with the response (SCM_RIGHTS: a local request
	 * only), borrowed for the call: those that do not fit the socket as the
	 * handler returns are copied, to go once there is room (a request whose
	 * answer may pass the copies every answer may hold together waits for
	 * room before its handler runs: hlb_http_on_fds(); where they cannot be
	 * copied, at the fd limit, the answer waits for its client 1 s at most,
	 * the loop held). The body has a line per descriptor, and a batch of them
	 * rides with its lines. */
	const int *fds;
	unsigned n_fds;
	/* Set by a handler that answers later, with hlb_http_answer(), having to wait for
	 * something (another process): the rest of <resp> is not sent, and the connection
	 * waits for that answer, HLB_HTTP_HOLD_MS at most (then it is closed unanswered). */
	bool hold;
};

typedef void (*hlb_http_handler)(void *arg, const struct hlb_http_req *req,
				 struct hlb_http_resp *resp);

/*
 * Asked of a request whose client waits for a 100 (Continue) before it sends its body (the body
 * not come, req.body ""): true, <resp> filled, if its answer is known from the head alone (a
 * path the endpoint does not have, a method the path does not take), which is sent at once
 * instead of the 100; false to have the body come, and the request served as any.
 */
typedef bool (*hlb_http_head_fn)(void *arg, const struct hlb_http_req *req,
				 struct hlb_http_resp *resp);

/* The longest parameter value a handler reads, decoded: a longer one, or one
 * holding a NUL, of a parameter it takes is refused (hlb_http_param_refused()). */
#define HLB_HTTP_VALUE_MAX 255

/*
 * The value of the first parameter whose name, decoded (as every function here reads a
 * parameter's name: st%61te is state), is <name>, in the query string or in an
 * application/x-www-form-urlencoded body, decoded into <buf> (<size>
 * bytes: HLB_HTTP_VALUE_MAX + 1, so that every value hlb_http_param_refused()
 * let through fits). NULL if absent, or if its value does not fit.
 */
const char *hlb_http_param(const struct hlb_http_req *r, const char *name, char *buf, size_t size);

/* The longest parameter name hlb_http_param_next() compares, decoded. */
#define HLB_HTTP_NAME_MAX 63

/*
 * The values of a parameter given any number of times (name[]=a&name[]=b), one a call: the
 * next parameter at or after *<pos> (0 for the first) in the query string then the form body
 * whose name, decoded, is <name> (so name%5B%5D, as clients write the brackets, is name[]),
 * its value decoded into <buf> (<size> bytes, as hlb_http_param()'s); *<pos> moves past it.
 * NULL when there is none left.
 */
const char *hlb_http_param_next(const struct hlb_http_req *r, const char *name, size_t *pos,
				char *buf, size_t size);

/*
 * The name of the first parameter of the query string or the form body that
 * is not one of <known> (NULL-terminated), into <buf> (at most 64 bytes of
 * it); NULL if every one is known.
 */
const char *hlb_http_param_unknown(const struct hlb_http_req *r, const char *const *known,
				   char *buf, size_t size);

/*
 * Why a parameter of the query string or the form body whose name, decoded, is one of
 * <known> (NULL-terminated) is refused, into <why> (<size> bytes), or NULL: its value
 * decodes to more than HLB_HTTP_VALUE_MAX bytes or holds a NUL, which hlb_http_param()
 * would read as absent (and a handler answer "give weight=N", or apply the rest of a
 * request without it). The others are not looked at: a path that ignores parameters it
 * does not take (/metrics) ignores them whatever their length.
 */
const char *hlb_http_param_refused(const struct hlb_http_req *r, const char *const *known,
				   char *why, size_t size);

/*
 * The name of the first parameter given more than once, in the query string,
 * the form body or both (at most 64 bytes of it, into <buf>); NULL if none
 * is: hlb_http_param() takes the first, which a request that changes
 * something must not do silently when the client meant another.
 */
const char *hlb_http_param_repeated(const struct hlb_http_req *r, char *buf, size_t size);

/* The longest request (request line, headers and body) read. */
#define HLB_HTTP_REQ_MAX 16384

#define HLB_HTTP_MORE 0 /* not whole yet: wait for more */
#define HLB_HTTP_CLOSE (-1) /* the client ended before its request: close, unanswered */

/* What hlb_http_parse() made of a request. */
struct hlb_http_parsed {
	int status; /* as returned */
	bool head; /* a HEAD request: the answer has no body */
	/* HLB_HTTP_MORE: the head is whole and good, and asks (Expect: 100-continue, HTTP/1.1)
	 * for a 100 (Continue) before the client sends the rest of its body */
	bool send_continue;
	/* HLB_HTTP_MORE: the length of the head (where the body begins) once it is whole and
	 * good, the body still to come; 0 before (hlb_http_parse_head()) */
	size_t head_len;
	/* the request's length (head and body) once its head is whole and its Content-Length
	 * read (200, HLB_HTTP_MORE, and an error refusing the head then); 0 before: what the
	 * client sends past it is another request (or more than the body it said) */
	size_t need;
	const char *msg; /* why, for an error status (static, or in <why>) */
	struct hlb_http_req req; /* status 200: the request, pointing into the buffer */
	char why[256];
};

/*
 * Where hlb_http_parse_next() got to in the bytes of one connection, so that a request that
 * comes a few bytes a read is not looked at again from its start at each (16 KiB of headers a
 * byte at a time were 134M byte comparisons on the control thread). Zeroed for a connection.
 */
struct hlb_http_scan {
	size_t pos; /* where looking for the end of the head goes on */
	size_t line; /* where the line being looked at begins */
	size_t last; /* where the text of the last whole line ends */
	size_t start; /* where the request line begins: past the empty lines before it */
	/* the head whole and good, its body still to come: the request's length (else 0),
	 * and what was answered of it then */
	size_t need;
	size_t head_len;
	bool send_continue;
	size_t scanned; /* bytes looked at in all: the work done, for tests */
};

/*
 * The request in <in>: the <len> bytes (at most HLB_HTTP_REQ_MAX) read from a
 * connection so far, <in> having room for one more (a NUL); <eof> if the
 * client has shut down writing. HLB_HTTP_MORE or HLB_HTTP_CLOSE; 200 when it
 * is whole and good, parsed in place into <p>'s req (all but req.local; its
 * parameters' values not looked at: hlb_http_param_refused()); else the
 * status of the error to answer (400, 403, 411, 413, 417, 505) with p->msg:
 * as soon as the head says it, whether the body has come or not.
 * Only a whole request changes the bytes of <in>: called again with
 * more of them, it finds what it found before.
 */
int hlb_http_parse(char *in, size_t len, bool eof, struct hlb_http_parsed *p);
/*
 * hlb_http_parse() of a connection's bytes, more of them each call: <s> (zeroed before the
 * first) says where the last call got to, each byte looked at once or so however the
 * request was cut (s->scanned). The same answer as hlb_http_parse()'s, as long as each
 * call's <len> bytes begin with the last call's, unchanged (the byte after those, where that
 * call put its NUL, read anew).
 */
int hlb_http_parse_next(char *in, size_t len, bool eof, struct hlb_http_scan *s,
			struct hlb_http_parsed *p);

/*
 * The head of a request whose body is still to come: the p->head_len first bytes that
 * hlb_http_parse() read, copied into <head> (room for one more byte), parsed there into <p> as
 * a request without a body (req.body ""). 200, or 400 if <len> is not such a head.
 */
int hlb_http_parse_head(char *head, size_t len, struct hlb_http_parsed *p);

/* Connections served at once: the places. Past it, a connection answered already that lingers
 * for its client's end and holds a place is closed first, to make room; then up to
 * HLB_HTTP_BUSY_MAX more, which hold none, are answered 503 once their request is in (or after
 * a tenth of HLB_HTTP_TIMEOUT_MS), unless a place frees before (then served, the one accepted
 * first first), one of them answered that lingers closed for a new one; past those, one is
 * answered 503 at accept, once the first byte of its request says whether it is a HEAD (or
 * after a tenth of HLB_HTTP_TIMEOUT_MS), and lingers as any answered one does, in one of a
 * fixed number of places that hold no buffer. Every 503 has Retry-After: 1, and every answer
 * Cache-Control: no-store. */
#define HLB_HTTP_CONNS_MAX 64
#define HLB_HTTP_BUSY_MAX 8

/* Why a request was refused without being served (503), for the operator to see. */
enum hlb_http_refusal {
	HLB_HTTP_REFUSED_CONNECTIONS, /* over HLB_HTTP_CONNS_MAX connections open */
	HLB_HTTP_REFUSED_UNREAD, /* a GET while answers not read yet held too much */
	HLB_HTTP_REFUSED_MAX,
};

/* Called on the loop at each refusal, with the refusals of that kind so far. */
typedef void (*hlb_http_refused_fn)(void *arg, enum hlb_http_refusal why, uint64_t total);

/*
 * Listen on <addr> (AF_INET, AF_INET6 or AF_UNIX: a socket file at the path, stale or
 * another hashlb's, is replaced by a rename, the path never missing, and left to it if this
 * fails) and serve with <fn> on <loop>.
 */
int hlb_http_new(struct hlb_loop *loop, const struct sockaddr *addr, socklen_t addr_len,
		 hlb_http_handler fn, void *arg, struct hlb_http **ret_http,
		 struct hashlb_error *err);
/* Have <fn>(<arg>, ...) called at each refusal (NULL: none). */
void hlb_http_on_refused(struct hlb_http *h, hlb_http_refused_fn fn, void *arg);
/* How long a request has to come whole (then 408) and an answer not read to be read. */
#define HLB_HTTP_TIMEOUT_MS 10000
/* How long, at most, a connection answered lingers for its client's end (what it still sends
 * read and dropped, so that the close is no reset). */
#define HLB_HTTP_LINGER_MS 2000
/* Other times than HLB_HTTP_TIMEOUT_MS (and the tenth of it a connection over the 64 waits for
 * its request) and HLB_HTTP_LINGER_MS, for the timers armed from now on: for tests, which must
 * not wait 10 s for a 408, nor have 1 s pass before they are done. */
void hlb_http_set_timeouts(struct hlb_http *h, unsigned timeout_ms, unsigned linger_ms);
/* Have <fn>(<arg>, ...) asked before a 100 (Continue) is sent (NULL: not asked, always sent). */
void hlb_http_on_head(struct hlb_http *h, hlb_http_head_fn fn, void *arg);
/*
 * Asked of each whole request over the Unix socket before its handler runs: at most how many
 * descriptors its answer carries (hlb_http_resp.fds), 0 for none. One that may need more copies
 * than the answers not read yet leave room for (their clients slow to take their descriptors)
 * waits on the loop, unread and its handler not run, until they do, its client's hang-up
 * watched; the endpoint's timeout (hlb_http_set_timeouts()) passed, it is answered 503 (counted
 * as HLB_HTTP_REFUSED_UNREAD). Without <fn>, its answer waits for its client in poll(), the loop
 * held, up to 1 s, then is cut short.
 */
typedef unsigned (*hlb_http_fds_fn)(void *arg, const struct hlb_http_req *req);
void hlb_http_on_fds(struct hlb_http *h, hlb_http_fds_fn fn, void *arg);
/* The refusals of kind <why> since the endpoint started. */
uint64_t hlb_http_refused(const struct hlb_http *h, enum hlb_http_refusal why);
/* How long a request held (hlb_http_resp.hold) may wait for its answer. */
#define HLB_HTTP_HOLD_MS 60000

/*
 * The answer <resp> to request <id>, held by its handler: sent as a handler's is (its
 * descriptors are not: none may ride on a held answer). Its body is freed either way.
 * Returns 0, or -ENOENT if that connection has closed since (its client went away, or it
 * waited HLB_HTTP_HOLD_MS), or was never held.
 */
int hlb_http_answer(struct hlb_http *h, uint64_t id, struct hlb_http_resp *resp);
/*
 * A Unix socket's path back, once a hashlb that bound it over this one's (a side-by-side
 * takeover) has exited: a new socket bound there, if nothing is there or a socket nobody
 * listens on. Returns 1 if so, 0 if there was nothing to do (not a Unix socket, the path
 * still this one's, another file, or another process serving there), or -errno.
 */
int hlb_http_reclaim(struct hlb_http *h);
/* Closes the listener and every connection (held ones unanswered; an answered one's, what its
 * client sent read first: a FIN behind the answer, not a reset). Accepts NULL. */
void hlb_http_free(struct hlb_http *h);
/*
 * hlb_http_free() of an endpoint whose address a newer hashlb serves now (an upgrade): each
 * connection whose request was not carried out (not come whole, or not read; those still in
 * the listener's queue accepted for it) is answered 503 saying so, to be sent again, what its
 * client sent read first, rather than closed with no answer or reset; one held (its handler
 * took it in, and carried it out) 500 saying it was carried out, never 503. A holder that
 * can say more answers its held requests before (hlb_http_answer()).
 */
void hlb_http_free_handed_over(struct hlb_http *h);
/* The connections open (answered ones that linger for their client's end too, those answered
 * 503 at accept among them). */
unsigned hlb_http_conns(const struct hlb_http *h);
/* Where it listens, with the real port: "127.0.0.1:30001", "[::1]:9901", "unix:/run/x". */
const char *hlb_http_address(const struct hlb_http *h);
/* The address it listens on (a TCP port 0 resolved); 0, or -errno. */
int hlb_http_sockname(const struct hlb_http *h, struct sockaddr_storage *ss);

#endif
