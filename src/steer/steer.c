// SPDX-License-Identifier: MIT
/*
 * Kernel steering loader: loads bpf/steer.bpf.c through its skeleton,
 * attaches it (XDP native, XDP generic or tc clsact), and writes VIPs and
 * table halves into its maps. A handle is either the loader's own (it has
 * the skeleton and detaches on free) or found on an interface (map fds only,
 * read through the attached program's map ids).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "hashlb/steer.h"
#include "steer.skel.h"
#include "bregions.h"
#include "xdp_hook.h"

#define TC_HANDLE 0x4c42 /* "LB" */
#define TC_PRIORITY 1

enum map_id {
	M_VIPS,
	M_ACTIVE,
	M_TABLES,
	M_BACKENDS,
	M_BSLOTS,
	M_SLOTS,
	M_POINTS,
	M_BUCKETS,
	M_CT,
	M_STATS,
	M_SYNC,
	M_STATS2,
	M_TSTATS,
	M_TSTATS2,
	M_TNAMES,
	M_MAX
};

/* Kernel map names (15 characters at most), as in bpf/steer.bpf.c. */
static const char *const map_names[M_MAX] = {
	[M_VIPS] = "hlb_vips",	       [M_ACTIVE] = "hlb_active",   [M_TABLES] = "hlb_tables",
	[M_BACKENDS] = "hlb_backends", [M_BSLOTS] = "hlb_bslots",   [M_SLOTS] = "hlb_slots",
	[M_POINTS] = "hlb_points",     [M_BUCKETS] = "hlb_buckets", [M_CT] = "hlb_ct",
	[M_STATS] = "hlb_stats",       [M_SYNC] = "hlb_sync",	    [M_STATS2] = "hlb_stats2",
	[M_TSTATS] = "hlb_tstats",     [M_TSTATS2] = "hlb_tstats2", [M_TNAMES] = "hlb_tnames",
};

/*
 * hlb_buckets' name in a program of several tables (hashlb run, several
 * services on an interface). A hashlb of before those (which requires every
 * map of map_names, map_required()) finds no hlb_buckets there and refuses
 * the program as another version's, where it read it as one table of several
 * times the capacity: it wrote its table over another's, flipped every other
 * table to its stale half and removed the other services' VIPs. A program of
 * one table keeps the name, and an older hashlb can still take it over (a
 * rollback of a single service).
 */
#define MULTI_BUCKETS_NAME "hlb_buckets_n"

enum { SHADOW_SLOTS, SHADOW_POINTS, SHADOW_BUCKETS, SHADOW_MAX };

struct hashlb_steer {
	struct hlb_steer_bpf *skel; /* NULL for a found handle */
	int fd[M_MAX]; /* borrowed from skel, or owned when found */
	int sync_inner_fd; /* the barrier's inner map */
	uint32_t backends_cap, slots_cap, points_cap, buckets_cap;
	/*
	 * The program's tables (its tables_cap: 1, the layout of before, or
	 * one a service of a hashlb run on the interface) and the one this
	 * handle publishes (hashlb_steer_share()). With more than one, a
	 * table flips alone: its VIPs' entries name the half in force
	 * (<vflag>: HLB_STEER_VIP_F_HALF or 0), rewritten with a flip of the
	 * VIP half (vips_flip_table()) as they are in force, every other
	 * table's VIPs left as they are.
	 */
	uint32_t tables, table;
	/* hlb_bslots' layout (struct hlb_steer_bregion), the program's bslot_regions: none,
	 * table t's slots at t * backends_cap, unless its backends grew with several tables */
	struct hlb_steer_bregion bregions[HLB_STEER_BREGIONS_MAX];
	uint32_t n_bregions;
	uint32_t vflag;
	uint32_t ct_buckets; /* hlb_ct's entries, a power of two */
	/* hlb_stats' and hlb_stats2's value sizes: a program another hashlb
	 * loaded may have other ones (steer_shared.h), hlb_stats2 none (0) */
	uint32_t stats_size, stats2_size;
	/* hlb_tstats2's value size: read by it, as hlb_stats2's (0: none, an older program) */
	uint32_t tstats2_size;
	/* the name this handle gave its table (hashlb_steer_set_name()), written again
	 * into a program that replaces its own (hashlb_steer_grow()) */
	char name[HLB_STEER_TNAME_MAX + 1];
	/* the program reads hash_prefix (struct hlb_steer_table's v4_prefix,
	 * v6_prefix); one an older hashlb loaded had padding there */
	bool reads_prefix;
	/* the program keeps a conntrack hash's ext bits (struct hlb_steer_ct_bucket):
	 * it tells a reused tuple's SYN from a tag matched by chance. One an
	 * older hashlb loaded has padding there, and may not even read
	 * HLB_STEER_BACKEND_F_OUT */
	bool reads_ext;
	uint64_t ct_seed; /* the conntrack hash's seed: opened handles only (and grown) */
	struct hlb_steer_ct_bucket *ct; /* hlb_ct mapped, ct_buckets long */
	enum hashlb_steer_mode mode;
	int ifindex;
	bool tc_hook_created;
	bool keep;
	uint32_t prog_id; /* the program attached (found, or attached here) */
	uint8_t if_mac[6];
	/* What the table arrays' halves hold, as this handle wrote them
	 * (shadow_add()): a publication sends only the elements that differ.
	 * For hlb_slots, hlb_points, hlb_buckets. */
	struct shadow {
		unsigned char *v; /* two halves of <cap> values of <size> bytes */
		uint32_t size, cap;
		uint32_t known[2]; /* each half's first elements it mirrors */
	} shadow[SHADOW_MAX];
	/* Each half's hlb_tables entry as this handle last wrote it (a loaded
	 * program's: all zero), <wrote> if it did. Another loader's
	 * publication into the half since (an upgrade's new process, while the
	 * old one still publishes; an older hashlb) leaves another entry: the
	 * copies of that half are stale then (shadow_check()). */
	struct hlb_steer_table written[2];
	bool wrote[2];
	/* a shadow allocated now may take each half for all zero, as loaded */
	bool pristine[2];
	uint16_t stamp; /* the last publication's, 1..HLB_STEER_STAMP_WRITING - 1 */
	/* asked before a table is put in force (hashlb_steer_set_abort()) */
	bool (*abort)(void *arg);
	void *abort_arg;
	/* why the last publication ran without the lock (publish_lock()) */
	char unlocked[160];
	uint32_t lock_id; /* hlb_active's map id, once read: names the lock file */
	/* Publications only try the lock (hashlb_steer_set_lock_try()); then
	 * the first and the latest try that found it held, in a row (CLOCK_MONOTONIC
	 * ms, 0: none). */
	bool lock_try;
	uint64_t busy_first_ms, busy_last_ms;
};

static int vflag_read(struct hashlb_steer *s);
static int vflag_sync(struct hashlb_steer *s);
static int vips_read(struct hashlb_steer *s, uint32_t *ret_active, struct hlb_steer_vip **ret_cur);

bool hashlb_steer_supported(void)
{
	return true;
}

static int if_mac(const char *iface, uint8_t mac[6])
{
	struct ifreq ifr;
	int fd, ret = 0;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	strncpy(ifr.ifr_name, iface, IFNAMSIZ - 1);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
		ret = -errno;
	else
		memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
	close(fd);
	return ret;
}

/* Whether <ifindex> is a veth: its native XDP_TX reaches the peer only when
 * the peer runs XDP too, so "auto" skips native XDP there. */
static bool is_veth(int ifindex)
{
	struct ethtool_drvinfo info = { .cmd = ETHTOOL_GDRVINFO };
	struct ifreq ifr;
	bool veth = false;
	int fd;

	memset(&ifr, 0, sizeof(ifr));
	if (!if_indextoname((unsigned)ifindex, ifr.ifr_name))
		return false;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	ifr.ifr_data = (void *)&info;
	if (ioctl(fd, SIOCETHTOOL, &ifr) == 0)
		veth = strcmp(info.driver, "veth") == 0;
	close(fd);
	return veth;
}

static struct hashlb_steer *steer_new(void)
{
	struct hashlb_steer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	for (int i = 0; i < M_MAX; i++)
		s->fd[i] = -1;
	s->sync_inner_fd = -1;
	s->tables = 1;
	/* its publications' stamps start where another loader's are unlikely */
	if (getrandom(&s->stamp, sizeof(s->stamp), GRND_NONBLOCK) != sizeof(s->stamp))
		s->stamp = (uint16_t)(getpid() ^ time(NULL));
	return s;
}

static int sync_inner_create(struct hashlb_steer *s)
{
	s->sync_inner_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "hlb_sync_in", 4, 4, 1, NULL);
	return s->sync_inner_fd < 0 ? -errno : 0;
}

/* Map <map> of a program not loaded yet created as <name>, as the object
 * declares it otherwise (MULTI_BUCKETS_NAME). No BTF: its values are u32. */
static int map_renamed(struct bpf_map *map, const char *name)
{
	LIBBPF_OPTS(bpf_map_create_opts, mo, .map_flags = bpf_map__map_flags(map));
	int fd = bpf_map_create(bpf_map__type(map), name, bpf_map__key_size(map),
				bpf_map__value_size(map), bpf_map__max_entries(map), &mo);
	int ret;

	if (fd < 0)
		return -errno;
	ret = bpf_map__reuse_fd(map, fd); /* dups it */
	close(fd);
	return ret;
}

/* Wait until no BPF program runs that started before this call: updating a
 * map-in-map element does a synchronize_rcu() before returning. */
static int steer_barrier(struct hashlb_steer *s)
{
	uint32_t zero = 0;

	if (bpf_map_update_elem(s->fd[M_SYNC], &zero, &s->sync_inner_fd, BPF_ANY) < 0)
		return -errno;
	return 0;
}

/* Make <value> the active word (bits: table half, VIP half), then wait until
 * no program still reads the halves it replaces, so they may be rewritten. */
static int steer_flip(struct hashlb_steer *s, uint32_t value)
{
	uint32_t zero = 0;

	/* One aligned 32-bit value: readers see the old word or the new. */
	if (bpf_map_update_elem(s->fd[M_ACTIVE], &zero, &value, BPF_ANY) < 0)
		return -errno;
	if (s->fd[M_SYNC] >= 0 && s->sync_inner_fd >= 0)
		return steer_barrier(s);
	/* A found handle has no barrier map: programs run for microseconds, a
	 * pause of milliseconds outlasts them. */
	usleep(20000);
	return 0;
}

/* Map hlb_ct (s->fd[M_CT], s->ct_buckets set) into s->ct. */
static int ct_map(struct hashlb_steer *s)
{
	size_t len = (size_t)s->ct_buckets * sizeof(*s->ct);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd[M_CT], 0);

	if (p == MAP_FAILED)
		return -errno;
	s->ct = p;
	return 0;
}

static uint32_t max_u32(uint32_t a, uint32_t b)
{
	return a > b ? a : b;
}

/* Table <t>'s backend slot <i>: its index in hlb_bslots, which conntrack entries name. */
static uint32_t bslot(const struct hashlb_steer *s, uint32_t t, uint32_t i)
{
	return bregions_slot(s->bregions, s->n_bregions, s->backends_cap, t, i);
}

/* <s>'s layout of hlb_bslots into <to>, a handle of the same program. */
static void bregions_copy(struct hashlb_steer *to, const struct hashlb_steer *s)
{
	memcpy(to->bregions, s->bregions, sizeof(to->bregions));
	to->n_bregions = s->n_bregions;
}

/* The name of program <id> (the kernel keeps 15 characters) into <ret_name>;
 * "" if it cannot be read. */
static void prog_name(uint32_t id, char ret_name[BPF_OBJ_NAME_LEN])
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);
	int fd = bpf_prog_get_fd_by_id(id);

	ret_name[0] = 0;
	if (fd < 0)
		return;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
		snprintf(ret_name, BPF_OBJ_NAME_LEN, "%s", info.name);
	close(fd);
}

/* Whether program <id> is named <name>: hashlb's programs are told from
 * anyone else's by name. */
static bool prog_named(uint32_t id, const char *name)
{
	char have[BPF_OBJ_NAME_LEN];

	prog_name(id, have);
	return strcmp(have, name) == 0;
}

/* The ids of the maps program <id> uses (32 at most) into <ret_ids>, their
 * number into *<ret_n>. 0 or -errno. */
static int prog_map_ids(uint32_t id, uint32_t ret_ids[32], uint32_t *ret_n)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);
	int fd = bpf_prog_get_fd_by_id(id), ret;

	if (fd < 0)
		return -errno;
	memset(&info, 0, sizeof(info));
	info.nr_map_ids = 32;
	info.map_ids = (uint64_t)(uintptr_t)ret_ids;
	ret = bpf_obj_get_info_by_fd(fd, &info, &len) < 0 ? -errno : 0;
	close(fd);
	if (ret == 0)
		*ret_n = info.nr_map_ids < 32 ? info.nr_map_ids : 32;
	return ret;
}

/* Map <id> opened, its fd (-1 if it cannot be), and what it is into <ret_mi>. */
static int map_open(uint32_t id, struct bpf_map_info *ret_mi)
{
	uint32_t len = sizeof(*ret_mi);
	int fd = bpf_map_get_fd_by_id(id);

	if (fd < 0)
		return -1;
	memset(ret_mi, 0, sizeof(*ret_mi));
	if (bpf_obj_get_info_by_fd(fd, ret_mi, &len) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Whether hashlb's program found on an interface must use map <m> to be this
 * hashlb version's: the barrier map is no program's (waited for by time
 * without it, steer_flip()), hlb_stats2 an older program's lacks
 * (its counters read 0), hlb_tstats and hlb_tstats2 (no table's own counters), and
 * hlb_tnames (no table's service named). One rule for
 * attach()'s and hashlb_steer_find()'s. */
static bool map_required(int m)
{
	return m != M_SYNC && m != M_STATS2 && m != M_TSTATS && m != M_TSTATS2 && m != M_TNAMES;
}

/* The index in map_names of map <name>, or -1: not one of hashlb's. */
static int map_index(const char *name)
{
	for (int m = 0; m < M_MAX; m++)
		if (strcmp(name, map_names[m]) == 0)
			return m;
	if (strcmp(name, HLB_STEER_BSLOTS_REGIONS_NAME) == 0)
		return M_BSLOTS;
	return strcmp(name, MULTI_BUCKETS_NAME) == 0 ? M_BUCKETS : -1;
}

/* The first map this hashlb drives a program through that program <id>
 * (named as hashlb's) lacks, or NULL: one that lacks one was loaded by
 * another hashlb version, whose maps are named otherwise (map_required()). */
static const char *prog_lacks(uint32_t id)
{
	uint32_t map_ids[32], n = 0;
	bool has[M_MAX] = { false };

	if (prog_map_ids(id, map_ids, &n) < 0)
		return NULL; /* gone, or unreadable: said where it is opened */
	for (uint32_t i = 0; i < n; i++) {
		struct bpf_map_info mi;
		int fd = map_open(map_ids[i], &mi), m;

		if (fd < 0)
			continue;
		m = map_index(mi.name);
		if (m >= 0)
			has[m] = true;
		close(fd);
	}
	for (int m = 0; m < M_MAX; m++)
		if (map_required(m) && !has[m])
			return map_names[m];
	return NULL;
}

/* What removes an XDP program attached in <mode> by hand: ip link's word. */
static const char *xdp_off_word(enum hashlb_steer_mode mode)
{
	return xdp_hook_off(mode == HASHLB_STEER_XDP_GENERIC ? XDP_HOOK_GENERIC : XDP_HOOK_NATIVE);
}

/*
 * -EPROTO, <err> (after <what>) saying that program <id> on <iface> in <mode>, named as
 * hashlb's, <why> (it cannot be driven: taken over, updated, read), and how to remove it.
 */
static int not_readable(struct hashlb_error *err, const char *what, const char *iface,
			enum hashlb_steer_mode mode, uint32_t id, const char *why)
{
	char name[BPF_OBJ_NAME_LEN], remedy[2 * IF_NAMESIZE + 96];

	prog_name(id, name);
	if (mode == HASHLB_STEER_TC)
		snprintf(remedy, sizeof(remedy), "hashlb steer -i %s --mode tc --detach", iface);
	else
		snprintf(remedy, sizeof(remedy),
			 "hashlb steer -i %s --detach, or ip link set dev %s %s off", iface, iface,
			 xdp_off_word(mode));
	return hashlb_err(err, -EPROTO, HASHLB_ERR_SYSTEM,
			  "%sthe program on '%s' (%s, program %u '%s') %s: detach it first (%s)",
			  what, iface, hashlb_steer_mode_name(mode), id, name, why, remedy);
}

/*
 * -EPROTO, <err> (after <what>) saying that program <id> on <iface> in <mode>,
 * named as hashlb's, lacks map <missing>: another hashlb version's, which
 * this one cannot drive (take over, update, read), and how to remove it.
 * Before, that was -ENOENT, read as no program there by hashlb run, whose
 * attach was then refused as if this hashlb's were there already.
 */
static int other_version(struct hashlb_error *err, const char *what, const char *iface,
			 enum hashlb_steer_mode mode, uint32_t id, const char *missing)
{
	char why[BPF_OBJ_NAME_LEN + 48];

	snprintf(why, sizeof(why), "is another hashlb version's (no map '%s')", missing);
	return not_readable(err, what, iface, mode, id, why);
}

/*
 * -EBUSY, <err> saying an XDP program not hashlb's is attached to <ifindex>
 * (its mode, id and name; before, only that there was one) and what to do.
 * The mode is the one the kernel reports: an offloaded program (the NIC's),
 * alone or beside a native or generic one, is named so, with `xdpoffload
 * off` (before: taken for a native one, with `xdp off`, which leaves it).
 */
static int foreign_xdp(struct hashlb_error *err, int ifindex, int ret, const char *what)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, xq);
	char iface[IF_NAMESIZE] = "?", names[2][BPF_OBJ_NAME_LEN] = { "", "" };
	const char *name_of[2] = { names[0], names[1] };
	struct xdp_hook_prog at[2];
	char msg[sizeof(err->msg)];
	uint32_t n = 0;

	if_indextoname((unsigned)ifindex, iface);
	if (bpf_xdp_query(ifindex, 0, &xq) == 0)
		n = xdp_hook_progs(xq.attach_mode, xq.drv_prog_id, xq.skb_prog_id, xq.hw_prog_id,
				   at);
	if (!n)
		return hashlb_err(err, ret, HASHLB_ERR_SYSTEM,
				  "%s%s (another XDP program is attached)", what, strerror(-ret));
	for (uint32_t i = 0; i < n; i++)
		prog_name(at[i].id, names[i]);
	xdp_hook_foreign(msg, sizeof(msg), what, iface, at, name_of, n);
	return hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "%s", msg);
}

static int attach_xdp(struct hashlb_steer *s, enum hashlb_steer_mode mode, struct hashlb_error *err)
{
	uint32_t flags = mode == HASHLB_STEER_XDP_NATIVE ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE;
	int ret = bpf_xdp_attach(s->ifindex, bpf_program__fd(s->skel->progs.hlb_xdp),
				 flags | XDP_FLAGS_UPDATE_IF_NOEXIST, NULL);

	if (ret == -EBUSY || ret == -EEXIST) {
		char what[64];

		snprintf(what, sizeof(what), "attaching %s failed: ", hashlb_steer_mode_name(mode));
		return foreign_xdp(err, s->ifindex, ret, what);
	}
	if (ret < 0)
		return hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "attaching %s failed: %s",
				  hashlb_steer_mode_name(mode), strerror(-ret));
	s->mode = mode;
	return 0;
}

/*
 * libbpf prints the kernel's netlink error message ("libbpf: Kernel error
 * message: ...") whenever a tc request fails, even one whose failure is an
 * answer here: a clsact qdisc already there ("Exclusivity flag on, cannot
 * modify"), no tc filter or no qdisc to find ("Cannot find specified filter
 * chain", "Parent Qdisc doesn't exists"). Such calls run between
 * quiet_begin() and quiet_end(), which drop that message on this thread;
 * every other message goes on to the printer set before (libbpf's own by
 * default, which prints warnings).
 */
static _Thread_local bool quiet_netlink;
static libbpf_print_fn_t print_next;
static pthread_once_t print_once = PTHREAD_ONCE_INIT;

static int print_filtered(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (quiet_netlink && strstr(fmt, "Kernel error message"))
		return 0;
	return print_next ? print_next(level, fmt, args) : 0;
}

static void print_install(void)
{
	print_next = libbpf_set_print(print_filtered);
}

static void quiet_begin(void)
{
	pthread_once(&print_once, print_install);
	quiet_netlink = true;
}

static void quiet_end(void)
{
	quiet_netlink = false;
}

/* Set <bits> in the active word of <s>: a read-modify-write, as each flip
 * is. The loader before the program is attached writes it alone; once
 * another process may publish into the program (the replaced hashlb, side
 * by side), under the publication lock (hashlb_steer_set_daemon()), or its
 * flip and this would undo one another. Returns 0 or -errno. */
static int active_or(struct hashlb_steer *s, uint32_t bits)
{
	uint32_t zero = 0, active = 0;

	if (bpf_map_lookup_elem(s->fd[M_ACTIVE], &zero, &active) < 0)
		return -errno;
	if ((active & bits) == bits)
		return 0;
	active |= bits;
	if (bpf_map_update_elem(s->fd[M_ACTIVE], &zero, &active, BPF_ANY) < 0)
		return -errno;
	return 0;
}

/* Whether the active word of <s> has all of <bits>. */
static bool active_has(struct hashlb_steer *s, uint32_t bits)
{
	uint32_t zero = 0, active = 0;

	return bpf_map_lookup_elem(s->fd[M_ACTIVE], &zero, &active) == 0 && (active & bits) == bits;
}

