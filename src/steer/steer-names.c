// SPDX-License-Identifier: MIT
/* Names of steering modes and drop reasons, backend ids, MAC addresses:
 * shared by the loader and the stub built without BPF. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

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

/*
 * Every counter of struct hlb_steer_stats, in the order and with the names hashlb steer --stats
 * shows, and whether a table (a service) counts it of its own: the one rule of which counters
 * those are, that hashlb_steer_tables_stats(), the seed of a grown program's table 0, --stats'
 * table_ rows, /status' service_ members and /metrics' service families all follow. Not a
 * table's: passed (a table's are its closed_passed: every other is passed before a VIP, so a
 * table, is known), the drops counted before the packet's port is read (malformed,
 * fragment), and redirect, which the program never counts (a redirect fails, if it does,
 * after the program has returned): a table's slot of it would read 0 whatever happened, so
 * none is shown rather than a figure that says nothing.
 */
#define FIELD(f) #f, offsetof(struct hlb_steer_stats, f)
#define DROP(d, name) "drop_" name, offsetof(struct hlb_steer_stats, drops[d])
static const struct stats_field {
	const char *name;
	size_t off; /* of its uint64_t in struct hlb_steer_stats */
	bool tabled;
} fields[] = {
	{ FIELD(packets), true },
	{ FIELD(bytes), true },
	{ FIELD(new_flows), true },
	{ FIELD(ct_hits), true },
	{ FIELD(ct_resched), true },
	{ FIELD(ct_evicted), true },
	{ FIELD(ct_lost), true },
	{ FIELD(rst_untracked), true },
	{ FIELD(passed), false },
	{ FIELD(closed_passed), true },
	{ FIELD(ct_closing), true },
	{ DROP(HLB_STEER_DROP_MALFORMED, "malformed"), false },
	{ DROP(HLB_STEER_DROP_FRAGMENT, "fragment"), false },
	{ DROP(HLB_STEER_DROP_NO_BACKEND, "no_backend"), true },
	{ DROP(HLB_STEER_DROP_TABLE, "table"), true },
	{ DROP(HLB_STEER_DROP_REDIRECT, "redirect"), false },
};
#undef DROP
#undef FIELD

/* fields[]' index of its first drop counter; the drops follow in their enum's order */
#define STATS_DROPS_FIRST 11
#define STATS_FIELDS (sizeof(fields) / sizeof(fields[0]))
_Static_assert(STATS_FIELDS == STATS_DROPS_FIRST + HLB_STEER_DROP_MAX, "a name per counter");
_Static_assert(sizeof(struct hlb_steer_stats) == STATS_FIELDS * sizeof(uint64_t),
	       "every counter named");

const char *hashlb_steer_stats_field(const struct hlb_steer_stats *st, unsigned i,
				     uint64_t *ret_value)
{
	if (i >= STATS_FIELDS)
		return NULL;
	memcpy(ret_value, (const char *)st + fields[i].off, sizeof(*ret_value));
	return fields[i].name;
}

bool hashlb_steer_stats_field_tabled(unsigned i)
{
	return i < STATS_FIELDS && fields[i].tabled;
}

bool hashlb_steer_stats_field_own(unsigned i, bool all)
{
	return hashlb_steer_stats_field_tabled(i) && (all || i < 2);
}

int hashlb_steer_stats_field_index(const char *name)
{
	for (unsigned i = 0; i < STATS_FIELDS; i++)
		if (!strcmp(fields[i].name, name))
			return (int)i;
	return -ENOENT;
}

bool hashlb_steer_drop_tabled(enum hlb_steer_drop d)
{
	return (unsigned)d < HLB_STEER_DROP_MAX && fields[STATS_DROPS_FIRST + d].tabled;
}

void hashlb_steer_stats_tabled(struct hlb_steer_stats *st)
{
	st->passed = st->closed_passed;
	for (unsigned i = 0; i < STATS_FIELDS; i++)
		if (!fields[i].tabled && fields[i].off != offsetof(struct hlb_steer_stats, passed))
			memset((char *)st + fields[i].off, 0, sizeof(uint64_t));
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
