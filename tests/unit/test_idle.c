/* Proves the idle rule of an open connection (src/proxy/idle.h): a slow reader is kept, a silent one closed, across the 32-bit ms wrap. */
// SPDX-License-Identifier: MIT
#include "helpers.h"
#include "idle.h"

#define IDLE_MS 2000u
#define SCAN_MS 500u /* conn_idle_scan(): a quarter of the idle timeout */

/* A connection's sockets: the bytes they hold for their peers, and how often they were asked. */
struct socks {
	uint32_t outq, reads;
	int32_t taken_per_read; /* what the peer acknowledged between two reads */
};

static uint32_t socks_outq(const void *arg)
{
	struct socks *s = (struct socks *)arg;

	s->reads++;
	s->outq -= (uint32_t)s->taken_per_read;
	return s->outq + (uint32_t)s->taken_per_read;
}

struct conn_sim {
	uint32_t now, last_ms;
	struct idle_note note;
	struct socks socks;
};

/* Opened at <start> (near the wrap or not), as conn_connect_done() leaves it: none noted. */
static void sim_open(struct conn_sim *c, uint32_t start)
{
	memset(c, 0, sizeof(*c));
	c->now = c->last_ms = c->note.at_ms = start;
	c->socks.outq = 4 << 20;
}

/* Scans every SCAN_MS for <ms>, with activity each <active_every> ms (0: none); whether closed. */
static bool sim_run(struct conn_sim *c, uint64_t ms, uint32_t active_every)
{
	for (uint64_t t = 0; t < ms; t += SCAN_MS) {
		c->now += SCAN_MS;
		if (active_every && (t + SCAN_MS) % active_every == 0)
			c->last_ms = c->now;
		else if (idle_due(c->now, IDLE_MS, &c->last_ms, &c->note, socks_outq, &c->socks))
			return true;
	}
	return false;
}

static void test_silent_is_closed_slow_reader_kept(void **state)
{
	struct conn_sim c;

	(void)state;
	for (uint32_t start = 0; start < 2; start++) {
		sim_open(&c, start ? UINT32_MAX - 3 * IDLE_MS : 1000);
		c.socks.taken_per_read = 0; /* a peer that stopped reading */
		assert_false(sim_run(&c, IDLE_MS, 0));
		assert_true(sim_run(&c, SCAN_MS, 0));

		sim_open(&c, start ? UINT32_MAX - 3 * IDLE_MS : 1000);
		c.socks.taken_per_read = 4096; /* a slow reader */
		assert_false(sim_run(&c, 20 * IDLE_MS, 0));
		assert_in_range(c.socks.reads, 10, 20); /* once per idle time, not per scan */
	}
}

/*
 * A connection noted once (quiet half its timeout), then busy for 25 days, then read slowly:
 * kept. Before, the note 25 days old (2^31 ms and more behind last_ms) read as current: none
 * was taken at half the timeout, and at the timeout the slow reader was closed.
 */
static void test_note_weeks_old_is_none(void **state)
{
	struct conn_sim c;

	(void)state;
	sim_open(&c, 1000);
	c.socks.outq = 0; /* nothing in flight then */
	assert_false(sim_run(&c, IDLE_MS / 2 + SCAN_MS, 0)); /* noted */
	assert_int_equal(c.socks.reads, 1);
	c.last_ms = c.now;
	assert_false(sim_run(&c, 25ull * 24 * 3600 * 1000, 1000)); /* busy */
	c.socks.outq = 4 << 20;
	c.socks.taken_per_read = 4096;
	assert_false(sim_run(&c, 20 * IDLE_MS, 0));
	assert_in_range(c.socks.reads, 10, 21);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_silent_is_closed_slow_reader_kept),
		cmocka_unit_test(test_note_weeks_old_is_none),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