static int attach_tc(struct hashlb_steer *s, struct hashlb_error *err)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = s->ifindex, .attach_point = BPF_TC_INGRESS);
	LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = bpf_program__fd(s->skel->progs.hlb_tc),
		    .handle = TC_HANDLE, .priority = TC_PRIORITY);
	int ret;

	quiet_begin(); /* -EEXIST: the qdisc is there already, fine */
	ret = bpf_tc_hook_create(&hook);
	quiet_end();
	if (ret < 0 && ret != -EEXIST)
		return hashlb_err(err, ret, HASHLB_ERR_SYSTEM,
				  "creating the clsact qdisc failed: %s", strerror(-ret));
	s->tc_hook_created = ret == 0;
	/* Recorded in the program's maps: after --keep, the process that
	 * detaches is another one. Before the filter is attached: no program
	 * reads the word yet. */
	if (s->tc_hook_created)
		active_or(s, HLB_STEER_ACTIVE_CLSACT);
	ret = bpf_tc_attach(&hook, &opts);
	if (ret < 0 && s->tc_hook_created) {
		/* Leave the interface as it was: AUTO may go on to XDP. */
		hook.attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
		bpf_tc_hook_destroy(&hook);
		s->tc_hook_created = false;
	}
	if (ret < 0)
		return hashlb_err(
			err, ret, HASHLB_ERR_SYSTEM, "attaching tc failed: %s%s", strerror(-ret),
			ret == -EEXIST ? " (a hashlb tc filter is attached already)" : "");
	s->mode = HASHLB_STEER_TC;
	return 0;
}

static uint32_t attached_progs(int ifindex, enum hashlb_steer_mode want, uint32_t ret_id[2],
			       enum hashlb_steer_mode ret_mode[2]);
static pid_t steer_holder(struct hashlb_steer *s);

/*
 * -EEXIST, <err> saying that hashlb's program <id> is attached to <iface> in <mode>
 * already, and what to do about it, which depends on who drives it: a live hashlb run
 * (refuses --update and --detach: its config and hashlb ctl change its table), a live
 * foreground hashlb steer (refuses --detach: stopping it detaches the program), or nobody
 * (--keep, an orphan). Before, --update and --detach were offered in every case.
 */
static int steered_already(struct hashlb_error *err, const char *iface, enum hashlb_steer_mode mode,
			   uint32_t id)
{
	struct hashlb_error find_err = { 0 };
	struct hashlb_steer *o = NULL;
	const char *who = NULL, *remedy = "--update changes its table, --detach removes it";
	pid_t holder = 0;

	/* at the XDP hook: either flavour, the kernel holds one */
	if (hashlb_steer_find(iface,
			      mode == HASHLB_STEER_TC ? HASHLB_STEER_TC : HASHLB_STEER_XDP_NATIVE,
			      &o, &find_err) == 0 &&
	    o->prog_id == id) {
		holder = steer_holder(o);
		if (holder > 0 && active_has(o, HLB_STEER_ACTIVE_DAEMON)) {
			who = "hashlb run";
			remedy = "change its config (and reload) or use hashlb ctl";
		} else if (holder > 0 && active_has(o, HLB_STEER_ACTIVE_OWNED)) {
			who = "a foreground hashlb steer";
			remedy = "--update changes its table; stop it (SIGINT, SIGTERM or SIGHUP) "
				 "and it detaches the program";
		}
	}
	hashlb_steer_free(o); /* found, so kept */
	if (who)
		return hashlb_err(err, -EEXIST, HASHLB_ERR_SYSTEM,
				  "attaching failed: hashlb steers this interface already (%s, "
				  "program %u), driven by %s (process %d): %s",
				  hashlb_steer_mode_name(mode), id, who, (int)holder, remedy);
	return hashlb_err(err, -EEXIST, HASHLB_ERR_SYSTEM,
			  "attaching failed: hashlb steers this interface already (%s, "
			  "program %u): %s",
			  hashlb_steer_mode_name(mode), id, remedy);
}

/*
 * An explicit mode tries that one only. AUTO tries native XDP (not on a
 * veth), then tc, and generic XDP only where tc cannot attach: generic XDP
 * must linearize every non-linear skb (GRO and GSO packets, 64 KiB each)
 * before the program sees it, and in the namespace benchmark it moved TCP
 * at 0.82-0.84x a direct connection where tc moved 0.90-0.93x (three runs,
 * docs/steering.md). Another program in the way is an error in every case:
 * we never replace someone else's, and AUTO never attaches beside a foreign
 * XDP program either (it would see the packets first).
 */
static int attach(struct hashlb_steer *s, enum hashlb_steer_mode mode, struct hashlb_error *err)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, xq);
	enum hashlb_steer_mode found[2];
	uint32_t id[2];
	int ret;

	/* hashlb's program on the other hook would split the interface between
	 * two tables: XDP takes every packet before tc sees it. */
	if (attached_progs(s->ifindex, HASHLB_STEER_AUTO, id, found)) {
		const char *missing = prog_lacks(id[0]);
		char iface[IF_NAMESIZE] = "?";

		if_indextoname((unsigned)s->ifindex, iface);
		if (missing)
			return other_version(err, "attaching failed: ", iface, found[0], id[0],
					     missing);
		return steered_already(err, iface, found[0], id[0]);
	}
	if (mode != HASHLB_STEER_AUTO && mode != HASHLB_STEER_TC)
		return attach_xdp(s, mode, err);
	if (mode == HASHLB_STEER_TC)
		return attach_tc(s, err);

	if (bpf_xdp_query(s->ifindex, 0, &xq) == 0 &&
	    (xq.drv_prog_id || xq.skb_prog_id || xq.hw_prog_id))
		return foreign_xdp(err, s->ifindex, -EBUSY, "attaching failed: ");
	if (!is_veth(s->ifindex)) {
		ret = attach_xdp(s, HASHLB_STEER_XDP_NATIVE, err);
		if (ret == 0 || ret == -EBUSY || ret == -EEXIST)
			return ret;
	}
	ret = attach_tc(s, err);
	if (ret == 0 || ret == -EEXIST)
		return ret;
	return attach_xdp(s, HASHLB_STEER_XDP_GENERIC, err);
}

/*
 * Whether a filter other than hashlb's (detached already) is left on the
 * clsact qdisc of <ifindex>, ingress or egress: one RTM_GETTFILTER dump each.
 * Someone may have added theirs to the qdisc hashlb created; destroying it
 * would take those too. When it cannot tell, it says yes: an empty qdisc
 * left behind costs nothing, a filter lost does.
 */
static bool clsact_in_use(int ifindex)
{
	static const uint32_t parents[] = { TC_H_MIN_INGRESS, TC_H_MIN_EGRESS };
	char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	bool used = false;
	int fd;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return true;
	for (size_t i = 0; i < sizeof(parents) / sizeof(parents[0]) && !used; i++) {
		struct {
			struct nlmsghdr h;
			struct tcmsg tc;
		} req = {
			.h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct tcmsg)),
			       .nlmsg_type = RTM_GETTFILTER,
			       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
			       .nlmsg_seq = (uint32_t)i + 1 },
			.tc = { .tcm_family = AF_UNSPEC,
				.tcm_ifindex = ifindex,
				.tcm_parent = TC_H_MAKE(TC_H_CLSACT, parents[i]) },
		};
		bool done = false;

		if (sendto(fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&nl, sizeof(nl)) < 0) {
			used = true;
			break;
		}
		while (!done) {
			ssize_t n = recv(fd, buf, sizeof(buf), 0);
			const struct nlmsghdr *h = (const void *)buf;
			int len = (int)n;

			if (n <= 0) {
				used = true;
				break;
			}
			for (; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				if (h->nlmsg_type == NLMSG_DONE) {
					done = true;
				} else if (h->nlmsg_type == NLMSG_ERROR) {
					done = true;
					used = used || e->error != 0;
				} else if (h->nlmsg_type == RTM_NEWTFILTER) {
					used = true;
				}
			}
		}
	}
	close(fd);
	return used;
}

/* Remove the clsact qdisc of <ifindex> (ingress and egress), hashlb's
 * filter detached, if no other filter is on it. */
static void clsact_remove_unused(int ifindex)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex,
		    .attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS);

	if (!clsact_in_use(ifindex))
		bpf_tc_hook_destroy(&hook);
}

static void detach(struct hashlb_steer *s)
{
	if (s->mode == HASHLB_STEER_XDP_NATIVE || s->mode == HASHLB_STEER_XDP_GENERIC) {
		LIBBPF_OPTS(bpf_xdp_attach_opts, xo,
			    .old_prog_fd = bpf_program__fd(s->skel->progs.hlb_xdp));
		uint32_t flags = s->mode == HASHLB_STEER_XDP_NATIVE ? XDP_FLAGS_DRV_MODE
								    : XDP_FLAGS_SKB_MODE;

		/* Only our program: REPLACE fails if someone swapped it. */
		bpf_xdp_attach(s->ifindex, -1, flags | XDP_FLAGS_REPLACE, &xo);
	} else if (s->mode == HASHLB_STEER_TC) {
		LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = s->ifindex,
			    .attach_point = BPF_TC_INGRESS);
		LIBBPF_OPTS(bpf_tc_opts, opts, .handle = TC_HANDLE, .priority = TC_PRIORITY);

		bpf_tc_detach(&hook, &opts);
		if (s->tc_hook_created)
			clsact_remove_unused(s->ifindex);
	}
	s->mode = HASHLB_STEER_LOAD_ONLY;
}

/* The id of program <fd>, 0 if unknown. */
static uint32_t prog_id_of(int fd)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	return bpf_obj_get_info_by_fd(fd, &info, &len) == 0 ? info.id : 0;
}

/* The id of the program of <s>'s skeleton that its mode attaches. */
static uint32_t skel_prog_id(const struct hashlb_steer *s)
{
	return prog_id_of(bpf_program__fd(s->mode == HASHLB_STEER_TC ? s->skel->progs.hlb_tc
								     : s->skel->progs.hlb_xdp));
}

/* -E2BIG, <err> filled, if <s>'s tables of its backends_cap do not fit a
 * conntrack entry, which names a backend's slot in 16 bits, a VIP's table
 * in 8, or those of its points_cap a map; else 0. */
static int tables_fit(const struct hashlb_steer *s, struct hashlb_error *err)
{
	uint64_t buckets =
		(uint64_t)2 * s->tables * HLB_STEER_RING_BUCKETS_PER_POINT * s->points_cap;

	if (s->tables > HASHLB_STEER_TABLES_MAX ||
	    (uint64_t)s->tables * s->backends_cap > HLB_STEER_BACKEND_NONE)
		return hashlb_err(err, -E2BIG, HASHLB_ERR_SIZE_RANGE,
				  "%u tables of %u backends exceed the program's %u backend slots "
				  "(or %u tables)",
				  s->tables, s->backends_cap, HLB_STEER_BACKEND_NONE,
				  HASHLB_STEER_TABLES_MAX);
	/* The largest map, hlb_buckets, holds two halves of every table's ring
	 * index: its size in 64 bits, refused past a map's 32-bit count (before,
	 * 64 tables of 8M-point rings wrapped to a tiny map, its tables then
	 * refused). */
	if (buckets > UINT32_MAX)
		return hashlb_err(err, -E2BIG, HASHLB_ERR_SIZE_RANGE,
				  "%u table%s of %u ring points need %llu ring index buckets, more "
				  "than a BPF map holds (%u)",
				  s->tables, s->tables == 1 ? "" : "s", s->points_cap,
				  (unsigned long long)buckets, UINT32_MAX);
	return 0;
}

/*
 * Load <s>'s programs (their capacities, tables, ct_seed and ct_buckets set)
 * and take their maps' fds; with <from>, its VIPs, active word, conntrack
 * table and counters are the new programs' too (hashlb_steer_grow()).
 * Returns 0 or -errno with <err> filled.
 */
static int skel_load(struct hashlb_steer *s, bool bench_new_flows, const struct hashlb_steer *from,
		     struct hashlb_error *err)
{
	int ret;

	s->skel = hlb_steer_bpf__open();
	if (!s->skel)
		return hashlb_err(err, -errno, HASHLB_ERR_SYSTEM, "opening the BPF object: %s",
				  strerror(errno));
	const struct {
		struct bpf_map *map;
		int m;
	} shared[] = {
		{ s->skel->maps.hlb_vips, M_VIPS },	{ s->skel->maps.hlb_active, M_ACTIVE },
		{ s->skel->maps.hlb_ct, M_CT },		{ s->skel->maps.hlb_stats, M_STATS },
		{ s->skel->maps.hlb_stats2, M_STATS2 },
	};

	s->skel->rodata->backends_cap = s->backends_cap;
	s->skel->rodata->slots_cap = s->slots_cap;
	s->skel->rodata->points_cap = s->points_cap;
	s->skel->rodata->buckets_cap = s->buckets_cap;
	s->skel->rodata->tables_cap = s->tables;
	s->skel->rodata->bench_new_flows = bench_new_flows;
	s->skel->rodata->ct_seed = s->ct_seed;
	s->skel->rodata->ct_mask = s->ct_buckets - 1;
	for (uint32_t k = 0; k < s->n_bregions; k++)
		s->skel->rodata->bslot_regions[k] = s->bregions[k];
	bpf_map__set_max_entries(s->skel->maps.hlb_tables, 2 * s->tables);
	bpf_map__set_max_entries(s->skel->maps.hlb_backends, 2 * s->tables * s->backends_cap);
	bpf_map__set_max_entries(s->skel->maps.hlb_bslots, s->tables * s->backends_cap);
	bpf_map__set_max_entries(s->skel->maps.hlb_slots, 2 * s->tables * s->slots_cap);
	bpf_map__set_max_entries(s->skel->maps.hlb_points, 2 * s->tables * s->points_cap);
	bpf_map__set_max_entries(s->skel->maps.hlb_buckets, 2 * s->tables * s->buckets_cap);
	bpf_map__set_max_entries(s->skel->maps.hlb_ct, s->ct_buckets);
	bpf_map__set_max_entries(s->skel->maps.hlb_tstats, s->tables);
	bpf_map__set_max_entries(s->skel->maps.hlb_tstats2, s->tables);
	bpf_map__set_max_entries(s->skel->maps.hlb_tnames, s->tables);
	ret = s->tables > 1 ? map_renamed(s->skel->maps.hlb_buckets, MULTI_BUCKETS_NAME) : 0;
	if (ret < 0) {
		hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "creating map %s: %s", MULTI_BUCKETS_NAME,
			   strerror(-ret));
		return ret;
	}
	/* laid out in regions: refused by a hashlb that would write slots at t * backends_cap */
	ret = s->n_bregions ? map_renamed(s->skel->maps.hlb_bslots, HLB_STEER_BSLOTS_REGIONS_NAME)
			    : 0;
	if (ret < 0) {
		hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "creating map %s: %s",
			   HLB_STEER_BSLOTS_REGIONS_NAME, strerror(-ret));
		return ret;
	}
	/* a program in <from>'s place goes on with its VIPs, flows and counters */
	for (size_t i = 0; from && i < sizeof(shared) / sizeof(shared[0]); i++) {
		ret = bpf_map__reuse_fd(shared[i].map, from->fd[shared[i].m]);
		if (ret < 0)
			return hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "sharing map %s: %s",
					  map_names[shared[i].m], strerror(-ret));
	}
	ret = hlb_steer_bpf__load(s->skel);
	if (ret < 0) {
		hashlb_err(err, ret, HASHLB_ERR_SYSTEM,
			   "loading the BPF programs failed: %s (run as root; see libbpf's log "
			   "above for the verifier's reason)",
			   strerror(-ret));
		return ret;
	}
	/* its maps all zero, hlb_tables' entries too (s->written) */
	s->wrote[0] = s->wrote[1] = s->pristine[0] = s->pristine[1] = true;
	s->fd[M_VIPS] = bpf_map__fd(s->skel->maps.hlb_vips);
	s->fd[M_ACTIVE] = bpf_map__fd(s->skel->maps.hlb_active);
	s->fd[M_TABLES] = bpf_map__fd(s->skel->maps.hlb_tables);
	s->reads_prefix = true;
	s->reads_ext = true;
	s->fd[M_BACKENDS] = bpf_map__fd(s->skel->maps.hlb_backends);
	s->fd[M_BSLOTS] = bpf_map__fd(s->skel->maps.hlb_bslots);
	s->fd[M_SLOTS] = bpf_map__fd(s->skel->maps.hlb_slots);
	s->fd[M_POINTS] = bpf_map__fd(s->skel->maps.hlb_points);
	s->fd[M_BUCKETS] = bpf_map__fd(s->skel->maps.hlb_buckets);
	s->fd[M_CT] = bpf_map__fd(s->skel->maps.hlb_ct);
	s->fd[M_STATS] = bpf_map__fd(s->skel->maps.hlb_stats);
	s->fd[M_SYNC] = bpf_map__fd(s->skel->maps.hlb_sync);
	s->fd[M_STATS2] = bpf_map__fd(s->skel->maps.hlb_stats2);
	s->fd[M_TSTATS] = bpf_map__fd(s->skel->maps.hlb_tstats);
	s->fd[M_TSTATS2] = bpf_map__fd(s->skel->maps.hlb_tstats2);
	s->fd[M_TNAMES] = bpf_map__fd(s->skel->maps.hlb_tnames);
	s->tstats2_size = sizeof(struct hlb_steer_tstats2);
	s->stats_size = HLB_STEER_STATS_SIZE;
	s->stats2_size = sizeof(struct hlb_steer_stats2);
	return 0;
}

int hashlb_steer_open(const struct hashlb_steer_opts *o, const struct hashlb_table *first,
		      struct hashlb_steer **ret_steer, struct hashlb_error *err)
{
	struct hashlb_table_view v = { 0 };
	struct hashlb_steer_opts room = { 0 };
	struct hashlb_steer *s;
	uint32_t m_max, points, flows = o->flows ? o->flows : HASHLB_STEER_FLOWS_DEFAULT;
	int ret;

	if ((unsigned)o->mode >= HASHLB_STEER_MODE_MAX)
		return hashlb_err(err, -EINVAL, HASHLB_ERR_SYSTEM, "invalid steering mode");
	if (o->mode != HASHLB_STEER_LOAD_ONLY && !o->iface)
		return hashlb_err(err, -EINVAL, HASHLB_ERR_SYSTEM, "no interface given");
	if (flows > HASHLB_STEER_FLOWS_MAX)
		return hashlb_err(err, -E2BIG, HASHLB_ERR_SIZE_RANGE,
				  "%u conntrack entries exceed the maximum %u", flows,
				  HASHLB_STEER_FLOWS_MAX);
	if (first)
		hashlb_table_view(first, &v);

	s = steer_new();
	if (!s)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	s->keep = o->keep;
	s->mode = HASHLB_STEER_LOAD_ONLY;
	if (o->mode != HASHLB_STEER_LOAD_ONLY) {
		s->ifindex = (int)if_nametoindex(o->iface);
		if (!s->ifindex) {
			ret = hashlb_err(err, -ENODEV, HASHLB_ERR_SYSTEM, "no interface '%s'",
					 o->iface);
			goto err_free;
		}
		ret = if_mac(o->iface, s->if_mac);
		if (ret < 0) {
			hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "reading the MAC of '%s': %s",
				   o->iface, strerror(-ret));
			goto err_free;
		}
	}

	/* Room to grow: twice the first table, never less than the defaults. */
	hashlb_steer_size_add(&room, &(struct hashlb_steer_needs){ .backends = v.n_backends,
								   .maglev_m = v.m,
								   .ring_points = v.n_points });
	s->backends_cap = o->max_backends ? o->max_backends : room.max_backends;
	if (s->backends_cap > HASHLB_BACKENDS_MAX)
		s->backends_cap = HASHLB_BACKENDS_MAX;
	m_max = o->max_maglev_m ? o->max_maglev_m : room.max_maglev_m;
	s->slots_cap = (m_max + HLB_STEER_SLOTS_PER_VALUE - 1) / HLB_STEER_SLOTS_PER_VALUE;
	points = o->max_ring_points ? o->max_ring_points : room.max_ring_points;
	s->points_cap = points;
	s->ct_buckets = (uint32_t)(hashlb_steer_flows_capacity(flows) / HLB_STEER_CT_WAYS);
	s->tables = o->tables ? o->tables : 1;
	ret = tables_fit(s, err);
	if (ret < 0)
		goto err_free;
	/* 2^bucket_bits < HLB_STEER_RING_BUCKETS_PER_POINT * points (ring_index) */
	s->buckets_cap = HLB_STEER_RING_BUCKETS_PER_POINT * points;

	/* A seed nobody outside knows: urandom's, else the clock's (no worse
	 * than the fixed one it replaces). */
	if (getrandom(&s->ct_seed, sizeof(s->ct_seed), GRND_NONBLOCK) != sizeof(s->ct_seed)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		s->ct_seed = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)ts.tv_sec ^
			     (uint64_t)getpid() << 32;
	}
	ret = skel_load(s, o->bench_new_flows, NULL, err);
	if (ret < 0)
		goto err_free;
	ret = ct_map(s);
	if (ret == 0)
		ret = sync_inner_create(s);
	if (ret < 0) {
		hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "creating a map: %s", strerror(-ret));
		goto err_free;
	}
	if (o->mode != HASHLB_STEER_LOAD_ONLY) {
		/* Before the attach, as the clsact bit: while this process
		 * lives, --detach leaves its program to it. */
		if (!o->keep)
			active_or(s, HLB_STEER_ACTIVE_OWNED);
		ret = attach(s, o->mode, err);
		if (ret < 0)
			goto err_free;
		s->prog_id = skel_prog_id(s);
	}
	*ret_steer = s;
	return 0;

err_free:
	hashlb_steer_free(s);
	return ret;
}

/*
 * The id of hashlb's program attached to <ifindex> in <mode> (native or
 * generic XDP, tc): hlb_xdp, or the hlb_tc filter at hashlb's handle; 0 if
 * none. A program of another name is someone else's, never reported:
 * nothing here reads, updates or detaches it.
 */
