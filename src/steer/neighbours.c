// SPDX-License-Identifier: MIT
/*
 * The kernel's neighbour table (ARP, NDP), read once a family and looked up
 * by address: the MACs of a table's backends. Shared by the loader and the
 * stub built without BPF.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include "hashlb/grow.h"
#include "hashlb/steer.h"

/* A complete entry: IPv4 ones name their interface (/proc/net/arp), IPv6
 * ones give its index (rtnetlink). */
struct neigh_entry {
	uint8_t addr[16];
	uint32_t seq; /* its place in the kernel's listing: the first match wins */
	int ifindex;
	char ifname[IF_NAMESIZE];
	uint8_t mac[6];
};

struct neigh_family {
	bool read;
	int error; /* of the read: every lookup returns it */
	struct neigh_entry *entries; /* sorted by address, then seq */
	uint32_t n;
	size_t cap;
};

struct hashlb_steer_neigh {
	struct neigh_family v4, v6;
	/* the index of the last <dev> an IPv6 lookup named */
	char dev[IF_NAMESIZE];
	int dev_ifindex;
	/* the host's addresses, read once for hashlb_steer_neigh_missing() (a getifaddrs()
	 * a backend missing, each retry, was a netlink dump each on the control loop) */
	struct ifaddrs *ifa;
	int ifa_read; /* 1 once read, or the -errno of reading them */
};

struct hashlb_steer_neigh *hashlb_steer_neigh_new(void)
{
	return calloc(1, sizeof(struct hashlb_steer_neigh));
}

void hashlb_steer_neigh_free(struct hashlb_steer_neigh *n)
{
	if (!n)
		return;
	free(n->v4.entries);
	free(n->v6.entries);
	if (n->ifa)
		freeifaddrs(n->ifa);
	free(n);
}

const char *hashlb_steer_neigh_source(int family)
{
	return family == AF_INET6 ? "rtnetlink's IPv6 dump" : "/proc/net/arp";
}

static struct neigh_entry *neigh_add(struct neigh_family *f)
{
	if (hlb_grow((void **)&f->entries, &f->cap, f->n + 1, sizeof(*f->entries), 64) < 0)
		return NULL;
	memset(&f->entries[f->n], 0, sizeof(f->entries[0]));
	f->entries[f->n].seq = f->n;
	return &f->entries[f->n++];
}

static int neigh_cmp(const void *a, const void *b)
{
	const struct neigh_entry *x = a, *y = b;
	int c = memcmp(x->addr, y->addr, sizeof(x->addr));

	return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

/*
 * /proc/net/arp's complete entries; -errno if it cannot be read, to its end
 * (before, a read that failed partway was taken as the end of the table: a
 * backend listed after it read as having no entry).
 */
static int neigh4_read(struct neigh_family *f)
{
	char line[256], ip[64], hw[64], ifn[64];
	unsigned int flags;
	FILE *fp = fopen(hashlb_steer_neigh_source(AF_INET), "re");
	int ret = 0;

	if (!fp)
		return -errno;
	while (fgets(line, sizeof(line), fp)) {
		struct neigh_entry *e;
		struct in_addr a;
		uint8_t mac[6];

		if (sscanf(line, "%63s %*s %x %63s %*s %63s", ip, &flags, hw, ifn) != 4)
			continue;
		/* ATF_COM: the entry is complete. */
		if (!(flags & 0x2) || inet_pton(AF_INET, ip, &a) != 1 ||
		    hashlb_steer_mac_parse(hw, mac) < 0 || strlen(ifn) >= IF_NAMESIZE)
			continue;
		e = neigh_add(f);
		if (!e) {
			fclose(fp);
			return -ENOMEM;
		}
		memcpy(e->addr, &a, sizeof(a));
		memcpy(e->mac, mac, 6);
		strcpy(e->ifname, ifn);
	}
	if (ferror(fp)) /* fgets() failed: errno is its read's */
		ret = errno > 0 ? -errno : -EIO;
	fclose(fp);
	return ret;
}

/* Neighbour message <h>, if a complete IPv6 entry, added to <f>. */
static int neigh6_add(struct neigh_family *f, const struct nlmsghdr *h)
{
	const struct ndmsg *nd = NLMSG_DATA(h);
	const struct rtattr *a = (const void *)((const char *)nd + NLMSG_ALIGN(sizeof(*nd)));
	int len = (int)h->nlmsg_len - NLMSG_LENGTH(sizeof(*nd));
	const void *dst = NULL, *ll = NULL;
	struct neigh_entry *e;

	if (h->nlmsg_type != RTM_NEWNEIGH || len < 0 || nd->ndm_family != AF_INET6 ||
	    !(nd->ndm_state &
	      (NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | NUD_PROBE | NUD_STALE | NUD_DELAY)))
		return 0;
	for (; RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == NDA_DST && RTA_PAYLOAD(a) == sizeof(struct in6_addr))
			dst = RTA_DATA(a);
		else if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6)
			ll = RTA_DATA(a);
	}
	if (!dst || !ll)
		return 0;
	e = neigh_add(f);
	if (!e)
		return -ENOMEM;
	memcpy(e->addr, dst, sizeof(struct in6_addr));
	memcpy(e->mac, ll, 6);
	e->ifindex = nd->ndm_ifindex;
	return 0;
}

