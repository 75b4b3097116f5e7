// SPDX-License-Identifier: MIT
/* hashlb table: build a table from the command line and summarise or dump it. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hashlb/config.h"
#include "table_args.h"

static void usage(FILE *f)
{
	fprintf(f, "NAME\n"
		   "  hashlb table - build a consistent-hash table and show it\n"
		   "\n"
		   "SYNOPSIS\n"
		   "  hashlb table [OPTIONS] BACKEND[=WEIGHT]...\n"
		   "\n"
		   "DESCRIPTION\n"
		   "  Builds the lookup table that hashlb would use for these backends\n"
		   "  (identified by name; weight 1 unless given) and prints its summary:\n"
		   "  scheme and parameters, each backend's weight, state (up, down, or\n"
		   "  weight 0: taking no client) and share of the hash space, the\n"
		   "  table's fingerprint, build time and memory. Equal\n"
		   "  fingerprints mean equal routing, on any machine.\n"
		   "  It reads no config: a config's tables are printed by\n"
		   "  'hashlb check -c FILE', a running hashlb's by 'hashlb ctl table'.\n"
		   "\n"
		   "OPTIONS\n" TABLE_ARGS_USAGE
		   "      --dump                 print the whole table instead: one line per\n"
		   "                             Maglev slot (\"SLOT NAME\") or ring point\n"
		   "                             (\"POSITION NAME\", position in hex)\n"
		   "  -j, --json                 print the summary as JSON\n"
		   "  -c, --config FILE          refused, saying where a config's tables are\n"
		   "                             (hashlb check -c FILE)\n"
		   "  -h, --help                 show this text\n"
		   "\n"
		   "EXIT STATUS\n"
		   "  0 on success, 1 if the table cannot be built (the reason is printed:\n"
		   "  a table size not prime, two backends of one name, --max-bytes too\n"
		   "  small),\n");
	fputs(CLI_EXIT_USAGE_HELP, f);
	fprintf(f,
		"  Among them: a WEIGHT that is no number 0..10000, --vnodes under\n"
		"  maglev, --json with --dump, a --down name that is no BACKEND.\n"
		"\n" CLI_ERRORS_HELP "EXAMPLES\n"
		"  hashlb table a b c=2\n"
		"  hashlb table --scheme ring --vnodes 100 --down b a b c\n"
		"  hashlb table --table-size 251 --dump a b c\n",
		"table", "-S or --seed", "", "table");
}

/* Every backend's share, in one pass over the table (NULL when out of memory). */
static double *shares_of(const struct hashlb_table *t)
{
	double *v = calloc(hashlb_table_backend_count(t) + 1, sizeof(*v));

	if (v)
		hashlb_table_shares(t, v);
	return v;
}

/* The backends of <t> taking clients, as /status's and /table's count of backends up. */
static uint32_t in_table_count(const struct hashlb_table *t)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < hashlb_table_backend_count(t); i++)
		n += hashlb_table_backend_takes_clients(t, i);
	return n;
}

static void print_summary(const struct hashlb_table *t, double ms)
{
	const struct hashlb_table_params *p = hashlb_table_params(t);
	uint32_t n = hashlb_table_backend_count(t);
	double *shares;
	char params[HASHLB_TABLE_PARAMS_STRLEN];
	int w = 4;

	hashlb_table_params_format(p, params, sizeof(params));
	printf("scheme       %s\n", params);
	printf("backends     %u (%u up)\n", n, in_table_count(t));
	printf("fingerprint  %016" PRIx64 "\n", hashlb_table_fingerprint(t));
	printf("build        %.3f ms\n", ms);
	printf("memory       %.1f KiB\n", (double)hashlb_table_bytes(t) / 1024.0);
	printf("\n");
	for (uint32_t i = 0; i < n; i++) {
		const char *name = hashlb_table_backend_name(t, i);
		int l = (int)strlen(name) - hashlb_text_extra_bytes(name);

		if (l > w)
			w = l;
	}
	printf("%-*s  %6s  %-8s  %8s\n", w, "NAME", "WEIGHT", "STATE", "SHARE");
	shares = shares_of(t);
	for (uint32_t i = 0; i < n; i++) {
		/* "up" as the summary counts it: taking clients; one of weight 0 is not down and
		 * takes none (it read "up", not counted among the "(N up)" above it) */
		const char *state = hashlb_table_backend_down(t, i)	       ? "down"
				    : hashlb_table_backend_takes_clients(t, i) ? "up"
									       : "weight 0";

		printf("%-*s  %6u  %-8s  %7.3f%%\n",
		       w + hashlb_text_extra_bytes(hashlb_table_backend_name(t, i)),
		       hashlb_table_backend_name(t, i), hashlb_table_backend_weight(t, i), state,
		       100.0 * (shares ? shares[i] : hashlb_table_share(t, i)));
	}
	free(shares);
}

