// SPDX-License-Identifier: MIT
/* hashlb steer: kernel steering of a VIP to backends by XDP or tc. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "control/buf.h"
#include "hashlb/config.h"
#include "hashlb/steer.h"
#include "hashlb/tuple.h"
#include "runtime/signals.h"
#include "table_args.h"

#define VIPS_MAX 16

/* --help gives --flows' range as a number */
_Static_assert(HASHLB_STEER_FLOWS_MAX == 402653184u, "--flows N in usage()");

static void usage(FILE *f)
{
	fprintf(f,
		"NAME\n"
		"  hashlb steer - steer a VIP's TCP packets to backends in the kernel (XDP/tc)\n"
		"\n"
		"SYNOPSIS\n"
		"  hashlb steer -i IFACE --vip ADDR:PORT... -b BACKEND... [OPTIONS]\n"
		"  hashlb steer -i IFACE --update [--mode MODE] --vip ADDR:PORT... -b BACKEND...\n"
		"               [OPTIONS]\n"
		"  hashlb steer -c FILE [--service NAME] [-i IFACE] [--update] [OPTIONS]\n"
		"  hashlb steer -i IFACE --stats [--mode MODE] [--json]\n"
		"  hashlb steer -c FILE [--service NAME] --stats [--mode MODE] [--json]\n"
		"  hashlb steer -i IFACE --detach [--mode MODE]\n"
		"  hashlb steer -c FILE [--service NAME] --detach [--mode MODE]\n"
		"\n"
		"DESCRIPTION\n"
		"  Attaches hashlb's BPF program to IFACE. TCP packets arriving there for a\n"
		"  VIP are hashed exactly as hashlb's user-space forwarder hashes them, looked\n"
		"  up in the same consistent-hash table (ring or Maglev) and sent to the\n"
		"  chosen backend by L2 direct server return: only the Ethernet addresses are\n"
		"  rewritten, the backend must hold the VIP on its loopback and answers the\n"
		"  client directly. Connection tracking keeps established flows on their\n"
		"  backend when the table changes; flows of a backend that is down or removed\n"
		"  are rescheduled, flows of a draining backend are kept. Every other packet\n"
		"  goes to the kernel's stack untouched. See docs/steering.md.\n"
		"\n"
		"  Without --keep, hashlb steer stays in the foreground and detaches the\n"
		"  program when it receives SIGINT, SIGTERM, SIGQUIT or SIGHUP (its\n"
		"  terminal closed); it says and ignores SIGUSR1 and SIGUSR2 (one sent\n"
		"  while it starts, once it has attached). With --keep it attaches, fills\n"
		"  the tables and exits, leaving the program attached (SIGUSR1 and SIGUSR2\n"
		"  said and ignored, as by --update);\n"
		"  --update, --stats and --detach then act on it. One of those four\n"
		"  signals before it has attached ends it with nothing attached (SIGQUIT\n"
		"  as SIGTERM does: no core dump; as PID 1 of a container, exit 128 + the\n"
		"  signal's number), --keep or not. One of SIGINT, SIGQUIT or SIGHUP\n"
		"  inherited ignored (nohup, a script's background job) stays ignored;\n"
		"  SIGTERM always detaches.\n"
		"\n"
		"OPTIONS\n"
		"  -i, --iface IFACE          the interface receiving the VIP's traffic\n"
		"                             (required without -c, whose service's\n"
		"                             interface it overrides)\n"
		"      --vip ADDR:PORT        a service address, [V6]:PORT for IPv6; repeatable\n"
		"  -b, --backend SPEC         a backend, repeatable; SPEC is\n"
		"                             NAME=IP[,mac=MAC][,weight=N][,dev=IFACE]\n"
		"                             NAME is its identity (hashed for placement); the\n"
		"                             MAC is read from the neighbour (ARP) table when\n"
		"                             not given (an entry missing asked of the kernel,\n"
		"                             waited for 1 s); dev is the egress interface\n"
		"                             (default IFACE)\n" TABLE_ARGS_USAGE
		"      --drain A,B,...        backends draining: no new flows, established kept\n"
		"                             (given again, it adds to them)\n"
		"  -c, --config FILE          take the VIP (listen), scheme, seed, key (and its\n"
		"                             hash_prefix), backends\n"
		"                             (weights, admin state, backups), interface and\n"
		"                             steering_flows from the service of FILE that has\n"
		"                             steering: kernel, as\n"
		"                             hashlb run builds its table (--down and --drain\n"
		"                             apply; table options, --key and the prefix\n"
		"                             options are refused)\n"
		"                             (with --stats: only to name each table's service,\n"
		"                             any number of them; IFACE theirs by default)\n"
		"      --service NAME         with --config: this service instead\n" KEY_ARGS_USAGE
		"      --mode MODE            auto (default: XDP native, else tc, else XDP\n"
		"                             generic; tc on a veth), xdp, xdp-generic or tc;\n"
		"                             with --update, --stats, --detach: the program at\n"
		"                             that hook (xdp: native or generic), needed when\n"
		"                             one is at the XDP hook and one at tc\n"
		"      --flows N              connection-tracking entries, 1..402653184 (default\n"
		"                             65536, or -c's steering_flows; sets of 6, least\n"
		"                             recently seen evicted)\n"
		"      --max-backends N       backends an --update may grow to (default\n"
		"                             max(256, 2 x backends))\n"
		"      --max-ring-points N    ring points an --update may grow to (default\n"
		"                             max(65536, 2 x points))\n"
		"      --max-maglev-m M       Maglev size an --update may grow to (default\n"
		"                             max(65537, M))\n"
		"      --keep                 leave the program attached and exit\n"
		"      --update               replace the table of the program attached to IFACE\n"
		"                             (not one a live hashlb run drives)\n"
		"      --stats                print the program's counters\n"
		"  -j, --json                 with --stats: print JSON\n"
		"      --detach               detach the program attached to IFACE (not one a\n"
		"                             live hashlb run or foreground hashlb steer drives)\n"
		"  -h, --help                 show this text\n"
		"\n"
		"BACKENDS\n"
		"  Each backend must be on IFACE's layer-2 segment (or dev=), hold the VIP on\n"
		"  its loopback and not answer ARP for it:\n"
		"    ip addr add VIP/32 dev lo\n"
		"    sysctl -w net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2\n"
		"\n"
		"COUNTERS (--stats)\n"
		"  packets, bytes    TCP packets to a VIP forwarded, and their frame bytes\n"
		"  new_flows         flows scheduled through the table\n"
		"  ct_hits           packets forwarded by their connection-tracking entry\n"
		"  ct_resched        flows whose backend went down or away, rescheduled\n"
		"  ct_evicted        new flows that took another flow's entry (one that\n"
		"                    ended, or a live one: see ct_lost)\n"
		"  ct_lost           packets past a flow's SYN that found no entry: evicted\n"
		"                    while the flow lived; over 0, raise --flows\n"
		"  rst_untracked     RSTs that found no entry: forwarded by the table (in\n"
		"                    packets), no entry made; not in new_flows nor ct_lost\n"
		"  passed            packets handed to the stack (not for a VIP, not TCP)\n"
		"  closed_passed     of those, packets to a VIP that hashlb run's stop closed\n"
		"                    (new connections, flows with no entry): the stack\n"
		"                    refuses them while the established flows drain\n"
		"  ct_closing        flows whose client's FIN or RST marked their entry\n"
		"                    closing (hashlb run's stop drains until all are)\n"
		"  drop_malformed    TCP to a VIP with a truncated or invalid header, or\n"
		"                    cut short (its IP length past the frame)\n"
		"  drop_fragment     IP fragments of TCP to a VIP address\n"
		"  drop_no_backend   every backend is down\n"
		"  drop_table        inconsistent table (a bug: please report)\n"
		"  drop_redirect     always 0: a redirect fails, if it does, after the\n"
		"                    program has returned, where it cannot count it\n"
		"  flows, flows_max  conntrack entries in use (flows seen, until evicted:\n"
		"                    it climbs to flows_max and stays), and at most\n"
		"                    (--flows rounded up), as hashlb ctl status has them\n"
		"  table_flows       of a program of several tables (hashlb run's services\n"
		"                    sharing IFACE, a table each), each table's entries:\n"
		"                    those of its VIPs, a service's conntrack_entries\n"
		"  table_packets,    each table's share of packets and bytes: a service's\n"
		"  table_bytes       packets_total and bytes_total (not of an older\n"
		"                    hashlb's program, which counts none)\n"
		"  table_new_flows,  each table's share of the other counters counted once\n"
		"  table_ct_hits ... the packet's VIP is known (a service's own /metrics):\n"
		"                    all but passed (a table's are its closed_passed) and\n"
		"                    drop_malformed, drop_fragment, drop_redirect (not of an\n"
		"                    older hashlb's program, which counts none)\n"
		"  table_services    each table's service: the name hashlb run (or hashlb\n"
		"                    steer -c FILE) gave it, or with -c FILE the service\n"
		"                    of FILE whose listen address it serves; - (JSON null)\n"
		"                    for none, or a table that serves no VIP (a service\n"
		"                    named - is shown \"-\"); of a program of one table,\n"
		"                    service\n"
		"\n"
		"EXIT STATUS\n"
		"  0 on success, 1 on failure (the reason is printed: FILE does not load,\n"
		"  hashlb was built without kernel steering (said before a MAC is looked\n"
		"  for), the kernel refuses, a backend has no MAC, no program is\n"
		"  attached, or two are and --mode names neither),\n");
	fputs(CLI_EXIT_USAGE_HELP, f);
	fprintf(f,
		"  Among them: a malformed -b SPEC, an option that the action does not\n"
		"  take (--json without --stats, --keep with --update, --vip with\n"
		"  --detach), two actions at once (--stats --update), a --down,\n"
		"  --drain or --service name that names nothing.\n"
		"\n" CLI_ERRORS_HELP "EXAMPLES\n"
		"  hashlb steer -i eth0 --vip 192.0.2.10:80 --scheme maglev \\\n"
		"      -b web1=198.51.100.11 -b web2=198.51.100.12,weight=2\n"
		"  hashlb steer -i eth0 --stats\n"
		"  hashlb steer -c /etc/hashlb/hashlb.yaml --stats\n",
		"steer", "-S or --seed", CLI_ERRORS_CONFIG_LIST, "steer");
}

