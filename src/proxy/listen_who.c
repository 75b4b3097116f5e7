// SPDX-License-Identifier: MIT
/*
 * Who listens where a bind collides, asked of the kernel (sock_diag), and a refused bind's
 * error said from it: a service's listener's (listener.c) and the admin endpoint's TCP
 * socket's (control/http.c).
 */
#include <dirent.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hashlb/config.h"
#include "hashlb/grow.h"
#include "listen_who.h"

/* The address diag message <m>, of a socket of <family>, says it is bound to: in <s>. */
static void diag_addr(const struct inet_diag_msg *m, int family, struct sockaddr_storage *s)
{
	memset(s, 0, sizeof(*s));
	s->ss_family = (sa_family_t)family;
	if (family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)s;

		s4->sin_port = m->id.idiag_sport;
		s4->sin_addr.s_addr = m->id.idiag_src[0];
		return;
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)s;

	s6->sin6_port = m->id.idiag_sport;
	memcpy(&s6->sin6_addr, m->id.idiag_src, sizeof(s6->sin6_addr));
}

bool hlb_v6only_decides(const struct sockaddr_storage *at, const struct sockaddr_storage *a)
{
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)a;

	return at->ss_family == AF_INET6 && hashlb_addr_is_any(at) &&
	       (a->ss_family != AF_INET6 || IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr));
}

/*
 * Whether the socket diag message <h> lists, of <family>, is bound where a bind of <a>
 * collides, as the kernel has it: hashlb_listen_clash(), but for a socket on [::] set
 * IPV6_V6ONLY (INET_DIAG_SKV6ONLY, sent with each IPv6 socket), which takes IPv6 clients only:
 * an IPv4 address of its port (a.b.c.d, [::ffff:a.b.c.d], 0.0.0.0) binds beside it, no
 * SO_REUSEPORT needed, and none of its clients go there.
 */
static bool diag_clash(const struct nlmsghdr *h, int family, const struct sockaddr_storage *a)
{
	const struct inet_diag_msg *m = NLMSG_DATA(h);
	const struct rtattr *rta =
		(const struct rtattr *)((const char *)m + NLMSG_ALIGN(sizeof(*m)));
	int len = (int)h->nlmsg_len - (int)NLMSG_LENGTH(NLMSG_ALIGN(sizeof(*m)));
	struct sockaddr_storage at;

	diag_addr(m, family, &at);
	if (!hashlb_listen_clash(&at, a))
		return false;
	if (!hlb_v6only_decides(&at, a))
		return true;
	for (; RTA_OK(rta, len); rta = RTA_NEXT(rta, len))
		if (rta->rta_type == INET_DIAG_SKV6ONLY && RTA_PAYLOAD(rta) >= 1)
			return *(const uint8_t *)RTA_DATA(rta) == 0;
	return true;
}

/*
 * Who listens, among the TCP sockets of <family>, where a bind of <a> collides
 * (hashlb_listen_clash(): <a>, a wildcard covering it, an address it covers if it is one; an
 * IPv4 address in either form): of <ino> (<n> inodes), the sockets this process holds, or
 * not. sock_diag lists a socket in its own family only: ask for each. Sockets taken over are
 * the very ones the old hashlb listens on (the same inodes): its own are never counted.
 */
