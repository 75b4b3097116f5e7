// SPDX-License-Identifier: MIT
/* How the hashlb command says what is wrong: one rule for every subcommand. */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "control/buf.h"
#include "hashlb/config.h"
#include "runtime/log.h"

/*
 * The subcommand that runs, for the prefix of every error line: a static,
 * as error(3)'s program_invocation_name, rather than an argument threaded
 * through every function that may print one (table_args, cli_print_error).
 */
static const char *cli_command;

/*
 * The value each option that takes one was given, by the code getopt returns for it (NULL:
 * not yet): one command line's, from cli_set_command() on, through every cli_getopt() call
 * (ctl reads its options before and after the command in several).
 */
#define OPT_CODES 0x300
static const char *opt_given[OPT_CODES];

void cli_set_command(const char *cmd)
{
	cli_command = cmd;
	memset(opt_given, 0, sizeof(opt_given));
}

/* A line of the command's, <prefix> (its priority on the journal) before it. */
static void say(const char *prefix, const char *fmt, va_list ap)
{
	fputs(prefix, stderr);
	if (cli_command)
		fprintf(stderr, "hashlb %s: ", cli_command);
	else
		fputs("hashlb: ", stderr);
	vfprintf(stderr, fmt, ap);
}

void cli_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(hlb_log_journal_prefix(HLB_LOG_ERROR), fmt, ap);
	va_end(ap);
}

void cli_notice(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(hlb_log_journal_notice(), fmt, ap);
	va_end(ap);
}

static __attribute__((format(printf, 2, 3))) void say_line(const char *prefix, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(prefix, fmt, ap);
	va_end(ap);
}

/* cli_bad_value()'s line, ended with <why> the value is wrong if there is one. */
static void bad_value(const char *name, const char *value, const char *allowed, const char *why)
{
	/* $HASHLB_ADMIN, ctl's --admin from the environment, is no option */
	cli_error("invalid value '%s' for %s%s", value, name[0] == '$' ? "" : "option ", name);
	if (allowed)
		fprintf(stderr, " (%s)", allowed);
	if (why)
		fprintf(stderr, ": %s", why);
	fputc('\n', stderr);
}

void cli_bad_value(const char *name, const char *value, const char *allowed)
{
	bad_value(name, value, allowed, NULL);
}

int cli_admin_parse(const char *name, const char *value,
		    int (*resolve)(const char *host, uint16_t port, struct sockaddr_storage *,
				   socklen_t *),
		    struct sockaddr_storage *ret_addr, socklen_t *ret_len)
{
	/* what each takes: hashlb run binds (off, port 0), ctl connects (a host name) */
	const char *allowed = resolve ? "HOST:PORT, [V6]:PORT or unix:/PATH"
				      : "ADDR:PORT, unix:/PATH (absolute, under 108 bytes) or off";
	char why[200], host[HASHLB_HOST_MAX + 1];
	struct sockaddr_storage addr = { 0 };
	socklen_t len = 0;
	uint16_t port;

	if (!strncmp(value, "unix:", 5)) { /* unix:/PATH meant: what is wrong is the path */
		if (hashlb_unix_addr_parse(value, &addr, &len, why, sizeof(why)) < 0) {
			bad_value(name, value, NULL, why);
			return -EINVAL;
		}
	} else if (!resolve && !strcmp(value, "off")) {
		len = 0;
	} else if (value[0] == '/') { /* it said "missing ':PORT'" */
		snprintf(why, sizeof(why), "a path: a Unix socket is written unix:%s", value);
		bad_value(name, value, NULL, why);
		return -EINVAL;
	} else if (hashlb_addr_parse(value, !resolve, &addr, &len) == 0) {
		/* as the config's admin key: bind() and connect() refuse it */
		const char *link_local = hashlb_addr_link_local(&addr);

		if (link_local) {
			bad_value(name, value, NULL, link_local);
			return -EINVAL;
		}
	} else if (hashlb_name_addr_parse(value, host, &port) == 0) {
		if (!resolve) { /* as the admin key: ctl's --admin does take it */
			snprintf(why, sizeof(why),
				 "a host name: hashlb run listens on one address, which a name "
				 "does not say (localhost may be ::1 and 127.0.0.1): write it in "
				 "numbers, as 127.0.0.1:%u; hashlb ctl --admin takes the name",
				 port);
			bad_value(name, value, allowed, why);
			return -EINVAL;
		}
		if (resolve(host, port, &addr, &len) < 0) {
			bad_value(name, value, allowed, "the host name does not resolve");
			return -EINVAL;
		}
	} else { /* as the config's admin key says it: "a port alone: write ADDR:8080, ..." */
		bad_value(name, value, allowed,
			  hashlb_addr_explain(value, !resolve, resolve, why, sizeof(why)));
		return -EINVAL;
	}
	*ret_addr = addr;
	*ret_len = len;
	return 0;
}