struct backend_arg {
	char *name;
	struct sockaddr_storage addr;
	struct hashlb_steer_dest dest;
	bool have_mac;
	char dev[IF_NAMESIZE]; /* dev=, or "" */
};

static int parse_addr(const char *s, struct sockaddr_storage *ret)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, s, &((struct sockaddr_in *)&ss)->sin_addr) == 1)
		ss.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, s, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1)
		ss.ss_family = AF_INET6;
	else
		return -EINVAL;
	*ret = ss;
	return 0;
}

/* "ADDR:PORT" or "[V6]:PORT" with a non-zero port. */
static int parse_vip(const char *s, struct sockaddr_storage *ret)
{
	struct hashlb_tuple t;
	struct sockaddr_storage ss;
	uint16_t port;

	/* no zone: a VIP is matched by its address alone, on every interface */
	if (!strrchr(s, ':') || strchr(s, '%') || hashlb_tuple_parse_src(s, &t) < 0)
		return -EINVAL;
	port = (uint16_t)(t.sport[0] << 8 | t.sport[1]);
	if (port == 0)
		return -EINVAL;
	memset(&ss, 0, sizeof(ss));
	if (memcmp(t.src, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0 && s[0] != '[') {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, t.src + 12, 4);
		sin->sin_port = htons(port);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, t.src, 16);
		sin6->sin6_port = htons(port);
	}
	*ret = ss;
	return 0;
}

/* Whether <mac> can name a backend: not all zero (which the loader reads as
 * "none given"), nor the broadcast address (every host on the segment, each
 * backend holding the VIP, would take the flow's packets). */
static bool mac_names_one(const uint8_t mac[6])
{
	static const uint8_t zero[6], bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

	return memcmp(mac, zero, 6) != 0 && memcmp(mac, bcast, 6) != 0;
}

/*
 * NAME=IP[,mac=MAC][,weight=N][,dev=IFACE], the <nth> -b: -EINVAL (printed) if malformed, a
 * usage error.
 */
static int parse_backend(const char *arg, uint32_t nth, struct backend_arg *b, uint32_t *ret_weight)
{
	char *copy = strdup(arg), *eq, *ip, *opt, *save = NULL, why[256];
	uint64_t w = 1;
	int ret = -EINVAL;

	if (!copy)
		return -ENOMEM;
	eq = strchr(copy, '=');
	if (!eq || eq == copy) {
		cli_error("backend '%s': expected NAME=IP[,mac=MAC][,weight=N][,dev=IFACE]\n", arg);
		goto out;
	}
	*eq = '\0';
	/* as the config's, hashlb table's and lookup's: named by its place, a
	 * newline in it would break the line */
	if (!hashlb_backend_name_ok(copy)) {
		cli_error("backend %u: a name must be " HASHLB_BACKEND_NAME_RULE "\n", nth);
		goto out;
	}
	ip = strtok_r(eq + 1, ",", &save);
	if (!ip || parse_addr(ip, &b->addr) < 0) {
		cli_error("backend '%s': invalid IP address\n", copy);
		goto out;
	}
	while ((opt = strtok_r(NULL, ",", &save))) {
		if (strncmp(opt, "mac=", 4) == 0 &&
		    hashlb_steer_mac_parse(opt + 4, b->dest.mac) == 0 &&
		    mac_names_one(b->dest.mac)) {
			b->have_mac = true;
		} else if (strncmp(opt, "weight=", 7) == 0 &&
			   cli_parse_u64(opt + 7, HASHLB_WEIGHT_MAX, &w) == 0) {
		} else if (strncmp(opt, "dev=", 4) == 0) {
			/* as -i IFACE: "lo:1" would be lo to the kernel */
			if (hashlb_ifname_refusal(opt + 4, why, sizeof(why))) {
				cli_error("backend '%s': dev %s\n", copy, why);
				goto out;
			}
			strcpy(b->dev, opt + 4);
		} else {
			cli_error("backend '%s': invalid option '%s' (mac=MAC of one host, "
				  "weight=0..%u, dev=IFACE)\n",
				  copy, opt, HASHLB_WEIGHT_MAX);
			goto out;
		}
	}
	b->name = strdup(copy);
	if (!b->name) {
		ret = -ENOMEM;
		goto out;
	}
	*ret_weight = (uint32_t)w;
	ret = 0;
out:
	free(copy);
	return ret;
}

/* Whether <ret> of hashlb_steer_neigh_mac() says the table has no entry. */
static bool neigh_missing(int ret)
{
	return ret == -ENOENT || ret == -ENODEV;
}

/*
 * <b>'s MAC into b->dest.mac from <neigh>, on <dev>: 0 or -errno. An error of
 * reading the table (not an entry missing) is said here, once a family (bits
 * of <said>), naming what could not be read: it is no backend's, and reaching
 * one would not help (it was said once a backend, then "no MAC address").
 */
