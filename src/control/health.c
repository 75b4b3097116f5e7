// SPDX-License-Identifier: MIT
#include <math.h>

#include "health.h"

uint32_t hlb_health_half_life(uint32_t interval_ms, uint32_t rise, uint32_t fall)
{
	uint64_t hl = 8ull * (rise + fall) * interval_ms;

	return hl > UINT32_MAX ? UINT32_MAX : (uint32_t)hl;
}

void hlb_health_init(struct hlb_health *h, bool up, uint64_t now_ms)
{
	*h = (struct hlb_health){
		.raw_up = up,
		.up = up,
		.penalty_ms = now_ms,
		.last_change_ms = now_ms,
	};
}

void hlb_health_assume_up(struct hlb_health *h, uint64_t now_ms)
{
	hlb_health_init(h, true, now_ms);
	h->assumed = true;
}

double hlb_health_penalty(const struct hlb_health *h, const struct hlb_health_params *p,
			  uint64_t now_ms)
{
	double dt;

	if (!p->half_life_ms || h->penalty == 0.0)
		return 0.0;
	dt = now_ms > h->penalty_ms ? (double)(now_ms - h->penalty_ms) : 0.0;
	return h->penalty * exp2(-dt / p->half_life_ms);
}

void hlb_health_forget_damping(struct hlb_health *h, uint64_t now_ms)
{
	h->penalty = 0.0;
	h->penalty_ms = now_ms;
	h->suppressed = false;
}

uint64_t hlb_health_back_at(const struct hlb_health *h, const struct hlb_health_params *p,
			    uint64_t now_ms)
{
	uint64_t at = now_ms;
	double pen;

	if (!h->raw_up) {
		if (!p->passive_hold_ms || !h->hold_until_ms)
			return UINT64_MAX;
		if (h->hold_until_ms > at)
			at = h->hold_until_ms;
	}
	pen = h->suppressed ? hlb_health_penalty(h, p, now_ms) : 0.0;
	if (pen >= HLB_FLAP_REUSE) {
		/* pen halves every half_life_ms: below REUSE after log2(pen / REUSE) of them */
		double ms = ceil(p->half_life_ms * log2(pen / HLB_FLAP_REUSE));
		uint64_t until = now_ms + (uint64_t)ms + 1;

		if (until > at)
			at = until;
	}
	return at;
}

/* Recompute <up> from raw_up and the penalty; true if it changed. */
static bool health_settle(struct hlb_health *h, const struct hlb_health_params *p, uint64_t now_ms)
{
	double pen = hlb_health_penalty(h, p, now_ms);
	bool up;

	if (h->suppressed && pen < HLB_FLAP_REUSE)
		h->suppressed = false;
	else if (!h->suppressed && pen >= HLB_FLAP_SUPPRESS)
		h->suppressed = true;
	up = h->raw_up && !h->suppressed;
	if (up == h->up)
		return false;
	h->up = up;
	h->changes++;
	h->last_change_ms = now_ms;
	return true;
}

static void health_go_down(struct hlb_health *h, const struct hlb_health_params *p, bool passive,
			   uint64_t now_ms)
{
	h->raw_up = false;
	h->fail_run = 0;
	h->passive_run = 0;
	h->ok_run = 0;
	if (p->passive_hold_ms && passive) { /* passive-only: held, longer each time in a row */
		uint32_t max = p->passive_hold_ms * HLB_PASSIVE_HOLD_GROWTH;

		if (!h->holds)
			h->hold_ms = p->passive_hold_ms;
		else
			h->hold_ms = h->hold_ms > max / 2 ? max : h->hold_ms * 2;
		h->holds++;
		h->hold_until_ms = now_ms + h->hold_ms;
	}
	h->trial = false;
	if (h->assumed) { /* the first verdict: it was never known up */
		h->assumed = false;
		return;
	}
	h->flaps++;
	if (p->half_life_ms) {
		h->penalty = hlb_health_penalty(h, p, now_ms) + 1.0;
		h->penalty_ms = now_ms;
	}
}

