// SPDX-License-Identifier: MIT
/*
 * GET /metrics: the Prometheus text exposition format (version 0.0.4).
 * Every family is written whole (HELP, TYPE, then all its samples), as the
 * format requires; counters end in _total; label values are escaped.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "hashlb/steer.h"

#include "check.h"
#include "control.h"
#include "log.h"

enum bfield {
	B_ACTIVE,
	B_TOTAL,
	B_BYTES_IN,
	B_BYTES_OUT,
	B_CONNECT_FAIL,
	B_CONNECT_TIMEOUT,
	B_RETRIES,
	B_SPLICES,
	B_BYTES_SPLICED,
	B_FULL,
	B_MAX_CONNS,
	B_UP,
	B_SHARE,
	B_HEALTHY,
	B_WEIGHT,
	B_SLOW_START,
	B_CHECKS_OK,
	B_CHECKS_FAILED,
	B_CHECKS_SKIPPED,
	B_CHECK_LATENCY,
	B_FLAPS,
	B_PASSIVE_HOLDS,
	B_PASSIVE_HOLD_LEFT,
	B_MAX
};

/* A metric family: its name, Prometheus type and HELP text. */
struct family_desc {
	const char *name, *type, *help;
};

static const struct family_desc bfamilies[B_MAX] = {
	[B_ACTIVE] = { "hashlb_backend_active_connections", "gauge",
		       "Connections to the backend open now." },
	[B_TOTAL] = { "hashlb_backend_connections_total", "counter",
		      "Connections established to the backend." },
	[B_BYTES_IN] = { "hashlb_backend_sent_bytes_total", "counter",
			 "Bytes forwarded from clients to the backend." },
	[B_BYTES_OUT] = { "hashlb_backend_received_bytes_total", "counter",
			  "Bytes forwarded from the backend to clients." },
	[B_CONNECT_FAIL] = { "hashlb_backend_connect_failures_total", "counter",
			     "Connects to the backend refused or failed." },
	[B_CONNECT_TIMEOUT] = { "hashlb_backend_connect_timeouts_total", "counter",
				"Connects to the backend that timed out." },
	[B_RETRIES] = { "hashlb_backend_retries_total", "counter",
			"Connections that moved on from this backend to the next of their list." },
	[B_SPLICES] = { "hashlb_backend_splices_total", "counter",
			"Directions of connections that moved to splice (bulk streams)." },
	[B_BYTES_SPLICED] = { "hashlb_backend_spliced_bytes_total", "counter",
			      "Bytes (of sent and received) forwarded by splice, not copied." },
	[B_FULL] = { "hashlb_backend_full_total", "counter",
		     "Clients passed to their next backend or the queue, or closed if neither was "
		     "left: this one was at max_connections." },
	[B_MAX_CONNS] = { "hashlb_backend_max_connections", "gauge",
			  "The backend's max_connections; 0 = unlimited." },
	[B_UP] = { "hashlb_backend_up", "gauge",
		   "1 if the backend takes new clients, as the published table says: 0 for a "
		   "standby backup, weight 0, down, drain or maint, and one a reload removed." },
	[B_SHARE] = { "hashlb_backend_table_share", "gauge",
		      "Fraction of the service's published table (its slots, or its ring's hash "
		      "space) the backend owns: 0 out of it, as hashlb_backend_up 0; the "
		      "backends' add up to 1 while one takes clients." },
	[B_HEALTHY] = { "hashlb_backend_healthy", "gauge",
			"1 if the health checks say up (flap damping included)." },
	[B_WEIGHT] = { "hashlb_backend_weight", "gauge", "The backend's weight." },
	[B_SLOW_START] = { "hashlb_backend_slow_start_ratio", "gauge",
			   "Fraction of its clients a slow-starting backend admits (1 = all)." },
	[B_CHECKS_OK] = { "hashlb_backend_checks_passed_total", "counter",
			  "Active health checks that passed." },
	[B_CHECKS_FAILED] = { "hashlb_backend_checks_failed_total", "counter",
			      "Active health checks that failed." },
	[B_CHECKS_SKIPPED] = { "hashlb_backend_checks_skipped_total", "counter",
			       "Active health checks not made for a fault of hashlb's host (the "
			       "source address gone, no fd, no local port): health kept." },
	[B_CHECK_LATENCY] = { "hashlb_backend_check_latency_seconds", "gauge",
			      "Time the last passed health check took: its connect, and with send/expect "
			      "the answer too." },
	[B_FLAPS] = { "hashlb_backend_flaps_total", "counter",
		      "Times the backend's health went down: failed checks, or failed connects "
		      "of the forwarder (passive)." },
	[B_PASSIVE_HOLDS] = { "hashlb_backend_passive_holds_total", "counter",
			      "Times passive-only health (checks off) held the backend out for "
			      "its failed connects." },
	[B_PASSIVE_HOLD_LEFT] = { "hashlb_backend_passive_hold_remaining_seconds", "gauge",
				  "Time left of the backend's passive-only hold, after which it is "
				  "tried again; 0 if not held." },
};

/* The families a scrape asks for (name[]): <len> bytes of names back to back, each ending
 * in its NUL; none (len 0): every one. */
struct wanted {
	const char *names;
	size_t len;
};

/* Whether <w> asks for family <name> of <type>: by its name, or for a histogram by a
 * sample's (NAME_bucket, NAME_sum, NAME_count), as client_python's name[] filter takes them. */
static bool family_wanted(const struct wanted *w, const char *name, const char *type)
{
	static const char *const hist[] = { "", "_bucket", "_sum", "_count" };
	size_t nl = strlen(name), kinds = strcmp(type, "histogram") ? 1 : 4;

	if (!w->len)
		return true;
	for (const char *n = w->names; n < w->names + w->len; n += strlen(n) + 1)
		for (size_t k = 0; k < kinds; k++)
			if (!strncmp(n, name, nl) && !strcmp(n + nl, hist[k]))
				return true;
	return false;
}

