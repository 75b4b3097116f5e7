/* LD_PRELOAD shim for tests (test_upgrade_lend.py's *_short_of_memory): an array's growth
 * (reallocarray(), hlb_grow()) fails with ENOMEM in the worker threads (hlb-worker*) of the
 * process whose pid the file HLB_TEST_GROW_FAIL holds: the one call numbered
 * HLB_TEST_GROW_FAIL_AT (from 1, the default) of those made there since the file appeared,
 * which then creates the file named as that one with ".hit" after it. No file, or another
 * process's pid (an upgrade's new process, which inherits the shim): every call runs as
 * usual. Only the workers: the hot path allocates nothing, an array grows there only where
 * the code says why (a lending's clients). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static atomic_long armed_calls;

/* Whether the file names this process. */
static bool armed(void)
{
	const char *path = getenv("HLB_TEST_GROW_FAIL");
	char buf[32] = "";
	ssize_t n;
	int fd;

	if (!path || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 && atol(buf) == (long)getpid();
}

/* Say the failure came: the file HLB_TEST_GROW_FAIL names, ".hit" after its name, created. */
static void hit(void)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s.hit", getenv("HLB_TEST_GROW_FAIL"));
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
}

void *reallocarray(void *p, size_t n, size_t size)
{
	void *(*real)(void *, size_t, size_t) =
		(void *(*)(void *, size_t, size_t))dlsym(RTLD_NEXT, "reallocarray");
	const char *at = getenv("HLB_TEST_GROW_FAIL_AT");
	char name[16] = "";

	prctl(PR_GET_NAME, name);
	if (!strncmp(name, "hlb-worker", 10) && armed() &&
	    atomic_fetch_add(&armed_calls, 1) + 1 == (at ? atol(at) : 1)) {
		hit();
		errno = ENOMEM;
		return NULL;
	}
	return real(p, n, size);
}
