// SPDX-License-Identifier: MIT
/*
 * Proves that the publication lock (an flock on /run/hashlb/steer-ID.lock)
 * keeps publications taking turns where its file or the flock misbehave,
 * in a mount namespace of this process's own (a tmpfs on /run, so that the
 * host's /run/hashlb, which other hashlb processes use, is not touched):
 * - a try-only publication (hashlb run's) whose flock is interrupted by a
 *   signal (EINTR, made here by flock() interposed) tries again and
 *   publishes; before, it was refused as if the lock were held, "by
 *   process 0".
 */
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "helpers.h"

/* The next LOCK_NB flock fails with EINTR (set: 1, taken: 0). */
static atomic_int flock_eintr;

/* flock(2), which steer.c calls, interposed: as the kernel's, but for the
 * failures the test asks for. */
int flock(int fd, int op)
{
	long ret;

	if ((op & LOCK_NB) && atomic_exchange(&flock_eintr, 0)) {
		errno = EINTR;
		return -1;
	}
	ret = syscall(SYS_flock, fd, op);
	return (int)ret;
}

/* Into a mount namespace of this process's own with an empty tmpfs on
 * /run; exits 77 when not root. */
static void private_run(void)
{
	if (geteuid() != 0) {
		printf("SKIP: needs root (a mount namespace, BPF)\n");
		exit(77);
	}
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("hlblock", "/run", "tmpfs", 0, "mode=0755") < 0) {
		perror("a mount namespace with a tmpfs on /run");
		exit(1);
	}
}

static void check_eintr(void)
{
	static const char *const vips[] = { "10.0.0.10:80" };
	struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY, .max_backends = 16 };
	struct hashlb_steer *s = test_steer_load_opts(&o, NULL);
	struct sockaddr_storage vip = { 0 };
	struct sockaddr_in *v4 = (void *)&vip;
	struct hashlb_error err = { 0 };
	int ret;

	test_set_vips(s, vips, 1); /* the lock file made */
	v4->sin_family = AF_INET;
	v4->sin_port = htons(80);
	inet_pton(AF_INET, "10.0.0.11", &v4->sin_addr);
	hashlb_steer_set_lock_try(s, true);
	flock_eintr = 1;
	ret = hashlb_steer_set_vips(s, &vip, 1, &err);
	printf("a try-only publication whose flock is interrupted: %d %s\n", ret,
	       ret < 0 ? err.msg : "");
	CHECK(flock_eintr == 0, "no EINTR made: steer.c no longer calls flock()");
	CHECK(ret == 0 && !hashlb_steer_unlocked(s),
	      "a try-only publication whose flock is interrupted: %d (%s), not published "
	      "under the lock",
	      ret, ret < 0 ? err.msg : hashlb_steer_unlocked(s));
	hashlb_steer_free(s);
}

int main(void)
{
	private_run();
	check_eintr();
	return test_failures ? 1 : 0;
}
