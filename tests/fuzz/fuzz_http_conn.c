/* Fuzzes the admin endpoint's connections (src/control/http.c) rather than its parser: clients on its Unix socket write, shut down, read slowly and go away in any order while handlers answer at once (or from the head alone, before a 100 Continue), hold their answer for later (hlb_http_answer()), answer large bodies (sent from the handler's buffer, not copied), descriptors or a failed append; every answer a client reads whole is one well-formed response whose body is what its handler wrote, every connection ends when its client closes (none left to a timer), and nothing leaks. */
// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "control/http.h"
#include "control/loop.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CLIENTS 6
#define IDS_MAX 32
#define ANSWER_MAX (2u << 20) /* more than any answer here */

/* The answer being checked, printed with a broken contract. */
static const char *answer;

static void check(bool ok, const char *what)
{
	if (ok)
		return;
	fprintf(stderr, "contract broken: %s\n", what);
	if (answer)
		fprintf(stderr, "the answer (%zu bytes):\n%.1024s\n", strlen(answer), answer);
	abort();
}

struct client {
	int fd; /* -1: none */
	char *got; /* what it read of its answer */
	size_t got_len;
	bool eof; /* read to its end */
};

struct state {
	struct hlb_http *h;
	struct {
		uint64_t id;
		bool held; /* its handler held it */
		bool answered; /* hlb_http_answer() took it */
	} reqs[IDS_MAX]; /* the requests handlers saw */
	unsigned n_reqs;
	int devnull[2];
};

/* Byte <i> of the body answered to request <id>. */
static char pattern(uint64_t id, size_t i)
{
	return (char)('a' + (id * 7 + i) % 26);
}

/* A body that says whose it is, then <len> bytes of its pattern and a newline. */
static void body_of(struct hlb_buf *b, uint64_t id, size_t len)
{
	char *p = malloc(len + 1);

	if (!p)
		abort();
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(id, i);
	p[len] = '\n';
	hlb_buf_printf(b, "id=%llu len=%zu\n", (unsigned long long)id, len);
	hlb_buf_put(b, p, len + 1);
	free(p);
}

/*
 * The handler: by the path's first letter after '/', answers at once (a
 * body of a size the path's second letter gives), holds (h), answers
 * descriptors with their lines (f, on the Unix socket), or a failed append (o).
 */
static void handle(void *arg, const struct hlb_http_req *req, struct hlb_http_resp *resp)
{
	struct state *st = arg;
	char kind = req->path[0] == '/' ? req->path[1] : '\0';
	size_t len = kind ? (size_t)(unsigned char)req->path[2] : 0;

	check(req->local, "a request over the Unix socket is local");
	if (st->n_reqs < IDS_MAX)
		st->reqs[st->n_reqs++].id = req->id;
	check(req->body[req->body_len] == '\0', "the body a string");
	switch (kind) {
	case 'h':
		if (st->reqs[st->n_reqs - 1].id == req->id)
			st->reqs[st->n_reqs - 1].held = true;
		resp->hold = true;
		hlb_buf_puts(&resp->body, "dropped: a held answer is sent by hlb_http_answer()");
		return;
	case 'f':
		resp->fds = st->devnull;
		resp->n_fds = 2;
		resp->ctype = "text/plain";
		hlb_buf_printf(&resp->body, "id=%llu len=0\n\n", (unsigned long long)req->id);
		return;
	case 'o':
		hlb_buf_puts(&resp->body, "half");
		resp->body.oom = true;
		return;
	case 'b': /* big: past what the socket's buffer takes at once */
		len = len * 4096;
		break;
	}
	resp->ctype = "text/plain";
	body_of(&resp->body, req->id, len);
}

/* Asked before a 100 (Continue): a path /n... is answered from the head alone (404), its body
 * not waited for; the others are not. */
static bool head(void *arg, const struct hlb_http_req *req, struct hlb_http_resp *resp)
{
	(void)arg;
	check(req->body_len == 0 && !req->body[0], "a head has no body");
	if (strncmp(req->path, "/n", 2))
		return false;
	resp->status = 404;
	hlb_buf_puts(&resp->body, "{\"error\":\"no such endpoint\"}\n");
	return true;
}

/* Run the loop without blocking until it has nothing to do (at most <rounds> times). */
static void pump(struct hlb_loop *l, int rounds)
{
	for (int i = 0; i < rounds; i++)
		if (hlb_loop_run_once(l, 0) <= 0)
			break;
}

