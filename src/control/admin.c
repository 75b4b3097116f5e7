// SPDX-License-Identifier: MIT
/*
 * The admin endpoint's routes. JSON by default; format=text gives the
 * human-readable rendering that `hashlb ctl` prints, so the client needs no
 * JSON parser and both views come from one place.
 *
 *   GET  /metrics                                   Prometheus text
 *   GET  /status                                    process, services, backends
 *   GET  /table?service=S                           table summary
 *   GET  /lookup?service=S&client=ADDR[:PORT]       backend and preference list
 *   POST /set?service=S&backend=B[&state=X][&weight=N][&max_connections=N]
 *   POST /reload[?pid=N]                            N: only if this process is pid N
 *
 * service= may be left out when there is only one service.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "hashlb/steer.h"
#include "hashlb/tuple.h"

#include "control.h"
#include "runtime/clients.h"
#include "runtime/daemon.h"
#include "runtime/fdpass.h"

#ifndef HASHLB_VERSION
#define HASHLB_VERSION "0.1.0"
#endif

static bool want_text(const struct hlb_http_req *req)
{
	char v[HLB_HTTP_VALUE_MAX + 1];

	return hlb_http_param(req, "format", v, sizeof(v)) && !strcmp(v, "text");
}

/* Where error <e> is: FILE:LINE:COLUMN, or the file alone when the error has no position
 * (a listen address in use, a file that cannot be read). */
static const char *err_where(const struct hashlb_error *e, const char *config_path, char *buf,
			     size_t size)
{
	const char *file = e->file ? e->file : config_path;

	if (e->line > 0)
		snprintf(buf, size, "%s:%d:%d", file, e->line, e->column);
	else
		snprintf(buf, size, "%s", file);
	return buf;
}

static void resp_error(struct hlb_http_resp *resp, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void resp_error(struct hlb_http_resp *resp, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	hlb_buf_reset(&resp->body);
	resp->status = status;
	if (resp->ctype && !strncmp(resp->ctype, "text/plain", 10)) {
		/* ?format=text (hashlb ctl): a line for a person, not JSON; one line whatever a
		 * request's parameter quoted in it holds (?service=a%0Ab, a terminal's escapes) */
		hlb_buf_puts(&resp->body, "error: ");
		for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
			if (*p == '\n')
				hlb_buf_puts(&resp->body, "\\n");
			else if (*p < ' ' || *p == 0x7f)
				hlb_buf_printf(&resp->body, "\\x%02x", *p);
			else
				hlb_buf_put(&resp->body, p, 1);
		}
		hlb_buf_puts(&resp->body, "\n");
		return;
	}
	resp->ctype = "application/json";
	hlb_buf_puts(&resp->body, "{\"error\":");
	hlb_buf_json_str(&resp->body, msg);
	hlb_buf_puts(&resp->body, "}\n");
}

/*
 * "<lead> A B C" for the errors that ask for a service: the names to
 * choose from, as hashlb lookup -c lists them (a name holds no space), as
 * many as fit in <size> bytes, then "... (N in all)".
 */
static const char *service_names(struct hlb_control *ctl, const char *lead, char *buf, size_t size)
{
	uint32_t n = hlb_pool_service_count(ctl->pool);
	size_t len = (size_t)snprintf(buf, size, "%s", lead);
	char more[40];

	snprintf(more, sizeof(more), " ... (%u in all)", n);
	for (uint32_t i = 0; i < n; i++) {
		const char *name = hlb_pool_service_at(ctl->pool, i)->cfg->name;

		if (len + 1 + strlen(name) + (i + 1 < n ? strlen(more) : 0) >= size) {
			snprintf(buf + len, size - len, "%s", more);
			break;
		}
		len += (size_t)snprintf(buf + len, size - len, " %s", name);
	}
	return buf;
}

static struct hlb_pool_service *req_service(struct hlb_control *ctl, const struct hlb_http_req *req,
					    struct hlb_http_resp *resp)
{
	char name[HLB_HTTP_VALUE_MAX + 1], names[200];
	struct hlb_pool_service *s;
	bool given = hlb_http_param(req, "service", name, sizeof(name)) != NULL;

	if (given && !name[0]) { /* it said "no service ''" */
		resp_error(resp, 400, "service= is empty: give service=NAME");
		return NULL;
	}
	if (!given) {
		if (hlb_pool_service_count(ctl->pool) == 1)
			return hlb_pool_service_at(ctl->pool, 0);
		resp_error(resp, 400,
			   "which service? %u services: give service=NAME (hashlb ctl: -s NAME)%s",
			   hlb_pool_service_count(ctl->pool),
			   service_names(ctl, "; it has:", names, sizeof(names)));
		return NULL;
	}
	s = hlb_pool_service_find(ctl->pool, name);
	if (!s)
		resp_error(resp, 404, "no service '%s'%s", name,
			   service_names(ctl, "; it has:", names, sizeof(names)));
	return s;
}

/* Opens a JSON answer about one member of service <s>: {"service":S,"<key>":<value> */
static void json_open_member(struct hlb_buf *o, const struct hlb_pool_service *s, const char *key,
			     const char *value)
{
	hlb_buf_puts(o, "{\"service\":");
	hlb_buf_json_str(o, s->cfg->name);
	hlb_buf_printf(o, ",\"%s\":", key);
	hlb_buf_json_str(o, value);
}

static const char *health_name(const struct hlb_pool_backend *b)
{
	if (b->admin == HASHLB_ADMIN_MAINT)
		return "unchecked";
	if (!b->svc->cfg->health.enabled && !b->svc->hp.passive_hold_ms)
		return "up"; /* not checked, nor held by its connects: docs/control.md */
	if (b->health.suppressed)
		return b->health.raw_up ? "flapping" : "down";
	return b->health.up ? "up" : "down";
}

static double backend_ramp(const struct hlb_pool_backend *b)
{
	return (double)atomic_load(&b->rt->admit) / 65536.0;
}

/* ---- status ---- */

/* The mean time of the backend's successful connects, 0 if none yet. */
/* The connects that succeeded, as the histogram counts them. */
static uint64_t connect_count(const struct hlb_backend_counters *c)
{
	uint64_t n = 0;

	for (int k = 0; k <= HLB_CONNECT_BUCKETS; k++)
		n += c->connect_hist[k];
	return n;
}

static double connect_avg_ms(const struct hlb_backend_counters *c)
{
	uint64_t n = connect_count(c);

	return n ? (double)c->connect_us_sum / 1e3 / (double)n : 0.0;
}

/* "<key>":[...]: the backends of <snap> up in its table and down in <t> (NULL: none). */
/* A service's hash_prefix or client_prefix lengths, 0 (whole) said as the whole length. */
static unsigned prefix_v4(const struct hashlb_src_prefix *p)
{
	return p->v4 && p->v4 < 32 ? p->v4 : 32;
}

static unsigned prefix_v6(const struct hashlb_src_prefix *p)
{
	return p->v6 && p->v6 < 128 ? p->v6 : 128;
}

/* What the text pages add for a client prefix: nothing for whole addresses,
 * else <lead> and ": IPv4 /24, IPv6 /64". */
static const char *src_prefix_text(const struct hashlb_src_prefix *p, const char *lead, char *buf,
				   size_t size)
{
	if (hashlb_src_prefix_is_whole(p))
		return "";
	snprintf(buf, size, "%s: IPv4 /%u, IPv6 /%u", lead, prefix_v4(p), prefix_v6(p));
	return buf;
}

/* ... to the key for a hash_prefix: " of the client's prefix: IPv4 /24, IPv6 /64". */
static const char *prefix_text(const struct hashlb_src_prefix *p, char *buf, size_t size)
{
	return src_prefix_text(p, " of the client's prefix", buf, size);
}

/* ... for a client_prefix: " per client prefix: IPv4 /24, IPv6 /64". */
static const char *client_prefix_text(const struct hashlb_src_prefix *p, char *buf, size_t size)
{
	return src_prefix_text(p, " per client prefix", buf, size);
}

static void json_table_for(struct hlb_buf *o, const char *key, const struct hlb_snapshot *snap,
			   const struct hashlb_table *t)
{
	hlb_buf_printf(o, ",\"%s\":[", key);
	for (uint32_t j = 0, k = 0; t && j < snap->n_backends; j++)
		if (hashlb_table_backend_down(t, j) && !hashlb_table_backend_down(snap->table, j)) {
			hlb_buf_puts(o, k++ ? "," : "");
			hlb_buf_json_str(o, hashlb_table_backend_name(snap->table, j));
		}
	hlb_buf_puts(o, "]");
}

/* ,"KEY":["10.0.0.0/8",...] */
static void json_prefixes(struct hlb_buf *o, const char *key, const struct hashlb_prefix *p,
			  uint32_t n)
{
	hlb_buf_printf(o, ",\"%s\":[", key);
	for (uint32_t j = 0; j < n; j++) {
		char pfx[HASHLB_PREFIX_STRLEN];

		hashlb_prefix_format(&p[j], pfx, sizeof(pfx));
		hlb_buf_puts(o, j ? "," : "");
		hlb_buf_json_str(o, pfx);
	}
	hlb_buf_puts(o, "]");
}

/* ,"closed":{...},"ends":{...} of a backend's counters <c>. */
static void json_closed_ends(struct hlb_buf *o, const struct hlb_backend_counters *c)
{
	hlb_buf_printf(o,
		       ",\"closed\":{\"admin\":%" PRIu64 ",\"down\":%" PRIu64 ",\"backup\":%" PRIu64
		       "},\"ends\":{",
		       c->ends[HLB_END_CLOSED], c->ends[HLB_END_BACKEND_DOWN],
		       c->ends[HLB_END_PRIMARY_UP]);
	for (int k = 0; k < HLB_END_MAX; k++)
		hlb_buf_printf(o, "%s\"%s\":%" PRIu64, k ? "," : "", hlb_end_names[k], c->ends[k]);
	hlb_buf_puts(o, "}");
}

/*
 * ,"drained":{...}: the counts of the backends of <s> a reload removed that drained, whose
 * rows have left "draining", so that the rows and it add up to the service's totals.
 */
static void json_drained(struct hlb_buf *o, const struct hlb_pool_service *s)
{
	struct hlb_backend_counters c;
	uint32_t n = hlb_pool_service_drained(s, &c);

	hlb_buf_printf(o,
		       ",\"drained\":{\"backends\":%u,\"total\":%" PRIu64 ",\"bytes_in\":%" PRIu64
		       ",\"bytes_out\":%" PRIu64 ",\"connect_fail\":%" PRIu64
		       ",\"connect_timeout\":%" PRIu64 ",\"retries\":%" PRIu64 ",\"full\":%" PRIu64,
		       n, c.total, c.bytes_in, c.bytes_out, c.connect_fail, c.connect_timeout,
		       c.retries, c.full);
	json_closed_ends(o, &c);
	hlb_buf_puts(o, "}");
}

/*
 * The state /status shows for backend <b>: its admin state, or "draining" for one a reload
 * removed (<removed>), whose admin state no longer says anything (it was "ready" while the
 * backend took no new client and only drained; and set cannot change it).
 */
static const char *backend_state_name(const struct hlb_pool_backend *b, bool removed)
{
	return removed ? "draining" : hashlb_admin_state_name(b->admin);
}

static void status_json_backend(struct hlb_buf *o, const struct hlb_pool_backend *b,
				const struct hlb_snapshot *snap, uint32_t idx, double share)
{
	char addr[HASHLB_ADDR_STRLEN];
	struct hlb_pool_totals t; /* those an upgrade in place carried included */
	const struct hlb_backend_counters *c = &t.c;

	hlb_pool_backend_totals(b, &t);
	hlb_buf_puts(o, "{\"name\":");
	hlb_buf_json_str(o, b->rt->name);
	hlb_buf_puts(o, ",\"address\":");
	hlb_buf_json_str(o, b->rt->address);
	hashlb_addr_format(&b->rt->addr, addr, sizeof(addr));
	hlb_buf_puts(o, ",\"resolved\":");
	hlb_buf_json_str(o, addr);
	hlb_buf_printf(o, ",\"backup\":%s", b->rt->backup ? "true" : "false");
	hlb_buf_printf(o,
		       ",\"weight\":%u,\"state\":\"%s\",\"health\":\"%s\",\"in_table\":%s,"
		       "\"slow_start\":%.3f,\"share\":%.6f,\"active\":%" PRIu64
		       ",\"total\":%" PRIu64 ",\"bytes_in\":%" PRIu64 ",\"bytes_out\":%" PRIu64
		       ",\"connect_fail\":%" PRIu64 ",\"connect_timeout\":%" PRIu64
		       ",\"retries\":%" PRIu64 ",\"checks_ok\":%" PRIu64
		       ",\"checks_failed\":%" PRIu64 ",\"checks_skipped\":%" PRIu64
		       ",\"check_latency_ms\":%.3f,\"flaps\":%" PRIu64
		       ",\"max_connections\":%u,\"full\":%" PRIu64 ",\"connect_avg_ms\":%.3f}",
		       b->rt->weight, backend_state_name(b, !snap),
		       snap ? health_name(b) : "removed" /* no longer checked */,
		       hlb_pool_takes_clients(snap, idx) ? "true" : "false", backend_ramp(b), share,
		       c->active, c->total, c->bytes_in, c->bytes_out, c->connect_fail,
		       c->connect_timeout, c->retries, t.checks_ok, t.checks_failed,
		       t.checks_skipped, (double)b->check_latency_ns / 1e6, t.flaps,
		       atomic_load(&b->rt->max_conns), c->full, connect_avg_ms(c));
	o->len--; /* reopen the object */
	hlb_buf_printf(o, ",\"close_on_return\":%s",
		       snap && b->svc->cfg->backends[idx].close_on_return ? "true" : "false");
	/* passive-only health: its holds, and the time left of the one under way (0: none) */
	hlb_buf_printf(o, ",\"passive_holds\":%" PRIu64 ",\"hold_left_ms\":%" PRIu64,
		       t.passive_holds, snap ? hlb_pool_backend_hold_left_ms(b, hlb_now_ms()) : 0);
	json_closed_ends(o, c);
	hlb_buf_puts(o, ",\"each_address\":");
	/* the each_address entry it comes from (its name as written), for tools to group by */
	hlb_buf_json_str(o, snap ? b->svc->cfg->backends[idx].from_name : NULL);
	hlb_buf_puts(o, "}");
}

