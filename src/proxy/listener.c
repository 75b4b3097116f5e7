// SPDX-License-Identifier: MIT
/*
 * Listeners: one per listen address, one SO_REUSEPORT socket per worker, or
 * one socket the service manager passed, shared by the workers.
 * Refcounted: the daemon holds one reference while the address is in the
 * config, each worker one while it accepts on it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "runtime/answer.h"
#include "runtime/fdpass.h"
#include "listen_who.h"
#include "worker.h"

static void listener_free(struct hlb_listener *l)
{
	for (uint32_t i = 0; i < l->n_fds; i++)
		if (l->fds[i] >= 0)
			close(l->fds[i]);
	hlb_service_unref(atomic_load_explicit(&l->svc, memory_order_relaxed));
	free(l->fds);
	free(l->name);
	free(l);
}

/*
 * A listener of <svc> named <name> on <addr>, a socket per worker to open (-1 each), with a
 * reference to <svc>; NULL out of memory.
 */
static struct hlb_listener *listener_new(struct hlb_proxy *p, const struct sockaddr *addr,
					 socklen_t addr_len, const char *name,
					 struct hlb_service *svc)
{
	struct hlb_listener *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->fds = malloc(sizeof(*l->fds) * p->n_workers);
	l->name = strdup(name);
	if (!l->fds || !l->name) {
		free(l->fds);
		free(l->name);
		free(l);
		return NULL;
	}
	atomic_init(&l->refs, 1);
	atomic_init(&l->svc, hlb_service_ref(svc));
	l->n_workers = l->n_fds = p->n_workers;
	for (uint32_t i = 0; i < p->n_workers; i++)
		l->fds[i] = -1;
	memcpy(&l->addr, addr, addr_len);
	memcpy(&l->bound, addr, addr_len);
	l->addr_len = addr_len;
	return l;
}

void hlb_listener_unref(struct hlb_listener *l)
{
	if (l && atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) == 1)
		listener_free(l);
}

static void format_addr(const struct sockaddr *sa, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, size, "%s:%u", host, ntohs(in->sin_port));
	} else {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, size, "[%s]:%u", host, ntohs(in6->sin6_port));
	}
}

/*
 * The program listen_socket() attaches to its SO_REUSEPORT groups (BPF_PROG_TYPE_SK_REUSEPORT,
 * for BPF_SK_REUSEPORT_SELECT_OR_MIGRATE), loaded at the first call; -1 if it cannot be (no
 * CAP_BPF, a kernel before 5.14). It picks no socket: the kernel hashes each new client onto
 * one of the group as without it. What it changes is a close: the clients queued on a socket
 * of the group as it closes, accepted by the kernel or still in their handshake, move to
 * another socket of the group instead of being reset, as net.ipv4.tcp_migrate_req=1 does, for
 * these groups alone. A reload that adds back an address whose removed socket a worker still
 * closes, a worker's socket closed beside the others', an upgrade side by side whose old
 * process stops: what the closing socket held is served by the others.
 */
static int migrate_prog(struct hlb_proxy *p)
{
	static const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = SK_PASS },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	union bpf_attr attr;
	int fd;

	if (p->migrate_fd != -2)
		return p->migrate_fd;
	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_SK_REUSEPORT;
	attr.expected_attach_type = BPF_SK_REUSEPORT_SELECT_OR_MIGRATE;
	attr.insns = (uintptr_t)insns;
	attr.insn_cnt = sizeof(insns) / sizeof(insns[0]);
	attr.license = (uintptr_t) "MIT";
	fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr)); /* close-on-exec */
	p->migrate_fd = fd < 0 ? -1 : fd;
	return p->migrate_fd;
}

bool hlb_proxy_migrates(struct hlb_proxy *p)
{
	return migrate_prog(p) >= 0;
}

/* A listening socket on <addr>, in its SO_REUSEPORT group; migrate_prog() attached to the
 * group unless <foreign> (another process listens there: see hlb_listener_open()). */
static int listen_socket(struct hlb_proxy *p, const struct sockaddr *addr, socklen_t addr_len,
			 bool foreign)
{
	int fd, one = 1, zero = 0, r, prog = foreign ? -1 : migrate_prog(p);

	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
	if (fd < 0)
		return -errno;
	/* An IPv6 listener takes IPv4 clients too (as IPv4-mapped addresses),
	 * whatever net.ipv6.bindv6only says: the config's clash check and the
	 * docs count on it (a [::]:443 listener serves 10.0.0.7 as well). */
	if ((addr->sa_family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0) ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
	    /* inherited by accepted sockets: forward small writes at once */
	    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
	    bind(fd, addr, addr_len) < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	/* the group's (once bound): each socket that joins it attaches it again, the same */
	if (prog >= 0)
		setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF, &prog, sizeof(prog));
	return fd;
}

/* Whether <fd> is a listening TCP socket (IPv4 or IPv6); its address in <addr>. */
static bool listening_tcp(int fd, struct sockaddr_storage *addr)
{
	int type = 0, listening = 0, proto = 0;
	socklen_t len = sizeof(int), alen = sizeof(*addr);

	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
	       getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 &&
	       getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) == 0 &&
	       getsockname(fd, (struct sockaddr *)addr, &alen) == 0 && type == SOCK_STREAM &&
	       listening && proto == IPPROTO_TCP &&
	       (addr->ss_family == AF_INET || addr->ss_family == AF_INET6);
}

/*
 * Count the descriptors inh[] holds, for the connection cap (proxy_cap_with()): the sockets the
 * service manager passed, kept open whether a service listens on them or not, the copies kept
 * of one an upgrade in place handed on, and the sockets taken over not yet a listener's. Before,
 * none came off the cap: they took the reserve kept for the rings and the admin endpoint, which
 * many (up to the 1,024 hlb_proxy_adopt_listeners() takes) outgrow.
 * After each change, on the control thread.
 */
