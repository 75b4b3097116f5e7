// SPDX-License-Identifier: MIT
/* hashlb: the command and its subcommands. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "runtime/signals.h"

static const struct cli_command commands[] = {
	{ "table", "build and show a lookup table of backends given on the command line", cmd_table,
	  false },
	{ "lookup", "print the backend and preference list for a client address", cmd_lookup,
	  false },
	{ "check", "validate a configuration file and show each service's table", cmd_check,
	  false },
	{ "run", "run the load balancer (the daemon) on a configuration file", cmd_run, true },
	{ "steer", "steer a VIP to backends in the kernel (XDP/tc) or show its counters", cmd_steer,
	  true },
	{ "ctl", "talk to a running hashlb: status, metrics, set, lookup, reload", cmd_ctl, false },
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

/* The command named <name>, or NULL. */
static const struct cli_command *command_find(const char *name)
{
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(name, commands[i].name) == 0)
			return &commands[i];
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: hashlb COMMAND [OPTIONS...]\n"
		   "\n"
		   "hashlb is an L4 (TCP) load balancer that keeps each client on the same\n"
		   "backend through a consistent-hash table (ring-hash or Maglev).\n"
		   "\n"
		   "Commands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n"
		   "Options:\n"
		   "  -h, --help     show this text\n"
		   "  -V, --version  show the version\n"
		   "\n"
		   "Run 'hashlb COMMAND --help' (or 'hashlb help COMMAND') for the options of\n"
		   "a command.\n");
}

int cli_parse_u64(const char *s, uint64_t max, uint64_t *ret)
{
	unsigned long long v;
	char *end;
	int base = 10;

	/* Decimal, or hex after 0x, as the config reads "010" (ten: YAML 1.2,
	 * not octal eight): the same number on the command line and in the
	 * config must give the same seed, weight and table. strtoull would
	 * also take leading blanks and a sign: not a number here. */
	if (!s || !*s)
		return -EINVAL;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	if (!(base == 16 ? isxdigit((unsigned char)*s) : isdigit((unsigned char)*s)))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, base);
	if (errno || *end || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

int cli_parse_prefix_len(const char *name, const char *arg, bool v6, struct hashlb_src_prefix *p)
{
	uint64_t len;

	if (cli_parse_u64(arg, v6 ? 128 : 32, &len) < 0 || len == 0) {
		cli_bad_value(name, arg, v6 ? "1..128" : "1..32");
		return -EINVAL;
	}
	if (v6)
		p->v6 = (uint8_t)len;
	else
		p->v4 = (uint8_t)len;
	return 0;
}

void cli_print_json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/*
 * A stop signal while hashlb starts: the end, as by its default action, so
 * that whoever started hashlb sees it killed by that signal as ever; as by
 * SIGTERM for SIGQUIT (its default action is a core dump). The kernel drops
 * a signal whose action is the default sent to the init of a PID namespace
 * (a container's PID 1), its own raise() too: there it exits 128 + the
 * signal's number, the status a shell gives a process the signal killed.
 */
static void stop_now(int sig)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigset_t one;

	if (sig == SIGQUIT)
		sig = SIGTERM;
	sigaction(sig, &dfl, NULL);
	raise(sig); /* held: this handler blocks every signal */
	sigemptyset(&one);
	sigaddset(&one, sig);
	sigprocmask(SIG_UNBLOCK, &one, NULL);
	_exit(128 + sig);
}

/* The signal mask hashlb inherited, before main() held the signals of hashlb run and steer. */
static sigset_t inherited_mask;

/*
 * main()'s first statement: for command <name> that takes its signals (hashlb
 * run, steer), hold run's stops and commands, and so steer's (a subset), until
 * the command takes them (cli_start_signals()). Before, they kept their default
 * action until the command's first statement: a SIGHUP (a reload) or a SIGUSR1
 * then killed hashlb run, and as PID 1 of a container a SIGTERM was dropped,
 * hashlb went on to run. Only the instants from exec to here (the dynamic
 * loader) are left. Anything else keeps the mask it inherited, unheld: hashlb
 * --version, --help, or a command line refused, held too, exited 0 or 2 on a
 * SIGTERM sent as it started, where it was killed.
 */
static void signals_hold(const char *name)
{
	const struct cli_command *cmd = name ? command_find(name) : NULL;
	sigset_t set;

	sigemptyset(&set);
	if (cmd && cmd->takes_signals) {
		hlb_sigset_add_stops(&set);
		hlb_sigset_add_commands(&set);
	}
	sigprocmask(SIG_BLOCK, &set, &inherited_mask);
}

void cli_start_signals(const sigset_t *stops, const sigset_t *held)
{
	struct sigaction stop = { .sa_handler = stop_now };
	sigset_t both, mask, taken = *stops;

	/* stops held too until each has its handler: none takes its default
	 * action between the two (held already by main(), unless a caller
	 * came another way) */
	sigorset(&both, stops, held);
	sigprocmask(SIG_BLOCK, &both, NULL);
	sigfillset(&stop.sa_mask);
	hlb_sigset_del_ignored(&taken);
	sigorset(&mask, &inherited_mask, held);
	for (int sig = 1; sig < SIGRTMIN; sig++) {
		if (sigismember(&taken, sig))
			sigaction(sig, &stop, NULL);
		if (sigismember(stops, sig))
			sigdelset(&mask, sig);
	}
	sigprocmask(SIG_SETMASK, &mask, NULL);
}

void cli_release_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	hlb_sigset_add_commands(&set);
	for (int sig = 1; sig < SIGRTMIN; sig++)
		if (sigismember(&inherited_mask, sig))
			sigdelset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
}