/* The upgrade in place under way, or the last that failed: null if none. */
static void upgrade_json(struct hlb_control *ctl, struct hlb_buf *o)
{
	const char *how = NULL;
	pid_t pid = ctl->upgrade_state ? ctl->upgrade_state(ctl->daemon, &how) : 0;

	if (!pid) {
		hlb_buf_puts(o, "null");
		return;
	}
	if (pid < 0) /* no process could be started */
		hlb_buf_puts(o, "{\"new_pid\":null,\"state\":\"failed\",\"error\":");
	else
		hlb_buf_printf(o, "{\"new_pid\":%d,\"state\":\"%s\",\"error\":", (int)pid,
			       how ? "failed" : "starting");
	hlb_buf_json_str(o, how);
	hlb_buf_puts(o, "}");
}

/* /status's object of worker <i>, of resources <s>: a key each (hlb_worker_stats_field()). */
static void worker_json(struct hlb_buf *o, const struct hlb_worker_stats *s, uint32_t i)
{
	const char *key;
	uint64_t v;

	hlb_buf_puts(o, i ? ",{" : "{");
	for (unsigned k = 0; (key = hlb_worker_stats_field(s, k, &v)); k++)
		hlb_buf_printf(o, "%s\"%s\":%" PRIu64, k ? "," : "", key, v);
	hlb_buf_puts(o, "}");
}

/* The forwarding workers' resources (struct hlb_worker_stats): JSON array or a line each. */
static void status_workers(struct hlb_control *ctl, struct hlb_buf *o, bool text)
{
	struct hlb_worker_stats s;

	if (!text)
		hlb_buf_puts(o, "[");
	for (uint32_t i = 0; ctl->worker_stats && ctl->worker_stats(ctl->daemon, i, &s); i++) {
		if (text)
			hlb_buf_printf(o,
				       "worker %u: %" PRIu64 " connection%s; buffers %" PRIu64
				       "/%" PRIu64 " in use, %" PRIu64 " waiting (%" PRIu64
				       " wait%s); spilled %" PRIu64 " byte%s (%" PRIu64
				       " spill%s); splice pipes %" PRIu64 "/%" PRIu64 "\n",
				       i, s.connections, hlb_plural(s.connections),
				       s.buffers_in_use, s.buffers, s.buffer_waiters,
				       s.buffer_waits, hlb_plural(s.buffer_waits), s.spilled,
				       hlb_plural(s.spilled), s.spills, hlb_plural(s.spills),
				       s.pipes, s.pipes_max);
		else
			worker_json(o, &s, i);
	}
	if (!text)
		hlb_buf_puts(o, "]");
}

/* ,"steering":{...} of a service with steering: kernel: its program's counters as hashlb steer
 * --stats --json names them, of those its own (service_packets, service_bytes,
 * service_new_flows ...: each counter a table counts, absent where unknown), its own
 * conntrack entries (flows) and the program's (interface_flows: --stats' flows) of
 * flows_max, and /metrics' table_stale and tables_refused; null while it has no program or
 * its counters cannot be read, steering_none saying why. */
static void steering_json(struct hlb_buf *o, const struct hlb_steer_sample *v)
{
	const char *name;
	uint64_t x;

	if (!v || v->none) {
		hlb_buf_puts(o, ",\"steering\":null");
		/* why, as logged (before, the log alone said it) */
		if (v) {
			hlb_buf_puts(o, ",\"steering_none\":");
			hlb_buf_json_str(o, v->none);
		}
		return;
	}
	hlb_buf_puts(o, ",\"steering\":{");
	for (unsigned i = 0; (name = hashlb_steer_stats_field(&v->st, i, &x)); i++)
		hlb_buf_printf(o, "%s\"%s\":%" PRIu64, i ? "," : "", name, x);
	/* the service's own: packets and bytes, and where known the others each table counts */
	for (unsigned i = 0; v->own_known && (name = hashlb_steer_stats_field(&v->own, i, &x)); i++)
		if (hashlb_steer_stats_field_own(i, v->own_all))
			hlb_buf_printf(o, ",\"service_%s\":%" PRIu64, name, x);
	hlb_buf_printf(o,
		       ",\"flows\":%" PRIu64 ",\"interface_flows\":%" PRIu64
		       ",\"flows_max\":%" PRIu64 ",\"table_stale\":%s,\"tables_refused\":%" PRIu64
		       "}",
		       v->flows, v->interface_flows, v->flows_max,
		       v->table_stale ? "true" : "false", v->tables_refused);
}

/* The fd limit this process runs under (RLIMIT_NOFILE's soft one, raised at start to the hard
 * one), the descriptors open, the connections and their cap (that limit's, or
 * --max-connections): what the start's "file descriptor limit" line said, which a journal
 * rotated since no longer holds. A negative value: unknown or none (null in JSON). */
struct limits {
	int64_t nofile, open_fds, connections, max_connections;
};

static void limits_get(struct hlb_control *ctl, struct limits *l)
{
	struct rlimit rl;

	l->nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
			    ? (int64_t)rl.rlim_cur
			    : -1;
	l->open_fds = hlb_process_open_fds();
	l->connections = ctl->connections ? (int64_t)ctl->connections(ctl->daemon) : -1;
	l->max_connections = ctl->max_connections ? (int64_t)ctl->max_connections(ctl->daemon) : -1;
}

/* /status' "limits" members, each one of struct limits: its key and where it is */
static const struct {
	const char *key;
	size_t off;
} limit_fields[] = {
	{ "nofile", offsetof(struct limits, nofile) },
	{ "open_fds", offsetof(struct limits, open_fds) },
	{ "connections", offsetof(struct limits, connections) },
	{ "max_connections", offsetof(struct limits, max_connections) },
};
_Static_assert(sizeof(limit_fields) / sizeof(limit_fields[0]) * sizeof(int64_t) ==
		       sizeof(struct limits),
	       "a key for each limit");

static void limits_json(struct hlb_control *ctl, struct hlb_buf *o)
{
	struct limits l;

	limits_get(ctl, &l);
	hlb_buf_puts(o, ",\"limits\":{");
	for (size_t i = 0; i < sizeof(limit_fields) / sizeof(limit_fields[0]); i++) {
		int64_t v;

		memcpy(&v, (const char *)&l + limit_fields[i].off, sizeof(v));
		hlb_buf_printf(o, "%s\"%s\":", i ? "," : "", limit_fields[i].key);
		if (v < 0)
			hlb_buf_puts(o, "null");
		else
			hlb_buf_printf(o, "%" PRId64, v);
	}
	hlb_buf_puts(o, "}");
}

static void status_json(struct hlb_control *ctl, struct hlb_buf *o)
{
	const struct hashlb_error *e = &ctl->last_reload_err;
	struct hlb_steer_sample *steer = NULL;
	uint32_t n_steer = 0;

	hlb_buf_printf(
		o, "{\"version\":\"%s\",\"pid\":%d,\"uptime_s\":%.3f,\"config\":", HASHLB_VERSION,
		(int)getpid(), (double)(hlb_now_ms() - ctl->start_ms) / 1000.0);
	hlb_buf_json_str(o, ctl->config_path);
	hlb_buf_printf(o, ",\"admin\":");
	hlb_buf_json_str(o, ctl->http ? hlb_http_address(ctl->http) : "");
	hlb_buf_printf(o, ",\"stopping\":%s", ctl->stopping ? "true" : "false");
	hlb_buf_printf(o, ",\"reloads\":{\"ok\":%" PRIu64 ",\"failed\":%" PRIu64 ",\"last_error\":",
		       ctl->reloads_ok, ctl->reloads_failed);
	if (ctl->last_reload_failed) {
		hlb_buf_puts(o, "{\"file\":");
		hlb_buf_json_str(o, e->file ? e->file : "");
		hlb_buf_printf(o, ",\"line\":%d,\"column\":%d,\"message\":", e->line, e->column);
		hlb_buf_json_str(o, e->msg);
		hlb_buf_printf(o, ",\"errors\":%zu}", ctl->last_reload_errors);
	} else {
		hlb_buf_puts(o, "null");
	}
	hlb_buf_printf(o,
		       "},\"resolve\":{\"every_ms\":%u,\"ok\":%" PRIu64 ",\"failed\":%" PRIu64
		       ",\"changed\":%" PRIu64 ",\"last_error\":",
		       ctl->cfg->resolve_every_ms, ctl->resolves_ok, ctl->resolves_failed,
		       ctl->resolves_changed);
	/* the last said, as before; last_errors: every one of that round */
	hlb_buf_json_str(o, ctl->n_last_resolve_errs
				    ? ctl->last_resolve_errs[ctl->n_last_resolve_errs - 1]
				    : NULL);
	hlb_buf_puts(o, ",\"last_errors\":[");
	for (uint32_t i = 0; i < ctl->n_last_resolve_errs; i++) {
		hlb_buf_puts(o, i ? "," : "");
		hlb_buf_json_str(o, ctl->last_resolve_errs[i]);
	}
	hlb_buf_puts(o, "]");
	hlb_buf_printf(o, "},\"table_memory\":{\"bytes\":%" PRIu64 ",\"limit\":%" PRIu64 "}",
		       hlb_snapshot_tables_bytes(), ctl->cfg->table_memory);
	limits_json(ctl, o);
	hlb_buf_puts(o, ",\"upgrade\":");
	upgrade_json(ctl, o);
	hlb_buf_puts(o, ",\"workers\":");
	status_workers(ctl, o, false);
	hlb_buf_puts(o, ",\"services\":[");
	if (hlb_control_steer_samples_status(ctl, &steer, &n_steer) < 0)
		n_steer = 0;
	for (uint32_t i = 0; i < hlb_pool_service_count(ctl->pool); i++) {
		struct hlb_pool_service *s = hlb_pool_service_at(ctl->pool, i);
		const struct hlb_snapshot *snap = hlb_pool_snapshot(s);
		struct hlb_service_counters sc;

		hlb_pool_service_totals(s, &sc);
		hlb_buf_puts(o, i ? ",{\"name\":" : "{\"name\":");
		hlb_buf_json_str(o, s->cfg->name);
		hlb_buf_puts(o, ",\"listen\":");
		hlb_buf_json_str(o, s->cfg->listen);
		hlb_buf_puts(o, ",\"bound\":");
		hlb_buf_json_str(o, s->rt->bound);
		/* Maglev: the failing backends whose clients retries send where
		 * they stay once they are down (hlb_snapshot_add_retry()), and the
		 * ramping ones whose clients not admitted yet stay where they were
		 * (hlb_snapshot_add_ramp()) */
		json_table_for(o, "retry_table_for", snap, snap->retry_table);
		json_table_for(o, "ramp_table_for", snap, snap->ramp_table);
		json_prefixes(o, "accept_proxy_from", s->cfg->proxy_from, s->cfg->n_proxy_from);
		json_prefixes(o, "allow_clients", s->cfg->allow_clients, s->cfg->n_allow_clients);
		json_prefixes(o, "deny_clients", s->cfg->deny_clients, s->cfg->n_deny_clients);
		if (s->cfg->steering == HASHLB_STEERING_KERNEL)
			steering_json(o, hlb_control_steer_sample_of(steer, n_steer, s->cfg->name));
		hlb_buf_printf(
			o,
			",\"scheme\":\"%s\",\"key\":\"%s\",\"hash_prefix\":{\"ipv4\":%u,\"ipv6\":%u}"
			",\"max_connections_per_client\":%u"
			",\"client_prefix\":{\"ipv4\":%u,\"ipv6\":%u}"
			",\"max_connection_rate\":%u"
			",\"proxy_protocol\":\"%s\",\"accept_proxy\":%s"
			",\"log_connections\":%s,\"generation\":%" PRIu64
			",\"fingerprint\":\"%016" PRIx64 "\",\"table_bytes\":%" PRIu64
			",\"rebuilds\":%" PRIu64 ",\"rebuilds_failed\":%" PRIu64
			",\"rebuild_last_ms\":%.3f,\"rebuild_max_ms\":%.3f,\"up\":%u"
			",\"connections\":{\"active\":%" PRIu64 ",\"total\":%" PRIu64
			",\"lookups\":%" PRIu64 ",\"rejected\":%" PRIu64 ",\"no_backend\":%" PRIu64
			",\"bad_header\":%" PRIu64 ",\"untrusted\":%" PRIu64 ",\"denied\":%" PRIu64
			",\"client_limited\":%" PRIu64 ",\"queued\":%" PRIu64
			",\"queued_total\":%" PRIu64 ",\"queue_timeouts\":%" PRIu64
			",\"queue_aborts\":%" PRIu64 ",\"rate_pauses\":%" PRIu64 "},\"backends\":[",
			hashlb_scheme_name(s->cfg->table.scheme), hashlb_key_name(s->cfg->key),
			prefix_v4(&s->cfg->hash_prefix), prefix_v6(&s->cfg->hash_prefix),
			s->cfg->max_connections_per_client, prefix_v4(&s->cfg->client_prefix),
			prefix_v6(&s->cfg->client_prefix), s->cfg->max_connection_rate,
			hashlb_proxy_protocol_name(s->cfg->proxy_protocol),
			s->cfg->accept_proxy ? "true" : "false",
			s->cfg->log_connections ? "true" : "false", snap->generation,
			snap->fingerprint, snap->tables_bytes, s->rebuilds, s->rebuilds_failed,
			(double)s->rebuild_ns_last / 1e6, (double)s->rebuild_ns_max / 1e6,
			hlb_pool_takes_clients_count(s), sc.active, sc.total, sc.lookups,
			sc.rejected, sc.no_backend, sc.bad_header, sc.untrusted, sc.denied,
			sc.client_limited, sc.queued, sc.queued_total, sc.queue_timeouts,
			sc.queue_aborts, sc.rate_pauses);
		/* shares kept per table: a /status of thousands of services walks no table
		 * that did not change since the last one (hlb_pool_service_share()) */
		for (uint32_t j = 0; j < s->n_backends; j++) {
			if (j)
				hlb_buf_puts(o, ",");
			status_json_backend(o, s->backends[j], snap, j,
					    hlb_pool_service_share(s, j));
		}
		hlb_buf_puts(o, "],\"draining\":[");
		for (uint32_t j = 0; j < s->n_removed; j++) {
			if (j)
				hlb_buf_puts(o, ",");
			status_json_backend(o, s->removed[j], NULL, 0, 0.0);
		}
		hlb_buf_puts(o, "]");
		json_drained(o, s);
		hlb_buf_puts(o, "}");
	}
	hlb_buf_puts(o, "]}\n");
	free(steer);
}

