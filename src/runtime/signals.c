// SPDX-License-Identifier: MIT
#include <signal.h>
#include <stddef.h>

#include "signals.h"

bool hlb_signal_ignored(int sig)
{
	struct sigaction sa;

	return sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
}
