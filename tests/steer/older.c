// SPDX-License-Identifier: MIT
/*
 * Proves that a program an older hashlb loaded is told from this one's when
 * it is found (an upgrade, an orphan taken over): hashlb_steer_reads_ext()
 * is true for the program this hashlb attaches, false for steer-older.bpf.o
 * (the same source built with struct hlb_steer_ct_bucket's ext named pad,
 * as before it was kept), both attached in generic XDP to a veth
 * in a network namespace of this process's own.
 */
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include "helpers.h"

#define IFACE "hlbold0"

static bool found_reads_ext(void)
{
	struct hashlb_error err = { 0 };
	struct hashlb_steer *s;
	bool reads;

	if (hashlb_steer_find(IFACE, HASHLB_STEER_AUTO, &s, &err) < 0) {
		fprintf(stderr, "finding the program: %s\n", err.msg);
		exit(1);
	}
	reads = hashlb_steer_reads_ext(s);
	hashlb_steer_free(s);
	return reads;
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "a", "b" };
	struct hashlb_steer_opts o = { .iface = IFACE, .mode = HASHLB_STEER_XDP_GENERIC };
	struct hashlb_table *t = test_table(HASHLB_SCHEME_MAGLEV, 1, names, 2, NULL);
	struct hashlb_error err = { 0 };
	struct hashlb_steer *s;
	struct bpf_object *obj;
	int ifindex, prog_fd;

	if (argc != 2) {
		fprintf(stderr, "usage: steer-older OLDER.bpf.o\n");
		return 2;
	}
	if (geteuid() != 0) {
		printf("SKIP: needs root (a network namespace, BPF)\n");
		return 77;
	}
	if (unshare(CLONE_NEWNET) < 0 ||
	    system("ip link add " IFACE " type veth peer name hlbold1 && ip link set " IFACE
		   " up") != 0) {
		perror("a network namespace with a veth");
		return 1;
	}
	ifindex = (int)if_nametoindex(IFACE);

	/* This hashlb's program. */
	if (hashlb_steer_open(&o, t, &s, &err) < 0) {
		fprintf(stderr, "attaching: %s\n", err.msg);
		return 1;
	}
	CHECK(found_reads_ext(), "this hashlb's program, found, taken for an older one's");
	hashlb_steer_free(s); /* detaches it */

	/* An older hashlb's. */
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj) < 0) {
		fprintf(stderr, "loading %s failed\n", argv[1]);
		return 1;
	}
	prog_fd = bpf_program__fd(bpf_object__find_program_by_name(obj, "hlb_xdp"));
	if (bpf_xdp_attach(ifindex, prog_fd, XDP_FLAGS_SKB_MODE, NULL) < 0) {
		perror("attaching the older program");
		return 1;
	}
	CHECK(!found_reads_ext(), "an older hashlb's program, found, taken for this one's");
	bpf_xdp_detach(ifindex, XDP_FLAGS_SKB_MODE, NULL);
	bpf_object__close(obj);
	hashlb_table_free(t);
	printf("older: this hashlb's program reads ext, an older one's does not\n");
	return test_failures ? 1 : 0;
}
