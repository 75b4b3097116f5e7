/* SPDX-License-Identifier: MIT */
/*
 * Kernel steering, user-space side: load the XDP/tc programs of bpf/, attach
 * them to an interface, and feed them VIPs and a core table. The programs
 * forward TCP packets for a VIP to a backend by L2 direct server return
 * (docs/DESIGN-steering.md). Built without BPF (meson -Dbpf=disabled) every
 * function returns -EOPNOTSUPP with a message saying so.
 *
 * Tables are written without torn reads: the maps hold two halves, the
 * inactive one is written, then the active index flips in one update, then
 * a barrier waits until no program still reads the old half.
 */
#ifndef HASHLB_STEER_H
#define HASHLB_STEER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "hashlb/error.h"
#include "hashlb/steer_shared.h"
#include "hashlb/table.h"
#include "hashlb/tuple.h"

enum hashlb_steer_mode {
	HASHLB_STEER_AUTO = 0, /* XDP native (not on a veth), else XDP generic, else tc */
	HASHLB_STEER_XDP_NATIVE,
	HASHLB_STEER_XDP_GENERIC,
	HASHLB_STEER_TC, /* clsact ingress */
	HASHLB_STEER_LOAD_ONLY, /* load, attach nothing: tests and benchmarks */
	HASHLB_STEER_MODE_MAX
};

enum hashlb_steer_prog {
	HASHLB_STEER_PROG_XDP = 0,
	HASHLB_STEER_PROG_TC,
	HASHLB_STEER_PROG_PASS,
	HASHLB_STEER_PROG_MAX
};

/* Conntrack entries (--flows, steering_flows): the default, and at most
 * 2^26 buckets (of 64 bytes: 4 GiB). */
#define HASHLB_STEER_FLOWS_DEFAULT 65536u
#define HASHLB_STEER_FLOWS_MAX ((1u << 26) * HLB_STEER_CT_WAYS)

struct hashlb_steer_opts {
	const char *iface; /* NULL with HASHLB_STEER_LOAD_ONLY */
	enum hashlb_steer_mode mode;
	/* Conntrack entries, 1..HASHLB_STEER_FLOWS_MAX; 0 = the default.
	 * Rounded up: hashlb_steer_flows_capacity(). */
	uint32_t flows;
	/* Capacity of one table half; 0 = sized from the first table with room
	 * to grow (updates that do not fit are refused with -E2BIG). */
	uint32_t max_backends;
	uint32_t max_maglev_m;
	uint32_t max_ring_points;
	/* Leave the program attached when freed. Without it the program is
	 * marked as this process's to detach: hashlb_steer_detach() refuses it
	 * while the process lives. */
	bool keep;
	bool bench_new_flows; /* benchmarks only: every packet is a new flow */
	/* Tables the program holds, 1..HASHLB_STEER_TABLES_MAX (0: 1), each of
	 * the capacities above: one a service that hashlb run steers on the
	 * interface, published through its own handle (hashlb_steer_share()).
	 * More than one: an older hashlb cannot drive the program. */
	uint32_t tables;
};

/* Tables a program holds at most (a VIP entry names its table in 8 bits;
 * the tables' backend slots share 16). */
#define HASHLB_STEER_TABLES_MAX 64u

/* Where a backend's frames go, one per backend of the table, same index. */
struct hashlb_steer_dest {
	uint8_t mac[6]; /* the backend's MAC address */
	uint8_t src_mac[6]; /* all zero: the egress interface's own */
	uint32_t ifindex; /* egress interface; 0 = the attached one */
	/* Down in the table but keeps its established flows (draining, in
	 * maint, a backup the others replaced). Such a backend may come with
	 * no MAC (all zero): it keeps the one it was published with, or if it
	 * never was, loses its flows. A backend down without it needs no MAC. */
	bool keep_flows;
};

struct hashlb_steer;

/*
 * Load the programs sized for <first> (may be NULL: defaults) and attach
 * them as <o> says. On success stores the handle in <ret_steer>; the
 * programs pass every packet until hashlb_steer_set_vips() and
 * hashlb_steer_set_table() are called. Returns 0 or -errno with <err> filled.
 */
int hashlb_steer_open(const struct hashlb_steer_opts *o, const struct hashlb_table *first,
		      struct hashlb_steer **ret_steer, struct hashlb_error *err);

/*
 * Open the maps of the hashlb program attached to <iface> (by another
 * process) in <mode> to read its counters or update its table: AUTO takes
 * the one at whichever hook holds one, HASHLB_STEER_XDP_NATIVE the one at
 * the XDP hook (native or generic), another mode that one only. Freeing the
 * handle detaches nothing, unless told not to keep (hashlb_steer_set_keep()).
 * -ENOENT if none is attached (in <mode>); -ENOTUNIQ with AUTO if one is at
 * the XDP hook and one at tc, <err> naming both; -EPROTO if the one there,
 * named as hashlb's, lacks a map this hashlb needs (another hashlb
 * version's), <err> naming it and how to detach it.
 */
