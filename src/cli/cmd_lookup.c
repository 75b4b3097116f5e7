// SPDX-License-Identifier: MIT
/* hashlb lookup: which backend a client goes to, and where it goes next. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hashlb/config.h"
#include "hashlb/tuple.h"
#include "table_args.h"

static void usage(FILE *f)
{
	fprintf(f,
		"NAME\n"
		"  hashlb lookup - the backend and preference list for a client\n"
		"\n"
		"SYNOPSIS\n"
		"  hashlb lookup [OPTIONS] CLIENT BACKEND[=WEIGHT]...\n"
		"  hashlb lookup -c FILE [--service NAME] [OPTIONS] CLIENT...\n"
		"\n"
		"DESCRIPTION\n"
		"  Builds the table for the backends given (see hashlb table) and prints\n"
		"  the backend that a client at CLIENT (ADDR, ADDR:PORT, [V6]:PORT) is\n"
		"  sent to, then its preference list: the backends tried next, in order,\n"
		"  when a connect fails. Several clients may be given, separated by\n"
		"  commas, to print one line each. An IPv6 client's zone (fe80::1%%eth0,\n"
		"  [fe80::1%%eth0]:PORT) is taken and not hashed: hashlb run hashes the\n"
		"  address alone.\n"
		"\n"
		"  With -c, the table is the one hashlb run builds from FILE for the\n"
		"  service: its backends, weights, scheme, seed, hash key and hash_prefix,\n"
		"  with the backends whose state is drain or maint taking no new clients,\n"
		"  and the service's listen address as the destination (for the 4-tuple key;\n"
		"  --vip is needed when that address is a wildcard or port 0, or the\n"
		"  service takes PROXY headers).\n"
		"  The table, key and prefix options then come from FILE and may not be\n"
		"  given; --down still marks further backends down (what happens if they\n"
		"  fail).\n"
		"  Every argument is a client (or a comma-separated list of them).\n"
		"  Host names in backend addresses are not resolved (their addresses do\n"
		"  not change the table), except those of backends with each_address,\n"
		"  whose addresses name their backends: FILE's names are then resolved as\n"
		"  hashlb run resolves them, and DNS must answer.\n"
		"\n"
		"OPTIONS\n"
		"  -c, --config FILE          take the table from this configuration\n"
		"      --service NAME         the service of FILE (needed if it has several)\n" TABLE_ARGS_USAGE
			KEY_ARGS_USAGE
		"      --vip ADDR:PORT        the service address (hashed by 4-tuple, which\n"
		"                             needs it unless -c gives it; without -c,\n"
		"                             another key refuses it)\n"
		"  -n, --pref K               length of the preference list, 1..64 (default 3)\n"
		"  -j, --json                 print JSON\n"
		"  -h, --help                 show this text\n"
		"\n"
		"OUTPUT\n"
		"  One line per client: CLIENT BACKEND PREFERENCE,LIST HASH (a name with a\n"
		"  comma in the list in double quotes, as CSV quotes it: \"a,b\",c); with\n"
		"  --json, one array, an object per client (as hashlb ctl --json lookup)\n"
		"\n"
		"EXIT STATUS\n"
		"  0 on success, 1 if the table cannot be built or the configuration is\n"
		"  invalid (FILE:LINE:COL: error: ... on stderr),\n");
	fputs(CLI_EXIT_USAGE_HELP, f);
	fprintf(f,
		"  Among them: a CLIENT or --vip that is no address or lacks the port\n"
		"  that the key hashes, a --service or --down name that FILE does not\n"
		"  have.\n"
		"\n" CLI_ERRORS_HELP "EXAMPLES\n"
		"  hashlb lookup 10.0.0.7 a b c\n"
		"  hashlb lookup --scheme ring --down b 10.0.0.7,[2001:db8::1]:443 a b c\n"
		"  hashlb lookup -c configs/demo.yaml 127.0.0.7 127.0.0.8\n"
		"  hashlb lookup -c configs/demo.yaml --down b 127.0.0.7\n",
		"lookup", "-S or --seed", CLI_ERRORS_CONFIG_LIST, "lookup");
}

/*
 * The tuple of <client> (and <vip>, if given) hashed by <key>; -EINVAL
 * (printed: a usage error) if one is not an address, or has no port where
 * <key> hashes it.
 */
static int client_tuple(const char *client, const char *vip, enum hashlb_key key,
			struct hashlb_tuple *ret_tuple)
{
	struct hashlb_tuple tu, dst;
	char why[200];

