// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hashlb/config.h"

#include "http.h"
#include "proxy/listen_who.h"
#include "runtime/fdpass.h"

/* a connection over HLB_HTTP_CONNS_MAX: this long for its request to come (1 s of the 10) */
#define HTTP_BUSY_TIMEOUT_MS(h) ((h)->timeout_ms / 10)
/* How long an answer with descriptors riding on it (GET /sockets) waits in all for its client to
 * read what does not fit the socket when the descriptors still to go cannot be kept (copies:
 * the fd limit, or HTTP_FDS_KEPT_MAX for a request h->fds_fn did not count): it holds the
 * control thread (checks, other requests) meanwhile. Else it goes on the loop as any answer
 * does (conn_fds_keep()). */
#define HTTP_FDS_SEND_MS 1000
/* The most descriptors the answers of every connection keep copied at once (conn_fds_keep()):
 * one GET /sockets's most (admin.c's SOCKETS_MAX). A request whose answer may need more (h->fds_fn)
 * waits on the loop for the others' copies to go before it is served (conn_fds_wait()): before,
 * its answer waited in poll() as where they cannot be copied, the control thread held up to
 * HTTP_FDS_SEND_MS for a client that reads nothing, then cut short. Before the cap, each slow
 * reader kept its own, up to 64 answers' worth (262,144), taken from the descriptors the
 * workers' clients need, for 10 s a client that reads nothing. */
#define HTTP_FDS_KEPT_MAX 4096u
/*
 * The headers of every 503 the endpoint answers, each to a request it did not carry out (too
 * many connections, answers not read, handed over at an upgrade): no cache (a proxy or a
 * browser kept it, and the next ask got the refusal again, from the cache), and the retry
 * the body asks for, a second later. Every other answer has the no-store (conn_respond()).
 */
#define HTTP_503_HEADERS "Cache-Control: no-store\r\nRetry-After: 1\r\n"
/* the 503's reason past HLB_HTTP_CONNS_MAX, answered either way (conn_busy(), http_accept()) */
#define HTTP_BUSY_MSG "too many admin connections open (64): try again"
_Static_assert(HLB_HTTP_CONNS_MAX == 64, "HTTP_BUSY_MSG names the cap");
/* http_accept()'s answer, its head then its body */
#define HTTP_BUSY_BODY "{\"error\":\"" HTTP_BUSY_MSG "\"}\n"
_Static_assert(sizeof(HTTP_BUSY_BODY) - 1 == 60, "the Content-Length of http_accept()'s answer");
#define HTTP_BUSY_HEAD                                                                           \
	"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " \
	"60\r\n" HTTP_503_HEADERS "Connection: close\r\n\r\n"
/* hlb_http_free_handed_over()'s answer to a request not answered yet, its head then its body */
#define HTTP_HANDED_BODY                                                                       \
	"{\"error\":\"this hashlb handed its admin address over to a newer one (an upgrade): " \
	"try again\"}\n"
_Static_assert(sizeof(HTTP_HANDED_BODY) - 1 == 93, "the Content-Length of the handover's answer");
#define HTTP_HANDED_HEAD                                                                         \
	"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " \
	"93\r\n" HTTP_503_HEADERS "Connection: close\r\n\r\n"
/* that answer to a request its handler held, carried out (hlb_http_free_handed_over()) */
#define HTTP_CARRIED_BODY                                                                     \
	"{\"error\":\"this hashlb handed its admin address over to a newer one (an upgrade) " \
	"before it answered: the request was carried out, the rest of its answer not waited " \
	"for\"}\n"
_Static_assert(sizeof(HTTP_CARRIED_BODY) - 1 == 169, "the Content-Length of that answer");
#define HTTP_CARRIED_HEAD                                                                          \
	"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: " \
	"169\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
/* the listeners' backlog */
#define HTTP_BACKLOG 64
/*
 * The bytes of answers written but not yet read by their clients that the
 * endpoint holds before it renders another GET: a /metrics of 1,000 services
 * is ~10 MB, and 64 connections that ask for it and never read would
 * otherwise make hashlb hold 64 of them (0.7 GB, more with more backends)
 * until their timeouts, again and again. Requests that change something
 * (POST) answer a few bytes and are always served.
 */
#define HTTP_UNREAD_MAX (64u << 20)
/* accept failed for want of a descriptor or memory: try again this much later */
#define HTTP_ACCEPT_PAUSE_MS 100

/*
 * Past HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX, a connection answered 503 at accept lingers too
 * (conn_linger()'s rule), but as no connection does: its descriptor watched and its deadline,
 * no 16 KiB buffer, no allocation, HTTP_SHED_MAX of them at most, the one answered longest ago
 * closed to make room (what its client sent read first). The cap bounds what a flood of
 * connections costs; these add a fixed array and as many descriptors, for HLB_HTTP_LINGER_MS.
 */
#define HTTP_SHED_MAX 64

struct http_shed {
	struct hlb_http *h;
	struct hlb_io io; /* fd -1: a free place */
	/* answered then (with no byte of the request come, not a HEAD), or closed then, its
	 * client ended or not */
	uint64_t until;
	/* its 503 written: it lingers (else it waits for its request's first byte) */
	bool answered;
	uint64_t seq; /* when it began to linger: h->lingers then */
	size_t lingered; /* bytes read since */
};

struct http_conn {
	struct hlb_http *h;
	struct hlb_io io;
	struct hlb_timer timer;
	char in[HLB_HTTP_REQ_MAX + 1];
	size_t in_len;
	struct hlb_buf out; /* the head of the answer, or all of it */
	struct hlb_buf body; /* the rest: the handler's body, taken as it was, not copied */
	size_t out_off; /* bytes written of out then body */
	bool head; /* a HEAD request: the answer has no body */
	bool busy; /* over HLB_HTTP_CONNS_MAX: answered 503, unless a place frees first
		    * (conn_place()) */
	bool held; /* its request waits for hlb_http_answer() */
	/* its request (<waiting>, pointing into c->in, read no further) waits for the copies the
	 * other answers keep to leave room for <fds_want> more (conn_fds_wait()), until
	 * <fds_until> */
	bool fds_waiting;
	unsigned fds_want;
	uint64_t fds_until;
	struct hlb_http_req waiting;
	bool continued; /* answered 100 (Continue), or its head (conn_continue()) */
	bool eof; /* its client shut down writing: it sends nothing more */
	struct hlb_http_scan scan; /* how far c->in was parsed */
	bool lingering; /* answered, its client still sending: only reading what comes, up to
			 * its end (conn_linger()) */
	size_t lingered; /* bytes read then */
	uint64_t linger_seq; /* when it began to linger: h->lingers then */
	uint64_t id; /* its request's (hlb_http_req.id), once it came whole */
	/* an answer with descriptors riding on its lines (GET /sockets), c->out whole, that did
	 * not fit the socket: copies of those still to go (from fds_at.sent on), owned */
	int *fds;
	unsigned n_fds;
	size_t lines_off; /* where the lines begin in c->out */
	struct hlb_fdpass_at fds_at; /* how far it went */
	struct http_conn *prev, *next;
};