int hashlb_steer_find(const char *iface, enum hashlb_steer_mode mode,
		      struct hashlb_steer **ret_steer, struct hashlb_error *err);

/*
 * hashlb_steer_find(), for a program that no process drives any more: one
 * whose hashlb was killed (SIGKILL, a crash) or a hashlb steer --keep that
 * exited. -EBUSY if another process holds its maps open (a live hashlb
 * drives it), -ENOENT if no hashlb program is attached to <iface> (in
 * <mode>), -ENOTUNIQ if two are (AUTO), -EPROTO if it is another hashlb
 * version's.
 */
int hashlb_steer_adopt(const char *iface, enum hashlb_steer_mode mode,
		       struct hashlb_steer **ret_steer, struct hashlb_error *err);

/*
 * hashlb_steer_find(), for an upgrade: the program on <iface> that process
 * <pid> (the hashlb this one replaces, still running) drives, at whichever
 * hook, with its conntrack table and so its established flows. Of two, one
 * at the XDP hook and one at tc, the XDP one may be another's (attached by
 * hand, an orphan): taking it would leave <pid>'s to be detached when <pid>
 * exits, its flows' entries with it. Returns 0; 1 if another hashlb program
 * is at the other hook, <err> naming both (left as it is); -ENOENT if <pid>
 * drives none there (then, as for any start, one no process drives:
 * hashlb_steer_adopt()).
 */
int hashlb_steer_find_driven(const char *iface, pid_t pid, struct hashlb_steer **ret_steer,
			     struct hashlb_error *err);

/*
 * The other hashlb program on <iface>, at the hook <s>'s is not at (one at
 * the XDP hook and one at tc): its mode, id, and the process other than this
 * one that drives it (holds its maps: it refuses a --detach), 0 if none, -1
 * if not known (its maps unreadable, another version's). -ENOENT if there is
 * none.
 */
int hashlb_steer_other(struct hashlb_steer *s, const char *iface, enum hashlb_steer_mode *ret_mode,
		       uint32_t *ret_id, pid_t *ret_holder);

/*
 * Whether hashlb_steer_free() leaves the program attached. Opened handles
 * start as hashlb_steer_opts.keep says, found ones kept. A found handle not
 * kept detaches the program it found, if that one is still attached: a
 * hashlb that took the program over from the one it replaces owns it.
 */
void hashlb_steer_set_keep(struct hashlb_steer *s, bool keep);

/*
 * <abort>(<arg>), asked by hashlb_steer_set_table() once the table is
 * written and before it is put in force: true, and the table in force stays,
 * -ECANCELED. NULL (the default): never asked.
 */
void hashlb_steer_set_abort(struct hashlb_steer *s, bool (*abort)(void *arg), void *arg);

/*
 * Whether <s>'s program is still the one attached to the interface it was
 * attached to (opened) or found on: false once that interface is gone (a
 * program leaves with its interface; one created again under the name is
 * another, with no program) or another program took its place.
 */
bool hashlb_steer_attached(struct hashlb_steer *s);

/* The conntrack hash's seed of <s>'s program (hlb_steer_ct_hash), random
 * at each load: for tests that compute a flow's bucket. 0 for a found one. */
uint64_t hashlb_steer_ct_seed(const struct hashlb_steer *s);

/*
 * Whether <s>'s program tells a client's SYN from a reused tuple (its entry
 * naming a backend that takes no new flow: scheduled by the table) from one
 * whose conntrack tag matched a live flow's by chance (left on its entry).
 * Always, for a program this hashlb loaded. One an older hashlb loaded and
 * this one took over does not, and may even send every such SYN back to the
 * draining backend, until it is attached again: attaching it again here
 * would start an empty conntrack table and move every flow the table has
 * moved since it began.
 */
bool hashlb_steer_reads_ext(const struct hashlb_steer *s);

/*
 * Whether another process holds <s>'s maps open: it drives the program (a
 * hashlb that took it over, a hashlb steer in the foreground). A hashlb that
 * handed its sockets over keeps the program attached only then: one the new
 * process did not take over (its config no longer steers that service, or
 * steers it on another interface) would go on steering with the last table,
 * driven by nobody.
 */
bool hashlb_steer_driven_elsewhere(struct hashlb_steer *s);

/*
 * Mark <s> as driven by hashlb run (hashlb_steer_daemon() tells it to any
 * process that finds the program): its tables are the daemon's to publish.
 * Takes the publication lock as hashlb_steer_set_table() does. Returns 0 or
 * -errno with <err> filled.
 */
