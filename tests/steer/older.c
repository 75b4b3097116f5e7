// SPDX-License-Identifier: MIT
/*
 * Proves that a program an older hashlb loaded is told from this one's when
 * it is found (an upgrade, an orphan taken over): hashlb_steer_reads_ext()
 * is true for the program this hashlb attaches, false for steer-older.bpf.o
 * (the same source built with struct hlb_steer_ct_bucket's ext named pad,
 * as before it was kept), both attached in generic XDP to a veth
 * in a network namespace of this process's own. And that the older one's
 * maps, which another loader created, take this hashlb's publication
 * (batched map writes, BPF_MAP_UPDATE_BATCH): its VIP's new flows go where
 * the table says.
 */
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include "helpers.h"

#define IFACE "hlbold0"

/* The program on IFACE, as an --update or a takeover finds it. */
static struct hashlb_steer *found(void)
{
	struct hashlb_error err = { 0 };
	struct hashlb_steer *s;

	if (hashlb_steer_find(IFACE, HASHLB_STEER_AUTO, &s, &err) < 0) {
		fprintf(stderr, "finding the program: %s\n", err.msg);
		exit(1);
	}
	return s;
}

static bool found_reads_ext(void)
{
	struct hashlb_steer *s = found();
	bool reads;

	reads = hashlb_steer_reads_ext(s);
	hashlb_steer_free(s);
	return reads;
}

/* Publish <t> (seed 1) into the program on IFACE as found, and send new
 * flows through <prog_fd>: each must go where <t> says. */
static void publish_found(const struct hashlb_table *t, int prog_fd)
{
	static const char *const vips[] = { "10.0.0.10:80" };
	struct hashlb_steer *s = found();
	uint64_t rng = 3;
	uint32_t wrong;

	test_set_vips(s, vips, 1);
	test_publish(s, t, HASHLB_KEY_4TUPLE, NULL);
	hashlb_steer_free(s);
	wrong = test_off_table(prog_fd, t, 1, &rng, 1000);
	CHECK(wrong == 0, "an older hashlb's program: %u of 1000 new flows off the table", wrong);
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
	test_netns_veth(IFACE, "hlbold1");
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
	/* sized for t as a loader sizes it: two halves of each table array */
	if (obj) {
		uint32_t nv = (HASHLB_MAGLEV_M_DEFAULT + 3) / 4;

		bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "hlb_backends"), 4);
		bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "hlb_bslots"), 2);
		bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "hlb_slots"), 2 * nv);
		test_set_rodata(obj, "backends_cap", &(uint32_t){ 2 }, sizeof(uint32_t));
		test_set_rodata(obj, "slots_cap", &nv, sizeof(nv));
	}
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
	publish_found(t, prog_fd);
	/* as hashlb steer --detach: its lock file goes too */
	if (hashlb_steer_detach(IFACE, HASHLB_STEER_AUTO, &err) < 0) {
		fprintf(stderr, "detaching the older program: %s\n", err.msg);
		return 1;
	}
	bpf_object__close(obj);
	hashlb_table_free(t);
	printf("older: this hashlb's program reads ext, an older one's does not; a table "
	       "published into the older one steers by it\n");
	return test_failures ? 1 : 0;
}
