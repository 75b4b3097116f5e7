// SPDX-License-Identifier: MIT
/* hashlb lookup: which backend a client goes to, and where it goes next. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
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
		"\n"
		"DESCRIPTION\n"
		"  Builds the table for the backends given (see hashlb table) and prints\n"
		"  the backend that a client at CLIENT (ADDR, ADDR:PORT, [V6]:PORT) is\n"
		"  sent to, then its preference list: the backends tried next, in order,\n"
		"  when a connect fails. Several clients may be given, separated by\n"
		"  commas, to print one line each.\n"
		"\n"
		"OPTIONS\n" TABLE_ARGS_USAGE
		"  -k, --key KEY              hash key: src-ip (default), src-ip-port, 4-tuple\n"
		"      --vip ADDR:PORT        the service address (hashed by 4-tuple)\n"
		"  -n, --pref K               length of the preference list (default 3)\n"
		"      --json                 print JSON\n"
		"  -h, --help                 show this text\n"
		"\n"
		"OUTPUT\n"
		"  One line per client: CLIENT BACKEND PREFERENCE,LIST HASH\n"
		"\n"
		"EXIT STATUS\n"
		"  0 on success, 1 if the table cannot be built or an address is invalid,\n"
		"  2 on a usage error.\n"
		"\n"
		"EXAMPLES\n"
		"  hashlb lookup 10.0.0.7 a b c\n"
		"  hashlb lookup --scheme ring --down b 10.0.0.7,[2001:db8::1]:443 a b c\n");
}

static int lookup_one(const struct hashlb_table *t, const char *client, const char *vip,
		      enum hashlb_key key, unsigned k, bool json, bool first)
{
	struct hashlb_tuple tu, dst;
	uint32_t pref[64];
	size_t n;
	uint64_t h;

	if (hashlb_tuple_parse_src(client, &tu) < 0) {
		fprintf(stderr, "hashlb: error: invalid client address '%s'\n", client);
		return -EINVAL;
	}
	if (vip) {
		if (hashlb_tuple_parse_src(vip, &dst) < 0) {
			fprintf(stderr, "hashlb: error: invalid --vip address '%s'\n", vip);
			return -EINVAL;
		}
		memcpy(tu.dst, dst.src, sizeof(tu.dst));
		memcpy(tu.dport, dst.sport, sizeof(tu.dport));
	}
	h = hashlb_tuple_hash(&tu, key, hashlb_table_params(t)->seed);
	n = hashlb_table_preference(t, h, pref, k);
	if (json) {
		printf("%s{\"client\":\"%s\",\"hash\":\"%016" PRIx64 "\",\"backend\":", first ? "" : ",",
		       client, h);
		if (n)
			printf("\"%s\"", hashlb_table_backend_name(t, pref[0]));
		else
			printf("null");
		printf(",\"preference\":[");
		for (size_t i = 0; i < n; i++)
			printf("%s\"%s\"", i ? "," : "", hashlb_table_backend_name(t, pref[i]));
		printf("]}");
		return 0;
	}
	printf("%s %s ", client, n ? hashlb_table_backend_name(t, pref[0]) : "-");
	for (size_t i = 0; i < n; i++)
		printf("%s%s", i ? "," : "", hashlb_table_backend_name(t, pref[i]));
	printf("%s %016" PRIx64 "\n", n ? "" : "-", h);
	return 0;
}

int cmd_lookup(int argc, char **argv)
{
	static const struct option longopts[] = {
		TABLE_ARGS_LONGOPTS,
		{ "key", required_argument, NULL, 'k' },
		{ "vip", required_argument, NULL, 0x202 },
		{ "pref", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 0x201 },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	enum hashlb_key key = HASHLB_KEY_SRC_IP;
	struct hashlb_table *t = NULL;
	const char *vip = NULL;
	struct table_args a;
	bool json = false;
	uint64_t k = 3;
	char *clients, *save = NULL;
	int opt, r;

	table_args_init(&a);
	while ((opt = getopt_long(argc, argv, TABLE_ARGS_SHORTOPTS "k:n:h", longopts, NULL)) !=
	       -1) {
		r = table_args_option(&a, opt, optarg);
		if (r < 0)
			return 2;
		if (r > 0)
			continue;
		switch (opt) {
		case 'k':
			if (hashlb_key_parse(optarg, &key) < 0) {
				fprintf(stderr, "hashlb: error: unknown hash key '%s'\n", optarg);
				return 2;
			}
			break;
		case 'n':
			if (cli_parse_u64(optarg, 64, &k) < 0 || k == 0) {
				fprintf(stderr, "hashlb: error: --pref takes 1..64\n");
				return 2;
			}
			break;
		case 0x202:
			vip = optarg;
			break;
		case 0x201:
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind < 2) {
		fprintf(stderr, "hashlb: error: need a client address and at least one backend\n\n");
		usage(stderr);
		return 2;
	}
	r = table_args_backends(&a, argv + optind + 1, (size_t)(argc - optind - 1));
	if (r == 0)
		r = table_args_build(&a, &t, NULL);
	clients = strdup(argv[optind]);
	if (r == 0 && !clients)
		r = -ENOMEM;
	if (r == 0 && json)
		printf("[");
	bool first = true;

	for (char *c = r == 0 ? strtok_r(clients, ",", &save) : NULL; c && r == 0;
	     c = strtok_r(NULL, ",", &save)) {
		r = lookup_one(t, c, vip, key, (unsigned)k, json, first);
		first = false;
	}
	if (r == 0 && json)
		printf("]\n");
	free(clients);
	hashlb_table_free(t);
	table_args_free(&a);
	return r == 0 ? 0 : 1;
}
