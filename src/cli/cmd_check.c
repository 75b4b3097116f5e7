// SPDX-License-Identifier: MIT
/* hashlb check: validate a config as `hashlb run` would load it, and show its tables. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "control/buf.h"
#include "hashlb/config.h"

static void usage(FILE *f)
{
	fprintf(f, "NAME\n"
		   "  hashlb check - validate a configuration file and show its tables\n"
		   "\n"
		   "SYNOPSIS\n"
		   "  hashlb check -c FILE [-q] [--admin ADDR:PORT|unix:/PATH|off]\n"
		   "  hashlb check -c FILE --against OLD [--admin ADDR:PORT|unix:/PATH|off]\n"
		   "\n"
		   "DESCRIPTION\n"
		   "  Loads FILE exactly as hashlb run would: YAML syntax, every key and\n"
		   "  value, addresses, ranges, duplicates, and the build of each service's\n"
		   "  lookup table. On success prints, for each service, its listen address,\n"
		   "  scheme and parameters, hash key, the table's fingerprint (equal on every\n"
		   "  instance that routes the same way) and its backends: how many are up\n"
		   "  (taking clients, as hashlb ctl and hashlb table count them: ready, of\n"
		   "  a weight above 0, and no backup while a primary is), and each one's\n"
		   "  weight, ADMIN state (ready, drain or maint, as the config sets it)\n"
		   "  and share of the clients (next to the ideal share, the weight over\n"
		   "  the total). Backends in drain or maint take no share.\n"
		   "  Each table's memory is shown as built and at most (with backends\n"
		   "  down), and the sum of the latter against table_memory. A duration is\n"
		   "  printed as the config takes it, in the largest unit that writes it\n"
		   "  exactly (5m, 30s, 1500ms); timeouts.idle's 0, no idle timeout, as\n"
		   "  0 (never).\n"
		   "  On error prints a line FILE:LINE:COLUMN: error: WHAT to stderr\n"
		   "  (a newline or control byte in FILE written \\n or \\xNN) for each\n"
		   "  error, in file order, the first 20 (then \"and N more errors\"),\n"
		   "  and with two or more their count (\"hashlb check: 3 errors\").\n"
		   "  Errors that depend on a value refused are not said (a timeout is\n"
		   "  not checked against an interval refused), nor, in a service or\n"
		   "  backend with an error, a check of one key against another (a key\n"
		   "  that needs steering: userspace): they show once it is fixed. A\n"
		   "  YAML syntax error stops the parser: it is said alone.\n"
		   "  What is valid but likely a mistake (admin: with no value, which is\n"
		   "  off; a duration written without a unit, which counts milliseconds;\n"
		   "  two backends of a service at one address; a service no backend of\n"
		   "  which takes clients, each of weight 0, drain or maint, though not all\n"
		   "  of weight 0: that is an error, no table; health.passive_hold with\n"
		   "  checks on or passive off, where it holds nothing; health.port, send\n"
		   "  or expect with checks off, which only checks use; close_on_down with\n"
		   "  checks and passive off, where no backend goes down) prints\n"
		   "  FILE:LINE:COLUMN: warning: WHAT to stderr, with -q too, and leaves\n"
		   "  the exit status 0; hashlb run logs the same at start and at each\n"
		   "  reload. Warnings are looked for once the config loads: with errors,\n"
		   "  those alone are printed, and the warnings show once they are fixed.\n"
		   "  It binds no socket and attaches nothing: what only the host can\n"
		   "  refuse (a listen address in use or not local, a source address not\n"
		   "  local, source: client without CAP_NET_ADMIN, an admin socket's\n"
		   "  directory, a network interface) is found by hashlb run, and by a\n"
		   "  reload, which then keeps the running config.\n"
		   "\n"
		   "  With --against OLD (the config running now, say), OLD is loaded too\n"
		   "  and, in place of the tables, each service is compared: the share of\n"
		   "  its clients (of keys spread evenly) that FILE's table sends to\n"
		   "  another server than OLD's (another backend, or one of the same name\n"
		   "  at a new address), each table built as a start builds it\n"
		   "  (every backend up, drain and maint as each config sets them), the\n"
		   "  tables compared exactly; and the services FILE adds or removes. When\n"
		   "  the seed, hash_key, hash_prefix or accept_proxy changes, or the listen\n"
		   "  address under the 4-tuple key (its port, or a specific address for\n"
		   "  another: a wildcard hashes the address each client reached),\n"
		   "  clients' hashes change too: the\n"
		   "  share is then the one expected of two independent placements\n"
		   "  (placed anew). A reload reports the same\n"
		   "  for the tables actually in use, health included (moved= in its log).\n"
		   "\n"
		   "OPTIONS\n"
		   "  -c, --config FILE   the configuration to check (required)\n"
		   "  -q, --quiet         print nothing on success\n"
		   "      --against OLD   compare with configuration OLD: what moves\n"
		   "      --admin A       the admin endpoint hashlb run --admin A would have, in\n"
		   "                      place of the config's: checked as run checks it (a\n"
		   "                      service may listen on the config's, or the default)\n"
		   "  -h, --help          show this text\n"
		   "\n"
		   "OUTPUT\n"
		   "  With --against, after FILE's ok line, a line naming OLD, then one a\n"
		   "  service: NAME, MOVED (a percentage, or added, removed), BACKENDS\n"
		   "  (OLD's count -> FILE's), and placed anew (WHAT) when hashes change.\n"
		   "\n"
		   "EXIT STATUS\n"
		   "  0 if the configuration is valid, 1 if it is not (or cannot be read),\n");
	fputs(CLI_EXIT_USAGE_HELP, f);
	fprintf(f,
		"\n" CLI_ERRORS_HELP "EXAMPLES\n"
		"  hashlb check -c configs/demo.yaml\n"
		"  hashlb check -q -c /etc/hashlb/hashlb.yaml && systemctl reload hashlb\n"
		"  hashlb check -c new.yaml --against /etc/hashlb/hashlb.yaml\n",
		"check", "-c or --config", CLI_ERRORS_CONFIG_LIST, "check");
}

/* <n> bytes as a double-quoted string, C escapes for what is not printable. */
static void print_bytes(const char *p, uint32_t n)
{
	putchar('"');
	for (uint32_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)p[i];

		if (ch == '\r')
			fputs("\\r", stdout);
		else if (ch == '\n')
			fputs("\\n", stdout);
		else if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			printf("\\x%02x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

/* <ms> into <buf> as the config writes a duration ("5m", "1500ms"): <buf>. */
static const char *duration(uint64_t ms, char buf[HASHLB_DURATION_STRLEN])
{
	hashlb_duration_format(ms, buf, HASHLB_DURATION_STRLEN);
	return buf;
}

/* timeouts.idle: 0 is no idle timeout, which "idle=0ms" read as the opposite (closed at once,
 * as drain's and queue's 0 are) */
static const char *idle(uint32_t ms, char buf[HASHLB_DURATION_STRLEN])
{
	return ms ? duration(ms, buf) : "0 (never)";
}

/* timeouts.drain, "never" for never */
static const char *drain(uint32_t ms, char buf[HASHLB_DURATION_STRLEN])
{
	hashlb_drain_format(ms, buf, HASHLB_DURATION_STRLEN);
	return buf;
}

/* Of a kernel-steered service's failed connects, which count (passive-only health's, or
 * toward fall with checks on): the kernel path connects to no backend, but the daemon's own
 * listener on the VIP does while the kernel has no table of the service, and its failed
 * connects count as the forwarder's do (it said nothing of them, as if none could), in the
 * words the timeouts and limits lines use for that listener. */
#define KERNEL_PASSIVE                                                                           \
	" (only from the connects of clients the daemon's listener serves while the kernel has " \
	"no table of the service: kernel steering opens none)"

static void print_health(const struct hashlb_service_cfg *s)
{
	const struct hashlb_health_cfg *h = &s->health;
	char d1[HASHLB_DURATION_STRLEN], d2[HASHLB_DURATION_STRLEN];
	bool kernel = s->steering == HASHLB_STEERING_KERNEL;

	if (!h->enabled && hashlb_service_passive_only(s) != HASHLB_PASSIVE_ONLY_APPLIES) {
		printf("  health       off (every backend counts as up)\n");
		return;
	}
	if (!h->enabled) {
		/* docs/control.md, "Health": passive-only health, checks off */
		/* as the keys are written, in 80 columns as the line of checks (with kernel
		 * steering, what for) */
		printf("  health       passive only (checks off): fall %" PRIu32
		       ", passive_hold %s%s\n",
		       h->fall, duration(h->passive_hold_ms, d1), kernel ? KERNEL_PASSIVE : "");
		return;
	}
	printf("  health       every %s, timeout %s, rise %" PRIu32 ", fall %" PRIu32,
	       duration(h->interval_ms, d1), duration(h->timeout_ms, d2), h->rise, h->fall);
	if (h->port)
		printf(", port %u", h->port);
	if (h->send_len) {
		printf(", send ");
		print_bytes(h->send, h->send_len);
	}
	if (h->expect_len) {
		printf(", expect ");
		print_bytes(h->expect, h->expect_len);
	}
	if (h->close_on_down)
		printf(", close_on_down");
	if (!h->passive)
		printf(", passive off");
	else if (kernel) /* passive checks on, said as the line without checks says them */
		printf(", failed connects count toward fall" KERNEL_PASSIVE);
	printf("\n");
}

/* "  <what> p1, p2, ...": a prefix list, if any. */
static void print_prefixes(const char *what, const struct hashlb_prefix *p, uint32_t n)
{
	char pfx[HASHLB_PREFIX_STRLEN];

	if (!n)
		return;
	printf("  %s ", what);
	for (uint32_t i = 0; i < n; i++) {
		hashlb_prefix_format(&p[i], pfx, sizeof(pfx));
		printf("%s%s", i ? ", " : "", pfx);
	}
	printf("\n");
}

static int print_service(const struct hashlb_service_cfg *s)
{
	struct hashlb_table *t = NULL;
	struct hashlb_error err;
	uint64_t total = 0;
	uint32_t up = 0; /* taking clients, as ctl and table count "up": weight 0 takes none */
	double *shares;
	char params[HASHLB_TABLE_PARAMS_STRLEN];
	char d1[HASHLB_DURATION_STRLEN], d2[HASHLB_DURATION_STRLEN];
	char d3[HASHLB_DURATION_STRLEN], d4[HASHLB_DURATION_STRLEN];
	int w = 4, aw = 7;

	if (hashlb_service_cfg_build_table(s, NULL, &t, &err) < 0) {
		cli_print_error(&err);
		return -1;
	}
	for (uint32_t i = 0; i < s->n_backends; i++) {
		int len = (int)strlen(s->backends[i].name) -
			  hashlb_text_extra_bytes(s->backends[i].name);

		if (len > w)
			w = len;
		len = (int)strlen(s->backends[i].address);
		if (len > aw)
			aw = len;
		if (!hashlb_table_backend_down(t, i)) { /* ready, and not a backup idle */
			total += s->backends[i].weight;
			up += s->backends[i].weight > 0;
		}
	}
	printf("service %s\n", s->name);
	printf("  listen       %s\n", s->listen);
	hashlb_table_params_format(&s->table, params, sizeof(params));
	printf("  scheme       %s\n", params);
	printf("  hash_key     %s", hashlb_key_name(s->key));
	if (!hashlb_src_prefix_is_whole(&s->hash_prefix))
		printf(" of the client's prefix: IPv4 /%u, IPv6 /%u", s->hash_prefix.v4,
		       s->hash_prefix.v6);
	printf("\n");
	/* the kernel path waits for no connect, queues nobody and times no connection out: its
	 * drain is how long a stop leaves the program attached for the flows it steers. connect
	 * and idle are taken (the config refuses queue) and apply to the clients the daemon's own
	 * listener on the VIP serves, while no table of the service is in the kernel: printed,
	 * not hidden (an idle: 1m given went unsaid) */
	if (s->steering == HASHLB_STEERING_KERNEL)
		printf("  timeouts     connect=%s idle=%s drain=%s (connect and idle: only for clients "
		       "the daemon's listener serves while the kernel has no table of the "
		       "service)\n",
		       duration(s->connect_timeout_ms, d1), idle(s->idle_timeout_ms, d2),
		       drain(s->drain_timeout_ms, d3));
	else
		printf("  timeouts     connect=%s idle=%s drain=%s queue=%s%s\n",
		       duration(s->connect_timeout_ms, d1), idle(s->idle_timeout_ms, d2),
		       drain(s->drain_timeout_ms, d3), duration(s->queue_timeout_ms, d4),
		       s->abort_on_close ? " (abort_on_close)" : "");
	/* the forwarder's, per connection it makes: the kernel path makes none (a kernel-steered
	 * service refuses a max_connections but 0 and the others), but the daemon's own listener
	 * on the VIP serves its clients with the defaults while the kernel has no table of the
	 * service, as the timeouts: printed so (it printed "none", and 10,000 clients could
	 * come) */
	if (s->steering == HASHLB_STEERING_KERNEL)
		printf("  limits       max_connections=%" PRIu32 " connect_retries=%" PRIu32
		       " (only for clients the daemon's listener serves while the kernel has no "
		       "table of the service: kernel steering opens no connection to count or retry)",
		       s->max_connections, s->connect_retries);
	else
		printf("  limits       max_connections=%" PRIu32 " connect_retries=%" PRIu32,
		       s->max_connections, s->connect_retries);
	if (s->max_connections_per_client)
		printf(" max_connections_per_client=%" PRIu32, s->max_connections_per_client);
	if (!hashlb_src_prefix_is_whole(&s->client_prefix))
		printf(" (per client prefix: IPv4 /%u, IPv6 /%u)", s->client_prefix.v4,
		       s->client_prefix.v6);
	if (s->max_connection_rate)
		printf(" max_connection_rate=%" PRIu32 "/s", s->max_connection_rate);
	printf("\n");
	if (s->proxy_protocol)
		printf("  proxy        PROXY protocol %s to the backends\n",
		       hashlb_proxy_protocol_name(s->proxy_protocol));
	if (s->accept_proxy) {
		char pfx[HASHLB_PREFIX_STRLEN];

		printf("  proxy        PROXY protocol expected from the clients, sent by %s",
		       s->n_proxy_from ? "" : "any source");
		for (uint32_t i = 0; i < s->n_proxy_from; i++) {
			hashlb_prefix_format(&s->proxy_from[i], pfx, sizeof(pfx));
			printf("%s%s", i ? ", " : "", pfx);
		}
		printf("\n");
	}
	print_prefixes("clients      served only from", s->allow_clients, s->n_allow_clients);
	print_prefixes("clients      never served from", s->deny_clients, s->n_deny_clients);
	if (s->keepalive.enabled) {
		uint64_t idle = s->keepalive.idle_s * 1000ULL;
		uint64_t every = s->keepalive.interval_s * 1000ULL;

		printf("  keepalive    idle=%s interval=%s count=%" PRIu32
		       " (a silent peer is dropped after %s)\n",
		       duration(idle, d1), duration(every, d2), s->keepalive.count,
		       duration(idle + every * s->keepalive.count, d3));
	}
	if (s->keepalive.enabled && s->keepalive.user_timeout_ms)
		printf("  keepalive    user_timeout=%s (data unacknowledged, or a window closed, this "
		       "long ends it)\n",
		       duration(s->keepalive.user_timeout_ms, d1));
	if (s->log_connections)
		printf("  log          a line as each connection ends (log_connections)\n");
	/* what sends a client past the table's backend, shown as the rest: only when on */
	if (s->slow_start_ms || s->balance_factor > 0) {
		printf("  placement   ");
		if (s->slow_start_ms)
			printf(" slow_start=%s", duration(s->slow_start_ms, d1));
		if (s->balance_factor > 0)
			printf(" balance_factor=%g", s->balance_factor);
		printf("\n");
	}
	if (s->steering == HASHLB_STEERING_KERNEL)
		printf("  steering     kernel, on %s\n", s->steer_interface);
	print_health(s);
	if (s->source_client)
		printf("  source       client (transparent: each backend sees the client's address)\n");
	if (s->source_len) {
		char host[INET6_ADDRSTRLEN] = "?";

		getnameinfo((const struct sockaddr *)&s->source, s->source_len, host, sizeof(host),
			    NULL, 0, NI_NUMERICHOST);
		printf("  source       %s\n", host);
	}
	printf("  fingerprint  %016" PRIx64 "\n", hashlb_table_fingerprint(t));
	printf("  table        %zu bytes (up to %" PRIu64 " with backends down)\n",
	       hashlb_table_bytes(t), hashlb_service_cfg_table_bytes_max(s));
	printf("  backends     %" PRIu32 " (%" PRIu32 " up)\n", s->n_backends, up);
	/* ADMIN: the state the config sets (ready, drain, maint), as ctl set sets it; hashlb
	 * table's and ctl table's columns say whether each takes clients */
	printf("    %-*s  %-*s %6s %-5s %8s %8s\n", w, "NAME", aw, "ADDRESS", "WEIGHT", "ADMIN",
	       "SHARE", "IDEAL");
	shares = calloc(s->n_backends + 1, sizeof(*shares));
	if (shares) /* one pass over the table, not one per backend */
		hashlb_table_shares(t, shares);
	for (uint32_t i = 0; i < s->n_backends; i++) {
		const struct hashlb_backend_cfg *b = &s->backends[i];
		double ideal = !hashlb_table_backend_down(t, i) && total
				       ? 100.0 * b->weight / (double)total
				       : 0.0;

		printf("    %-*s  %-*s %6" PRIu32 " %-5s %7.3f%% %7.3f%%",
		       w + hashlb_text_extra_bytes(b->name), b->name, aw, b->address, b->weight,
		       hashlb_admin_state_name(b->admin),
		       100.0 * (shares ? shares[i] : hashlb_table_share(t, i)), ideal);
		if (b->backup)
			printf(b->close_on_return ? "  backup (close_on_return)" : "  backup");
		if (b->max_connections)
			printf("  max_connections=%" PRIu32, b->max_connections);
		if (hashlb_addr_is_name(b->address)) {
			char addr[HASHLB_ADDR_STRLEN];

			hashlb_addr_format(&b->addr, addr, sizeof(addr));
			printf("  resolved=%s", addr);
		}
		printf("\n");
	}
	free(shares);
	hashlb_table_free(t);
	return 0;
}

/* What <c> accepts but warns of, to stderr (with -q too: a script's check that passes still
 * shows them); 0 or -ENOMEM. */
static int print_warnings(const struct hashlb_config *c)
{
	struct hashlb_error *w;
	int n = hashlb_config_warnings(c, NULL, 0);

	if (n <= 0)
		return n;
	w = calloc((size_t)n, sizeof(*w));
	if (!w)
		return -ENOMEM;
	n = hashlb_config_warnings(c, w, (size_t)n);
	for (int i = 0; i < n; i++)
		cli_print_warning(&w[i]);
	free(w);
	return n < 0 ? n : 0;
}

/* What of <s> decides its clients' hashes; <was>: the service it is compared with, if any
 * (the address it listens on, which the 4-tuple key hashes). */
static struct hashlb_client_hash client_hash(const struct hashlb_service_cfg *s,
					     const struct hashlb_service_cfg *was)
{
	bool listen_moved =
		was && hashlb_listen_moves_destination(&was->listen_addr, was->listen_addr_len,
						       &s->listen_addr, s->listen_addr_len);

	return (struct hashlb_client_hash){ s->table.seed, s->key, s->hash_prefix, s->accept_proxy,
					    listen_moved };
}

/* hashlb_same_server: backend <i> of a service (<arg>: the two configs', OLD's first) and
 * <j> of FILE's are one server: at one address, resolved (a name resolved to the same
 * address is no move), or written alike where either is not */
static bool cfg_same_server(uint32_t i, uint32_t j, void *arg)
{
	const struct hashlb_service_cfg *const *two = arg;
	const struct hashlb_backend_cfg *a = &two[0]->backends[i], *b = &two[1]->backends[j];

	if (a->addr_len && b->addr_len)
		return a->addr_len == b->addr_len && !memcmp(&a->addr, &b->addr, a->addr_len);
	return !strcmp(a->address, b->address);
}

/* Service <b> of the config checked against <a> of OLD's: one line (<w>: the name's
 * column). 0, or -1 once an error is printed. */
static int print_moved(const struct hashlb_service_cfg *a, const struct hashlb_service_cfg *b,
		       int w)
{
	struct hashlb_table *ta = NULL, *tb = NULL;
	struct hashlb_error err;
	double moved = 0;
	char what[64];
	struct hashlb_client_hash ha = client_hash(a, NULL), hb = client_hash(b, a);
	bool anew = hashlb_client_hash_changed(&ha, &hb, what, sizeof(what));
	const struct hashlb_service_cfg *two[2] = { a, b };
	struct hashlb_same_server same = { cfg_same_server, two };
	int r;

	if (hashlb_service_cfg_build_table(a, NULL, &ta, &err) < 0 ||
	    hashlb_service_cfg_build_table(b, NULL, &tb, &err) < 0) {
		hashlb_table_free(ta);
		cli_print_error(&err);
		return -1;
	}
	r = anew ? hashlb_table_rehash_moved(ta, tb, &same, &moved)
		 : hashlb_table_moved(ta, tb, &same, &moved);
	hashlb_table_free(ta);
	hashlb_table_free(tb);
	if (r < 0) {
		cli_error("out of memory\n");
		return -1;
	}
	printf("  %-*s  %7.3f%%  %" PRIu32 " -> %" PRIu32, w + hashlb_text_extra_bytes(b->name),
	       b->name, 100.0 * moved, a->n_backends, b->n_backends);
	if (anew)
		printf("  placed anew (%s)", what);
	printf("\n");
	return 0;
}

/* <s> added (or removed, <added> false): one line. */
static void print_added(const struct hashlb_service_cfg *s, int w, bool added)
{
	printf("  %-*s  %8s  %" PRIu32 " -> %" PRIu32 "\n", w + hashlb_text_extra_bytes(s->name),
	       s->name, added ? "added" : "removed", added ? 0 : s->n_backends,
	       added ? s->n_backends : 0);
}

static int cfg_name_cmp(const void *a, const void *b)
{
	return strcmp((*(const struct hashlb_service_cfg *const *)a)->name,
		      (*(const struct hashlb_service_cfg *const *)b)->name);
}

/* <c>'s services sorted by name, for service_named(); NULL if out of memory. */
static const struct hashlb_service_cfg **services_sorted(const struct hashlb_config *c)
{
	const struct hashlb_service_cfg **v = malloc((c->n_services + 1) * sizeof(*v));

	if (!v)
		return NULL;
	for (uint32_t i = 0; i < c->n_services; i++)
		v[i] = &c->services[i];
	qsort(v, c->n_services, sizeof(*v), cfg_name_cmp);
	return v;
}

/* The service of <sorted> (<n>) named as <s>, NULL if none: in log n, a config may have
 * thousands. */
static const struct hashlb_service_cfg *service_named(const struct hashlb_service_cfg **sorted,
						      uint32_t n,
						      const struct hashlb_service_cfg *s)
{
	const struct hashlb_service_cfg **hit =
		bsearch(&s, sorted, n, sizeof(*sorted), cfg_name_cmp);

	return hit ? *hit : NULL;
}

/* <c> against <old> (from <old_path>): a line a service. 0, or -1 once printed. */
static int print_against(const struct hashlb_config *c, const struct hashlb_config *old,
			 const char *old_path)
{
	const struct hashlb_service_cfg **by_new = services_sorted(c),
					**by_old = services_sorted(old);
	int w = 7, r = 0; /* "SERVICE" */

	if (!by_new || !by_old) {
		cli_error("out of memory\n");
		r = -1;
		goto out;
	}
	for (uint32_t i = 0; i < c->n_services + old->n_services; i++) {
		const char *name = i < c->n_services ? c->services[i].name
						     : old->services[i - c->n_services].name;
		int len = (int)strlen(name) - hashlb_text_extra_bytes(name);

		if (len > w)
			w = len;
	}
	printf("against %s: clients sent to another backend, every backend as configured (as at "
	       "a start)\n",
	       cli_path(old_path));
	printf("  %-*s  %8s  %s\n", w, "SERVICE", "MOVED", "BACKENDS");
	for (uint32_t i = 0; i < c->n_services && r == 0; i++) {
		const struct hashlb_service_cfg *s = &c->services[i];
		const struct hashlb_service_cfg *o = service_named(by_old, old->n_services, s);

		if (!o)
			print_added(s, w, true);
		else
			r = print_moved(o, s, w);
	}
	for (uint32_t i = 0; i < old->n_services && r == 0; i++)
		if (!service_named(by_new, c->n_services, &old->services[i]))
			print_added(&old->services[i], w, false);
out:
	free(by_new);
	free(by_old);
	return r;
}

int cmd_check(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "admin", required_argument, NULL, 'A' },
		{ "against", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct hashlb_config *c = NULL, *old = NULL;
	const char *path = NULL, *against = NULL;
	char against_name[CLI_OPT_NAME_MAX] = "", quiet_name[CLI_OPT_NAME_MAX] = "";
	char name[CLI_OPT_NAME_MAX], tb[32], tm[HASHLB_TABLE_MEMORY_STRLEN];
	const char *admin = NULL;
	struct sockaddr_storage admin_addr;
	socklen_t admin_len = 0;
	bool quiet = false;
	int opt, r = 0;

	while ((opt = cli_getopt(argc, argv, ":c:qh", longopts, NULL, name)) != -1) {
		switch (opt) {
		case 'c':
			if (cli_config_path(name, optarg, &path))
				return 2;
			break;
		case 'q':
			quiet = true;
			snprintf(quiet_name, sizeof(quiet_name), "%s", name);
			break;
		case 'a':
			if (cli_config_path(name, optarg, &against))
				return 2;
			snprintf(against_name, sizeof(against_name), "%s", name);
			break;
		case 'A':
			admin = optarg;
			if (cli_admin_parse(name, admin, NULL, &admin_addr, &admin_len) < 0)
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return 2;
		}
	}
	if (cli_config_only(path, argc, argv, optind))
		return 2;
	if (against && quiet) {
		cli_error("%s prints nothing, and %s prints the comparison: give one of them\n",
			  quiet_name, against_name);
		return 2;
	}
	/* with --admin the file's admin address is not the one to check, as hashlb run's */
	if (cli_config_load(path, admin ? HASHLB_LOAD_ADMIN_GIVEN : 0, &c) < 0)
		return 1;
	if (admin && cli_admin_apply(c, path, admin, &admin_addr, admin_len) < 0) {
		hashlb_config_free(c);
		return 1;
	}
	/* OLD as it was loaded when it ran: refused (each of its errors, as FILE's), nothing of
	 * FILE printed but its warnings */
	if (against && cli_config_load(against, admin ? HASHLB_LOAD_ADMIN_GIVEN : 0, &old) < 0) {
		hashlb_config_free(c);
		return 1;
	}
	r = print_warnings(c);
	if (r < 0) {
		hashlb_config_free(old);
		cli_error("out of memory\n");
		hashlb_config_free(c);
		return 1;
	}
	if (!quiet) {
		printf("%s: ok: %" PRIu32 " service%s, workers ", cli_path(path), c->n_services,
		       hlb_plural(c->n_services));
		if (c->workers)
			printf("%" PRIu32, c->workers);
		else
			printf("auto");
		printf(", admin %s", c->admin ? c->admin : "off");
		if (c->resolve_every_ms)
			printf(", host names resolved again every %s",
			       duration(c->resolve_every_ms, tb));
		printf("\n");
		if (against) {
			r = print_against(c, old, against);
			hashlb_config_free(old);
			hashlb_config_free(c);
			return r < 0 ? 1 : 0;
		}
		hashlb_bytes_format(c->table_bytes, tb, sizeof(tb));
		/* table_memory as its errors say it, the bytes exactly and whether the default */
		hashlb_table_memory_format(c, tm, sizeof(tm));
		printf("tables: up to %s with backends down, of table_memory %s\n", tb, tm);
		for (uint32_t i = 0; i < c->n_services && r == 0; i++) {
			printf("\n");
			r = print_service(&c->services[i]);
		}
	}
	hashlb_config_free(c);
	return r == 0 ? 0 : 1;
}