static int neigh_lookup(struct backend_arg *b, const char *dev, struct hashlb_steer_neigh *neigh,
			unsigned *said)
{
	int ret = hashlb_steer_neigh_mac(neigh, &b->addr, dev, b->dest.mac);
	unsigned bit = b->addr.ss_family == AF_INET6 ? 2 : 1;

	if (ret < 0 && !neigh_missing(ret) && !(*said & bit)) {
		*said |= bit;
		cli_error("reading the neighbour table (%s): %s\n",
			  hashlb_steer_neigh_source(b->addr.ss_family), strerror(-ret));
	}
	return ret;
}

/*
 * Whether <b>'s address is in none of <dev>'s subnets, said as its having no
 * MAC (<address>: as the config writes it, else NULL): reaching it makes no
 * neighbour entry on <dev>, and L2 direct server return cannot reach it.
 * Before, "ping it once" or "reach it once first" was said, which could not
 * help (a backend routed, as Katran's IPIP reaches them).
 */
static bool off_subnet(const struct backend_arg *b, const char *address, const char *dev)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (hashlb_steer_on_subnet(&b->addr, dev) != 0)
		return false;
	inet_ntop(b->addr.ss_family,
		  b->addr.ss_family == AF_INET
			  ? (const void *)&((const struct sockaddr_in *)&b->addr)->sin_addr
			  : (const void *)&((const struct sockaddr_in6 *)&b->addr)->sin6_addr,
		  ip, sizeof(ip));
	cli_error("backend '%s'%s%s%s: no MAC address: %s is in none of %s's subnets, so no "
		  "neighbour entry is made for it there: the kernel path reaches only hosts "
		  "on the layer-2 segment of %s (dev=IFACE names another interface; mac=... "
		  "one on it all the same)\n",
		  b->name, address ? " (" : "", address ? address : "", address ? ")" : "", ip, dev,
		  dev);
	return true;
}

/*
 * What the host says of backend <b>: its dev's index, its MAC from <neigh>, the
 * neighbour table of its dev (else <iface>) unless given; -ENOENT (printed)
 * if there is no such dev, or no MAC for a backend in the table; the error
 * of reading the table (printed once a family: <said>) if it fails. One <out> of
 * it (--down, --drain) may have none: its host may be dead, its neighbour
 * entry failed, and the table that takes it out must still go through.
 * Once the command line is known right.
 */
static int resolve_backend(struct backend_arg *b, const char *iface, bool out,
			   struct hashlb_steer_neigh *neigh, unsigned *said)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	const void *a = b->addr.ss_family == AF_INET
				? (const void *)&((struct sockaddr_in *)&b->addr)->sin_addr
				: (const void *)&((struct sockaddr_in6 *)&b->addr)->sin6_addr;

	if (b->dev[0]) {
		/* a name of the host's, not of the command line: as -i IFACE */
		b->dest.ifindex = if_nametoindex(b->dev);
		if (!b->dest.ifindex) {
			cli_error("backend '%s': no interface '%s'\n", b->name, b->dev);
			return -ENOENT;
		}
	}
	if (!b->have_mac) {
		int ret = neigh_lookup(b, b->dev[0] ? b->dev : iface, neigh, said);

		b->have_mac = ret == 0;
		if (ret < 0 && !neigh_missing(ret) && !out)
			return ret; /* said */
	}
	if (!b->have_mac && !out) {
		inet_ntop(b->addr.ss_family, a, ip, sizeof(ip));
		if (!off_subnet(b, NULL, b->dev[0] ? b->dev : iface))
			/* asked of the kernel and waited for (neigh_asked()): before, "e.g.
			 * ping it once" was said, which asks it the same again */
			cli_error("backend '%s': no MAC address: give mac=..., or make the "
				  "neighbour entry exist first (%s answered no ARP request or "
				  "neighbour solicitation in a second: its host down?)\n",
				  b->name, ip);
		return -ENOENT;
	}
	return 0;
}

/* What print_stats() prints of each table of a program. */
struct table_figures {
	uint32_t n; /* tables: 2 or more for a program of several */
	const uint32_t *flows; /* each table's conntrack entries */
	/* each table's counters (hashlb_steer_tables_stats()), NULL if the program counts
	 * none (an older hashlb's of several tables); <tstats_all>: all of them, else
	 * packets and bytes alone (one of an older hashlb still) */
	const struct hlb_steer_stats *tstats;
	bool tstats_all;
	const char *const *services; /* each table's service (-c), NULL if none named */
};

/* Table service <name> as the text shows it: - for none (NULL), and a service named "-"
 * (a valid name) quoted, "-", so that it does not read as none. */
static const char *service_text(const char *name)
{
	return !name ? "-" : strcmp(name, "-") ? name : "\"-\"";
}

/* A row of each table's <field> (its name <name>, in text padded to <width>): text, or a
 * JSON list. <field>: -2 the conntrack entries, -1 the service, else
 * hashlb_steer_stats_field()'s index. */
static void print_table_row(const struct table_figures *t, const char *name, int width, int field,
			    bool json)
{
	uint64_t v;

	if (json)
		printf(",\"%s\":[", name);
	else
		printf("%-*s", width, name);
	for (uint32_t i = 0; i < t->n; i++) {
		const char *sep = json ? (i ? "," : "") : " ";

		if (field == -2)
			printf("%s%" PRIu32, sep, t->flows[i]);
		else if (field >= 0 && hashlb_steer_stats_field(&t->tstats[i], (unsigned)field, &v))
			printf("%s%" PRIu64, sep, v);
		else if (!json)
			printf("%s%s", sep, service_text(t->services[i]));
		else if (t->services[i]) {
			printf("%s", sep);
			cli_print_json_string(t->services[i]);
		} else
			printf("%snull", sep);
	}
	printf(json ? "]" : "\n");
}

/* One figure of print_stats(): a JSON member, or a line, its name padded to <width>. */
static void print_stat(const char *name, int width, uint64_t v, bool json)
{
	if (json)
		printf(",\"%s\":%" PRIu64, name, v);
	else
		printf("%-*s %" PRIu64 "\n", width, name, v);
}

/* The counters, then the conntrack table's occupancy, <flows> entries in use of
 * <flows_max>: named as hashlb ctl's /status names them (before, only there); of a
 * program of several tables (<t>->n 2 or more: a daemon's services sharing the
 * interface), each table's entries (its VIPs' in force: what hashlb run's /metrics
 * counts for the service of table t), packets and bytes, and service if named (of a
 * program of one table: its service, if named). */
static void print_stats(const char *iface, enum hashlb_steer_mode mode,
			const struct hlb_steer_stats *st, uint32_t flows, uint64_t flows_max,
			const struct table_figures *t, bool json)
{
	const char *name;
	char row[64];
	uint64_t v;
	/* the names' column: as wide as the longest, so that the figures start in one column
	 * (before, table_rst_untracked, table_closed_passed and table_drop_no_backend pushed
	 * theirs past the others') */
	int width = 16;

	for (unsigned i = 0; t->n > 1 && t->tstats && (name = hashlb_steer_stats_field(st, i, &v));
	     i++)
		if (hashlb_steer_stats_field_own(i, t->tstats_all) && (int)strlen(name) + 6 > width)
			width = (int)strlen(name) + 6; /* "table_" */

	if (json)
		printf("{\"interface\":\"%s\",\"mode\":\"%s\"", iface,
		       hashlb_steer_mode_name(mode));
	else
		printf("interface %s (%s)\n", iface, hashlb_steer_mode_name(mode));
	for (unsigned i = 0; (name = hashlb_steer_stats_field(st, i, &v)); i++)
		print_stat(name, width, v, json);
	print_stat("flows", width, flows, json);
	print_stat("flows_max", width, flows_max, json);
	if (t->n > 1) {
		print_table_row(t, "table_flows", width, -2, json);
		/* each counter a table has its own of: packets and bytes, then (not of
		 * an older hashlb's program) the others */
		for (unsigned i = 0; t->tstats && (name = hashlb_steer_stats_field(st, i, &v));
		     i++) {
			if (!hashlb_steer_stats_field_own(i, t->tstats_all))
				continue;
			snprintf(row, sizeof(row), "table_%s", name);
			print_table_row(t, row, width, (int)i, json);
		}
		if (t->services)
			print_table_row(t, "table_services", width, -1, json);
	} else if (t->services && t->services[0]) {
		if (json) {
			printf(",\"service\":");
			cli_print_json_string(t->services[0]);
		} else {
			printf("%-*s %s\n", width, "service", service_text(t->services[0]));
		}
	}
	if (json)
		printf("}\n");
}

