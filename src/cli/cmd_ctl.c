// SPDX-License-Identifier: MIT
/* hashlb ctl: talk to a running hashlb's admin endpoint. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config/name_pair.h"
#include "control/buf.h"
#include "control/control.h"
#include "hashlb/config.h"
#include "hashlb/grow.h"
#include "runtime/answer.h"
#include "runtime/fdpass.h"

#define CTL_ADMIN_DEFAULT "127.0.0.1:9901"
/* how long the endpoint may take to accept a connection, and then to send its whole answer */
#define CTL_TIMEOUT_S 30
/*
 * The longest answer read, headers and all: past it the endpoint is no hashlb (or a broken
 * one), and the command fails rather than grow without bound. The largest real answer is the
 * /metrics of the largest config: 45 series per backend, about 5.3 KB per backend with
 * 30-byte names (42.5 MB for one service of 8,000), so about 350 MB for a service of 65,535
 * backends, HASHLB_BACKENDS_MAX.
 */
#define CTL_ANSWER_MAX (1u << 30)
/* clients N: at most the endpoint's /clients?top= */
#define CTL_CLIENTS_MAX 1000
/* --timeout: seconds to wait for the endpoint, 0 = the defaults (CTL_TIMEOUT_S,
 * and UPGRADE_WAIT_MS for the outcome of an upgrade) */
static unsigned ctl_timeout_s;

/* whether the endpoint is the default address, neither --admin, -c nor $HASHLB_ADMIN given:
 * nothing there is then most often a hashlb whose config's admin is elsewhere */
static bool ctl_admin_default;
/* -c FILE when the address is its admin key, which a running hashlb may not serve (yet) */
static const char *ctl_admin_from_file;
/* and FILE writes no admin key: the address is the default */
static bool ctl_admin_file_default;

/* How long a connect or a read waits for the endpoint. */
static unsigned ctl_wait_s(void)
{
	return ctl_timeout_s ? ctl_timeout_s : CTL_TIMEOUT_S;
}

static void usage(FILE *f)
{
	fprintf(f,
		"NAME\n"
		"  hashlb ctl - inspect and steer a running hashlb through its admin endpoint\n"
		"\n"
		"SYNOPSIS\n"
		"  hashlb ctl [--admin ADDR] [-c FILE] [--json] [--timeout S] COMMAND [ARGS...]\n"
		"\n"
		"COMMANDS\n"
		"  status                          services, tables and backends: state,\n"
		"                                  health, share, connections, failures;\n"
		"                                  each worker's buffers, spills, pipes;\n"
		"                                  the bytes the tables hold; the fd limit\n"
		"                                  it runs under, and the connection cap\n"
		"  metrics                         the Prometheus metrics, as scraped\n"
		"  table [SERVICE]                 the table: scheme, table_size or vnodes,\n"
		"                                  seed, generation, fingerprint, each\n"
		"                                  backend's share; without SERVICE, each\n"
		"                                  service's in turn (--json: one service)\n"
		"  lookup [-s SERVICE] [--vip ADDR:PORT] CLIENT...\n"
		"                                  the backend and preference list of each\n"
		"                                  client address (ADDR or ADDR:PORT); a\n"
		"                                  4-tuple key hashes the address clients\n"
		"                                  connect to: the service's, or --vip\n"
		"                                  (needed with a wildcard listen address\n"
		"                                  or accept_proxy)\n"
		"  clients [-s SERVICE] [N]        the N clients (default 10, 1..1000) with\n"
		"                                  the most connections open now\n"
		"                                  (max_connections_per_client counts them,\n"
		"                                  each cut to the service's client_prefix)\n"
		"  set [-s SERVICE] BACKEND STATE  admin state: ready, drain (no new\n"
		"                                  clients, connections stay) or maint (no\n"
		"                                  traffic, no health checks); also up,\n"
		"                                  draining, maintenance, in any case;\n"
		"                                  back to ready, in slow_start\n"
		"  set [-s SERVICE] BACKEND weight N\n"
		"                                  change a weight (rebuilds the table);\n"
		"                                  raised from 0, in slow_start\n"
		"  set [-s SERVICE] BACKEND max_connections N\n"
		"                                  cap its connections (0 = no cap): clients\n"
		"                                  over it go to their next backend; no\n"
		"                                  table change, no connection closed\n"
		"                                  (set and close: BACKEND may be the name\n"
		"                                  of an each_address entry: all of its\n"
		"                                  backends; what set sets lasts across\n"
		"                                  reloads and upgrades, not a restart:\n"
		"                                  write it in FILE too to keep it)\n"
		"  close [-s SERVICE] BACKEND      close the backend's connections now (its\n"
		"                                  clients reconnect to the backend the table\n"
		"                                  gives them); its state does not change:\n"
		"                                  after 'set BACKEND drain', to empty it;\n"
		"                                  also a backend a reload removed (or moved)\n"
		"                                  that still drains\n"
		"  reload [--pid PID]              re-read the config file hashlb run was\n"
		"                                  started with (not -c FILE's, which gives\n"
		"                                  the address: a note says so); on error the\n"
		"                                  running config stays and FILE:LINE:COL\n"
		"                                  says what is wrong (exit 1). With --pid,\n"
		"                                  reload process PID (a unit's $MAINPID):\n"
		"                                  through the endpoint if it is PID's,\n"
		"                                  as without; else (admin off or port 0,\n"
		"                                  nothing answers, or another process's\n"
		"                                  endpoint) by SIGHUP to PID, said on\n"
		"                                  stderr: exit 0, the outcome only in\n"
		"                                  PID's log; 1 if it cannot be sent, and\n"
		"                                  1, nothing sent, when -c FILE or its\n"
		"                                  admin key cannot be read, or PID is no\n"
		"                                  hashlb run (a mistyped pid: what it\n"
		"                                  runs is said). Once the request is\n"
		"                                  sent, an answer that does not come\n"
		"                                  whole (the connection closed or reset,\n"
		"                                  or no answer in time): exit 1, no\n"
		"                                  SIGHUP (it could reload twice), the\n"
		"                                  outcome unknown: PID's log says; and\n"
		"                                  where -c FILE has errors, 1 with them,\n"
		"                                  nothing sent (a reload would fail)\n"
		"  upgrade                         upgrade in place, as SIGUSR2 does: hashlb\n"
		"                                  runs the executable at its path again\n"
		"                                  (a new version installed there), hands\n"
		"                                  it the listening sockets and drains once\n"
		"                                  it serves. Waits for the outcome: exit 0\n"
		"                                  once the new process answers (or, its\n"
		"                                  admin address being another, runs on\n"
		"                                  2 s after the old one's closed), 1 if it\n"
		"                                  failed (the old one goes on serving).\n"
		"                                  With -c FILE that has errors: exit 1 with\n"
		"                                  them, nothing sent (the new hashlb would\n"
		"                                  refuse to start on it), unless --force;\n"
		"                                  so too where the weights set at run time\n"
		"                                  that it would take over pass FILE's\n"
		"                                  table_memory\n"
		"\n"
		"  SERVICE may be left out when hashlb runs a single service, and by\n"
		"  set and close when their BACKEND is in one service alone (one in\n"
		"  several is refused, naming them). Options may come before COMMAND\n"
		"  or among its ARGS (reload --pid=PID, status --timeout 5); after\n"
		"  \"--\", none is read.\n"
		"\n"
		"OPTIONS\n"
		"  -a, --admin ADDR    the admin endpoint: HOST:PORT, [V6]:PORT or unix:/PATH\n"
		"                      (default: $HASHLB_ADMIN if not empty, else\n"
		"                      " CTL_ADMIN_DEFAULT "); with -c, in place of FILE's\n"
		"                      key, as hashlb run takes it (off, port 0, no host name)\n"
		"  -c, --config FILE   take the admin address from FILE's 'admin' key\n"
		"  -j, --json          print the endpoint's JSON instead of text (lookup:\n"
		"                      one array, an object per CLIENT, as hashlb lookup)\n"
		"  -s, --service NAME  the service (table, lookup, clients, set, close)\n"
		"  --pid PID           reload: the process to reload (see reload)\n"
		"  --vip ADDR:PORT     lookup: the address clients connect to (see lookup)\n"
		"  --force             upgrade: send it even though -c FILE has errors, or\n"
		"                      its table_memory the weights set at run time pass\n"
		"                      (the running hashlb may have been started on\n"
		"                      another file)\n"
		"  -t, --timeout S     give up on an endpoint that accepts no connection\n"
		"                      within S seconds, or whose answer has not come\n"
		"                      whole S seconds after the request (default 30),\n"
		"                      exit 1; for upgrade, the wait for its outcome\n"
		"                      (default 70). An answer over 1 GiB is given up\n"
		"                      too (hashlb's largest, a /metrics of 65,535\n"
		"                      backends, is about 350 MB)\n"
		"  -h, --help          show this text\n"
		"\n"
		"EXIT STATUS\n"
		"  0 on success, 1 if the endpoint refused the command (the reason is\n"
		"  printed: the endpoint judges the names and values, a service, a\n"
		"  backend, a state, a weight) or cannot be reached,\n");
	fputs(CLI_EXIT_USAGE_HELP, f);
	fprintf(f,
		"  Among them: an option that the command does not take (--json with\n"
		"  metrics; --service with status, metrics, reload or upgrade; --vip\n"
		"  with any command but lookup; --pid with any but reload; --force\n"
		"  with any but upgrade), a clients N that is no number 1..1000.\n"
		"\n" CLI_ERRORS_HELP "EXAMPLES\n"
		"  hashlb ctl status\n"
		"  hashlb ctl set web-2 drain\n"
		"  hashlb ctl close web-2           # an hour later: the rest of its clients\n"
		"  hashlb ctl upgrade               # after installing a new hashlb\n"
		"  hashlb ctl -c /etc/hashlb/hashlb.yaml reload --pid $MAINPID\n"
		"                                   # a unit's ExecReload=\n"
		"  hashlb ctl lookup 203.0.113.7 198.51.100.20:4242\n"
		"  hashlb ctl --admin unix:/run/hashlb.sock --json table web\n"
		"  curl -s 127.0.0.1:9901/metrics\n",
		"ctl", "-t or --timeout", CLI_ERRORS_CONFIG_LIST, "ctl");
}

