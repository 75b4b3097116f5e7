// SPDX-License-Identifier: MIT
/* The daemon: control-thread loop, listeners by address. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "hashlb/grow.h"
#include "hashlb/sysctl.h"
#include "control/buf.h"
#include "daemon.h"
#include "fdpass.h"
#include "log.h"
#include "notify.h"
#include "proxy/proxy.h"
#include "signals.h"

#define RCU_POLL_MS 50

enum watch_kind {
	WATCH_FD = 0,
	WATCH_TIMER,
	WATCH_SIGNAL,
	WATCH_EXIT,
	WATCH_FAILING,
	WATCH_KIND_MAX
};

struct watch {
	struct watch *next;
	enum watch_kind kind;
	int fd;
	bool dead;
	hlb_daemon_fd_fn fd_fn;
	void *arg;
	struct hlb_daemon_timer *timer;
};

struct hlb_daemon_timer {
	struct watch *w;
	hlb_daemon_timer_fn fn;
	void *arg;
};

/* The process an upgrade in place started (pid 0: none). */
struct upgrade {
	pid_t pid;
	int pidfd;
	int sock; /* our end of the pair: the new one writes "READY" on it */
	int resync; /* our end of HLB_FDPASS_RESYNC's socket, -1: none */
	struct hlb_daemon_timer *timer;
	char in[32];
	size_t in_len;
	bool reloaded; /* a reload here since it started: it reloads too once ready */
	/* the addresses of the sockets handed to it, sorted (addr_cmp()): it holds them, so a
	 * reload here that re-adds an address it removed meanwhile finds them taken, by this
	 * service; NULL if none, or short of memory */
	struct sockaddr_storage *handed;
	uint32_t n_handed;
};

#define UPGRADE_TIMEOUT_MS 60000
/* a new process not ready, told to stop (SIGTERM) and still there this long
 * after: stuck (signals blocked, say): SIGKILL. It has accepted little or
 * nothing, not being ready. */
#define UPGRADE_KILL_MS 10000
#define UPGRADE_FD 3 /* where the new process finds its end of the pair */
/* a new process ready, whose old one has not answered READY this long after (stopped, say):
 * hooks.old_stopped all the same, for the kernel path not to keep the old one's last table */
#define OLD_STOP_MS 10000
/* the old one's HLB_FDPASS_RESYNC lines: a bound against a runaway peer (20,000 backends
 * down: 1.5 MB) */
#define RESYNC_TEXT_MAX (256u << 20)
/* Time to exit after the drain deadline, asked of the service manager with the drain's */
#define DRAIN_EXIT_MARGIN_MS 10000

/* A listen address and its state within a listen transaction. */
struct dlistener {
	struct dlistener *next;
	struct hlb_listener *l;
	struct hlb_service *next_svc; /* set by hlb_daemon_listen() in a transaction */
	bool fresh; /* opened in the current transaction, not started yet */
};

/*
 * The listeners by the address they are bound to, and the ports they hold:
 * what hlb_daemon_listen() looks up for each service of a config. A scan of
 * every listener for each service made a reload quadratic in services
 * (8,000 services: 1.5 s of the control thread, health checks and the admin
 * endpoint waiting). Built at a transaction's start and added to as it opens
 * listeners; off (NULL slots: the scans) outside one, or short of memory.
 */
struct listener_index {
	struct dlistener **slot; /* open addressing, NULL: free */
	uint32_t mask;
	uint32_t n;
	uint64_t ports[65536 / 64];
};

struct hlb_daemon {
	/* the initial config until hooks.start takes it */
	struct hashlb_config *cfg;
	char *config_path;
	struct hlb_daemon_opts opts;
	struct hlb_daemon_hooks hooks;
	uint32_t n_workers;
	struct hlb_rcu *rcu;
	struct hlb_proxy *proxy;
	uint64_t fd_fit; /* the connections the fd limit allows (set_fd_limit()), 0: any */
	uint64_t nofile; /* that limit, 0: none (RLIM_INFINITY) */
	bool fd_tiny; /* that limit is tiny: a quarter of it, no share taken off */
	uint64_t cap_logged; /* the cap in force last logged (log_cap()), 0: none */
	const _Atomic uint32_t *other_fds; /* hlb_daemon_count_fds(), NULL: none */
	uint32_t admin_fds; /* hlb_daemon_admin_fds() */
	int epfd;
	int sigfd;
	struct watch *watches;
	struct dlistener *listeners;
	struct listener_index index;
	bool in_txn;
	bool running;
	bool stopping;
	bool stop_now;
	bool stop_signalled; /* a SIGTERM/SIGINT/SIGQUIT came (not only an upgrade's handover) */
	struct hlb_daemon_hold *holds; /* hlb_daemon_hold(): the run ends once none is left */
	uint32_t failed; /* workers seen failed (hlb_proxy_failed()): the run failed */
	uint64_t drain_start_ms; /* CLOCK_MONOTONIC, when stopping began */
	uint64_t generation;
	/* upgrade in place (SIGUSR2) */
	char *exe; /* this executable's path when it started; NULL: unknown */
	struct upgrade up; /* the new process, until it is ready or has failed */
	bool handed_over; /* it is ready: the service manager follows it now */
	/* that process (our child, not reaped), 0: none; then the one that it, or one after it,
	 * handed over to in turn, as they tell this one ("successor PID" on succ_fd) */
	pid_t successor;
	int successor_pidfd; /* successor's, -1: none */
	int taker_pidfd; /* the last hashlb that GET /sockets gave sockets to; -1: none */
	pid_t taker; /* its pid */
	/* the last upgrade that failed: its process (-1: none started), and how */
	pid_t up_failed_pid;
	char up_failed_how[PATH_MAX + 128]; /* why; the file, if it could not run */
	int ready_fd; /* started by an upgrade in place: tell the old one when ready; else -1 */
	/* started so: the old one's health once this one is ready (HLB_FDPASS_RESYNC) */
	int resync_fd;
	bool old_stopped; /* hooks.old_stopped called */
	struct hlb_daemon_timer *old_stop_timer; /* OLD_STOP_MS after READY */
	char *resync_text;
	size_t resync_len, resync_cap;
	/* that socket once the health is in: requests to the old one (hlb_daemon_close_old()) */
	int parent_fd;
	char parent_in[512]; /* its answer being read, or a line of HLB_FDPASS_QUEUED */
	size_t parent_len;
	/* the descriptors that came with its HLB_FDPASS_QUEUED lines, not read yet, in order:
	 * parent_fds[parent_fds_head, n_parent_fds), -1 for one the kernel could not give this
	 * process (the fd limit: MSG_CTRUNC), its line refused; <lost>: one could not be kept
	 * (no memory), so which line each belongs to is not known: every line is refused until
	 * HLB_FDPASS_QUEUED_END */
	int *parent_fds;
	size_t parent_fds_head, n_parent_fds, parent_fds_cap;
	bool parent_fds_lost;
	/* of the clients it hands over since the last HLB_FDPASS_QUEUED_END: how many came, how
	 * many were taken, and which (bit i: line i, taken_words 64-bit words; the others are
	 * refused in the answer, HLB_FDPASS_REFUSED lines) */
	size_t queued_seen, adopted;
	uint64_t *taken_bits;
	size_t taken_words;
	/* those requests in the order asked: the first sent and waiting for its answer until
	 * ask_timer fires, the others behind it */
	struct old_ask *asks, **asks_tail;
	struct hlb_daemon_timer *ask_timer; /* for the first: NULL until a request is made */
	uint64_t ask_due_ms; /* its time, CLOCK_MONOTONIC */
	/* an upgrade in place handed over: the new one's requests come on this socket */
	int succ_fd;
	char succ_in[2 * HASHLB_NAME_MAX + 32];
	size_t succ_len;
	/* its HLB_FDPASS_QUEUE: the clients lent to it from the queues, until it answers which it
	 * refused (those come back), or exits (all come back), or the channel breaks or lent_timer
	 * fires while it lives (this one closes its copies: those are its); <lent_pidfd> its
	 * pidfd, opened as it asks (-1: none) */
	struct hlb_lent *lent;
	size_t n_lent;
	size_t n_not_lent; /* of that lending, the clients left in the queues, never lent */
	bool lent_watched, lent_sent;
	/* the channel broke before the answer: lent_timer waits LENT_EXIT_MS for its exit, and
	 * <lent_pidfd> is watched for it (lent_broken()) */
	bool lent_broken, lent_pid_watched;
	struct hlb_daemon_timer *lent_timer;
	int lent_pidfd;
};

static int watch_add(struct hlb_daemon *d, enum watch_kind kind, int fd, uint32_t events,
		     struct watch **ret_watch)
{
	struct epoll_event ev = { .events = events };
	struct watch *w;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->kind = kind;
	w->fd = fd;
	ev.data.ptr = w;
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int r = -errno;

		free(w);
		return r;
	}
	w->next = d->watches;
	d->watches = w;
	*ret_watch = w;
	return 0;
}

static void watch_kill(struct hlb_daemon *d, struct watch *w)
{
	if (w->dead)
		return;
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	w->dead = true;
}

/* Free dead watches; only between dispatch rounds. */
static void watch_reap(struct hlb_daemon *d)
{
	struct watch **pp = &d->watches, *w;

	while ((w = *pp)) {
		if (!w->dead) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		if (w->kind == WATCH_TIMER) {
			close(w->fd);
			free(w->timer);
		}
		free(w);
	}
}

int hlb_daemon_watch(struct hlb_daemon *d, int fd, uint32_t events, hlb_daemon_fd_fn fn, void *arg)
{
	struct watch *w = NULL; /* set when watch_add() returns 0 */
	int r;

	r = watch_add(d, WATCH_FD, fd, events, &w);
	if (r < 0)
		return r;
	w->fd_fn = fn;
	w->arg = arg;
	return 0;
}

void hlb_daemon_unwatch(struct hlb_daemon *d, int fd)
{
	for (struct watch *w = d->watches; w; w = w->next)
		if (w->kind == WATCH_FD && w->fd == fd && !w->dead) {
			watch_kill(d, w);
			return;
		}
}

int hlb_daemon_timer_set(struct hlb_daemon_timer *t, uint64_t after_ms, uint64_t every_ms)
{
	struct itimerspec its = { 0 };

	if (!after_ms)
		after_ms = 1; /* 0 would disarm */
	its.it_value.tv_sec = after_ms / 1000;
	its.it_value.tv_nsec = (after_ms % 1000) * 1000000;
	its.it_interval.tv_sec = every_ms / 1000;
	its.it_interval.tv_nsec = (every_ms % 1000) * 1000000;
	if (timerfd_settime(t->w->fd, 0, &its, NULL) < 0)
		return -errno;
	return 0;
}

int hlb_daemon_timer_add(struct hlb_daemon *d, uint64_t after_ms, uint64_t every_ms,
			 hlb_daemon_timer_fn fn, void *arg, struct hlb_daemon_timer **ret_timer)
{
	struct hlb_daemon_timer *t;
	int fd, r;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (fd < 0) {
		r = -errno;
		free(t);
		return r;
	}
	r = watch_add(d, WATCH_TIMER, fd, EPOLLIN, &t->w);
	if (r < 0) {
		close(fd);
		free(t);
		return r;
	}
	t->w->timer = t;
	t->fn = fn;
	t->arg = arg;
	r = hlb_daemon_timer_set(t, after_ms, every_ms);
	if (r < 0) {
		hlb_daemon_timer_del(d, t);
		return r;
	}
	if (ret_timer)
		*ret_timer = t;
	return 0;
}

void hlb_daemon_timer_del(struct hlb_daemon *d, struct hlb_daemon_timer *t)
{
	if (t)
		watch_kill(d, t->w);
}

struct hlb_rcu *hlb_daemon_rcu(const struct hlb_daemon *d)
{
	return d->rcu;
}

const char *hlb_daemon_config_path(const struct hlb_daemon *d)
{
	return d->config_path;
}

uint64_t hlb_daemon_next_generation(struct hlb_daemon *d)
{
	return ++d->generation;
}

uint64_t hlb_daemon_connections(const struct hlb_daemon *d)
{
	return hlb_proxy_connections(d->proxy);
}

uint64_t hlb_daemon_max_connections(const struct hlb_daemon *d)
{
	return hlb_proxy_max_connections(d->proxy);
}

void hlb_daemon_count_fds(struct hlb_daemon *d, const _Atomic uint32_t *fds)
{
	d->other_fds = fds;
	hlb_proxy_count_fds(d->proxy, fds);
}

void hlb_daemon_admin_fds(struct hlb_daemon *d, uint32_t n)
{
	d->admin_fds = n;
}

bool hlb_daemon_worker_stats(const struct hlb_daemon *d, uint32_t i, struct hlb_worker_stats *ret)
{
	return hlb_proxy_worker_stats(d->proxy, i, ret);
}

void hlb_daemon_kick_queues(struct hlb_daemon *d, struct hlb_service *svc)
{
	if (d->proxy)
		hlb_proxy_kick_queues(d->proxy, svc);
}

void hlb_daemon_set_hooks(struct hlb_daemon *d, const struct hlb_daemon_hooks *hooks)
{
	d->hooks = *hooks;
}

/* ---- listeners ------------------------------------------------------------ */

/* Whether a running listener serves <addr> for <svc> after a reload. An
 * address with a port is matched against what listeners are bound to, so a
 * config that names the port a port-0 listener got keeps it. Port 0 ("any
 * free port") keeps the listener the same service had from the same port-0
 * address: a reload that changes nothing must not move a service's port. The
 * one rule for "the same listener": a service left on another than its own is
 * said to have moved (hlb_service.listener_moved, the reload's changed=listen). */
static bool listener_matches(const struct dlistener *dl, const struct sockaddr *addr,
			     const struct hlb_service *svc)
{
	socklen_t len;

	if (hashlb_addr_port((const struct sockaddr_storage *)addr))
		return hlb_sockaddr_same(hlb_listener_addr(dl->l, &len), addr);
	return !dl->next_svc && hlb_sockaddr_same(hlb_listener_configured(dl->l), addr) &&
	       strcmp(hlb_listener_service(dl->l)->name, svc->name) == 0;
}

/* A hash of what hlb_sockaddr_same() compares: the port and the address. */
static uint32_t sockaddr_hash(const struct sockaddr *a)
{
	const struct sockaddr_in *in = (const void *)a;
	const struct sockaddr_in6 *in6 = (const void *)a;

	if (a->sa_family == AF_INET)
		return (uint32_t)XXH3_64bits_withSeed(&in->sin_addr, sizeof(in->sin_addr),
						      in->sin_port);
	return (uint32_t)XXH3_64bits_withSeed(&in6->sin6_addr, sizeof(in6->sin6_addr),
					      in6->sin6_port);
}

static void index_off(struct listener_index *x)
{
	free(x->slot);
	x->slot = NULL;
	x->mask = 0;
	x->n = 0;
}

static void index_put(struct listener_index *x, struct dlistener *dl);

/* Twice the slots (64 at first); off when out of memory. */
static void index_grow(struct listener_index *x)
{
	uint32_t size = x->slot ? (x->mask + 1) * 2 : 64, old_size = x->slot ? x->mask + 1 : 0;
	struct dlistener **old = x->slot;

	x->slot = calloc(size, sizeof(*x->slot));
	x->mask = size - 1;
	x->n = 0;
	for (uint32_t i = 0; x->slot && i < old_size; i++)
		if (old[i])
			index_put(x, old[i]);
	free(old);
	if (!x->slot)
		index_off(x);
}

