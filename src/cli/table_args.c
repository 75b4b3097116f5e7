// SPDX-License-Identifier: MIT
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "cli.h"
#include "hashlb/config.h"
#include "table_args.h"

void table_args_init(struct table_args *a)
{
	memset(a, 0, sizeof(*a));
	hashlb_table_params_init(&a->params, HASHLB_SCHEME_MAGLEV);
}

/* hashlb ctl's -s is --service; that of a command that takes --service too is the scheme: said
 * where it was typed -s (an operator who gave a service's name) */
#define SCHEME_HINT "-s is --scheme here; the service of the file is --service NAME"

static bool scheme_hint(const struct table_args *a, const char *name)
{
	return a->has_service && !strcmp(name, "-s");
}

int table_args_option(struct table_args *a, int opt, const char *name, const char *arg)
{
	const char *allowed = NULL;
	uint64_t v;

	if (opt == 's' || opt == 'v' || opt == 'm' || opt == 'S' || opt == 0x100)
		snprintf(a->given, sizeof(a->given), "%s", name);
	switch (opt) {
	case 's':
		allowed = scheme_hint(a, name) ? "ring or maglev; " SCHEME_HINT : "ring or maglev";
		if (hashlb_scheme_parse(arg, &a->params.scheme) < 0)
			goto bad;
		return 1;
	case 'v': /* 0 would mean the default to the core: a typo, not a choice */
		allowed = "1..100000";
		if (cli_parse_u64(arg, HASHLB_RING_V_MAX, &v) < 0 || v == 0)
			goto bad;
		a->params.ring_v = (uint32_t)v;
		a->v_given = true;
		snprintf(a->v_opt, sizeof(a->v_opt), "%s", name);
		return 1;
	case 'm':
		allowed = "a prime, 3..16777259"; /* not prime: the build says so, exit 1 */
		if (cli_parse_u64(arg, HASHLB_MAGLEV_M_MAX, &v) < 0 || v < HASHLB_MAGLEV_M_MIN)
			goto bad;
		a->params.maglev_m = (uint32_t)v;
		a->m_given = true;
		snprintf(a->m_opt, sizeof(a->m_opt), "%s", name);
		return 1;
	case 'S':
		allowed = "an integer below 2^64, decimal or 0x hex";
		if (cli_parse_u64(arg, UINT64_MAX, &v) < 0)
			goto bad;
		a->params.seed = v;
		return 1;
	case 'd': /* given again, it adds to the list: "-d a -d b" is "-d a,b" */
		if (table_args_list_add(&a->down, arg) < 0)
			return -ENOMEM;
		snprintf(a->down_opt, sizeof(a->down_opt), "%s", name);
		return 1;
	case 0x100:
		allowed = "a positive byte count";
		if (cli_parse_u64(arg, SIZE_MAX, &v) < 0 || v == 0)
			goto bad;
		a->params.max_bytes = (size_t)v;
		return 1;
	default:
		return 0;
	}
bad:
	cli_bad_value(name, arg, allowed);
	return -EINVAL;
}

int table_args_list_add(char **list, const char *arg)
{
	size_t old = *list ? strlen(*list) : 0, len = strlen(arg);
	char *l;

	if (old && !len) /* an empty one names none, as alone: no empty name after a comma */
		return 0;
	l = realloc(*list, old + len + 2);
	if (!l)
		return -ENOMEM;
	if (old)
		l[old++] = ',';
	memcpy(l + old, arg, len + 1);
	*list = l;
	return 0;
}

/*
 * The backend of <specs> (<n>) that <list> names at <p>, the whole name up
 * to a comma or the list's end: the longest that fits there, so that a name
 * with a comma in it is one name. Its length in <ret_len>; -1 if none, the
 * length then that of the part up to the next comma.
 */
static ssize_t list_match(const char *p, const struct hashlb_backend_spec *specs, size_t n,
			  size_t *ret_len)
{
	ssize_t best = -1;
	size_t best_len = 0;

	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(specs[i].name);

		if (l > best_len && strncmp(p, specs[i].name, l) == 0 &&
		    (p[l] == ',' || p[l] == '\0')) {
			best = (ssize_t)i;
			best_len = l;
		}
	}
	*ret_len = best < 0 ? strcspn(p, ",") : best_len;
	return best;
}

const char *table_args_mark(const char *list, const struct hashlb_backend_spec *specs, size_t n,
			    bool *ret_in, size_t *ret_len)
{
	const char *bad = NULL;
	size_t l;

	for (size_t i = 0; i < n && ret_in; i++)
		ret_in[i] = false;
	/* An empty list names none (a script's empty variable); a comma that ends it is an
	 * empty name after it, refused as one between two is ("a," for "a,b" cut short). */
	for (const char *p = list && *list ? list : NULL; p; p = p[l] == ',' ? p + l + 1 : NULL) {
		ssize_t k = list_match(p, specs, n, &l);

		if (k < 0 && !bad) {
			bad = p;
			*ret_len = l;
		}
		if (k >= 0 && ret_in)
			ret_in[k] = true;
	}
	return bad;
}