/* The HELP and TYPE lines of a family. */
static void family_head(struct hlb_buf *o, const char *name, const char *type, const char *help)
{
	hlb_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The HELP and TYPE lines of a family, if <w> asks for it: whether it does (its samples are
 * written only then, so that a scrape of a few families renders only those). */
static bool family(struct hlb_buf *o, const struct wanted *w, const char *name, const char *type,
		   const char *help)
{
	if (!family_wanted(w, name, type))
		return false;
	family_head(o, name, type, help);
	return true;
}

static void labels2(struct hlb_buf *o, const char *name, const char *svc, const char *backend)
{
	hlb_buf_printf(o, "%s{service=", name);
	hlb_buf_label(o, svc);
	if (backend) {
		hlb_buf_puts(o, ",backend=");
		hlb_buf_label(o, backend);
	}
	hlb_buf_puts(o, "}");
}

/*
 * One series of the backend families: backend <j> of <s>'s configured
 * backends then of those a reload removed (hlb_pool_service_series_at()): a
 * removed one keeps its series while it drains, so that the backends'
 * connections add up to the service's, and its counters' a while after, so
 * that a scrape reads its last counts. Its counters are read once a scrape,
 * its label set escaped once: the families repeat them, a line each.
 */
struct series {
	const struct hlb_pool_service *s;
	const struct hlb_pool_backend *b;
	uint32_t j;
	/* in struct scrape's <labels>: '{service="S",backend="B"' at <lab>, <lab_len> bytes,
	 * then for a removed one the address it drains from (the same name may be back at
	 * another meanwhile), ',draining="ADDR"': <lab_drain> bytes in all */
	size_t lab, lab_len, lab_drain;
	struct hlb_pool_totals t; /* those carried by an upgrade in place included */
	double share; /* of the published table (hlb_pool_service_share()) */
};

/* One service of the service families, the same way. */
struct svc_series {
	const struct hlb_pool_service *s;
	size_t lab, lab_len; /* '{service="S"' */
	struct hlb_service_counters c; /* those carried by an upgrade in place included */
};

struct scrape {
	struct hlb_control *ctl;
	bool read; /* scrape_need() */
	struct hlb_buf labels;
	struct series *v;
	size_t n;
	struct svc_series *sv;
	uint32_t n_svcs;
};

static void scrape_free(struct scrape *sc)
{
	hlb_buf_free(&sc->labels);
	free(sc->v);
	free(sc->sv);
}

/* Read every series' counters and escape its labels; -ENOMEM. */
static int scrape_read(struct hlb_control *ctl, struct scrape *sc)
{
	char addr[HASHLB_ADDR_STRLEN];
	size_t n = 0;

	*sc = (struct scrape){ .ctl = ctl, .n_svcs = hlb_pool_service_count(ctl->pool) };
	for (uint32_t i = 0; i < sc->n_svcs; i++)
		n += hlb_pool_service_series(hlb_pool_service_at(ctl->pool, i));
	sc->v = calloc(n ? n : 1, sizeof(*sc->v));
	sc->sv = calloc(sc->n_svcs ? sc->n_svcs : 1, sizeof(*sc->sv));
	if (!sc->v || !sc->sv)
		goto err_free;
	for (uint32_t i = 0; i < sc->n_svcs; i++) {
		struct hlb_pool_service *s = hlb_pool_service_at(ctl->pool, i);
		struct svc_series *y = &sc->sv[i];

		y->s = s;
		y->lab = sc->labels.len;
		hlb_buf_puts(&sc->labels, "{service=");
		hlb_buf_label(&sc->labels, s->cfg->name);
		y->lab_len = sc->labels.len - y->lab;
		hlb_pool_service_totals(s, &y->c);
		for (uint32_t j = 0; j < hlb_pool_service_series(s); j++) {
			struct series *x = &sc->v[sc->n++];

			x->s = s;
			x->b = hlb_pool_service_series_at(s, j);
			x->j = j;
			x->lab = sc->labels.len;
			hlb_buf_puts(&sc->labels, "{service=");
			hlb_buf_label(&sc->labels, s->cfg->name);
			hlb_buf_puts(&sc->labels, ",backend=");
			hlb_buf_label(&sc->labels, x->b->rt->name);
			x->lab_len = sc->labels.len - x->lab;
			if (hlb_pool_backend_drain_deadline(x->b)) {
				hashlb_addr_format(&x->b->rt->addr, addr, sizeof(addr));
				hlb_buf_puts(&sc->labels, ",draining=");
				hlb_buf_label(&sc->labels, addr);
			}
			x->lab_drain = sc->labels.len - x->lab;
			hlb_pool_backend_totals(x->b, &x->t);
			x->share = j < s->n_backends ? hlb_pool_service_share(s, j) : 0.0;
		}
	}
	if (sc->labels.oom)
		goto err_free;
	return 0;

err_free:
	scrape_free(sc);
	*sc = (struct scrape){ .ctl = ctl };
	return -ENOMEM;
}

/*
 * The family of the series of <sc> (read at the first one a scrape asks for: a scrape of
 * other families reads no counter and escapes no label), its HELP and TYPE written if <w>
 * asks for it: whether to write its samples (not if the series could not be read: <o>
 * out of memory).
 */
static bool scrape_family(struct scrape *sc, struct hlb_buf *o, const struct wanted *w,
			  const char *name, const char *type, const char *help)
{
	if (!family_wanted(w, name, type))
		return false;
	if (!sc->read && scrape_read(sc->ctl, sc) < 0) {
		o->oom = true;
		return false;
	}
	sc->read = true;
	family_head(o, name, type, help); /* asked for: known above */
	return true;
}

/* <name>{labels of <x> (draining="ADDR" too if <drain>), the set left open. */
static void series_open(struct hlb_buf *o, const char *name, size_t name_len,
			const struct scrape *sc, const struct series *x, bool drain)
{
	hlb_buf_put(o, name, name_len);
	hlb_buf_put(o, sc->labels.p + x->lab, drain ? x->lab_drain : x->lab_len);
}

/* " <v>\n", <v> in the fewest digits that read back as it (hlb_buf_shortest()). */
static void value_num(struct hlb_buf *o, double v)
{
	hlb_buf_put(o, " ", 1);
	hlb_buf_shortest(o, v);
	hlb_buf_put(o, "\n", 1);
}

/* " <v>\n", <v> as "%" PRIu64 writes it. */
static void value_u64(struct hlb_buf *o, uint64_t v)
{
	hlb_buf_put(o, " ", 1);
	hlb_buf_u64(o, v);
	hlb_buf_put(o, "\n", 1);
}

/* Field <f> of series <x>: backend <j> of <s> (past its backends: one a reload removed). */
static double bvalue(const struct series *x, enum bfield f)
{
	const struct hlb_pool_service *s = x->s;
	const struct hlb_pool_backend *b = x->b;
	const struct hlb_backend_counters *c = &x->t.c;
	uint32_t j = x->j;

	switch (f) {
	case B_ACTIVE:
		return (double)c->active;
	case B_TOTAL:
		return (double)c->total;
	case B_BYTES_IN:
		return (double)c->bytes_in;
	case B_BYTES_OUT:
		return (double)c->bytes_out;
	case B_CONNECT_FAIL:
		return (double)c->connect_fail;
	case B_CONNECT_TIMEOUT:
		return (double)c->connect_timeout;
	case B_RETRIES:
		return (double)c->retries;
	case B_SPLICES:
		return (double)c->splices;
	case B_BYTES_SPLICED:
		return (double)c->bytes_spliced;
	case B_FULL:
		return (double)c->full;
	case B_MAX_CONNS:
		return atomic_load(&b->rt->max_conns);
	case B_UP: /* the table's word: a standby backup, weight 0 or one removed take none */
		return j < s->n_backends && hlb_pool_takes_clients(hlb_pool_snapshot(s), j);
	case B_SHARE:
		return x->share;
	case B_HEALTHY:
		return b->health.up;
	case B_WEIGHT:
		return b->rt->weight;
	case B_SLOW_START:
		return (double)atomic_load(&b->rt->admit) / 65536.0;
	case B_CHECKS_OK:
		return (double)x->t.checks_ok;
	case B_CHECKS_FAILED:
		return (double)x->t.checks_failed;
	case B_CHECKS_SKIPPED:
		return (double)x->t.checks_skipped;
	case B_CHECK_LATENCY:
		return (double)b->check_latency_ns / 1e9;
	case B_FLAPS:
		return (double)x->t.flaps;
	case B_PASSIVE_HOLDS:
		return (double)x->t.passive_holds;
	case B_PASSIVE_HOLD_LEFT: /* one a reload removed is held no more */
		return j < s->n_backends
			       ? (double)hlb_pool_backend_hold_left_ms(b, hlb_now_ms()) / 1e3
			       : 0.0;
	default:
		return 0;
	}
}

/*
 * hashlb_backend_connect_seconds: a histogram of the data plane's connects
 * that succeeded, from submission to completion as the client waits for
 * them: cumulative buckets, +Inf, then _sum and _count (the buckets' total,
 * so the two always agree).
 */
static void connect_histogram(struct scrape *sc, const struct wanted *w, struct hlb_buf *o)
{
	static const char bucket[] = "hashlb_backend_connect_seconds_bucket";
	static const char sum[] = "hashlb_backend_connect_seconds_sum";
	static const char count[] = "hashlb_backend_connect_seconds_count";
	char le[HLB_CONNECT_BUCKETS + 1][32];
	size_t le_len[HLB_CONNECT_BUCKETS + 1];

	for (int k = 0; k <= HLB_CONNECT_BUCKETS; k++) {
		int n = k < HLB_CONNECT_BUCKETS ? snprintf(le[k], sizeof(le[k]), ",le=\"%g\"}",
							   hlb_connect_bucket_us[k] / 1e6)
						: snprintf(le[k], sizeof(le[k]), ",le=\"+Inf\"}");

		le_len[k] = n > 0 ? (size_t)n : 0;
	}
	if (!scrape_family(
		    sc, o, w, "hashlb_backend_connect_seconds", "histogram",
		    "Time the connects to the backend that succeeded took, as clients waited "
		    "for them."))
		return;
	for (size_t i = 0; i < sc->n; i++) {
		const struct series *x = &sc->v[i];
		uint64_t cum = 0;

		for (int k = 0; k <= HLB_CONNECT_BUCKETS; k++) {
			cum += x->t.c.connect_hist[k];
			series_open(o, bucket, sizeof(bucket) - 1, sc, x, true);
			hlb_buf_put(o, le[k], le_len[k]);
			value_u64(o, cum);
		}
		series_open(o, sum, sizeof(sum) - 1, sc, x, true);
		hlb_buf_put(o, "}", 1);
		value_num(o, (double)x->t.c.connect_us_sum / 1e6);
		series_open(o, count, sizeof(count) - 1, sc, x, true);
		hlb_buf_put(o, "}", 1);
		value_u64(o, cum);
	}
}

static void backend_families(struct scrape *sc, const struct wanted *w, struct hlb_buf *o)
{
	static const char admin_state[] = "hashlb_backend_admin_state";

	for (int f = 0; f < B_MAX; f++) {
		size_t name_len = strlen(bfamilies[f].name);
		bool gauge = !strcmp(bfamilies[f].type, "gauge");

		if (!scrape_family(sc, o, w, bfamilies[f].name, bfamilies[f].type,
				   bfamilies[f].help))
			continue;
		for (size_t i = 0; i < sc->n; i++) {
			const struct series *x = &sc->v[i];

			/* drained, kept for its counts: a gauge of it (its last
			 * health, say) would only keep an alert firing */
			if (x->b->drained_ms && gauge)
				continue;
			series_open(o, bfamilies[f].name, name_len, sc, x, true);
			hlb_buf_put(o, "}", 1);
			value_num(o, bvalue(x, f));
		}
	}
	connect_histogram(sc, w, o);
	/* Admin state as one gauge per state, the usual shape for an enum. */
	if (!scrape_family(sc, o, w, admin_state, "gauge",
			   "1 for the backend's admin state (ready, drain, maint), 0 for the "
			   "others."))
		return;
	for (size_t i = 0; i < sc->n; i++) {
		const struct series *x = &sc->v[i];

		if (x->j >= x->s->n_backends) /* removed by a reload: no admin state */
			continue;
		for (int st = 0; st < HASHLB_ADMIN_MAX; st++) {
			series_open(o, admin_state, sizeof(admin_state) - 1, sc, x, false);
			hlb_buf_puts(o, ",state=\"");
			hlb_buf_puts(o, hashlb_admin_state_name(st));
			hlb_buf_put(o, "\"}", 2);
			value_u64(o, x->b->admin == (enum hashlb_admin_state)st);
		}
	}
}

/*
 * Connections hashlb closed because of their backend, by reason: "admin"
 * (hashlb ctl close), "down" (health.close_on_down), "backup" (a backup's
 * close_on_return, another backend back): the ends closed, backend_down
 * and primary_up of ends_family(), under the names this family had first.
 */
static void closed_family(struct scrape *sc, const struct wanted *w, struct hlb_buf *o)
{
	static const struct {
		enum hlb_end end;
		const char *label; /* the label, closing the set */
	} reasons[] = { { HLB_END_CLOSED, ",reason=\"admin\"}" },
			{ HLB_END_BACKEND_DOWN, ",reason=\"down\"}" },
			{ HLB_END_PRIMARY_UP, ",reason=\"backup\"}" } };
	static const char name[] = "hashlb_backend_closed_connections_total";

	if (!scrape_family(sc, o, w, name, "counter",
			   "Connections hashlb closed because of their backend: reason admin "
			   "(hashlb ctl close), down (health.close_on_down) or backup "
			   "(close_on_return)."))
		return;
	for (size_t i = 0; i < sc->n; i++)
		for (size_t k = 0; k < sizeof(reasons) / sizeof(reasons[0]); k++) {
			series_open(o, name, sizeof(name) - 1, sc, &sc->v[i], true);
			hlb_buf_puts(o, reasons[k].label);
			value_u64(o, sc->v[i].t.c.ends[reasons[k].end]);
		}
}

/* Established connections ended, by how: end="..." as the connection log's end=. */
static void ends_family(struct scrape *sc, const struct wanted *w, struct hlb_buf *o)
{
	static const char name[] = "hashlb_backend_connection_ends_total";

	if (!scrape_family(sc, o, w, name, "counter",
			   "Connections established to the backend that ended, by end (the "
			   "connection log's end=): done, client_reset, backend_reset, "
			   "idle_timeout, error, drain_timeout, closed, backend_down, primary_up."))
		return;
	for (size_t i = 0; i < sc->n; i++)
		for (int k = 0; k < HLB_END_MAX; k++) {
			series_open(o, name, sizeof(name) - 1, sc, &sc->v[i], true);
			hlb_buf_puts(o, ",end=\"");
			hlb_buf_puts(o, hlb_end_names[k]);
			hlb_buf_put(o, "\"}", 2);
			value_u64(o, sc->v[i].t.c.ends[k]);
		}
}

static void service_families(struct scrape *sc, const struct wanted *w, struct hlb_buf *o)
{
	static const struct family_desc fam[] = {
		{ "hashlb_service_table_generation", "gauge",
		  "Generation of the service's published table (one counter for the process: "
		  "every service's rebuild advances it)." },
		{ "hashlb_service_table_info", "gauge",
		  "The published table: scheme and fingerprint as labels, value 1." },
		{ "hashlb_service_rebuilds_total", "counter", "Tables built and published." },
		{ "hashlb_service_rebuild_failures_total", "counter",
		  "Table builds that failed (the previous table kept serving)." },
		{ "hashlb_service_rebuild_seconds_total", "counter",
		  "Time spent building and publishing tables." },
		{ "hashlb_service_rebuild_last_seconds", "gauge",
		  "Duration of the last build and publish." },
		{ "hashlb_service_backends_up", "gauge", "Backends taking new clients." },
		{ "hashlb_service_backends", "gauge", "Configured backends." },
		{ "hashlb_service_lookups_total", "counter",
		  "Connections accepted and hashed to be routed (denied and client-limited ones "
		  "included)." },
		{ "hashlb_service_connections_total", "counter",
		  "Connections forwarded to a backend." },
		{ "hashlb_service_active_connections", "gauge",
		  "Connections open now, those still connecting or queued included." },
		{ "hashlb_service_rejected_total", "counter",
		  "Connections closed at once: over max_connections." },
		{ "hashlb_service_no_backend_total", "counter",
		  "Connections closed without a backend: none to try (all down, drained, in maint, "
		  "or at max_connections with no timeouts.queue), or every connect tried failed." },
		{ "hashlb_service_draining_backends", "gauge",
		  "Backends removed by a reload that still hold connections." },
		{ "hashlb_service_bad_headers_total", "counter",
		  "accept_proxy: connections closed without a valid PROXY protocol header." },
		{ "hashlb_service_untrusted_total", "counter",
		  "accept_proxy_from: connections closed at once, from a source not listed." },
		{ "hashlb_service_queued", "gauge",
		  "Connections waiting for a backend under its max_connections." },
		{ "hashlb_service_queued_total", "counter",
		  "Connections that waited for a backend under its max_connections." },
		{ "hashlb_service_queue_timeouts_total", "counter",
		  "Connections closed: no backend had room within timeouts.queue." },
		{ "hashlb_service_queue_aborts_total", "counter",
		  "Connections closed while waiting in the queue: the client reset, or closed "
		  "with abort_on_close." },
		{ "hashlb_service_denied_total", "counter",
		  "allow_clients/deny_clients: connections closed at once, a client not served." },
		{ "hashlb_service_client_limited_total", "counter",
		  "Connections closed at once: their client held max_connections_per_client." },
		{ "hashlb_service_rate_pauses_total", "counter",
		  "max_connection_rate: times a worker stopped accepting until the rate allowed "
		  "(clients waited in the listen backlog)." },
		{ "hashlb_service_table_bytes", "gauge",
		  "Bytes of the published table and, on Maglev, its retry and ramp tables." },
		{ "hashlb_service_tick_visits_total", "counter",
		  "Backends the control plane's ticks (every 50 ms) looked at: their health from "
		  "the forwarder's failures, slow start, a hold's end; all of them a tick while any "
		  "needs it, checks on always." },
	};

	for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
		size_t name_len = strlen(fam[f].name);

		if (!scrape_family(sc, o, w, fam[f].name, fam[f].type, fam[f].help))
			continue;
		for (uint32_t i = 0; i < sc->n_svcs; i++) {
			const struct hlb_pool_service *s = sc->sv[i].s;
			const struct hlb_snapshot *snap = hlb_pool_snapshot(s);
			const struct hlb_service_counters *c = &sc->sv[i].c;
			double v = 0;

			hlb_buf_put(o, fam[f].name, name_len);
			hlb_buf_put(o, sc->labels.p + sc->sv[i].lab, sc->sv[i].lab_len);
			if (f == 1)
				hlb_buf_printf(o, ",scheme=\"%s\",fingerprint=\"%016" PRIx64 "\"",
					       hashlb_scheme_name(hashlb_table_scheme(snap->table)),
					       snap->fingerprint);
			hlb_buf_put(o, "}", 1);
			switch (f) {
			case 0:
				v = (double)snap->generation;
				break;
			case 1:
				v = 1;
				break;
			case 2:
				v = (double)s->rebuilds;
				break;
			case 3:
				v = (double)s->rebuilds_failed;
				break;
			case 4:
				v = (double)s->rebuild_ns_total / 1e9;
				break;
			case 5:
				v = (double)s->rebuild_ns_last / 1e9;
				break;
			case 6:
				v = hlb_pool_takes_clients_count(s);
				break;
			case 7:
				v = s->n_backends;
				break;
			case 8:
				v = (double)c->lookups;
				break;
			case 9:
				v = (double)c->total;
				break;
			case 10:
				v = (double)c->active;
				break;
			case 11:
				v = (double)c->rejected;
				break;
			case 12:
				v = (double)c->no_backend;
				break;
			case 13:
				v = s->n_removed;
				break;
			case 14:
				v = (double)c->bad_header;
				break;
			case 15:
				v = (double)c->untrusted;
				break;
			case 16:
				v = (double)c->queued;
				break;
			case 17:
				v = (double)c->queued_total;
				break;
			case 18:
				v = (double)c->queue_timeouts;
				break;
			case 19:
				v = (double)c->queue_aborts;
				break;
			case 20:
				v = (double)c->denied;
				break;
			case 21:
				v = (double)c->client_limited;
				break;
			case 22:
				v = (double)c->rate_pauses;
				break;
			case 23:
				v = (double)snap->tables_bytes;
				break;
			case 24:
				v = (double)s->tick_visits;
				break;
			}
			value_num(o, v);
		}
	}
}

