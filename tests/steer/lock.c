// SPDX-License-Identifier: MIT
/*
 * Proves that the publication lock (an flock on /run/hashlb/steer-ID.lock)
 * keeps publications taking turns where its file or the flock misbehave,
 * in a mount namespace of this process's own (a tmpfs on /run, so that the
 * host's /run/hashlb, which other hashlb processes use, is not touched):
 * - a try-only publication (hashlb run's) whose flock is interrupted by a
 *   signal (EINTR, made here by flock() interposed) tries again and
 *   publishes; before, it was refused as if the lock were held, "by
 *   process 0";
 * - /run/hashlb removed (systemd's RuntimeDirectory= cleanup) while a
 *   publication holds the lock and another waits for it, and a third
 *   process locking the new file made at the path: once the first lets go,
 *   the waiter, which had opened the old file, does not publish beside the
 *   third but waits for it (refused after 2 s, naming it); before, it took
 *   the old file's lock and published at once.
 */
#include <dirent.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "helpers.h"

#define LOCK_DIR "/run/hashlb"

/* The next LOCK_NB flock fails with EINTR (set: 1, taken: 0). */
static atomic_int flock_eintr;
/* LOCK_NB flocks that found the lock held. */
static atomic_int flock_busy;

/* flock(2), which steer.c calls, interposed: as the kernel's, but for the
 * failures the test asks for, and counting the tries that found it held. */
int flock(int fd, int op)
{
	long ret;

	if ((op & LOCK_NB) && atomic_exchange(&flock_eintr, 0)) {
		errno = EINTR;
		return -1;
	}
	ret = syscall(SYS_flock, fd, op);
	if (ret < 0 && errno == EWOULDBLOCK && (op & LOCK_NB))
		atomic_fetch_add(&flock_busy, 1);
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

/* LOCK_DIR emptied of the files earlier checks left. */
static void lock_dir_empty(void)
{
	DIR *d = opendir(LOCK_DIR);
	struct dirent *e;

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
}

/* The one lock file in LOCK_DIR, into <path>; exits if there is not one. */
static void lock_file(char path[PATH_MAX])
{
	DIR *d = opendir(LOCK_DIR);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		if (strncmp(e->d_name, "steer-", 6) == 0 && n++ == 0)
			snprintf(path, PATH_MAX, LOCK_DIR "/%s", e->d_name);
	if (d)
		closedir(d);
	if (n != 1) {
		fprintf(stderr, "%d lock files in " LOCK_DIR ", not 1\n", n);
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

static struct {
	struct hashlb_steer *s;
	int ret;
	struct hashlb_error err;
} waiter;

static void *publish_waiting(void *arg)
{
	struct sockaddr_storage vip = { 0 };
	struct sockaddr_in *v4 = (void *)&vip;

	(void)arg;
	v4->sin_family = AF_INET;
	v4->sin_port = htons(80);
	inet_pton(AF_INET, "10.0.0.12", &v4->sin_addr);
	waiter.ret = hashlb_steer_set_vips(waiter.s, &vip, 1, &waiter.err);
	return NULL;
}

/* The lock file at <path>, made, and locked (LOCK_NB); its fd, or exits. */
static int hold(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
		perror(path);
		exit(1);
	}
	return fd;
}

static void check_dir_removed(void)
{
	static const char *const vips[] = { "10.0.0.10:80" };
	struct hashlb_steer_opts o = { .mode = HASHLB_STEER_LOAD_ONLY, .max_backends = 16 };
	char path[PATH_MAX], holder[32];
	pthread_t t;
	int old, now;

	lock_dir_empty();
	waiter.s = test_steer_load_opts(&o, NULL);
	test_set_vips(waiter.s, vips, 1); /* the lock file made */
	lock_file(path);
	old = hold(path); /* a publication under way */
	flock_busy = 0;
	if (pthread_create(&t, NULL, publish_waiting, NULL) != 0) {
		perror("pthread_create");
		exit(1);
	}
	/* until the waiter, its file open, has found it held (10 s at most) */
	for (int i = 0; i < 10000 && flock_busy == 0; i++)
		usleep(1000);
	CHECK(flock_busy > 0, "the second publication never found the lock held");
	/* the directory removed, and another process's publication locks a
	 * new file at the path; then the first one ends */
	unlink(path);
	rmdir(LOCK_DIR);
	if (mkdir(LOCK_DIR, 0755) < 0) {
		perror(LOCK_DIR);
		exit(1);
	}
	now = hold(path);
	close(old);
	pthread_join(t, NULL);
	printf("/run/hashlb removed under a held lock, a new file locked: the waiting publication "
	       "%d %s\n",
	       waiter.ret, waiter.ret < 0 ? waiter.err.msg : "(published)");
	snprintf(holder, sizeof(holder), "(process %d,", (int)getpid());
	CHECK(waiter.ret == -ETIMEDOUT && strstr(waiter.err.msg, holder),
	      "a publication that waited on a lock file removed since: %d (%s), not -ETIMEDOUT "
	      "naming the new file's holder",
	      waiter.ret, waiter.ret < 0 ? waiter.err.msg : "published beside it");
	close(now);
	hashlb_steer_free(waiter.s);
}

int main(void)
{
	private_run();
	check_eintr();
	check_dir_removed();
	return test_failures ? 1 : 0;
}
