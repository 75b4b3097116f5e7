// SPDX-License-Identifier: MIT
/*
 * hashlb-bench: hashlb's microbenchmarks.
 *   schemes  the hashing-scheme comparison (modulo, ring, Maglev, rendezvous, jump, slots)
 *   lookup   lookup and build cost of hashlb's tables against the targets
 *   health   a Maglev backend down and up against the full build, and where its clients go
 */
#include <stdarg.h>
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
	      "           \"title\", \"rows\": [{COLUMN: number, string or null}]}]}\n"
	      "  The options may come before the command or after it.\n",
	      f);
}

/* A usage error: <fmt> on stderr, the usage after it; exit 2. */
static _Noreturn __attribute__((format(printf, 1, 2))) void refuse(const char *fmt, ...)
{
	va_list ap;

	fputs("hashlb-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	usage(stderr);
	exit(2);
}

static int (*command_named(const char *name))(const struct bench_opts *)
{
	if (strcmp(name, "schemes") == 0)
		return bench_schemes;
	if (strcmp(name, "lookup") == 0)
		return bench_lookup;
	if (strcmp(name, "health") == 0)
		return bench_health;
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opts o = { .format = REPORT_MD };
	char command[512] = "";
	size_t len = 0;
	int (*run)(const struct bench_opts *) = NULL;
	const char *format = NULL; /* --format's value, once */

	/* --help anywhere wins: nothing else is judged, nothing is measured */
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		}
	}
	for (int i = 1; i < argc; i++) {
		const char *fmt = NULL;

		if (strcmp(argv[i], "--quick") == 0) {
			o.quick = 1;
			continue;
		} else if (strcmp(argv[i], "--format") == 0) {
			if (i + 1 == argc)
				refuse("option --format needs a value: md, csv or json");
			fmt = argv[++i];
		} else if (strncmp(argv[i], "--format=", 9) == 0) {
			fmt = argv[i] + 9;
		} else if (!run && argv[i][0] != '-') {
			run = command_named(argv[i]);
			if (!run)
				refuse("unknown command '%s' (schemes, lookup or health)", argv[i]);
			continue;
		} else {
			refuse("unexpected argument '%s'", argv[i]);
		}
		if (report_format_parse(fmt) < 0)
			refuse("invalid value '%s' for option --format (md, csv or json)", fmt);
		/* as hashlb's commands: the first value would be dropped unsaid */
		if (format)
			refuse("option --format given twice ('%s', then '%s'): give it once",
			       format, fmt);
		format = fmt;
		o.format = (enum report_format)report_format_parse(fmt);
	}
	if (!run)
		refuse("no command given: schemes, lookup or health");
	/* the command that reproduces this output, as it was typed */
	for (int i = 0; i < argc && len < sizeof(command) - 1; i++)
		len += (size_t)snprintf(command + len, sizeof(command) - len, "%s%s", i ? " " : "",
					argv[i]);
	o.command = command;
	return run(&o) < 0 ? 1 : 0;
}