static void index_put(struct listener_index *x, struct dlistener *dl)
{
	socklen_t len;
	const struct sockaddr *a = hlb_listener_addr(dl->l, &len);
	uint16_t port = hashlb_addr_port((const struct sockaddr_storage *)a);
	uint32_t i;

	if (!x->slot)
		return; /* off for this transaction: growing it now would miss those before */
	x->ports[port / 64] |= 1ULL << (port % 64);
	if ((x->n + 1) * 2 > x->mask + 1)
		index_grow(x);
	if (!x->slot)
		return;
	for (i = sockaddr_hash(a) & x->mask; x->slot[i]; i = (i + 1) & x->mask)
		;
	x->slot[i] = dl;
	x->n++;
}

/* The listener bound to <addr>, NULL if none: the listeners it read counted (hlb_match_reads()). */
static struct dlistener *index_find(const struct listener_index *x, const struct sockaddr *addr)
{
	struct dlistener *hit = NULL;
	uint64_t reads = 0;
	socklen_t len;

	for (uint32_t i = sockaddr_hash(addr) & x->mask; x->slot[i] && !hit;
	     i = (i + 1) & x->mask) {
		reads++;
		if (hlb_sockaddr_same(hlb_listener_addr(x->slot[i]->l, &len), addr))
			hit = x->slot[i];
	}
	hlb_match_reads_add(reads);
	return hit;
}

/*
 * The addresses a socket may be bound to (as getsockname() gives them) for a bind of <a>,
 * not a wildcard, to collide with it (hashlb_listen_clash(): the kernel's rule, SO_REUSEPORT
 * aside): <a>, the wildcards of its port that cover it and, for IPv4, both ways of writing
 * each (a.b.c.d and [::ffff:a.b.c.d]). In <ret>; their count, -1 if <a> is a wildcard (it
 * collides with every address of its port its family takes: look at each).
 */
static int clash_addrs(const struct sockaddr_storage *a, struct sockaddr_storage ret[5])
{
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)a;
	in_port_t port =
		a->ss_family == AF_INET ? ((const struct sockaddr_in *)a)->sin_port : a6->sin6_port;
	struct in_addr v4;
	int n = 0;

	if (hashlb_addr_is_any(a))
		return -1;
	memset(ret, 0, 5 * sizeof(*ret));
	if (a->ss_family == AF_INET6 && !IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
		ret[n++] = *a;
	} else {
		if (a->ss_family == AF_INET)
			v4 = ((const struct sockaddr_in *)a)->sin_addr;
		else
			memcpy(&v4, &a6->sin6_addr.s6_addr[12], 4);
		for (int any = 0; any < 2; any++) {
			struct sockaddr_in *s = (struct sockaddr_in *)&ret[n++];
			struct sockaddr_in6 *m = (struct sockaddr_in6 *)&ret[n++];

			s->sin_family = AF_INET;
			s->sin_port = port;
			s->sin_addr.s_addr = any ? INADDR_ANY : v4.s_addr;
			m->sin6_family = AF_INET6;
			m->sin6_port = port;
			m->sin6_addr.s6_addr[10] = m->sin6_addr.s6_addr[11] = 0xff;
			memcpy(&m->sin6_addr.s6_addr[12], &s->sin_addr, 4);
		}
	}
	/* [::]: hashlb's IPv6 listeners are dual-stack */
	((struct sockaddr_in6 *)&ret[n])->sin6_family = AF_INET6;
	((struct sockaddr_in6 *)&ret[n++])->sin6_port = port;
	return n;
}

/*
 * Whether one of our listeners is bound where a bind of <addr> collides: <addr>, a wildcard
 * covering it, or an address it covers (a service moving from 127.0.0.1:P to 0.0.0.0:P). Not
 * any address of the port: a listener of ours on 127.0.0.1:P is no reason for a bind of
 * 127.0.0.2:P to fail.
 */
static bool own_clash(const struct hlb_daemon *d, const struct sockaddr *addr)
{
	const struct sockaddr_storage *a = (const struct sockaddr_storage *)addr;
	uint16_t port = hashlb_addr_port(a);
	struct sockaddr_storage near[5];
	const struct dlistener *dl;
	uint64_t reads = 0;
	socklen_t len;
	int n;

	if (d->index.slot) {
		if (!(d->index.ports[port / 64] >> (port % 64) & 1))
			return false;
		n = clash_addrs(a, near);
		for (int i = 0; i < n; i++)
			if (index_find(&d->index, (const struct sockaddr *)&near[i]))
				return true;
		if (n >= 0)
			return false;
	}
	for (dl = d->listeners; dl; dl = dl->next) {
		reads++;
		if (hashlb_listen_clash(
			    (const struct sockaddr_storage *)hlb_listener_addr(dl->l, &len), a))
			break;
	}
	hlb_match_reads_add(reads);
	return dl != NULL;
}

/* Socket addresses in an order: family, port, address (what hlb_sockaddr_same() compares, the
 * scope aside). */
static int addr_cmp(const void *x, const void *y)
{
	const struct sockaddr_storage *a = x, *b = y;
	const struct sockaddr_in *a4 = x, *b4 = y;
	const struct sockaddr_in6 *a6 = x, *b6 = y;
	uint16_t pa = hashlb_addr_port(a), pb = hashlb_addr_port(b);

	if (a->ss_family != b->ss_family)
		return a->ss_family < b->ss_family ? -1 : 1;
	if (pa != pb)
		return pa < pb ? -1 : 1;
	if (a->ss_family == AF_INET)
		return memcmp(&a4->sin_addr, &b4->sin_addr, sizeof(a4->sin_addr));
	return memcmp(&a6->sin6_addr, &b6->sin6_addr, sizeof(a6->sin6_addr));
}

/* Whether a socket an upgrade in place under way was handed is bound where a bind of <addr>
 * collides (a reload re-adding an address it removed since: the new process still holds the
 * socket), as own_clash() for our listeners. */
static bool handed_clash(const struct hlb_daemon *d, const struct sockaddr *addr)
{
	const struct sockaddr_storage *a = (const struct sockaddr_storage *)addr;
	const struct upgrade *up = &d->up;
	struct sockaddr_storage near[5];
	int n;

	if (!up->pid || !up->handed)
		return false;
	n = clash_addrs(a, near);
	for (int i = 0; i < n; i++)
		if (bsearch(&near[i], up->handed, up->n_handed, sizeof(*up->handed), addr_cmp))
			return true;
	for (uint32_t i = 0; n < 0 && i < up->n_handed; i++)
		if (hashlb_listen_clash(&up->handed[i], a))
			return true;
	return false;
}

void hlb_daemon_listen_begin(struct hlb_daemon *d)
{
	d->in_txn = true;
	index_off(&d->index);
	memset(d->index.ports, 0, sizeof(d->index.ports));
	index_grow(&d->index);
	for (struct dlistener *dl = d->listeners; dl; dl = dl->next) {
		dl->next_svc = NULL;
		index_put(&d->index, dl);
	}
}

int hlb_daemon_listen(struct hlb_daemon *d, const struct sockaddr *addr, socklen_t addr_len,
		      const char *name, struct hlb_service *svc, struct hashlb_error *err)
{
	char shared[HASHLB_ADDR_STRLEN] = "";
	struct dlistener *dl;
	int r;

	if (hashlb_addr_port((const struct sockaddr_storage *)addr) && d->index.slot) {
		dl = index_find(&d->index, addr);
	} else { /* the index off (port 0, short of memory): a scan */
		uint64_t reads = 0;

		for (dl = d->listeners; dl; dl = dl->next) {
			reads++;
			if (listener_matches(dl, addr, svc))
				break;
		}
		hlb_match_reads_add(reads);
	}
	if (dl) {
		if (dl->next_svc)
			return hashlb_err(err, -EADDRINUSE, HASHLB_ERR_SYSTEM,
					  "two services listen on %s", name);
		dl->next_svc = svc;
		return 0;
	}
	/* A reload's new address: refused if another process listens there
	 * (our SO_REUSEPORT bind would succeed beside it and take part of its
	 * clients). Not where the bind would collide with a socket of ours (a
	 * service moving from 127.0.0.1:P to 0.0.0.0:P), or one handed to an
	 * upgrade under way: the probe cannot tell theirs from ours. At start
	 * only a warning: an upgrade side by side (admin: off, or a takeover
	 * that failed) binds beside the old hashlb on purpose, but so does a
	 * second instance whose config listens there too, and each would take
	 * part of the other's clients to its own backends, unsaid. Warned of
	 * once bound beside it: a socket without SO_REUSEPORT (or another
	 * user's) refuses the bind, and the start fails saying so. */
	if (hashlb_addr_port((const struct sockaddr_storage *)addr) && !own_clash(d, addr) &&
	    !handed_clash(d, addr)) {
		r = hlb_listener_probe(d->proxy, addr, addr_len);
		if (r < 0) {
			hashlb_addr_format((const struct sockaddr_storage *)addr, shared,
					   sizeof(shared));
			if (d->running)
				return hlb_listener_err(d->proxy, r, addr, name, err);
		}
	}
	dl = calloc(1, sizeof(*dl));
	if (!dl)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	r = hlb_listener_open(d->proxy, addr, addr_len, name, svc, *shared != '\0', &dl->l, err);
	if (r < 0) {
		free(dl);
		return r;
	}
	if (*shared)
		hlb_log(HLB_LOG_WARN, "another process listens on this address too",
			"service=%s addr=%s note=\"the kernel shares new clients between its "
			"sockets and this hashlb's: stop it once this one is ready if it is the "
			"hashlb this one replaces; else it is another instance whose config "
			"listens here too (ss -ltnp names it)\"",
			svc->name, shared);
	dl->next_svc = svc;
	dl->fresh = true;
	dl->next = d->listeners;
	d->listeners = dl;
	if (d->index.slot)
		index_put(&d->index, dl);
	return 0;
}

/* <svc> listens on <l> from now on: the address it was bound to kept as the one before */
static void bound_set(struct hlb_service *svc, const struct hlb_listener *l)
{
	socklen_t len;
	const struct sockaddr *a = hlb_listener_addr(l, &len);

	svc->bound_was = svc->bound_addr;
	svc->bound_was_len = svc->bound_addr_len;
	memcpy(&svc->bound_addr, a, len);
	svc->bound_addr_len = len;
}

void hlb_daemon_listen_commit(struct hlb_daemon *d)
{
	struct dlistener **pp = &d->listeners, *dl;

	while ((dl = *pp)) {
		if (!dl->next_svc) {
			/* service= is the one it served last: not always the one it
			 * was opened for (two services swapped addresses) */
			struct hlb_service *was = hlb_listener_service(dl->l);

			hlb_log(HLB_LOG_INFO, "listener closed", "addr=%s service=%s",
				hlb_listener_bound(dl->l),
				was ? was->name : hlb_listener_name(dl->l));
			*pp = dl->next;
			hlb_listener_close(d->proxy, dl->l);
			free(dl);
			continue;
		}
		if (dl->fresh) {
			hlb_listener_start(d->proxy, dl->l);
			hlb_log(HLB_LOG_INFO, "listening",
				"addr=%s service=%s workers=%u%s taken_over=%u",
				hlb_listener_bound(dl->l), dl->next_svc->name, d->n_workers,
				hlb_listener_inherited(dl->l) ? " socket=inherited" : "",
				hlb_listener_taken(dl->l));
		}
		dl->next_svc->listener_moved =
			dl->fresh || hlb_listener_service(dl->l) != dl->next_svc;
		bound_set(dl->next_svc, dl->l);
		if (!dl->fresh && dl->next_svc->listener_moved)
			hlb_listener_set_service(dl->l, dl->next_svc, d->rcu);
		snprintf(dl->next_svc->bound, sizeof(dl->next_svc->bound), "%s",
			 hlb_listener_bound(dl->l));
		dl->fresh = false;
		dl->next_svc = NULL;
		pp = &dl->next;
	}
	index_off(&d->index);
	d->in_txn = false;
}

void hlb_daemon_listen_abort(struct hlb_daemon *d)
{
	struct dlistener **pp = &d->listeners, *dl;

	while ((dl = *pp)) {
		dl->next_svc = NULL;
		if (dl->fresh) {
			*pp = dl->next;
			hlb_listener_close(d->proxy, dl->l);
			free(dl);
			continue;
		}
		pp = &dl->next;
	}
	index_off(&d->index);
	d->in_txn = false;
}

/* ---- lifecycle ------------------------------------------------------------ */

static uint32_t cpu_count(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (uint32_t)n : 1;
}

/* Whether a socket taken over at <addr>, for service <svc>, is one <arg> (a config) has use
 * for: a service whose listen address is that one or overlaps it, or, listening on port 0
 * (the port the old one got), one of that name. A name alone does not tell: two instances
 * may well both call a service "web". */
static bool config_listens_there(void *arg, const struct sockaddr_storage *addr, const char *svc)
{
	const struct hashlb_config *cfg = arg;

	for (uint32_t i = 0; i < cfg->n_services; i++) {
		const struct hashlb_service_cfg *s = &cfg->services[i];

		if (hashlb_addr_port(&s->listen_addr) ? hashlb_listen_clash(&s->listen_addr, addr)
						      : !strcmp(s->name, svc))
			return true;
	}
	return false;
}

/*
 * An upgrade: a hashlb already running on this config's admin address hands
 * its listening sockets over, and this one listens on the very same sockets
 * (hlb_proxy_take_over()). Without it (admin off or on port 0, nobody
 * there, an older hashlb, one silent for 10 s: stopped or stuck) the
 * listeners are bound beside the old ones. A hashlb there that listens on
 * none of this config's addresses (config_listens_there()) is another
 * instance, not one to replace: sharing its admin address, each would answer
 * half of the requests meant for the other (and it would refuse every set,
 * handed over): refused, -EADDRINUSE.
 */