static void inh_counted(struct hlb_proxy *p)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->n_inh; i++)
		n += p->inh[i].fd >= 0;
	atomic_store_explicit(&p->n_inh_fds, n, memory_order_relaxed);
}

int hlb_proxy_adopt_listeners(struct hlb_proxy *p, struct hashlb_error *err)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	char *end;
	long n;

	if (!pid || !fds || strtol(pid, &end, 10) != getpid() || *end)
		return 0; /* not for this process */
	n = strtol(fds, &end, 10);
	if (*end || n < 0 || n > 1024)
		return hashlb_err(err, -EINVAL, HASHLB_ERR_SYSTEM,
				  "LISTEN_FDS=%s from the service manager is not a count", fds);
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (!n)
		return 0;
	p->inh = calloc((size_t)n, sizeof(*p->inh));
	if (!p->inh)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	for (int fd = 3; fd < 3 + n; fd++) {
		struct inherited *in = &p->inh[p->n_inh];

		if (!listening_tcp(fd, &in->addr))
			return hashlb_err(err, -EINVAL, HASHLB_ERR_SYSTEM,
					  "fd %d from the service manager is not a listening TCP "
					  "socket (ListenStream= in the .socket unit)",
					  fd);
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		in->fd = fd;
		p->n_inh++;
	}
	inh_counted(p);
	return (int)p->n_inh;
}

uint32_t hlb_proxy_inherited_count(const struct hlb_proxy *p)
{
	return p->n_inh - p->n_taken; /* the service manager's come first */
}

bool hlb_proxy_inherited(const struct hlb_proxy *p, uint32_t i, char *buf, size_t size)
{
	format_addr((const struct sockaddr *)&p->inh[i].addr, buf, size);
	return p->inh[i].used;
}

/* Whether a socket bound to <a> is one bound to <b>: the same address, an IPv4 one written
 * either way (127.0.0.1:P, [::ffff:127.0.0.1]:P: the kernel's one address), or the same
 * wildcard (0.0.0.0:P is not [::]:P, which takes IPv6 clients too). Port 0 never is. */
static bool same_listen_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)a;
	const struct sockaddr_in6 *b6 = (const struct sockaddr_in6 *)b;
	bool any = hashlb_addr_is_any(a);
	bool v4a = a->ss_family == AF_INET || IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr);
	bool v4b = b->ss_family == AF_INET || IN6_IS_ADDR_V4MAPPED(&b6->sin6_addr);

	return hashlb_listen_clash(a, b) && any == hashlb_addr_is_any(b) && (!any || v4a == v4b);
}

/* The service manager's socket bound to <addr>, or NULL (port 0 never matches one): one it
 * passed, or one an upgrade in place handed on, kept since (struct inherited's <kept>). A
 * socket ListenStream=[::ffff:127.0.0.1]:P passed is the one a service on 127.0.0.1:P listens
 * on: before, hashlb bound its own there, which the passed socket refused (no SO_REUSEPORT). */
static struct inherited *inherited_for(struct hlb_proxy *p, const struct sockaddr *addr)
{
	for (uint32_t i = 0; i < p->n_inh; i++)
		if ((!p->inh[i].taken || p->inh[i].kept) &&
		    same_listen_addr(&p->inh[i].addr, (const struct sockaddr_storage *)addr))
			return &p->inh[i];
	return NULL;
}

/* <addr> with port 0. */
static struct sockaddr_storage any_port(const struct sockaddr_storage *addr)
{
	struct sockaddr_storage a = *addr;

	if (a.ss_family == AF_INET)
		((struct sockaddr_in *)&a)->sin_port = 0;
	else if (a.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&a)->sin6_port = 0;
	return a;
}

/* A socket taken over, bound to <addr> and not yet used, or NULL: as inherited_for() takes
 * it (the service manager's, [::ffff:127.0.0.1]:P for 127.0.0.1:P, the old process hands on
 * at an upgrade in place: before, the new one bound its own beside it, which that socket
 * refused, and the upgrade failed). For <addr> of port 0 ("any free port"), the one service
 * <svc> listened on there with the same host: it keeps its port, as across a reload. */
static struct inherited *taken_for(struct hlb_proxy *p, const struct sockaddr *addr,
				   const char *svc)
{
	bool any = !hashlb_addr_port((const struct sockaddr_storage *)addr);

	for (uint32_t i = 0; i < p->n_inh; i++) {
		struct inherited *in = &p->inh[i];
		struct sockaddr_storage a = any ? any_port(&in->addr) : in->addr;

		if (in->taken && !in->used && !in->kept &&
		    (any ? hlb_sockaddr_same((const struct sockaddr *)&a, addr) &&
				     strcmp(in->svc, svc) == 0
			 : same_listen_addr(&in->addr, (const struct sockaddr_storage *)addr)))
			return in;
	}
	return NULL;
}

static bool unix_stream(int fd)
{
	int v = 0;
	socklen_t len = sizeof(v);

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0 || v != AF_UNIX)
		return false;
	len = sizeof(v);
	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) == 0 && v == SOCK_STREAM;
}

/* Whether the descriptors <a> and <b> are of one socket. */
static bool one_socket(int a, int b)
{
	struct stat sa, sb;

	return a >= 0 && b >= 0 && fstat(a, &sa) == 0 && fstat(b, &sb) == 0 &&
	       sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev;
}

/* Keep <fd> as a socket taken over (closed if it is not a listening TCP socket, unless it is
 * the old process's resync socket: HLB_FDPASS_RESYNC). */
