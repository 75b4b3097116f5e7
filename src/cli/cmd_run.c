// SPDX-License-Identifier: MIT
/* hashlb run: the daemon. */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <netinet/in.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <limits.h>
#include <unistd.h>

#include "cli.h"
#include "hashlb/config.h"
#include "control/plug.h"
#include "run_steer.h"
#include "runtime/daemon.h"
#include "runtime/log.h"
#include "runtime/signals.h"

static void usage(FILE *f)
{
	fprintf(f, "NAME\n"
		   "  hashlb run - run the load balancer\n"
		   "\n"
		   "SYNOPSIS\n"
		   "  hashlb run -c FILE [--workers N|auto] [--pin] [--buffers N]\n"
		   "             [--buffer-size B] [--splice-after B|off] [--splice-pipes N]\n"
		   "             [--pipe-size B] [--busy-poll US] [--max-connections N]\n"
		   "             [--admin ADDR:PORT|unix:/PATH|off] [--log-level LEVEL]\n"
		   "\n"
		   "DESCRIPTION\n"
		   "  Loads FILE (as hashlb check does), listens on every service's address\n"
		   "  and forwards each TCP connection to the backend that the service's\n"
		   "  consistent-hash table gives the client's tuple. If that backend refuses\n"
		   "  or does not answer within timeouts.connect, the next backend of the\n"
		   "  client's preference list is tried, up to connect_retries times.\n"
		   "\n"
		   "  One worker thread per CPU (workers: auto), each with its own io_uring\n"
		   "  and its own SO_REUSEPORT socket per listen address.\n"
		   "\n"
		   "  Logs go to stderr in logfmt (ts=... level=... msg=... key=value).\n"
		   "\n"
		   "SIGNALS\n"
		   "  SIGHUP          reload FILE: services and listeners are added and\n"
		   "                  removed, unchanged listen addresses stay open, and\n"
		   "                  established connections keep their backend. A config\n"
		   "                  that does not load is logged and the old one kept.\n"
		   "  SIGTERM SIGINT  stop accepting, let established connections finish for\n"
		   "  SIGQUIT         up to their own service's timeouts.drain (each closed\n"
		   "                  at its own deadline; drain: never waits for them to\n"
		   "                  end, the service manager's stop timeout the only\n"
		   "                  bound), then exit 0 once the last one has gone. With\n"
		   "                  steering: kernel the kernel path's established flows\n"
		   "                  drain too: its program stays, new connections\n"
		   "                  refused, until its flows end or the service's\n"
		   "                  timeouts.drain. A second signal closes the remaining\n"
		   "                  connections, and detaches it, at once. (SIGQUIT:\n"
		   "                  nginx's graceful stop, not a core dump.)\n"
		   "  SIGUSR2         upgrade in place: run the executable now at this one's\n"
		   "                  path again, with the same command line (FILE by the\n"
		   "                  absolute path reloads read), hand it the listening\n"
		   "                  sockets, and once it accepts, drain and exit\n"
		   "                  as on SIGTERM (under systemd, MAINPID= names the new\n"
		   "                  process). If it cannot start (e.g. FILE no longer\n"
		   "                  loads), this one logs why and goes on serving. Refused\n"
		   "                  as PID 1 of a container (its exit would kill the new\n"
		   "                  one): restart the container, or run under an init.\n"
		   "  SIGUSR1         logged and ignored: hashlb has no log file to reopen\n"
		   "                  (nginx's meaning), nor a soft stop (HAProxy's):\n"
		   "                  SIGTERM is that.\n"
		   "  A SIGHUP, SIGUSR2 or SIGUSR1 that arrives while hashlb starts waits\n"
		   "  until it runs; if it never runs (a usage error, FILE that does not\n"
		   "  load), the signal is dropped and the exit status is the failure's\n"
		   "  (2, 1). A SIGTERM, SIGINT or SIGQUIT that arrives while FILE\n"
		   "  still loads ends it at once, with nothing to drain yet (SIGQUIT as\n"
		   "  SIGTERM does: no core dump; as PID 1 of a container, exit 128 + the\n"
		   "  signal's number); one that arrives later in the start (an old\n"
		   "  hashlb's sockets being taken over) stops it once it runs. A SIGINT\n"
		   "  or SIGQUIT inherited ignored (a script's background job) stays\n"
		   "  ignored; SIGTERM is always taken.\n"
		   "\n"
		   "UPGRADES\n"
		   "  SIGUSR2 above. Or start the new hashlb run on the same config beside\n"
		   "  the running one, then send the old one SIGTERM. Through the admin\n"
		   "  endpoint (GET /sockets: SCM_RIGHTS on a Unix socket, pidfd_getfd over\n"
		   "  TCP, which needs the right to ptrace the old one) the new one takes\n"
		   "  the old one's listening sockets over and listens on the very same\n"
		   "  sockets: no connection is lost, not even one waiting to be accepted.\n"
		   "  It waits for an old one slow to answer until 10 s pass without a byte\n"
		   "  of the answer (stopped, stuck), then binds its own as without admin.\n"
		   "  With admin: off it binds its own beside them, and the old ones' queued\n"
		   "  connections move to it only with net.ipv4.tcp_migrate_req=1.\n"
		   "\n"
		   "OPTIONS\n"
		   "  -c, --config FILE    the configuration (required); reloads read FILE\n"
		   "                       again, and the log, status and admin answers name\n"
		   "                       it by its absolute path (links kept, not resolved)\n"
		   "  -w, --workers N      worker threads, 1..256, or auto (one per CPU, at most\n"
		   "                       256), overriding the config's workers\n"
		   "      --pin            pin worker i to the i-th CPU the process may use\n"
		   "      --buffers N      receive buffers per worker, shared by its connections,\n"
		   "                       a power of two, 2..32768 (default 256); a connection\n"
		   "                       holds at most two per direction while data is in\n"
		   "                       flight, none while idle, none while its destination\n"
		   "                       does not read (its data is copied out, up to four\n"
		   "                       times the buffers' bytes); when all are in use,\n"
		   "                       receiving waits\n"
		   "      --buffer-size B  bytes per buffer, 512..1048576 (default 65536): the\n"
		   "                       largest chunk forwarded in one send\n"
		   "      --splice-after B a direction that has forwarded B bytes in large reads\n"
		   "                       (of 16 KiB or a whole buffer: a bulk stream) moves\n"
		   "                       to splice: socket to pipe to socket, no copy through\n"
		   "                       hashlb (default 262144; off: never). Its pipe\n"
		   "                       (64 KiB, --pipe-size) is then its buffer\n"
		   "      --splice-pipes N at most N directions spliced at once, 1..8192\n"
		   "                       (default 1024); each pipe takes two file\n"
		   "                       descriptors, over the cap a direction stays on\n"
		   "                       buffers\n"
		   "      --pipe-size B    bytes per splice pipe, 4096..1048576, rounded up to\n"
		   "                       a power of two of pages (default: the kernel's,\n"
		   "                       65536)\n"
		   "      --busy-poll US   after a turn that found work, a worker looks for\n"
		   "                       the next completion for up to US microseconds\n"
		   "                       (0..1000) before it sleeps (default 0: sleeps at\n"
		   "                       once). Like HAProxy's busy-polling: more CPU for\n"
		   "                       the worker, fewer wake-ups for the peers' CPUs\n"
		   "      --max-connections N\n"
		   "                       at most N client connections at once over all\n"
		   "                       workers (default: what the fd limit allows, two\n"
		   "                       descriptors each, logged at start as\n"
		   "                       max_connections, and in hashlb ctl status with\n"
		   "                       the fd limit); at the cap the listeners pause\n"
		   "                       and new clients wait in the backlog\n"
		   "      --admin A        the admin endpoint's address (ADDR:PORT in numbers,\n"
		   "                       or unix:/PATH), or off, overriding the config's\n"
		   "                       admin (ctl --admin takes a host name too)\n"
		   "      --log-level L    debug, info (default), warn or error\n"
		   "  -h, --help           show this text\n"
		   "\n"
		   "EXIT STATUS\n"
		   "  0 after a clean shutdown, 1 if the configuration is invalid or the\n"
		   "  daemon cannot start (e.g. an address in use), or after a worker\n"
		   "  failed (its io_uring did): it reset its connections and hashlb\n"
		   "  stopped as on SIGTERM, for a service manager to restart it (with\n"
		   "  steering: kernel the program left attached, not drained, for the\n"
		   "  restart to take over),\n");
	fputs(CLI_EXIT_USAGE_HELP, f);
	fprintf(f,
		"  But --splice-pipes or --pipe-size with --splice-after off, which size\n"
		"  nothing, only log a warning: a command line that started hashlb before\n"
		"  (a unit file, the upgrade in place re-running it) must start it again.\n"
		"\n" CLI_ERRORS_HELP "EXAMPLES\n"
		"  hashlb run -c configs/demo.yaml\n"
		"  hashlb run -c /etc/hashlb/hashlb.yaml --workers 1 --pin\n",
		"run", "-w or --workers", CLI_ERRORS_CONFIG_LIST, "run");
}

