// SPDX-License-Identifier: MIT
/*
 * `hashlb-bench health`: what a health change costs the control thread on a
 * Maglev service, a backend going down (hashlb_table_with_down() from the
 * table with all up), coming back, and going down again (a flap: from the
 * table it came back in) and after a reload that reorders the config
 * (hashlb_table_rebuild() from that table), and a flap beside a backend down for good (an
 * idle backup is one), and a reload that leaves the backends as they are while one is down
 * (the table's own slot bytes, besides those it shares with the previous table, too), and
 * a backend back up with weights more than 16 times apart (owner blocks), each
 * against the full build of the same table
 * measured in the same run, at the default M and the largest;
 * and where the clients of the backend that goes down land: on the table's
 * answer, against the preference list's next (where a connect retried
 * before the verdict goes) and a table built without that backend.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "hashlb/table.h"

#define HEALTH_KEYS 1000000u

struct health_case {
	uint32_t m, n;
};

/* Median ms of <reps> runs of rebuild(<prev>, <b>, <n>), and the slot bytes each table holds
 * that <prev> does not (hashlb_table_bytes_shared()) into *<ret_own>. */
static double reload_ms(const struct hashlb_table *prev, const struct hashlb_backend_spec *b,
			uint32_t n, int reps, size_t *ret_own)
{
	double t[16];

	for (int i = 0; i < reps; i++) {
		struct hashlb_table *tab;
		uint64_t t0 = bench_now_ns();

		if (hashlb_table_rebuild(prev, b, n, &tab, NULL) < 0)
			abort();
		t[i] = (double)(bench_now_ns() - t0) / 1e6;
		*ret_own = hashlb_table_bytes(tab) - hashlb_table_bytes_shared(tab, prev);
		hashlb_table_free(tab);
	}
	return bench_median(t, (size_t)reps);
}

/* reload_ms() from the table of <b> (<n>, backend-0 down) built with <p>; the ms of that
 * build (once: the ratio's reference, skewed weights as the reload's) in *<ret_build>. */
static double skewed_reload_ms(const struct hashlb_table_params *p,
			       const struct hashlb_backend_spec *b, uint32_t n, int reps,
			       size_t *ret_own, double *ret_build)
{
	struct hashlb_table *t;
	uint64_t t0 = bench_now_ns();
	double ms;

	if (hashlb_table_build(p, b, n, &t, NULL) < 0)
		abort();
	*ret_build = (double)(bench_now_ns() - t0) / 1e6;
	ms = reload_ms(t, b, n, reps, ret_own);
	hashlb_table_free(t);
	return ms;
}

/* Median ms of <reps> runs of with_down(<base>, <down>) (or the build when <base> is NULL). */
static double health_ms(const struct hashlb_table_params *p, const struct hashlb_backend_spec *b,
			uint32_t n, const struct hashlb_table *base, const bool *down, int reps)
{
	double t[16];

	for (int i = 0; i < reps; i++) {
		struct hashlb_table *tab;
		uint64_t t0 = bench_now_ns();
		int r = base ? hashlb_table_with_down(base, down, &tab, NULL)
			     : hashlb_table_build(p, b, n, &tab, NULL);

		if (r < 0)
			abort();
		t[i] = (double)(bench_now_ns() - t0) / 1e6;
		hashlb_table_free(tab);
	}
	return bench_median(t, (size_t)reps);
}

/* health_ms() of backend-0's return to all up (<b>, <n>, with <p>), from the table with it down
 * that hashlb_table_with_down() made from the table with all up. */
static double skewed_back_up_ms(const struct hashlb_table_params *p,
				const struct hashlb_backend_spec *b, uint32_t n, int reps)
{
	struct hashlb_table *up, *down;
	bool *off = calloc(n, sizeof(*off));
	double ms;

	if (!off || hashlb_table_build(p, b, n, &up, NULL) < 0)
		abort();
	off[0] = true;
	if (hashlb_table_with_down(up, off, &down, NULL) < 0)
		abort();
	hashlb_table_free(up);
	off[0] = false;
	ms = health_ms(p, b, n, down, off, reps);
	hashlb_table_free(down);
	free(off);
	return ms;
}