/* CLOCK_MONOTONIC in ms: the waits are on the clock, not counted per read or per poll */
static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Connect <fd> to <addr> within ctl_wait_s() (a write to it waits as long): 0 or -errno,
 * -ETIMEDOUT when nothing accepted in time. An endpoint whose control thread is stuck leaves
 * connections in its listen queue; once that is full, a connect to a Unix socket blocks until
 * one is accepted (forever, without a timeout), and one over TCP until its SYNs give up.
 */
static int ctl_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct timeval tv = { .tv_sec = ctl_wait_s() };

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, addr, len) == 0)
		return 0;
	/* the timeout ran out: EAGAIN on a Unix socket, EINPROGRESS over TCP */
	return errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT : -errno;
}

/*
 * HOST:PORT with a name (localhost:9901), as hashlb_name_addr_parse() split it for
 * cli_admin_parse() (so a port 1..65535: getaddrinfo took "99999" as 34463, and "::1:9901",
 * an IPv6 address without its brackets): the first of its addresses that accepts a
 * connection, else the first. A name may give ::1 before 127.0.0.1 while hashlb listens on
 * only one of them, as curl finds by trying each. -EINVAL if it does not resolve.
 */
/* ctl_addr_resolve(): a name's addresses, none of which accepted a connection, each with
 * why ("[::1]:9901: Connection refused, 127.0.0.1:9901: ..."); empty otherwise. */
static char ctl_tried[512], ctl_tried_name[HASHLB_HOST_MAX + 8];

static int ctl_addr_resolve(const char *host, uint16_t port, struct sockaddr_storage *ss,
			    socklen_t *len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res, *ai;
	char serv[6], name[INET6_ADDRSTRLEN + 8];
	size_t o = 0;
	int n = 0;

	snprintf(serv, sizeof(serv), "%u", port);
	if (getaddrinfo(host, serv, &hints, &res) != 0)
		return -EINVAL;
	for (ai = res; ai; ai = ai->ai_next, n++) {
		int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int r = fd < 0 ? -errno : ctl_connect(fd, ai->ai_addr, ai->ai_addrlen);

		if (fd >= 0)
			close(fd);
		if (r == 0)
			break;
		hashlb_addr_format((const struct sockaddr_storage *)ai->ai_addr, name,
				   sizeof(name));
		if (o < sizeof(ctl_tried))
			o += (size_t)snprintf(ctl_tried + o, sizeof(ctl_tried) - o, "%s%s: %s",
					      o ? ", " : "", name,
					      r == -ETIMEDOUT ? "no connection accepted in time"
							      : strerror(-r));
	}
	/* each refused: the error names them all, not the first alone */
	if (!ai && n > 1)
		snprintf(ctl_tried_name, sizeof(ctl_tried_name), "%s:%u", host, port);
	else
		ctl_tried[0] = '\0';
	ai = ai ? ai : res;
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* Percent-encode <s> onto the end of <q> (size <size>). */
static void urlenc(char *q, size_t size, const char *s)
{
	size_t o = strlen(q);

	for (; *s && o + 4 < size; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.')
			q[o++] = (char)c;
		else
			o += (size_t)snprintf(q + o, size - o, "%%%02X", c);
	}
	q[o] = '\0';
}

static void param(char *q, size_t size, const char *name, const char *value)
{
	size_t o = strlen(q);

	if (!value)
		return;
	snprintf(q + o, size - o, "%s%s=", o ? "&" : "", name);
	urlenc(q, size, value);
}

/* The admin address <ss> as written: ADDR:PORT, [ADDR]:PORT or unix:PATH. */
static const char *admin_name(const struct sockaddr_storage *ss, char *buf, size_t size)
{
	if (ss->ss_family == AF_UNIX)
		snprintf(buf, size, "unix:%s", ((const struct sockaddr_un *)ss)->sun_path);
	else
		hashlb_addr_format(ss, buf, size);
	return buf;
}

/*
 * The "\r\n\r\n" that ends the head at <p> (<n> bytes on), or NULL. By memchr(), which
 * reads no further than what it finds: a sanitizer's strstr() and memmem() check the whole
 * rest of the buffer at each call, and the ASan build skipping a gigabyte of 100 Continue
 * (41 million heads) ran past 2 minutes.
 */
static char *head_end(char *p, size_t n)
{
	for (char *end = p + n, *r; (r = memchr(p, '\r', (size_t)(end - p))); p = r + 1)
		if (end - r >= 4 && !memcmp(r, "\r\n\r\n", 4))
			return r;
	return NULL;
}

/*
 * The answer in <buf> (<*got> bytes, NUL-terminated) as its final one: the 1xx answers before
 * it (100 Continue), which RFC 9110 has every client read past, dropped and the final one
 * moved to the start of <buf>. hashlb sends none; a proxy in front of it may.
 */
static void ctl_interim_skip(char *buf, size_t *got)
{
	char *p = buf, *end;
	size_t off = 0;

	/* p[8] and p[9] read once <got> has them: past its NUL, malloc's bytes (valgrind:
	 * "depends on uninitialised value" for an answer of "HTTP/1." alone). Skipped by
	 * offset, the final answer moved once: moved after each, an endpoint sending 100
	 * Continue without end (1 GiB of them, 41 million) kept ctl moving the rest of the
	 * gigabyte for each, for hours, past its --timeout. */
	while (*got - off > 9 && !strncmp(p, "HTTP/1.", 7) && p[8] == ' ' && p[9] == '1' &&
	       strncmp(p + 9, "101", 3) && (end = head_end(p, *got - off))) {
		off = (size_t)(end + 4 - buf);
		p = buf + off;
	}
	if (off) {
		memmove(buf, p, *got - off + 1);
		*got -= off;
	}
}

/*
 * The body at <body> (<len> bytes, to the end of the answer) sent chunked, decoded in place and
 * NUL-terminated: its length, or -1 if it ends before its last chunk (the connection closed
 * as it came) or is no chunked body. hashlb gives each answer a Content-Length; a proxy in
 * front of it may send it on chunked.
 */
static ssize_t ctl_chunked_decode(char *body, size_t len)
{
	char *r = body, *w = body, *end = body + len;

	for (;;) {
		char *eol = memmem(r, (size_t)(end - r), "\r\n", 2), *x;
		unsigned long long n;

		if (!eol || !isxdigit((unsigned char)*r))
			return -1;
		errno = 0;
		n = strtoull(r, &x, 16);
		if (errno || (x != eol && *x != ';')) /* ";name=value": an extension, ignored */
			return -1;
		r = eol + 2;
		if (!n) /* the last chunk: the trailer fields after it are not read */
			break;
		/* n + 2 is not formed: a size near 2^64 wrapped it past the check, and the
		 * copy ran over the heap */
		if (end - r < 2 || n > (unsigned long long)(end - r) - 2 ||
		    memcmp(r + n, "\r\n", 2))
			return -1;
		memmove(w, r, (size_t)n);
		w += n;
		r += n + 2;
	}
	*w = '\0';
	return w - body;
}

/*
 * One request: its status in *<ret_status> and its body in *<ret_buf> (the
 * whole answer, malloc'd; *<ret_body> points into it). Returns 0, or -errno
 * (said on stderr unless <quiet>): that of the connect or the write when the
 * endpoint cannot be reached or the request not sent whole (nothing was asked);
 * once it was sent, -ETIMEDOUT when the answer is not whole in time, -EMSGSIZE
 * when it is too long, -EPROTO when it is not HTTP or its Content-Length cannot
 * be read (no hashlb answers so), and -ENODATA when it ended before it was whole
 * (a part of an HTTP answer: the connection closed or reset), -ENOMSG when it
 * ended before its first byte: whether the request was acted on is then unknown.
 */
static int ctl_fetch(const struct sockaddr_storage *ss, socklen_t len, const char *method,
		     const char *path, const char *query, bool quiet, int *ret_status,
		     char **ret_buf, char **ret_body)
{
	size_t got = 0, cap = 65536, have;
	unsigned long long want;
	char req[2048], name[160], *buf, *body, *te;
	const char *bad_length;
	int fd, status = 0, r;
	ssize_t plain;
	bool timed_out = false, too_long = false, has_length;

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	r = fd < 0 ? -errno : ctl_connect(fd, (const struct sockaddr *)ss, len);
	if (r < 0) {
		if (!quiet && ctl_tried[0])
			cli_error("cannot reach the admin endpoint at %s, at none of its "
				  "addresses: %s\n",
				  ctl_tried_name, ctl_tried);
		else if (!quiet && r == -ETIMEDOUT)
			cli_error(
				"cannot reach the admin endpoint at %s: it accepted no connection "
				"within %u s (is hashlb stuck, its listen queue full?)\n",
				admin_name(ss, name, sizeof(name)), ctl_wait_s());
		else if (!quiet) {
			/* nothing listens there: refused, or a Unix socket's path gone (a
			 * key moved to a new path, the old one served still). Not EACCES,
			 * a timeout: something is there, at the address given */
			bool refused =
				r == -ECONNREFUSED || (r == -ENOENT && ss->ss_family == AF_UNIX);
			/* -c FILE's admin key: one a reload changed is not served yet */
			const char *file = refused ? ctl_admin_from_file : NULL;

			cli_error("cannot reach the admin endpoint at %s: %s%s%s%s%s\n",
				  admin_name(ss, name, sizeof(name)), strerror(-r),
				  refused && ctl_admin_default
					  ? " (the default address: for a hashlb whose config sets "
					    "admin: elsewhere, give -c FILE or --admin ADDR)"
					  : "",
				  file ? (ctl_admin_file_default ? " (the default address, " : " (")
				       : "",
				  file ? cli_path(file) : "",
				  /* true whether a hashlb runs or not: where none runs at all,
				 * that is the answer, not a key changed */
				  !file ? ""
				  /* not "FILE's admin key", which it does not write */
				  : ctl_admin_file_default
					  ? " writing no admin key: is hashlb running? One started "
					    "before that changed serves its old address still, "
					    "which a reload does not move: --admin ADDR reaches it)"
					  : "'s admin key: is hashlb running? One started before "
					    "that key changed serves its old address still, which "
					    "a reload does not move: --admin ADDR reaches it)");
		}
		if (fd >= 0)
			close(fd);
		return r;
	}
	snprintf(req, sizeof(req),
		 "%s %s%s%s HTTP/1.1\r\nHost: hashlb\r\nUser-Agent: hashlb-ctl\r\n"
		 "Content-Length: 0\r\nConnection: close\r\n\r\n",
		 method, path, *query ? "?" : "", query);
	errno = 0;
	if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
		r = errno ? -errno : -EIO; /* a short write sets none */
		if (!quiet)
			cli_error("write: %s\n", strerror(-r));
		close(fd);
		return r;
	}
	buf = malloc(cap + 1);
	for (long end = now_ms() + ctl_wait_s() * 1000L;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long left = end - now_ms();
		ssize_t n;

		if (!buf) {
			close(fd);
			cli_error("out of memory\n");
			return -ENOMEM;
		}
		if (got == cap) {
			/* one byte past the cap tells an answer too long */
			size_t more =
				cap * 2 < CTL_ANSWER_MAX + 1ul ? cap * 2 : CTL_ANSWER_MAX + 1ul;
			char *nb = realloc(buf, more + 1);

			if (!nb) {
				free(buf);
				buf = NULL;
				continue;
			}
			buf = nb;
			cap = more;
		}
		/* the whole answer within the time, not each read: a trickle ends too */
		if (left <= 0 || (n = poll(&p, 1, (int)left)) == 0) {
			timed_out = true;
			break;
		}
		if (n > 0)
			n = read(fd, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got > CTL_ANSWER_MAX) {
			too_long = true;
			break;
		}
	}
	close(fd);
	buf[got] = '\0';
	ctl_interim_skip(buf, &got);
	body = strstr(buf, "\r\n\r\n");
	if (timed_out || too_long || strncmp(buf, "HTTP/1.", 7) || !body ||
	    sscanf(buf + 8, " %d", &status) != 1) {
		if (!quiet && too_long)
			cli_error("the admin endpoint at %s answers more than %u MiB, more than "
				  "hashlb does: is it hashlb?\n",
				  admin_name(ss, name, sizeof(name)), CTL_ANSWER_MAX >> 20);
		else if (!quiet && timed_out)
			cli_error("no %sanswer from the admin endpoint at %s within %u s\n",
				  got ? "whole " : "", admin_name(ss, name, sizeof(name)),
				  ctl_wait_s());
		else if (!quiet && !got)
			cli_error("the admin endpoint at %s closed the connection without "
				  "answering\n",
				  admin_name(ss, name, sizeof(name)));
		else if (!quiet)
			cli_error("no valid answer from the admin endpoint at %s\n",
				  admin_name(ss, name, sizeof(name)));
		/* what came is the start of an HTTP answer, or nothing: cut short */
		r = timed_out					  ? -ETIMEDOUT
		    : too_long					  ? -EMSGSIZE
		    : !got					  ? -ENOMSG
		    : !strncmp(buf, "HTTP/1.", got < 7 ? got : 7) ? -ENODATA
								  : -EPROTO;
		free(buf);
		return r;
	}
	te = strcasestr(buf, "\r\ntransfer-encoding:");
	if (te && te < body) {
		/* chunked, its length said by its chunks (a Content-Length beside it is not) */
		te += 20;
		te += strspn(te, " \t");
		plain = strncasecmp(te, "chunked", 7) || te[7 + strspn(te + 7, " \t")] != '\r'
				? -1
				: ctl_chunked_decode(body + 4, got - (size_t)(body + 4 - buf));
		if (plain < 0) {
			if (!quiet)
				cli_error("the admin endpoint at %s closed its answer before its "
					  "last chunk, or sent one ctl does not read (a "
					  "Transfer-Encoding other than chunked)\n",
					  admin_name(ss, name, sizeof(name)));
			free(buf);
			return -ENODATA;
		}
	} else if ((bad_length = hlb_answer_length(buf, body, &has_length, &want))) {
		/* "-5" was read as 2^64 - 5 (the answer then said cut short), and of two
		 * different lengths the first was taken (RFC 9112 6.3: its length unknown) */
		if (!quiet)
			cli_error("the admin endpoint at %s answered with %s, which hashlb never "
				  "sends: is it hashlb?\n",
				  admin_name(ss, name, sizeof(name)), bad_length);
		free(buf);
		return -EPROTO;
	} else if (hlb_answer_cut(buf, body, got, &have, &want)) {
		if (!quiet)
			cli_error(
				"the admin endpoint at %s closed its answer after %zu of its %llu "
				"bytes (did hashlb stop?)\n",
				admin_name(ss, name, sizeof(name)), have, want);
		free(buf);
		return -ENODATA;
	}
	*ret_status = status;
	*ret_buf = buf;
	*ret_body = body + 4;
	return 0;
}

