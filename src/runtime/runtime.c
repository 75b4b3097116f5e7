// SPDX-License-Identifier: MIT
/* Backends, snapshots and services: the objects of runtime.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clients.h"
#include "runtime.h"

int hlb_backend_new(const struct hashlb_backend_cfg *cfg, uint32_t n_workers,
		    struct hlb_backend **ret_backend)
{
	struct hlb_backend *b;

	if (n_workers == 0 || n_workers > HLB_WORKERS_MAX)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->name = strdup(cfg->name);
	b->address = strdup(cfg->address ? cfg->address : "");
	b->wstats = aligned_alloc(64, sizeof(*b->wstats) * n_workers);
	if (!b->name || !b->address || !b->wstats) {
		free(b->name);
		free(b->address);
		free(b->wstats);
		free(b);
		return -ENOMEM;
	}
	memset(b->wstats, 0, sizeof(*b->wstats) * n_workers);
	atomic_init(&b->refs, 1);
	b->n_workers = n_workers;
	b->addr = cfg->addr;
	b->addr_len = cfg->addr_len;
	b->weight = cfg->weight;
	b->backup = cfg->backup;
	atomic_init(&b->admin, (int)cfg->admin);
	atomic_init(&b->healthy, true);
	atomic_init(&b->listed, false);
	atomic_init(&b->consecutive_fail, 0);
	atomic_init(&b->connect_err, 0);
	atomic_init(&b->health_since_ns, 0);
	atomic_init(&b->active, 0);
	atomic_init(&b->max_conns, cfg->max_connections);
	atomic_init(&b->claimed, 0);
	atomic_init(&b->admit, 65536);
	atomic_init(&b->close_gen, 0);
	atomic_init(&b->close_why, HLB_CLOSE_NONE);
	atomic_init(&b->drain_until_ms, 0);
	*ret_backend = b;
	return 0;
}

atomic_uint hlb_close_epoch;

void hlb_backend_close(struct hlb_backend *b, enum hlb_close_why why)
{
	atomic_store_explicit(&b->close_why, (int)why, memory_order_relaxed);
	atomic_fetch_add_explicit(&b->close_gen, 1, memory_order_release);
	atomic_fetch_add_explicit(&hlb_close_epoch, 1, memory_order_release);
}

struct hlb_backend *hlb_backend_ref(struct hlb_backend *b)
{
	atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
	return b;
}

void hlb_backend_unref(struct hlb_backend *b)
{
	if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (b->control_free)
		b->control_free(b->control);
	free(b->wstats);
	free(b->name);
	free(b->address);
	free(b);
}

bool hlb_backend_usable(const struct hlb_backend *b)
{
	return atomic_load_explicit(&b->admin, memory_order_relaxed) == HASHLB_ADMIN_READY &&
	       atomic_load_explicit(&b->healthy, memory_order_relaxed);
}

const uint32_t hlb_connect_bucket_us[HLB_CONNECT_BUCKETS] = {
	100,   250,    500,    1000,   2500,	5000,	 10000,	  25000,
	50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
};

const char *const hlb_end_names[HLB_END_MAX] = {
	[HLB_END_DONE] = "done",
	[HLB_END_CLIENT_RESET] = "client_reset",
	[HLB_END_BACKEND_RESET] = "backend_reset",
	[HLB_END_IDLE] = "idle_timeout",
	[HLB_END_ERROR] = "error",
	[HLB_END_DRAIN] = "drain_timeout",
	[HLB_END_CLOSED] = "closed",
	[HLB_END_BACKEND_DOWN] = "backend_down",
	[HLB_END_PRIMARY_UP] = "primary_up",
};

void hlb_backend_counters_read(const struct hlb_backend *b, struct hlb_backend_counters *ret)
{
	struct hlb_backend_counters c = { 0 };

	c.active = atomic_load_explicit(&b->active, memory_order_relaxed);
	for (uint32_t i = 0; i < b->n_workers; i++) {
		const struct hlb_backend_wstats *w = &b->wstats[i];

		c.total += atomic_load_explicit(&w->established, memory_order_relaxed);
		c.bytes_in += atomic_load_explicit(&w->bytes_in, memory_order_relaxed);
		c.bytes_out += atomic_load_explicit(&w->bytes_out, memory_order_relaxed);
		c.connect_fail += atomic_load_explicit(&w->connect_fail, memory_order_relaxed);
		c.connect_timeout +=
			atomic_load_explicit(&w->connect_timeout, memory_order_relaxed);
		c.retries += atomic_load_explicit(&w->retries, memory_order_relaxed);
		c.splices += atomic_load_explicit(&w->splices, memory_order_relaxed);
		c.bytes_spliced += atomic_load_explicit(&w->bytes_spliced, memory_order_relaxed);
		c.full += atomic_load_explicit(&w->full, memory_order_relaxed);
		for (int k = 0; k < HLB_END_WORKER_MAX; k++)
			c.ends[k] += atomic_load_explicit(&w->ends[k], memory_order_relaxed);
		for (int k = 0; k <= HLB_CONNECT_BUCKETS; k++)
			c.connect_hist[k] +=
				atomic_load_explicit(&w->connect_hist[k], memory_order_relaxed);
		c.connect_us_sum += atomic_load_explicit(&w->connect_us_sum, memory_order_relaxed);
	}
	for (int k = HLB_END_WORKER_MAX; k < HLB_END_MAX; k++)
		c.ends[k] = atomic_load_explicit(&b->rare_ends[k - HLB_END_WORKER_MAX],
						 memory_order_relaxed);
	*ret = c;
}

void hlb_backend_counters_add(struct hlb_backend_counters *sum,
			      const struct hlb_backend_counters *c)
{
	sum->active += c->active;
	sum->total += c->total;
	sum->bytes_in += c->bytes_in;
	sum->bytes_out += c->bytes_out;
	sum->connect_fail += c->connect_fail;
	sum->connect_timeout += c->connect_timeout;
	sum->retries += c->retries;
	sum->splices += c->splices;
	sum->bytes_spliced += c->bytes_spliced;
	sum->full += c->full;
	for (int k = 0; k < HLB_END_MAX; k++)
		sum->ends[k] += c->ends[k];
	for (int k = 0; k <= HLB_CONNECT_BUCKETS; k++)
		sum->connect_hist[k] += c->connect_hist[k];
	sum->connect_us_sum += c->connect_us_sum;
}

static void snapshot_settings(struct hlb_snapshot *s, const struct hashlb_service_cfg *cfg)
{
	s->key = cfg->key;
	s->hash_prefix = cfg->hash_prefix;
	s->seed = cfg->table.seed;
	s->connect_timeout_ms = cfg->connect_timeout_ms;
	s->idle_timeout_ms = cfg->idle_timeout_ms;
	s->drain_timeout_ms = cfg->drain_timeout_ms;
	s->queue_timeout_ms = cfg->queue_timeout_ms;
	s->abort_on_close = cfg->abort_on_close;
	s->max_connections = cfg->max_connections;
	s->max_per_client = cfg->max_connections_per_client;
	s->client_prefix = cfg->client_prefix;
	s->max_conn_rate = cfg->max_connection_rate;
	s->connect_retries = cfg->connect_retries;
	s->balance_factor = cfg->balance_factor;
	s->proxy_protocol = cfg->proxy_protocol;
	s->accept_proxy = cfg->accept_proxy;
	s->keepalive = cfg->keepalive;
	s->log_connections = cfg->log_connections;
	s->source = cfg->source;
	s->source_len = cfg->source_len;
	s->source_client = cfg->source_client;
}

/* A prefix list compiled for lookup into <ret> (NULL when empty): 0 or -errno. */
static int snapshot_prefixes(const struct hashlb_prefix *p, uint32_t n,
			     struct hashlb_prefix_set **ret)
{
	if (!n)
		return 0;
	return hashlb_prefix_set_new(p, n, ret);
}