int table_args_backends(struct table_args *a, char **args, size_t n)
{
	a->specs = calloc(n ? n : 1, sizeof(*a->specs));
	if (!a->specs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char *name = strdup(args[i]), *eq;
		uint64_t w = 1;

		if (!name)
			return -ENOMEM;
		a->specs[i].name = name;
		a->n_specs = i + 1;
		eq = strchr(name, '=');
		if (eq)
			*eq = '\0';
		if (!*name) { /* malformed, as an empty weight is: not a table that fails */
			cli_error("backend %zu has an empty name: give NAME or NAME=WEIGHT\n",
				  i + 1);
			return -EINVAL;
		}
		/* as the config's: a space or a newline breaks the columns printed */
		if (!hashlb_backend_name_ok(name)) {
			cli_error("backend %zu: a name must be " HASHLB_BACKEND_NAME_RULE "\n",
				  i + 1);
			return -EINVAL;
		}
		if (eq) {
			if (cli_parse_u64(eq + 1, HASHLB_WEIGHT_MAX, &w) < 0) {
				cli_error("backend '%s': invalid weight '%s' (0..%u)\n", name,
					  eq + 1, HASHLB_WEIGHT_MAX);
				return -EINVAL;
			}
		}
		a->specs[i].weight = (uint32_t)w;
	}
	return table_args_check(a) < 0 ? -EINVAL : table_args_mark_down(a->down, a->specs, n);
}

int table_args_check(const struct table_args *a)
{
	/* as the config refuses vnodes under maglev and table_size under ring */
	if (a->params.scheme == HASHLB_SCHEME_MAGLEV ? a->v_given : a->m_given) {
		cli_error("%s applies to scheme %s, but the scheme is %s\n",
			  a->v_given ? a->v_opt : a->m_opt, a->v_given ? "ring" : "maglev",
			  hashlb_scheme_name(a->params.scheme));
		return -EINVAL;
	}
	return table_args_check_list(a->down, a->down_opt, a->specs, a->n_specs, NULL);
}

int table_args_mark_down(const char *list, struct hashlb_backend_spec *specs, size_t n)
{
	bool *in = calloc(n ? n : 1, sizeof(*in));
	size_t l;

	if (!in)
		return -ENOMEM;
	table_args_mark(list, specs, n, in, &l);
	for (size_t i = 0; i < n; i++)
		specs[i].down = in[i];
	free(in);
	return 0;
}

/* The backends named in a refusal of a list, at most this many (then how many in all). */
#define LIST_NAMES_SHOWN 8

int table_args_check_list(const char *list, const char *opt,
			  const struct hashlb_backend_spec *specs, size_t n, const char *svc)
{
	/* Every name in the list must be a backend: a typo must not pass silently. The names
	 * there are said too, and whose: "which is not a backend" alone left the reader to
	 * find which service a config gave and how its backends are spelled. */
	size_t l;
	const char *bad = table_args_mark(list, specs, n, NULL, &l);

	if (!bad)
		return 0;
	if (!l)
		cli_error("%s '%s' has an empty name: give A,B,... (backend names, a comma "
			  "between two)\n",
			  opt, list);
	else if (svc)
		cli_error("%s names '%.*s', which is not a backend of service '%s' (its backends: ",
			  opt, (int)l, bad, svc);
	else
		cli_error("%s names '%.*s', which is not a backend (the backends: ", opt, (int)l,
			  bad);
	for (size_t i = 0; l && i < n && i < LIST_NAMES_SHOWN; i++)
		fprintf(stderr, "%s%s", i ? ", " : "", specs[i].name);
	if (l && n > LIST_NAMES_SHOWN)
		fprintf(stderr, ", ... %zu in all", n);
	if (l)
		fprintf(stderr, ")\n");
	return -EINVAL;
}

/* The first argument that repeats an earlier one's name, both counted from
 * 1 as every message of these commands counts them ("backend 1 has an empty
 * name"); the core's message gives its array indexes, which read one less:
 * hashlb table a b a said "backends 0 and 2". 0 if none (or no memory). */
static int print_duplicate(const struct table_args *a)
{
	const char **names = calloc(a->n_specs ? a->n_specs : 1, sizeof(*names));
	uint32_t dup, first;
	int r;

	if (!names)
		return 0;
	for (size_t i = 0; i < a->n_specs; i++)
		names[i] = a->specs[i].name;
	r = hashlb_names_duplicate(names, (uint32_t)a->n_specs, &dup, &first);
	free(names);
	if (r <= 0)
		return 0;
	cli_error("backends %" PRIu32 " and %" PRIu32 " have the same name '%s'\n", first + 1,
		  dup + 1, a->specs[dup].name);
	return 1;
}

int table_args_build(struct table_args *a, struct hashlb_table **ret_table, double *ret_ms)
{
	struct hashlb_error err;
	struct timespec t0, t1;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = hashlb_table_build(&a->params, a->specs, a->n_specs, ret_table, &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (r < 0) {
		if (err.reason == HASHLB_ERR_MEMORY_CAP) /* the cap is this command's option */
			snprintf(err.msg + strlen(err.msg), sizeof(err.msg) - strlen(err.msg),
				 " (--max-bytes raises it)");
		if (err.reason != HASHLB_ERR_DUPLICATE_NAME || !print_duplicate(a))
			cli_print_error(&err);
		return r;
	}
	if (ret_ms)
		*ret_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
			  (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	return 0;
}

void table_args_free(struct table_args *a)
{
	free(a->down);
	a->down = NULL;
	for (size_t i = 0; i < a->n_specs; i++)
		free((char *)a->specs[i].name);
	free(a->specs);
	a->specs = NULL;
	a->n_specs = 0;
}

int table_args_refuse_with_config(const struct table_args *a, const char *key_opt,
				  const char *prefix_opt, const char *config_opt)
{
	const char *opt = a->given[0] ? a->given : key_opt[0] ? key_opt : prefix_opt;

	if (!opt[0])
		return 0;
	/* a table the config does not give would not be the one hashlb run builds */
	cli_error(
		"%s cannot be combined with %s: the configuration sets the scheme, its parameters, "
		"the seed, the hash key and its prefix%s\n",
		opt, config_opt, scheme_hint(a, opt) ? " (" SCHEME_HINT ")" : "");
	return -EINVAL;
}
