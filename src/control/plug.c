// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "hashlb/grow.h"
#include "runtime/log.h"

#include "check.h"
#include "control.h"
#include "plug.h"

struct plug_sub {
	hlb_publish_fn fn;
	void *arg;
};

struct hlb_control_plug {
	struct hlb_daemon *d;
	struct hlb_loop *loop;
	struct hlb_control *ctl;
	struct plug_sub *subs;
	uint32_t n_subs;
	hlb_control_reloaded_fn reloaded;
	void *reloaded_arg;
	hlb_control_stopping_fn stopping;
	void *stopping_arg;
	void (*old_stopped)(void *arg);
	void *old_stopped_arg;
	hlb_control_steer_stats_fn steer_stats;
	void *steer_stats_arg;
	hlb_control_steer_fits_fn steer_fits;
	void *steer_fits_arg;
};

/* Every service's current snapshot to subscriber <i>. */
static void publish_all(struct hlb_control_plug *plug, uint32_t i)
{
	struct hlb_pool *pool = plug->ctl->pool;

	for (uint32_t j = 0; j < hlb_pool_service_count(pool); j++) {
		struct hlb_pool_service *s = hlb_pool_service_at(pool, j);

		plug->subs[i].fn(plug->subs[i].arg, s->rt, hlb_pool_snapshot(s));
	}
}

/* A reload succeeded: tell the subscriber of reloads, then give every
 * subscriber every snapshot again (a service whose table did not change
 * publishes nothing, yet its other settings may have). */
static void plug_reloaded(void *arg, const struct hashlb_config *cfg)
{
	struct hlb_control_plug *plug = arg;

	hlb_daemon_reloaded(plug->d, cfg);
	if (plug->reloaded)
		plug->reloaded(plug->reloaded_arg, cfg);
	for (uint32_t i = 0; i < plug->n_subs; i++)
		publish_all(plug, i);
}

static void plug_loop_ready(struct hlb_daemon *d, int fd, uint32_t events, void *arg)
{
	struct hlb_control_plug *plug = arg;

	hlb_loop_run_once(plug->loop, 0);
}

static uint64_t plug_generation(void *arg)
{
	struct hlb_control_plug *plug = arg;

	return hlb_daemon_next_generation(plug->d);
}

static void plug_listen_begin(void *arg)
{
	struct hlb_control_plug *plug = arg;

	hlb_daemon_listen_begin(plug->d);
}

static int plug_listen(void *arg, const struct hashlb_service_cfg *c, struct hlb_service *svc,
		       struct hashlb_error *err)
{
	struct hlb_control_plug *plug = arg;

	return hlb_daemon_listen(plug->d, (const struct sockaddr *)&c->listen_addr,
				 c->listen_addr_len, c->name, svc, err);
}

static void plug_listen_commit(void *arg)
{
	struct hlb_control_plug *plug = arg;

	hlb_daemon_listen_commit(plug->d);
}

static void plug_listen_abort(void *arg)
{
	struct hlb_control_plug *plug = arg;

	hlb_daemon_listen_abort(plug->d);
}

static void plug_queue_kick(void *arg, struct hlb_service *svc)
{
	struct hlb_control_plug *plug = arg;

	hlb_daemon_kick_queues(plug->d, svc);
}

/* The pool's lines (pool.h: with their level) and the control plane's (control.h: error or not). */
static void plug_pool_log(void *arg, enum hlb_log_level level, const char *msg, const char *kv)
{
	if (kv && *kv)
		hlb_log(level, msg, "%s", kv);
	else
		hlb_log(level, msg, NULL);
}

static uint64_t plug_connections(void *daemon)
{
	return hlb_daemon_connections(daemon);
}

static uint64_t plug_max_connections(void *daemon)
{
	return hlb_daemon_max_connections(daemon);
}

static bool plug_worker_stats(void *daemon, uint32_t i, struct hlb_worker_stats *ret)
{
	return hlb_daemon_worker_stats(daemon, i, ret);
}

