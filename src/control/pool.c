// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "balance.h"
#include "pool.h"

struct subscriber {
	hlb_publish_fn fn;
	void *arg;
};

struct hlb_pool {
	const struct hashlb_config *cfg;
	struct hlb_loop *loop;
	struct hlb_rcu *rcu;
	struct hlb_pool_hooks hooks;
	struct hlb_pool_service **svcs;
	uint32_t n_svcs;
	struct hlb_service **dead; /* removed services: workers may still hold them */
	uint32_t n_dead;
	struct subscriber *subs;
	uint32_t n_subs;
	struct hlb_timer tick;
};

/* Counter lines per runtime object: one per worker reading the snapshots. */
static uint32_t pool_workers(const struct hlb_pool *p)
{
	return p->rcu ? hlb_rcu_readers(p->rcu) : 1;
}

static void service_schedule(struct hlb_pool_service *s, bool full);

/* ---- backends ---- */

static bool backend_checked(const struct hlb_pool_backend *b)
{
	return b->svc->cfg->health.enabled && b->admin != HASHLB_ADMIN_MAINT;
}

bool hlb_pool_backend_up(const struct hlb_pool_backend *b)
{
	return b->admin == HASHLB_ADMIN_READY && b->health.up;
}

static void backend_ramp_start(struct hlb_pool_backend *b, uint64_t now)
{
	if (!b->svc->cfg->slow_start_ms) {
		atomic_store(&b->rt->admit, HLB_ADMIT_ONE);
		b->ramp_start_ms = 0;
		return;
	}
	atomic_store(&b->rt->admit, 0);
	b->ramp_start_ms = now ? now : 1;
}

static void backend_health_changed(struct hlb_pool_backend *b, uint64_t now)
{
	atomic_store(&b->rt->healthy, b->health.up);
	if (b->health.up)
		backend_ramp_start(b, now);
	service_schedule(b->svc, false);
}

void hlb_pool_health_result(struct hlb_pool_backend *b, bool ok)
{
	if (hlb_health_check(&b->health, &b->svc->hp, ok, hlb_now_ms()))
		backend_health_changed(b, hlb_now_ms());
}

static void backend_check_done(void *arg, bool ok, uint64_t latency_ns)
{
	struct hlb_pool_backend *b = arg;

	if (ok) {
		b->checks_ok++;
		b->check_latency_ns = latency_ns;
	} else {
		b->checks_failed++;
	}
	hlb_pool_health_result(b, ok);
}

static void backend_check_start(struct hlb_pool_backend *b, uint64_t first_ms)
{
	const struct hashlb_health_cfg *h = &b->svc->cfg->health;

	hlb_check_stop(&b->check);
	if (!backend_checked(b))
		return;
	hlb_check_init(&b->check, (const struct sockaddr *)&b->rt->addr, b->rt->addr_len,
		       h->interval_ms, h->timeout_ms, backend_check_done, b);
	hlb_check_start(&b->check, b->svc->pool->loop, first_ms);
}

static void backend_free(struct hlb_pool_backend *b)
{
	if (!b)
		return;
	hlb_check_stop(&b->check);
	hlb_backend_unref(b->rt);
	free(b->address);
	free(b);
}

static struct hlb_pool_backend *backend_new(struct hlb_pool_service *s,
					    const struct hashlb_backend_cfg *c)
{
	struct hlb_pool_backend *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->svc = s;
	if (hlb_backend_new(c, pool_workers(s->pool), &b->rt) < 0)
		b->rt = NULL;
	b->address = strdup(c->address ? c->address : "");
	if (!b->rt || !b->address) {
		backend_free(b);
		return NULL;
	}
	b->check.io.fd = -1;
	b->cfg_weight = c->weight;
	b->cfg_admin = c->admin;
	b->admin = c->admin;
	atomic_store(&b->rt->admin, (int)c->admin);
	atomic_store(&b->rt->healthy, true);
	atomic_store(&b->rt->admit, HLB_ADMIT_ONE);
	hlb_health_init(&b->health, true, hlb_now_ms());
	return b;
}