/* hlb_snapshot_tables_bytes(): the tables of the snapshots alive, each array they share once
 * (hashlb_table_account()). Snapshots are freed on the control thread (replaced, once the
 * workers left them) and on a worker's (a removed service's, with its last connection). */
static _Atomic uint64_t tables_held;

uint64_t hlb_snapshot_tables_bytes(void)
{
	return atomic_load_explicit(&tables_held, memory_order_relaxed);
}

static _Atomic uint64_t match_reads; /* hlb_match_reads() */

uint64_t hlb_match_reads(void)
{
	return atomic_load_explicit(&match_reads, memory_order_relaxed);
}

void hlb_match_reads_add(uint64_t n)
{
	atomic_fetch_add_explicit(&match_reads, n, memory_order_relaxed);
}

/* <t>, now one of <s>'s tables, counted until hlb_snapshot_free(<s>): but for what it shares
 * with s->table (a retry or ramp table's full slots), which s->table counts as long. */
static void snapshot_count_table(struct hlb_snapshot *s, const struct hashlb_table *t)
{
	uint64_t n = hashlb_table_bytes(t) -
		     (t != s->table ? hashlb_table_bytes_shared(t, s->table) : 0);

	s->tables_bytes += n;
	s->tables_counted = true;
	atomic_fetch_add_explicit(&tables_held, hashlb_table_account(t), memory_order_relaxed);
}