static int take_over(struct hlb_daemon *d, struct hashlb_error *err)
{
	const char *from;
	const char *fd_env = getenv("HASHLB_UPGRADE_FD");
	char why[384], qf[512], qv[64], qw[4 * sizeof(why)];
	int r;

	from = hlb_log_quote(d->cfg->admin ? d->cfg->admin : "?", qf, sizeof(qf));
	if (fd_env && atoi(fd_env) != UPGRADE_FD) {
		/* the value whole, however long (the environment's are up to 128 KiB); short of
		 * memory, cut to qv */
		size_t qsize = HLB_LOG_QUOTED_MAX(strlen(fd_env));
		char *q = malloc(qsize);

		hlb_log(HLB_LOG_WARN, "HASHLB_UPGRADE_FD ignored: not set by a hashlb", "value=%s",
			q ? hlb_log_quote(fd_env, q, qsize)
			  : hlb_log_quote(fd_env, qv, sizeof(qv)));
		free(q);
		unsetenv("HASHLB_UPGRADE_FD");
		fd_env = NULL;
	}
	if (fd_env) {
		/* an upgrade in place: the old process started this one */
		d->ready_fd = UPGRADE_FD;
		unsetenv("HASHLB_UPGRADE_FD");
		fcntl(d->ready_fd, F_SETFD, FD_CLOEXEC);
		from = "parent"; /* SIGUSR2 */
		r = hlb_proxy_take_over_fd(d->proxy, d->ready_fd, why, sizeof(why));
	} else if (d->cfg->admin_addr_len) {
		r = hlb_proxy_take_over(d->proxy, (const struct sockaddr *)&d->cfg->admin_addr,
					d->cfg->admin_addr_len, why, sizeof(why));
	} else {
		return 0;
	}
	if (r > 0 && !fd_env && !hlb_proxy_taken_any(d->proxy, config_listens_there, d->cfg)) {
		pid_t other = hlb_proxy_taken_from(d->proxy);

		hlb_proxy_take_drop(d->proxy);
		hashlb_err(err, -EADDRINUSE, HASHLB_ERR_CONFIG,
			   /* under hashlb_error's 255 bytes, which cut its middle: the
			    * remedy, the point of the line, was lost in "addresse...dress" */
			   "admin: %s is the admin endpoint of another hashlb (pid %d), which "
			   "listens on none of this config's addresses: give each its own admin "
			   "address (or, to move the one there, reload it or upgrade it in place)",
			   d->cfg->admin, (int)other);
		if (!d->cfg->admin_override && d->cfg->admin_pos.line) {
			err->line =
				d->cfg->admin_pos.line; /* the file: the caller's (d->cfg goes) */
			err->column = d->cfg->admin_pos.column;
		}
		return -EADDRINUSE;
	}
	if (r > 0 && !strcmp(from, "parent"))
		hlb_log(HLB_LOG_INFO, "listening sockets taken over", "count=%d from=%s pid=%d", r,
			from, (int)hlb_proxy_taken_from(d->proxy));
	else if (r > 0) /* beside it: the old one serves on, which a second run started by
			 * mistake (a hashlb on that config already) would not expect */
		hlb_log(HLB_LOG_INFO, "listening sockets taken over",
			"count=%d from=%s pid=%d note=\"pid %d serves beside this one until it "
			"stops: send it SIGTERM to finish the upgrade (it drains)\"",
			r, from, (int)hlb_proxy_taken_from(d->proxy),
			(int)hlb_proxy_taken_from(d->proxy));
	else if (r == -ETIMEDOUT) /* stopped or stuck: it answered nothing in 10 s */
		hlb_log(HLB_LOG_WARN, "cannot take over listening sockets, binding new ones",
			"from=%s err=ETIMEDOUT note=\"the old hashlb did not answer: its run-time "
			"settings are not carried over, and what waits in its queues is reset when it "
			"stops\"",
			from);
	else if (r < 0 && why[0]) /* an answer not whole: what was wrong with it */
		hlb_log(HLB_LOG_WARN, "cannot take over listening sockets, binding new ones",
			"from=%s err=%s answer=%s", from, strerrorname_np(-r),
			hlb_log_quote(why, qw, sizeof(qw)));
	else if (r < 0)
		hlb_log(HLB_LOG_WARN, "cannot take over listening sockets, binding new ones",
			"from=%s err=%s", from, strerrorname_np(-r));
	else if (why[0])
		hlb_log(HLB_LOG_INFO, "no listening sockets taken over, binding new ones",
			"from=%s answer=%s", from, hlb_log_quote(why, qw, sizeof(qw)));
	return 0;
}

static void old_exited(struct hlb_daemon *d, int fd, uint32_t events, void *arg)
{
	(void)events;
	hlb_log(HLB_LOG_INFO, "the hashlb that handed its sockets over has exited", "pid=%d",
		(int)(intptr_t)arg);
	hlb_daemon_unwatch(d, fd);
	close(fd);
	hlb_proxy_old_gone(d->proxy);
}

/* Follow the hashlb the sockets came from until it exits (see TAKEOVER_*). */
static void watch_old(struct hlb_daemon *d)
{
	pid_t pid = hlb_proxy_taken_from(d->proxy);
	int fd;

	if (!pid)
		return;
	fd = hlb_proxy_take_pidfd(d->proxy);
	if (fd < 0 || hlb_daemon_watch(d, fd, EPOLLIN, old_exited, (void *)(intptr_t)pid) < 0) {
		if (fd >= 0)
			close(fd);
		hlb_proxy_old_gone(d->proxy); /* gone already, or cannot tell: look once */
	}
}

int hlb_daemon_new(struct hashlb_config *cfg, const char *config_path,
		   const struct hlb_daemon_opts *opts, struct hlb_daemon **ret_daemon,
		   struct hashlb_error *err)
{
	struct hlb_proxy_opts popts = { 0 };
	struct hlb_daemon *d;
	struct watch *w;
	sigset_t mask;
	int r;

	d = calloc(1, sizeof(*d));
	if (!d) {
		hashlb_config_free(cfg);
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	}
	d->cfg = cfg;
	d->epfd = -1;
	d->sigfd = -1;
	d->ready_fd = -1;
	d->taker_pidfd = -1;
	d->up.pidfd = d->up.sock = d->up.resync = -1;
	d->resync_fd = d->parent_fd = d->succ_fd = d->successor_pidfd = d->lent_pidfd = -1;
	d->asks_tail = &d->asks;
	d->opts = *opts;
	d->exe = realpath("/proc/self/exe", NULL);
	d->config_path = strdup(config_path ? config_path : "");
	d->n_workers = opts->workers ? opts->workers : cfg->workers ? cfg->workers : cpu_count();
	if (d->n_workers > HLB_WORKERS_MAX) { /* auto on a host with more CPUs */
		hlb_log(HLB_LOG_WARN, "workers capped", "cpus=%u workers=%u", d->n_workers,
			HLB_WORKERS_MAX);
		d->n_workers = HLB_WORKERS_MAX;
	}
	if (!d->config_path) {
		r = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		goto err_free;
	}

	sigemptyset(&mask);
	hlb_sigset_add_stops(&mask);
	/* a stop inherited ignored (SIGINT, SIGQUIT of a shell's background job,
	 * spared a Ctrl-C at its terminal) stays ignored, as it was while the
	 * config loaded: blocked, the signalfd took it even so, and the job stopped */
	hlb_sigset_del_ignored(&mask);
	/* the commands are taken even inherited ignored, as nginx and HAProxy take
	 * them: SIGHUP is the reload under nohup too, which an operator's kill -HUP
	 * (a logrotate script's, a deploy's) must not find silently ignored; SIGUSR1
	 * only to be ignored, its default action killing the process at once, every
	 * connection reset */
	hlb_sigset_add_commands(&mask);
	/* blocked before any worker starts, so every thread inherits the mask */
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	d->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	d->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (d->sigfd < 0 || d->epfd < 0) {
		r = hashlb_err(err, -errno, HASHLB_ERR_SYSTEM, "signalfd/epoll: %m");
		goto err_free;
	}
	r = watch_add(d, WATCH_SIGNAL, d->sigfd, EPOLLIN, &w);
	if (r < 0) {
		hashlb_err(err, r, HASHLB_ERR_SYSTEM, "epoll: %s", strerror(-r));
		goto err_free;
	}

	r = hlb_rcu_new(d->n_workers, &d->rcu);
	if (r < 0) {
		hashlb_err(err, r, HASHLB_ERR_NOMEM, "out of memory");
		goto err_free;
	}
	popts.n_workers = d->n_workers;
	popts.pin_cpus = opts->pin_cpus;
	popts.buf_size = opts->buf_size;
	popts.buf_count = opts->buf_count;
	popts.splice_after = opts->splice_after;
	popts.splice_pipes = opts->splice_pipes;
	popts.pipe_size = opts->pipe_size;
	popts.busy_poll_us = opts->busy_poll_us;
	r = hlb_proxy_new(&popts, d->rcu, &d->proxy, err);
	if (r < 0)
		goto err_free;
	r = hlb_proxy_adopt_listeners(d->proxy, err);
	if (r < 0)
		goto err_free;
	if (r > 0)
		hlb_log(HLB_LOG_INFO, "sockets from the service manager", "count=%d", r);
	r = take_over(d, err);
	if (r < 0) {
		if (err->line)
			err->file = config_path;
		goto err_free;
	}
	r = watch_add(d, WATCH_EXIT, hlb_proxy_exit_fd(d->proxy), EPOLLIN, &w);
	if (r == 0)
		r = watch_add(d, WATCH_FAILING, hlb_proxy_failing_fd(d->proxy), EPOLLIN, &w);
	if (r < 0) {
		hashlb_err(err, r, HASHLB_ERR_SYSTEM, "epoll: %s", strerror(-r));
		goto err_free;
	}
	*ret_daemon = d;
	return 0;

err_free:
	hlb_daemon_free(d);
	return r;
}

/* A socket the service manager passed that no service listens on: kept (a
 * reload may add the service), but most likely a mistake in the .socket unit.
 * It listens, so its clients connect and then wait: said, with what to do. */
static void log_unused_sockets(struct hlb_daemon *d)
{
	char addr[64];

	for (uint32_t i = 0; i < hlb_proxy_inherited_count(d->proxy); i++)
		if (!hlb_proxy_inherited(d->proxy, i, addr, sizeof(addr)))
			hlb_log(HLB_LOG_WARN, "socket from the service manager matches no service",
				"addr=%s note=\"clients that connect there wait in its backlog, "
				"never served: remove it from the socket unit (ListenStream=), or "
				"add a service listening there (a reload takes it)\"",
				addr);
}

/*
 * The soft fd limit raised to the hard one, and the connection cap set: the
 * one given, else what the limit allows, two fds per proxied connection and
 * a reserve for the rings and the admin endpoint, its connections too; the
 * listeners, splice pipes and health checks take their share off it in the
 * proxy (hlb_proxy_set_max_connections(), hlb_proxy_count_fds()). At the
 * cap clients wait in the backlog instead of being accepted and closed for
 * want of a descriptor for their backend.
 */
static void set_fd_limit(struct hlb_daemon *d)
{
	uint64_t max_conns = d->opts.max_conns;
	struct rlimit rl;
	uint64_t reserve = 64 + 4 * (uint64_t)d->n_workers, fit;
	bool tiny = false, shares;
	char capf[40] = "";

	if (d->cfg->admin_addr_len) /* its connections: the reserve holds its socket */
		reserve += d->admin_fds;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur == RLIM_INFINITY)
		fit = 0; /* no cap from the limit */
	else if (rl.rlim_cur > 2 * reserve)
		fit = (rl.rlim_cur - reserve) / 2;
	else { /* a tiny limit (tests): a quarter of it, and at least one */
		fit = rl.rlim_cur >= 8 ? rl.rlim_cur / 4 : 1;
		tiny = true;
	}
	/* the listeners' and splice pipes' shares come off what the limit allows */
	shares = !max_conns && fit && !tiny;
	hlb_proxy_set_max_connections(d->proxy, max_conns ? max_conns : fit, shares);
	/*
	 * max_connections= only where it is the cap: with the shares to come
	 * off, the "connection cap" line gives it (log_cap()), and a number
	 * before them under that name read as the cap (9928 for 9923)
	 */
	if (!shares)
		snprintf(capf, sizeof(capf), " max_connections=%" PRIu64,
			 max_conns ? max_conns : fit);
	hlb_log(HLB_LOG_INFO, "file descriptor limit",
		"nofile=%llu max_connections_fd=%" PRIu64 "%s", (unsigned long long)rl.rlim_cur,
		fit, capf);
	d->fd_fit = fit;
	d->fd_tiny = tiny;
	d->nofile = rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : 0;
}

/*
 * Once the health checks run: --max-connections over what the fd limit
 * allows, less the checks' share (a connection for two of their sockets)
 * that a cap from the limit would have left them, is warned about.
 */
static void warn_max_conns(const struct hlb_daemon *d)
{
	uint64_t max_conns = d->opts.max_conns, fit = d->fd_fit, checks = 0;

	if (d->other_fds && !d->fd_tiny)
		checks = atomic_load_explicit(d->other_fds, memory_order_relaxed);
	if (fit > (checks + 1) / 2)
		fit -= (checks + 1) / 2;
	else if (fit)
		fit = 1;
	if (max_conns && fit && max_conns > fit)
		hlb_log(HLB_LOG_WARN,
			"--max-connections is over what the fd limit allows: past that, a "
			"client may be closed for want of a descriptor for its backend",
			"max_connections=%" PRIu64 " max_connections_fd=%" PRIu64
			" health_check_fds=%" PRIu64,
			max_conns, fit, checks);
}

static uint32_t listener_count(const struct hlb_daemon *d);

/*
 * The connections the fd limit lets the forwarder hold for sure, 0 if it sets no cap: what it
 * allows (d->fd_fit: two descriptors a connection, past a reserve) less the shares that come
 * off it (hlb_proxy_set_max_connections()): each listener socket of each worker 1.5
 * connections, the health checks' sockets two a connection, and, unless splicing is off, the
 * splice pipes, each held a connection's two descriptors, up to --splice-pipes at once (a
 * spliced connection spends up to six descriptors: its two sockets, a pipe each way).
 */
static uint64_t fd_connections(const struct hlb_daemon *d)
{
	uint64_t wl = (uint64_t)listener_count(d) * d->n_workers, checks = 0, pipes = 0, off;

	if (!d->fd_fit)
		return 0;
	if (d->other_fds)
		checks = atomic_load_explicit(d->other_fds, memory_order_relaxed);
	if (d->opts.splice_after != UINT32_MAX)
		pipes = d->opts.splice_pipes ? d->opts.splice_pipes : HLB_SPLICE_PIPES_DEFAULT;
	off = (3 * wl + checks + 1) / 2 + pipes;
	return d->fd_fit > off ? d->fd_fit - off : 1;
}

/*
 * The services' max_connections of <cfg> are a cap of their own, whatever the fd limit
 * allows: past the connections it lets the forwarder hold (fd_connections()), the process's
 * connection cap comes first and clients wait in the backlog before a service refuses any.
 * Counted: the sum of those the config sets (meant to add up, each service its share). The
 * default 10,000 of a service that sets none counts only where twice it passes the limit
 * itself: a cap nobody chose, which the process's cap ("connection cap") bounds already,
 * warned at each start of every config on a limit of 20,000 (its 9,900 connections or so).
 * The two tested apart: the default, larger than the sum set, took its place and its test
 * (9,500 set beside a default 10,000 under 20,000 passed, with 8,900 or so held). Said at
 * start and at each reload, for the config it loaded (before, at start only, against half
 * the limit: neither the listeners', checks' nor splice pipes' shares). A service of
 * max_connections 0 (no cap) is the operator's choice. A kernel-steered one counts too: while
 * the kernel has no table of it (the program not attached yet, fallback), the daemon's own
 * listener serves its clients under its max_connections.
 */
