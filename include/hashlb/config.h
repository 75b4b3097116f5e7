/* SPDX-License-Identifier: MIT */
/*
 * The configuration model: what a YAML config file says, validated.
 * Loaded by src/config/ (libfyaml); read by the forwarder, the control plane
 * and kernel steering. Every field has its default filled in by the loader.
 */
#ifndef HASHLB_CONFIG_H
#define HASHLB_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "hashlb/error.h"
#include "hashlb/table.h"
#include "hashlb/tuple.h"

enum hashlb_admin_state {
	HASHLB_ADMIN_READY = 0, /* takes new clients */
	HASHLB_ADMIN_DRAIN, /* keeps its connections, takes no new clients */
	HASHLB_ADMIN_MAINT, /* closes nothing, takes no traffic, not health-checked */
	HASHLB_ADMIN_MAX
};

enum hashlb_steering {
	HASHLB_STEERING_USERSPACE = 0, /* the io_uring forwarder */
	HASHLB_STEERING_KERNEL, /* XDP/tc program fed the same table */
	HASHLB_STEERING_MAX
};

/* The PROXY protocol header sent to a backend before the client's bytes. */
enum hashlb_proxy_protocol {
	HASHLB_PROXY_OFF = 0,
	HASHLB_PROXY_V1, /* text: "PROXY TCP4 src dst sport dport\r\n" */
	HASHLB_PROXY_V2, /* binary */
	HASHLB_PROXY_MAX
};

/* An address prefix, as accept_proxy_from lists them: "10.0.0.0/8", "::1". */
struct hashlb_prefix {
	sa_family_t family; /* AF_INET or AF_INET6 */
	uint8_t len; /* bits: 0..32 or 0..128 */
	uint8_t addr[16]; /* network order; bits past len are zero */
};

struct hashlb_pos {
	int line, column; /* 1-based; 0 when not from a file */
};

struct hashlb_backend_cfg {
	char *name; /* identity, hashed for placement */
	char *address; /* as written: "a.b.c.d:port", "[v6]:port" or "name:port" */
	/* the address connected to: as written, or what the name resolved to;
	 * addr_len 0 = a name not resolved (hashlb_config_resolve()) */
	struct sockaddr_storage addr;
	socklen_t addr_len;
	struct hashlb_pos address_pos; /* where the address is written */
	uint32_t weight; /* default 1 */
	uint32_t max_connections; /* at once; 0 = unlimited (default); above: next backend */
	enum hashlb_admin_state admin; /* initial state, default ready */
	/* takes clients only while no other backend can (every one that is
	 * not a backup down, drained, in maint or of weight 0); default false */
	bool backup;
	/* a backup's connections are closed when it leaves the table because
	 * another backend can take clients again (HAProxy's on-marked-up
	 * shutdown-backup-sessions); default false */
	bool close_on_return;
	/* each_address: the name in <address> gives one backend per address it
	 * resolves to, named NAME@ADDRESS ("db@10.0.0.7", "db@2001:db8::7"),
	 * each with this entry's settings (nginx's server NAME, Envoy's
	 * STRICT_DNS). Until resolved the entry stands as written; resolving
	 * replaces it with its addresses' backends, in address order, whose
	 * <from_name> is the written name. Default false. */
	bool each_address;
	char *from_name; /* expanded from an each_address entry: its name; else NULL */
	struct hashlb_pos pos; /* where the backend's entry starts */
	/* the answer its name resolved to (an entry without each_address): its
	 * distinct addresses, sorted, at the backend's port (owned; NULL for an
	 * address written as numbers, or a name that kept its address from
	 * before): hashlb_config_keep_addresses() */
	struct sockaddr_storage *answer;
	uint32_t n_answer;
};

struct hashlb_health_cfg {
	bool enabled; /* default true */
	uint32_t interval_ms; /* default 2000 */
	uint32_t timeout_ms; /* default 1000, or interval_ms if that is shorter */
	uint32_t rise; /* default 2 */
	uint32_t fall; /* default 3 */
	/* A check's exchange once connected: <send> is written (if set), then
	 * the reply must start with <expect> (if set) within the timeout.
	 * Bytes, possibly with NULs: lengths count. NULL = none (connect only). */
	char *send, *expect;
	uint32_t send_len, expect_len;
	/* Check this port of each backend's host rather than the backend's own
	 * port (a separate health endpoint: Patroni's REST API, a sidecar);
	 * 0 = the backend's port (default). No PROXY header is sent to it. */
	uint16_t port;
	/* When a backend goes down, close its established connections (their
	 * clients reconnect to their next backend) rather than keep them;
	 * default false (HAProxy's on-marked-down shutdown-sessions). */
	bool close_on_down;
	/* The forwarder's refused or timed-out connects count toward <fall> (default
	 * true). With checks off, <fall> of them in a row take a backend down for
	 * <passive_hold_ms> (default 10000, nginx's fail_timeout), then it is up on
	 * trial: one more failure, down again for twice as long (up to 8 times). */
	bool passive;
	uint32_t passive_hold_ms;
	/* where passive_hold is written (line 0: not written): with checks on or passive off it
	 * is read by nothing, which hashlb_config_warnings() says */
	struct hashlb_pos passive_hold_pos;
	/* where port, send and expect are written (line 0: not written): with checks off they are
	 * read by nothing, which hashlb_config_warnings() says */
	struct hashlb_pos port_pos, send_pos, expect_pos;
	/* where close_on_down is written (line 0: not written): with checks and passive off no
	 * backend goes down, which hashlb_config_warnings() says of a true one */
	struct hashlb_pos close_on_down_pos;
};

