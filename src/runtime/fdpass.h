/* SPDX-License-Identifier: MIT */
/*
 * Listening sockets handed to the hashlb that replaces this one: a text
 * with a line per socket, and the sockets themselves (SCM_RIGHTS) riding on
 * the text, in the order of the lines. Used by the admin endpoint's GET
 * /sockets on a Unix socket and by an upgrade in place (SIGUSR2), whose new
 * process reads it with hlb_proxy_take_over_fd().
 */
#ifndef HASHLB_FDPASS_H
#define HASHLB_FDPASS_H
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hashlb/config.h"

/* descriptors per message (the kernel's SCM_MAX_FD is 253) */
#define HLB_FDPASS_PER_MSG 250

/* A line of the text: the sender's pid, the descriptor's number there (what
 * pidfd_getfd(2) takes when none rides along), the address it listens on and
 * the service it listens for (so that a service on port 0 keeps its port). */
#define HLB_FDPASS_LINE "%d %d %s\n"

/*
 * An upgrade in place: the service this line names for a socket of the service manager that no
 * service listens on (passed and never used, or kept after a reload removed its address), sent
 * twice as a listener's single one is. The new process keeps it as the manager passed it, for a
 * reload that adds the address (before, it was lost there, and that reload failed: the
 * manager's socket, still bound there without SO_REUSEPORT, refused the one it bound). Not a
 * service name (config.c's service_name_ok()): a process of before uses it only for a service
 * on that very address, as shared (two descriptors of one socket), and otherwise closes it as a
 * socket taken over that no service uses.
 */
#define HLB_FDPASS_INHERITED "(unused)"

/* After the sockets' lines, one per backend whose state, weight or cap was set at run time
 * (hashlb ctl set), that is down, that flapped of late or that is in slow start: service,
 * backend, then each setting as now/in the config, its health, its flap damping (the
 * penalty now, and whether it holds the backend down), how far its slow start is (ms
 * since it began, "-" if none: a duration, not a time on either process's clock) and the
 * address it connects to (numeric, whatever was written). The new process carries each
 * setting on unless its own config changes it (as a reload does), and starts from that
 * health, damping and ramp (checks then go on) where it connects to the backend at that
 * address, as a reload compares them (a host name of that address is that endpoint): at
 * another one (the same name resolved elsewhere too) it is another endpoint, and starts as a
 * backend the config moved does at a reload. A process of before the damping's, the
 * ramp's or the address's fields ignores them; one that sends no address is taken at its word
 * whatever the address here. Last, a passive-only backend's hold (health.passive_hold, checks
 * off): "LEFT/HOLD/HOLDS", the ms left of the hold it is in (0: over, up on trial), the hold's
 * length and the holds in a row, or "-" if none; a new process where passive-only health still
 * applies goes on with it. */
#define HLB_HANDOVER_LINE                                                                  \
	"set %s %s admin=%s/%s weight=%u/%u max_connections=%u/%u health=%s penalty=%.3f " \
	"held=%s ramp=%s addr=%s hold=%s\n"

/* The most bytes of an HLB_HANDOVER_LINE, its newline left out: two names, an address (as
 * written: HASHLB_HOST_MAX and a port) and the numbers, with room for fields a later version
 * adds. Of a longer line, the fields before that bound are read (hlb_handover_next_line()). */
#define HLB_HANDOVER_LINE_MAX (2 * HASHLB_NAME_MAX + 320 + 320)
/* The bytes of an HLB_HANDOVER_LINE (its newline left out) from which a hashlb of before the
 * addr= field passes the whole line over, its backend's state, weight and cap with it: this
 * version's widest is 735 (two names of HASHLB_NAME_MAX, every number at the most the config
 * and hashlb ctl set allow, an IPv6 address), under it, so that an upgrade in place back to
 * such a version carries every setting. A field added must keep it so. */
#define HLB_HANDOVER_LINE_OLD_MAX 766

/* Of an HLB_HANDOVER_LINE, the settings hashlb ctl set changes: each in force, and as the old
 * process's config has it. */
