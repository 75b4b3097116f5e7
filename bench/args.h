/* SPDX-License-Identifier: MIT */
/*
 * The command line of the benchmarks that take a few words or none
 * (hashlb-bench-control, -steer, -prefix, -clients): checked before anything
 * is measured, so that "--help" or a mistyped word does not start a run
 * whose figures are printed as if they were the ones asked for.
 */
#ifndef HASHLB_BENCH_ARGS_H
#define HASHLB_BENCH_ARGS_H

#include <stdint.h>

/*
 * -h or --help anywhere: <usage> ("usage: NAME [ARGS]\n" and a line or
 * more on each) on stdout, exit 0. More than <max> arguments: the first
 * one past them named on stderr with <usage>, exit 2.
 */
void bench_args(int argc, char **argv, int max, const char *usage);

/*
 * Refuses argument <arg> of the program <argv0>: named on stderr with
 * <usage>, exit 2.
 */
_Noreturn void bench_args_refuse(const char *argv0, const char *arg, const char *usage);

/*
 * <arg> as a decimal number 1..<max>, whole; else refused as above.
 */
uint32_t bench_args_u32(const char *argv0, const char *arg, uint32_t max, const char *usage);

#endif
