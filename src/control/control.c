// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashlb/grow.h"
#include "control.h"
#include "runtime/fdpass.h"
#include "runtime/log.h"

static void control_log(struct hlb_control *ctl, enum hlb_log_level level, const char *msg,
			const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void control_log(struct hlb_control *ctl, enum hlb_log_level level, const char *msg,
			const char *fmt, ...)
{
	va_list ap;

	if (!ctl->log)
		return;
	va_start(ap, fmt);
	hlb_log_vto(ctl->log, ctl->log_arg, level, msg, fmt, ap);
	va_end(ap);
}

/*
 * The admin endpoint takes no authentication: on an address beyond loopback (a wildcard, a
 * host's address) whoever reaches it can drain, close, reload and upgrade. Said at start and
 * at each reload (the address is the one in force: it changes on restart only).
 */
static void admin_exposed_warn(struct hlb_control *ctl)
{
	const struct sockaddr_storage *a = &ctl->run_admin_addr;
	char qa[HLB_LOG_QUOTED_MAX(sizeof("unix:") + 108)];

	if (!ctl->http || (a->ss_family != AF_INET && a->ss_family != AF_INET6) ||
	    hashlb_addr_is_loopback(a))
		return;
	control_log(ctl, HLB_LOG_WARN, "admin endpoint beyond loopback, without authentication",
		    "addr=%s note=\"whoever reaches it can drain backends, reload and upgrade: "
		    "keep it on loopback or a Unix socket, or firewall it\"",
		    hlb_log_quote(hlb_http_address(ctl->http), qa, sizeof(qa)));
}

/* What <cfg> accepts but warns of (hashlb_config_warnings(), what hashlb check prints), at
 * start and at each reload: one line each, with the file's line and column, at most
 * HLB_POOL_CHANGE_LINES of them and a line counting the rest (a config of 5,000 backends
 * at one address wrote 5,000 lines at each reload). */
static void config_warnings_log(struct hlb_control *ctl, const struct hashlb_config *cfg)
{
	char qp[HLB_LOG_PATH_MAX], qm[HLB_LOG_QUOTED_MAX(sizeof(((struct hashlb_error *)0)->msg))];
	struct hashlb_error *w = calloc(HLB_POOL_CHANGE_LINES, sizeof(*w));
	int n;

	ctl->warnings = 0;
	ctl->first_warning[0] = '\0';
	if (!w)
		return;
	n = hashlb_config_warnings(cfg, w, HLB_POOL_CHANGE_LINES);
	/* for the reload's answer, where "reloaded" alone hid them in the log */
	ctl->warnings = n > 0 ? (uint32_t)n : 0;
	if (n > 0)
		snprintf(ctl->first_warning, sizeof(ctl->first_warning), "%s:%d:%d: %s",
			 ctl->config_path, w[0].line, w[0].column, w[0].msg);
	for (int i = 0; i < n && i < HLB_POOL_CHANGE_LINES; i++)
		control_log(ctl, HLB_LOG_WARN, "config warning",
			    "config=%s line=%d column=%d warning=%s",
			    hlb_log_quote(ctl->config_path, qp, sizeof(qp)), w[i].line, w[i].column,
			    hlb_log_quote(w[i].msg, qm, sizeof(qm)));
	if (n > HLB_POOL_CHANGE_LINES)
		control_log(ctl, HLB_LOG_WARN, "config warnings not logged", "config=%s more=%d",
			    hlb_log_quote(ctl->config_path, qp, sizeof(qp)),
			    n - HLB_POOL_CHANGE_LINES);
	free(w);
}

/* ---- the admin endpoint's refusals, logged ----------------------------- */

/* at most one line per kind of refusal in this time, counting those since the last */
#define REFUSED_LOG_MS 10000

/*
 * The admin endpoint refused a request (503): say so, or a scrape that fails
 * and a hashlb ctl told "try again" leave nothing in the log to explain them
 * (64 connections held open by a client, or answers it never reads).
 */
static void admin_refused(void *arg, enum hlb_http_refusal why, uint64_t total)
{
	static const char *const reasons[HLB_HTTP_REFUSED_MAX] = {
		[HLB_HTTP_REFUSED_CONNECTIONS] = "connections",
		[HLB_HTTP_REFUSED_UNREAD] = "unread_answers",
	};
	struct hlb_control *ctl = arg;
	uint64_t now = hlb_now_ms();

	if (ctl->refused_logged_ms[why] && now - ctl->refused_logged_ms[why] < REFUSED_LOG_MS)
		return;
	control_log(
		ctl, HLB_LOG_ERROR, "admin requests refused",
		"reason=%s refused=%" PRIu64 " note=\"%s\"", reasons[why],
		total - ctl->refused_logged[why],
		why == HLB_HTTP_REFUSED_CONNECTIONS
			? "64 admin connections open: a client holding them, or too many at once"
			: "answers not read yet hold 64 MiB, or copies of 4096 descriptors (GET "
			  "/sockets): clients asking and not reading");
	ctl->refused_logged[why] = total;
	ctl->refused_logged_ms[why] = now;
}

/* ---- resolve_every: names resolved again off the control loop ---------- */

#define RESOLVE_POLL_MS 20

/* Give up the resolution in flight, if any (its threads finish on their own). */
static void resolve_drop(struct hlb_control *ctl)
{
	if (ctl->resolve_job)
		hashlb_config_resolve_finish(ctl->resolving, ctl->resolve_job, 0, NULL);
	ctl->resolve_job = NULL;
	hashlb_config_free(ctl->resolving);
	ctl->resolving = NULL;
}

static void resolve_again_in(struct hlb_control *ctl, uint64_t ms)
{
	hlb_timer_arm(ctl->loop, &ctl->resolve_timer, hlb_now_ms() + ms);
}

/* (Re)start the cycle for the current config: after start and each reload. */
static void resolve_schedule(struct hlb_control *ctl)
{
	hlb_timer_cancel(ctl->loop, &ctl->resolve_timer);
	resolve_drop(ctl);
	if (ctl->cfg->resolve_every_ms && ctl->cfg->text) /* text: a backend names a host */
		resolve_again_in(ctl, ctl->cfg->resolve_every_ms);
}

/* A name that keeps failing is said again at most this often, with the count. */
#define RESOLVE_REMIND_MS (10 * 60 * 1000)

/*
 * Whether <err> is the failure logged last, <was>: the same message at the
 * same place, or the same name not asked again (its lookup that failed
 * still waits on the resolver: a dead zone's name fails "no answer" and
 * "not asked again" by turns), or a round skipped again (with another
 * count of lookups).
 */
static bool same_failure(const struct hashlb_error *was, const struct hashlb_error *err)
{
	static const char skipped[] = "round skipped:";

	if (was->line != err->line || was->column != err->column)
		return false;
	if (!strcmp(was->msg, err->msg) || strstr(err->msg, " was not asked again: "))
		return true;
	return !strncmp(was->msg, skipped, sizeof(skipped) - 1) &&
	       !strncmp(err->msg, skipped, sizeof(skipped) - 1);
}

/* A round's log lines: a name failed, or the addresses resolved could not be applied
 * (weights set at run time, table_memory, a steering program too small: said as a
 * reload's refusal is; before, logged as names not resolved, though every one was). */
enum resolve_failure {
	RESOLVE_NOT_RESOLVED,
	RESOLVE_REFUSED,
	RESOLVE_FAILURES /* the size of ctl->resolve_logged[] */
};

static const char *const resolve_failure_line[RESOLVE_FAILURES] = {
	[RESOLVE_NOT_RESOLVED] = "names not resolved, the backends keep their addresses",
	[RESOLVE_REFUSED] = "names resolved, their new addresses refused: the backends keep theirs",
};

/*
 * A round failed (a name, or all of them), or the addresses it resolved were refused, logged
 * as <what>; <count>: the round's first failure, counted in resolves_failed and the rounds
 * failed in a row (a round with a name failed and its other addresses refused is one round
 * failed, both logged). Logged once, and again only when the failure changes or
 * RESOLVE_REMIND_MS after the last line, with the rounds failed in a row: with
 * resolve_every: 1s, a name gone from DNS logged the same line every second. A name failing
 * and a refusal are remembered apart, so that a round with both logs neither again. The
 * round's errors are kept, each, for /status (resolve.last_errors).
 */
static void resolve_failed(struct hlb_control *ctl, enum resolve_failure what,
			   const struct hashlb_error *err, bool count)
{
	struct hashlb_error *was = &ctl->resolve_logged[what];
	char kv[HLB_LOG_CONFIG_ERROR_MAX], *said;
	uint64_t now = hlb_now_ms();

	if (count) {
		ctl->resolves_failed++;
		if (!ctl->resolve_fail_rounds++) /* a new run of failures: each said again */
			memset(ctl->resolve_logged, 0, sizeof(ctl->resolve_logged));
	}
	/* the round's errors, each kept: its last only, a name that failed beside a refusal was
	 * not in /status at all (a third, which no round has: in the second's place) */
	if (count)
		ctl->n_last_resolve_errs = 0;
	else if (ctl->n_last_resolve_errs == HLB_RESOLVE_ERRORS_MAX)
		ctl->n_last_resolve_errs--;
	said = ctl->last_resolve_errs[ctl->n_last_resolve_errs++];
	if (err->line > 0)
		snprintf(said, sizeof(ctl->last_resolve_errs[0]), "%s:%d:%d: %s", ctl->config_path,
			 err->line, err->column, err->msg);
	else
		snprintf(said, sizeof(ctl->last_resolve_errs[0]), "%s: %s", ctl->config_path,
			 err->msg);
	if (was->reason != HASHLB_ERR_NONE && same_failure(was, err) &&
	    now - ctl->resolve_logged_ms[what] < RESOLVE_REMIND_MS)
		return;
	control_log(ctl, HLB_LOG_ERROR, resolve_failure_line[what], "%s rounds_failed=%" PRIu64,
		    hlb_log_config_error(ctl->config_path, err, kv, sizeof(kv)),
		    ctl->resolve_fail_rounds);
	if (was->reason == HASHLB_ERR_NONE || !same_failure(was, err))
		*was = *err;
	was->file = NULL; /* the config's, freed with it */
	ctl->resolve_logged_ms[what] = now;
}

/*
 * A round without a failure of the kind <what> says (RESOLVE_NOT_RESOLVED: every name
 * resolved; RESOLVE_REFUSED: its addresses applied, or nothing to apply) while the other kind
 * goes on failing: the next of this kind is said again, as after a round without either
 * (resolve_recovered()). Remembered through such a round, a refusal back after its addresses
 * were applied ("names resolved to new addresses, applied"), or a name failing again after it
 * resolved, was not said at all while the other kind kept the run of failures going.
 */
static void resolve_cleared(struct hlb_control *ctl, enum resolve_failure what)
{
	_Static_assert(sizeof(ctl->resolve_logged) / sizeof(ctl->resolve_logged[0]) ==
			       RESOLVE_FAILURES,
		       "a line remembered per kind of failure");
	memset(&ctl->resolve_logged[what], 0, sizeof(ctl->resolve_logged[0]));
}

/* Every name resolved (a round, or a reload): say so if they had failed. The failed rounds'
 * errors go from /status too: after a reload they named lines of the file as it was, maybe a
 * name the config no longer has, and with no round to come (resolve_every gone) they stayed. */
static void resolve_recovered(struct hlb_control *ctl)
{
	ctl->n_last_resolve_errs = 0;
	if (!ctl->resolve_fail_rounds)
		return;
	control_log(ctl, HLB_LOG_INFO, "names resolve again", "rounds_failed=%" PRIu64,
		    ctl->resolve_fail_rounds);
	ctl->resolve_fail_rounds = 0;
}

/* A round applied, or with nothing to apply: <ok>, every name resolved, counts it in
 * resolves_ok (else it counted in resolves_failed already). */
static void resolve_ok(struct hlb_control *ctl, bool ok)
{
	if (!ok)
		return;
	ctl->resolves_ok++;
	resolve_recovered(ctl);
}

/* A service's backends written with a host name, sorted by name: a round's
 * comparison in n log n (a linear search per name was a third of the 274 ms
 * a round of 5,000 named backends cost the control thread: resolve.c). */
struct named {
	const struct hashlb_backend_cfg **v;
	uint32_t n;
};

static int backend_cmp(const void *pa, const void *pb)
{
	const struct hashlb_backend_cfg *const *a = pa, *const *b = pb;

	return strcmp((*a)->name, (*b)->name);
}

/* <s>'s backends written with a host name, into <ix> (free ix->v): 0, or -ENOMEM. */
static int named_index(const struct hashlb_service_cfg *s, struct named *ix)
{
	*ix = (struct named){ 0 };
	if (s->n_backends && !(ix->v = calloc(s->n_backends, sizeof(*ix->v))))
		return -ENOMEM;
	for (uint32_t j = 0; j < s->n_backends; j++) {
		if (hashlb_addr_is_name(s->backends[j].address))
			ix->v[ix->n++] = &s->backends[j];
	}
	qsort(ix->v, ix->n, sizeof(*ix->v), backend_cmp);
	return 0;
}

/* The backend of <ix> named <name>, or NULL. */
static const struct hashlb_backend_cfg *backend_named(const struct named *ix, const char *name)
{
	struct hashlb_backend_cfg key = { .name = (char *)name };
	const struct hashlb_backend_cfg *k = &key, *const * found;

	if (!ix->n)
		return NULL;
	found = bsearch(&k, ix->v, ix->n, sizeof(*ix->v), backend_cmp);
	return found ? *found : NULL;
}

/* Room kept at the end of the list for ",...": changes left out. */
#define CHANGES_MORE ",..."

/*
 * Append "svc/backend:was->now" to <buf> (at *o, up to <size>), or
 * ":+now" for a backend that came, ":-was" for one that went. A backend's
 * name may hold ',' and ':', the list's separators (a service's neither):
 * it is then in double quotes, which no name holds, as hashlb lookup quotes
 * one in its list (t/"a,b":..., not t/a,b:..., read as two changes). A change
 * that does not fit whole is left out, it and those after it, and the list
 * ends with ",...": cut, its last one read as another address (127.0.0.1
 * of 127.0.0.117). The log's backends= counts them all.
 */
static void note_change(char *buf, size_t size, size_t *o, const char *svc, const char *name,
			const struct hashlb_backend_cfg *was, const struct hashlb_backend_cfg *now)
{
	char a[HASHLB_ADDR_STRLEN], b[HASHLB_ADDR_STRLEN], what[2 * HASHLB_ADDR_STRLEN + 4];
	char entry[3 * HASHLB_NAME_MAX + sizeof(what) + 8]; /* svc/"NAME@ADDR":what */
	const char *q;
	int n;

	if (*o >= size)
		return; /* one left out already */
	if (was)
		hashlb_addr_format(&was->addr, a, sizeof(a));
	if (now)
		hashlb_addr_format(&now->addr, b, sizeof(b));
	if (was && now)
		snprintf(what, sizeof(what), "%s->%s", a, b);
	else
		snprintf(what, sizeof(what), "%c%s", now ? '+' : '-', now ? b : a);
	q = strpbrk(name, ",:") ? "\"" : "";
	n = snprintf(entry, sizeof(entry), "%s%s/%s%s%s:%s", *o ? "," : "", svc, q, name, q, what);
	if (n > 0 && (size_t)n < sizeof(entry) && *o + (size_t)n + sizeof(CHANGES_MORE) <= size) {
		memcpy(buf + *o, entry, (size_t)n + 1);
		*o += (size_t)n;
		return;
	}
	snprintf(buf + *o, size - *o, "%s", *o ? CHANGES_MORE : CHANGES_MORE + 1);
	*o = size;
}

/*
 * How the config is read again: with hashlb run --admin the file's admin
 * address is not the one in force (admin_clash() checks that one).
 */
static unsigned int load_flags(const struct hlb_control *ctl)
{
	return ctl->cfg->admin_override ? HASHLB_LOAD_ADMIN_GIVEN : 0;
}

/*
 * hashlb run --admin and --workers set the running config's admin and
 * workers, not its file: a config read again (a reload, resolve_every)
 * keeps the command line's, so that it is not taken for an edit that waits
 * for a restart (the restart runs the same command line).
 */
static void keep_overrides(const struct hashlb_config *was, struct hashlb_config *cfg)
{
	char *copy = NULL;

	if (was->workers_override) {
		cfg->workers = was->workers;
		cfg->workers_override = true;
	}
	if (!was->admin_override)
		return;
	if (was->admin && !(copy = strdup(was->admin)))
		return; /* out of memory: the file's, and a warning for it */
	free(cfg->admin);
	cfg->admin = copy;
	cfg->admin_addr = was->admin_addr;
	cfg->admin_addr_len = was->admin_addr_len;
	cfg->admin_override = true;
}

/*
 * The names resolved (<ok>: all of them; else those that failed kept their
 * addresses, counted and logged as failed already): apply the config if an
 * address changed, or an each_address name gained or lost one (its
 * backends are named by their addresses: they come and go, logged as
 * "+ADDR" and "-ADDR").
 */
static void resolve_apply(struct hlb_control *ctl, bool ok)
{
	struct hashlb_config *fresh = ctl->resolving;
	struct hashlb_error err = { 0 };
	char changed[512] = "", qc[HLB_LOG_QUOTED_MAX(sizeof(changed))];
	size_t o = 0;
	uint32_t n = 0;

	/* The same text parsed again: the services are the same, in the same order. */
	for (uint32_t i = 0; i < fresh->n_services; i++) {
		const struct hashlb_service_cfg *was = &ctl->cfg->services[i];
		const struct hashlb_service_cfg *now = &fresh->services[i];
		struct named was_ix, now_ix;

		if (named_index(was, &was_ix) < 0 || named_index(now, &now_ix) < 0) {
			free(was_ix.v);
			hashlb_err(&err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
			resolve_failed(ctl, RESOLVE_NOT_RESOLVED, &err, ok);
			resolve_drop(ctl);
			return;
		}
		for (uint32_t j = 0; j < now->n_backends; j++) {
			const struct hashlb_backend_cfg *b = &now->backends[j], *a;

			if (!hashlb_addr_is_name(b->address))
				continue; /* as written, in both */
			a = backend_named(&was_ix, b->name);
			if (a && a->addr_len == b->addr_len &&
			    !memcmp(&a->addr, &b->addr, a->addr_len))
				continue;
			n++;
			note_change(changed, sizeof(changed), &o, now->name, b->name, a, b);
		}
		for (uint32_t j = 0; j < was->n_backends; j++) {
			const struct hashlb_backend_cfg *a = &was->backends[j];

			if (!hashlb_addr_is_name(a->address) || backend_named(&now_ix, a->name))
				continue;
			n++;
			note_change(changed, sizeof(changed), &o, now->name, a->name, a, NULL);
		}
		free(was_ix.v);
		free(now_ix.v);
	}
	if (n == 0) {
		resolve_cleared(ctl, RESOLVE_REFUSED);
		resolve_ok(ctl, ok);
		resolve_drop(ctl);
		return;
	}
	if (hlb_control_weights_fit(ctl, fresh, &err) < 0 ||
	    hlb_pool_apply(ctl->pool, fresh, NULL, &err) < 0) {
		/* not "names resolve again" before it each round: the same refusal, logged once;
		 * a round failed, not one that resolved too (it was counted in both) */
		resolve_failed(ctl, RESOLVE_REFUSED, &err, ok);
		resolve_drop(ctl);
		return;
	}
	resolve_cleared(ctl, RESOLVE_REFUSED);
	resolve_ok(ctl, ok);
	/* published now, each table rebuilt saying what it moved, as a reload's */
	hlb_pool_flush_resolve(ctl->pool, NULL);
	keep_overrides(ctl->cfg, fresh);
	hashlb_config_free(ctl->owned_cfg);
	ctl->owned_cfg = fresh;
	ctl->cfg = fresh;
	ctl->resolving = NULL;
	ctl->resolves_changed++;
	control_log(ctl, HLB_LOG_INFO, "names resolved to new addresses, applied",
		    "backends=%u changed=%s", n, hlb_log_quote(changed, qc, sizeof(qc)));
}

/*
 * The heap's free pages back to the system, after a reload (applied or
 * not) or a resolve_every round. What they keep (the new config's strings
 * and arrays) lies among what they used for a moment (the file, the YAML
 * tree, libfyaml's tokens), and glibc gives back only the top of the heap:
 * the RSS grew 48 MB over 20 reloads of 100,000 backends (the memory in use
 * did not), 6 MB at 20,000. madvise()s the free pages, a few milliseconds
 * at 100,000 backends.
 */
static void heap_trim(void *unused)
{
	(void)unused;
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

/*
 * heap_trim() once what was just replaced is freed too, the workers done
 * with it: the tables, also those that fill the heap's holes (a block of
 * 128 KiB or more is mmap()ed only when no free one fits). Trimmed before
 * that, a reload that rebuilt every table of 100,000 backends left 16 MB.
 */
static void heap_trim_later(struct hlb_control *ctl)
{
	if (!ctl->rcu || hlb_rcu_defer(ctl->rcu, heap_trim, NULL) < 0)
		heap_trim(NULL);
}

static void resolve_tick(void *arg)
{
	struct hlb_control *ctl = arg;
	struct hashlb_error err = { 0 }, failed = { 0 };
	uint32_t every = ctl->cfg->resolve_every_ms;
	bool refused, named;
	int r;

	if (!ctl->resolve_job) {
		r = hashlb_config_parse_flags(ctl->cfg->text, ctl->cfg->text_len, ctl->config_path,
					      load_flags(ctl), &ctl->resolving, &err);
		/* A resolver that never answers: the lookups of a round given up
		 * run on to its own timeout. A name still asked is not asked again
		 * (new lookups each round piled up, 80 threads behind resolv.conf's
		 * default every 1 s), the others are: one zone's dead servers held
		 * every name of the config when a round waited for them all. */
		if (r == 0)
			r = hashlb_config_resolve_again(ctl->resolving, &ctl->resolve_job, &err);
		if (r < 0)
			resolve_failed(ctl, RESOLVE_NOT_RESOLVED, &err, true);
		if (r < 0 || !ctl->resolve_job) {
			resolve_drop(ctl);
			resolve_again_in(ctl, every);
			return;
		}
		ctl->resolve_deadline_ms = hlb_now_ms() + HASHLB_RESOLVE_TIMEOUT_MS;
		resolve_again_in(ctl, RESOLVE_POLL_MS);
		return;
	}
	if (!hashlb_resolve_done(ctl->resolve_job) && hlb_now_ms() < ctl->resolve_deadline_ms) {
		resolve_again_in(ctl, RESOLVE_POLL_MS);
		return;
	}
	/* a name that fails keeps its address; the others are followed */
	r = hashlb_config_resolve_finish_keep(ctl->resolving, ctl->resolve_job,
					      HASHLB_RESOLVE_TIMEOUT_MS, ctl->cfg, &failed, &err);
	ctl->resolve_job = NULL;
	/* a name that failed is said also when the others' addresses are refused (only the
	 * refusal was); a second failure of a name (out of memory...) stands for the round's.
	 * A name's failure has reason config; the names resolved, their backends refused, say
	 * what is wrong with them (past table_memory, 65,535 backends, a duplicate name, a
	 * table_size below the backends, the build's cap): before, only the first two were
	 * told from a name's failure, the others logged as names not resolved */
	refused = r < 0 && err.reason != HASHLB_ERR_CONFIG && err.reason != HASHLB_ERR_NOMEM &&
		  err.reason != HASHLB_ERR_SYSTEM;
	named = failed.reason != HASHLB_ERR_NONE && (r == 0 || refused);
	if (named)
		resolve_failed(ctl, RESOLVE_NOT_RESOLVED, &failed, true);
	else if (failed.reason == HASHLB_ERR_NONE && (r == 0 || refused))
		resolve_cleared(ctl, RESOLVE_NOT_RESOLVED);
	if (r < 0) {
		/* the names resolved, their backends refused (refused, above), or a name failed
		 * beyond keeping its address */
		resolve_failed(ctl, refused ? RESOLVE_REFUSED : RESOLVE_NOT_RESOLVED, &err, !named);
		resolve_drop(ctl);
	} else {
		resolve_apply(ctl, failed.reason == HASHLB_ERR_NONE);
	}
	heap_trim_later(ctl);
	resolve_again_in(ctl, every);
}

/* The reload counts of the hashlb this one replaces, from its handover <text>
 * (HLB_HANDOVER_RELOADS), carried on; none there (a hashlb of before): 0. */
static void reloads_take(struct hlb_control *ctl, const char *text)
{
	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		uint64_t ok, failed;

		if (!strncmp(l, "reloads ", 8) &&
		    sscanf(l, "reloads ok=%" SCNu64 " failed=%" SCNu64, &ok, &failed) == 2) {
			ctl->reloads_ok = ok;
			ctl->reloads_failed = failed;
			return;
		}
	}
}

int hlb_control_new(struct hashlb_config *cfg, const char *config_path, struct hlb_loop *loop,
		    const struct hlb_pool_env *env, hlb_control_log_fn log, void *log_arg,
		    struct hlb_control **ret_ctl, struct hashlb_error *err)
{
	struct hlb_control *ctl = calloc(1, sizeof(*ctl));
	int ret;

	if (!ctl)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	ctl->loop = loop;
	hlb_timer_init(&ctl->resolve_timer, resolve_tick, ctl); /* before any hlb_control_free() */
	ctl->cfg = cfg;
	ctl->run_workers = cfg->workers;
	ctl->run_admin_addr = cfg->admin_addr;
	ctl->run_admin_addr_len = cfg->admin_addr_len;
	ctl->log = log;
	ctl->log_arg = log_arg;
	ctl->start_ms = hlb_now_ms();
	ctl->start_time = time(NULL);
	ctl->config_path = strdup(config_path ? config_path : (cfg->path ? cfg->path : ""));
	if (!ctl->config_path) {
		free(ctl);
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	}
	ctl->rcu = env->rcu;
	if (env->handover)
		reloads_take(ctl, env->handover);
	ret = hlb_pool_new(cfg, loop, env, &ctl->pool, err);
	if (ret < 0) {
		if (err->line && !err->file)
			err->file = cfg->path; /* the caller's, alive while it reports */
		goto err_free;
	}
	if (cfg->admin_addr_len) {
		ret = hlb_http_new(loop, (const struct sockaddr *)&cfg->admin_addr,
				   cfg->admin_addr_len, hlb_admin_handle, ctl, &ctl->http, err);
		if (ret < 0) {
			/* written in the file (not --admin, not the default): there */
			if (!cfg->admin_override && cfg->admin_pos.line) {
				err->file = cfg->path;
				err->line = cfg->admin_pos.line;
				err->column = cfg->admin_pos.column;
			}
			goto err_free;
		}
		hlb_http_on_refused(ctl->http, admin_refused, ctl);
		hlb_http_on_head(ctl->http, hlb_admin_head, ctl);
		hlb_http_on_fds(ctl->http, hlb_admin_fds, ctl);
		char qa[4 * sizeof("unix:") + 4 * 108 + 3];

		control_log(ctl, HLB_LOG_INFO, "admin listening", "addr=%s",
			    hlb_log_quote(hlb_http_address(ctl->http), qa, sizeof(qa)));
		admin_exposed_warn(ctl);
	}
	ctl->owned_cfg = cfg;
	config_warnings_log(ctl, cfg);
	resolve_schedule(ctl);
	*ret_ctl = ctl;
	return 0;

err_free:
	hlb_control_free(ctl);
	return ret;
}

void hlb_control_admin_reclaim(struct hlb_control *ctl)
{
	char qa[4 * sizeof("unix:") + 4 * 108 + 3];
	int ret;

	if (ctl->stopping || !ctl->http)
		return;
	ret = hlb_http_reclaim(ctl->http);
	if (ret > 0)
		control_log(ctl, HLB_LOG_INFO,
			    "admin listening again: the hashlb that took it over has exited",
			    "addr=%s", hlb_log_quote(hlb_http_address(ctl->http), qa, sizeof(qa)));
	else if (ret < 0)
		control_log(
			ctl, HLB_LOG_WARN,
			"cannot listen again on the admin path the hashlb that took it over left",
			"addr=%s err=%s",
			hlb_log_quote(hlb_http_address(ctl->http), qa, sizeof(qa)),
			strerrorname_np(-ret));
}

void hlb_control_stop(struct hlb_control *ctl, bool close_admin)
{
	ctl->stopping = true;
	if (close_admin) {
		/* the new hashlb serves the address: a request not answered yet is told so, a
		 * close carried out here with what it did */
		hlb_control_close_waits_answer(ctl);
		hlb_http_free_handed_over(ctl->http);
		ctl->http = NULL;
	}
	hlb_timer_cancel(ctl->loop, &ctl->resolve_timer);
	resolve_drop(ctl);
	if (ctl->pool) {
		hlb_pool_stop_checks(ctl->pool);
		hlb_pool_log_draining(ctl->pool);
	}
}

/*
 * <c>'s error when <w>, its backends' weights once applied, some set at run time and kept
 * over the config, make no table that the config's own would (the loader checked those):
 * every one 0, at the first backend the config gives weight 0 (the edit that leaves none),
 * else at the service; or a table too large to build (a ring's vnodes raised beside a
 * weight raised at run time), at the service.
 */
static int weights_fit_table(const struct hashlb_service_cfg *c, const uint32_t *w,
			     struct hashlb_error *err)
{
	struct hashlb_error why = { 0 };
	struct hashlb_pos at = c->pos;
	uint32_t set = 0;
	bool any = false;
	int r;

	for (uint32_t j = 0; j < c->n_backends; j++) {
		any |= w[j] != 0;
		set += w[j] != c->backends[j].weight;
	}
	if (!set)
		return 0;
	if (any) {
		r = hashlb_service_cfg_check_weights(c, w, &why);
		if (r == 0 || r == -ENOMEM)
			return r == 0 ? 0 : hashlb_err(err, r, why.reason, "%s", why.msg);
		r = hashlb_err(err, r, why.reason,
			       "service '%s', with the weight%s of %u backend%s set at run time "
			       "(hashlb ctl set) kept over the config: %s",
			       c->name, set == 1 ? "" : "s", set, set == 1 ? "" : "s", why.msg);
	} else {
		for (uint32_t j = c->n_backends; j-- > 0;)
			if (!c->backends[j].weight)
				at = c->backends[j].pos;
		r = hashlb_err(err, -EINVAL, HASHLB_ERR_ALL_WEIGHTS_ZERO,
			       "service '%s': every backend would have weight 0, %u of them by a "
			       "weight 0 set at run time (hashlb ctl set), kept over the config: "
			       "no table; give one a weight above 0",
			       c->name, set);
	}
	err->line = at.line;
	err->column = at.column;
	return r;
}

int hlb_control_table_memory(const struct hashlb_config *cfg, uint32_t n,
			     enum hashlb_table_memory_by by, hlb_control_table_bytes_fn bytes,
			     void *arg, uint64_t *total, struct hashlb_error *err)
{
	struct hashlb_error first = { 0 };
	int ret = 0;

	*total = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct hashlb_service_cfg *s;
		uint64_t own = bytes(arg, i, &s);
		/* past the cap, the first service said; the sum goes on over all of them */
		int r = hashlb_table_memory_add(cfg, s, own, by, total, ret ? NULL : &first);

		if (r == -ENOMEM)
			return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		if (r < 0 && ret == 0)
			ret = r;
	}
	if (ret < 0 && err)
		*err = first;
	return ret;
}

/* hlb_control_table_memory() over a config's services at the bytes counted for each. */
struct counted {
	const struct hashlb_config *cfg;
	const uint64_t *bytes;
};

static uint64_t counted_bytes(void *arg, uint32_t i, const struct hashlb_service_cfg **ret_s)
{
	const struct counted *c = arg;

	*ret_s = &c->cfg->services[i];
	return c->bytes[i];
}

int hlb_control_weights_fit(struct hlb_control *ctl, const struct hashlb_config *cfg,
			    struct hashlb_error *err)
{
	bool weight_set = hlb_pool_weight_set(ctl->pool);
	/* each table's most bytes with those weights, for table_memory: counted once the
	 * services' own refusals are said */
	uint64_t *bytes = NULL, total;
	int ret = 0;

	if (!ctl->steer_fits && !weight_set)
		return 0;
	if (weight_set && !(bytes = calloc(cfg->n_services ? cfg->n_services : 1, sizeof(*bytes))))
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	if (hlb_pool_weights_begin(ctl->pool) < 0) {
		free(bytes);
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	}
	for (uint32_t i = 0; i < cfg->n_services && ret == 0; i++) {
		const struct hashlb_service_cfg *c = &cfg->services[i];
		bool steered = ctl->steer_fits && c->steering == HASHLB_STEERING_KERNEL;
		uint32_t n = c->n_backends, *w;
		const char **names;
		bool *backup;

		if (!steered && !weight_set)
			continue;
		w = calloc(n ? n : 1, sizeof(*w));
		names = calloc(n ? n : 1, sizeof(*names));
		backup = calloc(n ? n : 1, sizeof(*backup));
		if (!w || !names || !backup || hlb_pool_weights_after(ctl->pool, c, w) < 0) {
			ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		} else {
			for (uint32_t j = 0; j < n; j++) {
				names[j] = c->backends[j].name;
				backup[j] = c->backends[j].backup;
			}
			ret = weights_fit_table(c, w, err);
			if (ret == 0 && bytes)
				bytes[i] = hashlb_service_cfg_weights_bytes_max(c, w);
			if (ret == 0 && steered)
				ret = ctl->steer_fits(ctl->steer_fits_arg, c, cfg, names, w, backup,
						      n, err);
		}
		free(w);
		free(names);
		free(backup);
	}
	hlb_pool_weights_end(ctl->pool);
	/* past table_memory: said once every service is checked (their own refusals first) */
	if (ret == 0 && bytes)
		ret = hlb_control_table_memory(cfg, cfg->n_services, HASHLB_TABLE_MEMORY_RUN_TIME,
					       counted_bytes, &(struct counted){ cfg, bytes },
					       &total, err);
	free(bytes);
	return ret;
}

/* hlb_control_steer_samples(), with <none> those with no program whose reason is known. */
static int steer_samples(struct hlb_control *ctl, bool none, struct hlb_steer_sample **ret_v,
			 uint32_t *ret_n)
{
	struct hlb_steer_sample *v = NULL, one;
	uint32_t n = 0;
	size_t cap = 0;
	int r;

	for (uint32_t i = 0;
	     ctl->steer_stats &&
	     (one.none = NULL, r = ctl->steer_stats(ctl->steer_stats_arg, i, &one)) != -ENOENT;
	     i++) {
		/* no program now: nothing to count; its reason, for /status */
		if (r < 0 && !(none && one.none && one.service))
			continue;
		if (hlb_grow((void **)&v, &cap, n + 1, sizeof(*v), 4) < 0) {
			free(v);
			return -ENOMEM;
		}
		v[n++] = one;
	}
	*ret_v = v;
	*ret_n = n;
	return 0;
}

int hlb_control_steer_samples(struct hlb_control *ctl, struct hlb_steer_sample **ret_v,
			      uint32_t *ret_n)
{
	return steer_samples(ctl, false, ret_v, ret_n);
}

int hlb_control_steer_samples_status(struct hlb_control *ctl, struct hlb_steer_sample **ret_v,
				     uint32_t *ret_n)
{
	return steer_samples(ctl, true, ret_v, ret_n);
}

const struct hlb_steer_sample *hlb_control_steer_sample_of(const struct hlb_steer_sample *v,
							   uint32_t n, const char *name)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(v[i].service, name) == 0)
			return &v[i];
	return NULL;
}