/* TCP keepalive on both sockets of every connection (client and backend). */
struct hashlb_keepalive_cfg {
	bool enabled; /* default false; true when a keepalive mapping is written */
	uint32_t idle_s; /* TCP_KEEPIDLE: quiet seconds before the first probe; default 60 */
	uint32_t interval_s; /* TCP_KEEPINTVL: seconds between probes; default 10 */
	uint32_t count; /* TCP_KEEPCNT: unanswered probes that end the connection; default 6 */
	/* TCP_USER_TIMEOUT: data unacknowledged (or a window closed) this long
	 * ends the connection; 0, the default: the kernel's retransmissions. */
	uint32_t user_timeout_ms;
};

/*
 * timeouts.drain: never. A drain that lasts until its connections end by themselves (their
 * idle timeout, hashlb ctl close and a second signal still end them). The largest value, so
 * that the longest of several drains is the largest of them.
 */
#define HASHLB_DRAIN_NEVER UINT32_MAX

/* The end of a drain of <ms> begun at <start> (ms of any clock): UINT64_MAX for never. */
static inline uint64_t hashlb_drain_end(uint64_t start, uint32_t ms)
{
	return ms == HASHLB_DRAIN_NEVER ? UINT64_MAX : start + ms;
}

/* What is left at <now> of a drain that ends at <end> (hashlb_drain_end()), 0 past it, or
 * HASHLB_DRAIN_NEVER */
static inline uint64_t hashlb_drain_left(uint64_t end, uint64_t now)
{
	return end == UINT64_MAX ? HASHLB_DRAIN_NEVER : end > now ? end - now : 0;
}

struct hashlb_service_cfg {
	char *name;
	char *listen; /* as written */
	struct sockaddr_storage listen_addr;
	socklen_t listen_addr_len;
	struct hashlb_table_params table; /* scheme, seed, ring_v, maglev_m */
	enum hashlb_key key; /* default src-ip */
	/* hash_prefix: the client address's leading bits that a src-ip key
	 * hashes; default 32 and 128 (0 means the same: whole addresses) */
	struct hashlb_src_prefix hash_prefix;
	uint32_t connect_timeout_ms; /* default 3000 (6e9dbb3e: one lost SYN sent again at 1 s) */
	uint32_t idle_timeout_ms; /* default 300000; 0 = none */
	/* default 30000: a stop's, and a removed backend's or service's connections;
	 * HASHLB_DRAIN_NEVER: kept until they end by themselves */
	uint32_t drain_timeout_ms;
	uint32_t queue_timeout_ms; /* wait for a backend under its max_connections; 0 = off */
	/* a client that closes (FIN) while it waits in the queue is dropped from
	 * it (HAProxy's abortonclose); one that resets always is. Needs the queue */
	bool abort_on_close;
	uint32_t max_connections; /* default 10000; 0 = unlimited */
	bool max_connections_given; /* in the file, not the default */
	/* open connections one client address may hold; more are closed at
	 * once. 0 = no limit (default); userspace steering only */
	uint32_t max_connections_per_client;
	/* client_prefix: the leading bits of the address that name a client
	 * for max_connections_per_client (and /clients); default 32 and 128 */
	struct hashlb_src_prefix client_prefix;
	/* New connections accepted per second, 0 = no limit (default); a burst of
	 * one second's worth. Over it, accepting pauses: clients wait in the
	 * listen backlog (HAProxy's rate-limit sessions), none is refused. */
	uint32_t max_connection_rate;
	uint32_t connect_retries; /* further backends of the preference list; default 2 */
	uint32_t slow_start_ms; /* weight ramp for a backend that comes up; 0 = off */
	double balance_factor; /* bounded load, e.g. 1.25; 0 = off */
	enum hashlb_steering steering;
	char *steer_interface; /* steering: kernel */
	/* steering: kernel: conntrack entries (hashlb steer --flows), default
	 * HASHLB_STEER_FLOWS_DEFAULT, 1..HASHLB_STEER_FLOWS_MAX */
	uint32_t steer_flows;
	enum hashlb_proxy_protocol proxy_protocol; /* default off; userspace steering only */
	bool accept_proxy; /* clients come through a proxy that sends the PROXY protocol */
	struct hashlb_prefix *proxy_from; /* accept_proxy: who may connect; NULL = anyone */
	uint32_t n_proxy_from;
	/* the clients served (with accept_proxy: as the header names them):
	 * in allow_clients if it is set, and never in deny_clients */
	struct hashlb_prefix *allow_clients, *deny_clients;
	uint32_t n_allow_clients, n_deny_clients;
	struct hashlb_keepalive_cfg keepalive; /* userspace steering only */
	bool log_connections; /* one log line per connection when it ends; default false */
	/* source: the local address of backend connections and checks, port 0;
	 * source_len 0 = the kernel's choice (default) */
	struct sockaddr_storage source;
	socklen_t source_len;
	/* source: client: each backend connection from the client's own address
	 * (IP_TRANSPARENT, as nginx's proxy_bind $remote_addr transparent):
	 * the backends see the clients and must route their replies back
	 * through this host. source_len is then 0. */
	bool source_client;
	struct hashlb_health_cfg health;
	struct hashlb_backend_cfg *backends;
	uint32_t n_backends;
	struct hashlb_pos pos;
	struct hashlb_pos listen_pos; /* where the listen address is written */
	struct hashlb_pos source_pos; /* where source is written (line 0: not written) */
};

/* A duration written as a number without a unit, which reads as milliseconds: where, under
 * which key, and its value (hashlb_config_warnings() says so: "5" meant 5s, and was 5ms) */
struct hashlb_bare_duration {
	struct hashlb_pos pos;
	const char *section; /* static: "timeouts", "health", "keepalive"; NULL for none */
	const char *key; /* static */
	/* the alias through which the value was read ({0, 0}: where it is written) */
	struct hashlb_pos via;
	uint32_t ms;
	/* the same number in seconds is in range and a day at most: suggested */
	bool seconds_fit;
};

