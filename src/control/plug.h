/* SPDX-License-Identifier: MIT */
/*
 * The control plane plugged into the daemon (src/runtime/daemon.h): its
 * loop nests in the daemon's as one fd, its pool creates and publishes the
 * services and listens through the daemon's listen transaction, SIGHUP
 * reloads through it, and shutdown stops the checks and the admin endpoint.
 */
#ifndef HLB_CONTROL_PLUG_H
#define HLB_CONTROL_PLUG_H

#include "runtime/daemon.h"

#include "control.h"
#include "pool.h"

struct hlb_control_plug;

/* Set <d>'s hooks; call before hlb_daemon_run(). Free the plug after hlb_daemon_free(). */
int hlb_control_plug(struct hlb_daemon *d, struct hlb_control_plug **ret_plug);
/*
 * Call <fn> after every publish, from the control thread, starting with
 * each service's first snapshot: kernel steering takes the same tables.
 * During the call svc->cfg is the service's current config (a reload
 * switches it before publishing). Call before hlb_daemon_run().
 */
int hlb_control_plug_subscribe(struct hlb_control_plug *plug, hlb_publish_fn fn, void *arg);
typedef void (*hlb_control_reloaded_fn)(void *arg, const struct hashlb_config *cfg);
/*
 * Call <fn> after every reload that succeeded, with the config now in force
 * (borrowed, valid until the next reload), from the control thread; then
 * every subscriber gets every service's snapshot again. One at a time: the
 * last call wins. Call before hlb_daemon_run().
 */
void hlb_control_plug_on_reload(struct hlb_control_plug *plug, hlb_control_reloaded_fn fn,
				void *arg);
typedef void (*hlb_control_stopping_fn)(void *arg, bool handed_over);
/* Call <fn> when shutdown begins, after the control plane stopped (no health
 * check, reload or admin request follows), from the control thread;
 * <handed_over>: an upgrade's new process took the sockets over. One at a
 * time. Call before hlb_daemon_run(). */
void hlb_control_plug_on_stopping(struct hlb_control_plug *plug, hlb_control_stopping_fn fn,
				  void *arg);
/* Started by an upgrade in place: call <fn> once the old process has stopped publishing
 * (hlb_daemon_hooks.old_stopped), from the control thread. One at a time. Call before
 * hlb_daemon_run(). */
void hlb_control_plug_on_old_stopped(struct hlb_control_plug *plug, void (*fn)(void *arg),
				     void *arg);
/* Where /metrics reads the kernel steering counters (hlb_control.steer_stats): <fn>
 * with <arg>, from the control thread. Call before hlb_daemon_run(). */
void hlb_control_plug_on_steer_stats(struct hlb_control_plug *plug, hlb_control_steer_stats_fn fn,
				     void *arg);
/* Where a reload, a resolve and hashlb ctl set weight ask whether a service's table fits its
 * kernel steering program (hlb_control.steer_fits): <fn> with <arg>, from the control
 * thread. Call before hlb_daemon_run(). */
void hlb_control_plug_on_steer_fits(struct hlb_control_plug *plug, hlb_control_steer_fits_fn fn,
				    void *arg);
/* The control plane's pool, from the control thread: NULL before the daemon runs it or after
 * it stopped (or for a NULL <plug>). */
struct hlb_pool *hlb_control_plug_pool(const struct hlb_control_plug *plug);
void hlb_control_plug_free(struct hlb_control_plug *plug); /* accepts NULL */

#endif
