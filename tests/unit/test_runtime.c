// SPDX-License-Identifier: MIT
/* The data plane/control plane contract: a retired snapshot is freed only after every
 * online worker passed a quiescent point, never while one may hold it; backends live
 * while referenced; refresh marks exactly the unusable backends down; counters sum. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/clients.h"
#include "runtime/runtime.h"
#include "populations.h"

static int freed;

static void count_free(void *p)
{
	(void)p;
	freed++;
}

static void test_rcu_waits_for_online_readers(void **state)
{
	struct hlb_rcu *rcu;

	assert_int_equal(hlb_rcu_new(2, &rcu), 0);
	freed = 0;
	hlb_rcu_online(rcu, 0); /* reader 0 may hold the old pointer */
	/* reader 1 stays offline: it never blocks reclamation */
	assert_int_equal(hlb_rcu_defer(rcu, count_free, NULL), 0);
	assert_int_equal(hlb_rcu_poll(rcu), 1);
	assert_int_equal(freed, 0);
	hlb_rcu_quiescent(rcu, 0); /* passed a point where it holds nothing */
	assert_int_equal(hlb_rcu_poll(rcu), 0);
	assert_int_equal(freed, 1);
	hlb_rcu_free(rcu);
}

static void test_rcu_going_offline_is_quiescent(void **state)
{
	struct hlb_rcu *rcu;

	assert_int_equal(hlb_rcu_new(2, &rcu), 0);
	freed = 0;
	hlb_rcu_online(rcu, 0);
	hlb_rcu_online(rcu, 1);
	assert_int_equal(hlb_rcu_defer(rcu, count_free, NULL), 0);
	hlb_rcu_offline(rcu, 0);
	assert_int_equal(hlb_rcu_poll(rcu), 1); /* reader 1 still online since before */
	hlb_rcu_offline(rcu, 1);
	hlb_rcu_online(rcu, 1); /* back online after the retirement: cannot hold it */
	assert_int_equal(hlb_rcu_poll(rcu), 0);
	assert_int_equal(freed, 1);
	/* An entry retired later waits for reader 1 again. */
	assert_int_equal(hlb_rcu_defer(rcu, count_free, NULL), 0);
	assert_int_equal(hlb_rcu_poll(rcu), 1);
	hlb_rcu_offline(rcu, 1);
	hlb_rcu_barrier(rcu);
	assert_int_equal(freed, 2);
	hlb_rcu_free(rcu);
}

static void backend_cfg(struct hashlb_backend_cfg *c, const char *name, int port)
{
	struct sockaddr_in *in = (struct sockaddr_in *)&c->addr;

	memset(c, 0, sizeof(*c));
	c->name = (char *)name;
	c->address = (char *)"127.0.0.1";
	in->sin_family = AF_INET;
	in->sin_port = htons(port);
	in->sin_addr.s_addr = htonl(0x7f000001);
	c->addr_len = sizeof(*in);
	c->weight = 1;
}

static void service_cfg(struct hashlb_service_cfg *s, struct hashlb_backend_cfg *b, uint32_t n)
{
	memset(s, 0, sizeof(*s));
	s->name = (char *)"svc";
	hashlb_table_params_init(&s->table, HASHLB_SCHEME_MAGLEV);
	s->table.maglev_m = 251;
	s->key = HASHLB_KEY_SRC_IP;
	s->connect_timeout_ms = 1000;
	s->connect_retries = 2;
	s->backends = b;
	s->n_backends = n;
}

/* Backends a, b and c of service <sc>, a service object and an RCU of one reader. */
struct three {
	struct hashlb_backend_cfg bc[3];
	struct hashlb_service_cfg sc;
	struct hlb_backend *b[3];
	struct hlb_service *svc;
	struct hlb_rcu *rcu;
};

