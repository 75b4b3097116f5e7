// SPDX-License-Identifier: MIT
/*
 * YAML config -> struct hashlb_config, with every default filled in and
 * every error placed at file:line:column. The layout is documented in
 * configs/full.yaml; the keys accepted are the tables below.
 *
 * Validation is strict on purpose: an unknown key, a wrong type, a value out
 * of range or a parameter that does not apply to the chosen scheme is an
 * error, never ignored, because a typo that is silently ignored leaves a
 * default in force that the operator believes they changed.
 */
#include <ctype.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <wchar.h>

#include "hashlb/config.h"
#include "hashlb/grow.h"
#include "hashlb/steer.h"
#include "config-internal.h"
#include "keymap.h"
#include "ytree.h"

#define CONFIG_FILE_MAX (16u << 20) /* a config larger than this is a mistake */
#define WORKERS_MAX 256u /* HLB_WORKERS_MAX, what the data plane runs */
#define RESOLVE_EVERY_MAX_MS 86400000u /* 1 day */
#define ADMIN_DEFAULT "127.0.0.1:9901"

/* Ranges, in milliseconds for durations. */
#define CONNECT_TIMEOUT_MAX (10u * 60 * 1000)
#define IDLE_TIMEOUT_MAX (7u * 24 * 3600 * 1000)
#define DRAIN_TIMEOUT_MAX (3600u * 1000)
#define QUEUE_TIMEOUT_MAX (10u * 60 * 1000)
#define SLOW_START_MAX (3600u * 1000)
#define HEALTH_INTERVAL_MIN 10u
#define HEALTH_INTERVAL_MAX (3600u * 1000)
#define HEALTH_TIMEOUT_MAX (60u * 1000)
#define HEALTH_COUNT_MAX 100u
#define MAX_CONNECTIONS_MAX HASHLB_MAX_CONNECTIONS_MAX
#define KEEPALIVE_SECS_MAX 32767u /* the kernel's MAX_TCP_KEEPIDLE and MAX_TCP_KEEPINTVL */
#define KEEPALIVE_COUNT_MAX 127u /* MAX_TCP_KEEPCNT */
#define PREFIXES_MAX 4096u /* accept_proxy_from, allow_clients, deny_clients */
#define CHECK_PAYLOAD_MAX 1024u /* health send/expect: one segment, no partial writes */
#define CONNECT_RETRIES_MAX 32u /* HLB_PREFERENCE_MAX - 1: what a connection walks */
#define CONNECTION_RATE_MAX 1000000u /* max_connection_rate: a microsecond apart */
#define BALANCE_FACTOR_MAX 100.0
#define SERVICE_NAME_MAX 64u

struct loader {
	const char *name; /* the file, as errors name it */
	struct hashlb_error *err;
	unsigned int flags; /* HASHLB_LOAD_* */
	/* The alias whose value is being read, if any: via_begin(). */
	const struct ynode *via;
	/* The mapping of settings being read (timeouts, health, keepalive), NULL at a
	 * service's or the file's top: a bare duration's warning names it when an
	 * anchor's value is read for two settings of one name */
	const char *section;
	/* HASHLB_LOAD_ADMIN_ONLY of a text with a YAML error (in <err>): the tree is
	 * what came before it (ydoc_parse_prefix()) */
	bool prefix;
	/* the config being filled: its bare_durations are noted as they are read */
	struct hashlb_config *cfg;
	size_t bare_cap; /* cfg->bare_durations' room */
	/* Every error, when the caller wants them all (hashlb_config_load_list()): loading goes
	 * on past an error where what follows does not depend on the value refused (go_on()).
	 * NULL: it stops at the first, as a reload needs no more. */
	struct hashlb_error_list *list;
	size_t n_errs; /* errors so far; the first is in <err> */
	size_t svc_mark; /* n_errs as the service being read began */
	bool via_errs; /* an error was found in a value read through an alias (record()) */
	/* table_memory or admin refused: the services are not checked against them */
	bool table_memory_bad, admin_bad;
	int first_ret; /* what the first one returned: -EINVAL, or -E2BIG past table_memory */
};

/*
 * Whether loading stops at error <r> of a value (r < 0; false for 0): with no list wanted, or
 * out of memory. Else the key that failed keeps its default and the next key is read: an
 * operator fixing a file of five mistakes sees five errors, not one per run. What is checked
 * against another key's value is checked only while no error came before it in its unit
 * (clean()): a value refused, left at its default, must not make a second error that is no
 * mistake of the file's.
 */
static bool stop(const struct loader *ld, int r)
{
	return r < 0 && (!ld->list || r == -ENOMEM);
}

/* Whether no error was found since <mark> (ld->n_errs then). */
static bool clean(const struct loader *ld, size_t mark)
{
	return ld->n_errs == mark;
}

/* Whether the service being read has no error so far: what one of its keys is checked
 * against (steering, a limit) was read as written. */
static bool svc_clean(const struct loader *ld)
{
	return clean(ld, ld->svc_mark);
}

/*
 * <msg> into <out> (4 * strlen(<msg>) + 1 bytes hold it whole) with its
 * control characters escaped (a value quoted back from a block scalar,
 * "127.0.0.1:80\n", as \n): an error is one line, FILE:LINE:COLUMN: what,
 * for a reader and for grep alike. Characters that show as nothing or as a
 * space (\u200b, \u00a0) are written as \uXXXX, so that "unknown key
 * 'scheme\u200b'" does not read "unknown key 'scheme'".
 */
static void one_line(const char *msg, char *out)
{
	size_t o = 0, len;

	for (const char *p = msg; *p; p += len) {
		unsigned char c = (unsigned char)*p;
		int32_t cp = yutf8_decode((const unsigned char *)p, SIZE_MAX, &len);

		if (c == '\n' || c == '\t' || c == '\r') {
			out[o++] = '\\';
			out[o++] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
		} else if (c < 0x20 || c == 0x7f || cp < 0) {
			o += (size_t)sprintf(out + o, "\\x%02x", c);
		} else if (yinvisible(cp)) {
			o += (size_t)sprintf(out + o, "\\u%04x", (unsigned)cp);
		} else {
			memcpy(out + o, p, len);
			o += len;
		}
	}
	out[o] = '\0';
}

/* The length of <msg> without the alias fail() names after it, if any. */
static size_t without_via(const char *msg)
{
	static const char via[] = " (through the alias at line ";
	const char *at = NULL;

	for (const char *p = strstr(msg, via); p; p = strstr(p + 1, via))
		at = p;
	return at ? (size_t)(at - msg) : strlen(msg);
}

/*
 * Whether <e> is listed already in <l>: at the same place, in the same words but for the
 * alias it was read through. A value an alias repeats is read once per alias, and wrong
 * once it is one mistake: "health: &h {interval: 1x}" and "health: *h" in another service
 * listed the interval twice, at one line:column.
 */
static bool listed(const struct hashlb_error_list *l, const struct hashlb_error *e)
{
	size_t n = without_via(e->msg);

	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].line == e->line && l->v[i].column == e->column &&
		    without_via(l->v[i].msg) == n && !memcmp(l->v[i].msg, e->msg, n))
			return true;
	return false;
}

/* Error <e> found: the first into ld->err, each into ld->list (the first HASHLB_ERRORS_KEPT,
 * all counted, one listed already through an alias not again); <ret> returned. <via>: <e> is
 * in a value read through an alias. */
static int record(struct loader *ld, const struct hashlb_error *e, int ret, bool via)
{
	struct hashlb_error_list *l = ld->list;

	if (!ld->n_errs++) {
		ld->first_ret = ret;
		if (ld->err)
			*ld->err = *e;
	}
	if (!l)
		return ret;
	/* counted in n_errs still: what is checked against the value is not checked */
	ld->via_errs |= via;
	if (ld->via_errs && listed(l, e))
		return ret;
	if (l->n == l->cap && l->cap < HASHLB_ERRORS_KEPT) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		struct hashlb_error *v;

		cap = cap < HASHLB_ERRORS_KEPT ? cap : HASHLB_ERRORS_KEPT;
		v = realloc(l->v, cap * sizeof(*v));
		if (v) { /* else counted, not listed */
			l->v = v;
			l->cap = cap;
		}
	}
	if (l->n < l->cap)
		l->v[l->n++] = *e;
	l->total++;
	return ret;
}

/*
 * The error <fmt> at <at>, one line (one_line()), and where alias ld->via
 * is; cut in its middle if it is longer than the error holds
 * (hashlb_err_fit()): a key or value quoted whole (a valid backend name has
 * 255 bytes) must not push out what is wrong with it.
 */
__attribute__((format(printf, 3, 4))) static int fail(struct loader *ld, const struct ynode *at,
						      const char *fmt, ...)
{
	struct hashlb_error e;
	char *full = NULL, *out = NULL;
	va_list ap;
	int ret, n;

	va_start(ap, fmt);
	ret = hashlb_verr(&e, -EINVAL, HASHLB_ERR_CONFIG, fmt, ap);
	va_end(ap);
	if (!ld->err && !ld->list)
		return record(ld, &e, ret, false);
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n >= 0)
		full = malloc((size_t)n + 1);
	if (full)
		out = malloc(4 * (size_t)n + 64);
	if (out) {
		va_start(ap, fmt);
		vsnprintf(full, (size_t)n + 1, fmt, ap);
		va_end(ap);
		one_line(full, out);
		if (ld->via && at && at != ld->via)
			sprintf(out + strlen(out), " (through the alias at line %d, column %d)",
				ld->via->pos.line, ld->via->pos.column);
		hashlb_err_fit(e.msg, sizeof(e.msg), out);
	}
	free(full);
	free(out);
	e.file = ld->name;
	e.line = at ? at->pos.line : 1;
	e.column = at ? at->pos.column : 1;
	return record(ld, &e, ret, ld->via && at && at != ld->via);
}

/*
 * While the value of <v> is read, until ld->via is set back to what this
 * returns (after an error too: loading may go on, stop()): if <v> is an
 * alias (and no alias around it was), an error inside its value says where
 * the alias is. The value's nodes are the anchor's and point there, where
 * the text is, but the key that refused it is the alias's: "health: &h
 * {interval: 100ms}" then "keepalive: *h" was "'interval' 100ms is out of
 * range 1s..32767s" at the health line, and nothing else.
 */
static const struct ynode *via_begin(struct loader *ld, const struct ynode *v)
{
	const struct ynode *old = ld->via;

	if (!old && v && v->alias)
		ld->via = v;
	return old;
}

static int nomem(struct loader *ld)
{
	return hashlb_err(ld->err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
}

/*
 * What <n> is, for "expected X, found Y" messages: a scalar is quoted back
 * (shortened), so the reader sees the value that was refused.
 */
struct found {
	char s[80];
};

/* The bytes of <s> that hold its characters of the first <max> bytes. */
static size_t char_cut(const char *s, size_t max)
{
	size_t n = 0, len;

	while (s[n] && yutf8_decode((const unsigned char *)s + n, SIZE_MAX, &len) >= 0 &&
	       n + len <= max)
		n += len;
	return n;
}

static struct found describe(const struct ynode *n)
{
	struct found f;

	if (n->type != YNODE_SCALAR || ynode_is_null(n))
		snprintf(f.s, sizeof(f.s), "%s", ynode_kind(n));
	else if (n->len > 40)
		snprintf(f.s, sizeof(f.s), "%s '%.*s...'", n->quoted ? "the string" : "the value",
			 (int)char_cut(n->text, 37), n->text);
	else
		snprintf(f.s, sizeof(f.s), "%s '%s'", n->quoted ? "the string" : "the value",
			 n->text);
	return f;
}

/* --- keys ------------------------------------------------------------- */

/*
 * Edits from <a> to <b>, letter case aside: a letter inserted, deleted,
 * replaced, or two neighbours swapped ("nmae" for "name": one slip, which
 * insertions and deletions alone count as two).
 */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t rows[3][64], *prev2 = rows[0], *prev = rows[1], *row = rows[2];

	if (la >= 63 || lb >= 63)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			int ai = tolower((unsigned char)a[i - 1]),
			    bj = tolower((unsigned char)b[j - 1]);
			size_t best = prev[j - 1] + (ai != bj);

			if (prev[j] + 1 < best)
				best = prev[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			if (i > 1 && j > 1 && ai == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == bj && prev2[j - 2] + 1 < best)
				best = prev2[j - 2] + 1;
			row[j] = best;
		}
		size_t *t = prev2;

		prev2 = prev;
		prev = row;
		row = t;
	}
	return prev[lb];
}

/* The valid key closest to <key>, if close enough to be a likely typo. */
static const char *closest_key(const char *key, const char *const *keys)
{
	const char *best = NULL;
	size_t best_d = SIZE_MAX;

	for (size_t i = 0; keys[i]; i++) {
		size_t d = edit_distance(key, keys[i]);

		if (d < best_d) {
			best_d = d;
			best = keys[i];
		}
	}
	/* Close enough to be a typo: "tabel_size", "timeout" for "timeouts". */
	if (best && best_d <= 1 + strlen(best) / 5)
		return best;
	return NULL;
}

/* The longest valid key of 4 letters or more that <key> starts with, for a key that says more
 * than hashlb's name for it: "listen_address", "healthcheck", "admin_address" (other tools'
 * names), too far apart to be a typo. NULL if none. Only where the valid key ends a word in
 * <key>: an '_' follows it ('-' is one here), or "check" does ("healthcheck", "healthchecks",
 * the one name written as one word); 'portal' is no 'port', 'fallback' no 'fall', 'namespace'
 * no 'name'. */
static const char *prefix_key(const char *key, const char *const *keys)
{
	const char *best = NULL;

	for (size_t i = 0; keys[i]; i++) {
		size_t n = strlen(keys[i]);

		if (n < 4 || strncasecmp(key, keys[i], n) != 0)
			continue;
		if (key[n] != '_' && strncasecmp(key + n, "check", 5) != 0)
			continue;
		if (!best || n > strlen(best))
			best = keys[i];
	}
	/* Not where a longer valid key goes on from it as <key> does, past the '_': <key> is of
	 * that key's family, too far for a typo of it, and not the short key's
	 * ('max_connections_per_source_ip' is no total 'max_connections'; '_total' is). */
	for (size_t i = 0; best && keys[i]; i++) {
		size_t n = strlen(best);

		if (strlen(keys[i]) > n + 1 && strncasecmp(keys[i], best, n) == 0 &&
		    keys[i][n] == '_' &&
		    tolower((unsigned char)keys[i][n + 1]) == tolower((unsigned char)key[n + 1]))
			return NULL;
	}
	return best;
}

static void underscore_variant(const char *key, char *buf, size_t len)
{
	snprintf(buf, len, "%s", key);
	for (char *p = buf; *p; p++) {
		if (*p == '-')
			*p = '_';
	}
}

static const char *const top_keys[] = {
	"workers", "admin", "resolve_every", "table_memory", "services", NULL,
};

static const char *const service_keys[] = {
	"name",
	"listen",
	"scheme",
	"vnodes",
	"table_size",
	"hash_key",
	"hash_prefix",
	"seed",
	"timeouts",
	"max_connections",
	"max_connections_per_client",
	"client_prefix",
	"max_connection_rate",
	"connect_retries",
	"slow_start",
	"balance_factor",
	"steering",
	"interface",
	"steering_flows",
	"proxy_protocol",
	"accept_proxy",
	"accept_proxy_from",
	"allow_clients",
	"deny_clients",
	"keepalive",
	"log_connections",
	"abort_on_close",
	"source",
	"health",
	"backends",
	NULL,
};

static const char *const src_prefix_keys[] = { "ipv4", "ipv6", NULL };
static const char *const timeout_keys[] = { "connect", "idle", "drain", "queue", NULL };
static const char *const health_keys[] = {
	"enabled", "interval", "timeout",	"rise",	   "fall",	   "port",
	"send",	   "expect",   "close_on_down", "passive", "passive_hold", NULL,
};
static const char *const keepalive_keys[] = { "enabled", "idle",	 "interval",
					      "count",	 "user_timeout", NULL };
static const char *const backend_keys[] = {
	"name",	  "address",	     "each_address", "weight", "state", "max_connections",
	"backup", "close_on_return", NULL,
};