void hlb_control_handover(const struct hlb_control *ctl, struct hlb_buf *o)
{
	hlb_pool_handover(ctl->pool, o);
	if (ctl->reloads_ok || ctl->reloads_failed) /* none: the new one's 0 says it */
		hlb_buf_printf(o, HLB_HANDOVER_RELOADS, ctl->reloads_ok, ctl->reloads_failed);
}

void hlb_control_free(struct hlb_control *ctl)
{
	if (!ctl)
		return;
	hlb_http_free(ctl->http);
	hlb_control_close_waits_free(ctl);
	hlb_timer_cancel(ctl->loop, &ctl->resolve_timer);
	resolve_drop(ctl);
	hlb_pool_free(ctl->pool);
	hashlb_config_free(ctl->owned_cfg);
	free(ctl->config_path);
	free(ctl);
}

/* <err> refused the reload, the first of <errors> the file has (0 or 1: <err> alone) */
static void reload_failed(struct hlb_control *ctl, const char *by, const struct hashlb_error *err,
			  size_t errors)
{
	char kv[HLB_LOG_CONFIG_ERROR_MAX], more[96] = "";

	ctl->reloads_failed++;
	ctl->last_reload_failed = true;
	ctl->last_reload_time = time(NULL);
	ctl->last_reload_err = *err;
	ctl->last_reload_errors = errors > 1 ? errors : 1;
	if (err->file) {
		snprintf(ctl->last_reload_file, sizeof(ctl->last_reload_file), "%s", err->file);
		ctl->last_reload_err.file = ctl->last_reload_file;
	}
	/* one line still: the count, and where the rest are said */
	if (errors > 1)
		snprintf(more, sizeof(more), " errors=%zu note=\"hashlb check lists every error\"",
			 errors);
	control_log(ctl, HLB_LOG_ERROR, "reload failed, keeping the running config", "%s by=%s%s",
		    hlb_log_config_error(ctl->config_path, err, kv, sizeof(kv)), by, more);
}