static void take_fd(struct hlb_proxy *p, int fd)
{
	struct inherited *in, *inh;

	inh = realloc(p->inh, sizeof(*p->inh) * (p->n_inh + 1));
	if (!inh) {
		close(fd);
		return;
	}
	p->inh = inh;
	in = &p->inh[p->n_inh];
	*in = (struct inherited){ .fd = fd, .taken = true };
	if (!listening_tcp(fd, &in->addr)) {
		if (p->from_parent && p->resync_fd < 0 && unix_stream(fd))
			p->resync_fd = fd; /* HLB_FDPASS_RESYNC */
		else
			close(fd);
		return;
	}
	p->n_inh++;
	p->n_taken++;
}

/* The old process's answer: a line per socket, and one per backend it had changed or found
 * down (HLB_HANDOVER_LINE, up to ~350 bytes): 1 MiB held ~13,000 of them, and a takeover of
 * a service of 20,000 backends down failed with EMSGSIZE. A bound against a runaway peer. */
#define TAKE_TEXT_MAX (256u << 20)

/*
 * How long the old process may stay silent (not a byte of its answer) before this one gives up
 * on it: it binds sockets of its own beside the old one's, carries none of its run-time
 * settings over, and what waits in the old one's queues is reset when it stops. An old process
 * that lives answers, if late: its control thread busy (health checks of 20,000 backends, a
 * loaded machine). 2 s, as it was through the admin endpoint, failed so under load; 10 s as
 * the upgrade in place always allowed, for both. Each part of the answer that arrives starts it
 * anew, so a long answer is read to its end; a process stopped or stuck for good holds this one
 * up 10 s. TAKE_STEP_S: how often this one says that it waits.
 */
#define TAKE_SILENCE_S 10
#define TAKE_STEP_S 2

/* Read what the admin endpoint answers on <fd> (SO_RCVTIMEO: TAKE_STEP_S) into *<ret>
 * (NUL-terminated, malloc'd), keeping the sockets that come with it (SCM_RIGHTS), how many
 * came in *<ret_fds>; -ETIMEDOUT after TAKE_SILENCE_S without a byte. */
static ssize_t take_read(struct hlb_proxy *p, int fd, char **ret, size_t *ret_fds)
{
	size_t len = 0, cap = 8192, n_fds = 0;
	char *buf = malloc(cap), *more;
	uint64_t heard = worker_clock_ns() / 1000000u; /* ms */

	if (!buf)
		return -ENOMEM;
	for (;;) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * HLB_FDPASS_PER_MSG)];
			struct cmsghdr align;
		} ctl;
		struct iovec iov = { .iov_base = buf + len, .iov_len = cap - 1 - len };
		struct msghdr msg = { .msg_iov = &iov,
				      .msg_iovlen = 1,
				      .msg_control = ctl.buf,
				      .msg_controllen = sizeof(ctl.buf) };
		ssize_t n;

		if (len == cap - 1) {
			if (cap >= TAKE_TEXT_MAX || !(more = realloc(buf, cap * 2))) {
				free(buf);
				return -EMSGSIZE;
			}
			buf = more;
			cap *= 2;
			continue;
		}
		n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			uint64_t silent = worker_clock_ns() / 1000000u - heard;

			if (silent >= TAKE_SILENCE_S * 1000) {
				free(buf);
				return -ETIMEDOUT;
			}
			hlb_log(HLB_LOG_WARN, "the old hashlb has not answered yet, waiting",
				"silent_for_ms=%" PRIu64 " gives_up_after_ms=%d got=%zu", silent,
				TAKE_SILENCE_S * 1000, len);
			continue;
		}
		if (n < 0) {
			free(buf);
			return -errno;
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int got;

				memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				take_fd(p, got);
				n_fds++;
			}
		}
		if (msg.msg_flags & MSG_CTRUNC) {
			free(buf);
			return -EMSGSIZE;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		heard = worker_clock_ns() / 1000000u;
	}
	buf[len] = '\0';
	*ret = buf;
	*ret_fds = n_fds;
	return (ssize_t)len;
}

/* Give back whatever a failed takeover received: listeners bind their own, and nothing carried
 * over leaves nothing for the resync socket to correct. */
static void take_undo(struct hlb_proxy *p)
{
	for (; p->n_taken; p->n_taken--)
		close(p->inh[--p->n_inh].fd);
	if (p->resync_fd >= 0)
		close(p->resync_fd);
	p->resync_fd = -1;
	inh_counted(p);
}

static const char *next_line(const char *l)
{
	const char *nl = strchr(l, '\n');

	return nl ? nl + 1 : l + strlen(l);
}

/*
 * Over TCP no descriptor can come with the answer: each of its lines names
 * the process and the descriptor ("PID FD ADDR SERVICE"), and pidfd_getfd(2) copies
 * it from <pidfd> (that process), as SCM_RIGHTS would have. That takes the
 * right to ptrace the old process (the same user, and Yama's ptrace_scope 0,
 * or CAP_SYS_PTRACE), so the endpoint itself gives nothing away.
 */
static int take_pidfd(struct hlb_proxy *p, int pidfd, const char *body)
{
	for (const char *l = body; *l; l = next_line(l)) {
		int lpid, fd, got;

		if (sscanf(l, "%d %d", &lpid, &fd) != 2 || lpid != p->taken_from)
			continue;
		got = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0); /* close-on-exec */
		if (got >= 0)
			take_fd(p, got);
		else if (errno != EBADF) /* EBADF: closed since, by a reload */
			return -errno;
	}
	return 0;
}

/*
 * The service manager's socket <in> that the old process held for no service
 * (HLB_FDPASS_INHERITED): kept as one the manager passed (<kept>, inherited_for() finds it),
 * once: its other copies (it came twice) closed.
 */