/* <st>'s drops: every reason's, or with <tabled> those a table counts of its own (a
 * service's: /status' service_drop_*). */
static uint64_t steer_dropped(const struct hlb_steer_stats *st, bool tabled)
{
	uint64_t n = 0;

	for (int d = 0; d < HLB_STEER_DROP_MAX; d++)
		if (!tabled || hashlb_steer_drop_tabled(d))
			n += st->drops[d];
	return n;
}

/* " (<own> the service's)" beside a figure of the program's, where <known> (as /status'
 * service_<counter>). */
static void steer_own(struct hlb_buf *o, bool known, uint64_t own)
{
	if (known)
		hlb_buf_printf(o, " (%" PRIu64 " the service's)", own);
}

/* ", <x> <what>" of the program's counters, the service's own <own> beside it where <known>. */
static void steer_figure(struct hlb_buf *o, uint64_t x, const char *what, bool known, uint64_t own)
{
	hlb_buf_printf(o, ", %" PRIu64 " %s", x, what);
	steer_own(o, known, own);
}

/* A line of the kernel path's counters under a service with steering: kernel: the program's,
 * the service's own beside each where known: packets, and (not of an older hashlb's program)
 * the others its table counts, those /status has as service_<counter>. */
static void steering_text(struct hlb_buf *o, const struct hlb_steer_sample *v)
{
	const struct hlb_steer_stats *st, *own;
	bool all;

	if (!v || v->none) {
		/* why, as logged (before, the log alone said it) */
		hlb_buf_printf(o, "  kernel steering: %s%s%s\n",
			       v && v->attached ? "" : "no program attached",
			       v && !v->attached ? ": " : "", v ? v->none : "");
		return;
	}
	st = &v->st;
	own = &v->own;
	all = v->own_known && v->own_all;
	hlb_buf_printf(o, "  kernel steering: %" PRIu64 " packets", (uint64_t)st->packets);
	steer_own(o, v->own_known, own->packets);
	steer_figure(o, st->new_flows, "new flows", all, own->new_flows);
	steer_figure(o, st->ct_hits, "conntrack hits", all, own->ct_hits);
	steer_figure(o, st->ct_evicted, "evicted", all, own->ct_evicted);
	steer_figure(o, st->ct_lost, "lost", all, own->ct_lost);
	steer_figure(o, steer_dropped(st, false), "dropped", all, steer_dropped(own, true));
	/* passed: the program's alone (a table has none of its own but closed_passed) */
	hlb_buf_printf(o, ", %" PRIu64 " passed (%" PRIu64 " to a closed VIP", (uint64_t)st->passed,
		       (uint64_t)st->closed_passed);
	if (all)
		hlb_buf_printf(o, ", %" PRIu64 " the service's", (uint64_t)own->closed_passed);
	hlb_buf_printf(o,
		       "); conntrack %" PRIu64 " entries, %" PRIu64 "/%" PRIu64 " on the interface",
		       v->flows, v->interface_flows, v->flows_max);
	/* /metrics' table_stale: before, nothing here said that the kernel path steered by an
	 * older table than the "table:" line's, or by none at all */
	if (v->table_stale)
		hlb_buf_printf(o,
			       "; its latest table NOT in the kernel (%" PRIu64
			       " refused: the log says why), the kernel path steers by an older "
			       "one, if any",
			       v->tables_refused);
	hlb_buf_puts(o, "\n");
}

/* The line of the backends a reload removed that drained (json_drained()), if any. */
static void drained_text(struct hlb_buf *o, const struct hlb_pool_service *s)
{
	struct hlb_backend_counters c;
	uint32_t n = hlb_pool_service_drained(s, &c);

	if (n)
		hlb_buf_printf(o,
			       "  drained (removed by reloads): %u backend%s, %" PRIu64
			       " total, %" PRIu64 " fails\n",
			       n, hlb_plural(n), c.total, c.connect_fail + c.connect_timeout);
}

static void status_text(struct hlb_control *ctl, struct hlb_buf *o)
{
	char tables[HASHLB_BYTES_STRLEN], cap[HASHLB_TABLE_MEMORY_STRLEN];
	const struct hashlb_error *e = &ctl->last_reload_err;
	struct hlb_steer_sample *steer = NULL;
	uint32_t n_steer = 0;
	char where[300];
	struct limits l;

	hlb_buf_printf(o,
		       "hashlb %s, pid %d, up %.0f s, config %s\n"
		       "reloads: %" PRIu64 " ok, %" PRIu64 " failed\n",
		       HASHLB_VERSION, (int)getpid(),
		       (double)(hlb_now_ms() - ctl->start_ms) / 1000.0, ctl->config_path,
		       ctl->reloads_ok, ctl->reloads_failed);
	/* in the units hashlb check says them in; /status' JSON has the bytes */
	hashlb_bytes_format(hlb_snapshot_tables_bytes(), tables, sizeof(tables));
	/* table_memory as hashlb check and its errors say it */
	hashlb_table_memory_format(ctl->cfg, cap, sizeof(cap));
	hlb_buf_printf(o, "tables: %s held, table_memory %s\n", tables, cap);
	limits_get(ctl, &l);
	if (l.nofile >= 0)
		hlb_buf_printf(o, "fd limit: %" PRId64 " (%" PRId64 " open)", l.nofile, l.open_fds);
	else
		hlb_buf_printf(o, "fd limit: none (%" PRId64 " open)", l.open_fds);
	if (l.connections >= 0 && l.max_connections >= 0)
		hlb_buf_printf(o, "; connections: %" PRId64 " of max_connections %" PRId64,
			       l.connections, l.max_connections);
	hlb_buf_puts(o, "\n");
	if (ctl->last_reload_failed)
		/* FILE:LINE:COL: error: WHAT, as the reload's answer and hashlb check say it */
		hlb_buf_printf(o, "last reload FAILED (old config still serving): %s: error: %s\n",
			       err_where(e, ctl->config_path, where, sizeof(where)), e->msg);
	if (ctl->last_reload_failed && ctl->last_reload_errors > 1)
		hlb_buf_printf(o, "  and %zu more error%s in the file: hashlb check lists them\n",
			       ctl->last_reload_errors - 1,
			       hlb_plural(ctl->last_reload_errors - 1));
	/* resolve.last_errors, a line each (a name that failed, then the addresses refused):
	 * in /status alone, an operator reading this saw nothing failing */
	if (ctl->n_last_resolve_errs)
		hlb_buf_printf(o, "last resolve round FAILED (%u error%s):\n",
			       ctl->n_last_resolve_errs, hlb_plural(ctl->n_last_resolve_errs));
	for (uint32_t i = 0; i < ctl->n_last_resolve_errs; i++)
		hlb_buf_printf(o, "  %s\n", ctl->last_resolve_errs[i]);
	if (ctl->stopping)
		hlb_buf_puts(o, "STOPPING: no new connections; the open ones drain\n");
	if (ctl->upgrade_state) {
		const char *how = NULL;
		pid_t pid = ctl->upgrade_state(ctl->daemon, &how);

		if (pid < 0)
			hlb_buf_printf(o,
				       "last upgrade FAILED (this process still serving): the new "
				       "hashlb %s\n",
				       how);
		else if (pid && how)
			hlb_buf_printf(
				o, "last upgrade FAILED (this process still serving): pid %d %s\n",
				(int)pid, how);
		else if (pid)
			hlb_buf_printf(o, "upgrading: the new hashlb, pid %d, is starting\n",
				       (int)pid);
	}
	status_workers(ctl, o, true);
	if (hlb_control_steer_samples_status(ctl, &steer, &n_steer) < 0)
		n_steer = 0;
	for (uint32_t i = 0; i < hlb_pool_service_count(ctl->pool); i++) {
		struct hlb_pool_service *s = hlb_pool_service_at(ctl->pool, i);
		const struct hlb_snapshot *snap = hlb_pool_snapshot(s);
		struct hlb_service_counters sc;
		char pbuf[64];

		hlb_pool_service_totals(s, &sc);
		hlb_buf_printf(o,
			       "\nservice %s  listen %s  %s  key %s%s\n"
			       "  table: generation %" PRIu64 ", fingerprint %016" PRIx64
			       ", %u/%u backends up, %" PRIu64 " rebuilds (last %.2f ms)\n"
			       "  connections: %" PRIu64 " active, %" PRIu64 " total, %" PRIu64
			       " rejected, %" PRIu64 " without backend, %" PRIu64 " queued\n",
			       s->cfg->name, *s->rt->bound ? s->rt->bound : s->cfg->listen,
			       hashlb_scheme_name(s->cfg->table.scheme),
			       hashlb_key_name(s->cfg->key),
			       prefix_text(&s->cfg->hash_prefix, pbuf, sizeof(pbuf)),
			       snap->generation, snap->fingerprint, hlb_pool_takes_clients_count(s),
			       s->n_backends, s->rebuilds, (double)s->rebuild_ns_last / 1e6,
			       sc.active, sc.total, sc.rejected, sc.no_backend, sc.queued);
		if (!hashlb_src_prefix_is_whole(&s->cfg->client_prefix))
			hlb_buf_printf(
				o, "  clients: at most %u connection%s%s\n",
				s->cfg->max_connections_per_client,
				hlb_plural(s->cfg->max_connections_per_client),
				client_prefix_text(&s->cfg->client_prefix, pbuf, sizeof(pbuf)));
		if (s->cfg->steering == HASHLB_STEERING_KERNEL)
			steering_text(o, hlb_control_steer_sample_of(steer, n_steer, s->cfg->name));
		/* shares to 3 decimals, as hashlb check, hashlb table and ctl table print them */
		hlb_buf_printf(o, "  %-16s %-22s %6s %-8s %-9s %8s %8s %6s %6s %6s %8s\n",
			       "BACKEND", "ADDRESS", "WEIGHT", "STATE", "HEALTH", "SHARE", "ACTIVE",
			       "TOTAL", "FAILS", "CHECK", "CONNECT");
		for (uint32_t j = 0; j < s->n_backends + s->n_removed; j++) {
			bool removed = j >= s->n_backends;
			struct hlb_pool_backend *b =
				removed ? s->removed[j - s->n_backends] : s->backends[j];
			struct hlb_pool_totals t; /* those an upgrade in place carried included */
			const struct hlb_backend_counters *c = &t.c;
			char ramp[32] = "", addr[HASHLB_ADDR_STRLEN];
			char resolved[HASHLB_ADDR_STRLEN + 16] = "", skipped[48] = "";
			char check[16] = "-", connect[16] = "-", held[32] = "";
			uint64_t left =
				removed ? 0 : hlb_pool_backend_hold_left_ms(b, hlb_now_ms());

			hlb_pool_backend_totals(b, &t);
			/* passive-only health: tried again then; tenths rounded up, so
			 * that a hold under way never reads "held 0.0s" */
			if (left)
				snprintf(held, sizeof(held), " held %" PRIu64 ".%" PRIu64 "s",
					 (left + 99) / 1000, (left + 99) / 100 % 10);
			if (hashlb_addr_is_name(b->rt->address)) { /* where the name points now */
				hashlb_addr_format(&b->rt->addr, addr, sizeof(addr));
				snprintf(resolved, sizeof(resolved), " resolved %s", addr);
			}
			if (t.checks_skipped) /* for a fault of this host: docs/control.md */
				snprintf(skipped, sizeof(skipped), " checks-skipped %" PRIu64,
					 t.checks_skipped);
			if (backend_ramp(b) < 1.0 && !removed)
				snprintf(ramp, sizeof(ramp), " slow-start %.0f%%",
					 backend_ramp(b) * 100);
			/* "-" where there is no figure yet (no check passed, no connect), where
			 * no check is made (maint, checks off, removed), and where checks made
			 * again (after maint, checks on again) have passed none yet: the last
			 * one's time, from before, looked like a check of now. */
			if (b->check_latency_ns && !b->check_latency_old && !removed &&
			    hlb_pool_backend_checked(b))
				snprintf(check, sizeof(check), "%.1fms",
					 (double)b->check_latency_ns / 1e6);
			if (connect_count(c))
				snprintf(connect, sizeof(connect), "%.2fms", connect_avg_ms(c));
			hlb_buf_printf(
				o,
				"  %-*s %-22s %6u %-8s %-9s %7.3f%% %8" PRIu64 " %6" PRIu64
				" %6" PRIu64 " %6s %8s%s%s%s%s%s\n",
				16 + hashlb_text_extra_bytes(b->rt->name), b->rt->name,
				b->rt->address, b->rt->weight, backend_state_name(b, removed),
				removed ? "removed" : health_name(b),
				removed ? 0.0 : 100.0 * hlb_pool_service_share(s, j), c->active,
				c->total, c->connect_fail + c->connect_timeout, check, connect,
				ramp, held, b->rt->backup ? " backup" : "", resolved, skipped);
		}
		drained_text(o, s);
	}
	free(steer);
}

/* ---- table ---- */

/*
 * A decimal 0..<max>, digits only (no sign, no space: as the config's integers, YAML 1.2's,
 * and hashlb ctl's). 0 or -EINVAL.
 */
static int parse_u32(const char *s, uint32_t max, uint32_t *ret)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*ret = (uint32_t)v;
	return 0;
}

/*
 * GET /clients?service=S&top=N: the clients with the most connections open
 * now (max_connections_per_client counts them; without it nothing is
 * counted, 409).
 */
static void clients_top(struct hlb_pool_service *s, const struct hlb_http_req *req,
			struct hlb_http_resp *resp, bool text)
{
	struct hlb_clients *t = atomic_load(&s->rt->clients);
	const struct hlb_snapshot *snap = hlb_pool_snapshot(s);
	struct hlb_client_count *top;
	struct hlb_buf *o = &resp->body;
	char v[HLB_HTTP_VALUE_MAX + 1], addr[HASHLB_ADDR16_PREFIX_STRLEN], pbuf[64];
	uint32_t n = 10, got;