static uint32_t plug_listen_fds(void *daemon, pid_t taker, int *fds, const char **addrs,
				uint32_t max)
{
	return hlb_daemon_listen_fds(daemon, taker, fds, addrs, max);
}

static int plug_upgrade_start(void *daemon)
{
	return hlb_daemon_upgrade_start(daemon, "admin"); /* POST /upgrade's */
}

static pid_t plug_upgrade_state(void *daemon, const char **ret_how)
{
	return hlb_daemon_upgrade_state(daemon, ret_how);
}

static void plug_notify_reload(void *daemon, bool done)
{
	hlb_daemon_notify_reload(daemon, done);
}

static pid_t plug_successor(void *daemon)
{
	return hlb_daemon_successor(daemon);
}

static void plug_close_old_done(struct hlb_daemon *d, void *arg, uint64_t own, int64_t n)
{
	(void)d;
	(void)own;
	hlb_control_close_old_done(arg, n);
}

static pid_t plug_close_old(void *daemon, const char *svc, const char *name,
			    struct hlb_close_wait *wait)
{
	return hlb_daemon_close_old(daemon, svc, name, plug_close_old_done, wait, 0);
}

static uint64_t plug_close(struct hlb_daemon *d, void *arg, const char *svc, const char *name)
{
	struct hlb_control_plug *plug = arg;

	(void)d;
	return plug->ctl ? hlb_control_close_named(plug->ctl, svc, name) : 0;
}

static uint32_t plug_drain_left_ms(struct hlb_daemon *d, void *arg)
{
	struct hlb_control_plug *plug = arg;

	(void)d;
	return plug->ctl ? hlb_pool_drain_left_ms(plug->ctl->pool) : 0;
}

static void plug_failing(struct hlb_daemon *d, void *arg)
{
	struct hlb_control_plug *plug = arg;

	(void)d;
	if (plug->ctl)
		hlb_pool_failing(plug->ctl->pool);
}

static void plug_teardown(struct hlb_control_plug *plug)
{
	hlb_control_free(plug->ctl);
	plug->ctl = NULL;
	if (plug->loop) {
		hlb_daemon_unwatch(plug->d, hlb_loop_fd(plug->loop));
		hlb_loop_free(plug->loop);
		plug->loop = NULL;
	}
}

static void plug_handover(struct hlb_daemon *d, void *arg, FILE *f)
{
	struct hlb_control_plug *plug = arg;
	struct hlb_buf o = { 0 };

	(void)d;
	if (!plug->ctl)
		return;
	hlb_control_handover(plug->ctl, &o);
	/* here alone, not at GET /sockets: this process stops accepting once the new one is
	 * ready, where one that answers GET /sockets serves on beside it, counting on, and the
	 * two would show the same past twice */
	hlb_pool_handover_totals(plug->ctl->pool, &o);
	if (o.len && !o.oom)
		fwrite(o.p, 1, o.len, f);
	hlb_buf_free(&o);
}

static void plug_resync(struct hlb_daemon *d, void *arg, const char *text)
{
	struct hlb_control_plug *plug = arg;
	uint32_t n;

	(void)d;
	if (!plug->ctl)
		return;
	n = hlb_pool_resync(plug->ctl->pool, text);
	hlb_pool_carry_totals(plug->ctl->pool, text); /* what it counted while this one started */
	hlb_log(HLB_LOG_INFO, "health from the old hashlb as this one got ready", "changed=%u", n);
}

static void plug_old_stopped(struct hlb_daemon *d, void *arg)
{
	struct hlb_control_plug *plug = arg;

	(void)d;
	if (plug->old_stopped)
		plug->old_stopped(plug->old_stopped_arg);
}

/*
 * An upgrade: each backend written with a host name stays at the address the old hashlb has
 * for it (its HLB_HANDOVER_RESOLVED lines in <text>) while this one's answer has it too.
 */