/*
 * <path> as the daemon names it, into <buf> (PATH_MAX bytes): absolute, the working directory
 * at start before a relative one, so that its log lines, status and admin answers say which
 * file wherever they are read from ("config lb.yaml" did not), and ctl -c FILE can tell
 * whether FILE is it. Its symbolic links are kept, not resolved (realpath()): each reload
 * reads the path again, and one that names a link swapped to a new file (current.yaml ->
 * v2.yaml) must read the new file. <path> itself if the directory cannot be read or the
 * two do not fit.
 */
static const char *path_absolute(const char *path, char *buf)
{
	const char *rel = path;
	size_t n, len;

	if (path[0] == '/' || !getcwd(buf, PATH_MAX))
		return path;
	while (rel[0] == '.' && rel[1] == '/') /* ./lb.yaml: lb.yaml */
		for (rel += 2; *rel == '/'; rel++)
			;
	n = strlen(buf);
	if (buf[n - 1] != '/')
		buf[n++] = '/'; /* getcwd() wrote n + 1 of PATH_MAX bytes */
	len = strlen(rel);
	if (n + len >= PATH_MAX)
		return path;
	memcpy(buf + n, rel, len + 1);
	return buf;
}

/*
 * In <again>, the command line an upgrade in place runs, config path <path> (an argument
 * of it, or the end of one: -cFILE, --config=FILE) replaced by <abs_path>, the one reloads
 * read: the new process read the path as written, from the working directory of the
 * moment (a directory renamed since, or a relative path meant for the start's), where
 * the running one reads the absolute path fixed at start. <buf>, PATH_MAX + 16 bytes,
 * holds an argument that is more than the path; left as written if it does not fit.
 */