struct hashlb_config {
	char *path;
	/* what was parsed (NUL-terminated), to parse again: kept with resolve_every
	 * and a backend that names a host (hashlb_config_names_hosts()), else NULL */
	char *text;
	size_t text_len;
	/* resolve the backends' names again this often, 0 = at start and reload only
	 * (default); between 1s and 1 day */
	uint32_t resolve_every_ms;
	uint32_t workers; /* 0 = auto: one per CPU */
	/* workers set by hashlb run --workers, not by the file: a reload keeps it */
	bool workers_override;
	char *admin; /* "127.0.0.1:9090", "unix:/path" or NULL = off; default 127.0.0.1:9901 */
	struct sockaddr_storage admin_addr; /* admin parsed: AF_INET, AF_INET6 or AF_UNIX */
	socklen_t admin_addr_len; /* 0 when admin is off */
	/* admin set by hashlb run --admin, not by the file: a reload keeps it */
	bool admin_override;
	struct hashlb_pos admin_pos; /* where admin is written (line 0: the default) */
	/* admin written with no value ("admin:" alone, its value commented out, say), which
	 * is off as "off" is, but warned of (hashlb_config_warnings()); not with
	 * HASHLB_LOAD_ADMIN_GIVEN, where the file's admin is not the one in force */
	bool admin_empty;
	/* table_memory: the bytes all services' tables may hold together, each
	 * counted at hashlb_service_cfg_table_bytes_max(); 0 = no cap; default
	 * HASHLB_TABLE_MEMORY_DEFAULT */
	uint64_t table_memory;
	struct hashlb_pos table_memory_pos; /* where it is written (line 0: the default) */
	uint64_t table_bytes; /* what they may hold: the services' counts summed */
	struct hashlb_service_cfg *services;
	uint32_t n_services;
	/* the durations written without a unit other than 0, in file order, each place once
	 * for each setting that reads it (an alias's value is the anchor's) */
	struct hashlb_bare_duration *bare_durations;
	uint32_t n_bare_durations;
};

#define HASHLB_TABLE_MEMORY_DEFAULT (1ull << 30) /* table_memory: 1 GiB */
#define HASHLB_TABLE_MEMORY_MIN (1ull << 20) /* table_memory other than 0: 1 MiB.. */
#define HASHLB_TABLE_MEMORY_MAX (1ull << 40) /* ..1 TiB */

/*
 * Load and validate <path>. On error returns a negative errno and fills
 * <err> with file, line, column and what is wrong (reason HASHLB_ERR_CONFIG;
 * past table_memory, -E2BIG and HASHLB_ERR_MEMORY_CAP, as hashlb_table_memory_add()
 * refuses); unknown keys and wrong types are errors. Every service's table is built
 * once as part of validation, so a config that loads also builds. A file
 * that cannot be read gives reason HASHLB_ERR_SYSTEM and line 0. err->file
 * points to <path> (borrowed: valid as long as the caller's string).
 * The layout is documented in configs/full.yaml.
 */
int hashlb_config_load(const char *path, struct hashlb_config **ret_config,
		       struct hashlb_error *err);
/*
 * The same, with <flags>: HASHLB_LOAD_NO_RESOLVE leaves backends whose
 * address names a host unresolved (addr_len 0), for a command that needs
 * no backend address (ctl, lookup) and must work when DNS does not.
 * hashlb_config_load() resolves them (hashlb_config_resolve(), with
 * HASHLB_RESOLVE_TIMEOUT_MS).
 * HASHLB_LOAD_ADMIN_GIVEN: the admin address in force comes from elsewhere
 * (hashlb run --admin), so the file's, written or the default, is not
 * checked against the services' listen addresses: the caller checks the
 * one in force.
 * HASHLB_LOAD_ADMIN_ONLY: only the admin key is read (the default if it is
 * not written), the rest of the file left unchecked, and the config has no
 * services: for ctl, which needs the address of a hashlb that runs while
 * the file has an error a reload refused. A file that is no YAML mapping
 * is still an error. With a YAML syntax error, the admin key is read if it
 * comes, whole, before the error; if not, -ENOENT with that error in <err>
 * (the key, or the default, may be after it). The same with a byte refused
 * before the YAML is read, the top-level entry that holds it left out whole.
 */
#define HASHLB_LOAD_NO_RESOLVE 1u
#define HASHLB_LOAD_ADMIN_GIVEN 2u
#define HASHLB_LOAD_ADMIN_ONLY 4u
int hashlb_config_load_flags(const char *path, unsigned int flags,
			     struct hashlb_config **ret_config, struct hashlb_error *err);
/*
 * Every error of a config, not only the first: for hashlb check and a start, so that a file
 * with five mistakes is fixed in one round, not five. In file order (line, then column); the
 * first HASHLB_ERRORS_KEPT found are kept, all are counted. Only the errors independent of
 * one another: a value refused is left out of what is checked against it (the check of a
 * backend list that failed to load, of a duration against one refused). All zeroes is empty.
 */
#define HASHLB_ERRORS_KEPT 1000u
struct hashlb_error_list {
	struct hashlb_error *v; /* n of them; file is the path given, borrowed */
	size_t n, cap;
	size_t total; /* every error found, n of them kept */
};
/*
 * hashlb_config_load_flags() that goes on past an error in the config's values and fills
 * <list> (emptied first) with each one, and <err> with the first found (what
 * hashlb_config_load_flags() says). A file that cannot be read, a YAML syntax error (the
 * parser cannot go on past one) and what the names' resolution refuses once the values
 * loaded (a name that does not resolve, answers past table_memory or that put services in
 * a ring: hashlb_config_resolve()) give <err> alone, and an empty <list>. Free <list> with
 * hashlb_error_list_free(), on success too.
 */
