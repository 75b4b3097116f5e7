// SPDX-License-Identifier: MIT
/* Names of steering modes and drop reasons, backend ids, MAC addresses:
 * shared by the loader and the stub built without BPF. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "hashlb/steer.h"

static const char *const mode_names[HASHLB_STEER_MODE_MAX] = {
	[HASHLB_STEER_AUTO] = "auto",
	[HASHLB_STEER_XDP_NATIVE] = "xdp",
	[HASHLB_STEER_XDP_GENERIC] = "xdp-generic",
	[HASHLB_STEER_TC] = "tc",
	[HASHLB_STEER_LOAD_ONLY] = "none",
};

static const char *const drop_names[HLB_STEER_DROP_MAX] = {
	[HLB_STEER_DROP_MALFORMED] = "malformed",   [HLB_STEER_DROP_FRAGMENT] = "fragment",
	[HLB_STEER_DROP_NO_BACKEND] = "no-backend", [HLB_STEER_DROP_TABLE] = "table",
	[HLB_STEER_DROP_REDIRECT] = "redirect",
};

const char *hashlb_steer_stats_field(const struct hlb_steer_stats *st, unsigned i,
				     uint64_t *ret_value)
{
	static const char *const names[] = {
		"packets",    "bytes",		"new_flows",	 "ct_hits",
		"ct_resched", "ct_evicted",	"ct_lost",	 "rst_untracked",
		"passed",     "drop_malformed", "drop_fragment", "drop_no_backend",
		"drop_table", "drop_redirect",
	};
	const uint64_t v[] = {
		st->packets,
		st->bytes,
		st->new_flows,
		st->ct_hits,
		st->ct_resched,
		st->ct_evicted,
		st->ct_lost,
		st->rst_untracked,
		st->passed,
		st->drops[HLB_STEER_DROP_MALFORMED],
		st->drops[HLB_STEER_DROP_FRAGMENT],
		st->drops[HLB_STEER_DROP_NO_BACKEND],
		st->drops[HLB_STEER_DROP_TABLE],
		st->drops[HLB_STEER_DROP_REDIRECT],
	};

	_Static_assert(sizeof(names) / sizeof(names[0]) == 9 + HLB_STEER_DROP_MAX,
		       "a name per counter");
	if (i >= sizeof(names) / sizeof(names[0]))
		return NULL;
	*ret_value = v[i];
	return names[i];
}

const char *hashlb_steer_mode_name(enum hashlb_steer_mode m)
{
	return (unsigned)m < HASHLB_STEER_MODE_MAX ? mode_names[m] : NULL;
}

int hashlb_steer_mode_parse(const char *s, enum hashlb_steer_mode *ret_mode)
{
	for (int m = 0; m < HASHLB_STEER_MODE_MAX; m++) {
		if (strcmp(s, mode_names[m]) == 0) {
			*ret_mode = m;
			return 0;
		}
	}
	if (strcmp(s, "xdp-native") == 0) {
		*ret_mode = HASHLB_STEER_XDP_NATIVE;
		return 0;
	}
	return -EINVAL;
}

const char *hashlb_steer_drop_name(enum hlb_steer_drop d)
{
	return (unsigned)d < HLB_STEER_DROP_MAX ? drop_names[d] : NULL;
}

uint64_t hashlb_steer_backend_id(const char *name)
{
	return XXH64(name, strlen(name), 0);
}

int hashlb_steer_mac_parse(const char *s, uint8_t ret_mac[6])
{
	unsigned int b[6];
	char tail;

	if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) != 6)
		return -EINVAL;
	for (int i = 0; i < 6; i++)
		if (b[i] > 0xff)
			return -EINVAL;
	for (int i = 0; i < 6; i++)
		ret_mac[i] = (uint8_t)b[i];
	return 0;
}

/* Whether neighbour message <h> is a complete entry for <want> on <ifindex>
 * (0: any); if so its MAC goes to <ret_mac>. */