static void take_inherited(struct hlb_proxy *p, struct inherited *in)
{
	for (uint32_t i = 0; i < p->n_inh; i++) {
		struct inherited *k = &p->inh[i];

		if (k != in && k->kept && k->fd >= 0 && one_socket(k->fd, in->fd)) {
			close(in->fd);
			in->fd = -1;
			in->used = true; /* hlb_proxy_release_taken() and taken_for() pass it by */
			return;
		}
	}
	in->kept = true;
}

/* The service each socket taken over listened for: the line that names its
 * address ("PID FD ADDR SERVICE"; a hashlb of before the service wrote none). */
static void take_services(struct hlb_proxy *p, const char *body)
{
	for (const char *l = body; *l; l = next_line(l)) {
		char addr[64], svc[HLB_SERVICE_NAME_SIZE], name[64];

		if (sscanf(l, "%*d %*d %63s %64s", addr, svc) != 2)
			continue;
		for (uint32_t i = 0; i < p->n_inh; i++) {
			struct inherited *in = &p->inh[i];

			if (!in->taken || in->svc[0])
				continue;
			format_addr((const struct sockaddr *)&in->addr, name, sizeof(name));
			if (strcmp(name, addr) != 0)
				continue;
			snprintf(in->svc, sizeof(in->svc), "%s", svc);
			if (!strcmp(svc, HLB_FDPASS_INHERITED))
				take_inherited(p, in);
		}
	}
}

/* Whether <l> is a line for the control plane: HLB_HANDOVER_LINE, HLB_HANDOVER_SEEN,
 * HLB_HANDOVER_RESOLVED, HLB_HANDOVER_RELOADS, HLB_HANDOVER_TOTALS,
 * HLB_HANDOVER_SERVICE_TOTALS. */
static bool handover_line(const char *l)
{
	return !strncmp(l, "set ", 4) || !strncmp(l, "seen ", 5) || !strncmp(l, "resolved ", 9) ||
	       !strncmp(l, "reloads ", 8) || !strncmp(l, "totals ", 7) ||
	       !strncmp(l, "service-totals ", 15);
}

/* Keep the answer's "set ..." lines, what the old process's operator set at
 * run time (HLB_HANDOVER_LINE), its "resolved ..." ones, where its names
 * took their backends (HLB_HANDOVER_RESOLVED), its reload counts
 * (HLB_HANDOVER_RELOADS) and counters (HLB_HANDOVER_TOTALS), for the control
 * plane to carry on. */
static void take_handover(struct hlb_proxy *p, const char *body)
{
	size_t n = 0;

	free(p->handover);
	p->handover = NULL;
	for (const char *l = body; *l; l = next_line(l))
		n += handover_line(l) ? (size_t)(next_line(l) - l) : 0;
	if (!n || !(p->handover = malloc(n + 2)))
		return;
	n = 0;
	for (const char *l = body; *l; l = next_line(l)) {
		if (!handover_line(l))
			continue;
		memcpy(p->handover + n, l, (size_t)(next_line(l) - l));
		n += (size_t)(next_line(l) - l);
	}
	if (n && p->handover[n - 1] != '\n')
		p->handover[n++] = '\n';
	p->handover[n] = '\0';
}

/*
 * Whether the answer <text> (<len> bytes, its body at <body>; <n_fds> descriptors came with
 * it, over a Unix socket when <unix_socket>) is whole: no shorter than its Content-Length, and
 * a descriptor for each socket's line ("PID FD ..."), and one for the resync socket
 * (HLB_FDPASS_RESYNC). An old process that stops, or whose hlb_fdpass_send() gives up, as it
 * answers leaves a list cut short: taking it, this process would listen on some of the old
 * one's sockets only, and carry on a part of its run-time settings. If not, <why> says what
 * is wrong.
 */
static bool take_whole(const char *text, size_t len, const char *body, size_t n_fds,
		       bool unix_socket, char *why, size_t why_size)
{
	unsigned long long want;
	size_t have, lines = 0;
	const char *bad;
	bool has;
	int pid, fd;

	bad = hlb_answer_length(text, body - 4, &has, &want);
	if (bad) {
		snprintf(why, why_size, "the old hashlb's answer has %s", bad);
		return false;
	}
	if (hlb_answer_cut(text, body - 4, len, &have, &want)) {
		snprintf(why, why_size,
			 "the old hashlb closed its answer after %zu of its %llu bytes", have,
			 want);
		return false;
	}
	if (!unix_socket)
		return true; /* copied by pidfd_getfd(2): none comes with it */
	for (const char *l = body; *l; l = next_line(l))
		lines += sscanf(l, "%d %d", &pid, &fd) == 2 ||
			 !strncmp(l, HLB_FDPASS_RESYNC, strlen(HLB_FDPASS_RESYNC));
	if (lines != n_fds) {
		snprintf(why, why_size,
			 "the old hashlb's answer lists %zu sockets, and %zu came with it", lines,
			 n_fds);
		return false;
	}
	return true;
}

/*
 * Read the answer to GET /sockets on <fd> (connected, of <family>) and keep
 * the sockets it hands over. <why> says why none were, if it answered; -EPROTO with <why>
 * saying so if its answer was not whole (take_whole()).
 */
