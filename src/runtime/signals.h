/* SPDX-License-Identifier: MIT */
/*
 * The process's signal dispositions as it inherited them, read by the daemon
 * (hashlb run) and by the CLI's commands that run until stopped (hashlb run,
 * hashlb steer) alike.
 */
#ifndef HASHLB_RUNTIME_SIGNALS_H
#define HASHLB_RUNTIME_SIGNALS_H

#include <signal.h>

/*
 * Leave out of <set> each signal whose action is to ignore it, SIGTERM
 * excepted: the one rule for the signals hashlb takes (a handler, a
 * signalfd, sigwait()). One inherited ignored stays ignored for the whole
 * life of the process: a POSIX shell starts a script's background job with
 * SIGINT and SIGQUIT ignored so that a Ctrl-C at the terminal spares it,
 * nohup ignores SIGHUP; taking a blocked one (a signalfd, sigwait() take a
 * blocked signal even ignored) undid what they asked. SIGTERM is not a
 * shell's to ignore for a job: it is how kill, systemd and docker stop a
 * service, and is always taken.
 */
void hlb_sigset_del_ignored(sigset_t *set);

/*
 * hashlb run's signals, added to <set>: one list for the CLI, which holds them while the
 * config loads (cmd_run()), and the daemon, whose signalfd takes them once it runs; a
 * signal held in the first and missing from the second would stay pending for good.
 * The stops, which drain: SIGTERM, SIGINT, and SIGQUIT as SIGTERM (nginx's graceful
 * stop, its Docker image's STOPSIGNAL), not a core dump cutting every connection.
 */
void hlb_sigset_add_stops(sigset_t *set);
/* The commands: SIGHUP reloads, SIGUSR2 upgrades, SIGUSR1 is logged and ignored (its
 * default action would kill the process; nginx and HAProxy teach logrotate to send it). */
void hlb_sigset_add_commands(sigset_t *set);

#endif