/*
 * The message of an answer {"error":"WHAT"...} into <buf> (<size> bytes), its
 * string's escapes undone (a \\uXXXX beyond ASCII as '?'); NULL if <body> is
 * not one.
 */
static const char *json_error(const char *body, char *buf, size_t size)
{
	size_t o = 0;
	const char *s;

	if (strncmp(body, "{\"error\":\"", 10))
		return NULL;
	for (s = body + 10; *s && *s != '"' && o + 1 < size; s++) {
		char c = *s;

		if (c == '\\' && s[1]) {
			c = *++s;
			if (c == 'n')
				c = ' ';
			else if (c == 'u') {
				unsigned cp = 0;

				if (sscanf(s + 1, "%4x", &cp) != 1 || strlen(s + 1) < 4)
					return NULL;
				s += 4;
				c = cp >= 0x20 && cp < 0x7f ? (char)cp : '?';
			}
		}
		buf[o++] = c;
	}
	if (*s != '"')
		return NULL;
	buf[o] = '\0';
	return buf;
}

/*
 * Whether the refusal <buf> (the answer, its body at <body>) has nothing to say but its status
 * (a proxy in front of hashlb, a server that is not hashlb): if so, its status line is said on
 * stderr, as nothing else would tell why ctl failed.
 */
static bool ctl_say_status(const char *buf, const char *body)
{
	const char *code = strchr(buf, ' '), *eol = strchr(buf, '\r');

	if (body[strspn(body, " \t\r\n")] || !code || !eol || code > eol)
		return false;
	code++;
	cli_error("the admin endpoint answered %.*s, with no reason\n", (int)(eol - code), code);
	return true;
}

/*
 * <body>, an error answer said as the endpoint sent it, to stderr: on the journal (hashlb ctl
 * run by a unit's ExecReload=) each of its lines an error, as journald takes a priority prefix
 * for the line it starts alone. A reload's refusal is two: FILE:LINE:COL: error: WHAT, then
 * "reload refused, the running config keeps serving", which landed at info.
 */
static void say_error_body(const char *body)
{
	const char *prefix = hlb_log_journal_prefix(HLB_LOG_ERROR);

	while (*body) {
		size_t n = strcspn(body, "\n");

		fprintf(stderr, "%s%.*s\n", prefix, (int)n, body);
		body += n + (body[n] == '\n');
	}
}

/*
 * An answer <status> <body> (in <buf>, whole): the body to stdout on 2xx, to stderr otherwise
 * (the endpoint's "error: WHAT" as every error line of hashlb ctl; an error it
 * answers in JSON whatever the format, as it does when it refuses a request
 * before reading what it asks (busy, malformed), said the same way unless
 * <json>; a refusal with no body, its status line). Returns the exit status.
 */
static int ctl_answer(int status, const char *buf, const char *body, bool json)
{
	char msg[1024];

	if (status / 100 != 2 && ctl_say_status(buf, body))
		return 1;
	if (status / 100 == 2)
		fputs(body, stdout);
	else if (strncmp(body, "error: ", 7) == 0)
		cli_error("%s", body + 7);
	else if (!json && json_error(body, msg, sizeof(msg)))
		cli_error("%s\n", msg);
	else /* JSON, or a reload's FILE:LINE:COL: error: WHAT: an error on the journal too */
		say_error_body(body);
	return status / 100 == 2 ? 0 : 1;
}

/* One request, its answer printed by ctl_answer(): the exit status. */
static int ctl_request(const struct sockaddr_storage *ss, socklen_t len, const char *method,
		       const char *path, const char *query, bool json)
{
	char *buf, *body;
	int status, ret;

	if (ctl_fetch(ss, len, method, path, query, false, &status, &buf, &body) < 0)
		return 1;
	ret = ctl_answer(status, buf, body, json);
	free(buf);
	return ret;
}

/*
 * Whether paths <a> and <b> name one file (the endpoint's is absolute, -c FILE as written):
 * 1 if they do, 0 if not, -errno when one cannot be stat'ed (not known).
 */