	if (!t || !snap->max_per_client) {
		resp_error(resp, 409,
			   "service %s does not count connections per client: set "
			   "max_connections_per_client",
			   s->cfg->name);
		return;
	}
	if (hlb_http_param(req, "top", v, sizeof(v))) {
		if (parse_u32(v, 1000, &n) < 0 || n == 0) {
			resp_error(resp, 400, "top must be 1..1000, in digits: not '%s'", v);
			return;
		}
	}
	top = calloc(n, sizeof(*top));
	if (!top) {
		resp_error(resp, 500, "out of memory");
		return;
	}
	got = hlb_clients_top(t, n, top);
	if (text) {
		hlb_buf_printf(o,
			       "service %s: %" PRIu64 " client%s, at most %u connection%s each%s\n",
			       s->cfg->name, hlb_clients_size(t), hlb_plural(hlb_clients_size(t)),
			       snap->max_per_client, hlb_plural(snap->max_per_client),
			       client_prefix_text(&snap->client_prefix, pbuf, sizeof(pbuf)));
		hlb_buf_printf(o, "  %-40s %11s\n", "CLIENT", "CONNECTIONS");
	} else {
		hlb_buf_puts(o, "{\"service\":");
		hlb_buf_json_str(o, s->cfg->name);
		hlb_buf_printf(o,
			       ",\"max_connections_per_client\":%u"
			       ",\"client_prefix\":{\"ipv4\":%u,\"ipv6\":%u},\"clients\":%" PRIu64
			       ",\"top\":[",
			       snap->max_per_client, prefix_v4(&snap->client_prefix),
			       prefix_v6(&snap->client_prefix), hlb_clients_size(t));
	}
	for (uint32_t i = 0; i < got; i++) {
		hashlb_addr16_format_prefix(top[i].key.addr, top[i].key.keep, addr, sizeof(addr));
		if (text) {
			hlb_buf_printf(o, "  %-40s %11u\n", addr, top[i].count);
		} else {
			hlb_buf_puts(o, i ? ",{\"client\":" : "{\"client\":");
			hlb_buf_json_str(o, addr);
			hlb_buf_printf(o, ",\"connections\":%u}", top[i].count);
		}
	}
	if (!text)
		hlb_buf_puts(o, "]}\n");
	free(top);
}

/*
 * Why the backend at <idx> of <s>'s table <t> is out of it, as ctl status tells it: "maint",
 * "drain", "down" (its checks), "backup" (a standby while primaries are up), "weight 0" (up,
 * and in no slot); NULL if in. A table a reload has not yet replaced may list other backends:
 * "down" then.
 */
static const char *table_out_name(const struct hlb_pool_service *s, const struct hashlb_table *t,
				  uint32_t idx)
{
	const struct hlb_pool_backend *b;

	/* not counted among "N/M backends up" either: its OUT cell said nothing (it read as in) */
	if (!hashlb_table_backend_down(t, idx))
		return hashlb_table_backend_weight(t, idx) ? NULL : "weight 0";
	if (idx >= s->n_backends ||
	    strcmp(s->backends[idx]->rt->name, hashlb_table_backend_name(t, idx)))
		return "down";
	b = s->backends[idx];
	if (b->admin != HASHLB_ADMIN_READY)
		return hashlb_admin_state_name(b->admin);
	if (strcmp(health_name(b), "up"))
		return "down";
	return b->rt->backup ? "backup" : "down";
}

/* "N/M backends up" and "up": those taking clients, as /status and hashlb_service_backends_up
 * count them (a backend of weight 0 is in no table slot, though not down) */
static void table_render(struct hlb_pool_service *s, bool text, struct hlb_buf *o)
{
	const struct hlb_snapshot *snap = hlb_pool_snapshot(s);
	const struct hashlb_table *t = snap->table;
	const struct hashlb_table_params *p = hashlb_table_params(t);
	struct hashlb_table_view v;
	char pbuf[64], params[HASHLB_TABLE_PARAMS_STRLEN], points[32] = "";

	hashlb_table_view(t, &v);
	hashlb_table_params_format(p, params, sizeof(params));
	/* a ring's points in all (vnodes times the weights of the backends in it): its size */
	if (p->scheme != HASHLB_SCHEME_MAGLEV)
		snprintf(points, sizeof(points), "%u points, ", v.n_points);
	if (text) {
		hlb_buf_printf(o,
			       "service %s: %s, key %s%s\n"
			       "generation %" PRIu64 ", fingerprint %016" PRIx64
			       ", %u/%u backends up, %s%zu bytes\n",
			       s->cfg->name, params, hashlb_key_name(snap->key),
			       prefix_text(&snap->hash_prefix, pbuf, sizeof(pbuf)),
			       snap->generation, snap->fingerprint, hlb_pool_takes_clients_count(s),
			       v.n_backends, points, hashlb_table_bytes(t));
		hlb_buf_printf(o, "  %-16s %6s %-8s %8s\n", "BACKEND", "WEIGHT", "OUT", "SHARE");
		for (uint32_t i = 0; i < v.n_backends; i++)
			hlb_buf_printf(
				o, "  %-*s %6u %-8s %7.3f%%\n",
				16 + hashlb_text_extra_bytes(hashlb_table_backend_name(t, i)),
				hashlb_table_backend_name(t, i), hashlb_table_backend_weight(t, i),
				table_out_name(s, t, i) ?: "",
				100.0 * hlb_pool_service_share(s, i));
		return;
	}
	hlb_buf_puts(o, "{\"service\":");
	hlb_buf_json_str(o, s->cfg->name);
	/* the config's names for the parameter, as hashlb table --json has them */
	hlb_buf_printf(o, ",\"scheme\":\"%s\",\"%s\":%u,\"seed\":%" PRIu64,
		       hashlb_scheme_name(p->scheme),
		       p->scheme == HASHLB_SCHEME_MAGLEV ? "table_size" : "vnodes",
		       p->scheme == HASHLB_SCHEME_MAGLEV ? p->maglev_m : p->ring_v, p->seed);
	if (p->scheme != HASHLB_SCHEME_MAGLEV)
		hlb_buf_printf(o, ",\"points\":%u", v.n_points);
	hlb_buf_printf(o,
		       ",\"key\":\"%s\",\"hash_prefix\":{\"ipv4\":%u,\"ipv6\":%u}"
		       ",\"generation\":%" PRIu64 ",\"fingerprint\":\"%016" PRIx64
		       "\",\"up\":%u,\"bytes\":%zu,\"backends\":[",
		       hashlb_key_name(snap->key), prefix_v4(&snap->hash_prefix),
		       prefix_v6(&snap->hash_prefix), snap->generation, snap->fingerprint,
		       hlb_pool_takes_clients_count(s), hashlb_table_bytes(t));
	for (uint32_t i = 0; i < v.n_backends; i++) {
		hlb_buf_puts(o, i ? ",{\"name\":" : "{\"name\":");
		hlb_buf_json_str(o, hashlb_table_backend_name(t, i));
		/* in_table as /status says it: taking clients (of a weight above 0 too) */
		hlb_buf_printf(o, ",\"weight\":%u,\"in_table\":%s,\"out\":",
			       hashlb_table_backend_weight(t, i),
			       hlb_pool_takes_clients(snap, i) ? "true" : "false");
		hlb_buf_json_str(o, table_out_name(s, t, i));
		hlb_buf_printf(o, ",\"share\":%.6f}", hlb_pool_service_share(s, i));
	}
	hlb_buf_puts(o, "]}\n");
}

/* ---- lookup ---- */

/* <d> as a destination into <dst>, with a port if <port>: what the 4-tuple
 * key hashes; -1 when it is not one (answered 400), as hashlb lookup's --vip. */
static int vip_parse(const char *d, bool port, struct hashlb_tuple *dst, struct hlb_http_resp *resp)
{
	char why[200];

	if (hashlb_tuple_parse_src(d, dst) < 0) {
		resp_error(resp, 400, "vip=%s is not an ADDR:PORT: %s", d,
			   hashlb_tuple_explain(d, why, sizeof(why)));
		return -1;
	}
	if (port && !dst->sport[0] && !dst->sport[1]) {
		resp_error(resp, 400, "vip=%s is not an ADDR:PORT: it has no port", d);
		return -1;
	}
	return 0;
}

/*
 * "<client> -> no backend (...)": why <s>'s table <t> has none, each backend counted by what
 * keeps it out, as ctl table's OUT column says it (down, drain, maint; backup, by a table a
 * reload has not yet replaced) or of weight 0. It said "all down" whatever kept them out: a
 * pool drained by hand read as a failed one.
 */
static void lookup_none(const struct hlb_pool_service *s, const struct hashlb_table *t,
			const char *client, struct hlb_buf *o)
{
	static const char *const whys[] = { "down", "drain", "maint", "backup", "weight 0" };
	uint32_t count[sizeof(whys) / sizeof(whys[0])] = { 0 };
	struct hashlb_table_view v;
	const char *sep = "";

	hashlb_table_view(t, &v);
	for (uint32_t i = 0; i < v.n_backends; i++) {
		const char *why = table_out_name(s, t, i) ?: "";

		for (size_t k = 0; k < sizeof(whys) / sizeof(whys[0]); k++)
			count[k] += !strcmp(why, whys[k]);
	}
	hlb_buf_printf(o, "%s -> no backend (", client);
	for (size_t k = 0; k < sizeof(whys) / sizeof(whys[0]); k++) {
		if (!count[k])
			continue;
		hlb_buf_printf(o, "%s%u %s", sep, count[k], whys[k]);
		sep = ", ";
	}
	hlb_buf_puts(o, ")\n");
}

static void lookup(struct hlb_pool_service *s, const struct hlb_http_req *req,
		   struct hlb_http_resp *resp, bool text)
{
	const struct hlb_snapshot *snap = hlb_pool_snapshot(s);
	struct hlb_buf *o = &resp->body;
	struct hashlb_tuple tuple, dst;
	uint32_t pref[HLB_PREFERENCE_MAX];
	char client[HLB_HTTP_VALUE_MAX + 1], vip[HLB_HTTP_VALUE_MAX + 1];
	const char *d;
	uint64_t hash;
	size_t n;

	if (!hlb_http_param(req, "client", client, sizeof(client))) {
		resp_error(resp, 400, "give client=ADDR or ADDR:PORT");
		return;
	}
	if (hashlb_tuple_parse_src(client, &tuple) < 0) {
		char why[200];

		/* what is wrong, as hashlb lookup and vip= say it (a port out of range, a
		 * ']' missing, a URL); a list, as one argument: one client each */
		if (strchr(client, ','))
			resp_error(resp, 400,
				   "client '%s' is not an address: give ADDR, ADDR:PORT or "
				   "[IPV6]:PORT (one client per argument)",
				   client);
		else
			resp_error(resp, 400, "client '%s' is not an address: %s", client,
				   hashlb_tuple_explain(client, why, sizeof(why)));
		return;
	}
	if (snap->key != HASHLB_KEY_SRC_IP && !tuple.sport[0] && !tuple.sport[1]) {
		resp_error(resp, 400,
			   "client %s has no port, and the %s key hashes it: give ADDR:PORT%s",
			   client, hashlb_key_name(snap->key), hashlb_tuple_port_hint(client));
		return;
	}
	/* The destination clients connect to, for the 4-tuple key: vip= if
	 * given (checked whatever the key: a typo is said, not ignored), else
	 * the address the service listens on (a port 0 as bound), unless that
	 * says nothing (a wildcard, PROXY headers). */
	d = hlb_http_param(req, "vip", vip, sizeof(vip));
	if (d && vip_parse(d, snap->key == HASHLB_KEY_4TUPLE, &dst, resp) < 0)
		return;
	if (snap->key == HASHLB_KEY_4TUPLE) {
		const char *why = hashlb_service_dest_unknown(s->cfg, true);

		if (!d && why) {
			resp_error(resp, 400,
				   "service %s hashes the 4-tuple and %s: give vip=ADDR:PORT, the "
				   "address clients connect to (hashlb ctl lookup --vip)",
				   s->cfg->name, why);
			return;
		}
		if (!d &&
		    vip_parse(*s->rt->bound ? s->rt->bound : s->cfg->listen, true, &dst, resp) < 0)
			return;
		memcpy(tuple.dst, dst.src, sizeof(tuple.dst));
		memcpy(tuple.dport, dst.sport, sizeof(tuple.dport));
	}
	hashlb_tuple_mask_src(&tuple, &snap->hash_prefix);
	hash = hashlb_tuple_hash(&tuple, snap->key, snap->seed);
	n = hashlb_table_preference(snap->table, hash, pref,
				    snap->connect_retries + 1 < HLB_PREFERENCE_MAX
					    ? snap->connect_retries + 1
					    : HLB_PREFERENCE_MAX);
	if (text) {
		if (!n) {
			lookup_none(s, snap->table, client, o);
			return;
		}
		hlb_buf_printf(o, "%s -> %s (%s)", client, snap->backends[pref[0]]->name,
			       snap->backends[pref[0]]->address);
		for (size_t i = 1; i < n; i++)
			hlb_buf_printf(o, "%s%s", i == 1 ? ", then " : ", ",
				       snap->backends[pref[i]]->name);
		hlb_buf_printf(o, "  [hash %016" PRIx64 ", generation %" PRIu64 "]\n", hash,
			       snap->generation);
		return;
	}
	hlb_buf_puts(o, "{\"client\":");
	hlb_buf_json_str(o, client);
	hlb_buf_puts(o, ",\"service\":");
	hlb_buf_json_str(o, s->cfg->name);
	hlb_buf_printf(o,
		       ",\"hash\":\"%016" PRIx64 "\",\"generation\":%" PRIu64 ",\"backend\":", hash,
		       snap->generation);
	hlb_buf_json_str(o, n ? snap->backends[pref[0]]->name : NULL);
	hlb_buf_puts(o, ",\"preference\":[");
	for (size_t i = 0; i < n; i++) {
		if (i)
			hlb_buf_puts(o, ",");
		hlb_buf_json_str(o, snap->backends[pref[i]]->name);
	}
	hlb_buf_puts(o, "]}\n");
}

/* ---- commands ---- */