int hashlb_steer_set_daemon(struct hashlb_steer *s, struct hashlb_error *err);

/* Whether a hashlb run marked <s>'s program as its own (set_daemon). */
bool hashlb_steer_daemon(struct hashlb_steer *s);

/*
 * -EBUSY if a live hashlb run drives <s>'s program on <iface>: marked by
 * hashlb_steer_set_daemon(), its maps held by another process. <err> then
 * says "the program on '<iface>' is driven by hashlb run (process PID):
 * <remedy>". 0 if <s> is NULL, unmarked, an orphan (its daemon killed) or
 * its holder cannot be read. Shared by hashlb steer --update and
 * hashlb_steer_detach().
 */
int hashlb_steer_check_driver(struct hashlb_steer *s, const char *iface, const char *remedy,
			      struct hashlb_error *err);

/* Detach (unless kept) and release. Accepts NULL. */
void hashlb_steer_free(struct hashlb_steer *s);

/*
 * A second handle on <s>'s program that publishes its table <table> (below
 * hashlb_steer_tables()): its own VIPs (hashlb_steer_set_vips() and
 * hashlb_steer_close_vips() change only the table's, and refuse one another
 * table's has, -EEXIST), its own table and backends, flipped alone: the
 * other tables' flows and new flows go on as they were. The program and its
 * counters are shared; freeing the handle detaches nothing (<s>'s does,
 * unless kept). Returns 0 or -errno with <err> filled.
 */
int hashlb_steer_share(struct hashlb_steer *s, uint32_t table, struct hashlb_steer **ret_steer,
		       struct hashlb_error *err);
/*
 * Replace <s>'s program by one of <o>->tables tables (no fewer than it has) of
 * <o>'s capacities (max_backends, max_maglev_m, max_ring_points: each no
 * smaller than <s>'s is kept), at once and in its place: a program of one
 * table to one of several (a reload adds a second service on the interface),
 * or one whose table outgrew its sizes (a reload, a resolve_every, a weight
 * set). The new program shares its VIPs, its conntrack table (and its seed)
 * and its counters, and every table (both halves, its backend slots, its
 * counters and name) is copied into it, so every established flow keeps its
 * backend and no packet finds no program. <s> then drives the new one (its
 * new tables empty, for hashlb_steer_share()); the other handles of its
 * tables are moved to it by hashlb_steer_rebind(). It holds the publication
 * lock from the copy to the swap: -EAGAIN or -ETIMEDOUT as a publication
 * while another holds it (hashlb_steer_set_lock_try()). On failure
 * (-EOPNOTSUPP for nothing to grow or an older hashlb's program; -E2BIG past the
 * caps, or past HLB_STEER_BREGIONS_MAX regions of backend slots) <s>'s program
 * serves on as it was. The backend slots conntrack entries name stay where they
 * are: a program of several tables whose backends grow gets a region of slots
 * appended (struct hlb_steer_bregion), which an older hashlb refuses. Returns 0
 * or -errno with <err> filled.
 */
int hashlb_steer_grow(struct hashlb_steer *s, const struct hashlb_steer_opts *o,
		      struct hashlb_error *err);
/* The capacities of each table of <s>'s program: backends, Maglev M (rounded up to whole
 * values of slots) and ring points. */
void hashlb_steer_caps(const struct hashlb_steer *s, uint32_t *ret_backends, uint32_t *ret_maglev_m,
		       uint32_t *ret_points);
/* Whether <s> loaded its program (hashlb_steer_open(), or it grew it): not one found nor
 * hashlb_steer_share()'s, which hashlb_steer_rebind() moves to a program that replaced it. */
bool hashlb_steer_loaded(const struct hashlb_steer *s);
/*
 * Make <h>, a handle of a table of the program <s> replaced (hashlb_steer_share()'s, or one
 * found), publish that table into <s>'s program: its maps, capacities and program. Its
 * copies of the old halves are forgotten. 0 or -errno with <err> (-EINVAL: <h> loaded a
 * program, or is of another interface, or its table is not one of <s>'s).
 */
int hashlb_steer_rebind(struct hashlb_steer *h, const struct hashlb_steer *s,
			struct hashlb_error *err);
/* The tables <s>'s program holds (hashlb_steer_opts.tables; 1 for one an
 * older hashlb loaded). */
uint32_t hashlb_steer_tables(const struct hashlb_steer *s);
/* The table <s> publishes (0 unless shared or told: hashlb_steer_use_table()). */
uint32_t hashlb_steer_table(const struct hashlb_steer *s);
/* The table of <s>'s program whose VIPs in force hold <vip>, or -ENOENT (none: one
 * of a single table holds none but table 0), or -errno. */
