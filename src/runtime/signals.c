// SPDX-License-Identifier: MIT
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "signals.h"

/* <sig>'s action is to ignore it. */
static bool signal_ignored(int sig)
{
	struct sigaction sa;

	return sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
}

void hlb_sigset_del_ignored(sigset_t *set)
{
	for (int sig = 1; sig < SIGRTMIN; sig++)
		if (sig != SIGTERM && sigismember(set, sig) && signal_ignored(sig))
			sigdelset(set, sig);
}

void hlb_sigset_add_stops(sigset_t *set)
{
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGQUIT);
}

void hlb_sigset_add_commands(sigset_t *set)
{
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGUSR2);
	sigaddset(set, SIGUSR1);
}