/* <t>, one of <s>'s tables (NULL accepted), freed; it leaves hlb_snapshot_tables_bytes() if
 * snapshot_count_table() counted it. */
static void snapshot_free_table(struct hlb_snapshot *s, struct hashlb_table *t)
{
	if (t && s->tables_counted)
		atomic_fetch_sub_explicit(&tables_held, hashlb_table_unaccount(t),
					  memory_order_relaxed);
	hashlb_table_free(t);
}

static uint64_t snapshot_up_weight(const struct hlb_snapshot *s)
{
	uint64_t w = 0;

	for (uint32_t i = 0; i < s->n_backends; i++)
		if (!hashlb_table_backend_down(s->table, i))
			w += hashlb_table_backend_weight(s->table, i);
	return w;
}

/*
 * Complete <s> (its table built): the settings of <cfg>, <generation>,
 * the fingerprint and up weight; into <ret_snap>, or <s> is freed.
 */
static int snapshot_finish(struct hlb_snapshot *s, const struct hashlb_service_cfg *cfg,
			   uint64_t generation, struct hlb_snapshot **ret_snap,
			   struct hashlb_error *err)
{
	snapshot_count_table(s, s->table);
	snapshot_settings(s, cfg);
	if (snapshot_prefixes(cfg->proxy_from, cfg->n_proxy_from, &s->proxy_from) < 0 ||
	    snapshot_prefixes(cfg->allow_clients, cfg->n_allow_clients, &s->allow_clients) < 0 ||
	    snapshot_prefixes(cfg->deny_clients, cfg->n_deny_clients, &s->deny_clients) < 0) {
		hlb_snapshot_free(s);
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	}
	s->generation = generation;
	s->fingerprint = hashlb_table_fingerprint(s->table);
	s->up_weight = snapshot_up_weight(s);
	*ret_snap = s;
	return 0;
}

static int snapshot_alloc(uint32_t n, struct hlb_backend *const *backends,
			  struct hlb_snapshot **ret_snap)
{
	struct hlb_snapshot *s;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->backends = calloc(n ? n : 1, sizeof(*s->backends));
	if (!s->backends) {
		free(s);
		return -ENOMEM;
	}
	s->n_backends = n;
	for (uint32_t i = 0; i < n; i++)
		s->backends[i] = hlb_backend_ref(backends[i]);
	*ret_snap = s;
	return 0;
}

/* Whether <t> was built with <p>, read with hashlb_table_build()'s defaults. */
static bool table_params_match(const struct hashlb_table *t, const struct hashlb_table_params *p)
{
	const struct hashlb_table_params *q = hashlb_table_params(t);

	return q->scheme == p->scheme && q->seed == p->seed &&
	       q->ring_v == (p->ring_v ? p->ring_v : HASHLB_RING_V_DEFAULT) &&
	       q->maglev_m == (p->maglev_m ? p->maglev_m : HASHLB_MAGLEV_M_DEFAULT) &&
	       q->max_bytes == (p->max_bytes ? p->max_bytes : HASHLB_TABLE_MEM_DEFAULT);
}

/*
 * Which of <n> backends the table takes as down: those not usable, and the
 * backups while another can take clients. NULL when out of memory.
 */