int hashlb_steer_vip_table(struct hashlb_steer *s, const struct sockaddr_storage *vip);
/* Make <s> publish table <table> of its program (below hashlb_steer_tables()):
 * a program taken over, its services' tables where they were. 0 or -errno. */
int hashlb_steer_use_table(struct hashlb_steer *s, uint32_t table);
/* Whether the VIPs in force of <s>'s program name table <table>. */
bool hashlb_steer_table_serves(struct hashlb_steer *s, uint32_t table);
/*
 * Name <s>'s table (hashlb_steer_table(); of a program of one table, its one) in its
 * program: <name>, the service's, at most HLB_STEER_TNAME_MAX bytes, that
 * hashlb_steer_table_name() reads without the config (hashlb steer --stats), and a
 * program that replaces this one (hashlb_steer_grow()) is given. 0 (also for an older
 * hashlb's program, which has no names; one whose names are of another size is not found:
 * hashlb_steer_find()), -ENAMETOOLONG, or -errno.
 */
int hashlb_steer_set_name(struct hashlb_steer *s, const char *name);
/*
 * hashlb_steer_set_name() of a hashlb steer, not hashlb run: under the publication lock,
 * refused (-EBUSY, <err> as hashlb_steer_check_driver() with <remedy>) where a live hashlb run
 * has marked <s>'s program its own (hashlb_steer_set_daemon(), under that lock, before it
 * names its table), since the check the caller made before it published: that hashlb run's
 * name stands. Before, a hashlb steer --update of an orphan's table racing a daemon taking it
 * over could write its name over the daemon's, written once: --stats named the daemon's table
 * none until it restarted. 0, or -errno with <err>.
 */
int hashlb_steer_set_name_unowned(struct hashlb_steer *s, const char *name, const char *iface,
				  const char *remedy, struct hashlb_error *err);
/*
 * The name of table <table> of <s>'s program (hashlb_steer_set_name()'s, "" if none was
 * given: a hashlb steer's) into <ret_name> (<len> bytes, HLB_STEER_TNAME_MAX + 1 for any).
 * The table's, whether or not it serves a VIP now (hashlb_steer_table_serves()). 0,
 * -EOPNOTSUPP for a program an older hashlb loaded (no names), or -errno.
 */
int hashlb_steer_table_name(struct hashlb_steer *s, uint32_t table, char *ret_name, size_t len);
/* Whether freeing <s> leaves its program attached (hashlb_steer_set_keep()). */
bool hashlb_steer_kept(const struct hashlb_steer *s);

/* Detach hashlb's program from <iface> in <mode> (told as hashlb_steer_find()
 * tells it: -ENOTUNIQ with AUTO if there are two, and neither is detached):
 * -ENOENT if none; someone else's is left attached; -EBUSY if a live
 * hashlb run drives it (hashlb_steer_set_daemon(), its maps held open), or
 * the live process that attached it without keep (a foreground hashlb
 * steer) will detach it itself. */
int hashlb_steer_detach(const char *iface, enum hashlb_steer_mode mode, struct hashlb_error *err);

/*
 * hashlb_steer_set_vips() and hashlb_steer_set_table() take turns with any
 * other publication into the same program, this process's or another's: each
 * holds a lock for its duration (an flock on /run/hashlb/steer-<map id>.lock),
 * waiting 2 s at most for another holder: -ETIMEDOUT then, its process named,
 * and nothing changes. Where the lock file cannot be made, the publication
 * runs unlocked: hashlb_steer_unlocked() says why (NULL after one that
 * locked).
 */
const char *hashlb_steer_unlocked(const struct hashlb_steer *s);

/*
 * With <try_only>, the publications of <s> (set_vips, set_table, set_daemon,
 * grow) do not wait for the lock: one try, and -EAGAIN if another holds it
 * (<err> naming it), the table in force kept; -ETIMEDOUT, as a publication that
 * waited, once the tries that found it held, each at most 2 s after the one
 * before, span 2 s. For hashlb run, whose control thread must not stop:
 * it tries again later. The default waits.
 */
void hashlb_steer_set_lock_try(struct hashlb_steer *s, bool try_only);

/* Serve exactly these <n> VIPs (AF_INET or AF_INET6 with a non-zero port).
 * The conntrack entries of a VIP that leaves the program are cleared. */
int hashlb_steer_set_vips(struct hashlb_steer *s, const struct sockaddr_storage *vips, uint32_t n,
			  struct hashlb_error *err);
/*
 * Serve these <n> VIPs (those hashlb_steer_set_vips() gave, at the same
 * indexes) closed (HLB_STEER_VIP_F_CLOSED): their established flows go on
 * by their conntrack entries, every other packet to them (a SYN included)
 * is passed to the stack. For a stop that drains the kernel path's flows.
 * -EOPNOTSUPP (nothing changed) if the program is an older hashlb's, which
 * ignores the flag: hashlb_steer_reads_closed().
 */