static uint32_t prog_at(int ifindex, enum hashlb_steer_mode mode)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, xq);
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_INGRESS);
	LIBBPF_OPTS(bpf_tc_opts, tq, .handle = TC_HANDLE, .priority = TC_PRIORITY);
	uint32_t id;
	int ret;

	if (mode == HASHLB_STEER_TC) {
		quiet_begin(); /* failing: no qdisc or no filter at our handle */
		ret = bpf_tc_query(&hook, &tq);
		quiet_end();
		return ret == 0 && tq.prog_id && prog_named(tq.prog_id, "hlb_tc") ? tq.prog_id : 0;
	}
	if (bpf_xdp_query(ifindex, 0, &xq) < 0)
		return 0;
	id = mode == HASHLB_STEER_XDP_NATIVE ? xq.drv_prog_id : xq.skb_prog_id;
	return id && prog_named(id, "hlb_xdp") ? id : 0;
}

/* Whether a program found in <found> answers <want>: AUTO any, xdp either
 * XDP flavour (the kernel holds one at a time), else that mode. */
static bool mode_answers(enum hashlb_steer_mode want, enum hashlb_steer_mode found)
{
	return want == HASHLB_STEER_AUTO || want == found ||
	       (want == HASHLB_STEER_XDP_NATIVE && found == HASHLB_STEER_XDP_GENERIC);
}

/* The ids and modes of hashlb's programs attached to <ifindex> that answer
 * <want>: XDP (native, then generic), then tc; how many (0..2). */
static uint32_t attached_progs(int ifindex, enum hashlb_steer_mode want, uint32_t ret_id[2],
			       enum hashlb_steer_mode ret_mode[2])
{
	static const enum hashlb_steer_mode modes[] = { HASHLB_STEER_XDP_NATIVE,
							HASHLB_STEER_XDP_GENERIC, HASHLB_STEER_TC };
	uint32_t n = 0;

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]) && n < 2; i++) {
		uint32_t id = mode_answers(want, modes[i]) ? prog_at(ifindex, modes[i]) : 0;

		if (id) {
			ret_id[n] = id;
			ret_mode[n++] = modes[i];
		}
	}
	return n;
}

/*
 * <iface>'s index and hashlb's program attached to it in <mode> (AUTO: at
 * whichever hook holds one), with an error message. Two, one at the XDP hook
 * and one at tc (attached by two processes, or a hashlb that did not refuse
 * the second), are -ENOTUNIQ with AUTO, both named: before, the XDP one was
 * taken, and --stats, --update and --detach acted on it without a word,
 * the tc one out of reach.
 */
static int find_attached(const char *iface, enum hashlb_steer_mode mode, int *ret_ifindex,
			 uint32_t *ret_id, enum hashlb_steer_mode *ret_mode,
			 struct hashlb_error *err)
{
	int ifindex = (int)if_nametoindex(iface);
	enum hashlb_steer_mode found[2];
	uint32_t ids[2], n;

	if (!ifindex)
		return hashlb_err(err, -ENODEV, HASHLB_ERR_SYSTEM, "no interface '%s'", iface);
	n = attached_progs(ifindex, mode, ids, found);
	if (n == 0 && mode == HASHLB_STEER_AUTO)
		return hashlb_err(err, -ENOENT, HASHLB_ERR_SYSTEM,
				  "no hashlb program is attached to '%s'", iface);
	/* One at the other hook is named, with the --mode that finds it: before,
	 * "no hashlb program" alone, as if nothing were attached. */
	if (n == 0 && attached_progs(ifindex, HASHLB_STEER_AUTO, ids, found) == 1)
		return hashlb_err(err, -ENOENT, HASHLB_ERR_SYSTEM,
				  "no hashlb program is attached to '%s' in %s mode: its "
				  "program is at %s (program %u): --mode %s, or no --mode",
				  iface, hashlb_steer_mode_name(mode),
				  hashlb_steer_mode_name(found[0]), ids[0],
				  hashlb_steer_mode_name(found[0]));
	if (n == 0)
		return hashlb_err(err, -ENOENT, HASHLB_ERR_SYSTEM,
				  "no hashlb program is attached to '%s' in %s mode", iface,
				  hashlb_steer_mode_name(mode));
	if (n == 2)
		return hashlb_err(
			err, -ENOTUNIQ, HASHLB_ERR_SYSTEM,
			"two hashlb programs are attached to '%s', %s (program %u) and %s "
			"(program %u): name one (hashlb steer --mode %s or --mode tc)",
			iface, hashlb_steer_mode_name(found[0]), ids[0],
			hashlb_steer_mode_name(found[1]), ids[1], hashlb_steer_mode_name(found[0]));
	*ret_ifindex = ifindex;
	*ret_id = ids[0];
	*ret_mode = found[0];
	return 0;
}

/*
 * Whether the value of the map <mi> describes has a member <name> in its BTF:
 * what tells a program of this hashlb from an older one's, which has padding
 * where a member was added (v4_prefix in hlb_tables: an older program would
 * hash whole addresses whatever the table said; ext in hlb_ct).
 */
static bool value_has_member(const struct bpf_map_info *mi, const char *name)
{
	const struct btf_member *m;
	const struct btf_type *t;
	struct btf *btf;
	bool found = false;

	if (!mi->btf_id || !mi->btf_value_type_id)
		return false;
	btf = btf__load_from_kernel_by_id(mi->btf_id);
	if (!btf)
		return false;
	t = btf__type_by_id(btf, mi->btf_value_type_id);
	if (t && btf_is_struct(t)) {
		m = btf_members(t);
		for (unsigned i = 0; i < btf_vlen(t) && !found; i++, m++)
			found = strcmp(btf__name_by_offset(btf, m->name_off), name) == 0;
	}
	btf__free(btf);
	return found;
}

/*
 * Whether the maps of a found program (<s>, its maps' <info>) are not of sizes this hashlb
 * reads safely, <why> saying so (at most <n> bytes): more tables than HASHLB_STEER_TABLES_MAX,
 * the size of every array of a table's figures (hashlb_steer_flows_tables(),
 * hashlb_steer_tables_stats(): before, a forged program's hlb_tables of more entries was
 * copied past them); hlb_tstats of values not 16 bytes (read into a buffer of that size: a
 * larger one would overrun it), hlb_tstats2 of values short of the first hashlb's that had
 * it (HLB_STEER_TSTATS2_SIZE_MIN, not this one's struct: a newer hashlb's may add counters at
 * its end, and must still read this one's) or not whole counters (read by its value size);
 * either, or hlb_tnames, of fewer entries than tables (a table past hlb_tnames' was found,
 * and then its name's write failed, E2BIG); hlb_tnames of values not a struct
 * hlb_steer_tname's (64 bytes: looked up into one, and written from one). Taken for none
 * before (as an older program's, which has no names), its names were neither read nor
 * written: this hashlb's tables went on under the names of the other version's services,
 * which its --stats then showed, and a grown program lost them; read as far as it goes, a
 * name of another layout is a guess, and a write of one a guess at the rest of its value.
 * None of this hashlb's or an older one's is refused: their sizes never changed.
 */
static bool found_unreadable(const struct hashlb_steer *s, const struct bpf_map_info *info,
			     char *why, size_t n)
{
	static const int per_table[] = { M_TSTATS, M_TSTATS2, M_TNAMES };

	if (s->tables > HASHLB_STEER_TABLES_MAX) {
		snprintf(why, n, "holds %u tables (map '%s'), more than the %u a program holds",
			 s->tables, map_names[M_TABLES], HASHLB_STEER_TABLES_MAX);
		return true;
	}
	if (s->fd[M_TSTATS] >= 0 && info[M_TSTATS].value_size != sizeof(struct hlb_steer_tstats)) {
		snprintf(why, n, "has map '%s' of %u-byte values, not %zu", map_names[M_TSTATS],
			 info[M_TSTATS].value_size, sizeof(struct hlb_steer_tstats));
		return true;
	}
	if (s->fd[M_TNAMES] >= 0 && info[M_TNAMES].value_size != sizeof(struct hlb_steer_tname)) {
		snprintf(why, n, "has map '%s' of %u-byte values, not %zu", map_names[M_TNAMES],
			 info[M_TNAMES].value_size, sizeof(struct hlb_steer_tname));
		return true;
	}
	if (s->fd[M_TSTATS2] >= 0 && (info[M_TSTATS2].value_size < HLB_STEER_TSTATS2_SIZE_MIN ||
				      info[M_TSTATS2].value_size % 8)) {
		snprintf(why, n, "has map '%s' of %u-byte values, not %u or more 8-byte counters",
			 map_names[M_TSTATS2], info[M_TSTATS2].value_size,
			 HLB_STEER_TSTATS2_SIZE_MIN);
		return true;
	}
	for (size_t i = 0; i < sizeof(per_table) / sizeof(per_table[0]); i++) {
		int m = per_table[i];

		if (s->fd[m] >= 0 && info[m].max_entries < s->tables) {
			snprintf(why, n, "has map '%s' of %u entr%s, fewer than its %u tables",
				 map_names[m], info[m].max_entries,
				 info[m].max_entries == 1 ? "y" : "ies", s->tables);
			return true;
		}
	}
	return false;
}

static int prog_rodata(const struct hashlb_steer *s, const char *name, void *ret_v, size_t size);

/*
 * A found program's layout of hlb_bslots (named HLB_STEER_BSLOTS_REGIONS_NAME: laid out in
 * regions, struct hlb_steer_bregion) into <s>, from its read-only data, <bslots> its
 * hlb_bslots' entries: -EPROTO, <why> filled, if it cannot be read or does not put every slot
 * of its tables at an index of its own below theirs (bregions_check()). 0 or -errno.
 */
static int bregions_read(struct hashlb_steer *s, uint32_t bslots, char *why, size_t n)
{
	struct hlb_steer_bregion r[HLB_STEER_BREGIONS_MAX];
	int ret = prog_rodata(s, "bslot_regions", r, sizeof(r));
	uint32_t k = 0;

	if (ret < 0) {
		snprintf(why, n, "has map '%s' but its layout cannot be read: %s",
			 HLB_STEER_BSLOTS_REGIONS_NAME, strerror(-ret));
		return -EPROTO;
	}
	while (k < HLB_STEER_BREGIONS_MAX && r[k].hi > r[k].lo)
		k++;
	ret = bregions_check(r, k, s->tables, s->backends_cap, bslots, why, n);
	if (ret < 0)
		return ret;
	memcpy(s->bregions, r, k * sizeof(r[0]));
	s->n_bregions = k;
	return 0;
}

int hashlb_steer_find(const char *iface, enum hashlb_steer_mode mode,
		      struct hashlb_steer **ret_steer, struct hashlb_error *err)
{
	uint32_t map_ids[32], n_maps = 0, prog_id = 0;
	struct bpf_map_info info[M_MAX];
	struct hashlb_steer *s;
	char why[160];
	bool regions = false;
	int ifindex = 0, ret;

	ret = find_attached(iface, mode, &ifindex, &prog_id, &mode, err);
	if (ret < 0)
		return ret;
	ret = prog_map_ids(prog_id, map_ids, &n_maps);
	if (ret < 0)
		return hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "reading program %u: %s", prog_id,
				  strerror(-ret));
	s = steer_new();
	if (!s)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	s->keep = true;
	s->ifindex = ifindex;
	s->mode = mode;
	s->prog_id = prog_id;
	if_mac(iface, s->if_mac);
	for (uint32_t i = 0; i < n_maps; i++) {
		struct bpf_map_info mi;
		int fd = map_open(map_ids[i], &mi), m;

		if (fd < 0)
			continue;
		m = map_index(mi.name);
		if (m < 0 || s->fd[m] >= 0) {
			close(fd);
			continue;
		}
		s->fd[m] = fd;
		info[m] = mi;
		if (m == M_BACKENDS)
			s->backends_cap = mi.max_entries / 2;
		else if (m == M_SLOTS)
			s->slots_cap = mi.max_entries / 2;
		else if (m == M_POINTS)
			s->points_cap = mi.max_entries / 2;
		else if (m == M_BSLOTS)
			regions = strcmp(mi.name, HLB_STEER_BSLOTS_REGIONS_NAME) == 0;
		else if (m == M_BUCKETS)
			s->buckets_cap = mi.max_entries / 2;
		else if (m == M_CT) {
			s->ct_buckets = mi.max_entries;
			s->reads_ext = value_has_member(&mi, "ext");
		} else if (m == M_STATS)
			s->stats_size = mi.value_size;
		else if (m == M_STATS2)
			s->stats2_size = mi.value_size;
		else if (m == M_TSTATS2)
			s->tstats2_size = mi.value_size;
		else if (m == M_TABLES) {
			s->reads_prefix = value_has_member(&mi, "v4_prefix");
			s->tables = mi.max_entries / 2 ? mi.max_entries / 2 : 1;
		}
	}
	if (found_unreadable(s, info, why, sizeof(why))) {
		ret = not_readable(err, "", iface, mode, prog_id, why);
		hashlb_steer_free(s);
		return ret;
	}
	/* each table array holds two halves of every table */
	s->backends_cap /= s->tables;
	s->slots_cap /= s->tables;
	s->points_cap /= s->tables;
	s->buckets_cap /= s->tables;
	for (int m = 0; m < M_MAX; m++) {
		if (map_required(m) && s->fd[m] < 0) {
			ret = other_version(err, "", iface, mode, prog_id, map_names[m]);
			hashlb_steer_free(s);
			return ret;
		}
	}
	if (regions && bregions_read(s, info[M_BSLOTS].max_entries, why, sizeof(why)) < 0) {
		ret = not_readable(err, "", iface, mode, prog_id, why);
		hashlb_steer_free(s);
		return ret;
	}
	ret = ct_map(s);
	if (ret == 0)
		ret = vflag_read(s);
	if (ret < 0) {
		hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "mapping the conntrack table: %s",
			   strerror(-ret));
		hashlb_steer_free(s);
		return ret;
	}
	*ret_steer = s;
	return 0;
}

/* Whether file <fd> of process <pid> is BPF map <map_id> (its fdinfo says so). */
static bool fd_is_map(const char *pid, const char *fd, uint32_t map_id)
{
	char path[32 + 2 * NAME_MAX], line[128];
	unsigned int id;
	bool is = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/fdinfo/%s", pid, fd);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!is && fgets(line, sizeof(line), f))
		is = sscanf(line, "map_id: %u", &id) == 1 && id == map_id;
	fclose(f);
	return is;
}

/* Whether process <pid> (its /proc name) holds map <map_id> open. */
static bool pid_holds_map(const char *pid, uint32_t map_id)
{
	char path[16 + NAME_MAX], target[32];
	struct dirent *d;
	bool holds = false;
	DIR *fds;

	snprintf(path, sizeof(path), "/proc/%s/fd", pid);
	fds = opendir(path);
	if (!fds)
		return false;
	while (!holds && (d = readdir(fds))) {
		ssize_t n = readlinkat(dirfd(fds), d->d_name, target, sizeof(target) - 1);

		if (n <= 0)
			continue;
		target[n] = 0;
		holds = strcmp(target, "anon_inode:bpf-map") == 0 &&
			fd_is_map(pid, d->d_name, map_id);
	}
	closedir(fds);
	return holds;
}

/* A process other than this one that holds map <map_id> open, or 0. */
static pid_t map_holder(uint32_t map_id)
{
	char self[16];
	DIR *proc = opendir("/proc");
	struct dirent *p;
	pid_t holder = 0;

	if (!proc)
		return 0;
	snprintf(self, sizeof(self), "%d", (int)getpid());
	while (!holder && (p = readdir(proc))) {
		if (p->d_name[0] < '1' || p->d_name[0] > '9' || strcmp(p->d_name, self) == 0)
			continue;
		if (pid_holds_map(p->d_name, map_id))
			holder = (pid_t)atoi(p->d_name);
	}
	closedir(proc);
	return holder;
}

/* The id of <s>'s map hlb_active (what tells who drives its program), 0 if
 * it cannot be read (errno says why). */
static uint32_t active_map_id(struct hashlb_steer *s)
{
	struct bpf_map_info mi;
	uint32_t len = sizeof(mi);

	memset(&mi, 0, sizeof(mi));
	return bpf_obj_get_info_by_fd(s->fd[M_ACTIVE], &mi, &len) < 0 ? 0 : mi.id;
}

/*
 * Publications into one program's maps take turns, whichever processes make
 * them: two at once both write the inactive half, and the one that flips
 * last can leave the half in force naming one's backends and the slots
 * holding the other's (a side-by-side upgrade, whose old process publishes
 * until it is stopped; a hashlb steer --update beside the process that
 * drives the program). Each publication holds an flock on
 * STEER_LOCK_DIR/steer-<id of hlb_active>.lock, one file a program however
 * it was found, for its duration. A holder that does not let go (stopped,
 * traced) is waited for STEER_LOCK_WAIT_MS at most: the publication is
 * refused then, -ETIMEDOUT, naming it. A lock file that cannot be made (no
 * STEER_LOCK_DIR and no right to make it, a read-only /run) leaves the
 * publication unlocked, as before, and says why (hashlb_steer_unlocked()).
 */
#define STEER_LOCK_DIR "/run/hashlb"
#define STEER_LOCK_WAIT_MS 2000

/* The lock file of the program whose hlb_active is map <id>, into <buf>. */
static void lock_path(uint32_t id, char *buf, size_t size)
{
	snprintf(buf, size, STEER_LOCK_DIR "/steer-%u.lock", id);
}

/* The process that holds the flock on file <fd> (as /proc/locks says), 0
 * if not known. */
static pid_t lock_holder(int fd)
{
	struct stat st;
	char line[256];
	pid_t holder = 0;
	FILE *f;

	if (fstat(fd, &st) < 0)
		return 0;
	f = fopen("/proc/locks", "re");
	if (!f)
		return 0;
	while (!holder && fgets(line, sizeof(line), f)) {
		unsigned int maj, min;
		unsigned long ino;
		int pid;

		if (sscanf(line, "%*d: FLOCK %*s WRITE %d %x:%x:%lu", &pid, &maj, &min, &ino) ==
			    4 &&
		    maj == major(st.st_dev) && min == minor(st.st_dev) && ino == st.st_ino)
			holder = pid;
	}
	fclose(f);
	return holder;
}

/* Remove the lock files of programs whose maps are gone (their interface
 * deleted, a process killed and its program detached by hand): nothing
 * publishes into them any more, and map ids are not reused before they
 * wrap. Done once a handle, at its first publication. */
static void lock_sweep(void)
{
	DIR *d = opendir(STEER_LOCK_DIR);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		unsigned int id;
		char end;
		int fd;

		if (sscanf(e->d_name, "steer-%u.loc%c", &id, &end) != 2 || end != 'k')
			continue;
		fd = bpf_map_get_fd_by_id(id);
		if (fd >= 0)
			close(fd);
		else if (errno == ENOENT)
			unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

/*
 * Whether the lock file <fd> is still the one at <path>: a file removed while
 * it was open (its directory too: systemd's RuntimeDirectory= cleanup, a
 * detach's lock_forget(), a sweep) may be locked by one process while another
 * makes a new one at the path and locks that, the two publishing at once.
 * A lock taken on a file no longer there is let go and taken again on the
 * path's. When it cannot tell (fstat failing), it says yes: as before.
 */
static bool lock_current(int fd, const char *path)
{
	struct stat held, named;

	if (fstat(fd, &held) < 0)
		return true;
	return stat(path, &named) == 0 && named.st_dev == held.st_dev &&
	       named.st_ino == held.st_ino;
}

/* Open (made if need be) the lock file <path>; -errno. */
static int lock_open(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd < 0 && errno == ENOENT && (mkdir(STEER_LOCK_DIR, 0755) == 0 || errno == EEXIST))
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	return fd < 0 ? -errno : fd;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Take the publication lock of <s>'s program: its file descriptor into
 * *<ret_fd>, or -1 if the publication runs unlocked (s->unlocked says why).
 * 0, or -ETIMEDOUT with <err> filled: another publication held it
 * STEER_LOCK_WAIT_MS. With s->lock_try, one try: -EAGAIN while the tries
 * that found it held, in a row, span less than STEER_LOCK_WAIT_MS, then
 * -ETIMEDOUT. Released by publish_unlock().
 */
static int publish_lock(struct hashlb_steer *s, int *ret_fd, struct hashlb_error *err)
{
	char path[64], name[IF_NAMESIZE] = "?";
	uint32_t id, nap_us = 1000;
	uint64_t start, now, waited_ms;
	pid_t holder;
	int fd;

	*ret_fd = -1;
	s->unlocked[0] = 0;
	if (!s->lock_id) {
		int why;

		s->lock_id = active_map_id(s);
		why = errno; /* the sweep's calls would say their own */
		lock_sweep();
		if (!s->lock_id) {
			snprintf(s->unlocked, sizeof(s->unlocked), "reading its map hlb_active: %s",
				 strerror(why));
			return 0;
		}
	}
	id = s->lock_id;
	lock_path(id, path, sizeof(path));
	fd = lock_open(path);
	if (fd < 0) {
		snprintf(s->unlocked, sizeof(s->unlocked), "%s: %s", path, strerror(-fd));
		return 0;
	}
	start = now = mono_ms();
	for (;;) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			if (lock_current(fd, path))
				break;
			close(fd); /* removed since it was opened: the path's */
			fd = lock_open(path);
			if (fd < 0) {
				snprintf(s->unlocked, sizeof(s->unlocked), "%s: %s", path,
					 strerror(-fd));
				return 0;
			}
			continue;
		}
		/* a signal, not a holder: tried again (before, a try-only
		 * publication read it as the lock held, by process 0) */
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK) {
			snprintf(s->unlocked, sizeof(s->unlocked), "%s: %s", path, strerror(errno));
			close(fd);
			return 0;
		}
		if (s->lock_try || now - start >= STEER_LOCK_WAIT_MS)
			goto held;
		usleep(nap_us);
		nap_us = nap_us < 32000 ? nap_us * 2 : nap_us;
		now = mono_ms();
	}
	s->busy_first_ms = 0;
	*ret_fd = fd;
	return 0;