	if (hashlb_tuple_parse_src(client, &tu) < 0) {
		cli_error("invalid client address '%s': %s\n", client,
			  hashlb_tuple_explain(client, why, sizeof(why)));
		return -EINVAL;
	}
	if (key != HASHLB_KEY_SRC_IP && !tu.sport[0] && !tu.sport[1]) {
		/* port 0 would answer for a client no socket can be */
		cli_error("client '%s' has no port, and the %s key hashes it: give ADDR:PORT%s\n",
			  client, hashlb_key_name(key), hashlb_tuple_port_hint(client));
		return -EINVAL;
	}
	if (vip) {
		if (hashlb_tuple_parse_src(vip, &dst) < 0) {
			cli_error("invalid --vip address '%s': %s\n", vip,
				  hashlb_tuple_explain(vip, why, sizeof(why)));
			return -EINVAL;
		}
		if (key == HASHLB_KEY_4TUPLE && !dst.sport[0] && !dst.sport[1]) {
			/* port 0 is no connection's destination, as above */
			cli_error("--vip '%s' has no port, and the 4-tuple key hashes it: give "
				  "ADDR:PORT%s\n",
				  vip, hashlb_tuple_port_hint(vip));
			return -EINVAL;
		}
		memcpy(tu.dst, dst.src, sizeof(tu.dst));
		memcpy(tu.dport, dst.sport, sizeof(tu.dport));
	}
	*ret_tuple = tu;
	return 0;
}

static int lookup_one(const struct hashlb_table *t, const char *client, const char *vip,
		      enum hashlb_key key, const struct hashlb_src_prefix *prefix, unsigned k,
		      bool json, bool first)
{
	struct hashlb_tuple tu;
	uint32_t pref[64];
	size_t n;
	uint64_t h;

	if (client_tuple(client, vip, key, &tu) < 0)
		return -EINVAL;
	if (!t)
		return 0;
	hashlb_tuple_mask_src(&tu, prefix);
	h = hashlb_tuple_hash(&tu, key, hashlb_table_params(t)->seed);
	n = hashlb_table_preference(t, h, pref, k);
	if (json) {
		/* names are escaped: a config's backend name may hold a '\\' */
		printf("%s{\"client\":", first ? "" : ",");
		cli_print_json_string(client);
		printf(",\"hash\":\"%016" PRIx64 "\",\"backend\":", h);
		if (n)
			cli_print_json_string(hashlb_table_backend_name(t, pref[0]));
		else
			printf("null");
		printf(",\"preference\":[");
		for (size_t i = 0; i < n; i++) {
			printf("%s", i ? "," : "");
			cli_print_json_string(hashlb_table_backend_name(t, pref[i]));
		}
		printf("]}");
		return 0;
	}
	printf("%s %s ", client, n ? hashlb_table_backend_name(t, pref[0]) : "-");
	for (size_t i = 0; i < n; i++) {
		const char *name = hashlb_table_backend_name(t, pref[i]);
		/* a name may hold a comma (never a '"'): quoted, as CSV quotes a field, so
		 * that "a,b" and "c" are not read as a, b and c */
		const char *q = strchr(name, ',') ? "\"" : "";

		printf("%s%s%s%s", i ? "," : "", q, name, q);
	}
	printf("%s %016" PRIx64 "\n", n ? "" : "-", h);
	return 0;
}

/*
 * Each client of <args> (<n> comma-separated lists), looked up in <t> if
 * not NULL, else only checked (-EINVAL, printed, for the first that is no
 * client: before any line is printed). strsep, not strtok: an empty client
 * ("", "a,,b") is refused, not skipped.
 */
static int lookup_all(const struct hashlb_table *t, char **args, int n, const char *vip,
		      enum hashlb_key key, const struct hashlb_src_prefix *prefix, unsigned k,
		      bool json)
{
	bool first = true;
	int r = 0;

	if (t && json)
		printf("[");
	for (int i = 0; i < n && r == 0; i++) {
		char *clients = strdup(args[i]), *rest = clients, *c;

		if (!clients)
			return -ENOMEM;
		while (r == 0 && (c = strsep(&rest, ",")) != NULL) {
			r = lookup_one(t, c, vip, key, prefix, k, json, first);
			first = false;
		}
		free(clients);
	}
	if (t && json && r == 0)
		printf("]\n");
	return r;
}

/* Whether a backend of <c> is one backend per address of its name. */
static bool config_has_each_address(const struct hashlb_config *c)
{
	for (uint32_t i = 0; i < c->n_services; i++) {
		for (uint32_t j = 0; j < c->services[i].n_backends; j++) {
			if (c->services[i].backends[j].each_address)
				return true;
		}
	}
	return false;
}