/*
 * A kernel steering family of one service, summed over CPUs: of counter <counter> (a name of
 * hashlb_steer_stats_field()), the service's own (s.own: its table's in its program) or, with
 * <iface>, its program's (s.st: every service's on the interface); without a counter, the
 * sample's figure <other>. Which of a service's own are shown is the steer library's one
 * rule (hashlb_steer_stats_field_own()), not a list here: before, a list of the counters a
 * table has as its own, which a change of that rule left behind but for a test.
 */
enum steer_other {
	STEER_FLOWS,
	STEER_INTERFACE_FLOWS,
	STEER_FLOWS_MAX,
	STEER_STALE,
	STEER_REFUSED
};

struct steer_family {
	struct family_desc d;
	const char *counter;
	bool iface;
	enum steer_other other;
};

static uint64_t steer_value(const struct hlb_steer_sample *s, const struct steer_family *f)
{
	const uint64_t other[] = { [STEER_FLOWS] = s->flows,
				   [STEER_INTERFACE_FLOWS] = s->interface_flows,
				   [STEER_FLOWS_MAX] = s->flows_max,
				   [STEER_STALE] = s->table_stale,
				   [STEER_REFUSED] = s->tables_refused };
	int i = f->counter ? hashlb_steer_stats_field_index(f->counter) : -ENOENT;
	uint64_t x = 0;

	if (!f->counter)
		return other[f->other];
	if (i >= 0)
		hashlb_steer_stats_field(f->iface ? &s->st : &s->own, (unsigned)i, &x);
	return x;
}