/* The most keys a mapping of the config takes: check_map() notes where each is first. */
#define MAP_KEYS_MAX 32u
#define MAP_KEYS_FIT(keys)                                                   \
	_Static_assert(sizeof(keys) / sizeof((keys)[0]) <= MAP_KEYS_MAX + 1, \
		       #keys " has more keys than check_map() notes")
MAP_KEYS_FIT(top_keys);
MAP_KEYS_FIT(service_keys);
MAP_KEYS_FIT(src_prefix_keys);
MAP_KEYS_FIT(timeout_keys);
MAP_KEYS_FIT(health_keys);
MAP_KEYS_FIT(keepalive_keys);
MAP_KEYS_FIT(backend_keys);

/* Where each key lives, to tell a key written at the wrong level where it goes. */
static const struct {
	const char *const *keys;
	const char *where;
} key_homes[] = {
	{ top_keys, "at the top level" },
	{ service_keys, "in a service" },
	{ src_prefix_keys, "in a service's 'hash_prefix' or 'client_prefix'" },
	{ timeout_keys, "in a service's 'timeouts'" },
	{ health_keys, "in a service's 'health'" },
	{ keepalive_keys, "in a service's 'keepalive'" },
	{ backend_keys, "in a backend" },
};

/* Where <key> belongs, if it is valid in another mapping than <keys>. */
static const char *key_home(const char *key, const char *const *keys)
{
	for (size_t i = 0; i < sizeof(key_homes) / sizeof(key_homes[0]); i++) {
		if (key_homes[i].keys == keys)
			continue;
		for (size_t j = 0; key_homes[i].keys[j]; j++) {
			if (strcmp(key, key_homes[i].keys[j]) == 0)
				return key_homes[i].where;
		}
	}
	return NULL;
}

/*
 * <map>, which should be the mapping of settings <what> (timeouts, health, a
 * prefix) with <keys>, written as something else: the error names the keys
 * it takes, and when <map> is a boolean and <if_bool> (NULL: none) has one,
 * its hint, <if_bool>[0] for false, [1] for true: "health: false" says how
 * checks are turned off. "health must be a mapping of keys to values, found
 * the value 'off'" left the operator to find out which keys, and that
 * "enabled: false" is the way. The caller says the hint (it used to be
 * chosen by comparing <keys> with health_keys' address).
 */
static int bool_of(const struct ynode *v);

static const char *const health_bool_hints[2] = {
	": to turn the checks off, write health: {enabled: false}",
	": checks are on by default, leave 'health' out or write health: {enabled: true}",
};

static int fail_settings(struct loader *ld, const struct ynode *map, const char *const *keys,
			 const char *what, const char *const *if_bool)
{
	char list[200] = "";
	size_t n = 0;
	int b = if_bool ? bool_of(map) : -1;
	const char *hint = b == 0 || b == 1 ? if_bool[b] : "";

	for (size_t i = 0; keys[i] && n < sizeof(list); i++)
		n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", i ? ", " : "", keys[i]);
	return fail(ld, map, "'%s' must be a mapping of its settings (%s), found %s%s", what, list,
		    describe(map).s, hint);
}

/*
 * Check that <map> is a mapping whose keys are scalars from <keys>, each
 * at most once. <what> names the mapping in messages ("service", ...).
 * A service, a backend or the file, whose keys are too long a list to
 * print: they are told one by one when unknown (check_settings() for a
 * mapping of settings, which names them all).
 */
static int key_check(struct loader *ld, const struct ynode *map, const char *const *keys,
		     const char *what, size_t i, size_t *first);

static int check_map(struct loader *ld, const struct ynode *map, const char *const *keys,
		     const char *what)
{
	size_t first[MAP_KEYS_MAX] = { 0 }; /* each known key's index + 1 where first written */

	if (map->type != YNODE_MAP)
		return fail(ld, map, "%s must be a mapping of keys to values, found %s", what,
			    describe(map).s);
	for (size_t i = 0; i < ynode_pairs(map); i++) {
		const struct ynode *k = ynode_key(map, i);
		int r = key_check(ld, map, keys, what, i, first);

		/* what is read of the mapping is found by name: a key no scalar stops it */
		if (r < 0 && (stop(ld, r) || k->type != YNODE_SCALAR || strlen(k->text) != k->len))
			return r;
	}
	return 0;
}

/*
 * Key <i> of mapping <map> as check_map() checks it: 0, or its error. <first>: for each of
 * <keys>, the index + 1 of the key that wrote it first (0: none yet), as a duplicate is one
 * of them: looked for among the keys before it, a duplicate after 60,000 unknown keys took
 * 60,000 comparisons, and a 16 MiB file of both minutes once loading went on past an error.
 */
static int key_check(struct loader *ld, const struct ynode *map, const char *const *keys,
		     const char *what, size_t i, size_t *first)
{
	const struct ynode *k = ynode_key(map, i);
	size_t known = 0; /* which of <keys>, + 1 */

	if (k->type != YNODE_SCALAR)
		return fail(ld, k, "a key in %s must be a plain name, found %s", what,
			    ynode_kind(k));
	if (strlen(k->text) != k->len)
		return fail(ld, k, "a key in %s must not contain NUL characters", what);
	for (size_t j = 0; keys[j]; j++) {
		if (strcmp(k->text, keys[j]) == 0) {
			known = j + 1;
			break;
		}
	}
	if (!known) {
		const char *hint, *home;
		char alt[64];

		if (strcmp(k->text, "<<") == 0)
			return fail(ld, k, "merge keys ('<<') are not supported in %s", what);
		/* connect_timeout, drain_timeout... (HAProxy's, Envoy's names) */
		if (keys == service_keys && k->len > 8 &&
		    strcmp(k->text + k->len - 8, "_timeout") == 0)
			for (size_t j = 0; timeout_keys[j]; j++)
				if (strlen(timeout_keys[j]) == k->len - 8 &&
				    strncmp(k->text, timeout_keys[j], k->len - 8) == 0)
					return fail(ld, k,
						    "unknown key '%s' in %s: timeouts go "
						    "under 'timeouts' (timeouts: {%s: ...})",
						    k->text, what, timeout_keys[j]);
		underscore_variant(k->text, alt, sizeof(alt));
		hint = closest_key(alt, keys);
		home = key_home(k->text, keys);
		/* not for a key valid elsewhere: its home says more than a prefix */
		if (!hint && !home)
			hint = prefix_key(alt, keys);
		if (hint && home)
			return fail(ld, k,
				    "unknown key '%s' in %s (did you mean '%s'? '%s' belongs %s)",
				    k->text, what, hint, k->text, home);
		if (hint)
			return fail(ld, k, "unknown key '%s' in %s (did you mean '%s'?)", k->text,
				    what, hint);
		if (home)
			return fail(ld, k, "unknown key '%s' in %s: it belongs %s", k->text, what,
				    home);
		return fail(ld, k, "unknown key '%s' in %s", k->text, what);
	}
	if (first[known - 1])
		return fail(ld, k, "duplicate key '%s' in %s (first at line %d)", k->text, what,
			    ynode_key(map, first[known - 1] - 1)->pos.line);
	first[known - 1] = i + 1;
	return 0;
}

/*
 * check_map() of the mapping of settings <what> with <keys> (timeouts, health, a prefix):
 * written as something else, it is refused naming the keys it takes (fail_settings(), with
 * <if_bool>'s hint for a boolean). Null
 * is read as the empty mapping, the defaults: "health:" with every key under it commented
 * out is null in YAML, and was refused as if it turned the checks off or on.
 */
static int check_settings(struct loader *ld, const struct ynode *map, const char *const *keys,
			  const char *what, const char *const *if_bool)
{
	if (ynode_is_null(map)) /* no pairs: map_get() finds no key in it */
		return 0;
	if (map->type != YNODE_MAP)
		return fail_settings(ld, map, keys, what, if_bool);
	return check_map(ld, map, keys, what);
}

static struct ynode *map_get(const struct ynode *map, const char *key)
{
	for (size_t i = 0; i < ynode_pairs(map); i++) {
		if (strcmp(ynode_key(map, i)->text, key) == 0)
			return ynode_value(map, i);
	}
	return NULL;
}

/* The key node of <key> in <map>, for errors about a key that is present. */
static struct ynode *map_key(const struct ynode *map, const char *key)
{
	for (size_t i = 0; i < ynode_pairs(map); i++) {
		if (strcmp(ynode_key(map, i)->text, key) == 0)
			return ynode_key(map, i);
	}
	return NULL;
}

/* --- scalar values ---------------------------------------------------- */

/* A scalar, whatever bytes it holds (a payload may hold NULs). */
static int want_scalar_bytes(struct loader *ld, const struct ynode *v, const char *key,
			     const char *expected)
{
	if (v->type != YNODE_SCALAR || ynode_is_null(v))
		return fail(ld, v, "'%s' must be %s, found %s", key, expected, describe(v).s);
	return 0;
}

/* A scalar without NULs: every other value is read as a C string, and
 * "ring\0x" must not pass as ring. */
static int want_scalar(struct loader *ld, const struct ynode *v, const char *key,
		       const char *expected)
{
	int r = want_scalar_bytes(ld, v, key, expected);

	if (r < 0)
		return r;
	if (strlen(v->text) != v->len)
		return fail(ld, v, "'%s' must not contain NUL characters", key);
	return 0;
}

static int get_string(struct loader *ld, const struct ynode *v, const char *key, char **ret)
{
	char *s;
	int r = want_scalar(ld, v, key, "a string");

	if (r < 0)
		return r;
	s = strdup(v->text);
	if (!s)
		return nomem(ld);
	*ret = s;
	return 0;
}

/*
 * A non-empty string of at most <max> bytes, NULs allowed ("\0" in a
 * double-quoted YAML string): a payload, kept with its length.
 */
static int get_bytes(struct loader *ld, const struct ynode *v, const char *key, uint32_t max,
		     char **ret, uint32_t *ret_len)
{
	char *s;
	int r = want_scalar_bytes(ld, v, key,
				  "a string (in double quotes for escapes: \"PING\\r\\n\")");

	if (r < 0)
		return r;
	if (v->len == 0 || v->len > max)
		return fail(ld, v, "'%s' must be 1..%u bytes, found %" PRIu32, key, max, v->len);
	s = malloc(v->len);
	if (!s)
		return nomem(ld);
	memcpy(s, v->text, v->len);
	*ret = s;
	*ret_len = (uint32_t)v->len;
	return 0;
}

/*
 * Why <s>, no integer, is none for YAML 1.2 where it looks like one: "" if
 * it does not.
 */
static const char *int_hint(const char *s)
{
	const char *d = s + (*s == '+' || *s == '-');

	if (d[0] == '0' && (d[1] == 'X' || d[1] == 'O'))
		return " (YAML writes hexadecimal and octal with a lowercase 0x and 0o)";
	if (d != s && d[0] == '0' && (d[1] == 'x' || d[1] == 'o'))
		return " (YAML's hexadecimal and octal take no sign)";
	if (d[0] == '0' && (d[1] == 'b' || d[1] == 'B'))
		return " (YAML 1.2 has no binary integers: write it in decimal or 0x hexadecimal)";
	if (*d >= '0' && *d <= '9' && strchr(d, '_'))
		return " (YAML 1.2 integers have no '_' between digits: write the digits alone)";
	return "";
}

/*
 * A YAML integer in <lo>..<hi>, no quotes, as YAML 1.2's core schema reads
 * one: decimal with an optional sign ("010" is ten, not C's eight), or 0x
 * hexadecimal or 0o octal without one, their prefix in lowercase. One past
 * the range either way, negative or past 64 bits, is refused with the
 * range, as one just past it is.
 */
static int get_u64_range(struct loader *ld, const struct ynode *v, const char *key, uint64_t lo,
			 uint64_t hi, uint64_t *ret)
{
	const char *s = v->text;
	bool negative = false, over = false;
	uint64_t val = 0;
	unsigned base = 10;
	int r = want_scalar(ld, v, key, "an integer");

	if (r < 0)
		return r;
	if (v->quoted)
		return fail(ld, v, "'%s' must be an integer, found the quoted string \"%s\"", key,
			    v->text);
	if (s[0] == '0' && s[1] == 'x') {
		base = 16;
		s += 2;
	} else if (s[0] == '0' && s[1] == 'o') {
		base = 8;
		s += 2;
	} else if (*s == '+' || *s == '-') {
		negative = *s++ == '-';
	}
	if (!*s)
		goto bad;
	for (; *s; s++) {
		unsigned d;

		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = (unsigned)(*s - 'A' + 10);
		else
			goto bad;
		if (d >= base)
			goto bad;
		if (val > (UINT64_MAX - d) / base)
			over = true;
		val = val * base + d;
	}
	if (over || (negative && val) || val < lo || val > hi)
		return fail(ld, v, "'%s' %s is out of range %" PRIu64 "..%" PRIu64, key, v->text,
			    lo, hi);
	*ret = val;
	return 0;
bad:
	return fail(ld, v, "'%s' must be an integer, found '%s'%s", key, v->text,
		    int_hint(v->text));
}

static int get_u32_range(struct loader *ld, const struct ynode *v, const char *key, uint32_t lo,
			 uint32_t hi, uint32_t *ret)
{
	uint64_t val;
	int r = get_u64_range(ld, v, key, lo, hi, &val);

	if (r < 0)
		return r;
	*ret = (uint32_t)val;
	return 0;
}

/* What <text> would read as unquoted: 1 true, 0 false, -1 neither. */
static int bool_text(const char *text)
{
	static const char *const yes[] = { "true", "yes", "on" };
	static const char *const no[] = { "false", "no", "off" };

	for (size_t i = 0; i < 3; i++) {
		if (strcasecmp(text, yes[i]) == 0)
			return 1;
		if (strcasecmp(text, no[i]) == 0)
			return 0;
	}
	return -1;
}

/* What plain scalar <v> reads as: 1 true, 0 false, -1 neither. */
static int bool_of(const struct ynode *v)
{
	if (v->type != YNODE_SCALAR || v->quoted)
		return -1;
	return bool_text(v->text);
}

static int get_bool(struct loader *ld, const struct ynode *v, const char *key, bool *ret)
{
	int r = want_scalar(ld, v, key, "true or false");

	if (r < 0)
		return r;
	r = bool_of(v);
	if (r >= 0) {
		*ret = r;
		return 0;
	}
	if (v->quoted) /* not "found 'true'": the quotes are what is wrong */
		return fail(ld, v, "'%s' must be true or false, found the quoted string \"%s\"",
			    key, v->text);
	return fail(ld, v, "'%s' must be true or false, found '%s'", key, v->text);
}

/*
 * A setting at <at> (key <key>) that only the userspace forwarder can
 * honour: an error with kernel steering, saying why ("kernel steering
 * <why_not>"); 0 otherwise.
 */
static int userspace_only(struct loader *ld, const struct ynode *at,
			  const struct hashlb_service_cfg *s, const char *key, const char *why_not)
{
	if (s->steering != HASHLB_STEERING_KERNEL || !svc_clean(ld))
		return 0;
	return fail(ld, at, "'%s' needs steering: userspace (kernel steering %s)", key, why_not);
}

/*
 * Service key <key> of mapping <m>, a boolean into <ret> if present, that
 * only the userspace forwarder can honour: true with kernel steering is an
 * error saying <why_not> ("kernel steering <why_not>").
 */
static int get_userspace_bool(struct loader *ld, const struct ynode *m,
			      const struct hashlb_service_cfg *s, const char *key,
			      const char *why_not, bool *ret)
{
	const struct ynode *v = map_get(m, key);
	int r;

	if (!v)
		return 0;
	r = get_bool(ld, v, key, ret);
	if (r < 0)
		return r;
	return *ret ? userspace_only(ld, v, s, key, why_not) : 0;
}

/* How a number with a unit is written: a duration, a size. */
struct unit_kind {
	const char *what; /* "a duration" */
	const char *plain; /* what a number without a unit counts: "milliseconds" */
	const char *plain_unit; /* its unit as a config writes it, "ms"; "" for none */
	const char *units_text; /* "a unit ms, s, m or h (\"500ms\", \"2s\")" */
	const char *whole; /* "(\"1500ms\", not \"1.5s\")" */
	const char *hint[2]; /* units suggested for a quoted number without one */
	uint64_t number_max; /* a number past it is too large, whatever its unit */
	struct {
		const char *name;
		uint64_t mult;
	} units[4]; /* the largest first */
};

static const struct unit_kind duration_kind = {
	.what = "a duration",
	.plain = "milliseconds",
	.plain_unit = "ms",
	.units_text = "a unit ms, s, m or h (\"500ms\", \"2s\")",
	.whole = "(\"1500ms\", not \"1.5s\")",
	.hint = { "ms", "s" },
	.number_max = UINT64_MAX / 3600000,
	.units = { { "h", 3600000 }, { "m", 60000 }, { "s", 1000 }, { "ms", 1 } },
};

static const struct unit_kind size_kind = {
	.what = "a size",
	.plain = "bytes",
	.plain_unit = "",
	.units_text = "a unit KiB, MiB, GiB or TiB (\"512MiB\", powers of 1024)",
	.whole = "(\"1536MiB\", not \"1.5GiB\")",
	.hint = { "MiB", "GiB" },
	.number_max = UINT64_MAX,
	.units = { { "TiB", 1ull << 40 },
		   { "GiB", 1ull << 30 },
		   { "MiB", 1ull << 20 },
		   { "KiB", 1ull << 10 } },
};

#define UNITS_MAX (sizeof(duration_kind.units) / sizeof(duration_kind.units[0]))

/* <val> in the largest unit of <k> that writes it exactly, as a config would. */
struct unit_text {
	char s[32];
};

static struct unit_text unit_text(const struct unit_kind *k, uint64_t val)
{
	struct unit_text t;

	for (size_t i = 0; i < UNITS_MAX; i++) {
		if (val && val % k->units[i].mult == 0) {
			snprintf(t.s, sizeof(t.s), "%" PRIu64 "%s", val / k->units[i].mult,
				 k->units[i].name);
			return t;
		}
	}
	snprintf(t.s, sizeof(t.s), "%" PRIu64 "%s", val, k->plain_unit);
	return t;
}

static struct unit_text duration_text(uint32_t ms)
{
	return unit_text(&duration_kind, ms);
}

void hashlb_duration_format(uint64_t ms, char *buf, size_t len)
{
	snprintf(buf, len, "%s", unit_text(&duration_kind, ms).s);
}

void hashlb_table_memory_format(const struct hashlb_config *c, char *buf, size_t len)
{
	char unit[HASHLB_BYTES_STRLEN];

	if (!c->table_memory) {
		snprintf(buf, len, "0 (no cap)");
		return;
	}
	hashlb_bytes_format(c->table_memory, unit, sizeof(unit));
	snprintf(buf, len, "%s (%" PRIu64 " bytes%s)", unit, c->table_memory,
		 c->table_memory_pos.line ? "" : ", the default");
}

void hashlb_bytes_format(uint64_t bytes, char *buf, size_t len)
{
	for (size_t i = 0; i < UNITS_MAX; i++) {
		uint64_t mult = size_kind.units[i].mult;

		if (bytes < mult)
			continue;
		/* the tenth cut, not rounded: a byte short of 1 MiB is "1023.9 KiB", not
		 * "1024.0 KiB", and tables short of table_memory never read as reaching it */
		if (bytes % mult == 0)
			snprintf(buf, len, "%" PRIu64 " %s", bytes / mult, size_kind.units[i].name);
		else
			snprintf(buf, len, "%" PRIu64 ".%" PRIu64 " %s", bytes / mult,
				 bytes % mult * 10 / mult, size_kind.units[i].name);
		return;
	}
	snprintf(buf, len, "%" PRIu64 " bytes", bytes);
}

void hashlb_drain_format(uint32_t ms, char *buf, size_t len)
{
	if (ms == HASHLB_DRAIN_NEVER)
		snprintf(buf, len, "never");
	else
		hashlb_duration_format(ms, buf, len);
}

const char *hashlb_drain_ms_text(uint64_t ms, char buf[HASHLB_DRAIN_MS_STRLEN])
{
	if (ms >= HASHLB_DRAIN_NEVER)
		return "never";
	snprintf(buf, HASHLB_DRAIN_MS_STRLEN, "%" PRIu64, ms);
	return buf;
}

void hashlb_table_params_format(const struct hashlb_table_params *p, char *buf, size_t len)
{
	if (p->scheme == HASHLB_SCHEME_RING)
		snprintf(buf, len, "ring vnodes=%" PRIu32 " seed=%" PRIu64, p->ring_v, p->seed);
	else
		snprintf(buf, len, "maglev table_size=%" PRIu32 " seed=%" PRIu64, p->maglev_m,
			 p->seed);
}

/*
 * What to suggest for duration <n> written as a number alone, <lo>..<hi> its range in
 * milliseconds: BARE_MS, <n>ms, if it is in range; BARE_S, <n>s, if that is in range, a
 * day at most, and <n> no whole number of thousands, which counts milliseconds: "5" or
 * "3600" may have meant seconds, "30000" meant 30s, not 30000s (8h20m), which was offered.
 */
enum { BARE_MS = 1, BARE_S = 2 };
static unsigned int bare_hints(uint64_t n, uint64_t lo, uint64_t hi)
{
	bool ms = n >= lo && n <= hi;
	bool s = n <= 86400 && (n < 1000 || n % 1000) && n * 1000 >= lo && n * 1000 <= hi;

	return (ms ? BARE_MS : 0) | (s ? BARE_S : 0);
}

/* Whether <v> is a number alone: no unit, no sign, not quoted (digits only). */
static bool bare_number(const struct ynode *v)
{
	if (v->quoted || !*v->text)
		return false;
	for (const char *p = v->text; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

/*
 * Into <why> (96 bytes hold it): if <v>, a duration refused, is a number alone, how it
 * was read, and <v>s if that is in <lo>..<hi> ms (bare_hints()); "" otherwise. For a
 * refusal that does not say the value was read as milliseconds ("is out of range",
 * "is shorter than 1s", "is not whole seconds").
 */
static void bare_why(const struct ynode *v, uint64_t lo, uint64_t hi, char *why, size_t size)
{
	uint64_t n;

	why[0] = '\0';
	if (!bare_number(v) || strlen(v->text) > 15)
		return;
	n = strtoull(v->text, NULL, 10);
	snprintf(why, size, ": a number alone counts milliseconds, %s read as %sms%s%s%s", v->text,
		 v->text, bare_hints(n, lo, hi) & BARE_S ? ": write " : "",
		 bare_hints(n, lo, hi) & BARE_S ? v->text : "",
		 bare_hints(n, lo, hi) & BARE_S ? "s for seconds" : "");
}

/*
 * An integer alone (<k>'s plain unit) or with one of <k>'s units ("250ms",
 * "2s", "512MiB"), in <lo>..<hi>; or 0 when <zero> says what 0 is ("no
 * cap").
 */
static int get_unit_number(struct loader *ld, const struct ynode *v, const char *key,
			   const struct unit_kind *k, uint64_t lo, uint64_t hi, const char *zero,
			   uint64_t *ret)
{
	const char *s = v->text;
	uint64_t val = 0, mult = 1;
	bool negative = false, over = false, bare;
	int r = want_scalar(ld, v, key, k->what);

	if (r < 0)
		return r;
	if (*s == '+' || *s == '-')
		negative = *s++ == '-';
	if (*s < '0' || *s > '9')
		goto bad;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (val > (k->number_max - 9) / 10)
			over = true;
		else
			val = val * 10 + (uint64_t)(*s - '0');
	}
	if (*s == '.' || *s == ',')
		return fail(ld, v, "'%s' %s: %s is a whole number of its unit %s", key, v->text,
			    k->what, k->whole);
	if (*s == '\0' && v->quoted)
		return fail(ld, v,
			    "'%s' \"%s\" has no unit: write %s%s, %s%s, or the number without "
			    "quotes (%s)",
			    key, v->text, v->text, k->hint[0], v->text, k->hint[1], k->plain);
	if (*s != '\0') {
		size_t i;

		for (i = 0; i < UNITS_MAX; i++) {
			if (strcmp(s, k->units[i].name) == 0)
				break;
		}
		if (i == UNITS_MAX)
			goto bad;
		mult = k->units[i].mult;
		if (val > UINT64_MAX / mult)
			over = true;
	}
	bare = *s == '\0' && k == &duration_kind;
	val *= mult;
	if (over || (negative && val) || ((val || !zero) && (val < lo || val > hi))) {
		/* 'interval: 5' meant as seconds: say how it was read, as the warning of
		 * one in range does (note_bare_duration()) */
		char why[96] = "";

		if (bare && !over && !negative && val)
			bare_why(v, lo, hi, why, sizeof(why));
		return fail(ld, v, "'%s' %s is out of range %s..%s%s%s%s%s", key, v->text,
			    unit_text(k, lo).s, unit_text(k, hi).s, zero ? " (0 = " : "",
			    zero ? zero : "", zero ? ")" : "", why);
	}
	*ret = val;
	return 0;
bad:
	return fail(ld, v, "'%s' must be %s: %s as an integer, or an integer with %s; found '%s'",
		    key, k->what, k->plain, k->units_text, v->text);
}

/*
 * Note <v>, duration <ms> of <key> written without a unit, in ld->cfg->bare_durations (an
 * anchor's value read through two aliases twice: config_parse() sorts them and keeps one of
 * each place); <lo>..<hi>, what the setting takes, decides whether seconds are suggested.
 * 0 is 0 in any unit, so not noted. 0 or -ENOMEM.
 */
static int note_bare_duration(struct loader *ld, const struct ynode *v, const char *key,
			      uint64_t ms, uint64_t lo, uint64_t hi)
{
	struct hashlb_config *c = ld->cfg;
	struct hashlb_bare_duration *d;
	size_t len = strlen(v->text);

	/* read, so a number and maybe a unit: without one when it ends in a digit */
	if (!c || ms == 0 || !len || !isdigit((unsigned char)v->text[len - 1]))
		return 0;
	if (hlb_grow((void **)&c->bare_durations, &ld->bare_cap, c->n_bare_durations + 1,
		     sizeof(*c->bare_durations), 8) < 0)
		return nomem(ld);
	d = &c->bare_durations[c->n_bare_durations++];
	d->pos = v->pos;
	d->section = ld->section;
	d->key = key;
	d->via = ld->via ? ld->via->pos : (struct hashlb_pos){ 0, 0 };
	d->ms = (uint32_t)ms;
	/* seconds suggested where they may be what was meant and the setting takes them
	 * (bare_hints()): a health check's "timeout: 5" under an interval of 2s was told
	 * "or 5s", which is refused as longer than the interval */
	d->seconds_fit = bare_hints(ms, lo, hi) & BARE_S;
	return 0;
}

/*
 * As get_duration(), for a setting that refuses more after its range <lo>..<hi>: it takes
 * <ok_lo>..<ok_hi> ms (0 aside), in steps of <step> ms (keepalive's whole seconds). A quoted
 * number alone ("30") is refused with what to write, each suggestion one the setting takes
 * (bare_hints()): "30000" to keepalive's idle is 30000ms, not 30000s, and "30" is 30s, not
 * the number without quotes, 30ms and out of range; "1500" is 1500s, not 1500ms, not whole
 * seconds; a health check's timeout "5" under an interval of 2s is 5ms, not 5s, longer.
 * They were offered. "0" is 0 in any unit: offered as such only where 0 is in range (a
 * connect timeout's "0" was told 'write 0ms, 0s', both refused).
 */
static int get_duration_of(struct loader *ld, const struct ynode *v, const char *key, uint32_t lo,
			   uint32_t hi, uint64_t ok_lo, uint64_t ok_hi, uint32_t step,
			   const char *zero, uint32_t *ret)
{
	uint64_t ms, least = lo > ok_lo ? lo : ok_lo, most = hi < ok_hi ? hi : ok_hi;
	int r;

	if (v->type == YNODE_SCALAR && v->quoted && *v->text &&
	    strspn(v->text, "0123456789") == strlen(v->text)) {
		/* more than 15 digits: neither in ms nor in s in any range (they were
		 * both offered, out of range, read as what they are) */
		uint64_t n = strlen(v->text) <= 15 ? strtoull(v->text, NULL, 10) : UINT64_MAX;
		bool ms_ok = n >= least && n <= most && n % step == 0;
		bool s_ok = n <= most / 1000 && n * 1000 >= least;
		unsigned int h = bare_hints(n, least, most) & (ms_ok ? BARE_MS | BARE_S : BARE_S);

		/* none that may have been meant: the one taken, if any ("3000" to a
		 * user_timeout of at least 90s is 3000s) */
		if (!h)
			h = (ms_ok ? BARE_MS : 0) | (s_ok ? BARE_S : 0);
		if (h)
			return fail(ld, v, "'%s' \"%s\" has no unit: write %s%s%s%s%s%s", key,
				    v->text, h & BARE_MS ? v->text : "", h & BARE_MS ? "ms" : "",
				    h == (BARE_MS | BARE_S) ? ", " : "", h & BARE_S ? v->text : "",
				    h & BARE_S ? "s" : "",
				    h & BARE_MS ? ", or the number without quotes (milliseconds)"
						: "");
		/* 0 is 0 in any unit: said below, where it is in range; what is taken
		 * said, or the value could only be guessed at ("3000000000"); and
		 * whole seconds where only those are taken (keepalive's, the one
		 * step): "40500" to idle, 40500ms in 1s..32767s but not whole
		 * seconds, was said out of that range */
		if (n || lo)
			return fail(ld, v,
				    "'%s' \"%s\" has no unit, and neither %sms nor %ss is %s"
				    "in range %s..%s: write a duration with its unit",
				    key, v->text, v->text, v->text,
				    step > 1 ? "whole seconds " : "",
				    unit_text(&duration_kind, least).s,
				    unit_text(&duration_kind, most).s);
	}
	r = get_unit_number(ld, v, key, &duration_kind, lo, hi, zero, &ms);

	if (r == 0)
		r = note_bare_duration(ld, v, key, ms, least, most);
	if (r < 0)
		return r;
	*ret = (uint32_t)ms;
	return 0;
}

static int get_duration_taking(struct loader *ld, const struct ynode *v, const char *key,
			       uint32_t lo, uint32_t hi, uint64_t ok_lo, uint64_t ok_hi,
			       uint32_t step, uint32_t *ret)
{
	return get_duration_of(ld, v, key, lo, hi, ok_lo, ok_hi, step, NULL, ret);
}

/*
 * A duration in milliseconds: a plain integer (milliseconds) or a number
 * with a unit, "250ms", "2s", "5m", "1h". One without a unit is noted for
 * hashlb_config_warnings().
 */
static int get_duration(struct loader *ld, const struct ynode *v, const char *key, uint32_t lo,
			uint32_t hi, uint32_t *ret)
{
	return get_duration_taking(ld, v, key, lo, hi, lo, hi, 1, ret);
}

/*
 * timeouts.drain: a duration up to 1h (0: close them at once), or never (HASHLB_DRAIN_NEVER):
 * the connections are kept until they end by themselves, as HAProxy and nginx keep an old
 * process's. A value that is neither says both are taken.
 */
static int get_drain(struct loader *ld, const struct ynode *v, uint32_t *ret)
{
	if (v->type == YNODE_SCALAR && !strcmp(v->text, "never")) {
		*ret = HASHLB_DRAIN_NEVER;
		return 0;
	}
	/* a word: "forever", "Never", "none" (a number's errors, and null's, are
	 * get_unit_number()'s) */
	if (v->type == YNODE_SCALAR && !ynode_is_null(v) && isalpha((unsigned char)v->text[0]))
		return fail(ld, v,
			    "'drain' must be a duration up to %s (0 = close them at once) or never "
			    "(keep them until they end), found '%s'",
			    duration_text(DRAIN_TIMEOUT_MAX).s, v->text);
	return get_duration_of(ld, v, "drain", 0, DRAIN_TIMEOUT_MAX, 0, DRAIN_TIMEOUT_MAX, 1,
			       "close them at once; never = keep them until they end", ret);
}

static int get_double(struct loader *ld, const struct ynode *v, const char *key, double *ret)
{
	char *end;
	double d;
	int r = want_scalar(ld, v, key, "a number");

	if (r < 0)
		return r;
	if (v->quoted)
		return fail(ld, v, "'%s' must be a number, found the quoted string \"%s\"", key,
			    v->text);
	if (v->text[0] == '0' && v->text[1] == 'o') { /* YAML's octal integer: strtod() has none */
		uint64_t u;

		r = get_u64_range(ld, v, key, 0, UINT64_MAX, &u);
		*ret = (double)u;
		return r;
	}
	errno = 0;
	d = strtod(v->text, &end);
	/* strtod() reads C's hex fractions ("0x1p3", "0x1.8"), "0X10" and "-0x10",
	 * which YAML reads as strings; 0x10 is YAML's integer 16 */
	if (end == v->text || *end || errno || !isfinite(d) ||
	    (strpbrk(v->text, "xX") &&
	     (strpbrk(v->text, ".pPX") || !isdigit((unsigned char)*v->text))))
		return fail(ld, v, "'%s' must be a number, found '%s'%s", key, v->text,
			    int_hint(v->text));
	*ret = d;
	return 0;
}

int hashlb_unix_addr_parse(const char *s, struct sockaddr_storage *ret_addr, socklen_t *ret_len,
			   char *why, size_t why_len)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	const char *path = s + 5;
	size_t n = strlen(path);

	/* each said alone: "absolute and shorter than 108 bytes" of "unix:rel.sock"
	 * left the operator to work out which it was; and "unix:" alone has no path,
	 * which "the path '' is relative" said */
	if (!n) {
		snprintf(why, why_len, "'unix:' names no socket path: write unix:/PATH");
		return -EINVAL;
	}
	if (path[0] != '/') {
		snprintf(why, why_len,
			 "the Unix socket path '%.40s%s' is relative: it must be absolute "
			 "(unix:/PATH)",
			 path, n > 40 ? "..." : "");
		return -EINVAL;
	}
	if (n >= sizeof(sun.sun_path)) {
		snprintf(why, why_len,
			 "the Unix socket path has %zu bytes: it must be shorter than %zu", n,
			 sizeof(sun.sun_path));
		return -EINVAL;
	}
	memcpy(sun.sun_path, path, n + 1);
	memset(ret_addr, 0, sizeof(*ret_addr));
	memcpy(ret_addr, &sun, sizeof(sun));
	*ret_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	return 0;
}

const char *hashlb_addr_explain(const char *s, bool allow_port0, bool names_ok, char *buf,
				size_t len)
{
	const char *colon = strrchr(s, ':');
	const char *scheme = strstr(s, "://");
	const char *port = NULL;

	/* a URL, as an upstream is written elsewhere: its colons said "an IPv6 address
	 * must be written in brackets" */
	if (scheme && scheme > s && !memchr(s, '[', (size_t)(scheme - s))) {
		snprintf(buf, len, "a URL: write it without '%.*s://', as %s", (int)(scheme - s), s,
			 names_ok ? "HOST:PORT" : "ADDR:PORT");
		return buf;
	}
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close)
			return "missing ']' after the IPv6 address";
		if (close[1] != ':')
			return "missing ':PORT' after the IPv6 address";
		port = close + 2;
		/* fe80::1%eth0 is one, with a zone, which no address here takes */
		if (memchr(s + 1, '%', (size_t)(close - s - 1)))
			snprintf(buf, len,
				 "'%.*s' has a zone ('%%' and an interface): zones are not "
				 "supported, give a global or unique local address",
				 (int)(close - s - 1), s + 1);
		else
			snprintf(buf, len, "'%.*s' is not a numeric IPv6 address",
				 (int)(close - s - 1), s + 1);
	} else if (!colon && s[0] && strspn(s, "0123456789") == strlen(s) && strlen(s) <= 5) {
		/* a port alone, as nginx's "listen 8080": it said "missing ':PORT'" */
		snprintf(buf, len, "a port alone: write ADDR:%s, as 127.0.0.1:%s", s, s);
		return buf;
	} else if (!colon) {
		return "missing ':PORT'";
	} else if (strchr(s, ':') != colon) {
		return "an IPv6 address must be written in brackets, as [::1]:PORT";
	} else if (colon == s && names_ok) { /* ":9901", as a listen directive elsewhere */
		port = colon + 1;
		snprintf(buf, len, "no host before ':%s': write one, as 127.0.0.1:%s", port, port);
	} else if (colon == s) { /* nginx's and Go's ":8080": every address; said how here */
		port = colon + 1;
		snprintf(buf, len,
			 "no address before ':%s': write one, as 127.0.0.1:%s, or 0.0.0.0:%s "
			 "for every IPv4 address, [::]:%s for every address (IPv4 too)",
			 port, port, port, port);
	} else {
		port = colon + 1;
		if (names_ok)
			snprintf(
				buf, len,
				"'%.*s' is neither a numeric IPv4 address nor a host name (letters, "
				"digits, '-' and '.'; labels of 1..63; at most %u bytes)",
				(int)(colon - s), s, HASHLB_HOST_MAX);
		else
			snprintf(
				buf, len,
				"'%.*s' is not a numeric IPv4 address (host names are not resolved "
				"here, only in a backend's address)",
				(int)(colon - s), s);
	}
	{
		char *end;
		unsigned long p;

		errno = 0;
		p = strtoul(port, &end, 10);
		if (!*port || *end || port[0] == '-' || port[0] == '+')
			return "the port must be a number";
		/* as hashlb_addr_parse() reads it: past 5 digits, a port is refused
		 * whatever its value ("000080"), and the address was blamed for it */
		if (strlen(port) > 5 && !errno && p <= 65535) {
			snprintf(buf, len, "port %s has more than 5 digits", port);
			return buf;
		}
		if (errno || p > 65535 || (p == 0 && !allow_port0)) {
			snprintf(buf, len, "port %s is out of range %u..65535", port,
				 allow_port0 ? 0u : 1u);
			return buf;
		}
	}
	return buf;
}