int hashlb_config_load_list(const char *path, unsigned int flags, struct hashlb_config **ret_config,
			    struct hashlb_error *err, struct hashlb_error_list *list);
/* The same from a string (hashlb_config_parse_flags()). */
int hashlb_config_parse_list(const char *text, size_t len, const char *name, unsigned int flags,
			     struct hashlb_config **ret_config, struct hashlb_error *err,
			     struct hashlb_error_list *list);
/* Frees what <l> holds and leaves it empty. */
void hashlb_error_list_free(struct hashlb_error_list *l);
/*
 * The same for a config that replaces <last> (a reload; NULL: none runs):
 * hashlb_config_resolve_after() with <last>.
 */
int hashlb_config_load_after(const char *path, unsigned int flags, const struct hashlb_config *last,
			     struct hashlb_config **ret_config, struct hashlb_error *err);
/*
 * hashlb_config_load_after() that lists every error as hashlb_config_load_list() does: a
 * reload refused says how many more the file has (one parse: the loader goes on past the
 * first over the tree it built, where a second load would read and parse the file again).
 */
int hashlb_config_load_after_list(const char *path, unsigned int flags,
				  const struct hashlb_config *last,
				  struct hashlb_config **ret_config, struct hashlb_error *err,
				  struct hashlb_error_list *list);
/*
 * Resolve every backend address written as "name:port" with the system
 * resolver (getaddrinfo: /etc/hosts, DNS, as nsswitch.conf says), all
 * names at once, giving up on those not answered within <timeout_ms>.
 * A backend takes the first address of the answer (the order /etc/gai.conf
 * sets), of its service's source family when the service has a source; one
 * with each_address becomes one backend per distinct address of the answer
 * (the lowest HASHLB_EACH_ADDRESS_MAX, whatever the answer's order). Numeric addresses are
 * left as written. On error (a name that does not resolve or not in time, or resolves to the
 * service's own listen address) returns a negative errno, <err> names the file:line:column of
 * the address and what failed, and <c> is fit only for hashlb_config_free(). The names
 * resolved but refused: the tables past table_memory, -E2BIG, reason HASHLB_ERR_MEMORY_CAP, at
 * the service (hashlb_table_memory_add()); a service past HASHLB_BACKENDS_MAX backends once
 * its each_address names expand, -EINVAL, reason HASHLB_ERR_TOO_MANY_BACKENDS, at its first
 * backend's address; an expanded backend named as another, -EINVAL, HASHLB_ERR_DUPLICATE_NAME,
 * at its entry's address; a table the expanded backends make refused (a Maglev table_size
 * below them, a ring past the build's cap), -EINVAL with the table's reason, at the first
 * backend's address; services that the answers make forward to one another in a ring, -EINVAL,
 * HASHLB_ERR_LOOP, at the address of the backend that closes it. Only a name's own failure has
 * reason HASHLB_ERR_CONFIG.
 */
#define HASHLB_RESOLVE_TIMEOUT_MS 5000
#define HASHLB_EACH_ADDRESS_MAX 1024u
int hashlb_config_resolve(struct hashlb_config *c, uint32_t timeout_ms, struct hashlb_error *err);
/*
 * The same for <c>, which replaces <last> (a reload; NULL: none runs): a
 * backend <last> has, of the same service, name and address as written,
 * stays at the address <last> gives it while its name's answer still has
 * it, in whatever order (DNS servers rotate a record set's order): only an
 * answer without it moves the backend, to the answer's first address. A
 * reload that does not change a backend does not move its clients. A name
 * that fails fails <c> as in hashlb_config_resolve(). With <last>, the
 * lookups still running count: it waits, up to <timeout_ms>, until none of
 * its names is still asked (by a round or a reload) and one of the reloads'
 * 16 threads is free, then asks them as hashlb_config_resolve_again() does
 * (a name still asked fails <c>, "names not asked: ..." if the 16 threads of
 * earlier reloads still run). The rounds have 16 threads of their own.
 */
int hashlb_config_resolve_after(struct hashlb_config *c, uint32_t timeout_ms,
				const struct hashlb_config *last, struct hashlb_error *err);
/*
 * The same without waiting, for an event loop: _start() asks every name of
 * <c> (which must stay as it is until _finish()); *ret_job is NULL when
 * <c> names no host. _done() says whether every name is answered (poll it).
 * _finish() takes the answers into <c> as hashlb_config_resolve() does, a
 * name not answered yet failing with "no answer within <timeout_ms> ms",
 * and frees <job> (NULL accepted: returns 0).
 */
struct hashlb_resolve;
int hashlb_config_resolve_start(const struct hashlb_config *c, struct hashlb_resolve **ret_job,
				struct hashlb_error *err);
bool hashlb_resolve_done(struct hashlb_resolve *job);
/*
 * _start() for a round of resolve_every. A getaddrinfo() cannot be
 * interrupted: the lookups of a job finished before they were answered run
 * on until the resolver's own timeout. A name whose lookup (of any job,
 * for the same family) still runs is not asked again, it fails ("was not asked again: its
 * lookup of an earlier round or reload still waits on the resolver", -EBUSY, kept
 * by _finish_keep()), and the others are asked by at most 16 threads of
 * rounds alive in the process, those left running included: -EBUSY ("round
 * skipped: ...") if all 16 still run and a name is to be asked.
 */
int hashlb_config_resolve_again(const struct hashlb_config *c, struct hashlb_resolve **ret_job,
				struct hashlb_error *err);
/*
 * A round held while a reload runs (its lookups would hold the reload's,
 * of the same names): _pause() has <job>'s threads take no further name
 * (a lookup under way goes on, its answer kept); _resume(), after a reload
 * that failed, asks the names not asked yet, as _again() would (a name
 * whose lookup still runs fails as not asked again): a failed reload does
 * not cost the round its answers, nor the names a period. -EAGAIN if no
 * thread could be started.
 */