held:
	waited_ms = now - start;
	if (s->lock_try) {
		/* a try after a pause longer than the wait starts anew */
		if (!s->busy_first_ms || now - s->busy_last_ms > STEER_LOCK_WAIT_MS)
			s->busy_first_ms = now;
		s->busy_last_ms = now;
		waited_ms = now - s->busy_first_ms;
	}
	holder = lock_holder(fd);
	close(fd);
	if_indextoname((unsigned)s->ifindex, name);
	if (waited_ms < STEER_LOCK_WAIT_MS)
		return hashlb_err(err, -EAGAIN, HASHLB_ERR_SYSTEM,
				  "another publication into the program on %s (process %d, "
				  "holding %s) is under way: the table in force stays",
				  name, (int)holder, path);
	return hashlb_err(err, -ETIMEDOUT, HASHLB_ERR_SYSTEM,
			  "another publication into the program on %s (process %d, holding %s) "
			  "has not ended within %d s: the table in force stays",
			  name, (int)holder, path, STEER_LOCK_WAIT_MS / 1000);
}

void hashlb_steer_set_lock_try(struct hashlb_steer *s, bool try_only)
{
	s->lock_try = try_only;
	s->busy_first_ms = 0;
}

static void publish_unlock(int fd)
{
	if (fd < 0)
		return;
	flock(fd, LOCK_UN);
	close(fd);
}

/* Remove the lock file of <s>'s program, detached (or never attached): no
 * program reads its maps any more, so no publication into them can harm. */
static void lock_forget(struct hashlb_steer *s)
{
	char path[64];
	uint32_t id = s->fd[M_ACTIVE] >= 0 ? active_map_id(s) : 0;

	if (!id)
		return;
	lock_path(id, path, sizeof(path));
	unlink(path);
}

const char *hashlb_steer_unlocked(const struct hashlb_steer *s)
{
	return s->unlocked[0] ? s->unlocked : NULL;
}

int hashlb_steer_find_driven(const char *iface, pid_t pid, struct hashlb_steer **ret_steer,
			     struct hashlb_error *err)
{
	enum hashlb_steer_mode modes[2];
	struct hashlb_steer *s = NULL;
	uint32_t ids[2], n, taken = 0;
	char name[16];
	int ifindex = (int)if_nametoindex(iface);

	if (!ifindex)
		return hashlb_err(err, -ENODEV, HASHLB_ERR_SYSTEM, "no interface '%s'", iface);
	snprintf(name, sizeof(name), "%d", (int)pid);
	n = attached_progs(ifindex, HASHLB_STEER_AUTO, ids, modes);
	for (uint32_t i = 0; i < n && !s; i++) {
		/* at the XDP hook: either flavour, the kernel holds one; one
		 * whose maps cannot be read (another version's) is not <pid>'s */
		if (hashlb_steer_find(iface,
				      modes[i] == HASHLB_STEER_TC ? HASHLB_STEER_TC
								  : HASHLB_STEER_XDP_NATIVE,
				      &s, err) < 0)
			continue;
		if (pid > 0 && pid_holds_map(name, active_map_id(s))) {
			taken = i;
			break;
		}
		hashlb_steer_free(s); /* found, so kept */
		s = NULL;
	}
	if (!s)
		return hashlb_err(err, -ENOENT, HASHLB_ERR_SYSTEM,
				  "process %d drives no hashlb program on '%s'", (int)pid, iface);
	*ret_steer = s;
	if (n < 2)
		return 0;
	hashlb_err(err, 0, HASHLB_ERR_SYSTEM,
		   "two hashlb programs are attached to '%s', %s (program %u) and %s "
		   "(program %u): the %s one is process %d's",
		   iface, hashlb_steer_mode_name(modes[0]), ids[0],
		   hashlb_steer_mode_name(modes[1]), ids[1], hashlb_steer_mode_name(modes[taken]),
		   (int)pid);
	return 1;
}

int hashlb_steer_other(struct hashlb_steer *s, const char *iface, enum hashlb_steer_mode *ret_mode,
		       uint32_t *ret_id, pid_t *ret_holder)
{
	struct hashlb_error err = { 0 };
	enum hashlb_steer_mode modes[2];
	struct hashlb_steer *o = NULL;
	uint32_t ids[2], n;
	pid_t holder = -1;

	n = attached_progs(s->ifindex, HASHLB_STEER_AUTO, ids, modes);
	for (uint32_t i = 0; i < n; i++) {
		if (ids[i] == s->prog_id)
			continue;
		/* at the XDP hook: either flavour, the kernel holds one */
		if (hashlb_steer_find(iface,
				      modes[i] == HASHLB_STEER_TC ? HASHLB_STEER_TC
								  : HASHLB_STEER_XDP_NATIVE,
				      &o, &err) == 0 &&
		    o->prog_id == ids[i])
			holder = steer_holder(o);
		hashlb_steer_free(o); /* found, so kept */
		*ret_mode = modes[i];
		*ret_id = ids[i];
		*ret_holder = holder;
		return 0;
	}
	return -ENOENT;
}

int hashlb_steer_adopt(const char *iface, enum hashlb_steer_mode mode,
		       struct hashlb_steer **ret_steer, struct hashlb_error *err)
{
	struct bpf_map_info mi;
	uint32_t len = sizeof(mi);
	struct hashlb_steer *s;
	pid_t holder;
	int ret;

	ret = hashlb_steer_find(iface, mode, &s, err);
	if (ret < 0)
		return ret;
	memset(&mi, 0, sizeof(mi));
	if (bpf_obj_get_info_by_fd(s->fd[M_ACTIVE], &mi, &len) < 0) {
		ret = hashlb_err(err, -errno, HASHLB_ERR_SYSTEM, "reading a map of '%s': %s", iface,
				 strerror(errno));
		hashlb_steer_free(s);
		return ret;
	}
	/* Whoever drives the program (the hashlb that attached it or took
	 * it over, a hashlb steer in the foreground) holds its maps open. */
	holder = map_holder(mi.id);
	if (holder) {
		/* who, so that the operator knows which process to stop */
		bool daemon = active_has(s, HLB_STEER_ACTIVE_DAEMON);

		hashlb_steer_free(s);
		return hashlb_err(err, -EBUSY, HASHLB_ERR_SYSTEM,
				  "the hashlb program on '%s' is driven by %s (process %d)", iface,
				  daemon ? "hashlb run" : "a foreground hashlb steer", (int)holder);
	}
	*ret_steer = s;
	return 0;
}

/* Detach program <id>, attached to <ifindex> in <mode> (found by
 * attached_progs()). An XDP program is replaced by nothing only if it still
 * is <id>: one attached meanwhile by someone else stays. */
static int detach_mode(int ifindex, enum hashlb_steer_mode mode, uint32_t id)
{
	if (mode == HASHLB_STEER_TC) {
		LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_INGRESS);
		LIBBPF_OPTS(bpf_tc_opts, opts, .handle = TC_HANDLE, .priority = TC_PRIORITY);

		return bpf_tc_detach(&hook, &opts);
	}

	int fd = bpf_prog_get_fd_by_id(id), ret;
	LIBBPF_OPTS(bpf_xdp_attach_opts, xo, .old_prog_fd = fd);

	if (fd < 0)
		return -errno;
	ret = bpf_xdp_attach(
		ifindex, -1,
		(mode == HASHLB_STEER_XDP_NATIVE ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE) |
			XDP_FLAGS_REPLACE,
		&xo);
	close(fd);
	return ret;
}

/* Detach program <id> (found by attached_progs()) whose maps <s> holds (or
 * NULL if they could not be found), and the clsact qdisc in tc mode if the
 * loader created it (its active word says so) and nothing else is on it. */
static int detach_prog(struct hashlb_steer *s, int ifindex, enum hashlb_steer_mode mode,
		       uint32_t id)
{
	int ret = detach_mode(ifindex, mode, id);

	if (ret == 0 && mode == HASHLB_STEER_TC && s && active_has(s, HLB_STEER_ACTIVE_CLSACT))
		clsact_remove_unused(ifindex);
	return ret;
}

/* A found handle told not to keep: detach the program found, if it still is
 * the one attached (not one another process attached since). */
static void detach_found(struct hashlb_steer *s)
{
	if (hashlb_steer_attached(s))
		detach_prog(s, s->ifindex, s->mode, s->prog_id);
}

/* Asked at its own hook: another hashlb program on the other one (XDP sees
 * packets first) made a tc program look gone. */
bool hashlb_steer_attached(struct hashlb_steer *s)
{
	return s->prog_id && prog_at(s->ifindex, s->mode) == s->prog_id;
}

void hashlb_steer_set_abort(struct hashlb_steer *s, bool (*abort)(void *arg), void *arg)
{
	s->abort = abort;
	s->abort_arg = arg;
}

void hashlb_steer_set_keep(struct hashlb_steer *s, bool keep)
{
	s->keep = keep;
}

/* The process other than this one that holds <s>'s maps open, 0 if none,
 * -1 if not known. */
static pid_t steer_holder(struct hashlb_steer *s)
{
	struct bpf_map_info mi;
	uint32_t len = sizeof(mi);

	memset(&mi, 0, sizeof(mi));
	if (bpf_obj_get_info_by_fd(s->fd[M_ACTIVE], &mi, &len) < 0)
		return -1;
	return map_holder(mi.id);
}

bool hashlb_steer_driven_elsewhere(struct hashlb_steer *s)
{
	return steer_holder(s) != 0; /* unknown: leave it as it is */
}

int hashlb_steer_set_daemon(struct hashlb_steer *s, struct hashlb_error *err)
{
	int fd, ret;

	/* A read-modify-write of the active word: in turn with another
	 * process's flips (the replaced hashlb's, side by side). */
	ret = publish_lock(s, &fd, err);
	if (ret < 0)
		return ret;
	ret = active_or(s, HLB_STEER_ACTIVE_DAEMON);
	publish_unlock(fd);
	if (ret < 0)
		hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "marking the program as hashlb run's: %s",
			   strerror(-ret));
	return ret;
}

bool hashlb_steer_daemon(struct hashlb_steer *s)
{
	return active_has(s, HLB_STEER_ACTIVE_DAEMON);
}

void hashlb_steer_free(struct hashlb_steer *s)
{
	if (!s)
		return;
	if (s->ct)
		munmap(s->ct, (size_t)s->ct_buckets * sizeof(*s->ct));
	if (s->skel) {
		if (!s->keep) {
			detach(s);
			lock_forget(s);
		}
		hlb_steer_bpf__destroy(s->skel);
	} else {
		if (!s->keep) {
			detach_found(s);
			lock_forget(s);
		}
		for (int m = 0; m < M_MAX; m++)
			if (s->fd[m] >= 0)
				close(s->fd[m]);
	}
	if (s->sync_inner_fd >= 0)
		close(s->sync_inner_fd);
	for (int i = 0; i < SHADOW_MAX; i++)
		free(s->shadow[i].v);
	free(s);
}

/* -EBUSY, <err> naming <who> and its pid, if <s>'s program carries <mark> and
 * a live process holds its maps; else 0. */
static int check_mark(struct hashlb_steer *s, uint32_t mark, const char *who, const char *iface,
		      const char *remedy, struct hashlb_error *err)
{
	pid_t driver = s && active_has(s, mark) ? steer_holder(s) : 0;

	if (driver <= 0)
		return 0;
	return hashlb_err(err, -EBUSY, HASHLB_ERR_SYSTEM,
			  "the program on '%s' is driven by %s (process %d): %s", iface, who,
			  (int)driver, remedy);
}

int hashlb_steer_check_driver(struct hashlb_steer *s, const char *iface, const char *remedy,
			      struct hashlb_error *err)
{
	return check_mark(s, HLB_STEER_ACTIVE_DAEMON, "hashlb run", iface, remedy, err);
}

int hashlb_steer_detach(const char *iface, enum hashlb_steer_mode mode, struct hashlb_error *err)
{
	struct hashlb_error find_err = { 0 };
	struct hashlb_steer *s = NULL;
	uint32_t prog_id = 0;
	int ifindex = 0, ret;

	ret = find_attached(iface, mode, &ifindex, &prog_id, &mode, err);
	if (ret < 0)
		return ret;
	/* Its maps, kept (freeing the handle detaches nothing): NULL where they
	 * cannot be found (another hashlb version), detached all the same. */
	if (hashlb_steer_find(iface, mode, &s, &find_err) < 0)
		s = NULL;
	/* A live hashlb run would go on publishing into maps no program reads,
	 * its service served by the daemon alone without its knowing. */
	ret = hashlb_steer_check_driver(
		s, iface, "stop it, or change its config (steering: userspace) and reload", err);
	if (ret < 0)
		goto out;
	/* A foreground hashlb steer would go on running on nothing, to detach
	 * nothing when it stops. Its --update stays allowed: it publishes
	 * nothing after it attached. */
	ret = check_mark(s, HLB_STEER_ACTIVE_OWNED, "a foreground hashlb steer", iface,
			 "stop it (SIGINT, SIGTERM or SIGHUP) and it detaches the program", err);
	if (ret < 0)
		goto out;
	ret = detach_prog(s, ifindex, mode, prog_id);
	if (ret < 0)
		hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "detaching from '%s': %s", iface,
			   strerror(-ret));
	else if (s)
		lock_forget(s);
out:
	hashlb_steer_free(s);
	return ret;
}

/* The VIP entry of <ss> (valid, its port). */
static int sockaddr_vip(const struct sockaddr_storage *ss, struct hlb_steer_vip *ret_vip)
{
	struct hlb_steer_vip v;

	memset(&v, 0, sizeof(v));
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)ss;

		v.addr[10] = 0xff;
		v.addr[11] = 0xff;
		memcpy(v.addr + 12, &sin->sin_addr, 4);
		v.port = sin->sin_port;
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const void *)ss;

		memcpy(v.addr, &sin6->sin6_addr, 16);
		v.port = sin6->sin6_port;
	} else {
		return -EAFNOSUPPORT;
	}
	if (v.port == 0)
		return -EINVAL;
	v.flags = HLB_STEER_VIP_F_VALID;
	*ret_vip = v;
	return 0;
}

static uint64_t vip_mix(const struct hlb_steer_vip *v)
{
	uint64_t a0, a1;

	memcpy(&a0, v->addr, 8);
	memcpy(&a1, v->addr + 8, 8);
	return hlb_steer_vip_mix(a0, a1, v->port);
}

static uint32_t vip_home(const struct hlb_steer_vip *v)
{
	return (uint32_t)(vip_mix(v) >> 56);
}

static bool vip_same(const struct hlb_steer_vip *a, const struct hlb_steer_vip *b)
{
	return a->port == b->port && memcmp(a->addr, b->addr, 16) == 0;
}

/* Add <v> to <want> unless there already; -E2BIG past HLB_STEER_VIPS_MAX. */
static int vip_want(struct hlb_steer_vip *want, uint32_t *n, const struct hlb_steer_vip *v)
{
	for (uint32_t i = 0; i < *n; i++)
		if (vip_same(&want[i], v))
			return 0;
	if (*n == HLB_STEER_VIPS_MAX)
		return -E2BIG;
	want[(*n)++] = *v;
	return 0;
}

/* vip_want() of port entry <v> and of its address's marker (port 0). */
static int vip_want_port(struct hlb_steer_vip *want, uint32_t *n, const struct hlb_steer_vip *v)
{
	struct hlb_steer_vip addr = *v;
	int ret = vip_want(want, n, v);

	addr.port = 0;
	addr.flags = HLB_STEER_VIP_F_VALID | HLB_STEER_VIP_F_ADDR_ONLY;
	return ret < 0 ? ret : vip_want(want, n, &addr);
}

/* The table a VIP entry names (HLB_STEER_VIP_TABLE_SHIFT). */
static uint32_t vip_table(const struct hlb_steer_vip *v)
{
	return (v->flags >> HLB_STEER_VIP_TABLE_SHIFT) & 0xff;
}

/* Whether <v> is a VIP's port entry (not empty, not an address's marker). */
static bool vip_port_entry(const struct hlb_steer_vip *v)
{
	return (v->flags & HLB_STEER_VIP_F_VALID) && !(v->flags & HLB_STEER_VIP_F_ADDR_ONLY);
}

/*
 * Lay out <want> (<nw> keys) in <next>, keeping every key of <cur> that is
 * still wanted at its index (conntrack entries name it), the others at the
 * first free slot within HLB_STEER_VIP_PROBES of their home, one no port
 * entry of <cur> leaves if there is one; then each home slot's probe count,
 * and the bits its keys stored past it do not have (absent). <ret_freed>[i]
 * set where a port entry of <cur> leaves: conntrack entries name index i,
 * for the caller to clear (vips_ct_clear()). -E2BIG if a key finds no slot.
 */
static int vip_layout(const struct hlb_steer_vip *cur, struct hlb_steer_vip *want, uint32_t nw,
		      struct hlb_steer_vip *next, bool *ret_freed)
{
	bool placed[HLB_STEER_VIPS_MAX] = { false };

	memset(next, 0, HLB_STEER_VIP_SLOTS * sizeof(*next));
	for (uint32_t i = 0; i < HLB_STEER_VIP_SLOTS; i++) {
		if (!(cur[i].flags & HLB_STEER_VIP_F_VALID))
			continue;
		for (uint32_t k = 0; k < nw; k++) {
			if (!placed[k] && vip_same(&cur[i], &want[k])) {
				next[i] = want[k];
				placed[k] = true;
				break;
			}
		}
	}
	for (uint32_t i = 0; i < HLB_STEER_VIP_SLOTS; i++)
		ret_freed[i] = vip_port_entry(&cur[i]) && !(next[i].flags & HLB_STEER_VIP_F_VALID);
	/* A slot a VIP leaves now is taken last (pass 1): its entries are
	 * cleared only once the flip is done, and until then the program may
	 * still write some, which a new key in the slot would take as its own
	 * (the same address and port given to another table: the same tuples).
	 * A slot left by an earlier call is free: its entries were cleared. */
	for (uint32_t k = 0; k < nw; k++) {
		uint32_t home = vip_home(&want[k]);

		for (int pass = 0; pass < 2 && !placed[k]; pass++) {
			for (uint32_t d = 0; d < HLB_STEER_VIP_PROBES; d++) {
				uint32_t j = (home + d) % HLB_STEER_VIP_SLOTS;

				if (!(next[j].flags & HLB_STEER_VIP_F_VALID) &&
				    (pass == 1 || !ret_freed[j])) {
					next[j] = want[k];
					placed[k] = true;
					break;
				}
			}
		}
		if (!placed[k])
			return -E2BIG;
	}
	uint8_t present[HLB_STEER_VIP_SLOTS] = { 0 };

	for (uint32_t i = 0; i < HLB_STEER_VIP_SLOTS; i++) {
		uint64_t mix;
		uint32_t home, d;

		if (!(next[i].flags & HLB_STEER_VIP_F_VALID))
			continue;
		mix = vip_mix(&next[i]);
		home = (uint32_t)(mix >> 56);
		d = (i + HLB_STEER_VIP_SLOTS - home) % HLB_STEER_VIP_SLOTS;
		if (next[home].probes < d + 1)
			next[home].probes = (uint8_t)(d + 1);
		if (d)
			present[home] |= (uint8_t)(1u << hlb_steer_vip_bit(mix));
	}
	for (uint32_t i = 0; i < HLB_STEER_VIP_SLOTS; i++)
		if (next[i].probes >= 2)
			next[i].absent = (uint8_t)~present[i];
	return 0;
}

/*
 * Clear the conntrack entries that name a VIP index <freed>[i] set: a VIP
 * that left the program, whose flows no packet reaches. Done once the VIP
 * half without it is in force, so that another VIP given the index later
 * (the same address and port too: another service's, whose flows have the
 * same tuples) does not take them as its own and send its packets to the old
 * VIP's backends. One scan of hlb_ct (1 MiB at the default size), when a VIP
 * leaves only. An entry is compared and cleared in one step: a program may
 * rewrite the way meanwhile, for another flow.
 */