/* Whether the each_address entry <name> gave the <i>th backend of <s>. */
static bool group_gave(const struct hlb_pool_service *s, uint32_t i, const char *name)
{
	/* the pool's backends are in the config's order */
	const char *from = i < s->cfg->n_backends ? s->cfg->backends[i].from_name : NULL;

	return from && !strcmp(from, name);
}

/* The backends of <s> that the each_address entry <name> gave, into <out> (room for all of
 * s's backends); how many. */
static uint32_t group_members(struct hlb_pool_service *s, const char *name,
			      struct hlb_pool_backend **out)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->n_backends; i++)
		if (group_gave(s, i, name))
			out[n++] = s->backends[i];
	return n;
}

/* Whether <s> is steered in the kernel, which holds no connection to close (answered). */
static bool kernel_steered(const struct hlb_pool_service *s, struct hlb_http_resp *resp)
{
	if (s->cfg->steering != HASHLB_STEERING_KERNEL)
		return false;
	resp_error(resp, 409,
		   "service %s is steered in the kernel, which holds no connection to close",
		   s->cfg->name);
	return true;
}

/* One backend's line (text) or object (JSON) in the answer to POST /set. */
static void set_answer_one(struct hlb_pool_service *s, const struct hlb_pool_backend *b, bool text,
			   struct hlb_buf *o)
{
	if (text) {
		hlb_buf_printf(o,
			       "%s/%s: state %s, weight %u, max_connections %u, health %s; table "
			       "generation %" PRIu64 "\n",
			       s->cfg->name, b->rt->name, hashlb_admin_state_name(b->admin),
			       b->rt->weight, atomic_load(&b->rt->max_conns), health_name(b),
			       hlb_pool_snapshot(s)->generation);
		return;
	}
	json_open_member(o, s, "backend", b->rt->name);
	hlb_buf_printf(o,
		       ",\"state\":\"%s\",\"weight\":%u,\"max_connections\":%u,\"health\":\"%s\""
		       ",\"generation\":%" PRIu64 "}",
		       hashlb_admin_state_name(b->admin), b->rt->weight,
		       atomic_load(&b->rt->max_conns), health_name(b),
		       hlb_pool_snapshot(s)->generation);
}

/*
 * The most bytes <t>'s table may take (hashlb_service_cfg_weights_bytes_max()) with <ws> (its
 * backends' weights, in order), or NULL: the weights in force, some set at run time.
 * UINT64_MAX short of memory.
 */
static uint64_t service_bytes_max(const struct hlb_pool_service *t, const uint32_t *ws)
{
	if (ws && t->n_backends == t->cfg->n_backends)
		return hashlb_service_cfg_weights_bytes_max(t->cfg, ws);
	return hlb_pool_service_bytes_max(t);
}

/* The services of table_memory_fits(): <s> at <own> bytes, the others with the weights in
 * force. */
struct fits {
	struct hlb_pool *pool;
	const struct hlb_pool_service *s;
	uint64_t own;
};

static uint64_t fits_bytes(void *arg, uint32_t i, const struct hashlb_service_cfg **ret_s)
{
	const struct fits *f = arg;
	const struct hlb_pool_service *t = hlb_pool_service_at(f->pool, i);

	*ret_s = t->cfg;
	return t == f->s ? f->own : service_bytes_max(t, NULL);
}

/*
 * 0 if weight <w>, giving <s>'s backends the weights <ws>, keeps every service's table within
 * table_memory, as the config's weights are kept (each table counted at the most it may take,
 * with the weights in force); else -E2BIG with <err> saying so, or -ENOMEM. The services'
 * tables are counted only when <s>'s may grow: a weight lowered costs no pass over them.
 */
static int table_memory_fits(struct hlb_control *ctl, const struct hlb_pool_service *s,
			     const uint32_t *ws, uint32_t w, struct hashlb_error *err)
{
	struct fits f = { ctl->pool, s, service_bytes_max(s, ws) };
	char capbuf[HASHLB_TABLE_MEMORY_STRLEN];
	uint64_t total;
	int r;

	if (!ctl->cfg->table_memory || f.own <= service_bytes_max(s, NULL))
		return 0;
	/* the rule the loader's and a reload's is, over every service: the sum said below */
	r = hlb_control_table_memory(ctl->cfg, hlb_pool_service_count(ctl->pool),
				     HASHLB_TABLE_MEMORY_RUN_TIME, fits_bytes, &f, &total, NULL);
	if (r == -ENOMEM) /* each built, so none too large: short of memory */
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	if (r == 0)
		return 0;
	/* the cap said as the loader and a reload say it (hashlb_table_memory_format()) */
	hashlb_table_memory_format(ctl->cfg, capbuf, sizeof(capbuf));
	return hashlb_err(err, -E2BIG, HASHLB_ERR_MEMORY_CAP,
			  "weight %u would let service %s's table take up to %" PRIu64
			  " bytes, and the services' tables %" PRIu64 ", over table_memory %s"
			  ": nothing changed (raise table_memory, 0 = no cap, or give a lower "
			  "weight)",
			  w, s->cfg->name, f.own, total, capbuf);
}

/*
 * POST /set?backend=NAME: one backend, or, when NAME is the name written for
 * an each_address entry ("pool"), every backend its addresses gave
 * ("pool@10.0.0.7", ...): the same settings to each, one rebuild, and all of
 * them undone if that rebuild fails.
 */
static void set_backend(struct hlb_control *ctl, struct hlb_pool_service *s,
			const struct hlb_http_req *req, struct hlb_http_resp *resp, bool text)
{
	char state[HLB_HTTP_VALUE_MAX + 1], weight[HLB_HTTP_VALUE_MAX + 1],
		maxc[HLB_HTTP_VALUE_MAX + 1], name[HLB_HTTP_VALUE_MAX + 1];
	bool has_state = hlb_http_param(req, "state", state, sizeof(state)) != NULL;
	bool has_weight = hlb_http_param(req, "weight", weight, sizeof(weight)) != NULL;
	bool has_max = hlb_http_param(req, "max_connections", maxc, sizeof(maxc)) != NULL;
	bool changed = false, none;
	enum hashlb_admin_state st = HASHLB_ADMIN_READY;
	struct hlb_pool_backend *one, **bs;
	struct {
		enum hashlb_admin_state state;
		uint32_t weight, max;
	} * was;
	uint32_t w = 0, max = 0, n = 0;
	uint64_t failed;
	const char *how = NULL;
	pid_t up = ctl->upgrade_state ? ctl->upgrade_state(ctl->daemon, &how) : 0;

	/* The new process of an upgrade got the run-time settings when it
	 * started: one set here now would be lost when it takes over. */
	if (up > 0 && !how) {
		resp_error(resp, 409,
			   "an upgrade is under way (new hashlb pid %d), which has taken the "
			   "run-time settings over already: set it again once the upgrade is done",
			   (int)up);
		return;
	}
	if (ctl->successor && (up = ctl->successor(ctl->daemon)) > 0) {
		resp_error(resp, 409,
			   "this hashlb (pid %d) has handed its sockets and run-time settings over "
			   "to a new one (pid %d, GET /sockets?taker=), which serves this admin "
			   "address too: set it there, this one's would be lost when it stops",
			   (int)getpid(), (int)up);
		return;
	}
	if (!hlb_http_param(req, "backend", name, sizeof(name)) || !name[0]) {
		resp_error(resp, 400, "give backend=NAME");
		return;
	}
	if (!has_state && !has_weight && !has_max) {
		resp_error(resp, 400,
			   "give state=ready|drain|maint, weight=N and/or max_connections=N");
		return;
	}
	if (has_state && hashlb_admin_state_parse(state, &st) < 0) {
		resp_error(resp, 400, "unknown state '%s': ready, drain or maint", state);
		return;
	}
	if (has_weight && parse_u32(weight, HASHLB_WEIGHT_MAX, &w) < 0) {
		resp_error(resp, 400,
			   "weight '%s' is not a whole number from 0 to %u (in decimal digits)",
			   weight, HASHLB_WEIGHT_MAX);
		return;
	}
	if (has_max && parse_u32(maxc, HASHLB_MAX_CONNECTIONS_MAX, &max) < 0) {
		resp_error(resp, 400,
			   "max_connections '%s' is not a whole number from 0 (no cap) to %u (in "
			   "decimal digits)",
			   maxc, HASHLB_MAX_CONNECTIONS_MAX);
		return;
	}
	if (has_max && max && s->cfg->steering == HASHLB_STEERING_KERNEL) {
		resp_error(resp, 409,
			   "service %s is steered in the kernel, which opens no connection to "
			   "count: max_connections needs steering: userspace",
			   s->cfg->name);
		return;
	}
	one = hlb_pool_backend_find(s, name);
	bs = calloc(s->n_backends ? s->n_backends : 1, sizeof(*bs));
	was = calloc(s->n_backends ? s->n_backends : 1, sizeof(*was));
	if (!bs || !was) {
		free(bs);
		free(was);
		resp_error(resp, 500, "out of memory");
		return;
	}
	if (one)
		bs[n++] = one;
	else
		n = group_members(s, name, bs);
	if (!n) {
		/* its draining row in /status names it: say why set does not take it */
		bool removed = false;

		for (uint32_t j = 0; j < s->n_removed && !removed; j++)
			removed = !strcmp(s->removed[j]->rt->name, name);
		resp_error(resp, 404, "service %s has no backend '%s'%s", s->cfg->name, name,
			   removed ? " (a reload removed it: it drains, and set does not apply; "
				     "hashlb ctl close ends its connections)"
				   : "");
		goto out;
	}
	/* Every backend at weight 0 makes no table: refused here, so that an
	 * operator's request is not a failed rebuild (logged as an error,
	 * counted in hashlb_service_rebuild_failures_total). */
	if (has_weight && !w) {
		uint64_t rest = 0;

		for (uint32_t j = 0; j < s->n_backends; j++) {
			uint32_t k = 0;

			while (k < n && bs[k] != s->backends[j])
				k++;
			if (k == n)
				rest += s->backends[j]->rt->weight;
		}
		if (!rest) {
			resp_error(resp, 409,
				   "weight 0 would leave every backend of service %s at weight 0: "
				   "no table, nothing changed",
				   s->cfg->name);
			goto out;
		}
	}
	/* The table the weights leave, checked before anything changes: one too large to
	 * build (a ring's points past the build's cap) is refused here, as every weight 0 is
	 * above, so that an operator's request is no failed rebuild (an error logged, counted
	 * in hashlb_service_rebuild_failures_total); one the service's kernel steering program
	 * cannot hold would stay out of the kernel, and every later one with it (health
	 * changes). */
	if (has_weight) {
		uint32_t m = s->n_backends ? s->n_backends : 1;
		const char **names = calloc(m, sizeof(*names));
		uint32_t *ws = calloc(m, sizeof(*ws));
		bool *backup = calloc(m, sizeof(*backup));
		struct hashlb_error e = { 0 };
		int r = -ENOMEM;

		if (names && ws && backup) {
			for (uint32_t j = 0; j < s->n_backends; j++) {
				uint32_t k = 0;

				while (k < n && bs[k] != s->backends[j])
					k++;
				names[j] = s->backends[j]->rt->name;
				ws[j] = k < n ? w : s->backends[j]->rt->weight;
				backup[j] = s->backends[j]->rt->backup;
			}
			/* a live service's backends are its config's, in order (service_new()
			 * and a reload make both); where not, the weights' array is not the
			 * config's to read: the build checks them as it makes the table */
			r = s->n_backends == s->cfg->n_backends
				    ? hashlb_service_cfg_check_weights(s->cfg, ws, &e)
				    : 0;
			if (r == 0)
				r = table_memory_fits(ctl, s, ws, w, &e);
			if (r == 0 && s->cfg->steering == HASHLB_STEERING_KERNEL && ctl->steer_fits)
				r = ctl->steer_fits(ctl->steer_fits_arg, s->cfg, NULL, names, ws,
						    backup, s->n_backends, &e);
		}
		free(names);
		free(ws);
		free(backup);
		if (r < 0) {
			resp_error(resp, r == -ENOMEM ? 500 : 409, "%s",
				   r == -ENOMEM ? "out of memory" : e.msg);
			goto out;
		}
	}
	/* The weights first, built at once: a table they cannot make (every
	 * weight 0) refuses the whole request before anything else changes.
	 * Undoing a state afterwards would not restore it (leaving maint
	 * resets the health). */
	failed = s->rebuilds_failed;
	for (uint32_t i = 0; i < n; i++) {
		was[i].state = bs[i]->admin;
		was[i].weight = bs[i]->rt->weight;
		was[i].max = atomic_load(&bs[i]->rt->max_conns);
	}
	for (uint32_t i = 0; i < n && has_weight; i++)
		hlb_pool_set_weight(bs[i], w);
	if (has_weight)
		hlb_pool_flush(ctl->pool);
	if (s->rebuilds_failed != failed) {
		/* undo, the old table keeps serving */
		resp_error(resp, 409, "%s", s->last_error.msg);
		for (uint32_t i = 0; i < n; i++)
			hlb_pool_set_weight(bs[i], was[i].weight);
		hlb_pool_flush(ctl->pool);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (has_max)
			hlb_pool_set_max_connections(bs[i], max);
		if (has_state)
			hlb_pool_set_admin(bs[i], st);
	}
	/* Logged before the build: what was set stays set even when the build
	 * fails (the previous table serving until the next one). A line per
	 * backend changed; one for the request when none was. */
	for (uint32_t i = 0; i < n; i++)
		changed |= hlb_pool_log_set(bs[i], has_state ? &was[i].state : NULL,
					    has_weight ? &was[i].weight : NULL,
					    has_max ? &was[i].max : NULL);
	if (!changed)
		hlb_pool_log_set_unchanged(s, name, n);
	/* Build now, so the answer (and the next lookup) shows the new table. */
	hlb_pool_flush(ctl->pool);
	if (s->rebuilds_failed != failed) {
		resp_error(resp, 500, "%s (the previous table keeps serving)", s->last_error.msg);
		goto out;
	}
	none = hlb_pool_takes_clients_count(s) == 0;
	if (none)
		hlb_pool_log_set_leaves_none(s);
	if (one) {
		set_answer_one(s, one, text, &resp->body);
	} else {
		if (!text) {
			json_open_member(&resp->body, s, "each_address", name);
			hlb_buf_puts(&resp->body, ",\"backends\":[");
		}
		for (uint32_t i = 0; i < n; i++) {
			if (!text && i)
				hlb_buf_puts(&resp->body, ",");
			set_answer_one(s, bs[i], text, &resp->body);
		}
		if (!text)
			hlb_buf_puts(&resp->body, "]}");
	}
	/* said, not refused: draining the last backend is an operator's to choose; in JSON a
	 * "warning" member of the answer's object, its closing brace put back after it */
	if (none) {
		char said[HASHLB_NAME_MAX + 200];

		snprintf(
			said, sizeof(said),
			"service %s: no backend takes clients now (each down, drained, in maint or "
			"of weight 0): its new clients are refused until one is up, ready and of "
			"weight above 0",
			s->cfg->name);
		if (text) {
			hlb_buf_printf(&resp->body, "warning: %s\n", said);
		} else if (resp->body.len && resp->body.p[resp->body.len - 1] == '}') {
			resp->body.len--;
			hlb_buf_puts(&resp->body, ",\"warning\":");
			hlb_buf_json_str(&resp->body, said);
			hlb_buf_puts(&resp->body, "}");
		}
	}
	if (!text)
		hlb_buf_puts(&resp->body, "\n");
out:
	free(bs);
	free(was);
}

