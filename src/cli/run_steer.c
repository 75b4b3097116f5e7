// SPDX-License-Identifier: MIT
/* Kernel steering for `hashlb run` (see run_steer.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/loop.h"
#include "control/plug.h"
#include "hashlb/config.h"
#include "hashlb/steer.h"
#include "run_steer.h"
#include "runtime/daemon.h"
#include "runtime/log.h"

/* A table refused (a backend's MAC unknown) is tried again this often. */
#define RETRY_MS 1000
/* The published backends' MACs are compared with the neighbour table this
 * often, all of them, the table read once (a family) for every service: a
 * backend whose MAC changed (its host replaced under the same address, an
 * address moved to a standby) gets the latest table again. Before, each
 * backend's look-up read the whole table, so 32 backends were compared a
 * turn: a pool of 1,000 took about a minute. */
#define REFRESH_MS 2000
/* A stop's drain looks this often for open flows in the conntrack table
 * (drain_poll()): longer than a tick of the entries' clock at any HZ (256
 * jiffies: 2.56 s at HZ=100), so that a flow still sending uses its entry
 * between two polls. */
#define DRAIN_POLL_MS 3000
/* That tick at the lowest HZ (100): an entry's time changes at its first use
 * in a tick, so a flow's last use may come up to a tick after the poll that
 * saw its entry change (drain_poll()'s idle bound waits for it too). */
#define DRAIN_TICK_MAX_MS 2560
/* How long every entry left must have been closing and unused before a
 * drain ends (drain_poll()): the client's FIN ends only its half, and a
 * client that half-closed (shutdown(SHUT_WR)) sends nothing more until the
 * server's data, which with DSR the LB never sees, makes it ACK. A server
 * silent longer than this after its client's FIN is cut when the program
 * is detached (docs/steering.md); one silent a tick less (DRAIN_TICK_MAX_MS
 * at most) may be, its client's last use in a tick a poll had seen, which
 * changes nothing the poll reads: on time, the polls end a drain 12 s after
 * the one that saw the last change, 15 s at most after the last use. */
#define DRAIN_CLOSING_QUIET_MS 10000

/* A service with steering: kernel, as the config in force says (copied: a
 * reload frees that config). */
struct run_steer_svc {
	char *name;
	char *iface;
	struct sockaddr_storage vip;
	uint32_t flows; /* steering_flows: the conntrack size of a program attached */
	/* What its config's table needs of a program (backends, Maglev M, ring
	 * points, at most): a program shared by several services is sized for
	 * the largest of them (iface_services()). */
	struct hashlb_steer_needs need;
	enum hashlb_scheme scheme; /* its config's: which of <need>'s sizes its tables use */
	struct hashlb_steer *steer; /* NULL until the first table, or after a failure */
	bool failed; /* attaching failed: logged once, retried after a reload */
	/* Another hashlb version's program is on its interface (-EPROTO): its
	 * attach is tried again every RETRY_MS (<retry>), logged once (again if
	 * the reason changes: <refused>, or if another outcome of an attach came
	 * between: the interface gone, another failure), until it is gone.
	 * Likewise a program another live process drives (-EBUSY): <driven>. */
	bool other;
	bool driven;
	/* Its program went away with its interface (or was replaced): attached
	 * again by refresh_tick() once the interface is there. */
	bool lost;
	bool published; /* <generation> is in the kernel with <vip> */
	/* The VIP the program serves: the one its last publication set (a reload's new <vip> goes
	 * with the next table, which may be refused); none known (family 0): <vip>. */
	struct sockaddr_storage vip_set;
	/* Taken over from the hashlb an upgrade replaces, which still publishes
	 * until it stops: nothing is published until then (run_steer_old_stopped()).
	 * With no program yet: waiting for that one's program of one table, which
	 * another service took over, to be replaced (share()). */
	bool held;
	/* Its table, table_free()'s last choice, served another's VIPs (the
	 * replaced hashlb's service): they leave it before its first table. */
	bool vips_stale;
	uint64_t generation;
	/* The service its tables come from (a reference), for the retries: its
	 * current snapshot is the latest table. */
	struct hlb_service *svc;
	/* The latest table was refused: retried by the timer. <refused> is why,
	 * as logged (once, until it is published or the reason changes). */
	bool retry;
	bool marked; /* hashlb_steer_set_daemon() done */
	bool unlocked; /* its last publication ran without the lock, logged */
	/* A backend's neighbour entry, missing, was asked of the kernel since its last
	 * publication: that first refusal is not logged (publish()). */
	bool asked;
	/* The latest table was refused as larger than its program: not
	 * retried (table_unfit()). */
	bool too_small;
	char refused[sizeof(((struct hashlb_error *)0)->msg)];
	/* Why its program did not grow for the config at a publication whose table fit it,
	 * as logged (not_grown()); empty: it holds the config, or grew. */
	char not_grown[sizeof(((struct hashlb_error *)0)->msg)];
	/* Why it has no program, as logged (ctl status says it beside "no program
	 * attached"); empty: not attached yet. */
	char none[sizeof(((struct hashlb_error *)0)->msg)];
	uint64_t n_refused; /* tables refused, for /metrics */
	char **close_on_return; /* names of the backups configured so */
	uint32_t n_close_on_return;
	/* How many backends a reload removed drained at its last publication
	 * (draining_names()), their slots held for their flows (those that kept
	 * them: hashlb_steer_set_table_holding()): refresh_tick() publishes again
	 * once fewer drain, to free the slots of those whose drain ended. */
	uint32_t n_held;
	/* The MACs published with <generation>, by table index (zero: none). */
	uint8_t (*macs)[6];
	uint32_t n_macs;
	/* A stop drains its established flows (drain_begin()): its VIP closed, the
	 * program detached at <drain_until> (CLOCK_MONOTONIC ms) by <drain_timer>
	 * (UINT64_MAX and none for a drain of never). */
	bool draining;
	uint64_t drain_start, drain_until;
	struct hlb_daemon_timer *drain_timer;
	/* Left attached, its VIP open, for the restart after a worker's failure
	 * (kept_for_restart()) */
	bool kept;
	/* Its program marks closing entries (drain_poll()): <drain_quiet> once
	 * a poll looked, the closing entries' sum then <drain_closing>,
	 * unchanged since <drain_quiet_ms> (mono_ms()), */
	bool drain_polled;
	bool drain_quiet;
	uint64_t drain_closing;
	uint64_t drain_quiet_ms;
	/* and the open ones' sum <drain_open>, unchanged since <drain_open_ms> */
	uint64_t drain_open;
	uint64_t drain_open_ms;
	/* What a drain's look found of its own entries (drain_look()), if <looked> */
	bool looked;
	struct hashlb_steer_flows look;
	/* The highest own ct_hits run_steer_stats() showed, of table <hits_table> of program
	 * <hits_prog> (hashlb_steer_prog_id()): a table's are derived from two reads, and a
	 * later reading may show fewer (hashlb_steer_tables_stats()) */
	uint64_t hits_shown;
	uint32_t hits_prog, hits_table;
};

struct run_steer {
	struct run_steer_svc *svcs;
	uint32_t n;
	/* The hashlb this one took the sockets over from (0: none): the
	 * program it drives is taken over too. */
	pid_t from;
	struct hlb_daemon *d;
	/* Whose pool knows the backends a reload removed that drain (NULL: none drain). */
	const struct hlb_control_plug *plug;
	/* Every RETRY_MS while a service's latest table is refused; deleted when none is. */
	struct hlb_daemon_timer *retry_timer;
	/* Every REFRESH_MS once a table is published: the MACs checked. */
	struct hlb_daemon_timer *refresh_timer;
	/* Shutdown has begun (run_steer_stopping()): nothing is published any
	 * more; after an upgrade the new process drives the programs. */
	bool stopping;
	/* The hashlb of <from> publishes no more (run_steer_old_stopped()). */
	bool old_stopped;
	/* A stop drains the kernel path's flows: the daemon's run waits for it. */
	struct hlb_daemon_hold *hold;
	/* Every DRAIN_POLL_MS while a drain's program marks closing entries. */
	struct hlb_daemon_timer *drain_poll;
	/* The conntrack entries of each program a reading of the services'
	 * samples scanned (run_steer_stats(), from its service 0 on): the next
	 * service of that program takes its figures from here, no scan again. */
	struct steer_scan *scans;
	uint32_t n_scans, scans_cap;
	/* The programs' conntrack ages last clamped (ct_age()), mono_ms() */
	uint64_t aged_ms;
};

/* One program's conntrack entries, each of its tables' and all
 * (hashlb_steer_flows_tables()), as read through handle <by>. */
struct steer_scan {
	const struct hashlb_steer *by;
	uint32_t all;
	uint32_t tables[HASHLB_STEER_TABLES_MAX];
	/* each table's counters (hashlb_steer_tables_stats()): packets and bytes if <own>,
	 * the others if <own_all> too */
	struct hlb_steer_stats tstats[HASHLB_STEER_TABLES_MAX];
	bool own, own_all;
};

static bool steer_release(struct run_steer *rs, struct run_steer_svc *e, bool unserve);

/* an interface name as a logfmt value: it may hold '"', '=' or control bytes */
#define LOG_IFACE_MAX (4 * IFNAMSIZ + 3)

static void svc_clear_close_on_return(struct run_steer_svc *e)
{
	for (uint32_t i = 0; i < e->n_close_on_return; i++)
		free(e->close_on_return[i]);
	free(e->close_on_return);
	e->close_on_return = NULL;
	e->n_close_on_return = 0;
}

static void svc_clear(struct run_steer_svc *e)
{
	hashlb_steer_free(e->steer);
	hlb_service_unref(e->svc);
	free(e->macs);
	free(e->name);
	free(e->iface);
	svc_clear_close_on_return(e);
	memset(e, 0, sizeof(*e));
}

/* Copy the names of <c>'s backends with close_on_return into <e>. -ENOMEM. */
static int svc_set_close_on_return(struct run_steer_svc *e, const struct hashlb_service_cfg *c)
{
	svc_clear_close_on_return(e);
	e->close_on_return = calloc(c->n_backends ? c->n_backends : 1, sizeof(char *));
	if (!e->close_on_return)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->n_backends; i++) {
		if (!c->backends[i].close_on_return)
			continue;
		e->close_on_return[e->n_close_on_return] = strdup(c->backends[i].name);
		if (!e->close_on_return[e->n_close_on_return])
			return -ENOMEM;
		e->n_close_on_return++;
	}
	return 0;
}

static bool svc_closes_on_return(const struct run_steer_svc *e, const char *backend)
{
	for (uint32_t i = 0; i < e->n_close_on_return; i++)
		if (strcmp(e->close_on_return[i], backend) == 0)
			return true;
	return false;
}

/* <e> has no program for <why> (its words as logged): hashlb ctl status gives them. */
static void none_because(struct run_steer_svc *e, const char *why)
{
	snprintf(e->none, sizeof(e->none), "%s", why);
}

static const struct hashlb_service_cfg *steered(const struct hashlb_config *cfg, const char *name)
{
	for (uint32_t i = 0; i < cfg->n_services; i++)
		if (cfg->services[i].steering == HASHLB_STEERING_KERNEL &&
		    strcmp(cfg->services[i].name, name) == 0)
			return &cfg->services[i];
	return NULL;
}

/* What config <c> needs of a program, at its config's weights, counted as a reload's check
 * counts it (hashlb_steer_needs()), into <ret>. 0 or -ENOMEM. */
static int cfg_needs(const struct hashlb_service_cfg *c, struct hashlb_steer_needs *ret)
{
	uint32_t n = c->n_backends ? c->n_backends : 1;
	uint32_t *weights = calloc(n, sizeof(*weights));
	bool *backup = calloc(n, sizeof(*backup));

	if (!weights || !backup) {
		free(weights);
		free(backup);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < c->n_backends; i++) {
		weights[i] = c->backends[i].weight;
		backup[i] = c->backends[i].backup;
	}
	hashlb_steer_needs(&c->table, weights, backup, c->n_backends, ret);
	free(weights);
	free(backup);
	return 0;
}

/* <e>'s needs of a program, from its config <c> (cfg_needs()). 0 or -ENOMEM. */
static int svc_set_needs(struct run_steer_svc *e, const struct hashlb_service_cfg *c)
{
	if (cfg_needs(c, &e->need) < 0)
		return -ENOMEM;
	e->scheme = c->table.scheme;
	return 0;
}

static uint32_t max_u32(uint32_t a, uint32_t b)
{
	return a > b ? a : b;
}