/* Whether service <s> has a sample of family <f>: the service's own where its program
 * counts it (hashlb_steer_stats_field_own(): packets and bytes alone of an older hashlb's
 * program that counts no more, none of one that counts none, never one no table counts of
 * its own), any other. */
static bool steer_shown(const struct hlb_steer_sample *s, const struct steer_family *f)
{
	int i = f->counter ? hashlb_steer_stats_field_index(f->counter) : -ENOENT;

	return f->iface || !f->counter ||
	       (i >= 0 && s->own_known && hashlb_steer_stats_field_own((unsigned)i, s->own_all));
}

/* One dropped family's samples: of each service, the service's own drops where it has
 * them (<own>: those its table counts, hashlb_steer_drop_tabled()), else the interface's. */
static void steer_dropped(struct hlb_buf *o, const char *name, const struct hlb_steer_sample *v,
			  uint32_t n, bool own)
{
	for (uint32_t i = 0; i < n; i++) {
		if (own && !v[i].own_all)
			continue;
		for (int d = 0; d < HLB_STEER_DROP_MAX; d++) {
			bool mine = own && hashlb_steer_drop_tabled(d);

			labels2(o, name, v[i].service, NULL);
			o->len--; /* reopen the label set */
			hlb_buf_printf(o, ",reason=\"%s\"} %" PRIu64 "\n",
				       hashlb_steer_drop_name(d),
				       (uint64_t)(mine ? v[i].own.drops[d] : v[i].st.drops[d]));
		}
	}
}