static bool *backends_down(struct hlb_backend *const *backends, uint32_t n)
{
	bool *down = calloc(n ? n : 1, sizeof(*down)), *backup = calloc(n ? n : 1, sizeof(*backup));
	uint32_t *weight = calloc(n ? n : 1, sizeof(*weight));

	if (!down || !backup || !weight) {
		free(down);
		down = NULL;
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		down[i] = !hlb_backend_usable(backends[i]);
		backup[i] = backends[i]->backup;
		weight[i] = backends[i]->weight;
	}
	hashlb_backup_rule(down, backup, weight, n);
out:
	free(backup);
	free(weight);
	return down;
}

int hlb_snapshot_rebuild(const struct hlb_snapshot *prev, const struct hashlb_service_cfg *cfg,
			 struct hlb_backend *const *backends, uint64_t generation,
			 struct hlb_snapshot **ret_snap, struct hashlb_error *err)
{
	struct hashlb_backend_spec *specs;
	struct hlb_snapshot *s;
	bool *down;
	int r;

	specs = calloc(cfg->n_backends ? cfg->n_backends : 1, sizeof(*specs));
	down = backends_down(backends, cfg->n_backends);
	if (!specs || !down) {
		free(specs);
		free(down);
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	}
	for (uint32_t i = 0; i < cfg->n_backends; i++) {
		specs[i].name = backends[i]->name;
		specs[i].weight = backends[i]->weight;
		specs[i].down = down[i];
	}
	free(down);
	r = snapshot_alloc(cfg->n_backends, backends, &s);
	if (r < 0) {
		free(specs);
		return hashlb_err(err, r, HASHLB_ERR_NOMEM, "out of memory");
	}
	if (prev && table_params_match(prev->table, &cfg->table))
		r = hashlb_table_rebuild(prev->table, specs, cfg->n_backends, &s->table, err);
	else
		r = hashlb_table_build(&cfg->table, specs, cfg->n_backends, &s->table, err);
	free(specs);
	if (r < 0) {
		hlb_snapshot_free(s);
		return r;
	}
	return snapshot_finish(s, cfg, generation, ret_snap, err);
}

/*
 * The table of <cur> to build the one with <down> from: one of its Maglev retry and ramp
 * tables whose down set is <down> already, but for backends of weight 0, which take no turn
 * (a backend declared down after failing connects: the retry table built then, whatever a
 * weight-0 backend's verdict did meanwhile), whose effective table hashlb_table_with_down()
 * copies rather than populates again (about 1 s at the largest table size); else its own
 * (which keeps the table of the last other outage for the same ones down again).
 */
static const struct hashlb_table *refresh_base(const struct hlb_snapshot *cur, const bool *down)
{
	const struct hashlb_table *c[3] = { cur->retry_table, cur->ramp_table,
					    cur->retry_ramp_table };

	for (uint32_t k = 0; k < 3; k++)
		if (c[k] && hashlb_table_down_same(c[k], down))
			return c[k];
	return cur->table;
}

/* hlb_snapshot_refresh() and hlb_snapshot_refresh_from_retry(): <from_retry>, the latter */
static int snapshot_refresh(const struct hlb_snapshot *cur, const struct hashlb_service_cfg *cfg,
			    uint64_t generation, bool from_retry, struct hlb_snapshot **ret_snap,
			    struct hashlb_error *err)
{
	struct hlb_snapshot *s;
	bool *down;
	int r;

	down = backends_down(cur->backends, cur->n_backends);
	if (!down)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	r = snapshot_alloc(cur->n_backends, cur->backends, &s);
	if (r < 0) {
		free(down);
		return hashlb_err(err, r, HASHLB_ERR_NOMEM, "out of memory");
	}
	r = hashlb_table_with_down(from_retry && cur->retry_table ? cur->retry_table
								  : refresh_base(cur, down),
				   down, &s->table, err);
	free(down);
	if (r < 0) {
		hlb_snapshot_free(s);
		return r;
	}
	return snapshot_finish(s, cfg, generation, ret_snap, err);
}

