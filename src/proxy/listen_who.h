/* SPDX-License-Identifier: MIT */
/*
 * Who listens where a bind collides (sock_diag), and a refused bind's error said from it:
 * shared by the service listeners (listener.c) and the admin endpoint's TCP socket
 * (control/http.c).
 */
#ifndef HASHLB_LISTEN_WHO_H
#define HASHLB_LISTEN_WHO_H

#include <stdbool.h>
#include <sys/socket.h>

#include "hashlb/error.h"

/* Who listens where a bind collides: hlb_who_listens(). */
enum listen_who {
	LISTEN_NONE, /* nobody */
	LISTEN_OURS, /* this process's sockets only */
	LISTEN_UNKNOWN, /* cannot tell */
	LISTEN_THEIRS, /* another process's socket, one at least */
};

/*
 * Whether a socket bound to <at> that collides with a bind of <a> (hashlb_listen_clash(), which
 * takes [::] for dual-stack, as hashlb's own) does so only unless it is set IPV6_V6ONLY: <at> is
 * [::] and <a> an IPv4 address (a.b.c.d, [::ffff:a.b.c.d], 0.0.0.0). Such a socket takes IPv6
 * clients only: the bind goes beside it, no SO_REUSEPORT needed.
 */
bool hlb_v6only_decides(const struct sockaddr_storage *at, const struct sockaddr_storage *a);
/*
 * Who listens where a bind of <a> collides (listeners_clash(), in both families; <a> a
 * wildcard or not): this process's sockets only, say a listener a reload removed, whose
 * socket a worker closes as it reads the removal, after the reload (a reload right behind it
 * adding the address back finds it still there), or one it holds (the service manager's, one
 * taken over not yet used); nobody, another process, or cannot tell (no NETLINK_SOCK_DIAG, no
 * fd left at the fd limit, a dump cut short).
 */
enum listen_who hlb_who_listens(const struct sockaddr_storage *a);
/*
 * <err> filled for a socket of service <name> (NULL: the admin endpoint's) that could not be
 * bound to <addr> (-errno <ret>; hashlb_listen_err()), <ret> returned. -EADDRINUSE where no
 * other process listens (nobody, or only this process's SO_REUSEPORT sockets, which never
 * refuse it) is said as what it is: sockets that do not listen, connections', hold the port.
 * hlb_listener_err() tells a socket the service manager passed apart first.
 */
int hlb_bind_err(int ret, const struct sockaddr *addr, const char *name, struct hashlb_error *err);

#endif