struct hlb_handover_settings {
	enum hashlb_admin_state a, cfg_a;
	unsigned w, cfg_w, max, cfg_max;
};

/* Of an HLB_HANDOVER_LINE, the fields every version sends. */
struct hlb_handover_set {
	char svc[HASHLB_NAME_MAX + 1], name[HASHLB_NAME_MAX + 1];
	struct hlb_handover_settings s;
	char health[8]; /* "up", "down" or "assumed" */
};

/*
 * The line of <text> that *<at> points to, into <line> (HLB_HANDOVER_LINE_MAX + 1 bytes),
 * its newline left out, and *<at> past it (NULL after the last): each line on its own, as
 * sscanf() measures its whole input first (20,000 lines: 1.5 MB, 1 s a line). Of a line
 * longer than HLB_HANDOVER_LINE_MAX (fields of a later version), the fields before the bound,
 * whole, up to its last space there: false, passed over, if it has none.
 */
bool hlb_handover_next_line(const char **at, char *line);

/* <line> (hlb_handover_next_line()'s), an HLB_HANDOVER_LINE: the fields every version sends
 * into <ret>, 0; -EINVAL if it is none (another line, or one of another hashlb's making).
 * The new process and hashlb ctl upgrade's look at the weights it takes over read it so. */
int hlb_handover_set_parse(const char *line, struct hlb_handover_set *ret);

/* The settings of an HLB_HANDOVER_LINE that a new process takes on (hlb_handover_carries()). */
enum hlb_handover_carry {
	HLB_HANDOVER_CARRY_STATE = 1 << 0,
	HLB_HANDOVER_CARRY_WEIGHT = 1 << 1,
	HLB_HANDOVER_CARRY_MAX_CONNECTIONS = 1 << 2,
};

/*
 * Which of <s>, the settings the old process had for backend <b> of service <svc> of the new
 * process's config, the new process takes on (a mask of enum hlb_handover_carry): each one set
 * at run time there (in force other than its config's) that <b>'s config leaves as the old
 * one's config had it, the rule of a reload; never a weight past HASHLB_WEIGHT_MAX (no
 * hashlb's), nor a cap under kernel steering (which caps nothing). The one rule of the new
 * process (which applies them) and of hashlb ctl upgrade's pre-check (which counts the weights
 * against table_memory before it sends anything): the two cannot disagree.
 */
unsigned hlb_handover_carries(const struct hlb_handover_settings *s,
			      const struct hashlb_service_cfg *svc,
			      const struct hashlb_backend_cfg *b);
/* Whether <s> holds a weight set at run time that a new process may take on (for a backend whose
 * config leaves it as the old one's had it: hlb_handover_carries()): hashlb ctl upgrade's
 * pre-check keeps those lines alone, not every one it reads. */
bool hlb_handover_weight_set(const struct hlb_handover_settings *s);

/* With them, one per backend written with a host name: service, backend, its address as
 * written and the address it connects to. The new process keeps a backend there while its
 * own answer for the name still has that address, as a reload does (DNS servers rotate a
 * record set's order: it took the answer's first). A process of before ignores the line. */
#define HLB_HANDOVER_RESOLVED "resolved %s %s %s %s\n"

/* With them, one per backend whose up a check saw (its checks on, up, not only assumed as at
 * start): its service, its name and the address it connects to (numeric, as on a set line;
 * a process of before wrote it as written, compared so). Its next down is a flap in the new
 * process too (hashlb_backend_flaps_total, flap damping), if it connects to the backend at
 * that address, compared as for a set line (a host name of it is that endpoint); any other
 * up (no line: a backend up only as assumed there, one the old process did not have, or had
 * at another address; or a process of before) is taken as assumed, as at start. A line per
 * service once stood for all its backends up and not listed, and the new config's backends
 * were taken as seen up there too. A backend's HLB_HANDOVER_LINE, if sent, says
 * health=assumed for one up only as assumed; a process of before ignores this line and reads
 * health=assumed as up. */
#define HLB_HANDOVER_SEEN "seen %s %s %s\n"

