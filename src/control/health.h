/* SPDX-License-Identifier: MIT */
/*
 * A backend's health verdict: a pure state machine, no I/O and no clock of
 * its own (every call takes the time), so it is tested step by step.
 *
 * Rise and fall: <fall> consecutive failed checks take an up backend down,
 * <rise> consecutive passed checks bring a down one back (HAProxy's rule).
 * Connect failures that the data plane saw (passive checks) count toward
 * fall like failed active checks, as long as no connect succeeded after
 * them; they never count toward rise, because a down backend gets no
 * traffic to pass with.
 *
 * Flap damping (the hysteresis above rise/fall): rise/fall alone follow a
 * backend that flaps slower than (rise + fall) x interval, and every flap
 * would rebuild the table and move that backend's clients back and forth.
 * So each up->down of the raw verdict (but the first verdict on an up only
 * assumed, hlb_health_assume_up()) adds 1 to a penalty that halves every
 * <half_life> ms (by default 8 x (rise + fall) x interval). One or two
 * outages never suppress; a backend flapping with a period up to about 11
 * intervals is suppressed at its third flap. While the penalty is at or
 * above HLB_FLAP_SUPPRESS the backend is held down, whatever its checks say,
 * until the penalty decays below HLB_FLAP_REUSE (as BGP route-flap damping
 * does): with the defaults, about 100 s after it stops flapping.
 *
 * Passive-only health (<passive_hold_ms> set: active checks off, the
 * forwarder's connects the only news): <fall> failed connects in a row take
 * the backend down for a hold, then it is up again on trial (nginx's
 * max_fails/fail_timeout); one failed connect on trial takes it down again,
 * for twice the hold before (Envoy's growing ejection), up to
 * HLB_PASSIVE_HOLD_GROWTH times passive_hold_ms; a connect that succeeds
 * ends the trial and the growth. An up on trial is only assumed, as at
 * start: its down is no flap.
 */
#ifndef HLB_CONTROL_HEALTH_H
#define HLB_CONTROL_HEALTH_H

#include <stdbool.h>
#include <stdint.h>

#define HLB_FLAP_SUPPRESS 2.5
#define HLB_FLAP_REUSE 1.0
/* a passive-only hold grows to at most this many times passive_hold_ms */
#define HLB_PASSIVE_HOLD_GROWTH 8

struct hlb_health_params {
	uint32_t rise; /* >= 1 */
	uint32_t fall; /* >= 1 */
	uint32_t half_life_ms; /* penalty half-life; 0 = no damping */
	uint32_t passive_hold_ms; /* passive-only health's first hold; 0 = checks decide */
};

struct hlb_health {
	bool raw_up; /* the rise/fall verdict */
	bool up; /* the verdict the table uses: raw_up and not suppressed */
	bool suppressed;
	bool assumed; /* <up> assumed, no verdict yet: its first down is no flap */
	uint32_t ok_run; /* consecutive passes while raw down */
	uint32_t fail_run; /* consecutive failures while raw up */
	uint32_t passive_run; /* of fail_run, the data plane's since its last successful connect */
	double penalty; /* as of penalty_ms */
	uint64_t penalty_ms;
	uint64_t flaps; /* raw up->down transitions, <assumed> ones not */
	uint64_t changes; /* transitions of <up> */
	uint64_t last_change_ms;
	/* passive-only: raw down until <hold_until_ms> (0: not held), for <hold_ms>; <holds>:
	 * holds in a row, no connect succeeded between; <trial>: up again after a hold, the
	 * next failed connect takes it down */
	uint64_t hold_until_ms;
	uint32_t hold_ms;
	uint32_t holds;
	bool trial;
};

/* Default damping half-life for <interval_ms>, <rise>, <fall>. */
uint32_t hlb_health_half_life(uint32_t interval_ms, uint32_t rise, uint32_t fall);

/* Start in state <up> at <now_ms> (no penalty, no runs). */
void hlb_health_init(struct hlb_health *h, bool up, uint64_t now_ms);

/*
 * Start up at <now_ms> with the state only assumed (at start, a backend a
 * reload adds, checks turned off): until a passed check or a connect that succeeded confirms
 * it, going down is the first verdict, not a flap (no flap counted, no
 * penalty), so a backend that starts after the load balancer is not a step
 * closer to being held down.
 */