const char *hashlb_tuple_port_hint(const char *s)
{
	return strchr(s, ':') ? " (an IPv6 address with a port is written [ADDR]:PORT, as [::1]:80)"
			      : "";
}

const char *hashlb_tuple_explain(const char *s, char *buf, size_t len)
{
	const char *colon = strchr(s, ':'), *close = s[0] == '[' ? strchr(s, ']') : NULL;

	/* its port optional: an address alone is one, so what is wrong there is the address,
	 * where hashlb_addr_explain() would ask for ':PORT' */
	if (close && !close[1]) {
		snprintf(buf, len, "'%.*s' is not a numeric IPv6 address", (int)(close - s - 1),
			 s + 1);
	} else if (s[0] != '[' && !strstr(s, "://") && colon && strchr(colon + 1, ':')) {
		snprintf(buf, len,
			 "'%s' is not a numeric IPv6 address (with a port, it is written "
			 "[ADDR]:PORT, as [::1]:80)",
			 s);
	} else if (s[0] != '[' && !colon && (!s[0] || strspn(s, "0123456789") != strlen(s))) {
		snprintf(buf, len,
			 "'%s' is not a numeric IPv4 address (host names are not resolved here)",
			 s);
	} else {
		return hashlb_addr_explain(s, true, false, buf, len);
	}
	return buf;
}

const char *hashlb_addr_link_local(const struct sockaddr_storage *a)
{
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)a;

	if (a->ss_family != AF_INET6 || !IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr))
		return NULL;
	return "a link-local address, usable only with a zone ('%' and an interface), and "
	       "zones are not supported: give a global or unique local address";
}

/* Refuse a link-local IPv6 address <a> (hashlb_addr_link_local()), written <v> for <key>. */
static int refuse_link_local(struct loader *ld, const struct ynode *v, const char *key,
			     const struct sockaddr_storage *a)
{
	const char *why = hashlb_addr_link_local(a);

	return why ? fail(ld, v, "'%s': '%s' is %s", key, v->text, why) : 0;
}

/*
 * want_scalar() for an address: "[::1]" unquoted, a port left out, is YAML's list of one
 * "::1", which "found a list" alone leaves a puzzle; with its port it is a syntax error
 * that says to quote it (ytree.c), and so does this.
 */
static int want_addr_scalar(struct loader *ld, const struct ynode *v, const char *key,
			    const char *expected)
{
	const struct ynode *i = v->type == YNODE_SEQ && v->n == 1 ? v->items[0] : NULL;
	char a[64] = "";

	if (i && i->type == YNODE_SCALAR && !i->quoted && strchr(i->text, ':'))
		snprintf(a, sizeof(a), "%s", i->text);
	/* "[::]", "[fd00::]": the last ':', before the ']', made the item a mapping of one
	 * key and nothing */
	else if (i && i->type == YNODE_MAP && ynode_pairs(i) == 1 &&
		 ynode_key(i, 0)->type == YNODE_SCALAR && !ynode_key(i, 0)->quoted &&
		 ynode_is_null(ynode_value(i, 0)))
		snprintf(a, sizeof(a), "%s:", ynode_key(i, 0)->text);
	if (a[0] && strlen(a) < sizeof(a) - 1 &&
	    strspn(a, "0123456789abcdefABCDEF:.") == strlen(a)) /* an IPv6 address's */
		return fail(ld, v,
			    "'%s' must be %s, found a list: [%s] unquoted is YAML's list of one "
			    "item; write the address in quotes with its port, as \"[%s]:80\"",
			    key, expected, a, a);
	return want_scalar(ld, v, key, expected);
}

static int get_addr(struct loader *ld, const struct ynode *v, const char *key, bool allow_port0,
		    char **ret_text, struct sockaddr_storage *ret_addr, socklen_t *ret_len)
{
	char buf[160];
	int r = want_addr_scalar(ld, v, key, "an address (IPv4 a.b.c.d:PORT or IPv6 [ADDR]:PORT)");

	if (r < 0)
		return r;
	if (hashlb_addr_parse(v->text, allow_port0, ret_addr, ret_len) < 0)
		return fail(ld, v, "'%s': '%s' is not a valid address: %s", key, v->text,
			    hashlb_addr_explain(v->text, allow_port0, false, buf, sizeof(buf)));
	r = refuse_link_local(ld, v, key, ret_addr);
	if (r < 0)
		return r;
	return get_string(ld, v, key, ret_text);
}

/* A backend's address: numeric, or "name:port", resolved later (addr_len 0). */
static int get_backend_addr(struct loader *ld, const struct ynode *v, struct hashlb_backend_cfg *b)
{
	char buf[200], host[HASHLB_HOST_MAX + 1];
	uint16_t port;
	int r = want_addr_scalar(ld, v, "address",
				 "an address (IPv4 a.b.c.d:PORT, IPv6 [ADDR]:PORT or NAME:PORT)");

	if (r < 0)
		return r;
	b->address_pos = v->pos;
	if (hashlb_addr_parse(v->text, false, &b->addr, &b->addr_len) < 0) {
		if (hashlb_name_addr_parse(v->text, host, &port) < 0)
			return fail(ld, v, "'address': '%s' is not a valid address: %s", v->text,
				    hashlb_addr_explain(v->text, false, true, buf, sizeof(buf)));
		memset(&b->addr, 0, sizeof(b->addr));
		b->addr_len = 0;
	}
	r = refuse_link_local(ld, v, "address", &b->addr);
	if (r < 0)
		return r;
	return get_string(ld, v, "address", &b->address);
}

/* --- services and backends -------------------------------------------- */

/*
 * Whether the <n> bytes at <s> may name a network interface, as the kernel's
 * dev_valid_name() has it: 1..15 bytes, not "." or "..", no '/', ':' or
 * white space.
 */
static bool ifname_ok(const char *s, size_t n)
{
	if (n == 0 || n >= 16 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '/' || s[i] == ':' || isspace((unsigned char)s[i]))
			return false;
	return true;
}

const char *hashlb_ifname_refusal(const char *name, char *buf, size_t size)
{
	const char *colon = strchr(name, ':');
	size_t n = strlen(name);
	const char *more = n > 64 ? "..." : ""; /* the reason must fit, whatever was given */

	if (ifname_ok(name, n))
		return NULL;
	if (colon && ifname_ok(name, (size_t)(colon - name)))
		snprintf(buf, size,
			 "'%.64s%s' is not a valid interface name: ':' names an address label, "
			 "not an interface (give '%.*s')",
			 name, more, (int)(colon - name), name);
	else
		snprintf(buf, size, "'%.64s%s' is not a valid interface name", name, more);
	return buf;
}

static bool service_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > SERVICE_NAME_MAX)
		return false;
	for (; *s; s++) {
		char c = *s;

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.'))
			return false;
	}
	return true;
}

struct too_long {
	char s[48];
};

/* " (N UNIT)" when <name> has more than <max> bytes, for an error that quotes it cut short
 * (hashlb_err_fit()): how long it is, beside the rule it breaks; "" otherwise. */
static struct too_long too_long(const char *name, size_t max, const char *unit)
{
	struct too_long t = { "" };
	size_t n = strlen(name);

	if (n > max)
		snprintf(t.s, sizeof(t.s), " (%zu %s)", n, unit);
	return t;
}

/*
 * Printable, no spaces: names appear in logfmt logs and admin URLs. Not "-",
 * which those logs (backend=-), hashlb lookup and ctl status write for none. Beyond
 * ASCII, valid UTF-8 without the characters that show as nothing or as a
 * space: "a\u00a0" and "a" would be two backends that read alike in every
 * status, log line and metric.
 */
_Static_assert(HASHLB_NAME_MAX == 255, "HASHLB_BACKEND_NAME_RULE says 255 bytes");