/*
 * Medians of <reps> runs each of with_down(<base>, <down>) (*<ret_old>) and of the same made
 * from <also> too (hashlb_table_with_down_from(), *<ret_new>), alternated rep by rep.
 */
static void from_ms(const struct hashlb_table *base, const bool *down,
		    const struct hashlb_table *also, int reps, double *ret_old, double *ret_new)
{
	double t_old[16], t_new[16];

	for (int i = 0; i < reps; i++) {
		struct hashlb_table *t;
		uint64_t t0 = bench_now_ns();

		if (hashlb_table_with_down(base, down, &t, NULL) < 0)
			abort();
		t_old[i] = (double)(bench_now_ns() - t0) / 1e6;
		hashlb_table_free(t);
		t0 = bench_now_ns();
		if (hashlb_table_with_down_from(base, down, also, &t, NULL) < 0)
			abort();
		t_new[i] = (double)(bench_now_ns() - t0) / 1e6;
		hashlb_table_free(t);
	}
	*ret_old = bench_median(t_old, (size_t)reps);
	*ret_new = bench_median(t_new, (size_t)reps);
}

/*
 * Backend-0 failing connects before its verdict (<b>, <n>, with <p>; every other backend up, or
 * with <beside> backend-1 down for good): the retry table (backend-0 down too) of the next
 * snapshot (a copy of the table before), made without (*<ret_old>) and with (*<ret_new>) the
 * previous snapshot's retry table, from_ms(). That one is made as the control thread made it,
 * from the previous snapshot's table: beside backend-1's outage it keeps that outage, not
 * survivors of its own (made from the table with all up, it would, and the new column would
 * show what a retry table without a backend down for good gains).
 */
static void retry_next_ms(const struct hashlb_table_params *p, const struct hashlb_backend_spec *b,
			  uint32_t n, bool beside, int reps, double *ret_old, double *ret_new)
{
	struct hashlb_table *up, *retry, *next;
	bool *off = calloc(n, sizeof(*off)), *none = calloc(n, sizeof(*none));

	if (!off || !none || hashlb_table_build(p, b, n, &up, NULL) < 0)
		abort();
	off[1] = none[1] = beside;
	off[0] = true;
	if (hashlb_table_with_down(up, none, &next, NULL) < 0 ||
	    hashlb_table_with_down(next, off, &retry, NULL) < 0)
		abort();
	hashlb_table_free(up);
	from_ms(next, off, retry, reps, ret_old, ret_new);
	hashlb_table_free(retry);
	hashlb_table_free(next);
	free(off);
	free(none);
}

/*
 * Backend-0 in slow start with <b>'s weights (<n>, with <p>): the ramp table of the next snapshot
 * (it down, from the table back up made from the one of its outage), each rep made without
 * (*<ret_old>) and with (*<ret_new>) the previous snapshot's ramp table
 * (hashlb_table_with_down_from()), alternated; medians. And backend-0 down again (a flap) from
 * the table back up, in *<ret_again>.
 */
static void skewed_ramp_ms(const struct hashlb_table_params *p, const struct hashlb_backend_spec *b,
			   uint32_t n, int reps, double *ret_old, double *ret_new,
			   double *ret_again)
{
	struct hashlb_table *up, *down, *back, *ramp;
	bool *off = calloc(n, sizeof(*off)), *none = calloc(n, sizeof(*none));

	if (!off || !none || hashlb_table_build(p, b, n, &up, NULL) < 0)
		abort();
	off[0] = true;
	if (hashlb_table_with_down(up, off, &down, NULL) < 0 ||
	    hashlb_table_with_down(down, none, &back, NULL) < 0 ||
	    hashlb_table_with_down(back, off, &ramp, NULL) < 0)
		abort();
	hashlb_table_free(up);
	hashlb_table_free(down);
	from_ms(back, off, ramp, reps, ret_old, ret_new);
	*ret_again = health_ms(p, b, n, back, off, reps);
	hashlb_table_free(ramp);
	hashlb_table_free(back);
	free(off);
	free(none);
}