void hlb_health_assume_up(struct hlb_health *h, uint64_t now_ms);

/*
 * Feed one active check result (<ok>) at <now_ms>. Returns true when <up>
 * changed, i.e. the table must be rebuilt.
 */
bool hlb_health_check(struct hlb_health *h, const struct hlb_health_params *p, bool ok,
		      uint64_t now_ms);

/*
 * Feed <n> passive failures (connect failures seen by the data plane);
 * <succeeded>: a connect succeeded before them (since the last call), so
 * the passive failures counted before it no longer count toward fall.
 */
bool hlb_health_passive(struct hlb_health *h, const struct hlb_health_params *p, uint64_t n,
			bool succeeded, uint64_t now_ms);

/* Passive-only health no longer applies: no trial, no hold growth (a hold, if any, ends at
 * the next hlb_health_tick()). The caller ends them as it stops applying (<passive_hold_ms>
 * set to 0), not the ticks: a trial left over would take the backend down at its first failure
 * once it applies again, held for twice the hold before. */
void hlb_health_passive_end(struct hlb_health *h);

/*
 * Re-evaluate suppression at <now_ms> without a new result: a suppressed
 * backend whose checks pass comes back up once its penalty has decayed; a
 * passive-only hold that is over makes the backend up on trial. Returns
 * true when <up> changed. Call it on every check tick.
 */
bool hlb_health_tick(struct hlb_health *h, const struct hlb_health_params *p, uint64_t now_ms);

/*
 * Forget <h>'s flap damping at <now_ms>: no penalty, not held down for flapping (its <up>
 * follows at the next hlb_health_tick()). Its flap count stays (a counter), and so does a
 * passive-only hold: the caller decides whether that ends too.
 */
void hlb_health_forget_damping(struct hlb_health *h, uint64_t now_ms);

/*
 * When <h>, no news coming in, is up again by itself, as of <now_ms>: the later of its
 * passive-only hold's end and its penalty's decay below HLB_FLAP_REUSE, if it is held down
 * for flapping; <now_ms> if neither holds it; UINT64_MAX if its raw verdict is down with no
 * hold to end (only a passed check brings it back).
 */
uint64_t hlb_health_back_at(const struct hlb_health *h, const struct hlb_health_params *p,
			    uint64_t now_ms);

/* The penalty decayed to <now_ms>. */
double hlb_health_penalty(const struct hlb_health *h, const struct hlb_health_params *p,
			  uint64_t now_ms);

/*
 * The errors of one episode of failed (or skipped) checks, for the log: a
 * backend's while it is down, a service's while its checks are skipped. The
 * first error is logged as the episode starts; then a check whose error is
 * another is logged too, once per change and not once per check: at once
 * for an error the episode has not logged yet (HLB_CHECK_ERRS_KINDS of
 * them), else (an error flapping between kinds already logged) at most once
 * per HLB_CHECK_ERRS_GAP_MS, with the changes since the last line. An error
 * is a nonzero number (where << 16 | errno, say); 0 is none.
 */
#define HLB_CHECK_ERRS_KINDS 8
#define HLB_CHECK_ERRS_GAP_MS 10000
/* and a pool logs at most this many such lines a second (with those of checks failing while
 * their backend stays up), all its backends and services together, the next one saying how
 * many were not (unlogged=N) */
#define HLB_CHECK_ERRS_PER_S 10

struct hlb_check_errs {
	uint32_t logged; /* the error the log gave last; 0 = none yet */
	uint32_t seen; /* the last check's */
	uint32_t changes; /* of <seen>, since the last line */
	uint64_t logged_ms;
	uint32_t kinds[HLB_CHECK_ERRS_KINDS]; /* the errors logged this episode */
	uint32_t n_kinds;
};

/* Start an episode at <now_ms> whose first error, <err>, the caller logs now; 0: none is. */
void hlb_check_errs_start(struct hlb_check_errs *e, uint32_t err, uint64_t now_ms);

/*
 * A check of the episode failed with <err> at <now_ms>. True when the log
 * must say so: the error it gave last in *<ret_was> (0: none), the changes of
 * error since that line in *<ret_changes> (1 for a plain change; more when
 * some went unlogged, flapping).
 */
bool hlb_check_errs_note(struct hlb_check_errs *e, uint32_t err, uint64_t now_ms, uint32_t *ret_was,
			 uint32_t *ret_changes);

#endif