/* With them, the old process's reload counts, if any: the new one goes on from them (hashlb ctl
 * status's "reloads: N ok", hashlb_reloads_total), read as the service's history, not the
 * process's. A process of before ignores the line, and one from before sends none: 0. */
#define HLB_HANDOVER_RELOADS "reloads ok=%" PRIu64 " failed=%" PRIu64 "\n"

/*
 * An upgrade in place alone (not GET /sockets, where the old process serves on beside the new
 * one): with them, each backend's counters as /metrics shows them (those it carried from the
 * process before it included), for the new process to go on from: service, backend, the index
 * of the first value, then up to HLB_HANDOVER_TOTALS_PER_LINE values of one list whose order is
 * the format (control/pool.c, backend_totals[]: a later version adds to its end), a line per
 * stretch of the list not all 0. A service's are the same without a backend. A process of
 * before ignores the lines (its filter keeps the kinds it knows); one from before sends none: 0.
 */
#define HLB_HANDOVER_TOTALS "totals %s %s" /* then " FIRST VALUE...\n" */
#define HLB_HANDOVER_SERVICE_TOTALS "service-totals %s"
/* Values a totals line holds at most: at 20 digits each, with two names of HASHLB_NAME_MAX, its
 * widest is 731 bytes, under HLB_HANDOVER_LINE_OLD_MAX as a set line is. */
#define HLB_HANDOVER_TOTALS_PER_LINE 10

/*
 * An upgrade in place: after the HLB_HANDOVER_LINE lines, this line, and one more descriptor
 * after the listening sockets: a Unix stream socket on which the old process writes its
 * HLB_HANDOVER_LINE lines again once the new one is ready. Its checks may have
 * found a backend down or up again while the new one started (a slow start: names to resolve,
 * a big config), which the first lines could not say. A hashlb of before closes the socket
 * as it closes anything that is not a listening TCP socket, and ignores the line.
 */
#define HLB_FDPASS_RESYNC "resync\n"
/* The last line the old process writes there. The socket stays open after it: the new one
 * asks the old one on it to close its connections to a backend ("close SERVICE BACKEND\n",
 * hashlb ctl close), which answers "closed N\n", N the connections that were established. */
#define HLB_FDPASS_RESYNC_END "resynced\n"

/* How long hlb_fdpass_send() waits in all for the peer to read what does not fit its socket. */
#define HLB_FDPASS_SEND_MS 10000

/*
 * Write text[0, len) to the Unix stream socket <fd>, with fds[0, n_fds)
 * HLB_FDPASS_PER_MSG at a time: each batch rides on the first byte of the
 * lines that name it, the first of which starts at <lines_off>. Each time the
 * socket is full it waits for room (poll()), as long as the peer reads, up to
 * HLB_FDPASS_SEND_MS for the whole text. False, errno set, if the peer went
 * away (EPIPE, ECONNRESET) or had not read it all by then (ETIMEDOUT).
 */
bool hlb_fdpass_send(int fd, const char *text, size_t len, size_t lines_off, const int *fds,
		     unsigned n_fds);
/* hlb_fdpass_send() by a deadline of the caller's: <due_ms> on CLOCK_MONOTONIC, as
 * hlb_fdpass_due() gives it (one deadline for a text sent in parts, a shorter bound). */
bool hlb_fdpass_send_by(int fd, const char *text, size_t len, size_t lines_off, const int *fds,
			unsigned n_fds, uint64_t due_ms);
/* The CLOCK_MONOTONIC time <ms> from now, in ms: a deadline for hlb_fdpass_send_by(). */
uint64_t hlb_fdpass_due(unsigned ms);
/* hlb_fdpass_send(), and how many of <fds> reached the peer's socket (*<ret_went>), all of them
 * or not: those of a batch whose first byte went did, even if the rest of its text did not. */
bool hlb_fdpass_send_counted(int fd, const char *text, size_t len, size_t lines_off, const int *fds,
			     unsigned n_fds, unsigned *ret_went);

/* How far a text with descriptors went (hlb_fdpass_send_some()): its bytes written, and the
 * descriptors gone with them. Zeroed before the first call. */