void hashlb_resolve_pause(struct hashlb_resolve *job);
int hashlb_resolve_resume(struct hashlb_resolve *job, struct hashlb_error *err);
int hashlb_config_resolve_finish(struct hashlb_config *c, struct hashlb_resolve *job,
				 uint32_t timeout_ms, struct hashlb_error *err);
/*
 * _finish() for names resolved again (resolve_every) in <c>, parsed from
 * the text of <last>, the config running: a name that does not resolve, or
 * not in time, keeps what <last> has for it (a backend its address, an
 * each_address entry its backends' addresses) rather than failing the rest,
 * and the first such failure is in <failed> (reason HASHLB_ERR_NONE if
 * none). A name <last> has nothing for, and any other error, fail as in
 * _finish().
 */
int hashlb_config_resolve_finish_keep(struct hashlb_config *c, struct hashlb_resolve *job,
				      uint32_t timeout_ms, const struct hashlb_config *last,
				      struct hashlb_error *failed, struct hashlb_error *err);
/*
 * An upgrade in place: the address that the hashlb this one takes over from
 * connects to, for a backend written with a host name (<svc>, <name> and
 * <address> as written). A backend of <c> of the same service, name and
 * address as written whose name's answer has that address too stays there,
 * as at a reload: a DNS server's rotation moved it to the answer's first
 * address (its clients to another server). Sorts <v>; how many moved.
 */
struct hashlb_addr_kept {
	const char *svc, *name, *address;
	struct sockaddr_storage addr;
};
uint32_t hashlb_config_keep_addresses(struct hashlb_config *c, struct hashlb_addr_kept *v,
				      uint32_t n);
/* The same from a string; <name> stands for the file in error positions. */
int hashlb_config_parse(const char *text, size_t len, const char *name,
			struct hashlb_config **ret_config, struct hashlb_error *err);
/* With <flags>: HASHLB_LOAD_ADMIN_GIVEN (the others are the loader's). */
int hashlb_config_parse_flags(const char *text, size_t len, const char *name, unsigned int flags,
			      struct hashlb_config **ret_config, struct hashlb_error *err);
/* Accepts NULL. */
void hashlb_config_free(struct hashlb_config *c);
/*
 * What <c> accepts but is likely a mistake, for hashlb check to print and the daemon to log at
 * start and at each reload: two backends of a service at one address (resolved; an
 * IPv4-mapped IPv6 address as the IPv4 address it is). Valid, so not refused: each name takes
 * its own share of the table, so that host takes the shares of both, a weight written twice
 * (and two names of a DNS answer may well meet at one address for a while, which must not
 * fail a reload). Fills the first <max> of <ret_warnings> (file, line and column of the later
 * backend's address, reason HASHLB_ERR_CONFIG, and what, naming both) and returns how many
 * there are in all, or -ENOMEM.
 * First an admin key written with no value ("admin:" alone): off, as documented, but a value
 * commented out turns hashlb ctl and /metrics off without a word, so it says to write off.
 * Then, in file order, each duration written as a number without a unit other than 0
 * (c->bare_durations): it reads as milliseconds, as documented and as HAProxy has it, so old
 * files keep loading, but "connect: 5" or "idle: 300" most likely meant seconds; the warning
 * says what it was read as and how to write either ("5 read as 5ms: write 5ms to keep it,
 * or 5s"). Then, service by service: one no backend of which takes clients (each of
 * weight 0, drain or maint, not all of weight 0); health.passive_hold where nothing reads it
 * (checks on, or passive off); health.port, send or expect with checks off; a true
 * health.close_on_down with checks and passive off; a backend at the admin endpoint of a
 * service listening beyond loopback (its clients reach the endpoint, which has no
 * authentication); and the shared addresses above. Each at
 * the key it is about (the service, for the first; the later address, for the last).
 */
int hashlb_config_warnings(const struct hashlb_config *c, struct hashlb_error *ret_warnings,
			   size_t max);
/* Whether a backend of <c> is written with a host name, not an address. */
bool hashlb_config_names_hosts(const struct hashlb_config *c);

/*
 * Why <name> may not name a network interface (into <buf>, <size> bytes: 256 hold it,
 * the name quoted up to its 64th byte), or NULL if it may, as the kernel's
 * dev_valid_name() has it. The kernel reads "eth0:1", an address label, as eth0 where it
 * looks an interface up by name (if_nametoindex()): taken, "lo" and "lo:1" were two
 * interfaces to the one-service-per-interface check, and one program on lo, the second
 * service taking it from the first; hashlb steer -i lo:1 attached to lo.
 */
const char *hashlb_ifname_refusal(const char *name, char *buf, size_t size);

/*
 * Whether <name> may name a backend: HASHLB_BACKEND_NAME_RULE, which every
 * message refusing one says (the config, hashlb table and lookup).
 */
bool hashlb_backend_name_ok(const char *name);
#define HASHLB_BACKEND_NAME_RULE                                                \
	"1 to 255 bytes without spaces, '=' or '\"' (nor control or invisible " \
	"characters), and not '-' alone (what hashlb writes for no backend)"

/*
 * The bytes of UTF-8 text <s> past the columns it takes on a terminal: added
 * to a printf field's width ("%-*s"), a name beyond ASCII pads to its width,
 * and the columns after it stay aligned: a wide (CJK) character takes two, a
 * combining one none (wcwidth() of the C.UTF-8 locale; one each where the
 * host has no such locale), a byte that is no UTF-8 one. Thread-safe.
 */
int hashlb_text_extra_bytes(const char *s);

/* "ready", "drain", "maint"; NULL if invalid. */
const char *hashlb_admin_state_name(enum hashlb_admin_state s);
/* Also accepts "maintenance", "draining", "up". -EINVAL if unknown. */
int hashlb_admin_state_parse(const char *s, enum hashlb_admin_state *ret_state);

