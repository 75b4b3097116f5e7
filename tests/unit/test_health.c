// SPDX-License-Identifier: MIT
/* Health verdicts: rise/fall, passive failures, flap damping, check spreading, and which
 * check errors the log says: each change once, a flapping one at most every 10 s. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "control/check.h"
#include "control/health.h"

static const struct hlb_health_params hp = { .rise = 2, .fall = 3, .half_life_ms = 0 };

static void test_fall_takes_down_after_fall_failures(void **state)
{
	struct hlb_health h;

	hlb_health_init(&h, true, 0);
	assert_false(hlb_health_check(&h, &hp, false, 10));
	assert_false(hlb_health_check(&h, &hp, false, 20));
	assert_true(h.up);
	assert_true(hlb_health_check(&h, &hp, false, 30));
	assert_false(h.up);
	/* Further failures change nothing. */
	assert_false(hlb_health_check(&h, &hp, false, 40));
	assert_int_equal(h.changes, 1);
}

static void test_a_pass_resets_the_fall_count(void **state)
{
	struct hlb_health h;

	hlb_health_init(&h, true, 0);
	for (int i = 0; i < 10; i++) {
		assert_false(hlb_health_check(&h, &hp, false, i * 30));
		assert_false(hlb_health_check(&h, &hp, false, i * 30 + 10));
		assert_false(hlb_health_check(&h, &hp, true, i * 30 + 20));
	}
	assert_true(h.up);
}

static void test_rise_brings_back_after_rise_passes(void **state)
{
	struct hlb_health h;

	hlb_health_init(&h, false, 0);
	assert_false(hlb_health_check(&h, &hp, true, 10));
	assert_false(h.up);
	/* A failure in between restarts the count. */
	assert_false(hlb_health_check(&h, &hp, false, 20));
	assert_false(hlb_health_check(&h, &hp, true, 30));
	assert_true(hlb_health_check(&h, &hp, true, 40));
	assert_true(h.up);
}

static void test_passive_failures_count_toward_fall(void **state)
{
	struct hlb_health h;

	hlb_health_init(&h, true, 0);
	assert_false(hlb_health_check(&h, &hp, false, 10));
	assert_false(hlb_health_passive(&h, &hp, 1, false, 15));
	assert_true(hlb_health_passive(&h, &hp, 1, false, 16));
	assert_false(h.up);

	/* A burst of passive failures takes it down at once. */
	hlb_health_init(&h, true, 0);
	assert_true(hlb_health_passive(&h, &hp, 50, false, 1));
	assert_false(h.up);

	/* Passive results never bring a backend back, and no failures is no news. */
	assert_false(hlb_health_passive(&h, &hp, 0, false, 2));
	assert_false(hlb_health_check(&h, &hp, true, 3));
	assert_false(hlb_health_passive(&h, &hp, 1, false, 4));
	assert_false(hlb_health_check(&h, &hp, true, 5));
	assert_true(hlb_health_check(&h, &hp, true, 6));
}

/*
 * Passive failures followed by a successful connect no longer count: a backend whose
 * connects fail one in two never fails <fall> in a row, and stays up. It went down
 * after <fall> such failures (each tick counted every failure since the last one when
 * the last connect had failed). A failed check still counts with the passive failures
 * after it; a success forgets only the passive ones.
 */
static void test_passive_failures_then_a_success_do_not_count(void **state)
{
	struct hlb_health h;

	hlb_health_init(&h, true, 0);
	assert_false(hlb_health_passive(&h, &hp, 1, false, 1));
	for (int i = 0; i < 20; i++) /* each tick: a connect succeeded, then one failed */
		assert_false(hlb_health_passive(&h, &hp, 1, true, 2 + i));
	assert_true(h.up);
	assert_int_equal(h.fail_run, 1);

	/* a failed check, a passive failure, a success, a failure: 2 in a row, not 4 */
	assert_false(hlb_health_check(&h, &hp, false, 30));
	assert_int_equal(h.fail_run, 2);
	assert_false(hlb_health_passive(&h, &hp, 1, true, 31));
	assert_int_equal(h.fail_run, 2);
	assert_true(h.up);
	/* and the run goes on: one more in a row takes it down */
	assert_true(hlb_health_passive(&h, &hp, 1, false, 32));
	assert_false(h.up);
}

/*
 * A backend flapping up/down every 200 ms, checked every 50 ms: rise/fall
 * alone would follow every flap; damping holds it down after a few.
 */