static void again_config_absolute(char **again, const char *path, const char *abs_path, char *buf)
{
	if (path == abs_path)
		return;
	for (size_t i = 0; again[i]; i++) {
		size_t pre = (size_t)((uintptr_t)path - (uintptr_t)again[i]);

		if ((uintptr_t)path < (uintptr_t)again[i] || pre > strlen(again[i]))
			continue;
		if (pre == 0) {
			again[i] = (char *)abs_path;
		} else if (pre + strlen(abs_path) < PATH_MAX + 16) {
			memcpy(buf, again[i], pre);
			strcpy(buf + pre, abs_path);
			again[i] = buf;
		}
		return;
	}
}

static int run(int argc, char **argv, char **again)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "workers", required_argument, NULL, 'w' },
		{ "pin", no_argument, NULL, 'P' },
		{ "log-level", required_argument, NULL, 'L' },
		{ "buffers", required_argument, NULL, 'B' },
		{ "admin", required_argument, NULL, 'A' },
		{ "buffer-size", required_argument, NULL, 'S' },
		{ "splice-after", required_argument, NULL, 'T' },
		{ "splice-pipes", required_argument, NULL, 'p' },
		{ "pipe-size", required_argument, NULL, 'Z' },
		{ "busy-poll", required_argument, NULL, 'Y' },
		{ "max-connections", required_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct hlb_daemon_opts dopts = { 0 };
	struct hashlb_config *cfg = NULL;
	struct hashlb_error err = { 0 };
	struct hashlb_error_list errs = { 0 };
	struct hlb_daemon *d = NULL;
	struct hlb_control_plug *plug = NULL;
	struct run_steer *steer = NULL;
	const char *path = NULL, *admin = NULL, *abs_path;
	char abs_buf[PATH_MAX], again_buf[PATH_MAX + 16];
	/* --splice-pipes and --pipe-size, once given: they size the splice pipes */
	const char *pipe_opts[2] = { NULL, NULL };
	struct sockaddr_storage admin_addr;
	socklen_t admin_len = 0;
	enum hlb_log_level level;
	char name[CLI_OPT_NAME_MAX];
	bool workers_given = false;
	uint64_t v;
	int c, r;

	dopts.argv = again;
	optind = 1;
	while ((c = cli_getopt(argc, argv, ":c:w:h", opts, NULL, name)) != -1) {
		switch (c) {
		case 'c':
			if (cli_config_path(name, optarg, &path))
				return 2;
			break;
		case 'w':
			/* auto as the config's key writes it: a unit's drop-in can then
			 * undo a file's "workers: 4" without knowing the host's CPUs */
			workers_given = true;
			if (strcmp(optarg, "auto") == 0)
				break;
			if (cli_parse_u64(optarg, HLB_WORKERS_MAX, &v) < 0 || v == 0) {
				_Static_assert(HLB_WORKERS_MAX == 256, "the message below");
				cli_bad_value(name, optarg, "1..256, or auto");
				return 2;
			}
			dopts.workers = (uint32_t)v;
			break;
		case 'P':
			dopts.pin_cpus = true;
			break;
		case 'A':
			admin = optarg;
			if (cli_admin_parse(name, admin, NULL, &admin_addr, &admin_len) < 0)
				return 2;
			break;
		case 'B':
			if (cli_parse_u64(optarg, 32768, &v) < 0 || v < 2 || (v & (v - 1))) {
				cli_bad_value(name, optarg, "a power of two, 2..32768");
				return 2;
			}
			dopts.buf_count = (uint32_t)v;
			break;
		case 'S':
			if (cli_parse_u64(optarg, 1u << 20, &v) < 0 || v < 512) {
				cli_bad_value(name, optarg, "512..1048576");
				return 2;
			}
			dopts.buf_size = (uint32_t)v;
			break;
		case 'T':
			if (strcmp(optarg, "off") == 0) {
				dopts.splice_after = UINT32_MAX;
				break;
			}
			if (cli_parse_u64(optarg, UINT32_MAX - 1, &v) < 0 || v == 0) {
				cli_bad_value(name, optarg, "a byte count or off");
				return 2;
			}
			dopts.splice_after = (uint32_t)v;
			break;
		case 'p':
			pipe_opts[0] = "--splice-pipes";
			if (cli_parse_u64(optarg, 8192, &v) < 0 || v == 0) {
				cli_bad_value(name, optarg, "1..8192");
				return 2;
			}
			dopts.splice_pipes = (uint32_t)v;
			break;
		case 'Z':
			pipe_opts[1] = "--pipe-size";
			if (cli_parse_u64(optarg, 1u << 20, &v) < 0 || v < 4096) {
				cli_bad_value(name, optarg, "4096..1048576");
				return 2;
			}
			dopts.pipe_size = (uint32_t)v;
			break;
		case 'Y':
			if (cli_parse_u64(optarg, 1000, &v) < 0) {
				cli_bad_value(name, optarg, "0..1000 microseconds");
				return 2;
			}
			dopts.busy_poll_us = (uint32_t)v;
			break;
		case 'M':
			if (cli_parse_u64(optarg, UINT32_MAX, &v) < 0 || v == 0) {
				cli_bad_value(name, optarg, "1..4294967295");
				return 2;
			}
			dopts.max_conns = v;
			break;
		case 'L':
			if (hlb_log_level_parse(optarg, &level) < 0) {
				cli_bad_value(name, optarg, "debug, info, warn or error");
				return 2;
			}
			hlb_log_set_level(level);
			break;
		case 'h':
			cli_release_signals();
			usage(stdout);
			return 0;
		default:
			return 2;
		}
	}
	if (cli_config_only(path, argc, argv, optind))
		return 2;
	/* Not a usage error, unlike elsewhere: a command line that ran before
	 * (a unit file, an upgrade in place re-running it) must still start. */
	for (size_t i = 0; i < 2 && dopts.splice_after == UINT32_MAX; i++)
		if (pipe_opts[i])
			hlb_log(HLB_LOG_WARN,
				"option ignored: nothing is spliced with --splice-after off",
				"option=%s", pipe_opts[i]);
	/* with --admin the file's admin address is not the one to check */
	/* every error, as hashlb check lists them: a unit that fails to start says all */
	r = hashlb_config_load_list(path, admin ? HASHLB_LOAD_ADMIN_GIVEN : 0, &cfg, &err, &errs);
	if (r < 0)
		cli_print_config_errors(&err, &errs);
	hashlb_error_list_free(&errs);
	if (r < 0)
		return 1;
	if (workers_given) { /* 0: auto, one per CPU */
		cfg->workers = dopts.workers;
		cfg->workers_override = true;
	}
	if (admin && cli_admin_apply(cfg, path, admin, &admin_addr, admin_len) < 0) {
		hashlb_config_free(cfg);
		return 1;
	}
	abs_path = path_absolute(path, abs_buf);
	again_config_absolute(again, path, abs_path, again_buf);
	r = hlb_daemon_new(cfg, abs_path, &dopts, &d, &err);
	if (r < 0) {
		/* said here, where the command line has it: the path as written there */
		if (err.file == abs_path)
			err.file = path;
		cli_print_error(&err);
		return 1;
	}
	/* The control plane: health checks, rebuilds, admin endpoint, reloads. */
	r = hlb_control_plug(d, &plug);
	if (r < 0) {
		cli_error("out of memory\n");
		hlb_daemon_free(d);
		return 1;
	}
	/* Services with steering: kernel: the same tables, into the kernel. */
	if (run_steer_new(cfg, d, hlb_daemon_taken_from(d), &steer) < 0 ||
	    hlb_control_plug_subscribe(plug, run_steer_publish, steer) < 0) {
		cli_error("out of memory\n");
		hlb_daemon_free(d);
		hlb_control_plug_free(plug);
		run_steer_free(steer);
		return 1;
	}
	run_steer_set_plug(steer, plug);
	hlb_control_plug_on_reload(plug, run_steer_sync, steer);
	hlb_control_plug_on_stopping(plug, run_steer_stopping, steer);
	hlb_control_plug_on_old_stopped(plug, run_steer_old_stopped, steer);
	hlb_control_plug_on_steer_stats(plug, run_steer_stats, steer);
	hlb_control_plug_on_steer_fits(plug, run_steer_fits, steer);
	r = hlb_daemon_run(d, &err);
	if (r < 0)
		cli_print_error(&err);
	if (hlb_daemon_handed_over(d))
		run_steer_handed_over(steer);
	else
		run_steer_stopped(steer);
	/* a worker failed: a restart (systemd's Restart=on-failure) brings it back */
	if (r == 0 && hlb_daemon_failed(d))
		r = -EIO;
	hlb_daemon_free(d);
	hlb_control_plug_free(plug);
	run_steer_free(steer);
	return r < 0 ? 1 : 0;
}

