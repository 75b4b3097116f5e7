// SPDX-License-Identifier: MIT
/*
 * Proves that a program on the interface that this hashlb cannot drive is
 * named, with what removes it, wherever hashlb meets it. Two XDP programs,
 * attached in generic XDP to a veth in a network namespace of this
 * process's own, each XDP_PASS and nothing else:
 * - hlb_xdp whose one map is hlb_vips_v0, as another hashlb version's
 *   (its maps named otherwise): finding it (hashlb steer --update) and
 *   adopting it (hashlb run's takeover) are -EPROTO, not -ENOENT, which
 *   hashlb run read as nothing there; attaching beside it (what hashlb run
 *   then did) says what it is, not "hashlb steers this interface already"
 *   and "--update changes its table", which cannot. Each message names
 *   the program (id, name) and hashlb steer --detach and ip link; the
 *   --detach named removes it, and this hashlb attaches.
 * - xdp_foreign, anyone's: attaching, in auto and in generic XDP, names it
 *   (before: "another XDP program is attached", no more), and the ip link
 *   command named removes it.
 */
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include "helpers.h"

#define IFACE "hlboth0"

/* Load an XDP program named <name> that returns XDP_PASS; with <map> (not
 * NULL), it uses an array map of that name. Its fd, or exits. */
static int load_pass(const char *name, const char *map)
{
	struct bpf_insn insns[4];
	int n = 0, map_fd = -1, fd;

	LIBBPF_OPTS(bpf_prog_load_opts, po);
	if (map) {
		map_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, map, 4, 4, 1, NULL);
		if (map_fd < 0) {
			perror("creating a map");
			exit(1);
		}
		/* r1 = the map (ld_imm64): the program uses it */
		insns[n++] = (struct bpf_insn){ .code = BPF_LD | BPF_DW | BPF_IMM,
						.dst_reg = BPF_REG_1,
						.src_reg = BPF_PSEUDO_MAP_FD,
						.imm = map_fd };
		insns[n++] = (struct bpf_insn){ 0 };
	}
	insns[n++] = (struct bpf_insn){ .code = BPF_ALU64 | BPF_MOV | BPF_K,
					.dst_reg = BPF_REG_0,
					.imm = XDP_PASS_ };
	insns[n++] = (struct bpf_insn){ .code = BPF_JMP | BPF_EXIT };
	fd = bpf_prog_load(BPF_PROG_TYPE_XDP, name, "MIT", insns, (size_t)n, &po);
	if (fd < 0) {
		perror("loading an XDP program");
		exit(1);
	}
	if (map_fd >= 0)
		close(map_fd); /* the program holds it */
	return fd;
}

/* Attach load_pass(<name>, <map>) to <ifindex> in generic XDP; its fd, and
 * "program ID 'NAME'" into <ret_id>. */
static int attach_pass(int ifindex, const char *name, const char *map, char ret_id[64])
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);
	int fd = load_pass(name, map);

	if (bpf_xdp_attach(ifindex, fd, XDP_FLAGS_SKB_MODE, NULL) < 0) {
		perror("attaching an XDP program");
		exit(1);
	}
	memset(&info, 0, sizeof(info));
	bpf_obj_get_info_by_fd(fd, &info, &len);
	snprintf(ret_id, 64, "program %u '%s'", info.id, name);
	return fd;
}

/* Whether <msg> holds each of the <n> strings of <want>; says which not. */
static bool says(const char *what, const char *msg, const char *const *want, int n)
{
	bool all = true;

	for (int i = 0; i < n; i++) {
		if (!strstr(msg, want[i])) {
			printf("%s: no \"%s\" in: %s\n", what, want[i], msg);
			all = false;
		}
	}
	return all;
}