int hashlb_steer_close_vips(struct hashlb_steer *s, const struct sockaddr_storage *vips, uint32_t n,
			    struct hashlb_error *err);
/* Whether <s>'s program reads HLB_STEER_VIP_F_CLOSED (its hlb_stats2 has closed_passed). */
bool hashlb_steer_reads_closed(const struct hashlb_steer *s);

/*
 * Publish <t> (its effective table, health overlay included) hashed by
 * <key> over the client address cut to <prefix> (NULL: whole addresses),
 * with dests[i] for backend i. Writes the inactive half, flips, waits
 * until no program reads the old half, then updates per-backend state, so
 * established flows of backends that are down (and not keeping them) or gone
 * are rescheduled. -E2BIG if <t> is larger than the program's maps, which
 * cannot grow (its backends, ring points, Maglev M); nothing changes then.
 * A table that fits goes in even if only the slots of backends it drops are
 * left for its new ones: each such slot passes to its new backend once <t>
 * is in force, with the next incarnation, so until then the dropped
 * backend's flows keep it and none goes to the other.
 */
int hashlb_steer_set_table(struct hashlb_steer *s, const struct hashlb_table *t,
			   enum hashlb_key key, const struct hashlb_src_prefix *prefix,
			   const struct hashlb_steer_dest *dests, struct hashlb_error *err);
/*
 * The same, but the slots of the <n_held> backends <held_names> that <t> drops (a reload
 * removed them, and they drain) stay theirs, as published, taking no new flow: their
 * established flows keep them, as a drained backend's do. A backend of <t> takes such a slot
 * only when no other is left. A later table without them in <held_names> frees their slots.
 */
int hashlb_steer_set_table_holding(struct hashlb_steer *s, const struct hashlb_table *t,
				   enum hashlb_key key, const struct hashlb_src_prefix *prefix,
				   const struct hashlb_steer_dest *dests,
				   const char *const *held_names, uint32_t n_held,
				   struct hashlb_error *err);

/*
 * Forget what <s>'s table halves hold: hashlb_steer_set_table() keeps a copy
 * of each half's arrays and writes only the elements that differ (a
 * program found starts unknown, one loaded all zero); after this, the next
 * table into each half is written whole, as every one was before. What the
 * benchmark measures against (bench/steer_publish.c).
 */
void hashlb_steer_tables_unknown(struct hashlb_steer *s);

/*
 * Whether every table of <p>'s scheme over backends <names> at <weights>, <backup>
 * or not (<n> each), fits the maps <s>'s program was loaded with, which cannot
 * grow, whichever are up: 0, else -E2BIG with <err> saying what the largest
 * needs and what the program has (the ring's points: V x the weights of the
 * backends in the table, at most every primary or every backup; Maglev's M; the
 * backends, however many of them are new: those of the table in the kernel
 * that it drops give their slots up). hashlb_steer_set_table() refuses a
 * table that does not fit.
 */
int hashlb_steer_table_fits(struct hashlb_steer *s, const struct hashlb_table_params *p,
			    const char *const *names, const uint32_t *weights, const bool *backup,
			    uint32_t n, struct hashlb_error *err);

/* What a table needs of a program's maps, whichever of its backends are up. */
struct hashlb_steer_needs {
	uint32_t backends;
	uint32_t maglev_m; /* its M: HASHLB_MAGLEV_M_DEFAULT for 0 */
	/* the ring's points: V x the weights of the backends in the table, at most every
	 * primary or every backup; 0 for Maglev (a reload that makes it a ring grows the
	 * program, as any that outgrows it) */
	uint64_t ring_points;
};

/* The needs of a table of <p>'s over backends at <weights>, <backup> or not (<n> each; a NULL
 * <backup>: none is): the one count hashlb_steer_table_fits() checks and hashlb run sizes a
 * program by. */
void hashlb_steer_needs(const struct hashlb_table_params *p, const uint32_t *weights,
			const bool *backup, uint32_t n, struct hashlb_steer_needs *ret);

/*
 * The one sizing rule of a program: <o>'s capacities (max_backends, max_maglev_m,
 * max_ring_points) raised to hold a table of <need> twice over, never below the defaults
 * (256 backends, Maglev's default M, 65,536 ring points; the points at most UINT32_MAX / 8,
 * the ring index's buckets being 32-bit). Called once a table, it sizes a program of several
 * for the largest of each; the caller caps max_backends (a program's tables share
 * conntrack's 16-bit backend slots). hashlb_steer_open() sizes by it from its first table.
 */
void hashlb_steer_size_add(struct hashlb_steer_opts *o, const struct hashlb_steer_needs *need);