static void warn_services_max_conns(const struct hlb_daemon *d, const struct hashlb_config *cfg)
{
	uint64_t sum = 0, dflt = 0, cap = fd_connections(d);
	uint32_t n = 0;

	if (!cap || !d->nofile)
		return;
	for (uint32_t i = 0; i < cfg->n_services; i++) {
		const struct hashlb_service_cfg *s = &cfg->services[i];

		if (!s->max_connections)
			continue;
		if (s->max_connections_given) {
			sum += s->max_connections;
			n++;
		} else if (s->max_connections > dflt) {
			dflt = s->max_connections;
		}
	}
	if (!n || sum <= cap) {
		if (dflt * 2 <= d->nofile)
			return;
		sum = dflt;
		n = 1;
	}
	hlb_log(HLB_LOG_WARN, "services' max_connections over what the fd limit allows",
		"max_connections_sum=%" PRIu64 " services=%u nofile=%" PRIu64
		" max_connections_fd=%" PRIu64 " connections_fd=%" PRIu64 " nofile_needed=%" PRIu64
		" note=\"two descriptors a connection (max_connections_fd), less the listeners', "
		"health checks' and splice pipes' shares (connections_fd): past that new clients "
		"wait in the backlog (the connection cap) before a service's max_connections "
		"(10000 unless set) refuses any; raise LimitNOFILE (ulimit -n) to nofile_needed, "
		"or set max_connections lower\"",
		sum, n, d->nofile, d->fd_fit, cap, d->nofile + 2 * (sum > cap ? sum - cap : 0));
}

/* hlb_plural() of a word that takes "es": "1 address", "2 addresses" (not "address(es)"). */
static const char *plural_es(uint64_t n)
{
	return *hlb_plural(n) ? "es" : "";
}

/*
 * The connection cap in force, at start and when a reload changes it: the
 * "file descriptor limit" line gives what the limit allows before the
 * listeners' and health checks' shares (max_connections_fd=), which many
 * listeners make most of it (8,000 listeners under nofile=20000: 1 of
 * 9,930). Below half of what the limit allows, a
 * warning that says what takes it.
 */
static void log_cap(struct hlb_daemon *d)
{
	uint32_t n = listener_count(d);
	uint64_t cap = hlb_proxy_max_connections_with(d->proxy, n), checks = 0;

	if (!d->fd_fit || d->opts.max_conns || d->fd_tiny || cap == d->cap_logged)
		return;
	d->cap_logged = cap;
	if (d->other_fds)
		checks = atomic_load_explicit(d->other_fds, memory_order_relaxed);
	hlb_log(cap * 2 < d->fd_fit ? HLB_LOG_WARN : HLB_LOG_INFO, "connection cap",
		"max_connections=%" PRIu64 " max_connections_fd=%" PRIu64
		" listener_sockets=%" PRIu64 " health_check_fds=%" PRIu64 "%s",
		cap, d->fd_fit, (uint64_t)n * d->n_workers, checks,
		cap * 2 < d->fd_fit
			? " note=\"the listeners (1.5 connections each: a descriptor, and one "
			  "accept over the cap) and health checks take most of what the fd limit "
			  "allows: raise the limit, or use fewer workers\""
			: "");
}

/*
 * Upgrades: a new hashlb binds the same addresses (SO_REUSEPORT) and the
 * old one is stopped. Connections still in the old listeners' accept
 * queues then go to the new hashlb only if net.ipv4.tcp_migrate_req is 1,
 * or if the listeners move them themselves (hlb_proxy_migrates()); else the
 * kernel resets them. Say so where an operator looks.
 */
static void log_migrate_req(struct hlb_daemon *d)
{
	if (hlb_proxy_migrates(d->proxy))
		return;
	if (hlb_sysctl_read("/proc/sys/net/ipv4/tcp_migrate_req") == 0)
		hlb_log(HLB_LOG_INFO, "net.ipv4.tcp_migrate_req is 0",
			"note=\"unless the next hashlb takes over the listening sockets (SIGUSR2, "
			"or through the admin endpoint), an upgrade resets connections not yet "
			"accepted, and so does a reload adding back an address whose old socket "
			"still closes; set it to 1 to hand them over, or give hashlb CAP_BPF "
			"(Linux 5.14) to hand its own over\"");
}

/*
 * The longest timeouts.drain of the services listened for, which the workers' deadline
 * is, and the service manager's status and extension; *<ret_held>: the longest of those
 * that hold connections now (waiting in the queue too), the drain that applies, which the
 * log says (a service with none, or one accepted as the listeners close, may have the
 * longer).
 */
static uint32_t drain_ms(struct hlb_daemon *d, uint32_t *ret_held)
{
	uint32_t max = 0, held = 0;

	for (struct dlistener *dl = d->listeners; dl; dl = dl->next) {
		struct hlb_service *svc = hlb_listener_service(dl->l);
		struct hlb_snapshot *s = svc ? hlb_service_snapshot(svc) : NULL;

		if (!s)
			continue;
		if (s->drain_timeout_ms > max)
			max = s->drain_timeout_ms;
		if (atomic_load(&svc->active) && s->drain_timeout_ms > held)
			held = s->drain_timeout_ms;
	}
	*ret_held = held;
	return max;
}

struct hlb_daemon_hold {
	struct hlb_daemon_hold *next;
	hlb_daemon_hold_fn now;
	void *arg;
	bool told; /* <now> called */
};

int hlb_daemon_hold(struct hlb_daemon *d, hlb_daemon_hold_fn now, void *arg,
		    struct hlb_daemon_hold **ret_hold)
{
	struct hlb_daemon_hold *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->now = now;
	h->arg = arg;
	h->next = d->holds;
	d->holds = h;
	*ret_hold = h;
	return 0;
}

void hlb_daemon_release(struct hlb_daemon *d, struct hlb_daemon_hold *h)
{
	for (struct hlb_daemon_hold **p = &d->holds; h && *p; p = &(*p)->next) {
		if (*p == h) {
			*p = h->next;
			free(h);
			return;
		}
	}
}

/* A second signal: each hold's <now>, once, which may release it (and others). */
static void holds_now(struct hlb_daemon *d)
{
	struct hlb_daemon_hold *h = d->holds;

	while (h) {
		if (h->told) {
			h = h->next;
			continue;
		}
		h->told = true;
		if (h->now)
			h->now(d, h->arg);
		h = d->holds; /* it may have released any */
	}
}

static void upgrade_end(struct hlb_daemon *d);
static void upgrade_stop_child(struct hlb_daemon *d);
static uint64_t mono_ms(void);

void hlb_daemon_stop(struct hlb_daemon *d)
{
	struct dlistener *dl, *next;
	char ms_text[HASHLB_DRAIN_MS_STRLEN];
	uint32_t ms, held, left;

	if (d->stopping) {
		if (!d->stop_now) {
			d->stop_now = true;
			hlb_log(HLB_LOG_INFO, "second signal, closing every connection", NULL);
			hlb_proxy_drain(d->proxy, 0, false); /* the listeners are closed */
			holds_now(d);
		}
		return;
	}
	d->stopping = true;
	d->drain_start_ms = mono_ms();
	if (d->up.pid) {
		/* not ready yet: it would serve on alone; it drains what it took.
		 * Its READY is no longer listened to; its exit still is (it is
		 * reaped), and one stuck past UPGRADE_KILL_MS, or past this
		 * process, is killed (upgrade_kill(), hlb_daemon_free()). */
		hlb_log(HLB_LOG_WARN, "stopping during an upgrade: the new hashlb stops too",
			"pid=%d", (int)d->up.pid);
		upgrade_stop_child(d);
	}
	/* The longest drain, which the workers end by: each connection is closed at its own
	 * deadline (its service's timeouts.drain from now, or the one the reload that removed
	 * its backend or service gave it: conn_drain_own()), the last of them by then.
	 * A removed service's (not among the listeners') or a backend's whose removal gave it
	 * longer counts too: an upgrade in place, or a stop, would cut them short.
	 * HASHLB_DRAIN_NEVER, the largest, for one of never: no deadline. The log says the
	 * drain of the services that have connections to drain (<held>): before, a service
	 * with none and a longer timeouts.drain was said instead. */
	ms = drain_ms(d, &held);
	left = d->hooks.drain_left_ms ? d->hooks.drain_left_ms(d, d->hooks.arg) : 0;
	if (left > ms)
		ms = left;
	if (left > held)
		held = left;
	hlb_log(HLB_LOG_INFO, "draining", "connections=%llu drain_timeout_ms=%s",
		(unsigned long long)hlb_proxy_connections(d->proxy),
		hashlb_drain_ms_text(held, ms_text));
	/* after that line, the lines of each service's drain (the control plane's) */
	if (d->hooks.stopping)
		d->hooks.stopping(d, d->hooks.arg);
	/* Not if handed over: the service manager follows the new process. The
	 * drain may outlast the unit's TimeoutStopSec (5 min in the shipped one,
	 * timeouts.drain up to 1 h): EXTEND_TIMEOUT_USEC gives it the time the
	 * config gives the drain, and a margin for the exit, so that systemd
	 * does not SIGKILL a drain the config allows. A drain of never asks for
	 * no time: the unit's TimeoutStopSec is what bounds it, as the operator
	 * chose (docs/operations.md). */
	if (!d->handed_over && ms == HASHLB_DRAIN_NEVER) {
		hlb_notify("STOPPING=1\nSTATUS=draining %llu connection%s until they end "
			   "(timeouts.drain: never)",
			   (unsigned long long)hlb_proxy_connections(d->proxy),
			   hlb_plural(hlb_proxy_connections(d->proxy)));
	} else if (!d->handed_over) {
		/* STATUS= is read by people (systemctl status): the duration as the config
		 * writes it ("30s"), where the log line's key keeps its ms for parsers */
		char dur[HASHLB_DURATION_STRLEN];

		hashlb_duration_format(ms, dur, sizeof(dur));
		hlb_notify("STOPPING=1\nEXTEND_TIMEOUT_USEC=%llu\nSTATUS=draining %llu "
			   "connection%s, up to %s",
			   ((unsigned long long)ms + DRAIN_EXIT_MARGIN_MS) * 1000ULL,
			   (unsigned long long)hlb_proxy_connections(d->proxy),
			   hlb_plural(hlb_proxy_connections(d->proxy)), dur);
	}
	/* The clients in the listening sockets' backlogs, which the kernel has accepted, are
	 * served rather than reset by the close, unless another hashlb holds those sockets
	 * (an upgrade's new process, a live taker of GET /sockets), which serves them.
	 * Before, a stop reset them: under max_connection_rate or at the connection cap,
	 * every client waiting there. */
	hlb_proxy_drain(d->proxy, ms, !hlb_daemon_handed_over(d));
	for (dl = d->listeners; dl; dl = next) {
		next = dl->next;
		hlb_listener_close(d->proxy, dl->l);
		free(dl);
	}
	d->listeners = NULL;
}

static uint32_t listen_fds(const struct hlb_daemon *d, bool inherited, int *fds, const char **addrs,
			   uint32_t max)
{
	uint32_t n = 0, k, all = 0;
	int spare[HLB_WORKERS_MAX];
	const struct dlistener *dl;

	if (d->stopping)
		return 0;
	for (dl = d->listeners; dl; dl = dl->next) {
		all += hlb_listener_fds(dl->l, inherited, spare, HLB_WORKERS_MAX);
		k = hlb_listener_fds(dl->l, inherited, fds + n, max - n);
		for (uint32_t i = 0; i < k; i++)
			addrs[n + i] = hlb_listener_handover_name(dl->l);
		n += k;
	}
	if (all > n)
		/* the taker binds those anew: what waits in their queues is lost
		 * when this process stops */
		hlb_log(HLB_LOG_WARN,
			"too many listening sockets to hand over, the rest are bound anew",
			"handed_over=%u left=%u", n, all - n);
	return n;
}

/* The hashlb that took this one's sockets side by side has exited (stopped, or failed):
 * hooks.taker_exited. The pidfd stays open: hlb_daemon_successor() polls it. */
static void taker_exited(struct hlb_daemon *d, int fd, uint32_t events, void *arg)
{
	(void)events;
	(void)arg;
	hlb_daemon_unwatch(d, fd);
	if (d->stopping)
		return;
	/* "listening sockets handed over" was logged as they were sent: a taker that refused
	 * them (another instance on this admin address) or stopped before this one did leaves
	 * them this process's alone again, and kernel steering its to detach at its stop */
	hlb_log(HLB_LOG_WARN, "listening sockets back: the hashlb they were handed over to exited",
		"pid=%d note=\"it refused them or stopped before this one: this one serves on "
		"alone\"",
		(int)d->taker);
	if (d->hooks.taker_exited)
		d->hooks.taker_exited(d, d->hooks.arg);
}

uint32_t hlb_daemon_listen_fds(struct hlb_daemon *d, pid_t taker, int *fds, const char **addrs,
			       uint32_t max)
{
	uint32_t n = listen_fds(d, false, fds, addrs, max);
	int pidfd;

	/* A pidfd, not the pid: the number may be another process's by the time this one stops. */
	if (n && taker > 0 && (pidfd = (int)syscall(SYS_pidfd_open, taker, 0)) >= 0) {
		if (d->taker_pidfd >= 0) {
			hlb_daemon_unwatch(d, d->taker_pidfd);
			close(d->taker_pidfd);
		}
		d->taker_pidfd = pidfd;
		d->taker = taker;
		hlb_daemon_watch(d, pidfd, EPOLLIN, taker_exited, NULL);
	}
	return n;
}

pid_t hlb_daemon_taken_from(const struct hlb_daemon *d)
{
	return hlb_proxy_taken_from(d->proxy);
}

pid_t hlb_daemon_successor(const struct hlb_daemon *d)
{
	struct pollfd p = { .fd = d->taker_pidfd, .events = POLLIN };

	if (d->handed_over)
		return d->successor;
	/* a pidfd polls readable once its process has exited */
	return d->taker_pidfd >= 0 && poll(&p, 1, 0) == 0 ? d->taker : 0;
}

bool hlb_daemon_handed_over(const struct hlb_daemon *d)
{
	return hlb_daemon_successor(d) != 0;
}

static uint32_t listener_count(const struct hlb_daemon *d)
{
	uint32_t n = 0;

	for (const struct dlistener *dl = d->listeners; dl; dl = dl->next)
		n++;
	return n;
}

/* ---- the old and the new process of an upgrade in place, after it ---------- */

/*
 * For a line protocol on the socket <fd>, readable or non-blocking: what it has, read after
 * the <*len> bytes <buf> (<size> bytes) holds, kept NUL-terminated. Returns 1 when <buf> holds
 * a complete line, 0 to wait for more, -EPIPE when the peer has closed its end, -errno when
 * the read failed, or -EPROTO when the peer sent a line longer than <buf> holds.
 */
static int line_read(int fd, char *buf, size_t size, size_t *len)
{
	ssize_t n = read(fd, buf + *len, size - 1 - *len);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0)
		return n < 0 ? -errno : -EPIPE;
	*len += (size_t)n;
	buf[*len] = '\0';
	if (strchr(buf, '\n'))
		return 1;
	return *len == size - 1 ? -EPROTO : 0;
}

/* How long a request to the old process waits for its answer, once sent. */
#define PARENT_WAIT_MS 2000