enum action { ACT_RUN, ACT_UPDATE, ACT_STATS, ACT_DETACH };

struct steer_args {
	struct table_args table;
	const char *iface;
	char *drain; /* every --drain's names, comma-separated */
	enum hashlb_key key;
	struct hashlb_src_prefix prefix; /* hash_prefix */
	enum action action;
	bool json;
	struct hashlb_steer_opts opts;
	struct sockaddr_storage vips[VIPS_MAX];
	uint32_t n_vips;
	struct backend_arg *backends;
	uint32_t n_backends;
	const char *config_path;
	const char *service;
	struct hashlb_config *config;
	const struct hashlb_service_cfg *svc; /* of config, with -c */
};

/* The signals that end a foreground hashlb steer, detaching: SIGHUP too, as
 * when its terminal or ssh session closes, and SIGQUIT (Ctrl-\ at it): by
 * default either would kill the process and leave the program steering with
 * a table nobody drives. SIGUSR1 and SIGUSR2 are taken too, said and
 * ignored, as hashlb run says and ignores SIGUSR1 (a log rotation's): by
 * default they kill it the same way. */
static void stop_signals(sigset_t *ret_set)
{
	sigemptyset(ret_set);
	sigaddset(ret_set, SIGINT);
	sigaddset(ret_set, SIGTERM);
	sigaddset(ret_set, SIGHUP);
	sigaddset(ret_set, SIGQUIT);
	sigaddset(ret_set, SIGUSR1);
	sigaddset(ret_set, SIGUSR2);
	/* one inherited ignored stays ignored once attached, as while it started
	 * (cli_start_signals()): blocked, sigwait() took it even so, and nohup's
	 * hashlb steer detached when its terminal closed */
	hlb_sigset_del_ignored(ret_set);
}

/*
 * A stop signal, or 0 once <s>'s program is no longer attached: it went with
 * its interface (deleted, or created again under the name: a new one has no
 * program), or another took its place. Before, the process went on waiting,
 * steering nothing; exiting lets a supervisor start it again. Asked every
 * 2 s.
 */
static int wait_for_signal(struct hashlb_steer *s)
{
	const struct timespec tick = { .tv_sec = 2 };
	sigset_t set;
	int sig;

	stop_signals(&set);
	for (;;) {
		sig = sigtimedwait(&set, NULL, &tick);
		if (sig == SIGUSR1 || sig == SIGUSR2)
			cli_notice("SIG%s ignored: SIGINT, SIGTERM, SIGQUIT or SIGHUP detach\n",
				   sigabbrev_np(sig));
		else if (sig > 0)
			return sig;
		else if (errno == EAGAIN && !hashlb_steer_attached(s))
			return 0;
	}
}

/* One of <set>, blocked, pending: taken; 0 if none. */
static int signal_pending(const sigset_t *set)
{
	const struct timespec now = { 0 };
	int sig = sigtimedwait(set, NULL, &now);

	return sig > 0 ? sig : 0;
}

/*
 * A stop signal (SIGINT, SIGTERM, SIGQUIT, SIGHUP) pending, taken; 0 if none.
 * While they are blocked.
 */
static int stop_pending(void)
{
	sigset_t set;

	stop_signals(&set);
	sigdelset(&set, SIGUSR1);
	sigdelset(&set, SIGUSR2);
	return signal_pending(&set);
}

/*
 * An --update's or a --keep's SIGUSR1 and SIGUSR2, held since main() (cmd_steer()) and
 * blocked since: said and ignored as the foreground steer says them, each once (they do not
 * queue), before it exits. They went with it unsaid, where one sent before they were held
 * killed it, nothing done.
 */
static void say_user_signals(void)
{
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	for (int i = 0; i < 2 && (sig = signal_pending(&set)); i++)
		cli_notice("SIG%s ignored\n", sigabbrev_np(sig));
}

/* hashlb_steer_set_abort()'s question for an --update: told to stop (the
 * signal taken into *<arg>)? */
static bool update_stopped(void *arg)
{
	int *sig = arg;

	*sig = stop_pending();
	return *sig != 0;
}