/* "userspace", "kernel"; NULL if invalid. */
const char *hashlb_steering_name(enum hashlb_steering s);

/* "off", "v1", "v2"; NULL if invalid. */
const char *hashlb_proxy_protocol_name(enum hashlb_proxy_protocol v);
/* The inverse; -EINVAL if unknown. */
int hashlb_proxy_protocol_parse(const char *s, enum hashlb_proxy_protocol *ret_version);

/*
 * Parse a numeric socket address: "a.b.c.d:port" or "[v6addr]:port" (no
 * DNS, the port is required; port 0 only when <allow_port0>). Returns 0 or
 * -EINVAL; <ret_addr> and <ret_len> are written only on success.
 */
int hashlb_addr_parse(const char *s, bool allow_port0, struct sockaddr_storage *ret_addr,
		      socklen_t *ret_len);
/*
 * Parse "unix:PATH" <s>, an admin endpoint's address (the admin key, hashlb run and ctl
 * --admin): PATH absolute and shorter than sun_path. 0; or -EINVAL with the condition it
 * fails said in <why> (<why_len> bytes). <ret_addr> and <ret_len> are written only on success.
 */
int hashlb_unix_addr_parse(const char *s, struct sockaddr_storage *ret_addr, socklen_t *ret_len,
			   char *why, size_t why_len);
/*
 * Why <s> is not an address taken (by hashlb_addr_parse(), or with <names_ok>
 * by hashlb_name_addr_parse() too), as the config says it: "missing ':PORT'",
 * "a port alone: write ADDR:8080, ...". A static text or <buf> (<len> bytes).
 */
const char *hashlb_addr_explain(const char *s, bool allow_port0, bool names_ok, char *buf,
				size_t len);

/*
 * Why <s> is not an address as hashlb_tuple_parse_src() takes it: ADDR, ADDR:PORT,
 * [V6]:PORT or a bare IPv6 address (a client, lookup's vip), told as
 * hashlb_addr_explain() tells it ("a URL: write it without 'http://', ...").
 * A static text or <buf> (<len> bytes).
 */
const char *hashlb_tuple_explain(const char *s, char *buf, size_t len);
/*
 * After "<s> has no port, and the key hashes it: give ADDR:PORT": how an IPv6
 * address takes a port, if <s> has a ':' (an IPv6 one, its port not bracketed
 * off); else "".
 */
const char *hashlb_tuple_port_hint(const char *s);

/*
 * Whether two listen addresses would take the same port: equal (an
 * IPv4-mapped address counting as the IPv4 address it maps), or one a
 * wildcard covering the other ([::] covers both families: hashlb's IPv6
 * listeners are dual-stack). Port 0 never clashes.
 */
bool hashlb_listen_clash(const struct sockaddr_storage *a, const struct sockaddr_storage *b);
/*
 * Record in <err>, and return, <ret>: a listening socket of <service>
 * (NULL: the admin endpoint) that cannot listen on <where>, an address as
 * hashlb_addr_format() writes it or "unix:PATH". An address in use is
 * another process's (hashlb's own sockets join one another by SO_REUSEPORT,
 * and the config refuses two of its own there), an address not available
 * one no interface has, a permission refused a privileged port bound without
 * CAP_NET_BIND_SERVICE or a Unix socket's directory: the message says so, at
 * start as at a reload (the
 * proxy's listener probe), for a service's address as for the admin
 * endpoint's.
 */
int hashlb_listen_err(struct hashlb_error *err, int ret, const char *service, const char *where);
/*
 * Whether service <s> would listen where an admin endpoint at <admin> (<admin_len> bytes, 0
 * for none) does, a TCP one: both listen with SO_REUSEPORT, and the kernel would share the
 * service's clients out with the admin endpoint. The one check of the loader (the config's
 * admin address), of hashlb run --admin and of a reload (the address the endpoint serves).
 */
bool hashlb_admin_clash(const struct sockaddr_storage *admin, socklen_t admin_len,
			const struct hashlb_service_cfg *s);

/* The largest max_connections (a service's, a backend's, per client) the config and
 * hashlb ctl set take. */
#define HASHLB_MAX_CONNECTIONS_MAX (1u << 24)

/*
 * Why <a> is refused as an address hashlb binds or connects to (the config's, hashlb run's
 * and ctl's --admin), NULL if it is not: a link-local IPv6 address (fe80::/10) means nothing
 * without its zone, the interface, which no address here takes, and bind() and connect()
 * refuse it (EINVAL): a listener would fail at start with no reason given, a backend stay
 * down for ever. One text, "a link-local address, usable only with a zone ...", for each.
 */
const char *hashlb_addr_link_local(const struct sockaddr_storage *a);
/* Whether <a> is the wildcard address of its family (0.0.0.0, [::]; [::ffff:0.0.0.0] too). */
bool hashlb_addr_is_any(const struct sockaddr_storage *a);
/* Whether <a> is a loopback address (127.0.0.0/8, [::1], [::ffff:127.x.y.z]); not a Unix
 * socket's. */
bool hashlb_addr_is_loopback(const struct sockaddr_storage *a);
/* <a>'s port (host order); 0 if it is neither IPv4 nor IPv6. */
uint16_t hashlb_addr_port(const struct sockaddr_storage *a);
/*
 * Whether a service that listened at <was> and listens at <now> changes the destination its
 * clients connect to, which the 4-tuple key hashes: another port (a port-0 listener that
 * moves gets another), or another address where neither is a wildcard (an IPv4 address and
 * its IPv4-mapped form are one). A wildcard's connections hash the address each one
 * reached, IPv4 IPv4-mapped on a dual-stack [::] too, so from a wildcard to one of its
 * addresses on the same port (or back) the clients that connect as before hash as before.
 */