static bool same_iface(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/*
 * The name, now, of the interface <e>'s program is on: the one the backends'
 * MACs are read from, for its frames leave through it. A rename keeps the
 * program (attached by index) but not the config's name, which no interface
 * may have any more, or another may have taken: before, every table after
 * a rename was refused ("no entry in the neighbour table of eth0") and
 * retried every second, the kernel path steering by the last one until a
 * reload, which attached a new program with an empty conntrack table.
 * <e>'s configured name if it has no program, or the index has none (gone:
 * attach_lost() tells).
 */
static const char *steer_dev(const struct run_steer_svc *e, char buf[IF_NAMESIZE])
{
	int ifindex = e->steer ? hashlb_steer_ifindex(e->steer) : 0;

	return ifindex > 0 && if_indextoname((unsigned int)ifindex, buf) ? buf : e->iface;
}

/*
 * Whether <iface> of a config names the interface <e>'s program is on: the
 * name <e> was attached under, or another name of that interface now (it was
 * renamed, an altname). A reload naming it keeps the program and its
 * conntrack table (before, a config following a rename detached it and
 * attached a new one, every flow's entry lost).
 */
static bool steers_on(const struct run_steer_svc *e, const char *iface)
{
	int ifindex = e->steer ? hashlb_steer_ifindex(e->steer) : 0;

	return same_iface(iface, e->iface) ||
	       (iface && ifindex > 0 && if_nametoindex(iface) == (unsigned int)ifindex);
}

/* " interface=..." and " config_interface=...": 2 interface names quoted */
#define LOG_IFACE_KV_MAX (2 * LOG_IFACE_MAX + sizeof("interface= config_interface="))

/*
 * "interface=NAME" of <e> for a log line, in <buf>: the name now of the
 * interface its program is on (steer_dev()), then "config_interface=" the
 * config's when they differ (a rename since it was attached). Before, a
 * line after a rename named an interface the program was not on any more.
 */
static const char *iface_kv(const struct run_steer_svc *e, char buf[LOG_IFACE_KV_MAX])
{
	char dev[IF_NAMESIZE], q[LOG_IFACE_MAX], qc[LOG_IFACE_MAX];
	const char *cfg = e->iface ? e->iface : "-", *now = steer_dev(e, dev);

	if (!now || !strcmp(now, cfg))
		snprintf(buf, LOG_IFACE_KV_MAX, "interface=%s", hlb_log_quote(cfg, q, sizeof(q)));
	else
		snprintf(buf, LOG_IFACE_KV_MAX, "interface=%s config_interface=%s",
			 hlb_log_quote(now, q, sizeof(q)), hlb_log_quote(cfg, qc, sizeof(qc)));
	return buf;
}

/*
 * The program of <e>, kept (a reload, a takeover), has the conntrack table
 * it was made with: a map cannot grow in place, and a new program would
 * lose every flow's entry (a draining backend's flows, rescheduled ones,
 * would move). So a steering_flows it does not match is logged and applies
 * when the program is made again: the interface changed, steering off and
 * on, a restart that takes no program over.
 */
static void flows_kept(const struct run_steer_svc *e)
{
	char qi[LOG_IFACE_KV_MAX];
	uint64_t have;

	if (!e->steer)
		return;
	have = hashlb_steer_flows_max(e->steer);
	if (have == hashlb_steer_flows_capacity(e->flows))
		return;
	hlb_log(HLB_LOG_WARN, "kernel steering keeps its conntrack size",
		"service=%s %s flows_max=%llu steering_flows=%u "
		"reason=\"applies when the program is attached again\"",
		e->name, iface_kv(e, qi), (unsigned long long)have, e->flows);
}

void run_steer_sync(void *arg, const struct hashlb_config *cfg)
{
	struct run_steer *rs = arg;
	struct run_steer_svc *v;
	char qi[LOG_IFACE_KV_MAX];
	uint32_t n = 0;

	rs->from = 0; /* a reload's new program is this process's own */

	/* services no longer steered (removed, or steering: userspace now), or
	 * steered on another interface: detached; the rest keep their program */
	for (uint32_t i = 0; i < rs->n; i++) {
		struct run_steer_svc *e = &rs->svcs[i];
		const struct hashlb_service_cfg *c = steered(cfg, e->name);

		if (c && steers_on(e, c->steer_interface)) {
			if (!same_iface(c->steer_interface, e->iface)) {
				char *name = strdup(c->steer_interface);

				if (name) { /* else the name it had: attached again under it */
					free(e->iface);
					e->iface = name;
				}
			}
			if (memcmp(&c->listen_addr, &e->vip, sizeof(e->vip)) != 0) {
				e->vip = c->listen_addr;
				e->published = false; /* the VIP goes with the next table */
			}
			e->failed = false;
			if (c->steer_flows != e->flows) {
				e->flows = c->steer_flows;
				flows_kept(e);
			}
			if (svc_set_close_on_return(e, c) < 0 || svc_set_needs(e, c) < 0)
				hlb_log(HLB_LOG_ERROR, "kernel steering: out of memory", NULL);
			rs->svcs[n++] = *e;
			continue;
		}
		/* What happened, said once: the program detached, or (shared) only
		 * this service's VIP out of it. Before, "detached" was said of a
		 * program that stayed for the others. Held (the replaced hashlb
		 * still publishes into the program): nothing is written into it
		 * now; tables_unserved() takes the VIP out once this hashlb
		 * publishes there. interface=NAME read before the program goes. */
		if (e->steer) {
			bool held = e->held;

			iface_kv(e, qi);
			if (!steer_release(rs, e, !held))
				hlb_log(HLB_LOG_INFO, "kernel steering detached", "service=%s %s%s",
					e->name, qi, c ? " reason=\"interface changed\"" : "");
			else if (held)
				hlb_log(HLB_LOG_INFO,
					"kernel steering: its table left to the program",
					"service=%s %s reason=\"the hashlb this one replaces still "
					"publishes into it; its VIP leaves once this one does\"",
					e->name, qi);
			else
				hlb_log(HLB_LOG_INFO, "kernel steering: its VIP left the program",
					"service=%s %s reason=\"%s; another service's table stays "
					"in it\"",
					e->name, qi,
					c ? "interface changed" : "not steered any more");
		}
		svc_clear(e);
	}
	rs->n = n;
	v = realloc(rs->svcs, (rs->n + cfg->n_services + 1) * sizeof(*v));
	if (!v) {
		hlb_log(HLB_LOG_ERROR, "kernel steering: out of memory", NULL);
		return;
	}
	rs->svcs = v;
	for (uint32_t i = 0; i < cfg->n_services; i++) {
		const struct hashlb_service_cfg *c = &cfg->services[i];
		struct run_steer_svc *e = &rs->svcs[rs->n];
		bool known = false;

		if (c->steering != HASHLB_STEERING_KERNEL)
			continue;
		for (uint32_t j = 0; j < rs->n && !known; j++)
			known = strcmp(rs->svcs[j].name, c->name) == 0;
		if (known)
			continue;
		memset(e, 0, sizeof(*e));
		e->name = strdup(c->name);
		e->iface = c->steer_interface ? strdup(c->steer_interface) : NULL;
		e->vip = c->listen_addr;
		e->flows = c->steer_flows;
		if (!e->name || (c->steer_interface && !e->iface) ||
		    svc_set_close_on_return(e, c) < 0 || svc_set_needs(e, c) < 0) {
			svc_clear(e);
			hlb_log(HLB_LOG_ERROR, "kernel steering: out of memory", NULL);
			continue;
		}
		rs->n++;
	}
}

int run_steer_new(const struct hashlb_config *cfg, struct hlb_daemon *d, pid_t from,
		  struct run_steer **ret_rs)
{
	struct run_steer *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return -ENOMEM;
	rs->d = d;
	run_steer_sync(rs, cfg);
	rs->from = from;
	*ret_rs = rs;
	return 0;
}

void run_steer_set_plug(struct run_steer *rs, const struct hlb_control_plug *plug)
{
	rs->plug = plug;
}

/*
 * The names of <e>'s backends a reload removed that drain still, as the pool
 * has them (hlb_pool_service_draining_names()), into *<ret_names> (to free;
 * NULL if none): how many. Their slots stay theirs while they drain, as the
 * userspace path keeps their connections to timeouts.drain (docs/control.md).
 * Before, the table without them rescheduled their flows at once.
 */
static uint32_t draining_names(const struct run_steer *rs, const struct run_steer_svc *e,
			       const char ***ret_names)
{
	struct hlb_pool *p = hlb_control_plug_pool(rs->plug);
	struct hlb_pool_service *s = p ? hlb_pool_service_find(p, e->name) : NULL;
	uint64_t now = hlb_now_ms();
	uint32_t n = s ? hlb_pool_service_draining_names(s, now, NULL, 0) : 0;

	*ret_names = n ? calloc(n, sizeof(**ret_names)) : NULL;
	if (!*ret_names) /* out of memory: none held, as before */
		return 0;
	return hlb_pool_service_draining_names(s, now, *ret_names, n);
}

/*
 * Whether backend <b> of <e>, out of the table, keeps its established flows,
 * as the userspace path keeps its connections (docs/control.md): drained, in
 * maint, or up yet out of the table (a backup whose place the others took
 * back, unless close_on_return; weight 0). One its health checks took down
 * loses them to the table's choice.
 */
static bool keeps_flows(const struct run_steer_svc *e, const struct hlb_backend *b)
{
	if (atomic_load(&b->admin) != HASHLB_ADMIN_READY)
		return true;
	return atomic_load(&b->healthy) && !(b->backup && svc_closes_on_return(e, b->name));
}

static void log_error(const char *msg, const char *service, const struct hashlb_error *err)
{
	char q[HLB_LOG_QUOTED_MAX(sizeof(err->msg))];

	hlb_log(HLB_LOG_ERROR, msg, "service=%s error=%s", service,
		hlb_log_quote(err->msg, q, sizeof(q)));
}

static void retry_tick(struct hlb_daemon *d, void *arg);
static void refresh_tick(struct hlb_daemon *d, void *arg);

/* The retry timer, if not armed yet: <e> is tried again every RETRY_MS. */
static void retry_arm(struct run_steer *rs, struct run_steer_svc *e)
{
	e->retry = true;
	if (rs->retry_timer || !rs->d)
		return;
	if (hlb_daemon_timer_add(rs->d, RETRY_MS, RETRY_MS, retry_tick, rs, &rs->retry_timer) < 0) {
		rs->retry_timer = NULL;
		hlb_log(HLB_LOG_WARN, "kernel steering: cannot arm the retry timer", "service=%s",
			e->name);
	}
}

/*
 * <e>'s refusals start anew, quietly (another publication holds the lock: said
 * once it has held it 2 s): the first said of them is said even if the same
 * words ended an earlier run of refusals. Before, a second hold of the lock by
 * the same process (the same words) was never said, the table stale unlogged.
 */
static void refusals_anew(struct run_steer_svc *e)
{
	e->refused[0] = 0;
}

/* The latest table of <e> was refused for <err>: logged unless it was refused
 * for that already (or <busy>, or <quiet>: not kept as said either, so that the
 * next refusal for it is), and tried again every RETRY_MS. */
static void table_refused_as(struct run_steer *rs, struct run_steer_svc *e,
			     const struct hashlb_error *err, bool busy, bool quiet)
{
	/*
	 * Another publication into the program holds its lock (a hashlb
	 * beside this one, a hashlb steer --update): tried again at the next
	 * tick, quietly until the lock has been found held for 2 s (-ETIMEDOUT
	 * then, the holder named). The daemon's publications only try the
	 * lock (hashlb_steer_set_lock_try()): before, each waited up to 2 s on
	 * the control thread, the next one due by then, and a holder that did
	 * not let go all but stopped health checks, the admin endpoint and
	 * reloads (one turn of the loop a try).
	 */
	if (busy && !e->retry)
		refusals_anew(e);
	if (!busy && !quiet && (!e->retry || strcmp(e->refused, err->msg) != 0))
		log_error("kernel steering table not updated", e->name, err);
	e->retry = true;
	e->too_small = false;
	if (!busy) {
		e->n_refused++;
		snprintf(e->refused, sizeof(e->refused), "%s", quiet ? "" : err->msg);
	}
	retry_arm(rs, e);
}

static void table_refused(struct run_steer *rs, struct run_steer_svc *e,
			  const struct hashlb_error *err, bool busy)
{
	table_refused_as(rs, e, err, busy, false);
}

/*
 * Ask the kernel for the neighbour entry on <dev> of each backend of <snap> in its table,
 * from the <from>th on, that <neigh> lacks in a subnet of <dev> (hashlb_steer_neigh_missing():
 * before, a routed one too, an ARP request for an address off the segment each retry), for
 * the retry a second later (RETRY_MS) to find: a backend a reload adds, or any at a start
 * with the table cold, whose health check has not reached it yet (nothing does with checks
 * off). Whether one was asked. Before, only those checks (or a client through the daemon's
 * listener) made the entry, and every such start or reload logged its table refused at
 * level=error.
 */
static bool ask_neighbours(struct hashlb_steer_neigh *neigh, const struct hlb_snapshot *snap,
			   uint32_t from, const char *dev)
{
	bool asked = false;

	for (uint32_t i = from; i < snap->n_backends; i++) {
		const struct sockaddr_storage *addr = &snap->backends[i]->addr;

		if (!hashlb_table_backend_down(snap->table, i) &&
		    hashlb_steer_neigh_missing(neigh, addr, dev) &&
		    hashlb_steer_neigh_solicit(addr, dev) == 0)
			asked = true;
	}
	return asked;
}

/*
 * The latest table of <e> does not fit its program, whose maps cannot grow:
 * one taken over (an upgrade, an orphan) that was loaded for another config
 * (a reload or a ctl set that outgrows the program is refused before it
 * applies). Retrying it every RETRY_MS cannot help (before, it did,
 * silently, the only trace tables_refused_total), and a new program would
 * lose the flows' conntrack entries: logged once (again if the reason
 * changes), with what the operator can do; the program keeps the table it
 * has. A later table that fits is published as any.
 * (A table that fits, but only in the slots of backends the program's
 * table has and it drops, is published: hashlb_steer_set_table() hands
 * them over. Before, it was refused too, -ENOSPC.)
 */
static void table_unfit(struct run_steer_svc *e, const struct hashlb_error *err,
			const struct hashlb_error *grow)
{
	char q[HLB_LOG_QUOTED_MAX(sizeof(err->msg))], qi[LOG_IFACE_KV_MAX];
	char qg[HLB_LOG_QUOTED_MAX(sizeof(grow->msg))];

	/* grow_error=: why the program could not grow in place (another hashlb version's, or
	 * past the absolute caps); before, the reason said a program taken over keeps its
	 * size, false since such programs grow, and why this one did not was dropped */
	if (!e->too_small || strcmp(e->refused, err->msg) != 0)
		hlb_log(HLB_LOG_ERROR, "kernel steering table not updated",
			"service=%s %s error=%s grow_error=%s reason=\"%s\"", e->name,
			iface_kv(e, qi), hlb_log_quote(err->msg, q, sizeof(q)),
			hlb_log_quote(grow->msg[0] ? grow->msg : "-", qg, sizeof(qg)),
			"its program is too small for this config and could not grow in place "
			"(grow_error); it steers by the table it has until hashlb is stopped "
			"(which detaches it) and started again, to load one sized for the "
			"config, its flows starting with no conntrack entry");
	e->too_small = true;
	e->retry = false;
	e->n_refused++;
	snprintf(e->refused, sizeof(e->refused), "%s", err->msg);
}

/*
 * <e>'s program could not grow for its config (<why>) at a publication whose table fits it:
 * a table of the config may not (a ring's heavier backups at the failover). Logged once (again
 * if the reason changes); tried again at each publication, a table that does not fit then
 * refused (table_unfit()). Before, nothing said so until that table: a reload whose growth
 * was left to the publication (the lock held at its check) and failed there was silent.
 */
static void not_grown(struct run_steer_svc *e, int ret, struct hashlb_error *why)
{
	char q[HLB_LOG_QUOTED_MAX(sizeof(why->msg))], qi[LOG_IFACE_KV_MAX];

	if (!why->msg[0])
		hashlb_err(why, ret, HASHLB_ERR_SYSTEM, "%s", strerror(-ret));
	if (!strcmp(e->not_grown, why->msg))
		return;
	hlb_log(HLB_LOG_WARN, "kernel steering program not grown",
		"service=%s %s error=%s reason=\"its table fits the program, a table of its config "
		"may not (a ring's heavier backups): tried again at each publication, such a table "
		"refused if it cannot grow then\"",
		e->name, iface_kv(e, qi), hlb_log_quote(why->msg, q, sizeof(q)));
	snprintf(e->not_grown, sizeof(e->not_grown), "%s", why->msg);
}

/*
 * Whether <o>'s program is attached: a handle on a lost one (its interface
 * gone, or another program in its place) is stale, until attach_lost()
 * lets it go. Before, iface_taken(), iface_services() and steer_release()'s
 * heir counted stale handles: of two services on one lost program, the
 * first republished shared the detached program, or loaded one of a single
 * table, the second's then refused (-ENOSPC).
 */
static bool steer_live(const struct run_steer_svc *o)
{
	return o->steer && hashlb_steer_attached(o->steer);
}

/*
 * The service of <rs>, other than <e>, whose program is on <e>'s interface,
 * or NULL. By index, not name: the config refuses two services on one name,
 * but an interface has others (altnames: eth0 and enp0s3), and a program of
 * this process looks like an orphan to hashlb_steer_adopt(), which the second
 * service took over, its tables replacing the first's. The index is that of
 * the other's program, not of its config's name: after a rename (eth0 to
 * hlbren0) that name is no interface's, and a service added on hlbren0 took
 * the first's program over so.
 */
static struct run_steer_svc *iface_taken(struct run_steer *rs, const struct run_steer_svc *e)
{
	unsigned int ifindex = if_nametoindex(e->iface);

	for (uint32_t i = 0; ifindex && i < rs->n; i++) {
		struct run_steer_svc *o = &rs->svcs[i];

		if (o != e && steer_live(o) && hashlb_steer_ifindex(o->steer) == (int)ifindex)
			return o;
	}
	return NULL;
}

/*
 * The tables a program for <e>'s interface is loaded with: one for a service
 * alone there (the layout an older hashlb reads too), else one a service of
 * the config on it (by its names' index, an altname too) and two more, for
 * services a reload adds (a reload past them: a program of one table
 * replaced, share(); else not started, told to restart).
 * Each table's capacities, into <o>, fit the largest of those services'
 * configs (else every table had the first table's, and a larger service's was
 * refused), and <first>, <e>'s first table (its weights may be ones set at run
 * time). A service alone there too: its program was sized by its first table
 * alone, which holds a ring's primaries or its backups, not the heavier of
 * the two that a reload's check counts (run_steer_fits()), so that a reload
 * changing nothing, or the failover to heavier backups, replaced the program.
 */
static uint32_t iface_services(const struct run_steer *rs, const struct run_steer_svc *e,
			       const struct hashlb_steer_needs *first, struct hashlb_steer_opts *o)
{
	unsigned int ifindex = if_nametoindex(e->iface);
	uint32_t n = 0;

	for (uint32_t i = 0; ifindex && i < rs->n; i++) {
		const struct run_steer_svc *s = &rs->svcs[i];

		if (!s->iface || (steer_live(s) ? hashlb_steer_ifindex(s->steer) != (int)ifindex
						: if_nametoindex(s->iface) != ifindex))
			continue;
		n++;
		/* each table's room: twice the largest's, never below the
		 * defaults, as a program sized by its first table has */
		hashlb_steer_size_add(o, &s->need);
	}
	hashlb_steer_size_add(o, first);
	if (n < 2)
		return 1; /* its backends capped by hashlb_steer_open() */
	n = n + 2 < HASHLB_STEER_TABLES_MAX ? n + 2 : HASHLB_STEER_TABLES_MAX;
	/* the tables' backend slots share conntrack's 16 bits */
	if (o->max_backends > HLB_STEER_BACKEND_NONE / n)
		o->max_backends = HLB_STEER_BACKEND_NONE / n;
	return n;
}

/* Whether a service of <rs> other than <skip> (NULL: none) publishes table <t> of the
 * program <p> has. */
static bool table_used_by_other(const struct run_steer *rs, const struct run_steer_svc *skip,
				const struct hashlb_steer *p, uint32_t t)
{
	for (uint32_t i = 0; i < rs->n; i++) {
		const struct hashlb_steer *o = rs->svcs[i].steer;

		/* a stale handle (its program lost) uses no table of <p>'s */
		if (&rs->svcs[i] != skip && steer_live(&rs->svcs[i]) &&
		    hashlb_steer_ifindex(o) == hashlb_steer_ifindex(p) &&
		    hashlb_steer_table(o) == t)
			return true;
	}
	return false;
}

/* Whether a service of <rs> publishes table <t> of the program <p> has. */
static bool table_used(const struct run_steer *rs, const struct hashlb_steer *p, uint32_t t)
{
	return table_used_by_other(rs, NULL, p, t);
}

/*
 * The table of the program <p> has for <e>, whose VIP has none there: the first that no
 * other service of <rs> publishes and that serves no VIP, else the first no other service
 * publishes; -ENOSPC if every one is another's. Not one that serves: it is the table of a
 * service the replaced (or killed) hashlb steered there, which a service of this config
 * further on claims by its VIP (share()). Taken by <e> first, that service got another,
 * whose VIP set was refused while the table <e> took still held it (-EEXIST: its table
 * never published while <e>'s was refused), and <e>'s first table steered its clients.
 */
static int table_free(const struct run_steer *rs, const struct run_steer_svc *e,
		      struct hashlb_steer *p)
{
	uint32_t n = hashlb_steer_tables(p);
	int any = -ENOSPC;

	for (uint32_t t = 0; t < n; t++) {
		if (table_used_by_other(rs, e, p, t))
			continue;
		if (!hashlb_steer_table_serves(p, t))
			return (int)t;
		if (any < 0)
			any = (int)t;
	}
	return any;
}

/*
 * Once every service of <rs> on the interface of <e>'s program of several
 * tables has its table (or failed to), the VIPs of the tables none of them
 * publishes leave it: a service the replaced hashlb (an upgrade) or a killed
 * one (an orphan taken over) steered there, which this config no longer
 * has. Its clients would be steered by its last table for as long as the
 * program stays, health changes unapplied. As a service alone's program
 * not taken over is detached.
 */
static void tables_unserved(struct run_steer *rs, struct run_steer_svc *e)
{
	struct hashlb_error err = { 0 };
	uint32_t n = hashlb_steer_tables(e->steer);

	for (uint32_t i = 0; n > 1 && i < rs->n; i++) {
		const struct run_steer_svc *s = &rs->svcs[i];

		if (!s->failed && s->iface && !s->steer &&
		    if_nametoindex(s->iface) == (unsigned int)hashlb_steer_ifindex(e->steer))
			return; /* not attached yet: its table may be one of these */
	}
	for (uint32_t t = 0; n > 1 && t < n; t++) {
		struct hashlb_steer *o;

		if (table_used(rs, e->steer, t) || !hashlb_steer_table_serves(e->steer, t) ||
		    hashlb_steer_share(e->steer, t, &o, &err) < 0)
			continue;
		if (hashlb_steer_set_vips(o, NULL, 0, &err) < 0)
			log_error("kernel steering: a table no service has keeps its VIPs", e->name,
				  &err);
		else
			hlb_log(HLB_LOG_INFO, "kernel steering: a table no service has left",
				"service=%s table=%u reason=\"its VIPs are no service's of this "
				"config\"",
				e->name, t);
		hashlb_steer_free(o);
	}
}

/*
 * <e>'s table, taken by table_free() (not its VIP's), was another service's: one a reload
 * removed, or the replaced or killed hashlb's. Its packets and bytes (hlb_tstats) start from
 * 0, not from that one's: before, the new service's packets_total began at them. Again once
 * that one's VIPs have left it (vips_stale): packets to them meanwhile were that one's.
 */
static void table_taken(struct run_steer_svc *e)
{
	struct hashlb_error err = { 0 };
	int ret = hashlb_steer_table_stats_clear(e->steer);

	e->hits_shown = 0; /* its conntrack_hits_total from 0 as well */
	if (ret < 0) {
		hashlb_err(&err, ret, HASHLB_ERR_SYSTEM, "zeroing its table's counters: %s",
			   strerror(-ret));
		log_error("kernel steering: its counters start from another service's", e->name,
			  &err);
	}
}

/*
 * <e> steered by a table of the program <other> has on its interface: the
 * one its VIP has there (a program taken over from the hashlb an upgrade
 * replaces), else the first no service uses. One loaded for a service alone
 * (a reload adds a second) is replaced by one of <o>'s tables and
 * capacities (iface_services()), <other>'s VIPs, flows and table kept
 * (hashlb_steer_grow()), one taken over too (-EINPROGRESS while the
 * replaced hashlb still publishes into it: replaced once it stops; -EAGAIN
 * or -ETIMEDOUT while another publication holds its lock: tried again); one
 * of several tables, every one in use, or whose replacement failed, keeps
 * its size, and <e> is refused, to be loaded again by a restart. Before, a
 * second service on an interface was refused by the config, then one a
 * reload added was refused until a restart.
 */
static int share(struct run_steer *rs, struct run_steer_svc *e, struct run_steer_svc *other,
		 const struct hashlb_steer_opts *o, struct hashlb_error *err)
{
	uint32_t n = hashlb_steer_tables(other->steer);
	struct hashlb_error why = { 0 };
	char dev[IF_NAMESIZE], kv[LOG_IFACE_KV_MAX];
	int have = hashlb_steer_vip_table(other->steer, &e->vip), t;

	if (have >= 0 && !table_used(rs, other->steer, (uint32_t)have))
		return hashlb_steer_share(other->steer, (uint32_t)have, &e->steer, err);
	t = table_free(rs, e, other->steer);
	/* the replaced hashlb publishes into it until it stops: replaced then
	 * (run_steer_old_stopped()), <e> held meanwhile */
	if (t < 0 && n == 1 && other->held)
		return hashlb_err(err, -EINPROGRESS, HASHLB_ERR_SYSTEM,
				  "the program on '%s' (service '%s''s) holds 1 table, and the "
				  "hashlb this one replaces publishes into it until it stops",
				  steer_dev(other, dev), other->name);
	if (t < 0 && n == 1) {
		int ret = hashlb_steer_grow(other->steer, o, &why);

		/* another publication holds the program's lock: tried again
		 * (grow_busy()), not refused for good */
		if (ret == -EAGAIN || ret == -ETIMEDOUT) {
			*err = why;
			return ret;
		}
		if (ret < 0) {
			log_error("kernel steering program not replaced", other->name, &why);
		} else {
			/* its table 0 seeded with the old program's counters: its hits go
			 * on from what it showed (own_hits()) */
			other->hits_prog = hashlb_steer_prog_id(other->steer);
			/* interface= as the program's lines give it (iface_kv()) */
			hlb_log(HLB_LOG_INFO, "kernel steering program replaced",
				"service=%s %s mode=%s tables=%u for=%s reason=\"a table for each "
				"service on the interface; its VIPs, flows and table kept\"",
				other->name, iface_kv(other, kv),
				hashlb_steer_mode_name(hashlb_steer_mode(other->steer)),
				hashlb_steer_tables(other->steer), e->name);
			t = table_free(rs, e, other->steer);
		}
	}
	if (t >= 0) {
		int ret = hashlb_steer_share(other->steer, (uint32_t)t, &e->steer, err);

		e->vips_stale = ret == 0 && hashlb_steer_table_serves(e->steer, (uint32_t)t);
		if (ret == 0)
			table_taken(e);
		return ret;
	}
	return hashlb_err(
		err, -ENOSPC, HASHLB_ERR_CONFIG,
		"the program on '%s' (service '%s''s) holds %u table%s, each a service's: "
		"a restart of hashlb (not an upgrade, nor a reload) loads one with a table "
		"for every service on the interface",
		steer_dev(other, dev), other->name, n, n == 1 ? "" : "s");
}

/*
 * <other>'s program of one table was not replaced for <e> (share()): another
 * publication into it holds its lock (a hashlb steer --update, a hashlb
 * beside this one). Tried again every RETRY_MS, as a table refused so is;
 * said once the lock has been found held for 2 s (not while <busy>), and
 * again if the reason changes. Before, <e> was refused until the next
 * reload, told that only a restart would steer it.
 */
static void grow_busy(struct run_steer *rs, struct run_steer_svc *e,
		      const struct run_steer_svc *other, const struct hashlb_error *err, bool busy)
{
	char q[HLB_LOG_QUOTED_MAX(sizeof(err->msg))], kv[LOG_IFACE_KV_MAX];

	if (busy && !e->retry)
		refusals_anew(e);
	if (!busy && (!e->retry || strcmp(e->refused, err->msg) != 0)) {
		hlb_log(HLB_LOG_WARN, "kernel steering program not replaced",
			"service=%s %s for=%s error=%s reason=\"tried again every second\"",
			other->name, iface_kv(other, kv), e->name,
			hlb_log_quote(err->msg, q, sizeof(q)));
		snprintf(e->refused, sizeof(e->refused), "%s", err->msg);
	}
	retry_arm(rs, e);
}

/*
 * Let <e>'s program go. Shared with another service (its interface's
 * program holds their tables): <e>'s VIPs leave it if <unserve> (a reload
 * removed <e>; a stop, detach_stopped(); not a program lost or handed over,
 * nor one the replaced hashlb still publishes into), their conntrack
 * entries cleared, and detaching it at
 * the end, if <e> was to, passes to that service. Before, there was one
 * service per interface. Whether the program stays.
 */
static bool steer_release(struct run_steer *rs, struct run_steer_svc *e, bool unserve)
{
	struct run_steer_svc *heir = NULL;
	struct hashlb_error err = { 0 };

	for (uint32_t i = 0; e->steer && i < rs->n && !heir; i++)
		if (&rs->svcs[i] != e && steer_live(&rs->svcs[i]) &&
		    hashlb_steer_ifindex(rs->svcs[i].steer) == hashlb_steer_ifindex(e->steer) &&
		    hashlb_steer_tables(e->steer) > 1)
			heir = &rs->svcs[i];
	if (heir) {
		if (unserve && hashlb_steer_set_vips(e->steer, NULL, 0, &err) < 0)
			log_error("kernel steering: its VIP stays in the program", e->name, &err);
		if (!hashlb_steer_kept(e->steer))
			hashlb_steer_set_keep(heir->steer, false);
		hashlb_steer_set_keep(e->steer, true);
	}
	hashlb_steer_free(e->steer);
	e->steer = NULL;
	return heir != NULL;
}

/* The MAC refresh (and lost program) timer, if not armed yet. */
static void refresh_arm(struct run_steer *rs, const char *name)
{
	if (rs->refresh_timer || !rs->d)
		return;
	if (hlb_daemon_timer_add(rs->d, REFRESH_MS, REFRESH_MS, refresh_tick, rs,
				 &rs->refresh_timer) < 0) {
		rs->refresh_timer = NULL;
		hlb_log(HLB_LOG_WARN, "kernel steering: cannot arm the MAC refresh timer",
			"service=%s", name);
	}
}

/*
 * How the operator removes the other hashlb program on <iface> (<e>->steer's
 * taken over), into <buf>: a --detach of its mode, or, when a live process
 * drives it (a foreground hashlb steer, another hashlb run), that process,
 * which refuses the --detach naming its pid. Before, the warnings gave the
 * --detach whoever drove it, and the two orphans' said --mode tc whatever
 * the hook.
 */
static const char *other_remedy(struct run_steer_svc *e, const char *iface, char *buf, size_t size)
{
	enum hashlb_steer_mode mode;
	uint32_t id;
	pid_t holder;

	if (hashlb_steer_other(e->steer, iface, &mode, &id, &holder) < 0)
		snprintf(buf, size, "it is gone since");
	else if (holder > 0)
		snprintf(buf, size,
			 "it (%s, program %u) is process %d's, which refuses a --detach: "
			 "stopping that process detaches it",
			 hashlb_steer_mode_name(mode), id, (int)holder);
	else
		snprintf(buf, size, "hashlb steer -i IFACE --mode %s --detach removes it",
			 hashlb_steer_mode_name(mode));
	return buf;
}

/*
 * Into <e>->steer, the program on <iface> to take over, and *<ret_from> how
 * it was found: the one the replaced hashlb drives (an upgrade), else one no
 * process drives (adopt: an orphan). Of two, one at the XDP hook and one at
 * tc (another process attached one by hand, or an older hashlb did not
 * refuse it), the replaced hashlb's: the other is logged, for the operator
 * to detach. Before, an upgrade took the XDP one, and the old process,
 * its tc program taken over by nobody, detached it at the handover, its
 * flows' entries with it: every connection it carried was reset. Of two
 * orphans, the XDP one, which sees every packet first, logged likewise
 * (before, it was taken without a word, as hashlb steer took it).
 * Refused, neither would be driven, and both would go on steering with
 * their last tables. Of an orphan and one a live process drives, the
 * orphan, at either hook, as it would be alone, the other's process named:
 * stopped, its program goes, and this one steers all, with no restart.
 * Before, an orphan at tc beside a driven XDP program was refused (the
 * XDP one's driver named, the orphan not), and went on steering with its
 * last table. Returns 0 or -errno as hashlb_steer_adopt().
 */
static int take_over(struct run_steer *rs, struct run_steer_svc *e, const char *iface,
		     const char **ret_from, struct hashlb_error *err)
{
	char q[HLB_LOG_QUOTED_MAX(sizeof(err->msg))], qi[LOG_IFACE_MAX], remedy[160];
	char both[sizeof(err->msg)];
	const char *taken = "the one at the XDP hook, which sees every packet first, is taken "
			    "over; the tc one sees what it passes";
	int ret;

	if (rs->from > 0) {
		ret = hashlb_steer_find_driven(iface, rs->from, &e->steer, err);
		if (ret == 1)
			hlb_log(HLB_LOG_WARN, "kernel steering: two hashlb programs",
				"service=%s interface=%s error=%s reason=\"the one the replaced "
				"hashlb drove is taken over, with its established flows; the other "
				"is left as it is: %s\"",
				e->name, hlb_log_quote(iface, qi, sizeof(qi)),
				hlb_log_quote(err->msg, q, sizeof(q)),
				other_remedy(e, iface, remedy, sizeof(remedy)));
		*ret_from = "upgrade";
		if (ret != -ENOENT)
			return ret < 0 ? ret : 0;
	}
	*ret_from = "orphan";
	ret = hashlb_steer_adopt(iface, HASHLB_STEER_AUTO, &e->steer, err);
	if (ret != -ENOTUNIQ)
		return ret;
	snprintf(both, sizeof(both), "%s", err->msg); /* both named */
	ret = hashlb_steer_adopt(iface, HASHLB_STEER_XDP_NATIVE, &e->steer, err);
	if (ret == -EBUSY) {
		struct hashlb_error xdp_err = *err;

		ret = hashlb_steer_adopt(iface, HASHLB_STEER_TC, &e->steer, err);
		if (ret < 0) {
			*err = xdp_err; /* both driven: the XDP one's, as before */
			return -EBUSY;
		}
		taken = "the tc one, which no process drives, is taken over; the one at the XDP "
			"hook sees every packet first, and this service's table steers only what "
			"it passes until it is gone";
	}
	if (ret < 0)
		return ret;
	hlb_log(HLB_LOG_WARN, "kernel steering: two hashlb programs",
		"service=%s interface=%s error=%s reason=\"%s: %s\"", e->name,
		hlb_log_quote(iface, qi, sizeof(qi)), hlb_log_quote(both, q, sizeof(q)), taken,
		other_remedy(e, iface, remedy, sizeof(remedy)));
	return 0;
}

/*
 * <e>'s VIP into its program, its table just published. One that another
 * table still has (-EEXIST) while <e>'s VIP changes: <e>'s old VIP leaves
 * the program first, so that the other, whose new VIP it may be (two
 * services that swap their listen addresses in one reload), takes it with
 * its own publication, and <e> its new one at its retry. Before, each kept
 * its old VIP while refused the other's, retried for good, both VIPs steered
 * by the other's table. 0 or -errno as hashlb_steer_set_vips().
 */
static int set_vip(struct run_steer_svc *e, struct hashlb_error *err)
{
	int ret = hashlb_steer_set_vips(e->steer, &e->vip, 1, err);

	if (ret != -EEXIST || !e->vip_set.ss_family ||
	    memcmp(&e->vip_set, &e->vip, sizeof(e->vip)) == 0)
		return ret;
	if (hashlb_steer_set_vips(e->steer, NULL, 0, err) == 0)
		e->vip_set.ss_family = 0; /* none served */
	return hashlb_steer_set_vips(e->steer, &e->vip, 1, err);
}

/*
 * <s>'s handle, of a program grown in place, was not moved to the program in its place
 * (hashlb_steer_rebind() failed: out of memory or descriptors): let go, and its service's
 * table found again in the program grown by its next publication, tried at once (the
 * retry timer: share() takes its VIP's table, its flows kept). Before, it was only logged:
 * the service published into the replaced program, which no packet reads, until its
 * refresh found it lost.
 */
static void rebind_failed(struct run_steer *rs, struct run_steer_svc *s,
			  const struct run_steer_svc *by, const struct hashlb_error *why)
{
	char q[HLB_LOG_QUOTED_MAX(sizeof(why->msg))], kv[LOG_IFACE_KV_MAX];

	hlb_log(HLB_LOG_WARN, "kernel steering: its table not moved to the program grown",
		"service=%s %s error=%s reason=\"its table is found again in the program grown "
		"at once (tried every second)\"",
		s->name, iface_kv(s, kv), hlb_log_quote(why->msg, q, sizeof(q)));
	/* the program is <by>'s to drive, and to detach if <s> was to (steer_release()) */
	if (!hashlb_steer_kept(s->steer))
		hashlb_steer_set_keep(by->steer, false);
	hashlb_steer_set_keep(s->steer, true);
	hashlb_steer_free(s->steer);
	s->steer = NULL;
	s->published = false;
	none_because(s, why->msg);
	if (s->svc)
		retry_arm(rs, s);
}

/*
 * <e>'s program replaced by one sized for a table of <need> (hashlb_steer_size_add(), the rule
 * a program is sized by at start: twice the table, never below the defaults; every other
 * service's of the program as iface_services() sizes them, and, for a reload or a resolve, what
 * every other service of its config <next> on the interface needs: one reload enlarging two
 * services there grows it once), every table and the conntrack
 * entries carried (hashlb_steer_grow()), and the other services' handles moved to it
 * (hashlb_steer_rebind(); one that fails is let go, rebind_failed()): for a reload, a
 * resolve_every or a weight set (run_steer_fits()), or a publication into a program too
 * small for the config (publish(): one taken over, or one a reload outgrew while the lock
 * was held). Before, both were refused until a restart, which detached the program and lost
 * every conntrack entry. 0, or -errno with <err> (-EAGAIN, -ETIMEDOUT: another publication
 * holds the program's lock; -EAGAIN too: grown, but <e>'s own handle not moved, found again
 * at its retry; -EOPNOTSUPP, -E2BIG: it cannot grow so).
 */
static int grow_for(struct run_steer *rs, struct run_steer_svc *e,
		    const struct hashlb_steer_needs *need, const struct hashlb_config *next,
		    struct hashlb_error *err)
{
	uint32_t tables = hashlb_steer_tables(e->steer), old_prog = hashlb_steer_prog_id(e->steer);
	struct hashlb_steer_opts o = { .tables = tables };
	struct run_steer_svc *by = e;
	char kv[LOG_IFACE_KV_MAX];
	uint32_t caps[3], most = need->backends, limit;
	bool *same;
	int ret;

	for (uint32_t i = 0; i < rs->n; i++)
		if (rs->svcs[i].held && rs->svcs[i].steer &&
		    hashlb_steer_same_program(rs->svcs[i].steer, e->steer))
			return hashlb_err(err, -EINPROGRESS, HASHLB_ERR_SYSTEM,
					  "the hashlb this one replaces publishes into it until it "
					  "stops");
	hashlb_steer_size_add(&o, need);
	same = calloc(rs->n ? rs->n : 1, sizeof(*same));
	if (!same)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	for (uint32_t i = 0; i < rs->n; i++) {
		struct run_steer_svc *s = &rs->svcs[i];

		if (s == e || !steer_live(s) || !hashlb_steer_same_program(s->steer, e->steer))
			continue;
		same[i] = true;
		hashlb_steer_size_add(&o, &s->need);
		most = max_u32(most, s->need.backends);
		/* the one that loaded the program drives its successor: the others move to it */
		if (hashlb_steer_loaded(s->steer))
			by = s;
	}
	/*
	 * The others as <next> makes them (one it adds on the interface too). Before, only as
	 * they were: a reload enlarging two services here grew the program for the first, then
	 * again at the second's check, two program loads (each a verifier run on the control
	 * thread) and, for a program of several tables, two of its backend regions.
	 */
	for (uint32_t i = 0; next && i < next->n_services; i++) {
		const struct hashlb_service_cfg *c = &next->services[i];
		struct hashlb_steer_needs n;

		if (c->steering != HASHLB_STEERING_KERNEL || !strcmp(c->name, e->name) ||
		    !steers_on(e, c->steer_interface))
			continue;
		if (cfg_needs(c, &n) < 0) {
			free(same);
			return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		}
		hashlb_steer_size_add(&o, &n);
		most = max_u32(most, n.backends);
	}
	/*
	 * A program of several tables grows its backends a table only when one outgrows them:
	 * each growth appends a region of slots (the old ones stay where their conntrack entries
	 * name them), of which a program holds a few. The tables' slots share conntrack's 16
	 * bits. Before, a program of several tables never grew its backends: refused until a
	 * restart.
	 */
	hashlb_steer_caps(e->steer, &caps[0], &caps[1], &caps[2]);
	limit = tables > 1 ? HLB_STEER_BACKEND_NONE / tables : HASHLB_BACKENDS_MAX;
	if (tables > 1 && most <= caps[0])
		o.max_backends = caps[0];
	else if (o.max_backends > limit)
		o.max_backends = max_u32(limit, need->backends);
	ret = hashlb_steer_grow(by->steer, &o, err);
	if (ret < 0) {
		free(same);
		return ret;
	}
	hashlb_steer_caps(by->steer, &caps[0], &caps[1], &caps[2]);
	/* interface= as the program's lines give it (iface_kv()) */
	hlb_log(HLB_LOG_INFO, "kernel steering program grown",
		"service=%s %s mode=%s tables=%u old_program=%u program=%u max_backends=%u "
		"max_maglev_m=%u max_ring_points=%u reason=\"its table outgrew the program; "
		"every table and flow kept\"",
		e->name, iface_kv(e, kv), hashlb_steer_mode_name(hashlb_steer_mode(by->steer)),
		tables, old_prog, hashlb_steer_prog_id(by->steer), caps[0], caps[1], caps[2]);
	for (uint32_t i = 0; i < rs->n; i++) {
		struct run_steer_svc *s = &rs->svcs[i];
		struct hashlb_error why = { 0 };

		if (!same[i] && s != e)
			continue;
		int r = s != by ? hashlb_steer_rebind(s->steer, by->steer, &why) : 0;

		if (r < 0) {
			if (!why.msg[0])
				hashlb_err(&why, r, HASHLB_ERR_SYSTEM, "%s", strerror(-r));
			rebind_failed(rs, s, by, &why);
			continue;
		}
		s->hits_prog = hashlb_steer_prog_id(s->steer); /* its counters carried */
	}
	free(same);
	/* its table is found again in the program grown at its retry (share()) */
	if (!e->steer)
		return hashlb_err(err, -EAGAIN, HASHLB_ERR_SYSTEM,
				  "its table was not moved to the program grown: found there again "
				  "at its retry");
	return 0;
}

/* What <snap>'s table, as it is (its backends up, its weights), needs of a program. */
static struct hashlb_steer_needs snap_needs(const struct hlb_snapshot *snap)
{
	struct hashlb_table_view v;

	hashlb_table_view(snap->table, &v);
	return (struct hashlb_steer_needs){ .backends = snap->n_backends,
					    .maglev_m = v.m,
					    .ring_points = v.n_points };
}

/*
 * What publishing <snap> needs of <e>'s program: the larger of its table as it is and of its
 * config's needs (the heavier of its primaries and backups, a reload's check counts them
 * so: svc_set_needs()), for a ctl set may make the table outgrow the config's counts.
 */
static struct hashlb_steer_needs publish_needs(const struct run_steer_svc *e,
					       const struct hlb_snapshot *snap)
{
	struct hashlb_steer_needs n = snap_needs(snap);

	n.backends = max_u32(n.backends, e->need.backends);
	n.maglev_m = max_u32(n.maglev_m, e->need.maglev_m);
	/* 64-bit: a config's points (vnodes x weights) may pass 2^32, max_u32() would wrap them */
	if (e->need.ring_points > n.ring_points)
		n.ring_points = e->need.ring_points;
	return n;
}

/* Whether <e>'s program holds what <need> counts of its config's scheme. */
static bool holds(const struct run_steer_svc *e, const struct hashlb_steer_needs *need)
{
	uint32_t backends, m, points;

	hashlb_steer_caps(e->steer, &backends, &m, &points);
	if (need->backends > backends)
		return false;
	return e->scheme == HASHLB_SCHEME_MAGLEV ? need->maglev_m <= m
						 : need->ring_points <= points;
}

/* <snap>, the latest table of <e>'s service, into the kernel. */
static void publish(struct run_steer *rs, struct run_steer_svc *e, const struct hlb_snapshot *snap)
{
	struct hashlb_error err = { 0 }, why = { 0 };
	struct hashlb_steer_dest *dests;
	struct hashlb_steer_neigh *neigh;
	const char *name = e->name, *dev, *from;
	char qi[LOG_IFACE_MAX], devbuf[IF_NAMESIZE];
	bool quiet;
	struct hashlb_steer_needs need;
	const char **held;
	uint32_t n_held;
	int ret, g = 0;

	if (rs->stopping || e->failed || e->lost ||
	    (e->published && e->marked && e->generation == snap->generation))
		return;
	/* waiting for another service's program to be replaced (share()) */
	if (e->held && !e->steer)
		return;
	if (!e->steer) {
		struct hashlb_steer_opts o = { .iface = e->iface,
					       .mode = HASHLB_STEER_AUTO,
					       .flows = e->flows };
		/* the other version's refusal went on to this try; any other outcome
		 * ends it, so that the next one is said again (before, after the
		 * interface was gone a while, it was not: the log's last word was
		 * that it would be attached once back) */
		bool was_other = e->other, was_driven = e->driven;

		e->other = false;
		e->driven = false;

		if (!o.iface) {
			hashlb_err(&err, -EINVAL, HASHLB_ERR_CONFIG,
				   "steering: kernel needs 'interface'");
			e->failed = true;
			log_error("kernel steering not started", name, &err);
			none_because(e, err.msg);
			return;
		}
		/* Not there yet (a bond or VLAN made after hashlb started, at
		 * boot): attached once it is (attach_lost()). Before, never,
		 * until a reload. */
		if (!if_nametoindex(o.iface)) {
			hashlb_err(&err, -ENODEV, HASHLB_ERR_SYSTEM,
				   "no interface '%s': attached once it exists", o.iface);
			e->lost = true;
			log_error("kernel steering not started", name, &err);
			none_because(e, err.msg);
			refresh_arm(rs, name);
			return;
		}
		struct run_steer_svc *other = iface_taken(rs, e);
		struct hashlb_steer_needs first = snap_needs(snap);

		o.tables = iface_services(rs, e, &first, &o);
		/* Another service steers there (under this name or another of
		 * the interface's): a table of its program. Else the replaced
		 * hashlb's program (an upgrade), or one whose process is gone
		 * (killed, crashed): taken over, its flows stay where they are.
		 * Never one another live process drives. */
		if (other) {
			ret = share(rs, e, other, &o, &err);
			if (ret == -EAGAIN || ret == -ETIMEDOUT) {
				grow_busy(rs, e, other, &err, ret == -EAGAIN);
				none_because(e, err.msg);
				return;
			}
			/* Started by run_steer_old_stopped(), once the program is
			 * this process's to replace. Before, refused until a reload. */
			if (ret == -EINPROGRESS) {
				char q[HLB_LOG_QUOTED_MAX(sizeof(err.msg))];

				e->held = true;
				none_because(e, "waits for the hashlb it replaces to stop");
				hlb_log(HLB_LOG_INFO,
					"kernel steering waits for the replaced hashlb",
					"service=%s interface=%s error=%s reason=\"its program is "
					"replaced by one of a table each once that hashlb stops\"",
					name, hlb_log_quote(o.iface, qi, sizeof(qi)),
					hlb_log_quote(err.msg, q, sizeof(q)));
				return;
			}
			if (ret < 0) {
				e->failed = true;
				log_error("kernel steering not started", name, &err);
				none_because(e, err.msg);
				return;
			}
			/* the replaced hashlb's still, as the other's */
			e->held = other->held;
			hlb_log(HLB_LOG_INFO, "kernel steering attached",
				"service=%s interface=%s mode=%s table=%u with=%s", name,
				hlb_log_quote(o.iface, qi, sizeof(qi)),
				hashlb_steer_mode_name(hashlb_steer_mode(e->steer)),
				hashlb_steer_table(e->steer), other->name);
		} else if ((ret = take_over(rs, e, o.iface, &from, &err)) == 0) {
			/* of several tables, its own (the replaced hashlb's order), else one
			 * that serves no other service's VIP (table_free()) */
			int t = hashlb_steer_tables(e->steer) > 1
					? hashlb_steer_vip_table(e->steer, &e->vip)
					: -ENOENT;
			bool taken = false;

			if (t == -ENOENT && hashlb_steer_tables(e->steer) > 1) {
				t = table_free(rs, e, e->steer);
				taken = t >= 0;
				e->vips_stale =
					t >= 0 && hashlb_steer_table_serves(e->steer, (uint32_t)t);
			}
			if (t >= 0)
				hashlb_steer_use_table(e->steer, (uint32_t)t);
			if (taken)
				table_taken(e);
			e->held = strcmp(from, "upgrade") == 0 && !rs->old_stopped;
			hashlb_steer_set_keep(e->steer, false);
			hlb_log(HLB_LOG_INFO, "kernel steering taken over",
				"service=%s interface=%s mode=%s from=%s", name,
				hlb_log_quote(o.iface, qi, sizeof(qi)),
				hashlb_steer_mode_name(hashlb_steer_mode(e->steer)), from);
			/* Attached again, its flows would start with no entry. */
			if (!hashlb_steer_reads_ext(e->steer))
				hlb_log(HLB_LOG_WARN, "kernel steering: an older hashlb's program",
					"service=%s interface=%s reason=\"a reused client port's SYN may "
					"go back to a backend that takes no new connection, until "
					"the program is attached again\"",
					name, hlb_log_quote(o.iface, qi, sizeof(qi)));
			flows_kept(e);
		} else if (ret == -EPROTO || ret == -EBUSY) {
			/* another hashlb version's program: before, -ENOENT, taken
			 * for none, and the attach was refused as if this one's
			 * were there ("--update changes its table"); then attached
			 * only at the next reload after the operator detached it.
			 * Or one a live process drives (a foreground hashlb steer,
			 * another hashlb run): before, not retried, and a reload
			 * that changed nothing did not try again either, so the
			 * service stayed in userspace until a restart. */
			char q[HLB_LOG_QUOTED_MAX(sizeof(err.msg))];

			if (!was_other || strcmp(e->refused, err.msg) != 0)
				hlb_log(HLB_LOG_ERROR, "kernel steering not started",
					"service=%s error=%s reason=\"%s\"", name,
					hlb_log_quote(err.msg, q, sizeof(q)),
					ret == -EBUSY
						? "once that process stops, its program is "
						  "taken over or this hashlb's attached (tried "
						  "every second)"
						: "once it is detached, this hashlb's is "
						  "attached (tried every second)");
			/* each try, logged once above: at debug, so that a retry shows */
			hlb_log(HLB_LOG_DEBUG, "kernel steering attach tried",
				"service=%s error=%s", name, hlb_log_quote(err.msg, q, sizeof(q)));
			e->other = true;
			e->driven = ret == -EBUSY;
			snprintf(e->refused, sizeof(e->refused), "%s", err.msg);
			none_because(e, err.msg);
			retry_arm(rs, e);
			return;
		} else if (ret != -ENOENT) {
			e->failed = true;
			log_error("kernel steering not started", name, &err);
			none_because(e, err.msg);
			return;
		} else if (hashlb_steer_open(&o, snap->table, &e->steer, &err) < 0) {
			e->failed = true;
			log_error("kernel steering not started", name, &err);
			none_because(e, err.msg);
			return;
		} else {
			hlb_log(HLB_LOG_INFO, "kernel steering attached",
				"service=%s interface=%s mode=%s%s", name,
				hlb_log_quote(o.iface, qi, sizeof(qi)),
				hashlb_steer_mode_name(hashlb_steer_mode(e->steer)),
				!was_other ? ""
				: was_driven
					? " reason=\"the process that drove the program is gone\""
					: " reason=\"the other hashlb version's program is gone\"");
		}
		hashlb_steer_set_lock_try(e->steer, true);
		e->marked = false;
		e->none[0] = 0;
	}
	/* hashlb steer --update leaves a daemon's tables alone. */
	if (!e->marked) {
		ret = hashlb_steer_set_daemon(e->steer, &err);
		if (ret == -EAGAIN || ret == -ETIMEDOUT) {
			table_refused(rs, e, &err, ret == -EAGAIN);
			return;
		}
		if (ret < 0) /* steers on, but hashlb steer --update is not told off */
			log_error("kernel steering not marked as hashlb run's", name, &err);
		/* its table named in the program: hashlb steer --stats says whose without
		 * the config */
		ret = hashlb_steer_set_name(e->steer, name);
		if (ret < 0) {
			hashlb_err(&err, ret, HASHLB_ERR_SYSTEM, "naming its table: %s",
				   strerror(-ret));
			log_error("kernel steering: its table not named in the program", name,
				  &err);
		}
		e->marked = true;
	}
	/*
	 * The replaced hashlb publishes until it stops, after this one said it
	 * was ready; the two never publish together. Before, this one published
	 * at once: two publications at the same moment both write the inactive
	 * half, which can end holding one's table and the slots it names the
	 * other's backends (a publication run between another's half and its
	 * flip: 1,083 of 2,000 flows' ACKs sent to another backend than their
	 * SYN). Published then by run_steer_old_stopped(): no retry until
	 * (one left by a set_daemon that found the lock held would show the
	 * table stale meanwhile).
	 */
	if (e->held) {
		e->retry = false;
		return;
	}

	dests = calloc(snap->n_backends ? snap->n_backends : 1, sizeof(*dests));
	/* Read once for the whole table (before, once a backend: a table of
	 * 1,000 read the neighbour table 1,000 times, each read as long as the
	 * table, on the control loop). */
	neigh = hashlb_steer_neigh_new();
	if (!dests || !neigh) {
		free(dests);
		hashlb_steer_neigh_free(neigh);
		return;
	}
	dev = steer_dev(e, devbuf);
	quiet = false;
	for (uint32_t i = 0; i < snap->n_backends; i++) {
		const struct hlb_backend *b = snap->backends[i];
		bool listed = !hashlb_table_backend_down(snap->table, i);

		dests[i].keep_flows = !listed && keeps_flows(e, b);
		/* Only a backend in the table needs its MAC: one down gets no
		 * new flow, and one that keeps its flows keeps the MAC it had
		 * (its host may be gone, and its neighbour entry with it). */
		ret = hashlb_steer_neigh_mac(neigh, &b->addr, dev, dests[i].mac);
		if (ret == 0 || !listed)
			continue;
		/* Keep the table in force: a frame to an unknown MAC would
		 * reach nobody. */
		/* a routed one: no entry is ever made on <dev> (as hashlb steer says it) */
		if (ret == -ENOENT && hashlb_steer_on_subnet(&b->addr, dev) == 0)
			hashlb_err(
				&err, ret, HASHLB_ERR_SYSTEM,
				"backend '%s' (%s) is in none of %s's subnets, so no neighbour "
				"entry is made for it there: the kernel path reaches only hosts on "
				"the layer-2 segment of %s, and keeps its previous table",
				b->name, b->address, dev, dev);
		else if (ret == -ENOENT) {
			hashlb_err(&err, ret, HASHLB_ERR_SYSTEM,
				   "backend '%s' (%s) has no entry in the neighbour table of %s: "
				   "the kernel path keeps its previous table until it has one",
				   b->name, b->address, dev);
			/* its first refusal quiet: the retry finds the entry, or says
			 * the host answers nothing (dead, or not on the segment) */
			quiet = ask_neighbours(neigh, snap, i, dev) && !e->asked;
			e->asked = true;
		} else if (ret == -ENODEV)
			hashlb_err(&err, ret, HASHLB_ERR_SYSTEM,
				   "backend '%s' (%s): reading the neighbour table of %s: %s: the "
				   "kernel path keeps its previous table until it is read",
				   b->name, b->address, dev, strerror(-ret));
		else /* the table's, no backend's (as hashlb steer says it) */
			hashlb_err(
				&err, ret, HASHLB_ERR_SYSTEM,
				"reading the neighbour table (%s): %s: the kernel path keeps its "
				"previous table until it is read",
				hashlb_steer_neigh_source(b->addr.ss_family), strerror(-ret));
		table_refused_as(rs, e, &err, false, quiet);
		goto out;
	}
	/* A table that served another's VIPs (table_free()'s last choice): they
	 * leave it first. Before, its first flip steered them by this service's
	 * table until its VIPs replaced them. */
	if (e->vips_stale) {
		ret = hashlb_steer_set_vips(e->steer, NULL, 0, &err);
		if (ret < 0) {
			table_refused(rs, e, &err, ret == -EAGAIN);
			goto out;
		}
		e->vips_stale = false;
		table_taken(e);
	}
	/*
	 * A program too small for the config, not only for this table: grown for the config
	 * first. A program taken over (an orphan, an upgrade's) sized for a smaller config, or
	 * one a reload outgrew while another publication held its lock (run_steer_fits()
	 * leaves the growth to this publication). Before, only the table in hand was counted:
	 * a ring whose backups outweigh its primaries got its program grown at the failover to
	 * them, a backend failing, on the control loop, or refused then if the lock was held.
	 * A program that cannot grow so still takes a table that fits it.
	 */
	ret = 0;
	need = publish_needs(e, snap);
	/* The draining removed backends' slots count too: a program whose free slots they hold
	 * grows (every flow kept) rather than give one to a new backend, which reset the flows
	 * it held at once, unlogged, whatever timeouts.drain said. */
	n_held = draining_names(rs, e, &held);
	need.backends = max_u32(need.backends, snap->n_backends + n_held);
	if (!holds(e, &need)) {
		g = grow_for(rs, e, &need, NULL, &why);

		if (g == -EAGAIN || g == -ETIMEDOUT) {
			err = why; /* tried again, as a table refused so */
			ret = g;
		}
	}
	e->published = false;
	if (ret == 0)
		ret = hashlb_steer_set_table_holding(e->steer, snap->table, snap->key,
						     &snap->hash_prefix, dests, held, n_held, &err);
	free(held);
	if (ret == -E2BIG) {
		table_unfit(e, &err, &why);
	} else if (ret < 0 || (ret = set_vip(e, &err)) < 0) {
		table_refused(rs, e, &err, ret == -EAGAIN);
	} else {
		uint8_t(*macs)[6] =
			realloc(e->macs, (snap->n_backends ? snap->n_backends : 1) * sizeof(*macs));

		e->published = true;
		e->n_held = n_held;
		e->vip_set = e->vip;
		tables_unserved(rs, e);
		e->retry = false;
		e->asked = false;
		e->too_small = false;
		/* once the replaced hashlb stops (-EINPROGRESS), grown then */
		if (g < 0 && g != -EINPROGRESS)
			not_grown(e, g, &why);
		else
			e->not_grown[0] = 0;
		e->generation = snap->generation;
		if (macs) {
			e->macs = macs;
			e->n_macs = snap->n_backends;
			for (uint32_t i = 0; i < snap->n_backends; i++)
				memcpy(e->macs[i], dests[i].mac, 6);
		} else {
			e->n_macs = 0;
		}
		refresh_arm(rs, name);
		if (hashlb_steer_unlocked(e->steer) && !e->unlocked) {
			char q[HLB_LOG_QUOTED_MAX(160)];

			hlb_log(HLB_LOG_WARN, "kernel steering: published without the lock",
				"service=%s error=%s reason=\"a publication another process (a "
				"hashlb beside this one, hashlb steer --update) makes at the same "
				"moment could mix with this one's\"",
				name, hlb_log_quote(hashlb_steer_unlocked(e->steer), q, sizeof(q)));
		}
		e->unlocked = hashlb_steer_unlocked(e->steer) != NULL;
		hlb_log(HLB_LOG_INFO, "kernel steering table published",
			"service=%s generation=%llu fingerprint=%016llx", name,
			(unsigned long long)snap->generation,
			(unsigned long long)snap->fingerprint);
	}
out:
	hashlb_steer_neigh_free(neigh);
	free(dests);
}

/* The services whose latest table was refused: their service's current
 * snapshot, again. The timer goes once none is left to try (a reload that
 * removes a service or its steering drops its entry, retry and all). One
 * that publish() leaves alone (attaching failed, its interface gone, held
 * for the replaced hashlb) is published by what ends that (a reload,
 * attach_lost(), run_steer_old_stopped()), which arms the timer again if it
 * is refused: before, the timer fired every second meanwhile, for nothing,
 * until a reload (a service lost with its interface, for good). */
static void retry_tick(struct hlb_daemon *d, void *arg)
{
	struct run_steer *rs = arg;
	bool pending = false;

	for (uint32_t i = 0; i < rs->n; i++) {
		struct run_steer_svc *e = &rs->svcs[i];

		if (e->retry && e->svc)
			publish(rs, e, atomic_load(&e->svc->snap));
		pending = pending || (e->retry && e->svc && !e->failed && !e->lost && !e->held);
	}
	if (!pending) {
		hlb_daemon_timer_del(d, rs->retry_timer);
		rs->retry_timer = NULL;
	}
}

/*
 * Whether <e>'s program is gone: a program leaves with its interface, and one
 * created again under the name (a bond, a VLAN set up anew) has none. The
 * daemon went on publishing into maps no program read, its status showing
 * the program attached, and the VIP's clients went to its own listener. Now
 * the loss is logged, and the service's latest table attached again once the
 * interface is there (a new program, with no conntrack entry: the flows
 * through the old interface ended with it).
 */
static void lost_release(struct run_steer *rs, struct run_steer_svc *e)
{
	char qi[LOG_IFACE_KV_MAX];

	if (e->steer && !hashlb_steer_attached(e->steer)) {
		hlb_log(HLB_LOG_WARN, "kernel steering lost",
			"service=%s %s reason=\"its program is no longer attached: the "
			"interface went away, or another program took its place\"",
			e->name, iface_kv(e, qi));
		/* Kept: nothing of ours to detach, and what is there is not ours. */
		hashlb_steer_set_keep(e->steer, true);
		steer_release(rs, e, false);
		e->published = false;
		e->vip_set.ss_family = 0;
		e->lost = true;
		none_because(e, "its program is no longer attached: the interface went away, or "
				"another program took its place; attached again once the interface "
				"is there");
	}
}

static bool attach_lost(struct run_steer *rs, struct run_steer_svc *e)
{
	lost_release(rs, e);
	if (!e->lost)
		return false;
	if (!e->svc || !e->iface || !if_nametoindex(e->iface))
		return true;
	e->lost = false;
	e->failed = false;
	publish(rs, e, atomic_load(&e->svc->snap));
	return true;
}

/*
 * The published tables whose backends' MACs the neighbour table no longer
 * has: published again. Only the table's own backends matter: each table
 * carries the MAC of every backend, read when it was published, and none
 * changes otherwise; a host replaced under the same address (or an address
 * moved to another host) passes its health checks, so the tables stop
 * changing, and the kernel path would send its share of the clients to a
 * MAC nobody has any more.
 */
static uint64_t mono_ms(void);

/*
 * Every program's conntrack entries idle longer than HASHLB_STEER_CT_AGE_MAX
 * ticks set to that age (hashlb_steer_ct_age()), once a period: their 16-bit
 * times never wrap to look fresh. From the refresh tick, which a stop ends:
 * not while a drain looks, which would take a clamped time for a use.
 */
static void ct_age(struct run_steer *rs)
{
	uint64_t now = mono_ms();
	uint32_t n;

	if (rs->aged_ms && now - rs->aged_ms < hashlb_steer_ct_age_period_ms())
		return;
	rs->aged_ms = now;
	for (uint32_t i = 0; i < rs->n; i++) {
		struct hashlb_steer *s = rs->svcs[i].steer;
		bool seen = false;

		for (uint32_t j = 0; s && j < i && !seen; j++)
			seen = hashlb_steer_same_program(s, rs->svcs[j].steer);
		/* a failure: its entries as before, tried again next period */
		if (s && !seen && hashlb_steer_attached(s))
			hashlb_steer_ct_age(s, &n);
	}
}

/* How many fewer backends a reload removed drain than <e>'s last publication held. */
static uint32_t draining_ended(const struct run_steer *rs, const struct run_steer_svc *e)
{
	const char **names;
	uint32_t n = draining_names(rs, e, &names);

	free(names);
	return n < e->n_held ? e->n_held - n : 0;
}

static void refresh_tick(struct hlb_daemon *d, void *arg)
{
	static const uint8_t none[6];
	struct run_steer *rs = arg;
	struct hashlb_steer_neigh *neigh = NULL;
	char devbuf[IF_NAMESIZE], qn[HLB_LOG_QUOTED_MAX(HASHLB_NAME_MAX)];

	(void)d;
	/* Every service on a lost program let go of it before any is attached
	 * again: the first republished would otherwise count the others'
	 * handles on it as a program to share, or size its own for it alone. */
	for (uint32_t i = 0; !rs->stopping && i < rs->n; i++)
		lost_release(rs, &rs->svcs[i]);
	if (!rs->stopping)
		ct_age(rs);
	for (uint32_t i = 0; i < rs->n; i++) {
		struct run_steer_svc *e = &rs->svcs[i];
		const struct hlb_snapshot *snap;
		const char *dev;
		uint32_t ended;

		if (!rs->stopping && attach_lost(rs, e))
			continue;
		if (!e->published || e->retry || !e->svc || !e->steer)
			continue;
		snap = atomic_load(&e->svc->snap);
		if (snap->generation != e->generation)
			continue; /* a newer table is on its way */
		/* a removed backend's drain ended: its slot is freed, its flows left
		 * rescheduled (as the daemon closes its own connections then) */
		ended = e->n_held ? draining_ended(rs, e) : 0;
		if (ended) {
			hlb_log(HLB_LOG_INFO, "kernel steering: removed backends' drain ended",
				"service=%s backends=%u", e->name, ended);
			e->published = false;
			publish(rs, e, snap);
			continue;
		}
		dev = steer_dev(e, devbuf);
		if (!neigh)
			neigh = hashlb_steer_neigh_new();
		if (!neigh)
			return;
		for (uint32_t j = 0,
			      n = snap->n_backends < e->n_macs ? snap->n_backends : e->n_macs;
		     j < n; j++) {
			const struct hlb_backend *b = snap->backends[j];
			uint8_t mac[6];

			/* none published (out of the table, its host gone): nothing
			 * to go stale; its return to the table publishes it */
			if (!memcmp(e->macs[j], none, 6) ||
			    hashlb_steer_neigh_mac(neigh, &b->addr, dev, mac) < 0 ||
			    memcmp(mac, e->macs[j], 6) == 0)
				continue;
			hlb_log(HLB_LOG_INFO, "kernel steering: backend MAC changed",
				"service=%s backend=%s was=%02x:%02x:%02x:%02x:%02x:%02x "
				"now=%02x:%02x:%02x:%02x:%02x:%02x",
				e->name, hlb_log_quote(b->name, qn, sizeof(qn)), e->macs[j][0],
				e->macs[j][1], e->macs[j][2], e->macs[j][3], e->macs[j][4],
				e->macs[j][5], mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
			e->published = false;
			publish(rs, e, snap);
			break;
		}
		/* each check, at debug: it logs nothing else when no MAC changed */
		hlb_log(HLB_LOG_DEBUG, "kernel steering MACs checked", "service=%s backends=%u",
			e->name, e->n_macs);
	}
	hashlb_steer_neigh_free(neigh);
}

void run_steer_publish(void *arg, struct hlb_service *svc, const struct hlb_snapshot *snap)
{
	struct run_steer *rs = arg;

	for (uint32_t i = 0; i < rs->n; i++) {
		struct run_steer_svc *e = &rs->svcs[i];

		if (strcmp(e->name, svc->name) != 0)
			continue;
		if (e->svc != svc) {
			hlb_service_unref(e->svc);
			e->svc = hlb_service_ref(svc);
		}
		/* A reload that moves it off this program (another interface, steering
		 * userspace): run_steer_sync(), right after, detaches it or takes its VIP
		 * out. Its new table is not for this program, sized by the old config:
		 * before, a Maglev service made a ring there was refused ("table not
		 * updated", restart hashlb), a ring that outgrew it grew it, for nothing. */
		if (svc->cfg && (svc->cfg->steering != HASHLB_STEERING_KERNEL ||
				 !steers_on(e, svc->cfg->steer_interface)))
			return;
		/* A reload's new listen goes with the table it publishes first, in one
		 * publication: run_steer_sync(), after, finds the VIP done. Before, the
		 * table went with the old VIP and sync's VIP change published it again,
		 * "table published" logged twice with one generation. */
		if (svc->cfg && memcmp(&svc->cfg->listen_addr, &e->vip, sizeof(e->vip)) != 0) {
			e->vip = svc->cfg->listen_addr;
			e->published = false;
		}
		/* So are its needs (publish_needs()): before, this publication judged the
		 * program by the old config's, and one a reload outgrew while the lock was
		 * held at its check (run_steer_fits()), let go since, grew only at the
		 * next publication, a ring's failover to heavier backups. */
		if (svc->cfg && svc_set_needs(e, svc->cfg) < 0)
			hlb_log(HLB_LOG_ERROR, "kernel steering: out of memory", NULL);
		publish(rs, e, snap);
		return;
	}
}

/*
 * Whether the new process took <e>'s program over, so holds its maps; if not
 * (its config no longer steers this service on this interface), nobody would
 * update it again: detached now (<now>) or when this process exits.
 */
static bool svc_taken_over(struct run_steer *rs, struct run_steer_svc *e, bool now)
{
	char qi[LOG_IFACE_KV_MAX];

	if (hashlb_steer_driven_elsewhere(e->steer)) {
		hashlb_steer_set_keep(e->steer, true);
		return true;
	}
	hashlb_steer_set_keep(e->steer, false);
	hlb_log(HLB_LOG_INFO, "kernel steering detached",
		"service=%s %s reason=\"not taken over by the new process\"", e->name,
		iface_kv(e, qi));
	if (now)
		steer_release(rs, e, false);
	return false;
}

/* Detach <e>'s program (a stop), logged with the interface's name now; one
 * another service still drives stays attached, for it, without <e>'s VIP: its
 * flows end now (a drain of 0 ms, or at its deadline), as a detach ends them,
 * and new clients of it are not steered by its last table while the others
 * drain (before, its VIP stayed in the program, open if it never drained). */
static void detach_stopped(struct run_steer *rs, struct run_steer_svc *e)
{
	char qi[LOG_IFACE_KV_MAX];
	bool shared;

	/* interface=NAME, the name it has now: read before the program goes */
	iface_kv(e, qi);
	shared = steer_release(rs, e, true);
	hlb_log(HLB_LOG_INFO, "kernel steering detached", "service=%s %s reason=stopped%s", e->name,
		qi, shared ? " program=\"kept for the other services on it\"" : "");
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * A drain's look: the services <pick> chooses each get their own entries
 * (hashlb_steer_flows_open(): their table's, of their VIPs in force) into
 * <look>, <looked> set (unset if their program could not be read), from one
 * scan of each program for all of them (hashlb_steer_flows_open_tables()).
 * Before, each service scanned the whole table on its own: N services
 * draining on an interface, N scans a look (about 85 ms each at steering_flows
 * 16M), on the control thread. Done before any of them acts on it (a drain
 * that ends detaches, and may free, a handle the others' program shares).
 */
static void drain_look(struct run_steer *rs,
		       bool (*pick)(const struct run_steer_svc *e, uint64_t now), uint64_t now)
{
	struct hashlb_steer_flows f[HASHLB_STEER_TABLES_MAX];

	for (uint32_t i = 0; i < rs->n; i++)
		rs->svcs[i].looked = false;
	for (uint32_t i = 0; i < rs->n; i++) {
		struct run_steer_svc *e = &rs->svcs[i];

		if (e->looked || !e->steer || !pick(e, now) ||
		    hashlb_steer_flows_open_tables(e->steer, f) < 0)
			continue;
		for (uint32_t j = i; j < rs->n; j++) {
			struct run_steer_svc *o = &rs->svcs[j];

			if (o->looked ||
			    (j != i && (!o->steer || !pick(o, now) ||
					!hashlb_steer_same_program(e->steer, o->steer))))
				continue;
			o->look =
				f[hashlb_steer_tables(o->steer) < 2 ? 0
								    : hashlb_steer_table(o->steer)];
			o->looked = true;
		}
	}
}

/* drain_look()'s choices: a drain at its deadline, */
static bool drain_due(const struct run_steer_svc *e, uint64_t now)
{
	return e->draining && now >= e->drain_until;
}

/* one the poll looks at, */
static bool drain_polled(const struct run_steer_svc *e, uint64_t now)
{
	(void)now;
	return e->draining && e->drain_polled;
}

/* and a program a stop may drain (drain_begin()). */
static bool drain_attached(const struct run_steer_svc *e, uint64_t now)
{
	(void)now;
	return !e->held && hashlb_steer_attached(e->steer);
}

/* The drain of <e> ends: its program detached; the daemon's run let go after the last. */
static void drain_end(struct run_steer *rs, struct run_steer_svc *e)
{
	e->draining = false;
	hlb_daemon_timer_del(rs->d, e->drain_timer);
	e->drain_timer = NULL;
	if (e->steer && hashlb_steer_attached(e->steer)) /* else gone with its interface */
		detach_stopped(rs, e);
	for (uint32_t i = 0; i < rs->n; i++)
		if (rs->svcs[i].draining)
			return;
	hlb_daemon_timer_del(rs->d, rs->drain_poll);
	rs->drain_poll = NULL;
	hlb_daemon_release(rs->d, rs->hold);
	rs->hold = NULL;
}

/* A service's drain deadline: the drains due end. */
static void drain_tick(struct hlb_daemon *d, void *arg)
{
	struct run_steer *rs = arg;
	uint64_t now = mono_ms();

	(void)d;
	drain_look(rs, drain_due, now);
	for (uint32_t i = 0; i < rs->n; i++) {
		struct run_steer_svc *e = &rs->svcs[i];
		char qi[LOG_IFACE_KV_MAX];

		if (!drain_due(e, now))
			continue;
		/* Said, so that a drain that ran to its deadline with no
		 * client left is not a mystery: entries no FIN or RST closed
		 * (a flow still open, a client gone without one) keep it going,
		 * until unused for timeouts.idle (drain_poll()); with none,
		 * closing entries used within DRAIN_CLOSING_QUIET_MS (a flow's
		 * last ACKs) did. Before, open_flows=0 came with the first reason
		 * too. A connect whose SYN no backend answered is named only for
		 * an older hashlb's program that marks no entry closing
		 * (hashlb_steer_marks_closing()), every entry open there: a
		 * program that marks them marks that one half-open, closing
		 * (steer_shared.h; one from before half-open has the same maps,
		 * and is not told apart). Before, it was named for any program.
		 * interface=NAME, the name it has now (iface_kv()). */
		if (e->looked)
			hlb_log(HLB_LOG_INFO, "kernel steering drain timed out",
				"service=%s %s drain_ms=%llu open_flows=%u reason=\"%s\"", e->name,
				iface_kv(e, qi), (unsigned long long)(now - e->drain_start),
				e->look.open,
				!e->look.open
					? "timeouts.drain reached before the entries of flows "
					  "that have ended (their client's FIN or RST) or "
					  "never opened (a SYN alone) had gone 10 s unused: "
					  "a closing flow's last ACKs use its entry"
				: hashlb_steer_marks_closing(e->steer)
					? "timeouts.drain reached with conntrack entries no FIN "
					  "or RST has closed: flows still open, or whose client "
					  "went without one"
					: "timeouts.drain reached with conntrack entries, which "
					  "an older hashlb's program never marks closing: flows "
					  "still open, ended, or whose client went without FIN "
					  "or RST, or a connect no backend answered");
		drain_end(rs, e);
	}
}

/*
 * What a drain whose entries are all closing saw end: a closing entry is a flow whose
 * client's FIN or RST went by it, or a half-open one, which only a SYN has used (a connect
 * no backend answered). Neither the program's counters nor the entry tell the two apart
 * (its half-open bit is relative to the flow's hash, which the loader cannot compute from
 * the entry): the line names both. Before, it named the FIN or RST alone, though a stop
 * whose last entry left was an unanswered connect's logged it too.
 */
#define DRAIN_ENDED                                                                     \
	"every flow has ended (its client's FIN or RST) or never opened (a connect no " \
	"backend answered: its SYN alone)"

/*
 * Every DRAIN_POLL_MS: a drain whose service's entries in the program (its
 * table's, of its VIPs: hashlb_steer_flows_open()) are all closing (their
 * client sent FIN or RST), or open but every one unused for the service's
 * timeouts.idle, at polls DRAIN_CLOSING_QUIET_MS apart or more, the closing
 * ones unused all along (their sum unchanged: a flow still closing, its last
 * ACKs, or a half-closed one ACKing its server's data, uses its entry and
 * changes it), ends now, its flows over. Not at two polls in a row (3 s): a
 * client that half-closed and waits longer for a slow server was cut. The
 * idle bound is the one the daemon's own connections have: an entry no
 * packet used for that long is a client gone without FIN (in an older
 * hashlb's program, which marks no entry half-open, a connect whose SYN no
 * backend answered too), or a connection the userspace path would have
 * closed as idle; before, any of them kept the drain to its deadline, as did
 * the entries of another service's table and of a VIP no longer served.
 */
static void drain_poll(struct hlb_daemon *d, void *arg)
{
	struct run_steer *rs = arg;
	char qi[LOG_IFACE_KV_MAX];

	(void)d;
	drain_look(rs, drain_polled, 0);
	for (uint32_t i = 0; i < rs->n; i++) {
		struct run_steer_svc *e = &rs->svcs[i];
		const struct hashlb_steer_flows *f = &e->look;
		uint64_t now = mono_ms(), idle_ms;

		if (!drain_polled(e, now) || !e->looked)
			continue;
		idle_ms = e->svc ? atomic_load(&e->svc->snap)->idle_timeout_ms : 0;
		if (!e->drain_quiet || f->open_used != e->drain_open) {
			e->drain_open = f->open_used;
			e->drain_open_ms = now;
		}
		if (!e->drain_quiet || f->closing_used != e->drain_closing) {
			e->drain_closing = f->closing_used;
			e->drain_quiet_ms = now;
		}
		e->drain_quiet = true;
		/* timeouts.idle from the flows' last use, at most a tick after the
		 * poll that saw it: before, from that poll, a flow whose last
		 * packet came later in the tick was cut up to a tick short of it */
		if (f->open > 0 &&
		    (!idle_ms || now - e->drain_open_ms < idle_ms + DRAIN_TICK_MAX_MS))
			continue;
		if (now - e->drain_quiet_ms < DRAIN_CLOSING_QUIET_MS)
			continue;
		/* interface=NAME, the name it has now (iface_kv()) */
		hlb_log(HLB_LOG_INFO, "kernel steering drained",
			"service=%s %s drain_ms=%llu idle_flows=%u reason=\"%s\"", e->name,
			iface_kv(e, qi), (unsigned long long)(now - e->drain_start), f->open,
			f->open ? DRAIN_ENDED
				" or gone unused for timeouts.idle (a client gone; in "
				"an older hashlb's program, a connect no backend "
				"answered too)"
				: DRAIN_ENDED);
		drain_end(rs, e);
	}
}

/* drain_look()'s choice for a second signal: every drain. */
static bool drain_any(const struct run_steer_svc *e, uint64_t now)
{
	(void)now;
	return e->draining;
}

/* A second signal: every drain ends now, each said with the flows it cut, as the daemon's
 * own connections' "drain cut" line says them (open_flows=unknown where the scan of its
 * program failed: before, no line then). Before, only "kernel steering detached ...
 * reason=stopped" came, as for a drain that had ended by itself. */
static void drain_now(struct hlb_daemon *d, void *arg)
{
	struct run_steer *rs = arg;
	uint64_t now = mono_ms();
	char qi[LOG_IFACE_KV_MAX];

	(void)d;
	drain_look(rs, drain_any, now);
	for (uint32_t i = 0; i < rs->n; i++) {
		struct run_steer_svc *e = &rs->svcs[i];
		char flows[16] = "unknown";

		if (!e->draining)
			continue;
		if (e->looked)
			snprintf(flows, sizeof(flows), "%u", e->look.open);
		hlb_log(HLB_LOG_INFO, "kernel steering drain cut",
			"service=%s %s drain_ms=%llu open_flows=%s reason=second_signal", e->name,
			iface_kv(e, qi), (unsigned long long)(now - e->drain_start), flows);
		drain_end(rs, e);
	}
}

/*
 * A stop (not an upgrade): the kernel path's established flows drain as the
 * daemon's own connections do. Each program's VIP is closed (its flows go on
 * by their conntrack entries; a new connection is passed to the stack, which
 * refuses it, the listener closed), and the program is detached at its
 * service's timeouts.drain from now, earlier once its flows have ended
 * (drain_poll(): the program marks an entry closing at the client's FIN or
 * RST; an older hashlb's program does not, and keeps its drain to the
 * deadline; with a timeouts.drain of never, no deadline: until its flows have ended, or to
 * the second signal for an older program), or at once on a second signal; the daemon's run
 * waits for it.
 * A program that cannot be closed (an older hashlb's, a failure), or whose
 * service's table holds no entry of its own (hashlb_steer_flows_open()), or
 * whose service drains 0 ms, is detached now (shared: its VIP leaves it).
 */
static void drain_begin(struct run_steer *rs)
{
	struct hashlb_error err = { 0 };
	char qi[LOG_IFACE_KV_MAX], q[HLB_LOG_QUOTED_MAX(sizeof(err.msg))];
	uint64_t start = mono_ms();

	drain_look(rs, drain_attached, start);
	for (uint32_t i = 0; i < rs->n; i++) {
		struct run_steer_svc *e = &rs->svcs[i];
		char ms_text[HASHLB_DRAIN_MS_STRLEN];
		uint32_t ms, entries;

		/* An upgrade stopped before it was ready: the program is still the
		 * replaced hashlb's, which publishes, and drains it or serves on.
		 * Closed here, its VIP would stay closed for that one (its new
		 * connections to its listener, not steered); detached at the
		 * stop, its flows, drained there or not, would end now. */
		if (e->steer && e->held) {
			hashlb_steer_set_keep(e->steer, true);
			hlb_log(HLB_LOG_INFO, "kernel steering left attached",
				"service=%s %s reason=\"the hashlb this one was to replace drives "
				"it\"",
				e->name, iface_kv(e, qi));
			continue;
		}
		/* published or not (a table refused since): it steers by the last one */
		if (!e->steer || !hashlb_steer_attached(e->steer))
			continue;
		/* Waits up to 2 s for the publication lock, before any use of it:
		 * detach_stopped()'s set_vips(NULL) too, which with the lock busy
		 * would fail (-EAGAIN) and leave this VIP open. */
		hashlb_steer_set_lock_try(e->steer, false);
		ms = e->svc ? atomic_load(&e->svc->snap)->drain_timeout_ms : 0;
		/* its own entries: another service's on the interface are none of
		 * its flows (drain_look(), before any of them was detached) */
		if (!e->looked)
			entries = 1; /* unknown: drained */
		else
			entries = e->look.open + e->look.closing;
		if (ms == 0 || entries == 0) {
			detach_stopped(rs, e);
			continue;
		}
		/* The VIP it serves: a reload's new one not published yet (its table refused)
		 * would take the old one's place, whose flows would then reach the stack, reset. */
		if (hashlb_steer_close_vips(e->steer, e->vip_set.ss_family ? &e->vip_set : &e->vip,
					    1, &err) < 0) {
			hlb_log(HLB_LOG_WARN, "kernel steering not drained",
				"service=%s %s error=%s reason=\"its established flows end now\"",
				e->name, iface_kv(e, qi), hlb_log_quote(err.msg, q, sizeof(q)));
			detach_stopped(rs, e);
			continue;
		}
		if (!rs->hold && (!rs->d || hlb_daemon_hold(rs->d, drain_now, rs, &rs->hold) < 0)) {
			detach_stopped(rs, e);
			continue;
		}
		e->draining = true;
		e->drain_start = start;
		e->drain_until = hashlb_drain_end(start, ms);
		/* never: no deadline, the poll (its flows' end) or a second signal ends it */
		e->drain_timer = NULL;
		if (ms != HASHLB_DRAIN_NEVER &&
		    hlb_daemon_timer_add(rs->d, ms, 0, drain_tick, rs, &e->drain_timer) < 0) {
			e->drain_timer = NULL;
			drain_end(rs, e);
			continue;
		}
		/* without the poll (an older program, no timer) it lasts to the deadline; of
		 * never, to a second signal */
		e->drain_polled = hashlb_steer_marks_closing(e->steer);
		if (e->drain_polled && !rs->drain_poll &&
		    hlb_daemon_timer_add(rs->d, DRAIN_POLL_MS, DRAIN_POLL_MS, drain_poll, rs,
					 &rs->drain_poll) < 0)
			e->drain_polled = false;
		e->drain_quiet = false;
		/* interface=NAME, the name it has now (iface_kv()) */
		hlb_log(HLB_LOG_INFO, "kernel steering draining",
			"service=%s %s conntrack_entries=%u drain_timeout_ms=%s "
			"reason=\"established flows go on, new connections are refused; a second "
			"signal detaches it%s\"",
			e->name, iface_kv(e, qi), entries, hashlb_drain_ms_text(ms, ms_text),
			ms != HASHLB_DRAIN_NEVER ? ""
			: e->drain_polled
				? "; timeouts.drain never: until its flows end"
				: "; timeouts.drain never and a program that does not mark closing "
				  "flows: until that signal");
	}
}

/*
 * A worker failed (hlb_daemon_failed()): hashlb stops and exits 1 for its service manager to
 * start it again. The kernel path needs no worker: each program stays attached, its VIP open,
 * steering by its last table, and the restarted hashlb takes it over as after a crash
 * (publish(), take_over()), its flows where they are. Drained instead, the exit, and so the
 * restart, waited for timeouts.drain, new clients refused meanwhile, and every flow ended then.
 */
static void kept_for_restart(struct run_steer *rs)
{
	char qi[LOG_IFACE_KV_MAX];

	for (uint32_t i = 0; i < rs->n; i++) {
		struct run_steer_svc *e = &rs->svcs[i];

		/* one held for the replaced hashlb is left to it (run_steer_stopped()) */
		if (!e->steer || e->held || !hashlb_steer_attached(e->steer))
			continue;
		hashlb_steer_set_keep(e->steer, true);
		e->kept = true;
		/* interface=NAME, the name it has now (iface_kv()). A warning: until a restart
		 * takes it over nothing checks the backends or publishes a table, and without a
		 * restart (run by hand, Restart= off, systemd's start limit hit) it stays so */
		hlb_log(HLB_LOG_WARN, "kernel steering left attached",
			"service=%s %s reason=\"a worker failed: it steers on by its last table, "
			"with no health check, until the restarted hashlb takes it over\" "
			"note=\"if nothing restarts hashlb, detach it: hashlb steer -i INTERFACE "
			"--detach\"",
			e->name, iface_kv(e, qi));
	}
}

void run_steer_stopping(void *arg, bool handed_over)
{
	struct run_steer *rs = arg;

	rs->stopping = true;
	if (rs->retry_timer)
		hlb_daemon_timer_del(rs->d, rs->retry_timer);
	if (rs->refresh_timer)
		hlb_daemon_timer_del(rs->d, rs->refresh_timer);
	rs->retry_timer = rs->refresh_timer = NULL;
	/* The new process adopted the programs before it said it was ready:
	 * one it did not take is detached at once, not after this drain. */
	for (uint32_t i = 0; handed_over && i < rs->n; i++)
		if (rs->svcs[i].steer)
			svc_taken_over(rs, &rs->svcs[i], true);
	if (!handed_over && rs->d && hlb_daemon_failed(rs->d))
		kept_for_restart(rs);
	else if (!handed_over)
		drain_begin(rs);
}

void run_steer_old_stopped(void *arg)
{
	struct run_steer *rs = arg;

	rs->old_stopped = true;
	/* first the services that took a program over, then those that wait
	 * for one of them to be replaced (share()): its service not held then */
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < rs->n; i++) {
			struct run_steer_svc *e = &rs->svcs[i];

			/* stopping: nothing is published, and the program stays the
			 * replaced hashlb's, left to its drain (drain_begin()) */
			if (!e->held || rs->stopping || (pass == 0) != (e->steer != NULL))
				continue;
			e->held = false;
			if (e->svc)
				publish(rs, e, atomic_load(&e->svc->snap));
		}
	}
}

void run_steer_stopped(struct run_steer *rs)
{
	/* Before, run_steer_free() detached them without a word: the log said
	 * "attached" at the start and nothing at the end, and the flows the
	 * kernel path carried ended then with no line to tell why. */
	for (uint32_t i = 0; rs && i < rs->n; i++) {
		struct run_steer_svc *e = &rs->svcs[i];

		e->draining = false; /* the daemon frees its timers and hold */
		e->drain_timer = NULL;
		rs->drain_poll = NULL;
		/* the replaced hashlb's still (drain_begin()), or the restart's */
		if (e->steer && (e->held || e->kept)) {
			hashlb_steer_set_keep(e->steer, true);
			continue;
		}
		if (!e->steer || !hashlb_steer_attached(e->steer))
			continue;
		detach_stopped(rs, e);
	}
}

void run_steer_handed_over(struct run_steer *rs)
{
	for (uint32_t i = 0; rs && i < rs->n; i++)
		if (rs->svcs[i].steer)
			svc_taken_over(rs, &rs->svcs[i], false);
}

int run_steer_fits(void *arg, const struct hashlb_service_cfg *c, const struct hashlb_config *next,
		   const char *const *names, const uint32_t *weights, const bool *backup,
		   uint32_t n, struct hashlb_error *err)
{
	struct run_steer *rs = arg;
	struct hashlb_error why = { 0 };
	char dev[IF_NAMESIZE];

	for (uint32_t i = 0; i < rs->n; i++) {
		struct run_steer_svc *e = &rs->svcs[i];

		/* no program yet, or a new one (another interface): sized at its first
		 * publication, for that table and the config (iface_services()) */
		if (strcmp(e->name, c->name) != 0 || !e->steer ||
		    c->steering != HASHLB_STEERING_KERNEL || !steers_on(e, c->steer_interface))
			continue;
		int ret = hashlb_steer_table_fits(e->steer, &c->table, names, weights, backup, n,
						  &why);
		struct hashlb_error grew = { 0 };
		struct hashlb_steer_needs need;
		int g = 0;

		hashlb_steer_needs(&c->table, weights, backup, n, &need);
		if (ret == -E2BIG)
			g = grow_for(rs, e, &need, next, &grew);

		/* grown: asked again of the program in its place */
		if (ret == -E2BIG && g == 0)
			ret = hashlb_steer_table_fits(e->steer, &c->table, names, weights, backup,
						      n, &why);
		if (ret == 0)
			return 0;
		if (ret == -ENOMEM || g == -ENOMEM)
			return hashlb_err(err, -ENOMEM, why.reason, "%s",
					  g == -ENOMEM ? grew.msg : why.msg);
		/*
		 * Another publication holds the program's lock (a hashlb steer --update, a
		 * hashlb beside this one): the program can grow (hashlb_steer_grow() checks
		 * all else before the lock), only not now. The change applies; publish()
		 * grows the program at the table's publication, tried every RETRY_MS while
		 * the lock is held, the table in force kept meanwhile and the holder named
		 * once it has held it 2 s, as for any publication the lock refuses
		 * (table_refused()). Not waited for here: the control loop would stall (the
		 * daemon only tries the lock, hashlb_steer_set_lock_try()), and a holder may
		 * not let go for long. Before, the reload or ctl set was refused ("try
		 * again"), a transient lock failing the operator's change. Nothing is logged
		 * here: the reload may still be refused by another check.
		 */
		if (g == -EAGAIN || g == -ETIMEDOUT)
			return 0;
		hashlb_err(
			err, ret, why.reason,
			"service %s, steered in the kernel on %s: %s; nothing changed: %s%s%s",
			c->name, steer_dev(e, dev), why.msg,
			g < 0 ? "no larger program can replace it ("
			      : "not even by a larger program",
			g < 0 ? grew.msg : "",
			g < 0 ? "): restart hashlb (not an upgrade) to load one sized for every service"
			      : "");
		/* at the service, as weights_fit_table()'s refusals beside it */
		err->line = c->pos.line;
		err->column = c->pos.column;
		return ret;
	}
	return 0;
}

/*
 * The entries of <e>'s program: a scan of it at the first of its services
 * in a reading (run_steer_stats() of service 0 starts one), the same
 * figures for the others, so that a scrape of N services sharing an
 * interface scans its table once, not N times (0.3 s a service at the
 * largest steering_flows), and their own entries, of one moment, add up to
 * the interface's. NULL if it cannot be read.
 */
static const struct steer_scan *steer_scan(struct run_steer *rs, struct run_steer_svc *e)
{
	struct steer_scan *x;
	int own;

	for (uint32_t k = 0; k < rs->n_scans; k++)
		if (hashlb_steer_same_program(rs->scans[k].by, e->steer))
			return &rs->scans[k];
	if (rs->n_scans == rs->scans_cap) {
		uint32_t cap = rs->scans_cap ? 2 * rs->scans_cap : 4;

		x = reallocarray(rs->scans, cap, sizeof(*x));
		if (!x)
			return NULL;
		rs->scans = x;
		rs->scans_cap = cap;
	}
	x = &rs->scans[rs->n_scans];
	if (hashlb_steer_flows_tables(e->steer, x->tables, &x->all) < 0)
		return NULL;
	own = hashlb_steer_tables_stats(e->steer, x->tstats);
	x->own = own >= 0;
	x->own_all = own == 0;
	x->by = e->steer;
	rs->n_scans++;
	return x;
}

/*
 * <own>, table <t>'s counters of <e>'s program just read: its ct_hits never below what <e>
 * showed of that table before (e->hits_shown), as a counter must not go down. A table's
 * hits are its packets less its new flows and untracked RSTs, read after: a reading that
 * saw more new flows come between its two reads shows fewer than the one before. Before, a
 * service getting new flows alone (a SYN flood) had its conntrack_hits_total go down and
 * up, each fall read as a counter reset by a rate(). From 0 again on another program or
 * table (its counters another's), or once its table's counters are zeroed (table_taken()).
 */
static void own_hits(struct run_steer_svc *e, uint32_t t, struct hlb_steer_stats *own)
{
	uint32_t prog = hashlb_steer_prog_id(e->steer);

	if (prog != e->hits_prog || t != e->hits_table) {
		e->hits_prog = prog;
		e->hits_table = t;
		e->hits_shown = 0;
	}
	if (own->ct_hits < e->hits_shown)
		own->ct_hits = e->hits_shown;
	e->hits_shown = own->ct_hits;
}

int run_steer_stats(void *arg, uint32_t i, struct hlb_steer_sample *ret)
{
	struct run_steer *rs = arg;
	struct hlb_steer_sample v = { 0 };
	const struct steer_scan *x;
	struct run_steer_svc *e;
	uint32_t t;

	if (i >= rs->n)
		return -ENOENT;
	e = &rs->svcs[i];
	/* the same reader as hashlb steer --stats; the conntrack scan reads the
	 * mapped table, no syscall, and counts each table's entries (its
	 * VIPs', read from the program) beside all, once a reading for every
	 * service of the program (steer_scan(); its cost: docs/steering.md) */
	if (i == 0)
		rs->n_scans = 0;
	if (!e->steer) {
		/* why, for ctl status: as logged */
		*ret = (struct hlb_steer_sample){
			.service = e->name,
			.none = e->none[0] ? e->none : "its first attach not tried yet"
		};
		return -ENODEV;
	}
	/* a program whose counters cannot be read now: why, for ctl status (before, its
	 * "steering" was null with no steering_none, as if no reason were known) */
	if (!(x = steer_scan(rs, e)) || hashlb_steer_stats(e->steer, &v.st) < 0) {
		*ret = (struct hlb_steer_sample){
			.service = e->name,
			.none = "its program's counters could not be read (tried at each reading)",
			.attached = true
		};
		return -ENODEV;
	}
	v.service = e->name;
	t = hashlb_steer_tables(e->steer) < 2 ? 0 : hashlb_steer_table(e->steer);
	v.flows = x->tables[t];
	/* the program's counters read after the table's: never fewer */
	v.own = x->tstats[t];
	v.own_known = x->own;
	v.own_all = x->own_all;
	own_hits(e, t, &v.own);
	v.interface_flows = x->all;
	v.flows_max = hashlb_steer_flows_max(e->steer);
	v.table_stale = e->retry || e->too_small;
	v.tables_refused = e->n_refused;
	*ret = v;
	return 0;
}

void run_steer_free(struct run_steer *rs)
{
	if (!rs)
		return;
	for (uint32_t i = 0; i < rs->n; i++)
		svc_clear(&rs->svcs[i]);
	free(rs->svcs);
	free(rs->scans);
	free(rs);
}