/* The counters summed over CPUs. */
int hashlb_steer_stats(struct hashlb_steer *s, struct hlb_steer_stats *ret_stats);

/*
 * Each table's counters (a service's, under hashlb run), summed over CPUs, into
 * <ret_tstats>[t] for t below hashlb_steer_tables(): those a packet counts once its
 * VIP, so its table, is known. Their sum is hashlb_steer_stats()' (but for a program of
 * one table replaced by one of several, hashlb_steer_grow(): what its old program
 * counted during the swap), less what no table counts: passed but closed_passed
 * (a table's passed is its closed_passed), drops of a packet whose port was not read
 * (malformed, fragment). A table's ct_hits are its packets less its new_flows and
 * rst_untracked, these read after the packets: never more than the hits there were, but a
 * later reading may show fewer (more new flows came between its two reads), so a reader
 * that shows it as a counter keeps the highest it showed (run_steer_stats()). Of a program of one
 * table, [0] holds the program's. 0; 1 for a program of several tables an older hashlb loaded that
 * counts each table's packets and bytes alone (the others 0); -EOPNOTSUPP for one that counts none,
 * or -errno.
 */
int hashlb_steer_tables_stats(struct hashlb_steer *s, struct hlb_steer_stats *ret_tstats);
/*
 * Zero the counters of <s>'s table (hashlb_steer_table()) in a program of several
 * tables: what a service that takes a table another had (a service a reload removed, or the
 * replaced hashlb's) counts starts from 0, not from that one's. 0, also where nothing counts
 * them (a program of one table, an older hashlb's), or -errno.
 */
int hashlb_steer_table_stats_clear(struct hashlb_steer *s);

/* Empty the conntrack table (tests). */
int hashlb_steer_flows_clear(struct hashlb_steer *s);
/*
 * The conntrack entries' last-seen times are 16-bit ticks (about 18.6 h of
 * them at HZ=250, 4.7 h at HZ=1000): an entry left idle for one wrap would
 * look fresh to the program's eviction, which would take live flows' entries
 * before it. hashlb_steer_ct_age() sets every entry idle for more than
 * HASHLB_STEER_CT_AGE_MAX ticks to that age, so that run every
 * hashlb_steer_ct_age_period_ms() (HASHLB_STEER_CT_AGE_EVERY ticks) no age
 * reaches the wrap: a long-idle entry stays older than any used since. A scan
 * of the table, as hashlb_steer_flows_count(); a use meanwhile is never
 * undone. The number clamped into *<ret_clamped>. 0 or -errno.
 */
#define HASHLB_STEER_CT_AGE_MAX 0x8000u
/* An entry seen up to this many ticks ahead of the clamp's clock is a live
 * one (the clamp's estimate of the program's tick may lag it), never clamped. */
#define HASHLB_STEER_CT_AHEAD 64u
#define HASHLB_STEER_CT_AGE_EVERY 0x2000u
int hashlb_steer_ct_age(struct hashlb_steer *s, uint32_t *ret_clamped);
/* The same at tick <now> of the program's clock (tests). */
int hashlb_steer_ct_age_at(struct hashlb_steer *s, uint16_t now, uint32_t *ret_clamped);
uint64_t hashlb_steer_ct_age_period_ms(void);
/* Number of conntrack entries (ways in use): a scan of the whole table, about
 * 1 MiB at the default size (docs/steering.md has its cost). */
int hashlb_steer_flows_count(struct hashlb_steer *s, uint32_t *ret_count);
/*
 * The conntrack entries of <s>'s table's VIPs in force (closed or not: those
 * of hashlb_steer_flows_open(), closing or not) into *<ret_table>, a
 * service's own under hashlb run, and every entry in use
 * (hashlb_steer_flows_count(), every service's on the interface) into
 * *<ret_all>: one scan of the whole table, and a read of the VIP map. Of a
 * program of one table (one service's), both are every entry in use, the
 * scan alone. 0 or -errno.
 */
int hashlb_steer_flows_table(struct hashlb_steer *s, uint32_t *ret_table, uint32_t *ret_all);
/*
 * hashlb_steer_flows_table() of every table of <s>'s program at once, in the
 * same scan: <ret_tables>[t] the entries of table t's VIPs in force, for t
 * below hashlb_steer_tables() (of a program of one table, every entry), and
 * every entry in use into *<ret_all>. Whatever handle of the program reads
 * them, one scan a reading serves each service on the interface (each
 * handle's own scan: as many as there are services, and figures from
 * different moments that did not add up to the program's). 0 or -errno.
 */