static void three_backends(struct three *f)
{
	backend_cfg(&f->bc[0], "a", 1);
	backend_cfg(&f->bc[1], "b", 2);
	backend_cfg(&f->bc[2], "c", 3);
	service_cfg(&f->sc, f->bc, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(hlb_backend_new(&f->bc[i], 2, &f->b[i]), 0);
	assert_int_equal(hlb_rcu_new(1, &f->rcu), 0);
	assert_int_equal(hlb_service_new("svc", 2, &f->svc), 0);
}

/* What three_backends() made: its backends, the service (with a snapshot published in it,
 * whose backends go with it) and the RCU. */
static void three_free(struct three *f)
{
	for (int i = 0; i < 3; i++)
		hlb_backend_unref(f->b[i]);
	hlb_service_unref(f->svc);
	hlb_rcu_free(f->rcu);
}

static void test_snapshot_refresh_and_publish(void **state)
{
	struct hlb_snapshot *s1, *s2;
	struct three f;
	uint32_t up = 0;

	three_backends(&f);
	assert_int_equal(hlb_snapshot_rebuild(NULL, &f.sc, f.b, 1, &s1, NULL), 0);
	assert_int_equal(s1->n_backends, 3);
	assert_int_equal(s1->up_weight, 3);
	assert_int_equal(s1->connect_retries, 2);
	assert_int_equal(hlb_service_publish(f.svc, s1, f.rcu), 0);
	assert_ptr_equal(hlb_service_snapshot(f.svc), s1);

	/* b fails its health check: the refresh has b down, a and c untouched. */
	atomic_store(&f.b[1]->healthy, false);
	assert_int_equal(hlb_snapshot_refresh(s1, &f.sc, 2, &s2, NULL), 0);
	assert_true(hashlb_table_backend_down(s2->table, 1));
	assert_false(hashlb_table_backend_down(s2->table, 0));
	assert_int_equal(s2->up_weight, 2);
	for (uint64_t h = 0; h < 1000; h++) {
		uint32_t before = hashlb_table_lookup(s1->table, h * 0x9e3779b97f4a7c15ull);
		uint32_t after = hashlb_table_lookup(s2->table, h * 0x9e3779b97f4a7c15ull);

		assert_int_not_equal(after, 1);
		if (before != 1)
			assert_int_equal(before, after);
		up += after != 1;
	}
	assert_int_equal(up, 1000);

	/* A worker online since before the publish keeps s1 alive. */
	hlb_rcu_online(f.rcu, 0);
	assert_int_equal(hlb_service_publish(f.svc, s2, f.rcu), 0);
	assert_int_equal(hlb_rcu_poll(f.rcu), 1);
	/* A connection's reference keeps a backend whatever is published. */
	hlb_backend_ref(f.b[1]);
	hlb_rcu_quiescent(f.rcu, 0);
	assert_int_equal(hlb_rcu_poll(f.rcu), 0);
	/* refs of b: ours (creation), s2's, the connection's */
	assert_int_equal(atomic_load(&f.b[1]->refs), 3);
	hlb_backend_unref(f.b[1]); /* the connection closes */
	three_free(&f); /* frees s2 and, with it, the backends */
}

/*
 * hlb_snapshot_tables_bytes() counts every table of every snapshot alive once:
 * a replaced snapshot's until the workers have left it and it is freed, and
 * the retry and ramp tables a snapshot carries; the slots a replaced table and
 * its successor share once too (before, twice until the old one was freed: up
 * to 96 MiB at the largest M); it goes back to 0 when they are all freed.
 */
static void test_snapshot_tables_bytes(void **state)
{
	struct hlb_snapshot *s1, *s2;
	struct three f;
	uint64_t base = hlb_snapshot_tables_bytes(), t1, t2;
	bool failing[3] = { false, false, true }, ramping[3] = { false, false, true };
	uint32_t lookups[251];

	three_backends(&f);
	assert_int_equal(hlb_snapshot_rebuild(NULL, &f.sc, f.b, 1, &s1, NULL), 0);
	t1 = hashlb_table_bytes(s1->table);
	assert_int_equal(s1->tables_bytes, t1);
	assert_int_equal(hlb_snapshot_tables_bytes() - base, t1);
	assert_int_equal(hlb_service_publish(f.svc, s1, f.rcu), 0);

	/* b down, with a retry table (c failing) and a ramp table (c ramping) */
	atomic_store(&f.b[1]->healthy, false);
	assert_int_equal(hlb_snapshot_refresh(s1, &f.sc, 2, &s2, NULL), 0);
	hlb_snapshot_add_retry(s2, failing, NULL);
	hlb_snapshot_add_ramp(s2, ramping, NULL);
	assert_non_null(s2->retry_table);
	assert_non_null(s2->ramp_table);
	/* the retry and ramp tables share the table's full slots and keep its effective ones (the
	 * outage a flap of c goes back to): 2 + 2 bytes a slot, counted once */
	assert_int_equal(hashlb_table_bytes_shared(s2->retry_table, s2->table), 2 * 2 * 251);
	assert_int_equal(hashlb_table_bytes_shared(s2->ramp_table, s2->table), 2 * 2 * 251);
	t2 = hashlb_table_bytes(s2->table) + hashlb_table_bytes(s2->retry_table) - 2 * 2 * 251 +
	     hashlb_table_bytes(s2->ramp_table) - 2 * 2 * 251;
	assert_int_equal(s2->tables_bytes, t2);
	/* three tables with backends down: 6 bytes a slot, then 2 each beside it (their own
	 * effective slots), against 2 a slot */
	assert_true(t2 >= t1 + 4 * 2 * 251);
	/* s2's tables share s1's full slots (its only slots): counted once */
	assert_int_equal(hashlb_table_bytes_shared(s2->table, s1->table), 2 * 251);
	assert_int_equal(hlb_snapshot_tables_bytes() - base, t1 + t2 - 2 * 251);
	for (uint64_t h = 0; h < 251; h++)
		lookups[h] = hashlb_table_lookup(s2->retry_table, h << 56);

	/* a worker online since before the publish holds s1: still counted */
	hlb_rcu_online(f.rcu, 0);
	assert_int_equal(hlb_service_publish(f.svc, s2, f.rcu), 0);
	assert_int_equal(hlb_rcu_poll(f.rcu), 1);
	assert_int_equal(hlb_snapshot_tables_bytes() - base, t1 + t2 - 2 * 251);
	hlb_rcu_quiescent(f.rcu, 0);
	assert_int_equal(hlb_rcu_poll(f.rcu), 0);
	assert_int_equal(hlb_snapshot_tables_bytes() - base, t2);
	/* s1's table freed, the full slots s2's tables share with it are not: the same answers */
	for (uint64_t h = 0; h < 251; h++)
		assert_int_equal(hashlb_table_lookup(s2->retry_table, h << 56), lookups[h]);
	for (int i = 0; i < 3; i++)
		hlb_backend_unref(f.b[i]);
	hlb_service_unref(f.svc);
	assert_int_equal(hlb_snapshot_tables_bytes(), base);
	hlb_rcu_free(f.rcu);
}

/*
 * hlb_snapshot_tables_bytes() counts the tables snapshots hold and nothing else: a table built
 * outside any (a config load's, the next health change's being built), even one that shares
 * the published table's slots, leaves it as it was, and once the snapshots are freed it goes
 * back to where it was with that table still alive. Before, it counted every slot array the
 * process held: tables that serve no client showed in table_memory.
 */
static void test_snapshot_tables_bytes_only_snapshots(void **state)
{
	struct hashlb_backend_spec spec[3] = { { "a", 1, false },
					       { "b", 2, false },
					       { "c", 3, true } };
	bool down[3] = { false, true, false };
	struct hashlb_table *built, *shared;
	struct hlb_snapshot *s1;
	struct three f;
	uint64_t base = hlb_snapshot_tables_bytes(), held;

	three_backends(&f);
	assert_int_equal(hlb_snapshot_rebuild(NULL, &f.sc, f.b, 1, &s1, NULL), 0);
	held = hlb_snapshot_tables_bytes();
	assert_int_equal(held - base, hashlb_table_bytes(s1->table));
	assert_int_equal(hlb_service_publish(f.svc, s1, f.rcu), 0);
	assert_int_equal(hashlb_table_build(&f.sc.table, spec, 3, &built, NULL), 0);
	assert_int_equal(hashlb_table_with_down(s1->table, down, &shared, NULL), 0);
	assert_int_equal(hashlb_table_bytes_shared(shared, s1->table), 2 * 251);
	assert_int_equal(hlb_snapshot_tables_bytes(), held);
	three_free(&f); /* frees s1: the table sharing its slots outlives it */
	assert_int_equal(hlb_snapshot_tables_bytes(), base);
	hashlb_table_free(shared);
	hashlb_table_free(built);
	assert_int_equal(hlb_snapshot_tables_bytes(), base);
}

/*
 * A Maglev backend back from an outage, in slow start: its ramp table (it down) is the table
 * of its outage, and so is the table when it goes down again once the ramp is over (a flap);
 * neither costs a population (about 1 s each at the largest table size), the table it came
 * back in keeping the survivors' table of its outage. Before, both did.
 */
static void test_return_keeps_the_outage_table(void **state)
{
	struct hlb_snapshot *s1, *s2, *s3, *s4, *s5;
	struct three f;
	bool ramping[3] = { false, true, false };

	three_backends(&f);
	assert_int_equal(hlb_snapshot_rebuild(NULL, &f.sc, f.b, 1, &s1, NULL), 0);
	atomic_store(&f.b[1]->healthy, false);
	populations = 0;
	assert_int_equal(hlb_snapshot_refresh(s1, &f.sc, 2, &s2, NULL), 0);
	assert_int_equal(populations, 1); /* the first down: the survivors' population */

	atomic_store(&f.b[1]->healthy, true); /* back, ramping */
	populations = 0;
	assert_int_equal(hlb_snapshot_refresh(s2, &f.sc, 3, &s3, NULL), 0);
	hlb_snapshot_add_ramp(s3, ramping, s2);
	assert_non_null(s3->ramp_table);
	assert_int_equal(hashlb_table_fingerprint(s3->ramp_table), s2->fingerprint);
	if (populations)
		fail_msg("back up in slow start: %u populations for the ramp table", populations);

	populations = 0; /* the ramp over: the next build has no ramp table */
	assert_int_equal(hlb_snapshot_refresh(s3, &f.sc, 4, &s4, NULL), 0);
	assert_null(s4->ramp_table);
	atomic_store(&f.b[1]->healthy, false); /* and b down again */
	assert_int_equal(hlb_snapshot_refresh(s4, &f.sc, 5, &s5, NULL), 0);
	assert_int_equal(s5->fingerprint, s2->fingerprint);
	if (populations)
		fail_msg("down again after the ramp: %u populations", populations);

	hlb_snapshot_free(s1);
	hlb_snapshot_free(s2);
	hlb_snapshot_free(s3);
	hlb_snapshot_free(s4);
	hlb_snapshot_free(s5);
	three_free(&f);
}

/*
 * A service with an idle backup (weight 1: the backup rule takes it as down while a primary
 * is up) and a primary that flaps: its return and its next down take a copy, as in a service
 * without backups, not a population each (about 1 s at the largest table size). Before, the
 * table kept only the survivors' table of its own outage, and each flap populated.
 */
static void test_flap_beside_an_idle_backup_copies(void **state)
{
	struct hlb_snapshot *s1, *s2, *s3, *s4;
	struct three f;

	three_backends(&f);
	f.b[2]->backup = true; /* c: idle, down in the table */
	assert_int_equal(hlb_snapshot_rebuild(NULL, &f.sc, f.b, 1, &s1, NULL), 0);
	assert_true(hashlb_table_backend_down(s1->table, 2));
	atomic_store(&f.b[1]->healthy, false);
	populations = 0;
	assert_int_equal(hlb_snapshot_refresh(s1, &f.sc, 2, &s2, NULL), 0);
	assert_int_equal(populations, 1); /* b's first down: the survivors' population */
	assert_true(hashlb_table_backend_down(s2->table, 2)); /* a is up: c stays idle */

	atomic_store(&f.b[1]->healthy, true);
	populations = 0;
	assert_int_equal(hlb_snapshot_refresh(s2, &f.sc, 3, &s3, NULL), 0);
	assert_int_equal(s3->fingerprint, s1->fingerprint);
	if (populations)
		fail_msg("b back beside the idle backup: %u populations", populations);
	atomic_store(&f.b[1]->healthy, false);
	assert_int_equal(hlb_snapshot_refresh(s3, &f.sc, 4, &s4, NULL), 0);
	assert_int_equal(s4->fingerprint, s2->fingerprint);
	if (populations)
		fail_msg("b down again beside the idle backup: %u populations", populations);

	hlb_snapshot_free(s1);
	hlb_snapshot_free(s2);
	hlb_snapshot_free(s3);
	hlb_snapshot_free(s4);
	three_free(&f);
}

/*
 * A Maglev backend failing connects, then declared down while a backend of weight 0 changed
 * verdict too: the table starts from the retry table built for the failures (the same
 * backends taking turns), a copy, not a population (about 1 s at the largest table size).
 * Before, only a retry table of the exact down set was taken, and this one populated again.
 */
static void test_refresh_from_retry_table_beside_a_weight0_change(void **state)
{
	struct hlb_snapshot *s1, *s2;
	struct three f;
	bool failing[3] = { false, true, false };

	three_backends(&f);
	f.b[2]->weight = 0; /* c: configured, takes no clients */
	assert_int_equal(hlb_snapshot_rebuild(NULL, &f.sc, f.b, 1, &s1, NULL), 0);
	populations = 0;
	hlb_snapshot_add_retry(s1, failing, NULL);
	assert_non_null(s1->retry_table);
	assert_int_equal(populations, 1); /* b's first down: the survivors' population */
	atomic_store(&f.b[1]->healthy, false); /* b declared down */
	atomic_store(&f.b[2]->healthy, false); /* and c's checks fail too */
	populations = 0;
	assert_int_equal(hlb_snapshot_refresh(s1, &f.sc, 2, &s2, NULL), 0);
	assert_true(hashlb_table_backend_down(s2->table, 2));
	assert_int_equal(s2->fingerprint, hashlb_table_fingerprint(s1->retry_table));
	if (populations)
		fail_msg("b declared down after its retry table: %u populations", populations);

	hlb_snapshot_free(s1);
	hlb_snapshot_free(s2);
	three_free(&f);
}

/* <t> (a table of <s>'s) is the table built of <s>'s backends with those <down> says down:
 * its fingerprint, and the backend of each of 1,024 hashes spread over the hash space. */
static void assert_built_with_down(const struct hashlb_table *t, const struct hlb_snapshot *s,
				   const bool *down)
{
	struct hashlb_backend_spec spec[3];
	struct hashlb_table *alone;

	for (uint32_t i = 0; i < 3; i++) {
		spec[i].name = hashlb_table_backend_name(s->table, i);
		spec[i].weight = hashlb_table_backend_weight(s->table, i);
		spec[i].down = down[i];
	}
	assert_int_equal(hashlb_table_build(hashlb_table_params(s->table), spec, 3, &alone, NULL),
			 0);
	assert_int_equal(hashlb_table_fingerprint(t), hashlb_table_fingerprint(alone));
	for (uint64_t h = 0; h < 1024; h++)
		assert_int_equal(hashlb_table_lookup(t, h << 54),
				 hashlb_table_lookup(alone, h << 54));
	hashlb_table_free(alone);
}

/*
 * A Maglev backend failing connects across snapshots (another backend's verdict, a ramp step:
 * each snapshot before its own verdict makes a retry table): the first retry table populates
 * the survivors, and the next snapshot's, given the one it replaces, shares its slots (the
 * effective and the kept survivors') instead of populating them again (about 0.5 s at the
 * largest M, each snapshot); the same for the retry-ramp table. Its answers are those of the
 * table without the failing backend, after the one it shares with is freed, and it holds the
 * same bytes as one made without it. Before, each snapshot populated them again.
 */
static void test_retry_table_shares_the_previous(void **state)
{
	struct hlb_snapshot *s1, *s2, *s3;
	struct three f;
	bool failing[3] = { false, true, false }, both[3] = { false, true, true };
	uint64_t fp, fp_both;

	three_backends(&f);
	assert_int_equal(hlb_snapshot_rebuild(NULL, &f.sc, f.b, 1, &s1, NULL), 0);
	populations = 0;
	hlb_snapshot_add_retry(s1, failing, NULL);
	hlb_snapshot_add_retry_ramp(s1, both, NULL);
	assert_non_null(s1->retry_table);
	assert_non_null(s1->retry_ramp_table);
	assert_int_equal(populations, 2); /* the survivors of b, and of b and c */
	fp = hashlb_table_fingerprint(s1->retry_table);
	fp_both = hashlb_table_fingerprint(s1->retry_ramp_table);

	/* the next snapshot, b still failing: without s1, both populated again */
	assert_int_equal(hlb_snapshot_refresh(s1, &f.sc, 2, &s3, NULL), 0);
	populations = 0;
	hlb_snapshot_add_retry(s3, failing, NULL);
	hlb_snapshot_add_retry_ramp(s3, both, NULL);
	assert_int_equal(populations, 2);
	/* with it: none */
	assert_int_equal(hlb_snapshot_refresh(s1, &f.sc, 3, &s2, NULL), 0);
	populations = 0;
	hlb_snapshot_add_retry(s2, failing, s1);
	hlb_snapshot_add_retry_ramp(s2, both, s1);
	if (populations)
		fail_msg("retry tables from the previous snapshot's: %u populations", populations);
	/* the effective and the kept slots shared, the full ones too: nothing more held */
	assert_int_equal(hashlb_table_bytes_shared(s2->retry_table, s1->retry_table), 3 * 2 * 251);
	assert_int_equal(hashlb_table_bytes_shared(s2->retry_ramp_table, s1->retry_ramp_table),
			 3 * 2 * 251);
	assert_int_equal(hashlb_table_bytes(s2->retry_table), hashlb_table_bytes(s3->retry_table));
	assert_int_equal(hashlb_table_bytes(s2->retry_ramp_table),
			 hashlb_table_bytes(s3->retry_ramp_table));
	hlb_snapshot_free(s1);
	hlb_snapshot_free(s3);
	assert_int_equal(hashlb_table_fingerprint(s2->retry_table), fp);
	assert_int_equal(hashlb_table_fingerprint(s2->retry_ramp_table), fp_both);
	/* the table built with b down: the same answers */
	assert_built_with_down(s2->retry_table, s2, failing);
	hlb_snapshot_free(s2);
	three_free(&f);
}

/*
 * A reload between two snapshots while b fails connects: of another seed, another table size,
 * another weight (a's, or b's own), the previous snapshot's retry table is of another full
 * table, and the new retry table takes none of its slots: it is the build of the new config
 * with b down, answer for answer, after the previous snapshot is freed. A reload that changes
 * nothing the table depends on (the same config again) keeps the full table and shares them.
 */
static void test_retry_table_after_a_reload(void **state)
{
	bool failing[3] = { false, true, false };

	for (int change = 0; change < 5; change++) {
		struct hlb_snapshot *s1, *s2;
		struct three f;

		three_backends(&f);
		assert_int_equal(hlb_snapshot_rebuild(NULL, &f.sc, f.b, 1, &s1, NULL), 0);
		hlb_snapshot_add_retry(s1, failing, NULL);
		assert_non_null(s1->retry_table);
		if (change == 0)
			f.sc.table.seed ^= 1;
		else if (change == 1)
			f.sc.table.maglev_m = 257;
		else if (change < 4)
			f.b[change - 2]->weight = 3;
		assert_int_equal(hlb_snapshot_rebuild(s1, &f.sc, f.b, 2, &s2, NULL), 0);
		hlb_snapshot_add_retry(s2, failing, s1);
		assert_non_null(s2->retry_table);
		if (change < 4)
			assert_int_equal(
				hashlb_table_bytes_shared(s2->retry_table, s1->retry_table), 0);
		else
			assert_int_equal(
				hashlb_table_bytes_shared(s2->retry_table, s1->retry_table),
				3 * 2 * 251);
		hlb_snapshot_free(s1);
		assert_built_with_down(s2->retry_table, s2, failing);
		hlb_snapshot_free(s2);
		three_free(&f);
	}
}

static void test_counters_sum_over_workers(void **state)
{
	struct hashlb_backend_cfg bc;
	struct hlb_backend_counters c;
	struct hlb_backend *b;

	backend_cfg(&bc, "a", 1);
	assert_int_equal(hlb_backend_new(&bc, 3, &b), 0);
	hlb_stat_add(&b->wstats[0].bytes_in, 100);
	hlb_stat_add(&b->wstats[2].bytes_in, 23);
	hlb_stat_add(&b->wstats[1].connect_fail, 2);
	hlb_stat_add(&b->wstats[1].connect_timeout, 1);
	hlb_stat_add(&b->wstats[0].established, 5);
	atomic_fetch_add(&b->active, 4);
	hlb_backend_counters_read(b, &c);
	assert_int_equal(c.bytes_in, 123);
	assert_int_equal(c.connect_fail, 2);
	assert_int_equal(c.connect_timeout, 1);
	assert_int_equal(c.total, 5);
	assert_int_equal(c.active, 4);
	assert_true(hlb_backend_usable(b));
	atomic_store(&b->admin, HASHLB_ADMIN_DRAIN);
	assert_false(hlb_backend_usable(b));
	hlb_backend_unref(b);
}

/* Client <k> of a small universe, a whole canonical address: ::ffff:10.x.y.z. */
static void client_addr(uint32_t k, struct hlb_client_key *key)
{
	uint8_t *addr = key->addr;

	memset(addr, 0, 16);
	addr[10] = addr[11] = 0xff;
	addr[12] = 10;
	addr[13] = (uint8_t)(k >> 16);
	addr[14] = (uint8_t)(k >> 8);
	addr[15] = (uint8_t)k;
	key->keep = 128;
}

/*
 * hlb_clients against a plain array of counts, over random claims and
 * releases (a fixed seed) of 1,000 clients in a table made for 16: every
 * shard grows, collides, wraps and fills, deletions shift runs back. The
 * counts always agree; a claim refuses exactly at the limit; a shard full
 * at its largest counts nothing and says so.
 */
static void test_clients_match_a_reference(void **state)
{
	enum { N = 1000, LIMIT = 3, OPS = 200000 };
	static uint32_t ref[1000];
	struct hlb_clients *t;
	uint64_t x = 0x2545f4914f6cdd1dull, live = 0, full = 0;
	struct hlb_client_key addr;

	(void)state;
	memset(ref, 0, sizeof(ref));
	assert_int_equal(hlb_clients_new(16, &t), 0);
	for (uint32_t op = 0; op < OPS; op++) {
		uint32_t k;
		int r;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		k = (uint32_t)(x % N);
		client_addr(k, &addr);
		if (x & (1ull << 40) && ref[k]) {
			hlb_clients_release(t, &addr);
			live -= --ref[k] == 0;
		} else {
			r = hlb_clients_claim(t, &addr, LIMIT);
			if (ref[k] >= LIMIT) {
				assert_int_equal(r, 0);
			} else if (ref[k] > 0) {
				assert_int_equal(r, 1);
				ref[k]++;
			} else if (r == -ENOSPC) {
				full++;
			} else {
				assert_int_equal(r, 1);
				ref[k] = 1;
				live++;
			}
		}
		assert_int_equal(hlb_clients_count(t, &addr), ref[k]);
		if (op % 1000 == 0) {
			for (uint32_t j = 0; j < N; j++) {
				client_addr(j, &addr);
				assert_int_equal(hlb_clients_count(t, &addr), ref[j]);
			}
			assert_int_equal(hlb_clients_size(t), live);
		}
	}
	assert_true(full > 0); /* the full-shard case did happen */

	/* the top 10: most first, each count the client's own, the 10 largest counts */
	{
		struct hlb_client_count top[10];
		uint32_t sorted[1000], got = hlb_clients_top(t, 10, top);

		memcpy(sorted, ref, sizeof(sorted));
		for (uint32_t i = 0; i < 10; i++) /* partial selection sort, descending */
			for (uint32_t j = i + 1; j < N; j++)
				if (sorted[j] > sorted[i]) {
					uint32_t v = sorted[i];

					sorted[i] = sorted[j];
					sorted[j] = v;
				}
		assert_int_equal(got, 10);
		for (uint32_t i = 0; i < got; i++) {
			const uint8_t *a = top[i].key.addr;
			uint32_t k = (uint32_t)a[13] << 16 | (uint32_t)a[14] << 8 | a[15];

			assert_int_equal(top[i].count, ref[k]);
			assert_int_equal(top[i].count, sorted[i]);
		}
	}
	hlb_clients_free(t);
}

/*
 * client_prefix: a key is an address and the bits kept of it, so the same
 * bytes under two lengths (a reload changed the prefix while connections of
 * the first stayed open) are two clients, each released under its own.
 */
static void test_clients_key_length(void **state)
{
	struct hlb_client_key whole, cut;
	struct hlb_clients *t;

	(void)state;
	assert_int_equal(hlb_clients_new(16, &t), 0);
	client_addr(0x000100, &whole); /* 10.0.1.0 */
	cut = whole;
	cut.keep = 120; /* 10.0.1.0/24 */
	assert_int_equal(hlb_clients_claim(t, &whole, 1), 1);
	assert_int_equal(hlb_clients_claim(t, &whole, 1), 0);
	assert_int_equal(hlb_clients_claim(t, &cut, 1), 1);
	assert_int_equal(hlb_clients_size(t), 2);
	hlb_clients_release(t, &whole);
	assert_int_equal(hlb_clients_count(t, &whole), 0);
	assert_int_equal(hlb_clients_count(t, &cut), 1);
	hlb_clients_release(t, &cut);
	assert_int_equal(hlb_clients_size(t), 0);
	hlb_clients_free(t);
}

struct clients_thread {
	struct hlb_clients *t;
	uint32_t id;
};

static void *clients_worker(void *arg)
{
	struct clients_thread *ct = arg;
	struct hlb_client_key addr;

	for (uint32_t i = 0; i < 100000; i++) {
		client_addr((i * 7 + ct->id) % 50, &addr);
		if (hlb_clients_claim(ct->t, &addr, 1000) == 1)
			hlb_clients_release(ct->t, &addr);
	}
	return NULL;
}

/* Four threads claiming and releasing the same clients: nothing left over. */
static void test_clients_threads(void **state)
{
	struct clients_thread ct[4];
	pthread_t th[4];
	struct hlb_clients *t;

	(void)state;
	assert_int_equal(hlb_clients_new(1000, &t), 0);
	for (uint32_t i = 0; i < 4; i++) {
		ct[i] = (struct clients_thread){ t, i };
		assert_int_equal(pthread_create(&th[i], NULL, clients_worker, &ct[i]), 0);
	}
	for (uint32_t i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(hlb_clients_size(t), 0);
	hlb_clients_free(t);
}

/*
 * max_connection_rate's count (GCRA) on a clock of our own: a burst of one
 * second's worth at once, then one per step; a connection over the rate
 * is counted all the same and lengthens the pause it asks for; an idle
 * second refills the burst, and no more than that.
 */
static void test_rate_take(void **state)
{
	const uint64_t s = 1000000000u, t0 = 5 * s, step = s / 10;
	struct hlb_service *svc;

	(void)state;
	assert_int_equal(hlb_service_new("t", 1, &svc), 0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(hlb_service_rate_take(svc, 10, t0), 0); /* the burst */
	/* the 11th: over, and counted (it takes the place due at t0 + step):
	 * the next fits two steps from now */
	assert_int_equal(hlb_service_rate_take(svc, 10, t0), 2 * step);
	/* a 12th right away pushes that to three; a 13th at t0 + 2 steps
	 * finds the place due at t0 + 3 taken: two more steps */
	assert_int_equal(hlb_service_rate_take(svc, 10, t0), 3 * step);
	assert_int_equal(hlb_service_rate_take(svc, 10, t0 + 2 * step), 2 * step);
	/* after a pause as long as asked, the next one is within the rate */
	assert_int_equal(hlb_service_rate_take(svc, 10, t0 + 4 * step), 0);
	/* a steady 10 per second passes, 20 per second does not */
	for (int i = 1; i <= 50; i++)
		assert_int_equal(hlb_service_rate_take(svc, 10, t0 + (4 + i) * step), 0);
	assert_int_not_equal(hlb_service_rate_take(svc, 10, t0 + 54 * step + step / 2), 0);
	/* idle for a minute: a full burst again, and not one more */
	for (int i = 0; i < 10; i++)
		assert_int_equal(hlb_service_rate_take(svc, 10, t0 + 60 * s), 0);
	assert_int_equal(hlb_service_rate_take(svc, 10, t0 + 60 * s), 2 * step);
	hlb_service_unref(svc);
}

/*
 * A reload that changes max_connection_rate applies at once. Raised: the
 * connections taken over the old rate are owed at the new one (four over
 * a rate of 1 a second: 4 ms at 1,000, not 4 s). Lowered: the part of the
 * burst left stays (half of it: 5 more at 10 a second), then the new rate.
 */
static void test_rate_take_rate_changed(void **state)
{
	const uint64_t s = 1000000000u, ms = 1000000u, t0 = 5 * s;
	struct hlb_service *svc;

	(void)state;
	assert_int_equal(hlb_service_new("t", 1, &svc), 0);
	assert_int_equal(hlb_service_rate_take(svc, 1, t0), 0); /* the burst: one */
	for (uint64_t i = 1; i <= 4; i++)
		assert_int_equal(hlb_service_rate_take(svc, 1, t0), (i + 1) * s);
	/* 4 ms owed at 1,000 a second, and one more step: the pause asked */
	assert_int_equal(hlb_service_rate_take(svc, 1000, t0), 6 * ms);
	hlb_service_unref(svc);

	assert_int_equal(hlb_service_new("t", 1, &svc), 0);
	for (int i = 0; i < 500; i++)
		assert_int_equal(hlb_service_rate_take(svc, 1000, t0), 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(hlb_service_rate_take(svc, 10, t0), 0);
	assert_int_equal(hlb_service_rate_take(svc, 10, t0), 200 * ms);
	hlb_service_unref(svc);
}

struct rate_thread {
	struct hlb_service *svc;
	uint64_t now;
	int within;
};

static void *rate_worker(void *arg)
{
	struct rate_thread *rt = arg;

	for (int i = 0; i < 1000; i++)
		rt->within += hlb_service_rate_take(rt->svc, 500, rt->now) == 0;
	return NULL;
}

/* Four threads at one instant: exactly the burst (500) is within the rate. */
static void test_rate_take_threads(void **state)
{
	struct rate_thread rt[4];
	pthread_t th[4];
	struct hlb_service *svc;
	int within = 0;

	(void)state;
	assert_int_equal(hlb_service_new("t", 1, &svc), 0);
	for (int i = 0; i < 4; i++) {
		rt[i] = (struct rate_thread){ svc, 1000000000u, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, rate_worker, &rt[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		within += rt[i].within;
	}
	assert_int_equal(within, 500);
	hlb_service_unref(svc);
}

struct rate_mixed {
	struct hlb_service *svc;
	uint32_t rate;
	int n;
	uint64_t worst; /* the longest pause asked */
};

static void *rate_mixed_worker(void *arg)
{
	struct rate_mixed *rm = arg;

	for (int i = 0; i < rm->n; i++) {
		uint64_t wait = hlb_service_rate_take(rm->svc, rm->rate, 1000000000u);

		if (wait > rm->worst)
			rm->worst = wait;
	}
	return NULL;
}

/*
 * A reload raised the rate from 1 to 1,000 a second while a worker still
 * counts with the old one (it read its snapshot before the reload): each of
 * its takes scales what is owed back to seconds, and the next take at the
 * new rate scales it down again. A take at the new rate never pauses for
 * more than every connection so far owes at the new rate; with the time
 * and the step changed apart, one could find the time scaled up and the
 * step already the new one, and pause for what the old rate owed (seconds).
 */
static void test_rate_take_old_rate_beside_new(void **state)
{
	const uint64_t ms = 1000000u;
	struct rate_mixed rm[3];
	pthread_t th[3];
	struct hlb_service *svc;

	(void)state;
	for (int round = 0; round < 1000; round++) {
		assert_int_equal(hlb_service_new("t", 1, &svc), 0);
		for (int i = 0; i < 3; i++) {
			rm[i] = (struct rate_mixed){ svc, i ? 1000 : 1, i ? 3000 : 300, 0 };
			assert_int_equal(pthread_create(&th[i], NULL, rate_mixed_worker, &rm[i]),
					 0);
		}
		for (int i = 0; i < 3; i++)
			pthread_join(th[i], NULL);
		/* 6,300 takes at most, a step of the new rate each */
		assert_true(rm[1].worst <= 6302 * ms);
		assert_true(rm[2].worst <= 6302 * ms);
		hlb_service_unref(svc);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rcu_waits_for_online_readers),
		cmocka_unit_test(test_rcu_going_offline_is_quiescent),
		cmocka_unit_test(test_snapshot_refresh_and_publish),
		cmocka_unit_test(test_snapshot_tables_bytes),
		cmocka_unit_test(test_snapshot_tables_bytes_only_snapshots),
		cmocka_unit_test(test_return_keeps_the_outage_table),
		cmocka_unit_test(test_flap_beside_an_idle_backup_copies),
		cmocka_unit_test(test_refresh_from_retry_table_beside_a_weight0_change),
		cmocka_unit_test(test_retry_table_shares_the_previous),
		cmocka_unit_test(test_retry_table_after_a_reload),
		cmocka_unit_test(test_counters_sum_over_workers),
		cmocka_unit_test(test_clients_match_a_reference),
		cmocka_unit_test(test_clients_key_length),
		cmocka_unit_test(test_clients_threads),
		cmocka_unit_test(test_rate_take),
		cmocka_unit_test(test_rate_take_rate_changed),
		cmocka_unit_test(test_rate_take_threads),
		cmocka_unit_test(test_rate_take_old_rate_beside_new),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