/*
 * One RTM_GETNEIGH dump of the IPv6 neighbour table into <f>. Complete only
 * if it ends with NLMSG_DONE carrying no error: a dump the kernel ends with
 * an error (NLMSG_ERROR, or NLMSG_DONE's negative payload), or one that
 * stops short (end of file, the read bound) is -errno, -EIO if none is
 * given. -EAGAIN if a message says NLM_F_DUMP_INTR (the table changed under
 * the dump: entries may be missing). Before, such a dump was taken as the
 * whole table: a backend it missed read as having no entry, and its error
 * was never seen.
 */
static int neigh6_dump(struct neigh_family *f)
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
	int fd, ret = -EIO, done = 0, intr = 0;

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
		int len = (int)n, add = 0;

		if (n < 0) {
			ret = -errno;
			goto out;
		}
		if (n == 0)
			break;
		for (; !done && add == 0 && NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			intr |= h->nlmsg_flags & NLM_F_DUMP_INTR;
			if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
				/* NLMSG_DONE's payload is the dump's error (0 if none),
				 * NLMSG_ERROR's starts with it */
				int e = h->nlmsg_len >= NLMSG_LENGTH(sizeof(int))
						? *(const int *)NLMSG_DATA(h)
						: -EIO;

				done = 1;
				ret = e < 0 ? e : h->nlmsg_type == NLMSG_DONE ? 0 : -EIO;
			} else {
				add = neigh6_add(f, h);
			}
		}
		if (add < 0) {
			ret = add;
			goto out;
		}
	}
	if (ret == 0 && intr)
		ret = -EAGAIN;
out:
	close(fd);
	return ret;
}

/*
 * The IPv6 neighbour table: one RTM_GETNEIGH dump over rtnetlink, another
 * if the table changed under it (a few at most: then its -EAGAIN). Written
 * by hand rather than with libmnl: one request and one reply loop, and no
 * library to add to the build (libmnl-dev is not in the build image; only
 * the runtime is).
 */
static int neigh6_read(struct neigh_family *f)
{
	int ret;

	for (int tries = 0; tries < 3; tries++) {
		f->n = 0;
		ret = neigh6_dump(f);
		if (ret != -EAGAIN)
			break;
	}
	return ret;
}

/* <fam>'s entries, read on first use. */
static struct neigh_family *neigh_family(struct hashlb_steer_neigh *n, int fam)
{
	struct neigh_family *f = fam == AF_INET ? &n->v4 : &n->v6;