struct hlb_http {
	struct hlb_loop *loop;
	struct hlb_io io;
	hlb_http_handler fn;
	void *arg;
	char address[128];
	char unix_path[108];
	dev_t unix_dev; /* the socket file we bound, to remove only that one */
	ino_t unix_ino;
	struct http_conn *conns;
	unsigned n_conns;
	unsigned n_busy; /* of those, the busy ones: n_conns - n_busy hold places of the 64 */
	uint64_t last_id; /* the last request's hlb_http_req.id */
	uint64_t lingers; /* connections that began to linger, in all */
	unsigned timeout_ms; /* HLB_HTTP_TIMEOUT_MS, or hlb_http_set_timeouts()'s */
	unsigned linger_ms; /* HLB_HTTP_LINGER_MS, or hlb_http_set_timeouts()'s */
	/*
	 * At the fd limit (the forwarder's clients can take every one) the
	 * admin endpoint is what tells the operator so: a descriptor is kept
	 * in reserve (/dev/null), given up to accept one connection when
	 * accept4() fails with EMFILE, and taken again when that connection
	 * closes. Without it, or while it is in use, the listener is not
	 * watched for HTTP_ACCEPT_PAUSE_MS: left level-triggered with a
	 * connection that cannot be accepted, epoll would spin the control
	 * thread.
	 */
	int spare;
	struct hlb_timer resume;
	uint64_t refused[HLB_HTTP_REFUSED_MAX];
	hlb_http_refused_fn refused_fn;
	void *refused_arg;
	hlb_http_head_fn head_fn;
	void *head_arg;
	hlb_http_fds_fn fds_fn;
	void *fds_arg;
	struct http_shed shed[HTTP_SHED_MAX]; /* those answered 503 at accept, lingering */
	unsigned n_shed;
	struct hlb_timer shed_timer; /* at the first of their deadlines */
};

static void http_refused(struct hlb_http *h, enum hlb_http_refusal why)
{
	h->refused[why]++;
	if (h->refused_fn)
		h->refused_fn(h->refused_arg, why, h->refused[why]);
}

static void spare_take(struct hlb_http *h)
{
	if (h->spare < 0)
		h->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* The socket <fd> of a connection of <h>, closed; the reserve taken back in its place if it
 * was given up (spare_take() then, for one not taken back here). */
static void http_fd_close(struct hlb_http *h, int fd)
{
	/* The reserve given up for this connection takes its slot back in the same step:
	 * closed, then /dev/null opened again, a worker's accept could take the slot in
	 * between, and at the fd limit the endpoint had none to answer with. dup3() closes
	 * the socket (its FIN) and makes the slot a copy of the loop's epoll descriptor, a
	 * placeholder (no socket, which an upgrade's taker would find; close-on-exec). */
	if (h->spare < 0 && dup3(hlb_loop_fd(h->loop), fd, O_CLOEXEC) >= 0)
		h->spare = fd;
	else
		close(fd);
}

/* <c>, busy, has a place among the 64: served as any, its request given h->timeout_ms from now. */
static void conn_unbusy(struct http_conn *c)
{
	c->busy = false;
	c->h->n_busy--;
	hlb_timer_arm(c->h->loop, &c->timer, hlb_now_ms() + c->h->timeout_ms);
}

/*
 * A place among the 64 freed (a connection that had one closed): the busy connection accepted
 * first whose request has not come yet takes it, and is served rather than answered 503 "too
 * many admin connections" when it comes, as a connection accepted now would be. (It waited with
 * its buffer already: taking the place costs nothing more.)
 */
static void conn_unbusy_first(struct hlb_http *h)
{
	struct http_conn *first = NULL;

	if (!h->n_busy || h->n_conns - h->n_busy >= HLB_HTTP_CONNS_MAX)
		return;
	for (struct http_conn *c = h->conns; c; c = c->next) /* the newest first */
		if (c->busy && !c->out.len && !c->lingering)
			first = c;
	if (first)
		conn_unbusy(first);
}

/*
 * Room made in the copies the answers keep (http_fds_kept()): those waiting for it
 * (conn_fds_wait()) looked at again, from their timers, on the loop, not from whatever called
 * this one.
 */
static void http_fds_room(struct hlb_http *h)
{
	for (struct http_conn *w = h->conns; w; w = w->next)
		if (w->fds_waiting)
			hlb_timer_arm(h->loop, &w->timer, hlb_now_ms());
}

/* The copies of the descriptors <c>'s answer still had to send, closed. */
static void conn_fds_free(struct http_conn *c)
{
	if (!c->fds)
		return;
	for (unsigned i = 0; i < c->n_fds; i++)
		if (c->fds[i] >= 0)
			close(c->fds[i]);
	free(c->fds);
	c->fds = NULL;
	c->n_fds = 0;
	http_fds_room(c->h);
}

static void conn_close(struct http_conn *c)
{
	struct hlb_http *h = c->h;

	hlb_loop_del(h->loop, &c->io);
	http_fd_close(h, c->io.fd);
	hlb_timer_cancel(h->loop, &c->timer);
	hlb_buf_free(&c->out);
	hlb_buf_free(&c->body);
	conn_fds_free(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		h->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	h->n_conns--;
	if (c->busy)
		h->n_busy--;
	else
		conn_unbusy_first(h); /* its place */
	free(c);
	spare_take(h); /* if it was given up and the slot not taken back above */
}

static const char *status_text(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 202:
		return "Accepted";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 403:
		return "Forbidden";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 409:
		return "Conflict";
	case 411:
		return "Length Required";
	case 412:
		return "Precondition Failed";
	case 413:
		return "Payload Too Large";
	case 417:
		return "Expectation Failed";
	case 422:
		return "Unprocessable Entity";
	case 500:
		return "Internal Server Error";
	case 503:
		return "Service Unavailable";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "Status";
	}
}

/*
 * Whether the client of <c>, answered, may still send: bytes wait to be read, or it has not
 * shut down writing (no end read, none waiting). Whatever the answer and however whole its
 * request came: the rest of a body the answer did not wait for (a head refused, a 503, a
 * 408...), or a request sent after the one answered, even a moment after a first that came
 * whole and alone (pipelined), would meet a closed socket, which resets the connection, the
 * answer lost if the client had not read it yet. Such a connection lingers (conn_linger()).
 * Only a client that has ended, nothing of it unread, is closed at once.
 */
static bool conn_may_send(struct http_conn *c)
{
	char b;
	ssize_t n;

	if (c->eof)
		return false;
	n = recv(c->io.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR));
}

/* What the client of a lingering connection <fd> sent, read and dropped, added to
 * *<lingered>: whether it lingers on (the client has not ended, nor sent past a request's
 * most). */
static bool linger_read(int fd, size_t *lingered)
{
	char drop[4096];
	ssize_t n = 0;

	while (*lingered <= HLB_HTTP_REQ_MAX &&
	       ((n = read(fd, drop, sizeof(drop))) > 0 || (n < 0 && errno == EINTR)))
		*lingered += n > 0 ? (size_t)n : 0;
	return *lingered <= HLB_HTTP_REQ_MAX && n < 0 && errno == EAGAIN;
}

/* <c>'s answer is written, or its client gone: its writing shut down, a FIN behind the answer;
 * it lingers while its client may send, else it is closed. */
static void conn_answered(struct http_conn *c)
{
	shutdown(c->io.fd, SHUT_WR);
	if (c->out_off == c->out.len + c->body.len && conn_may_send(c)) {
		/* its answer held no longer (unread_bytes()) */
		c->lingering = true;
		c->linger_seq = ++c->h->lingers;
		hlb_buf_free(&c->out);
		hlb_buf_free(&c->body);
		hlb_timer_arm(c->h->loop, &c->timer, hlb_now_ms() + c->h->linger_ms);
		hlb_loop_mod(c->h->loop, &c->io, EPOLLIN);
		return;
	}
	conn_close(c);
}

/*
 * The descriptors of <c>'s answer still to go (conn_fds_keep()) sent, with its lines, as far as
 * the socket takes them. Whether the rest of the answer is bytes alone, to be written as any
 * (every descriptor gone); else <c> waits for room (its h->timeout_ms from the last byte its
 * client took, as any answer), or is closed (its client went).
 */