static void test_flapping_backend_is_held_down(void **state)
{
	struct hlb_health_params p = { .rise = 2, .fall = 3 };
	struct hlb_health h;
	uint64_t t, changes_while_flapping;

	p.half_life_ms = hlb_health_half_life(50, p.rise, p.fall);
	hlb_health_init(&h, true, 0);
	for (t = 50; t <= 10000; t += 50) {
		bool ok = (t / 200) % 2 == 0;

		hlb_health_check(&h, &p, ok, t);
		hlb_health_tick(&h, &p, t);
	}
	changes_while_flapping = h.changes;
	/* It flapped 25 times; the table saw at most 3 downs and 2 ups. */
	assert_true(h.flaps >= 20);
	assert_true(changes_while_flapping <= 5);
	assert_false(h.up);

	/* Once it is stable again it comes back, after the penalty decays. */
	for (; t <= 60000 && !h.up; t += 50) {
		hlb_health_check(&h, &p, true, t);
		hlb_health_tick(&h, &p, t);
	}
	assert_true(h.up);
	assert_int_equal(h.changes, changes_while_flapping + 1);
	assert_true(hlb_health_penalty(&h, &p, t) < HLB_FLAP_REUSE);
}

/* One outage and recovery is not a flap: no suppression, back after rise. */
static void test_single_outage_is_not_damped(void **state)
{
	struct hlb_health_params p = { .rise = 2, .fall = 3 };
	struct hlb_health h;
	uint64_t t = 0;

	p.half_life_ms = hlb_health_half_life(50, p.rise, p.fall);
	hlb_health_init(&h, true, 0);
	for (int i = 0; i < 3; i++)
		hlb_health_check(&h, &p, false, t += 50);
	assert_false(h.up);
	hlb_health_check(&h, &p, true, t += 50);
	assert_true(hlb_health_check(&h, &p, true, t += 50));
	assert_false(h.suppressed);
	/* Two outages in a row are not either. */
	for (int i = 0; i < 3; i++)
		hlb_health_check(&h, &p, false, t += 50);
	hlb_health_check(&h, &p, true, t += 50);
	assert_true(hlb_health_check(&h, &p, true, t += 50));
	assert_int_equal(h.changes, 4);
}

/* Found down at start (its up only assumed): the first verdict, no flap and no penalty; once
 * a check passed, its next down is one. A connect that succeeded confirms it up as well. */
static void test_first_verdict_is_no_flap(void **state)
{
	struct hlb_health_params p = { .rise = 2, .fall = 3 };
	struct hlb_health h;
	uint64_t t = 0;

	p.half_life_ms = hlb_health_half_life(50, p.rise, p.fall);
	hlb_health_assume_up(&h, 0);
	for (int i = 0; i < 3; i++)
		hlb_health_check(&h, &p, false, t += 50);
	assert_false(h.up);
	assert_int_equal(h.flaps, 0);
	assert_true(hlb_health_penalty(&h, &p, t) == 0.0);
	hlb_health_check(&h, &p, true, t += 50);
	assert_true(hlb_health_check(&h, &p, true, t += 50));
	for (int i = 0; i < 3; i++)
		hlb_health_check(&h, &p, false, t += 50);
	assert_false(h.up);
	assert_int_equal(h.flaps, 1);

	hlb_health_assume_up(&h, t);
	hlb_health_check(&h, &p, true, t += 50); /* confirmed up */
	assert_true(hlb_health_passive(&h, &p, 3, false, t += 50));
	assert_int_equal(h.flaps, 1);

	hlb_health_assume_up(&h, t);
	hlb_health_passive(&h, &p, 0, true, t += 50); /* a connect succeeded */
	assert_true(hlb_health_passive(&h, &p, 3, false, t += 50));
	assert_int_equal(h.flaps, 1);

	hlb_health_assume_up(&h, t); /* refused from the start: passive, first verdict */
	assert_true(hlb_health_passive(&h, &p, 3, false, t += 50));
	assert_int_equal(h.flaps, 0);
}

static void test_checks_are_spread_over_the_interval(void **state)
{
	uint64_t prev = 0;

	for (uint32_t i = 0; i < 10; i++) {
		uint64_t ph = hlb_check_phase(1000, i, 10, 0);

		assert_int_equal(ph, i * 100);
		assert_true(i == 0 || ph > prev);
		prev = ph;
	}
	for (uint32_t i = 0; i < 1000; i++)
		assert_true(hlb_check_phase(2000, i, 1000, 12345) < 2000);
}

