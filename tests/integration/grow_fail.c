/* LD_PRELOAD shim for tests (test_upgrade_lend.py's *_short_of_memory): an array's growth
 * (reallocarray(), hlb_grow()) fails with ENOMEM in the worker threads (hlb-worker*) of the
 * process whose pid the file HLB_TEST_GROW_FAIL holds: the one call numbered
 * HLB_TEST_GROW_FAIL_AT (from 1, the default) of those made there since the file appeared,
 * which then creates the file named as that one with ".hit" after it, saying which growth
 * failed: "callers=0xOFFSET,0xOFFSET grown=0|1 count=N", the return addresses of the call and
 * of the one before it (backtrace()) as offsets in the objects that made them (their functions
 * found with nm: the second tells the caller of hlb_grow() where it is not inlined, as at -O0,
 * CI's sanitizer build), whether the array was allocated before (1) or this was its first
 * allocation (0), and the elements asked for. No file, or another
 * process's pid (an upgrade's new process, which inherits the shim): every call runs as
 * usual. Only the workers: the hot path allocates nothing, an array grows there only where
 * the code says why (a lending's clients). */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
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

/* backtrace() loaded (libgcc's unwinder, dlopen()ed at its first call) before any growth fails */
__attribute__((constructor)) static void backtrace_ready(void)
{
	void *frame;

	backtrace(&frame, 1);
}

/* Say the failure came, and which growth it was: the file HLB_TEST_GROW_FAIL names, ".hit"
 * after its name, created, holding the return addresses of the two calls below this shim's
 * own (offsets in their objects), whether the array <p> existed and the <n> elements asked
 * for. */
static void hit(const void *p, size_t n)
{
	char path[4096], text[160];
	void *frames[16];
	Dl_info self = { 0 }, info;
	int fd, len, nf = backtrace(frames, 16), k = 0, first = nf;

	len = snprintf(text, sizeof(text), "callers=");
	dladdr((void *)hit, &self);
	/* after this shim's frames (the first may be a sanitizer's, around backtrace()) */
	for (int i = nf; i-- > 0 && first == nf;)
		if (dladdr(frames[i], &info) && info.dli_fbase == self.dli_fbase)
			first = i + 1;
	for (int i = first; i < nf && k < 2; i++) {
		if (!dladdr(frames[i], &info))
			info.dli_fbase = NULL;
		len += snprintf(
			text + len, sizeof(text) - (size_t)len, "%s0x%lx", k++ ? "," : "",
			(unsigned long)((const char *)frames[i] - (const char *)info.dli_fbase));
	}
	len += snprintf(text + len, sizeof(text) - (size_t)len, " grown=%d count=%zu\n", p != NULL,
			n);
	snprintf(path, sizeof(path), "%s.hit", getenv("HLB_TEST_GROW_FAIL"));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (write(fd, text, (size_t)len) < 0) {
		/* the test finds the file short and says so */
	}
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
		hit(p, n);
		errno = ENOMEM;
		return NULL;
	}
	return real(p, n, size);
}