/* A request to the old process (hlb_daemon_close_old()), in the line of them. */
struct old_ask {
	struct old_ask *next;
	char line[2 * HASHLB_NAME_MAX + 32]; /* "": none to send (no socket), answered -1 */
	bool sent; /* its answer is waited for, until ask_due_ms */
	hlb_daemon_close_old_fn done;
	void *arg;
	uint64_t own;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The clients lent by the old process are answered for (HLB_FDPASS_QUEUED_END), or no answer
 * can go: the sockets received without their lines are closed (the old process gave them up
 * with the channel: see lent_ready()), the answer and the counts dropped. */
static void queued_reset(struct hlb_daemon *d)
{
	free(d->taken_bits);
	d->taken_bits = NULL;
	d->taken_words = 0;
	while (d->n_parent_fds > d->parent_fds_head)
		if (d->parent_fds[--d->n_parent_fds] >= 0)
			close(d->parent_fds[d->n_parent_fds]);
	d->n_parent_fds = d->parent_fds_head = 0;
	d->adopted = d->queued_seen = 0;
	d->parent_fds_lost = false;
}

/* The socket to the old process closed (it has exited, or is stuck); nothing answered, and
 * what it was lending is dropped: no more lines come for the sockets received. */
static void parent_fd_close(struct hlb_daemon *d)
{
	if (d->parent_fd < 0)
		return;
	hlb_daemon_unwatch(d, d->parent_fd);
	close(d->parent_fd);
	d->parent_fd = -1;
	queued_reset(d);
}

/* Send the first request in line if it is not yet, and set ask_timer for it: its answer is
 * waited for PARENT_WAIT_MS; one with nothing to send is answered -1 at the timer's turn. */
static void old_ask_next(struct hlb_daemon *d)
{
	struct old_ask *a = d->asks;
	size_t len;

	if (!a || a->sent)
		return;
	if (d->parent_fd < 0)
		a->line[0] = '\0';
	len = strlen(a->line);
	if (len && send(d->parent_fd, a->line, len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)len) {
		parent_fd_close(d); /* it has exited: answered -1, in turn */
		len = 0;
	}
	a->sent = len != 0;
	d->ask_due_ms = mono_ms() + (a->sent ? PARENT_WAIT_MS : 0);
	hlb_daemon_timer_set(d->ask_timer, a->sent ? PARENT_WAIT_MS : 0, 0);
}

/* The first request in line is answered <n>: off the line, to its asker; the next one goes. */
static void old_ask_done(struct hlb_daemon *d, int64_t n)
{
	struct old_ask *a = d->asks;

	d->asks = a->next;
	if (!d->asks)
		d->asks_tail = &d->asks;
	a->done(d, a->arg, a->own, n);
	free(a);
	old_ask_next(d);
}

/* ask_timer: the first request's answer is due (it was sent: the old process is given up, and
 * every request waiting is answered -1), or it has nothing to send (answered -1). */
static void old_ask_timeout(struct hlb_daemon *d, void *arg)
{
	uint64_t now = mono_ms();

	(void)arg;
	if (!d->asks)
		return;
	if (now < d->ask_due_ms) { /* set for a request answered since */
		hlb_daemon_timer_set(d->ask_timer, d->ask_due_ms - now, 0);
		return;
	}
	if (d->asks->sent) {
		hlb_log(HLB_LOG_WARN, "the old hashlb did not answer: its socket is given up",
			"pid=%d after_ms=%u", (int)hlb_proxy_taken_from(d->proxy), PARENT_WAIT_MS);
		parent_fd_close(d);
		d->asks->sent = false;
	}
	while (d->asks && !d->asks->sent)
		old_ask_done(d, -1);
}

/*
 * line_read() on the socket to the old process, whose lines may come with descriptors
 * (HLB_FDPASS_QUEUED): those are put behind d->parent_fds, in order. One that cannot be kept
 * (no memory) is closed, and every line after is refused (d->parent_fds_lost). A batch the
 * kernel cut short (MSG_CTRUNC: this process at its fd limit; it closed the rest) gave the
 * first of its descriptors: the rest of its HLB_FDPASS_PER_MSG are noted -1, so that their
 * lines are refused, the old process keeping their clients, and the lines of the next batches
 * take their own (before, every line after was refused). Past the last line, as the last
 * batch may be shorter, a -1 is never read.
 */
static int parent_line_read(struct hlb_daemon *d, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * HLB_FDPASS_PER_MSG)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = d->parent_in + d->parent_len,
			     .iov_len = sizeof(d->parent_in) - 1 - d->parent_len };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = ctl.buf,
			      .msg_controllen = sizeof(ctl.buf) };
	ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	size_t came = 0;

	for (struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL; cm;
	     cm = CMSG_NXTHDR(&msg, cm)) {
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int got[HLB_FDPASS_PER_MSG];

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		memcpy(got, CMSG_DATA(cm), k * sizeof(int));
		came += k;
		if (d->n_parent_fds + k > d->parent_fds_cap && d->parent_fds_head) {
			/* those read are dropped when room is wanted: few are unread then (a
			 * batch arrives with the first of its lines, read as they come) */
			d->n_parent_fds -= d->parent_fds_head;
			memmove(d->parent_fds, d->parent_fds + d->parent_fds_head,
				d->n_parent_fds * sizeof(int));
			d->parent_fds_head = 0;
		}
		hlb_grow((void **)&d->parent_fds, &d->parent_fds_cap, d->n_parent_fds + k,
			 sizeof(*d->parent_fds), 256);
		for (size_t i = 0; i < k; i++) {
			if (d->n_parent_fds < d->parent_fds_cap) {
				d->parent_fds[d->n_parent_fds++] = got[i];
			} else {
				close(got[i]);
				d->parent_fds_lost = true;
			}
		}
	}
	if (n > 0 && (msg.msg_flags & MSG_CTRUNC) && came < HLB_FDPASS_PER_MSG) {
		size_t cut = HLB_FDPASS_PER_MSG - came;

		hlb_log(HLB_LOG_WARN,
			"clients of the old hashlb's queues refused: no descriptor left for them",
			"at_most=%zu got=%zu", cut, came);
		if (hlb_grow((void **)&d->parent_fds, &d->parent_fds_cap, d->n_parent_fds + cut,
			     sizeof(*d->parent_fds), 256) < 0)
			d->parent_fds_lost = true;
		else
			while (cut--)
				d->parent_fds[d->n_parent_fds++] = -1;
	} else if (n > 0 && (msg.msg_flags & MSG_CTRUNC)) {
		d->parent_fds_lost = true;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0)
		return n < 0 ? -errno : -EPIPE;
	d->parent_len += (size_t)n;
	d->parent_in[d->parent_len] = '\0';
	if (strchr(d->parent_in, '\n'))
		return 1;
	return d->parent_len == sizeof(d->parent_in) - 1 ? -EPROTO : 0;
}

/* The service named <name> among those listened for; NULL if none. */
static struct hlb_service *service_named(const struct hlb_daemon *d, const char *name)
{
	for (const struct dlistener *dl = d->listeners; dl; dl = dl->next) {
		struct hlb_service *svc = hlb_listener_service(dl->l);

		if (svc && !strcmp(svc->name, name))
			return svc;
	}
	return NULL;
}

/*
 * Room to note line <i> of the clients the old process hands over taken (bit i of
 * d->taken_bits, set once it is); false without the memory: it is refused then. A line whose
 * bit is not set is refused in the answer (queued_end()): none counts taken without a note
 * that says so.
 */
static bool taken_room(struct hlb_daemon *d, size_t i)
{
	size_t words = d->taken_words;

	if (hlb_grow((void **)&d->taken_bits, &d->taken_words, i / 64 + 1, sizeof(*d->taken_bits),
		     16) < 0)
		return false;
	memset(d->taken_bits + words, 0, (d->taken_words - words) * sizeof(*d->taken_bits));
	return true;
}

/*
 * An HLB_FDPASS_QUEUED line of the old process, <line> without its newline: serve its client as
 * if just accepted, unless its service is not ours, or the connection cap (the fd limit) or its
 * service's max_connections leaves no room: then it is refused (HLB_FDPASS_REFUSED in the
 * answer), its socket closed here, and the old one keeps its own.
 */
static void queued_line(struct hlb_daemon *d, char *line)
{
	char svc_name[HASHLB_NAME_MAX + 1], src[INET6_ADDRSTRLEN + 8], dst[INET6_ADDRSTRLEN + 8];
	struct sockaddr_storage addr[2];
	struct hlb_service *svc = NULL;
	const struct hlb_snapshot *snap;
	uint64_t max = hlb_proxy_max_connections(d->proxy);
	unsigned left, waited = 0;
	socklen_t len;
	bool addrs = false;
	int fd = -1;

	if (d->parent_fds_head < d->n_parent_fds)
		fd = d->parent_fds[d->parent_fds_head++];
	/* the wait there after those (none from an older one: 0) */
	if (sscanf(line, HLB_FDPASS_QUEUED_WORD "%255s %u %53s %53s %u", svc_name, &left, src, dst,
		   &waited) >= 4) {
		svc = service_named(d, svc_name);
		addrs = strcmp(src, "-") != 0;
		if (addrs && (hashlb_addr_parse(src, true, &addr[0], &len) < 0 ||
			      hashlb_addr_parse(dst, true, &addr[1], &len) < 0))
			svc = NULL;
	}
	snap = svc ? hlb_service_snapshot(svc) : NULL;
	/* No memory to note it taken: refused, the old one keeps it. Past a cap, one would be
	 * reset as if refused at its accept, where the old one keeps it waiting: the service's
	 * is checked by hlb_proxy_adopt(), which counts the client in it at once (counted there
	 * and in d->adopted, a client taken counted twice, and one of another service against
	 * this one's: fewer were taken than the cap let in). The connection cap counts each
	 * client taken once too, a connection once a worker has it, else among those adopting
	 * (it counted d->adopted beside the connections: one a worker served, twice). */
	if (fd < 0 || !snap || d->stopping || d->parent_fds_lost ||
	    (max && hlb_proxy_connections_adopting(d->proxy) >= max) ||
	    !taken_room(d, d->queued_seen) ||
	    !hlb_proxy_adopt(d->proxy, svc, fd, left, waited, addrs ? addr : NULL)) {
		d->queued_seen++;
		if (fd >= 0)
			close(fd);
		return;
	}
	d->taken_bits[d->queued_seen / 64] |= UINT64_C(1) << (d->queued_seen % 64);
	d->queued_seen++;
	d->adopted++;
}

/*
 * HLB_FDPASS_QUEUED_END: answer which of its clients this one refused (every line not noted
 * taken), and how many it took. Written a few KiB at a time from the stack: an answer that
 * needs no memory cannot leave a refused line out (the old one would count it taken, and
 * close its copy of a socket this one closed: a client lost). The old one has sent all its
 * lines by now and reads: the parts wait for it HLB_FDPASS_SEND_MS in all.
 *
 * False if the answer could not go whole: the socket to the old process is closed then (by
 * the caller, parent_readable()), for a line cut part way would be glued to the next one
 * ("refused 1" of "refused 12", then "successor PID": client 1 refused, which this one serves).
 * The old one takes back those whose refusals reached it whole, and leaves the others to this
 * one; of those, the ones refused here are closed on both sides. No client is served by both.
 */
static bool queued_end(struct hlb_daemon *d, size_t n)
{
	uint64_t due_ms = hlb_fdpass_due(HLB_FDPASS_SEND_MS);
	char buf[4096];
	size_t len = 0;
	bool sent = true;

	for (size_t i = 0; sent && i <= d->queued_seen; i++) {
		bool taken = i / 64 < d->taken_words &&
			     (d->taken_bits[i / 64] & (UINT64_C(1) << (i % 64)));

		if (i < d->queued_seen && !taken)
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, HLB_FDPASS_REFUSED,
						i);
		else if (i == d->queued_seen)
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, HLB_FDPASS_ADOPTED,
						d->adopted);
		/* room for one more line (a size_t's 20 digits and the word) */
		if (len > sizeof(buf) - 64 || i == d->queued_seen) {
			sent = hlb_fdpass_send_by(d->parent_fd, buf, len, 0, NULL, 0, due_ms);
			len = 0;
		}
	}
	if (!sent) {
		/* lending nothing, the old one may exit before this answer: nothing to say then */
		if (n || (errno != EPIPE && errno != ECONNRESET))
			hlb_log(HLB_LOG_WARN,
				"cannot answer the old hashlb for the clients it lent: its socket is given up",
				"err=%s count=%zu taken=%zu limit_ms=%u", strerrorname_np(errno), n,
				d->adopted, (unsigned)HLB_FDPASS_SEND_MS);
	} else if (n) {
		hlb_log(d->adopted < n ? HLB_LOG_WARN : HLB_LOG_INFO,
			"clients waiting in the old hashlb's queues taken over",
			"count=%zu left_there=%zu", d->adopted, n - d->adopted);
	}
	queued_reset(d); /* no socket should be left: one more than its lines said */
	return sent;
}

/* The old process's answers ("closed N"), to the first request in line each; the clients
 * waiting in its queues (HLB_FDPASS_QUEUED), as this one asked; or its end. */
static void parent_readable(struct hlb_daemon *d, int fd, uint32_t events, void *arg)
{
	unsigned long long n;
	size_t count;
	char *nl;
	int r;

	(void)events;
	(void)arg;
	r = parent_line_read(d, fd);
	while (r > 0 && (nl = strchr(d->parent_in, '\n'))) {
		*nl = '\0';
		if (!strncmp(d->parent_in, HLB_FDPASS_QUEUED_WORD, strlen(HLB_FDPASS_QUEUED_WORD)))
			queued_line(d, d->parent_in);
		else if (sscanf(d->parent_in, HLB_FDPASS_QUEUED_END, &count) == 1) {
			if (!queued_end(d, count))
				r = -EPIPE; /* cut part way: given up below */
		} else if (d->asks && d->asks->sent)
			old_ask_done(d, sscanf(d->parent_in, "closed %llu", &n) == 1 ? (int64_t)n
										     : -1);
		d->parent_len -= (size_t)(nl + 1 - d->parent_in);
		memmove(d->parent_in, nl + 1, d->parent_len + 1);
	}
	if (r < 0) {
		/* it has exited (or could not be answered): what waits is answered -1 in turn,
		 * at once */
		parent_fd_close(d);
		if (d->asks && d->asks->sent) {
			d->asks->sent = false;
			old_ask_done(d, -1);
		}
	}
}

/* Put a request in line: "close <svc> <name>", or, <svc> NULL, nothing to send (an answer
 * that keeps its place among the others). 0 or -ENOMEM. */