static void test_check_errors_logged_once_per_change(void **state)
{
	struct hlb_check_errs e;
	uint32_t was = 0, changes = 0, lines = 0;
	uint64_t t = 1000;

	hlb_check_errs_start(&e, 1, t); /* the episode's first error, logged by the caller */
	assert_false(hlb_check_errs_note(&e, 1, t += 100, &was, &changes));
	/* another error: said at once */
	assert_true(hlb_check_errs_note(&e, 2, t += 100, &was, &changes));
	assert_int_equal(was, 1);
	assert_int_equal(changes, 1);
	assert_false(hlb_check_errs_note(&e, 2, t += 100, &was, &changes));
	/* flapping between the two, every check for 9 s: nothing more */
	for (int i = 0; i < 90; i++)
		lines += hlb_check_errs_note(&e, i % 2 ? 2 : 1, t += 100, &was, &changes);
	assert_int_equal(lines, 0);
	/* a third error is new: said at once, with the changes since the last line */
	assert_true(hlb_check_errs_note(&e, 3, t += 100, &was, &changes));
	assert_int_equal(was, 2);
	assert_int_equal(changes, 91);
	/* flapping over errors said already: one line per HLB_CHECK_ERRS_GAP_MS at most */
	for (int i = 0; i < 600; i++)
		lines += hlb_check_errs_note(&e, 1 + i % 3, t += 100, &was, &changes);
	assert_int_equal(lines, 600 * 100 / HLB_CHECK_ERRS_GAP_MS);
	/* steady after a flap: the error the log says last is the one now, if the gap allows */
	lines = 0;
	for (int i = 0; i < 200; i++)
		lines += hlb_check_errs_note(&e, 2, t += 100, &was, &changes);
	assert_true(lines <= 1);
	assert_true(lines == 0 || was != 2);
	assert_false(hlb_check_errs_note(&e, 2, t += HLB_CHECK_ERRS_GAP_MS, &was, &changes));
	/* an episode started without an error (down for another cause): the first one said */
	hlb_check_errs_start(&e, 0, t);
	assert_true(hlb_check_errs_note(&e, 5, t += 100, &was, &changes));
	assert_int_equal(was, 0);
	assert_int_equal(changes, 1);
}

/*
 * Checks off, passive on (passive_hold_ms): <fall> failed connects in a row hold the backend
 * down for the hold, then it is up on trial; a failure on trial takes it down again for twice
 * as long, up to HLB_PASSIVE_HOLD_GROWTH holds; a connect that succeeds ends the trial and
 * the growth. A trial's down is no flap (its up was only assumed).
 */
static void test_passive_only_holds_then_trials(void **state)
{
	const struct hlb_health_params pp = {
		.rise = 2, .fall = 3, .half_life_ms = 80000, .passive_hold_ms = 1000
	};
	struct hlb_health h;
	uint64_t t = 100, hold = pp.passive_hold_ms;

	(void)state;
	hlb_health_assume_up(&h, 0);
	assert_false(hlb_health_passive(&h, &pp, 2, false, t));
	assert_false(hlb_health_passive(&h, &pp, 0, true, t)); /* not in a row */
	assert_false(hlb_health_passive(&h, &pp, 2, false, t));
	assert_true(h.up);
	assert_true(hlb_health_passive(&h, &pp, 1, false, t)); /* the third in a row */
	assert_false(h.up);
	assert_int_equal(h.hold_ms, pp.passive_hold_ms);
	assert_int_equal(h.flaps, 1); /* seen up: its connect succeeded */
	for (int i = 0; i < 6; i++) {
		assert_false(hlb_health_tick(&h, &pp, t + hold - 1));
		assert_false(h.up);
		assert_true(hlb_health_tick(&h, &pp, t + hold)); /* hold over: on trial */
		assert_true(h.up);
		assert_true(h.trial);
		t += hold;
		assert_true(hlb_health_passive(&h, &pp, 1, false, t)); /* one is enough */
		assert_false(h.up);
		hold *= 2; /* grows, up to 8 holds */
		if (hold > 8 * pp.passive_hold_ms)
			hold = 8 * pp.passive_hold_ms;
		assert_int_equal(h.hold_ms, hold);
	}
	assert_int_equal(h.flaps, 1); /* no trial's down */
	assert_true(hlb_health_tick(&h, &pp, t + hold));
	assert_false(hlb_health_passive(&h, &pp, 0, true, t + hold + 1)); /* served: trial over */
	assert_false(h.trial);
	/* up for good now: fall failures in a row again, a flap, the first hold again */
	t += hold + 10;
	assert_false(hlb_health_passive(&h, &pp, 2, false, t));
	assert_true(hlb_health_passive(&h, &pp, 1, false, t));
	assert_int_equal(h.hold_ms, pp.passive_hold_ms);
	assert_int_equal(h.flaps, 2);
}

/*
 * hlb_health_back_at() says when the ticks let a backend up by themselves: at its hold's end,
 * at its penalty's decay if it is held for flapping, the later of the two if both hold it, and
 * never for one down whose checks decide (the last backend's release ranks the held by it).
 */