int hlb_snapshot_refresh(const struct hlb_snapshot *cur, const struct hashlb_service_cfg *cfg,
			 uint64_t generation, struct hlb_snapshot **ret_snap,
			 struct hashlb_error *err)
{
	return snapshot_refresh(cur, cfg, generation, false, ret_snap, err);
}

int hlb_snapshot_refresh_from_retry(const struct hlb_snapshot *cur,
				    const struct hashlb_service_cfg *cfg, uint64_t generation,
				    struct hlb_snapshot **ret_snap, struct hashlb_error *err)
{
	return snapshot_refresh(cur, cfg, generation, true, ret_snap, err);
}

/* <s>'s table with the backends <more> says down as well, in <ret_table>, if one of them is up
 * in it: one of <s>'s own, counted as such; sharing <also>'s slots (NULL accepted: the previous
 * snapshot's table of the same role) where they are its own, and its owner blocks where its
 * slots are the array they are over (hashlb_table_with_down_from()). */
static void table_with_more_down(struct hlb_snapshot *s, const bool *more,
				 const struct hashlb_table *also, struct hashlb_table **ret_table)
{
	bool *down, any = false;

	if (hashlb_table_scheme(s->table) != HASHLB_SCHEME_MAGLEV)
		return;
	down = calloc(s->n_backends ? s->n_backends : 1, sizeof(*down));
	if (!down)
		return;
	for (uint32_t j = 0; j < s->n_backends; j++) {
		down[j] = hashlb_table_backend_down(s->table, j);
		any |= more[j] && !down[j];
		down[j] |= more[j];
	}
	if (any && hashlb_table_with_down_from(s->table, down, also, ret_table, NULL) == 0)
		snapshot_count_table(s, *ret_table);
	free(down);
}

void hlb_snapshot_add_retry(struct hlb_snapshot *s, const bool *failing,
			    const struct hlb_snapshot *prev)
{
	table_with_more_down(s, failing, prev ? prev->retry_table : NULL, &s->retry_table);
}

void hlb_snapshot_add_retry_ramp(struct hlb_snapshot *s, const bool *failing_or_ramping,
				 const struct hlb_snapshot *prev)
{
	table_with_more_down(s, failing_or_ramping, prev ? prev->retry_ramp_table : NULL,
			     &s->retry_ramp_table);
}

void hlb_snapshot_add_ramp(struct hlb_snapshot *s, const bool *ramping,
			   const struct hlb_snapshot *prev)
{
	table_with_more_down(s, ramping, prev ? prev->ramp_table : NULL, &s->ramp_table);
}

void hlb_snapshot_free(struct hlb_snapshot *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->n_backends; i++)
		hlb_backend_unref(s->backends[i]);
	free(s->backends);
	snapshot_free_table(s, s->retry_table);
	snapshot_free_table(s, s->ramp_table);
	snapshot_free_table(s, s->retry_ramp_table);
	snapshot_free_table(s, s->table);
	hashlb_prefix_set_free(s->proxy_from);
	hashlb_prefix_set_free(s->allow_clients);
	hashlb_prefix_set_free(s->deny_clients);
	free(s);
}

int hlb_service_new(const char *name, uint32_t n_workers, struct hlb_service **ret_service)
{
	struct hlb_service *s;

	if (n_workers == 0 || n_workers > HLB_WORKERS_MAX)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->name = strdup(name);
	s->wstats = aligned_alloc(64, sizeof(*s->wstats) * n_workers);
	if (!s->name || !s->wstats) {
		free(s->name);
		free(s->wstats);
		free(s);
		return -ENOMEM;
	}
	memset(s->wstats, 0, sizeof(*s->wstats) * n_workers);
	atomic_init(&s->refs, 1);
	atomic_init(&s->snap, NULL);
	atomic_init(&s->active, 0);
	pthread_mutex_init(&s->rate_lock, NULL);
	s->rate_tat = 0;
	s->rate_step = 0;
	atomic_init(&s->clients, NULL);
	atomic_init(&s->removed, false);
	s->n_workers = n_workers;
	*ret_service = s;
	return 0;
}

struct hlb_service *hlb_service_ref(struct hlb_service *s)
{
	atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
	return s;
}