int hlb_pool_set_admin(struct hlb_pool_backend *b, enum hashlb_admin_state st)
{
	enum hashlb_admin_state old = b->admin;
	uint64_t now = hlb_now_ms();

	if ((unsigned)st >= HASHLB_ADMIN_MAX)
		return -EINVAL;
	if (st == old)
		return 0;
	b->admin = st;
	atomic_store(&b->rt->admin, (int)st);
	if (old == HASHLB_ADMIN_MAINT) {
		/* Its health is unknown after maintenance: down until <rise> checks pass. */
		if (backend_checked(b)) {
			hlb_health_init(&b->health, false, now);
			atomic_store(&b->rt->healthy, false);
			backend_check_start(b, now);
		} else {
			backend_ramp_start(b, now);
		}
	} else if (st == HASHLB_ADMIN_MAINT) {
		hlb_check_stop(&b->check);
	}
	service_schedule(b->svc, false);
	return 0;
}

int hlb_pool_set_weight(struct hlb_pool_backend *b, uint32_t weight)
{
	if (weight > HASHLB_WEIGHT_MAX)
		return -EINVAL;
	if (weight == b->rt->weight)
		return 0;
	b->rt->weight = weight;
	service_schedule(b->svc, true);
	return 0;
}

/* ---- build and publish ---- */

const struct hlb_snapshot *hlb_pool_snapshot(const struct hlb_pool_service *s)
{
	return atomic_load(&s->rt->snap);
}

static int service_build(struct hlb_pool_service *s, struct hlb_snapshot **ret_snap,
			 struct hashlb_error *err)
{
	struct hashlb_table *table = NULL;
	struct hlb_snapshot *snap;
	uint32_t n = s->n_backends;
	bool *down;
	int ret;

	if (s->need_full || !s->base) {
		struct hashlb_backend_spec *spec = calloc(n ? n : 1, sizeof(*spec));
		struct hashlb_table *base;

		if (!spec)
			return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		for (uint32_t i = 0; i < n; i++) {
			spec[i].name = s->backends[i]->rt->name;
			spec[i].weight = s->backends[i]->rt->weight;
		}
		ret = hashlb_table_build(&s->cfg->table, spec, n, &base, err);
		free(spec);
		if (ret < 0)
			return ret;
		hashlb_table_free(s->base);
		s->base = base;
		s->need_full = false;
	}

	down = calloc(n, sizeof(*down));
	snap = calloc(1, sizeof(*snap));
	if (snap)
		snap->backends = calloc(n, sizeof(*snap->backends));
	if (!down || !snap || !snap->backends) {
		ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		goto err_free;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct hlb_pool_backend *b = s->backends[i];

		down[i] = !hlb_pool_backend_up(b);
		if (!down[i])
			snap->up_weight += b->rt->weight;
	}
	ret = hashlb_table_with_down(s->base, down, &table, err);
	if (ret < 0)
		goto err_free;
	for (uint32_t i = 0; i < n; i++)
		snap->backends[i] = hlb_backend_ref(s->backends[i]->rt);
	snap->n_backends = n;
	snap->table = table;
	snap->generation = s->generation + 1;
	snap->fingerprint = hashlb_table_fingerprint(table);
	snap->key = s->cfg->key;
	snap->seed = s->cfg->table.seed;
	snap->balance_factor = s->cfg->balance_factor;
	free(down);
	*ret_snap = snap;
	return 0;

err_free:
	free(down);
	if (snap)
		free(snap->backends);
	free(snap);
	return ret;
}

static void service_publish(struct hlb_pool_service *s, struct hlb_snapshot *snap)
{
	struct hlb_pool *p = s->pool;

	if (p->rcu) {
		hlb_service_publish(s->rt, snap, p->rcu);
	} else {
		struct hlb_snapshot *old = atomic_exchange(&s->rt->snap, snap);

		hlb_snapshot_free(old);
	}
	s->generation = snap->generation;
	for (uint32_t i = 0; i < p->n_subs; i++)
		p->subs[i].fn(p->subs[i].arg, s->rt, snap);
}

/* Build and publish <s> now. On failure the old snapshot keeps serving. */
static int service_rebuild(struct hlb_pool_service *s)
{
	struct hlb_snapshot *snap;
	uint64_t t0 = hlb_now_ns(), dt;
	int ret;

	hlb_timer_cancel(s->pool->loop, &s->build_timer);
	s->dirty = false;
	ret = service_build(s, &snap, &s->last_error);
	if (ret < 0) {
		s->rebuilds_failed++;
		return ret;
	}
	service_publish(s, snap);
	dt = hlb_now_ns() - t0;
	s->rebuilds++;
	s->rebuild_ns_last = dt;
	s->rebuild_ns_total += dt;
	if (dt > s->rebuild_ns_max)
		s->rebuild_ns_max = dt;
	s->last_build_ms = hlb_now_ms();
	return 0;
}