/* What a close of one name reaches in a service, counted apart (see close_reach()). */
struct close_reach {
	struct hlb_pool_backend *backend; /* of that name in the table, or NULL */
	uint32_t draining; /* of that name, removed by a reload and still draining */
	uint32_t members; /* neither: the backends the each_address entry of that name gave */
	uint64_t closing; /* connections closed of <backend> or of the members */
	uint64_t drained; /* connections closed of the draining ones */
};

/*
 * What a close of <name> in <s> reaches, into <r>: the backend of that name in the table and
 * those of that name a reload removed and that still drain, or, when there is none of these,
 * every backend the each_address entry <name> gave. With <close_now> their connections are
 * closed and counted; without, only the parts are counted, so that a caller can refuse before
 * closing anything. Returns whether it reaches any backend (false: no such name).
 */
static bool close_reach(struct hlb_pool_service *s, const char *name, bool close_now,
			struct close_reach *r)
{
	*r = (struct close_reach){ .backend = hlb_pool_backend_find(s, name) };
	if (r->backend && close_now)
		r->closing = hlb_pool_close_connections(r->backend);
	for (uint32_t j = 0; j < s->n_removed; j++) {
		if (strcmp(s->removed[j]->rt->name, name))
			continue;
		r->draining++;
		if (close_now)
			r->drained += hlb_pool_close_connections(s->removed[j]);
	}
	if (r->backend || r->draining)
		return true;
	for (uint32_t i = 0; i < s->n_backends; i++) {
		if (!group_gave(s, i, name))
			continue;
		r->members++;
		if (close_now)
			r->closing += hlb_pool_close_connections(s->backends[i]);
	}
	return r->members != 0;
}

/* Whether /set of <name> in <s> has a backend to change: one of that name in its table, or
 * those its each_address entry <name> gave (not one a reload removed, which set does not
 * take). */
static bool set_reaches(struct hlb_pool_service *s, const char *name)
{
	if (hlb_pool_backend_find(s, name))
		return true;
	for (uint32_t i = 0; i < s->n_backends; i++)
		if (group_gave(s, i, name))
			return true;
	return false;
}

/* Whether <s> has a backend <name> that a /set (<settable>: one it can change, set_reaches())
 * or a /close (close_reach()) naming no service would act on. */
static bool backend_service_is(struct hlb_pool_service *s, const char *name, bool settable)
{
	struct close_reach r;

	return settable ? set_reaches(s, name) : close_reach(s, name, false, &r);
}

/*
 * The service of a /set (<set>) or /close: req_service()'s, or, when the request names none
 * and there are several, the one service that has the backend it names (as close_reach()
 * finds it: in the table, draining, or an each_address entry; for /set, one it can change
 * first: a name that a reload removed from one service, still draining there, and that
 * another has, is that other's), so that "hashlb ctl set web-3 drain" needs no -s where
 * web-3 is in one service alone. A name in several is refused with those services, never
 * guessed (in JSON, also as "services", an array a program reads whole: the message may cut
 * the list short); one in none is a 404.
 */
static struct hlb_pool_service *req_backend_service(struct hlb_control *ctl,
						    const struct hlb_http_req *req, bool set,
						    struct hlb_http_resp *resp)
{
	char name[HLB_HTTP_VALUE_MAX + 1], svc[HLB_HTTP_VALUE_MAX + 1], names[200];
	struct hlb_pool_service *found = NULL;
	uint32_t n = hlb_pool_service_count(ctl->pool), hits = 0;
	size_t len = 0;
	bool cut = false, settable = false;

	if (hlb_http_param(req, "service", svc, sizeof(svc)) || n == 1 ||
	    !hlb_http_param(req, "backend", name, sizeof(name)) || !name[0])
		return req_service(ctl, req, resp);
	/* for /set, a service where it only drains counts when none has it otherwise: set
	 * then says why it does not apply there */
	for (uint32_t i = 0; i < n && set && !settable; i++)
		settable = set_reaches(hlb_pool_service_at(ctl->pool, i), name);
	for (uint32_t i = 0; i < n; i++) {
		struct hlb_pool_service *s = hlb_pool_service_at(ctl->pool, i);

		if (!backend_service_is(s, name, settable))
			continue;
		if (!hits++)
			found = s;
		if (cut)
			continue; /* a shorter name that would still fit read "x y ... z" */
		cut = len + strlen(s->cfg->name) + 6 >= sizeof(names);
		len += (size_t)snprintf(names + len, sizeof(names) - len, cut ? " ..." : " %s",
					s->cfg->name);
	}
	if (hits == 1)
		return found;
	if (hits) {
		resp_error(resp, 400,
			   "which service? backend '%s' is in %u services: give service=NAME "
			   "(hashlb ctl: -s NAME); those with it:%s",
			   name, hits, names);
		if (strcmp(resp->ctype, "application/json") || resp->body.len < 2)
			return NULL;
		resp->body.len -= 2; /* the object's "}\n", to go on with */
		hlb_buf_puts(&resp->body, ",\"services\":[");
		for (uint32_t i = 0, k = 0; i < n; i++) {
			struct hlb_pool_service *s = hlb_pool_service_at(ctl->pool, i);

			if (!backend_service_is(s, name, settable))
				continue;
			hlb_buf_puts(&resp->body, k++ ? "," : "");
			hlb_buf_json_str(&resp->body, s->cfg->name);
		}
		hlb_buf_puts(&resp->body, "]}\n");
	} else
		/* the services, not "it has:", which read as the backends it has */
		resp_error(resp, 404, "no service has a backend '%s'%s", name,
			   service_names(ctl,
					 "; hashlb ctl status lists the backends of its services:",
					 names, sizeof(names)));
	return NULL;
}

uint64_t hlb_control_close_named(struct hlb_control *ctl, const char *svc, const char *name)
{
	struct hlb_pool_service *s = hlb_pool_service_find(ctl->pool, svc);
	struct close_reach r;

	if (!s || s->cfg->steering == HASHLB_STEERING_KERNEL)
		return 0;
	close_reach(s, name, true, &r);
	return r.closing + r.drained;
}

/* A POST /close whose answer waits for the old process's (close_old()). */
struct hlb_close_wait {
	struct hlb_close_wait *next;
	struct hlb_control *ctl;
	uint64_t id; /* the request's, for hlb_http_answer() */
	struct hlb_http_resp resp; /* the answer so far */
	pid_t pid; /* the old process's */
	bool text;
	bool answered; /* without the old process's count: hlb_control_close_waits_answer() */
};

/* close_old_say()'s count of an old process asked, its answer not waited for */
#define CLOSE_OLD_NOT_WAITED (-2)

/* The end of a close's answer: what the old process <pid> (0: none) closed, <n> (-1: it could
 * not be asked; CLOSE_OLD_NOT_WAITED), and the answer's end. */
static void close_old_say(struct hlb_buf *o, pid_t pid, int64_t n, bool text)
{
	if (!text) {
		if (!pid)
			hlb_buf_puts(o, ",\"old\":null");
		else if (n < 0)
			/* "asked" tells the two nulls apart, as the text does: asked, its count
			 * not waited for (a handover), or not asked at all */
			hlb_buf_printf(o, ",\"old\":{\"pid\":%d,\"closing\":null,\"asked\":%s}",
				       (int)pid, n == CLOSE_OLD_NOT_WAITED ? "true" : "false");
		else
			hlb_buf_printf(
				o, ",\"old\":{\"pid\":%d,\"closing\":%" PRId64 ",\"asked\":true}",
				(int)pid, n);
		hlb_buf_puts(o, "}\n");
		return;
	}
	if (pid && n >= 0)
		hlb_buf_printf(o,
			       "; and %" PRId64 " of the hashlb this one took over from (pid %d), "
			       "which still runs",
			       n, (int)pid);
	else if (pid && n == CLOSE_OLD_NOT_WAITED)
		hlb_buf_printf(o,
			       "; those of the hashlb this one took over from (pid %d) were asked "
			       "too, its count not waited for: this one handed its admin address "
			       "over (an upgrade)",
			       (int)pid);
	else if (pid)
		hlb_buf_printf(o,
			       "; NOT those of the hashlb this one took over from (pid %d), which "
			       "still runs and could not be asked: they end by themselves, at its "
			       "timeouts.drain once it stops, or all at once with a second SIGTERM "
			       "to it",
			       (int)pid);
	hlb_buf_puts(o, "\n");
}

/*
 * After a close here: the same asked of the hashlb this one took the sockets over from, if it
 * still runs (it drains), and said in <resp>, which it ends (the text's line goes on: JSON, an
 * "old" member, null when none runs, and "new", the pid of a hashlb that took over from this
 * one and runs, whose connections are not closed here). Their connections are not this one's
 * to count as closed. The old one's answer is waited for on the loop: <resp> is then held
 * (hlb_http_resp.hold) and sent once it comes, or once it could not (2 s).
 */
static void close_old(struct hlb_control *ctl, struct hlb_pool_service *s, const char *name,
		      const struct hlb_http_req *req, struct hlb_http_resp *resp, bool text)
{
	pid_t succ = ctl->successor ? ctl->successor(ctl->daemon) : 0;
	struct hlb_close_wait *w = NULL;
	pid_t pid = 0;

	if (succ > 0 && text)
		hlb_buf_printf(&resp->body,
			       "; NOT those of the hashlb that took over from this one (pid %d), "
			       "which serves this admin address too: ask again until it answers",
			       (int)succ);
	else if (!text && succ > 0)
		hlb_buf_printf(&resp->body, ",\"new\":%d", (int)succ);
	else if (!text)
		hlb_buf_puts(&resp->body, ",\"new\":null");
	if (ctl->close_old && ctl->http) {
		w = calloc(1, sizeof(*w));
		pid = w ? ctl->close_old(ctl->daemon, s->cfg->name, name, w) : -ENOMEM;
	}
	if (pid <= 0) {
		free(w);
		resp->body.oom |= pid < 0; /* answered 500, out of memory */
		close_old_say(&resp->body, 0, -1, text);
		return;
	}
	*w = (struct hlb_close_wait){ .next = ctl->close_waits,
				      .ctl = ctl,
				      .id = req->id,
				      .resp = *resp,
				      .pid = pid,
				      .text = text };
	ctl->close_waits = w;
	resp->body = (struct hlb_buf){ 0 };
	resp->hold = true;
}

void hlb_control_close_old_done(struct hlb_close_wait *w, int64_t n)
{
	struct hlb_control *ctl = w->ctl;
	struct hlb_close_wait **pp = &ctl->close_waits;

	while (*pp != w)
		pp = &(*pp)->next;
	*pp = w->next;
	if (w->answered) {
		free(w);
		return;
	}
	close_old_say(&w->resp.body, w->pid, n, w->text);
	if (ctl->http)
		hlb_http_answer(ctl->http, w->id, &w->resp);
	else /* the endpoint closed (handed over): the client had its connection closed */
		hlb_buf_free(&w->resp.body);
	free(w);
}

void hlb_control_close_waits_answer(struct hlb_control *ctl)
{
	for (struct hlb_close_wait *w = ctl->close_waits; w && ctl->http; w = w->next) {
		if (w->answered)
			continue;
		w->answered = true;
		close_old_say(&w->resp.body, w->pid, CLOSE_OLD_NOT_WAITED, w->text);
		hlb_http_answer(ctl->http, w->id, &w->resp);
	}
}

void hlb_control_close_waits_free(struct hlb_control *ctl)
{
	while (ctl->close_waits) {
		struct hlb_close_wait *w = ctl->close_waits;

		ctl->close_waits = w->next;
		hlb_buf_free(&w->resp.body);
		free(w);
	}
}

/* The answer to a POST /close on the name of an each_address entry, <r> its backends. */
static void close_answer_group(struct hlb_control *ctl, struct hlb_pool_service *s,
			       const char *name, const struct close_reach *r,
			       const struct hlb_http_req *req, struct hlb_http_resp *resp,
			       bool text)
{
	if (text) {
		hlb_buf_printf(&resp->body,
			       "%s/%s: closing the %" PRIu64
			       " established connection%s (and those connecting) of its %u "
			       "backend%s; %s unchanged",
			       s->cfg->name, name, r->closing, hlb_plural(r->closing), r->members,
			       hlb_plural(r->members),
			       r->members == 1 ? "its state is" : "their states are");
		close_old(ctl, s, name, req, resp, text);
		return;
	}
	json_open_member(&resp->body, s, "each_address", name);
	hlb_buf_printf(&resp->body, ",\"backends\":%u,\"closing\":%" PRIu64, r->members,
		       r->closing);
	close_old(ctl, s, name, req, resp, text);
}

/*
 * POST /close?backend=B: close its connections (they are counted in /metrics
 * as they go), those of the backend in the table and those of any backend of
 * that name a reload removed and that still drains (its old address); when
 * B is none of these but the name of an each_address entry, those of every
 * backend it gave.
 */