/*
 * Per kernel-steered service (steering: kernel) with a program attached now: its program's
 * counters, read once a scrape (each service: one per-CPU map lookup; each program: one scan of
 * its mapped conntrack table, whose figures serve every service sharing it: run_steer_stats()).
 * Nothing when no service has one, or the build has no BPF. The program
 * lives across reloads, and an upgrade takes it over: its counters go on.
 */
static void steer_families(struct hlb_control *ctl, const struct wanted *w, struct hlb_buf *o)
{
	/* each family's counter by name, as hashlb steer --stats names it */
#define OWN(counter) counter, false, 0
#define IFACE(counter) counter, true, 0
#define OTHER(what) NULL, true, what
	static const struct steer_family fams[] = {
		{ { "hashlb_service_steer_packets_total", "counter",
		    "Kernel steering: TCP packets to the service's VIP forwarded to a backend." },
		  OWN("packets") },
		{ { "hashlb_service_steer_bytes_total", "counter",
		    "Kernel steering: the frame bytes of those packets." },
		  OWN("bytes") },
		{ { "hashlb_service_steer_new_flows_total", "counter",
		    "Kernel steering: the service's flows scheduled through the table." },
		  OWN("new_flows") },
		{ { "hashlb_service_steer_conntrack_hits_total", "counter",
		    "Kernel steering: the service's packets forwarded by their flow's "
		    "conntrack entry." },
		  OWN("ct_hits") },
		{ { "hashlb_service_steer_conntrack_rescheduled_total", "counter",
		    "Kernel steering: the service's flows whose backend went down or away, "
		    "scheduled again." },
		  OWN("ct_resched") },
		{ { "hashlb_service_steer_conntrack_evictions_total", "counter",
		    "Kernel steering: the service's new flows that took the entry of another "
		    "flow, its set full (a flow that ended, or a live one: see "
		    "conntrack_lost)." },
		  OWN("ct_evicted") },
		{ { "hashlb_service_steer_conntrack_lost_total", "counter",
		    "Kernel steering: the service's packets past a flow's SYN that found no "
		    "conntrack entry: evicted while the flow lived (the table is too small), "
		    "scheduled again (the flow moves if the table changed since it began)." },
		  OWN("ct_lost") },
		{ { "hashlb_service_steer_untracked_resets_total", "counter",
		    "Kernel steering: the service's RSTs that found no conntrack entry, "
		    "forwarded by the table (in packets_total) with no entry made: not new "
		    "flows, not conntrack_lost." },
		  OWN("rst_untracked") },
		{ { "hashlb_service_steer_closed_passed_total", "counter",
		    "Kernel steering: the service's packets to its VIP while a stop drains it "
		    "(a new connection, a flow with no conntrack entry) handed to the stack, "
		    "which refuses them; in passed_total too." },
		  OWN("closed_passed") },
		{ { "hashlb_service_steer_conntrack_closing_total", "counter",
		    "Kernel steering: the service's flows whose client's FIN or RST marked "
		    "their conntrack entry closing (a stop's drain ends once every entry is)." },
		  OWN("ct_closing") },
		{ { "hashlb_service_steer_passed_total", "counter",
		    "Kernel steering: packets the program on the service's interface handed to "
		    "the stack (not for its VIP, not TCP)." },
		  IFACE("passed") },
		{ { "hashlb_service_steer_conntrack_entries", "gauge",
		    "Kernel steering: the service's conntrack entries, of its VIPs' flows "
		    "(seen, until evicted): occupancy, not flows open now." },
		  OTHER(STEER_FLOWS) },
		{ { "hashlb_service_steer_interface_conntrack_entries", "gauge",
		    "Kernel steering: conntrack entries in use on the service's interface, "
		    "every service's there (the table its program shares with them)." },
		  OTHER(STEER_INTERFACE_FLOWS) },
		{ { "hashlb_service_steer_conntrack_capacity", "gauge",
		    "Kernel steering: conntrack entries at most, on the service's interface." },
		  OTHER(STEER_FLOWS_MAX) },
		{ { "hashlb_service_steer_table_stale", "gauge",
		    "Kernel steering: 1 while the service's latest table is not in the kernel "
		    "(refused, tried again every second): the kernel path steers by an older "
		    "one." },
		  OTHER(STEER_STALE) },
		{ { "hashlb_service_steer_tables_refused_total", "counter",
		    "Kernel steering: tables the program refused (a backend's MAC unknown, a "
		    "table larger than its maps)." },
		  OTHER(STEER_REFUSED) },
		{ { "hashlb_service_steer_interface_packets_total", "counter",
		    "Kernel steering: TCP packets forwarded on the service's interface, every "
		    "service's there (its program's)." },
		  IFACE("packets") },
		{ { "hashlb_service_steer_interface_bytes_total", "counter",
		    "Kernel steering: the frame bytes of those packets." },
		  IFACE("bytes") },
		{ { "hashlb_service_steer_interface_new_flows_total", "counter",
		    "Kernel steering: new_flows_total of every service on the service's "
		    "interface." },
		  IFACE("new_flows") },
		{ { "hashlb_service_steer_interface_conntrack_hits_total", "counter",
		    "Kernel steering: conntrack_hits_total of every service on the service's "
		    "interface." },
		  IFACE("ct_hits") },
		{ { "hashlb_service_steer_interface_conntrack_rescheduled_total", "counter",
		    "Kernel steering: conntrack_rescheduled_total of every service on the "
		    "service's interface." },
		  IFACE("ct_resched") },
		{ { "hashlb_service_steer_interface_conntrack_evictions_total", "counter",
		    "Kernel steering: conntrack_evictions_total of every service on the "
		    "service's interface." },
		  IFACE("ct_evicted") },
		{ { "hashlb_service_steer_interface_conntrack_lost_total", "counter",
		    "Kernel steering: conntrack_lost_total of every service on the service's "
		    "interface." },
		  IFACE("ct_lost") },
		{ { "hashlb_service_steer_interface_untracked_resets_total", "counter",
		    "Kernel steering: untracked_resets_total of every service on the service's "
		    "interface." },
		  IFACE("rst_untracked") },
		{ { "hashlb_service_steer_interface_closed_passed_total", "counter",
		    "Kernel steering: closed_passed_total of every service on the service's "
		    "interface." },
		  IFACE("closed_passed") },
		{ { "hashlb_service_steer_interface_conntrack_closing_total", "counter",
		    "Kernel steering: conntrack_closing_total of every service on the "
		    "service's interface." },
		  IFACE("ct_closing") },
	};
#undef OWN
#undef IFACE
#undef OTHER
	static const char dropped[] = "hashlb_service_steer_dropped_total";
	static const char idropped[] = "hashlb_service_steer_interface_dropped_total";
	struct hlb_steer_sample *v;
	bool any = family_wanted(w, dropped, "counter") || family_wanted(w, idropped, "counter");
	uint32_t n;

	/* the programs' maps read only for a scrape that asks for one of these */
	for (unsigned f = 0; !any && f < sizeof(fams) / sizeof(fams[0]); f++)
		any = family_wanted(w, fams[f].d.name, fams[f].d.type);
	if (!any || hlb_control_steer_samples(ctl, &v, &n) < 0)
		return;
	for (unsigned f = 0; n && f < sizeof(fams) / sizeof(fams[0]); f++) {
		if (!family(o, w, fams[f].d.name, fams[f].d.type, fams[f].d.help))
			continue;
		for (uint32_t i = 0; i < n; i++) {
			/* the service's own, unknown in an older program of several tables
			 * (its program's are in interface_*): packets and bytes, or all */
			if (!steer_shown(&v[i], &fams[f]))
				continue;
			labels2(o, fams[f].d.name, v[i].service, NULL);
			hlb_buf_printf(o, " %" PRIu64 "\n", steer_value(&v[i], &fams[f]));
		}
	}
	if (n &&
	    family(o, w, dropped, "counter",
		   "Kernel steering: packets dropped, by reason: malformed (TCP to the VIP's "
		   "address, header truncated or bad, or packet cut short), fragment (IP "
		   "fragments to the VIP's address), no-backend (every backend down), table (a "
		   "bug), redirect (always 0); no-backend and table the service's own, the "
		   "others the interface's (counted before the packet's port is read)."))
		steer_dropped(o, dropped, v, n, true);
	if (n && family(o, w, idropped, "counter",
			"Kernel steering: dropped_total of every service on the service's "
			"interface, by reason."))
		steer_dropped(o, idropped, v, n, false);
	free(v);
}