bool hashlb_backend_name_ok(const char *s)
{
	size_t n = strlen(s), len;

	if (n == 0 || n > HASHLB_NAME_MAX || !strcmp(s, "-"))
		return false;
	for (; *s; s += len) {
		unsigned char c = (unsigned char)*s;
		int32_t cp = yutf8_decode((const unsigned char *)s, SIZE_MAX, &len);

		if (c <= ' ' || c == 0x7f || c == '"' || c == '=' || cp < 0 || yinvisible(cp))
			return false;
	}
	return true;
}

/*
 * The C.UTF-8 locale's character classes, for wcwidth(): made once and kept;
 * (locale_t)0 where the host has none. Only the calling thread takes it
 * (uselocale()), for the call: the process's locale is left as it is (the
 * daemon's admin thread calls this, and nothing else is to change with it).
 */
static locale_t utf8_ctype;
static pthread_once_t utf8_ctype_once = PTHREAD_ONCE_INIT;

static void utf8_ctype_make(void)
{
	utf8_ctype = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

int hashlb_text_extra_bytes(const char *s)
{
	locale_t was = (locale_t)0;
	size_t len;
	int n = 0;

	pthread_once(&utf8_ctype_once, utf8_ctype_make);
	if (utf8_ctype)
		was = uselocale(utf8_ctype);
	for (; *s; s += len) {
		int32_t cp = yutf8_decode((const unsigned char *)s, SIZE_MAX, &len);
		/* a byte that is no UTF-8 (len 1): one column, as a terminal shows
		 * it (U+FFFD); a character the locale has no width for, one too */
		int w = cp >= 0 && utf8_ctype ? wcwidth((wchar_t)cp) : 1;

		n += (int)len - (w < 0 ? 1 : w);
	}
	if (utf8_ctype)
		uselocale(was);
	return n;
}

static int load_backend(struct loader *ld, const struct ynode *m, struct hashlb_backend_cfg *b)
{
	const struct ynode *v;
	size_t mark = ld->n_errs;
	int r;

	r = check_map(ld, m, backend_keys, "backend");
	if (r < 0)
		return r;
	b->pos = m->pos;
	b->weight = 1;
	b->admin = HASHLB_ADMIN_READY;

	v = map_get(m, "name");
	if (!v && !clean(ld, mark)) /* a key misspelt, said: perhaps 'name' */
		return -EINVAL;
	if (!v)
		return fail(ld, m, "backend has no 'name' (its identity on the ring or table)");
	r = get_string(ld, v, "name", &b->name);
	if (r < 0)
		return r;
	if (!hashlb_backend_name_ok(b->name))
		return fail(ld, v, "backend name '%s'%s must be " HASHLB_BACKEND_NAME_RULE, b->name,
			    too_long(b->name, HASHLB_NAME_MAX, "bytes").s);

	v = map_get(m, "address");
	if (!v && !clean(ld, mark))
		return -EINVAL;
	if (!v)
		return fail(ld, m,
			    "backend '%s' has no 'address' (a.b.c.d:PORT, [ADDR]:PORT or "
			    "HOST:PORT)",
			    b->name);
	r = get_backend_addr(ld, v, b);
	if (stop(ld, r))
		return r;
	v = map_get(m, "each_address");
	if (v && stop(ld, r = get_bool(ld, v, "each_address", &b->each_address)))
		return r;
	if (b->each_address && b->addr_len && clean(ld, mark) &&
	    stop(ld, r = fail(ld, v,
			      "'each_address' is for an address that names a host (NAME:PORT): "
			      "'%s' is one address",
			      b->address)))
		return r;
	/* room for "@" and the longest address in the names it gives */
	if (b->each_address && strlen(b->name) + INET6_ADDRSTRLEN > HASHLB_NAME_MAX &&
	    clean(ld, mark) &&
	    stop(ld, r = fail(ld, map_get(m, "name"),
			      "the name is too long for 'each_address': %zu bytes, at most %u, to "
			      "leave room for '@ADDRESS' in the names it gives",
			      strlen(b->name), HASHLB_NAME_MAX - INET6_ADDRSTRLEN)))
		return r;

	v = map_get(m, "weight");
	if (v) {
		r = get_u32_range(ld, v, "weight", 0, HASHLB_WEIGHT_MAX, &b->weight);
		if (stop(ld, r))
			return r;
	}
	v = map_get(m, "backup");
	if (v && stop(ld, r = get_bool(ld, v, "backup", &b->backup)))
		return r;
	v = map_get(m, "close_on_return");
	if (v && stop(ld, r = get_bool(ld, v, "close_on_return", &b->close_on_return)))
		return r;
	if (b->close_on_return && !b->backup && clean(ld, mark) &&
	    stop(ld, r = fail(ld, v,
			      "'close_on_return' is for a backup (backup: true): it closes the "
			      "backup's connections when another backend takes clients again")))
		return r;
	v = map_get(m, "max_connections");
	if (v) {
		r = get_u32_range(ld, v, "max_connections", 0, MAX_CONNECTIONS_MAX,
				  &b->max_connections);
		if (stop(ld, r))
			return r;
	}
	v = map_get(m, "state");
	if (v) {
		r = want_scalar(ld, v, "state", "ready, drain or maint");
		if (r == 0 && hashlb_admin_state_parse(v->text, &b->admin) < 0)
			r = fail(ld, v, "'state' must be ready, drain or maint, found '%s'",
				 v->text);
	}
	return clean(ld, mark) ? 0 : -EINVAL;
}

static int load_timeouts(struct loader *ld, const struct ynode *m, struct hashlb_service_cfg *s)
{
	const struct ynode *v;
	int r = check_settings(ld, m, timeout_keys, "timeouts", NULL);

	if (r < 0)
		return r;
	if ((v = map_get(m, "connect")) &&
	    stop(ld, r = get_duration(ld, v, "connect", 1, CONNECT_TIMEOUT_MAX,
				      &s->connect_timeout_ms)))
		return r;
	if ((v = map_get(m, "idle")) &&
	    stop(ld, r = get_duration(ld, v, "idle", 0, IDLE_TIMEOUT_MAX, &s->idle_timeout_ms)))
		return r;
	if ((v = map_get(m, "drain")) && stop(ld, r = get_drain(ld, v, &s->drain_timeout_ms)))
		return r;
	if ((v = map_get(m, "queue")) &&
	    stop(ld, r = get_duration(ld, v, "queue", 0, QUEUE_TIMEOUT_MAX, &s->queue_timeout_ms)))
		return r;
	return 0;
}

static int load_health(struct loader *ld, const struct ynode *m, struct hashlb_health_cfg *h)
{
	const struct ynode *v;
	size_t mark = ld->n_errs;
	int r = check_settings(ld, m, health_keys, "health", health_bool_hints);

	if (r < 0)
		return r;
	if ((v = map_get(m, "enabled")) && stop(ld, r = get_bool(ld, v, "enabled", &h->enabled)))
		return r;
	if ((v = map_get(m, "interval")) &&
	    stop(ld, r = get_duration(ld, v, "interval", HEALTH_INTERVAL_MIN, HEALTH_INTERVAL_MAX,
				      &h->interval_ms)))
		return r;
	/* no longer than the interval (below): "5" under 2s suggests 5ms, not 5s */
	if ((v = map_get(m, "timeout")) &&
	    stop(ld, r = get_duration_taking(ld, v, "timeout", 1, HEALTH_TIMEOUT_MAX, 1,
					     h->interval_ms, 1, &h->timeout_ms)))
		return r;
	if ((v = map_get(m, "rise")) &&
	    stop(ld, r = get_u32_range(ld, v, "rise", 1, HEALTH_COUNT_MAX, &h->rise)))
		return r;
	if ((v = map_get(m, "fall")) &&
	    stop(ld, r = get_u32_range(ld, v, "fall", 1, HEALTH_COUNT_MAX, &h->fall)))
		return r;
	if ((v = map_get(m, "port"))) {
		uint32_t port = 0; /* set unless get_u32_range() fails, which gcc cannot see */

		r = get_u32_range(ld, v, "port", 1, 65535, &port);
		if (stop(ld, r))
			return r;
		h->port = (uint16_t)port;
		h->port_pos = map_key(m, "port")->pos;
	}
	if ((v = map_get(m, "send"))) {
		r = get_bytes(ld, v, "send", CHECK_PAYLOAD_MAX, &h->send, &h->send_len);
		if (stop(ld, r))
			return r;
		h->send_pos = map_key(m, "send")->pos;
	}
	if ((v = map_get(m, "expect"))) {
		r = get_bytes(ld, v, "expect", CHECK_PAYLOAD_MAX, &h->expect, &h->expect_len);
		if (stop(ld, r))
			return r;
		h->expect_pos = map_key(m, "expect")->pos;
	}
	if ((v = map_get(m, "close_on_down"))) {
		r = get_bool(ld, v, "close_on_down", &h->close_on_down);
		if (stop(ld, r))
			return r;
		h->close_on_down_pos = map_key(m, "close_on_down")->pos;
	}
	if ((v = map_get(m, "passive")) && stop(ld, r = get_bool(ld, v, "passive", &h->passive)))
		return r;
	if ((v = map_get(m, "passive_hold")) &&
	    stop(ld, r = get_duration(ld, v, "passive_hold", HEALTH_INTERVAL_MIN,
				      HEALTH_INTERVAL_MAX, &h->passive_hold_ms)))
		return r;
	if (v)
		h->passive_hold_pos = map_key(m, "passive_hold")->pos;
	/* A short interval alone shortens the default timeout with it, rather
	 * than failing on a key the operator did not write. */
	if (!map_get(m, "timeout") && h->timeout_ms > h->interval_ms)
		h->timeout_ms = h->interval_ms;
	if (h->timeout_ms > h->interval_ms && clean(ld, mark)) { /* both read as written */
		v = map_get(m, "timeout");
		return fail(ld, v, "health check timeout %s is longer than its interval %s",
			    duration_text(h->timeout_ms).s, duration_text(h->interval_ms).s);
	}
	return 0;
}

/* A keepalive duration: whole seconds (the kernel counts them), 1s..9h6m7s. */
static int get_keepalive_secs(struct loader *ld, const struct ynode *v, const char *key,
			      uint32_t *ret_s)
{
	uint32_t ms;
	int r = get_duration_taking(ld, v, key, 1000, KEEPALIVE_SECS_MAX * 1000, 1000,
				    KEEPALIVE_SECS_MAX * 1000, 1000, &ms);

	if (r < 0)
		return r;
	if (ms % 1000) {
		char why[96];

		bare_why(v, 1000, KEEPALIVE_SECS_MAX * 1000, why, sizeof(why));
		return fail(ld, v, "keepalive '%s' %s is not whole seconds (TCP counts them)%s",
			    key, v->text, why);
	}
	*ret_s = ms / 1000;
	return 0;
}

/*
 * keepalive: a boolean (the defaults), or a mapping of its settings, which
 * turns it on unless it says enabled: false (writing idle: 30s and getting
 * nothing would be a trap).
 */
static int load_keepalive(struct loader *ld, const struct ynode *v, struct hashlb_keepalive_cfg *k)
{
	const struct ynode *x;
	size_t mark = ld->n_errs;
	int r;

	if (v->type != YNODE_MAP && (v->type != YNODE_SCALAR || bool_of(v) < 0))
		return fail(
			ld, v,
			"'keepalive' must be true, false or a mapping of its settings (enabled, "
			"idle, interval, count, user_timeout), found %s",
			describe(v).s);
	if (v->type == YNODE_SCALAR)
		return get_bool(ld, v, "keepalive", &k->enabled);
	r = check_settings(ld, v, keepalive_keys, "keepalive", NULL);
	if (r < 0) /* no mapping to read on */
		return r;
	k->enabled = true;
	if ((x = map_get(v, "enabled")) && stop(ld, r = get_bool(ld, x, "enabled", &k->enabled)))
		return r;
	if ((x = map_get(v, "idle")) && stop(ld, r = get_keepalive_secs(ld, x, "idle", &k->idle_s)))
		return r;
	if ((x = map_get(v, "interval")) &&
	    stop(ld, r = get_keepalive_secs(ld, x, "interval", &k->interval_s)))
		return r;
	if ((x = map_get(v, "count")) &&
	    stop(ld, r = get_u32_range(ld, x, "count", 1, KEEPALIVE_COUNT_MAX, &k->count)))
		return r;
	if ((x = map_get(v, "user_timeout"))) {
		uint64_t probes_ms =
			((uint64_t)k->idle_s + (uint64_t)k->interval_s * k->count) * 1000;

		r = get_duration_taking(ld, x, "user_timeout", 0, KEEPALIVE_SECS_MAX * 1000,
					probes_ms, KEEPALIVE_SECS_MAX * 1000, 1,
					&k->user_timeout_ms);
		if (stop(ld, r))
			return r;
		/* With TCP_USER_TIMEOUT set, the kernel ends a quiet connection at
		 * its first unanswered probe past it, whatever count says. */
		if (k->user_timeout_ms && k->user_timeout_ms < probes_ms && clean(ld, mark)) {
			char why[96];

			bare_why(x, probes_ms, KEEPALIVE_SECS_MAX * 1000, why, sizeof(why));
			return fail(
				ld, x,
				"keepalive 'user_timeout' %s is shorter than idle + interval x count "
				"(%" PRIu64 "s): a quiet connection would end at its first "
				"unanswered probe%s",
				x->text, probes_ms / 1000, why);
		}
	}
	return 0;
}

static void service_defaults(struct hashlb_service_cfg *s)
{
	hashlb_table_params_init(&s->table, HASHLB_SCHEME_MAGLEV);
	s->key = HASHLB_KEY_SRC_IP;
	s->hash_prefix.v4 = 32;
	s->hash_prefix.v6 = 128;
	s->client_prefix = s->hash_prefix;
	/* 3 s, not 1 s: Linux sends a lost SYN again after its initial RTO of 1 s, so a 1 s
	 * connect timeout gave up on a live backend at the loss of one packet (and counted it
	 * toward passive health's fall); 3 s covers one retransmission (at 1 s; the next is at
	 * 3 s), as HAProxy's and Envoy's usual connect timeouts (5 s) cover two */
	s->connect_timeout_ms = 3000;
	s->idle_timeout_ms = 300000;
	s->drain_timeout_ms = 30000;
	s->max_connections = 10000;
	s->connect_retries = 2;
	s->slow_start_ms = 0;
	s->balance_factor = 0;
	s->steering = HASHLB_STEERING_USERSPACE;
	s->steer_flows = HASHLB_STEER_FLOWS_DEFAULT;
	s->keepalive.idle_s = 60;
	s->keepalive.interval_s = 10;
	s->keepalive.count = 6;
	s->health.enabled = true;
	s->health.interval_ms = 2000;
	s->health.timeout_ms = 1000;
	s->health.rise = 2;
	s->health.fall = 3;
	s->health.passive = true;
	s->health.passive_hold_ms = 10000;
}

/*
 * A client prefix mapping <v> of key <name>, {ipv4: 1..32, ipv6: 1..128},
 * into <p> (its lengths not written are left as they are): hash_prefix and
 * client_prefix (hashlb_src_prefix_keep() applies both).
 */
static int load_src_prefix(struct loader *ld, const struct ynode *v, const char *name,
			   struct hashlb_src_prefix *p)
{
	const struct ynode *x;
	uint32_t len;
	int r;

	r = check_settings(ld, v, src_prefix_keys, name, NULL);
	if (r < 0)
		return r;
	if ((x = map_get(v, "ipv4"))) {
		r = get_u32_range(ld, x, "ipv4", 1, 32, &len);
		if (stop(ld, r))
			return r;
		if (r == 0)
			p->v4 = (uint8_t)len;
	}
	if ((x = map_get(v, "ipv6"))) {
		r = get_u32_range(ld, x, "ipv6", 1, 128, &len);
		if (stop(ld, r))
			return r;
		if (r == 0)
			p->v6 = (uint8_t)len;
	}
	return 0;
}

/*
 * hash_prefix: the leading bits of a client's address that its src-ip key
 * hashes (hashlb_tuple_mask_src()). Refused with the other keys: they hash
 * the client's port too, which a new address from a pool or a privacy
 * address comes with anyway.
 */
static int load_hash_prefix(struct loader *ld, const struct ynode *m, const struct ynode *v,
			    struct hashlb_service_cfg *s)
{
	int r = load_src_prefix(ld, v, "hash_prefix", &s->hash_prefix);

	if (r < 0)
		return r;
	if (s->key != HASHLB_KEY_SRC_IP && svc_clean(ld))
		return fail(ld, map_key(m, "hash_prefix"),
			    "'hash_prefix' applies to hash_key src-ip, but this service uses %s "
			    "(its hash takes the client's port, which changes with the address)",
			    hashlb_key_name(s->key));
	return 0;
}

static int load_scheme(struct loader *ld, const struct ynode *m, struct hashlb_service_cfg *s)
{
	const struct ynode *v = map_get(m, "scheme");
	const struct ynode *vn = map_get(m, "vnodes"), *ts = map_get(m, "table_size");
	enum hashlb_scheme scheme = HASHLB_SCHEME_MAGLEV;
	uint64_t seed = 0;
	int r;

	if (v) {
		r = want_scalar(ld, v, "scheme", "ring or maglev");
		if (r == 0 && hashlb_scheme_parse(v->text, &scheme) < 0)
			r = fail(ld, v, "'scheme' must be ring or maglev, found '%s'", v->text);
		if (stop(ld, r))
			return r;
	}
	hashlb_table_params_init(&s->table, scheme);
	if (vn && svc_clean(ld) && scheme != HASHLB_SCHEME_RING &&
	    stop(ld, r = fail(ld, map_key(m, "vnodes"),
			      "'vnodes' applies to scheme ring, but this service uses %s",
			      hashlb_scheme_name(scheme))))
		return r;
	if (vn && scheme == HASHLB_SCHEME_RING &&
	    stop(ld, r = get_u32_range(ld, vn, "vnodes", 1, HASHLB_RING_V_MAX, &s->table.ring_v)))
		return r;
	if (ts && svc_clean(ld) && scheme != HASHLB_SCHEME_MAGLEV &&
	    stop(ld, r = fail(ld, map_key(m, "table_size"),
			      "'table_size' applies to scheme maglev, but this service uses %s",
			      hashlb_scheme_name(scheme))))
		return r;
	if (ts && scheme == HASHLB_SCHEME_MAGLEV) {
		uint32_t m_size = 0, lo, hi; /* as port above */

		r = get_u32_range(ld, ts, "table_size", HASHLB_MAGLEV_M_MIN, HASHLB_MAGLEV_M_MAX,
				  &m_size);
		if (r == 0 && !hashlb_is_prime(m_size)) {
			hashlb_nearest_primes(m_size, &lo, &hi);
			r = fail(
				ld, ts,
				"'table_size' %u is not prime (Maglev needs a prime; nearest: %u or %u)",
				m_size, lo, hi);
		}
		if (stop(ld, r))
			return r;
		if (r == 0)
			s->table.maglev_m = m_size;
	}
	v = map_get(m, "seed");
	if (v) {
		r = get_u64_range(ld, v, "seed", 0, UINT64_MAX, &seed);
		if (stop(ld, r))
			return r;
		s->table.seed = seed;
	}
	v = map_get(m, "hash_key");
	if (v) {
		r = want_scalar(ld, v, "hash_key", "src-ip, src-ip-port or 4-tuple");
		if (r == 0 && hashlb_key_parse(v->text, &s->key) < 0)
			r = fail(ld, v,
				 "'hash_key' must be src-ip, src-ip-port or 4-tuple, found '%s'",
				 v->text);
		if (stop(ld, r))
			return r;
	}
	v = map_get(m, "hash_prefix");
	return v ? load_hash_prefix(ld, m, v, s) : 0;
}

/*
 * A non-empty list of address prefixes (hashlb_prefix_parse()), at most
 * PREFIXES_MAX of them: every item's error names its own position.
 */
static int load_prefixes(struct loader *ld, const struct ynode *v, const char *key,
			 struct hashlb_prefix **ret, uint32_t *ret_n)
{
	struct hashlb_prefix *p;
	int r;

	if (v->type != YNODE_SEQ)
		return fail(ld, v,
			    "'%s' must be a list of addresses or prefixes (e.g. [10.0.0.0/8, "
			    "\"::1\"]), found %s",
			    key, describe(v).s);
	if (v->n == 0 || v->n > PREFIXES_MAX)
		return fail(ld, v, "'%s' must list 1..%u addresses or prefixes, found %u", key,
			    PREFIXES_MAX, (unsigned)v->n);
	p = calloc(v->n, sizeof(*p));
	if (!p)
		return nomem(ld);
	for (size_t i = 0; i < v->n; i++) {
		const struct ynode *it = v->items[i];

		r = want_scalar(ld, it, key, "an address or prefix (a.b.c.d/N or IPV6/N)");
		if (r < 0)
			goto fail;
		r = hashlb_prefix_parse(it->text, &p[i]);
		if (r == -EDOM) {
			r = fail(ld, it,
				 "'%s': '%s' has bits set past its prefix length: write the "
				 "network's first address (10.0.0.0/8, not 10.0.0.1/8)",
				 key, it->text);
			goto fail;
		}
		if (r < 0) {
			r = fail(ld, it,
				 "'%s': '%s' is not an address or prefix (a.b.c.d, a.b.c.d/N, "
				 "IPV6 or IPV6/N; no port, no names)",
				 key, it->text);
			goto fail;
		}
	}
	*ret = p;
	*ret_n = (uint32_t)v->n;
	return 0;
fail:
	free(p);
	return r;
}

/* allow_clients or deny_clients (<key>) of service mapping <m>, if present. */
static int load_client_list(struct loader *ld, const struct ynode *m,
			    const struct hashlb_service_cfg *s, const char *key,
			    struct hashlb_prefix **ret, uint32_t *ret_n)
{
	const struct ynode *v = map_get(m, key), *via;
	int r;

	if (!v)
		return 0;
	r = userspace_only(ld, v, s, key, "does not filter the clients");
	if (r < 0)
		return r;
	via = via_begin(ld, v);
	r = load_prefixes(ld, v, key, ret, ret_n);
	ld->via = via;
	return r;
}

/*
 * source: a numeric IPv4 or IPv6 address, no port (the kernel picks one per
 * connection), or "client": the client's own address (transparent).
 */
static int get_source(struct loader *ld, const struct ynode *v, struct hashlb_service_cfg *s)
{
	struct sockaddr_in *in = (struct sockaddr_in *)&s->source;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&s->source;
	int r = want_scalar(ld, v, "source", "an address (a.b.c.d or IPV6, no port) or client");

	if (r < 0)
		return r;
	r = userspace_only(ld, v, s, "source", "opens no connection to a backend");
	if (r < 0)
		return r;
	memset(&s->source, 0, sizeof(s->source));
	s->source_len = 0;
	s->source_client = !strcmp(v->text, "client");
	if (s->source_client)
		return 0;
	if (inet_pton(AF_INET, v->text, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		s->source_len = sizeof(*in);
	} else if (inet_pton(AF_INET6, v->text, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		s->source_len = sizeof(*in6);
		return refuse_link_local(ld, v, "source", &s->source);
	} else {
		return fail(ld, v,
			    "'source' '%s' is not an IPv4 or IPv6 address (no port, no names) nor "
			    "client",
			    v->text);
	}
	return 0;
}

static int load_limits(struct loader *ld, const struct ynode *m, struct hashlb_service_cfg *s)
{
	const struct ynode *v, *via;
	int r;

	if ((v = map_get(m, "max_connections")) &&
	    stop(ld, r = get_u32_range(ld, v, "max_connections", 0, MAX_CONNECTIONS_MAX,
				       &s->max_connections)))
		return r;
	s->max_connections_given = v != NULL;
	if ((v = map_get(m, "max_connections_per_client"))) {
		r = get_u32_range(ld, v, "max_connections_per_client", 0, MAX_CONNECTIONS_MAX,
				  &s->max_connections_per_client);
		if (stop(ld, r))
			return r;
	}
	/* client_prefix names a client for the limit alone: nothing else
	 * counts clients, so without it the key would do nothing */
	if ((v = map_get(m, "client_prefix"))) {
		r = load_src_prefix(ld, v, "client_prefix", &s->client_prefix);
		if (r == 0 && !s->max_connections_per_client && svc_clean(ld))
			r = fail(ld, map_key(m, "client_prefix"),
				 "'client_prefix' applies to max_connections_per_client, which "
				 "this service does not set (nothing else counts clients)");
		if (stop(ld, r))
			return r;
	}
	if ((v = map_get(m, "max_connection_rate")) &&
	    stop(ld, r = get_u32_range(ld, v, "max_connection_rate", 0, CONNECTION_RATE_MAX,
				       &s->max_connection_rate)))
		return r;
	if ((v = map_get(m, "connect_retries")) &&
	    stop(ld, r = get_u32_range(ld, v, "connect_retries", 0, CONNECT_RETRIES_MAX,
				       &s->connect_retries)))
		return r;
	if ((v = map_get(m, "slow_start")) &&
	    stop(ld, r = get_duration(ld, v, "slow_start", 0, SLOW_START_MAX, &s->slow_start_ms)))
		return r;
	v = map_get(m, "balance_factor");
	if (v) {
		r = get_double(ld, v, "balance_factor", &s->balance_factor);
		if (r == 0 && s->balance_factor != 0 &&
		    (s->balance_factor < 1.0 || s->balance_factor > BALANCE_FACTOR_MAX)) {
			r = fail(ld, v, "'balance_factor' %s is out of range: 0 (off) or 1.0..%.0f",
				 v->text, BALANCE_FACTOR_MAX);
			s->balance_factor = 0; /* not checked again below */
		}
		if (stop(ld, r))
			return r;
	}
	v = map_get(m, "steering");
	if (v) {
		r = want_scalar(ld, v, "steering", "userspace or kernel");
		if (r == 0 && strcmp(v->text, "userspace") == 0)
			s->steering = HASHLB_STEERING_USERSPACE;
		else if (r == 0 && strcmp(v->text, "kernel") == 0)
			s->steering = HASHLB_STEERING_KERNEL;
		else if (r == 0)
			r = fail(ld, v, "'steering' must be userspace or kernel, found '%s'",
				 v->text);
		if (stop(ld, r))
			return r;
	}
	v = map_get(m, "interface");
	if (v) {
		char why[256];

		r = get_string(ld, v, "interface", &s->steer_interface);
		if (r == 0 && hashlb_ifname_refusal(s->steer_interface, why, sizeof(why)))
			r = fail(ld, v, "'interface' %s", why);
		if (stop(ld, r))
			return r;
	}
	/* Like interface, kept with steering: userspace for a reload to switch. */
	if ((v = map_get(m, "steering_flows")) &&
	    stop(ld, r = get_u32_range(ld, v, "steering_flows", 1, HASHLB_STEER_FLOWS_MAX,
				       &s->steer_flows)))
		return r;
	v = map_get(m, "source");
	if (v) {
		r = get_source(ld, v, s);
		if (stop(ld, r))
			return r;
		if (r < 0) { /* no source then: not checked against a backend's address */
			memset(&s->source, 0, sizeof(s->source));
			s->source_len = 0;
			s->source_client = false;
		}
		s->source_pos = v->pos;
	}
	v = map_get(m, "proxy_protocol");
	if (v) {
		r = want_scalar(ld, v, "proxy_protocol", "off, v1 or v2");
		/* false and no as well, as admin: takes them: a boolean's off */
		if (r < 0)
			;
		else if (bool_of(v) == 0)
			s->proxy_protocol = HASHLB_PROXY_OFF;
		else if (v->quoted && bool_text(v->text) == 0 && strcmp(v->text, "off") != 0)
			r = fail(ld, v,
				 "'proxy_protocol' must be off, v1 or v2, found the quoted string "
				 "\"%s\": write %s unquoted, or off",
				 v->text, v->text);
		else if (hashlb_proxy_protocol_parse(v->text, &s->proxy_protocol) < 0)
			r = fail(ld, v, "'proxy_protocol' must be off, v1 or v2, found '%s'",
				 v->text);
		if (stop(ld, r))
			return r;
		if (r == 0 && s->proxy_protocol &&
		    stop(ld, r = userspace_only(
				     ld, v, s, "proxy_protocol",
				     "forwards packets and opens no connection to a backend")))
			return r;
	}
	r = get_userspace_bool(ld, m, s, "accept_proxy",
			       "does not read the connections it forwards", &s->accept_proxy);
	if (stop(ld, r))
		return r;
	v = map_get(m, "accept_proxy_from");
	if (v && !s->accept_proxy && svc_clean(ld) &&
	    stop(ld, r = fail(ld, map_key(m, "accept_proxy_from"),
			      "'accept_proxy_from' needs accept_proxy: true (it lists who may "
			      "send a PROXY header)")))
		return r;
	if (v && s->accept_proxy) {
		via = via_begin(ld, v);
		r = load_prefixes(ld, v, "accept_proxy_from", &s->proxy_from, &s->n_proxy_from);
		ld->via = via;
		if (stop(ld, r))
			return r;
	}
	if (s->max_connection_rate &&
	    stop(ld, r = userspace_only(ld, map_get(m, "max_connection_rate"), s,
					"max_connection_rate", "accepts no connection to pace")))
		return r;
	/* Applied to each connection as the forwarder makes it: the kernel path
	 * would take them and do nothing (a recovering backend getting all its
	 * clients at once, a full one still more). */
	v = map_get(m, "max_connections"); /* its default is not 0: only if given */
	if (v && s->max_connections &&
	    stop(ld,
		 r = userspace_only(ld, v, s, "max_connections", "opens no connection to count")))
		return r;
	v = map_get(m, "slow_start");
	if (v && s->slow_start_ms &&
	    stop(ld, r = userspace_only(ld, v, s, "slow_start",
					"sends a recovering backend all its clients at once")))
		return r;
	v = map_get(m, "balance_factor");
	if (v && s->balance_factor != 0 &&
	    stop(ld, r = userspace_only(ld, v, s, "balance_factor",
					"counts no connection per backend")))
		return r;
	v = map_get(m, "max_connections_per_client");
	if (s->max_connections_per_client &&
	    stop(ld, r = userspace_only(ld, v, s, "max_connections_per_client",
					"opens no connection to count")))
		return r;
	r = load_client_list(ld, m, s, "allow_clients", &s->allow_clients, &s->n_allow_clients);
	if (stop(ld, r))
		return r;
	r = load_client_list(ld, m, s, "deny_clients", &s->deny_clients, &s->n_deny_clients);
	if (stop(ld, r))
		return r;
	return get_userspace_bool(ld, m, s, "log_connections",
				  "forwards packets, it sees no connection end",
				  &s->log_connections);
}

/*
 * The first backend of <s>, in file order, whose name an earlier one has:
 * 1 with its index in <ret_dup> and the earlier one's in <ret_first>, 0 if
 * none, -ENOMEM (hashlb_names_duplicate()).
 */
int hlb_duplicate_backend(const struct hashlb_service_cfg *s, uint32_t *ret_dup,
			  uint32_t *ret_first)
{
	const char **names;
	int r;

	if (s->n_backends < 2)
		return 0;
	names = calloc(s->n_backends, sizeof(*names));
	if (!names)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->n_backends; i++)
		names[i] = s->backends[i].name;
	r = hashlb_names_duplicate(names, s->n_backends, ret_dup, ret_first);
	free(names);
	return r;
}

/*
 * Where a core build error points: the field that the core rejected,
 * found again from the reason, since the core reports indices, not nodes.
 */
static const struct ynode *core_error_node(const struct ynode *m, const struct ynode *backends,
					   const struct hashlb_service_cfg *s,
					   enum hashlb_err_reason reason)
{
	uint32_t dup, first;
	const struct ynode *v;

	switch (reason) {
	case HASHLB_ERR_DUPLICATE_NAME:
		if (hlb_duplicate_backend(s, &dup, &first) > 0)
			return map_get(backends->items[dup], "name");
		break;
	case HASHLB_ERR_WEIGHT_RANGE:
		for (uint32_t i = 0; i < s->n_backends; i++) {
			if (s->backends[i].weight > HASHLB_WEIGHT_MAX)
				return map_get(backends->items[i], "weight");
		}
		break;
	case HASHLB_ERR_ALL_WEIGHTS_ZERO:
		/* at the first weight, the value to change: the list was no place to
		 * edit, and a weight 0 of each backend is written (the default is 1) */
		if (backends->type == YNODE_SEQ && backends->n > 0 &&
		    backends->items[0]->type == YNODE_MAP &&
		    (v = map_get(backends->items[0], "weight")) != NULL)
			return v;
		break;
	case HASHLB_ERR_BAD_NAME:
		for (uint32_t i = 0; i < s->n_backends; i++) {
			if (!hashlb_backend_name_ok(s->backends[i].name))
				return map_get(backends->items[i], "name");
		}
		break;
	case HASHLB_ERR_SIZE_RANGE:
	case HASHLB_ERR_NOT_PRIME:
	case HASHLB_ERR_SIZE_TOO_SMALL:
	case HASHLB_ERR_MEMORY_CAP:
		v = map_get(m, s->table.scheme == HASHLB_SCHEME_RING ? "vnodes" : "table_size");
		if (v)
			return v;
		v = map_get(m, "scheme");
		if (v)
			return v;
		break;
	default:
		break;
	}
	return backends;
}

bool hashlb_addr_is_any(const struct sockaddr_storage *a)
{
	const struct in6_addr *in6 = &((const struct sockaddr_in6 *)a)->sin6_addr;

	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
	/* [::ffff:0.0.0.0] is 0.0.0.0 written IPv4-mapped: bound so, it takes
	 * every IPv4 client, and no connection has it as its destination */
	return IN6_IS_ADDR_UNSPECIFIED(in6) ||
	       (IN6_IS_ADDR_V4MAPPED(in6) && !memcmp(in6->s6_addr + 12, "\0\0\0\0", 4));
}

bool hashlb_listen_moves_destination(const struct sockaddr_storage *was, socklen_t was_len,
				     const struct sockaddr_storage *now, socklen_t now_len)
{
	uint16_t pw = hashlb_addr_port(was), pn = hashlb_addr_port(now);

	if (was_len == now_len && !memcmp(was, now, now_len))
		return false;
	/* a port 0 that moves is another port; a wildcard hashes each connection's own address,
	 * one a specific listener of its port is bound to */
	if (!pw || !pn || pw != pn)
		return true;
	if (hashlb_addr_is_any(was) || hashlb_addr_is_any(now))
		return false;
	/* two specific addresses: one if they clash, 127.0.0.1:P and [::ffff:127.0.0.1]:P (the
	 * kernel's one address, and the tuple hashes IPv4 IPv4-mapped: hashlb/tuple.h) */
	return !hashlb_listen_clash(was, now);
}

uint16_t hashlb_addr_port(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)a)->sin_port);
	if (a->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
	return 0;
}