int bench_health(const struct bench_opts *o)
{
	static const char *const cols[] = { "M",
					    "N",
					    "full build ms",
					    "one down ms",
					    "one down / build",
					    "again ms",
					    "again / build",
					    "back up ms",
					    "back up / build",
					    "down again ms",
					    "down again / build",
					    "after a reload ms",
					    "after a reload / build",
					    "reload, its down kept, ms",
					    "reload, its down kept / build",
					    "reload, its down kept: MiB its own",
					    "skewed: reload, its down kept, ms",
					    "skewed: reload, its down kept / its build",
					    "skewed: reload, its down kept: MiB its own",
					    "skewed: back up ms",
					    "skewed: back up / its build",
					    "skewed: ramp step, old ms",
					    "skewed: ramp step, new ms",
					    "skewed: down again ms",
					    "retry, next snapshot: old ms",
					    "retry, next snapshot: new ms",
					    "retry beside a down, next snapshot: old ms",
					    "retry beside a down, next snapshot: new ms",
					    "beside a down ms",
					    "beside a down / build",
					    "back beside it ms",
					    "back beside it / build",
					    "its clients: on the list's next %",
					    "its clients: as without it %",
					    "others a build without it moves %",
					    NULL };
	static const struct health_case cases[] = {
		{ 65537, 2 },	 { 65537, 10 },	   { 65537, 1000 },
		{ 655373, 10 },	 { 655373, 1000 }, /* the scheme comparison's larger M */
		{ 16777259, 2 }, { 16777259, 10 }, { 16777259, 1000 },
	};
	size_t n_cases = o->quick ? 3 : sizeof(cases) / sizeof(cases[0]);
	struct hashlb_backend_spec *b = calloc(1000, sizeof(*b));
	char(*names)[16] = calloc(1000, sizeof(*names));
	uint64_t *keys = bench_client_keys(HEALTH_KEYS, 0x5eed);
	struct report r;

	if (!b || !names || !keys)
		return -1;
	for (int i = 0; i < 1000; i++) {
		snprintf(names[i], sizeof(names[i]), "backend-%d", i);
		b[i].name = names[i];
		b[i].weight = 1;
	}
	report_begin(&r, o->format, stdout, o->command);
	report_note(
		&r,
		"A Maglev service of N equal backends: the control thread's CPU ms (median "
		"of runs) for the full build (hashlb_table_build), a backend going down "
		"(hashlb_table_with_down from the table with all up), the same from a "
		"table with that backend down already (again: a retry table's, when the "
		"backend is declared down), coming back (from that one), and going down "
		"again (from the table it came back in: a flap), and the same after a reload "
		"that reverses the config's order (from the table hashlb_table_rebuild gives "
		"it), and a flap beside a backend down for good (backend-1, as an idle backup "
		"is): backend-0 down again from the table it came back in, and its return, "
		"after the first of each; and a reload that leaves the backends as they are "
		"(an address changed) while backend-0 is down, from the table of its outage, "
		"with the MiB of slots the reloaded table holds that the previous one does not "
		"(hashlb_table_bytes less hashlb_table_bytes_shared), and that reload with "
		"backend-1 at weight 100 (weights more than 16 times apart: the preference "
		"lists' owner blocks too), and backend-0 back up with those weights (from "
		"the table of its outage made from the one with all up), a step of its slow start "
		"with those weights (the next snapshot's ramp table, it down, from the table "
		"back up: old without the previous ramp table, new made from it too, "
		"hashlb_table_with_down_from, alternated) and its down again from the table "
		"back up; and backend-0 failing connects (all up, equal weights): the retry "
		"table (it down) of the next snapshot, from its table (a copy of the one with "
		"all up), old without the previous snapshot's retry table, new made from it too "
		"(hashlb_table_with_down_from), alternated, and the same beside backend-1 down "
		"for good (N above 2; the previous retry table made from the table with it "
		"down, so keeping its outage). Then, over %u client "
		"keys (src-ip) of the backend that goes down: how many land on the "
		"preference list's next of the table with all up (where a connect retried "
		"before the verdict goes), and on the backend a table built without it "
		"gives; and the keys of the others that such a build would move (the "
		"overlay moves none).",
		HEALTH_KEYS);
	report_table(&r, "health", "Maglev: a health change against the full build", cols);
	for (size_t c = 0; c < n_cases; c++) {
		uint32_t m = cases[c].m, n = cases[c].n, mine = 0, next = 0, same = 0, others = 0;
		int reps = m > 1000000 ? 3 : 11;
		struct hashlb_table_params p;
		struct hashlb_table *full, *eff, *up, *without, *reloaded, *other, *both, *back1;
		struct hashlb_backend_spec *rev = calloc(n, sizeof(*rev)),
					   *kept = calloc(n, sizeof(*kept));
		bool *down = calloc(n, sizeof(*down));
		double build, gone, again, back, flap, after_reload, beside, back_beside, reload;
		double reload_skewed, build_skewed, back_skewed, ramp_old, ramp_new, again_skewed;
		double retry_old, retry_new, retry_beside_old, retry_beside_new;
		size_t reload_own = 0, skewed_own = 0;

		hashlb_table_params_init(&p, HASHLB_SCHEME_MAGLEV);
		p.maglev_m = m;
		p.max_bytes = (size_t)1 << 32;
		if (!down || !rev || !kept || hashlb_table_build(&p, b, n, &full, NULL) < 0)
			abort();
		build = health_ms(&p, b, n, NULL, NULL, reps);
		down[0] = true;
		gone = health_ms(&p, b, n, full, down, reps);
		if (hashlb_table_with_down(full, down, &eff, NULL) < 0)
			abort();
		again = health_ms(&p, b, n, eff, down, reps);
		/* a reload that leaves the backends as they are (an address, a timeout changed)
		 * while backend-0 is down: from the table of its outage */
		memcpy(kept, b, n * sizeof(*kept));
		kept[0].down = true;
		reload = reload_ms(eff, kept, n, reps, &reload_own);
		/* the same with weights more than 16 times apart (backend-1 at 100): the
		 * preference lists' owner blocks too */
		kept[1].weight = 100;
		reload_skewed = skewed_reload_ms(&p, kept, n, reps, &skewed_own, &build_skewed);
		/* and backend-0 back up, from the table of its outage made from the one with all up
		 * (as a health change makes it) */
		kept[0].down = false;
		back_skewed = skewed_back_up_ms(&p, kept, n, reps);
		/* and a step of its slow start, and its down again */
		skewed_ramp_ms(&p, kept, n, reps, &ramp_old, &ramp_new, &again_skewed);
		kept[1].weight = b[1].weight;
		/* backend-0 failing connects: the next snapshot's retry table */
		retry_next_ms(&p, b, n, false, reps, &retry_old, &retry_new);
		if (n > 2) /* and beside backend-1 down for good (N=2: no survivor) */
			retry_next_ms(&p, b, n, true, reps, &retry_beside_old, &retry_beside_new);
		else
			retry_beside_old = retry_beside_new = 0;
		down[0] = false;
		back = health_ms(&p, b, n, eff, down, reps);
		if (hashlb_table_with_down(eff, down, &up, NULL) < 0)
			abort();
		down[0] = true;
		flap = health_ms(&p, b, n, up, down, reps);
		down[0] = false;
		/* a reload reversing the order: backend-0 is the last one */
		for (uint32_t i = 0; i < n; i++)
			rev[i] = b[n - 1 - i];
		if (hashlb_table_rebuild(up, rev, n, &reloaded, NULL) < 0)
			abort();
		down[n - 1] = true;
		after_reload = health_ms(&p, rev, n, reloaded, down, reps);
		down[n - 1] = false;
		/* backend-1 down for good (or an idle backup) while backend-0 flaps: its down
		 * and its return after the first of each */
		down[1] = true;
		if (hashlb_table_with_down(full, down, &other, NULL) < 0)
			abort();
		down[0] = true;
		if (hashlb_table_with_down(other, down, &both, NULL) < 0)
			abort();
		down[0] = false;
		if (hashlb_table_with_down(both, down, &back1, NULL) < 0)
			abort();
		back_beside = health_ms(&p, b, n, both, down, reps);
		down[0] = true;
		beside = health_ms(&p, b, n, back1, down, reps);
		down[0] = down[1] = false;
		/* backend-0 removed: the others keep their indices less one */
		if (hashlb_table_build(&p, b + 1, n - 1, &without, NULL) < 0)
			abort();
		for (uint32_t k = 0; k < HEALTH_KEYS; k++) {
			uint32_t own = hashlb_table_lookup(full, keys[k]), list[2];
			uint32_t w = hashlb_table_lookup(without, keys[k]) + 1;

			if (own != 0) {
				others += w != own;
				continue;
			}
			mine++;
			next += hashlb_table_preference(full, keys[k], list, 2) == 2 &&
				list[1] == hashlb_table_lookup(eff, keys[k]);
			same += w == hashlb_table_lookup(eff, keys[k]);
		}
		report_num(&r, "%.0f", m);
		report_num(&r, "%.0f", n);
		report_num(&r, "%.2f", build);
		report_num(&r, "%.2f", gone);
		report_num(&r, "%.3f", gone / build);
		report_num(&r, "%.2f", again);
		report_num(&r, "%.3f", again / build);
		report_num(&r, "%.2f", back);
		report_num(&r, "%.3f", back / build);
		report_num(&r, "%.2f", flap);
		report_num(&r, "%.3f", flap / build);
		report_num(&r, "%.2f", after_reload);
		report_num(&r, "%.3f", after_reload / build);
		report_num(&r, "%.2f", reload);
		report_num(&r, "%.3f", reload / build);
		report_num(&r, "%.1f", (double)reload_own / (1 << 20));
		report_num(&r, "%.2f", reload_skewed);
		report_num(&r, "%.3f", reload_skewed / build_skewed);
		report_num(&r, "%.1f", (double)skewed_own / (1 << 20));
		report_num(&r, "%.2f", back_skewed);
		report_num(&r, "%.3f", back_skewed / build_skewed);
		report_num(&r, "%.2f", ramp_old);
		report_num(&r, "%.3f", ramp_new);
		report_num(&r, "%.2f", again_skewed);
		report_num(&r, "%.2f", retry_old);
		report_num(&r, "%.3f", retry_new);
		report_num(&r, "%.2f", retry_beside_old);
		report_num(&r, "%.3f", retry_beside_new);
		report_num(&r, "%.2f", beside);
		report_num(&r, "%.3f", beside / build);
		report_num(&r, "%.2f", back_beside);
		report_num(&r, "%.3f", back_beside / build);
		report_num(&r, "%.1f", 100.0 * next / (mine ? mine : 1));
		report_num(&r, "%.1f", 100.0 * same / (mine ? mine : 1));
		report_num(&r, "%.2f", 100.0 * others / (HEALTH_KEYS - mine));
		report_end_row(&r);
		hashlb_table_free(full);
		hashlb_table_free(eff);
		hashlb_table_free(up);
		hashlb_table_free(without);
		hashlb_table_free(reloaded);
		hashlb_table_free(other);
		hashlb_table_free(both);
		hashlb_table_free(back1);
		free(rev);
		free(kept);
		free(down);
	}
	report_end_table(&r);
	report_end(&r);
	free(keys);
	free(names);
	free(b);
	return 0;
}