/* The descriptors open now. The kernel gives their count as the size of /proc/self/fd
 * (since Linux 6.2): a walk of its fd bitmap, no descriptor taken. Listing the directory
 * instead cost the control thread 12 ms a scrape at 18,000 descriptors (90 us at 14), and
 * a descriptor of its own; it is kept for kernels whose size is 0. */
unsigned hlb_process_open_fds(void)
{
	struct stat st;
	struct dirent *e;
	struct rlimit rl;
	unsigned n = 0;
	DIR *d;

	if (stat("/proc/self/fd", &st) == 0 && st.st_size > 0)
		return (unsigned)st.st_size;
	d = opendir("/proc/self/fd");
	if (!d) {
		/* no descriptor left to read the directory with: every one is
		 * open, which is when this gauge matters most (not 0) */
		if (errno == EMFILE && getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
		    rl.rlim_cur != RLIM_INFINITY)
			return (unsigned)rl.rlim_cur;
		return 0;
	}
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n ? n - 1 : 0; /* not the directory's own fd */
}

/*
 * The forwarding workers' bounded resources (struct hlb_worker_stats), each once: the field,
 * its key in /status's "workers" (hlb_worker_stats_field()), and its metric family (a sample
 * per worker).
 */
struct worker_stat {
	const char *key;
	struct family_desc fam;
	size_t off; /* of its uint64_t in struct hlb_worker_stats */
};

#define WORKER_STAT(field, key, name, type, help)                                   \
	{                                                                           \
		key, { name, type, help }, offsetof(struct hlb_worker_stats, field) \
	}