/* What <c> can read now, up to <max> bytes. */
static void client_read(struct client *c, size_t max)
{
	while (c->fd >= 0 && !c->eof && max) {
		static char buf[1 << 16];
		size_t want = max < sizeof(buf) ? max : sizeof(buf);
		ssize_t n = read(c->fd, buf, want);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) { /* reset: what it read is not whole, nothing to check */
			c->eof = true;
			c->got_len = SIZE_MAX;
			return;
		}
		if (n == 0) {
			c->eof = true;
			return;
		}
		if (c->got_len != SIZE_MAX) {
			check(c->got_len + (size_t)n <= ANSWER_MAX,
			      "one answer, of the size asked");
			if (!c->got && !(c->got = malloc(ANSWER_MAX + 1)))
				abort();
			memcpy(c->got + c->got_len, buf, (size_t)n);
			c->got_len += (size_t)n;
			c->got[c->got_len] = '\0';
		}
		max -= (size_t)n;
	}
}

/* An answer read to its end: nothing (closed unanswered), or one whole response. */
static void client_check(const struct client *c)
{
	const char *head_end, *cl, *body;
	unsigned long long id, len, clen = 0;
	size_t body_len;
	int status, off = 0;

	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	const char *got = c->got;
	size_t got_len = c->got_len;

	if (got_len == SIZE_MAX || got_len == 0)
		return;
	/* an interim 100 (Continue) to a request that asked for it (Expect), once, before */
	if (got_len >= sizeof(cont) - 1 && !memcmp(got, cont, sizeof(cont) - 1)) {
		got += sizeof(cont) - 1;
		got_len -= sizeof(cont) - 1;
		if (!got_len)
			return;
	}
	answer = got;
	check(!memchr(got, '\0', got_len), "no NUL in an answer");
	check(sscanf(got, "HTTP/1.1 %3d %*[^\r]\r\n%n", &status, &off) == 1 && off > 0 &&
		      status >= 200,
	      "a status line, of a final answer");
	head_end = strstr(got, "\r\n\r\n");
	check(head_end != NULL, "a head that ends");
	cl = strstr(got, "\r\nContent-Length: ");
	check(cl && cl < head_end && sscanf(cl, "\r\nContent-Length: %llu", &clen) == 1,
	      "a Content-Length");
	cl = strstr(got, "\r\nConnection: close\r\n");
	check(cl && cl < head_end, "Connection: close");
	body = head_end + 4;
	body_len = got_len - (size_t)(body - got);
	/* a HEAD request's answer has none */
	check(body_len == clen || body_len == 0, "the body as long as Content-Length says");
	if (body_len == 0)
		return;
	if (status == 500)
		check(strstr(body, "out of memory") != NULL, "a failed append answered 500");
	/* (not "\n%n": scanf's white space takes every newline) */
	if (sscanf(body, "id=%llu len=%llu%n", &id, &len, &off) != 2 || body[off++] != '\n') {
		answer = NULL;
		return; /* an error's JSON */
	}
	check(status == 200, "a handler's body with its status");
	check(body_len == (size_t)off + len + 1, "the whole body, as the handler wrote it");
	for (size_t i = 0; i < len; i++)
		check(body[off + i] == pattern(id, i),
		      "the body's bytes, as the handler wrote them");
}

/* The folder of the endpoint's socket, one for the process (hlb_http_free() removes the
 * socket), removed at exit. */
static char dir[64];

static void dir_remove(void)
{
	rmdir(dir);
}