int hashlb_steer_flows_tables(struct hashlb_steer *s, uint32_t *ret_tables, uint32_t *ret_all);
/* The id of <s>'s program (0: not known to be attached): another program, another id. */
uint32_t hashlb_steer_prog_id(const struct hashlb_steer *s);
/* Whether <a> and <b> are handles of the same program attached (two
 * services' on one interface: hashlb_steer_share()); false for NULL, or a
 * program not known to be attached. */
bool hashlb_steer_same_program(const struct hashlb_steer *a, const struct hashlb_steer *b);
/* What hashlb_steer_flows_open() found. */
struct hashlb_steer_flows {
	uint32_t open; /* entries not marked closing */
	uint32_t closing; /* entries marked closing */
	/* sums of the open and of the closing entries, each with its way and
	 * the time it was last used: a sum changes when one of its entries is
	 * used again (once a tick, about a second), made or removed */
	uint64_t open_used, closing_used;
};

/*
 * The conntrack entries of <s>'s table's VIPs in force (closed or not; of a
 * program of one table, of its VIPs) into <*ret_flows>: those not marked
 * closing (HLB_STEER_CT_CLOSING: the client sent its FIN or RST), every one
 * if the program marks none (an older hashlb's: hashlb_steer_marks_closing()),
 * and the sums that tell whether any was used since. Another table's entries,
 * and those of a VIP that left the program, are not counted. A scan of the
 * whole table, as hashlb_steer_flows_count(). 0 or -errno.
 */
int hashlb_steer_flows_open(struct hashlb_steer *s, struct hashlb_steer_flows *ret_flows);
/*
 * hashlb_steer_flows_open() of every table of <s>'s program at once, in one
 * scan: <ret_flows>[t] table t's, for t below hashlb_steer_tables() (of a
 * program of one table, [0] alone). A stop's drain looks at every draining
 * service of a program with it (each service's own scan: as many scans of
 * the whole table, every look, as services draining). 0 or -errno.
 */
int hashlb_steer_flows_open_tables(struct hashlb_steer *s, struct hashlb_steer_flows *ret_flows);
/* Whether <s>'s program marks entries closing (its hlb_stats2 has ct_closing). */
bool hashlb_steer_marks_closing(const struct hashlb_steer *s);
/* The conntrack entries the table holds at most (its buckets times their
 * ways: --flows rounded up); 0 without BPF. */
uint64_t hashlb_steer_flows_max(const struct hashlb_steer *s);

/* The conntrack entries a program loaded with --flows <flows> (0: the
 * default) holds: HLB_STEER_CT_WAYS times a power of two, at least <flows>. */
uint64_t hashlb_steer_flows_capacity(uint32_t flows);
/* The conntrack map (hlb_ct: struct hlb_steer_ct_bucket by bucket index),
 * borrowed: tests read and age its entries. */
int hashlb_steer_ct_fd(struct hashlb_steer *s);

/* A program's fd, for BPF_PROG_TEST_RUN; -ENOENT from a found handle. */
int hashlb_steer_prog_fd(struct hashlb_steer *s, enum hashlb_steer_prog prog);

/* The mode actually attached (never AUTO). */
enum hashlb_steer_mode hashlb_steer_mode(const struct hashlb_steer *s);

/* The index of the interface <s>'s program is attached to (or was found
 * on), which a rename keeps; 0 if loaded only. */
int hashlb_steer_ifindex(const struct hashlb_steer *s);

/* Whether <s>'s interface is a veth, where native XDP's XDP_TX frames reach the peer only if
 * it runs XDP too, and only with the complete checksums a veth's sender may leave to offload
 * (docs/steering.md, "Modes and hooks"); false if that cannot be told. */
bool hashlb_steer_on_veth(const struct hashlb_steer *s);

/* "auto", "xdp", "xdp-generic", "tc", "none"; NULL if invalid. */
const char *hashlb_steer_mode_name(enum hashlb_steer_mode m);
int hashlb_steer_mode_parse(const char *s, enum hashlb_steer_mode *ret_mode);

/*
 * Counter <i> of <st>, in the order and with the names hashlb steer --stats shows ("packets",
 * "bytes", "new_flows", "ct_hits", "ct_resched", "ct_evicted", "ct_lost", "rst_untracked",
 * "passed", "drop_malformed", ..., "drop_redirect"): its name, its value in *ret_value; NULL past
 * the last one.
 */
const char *hashlb_steer_stats_field(const struct hlb_steer_stats *st, unsigned i,
				     uint64_t *ret_value);
/*
 * The one rule of which counters a table (a service) has as its own, that every reader
 * follows (hashlb_steer_tables_stats(), --stats' table_ rows, /status' service_ members,
 * /metrics' service families). Whether counter <i> of hashlb_steer_stats_field() is one
 * each table counts of its own: every one but passed (a table's is its closed_passed) and
 * the drops counted before a packet's VIP is known (malformed, fragment) or never
 * (redirect: a failed redirect is the kernel's, after the program returned).
 */