static const struct worker_stat worker_stats[] = {
	WORKER_STAT(connections, "connections", "hashlb_worker_connections", "gauge",
		    "Connections open now on this worker."),
	WORKER_STAT(buffers, "buffers", "hashlb_worker_buffers", "gauge",
		    "Receive buffers of this worker (--buffers), shared by its connections."),
	WORKER_STAT(buffers_in_use, "buffers_in_use", "hashlb_worker_buffers_in_use", "gauge",
		    "Receive buffers held by connections (data in flight), as of the last 100 ms."),
	WORKER_STAT(
		buffer_waiters, "buffer_waiters", "hashlb_worker_buffer_waiters", "gauge",
		"Directions waiting for a free buffer now (every buffer in use), as of the last "
		"100 ms."),
	WORKER_STAT(buffer_waits, "buffer_waits", "hashlb_worker_buffer_waits_total", "counter",
		    "Times a direction found every buffer in use and waited for one: over 0, "
		    "consider more --buffers."),
	WORKER_STAT(
		buffer_wakeups, "buffer_wakeups", "hashlb_worker_buffer_wakeups_total", "counter",
		"Times a direction waiting for a buffer was woken to read again, a buffer having "
		"come back; one that finds none again waits again (counted in the waits)."),
	WORKER_STAT(pipes, "splice_pipes", "hashlb_worker_splice_pipes", "gauge",
		    "Directions moving by splice now (a pipe each), as of the last 100 ms."),
	WORKER_STAT(
		pipes_max, "splice_pipes_max", "hashlb_worker_splice_pipes_max", "gauge",
		"The cap on spliced directions (--splice-pipes over the workers; 0: splice off)."),
	WORKER_STAT(splice_refused, "splice_refused", "hashlb_worker_splice_refused_total",
		    "counter",
		    "Directions of bulk streams kept on buffers, each counted once: the splice cap "
		    "reached, or no pipe to be had."),
	WORKER_STAT(
		pipes_small, "splice_pipes_small", "hashlb_worker_splice_pipes_small_total",
		"counter",
		"Splice pipes the kernel gave less than asked (--pipe-size, else 64 KiB): the "
		"per-user pipe limits (fs.pipe-user-pages-soft, -hard), fs.pipe-max-size, or its "
		"memory, each cause logged once with the fix."),
	WORKER_STAT(accept_errors, "accept_errors", "hashlb_worker_accept_errors_total", "counter",
		    "Accepts that failed (the file descriptor limit, memory): the listener paused "
		    "100 ms, the clients waiting in its backlog."),
	WORKER_STAT(spilled, "spilled_bytes", "hashlb_worker_spilled_bytes", "gauge",
		    "Bytes for destinations that stopped reading, moved out of the buffer pool so "
		    "that they hold no buffer, as of the last 100 ms."),
	WORKER_STAT(spill_max, "spilled_bytes_max", "hashlb_worker_spilled_bytes_max", "gauge",
		    "The cap on those bytes (four times the pool); over it a stopped destination "
		    "holds its buffers."),
	WORKER_STAT(spills, "spills", "hashlb_worker_spills_total", "counter",
		    "Times a direction's destination stopped reading and its data moved out of the "
		    "pool."),
	WORKER_STAT(fd_limit, "fd_limit", "hashlb_worker_fd_limit_total", "counter",
		    "Times the file descriptor limit stopped an accept (the listener paused) or a "
		    "backend connection (its client reset)."),
	WORKER_STAT(cap_pauses, "connection_cap_pauses",
		    "hashlb_worker_connection_cap_pauses_total", "counter",
		    "Times a listener paused at the connection cap (--max-connections, else what "
		    "the fd limit allows), its clients waiting in the backlog."),
	WORKER_STAT(
		cq_overflows, "cq_overflows", "hashlb_worker_cq_overflows_total", "counter",
		"Times the worker found completions waiting in the kernel's overflow list: more "
		"completed between two of its turns than its completion queue holds."),
	WORKER_STAT(
		cq_dropped, "cq_dropped", "hashlb_worker_cq_dropped_total", "counter",
		"Completions the kernel lost, short of memory for its overflow list (the ring's "
		"own count): any is a fault, the worker stops (docs/dataplane.md)."),
	WORKER_STAT(queue_deadline_looks, "queue_deadline_looks",
		    "hashlb_worker_queue_deadline_looks_total", "counter",
		    "Clients waiting in the queue (timeouts.queue) looked at for their deadline "
		    "alone, not tried for a backend: about one per client that timed out "
		    "(docs/dataplane.md, \"Queue\")."),
	WORKER_STAT(queue_served_woken, "queue_served_woken",
		    "hashlb_worker_queue_served_woken_total", "counter",
		    "Clients waiting in the queue sent to a connect when the worker was woken for "
		    "it: a slot freed, or the control plane changed what gives them room."),
	WORKER_STAT(queue_served_tick, "queue_served_tick", "hashlb_worker_queue_served_tick_total",
		    "counter",
		    "Clients waiting in the queue sent to a connect at a look of the worker's own "
		    "(its 100 ms tick, the 1 s walk): room it was not woken for."),
	WORKER_STAT(
		queue_tries, "queue_tries", "hashlb_worker_queue_tries_total", "counter",
		"Clients waiting in the queue tried for a backend again: what the queue's walks "
		"cost, next to the clients they served."),
	WORKER_STAT(resets_taken, "resets_taken", "hashlb_worker_resets_taken_total", "counter",
		    "Resets whose error a send of hashlb's waiting to the same socket took (its "
		    "reader saw an end, not the reset), found and passed on as resets."),
	WORKER_STAT(cancels_by_fd, "cancels_by_fd", "hashlb_worker_cancels_by_fd_total", "counter",
		    "Cancels by descriptor a closing connection sent for requests its state did "
		    "not tell: each one the kernel matches against every request of the worker."),
	WORKER_STAT(queue_looks, "queue_looks", "hashlb_worker_queue_looks_total", "counter",
		    "Looks at the queue: when woken for it, at the tick, at a deadline."),
	WORKER_STAT(queue_looks_woken, "queue_looks_woken", "hashlb_worker_queue_looks_woken_total",
		    "counter",
		    "Of those, the looks the worker was woken for: a slot freed, or the control "
		    "plane changed what gives the clients waiting room."),
	WORKER_STAT(queue_fp_reads, "queue_fingerprint_reads",
		    "hashlb_worker_queue_fingerprint_reads_total", "counter",
		    "Backends read by those looks to tell whether anything changed for the clients "
		    "waiting: what a look costs besides the clients it tries."),
	WORKER_STAT(
		log_wakeups, "log_wakeups", "hashlb_worker_log_wakeups_total", "counter",
		"Times the poll on stderr woke the worker while connection log lines waited for "
		"room: about one per time the reader took bytes."),
	WORKER_STAT(
		turns, "turns", "hashlb_worker_turns_total", "counter",
		"Turns of the worker's loop, each a wait for completions: about ten a second at "
		"rest (the tick), one per batch of completions under load."),
	WORKER_STAT(
		queue_steps, "queue_steps", "hashlb_worker_queue_steps_total", "counter",
		"Clients waiting in the queue read following its links: those a look tries (and "
		"the one it stops at); a client that leaves is taken off reading none."),
	WORKER_STAT(idle_scans, "idle_scans", "hashlb_worker_idle_scans_total", "counter",
		    "Walks of every connection of the worker for their idle timeouts, drain, and "
		    "closes by the control plane: one a second at least, one a tick at most."),
};

_Static_assert(sizeof(worker_stats) / sizeof(worker_stats[0]) * sizeof(uint64_t) ==
		       sizeof(struct hlb_worker_stats),
	       "every field of struct hlb_worker_stats in worker_stats[]");

const char *hlb_worker_stats_field(const struct hlb_worker_stats *s, unsigned i,
				   uint64_t *ret_value)
{
	if (i >= sizeof(worker_stats) / sizeof(worker_stats[0]))
		return NULL;
	memcpy(ret_value, (const char *)s + worker_stats[i].off, sizeof(*ret_value));
	return worker_stats[i].key;
}

/* The forwarding workers' bounded resources, a sample per worker in each family. */
static void worker_families(struct hlb_control *ctl, const struct wanted *w, struct hlb_buf *o)
{
	/* each worker read once, not once per family: what is read are counters
	 * its thread writes, and the families then show the same moment */
	struct hlb_worker_stats *s = NULL, *grown;
	uint32_t n = 0;
	uint64_t v;

	for (; ctl->worker_stats; n++) {
		if (!(grown = realloc(s, (n + 1) * sizeof(*s)))) {
			o->oom = true;
			break;
		}
		s = grown;
		if (!ctl->worker_stats(ctl->daemon, n, &s[n]))
			break;
	}
	for (unsigned f = 0; n && f < sizeof(worker_stats) / sizeof(worker_stats[0]); f++) {
		const struct family_desc *fam = &worker_stats[f].fam;

		if (!family(o, w, fam->name, fam->type, fam->help))
			continue;
		for (uint32_t i = 0; i < n; i++) {
			hlb_worker_stats_field(&s[i], f, &v);
			hlb_buf_printf(o, "%s{worker=\"%u\"} %" PRIu64 "\n", fam->name, i, v);
		}
	}
	free(s);
}