/* Build the table, then attach (run) or find (update) and publish. */
static int steer_publish(struct steer_args *a)
{
	struct hashlb_steer_dest *dests = NULL;
	struct hashlb_table *t = NULL;
	struct hashlb_steer *s = NULL;
	struct hashlb_error err = { 0 };
	sigset_t set;
	int ret, sig = 0;

	ret = table_args_build(&a->table, &t, NULL);
	if (ret < 0)
		return 1;
	dests = calloc(a->n_backends, sizeof(*dests));
	if (!dests) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < a->n_backends; i++) {
		dests[i] = a->backends[i].dest;
	}

	/* Signals are taken by sigwait(): blocked before anything is attached
	 * so that SIGINT during set-up still detaches on the way out. */
	stop_signals(&set);
	sigprocmask(SIG_BLOCK, &set, NULL);

	a->opts.iface = a->iface;
	if (a->action == ACT_UPDATE)
		ret = hashlb_steer_find(a->iface, a->opts.mode, &s, &err);
	else
		ret = hashlb_steer_open(&a->opts, t, &s, &err);
	if (ret < 0)
		goto out_err;
	/* A live hashlb run publishes its own tables, from its config and health
	 * checks, and would not know its table was replaced: a backend its checks
	 * took out would get new clients again until its next publication. */
	if (a->action == ACT_UPDATE) {
		ret = hashlb_steer_check_driver(
			s, a->iface, "change its config (and reload) or use hashlb ctl", &err);
		if (ret < 0)
			goto out_err;
	}
	if (a->action == ACT_UPDATE && !hashlb_steer_reads_ext(s))
		cli_notice(
			"note: the program on %s, which an older hashlb attached, may send a "
			"client's new connection from a reused port back to a backend that takes "
			"no new connection (draining, maint, weight 0): detach it and attach "
			"again (its flows start with no conntrack entry) for that\n",
			a->iface);
	/* Told to stop before the table is in force: the old one stays, and
	 * the exit says so. Before, the stop waited, blocked, until the table
	 * had been applied, and the command exited 0. */
	if (a->action == ACT_UPDATE)
		hashlb_steer_set_abort(s, update_stopped, &sig);
	/* Table before VIPs: a VIP is never served by an empty table. */
	ret = hashlb_steer_set_table(s, t, a->key, &a->prefix, dests, &err);
	if (ret == -ECANCELED && sig) {
		cli_error("%s before the table was applied: the program on %s keeps its table\n",
			  strsignal(sig), a->iface);
		goto out;
	}
	if (ret < 0)
		goto out_err;
	ret = hashlb_steer_set_vips(s, a->vips, a->n_vips, &err);
	if (ret < 0)
		goto out_err;
	/* The table is this process's now: named as --stats reads it without the config, the
	 * service of -c FILE, none without. Before, none was written: an --update of an
	 * orphan's kept its dead hashlb run's service's name, and a foreground steer -c FILE
	 * named none. Not where a hashlb run took the program over since the check above: its
	 * name stands, and this says so (exit 1). */
	ret = hashlb_steer_set_name_unowned(
		s, a->svc ? a->svc->name : "", a->iface,
		"it took the program over meanwhile: change its config (and reload) or use hashlb ctl",
		&err);
	if (ret < 0)
		goto out_err;
	/* Forced there (auto takes tc on a veth): without an XDP program on the peer, or with
	 * clients that leave checksums to offload, every steered packet is lost while --stats
	 * counts it forwarded, and nothing said why (tried in namespaces). */
	if (a->action == ACT_RUN && hashlb_steer_mode(s) == HASHLB_STEER_XDP_NATIVE &&
	    hashlb_steer_on_veth(s))
		cli_notice("note: %s is a veth: native XDP's frames reach its peer only if the "
			   "peer runs an XDP program, and a backend drops those whose checksums a "
			   "client on a veth left to offload; --mode tc (auto's choice here) needs "
			   "neither (docs/steering.md, \"Modes and hooks\")\n",
			   a->iface);
	if (hashlb_steer_unlocked(s))
		cli_notice("note: published without the lock that keeps publications into the "
			   "program on %s apart (%s): one another process makes at the same moment "
			   "could mix with it\n",
			   a->iface, hashlb_steer_unlocked(s));
	printf("hashlb steer: %s %s on %s (%s), %u VIP%s, %u backend%s (%u up), %s, key %s, "
	       "table %016" PRIx64,
	       a->action == ACT_UPDATE ? "updated" : "attached", "steering", a->iface,
	       hashlb_steer_mode_name(hashlb_steer_mode(s)), a->n_vips, hlb_plural(a->n_vips),
	       a->n_backends, hlb_plural(a->n_backends), hashlb_table_up_count(t),
	       hashlb_scheme_name(hashlb_table_scheme(t)), hashlb_key_name(a->key),
	       hashlb_table_fingerprint(t));
	if (!hashlb_src_prefix_is_whole(&a->prefix))
		printf(", clients by prefix: IPv4 /%u, IPv6 /%u", a->prefix.v4, a->prefix.v6);
	printf("\n");
	fflush(stdout);
	if (a->action == ACT_RUN && a->opts.keep) {
		/* told to stop while it attached: not left attached */
		sig = stop_pending();
		if (sig) {
			hashlb_steer_set_keep(s, false);
			printf("hashlb steer: %s, detaching from %s\n", strsignal(sig), a->iface);
			fflush(stdout); /* before the netlink calls of the detach */
		}
	} else if (a->action == ACT_RUN) {
		sig = wait_for_signal(s);
		if (sig == 0) {
			cli_error("the program on %s is gone: the interface went away, or another "
				  "program took its place\n",
				  a->iface);
			ret = -ENODEV;
			goto out;
		}
		printf("hashlb steer: %s, detaching from %s\n", strsignal(sig), a->iface);
		fflush(stdout); /* before the netlink calls of the detach */
	}
	ret = 0;
	goto out;
out_err:
	cli_print_error(&err);
out:
	if (a->action == ACT_UPDATE || a->opts.keep)
		say_user_signals();
	hashlb_steer_free(s);
	hashlb_table_free(t);
	free(dests);
	return ret < 0 ? 1 : 0;
}

/* <names>[t]: the name hashlb run gave table t of <s>'s program (hashlb_steer_set_name(),
 * into <buf>[t]) where the table serves a VIP in force (of a program of one table: where
 * it serves any), NULL where it serves none or has no name (a hashlb steer's, an older
 * hashlb's program). Whether any is named. */
static bool program_services(struct hashlb_steer *s, char (*buf)[HLB_STEER_TNAME_MAX + 1],
			     const char **names)
{
	uint32_t n = hashlb_steer_tables(s);
	bool any = false;

	for (uint32_t t = 0; t < n && t < HASHLB_STEER_TABLES_MAX; t++) {
		if (hashlb_steer_table_name(s, t, buf[t], sizeof(buf[t])) < 0 || !buf[t][0] ||
		    !hashlb_steer_table_serves(s, t))
			continue;
		names[t] = buf[t];
		any = true;
	}
	return any;
}

/* <names>[t]: the service of <c> (with steering: kernel) whose listen address is a VIP in
 * force of table t of <s>'s program, NULL where none is. */
static void table_services(struct hashlb_steer *s, const struct hashlb_config *c,
			   const char **names)
{
	for (uint32_t i = 0; i < c->n_services; i++) {
		const struct hashlb_service_cfg *svc = &c->services[i];
		int t;

		if (svc->steering != HASHLB_STEERING_KERNEL)
			continue;
		t = hashlb_steer_vip_table(s, &svc->listen_addr);
		if (t >= 0 && (uint32_t)t < HASHLB_STEER_TABLES_MAX)
			names[t] = svc->name;
	}
}

static int steer_stats(struct steer_args *a)
{
	struct hashlb_error err = { 0 };
	struct hashlb_steer *s;
	struct hlb_steer_stats st;
	struct hlb_steer_stats tstats[HASHLB_STEER_TABLES_MAX];
	const char *names[HASHLB_STEER_TABLES_MAX] = { NULL };
	char named[HASHLB_STEER_TABLES_MAX][HLB_STEER_TNAME_MAX + 1];
	uint32_t flows, tables[HASHLB_STEER_TABLES_MAX];
	struct table_figures t = { .flows = tables };
	int own, ret;

	ret = hashlb_steer_find(a->iface, a->opts.mode, &s, &err);
	if (ret < 0) {
		cli_print_error(&err);
		return 1;
	}
	/* each table's read before the program's: they never add up to more */
	own = hashlb_steer_tables_stats(s, tstats);
	ret = hashlb_steer_stats(s, &st);
	if (ret < 0)
		cli_error("reading the counters: %s\n", strerror(-ret));
	/* each table's entries beside all, in one scan (a program of one table: the scan alone) */
	else if ((ret = hashlb_steer_flows_tables(s, tables, &flows)) < 0)
		cli_error("reading the conntrack table: %s\n", strerror(-ret));
	else {
		t.n = hashlb_steer_tables(s);
		if (own >= 0) {
			t.tstats = tstats;
			t.tstats_all = own == 0;
		}
		/* named by the config, else by the names hashlb run gave the tables */
		if (a->config) {
			table_services(s, a->config, names);
			t.services = names;
		} else if (program_services(s, named, names)) {
			t.services = names;
		}
		print_stats(a->iface, hashlb_steer_mode(s), &st, flows, hashlb_steer_flows_max(s),
			    &t, a->json);
	}
	hashlb_steer_free(s);
	return ret < 0 ? 1 : 0;
}

/* The service of a config file to steer: named, or the one with steering: kernel (NULL,
 * printed: a usage error, if none or several). */
static const struct hashlb_service_cfg *config_service(const struct hashlb_config *c,
						       const char *name)
{
	const struct hashlb_service_cfg *found = NULL;

	for (uint32_t i = 0; i < c->n_services; i++) {
		const struct hashlb_service_cfg *svc = &c->services[i];

		if (name ? strcmp(svc->name, name) == 0 : svc->steering == HASHLB_STEERING_KERNEL) {
			if (found) {
				cli_error("%s: several services have steering: "
					  "kernel; name one with --service\n",
					  cli_path(c->path));
				return NULL;
			}
			found = svc;
		}
	}
	if (!found && name)
		cli_error("--service '%s': %s has no such service\n", name, cli_path(c->path));
	else if (!found)
		cli_error("%s: no service has steering: kernel; name one with "
			  "--service\n",
			  cli_path(c->path));
	return found;
}