bool hashlb_steer_stats_field_tabled(unsigned i);
/*
 * Whether counter <i> of hashlb_steer_stats_field() is shown as a table's own of a program
 * that counts each table's: all its own (<all>), or packets and bytes alone (<all> false: an
 * older hashlb's program that counts those alone, hashlb_steer_tables_stats() 1).
 */
bool hashlb_steer_stats_field_own(unsigned i, bool all);
/* The index hashlb_steer_stats_field() names <name> at, or -ENOENT. */
int hashlb_steer_stats_field_index(const char *name);
/* Whether drop reason <d> is one each table counts of its own (hashlb_steer_stats_field_tabled()
 * of its counter): no-backend and table. */
bool hashlb_steer_drop_tabled(enum hlb_steer_drop d);
/* Of <st>, only what a table counts of its own (hashlb_steer_stats_field_tabled()): the others
 * 0, but passed, which becomes the table's share of it, closed_passed. */
void hashlb_steer_stats_tabled(struct hlb_steer_stats *st);

/* The drop reason's stable name ("malformed", ...). */
const char *hashlb_steer_drop_name(enum hlb_steer_drop d);

/* XXH64(name, 0): a backend's identity in conntrack entries. */
uint64_t hashlb_steer_backend_id(const char *name);

/* Parse "aa:bb:cc:dd:ee:ff"; -EINVAL if not one. */
int hashlb_steer_mac_parse(const char *s, uint8_t ret_mac[6]);

/*
 * The kernel's neighbour table (ARP, NDP), read once a family, on the first
 * lookup of an address of it, and never again: a new one for each table
 * published (before, the whole table was read for each backend: quadratic
 * work in the number of backends). Not thread-safe.
 */
struct hashlb_steer_neigh;

/* An empty one, nothing read yet; NULL if out of memory. */
struct hashlb_steer_neigh *hashlb_steer_neigh_new(void);
void hashlb_steer_neigh_free(struct hashlb_steer_neigh *n);

/*
 * The MAC of IPv4 or IPv6 address <addr> in <n>, on interface <dev> if not
 * NULL. -ENOENT if there is no complete entry (reach the address once first;
 * for an IPv4 address, also when <dev> does not exist: /proc/net/arp names
 * interfaces, and none has that name), -ENODEV if <dev> does not exist for an
 * IPv6 address (rtnetlink gives indexes), -EAFNOSUPPORT for another family,
 * or the error of reading the table.
 */
int hashlb_steer_neigh_mac(struct hashlb_steer_neigh *n, const struct sockaddr_storage *addr,
			   const char *dev, uint8_t ret_mac[6]);

/*
 * Whether IPv4 or IPv6 address <addr> is in a subnet of one of <dev>'s own
 * addresses (getifaddrs; an IPv4 address labelled "eth0:1" is eth0's, as
 * the kernel holds it), so that reaching it once would fill its neighbour
 * entry on <dev>; 1 if so, 0 if not, -errno if that cannot be told (<dev>'s
 * addresses unread). A host on no subnet of <dev> is routed elsewhere and
 * gets no entry there, whatever is sent to it: L2 direct server return cannot
 * reach it. An on-link route with no address on <dev> is not seen.
 */
int hashlb_steer_on_subnet(const struct sockaddr_storage *addr, const char *dev);

/*
 * Ask the kernel to resolve IPv4 or IPv6 address <addr> on interface <dev> (an ARP request or
 * a neighbour solicitation, as a packet sent to it would make; `ip neigh replace ADDR dev DEV
 * use`), so that its entry, missing, is there by the next read: 0 if asked, -ENODEV if <dev>
 * does not exist, -EAFNOSUPPORT for another family, else the kernel's refusal. An entry of
 * another state is probed again, never changed.
 */
int hashlb_steer_neigh_solicit(const struct sockaddr_storage *addr, const char *dev);

/*
 * Whether <addr>'s entry on <dev> is one to ask the kernel for (hashlb_steer_neigh_solicit()):
 * missing from <n>, and <addr> in a subnet of <dev> (hashlb_steer_on_subnet() 1). A routed
 * one gets no entry there, and asking for it would send ARP requests or solicitations for an
 * address off the segment, each retry, and take the MAC of whichever host answers (one that
 * holds the address on another interface, a proxy ARP router) as the backend's. The host's
 * addresses are read once for <n>.
 */
bool hashlb_steer_neigh_missing(struct hashlb_steer_neigh *n, const struct sockaddr_storage *addr,
				const char *dev);

/* What is read for address family <family>'s table, for messages: "/proc/net/arp"... */
const char *hashlb_steer_neigh_source(int family);

/* Whether this build has kernel steering. */
bool hashlb_steer_supported(void);

#endif