void hlb_service_unref(struct hlb_service *s)
{
	if (!s || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (s->control_free)
		s->control_free(s->control);
	/* The last reference: no worker can reach the snapshot any more. */
	hlb_snapshot_free(atomic_load_explicit(&s->snap, memory_order_relaxed));
	hlb_clients_free(atomic_load_explicit(&s->clients, memory_order_relaxed));
	pthread_mutex_destroy(&s->rate_lock);
	free(s->wstats);
	free(s->name);
	free(s);
}

void hlb_service_counters_read(const struct hlb_service *s, struct hlb_service_counters *ret)
{
	struct hlb_service_counters c = { 0 };

	c.active = atomic_load_explicit(&s->active, memory_order_relaxed);
	for (uint32_t i = 0; i < s->n_workers; i++) {
		const struct hlb_service_wstats *w = &s->wstats[i];

		c.lookups += atomic_load_explicit(&w->lookups, memory_order_relaxed);
		c.total += atomic_load_explicit(&w->total, memory_order_relaxed);
		c.rejected += atomic_load_explicit(&w->rejected, memory_order_relaxed);
		c.no_backend += atomic_load_explicit(&w->no_backend, memory_order_relaxed);
		c.bad_header += atomic_load_explicit(&w->bad_header, memory_order_relaxed);
		c.untrusted += atomic_load_explicit(&w->untrusted, memory_order_relaxed);
		c.denied += atomic_load_explicit(&w->denied, memory_order_relaxed);
		c.client_limited += atomic_load_explicit(&w->client_limited, memory_order_relaxed);
		c.queued_total += atomic_load_explicit(&w->queued, memory_order_relaxed);
		c.queue_timeouts += atomic_load_explicit(&w->queue_timeouts, memory_order_relaxed);
		c.queue_aborts += atomic_load_explicit(&w->queue_aborts, memory_order_relaxed);
		c.rate_pauses += atomic_load_explicit(&w->rate_pauses, memory_order_relaxed);
		c.drain_cut += atomic_load_explicit(&w->drain_cut, memory_order_relaxed);
		c.drain_signalled +=
			atomic_load_explicit(&w->drain_signalled, memory_order_relaxed);
	}
	c.queued = atomic_load_explicit(&s->queued, memory_order_relaxed);
	*ret = c;
}

static void snapshot_free_cb(void *p)
{
	hlb_snapshot_free(p);
}

int hlb_service_publish(struct hlb_service *svc, struct hlb_snapshot *next, struct hlb_rcu *rcu)
{
	struct hlb_snapshot *old;

	old = atomic_exchange_explicit(&svc->snap, next, memory_order_acq_rel);
	if (!old)
		return 0;
	if (!rcu) {
		hlb_snapshot_free(old);
		return 0;
	}
	return hlb_rcu_defer(rcu, snapshot_free_cb, old);
}

uint64_t hlb_service_rate_take(struct hlb_service *svc, uint32_t rate, uint64_t now_ns)
{
	const uint64_t second = 1000000000u, step = second / (rate ? rate : 1);
	uint64_t was, tat, next;

	pthread_mutex_lock(&svc->rate_lock);
	was = svc->rate_step;
	tat = svc->rate_tat;
	/* A reload changed the rate. Within the burst (the arrival time less
	 * than a second ahead) the time stays: the part of the burst used is
	 * used at the new rate too. Past it, the time is the connections taken
	 * over the rate, each a step of the old rate: owed at the new one
	 * (else a rate raised from 1 to 1,000 a second would go on pausing at
	 * 1 a second). Whole steps and the remainder apart, so that nothing
	 * overflows. A worker still on the old rate scales it back, and the
	 * next one on the new rate again: each sees the time in its own step. */
	if (was != step && was && tat > now_ns + second) {
		uint64_t over = tat - now_ns - second;

		tat = now_ns + second + over / was * step + over % was * step / was;
	}
	next = (tat > now_ns ? tat : now_ns) + step;
	svc->rate_step = step;
	svc->rate_tat = next;
	pthread_mutex_unlock(&svc->rate_lock);
	/* Within the burst while the arrival time is at most a second ahead;
	 * else resume when one more fits: at next + step - second. */
	return next - now_ns > second ? next - now_ns - second + step : 0;
}