static bool conn_flush_fds(struct http_conn *c)
{
	size_t off = c->fds_at.off;
	unsigned sent = c->fds_at.sent;
	int r = hlb_fdpass_send_some(c->io.fd, c->out.p, c->out.len, c->lines_off, c->fds, c->n_fds,
				     &c->fds_at);

	if (sent < c->fds_at.sent) /* an answer read in part makes room too, not only one whole */
		http_fds_room(c->h);
	for (; sent < c->fds_at.sent; sent++) { /* in the peer's socket: the copies not needed */
		close(c->fds[sent]);
		c->fds[sent] = -1;
	}
	c->out_off = c->fds_at.off;
	if (r < 0) {
		conn_answered(c); /* cut short: closed */
		return false;
	}
	if (r == 0 && c->fds_at.sent < c->n_fds) {
		if (c->out_off != off)
			hlb_timer_arm(c->h->loop, &c->timer, hlb_now_ms() + c->h->timeout_ms);
		hlb_loop_mod(c->h->loop, &c->io, EPOLLOUT);
		return false;
	}
	conn_fds_free(c);
	return true;
}

/* Write what is pending; close when done or on error. */
static void conn_flush(struct http_conn *c)
{
	size_t off = c->out_off;

	if (c->fds && !conn_flush_fds(c))
		return;

	while (c->out_off < c->out.len + c->body.len) {
		size_t body_off = c->out_off > c->out.len ? c->out_off - c->out.len : 0;
		struct iovec iov[2];
		int n_iov = 0;
		ssize_t n;

		if (c->out_off < c->out.len)
			iov[n_iov++] =
				(struct iovec){ c->out.p + c->out_off, c->out.len - c->out_off };
		if (body_off < c->body.len)
			iov[n_iov++] =
				(struct iovec){ c->body.p + body_off, c->body.len - body_off };
		n = writev(c->io.fd, iov, n_iov);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			/* h->timeout_ms from the last byte the client took: one that reads a
			 * large answer slowly gets it whole, one that stopped reading goes */
			if (c->out_off != off)
				hlb_timer_arm(c->h->loop, &c->timer,
					      hlb_now_ms() + c->h->timeout_ms);
			hlb_loop_mod(c->h->loop, &c->io, EPOLLOUT);
			return;
		}
		if (n <= 0)
			break;
		c->out_off += (size_t)n;
	}
	conn_answered(c);
}

/*
 * A connection answered while its client may still send (conn_may_send()), its writing shut
 * down: what its client still sends (the rest of a body the answer did not wait for, a request
 * after the one answered) is read and dropped, and it is closed at the client's end, past a
 * request's most or after HLB_HTTP_LINGER_MS, or when a new connection needs its place
 * (http_accept()). Closed with bytes unread, or coming after the close, the socket would reset
 * the connection, and the client could lose the answer, or fail its write of the body before
 * it read it.
 */
static void conn_linger(struct http_conn *c)
{
	if (!linger_read(c->io.fd, &c->lingered))
		conn_close(c);
}

/* Which lingering connections conn_lingering_oldest() looks at. */
enum conn_among {
	CONN_ANY,
	CONN_PLACED, /* those that hold a place among the 64 */
	CONN_BUSY, /* those that do not (answered 503 over the 64) */
};

/* The connection of <h> that has lingered longest (conn_linger()) among <among>, NULL if none
 * does: not the one accepted first, which may have begun to linger just now, its answer written
 * a moment ago and maybe not read yet, while another's 2 s are nearly over. */
static struct http_conn *conn_lingering_oldest(struct hlb_http *h, enum conn_among among)
{
	struct http_conn *oldest = NULL;

	for (struct http_conn *c = h->conns; c; c = c->next)
		if (c->lingering && !(among == CONN_PLACED && c->busy) &&
		    !(among == CONN_BUSY && !c->busy) &&
		    (!oldest || c->linger_seq < oldest->linger_seq))
			oldest = c;
	return oldest;
}

/* The lingering connection <c> closed for another's sake, what its client sent read first
 * (linger_read()): its close is then a FIN behind the answer, not a reset that discards it. */
static void conn_give_up(struct http_conn *c)
{
	(void)linger_read(c->io.fd, &c->lingered);
	conn_close(c);
}

/* The copies the answers of <h>'s connections hold, of descriptors still to go. */
static unsigned http_fds_kept(const struct hlb_http *h)
{
	unsigned n = 0;

	for (const struct http_conn *c = h->conns; c; c = c->next)
		n += c->fds ? c->n_fds - c->fds_at.sent : 0;
	return n;
}

/*
 * The descriptors <fds> (<n> of them) of <c>'s answer that did not go yet (from c->fds_at.sent
 * on) copied, for conn_flush_fds() to send once there is room: the caller's are lent for the
 * call alone (a worker closes a listener's own as a reload removes it, and its number may be
 * another's by then). Whether they were: not past HTTP_FDS_KEPT_MAX with those the other
 * answers hold, not at the fd limit, nor out of memory.
 */
static bool conn_fds_keep(struct http_conn *c, const int *fds, unsigned n)
{
	if (n - c->fds_at.sent + http_fds_kept(c->h) > HTTP_FDS_KEPT_MAX)
		return false;
	c->fds = malloc(n * sizeof(*c->fds));
	if (!c->fds)
		return false;
	c->n_fds = n;
	for (unsigned i = 0; i < n; i++)
		c->fds[i] = -1; /* gone already, or not copied yet */
	for (unsigned i = c->fds_at.sent; i < n; i++) {
		c->fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 0);
		if (c->fds[i] < 0) {
			conn_fds_free(c); /* those copied */
			return false;
		}
	}
	return true;
}

/*
 * Send the response in c->out with the descriptors of <resp> riding on the lines of the body,
 * which starts at <body_off>. What does not fit the socket goes on the loop as any answer does
 * (conn_flush()), the descriptors still to go copied (conn_fds_keep()): the control thread goes
 * on (checks, other requests) while a client is slow to read. It waited in poll() up to
 * HTTP_FDS_SEND_MS, as it still does where they cannot be copied (or past HTTP_FDS_KEPT_MAX).
 */
static void conn_send_fds(struct http_conn *c, size_t body_off, const struct hlb_http_resp *resp)
{
	int r;

	c->lines_off = body_off;
	c->fds_at = (struct hlb_fdpass_at){ 0 };
	r = hlb_fdpass_send_some(c->io.fd, c->out.p, c->out.len, body_off, resp->fds, resp->n_fds,
				 &c->fds_at);
	if (r == 0 && c->fds_at.sent < resp->n_fds && !conn_fds_keep(c, resp->fds, resp->n_fds))
		r = hlb_fdpass_send_from(c->io.fd, c->out.p, c->out.len, body_off, resp->fds,
					 resp->n_fds, &c->fds_at, hlb_fdpass_due(HTTP_FDS_SEND_MS))
			    ? 1
			    : -1;
	c->out_off = c->fds_at.off;
	if (r) { /* written whole, or cut short */
		conn_answered(c);
		return;
	}
	/* the rest on the loop, once writable: h->timeout_ms from the last byte taken */
	if (c->out_off)
		hlb_timer_arm(c->h->loop, &c->timer, hlb_now_ms() + c->h->timeout_ms);
	conn_flush(c);
}

static void conn_respond(struct http_conn *c, struct hlb_http_resp *resp)
{
	size_t body_off;

	if (resp->body.oom) {
		hlb_buf_reset(&resp->body);
		resp->status = 500;
		hlb_buf_puts(&resp->body, "{\"error\":\"out of memory\"}\n");
	}
	hlb_buf_printf(&c->out,
		       "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s%s%s"
		       "Connection: close\r\n\r\n",
		       resp->status, status_text(resp->status), resp->ctype, resp->body.len,
		       resp->allow ? "Allow: " : "", resp->allow ? resp->allow : "",
		       resp->allow ? "\r\n" : "",
		       resp->status == 503 ? HTTP_503_HEADERS : "Cache-Control: no-store\r\n");
	body_off = c->out.len;
	if (!c->head && !resp->n_fds) {
		/* taken, not copied: copying a 10 MB /metrics (its pages faulted in) took as
		 * long as rendering it */
		c->body = resp->body;
		resp->body = (struct hlb_buf){ 0 };
	} else if (!c->head) {
		hlb_buf_put(&c->out, resp->body.p ? resp->body.p : "", resp->body.len);
	}
	hlb_buf_free(&resp->body);
	if (c->out.oom) {
		conn_close(c);
		return;
	}
	if (resp->n_fds && !c->head)
		conn_send_fds(c, body_off, resp);
	else
		conn_flush(c);
}

