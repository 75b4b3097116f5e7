/* SPDX-License-Identifier: MIT */
/* The hashlb command: one function per subcommand, dispatched by main.c. */
#ifndef HASHLB_CLI_H
#define HASHLB_CLI_H

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "hashlb/error.h"
#include "hashlb/table.h"
#include "hashlb/tuple.h"

struct hashlb_config;

struct cli_command {
	const char *name;
	const char *summary; /* one line for `hashlb --help` */
	int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
	/* it runs until stopped and takes its signals (cli_start_signals()): main()
	 * holds them for it from its first statement; anything else (any other
	 * command, --help, --version) keeps the mask hashlb inherited */
	bool takes_signals;
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
	"  out of range, an option that takes one value given twice, or an\n"    \
	"  option that does not apply to what the command does; the message\n"   \
	"  names the option or argument.\n"

/*
 * The ERRORS section of every command's --help: a format of the command's
 * name, one of its own options written both ways ("-c or --config"), what
 * a configuration's errors look like (CLI_ERRORS_CONFIG_LIST, or "" for a
 * command that reads none), and its name again.
 */
#define CLI_ERRORS_HELP                                                           \
	"ERRORS\n"                                                                \
	"  One line on stderr: \"hashlb %s: WHAT\", an option named as typed\n"   \
	"  (%s)%s.\n"                                                             \
	"  A usage error is followed by one line: \"Run 'hashlb %s --help' for\n" \
	"  the options.\"\n"                                                      \
	"\n"
/* ... of a command that reads a config: it says every error of it (check and its --against,
 * run, lookup -c, ctl -c, steer -c: cli_print_config_errors()) */
#define CLI_ERRORS_CONFIG_LIST                                  \
	"; a configuration's \"FILE:LINE:COL: error: WHAT\",\n" \
	"  a line each of its errors, then how many"

int cmd_table(int argc, char **argv);
int cmd_lookup(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_steer(int argc, char **argv);
int cmd_ctl(int argc, char **argv);

/*
 * Error lines, the same for every command: "hashlb CMD: WHAT" ("hashlb: WHAT"
 * before the command is known), an option named as the user typed it; after a
 * usage error (exit status 2) main() adds "Run 'hashlb CMD --help' for the
 * options." A configuration's error stays "FILE:LINE:COL: error: WHAT".
 */
#define CLI_OPT_NAME_MAX 32

/* The subcommand <cmd> runs from now on (NULL: none yet), for the prefix. */
void cli_set_command(const char *cmd);
/*
 * Print "hashlb CMD: " then <fmt> (which ends with its "\n") to stderr; on the journal
 * (hashlb ctl run by a unit's ExecReload=) an error's priority before it, so that
 * journalctl -p err shows it.
 */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same for a line that is no error (the command goes on, or exits 0): "note: ...", a
 * reload sent as SIGHUP. A notice on the journal. */
void cli_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * <path> (a config file's) with its control bytes written \n or \xNN, for an error
 * line, which then stays one line: valid until the next call. <path> itself if
 * short of memory.
 */
const char *cli_path(const char *path);
/* Print <err>: "FILE:LINE:COL: error: WHAT", "FILE: error: WHAT" or cli_error()'s "hashlb CMD: WHAT". */
void cli_print_error(const struct hashlb_error *err);
/* The same for what a config accepts but warns of (hashlb_config_warnings()): "warning:". */
void cli_print_warning(const struct hashlb_error *warning);
/*
 * A config's refusal (hashlb_config_load_list()): each error of <list> in file order, the
 * first CLI_ERRORS_SHOWN of them, then "and N more" past them and the count ("3 errors")
 * when there are more than one; <err> alone if <list> is empty (the file unread, a YAML
 * syntax error). One error prints as it always did: one line.
 */
#define CLI_ERRORS_SHOWN 20u
struct hashlb_error_list;
void cli_print_config_errors(const struct hashlb_error *err, const struct hashlb_error_list *list);
/*
 * hashlb_config_load_list() of <path> with <flags> into <ret_config>: on failure (< 0), every
 * error printed (cli_print_config_errors()), so that each command that loads a file says all
 * of them as hashlb check does, and a file of five mistakes is fixed in one round.
 */
struct hashlb_config;
int cli_config_load(const char *path, unsigned int flags, struct hashlb_config **ret_config);
/*
 * Print "invalid value '<value>' for option <name> (<allowed>)": the one
 * form of a refused option value; <allowed> (NULL: none) says what it takes.
 */
void cli_bad_value(const char *name, const char *value, const char *allowed);
/*
 * An admin address <value> of option <name> (or "$HASHLB_ADMIN"), one parser for hashlb run
 * --admin, which binds there (<resolve> NULL), and hashlb ctl --admin, which connects there,
 * as the config's admin key reads one: unix:/PATH (absolute, shorter than 108 bytes) or a
 * numeric ADDR:PORT, not link-local, into <ret_addr> and <ret_len>. Only run takes "off"
 * (*<ret_len> 0) and port 0 (the kernel picks). Only ctl takes HOST:PORT, a host name, which
 * <resolve> turns into an address, given them as hashlb_name_addr_parse() split them (-errno
 * if it cannot): a connect may try each address a name has, a bind takes one, which a name
 * does not say (nor does the admin key take one).
 * 0; or -EINVAL once it is refused, printed as cli_bad_value() and the one reason (a relative
 * path, a port alone: "write ADDR:8080, ..."), a usage error.
 */
int cli_admin_parse(const char *name, const char *value,
		    int (*resolve)(const char *host, uint16_t port, struct sockaddr_storage *,
				   socklen_t *),
		    struct sockaddr_storage *ret_addr, socklen_t *ret_len);
/*
 * --admin <admin> (parsed by cli_admin_parse() as <addr>, <len>: 0 for off) in place of the
 * admin of <cfg>, loaded from <path> with HASHLB_LOAD_ADMIN_GIVEN; a service listening
 * where it now is refused as the loader refuses one on the config's admin address. 0, or
 * -errno once printed. hashlb run, hashlb check and ctl -c: what one takes, the others do.
 */
int cli_admin_apply(struct hashlb_config *cfg, const char *path, const char *admin,
		    const struct sockaddr_storage *addr, socklen_t len);
/*
 * The value <arg> of a config option (-c or --config, <name> as typed) into *<path>; 0, or 2
 * on a usage error, printed as cli_bad_value(): an empty one (a unit's -c ${HASHLB_CONFIG}
 * with the variable unset) names no file, and was read as "FILE: error: cannot open", exit 1,
 * with no file named. A second -c is cli_getopt()'s to refuse, as any option's.
 */
int cli_config_path(const char *name, const char *arg, const char **path);
/*
 * getopt_long() that says itself what it refuses, in cli_error()'s words:
 * <optstring> starts with ':' (after a '+', if any). Returns the option, or
 * -1 at the end, or '?' once the refusal is printed (a usage error). The
 * option as typed ("--seed" or "-S") goes into <ret_name>
 * (CLI_OPT_NAME_MAX bytes). An option that takes a value and is given one
 * again since cli_set_command() ("-s a -s b", "-c a.yaml --config=b.yaml")
 * is refused so, naming both values (before, the last one was taken, the
 * first dropped unsaid). Unless its code is one of <repeatable> (0-terminated, or
 * NULL: none), an option that adds to a list (--down a --down b).
 */
int cli_getopt(int argc, char **argv, const char *optstring, const struct option *longopts,
	       const int *repeatable, char *ret_name);
/*
 * The commands that take "-c FILE" and no argument: 0 when <path> is given and
 * argv[optind..] is empty; otherwise say which is wrong and return 2 (a usage error).
 */
int cli_config_only(const char *path, int argc, char **argv, int optind);
/*
 * The argument <arg> a command takes none of refused, said as an error; with no -c
 * (<path> NULL) and <arg> a YAML file's name, how to give it: "-c <arg>".
 */
void cli_unexpected_argument(const char *arg, const char *path);
/* Parse an unsigned integer (decimal or 0x hex) into *ret; -EINVAL if not one or above max. */
int cli_parse_u64(const char *s, uint64_t max, uint64_t *ret);
/*
 * The length <arg> of option <name>, --ipv4-prefix (1..32) or with <v6>
 * --ipv6-prefix (1..128), as a config's hash_prefix, into <p>'s; -EINVAL,
 * printed (cli_bad_value()), if it is no such length.
 */
int cli_parse_prefix_len(const char *name, const char *arg, bool v6, struct hashlb_src_prefix *p);
/*
 * First thing of a command that runs until it is stopped (hashlb run, hashlb
 * steer): <held> is blocked, its signals kept for when the command takes
 * them (a signalfd, sigwait()); each of <stops> ends the process at once
 * until then, as by its default action (SIGQUIT as SIGTERM: no core dump),
 * and also as PID 1 of a PID namespace, where the kernel drops a signal
 * left to its default action (the process exits 128 + the signal there).
 * main() holds them all from its first statement: one that arrived since
 * is taken here (a stop ends the process, <held> stays pending), none took
 * its default action before.
 * Any other signal main() held gets back the mask hashlb inherited.
 *
 * A stop signal inherited ignored stays ignored, from here to the end
 * (hlb_sigset_del_ignored(), the rule the command follows too when it takes
 * the others): a POSIX shell's background job ignores SIGINT and SIGQUIT so
 * that a Ctrl-C at the terminal spares it, nohup ignores SIGHUP. SIGTERM
 * is not a shell's to ignore: a stop on SIGTERM is always honoured.
 */
void cli_start_signals(const sigset_t *stops, const sigset_t *held);
/*
 * The signals main() and cli_start_signals() held for a command that will not
 * run until stopped after all (its --help; hashlb steer --stats, --detach) get
 * back the mask hashlb inherited: one that arrived since takes its action now
 * (a SIGHUP's, a SIGUSR1's default: the end), as for any command line tool.
 * Held, a SIGHUP to "hashlb run --help | less" was lost: the text went on to
 * its end, written to a pipe as long as it took, and hashlb exited 0.
 */
void cli_release_signals(void);
/* Print <s> to stdout as a JSON string: quoted, '"', '\\' and control characters escaped. */
void cli_print_json_string(const char *s);

#endif