static void service_build_timer(void *arg)
{
	service_rebuild(arg);
}

static void service_schedule(struct hlb_pool_service *s, bool full)
{
	uint64_t now = hlb_now_ms(), when;

	s->need_full |= full;
	if (s->dirty)
		return;
	s->dirty = true;
	when = now + HLB_POOL_DEBOUNCE_MS;
	if (s->last_build_ms && when < s->last_build_ms + HLB_POOL_MIN_GAP_MS)
		when = s->last_build_ms + HLB_POOL_MIN_GAP_MS;
	hlb_timer_arm(s->pool->loop, &s->build_timer, when);
}

void hlb_pool_flush(struct hlb_pool *p)
{
	for (uint32_t i = 0; i < p->n_svcs; i++)
		if (p->svcs[i]->dirty)
			service_rebuild(p->svcs[i]);
}

/* ---- the tick: passive failures, flap decay, slow start, drained backends ---- */

static void backend_tick(struct hlb_pool_backend *b, uint64_t now)
{
	struct hlb_backend_counters bc;
	uint64_t fails;

	hlb_backend_counters_read(b->rt, &bc);
	fails = bc.connect_fail + bc.connect_timeout;
	uint64_t delta = fails - b->seen_connect_fail;
	bool changed = false;

	b->seen_connect_fail = fails;
	if (backend_checked(b)) {
		changed = hlb_health_passive(&b->health, &b->svc->hp, delta, now);
		changed |= hlb_health_tick(&b->health, &b->svc->hp, now);
	}
	if (changed)
		backend_health_changed(b, now);
	if (b->ramp_start_ms) {
		uint64_t slow = b->svc->cfg->slow_start_ms;
		uint64_t el = now - b->ramp_start_ms;

		if (!slow || el >= slow) {
			atomic_store(&b->rt->admit, HLB_ADMIT_ONE);
			b->ramp_start_ms = 0;
		} else {
			atomic_store(&b->rt->admit, (uint32_t)(el * HLB_ADMIT_ONE / slow));
		}
	}
}

static void service_reap_removed(struct hlb_pool_service *s, uint64_t now)
{
	uint32_t i = 0;

	while (i < s->n_removed) {
		struct hlb_pool_backend *b = s->removed[i];
		uint64_t active = atomic_load(&b->rt->active);

		if (active == 0 || now >= b->drain_deadline_ms) {
			if (active)
				atomic_store(&b->rt->evict, true);
			backend_free(b);
			s->removed[i] = s->removed[--s->n_removed];
		} else {
			i++;
		}
	}
}

static void pool_tick(void *arg)
{
	struct hlb_pool *p = arg;
	uint64_t now = hlb_now_ms();

	for (uint32_t i = 0; i < p->n_svcs; i++) {
		struct hlb_pool_service *s = p->svcs[i];

		for (uint32_t j = 0; j < s->n_backends; j++)
			backend_tick(s->backends[j], now);
		service_reap_removed(s, now);
	}
	hlb_timer_arm(p->loop, &p->tick, now + HLB_POOL_TICK_MS);
}

/* ---- services ---- */

static void service_health_params(struct hlb_pool_service *s)
{
	const struct hashlb_health_cfg *h = &s->cfg->health;

	s->hp.rise = h->rise ? h->rise : 1;
	s->hp.fall = h->fall ? h->fall : 1;
	s->hp.half_life_ms = hlb_health_half_life(h->interval_ms, s->hp.rise, s->hp.fall);
}

/* Start every backend's checks, spread evenly over the interval. */
static void service_checks_start(struct hlb_pool_service *s)
{
	uint64_t now = hlb_now_ms();
	uint64_t salt = XXH64(s->cfg->name, strlen(s->cfg->name), 0);

	for (uint32_t i = 0; i < s->n_backends; i++)
		backend_check_start(
			s->backends[i],
			now + hlb_check_phase(s->cfg->health.interval_ms, i, s->n_backends, salt));
}

static void service_free(struct hlb_pool_service *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->n_backends; i++)
		backend_free(s->backends[i]);
	for (uint32_t i = 0; i < s->n_removed; i++)
		backend_free(s->removed[i]);
	if (s->pool)
		hlb_timer_cancel(s->pool->loop, &s->build_timer);
	free(s->backends);
	free(s->removed);
	hashlb_table_free(s->base);
	free(s);
}