static int same_file(const char *a, const char *b)
{
	struct stat x, y;

	if (stat(a, &x) < 0 || stat(b, &y) < 0)
		return -errno;
	return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/*
 * After a reload's text answer <body> ("reloaded PATH (N reloads ok)", "1 reload ok" for
 * one): a note when PATH, the file the running hashlb was started with and reloaded, is not
 * <config>, the -c FILE ctl took the admin address from. "hashlb ctl -c new.yaml reload"
 * reloads the running config, not new.yaml, which only the answer's first words told. A
 * relative PATH (a hashlb from before run named its file absolute), or one that ctl cannot
 * stat (another mount namespace), says nothing.
 */
static void reload_note_other_file(const char *body, const char *config)
{
	const char *p = body + strlen("reloaded "), *end = strchr(body, '\n');
	char path[PATH_MAX];

	if (strncmp(body, "reloaded /", strlen("reloaded /")) || !end)
		return;
	while (end > p && strncmp(end, " (", 2))
		end--;
	if (end == p || (size_t)(end - p) >= sizeof(path))
		return;
	memcpy(path, p, (size_t)(end - p));
	path[end - p] = '\0';
	if (same_file(path, config) != 0)
		return; /* the same file, or not known */
	fflush(stdout); /* after the answer, in a log that takes both (2>&1, the journal) */
	cli_notice("note: the running hashlb reloaded the file it was started with, %s, not %s "
		   "(-c takes only the admin address from FILE)\n",
		   path, cli_path(config));
}

/*
 * -c FILE's error, which ctl prints before it asks (FILE:LINE:COL: error: WHAT, then <note>,
 * "FILE has errors (above), ..."), held by a reload until its answer: the endpoint's refusal
 * of the same file says the same error (the text, or the JSON, with its position), which
 * then is printed once, not twice.
 */
struct ctl_file_error {
	struct hashlb_error err;
	struct hashlb_error_list list; /* each of FILE's errors, as hashlb check says them */
	char note[512];
	bool held;
};

static void file_error_print(const struct ctl_file_error *fe)
{
	cli_print_config_errors(&fe->err, &fe->list);
	cli_notice("%s", fe->note);
}

/* <fe> printed now if held: ctl stops before the reload's answer */
static void file_error_flush(struct ctl_file_error *fe)
{
	if (fe->held)
		file_error_print(fe);
	fe->held = false;
}

/*
 * The file named by the refusal <body> (text or <json>) just before <at>, where its position
 * is, into <path> (PATH_MAX bytes): "PATH:LINE:COL: error: ..." or {"file":"PATH","line":...}.
 * false if there is none, or a JSON escape other than \" \\ \/ (then not compared).
 */
static bool answer_file(const char *body, const char *at, bool json, char *path)
{
	const char *p = at;
	size_t n = 0;

	if (!json) {
		while (p > body && p[-1] != '\n')
			p--;
		if (p == at || (size_t)(at - p) >= PATH_MAX)
			return false;
		memcpy(path, p, (size_t)(at - p));
		path[at - p] = '\0';
		return true;
	}
	p = strstr(body, "\"file\":\"");
	if (!p || p > at)
		return false;
	for (p += strlen("\"file\":\""); *p && *p != '"' && n + 1 < PATH_MAX; p++) {
		if (*p == '\\' && (!*++p || !strchr("\"\\/", *p)))
			return false;
		path[n++] = *p;
	}
	path[n] = '\0';
	return n && p + 2 == at && !strncmp(p, "\",", 2);
}

/*
 * Whether the endpoint's refusal <body> (text or <json>) says <err> of -c <config>: at its
 * position and in its words, of the same file. Another file's error at the same line and
 * column (the running hashlb's own file refused, not <config>) is not <config>'s, which is
 * then said after the answer rather than lost; nor is another error at that place (the file
 * changed between the two reads). In JSON the words were not compared: the message is
 * escaped as the endpoint escapes it (hlb_buf_json_str()) and compared whole.
 */
static bool answer_says(const char *body, bool json, const struct hashlb_error *err,
			const char *config)
{
	struct hlb_buf at = { 0 };
	char path[PATH_MAX];
	const char *m = NULL;
	bool says;

	if (json) {
		hlb_buf_printf(&at, "\"line\":%d,\"column\":%d,\"message\":", err->line,
			       err->column);
		hlb_buf_json_str(&at, err->msg);
		hlb_buf_puts(&at, "}");
	} else {
		hlb_buf_printf(&at, ":%d:%d: error: %s\n", err->line, err->column, err->msg);
	}
	if (err->line > 0 && !at.oom && at.p)
		m = strstr(body, at.p);
	says = m && config && answer_file(body, m, json, path) && same_file(path, config) > 0;
	hlb_buf_free(&at);
	return says;
}

/* ctl reload (without --pid): POST /reload, its answer printed by ctl_answer(), and
 * reload_note_other_file() after it when -c gave <config> (NULL: not given); <fe> held
 * (NULL: none), printed after the answer unless it says the same error. */
static int ctl_reload(const struct sockaddr_storage *ss, socklen_t len, const char *query,
		      bool json, const char *config, const struct ctl_file_error *fe)
{
	char *buf, *body;
	int status, ret;

	if (ctl_fetch(ss, len, "POST", "/reload", query, false, &status, &buf, &body) < 0) {
		if (fe)
			file_error_print(fe);
		return 1;
	}
	ret = ctl_answer(status, buf, body, json);
	if (config && !json && status / 100 == 2)
		reload_note_other_file(body, config);
	if (fe && (status / 100 == 2 || !answer_says(body, json, &fe->err, config))) {
		fflush(stdout);
		file_error_print(fe);
	}
	free(buf);
	return ret;
}

/*
 * ctl lookup: GET /lookup?<query>&client=C for each client of <clients> (<n>),
 * each answer printed as ctl_request() prints it; with <json>, the answers
 * (objects) in one array, as hashlb lookup --json prints them: one JSON
 * document, not one per line. A refused client is said on stderr (exit 1),
 * and the array holds the others' answers (empty if every one was refused); an
 * endpoint that cannot be reached or does not answer ends it there.
 */
static int ctl_lookup(const struct sockaddr_storage *ss, socklen_t len, char *q, size_t size,
		      char **clients, int n, bool json)
{
	size_t base = strlen(q);
	bool any = false, answered = false, refused = false;
	int ret = 0;

	for (int i = 0; i < n; i++) {
		char *buf, *body;
		int status;

		/* a list in one argument: said here, as the endpoint says a short one, before
		 * a long one is refused for its length alone */
		if (strchr(clients[i], ',')) {
			cli_error("client '%.64s%s' is not an address: give ADDR, ADDR:PORT or "
				  "[IPV6]:PORT (one client per argument)\n",
				  clients[i], strlen(clients[i]) > 64 ? "..." : "");
			ret = 1;
			refused = true;
			continue;
		}
		q[base] = '\0';
		param(q, size, "client", clients[i]);
		/* not reached, or no answer: the next clients' requests would fail
		 * alike, each said again, each after its own timeout */
		if (ctl_fetch(ss, len, "GET", "/lookup", q, false, &status, &buf, &body) < 0) {
			ret = 1;
			refused = false; /* no answer: no document */
			break;
		}
		answered = true;
		if (json && status / 100 == 2) {
			size_t end = strlen(body);

			while (end && body[end - 1] == '\n')
				end--;
			printf("%s%.*s", any ? "," : "[", (int)end, body);
			any = true;
		} else {
			ret |= ctl_answer(status, buf, body, json);
		}
		free(buf);
	}
	if (any)
		printf("]\n");
	else if (json && (answered || refused))
		printf("[]\n"); /* every client refused: still one JSON document */
	return ret;
}

/* The integer after "<key>": in <json>, or -1. */
static long json_int(const char *json, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(json, pat);
	return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

static int carried_cmp(const void *x, const void *y)
{
	const struct hlb_handover_set *a = x, *b = y;

	return hlb_name_pair_cmp(a->svc, a->name, b->svc, b->name);
}

/* The settings of <text>'s "set" lines that hold a weight set at run time
 * (hlb_handover_weight_set()), read as the new process reads them (hlb_handover_set_parse()),
 * sorted; their count in *<ret_n>. Those alone: a copy of each line is five times its size, and
 * a hashlb of many backends in slow start or down sends one for each (kept, they could pass
 * the memory there is, and the lines after those read be left unchecked). */
static struct hlb_handover_set *carried_parse(const char *text, uint32_t *ret_n)
{
	struct hlb_handover_set *v = NULL;
	size_t cap = 0, n = 0;

	for (const char *l = text; l && *l;) {
		char line[HLB_HANDOVER_LINE_MAX + 1];
		struct hlb_handover_set set;

		if (!hlb_handover_next_line(&l, line) || hlb_handover_set_parse(line, &set) < 0 ||
		    !hlb_handover_weight_set(&set.s))
			continue;
		if (hlb_grow((void **)&v, &cap, n + 1, sizeof(*v), 16) < 0)
			break; /* those read so far */
		v[n++] = set;
	}
	if (n)
		qsort(v, n, sizeof(*v), carried_cmp);
	*ret_n = (uint32_t)n;
	return v;
}

/* The services of <cfg>, each with the weights of <v> (<n> long, sorted) that the new process
 * carries over it, for hlb_control_table_memory(). */
struct carried {
	const struct hashlb_config *cfg;
	const struct hlb_handover_set *v;
	uint32_t n;
};

/* hashlb_service_cfg_weights_bytes_max_fn()'s weight of backend <j> of <s>: the one the new
 * process carries over it, else the config's */
static uint32_t carried_weight(void *arg, const struct hashlb_service_cfg *s, uint32_t j)
{
	const struct carried *c = arg;
	const struct hlb_handover_set *h;
	struct hlb_handover_set key;

	snprintf(key.svc, sizeof(key.svc), "%s", s->name);
	snprintf(key.name, sizeof(key.name), "%s", s->backends[j].name);
	h = bsearch(&key, c->v, c->n, sizeof(*c->v), carried_cmp);
	if (h && hlb_handover_carries(&h->s, s, &s->backends[j]) & HLB_HANDOVER_CARRY_WEIGHT)
		return h->s.w;
	return s->backends[j].weight;
}

static uint64_t carried_bytes(void *arg, uint32_t i, const struct hashlb_service_cfg **ret_s)
{
	const struct carried *c = arg;

	*ret_s = &c->cfg->services[i];
	return hashlb_service_cfg_weights_bytes_max_fn(*ret_s, carried_weight, arg);
}

/*
 * ctl upgrade's look at the weights set at run time (hashlb ctl set) that the new process
 * takes over: the "set" lines of GET /sockets?only=settings, what it reads (read only: no
 * socket sent, nothing logged of a handover; a hashlb of before, which refuses only=, is
 * asked as before: its sockets sent, dropped here unread, and that logged there), each
 * carried where the new process carries it (hlb_handover_carries(): <cfg> leaves the weight
 * as the running config had it, the rule of a reload). -E2BIG with <err> said as the new
 * process says it (at table_memory, or at the first service past it for the default) if
 * <cfg>'s tables with them pass its table_memory: it would stop, the old one serving on, and
 * the upgrade fail after the wait. 0 otherwise, and when they cannot be read (nothing
 * carried, the endpoint busy): the new process checks them all the same.
 */
static int upgrade_weights_fit(const struct sockaddr_storage *ss, socklen_t len,
			       const struct hashlb_config *cfg, struct hashlb_error *err)
{
	struct hlb_handover_set *v;
	char *buf, *body;
	uint64_t bytes;
	uint32_t n = 0;
	int status, ret = 0;

	if (!cfg->table_memory || ctl_fetch(ss, len, "GET", "/sockets", "format=text&only=settings",
					    true, &status, &buf, &body) < 0)
		return 0;
	if (status == 400 && strstr(body, "unknown parameter 'only'")) {
		free(buf);
		if (ctl_fetch(ss, len, "GET", "/sockets", "format=text", true, &status, &buf,
			      &body) < 0)
			return 0;
	}
	v = status == 200 ? carried_parse(body, &n) : NULL;
	free(buf);
	/* as the new process counts them and says it (the daemon's rule, run time's weights
	 * those it takes over), at the first service past the cap (a weight lowered at run time
	 * leaves room for one raised elsewhere); short of memory here, no check: the new
	 * process checks all the same */
	if (n)
		ret = hlb_control_table_memory(cfg, cfg->n_services, HASHLB_TABLE_MEMORY_TAKEN_OVER,
					       carried_bytes, &(struct carried){ cfg, v, n },
					       &bytes, err);
	free(v);
	return ret == -ENOMEM ? 0 : ret;
}

#define UPGRADE_WAIT_MS 70000 /* the daemon gives the new process 60 s */

/* the old endpoint gone, the new process still up this long: it took over */
#define UPGRADE_GONE_MS 2000

/*
 * ctl upgrade: POST /upgrade, then GET /status until the new process
 * answers (upgraded) or the old one says the upgrade failed. The endpoint
 * may refuse a connection for a moment while it changes hands: retried.
 */
static int ctl_upgrade(const struct sockaddr_storage *ss, socklen_t len, bool json)
{
	long wait_ms = ctl_timeout_s ? ctl_timeout_s * 1000L : UPGRADE_WAIT_MS;
	long old_pid, new_pid, pid, upgrade_pid;
	char *buf, *body, *p;
	int status, r;

	if (ctl_fetch(ss, len, "POST", "/upgrade", "", false, &status, &buf, &body) < 0)
		return 1;
	if (status != 202) {
		const char *e = json ? NULL : strstr(body, "\"error\":\"");
		const char *end = e ? strrchr(e + 9, '"') : NULL;

		/* the reason as the other commands print it, unless --json */
		if (e && end)
			cli_error("%.*s\n", (int)(end - e - 9), e + 9);
		else if (!ctl_say_status(buf, body))
			say_error_body(body);
		free(buf);
		return 1;
	}
	old_pid = json_int(body, "pid");
	new_pid = json_int(body, "new_pid");
	free(buf);
	if (old_pid <= 0 || new_pid <= 0) {
		cli_error("the admin endpoint's answer names no processes\n");
		return 1;
	}
	for (long start = now_ms(), waited = 0, gone_since = -1; waited < wait_ms;
	     waited = now_ms() - start) {
		usleep(100 * 1000);
		r = ctl_fetch(ss, len, "GET", "/status", "", true, &status, &buf, &body);
		if (r == -ETIMEDOUT) {
			/* something is there and does not answer (a stuck control thread):
			 * not gone, and not upgraded; the time it took counts */
			gone_since = -1;
			continue;
		}
		if (r < 0) {
			waited = now_ms() - start;
			/* Nobody answers here: the old process closed its endpoint as it
			 * handed over, and the new one listens elsewhere (admin port 0, or
			 * a new admin address in the config), or not yet. The new process
			 * staying up is then the sign (a stopped upgrade stops it). */
			if (gone_since < 0)
				gone_since = waited;
			if (kill((pid_t)new_pid, 0) < 0 && errno == ESRCH) {
				cli_error("upgrade failed: pid %ld exited and nothing answers at "
					  "the admin address: see hashlb's log\n",
					  new_pid);
				return 1;
			}
			if (waited - gone_since >= UPGRADE_GONE_MS) {
				if (json)
					printf("{\"upgraded\":true,\"pid\":%ld,\"new_pid\":%ld,"
					       "\"answers_here\":false}\n",
					       old_pid, new_pid);
				else
					printf("upgraded: pid %ld handed over to pid %ld, which runs; "
					       "it does not answer at this admin address (admin port "
					       "0, or a new one): its log names it\n",
					       old_pid, new_pid);
				return 0;
			}
			continue;
		}
		gone_since = -1;
		pid = json_int(body, "pid");
		p = strstr(body, "\"upgrade\":{");
		upgrade_pid = p ? json_int(p, "new_pid") : -1;
		if (pid == new_pid) {
			if (json)
				printf("{\"upgraded\":true,\"pid\":%ld,\"new_pid\":%ld,"
				       "\"answers_here\":true}\n",
				       old_pid, new_pid);
			else
				printf("upgraded: pid %ld handed over to pid %ld, which serves; pid "
				       "%ld drains\n",
				       old_pid, new_pid, old_pid);
			free(buf);
			return 0;
		}
		if (pid == old_pid && p && upgrade_pid == new_pid &&
		    strstr(p, "\"state\":\"failed\"")) {
			const char *e = strstr(p, "\"error\":\"");
			const char *end = e ? strchr(e + 9, '"') : NULL;

			cli_error("upgrade failed: the new hashlb (pid %ld) %.*s; pid %ld goes on "
				  "serving (its log, or journalctl, says why)\n",
				  new_pid, e && end ? (int)(end - e - 9) : 0, e ? e + 9 : "",
				  old_pid);
			free(buf);
			return 1;
		}
		free(buf);
	}
	cli_error("no answer from pid %ld in %ld s: see hashlb's log\n", new_pid, wait_ms / 1000);
	return 1;
}

/*
 * Whether pid <pid>, whose /proc/N/exe reads <exe> ("" if it cannot be read), runs this ctl's
 * own executable: the same file, or (replaced on disk since it started, by an upgrade: "PATH
 * (deleted)") one at the same path. A hashlb installed under another name, /usr/local/sbin/lb,
 * is run and reloaded (the unit's ExecStart= and ExecReload=) by that one file.
 */
static bool ctl_runs_own_exe(pid_t pid, const char *exe)
{
	static const char deleted[] = " (deleted)";
	char path[64], self[PATH_MAX];
	size_t len = strlen(exe), dl = sizeof(deleted) - 1;
	struct stat a, b;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (stat(path, &a) == 0 && stat("/proc/self/exe", &b) == 0 && a.st_dev == b.st_dev &&
	    a.st_ino == b.st_ino)
		return true;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0 || len <= dl || strcmp(exe + len - dl, deleted))
		return false;
	return (size_t)n == len - dl && !memcmp(exe, self, (size_t)n);
}

/*
 * Whether process <pid> has a thread named as a hashlb run's workers are ("hlb-worker0", the
 * name each sets for top -H and ps -L; /proc/N/task/T/comm, which anyone may read): a hashlb
 * run installed as a file of its own under another name, which neither its name nor this
 * ctl's executable tells (/usr/local/sbin/lb beside the packaged /usr/bin/hashlb ctl runs).
 * Not before its workers start (it still loads its config): then false.
 */
static bool ctl_has_workers(pid_t pid)
{
	char path[64], comm[32];
	struct dirent *e;
	bool found = false;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		FILE *f;
		size_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.20s/comm", (int)pid, e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		n = fread(comm, 1, sizeof(comm) - 1, f);
		fclose(f);
		comm[n] = '\0';
		found = !strncmp(comm, "hlb-worker", 10);
	}
	closedir(d);
	return found;
}