	if (!f->read) {
		f->read = true;
		f->error = fam == AF_INET ? neigh4_read(f) : neigh6_read(f);
		if (f->error < 0)
			f->n = 0; /* what was read before the error is no table */
		else if (f->n > 1)
			qsort(f->entries, f->n, sizeof(f->entries[0]), neigh_cmp);
	}
	return f;
}

int hashlb_steer_neigh_mac(struct hashlb_steer_neigh *n, const struct sockaddr_storage *addr,
			   const char *dev, uint8_t ret_mac[6])
{
	struct neigh_entry want = { 0 };
	const struct neigh_family *f;
	uint32_t lo = 0, hi;
	int ifindex = 0;

	if (addr->ss_family == AF_INET6) {
		if (dev && (strcmp(dev, n->dev) != 0 || !n->dev_ifindex)) {
			snprintf(n->dev, sizeof(n->dev), "%s", dev);
			n->dev_ifindex = (int)if_nametoindex(dev);
		}
		ifindex = dev ? n->dev_ifindex : 0;
		if (dev && !ifindex)
			return -ENODEV;
		memcpy(want.addr, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
	} else if (addr->ss_family == AF_INET) {
		memcpy(want.addr, &((const struct sockaddr_in *)addr)->sin_addr, 4);
	} else {
		return -EAFNOSUPPORT;
	}
	f = neigh_family(n, addr->ss_family);
	if (f->error < 0)
		return f->error;
	/* the first entry of the address, then the first of those on <dev> */
	for (hi = f->n; lo < hi;) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (memcmp(f->entries[mid].addr, want.addr, sizeof(want.addr)) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < f->n && !memcmp(f->entries[lo].addr, want.addr, sizeof(want.addr)); lo++) {
		const struct neigh_entry *e = &f->entries[lo];

		if (addr->ss_family == AF_INET ? dev && strcmp(dev, e->ifname) != 0
					       : ifindex && e->ifindex != ifindex)
			continue;
		memcpy(ret_mac, e->mac, 6);
		return 0;
	}
	return -ENOENT;
}

/* Whether the first <bits> bits of <a> and <b> (<len> bytes each) are the same. */
static bool prefix_same(const uint8_t *a, const uint8_t *b, size_t len, unsigned bits)
{
	for (size_t i = 0; i < len && bits; i++) {
		unsigned n = bits < 8 ? bits : 8;
		uint8_t mask = (uint8_t)(0xff << (8 - n));

		if ((a[i] ^ b[i]) & mask)
			return false;
		bits -= n;
	}
	return true;
}

/* The bits set in netmask <m> (<len> bytes). */
static unsigned mask_bits(const uint8_t *m, size_t len)
{
	unsigned n = 0;

	for (size_t i = 0; i < len; i++)
		n += (unsigned)__builtin_popcount(m[i]);
	return n;
}

/* Whether getifaddrs() name <name> is interface <dev>'s: <dev> itself, or an IPv4
 * address's label under it, "eth0:1" (getifaddrs() reports such an address under its
 * label, and a backend on its subnet was called off-subnet). */
static bool ifa_is_dev(const char *name, const char *dev)
{
	size_t len = strlen(dev);

	return !strncmp(name, dev, len) && (name[len] == '\0' || name[len] == ':');
}

/* hashlb_steer_on_subnet() over the addresses <all>. */
static int subnet_of(const struct ifaddrs *all, const struct sockaddr_storage *addr,
		     const char *dev)
{
	size_t len = addr->ss_family == AF_INET6 ? 16 : 4;
	const uint8_t *want =
		addr->ss_family == AF_INET6
			? ((const struct sockaddr_in6 *)addr)->sin6_addr.s6_addr
			: (const uint8_t *)&((const struct sockaddr_in *)addr)->sin_addr;
	const struct ifaddrs *ifa;
	int ret = 0;

	if (addr->ss_family != AF_INET && addr->ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	for (ifa = all; ifa && !ret; ifa = ifa->ifa_next) {
		const uint8_t *a, *m;

		if (!ifa->ifa_addr || !ifa->ifa_netmask || !ifa_is_dev(ifa->ifa_name, dev) ||
		    ifa->ifa_addr->sa_family != addr->ss_family)
			continue;
		if (addr->ss_family == AF_INET6) {
			a = ((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr.s6_addr;
			m = ((const struct sockaddr_in6 *)ifa->ifa_netmask)->sin6_addr.s6_addr;
		} else {
			a = (const uint8_t *)&((const struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
			m = (const uint8_t *)&((const struct sockaddr_in *)ifa->ifa_netmask)
				    ->sin_addr;
		}
		ret = prefix_same(a, want, len, mask_bits(m, len));
	}
	return ret;
}

int hashlb_steer_on_subnet(const struct sockaddr_storage *addr, const char *dev)
{
	struct ifaddrs *all;
	int ret;

	if (addr->ss_family != AF_INET && addr->ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	if (getifaddrs(&all) < 0)
		return -errno;
	ret = subnet_of(all, addr, dev);
	freeifaddrs(all);
	return ret;
}

bool hashlb_steer_neigh_missing(struct hashlb_steer_neigh *n, const struct sockaddr_storage *addr,
				const char *dev)
{
	uint8_t mac[6];

	if (hashlb_steer_neigh_mac(n, addr, dev, mac) != -ENOENT)
		return false;
	if (!n->ifa_read)
		n->ifa_read = getifaddrs(&n->ifa) < 0 ? -errno : 1;
	return n->ifa_read == 1 && subnet_of(n->ifa, addr, dev) == 1;
}

int hashlb_steer_neigh_solicit(const struct sockaddr_storage *addr, const char *dev)
{
	size_t len = addr->ss_family == AF_INET6 ? 16 : 4;
	struct {
		struct nlmsghdr h;
		struct ndmsg nd;
		struct rtattr dst;
		uint8_t addr[16];
	} req = {
		.h = { .nlmsg_type = RTM_NEWNEIGH,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE,
		       .nlmsg_seq = 1 },
		/* NTF_USE: the kernel resolves the entry as for a packet sent to it (its
		 * state given is not applied), as `ip neigh replace ADDR dev DEV use` */
		.nd = { .ndm_family = (uint8_t)addr->ss_family,
			.ndm_state = NUD_NONE,
			.ndm_flags = NTF_USE },
		.dst = { .rta_type = NDA_DST, .rta_len = (unsigned short)RTA_LENGTH(len) },
	};
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	char buf[1024] __attribute__((aligned(NLMSG_ALIGNTO)));
	const struct nlmsghdr *h = (const void *)buf;
	ssize_t n;
	int fd, ret;

	if (addr->ss_family != AF_INET && addr->ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	req.nd.ndm_ifindex = (int)if_nametoindex(dev);
	if (!req.nd.ndm_ifindex)
		return -ENODEV;
	memcpy(req.addr,
	       addr->ss_family == AF_INET6
		       ? (const void *)((const struct sockaddr_in6 *)addr)->sin6_addr.s6_addr
		       : (const void *)&((const struct sockaddr_in *)addr)->sin_addr,
	       len);
	req.h.nlmsg_len = (uint32_t)(NLMSG_LENGTH(sizeof(struct ndmsg)) + RTA_LENGTH(len));
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	if (sendto(fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&nl, sizeof(nl)) < 0) {
		ret = -errno;
	} else if ((n = recv(fd, buf, sizeof(buf), 0)) < 0) {
		ret = -errno;
	} else if (!NLMSG_OK(h, (int)n) || h->nlmsg_type != NLMSG_ERROR ||
		   h->nlmsg_len < NLMSG_LENGTH(sizeof(int))) {
		ret = -EIO;
	} else {
		ret = *(const int *)NLMSG_DATA(h); /* the ack: 0, or -errno */
	}
	close(fd);
	return ret;
}
