// SPDX-License-Identifier: MIT
/*
 * test_netns_veth() (helpers.h), which every C steering scenario starts in: exit 77 with the
 * reason where this machine cannot make a veth (no veth driver, no ip(8)), exit 1 where it
 * fails (a real failure, a test that must not count as skipped). Each case runs in a child,
 * its PATH a directory whose "ip" answers as ip(8) does there. Before, no veth driver failed
 * every scenario (exit 1), on a machine that cannot run them.
 */
#include <sys/stat.h>
#include "helpers.h"

static int failures;

/* test_netns_veth()'s exit status in a child whose ip(8) is <dir>/ip, <script> its body (none:
 * no ip at all); 0 if it returned. */
static int netns_status(const char *dir, const char *script)
{
	char path[256];
	int status;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/ip", dir);
	unlink(path);
	if (script) {
		FILE *f = fopen(path, "w");

		if (!f || fprintf(f, "#!/bin/sh\n%s\n", script) < 0 || fclose(f) != 0 ||
		    chmod(path, 0755) < 0) {
			perror(path);
			exit(1);
		}
	}
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		setenv("PATH", dir, 1);
		test_netns_veth("hlbns0", "hlbns1");
		_exit(0);
	}
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) {
		fprintf(stderr, "test_netns_veth's child did not exit\n");
		exit(1);
	}
	return WEXITSTATUS(status);
}

static void expect(const char *what, int got, int want)
{
	if (got != want) {
		fprintf(stderr, "FAIL: %s: exit %d, want %d\n", what, got, want);
		failures++;
	}
}

int main(void)
{
	char dir[] = "/tmp/hashlb-test-netns-XXXXXX", path[256];

	if (geteuid() != 0) {
		printf("SKIP: needs root (a network namespace)\n");
		return 77;
	}
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	expect("no veth driver",
	       netns_status(dir, "echo 'Error: Unknown device type.' >&2; exit 2"), 77);
	expect("no ip(8)", netns_status(dir, NULL), 77);
	expect("a veth that cannot be made",
	       netns_status(dir, "echo 'RTNETLINK answers: File exists' >&2; exit 2"), 1);
	expect("ip killed", netns_status(dir, "kill -9 $$"), 1);
	expect("a veth made", netns_status(dir, "exit 0"), 0);
	snprintf(path, sizeof(path), "%s/ip", dir);
	unlink(path);
	rmdir(dir);
	printf("%d failures\n", failures);
	return failures ? 1 : 0;
}