/*
 * The table of service <service> (NULL: the only one) of config <path>, as
 * the daemon builds it, with the backends of <down> (option <down_opt>, as
 * typed) marked down as well.
 * Prints what is wrong and returns 1 (FILE does not load, the table cannot be
 * built) or 2 (usage: no such service, a --down name that is no backend).
 */
static int config_table(const char *path, const char *service, const char *down,
			const char *down_opt, struct hashlb_config **ret_config,
			const struct hashlb_service_cfg **ret_service,
			struct hashlb_table **ret_table)
{
	const struct hashlb_service_cfg *s;
	struct hashlb_config *c = NULL;
	struct hashlb_table *t = NULL;
	struct hashlb_error err;
	int r;

	if (cli_config_load(path, HASHLB_LOAD_NO_RESOLVE, &c) < 0)
		return 1;
	if (config_has_each_address(c) &&
	    hashlb_config_resolve(c, HASHLB_RESOLVE_TIMEOUT_MS, &err) < 0) {
		if (err.file)
			err.file = path; /* not c's copy, freed here */
		cli_print_error(&err);
		hashlb_config_free(c);
		return 1;
	}
	if (service) {
		s = hashlb_config_service(c, service);
		if (!s) {
			cli_error("--service '%s': %s has no such service; it has:", service,
				  cli_path(path));
			for (uint32_t i = 0; i < c->n_services; i++)
				fprintf(stderr, " %s", c->services[i].name);
			fprintf(stderr, "\n");
			hashlb_config_free(c);
			return 2;
		}
	} else if (c->n_services == 1) {
		s = &c->services[0];
	} else {
		cli_error("%s has %u services: choose one with --service NAME:", cli_path(path),
			  c->n_services);
		for (uint32_t i = 0; i < c->n_services; i++)
			fprintf(stderr, " %s", c->services[i].name);
		fprintf(stderr, "\n");
		hashlb_config_free(c);
		return 2;
	}
	{
		/* the --down set with the config's states, then the backup rule over
		 * both: every primary down puts the backups in, as at run time */
		struct hashlb_backend_spec *names =
			calloc(s->n_backends ? s->n_backends : 1, sizeof(*names));
		bool *is_down = calloc(s->n_backends ? s->n_backends : 1, sizeof(*is_down));
		const char *bad = NULL;
		size_t l = 0;

		r = names && is_down ? 0
				     : hashlb_err(&err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		for (uint32_t i = 0; r == 0 && i < s->n_backends; i++)
			names[i].name = s->backends[i].name;
		/* Every name in the down list must be a backend: a typo must not pass silently. */
		if (r == 0)
			bad = table_args_mark(down, names, s->n_backends, is_down, &l);
		if (bad) { /* said as hashlb steer says it */
			table_args_check_list(down, down_opt, names, s->n_backends, s->name);
			free(names);
			free(is_down);
			hashlb_config_free(c);
			return 2;
		}
		if (r == 0)
			r = hashlb_service_cfg_build_table(s, is_down, &t, &err);
		free(names);
		free(is_down);
	}
	if (r < 0) {
		cli_print_error(&err);
		hashlb_config_free(c);
		return 1;
	}
	*ret_config = c;
	*ret_service = s;
	*ret_table = t;
	return 0;
}

int cmd_lookup(int argc, char **argv)
{
	static const struct option longopts[] = {
		TABLE_ARGS_LONGOPTS,
		{ "key", required_argument, NULL, 'k' },
		{ "ipv4-prefix", required_argument, NULL, 0x204 },
		{ "ipv6-prefix", required_argument, NULL, 0x205 },
		{ "vip", required_argument, NULL, 0x202 },
		{ "pref", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "config", required_argument, NULL, 'c' },
		{ "service", required_argument, NULL, 0x203 },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	static const int repeatable[] = { TABLE_ARGS_REPEATABLE, 0 };
	enum hashlb_key key = HASHLB_KEY_SRC_IP;
	struct hashlb_src_prefix prefix = { 32, 128 };
	struct hashlb_table *t = NULL;
	const char *vip = NULL;
	const char *config_path = NULL, *service = NULL;
	char name[CLI_OPT_NAME_MAX], key_opt[CLI_OPT_NAME_MAX] = "",
				     prefix_opt[CLI_OPT_NAME_MAX] = "",
				     config_opt[CLI_OPT_NAME_MAX] = "";
	const struct hashlb_service_cfg *svc = NULL;
	struct hashlb_config *cfg = NULL;
	struct table_args a;
	bool json = false;
	uint64_t k = 3;
	int opt, r, n_clients;

	table_args_init(&a);
	a.has_service = true; /* --service, with -c */
	while ((opt = cli_getopt(argc, argv, ":" TABLE_ARGS_SHORTOPTS "k:n:c:jh", longopts,
				 repeatable, name)) != -1) {
		r = table_args_option(&a, opt, name, optarg);
		if (r < 0)
			return 2;
		if (r > 0)
			continue;
		switch (opt) {
		case 'c':
			if (cli_config_path(name, optarg, &config_path))
				return 2;
			snprintf(config_opt, sizeof(config_opt), "%s", name);
			break;
		case 0x203:
			service = optarg;
			break;
		case 'k':
			snprintf(key_opt, sizeof(key_opt), "%s", name);
			if (hashlb_key_parse(optarg, &key) < 0) {
				cli_bad_value(name, optarg, "src-ip, src-ip-port or 4-tuple");
				return 2;
			}
			break;
		case 0x204:
		case 0x205:
			snprintf(prefix_opt, sizeof(prefix_opt), "%s", name);
			if (cli_parse_prefix_len(name, optarg, opt == 0x205, &prefix) < 0)
				return 2;
			break;
		case 'n':
			if (cli_parse_u64(optarg, 64, &k) < 0 || k == 0) {
				cli_bad_value(name, optarg, "1..64");
				return 2;
			}
			break;
		case 0x202:
			vip = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return 2;
		}
	}
	if (config_path) {
		if (table_args_refuse_with_config(&a, key_opt, prefix_opt, config_opt) < 0) {
			table_args_free(&a);
			return 2;
		}
		if (argc - optind < 1) {
			cli_error("need a client address\n");
			table_args_free(&a);
			return 2;
		}
		r = config_table(config_path, service, a.down, a.down_opt, &cfg, &svc, &t);
		if (r) {
			table_args_free(&a);
			return r;
		}
		key = svc->key;
		prefix = svc->hash_prefix;
		if (!vip && hashlb_service_dest_unknown(svc, false)) {
			cli_error("service %s hashes the 4-tuple and %s: give --vip ADDR:PORT, the "
				  "address clients connect to\n",
				  svc->name, hashlb_service_dest_unknown(svc, false));
			hashlb_table_free(t);
			hashlb_config_free(cfg);
			table_args_free(&a);
			return 2;
		}
		if (!vip)
			vip = svc->listen;
		n_clients = argc - optind;
		r = lookup_all(NULL, argv + optind, n_clients, vip, key, &prefix, (unsigned)k,
			       json);
	} else {
		if (service) {
			cli_error("--service needs -c FILE\n");
			table_args_free(&a);
			return 2;
		}
		if (argc - optind < 2) {
			cli_error("need a client address and at least one backend\n");
			table_args_free(&a);
			return 2;
		}
		if (prefix_opt[0] && key != HASHLB_KEY_SRC_IP) {
			/* as a config's hash_prefix: the other keys hash the port */
			cli_error("%s applies to the src-ip key, not %s\n", prefix_opt,
				  hashlb_key_name(key));
			table_args_free(&a);
			return 2;
		}
		if (vip && key != HASHLB_KEY_4TUPLE) {
			/* the other keys hash no destination: it would change nothing */
			cli_error("--vip applies to the 4-tuple key, not %s\n",
				  hashlb_key_name(key));
			table_args_free(&a);
			return 2;
		}
		if (key == HASHLB_KEY_4TUPLE && !vip) {
			/* a destination of 0.0.0.0:0 would answer for a connection none is */
			cli_error(
				"the 4-tuple key hashes the address clients connect to: give --vip "
				"ADDR:PORT\n");
			table_args_free(&a);
			return 2;
		}
		n_clients = 1;
		r = lookup_all(NULL, argv + optind, n_clients, vip, key, &prefix, (unsigned)k,
			       json);
		if (r == 0)
			r = table_args_backends(&a, argv + optind + 1, (size_t)(argc - optind - 1));
		if (r == 0)
			r = table_args_build(&a, &t, NULL) < 0 ? -EIO : 0;
	}
	if (r == 0)
		r = lookup_all(t, argv + optind, n_clients, vip, key, &prefix, (unsigned)k, json);
	hashlb_table_free(t);
	hashlb_config_free(cfg);
	table_args_free(&a);
	return r == 0 ? 0 : r == -EINVAL ? 2 : 1;
}
