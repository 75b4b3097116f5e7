/* SPDX-License-Identifier: MIT */
/* Shared by the config loader's files, not part of the API. */
#ifndef HASHLB_CONFIG_INTERNAL_H
#define HASHLB_CONFIG_INTERNAL_H

#include <stddef.h>

#include "hashlb/config.h"

/*
 * What is wrong with backend <b>'s (resolved) address in service <s>: not
 * of the source's family, or the service itself (a loop). NULL if nothing;
 * else the explanation, written in <buf>.
 */
const char *hlb_backend_addr_problem(const struct hashlb_service_cfg *s,
				     const struct hashlb_backend_cfg *b, char *buf, size_t len);

#endif