static void close_backend(struct hlb_control *ctl, struct hlb_pool_service *s,
			  const struct hlb_http_req *req, struct hlb_http_resp *resp, bool text)
{
	char name[HLB_HTTP_VALUE_MAX + 1];
	struct close_reach r;
	struct hlb_pool_backend *b;

	if (!hlb_http_param(req, "backend", name, sizeof(name)) || !name[0]) {
		resp_error(resp, 400, "give backend=NAME");
		return;
	}
	if (!close_reach(s, name, false, &r)) {
		resp_error(resp, 404, "service %s has no backend '%s'", s->cfg->name, name);
		return;
	}
	if (kernel_steered(s, resp))
		return;
	close_reach(s, name, true, &r);
	if (r.members) {
		close_answer_group(ctl, s, name, &r, req, resp, text);
		return;
	}
	b = r.backend;
	if (text) {
		if (b)
			hlb_buf_printf(&resp->body,
				       "%s/%s: closing its %" PRIu64
				       " established connection%s (and those connecting); "
				       "its state (%s) is unchanged",
				       s->cfg->name, name, r.closing, hlb_plural(r.closing),
				       hashlb_admin_state_name(b->admin));
		else
			hlb_buf_printf(&resp->body, "%s/%s: removed by a reload", s->cfg->name,
				       name);
		if (r.draining)
			hlb_buf_printf(
				&resp->body,
				"%s closing the %" PRIu64
				" established connection%s of its draining (removed) address",
				b ? "; and" : ",", r.drained, hlb_plural(r.drained));
		close_old(ctl, s, name, req, resp, text);
		return;
	}
	json_open_member(&resp->body, s, "backend", name);
	hlb_buf_printf(&resp->body,
		       ",\"closing\":%" PRIu64 ",\"draining_closing\":%" PRIu64 ",\"state\":\"%s\"",
		       r.closing + r.drained, r.drained,
		       b ? hashlb_admin_state_name(b->admin) : "removed");
	close_old(ctl, s, name, req, resp, text);
}

/*
 * POST /reload. With ?pid=N, only if this process is pid N: another answers 412, reloading
 * nothing, for its caller to reload pid N another way (hashlb ctl reload --pid sends it
 * SIGHUP). The unit's ExecReload asks so for its MAINPID: the config's admin address may
 * since its start be another hashlb's. 412, not 409, which a stopping hashlb answers: that
 * one is pid N, and SIGHUP would not reload it either.
 */
static void reload(struct hlb_control *ctl, const struct hlb_http_req *req,
		   struct hlb_http_resp *resp, bool text)
{
	char v[HLB_HTTP_VALUE_MAX + 1];
	const char *pid_s = hlb_http_param(req, "pid", v, sizeof(v));
	struct hashlb_error err = { 0 };
	uint32_t pid;
	int ret;

	if (pid_s && (parse_u32(pid_s, INT32_MAX, &pid) < 0 || pid == 0)) {
		resp_error(resp, 400, "pid must be a process id, in digits: not '%s'", pid_s);
		return;
	}
	if (pid_s && pid != (uint32_t)getpid()) {
		resp_error(resp, 412, "pid %d answers here, not pid %u: not reloaded",
			   (int)getpid(), pid);
		return;
	}
	if (ctl->stopping) {
		resp_error(resp, 409, "hashlb is stopping (draining): no reload");
		return;
	}
	if (ctl->notify_reload)
		ctl->notify_reload(ctl->daemon, false);
	ret = hlb_control_reload(ctl, "admin", &err);
	if (ctl->notify_reload)
		ctl->notify_reload(ctl->daemon, true);

	if (ret == 0 && text) {
		hlb_buf_printf(&resp->body, "reloaded %s (%" PRIu64 " reload%s ok)\n",
			       ctl->config_path, ctl->reloads_ok, hlb_plural(ctl->reloads_ok));
		if (ctl->restart_only[0])
			hlb_buf_printf(&resp->body, "not applied until a restart: %s\n",
				       ctl->restart_only);
		if (ctl->warnings)
			hlb_buf_printf(&resp->body,
				       "config warnings: %u (logged; hashlb check prints them), "
				       "the first: %s\n",
				       ctl->warnings, ctl->first_warning);
		if (ctl->rehashed)
			hlb_buf_printf(&resp->body,
				       "clients placed anew in %u service%s (most reach another "
				       "backend with their next connection), the first: %s\n",
				       ctl->rehashed, hlb_plural(ctl->rehashed),
				       ctl->first_rehashed);
		if (ctl->moved.tables)
			hlb_buf_printf(
				&resp->body,
				"clients sent to another backend: %.2f%% of %s's, the most of "
				"%u table%s rebuilt (each in the log: moved=)\n",
				100.0 * ctl->moved.most, ctl->moved.most_service, ctl->moved.tables,
				hlb_plural(ctl->moved.tables));
		if (ctl->overrides)
			hlb_buf_printf(
				&resp->body,
				"kept over the config, as set at run time (hashlb ctl set; a "
				"restart drops it, and so does setting it to the config's value "
				"with hashlb ctl set: writing that value in the config does "
				"not): %u backend%s, the first: %s\n",
				ctl->overrides, hlb_plural(ctl->overrides), ctl->first_override);
		return;
	}
	if (ret == 0) {
		hlb_buf_printf(
			&resp->body,
			"{\"ok\":true,\"reloads_ok\":%" PRIu64
			",\"restart_only\":[%s%s%s],\"warnings\":%u,\"rehashed\":%u,"
			"\"overrides\":%u,\"moved\":{\"tables\":%u,\"most\":%.4f,\"service\":",
			ctl->reloads_ok, ctl->restart_admin ? "\"admin\"" : "",
			ctl->restart_admin && ctl->restart_workers ? "," : "",
			ctl->restart_workers ? "\"workers\"" : "", ctl->warnings, ctl->rehashed,
			ctl->overrides, ctl->moved.tables, ctl->moved.most);
		hlb_buf_json_str(&resp->body, ctl->moved.most_service);
		hlb_buf_puts(&resp->body, "}}\n");
		return;
	}
	resp->status = 422;
	if (text) {
		resp->ctype = "text/plain; charset=utf-8";
		char where[300];

		hlb_buf_printf(&resp->body, "%s: error: %s\n",
			       err_where(&err, ctl->config_path, where, sizeof(where)), err.msg);
		/* the rest of the file's errors counted, as hashlb check counts past its 20th:
		 * a line of its own, the first left as every reader of it parses it */
		if (ctl->last_reload_errors > 1)
			hlb_buf_printf(&resp->body,
				       "and %zu more error%s: hashlb check -c %s lists them\n",
				       ctl->last_reload_errors - 1,
				       hlb_plural(ctl->last_reload_errors - 1),
				       err.file ? err.file : ctl->config_path);
		hlb_buf_puts(&resp->body, "reload refused, the running config keeps serving\n");
		return;
	}
	hlb_buf_puts(&resp->body, "{\"ok\":false,\"error\":{\"file\":");
	hlb_buf_json_str(&resp->body, err.file ? err.file : "");
	hlb_buf_printf(&resp->body, ",\"line\":%d,\"column\":%d,\"message\":", err.line,
		       err.column);
	hlb_buf_json_str(&resp->body, err.msg);
	/* after the error, which ctl finds ending with its message */
	hlb_buf_printf(&resp->body, "},\"errors\":%zu}\n", ctl->last_reload_errors);
}

/*
 * POST /upgrade: an upgrade in place, as SIGUSR2 does. Answers 202 with the
 * new process's pid once it is started; it becomes ready (and this one
 * drains, its admin endpoint closing) or fails (GET /status says how).
 */
static void upgrade(struct hlb_control *ctl, struct hlb_http_resp *resp, bool text)
{
	int r = ctl->upgrade_start ? ctl->upgrade_start(ctl->daemon) : -EOPNOTSUPP;
	bool conflict = r == -EALREADY || r == -ESHUTDOWN || r == -ECHILD;
	const char *how = NULL;

	/* no process started: the daemon says how, with the file it could not run */
	if (r < 0 && !conflict && ctl->upgrade_state && ctl->upgrade_state(ctl->daemon, &how) < 0 &&
	    how) {
		resp_error(resp, 500, "cannot upgrade: the new hashlb %s", how);
		return;
	}
	if (r < 0) {
		resp_error(resp, conflict ? 409 : 500, "cannot upgrade: %s",
			   r == -EALREADY    ? "an upgrade is under way"
			   : r == -ESHUTDOWN ? "this hashlb is stopping"
			   : r == -ECHILD    ? HLB_UPGRADE_PID1 "; restart the container instead"
					     : strerror(-r));
		return;
	}
	resp->status = 202;
	if (text)
		hlb_buf_printf(&resp->body, "upgrading: pid %d started pid %d\n", (int)getpid(), r);
	else
		hlb_buf_printf(&resp->body, "{\"pid\":%d,\"new_pid\":%d}\n", (int)getpid(), r);
}

/*
 * GET /sockets: hand the listening sockets to the hashlb that replaces this
 * one (hlb_proxy_take_over()), so that it listens on the same sockets and
 * nothing waiting in their queues is lost when this one stops. A line per
 * socket: "PID FD ADDR SERVICE". Over the Unix socket the descriptors come with
 * the lines (SCM_RIGHTS; the file's mode says who may ask); over TCP only
 * the lines, and the new process copies each with pidfd_getfd(2), which
 * the kernel allows only to who may ptrace this one. A hashlb asks with
 * ?taker=ITS_PID: while that process lives, this one counts as having
 * handed over (kernel steering is then left attached for it, and /set is
 * refused). A request by hand, without it, hands nothing over; so does one
 * naming a process other than the one that asks (a GET that anything able
 * to make one, a page's <img> or a server fetching a URL, could send with
 * taker=1 would otherwise refuse every /set for as long as pid 1 runs).
 * With ?only=settings, the lines of run-time settings alone (what a taker
 * would carry over), read only: no socket, no descriptor, nothing logged of
 * a handover (hashlb ctl upgrade's pre-check reads them so).
 */
#define SOCKETS_MAX 4096
/* the control thread's: sockets()'s, sent or copied as it returns, and hlb_admin_fds()'s count */
static int sockets_fds[SOCKETS_MAX];
static const char *sockets_addrs[SOCKETS_MAX];

/* What a GET /sockets asks (sockets_refused()): only=settings, or the taker it names and
 * proves (else the pid it named that is not the asker, or the asker gone). */
struct sockets_ask {
	bool only;
	long taker, claimed, gone;
};

/*
 * Whether GET /sockets <req> is refused, and so it is in <resp> (a 400, or a 409 at PID 1);
 * else what it asks in *<a>. The handler's refusals, all of them, and hlb_admin_fds()'s too:
 * one that will be refused does not wait for room for descriptors it will not carry (it
 * waited, and got a 503 after the endpoint's timeout instead of its answer).
 */
static bool sockets_refused(const struct hlb_http_req *req, struct hlb_http_resp *resp,
			    struct sockets_ask *a)
{
	char buf[HLB_HTTP_VALUE_MAX + 1];
	const char *v;
	uint32_t pid = 0;

	*a = (struct sockets_ask){ 0 };
	/* its answer is the lines a taker reads, in text whatever is asked: format=text only
	 * makes a refusal text too (before, format=json was taken and answered in text). No
	 * JSON form: the lines are the handover itself, the descriptors riding on them and
	 * their numbers this process's, and who wants the listeners as data has /status. */
	if (hlb_http_param(req, "format", buf, sizeof(buf)) && !strcmp(buf, "json")) {
		resp_error(
			resp, 400,
			"GET /sockets answers in text only: its lines are what a new hashlb "
			"taking the listening sockets over reads, the descriptors riding on them; "
			"each service's listen and bound addresses are in GET /status (JSON): "
			"give format=text or no format here");
		return true;
	}
	v = hlb_http_param(req, "only", buf, sizeof(buf));
	if (v && strcmp(v, "settings")) {
		resp_error(resp, 400, "only takes settings (the run-time settings alone): not '%s'",
			   v);
		return true;
	}
	if (v) {
		/* a look, not a handover: a taker here would be named for sockets it
		 * never gets */
		if (hlb_http_param(req, "taker", buf, sizeof(buf))) {
			resp_error(resp, 400,
				   "only=settings hands nothing over: give taker without it");
			return true;
		}
		a->only = true;
		return false;
	}
	v = hlb_http_param(req, "taker", buf, sizeof(buf));
	if (v && (parse_u32(v, INT32_MAX, &pid) < 0 || pid == 0)) {
		resp_error(resp, 400, "taker must be a process id, in digits: not '%s'", v);
		return true;
	}
	a->taker = pid;
	if (a->taker && hlb_fdpass_peer_gone(req->fd)) {
		/* it gave up waiting (this process stopped or busy for 10 s) and bound
		 * sockets of its own: it reads nothing of this, and hands nothing back */
		a->gone = a->taker;
		a->taker = 0;
	} else if (a->taker && !hlb_fdpass_peer_is(req->fd, (pid_t)a->taker)) {
		a->claimed = a->taker;
		a->taker = 0;
	} else if (a->taker && getpid() == 1) {
		/* As SIGUSR2 is refused: a taker proven to be the asker is a process of this
		 * PID namespace (SO_PEERCRED gives 0 for one outside it; over TCP its pid is
		 * read in this one's /proc), which the kernel kills when this one exits. */
		resp_error(resp, 409,
			   "cannot hand the listening sockets over to pid %ld: " HLB_UPGRADE_PID1
			   "; restart the container instead",
			   a->taker);
		return true;
	}
	return false;
}

static void sockets(struct hlb_control *ctl, const struct hlb_http_req *req,
		    struct hlb_http_resp *resp)
{
	int *fds = sockets_fds;
	const char **addrs = sockets_addrs;
	struct sockets_ask a;
	long taker, claimed, gone;
	uint32_t n;