/*
 * The loader refuses a service that listens where the config's admin
 * endpoint does (hashlb_admin_clash()); --admin replaces that address
 * after the load, so the same check again for it.
 */
static int admin_clash(const struct hashlb_config *cfg, const char *path, struct hashlb_error *err)
{
	for (uint32_t i = 0; i < cfg->n_services; i++) {
		const struct hashlb_service_cfg *s = &cfg->services[i];

		if (!hashlb_admin_clash(&cfg->admin_addr, cfg->admin_addr_len, s))
			continue;
		hashlb_err(err, -EADDRINUSE, HASHLB_ERR_CONFIG,
			   "listen address %s clashes with the admin endpoint's %s (--admin): "
			   "clients would reach the admin endpoint",
			   s->listen, cfg->admin);
		err->file = path;
		err->line = s->listen_pos.line;
		err->column = s->listen_pos.column;
		return -EADDRINUSE;
	}
	return 0;
}

int cli_admin_apply(struct hashlb_config *cfg, const char *path, const char *admin,
		    const struct sockaddr_storage *addr, socklen_t len)
{
	struct hashlb_error err;
	char *copy = NULL;

	if (len && !(copy = strdup(admin))) {
		cli_error("out of memory\n");
		return -ENOMEM;
	}
	if (len)
		cfg->admin_addr = *addr;
	free(cfg->admin);
	cfg->admin = copy;
	cfg->admin_addr_len = len;
	cfg->admin_override = true;
	if (admin_clash(cfg, path, &err) < 0) {
		cli_print_error(&err);
		return -EADDRINUSE;
	}
	return 0;
}

int cli_config_path(const char *name, const char *arg, const char **path)
{
	if (!*arg) {
		cli_bad_value(name, arg, "a file name: an empty one names none");
		return 2;
	}
	*path = arg; /* a second one is refused by cli_getopt() */
	return 0;
}

/* After an error's text: how to give <arg>, written where "-c <arg>" was meant, and the end. */
static void config_hint(const char *arg)
{
	fprintf(stderr, " (the config file is given with -c: hashlb %s -c %s)\n",
		cli_command ? cli_command : "CMD", arg);
}

void cli_unexpected_argument(const char *arg, const char *path)
{
	size_t n = strlen(arg);
	bool yaml =
		(n > 5 && !strcmp(arg + n - 5, ".yaml")) || (n > 4 && !strcmp(arg + n - 4, ".yml"));

	cli_error("unexpected argument '%s'", arg);
	if (!path && yaml)
		config_hint(arg);
	else
		fputc('\n', stderr);
}

int cli_config_only(const char *path, int argc, char **argv, int optind)
{
	if (path && optind == argc)
		return 0;
	if (path) {
		cli_unexpected_argument(argv[optind], path);
	} else if (optind < argc) { /* "hashlb check lb.yaml": the file without its -c */
		cli_error("need -c FILE");
		config_hint(argv[optind]);
	} else {
		cli_error("need -c FILE\n");
	}
	return 2;
}

const char *cli_path(const char *path)
{
	static char *shown;
	size_t n = 1;
	char *o;

	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		n += *p == '\n' ? 2 : *p < ' ' || *p == 0x7f ? 4 : 1;
	free(shown);
	shown = malloc(n);
	if (!shown)
		return path;
	o = shown;
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		if (*p == '\n')
			o += sprintf(o, "\\n");
		else if (*p < ' ' || *p == 0x7f)
			o += sprintf(o, "\\x%02x", *p);
		else
			*o++ = (char)*p;
	}
	*o = '\0';
	return shown;
}

/* <err> as "FILE:LINE:COL: <kind>: WHAT", "FILE: <kind>: WHAT" or cli_error()'s line. */
static void print_diagnostic(const struct hashlb_error *err, const char *kind)
{
	/* why a unit's start or reload failed: an error to journalctl -p err too */
	const char *prefix =
		hlb_log_journal_prefix(strcmp(kind, "error") ? HLB_LOG_WARN : HLB_LOG_ERROR);

	if (!err->file) {
		say_line(prefix, "%s\n", err->msg);
		return;
	}
	fputs(prefix, stderr);
	fputs(cli_path(err->file), stderr);
	if (err->line > 0)
		fprintf(stderr, ":%d:%d: %s: %s\n", err->line, err->column, kind, err->msg);
	else
		fprintf(stderr, ": %s: %s\n", kind, err->msg);
}

void cli_print_error(const struct hashlb_error *err)
{
	print_diagnostic(err, "error");
}

void cli_print_warning(const struct hashlb_error *warning)
{
	print_diagnostic(warning, "warning");
}

void cli_print_config_errors(const struct hashlb_error *err, const struct hashlb_error_list *list)
{
	size_t shown = list->n < CLI_ERRORS_SHOWN ? list->n : CLI_ERRORS_SHOWN;

	if (!list->n) {
		cli_print_error(err);
		return;
	}
	for (size_t i = 0; i < shown; i++)
		cli_print_error(&list->v[i]);
	if (list->total < 2)
		return;
	if (list->total > shown)
		cli_error("and %zu more error%s\n", list->total - shown,
			  hlb_plural(list->total - shown));
	cli_error("%zu errors\n", list->total);
}