struct hlb_fdpass_at {
	size_t off;
	unsigned sent;
};
/*
 * hlb_fdpass_send() without waiting: as much of the text (with its descriptors) as <fd> takes
 * now, from *<at> on, which it advances. 1: all of it written; 0: the socket is full, to be
 * called again once it is writable (POLLOUT), <fds> from at->sent on still open (those before
 * are not read again); -errno (-EPIPE, -ECONNRESET: the peer went).
 */
int hlb_fdpass_send_some(int fd, const char *text, size_t len, size_t lines_off, const int *fds,
			 unsigned n_fds, struct hlb_fdpass_at *at);
/* hlb_fdpass_send_some() from *<at> on, waiting for room (poll()) until <due_ms>, as
 * hlb_fdpass_send_by(). */
bool hlb_fdpass_send_from(int fd, const char *text, size_t len, size_t lines_off, const int *fds,
			  unsigned n_fds, struct hlb_fdpass_at *at, uint64_t due_ms);

/*
 * Whether process <pid> holds the other end of the connected socket <fd>:
 * who asks for the sockets as their taker, not a number anyone may write.
 * On a Unix socket, its SO_PEERCRED; over TCP (both ends in this network
 * namespace: loopback), the socket of /proc/net/tcp or tcp6 with <fd>'s
 * addresses reversed, among <pid>'s descriptors (which only who may ptrace
 * <pid> can list), <pid> running as root or as this process's user: what
 * the taker's own pidfd_getfd(2) of the sockets needs of this process.
 */
bool hlb_fdpass_peer_is(int fd, pid_t pid);
/*
 * Whether the other end of the connected socket <fd> has closed (or shut down writing): a
 * taker that gave up waiting for the answer (hlb_proxy_take_over()) reads none of it, though
 * on a Unix socket its credentials still name it.
 */
bool hlb_fdpass_peer_gone(int fd);

/*
 * After HLB_FDPASS_RESYNC_END, a new process that can take the clients waiting in the old one's
 * queues (max_connections) asks for them with HLB_FDPASS_QUEUE. The old one lends them and
 * sends, the longest waiting first, a line each with its socket riding on it (SCM_RIGHTS,
 * HLB_FDPASS_PER_MSG a message): the service, the ms left of its timeouts.queue, and the
 * addresses its PROXY header named (as hashlb_addr_format() writes them: "IP:PORT
 * [IPv6]:PORT"), "- -" for a service without accept_proxy, and the ms it waited there (its
 * connection log's queue_ms goes on from it; none from an older one: 0); then
 * HLB_FDPASS_QUEUED_END with their count. The new one serves those it can as if it had just
 * accepted them, and answers with an HLB_FDPASS_REFUSED line for each of the others (by its
 * place among the lines, from 0), then HLB_FDPASS_ADOPTED with how many it took.
 * The old one closes its copies of those taken, and serves the others on as if they had never
 * left its queue; all of them if the new one exits first, but for one whose socket's stream
 * moved while lent (the new one read from or wrote to it): that one it resets. Never on a
 * guess: a new one alive that does not answer in LENT_WAIT_MS, or whose channel breaks, or
 * that got only some of the sockets, may serve any it got: the old one closes its copies of
 * those (no reset). A process of before neither asks nor answers: an old one of before
 * ignores the request.
 * The answer goes by one deadline, HLB_FDPASS_SEND_MS; one that cannot go whole, the new one
 * closes the channel after it (a line cut part way, glued to the next, would name another
 * client), and the old one reads a line only whole: a client is served by one process at most.
 */
#define HLB_FDPASS_QUEUE "queue\n"
#define HLB_FDPASS_QUEUED_WORD "queued " /* what starts an HLB_FDPASS_QUEUED line */
#define HLB_FDPASS_QUEUED HLB_FDPASS_QUEUED_WORD "%s %u %s %s %u\n"
#define HLB_FDPASS_QUEUED_END "queued-end %zu\n"
#define HLB_FDPASS_REFUSED "refused %zu\n"
#define HLB_FDPASS_ADOPTED "adopted %zu\n"

#endif
