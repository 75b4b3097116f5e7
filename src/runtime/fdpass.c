// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fdpass.h"

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Write text[*off, end) with <fds> on its first byte, as far as <fd> takes it now (*<off>
 * advanced); *<went> is set once the descriptors are in the peer's socket (the first byte
 * went). 1: all of it written; 0: the socket full; -errno (-EPIPE: the peer closed). */
static int send_part(int fd, const char *text, size_t *off, size_t end, const int *fds,
		     unsigned n_fds, bool *went)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * HLB_FDPASS_PER_MSG)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	ssize_t n;

	if (n_fds) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
	}
	while (*off < end) {
		iov = (struct iovec){ .iov_base = (char *)text + *off, .iov_len = end - *off };
		n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPIPE;
		*off += (size_t)n;
		*went = true;
		msg.msg_control = NULL; /* the descriptors went with the first byte */
		msg.msg_controllen = 0;
	}
	return 1;
}

/* The end of the line of descriptor <i> (from 0) among the lines of text[0, len) that begin
 * at <lines_off>; <len> if there are not that many. */
static size_t line_end(const char *text, size_t len, size_t lines_off, unsigned i)
{
	size_t end = lines_off;

	for (unsigned line = 0; line <= i && end < len; line++) {
		const char *nl = memchr(text + end, '\n', len - end);

		end = nl ? (size_t)(nl - text) + 1 : len;
	}
	return end;
}

int hlb_fdpass_send_some(int fd, const char *text, size_t len, size_t lines_off, const int *fds,
			 unsigned n_fds, struct hlb_fdpass_at *at)
{
	while (at->off < len) {
		unsigned k = 0;
		size_t end;
		bool went = false;
		int r;

		/* a batch rides on the first byte after the lines of the one before (on the
		 * answer's first byte for the first); between, the rest of a batch's text,
		 * its descriptors gone with its first byte */
		if (at->sent < n_fds &&
		    at->off == (at->sent ? line_end(text, len, lines_off, at->sent - 1) : 0))
			k = n_fds - at->sent < HLB_FDPASS_PER_MSG ? n_fds - at->sent
								  : HLB_FDPASS_PER_MSG;
		/* up to the line of the batch's last descriptor, all of the text after the last */
		end = at->sent + k < n_fds ? line_end(text, len, lines_off, at->sent + k - 1) : len;
		/* no descriptors: <fds> may be NULL, which takes no offset, even 0 */
		r = send_part(fd, text, &at->off, end, k ? fds + at->sent : NULL, k, &went);
		if (went)
			at->sent += k;
		if (r <= 0)
			return r;
	}
	return 1;
}

uint64_t hlb_fdpass_due(unsigned ms)
{
	return mono_ms() + ms;
}

bool hlb_fdpass_send_from(int fd, const char *text, size_t len, size_t lines_off, const int *fds,
			  unsigned n_fds, struct hlb_fdpass_at *at, uint64_t due_ms)
{
	int r;

	while ((r = hlb_fdpass_send_some(fd, text, len, lines_off, fds, n_fds, at)) == 0) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		uint64_t now = mono_ms();

		if (now >= due_ms) {
			errno = ETIMEDOUT;
			return false;
		}
		r = poll(&pfd, 1, (int)(due_ms - now));
		if (r < 0 && errno != EINTR)
			return false;
		if (r > 0 && !(pfd.revents & POLLOUT)) {
			errno = EPIPE; /* POLLHUP, POLLERR: no room will come */
			return false;
		}
	}
	if (r < 0)
		errno = -r;
	return r > 0;
}

bool hlb_fdpass_send(int fd, const char *text, size_t len, size_t lines_off, const int *fds,
		     unsigned n_fds)
{
	return hlb_fdpass_send_by(fd, text, len, lines_off, fds, n_fds,
				  hlb_fdpass_due(HLB_FDPASS_SEND_MS));
}

bool hlb_fdpass_send_by(int fd, const char *text, size_t len, size_t lines_off, const int *fds,
			unsigned n_fds, uint64_t due_ms)
{
	struct hlb_fdpass_at at = { 0 };

	return hlb_fdpass_send_from(fd, text, len, lines_off, fds, n_fds, &at, due_ms);
}