bool hashlb_listen_moves_destination(const struct sockaddr_storage *was, socklen_t was_len,
				     const struct sockaddr_storage *now, socklen_t now_len);

/*
 * Why the destination a 4-tuple key hashes is not <s>'s listen address as
 * written (a wildcard, port 0 unless <bound_known>, PROXY headers): a
 * lookup must then be told the address clients connect to. NULL if it is,
 * or if the key does not hash the destination.
 */
const char *hashlb_service_dest_unknown(const struct hashlb_service_cfg *s, bool bound_known);

/* A port as written after an address's colon: digits alone, 1..65535 (0 too if <allow_port0>).
 * -EINVAL otherwise; <ret_port> is written only on success. */
int hashlb_port_parse(const char *s, bool allow_port0, uint16_t *ret_port);

/* Whether a backend's <address>, as written, names a host (resolved when loaded). */
bool hashlb_addr_is_name(const char *address);

/* <a> as a config writes it: "a.b.c.d:port", "[v6]:port"; "-" if neither
 * family (a name not resolved). HASHLB_ADDR_STRLEN bytes are enough. */
#define HASHLB_ADDR_STRLEN (INET6_ADDRSTRLEN + 8)
void hashlb_addr_format(const struct sockaddr_storage *a, char *buf, size_t len);

/*
 * Parse "name:port" where name is an RFC 1123 host name (letters, digits,
 * '-' and '.'; its last label not all digits) of at most HASHLB_HOST_MAX
 * bytes, and port 1..65535. Nothing is resolved. -EINVAL otherwise;
 * <ret_host> and <ret_port> are written only on success.
 */
#define HASHLB_HOST_MAX 253u
int hashlb_name_addr_parse(const char *s, char ret_host[HASHLB_HOST_MAX + 1], uint16_t *ret_port);

/*
 * Parse an address prefix: "a.b.c.d/N", "v6addr/N", or an address alone
 * (the one address: /32, /128). -EINVAL if malformed, -EDOM if bits past
 * the length are set ("10.0.0.1/8": a typo more often than not).
 */
int hashlb_prefix_parse(const char *s, struct hashlb_prefix *ret_prefix);
/*
 * A list of prefixes compiled for lookup (sorted, merged address ranges):
 * O(log n) per address. -EINVAL for a prefix of no known family or length,
 * -ENOMEM; <ret_set> is written only on success.
 */
struct hashlb_prefix_set;
int hashlb_prefix_set_new(const struct hashlb_prefix *p, uint32_t n,
			  struct hashlb_prefix_set **ret_set);
/*
 * Whether <sa> (AF_INET or AF_INET6) lies in one of the set's prefixes. An
 * IPv4 address matches IPv4 prefixes only, an IPv6 address IPv6 prefixes;
 * an IPv4-mapped IPv6 address (a v4 client of a [::] listener) matches as
 * the IPv4 address it is, too.
 */
bool hashlb_prefix_set_match(const struct hashlb_prefix_set *set, const struct sockaddr *sa);
void hashlb_prefix_set_free(struct hashlb_prefix_set *set);
/* <p> as hashlb_prefix_parse() reads it back ("a.b.c.d/N", "v6/N") into <buf>. */
#define HASHLB_PREFIX_STRLEN 50 /* INET6_ADDRSTRLEN + "/128" */
void hashlb_prefix_format(const struct hashlb_prefix *p, char *buf, size_t len);

/*
 * <p>'s scheme, its parameter and seed under the config's names, into <buf>: "maglev
 * table_size=65537 seed=0", "ring vnodes=160 seed=0". What hashlb check, hashlb table and
 * hashlb ctl table print, so that one grep finds it in each.
 */
#define HASHLB_TABLE_PARAMS_STRLEN 64
void hashlb_table_params_format(const struct hashlb_table_params *p, char *buf, size_t len);
/*
 * <ms> in the largest unit that writes it exactly, as the config takes a duration back: "5m",
 * "30s", "1500ms", "0ms". Every configured duration hashlb prints is written so.
 */
#define HASHLB_DURATION_STRLEN 32
void hashlb_duration_format(uint64_t ms, char *buf, size_t len);
/*
 * <c>'s table_memory wherever it is said to a user: the errors of a table past it (the
 * loader's, a reload's, an upgrade's, POST /set's), hashlb check and hashlb ctl status.
 * hashlb_bytes_format()'s figure, then the bytes exactly (what the errors' sums are counted
 * in), ", the default" when the config does not give it: "4 MiB (4194304 bytes)",
 * "1 GiB (1073741824 bytes, the default)"; "0 (no cap)".
 */
#define HASHLB_TABLE_MEMORY_STRLEN 64
void hashlb_table_memory_format(const struct hashlb_config *c, char *buf, size_t len);
/*
 * <bytes> for people, as hashlb check and hashlb ctl status print the tables' memory and
 * table_memory: "N bytes" under 1 KiB, else in the largest of KiB, MiB, GiB, TiB it reaches,
 * whole where it is a whole number of that unit ("1 GiB", as table_memory's default; not
 * "1024.0 MiB"), else to one decimal, cut, not rounded ("384.3 KiB"; "1023.9 KiB" a byte short
 * of 1 MiB, never "1024.0 KiB"). JSON says the number of bytes.
 */
#define HASHLB_BYTES_STRLEN 32
void hashlb_bytes_format(uint64_t bytes, char *buf, size_t len);
/* A drain of <ms> as the config writes it: hashlb_duration_format()'s, or "never". */
void hashlb_drain_format(uint32_t ms, char *buf, size_t len);
/*
 * A drain's <ms>, whole or left (hashlb_drain_left()), as a log line's drain_timeout_ms=
 * gives it: the number, or "never" for HASHLB_DRAIN_NEVER (and past it) rather than a
 * timestamp overflowed to a number of 49 days. <buf> or a constant.
 */