/*
 * What process <pid> runs, for ctl_sighup(), which must not signal a pid mistyped: 1 if it is
 * a hashlb run, 0 if not, -errno if its /proc entry cannot be read (-ENOENT: no such process).
 * A hashlb run is a process whose command line's command (its second word) is "run", and whose
 * executable is this ctl's (ctl_runs_own_exe(): installed under any name) or is named hashlb*
 * (an executable replaced on disk since it started, by an upgrade, reads "PATH (deleted)":
 * still its name; if it cannot be read, a process of another user, its argv[0]'s), or which
 * runs hashlb's workers (ctl_has_workers(): a copy of its own under another name). hashlb
 * steer, which a SIGHUP stops, is not one, nor another program's "run" (npm run, podman run).
 * On 0, <what> (<size> bytes) says what it runs: "EXE: ARGV..." as ps prints it, "[COMM]"
 * without a command line (a kernel thread, a process that exited).
 */
static int ctl_pid_what(pid_t pid, char *what, size_t size)
{
	/* the command line's first two words: its argv[0] may be a path as long as the kernel
	 * takes (a 512-byte buffer cut one of 700 before "run": a hashlb run refused) */
	char path[64], exe[PATH_MAX] = "", cmdline[PATH_MAX + 16], *name, *cmd;
	ssize_t n, e;
	size_t o;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	n = (ssize_t)fread(cmdline, 1, sizeof(cmdline) - 1, f);
	fclose(f);
	cmdline[n] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	e = readlink(path, exe, sizeof(exe) - 1);
	exe[e > 0 ? e : 0] = '\0';
	cmd = cmdline + strlen(cmdline) + 1;
	name = strrchr(exe[0] ? exe : cmdline, '/');
	name = name ? name + 1 : exe[0] ? exe : cmdline;
	if (n > 0 && cmd < cmdline + n && !strcmp(cmd, "run") &&
	    (!strncmp(name, "hashlb", 6) || ctl_runs_own_exe(pid, exe) || ctl_has_workers(pid)))
		return 1;
	if (n == 0) {
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		f = fopen(path, "re");
		n = f ? (ssize_t)fread(cmdline, 1, sizeof(cmdline) - 1, f) : 0;
		if (f)
			fclose(f);
		cmdline[n] = '\0';
		snprintf(what, size, "[%.*s]", (int)strcspn(cmdline, "\n"), cmdline);
		return 0;
	}
	snprintf(what, size, "%s%s", exe, exe[0] ? ": " : "");
	/* the arguments, a space between them, a control character as '?' */
	for (ssize_t i = 0; i < n && (o = strlen(what)) + 1 < size; i++) {
		unsigned char c = (unsigned char)cmdline[i];

		what[o] = !c ? (i + 1 < n ? ' ' : '\0') : c < 0x20 || c == 0x7f ? '?' : (char)c;
		what[o + 1] = '\0';
	}
	return 0;
}

