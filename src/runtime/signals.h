/* SPDX-License-Identifier: MIT */
/*
 * The process's signal dispositions as it inherited them, read by the daemon
 * (hashlb run) and by the CLI's commands that run until stopped (hashlb run,
 * hashlb steer) alike.
 */
#ifndef HASHLB_RUNTIME_SIGNALS_H
#define HASHLB_RUNTIME_SIGNALS_H

#include <stdbool.h>

/* <sig>'s action is to ignore it (inherited so: a shell's background job, nohup). */
bool hlb_signal_ignored(int sig);

#endif