static int take_answer(struct hlb_proxy *p, int fd, int family, char *why, size_t why_size)
{
	struct ucred cred = { 0 };
	socklen_t cred_len = sizeof(cred);
	char *text = NULL, *body;
	size_t n_fds = 0;
	ssize_t n;
	int r, pidfd = -1;

	if (family == AF_UNIX && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) < 0)
		cred.pid = 0;
	n = take_read(p, fd, &text, &n_fds);
	if (n < 0) {
		take_undo(p);
		return (int)n;
	}
	if (strncmp(text, "HTTP/1.1 200 ", 13) != 0) {
		/* an older hashlb (404), or one that has nothing to hand over, or
		 * may not (409): its status line, and the error it gives (a PID 1's) */
		const char *eol = strchr(text, '\r'), *e = strstr(text, "{\"error\":\"");

		take_undo(p);
		if (e)
			e += strlen("{\"error\":\"");
		snprintf(why, why_size, "%.*s%s%.*s", eol ? (int)(eol - text) : 64, text,
			 e ? ": " : "", e ? (int)strcspn(e, "\"\\") : 0, e ? e : "");
		free(text);
		return 0;
	}
	/* The old process: who answered on the Unix socket, or what the first
	 * line says over TCP. Its pidfd copies the sockets over TCP, and then
	 * follows it until it exits (hlb_proxy_take_pidfd()). */
	body = strstr(text, "\r\n\r\n");
	if (!body)
		snprintf(why, why_size, "the old hashlb closed its answer in its head");
	if (!body ||
	    !take_whole(text, (size_t)n, body + 4, n_fds, family == AF_UNIX, why, why_size)) {
		take_undo(p);
		free(text);
		return -EPROTO;
	}
	body += 4;
	p->taken_from = cred.pid;
	if (family != AF_UNIX && sscanf(body, "%d", &r) == 1)
		p->taken_from = r;
	if (p->taken_from > 0)
		pidfd = (int)syscall(SYS_pidfd_open, p->taken_from, 0);
	r = 0;
	if (family != AF_UNIX)
		r = pidfd < 0 ? -errno : take_pidfd(p, pidfd, body);
	take_services(p, body);
	take_handover(p, body);
	free(text);
	if (r < 0 || !p->n_taken) {
		take_undo(p);
		if (pidfd >= 0)
			close(pidfd);
		p->taken_from = 0;
		return r;
	}
	p->taken_pidfd = pidfd;
	atomic_store(&p->takeover, TAKEOVER_OLD_ALIVE);
	inh_counted(p);
	return (int)p->n_taken;
}

/*
 * Whether this process could listen on the TCP <admin> beside whoever does there, as its admin
 * endpoint binds (SO_REUSEPORT): a hashlb of this user it can. Anything else (another
 * program, another user's hashlb) makes this process's own admin bind fail as it starts: not
 * worth waiting up to TAKE_SILENCE_S for, when the admin bind error can be said at once.
 */
static bool admin_joinable(const struct sockaddr *admin, socklen_t len)
{
	int fd = socket(admin->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, zero = 0;
	bool ok;

	if (fd < 0)
		return true; /* cannot tell: ask */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (admin->sa_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	ok = bind(fd, admin, len) == 0 || errno != EADDRINUSE;
	close(fd);
	return ok;
}

int hlb_proxy_take_over(struct hlb_proxy *p, const struct sockaddr *admin, socklen_t len, char *why,
			size_t why_size)
{
	struct timeval step = { .tv_sec = TAKE_STEP_S }, bound = { .tv_sec = TAKE_SILENCE_S };
	char req[128];
	int req_len = snprintf(req, sizeof(req),
			       "GET /sockets?taker=%d HTTP/1.1\r\nHost: hashlb\r\n"
			       "Connection: close\r\n\r\n",
			       (int)getpid());
	const struct sockaddr_in *in4 = (const void *)admin;
	const struct sockaddr_in6 *in6 = (const void *)admin;
	int fd, r;

	*why = '\0';
	if ((admin->sa_family == AF_INET && !in4->sin_port) ||
	    (admin->sa_family == AF_INET6 && !in6->sin6_port))
		return 0; /* any free port: the old one's is not known */
	if (admin->sa_family != AF_UNIX && !admin_joinable(admin, len))
		return 0; /* no hashlb to take over from: the admin bind says what is there */
	fd = socket(admin->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* SO_SNDTIMEO bounds the connect too (a backlog full: the old one accepts nothing) */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &step, sizeof(step));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof(bound));
	if (connect(fd, admin, len) < 0) {
		r = errno == ENOENT || errno == ECONNREFUSED  ? 0
		    : errno == EINPROGRESS || errno == EAGAIN ? -ETIMEDOUT /* SO_SNDTIMEO */
							      : -errno;
		close(fd);
		return r; /* nobody there: nothing to take over */
	}
	if (write(fd, req, (size_t)req_len) != (ssize_t)req_len) {
		r = -errno;
		close(fd);
		return r;
	}
	r = take_answer(p, fd, admin->sa_family, why, why_size);
	close(fd);
	return r;
}

int hlb_proxy_take_over_fd(struct hlb_proxy *p, int fd, char *why, size_t why_size)
{
	struct timeval step = { .tv_sec = TAKE_STEP_S };
	int r;

	*why = '\0';
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &step, sizeof(step));
	p->from_parent = true;
	r = take_answer(p, fd, AF_UNIX, why, why_size);
	p->from_parent = false;
	return r;
}

pid_t hlb_proxy_taken_from(const struct hlb_proxy *p)
{
	return p->taken_from;
}

bool hlb_proxy_taken_any(const struct hlb_proxy *p,
			 bool (*match)(void *arg, const struct sockaddr_storage *addr,
				       const char *svc),
			 void *arg)
{
	for (uint32_t i = p->n_inh - p->n_taken; i < p->n_inh; i++)
		if (match(arg, &p->inh[i].addr, p->inh[i].svc))
			return true;
	return false;
}

void hlb_proxy_take_drop(struct hlb_proxy *p)
{
	take_undo(p);
	if (p->taken_pidfd >= 0)
		close(p->taken_pidfd);
	p->taken_pidfd = -1;
	p->taken_from = 0;
	atomic_store(&p->takeover, TAKEOVER_NONE);
}