/* <a>, an IPv4-mapped IPv6 address ([::ffff:a.b.c.d]:p) as the IPv4 address it
 * maps: the address the kernel matches it as. */
static struct sockaddr_storage addr_canon(const struct sockaddr_storage *a)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)a;
	struct sockaddr_storage c = *a;

	if (a->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&c;

		memset(&c, 0, sizeof(c));
		s4->sin_family = AF_INET;
		s4->sin_port = s6->sin6_port;
		memcpy(&s4->sin_addr, &s6->sin6_addr.s6_addr[12], 4);
	}
	return c;
}

/*
 * Whether two listen addresses would take the same port: equal (an
 * IPv4-mapped address as the IPv4 address it is), or one is a wildcard that
 * covers the other: 0.0.0.0 of IPv4, [::] of both families (hashlb's IPv6
 * listeners are dual-stack). Port 0 (any free port) never clashes.
 */
bool hashlb_listen_clash(const struct sockaddr_storage *x, const struct sockaddr_storage *y)
{
	struct sockaddr_storage a = addr_canon(x), b = addr_canon(y);

	if (hashlb_addr_port(&a) != hashlb_addr_port(&b) || hashlb_addr_port(&a) == 0)
		return false;
	if (a.ss_family != b.ss_family) /* only [::] covers the other family */
		return a.ss_family == AF_INET6 ? hashlb_addr_is_any(&a) : hashlb_addr_is_any(&b);
	if (hashlb_addr_is_any(&a) || hashlb_addr_is_any(&b))
		return true;
	if (a.ss_family == AF_INET)
		return ((const struct sockaddr_in *)&a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)&b)->sin_addr.s_addr;
	return memcmp(&((const struct sockaddr_in6 *)&a)->sin6_addr,
		      &((const struct sockaddr_in6 *)&b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

bool hashlb_addr_is_loopback(const struct sockaddr_storage *a)
{
	struct sockaddr_storage c = addr_canon(a);

	if (c.ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)&c)->sin_addr.s_addr) >> 24) == 127;
	return c.ss_family == AF_INET6 &&
	       IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)&c)->sin6_addr);
}

/*
 * Whether <a> is a multicast address (IPv4's, IPv6's, IPv4's mapped) or
 * IPv4's broadcast: the kernel refuses a TCP connect to it (ENETUNREACH).
 */
static bool addr_is_group(const struct sockaddr_storage *a)
{
	struct sockaddr_storage c = addr_canon(a);

	if (c.ss_family == AF_INET) {
		uint32_t v4 = ntohl(((const struct sockaddr_in *)&c)->sin_addr.s_addr);

		return IN_MULTICAST(v4) || v4 == INADDR_BROADCAST;
	}
	return c.ss_family == AF_INET6 &&
	       IN6_IS_ADDR_MULTICAST(&((const struct sockaddr_in6 *)&c)->sin6_addr);
}

/*
 * Whether a service listening on <listen> would forward to itself through
 * <backend>: the same address, or its wildcard and a loopback address, on
 * the same port. (Another local address of the host cannot be known
 * without asking the kernel, which the loader does not do.)
 */
static bool addr_loops(const struct sockaddr_storage *listen,
		       const struct sockaddr_storage *backend)
{
	struct sockaddr_storage b = addr_canon(backend);

	if (!hashlb_listen_clash(listen, &b))
		return false;
	return !hashlb_addr_is_any(listen) || hashlb_addr_is_loopback(&b);
}

int hlb_service_backend_family(const struct hashlb_service_cfg *s)
{
	struct sockaddr_storage l;

	if (s->source_len)
		return s->source.ss_family;
	if (!s->source_client || s->accept_proxy || !s->listen_addr_len)
		return AF_UNSPEC;
	l = addr_canon(&s->listen_addr);
	/* [::] takes IPv4 clients too (the listener clears IPV6_V6ONLY) */
	return l.ss_family == AF_INET6 && hashlb_addr_is_any(&l) ? AF_UNSPEC : l.ss_family;
}

const char *hlb_backend_addr_problem(const struct hashlb_service_cfg *s,
				     const struct hashlb_backend_cfg *b, char *buf, size_t len)
{
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&b->addr;
	int family = hlb_service_backend_family(s);

	if (family != AF_UNSPEC && b->addr.ss_family != family) {
		const char *fam = family == AF_INET ? "IPv4" : "IPv6";

		if (s->source_len)
			snprintf(buf, len,
				 "backend '%s' at %s is %s but the service's source is %s", b->name,
				 b->address, b->addr.ss_family == AF_INET ? "IPv4" : "IPv6", fam);
		else
			snprintf(buf, len,
				 "backend '%s' at %s is %s but the service's clients are %s "
				 "(listen %s), and source: client connects from each one's own "
				 "address",
				 b->name, b->address,
				 b->addr.ss_family == AF_INET ? "IPv4" : "IPv6", fam, s->listen);
		return buf;
	}
	if (addr_loops(&s->listen_addr, &b->addr)) {
		snprintf(buf, len,
			 "backend '%s' at %s is service '%s' itself (listen %s): connections "
			 "would loop",
			 b->name, b->address, s->name, s->listen);
		return buf;
	}
	if (addr_is_group(&b->addr)) {
		snprintf(buf, len,
			 "backend '%s' at %s is a multicast or broadcast address: no TCP connect "
			 "reaches it",
			 b->name, b->address);
		return buf;
	}
	/* Linux connects to the unspecified address as to loopback: this host,
	 * whatever the config meant (a listen address copied as a backend's) */
	if (hashlb_addr_is_any(&b->addr)) {
		snprintf(buf, len,
			 "backend '%s' at %s is the unspecified address, which a connect takes for "
			 "this host: write %s for this host, or the backend's own address",
			 b->name, b->address,
			 addr_canon(&b->addr).ss_family == AF_INET ? "127.0.0.1" : "[::1]");
		return buf;
	}
	/* a name resolved so (a numeric one is refused as it is read) */
	if (b->addr.ss_family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr) &&
	    !in6->sin6_scope_id) {
		snprintf(buf, len,
			 "backend '%s' at %s is a link-local address without a zone (an "
			 "interface): no connect can reach it",
			 b->name, b->address);
		return buf;
	}
	return NULL;
}