static enum listen_who listeners_clash(int family, const struct sockaddr_storage *a,
				       const ino_t *ino, uint32_t n)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 req;
	} msg = {
		.nlh = { .nlmsg_len = sizeof(msg),
			 .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
		.req = { .sdiag_family = (uint8_t)family,
			 .sdiag_protocol = IPPROTO_TCP,
			 .idiag_states = 1u << TCP_LISTEN },
	};
	long buf[8192 / sizeof(long)];
	bool ours = false, theirs = false, done = false, told = false;
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);

	if (fd < 0)
		return LISTEN_UNKNOWN;
	if (send(fd, &msg, sizeof(msg), 0) < 0)
		done = true;
	while (!done && !theirs) {
		ssize_t len = recv(fd, buf, sizeof(buf), 0);
		const struct nlmsghdr *h = (const struct nlmsghdr *)buf;

		for (done = len <= 0; !done && NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			const struct inet_diag_msg *m = NLMSG_DATA(h);
			uint32_t i = 0;

			done = h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR;
			told |= h->nlmsg_type == NLMSG_DONE;
			if (done || !diag_clash(h, family, a))
				continue;
			while (i < n && ino[i] != m->idiag_inode)
				i++;
			theirs |= i == n;
			ours |= i < n;
		}
	}
	close(fd);
	return theirs ? LISTEN_THEIRS : !told ? LISTEN_UNKNOWN : ours ? LISTEN_OURS : LISTEN_NONE;
}

/*
 * The inodes of the sockets this process has open, in a new array (<ret_n> of them), from
 * /proc/self/fd; NULL when it cannot be read or out of memory (<ret_n> not written).
 */
static ino_t *own_socket_inodes(uint32_t *ret_n)
{
	DIR *dir = opendir("/proc/self/fd");
	ino_t *ino = NULL;
	uint32_t n = 0;
	size_t size = 0;
	struct dirent *e;

	if (!dir)
		return NULL;
	while ((e = readdir(dir))) {
		char path[300], target[64];
		unsigned long long i;
		ssize_t len;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (sscanf(target, "socket:[%llu]", &i) != 1)
			continue;
		if (hlb_grow((void **)&ino, &size, n + 1, sizeof(*ino), 64) < 0) {
			free(ino);
			closedir(dir);
			return NULL;
		}
		ino[n++] = (ino_t)i;
	}
	closedir(dir);
	*ret_n = n;
	return ino ? ino : calloc(1, sizeof(*ino));
}

enum listen_who hlb_who_listens(const struct sockaddr_storage *a)
{
	uint32_t n = 0;
	ino_t *ino = own_socket_inodes(&n);
	enum listen_who w4, w6;

	if (!ino)
		return LISTEN_UNKNOWN;
	w6 = listeners_clash(AF_INET6, a, ino, n);
	w4 = w6 == LISTEN_THEIRS ? w6 : listeners_clash(AF_INET, a, ino, n);
	free(ino);
	return w4 > w6 ? w4 : w6; /* another's over cannot tell, over ours, over none */
}

int hlb_bind_err(int ret, const struct sockaddr *addr, const char *name, struct hashlb_error *err)
{
	const struct sockaddr_storage *a = (const struct sockaddr_storage *)addr;
	uint16_t port = hashlb_addr_port(a);
	char where[HASHLB_ADDR_STRLEN];
	enum listen_who who;

	hashlb_addr_format(a, where, sizeof(where));
	who = ret == -EADDRINUSE && port ? hlb_who_listens(a) : LISTEN_UNKNOWN;
	/* Our own listeners set SO_REUSEPORT and never refuse the bind: a socket that does
	 * not listen does (a connection's, bound to the port on an address the bind covers,
	 * TIME_WAIT included), which "another process listens there" misnamed. Short enough
	 * to be whole in a hashlb_error (a longer one was cut in its middle, the command
	 * with it), a long service name cut instead. */
	if (who != LISTEN_NONE && who != LISTEN_OURS)
		return hashlb_listen_err(err, ret, name, where);
	return hashlb_err(err, ret, HASHLB_ERR_SYSTEM,
			  "%s%s%s: cannot listen on %s: %s (no other process listens there: "
			  "connections hold port %u on an address the bind covers; `ss -tan "
			  "sport = :%u` lists them)",
			  /* named as hashlb_listen_err() names them: "admin" without <name> */
			  name ? "service '" : "admin", name ? name : "", name ? "'" : "", where,
			  strerror(-ret), port, port);
}