static void keep_resolved(struct hashlb_config *cfg, const char *text)
{
	static const char tag[] = "resolved ";
	struct hashlb_addr_kept *v = NULL;
	uint32_t n = 0, moved;
	size_t cap = 0;
	char *copy, *line, *save = NULL;

	if (!text || !strstr(text, tag) || !(copy = strdup(text)))
		return;
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[4], *fs = NULL;
		socklen_t len;
		int k = 0;

		if (strncmp(line, tag, sizeof(tag) - 1))
			continue;
		for (char *t = strtok_r(line + sizeof(tag) - 1, " ", &fs); t && k < 4;
		     t = strtok_r(NULL, " ", &fs))
			f[k++] = t;
		if (k < 4)
			continue;
		if (hlb_grow((void **)&v, &cap, n + 1, sizeof(*v), 64) < 0)
			break;
		v[n] = (struct hashlb_addr_kept){ .svc = f[0], .name = f[1], .address = f[2] };
		if (hashlb_addr_parse(f[3], false, &v[n].addr, &len) == 0)
			n++;
	}
	moved = hashlb_config_keep_addresses(cfg, v, n);
	if (moved)
		hlb_log(HLB_LOG_INFO, "backends kept at the old hashlb's addresses of their names",
			"backends=%u", moved);
	free(v);
	free(copy);
}

static int plug_start(struct hlb_daemon *d, struct hashlb_config *cfg, void *arg,
		      struct hashlb_error *err)
{
	struct hlb_control_plug *plug = arg;
	struct hlb_pool_env env = {
		.rcu = hlb_daemon_rcu(d),
		.arg = plug,
		.next_generation = plug_generation,
		.listen_begin = plug_listen_begin,
		.listen = plug_listen,
		.listen_commit = plug_listen_commit,
		.listen_abort = plug_listen_abort,
		.queue_kick = plug_queue_kick,
		.log = plug_pool_log,
		.handover = hlb_daemon_handover(d),
	};
	int ret;

	ret = hlb_loop_new(&plug->loop);
	if (ret < 0)
		return hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "control loop: %s", strerror(-ret));
	ret = hlb_daemon_watch(d, hlb_loop_fd(plug->loop), EPOLLIN, plug_loop_ready, plug);
	if (ret < 0) {
		hlb_loop_free(plug->loop);
		plug->loop = NULL;
		return hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "control loop: %s", strerror(-ret));
	}
	keep_resolved(cfg, env.handover);
	ret = hlb_control_new(cfg, hlb_daemon_config_path(d), plug->loop, &env, plug_pool_log, plug,
			      &plug->ctl, err);
	if (ret < 0) {
		plug_teardown(plug);
		return ret;
	}
	plug->ctl->daemon = d;
	plug->ctl->connections = plug_connections;
	plug->ctl->max_connections = plug_max_connections;
	plug->ctl->worker_stats = plug_worker_stats;
	plug->ctl->listen_fds = plug_listen_fds;
	plug->ctl->upgrade_start = plug_upgrade_start;
	plug->ctl->upgrade_state = plug_upgrade_state;
	plug->ctl->successor = plug_successor;
	plug->ctl->notify_reload = plug_notify_reload;
	plug->ctl->close_old = plug_close_old;
	plug->ctl->reloaded = plug_reloaded;
	plug->ctl->reloaded_arg = plug;
	plug->ctl->steer_stats = plug->steer_stats;
	plug->ctl->steer_stats_arg = plug->steer_stats_arg;
	plug->ctl->steer_fits = plug->steer_fits;
	plug->ctl->steer_fits_arg = plug->steer_fits_arg;
	for (uint32_t i = 0; i < plug->n_subs; i++) {
		hlb_pool_subscribe(plug->ctl->pool, plug->subs[i].fn, plug->subs[i].arg);
		publish_all(plug, i);
	}
	return 0;
}

static void plug_reload(struct hlb_daemon *d, void *arg)
{
	struct hlb_control_plug *plug = arg;

	if (plug->ctl)
		hlb_control_reload(plug->ctl, "signal", NULL);
}

static void plug_stopping(struct hlb_daemon *d, void *arg)
{
	struct hlb_control_plug *plug = arg;

	/* handed over: the new hashlb serves the admin address (SO_REUSEPORT
	 * would share its clients out with this one otherwise) */
	if (plug->ctl)
		hlb_control_stop(plug->ctl, hlb_daemon_handed_over(d));
	if (plug->stopping)
		plug->stopping(plug->stopping_arg, hlb_daemon_handed_over(d));
}

