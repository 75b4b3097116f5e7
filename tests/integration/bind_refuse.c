/* LD_PRELOAD shim for tests (test_upgrade.py's unix_admin_path_bound_in_place_when_refused):
 * a bind() of a Unix socket to a name beginning ".hashlb-" fails with EACCES, as under a
 * mandatory access policy (AppArmor, SELinux) that lets hashlb make its admin socket's path
 * and no other name in that directory. */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	static int (*real)(int, const struct sockaddr *, socklen_t);
	const struct sockaddr_un *sun = (const struct sockaddr_un *)addr;
	const char *base;

	if (!real)
		real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
	if (addr && addr->sa_family == AF_UNIX && sun->sun_path[0]) {
		base = strrchr(sun->sun_path, '/');
		base = base ? base + 1 : sun->sun_path;
		if (!strncmp(base, ".hashlb-", 8)) {
			errno = EACCES;
			return -1;
		}
	}
	return real(fd, addr, len);
}
