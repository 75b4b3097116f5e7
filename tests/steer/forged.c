// SPDX-License-Identifier: MIT
/*
 * Proves that a program found on the interface (hashlb steer --update, --stats, hashlb run's
 * takeover) whose maps are of sizes this hashlb cannot read safely is refused, -EPROTO, with
 * an error naming the map and what to do, not read past the arrays it is read into: this
 * hashlb's steer.bpf.o loaded by hand (as anyone could), attached in generic XDP to a veth in
 * a network namespace of this process's own, with hlb_tables of more tables than
 * HASHLB_STEER_TABLES_MAX (before, found: each table's figures were then copied past
 * arrays of HASHLB_STEER_TABLES_MAX), hlb_tstats of 32-byte values (read into 16 a CPU),
 * hlb_tstats2 of values shorter than its struct, hlb_tstats2 of fewer entries than
 * tables, hlb_tnames of names of another size (before, taken for none) or of fewer entries
 * than tables (before, found, its table 1 then unnamed: E2BIG), hlb_bslots laid out in
 * regions (a growth's, hlb_bslots_r) two of which are at one index, or one past its tables'
 * slots in a larger map (before, found: a table's publication then wrote another's slot).
 * The program sized as this hashlb sizes it, and one of regions that lay out its slots, is
 * found.
 */
#include <inttypes.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include "helpers.h"

#define IFACE "hlbforge0"

/* How a case sizes the program: <tables> tables, the value size of hlb_tstats and
 * hlb_tstats2 (0: as built), hlb_tstats2's entries (0: <tables>), hlb_tnames' value size
 * (0: as built). */
struct forged {
	const char *what;
	uint32_t tables, tstats_size, tstats2_size, tstats2_entries;
	const char *want[3]; /* in the error; none: found */
	uint32_t tnames_size, tnames_entries; /* 0: as built, <tables> */
};

/* A program of two tables of one backend whose hlb_bslots is laid out in regions (named
 * hlb_bslots_r, of <bslots> entries), <r> in its bslot_regions. */
struct laid_out {
	const char *what;
	struct hlb_steer_bregion r[2];
	uint32_t bslots;
	const char *want; /* in the error; none: found */
};

static void set_entries(struct bpf_object *obj, const char *map, uint32_t n)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, map);

	if (!m || bpf_map__set_max_entries(m, n) < 0) {
		fprintf(stderr, "no map %s to size\n", map);
		exit(1);
	}
}

static void set_value_size(struct bpf_object *obj, const char *map, uint32_t size)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, map);

	if (!m || bpf_map__set_value_size(m, size) < 0) {
		fprintf(stderr, "no map %s to size\n", map);
		exit(1);
	}
}

/*
 * Of a found program <s> (<obj>, hlb_tstats2 of <size>-byte values), table 1's figures as
 * hashlb_steer_tables_stats() reads them from counters the test writes into each CPU's value
 * (the kernel's layout: each CPU's value at round_up(<size>, 8) bytes), whatever <size>: the
 * first hashlb's 96 bytes, this one's, or a newer one's, a counter more (never read).
 */
static void check_read(struct bpf_object *obj, struct hashlb_steer *s, uint32_t size,
		       const char *what)
{
	struct hlb_steer_stats st[HASHLB_STEER_TABLES_MAX];
	int ncpu = libbpf_num_possible_cpus(), fd;
	size_t stride = (size + 7) / 8; /* in counters */
	uint64_t *per, sum = 0;
	uint32_t key = 1;

	fd = bpf_map__fd(bpf_object__find_map_by_name(obj, "hlb_tstats2"));
	per = calloc((size_t)ncpu, stride * 8);
	if (ncpu <= 0 || fd < 0 || !per) {
		fprintf(stderr, "%s: no hlb_tstats2 to write\n", what);
		exit(1);
	}
	for (int c = 0; c < ncpu; c++) {
		uint64_t *v = per + (size_t)c * stride;

		v[0] = (uint64_t)c + 1; /* new_flows */
		v[6] = 10 * ((uint64_t)c + 1); /* ct_closing */
		v[7 + HLB_STEER_DROP_NO_BACKEND] = 100;
		for (size_t i = sizeof(struct hlb_steer_tstats2) / 8; i < size / 8; i++)
			v[i] = 7777; /* a newer hashlb's counter: this one reads none */
		sum += (uint64_t)c + 1;
	}
	if (bpf_map_update_elem(fd, &key, per, BPF_ANY) < 0) {
		perror("writing hlb_tstats2");
		exit(1);
	}
	free(per);
	memset(st, 0, sizeof(st));
	CHECK(hashlb_steer_tables_stats(s, st) == 0 && st[1].new_flows == sum &&
		      st[1].ct_closing == 10 * sum &&
		      st[1].drops[HLB_STEER_DROP_NO_BACKEND] == 100 * (uint64_t)ncpu &&
		      st[0].new_flows == 0 && st[0].ct_closing == 0,
	      "%s: table 1's figures of %d CPUs' %u-byte values: new_flows %" PRIu64
	      " (want %" PRIu64 "), ct_closing %" PRIu64 ", drop_no_backend %" PRIu64
	      ", table 0's new_flows %" PRIu64,
	      what, ncpu, size, (uint64_t)st[1].new_flows, sum, (uint64_t)st[1].ct_closing,
	      (uint64_t)st[1].drops[HLB_STEER_DROP_NO_BACKEND], (uint64_t)st[0].new_flows);
}