static void conn_error(struct http_conn *c, int status, const char *msg)
{
	struct hlb_http_resp resp = { .status = status, .ctype = "application/json" };

	hlb_buf_puts(&resp.body, "{\"error\":");
	hlb_buf_json_str(&resp.body, msg);
	hlb_buf_puts(&resp.body, "}\n");
	conn_respond(c, &resp);
}

/*
 * Whether the busy connection <c> has a place among the 64 now, taken (conn_unbusy()): one free,
 * or one of a connection answered that lingers, given up as at accept (each place so freed goes
 * to the busy connection accepted first: conn_unbusy_first()). Else it is answered 503
 * (conn_busy()).
 */
static bool conn_place(struct http_conn *c)
{
	struct hlb_http *h = c->h;
	struct http_conn *l;

	if (c->busy && h->n_conns - h->n_busy < HLB_HTTP_CONNS_MAX)
		conn_unbusy(c);
	while (c->busy && (l = conn_lingering_oldest(h, CONN_PLACED)))
		conn_give_up(l);
	return !c->busy;
}

static void conn_busy(struct http_conn *c)
{
	http_refused(c->h, HLB_HTTP_REFUSED_CONNECTIONS);
	conn_error(c, 503, HTTP_BUSY_MSG);
}

/*
 * The client of <c> waits for a 100 (Continue) before it sends its body (the head <head_len>
 * bytes long: hlb_http_parsed's): sent, unless the head alone answers the request (h->head_fn:
 * a path the endpoint does not have...), which is then answered at once instead, the body not
 * waited for (it was answered after the 100 and the body). Not sent either at <deadline>, where
 * the body has no time left to come: the request is answered 408 next, and a 100 before it
 * told the client to send a body that would not be read. Whether it was answered (<c> may be
 * freed).
 */
static bool conn_continue(struct http_conn *c, size_t head_len, bool deadline)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	struct hlb_http_resp resp = { .status = 200, .ctype = "application/json" };
	struct hlb_http_parsed p;
	char head[HLB_HTTP_REQ_MAX + 1]; /* parsed in place: c->in stays as it came */

	c->continued = true; /* asked once, answered or not */
	if (c->h->head_fn) {
		memcpy(head, c->in, head_len);
		p.status = hlb_http_parse_head(head, head_len, &p);
		p.req.local = c->h->unix_path[0] != '\0';
		p.req.fd = c->io.fd;
		if (p.status == 200 && c->h->head_fn(c->h->head_arg, &p.req, &resp)) {
			/* its client may send its body after all (curl does): lingers */
			conn_respond(c, &resp);
			return true;
		}
		hlb_buf_free(&resp.body);
	}
	/* nothing written to this socket yet: its buffer takes these bytes; not sent, the
	 * client sends its body after its own wait */
	if (!deadline)
		(void)send(c->io.fd, cont, sizeof(cont) - 1, MSG_NOSIGNAL);
	return false;
}

/* The bytes of the answers that the clients of <h> have not read whole yet: each is held,
 * whole, until its connection closes (the part in the socket's buffers as well). */
static size_t unread_bytes(const struct hlb_http *h)
{
	size_t n = 0;

	for (const struct http_conn *c = h->conns; c; c = c->next)
		n += c->out.len + c->body.len;
	return n;
}

/* The request <req> of <c>, whole, served: answered, or held by its handler. */
static void conn_serve(struct http_conn *c, struct hlb_http_req *req)
{
	struct hlb_http_resp resp = { .status = 200, .ctype = "application/json" };

	req->id = c->id = ++c->h->last_id;
	c->h->fn(c->h->arg, req, &resp);
	if (resp.hold) {
		/* what more the client sends is not read; a client that only shut down
		 * writing after its request (printf ... | nc -N) still takes the answer */
		hlb_buf_free(&resp.body);
		c->held = true;
		hlb_loop_mod(c->h->loop, &c->io, 0);
		hlb_timer_arm(c->h->loop, &c->timer, hlb_now_ms() + HLB_HTTP_HOLD_MS);
		return;
	}
	conn_respond(c, &resp);
}

/*
 * Whether the request <req> of <c> waits before it is served, and so it does: its answer may
 * carry more descriptors (h->fds_fn) than the copies the other answers keep (conn_fds_keep())
 * leave room for. Served as that room comes (conn_fds_waited()), its handler not run before:
 * what it hands over (GET /sockets, a taker named) is handed when the answer can go on the loop.
 * Its answer waited in poll() for its client instead, up to HTTP_FDS_SEND_MS, the control thread
 * held (checks, other requests), then was cut short.
 */
static bool conn_fds_wait(struct http_conn *c, const struct hlb_http_req *req)
{
	unsigned want = req->local && c->h->fds_fn ? c->h->fds_fn(c->h->fds_arg, req) : 0;

	if (!want || http_fds_kept(c->h) + want <= HTTP_FDS_KEPT_MAX)
		return false;
	c->fds_waiting = true;
	c->fds_want = want < HTTP_FDS_KEPT_MAX ? want : HTTP_FDS_KEPT_MAX;
	c->fds_until = hlb_now_ms() + c->h->timeout_ms;
	c->waiting = *req;
	hlb_loop_mod(c->h->loop, &c->io, 0); /* its client's hang-up alone, as a held one's */
	hlb_timer_arm(c->h->loop, &c->timer, c->fds_until);
	return true;
}

/*
 * What came on <c>, whose request is awaited (no answer begun), read, and the request taken as
 * far as it came: answered (refused, or served), held by its handler, or closed (its client
 * ended before it). At its <deadline>, a head asking 100-continue gets no 100 (conn_continue()).
 * Whether it is still awaited, <c> as it was; else <c> may be freed.
 */
