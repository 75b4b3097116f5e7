/* SPDX-License-Identifier: MIT */
/*
 * Kernel steering for `hashlb run`: each service with "steering: kernel"
 * gets hashlb's XDP/tc program on its "interface", fed every table the
 * control plane publishes for it (health, admin state, reloads), with its
 * listen address as the VIP. Detached when freed. A reload that adds
 * such a service attaches it; one that removes it, or sets steering:
 * userspace, detaches it; a new interface moves it; a new listen address
 * becomes the VIP with the next table (run_steer_sync()).
 *
 * Several such services on one interface share its program, a table each
 * (hashlb_steer_share()): loaded with a table for each of them and two more
 * for reloads (one for a service alone: the layout of before); a service
 * removed takes its VIP out of it, and the program is detached with the
 * last of them.
 *
 * Upgrades. A hashlb that took its listening sockets over from the one it
 * replaces (<from>, its pid) takes that one's program over too, when it
 * drives one on the interface: the same program, its conntrack with the
 * established flows, fed this process's tables (else one no process drives,
 * as any start does; never one another live process drives). The one that hands over
 * (run_steer_handed_over()) leaves it attached when it exits, if the new one
 * took it over (holds its maps); one the new config no longer steers there is
 * detached, or it would steer with its last table, driven by nobody.
 *
 * A table that names a backend whose MAC is not in the neighbour table yet
 * (a fresh boot, an expired entry) is refused, the kernel path keeping its
 * previous one: the service's latest table is tried again every second, on
 * a timer of the daemon, until it is in the kernel. Logged once when
 * refused, once when published, and in /metrics (table_stale) meanwhile.
 *
 * A program's maps keep the sizes they were loaded with: a reload, a resolve
 * or ctl set weight whose table would not fit them is refused before it
 * changes anything (run_steer_fits()), or its table and every later one
 * (health changes) would stay out of the kernel.
 */
#ifndef HASHLB_CLI_RUN_STEER_H
#define HASHLB_CLI_RUN_STEER_H

#include "control/control.h"
#include "hashlb/config.h"
#include "runtime/daemon.h"
#include "runtime/runtime.h"

struct run_steer;

/* The services of <cfg> with steering: kernel (their interface and VIP are copied); refused
 * tables are retried on a timer of <d>. Free it after hlb_daemon_free(<d>). */
int run_steer_new(const struct hashlb_config *cfg, struct hlb_daemon *d, pid_t from,
		  struct run_steer **ret_rs);
struct hlb_control_plug;
/* Where the daemon's pool is (hlb_control_plug_pool()): the backends a reload removed that
 * drain keep their kernel-path flows. Call before hlb_daemon_run(). */
void run_steer_set_plug(struct run_steer *rs, const struct hlb_control_plug *plug);
/* A hlb_control_reloaded_fn: <arg> is the struct run_steer, <cfg> the config now in force.
 * The republish that follows attaches what is new. Control thread only. */
void run_steer_sync(void *arg, const struct hashlb_config *cfg);
/* An hlb_publish_fn: <arg> is the struct run_steer. Control thread only. */
void run_steer_publish(void *arg, struct hlb_service *svc, const struct hlb_snapshot *snap);
/* Shutdown begins (an hlb_control_stopping_fn: <arg> is the struct run_steer): nothing is
 * published from now on (after an upgrade the old tables would overwrite the new process's);
 * <handed_over>: a program the new process did not take over is detached now. Else (a stop)
 * each program's VIP is closed, its established flows going on and new connections passed to
 * the stack (refused), logged (msg="kernel steering draining"), and the program is detached at
 * its service's timeouts.drain, or on a second signal; the daemon's run waits for it
 * (hlb_daemon_hold()). */
void run_steer_stopping(void *arg, bool handed_over);
/* Started by an upgrade in place: the old hashlb publishes no more (after its health, sent as
 * it stops), and the tables held until then are published (<arg> is the struct run_steer).
 * Control thread only. */
void run_steer_old_stopped(void *arg);
/* A new hashlb has taken the listening sockets over: leave the programs it took over attached
 * for it; detach the others. */
void run_steer_handed_over(struct run_steer *rs);
/* hashlb stopped without handing its sockets over: detach every program still attached, each
 * logged (msg="kernel steering detached" reason=stopped), its established flows left to the
 * stack (those that drained were detached at their deadline already). */
void run_steer_stopped(struct run_steer *rs);
/* An hlb_control.steer_fits (<arg> is the struct run_steer): whether service <c>'s table over
 * <names> at <weights> fits the program it has (a reload, a resolve, ctl set weight ask
 * before they change anything), else -E2BIG and <err> names the service, the capacity
 * needed and the one loaded, and how to get a larger one. Control thread only. */
int run_steer_fits(void *arg, const struct hashlb_service_cfg *c, const struct hashlb_config *next,
		   const char *const *names, const uint32_t *weights, const bool *backup,
		   uint32_t n, struct hashlb_error *err);
/* The program of the <i>th steered service, for /metrics (hlb_control.steer_stats: <arg> is
 * the struct run_steer): its counters summed over CPUs and its conntrack occupancy, read
 * now. -ENODEV if it has none (or its maps cannot be read), -ENOENT past the last.
 * Called for i = 0, 1, ... in one go (hlb_control_steer_samples()): <i> 0 starts a reading,
 * whose first service of each program scans its conntrack table for all of them.
 * Control thread only. */
int run_steer_stats(void *arg, uint32_t i, struct hlb_steer_sample *ret);
/* Detach everything (unless handed over). Accepts NULL. */
void run_steer_free(struct run_steer *rs);

#endif
