// SPDX-License-Identifier: MIT
/* The names of the config model's enums, as the config file and the admin API spell them. */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "hashlb/config.h"

static const char *const admin_names[HASHLB_ADMIN_MAX] = {
	[HASHLB_ADMIN_READY] = "ready",
	[HASHLB_ADMIN_DRAIN] = "drain",
	[HASHLB_ADMIN_MAINT] = "maint",
};

const char *hashlb_admin_state_name(enum hashlb_admin_state s)
{
	if ((unsigned)s >= HASHLB_ADMIN_MAX)
		return NULL;
	return admin_names[s];
}

int hashlb_admin_state_parse(const char *s, enum hashlb_admin_state *ret_state)
{
	static const struct {
		const char *name;
		enum hashlb_admin_state state;
	} names[] = {
		{ "ready", HASHLB_ADMIN_READY }, { "up", HASHLB_ADMIN_READY },
		{ "drain", HASHLB_ADMIN_DRAIN }, { "draining", HASHLB_ADMIN_DRAIN },
		{ "maint", HASHLB_ADMIN_MAINT }, { "maintenance", HASHLB_ADMIN_MAINT },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcasecmp(s, names[i].name) == 0) {
			*ret_state = names[i].state;
			return 0;
		}
	}
	return -EINVAL;
}

const char *hashlb_steering_name(enum hashlb_steering s)
{
	switch (s) {
	case HASHLB_STEERING_USERSPACE:
		return "userspace";
	case HASHLB_STEERING_KERNEL:
		return "kernel";
	default:
		return NULL;
	}
}

static const char *const proxy_protocol_names[HASHLB_PROXY_MAX] = {
	[HASHLB_PROXY_OFF] = "off",
	[HASHLB_PROXY_V1] = "v1",
	[HASHLB_PROXY_V2] = "v2",
};

const char *hashlb_proxy_protocol_name(enum hashlb_proxy_protocol v)
{
	if ((unsigned)v >= HASHLB_PROXY_MAX)
		return NULL;
	return proxy_protocol_names[v];
}

int hashlb_proxy_protocol_parse(const char *s, enum hashlb_proxy_protocol *ret_version)
{
	for (int v = 0; v < HASHLB_PROXY_MAX; v++) {
		if (strcmp(s, proxy_protocol_names[v]) == 0) {
			*ret_version = (enum hashlb_proxy_protocol)v;
			return 0;
		}
	}
	return -EINVAL;
}