static bool conn_read(struct http_conn *c, bool deadline)
{
	struct hlb_http_parsed p;
	bool eof = false;
	int status;

	for (;;) {
		ssize_t n = read(c->io.fd, c->in + c->in_len, HLB_HTTP_REQ_MAX - c->in_len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {
			conn_close(c);
			return false;
		}
		if (n == 0) {
			/* the client sent its request and shut down writing at once
			 * (printf ... | nc -N): answer what came, if it is whole */
			eof = c->eof = true;
			break;
		}
		c->in_len += (size_t)n;
		if (c->in_len == HLB_HTTP_REQ_MAX)
			break;
	}
	status = hlb_http_parse_next(c->in, c->in_len, eof, &c->scan, &p);
	c->head = p.head; /* known at once: a 408 to a HEAD that never ends has no body either */
	switch (status) {
	case HLB_HTTP_MORE:
		if (p.send_continue && c->busy && !conn_place(c)) {
			conn_busy(c); /* known now: the client waits for an answer */
			return false;
		}
		return !(p.send_continue && !c->continued &&
			 conn_continue(c, p.head_len, deadline));
	case HLB_HTTP_CLOSE:
		conn_close(c);
		return false;
	case 200:
		if (c->busy && !conn_place(c)) {
			conn_busy(c);
			return false;
		}
		break;
	default: /* refused by its head, maybe before its body came (then lingers) */
		conn_error(c, p.status, p.msg);
		return false;
	}
	if (!strcmp(p.req.method, "GET") && unread_bytes(c->h) >= HTTP_UNREAD_MAX) {
		char why[160];

		snprintf(
			why, sizeof(why),
			"answers not read yet by their clients hold %zu MiB (at most %u): try again "
			"once they are",
			unread_bytes(c->h) >> 20, HTTP_UNREAD_MAX >> 20);
		http_refused(c->h, HLB_HTTP_REFUSED_UNREAD);
		conn_error(c, 503, why);
		return false;
	}
	p.req.local = c->h->unix_path[0] != '\0';
	p.req.fd = c->io.fd;
	if (!conn_fds_wait(c, &p.req))
		conn_serve(c, &p.req);
	return false;
}

static void conn_io(void *arg, uint32_t events)
{
	struct http_conn *c = arg;

	if (c->held || c->fds_waiting) {
		/* only an error or a hang-up is watched, always reported: the client has gone (a
		 * reset over TCP, a close over a Unix socket). Not its FIN over TCP: a client that
		 * closed its socket and one that shut down writing after its request (nc -N) send
		 * the same, and the second still wants its answer (HAProxy without "option
		 * abortonclose" answers it too); the answer then goes, and the connection closes */
		if (events & (EPOLLERR | EPOLLHUP))
			conn_close(c);
		return;
	}
	if (c->lingering) {
		conn_linger(c);
		return;
	}
	if (c->out.len) {
		conn_flush(c);
		return;
	}
	(void)conn_read(c, false);
}

int hlb_http_answer(struct hlb_http *h, uint64_t id, struct hlb_http_resp *resp)
{
	struct http_conn *c = h->conns;

	while (c && !(c->held && c->id == id))
		c = c->next;
	if (!c) {
		hlb_buf_free(&resp->body);
		return -ENOENT;
	}
	c->held = false;
	resp->n_fds = 0;
	hlb_timer_arm(h->loop, &c->timer, hlb_now_ms() + h->timeout_ms); /* to be read */
	conn_respond(c, resp);
	return 0;
}

/*
 * The request of <c> that waited for room for the copies of its answer's descriptors
 * (conn_fds_wait()), looked at again (a copy freed, or its time up): served if there is room
 * now, else refused with a 503 once <c>'s h->timeout_ms are over (its client asks again later).
 */
static void conn_fds_waited(struct http_conn *c)
{
	unsigned kept = http_fds_kept(c->h);

	if (kept + c->fds_want > HTTP_FDS_KEPT_MAX && hlb_now_ms() < c->fds_until) {
		hlb_timer_arm(c->h->loop, &c->timer, c->fds_until);
		return;
	}
	c->fds_waiting = false;
	if (kept + c->fds_want <= HTTP_FDS_KEPT_MAX) {
		hlb_timer_arm(c->h->loop, &c->timer,
			      hlb_now_ms() + c->h->timeout_ms); /* to be read */
		hlb_loop_mod(c->h->loop, &c->io, EPOLLIN);
		conn_serve(c, &c->waiting);
		return;
	}
	http_refused(c->h, HLB_HTTP_REFUSED_UNREAD);
	conn_error(c, 503,
		   "answers not read yet by their clients hold copies of the descriptors riding "
		   "on them that leave no room for this one's: try again once they are");
}

/*
 * A request that has not arrived whole in time is answered 408 (and given as long again to
 * read it); a silent connection, or an answer its client took nothing of for h->timeout_ms, is
 * closed. What came as the time ran out, which the loop has not seen yet (it looks at its
 * sockets, then at its timers), is read first: a request come whole then is taken as if it had
 * come a moment before, and a connection that lingers is closed with a FIN behind its answer.
 * Closed with those bytes unread, the socket reset the connection, and the client could lose
 * the answer it had not read yet.
 */
static void conn_timeout(void *arg)
{
	struct http_conn *c = arg;

	if (c->held) { /* its handler did not answer in time */
		conn_close(c);
		return;
	}
	if (c->fds_waiting) {
		conn_fds_waited(c);
		return;
	}
	if (c->lingering) { /* its client did not end within h->linger_ms */
		conn_give_up(c);
		return;
	}
	if (!c->out.len) {
		/* an answer given now has as long again to be read, as a 408 has */
		hlb_timer_arm(c->h->loop, &c->timer, hlb_now_ms() + c->h->timeout_ms);
		if (!conn_read(c, true))
			return; /* answered, held or closed by what came */
	}
	if (c->busy && !c->out.len) {
		if (conn_place(c))
			return; /* its request awaited on, h->timeout_ms from now */
		hlb_timer_arm(c->h->loop, &c->timer, hlb_now_ms() + HTTP_BUSY_TIMEOUT_MS(c->h));
		conn_busy(c);
		return;
	}
	if (c->in_len && !c->out.len) {
		char why[80];
		unsigned ms = c->h->timeout_ms;

		hlb_timer_arm(c->h->loop, &c->timer, hlb_now_ms() + ms);
		if (ms % 1000)
			snprintf(why, sizeof(why), "the request did not arrive whole within %u ms",
				 ms);
		else
			snprintf(why, sizeof(why), "the request did not arrive whole within %u s",
				 ms / 1000);
		conn_error(c, 408, why);
		return;
	}
	conn_close(c);
}

/*
 * Whether the <n> bytes <b> a client sent first begin a HEAD request. HEAD is the one method of
 * those the endpoint takes that begins with an H: its first byte tells it, however few of the
 * request's bytes came yet.
 */
static bool head_begun(const char *b, size_t n)
{
	return n && !memcmp(b, "HEAD ", n < 5 ? n : 5);
}

/*
 * Whether the client of <fd>, whose request has not been read, began a HEAD request, into
 * *<ret_head>, from its first bytes, peeked at (the linger reads them): 1; 0 if neither a byte
 * nor its end came yet (*<ret_head> left alone); -errno.
 */
static int peek_head(int fd, bool *ret_head)
{
	char m[5];
	ssize_t n = recv(fd, m, sizeof(m), MSG_PEEK | MSG_DONTWAIT);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	*ret_head = head_begun(m, (size_t)n);
	return 1;
}

static void shed_close(struct http_shed *s)
{
	struct hlb_http *h = s->h;

	hlb_loop_del(h->loop, &s->io);
	http_fd_close(h, s->io.fd);
	s->io.fd = -1;
	h->n_shed--;
	spare_take(h);
}

/* The shed timer at <when> if it is not armed before. */
static void shed_timer_at(struct hlb_http *h, uint64_t when)
{
	if (!hlb_timer_armed(&h->shed_timer) || when < h->shed_timer.when_ms)
		hlb_timer_arm(h->loop, &h->shed_timer, when);
}

/*
 * The 503 of <s>, answered at accept, written (to a HEAD without its body: <head>), its writing
 * shut down: it lingers from now on, until h->linger_ms from now. Whether it was written.
 */
static bool shed_answer(struct http_shed *s, bool head)
{
	static const char busy[] = HTTP_BUSY_HEAD HTTP_BUSY_BODY;
	size_t len = sizeof(busy) - 1 - (head ? sizeof(HTTP_BUSY_BODY) - 1 : 0);

	s->answered = true;
	s->until = hlb_now_ms() + s->h->linger_ms;
	shed_timer_at(s->h, s->until);
	if (write(s->io.fd, busy, len) != (ssize_t)len)
		return false;
	shutdown(s->io.fd, SHUT_WR);
	return true;
}

/*
 * What came on <s>: its request's first byte, or its client's end, if it was not answered yet
 * (then answered: peek_head()); what its client sent after the answer, read and dropped.
 * Whether it lingers on.
 */
static bool shed_read(struct http_shed *s)
{
	bool head = false;
	int ret;

	if (!s->answered) {
		ret = peek_head(s->io.fd, &head);
		if (ret == 0)
			return true; /* nothing yet */
		if (ret < 0 || !shed_answer(s, head))
			return false;
	}
	return linger_read(s->io.fd, &s->lingered);
}

static void shed_io(void *arg, uint32_t events)
{
	struct http_shed *s = arg;

	(void)events;
	if (!shed_read(s))
		shed_close(s);
}

/*
 * The 503 of <s>, waiting for its request's first byte, answered now: by what has come, which
 * the loop may not have seen yet (a HEAD's byte come with the deadline, or with the handover
 * or the newer connection that takes its place), as a GET if nothing did. Whether it was
 * written.
 */
static bool shed_answer_now(struct http_shed *s)
{
	bool head = false;

	(void)peek_head(s->io.fd, &head);
	return shed_answer(s, head);
}

/* <s> closed for another's sake: answered first if it was not (shed_answer_now()), what its
 * client sent read first (as conn_give_up()). */
static void shed_give_up(struct http_shed *s)
{
	if (!s->answered)
		(void)shed_answer_now(s);
	(void)linger_read(s->io.fd, &s->lingered);
	shed_close(s);
}

/* Those past their deadline answered, if they were waiting for their request, or closed; the
 * timer at the next deadline. */
static void shed_timeout(void *arg)
{
	struct hlb_http *h = arg;
	uint64_t now = hlb_now_ms(), next = 0;

	for (unsigned i = 0; i < HTTP_SHED_MAX; i++) {
		struct http_shed *s = &h->shed[i];

		if (s->io.fd >= 0 && s->until <= now && !s->answered &&
		    (!shed_answer_now(s) || !linger_read(s->io.fd, &s->lingered)))
			shed_close(s);
		else if (s->io.fd >= 0 && s->until <= now && s->answered)
			shed_give_up(s); /* what came as its time ran out read: no reset */
		if (s->io.fd >= 0 && (!next || s->until < next))
			next = s->until;
	}
	if (next)
		hlb_timer_arm(h->loop, &h->shed_timer, next);
}

/*
 * The connection <fd>, answered 503 at accept, in a place of h->shed, where it lingers as an
 * answered connection does (conn_linger()): its client's request, sent with the connect, would
 * otherwise come to a closed socket, whose reset can discard the answer before the client reads
 * it. The answer waits for the request's first byte (a tenth of h->timeout_ms at most), which
 * says whether it is a HEAD, to answer without the body: the request of a client slow to send
 * it was not there yet at accept, and a HEAD got the body. Closed at once if its client has
 * ended; the place taken longest ago given up if none is free.
 */
static void shed_add(struct hlb_http *h, int fd)
{
	struct http_shed *s = NULL, *oldest = NULL;

	for (unsigned i = 0; i < HTTP_SHED_MAX && !s; i++) {
		if (h->shed[i].io.fd < 0)
			s = &h->shed[i];
		else if (!oldest || h->shed[i].seq < oldest->seq)
			oldest = &h->shed[i];
	}
	if (!s) {
		shed_give_up(oldest);
		s = oldest;
	}
	*s = (struct http_shed){ .h = h,
				 .io = { .fd = fd, .fn = shed_io, .arg = s },
				 .until = hlb_now_ms() + HTTP_BUSY_TIMEOUT_MS(h),
				 .seq = ++h->lingers };
	h->n_shed++;
	if (!shed_read(s) || hlb_loop_add(h->loop, &s->io, EPOLLIN) < 0) {
		http_fd_close(h, fd);
		s->io.fd = -1;
		h->n_shed--;
		spare_take(h);
		return;
	}
	shed_timer_at(h, s->until);
}

/*
 * accept4() on the listener of <h> failed with <err>: a descriptor freed for the next try if
 * <err> is for want of one (EMFILE, ENFILE), whether it was. The reserve is given up for it
 * (its slot for the connection); in use already, the descriptor of the connection that has
 * lingered longest, given up as its place at the 64 is (what its client sent read first), the
 * reserve in its slot (http_fd_close()) for the next accept. Held, it kept every admin request
 * in the backlog until its client ended (2 s at most), one that reads its answer and is slow
 * to close its socket. (Those answered 503 at accept, in h->shed, are not given up: there are
 * some only once 72 connections were open, and each goes within h->linger_ms.)
 */
static bool accept_room(struct hlb_http *h, int err)
{
	struct http_conn *c;

	if (err != EMFILE && err != ENFILE)
		return false;
	if (h->spare >= 0) {
		close(h->spare);
		h->spare = -1;
		return true;
	}
	c = conn_lingering_oldest(h, CONN_ANY);
	if (!c)
		return false;
	conn_give_up(c);
	return true;
}

/*
 * At a handover's drain, accept4() failed with <err> and accept_room() found no descriptor to
 * free: the connection of h->shed answered longest ago given up (what its client sent read
 * first: shed_give_up()), its slot the reserve's (http_fd_close()) for the next accept. They
 * are kept open through the drain, and one of them may hold the reserve, taken at accept.
 * Whether one was.
 */
static bool shed_room(struct hlb_http *h, int err)
{
	struct http_shed *oldest = NULL;

	if (err != EMFILE && err != ENFILE)
		return false;
	for (unsigned i = 0; i < HTTP_SHED_MAX; i++)
		if (h->shed[i].io.fd >= 0 && (!oldest || h->shed[i].seq < oldest->seq))
			oldest = &h->shed[i];
	if (!oldest)
		return false;
	shed_give_up(oldest);
	return true;
}

static void http_resume(void *arg)
{
	struct hlb_http *h = arg;

	spare_take(h);
	if (hlb_loop_add(h->loop, &h->io, EPOLLIN) < 0)
		hlb_timer_arm(h->loop, &h->resume, hlb_now_ms() + HTTP_ACCEPT_PAUSE_MS);
}

/* The connections of <h> that hold a place among the 64: those not busy. */
static unsigned http_placed(const struct hlb_http *h)
{
	return h->n_conns - h->n_busy;
}

static void http_accept(void *arg, uint32_t events)
{
	struct hlb_http *h = arg;
	bool busy;

	for (;;) {
		int fd = accept4(h->io.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct http_conn *c;

		if (fd < 0 && accept_room(h, errno))
			continue;
		if (fd < 0 &&
		    (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
			/* the connection stays in the backlog: look again later */
			hlb_loop_del(h->loop, &h->io);
			hlb_timer_arm(h->loop, &h->resume, hlb_now_ms() + HTTP_ACCEPT_PAUSE_MS);
			return;
		}
		if (fd < 0) {
			if (errno == ECONNABORTED || errno == EINTR)
				continue;
			return;
		}
		/* a lingering connection, answered, gives its place first, the one lingering
		 * longest first: clients that do not close theirs do not keep others out for 2 s.
		 * What its client sent is read first, so that the close is a FIN behind the answer;
		 * only what it sends after draws a reset. The places are counted, not the
		 * connections: those answered 503 over the 64 that linger hold none, and while one
		 * is free, no connection is given up (nor the new one made busy) for them */
		while (http_placed(h) >= HLB_HTTP_CONNS_MAX &&
		       (c = conn_lingering_oldest(h, CONN_PLACED)))
			conn_give_up(c);
		busy = http_placed(h) >= HLB_HTTP_CONNS_MAX;
		/* one of the 8 past them that lingers, answered, gives its buffer as well */
		while (busy && h->n_busy >= HLB_HTTP_BUSY_MAX &&
		       (c = conn_lingering_oldest(h, CONN_BUSY)))
			conn_give_up(c);
		/*
		 * Past HLB_HTTP_CONNS_MAX a few more are answered 503 once their
		 * request is in: closed before it came, the request would meet a
		 * closed socket and the client a reset instead of the answer.
		 */
		if ((busy && h->n_busy >= HLB_HTTP_BUSY_MAX) || !(c = calloc(1, sizeof(*c)))) {
			/* say why: once its request's first byte has come, which tells a HEAD */
			http_refused(h, HLB_HTTP_REFUSED_CONNECTIONS);
			shed_add(h, fd);
			continue;
		}
		c->busy = busy;
		c->h = h;
		c->io = (struct hlb_io){ .fd = fd, .fn = conn_io, .arg = c };
		hlb_timer_init(&c->timer, conn_timeout, c);
		if (hlb_loop_add(h->loop, &c->io, EPOLLIN) < 0) {
			close(fd);
			free(c);
			continue;
		}
		hlb_timer_arm(h->loop, &c->timer,
			      hlb_now_ms() + (c->busy ? HTTP_BUSY_TIMEOUT_MS(h) : h->timeout_ms));
		c->next = h->conns;
		if (h->conns)
			h->conns->prev = c;
		h->conns = c;
		h->n_conns++;
		h->n_busy += c->busy;
	}
}

static void http_name(struct hlb_http *h)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char ip[INET6_ADDRSTRLEN];

	if (h->unix_path[0]) {
		snprintf(h->address, sizeof(h->address), "unix:%s", h->unix_path);
		return;
	}
	if (getsockname(h->io.fd, (struct sockaddr *)&ss, &len) < 0)
		return;
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		snprintf(h->address, sizeof(h->address), "[%s]:%u", ip, ntohs(s6->sin6_port));
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		snprintf(h->address, sizeof(h->address), "%s:%u", ip, ntohs(s4->sin_port));
	}
}

/*
 * Bind <fd> for the Unix socket path <path> and listen, to a name of its own in the same
 * directory (into *<ret_sun>), which unix_put_over() then renames over <path>: the path names a
 * live socket at every moment, what was there (a socket of before: a stale one, or the live one
 * of the hashlb an upgrade replaces) staying until the rename. A bind that fails leaves it in
 * place; and a client never finds the path missing, as it did between an unlink and the bind.
 * A path too long for such a name beside it (sun_path), or a name beside it refused (EACCES,
 * EPERM: an access policy that names the path alone), is bound in place, after an unlink
 * (*<ret_sun> is then <path>). 0, or -errno.
 */
static int unix_bind_beside(int fd, const char *path, struct sockaddr_un *ret_sun)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	const char *base = strrchr(path, '/');
	size_t dir_len = base ? (size_t)(base - path) + 1 : 0;
	struct timespec ts;
	int n, ret;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	n = snprintf(sun.sun_path, sizeof(sun.sun_path), "%.*s.hashlb-%d-%lx", (int)dir_len, path,
		     (int)getpid(), (unsigned long)ts.tv_nsec);
	if (n < 0 || (size_t)n >= sizeof(sun.sun_path)) {
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
		unlink(path);
	}
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		/* a policy (AppArmor, SELinux) that lets hashlb make the path and no other name
		 * there: bound in place, as a path too long for the name beside it is */
		if ((errno != EACCES && errno != EPERM) || !strcmp(sun.sun_path, path))
			return -errno;
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
		unlink(path);
		if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0)
			return -errno;
	}
	if (listen(fd, HTTP_BACKLOG) < 0) {
		ret = -errno;
		unlink(sun.sun_path);
		return ret;
	}
	*ret_sun = sun;
	return 0;
}

