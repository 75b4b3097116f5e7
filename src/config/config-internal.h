/* SPDX-License-Identifier: MIT */
/* Shared by the config loader's files, not part of the API. */
#ifndef HASHLB_CONFIG_INTERNAL_H
#define HASHLB_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hashlb/config.h"

/*
 * The family every backend of <s> must have, AF_UNSPEC for either: its source's; with
 * source: client, its clients' (each connection leaves from its client's own address), when
 * its listener takes one family only and no PROXY header names them.
 */
int hlb_service_backend_family(const struct hashlb_service_cfg *s);

/*
 * What is wrong with backend <b>'s (resolved) address in service <s>: not
 * of the family its connections leave from (hlb_service_backend_family()), or the service
 * itself (a loop). NULL if nothing; else the explanation, written in <buf>.
 */
const char *hlb_backend_addr_problem(const struct hashlb_service_cfg *s,
				     const struct hashlb_backend_cfg *b, char *buf, size_t len);

/*
 * Whether two backends of <s> have the same name: 1 with the later one's
 * index in *ret_dup and the first one's in *ret_first, 0 if none, -ENOMEM.
 */
int hlb_duplicate_backend(const struct hashlb_service_cfg *s, uint32_t *ret_dup,
			  uint32_t *ret_first);

/*
 * Whether the services of <c> forward to one another in a ring (a backend at
 * another's listen address, and a path back): 1 with the backend that
 * closes it in *ret_s and *ret_b (indexes) and <msg> saying it, 0 if none,
 * -ENOMEM. A backend at its own service is hlb_backend_addr_problem()'s.
 */
int hlb_services_loop(const struct hashlb_config *c, uint32_t *ret_s, uint32_t *ret_b, char *msg,
		      size_t len);

#endif