static int old_ask_add(struct hlb_daemon *d, const char *svc, const char *name,
		       hlb_daemon_close_old_fn done, void *arg, uint64_t own)
{
	struct old_ask *a;

	if (!d->ask_timer &&
	    hlb_daemon_timer_add(d, 0, 0, old_ask_timeout, NULL, &d->ask_timer) < 0) {
		d->ask_timer = NULL;
		return -ENOMEM;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	/* with no socket to it (a side-by-side takeover, a hashlb of before), nothing is sent */
	if (svc && d->parent_fd >= 0)
		snprintf(a->line, sizeof(a->line), "close %s %s\n", svc, name);
	a->done = done;
	a->arg = arg;
	a->own = own;
	*d->asks_tail = a;
	d->asks_tail = &a->next;
	old_ask_next(d);
	return 0;
}

pid_t hlb_daemon_close_old(struct hlb_daemon *d, const char *svc, const char *name,
			   hlb_daemon_close_old_fn done, void *arg, uint64_t own)
{
	pid_t pid = hlb_proxy_taken_from(d->proxy);

	if (!pid || !hlb_proxy_old_running(d->proxy))
		return 0;
	return old_ask_add(d, svc, name, done, arg, own) < 0 ? -ENOMEM : pid;
}

/* <pid> serves now: SIGHUP goes to it (handle_signals()). Told to the old process this one
 * took over from in place, if it still runs, which tells an older one in turn. */
static void successor_set(struct hlb_daemon *d, pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	char line[32];
	int len;

	if (fd < 0) /* gone already: SIGHUP goes to the last one known, which forwards it */
		return;
	if (d->successor_pidfd >= 0)
		close(d->successor_pidfd);
	d->successor_pidfd = fd;
	d->successor = pid;
	len = snprintf(line, sizeof(line), "successor %d\n", (int)pid);
	if (d->parent_fd >= 0 &&
	    send(d->parent_fd, line, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) != len)
		parent_fd_close(d); /* it has exited: a request waiting is answered -1 in turn */
}

/* SIGHUP to the process that serves now, after a handover: 0, or -ESRCH if it has exited
 * (and no process after it told this one of itself). */
static int successor_reload(struct hlb_daemon *d)
{
	struct pollfd p = { .fd = d->successor_pidfd, .events = POLLIN };

	/* a pidfd polls readable once its process has exited, reaped or not */
	if (d->successor_pidfd < 0 || poll(&p, 1, 0) != 0)
		return -ESRCH;
	return syscall(SYS_pidfd_send_signal, d->successor_pidfd, SIGHUP, NULL, 0) < 0 ? -errno : 0;
}

/* Answer a "close" of the new process: <own> connections closed here, <older> by an older
 * one (-1: not asked). */
static void succ_closed(struct hlb_daemon *d, void *arg, uint64_t own, int64_t older)
{
	char answer[48];
	int len;

	(void)arg;
	if (older > 0)
		own += (uint64_t)older;
	len = snprintf(answer, sizeof(answer), "closed %" PRIu64 "\n", own);
	if (d->succ_fd >= 0 &&
	    send(d->succ_fd, answer, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) != len)
		hlb_log(HLB_LOG_WARN, "cannot answer the new hashlb", "err=%s",
			strerrorname_np(errno));
}

/*
 * How long the new process may take to say which of the clients lent to it it took. Past it,
 * if it still lives, it may be serving any of them: this one closes its copies (no reset: the
 * socket is the new one's) and serves none; only an answer, or its exit, gives them back.
 */
#define LENT_WAIT_MS 5000
/* How long the new process may take to exit once the channel to it broke (its end closes as
 * its files are, before its pidfd says it has exited): past it, it lives on, and may serve the
 * clients lent to it. */
#define LENT_EXIT_MS 1000

/* Whether the new process the clients were lent to has exited, waiting up to <wait_ms> for it
 * (its end of the channel closes as it exits, before its pidfd says so). Not known (no pidfd):
 * it lives. */
static bool lent_peer_exited(struct hlb_daemon *d, int wait_ms)
{
	struct pollfd p = { .fd = d->lent_pidfd, .events = POLLIN };
	int r;

	if (d->lent_pidfd < 0)
		return false;
	do
		r = poll(&p, 1, wait_ms);
	while (r < 0 && errno == EINTR);
	return r == 1;
}

/* The new process answered for the clients lent to it, <taken> of them not refused ("refused I"
 * lines), or, <all_back>, it took none (it exited, or none was sent to it): the ones it did not
 * take are served here again (but for those whose stream it used: reset, see
 * hlb_proxy_lent_end()), the others closed here (no reset: they are its). */
static void lent_done(struct hlb_daemon *d, bool all_back)
{
	size_t taken = 0, reset;

	if (d->lent_watched) {
		hlb_daemon_unwatch(d, hlb_proxy_lent_fd(d->proxy));
		d->lent_watched = false;
	}
	if (d->lent_pid_watched) {
		hlb_daemon_unwatch(d, d->lent_pidfd);
		d->lent_pid_watched = false;
	}
	d->lent_broken = false;
	if (d->lent_pidfd >= 0)
		close(d->lent_pidfd);
	d->lent_pidfd = -1;
	if (!d->lent_sent)
		return;
	for (size_t i = 0; i < d->n_lent; i++) {
		d->lent[i].refused |= all_back;
		taken += !d->lent[i].refused;
	}
	/* not_lent: those left in the queues, never offered (past their deadline, short of
	 * memory or descriptors), served here as the ones it refused (kept) */
	if (d->n_lent || d->n_not_lent)
		hlb_log(taken < d->n_lent || d->n_not_lent ? HLB_LOG_WARN : HLB_LOG_INFO,
			"clients waiting in the queues handed over",
			"count=%zu kept=%zu not_lent=%zu", taken, d->n_lent - taken, d->n_not_lent);
	reset = hlb_proxy_lent_end(d->proxy, d->lent, d->n_lent);
	if (reset)
		hlb_log(HLB_LOG_WARN,
			"clients lent to the new hashlb reset: it read or wrote them, then exited",
			"count=%zu", reset);
	free(d->lent);
	d->lent = NULL;
	d->n_lent = d->n_not_lent = 0;
	d->lent_sent = false;
}

/* No answer in LENT_WAIT_MS, or the channel broke LENT_EXIT_MS ago (lent_broken()): they come
 * back if the new process has exited, else they are its. */
static void lent_timeout(struct hlb_daemon *d, void *arg)
{
	bool exited;

	(void)arg;
	if (!d->lent_sent)
		return;
	exited = lent_peer_exited(d, 0);
	if (!d->lent_broken)
		hlb_log(HLB_LOG_WARN, "the new hashlb did not answer for the clients lent to it",
			"after_ms=%u count=%zu new_exited=%s", LENT_WAIT_MS, d->n_lent,
			exited ? "true" : "false");
	lent_done(d, exited);
}

/* The new process has exited (its pidfd, watched by lent_broken()): every client lent to it
 * comes back (but for those whose stream it used: see lent_done()). */
static void lent_peer_gone(struct hlb_daemon *d, int fd, uint32_t events, void *arg)
{
	(void)fd;
	(void)events;
	(void)arg;
	lent_done(d, true);
}

/*
 * The channel to the new process broke before it answered for the clients lent to it: they
 * come back once it has exited, if it does within LENT_EXIT_MS; alive then, they are its.
 * Waited for on the loop (its pidfd watched, lent_timer for the bound): this process goes on
 * meanwhile with its drain, its health checks and its signals. It waited in a poll(), every
 * other thing of its control thread stopped for the whole bound when the new one lived on.
 * Without a timer or the watch, it still does.
 */
static void lent_broken(struct hlb_daemon *d)
{
	if (lent_peer_exited(d, 0) || d->lent_pidfd < 0 || !d->lent_timer ||
	    hlb_daemon_watch(d, d->lent_pidfd, EPOLLIN, lent_peer_gone, NULL) < 0) {
		lent_done(d, lent_peer_exited(d, LENT_EXIT_MS));
		return;
	}
	d->lent_pid_watched = d->lent_broken = true;
	hlb_daemon_timer_set(d->lent_timer, LENT_EXIT_MS, 0);
}

/* Every worker lent what waits in its queue: send them to the new process (HLB_FDPASS_QUEUE). */
static void lent_ready(struct hlb_daemon *d, int fd, uint32_t events, void *arg)
{
	struct hlb_lent *lent = NULL;
	char *text = NULL;
	size_t len = 0;
	int *fds = NULL;
	bool sent = false, tried = false;
	unsigned went = 0;
	uint64_t start_ms = 0;
	int err = 0;
	ssize_t n;
	FILE *f;

	(void)fd;
	(void)events;
	(void)arg;
	n = hlb_proxy_lent_take(d->proxy, &lent, &d->n_not_lent);
	if (n == -EAGAIN)
		return;
	hlb_daemon_unwatch(d, hlb_proxy_lent_fd(d->proxy));
	d->lent_watched = false;
	d->lent = lent;
	d->n_lent = (size_t)n;
	d->lent_sent = true;
	fds = calloc((size_t)n + 1, sizeof(*fds));
	f = open_memstream(&text, &len);
	if (fds && f && d->succ_fd >= 0) {
		for (ssize_t i = 0; i < n; i++) {
			char src[INET6_ADDRSTRLEN + 8] = "-", dst[INET6_ADDRSTRLEN + 8] = "-";

			if (lent[i].addrs) {
				hashlb_addr_format(&lent[i].addr[0], src, sizeof(src));
				hashlb_addr_format(&lent[i].addr[1], dst, sizeof(dst));
			}
			fprintf(f, HLB_FDPASS_QUEUED, lent[i].svc, lent[i].left_ms, src, dst,
				lent[i].waited_ms);
			fds[i] = lent[i].fd;
		}
		fprintf(f, HLB_FDPASS_QUEUED_END, (size_t)n);
		if (fclose(f) == 0) {
			tried = true;
			start_ms = mono_ms();
			sent = hlb_fdpass_send_counted(d->succ_fd, text, len, 0, fds, (unsigned)n,
						       &went);
			err = errno;
		}
		f = NULL;
	}
	if (f)
		fclose(f);
	free(text);
	free(fds);
	if (!sent && tried) /* ETIMEDOUT: it had not read them all in HLB_FDPASS_SEND_MS */
		hlb_log(HLB_LOG_WARN, "cannot send the new hashlb all the clients lent to it",
			"err=%s sent=%u count=%zd after_ms=%" PRIu64 " limit_ms=%u",
			strerrorname_np(err), went, n, mono_ms() - start_ms,
			(unsigned)HLB_FDPASS_SEND_MS);
	if (!sent && tried && went) {
		/* Some went, their lines maybe not all: it may serve any of those, and will not
		 * answer (it answers at the end). Those are its (copies closed here, no reset), the
		 * others come back; the channel is closed, so that it closes those it cannot read
		 * the lines of. */
		for (ssize_t i = went; i < n; i++)
			lent[i].refused = true;
		hlb_daemon_unwatch(d, d->succ_fd);
		close(d->succ_fd);
		d->succ_fd = -1;
	}
	if (!sent) {
		lent_done(d, !went);
		return;
	}
	if (d->lent_timer)
		hlb_daemon_timer_set(d->lent_timer, LENT_WAIT_MS, 0);
	else if (hlb_daemon_timer_add(d, LENT_WAIT_MS, 0, lent_timeout, NULL, &d->lent_timer) < 0)
		d->lent_timer = NULL; /* answered when it answers, or goes away */
}

/* The new process asks for the clients waiting in the queues (HLB_FDPASS_QUEUE): lend them. */
static void lend_queue(struct hlb_daemon *d)
{
	if (d->lent_sent || d->lent_watched)
		return;
	/* Its pidfd says when it has exited, and the clients lent to it with it: the successor's
	 * (successor_set() at the handover, before it could ask; a later one would tell of itself
	 * only once this one has answered). The channel is a socketpair: SO_PEERCRED would name
	 * this process. */
	if (d->lent_pidfd < 0 && d->successor_pidfd >= 0)
		d->lent_pidfd = fcntl(d->successor_pidfd, F_DUPFD_CLOEXEC, 0);
	if (hlb_daemon_watch(d, hlb_proxy_lent_fd(d->proxy), EPOLLIN, lent_ready, NULL) < 0) {
		char none[32];
		int len = snprintf(none, sizeof(none), HLB_FDPASS_QUEUED_END, (size_t)0);

		send(d->succ_fd, none, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
		return;
	}
	d->lent_watched = true;
	if (!hlb_proxy_lend_queue(d->proxy))
		lent_done(d, true);
}

/*
 * A line of the new process: "close SERVICE BACKEND", answered on succ_fd ("closed N"): this
 * one's connections, closed at once, and those of an older one that still drains (asked in
 * turn, the answer waiting for its; the answers go in the order asked); or "successor PID":
 * it, or one after it, handed over to PID in turn.
 */
static void succ_request(struct hlb_daemon *d, char *line)
{
	char svc[HASHLB_NAME_MAX + 1], name[HASHLB_NAME_MAX + 1];
	uint64_t n = 0;
	int pid, r;

	size_t taken;
	int end = 0;

	if (sscanf(line, "successor %d", &pid) == 1 && pid > 0) {
		successor_set(d, pid);
		return;
	}
	/* <line> is without its newline */
	if (strlen(line) + 1 == strlen(HLB_FDPASS_QUEUE) &&
	    !strncmp(line, HLB_FDPASS_QUEUE, strlen(line))) {
		lend_queue(d);
		return;
	}
	/* the number and nothing after it: a line cut short, the next glued on ("refused 1" of
	 * "refused 12", then "successor PID"), names no client (a new process of before kept its
	 * socket open after an answer that could not go whole) */
	if (sscanf(line, HLB_FDPASS_REFUSED "%n", &taken, &end) == 1 && !line[end]) {
		if (d->lent_sent && taken < d->n_lent)
			d->lent[taken].refused = true;
		return;
	}
	if (sscanf(line, HLB_FDPASS_ADOPTED, &taken) == 1) {
		/* before the workers all lent (lent_ready() not run): nothing was sent to adopt */
		if (d->lent_sent)
			lent_done(d, false);
		return;
	}
	if (sscanf(line, "close %255s %255s", svc, name) != 2)
		return;
	if (d->hooks.close)
		n = d->hooks.close(d, d->hooks.arg, svc, name);
	r = hlb_daemon_close_old(d, svc, name, succ_closed, NULL, n);
	/* none older: answered at once, unless earlier answers wait (then behind them) */
	if (r == 0 && d->asks)
		r = old_ask_add(d, NULL, NULL, succ_closed, NULL, n);
	if (r <= 0)
		succ_closed(d, NULL, n, -1);
}

static void succ_readable(struct hlb_daemon *d, int fd, uint32_t events, void *arg)
{
	char *nl;
	int r;

	(void)events;
	(void)arg;
	r = line_read(fd, d->succ_in, sizeof(d->succ_in), &d->succ_len);
	while (r > 0 && (nl = strchr(d->succ_in, '\n'))) {
		*nl = '\0';
		succ_request(d, d->succ_in);
		d->succ_len -= (size_t)(nl + 1 - d->succ_in);
		memmove(d->succ_in, nl + 1, d->succ_len + 1);
	}
	if (r < 0) {
		/* it has exited (or says more than a request in a line): what it was lent, it
		 * did not say it took */
		hlb_daemon_unwatch(d, fd);
		close(fd);
		d->succ_fd = -1;
		/* Back only if it has exited; alive, it may be serving them: they are its. Not
		 * sent yet (workers still lending): lent_ready() sees succ_fd < 0 and gives
		 * them back; ending here would leave them lent, served by nobody. */
		if (d->lent_sent)
			lent_broken(d);
	}
}

/* ---- upgrade in place (SIGUSR2) -------------------------------------------- */

/* The environment for the new process: ours, with HASHLB_UPGRADE_FD. */
static char **upgrade_env(void)
{
	extern char **environ;
	static char fd_var[] = "HASHLB_UPGRADE_FD=3";
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "HASHLB_UPGRADE_FD=", 18) != 0)
			env[k++] = environ[i];
	env[k] = fd_var;
	return env;
}

static void upgrade_kill(struct hlb_daemon *d, void *arg);