/*
 * The listening socket unix_bind_beside() bound at <sun>, put at <path>: renamed over what is
 * there. The socket file's device and inode into *<ret_dev> and *<ret_ino> (what
 * hlb_http_free() removes). 0, or -errno, the name beside removed.
 */
static int unix_put_over(const struct sockaddr_un *sun, const char *path, dev_t *ret_dev,
			 ino_t *ret_ino)
{
	struct stat st;
	int ret;

	if (stat(sun->sun_path, &st) < 0 ||
	    (strcmp(sun->sun_path, path) != 0 && rename(sun->sun_path, path) < 0)) {
		ret = -errno;
		unlink(sun->sun_path);
		return ret;
	}
	*ret_dev = st.st_dev;
	*ret_ino = st.st_ino;
	return 0;
}

int hlb_http_new(struct hlb_loop *loop, const struct sockaddr *addr, socklen_t addr_len,
		 hlb_http_handler fn, void *arg, struct hlb_http **ret_http,
		 struct hashlb_error *err)
{
	struct hlb_http *h = calloc(1, sizeof(*h));
	struct sockaddr_un bound;
	char where[128];
	int one = 1, zero = 0, ret;

	if (!h)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	h->loop = loop;
	h->fn = fn;
	h->arg = arg;
	h->spare = -1;
	h->timeout_ms = HLB_HTTP_TIMEOUT_MS;
	h->linger_ms = HLB_HTTP_LINGER_MS;
	hlb_timer_init(&h->resume, http_resume, h);
	hlb_timer_init(&h->shed_timer, shed_timeout, h);
	for (unsigned i = 0; i < HTTP_SHED_MAX; i++)
		h->shed[i].io.fd = -1;
	spare_take(h);
	h->io = (struct hlb_io){ .fn = http_accept, .arg = h };
	h->io.fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->io.fd < 0) {
		ret = -errno;
		goto err_free;
	}
	if (addr->sa_family == AF_UNIX) {
		const struct sockaddr_un *sun = (const struct sockaddr_un *)addr;
		struct stat st;

		/* A stale socket of a previous run, or the live one of the hashlb
		 * this one replaces in an upgrade: the path is ours from now on.
		 * Anything else there (the config itself, a typo's victim) is not
		 * ours to remove. */
		if (lstat(sun->sun_path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
			ret = -EEXIST;
			hashlb_err(
				err, ret, HASHLB_ERR_SYSTEM,
				"admin: cannot listen on unix:%s: a file that is not a socket is "
				"there, and it is left alone",
				sun->sun_path);
			goto err_close;
		}
		snprintf(h->unix_path, sizeof(h->unix_path), "%s", sun->sun_path);
	} else {
		/* SO_REUSEPORT, as the service listeners: a new hashlb started
		 * for an upgrade serves beside the old one until that one stops. */
		setsockopt(h->io.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(h->io.fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
		/* Dual-stack whatever net.ipv6.bindv6only says, as the service
		 * listeners: the config's clash check takes [::]:P to cover
		 * 127.0.0.1:P, and "ctl -a 127.0.0.1:P" must reach it. */
		if (addr->sa_family == AF_INET6)
			setsockopt(h->io.fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	}
	if (h->unix_path[0])
		ret = unix_bind_beside(h->io.fd, h->unix_path, &bound);
	else
		ret = bind(h->io.fd, addr, addr_len) < 0 || listen(h->io.fd, HTTP_BACKLOG) < 0
			      ? -errno
			      : 0;
	if (ret < 0)
		goto err_free;
	/* watched before it takes the path: had the rename come first, a failure here left the
	 * path naming a socket closed, the hashlb this one replaces unreachable there until it
	 * took the path back (hlb_http_reclaim()) */
	ret = hlb_loop_add(loop, &h->io, EPOLLIN);
	if (ret == 0 && h->unix_path[0])
		ret = unix_put_over(&bound, h->unix_path, &h->unix_dev, &h->unix_ino);
	else if (ret < 0 && h->unix_path[0])
		unlink(bound.sun_path);
	if (ret < 0)
		goto err_free;
	http_name(h);
	*ret_http = h;
	return 0;

err_free:
	if (addr->sa_family == AF_UNIX) {
		snprintf(where, sizeof(where), "unix:%s",
			 ((const struct sockaddr_un *)addr)->sun_path);
		hashlb_listen_err(err, ret, NULL, where);
	} else {
		/* who listens asked, as for a service's address */
		hlb_bind_err(ret, addr, NULL, err);
	}
err_close:
	h->unix_path[0] = '\0'; /* not ours to remove */
	hlb_http_free(h);
	return ret;
}

void hlb_http_free(struct hlb_http *h)
{
	if (!h)
		return;
	/* those answered, or their answer under way, closed as at their deadline: what their
	 * client sent read first (a stop's, as a handover's), the close a FIN behind the answer,
	 * not a reset that fails a client still sending and can discard an answer not read yet */
	while (h->conns) {
		struct http_conn *c = h->conns;

		if (c->lingering || c->out.len || c->body.len)
			(void)linger_read(c->io.fd, &c->lingered);
		conn_close(c);
	}
	for (unsigned i = 0; i < HTTP_SHED_MAX; i++) {
		struct http_shed *s = &h->shed[i];

		if (s->io.fd >= 0 && s->answered)
			(void)linger_read(s->io.fd, &s->lingered);
		if (s->io.fd >= 0)
			shed_close(s);
	}
	hlb_timer_cancel(h->loop, &h->shed_timer);
	hlb_timer_cancel(h->loop, &h->resume);
	if (h->spare >= 0)
		close(h->spare);
	if (h->io.fd >= 0) {
		hlb_loop_del(h->loop, &h->io);
		close(h->io.fd);
	}
	if (h->unix_path[0]) {
		struct stat st;

		/* not if a newer hashlb has bound the path since (an upgrade) */
		if (stat(h->unix_path, &st) == 0 && st.st_dev == h->unix_dev &&
		    st.st_ino == h->unix_ino)
			unlink(h->unix_path);
	}
	free(h);
}

/*
 * The answer at a handover to the connection <fd> whose request is not answered yet, <in_len>
 * bytes of it read into <in> (<head>: a HEAD, as its whole head said), what its client sent
 * since read first (into *<lingered>): then its close is a FIN behind the answer, not a reset
 * that discards it. A request not carried out (not come whole, or not read) is answered 503, to
 * be sent again, to the newer hashlb; one <held> was taken in by its handler, which carried it
 * out, and is answered so: sent again, a POST /close would close the connections of then.
 */
static void handed_answer(int fd, const char *in, size_t in_len, bool head, bool held,
			  size_t *lingered)
{
	static const char handed[] = HTTP_HANDED_HEAD HTTP_HANDED_BODY;
	static const char carried[] = HTTP_CARRIED_HEAD HTTP_CARRIED_BODY;
	const char *answer = held ? carried : handed;
	size_t len = held ? sizeof(carried) - 1 : sizeof(handed) - 1;

	if (!head && in_len)
		head = head_begun(in, in_len);
	else if (!head)
		(void)peek_head(fd, &head);
	if (head)
		len -= held ? sizeof(HTTP_CARRIED_BODY) - 1 : sizeof(HTTP_HANDED_BODY) - 1;
	(void)linger_read(fd, lingered);
	if (write(fd, answer, len) == (ssize_t)len)
		shutdown(fd, SHUT_WR);
}

void hlb_http_free_handed_over(struct hlb_http *h)
{
	int fd, err;

	if (!h)
		return;
	for (struct http_conn *c = h->conns; c; c = c->next) {
		if (c->lingering || c->out.len || c->body.len) {
			/* answered, or its answer under way: closed as it is, what its client
			 * sent read first */
			(void)linger_read(c->io.fd, &c->lingered);
			continue;
		}
		handed_answer(c->io.fd, c->in, c->in_len, c->head, c->held, &c->lingered);
		/* answered: it lingers from now on, and so gives its descriptor up if the drain
		 * below needs one (accept_room()), as an answered one does; kept, it could hold
		 * the reserve (accepted on it at the fd limit), and the drain stopped there */
		c->lingering = true;
		c->linger_seq = ++h->lingers;
	}
	for (unsigned i = 0; i < HTTP_SHED_MAX; i++) {
		struct http_shed *s = &h->shed[i];

		if (s->io.fd < 0)
			continue;
		/* one still waiting for its request's first byte: not carried out, as one of
		 * h->conns not answered yet, and told so (not "too many admin connections", which
		 * the newer hashlb does not have). Kept open, as those of h->conns, through the
		 * drain below: closed before it, what its client sent meanwhile (the rest of a
		 * request in flight) met a closed socket, whose reset could discard the answer.
		 * hlb_http_free() reads what came then, and closes it. */
		if (!s->answered) {
			handed_answer(s->io.fd, "", 0, false, false, &s->lingered);
			s->answered = true;
		}
	}
	/*
	 * Those still in the listener's queue, accepted and answered as a connection whose
	 * request was not read: closed with the listener, each was reset (3 in 28,000 admin
	 * connections under upgrades). The newer hashlb listens on a socket of its own: the
	 * path renamed to it (a Unix socket), or beside this one (SO_REUSEPORT), which the kernel
	 * shares new connections with until the close below; so at most twice the backlog. One
	 * its client reset while it waited (ECONNABORTED) is passed over, not taken for the end
	 * of the queue: the rest were reset with the listener. At the fd limit each is answered
	 * on the reserve, as at accept (accept_room(): the drain stopped there, and the queue was
	 * reset whole), its slot kept for the next (http_fd_close()); the reserve held by a
	 * connection answered 503 at accept, one of those gives its own up (shed_room()). Out of
	 * memory, the descriptors that can be freed so gone, or the queue empty, the drain ends.
	 */
	for (unsigned i = 0; i < 2 * HTTP_BACKLOG;) {
		size_t lingered = 0;

		fd = accept4(h->io.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && (errno == ECONNABORTED || errno == EINTR)) {
			i++;
			continue;
		}
		err = errno;
		if (fd < 0 && (accept_room(h, err) || shed_room(h, err)))
			continue;
		if (fd < 0)
			break;
		i++;
		handed_answer(fd, "", 0, false, false, &lingered);
		http_fd_close(h, fd);
	}
	/* what came on those accepted before since they were answered (the rest of a body on its
	 * way while the queue drained), read too: closed with it unread, each was reset (those
	 * of h->shed, answered all, are read so by hlb_http_free()) */
	for (struct http_conn *c = h->conns; c; c = c->next)
		(void)linger_read(c->io.fd, &c->lingered);
	hlb_http_free(h);
}

/* Whether a process listens on the Unix socket at <path>: its connect is taken or waits. */
static bool unix_served(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	bool served;

	if (fd < 0)
		return true; /* cannot tell: left alone */
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	served = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0 || errno == EAGAIN;
	close(fd);
	return served;
}

int hlb_http_reclaim(struct hlb_http *h)
{
	struct sockaddr_un bound;
	struct stat st;
	int fd, ret;

	if (!h->unix_path[0])
		return 0;
	if (lstat(h->unix_path, &st) == 0 &&
	    (!S_ISSOCK(st.st_mode) || (st.st_dev == h->unix_dev && st.st_ino == h->unix_ino) ||
	     unix_served(h->unix_path)))
		return 0; /* not a socket's, still this one's, or a third process's */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	ret = unix_bind_beside(fd, h->unix_path, &bound);
	if (ret == 0)
		ret = unix_put_over(&bound, h->unix_path, &h->unix_dev, &h->unix_ino);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	/* the socket of before: bound to a name gone, nobody reaches it any more */
	hlb_loop_del(h->loop, &h->io);
	close(h->io.fd);
	h->io.fd = fd;
	/* not watched yet (epoll short of memory): looked at again as a paused accept is */
	if (!hlb_timer_armed(&h->resume) && hlb_loop_add(h->loop, &h->io, EPOLLIN) < 0)
		hlb_timer_arm(h->loop, &h->resume, hlb_now_ms() + HTTP_ACCEPT_PAUSE_MS);
	return 1;
}

void hlb_http_on_refused(struct hlb_http *h, hlb_http_refused_fn fn, void *arg)
{
	h->refused_fn = fn;
	h->refused_arg = arg;
}

void hlb_http_set_timeouts(struct hlb_http *h, unsigned timeout_ms, unsigned linger_ms)
{
	h->timeout_ms = timeout_ms;
	h->linger_ms = linger_ms;
}

void hlb_http_on_fds(struct hlb_http *h, hlb_http_fds_fn fn, void *arg)
{
	h->fds_fn = fn;
	h->fds_arg = arg;
}

void hlb_http_on_head(struct hlb_http *h, hlb_http_head_fn fn, void *arg)
{
	h->head_fn = fn;
	h->head_arg = arg;
}

uint64_t hlb_http_refused(const struct hlb_http *h, enum hlb_http_refusal why)
{
	return h->refused[why];
}

unsigned hlb_http_conns(const struct hlb_http *h)
{
	return h->n_conns + h->n_shed;
}

const char *hlb_http_address(const struct hlb_http *h)
{
	return h->address;
}

int hlb_http_sockname(const struct hlb_http *h, struct sockaddr_storage *ss)
{
	socklen_t len = sizeof(*ss);

	return getsockname(h->io.fd, (struct sockaddr *)ss, &len) < 0 ? -errno : 0;
}