/* a->iface for --stats or --detach -c FILE without -i or --service: the interface of FILE's
 * services with steering: kernel, if they have one; else -EINVAL (printed). */
static int config_iface(struct steer_args *a)
{
	const struct hashlb_config *c = a->config;

	for (uint32_t i = 0; i < c->n_services; i++) {
		const char *dev = c->services[i].steer_interface;

		if (c->services[i].steering != HASHLB_STEERING_KERNEL || !dev)
			continue;
		if (a->iface && strcmp(a->iface, dev) != 0) {
			cli_error("%s: services with steering: kernel on %s and on %s: give -i "
				  "IFACE\n",
				  cli_path(c->path), a->iface, dev);
			return -EINVAL;
		}
		a->iface = dev;
	}
	if (!a->iface) {
		cli_error("%s: no service has steering: kernel with an interface: give -i IFACE\n",
			  cli_path(c->path));
		return -EINVAL;
	}
	return 0;
}

/* VIP, table parameters, key and backends from a service of a config file; -EINVAL
 * (printed) on a usage error: no such service, or a name that is not its backend. */
static int from_config(struct steer_args *a)
{
	const struct hashlb_service_cfg *svc;
	bool *down = NULL, *backup = NULL, *listed = NULL;
	uint32_t *weight = NULL;
	size_t l;
	int ret;

	if (cli_config_load(a->config_path, 0, &a->config) < 0)
		return -ENOENT;
	/* --stats names each table's service from the file: any number of them, the
	 * interface theirs if they have one (-i otherwise). --detach, which acts on the
	 * interface's program whoever's tables it holds, takes it likewise: before, a file of
	 * several kernel-steered services on one interface asked for a --service that
	 * changed nothing. */
	if ((a->action == ACT_STATS || a->action == ACT_DETACH) && !a->service)
		return a->iface ? 0 : config_iface(a);
	svc = config_service(a->config, a->service);
	if (!svc)
		return -EINVAL;
	if (!a->iface)
		a->iface = svc->steer_interface;
	if (!a->iface) {
		cli_error("service '%s' has no 'interface': give -i IFACE\n", svc->name);
		return -EINVAL;
	}
	if (a->action == ACT_STATS || a->action == ACT_DETACH)
		return 0;
	if (!a->opts.flows)
		a->opts.flows = svc->steer_flows;
	a->vips[0] = svc->listen_addr;
	a->n_vips = 1;
	a->table.params = svc->table;
	a->key = svc->key;
	a->prefix = svc->hash_prefix;
	a->backends = calloc(svc->n_backends, sizeof(*a->backends));
	a->table.specs = calloc(svc->n_backends, sizeof(*a->table.specs));
	down = calloc(svc->n_backends ? svc->n_backends : 1, sizeof(*down));
	backup = calloc(svc->n_backends ? svc->n_backends : 1, sizeof(*backup));
	weight = calloc(svc->n_backends ? svc->n_backends : 1, sizeof(*weight));
	listed = calloc(svc->n_backends ? svc->n_backends : 1, sizeof(*listed));
	if (!a->backends || !a->table.specs || !down || !backup || !weight || !listed) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < svc->n_backends; i++) {
		const struct hashlb_backend_cfg *bc = &svc->backends[i];
		struct backend_arg *b = &a->backends[i];

		b->name = strdup(bc->name);
		if (!b->name) {
			ret = -ENOMEM;
			goto out;
		}
		a->n_backends = i + 1;
		b->addr = bc->addr;
		a->table.specs[i].name = strdup(bc->name);
		a->table.n_specs = i + 1;
		if (!a->table.specs[i].name) {
			ret = -ENOMEM;
			goto out;
		}
		weight[i] = bc->weight;
		backup[i] = bc->backup;
	}
	/* once every name is known ("x,y" may be one): drain, maint (the
	 * config's or --drain) take no new flows and keep the established */
	table_args_mark(a->drain, a->table.specs, svc->n_backends, listed, &l);
	for (uint32_t i = 0; i < svc->n_backends; i++)
		a->backends[i].dest.keep_flows =
			svc->backends[i].admin != HASHLB_ADMIN_READY || listed[i];
	table_args_mark(a->table.down, a->table.specs, svc->n_backends, listed, &l);
	for (uint32_t i = 0; i < svc->n_backends; i++)
		down[i] = a->backends[i].dest.keep_flows || listed[i];
	if (table_args_check_list(a->table.down, a->table.down_opt, a->table.specs,
				  a->table.n_specs, svc->name) < 0 ||
	    table_args_check_list(a->drain, "--drain", a->table.specs, a->table.n_specs,
				  svc->name) < 0) {
		ret = -EINVAL;
		goto out;
	}
	/* As hashlb run builds it: backups only while no primary is up. One out
	 * of the table that way keeps its flows, as the daemon keeps them,
	 * unless close_on_return. */
	hashlb_backup_rule(down, backup, weight, svc->n_backends);
	for (uint32_t i = 0; i < svc->n_backends; i++) {
		struct backend_arg *b = &a->backends[i];
		bool by_rule = down[i] && !b->dest.keep_flows && !listed[i];

		if (by_rule && !svc->backends[i].close_on_return)
			b->dest.keep_flows = true;
		a->table.specs[i].weight = weight[i];
		a->table.specs[i].down = down[i];
	}
	a->svc = svc;
	ret = 0;
out:
	free(listed);
	free(down);
	free(backup);
	free(weight);
	return ret;
}

/*
 * <neigh>, or a table read again once the entries the backends to steer to lack there (in a
 * subnet of their interface) have been asked of the kernel (an ARP request or neighbour
 * solicitation, as hashlb run asks them) and have come, or a second has passed; NULL if out of
 * memory. Before, the attach stopped with "no MAC address" until each backend had been
 * reached from the LB (a ping) first: after a boot, a backend just started. A host that
 * answers nothing still gets that, a second later.
 */
static struct hashlb_steer_neigh *neigh_asked(const struct steer_args *a,
					      struct hashlb_steer_neigh *neigh)
{
	for (int tries = 0; neigh && tries < 20; tries++) {
		uint32_t missing = 0;

		for (uint32_t i = 0; i < a->n_backends; i++) {
			const struct backend_arg *b = &a->backends[i];
			const char *dev = !a->svc && b->dev[0] ? b->dev : a->iface;

			if (a->table.specs[i].down || b->have_mac ||
			    !hashlb_steer_neigh_missing(neigh, &b->addr, dev))
				continue;
			if (tries == 0)
				hashlb_steer_neigh_solicit(&b->addr, dev);
			missing++;
		}
		if (!missing)
			break;
		usleep(50 * 1000);
		hashlb_steer_neigh_free(neigh);
		neigh = hashlb_steer_neigh_new();
	}
	return neigh;
}

/*
 * What the host says of the interface and of each backend to steer to: -ENODEV
 * (printed) if there is no interface IFACE; each backend's MAC (and dev=), from
 * the command line or the neighbour table; -ENOENT (printed) if one in the
 * table has none (one out of it needs none). After the command line is known
 * right and the build known to steer: neither is the host's to say.
 */