static void check_other_version(int ifindex, const struct hashlb_table *t)
{
	struct hashlb_steer_opts o = { .iface = IFACE, .mode = HASHLB_STEER_AUTO };
	struct hashlb_error err = { 0 };
	struct hashlb_steer *s = NULL;
	char id[64];
	int fd = attach_pass(ifindex, "hlb_xdp", "hlb_vips_v0", id), ret;

	const char *want[] = { "another hashlb version's", id, "(no map 'hlb_vips')",
			       "hashlb steer -i " IFACE " --detach",
			       "ip link set dev " IFACE " xdpgeneric off" };
	int n = sizeof(want) / sizeof(want[0]);

	ret = hashlb_steer_find(IFACE, HASHLB_STEER_AUTO, &s, &err);
	printf("another version's, found: %d, %s\n", ret, err.msg);
	CHECK(ret == -EPROTO, "another version's, found: %d, not -EPROTO", ret);
	CHECK(says("found", err.msg, want, n), "another version's, found: %s", err.msg);

	memset(&err, 0, sizeof(err));
	ret = hashlb_steer_adopt(IFACE, HASHLB_STEER_AUTO, &s, &err);
	printf("another version's, adopted: %d, %s\n", ret, err.msg);
	CHECK(ret == -EPROTO, "another version's, adopted (hashlb run's takeover): %d, not -EPROTO",
	      ret);
	CHECK(says("adopted", err.msg, want, n), "another version's, adopted: %s", err.msg);

	memset(&err, 0, sizeof(err));
	ret = hashlb_steer_open(&o, t, &s, &err);
	printf("another version's, attached beside: %d, %s\n", ret, err.msg);
	CHECK(ret < 0, "attached beside another version's program");
	if (ret == 0)
		hashlb_steer_free(s);
	CHECK(says("attached beside", err.msg, want, n) && !strstr(err.msg, "--update"),
	      "attaching beside another version's: %s", err.msg);

	/* what the message says to do */
	memset(&err, 0, sizeof(err));
	ret = hashlb_steer_detach(IFACE, HASHLB_STEER_AUTO, &err);
	CHECK(ret == 0, "hashlb steer --detach of another version's: %s", err.msg);
	ret = hashlb_steer_open(&o, t, &s, &err);
	CHECK(ret == 0, "attaching after its --detach: %s", err.msg);
	if (ret == 0)
		hashlb_steer_free(s); /* detaches it */
	close(fd);
}

static void check_foreign(int ifindex, const struct hashlb_table *t)
{
	static const enum hashlb_steer_mode modes[] = { HASHLB_STEER_AUTO,
							HASHLB_STEER_XDP_GENERIC };
	struct hashlb_error err = { 0 };
	struct hashlb_steer *s = NULL;
	char id[64];
	int fd = attach_pass(ifindex, "xdp_foreign", NULL, id), ret;

	const char *want[] = { "'" IFACE "' has an XDP program not hashlb's", id,
			       "ip link set dev " IFACE " xdpgeneric off" };

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		struct hashlb_steer_opts o = { .iface = IFACE, .mode = modes[i] };
		const char *mode = hashlb_steer_mode_name(modes[i]);

		memset(&err, 0, sizeof(err));
		ret = hashlb_steer_open(&o, t, &s, &err);
		printf("anyone's, attached beside (%s): %d, %s\n", mode, ret, err.msg);
		CHECK(ret < 0, "attached beside anyone's (%s)", mode);
		if (ret == 0)
			hashlb_steer_free(s);
		CHECK(says(mode, err.msg, want, sizeof(want) / sizeof(want[0])),
		      "attaching beside anyone's (%s): %s", mode, err.msg);
	}
	/* what the message says to do */
	CHECK(system("ip link set dev " IFACE " xdpgeneric off") == 0, "ip link ... off failed");
	{
		struct hashlb_steer_opts o = { .iface = IFACE, .mode = HASHLB_STEER_AUTO };

		ret = hashlb_steer_open(&o, t, &s, &err);
		CHECK(ret == 0, "attaching after ip link ... off: %s", err.msg);
		if (ret == 0)
			hashlb_steer_free(s);
	}
	close(fd);
}

int main(void)
{
	static const char *const names[] = { "a", "b" };
	struct hashlb_table *t = test_table(HASHLB_SCHEME_MAGLEV, 1, names, 2, NULL);

	test_netns_veth(IFACE, "hlboth1");
	check_other_version((int)if_nametoindex(IFACE), t);
	check_foreign((int)if_nametoindex(IFACE), t);
	hashlb_table_free(t);
	return test_failures ? 1 : 0;
}
