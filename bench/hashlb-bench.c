// SPDX-License-Identifier: MIT
/*
 * hashlb-bench: hashlb's microbenchmarks.
 *   schemes  the hashing-scheme comparison (modulo, ring, Maglev, rendezvous, jump, slots)
 *   lookup   lookup and build cost of hashlb's tables against the targets
 *   health   a Maglev backend down and up against the full build, and where its clients go
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static void usage(FILE *f)
{
	fputs("usage: hashlb-bench schemes|lookup|health [--quick] [--format md|csv|json]\n"
	      "  schemes  compare hash % N, ring (V=1..1000), Maglev (M=65537, 655373),\n"
	      "           rendezvous, jump and hash slots on 1,000,000 keys; then the\n"
	      "           balance and bytes of rings (V=1..1000) and Maglev (M=251..655373)\n"
	      "           from their exact shares\n"
	      "  lookup   ns per lookup (tuple hash included) and build ms of hashlb's tables\n"
	      "  health   ms of a Maglev backend going down and back against the full build\n"
	      "           (M=65537, 655373 and 16777259, N=2 to 1000), and where its clients land\n"
	      "  --quick  fewer keys and repetitions (seconds, for demos and smoke runs;\n"
	      "           health: M=65537 only)\n"
	      "  --format md (default): Markdown tables, as in bench/RESULTS.md;\n"
	      "           csv: per table a '#' title line and a header row, each row's first\n"
	      "           column the table's id, '-' where a column has no value, notes as\n"
	      "           '#' lines; json: {\"command\", \"items\": [{\"note\"} or {\"table\" (its id),\n"
	      "           \"title\", \"rows\": [{COLUMN: number, string or null}]}]}\n",
	      f);
}

int main(int argc, char **argv)
{
	struct bench_opts o = { .format = REPORT_MD };
	char command[512] = "";
	size_t len = 0;
	int (*run)(const struct bench_opts *) = NULL;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "schemes") == 0) {
		run = bench_schemes;
	} else if (strcmp(argv[1], "lookup") == 0) {
		run = bench_lookup;
	} else if (strcmp(argv[1], "health") == 0) {
		run = bench_health;
	} else if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return 0;
	} else {
		fprintf(stderr, "hashlb-bench: unknown command '%s'\n", argv[1]);
		usage(stderr);
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		const char *fmt = NULL;

		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout); /* as after the command: its options are these */
			return 0;
		} else if (strcmp(argv[i], "--quick") == 0) {
			o.quick = 1;
			continue;
		} else if (strcmp(argv[i], "--format") == 0) {
			if (i + 1 == argc) {
				fprintf(stderr,
					"hashlb-bench: option --format needs a value: md, csv "
					"or json\n");
				usage(stderr);
				return 2;
			}
			fmt = argv[++i];
		} else if (strncmp(argv[i], "--format=", 9) == 0) {
			fmt = argv[i] + 9;
		} else {
			fprintf(stderr, "hashlb-bench: unexpected argument '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
		if (report_format_parse(fmt) < 0) {
			fprintf(stderr,
				"hashlb-bench: invalid value '%s' for option --format (md, csv or json)\n",
				fmt);
			usage(stderr);
			return 2;
		}
		o.format = (enum report_format)report_format_parse(fmt);
	}
	/* the command that reproduces this output, as it was typed */
	for (int i = 0; i < argc && len < sizeof(command) - 1; i++)
		len += (size_t)snprintf(command + len, sizeof(command) - len, "%s%s", i ? " " : "",
					argv[i]);
	o.command = command;
	return run(&o) < 0 ? 1 : 0;
}