static void vips_ct_clear(struct hashlb_steer *s, const bool *freed)
{
	bool any = false;

	for (uint32_t i = 0; i < HLB_STEER_VIP_SLOTS; i++)
		any |= freed[i];
	for (uint32_t b = 0; b < s->ct_buckets && any; b++) {
		for (int w = 0; w < HLB_STEER_CT_WAYS; w++) {
			uint64_t e = __atomic_load_n(&s->ct[b].way[w], __ATOMIC_RELAXED);

			if (e && freed[(e >> HLB_STEER_CT_VIP_SHIFT) & 0xff])
				__atomic_compare_exchange_n(&s->ct[b].way[w], &e, 0, false,
							    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
		}
	}
}

/* Elements a map_batch sends, or map_read() reads, in one bpf() call. */
#define MAP_BATCH_MAX 4096u

/*
 * Writes into one array map gathered and sent MAP_BATCH_MAX at a time
 * (BPF_MAP_UPDATE_BATCH). The kernel applies a batch's elements in order,
 * one by one, as as many bpf_map_update_elem() would: only the syscalls go
 * (a publication of 1,000 backends made about 22,000, one an element).
 * Whatever must be in the map before another write is flushed first.
 */
struct map_batch {
	int fd;
	uint32_t size, n;
	uint32_t base; /* added to every key: the first element of a handle's table */
	uint32_t keys[MAP_BATCH_MAX];
	unsigned char values[]; /* MAP_BATCH_MAX values of <size> bytes */
};

static struct map_batch *batch_new(int fd, uint32_t size)
{
	struct map_batch *b = malloc(sizeof(*b) + (size_t)MAP_BATCH_MAX * size);

	if (b) {
		b->fd = fd;
		b->size = size;
		b->n = 0;
		b->base = 0;
	}
	return b;
}

/* Send the writes gathered. Returns 0 or -errno. */
static int batch_flush(struct map_batch *b)
{
	uint32_t count = b->n;

	b->n = 0;
	if (count == 0)
		return 0;
	return bpf_map_update_batch(b->fd, b->keys, b->values, &count, NULL) < 0 ? -errno : 0;
}

/* Write <value> of <size> bytes (<b>'s) at <key>, with the writes gathered
 * before it. 0 or -errno. Inlined with a constant <size>: the copy too. */
static inline int batch_add_sized(struct map_batch *b, uint32_t key, const void *value, size_t size)
{
	b->keys[b->n] = b->base + key;
	memcpy(b->values + (size_t)b->n * size, value, size);
	return ++b->n == MAP_BATCH_MAX ? batch_flush(b) : 0;
}

/* Write <value> at <key>, with the writes gathered before it. 0 or -errno. */
static int batch_add(struct map_batch *b, uint32_t key, const void *value)
{
	return batch_add_sized(b, key, value, b->size);
}

/*
 * Read elements [first, first + n) of array map <fd>, values of <size>
 * bytes, into <values>, MAP_BATCH_MAX a call (BPF_MAP_LOOKUP_BATCH, which
 * starts after the key it is given). Returns 0 or -errno.
 */
static int map_read(int fd, uint32_t first, uint32_t n, void *values, uint32_t size)
{
	uint32_t *keys = malloc(MAP_BATCH_MAX * sizeof(*keys)), prev = first - 1, next;
	int ret = 0;

	if (!keys)
		return -ENOMEM;
	for (uint32_t done = 0; done < n && ret == 0;) {
		uint32_t count = n - done < MAP_BATCH_MAX ? n - done : MAP_BATCH_MAX;

		/* -ENOENT: the map ended, after <count> elements */
		if (bpf_map_lookup_batch(fd, first + done ? &prev : NULL, &next, keys,
					 (unsigned char *)values + (size_t)done * size, &count,
					 NULL) < 0 &&
		    errno != ENOENT)
			ret = -errno;
		else if (count == 0 || keys[0] != first + done ||
			 keys[count - 1] != first + done + count - 1)
			ret = -ENOENT;
		done += count;
		prev = next;
	}
	free(keys);
	return ret;
}

/* Whether <v> is a port entry of a table other than <s>'s. */
static bool vip_others(const struct hashlb_steer *s, const struct hlb_steer_vip *v)
{
	return vip_port_entry(v) && vip_table(v) != s->table;
}

/*
 * hashlb_steer_set_vips(), each VIP's port entry with <flags> too
 * (HLB_STEER_VIP_F_CLOSED). Of a program of several tables, the VIPs of
 * <s>'s table: each port entry names it and its half in force (<s>'s vflag),
 * and the other tables' entries are kept as they are; one of them at an
 * address and port of <vips> is an error (-EEXIST).
 */
static int set_vips(struct hashlb_steer *s, const struct sockaddr_storage *vips, uint32_t n,
		    uint32_t flags, struct hashlb_error *err)
{
	struct hlb_steer_vip want[HLB_STEER_VIPS_MAX], v, *cur, *next;
	bool freed[HLB_STEER_VIP_SLOTS];
	uint32_t nw = 0, active, vh;
	struct map_batch *b;
	int ret = vflag_sync(s);

	if (ret < 0)
		return hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "reading the VIP map: %s",
				  strerror(-ret));
	if (s->tables > 1)
		flags |= s->table << HLB_STEER_VIP_TABLE_SHIFT | s->vflag;
	for (uint32_t i = 0; i < n; i++) {
		ret = sockaddr_vip(&vips[i], &v);
		if (ret < 0)
			return hashlb_err(
				err, ret, HASHLB_ERR_SYSTEM,
				"VIP %u: needs an IPv4 or IPv6 address and a non-zero port", i);
		v.flags |= flags;
		ret = vip_want_port(want, &nw, &v);
		if (ret < 0)
			return hashlb_err(err, ret, HASHLB_ERR_SIZE_RANGE,
					  "too many VIPs: %u addresses and ports at most",
					  HLB_STEER_VIPS_MAX);
	}
	ret = vips_read(s, &active, &cur);
	if (ret < 0)
		return hashlb_err(err, ret, ret == -ENOMEM ? HASHLB_ERR_NOMEM : HASHLB_ERR_SYSTEM,
				  "reading the VIP map: %s", strerror(-ret));
	next = calloc(HLB_STEER_VIP_SLOTS, sizeof(*next));
	if (!next) {
		free(cur);
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	}
	vh = (active >> 1) & 1;
	/* The other tables' VIPs stay, and their addresses' markers. */
	for (uint32_t i = 0; i < HLB_STEER_VIP_SLOTS && s->tables > 1; i++) {
		if (!vip_others(s, &cur[i]))
			continue;
		for (uint32_t k = 0; k < nw; k++) {
			if (vip_same(&want[k], &cur[i])) {
				ret = hashlb_err(err, -EEXIST, HASHLB_ERR_SYSTEM,
						 "a VIP of these is table %u's on this interface",
						 vip_table(&cur[i]));
				goto out;
			}
		}
		ret = vip_want_port(want, &nw, &cur[i]);
		if (ret < 0) {
			ret = hashlb_err(err, ret, HASHLB_ERR_SIZE_RANGE,
					 "too many VIPs on this interface: %u addresses and ports "
					 "at most",
					 HLB_STEER_VIPS_MAX);
			goto out;
		}
	}
	if (vip_layout(cur, want, nw, next, freed) < 0) {
		ret = hashlb_err(err, -E2BIG, HASHLB_ERR_SIZE_RANGE,
				 "the VIP table has no room for these VIPs");
		goto out;
	}
	/* Write the half not in use, then flip: a reader sees the old VIP set
	 * or the new one, never a key half written. The program checks an
	 * entry's VIP index on every hit, so the flows of a VIP no longer
	 * served are passed from the flip on; their entries are cleared after
	 * it (vips_ct_clear()): before, they stayed until evicted, and a VIP
	 * given the index later took them (docs/DESIGN-steering.md). */
	vh ^= 1;
	b = batch_new(s->fd[M_VIPS], sizeof(*next));
	if (!b) {
		ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < HLB_STEER_VIP_SLOTS && ret == 0; i++)
		ret = batch_add(b, vh * HLB_STEER_VIP_SLOTS + i, &next[i]);
	if (ret == 0)
		ret = batch_flush(b);
	free(b);
	if (ret == 0)
		ret = steer_flip(s, (active & ~2u) | vh << 1);
	if (ret < 0) {
		errno = -ret;
		goto err_sys;
	}
	vips_ct_clear(s, freed);
	goto out;
err_sys:
	ret = hashlb_err(err, -errno, HASHLB_ERR_SYSTEM, "writing the VIP map: %s",
			 strerror(errno));
out:
	free(next);
	free(cur);
	return ret;
}

/*
 * hlb_active into *<ret_active>, and the VIP half in force it names into
 * *<ret_cur> (HLB_STEER_VIP_SLOTS entries, the caller frees). 0 or -errno.
 */
static int vips_read(struct hashlb_steer *s, uint32_t *ret_active, struct hlb_steer_vip **ret_cur)
{
	struct hlb_steer_vip *cur;
	uint32_t zero = 0, active = 0;
	int ret;

	if (bpf_map_lookup_elem(s->fd[M_ACTIVE], &zero, &active) < 0)
		return -errno;
	cur = calloc(HLB_STEER_VIP_SLOTS, sizeof(*cur));
	if (!cur)
		return -ENOMEM;
	ret = map_read(s->fd[M_VIPS], ((active >> 1) & 1) * HLB_STEER_VIP_SLOTS,
		       HLB_STEER_VIP_SLOTS, cur, sizeof(*cur));
	if (ret < 0) {
		free(cur);
		return ret;
	}
	*ret_active = active;
	*ret_cur = cur;
	return 0;
}

/*
 * Into <ret_v>, the first port entry of the VIP half in force of <s>'s program
 * that is <want>'s address and port, or with no <want>, of table <table>.
 * 0, -ENOENT if none, or -errno.
 */
static int vip_in_force(struct hashlb_steer *s, const struct hlb_steer_vip *want, uint32_t table,
			struct hlb_steer_vip *ret_v)
{
	struct hlb_steer_vip *cur;
	uint32_t active;
	int ret = vips_read(s, &active, &cur);

	if (ret < 0)
		return ret;
	ret = -ENOENT;
	for (uint32_t i = 0; i < HLB_STEER_VIP_SLOTS && ret == -ENOENT; i++) {
		if (!vip_port_entry(&cur[i]) ||
		    !(want ? vip_same(&cur[i], want) : vip_table(&cur[i]) == table))
			continue;
		*ret_v = cur[i];
		ret = 0;
	}
	free(cur);
	return ret;
}

/*
 * <s>'s vflag as its table's VIPs in force say (a handle found or shared:
 * another handle published it). None: nothing reads its table, 0 will do.
 */
static int vflag_read(struct hashlb_steer *s)
{
	s->vflag = 0;
	return vflag_sync(s);
}

/*
 * <s>'s vflag as its table's VIPs in force say, if the table has any: what
 * the program reads, whatever this handle last wrote. None: the handle's own
 * (its table's half written last, which its next VIPs name). 0 or -errno.
 */
static int vflag_sync(struct hashlb_steer *s)
{
	struct hlb_steer_vip v;
	int ret;

	if (s->tables < 2)
		return 0;
	ret = vip_in_force(s, NULL, s->table, &v);
	if (ret == 0)
		s->vflag = v.flags & HLB_STEER_VIP_F_HALF;
	return ret == -ENOENT ? 0 : ret;
}

/*
 * Flip <s>'s table (several tables): the VIP half in force copied to the
 * other, every port entry of its table naming half <vflag>, each where it
 * is (conntrack entries name its index), closed or not; the other tables'
 * entries as they are; then the VIP half flipped. The table's VIPs are the
 * ones in force, not a list of the handle's: a handle that took the program
 * over, or shared a table that served, has none, and a flip by it took its
 * table's VIPs out of the program until its set_vips() (their established
 * flows passed to the stack meanwhile, which resets them). 0 or -errno.
 */
static int vips_flip_table(struct hashlb_steer *s, uint32_t vflag)
{
	struct hlb_steer_vip *cur;
	struct map_batch *b;
	uint32_t active, vh;
	int ret = vips_read(s, &active, &cur);

	if (ret < 0)
		return ret;
	b = batch_new(s->fd[M_VIPS], sizeof(*cur));
	if (!b)
		ret = -ENOMEM;
	vh = ((active >> 1) & 1) ^ 1;
	for (uint32_t i = 0; i < HLB_STEER_VIP_SLOTS && ret == 0; i++) {
		if (vip_port_entry(&cur[i]) && vip_table(&cur[i]) == s->table)
			cur[i].flags = (cur[i].flags & ~HLB_STEER_VIP_F_HALF) | vflag;
		ret = batch_add(b, vh * HLB_STEER_VIP_SLOTS + i, &cur[i]);
	}
	if (ret == 0)
		ret = batch_flush(b);
	free(b);
	free(cur);
	if (ret == 0)
		ret = steer_flip(s, (active & ~2u) | vh << 1);
	return ret;
}

int hashlb_steer_share(struct hashlb_steer *s, uint32_t table, struct hashlb_steer **ret_steer,
		       struct hashlb_error *err)
{
	struct hashlb_steer *o;
	int ret = 0;

	if (table >= s->tables)
		return hashlb_err(err, -ERANGE, HASHLB_ERR_SIZE_RANGE,
				  "table %u: the program holds %u", table, s->tables);
	o = steer_new();
	if (!o)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	o->keep = true;
	o->tables = s->tables;
	o->table = table;
	bregions_copy(o, s);
	o->backends_cap = s->backends_cap;
	o->slots_cap = s->slots_cap;
	o->points_cap = s->points_cap;
	o->buckets_cap = s->buckets_cap;
	o->ct_buckets = s->ct_buckets;
	o->stats_size = s->stats_size;
	o->stats2_size = s->stats2_size;
	o->tstats2_size = s->tstats2_size;
	o->reads_prefix = s->reads_prefix;
	o->reads_ext = s->reads_ext;
	o->ct_seed = s->ct_seed;
	o->mode = s->mode;
	o->ifindex = s->ifindex;
	o->prog_id = s->prog_id;
	memcpy(o->if_mac, s->if_mac, sizeof(o->if_mac));
	for (int m = 0; m < M_MAX && ret == 0; m++)
		if (s->fd[m] >= 0 && (o->fd[m] = fcntl(s->fd[m], F_DUPFD_CLOEXEC, 0)) < 0)
			ret = -errno;
	if (ret == 0)
		ret = ct_map(o);
	if (ret == 0)
		ret = sync_inner_create(o);
	if (ret == 0)
		ret = vflag_read(o);
	if (ret < 0) {
		hashlb_steer_free(o);
		return hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "sharing the program's maps: %s",
				  strerror(-ret));
	}
	*ret_steer = o;
	return 0;
}

void hashlb_steer_caps(const struct hashlb_steer *s, uint32_t *ret_backends, uint32_t *ret_maglev_m,
		       uint32_t *ret_points)
{
	*ret_backends = s->backends_cap;
	*ret_maglev_m = s->slots_cap * HLB_STEER_SLOTS_PER_VALUE;
	*ret_points = s->points_cap;
}

bool hashlb_steer_loaded(const struct hashlb_steer *s)
{
	return s->skel != NULL;
}

uint32_t hashlb_steer_tables(const struct hashlb_steer *s)
{
	return s->tables;
}

uint32_t hashlb_steer_table(const struct hashlb_steer *s)
{
	return s->table;
}

bool hashlb_steer_kept(const struct hashlb_steer *s)
{
	return s->keep;
}

int hashlb_steer_vip_table(struct hashlb_steer *s, const struct sockaddr_storage *vip)
{
	struct hlb_steer_vip want, v;
	int ret = sockaddr_vip(vip, &want);

	if (ret == 0)
		ret = vip_in_force(s, &want, 0, &v);
	return ret < 0 ? ret : (int)vip_table(&v);
}

bool hashlb_steer_table_serves(struct hashlb_steer *s, uint32_t table)
{
	struct hlb_steer_vip v;

	return vip_in_force(s, NULL, table, &v) == 0;
}

int hashlb_steer_use_table(struct hashlb_steer *s, uint32_t table)
{
	if (table >= s->tables)
		return -ERANGE;
	if (table == s->table)
		return 0;
	s->table = table;
	/* what this handle knows of its halves was of another table */
	hashlb_steer_tables_unknown(s);
	s->wrote[0] = s->wrote[1] = false;
	return vflag_read(s);
}

/*
 * Into <ret_v>, the variable <name> of <size> bytes of the read-only data in map <fd>
 * (<mi>), where its BTF places it. 0 or -errno (-ENOENT: no such variable).
 */
static int rodata_var(int fd, const struct bpf_map_info *mi, const char *name, void *ret_v,
		      size_t size)
{
	struct btf *btf = btf__load_from_kernel_by_id(mi->btf_id);
	const struct btf_type *t = btf ? btf__type_by_id(btf, mi->btf_value_type_id) : NULL;
	unsigned char *value;
	uint32_t zero = 0;
	int at = -ENOENT;

	if (!btf)
		return -errno;
	for (uint16_t i = 0; t && btf_is_datasec(t) && i < btf_vlen(t) && at < 0; i++) {
		const struct btf_var_secinfo *vs = &btf_var_secinfos(t)[i];
		const struct btf_type *v = btf__type_by_id(btf, vs->type);

		if (v && vs->size == size && vs->offset + vs->size <= mi->value_size &&
		    strcmp(btf__name_by_offset(btf, v->name_off), name) == 0)
			at = (int)vs->offset;
	}
	btf__free(btf);
	if (at < 0)
		return at;
	value = malloc(mi->value_size);
	if (!value)
		return -ENOMEM;
	if (bpf_map_lookup_elem(fd, &zero, value) == 0)
		memcpy(ret_v, value + at, size);
	else
		at = -errno;
	free(value);
	return at < 0 ? at : 0;
}

/*
 * Into <ret_v>, variable <name> (<size> bytes) of <s>'s program, a found handle's: the value it
 * was loaded with, in its .rodata map. 0 or -errno (-ENOENT: none found).
 */
static int prog_rodata(const struct hashlb_steer *s, const char *name, void *ret_v, size_t size)
{
	uint32_t ids[32], n = 0;
	int ret = prog_map_ids(s->prog_id, ids, &n);

	for (uint32_t i = 0; ret == 0 && i < n; i++) {
		struct bpf_map_info mi;
		int fd = map_open(ids[i], &mi);
		const char *dot = fd >= 0 ? strrchr(mi.name, '.') : NULL;

		if (dot && strcmp(dot, ".rodata") == 0 && mi.btf_id) {
			ret = rodata_var(fd, &mi, name, ret_v, size);
			close(fd);
			return ret;
		}
		if (fd >= 0)
			close(fd);
	}
	return ret < 0 ? ret : -ENOENT;
}

/*
 * Copy elements [<from_first>, + <n>) of array map <from> (values of <size>
 * bytes) to [<to_first>, + <n>) of array map <to>, MAP_BATCH_MAX at a time.
 * 0 or -errno.
 */
static int map_copy(int from, uint32_t from_first, int to, uint32_t to_first, uint32_t n,
		    uint32_t size)
{
	unsigned char *values = malloc((size_t)MAP_BATCH_MAX * size);
	uint32_t *keys = malloc(MAP_BATCH_MAX * sizeof(*keys));
	int ret = values && keys ? 0 : -ENOMEM;

	for (uint32_t done = 0; done < n && ret == 0;) {
		uint32_t count = n - done < MAP_BATCH_MAX ? n - done : MAP_BATCH_MAX;

		ret = map_read(from, from_first + done, count, values, size);
		for (uint32_t i = 0; i < count; i++)
			keys[i] = to_first + done + i;
		if (ret == 0 && bpf_map_update_batch(to, keys, values, &count, NULL) < 0)
			ret = -errno;
		done += count;
	}
	free(values);
	free(keys);
	return ret;
}

/*
 * Every table of <s>'s program, both halves and its backend slots, into
 * <g>'s (capacities no smaller, tables no fewer): at the same indices within
 * each half, and every backend slot at its index, which its conntrack entries
 * name (<g>'s layout keeps <s>'s slots where they are: bregions_grown()), with
 * their names. 0 or -errno.
 */
static int tables_copy(const struct hashlb_steer *s, const struct hashlb_steer *g)
{
	const struct {
		int m;
		uint32_t from_cap, to_cap, size;
	} arrays[] = {
		{ M_TABLES, 1, 1, sizeof(struct hlb_steer_table) },
		{ M_BACKENDS, s->backends_cap, g->backends_cap, sizeof(struct hlb_steer_backend) },
		{ M_SLOTS, s->slots_cap, g->slots_cap, sizeof(struct hlb_steer_slots) },
		{ M_POINTS, s->points_cap, g->points_cap, sizeof(struct hlb_steer_ring_point) },
		{ M_BUCKETS, s->buckets_cap, g->buckets_cap, sizeof(uint32_t) },
	};
	int ret = map_copy(s->fd[M_BSLOTS], 0, g->fd[M_BSLOTS], 0, s->tables * s->backends_cap,
			   sizeof(struct hlb_steer_backend));

	for (uint32_t t = 0; t < s->tables && ret == 0; t++) {
		for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
			for (uint32_t h = 2 * t; h < 2 * t + 2 && ret == 0; h++)
				ret = map_copy(s->fd[arrays[i].m], h * arrays[i].from_cap,
					       g->fd[arrays[i].m], h * arrays[i].to_cap,
					       arrays[i].from_cap, arrays[i].size);
	}
	if (ret == 0 && s->tables > 1 && s->fd[M_TNAMES] >= 0)
		ret = map_copy(s->fd[M_TNAMES], 0, g->fd[M_TNAMES], 0, s->tables,
			       sizeof(struct hlb_steer_tname));
	return ret;
}

/* The first <n> entries of per-CPU map <from> (values of <size> bytes) into <to>'s. 0 or -errno. */
static int percpu_copy(int from, int to, uint32_t n, size_t size)
{
	int ncpu = libbpf_num_possible_cpus(), ret = 0;
	unsigned char *per;

	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	per = calloc((size_t)ncpu, (size + 7) / 8 * 8);
	if (!per)
		return -ENOMEM;
	for (uint32_t t = 0; t < n && ret == 0; t++)
		if (bpf_map_lookup_elem(from, &t, per) < 0 ||
		    bpf_map_update_elem(to, &t, per, BPF_ANY) < 0)
			ret = -errno;
	free(per);
	return ret;
}

/* Table <table>'s entry of a per-CPU map of <size>-byte values (hlb_tstats, hlb_tstats2:
 * map <fd>): <v> on CPU 0 (NULL: 0), 0 on the others, the sum hashlb_steer_tables_stats()
 * reads being <v>. 0 or -errno. */
static int tstats_set(int fd, uint32_t table, const void *v, size_t size)
{
	int ncpu = libbpf_num_possible_cpus(), ret = 0;
	size_t stride = (size + 7) / 8 * 8; /* the kernel's round_up(size, 8) */
	unsigned char *per;

	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	per = calloc((size_t)ncpu, stride);
	if (!per)
		return -ENOMEM;
	if (v)
		memcpy(per, v, size);
	if (bpf_map_update_elem(fd, &table, per, BPF_ANY) < 0)
		ret = -errno;
	free(per);
	return ret;
}

/* <st>'s counters that hlb_tstats2 holds a table's share of, into <ret_t2>: those a table
 * counts of its own (hashlb_steer_stats_tabled()), the others' slots 0. */
static void tstats2_of(const struct hlb_steer_stats *st, struct hlb_steer_tstats2 *ret_t2)
{
	struct hlb_steer_stats own = *st;

	hashlb_steer_stats_tabled(&own);
	ret_t2->new_flows = own.new_flows;
	ret_t2->ct_resched = own.ct_resched;
	ret_t2->ct_evicted = own.ct_evicted;
	ret_t2->ct_lost = own.ct_lost;
	ret_t2->rst_untracked = own.rst_untracked;
	ret_t2->closed_passed = own.closed_passed;
	ret_t2->ct_closing = own.ct_closing;
	memcpy(ret_t2->drops, own.drops, sizeof(ret_t2->drops));
}

/*
 * Table 0's own counters in <g>'s program (of several tables, not attached
 * yet) start at the packets and bytes of <s>'s (of one table: they are
 * all its table's), so that the service's go on across the swap. The
 * packets <s>'s program forwards between this and the swap are in the
 * program's counters, not in table 0's. 0 or -errno.
 */
