/* SPDX-License-Identifier: MIT */
/*
 * The order of backends by service, then name: the config library's, and the control plane's
 * and hashlb ctl's, which index the same names. Not part of the API.
 */
#ifndef HASHLB_NAME_PAIR_H
#define HASHLB_NAME_PAIR_H

/*
 * The order of backends by service name, then backend name (strcmp()): <0, 0, >0 as
 * (<svc_a>, <name_a>) comes before, with or after (<svc_b>, <name_b>). The one order of every
 * index of backends by service and name, each of its own struct: a reload's and the
 * resolver's of the running config's names, an upgrade's of the old process's lines (the new
 * process's, and hashlb ctl upgrade's pre-check's), a reload's of the backends a removed
 * service left (each qsort()/bsearch() comparator reads its struct's pair and leaves the
 * order to this).
 */
int hlb_name_pair_cmp(const char *svc_a, const char *name_a, const char *svc_b, const char *name_b);

#endif