	if (sockets_refused(req, resp, &a)) {
		if (a.taker && ctl->log) { /* at PID 1 */
			char kv[320];

			snprintf(kv, sizeof(kv),
				 "taker=%ld reason=\"" HLB_UPGRADE_PID1
				 "\" note=\"restart the container, or run hashlb under an init "
				 "(docker run --init, tini) to hand over\"",
				 a.taker);
			ctl->log(ctl->log_arg, HLB_LOG_WARN, "listening sockets not handed over",
				 kv);
		}
		return;
	}
	if (a.only) {
		resp->ctype = "text/plain; charset=utf-8";
		hlb_control_handover(ctl, &resp->body);
		return;
	}
	taker = a.taker;
	claimed = a.claimed;
	gone = a.gone;
	n = ctl->listen_fds ? ctl->listen_fds(ctl->daemon, (pid_t)taker, fds, addrs, SOCKETS_MAX)
			    : 0;
	if (!n) {
		resp_error(resp, 409, "no listening sockets to hand over");
		return;
	}
	resp->ctype = "text/plain; charset=utf-8";
	for (uint32_t i = 0; i < n; i++)
		hlb_buf_printf(&resp->body, HLB_FDPASS_LINE, (int)getpid(), fds[i], addrs[i]);
	hlb_control_handover(ctl, &resp->body); /* what was set at run time, carried on */
	if (req->local) {
		resp->fds = fds;
		resp->n_fds = n;
	}
	if (ctl->log) {
		const char *over = req->local ? "unix" : "tcp";
		enum hlb_log_level level = HLB_LOG_INFO;
		const char *msg = "listening sockets sent, not handed over";
		char kv[320];

		/* What happened, not "handed over" whatever did: the lines (over Unix the
		 * descriptors with them) went to the asker, but only a taker proven to be the
		 * asker makes this one count as handed over (steering left attached, /set
		 * refused). It said "handed over" with a note, or nothing, that it was not. */
		if (gone) { /* the asker gave up: nobody reads the answer */
			msg = "listening sockets not handed over";
			snprintf(
				kv, sizeof(kv),
				"count=%u over=%s taker=0 gone=%ld reason=\"the process asking gave "
				"up waiting\"",
				n, over, gone);
		} else if (claimed) {
			level = HLB_LOG_WARN; /* a taker anyone could write: say who was named */
			snprintf(kv, sizeof(kv),
				 "count=%u over=%s taker=0 claimed=%ld reason=\"pid %ld is not the "
				 "process asking, or not one that may copy the sockets (root or "
				 "hashlb's user): this hashlb does not count as handed over, /set "
				 "applies and a stop detaches kernel steering\"",
				 n, over, claimed, claimed);
		} else if (!taker) {
			snprintf(kv, sizeof(kv),
				 "count=%u over=%s taker=0 reason=\"no taker named (a request by "
				 "hand): this hashlb does not count as handed over\"",
				 n, over);
		} else {
			msg = "listening sockets handed over";
			snprintf(kv, sizeof(kv), "count=%u over=%s taker=%ld", n, over, taker);
		}
		ctl->log(ctl->log_arg, level, msg, kv);
	}
}

/*
 * Whether every parameter of a request is one it takes, once; if not, a 400
 * naming it: a mistyped one (wieght=3) must not leave the rest (state=drain)
 * applied without it, nor one given twice (backend=a&backend=b) be applied to
 * the first as if the other were not; nor a GET be answered as if it were not
 * there (/table?servce=web, the table of another service, or a refusal that
 * says to give a service=).
 */
static bool params_known(const struct hlb_http_req *req, struct hlb_http_resp *resp,
			 const char *const *known)
{
	char name[72], list[160] = "";
	size_t o = 0;

	if (hlb_http_param_unknown(req, known, name, sizeof(name))) {
		for (size_t k = 0; known[k] && o < sizeof(list); k++)
			o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", k ? ", " : "",
					      known[k]);
		if (!known[0])
			snprintf(list, sizeof(list), "none");
		resp_error(resp, 400, "unknown parameter '%s': %s %s takes %s", name, req->method,
			   req->path, list);
		return false;
	}
	/* after the unknown ones: the names left are the few known, so this pass over pairs
	 * ends at once on 16 KiB of parameters */
	if (hlb_http_param_repeated(req, name, sizeof(name))) {
		resp_error(resp, 400, "parameter '%s' given twice: give it once", name);
		return false;
	}
	return true;
}

/*
 * Whether format=, if given, is one the endpoint has: json (the default) or text. Before, any
 * other (format=xml) was answered in JSON as if it were not there.
 */
static bool format_known(const struct hlb_http_req *req, struct hlb_http_resp *resp)
{
	char v[HLB_HTTP_VALUE_MAX + 1];

	if (!hlb_http_param(req, "format", v, sizeof(v)) || !strcmp(v, "json") ||
	    !strcmp(v, "text"))
		return true;
	resp_error(resp, 400,
		   "format '%s' is not one it has: give format=json (the default) or "
		   "format=text",
		   v);
	return false;
}

static const char *const metrics_params[] = { "name[]", NULL };
static const char *const plain_params[] = { "format", NULL };
static const char *const table_params[] = { "service", "format", NULL };
static const char *const lookup_params[] = { "service", "client", "vip", "format", NULL };
static const char *const clients_params[] = { "service", "top", "format", NULL };
static const char *const sockets_params[] = { "taker", "only", "format", NULL };
static const char *const set_params[] = { "service",	     "backend", "state", "weight",
					  "max_connections", "format",	NULL };
static const char *const close_params[] = { "service", "backend", "format", NULL };
static const char *const reload_params[] = { "pid", "format", NULL };

/*
 * The endpoint's paths, the method each takes (GET, and HEAD as GET, for those that change
 * nothing; POST for the others) and the parameters it takes: a GET refuses one it does not
 * take as a POST does (/status?servce=web, a mistyped name, was answered as if it were not
 * there). /metrics is the exception (<any>): it takes name[] and ignores every other, as
 * Prometheus' exporters do, since a scrape job's params: (module=, format=) go to every
 * target of the job; refused, the scrape got a 400 and no sample.
 */
static const struct admin_route {
	const char *path;
	bool post;
	const char *const *params;
	bool any;
} admin_routes[] = {
	{ "/metrics", false, metrics_params, true },  { "/status", false, plain_params, false },
	{ "/table", false, table_params, false },     { "/lookup", false, lookup_params, false },
	{ "/clients", false, clients_params, false }, { "/sockets", false, sockets_params, false },
	{ "/", false, plain_params, false },	      { "/set", true, set_params, false },
	{ "/close", true, close_params, false },      { "/reload", true, reload_params, false },
	{ "/upgrade", true, plain_params, false },
};

/*
 * GET /: a line naming the requests, for whoever points curl or a browser at the endpoint
 * (text unless format=json asks otherwise); with format=json, each path, its method and the
 * parameters it takes, from admin_routes (before, format=json was answered in text, and the
 * line left /set's max_connections out).
 */
static void admin_index(const struct hlb_http_req *req, struct hlb_http_resp *resp)
{
	char v[HLB_HTTP_VALUE_MAX + 1];
	size_t n = sizeof(admin_routes) / sizeof(admin_routes[0]);

	if (!hlb_http_param(req, "format", v, sizeof(v)) || strcmp(v, "json")) {
		resp->ctype = "text/plain; charset=utf-8";
		hlb_buf_puts(&resp->body,
			     "hashlb admin: GET /metrics /status /table /lookup?client=ADDR"
			     " /clients?top=N,"
			     " /sockets (the listening sockets, for a new hashlb to take over;"
			     " ?only=settings: its run-time settings alone, nothing handed over),"
			     " POST /set?backend=B&state=S|weight=W|max_connections=N"
			     " /close?backend=B /reload[?pid=N] /upgrade\n");
		return;
	}
	hlb_buf_puts(&resp->body, "{\"endpoints\":[");
	for (size_t i = 0; i < n; i++) {
		const struct admin_route *r = &admin_routes[i];

		hlb_buf_printf(&resp->body, "%s{\"path\":\"%s\",\"method\":\"%s\",\"params\":[",
			       i ? "," : "", r->path, r->post ? "POST" : "GET");
		for (size_t k = 0; r->params[k]; k++)
			hlb_buf_printf(&resp->body, "%s\"%s\"", k ? "," : "", r->params[k]);
		hlb_buf_puts(&resp->body, "]}");
	}
	hlb_buf_puts(&resp->body, "]}\n");
}

/*
 * GET /metrics: the exposition, of the families its name[] parameters name if it has any
 * (name[]=hashlb_backend_up&name[]=hashlb_service_backends_up, client_python's filter: a
 * dashboard's scrape of a few families out of 10 MB); its other parameters ignored.
 */
static void metrics(struct hlb_control *ctl, const struct hlb_http_req *req,
		    struct hlb_http_resp *resp)
{
	char v[HLB_HTTP_VALUE_MAX + 1];
	struct hlb_buf names = { 0 };
	size_t pos = 0;

	/* an empty one (a templated name[]=$X, X unset) is left out, as client_python's
	 * parse_qs() leaves it: with no other, the whole exposition */
	while (hlb_http_param_next(req, "name[]", &pos, v, sizeof(v)))
		if (v[0])
			hlb_buf_put(&names, v, strlen(v) + 1);
	resp->ctype = "text/plain; version=0.0.4; charset=utf-8";
	if (names.oom)
		resp->body.oom = true;
	else
		hlb_metrics_render(ctl, names.p, names.len, &resp->body);
	hlb_buf_free(&names);
}

/*
 * The route of <req>, or NULL with <resp> its answer: a path the endpoint does not have 404
 * (whatever its parameters: format=xml on it is not a 400), a method the path does not take
 * 405. Known from the request's head alone.
 */
static const struct admin_route *admin_route(const struct hlb_http_req *req,
					     struct hlb_http_resp *resp)
{
	const struct admin_route *route = NULL;

	for (size_t i = 0; i < sizeof(admin_routes) / sizeof(admin_routes[0]) && !route; i++)
		if (!strcmp(req->path, admin_routes[i].path))
			route = &admin_routes[i];
	if (!route) {
		resp_error(resp, 404, "no such endpoint: %s", req->path);
		return NULL;
	}
	if (strcmp(req->method, route->post ? "POST" : "GET")) {
		resp_error(resp, 405, "%s not allowed on %s: %s it", req->method, req->path,
			   route->post ? "POST" : "GET");
		resp->allow = route->post ? "POST" : "GET, HEAD"; /* as RFC 9110 asks of a 405 */
		return NULL;
	}
	return route;
}

/*
 * The route of <req>, or NULL with its refusal in <resp>: no such path or method, a
 * parameter it does not take or one too long, a format it has not. Every request's, before
 * its handler runs.
 */
static const struct admin_route *admin_admitted(const struct hlb_http_req *req,
						struct hlb_http_resp *resp)
{
	const struct admin_route *route = admin_route(req, resp);
	char why[128];

	if (!route)
		return NULL;
	if (!route->any && !params_known(req, resp, route->params))
		return NULL;
	/* only the values of the parameters it takes: /metrics ignores the others, whatever
	 * their length (a 300-byte module= of a scrape job was a 400, no sample) */
	if (hlb_http_param_refused(req, route->params, why, sizeof(why))) {
		resp_error(resp, 400, "%s", why);
		return NULL;
	}
	if (!route->any && !format_known(req, resp))
		return NULL;
	return route;
}

unsigned hlb_admin_fds(void *arg, const struct hlb_http_req *req)
{
	struct hlb_control *ctl = arg;
	struct hlb_http_resp refusal = { 0 };
	struct sockets_ask a;
	bool hands;

	/* a GET /sockets that hands the sockets (not only=settings, which sends none, nor one the
	 * handler refuses: a 400 or 409 is its answer, not a 503 after a wait for room): as many
	 * as it would send now, for the endpoint to wait for room for their copies before it
	 * asks (a reload between the two may add some: those wait in poll() if there is none) */
	if (strcmp(req->method, "GET") || strcmp(req->path, "/sockets") || !ctl->listen_fds)
		return 0;
	hands = admin_admitted(req, &refusal) && !sockets_refused(req, &refusal, &a) && !a.only;
	hlb_buf_free(&refusal.body);
	return hands ? ctl->listen_fds(ctl->daemon, 0, sockets_fds, sockets_addrs, SOCKETS_MAX) : 0;
}

bool hlb_admin_head(void *arg, const struct hlb_http_req *req, struct hlb_http_resp *resp)
{
	(void)arg;
	if (want_text(req)) /* of the query: the body, not come, may say it too */
		resp->ctype = "text/plain; charset=utf-8";
	return !admin_route(req, resp);
}

void hlb_admin_handle(void *arg, const struct hlb_http_req *req, struct hlb_http_resp *resp)
{
	struct hlb_control *ctl = arg;
	const struct admin_route *route;
	bool text = want_text(req);
	struct hlb_pool_service *s;
	const char *path = req->path;

	if (text)
		resp->ctype = "text/plain; charset=utf-8";
	route = admin_admitted(req, resp);
	if (!route)
		return;
	if (!strcmp(path, "/metrics")) {
		metrics(ctl, req, resp);
	} else if (!strcmp(path, "/status")) {
		if (text)
			status_text(ctl, &resp->body);
		else
			status_json(ctl, &resp->body);
	} else if (!strcmp(path, "/table")) {
		char svc[HLB_HTTP_VALUE_MAX + 1];
		uint32_t n = hlb_pool_service_count(ctl->pool);

		/* text, no service named: every service's, as hashlb check prints a
		 * config's (JSON stays one object, a service's) */
		if (text && n > 1 && !hlb_http_param(req, "service", svc, sizeof(svc))) {
			for (uint32_t i = 0; i < n; i++) {
				if (i)
					hlb_buf_puts(&resp->body, "\n");
				table_render(hlb_pool_service_at(ctl->pool, i), true, &resp->body);
			}
		} else if ((s = req_service(ctl, req, resp))) {
			table_render(s, text, &resp->body);
		}
	} else if (!strcmp(path, "/lookup")) {
		if ((s = req_service(ctl, req, resp)))
			lookup(s, req, resp, text);
	} else if (!strcmp(path, "/clients")) {
		if ((s = req_service(ctl, req, resp)))
			clients_top(s, req, resp, text);
	} else if (!strcmp(path, "/set")) {
		if ((s = req_backend_service(ctl, req, true, resp)))
			set_backend(ctl, s, req, resp, text);
	} else if (!strcmp(path, "/close")) {
		if ((s = req_backend_service(ctl, req, false, resp)))
			close_backend(ctl, s, req, resp, text);
	} else if (!strcmp(path, "/reload")) {
		reload(ctl, req, resp, text);
	} else if (!strcmp(path, "/sockets")) {
		sockets(ctl, req, resp);
	} else if (!strcmp(path, "/upgrade")) {
		upgrade(ctl, resp, text);
	} else { /* "/" */
		admin_index(req, resp);
	}
}