static int tstats_seed(struct hashlb_steer *s, const struct hashlb_steer *g)
{
	struct hlb_steer_stats st;
	struct hlb_steer_tstats v;
	struct hlb_steer_tstats2 v2;
	int ret;

	ret = hashlb_steer_stats(s, &st);
	if (ret < 0)
		return ret;
	v.packets = st.packets;
	v.bytes = st.bytes;
	tstats2_of(&st, &v2);
	ret = tstats_set(g->fd[M_TSTATS2], 0, &v2, sizeof(v2));
	return ret < 0 ? ret : tstats_set(g->fd[M_TSTATS], 0, &v, sizeof(v));
}

/* Table <table>'s name in <s>'s program's hlb_tnames: <name> (at most
 * HLB_STEER_TNAME_MAX bytes), NUL-padded. 0 or -errno. */
static int name_write(struct hashlb_steer *s, uint32_t table, const char *name)
{
	struct hlb_steer_tname v;

	memset(&v, 0, sizeof(v));
	memcpy(v.name, name, strnlen(name, sizeof(v.name)));
	if (bpf_map_update_elem(s->fd[M_TNAMES], &table, &v, BPF_ANY) < 0)
		return -errno;
	return 0;
}

int hashlb_steer_set_name(struct hashlb_steer *s, const char *name)
{
	if (strlen(name) > HLB_STEER_TNAME_MAX)
		return -ENAMETOOLONG;
	snprintf(s->name, sizeof(s->name), "%s", name);
	if (s->fd[M_TNAMES] < 0)
		return 0; /* an older hashlb's program: it names no table */
	return name_write(s, s->tables > 1 ? s->table : 0, name);
}

int hashlb_steer_set_name_unowned(struct hashlb_steer *s, const char *name, const char *iface,
				  const char *remedy, struct hashlb_error *err)
{
	int fd, ret = publish_lock(s, &fd, err);

	if (ret < 0)
		return ret;
	/* a hashlb run marks the program under this lock, then names its table: marked
	 * before this, its name is left; marked after, it names its table after this */
	ret = hashlb_steer_check_driver(s, iface, remedy, err);
	if (ret == 0) {
		ret = hashlb_steer_set_name(s, name);
		if (ret < 0)
			hashlb_err(err, ret, HASHLB_ERR_SYSTEM,
				   "naming the table in the program on "
				   "'%s': %s",
				   iface, strerror(-ret));
	}
	publish_unlock(fd);
	return ret;
}

int hashlb_steer_table_name(struct hashlb_steer *s, uint32_t table, char *ret_name, size_t len)
{
	struct hlb_steer_tname v;

	if (s->fd[M_TNAMES] < 0)
		return -EOPNOTSUPP;
	if (bpf_map_lookup_elem(s->fd[M_TNAMES], &table, &v) < 0)
		return -errno;
	snprintf(ret_name, len, "%.*s", (int)sizeof(v.name), v.name);
	return 0;
}

int hashlb_steer_table_stats_clear(struct hashlb_steer *s)
{
	int ret;

	if (s->tables < 2 || s->fd[M_TSTATS] < 0)
		return 0;
	ret = tstats_set(s->fd[M_TSTATS], s->table, NULL, sizeof(struct hlb_steer_tstats));
	/* of its own size: another hashlb's may be larger */
	if (ret == 0 && s->fd[M_TSTATS2] >= 0 && s->tstats2_size)
		ret = tstats_set(s->fd[M_TSTATS2], s->table, NULL, s->tstats2_size);
	return ret;
}

/* <g>'s program attached where <s>'s is, in its place, at once: each packet
 * goes through one or the other. 0 or -errno. */
static int prog_replace(struct hashlb_steer *s, struct hashlb_steer *g)
{
	if (s->mode == HASHLB_STEER_XDP_NATIVE || s->mode == HASHLB_STEER_XDP_GENERIC) {
		/* a found handle has the program's id only */
		int old = s->skel ? bpf_program__fd(s->skel->progs.hlb_xdp)
				  : bpf_prog_get_fd_by_id(s->prog_id);
		LIBBPF_OPTS(bpf_xdp_attach_opts, xo, .old_prog_fd = old);
		uint32_t flags = s->mode == HASHLB_STEER_XDP_NATIVE ? XDP_FLAGS_DRV_MODE
								    : XDP_FLAGS_SKB_MODE;
		int ret;

		if (old < 0)
			return -errno;
		/* REPLACE: only if <s>'s is still the one there */
		ret = bpf_xdp_attach(s->ifindex, bpf_program__fd(g->skel->progs.hlb_xdp),
				     flags | XDP_FLAGS_REPLACE, &xo);
		if (!s->skel)
			close(old);
		return ret;
	}
	if (s->mode == HASHLB_STEER_TC) {
		LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = s->ifindex,
			    .attach_point = BPF_TC_INGRESS);
		LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = bpf_program__fd(g->skel->progs.hlb_tc),
			    .handle = TC_HANDLE, .priority = TC_PRIORITY,
			    .flags = BPF_TC_F_REPLACE);

		/* a filter's change swaps its program in place; not conditional
		 * on the one there (netlink has no expected program; tcx's
		 * BPF_F_REPLACE has, but not libbpf 1.1, and older hashlb would
		 * not see it: docs/DESIGN-steering.md): asked first */
		if (prog_at(s->ifindex, HASHLB_STEER_TC) != s->prog_id)
			return -ESTALE;
		return bpf_tc_attach(&hook, &opts);
	}
	return 0; /* loaded only */
}

/*
 * <g>'s layout of hlb_bslots, <s>'s grown to <g>'s tables and backends_cap (bregions_grow():
 * every slot of <s> where its conntrack entries name it). Before, the slots were re-strided
 * to t * backends_cap, which moved every table's but the first, so a program of several
 * tables could not grow its backends. 0, or -E2BIG with <err>: grown too many times.
 */
static int bregions_grown(const struct hashlb_steer *s, struct hashlb_steer *g,
			  struct hashlb_error *err)
{
	struct hlb_steer_bregion r[BREGIONS_GROWN_MAX];
	uint32_t n = bregions_grow(s->bregions, s->n_bregions, s->tables, s->backends_cap,
				   g->tables, g->backends_cap, r);

	if (n > HLB_STEER_BREGIONS_MAX)
		return hashlb_err(err, -E2BIG, HASHLB_ERR_SIZE_RANGE,
				  "the program's backend slots grew too many times (%u regions, "
				  "%u at most)",
				  n, HLB_STEER_BREGIONS_MAX);
	memcpy(g->bregions, r, n * sizeof(r[0]));
	g->n_bregions = n;
	return 0;
}

int hashlb_steer_grow(struct hashlb_steer *s, const struct hashlb_steer_opts *o,
		      struct hashlb_error *err)
{
	struct hashlb_steer *g;
	uint32_t slots =
		(o->max_maglev_m + HLB_STEER_SLOTS_PER_VALUE - 1) / HLB_STEER_SLOTS_PER_VALUE;
	int lock_fd, ret;

	if (!s->reads_prefix || !s->reads_ext || s->stats_size != HLB_STEER_STATS_SIZE ||
	    s->stats2_size != sizeof(struct hlb_steer_stats2) ||
	    (s->tables > 1 && (s->tstats2_size != sizeof(struct hlb_steer_tstats2) ||
			       s->fd[M_TSTATS] < 0 || s->fd[M_TSTATS2] < 0)))
		return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM,
				  "only a program of this hashlb version is replaced");
	if (o->tables <= s->tables && o->max_backends <= s->backends_cap && slots <= s->slots_cap &&
	    o->max_ring_points <= s->points_cap)
		return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM,
				  "the program holds %u table%s of %u backends, Maglev M %u and "
				  "%u ring points already",
				  s->tables, s->tables == 1 ? "" : "s", s->backends_cap,
				  s->slots_cap * HLB_STEER_SLOTS_PER_VALUE, s->points_cap);
	/* a program found (taken over): its seed is in its read-only data */
	ret = s->skel ? 0 : prog_rodata(s, "ct_seed", &s->ct_seed, sizeof(s->ct_seed));
	if (ret < 0)
		return hashlb_err(err, ret, HASHLB_ERR_SYSTEM,
				  "reading the program's conntrack seed: %s", strerror(-ret));
	g = steer_new();
	if (!g)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	/* never detached by its free; its conntrack mapping is <s>'s */
	g->keep = true;
	g->tables = max_u32(s->tables, o->tables);
	g->backends_cap = max_u32(s->backends_cap, o->max_backends);
	g->slots_cap = max_u32(s->slots_cap, slots);
	g->points_cap = max_u32(s->points_cap, o->max_ring_points);
	g->ct_buckets = s->ct_buckets;
	g->ct_seed = s->ct_seed;
	ret = tables_fit(g, err);
	if (ret == 0)
		ret = bregions_grown(s, g, err);
	if (ret < 0)
		goto out;
	g->buckets_cap = HLB_STEER_RING_BUCKETS_PER_POINT * g->points_cap;
	/* no publication into <s>'s halves between their copy and the swap */
	ret = publish_lock(s, &lock_fd, err);
	if (ret < 0)
		goto out;
	ret = skel_load(g, false, s, err);
	if (ret == 0) {
		ret = tables_copy(s, g);
		/* a program of one table counts none of its own: its table's are the program's */
		if (ret == 0 && s->tables == 1)
			ret = tstats_seed(s, g);
		else if (ret == 0)
			ret = percpu_copy(s->fd[M_TSTATS], g->fd[M_TSTATS], s->tables,
					  sizeof(struct hlb_steer_tstats));
		if (ret == 0 && s->tables > 1)
			ret = percpu_copy(s->fd[M_TSTATS2], g->fd[M_TSTATS2], s->tables,
					  sizeof(struct hlb_steer_tstats2));
		if (ret == 0 && s->tables == 1 && s->name[0])
			ret = name_write(g, 0, s->name);
		if (ret < 0)
			hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "copying the tables: %s",
				   strerror(-ret));
	}
	if (ret == 0) {
		ret = prog_replace(s, g);
		if (ret < 0)
			hashlb_err(err, ret, HASHLB_ERR_SYSTEM,
				   "replacing the program attached (%s): %s",
				   hashlb_steer_mode_name(s->mode), strerror(-ret));
	}
	/*
	 * Packets still in the old program read the halves in force when they
	 * began: wait them out before a publication (another process's, waiting
	 * on the lock) may flip the shared active word and rewrite the other
	 * half. steer_flip()'s wait: a barrier, or a pause that outlasts them.
	 */
	if (ret == 0) {
		if (s->fd[M_SYNC] < 0 || s->sync_inner_fd < 0 || steer_barrier(s) < 0)
			usleep(20000);
	}
	publish_unlock(lock_fd);
	if (ret < 0)
		goto out;

	/* <s> drives <g>'s program now, and <g> frees <s>'s old one, detached
	 * by the swap. Table 0's hlb_tables entries are the ones <s> wrote; the
	 * copies of its halves are of the old capacities. */
	{
		struct hashlb_steer old = *s;

		s->skel = g->skel;
		memcpy(s->fd, g->fd, sizeof(s->fd));
		s->tables = g->tables;
		bregions_copy(s, g);
		s->tstats2_size = g->tstats2_size; /* an older program of one table had none */
		s->backends_cap = g->backends_cap;
		s->slots_cap = g->slots_cap;
		s->points_cap = g->points_cap;
		s->buckets_cap = g->buckets_cap;
		memset(s->shadow, 0, sizeof(s->shadow));
		s->pristine[0] = s->pristine[1] = false;
		if (s->mode != HASHLB_STEER_LOAD_ONLY)
			s->prog_id = skel_prog_id(s);
		/* a found handle's detach asked the active word; detach()'s asks this */
		if (!old.skel)
			s->tc_hook_created = active_has(s, HLB_STEER_ACTIVE_CLSACT);
		/* none for a found handle: a flip then waited by time (steer_flip()) */
		if (s->sync_inner_fd < 0)
			sync_inner_create(s);
		g->skel = old.skel;
		memcpy(g->fd, old.fd, sizeof(g->fd));
		memcpy(g->shadow, old.shadow, sizeof(g->shadow));
	}
out:
	g->ct = NULL;
	hashlb_steer_free(g);
	return ret;
}

int hashlb_steer_rebind(struct hashlb_steer *h, const struct hashlb_steer *s,
			struct hashlb_error *err)
{
	int fd[M_MAX], ret = 0;

	if (h->skel || h->ifindex != s->ifindex || h->table >= s->tables)
		return hashlb_err(err, -EINVAL, HASHLB_ERR_SYSTEM,
				  "a handle of another program's table, or one that loaded it");
	for (int m = 0; m < M_MAX; m++)
		fd[m] = -1;
	for (int m = 0; m < M_MAX && ret == 0; m++)
		if (s->fd[m] >= 0 && (fd[m] = fcntl(s->fd[m], F_DUPFD_CLOEXEC, 0)) < 0)
			ret = -errno;
	if (ret < 0) {
		for (int m = 0; m < M_MAX; m++)
			if (fd[m] >= 0)
				close(fd[m]);
		return hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "sharing the program's maps: %s",
				  strerror(-ret));
	}
	/* its conntrack mapping stays: hlb_ct is the same map */
	for (int m = 0; m < M_MAX; m++) {
		if (h->fd[m] >= 0)
			close(h->fd[m]);
		h->fd[m] = fd[m];
	}
	h->tables = s->tables;
	bregions_copy(h, s);
	h->backends_cap = s->backends_cap;
	h->slots_cap = s->slots_cap;
	h->points_cap = s->points_cap;
	h->buckets_cap = s->buckets_cap;
	h->stats_size = s->stats_size;
	h->stats2_size = s->stats2_size;
	h->tstats2_size = s->tstats2_size;
	h->prog_id = s->prog_id;
	/* its copies were of the old maps' halves, of their capacities */
	for (int i = 0; i < SHADOW_MAX; i++) {
		free(h->shadow[i].v);
		memset(&h->shadow[i], 0, sizeof(h->shadow[i]));
	}
	h->pristine[0] = h->pristine[1] = false;
	/* the copy holds what it last wrote: its entries are still its own */
	ret = vflag_read(h);
	return ret < 0 ? hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "reading its VIPs' half: %s",
				    strerror(-ret))
		       : 0;
}

int hashlb_steer_set_vips(struct hashlb_steer *s, const struct sockaddr_storage *vips, uint32_t n,
			  struct hashlb_error *err)
{
	int fd, ret = publish_lock(s, &fd, err);

	if (ret < 0)
		return ret;
	ret = set_vips(s, vips, n, 0, err);
	publish_unlock(fd);
	return ret;
}

bool hashlb_steer_reads_closed(const struct hashlb_steer *s)
{
	return s->fd[M_STATS2] >= 0 &&
	       s->stats2_size >= offsetof(struct hlb_steer_stats2, closed_passed) +
					 sizeof(((struct hlb_steer_stats2 *)0)->closed_passed);
}

int hashlb_steer_close_vips(struct hashlb_steer *s, const struct sockaddr_storage *vips, uint32_t n,
			    struct hashlb_error *err)
{
	int fd, ret;

	if (!hashlb_steer_reads_closed(s))
		return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM,
				  "the program is an older hashlb's, which would steer new "
				  "connections on: it cannot be closed");
	ret = publish_lock(s, &fd, err);
	if (ret < 0)
		return ret;
	ret = set_vips(s, vips, n, HLB_STEER_VIP_F_CLOSED, err);
	publish_unlock(fd);
	return ret;
}

static int map_write(int fd, uint32_t key, const void *value)
{
	return bpf_map_update_elem(fd, &key, value, BPF_ANY) < 0 ? -errno : 0;
}

/*
 * <s>'s shadow <which> of a table array of <cap> values of <size> bytes a
 * half, allocated on first use: a program this handle loaded starts with its
 * maps all zero, one found holds what another process wrote. NULL if out of
 * memory: then every element is written.
 */
static struct shadow *shadow_get(struct hashlb_steer *s, int which, uint32_t size, uint32_t cap)
{
	struct shadow *sh = &s->shadow[which];

	if (!sh->v) {
		sh->v = calloc(2 * (size_t)cap, size);
		if (!sh->v) {
			/* what is written now, one allocated later cannot know */
			s->pristine[0] = s->pristine[1] = false;
			return NULL;
		}
		sh->size = size;
		sh->cap = cap;
		sh->known[0] = s->pristine[0] ? cap : 0;
		sh->known[1] = s->pristine[1] ? cap : 0;
	}
	return sh;
}

/* batch_add() of <value> (<size> bytes, <b>'s and <sh>'s) into element <i>
 * of half <half> (<cap> a half) of <b>'s map, unless <sh> (NULL: none) says
 * the half holds it already. 0 or -errno. */
static inline int shadow_add(struct map_batch *b, struct shadow *sh, uint32_t half, uint32_t cap,
			     uint32_t i, const void *value, size_t size)
{
	if (sh) {
		unsigned char *cur = sh->v + ((size_t)half * cap + i) * size;

		if (i < sh->known[half] && memcmp(cur, value, size) == 0)
			return 0;
		memcpy(cur, value, size);
	}
	return batch_add_sized(b, half * cap + i, value, size);
}

/* After elements [0, <n>) of half <half> were sent (<ret> 0) or not. */
static int shadow_done(struct shadow *sh, uint32_t half, uint32_t n, int ret)
{
	if (sh)
		sh->known[half] = ret < 0 ? 0 : sh->known[half] > n ? sh->known[half] : n;
	return ret;
}

/* Forget what half <half> of the table arrays holds. */
static void shadow_forget(struct hashlb_steer *s, uint32_t half)
{
	for (int i = 0; i < SHADOW_MAX; i++)
		s->shadow[i].known[half] = 0;
	s->pristine[half] = false;
}

void hashlb_steer_tables_unknown(struct hashlb_steer *s)
{
	shadow_forget(s, 0);
	shadow_forget(s, 1);
}

/*
 * Before half <half> is written: if its hlb_tables entry is not the one <s>
 * wrote last, another loader wrote the half since, and <s>'s copies of it
 * are forgotten (before, the elements the copies held already were not
 * written, and the half became a mix of two tables). Then the entry says
 * the half is being written, for a loader that finds it so later: this
 * publication may end before its entry is written. 0 or -errno.
 */
static int shadow_check(struct hashlb_steer *s, uint32_t half)
{
	uint32_t th = 2 * s->table + half;
	struct hlb_steer_table cur;

	if (bpf_map_lookup_elem(s->fd[M_TABLES], &th, &cur) < 0)
		return -errno;
	if (!s->wrote[half] || memcmp(&cur, &s->written[half], sizeof(cur)) != 0)
		shadow_forget(s, half);
	s->wrote[half] = false;
	if (cur.stamp == HLB_STEER_STAMP_WRITING)
		return 0;
	cur.stamp = HLB_STEER_STAMP_WRITING;
	return map_write(s->fd[M_TABLES], th, &cur);
}

/*
 * The kernel's ring index of <v>: finer than the core's (about
 * HLB_STEER_RING_BUCKETS_PER_POINT buckets a point, at most <cap>), so that
 * most buckets hold no point and answer without a scan. Bucket b covers
 * hashes [b << (64 - bits), (b + 1) << (64 - bits)); its entry is the owner
 * of the first point at or after the bucket (wrapping to point 0) with
 * HLB_STEER_RING_DIRECT if no point lies inside it, else that point's
 * index. On success stores the bits, the most points a scan steps over, and
 * the 1 << bits entries (the caller frees them). -ENOMEM.
 */
static int ring_index(const struct hashlb_table_view *v, uint32_t cap, uint32_t *ret_bits,
		      uint32_t *ret_max_scan, uint32_t **ret_bucket)
{
	uint32_t bits = 0, max_scan = 0, i = 0, nb, *bucket;

	while (bits < 31 &&
	       (1ull << bits) < (uint64_t)HLB_STEER_RING_BUCKETS_PER_POINT * v->n_points &&
	       (2ull << bits) <= cap)
		bits++;
	nb = 1u << bits;
	bucket = calloc(nb, sizeof(*bucket));
	if (!bucket)
		return -ENOMEM;
	for (uint32_t b = 0; b < nb; b++) {
		/* The bucket's last hash, as 64-bit arithmetic allows. */
		uint64_t lo = bits ? (uint64_t)b << (64 - bits) : 0;
		uint64_t last = bits ? lo + ((UINT64_MAX >> bits)) : UINT64_MAX;
		uint32_t inside = 0;

		while (i < v->n_points && v->pos[i] < lo)
			i++;
		for (uint32_t j = i; j < v->n_points && v->pos[j] <= last; j++)
			inside++;
		if (v->n_points == 0)
			bucket[b] = 0;
		else if (inside == 0)
			bucket[b] = HLB_STEER_RING_DIRECT | v->owner[i < v->n_points ? i : 0];
		else
			bucket[b] = i;
		/* A scan steps over the points inside, then lands on the next. */
		if (inside > max_scan)
			max_scan = inside;
	}
	*ret_bits = bits;
	*ret_max_scan = max_scan;
	*ret_bucket = bucket;
	return 0;
}

/* Write table <v> into half <half>. */
static int write_half(struct hashlb_steer *s, uint32_t half, const struct hashlb_table_view *v,
		      struct hlb_steer_table *meta, struct hashlb_error *err)
{
	struct shadow *sh;
	struct map_batch *b;
	int ret = 0;