int cli_config_load(const char *path, unsigned int flags, struct hashlb_config **ret_config)
{
	struct hashlb_error err = { 0 };
	struct hashlb_error_list errs = { 0 };
	int r = hashlb_config_load_list(path, flags, ret_config, &err, &errs);

	if (r < 0)
		cli_print_config_errors(&err, &errs);
	hashlb_error_list_free(&errs);
	return r;
}

/*
 * What getopt_long() refused (it returned <c>, '?' or ':', with opterr 0
 * and <optstring> starting with ':'), said as cli_error() says the rest,
 * with the option as the user typed it. A long option always takes its
 * argv element with it, so argv[optind - 1] is the one refused; a short one
 * may be refused in the middle of a bundle ("-zq"), so it is named by optopt.
 */
static void bad_option(int c, char **argv, const char *optstring, const struct option *longopts)
{
	const char *arg = argv[optind - 1];
	int len = (int)strcspn(arg, "=");
	bool known = optopt > 0xff || (optopt > 0 && optopt != ':' && strchr(optstring, optopt));

	/*
	 * A long option without a short form may still return a letter (run's
	 * --pin is 'P'): "--pin=1" is that option given an argument, not an
	 * unknown "-P". Only a "--NAME=" argv element can be one, and NAME (or
	 * its abbreviation) must be the option whose value getopt put in optopt.
	 */
	if (!known && optopt > 0 && strncmp(arg, "--", 2) == 0 && arg[len] == '=')
		for (const struct option *o = longopts; o->name && !known; o++)
			known = o->val == optopt && o->has_arg == no_argument &&
				strncmp(o->name, arg + 2, (size_t)len - 2) == 0;

	if (c == ':') { /* a missing argument: at the end of argv, long or short */
		if (strncmp(arg, "--", 2) == 0)
			cli_error("option '%.*s' requires an argument\n", len, arg);
		else
			cli_error("option '-%c' requires an argument\n", optopt);
	} else if (optopt && known) { /* "--json=x": an argument to a long option without */
		cli_error("option '%.*s' takes no argument\n", len, arg);
	} else if (optopt) {
		cli_error("unrecognized option '-%c'\n", optopt);
	} else {
		int n = 0;

		/* getopt_long takes a unique abbreviation: "--s" may be several */
		for (const struct option *o = longopts; o->name; o++)
			n += strncmp(o->name, arg + 2, (size_t)len - 2) == 0;
		if (n < 2) {
			cli_error("unrecognized option '%.*s'\n", len, arg);
			return;
		}
		cli_error("option '%.*s' is ambiguous; possibilities:", len, arg);
		for (const struct option *o = longopts; o->name; o++)
			if (strncmp(o->name, arg + 2, (size_t)len - 2) == 0)
				fprintf(stderr, " '--%s'", o->name);
		fputc('\n', stderr);
	}
}

/*
 * Whether option <c> (named <name>), given <arg>, was given a value before, said if so (a
 * usage error, where before the last one was taken and the first dropped unsaid: "-s a -s b"),
 * unless it is one of <repeatable>, which adds to a list.
 */
static bool given_twice(int c, const char *name, const char *arg, const int *repeatable,
			const struct option *longopts)
{
	bool config = false;

	for (const int *r = repeatable; r && *r; r++)
		if (*r == c)
			return false;
	if (c < 0 || c >= OPT_CODES)
		return false;
	if (!opt_given[c]) {
		opt_given[c] = arg;
		return false;
	}
	for (const struct option *o = longopts; o->name; o++)
		config |= o->val == c && !strcmp(o->name, "config");
	/* every command reads one config file */
	cli_error("option %s given twice ('%s', then '%s'): give %s\n", name, opt_given[c], arg,
		  config ? "one config file" : "it once");
	return true;
}

int cli_getopt(int argc, char **argv, const char *optstring, const struct option *longopts,
	       const int *repeatable, char *ret_name)
{
	const char *s = optstring;
	int li = -1, c;

	opterr = 0;
	c = getopt_long(argc, argv, optstring, longopts, &li);
	if (c == -1)
		return -1;
	if (s[0] == '+' || s[0] == '-')
		s++;
	if (c == '?' || (c == ':' && s[0] == ':')) {
		bad_option(c, argv, s, longopts);
		return '?';
	}
	if (li >= 0)
		snprintf(ret_name, CLI_OPT_NAME_MAX, "--%s", longopts[li].name);
	else
		snprintf(ret_name, CLI_OPT_NAME_MAX, "-%c", c);
	if (optarg && given_twice(c, ret_name, optarg, repeatable, longopts))
		return '?';
	return c;
}
