/* SPDX-License-Identifier: MIT */
/*
 * Where the kernel runs the XDP programs on an interface, as it reports them
 * (IFLA_XDP_ATTACHED and each mode's program id), and the words that name and
 * remove each: apart from netlink, so that the mapping is tested
 * (tests/unit/test_xdp_hook.c).
 */
#ifndef HASHLB_STEER_XDP_HOOK_H
#define HASHLB_STEER_XDP_HOOK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <linux/if_link.h>

enum xdp_hook {
	XDP_HOOK_NATIVE, /* the driver's (XDP_FLAGS_DRV_MODE) */
	XDP_HOOK_GENERIC, /* the stack's (XDP_FLAGS_SKB_MODE) */
	XDP_HOOK_OFFLOAD, /* the NIC's (XDP_FLAGS_HW_MODE) */
	XDP_HOOK_MAX
};

struct xdp_hook_prog {
	enum xdp_hook hook;
	uint32_t id;
};

/*
 * The XDP programs the kernel reports on an interface: <attached>
 * (IFLA_XDP_ATTACHED: XDP_ATTACHED_NONE, _DRV, _SKB, _HW, or _MULTI for an
 * offloaded one beside a native or generic one) and each mode's program id
 * (IFLA_XDP_DRV_PROG_ID, _SKB_, _HW_; 0: none), into <ret>: the native or
 * generic one first, then the offloaded one. How many (0..2). Before, an
 * offloaded program was taken for a native one, and `ip link set dev X xdp
 * off`, which leaves it, given to remove it.
 */
static inline uint32_t xdp_hook_progs(uint8_t attached, uint32_t drv_id, uint32_t skb_id,
				      uint32_t hw_id, struct xdp_hook_prog ret[2])
{
	uint32_t n = 0;
	bool multi = attached == XDP_ATTACHED_MULTI;

	if (drv_id && (multi || attached == XDP_ATTACHED_DRV))
		ret[n++] = (struct xdp_hook_prog){ XDP_HOOK_NATIVE, drv_id };
	else if (skb_id && (multi || attached == XDP_ATTACHED_SKB))
		ret[n++] = (struct xdp_hook_prog){ XDP_HOOK_GENERIC, skb_id };
	if (hw_id && (multi || attached == XDP_ATTACHED_HW))
		ret[n++] = (struct xdp_hook_prog){ XDP_HOOK_OFFLOAD, hw_id };
	return n;
}

/* <h> as hashlb names a mode ("xdp", "xdp-generic", hashlb_steer_mode_name()),
 * "xdp-offload" for the NIC's. */
static inline const char *xdp_hook_name(enum xdp_hook h)
{
	return h == XDP_HOOK_OFFLOAD   ? "xdp-offload"
	       : h == XDP_HOOK_GENERIC ? "xdp-generic"
				       : "xdp";
}

/* What removes a program at <h>: ip link's word (ip link set dev X WORD off). */
static inline const char *xdp_hook_off(enum xdp_hook h)
{
	return h == XDP_HOOK_OFFLOAD ? "xdpoffload" : h == XDP_HOOK_GENERIC ? "xdpgeneric" : "xdp";
}

/*
 * Into <buf> (<size> bytes), after <what>: that <iface> has the <n> (1 or 2)
 * XDP programs <at>, named <names>, not hashlb's, and what removes them. What
 * snprintf() returns. Two fit a struct hashlb_error's 255 bytes whole at
 * their longest (15-byte names, 10-digit ids, "attaching xdp-generic failed:
 * "): before, the second one's remedy was cut off.
 */
static inline int xdp_hook_foreign(char *buf, size_t size, const char *what, const char *iface,
				   const struct xdp_hook_prog *at, const char *const *names,
				   uint32_t n)
{
	if (n < 2)
		return snprintf(buf, size,
				"%s'%s' has an XDP program not hashlb's (%s, program %u '%s'): "
				"remove it (ip link set dev %s %s off), or steer behind it at tc "
				"(--mode tc)",
				what, iface, xdp_hook_name(at[0].hook), at[0].id, names[0], iface,
				xdp_hook_off(at[0].hook));
	return snprintf(buf, size,
			"%s'%s' has XDP programs not hashlb's: %s %u '%s', %s %u '%s' (remove: ip "
			"link set dev %s %s off, then %s off; or --mode tc)",
			what, iface, xdp_hook_name(at[0].hook), at[0].id, names[0],
			xdp_hook_name(at[1].hook), at[1].id, names[1], iface,
			xdp_hook_off(at[0].hook), xdp_hook_off(at[1].hook));
}

#endif
