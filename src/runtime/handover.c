// SPDX-License-Identifier: MIT
/* The lines of run-time settings handed to the hashlb that replaces this one (HLB_HANDOVER_LINE,
 * fdpass.h), read: by the new process, and by hashlb ctl upgrade's look at the weights it would
 * take over; and the rule by which the new process takes a setting over. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fdpass.h"
#include "hashlb/table.h"

bool hlb_handover_next_line(const char **at, char *line)
{
	const char *l = *at, *end = strchr(l, '\n');
	size_t len = end ? (size_t)(end - l) : strlen(l);

	*at = end ? end + 1 : NULL;
	if (len > HLB_HANDOVER_LINE_MAX) {
		/* Fields a later version adds come last, as each version's did: those before
		 * the bound are whole up to its last space, the rest passed over. Before, the
		 * whole line was, its backend's state, weight and cap too. */
		const char *cut = memrchr(l, ' ', HLB_HANDOVER_LINE_MAX + 1);

		if (!cut)
			return false;
		len = (size_t)(cut - l);
	}
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
		   ret->svc, ret->name, st, cfg_st, &ret->s.w, &ret->s.cfg_w, &ret->s.max,
		   &ret->s.cfg_max, ret->health) != 9 ||
	    hashlb_admin_state_parse(st, &ret->s.a) < 0 ||
	    hashlb_admin_state_parse(cfg_st, &ret->s.cfg_a) < 0)
		return -EINVAL;
	return 0;
}

bool hlb_handover_weight_set(const struct hlb_handover_settings *s)
{
	return s->w != s->cfg_w && s->w <= HASHLB_WEIGHT_MAX;
}

unsigned hlb_handover_carries(const struct hlb_handover_settings *s,
			      const struct hashlb_service_cfg *svc,
			      const struct hashlb_backend_cfg *b)
{
	unsigned carry = 0;

	if (s->a != s->cfg_a && b->admin == s->cfg_a)
		carry |= HLB_HANDOVER_CARRY_STATE;
	if (hlb_handover_weight_set(s) && b->weight == s->cfg_w)
		carry |= HLB_HANDOVER_CARRY_WEIGHT;
	if (s->max != s->cfg_max && b->max_connections == s->cfg_max &&
	    svc->steering != HASHLB_STEERING_KERNEL)
		carry |= HLB_HANDOVER_CARRY_MAX_CONNECTIONS;
	return carry;
}