static bool neigh6_match(const struct nlmsghdr *h, const struct in6_addr *want, int ifindex,
			 uint8_t ret_mac[6])
{
	const struct ndmsg *nd = NLMSG_DATA(h);
	const struct rtattr *a = (const void *)((const char *)nd + NLMSG_ALIGN(sizeof(*nd)));
	int len = (int)h->nlmsg_len - NLMSG_LENGTH(sizeof(*nd));
	const void *dst = NULL, *ll = NULL;

	if (h->nlmsg_type != RTM_NEWNEIGH || len < 0 || nd->ndm_family != AF_INET6 ||
	    (ifindex && nd->ndm_ifindex != ifindex) ||
	    !(nd->ndm_state &
	      (NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | NUD_PROBE | NUD_STALE | NUD_DELAY)))
		return false;
	for (; RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == NDA_DST && RTA_PAYLOAD(a) == sizeof(*want))
			dst = RTA_DATA(a);
		else if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6)
			ll = RTA_DATA(a);
	}
	if (!dst || !ll || memcmp(dst, want, sizeof(*want)) != 0)
		return false;
	memcpy(ret_mac, ll, 6);
	return true;
}

/*
 * The MAC of IPv6 <want> in the kernel's neighbour table, on <ifindex> if not
 * 0: one RTM_GETNEIGH dump over rtnetlink. Written by hand rather than with
 * libmnl: one request and one reply loop, and no library to add to the
 * build (libmnl-dev is not in the build image; only the runtime is).
 */
static int neighbour6_mac(const struct in6_addr *want, int ifindex, uint8_t ret_mac[6])
{
	struct {
		struct nlmsghdr h;
		struct ndmsg nd;
	} req = {
		.h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg)),
		       .nlmsg_type = RTM_GETNEIGH,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		       .nlmsg_seq = 1 },
		.nd = { .ndm_family = AF_INET6 },
	};
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	char buf[16384] __attribute__((aligned(NLMSG_ALIGNTO)));
	uint8_t mac[6];
	int fd, ret = -ENOENT, done = 0;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	if (sendto(fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&nl, sizeof(nl)) < 0) {
		ret = -errno;
		goto out;
	}
	/* A dump ends with NLMSG_DONE; a table of any size takes finitely many
	 * reads, the bound only guards against a kernel that never says so. */
	for (int reads = 0; !done && reads < 100000; reads++) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		const struct nlmsghdr *h = (const void *)buf;
		int len = (int)n;

		if (n < 0) {
			ret = -errno;
			break;
		}
		for (; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
				done = 1;
				break;
			}
			if (ret == -ENOENT && neigh6_match(h, want, ifindex, mac)) {
				memcpy(ret_mac, mac, 6);
				ret = 0;
			}
		}
		if (n == 0)
			break;
	}
out:
	close(fd);
	return ret;
}

/* The MAC of <addr> in the kernel's neighbour table (on <dev> if given):
 * IPv4 from /proc/net/arp, IPv6 over rtnetlink. */
int hashlb_steer_neighbour_mac(const struct sockaddr_storage *addr, const char *dev,
			       uint8_t ret_mac[6])
{
	char line[256], ip[64], hw[64], ifn[64], want[INET_ADDRSTRLEN];
	unsigned int flags;
	FILE *f;
	int ret = -ENOENT;

	if (addr->ss_family == AF_INET6) {
		int ifindex = dev ? (int)if_nametoindex(dev) : 0;

		if (dev && !ifindex)
			return -ENODEV;
		return neighbour6_mac(&((const struct sockaddr_in6 *)addr)->sin6_addr, ifindex,
				      ret_mac);
	}
	if (addr->ss_family != AF_INET)
		return -EAFNOSUPPORT;
	inet_ntop(AF_INET, &((const struct sockaddr_in *)addr)->sin_addr, want, sizeof(want));
	f = fopen("/proc/net/arp", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%63s %*s %x %63s %*s %63s", ip, &flags, hw, ifn) != 4)
			continue;
		/* ATF_COM: the entry is complete. */
		if (strcmp(ip, want) != 0 || !(flags & 0x2) || (dev && strcmp(dev, ifn) != 0))
			continue;
		if (hashlb_steer_mac_parse(hw, ret_mac) == 0) {
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}