bool hlb_fdpass_send_counted(int fd, const char *text, size_t len, size_t lines_off, const int *fds,
			     unsigned n_fds, unsigned *ret_went)
{
	struct hlb_fdpass_at at = { 0 };
	bool sent = hlb_fdpass_send_from(fd, text, len, lines_off, fds, n_fds, &at,
					 hlb_fdpass_due(HLB_FDPASS_SEND_MS));

	*ret_went = at.sent;
	return sent;
}

/* <a> as /proc/net/tcp{,6} writes an address: the 32-bit words of the address as they lie in
 * memory, in hex, then the port; a v4-mapped IPv6 address as IPv4 (the socket of a client
 * over IPv4 to a dual-stack listener is in /proc/net/tcp). */
static bool proc_addr(const struct sockaddr_storage *a, char *buf, size_t size, bool *ret_v6)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)a;
	uint32_t w[4];

	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)a;

		memcpy(w, &s4->sin_addr, 4);
		snprintf(buf, size, "%08" PRIX32 ":%04X", w[0], ntohs(s4->sin_port));
		*ret_v6 = false;
		return true;
	}
	if (a->ss_family != AF_INET6)
		return false;
	memcpy(w, &s6->sin6_addr, 16);
	if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
		snprintf(buf, size, "%08" PRIX32 ":%04X", w[3], ntohs(s6->sin6_port));
		*ret_v6 = false;
	} else {
		snprintf(buf, size, "%08" PRIX32 "%08" PRIX32 "%08" PRIX32 "%08" PRIX32 ":%04X",
			 w[0], w[1], w[2], w[3], ntohs(s6->sin6_port));
		*ret_v6 = true;
	}
	return true;
}

/* The inode of the TCP socket from <local> to <remote> (/proc/net/tcp's form), 0 if none. */
static unsigned long tcp_inode(bool v6, const char *local, const char *remote)
{
	FILE *f = fopen(v6 ? "/proc/net/tcp6" : "/proc/net/tcp", "re");
	char line[512], l[64], r[64];
	unsigned long inode = 0, ino;

	if (!f)
		return 0;
	while (!inode && fgets(line, sizeof(line), f))
		if (sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %*s %*s %lu", l, r, &ino) == 3 &&
		    !strcmp(l, local) && !strcmp(r, remote))
			inode = ino;
	fclose(f);
	return inode;
}

/* Whether process <pid> has socket <inode> among its descriptors. */
static bool holds_socket(pid_t pid, unsigned long inode)
{
	char path[64], want[64], link[64];
	struct dirent *e;
	bool found = false;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	dir = opendir(path);
	if (!dir)
		return false;
	while (!found && (e = readdir(dir))) {
		ssize_t n = readlinkat(dirfd(dir), e->d_name, link, sizeof(link) - 1);

		if (n > 0) {
			link[n] = '\0';
			found = !strcmp(link, want);
		}
	}
	closedir(dir);
	return found;
}

/* Whether process <pid> runs as root or as this process's effective user: who may copy this
 * one's descriptors with pidfd_getfd(2) (with Yama's ptrace_scope at 0 for the same user). */
static bool may_take(pid_t pid)
{
	char path[64], line[256];
	unsigned long real, eff;
	bool ok = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Uid: %lu %lu", &real, &eff) == 2) {
			ok = eff == 0 || eff == (unsigned long)geteuid();
			break;
		}
	fclose(f);
	return ok;
}

bool hlb_fdpass_peer_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

bool hlb_fdpass_peer_is(int fd, pid_t pid)
{
	struct sockaddr_storage me, peer;
	socklen_t me_len = sizeof(me), peer_len = sizeof(peer);
	char local[64], remote[64];
	unsigned long inode;
	bool v6, v6_too;

	if (pid <= 0 || getsockname(fd, (struct sockaddr *)&me, &me_len) < 0)
		return false;
	if (me.ss_family == AF_UNIX) {
		struct ucred cred;
		socklen_t len = sizeof(cred);

		return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid == pid;
	}
	/* the peer's socket has our addresses the other way round */
	if (getpeername(fd, (struct sockaddr *)&peer, &peer_len) < 0 ||
	    !proc_addr(&peer, local, sizeof(local), &v6) ||
	    !proc_addr(&me, remote, sizeof(remote), &v6_too))
		return false;
	inode = tcp_inode(v6, local, remote);
	/* Over TCP it copies the sockets with pidfd_getfd(2): one that may not is no taker,
	 * whatever connection it holds (a server of another user made to fetch a URL). */
	return inode && holds_socket(pid, inode) && may_take(pid);
}