/*
 * ctl reload --pid: the reload of pid <pid> by SIGHUP, <why> (one line, no newline) it is not
 * through the admin endpoint; said on stderr, as the outcome is then only in pid <pid>'s log.
 * Only if <pid> is a hashlb run (ctl_pid_what()): a mistyped pid would have SIGHUP end or
 * reload whatever else runs there. Signalled through a pidfd, opened before that is looked
 * at, so that a pid reused in between gets nothing. The exit status: 0 once sent, 1 if it
 * cannot be, or if <pid> is not a hashlb run. (A -c FILE with errors, which a reload would
 * refuse, never gets here: main() sends nothing.)
 */
static int ctl_sighup(pid_t pid, const char *why, bool json)
{
	int pidfd, r;
	char what[256];

	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (pidfd < 0 && errno == ESRCH) {
		cli_error("%s; cannot send SIGHUP to pid %d: %s\n", why, (int)pid, strerror(ESRCH));
		return 1;
	}
	r = ctl_pid_what(pid, what, sizeof(what));
	if (r == -ENOENT)
		r = -ESRCH; /* it exited: no /proc entry */
	if (r <= 0) {
		if (r == 0)
			cli_error("%s; pid %d is not a hashlb run: it runs %s; nothing was sent to "
				  "it (no SIGHUP): is the pid mistyped?\n",
				  why, (int)pid, what);
		else
			cli_error("%s; cannot tell what pid %d runs (/proc/%d: %s): nothing was "
				  "sent to it (no SIGHUP)\n",
				  why, (int)pid, (int)pid, strerror(-r));
		if (pidfd >= 0)
			close(pidfd);
		return 1;
	}
	/* no pidfd (a thread's id, a kernel before 5.3): kill(2), after the same look */
	if (pidfd >= 0) {
		r = (int)syscall(SYS_pidfd_send_signal, pidfd, SIGHUP, NULL, 0);
		close(pidfd);
	} else {
		r = kill(pid, SIGHUP);
	}
	if (r < 0) {
		cli_error("%s; cannot send SIGHUP to pid %d: %s\n", why, (int)pid, strerror(errno));
		return 1;
	}
	cli_notice("%s; sent SIGHUP to pid %d instead: only its log says how the reload went\n",
		   why, (int)pid);
	if (json)
		printf("{\"signal\":\"SIGHUP\",\"pid\":%d}\n", (int)pid);
	return 0;
}

/*
 * ctl reload --pid: POST /reload?pid=<pid> (<q>, <size>: the query so far), which only pid
 * <pid>'s endpoint applies, and its outcome as ctl reload says it; SIGHUP to <pid> where no
 * endpoint of its answers: nothing listens at <ss>, or another process does (412 from
 * another hashlb, any other refusal from an older one, which takes no pid=, or from a server
 * that is no hashlb). A refusal by pid <pid> itself (422: the reload failed; 409: it is
 * stopping) fails, as does an endpoint that accepts and does not answer, or closes the
 * connection before its whole answer (the reload may be under way or done: another would
 * only hide how it went). The exit status.
 */
static int ctl_reload_pid(const struct sockaddr_storage *ss, socklen_t len, char *q, size_t size,
			  pid_t pid, bool json)
{
	char n[16], name[160], why[1024], msg[512], *buf, *body;
	const char *reason = "";
	int status, r, ret;

	snprintf(n, sizeof(n), "%d", (int)pid);
	param(q, size, "pid", n);
	admin_name(ss, name, sizeof(name));
	r = ctl_fetch(ss, len, "POST", "/reload", q, true, &status, &buf, &body);
	if (r == -ETIMEDOUT) {
		cli_error("no answer from the admin endpoint at %s within %u s: whether pid %d "
			  "reloaded, its log says\n",
			  name, ctl_wait_s(), (int)pid);
		return 1;
	}
	/* the request sent, the endpoint may have reloaded as it closed (or reset) the
	 * connection: a SIGHUP could reload it twice, or hide how the first went */
	if (r == -ENODATA || r == -ENOMSG) {
		cli_error("the admin endpoint at %s %s: whether pid %d reloaded is unknown, its "
			  "log says (or hashlb ctl status, its reloads); no SIGHUP sent, which "
			  "could reload it twice\n",
			  name,
			  r == -ENOMSG ? "took the request and closed the connection without a "
					 "byte of answer (a hashlb that stopped as it read it, or "
					 "a server that is no hashlb)"
				       : "closed the connection before its whole answer",
			  (int)pid);
		return 1;
	}
	if (r == -EPROTO || r == -EMSGSIZE) {
		snprintf(why, sizeof(why), "%s does not answer as a hashlb's admin endpoint", name);
		return ctl_sighup(pid, why, json);
	}
	if (r < 0) {
		snprintf(why, sizeof(why), "no admin endpoint answers at %s (%s)", name,
			 strerror(-r));
		return ctl_sighup(pid, why, json);
	}
	if (status / 100 == 2 || status == 422 || status == 409) {
		ret = ctl_answer(status, buf, body, json);
		free(buf);
		return ret;
	}
	if (!strncmp(body, "error: ", 7))
		reason = body + 7;
	else if (json_error(body, msg, sizeof(msg)))
		reason = msg;
	if (status == 412)
		snprintf(why, sizeof(why), "%s: %.*s", name, (int)strcspn(reason, "\n"), reason);
	else
		snprintf(why, sizeof(why), "the admin endpoint at %s answered %d%s%.*s", name,
			 status, *reason ? ": " : "", (int)strcspn(reason, "\n"), reason);
	free(buf);
	return ctl_sighup(pid, why, json);
}

/*
 * Command <cmd> is none of ctl's: said, and when it is what 'set' sets (a
 * state, "weight", "max_connections": 'hashlb ctl drain web-2', as other
 * balancers' tools spell it), the 'set' that does it.
 */
static void ctl_unknown_command(const char *cmd)
{
	static const char *const states[] = { "ready", "drain",	   "maint",
					      "up",    "draining", "maintenance" };

	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		if (!strcasecmp(cmd, states[i])) {
			cli_error("unknown command '%s': a backend's state is set with "
				  "'hashlb ctl set [-s SERVICE] BACKEND %s'\n",
				  cmd, cmd);
			return;
		}
	if (!strcmp(cmd, "weight") || !strcmp(cmd, "max_connections")) {
		cli_error("unknown command '%s': it is set with 'hashlb ctl set [-s SERVICE] "
			  "BACKEND %s N'\n",
			  cmd, cmd);
		return;
	}
	cli_error("unknown command '%s'\n", cmd);
}

/*
 * The commands: how many arguments each takes, which options apply to it,
 * and its synopsis for the line that says it was given the wrong arguments.
 */
static const struct ctl_command {
	const char *name;
	int min_args, max_args;
	bool service, vip, json, pid;
	const char *synopsis;
} ctl_commands[] = {
	{ "status", 0, 0, false, false, true, false, "status" },
	{ "metrics", 0, 0, false, false, false, false, "metrics" },
	{ "table", 0, 1, true, false, true, false, "table [SERVICE]" },
	{ "lookup", 1, INT_MAX, true, true, true, false,
	  "lookup [-s SERVICE] [--vip ADDR:PORT] CLIENT..." },
	{ "clients", 0, 1, true, false, true, false, "clients [-s SERVICE] [N]" },
	{ "set", 2, 3, true, false, true, false,
	  "set [-s SERVICE] BACKEND ready|drain|maint|weight N|max_connections N" },
	{ "close", 1, 1, true, false, true, false, "close [-s SERVICE] BACKEND" },
	{ "reload", 0, 0, false, false, true, true, "reload [--pid PID]" },
	{ "upgrade", 0, 0, false, false, true, false, "upgrade [--force]" },
};

