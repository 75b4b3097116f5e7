// SPDX-License-Identifier: MIT
/* Names of steering modes and drop reasons, backend ids, MAC addresses:
 * shared by the loader and the stub built without BPF. */
#include <errno.h>
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

/* hashlb_steer_stats_field()'s index of its first drop counter; the drops follow in their
 * enum's order */
#define STATS_DROPS_FIRST 11

const char *hashlb_steer_stats_field(const struct hlb_steer_stats *st, unsigned i,
				     uint64_t *ret_value)
{
	static const char *const names[] = {
		"packets",	 "bytes",	    "new_flows",  "ct_hits",
		"ct_resched",	 "ct_evicted",	    "ct_lost",	  "rst_untracked",
		"passed",	 "closed_passed",   "ct_closing", "drop_malformed",
		"drop_fragment", "drop_no_backend", "drop_table", "drop_redirect",
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
		st->closed_passed,
		st->ct_closing,
		st->drops[HLB_STEER_DROP_MALFORMED],
		st->drops[HLB_STEER_DROP_FRAGMENT],
		st->drops[HLB_STEER_DROP_NO_BACKEND],
		st->drops[HLB_STEER_DROP_TABLE],
		st->drops[HLB_STEER_DROP_REDIRECT],
	};

	_Static_assert(sizeof(names) / sizeof(names[0]) == STATS_DROPS_FIRST + HLB_STEER_DROP_MAX,
		       "a name per counter");
	if (i >= sizeof(names) / sizeof(names[0]))
		return NULL;
	*ret_value = v[i];
	return names[i];
}

bool hashlb_steer_stats_field_tabled(unsigned i)
{
	const char *name;
	uint64_t v;
	struct hlb_steer_stats st = { 0 };

	name = hashlb_steer_stats_field(&st, i, &v);
	if (!name || !strcmp(name, "passed"))
		return false;
	return i < STATS_DROPS_FIRST || hashlb_steer_drop_tabled(i - STATS_DROPS_FIRST);
}

bool hashlb_steer_drop_tabled(enum hlb_steer_drop d)
{
	return d == HLB_STEER_DROP_NO_BACKEND || d == HLB_STEER_DROP_TABLE;
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