static void print_json(const struct hashlb_table *t, double ms)
{
	const struct hashlb_table_params *p = hashlb_table_params(t);
	uint32_t n = hashlb_table_backend_count(t);
	double *shares = shares_of(t);

	printf("{\"scheme\":\"%s\",", hashlb_scheme_name(p->scheme));
	if (p->scheme == HASHLB_SCHEME_MAGLEV)
		printf("\"table_size\":%u,", p->maglev_m);
	else
		printf("\"vnodes\":%u,", p->ring_v);
	printf("\"seed\":%" PRIu64 ",\"fingerprint\":\"%016" PRIx64
	       "\",\"build_ms\":%.3f,\"bytes\":%zu,\"up\":%u,\"backends\":[",
	       p->seed, hashlb_table_fingerprint(t), ms, hashlb_table_bytes(t), in_table_count(t));
	for (uint32_t i = 0; i < n; i++) {
		printf("%s{\"name\":", i ? "," : "");
		cli_print_json_string(hashlb_table_backend_name(t, i));
		printf(",\"weight\":%u,\"in_table\":%s,\"share\":%.6f}",
		       hashlb_table_backend_weight(t, i),
		       hashlb_table_backend_takes_clients(t, i) ? "true" : "false",
		       shares ? shares[i] : hashlb_table_share(t, i));
	}
	printf("]}\n");
	free(shares);
}

static void print_dump(const struct hashlb_table *t)
{
	struct hashlb_table_view v;

	hashlb_table_view(t, &v);
	if (v.scheme == HASHLB_SCHEME_MAGLEV) {
		for (uint32_t j = 0; j < v.m; j++)
			printf("%u %s\n", j,
			       v.slots[j] == HASHLB_BACKEND_NONE
				       ? "-"
				       : hashlb_table_backend_name(t, v.slots[j]));
	} else {
		for (uint32_t j = 0; j < v.n_points; j++)
			printf("%016" PRIx64 " %s\n", v.pos[j],
			       hashlb_table_backend_name(t, v.owner[j]));
	}
}

int cmd_table(int argc, char **argv)
{
	static const struct option longopts[] = {
		TABLE_ARGS_LONGOPTS,
		{ "dump", no_argument, NULL, 0x200 },
		{ "json", no_argument, NULL, 'j' },
		/* taken only to say where a config's tables are: hashlb lookup takes -c */
		{ "config", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	static const int repeatable[] = { TABLE_ARGS_REPEATABLE, 0 };
	struct hashlb_table *t = NULL;
	struct table_args a;
	bool dump = false, json = false;
	double ms = 0;
	char name[CLI_OPT_NAME_MAX], json_opt[CLI_OPT_NAME_MAX] = "";
	int opt, r;

	table_args_init(&a);
	while ((opt = cli_getopt(argc, argv, ":" TABLE_ARGS_SHORTOPTS "jhc:", longopts, repeatable,
				 name)) != -1) {
		r = table_args_option(&a, opt, name, optarg);
		if (r < 0)
			return 2;
		if (r > 0)
			continue;
		switch (opt) {
		case 0x200:
			dump = true;
			break;
		case 'j':
			json = true;
			snprintf(json_opt, sizeof(json_opt), "%s", name);
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'c':
			cli_error(
				"%s: hashlb table reads no config (its backends are its arguments): "
				"a config's tables are 'hashlb check -c FILE', a running "
				"hashlb's 'hashlb ctl table'\n",
				name);
			return 2;
		default:
			return 2;
		}
	}
	if (optind >= argc) {
		cli_error("no backends given\n");
		return 2;
	}
	if (dump && json) { /* --dump prints no summary */
		cli_error("%s does not apply with --dump\n", json_opt);
		return 2;
	}
	r = table_args_backends(&a, argv + optind, (size_t)(argc - optind));
	if (r == -EINVAL) {
		table_args_free(&a);
		return 2;
	}
	if (r == 0)
		r = table_args_build(&a, &t, &ms);
	if (r == 0) {
		if (dump)
			print_dump(t);
		else if (json)
			print_json(t, ms);
		else
			print_summary(t, ms);
	}
	hashlb_table_free(t);
	table_args_free(&a);
	return r == 0 ? 0 : 1;
}