static int load_service(struct loader *ld, const struct ynode *m, struct hashlb_service_cfg *s)
{
	char msg[HASHLB_NAME_MAX * 2 + 160];
	const struct ynode *v, *backends, *via;
	struct hashlb_error cerr;
	uint32_t dup, first;
	bool head_clean; /* listen and source read as written, no backend said to be against them */
	int r;

	service_defaults(s);
	ld->svc_mark = ld->n_errs;
	r = check_map(ld, m, service_keys, "service");
	if (r < 0)
		return r;
	s->pos = m->pos;

	v = map_get(m, "name");
	if (!v && !svc_clean(ld)) /* a key misspelt, said: perhaps 'name' */
		return -EINVAL;
	if (!v)
		return fail(ld, m, "service has no 'name'");
	r = get_string(ld, v, "name", &s->name);
	if (r < 0)
		return r;
	/* refused, it still names the service in what follows */
	if (!service_name_ok(s->name) &&
	    stop(ld,
		 r = fail(ld, v,
			  "service name '%s'%s must be 1 to %u characters from A-Z a-z 0-9 . _ -",
			  s->name, too_long(s->name, SERVICE_NAME_MAX, "bytes").s,
			  SERVICE_NAME_MAX)))
		return r;

	v = map_get(m, "listen");
	if (!v && svc_clean(ld) &&
	    stop(ld, r = fail(ld, m,
			      "service '%s' has no 'listen' address (a.b.c.d:PORT or [ADDR]:PORT)",
			      s->name)))
		return r;
	r = v ? get_addr(ld, v, "listen", true, &s->listen, &s->listen_addr, &s->listen_addr_len)
	      : -EINVAL;
	if (stop(ld, r))
		return r;
	if (v)
		s->listen_pos = v->pos;

	r = load_scheme(ld, m, s);
	if (stop(ld, r))
		return r;
	v = map_get(m, "timeouts");
	via = via_begin(ld, v);
	ld->section = "timeouts";
	r = v ? load_timeouts(ld, v, s) : 0;
	ld->section = NULL;
	ld->via = via;
	if (stop(ld, r))
		return r;
	r = load_limits(ld, m, s);
	if (stop(ld, r))
		return r;
	if (s->queue_timeout_ms &&
	    stop(ld, r = userspace_only(ld, map_get(map_get(m, "timeouts"), "queue"), s,
					"timeouts.queue", "holds no connection to queue")))
		return r;
	v = map_get(m, "abort_on_close");
	if (v && stop(ld, r = get_bool(ld, v, "abort_on_close", &s->abort_on_close)))
		return r;
	if (s->abort_on_close && !s->queue_timeout_ms && svc_clean(ld) &&
	    stop(ld, r = fail(ld, map_key(m, "abort_on_close"),
			      "'abort_on_close' needs timeouts.queue (it applies to clients "
			      "waiting in the queue)")))
		return r;
	v = map_get(m, "health");
	via = via_begin(ld, v);
	ld->section = "health";
	r = v ? load_health(ld, v, &s->health) : 0;
	ld->section = NULL;
	ld->via = via;
	if (stop(ld, r))
		return r;
	if (s->health.close_on_down &&
	    stop(ld, r = userspace_only(ld, map_get(v, "close_on_down"), s, "health.close_on_down",
					"holds no connection to close: it sends the flows of a "
					"down backend to their next backend")))
		return r;
	v = map_get(m, "keepalive");
	via = via_begin(ld, v);
	ld->section = "keepalive";
	r = v ? load_keepalive(ld, v, &s->keepalive) : 0;
	ld->section = NULL;
	ld->via = via;
	if (stop(ld, r))
		return r;
	if (s->keepalive.enabled &&
	    stop(ld, r = userspace_only(ld, map_key(m, "keepalive"), s, "keepalive",
					"holds no connection to probe")))
		return r;
	if (s->steering == HASHLB_STEERING_KERNEL && !s->steer_interface && svc_clean(ld) &&
	    stop(ld, r = fail(ld, map_get(m, "steering"),
			      "steering: kernel needs 'interface': the network interface the "
			      "steering program attaches to (no default)")))
		return r;
	/* The kernel path serves the listen address as the VIP: packets are
	 * matched by their destination address, which a wildcard never is
	 * (before, such a service was attached and its tables "published",
	 * and it steered nothing). */
	if (s->steering == HASHLB_STEERING_KERNEL && hashlb_addr_is_any(&s->listen_addr) &&
	    svc_clean(ld) &&
	    stop(ld, r = fail(ld, map_get(m, "listen"),
			      "steering: kernel needs a listen address that clients connect to "
			      "(the VIP), not a wildcard address: the kernel path matches "
			      "packets by their destination")))
		return r;

	backends = map_get(m, "backends");
	if (!backends && !svc_clean(ld))
		return -EINVAL;
	if (!backends)
		return fail(ld, m, "service '%s' has no 'backends'", s->name);
	if (backends->type != YNODE_SEQ)
		return fail(ld, backends,
			    "'backends' must be a list (items starting with '- '), found %s",
			    describe(backends).s);
	if (backends->n == 0)
		return fail(ld, backends, "service '%s' has an empty list of backends", s->name);
	if (backends->n > HASHLB_BACKENDS_MAX)
		return fail(ld, backends, "service '%s' has %u backends: at most %u", s->name,
			    (unsigned)backends->n, HASHLB_BACKENDS_MAX);
	s->backends = calloc(backends->n, sizeof(*s->backends));
	if (!s->backends)
		return nomem(ld);
	head_clean = svc_clean(ld);
	via = via_begin(ld, backends);
	/* each backend on its own: a wrong one does not hide the next one's error */
	for (size_t i = 0; i < backends->n; i++) {
		const struct ynode *via_list = via_begin(ld, backends->items[i]);
		const struct ynode *bm = backends->items[i];

		r = load_backend(ld, bm, &s->backends[i]);
		s->n_backends = (uint32_t)i + 1;
		if (r == 0 && s->backends[i].close_on_return)
			r = userspace_only(ld, map_get(bm, "close_on_return"), s, "close_on_return",
					   "holds no connection to close");
		if (r == 0 && s->backends[i].max_connections)
			r = userspace_only(ld, map_get(bm, "max_connections"), s, "max_connections",
					   "opens no connection to count");
		/* a name is checked so once resolved (hashlb_config_resolve()); against the
		 * listen address and source, as written only */
		if (r == 0 && s->backends[i].addr_len && head_clean &&
		    hlb_backend_addr_problem(s, &s->backends[i], msg, sizeof(msg))) {
			r = fail(ld, map_get(bm, "address"), "%s", msg);
			/* the first said: a source of the wrong family would make one of each */
			head_clean = false;
		}
		ld->via = via_list;
		if (stop(ld, r))
			return r;
	}
	ld->via = via;
	/* what follows checks the backends together, and the scheme they make a table of */
	if (!svc_clean(ld))
		return -EINVAL;

	r = hlb_duplicate_backend(s, &dup, &first);
	if (r < 0)
		return nomem(ld);
	if (r > 0) {
		via_begin(ld, backends); /* "backends: [*a, *a]": the second alias */
		via_begin(ld, backends->items[dup]);
		return fail(ld, map_get(backends->items[dup], "name"),
			    "duplicate backend name '%s' in service '%s' (first at line %d)",
			    s->backends[dup].name, s->name, s->backends[first].pos.line);
	}

	/* A config that loads also builds: the daemon's table, checked (not
	 * built: a reload of 1,000 Maglev services spent 0.6 s building them) */
	r = hashlb_service_cfg_check_table(s, &cerr);
	if (r < 0) {
		if (cerr.reason == HASHLB_ERR_NOMEM)
			return nomem(ld);
		return fail(ld, core_error_node(m, backends, s, cerr.reason), "service '%s': %s%s",
			    s->name, cerr.msg,
			    cerr.reason == HASHLB_ERR_MEMORY_CAP
				    ? " (256 MiB, the most a service's table may take)"
				    : "");
	}
	return 0;
}

static int load_admin(struct loader *ld, const struct ynode *v, struct hashlb_config *c)
{
	int r;

	/* off, false, no: as a boolean's; "off" quoted too, the word the docs give, as
	 * proxy_protocol takes it (no address is named so) */
	if (ynode_is_null(v) || bool_of(v) == 0 ||
	    (v->type == YNODE_SCALAR && v->quoted && !strcmp(v->text, "off"))) {
		c->admin_empty = v->type == YNODE_SCALAR && !v->quoted && v->len == 0 &&
				 !(ld->flags & HASHLB_LOAD_ADMIN_GIVEN);
		return 0;
	}
	r = want_addr_scalar(ld, v, "admin", "an address, unix:/PATH or off");
	if (r < 0)
		return r;
	if (v->quoted && bool_text(v->text) == 0) /* it said "missing ':PORT'" */
		return fail(ld, v,
			    "'admin' must be an address, unix:/PATH or off, found the quoted "
			    "string \"%s\": write %s unquoted to turn the endpoint off",
			    v->text, v->text);
	if (strncmp(v->text, "unix:", 5) == 0) {
		char why[160];

		if (hashlb_unix_addr_parse(v->text, &c->admin_addr, &c->admin_addr_len, why,
					   sizeof(why)) < 0)
			return fail(ld, v, "'admin': %s", why);
		return get_string(ld, v, "admin", &c->admin);
	}
	if (v->text[0] == '/') /* it said "missing ':PORT'" */
		return fail(ld, v, "'admin': '%s' is a path: a Unix socket is written unix:%s",
			    v->text, v->text);
	return get_addr(ld, v, "admin", true, &c->admin, &c->admin_addr, &c->admin_addr_len);
}

/*
 * The services loaded so far, by what must be unique among them. Values
 * point into c->services, allocated once for the whole list: of two, the
 * lower is the earlier in the file.
 */
struct service_index {
	struct keymap names;
	/* Listen addresses as hashlb_listen_clash() compares them (an
	 * IPv4-mapped one as IPv4): each by address and port, and the first
	 * of each family on each port, which a wildcard clashes with. */
	struct keymap listens;
};

/* A key of service_index.listens: family and port, then the address if any. */
struct listen_key {
	uint8_t b[3 + 16];
	size_t len;
};

static struct listen_key listen_key(const struct sockaddr_storage *a, bool with_addr)
{
	const uint8_t *addr = a->ss_family == AF_INET
				      ? (const uint8_t *)&((const struct sockaddr_in *)a)->sin_addr
				      : ((const struct sockaddr_in6 *)a)->sin6_addr.s6_addr;
	uint16_t port = hashlb_addr_port(a);
	struct listen_key k = { .b = { a->ss_family == AF_INET ? 4 : 6, port >> 8, port & 255 },
				.len = 3 };

	if (with_addr) {
		memcpy(k.b + 3, addr, a->ss_family == AF_INET ? 4 : 16);
		k.len += a->ss_family == AF_INET ? 4 : 16;
	}
	return k;
}

/* The service of <x> that listens on the wildcard address of <family> at
 * <port> (<any_addr>), or the first of <family> at <port> (!<any_addr>). */
static const struct hashlb_service_cfg *listen_find(const struct service_index *x, int family,
						    uint16_t port, bool any_addr)
{
	struct sockaddr_storage a = { .ss_family = (sa_family_t)family };
	struct listen_key k;

	if (family == AF_INET)
		((struct sockaddr_in *)&a)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)&a)->sin6_port = htons(port);
	k = listen_key(&a, any_addr);
	return keymap_get(&x->listens, k.b, k.len);
}

static const struct hashlb_service_cfg *earlier(const struct hashlb_service_cfg *a,
						const struct hashlb_service_cfg *b)
{
	return !a || (b && b < a) ? b : a;
}

/*
 * The first service of <x> whose listen address clashes with <a>
 * (hashlb_listen_clash(), <a> canonical), or NULL. A wildcard takes the
 * port on every address of its family, and [::] on IPv4's too.
 */
static const struct hashlb_service_cfg *listen_clash_first(const struct service_index *x,
							   const struct sockaddr_storage *a)
{
	const struct hashlb_service_cfg *o;
	uint16_t port = hashlb_addr_port(a);
	struct listen_key k;

	if (!port)
		return NULL;
	if (hashlb_addr_is_any(a)) {
		/* any IPv4 one; [::] any IPv6 one too, 0.0.0.0 [::] only */
		o = listen_find(x, AF_INET, port, false);
		return earlier(o, listen_find(x, AF_INET6, port, a->ss_family == AF_INET));
	}
	k = listen_key(a, true);
	o = keymap_get(&x->listens, k.b, k.len);
	o = earlier(o, listen_find(x, a->ss_family, port, true));
	if (a->ss_family == AF_INET)
		o = earlier(o, listen_find(x, AF_INET6, port, true));
	return o;
}

/* <s> into <x>, as the services after it compare with it. */
static int service_index_add(struct service_index *x, const struct hashlb_service_cfg *s)
{
	struct sockaddr_storage a = addr_canon(&s->listen_addr);
	void *val = (void *)s;

	if (keymap_put(&x->names, s->name, strlen(s->name), val, false) < 0)
		return -ENOMEM;
	if (hashlb_addr_port(&a)) {
		struct listen_key k = listen_key(&a, true);

		if (keymap_put(&x->listens, k.b, k.len, val, false) < 0)
			return -ENOMEM;
		k = listen_key(&a, false);
		if (keymap_put(&x->listens, k.b, k.len, val, false) < 0) /* kept if not the first */
			return -ENOMEM;
	}
	return 0;
}

/* The service of <x> that backend <b> (resolved) is, as addr_loops() tells it, or NULL. */
static const struct hashlb_service_cfg *backend_service(const struct service_index *x,
							const struct hashlb_backend_cfg *b)
{
	struct sockaddr_storage a;
	const struct hashlb_service_cfg *o;

	if (!b->addr_len)
		return NULL;
	a = addr_canon(&b->addr);
	o = listen_clash_first(x, &a);
	return o && addr_loops(&o->listen_addr, &b->addr) ? o : NULL;
}

/*
 * Whether the services of <c> (indexed in <x>) forward to one another in a
 * ring: a backend at another service's listen address takes its clients
 * there, and a path back to the first makes every connection open the
 * next, until the fd limit (one client filled the connection cap, 9,921
 * connections, and every service of the process stopped accepting). A
 * backend at its own service is hlb_backend_addr_problem()'s. 1 with the
 * backend that closes the ring in *ret_s and *ret_b and <msg> saying it,
 * 0 if there is none, -ENOMEM. A walk with a stack of its own: 100,000
 * services in a chain would overflow the thread's.
 */
static int services_loop(const struct hashlb_config *c, const struct service_index *x,
			 uint32_t *ret_s, uint32_t *ret_b, char *msg, size_t len)
{
	enum { NEW, ON_PATH, DONE };
	uint8_t *mark = calloc(c->n_services ? c->n_services : 1, 1);
	uint32_t *path = calloc(c->n_services ? c->n_services : 1, sizeof(*path));
	uint32_t *next = calloc(c->n_services ? c->n_services : 1, sizeof(*next));
	int ret = 0;

	if (!mark || !path || !next) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t root = 0; root < c->n_services && !ret; root++) {
		uint32_t depth = 0;

		if (mark[root] != NEW)
			continue;
		path[depth++] = root;
		mark[root] = ON_PATH;
		while (depth && !ret) {
			uint32_t i = path[depth - 1];
			const struct hashlb_service_cfg *s = &c->services[i];
			const struct hashlb_service_cfg *o = NULL;
			uint32_t j;

			while (next[i] < s->n_backends && !o)
				o = backend_service(x, &s->backends[next[i]++]);
			if (!o) {
				mark[i] = DONE;
				depth--;
				continue;
			}
			j = (uint32_t)(o - c->services);
			if (mark[j] == NEW) {
				mark[j] = ON_PATH;
				path[depth++] = j;
			} else if (mark[j] == ON_PATH && j != i) {
				const struct hashlb_backend_cfg *b = &s->backends[next[i] - 1];
				uint32_t from = depth - 1;
				size_t n;

				while (path[from] != j)
					from--;
				n = (size_t)snprintf(
					msg, len,
					"backend '%s' at %s is service '%s' (listen %s), "
					"which forwards back to service '%s': connections "
					"would loop (",
					b->name, b->address, o->name, o->listen, s->name);
				for (uint32_t k = from; k < depth && n < len; k++)
					n += (size_t)snprintf(msg + n, len - n, "%s -> ",
							      c->services[path[k]].name);
				if (n < len)
					snprintf(msg + n, len - n, "%s)", o->name);
				*ret_s = i;
				*ret_b = next[i] - 1;
				ret = 1;
			}
		}
	}
out:
	free(mark);
	free(path);
	free(next);
	return ret;
}

int hlb_services_loop(const struct hashlb_config *c, uint32_t *ret_s, uint32_t *ret_b, char *msg,
		      size_t len)
{
	struct service_index x = { 0 };
	int r = 0;

	for (uint32_t i = 0; i < c->n_services && r == 0; i++)
		r = service_index_add(&x, &c->services[i]);
	if (r == 0)
		r = services_loop(c, &x, ret_s, ret_b, msg, len);
	keymap_free(&x.names);
	keymap_free(&x.listens);
	return r;
}

static int load_services(struct loader *ld, const struct ynode *root, const struct ynode *services,
			 struct hashlb_config *c);

/*
 * The admin key of mapping <root> into <c>, or the default if it is not
 * written. With HASHLB_LOAD_ADMIN_ONLY, the keys are not checked before:
 * those that are no scalar are skipped, and a second admin is refused here.
 */
static int load_root_admin(struct loader *ld, const struct ynode *root, struct hashlb_config *c)
{
	const struct ynode *v = NULL, *first = NULL;

	for (size_t i = 0; i < ynode_pairs(root); i++) {
		const struct ynode *k = ynode_key(root, i);

		if (k->type != YNODE_SCALAR || strcmp(k->text, "admin") != 0)
			continue;
		if (first && !(ld->flags & HASHLB_LOAD_ADMIN_ONLY))
			break; /* check_map() said so */
		if (first)
			return fail(ld, k,
				    "duplicate key 'admin' in the configuration (first at "
				    "line %d)",
				    first->pos.line);
		first = k;
		v = ynode_value(root, i);
	}
	/* Before a YAML error, an admin key not written may come after it, and a value
	 * not a scalar may be cut there: the error is the answer (still in ld->err). */
	if (ld->prefix && (!v || v->type != YNODE_SCALAR))
		return -ENOENT;
	if (v) {
		c->admin_pos = v->pos;
		return load_admin(ld, v, c);
	}
	c->admin = strdup(ADMIN_DEFAULT);
	if (!c->admin)
		return nomem(ld);
	hashlb_addr_parse(ADMIN_DEFAULT, false, &c->admin_addr, &c->admin_addr_len);
	return 0;
}

/*
 * Whether <key> is written more than once in mapping <map>: check_map() said so, and the
 * first is read. What is checked against it is not checked: "admin: 127.0.0.1:8080" then
 * "admin: 127.0.0.1:9000" and a service listening on 8080 was also said to clash with the
 * admin endpoint, which deleting the first line, the one meant to go, made vanish. So with
 * a default where a top-level key is misspelt: "admn: 127.0.0.1:9000" and a service on the
 * default admin address, 127.0.0.1:9901.
 */
static bool key_repeated(const struct ynode *map, const char *key)
{
	size_t n = 0;

	for (size_t i = 0; i < ynode_pairs(map) && n < 2; i++) {
		const struct ynode *k = ynode_key(map, i);

		n += k->type == YNODE_SCALAR && !strcmp(k->text, key);
	}
	return n > 1;
}