static int resolve_host(struct steer_args *a)
{
	struct hashlb_steer_neigh *neigh;
	unsigned said = 0;
	int ret = 0, r;

	/* An -i (or interface:) misspelt, or one not there yet: said as --stats
	 * and --detach say it. Before, each backend had "no MAC address" in the
	 * table of an interface that does not exist, and a ping to it was
	 * suggested, which could not help. */
	if (!if_nametoindex(a->iface)) {
		cli_error("no interface '%s'\n", a->iface);
		return -ENODEV;
	}
	/* read once for all of them (before, once a backend) */
	neigh = neigh_asked(a, hashlb_steer_neigh_new());
	if (!neigh) {
		cli_error("out of memory\n");
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < a->n_backends && ret == 0; i++) {
		struct backend_arg *b = &a->backends[i];
		bool out = a->table.specs[i].down;

		if (!a->svc) {
			ret = resolve_backend(b, a->iface, out, neigh, &said);
		} else if ((r = neigh_lookup(b, a->iface, neigh, &said)) < 0 && !out) {
			if (neigh_missing(r) &&
			    !off_subnet(b, a->svc->backends[i].address, a->iface))
				cli_error("backend '%s' (%s): no MAC address in the neighbour "
					  "table of %s: it answered no ARP request or neighbour "
					  "solicitation in a second (its host down?)\n",
					  b->name, a->svc->backends[i].address, a->iface);
			ret = -ENOENT;
		}
	}
	hashlb_steer_neigh_free(neigh);
	return ret < 0 ? -ENOENT : 0;
}

static int parse_args(struct steer_args *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		TABLE_ARGS_LONGOPTS,
		{ "iface", required_argument, NULL, 'i' },
		{ "vip", required_argument, NULL, 0x200 },
		{ "backend", required_argument, NULL, 'b' },
		{ "drain", required_argument, NULL, 0x201 },
		{ "key", required_argument, NULL, 'k' },
		{ "ipv4-prefix", required_argument, NULL, 0x20d },
		{ "ipv6-prefix", required_argument, NULL, 0x20e },
		{ "mode", required_argument, NULL, 0x202 },
		{ "flows", required_argument, NULL, 0x203 },
		{ "max-backends", required_argument, NULL, 0x204 },
		{ "max-ring-points", required_argument, NULL, 0x205 },
		{ "max-maglev-m", required_argument, NULL, 0x20c },
		{ "keep", no_argument, NULL, 0x206 },
		{ "update", no_argument, NULL, 0x207 },
		{ "stats", no_argument, NULL, 0x208 },
		{ "json", no_argument, NULL, 'j' },
		{ "detach", no_argument, NULL, 0x20a },
		{ "config", required_argument, NULL, 'c' },
		{ "service", required_argument, NULL, 0x20b },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	/* --down, --backend, --vip and --drain add to their lists */
	static const int repeatable[] = { TABLE_ARGS_REPEATABLE, 'b', 0x200, 0x201, 0 };
	static const char *const action_names[] = { NULL, "--update", "--stats", "--detach" };
	char **backend_args = calloc((size_t)argc, sizeof(char *));
	const char *attach_opt = NULL; /* the last option that only attaching takes */
	/* options as typed ("" if not given), for the messages */
	char name[CLI_OPT_NAME_MAX],
		key_opt[CLI_OPT_NAME_MAX] = "", prefix_opt[CLI_OPT_NAME_MAX] = "",
		backend_opt[CLI_OPT_NAME_MAX] = "", config_opt[CLI_OPT_NAME_MAX] = "",
		iface_opt[CLI_OPT_NAME_MAX] = "", json_opt[CLI_OPT_NAME_MAX] = "", why[256];
	uint32_t n_backend_args = 0;
	uint64_t v;
	int opt, r;

	if (!backend_args)
		return -ENOMEM;
	while ((opt = cli_getopt(argc, argv, ":" TABLE_ARGS_SHORTOPTS "i:b:k:c:jh", longopts,
				 repeatable, name)) != -1) {
		r = table_args_option(&a->table, opt, name, optarg);
		if (r < 0)
			goto usage;
		if (r > 0)
			continue;
		switch (opt) {
		case 'i':
			a->iface = optarg;
			snprintf(iface_opt, sizeof(iface_opt), "%s", name);
			break;
		case 0x200:
			if (a->n_vips < VIPS_MAX && parse_vip(optarg, &a->vips[a->n_vips]) == 0 &&
			    hashlb_addr_is_any(&a->vips[a->n_vips])) {
				/* as the config refuses it with steering: kernel */
				cli_error("VIP '%s' is a wildcard address: the kernel path "
					  "matches packets by their destination, the address "
					  "clients connect to\n",
					  optarg);
				goto usage;
			}
			if (a->n_vips == VIPS_MAX) {
				cli_error("invalid VIP '%s': at most %u\n", optarg, VIPS_MAX);
				goto usage;
			}
			if (parse_vip(optarg, &a->vips[a->n_vips]) < 0) {
				/* as the config says it: "a URL: write it without ..." */
				cli_error("invalid VIP '%s' (ADDR:PORT or [V6]:PORT): %s\n", optarg,
					  hashlb_addr_explain(optarg, false, false, why,
							      sizeof(why)));
				goto usage;
			}
			/* Equal (an IPv4-mapped address as the IPv4 one): the kernel
			 * keys it once, but it was counted twice (a place of VIPS_MAX,
			 * the summary's count). Neither is a wildcard, so a clash is
			 * equality. */
			for (uint32_t i = 0; i < a->n_vips; i++) {
				if (hashlb_listen_clash(&a->vips[i], &a->vips[a->n_vips])) {
					cli_error("VIP '%s' given twice\n", optarg);
					goto usage;
				}
			}
			a->n_vips++;
			break;
		case 'b':
			backend_args[n_backend_args++] = optarg;
			snprintf(backend_opt, sizeof(backend_opt), "%s", name);
			break;
		case 0x201: /* given again, it adds to the list, as --down */
			if (table_args_list_add(&a->drain, optarg) < 0)
				goto fail;
			break;
		case 'k':
			snprintf(key_opt, sizeof(key_opt), "%s", name);
			if (hashlb_key_parse(optarg, &a->key) < 0) {
				cli_bad_value(name, optarg, "src-ip, src-ip-port or 4-tuple");
				goto usage;
			}
			break;
		case 0x20d:
		case 0x20e:
			snprintf(prefix_opt, sizeof(prefix_opt), "%s", name);
			if (cli_parse_prefix_len(name, optarg, opt == 0x20e, &a->prefix) < 0)
				goto usage;
			break;
		case 0x202: /* attaching: how; the others: which program */
			if (hashlb_steer_mode_parse(optarg, &a->opts.mode) < 0 ||
			    a->opts.mode == HASHLB_STEER_LOAD_ONLY) {
				cli_bad_value(name, optarg, "auto, xdp, xdp-generic or tc");
				goto usage;
			}
			break;
		case 0x203:
		case 0x204:
		case 0x205:
		case 0x20c: {
			/* --flows as the config's steering_flows: the loader refuses more */
			uint64_t max = opt == 0x203 ? HASHLB_STEER_FLOWS_MAX : UINT32_MAX;
			char range[32];

			attach_opt = opt == 0x203   ? "--flows"
				     : opt == 0x204 ? "--max-backends"
				     : opt == 0x205 ? "--max-ring-points"
						    : "--max-maglev-m";
			if (cli_parse_u64(optarg, max, &v) < 0 || v == 0) {
				snprintf(range, sizeof(range), "1..%" PRIu64, max);
				cli_bad_value(attach_opt, optarg, range);
				goto usage;
			}
			if (opt == 0x203)
				a->opts.flows = (uint32_t)v;
			else if (opt == 0x204)
				a->opts.max_backends = (uint32_t)v;
			else if (opt == 0x20c)
				a->opts.max_maglev_m = (uint32_t)v;
			else
				a->opts.max_ring_points = (uint32_t)v;
			break;
		}
		case 0x206:
			attach_opt = "--keep";
			a->opts.keep = true;
			break;
		case 0x207:
		case 0x208:
		case 0x20a: {
			enum action act = opt == 0x207	 ? ACT_UPDATE
					  : opt == 0x208 ? ACT_STATS
							 : ACT_DETACH;

			if (a->action != ACT_RUN && a->action != act) {
				cli_error("%s and %s exclude each other\n", action_names[a->action],
					  action_names[act]);
				goto usage;
			}
			a->action = act;
			break;
		}
		case 'j':
			a->json = true;
			snprintf(json_opt, sizeof(json_opt), "%s", name);
			break;
		case 'c':
			if (cli_config_path(name, optarg, &a->config_path))
				goto usage;
			snprintf(config_opt, sizeof(config_opt), "%s", name);
			break;
		case 0x20b:
			a->service = optarg;
			break;
		case 'h':
			cli_release_signals();
			usage(stdout);
			free(backend_args);
			return 1;
		default:
			goto usage;
		}
	}
	if (optind < argc) {
		cli_unexpected_argument(argv[optind], a->config_path);
		goto usage;
	}
	/* What an action does not use is a mistake to say, not to ignore. */
	if (a->json && a->action != ACT_STATS) {
		cli_error("%s applies only with --stats\n", json_opt);
		goto usage;
	}
	if (attach_opt && a->action != ACT_RUN) {
		cli_error("%s does not apply with %s: it is for attaching\n", attach_opt,
			  action_names[a->action]);
		goto usage;
	}
	if (a->action == ACT_STATS || a->action == ACT_DETACH) {
		const char *o = a->n_vips	    ? "--vip"
				: n_backend_args    ? backend_opt
				: a->table.given[0] ? a->table.given
				: a->table.down	    ? a->table.down_opt
				: a->drain	    ? "--drain"
				: key_opt[0]	    ? key_opt
				: prefix_opt[0]	    ? prefix_opt
						    : NULL;

		if (o) {
			cli_error("%s does not apply with %s\n", o, action_names[a->action]);
			goto usage;
		}
	}
	if (a->service && !a->config_path) {
		cli_error("--service needs --config FILE\n");
		goto usage;
	}
	if (a->iface && hashlb_ifname_refusal(a->iface, why, sizeof(why))) {
		/* as the config refuses it: "lo:1" would be lo to the kernel */
		cli_error("%s: %s\n", iface_opt, why);
		goto usage;
	}
	if (a->config_path) {
		if (n_backend_args || a->n_vips) {
			cli_error("%s takes the VIP and backends from the file: no %s with it\n",
				  config_opt, a->n_vips ? "--vip" : backend_opt);
			goto usage;
		}
		if (table_args_refuse_with_config(&a->table, key_opt, prefix_opt, config_opt) < 0)
			goto usage;
		free(backend_args);
		return from_config(a);
	}
	if (prefix_opt[0] && a->key != HASHLB_KEY_SRC_IP) {
		/* as a config's hash_prefix: the other keys hash the port */
		cli_error("%s applies to the src-ip key, not %s\n", prefix_opt,
			  hashlb_key_name(a->key));
		goto usage;
	}
	if (!a->iface) { /* a config's interface will do too, for every action */
		cli_error("--iface is required (or --config FILE, whose service names its "
			  "interface)\n");
		goto usage;
	}
	if (a->action == ACT_RUN || a->action == ACT_UPDATE) {
		if (!a->n_vips || !n_backend_args) {
			cli_error("give at least one --vip and one --backend\n");
			goto usage;
		}
		a->backends = calloc(n_backend_args, sizeof(*a->backends));
		a->table.specs = calloc(n_backend_args, sizeof(*a->table.specs));
		if (!a->backends || !a->table.specs)
			goto fail;
		for (uint32_t i = 0; i < n_backend_args; i++) {
			struct hashlb_backend_spec *sp = &a->table.specs[i];

			r = parse_backend(backend_args[i], i + 1, &a->backends[i], &sp->weight);
			if (r == -EINVAL)
				goto usage;
			if (r < 0)
				goto fail;
			a->n_backends = i + 1;
			sp->name = strdup(a->backends[i].name);
			a->table.n_specs = i + 1;
			if (!sp->name)
				goto fail;
		}
		/* once every name is known: --drain's, then --down's */
		if (table_args_mark_down(a->drain, a->table.specs, n_backend_args) < 0)
			goto fail;
		for (uint32_t i = 0; i < n_backend_args; i++)
			a->backends[i].dest.keep_flows = a->table.specs[i].down;
		if (table_args_mark_down(a->table.down, a->table.specs, n_backend_args) < 0)
			goto fail;
		for (uint32_t i = 0; i < n_backend_args; i++)
			a->table.specs[i].down |= a->backends[i].dest.keep_flows;
	}
	free(backend_args);
	if (table_args_check(&a->table) < 0 ||
	    table_args_check_list(a->drain, "--drain", a->table.specs, a->table.n_specs, NULL) < 0)
		return -EINVAL;
	return 0;
usage:
	free(backend_args);
	return -EINVAL;
fail:
	free(backend_args);
	return -ENOENT;
}