static int client_new(const struct sockaddr_un *sun)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		abort();
	if (connect(fd, (const struct sockaddr *)sun, sizeof(*sun)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Input: a script, an operation per byte (its low 3 bits; the next 3: the
 * client it acts on), some taking more bytes:
 *   0 connect   1 write N (next byte) bytes of the script   2 shut down writing
 *   3 read (256 bytes << next byte's low 4 bits)   4 close
 *   5 answer the next byte's request (held or not, or an id never given) with a body
 *   6 run the loop   7 write a request line "GET /<next 2 bytes> HTTP/1.1"
 * Then every client shuts down writing, every held request is answered, and
 * each client reads its answer to the end.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t never = UINT64_MAX;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct client cl[CLIENTS];
	struct hashlb_error err = { 0 };
	struct state st = { 0 };
	struct hlb_loop *l;

	if (!dir[0]) {
		signal(SIGPIPE, SIG_IGN); /* as hashlb does (daemon.c) */
		snprintf(dir, sizeof(dir), "/tmp/hashlb-fuzz-http-XXXXXX");
		if (!mkdtemp(dir))
			abort();
		atexit(dir_remove);
	}
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/admin.sock", dir);
	if (hlb_loop_new(&l) < 0)
		abort();
	st.devnull[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	st.devnull[1] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (hlb_http_new(l, (const struct sockaddr *)&sun, sizeof(sun), handle, &st, &st.h, &err))
		abort();
	hlb_http_on_head(st.h, head, &st);
	for (int i = 0; i < CLIENTS; i++)
		cl[i] = (struct client){ .fd = -1 };

	while (size) {
		uint8_t op = data[0] & 7;
		struct client *c = &cl[(data[0] >> 3) % CLIENTS];
		uint8_t arg = size > 1 ? data[1] : 0;

		data++, size--;
		switch (op) {
		case 0:
			if (c->fd < 0) {
				*c = (struct client){ .fd = client_new(&sun) };
				pump(l, 4); /* accepted */
			}
			break;
		case 1: {
			size_t n = arg < size ? arg : size;

			if (size)
				data++, size--;
			n = n < size ? n : size;
			if (c->fd >= 0 && n && write(c->fd, data, n) < 0) {
				/* the server closed it, or its buffer is full: as a client sees it */
			}
			data += n, size -= n;
			break;
		}
		case 2:
			if (c->fd >= 0)
				shutdown(c->fd, SHUT_WR);
			break;
		case 3:
			if (size)
				data++, size--;
			client_read(c, (size_t)256 << (arg & 15));
			break;
		case 4:
			if (c->fd >= 0) {
				close(c->fd);
				free(c->got);
				*c = (struct client){ .fd = -1 };
			}
			break;
		case 5: {
			struct hlb_http_resp resp = { .status = 200, .ctype = "text/plain" };
			unsigned k = arg % (st.n_reqs + 1);
			uint64_t id = k < st.n_reqs ? st.reqs[k].id : never;
			int r;

			if (size)
				data++, size--;
			/* up to 480 KiB: past what the socket's buffer takes at once */
			body_of(&resp.body, id, (size_t)(arg >> 4) * 32768 + arg);
			r = hlb_http_answer(st.h, id, &resp);
			check(r == 0 || r == -ENOENT, "0 or -ENOENT");
			check(!resp.body.p, "the answer's body freed either way");
			if (k < st.n_reqs && st.reqs[k].held) {
				check(r == -ENOENT || !st.reqs[k].answered,
				      "a request answered once");
				st.reqs[k].answered = true;
			} else {
				check(r == -ENOENT,
				      "no connection takes an answer it did not hold for");
			}
			break;
		}
		case 6:
			pump(l, 16);
			break;
		case 7: {
			char line[64];
			int n = snprintf(line, sizeof(line),
					 "GET /%c%c HTTP/1.1\r\nHost: f\r\n\r\n", "hfobsa"[arg % 6],
					 size > 1 ? data[1] % 16 + 'A' : 'A');

			if (size)
				data++, size--;
			if (size)
				data++, size--;
			if (c->fd >= 0 && write(c->fd, line, (size_t)n) < 0) {
				/* as above */
			}
			break;
		}
		}
	}

	/* The end: every request whole or not, every held one answered, every answer read. */
	for (int i = 0; i < CLIENTS; i++)
		if (cl[i].fd >= 0)
			shutdown(cl[i].fd, SHUT_WR);
	pump(l, 64);
	for (unsigned k = 0; k < st.n_reqs; k++) {
		struct hlb_http_resp resp = { .status = 200, .ctype = "text/plain" };
		int r;

		body_of(&resp.body, st.reqs[k].id, k * 1000);
		r = hlb_http_answer(st.h, st.reqs[k].id, &resp);
		check(r == -ENOENT || (st.reqs[k].held && !st.reqs[k].answered),
		      "an answer taken only by a request held and not answered yet");
	}
	for (int round = 0; round < 500; round++) {
		bool done = true;

		for (int i = 0; i < CLIENTS; i++) {
			client_read(&cl[i], SIZE_MAX);
			done = done && (cl[i].fd < 0 || cl[i].eof);
		}
		if (done)
			break;
		check(round < 499, "every connection answered or closed");
		hlb_loop_run_once(l, 10);
	}
	for (int i = 0; i < CLIENTS; i++) {
		if (cl[i].fd < 0)
			continue;
		client_check(&cl[i]);
		close(cl[i].fd);
		free(cl[i].got);
	}
	/* every client gone: every connection ends now, at its client's end (one lingering after
	 * its answer too), none waiting for its timer (2 s, 10 s, 60 s) */
	pump(l, 64);
	check(hlb_http_conns(st.h) == 0, "every connection closed at its client's close");
	hlb_http_free(st.h);
	hlb_loop_free(l);
	close(st.devnull[0]);
	close(st.devnull[1]);
	return 0;
}
