/* Proves that an XDP program is named and removed at the hook the kernel reports (src/steer/xdp_hook.h): an offloaded one as offloaded, with `xdpoffload off`, alone or beside another. */
// SPDX-License-Identifier: MIT
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_program),
		cmocka_unit_test(test_multi),
		cmocka_unit_test(test_none),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
