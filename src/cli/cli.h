/* SPDX-License-Identifier: MIT */
/* The hashlb command: one function per subcommand, dispatched by main.c. */
#ifndef HASHLB_CLI_H
#define HASHLB_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hashlb/error.h"
#include "hashlb/table.h"

struct cli_command {
	const char *name;
	const char *summary; /* one line for `hashlb --help` */
	int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
};

/*
 * The exit status 2 of every command, as its --help says it. The rule: 2
 * when the command line is wrong, whatever tells it (the parser, or FILE
 * that has no such service or backend), before anything is done; 1 when
 * the command ran and failed (a config that does not load, a table that
 * cannot be built, an endpoint or the kernel that refuses).
 */
#define CLI_EXIT_USAGE_HELP                                                      \
	"  2 on a usage error, before anything is done: an unknown option or\n"  \
	"  command, an option value or argument that is missing, malformed or\n" \
	"  out of range, an option that does not apply to what the command\n"    \
	"  does, or a name (--down, --service...) that names nothing; the\n"     \
	"  message names the option or argument.\n"

int cmd_table(int argc, char **argv);
int cmd_lookup(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_steer(int argc, char **argv);
int cmd_ctl(int argc, char **argv);

/* Print "hashlb: error: <msg>" (or "file:line:col: error: <msg>") to stderr. */
void cli_print_error(const struct hashlb_error *err);
/* Parse an unsigned integer (decimal or 0x hex) into *ret; -EINVAL if not one or above max. */
int cli_parse_u64(const char *s, uint64_t max, uint64_t *ret);
/* Print <s> to stdout as a JSON string: quoted, '"', '\\' and control characters escaped. */
void cli_print_json_string(const char *s);

#endif