/* <obj>'s hlb_bslots laid out in <l>'s regions, as a growth lays it out (hlb_bslots_r). */
static void regions_forge(struct bpf_object *obj, const struct laid_out *l)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, "hlb_bslots");
	struct hlb_steer_bregion r[HLB_STEER_BREGIONS_MAX] = { 0 };
	int fd = m ? bpf_map_create(BPF_MAP_TYPE_ARRAY, HLB_STEER_BSLOTS_REGIONS_NAME,
				    bpf_map__key_size(m), bpf_map__value_size(m), l->bslots, NULL)
		   : -1;

	if (fd < 0 || bpf_map__reuse_fd(m, fd) < 0) {
		perror("creating map " HLB_STEER_BSLOTS_REGIONS_NAME);
		exit(1);
	}
	close(fd);
	memcpy(r, l->r, sizeof(l->r));
	test_set_rodata(obj, "bslot_regions", r, sizeof(r));
}

/* <f>'s program (<l>'s regions, if any) attached on <ifindex>: found, or refused as <f> wants. */
static void check(const char *obj_path, int ifindex, const struct forged *f,
		  const struct laid_out *l)
{
	struct bpf_object *obj = bpf_object__open_file(obj_path, NULL);
	struct hashlb_error err = { 0 };
	struct hashlb_steer *s = NULL;
	int prog_fd, ret;

	if (!obj) {
		fprintf(stderr, "opening %s failed\n", obj_path);
		exit(1);
	}
	set_entries(obj, "hlb_tables", 2 * f->tables);
	set_entries(obj, "hlb_backends", 2 * f->tables);
	set_entries(obj, "hlb_bslots", f->tables);
	set_entries(obj, "hlb_slots", 2 * f->tables);
	set_entries(obj, "hlb_points", 2 * f->tables);
	set_entries(obj, "hlb_buckets", 2 * f->tables);
	set_entries(obj, "hlb_tstats", f->tables);
	set_entries(obj, "hlb_tstats2", f->tstats2_entries ? f->tstats2_entries : f->tables);
	set_entries(obj, "hlb_tnames", f->tnames_entries ? f->tnames_entries : f->tables);
	if (f->tstats_size)
		set_value_size(obj, "hlb_tstats", f->tstats_size);
	if (f->tstats2_size)
		set_value_size(obj, "hlb_tstats2", f->tstats2_size);
	if (f->tnames_size)
		set_value_size(obj, "hlb_tnames", f->tnames_size);
	if (l)
		regions_forge(obj, l);
	if (bpf_object__load(obj) < 0) {
		fprintf(stderr, "%s: loading %s failed\n", f->what, obj_path);
		exit(1);
	}
	prog_fd = bpf_program__fd(bpf_object__find_program_by_name(obj, "hlb_xdp"));
	if (bpf_xdp_attach(ifindex, prog_fd, XDP_FLAGS_SKB_MODE, NULL) < 0) {
		perror("attaching the program");
		exit(1);
	}
	ret = hashlb_steer_find(IFACE, HASHLB_STEER_AUTO, &s, &err);
	printf("%s: found: %d %s\n", f->what, ret, err.msg);
	if (!f->want[0]) {
		CHECK(ret == 0 && hashlb_steer_tables(s) == f->tables, "%s: not found: %d %s",
		      f->what, ret, err.msg);
		if (ret == 0)
			check_read(obj, s,
				   f->tstats2_size ? f->tstats2_size
						   : (uint32_t)sizeof(struct hlb_steer_tstats2),
				   f->what);
	} else {
		CHECK(ret == -EPROTO, "%s: found: %d, not -EPROTO", f->what, ret);
		for (int i = 0; i < 3 && f->want[i]; i++)
			CHECK(strstr(err.msg, f->want[i]), "%s: no \"%s\" in: %s", f->what,
			      f->want[i], err.msg);
		CHECK(strstr(err.msg, "hashlb steer -i " IFACE " --detach"),
		      "%s: the error says not what removes it: %s", f->what, err.msg);
	}
	if (ret == 0)
		hashlb_steer_free(s); /* a found handle: detaches nothing */
	if (bpf_xdp_detach(ifindex, XDP_FLAGS_SKB_MODE, NULL) < 0) {
		perror("detaching the program");
		exit(1);
	}
	bpf_object__close(obj);
}