/*
 * A service of <cfg> that would listen where this process's admin endpoint
 * does (the loader checks the config's own admin address, which a reload
 * does not apply: that changes on restart only).
 */
static int admin_clash(struct hlb_control *ctl, const struct hashlb_config *cfg,
		       struct hashlb_error *err)
{
	struct sockaddr_storage admin;

	if (!ctl->http || hlb_http_sockname(ctl->http, &admin) < 0)
		return 0;
	for (uint32_t i = 0; i < cfg->n_services; i++) {
		const struct hashlb_service_cfg *s = &cfg->services[i];

		if (!hashlb_admin_clash(&admin, sizeof(admin), s))
			continue;
		hashlb_err(err, -EADDRINUSE, HASHLB_ERR_CONFIG,
			   "service '%s': listen address %s clashes with the admin endpoint this "
			   "process serves at %s (the admin address changes on restart only)",
			   s->name, s->listen, hlb_http_address(ctl->http));
		err->line = s->listen_pos.line;
		err->column = s->listen_pos.column;
		return -EADDRINUSE;
	}
	return 0;
}

static const char *workers_name(uint32_t n, char *buf, size_t size)
{
	if (!n)
		return "auto";
	snprintf(buf, size, "%u", n);
	return buf;
}

static int reload(struct hlb_control *ctl, const char *by, struct hashlb_error *err)
{
	/* qp: the config's path, or its admin address (a Unix socket's path, 108 bytes) */
	char qp[HLB_LOG_PATH_MAX], qs[HLB_LOG_QUOTED_MAX(sizeof("unix:") + 108)];
	struct hashlb_error local = { 0 };
	struct hashlb_error_list errs = { 0 };
	struct hlb_pool_changes changes = { 0 };
	char w0[16], w1[16];
	struct hashlb_config *cfg;
	int ret;

	if (!err)
		err = &local;
	/* with the running config: a backend stays where it is while its name
	 * still has that address, though the answer rotated */
	/* every error counted: the refusal says how many more than the first the file has */
	ret = hashlb_config_load_after_list(ctl->config_path, load_flags(ctl), ctl->cfg, &cfg, err,
					    &errs);
	if (ret < 0)
		reload_failed(ctl, by, err, errs.total);
	hashlb_error_list_free(&errs);
	if (ret < 0)
		return ret;
	ret = admin_clash(ctl, cfg, err);
	if (ret == 0)
		ret = hlb_control_weights_fit(ctl, cfg, err);
	if (ret == 0)
		ret = hlb_pool_apply(ctl->pool, cfg, &changes, err);
	if (ret < 0) {
		if (err->line && !err->file)
			err->file = ctl->config_path;
		hashlb_config_free(cfg);
		reload_failed(ctl, by, err, 1);
		return ret;
	}
	keep_overrides(ctl->cfg, cfg);
	/* said in the log and in the reload's answer, where "reloaded" alone
	 * read as every edit applied */
	ctl->restart_admin = ctl->run_admin_addr_len != cfg->admin_addr_len ||
			     memcmp(&ctl->run_admin_addr, &cfg->admin_addr, cfg->admin_addr_len);
	ctl->restart_workers = ctl->run_workers != cfg->workers;
	ctl->restart_only[0] = '\0';
	if (ctl->restart_admin) {
		const char *serving = ctl->http ? hlb_http_address(ctl->http) : "off";
		const char *config = cfg->admin ? cfg->admin : "off";

		control_log(ctl, HLB_LOG_WARN, "reload: the admin address changes on restart only",
			    "serving=%s config=%s", hlb_log_quote(serving, qs, sizeof(qs)),
			    hlb_log_quote(config, qp, sizeof(qp)));
		snprintf(ctl->restart_only, sizeof(ctl->restart_only),
			 "admin (serving %s, config %s)", serving, config);
	}
	if (ctl->restart_workers) {
		const char *serving = workers_name(ctl->run_workers, w0, sizeof(w0));
		const char *config = workers_name(cfg->workers, w1, sizeof(w1));
		size_t n = strlen(ctl->restart_only);

		control_log(ctl, HLB_LOG_WARN,
			    "reload: the number of workers changes on restart only",
			    "serving=%s config=%s", serving, config);
		snprintf(ctl->restart_only + n, sizeof(ctl->restart_only) - n,
			 "%sworkers (serving %s, config %s)", n ? ", " : "", serving, config);
	}
	config_warnings_log(ctl, cfg);
	ctl->rehashed = changes.services_rehashed;
	snprintf(ctl->first_rehashed, sizeof(ctl->first_rehashed), "%s", changes.first_rehashed);
	/* Publish now: "reloaded" means the new tables are in use. Each rebuilt says what it
	 * moved, against the table in use before. */
	hlb_pool_flush_reload(ctl->pool, &ctl->moved);
	/* Snapshots copy what workers read, and the pool now points into <cfg>. */
	hashlb_config_free(ctl->owned_cfg);
	ctl->owned_cfg = cfg;
	ctl->cfg = cfg;
	ctl->reloads_ok++;
	ctl->last_reload_failed = false;
	ctl->last_reload_time = time(NULL);
	/* a reload read as "the config is what runs": a backend drained by hand stays
	 * drained through it, and only a restart would undo that */
	ctl->overrides =
		hlb_pool_overrides(ctl->pool, ctl->first_override, sizeof(ctl->first_override));
	if (ctl->overrides) {
		char qo[HLB_LOG_QUOTED_MAX(sizeof(ctl->first_override))];

		control_log(ctl, HLB_LOG_INFO, "reload: run-time settings kept over the config",
			    "backends=%u first=%s", ctl->overrides,
			    hlb_log_quote(ctl->first_override, qo, sizeof(qo)));
	}
	control_log(ctl, HLB_LOG_INFO, "reloaded",
		    "config=%s services=%u services_added=%u services_removed=%u "
		    "services_changed=%u backends_added=%u backends_removed=%u backends_changed=%u "
		    "by=%s",
		    hlb_log_quote(ctl->config_path, qp, sizeof(qp)), cfg->n_services,
		    changes.services_added, changes.services_removed, changes.services_changed,
		    changes.backends_added, changes.backends_removed, changes.backends_changed, by);
	admin_exposed_warn(ctl);
	resolve_recovered(ctl); /* the reload resolved every name */
	resolve_schedule(ctl);
	if (ctl->reloaded)
		ctl->reloaded(ctl->reloaded_arg, cfg);
	return 0;
}

/*
 * A round under way is held while the reload runs (its lookups, of the
 * same names, would hold the reload's), given up by a reload applied (it
 * replaces the round's config), and goes on after one that failed, its
 * deadline moved by the time the reload took: a failed reload changes
 * nothing. Given up, the names were asked again only a period later.
 */
int hlb_control_reload(struct hlb_control *ctl, const char *by, struct hashlb_error *err)
{
	struct hashlb_error rerr = { 0 };
	uint64_t began = hlb_now_ms();
	int ret;

	if (ctl->resolve_job)
		hashlb_resolve_pause(ctl->resolve_job);
	ret = reload(ctl, by, err);
	if (ctl->resolve_job) { /* the reload failed */
		ctl->resolve_deadline_ms += hlb_now_ms() - began;
		if (hashlb_resolve_resume(ctl->resolve_job, &rerr) < 0) {
			resolve_failed(ctl, RESOLVE_NOT_RESOLVED, &rerr, true);
			resolve_drop(ctl);
			resolve_again_in(ctl, ctl->cfg->resolve_every_ms);
		}
	}
	heap_trim_later(ctl);
	return ret;
}