int cmd_run(int argc, char **argv)
{
	sigset_t stops, held;
	char **again;
	int r;

	/* SIGHUP and SIGUSR2 terminate a process by default: held from the
	 * start (main()'s first statement), so one that arrives while the config loads (its names
	 * may take seconds to resolve) reloads or upgrades once the daemon runs instead. SIGUSR1
	 * too, which the daemon logs and ignores: a logrotate script's (nginx's reopen) killed a
	 * hashlb still loading, such as the new process of an upgrade in place, failing the
	 * upgrade.
	 *
	 * SIGTERM, SIGINT and SIGQUIT, which the daemon drains on, end a hashlb
	 * still loading at once: it has no connection yet. SIGQUIT as SIGTERM:
	 * its default action, a core dump, is a failure to a service manager
	 * (systemd: code=dumped, a restart with Restart=on-failure), where the
	 * SIGTERM it stands for (nginx's graceful stop) is a clean stop. And by
	 * a handler, not by their default action: as a container's PID 1 the
	 * kernel dropped them, and hashlb went on to run, docker stop's SIGTERM
	 * lost. Held by main() until here: one sent before is taken now. One
	 * inherited ignored stays so (the daemon leaves it out). */
	sigemptyset(&held);
	hlb_sigset_add_commands(&held);
	sigemptyset(&stops);
	hlb_sigset_add_stops(&stops);
	cli_start_signals(&stops, &held);

	/* Blocks of 128 KiB and more (a default Maglev table holds 128-384 KiB)
	 * are mmap()ed, and unmapped when freed, always. glibc's default moves
	 * that threshold up to the size of each such block freed, so after a
	 * reload or two the tables came from the heap, and the heap kept the
	 * peak of a reload, the old tables and the new, for good. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);

	/* the command line an upgrade in place runs again (getopt reorders argv) */
	again = calloc((size_t)argc + 2, sizeof(*again));
	if (!again) {
		cli_error("out of memory\n");
		return 1;
	}
	/* argv[0] as it was given (glibc keeps it as program_invocation_name): the new process
	 * shows the command line that started the old one, so that ps, pgrep -f and a
	 * monitor's process match find it after an upgrade as before (it was "hashlb") */
	again[0] = program_invocation_name;
	memcpy(again + 1, argv, sizeof(*argv) * (size_t)argc);
	r = run(argc, argv, again);
	free(again);
	return r;
}