/* SIGTERM to the new process, not ready; SIGKILL if it is still there UPGRADE_KILL_MS later. */
static void upgrade_stop_child(struct hlb_daemon *d)
{
	struct upgrade *up = &d->up;

	syscall(SYS_pidfd_send_signal, up->pidfd, SIGTERM, NULL, 0);
	hlb_daemon_timer_del(d, up->timer);
	up->timer = NULL;
	if (up->sock >= 0) { /* a READY now would hand over to a process told to stop */
		hlb_daemon_unwatch(d, up->sock);
		close(up->sock);
		up->sock = -1;
	}
	if (hlb_daemon_timer_add(d, UPGRADE_KILL_MS, 0, upgrade_kill, NULL, &up->timer) < 0)
		up->timer = NULL;
}

static void upgrade_kill(struct hlb_daemon *d, void *arg)
{
	(void)arg;
	hlb_log(HLB_LOG_ERROR, "upgrade: the new hashlb did not stop, killing it",
		"pid=%d after_ms=%u", (int)d->up.pid, UPGRADE_KILL_MS);
	syscall(SYS_pidfd_send_signal, d->up.pidfd, SIGKILL, NULL, 0);
	hlb_daemon_timer_del(d, d->up.timer);
	d->up.timer = NULL;
}

static void upgrade_end(struct hlb_daemon *d)
{
	struct upgrade *up = &d->up;

	hlb_daemon_timer_del(d, up->timer);
	if (up->sock >= 0) {
		hlb_daemon_unwatch(d, up->sock);
		close(up->sock);
	}
	if (up->pidfd >= 0) {
		hlb_daemon_unwatch(d, up->pidfd);
		close(up->pidfd);
	}
	if (up->resync >= 0)
		close(up->resync);
	free(up->handed);
	*up = (struct upgrade){ .pidfd = -1, .sock = -1, .resync = -1 };
}

/* The new process has exited before it was ready: this one goes on serving. */
static void upgrade_exited(struct hlb_daemon *d, int fd, uint32_t events, void *arg)
{
	pid_t pid = d->up.pid;
	int status = 0;
	char how[32];

	(void)fd;
	(void)events;
	(void)arg;
	if (waitpid(pid, &status, 0) < 0)
		status = 0;
	if (WIFSIGNALED(status))
		snprintf(how, sizeof(how), "signal=%s", sigabbrev_np(WTERMSIG(status)) ?: "?");
	else
		snprintf(how, sizeof(how), "status=%d", WEXITSTATUS(status));
	if (d->stopping) { /* told to stop with this one */
		hlb_log(HLB_LOG_INFO, "the new hashlb stopped", "pid=%d %s", (int)pid, how);
		upgrade_end(d);
		return;
	}
	hlb_log(HLB_LOG_ERROR,
		"upgrade failed: the new hashlb exited before it was ready, "
		"this one goes on serving",
		"pid=%d %s", (int)pid, how);
	hlb_notify("STATUS=upgrade failed (pid %d), listening on %u address%s", (int)pid,
		   listener_count(d), plural_es(listener_count(d)));
	d->up_failed_pid = pid;
	snprintf(d->up_failed_how, sizeof(d->up_failed_how), "exited before it was ready, %s", how);
	upgrade_end(d);
	/* it may have bound the admin endpoint's Unix path over this one's before it ended */
	if (d->hooks.taker_exited)
		d->hooks.taker_exited(d, d->hooks.arg);
}

/* Not ready in time (stuck, or a hashlb older than SIGUSR2 that never says so): it drains
 * whatever it may have accepted, as on SIGTERM; upgrade_exited() follows. */
static void upgrade_timeout(struct hlb_daemon *d, void *arg)
{
	(void)arg;
	hlb_log(HLB_LOG_ERROR, "upgrade: the new hashlb is not ready, stopping it",
		"pid=%d after_ms=%u", (int)d->up.pid, UPGRADE_TIMEOUT_MS);
	upgrade_stop_child(d);
}

/*
 * The new process is ready: write the HLB_HANDOVER_LINE lines again on the resync socket
 * (HLB_FDPASS_RESYNC), as they are now, for it to correct what changed since it was started,
 * then HLB_FDPASS_RESYNC_END, and keep the socket for its requests (succ_readable()). Waits up
 * to 1 s each time the socket is full; a process of before closed its end (EPIPE), and the
 * socket is closed.
 */
static void upgrade_resync(struct hlb_daemon *d)
{
	struct upgrade *up = &d->up;
	char *text = NULL;
	size_t len = 0;
	bool sent = false;
	FILE *f;

	if (up->resync < 0)
		return;
	f = open_memstream(&text, &len);
	if (f) {
		if (d->hooks.handover)
			d->hooks.handover(d, d->hooks.arg, f);
		fputs(HLB_FDPASS_RESYNC_END, f);
		if (fclose(f) == 0) {
			fcntl(up->resync, F_SETFL, O_NONBLOCK);
			sent = hlb_fdpass_send(up->resync, text, len, 0, NULL, 0);
		}
	}
	free(text);
	if (sent && hlb_daemon_watch(d, up->resync, EPOLLIN, succ_readable, NULL) == 0)
		d->succ_fd = up->resync;
	else
		close(up->resync);
	up->resync = -1;
}

/* The new process writes "READY PID\n" once it accepts: hand over and drain. */
static void upgrade_readable(struct hlb_daemon *d, int fd, uint32_t events, void *arg)
{
	struct upgrade *up = &d->up;
	pid_t pid = up->pid;
	bool reload;
	int r;

	(void)events;
	(void)arg;
	r = line_read(fd, up->in, sizeof(up->in), &up->in_len);
	if (!r)
		return;
	/* it closed its end without a word (upgrade_exited() follows), or said more than a line
	 * here holds (upgrade_timeout() follows) */
	if (r < 0) {
		hlb_daemon_unwatch(d, fd);
		close(fd);
		up->sock = -1;
		return;
	}
	if (strncmp(up->in, "READY ", 6) != 0) {
		hlb_log(HLB_LOG_ERROR, "upgrade: the new hashlb said something else, killing it",
			"pid=%d", (int)pid);
		syscall(SYS_pidfd_send_signal, up->pidfd, SIGKILL, NULL, 0);
		hlb_daemon_unwatch(d, fd);
		close(fd);
		up->sock = -1;
		return;
	}
	reload = up->reloaded;
	upgrade_resync(d);
	upgrade_end(d); /* it is the service's process now; it is not waited for */
	hlb_log(HLB_LOG_INFO, "upgraded: the new hashlb is ready, this one drains", "pid=%d",
		(int)pid);
	d->handed_over = true;
	successor_set(d, pid);
	hlb_notify("MAINPID=%d\nREADY=1\nSTATUS=upgraded, the new process listens", (int)pid);
	/* It read the config as it started: a reload here since then is its own
	 * too. After MAINPID=, so that the service manager takes its RELOADING=1.
	 * Our child, not reaped: the pid is still its own. */
	if (reload) {
		hlb_log(HLB_LOG_INFO, "reloaded while the new hashlb started: it reloads too",
			"pid=%d", (int)pid);
		kill(pid, SIGHUP);
	}
	hlb_daemon_stop(d);
}

/* An upgrade that leaves no new process running: for /status and POST /upgrade, which would
 * otherwise answer with an earlier attempt's reason (a SIGUSR2 has nobody else to tell). */
static void upgrade_not_started(struct hlb_daemon *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void upgrade_not_started(struct hlb_daemon *d, const char *fmt, ...)
{
	va_list ap;

	d->up_failed_pid = -1;
	va_start(ap, fmt);
	vsnprintf(d->up_failed_how, sizeof(d->up_failed_how), fmt, ap);
	va_end(ap);
}

int hlb_daemon_upgrade_start(struct hlb_daemon *d, const char *by)
{
	char qe[HLB_LOG_PATH_MAX];
	static int fds[4096 + 1]; /* the listening sockets, then the resync socket */
	static const char *addrs[4096];
	struct upgrade *up = &d->up;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	char *text = NULL, *lines = NULL;
	size_t text_len = 0, lines_len = 0;
	FILE *f;
	sigset_t none;
	char **env = NULL;
	uint32_t n;
	int sv[2], rs[2], r;
	bool sent;

	if (d->stopping || up->pid) {
		hlb_log(HLB_LOG_WARN, "upgrade refused", "reason=\"%s\" by=%s",
			d->stopping ? "stopping" : "an upgrade is under way", by);
		return d->stopping ? -ESHUTDOWN : -EALREADY;
	}
	/* PID 1 of a PID namespace (a container's init): when it exits, the kernel kills
	 * every other process of the namespace, the new hashlb too once this one has handed
	 * over and drained: the service would end, not be upgraded */
	if (getpid() == 1) {
		hlb_log(HLB_LOG_WARN, "upgrade refused",
			"reason=\"" HLB_UPGRADE_PID1 "\" note=\"restart the container, or run "
			"hashlb under an init (docker run --init, tini) to upgrade in place\" by=%s",
			by);
		return -ECHILD;
	}
	if (!d->exe || !d->opts.argv) {
		hlb_log(HLB_LOG_ERROR, "cannot upgrade in place: this executable's path is unknown",
			"by=%s", by);
		upgrade_not_started(d, "could not be started: this hashlb's executable path is "
				       "unknown");
		return -ENOENT;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		r = -errno;
		hlb_log(HLB_LOG_ERROR, "cannot upgrade in place", "err=%s by=%s",
			strerrorname_np(-r), by);
		upgrade_not_started(d, "could not be started, %s (%s): socketpair",
				    strerrorname_np(-r), strerror(-r));
		return r;
	}
	/* the answer GET /sockets would give, with every listening socket, the
	 * service manager's too (it does not start this child) */
	n = listen_fds(d, true, fds, addrs, sizeof(addrs) / sizeof(addrs[0]));
	/* and those of the manager's that no service listens on, for a reload there to add
	 * one (it cannot bind its own beside them) */
	n += hlb_proxy_inherited_unused(d->proxy, fds, n, fds + n, addrs + n,
					sizeof(addrs) / sizeof(addrs[0]) - n);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rs) < 0)
		rs[0] = rs[1] = -1; /* no resync: the health as it is now only */
	f = open_memstream(&lines, &lines_len);
	if (f) {
		for (uint32_t i = 0; i < n; i++)
			fprintf(f, HLB_FDPASS_LINE, (int)getpid(), fds[i], addrs[i]);
		if (d->hooks.handover)
			d->hooks.handover(d, d->hooks.arg, f);
		if (rs[1] >= 0)
			fputs(HLB_FDPASS_RESYNC, f);
		if (fclose(f) != 0) {
			free(lines);
			lines = NULL;
		}
	}
	/* with its length, as GET /sockets answers: the new process can tell an answer cut short
	 * (this one killed as it writes it) from a whole one, however the descriptors fall */
	if (lines && asprintf(&text, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s", lines_len,
			      lines) < 0)
		text = NULL;
	text_len = text ? strlen(text) : 0;
	free(lines);

	env = upgrade_env();
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	/* the pair at fd 3, nothing else of ours: connections, rings, BPF */
	posix_spawn_file_actions_adddup2(&fa, sv[1], UPGRADE_FD);
	posix_spawn_file_actions_addclosefrom_np(&fa, UPGRADE_FD + 1);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
	r = !env || !text ? ENOMEM : posix_spawn(&up->pid, d->exe, &fa, &attr, d->opts.argv, env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	free(env);
	close(sv[1]);
	if (r) {
		hlb_log(HLB_LOG_ERROR, "cannot upgrade in place", "exe=%s err=%s by=%s",
			hlb_log_quote(d->exe, qe, sizeof(qe)), strerrorname_np(r), by);
		/* which file: the upgrade runs the one at the path this one started from,
		 * which a deploy may have moved or left unexecutable */
		upgrade_not_started(d, "could not be started, %s (%s): %s", strerrorname_np(r),
				    strerror(r), d->exe);
		up->pid = 0;
		close(sv[0]);
		if (rs[0] >= 0) {
			close(rs[0]);
			close(rs[1]);
		}
		free(text);
		return -r;
	}
	up->sock = sv[0];
	up->pidfd = (int)syscall(SYS_pidfd_open, up->pid, 0);
	up->handed = calloc(n ? n : 1, sizeof(*up->handed));
	for (uint32_t i = 0; up->handed && i < n; i++) {
		socklen_t alen = sizeof(up->handed[0]);

		if (getsockname(fds[i], (struct sockaddr *)&up->handed[up->n_handed], &alen) == 0)
			up->n_handed++;
	}
	if (up->handed)
		qsort(up->handed, up->n_handed, sizeof(*up->handed), addr_cmp);
	if (rs[1] >= 0)
		fds[n] = rs[1]; /* after the listening sockets: its line, HLB_FDPASS_RESYNC, last */
	sent = hlb_fdpass_send(up->sock, text, text_len, text_len - lines_len, fds,
			       n + (rs[1] >= 0));
	if (rs[1] >= 0)
		close(rs[1]);
	up->resync = rs[0];
	free(text);
	shutdown(up->sock, SHUT_WR);
	fcntl(up->sock, F_SETFL, O_NONBLOCK);
	hlb_log(HLB_LOG_INFO, "upgrading in place: started the new hashlb",
		"pid=%d exe=%s sockets=%u%s by=%s", (int)up->pid,
		hlb_log_quote(d->exe, qe, sizeof(qe)), n,
		sent ? "" : " err=\"sockets not handed over\"", by);
	if (up->pidfd < 0 || hlb_daemon_watch(d, up->pidfd, EPOLLIN, upgrade_exited, NULL) < 0 ||
	    hlb_daemon_watch(d, up->sock, EPOLLIN, upgrade_readable, NULL) < 0 ||
	    hlb_daemon_timer_add(d, UPGRADE_TIMEOUT_MS, 0, upgrade_timeout, NULL, &up->timer) < 0) {
		/* cannot follow it: stop it (it has not accepted before it says so) */
		hlb_log(HLB_LOG_ERROR, "upgrade: cannot follow the new hashlb, killing it",
			"pid=%d", (int)up->pid);
		upgrade_not_started(d,
				    "could not be followed (ENOMEM): pid %d was started and "
				    "stopped",
				    (int)up->pid);
		kill(up->pid, SIGKILL);
		waitpid(up->pid, NULL, 0);
		upgrade_end(d);
		return -ENOMEM;
	}
	d->up_failed_pid = 0;
	return up->pid;
}

const char *hlb_daemon_handover(const struct hlb_daemon *d)
{
	return hlb_proxy_handover(d->proxy);
}

pid_t hlb_daemon_upgrade_state(const struct hlb_daemon *d, const char **ret_how)
{
	if (d->up.pid) {
		*ret_how = NULL; /* under way */
		return d->up.pid;
	}
	*ret_how = d->up_failed_how;
	return d->up_failed_pid;
}

void hlb_daemon_reloaded(struct hlb_daemon *d, const struct hashlb_config *cfg)
{
	if (d->up.pid)
		d->up.reloaded = true;
	log_cap(d);
	warn_services_max_conns(d, cfg);
}

/* Started by an upgrade in place: every listener accepts, tell the old process. */
static void upgrade_ready(struct hlb_daemon *d)
{
	char msg[32];
	int n = snprintf(msg, sizeof(msg), "READY %d\n", (int)getpid());

	if (write(d->ready_fd, msg, (size_t)n) != n)
		hlb_log(HLB_LOG_WARN, "cannot tell the old hashlb this one is ready", "err=%s",
			strerrorname_np(errno));
	close(d->ready_fd);
	d->ready_fd = -1;
}