/* A sample of family <name> per result of <results> (NULL-terminated): its value in <v>. */
static void by_result(struct hlb_buf *o, const char *name, const char *const *results,
		      const uint64_t *v)
{
	for (size_t i = 0; results[i]; i++)
		hlb_buf_printf(o, "%s{result=\"%s\"} %" PRIu64 "\n", name, results[i], v[i]);
}

static void metrics_all(struct hlb_control *ctl, const struct wanted *w, struct hlb_buf *o)
{
	struct rlimit rl = { 0 };
	struct scrape sc = { .ctl = ctl };

	backend_families(&sc, w, o);
	closed_family(&sc, w, o);
	ends_family(&sc, w, o);
	service_families(&sc, w, o);
	if (sc.read)
		scrape_free(&sc);
	steer_families(ctl, w, o);
	worker_families(ctl, w, o);
	getrlimit(RLIMIT_NOFILE, &rl);
	if (family(o, w, "hashlb_reloads_total", "counter", "Config reloads, by result."))
		by_result(o, "hashlb_reloads_total", (const char *const[]){ "ok", "failed", NULL },
			  (const uint64_t[]){ ctl->reloads_ok, ctl->reloads_failed });
	if (family(o, w, "hashlb_resolves_total", "counter",
		   "Backend names resolved again (resolve_every), by result: ok (changed or not), "
		   "failed, changed (an address changed and was applied)."))
		by_result(o, "hashlb_resolves_total",
			  (const char *const[]){ "ok", "failed", "changed", NULL },
			  (const uint64_t[]){ ctl->resolves_ok, ctl->resolves_failed,
					      ctl->resolves_changed });
	if (family(o, w, "hashlb_table_memory_bytes", "gauge",
		   "Bytes of every table the process holds: the services' published tables with "
		   "their retry and ramp tables, and those replaced, until the workers leave them."))
		hlb_buf_printf(o, "hashlb_table_memory_bytes %" PRIu64 "\n",
			       hlb_snapshot_tables_bytes());
	if (family(o, w, "hashlb_tables_built_total", "counter",
		   "Tables built (a service's published, retry and ramp tables): a reload builds "
		   "those of the services it changes, none for a config's validation."))
		hlb_buf_printf(o, "hashlb_tables_built_total %" PRIu64 "\n", hashlb_table_builds());
	if (family(o, w, "hashlb_reload_match_reads_total", "counter",
		   "Names and listeners read to match a config's services, backends and listen "
		   "addresses with those running, at start and at each reload: a few per service "
		   "and backend."))
		hlb_buf_printf(o, "hashlb_reload_match_reads_total %" PRIu64 "\n",
			       hlb_match_reads());
	if (family(o, w, "hashlb_config_last_reload_successful", "gauge",
		   "1 if the last reload succeeded (or none was tried), 0 if it failed."))
		hlb_buf_printf(o, "hashlb_config_last_reload_successful %d\n",
			       !ctl->last_reload_failed);
	if (ctl->http &&
	    family(o, w, "hashlb_admin_refused_total", "counter",
		   "Admin requests answered 503 unserved: too many connections open, or answers "
		   "not read yet holding too much.")) {
		hlb_buf_printf(o,
			       "hashlb_admin_refused_total{reason=\"connections\"} %" PRIu64 "\n",
			       hlb_http_refused(ctl->http, HLB_HTTP_REFUSED_CONNECTIONS));
		hlb_buf_printf(
			o, "hashlb_admin_refused_total{reason=\"unread_answers\"} %" PRIu64 "\n",
			hlb_http_refused(ctl->http, HLB_HTTP_REFUSED_UNREAD));
	}
	if (family(o, w, "hashlb_log_dropped_total", "counter",
		   "Log lines dropped: stderr not read (a worker's buffer full, or 100 ms waited)."))
		hlb_buf_printf(o, "hashlb_log_dropped_total %" PRIu64 "\n", hlb_log_dropped());
	if (family(o, w, "hashlb_control_turns_total", "counter",
		   "Turns of the control thread's event loop: a few a second at rest."))
		hlb_buf_printf(o, "hashlb_control_turns_total %" PRIu64 "\n",
			       hlb_loop_turns(ctl->loop));
	if (family(o, w, "hashlb_control_ticks_total", "counter",
		   "Ticks of the control plane's pool (every 50 ms): health from the forwarder's "
		   "failures, drain deadlines, removed backends let go."))
		hlb_buf_printf(o, "hashlb_control_ticks_total %" PRIu64 "\n",
			       hlb_pool_ticks(ctl->pool));
	if (family(o, w, "hashlb_process_open_fds", "gauge", "File descriptors open now."))
		hlb_buf_printf(o, "hashlb_process_open_fds %u\n", hlb_process_open_fds());
	if (family(o, w, "hashlb_process_max_fds", "gauge", "The file descriptor limit (soft)."))
		hlb_buf_printf(o, "hashlb_process_max_fds %.17g\n",
			       rl.rlim_cur == RLIM_INFINITY ? -1.0 : (double)rl.rlim_cur);
	if (family(o, w, "hashlb_process_start_time_seconds", "gauge",
		   "When the process started, seconds since the epoch."))
		hlb_buf_printf(o, "hashlb_process_start_time_seconds %lld\n",
			       (long long)ctl->start_time);
	if (ctl->connections &&
	    family(o, w, "hashlb_connections", "gauge", "Connections open now, all services."))
		hlb_buf_printf(o, "hashlb_connections %" PRIu64 "\n",
			       ctl->connections(ctl->daemon));
	if (ctl->max_connections &&
	    family(o, w, "hashlb_max_connections", "gauge",
		   "The cap on connections over all services (--max-connections, else what "
		   "the fd limit allows; 0: none): at it, new clients wait in the backlog."))
		hlb_buf_printf(o, "hashlb_max_connections %" PRIu64 "\n",
			       ctl->max_connections(ctl->daemon));
	if (family(o, w, "hashlb_health_check_fds", "gauge",
		   "The most descriptors the health checks may hold at once (one per checked "
		   "backend, at most a quarter of the fd limit): a cap from the fd limit leaves "
		   "them room, a connection for two."))
		hlb_buf_printf(
			o, "hashlb_health_check_fds %u\n",
			(unsigned)atomic_load_explicit(hlb_check_fds(), memory_order_relaxed));
}

void hlb_metrics_render(struct hlb_control *ctl, const char *names, size_t names_len,
			struct hlb_buf *o)
{
	const struct wanted w = { names, names_len };

	metrics_all(ctl, &w, o);
}