/* Command <c> given the wrong arguments: say so with its synopsis, a usage error. */
static int bad_args(const struct ctl_command *c)
{
	cli_error("wrong arguments for %s: hashlb ctl %s\n", c->name, c->synopsis);
	return 2;
}

/*
 * 0 if command <cmd> takes <n> arguments <args> and the options given
 * (<service>, <vip>, <json>, <pid>: each the option as typed, or NULL), else 2
 * (printed): before the endpoint is looked for, as every usage error. The
 * names and values are the endpoint's to judge, but for clients' N: a count,
 * not a name of the running config, whose range (CTL_CLIENTS_MAX) is the
 * endpoint's "top" parameter's, which the user did not type. On 0, *<ret_top>
 * is clients' N as parsed (0x hex too, as every number of the command line),
 * 0 when not given.
 */
static int ctl_check_usage(const char *cmd, char **args, int n, const char *service,
			   const char *vip, const char *json, const char *pid, uint64_t *ret_top)
{
	const struct ctl_command *c = NULL;
	uint64_t v = 0;

	for (size_t i = 0; i < sizeof(ctl_commands) / sizeof(ctl_commands[0]) && !c; i++)
		if (!strcmp(cmd, ctl_commands[i].name))
			c = &ctl_commands[i];
	if (!c) {
		ctl_unknown_command(cmd);
		return 2;
	}
	if (n < c->min_args || n > c->max_args)
		return bad_args(c);
	if (!strcmp(cmd, "set")) {
		bool valued = !strcmp(args[1], "weight") || !strcmp(args[1], "max_connections");

		if (valued && n == 2) {
			cli_error("set: %s needs a value\n", args[1]);
			return 2;
		}
		if (valued != (n == 3))
			return bad_args(c);
	}
	if (!strcmp(cmd, "clients") && n == 1 &&
	    (cli_parse_u64(args[0], CTL_CLIENTS_MAX, &v) < 0 || v == 0)) {
		cli_error("clients: invalid value '%s' for N (1..%u)\n", args[0], CTL_CLIENTS_MAX);
		return 2;
	}
	if ((service && !c->service) || (vip && !c->vip) || (json && !c->json) ||
	    (pid && !c->pid)) {
		cli_error("%s does not apply to %s\n",
			  service && !c->service ? service
			  : vip && !c->vip	 ? vip
			  : pid && !c->pid	 ? pid
						 : json,
			  cmd);
		return 2;
	}
	if (service && !strcmp(cmd, "table") && n == 1) {
		cli_error("table: the service is given twice (%s and SERVICE): give it once\n",
			  service);
		return 2;
	}
	*ret_top = v;
	return 0;
}

/* ctl's options, wherever they are given: before the command or after it. */
struct ctl_opts {
	const char *admin, *config, *service, *vip, *pid;
	/* each option as typed, for the messages: -s or --service */
	char admin_opt[CLI_OPT_NAME_MAX], config_opt[CLI_OPT_NAME_MAX],
		service_opt[CLI_OPT_NAME_MAX], json_opt[CLI_OPT_NAME_MAX];
	bool json;
	bool force; /* --force: upgrade with a -c FILE that has errors */
};

/*
 * Option <c> that cli_getopt() returned, named <name> as typed, into <o>:
 * 0, or 2 on a usage error (printed), or -1 for --help (printed).
 */
static int ctl_option(int c, const char *arg, const char *name, struct ctl_opts *o)
{
	uint64_t v;

	switch (c) {
	case 'a':
		o->admin = arg;
		snprintf(o->admin_opt, sizeof(o->admin_opt), "%s", name);
		return 0;
	case 'c':
		if (cli_config_path(name, arg, &o->config))
			return 2;
		snprintf(o->config_opt, sizeof(o->config_opt), "%s", name);
		return 0;
	case 'j':
		o->json = true;
		snprintf(o->json_opt, sizeof(o->json_opt), "%s", name);
		return 0;
	case 's':
		o->service = arg;
		snprintf(o->service_opt, sizeof(o->service_opt), "%s", name);
		return 0;
	case 't':
		if (cli_parse_u64(arg, 3600, &v) < 0 || v == 0) {
			cli_bad_value(name, arg, "1..3600 seconds");
			return 2;
		}
		ctl_timeout_s = (unsigned)v;
		return 0;
	case 0x200:
		o->pid = arg;
		return 0;
	case 0x201:
		o->vip = arg;
		return 0;
	case 0x202:
		o->force = true;
		return 0;
	case 'h':
		usage(stdout);
		return -1;
	default:
		return 2;
	}
}

/*
 * The options among the command's arguments <argv>[<from>..<argc>), parsed
 * by getopt (<optstring>, <opts>) as those before the command are, in every
 * form it takes (--pid=N, -sweb, --serv), one element (and its value) at a
 * time; the arguments moved to <argv>[<from>...]. "--" ends the options, and
 * a negative number is an argument (for the endpoint to refuse). The new argc; or -1
 * for --help (printed), -2 on a usage error (printed).
 */
static int ctl_options_after(int argc, char **argv, int from, const char *optstring,
			     const struct option *opts, struct ctl_opts *o)
{
	char name[CLI_OPT_NAME_MAX];
	int n = from, c, r;

	for (int i = from; i < argc; i++) {
		const char *a = argv[i];
		char *one[4] = { argv[0], argv[i], i + 1 < argc ? argv[i + 1] : NULL, NULL };

		if (!strcmp(a, "--")) {
			while (++i < argc)
				argv[n++] = argv[i];
			break;
		}
		if (a[0] != '-' || !a[1] || (a[1] >= '0' && a[1] <= '9')) {
			argv[n++] = argv[i];
			continue;
		}
		/* this element, and the next as its value if it takes one */
		optind = 0;
		do {
			c = cli_getopt(one[2] ? 3 : 2, one, optstring, opts, NULL, name);
			r = c == -1 ? 0 : ctl_option(c, optarg, name, o);
			if (r)
				return r < 0 ? -1 : -r;
		} while (c != -1 && optind < 2);
		i += optind > 2;
	}
	optind = from; /* getopt's, for the caller: where the arguments start */
	return n;
}