static void plug_taker_exited(struct hlb_daemon *d, void *arg)
{
	struct hlb_control_plug *plug = arg;

	(void)d;
	if (plug->ctl)
		hlb_control_admin_reclaim(plug->ctl);
}

/*
 * The drain is over: each service's counters as this process ends them. Once the admin
 * address is the new process's (an upgrade) or gone (a stop), what this one counted after
 * the last scrape of its /metrics is seen nowhere else: clients refused while the new one
 * started, or while this one drained, and the bytes its connections forwarded meanwhile
 * (those of backends a reload removed included).
 */
static void plug_stopped(struct hlb_daemon *d, void *arg)
{
	struct hlb_control_plug *plug = arg;
	struct hlb_pool *pool = plug->ctl ? plug->ctl->pool : NULL;

	(void)d;
	if (pool)
		hlb_pool_log_totals(pool);
	plug_teardown(plug);
}

int hlb_control_plug(struct hlb_daemon *d, struct hlb_control_plug **ret_plug)
{
	struct hlb_control_plug *plug = calloc(1, sizeof(*plug));
	struct hlb_daemon_hooks hooks = {
		.start = plug_start,
		.reload = plug_reload,
		.stopping = plug_stopping,
		.drain_left_ms = plug_drain_left_ms,
		.stopped = plug_stopped,
		.handover = plug_handover,
		.resync = plug_resync,
		.old_stopped = plug_old_stopped,
		.close = plug_close,
		.failing = plug_failing,
		.taker_exited = plug_taker_exited,
	};

	if (!plug)
		return -ENOMEM;
	plug->d = d;
	hooks.arg = plug;
	hlb_daemon_set_hooks(d, &hooks);
	/* the checks' and the admin's sockets: room under a cap from the fd limit */
	hlb_daemon_count_fds(d, hlb_check_fds());
	hlb_daemon_admin_fds(d, HLB_HTTP_CONNS_MAX + HLB_HTTP_BUSY_MAX);
	*ret_plug = plug;
	return 0;
}

int hlb_control_plug_subscribe(struct hlb_control_plug *plug, hlb_publish_fn fn, void *arg)
{
	struct plug_sub *v = realloc(plug->subs, (plug->n_subs + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	plug->subs = v;
	plug->subs[plug->n_subs++] = (struct plug_sub){ fn, arg };
	return 0;
}

void hlb_control_plug_on_stopping(struct hlb_control_plug *plug, hlb_control_stopping_fn fn,
				  void *arg)
{
	plug->stopping = fn;
	plug->stopping_arg = arg;
}

void hlb_control_plug_on_old_stopped(struct hlb_control_plug *plug, void (*fn)(void *arg),
				     void *arg)
{
	plug->old_stopped = fn;
	plug->old_stopped_arg = arg;
}

void hlb_control_plug_on_reload(struct hlb_control_plug *plug, hlb_control_reloaded_fn fn,
				void *arg)
{
	plug->reloaded = fn;
	plug->reloaded_arg = arg;
}

void hlb_control_plug_on_steer_stats(struct hlb_control_plug *plug, hlb_control_steer_stats_fn fn,
				     void *arg)
{
	plug->steer_stats = fn;
	plug->steer_stats_arg = arg;
}

void hlb_control_plug_on_steer_fits(struct hlb_control_plug *plug, hlb_control_steer_fits_fn fn,
				    void *arg)
{
	plug->steer_fits = fn;
	plug->steer_fits_arg = arg;
}

struct hlb_pool *hlb_control_plug_pool(const struct hlb_control_plug *plug)
{
	return plug && plug->ctl ? plug->ctl->pool : NULL;
}

void hlb_control_plug_free(struct hlb_control_plug *plug)
{
	if (!plug)
		return;
	plug_teardown(plug);
	free(plug->subs);
	free(plug);
}
