/* SPDX-License-Identifier: MIT */
/*
 * Service-manager readiness: systemd's notify protocol (sd_notify(3)), so
 * that a unit with Type=notify knows when hashlb listens, reloads and
 * stops. A no-op unless $NOTIFY_SOCKET is set.
 */
#ifndef HASHLB_RUNTIME_NOTIFY_H
#define HASHLB_RUNTIME_NOTIFY_H

/*
 * Send the newline-separated assignments of <fmt> ("READY=1\nSTATUS=...")
 * as one datagram to $NOTIFY_SOCKET (a path, or "@name" for an abstract
 * socket). Best effort: returns 0 if sent or not asked for, else -errno.
 */
int hlb_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