#define HASHLB_DRAIN_MS_STRLEN 24
const char *hashlb_drain_ms_text(uint64_t ms, char buf[HASHLB_DRAIN_MS_STRLEN]);

/* The service called <name>, or NULL. */
const struct hashlb_service_cfg *hashlb_config_service(const struct hashlb_config *c,
						       const char *name);

/* Whether passive-only health applies to a service (docs/control.md, "Health"), else why not. */
enum hashlb_passive_only {
	HASHLB_PASSIVE_ONLY_APPLIES = 0, /* checks off, passive on, more than one backend */
	HASHLB_PASSIVE_ONLY_CHECKS_ON, /* the checks decide; failed connects count toward fall */
	/* passive: false: every backend up, whatever its connects */
	HASHLB_PASSIVE_ONLY_PASSIVE_OFF,
	/* the service's only backend, never held out (nginx's rule): it would refuse every
	 * client for the hold, though it may be back already */
	HASHLB_PASSIVE_ONLY_LONE_BACKEND,
	HASHLB_PASSIVE_ONLY_MAX
};

/*
 * Whether passive-only health applies to <s>: the one rule that the pool (which holds
 * backends), hashlb check (which prints it and warns of a health.passive_hold nothing reads)
 * and the docs follow. Kernel steering is not looked at: the daemon's own listener on the VIP
 * connects while the kernel has no table of the service.
 */
enum hashlb_passive_only hashlb_service_passive_only(const struct hashlb_service_cfg *s);

/*
 * The backup rule over <n> backends: while any that is not a backup is up
 * (not <down>) with a weight, every backup is down. Applied to <down>.
 */
void hashlb_backup_rule(bool *down, const bool *backup, const uint32_t *weight, uint32_t n);

/*
 * Build <s>'s table as configured: every backend with its weight, the ones
 * whose admin state is not ready marked down (health is not known here),
 * and those marked in <also_down> (NULL, or s->n_backends flags: what
 * hashlb lookup --down takes as failed), then the backup rule over all of
 * them, as the running hashlb applies it. Backend i of the table is
 * s->backends[i]. Same return convention as hashlb_table_build().
 */
int hashlb_service_cfg_build_table(const struct hashlb_service_cfg *s, const bool *also_down,
				   struct hashlb_table **ret_table, struct hashlb_error *err);

/* 0 if hashlb_service_cfg_build_table(<s>, NULL) would build, else its error
 * (hashlb_table_check(): nothing built). */
int hashlb_service_cfg_check_table(const struct hashlb_service_cfg *s, struct hashlb_error *err);
/* The same with <weights> (s->n_backends of them, in order) in place of the config's: the
 * weights a reload serves with where some were set at run time (hashlb ctl set). */
int hashlb_service_cfg_check_weights(const struct hashlb_service_cfg *s, const uint32_t *weights,
				     struct hashlb_error *err);

/*
 * The most bytes <s>'s table holds in the daemon, whichever backends are
 * down (hashlb_table_bytes_max() of its backends and weights): what
 * table_memory counts it at. <s> is one hashlb_service_cfg_check_table()
 * accepts; nothing is built. UINT64_MAX short of memory (so refused).
 */
uint64_t hashlb_service_cfg_table_bytes_max(const struct hashlb_service_cfg *s);
/* The same with <weights> (s->n_backends of them, in order) in place of the config's: those
 * set at run time (hashlb ctl set), which table_memory bounds as it bounds the config's. */
uint64_t hashlb_service_cfg_weights_bytes_max(const struct hashlb_service_cfg *s,
					      const uint32_t *weights);
/* The same with the weight of backend <i> of <s> given by <weight>(<arg>, <s>, <i>): where the
 * weights in force are kept elsewhere than in an array (a pool's backends, those an upgrade
 * takes over), read one by one, no array of them built. */
typedef uint32_t (*hashlb_backend_weight_fn)(void *arg, const struct hashlb_service_cfg *s,
					     uint32_t i);
uint64_t hashlb_service_cfg_weights_bytes_max_fn(const struct hashlb_service_cfg *s,
						 hashlb_backend_weight_fn weight, void *arg);

/* Whose weights a table counted against table_memory has: what its refusal says. */
enum hashlb_table_memory_by {
	HASHLB_TABLE_MEMORY_CONFIG, /* the config's (the loader) */
	HASHLB_TABLE_MEMORY_RESOLVED, /* the config's, its names resolved again */
	HASHLB_TABLE_MEMORY_RUN_TIME, /* some set at run time (hashlb ctl set), kept by a reload */
	/* those an upgrade takes over from the hashlb it replaces */
	HASHLB_TABLE_MEMORY_TAKEN_OVER,
	HASHLB_TABLE_MEMORY_BY_MAX,
};

/*
 * table_memory's rule, the loader's, a resolve_every round's, a reload's, an upgrade's and
 * hashlb ctl set's alike: <own>, the most bytes <s>'s table may take with the weights <by>
 * says (hashlb_service_cfg_weights_bytes_max()), added to *<sum>, those of the services
 * counted before it (saturated). 0 while *<sum> stays within c->table_memory (0: no cap);
 * past it -ENOMEM if <own> is UINT64_MAX (not counted), else -E2BIG with <err> (may be NULL)
 * saying so in the loader's words (HASHLB_ERR_MEMORY_CAP), at the service, or at the
 * table_memory line for weights set at run time where the config writes it. <err>'s file
 * is left to the caller.
 */
int hashlb_table_memory_add(const struct hashlb_config *c, const struct hashlb_service_cfg *s,
			    uint64_t own, enum hashlb_table_memory_by by, uint64_t *sum,
			    struct hashlb_error *err);

#endif