	if (v->scheme == HASHLB_SCHEME_MAGLEV) {
		uint32_t nv = (v->m + HLB_STEER_SLOTS_PER_VALUE - 1) / HLB_STEER_SLOTS_PER_VALUE;

		if (nv > s->slots_cap)
			return hashlb_err(err, -E2BIG, HASHLB_ERR_SIZE_RANGE,
					  "Maglev M=%u exceeds the loaded capacity %u (sized at "
					  "attach: hashlb steer --max-maglev-m, hashlb run by its "
					  "config)",
					  v->m, s->slots_cap * HLB_STEER_SLOTS_PER_VALUE);
		sh = shadow_get(s, SHADOW_SLOTS, sizeof(struct hlb_steer_slots), s->slots_cap);
		b = batch_new(s->fd[M_SLOTS], sizeof(struct hlb_steer_slots));
		if (!b)
			return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		b->base = 2 * s->table * s->slots_cap;
		for (uint32_t i = 0; i < nv && ret == 0; i++) {
			struct hlb_steer_slots sl;

			for (uint32_t j = 0; j < HLB_STEER_SLOTS_PER_VALUE; j++) {
				uint32_t slot = i * HLB_STEER_SLOTS_PER_VALUE + j;

				sl.b[j] = slot < v->m ? v->slots[slot] : HLB_STEER_BACKEND_NONE;
			}
			ret = shadow_add(b, sh, half, s->slots_cap, i, &sl, sizeof(sl));
		}
		if (ret == 0)
			ret = batch_flush(b);
		ret = shadow_done(sh, half, nv, ret);
		free(b);
		if (ret < 0)
			goto err_sys;
		meta->scheme = HLB_STEER_SCHEME_MAGLEV;
		meta->m = v->m;
		return 0;
	}

	uint32_t bits, max_scan, *bucket;

	if (v->n_points > s->points_cap)
		return hashlb_err(err, -E2BIG, HASHLB_ERR_SIZE_RANGE,
				  "the ring's %u points exceed the loaded capacity %u (sized at "
				  "attach: hashlb steer --max-ring-points, hashlb run by its "
				  "config)",
				  v->n_points, s->points_cap);
	ret = ring_index(v, s->buckets_cap, &bits, &max_scan, &bucket);
	if (ret < 0)
		return hashlb_err(err, ret, HASHLB_ERR_NOMEM, "out of memory");
	if (max_scan > HLB_STEER_RING_SCAN_MAX) {
		free(bucket);
		return hashlb_err(
			err, -E2BIG, HASHLB_ERR_SIZE_RANGE,
			"ring index bucket of %u points exceeds the kernel's scan bound %u",
			max_scan, HLB_STEER_RING_SCAN_MAX);
	}
	sh = shadow_get(s, SHADOW_BUCKETS, sizeof(*bucket), s->buckets_cap);
	b = batch_new(s->fd[M_BUCKETS], sizeof(*bucket));
	if (!b) {
		free(bucket);
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	}
	b->base = 2 * s->table * s->buckets_cap;
	for (uint32_t k = 0; k < (1u << bits) && ret == 0; k++)
		ret = shadow_add(b, sh, half, s->buckets_cap, k, &bucket[k], sizeof(*bucket));
	free(bucket);
	if (ret == 0)
		ret = batch_flush(b);
	ret = shadow_done(sh, half, 1u << bits, ret);
	free(b);
	sh = shadow_get(s, SHADOW_POINTS, sizeof(struct hlb_steer_ring_point), s->points_cap);
	b = ret == 0 ? batch_new(s->fd[M_POINTS], sizeof(struct hlb_steer_ring_point)) : NULL;
	if (ret == 0 && !b)
		return hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
	if (b)
		b->base = 2 * s->table * s->points_cap;
	for (uint32_t i = 0; i < v->n_points && ret == 0; i++) {
		struct hlb_steer_ring_point p = { .pos = v->pos[i], .owner = v->owner[i] };

		ret = shadow_add(b, sh, half, s->points_cap, i, &p, sizeof(p));
	}
	if (ret == 0)
		ret = batch_flush(b);
	ret = shadow_done(sh, half, v->n_points, ret);
	free(b); /* NULL after an error */
	if (ret < 0)
		goto err_sys;
	meta->scheme = HLB_STEER_SCHEME_RING;
	meta->n_points = v->n_points;
	meta->bucket_bits = bits;
	meta->max_scan = max_scan;
	return 0;
err_sys:
	return hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "writing the table map: %s", strerror(-ret));
}

static void backend_value(struct hashlb_steer *s, const struct hashlb_table *t, uint32_t i,
			  const struct hashlb_steer_dest *d, uint32_t slot, uint8_t incarnation,
			  struct hlb_steer_backend *ret_be)
{
	static const uint8_t zero_mac[6];
	struct hlb_steer_backend be;

	memset(&be, 0, sizeof(be));
	be.id = hashlb_steer_backend_id(hashlb_table_backend_name(t, i));
	memcpy(be.dst_mac, d->mac, 6);
	memcpy(be.src_mac, memcmp(d->src_mac, zero_mac, 6) ? d->src_mac : s->if_mac, 6);
	if (d->ifindex && d->ifindex != (uint32_t)s->ifindex && !memcmp(d->src_mac, zero_mac, 6)) {
		char name[IF_NAMESIZE];

		/* Another egress interface: frames leave with its address. */
		if (if_indextoname(d->ifindex, name))
			if_mac(name, be.src_mac);
	}
	be.ifindex = d->ifindex;
	be.slot = (uint16_t)bslot(s, s->table, slot); /* its table's slots */
	be.incarnation = incarnation;
	if (!hashlb_table_backend_down(t, i) || d->keep_flows)
		be.flags |= HLB_STEER_BACKEND_F_KEEP;
	/* Takes no new flow: out of the table, or in it at weight 0. */
	if (hashlb_table_backend_down(t, i) || hashlb_table_backend_weight(t, i) == 0)
		be.flags |= HLB_STEER_BACKEND_F_OUT;
	*ret_be = be;
}

/*
 * The destination of backend <i> of <t> as published: <d>, but a backend
 * down in the table that keeps its flows with no MAC given (its neighbour
 * entry is gone, the host may be too) keeps the MAC its slot has, when the
 * slot is its own already (<slot_be>), else loses its flows.
 */
static struct hashlb_steer_dest dest_effective(const struct hashlb_table *t, uint32_t i,
					       const struct hashlb_steer_dest *d,
					       const struct hlb_steer_backend *slot_be)
{
	static const uint8_t zero_mac[6];
	struct hashlb_steer_dest e = *d;

	if (!e.keep_flows || !hashlb_table_backend_down(t, i) || memcmp(e.mac, zero_mac, 6))
		return e;
	if (slot_be->id == hashlb_steer_backend_id(hashlb_table_backend_name(t, i)) &&
	    (slot_be->flags & HLB_STEER_BACKEND_F_KEEP) && memcmp(slot_be->dst_mac, zero_mac, 6))
		memcpy(e.mac, slot_be->dst_mac, 6);
	else
		e.keep_flows = false;
	return e;
}

/*
 * Clear the conntrack entries of each slot j of <s>'s table with <half>[j] set
 * whose incarnation lies in that half of the range (1: 1..127, 2: 128..255). An
 * entry is compared and cleared in one step: a program may rewrite the way
 * meanwhile, for another flow. 0 or -ENOMEM.
 */
static int ct_clear_incarnations(struct hashlb_steer *s, const uint8_t *half)
{
	uint32_t all = s->tables * s->backends_cap;
	/* by the slot an entry names: its table's slots only */
	uint8_t *of = calloc(all ? all : 1, 1);

	if (!of)
		return -ENOMEM;
	for (uint32_t j = 0; j < s->backends_cap; j++)
		of[bslot(s, s->table, j)] = half[j];
	for (uint32_t b = 0; b < s->ct_buckets; b++) {
		for (int w = 0; w < HLB_STEER_CT_WAYS; w++) {
			uint64_t e = __atomic_load_n(&s->ct[b].way[w], __ATOMIC_RELAXED);
			uint32_t slot = (uint32_t)e & 0xffff;
			uint32_t inc = (uint32_t)(e >> HLB_STEER_CT_INC_SHIFT) & 0xff;

			if (e && slot < all && of[slot] && of[slot] == (inc < 128 ? 1 : 2))
				__atomic_compare_exchange_n(&s->ct[b].way[w], &e, 0, false,
							    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
		}
	}
	free(of);
	return 0;
}

/* Table <s>'s backend slots, [0, backends_cap), from hlb_bslots into <ret_be>. 0 or -errno. */
static int bslots_read(struct hashlb_steer *s, struct hlb_steer_backend *ret_be)
{
	int ret = 0;

	if (s->n_bregions == 0)
		return map_read(s->fd[M_BSLOTS], s->table * s->backends_cap, s->backends_cap,
				ret_be, sizeof(*ret_be));
	for (uint32_t k = 0; k < s->n_bregions && ret == 0; k++) {
		const struct hlb_steer_bregion *r = &s->bregions[k];

		if (s->table >= r->t_first && s->table < r->t_end)
			ret = map_read(s->fd[M_BSLOTS],
				       r->base + (s->table - r->t_first) * (r->hi - r->lo),
				       r->hi - r->lo, ret_be + r->lo, sizeof(*ret_be));
	}
	return ret;
}

/* A backend slot and the id it holds, ordered by id, then slot. */
struct slot_key {
	uint64_t id;
	uint32_t slot;
};

static int slot_key_cmp(const void *a, const void *b)
{
	const struct slot_key *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return (x->slot > y->slot) - (x->slot < y->slot);
}

/* The pass of assign_slots() that may give slot <j> away: 0 free, 1 a dropped
 * backend's, 2 a dropped backend's that drains (<held>). */
static uint32_t slot_pass(const uint64_t *slot_id, const bool *held, uint32_t j)
{
	if (slot_id[j] == 0)
		return 0;
	return held[j] ? 2 : 1;
}

/*
 * Give each backend of <t> a slot: the one its id holds already, else a free
 * one (id 0), else one held by a backend of the table in force that <t>
 * drops (<ret_deferred>[slot] set: its new holder's value goes into the slot
 * only once <t> is in force, hashlb_steer_set_table()). <slot_id> holds the
 * ids in the slots now. A slot <held> (a dropped backend's that drains) is
 * taken last, only when no other is left (its flows are lost then, as any
 * dropped backend's). Every backend gets one when <t> has no more backends
 * than slots: each slot is one of <t>'s, free, or a dropped backend's.
 * Returns 0 or -ENOMEM.
 */
static int assign_slots(struct hashlb_steer *s, const struct hashlb_table *t,
			const uint64_t *slot_id, const bool *held, uint32_t *ret_slot,
			bool *ret_deferred)
{
	uint32_t n = hashlb_table_backend_count(t);
	bool *claimed = calloc(s->backends_cap, sizeof(*claimed));
	struct slot_key *by_id = malloc(s->backends_cap * sizeof(*by_id));

	if (!claimed || !by_id) {
		free(claimed);
		free(by_id);
		return -ENOMEM;
	}
	/* Each backend's own slot first: a later one must not take it. Found
	 * among the slots sorted by id (before, a scan of every slot for each
	 * backend: 50,000,000 steps for 5,000 backends in 10,000 slots). */
	for (uint32_t j = 0; j < s->backends_cap; j++)
		by_id[j] = (struct slot_key){ .id = slot_id[j], .slot = j };
	qsort(by_id, s->backends_cap, sizeof(*by_id), slot_key_cmp);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t id = hashlb_steer_backend_id(hashlb_table_backend_name(t, i));
		uint32_t lo = 0, hi = s->backends_cap;

		/* the first slot of <id>, as the scan found it */
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (by_id[mid].id < id)
				lo = mid + 1;
			else
				hi = mid;
		}
		ret_slot[i] = lo < s->backends_cap && by_id[lo].id == id ? by_id[lo].slot
									 : s->backends_cap;
		if (ret_slot[i] < s->backends_cap)
			claimed[ret_slot[i]] = true;
	}
	free(by_id);
	/* Then a free slot (pass 0), else a dropped backend's (pass 1), else a
	 * draining one's (pass 2). */
	for (uint32_t pass = 0; pass < 3; pass++) {
		/* the slots before <from> are claimed or not of this pass */
		for (uint32_t i = 0, from = 0; i < n; i++) {
			uint32_t j;

			if (ret_slot[i] < s->backends_cap)
				continue;
			for (j = from; j < s->backends_cap &&
				       (claimed[j] || slot_pass(slot_id, held, j) != pass);
			     j++)
				;
			if (j == s->backends_cap)
				continue;
			claimed[j] = true;
			ret_slot[i] = j;
			ret_deferred[j] = pass > 0;
			from = j + 1;
		}
	}
	free(claimed);
	return 0;
}

int hashlb_steer_table_fits(struct hashlb_steer *s, const struct hashlb_table_params *p,
			    const char *const *names, const uint32_t *weights, const bool *backup,
			    uint32_t n, struct hashlb_error *err)
{
	struct hashlb_steer_needs need;

	hashlb_steer_needs(p, weights, backup, n, &need);
	if (p->scheme == HASHLB_SCHEME_MAGLEV) {
		if ((need.maglev_m + HLB_STEER_SLOTS_PER_VALUE - 1) / HLB_STEER_SLOTS_PER_VALUE >
		    s->slots_cap)
			return hashlb_err(err, -E2BIG, HASHLB_ERR_SIZE_RANGE,
					  "Maglev M=%u, its program has %u", need.maglev_m,
					  s->slots_cap * HLB_STEER_SLOTS_PER_VALUE);
	} else if (need.ring_points > s->points_cap) {
		uint64_t v = p->ring_v ? p->ring_v : HASHLB_RING_V_DEFAULT;

		return hashlb_err(err, -E2BIG, HASHLB_ERR_SIZE_RANGE,
				  "the ring needs %llu points (vnodes %llu x weights %llu), its "
				  "program has %u",
				  (unsigned long long)need.ring_points, (unsigned long long)v,
				  (unsigned long long)(need.ring_points / v), s->points_cap);
	}
	/* A backend the kernel's table has and these drop gives its slot up
	 * (assign_slots()): only these count. */
	if (n > s->backends_cap)
		return hashlb_err(err, -E2BIG, HASHLB_ERR_TOO_MANY_BACKENDS,
				  "%u backends, its program has %u", n, s->backends_cap);
	return 0;
}

static int id_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/*
 * Which slots of <s>'s table, as <slot_be> holds them, are those of the <n_held>
 * backends named <held_names> that keep their flows: <ret_held>[slot]. -ENOMEM.
 */
static int slots_held(const struct hashlb_steer *s, const struct hlb_steer_backend *slot_be,
		      const char *const *held_names, uint32_t n_held, bool *ret_held)
{
	uint64_t *ids;

	if (!n_held)
		return 0;
	ids = calloc(n_held, sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	for (uint32_t k = 0; k < n_held; k++)
		ids[k] = hashlb_steer_backend_id(held_names[k]);
	qsort(ids, n_held, sizeof(*ids), id_cmp);
	for (uint32_t j = 0; j < s->backends_cap; j++)
		ret_held[j] = slot_be[j].id != 0 && (slot_be[j].flags & HLB_STEER_BACKEND_F_KEEP) &&
			      bsearch(&slot_be[j].id, ids, n_held, sizeof(*ids), id_cmp);
	free(ids);
	return 0;
}

static int set_table(struct hashlb_steer *s, const struct hashlb_table *t, enum hashlb_key key,
		     const struct hashlb_src_prefix *prefix, const struct hashlb_steer_dest *dests,
		     const char *const *held_names, uint32_t n_held, struct hashlb_error *err)
{
	struct hashlb_table_view v;
	struct hlb_steer_table meta;
	struct hlb_steer_backend be;
	uint32_t zero = 0, active = 0, half, n, *slot = NULL;
	uint64_t *slot_id = NULL;
	uint8_t *slot_inc = NULL, *inc = NULL, *wrap = NULL;
	struct hashlb_steer_dest *eff = NULL;
	struct hlb_steer_backend *slot_be = NULL;
	struct map_batch *bb = NULL, *sb = NULL;
	bool *used = NULL, *deferred = NULL, *held = NULL, any_wrap = false;
	int ret;

	hashlb_table_view(t, &v);
	n = v.n_backends;
	if (n > s->backends_cap)
		return hashlb_err(err, -E2BIG, HASHLB_ERR_TOO_MANY_BACKENDS,
				  "%u backends exceed the loaded capacity %u (sized at attach: "
				  "hashlb steer --max-backends, hashlb run by its config)",
				  n, s->backends_cap);
	if (hashlb_key_len(key) == 0)
		return hashlb_err(err, -EINVAL, HASHLB_ERR_SYSTEM, "invalid hash key");
	if (!s->reads_prefix && !hashlb_src_prefix_is_whole(prefix)) {
		char name[IF_NAMESIZE] = "?";

		if_indextoname((unsigned)s->ifindex, name);
		return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM,
				  "the program on %s, which an older hashlb attached, hashes "
				  "whole client addresses: no hash_prefix until it is detached "
				  "(hashlb steer -i %s --detach) and attached again",
				  name, name);
	}
	if (bpf_map_lookup_elem(s->fd[M_ACTIVE], &zero, &active) < 0)
		return hashlb_err(err, -errno, HASHLB_ERR_SYSTEM, "reading the active half: %s",
				  strerror(errno));
	/* The first table goes into half 1: half 0 is the all-zero table
	 * (no points: every lookup says "no backend") until then. Of several
	 * tables, each its own half in force: bit 0's, or the other one if its
	 * VIPs in force say so (read again under the lock: another handle of
	 * the table, in another process, may have flipped it since). */
	ret = vflag_sync(s);
	if (ret < 0)
		return hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "reading the VIP map: %s",
				  strerror(-ret));
	half = (active & 1) ^ (s->vflag ? 1 : 0) ^ 1;
	ret = shadow_check(s, half);
	if (ret < 0)
		return hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "writing the table map: %s",
				  strerror(-ret));

	slot = calloc(n ? n : 1, sizeof(*slot));
	inc = calloc(n ? n : 1, sizeof(*inc));
	slot_id = calloc(s->backends_cap, sizeof(*slot_id));
	slot_inc = calloc(s->backends_cap, sizeof(*slot_inc));
	used = calloc(s->backends_cap, sizeof(*used));
	deferred = calloc(s->backends_cap, sizeof(*deferred));
	held = calloc(s->backends_cap, sizeof(*held));
	wrap = calloc(s->backends_cap, sizeof(*wrap));
	eff = calloc(n ? n : 1, sizeof(*eff));
	slot_be = calloc(s->backends_cap, sizeof(*slot_be));
	bb = batch_new(s->fd[M_BACKENDS], sizeof(be));
	sb = batch_new(s->fd[M_BSLOTS], sizeof(be));
	if (!slot || !inc || !slot_id || !slot_inc || !used || !deferred || !held || !wrap ||
	    !eff || !slot_be || !bb || !sb) {
		ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		goto out;
	}
	/* its table's halves, and its backends_cap slots of hlb_bslots (bslot()) */
	bb->base = 2 * s->table * s->backends_cap;
	ret = bslots_read(s, slot_be);
	if (ret < 0)
		goto err_sys;
	for (uint32_t j = 0; j < s->backends_cap; j++) {
		slot_id[j] = slot_be[j].id;
		slot_inc[j] = slot_be[j].incarnation;
	}
	/* n <= backends_cap: every backend gets a slot (before, a table
	 * that fitted only in the slots of backends it drops was refused,
	 * -ENOSPC: the operator had to drop them with one update, then add
	 * the new ones with the next). */
	if (slots_held(s, slot_be, held_names, n_held, held) < 0 ||
	    assign_slots(s, t, slot_id, held, slot, deferred) < 0) {
		ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		goto out;
	}
	/*
	 * A slot that gets another backend gets the next incarnation (never
	 * 0, which no entry holds): its old backend's entries stop matching.
	 * Eight bits wrap: an entry left from 255 changes of hands before
	 * would match again, and send its flow, idle all that time, to the
	 * slot's backend now. So a slot whose incarnation enters a half of
	 * the range (128, or 1 after 255) first loses its entries from that
	 * half: the flows of earlier backends, none of them current (the
	 * programs write the incarnation before, in the other half, until
	 * the flip). One scan of hlb_ct every 127 changes of a slot's hands;
	 * nothing on the packet's path.
	 */
	for (uint32_t i = 0; i < n; i++) {
		uint64_t id = hashlb_steer_backend_id(hashlb_table_backend_name(t, i));

		inc[i] = slot_inc[slot[i]];
		if (slot_id[slot[i]] != id || inc[i] == 0) {
			if (inc[i] == 127 || inc[i] == 255)
				wrap[slot[i]] = inc[i] == 127 ? 2 : 1;
			any_wrap |= inc[i] == 127 || inc[i] == 255;
			inc[i] = inc[i] == 255 ? 1 : inc[i] + 1;
		}
		eff[i] = dest_effective(t, i, &dests[i], &slot_be[slot[i]]);
	}
	if (any_wrap && ct_clear_incarnations(s, wrap) < 0) {
		ret = hashlb_err(err, -ENOMEM, HASHLB_ERR_NOMEM, "out of memory");
		goto out;
	}

	memset(&meta, 0, sizeof(meta));
	meta.seed = hashlb_table_params(t)->seed;
	meta.key_len = (uint32_t)hashlb_key_len(key);
	/* a whole address is 0, what a table written before hash_prefix holds */
	if (prefix && prefix->v4 < 32)
		meta.v4_prefix = prefix->v4;
	if (prefix && prefix->v6 < 128)
		meta.v6_prefix = prefix->v6;
	meta.n_backends = n;
	s->stamp = s->stamp % (HLB_STEER_STAMP_WRITING - 1) + 1;
	meta.stamp = s->stamp;
	ret = write_half(s, half, &v, &meta, err);
	if (ret < 0)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		backend_value(s, t, i, &eff[i], slot[i], inc[i], &be);
		ret = batch_add(bb, half * s->backends_cap + i, &be);
		if (ret < 0)
			goto err_sys;
		/* A new backend's free slot is filled before any flow can name
		 * it; existing ones change state only after the flip, and so
		 * does a slot a dropped backend holds (deferred): until then,
		 * the table in force may send it new flows, and its flows'
		 * entries are followed. Its newcomer's flows, until then, find
		 * another incarnation in the slot and are scheduled again by
		 * this table, to it: no flow goes to a holder not its own. */
		if (slot_id[slot[i]] != be.id && !deferred[slot[i]]) {
			ret = batch_add(sb, bslot(s, s->table, slot[i]), &be);
			if (ret < 0)
				goto err_sys;
		}
	}
	/* all of the half and the new slots in the maps before its header */
	ret = batch_flush(bb);
	if (ret == 0)
		ret = batch_flush(sb);
	if (ret == 0)
		ret = map_write(s->fd[M_TABLES], 2 * s->table + half, &meta);
	if (ret < 0)
		goto err_sys;
	s->written[half] = meta;
	s->wrote[half] = true;

	/* Told to stop while the half was written: the table in force stays.
	 * The new backends' free slots written stay too, unnamed by it. */
	if (s->abort && s->abort(s->abort_arg)) {
		ret = hashlb_err(
			err, -ECANCELED, HASHLB_ERR_SYSTEM,
			"stopped before the table was put in force: the one in force stays");
		goto out;
	}
	if (s->tables > 1) {
		/* its VIPs name the half now in force, the others' as they were */
		ret = vips_flip_table(s, s->vflag ^ HLB_STEER_VIP_F_HALF);
		if (ret < 0) {
			errno = -ret;
			goto err_sys;
		}
		s->vflag ^= HLB_STEER_VIP_F_HALF;
	} else {
		ret = steer_flip(s, (active & ~1u) | half);
		if (ret < 0)
			goto err_sys;
	}

	for (uint32_t i = 0; i < n; i++) {
		backend_value(s, t, i, &eff[i], slot[i], inc[i], &be);
		used[slot[i]] = true;
		ret = batch_add(sb, bslot(s, s->table, slot[i]), &be);
		if (ret < 0)
			goto err_sys;
	}
	/* Backends no longer configured: their flows are rescheduled. The
	 * incarnation stays, for the slot's next backend to take the next. One
	 * held (removed, draining) keeps its slot as it was, MAC and incarnation,
	 * for its established flows, and takes no new one. */
	for (uint32_t j = 0; j < s->backends_cap; j++) {
		if (used[j] || slot_id[j] == 0)
			continue;
		memset(&be, 0, sizeof(be));
		be.incarnation = slot_inc[j];
		if (held[j]) {
			be = slot_be[j];
			be.flags |= HLB_STEER_BACKEND_F_OUT;
		}
		ret = batch_add(sb, bslot(s, s->table, j), &be);
		if (ret < 0)
			goto err_sys;
	}
	ret = batch_flush(sb);
	if (ret < 0)
		goto err_sys;
	goto out;