int cmd_steer(int argc, char **argv)
{
	sigset_t stops, held;
	struct steer_args a;
	int ret;

	/* Until steer_publish() blocks them: SIGINT, SIGTERM, SIGQUIT and
	 * SIGHUP end a hashlb steer still starting at once, nothing attached
	 * yet; SIGQUIT, a stop as SIGTERM once attached, as SIGTERM does, not by
	 * a core dump; as PID 1 of a container too, where the kernel dropped
	 * them and the start went on to attach. SIGUSR1 and SIGUSR2, which a
	 * foreground steer says and ignores, stay held as main() held them, to
	 * be said once it waits: they were let go here and, at their default
	 * action, killed a steer still starting (its config loading, its table
	 * building), and it never attached. */
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGQUIT);
	sigaddset(&stops, SIGHUP);
	sigemptyset(&held);
	sigaddset(&held, SIGUSR1);
	sigaddset(&held, SIGUSR2);
	cli_start_signals(&stops, &held);
	memset(&a, 0, sizeof(a));
	table_args_init(&a.table);
	a.table.has_service = true; /* --service, with -c */
	a.key = HASHLB_KEY_SRC_IP;
	a.prefix = (struct hashlb_src_prefix){ 32, 128 };
	a.opts.mode = HASHLB_STEER_AUTO;
	ret = parse_args(&a, argc, argv);
	if (ret > 0) {
		ret = 0;
		goto out;
	}
	if (ret < 0) {
		ret = ret == -EINVAL ? 2 : 1;
		goto out;
	}
	if (a.action == ACT_STATS || a.action == ACT_DETACH)
		cli_release_signals(); /* a command that ends at once, as any other */
	if (!hashlb_steer_supported()) {
		struct hashlb_error err = { 0 };

		hashlb_steer_open(&a.opts, NULL, NULL, &err);
		cli_print_error(&err);
		ret = 1;
		goto out;
	}
	if (resolve_host(&a) < 0) {
		ret = 1;
		goto out;
	}
	switch (a.action) {
	case ACT_STATS:
		ret = steer_stats(&a);
		break;
	case ACT_DETACH: {
		struct hashlb_error err = { 0 };

		ret = hashlb_steer_detach(a.iface, a.opts.mode, &err) < 0 ? 1 : 0;
		if (ret)
			cli_print_error(&err);
		else
			printf("hashlb steer: detached from %s\n", a.iface);
		break;
	}
	default:
		ret = steer_publish(&a);
		break;
	}
out:
	for (uint32_t i = 0; i < a.n_backends; i++)
		free(a.backends[i].name);
	free(a.backends);
	free(a.drain);
	table_args_free(&a.table);
	hashlb_config_free(a.config);
	return ret;
}