static int load_root(struct loader *ld, const struct ynode *root, struct hashlb_config *c)
{
	const struct ynode *v, *services;
	bool keys_ok; /* each top-level key known, once: no admin or table_memory misspelt */
	int r;

	if (!root || ynode_is_null(root))
		return fail(ld, NULL, "the configuration is empty: it needs a 'services' list");
	if (root->type != YNODE_MAP)
		return fail(ld, root,
			    "the configuration must be a mapping with a 'services' list, found %s",
			    describe(root).s);
	if (ld->flags & HASHLB_LOAD_ADMIN_ONLY)
		return load_root_admin(ld, root, c);
	r = check_map(ld, root, top_keys, "the configuration");
	if (r < 0)
		return r;
	keys_ok = clean(ld, 0);

	v = map_get(root, "workers");
	if (v) {
		if (v->type == YNODE_SCALAR && !v->quoted && strcmp(v->text, "auto") == 0) {
			c->workers = 0;
		} else if (v->type == YNODE_SCALAR && !ynode_is_null(v) && !v->quoted &&
			   isdigit((unsigned char)
					   v->text[v->text[0] == '+' || v->text[0] == '-'])) {
			r = get_u32_range(ld, v, "workers", 1, WORKERS_MAX, &c->workers);
		} else {
			r = fail(ld, v, "'workers' must be auto or a number 1..%u, found %s",
				 WORKERS_MAX, describe(v).s);
		}
		if (stop(ld, r))
			return r;
	}

	v = map_get(root, "resolve_every");
	if (v) {
		r = get_duration_taking(ld, v, "resolve_every", 0, RESOLVE_EVERY_MAX_MS, 1000,
					RESOLVE_EVERY_MAX_MS, 1, &c->resolve_every_ms);
		if (r == 0 && c->resolve_every_ms && c->resolve_every_ms < 1000) {
			char why[96];

			bare_why(v, 1000, RESOLVE_EVERY_MAX_MS, why, sizeof(why));
			r = fail(ld, v, "'resolve_every' %s is shorter than 1s (0 = off)%s",
				 v->text, why);
		}
		if (stop(ld, r))
			return r;
	}

	c->table_memory = HASHLB_TABLE_MEMORY_DEFAULT;
	v = map_get(root, "table_memory");
	if (v) {
		c->table_memory_pos = v->pos;
		r = get_unit_number(ld, v, "table_memory", &size_kind, HASHLB_TABLE_MEMORY_MIN,
				    HASHLB_TABLE_MEMORY_MAX, "no cap", &c->table_memory);
		if (stop(ld, r))
			return r;
		ld->table_memory_bad = r < 0 || key_repeated(root, "table_memory");
	}
	/* not written, and a key misspelt ("tabel_memory: 4GiB"): the default is not the cap */
	ld->table_memory_bad |= !v && !keys_ok;

	r = load_root_admin(ld, root, c);
	if (stop(ld, r))
		return r;
	ld->admin_bad =
		r < 0 || key_repeated(root, "admin") || (!map_get(root, "admin") && !keys_ok);

	services = map_get(root, "services");
	if (!services && !clean(ld, 0)) /* a key misspelt, said: perhaps 'services' */
		return -EINVAL;
	if (!services)
		return fail(ld, root, "the configuration has no 'services' list");
	if (services->type != YNODE_SEQ)
		return fail(ld, services,
			    "'services' must be a list (items starting with '- name:'), found %s",
			    describe(services).s);
	if (services->n == 0)
		return fail(ld, services, "'services' is empty: at least one service is needed");
	c->services = calloc(services->n, sizeof(*c->services));
	if (!c->services)
		return nomem(ld);
	return load_services(ld, root, services, c);
}

/* The loader's refusal past table_memory, <mem>'s, at service <sm> as fail() says an error:
 * -E2BIG, HASHLB_ERR_MEMORY_CAP, as every table_memory refusal (before, -EINVAL and
 * HASHLB_ERR_CONFIG, as any config error, where a resolve round's, a reload's, ctl set's and an
 * upgrade's said the cap). */
static int table_memory_fail(struct loader *ld, const struct ynode *sm,
			     const struct hashlb_error *mem)
{
	bool first = !ld->n_errs;

	fail(ld, sm, "%s", mem->msg);
	if (ld->list && ld->list->n && ld->list->n == ld->list->total)
		ld->list->v[ld->list->n - 1].reason = HASHLB_ERR_MEMORY_CAP;
	if (first) {
		ld->first_ret = -E2BIG;
		if (ld->err)
			ld->err->reason = HASHLB_ERR_MEMORY_CAP;
	}
	return -E2BIG;
}

/*
 * 0 if service <s> (of mapping <sm>) shares nothing that must be unique
 * with the services of <x>, those before it; else the error naming the
 * first of them it shares something with, and of what that one shares,
 * the name before the listen address. Several services steered in the
 * kernel on one interface share its program, a table each (before, one
 * per interface was allowed); the listen address is each one's VIP, so
 * one VIP given twice is a listen clash.
 */
static int service_clash(struct loader *ld, const struct ynode *sm, const struct service_index *x,
			 const struct hashlb_service_cfg *s)
{
	struct sockaddr_storage a = addr_canon(&s->listen_addr);
	const struct hashlb_service_cfg *o_name, *o_listen, *o;

	o_name = keymap_get(&x->names, s->name, strlen(s->name));
	o_listen = listen_clash_first(x, &a);
	o = earlier(o_name, o_listen);
	if (!o)
		return 0;
	if (o == o_name)
		return fail(ld, map_get(sm, "name"),
			    "duplicate service name '%s' (first at line %d)", s->name, o->pos.line);
	return fail(ld, map_get(sm, "listen"),
		    "listen address %s clashes with %s of service '%s' (line %d)", s->listen,
		    o->listen, o->name, o->pos.line);
}

/* Errors in file order: by line, then column; qsort() is not stable, the message decides
 * between two at one place (the order a run finds them in would be as good). */
static int error_pos_cmp(const void *a, const void *b)
{
	const struct hashlb_error *x = a, *y = b;

	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->column != y->column)
		return x->column < y->column ? -1 : 1;
	return strcmp(x->msg, y->msg);
}

/*
 * Each service of <services> into <c>, checked against those before it
 * (service_clash()) through maps of them: each compared with every one
 * before it took 5.7 CPU s at 100,000 services, at each start, check and
 * reload.
 */
static int load_services(struct loader *ld, const struct ynode *root, const struct ynode *services,
			 struct hashlb_config *c)
{
	struct hashlb_error mem = { 0 };
	struct service_index x = { 0 };
	int r = 0;

	for (size_t i = 0; i < services->n && !stop(ld, r); i++) {
		struct hashlb_service_cfg *s = &c->services[i];
		const struct ynode *sm = services->items[i];

		c->n_services = (uint32_t)i + 1;
		ld->via = NULL; /* a service given by an alias: its errors say so */
		via_begin(ld, sm);
		r = load_service(ld, sm, s);
		/* one with an error is left out of what the others are checked against (no
		 * name or listen address it may not have) and of table_memory's sum */
		if (r < 0)
			continue;
		if (!ld->table_memory_bad &&
		    hashlb_table_memory_add(c, s, hashlb_service_cfg_table_bytes_max(s),
					    HASHLB_TABLE_MEMORY_CONFIG, &c->table_bytes,
					    &mem) < 0) {
			r = mem.reason == HASHLB_ERR_NOMEM ? nomem(ld)
							   : table_memory_fail(ld, sm, &mem);
			/* the sum is past the cap: each service after would be too */
			ld->table_memory_bad = true;
			if (stop(ld, r))
				continue;
			r = 0;
		}
		if (r == 0)
			r = service_clash(ld, sm, &x, s);
		if (r == 0 && !(ld->flags & HASHLB_LOAD_ADMIN_GIVEN) && !ld->admin_bad &&
		    hashlb_admin_clash(&c->admin_addr, c->admin_addr_len, s))
			r = fail(ld, map_get(sm, "listen"),
				 "listen address %s clashes with the admin endpoint's %s%s: "
				 "clients would reach the admin endpoint",
				 s->listen, c->admin,
				 map_get(root, "admin") ? "" : " (the default)");
		if (r == 0 && service_index_add(&x, s) < 0)
			r = nomem(ld);
	}
	ld->via = NULL;
	/* the walk reads every service's backends: only when each was read whole (a list of
	 * errors goes on past a service refused part way) */
	if (r == 0 && clean(ld, 0)) {
		char msg[2 * HASHLB_NAME_MAX + 512];
		uint32_t si, bi;

		r = services_loop(c, &x, &si, &bi, msg, sizeof(msg));
		if (r < 0) {
			r = nomem(ld);
		} else if (r > 0) {
			const struct ynode *bl = map_get(services->items[si], "backends");

			/* the backend's text may be an anchor's, of a service outside the
			 * ring ("backends: *list"): the alias that put it here said too */
			via_begin(ld, services->items[si]);
			via_begin(ld, bl);
			via_begin(ld, bl->items[bi]);
			r = fail(ld, map_get(bl->items[bi], "address"), "%s", msg);
			ld->via = NULL;
		}
	}
	keymap_free(&x.names);
	keymap_free(&x.listens);
	return r;
}

bool hashlb_admin_clash(const struct sockaddr_storage *admin, socklen_t admin_len,
			const struct hashlb_service_cfg *s)
{
	return admin_len && admin->ss_family != AF_UNIX &&
	       hashlb_listen_clash(admin, &s->listen_addr);
}

static int sys_fail(struct hashlb_error *err, const char *path, int e, const char *what)
{
	int r = hashlb_err(err, -e, HASHLB_ERR_SYSTEM, "%s: %s", what, strerror(e));

	if (err)
		err->file = path;
	return r;
}

int hashlb_config_parse(const char *text, size_t len, const char *name,
			struct hashlb_config **ret_config, struct hashlb_error *err)
{
	return hashlb_config_parse_flags(text, len, name, 0, ret_config, err);
}

bool hashlb_config_names_hosts(const struct hashlb_config *c)
{
	for (uint32_t i = 0; i < c->n_services; i++) {
		for (uint32_t j = 0; j < c->services[i].n_backends; j++) {
			if (hashlb_addr_is_name(c->services[i].backends[j].address))
				return true;
		}
	}
	return false;
}

/* A backend's resolved address as bytes that compare equal for one address: family, port,
 * address and scope (addr_canon(): IPv4-mapped as IPv4), then whether it is a backup, then
 * its index in the service. */
struct addr_ref {
	uint8_t key[1 + 2 + 16 + 4 + 1];
	uint32_t idx;
};

