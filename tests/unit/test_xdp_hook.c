/* Proves that an XDP program is named and removed at the hook the kernel reports (src/steer/xdp_hook.h): an offloaded one as offloaded, with `xdpoffload off`, alone or beside another, in a message that fits hashlb's errors whole. */
// SPDX-License-Identifier: MIT
#include "hashlb/error.h"
#include "helpers.h"
#include "xdp_hook.h"

/* <p> is the program <id> at <hook>. */
static void assert_prog(const struct xdp_hook_prog *p, enum xdp_hook hook, uint32_t id)
{
	assert_int_equal(p->hook, hook);
	assert_int_equal(p->id, id);
}

/* One program at each mode alone: its hook, its id, its words. */
static void test_one_program(void **state)
{
	struct xdp_hook_prog at[2];

	(void)state;
	assert_int_equal(xdp_hook_progs(XDP_ATTACHED_DRV, 7, 0, 0, at), 1);
	assert_prog(&at[0], XDP_HOOK_NATIVE, 7);
	assert_string_equal(xdp_hook_name(at[0].hook), "xdp");
	assert_string_equal(xdp_hook_off(at[0].hook), "xdp");

	assert_int_equal(xdp_hook_progs(XDP_ATTACHED_SKB, 0, 8, 0, at), 1);
	assert_prog(&at[0], XDP_HOOK_GENERIC, 8);
	assert_string_equal(xdp_hook_name(at[0].hook), "xdp-generic");
	assert_string_equal(xdp_hook_off(at[0].hook), "xdpgeneric");

	/* before: named native, `xdp off` given to remove it */
	assert_int_equal(xdp_hook_progs(XDP_ATTACHED_HW, 0, 0, 9, at), 1);
	assert_prog(&at[0], XDP_HOOK_OFFLOAD, 9);
	assert_string_equal(xdp_hook_name(at[0].hook), "xdp-offload");
	assert_string_equal(xdp_hook_off(at[0].hook), "xdpoffload");
}

/* An offloaded program beside a native or a generic one (XDP_ATTACHED_MULTI): both, the
 * offloaded one second. */
static void test_multi(void **state)
{
	struct xdp_hook_prog at[2];

	(void)state;
	assert_int_equal(xdp_hook_progs(XDP_ATTACHED_MULTI, 7, 0, 9, at), 2);
	assert_prog(&at[0], XDP_HOOK_NATIVE, 7);
	assert_prog(&at[1], XDP_HOOK_OFFLOAD, 9);

	assert_int_equal(xdp_hook_progs(XDP_ATTACHED_MULTI, 0, 8, 9, at), 2);
	assert_prog(&at[0], XDP_HOOK_GENERIC, 8);
	assert_prog(&at[1], XDP_HOOK_OFFLOAD, 9);
}

/* None attached, whatever ids came with it: none. */
static void test_none(void **state)
{
	struct xdp_hook_prog at[2];

	(void)state;
	assert_int_equal(xdp_hook_progs(XDP_ATTACHED_NONE, 0, 0, 0, at), 0);
	assert_int_equal(xdp_hook_progs(XDP_ATTACHED_NONE, 7, 8, 9, at), 0);
}

/* The message naming programs not hashlb's, at its longest (15-byte interface and program
 * names, 10-digit ids, the longest prefix): whole within an error's 255 bytes, both programs
 * and both remedies in it. Before, two were cut off in the second one's remedy. */
static void test_foreign_fits(void **state)
{
	static const char *const names[] = { "aaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbb" };
	const char *what = "attaching xdp-generic failed: ", *iface = "eth012345678901";
	struct hashlb_error err;
	struct xdp_hook_prog at[2];
	char msg[sizeof(err.msg)];
	int len;

	(void)state;
	assert_int_equal(xdp_hook_progs(XDP_ATTACHED_MULTI, 0, 4294967295u, 4294967294u, at), 2);
	len = xdp_hook_foreign(msg, sizeof(msg), what, iface, at, names, 2);
	assert_true(len > 0 && (size_t)len < sizeof(msg));
	assert_non_null(strstr(msg, "xdp-generic 4294967295 'aaaaaaaaaaaaaaa', "
				    "xdp-offload 4294967294 'bbbbbbbbbbbbbbb'"));
	assert_non_null(strstr(msg, "ip link set dev eth012345678901 xdpgeneric off, then "
				    "xdpoffload off; or --mode tc)"));

	assert_int_equal(xdp_hook_progs(XDP_ATTACHED_HW, 0, 0, 4294967295u, at), 1);
	len = xdp_hook_foreign(msg, sizeof(msg), what, iface, at, names, 1);
	assert_true(len > 0 && (size_t)len < sizeof(msg));
	assert_non_null(strstr(msg, "(ip link set dev eth012345678901 xdpoffload off), or steer "
				    "behind it at tc (--mode tc)"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_program),
		cmocka_unit_test(test_multi),
		cmocka_unit_test(test_none),
		cmocka_unit_test(test_foreign_fits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