/* cmd_ctl(), <fe> the -c FILE's errors: freed by the caller, whichever way this returns */
static int ctl_run(int argc, char **argv, struct ctl_file_error *fe)
{
	static const struct option opts[] = {
		{ "admin", required_argument, NULL, 'a' },
		{ "config", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "service", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "pid", required_argument, NULL, 0x200 },
		{ "vip", required_argument, NULL, 0x201 },
		{ "force", no_argument, NULL, 0x202 },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct ctl_opts o = { 0 };
	const char *cmd;
	char name[CLI_OPT_NAME_MAX];
	struct sockaddr_storage ss, given;
	socklen_t len = 0, given_len = 0;
	const char *admin_given = NULL;
	char q[1024] = "";
	uint64_t v, top;
	pid_t pid;
	int c, n, ret = 0;

	optind = 1;
	/* '+': options stop at the command; those after it are parsed below. */
	while ((c = cli_getopt(argc, argv, "+:a:c:js:t:h", opts, NULL, name)) != -1) {
		ret = ctl_option(c, optarg, name, &o);
		if (ret)
			return ret < 0 ? 0 : ret;
	}
	if (optind >= argc) {
		cli_error("no command given\n");
		return 2;
	}
	cmd = argv[optind++];
	/* Options after the command, before or among its arguments, as before it:
	 * "hashlb ctl reload --pid=$MAINPID", "ctl status --timeout 5". */
	n = ctl_options_after(argc, argv, optind, "+:a:c:js:t:h", opts, &o);
	if (n < 0)
		return n == -1 ? 0 : -n;
	argc = n;
	ret = ctl_check_usage(cmd, argv + optind, argc - optind, o.service ? o.service_opt : NULL,
			      o.vip ? "--vip" : NULL, o.json ? o.json_opt : NULL,
			      o.pid ? "--pid" : NULL, &top);
	if (ret)
		return ret;
	if (o.force && strcmp(cmd, "upgrade")) {
		cli_error("--force does not apply to %s\n", cmd);
		return 2;
	}
	/* a process id, not 0 or negative, which kill(2) takes as a group or every process */
	if (o.pid && (cli_parse_u64(o.pid, INT32_MAX, &v) < 0 || v == 0)) {
		cli_bad_value("--pid", o.pid, "a process id, 1..2147483647");
		return 2;
	}
	pid = o.pid ? (pid_t)v : 0;
	/* -c FILE --admin A: A in place of FILE's admin, taken as hashlb run takes it (off,
	 * port 0), as the unit's ExecReload passes the HASHLB_ADMIN_OPTION its run and check
	 * take; FILE loaded as run loads it then (a service may listen on its admin address) */
	if (o.config && o.admin) {
		admin_given = o.admin;
		if (cli_admin_parse(o.admin_opt, o.admin, NULL, &given, &given_len) < 0)
			return 2;
	}
	if (!o.admin) {
		o.admin = getenv("HASHLB_ADMIN");
		if (o.admin && !*o.admin)
			o.admin = NULL; /* "export HASHLB_ADMIN=": unset, as most tools take it */
	}
	ctl_admin_default = !o.config && !o.admin;
	ctl_admin_from_file = admin_given ? NULL : o.config;
	if (o.config) {
		struct hashlb_config *cfg;
		struct hashlb_error err = { 0 };
		const struct sockaddr_storage *admin_addr;
		const char *admin_text;
		socklen_t admin_len;
		unsigned load_flags =
			HASHLB_LOAD_NO_RESOLVE | (admin_given ? HASHLB_LOAD_ADMIN_GIVEN : 0);

		/* every error, said as hashlb check says them (file_error_print()) */
		if (hashlb_config_load_list(o.config, load_flags, &cfg, &err, &fe->list) < 0) {
			struct hashlb_error admin_err = { 0 };
			int r = -EIO;

			/*
			 * An error elsewhere in the file (one a reload refused, the
			 * running hashlb still on the file it had): ctl is how the
			 * operator reaches it, and needs only the admin address.
			 * Said, and the command runs. An admin key that cannot be
			 * read, or a file that cannot, stops it.
			 */
			if (err.reason != HASHLB_ERR_SYSTEM && err.reason != HASHLB_ERR_NOMEM)
				r = hashlb_config_load_flags(o.config,
							     load_flags | HASHLB_LOAD_ADMIN_ONLY,
							     &cfg, &admin_err);
			if (r == -ENOENT && admin_given) {
				/* no admin key before a YAML error, and none needed: --admin
				 * gives the address (this said "give --admin ADDR", given) */
				fe->err = admin_err.msg[0] ? admin_err : err;
				cfg = NULL;
			} else if (r < 0) {
				/* --pid: no SIGHUP either, as ctl knows no endpoint
				 * that is not pid's; said, as the fallback to it is */
				char none[96] = "";

				if (pid)
					snprintf(
						none, sizeof(none),
						"; nothing was sent to pid %d (no reload, no SIGHUP)",
						(int)pid);
				cli_print_error(admin_err.msg[0] ? &admin_err : &err);
				if (r == -ENOENT) /* a YAML error, and no admin key before it */
					cli_error("%s: no admin key before that error (what comes "
						  "after it cannot be read): give --admin ADDR%s\n",
						  cli_path(o.config), none);
				else if (pid)
					cli_error("%s: its admin address cannot be read: give "
						  "--admin ADDR%s\n",
						  cli_path(o.config), none);
				return 1;
			} else {
				fe->err = err;
			}
			/* a reload's answer may say the same (ctl_reload()): held till then */
			fe->held = !strcmp(cmd, "reload") && !pid;
			if (!fe->held)
				cli_print_config_errors(&fe->err, &fe->list);
			/* reload --pid (a unit's ExecReload=): pid's reload of the file
			 * would fail; asking it would only log, and count, a failed one */
			if (pid) {
				cli_error("%s has errors (above), which a reload would refuse: "
					  "nothing was sent to pid %d (no reload, no SIGHUP)\n",
					  cli_path(o.config), (int)pid);
				hashlb_config_free(cfg);
				return 1;
			}
			/* upgrade: the new process loads the running one's file, this one
			 * if it is that: it would refuse to start. Sent only if forced (the
			 * running hashlb may have been started on another file). */
			if (!strcmp(cmd, "upgrade") && !o.force) {
				cli_error("%s has errors (above): the new hashlb would refuse to "
					  "start on it; nothing was sent (give --force to upgrade "
					  "all the same)\n",
					  cli_path(o.config));
				hashlb_config_free(cfg);
				return 1;
			}
			if (!strcmp(cmd, "upgrade"))
				cli_notice("%s has errors (above), the new hashlb would refuse to "
					   "start on it: upgrading all the same (--force)\n",
					   cli_path(o.config));
			else if (!admin_given) /* cfg: read up to its admin key */
				snprintf(fe->note, sizeof(fe->note),
					 "%s has errors (above), a reload would refuse it: its "
					 "admin address is used all the same\n",
					 cli_path(o.config));
			else /* FILE's admin key or not, --admin's address is the one asked:
			      * "its admin address is used" said otherwise with one */
				snprintf(fe->note, sizeof(fe->note),
					 "%s has errors (above), a reload would refuse it: %s %s "
					 "is used\n",
					 cli_path(o.config), o.admin_opt, admin_given);
			if (fe->note[0] && !fe->held)
				cli_notice("%s", fe->note);
		}
		/* no cfg: FILE could not be read up to an admin key, and --admin gives it */
		if (cfg && admin_given &&
		    cli_admin_apply(cfg, o.config, admin_given, &given, given_len) < 0) {
			hashlb_config_free(cfg);
			file_error_flush(fe);
			return 1;
		}
		ctl_admin_file_default = cfg && !cfg->admin_pos.line;
		admin_addr = cfg ? &cfg->admin_addr : &given;
		admin_len = cfg ? cfg->admin_addr_len : given_len;
		admin_text = cfg ? cfg->admin : admin_given;
		if (!admin_len) {
			hashlb_config_free(cfg);
			file_error_flush(fe);
			if (admin_given)
				snprintf(q, sizeof(q), "the admin endpoint is off (%s off)",
					 o.admin_opt);
			else
				snprintf(q, sizeof(q), "%s has the admin endpoint off",
					 cli_path(o.config));
			if (pid)
				return ctl_sighup(pid, q, o.json);
			/* a hashlb run started with --admin ADDR has one all the same */
			cli_error("%s: no endpoint to ask%s\n", q,
				  admin_given ? ""
					      : " (for a hashlb run started with --admin ADDR, "
						"give --admin ADDR)");
			return 1;
		}
		if (admin_addr->ss_family != AF_UNIX && hashlb_addr_port(admin_addr) == 0) {
			if (pid) {
				snprintf(q, sizeof(q),
					 "%s: admin %s has port 0 (the kernel picked the running "
					 "hashlb's)",
					 admin_given ? o.admin_opt : cli_path(o.config),
					 admin_text);
				hashlb_config_free(cfg);
				return ctl_sighup(pid, q, o.json);
			}
			/* connecting there is refused, which would say nothing is listening */
			file_error_flush(fe);
			cli_error("%s: admin %s has port 0, which the kernel picks for the running "
				  "hashlb (its log says it: msg=\"admin listening\" addr=...): "
				  "give --admin ADDR\n",
				  admin_given ? o.admin_opt : cli_path(o.config), admin_text);
			hashlb_config_free(cfg);
			return 1;
		}
		ss = *admin_addr;
		len = admin_len;
		/* the weights the new process takes over, in FILE's table_memory (not when
		 * forced, nor with errors: the loader did not count its tables) */
		if (!strcmp(cmd, "upgrade") && cfg && !fe->err.msg[0] && !o.force &&
		    upgrade_weights_fit(&ss, len, cfg, &err) < 0) {
			err.file = o.config;
			cli_print_error(&err);
			cli_error(
				"the new hashlb would refuse to start with them: nothing was sent "
				"(give --force to upgrade all the same)\n");
			hashlb_config_free(cfg);
			return 1;
		}
		hashlb_config_free(cfg);
	} else if (cli_admin_parse(o.admin_opt[0] ? o.admin_opt : "$HASHLB_ADMIN",
				   o.admin ? o.admin : CTL_ADMIN_DEFAULT, ctl_addr_resolve, &ss,
				   &len) < 0) {
		return 2;
	}
	if (!o.json)
		param(q, sizeof(q), "format", "text");

	if (!strcmp(cmd, "upgrade"))
		return ctl_upgrade(&ss, len, o.json);
	if (!strcmp(cmd, "status") || !strcmp(cmd, "metrics") || !strcmp(cmd, "reload")) {
		if (!strcmp(cmd, "metrics"))
			return ctl_request(&ss, len, "GET", "/metrics", "", o.json);
		if (!strcmp(cmd, "reload") && pid)
			return ctl_reload_pid(&ss, len, q, sizeof(q), pid, o.json);
		if (!strcmp(cmd, "reload"))
			return ctl_reload(&ss, len, q, o.json, o.config, fe->held ? fe : NULL);
		return ctl_request(&ss, len, "GET", "/status", q, o.json);
	}
	if (!strcmp(cmd, "table")) {
		if (optind < argc)
			o.service = argv[optind++];
		param(q, sizeof(q), "service", o.service);
		return ctl_request(&ss, len, "GET", "/table", q, o.json);
	}
	if (!strcmp(cmd, "clients")) {
		char n_top[24];

		if (top) {
			snprintf(n_top, sizeof(n_top), "%" PRIu64, top);
			param(q, sizeof(q), "top", n_top);
		}
		param(q, sizeof(q), "service", o.service);
		return ctl_request(&ss, len, "GET", "/clients", q, o.json);
	}
	if (!strcmp(cmd, "lookup")) {
		param(q, sizeof(q), "service", o.service);
		param(q, sizeof(q), "vip", o.vip);
		return ctl_lookup(&ss, len, q, sizeof(q), argv + optind, argc - optind, o.json);
	}
	if (!strcmp(cmd, "set")) { /* BACKEND STATE, or BACKEND weight|max_connections N */
		param(q, sizeof(q), "service", o.service);
		param(q, sizeof(q), "backend", argv[optind]);
		if (argc - optind == 2)
			param(q, sizeof(q), "state", argv[optind + 1]);
		else
			param(q, sizeof(q), argv[optind + 1], argv[optind + 2]);
		return ctl_request(&ss, len, "POST", "/set", q, o.json);
	}
	/* close */
	param(q, sizeof(q), "service", o.service);
	param(q, sizeof(q), "backend", argv[optind]);
	return ctl_request(&ss, len, "POST", "/close", q, o.json);
}

int cmd_ctl(int argc, char **argv)
{
	struct ctl_file_error fe = { 0 };
	int ret = ctl_run(argc, argv, &fe);

	hashlb_error_list_free(&fe.list);
	return ret;
}