const char *hlb_proxy_handover(const struct hlb_proxy *p)
{
	return p->taken_from ? p->handover : NULL;
}

int hlb_proxy_take_resync_fd(struct hlb_proxy *p)
{
	int fd = p->resync_fd;

	p->resync_fd = -1;
	return fd;
}

int hlb_proxy_take_pidfd(struct hlb_proxy *p)
{
	int fd = p->taken_pidfd;

	p->taken_pidfd = -1;
	return fd;
}

bool hlb_proxy_old_running(const struct hlb_proxy *p)
{
	return atomic_load_explicit(&p->takeover, memory_order_acquire) == TAKEOVER_OLD_ALIVE;
}

void hlb_proxy_old_gone(struct hlb_proxy *p)
{
	atomic_store_explicit(&p->takeover, TAKEOVER_OLD_GONE, memory_order_release);
}

/*
 * A listener of <svc> on the socket <in> taken over, for every worker (a
 * descriptor each, as for a socket the service manager passed), or NULL if
 * one cannot be made. Takes <in>'s descriptor on success.
 */
static struct hlb_listener *listener_on_taken(struct hlb_proxy *p, struct inherited *in,
					      struct hlb_service *svc)
{
	socklen_t len = in->addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						       : sizeof(struct sockaddr_in);
	struct hlb_listener *l =
		listener_new(p, (const struct sockaddr *)&in->addr, len, svc->name, svc);

	if (!l)
		return NULL;
	l->n_taken = 1;
	format_addr((const struct sockaddr *)&l->bound, l->bound_name, sizeof(l->bound_name));
	for (uint32_t i = 1; i < p->n_workers; i++) {
		l->fds[i] = fcntl(in->fd, F_DUPFD_CLOEXEC, 0);
		if (l->fds[i] < 0) {
			listener_free(l); /* the copies; <in> keeps its own */
			return NULL;
		}
	}
	l->fds[0] = in->fd;
	in->fd = -1;
	l->shared = p->n_workers > 1;
	return l;
}

uint32_t hlb_proxy_release_taken(struct hlb_proxy *p,
				 struct hlb_service *(*find)(void *arg, const char *name),
				 void *arg, uint32_t *ret_served)
{
	uint32_t n = 0, served = 0;

	for (uint32_t i = 0; i < p->n_inh; i++) {
		struct inherited *in = &p->inh[i];
		struct hlb_service *svc = NULL;
		struct hlb_listener *l = NULL;

		if (!in->taken || in->kept || in->fd < 0)
			continue;
		/* The old process may have closed its own copy already (a reload
		 * of it moved the address while this one started), and the kernel
		 * queues clients on it until the last copy closes: serve them first,
		 * as a reload that moves an address does. */
		if (in->svc[0] && find)
			svc = find(arg, in->svc);
		if (svc)
			l = listener_on_taken(p, in, svc);
		if (l) {
			/* the workers accept what waits, then close it (CMD_REMOVE) */
			hlb_listener_start(p, l);
			hlb_listener_close(p, l);
			served++;
		} else {
			close(in->fd);
			in->fd = -1;
		}
		in->used = true;
		n++;
	}
	inh_counted(p);
	*ret_served = served;
	return n;
}

uint32_t hlb_listener_fds(const struct hlb_listener *l, bool inherited, int *fds, uint32_t max)
{
	uint32_t n = 0;

	if (l->inherited && !inherited)
		return 0; /* the service manager passes it to the next process itself */
	for (uint32_t i = 0; i < l->n_fds && n < max; i++) {
		int fd = __atomic_load_n(&l->fds[i], __ATOMIC_ACQUIRE);

		if (fd >= 0)
			fds[n++] = fd;
	}
	/* The service manager's socket of one worker, handed on in place: twice, so that the
	 * taker sees two descriptors of one socket (fds_shared()), as it does from more
	 * workers, and no failed worker of its shuts the manager's socket down as its own. */
	if (inherited && (l->inherited || l->shared) && n == 1 && n < max)
		fds[n++] = fds[0];
	return n;
}

uint32_t hlb_proxy_inherited_unused(struct hlb_proxy *p, const int *used, uint32_t n_used, int *fds,
				    const char **names, uint32_t max)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->n_inh && n + 2 <= max; i++) {
		struct inherited *in = &p->inh[i];
		bool listened = false;
		char addr[64];

		if (in->fd < 0 || (in->taken && !in->kept))
			continue; /* a socket taken over that the old process still listens on */
		for (uint32_t j = 0; j < n_used && !listened; j++)
			listened = one_socket(in->fd, used[j]);
		if (listened)
			continue; /* handed on with its listener */
		format_addr((const struct sockaddr *)&in->addr, addr, sizeof(addr));
		snprintf(in->handover, sizeof(in->handover), "%s %s", addr, HLB_FDPASS_INHERITED);
		/* twice, as hlb_listener_fds() hands a single descriptor on: a process of before
		 * that listens on it takes it as shared, never shuts it down as its own */
		for (int k = 0; k < 2; k++) {
			fds[n] = in->fd;
			names[n++] = in->handover;
		}
	}
	return n;
}

/* -EADDRINUSE if a bind of <addr> collides with a listening socket (as listen_socket() binds,
 * SO_REUSEPORT aside: a socket in TIME_WAIT is no conflict, a listening one is, whoever owns
 * it), else 0 (or when it cannot tell: the listener's own bind decides). */
static int probe_bind(const struct sockaddr *addr, socklen_t addr_len)
{
	int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
	int one = 1, zero = 0, r = 0;

	if (fd < 0)
		return 0;
	if ((addr->sa_family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0) ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, addr, addr_len) < 0)
		r = errno == EADDRINUSE ? -EADDRINUSE : 0;
	close(fd);
	return r;
}