/* The errno of the first write(2) to stdout that failed, 0 if none did. */
static int out_errno;

/*
 * stdout's writes: write(2) to descriptor 1, the first failure's errno kept.
 * stdio drops it: a write past its buffer (a ctl answer, a long check
 * report) went straight out and failed, the buffer was left empty, and
 * the fflush() at exit succeeded with errno 0; "No space left on device"
 * came out "Input/output error".
 */
static ssize_t out_write(void *cookie, const char *buf, size_t size)
{
	size_t done = 0;

	(void)cookie;
	while (done < size) {
		ssize_t n = write(STDOUT_FILENO, buf + done, size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (!out_errno)
				out_errno = n < 0 ? errno : EIO;
			break;
		}
		done += (size_t)n;
	}
	return (ssize_t)done; /* short: the stream's error flag set */
}

/*
 * stdout through out_write(), line-buffered on a terminal as stdio's own;
 * left as it is if that stream cannot be made (glibc's stdout is a
 * variable that may be set, as its manual says).
 */
static void stdout_open(void)
{
	static char buf[BUFSIZ];
	FILE *f = fopencookie(NULL, "w", (cookie_io_functions_t){ .write = out_write });

	if (!f)
		return;
	setvbuf(f, buf, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, sizeof(buf));
	stdout = f;
}

/*
 * <status>, or 1 if what was printed to stdout did not all reach it (a full
 * disk, a closed pipe's reader gone): "hashlb lookup ... > out" must not
 * exit 0 with the answers lost, nor "hashlb check > report" with the report.
 */
static int output_status(int status)
{
	int e;

	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return status;
	e = out_errno ? out_errno : errno ? errno : EIO;
	cli_error("cannot write the output: %s\n", strerror(e));
	return status ? status : 1;
}

/*
 * The exit status <status> of command <cmd>: after a usage error (2, its
 * line printed) the hint where to look, one line, as GNU tools say it; not
 * the whole manual, which would bury the line that says what is wrong.
 */
static int command_status(const char *cmd, int status)
{
	if (status == 2)
		fprintf(stderr, "Run 'hashlb %s --help' for the options.\n", cmd);
	return output_status(status);
}

/*
 * A standard descriptor closed by whoever started hashlb (`2>&-`, a
 * supervisor that closes them) is opened on /dev/null: the next descriptor
 * hashlb opened took its number, and the log went there (stderr was a
 * signalfd, an eventfd, and could be a socket to a client or a backend).
 */
static void std_fds_open(void)
{
	for (int fd = 0; fd < 3; fd++) {
		int null;

		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		null = open("/dev/null", O_RDWR);
		if (null >= 0 && null != fd) { /* not the lowest free number: cannot be */
			dup2(null, fd);
			close(null);
		}
	}
}

int main(int argc, char **argv)
{
	/*
	 * stderr line-buffered: each line in one write(). Unbuffered, as stdio
	 * leaves it, an error line went out in pieces (a config error's path a
	 * byte a write), and a daemon's stderr is often shared: during an
	 * upgrade in place, the new process's config error and the old one's
	 * log lines (written whole by log.c) interleaved within a line.
	 */
	static char errbuf[16384];
	const struct cli_command *cmd;
	bool version;

	signals_hold(argc >= 2 ? argv[1] : NULL);
	std_fds_open();
	stdout_open();
	setvbuf(stderr, errbuf, _IOLBF, sizeof(errbuf));
	if (argc < 2) {
		cli_error("no command given\n");
		fprintf(stderr, "Run 'hashlb --help' for the commands.\n");
		return 2;
	}
	if (strcmp(argv[1], "help") == 0 && argc == 3 &&
	    (strcmp(argv[2], "help") == 0 || strcmp(argv[2], "--help") == 0 ||
	     strcmp(argv[2], "-h") == 0)) {
		/* help's own manual is hashlb's */
		usage(stdout);
		return output_status(0);
	}
	if (strcmp(argv[1], "help") == 0 && argc >= 3) {
		/* "hashlb help COMMAND": COMMAND's manual, as "hashlb COMMAND --help" */
		char *help_argv[] = { argv[2], "--help", NULL };

		cmd = command_find(argv[2]);
		if (!cmd || argc > 3) {
			if (cmd)
				cli_error("unexpected argument '%s'\n", argv[3]);
			else
				cli_error("unknown command '%s'\n", argv[2]);
			fprintf(stderr, "Run 'hashlb --help' for the commands.\n");
			return 2;
		}
		cli_set_command(cmd->name);
		return command_status(cmd->name, cmd->run(2, help_argv));
	}
	version = strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0;
	if (version || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		/* they take nothing: "hashlb --version x" is refused, as every
		 * command refuses an argument it does not take */
		if (argc > 2) {
			cli_error("unexpected argument '%s'\n", argv[2]);
			fprintf(stderr, "Run 'hashlb --help' for the commands.\n");
			return 2;
		}
		if (version)
			printf("hashlb %s\n", HASHLB_VERSION);
		else
			usage(stdout);
		return output_status(0);
	}
	cmd = command_find(argv[1]);
	if (cmd) {
		cli_set_command(cmd->name);
		return command_status(cmd->name, cmd->run(argc - 1, argv + 1));
	}
	if (argv[1][0] == '-')
		cli_error("unrecognized option '%s'\n", argv[1]);
	else
		cli_error("unknown command '%s'\n", argv[1]);
	fprintf(stderr, "Run 'hashlb --help' for the commands.\n");
	return 2;
}