static void health_fail(struct hlb_health *h, const struct hlb_health_params *p, uint64_t n,
			bool passive, uint64_t now_ms)
{
	uint32_t was = h->fail_run;

	if (!h->raw_up) {
		h->ok_run = 0;
		return;
	}
	/* on trial only while passive-only: checks turned on since decide with <fall> */
	h->fail_run = h->fail_run + n > p->fall || (h->trial && p->passive_hold_ms)
			      ? p->fall
			      : h->fail_run + (uint32_t)n;
	if (passive)
		h->passive_run += h->fail_run - was;
	if (h->fail_run >= p->fall)
		health_go_down(h, p, passive, now_ms);
}

bool hlb_health_check(struct hlb_health *h, const struct hlb_health_params *p, bool ok,
		      uint64_t now_ms)
{
	if (!ok) {
		health_fail(h, p, 1, false, now_ms);
	} else if (h->raw_up) {
		h->fail_run = 0;
		h->passive_run = 0;
		h->assumed = false;
	} else if (++h->ok_run >= p->rise) {
		h->raw_up = true;
		h->ok_run = 0;
		h->fail_run = 0;
		h->passive_run = 0;
	}
	return health_settle(h, p, now_ms);
}

bool hlb_health_passive(struct hlb_health *h, const struct hlb_health_params *p, uint64_t n,
			bool succeeded, uint64_t now_ms)
{
	if (succeeded) { /* the failures before that connect are not "in a row" */
		h->assumed = false;
		h->trial = false;
		h->holds = 0;
		h->fail_run -= h->passive_run < h->fail_run ? h->passive_run : h->fail_run;
		h->passive_run = 0;
	}
	if (!n)
		return false;
	health_fail(h, p, n, true, now_ms);
	return health_settle(h, p, now_ms);
}

void hlb_health_passive_end(struct hlb_health *h)
{
	h->trial = false;
	h->holds = 0;
}

bool hlb_health_tick(struct hlb_health *h, const struct hlb_health_params *p, uint64_t now_ms)
{
	if (h->hold_until_ms && (!p->passive_hold_ms || now_ms >= h->hold_until_ms)) {
		h->hold_until_ms = 0;
		if (p->passive_hold_ms && !h->raw_up) { /* up on trial, only assumed */
			h->raw_up = true;
			h->assumed = true;
			h->trial = true;
			h->fail_run = 0;
			h->passive_run = 0;
		}
	}
	return health_settle(h, p, now_ms);
}

void hlb_check_errs_start(struct hlb_check_errs *e, uint32_t err, uint64_t now_ms)
{
	*e = (struct hlb_check_errs){ .logged = err, .seen = err, .logged_ms = now_ms };
	if (err)
		e->kinds[e->n_kinds++] = err;
}

static bool check_errs_logged(const struct hlb_check_errs *e, uint32_t err)
{
	for (uint32_t i = 0; i < e->n_kinds; i++)
		if (e->kinds[i] == err)
			return true;
	return false;
}

bool hlb_check_errs_note(struct hlb_check_errs *e, uint32_t err, uint64_t now_ms, uint32_t *ret_was,
			 uint32_t *ret_changes)
{
	bool fresh;

	if (err != e->seen) {
		e->seen = err;
		e->changes++;
	}
	if (!e->changes)
		return false; /* the log says it already */
	fresh = !check_errs_logged(e, err);
	if (!fresh && (err == e->logged || now_ms - e->logged_ms < HLB_CHECK_ERRS_GAP_MS))
		return false;
	if (fresh && e->n_kinds < HLB_CHECK_ERRS_KINDS)
		e->kinds[e->n_kinds++] = err;
	else if (fresh && now_ms - e->logged_ms < HLB_CHECK_ERRS_GAP_MS)
		return false; /* kinds beyond those remembered: the gap bounds them too */
	*ret_was = e->logged;
	*ret_changes = e->changes;
	e->logged = err;
	e->logged_ms = now_ms;
	e->changes = 0;
	return true;
}