static void rt_service_free(struct hlb_service *svc)
{
	hlb_service_unref(svc);
}

static int service_new(struct hlb_pool *p, const struct hashlb_service_cfg *c,
		       struct hlb_pool_service **ret_svc, struct hashlb_error *err)
{
	struct hlb_pool_service *s = calloc(1, sizeof(*s));
	struct hlb_snapshot *snap;
	int ret;

	if (!s)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	s->pool = p;
	s->cfg = c;
	hlb_timer_init(&s->build_timer, service_build_timer, s);
	service_health_params(s);
	if (hlb_service_new(c->name, pool_workers(p), &s->rt) < 0)
		s->rt = NULL;
	s->backends = calloc(c->n_backends ? c->n_backends : 1, sizeof(*s->backends));
	if (!s->rt || !s->backends) {
		ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		goto err_free;
	}
	s->rt->cfg = (struct hashlb_service_cfg *)c;
	for (uint32_t i = 0; i < c->n_backends; i++) {
		s->backends[i] = backend_new(s, &c->backends[i]);
		if (!s->backends[i]) {
			ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
			goto err_free;
		}
		s->n_backends++;
	}
	s->need_full = true;
	ret = service_build(s, &snap, err);
	if (ret < 0)
		goto err_free;
	service_publish(s, snap);
	s->rebuilds++;
	s->last_build_ms = hlb_now_ms();
	*ret_svc = s;
	return 0;

err_free:
	rt_service_free(s->rt);
	s->rt = NULL;
	service_free(s);
	return ret;
}