err_sys:
	ret = hashlb_err(err, ret, HASHLB_ERR_SYSTEM, "writing the steering maps: %s",
			 strerror(-ret));
out:
	free(slot);
	free(inc);
	free(slot_id);
	free(slot_inc);
	free(used);
	free(deferred);
	free(held);
	free(wrap);
	free(eff);
	free(slot_be);
	free(bb);
	free(sb);
	return ret;
}

int hashlb_steer_set_table_holding(struct hashlb_steer *s, const struct hashlb_table *t,
				   enum hashlb_key key, const struct hashlb_src_prefix *prefix,
				   const struct hashlb_steer_dest *dests,
				   const char *const *held_names, uint32_t n_held,
				   struct hashlb_error *err)
{
	int fd, ret = publish_lock(s, &fd, err);

	if (ret < 0)
		return ret;
	ret = set_table(s, t, key, prefix, dests, held_names, n_held, err);
	publish_unlock(fd);
	return ret;
}

int hashlb_steer_set_table(struct hashlb_steer *s, const struct hashlb_table *t,
			   enum hashlb_key key, const struct hashlb_src_prefix *prefix,
			   const struct hashlb_steer_dest *dests, struct hashlb_error *err)
{
	return hashlb_steer_set_table_holding(s, t, key, prefix, dests, NULL, 0, err);
}

/* Add to the <n> 64-bit counters of <sum> the first <n> of each CPU's value
 * of per-CPU map <fd> at <key>, values <size> bytes. Returns 0 or -errno. */
static int percpu_sum_at(int fd, uint32_t key, uint32_t size, uint64_t *sum, size_t n)
{
	int ncpu = libbpf_num_possible_cpus(), ret = 0;
	size_t stride = ((size_t)size + 7) / 8; /* the kernel's round_up(size, 8) */
	uint64_t *per;

	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	per = calloc((size_t)ncpu, stride * 8);
	if (!per)
		return -ENOMEM;
	if (bpf_map_lookup_elem(fd, &key, per) < 0) {
		ret = -errno;
		goto out;
	}
	if (n > size / 8)
		n = size / 8;
	for (int c = 0; c < ncpu; c++)
		for (size_t i = 0; i < n; i++)
			sum[i] += per[(size_t)c * stride + i];
out:
	free(per);
	return ret;
}

/* percpu_sum_at() of key 0: the program's counters. */
static int percpu_sum(int fd, uint32_t size, uint64_t *sum, size_t n)
{
	return percpu_sum_at(fd, 0, size, sum, n);
}

int hashlb_steer_stats(struct hashlb_steer *s, struct hlb_steer_stats *ret_stats)
{
	struct hlb_steer_stats sum;
	uint64_t *u = (uint64_t *)&sum;
	int ret;

	_Static_assert(sizeof(sum) % 8 == 0, "the counters are 64-bit words");
	memset(&sum, 0, sizeof(sum));
	ret = percpu_sum(s->fd[M_STATS], s->stats_size, u, HLB_STEER_STATS_SIZE / 8);
	if (ret == 0 && s->fd[M_STATS2] >= 0)
		ret = percpu_sum(s->fd[M_STATS2], s->stats2_size, u + HLB_STEER_STATS_SIZE / 8,
				 sizeof(struct hlb_steer_stats2) / 8);
	if (ret < 0)
		return ret;
	*ret_stats = sum;
	return 0;
}

int hashlb_steer_tables_stats(struct hashlb_steer *s, struct hlb_steer_stats *ret_tstats)
{
	struct hlb_steer_tstats pb[HASHLB_STEER_TABLES_MAX];
	struct hlb_steer_tstats2 t2[HASHLB_STEER_TABLES_MAX];
	int ret = 0;

	if (s->tables < 2) {
		/* the program's are its one table's (it counts no other), but for
		 * what no table counts */
		ret = hashlb_steer_stats(s, &ret_tstats[0]);
		if (ret < 0)
			return ret;
		hashlb_steer_stats_tabled(&ret_tstats[0]);
		return 0;
	}
	if (s->fd[M_TSTATS] < 0 || s->tables > HASHLB_STEER_TABLES_MAX)
		return -EOPNOTSUPP;
	memset(pb, 0, sizeof(pb));
	memset(t2, 0, sizeof(t2));
	/*
	 * The packets before the other counters: a table's ct_hits, its packets less the new
	 * flows and untracked RSTs among them, then never above the hits there were when its
	 * packets were read (a new flow counted between the two reads is subtracted, not
	 * taken for a hit; 0 at the least). Before, the other counters were read first: each
	 * new flow counted between the reads added a hit that the next reading took back, so
	 * a service that only got new flows (a SYN flood) showed hits, and its
	 * conntrack_hits_total went down.
	 */
	for (uint32_t t = 0; t < s->tables && ret == 0; t++)
		ret = percpu_sum_at(s->fd[M_TSTATS], t, sizeof(pb[t]), (uint64_t *)&pb[t],
				    sizeof(pb[t]) / 8);
	for (uint32_t t = 0; t < s->tables && ret == 0 && s->fd[M_TSTATS2] >= 0; t++)
		ret = percpu_sum_at(s->fd[M_TSTATS2], t, s->tstats2_size, (uint64_t *)&t2[t],
				    sizeof(t2[t]) / 8);
	if (ret < 0)
		return ret;
	for (uint32_t t = 0; t < s->tables; t++) {
		struct hlb_steer_stats *st = &ret_tstats[t];
		uint64_t other = t2[t].new_flows + t2[t].rst_untracked;

		memset(st, 0, sizeof(*st));
		st->packets = pb[t].packets;
		st->bytes = pb[t].bytes;
		st->new_flows = t2[t].new_flows;
		st->ct_hits = st->packets > other ? st->packets - other : 0;
		st->ct_resched = t2[t].ct_resched;
		st->ct_evicted = t2[t].ct_evicted;
		memcpy(st->drops, t2[t].drops, sizeof(st->drops));
		st->ct_lost = t2[t].ct_lost;
		st->rst_untracked = t2[t].rst_untracked;
		st->closed_passed = t2[t].closed_passed;
		st->ct_closing = t2[t].ct_closing;
		/* the program's slots of the others stay 0; another's (a forged program's)
		 * would not show a table's what it never counts */
		hashlb_steer_stats_tabled(st);
	}
	/* an older hashlb's program counts each table's packets and bytes alone */
	return s->fd[M_TSTATS2] >= 0 ? 0 : 1;
}

int hashlb_steer_flows_clear(struct hashlb_steer *s)
{
	/* Way by way, each one store: a program running meanwhile sees an
	 * entry or an empty way, and may insert again behind us. */
	for (uint32_t b = 0; b < s->ct_buckets; b++) {
		for (int w = 0; w < HLB_STEER_CT_WAYS; w++)
			__atomic_store_n(&s->ct[b].way[w], 0, __ATOMIC_RELAXED);
	}
	return 0;
}

/*
 * The offset in ns of CLOCK_MONOTONIC in this process's time namespace
 * (CLONE_NEWTIME, Linux 5.6: /proc/self/timens_offsets), 0 outside one or
 * where the file is missing. bpf_jiffies64() has none: in a namespace whose
 * offset is no whole number of 2^16 ticks, a clock that took it would read
 * live entries as idle for hours, and clamp them to look older than idle
 * ones (steer-ct ct_wrap).
 */
static int64_t timens_monotonic_ns(void)
{
	FILE *f = fopen("/proc/self/timens_offsets", "re");
	char line[128];
	long long sec;
	long nsec;
	int64_t off = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "monotonic %lld %ld", &sec, &nsec) == 2) {
			off = (int64_t)sec * 1000000000LL + nsec;
			break;
		}
	}
	fclose(f);
	return off;
}

/*
 * The conntrack clock's tick now, as the program reads it (bpf_jiffies64()
 * >> HLB_STEER_CT_TICK_SHIFT, 16 bits), into *<ret_now>: jiffies from
 * CLOCK_MONOTONIC_COARSE, whose resolution is one (1/HZ), less a time
 * namespace's offset (timens_monotonic_ns()), and their start
 * (INITIAL_JIFFIES: 300 s of jiffies before 2^32). Off by when the tick began
 * after boot, a fraction of a tick (54 jiffies at HZ=250 here); the ages it
 * clamps are thousands of ticks. 0 or -errno.
 */
static int ct_now(uint16_t *ret_now)
{
	struct timespec res, ts;
	uint64_t hz, j;

	if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) < 0 ||
	    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) < 0)
		return -errno;
	if (res.tv_sec || res.tv_nsec <= 0)
		return -EOPNOTSUPP;
	hz = 1000000000ULL / (uint64_t)res.tv_nsec;
	j = (uint64_t)(uint32_t)(-300 * (int64_t)hz) +
	    ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec -
	     (uint64_t)timens_monotonic_ns()) /
		    (uint64_t)res.tv_nsec;
	*ret_now = (uint16_t)(j >> HLB_STEER_CT_TICK_SHIFT);
	return 0;
}

int hashlb_steer_ct_age_at(struct hashlb_steer *s, uint16_t now, uint32_t *ret_clamped)
{
	uint16_t oldest = (uint16_t)(now - HASHLB_STEER_CT_AGE_MAX);
	uint32_t n = 0;

	for (uint32_t b = 0; b < s->ct_buckets; b++) {
		for (int w = 0; w < HLB_STEER_CT_WAYS; w++) {
			uint16_t seen = __atomic_load_n(&s->ct[b].seen[w], __ATOMIC_RELAXED);

			uint16_t age = (uint16_t)(now - seen);

			/* an age just short of the wrap is a use a tick or so
			 * ahead of this clock's idea of the program's (its
			 * jiffies and CLOCK_MONOTONIC_COARSE agree to within a
			 * tick): live, not to be clamped */
			if (!__atomic_load_n(&s->ct[b].way[w], __ATOMIC_RELAXED) ||
			    age <= HASHLB_STEER_CT_AGE_MAX || age > 0xffffu - HASHLB_STEER_CT_AHEAD)
				continue;
			/* not over a use meanwhile (the program's store of
			 * now), nor over an insert's */
			n += __atomic_compare_exchange_n(&s->ct[b].seen[w], &seen, oldest, false,
							 __ATOMIC_RELAXED, __ATOMIC_RELAXED);
		}
	}
	*ret_clamped = n;
	return 0;
}

int hashlb_steer_ct_age(struct hashlb_steer *s, uint32_t *ret_clamped)
{
	uint16_t now = 0;
	int ret = ct_now(&now);

	if (ret < 0)
		return ret;
	return hashlb_steer_ct_age_at(s, now, ret_clamped);
}

uint64_t hashlb_steer_ct_age_period_ms(void)
{
	struct timespec res;

	/* at 1/HZ a jiffy, 256 jiffies a tick; HZ=100 (the lowest) if unknown */
	if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) < 0 || res.tv_sec || res.tv_nsec <= 0)
		res.tv_nsec = 10000000;
	return (uint64_t)HASHLB_STEER_CT_AGE_EVERY * (1u << HLB_STEER_CT_TICK_SHIFT) *
	       (uint64_t)res.tv_nsec / 1000000;
}

int hashlb_steer_flows_count(struct hashlb_steer *s, uint32_t *ret_count)
{
	uint32_t c = 0;

	for (uint32_t b = 0; b < s->ct_buckets; b++) {
		for (int w = 0; w < HLB_STEER_CT_WAYS; w++)
			c += __atomic_load_n(&s->ct[b].way[w], __ATOMIC_RELAXED) != 0;
	}
	*ret_count = c;
	return 0;
}

bool hashlb_steer_marks_closing(const struct hashlb_steer *s)
{
	return s->fd[M_STATS2] >= 0 &&
	       s->stats2_size >= offsetof(struct hlb_steer_stats2, ct_closing) +
					 sizeof(((struct hlb_steer_stats2 *)0)->ct_closing);
}

/* A sum over conntrack entries that changes when one of them is used again
 * (its tick), made or removed: entry <e> of way <w> of bucket <b>, <seen>. */
static uint64_t flow_mix(uint64_t e, uint32_t b, int w, uint16_t seen)
{
	/* where, which entry, when last used: any change, a different sum (a
	 * multiply mixes the three) */
	uint64_t x =
		e ^ ((uint64_t)b * HLB_STEER_CT_WAYS + (uint64_t)w) << 40 ^ (uint64_t)seen << 16;

	return x * 0x9e3779b97f4a7c15ULL ^ (x >> 29);
}

/*
 * <tab>[i] the table whose VIP index i of hlb_vips holds a port entry in
 * force (closed or not; of a program of one table, every VIP's: 0), else
 * HASHLB_STEER_TABLES_MAX: a VIP that left the program (a service whose
 * drain ended first, a VIP a reload changed), which no packet reaches any
 * more (set_vips() clears its entries once its flip is done). 0 or -errno.
 */
static int vips_tables(struct hashlb_steer *s, uint8_t tab[HLB_STEER_VIP_SLOTS])
{
	struct hlb_steer_vip *cur;
	uint32_t active;
	int ret = vips_read(s, &active, &cur);

	if (ret < 0)
		return ret;
	for (uint32_t i = 0; i < HLB_STEER_VIP_SLOTS; i++)
		tab[i] = !vip_port_entry(&cur[i])	  ? HASHLB_STEER_TABLES_MAX
			 : s->tables < 2		  ? 0
			 : vip_table(&cur[i]) < s->tables ? (uint8_t)vip_table(&cur[i])
							  : HASHLB_STEER_TABLES_MAX;
	free(cur);
	return 0;
}

int hashlb_steer_flows_tables(struct hashlb_steer *s, uint32_t *ret_tables, uint32_t *ret_all)
{
	/* each VIP index's table, HASHLB_STEER_TABLES_MAX for none in force:
	 * counted into a slot past the tables, read by no one */
	uint8_t tab[HLB_STEER_VIP_SLOTS];
	uint32_t n[HASHLB_STEER_TABLES_MAX + 1] = { 0 };
	int ret;

	/* A program of one table serves one service: every entry is its VIPs',
	 * but for those of a VIP that just left, cleared right after the flip
	 * that took it out (set_vips()). Counted as all, the VIP map unread:
	 * the scan alone, half the cost of the one below (docs/steering.md). */
	if (s->tables < 2) {
		ret = hashlb_steer_flows_count(s, ret_all);
		if (ret == 0)
			ret_tables[0] = *ret_all;
		return ret;
	}
	ret = vips_tables(s, tab);
	if (ret < 0)
		return ret;
	/* Branch-free, as hashlb_steer_flows_count(): an empty way reads as
	 * VIP index 0's, and adds 0 there. */
	for (uint32_t b = 0; b < s->ct_buckets; b++) {
		for (int w = 0; w < HLB_STEER_CT_WAYS; w++) {
			uint64_t e = __atomic_load_n(&s->ct[b].way[w], __ATOMIC_RELAXED);

			n[tab[(e >> HLB_STEER_CT_VIP_SHIFT) & 0xff]] += e != 0;
		}
	}
	*ret_all = 0;
	for (uint32_t t = 0; t <= HASHLB_STEER_TABLES_MAX; t++)
		*ret_all += n[t];
	memcpy(ret_tables, n, s->tables * sizeof(*ret_tables));
	return 0;
}

int hashlb_steer_flows_table(struct hashlb_steer *s, uint32_t *ret_table, uint32_t *ret_all)
{
	uint32_t n[HASHLB_STEER_TABLES_MAX];
	int ret = hashlb_steer_flows_tables(s, n, ret_all);

	if (ret == 0)
		*ret_table = n[s->tables < 2 ? 0 : s->table];
	return ret;
}

uint32_t hashlb_steer_prog_id(const struct hashlb_steer *s)
{
	return s->prog_id;
}

bool hashlb_steer_same_program(const struct hashlb_steer *a, const struct hashlb_steer *b)
{
	return a && b && a->prog_id && a->prog_id == b->prog_id && a->ifindex == b->ifindex &&
	       a->tables == b->tables;
}

int hashlb_steer_flows_open_tables(struct hashlb_steer *s, struct hashlb_steer_flows *ret_flows)
{
	bool marks = hashlb_steer_marks_closing(s);
	/* a table's; the entries of no table's VIP (HASHLB_STEER_TABLES_MAX) are skipped */
	struct hashlb_steer_flows f[HASHLB_STEER_TABLES_MAX] = { 0 };
	uint8_t tab[HLB_STEER_VIP_SLOTS];
	int ret = vips_tables(s, tab);

	if (ret < 0)
		return ret;
	for (uint32_t b = 0; b < s->ct_buckets; b++) {
		for (int w = 0; w < HLB_STEER_CT_WAYS; w++) {
			uint64_t e = __atomic_load_n(&s->ct[b].way[w], __ATOMIC_RELAXED), x;
			uint8_t t = tab[(e >> HLB_STEER_CT_VIP_SHIFT) & 0xff];

			if (!e || t == HASHLB_STEER_TABLES_MAX)
				continue;
			x = flow_mix(e, b, w, __atomic_load_n(&s->ct[b].seen[w], __ATOMIC_RELAXED));
			if (!marks || !(e & HLB_STEER_CT_CLOSING)) {
				f[t].open++;
				f[t].open_used += x;
			} else {
				f[t].closing++;
				f[t].closing_used += x;
			}
		}
	}
	memcpy(ret_flows, f, (s->tables < 2 ? 1 : s->tables) * sizeof(*ret_flows));
	return 0;
}

int hashlb_steer_flows_open(struct hashlb_steer *s, struct hashlb_steer_flows *ret_flows)
{
	struct hashlb_steer_flows f[HASHLB_STEER_TABLES_MAX];
	int ret = hashlb_steer_flows_open_tables(s, f);

	if (ret == 0)
		*ret_flows = f[s->tables < 2 ? 0 : s->table];
	return ret;
}

uint64_t hashlb_steer_flows_max(const struct hashlb_steer *s)
{
	return (uint64_t)s->ct_buckets * HLB_STEER_CT_WAYS;
}

/* ext's bits are never bucket bits (steer_shared.h). */
_Static_assert(HASHLB_STEER_FLOWS_MAX / HLB_STEER_CT_WAYS <= 1u << HLB_STEER_CT_EXT_SHIFT,
	       "ct ext bits above the bucket index");

uint64_t hashlb_steer_flows_capacity(uint32_t flows)
{
	uint64_t buckets = 1;

	/* Buckets: a power of two, at least <flows> entries in all. */
	while (buckets * HLB_STEER_CT_WAYS < (flows ? flows : HASHLB_STEER_FLOWS_DEFAULT))
		buckets <<= 1;
	return buckets * HLB_STEER_CT_WAYS;
}

int hashlb_steer_ct_fd(struct hashlb_steer *s)
{
	return s->fd[M_CT];
}

int hashlb_steer_prog_fd(struct hashlb_steer *s, enum hashlb_steer_prog prog)
{
	if (!s->skel)
		return -ENOENT;
	switch (prog) {
	case HASHLB_STEER_PROG_XDP:
		return bpf_program__fd(s->skel->progs.hlb_xdp);
	case HASHLB_STEER_PROG_TC:
		return bpf_program__fd(s->skel->progs.hlb_tc);
	case HASHLB_STEER_PROG_PASS:
		return bpf_program__fd(s->skel->progs.hlb_xdp_pass);
	default:
		return -EINVAL;
	}
}

uint64_t hashlb_steer_ct_seed(const struct hashlb_steer *s)
{
	return s->ct_seed;
}

bool hashlb_steer_reads_ext(const struct hashlb_steer *s)
{
	return s->reads_ext;
}

enum hashlb_steer_mode hashlb_steer_mode(const struct hashlb_steer *s)
{
	return s->mode;
}

int hashlb_steer_ifindex(const struct hashlb_steer *s)
{
	return s->ifindex;
}

bool hashlb_steer_on_veth(const struct hashlb_steer *s)
{
	return is_veth(s->ifindex);
}