int main(int argc, char **argv)
{
	char many[64];
	const struct forged cases[] = {
		{ "as this hashlb sizes it", 2, 0, 0, 0, { NULL }, 0 },
		/* an older hashlb's: the first with hlb_tstats2 (a newer hashlb, its struct
		 * grown, must still find it), and a newer one's, a counter more */
		{ "hlb_tstats2 of the first hashlb's 96-byte values",
		  2,
		  0,
		  HLB_STEER_TSTATS2_SIZE_MIN,
		  0,
		  { NULL },
		  0 },
		{ "hlb_tstats2 of a newer hashlb's values, a counter more",
		  2,
		  0,
		  (uint32_t)sizeof(struct hlb_steer_tstats2) + 8,
		  0,
		  { NULL },
		  0 },
		{ "hlb_tstats2 of values not whole counters",
		  2,
		  0,
		  HLB_STEER_TSTATS2_SIZE_MIN + 4,
		  0,
		  { "map 'hlb_tstats2' of 100-byte values, not 96 or more 8-byte counters" },
		  0 },
		{ "more tables",
		  HASHLB_STEER_TABLES_MAX + 1,
		  0,
		  0,
		  0,
		  { "holds 65 tables (map 'hlb_tables')", many },
		  0 },
		{ "hlb_tstats of 32-byte values",
		  2,
		  32,
		  0,
		  0,
		  { "map 'hlb_tstats' of 32-byte values, not 16" },
		  0 },
		{ "hlb_tstats2 of 8-byte values",
		  2,
		  0,
		  8,
		  0,
		  { "map 'hlb_tstats2' of 8-byte values" },
		  0 },
		{ "hlb_tstats2 of one entry",
		  2,
		  0,
		  0,
		  1,
		  { "map 'hlb_tstats2' of 1 entry, fewer than its 2 tables" },
		  0 },
		/* another version's names, longer or shorter: refused, not taken for none (its
		 * tables then kept that version's services' names under this one's) */
		{ "hlb_tnames of 128-byte values",
		  2,
		  0,
		  0,
		  0,
		  { "map 'hlb_tnames' of 128-byte values, not 64" },
		  128 },
		{ "hlb_tnames of 32-byte values",
		  2,
		  0,
		  0,
		  0,
		  { "map 'hlb_tnames' of 32-byte values, not 64" },
		  32 },
		/* a table past its names is not named: refused as hlb_tstats2's short of tables
		 * (before: found, and naming table 1 failed, E2BIG) */
		{ "hlb_tnames of one entry",
		  2,
		  0,
		  0,
		  0,
		  { "map 'hlb_tnames' of 1 entry, fewer than its 2 tables" },
		  0,
		  1 },
	};
	const struct laid_out laid[] = {
		/* a growth's layout: table 1's slot after table 0's */
		{ "backend slot regions", { { 0, 0, 1, 0, 1 }, { 1, 1, 2, 0, 1 } }, 2, NULL },
		/* both tables' slot at index 0: one table's publication would take the other's
		 * flows (before: found) */
		{ "backend slot regions over each other",
		  { { 0, 0, 1, 0, 1 }, { 0, 1, 2, 0, 1 } },
		  2,
		  "backend slot region (1) out of its 2 tables of 1, or over another" },
		/* table 1's slot at index 3 of a map of 4, past the tables' 2 (before: found, and
		 * an incarnation wrap's scan wrote past its array of 2) */
		{ "a backend slot region past the tables' slots",
		  { { 0, 0, 1, 0, 1 }, { 3, 1, 2, 0, 1 } },
		  4,
		  "backend slot region (1) out of its 2 tables of 1" },
	};

	if (argc != 2) {
		fprintf(stderr, "usage: steer-forged STEER.bpf.o\n");
		return 2;
	}
	_Static_assert(HASHLB_STEER_TABLES_MAX == 64, "the cases' figures");
	snprintf(many, sizeof(many), "more than the %u a program holds", HASHLB_STEER_TABLES_MAX);
	test_netns_veth(IFACE, "hlbforge1");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check(argv[1], (int)if_nametoindex(IFACE), &cases[i], NULL);
	for (size_t i = 0; i < sizeof(laid) / sizeof(laid[0]); i++) {
		const struct forged f = { laid[i].what, 2, 0, 0, 0, { laid[i].want }, 0, 0 };

		check(argv[1], (int)if_nametoindex(IFACE), &f, &laid[i]);
	}
	printf("forged: a program of more tables than a hashlb's, of per-table counters or "
	       "names of other sizes, or of backend slot regions over each other, refused with "
	       "the map named\n");
	return test_failures ? 1 : 0;
}