/* Whether <text> (<len> bytes) ends with the line HLB_FDPASS_RESYNC_END. */
static bool resync_done(const char *text, size_t len)
{
	size_t end_len = strlen(HLB_FDPASS_RESYNC_END);

	return len >= end_len && !strcmp(text + len - end_len, HLB_FDPASS_RESYNC_END) &&
	       (len == end_len || text[len - end_len - 1] == '\n');
}

/* hooks.old_stopped, once. */
static void old_stopped(struct hlb_daemon *d)
{
	if (d->old_stopped)
		return;
	d->old_stopped = true;
	hlb_daemon_timer_del(d, d->old_stop_timer);
	d->old_stop_timer = NULL;
	if (d->hooks.old_stopped)
		d->hooks.old_stopped(d, d->hooks.arg);
}

static void old_stop_late(struct hlb_daemon *d, void *arg)
{
	(void)arg;
	hlb_log(HLB_LOG_WARN, "the old hashlb has not answered this one's READY",
		"after_ms=%u note=\"taken as stopped: kernel steering tables published\"",
		OLD_STOP_MS);
	old_stopped(d);
}

/*
 * The old process's channel refused this one's HLB_FDPASS_QUEUE with <err>. Closed (EPIPE,
 * ECONNRESET): it has exited, as one with no connection does as soon as this one is ready
 * (most upgrades of an idle hashlb), and its drain waited for the clients in its queues:
 * nothing of them was left to take over. Said at info, not as a failure.
 */
static void queue_ask_failed(int err)
{
	if (err == EPIPE || err == ECONNRESET)
		hlb_log(HLB_LOG_INFO, "the old hashlb had exited: no queued clients to take over",
			"err=%s", strerrorname_np(err));
	else
		hlb_log(HLB_LOG_WARN, "cannot ask the old hashlb for its queued clients", "err=%s",
			strerrorname_np(err));
}

/* <keep>: the socket stays, for requests to the old process (parent_fd). */
static void resync_end(struct hlb_daemon *d, bool keep)
{
	hlb_daemon_unwatch(d, d->resync_fd);
	/* its answers are read on the loop (parent_readable()): nothing waits for them */
	if (keep && hlb_daemon_watch(d, d->resync_fd, EPOLLIN, parent_readable, NULL) == 0) {
		d->parent_fd = d->resync_fd;
		/* the clients waiting in its queues: this one serves them (a process of before
		 * neither asks for them nor answers this) */
		if (send(d->parent_fd, HLB_FDPASS_QUEUE, strlen(HLB_FDPASS_QUEUE),
			 MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			queue_ask_failed(errno);
	} else
		close(d->resync_fd);
	d->resync_fd = -1;
	free(d->resync_text);
	d->resync_text = NULL;
	d->resync_len = d->resync_cap = 0;
	old_stopped(d);
}

/* The old process's health as it was when this one got ready (HLB_FDPASS_RESYNC), read to
 * HLB_FDPASS_RESYNC_END, then given to hooks.resync. */
static void resync_readable(struct hlb_daemon *d, int fd, uint32_t events, void *arg)
{
	ssize_t n;

	(void)events;
	(void)arg;
	for (;;) {
		if (d->resync_cap - d->resync_len < 4096) {
			size_t cap = d->resync_cap ? 2 * d->resync_cap : 65536;
			char *more = cap <= RESYNC_TEXT_MAX ? realloc(d->resync_text, cap) : NULL;

			if (!more) {
				hlb_log(HLB_LOG_WARN, "the old hashlb's health not taken",
					"err=ENOMEM bytes=%zu", d->resync_len);
				resync_end(d, false);
				return;
			}
			d->resync_text = more;
			d->resync_cap = cap;
		}
		n = read(fd, d->resync_text + d->resync_len, d->resync_cap - 1 - d->resync_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) { /* the old one went away before the end: nothing is taken */
			resync_end(d, false);
			return;
		}
		d->resync_len += (size_t)n;
		d->resync_text[d->resync_len] = '\0';
		if (resync_done(d->resync_text, d->resync_len))
			break;
	}
	if (d->hooks.resync && !d->stopping)
		d->hooks.resync(d, d->hooks.arg, d->resync_text);
	resync_end(d, true);
}

/* Follow the resync socket an upgrade in place came with, if any. */
static void resync_watch(struct hlb_daemon *d)
{
	d->resync_fd = hlb_proxy_take_resync_fd(d->proxy);
	if (d->resync_fd < 0)
		return;
	fcntl(d->resync_fd, F_SETFL, O_NONBLOCK);
	if (hlb_daemon_watch(d, d->resync_fd, EPOLLIN, resync_readable, NULL) < 0) {
		close(d->resync_fd);
		d->resync_fd = -1;
	}
}

/* RELOADING=1 with the clock systemd's Type=notify-reload (253+) matches it by. */
void hlb_daemon_notify_reload(struct hlb_daemon *d, bool done)
{
	struct timespec ts;

	if (done) {
		/* a failed reload keeps the old config serving: ready either way */
		hlb_notify("READY=1\nSTATUS=listening on %u address%s", listener_count(d),
			   plural_es(listener_count(d)));
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	hlb_notify("RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading",
		   (unsigned long long)ts.tv_sec * 1000000ULL +
			   (unsigned long long)ts.tv_nsec / 1000);
}

static void handle_signals(struct hlb_daemon *d)
{
	struct signalfd_siginfo si;

	while (read(d->sigfd, &si, sizeof(si)) == sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGHUP:
			if (d->stopping && d->successor) {
				/* sent to the pid that was the service's before the
				 * upgrade: the config is the new process's now */
				if (successor_reload(d) == 0)
					hlb_log(HLB_LOG_INFO,
						"SIGHUP: handed over, the new hashlb reloads",
						"pid=%d", (int)d->successor);
				else
					hlb_log(HLB_LOG_WARN,
						"SIGHUP not passed on: the hashlb this one handed "
						"over to has exited, and no process after it is known: "
						"reload the one serving now",
						"pid=%d", (int)d->successor);
				break;
			}
			if (d->stopping) {
				hlb_log(HLB_LOG_INFO, "SIGHUP ignored: stopping, no reload", NULL);
				break;
			}
			hlb_log(HLB_LOG_INFO, "SIGHUP, reloading", NULL);
			hlb_daemon_notify_reload(d, false);
			d->hooks.reload(d, d->hooks.arg);
			hlb_daemon_notify_reload(d, true);
			break;
		case SIGUSR1:
			hlb_log(HLB_LOG_WARN, "SIGUSR1 ignored",
				"note=\"hashlb logs to stderr, it has no file to reopen: SIGTERM "
				"stops (draining), SIGHUP reloads, SIGUSR2 upgrades\"");
			break;
		case SIGUSR2:
			hlb_log(HLB_LOG_INFO, "SIGUSR2, upgrading in place", NULL);
			hlb_daemon_upgrade_start(d, "signal");
			break;
		case SIGTERM:
		case SIGINT:
		case SIGQUIT:
			hlb_log(HLB_LOG_INFO, "signal, shutting down", "signal=SIG%s",
				sigabbrev_np((int)si.ssi_signo));
			if (d->stopping && !d->stop_signalled) {
				/* Draining since an upgrade handed over: that was no stop
				 * signal, so this one asks for the drain under way (a
				 * service manager's stop reaching every process of the
				 * unit must not cut it); the next closes at once. */
				d->stop_signalled = true;
				hlb_log(HLB_LOG_INFO,
					"draining already (handed over to an upgrade); a second "
					"signal closes every connection",
					NULL);
				break;
			}
			d->stop_signalled = true;
			hlb_daemon_stop(d);
			break;
		default:
			break;
		}
	}
}

/*
 * A worker exited: if it failed (its ring did, see hlb_proxy_failed()), the
 * process serves on with fewer workers, the hashed spread and the capacity
 * the config asked for gone, and the clients the kernel sends to that
 * worker's sockets reset: stop as on SIGTERM (the other workers drain), and
 * hashlb run then exits 1, for the service manager to start it again. A
 * worker that fails while the process drains (a stop, an upgrade's handover)
 * only has its connections reset earlier; the exit status says so too.
 */
static void worker_failed_check(struct hlb_daemon *d)
{
	uint32_t failed = hlb_proxy_failed(d->proxy);

	if (failed == d->failed)
		return;
	d->failed = failed;
	hlb_proxy_close_failed(d->proxy);
	hlb_log(HLB_LOG_ERROR,
		d->stopping ? "a worker failed while draining" : "a worker failed, stopping",
		"failed=%u workers=%u", failed, d->n_workers);
	if (!d->stopping)
		hlb_daemon_stop(d);
}

bool hlb_daemon_failed(const struct hlb_daemon *d)
{
	return d->failed != 0;
}

/* The service named <name> that one of our listeners serves, or NULL. */
static struct hlb_service *listening_service(void *arg, const char *name)
{
	struct hlb_daemon *d = arg;

	for (struct dlistener *dl = d->listeners; dl; dl = dl->next) {
		struct hlb_service *svc = hlb_listener_service(dl->l);

		if (svc && strcmp(svc->name, name) == 0)
			return svc;
	}
	return NULL;
}

int hlb_daemon_run(struct hlb_daemon *d, struct hashlb_error *err)
{
	char qp[HLB_LOG_PATH_MAX];
	struct epoll_event evs[32];
	uint32_t unused, served;
	int r;

	set_fd_limit(d);
	log_migrate_req(d);
	r = hlb_proxy_start(d->proxy, err);
	if (r < 0)
		return r;
	r = d->hooks.start(d, d->cfg, d->hooks.arg, err);
	if (r < 0)
		return r;
	/* once the listeners and checks are there: their shares count */
	warn_services_max_conns(d, d->cfg);
	d->cfg = NULL; /* the hook's */
	warn_max_conns(d);
	log_cap(d);
	log_unused_sockets(d);
	watch_old(d);
	unused = hlb_proxy_release_taken(d->proxy, listening_service, d, &served);
	if (served)
		hlb_log(HLB_LOG_INFO,
			"sockets taken over and not used: their queued clients served", "count=%u",
			served);
	if (unused > served)
		hlb_log(HLB_LOG_INFO, "sockets taken over and not used, left to the old hashlb",
			"count=%u", unused - served);
	d->running = true;
	/* the version hashlb --version prints: the log says which binary ran from when */
	hlb_log(HLB_LOG_INFO, "started", "version=%s workers=%u config=%s pid=%d", HASHLB_VERSION,
		d->n_workers, hlb_log_quote(d->config_path, qp, sizeof(qp)), (int)getpid());
	/* every listener is bound and every worker accepting */
	if (d->ready_fd >= 0) {
		resync_watch(d); /* before READY, which the old one answers on it */
		upgrade_ready(d); /* the old process tells the service manager */
		if (d->resync_fd < 0 || hlb_daemon_timer_add(d, OLD_STOP_MS, 0, old_stop_late, NULL,
							     &d->old_stop_timer) < 0)
			old_stopped(d); /* cannot tell when it stops */
	} else {
		hlb_notify("READY=1\nMAINPID=%d\nSTATUS=listening on %u address%s", (int)getpid(),
			   listener_count(d), plural_es(listener_count(d)));
		/* side by side (sockets taken through the admin endpoint), the old one runs
		 * until the operator stops it: nothing to wait for */
		old_stopped(d);
	}

	while (!hlb_proxy_done(d->proxy) || d->holds) {
		int n = epoll_wait(d->epfd, evs, 32, RCU_POLL_MS);

		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			struct watch *w = evs[i].data.ptr;
			uint64_t v;

			if (w->dead)
				continue;
			switch (w->kind) {
			case WATCH_SIGNAL:
				handle_signals(d);
				break;
			case WATCH_EXIT:
				if (read(w->fd, &v, sizeof(v)) < 0) {
					/* spurious: nonblocking, nothing to read */
				}
				worker_failed_check(d);
				break;
			case WATCH_FAILING:
				hlb_proxy_failing_take(d->proxy);
				if (d->hooks.failing)
					d->hooks.failing(d, d->hooks.arg);
				break;
			case WATCH_TIMER:
				if (read(w->fd, &v, sizeof(v)) == sizeof(v))
					w->timer->fn(d, w->timer->arg);
				break;
			case WATCH_FD:
				w->fd_fn(d, w->fd, evs[i].events, w->arg);
				break;
			default:
				break;
			}
		}
		watch_reap(d);
		hlb_rcu_poll(d->rcu);
	}
	/* the last worker's failure ends the loop before its exit is read */
	worker_failed_check(d);
	d->running = false;
	if (d->stopping && hlb_proxy_done(d->proxy)) {
		uint64_t finished, timed_out;

		/* How the drain ended, after the workers' last connection lines
		 * (flushed as they exit): those that ended by themselves, those
		 * the deadline (or a second signal) closed, and how long it took. */
		hlb_proxy_drain_ends(d->proxy, &finished, &timed_out);
		hlb_log(HLB_LOG_INFO, "stopped", "finished=%llu drain_timeout=%llu drain_ms=%llu",
			(unsigned long long)finished, (unsigned long long)timed_out,
			(unsigned long long)(mono_ms() - d->drain_start_ms));
	} else {
		hlb_log(HLB_LOG_INFO, "stopped", NULL);
	}
	if (d->hooks.stopped)
		d->hooks.stopped(d, d->hooks.arg);
	return 0;
}

void hlb_daemon_free(struct hlb_daemon *d)
{
	struct dlistener *dl, *next;

	if (!d)
		return;
	/* lent and not answered for: the workers have closed them (their drain) */
	if (d->lent_pidfd >= 0)
		close(d->lent_pidfd);
	for (size_t i = 0; i < d->n_lent; i++)
		close(d->lent[i].fd);
	free(d->lent);
	queued_reset(d);
	free(d->parent_fds);
	hlb_proxy_free(d->proxy); /* joins the workers */
	for (dl = d->listeners; dl; dl = next) {
		next = dl->next;
		hlb_listener_unref(dl->l);
		free(dl);
	}
	index_off(&d->index);
	hlb_rcu_free(d->rcu);
	for (struct watch *w = d->watches; w; w = w->next)
		w->dead = true;
	watch_reap(d);
	if (d->epfd >= 0)
		close(d->epfd);
	if (d->sigfd >= 0)
		close(d->sigfd);
	if (d->up.pid) { /* not ready, and not gone: it would serve on alone */
		kill(d->up.pid, d->stopping ? SIGKILL : SIGTERM); /* told to stop already: stuck */
		if (d->stopping)
			waitpid(d->up.pid, NULL, 0);
	}
	while (d->holds)
		hlb_daemon_release(d, d->holds);
	free(d->up.handed);
	if (d->ready_fd >= 0)
		close(d->ready_fd);
	if (d->resync_fd >= 0)
		close(d->resync_fd);
	if (d->parent_fd >= 0)
		close(d->parent_fd);
	while (d->asks) { /* unanswered: their askers are freed too */
		struct old_ask *a = d->asks;

		d->asks = a->next;
		free(a);
	}
	if (d->succ_fd >= 0)
		close(d->succ_fd);
	if (d->successor_pidfd >= 0)
		close(d->successor_pidfd);
	free(d->resync_text);
	if (d->taker_pidfd >= 0)
		close(d->taker_pidfd);
	hashlb_config_free(d->cfg);
	free(d->config_path);
	free(d->exe);
	free(d);
}
