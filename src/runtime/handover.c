// SPDX-License-Identifier: MIT
/* The lines of run-time settings handed to the hashlb that replaces this one (HLB_HANDOVER_LINE,
 * fdpass.h), read: by the new process, and by hashlb ctl upgrade's look at the weights it would
 * take over. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fdpass.h"

bool hlb_handover_next_line(const char **at, char *line)
{
	const char *l = *at, *end = strchr(l, '\n');
	size_t len = end ? (size_t)(end - l) : strlen(l);

	*at = end ? end + 1 : NULL;
	if (len > HLB_HANDOVER_LINE_MAX)
		return false;
	memcpy(line, l, len);
	line[len] = '\0';
	return true;
}

int hlb_handover_set_parse(const char *line, struct hlb_handover_set *ret)
{
	char st[16], cfg_st[16];

	if (strncmp(line, "set ", 4) ||
	    sscanf(line,
		   "set %255s %255s admin=%15[^/]/%15s weight=%u/%u max_connections=%u/%u "
		   "health=%7s",
		   ret->svc, ret->name, st, cfg_st, &ret->w, &ret->cfg_w, &ret->max, &ret->cfg_max,
		   ret->health) != 9 ||
	    hashlb_admin_state_parse(st, &ret->a) < 0 ||
	    hashlb_admin_state_parse(cfg_st, &ret->cfg_a) < 0)
		return -EINVAL;
	return 0;
}