static void test_back_at_says_when_the_ticks_let_it_up(void **state)
{
	const struct hlb_health_params pp = {
		.rise = 2, .fall = 3, .half_life_ms = 1000, .passive_hold_ms = 100
	};
	const struct hlb_health_params checked = { .rise = 2, .fall = 3, .half_life_ms = 1000 };
	struct hlb_health h, c;
	uint64_t at;

	(void)state;
	for (int flapping = 0; flapping < 2; flapping++) {
		hlb_health_init(&h, true, 0);
		h.penalty = flapping ? 1.9 : 0.0; /* a third down would hold it for flapping */
		assert_true(hlb_health_passive(&h, &pp, 3, false, 10)); /* held for 100 ms */
		assert_int_equal(h.suppressed, flapping);
		at = hlb_health_back_at(&h, &pp, 10);
		if (!flapping)
			assert_int_equal(at, 110);
		else /* 2.9 decays below 1 after log2(2.9) half-lives: 1,536 ms */
			assert_true(at > 1500 && at < 1600);
		assert_int_equal(hlb_health_back_at(&h, &pp, 50), at); /* the same a tick later */
		assert_false(hlb_health_tick(&h, &pp, at - 2));
		assert_false(h.up);
		assert_true(hlb_health_tick(&h, &pp, at));
		assert_true(h.up);
		assert_int_equal(hlb_health_back_at(&h, &pp, at), at); /* up: now */
	}
	/* held for flapping alone, its hold over: its penalty's decay */
	assert_false(hlb_health_passive(&h, &pp, 0, true, 2000)); /* served: trial over */
	h.penalty = 2.0;
	h.penalty_ms = 2000;
	assert_true(hlb_health_passive(&h, &pp, 3, false, 2000));
	assert_false(hlb_health_tick(&h, &pp, 2100)); /* hold over, still out: no change */
	assert_false(h.up);
	assert_true(h.raw_up);
	at = hlb_health_back_at(&h, &pp, 2100);
	assert_true(at > 2000 + 1550 && at < 2000 + 1600); /* 3 decays below 1 in 1,585 ms */
	assert_false(hlb_health_tick(&h, &pp, at - 2));
	assert_true(hlb_health_tick(&h, &pp, at));
	/* checks on, down: only <rise> passed checks bring it back */
	hlb_health_init(&c, true, 0);
	for (int i = 0; i < 3; i++)
		hlb_health_check(&c, &checked, false, 10);
	assert_false(c.up);
	assert_int_equal(hlb_health_back_at(&c, &checked, 10), UINT64_MAX);
}

/*
 * A backend on trial after a passive-only hold, then a reload that turns the checks on
 * (passive_hold_ms 0 from then on): its checks decide, <fall> of them failed in a row taking
 * it down. Before, its trial went on, and the first failed check took it down.
 */
static void test_checks_turned_on_end_a_trial(void **state)
{
	const struct hlb_health_params off = {
		.rise = 2, .fall = 3, .half_life_ms = 80000, .passive_hold_ms = 1000
	};
	struct hlb_health_params on = off;
	struct hlb_health h;

	(void)state;
	on.passive_hold_ms = 0;
	hlb_health_assume_up(&h, 0);
	assert_true(hlb_health_passive(&h, &off, 3, false, 100)); /* held */
	assert_true(hlb_health_tick(&h, &off, 1100)); /* on trial */
	assert_true(h.trial);
	/* the reload: checks on, their first one failing before any tick */
	assert_false(hlb_health_check(&h, &on, false, 1110));
	assert_true(h.up);
	assert_false(hlb_health_check(&h, &on, false, 1120));
	assert_true(hlb_health_check(&h, &on, false, 1130)); /* the third */
	assert_false(h.up);
}

/* With checks on (passive_hold_ms 0), passive failures take a backend down with no hold: its
 * checks bring it back. */
static void test_passive_with_checks_holds_nothing(void **state)
{
	struct hlb_health h;

	(void)state;
	hlb_health_init(&h, true, 0);
	assert_true(hlb_health_passive(&h, &hp, 3, false, 10));
	assert_int_equal(h.hold_until_ms, 0);
	assert_false(hlb_health_tick(&h, &hp, 1000000));
	assert_false(h.up);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fall_takes_down_after_fall_failures),
		cmocka_unit_test(test_a_pass_resets_the_fall_count),
		cmocka_unit_test(test_rise_brings_back_after_rise_passes),
		cmocka_unit_test(test_passive_failures_count_toward_fall),
		cmocka_unit_test(test_passive_failures_then_a_success_do_not_count),
		cmocka_unit_test(test_flapping_backend_is_held_down),
		cmocka_unit_test(test_single_outage_is_not_damped),
		cmocka_unit_test(test_first_verdict_is_no_flap),
		cmocka_unit_test(test_checks_are_spread_over_the_interval),
		cmocka_unit_test(test_check_errors_logged_once_per_change),
		cmocka_unit_test(test_passive_only_holds_then_trials),
		cmocka_unit_test(test_passive_with_checks_holds_nothing),
		cmocka_unit_test(test_checks_turned_on_end_a_trial),
		cmocka_unit_test(test_back_at_says_when_the_ticks_let_it_up),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