static int pool_add_service(struct hlb_pool *p, struct hlb_pool_service *s)
{
	struct hlb_pool_service **v = realloc(p->svcs, (p->n_svcs + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	p->svcs = v;
	p->svcs[p->n_svcs++] = s;
	return 0;
}

int hlb_pool_new(const struct hashlb_config *cfg, struct hlb_loop *loop, struct hlb_rcu *rcu,
		 const struct hlb_pool_hooks *hooks, struct hlb_pool **ret_pool,
		 struct hashlb_error *err)
{
	struct hlb_pool *p = calloc(1, sizeof(*p));
	int ret;

	if (!p)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	p->cfg = cfg;
	p->loop = loop;
	p->rcu = rcu;
	if (hooks)
		p->hooks = *hooks;
	hlb_timer_init(&p->tick, pool_tick, p);
	for (uint32_t i = 0; i < cfg->n_services; i++) {
		struct hlb_pool_service *s;

		ret = service_new(p, &cfg->services[i], &s, err);
		if (ret < 0)
			goto err_free;
		ret = pool_add_service(p, s);
		if (ret < 0) {
			rt_service_free(s->rt);
			service_free(s);
			hashlb_err(err, ret, HASHLB_ERR_NOMEM, "out of memory");
			goto err_free;
		}
		if (p->hooks.service_added) {
			ret = p->hooks.service_added(p->hooks.arg, s->rt);
			if (ret < 0) {
				hashlb_err(err, ret, HASHLB_ERR_SYSTEM,
					   "service %s: cannot listen on %s", s->cfg->name,
					   s->cfg->listen ? s->cfg->listen : "?");
				goto err_free;
			}
		}
	}
	for (uint32_t i = 0; i < p->n_svcs; i++)
		service_checks_start(p->svcs[i]);
	ret = hlb_timer_arm(loop, &p->tick, hlb_now_ms() + HLB_POOL_TICK_MS);
	if (ret < 0)
		goto err_free;
	*ret_pool = p;
	return 0;

err_free:
	hlb_pool_free(p);
	return ret;
}

void hlb_pool_free(struct hlb_pool *p)
{
	if (!p)
		return;
	hlb_timer_cancel(p->loop, &p->tick);
	for (uint32_t i = 0; i < p->n_svcs; i++) {
		struct hlb_service *rt = p->svcs[i]->rt;

		service_free(p->svcs[i]);
		rt_service_free(rt);
	}
	for (uint32_t i = 0; i < p->n_dead; i++)
		rt_service_free(p->dead[i]);
	free(p->dead);
	free(p->svcs);
	free(p->subs);
	free(p);
}

int hlb_pool_subscribe(struct hlb_pool *p, hlb_publish_fn fn, void *arg)
{
	struct subscriber *v = realloc(p->subs, (p->n_subs + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	p->subs = v;
	p->subs[p->n_subs++] = (struct subscriber){ fn, arg };
	return 0;
}

uint32_t hlb_pool_service_count(const struct hlb_pool *p)
{
	return p->n_svcs;
}

struct hlb_pool_service *hlb_pool_service_at(struct hlb_pool *p, uint32_t i)
{
	return i < p->n_svcs ? p->svcs[i] : NULL;
}

struct hlb_pool_service *hlb_pool_service_find(struct hlb_pool *p, const char *name)
{
	for (uint32_t i = 0; i < p->n_svcs; i++)
		if (!strcmp(p->svcs[i]->cfg->name, name))
			return p->svcs[i];
	return NULL;
}

struct hlb_pool_backend *hlb_pool_backend_find(struct hlb_pool_service *s, const char *name)
{
	for (uint32_t i = 0; i < s->n_backends; i++)
		if (!strcmp(s->backends[i]->rt->name, name))
			return s->backends[i];
	return NULL;
}

/* ---- reload ---- */

static bool addr_equal(const struct sockaddr_storage *a, socklen_t al,
		       const struct sockaddr_storage *b, socklen_t bl)
{
	return al == bl && !memcmp(a, b, al);
}

static bool health_cfg_equal(const struct hashlb_health_cfg *a, const struct hashlb_health_cfg *b)
{
	return a->enabled == b->enabled && a->interval_ms == b->interval_ms &&
	       a->timeout_ms == b->timeout_ms && a->rise == b->rise && a->fall == b->fall;
}

static bool table_cfg_equal(const struct hashlb_service_cfg *a, const struct hashlb_service_cfg *b)
{
	return a->table.scheme == b->table.scheme && a->table.seed == b->table.seed &&
	       a->table.ring_v == b->table.ring_v && a->table.maglev_m == b->table.maglev_m &&
	       a->table.max_bytes == b->table.max_bytes;
}

static int service_retire_backend(struct hlb_pool_service *s, struct hlb_pool_backend *b,
				  uint64_t now)
{
	struct hlb_pool_backend **v = realloc(s->removed, (s->n_removed + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	s->removed = v;
	hlb_check_stop(&b->check);
	b->drain_deadline_ms = now + s->cfg->drain_timeout_ms;
	atomic_store(&b->rt->admin, (int)HASHLB_ADMIN_DRAIN);
	s->removed[s->n_removed++] = b;
	return 0;
}

/* Match <s>'s backends against <c> by name and switch <s> to <c>. */
static int service_update(struct hlb_pool_service *s, const struct hashlb_service_cfg *c,
			  struct hashlb_error *err)
{
	const struct hashlb_service_cfg *old = s->cfg;
	struct hlb_pool_backend **next = calloc(c->n_backends ? c->n_backends : 1, sizeof(*next));
	uint64_t now = hlb_now_ms();
	bool full = !table_cfg_equal(old, c) || old->n_backends != c->n_backends;
	bool recheck = !health_cfg_equal(&old->health, &c->health);
	bool *taken = calloc(s->n_backends ? s->n_backends : 1, sizeof(*taken));
	uint32_t i, j;

	if (!next || !taken) {
		free(next);
		free(taken);
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	}
	s->cfg = c;
	for (i = 0; i < c->n_backends; i++) {
		const struct hashlb_backend_cfg *nb = &c->backends[i];
		struct hlb_pool_backend *b = NULL;

		for (j = 0; j < s->n_backends; j++) {
			if (!taken[j] && !strcmp(s->backends[j]->rt->name, nb->name)) {
				b = s->backends[j];
				break;
			}
		}
		if (b && addr_equal(&b->rt->addr, b->rt->addr_len, &nb->addr, nb->addr_len)) {
			taken[j] = true;
			if (j != i)
				full = true;
			if (nb->weight != b->cfg_weight) {
				b->cfg_weight = nb->weight;
				b->rt->weight = nb->weight;
				full = true;
			}
			if (nb->admin != b->cfg_admin) {
				b->cfg_admin = nb->admin;
				hlb_pool_set_admin(b, nb->admin);
			}
			if (recheck)
				backend_check_start(b, now + hlb_check_phase(c->health.interval_ms,
									     i, c->n_backends, 0));
			next[i] = b;
			continue;
		}
		/* New, or a new address: a new backend; the old object drains below. */
		next[i] = backend_new(s, nb);
		if (!next[i])
			goto err_nomem;
		backend_ramp_start(next[i], now);
		backend_check_start(
			next[i], now + hlb_check_phase(c->health.interval_ms, i, c->n_backends, 0));
		full = true;
	}
	for (j = 0; j < s->n_backends; j++) {
		if (taken[j])
			continue;
		full = true;
		if (service_retire_backend(s, s->backends[j], now) < 0)
			backend_free(s->backends[j]);
	}
	free(taken);
	free(s->backends);
	s->backends = next;
	s->n_backends = c->n_backends;
	s->rt->cfg = (struct hashlb_service_cfg *)c;
	service_health_params(s);
	service_schedule(s, full);
	return 0;

err_nomem:
	/* Undo: the new backends go, the old list stays. */
	for (i = 0; i < c->n_backends; i++) {
		bool is_old = false;

		for (j = 0; next[i] && j < s->n_backends; j++)
			is_old |= next[i] == s->backends[j];
		if (next[i] && !is_old)
			backend_free(next[i]);
	}
	s->cfg = old;
	free(next);
	free(taken);
	return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
}

int hlb_pool_apply(struct hlb_pool *p, const struct hashlb_config *cfg, struct hashlb_error *err)
{
	struct hlb_pool_service **next =
		calloc(cfg->n_services ? cfg->n_services : 1, sizeof(*next));
	bool *kept = calloc(p->n_svcs ? p->n_svcs : 1, sizeof(*kept));
	int ret = 0;
	uint32_t i, j;

	if (!next || !kept) {
		ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		goto out;
	}
	/* New services first: they are what can fail (memory, listening). */
	for (i = 0; i < cfg->n_services; i++) {
		const struct hashlb_service_cfg *c = &cfg->services[i];

		for (j = 0; j < p->n_svcs; j++)
			if (!kept[j] && !strcmp(p->svcs[j]->cfg->name, c->name))
				break;
		if (j < p->n_svcs) {
			kept[j] = true;
			next[i] = p->svcs[j];
			continue;
		}
		ret = service_new(p, c, &next[i], err);
		if (ret == 0 && p->hooks.service_added) {
			ret = p->hooks.service_added(p->hooks.arg, next[i]->rt);
			if (ret < 0)
				hashlb_err(err, ret, HASHLB_ERR_SYSTEM,
					   "service %s: cannot listen on %s", c->name,
					   c->listen ? c->listen : "?");
			else
				service_checks_start(next[i]);
		}
		if (ret < 0) {
			if (next[i]) {
				rt_service_free(next[i]->rt);
				service_free(next[i]);
			}
			next[i] = NULL;
			goto err_undo;
		}
	}
	for (i = 0; i < cfg->n_services; i++) {
		struct hlb_pool_service *s = next[i];
		const struct hashlb_service_cfg *old = s->cfg;
		bool relisten;

		if (old == &cfg->services[i])
			continue; /* just created */
		relisten = !addr_equal(&old->listen_addr, old->listen_addr_len,
				       &cfg->services[i].listen_addr,
				       cfg->services[i].listen_addr_len);
		ret = service_update(s, &cfg->services[i], err);
		if (ret < 0)
			goto err_undo; /* services already updated keep their new settings */
		if (relisten && p->hooks.service_relisten)
			p->hooks.service_relisten(p->hooks.arg, s->rt);
	}
	for (j = 0; j < p->n_svcs; j++) {
		struct hlb_service **v;

		if (kept[j])
			continue;
		if (p->hooks.service_removed)
			p->hooks.service_removed(p->hooks.arg, p->svcs[j]->rt);
		v = realloc(p->dead, (p->n_dead + 1) * sizeof(*v));
		if (v) {
			p->dead = v;
			p->dead[p->n_dead++] = p->svcs[j]->rt;
		} /* else leak the runtime service: workers may still use it */
		service_free(p->svcs[j]);
	}
	free(p->svcs);
	p->svcs = next;
	p->n_svcs = cfg->n_services;
	p->cfg = cfg;
	next = NULL;
	goto out;

err_undo:
	for (i = 0; i < cfg->n_services; i++) {
		bool existed = false;

		for (j = 0; next[i] && j < p->n_svcs; j++)
			existed |= next[i] == p->svcs[j];
		if (next[i] && !existed) {
			if (p->hooks.service_removed)
				p->hooks.service_removed(p->hooks.arg, next[i]->rt);
			rt_service_free(next[i]->rt);
			service_free(next[i]);
		}
	}
out:
	free(next);
	free(kept);
	return ret;
}
