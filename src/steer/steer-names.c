// SPDX-License-Identifier: MIT
/* Names of steering modes and drop reasons, and backend ids: shared by the
 * loader and the stub built without BPF. */
#include <errno.h>
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