static int addr_ref_cmp(const void *a, const void *b)
{
	const struct addr_ref *x = a, *y = b;
	int c = memcmp(x->key, y->key, sizeof(x->key));

	if (c)
		return c;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static void addr_ref_set(struct addr_ref *r, const struct hashlb_backend_cfg *b, uint32_t idx)
{
	struct sockaddr_storage a = addr_canon(&b->addr);

	memset(r, 0, sizeof(*r));
	r->idx = idx;
	r->key[0] = a.ss_family == AF_INET ? 4 : 6;
	if (a.ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&a;

		memcpy(r->key + 1, &s4->sin_port, 2);
		memcpy(r->key + 3, &s4->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&a;

		memcpy(r->key + 1, &s6->sin6_port, 2);
		memcpy(r->key + 3, &s6->sin6_addr, 16);
		memcpy(r->key + 19, &s6->sin6_scope_id, 4);
	}
	r->key[23] = b->backup;
}

/* Warning <w> of <c>: <msg> (cut to fit, hashlb_err_fit()) at <pos>. */
static void warning_at(const struct hashlb_config *c, struct hashlb_pos pos, const char *msg,
		       struct hashlb_error *w)
{
	memset(w, 0, sizeof(*w));
	w->reason = HASHLB_ERR_CONFIG;
	w->file = c->path;
	w->line = pos.line;
	w->column = pos.column;
	hashlb_err_fit(w->msg, sizeof(w->msg), msg);
}

/* Service <s>'s backends at an address an earlier one has, into <w> from <*n> on (while
 * below <max>), each one counted in <*n>; -ENOMEM. Only those that take shares at once: not
 * one of weight 0 (a backend renamed by adding the new name and weighing the old one 0), not
 * a backup and a backend that is none (one serves while the other cannot). */
static int service_shared_addresses(const struct hashlb_config *c,
				    const struct hashlb_service_cfg *s, struct hashlb_error *w,
				    size_t max, size_t *n)
{
	struct addr_ref *refs = calloc(s->n_backends ? s->n_backends : 1, sizeof(*refs));
	uint32_t *first = malloc((s->n_backends ? s->n_backends : 1) * sizeof(*first));
	uint32_t nr = 0;

	if (!refs || !first) {
		free(refs);
		free(first);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < s->n_backends; i++) {
		first[i] = UINT32_MAX;
		/* a name not resolved: no address yet */
		if (s->backends[i].addr_len && s->backends[i].weight)
			addr_ref_set(&refs[nr++], &s->backends[i], i);
	}
	qsort(refs, nr, sizeof(*refs), addr_ref_cmp);
	for (uint32_t k = 1, group = 0; k < nr; k++) {
		if (memcmp(refs[k].key, refs[group].key, sizeof(refs[k].key)) != 0)
			group = k;
		else
			first[refs[k].idx] = refs[group].idx; /* the group's first in file order */
	}
	for (uint32_t i = 0; i < s->n_backends; i++) {
		const struct hashlb_backend_cfg *b = &s->backends[i], *f;
		char at[INET6_ADDRSTRLEN + 16], msg[1024];

		if (first[i] == UINT32_MAX)
			continue;
		if (*n < max) {
			f = &s->backends[first[i]];
			hashlb_addr_format(&f->addr, at, sizeof(at));
			snprintf(msg, sizeof(msg),
				 "service '%s': backend '%s' has the address of backend '%s' "
				 "(line %d, column %d), %s: that host takes both names' shares; "
				 "to give it more, write it once with a weight",
				 s->name, b->name, f->name, f->address_pos.line,
				 f->address_pos.column, at);
			warning_at(c, b->address_pos, msg, &w[*n]);
		}
		(*n)++;
	}
	free(refs);
	free(first);
	return 0;
}

/*
 * <s> has no backend that can take a client as the config starts it (each of weight 0, or in
 * state drain or maint; a backup of weight above 0 in state ready takes them): warned of at
 * the service, as the (*<n>)th of <w> if <max> has room. Valid (a service being prepared, a
 * maintenance window), but none of its clients reaches a backend until one is set ready.
 */
static void service_none_takes_clients(const struct hashlb_config *c,
				       const struct hashlb_service_cfg *s, struct hashlb_error *w,
				       size_t max, size_t *n)
{
	uint32_t zero = 0, drain = 0, maint = 0;
	char msg[512], what[96] = "";
	size_t o = 0;

	for (uint32_t i = 0; i < s->n_backends; i++) {
		const struct hashlb_backend_cfg *b = &s->backends[i];

		if (b->weight && b->admin == HASHLB_ADMIN_READY)
			return;
		zero += !b->weight;
		drain += b->weight && b->admin == HASHLB_ADMIN_DRAIN;
		maint += b->weight && b->admin == HASHLB_ADMIN_MAINT;
	}
	if (!s->n_backends)
		return;
	if (*n < max) {
		if (zero)
			o += (size_t)snprintf(what + o, sizeof(what) - o, "%u of weight 0", zero);
		if (drain)
			o += (size_t)snprintf(what + o, sizeof(what) - o, "%s%u in drain",
					      o ? ", " : "", drain);
		if (maint)
			snprintf(what + o, sizeof(what) - o, "%s%u in maint", o ? ", " : "", maint);
		snprintf(msg, sizeof(msg),
			 "service '%s': no backend takes clients (%s): its clients reach none "
			 "until one is ready with a weight above 0 (hashlb ctl set NAME ready, "
			 "weight N)",
			 s->name, what);
		warning_at(c, s->pos, msg, w + *n);
	}
	(*n)++;
}

/* Service <s>'s health.passive_hold written where it holds nothing: with checks on (the checks
 * bring a backend back, not a hold's end) or passive off (no connect takes a backend down). A
 * lone backend's is not: a reload or a host name's answer may give the service more. Into
 * <w>[*n] (while below <max>), counted in <*n>. */
static void service_passive_hold_unread(const struct hashlb_config *c,
					const struct hashlb_service_cfg *s, struct hashlb_error *w,
					size_t max, size_t *n)
{
	enum hashlb_passive_only why = hashlb_service_passive_only(s);
	char msg[320];

	if (!s->health.passive_hold_pos.line ||
	    (why != HASHLB_PASSIVE_ONLY_CHECKS_ON && why != HASHLB_PASSIVE_ONLY_PASSIVE_OFF))
		return;
	if (*n < max) {
		snprintf(
			msg, sizeof(msg),
			"service '%s': health.passive_hold holds a backend only with %s: the "
			"setting does nothing here",
			s->name,
			why == HASHLB_PASSIVE_ONLY_CHECKS_ON
				? "checks off (health.enabled: false); with checks on, failed "
				  "connects count toward fall and the checks bring it back"
				: "passive on; with health.passive: false, no failed connect takes "
				  "a backend down");
		warning_at(c, s->health.passive_hold_pos, msg, w + *n);
	}
	(*n)++;
}

/* Service <s>'s health.port, send or expect written with checks off (health.enabled: false):
 * only a check connects to that port or exchanges those bytes, so each is read by nothing (a
 * passive-only service's backends are tried again by clients). One warning a key, at the key,
 * into <w>[*n] (while below <max>), counted in <*n>. */
static void service_check_keys_unread(const struct hashlb_config *c,
				      const struct hashlb_service_cfg *s, struct hashlb_error *w,
				      size_t max, size_t *n)
{
	const struct {
		const char *key;
		struct hashlb_pos pos;
	} keys[] = {
		{ "port", s->health.port_pos },
		{ "send", s->health.send_pos },
		{ "expect", s->health.expect_pos },
	};
	char msg[320];

	if (s->health.enabled)
		return;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (!keys[i].pos.line)
			continue;
		if (*n < max) {
			snprintf(msg, sizeof(msg),
				 "service '%s': health.%s is used only by the health checks, which "
				 "are off (health.enabled: false): the setting does nothing here",
				 s->name, keys[i].key);
			warning_at(c, keys[i].pos, msg, w + *n);
		}
		(*n)++;
	}
}

/* Service <s>'s health.close_on_down: true with checks and passive off: no check and no failed
 * connect takes a backend down, so it never closes anything. Into <w>[*n] (while below <max>),
 * counted in <*n>. */
static void service_close_on_down_unread(const struct hashlb_config *c,
					 const struct hashlb_service_cfg *s, struct hashlb_error *w,
					 size_t max, size_t *n)
{
	char msg[320];

	if (!s->health.close_on_down || s->health.enabled || s->health.passive)
		return;
	if (*n < max) {
		snprintf(msg, sizeof(msg),
			 "service '%s': health.close_on_down acts when a backend goes down, which "
			 "none does with checks off (health.enabled: false) and passive off "
			 "(health.passive: false): the setting does nothing here",
			 s->name);
		warning_at(c, s->health.close_on_down_pos, msg, w + *n);
	}
	(*n)++;
}

static int pos_cmp(struct hashlb_pos x, struct hashlb_pos y)
{
	if (x.line != y.line)
		return x.line < y.line ? -1 : 1;
	return x.column < y.column ? -1 : x.column > y.column;
}

/* By place, then setting (section and key): one warning each (bare_durations_unique()). */
static int bare_duration_setting_cmp(const struct hashlb_bare_duration *x,
				     const struct hashlb_bare_duration *y)
{
	int r = pos_cmp(x->pos, y->pos);

	if (r)
		return r;
	r = strcmp(x->section ? x->section : "", y->section ? y->section : "");
	return r ? r : strcmp(x->key, y->key);
}

/* As bare_duration_setting_cmp(), then by alias: the value read where it is written
 * (no alias) first, then the first alias. */
static int bare_duration_cmp(const void *a, const void *b)
{
	const struct hashlb_bare_duration *x = a, *y = b;
	int r = bare_duration_setting_cmp(x, y);

	return r ? r : pos_cmp(x->via, y->via);
}

/* <c>'s bare_durations in file order, each setting of a place once (sorted, not searched
 * as each is noted: a file of 100,000 services, a few durations each, made that
 * quadratic). An anchor's value read through many aliases for one setting is one
 * warning; read for two settings (health's interval and keepalive's), one for each:
 * one was kept, naming either. */
static void bare_durations_unique(struct hashlb_config *c)
{
	uint32_t n = 1;

	qsort(c->bare_durations, c->n_bare_durations, sizeof(*c->bare_durations),
	      bare_duration_cmp);
	for (uint32_t i = 1; i < c->n_bare_durations; i++) {
		if (bare_duration_setting_cmp(&c->bare_durations[i], &c->bare_durations[n - 1]))
			c->bare_durations[n++] = c->bare_durations[i];
	}
	c->n_bare_durations = n;
}

/*
 * Duration <d> of <c>, written without a unit, as warning <w>. <shared>: another
 * setting reads the same place (an anchor's value): the key is named with its section
 * ("keepalive.idle"), and the alias through which it is read, if any.
 */
static void bare_duration_warning(const struct hashlb_config *c,
				  const struct hashlb_bare_duration *d, bool shared,
				  struct hashlb_error *w)
{
	struct unit_text read = duration_text(d->ms);
	char msg[320], sec[64] = "", key[64], where[96] = "";

	memset(w, 0, sizeof(*w));
	w->reason = HASHLB_ERR_CONFIG;
	w->file = c->path;
	w->line = d->pos.line;
	w->column = d->pos.column;
	if (d->seconds_fit)
		snprintf(sec, sizeof(sec), ", or %" PRIu32 "s", d->ms);
	snprintf(key, sizeof(key), "%s%s%s", shared && d->section ? d->section : "",
		 shared && d->section ? "." : "", d->key);
	if (shared && d->via.line)
		snprintf(where, sizeof(where),
			 " (an anchor's value, read through the alias at line %d, column %d)",
			 d->via.line, d->via.column);
	else if (shared)
		snprintf(where, sizeof(where), " (an anchor's value, read for another key too)");
	/* "5 read as 5ms: write 5ms to keep it, or 5s"; "300000 read as 5m: write 5m ..." */
	snprintf(msg, sizeof(msg),
		 "'%s'%s has no unit: a number alone counts milliseconds, %" PRIu32
		 " read as %s: write %s to keep it%s",
		 key, where, d->ms, read.s, read.s, sec);
	hashlb_err_fit(w->msg, sizeof(w->msg), msg);
}

/*
 * Service <s>'s backends at the admin endpoint (addr_loops(): its address, or a loopback one on
 * the port of an endpoint on a wildcard), when <s> listens beyond loopback: its clients, from
 * wherever they reach it, then reach the endpoint, which takes no authentication, and can
 * drain, close, reload and upgrade (a service on the endpoint's own address is refused; an
 * endpoint beyond loopback is warned of at start). Into <w>[*n] (while below <max>), each
 * counted in <*n>.
 */
static void service_reaches_admin(const struct hashlb_config *c, const struct hashlb_service_cfg *s,
				  struct hashlb_error *w, size_t max, size_t *n)
{
	struct sockaddr_storage l = addr_canon(&s->listen_addr);
	char msg[1024];

	if (!c->admin_addr_len || c->admin_addr.ss_family == AF_UNIX || hashlb_addr_is_loopback(&l))
		return;
	for (uint32_t i = 0; i < s->n_backends; i++) {
		const struct hashlb_backend_cfg *b = &s->backends[i];

		if (!b->addr_len || !addr_loops(&c->admin_addr, &b->addr))
			continue;
		if (*n < max) {
			snprintf(
				msg, sizeof(msg),
				"service '%s': backend '%s' at %s is the admin endpoint (admin %s), "
				"which takes no authentication: the service's clients (listen %s) "
				"reach it, and can drain backends, reload and upgrade",
				s->name, b->name, b->address, c->admin, s->listen);
			warning_at(c, b->address_pos, msg, &w[*n]);
		}
		(*n)++;
	}
}

int hashlb_config_warnings(const struct hashlb_config *c, struct hashlb_error *ret_warnings,
			   size_t max)
{
	const struct hashlb_bare_duration *d = c->bare_durations;
	size_t n = 0;

	if (c->admin_empty && n++ < max)
		warning_at(c, c->admin_pos,
			   "'admin' has no value, which turns the admin endpoint off (no hashlb "
			   "ctl, no /metrics): write off to mean that, or an address",
			   &ret_warnings[0]);
	for (uint32_t i = 0; i < c->n_bare_durations; i++, n++) {
		bool shared = (i > 0 && !pos_cmp(d[i].pos, d[i - 1].pos)) ||
			      (i + 1 < c->n_bare_durations && !pos_cmp(d[i].pos, d[i + 1].pos));

		if (n < max)
			bare_duration_warning(c, &d[i], shared, &ret_warnings[n]);
	}
	for (uint32_t i = 0; i < c->n_services; i++) {
		int r;

		service_none_takes_clients(c, &c->services[i], ret_warnings, max, &n);
		service_passive_hold_unread(c, &c->services[i], ret_warnings, max, &n);
		service_check_keys_unread(c, &c->services[i], ret_warnings, max, &n);
		service_close_on_down_unread(c, &c->services[i], ret_warnings, max, &n);
		service_reaches_admin(c, &c->services[i], ret_warnings, max, &n);
		r = service_shared_addresses(c, &c->services[i], ret_warnings, max, &n);
		if (r < 0)
			return r;
	}
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* Whether <root> has a key resolve_every (unchecked: check_map() comes later). */
static bool writes_resolve_every(const struct ynode *root)
{
	for (size_t i = 0; root && root->type == YNODE_MAP && i < ynode_pairs(root); i++) {
		const struct ynode *k = ynode_key(root, i);

		if (k->type == YNODE_SCALAR && strcmp(k->text, "resolve_every") == 0)
			return true;
	}
	return false;
}

/*
 * hashlb_config_parse_flags() of <text>, which is <owned> if that is not
 * NULL: a buffer of <len> + 1 bytes, NUL-terminated, freed here (kept as
 * the config's text if it needs one), as soon as the tree is built unless
 * resolve_every is written. A copy of the text kept in every config (and
 * made while the tree was alive, the file beside it) took as much memory
 * again as the file, 16 MiB at most, for resolve_every alone.
 */
static int config_parse(const char *text, char *owned, size_t len, const char *name,
			unsigned int flags, struct hashlb_config **ret_config,
			struct hashlb_error *err, struct hashlb_error_list *list)
{
	/* ctl's admin key alone, before a YAML error perhaps: no list (its first error tells) */
	struct loader ld = { .name = name ? name : "<config>",
			     .err = err,
			     .flags = flags,
			     .list = flags & HASHLB_LOAD_ADMIN_ONLY ? NULL : list };
	struct hashlb_config *c;
	struct ydoc *doc = NULL;
	int r;

	/* as from a file (hashlb_config_load()): the tree's lengths are 32-bit */
	if (len > CONFIG_FILE_MAX) {
		free(owned);
		return sys_fail(err, ld.name, EFBIG, "the configuration is larger than 16 MiB");
	}
	if (flags & HASHLB_LOAD_ADMIN_ONLY)
		r = ydoc_parse_prefix(text, len, ld.name, &doc, err);
	else
		r = ydoc_parse(text, len, ld.name, &doc, err);
	ld.prefix = r == 1;
	if (r < 0 || (ld.prefix && (!doc->root || doc->root->type != YNODE_MAP))) {
		free(owned);
		ydoc_free(r < 0 ? NULL : doc);
		return r < 0 ? r : -ENOENT; /* no admin key before the YAML error, in <err> */
	}
	/* the tree holds every value: the text is for resolve_every alone */
	if (owned && !writes_resolve_every(doc->root)) {
		free(owned);
		owned = NULL;
		text = NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		free(owned);
		ydoc_free(doc);
		return nomem(&ld);
	}
	c->path = strdup(ld.name);
	ld.cfg = c;
	r = c->path ? load_root(&ld, doc->root, c) : nomem(&ld);
	ydoc_free(doc);
	if (ld.n_errs && r != -ENOMEM) /* those past the first went on (stop()) */
		r = ld.first_ret;
	if (ld.list && ld.list->n > 1)
		qsort(ld.list->v, ld.list->n, sizeof(*ld.list->v), error_pos_cmp);
	if (r == 0 && c->n_bare_durations > 1)
		bare_durations_unique(c);
	if (r == 0 && text && c->resolve_every_ms && hashlb_config_names_hosts(c)) {
		c->text = owned ? owned : malloc(len + 1);
		owned = NULL;
		if (c->text) {
			if (c->text != text)
				memcpy(c->text, text, len);
			c->text[len] = '\0';
			c->text_len = len;
		} else {
			r = nomem(&ld);
		}
	}
	free(owned);
	if (r < 0) {
		hashlb_config_free(c);
		return r;
	}
	*ret_config = c;
	return 0;
}

int hashlb_config_parse_flags(const char *text, size_t len, const char *name, unsigned int flags,
			      struct hashlb_config **ret_config, struct hashlb_error *err)
{
	return config_parse(text, NULL, len, name, flags, ret_config, err, NULL);
}

int hashlb_config_parse_list(const char *text, size_t len, const char *name, unsigned int flags,
			     struct hashlb_config **ret_config, struct hashlb_error *err,
			     struct hashlb_error_list *list)
{
	hashlb_error_list_free(list);
	return config_parse(text, NULL, len, name, flags, ret_config, err, list);
}

void hashlb_error_list_free(struct hashlb_error_list *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

int hashlb_config_load(const char *path, struct hashlb_config **ret_config,
		       struct hashlb_error *err)
{
	return hashlb_config_load_flags(path, 0, ret_config, err);
}

/*
 * All of <fd> to its end, at most CONFIG_FILE_MAX bytes (-EFBIG past them),
 * into a buffer of <size_hint> bytes or more, NUL-terminated; the caller
 * frees *<ret_buf>. To the end, not to the size fstat() gave: procfs and
 * some FUSE files say 0 and have text, and a file written as it is read
 * would be cut at the size it had.
 */
static int read_all(int fd, size_t size_hint, char **ret_buf, size_t *ret_len)
{
	size_t got = 0, cap = size_hint < 4096 ? 4096 : size_hint + 2; /* + EOF's 1 */
	char *buf = malloc(cap), *nbuf;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n;

		if (got + 1 == cap) {
			if (got > CONFIG_FILE_MAX)
				break;
			cap = cap * 2 > CONFIG_FILE_MAX + 2 ? CONFIG_FILE_MAX + 2 : cap * 2;
			nbuf = realloc(buf, cap);
			if (!nbuf) {
				free(buf);
				return -ENOMEM;
			}
			buf = nbuf;
		}
		n = read(fd, buf + got, cap - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			free(buf);
			return -e;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got > CONFIG_FILE_MAX) {
		free(buf);
		return -EFBIG;
	}
	buf[got] = '\0';
	*ret_buf = buf;
	*ret_len = got;
	return 0;
}

static int load_after(const char *path, unsigned int flags, const struct hashlb_config *last,
		      struct hashlb_config **ret_config, struct hashlb_error *err,
		      struct hashlb_error_list *list);

int hashlb_config_load_flags(const char *path, unsigned int flags,
			     struct hashlb_config **ret_config, struct hashlb_error *err)
{
	return load_after(path, flags, NULL, ret_config, err, NULL);
}

int hashlb_config_load_list(const char *path, unsigned int flags, struct hashlb_config **ret_config,
			    struct hashlb_error *err, struct hashlb_error_list *list)
{
	hashlb_error_list_free(list);
	return load_after(path, flags, NULL, ret_config, err, list);
}

int hashlb_config_load_after(const char *path, unsigned int flags, const struct hashlb_config *last,
			     struct hashlb_config **ret_config, struct hashlb_error *err)
{
	return load_after(path, flags, last, ret_config, err, NULL);
}

int hashlb_config_load_after_list(const char *path, unsigned int flags,
				  const struct hashlb_config *last,
				  struct hashlb_config **ret_config, struct hashlb_error *err,
				  struct hashlb_error_list *list)
{
	hashlb_error_list_free(list);
	return load_after(path, flags, last, ret_config, err, list);
}

static int load_after(const char *path, unsigned int flags, const struct hashlb_config *last,
		      struct hashlb_config **ret_config, struct hashlb_error *err,
		      struct hashlb_error_list *list)
{
	struct hashlb_config *c;
	struct stat st;
	size_t got = 0;
	char *buf = NULL;
	int fd, r;

	/* O_NONBLOCK: a FIFO (or a device) would block the open until a writer
	 * came, and with it a reload's control thread; it is refused below */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return sys_fail(err, path, errno, "cannot open the configuration");
	if (fstat(fd, &st) < 0) {
		r = sys_fail(err, path, errno, "cannot stat the configuration");
		goto err_close;
	}
	if (!S_ISREG(st.st_mode)) {
		/* not sys_fail: "not a regular file: Invalid argument" told nothing of use */
		r = hashlb_err(err, -EINVAL, HASHLB_ERR_SYSTEM,
			       S_ISDIR(st.st_mode)
				       ? "the configuration is a directory: give the file in it"
				       : "the configuration is not a regular file (a pipe, device "
					 "or socket)");
		if (err)
			err->file = path;
		goto err_close;
	}
	r = (uint64_t)st.st_size > CONFIG_FILE_MAX ? -EFBIG
						   : read_all(fd, (size_t)st.st_size, &buf, &got);
	if (r == -EFBIG) {
		r = sys_fail(err, path, EFBIG, "the configuration is larger than 16 MiB");
		goto err_close;
	}
	if (r == -ENOMEM) {
		r = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		goto err_close;
	}
	if (r < 0) {
		r = sys_fail(err, path, -r, "cannot read the configuration");
		goto err_close;
	}
	close(fd);
	r = config_parse(buf, buf, got, path, flags, &c, err, list);
	if (r < 0)
		return r;
	if (!(flags & HASHLB_LOAD_NO_RESOLVE)) {
		r = hashlb_config_resolve_after(c, HASHLB_RESOLVE_TIMEOUT_MS, last, err);
		if (r < 0) {
			if (err && err->file)
				err->file = path; /* not c's copy, freed here */
			hashlb_config_free(c);
			return r;
		}
	}
	*ret_config = c;
	return 0;
err_close:
	close(fd);
	return r;
}

void hashlb_config_free(struct hashlb_config *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->n_services; i++) {
		struct hashlb_service_cfg *s = &c->services[i];

		for (uint32_t j = 0; j < s->n_backends; j++) {
			free(s->backends[j].name);
			free(s->backends[j].address);
			free(s->backends[j].from_name);
			free(s->backends[j].answer);
		}
		free(s->backends);
		free(s->name);
		free(s->listen);
		free(s->steer_interface);
		free(s->proxy_from);
		free(s->allow_clients);
		free(s->deny_clients);
		free(s->health.send);
		free(s->health.expect);
	}
	free(c->services);
	free(c->bare_durations);
	free(c->admin);
	free(c->path);
	free(c->text);
	free(c);
}

const struct hashlb_service_cfg *hashlb_config_service(const struct hashlb_config *c,
						       const char *name)
{
	for (uint32_t i = 0; i < c->n_services; i++) {
		if (strcmp(c->services[i].name, name) == 0)
			return &c->services[i];
	}
	return NULL;
}

enum hashlb_passive_only hashlb_service_passive_only(const struct hashlb_service_cfg *s)
{
	if (s->health.enabled)
		return HASHLB_PASSIVE_ONLY_CHECKS_ON;
	if (!s->health.passive)
		return HASHLB_PASSIVE_ONLY_PASSIVE_OFF;
	if (s->n_backends < 2)
		return HASHLB_PASSIVE_ONLY_LONE_BACKEND;
	return HASHLB_PASSIVE_ONLY_APPLIES;
}

void hashlb_backup_rule(bool *down, const bool *backup, const uint32_t *weight, uint32_t n)
{
	bool primary_up = false;

	for (uint32_t i = 0; i < n; i++)
		primary_up |= !backup[i] && !down[i] && weight[i] > 0;
	for (uint32_t i = 0; i < n && primary_up; i++)
		down[i] |= backup[i];
}

const char *hashlb_service_dest_unknown(const struct hashlb_service_cfg *s, bool bound_known)
{
	if (s->key != HASHLB_KEY_4TUPLE)
		return NULL;
	if (s->accept_proxy)
		return "takes each client's destination from its PROXY header";
	if (hashlb_addr_is_any(&s->listen_addr))
		return "listens on a wildcard address";
	if (!bound_known && hashlb_addr_port(&s->listen_addr) == 0)
		return "listens on port 0 (any free port)";
	return NULL;
}

/*
 * The specs of <s>'s backends as the running hashlb gives them to the table
 * (see hashlb_service_cfg_build_table()); then <ret_table> built from them,
 * or only checked (NULL).
 */
static int service_table(const struct hashlb_service_cfg *s, const bool *also_down,
			 const uint32_t *weights, struct hashlb_table **ret_table,
			 struct hashlb_error *err)
{
	uint32_t n = s->n_backends ? s->n_backends : 1;
	struct hashlb_backend_spec *specs = calloc(n, sizeof(*specs));
	uint32_t *weight = calloc(n, sizeof(*weight));
	bool *down = calloc(n, sizeof(*down)), *backup = calloc(n, sizeof(*backup));
	int r = -ENOMEM;

	if (!specs || !weight || !down || !backup) {
		r = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < s->n_backends; i++) {
		weight[i] = weights ? weights[i] : s->backends[i].weight;
		down[i] = s->backends[i].admin != HASHLB_ADMIN_READY || (also_down && also_down[i]);
		backup[i] = s->backends[i].backup;
	}
	hashlb_backup_rule(down, backup, weight, s->n_backends);
	for (uint32_t i = 0; i < s->n_backends; i++) {
		specs[i].name = s->backends[i].name;
		specs[i].weight = weight[i];
		specs[i].down = down[i];
	}
	r = ret_table ? hashlb_table_build(&s->table, specs, s->n_backends, ret_table, err)
		      : hashlb_table_check(&s->table, specs, s->n_backends, err);
out:
	free(specs);
	free(weight);
	free(down);
	free(backup);
	return r;
}

int hashlb_service_cfg_build_table(const struct hashlb_service_cfg *s, const bool *also_down,
				   struct hashlb_table **ret_table, struct hashlb_error *err)
{
	return service_table(s, also_down, NULL, ret_table, err);
}

int hashlb_service_cfg_check_table(const struct hashlb_service_cfg *s, struct hashlb_error *err)
{
	return service_table(s, NULL, NULL, NULL, err);
}

int hashlb_service_cfg_check_weights(const struct hashlb_service_cfg *s, const uint32_t *weights,
				     struct hashlb_error *err)
{
	return service_table(s, NULL, weights, NULL, err);
}

uint64_t hashlb_service_cfg_weights_bytes_max_fn(const struct hashlb_service_cfg *s,
						 hashlb_backend_weight_fn weight, void *arg)
{
	struct hashlb_backend_spec *specs =
		calloc(s->n_backends ? s->n_backends : 1, sizeof(*specs));
	uint64_t bytes;

	if (!specs)
		return UINT64_MAX;
	for (uint32_t i = 0; i < s->n_backends; i++) {
		specs[i].name = s->backends[i].name;
		specs[i].weight = weight ? weight(arg, s, i) : s->backends[i].weight;
	}
	bytes = hashlb_table_bytes_max(&s->table, specs, s->n_backends);
	free(specs);
	return bytes;
}

static uint32_t weight_of_array(void *arg, const struct hashlb_service_cfg *s, uint32_t i)
{
	(void)s;
	return ((const uint32_t *)arg)[i];
}

uint64_t hashlb_service_cfg_weights_bytes_max(const struct hashlb_service_cfg *s,
					      const uint32_t *weights)
{
	return hashlb_service_cfg_weights_bytes_max_fn(s, weights ? weight_of_array : NULL,
						       (void *)weights);
}

uint64_t hashlb_service_cfg_table_bytes_max(const struct hashlb_service_cfg *s)
{
	return hashlb_service_cfg_weights_bytes_max(s, NULL);
}

/* What a refusal of hashlb_table_memory_add() says of whose weights count (<with> NULL: the
 * config's, "its table (N bytes at most)"), and where: at table_memory (where written) for
 * weights set at run time, at the service for the config's own. */
static const struct {
	const char *after_name, *with, *advice;
	bool at_cap;
} table_memory_by[HASHLB_TABLE_MEMORY_BY_MAX] = {
	[HASHLB_TABLE_MEMORY_CONFIG] = { "", NULL, "", false },
	[HASHLB_TABLE_MEMORY_RESOLVED] = { ", its names resolved", NULL, "", false },
	[HASHLB_TABLE_MEMORY_RUN_TIME] = { "",
					   "the weights set at run time (hashlb ctl set) kept "
					   "over the config,",
					   ", or set those weights lower first", true },
	[HASHLB_TABLE_MEMORY_TAKEN_OVER] = { "",
					     "the weights set at run time in the hashlb it takes "
					     "over from,",
					     ", or set those weights lower there first", true },
};

int hashlb_table_memory_add(const struct hashlb_config *c, const struct hashlb_service_cfg *s,
			    uint64_t own, enum hashlb_table_memory_by by, uint64_t *sum,
			    struct hashlb_error *err)
{
	char cap[HASHLB_TABLE_MEMORY_STRLEN], with[64];
	struct hashlb_pos at = s->pos;

	*sum = own > UINT64_MAX - *sum ? UINT64_MAX : *sum + own;
	if (!c->table_memory || *sum <= c->table_memory)
		return 0;
	if (own == UINT64_MAX) /* not counted: short of memory */
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	if (!err)
		return -E2BIG;
	hashlb_table_memory_format(c, cap, sizeof(cap));
	snprintf(with, sizeof(with), "its table (%" PRIu64 " bytes at most)", own);
	hashlb_err(err, -E2BIG, HASHLB_ERR_MEMORY_CAP,
		   "service '%s'%s: with %s the services' tables up to it may take %" PRIu64
		   " bytes, over table_memory %s: raise it (0 = no cap)%s",
		   s->name, table_memory_by[by].after_name,
		   table_memory_by[by].with ? table_memory_by[by].with : with, *sum, cap,
		   table_memory_by[by].advice);
	if (table_memory_by[by].at_cap && c->table_memory_pos.line)
		at = c->table_memory_pos;
	err->line = at.line;
	err->column = at.column;
	return -E2BIG;
}