int hlb_listener_probe(struct hlb_proxy *p, const struct sockaddr *addr, socklen_t addr_len)
{
	const struct sockaddr_storage *a = (const struct sockaddr_storage *)addr;
	enum listen_who who;
	bool held = false;

	/* a socket we hold (the service manager's, one taken over not yet used) where the bind
	 * collides: ours, not another process's (not any of the port: 127.0.0.1:P is none of
	 * 127.0.0.2:P's business); unless a third process listens there as well, beside the
	 * sockets held (those of the hashlb they were taken from are the same), in either
	 * family. When it cannot tell, the start is not warned, as before. */
	for (uint32_t i = 0; i < p->n_inh && !held; i++)
		held = p->inh[i].fd >= 0 && hashlb_listen_clash(&p->inh[i].addr, a);
	if (held)
		return hlb_who_listens(a) == LISTEN_THEIRS ? -EADDRINUSE : 0;
	if (probe_bind(addr, addr_len) == 0)
		return 0;
	who = hlb_who_listens(a);
	/* none there any more: a socket of ours closed since, bound again to be sure */
	return who == LISTEN_OURS   ? 0
	       : who == LISTEN_NONE ? probe_bind(addr, addr_len)
				    : -EADDRINUSE;
}

/*
 * The sockets taken over for <addr> beyond one per worker (the old hashlb had more workers):
 * <l> keeps them too, its workers accepting on them in turn. The kernel hashes clients onto
 * each (SO_REUSEPORT) until its last copy closes, the old process's or ours, and those it
 * queued on it at that instant, or whose handshake was under way there, would be reset
 * (unless net.ipv4.tcp_migrate_req=1): kept, they never are. Before the listener starts.
 */
static void take_extra(struct hlb_proxy *p, struct hlb_listener *l, const struct sockaddr *addr,
		       const char *name)
{
	struct inherited *t;
	int *fds;

	while ((t = taken_for(p, addr, name))) {
		fds = realloc(l->fds, sizeof(*l->fds) * (l->n_fds + 1));
		if (!fds)
			return; /* hlb_proxy_release_taken() serves what waits there */
		l->fds = fds;
		l->fds[l->n_fds++] = t->fd;
		t->fd = -1;
		t->used = true;
		l->n_taken++;
	}
}

/* Whether socket <fd>, bound to <at>, takes IPv4 clients where <a> is IPv4: not an IPv6
 * wildcard set IPV6_V6ONLY (hlb_v6only_decides()). */
static bool held_covers(int fd, const struct sockaddr_storage *at, const struct sockaddr_storage *a)
{
	int only = 0;
	socklen_t len = sizeof(only);

	if (!hlb_v6only_decides(at, a))
		return true;
	return getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &only, &len) < 0 || !only;
}

/* A socket <p> holds (the service manager's, passed or handed on at an upgrade; used by a
 * listener or not) where a bind of <a> collides, that has no SO_REUSEPORT: it refuses the bind
 * whoever makes it, this process too. Its address into <where>, or false if none. */
static bool held_refuses(const struct hlb_proxy *p, const struct sockaddr_storage *a, char *where,
			 size_t size)
{
	for (uint32_t i = 0; p && i < p->n_inh; i++) {
		int on = 0;
		socklen_t len = sizeof(on);

		if (p->inh[i].fd < 0 || !hashlb_listen_clash(&p->inh[i].addr, a) ||
		    !held_covers(p->inh[i].fd, &p->inh[i].addr, a) ||
		    getsockopt(p->inh[i].fd, SOL_SOCKET, SO_REUSEPORT, &on, &len) < 0 || on)
			continue;
		hashlb_addr_format(&p->inh[i].addr, where, size);
		return true;
	}
	return false;
}

int hlb_listener_err(struct hlb_proxy *p, int ret, const struct sockaddr *addr, const char *name,
		     struct hashlb_error *err)
{
	const struct sockaddr_storage *a = (const struct sockaddr_storage *)addr;
	uint16_t port = hashlb_addr_port(a);
	char where[HASHLB_ADDR_STRLEN], held[HASHLB_ADDR_STRLEN];

	hashlb_addr_format(a, where, sizeof(where));
	if (ret == -EADDRINUSE && port && held_refuses(p, a, held, sizeof(held)))
		return hashlb_err(
			err, ret, HASHLB_ERR_SYSTEM,
			"service '%s': cannot listen on %s: %s (hashlb's own socket on %s, "
			"which the service manager passed, has no SO_REUSEPORT: "
			"ReusePort=yes in its .socket unit)",
			name, where, strerror(-ret), held);
	return hlb_bind_err(ret, addr, name, err);
}

/* <l>, which could not get socket <ret> (-errno) of service <name>, freed: the error said. The
 * sockets taken over that it held went with it: <p>'s count of inh[] again. */
static int open_failed(struct hlb_proxy *p, struct hlb_listener *l, int ret, const char *name,
		       struct hashlb_error *err)
{
	struct sockaddr_storage bound = l->bound;

	listener_free(l);
	inh_counted(p);
	return hlb_listener_err(p, ret, (const struct sockaddr *)&bound, name, err);
}

/*
 * Whether two of <l>'s descriptors are one socket: the service manager's, which the hashlb
 * this one replaced shared between its workers and handed on, a descriptor each.
 */
static bool fds_shared(const struct hlb_listener *l)
{
	for (uint32_t i = 0; i < l->n_fds; i++)
		for (uint32_t j = i + 1; j < l->n_fds; j++)
			if (one_socket(l->fds[i], l->fds[j]))
				return true;
	return false;
}

