// SPDX-License-Identifier: MIT
#include "args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Noreturn void bench_args_refuse(const char *argv0, const char *arg, const char *usage)
{
	fprintf(stderr, "%s: unexpected argument '%s'\n%s", argv0, arg, usage);
	exit(2);
}

void bench_args(int argc, char **argv, int max, const char *usage)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(usage, stdout);
			exit(0);
		}
	}
	if (argc - 1 > max)
		bench_args_refuse(argv[0], argv[max + 1], usage);
}

uint32_t bench_args_u32(const char *argv0, const char *arg, uint32_t max, const char *usage)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (arg[0] < '0' || arg[0] > '9' || *end || errno || v < 1 || v > max)
		bench_args_refuse(argv0, arg, usage);
	return (uint32_t)v;
}
