/* SPDX-License-Identifier: MIT */
/* Table options shared by `hashlb table` and `hashlb lookup` (command-line form). */
#ifndef HASHLB_CLI_TABLE_ARGS_H
#define HASHLB_CLI_TABLE_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#include "cli.h"
#include "hashlb/table.h"

struct table_args {
	struct hashlb_table_params params;
	char *down; /* comma-separated backend names (every --down's), or NULL */
	struct hashlb_backend_spec *specs;
	size_t n_specs;
	bool v_given, m_given; /* -v, -m: each applies to one scheme */
	bool has_service; /* the command takes --service (hashlb ctl's -s): -s is said to be the scheme */
	/* options as typed ("--seed" or "-S"), "" if not given: for the messages */
	char given[CLI_OPT_NAME_MAX]; /* the last table option given but --down */
	char v_opt[CLI_OPT_NAME_MAX], m_opt[CLI_OPT_NAME_MAX], down_opt[CLI_OPT_NAME_MAX];
};

#define TABLE_ARGS_USAGE                                                             \
	"  -s, --scheme ring|maglev   hashing scheme (default maglev)\n"             \
	"  -v, --vnodes V             ring points per weight unit, 1..100000\n"      \
	"                             (default 160)\n"                               \
	"  -m, --table-size M         Maglev table size, a prime, 3..16777259\n"     \
	"                             (default 65537)\n"                             \
	"  -S, --seed N               64-bit seed (default 0)\n"                     \
	"  -d, --down A,B,...         backends that are down (their keys move to\n"  \
	"                             survivors); given again, it adds to them\n"    \
	"      --max-bytes N          bytes its build may take, a number (default\n" \
	"                             268435456: 256 MiB)\n"

/* The hash key's options of `hashlb lookup` and `hashlb steer`: every name --key takes
 * (hashlb_key_parse()), its aliases too, as a config's hash_key takes them. */
#define KEY_ARGS_USAGE                                                                       \
	"  -k, --key KEY              hash key: src-ip (default), src-ip-port, 4-tuple;\n"   \
	"                             also written src_ip or source-ip, src_ip_port,\n"      \
	"                             4tuple or four-tuple, in any case\n"                   \
	"      --ipv4-prefix LEN      src-ip: hash an IPv4 client's first LEN bits, 1..32\n" \
	"                             (default 32), as a config's hash_prefix.ipv4\n"        \
	"      --ipv6-prefix LEN      src-ip: hash an IPv6 client's first LEN bits,\n"       \
	"                             1..128 (default 128), as hash_prefix.ipv6\n"

/* getopt_long entries for the options above; their codes are handled by table_args_option(). */
#define TABLE_ARGS_LONGOPTS                                                                     \
	{ "scheme", required_argument, NULL, 's' }, { "vnodes", required_argument, NULL, 'v' }, \
		{ "table-size", required_argument, NULL, 'm' },                                 \
		{ "seed", required_argument, NULL, 'S' },                                       \
		{ "down", required_argument, NULL, 'd' },                                       \
	{                                                                                       \
		"max-bytes", required_argument, NULL, 0x100                                     \
	}
#define TABLE_ARGS_SHORTOPTS "s:v:m:S:d:"
/* The one of them that may be given again (cli_getopt()): --down adds to the list. */
#define TABLE_ARGS_REPEATABLE 'd'

void table_args_init(struct table_args *a);
/*
 * -EINVAL is a usage error (exit status 2) wherever these return it: the
 * message, naming the option or argument, is printed. Other errors are
 * failures (exit status 1).
 */

/*
 * Handle one option, <name> as the user typed it; 1 if it was a table option,
 * 0 if not, -EINVAL (printed) if its value is bad, -ENOMEM.
 */
int table_args_option(struct table_args *a, int opt, const char *name, const char *arg);
/* Backends "NAME[=WEIGHT]" into a->specs, then table_args_check(); -EINVAL (printed) on error. */
int table_args_backends(struct table_args *a, char **args, size_t n);
/* -EINVAL (printed) if an option does not apply to the scheme or --down names no backend of a->specs. */
int table_args_check(const struct table_args *a);
/* Build the table; prints the error and returns it on failure. */
int table_args_build(struct table_args *a, struct hashlb_table **ret_table, double *ret_ms);
void table_args_free(struct table_args *a);
/* Append <arg> to the comma-separated <*list> (NULL: none yet), which is
 * reallocated (free it); -ENOMEM. */
int table_args_list_add(char **list, const char *arg);
/*
 * Mark in <ret_in> (may be NULL) the backends of <specs> (<n>) that the
 * comma-separated <list> (may be NULL) names. A name may hold a comma: at
 * each place the list names the longest name that it holds whole there.
 * Returns the first part of the list that names no backend (its length in
 * <ret_len>), NULL if there is none.
 */
const char *table_args_mark(const char *list, const struct hashlb_backend_spec *specs, size_t n,
			    bool *ret_in, size_t *ret_len);
/* specs[i].down = whether <list> names backend i (as above); -ENOMEM. */
int table_args_mark_down(const char *list, struct hashlb_backend_spec *specs, size_t n);
/*
 * With -c FILE (<config_opt> as typed), the config is the whole truth: -EINVAL (printed, naming
 * the option) if a table option of <a>, or <key_opt> or <prefix_opt> ("" if not given) was given
 * too; 0 if none was. With a->has_service, -s is said to be the scheme (hashlb ctl's service).
 */
int table_args_refuse_with_config(const struct table_args *a, const char *key_opt,
				  const char *prefix_opt, const char *config_opt);
/*
 * -EINVAL (printed: option <opt>, the name that is none, service <svc>'s when not NULL, and
 * the names there are) unless every name of <list> is a backend of <specs>.
 */
int table_args_check_list(const char *list, const char *opt,
			  const struct hashlb_backend_spec *specs, size_t n, const char *svc);

#endif