/*
 * <l> listens on the service manager's socket, handed on by an upgrade in place (its copies of
 * one socket): keep a copy of it, as of a socket the manager passed, so that a reload that
 * removes <l>'s address and a later one that adds it back listen on it again. Closed with <l>,
 * it was gone from this process: the manager's socket, still bound there without
 * SO_REUSEPORT, refused the socket that reload bound ("another process listens there").
 * Without a descriptor left, none is kept (as before).
 */
static void taken_keep(struct hlb_proxy *p, const struct hlb_listener *l)
{
	for (uint32_t i = 0; i < p->n_inh; i++) {
		struct inherited *in = &p->inh[i];

		if (in->taken && in->used && in->fd < 0 && !in->kept &&
		    same_listen_addr(&in->addr, &l->bound)) {
			in->fd = fcntl(l->fds[0], F_DUPFD_CLOEXEC, 0);
			in->kept = in->fd >= 0;
			return;
		}
	}
}

int hlb_listener_open(struct hlb_proxy *p, const struct sockaddr *addr, socklen_t addr_len,
		      const char *name, struct hlb_service *svc, bool foreign,
		      struct hlb_listener **ret_listener, struct hashlb_error *err)
{
	struct inherited *in = inherited_for(p, addr);
	struct hlb_listener *l;
	int fd, one = 1;

	l = listener_new(p, addr, addr_len, name, svc);
	if (!l)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	if (in) {
		/* every worker accepts on the one socket (a descriptor each, so
		 * closing works as for our own); it outlives us in the manager */
		setsockopt(in->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		for (uint32_t i = 0; i < p->n_workers; i++) {
			l->fds[i] = fcntl(in->fd, F_DUPFD_CLOEXEC, 0);
			if (l->fds[i] < 0)
				return open_failed(p, l, -errno, name, err);
		}
		in->used = true;
		l->inherited = true;
	}
	for (uint32_t i = 0; i < p->n_workers && !in; i++) {
		socklen_t len = sizeof(l->bound);
		struct inherited *t = taken_for(p, addr, name);

		if (t) {
			/* the same socket as the hashlb this one replaces: nothing
			 * to hand over when it stops (see hlb_proxy_take_over()) */
			if (!hashlb_addr_port(&l->bound))
				l->bound = t->addr; /* port 0: the port it got there */
			l->fds[i] = t->fd;
			t->fd = -1;
			t->used = true;
			l->n_taken++;
			continue;
		}
		/* The service manager's socket handed on (copies of one socket, fds_shared()), to
		 * more workers than the old process had: a descriptor of it each, as for one the
		 * manager passed. Bound without SO_REUSEPORT, it refused the socket a worker bound
		 * of its own beside it, and the upgrade in place that raised workers failed. */
		if (i >= 2 && one_socket(l->fds[0], l->fds[1])) {
			l->fds[i] = fcntl(l->fds[0], F_DUPFD_CLOEXEC, 0);
			if (l->fds[i] < 0)
				return open_failed(p, l, -errno, name, err);
			continue;
		}
		/* Port 0: the first socket picks the port, the others join it. */
		fd = listen_socket(p, (const struct sockaddr *)&l->bound, addr_len, foreign);
		if (fd < 0)
			return open_failed(p, l, fd, name, err);
		l->fds[i] = fd;
		if (i == 0)
			getsockname(fd, (struct sockaddr *)&l->bound, &len);
	}
	if (!in)
		take_extra(p, l, addr, name);
	l->shared = l->n_taken > 1 && fds_shared(l);
	if (l->shared) {
		/* the service manager's socket, however many upgrades in place ago it was
		 * passed: inherited, as in the process the manager started, so that a stop
		 * leaves its backlog to the next start (wlistener_serve_backlog()) and GET
		 * /sockets leaves the socket to the manager (hlb_listener_fds()). Before, it
		 * was taken over only, and this process's stop served that backlog. */
		l->inherited = true;
		taken_keep(p, l);
	}
	inh_counted(p);
	format_addr((const struct sockaddr *)&l->bound, l->bound_name, sizeof(l->bound_name));
	*ret_listener = l;
	return 0;
}

bool hlb_listener_inherited(const struct hlb_listener *l)
{
	return l->inherited;
}

uint32_t hlb_listener_taken(const struct hlb_listener *l)
{
	return l->n_taken;
}

const char *hlb_listener_bound(const struct hlb_listener *l)
{
	return l->bound_name;
}

const char *hlb_listener_handover_name(struct hlb_listener *l)
{
	struct hlb_service *svc = hlb_listener_service(l);

	snprintf(l->handover_name, sizeof(l->handover_name), "%s %s", l->bound_name,
		 svc ? svc->name : l->name);
	return l->handover_name;
}

static void service_unref_cb(void *p)
{
	hlb_service_unref(p);
}

int hlb_listener_set_service(struct hlb_listener *l, struct hlb_service *svc, struct hlb_rcu *rcu)
{
	struct hlb_service *old;

	old = atomic_exchange_explicit(&l->svc, hlb_service_ref(svc), memory_order_acq_rel);
	if (!old || old == svc) {
		hlb_service_unref(old);
		return 0;
	}
	return hlb_rcu_defer(rcu, service_unref_cb, old);
}

const struct sockaddr *hlb_listener_addr(const struct hlb_listener *l, socklen_t *ret_len)
{
	*ret_len = l->addr_len;
	return (const struct sockaddr *)&l->bound;
}

const struct sockaddr *hlb_listener_configured(const struct hlb_listener *l)
{
	return (const struct sockaddr *)&l->addr;
}

const char *hlb_listener_name(const struct hlb_listener *l)
{
	return l->name;
}

struct hlb_service *hlb_listener_service(const struct hlb_listener *l)
{
	return atomic_load_explicit(&l->svc, memory_order_acquire);
}
