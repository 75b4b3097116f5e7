#!/usr/bin/env python3
"""hashlb run with steering: kernel, when backends fail or change state: in network
namespaces (tests/steer/topo.py), the kernel path keeps following the daemon's tables when a
backend's host is gone (no neighbour entry); a table refused because a backend's MAC is not known
yet is published once it is, with no other change, and one refused because a backend is routed
(in none of the interface's subnets) says so; a backend in maint, and a backup when the others
return, keep their established connections; a ring whose backup outweighs its primaries has a
program loaded for the backup, grown neither by a reload nor by the failover; a stop drains the connections held through the kernel
path up to timeouts.drain, new clients refused (the VIP the program serves: the old one while a
reload's new listen is not published), ends as soon as they have (closed by their client), and a
second SIGTERM ends that at once, and with timeouts.drain: never only they end
it; a worker's failure
exits at once, the program left attached, steering, for the restart; a daemon restarted after SIGKILL takes its
orphaned program over, never one a live daemon drives, and one a foreground hashlb steer drove is
attached once that is stopped; an upgrade takes over the program the
old daemon drove, at tc, though another hashlb program is at the XDP hook; /metrics shows the kernel path's
counters, exact and never lower across a reload; a reload of listen and a backend publishes one
table, logged once, and the new VIP is steered; steering_flows sizes the conntrack table, and
a reload that changes it keeps the program and its flows; a reload or a weight set whose table outgrows the
program grows it in place, its flows kept, every service's table on the interface carried (at the
reload's first publication, by the new config, if the lock held at its check is let go; a growth
failing there, the table fitting, said once), and so
does a takeover of an orphan too small for the config; a Maglev service's program has ring maps of
the minimum, grown by a reload that makes it a ring, and one that also moves it to another interface
publishes nothing into the program it leaves; hash_prefix sends the clients of one
IPv6 /64 or IPv4 /24 to one backend, the one hashlb lookup -c names, until a reload parts them;
two services on one interface (under one name or two, an altname) share its program, a table
each, and a reload removing one leaves the other's flows, one swapping their listen addresses
gives each its new VIP; a reload adding a second service on an interface a service is alone on
replaces its program of one table by one of a table each, in place, its flows kept (tried again
while another publication holds the lock; after an upgrade, once the replaced hashlb stops);
an upgrade adding a service before
another takes no table that serves a VIP, and a stop of one that drains 0 s takes its VIP out
while the other drains, and two that drain at once each end with their own flows, one scan of
the program a look for both; each of two services sharing a program counts its own conntrack entries
in /metrics and ctl status, beside the interface's, adding up to it in each scrape while flows
arrive; a stop's drain never cuts a flow quiet for
less than timeouts.idle; an
interface deleted and created again gets its program back, and one missing at the start gets it
when it appears; the program's publication lock held by another keeps the table in force, not the
control loop; another hashlb version's program on the interface is refused, and once it is detached
this hashlb's is attached without a reload; a table retried when its interface goes away keeps
no timer firing until the interface is back.
Each scenario starts its own daemon; the namespaces are removed even when it fails."""
import collections
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import topo as T  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from promtext import parse_prometheus  # noqa: E402
from shims import shim_wrap  # noqa: E402
import gdbfail  # noqa: E402

HASHLB = os.environ.get("HASHLB", "build/src/cli/hashlb")
PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer.py")
# The conntrack capacity of steering_flows' default, 65,536 rounded up to 6 x a power of two
# (docs/steering.md).
FLOWS_MAX = 98304
failures = []

# New connections from the client namespace: {backend name or error: count}.
CONNECT = """
import collections, json, socket, sys
res = collections.Counter()
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET)
    s.settimeout(2)
    try:
        s.connect((sys.argv[1], int(sys.argv[3])))
        res[s.makefile('rb').readline().decode().strip() or 'empty'] += 1
    except OSError as e:
        res[type(e).__name__] += 1
    s.close()
print(json.dumps(res))
"""


# A connection from each source address: {address: backend name or error}.
CONNECT_FROM = """
import json, socket, sys
out = {}
for src in sys.argv[3:]:
    s = socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET)
    s.settimeout(2)
    try:
        s.bind((src, 0))
        s.connect((sys.argv[1], int(sys.argv[2])))
        out[src] = s.makefile('rb').readline().decode().strip() or 'empty'
    except OSError as e:
        out[src] = type(e).__name__
    s.close()
print(json.dumps(out))
"""


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)
    return cond


def connect_count(topo, n, vip=T.VIP):
    p = T.sh(sys.executable, "-c", CONNECT, vip, str(n), str(T.VIP_PORT), ns=topo.client,
             timeout=60)
    return collections.Counter(json.loads(p.stdout))


class Daemon:
    """hashlb run -c <yaml> in the LB namespace, its log followed by a thread."""

    def __init__(self, topo, services_yaml, extra=""):
        self.topo = topo
        self.admin = tempfile.mktemp(prefix="hlbrun-", suffix=".sock")
        f = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
        f.write(f"admin: unix:{self.admin}\nworkers: 1\n{extra}services:\n{services_yaml}")
        f.close()
        self.path = f.name
        self.lines, self.pos = [], 0
        self.proc = None
        self.prefix = []  # a command that runs hashlb (env VAR=...)
        self.args = []  # hashlb run's options (--log-level debug ...)

    def start(self):
        self.proc = self.topo.spawn(self.topo.lb,
                                    [*self.prefix, HASHLB, "run", "-c", self.path, *self.args],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, args=(self.proc.stderr,), daemon=True).start()
        return self

    def _read(self, stream):
        for line in stream:
            if os.environ.get("HLBST_VERBOSE"):
                print("run:", line.rstrip(), flush=True)
            self.lines.append(line)

    def wait_log(self, what, timeout):
        """The next log line holding <what>, or None after <timeout> seconds (0: among
        the lines logged so far)."""
        end = time.monotonic() + timeout
        while True:
            while self.pos < len(self.lines):
                line = self.lines[self.pos]
                self.pos += 1
                if what in line:
                    return line
            if time.monotonic() >= end:
                return None
            time.sleep(0.02)

    def wait_each(self, whats, timeout):
        """Wait for a log line holding each of <whats>, in any order (two backends' checks
        race); the ones still missing after <timeout> seconds."""
        missing = list(whats)
        end = time.monotonic() + timeout
        while missing and time.monotonic() < end:
            while missing and self.pos < len(self.lines):
                line = self.lines[self.pos]
                self.pos += 1
                missing = [w for w in missing if w not in line]
            time.sleep(0.02)
        return missing

    def skip_log(self):
        self.pos = len(self.lines)

    def edit(self, old, new):
        """Its config file with <old> replaced by <new> (for a reload or an upgrade)."""
        with open(self.path) as f:
            text = f.read()
        with open(self.path, "w") as f:
            f.write(text.replace(old, new))

    def ctl(self, *args):
        return T.sh(HASHLB, "ctl", "-a", f"unix:{self.admin}", *args, ns=self.topo.lb,
                    check=False)

    def reload_edit(self, old, new, logged, tag):
        """Its config with <old> replaced by <new>, reloaded: fails <tag> unless hashlb ctl
        reload succeeds and <logged> is logged after it."""
        self.edit(old, new)
        self.skip_log()
        p = self.ctl("reload")
        check(p.returncode == 0 and self.wait_log(logged, 10) is not None,
              f"{tag}: {p.stdout} {p.stderr}")

    def stop(self, steering=True):
        """Stop it; first, if it drives the program (<steering>), which detaches, wait until
        the connections through the VIP have ended (topo.py, wait_closed)."""
        if self.proc and self.proc.poll() is None:
            if steering:
                self.topo.wait_closed()
            # a second SIGTERM if it drains the kernel path's flows (up to timeouts.drain)
            T.stop_draining(self.proc.pid, self.lines)
            try:
                self.proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for p in (self.path, self.admin):
            if os.path.exists(p):
                os.unlink(p)


def service(topo, health="{interval: 200ms, timeout: 200ms, rise: 1, fall: 2}", backends=None):
    lines = [f"""  - name: web
    listen: {T.VIP}:{T.VIP_PORT}
    hash_key: 4-tuple
    steering: kernel
    interface: eth0
    health: {health}
    backends:
"""]
    for i in range(len(topo.backends)):
        extra = (backends or {}).get(i, "")
        lines.append(f"      - {{name: b{i + 1}, address: '{topo.backend_ip(i)}:{T.VIP_PORT}'"
                     f"{extra}}}\n")
    return "".join(lines)


def dead_host(topo, servers):
    """A backend's host dies: once its neighbour entry has failed, the daemon still publishes
    its tables (a backend down in the table needs no MAC), so when another backend's server
    dies too, new clients no longer go to it."""
    lb = topo.lb
    d = Daemon(topo, service(topo)).start()
    try:
        check(d.wait_log("kernel steering table published", 15) is not None,
              "dead host: no table published at start")
        T.sh("ip", "link", "set", "eth0", "down", ns=topo.backends[2])
        # its entry expires (quicker than the kernel's timers): the health checks' connects
        # try to resolve it again, and fail
        T.sh("ip", "neigh", "del", topo.backend_ip(2), "dev", "eth0", ns=lb, check=False)
        check(d.wait_log('msg="backend down" service=web backend=b3', 10) is not None and
              d.wait_log("kernel steering table published", 10) is not None,
              "dead host: b3 not taken down")
        state = ""
        for _ in range(60):
            state = T.sh("ip", "neigh", "show", topo.backend_ip(2), ns=lb).stdout
            if "FAILED" in state or "INCOMPLETE" in state or not state.strip():
                break
            time.sleep(0.5)
        print(f"dead host: b3's neighbour entry: {state.strip() or 'gone'}", flush=True)
        d.skip_log()
        start = d.pos
        servers[1].terminate()
        servers[1].wait(timeout=10)
        ok = (d.wait_log('msg="backend down" service=web backend=b2', 10) and
              d.wait_log("kernel steering table published", 10))
        refused = [line for line in d.lines[start:] if "neighbour table" in line]
        check(ok is not None and not refused,
              f"dead host: no table published after b2 died: {refused[-1:]}")
        got = connect_count(topo, 20)
        check(got == {"b1": 20}, f"dead host: with b2 and b3 down, new clients went to {got}")
        print(f"dead host: b3's host gone, b2 down: 20 new clients: {dict(got)}", flush=True)
    finally:
        d.stop()
        # back as topo.up() made it: the link down took its IPv6 address and its neighbour
        # entries with it
        T.sh("ip", "link", "set", "eth0", "up", ns=topo.backends[2])
        T.sh("ip", "-6", "addr", "replace", f"{topo.backend_ip6(2)}/64", "dev", "eth0", "nodad",
             ns=topo.backends[2])
        topo.pin_lb(topo.backends[2])


def manual_update(topo, servers):
    """hashlb steer --update on the program a live hashlb run drives is refused: the daemon
    would not know its table was replaced, and a backend its health checks took out would get
    new clients again until its next publication. --stats still reads it. Before, the update
    went through: b3, down, got 7 of 20 new clients, refused. --detach is refused too (before,
    it detached the program and the daemon went on publishing into maps no program read:
    every client through the daemon); both refusals name the daemon's pid (before, --update's
    did not), and so does a second attach's, which offered --update and --detach. Once the
    daemon is killed (SIGKILL: the program an orphan), an --update names its table as its own:
    none without -c FILE (before, the dead daemon's service's name stayed, and --stats named
    it), FILE's service with; and --detach detaches it."""
    d = Daemon(topo, service(topo)).start()
    try:
        check(d.wait_log("kernel steering table published", 15) is not None,
              "manual update: no table published at start")
        servers[2].terminate()
        servers[2].wait(timeout=10)
        check(d.wait_log('msg="backend down" service=web backend=b3', 10) is not None and
              d.wait_log("kernel steering table published", 10) is not None,
              "manual update: b3 not taken down")
        p = T.sh(HASHLB, "steer", "-i", "eth0", "--update", "--vip", f"{T.VIP}:{T.VIP_PORT}",
                 "--key", "4-tuple",
                 *[a for i in range(3) for a in ("-b", f"b{i + 1}={topo.backend_ip(i)}")],
                 ns=topo.lb, check=False)
        check(p.returncode == 1 and "driven by hashlb run" in p.stderr and
              f"process {d.proc.pid}" in p.stderr,
              f"manual update: --update of the daemon's program: {p.returncode} "
              f"{p.stderr.strip()}")
        check("new_flows" in steer_stats(topo), "manual update: --stats refused")
        p = T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
        check(p.returncode == 1 and "driven by hashlb run" in p.stderr and
              f"process {d.proc.pid}" in p.stderr and attached(topo),
              f"manual update: --detach of the daemon's program: {p.returncode} "
              f"{p.stderr.strip()}; attached after: {attached(topo)}")
        # a second attach is refused naming the daemon, and what changes its table: before,
        # "--update changes its table, --detach removes it", both refused here
        p = T.sh(HASHLB, "steer", "-i", "eth0", "--keep", "--vip", f"{T.VIP}:{T.VIP_PORT}",
                 "-b", f"b1={topo.backend_ip(0)}", ns=topo.lb, check=False)
        check(p.returncode == 1 and "steers this interface already" in p.stderr and
              f"driven by hashlb run (process {d.proc.pid}): change its config (and reload) "
              "or use hashlb ctl" in p.stderr and "--detach" not in p.stderr and
              attached(topo),
              f"manual update: an attach beside the daemon's program: {p.returncode} "
              f"{p.stderr.strip()}; attached after: {attached(topo)}")
        got = connect_count(topo, 20)
        check(set(got) <= {"b1", "b2"} and sum(got.values()) == 20,
              f"manual update: new clients with b3 down: {dict(got)}")
        print(f"manual update: --update and --detach refused; 20 new clients: {dict(got)}",
              flush=True)
        topo.wait_closed()
        d.proc.kill()
        d.proc.wait(timeout=10)
        # the orphan's table is named by its dead daemon; an --update makes it its own: none
        # without -c (before, the dead daemon's name stayed), its service's with -c FILE
        named = [steer_stats(topo).get("service")]
        p = T.sh(HASHLB, "steer", "-i", "eth0", "--update", "--vip", f"{T.VIP}:{T.VIP_PORT}",
                 "--key", "4-tuple",
                 *[a for i in range(2) for a in ("-b", f"b{i + 1}={topo.backend_ip(i)}")],
                 ns=topo.lb, check=False)
        named.append(steer_stats(topo).get("service", "none") if p.returncode == 0 else
                     p.stderr.strip())
        p = T.sh(HASHLB, "steer", "-c", d.path, "-i", "eth0", "--update", ns=topo.lb,
                 check=False)
        named.append(steer_stats(topo).get("service") if p.returncode == 0 else
                     p.stderr.strip())
        check(named == ["web", "none", "web"],
              f"manual update: the orphan's table's service (--stats), then after an --update, "
              f"then after an --update -c FILE: {named}, want web, none, web")
        p = T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
        check(p.returncode == 0 and not attached(topo),
              f"manual update: --detach of the orphan (its daemon killed): {p.returncode} "
              f"{p.stderr.strip()}; attached after: {attached(topo)}")
    finally:
        d.stop()
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def gdb_stopped(at, mark, go):
    """A command prefix: gdb runs the command, stops it at function <at>, writes its pid into
    file <mark> and waits (60 s at most) for file <go> before it lets it go on. LeakSanitizer
    off (an ASan build's): it does not work under ptrace, and at the command's exit ends it with
    a fatal error, exit 1, an abort under meson test's ASAN_OPTIONS (abort_on_error=1), which
    gdb -batch stopped at and killed: the --update's exit read as None, not its own."""
    asan = ":".join(filter(None, (os.environ.get("ASAN_OPTIONS"), "detect_leaks=0")))
    return ["prlimit", "--core=0", "--", "env", f"ASAN_OPTIONS={asan}",
            "gdb", "-q", "-batch", "-nx",
            "-ex", "set startup-with-shell off", "-ex", f"break {at}", "-ex", "run",
            "-ex", f"python open({mark!r}, 'w').write(str(gdb.selected_inferior().pid))",
            "-ex", "python import os, time; [time.sleep(0.1) for _ in range(600) "
                   f"if not os.path.exists({go!r})]",
            "-ex", "delete", "-ex", "continue", "--args"]


def wait_file(path, proc):
    """The text of file <path> once it is written (10 s at most), None if <proc> ended first."""
    for _ in range(100):
        if os.path.exists(path) and os.path.getsize(path):
            with open(path) as f:
                return f.read()
        if proc.poll() is not None:
            return None
        time.sleep(0.1)
    return None


def update_taken_over(topo, servers):
    """An --update of an orphan's table (a hashlb steer --keep's, which no hashlb run marked its
    own) while a hashlb run takes the program over: the daemon stopped by gdb past its look
    for a process holding the program, as it marks it its own; the --update, its check for a
    hashlb run passed, stopped by gdb after its table, before its VIPs and its name; the daemon
    let go marks the program, names its table web and publishes; the --update let go then
    exits 1 naming hashlb run, and --stats names the table web, the daemon's. Before, the
    --update wrote its name ("", no -c) over the daemon's, written once as it took the program
    over: --stats named the table the daemon drives none until it restarted."""
    if not shutil.which("gdb"):
        raise T.Skip("gdb is not installed (scripts/setup.sh installs it)")
    files = {k: tempfile.mktemp(prefix=f"hlbst-{k}-") for k in ("d", "d_go", "u", "u_go")}
    d = upd = None
    pid = None
    try:
        p = T.sh(HASHLB, "steer", "-i", "eth0", "--keep", "--vip", f"{T.VIP}:{T.VIP_PORT}",
                 "--key", "4-tuple",
                 *[a for i in range(2) for a in ("-b", f"b{i + 1}={topo.backend_ip(i)}")],
                 ns=topo.lb, check=False)
        check(p.returncode == 0, f"update taken over: steer --keep: {p.stderr.strip()}")
        d = Daemon(topo, service(topo))
        d.prefix = gdb_stopped("hashlb_steer_set_daemon", files["d"], files["d_go"])
        d.start()
        pid = wait_file(files["d"], d.proc)
        check(pid is not None, "update taken over: gdb did not stop the daemon as it marks the "
              f"program: {[l for l in d.lines if 'steering' in l][:2]}")
        upd = topo.spawn(topo.lb, [
            *gdb_stopped("hashlb_steer_set_vips", files["u"], files["u_go"]), HASHLB, "steer",
            "-i", "eth0", "--update", "--vip", f"{T.VIP}:{T.VIP_PORT}", "--key", "4-tuple",
            *[a for i in range(2) for a in ("-b", f"b{i + 1}={topo.backend_ip(i)}")]],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        check(wait_file(files["u"], upd) is not None,
              "update taken over: gdb did not stop the --update after its table")
        open(files["d_go"], "w").close()
        check(d.wait_log("kernel steering table published", 15) is not None,
              f"update taken over: the daemon published no table: "
              f"{[l for l in d.lines if 'steering' in l][:2]}")
        named = steer_stats(topo).get("service")
        open(files["u_go"], "w").close()
        out, err = upd.communicate(timeout=60)
        code = gdb_exit(out)
        after = steer_stats(topo).get("service", "none")
        print(f"update taken over: the table's service {named} once the daemon took it over, "
              f"{after} after the --update (exit {code}: {err.strip()[-160:]!r})", flush=True)
        check(named == "web" and after == "web",
              f"update taken over: --stats' service {named}, then {after} once the --update "
              f"went on, want web and web (the daemon's)")
        check(code == 1 and "driven by hashlb run" in err,
              f"update taken over: the --update: exit {code}, {err.strip()[-300:]!r}, want 1 "
              f"naming the daemon")
    finally:
        for k in ("d_go", "u_go"):
            open(files[k], "w").close()
        if upd:
            try:
                upd.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                upd.kill()
                upd.wait(timeout=10)
        if pid and pid.isdigit():
            try:
                os.kill(int(pid), signal.SIGTERM)  # the daemon gdb runs: a stop detaches
            except ProcessLookupError:
                pass
        if d:
            try:
                d.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                d.proc.kill()
            d.stop()
        for f in files.values():
            if os.path.exists(f):
                os.unlink(f)
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def gdb_exit(out):
    """hashlb's exit status as gdb -batch printed it: None if it did not end."""
    m = re.search(r"terminated with signal (SIG[A-Z0-9]+)|exited (normally|with code (\d+))", out)
    if not m:
        return None
    return -signal.Signals[m.group(1)] if m.group(1) else int(m.group(3) or 0)


def steer_stats(topo, mode="auto", iface="eth0"):
    p = T.sh(HASHLB, "steer", "-i", iface, "--stats", "--json",
             *(["--mode", mode] if mode != "auto" else []),
             ns=topo.lb, check=False)
    return json.loads(p.stdout) if p.returncode == 0 else {}


def steered(topo, tag, n=20, mode="auto", iface="eth0"):
    """<n> new clients through the kernel path (its new_flows count them, at the hook <mode>
    names on <iface>): their backends."""
    before = steer_stats(topo, mode, iface).get("new_flows", 0)
    got = connect_count(topo, n)
    flows = steer_stats(topo, mode, iface).get("new_flows", 0) - before
    check(flows >= n and sum(got.values()) == n and set(got) <= {"b1", "b2", "b3"},
          f"{tag}: {n} new clients not steered by the kernel path: {flows} new flows, {dict(got)}")
    return got


def refused_then_published(topo, d, tag, why, held):
    """The daemon's table refused for <why> (a backend's missing neighbour entry), the
    backends <held> answering no ARP request (topo.deaf()) so that nothing can fill the entry
    meanwhile: still refused after two retries (tables_refused_total counting them), and
    /metrics and ctl status say the kernel path's table is stale; the test then lets them
    answer and resolves them: the table is published without any other change, and new
    clients are steered by it. Their backends."""
    refused = d.wait_log("kernel steering table not updated", 20)
    check(refused is not None and why in refused,
          f"{tag}: table not refused: {refused}: {[l for l in d.lines if 'steering' in l][-3:]}")
    # two retries refused (every second): the counter waited on, not a time
    first = web(scrape(d), "tables_refused_total") or 0
    end, refusals = time.monotonic() + 15, first
    while refusals < first + 2 and time.monotonic() < end:
        time.sleep(0.1)
        refusals = web(scrape(d), "tables_refused_total") or 0
    # the kernel path on an older table is in /metrics (before: only in the log, once)
    m = scrape(d)
    old, refusals = web(m, "table_stale"), web(m, "tables_refused_total")
    check(old == 1 and refusals and refusals >= first + 2,
          f"{tag}: while refused: table_stale {old}, tables_refused_total {refusals} "
          f"(from {first}: two retries, want 2 more)")
    # and in ctl status, text and JSON (before, neither said so: the counters' line read
    # as if the kernel path steered by the "table:" line's table)
    text = d.ctl("status").stdout
    p = d.ctl("--json", "status")
    js = {s["name"]: s.get("steering") or {}
          for s in json.loads(p.stdout)["services"]}.get("web", {}) \
        if p.returncode == 0 else {}
    said = re.search(r"its latest table NOT in the kernel \((\d+) refused: the log says "
                     r"why\)", text)
    check(said and int(said.group(1)) >= refusals and js.get("table_stale") is True and
          js.get("tables_refused", 0) >= refusals,
          f"{tag}: while refused: ctl status {text!r}, JSON table_stale "
          f"{js.get('table_stale')} tables_refused {js.get('tables_refused')}")
    # the MACs held unknown: any publication so far is a table with a MAC it could not have
    early = d.wait_log("kernel steering table published", 0)
    check(early is None, f"{tag}: published while the backends' MACs were held unknown: {early}")
    for i in held:
        topo.deaf(i, False)
    topo.resolve()
    ok = check(d.wait_log("kernel steering table published", 30) is not None,
               f"{tag}: the table not published once the neighbour entries were there")
    old = web(scrape(d), "table_stale")
    text = d.ctl("status").stdout
    check(old == 0 and "kernel steering: " in text and "NOT in the kernel" not in text,
          f"{tag}: published, yet table_stale {old}, ctl status {text!r}")
    got = steered(topo, tag)
    print(f"{tag}: refused, then resolved: {'published' if ok else 'NOT published'}; "
          f"20 new clients {dict(got)}", flush=True)
    return got


def neighbour(topo, servers):
    """Backends whose MAC is not known yet when hashlb run starts (a fresh boot: no health
    checks here to fill the neighbour table), then one whose entry is gone when a table changes
    (expired): the table is refused, the kernel path keeps the one it had, and once the entries
    are there the daemon publishes its latest table by itself, with no other change. Logged
    once when refused, once when published, not at every retry."""
    lb = topo.lb
    every = range(len(topo.backends))
    d = Daemon(topo, service(topo, health="{enabled: false}"))
    try:  # the backends deaf until the finally, whatever fails (the start too)
        for i in every:
            topo.deaf(i)
        T.sh("ip", "neigh", "flush", "dev", "eth0", ns=lb)
        d.start()
        refused_then_published(topo, d, "neighbour: MACs unknown at start", "neighbour table",
                               every)
        topo.deaf(2)
        T.sh("ip", "neigh", "del", topo.backend_ip(2), "dev", "eth0", ns=lb)
        p = d.ctl("set", "b1", "maint")
        check(p.returncode == 0, f"neighbour: ctl set b1 maint: {p.stdout} {p.stderr}")
        got = refused_then_published(topo, d, "neighbour: b1 in maint, b3's MAC unknown", "'b3'",
                                     [2])
        check("b1" not in got, f"neighbour: new clients went to b1 in maint: {dict(got)}")
        # refused again, then a reload to steering: userspace while it is retried: detached,
        # its retries end with it, and the daemon goes on
        topo.deaf(2)
        T.sh("ip", "neigh", "del", topo.backend_ip(2), "dev", "eth0", ns=lb)
        d.ctl("set", "b1", "ready")
        check(d.wait_log("kernel steering table not updated", 10) is not None,
              "neighbour: the table with b1 back not refused with b3's entry gone")
        retrying = second_timers(d.proc.pid)
        d.edit("steering: kernel", "steering: userspace")
        topo.wait_closed()
        d.proc.send_signal(signal.SIGHUP)
        check(d.wait_log("kernel steering detached", 10) is not None,
              "neighbour: a reload to steering: userspace did not detach")
        # the retry timer let go (the next tick does): nothing is tried any more, waited on
        # in /proc/PID/fdinfo rather than a while without a log line
        end, timers = time.monotonic() + 10, retrying
        while timers and time.monotonic() < end:
            time.sleep(0.1)
            timers = second_timers(d.proc.pid)
        after = [line for line in d.lines[d.pos:] if "kernel steering" in line]
        check(d.proc.poll() is None and retrying == 1 and timers == 0 and not after,
              f"neighbour: after the reload: exit {d.proc.poll()}, timers of 1 s {retrying} "
              f"while retried (want 1), {timers} after (want 0), {after}")
        # each refusal once (again only when its reason changes: another backend), not at
        # every retry
        episodes, cur = [], None
        for line in d.lines:
            if "kernel steering table published" in line:
                cur = None
            elif "kernel steering table not updated" in line:
                if cur is None:
                    cur = []
                    episodes.append(cur)
                cur.append(line.split(" error=", 1)[-1])
        check(len(episodes) == 3 and all(len(e) == len(set(e)) for e in episodes),
              f"neighbour: refusals logged more than once each: {episodes}")
    finally:
        d.stop()
        for i in every:
            topo.deaf(i, False)


def routed(topo, servers):
    """b3 at an address routed through its host (10.99.0.50, on b3's loopback, via b3's address):
    its health checks pass, but no neighbour entry is ever made for it on eth0, and L2 DSR cannot
    reach it. The refusal says so (it said "has no entry in the neighbour table of eth0", which
    reaching it could not change), and the kernel path keeps its table."""
    routed_ip = "10.99.0.50"
    T.sh("ip", "addr", "add", f"{routed_ip}/32", "dev", "lo", ns=topo.backends[2])
    T.sh("ip", "route", "add", f"{routed_ip}/32", "via", topo.backend_ip(2), ns=topo.lb)
    cfg = service(topo).replace(f"'{topo.backend_ip(2)}:", f"'{routed_ip}:")
    d = Daemon(topo, cfg).start()
    try:
        line = d.wait_log("kernel steering table not updated", 15)
        want = (f"backend 'b3' ({routed_ip}:{T.VIP_PORT}) is in none of eth0's subnets, so no "
                "neighbour entry is made for it there: the kernel path reaches only hosts on the "
                "layer-2 segment of eth0, and keeps its previous table")
        check(line is not None and want in line, f"routed: the refusal: {line}")
        p = d.ctl("--json", "status")
        b3 = json.loads(p.stdout)["services"][0]["backends"][2] if p.returncode == 0 else {}
        check(b3.get("health") == "up" and b3.get("checks_ok", 0) > 0,
              f"routed: b3's health checks do not pass, the test proves nothing: {b3}")
        d.stop()
        # The same from a cold neighbour table, checks off: the daemon asks the kernel for
        # b1's and b2's entries, never for b3's, off the segment. Before, it asked for b3's
        # too: an ARP request on eth0 for an address off it at each retry (an INCOMPLETE entry
        # left), whose answer, from a proxy ARP router or a host holding the address on
        # another interface, would have been taken as b3's MAC.
        T.sh("ip", "neigh", "flush", "dev", "eth0", ns=topo.lb)
        d = Daemon(topo, cfg.replace("{interval: 200ms, timeout: 200ms, rise: 1, fall: 2}",
                                     "{enabled: false}")).start()
        line = d.wait_log("kernel steering table not updated", 15)
        entry = T.sh("ip", "neigh", "show", routed_ip, "dev", "eth0", ns=topo.lb,
                     check=False).stdout.strip()
        check(line is not None and want in line and not entry,
              f"routed, cold: the refusal: {line}; the LB's entry of {routed_ip}: {entry!r}")
    finally:
        d.stop()
        T.sh("ip", "route", "del", f"{routed_ip}/32", ns=topo.lb, check=False)
        T.sh("ip", "addr", "del", f"{routed_ip}/32", "dev", "lo", ns=topo.backends[2],
             check=False)


def cold_neighbours(topo, servers):
    """A start with the LB's neighbour table empty (a boot) and health checks off: nothing of
    the daemon's reaches a backend, yet its first table is published, the daemon having asked
    the kernel for the backends' entries itself, and that first refusal is not logged (the
    retry a second later finds them). Before, the table was refused at level=error on every
    such start, and with checks off never published until a client through the daemon's own
    listener happened to make the entries. Then b3, out of the config, added by a reload, its
    entry gone: the same."""
    for fam in ("-4", "-6"):
        T.sh("ip", fam, "neigh", "flush", "dev", "eth0", ns=topo.lb)
    b3 = f"      - {{name: b3, address: '{topo.backend_ip(2)}:{T.VIP_PORT}'}}\n"
    full = service(topo, health="{enabled: false}")
    d = Daemon(topo, full.replace(b3, "")).start()
    try:
        for tag in ("cold_neighbours: start", "cold_neighbours: b3 added"):
            pub = d.wait_log("kernel steering table published", 15)
            refused = [x for x in d.lines if "table not updated" in x]
            if not check(pub is not None and not refused,
                         f"{tag}: published {pub is not None}, refused {refused[:1]}"):
                break
            got = steered(topo, tag)
            if tag.endswith("start"):
                check("b3" not in got, f"{tag}: new clients went to b3: {dict(got)}")
                T.sh("ip", "neigh", "del", topo.backend_ip(2), "dev", "eth0", ns=topo.lb,
                     check=False)
                d.edit("    backends:\n", "    backends:\n" + b3)
                d.skip_log()
                p = d.ctl("reload")
                check(p.returncode == 0, f"{tag}: reload: {p.stdout} {p.stderr}")
            else:
                check("b3" in got, f"{tag}: no new client went to b3: {dict(got)}")
    finally:
        d.stop()


def neighbour_unreadable(topo, servers):
    """A neighbour table that cannot be read (LD_PRELOAD: /proc/net/arp fails with EIO) refuses
    the table, saying what could not be read, as hashlb steer says it: not as the first
    backend's ("backend 'b1' (10.211.0.11:...): reading the neighbour table of eth0"), which
    reaching it would not help."""
    arp = "IP address       HW type     Flags       HW address            Mask     Device\n"
    d = Daemon(topo, service(topo, health="{enabled: false}"))
    d.prefix = list(shim_wrap("neigh_fail", f"HLB_TEST_ARP={arp}"))
    d.start()
    try:
        line = d.wait_log("kernel steering table not updated", 10)
        check(line is not None and
              "reading the neighbour table (/proc/net/arp): Input/output error" in line and
              "backend '" not in line, f"neighbour_unreadable: refused as {line!r}")
    finally:
        d.stop()


def hold(topo, n=24, vip=T.VIP):
    """A client holding <n> connections to <vip>: (process, {sport: backend})."""
    client = topo.spawn(topo.client, [sys.executable, PEER, "client", vip, str(T.VIP_PORT),
                                      str(n)],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return client, dict(json.loads(client.stdout.readline()))


def client_ended(topo, client, off):
    """<client> ended, and on backend <off>'s server its connections that the kernel path
    rescheduled away from it (to backends that reset them), which it never saw end: a real
    server's keepalive would close them, here they are killed."""
    if client and client.poll() is None:
        client.kill()
        client.wait(timeout=10)
    T.sh("ss", "-K", "-tn", "state", "established", "dst", T.CLIENT_IP, ns=topo.backends[off],
         check=False)


def still_held(client, held, tag):
    """Each held connection answers, from the backend it had: the number that did not."""
    client.stdin.write("quit\n")
    client.stdin.flush()
    answers = dict(json.loads(client.stdout.readline()))
    client.wait(timeout=10)
    lost = {sp: (held[sp], answers.get(sp)) for sp in held if answers.get(sp) != held[sp]}
    check(not lost, f"{tag}: {len(lost)} of {len(held)} established connections lost or moved: "
          f"{list(lost.items())[:3]}")
    return len(lost)


def followed(topo, d, client, held, tag, out):
    """After a change that takes <out> out of the table: the next table is published, new
    clients avoid <out>, and the held connections answer from their backend. (new clients,
    connections lost)"""
    check(d.wait_log("kernel steering table published", 10) is not None,
          f"{tag}: no table published")
    got = connect_count(topo, 20)
    check(out not in got, f"{tag}: new clients went to {out}: {dict(got)}")
    return got, still_held(client, held, tag)


def drain_followed(topo, d, client, held, tag):
    """ctl set b1 drain, then followed(): (new clients, connections lost)."""
    p = d.ctl("set", "b1", "drain")
    check(p.returncode == 0, f"{tag}: ctl set b1 drain: {p.stdout} {p.stderr}")
    return followed(topo, d, client, held, tag, "b1")


def maint(topo, servers):
    """ctl set b1 maint: b1 gets no new client, and its established connections through the
    kernel path stay (docs/control.md: maint closes nothing)."""
    d = Daemon(topo, service(topo)).start()
    try:
        check(d.wait_log("kernel steering table published", 15) is not None,
              "maint: no table published at start")
        client, held = hold(topo)
        on_b1 = sum(1 for n in held.values() if n == "b1")
        check(on_b1 > 0, f"maint: no connection on b1, the test proves nothing: {held}")
        p = d.ctl("set", "b1", "maint")
        check(p.returncode == 0, f"maint: ctl set b1 maint: {p.stdout} {p.stderr}")
        got, lost = followed(topo, d, client, held, "maint", "b1")
        print(f"maint: b1 in maint: {on_b1} connections on it, {lost} lost; new clients "
              f"{dict(got)}", flush=True)
        # a clean stop detaches the program, and says so (it said nothing: "attached" was
        # logged at the start, and no line told where the kernel path had gone)
        d.skip_log()
        d.stop()
        check(d.wait_log('msg="kernel steering detached" service=web interface=eth0 '
                         'reason=stopped', 5) is not None and steer_stats(topo) == {},
              f"maint: stopped: detached {steer_stats(topo) == {}}, not logged: "
              f"{d.lines[d.pos:]}")
    finally:
        d.stop()


def stopping(topo, drain, tag, keep=0):
    """A daemon whose service drains <drain>, 24 connections held through the kernel path (and
    <keep> more by a second client, if any), then SIGTERM: (daemon, client, held, second
    client or None), once it says it drains them."""
    d = Daemon(topo, service(topo).replace("    backends:\n",
                                           f"    timeouts: {{drain: {drain}}}\n    backends:\n"))
    d.start()
    check(d.wait_log("kernel steering table published", 15) is not None,
          f"{tag}: no table published at start")
    before = steer_stats(topo).get("new_flows", 0)
    client, held = hold(topo)
    kept = hold(topo, keep)[0] if keep else None
    check(steer_stats(topo).get("new_flows", 0) - before >= len(held) + keep,
          f"{tag}: the held connections are not the kernel path's")
    d.skip_log()
    d.proc.terminate()
    line = d.wait_log(T.DRAINING, 10)
    check(line is not None and "service=web interface=eth0" in line and
          "drain_timeout_ms=" in line,
          f"{tag}: the stop does not drain the kernel path: {d.lines[d.pos - 5:]}")
    return d, client, held, kept


def cut_held(topo, client):
    """End a held client whose connections the program's detach cut off, and their backend
    ends, which would repeat their FINs for about 100 s (topo.wait_closed), delaying the next
    scenarios."""
    client.kill()
    client.wait(timeout=10)
    for b in topo.backends:
        T.sh("ss", "-K", "-t", "state", "connected", "sport", "=", f":{T.VIP_PORT}", ns=b,
             check=False)


def drained(topo, d, client, held, tag):
    """Daemon <d> drains the kernel path after a stop: 3 new clients to the VIP are refused by
    the LB's stack (its listener closed) and not steered (no new flow in the kernel path),
    counted closed_passed 3 by --stats and /metrics alike, the
    connections <client> holds answer from their backends (then it closes them), and the
    program is detached, logged: at the deadline, or earlier once those were its only flows.
    (new clients, connections lost)"""
    before = steer_stats(topo)
    got = connect_count(topo, 3)
    after = steer_stats(topo)
    check(got == {"ConnectionRefusedError": 3} and before and
          after.get("new_flows") == before.get("new_flows"),
          f"{tag}: 3 new clients while draining: {dict(got)}, new flows "
          f"{before.get('new_flows')} then {after.get('new_flows')}")
    # their SYNs passed to the stack, counted by --stats and /metrics (before: neither showed
    # closed_passed)
    m = scrape(d)
    closed = (after.get("closed_passed", 0) - before.get("closed_passed", 0),
              web(m, "closed_passed_total"), after.get("closed_passed"))
    check(closed[0] == 3 and closed[1] == closed[2],
          f"{tag}: 3 new clients refused: closed_passed +{closed[0]} (--stats), {closed[1]} in "
          f"/metrics, {closed[2]} in --stats")
    lost = still_held(client, held, tag)
    check(d.wait_log('msg="kernel steering detached" service=web interface=eth0 '
                     'reason=stopped', 30) is not None,
          f"{tag}: not detached: {d.lines[d.pos - 5:]}")
    return got, lost


def stop_drain(topo, servers):
    """SIGTERM with timeouts.drain 6s: the connections held through the kernel path keep
    exchanging data after the stop, new clients to the VIP are refused by the LB's stack (its
    listener closed) and not steered (no new flow in the kernel path); one connection still
    open keeps the program to the deadline, where it is detached, logged, and the process
    exits. Before, it detached the program as soon as the daemon's own connections (none) had
    drained: every held connection was reset at once, and until then new clients were still
    steered to the backends."""
    d, client, held, kept = stopping(topo, "6s", "stop drain", keep=1)
    try:
        got, lost = drained(topo, d, client, held, "stop drain")
        d.proc.wait(timeout=15)
        stopped = d.wait_log('msg=stopped', 5) or ""
        m = re.search(r"drain_ms=(\d+)", stopped)
        check(m and int(m.group(1)) >= 6000 and steer_stats(topo) == {},
              f"stop drain: the process did not wait for the drain's deadline, or left the "
              f"program: {stopped.strip()}, attached {steer_stats(topo) != {}}")
        early = [line for line in d.lines if "kernel steering drained" in line]
        check(not early, f"stop drain: drained with a connection open: {early}")
        timed_out = [line for line in d.lines if "kernel steering drain timed out" in line]
        check(timed_out and re.search(r"open_flows=[1-9]", timed_out[0]) and
              "no FIN or RST has closed" in timed_out[0] and
              "no backend answered" not in timed_out[0],
              f"stop drain: the deadline's end not said with the flows still open (a connect no "
              f"backend answered is closing in this program, not among them): {timed_out}")
        print(f"stop drain: {len(held)} held connections through the kernel path, {lost} lost "
              f"after the stop, 1 still open; new clients {dict(got)} (closed_passed 3); "
              f"{stopped.strip()}", flush=True)
    finally:
        cut_held(topo, kept)
        d.stop()


def stop_drain_closed(topo, servers):
    """SIGTERM with timeouts.drain 6s, the held connections then closed by their client: every
    entry closing, none yet 10 s unused at the deadline (6 s), so the drain times out with
    open_flows=0, and its line says why. Before, it gave the reason of flows still open
    ("conntrack entries no FIN or RST has closed") beside open_flows=0."""
    tag = "stop drain closed"
    d, client, held, _ = stopping(topo, "6s", tag)
    try:
        lost = still_held(client, held, tag)  # then closed: "quit"
        line = d.wait_log("kernel steering drain timed out", 15) or ""
        check("service=web interface=eth0 " in line and " open_flows=0 " in line and
              "no FIN or RST has closed" not in line and
              "or never opened (a SYN alone) had gone 10 s unused" in line,
              f"{tag}: the deadline's end, every flow closed: {line.strip()}")
        print(f"{tag}: {len(held)} held connections, {lost} lost after the stop, closed by "
              f"their client: {line.strip()}", flush=True)
    finally:
        d.stop()


def stop_drain_ends(topo, servers):
    """SIGTERM with timeouts.drain 60s: the held connections exchange data after the stop,
    then their client closes them; the drain ends with them (the program marks an entry
    closing at the client's FIN), logged before the program is detached, and the process exits
    long before the deadline (40 s at most, of 60: the closing entries must go unused 10 s, by looks
    3 s apart, 12 to 15 s after the last use, or up to a tick of their clock less, about 11 s at
    HZ=250, so that a half-closed client waiting for its server is not cut).
    Before, a stop's drain always lasted its whole timeouts.drain unless the program held no
    entry at all."""
    drain_ends_with_the_flows(topo, "60s", "stop drain ends")


def stop_drain_never_ends(topo, servers):
    """stop_drain_ends() with timeouts.drain: never: no deadline (the draining line says
    drain_timeout_ms=never), and the drain ends, as there, once the flows have ended."""
    drain_ends_with_the_flows(topo, "never", "stop drain never ends")


def drain_ends_with_the_flows(topo, drain, tag):
    """A stop of a service draining <drain> with connections held through the kernel path,
    which exchange data after it and are then closed by their client: the drain ends with them,
    logged before the program is detached, and the process exits within 40 s."""
    d, client, held, _ = stopping(topo, drain, tag)
    try:
        check(drain != "never" or "drain_timeout_ms=never " in d.lines[d.pos - 1],
              f"{tag}: the draining line does not say never: {d.lines[d.pos - 1]}")
        lost = still_held(client, held, tag)
        drained = d.wait_log("kernel steering drained", 40)
        check(drained is not None and "service=web interface=eth0" in drained,
              f"{tag}: not drained when its flows ended: {d.lines[d.pos - 5:]}")
        detached = d.wait_log('msg="kernel steering detached" service=web interface=eth0 '
                              'reason=stopped', 5)
        check(detached is not None, f"{tag}: not detached after drained: "
              f"{d.lines[d.pos - 5:]}")
        try:
            d.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        stopped = d.wait_log('msg=stopped', 5) or ""
        m = re.search(r"drain_ms=(\d+)", stopped)
        check(d.proc.poll() is not None and m and int(m.group(1)) < 40000 and
              steer_stats(topo) == {},
              f"{tag}: still running {d.proc.poll() is None}, {stopped.strip()}, "
              f"attached {steer_stats(topo) != {}}")
        print(f"{tag}: {len(held)} held connections, {lost} lost after the stop, "
              f"closed by their client: {(drained or '').strip()}; {stopped.strip()}",
              flush=True)
    finally:
        d.stop()


def exited(topo, d, tag, timeout):
    """Daemon <d> exits within <timeout> seconds, leaving no program attached."""
    try:
        d.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    check(d.proc.poll() is not None and steer_stats(topo) == {},
          f"{tag}: still running {d.proc.poll() is None}, attached {steer_stats(topo) != {}}")


def log_time(line):
    """A log line's ts=, as time.time() would say it."""
    m = re.search(r"ts=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z", line or "")
    return datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=datetime.timezone.utc).timestamp() if m else None


def stop_half_closed(topo, servers):
    """SIGTERM with timeouts.drain 60s and one connection through the kernel path whose client
    then half-closes it (shutdown(SHUT_WR): its FIN marks the entry closing) and waits for a
    slow server, which answers 7 s later (with DSR, not through the LB): the drain does not end
    before the answer, the program still attached when it comes, and ends after it, the
    client's ACKs of it and of the server's FIN having gone by the entry. Before, a drain ended
    once the closing entries went unused 3 s (between two polls): 3 to 6 s after the FIN, the
    program detached under the half-closed flow, whose client's next ACK the LB's stack reset."""
    d = Daemon(topo, service(topo).replace("    backends:\n",
                                           "    timeouts: {drain: 60s}\n    backends:\n"))
    d.start()
    client = None
    try:
        check(d.wait_log("kernel steering table published", 15) is not None,
              "stop half closed: no table published at start")
        before = steer_stats(topo).get("new_flows", 0)
        client = topo.spawn(topo.client, [sys.executable, PEER, "halfclose", T.VIP,
                                          str(T.VIP_PORT), "7"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        sport, name = json.loads(client.stdout.readline())
        check(steer_stats(topo).get("new_flows", 0) - before >= 1,
              "stop half closed: the connection is not the kernel path's")
        d.skip_log()
        d.proc.terminate()
        check(d.wait_log(T.DRAINING, 10) is not None,
              f"stop half closed: the stop does not drain: {d.lines[d.pos - 5:]}")
        client.stdin.write("go\n")
        client.stdin.flush()
        answer, answered = json.loads(client.stdout.readline())
        attached = steer_stats(topo) != {}
        client.wait(timeout=30)
        drained = d.wait_log("kernel steering drained", 40)
        check(answer == f"{name}:sleep 7" and attached and drained is not None and
              log_time(drained) > answered,
              f"stop half closed: answer {answer!r} (from {name}), program attached then "
              f"{attached}, drained at {log_time(drained)} (answered at {answered}): {drained}")
        exited(topo, d, "stop half closed", 10)
        print(f"stop half closed: port {sport} on {name}, answered 7 s after its client's FIN "
              f"with the program attached; {(drained or '').strip()}", flush=True)
    finally:
        if client:
            client.kill()  # nothing if it has exited
            client.wait(timeout=10)
        d.stop()


def stop_vip_unpublished(topo, servers):
    """A reload moves the service's listen to another port and adds a backend the kernel path
    cannot reach (in none of eth0's subnets): its table is refused, the program keeps steering
    the old VIP by the last table. A SIGTERM then drains the program's VIP, the old one: the
    connections held through it keep exchanging data, and new clients to it are refused, not
    steered. Before, the stop closed the new VIP, which the program did not have, in place of
    the old one: the held connections' packets went to the LB's stack, every one reset."""
    cfg = service(topo, health="{enabled: false}").replace(
        "    backends:\n", "    timeouts: {drain: 6s}\n    backends:\n")
    d = Daemon(topo, cfg).start()
    try:
        check(d.wait_log("kernel steering table published", 15) is not None,
              "stop vip unpublished: no table published at start")
        client, held = hold(topo)
        d.edit(f"listen: {T.VIP}:{T.VIP_PORT}", f"listen: {T.VIP}:{T.VIP_PORT + 1}")
        d.edit("    backends:\n",
               f"    backends:\n      - {{name: b4, address: '10.99.0.50:{T.VIP_PORT}'}}\n")
        d.skip_log()
        d.proc.send_signal(signal.SIGHUP)
        line = d.wait_log("kernel steering table not updated", 10)
        check(line is not None and "none of eth0's subnets" in line,
              f"stop vip unpublished: the reload's table not refused: {line}")
        d.skip_log()
        d.proc.terminate()
        line = d.wait_log(T.DRAINING, 10)
        check(line is not None, f"stop vip unpublished: not drained: {d.lines[d.pos - 5:]}")
        got, lost = drained(topo, d, client, held, "stop vip unpublished")
        print(f"stop vip unpublished: {len(held)} held connections through the old VIP, {lost} "
              f"lost after the stop; new clients {dict(got)}", flush=True)
    finally:
        d.stop()


def stop_twice(topo, servers):
    """SIGTERM with timeouts.drain 10m while connections are held through the kernel path,
    then a second SIGTERM: the drain ends at once, said with the flows it cut (before, only
    the detach's reason=stopped, as for a drain that ended by itself), the program detached
    and the process gone."""
    d, client, held, _ = stopping(topo, "10m", "stop twice")
    try:
        d.proc.terminate()
        cut = d.wait_log("kernel steering drain cut", 15) or ""
        m = re.search(r" open_flows=(\d+) reason=second_signal", cut)
        check("service=web interface=eth0 " in cut and m and int(m.group(1)) == len(held),
              f"stop twice: the cut not said with its {len(held)} open flows: {cut.strip()}")
        check(d.wait_log('msg="kernel steering detached" service=web interface=eth0 '
                         'reason=stopped', 15) is not None,
              f"stop twice: a second SIGTERM did not detach the program: {d.lines[d.pos - 5:]}")
        exited(topo, d, "stop twice", 15)
        print("stop twice: a second SIGTERM ended the kernel path's drain of 10m", flush=True)
    finally:
        cut_held(topo, client)
        d.stop()


def reload_listen(topo, servers):
    """A reload that changes both the service's listen (to the IPv6 VIP) and a backend's
    weight publishes one table, said once (before: twice with one generation, the first with
    the old VIP), and new clients of the new VIP are steered by the kernel path."""
    T.sh("ip", "-6", "addr", "add", f"{T.VIP6}/128", "dev", "lo", "nodad", ns=topo.lb)
    d = Daemon(topo, service(topo)).start()
    try:
        check(d.wait_log("kernel steering table published", 15) is not None,
              "reload listen: no table published at start")
        d.edit(f"listen: {T.VIP}:{T.VIP_PORT}", f"listen: '[{T.VIP6}]:{T.VIP_PORT}'")
        d.edit("name: b3,", "name: b3, weight: 3,")
        d.skip_log()
        start = d.pos
        d.proc.send_signal(signal.SIGHUP)
        check(d.wait_log("msg=reloaded", 10) is not None, "reload listen: not reloaded")
        d.ctl("status")  # answered on the control thread: the reload's lines are all out
        published = [line for line in d.lines[start:]
                     if "kernel steering table published" in line]
        gens = [re.search(r"generation=(\d+)", line).group(1) for line in published]
        check(len(published) == 1, f"reload listen: {len(published)} publications logged, "
              f"generations {gens}")
        before = steer_stats(topo).get("new_flows", 0)
        got = connect_count(topo, 10, vip=T.VIP6)
        flows = steer_stats(topo).get("new_flows", 0) - before
        check(sum(got[b] for b in ("b1", "b2", "b3")) == 10 and flows >= 10,
              f"reload listen: 10 clients of {T.VIP6}: {dict(got)}, {flows} new flows")
        print(f"reload listen: listen and a weight changed: {len(published)} publication "
              f"(generation {gens}); 10 clients of the new VIP {dict(got)}, {flows} new flows",
              flush=True)
    finally:
        d.stop()
        T.sh("ip", "-6", "addr", "del", f"{T.VIP6}/128", "dev", "lo", ns=topo.lb, check=False)


def primaries_down(d, servers, tag):
    """b1's and b2's servers stopped: both taken down by <d>'s health checks, and the table
    of the backup b3 published."""
    for i in (0, 1):
        servers[i].terminate()
        servers[i].wait(timeout=10)
    missing = d.wait_each([f'msg="backend down" service=web backend={name} '
                           for name in ("b1", "b2")], 10)
    check(not missing, f"{tag}: not taken down: {missing}")
    check(d.wait_log("kernel steering table published", 10) is not None,
          f"{tag}: no table published with b1 and b2 down")


def backup(topo, servers):
    """b3 a backup: while b1 and b2 are down every client goes to b3; when they return the
    new clients go to them, and b3's established connections stay (close_on_return: false)."""
    d = Daemon(topo, service(topo, backends={2: ", backup: true"})).start()
    try:
        check(d.wait_log("kernel steering table published", 15) is not None,
              "backup: no table published at start")
        primaries_down(d, servers, "backup")
        client, held = hold(topo)
        check(set(held.values()) == {"b3"}, f"backup: not every client on b3: {held}")
        servers[:2] = topo.serve(PEER, 2)
        # in either order: b2's line before b1's used to be passed over while b1's was
        # waited for, and then the table published after both
        missing = d.wait_each([f'msg="backend up" service=web backend={name} '
                               for name in ("b1", "b2")], 10)
        check(not missing, f"backup: did not come back: {missing}")
        got, lost = followed(topo, d, client, held, "backup", "b3")
        print(f"backup: b1, b2 back: {lost} of {len(held)} connections on b3 lost; new clients "
              f"{dict(got)}", flush=True)
    finally:
        d.stop()


def ring_backup(topo, servers):
    """A ring of vnodes 10,000 over b1 and b2 (weight 1: 20,000 points) with b3 a backup of
    weight 10 (100,000 points, in the table only while no primary is): the program is loaded
    for the heavier of the two (docs/steering.md, Program size), so a reload that changes
    nothing grows nothing, and once b1 and b2 are down the backup's table is published into
    the program as it is, new clients reaching b3 through the kernel path. Before, a program
    of one table was sized by its first table alone (the primaries', 65,536 points), as the
    reload's check never counts it: that reload replaced the program ('kernel steering
    program grown', the hook swapped for a change of nothing), or else the failover did."""
    yaml = service(topo, backends={2: ", backup: true, weight: 10"}).replace(
        "    interface: eth0\n", "    interface: eth0\n    scheme: ring\n    vnodes: 10000\n")
    d = Daemon(topo, yaml).start()
    try:
        if not check(d.wait_log("kernel steering table published", 15) is not None,
                     f"ring backup: no table published at start: {d.lines[-1:]}"):
            return
        start = len(d.lines)
        d.skip_log()
        p = d.ctl("reload")
        # logged after the reload's check, which is where a reload grows the program
        check(p.returncode == 0 and d.wait_log("msg=reloaded ", 10) is not None,
              f"ring backup: the reload refused: {p.stdout} {p.stderr}")
        grown_l = [x for x in d.lines[start:] if "kernel steering program grown" in x]
        check(not grown_l, f"ring backup: a reload that changes nothing grew the program: "
              f"{grown_l}")
        primaries_down(d, servers, "ring backup")
        grown_l = [x for x in d.lines[start:] if "kernel steering program grown" in x]
        check(not grown_l, f"ring backup: the failover to the backup grew the program: "
              f"{grown_l}")
        got = steered(topo, "ring backup: b1 and b2 down")
        check(got == {"b3": 20}, f"ring backup: new clients not all on b3: {dict(got)}")
        print(f"ring backup: reload and failover, no growth; new clients {dict(got)}",
              flush=True)
    finally:
        d.stop()


def grown_for_backups(topo, d, servers, start, tag):
    """ring_backup's service published by <d>: since its line <start>, the program grown once,
    for the backup's 100,000 points (200,000), then the failover to b3 grows nothing and 20
    new clients reach b3 through the kernel path."""
    grown_l = [x for x in d.lines[start:] if "kernel steering program grown" in x]
    check(len(grown_l) == 1 and " max_ring_points=200000 " in grown_l[0],
          f"{tag}: not grown once for the backup's 100,000 points at the publication: "
          f"{grown_l}")
    start = len(d.lines)
    primaries_down(d, servers, tag)
    grown_f = [x for x in d.lines[start:] if "kernel steering program grown" in x]
    check(not grown_f, f"{tag}: the failover grew the program: {grown_f}")
    got = steered(topo, f"{tag}: b1 and b2 down")
    check(got == {"b3": 20}, f"{tag}: new clients not all on b3: {dict(got)}")
    print(f"{tag}: grown at the publication, not at the failover; new clients {dict(got)}",
          flush=True)


def ring_backup_taken(topo, servers):
    """ring_backup's config (primaries of 20,000 ring points, a backup of 100,000) taking
    over an orphan program that hashlb steer --keep sized by default (65,536 points, which
    the primaries' table fits): the program is grown for the config at the first
    publication, 'kernel steering program grown' logged once with 200,000 points, so the
    failover to the backup grows nothing and new clients reach b3 through the kernel path.
    Before, the publication counted only the primaries' table: the program was grown at the
    failover, on the control loop as a backend failed (refused if the lock was held)."""
    p = T.sh(HASHLB, "steer", "-i", "eth0", "--keep", "--mode", "tc",
             "--vip", f"{T.VIP}:{T.VIP_PORT}", "--key", "4-tuple",
             *[a for i in range(2) for a in ("-b", f"b{i + 1}={topo.backend_ip(i)}")],
             ns=topo.lb, check=False)
    check(p.returncode == 0, f"ring backup taken: the orphan: {p.returncode} "
          f"{p.stderr.strip()}")
    yaml = service(topo, backends={2: ", backup: true, weight: 10"}).replace(
        "    interface: eth0\n", "    interface: eth0\n    scheme: ring\n    vnodes: 10000\n")
    d = Daemon(topo, yaml).start()
    try:
        taken = d.wait_log("kernel steering taken over", 15)
        published = d.wait_log("kernel steering table published", 60)
        if not check(taken is not None and published is not None,
                     f"ring backup taken: not taken over and published: "
                     f"{[x for x in d.lines if 'kernel steering' in x]}"):
            return
        grown_for_backups(topo, d, servers, 0, "ring backup taken")
    finally:
        d.stop()
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)


def ring_backup_locked(topo, servers):
    """ring_backup's service loaded at vnodes 100 (its program of 65,536 points), then a
    reload to vnodes 10,000 (the backup's 100,000 points outgrow it; the primaries' 20,000
    do not) while the test holds the program's publication lock (an flock on its file): the
    reload applies, the growth left to the publication, which once the lock is let go grows
    the program for the config, logged once with 200,000 points, so the failover to the
    backup grows nothing and new clients reach b3 through the kernel path. Before, the
    publication counted only the primaries' table: the program grew at the failover."""
    import fcntl

    def yaml(vnodes):
        return service(topo, backends={2: ", backup: true, weight: 10"}).replace(
            "    interface: eth0\n",
            f"    interface: eth0\n    scheme: ring\n    vnodes: {vnodes}\n")

    d = Daemon(topo, yaml(100)).start()
    fd = None
    try:
        if not check(d.wait_log("kernel steering table published", 15) is not None,
                     f"ring backup locked: no table published at start: {d.lines[-1:]}"):
            return
        path = lock_file(topo)
        if not check(path and os.path.exists(path),
                     f"ring backup locked: no lock file ({path})"):
            return
        fd = os.open(path, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        d.skip_log()
        start = len(d.lines)
        with open(d.path, "w") as fh:
            fh.write(f"admin: unix:{d.admin}\nworkers: 1\nservices:\n{yaml(10000)}")
        p = d.ctl("reload")
        check(p.returncode == 0 and d.wait_log("msg=reloaded ", 10) is not None,
              f"ring backup locked: the reload refused: {p.stdout} {p.stderr}")
        os.close(fd)
        fd = None
        # a growth loads a program: seconds on a loaded machine
        check(d.wait_log("kernel steering table published", 90) is not None,
              "ring backup locked: the table not published once the lock was let go")
        grown_for_backups(topo, d, servers, start, "ring backup locked")
    finally:
        if fd is not None:
            os.close(fd)
        d.stop()
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def ring_backup_100(topo):
    """ring_backup's service at vnodes 100: its program of 65,536 points (the backup's 1,000
    points), which a reload to vnodes 10,000 outgrows by the backup's 100,000 alone."""
    return service(topo, backends={2: ", backup: true, weight: 10"}).replace(
        "    interface: eth0\n", "    interface: eth0\n    scheme: ring\n    vnodes: 100\n")


def ring_backup_let_go(topo, servers):
    """ring_backup_locked's reload (vnodes 100 to 10,000: the backup's 100,000 points outgrow
    the program, the primaries' 20,000 do not) with the lock held at the reload's check and
    let go before its first publication (gdb stops the daemon at run_steer_publish() from the
    reload's flush, where the test lets the lock go): that publication counts the new config
    and grows the program for the backup, logged once with 200,000 points, so the failover
    grows nothing. Before, it counted the old config's (vnodes 100), grew nothing, and the
    failover grew the program, on the control thread as the primaries failed."""
    reason = gdbfail.unusable()
    if reason:
        raise T.Skip(reason)
    with LockHeld(topo, "ring backup let go", ring_backup_100, reload=False) as h:
        if not h.ok:
            return
        d, hit, go = h.d, h.temp("h"), h.temp("g")
        if not h.gdb_at('run_steer_publish if $_any_caller_matches("hlb_pool_flush_reload", 8)',
                        f"open({hit!r}, 'w').write('hit')\nimport os, time\n"
                        f"[time.sleep(0.1) for _ in range(600) if not os.path.exists({go!r})]\n"):
            return
        d.skip_log()
        start = len(d.lines)
        d.edit("vnodes: 100\n", "vnodes: 10000\n")
        reload = []
        t = threading.Thread(target=lambda: reload.append(d.ctl("reload")))
        t.start()
        stopped = wait_file(hit, h.gdb) is not None
        h.release()  # let go between the reload's check and its publication
        with open(go, "w") as f:
            f.write("go")
        t.join(120)
        h.gdb_done()
        p = reload[0] if reload else None
        # a growth loads a program: seconds on a loaded machine
        published = d.wait_log("kernel steering table published", 90)
        check(stopped and p is not None and p.returncode == 0 and published,
              f"ring backup let go: not stopped at the publication ({stopped}), the reload "
              f"refused ({p and (p.stdout, p.stderr)}) or its table not published")
        grown_for_backups(topo, d, servers, start, "ring backup let go")


def ring_backup_not_grown(topo, servers):
    """ring_backup_locked's reload (the backup's 100,000 points outgrow the program of
    65,536, the primaries' 20,000 do not) with the lock held at its check, the growth left
    to the publication, which fails once the lock is let go (gdb makes hashlb_steer_grow()
    return -ENOMEM, as a map the kernel cannot make would): the primaries' table, which fits,
    is published, and that the program did not grow is said once (msg="kernel steering
    program not grown", naming the error); the failover to the backup grows it then (logged,
    200,000 points) and new clients reach b3 through the kernel path. Before, nothing said
    the program was not grown until the failover's table."""
    reason = gdbfail.unusable()
    if reason:
        raise T.Skip(reason)
    with LockHeld(topo, "not grown", ring_backup_100, reload=False) as h:
        if not h.ok:
            return
        d = h.d
        # the growth fails once the test has let the lock go, not at a try the lock refuses:
        # gdb asks the lock itself, the daemon stopped (before, a file the test wrote after
        # letting go, and a retry between the two grew the program for real)
        if not h.gdb_at("hashlb_steer_grow if $go()",
                        "gdb.execute('return -12')\nprint('injected')\n",
                        "import fcntl, os\nclass Go(gdb.Function):\n"
                        "    def __init__(self):\n        super().__init__('go')\n"
                        "    def invoke(self):\n"
                        f"        fd = os.open({h.path!r}, os.O_RDWR)\n"
                        "        try:\n"
                        "            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
                        "            return True\n"
                        "        except OSError:\n"
                        "            return False\n"
                        "        finally:\n"
                        "            os.close(fd)\n"
                        "Go()\n"):
            return
        d.skip_log()
        start = len(d.lines)
        d.edit("vnodes: 100\n", "vnodes: 10000\n")
        p = d.ctl("reload")
        h.release()
        published = d.wait_log("kernel steering table published", 30)
        out = h.gdb_done()
        said = [x for x in d.lines[start:] if "kernel steering program not grown" in x]
        check(p.returncode == 0 and published and "injected" in out and len(said) == 1 and
              "Cannot allocate memory" in said[0],
              f"not grown: the reload ({p.returncode} {p.stderr.strip()}) published "
              f"({published}) without saying once that the program did not grow: {said}")
        start = len(d.lines)
        primaries_down(d, servers, "not grown")
        grown_l = [x for x in d.lines[start:] if "kernel steering program grown" in x]
        check(len(grown_l) == 1 and " max_ring_points=200000 " in grown_l[0],
              f"not grown: the failover did not grow the program: {grown_l}")
        got = steered(topo, "not grown: b1 and b2 down")
        check(got == {"b3": 20}, f"not grown: new clients not all on b3: {dict(got)}")
        print(f"not grown: said once ({said and said[0].split('error=')[-1][:60]}...), grown "
              f"at the failover; new clients {dict(got)}", flush=True)


def sigkill(topo, servers):
    """hashlb run killed (SIGKILL: its program stays attached, nobody drives it); a plain
    restart takes that program over, with the established flows in its conntrack, and
    publishes its tables into it; a second daemon meanwhile does not take over the program a
    live one drives; the restarted one detaches it when it stops, and removes the clsact
    qdisc the killed one created (before, it stayed)."""
    d1 = Daemon(topo, service(topo)).start()
    d2 = d3 = None
    try:
        check(d1.wait_log("kernel steering table published", 15) is not None,
              "sigkill: no table published at start")
        client, held = hold(topo)
        d1.proc.kill()
        d1.proc.wait(timeout=10)
        d2 = Daemon(topo, service(topo)).start()
        taken = d2.wait_log("kernel steering taken over", 10)
        check(taken is not None and d2.wait_log("kernel steering table published", 10),
              f"sigkill: the restarted daemon did not take the program over: "
              f"{[l for l in d2.lines if 'steering' in l][:2]}")
        d3 = Daemon(topo, service(topo).replace(f"{T.VIP}:{T.VIP_PORT}",
                                                f"{T.VIP}:{T.VIP_PORT + 1}")).start()
        refused = d3.wait_log("kernel steering not started", 10)
        check(refused is not None and f"driven by hashlb run (process {d2.proc.pid})" in refused
              and "tried every second" in refused and
              d3.wait_log("kernel steering taken over", 0.5) is None,
              f"sigkill: a second daemon took over the program a live one drives: "
              f"{[l for l in d3.lines if 'steering' in l][:2]}")
        d3.stop(steering=False)  # the held connections are still open
        got, lost = drain_followed(topo, d2, client, held, "sigkill")
        print(f"sigkill: restarted: {'took the program over' if taken else 'NOT taken over'}; "
              f"{lost} of {len(held)} connections lost; b1 drained: new clients {dict(got)}",
              flush=True)
        d2.stop()
        check(not T.sh("ip", "link", "show", "eth0", ns=topo.lb).stdout.count("xdp") and
              "hlb_tc" not in T.sh("tc", "filter", "show", "dev", "eth0", "ingress",
                                   ns=topo.lb, check=False).stdout,
              "sigkill: the restarted daemon left the program attached when it stopped")
        check("clsact" not in T.sh("tc", "qdisc", "show", "dev", "eth0", ns=topo.lb).stdout,
              "sigkill: the restarted daemon left the clsact qdisc the killed one created")
    finally:
        for d in (d1, d2, d3):
            if d:
                d.stop()
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def worker_failed(topo, servers):
    """One of hashlb run's two workers fails (its io_uring_enter() returns EBADR, made by gdb:
    tests/integration/gdbfail.py): the daemon exits 1 for its service manager to start it
    again, without waiting for timeouts.drain (10m here), its program left attached with its
    VIP open: new clients are still steered and the connections held through the kernel path go
    on, until the restarted daemon takes the program over with them. Before, it drained the
    kernel path as at a stop: the exit, and so the restart, waited the whole timeouts.drain, new
    clients refused meanwhile, and the held connections were reset at its end."""
    why = gdbfail.unusable()
    if why:
        raise T.Skip(why)
    cfg = service(topo).replace("    backends:\n", "    timeouts: {drain: 10m}\n    backends:\n")
    d1 = Daemon(topo, cfg)
    d1.edit("workers: 1", "workers: 2")  # the other worker serves on until the stop's end
    d1.start()
    d2 = None
    try:
        check(d1.wait_log("kernel steering table published", 15) is not None,
              "worker failed: no table published at start")
        client, held = hold(topo)
        ok, out = gdbfail.inject(d1.proc.pid, gdbfail.worker_tid(d1.proc.pid, 0))
        check(ok, f"worker failed: gdb did not fail the worker: {out}")
        try:
            rc = d1.proc.wait(timeout=60)  # a hang guard: before, its 10 minutes
        except subprocess.TimeoutExpired:
            rc = None
        # a warning with its remedy: nothing checks the backends until a restart, and without
        # one it stays (it was logged at info, with no word of how to remove it)
        kept = d1.wait_log('msg="kernel steering left attached" service=web interface=eth0', 5)
        check(rc == 1 and kept is not None and "level=warn " in kept and
              "hashlb steer -i INTERFACE --detach" in kept,
              f"worker failed: exit {rc}, {[l for l in d1.lines if 'steering' in l][-2:]}")
        before = steer_stats(topo)
        got = connect_count(topo, 20)
        after = steer_stats(topo)
        check(sum(got.values()) == 20 and set(got) <= {"b1", "b2", "b3"} and
              after.get("new_flows", 0) - before.get("new_flows", 0) >= 20,
              f"worker failed: 20 new clients after the exit not steered: {dict(got)}")
        d2 = Daemon(topo, cfg).start()
        taken = d2.wait_log("kernel steering taken over", 10)
        check(taken is not None and "from=orphan" in taken and
              d2.wait_log("kernel steering table published", 10) is not None,
              f"worker failed: the restarted daemon did not take the program over: "
              f"{[l for l in d2.lines if 'steering' in l][:2]}")
        lost = still_held(client, held, "worker failed")
        print(f"worker failed: exit {rc}; 20 new clients then {dict(got)}; restarted: "
              f"{'took the program over' if taken else 'NOT taken over'}; {lost} of "
              f"{len(held)} connections lost", flush=True)
    finally:
        for d in (d1, d2):
            if d:
                d.stop()
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def mac_changed(topo, servers):
    """b1's host replaced under the same address (a rebuilt VM, a NIC swapped, the address moved
    to a standby): a new MAC, which the LB's neighbour table learns, while b1's health checks
    pass and no table changes. The daemon finds the published MAC stale and publishes the table
    again with the new one, so new clients reach b1. Before, the kernel path sent b1's share of
    the clients to the old MAC for as long as no table changed: they timed out."""
    b1 = topo.backends[0]
    old_mac = topo.mac(b1)
    new_mac = "02:00:00:00:aa:01"
    d = Daemon(topo, service(topo)).start()
    try:
        check(d.wait_log("kernel steering table published", 15) is not None,
              "mac: no table published at start")
        d.skip_log()
        T.sh("ip", "link", "set", "eth0", "address", new_mac, ns=b1)
        T.sh("ip", "neigh", "replace", topo.backend_ip(0), "lladdr", new_mac, "dev", "eth0",
             "nud", "reachable", ns=topo.lb)
        changed = d.wait_log("backend MAC changed", 30)
        check(changed is not None and "backend=b1" in changed and
              d.wait_log("kernel steering table published", 15) is not None,
              f"mac: the table not published again with b1's new MAC: {changed}")
        got = steered(topo, "mac", 30)
        check(got.get("b1", 0) > 0 and set(got) <= {"b1", "b2", "b3"},
              f"mac: b1's new MAC: new clients {dict(got)}")
        print(f"mac: b1's MAC changed, {'republished' if changed else 'NOT republished'}; "
              f"30 new clients {dict(got)}", flush=True)
    finally:
        d.stop()
        T.sh("ip", "link", "set", "eth0", "address", old_mac, ns=b1)


STEER_COUNTERS = ["packets", "bytes", "new_flows", "conntrack_hits", "conntrack_rescheduled",
                  "conntrack_evictions", "conntrack_lost", "untracked_resets", "passed",
                  "closed_passed", "conntrack_closing"]


def scrape(d):
    """hashlb_service_steer_* samples of /metrics: {"family{labels}": value}; the whole
    exposition must be valid (promtext.parse_prometheus(), which raises on anything the text
    format does not allow)."""
    p = d.ctl("metrics")
    return {name + labels: int(val) for (name, labels), val in parse_prometheus(p.stdout).items()
            if name.startswith("hashlb_service_steer_")}


def web(m, what):
    return m.get(f'hashlb_service_steer_{what}{{service="web"}}')


def send_frames(f, sports, marker):
    """One hand-made TCP frame to the VIP from each source port of <sports>: their bytes, and
    the backends that received them, once every frame has arrived (the program counts a frame
    before it leaves: its counters are complete then)."""
    import test_frames as F
    markers = [marker + b"-%d;" % sp for sp in sports]
    n = sum(f.send(0x0800, F.ipv4("10.213.0.9", T.VIP, F.tcp(sp, m)))
            for sp, m in zip(sports, markers))
    return n, f.forwarded(markers)


def plain_switch(topo):
    """The bridge a plain switch: br_netfilter (if loaded) would drop hand-made frames, their
    IP checksum 0."""
    for key in ("iptables", "ip6tables"):
        T.sh("sysctl", "-q", "-w", f"net.bridge.bridge-nf-call-{key}=0", ns=topo.sw,
             check=False)


def metrics(topo, servers):
    """hashlb run's /metrics carries the kernel path's counters for the steered service (before:
    none at all, only `hashlb steer --stats` read them): 10 hand-made frames of 10 new flows
    count 10 packets, their bytes, 10 new flows, 10 lost (ACKs that found no conntrack entry)
    and 10 conntrack entries exactly, the same
    figures `hashlb steer --stats` reads, and `hashlb ctl status` (JSON and text) shows them;
    after a reload that changes the table every counter is where it was or above, and 10 more
    frames of the same flows count 10 packets, 10 conntrack hits and no new flow, none lost."""
    import test_frames as F
    plain_switch(topo)
    d = Daemon(topo, service(topo)).start()
    f = None
    try:
        check(d.wait_log("kernel steering table published", 15) is not None,
              "metrics: no table published at start")
        f = F.Frames(topo)
        m0 = scrape(d)
        missing = [c for c in STEER_COUNTERS if web(m0, c + "_total") is None]
        if not check(not missing and web(m0, "conntrack_capacity"),
                     f"metrics: /metrics has no kernel steering counters for web: {missing}"):
            return
        sports = range(44000, 44010)
        nbytes, got = send_frames(f, sports, b"METRICS-ONE")
        m1 = scrape(d)
        st = steer_stats(topo)
        dp = web(m1, "packets_total") - web(m0, "packets_total")
        db = web(m1, "bytes_total") - web(m0, "bytes_total")
        dn = web(m1, "new_flows_total") - web(m0, "new_flows_total")
        dl = web(m1, "conntrack_lost_total") - web(m0, "conntrack_lost_total")
        check((dp, db, dn, dl) == (10, nbytes, 10, 10) and got and got <= {"b1", "b2", "b3"},
              f"metrics: 10 frames of {nbytes} bytes to {sorted(got)}: /metrics counted "
              f"{dp} packets, {db} bytes, {dn} new flows, {dl} lost (ACKs with no entry)")
        # alone on eth0: its own entries are all the interface's
        check(web(m1, "conntrack_entries") == 10 and
              web(m1, "interface_conntrack_entries") == 10 and
              web(m1, "conntrack_capacity") == FLOWS_MAX,
              f"metrics: conntrack entries {web(m1, 'conntrack_entries')} of "
              f"{web(m1, 'conntrack_capacity')}, 10 flows seen")
        same = {k: (web(m1, k + "_total"), st.get(c)) for k, c in
                [("packets", "packets"), ("bytes", "bytes"), ("new_flows", "new_flows"),
                 ("conntrack_hits", "ct_hits"), ("conntrack_evictions", "ct_evicted"),
                 ("conntrack_lost", "ct_lost"), ("untracked_resets", "rst_untracked"),
                 ("closed_passed", "closed_passed"), ("conntrack_closing", "ct_closing")]}
        check(all(a == b for a, b in same.values()),
              f"metrics: /metrics and hashlb steer --stats disagree: {same}")
        # the occupancy too (before, only /metrics and ctl status had it)
        check((st.get("flows"), st.get("flows_max")) == (10, FLOWS_MAX),
              f"metrics: hashlb steer --stats: flows {st.get('flows')} of "
              f"{st.get('flows_max')}, want 10 of {FLOWS_MAX}")
        p = d.ctl("--json", "status")
        steering = (json.loads(p.stdout)["services"][0].get("steering") or {}) \
            if p.returncode == 0 else {}
        check(steering.get("packets") == web(m1, "packets_total") and
              steering.get("new_flows") == web(m1, "new_flows_total") and
              steering.get("flows") == 10 and steering.get("flows_max") == FLOWS_MAX,
              f"metrics: ctl status --json: steering {steering}")
        text = d.ctl("status").stdout
        check(f"kernel steering: {web(m1, 'packets_total')} packets" in text,
              f"metrics: ctl status: no kernel steering line: {text}")
        # passed and closed_passed too, as --stats and /metrics have them (before, left out)
        # (the stack's own packets, neighbour discovery, may add to passed since the scrape)
        mp = re.search(r"dropped(?: \(\d+ the service's\))?, (\d+) passed \((\d+) to a closed VIP"
                       r"(?:, \d+ the service's)?\)", text)
        check(mp is not None and int(mp.group(1)) >= web(m1, "passed_total") and
              int(mp.group(2)) == web(m1, "closed_passed_total"),
              f"metrics: ctl status: passed figures not those of /metrics: {text}")
        print(f"metrics: 10 frames, {nbytes} bytes: packets +{dp}, bytes +{db}, new flows +{dn}, "
              f"conntrack {web(m1, 'conntrack_entries')}/{web(m1, 'conntrack_capacity')}",
              flush=True)
        # a reload that changes the table: the program, its counters with it, stays
        d.edit("name: b3,", "name: b3, weight: 3,")
        d.skip_log()
        d.proc.send_signal(signal.SIGHUP)
        check(d.wait_log("kernel steering table published", 10) is not None,
              "metrics: no table published after the reload")
        m2 = scrape(d)
        lower = {k: (m1[k], m2.get(k)) for k in m1
                 if k.split("{")[0].endswith("_total") and not (m2.get(k, -1) >= m1[k])}
        check(not lower, f"metrics: counters went down across a reload: {lower}")
        nbytes, got = send_frames(f, sports, b"METRICS-TWO")
        m3 = scrape(d)
        d3 = {c: web(m3, c + "_total") - web(m2, c + "_total")
              for c in ("packets", "bytes", "new_flows", "conntrack_hits", "conntrack_lost")}
        check(d3 == {"packets": 10, "bytes": nbytes, "new_flows": 0, "conntrack_hits": 10,
                     "conntrack_lost": 0},
              f"metrics: after the reload, 10 frames of known flows ({nbytes} bytes): {d3}")
        print(f"metrics: reload: no counter lower; 10 more frames: {d3}", flush=True)
    finally:
        if f:
            f.close()
        d.stop()


def attached(topo):
    """Whether a hashlb program is on the LB's eth0 (XDP or tc)."""
    return ("xdp" in T.sh("ip", "link", "show", "eth0", ns=topo.lb).stdout or
            "hlb_tc" in T.sh("tc", "filter", "show", "dev", "eth0", "ingress", ns=topo.lb,
                             check=False).stdout)


# A connection held open through the service at 127.0.0.1:<port>: "held NAME" once the backend's
# greeting has come back through it. Not at the connect: that returns at the handshake, before the
# hashlb accepts it, and a SIGUSR2 sent then let the new process accept it from the listening socket
# they share (the old one drained nothing and exited at once).
HOLD = """
import signal, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
print("held", s.makefile("rb").readline().decode().strip(), flush=True)
signal.pause()  # until the test terminates it
"""


def upgrade(d, tag):
    """An upgrade in place of <d> (SIGUSR2): the new process's pid once it is ready, or None."""
    d.proc.send_signal(signal.SIGUSR2)
    line = d.wait_log("upgraded: the new hashlb is ready", 15)
    check(line is not None, f"{tag}: no upgrade in place")
    return line and int(line.split(" pid=")[1].split()[0])


def stop_pid(pid, d):
    """SIGTERM to the process an upgrade of <d> started (<pid>, or None), and wait until it
    exits (a second SIGTERM if it drains the kernel path's flows: its log is <d>'s)."""
    if pid:
        T.stop_draining(pid, d.lines)


def upgrade_unsteered(topo, servers):
    """An upgrade in place (SIGUSR2) whose config no longer steers the service in the kernel:
    the new process does not take the program over, so the old one detaches it at the
    handover, while it still drains a connection of another (userspace) service. Before, it
    left it attached, driven by nobody: it went on steering the VIP with its last table, so
    when b2's server died afterwards new clients were still sent to it (refused), and the
    program stayed after the new process had stopped; then (a first fix) until the old
    process had drained."""
    hold_port = 22950
    # drain: 1h: the old process runs until the test ends the held connection, however long
    # the checks before take on a loaded machine (30 s by default, as long as they may wait)
    other = (f"  - {{name: hold, listen: '127.0.0.1:{hold_port}', health: {{enabled: false}},\n"
             f"     timeouts: {{drain: 1h}},\n"
             f"     backends: [{{name: h1, address: '{topo.backend_ip(0)}:{T.VIP_PORT}'}}]}}\n")
    d = Daemon(topo, service(topo) + other).start()
    new_pid, holder = None, None
    try:
        check(d.wait_log("kernel steering table published", 15) is not None,
              "upgrade: no table published at start")
        holder = topo.spawn(topo.lb, [sys.executable, "-c", HOLD, str(hold_port)],
                            stdout=subprocess.PIPE, text=True)
        held = holder.stdout.readline().strip()
        check(held == "held b1", f"upgrade: no connection held through the old process: {held!r}")
        d.edit("steering: kernel", "steering: userspace")
        new_pid = upgrade(d, "upgrade")
        if new_pid is None:
            return
        gone, end = None, time.monotonic() + 30
        while time.monotonic() < end:
            if not attached(topo):
                gone = True
                break
            time.sleep(0.1)
        check(gone and d.proc.poll() is None,
              "upgrade: the program the new process did not take over is detached at the "
              f"handover, while the old process drains (detached: {bool(gone)}, old running: "
              f"{d.proc.poll() is None})")
        holder.terminate()
        holder.wait(timeout=10)
        d.proc.wait(timeout=15)
        check(not attached(topo), "upgrade: the old process left the program attached that "
              "the new one, its config steering the service in userspace, did not take over")
        servers[1].terminate()
        servers[1].wait(timeout=10)
        check(d.wait_log('msg="backend down" service=web backend=b2', 10) is not None,
              "upgrade: b2 not taken down by the new process")
        got = connect_count(topo, 20)
        check(set(got) <= {"b1", "b3"}, f"upgrade: new clients after b2 died: {dict(got)}")
        print(f"upgrade to steering: userspace: program attached after the old process "
              f"exited: {attached(topo)}; b2 down: 20 new clients {dict(got)}", flush=True)
    finally:
        if holder and holder.poll() is None:
            holder.terminate()
            holder.wait(timeout=10)
        stop_pid(new_pid, d)
        d.stop()
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def prefix(topo, servers):
    """hash_prefix {ipv4: 24, ipv6: 64} through the kernel path: the client's addresses, all
    in its /64 (then its /24), each reach the backend hashlb lookup -c names for them, one
    backend for all; a reload back to whole addresses publishes a table that parts them,
    each where lookup -c then says. (The program masks in its table's hash only: the parity
    test proves the hash, this that hashlb run publishes the prefix and reloads it.)"""
    v6 = [f"fd11::{0x100 + i:x}:{i * 7919 % 65536:x}" for i in range(12)]
    v4 = [f"{T.SUBNET}.{100 + i}" for i in range(12)]
    T.sh("ip", "-6", "addr", "add", f"{T.VIP6}/128", "dev", "lo", "nodad", ns=topo.lb)
    for a in v6:
        T.sh("ip", "-6", "addr", "add", f"{a}/64", "dev", "eth0", "nodad", ns=topo.client)
    for a in v4:
        T.sh("ip", "addr", "add", f"{a}/24", "dev", "eth0", ns=topo.client)
    d = None
    try:
        for vip, listen, srcs in ((T.VIP6, f"'[{T.VIP6}]:{T.VIP_PORT}'", v6),
                                  (T.VIP, f"{T.VIP}:{T.VIP_PORT}", v4)):
            def yaml(whole):
                return (service(topo).replace("hash_key: 4-tuple", "hash_key: src-ip" + (
                    "" if whole else "\n    hash_prefix: {ipv4: 24, ipv6: 64}"))
                    .replace(f"listen: {T.VIP}:{T.VIP_PORT}", f"listen: {listen}"))

            d = Daemon(topo, yaml(False)).start()
            if not check(d.wait_log("kernel steering table published", 15) is not None,
                         f"prefix: no table published at start: {d.lines[-3:]}"):
                return
            seen = []
            for whole in (False, True):
                if whole:
                    with open(d.path, "w") as fh:
                        fh.write(f"admin: unix:{d.admin}\nworkers: 1\nservices:\n{yaml(True)}")
                    d.skip_log()
                    d.proc.send_signal(signal.SIGHUP)
                    check(d.wait_log("kernel steering table published", 10) is not None,
                          "prefix: a reload to whole addresses published no table")
                before = steer_stats(topo).get("new_flows", 0)
                got = json.loads(T.sh(sys.executable, "-c", CONNECT_FROM, vip, str(T.VIP_PORT),
                                      *srcs, ns=topo.client, timeout=60).stdout)
                flows = steer_stats(topo).get("new_flows", 0) - before
                out = T.sh(HASHLB, "lookup", "-c", d.path, ",".join(srcs)).stdout
                want = {f[0]: f[1] for f in (line.split() for line in out.splitlines())}
                bad = {a: (got.get(a), want.get(a)) for a in srcs if got.get(a) != want.get(a)}
                tag = "whole addresses" if whole else "by prefix"
                check(not bad and flows >= len(srcs),
                      f"prefix: {vip} {tag}: (reached, lookup -c) differ: {bad}; "
                      f"{flows} new flows")
                seen.append(collections.Counter(got.values()))
            check(len(seen[0]) == 1 and len(seen[1]) > 1,
                  f"prefix: {vip}: one backend for the prefix, several for whole addresses: "
                  f"{seen}")
            print(f"prefix: {len(srcs)} clients of one prefix to {vip}: {dict(seen[0])}; "
                  f"whole addresses after a reload: {dict(seen[1])}", flush=True)
            d.stop()
            d = None
    finally:
        if d:
            d.stop()
        for a in v4:
            T.sh("ip", "addr", "del", f"{a}/24", "dev", "eth0", ns=topo.client, check=False)
        for a in v6:
            T.sh("ip", "-6", "addr", "del", f"{a}/64", "dev", "eth0", ns=topo.client,
                 check=False)
        T.sh("ip", "-6", "addr", "del", f"{T.VIP6}/128", "dev", "lo", ns=topo.lb, check=False)
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def flows(topo, servers):
    """steering_flows sizes the conntrack table of the program hashlb run attaches (before:
    no such key, always 98,304 entries, --flows 65,536's). A reload that changes it keeps the
    program, its table and every established flow, and says so in the log; a daemon that
    attaches the program anew (after a clean stop) uses the new size."""
    def yaml(n):
        return service(topo).replace("    interface: eth0\n",
                                     f"    interface: eth0\n    steering_flows: {n}\n")

    d = Daemon(topo, yaml(1000)).start()
    client = None
    try:
        if not check(d.wait_log("kernel steering table published", 15) is not None,
                     f"flows: no table published at start: {d.lines[-1:]}"):
            return
        cap = web(scrape(d), "conntrack_capacity")
        check(cap == 1536, f"flows: steering_flows 1000: capacity {cap}, want 1536 "
              "(256 buckets of 6)")
        client, held = hold(topo)
        with open(d.path, "w") as fh:
            fh.write(f"admin: unix:{d.admin}\nworkers: 1\nservices:\n{yaml(5000)}")
        d.skip_log()
        d.proc.send_signal(signal.SIGHUP)
        line = d.wait_log("kernel steering keeps its conntrack size", 10)
        check(line is not None and "flows_max=1536" in line and "steering_flows=5000" in line,
              f"flows: a reload to steering_flows 5000 not logged: {line}")
        cap2 = web(scrape(d), "conntrack_capacity")
        check(cap2 == 1536, f"flows: capacity after the reload {cap2}, want 1536 (kept)")
        lost = still_held(client, held, "flows: reload")
        client = None
        d.stop()
        d = Daemon(topo, yaml(5000)).start()
        check(d.wait_log("kernel steering attached", 15) is not None and
              d.wait_log("kernel steering table published", 15) is not None,
              "flows: the restarted daemon attached no program")
        cap3 = web(scrape(d), "conntrack_capacity")
        check(cap3 == 6144, f"flows: steering_flows 5000 after a restart: capacity {cap3}, "
              "want 6144 (1024 buckets of 6)")
        print(f"flows: steering_flows 1000: {cap} entries; reload to 5000: {cap2}, "
              f"{lost} of {len(held)} connections lost; restarted: {cap3}", flush=True)
    finally:
        if client:
            client.kill()
            client.wait()
        d.stop()
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def across_growth(topo, d, start, client, held, before, tag, want):
    """After a change that grows the program (logged since line <start> of <d>): one "kernel
    steering program grown" line, holding each of <want>; <client>'s <held> connections answer
    from their backends; no packet lost its entry, was rescheduled or dropped since <before>
    (steer_stats()). (that line, connections lost)"""
    grown_l = [x for x in d.lines[start:] if "kernel steering program grown" in x]
    check(len(grown_l) == 1 and all(w in grown_l[0] for w in want),
          f"{tag}: the growth not logged once with {want}: "
          f"{[x for x in d.lines[start:] if 'steering' in x]}")
    lost = still_held(client, held, f"{tag}: connections across the growth")
    after = steer_stats(topo)
    for k in ("ct_lost", "ct_resched", "drop_table", "drop_no_backend"):
        check(after.get(k, 0) == before.get(k, 0),
              f"{tag}: {k} {before.get(k, 0)} before the growth, {after.get(k, 0)} after")
    return (grown_l or [None])[0], lost


def outgrown(topo, servers):
    """A reload whose table outgrows the maps the program was loaded with (a ring of 480
    points, 3 backends at vnodes 160, in a program sized for 65,536; then vnodes 40,000:
    120,000 points) grows the program in place: one sized for the new table (240,000 points,
    twice it), its conntrack table carried, the hook replaced. The 24 connections held across
    it answer from their backends, none lost nor rescheduled (ct_lost, ct_resched); the growth
    is logged once, naming the service and the sizes; the new table is published and new
    clients go through the kernel path. ctl set b1 weight 10 (480,000 points at vnodes 40,000)
    grows it again, likewise, and new clients mostly reach b1. Before, both were refused
    ('restart hashlb (not an upgrade) to load a larger program'), and a restart detached the
    program and lost every conntrack entry."""
    def yaml(extra):
        return service(topo).replace("    interface: eth0\n",
                                     f"    interface: eth0\n    scheme: ring\n{extra}")

    d = Daemon(topo, yaml("")).start()
    client = None
    try:
        if not check(d.wait_log("kernel steering table published", 15) is not None,
                     f"outgrown: no table published at start: {d.lines[-1:]}"):
            return
        client, held = hold(topo)
        before = steer_stats(topo)
        start = len(d.lines)
        with open(d.path, "w") as fh:
            fh.write(f"admin: unix:{d.admin}\nworkers: 1\nservices:\n"
                     f"{yaml('    vnodes: 40000' + chr(10))}")
        d.skip_log()
        d.proc.send_signal(signal.SIGHUP)
        line = d.wait_log('msg="reload', 10)  # "reloaded" or "reload failed, ..."
        check(line is not None and "reload failed" not in line,
              f"outgrown: the reload to vnodes 40000 refused: {line}")
        check(d.wait_log("kernel steering table published", 10) is not None,
              "outgrown: the table of vnodes 40000 not published")
        grown_l, lost = across_growth(topo, d, start, client, held, before, "outgrown",
                                      ("service=web ", " max_ring_points=240000 "))
        client = None
        got = kernel_steered(topo, "outgrown: after the reload", T.VIP)
        check(sum(got.values()) == 20 and set(got) <= {"b1", "b2", "b3"},
              f"outgrown: new clients after the reload: {dict(got)}")

        start = len(d.lines)
        p = d.ctl("set", "b1", "weight", "10")
        check(p.returncode == 0, f"outgrown: ctl set b1 weight 10 (480,000 points) refused: "
              f"{p.returncode} {p.stdout.strip()} {p.stderr.strip()}")
        check(d.wait_log("kernel steering table published", 10) is not None,
              "outgrown: the table of b1 weight 10 not published")
        grown_w = [x for x in d.lines[start:] if "kernel steering program grown" in x]
        check(len(grown_w) == 1 and " max_ring_points=960000 " in grown_w[0],
              f"outgrown: the growth for the weight not logged once: {grown_w}")
        got_w = kernel_steered(topo, "outgrown: b1 weight 10", T.VIP, 40)
        check(got_w.get("b1", 0) >= 20,
              f"outgrown: b1 (weight 10 of 12) has {got_w.get('b1', 0)} of 40 new clients")
        m = scrape(d)
        check(web(m, "table_stale") == 0 and web(m, "tables_refused_total") == 0,
              f"outgrown: table_stale {web(m, 'table_stale')}, tables_refused_total "
              f"{web(m, 'tables_refused_total')}, want 0 and 0")
        print(f"outgrown: {grown_l and grown_l.split('msg=')[-1].strip()}; {len(held)} held, "
              f"{lost} lost; new clients {dict(got)}; weight 10: {dict(got_w)}", flush=True)
    finally:
        if client:
            client.kill()
            client.wait()
        d.stop()
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def outgrown_shared(topo, servers):
    """Two services on eth0 (web over b1, b2; api over b3), a program of 4 tables of 65,536
    ring points each and Maglev's default M: a reload making api a ring of vnodes 70,000
    (70,000 points) and web a Maglev of table_size 65,543 grows the program in place once, at
    web's check, for both new configs (140,000 points and M 65,544 each), every table
    carried, api's handle moved to it. web's 24 connections held across it answer from their
    backends, none lost nor rescheduled; the growth is logged once; api's 20 new clients reach
    b3 and web's b1 and b2 through the kernel path; then each service's next table (ctl set b3
    weight 2: 140,000 points, ctl set b1 drain) is published into the new program. Before,
    the reload was refused until a restart; and then, web's growth sized by api's config of
    before (65,536 points), api's check grew the program a second time: two program loads,
    each a verifier run on the control thread."""
    web, api = two_services_yaml(topo)
    d = two_services_start(topo, web + api, "outgrown_shared")
    client = None
    try:
        client, held = hold(topo)
        before = steer_stats(topo)
        start = len(d.lines)
        iface = "    interface: eth0\n"
        d.reload_edit(web + api,
                      web.replace(iface, iface + "    scheme: maglev\n    table_size: 65543\n") +
                      api.replace(iface, iface + "    scheme: ring\n    vnodes: 70000\n"),
                      "service=api generation=",
                      "outgrown_shared: reload of web's table_size and api's vnodes")
        grown_l, lost = across_growth(topo, d, start, client, held, before, "outgrown_shared",
                                      ("service=web ", " tables=4 ", " max_maglev_m=65544 ",
                                       " max_ring_points=140000 "))
        client = None
        got4, got6 = each_steered(topo, "outgrown_shared: grown")
        start = len(d.lines)
        p1 = d.ctl("set", "b3", "weight", "2")
        p2 = d.ctl("set", "b1", "drain")
        check(p1.returncode == 0 and p2.returncode == 0,
              f"outgrown_shared: ctl set: {p1.stderr.strip()} {p2.stderr.strip()}")
        missing = d.wait_each(["service=api generation=", "service=web generation="], 10)
        refused = [x for x in d.lines[start:] if "table not updated" in x or
                   "program grown" in x]
        check(not missing and not refused,
              f"outgrown_shared: after the growth, tables not published for {missing}: "
              f"{refused}")
        got4b = kernel_steered(topo, "outgrown_shared: b1 draining", T.VIP)
        check(got4b == {"b2": 20}, f"outgrown_shared: web's clients, b1 draining: {dict(got4b)}")
        m = scrape(d)
        stale = {svc: m.get(f'hashlb_service_steer_table_stale{{service="{svc}"}}')
                 for svc in ("web", "api")}
        check(stale == {"web": 0, "api": 0}, f"outgrown_shared: table_stale {stale}")
        print(f"outgrown_shared: {grown_l and grown_l.split('msg=')[-1].strip()}; "
              f"{len(held)} held, {lost} lost; web's 20 {dict(got4)}, api's {dict(got6)}; "
              f"b1 draining: {dict(got4b)}", flush=True)
    finally:
        if client:
            client.kill()
            client.wait()
        two_services_end(topo, d)


def outgrown_shared_backends(topo, servers):
    """Two services on eth0 (web over b1, b2; api over b3), a program of 4 tables of 256
    backends each: a reload giving each 299 more backends at weight 0 (static neighbour
    entries no host answers), and api b2 after them (its slot past the first 256), grows the
    program's backends in place, every table carried (602 backends each), the slots the
    conntrack entries name kept where they are: appended, not re-strided, where web's new
    slots 256 and up would be api's of before, its held flows rescheduled. web's 24 and api's
    12 connections held across it answer from their backends, none lost nor rescheduled; the
    growth is logged once; api's 20 new clients reach b3 and b2, the new backend, through the
    kernel path, and web's b1 and b2. Before, the reload was refused ('restart hashlb (not an
    upgrade) to load one sized for every service')."""
    n = 299
    batch = "".join(f"neigh replace 10.213.{i // 250}.{i % 250 + 1} lladdr "
                    f"02:00:00:00:{i // 256:02x}:{i % 256:02x} dev eth0 nud permanent\n"
                    for i in range(n))
    subprocess.run(["ip", "-n", topo.lb, "-batch", "-"], input=batch, text=True, check=True,
                   timeout=60)
    web, api = two_services_yaml(topo)
    d = two_services_start(topo, web + api, "outgrown_shared_backends")
    clients = []
    try:
        clients = [hold(topo), hold(topo, 12, T.VIP6)]
        before = steer_stats(topo)
        start = len(d.lines)
        more = "".join(f"      - {{name: p{i}, address: '10.213.{i // 250}.{i % 250 + 1}:"
                       f"{T.VIP_PORT}', weight: 0}}\n" for i in range(n))
        b2 = f"      - {{name: b2, address: '{topo.backend_ip(1)}:{T.VIP_PORT}'}}\n"
        b3 = f"      - {{name: b3, address: '{topo.backend_ip(2)}:{T.VIP_PORT}'}}\n"
        checks = "    health: {interval: 200ms, timeout: 200ms, rise: 1, fall: 2}\n"
        new = (web.replace(checks, "    health: {enabled: false}\n").replace(b2, b2 + more) +
               api.replace(checks, "    health: {enabled: false}\n")
               .replace(b3, b3 + more + b2))
        d.reload_edit(web + api, new, "service=api generation=",
                      "outgrown_shared_backends: reload to 301 backends each")
        grown_l, lost = across_growth(topo, d, start, clients[0][0], clients[0][1], before,
                                      "outgrown_shared_backends",
                                      (" tables=4 ", " max_backends=602 "))
        lost += still_held(clients[1][0], clients[1][1],
                           "outgrown_shared_backends: api's connections across the growth")
        clients = []
        got4 = kernel_steered(topo, "outgrown_shared_backends: web", T.VIP)
        got6 = kernel_steered(topo, "outgrown_shared_backends: api", T.VIP6)
        check(sum(got4.values()) == 20 and set(got4) <= {"b1", "b2"},
              f"outgrown_shared_backends: web's clients not all on b1, b2: {dict(got4)}")
        check(sum(got6.values()) == 20 and set(got6) == {"b2", "b3"},
              f"outgrown_shared_backends: api's clients not on b3 and its new b2: "
              f"{dict(got6)}")
        print(f"outgrown_shared_backends: {grown_l and grown_l.split('msg=')[-1].strip()}; "
              f"36 held, {lost} lost; web's 20 {dict(got4)}, api's {dict(got6)}", flush=True)
    finally:
        for client, _ in clients:
            client.kill()
            client.wait()
        two_services_end(topo, d)
        T.sh("ip", "neigh", "flush", "to", "10.213.0.0/16", ns=topo.lb, check=False)


def outgrown_locked(topo, servers):
    """A reload whose table outgrows the program (vnodes 40,000: 120,000 ring points in one of
    65,536), then ctl set b1 weight 10 (480,000), each while another publication holds the
    program's lock (here the test: an flock on its lock file; in life a hashlb steer --update,
    or a hashlb beside this one): neither is refused. The change applies, the kernel keeps the
    table in force (table_stale 1), the growth is tried again every second and said once the
    lock has been held 2 s, naming the holder; once the lock is let go the program grows,
    logged once with the new size, the new table is published (table_stale 0) and new
    clients go through the kernel path, b1 taking most of them at weight 10. Before, each was
    refused: 'a larger program is loaded once no other publication holds its lock (...): try
    again', for a lock a moment from free."""
    import fcntl

    def yaml(extra):
        return service(topo).replace("    interface: eth0\n",
                                     f"    interface: eth0\n    scheme: ring\n{extra}")

    def locked_change(change, tag, size):
        """Takes the lock, makes <change> (a callable: the process it ran), which must
        succeed; the table refused meanwhile, naming this process; the lock let go, the
        growth to <size> ring points logged once and the table published."""
        path = lock_file(topo)
        if not check(path and os.path.exists(path), f"{tag}: no lock file ({path})"):
            return False
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            d.skip_log()
            start = len(d.lines)
            p = change()
            if not check(p.returncode == 0, f"{tag}: refused while the lock was held: "
                         f"{p.returncode} {p.stdout.strip()} {p.stderr.strip()}"):
                return False
            line = d.wait_log("kernel steering table not updated", 15)
            check(line is not None and f"process {os.getpid()}" in line,
                  f"{tag}: the table not refused for the lock, naming this process: {line}")
            stale = web(scrape(d), "table_stale")
            early = [x for x in d.lines[start:] if "program grown" in x or
                     "kernel steering table published" in x]
            check(stale == 1 and not early,
                  f"{tag}: while the lock was held, table_stale {stale}: {early}")
        finally:
            os.close(fd)
        # a growth loads a program (the verifier's pass over maps of up to 960,000
        # points): seconds on a loaded machine
        check(d.wait_log("kernel steering table published", 90) is not None,
              f"{tag}: the table not published once the lock was let go")
        grown_l = [x for x in d.lines[start:] if "kernel steering program grown" in x]
        check(len(grown_l) == 1 and f" max_ring_points={size} " in grown_l[0],
              f"{tag}: the growth to {size} points not logged once: {grown_l}")
        m = scrape(d)
        check(web(m, "table_stale") == 0, f"{tag}: table_stale {web(m, 'table_stale')}")
        return True

    d = Daemon(topo, yaml("")).start()
    try:
        if not check(d.wait_log("kernel steering table published", 15) is not None,
                     f"outgrown_locked: no table published at start: {d.lines[-1:]}"):
            return

        def reload():
            with open(d.path, "w") as fh:
                fh.write(f"admin: unix:{d.admin}\nworkers: 1\nservices:\n"
                         f"{yaml('    vnodes: 40000' + chr(10))}")
            return d.ctl("reload")

        if not locked_change(reload, "outgrown_locked: reload", 240000):
            return
        got = kernel_steered(topo, "outgrown_locked: after the reload", T.VIP)
        check(sum(got.values()) == 20 and set(got) <= {"b1", "b2", "b3"},
              f"outgrown_locked: new clients after the reload: {dict(got)}")
        if not locked_change(lambda: d.ctl("set", "b1", "weight", "10"),
                             "outgrown_locked: ctl set b1 weight 10", 960000):
            return
        got_w = kernel_steered(topo, "outgrown_locked: b1 weight 10", T.VIP, 40)
        check(got_w.get("b1", 0) >= 20,
              f"outgrown_locked: b1 (weight 10 of 12) has {got_w.get('b1', 0)} of 40 new "
              f"clients")
        print(f"outgrown_locked: reload and ctl set applied with the lock held, the program "
              f"grown once it was let go; new clients {dict(got)}, weight 10: {dict(got_w)}",
              flush=True)
    finally:
        d.stop()
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def rebind_fails(pid, mark, fn="hashlb_steer_rebind", errno=12, caller=None):
    """gdb attached to hashlb <pid> (a background process: .wait() it): the first call of
    <fn> (by function <caller> if given) returns -<errno> at once (hashlb_steer_rebind()
    -ENOMEM, as out of memory or descriptors would make it), then gdb detaches; file <mark>
    is written once the breakpoint is set."""
    where = fn if caller is None else f'{fn} if $_caller_is("{caller}")'
    return gdb_at(pid, mark, where, f"gdb.execute('return -{errno}')\n"
                  f"print('injected: {fn} returns -{errno}')\n")


def gdb_at(pid, mark, where, then, before=""):
    """gdb attached to hashlb <pid> (a background process: .wait() it), stopped at the first
    breakpoint <where> hits, runs the Python lines <then> there, then detaches; file <mark>
    is written once the breakpoint is set, after the Python lines <before> ran."""
    script = (
        "python\n"
        "import gdb\n"
        "gdb.execute('set confirm off')\n"
        f"{before}"
        f"gdb.execute({'break ' + where!r})\n"
        f"open({mark!r}, 'w').write('set')\n"
        "gdb.execute('continue')\n"
        f"{then}"
        "gdb.execute('delete')\n"
        "gdb.execute('detach')\n"
        "end\n")
    f = tempfile.NamedTemporaryFile("w", suffix=".gdb", delete=False)
    f.write(script)
    f.close()
    return subprocess.Popen(["gdb", "-q", "-batch", "-nx", "-p", str(pid), "-x", f.name],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def grown_rebind_failed(topo, servers):
    """outgrown_shared's reload (api a ring of vnodes 70,000, outgrowing the program of 4
    tables it shares with web), api's handle failing to move to the program grown (gdb makes
    hashlb_steer_rebind() fail, as out of memory or descriptors would): the reload applies,
    the failure is said once, naming api and that its table is found again in the program
    grown, which it is at once: api's table published, its 20 new clients on b3 through the
    kernel path, web's on b1 and b2, and no 'kernel steering lost'. Before, the failure was
    only logged, api's handle stayed on the replaced program (no packet reads it), and the
    reload was refused, its check asked of that program ('not even by a larger program')."""
    reason = gdbfail.unusable()
    if reason:
        raise T.Skip(reason)
    web, api = two_services_yaml(topo)
    d = two_services_start(topo, web + api, "grown_rebind_failed")
    mark = tempfile.mktemp(prefix="hlbrebind-")
    gdb = None
    try:
        gdb = rebind_fails(d.proc.pid, mark)
        for _ in range(600):
            if os.path.exists(mark) or gdb.poll() is not None:
                break
            time.sleep(0.1)
        if not check(os.path.exists(mark), f"grown_rebind_failed: gdb not attached: "
                     f"{gdb.poll()} {gdb.stdout.read() if gdb.poll() is not None else ''}"):
            return
        d.edit(api, api.replace("    interface: eth0\n",
                                "    interface: eth0\n    scheme: ring\n    vnodes: 70000\n"))
        d.skip_log()
        start = len(d.lines)
        p = d.ctl("reload")
        check(p.returncode == 0, f"grown_rebind_failed: reload refused: {p.stdout} {p.stderr}")
        out, _ = gdb.communicate(timeout=120)
        gdb = None
        check("injected" in out, f"grown_rebind_failed: no failure injected: {out}")
        # a growth loads a program: seconds on a loaded machine
        published = d.wait_log("service=api generation=", 60)
        lines = d.lines[start:]
        grown = [x for x in lines if "kernel steering program grown" in x]
        moved = [x for x in lines if "its table not moved to the program grown" in x]
        check(published is not None and len(grown) == 1 and len(moved) == 1 and
              "service=api " in moved[0] and "found again" in moved[0],
              f"grown_rebind_failed: api's table not found again and published: "
              f"{[x for x in lines if 'steering' in x]}")
        got4, got6 = each_steered(topo, "grown_rebind_failed")
        lost = [x for x in d.lines[start:] if "kernel steering lost" in x]
        check(not lost, f"grown_rebind_failed: a service's program found lost: {lost}")
        print(f"grown_rebind_failed: {moved and moved[0].split('msg=')[-1][:90]}...; web's 20 "
              f"{dict(got4)}, api's {dict(got6)}", flush=True)
    finally:
        if gdb is not None:
            gdb.kill()
            gdb.wait()
        if os.path.exists(mark):
            os.unlink(mark)
        two_services_end(topo, d)


def too_small(topo, servers):
    """A program too small for the config's table, taken over (here an orphan that hashlb
    steer --keep sized for 2 backends; an upgrade's program sized for an older config alike,
    once the replaced hashlb stops) is grown in place for the config: the orphan's 24
    connections held across the takeover answer from their backends, none lost nor
    rescheduled; the growth is logged once, the config's table published, no table refused,
    and new clients reach b3 too. Before, the table was refused ('its program is too small
    for this config ... until hashlb is stopped (which detaches it) and started again'), the
    orphan's table of 2 backends steering until a restart that lost every conntrack entry."""
    p = T.sh(HASHLB, "steer", "-i", "eth0", "--keep", "--mode", "tc", "--max-backends", "2",
             "--vip", f"{T.VIP}:{T.VIP_PORT}", "--key", "4-tuple",
             *[a for i in range(2) for a in ("-b", f"b{i + 1}={topo.backend_ip(i)}")],
             ns=topo.lb, check=False)
    check(p.returncode == 0, f"too small: the orphan: {p.returncode} {p.stderr.strip()}")
    client, held = hold(topo)
    before = steer_stats(topo)
    # no health checks: no state change makes a new table
    d = Daemon(topo, service(topo, health="{enabled: false}")).start()
    try:
        taken = d.wait_log("kernel steering taken over", 15)
        published = d.wait_log("kernel steering table published", 10)
        check(taken is not None and published is not None,
              f"too small: not taken over and published: "
              f"{[x for x in d.lines if 'kernel steering' in x]}")
        grown_l, lost = across_growth(topo, d, 0, client, held, before, "too small",
                                      ("service=web ", " max_backends=256 "))
        client = None
        m = scrape(d)
        grown_all = [x for x in d.lines if "kernel steering program grown" in x]
        check(len(grown_all) == 1 and web(m, "tables_refused_total") == 0 and
              web(m, "table_stale") == 0,
              f"too small: {len(grown_all)} growths, tables_refused_total "
              f"{web(m, 'tables_refused_total')}, table_stale {web(m, 'table_stale')}")
        got = kernel_steered(topo, "too small", T.VIP, 40)
        check(set(got) <= {"b1", "b2", "b3"} and "b3" in got,
              f"too small: new clients not on the config's table: {dict(got)}")
        print(f"too small: {grown_l and grown_l.split('msg=')[-1].strip()}; {len(held)} held, "
              f"{lost} lost; 40 new {dict(got)}", flush=True)
    finally:
        if client:
            client.kill()
            client.wait()
        d.stop()
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)


def slots_held(topo, servers):
    """A program taken over (an orphan hashlb steer --keep, 3 backend slots) whose table holds
    a backend this config does not have ('old', at b3's address): the config's table of b1,
    b2, b3 fits the program, but its new backends have one free slot, and 'old' holds the
    other until the table without it is in force. It is published at once: the slot passes
    to the new backend with the table, with the next incarnation. Established connections on
    b1 keep it; those on 'old' are scheduled again by the new table (ct_resched), as after
    any table that drops a backend; 30 new clients reach b1, b2 and b3. Before, it was
    refused, logged once ('this table's 3 backends and the 1 it drops from the table in force
    need 4 backend slots together, the program has 3'), the operator told to reload with
    fewer new backends first, then with all of them; 0 new clients reached b2."""
    topo.resolve()
    p = T.sh(HASHLB, "steer", "-i", "eth0", "--keep", "--mode", "tc", "--max-backends", "3",
             "--vip", f"{T.VIP}:{T.VIP_PORT}", "--key", "4-tuple",
             "-b", f"b1={topo.backend_ip(0)}", "-b", f"old={topo.backend_ip(2)}",
             ns=topo.lb, check=False)
    check(p.returncode == 0, f"slots held: the orphan: {p.returncode} {p.stderr.strip()}")
    yaml = service(topo, health="{enabled: false}")
    client = d = None
    try:
        client, held = hold(topo)
        # 'old' is b3's server: a connection there answers "b3"
        on_b1 = [sp for sp, n in held.items() if n == "b1"]
        on_old = [sp for sp, n in held.items() if n == "b3"]
        check(on_b1 and on_old, f"slots held: connections on b1 and 'old' both, or the test "
              f"proves nothing: {held}")
        before = steer_stats(topo).get("ct_resched", 0)
        d = Daemon(topo, yaml).start()
        pub = d.wait_log("kernel steering table published", 15)
        refused = d.wait_log("kernel steering table not updated", 0)
        check(pub is not None and refused is None,
              f"slots held: the config's table not published: "
              f"{[x for x in d.lines if 'steering' in x][-2:]}")
        got = steered(topo, "slots held", 30)
        check(set(got) == {"b1", "b2", "b3"}, f"slots held: 30 new clients: {dict(got)}")
        client.stdin.write("quit\n")
        client.stdin.flush()
        answers = dict(json.loads(client.stdout.readline()))
        client.wait(timeout=10)
        lost = [(sp, answers.get(sp)) for sp in on_b1 if answers.get(sp) != "b1"]
        check(not lost, f"slots held: {len(lost)} of {len(on_b1)} connections on b1 lost or "
              f"moved: {lost[:3]}")
        resched = steer_stats(topo).get("ct_resched", 0) - before
        check(resched >= len(on_old), f"slots held: {len(on_old)} connections on 'old', "
              f"ct_resched {resched}")
        print(f"slots held: the config's table published at once; {len(on_b1)} connections on "
              f"b1 kept, {len(on_old)} on 'old' rescheduled (ct_resched {resched}); 30 new "
              f"clients {dict(got)}", flush=True)
    finally:
        client_ended(topo, client, 2)  # 'old' is b3's server
        if d:
            d.stop()
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)


def removed_drains(topo, servers, full=False):
    """A reload removes b2 (and adds b3 in its place) with timeouts.drain 3s: the connections
    held on b2 through the kernel path keep it, answering from it after the reload (none
    rescheduled, ct_resched unchanged), as the daemon's own connections of a removed backend
    drain; new clients go to b1 and b3. Once the drain ends, its slot is freed (logged) and its
    flows are rescheduled, which their new backend resets, as the daemon closes its own then.
    Before, the reload rescheduled them at once (ct_resched rose by b2's connections).
    <full> (removed_drains_full): the program taken over, an orphan hashlb steer --keep of 2
    backend slots, b1's and b2's, b3 left none but b2's held one: the reload grows the program
    (logged), b2's flows kept the same. Before, b3 took b2's slot, its flows reset at the reload
    with no word (ct_resched rose by them)."""
    b2 = f"      - {{name: b2, address: '{topo.backend_ip(1)}:{T.VIP_PORT}'}}\n"
    b3 = f"      - {{name: b3, address: '{topo.backend_ip(2)}:{T.VIP_PORT}'}}\n"
    yaml = service(topo).replace(b3, "").replace("    backends:\n",
                                                 "    timeouts: {drain: 3s}\n    backends:\n")
    if full:
        topo.resolve()
        p = T.sh(HASHLB, "steer", "-i", "eth0", "--keep", "--mode", "tc", "--max-backends",
                 "2", "--vip", f"{T.VIP}:{T.VIP_PORT}", "--key", "4-tuple",
                 *[a for i in range(2) for a in ("-b", f"b{i + 1}={topo.backend_ip(i)}")],
                 ns=topo.lb, check=False)
        check(p.returncode == 0, f"removed_drains_full: the orphan: {p.returncode} "
              f"{p.stderr.strip()}")
    d = Daemon(topo, yaml).start()
    client = None
    try:
        check(d.wait_log("kernel steering table published", 15) is not None,
              "removed_drains: no table published at start")
        client, held = hold(topo, 16)
        on_b2 = [sp for sp, n in held.items() if n == "b2"]
        check(on_b2, f"removed_drains: no connection on b2, the test proves nothing: {held}")
        before = steer_stats(topo).get("ct_resched", 0)
        d.edit(b2, b3)
        d.skip_log()
        p = d.ctl("reload")
        check(p.returncode == 0, f"removed_drains: reload: {p.stdout} {p.stderr}")
        check(d.wait_log("kernel steering table published", 10) is not None,
              "removed_drains: no table published after the reload")
        grown = [x for x in d.lines if "kernel steering program grown" in x]
        check(len(grown) == (1 if full else 0),
              f"removed_drains: program grown {len(grown)} times: {grown}")
        # a line on every held connection, then 16 new ones
        client.stdin.write("again\n")
        client.stdin.flush()
        answers = dict(json.loads(client.stdout.readline()))
        fresh = collections.Counter(n for _, n in json.loads(client.stdout.readline()))
        lost = {sp: (held[sp], answers.get(sp)) for sp in held if answers.get(sp) != held[sp]}
        resched = steer_stats(topo).get("ct_resched", 0) - before
        check(not lost and resched == 0,
              f"removed_drains: while b2 drains, {len(lost)} of {len(held)} held connections "
              f"lost or moved ({len(on_b2)} on b2): {list(lost.items())[:3]}; ct_resched "
              f"{resched}")
        check("b2" not in fresh and "b3" in fresh,
              f"removed_drains: new clients while b2 drains: {dict(fresh)}")
        ended = d.wait_log("kernel steering: removed backends' drain ended", 10)
        check(ended is not None and "service=web backends=1" in ended and
              d.wait_log("kernel steering table published", 5) is not None,
              f"removed_drains: its drain's end: {ended}, then no table published")
        client.stdin.write("quit\n")
        client.stdin.flush()
        answers = dict(json.loads(client.stdout.readline()))
        client.wait(timeout=10)
        moved = [sp for sp in on_b2 if answers.get(sp) == "b2"]
        resched = steer_stats(topo).get("ct_resched", 0) - before
        check(not moved and resched >= len(on_b2),
              f"removed_drains: after its drain, {len(moved)} of b2's {len(on_b2)} connections "
              f"still reach it, ct_resched {resched}")
        print(f"removed_drains{'_full' if full else ''}: {len(on_b2)} of {len(held)} held "
              f"connections on b2 kept while it drained, rescheduled after (ct_resched "
              f"{resched}); new clients {dict(fresh)}", flush=True)
    finally:
        client_ended(topo, client, 1)
        d.stop()
        if full:
            T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
            T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)


def removed_drains_full(topo, servers):
    removed_drains(topo, servers, full=True)


def two_hooks(topo, servers):
    """Two hashlb programs on eth0, neither driven: an orphan at the XDP hook (hashlb steer
    --keep) and one at tc (attached by hand here, as another process or an older hashlb that
    did not refuse it might have). The daemon takes the XDP one over, which sees every packet
    first, and says so, naming both and how to detach the other; its table steers. Before, it
    took the XDP one without a word, the tc one left behind unseen."""
    BPF_OBJ = os.path.join(os.environ.get("HASHLB_BUILD_ROOT", "build"), "bpf", "steer.bpf.o")
    p = T.sh(HASHLB, "steer", "-i", "eth0", "--keep", "--mode", "xdp-generic",
             "--vip", f"{T.VIP}:{T.VIP_PORT}", "--key", "4-tuple",
             *[a for i in range(2) for a in ("-b", f"b{i + 1}={topo.backend_ip(i)}")],
             ns=topo.lb, check=False)
    check(p.returncode == 0, f"two hooks: the XDP orphan: {p.returncode} {p.stderr.strip()}")
    T.sh("tc", "qdisc", "add", "dev", "eth0", "clsact", ns=topo.lb, check=False)
    T.sh("tc", "filter", "add", "dev", "eth0", "ingress", "handle", "0x4c42", "pref", "1",
         "bpf", "da", "obj", BPF_OBJ, "sec", "tc", ns=topo.lb)
    d = Daemon(topo, service(topo)).start()
    try:
        taken = d.wait_log("kernel steering taken over", 15)
        warned = [x for x in d.lines if "two hashlb programs" in x]
        check(taken is not None and "mode=xdp-generic" in taken and warned and
              "xdp-generic (program" in warned[0] and "tc (program" in warned[0] and
              "--mode tc --detach" in warned[0],
              f"two hooks: taken {taken}, warned {warned}")
        check(d.wait_log("kernel steering table published", 10) is not None,
              "two hooks: no table published")
        got = steered(topo, "two hooks", 20, mode="xdp")
        print(f"two hooks: {warned and warned[0].strip()}; 20 new clients {dict(got)}",
              flush=True)
    finally:
        d.stop()
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", "--mode", "tc", ns=topo.lb,
             check=False)
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)
    two_hooks_driven(topo, BPF_OBJ)
    two_hooks_xdp_driven(topo)


def driven_later(topo, servers):
    """hashlb run started while a foreground hashlb steer drives the program on eth0 (an
    operator's first trial left running): not started, the error naming that hashlb steer and
    its pid and saying it is tried every second; once it is stopped, the daemon attaches its
    own by itself and 20 new clients go through the kernel path. Before, the error said only
    `driven by process N`, and the service stayed in userspace until a restart: not retried,
    and a reload that changed nothing did not try again either."""
    fg = topo.spawn(topo.lb, [HASHLB, "steer", "-i", "eth0", "--vip", f"{T.VIP}:{T.VIP_PORT}",
                              "-b", f"b1={topo.backend_ip(0)}"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    d = None
    try:
        line = fg.stdout.readline()
        check("attached" in line, f"driven later: hashlb steer did not attach: {line}")
        d = Daemon(topo, service(topo)).start()
        refused = d.wait_log("kernel steering not started", 15)
        check(refused is not None and
              f"driven by a foreground hashlb steer (process {fg.pid})" in refused and
              "tried every second" in refused,
              f"driven later: the refusal does not name the foreground steer: {refused}")
        fg.terminate()
        fg.wait(timeout=10)
        attached = d.wait_log("kernel steering attached", 10)
        check(attached is not None and "the process that drove the program is gone" in attached,
              f"driven later: not attached once the foreground steer stopped: "
              f"{[x for x in d.lines if 'steering' in x][-3:]}")
        check(d.wait_log("kernel steering table published", 10) is not None,
              "driven later: no table published")
        got = kernel_steered(topo, "driven later", T.VIP)
        print(f"driven later: {refused.strip()}; then {attached.strip()}; new clients "
              f"{dict(got)}", flush=True)
    finally:
        if fg.poll() is None:
            fg.terminate()
            fg.wait(timeout=10)
        if d:
            d.stop()
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def two_hooks_driven(topo, BPF_OBJ):
    """The same, the tc one driven by a live foreground hashlb steer, the XDP one an orphan
    (attached by hand): the daemon takes the XDP one over, and its warning names the process
    that drives the tc one, which refuses a --detach naming its pid. Before, the warning said
    `hashlb steer -i IFACE --mode tc --detach removes it`: refused."""
    fg = topo.spawn(topo.lb, [HASHLB, "steer", "-i", "eth0", "--mode", "tc", "--vip",
                              f"{T.VIP}:{T.VIP_PORT}", "--key", "4-tuple",
                              *[a for i in range(2)
                                for a in ("-b", f"b{i + 1}={topo.backend_ip(i)}")]],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    d = None
    try:
        line = fg.stdout.readline()
        check("attached" in line, f"two hooks, tc driven: hashlb steer did not attach: {line}")
        T.sh("ip", "link", "set", "dev", "eth0", "xdpgeneric", "obj", BPF_OBJ, "sec", "xdp",
             ns=topo.lb)
        d = Daemon(topo, service(topo)).start()
        taken = d.wait_log("kernel steering taken over", 15)
        warned = [x for x in d.lines if "two hashlb programs" in x]
        p = T.sh(HASHLB, "steer", "-i", "eth0", "--mode", "tc", "--detach", ns=topo.lb,
                 check=False)
        print(f"two hooks, tc driven by {fg.pid}: {warned and warned[0].strip()}; its "
              f"--detach: {p.stderr.strip()}", flush=True)
        check(taken is not None and "mode=xdp-generic" in taken and warned and
              f"is process {fg.pid}'s" in warned[0] and "--detach removes" not in warned[0],
              f"two hooks, tc driven: taken {taken}, warned {warned}")
        check(p.returncode != 0 and f"process {fg.pid}" in p.stderr,
              f"two hooks, tc driven: --detach of the driven one: {p.returncode} {p.stderr}")
    finally:
        if d:
            d.stop()
        fg.terminate()
        fg.wait(timeout=15)
        T.sh("ip", "link", "set", "dev", "eth0", "xdpgeneric", "off", ns=topo.lb, check=False)
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)


def two_hooks_xdp_driven(topo):
    """The other way round: the XDP one driven by a live foreground hashlb steer, the tc one an
    orphan (a hashlb steer --keep's; nobody holds its maps). The daemon takes the tc orphan over,
    as it would take it over alone, and says that the XDP one, which sees every packet first, is
    that process's, and that stopping it detaches it; once it is stopped, 20 new clients go
    through the tc program by the daemon's table, with no restart. Before, the daemon refused to
    start steering (`the hashlb program on 'eth0' is driven by process N`, the tc orphan not
    named), and the orphan went on steering with its last table, driven by nobody.
    hashlb refuses to attach beside its own program, so the tc orphan is set aside while the
    foreground one attaches: pinned on a bpffs of the test's own, its filter deleted, then
    added again from the pin."""
    backends = [a for i in range(3) for a in ("-b", f"b{i + 1}={topo.backend_ip(i)}")]
    p = T.sh(HASHLB, "steer", "-i", "eth0", "--keep", "--mode", "tc",
             "--vip", f"{T.VIP}:{T.VIP_PORT}", "--key", "4-tuple", *backends,
             ns=topo.lb, check=False)
    check(p.returncode == 0, f"two hooks, XDP driven: the tc orphan: {p.returncode} "
          f"{p.stderr.strip()}")
    tc_id = tc_prog(topo)
    bpffs = tempfile.mkdtemp(prefix=f"hlbst-{os.getpid()}-bpf-")
    # Not named tc: tc loading an object file (two_hooks, here or in another run beside this
    # one) takes the first bpffs mounted, this one while it is, for its tc/globals directory,
    # and failed ("mkdir .../tc//globals/ failed: Not a directory") when tc was this pin.
    pin = os.path.join(bpffs, "orphan")
    fg, d = None, None
    try:
        T.sh("mount", "-t", "bpf", "bpf", bpffs)
        T.sh("bpftool", "prog", "pin", "id", str(tc_id), pin)
        T.sh("tc", "filter", "del", "dev", "eth0", "ingress", "handle", "0x4c42", "pref", "1",
             "bpf", ns=topo.lb)
        fg = topo.spawn(topo.lb, [HASHLB, "steer", "-i", "eth0", "--mode", "xdp-generic",
                                  "--vip", f"{T.VIP}:{T.VIP_PORT}", "--key", "4-tuple",
                                  *backends[:4]],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = fg.stdout.readline()
        check("attached" in line, f"two hooks, XDP driven: hashlb steer did not attach: {line}")
        T.sh("tc", "filter", "add", "dev", "eth0", "ingress", "handle", "0x4c42", "pref", "1",
             "bpf", "da", "pinned", pin, ns=topo.lb)
        os.unlink(pin)
        check(tc_prog(topo) == tc_id, f"two hooks, XDP driven: tc program {tc_prog(topo)}, "
              f"not the orphan {tc_id}")
        d = Daemon(topo, service(topo)).start()
        taken = d.wait_log("kernel steering taken over", 15)
        warned = [x for x in d.lines if "two hashlb programs" in x]
        refused = [x for x in d.lines if "kernel steering not started" in x]
        check(taken is not None and "mode=tc" in taken and "from=orphan" in taken and
              warned and f"is process {fg.pid}'s" in warned[0] and
              "xdp-generic (program" in warned[0],
              f"two hooks, XDP driven: taken {taken}, warned {warned}, refused {refused}")
        published = d.wait_log("kernel steering table published", 10)
        check(published is not None, "two hooks, XDP driven: no table published")
        fg.terminate()
        fg.wait(timeout=15)
        link = T.sh("ip", "link", "show", "eth0", ns=topo.lb).stdout
        check("xdp" not in link and tc_prog(topo) == tc_id,
              f"two hooks, XDP driven: after the foreground hashlb steer stopped: {link.strip()}"
              f", tc program {tc_prog(topo)} (before: {tc_id})")
        got = steered(topo, "two hooks, XDP driven", 20, mode="tc") if published else {}
        print(f"two hooks, XDP driven by {fg.pid}: "
              f"{(warned and warned[0].strip()) or (refused and refused[0].strip())}; "
              f"its process stopped: 20 new clients {dict(got)}", flush=True)
    finally:
        if d:
            d.stop()
        if fg and fg.poll() is None:
            fg.terminate()
            fg.wait(timeout=15)
        if os.path.exists(pin):
            os.unlink(pin)
        T.sh("umount", bpffs, check=False)
        os.rmdir(bpffs)
        T.sh("ip", "link", "set", "dev", "eth0", "xdpgeneric", "off", ns=topo.lb, check=False)
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", "--mode", "tc", ns=topo.lb,
             check=False)
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)


def tc_prog(topo):
    """The id of the hlb_tc program on the LB's eth0, or None (tc prints the name before the
    id, or after it for a program added from a pin)."""
    out = T.sh("tc", "filter", "show", "dev", "eth0", "ingress", ns=topo.lb, check=False).stdout
    m = re.search(r"hlb_tc.* id (\d+)|id (\d+) name hlb_tc", out)
    return m and int(m.group(1) or m.group(2))


def upgrade_two_hooks(topo, servers):
    """An upgrade in place (SIGUSR2) of a daemon whose program is at tc, while another hashlb
    program is at the XDP hook (attached by hand here; it steers nothing, its VIP table empty):
    the new process takes over the program the old one drove, the tc one, with its conntrack
    table, so the old process leaves it attached; the XDP one stays as it was, and the warning
    names it. 24 connections held across the upgrade stay on their backends when b1 is then
    drained. Before, the new process took the XDP one over (it sees every packet first), the old
    one detached its tc program at the handover as taken over by nobody, and the established
    flows went to the LB's stack, which reset them."""
    BPF_OBJ = os.path.join(os.environ.get("HASHLB_BUILD_ROOT", "build"), "bpf", "steer.bpf.o")
    d = Daemon(topo, service(topo)).start()
    new_pid, client = None, None
    try:
        check(d.wait_log("kernel steering table published", 15) is not None,
              "upgrade two hooks: no table published at start")
        tc_id = tc_prog(topo)
        T.sh("ip", "link", "set", "dev", "eth0", "xdpgeneric", "obj", BPF_OBJ, "sec", "xdp",
             ns=topo.lb)
        client, held = hold(topo)
        on_b1 = sum(1 for n in held.values() if n == "b1")
        check(on_b1 > 0, f"upgrade two hooks: no connection on b1, the test proves nothing: "
              f"{held}")
        n = len(d.lines)
        new_pid = upgrade(d, "upgrade two hooks")
        if new_pid is None:
            return
        d.proc.wait(timeout=30)
        # the new process publishes once the old one publishes no more: after the old one's
        # health (sent as it stops), never while both could (two publications at once mix)
        d.pos = n
        d.wait_log("kernel steering table published", 10)
        after = [x for x in d.lines[n:] if "kernel steering table published" in x or
                 "health from the old hashlb" in x]
        check(len(after) >= 2 and "health from the old hashlb" in after[0] and
              "kernel steering table published" in after[1],
              f"upgrade two hooks: the new process published before the old one stopped: "
              f"{[x.split('msg=')[1].strip() for x in after]}")
        taken = [x for x in d.lines if "kernel steering taken over" in x]
        warned = [x for x in d.lines if "two hashlb programs" in x]
        check(taken and "mode=tc" in taken[-1] and "from=upgrade" in taken[-1],
              f"upgrade two hooks: the new process took over {taken[-1:]}")
        check(warned and "xdp-generic (program" in warned[-1] and
              "--mode xdp-generic --detach" in warned[-1],
              f"upgrade two hooks: the other program not named: {warned}")
        tc_now = tc_prog(topo)
        check(tc_now is not None and tc_now == tc_id and
              "xdpgeneric" in T.sh("ip", "link", "show", "eth0", ns=topo.lb).stdout,
              f"upgrade two hooks: after the old process exited, tc program {tc_now} "
              f"(before: {tc_id}), XDP: "
              f"{'xdpgeneric' in T.sh('ip', 'link', 'show', 'eth0', ns=topo.lb).stdout}")
        got, lost = drain_followed(topo, d, client, held, "upgrade two hooks")
        print(f"upgrade two hooks: taken over {taken and taken[-1].split('msg=')[1].strip()}; "
              f"{lost} of {len(held)} connections lost; b1 drained: new clients {dict(got)}",
              flush=True)
    finally:
        if client and client.poll() is None:
            client.kill()
            client.wait(timeout=10)
        if new_pid:
            topo.wait_closed()
        stop_pid(new_pid, d)
        d.stop()
        T.sh("ip", "link", "set", "dev", "eth0", "xdpgeneric", "off", ns=topo.lb, check=False)
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)


def two_services_yaml(topo, api_listen=None, api_extra=""):
    """web on the IPv4 VIP over b1 and b2, and api (on <api_listen>, the IPv6 VIP unless
    given; <api_extra> its keys more) over b3, both steered in the kernel on eth0."""
    def svc(name, listen, backends, extra=""):
        return (f"  - name: {name}\n    listen: '{listen}'\n    hash_key: 4-tuple\n"
                f"    steering: kernel\n    interface: eth0\n{extra}"
                f"    health: {{interval: 200ms, timeout: 200ms, rise: 1, fall: 2}}\n"
                f"    backends:\n" +
                "".join(f"      - {{name: b{i + 1}, address: '{topo.backend_ip(i)}:{T.VIP_PORT}'}}\n"
                        for i in backends))
    return (svc("web", f"{T.VIP}:{T.VIP_PORT}", (0, 1)),
            svc("api", api_listen or f"[{T.VIP6}]:{T.VIP_PORT}", (2,), api_extra))


def two_services_start(topo, yaml, tag):
    """The LB holding the IPv6 VIP too, a daemon of <yaml> (web and api) started, and both
    services' tables published."""
    T.sh("ip", "-6", "addr", "add", f"{T.VIP6}/128", "dev", "lo", "nodad", ns=topo.lb,
         check=False)
    d = Daemon(topo, yaml).start()
    missing = d.wait_each(["service=web generation=", "service=api generation="], 20)
    check(not missing, f"{tag}: no table published for {missing}")
    return d


def two_services_end(topo, d, new_pid=None):
    """Stop <d> (and the process its upgrade started, <new_pid>), detach what is left, and
    take the IPv6 VIP off the LB."""
    d.stop()
    stop_pid(new_pid, d)
    T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
    T.sh("ip", "-6", "addr", "del", f"{T.VIP6}/128", "dev", "lo", ns=topo.lb, check=False)


def kernel_steered(topo, tag, vip, n=20):
    """<n> new clients of <vip> and the new flows the kernel path counted for them: their
    backends."""
    before = steer_stats(topo).get("new_flows", 0)
    got = connect_count(topo, n, vip)
    flows = steer_stats(topo).get("new_flows", 0) - before
    check(flows >= n, f"{tag}: {n} new clients of {vip}, {flows} new flows in the kernel path: "
          f"{dict(got)}")
    return got


def each_steered(topo, tag):
    """20 new clients of web and 20 of api through the kernel path, each service's on its own
    backends (web's on b1 and b2, api's on b3): their backends."""
    got4 = kernel_steered(topo, tag, T.VIP)
    got6 = kernel_steered(topo, tag, T.VIP6)
    check(sum(got4.values()) == 20 and set(got4) <= {"b1", "b2"},
          f"{tag}: web's clients not all on b1, b2: {dict(got4)}")
    check(got6 == {"b3": 20}, f"{tag}: api's clients not all on b3: {dict(got6)}")
    return got4, got6


def two_services(topo, servers):
    """Two services steered in the kernel on one interface, a table each in its program: web
    (the IPv4 VIP) over b1 and b2, api (the IPv6 VIP) over b3; each one's new clients reach its
    own backends through the kernel path. A reload that removes api takes its VIP out of the
    program and leaves web's: web's 24 held connections answer from their backends, its new
    clients are steered, and api's clients reach none of its backends; a reload that adds api
    back steers it again. A VIP given to two services is an error naming file:line:column. An
    upgrade in place takes both tables over, both services' connections kept, and its stop
    detaches the program. Before, the config refused a second service with steering: kernel on
    one interface."""
    # api's ring (vnodes 70,000: 70,000 points) outgrows what web's table alone would size
    # each table for (65,536 points, twice web's 320), not what both configs size them for
    web, api = two_services_yaml(topo, api_extra="    scheme: ring\n    vnodes: 70000\n")
    new_pid = None
    d = two_services_start(topo, web + api, "two_services")
    try:
        shared = [l for l in d.lines if "kernel steering attached" in l and " table=" in l]
        check(len(shared) == 1, f"two_services: the second service not in the first's "
              f"program: {[l for l in d.lines if 'steering' in l]}")
        got4, got6 = each_steered(topo, "two_services")
        print(f"two_services: web's 20 clients {dict(got4)}, api's {dict(got6)}", flush=True)

        client, held = hold(topo)
        start = d.pos
        d.reload_edit(api, "", "msg=reloaded", "two_services: reload without api")
        left = d.wait_log("its VIP left the program", 5)
        check(left is not None and "service=api" in left,
              f"two_services: api's VIP did not leave the program: {left}")
        # the program stays for web: not said to be detached (before, it was, then the VIP line)
        said = [l for l in d.lines[start:d.pos] if "kernel steering detached" in l]
        check(not said, f"two_services: api's removal said the program was detached: {said}")
        lost = still_held(client, held, "two_services: web's connections across api's removal")
        got4 = kernel_steered(topo, "two_services: after api's removal", T.VIP)
        check(sum(got4.values()) == 20 and set(got4) <= {"b1", "b2"},
              f"two_services: web's clients after api's removal: {dict(got4)}")
        got6 = connect_count(topo, 5, T.VIP6)
        check("b3" not in got6, f"two_services: api's clients steered once removed: {dict(got6)}")
        print(f"two_services: api removed: web's {len(held)} held connections, {lost} lost; "
              f"20 new {dict(got4)}; api's clients {dict(got6)}", flush=True)

        d.reload_edit("services:\n", "services:\n" + api, "service=api generation=",
                      "two_services: reload adding api back")
        got6 = kernel_steered(topo, "two_services: api back", T.VIP6)
        check(got6 == {"b3": 20}, f"two_services: api's clients once back: {dict(got6)}")

        # web removed, the service that attached the program: it stays, for api, whose held
        # connections and new clients go on; web back, it shares it again.
        client6 = topo.spawn(topo.client, [sys.executable, PEER, "client", T.VIP6,
                                           str(T.VIP_PORT), "12"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        held6 = dict(json.loads(client6.stdout.readline()))
        d.reload_edit(web, "", "msg=reloaded", "two_services: reload without web")
        lost = still_held(client6, held6, "two_services: api's connections across web's removal")
        got6 = kernel_steered(topo, "two_services: after web's removal", T.VIP6)
        check(got6 == {"b3": 20}, f"two_services: api's clients after web's removal: {dict(got6)}")
        d.reload_edit("services:\n", "services:\n" + web, "service=web generation=",
                      "two_services: reload adding web back")
        got4 = kernel_steered(topo, "two_services: web back", T.VIP)
        check(sum(got4.values()) == 20 and set(got4) <= {"b1", "b2"},
              f"two_services: web's clients once back: {dict(got4)}")
        print(f"two_services: web removed: api's {len(held6)} held connections, {lost} lost, "
              f"20 new {dict(got6)}; web back: {dict(got4)}", flush=True)

        # One VIP twice (written IPv4-mapped the second time): where the second one is.
        web, dup = two_services_yaml(topo, f"[::ffff:{T.VIP}]:{T.VIP_PORT}")
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("services:\n" + web + dup)
        p = T.sh(HASHLB, "check", "-c", f.name, check=False)
        os.unlink(f.name)
        line = 2 + web.count("\n") + 1
        check(p.returncode == 1 and f"{f.name}:{line}:13: error: listen address" in p.stderr,
              f"two_services: one VIP twice: {p.returncode} {p.stderr}")
        print(f"two_services: api back: {dict(got6)}; one VIP twice: {p.stderr.strip()}",
              flush=True)

        # web and api swap their listen addresses in one reload: each VIP moves to the other's
        # table, and back. Before, each was refused the VIP the other's table still had, for
        # good (retried every second), both VIPs steered by the other service's table.
        v4, v6 = f"listen: '{T.VIP}:{T.VIP_PORT}'", f"listen: '[{T.VIP6}]:{T.VIP_PORT}'"
        for back in (False, True):
            d.edit(v4, "listen: 'SWAP'")
            d.edit(v6, v4)
            d.edit("listen: 'SWAP'", v6)
            d.skip_log()
            p = d.ctl("reload")
            missing = d.wait_each(["service=web generation=", "service=api generation="], 10)
            check(p.returncode == 0 and not missing,
                  f"two_services: listen swapped: no table published for {missing}: "
                  f"{[l for l in d.lines[-8:] if 'steering' in l]}")
            if back:
                break
            got4 = kernel_steered(topo, "two_services: listen swapped", T.VIP)
            got6 = kernel_steered(topo, "two_services: listen swapped", T.VIP6)
            check(got4 == {"b3": 20} and set(got6) <= {"b1", "b2"} and sum(got6.values()) == 20,
                  f"two_services: listen swapped: clients not on the backends of the service "
                  f"now on their VIP: {dict(got4)} {dict(got6)}")
            print(f"two_services: listen swapped: {T.VIP} now api's {dict(got4)}, {T.VIP6} "
                  f"web's {dict(got6)}", flush=True)

        # An upgrade in place takes the program over with both tables, each service its own
        # (the one its VIP has): both services' held connections stay, new clients of each
        # reach its own backends; the new process's stop detaches the program.
        client, held = hold(topo)
        client6 = topo.spawn(topo.client, [sys.executable, PEER, "client", T.VIP6,
                                           str(T.VIP_PORT), "12"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        held6 = dict(json.loads(client6.stdout.readline()))
        start = len(d.lines)
        new_pid = upgrade(d, "two_services")
        missing = d.wait_each(["service=web generation=", "service=api generation="], 15)
        check(not missing, f"two_services: after the upgrade, no table published for {missing}")
        took = [l for l in d.lines[start:] if "kernel steering taken over" in l or
                ("kernel steering attached" in l and " with=" in l)]
        check(len(took) == 2, f"two_services: the new process did not take both tables over: "
              f"{[l for l in d.lines[start:] if 'steering' in l]}")
        lost = still_held(client, held, "two_services: web's connections across the upgrade")
        lost += still_held(client6, held6, "two_services: api's connections across the upgrade")
        got4 = kernel_steered(topo, "two_services: after the upgrade", T.VIP)
        got6 = kernel_steered(topo, "two_services: after the upgrade", T.VIP6)
        check(set(got4) <= {"b1", "b2"} and got6 == {"b3": 20},
              f"two_services: after the upgrade, clients not on their own service's backends: "
              f"{dict(got4)} {dict(got6)}")
        topo.wait_closed()
        stop_pid(new_pid, d)
        new_pid = None
        check(not T.sh("ip", "link", "show", "eth0", ns=topo.lb).stdout.count("xdp") and
              "hlb_tc" not in T.sh("tc", "filter", "show", "dev", "eth0", "ingress",
                                   ns=topo.lb, check=False).stdout,
              "two_services: the program stayed attached after the stop")
        print(f"two_services: upgrade: {len(held) + len(held6)} held connections, {lost} lost; "
              f"new clients {dict(got4)} {dict(got6)}; detached at the stop", flush=True)
    finally:
        two_services_end(topo, d, new_pid)


def grown(topo, servers):
    """A reload that adds a second kernel-steered service (api, the IPv6 VIP over b3) on the
    interface web was alone on: web's program of one table (a killed daemon's, taken over) is
    replaced in place by one of a table each (4: two more for later reloads), its VIPs,
    conntrack table (and seed) and counters kept and its table copied. web's 24 connections
    held across it answer from their backends, b1's too, drained before (out of web's table:
    only their conntrack entries send them there); no packet found no entry (ct_lost), was
    rescheduled or dropped; api's 20 new clients go through the kernel path to b3, web's to b2.
    A reload removing api then leaves web steering as before. Before, api was not started ('a
    restart of hashlb ... loads one with a table for every service on the interface') until
    hashlb was restarted."""
    d, web, api, _ = web_alone(topo, "grown")
    try:
        # the program a killed daemon left, taken over: its conntrack seed read from it
        d.proc.kill()
        d.proc.wait(timeout=10)
        d.stop(steering=False)
        d = Daemon(topo, web).start()
        check(d.wait_log("kernel steering taken over", 10) is not None and
              d.wait_log("service=web generation=", 10) is not None,
              "grown: the orphan not taken over")
        client, held = hold(topo)
        check("b1" in held.values(), f"grown: no held connection on b1: the test proves little: "
              f"{held}")
        p = d.ctl("set", "b1", "drain")
        check(p.returncode == 0 and d.wait_log("kernel steering table published", 10),
              f"grown: ctl set b1 drain: {p.stdout} {p.stderr}")
        before = steer_stats(topo)
        m0 = scrape(d)
        start = len(d.lines)
        d.reload_edit(web, web + api, "service=api generation=", "grown: reload adding api")
        steering = [l for l in d.lines[start:] if "steering" in l]
        replaced = [l for l in steering if "kernel steering program replaced" in l]
        check(len(replaced) == 1 and "service=web " in replaced[0] and " tables=4 " in
              replaced[0] and " for=api " in replaced[0],
              f"grown: web's program not replaced for api: {steering}")
        check(not any("not started" in l for l in steering), f"grown: api refused: {steering}")
        lost = still_held(client, held, "grown: web's connections across the replacement")
        after = steer_stats(topo)
        for k in ("ct_lost", "ct_resched", "drop_table", "drop_no_backend", "drop_malformed"):
            check(after.get(k, 0) == before.get(k, 0),
                  f"grown: {k} {before.get(k, 0)} before the replacement, {after.get(k, 0)} after")
        check(after.get("ct_hits", 0) >= before.get("ct_hits", 0) + len(held),
              f"grown: the held connections' packets were not conntrack hits: {before} {after}")
        got6 = kernel_steered(topo, "grown: api", T.VIP6)
        check(got6 == {"b3": 20}, f"grown: api's clients not all on b3: {dict(got6)}")
        got4 = kernel_steered(topo, "grown: web", T.VIP)
        check(got4 == {"b2": 20}, f"grown: web's clients not all on b2 (b1 drains): {dict(got4)}")
        # web's own packets go on from the program of one table's (all its), and the two
        # services' own add up to the interface's (no packet to the VIPs during the swap)
        m1 = scrape(d)
        own = {svc: m1.get(f'hashlb_service_steer_packets_total{{service="{svc}"}}')
               for svc in ("web", "api")}
        iface = m1.get('hashlb_service_steer_interface_packets_total{service="web"}')
        web0 = m0.get('hashlb_service_steer_packets_total{service="web"}', 0)
        check(None not in own.values() and own["web"] >= web0 + len(held) and
              own["api"] >= 40 and own["web"] + own["api"] == iface,
              f"grown: own packets {own} (web's {web0} before), the interface's {iface}")
        # the MAC check every 2 s since asks the hook for the new program's id
        lostl = [l for l in d.lines[start:] if "kernel steering lost" in l]
        check(not lostl, f"grown: the new program taken for lost: {lostl}")
        print(f"grown: {replaced[0].split('msg=')[1].strip() if replaced else None}; "
              f"{len(held)} held connections ({list(held.values()).count('b1')} on b1, "
              f"draining), {lost} lost; api's 20 new {dict(got6)}, web's {dict(got4)}; own "
              f"packets {own} of the interface's {iface}", flush=True)

        d.reload_edit(api, "", "its VIP left the program", "grown: reload removing api")
        got4 = kernel_steered(topo, "grown: web without api", T.VIP)
        check(got4 == {"b2": 20}, f"grown: web's clients once api is gone: {dict(got4)}")
        got6 = connect_count(topo, 5, T.VIP6)
        check("b3" not in got6, f"grown: api's clients steered once removed: {dict(got6)}")
        print(f"grown: api removed: web's 20 new {dict(got4)}, api's {dict(got6)}", flush=True)
    finally:
        two_services_end(topo, d)


def web_alone(topo, tag):
    """web alone on eth0 (a program of one table), the LB holding the IPv6 VIP of api, which a
    reload or an upgrade then adds: (daemon, web's yaml, api's yaml, whether web's table was
    published)."""
    web, api = two_services_yaml(topo)
    T.sh("ip", "-6", "addr", "add", f"{T.VIP6}/128", "dev", "lo", "nodad", ns=topo.lb,
         check=False)
    d = Daemon(topo, web).start()
    ok = check(d.wait_log("service=web generation=", 20) is not None,
               f"{tag}: no table of web published")
    return d, web, api, ok


def grown_locked(topo, servers):
    """A reload adding a second kernel-steered service (api) on the interface web is alone on,
    while another publication holds the program's lock (here the test: an flock on its lock
    file, past the daemon's 2 s): web's program is not replaced meanwhile, and api is not
    refused for good: the replacement is tried again every second, as a refused table is, and
    once the lock is let go the program is replaced and api's 20 new clients go through the
    kernel path to b3. Before, api was 'not started', the error telling to restart hashlb,
    and stayed in userspace until the next reload."""
    import fcntl
    d, web, api, ok = web_alone(topo, "grown_locked")
    fd = None
    try:
        if not ok:
            return
        path = lock_file(topo)
        if not check(path and os.path.exists(path), f"grown_locked: no lock file ({path})"):
            return
        fd = os.open(path, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        d.edit(web, web + api)
        d.skip_log()
        start = len(d.lines)
        p = d.ctl("reload")
        check(p.returncode == 0, f"grown_locked: reload: {p.stdout} {p.stderr}")
        # the lock found held for 2 s: said, naming this process, and tried again
        line = d.wait_log("kernel steering program not replaced", 15)
        check(line is not None and f"process {os.getpid()}" in line and
              "tried again" in line,
              f"grown_locked: the replacement not tried again while the lock was held: {line}")
        # two retries (every second) since it was said, the lock still held
        tries = lock_tries(path)
        try:
            check(tries.tries(2), f"grown_locked: the lock tried {tries.n} times since, not 2")
        finally:
            tries.close()
        refused = [l for l in d.lines[start:] if "not started" in l and "service=api" in l]
        check(not refused, f"grown_locked: api refused for good while the lock was held: "
              f"{refused}")
        said = [l for l in d.lines[start:] if "kernel steering program not replaced" in l]
        check(len(said) == 1, f"grown_locked: said {len(said)} times while held: {said}")
        os.close(fd)
        fd = None
        replaced = d.wait_log("kernel steering program replaced", 15)
        check(replaced is not None and "service=web " in replaced and " for=api " in replaced,
              f"grown_locked: web's program not replaced once the lock was let go: {replaced}")
        check(d.wait_log("service=api generation=", 10) is not None,
              "grown_locked: no table of api published")
        got6 = kernel_steered(topo, "grown_locked: api", T.VIP6)
        check(got6 == {"b3": 20}, f"grown_locked: api's clients not all on b3: {dict(got6)}")
        print(f"grown_locked: while locked: {line and line.split('msg=')[1][:40]}...; "
              f"then {replaced and replaced.split('msg=')[1][:40]}; api's 20 new {dict(got6)}",
              flush=True)
    finally:
        if fd is not None:
            os.close(fd)
        two_services_end(topo, d)


def upgrade_grown(topo, servers):
    """An upgrade in place (SIGUSR2) whose config adds api on the interface web was alone on:
    the new process takes web's program of one table over, held while the replaced hashlb
    still publishes into it; once that one has stopped, the program is replaced by one of a
    table each and api's 20 new clients go through the kernel path to b3, web's 24 connections
    held across it answering from their backends. Before, api was refused for good ('not
    started', the error telling to restart hashlb) and stayed in userspace until a reload."""
    d, web, api, ok = web_alone(topo, "upgrade_grown")
    new_pid = None
    try:
        if not ok:
            return
        client, held = hold(topo)
        d.edit(web, web + api)
        d.skip_log()
        start = len(d.lines)
        new_pid = upgrade(d, "upgrade_grown")
        replaced = d.wait_log("kernel steering program replaced", 20)
        check(replaced is not None and "service=web " in replaced and " for=api " in replaced,
              f"upgrade_grown: web's program not replaced once the old process stopped: "
              f"{[l for l in d.lines[start:] if 'steering' in l]}")
        check(d.wait_log("service=api generation=", 10) is not None,
              "upgrade_grown: no table of api published")
        refused = [l for l in d.lines[start:] if "not started" in l and "service=api" in l]
        check(not refused, f"upgrade_grown: api refused: {refused}")
        waits = [l for l in d.lines[start:] if "kernel steering waits" in l]
        check(len(waits) == 1 and "service=api " in waits[0],
              f"upgrade_grown: api's wait for the replaced hashlb not said once: {waits}")
        lost = still_held(client, held, "upgrade_grown: web's connections across it")
        got6 = kernel_steered(topo, "upgrade_grown: api", T.VIP6)
        check(got6 == {"b3": 20}, f"upgrade_grown: api's clients not all on b3: {dict(got6)}")
        print(f"upgrade_grown: {replaced and replaced.split('msg=')[1][:40]}...; {len(held)} held, "
              f"{lost} lost; api's 20 new {dict(got6)}", flush=True)
        topo.wait_closed()
    finally:
        two_services_end(topo, d, new_pid)


def upgrade_dropped(topo, servers):
    """An upgrade in place whose config no longer has api, of two services on eth0: the new
    process takes web's table over, and api's VIP leaves the program once web's table is
    published (logged): api's clients are no longer steered by its last table (to b3), web's
    are. Before, api's VIP stayed in the program, steered by a table no process updated."""
    web, api = two_services_yaml(topo)
    new_pid = None
    d = two_services_start(topo, web + api, "upgrade_dropped")
    try:
        d.edit(api, "")
        new_pid = upgrade(d, "upgrade_dropped")
        left = d.wait_log("a table no service has left", 15)
        check(left is not None and "service=web" in left,
              f"upgrade_dropped: api's table kept its VIP: "
              f"{[l for l in d.lines if 'steering' in l][-4:]}")
        got4 = kernel_steered(topo, "upgrade_dropped", T.VIP)
        got6 = connect_count(topo, 5, T.VIP6)
        check(set(got4) <= {"b1", "b2"} and "b3" not in got6,
              f"upgrade_dropped: web's clients {dict(got4)}, api's {dict(got6)}")
        print(f"upgrade_dropped: {left and left.split('msg=')[1].strip()}; web's clients "
              f"{dict(got4)}, api's {dict(got6)}", flush=True)
    finally:
        two_services_end(topo, d, new_pid)


def stop_shared(topo, servers):
    """A stop of web and api, sharing eth0's program, web draining 0 s and api 60 s with 12
    connections held through the kernel path: web's program is let go at once (kept for api)
    and web's VIP leaves it, so 3 new clients of web are refused by the LB's stack with no new
    flow in the kernel path, while api's held connections answer from b3 and its drain ends
    with them. Before, web's VIP stayed open in the program for the whole of api's drain, its
    new clients steered by its last table to b1 and b2 while hashlb was stopping.
    The entries api's drain waits for are its own: web's 4 open ones (hand-made ACKs), whose
    VIP left the program, do not keep it to its deadline (before, the drain counted every entry
    of the program, and an entry no FIN closed kept it to the end), nor does a SYN of api's no
    backend answered (hand-made, from an address nobody has): its entry half-open, ended as a
    closed flow's is (idle_flows=0; before half-open entries, an open one, ended only once
    unused for api's timeouts.idle, idle_flows=1)."""
    import test_frames as F
    web, api = two_services_yaml(topo)
    web = web.replace("    backends:\n", "    timeouts: {drain: 0s}\n    backends:\n", 1)
    api = api.replace("    backends:\n", "    timeouts: {drain: 60s, idle: 10s}\n    backends:\n",
                      1)
    plain_switch(topo)
    d = two_services_start(topo, web + api, "stop_shared")
    f = None
    try:
        client6 = topo.spawn(topo.client, [sys.executable, PEER, "client", T.VIP6,
                                           str(T.VIP_PORT), "12"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        held6 = dict(json.loads(client6.stdout.readline()))
        f = F.Frames(topo)
        before = steer_stats(topo)
        for sp in range(45000, 45004):
            f.send(0x0800, F.ipv4("10.213.0.9", T.VIP, F.tcp(sp, b"STOP-SHARED")))
        f.send(0x86DD, F.ipv6("fd13::9", T.VIP6, 6, F.tcp_flags(45100, 0x02)))
        made = f.forwarded([b"STOP-SHARED"])
        after = steer_stats(topo)
        check(made and after.get("new_flows", 0) - before.get("new_flows", 0) == 5,
              f"stop_shared: 5 hand-made flows, {after.get('new_flows', 0) - before.get('new_flows', 0)} "
              f"new flows, forwarded to {made}")
        d.skip_log()
        d.proc.terminate()
        line = d.wait_log(T.DRAINING, 10)
        check(line is not None and "service=api" in line,
              f"stop_shared: api's flows not drained: {d.lines[d.pos - 5:]}")
        before = steer_stats(topo)
        got = connect_count(topo, 3, T.VIP)
        after = steer_stats(topo)
        check(got == {"ConnectionRefusedError": 3} and before and
              after.get("new_flows") == before.get("new_flows"),
              f"stop_shared: 3 new clients of web while api drains: {dict(got)}, new flows "
              f"{before.get('new_flows')} then {after.get('new_flows')}")
        lost = still_held(client6, held6, "stop_shared: api's connections while it drains")
        drained = d.wait_log('msg="kernel steering drained" service=api', 30)
        check(drained is not None and "idle_flows=0 " in drained,
              f"stop_shared: api's drain did not end before its deadline with its one SYN "
              f"unanswered, half-open, not open: {drained or d.lines[d.pos - 5:]}")
        # its last entry an unanswered connect's, no FIN's or RST's: the reason says so
        check(drained is not None and "never opened (a connect no backend answered" in drained,
              f"stop_shared: api's drained line does not name the unanswered connect among "
              f"the flows that ended: {drained}")
        detached = d.wait_log('msg="kernel steering detached" service=api', 5)
        check(detached is not None, f"stop_shared: api's drain did not end: "
              f"{d.lines[d.pos - 5:]}")
        print(f"stop_shared: web's new clients {dict(got)}; api's {len(held6)} held "
              f"connections, {lost} lost; drained with web's 4 open entries and api's "
              f"unanswered SYN: {drained and drained.split('msg=')[1].strip()}", flush=True)
    finally:
        if f:
            f.close()
        two_services_end(topo, d)


def bpf_looks(path, start, end):
    """The bpf() calls a process made (the bpf_log shim's file <path>) in bursts after <start>
    and before <end> (log_time()s): {command: calls} of each burst, a burst ending at a pause of
    0.5 s (a drain's looks are 3 s apart)."""
    bursts, last = [], None
    with open(path) as f:
        for line in f:
            cmd, t = line.split()
            t = float(t)
            if not start < t < end:
                continue
            if last is None or t - last > 0.5:
                bursts.append(collections.Counter())
            bursts[-1][int(cmd)] += 1
            last = t
    return bursts


def stop_shared_both(topo, servers):
    """A stop of web and api, sharing eth0's program, both draining 60 s with 12 connections each
    held through the kernel path: web's client closes its connections and web's drain ends with
    them (`idle_flows=0`) while api's are open, api's own entries not keeping it; api's drain goes
    on (web's ended entries not ending it), its connections answer from b3 after web's drain,
    and it ends once its client closes them. Each look of the drain scans the program once for
    both services: the bpf() calls of a look while both drain (those of the VIP map's read that
    tells each table's entries) are those of a look while api drains alone (the bpf_log shim).
    Before, each draining service scanned the whole table on its own, every look: twice the
    calls, and at steering_flows 16M about 85 ms a service a look on the control thread."""
    web, api = two_services_yaml(topo)
    web = web.replace("    backends:\n", "    timeouts: {drain: 60s}\n    backends:\n", 1)
    api = api.replace("    backends:\n", "    timeouts: {drain: 60s}\n    backends:\n", 1)
    T.sh("ip", "-6", "addr", "add", f"{T.VIP6}/128", "dev", "lo", "nodad", ns=topo.lb,
         check=False)
    log = tempfile.NamedTemporaryFile(prefix="hlbst-bpf-", delete=False)
    log.close()
    d = Daemon(topo, web + api)
    d.prefix = list(shim_wrap("bpf_log", f"HLB_TEST_BPF_LOG={log.name}"))
    d.start()
    client4 = client6 = None
    try:
        missing = d.wait_each(["service=web generation=", "service=api generation="], 20)
        check(not missing, f"stop_shared_both: no table published for {missing}")
        client4, held4 = hold(topo, 12)
        client6 = topo.spawn(topo.client, [sys.executable, PEER, "client", T.VIP6,
                                           str(T.VIP_PORT), "12"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        held6 = dict(json.loads(client6.stdout.readline()))
        d.skip_log()
        d.proc.terminate()
        missing = d.wait_each(['steering draining" service=web', 'steering draining" service=api'],
                              10)
        check(not missing, f"stop_shared_both: not draining: {missing}: {d.lines[d.pos - 5:]}")
        draining = log_time(d.lines[d.pos - 1])
        lost4 = still_held(client4, held4, "stop_shared_both: web's connections while draining")
        client4 = None
        web_drained = d.wait_log('msg="kernel steering drained" service=web', 30)
        api_early = [ln for ln in d.lines if 'steering drained" service=api' in ln]
        check(web_drained is not None and "idle_flows=0 " in web_drained and not api_early,
              f"stop_shared_both: web's drain did not end with its flows while api's are open: "
              f"{web_drained}, api {api_early}")
        lost6 = still_held(client6, held6, "stop_shared_both: api's connections after web's "
                           "drain")
        client6 = None
        api_drained = d.wait_log('msg="kernel steering drained" service=api', 30)
        check(api_drained is not None and "idle_flows=0 " in api_drained,
              f"stop_shared_both: api's drain did not end with its flows: "
              f"{api_drained or d.lines[d.pos - 5:]}")
        d.proc.wait(timeout=10)
        t_web, t_api = log_time(web_drained), log_time(api_drained)
        both = alone = []
        if None not in (draining, t_web, t_api):
            both = bpf_looks(log.name, draining + 0.5, t_web - 0.5)
            alone = bpf_looks(log.name, t_web + 0.5, t_api - 0.5)
        check(both and alone and all(b == alone[0] for b in both + alone),
              f"stop_shared_both: a look's bpf() calls ({{command: calls}}) while both drain "
              f"{both}, while api drains alone {alone}")
        print(f"stop_shared_both: {len(held4)} and {len(held6)} held, {lost4} and {lost6} lost; "
              f"web {web_drained.split('msg=')[1].strip() if web_drained else None}; api "
              f"{api_drained.split('msg=')[1].strip() if api_drained else None}; a look's bpf() "
              f"calls: both {[dict(b) for b in both]}, api alone {[dict(b) for b in alone]}",
              flush=True)
    finally:
        for c in (client4, client6):
            if c:
                cut_held(topo, c)
        two_services_end(topo, d)
        os.unlink(log.name)


def shared_flows(topo, servers):
    """web and api sharing eth0's program (a table each): 10 hand-made frames to web's VIP alone
    count 10 packets and their bytes in web's packets_total and bytes_total, none in api's, the
    interface's 10 in both (interface_packets_total, interface_bytes_total), and 4 to api's alone
    count for api alone (before, each service showed the program's packets), in ctl status
    too (JSON service_packets, service_bytes); so do the other counters (new_flows_total,
    conntrack_lost_total: each frame an ACK with no entry), beside the interface's
    (interface_new_flows_total ...), in --stats (table_new_flows, table_ct_lost) and ctl status
    (service_new_flows, service_ct_lost). Those 10 flows to web's VIP and 4
    to api's count 10 conntrack entries for web and 4 for api in /metrics
    (hashlb_service_steer_conntrack_entries) and in ctl status (JSON "flows", and the text
    line), each beside the interface's 14 (interface_conntrack_entries, "interface_flows":
    hashlb steer --stats' flows), and hashlb steer -i eth0 --stats (text and --json) shows each
    table's entries, web's 10 and api's 4; once a reload removes api, whose entries leave with
    its VIP, web still counts its 10, the interface 10, and --stats api's table 0; api added again
    (on the table it left) counts its packets and bytes from 0 (before, from the removed api's).
    hashlb steer -i eth0 --stats without the config names each table's service (the names the
    daemon gave the tables in the program), api's none once it is removed. Its text has every
    figure in one column (before, three table_ rows' names pushed theirs further).
    Before, each
    service showed the program's 14, and summing them counted each entry once per service; and
    --stats showed the program's 14 alone."""
    import test_frames as F
    web, api = two_services_yaml(topo)
    plain_switch(topo)
    d = two_services_start(topo, web + api, "shared_flows")
    f = None
    try:
        f = F.Frames(topo)
        m = scrape(d)

        def own(svc, what="conntrack_entries"):
            return m.get(f'hashlb_service_steer_{what}{{service="{svc}"}}')

        def counts():
            return {svc: tuple(own(svc, w + "_total") for w in
                               ("packets", "bytes", "interface_packets", "interface_bytes"))
                    for svc in ("web", "api")}

        def others():
            # the counters besides packets and bytes, the service's own and the interface's
            return {svc: tuple(own(svc, w + "_total") for w in
                               ("new_flows", "conntrack_lost", "interface_new_flows",
                                "interface_conntrack_lost"))
                    for svc in ("web", "api")}

        def gained(before, after):
            return {svc: tuple(a - b for a, b in zip(after[svc], before[svc]))
                    for svc in before}
        # each service's packets and bytes are its own, the interface's every one's: frames to
        # web alone count for web, none for api, both seeing the interface's (before, each
        # service showed the program's counters, every service's packets)
        c0 = counts()
        o0 = others()
        wbytes = sum(f.send(0x0800, F.ipv4("10.213.0.9", T.VIP, F.tcp(sp, b"SHARED-WEB")))
                     for sp in range(46000, 46010))
        got_web = f.forwarded([b"SHARED-WEB"])
        m = scrape(d)
        c1 = counts()
        want = {"web": (10, wbytes, 10, wbytes), "api": (0, 0, 10, wbytes)}
        check(got_web and gained(c0, c1) == want,
              f"shared_flows: 10 frames to web alone ({wbytes} bytes): /metrics (packets, bytes, "
              f"interface_packets, interface_bytes) gained {gained(c0, c1)}, want {want}")
        abytes = sum(f.send(0x86DD, F.ipv6("fd13::9", T.VIP6, 6, F.tcp(sp, b"SHARED-API")))
                     for sp in range(46100, 46104))
        got = f.forwarded([b"SHARED-API"]) | got_web
        m = scrape(d)
        c2 = counts()
        want = {"web": (0, 0, 4, abytes), "api": (4, abytes, 4, abytes)}
        check(gained(c1, c2) == want,
              f"shared_flows: then 4 frames to api alone ({abytes} bytes): /metrics gained "
              f"{gained(c1, c2)}, want {want}")
        # the other counters are each service's own too, beside the interface's: each frame
        # an ACK with no entry, a new flow and lost (before, every service showed the
        # interface's 14 of each)
        o2 = others()
        want = {"web": (10, 10, 14, 14), "api": (4, 4, 14, 14)}
        check(gained(o0, o2) == want,
              f"shared_flows: 10 frames to web, 4 to api: /metrics (new_flows, conntrack_lost, "
              f"interface_new_flows, interface_conntrack_lost) gained {gained(o0, o2)}, "
              f"want {want}")
        print(f"shared_flows: 10 frames to web, then 4 to api: /metrics (packets, bytes, "
              f"interface's) {c0} -> {c1} -> {c2}", flush=True)
        # hashlb steer --stats -c: each table's packets and bytes, named by the daemon's config
        # (no -i: its services' interface), in text and JSON (before, no table's packets, and
        # the tables unnamed)
        p = T.sh(HASHLB, "steer", "-c", d.path, "--stats", "--json", ns=topo.lb, check=False)
        sj = json.loads(p.stdout) if p.returncode == 0 else {}
        p = T.sh(HASHLB, "steer", "-c", d.path, "--stats", ns=topo.lb, check=False)
        rows = dict(re.findall(r"^(table_\w+) +(.*)$", p.stdout, re.M))
        n_t = len(sj.get("table_packets") or [])
        want = {"table_packets": [c2["web"][0], c2["api"][0]] + [0] * (n_t - 2),
                "table_bytes": [c2["web"][1], c2["api"][1]] + [0] * (n_t - 2),
                "table_new_flows": [o2["web"][0], o2["api"][0]] + [0] * (n_t - 2),
                "table_ct_lost": [o2["web"][1], o2["api"][1]] + [0] * (n_t - 2),
                "table_services": ["web", "api"] + [None] * (n_t - 2)}
        # every other table counter of each table: 0 but those the frames counted (before,
        # a handle that shared the program zeroed its table's with garbage)
        rest = {k: v for k, v in sj.items() if k.startswith("table_") and k not in want and
                k not in ("table_flows", "table_packets", "table_bytes")}
        check(rest and all(v == [0] * n_t for v in rest.values()),
              f"shared_flows: hashlb steer -c --stats --json: the other table counters {rest}, "
              f"want each 0 (an ACK with no entry is a new flow and lost, no more)")
        got_j = {k: sj.get(k) for k in want}
        got_t = {k: rows.get(k, "").split() for k in want}
        want_t = {k: [str(v) if v is not None else "-" for v in w] for k, w in want.items()}
        check(n_t >= 2 and got_j == want and got_t == want_t and
              sj.get("packets") == c2["web"][2],
              f"shared_flows: hashlb steer -c --stats: --json {got_j} (packets "
              f"{sj.get('packets')}), text {got_t}, want {want}: {p.stdout} {p.stderr}")
        # the figures in one column, the names' as wide as the longest (before,
        # table_drop_no_backend and two more pushed theirs 3 to 5 columns past the others')
        cols = {len(m.group(0)) for m in re.finditer(r"^(?!interface )\w+ +", p.stdout, re.M)}
        check(len(cols) == 1,
              f"shared_flows: hashlb steer -c --stats: the figures start in columns {cols}, "
              f"want one: {p.stdout}")
        print(f"shared_flows: hashlb steer -c --stats: {rows}", flush=True)
        # ctl status: each service's own packets beside the program's (JSON service_packets,
        # service_bytes; the text line's "(N the service's)")
        p = d.ctl("--json", "status")
        own_js = {s["name"]: ((s.get("steering") or {}).get("service_packets"),
                              (s.get("steering") or {}).get("service_bytes"),
                              (s.get("steering") or {}).get("packets"))
                  for s in json.loads(p.stdout)["services"]} if p.returncode == 0 else {}
        new_js = {s["name"]: ((s.get("steering") or {}).get("service_new_flows"),
                              (s.get("steering") or {}).get("service_ct_lost"))
                  for s in json.loads(p.stdout)["services"]} if p.returncode == 0 else {}
        check(new_js == {svc: o2[svc][:2] for svc in ("web", "api")},
              f"shared_flows: ctl status JSON (service_new_flows, service_ct_lost) {new_js}, "
              f"want /metrics' {o2}")
        # one rule of which counters are a service's own (hashlb_steer_stats_field_tabled()):
        # ctl status JSON's service_ members are --stats' table_ rows, and /metrics' families
        # of the service's own (those beside an interface_ one) the same but the drops (by
        # reason in dropped_total); passed and drop_redirect (never counted) none of them
        web_js = next((s.get("steering") or {} for s in json.loads(p.stdout)["services"]
                       if s["name"] == "web"), {}) if p.returncode == 0 else {}
        svc_keys = {k[len("service_"):] for k in web_js if k.startswith("service_")}
        tbl_keys = {k[len("table_"):] for k in sj if k.startswith("table_")} - {"flows",
                                                                                "services"}
        field_of = {"packets": "packets", "bytes": "bytes", "new_flows": "new_flows",
                    "conntrack_hits": "ct_hits", "conntrack_rescheduled": "ct_resched",
                    "conntrack_evictions": "ct_evicted", "conntrack_lost": "ct_lost",
                    "untracked_resets": "rst_untracked", "closed_passed": "closed_passed",
                    "conntrack_closing": "ct_closing"}
        fams = {re.sub(r"^hashlb_service_steer_(.*)_total\{.*", r"\1", k) for k in m
                if k.endswith('{service="web"}') and k.startswith("hashlb_service_steer_")}
        met_keys = {field_of.get(f, f) for f in fams if "interface_" + f in fams}
        check(svc_keys and svc_keys == tbl_keys and
              met_keys == {k for k in svc_keys if not k.startswith("drop_")} and
              {"drop_no_backend", "drop_table"} <= svc_keys and
              not svc_keys & {"passed", "drop_malformed", "drop_fragment", "drop_redirect"},
              f"shared_flows: a service's own counters: ctl status JSON service_ {sorted(svc_keys)}, "
              f"--stats table_ {sorted(tbl_keys)}, /metrics {sorted(met_keys)}: want one set, "
              f"without passed, drop_malformed, drop_fragment, drop_redirect")
        text = d.ctl("status").stdout
        own_text = re.findall(r"kernel steering: (\d+) packets \((\d+) the service's\)", text)
        check(own_js == {"web": c2["web"][:2] + (c2["web"][2],),
                         "api": c2["api"][:2] + (c2["api"][2],)} and
              own_text == [(str(c2["web"][2]), str(c2["web"][0])),
                           (str(c2["api"][2]), str(c2["api"][0]))],
              f"shared_flows: ctl status: (service_packets, service_bytes, packets) {own_js}, "
              f"text {own_text}, want /metrics' {c2}")
        # and its own new flows and lost beside the program's, as service_new_flows and
        # service_ct_lost (before, the program's alone)
        own_new = [(int(a), int(b)) for a, b in re.findall(
            r"kernel steering: .* new flows \((\d+) the service's\).* lost \((\d+) the service's\)",
            text)]
        check(own_new == [tuple(o2[svc][:2]) for svc in ("web", "api")],
              f"shared_flows: ctl status: the service's (new flows, lost) {own_new}, want "
              f"/metrics' {o2}: {text}")
        figures = {svc: (own(svc), own(svc, "interface_conntrack_entries"))
                   for svc in ("web", "api")}
        st = steer_stats(topo)
        check(got and figures == {"web": (10, 14), "api": (4, 14)} and st.get("flows") == 14,
              f"shared_flows: 10 flows to web, 4 to api (to {sorted(got)}): /metrics' "
              f"(service's, interface's) entries {figures}, --stats flows {st.get('flows')}")
        p = d.ctl("--json", "status")
        steering = {s["name"]: s.get("steering") or {}
                    for s in json.loads(p.stdout)["services"]} if p.returncode == 0 else {}
        js = {n: (v.get("flows"), v.get("interface_flows"), v.get("flows_max"))
              for n, v in steering.items()}
        check(js == {"web": (10, 14, FLOWS_MAX), "api": (4, 14, FLOWS_MAX)},
              f"shared_flows: ctl --json status: (flows, interface_flows, flows_max) {js}")
        text = d.ctl("status").stdout
        lines = re.findall(r"conntrack (\d+) entries, (\d+)/(\d+) on the interface", text)
        check(lines == [("10", "14", str(FLOWS_MAX)), ("4", "14", str(FLOWS_MAX))],
              f"shared_flows: ctl status: conntrack figures {lines}: {text}")
        # hashlb steer --stats of the program of a table each (4: room for more services):
        # each table's entries beside the interface's, in the order of the tables (web's
        # first: its start attached it), the others none
        p = T.sh(HASHLB, "steer", "-i", "eth0", "--stats", ns=topo.lb, check=False)
        text = [[int(v) for v in m.split()]
                for m in re.findall(r"^table_flows +([\d ]+)$", p.stdout, re.M)]
        tf = st.get("table_flows") or []
        check(len(tf) >= 2 and tf == [10, 4] + [0] * (len(tf) - 2) and text == [tf],
              f"shared_flows: hashlb steer --stats' entries of each table: --json "
              f"{st.get('table_flows')}, text {text}: {p.stdout} {p.stderr}")
        # and, without the config, each table's service: the names the daemon gave the tables
        # in the program (before, --stats named none without -c)
        svc_t = re.findall(r"^table_services +(.*)$", p.stdout, re.M)
        want_svc = ["web", "api"] + [None] * (len(tf) - 2)
        check(st.get("table_services") == want_svc and
              svc_t == [" ".join(v or "-" for v in want_svc)],
              f"shared_flows: hashlb steer -i eth0 --stats (no -c): table_services --json "
              f"{st.get('table_services')}, text {svc_t}, want {want_svc}")
        print(f"shared_flows: 10 flows to web, 4 to api: /metrics {figures}, --stats flows "
              f"{st.get('flows')}, table_flows {tf} (text {text}), ctl status "
              f"{js}", flush=True)

        d.reload_edit(api, "", "its VIP left the program", "shared_flows: reload without api")
        m = scrape(d)
        after = (own("web"), own("web", "interface_conntrack_entries"), own("api"))
        st = steer_stats(topo)
        check(after == (10, 10, None) and (st.get("table_flows") or [])[:2] == [10, 0] and
              (st.get("table_services") or [])[:2] == ["web", None],
              f"shared_flows: api removed: web's (own, interface's) entries and api's {after}, "
              f"--stats' of each table {st.get('table_flows')}, its services (no -c: api's "
              f"table serves no VIP) {st.get('table_services')}")
        print(f"shared_flows: api removed: web's entries, the interface's, api's {after}",
              flush=True)
        # api added again takes the table it left (the first no service has): its packets and
        # bytes start from 0, then count its own (before, from the 4 the removed api had)
        d.reload_edit(web, web + api, "service=api generation=",
                      "shared_flows: reload adding api again")
        m = scrape(d)
        again = (own("api", "packets_total"), own("api", "bytes_total"))
        st = steer_stats(topo)
        tp = (st.get("table_packets") or [None, None])[1]
        abytes2 = sum(f.send(0x86DD, F.ipv6("fd13::9", T.VIP6, 6, F.tcp(sp, b"SHARED-API2")))
                      for sp in range(46200, 46203))
        got2 = f.forwarded([b"SHARED-API2"])
        m = scrape(d)
        then = (own("api", "packets_total"), own("api", "bytes_total"))
        check(again == (0, 0) and tp == 0 and got2 and then == (3, abytes2),
              f"shared_flows: api added again on the table it left: (packets, bytes) {again}, "
              f"--stats' table_packets {st.get('table_packets')}, want 0; after 3 frames "
              f"({abytes2} bytes, to {sorted(got2)}) {then}")
        print(f"shared_flows: api added again: {again}, then {then}", flush=True)
    finally:
        if f:
            f.close()
        two_services_end(topo, d)


def shared_flows_moving(topo, servers):
    """web and api sharing eth0's program, new flows arriving to both VIPs all the while (at
    most 100,000 hand-made frames of a flow each, from a thread, past the table's capacity: then
evictions replace entries of one service's by the other's): in each of the scrapes made
    meanwhile, web's and api's interface_conntrack_entries are the same, and their own
    conntrack_entries add up to it, as docs/control.md says they do; and each service's
    conntrack_hits_total stays what it was before the flood (no frame is a hit: each is a flow
    of its own), never more, never less. Before, a table's hits, its packets less its new flows
    read before them, counted each new flow arriving between the two reads as a hit, taken back
    by the next scrape: the counter went up and down. Before, each service's
    figures came from a scan of its own, one after the other: the flows that arrived between
    two scans made the interface's differ from service to service within one scrape, the
    services' own not adding up to either (and N services on an interface scanned its table
    N times a scrape)."""
    import test_frames as F
    web_yaml, api_yaml = two_services_yaml(topo)
    plain_switch(topo)
    d = two_services_start(topo, web_yaml + api_yaml, "shared_flows_moving")
    f, stop, sent = None, threading.Event(), [0]

    def flood():
        for k in range(50000):
            if stop.is_set():
                break
            f.send(0x0800, F.ipv4(f"10.213.{10 + k // 1000}.{k % 250 + 1}", T.VIP,
                                  F.tcp(47000 + k % 1000, b"MOVING-WEB")))
            f.send(0x86DD, F.ipv6(f"fd13::{k + 16:x}", T.VIP6, 6,
                                  F.tcp(47000 + k % 1000, b"MOVING-API")))
            sent[0] = 2 * (k + 1)

    seen, bad, t = [], [], None
    hits_bad, hits0 = [], None

    def hits(m):
        return {svc: m.get(f'hashlb_service_steer_conntrack_hits_total{{service="{svc}"}}')
                for svc in ("web", "api")}
    try:
        f = F.Frames(topo)
        hits0 = hits(scrape(d))
        t = threading.Thread(target=flood, daemon=True)
        t.start()
        for _ in range(20):
            if not t.is_alive():
                break
            m = scrape(d)
            fig = {svc: (m.get(f'hashlb_service_steer_conntrack_entries{{service="{svc}"}}'),
                         m.get('hashlb_service_steer_interface_conntrack_entries'
                               f'{{service="{svc}"}}')) for svc in ("web", "api")}
            (w, wi), (a, ai) = fig["web"], fig["api"]
            seen.append(wi)
            if None in (w, a) or not wi == ai == w + a:
                bad.append(fig)
            if hits(m) != hits0:
                hits_bad.append(hits(m))
        stop.set()
        t.join(30)
        # the scrapes saw flows arrive: else this run proved nothing, which is not a pass
        moved = len(set(seen)) > 1
        check(not bad, f"shared_flows_moving: scrapes whose services' (own, interface's) "
              f"entries do not add up, of {len(seen)}: {bad[:3]}")
        check(None not in hits0.values() and not hits_bad,
              f"shared_flows_moving: conntrack_hits_total (web, api) before the flood {hits0}, "
              f"in {len(hits_bad)} of {len(seen)} scrapes during it other: {hits_bad[:3]}")
        check(moved, f"shared_flows_moving: no flow arrived while the {len(seen)} scrapes "
              f"were made ({sent[0]} frames sent): nothing was proved")
        print(f"shared_flows_moving: {sent[0]} frames, {len(seen)} scrapes, the interface's "
              f"entries {seen[0] if seen else None}..{seen[-1] if seen else None}"
              f"{'' if moved else ' (unchanged: no flow arrived during the scrapes)'}, "
              f"{len(bad)} not adding up, conntrack_hits_total {hits0}", flush=True)
    finally:
        stop.set()
        if t:
            t.join(30)
        if f:
            f.close()
        two_services_end(topo, d)


def jiffies():
    """(jiffies, time.time()) read together from /proc/timer_list, or None."""
    try:
        t0 = time.time()
        with open("/proc/timer_list") as f:
            m = re.search(r"^jiffies: (\d+)$", f.read(), re.M)
        t1 = time.time()
    except OSError:
        return None
    return (int(m.group(1)), (t0 + t1) / 2) if m else None


def ct_ticks():
    """The conntrack tick of the program's entries (seen[], jiffies >> 8): (its length in s,
    the time.time() one began), or None when /proc/timer_list tells no jiffies."""
    a = jiffies()
    time.sleep(0.5)
    b = jiffies()
    if not a or not b:
        return None
    hz = min((100, 250, 300, 1000), key=lambda h: abs(h - (b[0] - a[0]) / (b[1] - a[1])))
    return 256 / hz, b[1] - (b[0] % 256) / hz


def stop_idle_flow(topo, servers):
    """A stop whose service has timeouts.idle just under 9 s: one flow through the kernel path
    (hand-made ACKs) goes quiet, its last two packets in one conntrack tick (about a second at
    HZ=250) on either side of a drain poll (every 3 s from the stop), then sends again just
    after the poll 9 s after that one: less than timeouts.idle after its last packet, so the
    program is still attached and forwards it, and the drain ends (idle_flows=1) only once the
    flow has been quiet for timeouts.idle at least, as the daemon's own connections are closed
    after their idle timeout, never before. Before, the poll that saw the tick's first packet
    started the idle count, and the second packet, in the same tick, changed nothing: the
    drain ended 9 s after that poll, less than timeouts.idle after the flow's last packet, the
    program detached under it, its next packet reset by the LB's stack.
    The packets' offsets from the polls, and timeouts.idle's distance from 9 s, scale with the
    tick (0.256 s at HZ=1000; before, the scenario skipped below a 1 s tick): whatever their
    timing, the checks hold for a drain that waits as it should, and only a packet or a poll
    late by a quarter of the second packet's offset (96 ms at HZ=250, 24 ms at HZ=1000) makes
    a run that could not have caught that drain. HLBST_TICK_DIV=N places them as for a tick N
    times shorter (4: HZ=1000's on HZ=250), each of its ticks within one of the kernel's."""
    import test_frames as F
    ticks = ct_ticks()
    if not ticks:
        raise T.Skip("/proc/timer_list tells no jiffies")
    real, start = ticks
    tick = real / int(os.environ.get("HLBST_TICK_DIV", "1"))
    # the tick's last packet <a> s before the poll, the next one <b> s after it, each at least
    # <m> s inside the tick: (a, b, m) (0.1, 0.384, 0.1) at HZ=250, (0.032, 0.096, 0.032) at 1000
    a, b, m = min(0.1, tick / 8), min(0.4, tick * 3 / 8), min(0.1, tick / 8)
    # under 9 s by half of b, so that the drain of before, counting from the poll, would end
    # at the poll 9 s after it, less than idle after the second packet (8.808 s at HZ=250)
    idle = round(9000 - b * 500) / 1000
    plain_switch(topo)
    d = Daemon(topo, service(topo).replace(
        "    backends:\n", f"    timeouts: {{drain: 120s, idle: {round(idle * 1000)}ms}}\n"
        "    backends:\n"))
    d.start()
    f = None
    try:
        check(d.wait_log("kernel steering table published", 15) is not None,
              "stop idle flow: no table published at start")
        f = F.Frames(topo)
        n = [0]

        def use():
            n[0] += 1
            mark = b"IDLE-FLOW-%d" % n[0]
            f.send(0x0800, F.ipv4("10.213.0.9", T.VIP, F.tcp(45200, mark)))
            return time.time(), mark

        _, mark = use()
        check(f.forwarded([mark]), "stop idle flow: the hand-made flow not forwarded")
        d.skip_log()
        d.proc.terminate()
        t0 = log_time(d.wait_log(T.DRAINING, 10))
        check(t0 is not None, f"stop idle flow: the stop does not drain: {d.lines[d.pos - 5:]}")
        # a poll (every 3 s from the drain's start) at least a + m into a tick, and b + m
        # before its end: a packet a s before it and one b s after it share the tick
        polls = [t0 + 3 * k for k in range(2, 20) if t0 + 3 * k > time.time() + 0.5 and
                 a + m <= (t0 + 3 * k - start) % tick <= tick - b - m]
        if not polls:
            raise T.Skip(f"no drain poll in the middle of a {tick:.3f} s tick")
        q = polls[0]
        # the flow keeps its entry used until then, its last such use two of the kernel's
        # ticks before q - a: the packet then is the first of its tick, which changes the entry
        while time.time() < q - 0.4 - 2 * real:
            use()
            time.sleep(min(2, max(0, q - 0.4 - 2 * real - time.time())))
        time.sleep(max(0, q - a - time.time()))
        first, _ = use()
        time.sleep(max(0, q + b - time.time()))
        last, _ = use()
        # where the two fell (a late wake-up misses the tick or the poll: the run proves less)
        print(f"stop idle flow: packets {first - q:+.3f} s and {last - q:+.3f} s from the poll, "
              f"{(first - start) % tick:.3f} s and {(last - start) % tick:.3f} s into a "
              f"{tick:.3f} s tick", flush=True)
        # b / 4 after the poll 9 s after q (where a drain counting from q ends), b / 4 short of
        # idle after the last packet
        time.sleep(max(0, last + idle - b / 4 - time.time()))
        sent, mark = use()
        if sent - last < idle:
            got = f.forwarded([mark])
            if check(got, f"stop idle flow: a packet {sent - last:.3f} s after the flow's last, "
                     f"less than timeouts.idle ({idle} s), not forwarded: "
                     f"{[l for l in d.lines if 'steering' in l][-3:]}"):
                last = sent
        drained = d.wait_log("kernel steering drained", 30)
        check(drained is not None and "idle_flows=1 " in drained and
              log_time(drained) - last >= idle,
              f"stop idle flow: drained {log_time(drained) - last if drained else None} s after "
              f"the flow's last packet, timeouts.idle {idle} s: {drained}")
        print(f"stop idle flow: poll {q - t0:.2f} s into the drain, tick {tick:.3f} s, "
              f"timeouts.idle {idle} s, a packet {sent - q - 9:+.3f} s from the poll 9 s after; "
              f"{(drained or '').strip()}", flush=True)
    finally:
        if f:
            f.close()
        d.stop()


def upgrade_added(topo, servers):
    """An upgrade in place whose config adds a service on eth0 between web and api (gate, on
    the IPv4 VIP's port 81, over a host that is not there, health checks off: its table refused
    for good, no MAC): gate gets a table that serves no VIP, and api the one its VIP has in the
    program, so api's tables are published, its clients on b3. Before, gate took api's table
    (the first no service of the new process used), api got another, and its VIP was refused
    to it ('a VIP of these is table 1's'), held by gate's table, which was never published:
    api's tables stayed out of the kernel for good, its clients steered by the old process's
    last one."""
    web, api = two_services_yaml(topo)
    new_pid = None
    d = two_services_start(topo, web + api, "upgrade_added")
    try:
        gate = (f"  - name: gate\n    listen: '{T.VIP}:81'\n    hash_key: 4-tuple\n"
                f"    steering: kernel\n    interface: eth0\n    health: {{enabled: false}}\n"
                f"    backends:\n      - {{name: g1, address: '{topo.backend_ip(20)}:80'}}\n")
        d.edit(web + api, web + gate + api)
        d.skip_log()
        new_pid = upgrade(d, "upgrade_added")
        missing = d.wait_each(["service=web generation=", "service=api generation=",
                               "service=gate error="], 15)
        check(not missing, f"upgrade_added: after the upgrade, no line for {missing}: "
              f"{[l for l in d.lines if 'steering' in l][-6:]}")
        refused = [l for l in d.lines if "not updated" in l and "service=api" in l]
        check(not refused, f"upgrade_added: api's table refused: {refused[:1]}")
        got4 = kernel_steered(topo, "upgrade_added", T.VIP)
        got6 = kernel_steered(topo, "upgrade_added", T.VIP6)
        check(set(got4) <= {"b1", "b2"} and got6 == {"b3": 20},
              f"upgrade_added: clients not on their own service's backends: {dict(got4)} "
              f"{dict(got6)}")
        print(f"upgrade_added: api published, gate refused; web's clients {dict(got4)}, "
              f"api's {dict(got6)}", flush=True)
        topo.wait_closed()
    finally:
        two_services_end(topo, d, new_pid)


def altname(topo, servers):
    """Two services steered on one interface under two of its names, eth0 and an altname: the
    second shares the first's program (a table each), and each one's clients reach its own
    backends. Before, the second took the first's program over as an orphan ("kernel steering
    taken over ... from=orphan": this process's own program, held by no other) and published
    its tables into it; then it was not started."""
    T.sh("ip", "link", "property", "add", "dev", "eth0", "altname", "hlbalt0", ns=topo.lb)
    web, api = two_services_yaml(topo)
    d = two_services_start(topo, web + api.replace("interface: eth0", "interface: hlbalt0"),
                           "altname")
    try:
        check(not any("kernel steering taken over" in l or "not started" in l for l in d.lines),
              f"altname: a service took the other's program over, or was not started: "
              f"{[l for l in d.lines if 'steering' in l]}")
        got4 = kernel_steered(topo, "altname", T.VIP)
        got6 = kernel_steered(topo, "altname", T.VIP6)
        check(set(got4) <= {"b1", "b2"} and got6 == {"b3": 20},
              f"altname: clients not on their own service's backends: {dict(got4)} {dict(got6)}")
        print(f"altname: web's clients {dict(got4)}, api's (on hlbalt0) {dict(got6)}",
              flush=True)
    finally:
        two_services_end(topo, d)
        T.sh("ip", "link", "property", "del", "dev", "eth0", "altname", "hlbalt0", ns=topo.lb,
             check=False)


def iface_recreated(topo, servers):
    """The LB's eth0 deleted and created again under its name (a bond or a VLAN interface set
    up anew): its program went with it. The daemon logs the loss, attaches the service's latest
    table to the new eth0, and new clients go through the kernel path again. Before, it went on
    publishing into maps no program read, its status showing the program attached: no new flow
    in the kernel path, every client through the daemon's own listener, for good."""
    d = Daemon(topo, service(topo)).start()
    try:
        check(d.wait_log("kernel steering table published", 15) is not None,
              "recreated: no table published at start")
        steered(topo, "recreated: before", 10)
        topo.wait_closed()
        d.skip_log()
        topo.rewire_lb()
        topo.resolve()
        lost = d.wait_log("kernel steering lost", 15)
        again = d.wait_log("kernel steering attached", 15) if lost else None
        check(lost is not None and again is not None and "interface=eth0" in again,
              f"recreated: the program lost with eth0 not attached again: lost {lost}, "
              f"attached {again}")
        check(d.wait_log("kernel steering table published", 15) is not None,
              "recreated: no table published to the new program")
        got = steered(topo, "recreated: after", 20)
        print(f"recreated: eth0 created again, program {'attached again' if again else 'LOST'}; "
              f"20 new clients {dict(got)}", flush=True)
    finally:
        d.stop()
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def lost_shared(topo, servers):
    """web and api sharing eth0's program, which is detached under them (its tc filter
    deleted, or its XDP hook cleared, by hand): both losses logged, and both services
    attached again to one new program, a table each, each one's 20 new clients through the
    kernel path on its own backends. Before, the first service republished counted the other's
    handle on the lost program as a live one: it shared the detached program (no new flow in
    the kernel path), or loaded one of a single table, and the second was refused."""
    web, api = two_services_yaml(topo)
    d = two_services_start(topo, web + api, "lost_shared")
    try:
        kernel_steered(topo, "lost_shared: before", T.VIP, 10)
        topo.wait_closed()
        d.skip_log()
        # at tc here (mode auto on veth), else at the XDP hook
        T.sh("tc", "filter", "del", "dev", "eth0", "ingress", ns=topo.lb, check=False)
        T.sh("ip", "link", "set", "dev", "eth0", "xdpgeneric", "off", ns=topo.lb, check=False)
        T.sh("ip", "link", "set", "dev", "eth0", "xdp", "off", ns=topo.lb, check=False)
        missing = d.wait_each(['msg="kernel steering lost" service=web',
                               'msg="kernel steering lost" service=api'], 15)
        check(not missing, f"lost_shared: no loss logged for {missing}: "
              f"{[l for l in d.lines if 'steering' in l]}")
        missing = d.wait_each(["service=web generation=", "service=api generation="], 20)
        refused = [l for l in d.lines if "not started" in l]
        check(not missing and not refused,
              f"lost_shared: not published again: {missing}, {refused}")
        got4, got6 = each_steered(topo, "lost_shared: after")
        print(f"lost_shared: program detached under both, attached again; web's 20 clients "
              f"{dict(got4)}, api's {dict(got6)}", flush=True)
    finally:
        two_services_end(topo, d)


def second_timers(pid):
    """The timerfds of process <pid> that fire every second (/proc/PID/fdinfo): the
    daemon's steering retry timer (RETRY_MS) is its only one."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:[timerfd]":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                n += "it_interval: (1, 0)" in f.read()
        except OSError:
            pass
    return n


def lost_while_retried(topo, servers):
    """A table being retried (the program's lock held by the test) when the LB's eth0 goes
    away with its program: the retry timer goes, for nothing is tried until the interface is
    back (before, it fired every second meanwhile, for nothing, until a reload); once eth0 is
    back the latest table is attached there and steers new clients, the lock of the old
    program still held."""
    try:
        with LockHeld(topo, "lost while retried") as h:
            timers = second_timers(h.d.proc.pid) if h.ok else None
            if not check(h.ok and h.refused is not None and timers == 1,
                         f"lost while retried: not refused, retried every second: "
                         f"{h.refused}, {timers} timers of 1 s"):
                return
            topo.wait_closed()
            mac = topo.mac(topo.lb)
            T.sh("ip", "link", "del", "eth0", ns=topo.lb)
            lost = h.d.wait_log("kernel steering lost", 15)
            for _ in range(50):  # the next tick lets it go
                timers = second_timers(h.d.proc.pid)
                if not timers:
                    break
                time.sleep(0.1)
            print(f"lost while retried: eth0 gone, {timers} timers of 1 s left", flush=True)
            check(lost is not None and timers == 0,
                  f"lost while retried: lost {lost}, the retry timer still firing ({timers})")
            topo.wire(1, topo.lb, T.LB_IP, T.LB_IP6, mac)
            topo.resolve()
            again = h.d.wait_log("kernel steering attached", 15)
            check(again is not None and h.d.wait_log("kernel steering table published", 15),
                  f"lost while retried: eth0 back, not attached and published: {again}")
            got = steered(topo, "lost while retried: back")
            print(f"lost while retried: eth0 back, attached; 20 new clients {dict(got)}",
                  flush=True)
    finally:
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def iface_later(topo, servers):
    """The daemon starts before its interface exists (a bond or a VLAN made later at boot):
    the service is not started, saying it is attached once the interface exists, and it is,
    its latest table steering new clients, with no reload. Before, it stayed unsteered until a
    reload. (The LB's eth0 is renamed away, then back: renaming takes the link down.)"""
    def rename(old, new):
        T.sh("ip", "link", "set", old, "down", ns=topo.lb)
        T.sh("ip", "link", "set", old, "name", new, ns=topo.lb)
        T.sh("ip", "link", "set", new, "up", ns=topo.lb)

    rename("eth0", "hlbaway0")
    d = Daemon(topo, service(topo)).start()
    try:
        refused = d.wait_log("kernel steering not started", 15)
        check(refused is not None and "attached once it exists" in refused,
              f"later: no eth0, yet not said so: {refused}")
        rename("hlbaway0", "eth0")
        # A link taken down loses its IPv6 addresses and neighbour entries.
        T.sh("ip", "-6", "addr", "replace", f"{T.LB_IP6}/64", "dev", "eth0", "nodad",
             ns=topo.lb)
        topo.resolve()
        again = d.wait_log("kernel steering attached", 15)
        check(again is not None and d.wait_log("kernel steering table published", 15),
              f"later: eth0 created, the program not attached: {again}")
        got = steered(topo, "later", 20)
        print(f"later: eth0 created after the start, program "
              f"{'attached' if again else 'NOT attached'}; 20 new clients {dict(got)}",
              flush=True)
    finally:
        d.stop()
        if "hlbaway0" in T.sh("ip", "link", "show", ns=topo.lb).stdout:
            rename("hlbaway0", "eth0")
            T.sh("ip", "-6", "addr", "replace", f"{T.LB_IP6}/64", "dev", "eth0", "nodad",
                 ns=topo.lb)
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def rename_lb(topo, old, new):
    """The LB's <old> renamed <new> (renaming takes a link down, which loses its IPv6 address
    and neighbour entries: given back, and the backends resolved again)."""
    T.sh("ip", "link", "set", old, "down", ns=topo.lb)
    T.sh("ip", "link", "set", old, "name", new, ns=topo.lb)
    T.sh("ip", "link", "set", new, "up", ns=topo.lb)
    T.sh("ip", "-6", "addr", "replace", f"{T.LB_IP6}/64", "dev", new, "nodad", ns=topo.lb)
    ips = [topo.backend_ip(i) for i in range(len(topo.backends))]
    for _ in range(40):
        out = T.sh("ip", "neigh", "show", "dev", new, ns=topo.lb).stdout
        missing = [ip for ip in ips if f"{ip} lladdr " not in out]
        if not missing:
            return
        for ip in missing:
            T.sh(sys.executable, "-c", "import socket, sys; s = socket.socket(); s.settimeout(1); "
                 "s.connect_ex((sys.argv[1], 9))", ip, ns=topo.lb, check=False)
        time.sleep(0.5)


def renamed(topo, servers):
    """The steered interface renamed under the daemon (eth0 to hlbren0): its program stays
    (attached by index), and the tables that follow reach it: the backends' MACs are read from
    the neighbour table of the interface the program is on, whatever its name now. Here ctl set
    b1 maint: published, and 20 new clients through the kernel path avoid b1. Before, they were
    read under the config's name, which no interface had any more: every later table was
    refused ('no entry in the neighbour table of eth0') and retried every second, and the
    kernel path kept sending b1 new clients until a reload naming hlbren0, which detached the
    program and attached a new one, its conntrack table empty."""
    d = Daemon(topo, service(topo)).start()
    renamed_to = None
    try:
        check(d.wait_log("kernel steering table published", 15) is not None,
              "renamed: no table published at start")
        rename_lb(topo, "eth0", "hlbren0")
        renamed_to = "hlbren0"
        d.skip_log()
        p = d.ctl("set", "b1", "maint")
        check(p.returncode == 0, f"renamed: ctl set b1 maint: {p.stdout} {p.stderr}")
        line = d.wait_log("kernel steering table", 10)
        check(line is not None and "table published" in line,
              f"renamed: the table with b1 in maint: {line}")
        got = steered(topo, "renamed", 20, iface="hlbren0")
        check("b1" not in got, f"renamed: new clients with b1 in maint: {dict(got)}")
        print(f"renamed: eth0 renamed hlbren0, b1 in maint: {line and line.split('msg=')[1].strip()}; "
              f"20 new clients {dict(got)}", flush=True)
        # Its lines name the interface the program is on, and the config's name beside it.
        cfg = open(d.path).read()

        def reload(text):
            with open(d.path, "w") as f:
                f.write(text)
            d.skip_log()
            p = d.ctl("reload")
            check(p.returncode == 0, f"renamed: reload: {p.stdout} {p.stderr}")
            return d.wait_log("msg=reloaded", 10)

        reload(cfg.replace("    interface: eth0\n", "    interface: eth0\n    steering_flows: 1000\n"))
        kept = d.wait_log("keeps its conntrack size", 10)
        check(kept is not None and " interface=hlbren0 config_interface=eth0 " in kept,
              f"renamed: a line after the rename names the interface now: {kept}")
        # A second service on the interface under its new name, the first still naming eth0:
        # found there by the index of the first's program, whose one table (a service alone
        # at the start) is replaced by a program of a table each, the line naming the
        # interface by both names (before, the interface was looked for by the first one's
        # config name, which none had any more: the second took the first's program over as
        # an orphan and published its tables into it; then it was refused until a restart).
        api = (service(topo).replace("name: web", "name: api")
               .replace("interface: eth0", "interface: hlbren0")
               .replace(f"{T.VIP}:{T.VIP_PORT}", f"{T.VIP}:{T.VIP_PORT + 1}"))
        flows = cfg.replace("    interface: eth0\n", "    interface: eth0\n    steering_flows: 1000\n")
        start = d.pos
        reload(flows + api)
        replaced = d.wait_log("kernel steering program replaced", 10)
        check(replaced is not None and "service=web " in replaced and
              " interface=hlbren0 config_interface=eth0 " in replaced and " for=api " in replaced,
              f"renamed: web's program not replaced for a second service on hlbren0: {replaced}")
        check(d.wait_log("service=api generation=", 10) is not None,
              "renamed: no table of api published")
        check(not any("kernel steering taken over" in l for l in d.lines[start:]),
              f"renamed: a service took the other's program over: "
              f"{[l for l in d.lines[start:] if 'steering' in l]}")
        got = steered(topo, "renamed", 20, iface="hlbren0")
        check("b1" not in got, f"renamed: web's table (b1 in maint) no longer steers: {dict(got)}")
        print(f"renamed: a second service on hlbren0: "
              f"{replaced and replaced.split('msg=')[1].strip()}; 20 new clients {dict(got)}",
              flush=True)
        # A config following the rename keeps the program (and its conntrack table).
        reload(cfg.replace("    interface: eth0\n", "    interface: hlbren0\n"))
        start = d.pos
        p = d.ctl("set", "b1", "ready")
        line = d.wait_log("kernel steering table", 10)
        moved = [l for l in d.lines[start:d.pos] if ("kernel steering detached" in l or
                 "kernel steering attached" in l) and "service=web " in l]
        check(line is not None and "table published" in line,
              f"renamed: after the reload naming hlbren0, a table: {line} {p.stderr}")
        check(not moved, f"renamed: a reload naming hlbren0 detached the program: {moved}")
        print(f"renamed: reload naming hlbren0: {'program kept' if not moved else moved}",
              flush=True)
    finally:
        d.stop()
        if renamed_to:
            rename_lb(topo, renamed_to, "eth0")
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def syscr(pid):
    """Read syscalls process <pid> has made (/proc/PID/io), or None."""
    try:
        with open(f"/proc/{pid}/io") as f:
            return int(re.search(r"syscr:\s*(\d+)", f.read()).group(1))
    except (OSError, AttributeError):
        return None


def many_backends(topo, servers, n=1000):
    """A table of <n> backends (b1..b3 and others with static neighbour entries) published
    after ctl set: the neighbour table read once for it, not once a backend. The daemon's
    read syscalls (/proc/PID/io) across the publication and the next MAC check: before,
    each backend's look-up read the whole of /proc/net/arp (about 38 reads for 1,000
    entries: 38,000 for one publication, on the control loop); now fewer than backends. And
    the clients `hashlb lookup -c` gives b1..b3 by that table (client ports 21000-24999
    tried: about 12) reach them through the kernel path."""
    batch = "".join(f"neigh replace 10.213.{i // 250}.{i % 250 + 1} lladdr "
                    f"02:00:00:00:{i // 256:02x}:{i % 256:02x} dev eth0 nud permanent\n"
                    for i in range(n - 3))
    subprocess.run(["ip", "-n", topo.lb, "-batch", "-"], input=batch, text=True, check=True,
                   timeout=60)
    others = "".join(f"      - {{name: p{i}, address: '10.213.{i // 250}.{i % 250 + 1}:80'}}\n"
                     for i in range(n - 3))
    d = Daemon(topo, service(topo, health="{enabled: false}") + others)
    d.args = ["--log-level", "debug"]  # each MAC check logged
    d.start()
    try:
        check(d.wait_log("kernel steering table published", 30) is not None,
              f"{n} backends: no table published at start")
        before = syscr(d.proc.pid)
        p = d.ctl("set", "p0", "maint")
        check(p.returncode == 0, f"{n} backends: ctl set p0 maint: {p.stdout} {p.stderr}")
        published = d.wait_log("kernel steering table published", 15) is not None
        # the MAC check after it (every 2 s: REFRESH_MS) read too: waited for, not a time
        checked = d.wait_log(f'kernel steering MACs checked" service=web backends={n} ', 15)
        after = syscr(d.proc.pid)
        reads = after - before if before is not None and after is not None else None
        print(f"{n} backends: a table published, {reads} read syscalls", flush=True)
        check(published and checked and reads is not None and reads < n,
              f"{n} backends: published {published}, MACs checked {checked}, {reads} read "
              f"syscalls across a publication and a check: the neighbour table read once a "
              f"backend")
        out = T.sh(HASHLB, "lookup", "-c", d.path, "--down", "p0",
                   ",".join(f"{T.CLIENT_IP}:{sp}" for sp in range(21000, 25000))).stdout
        want = {int(f[0].rsplit(":", 1)[1]): f[1] for f in map(str.split, out.splitlines())
                if f[1] in ("b1", "b2", "b3")}
        flows = steer_stats(topo).get("new_flows", 0)
        p = T.sh(sys.executable, "-c", T.REUSE_CLIENT, f"{T.CLIENT_IP}:{T.VIP}",
                 *map(str, want), ns=topo.client, check=False, timeout=120)
        got = dict(json.loads(p.stdout)) if p.returncode == 0 else p.stderr.strip()[-200:]
        flows = steer_stats(topo).get("new_flows", 0) - flows
        print(f"{n} backends: {len(want)} clients of b1..b3 by the table, {flows} new flows "
              f"in the kernel path", flush=True)
        check(want and got == want and flows >= len(want),
              f"{n} backends: clients off the table's backend: {got} {want}, {flows} new flows")
    finally:
        d.stop()
        T.sh("ip", "neigh", "flush", "to", "10.213.0.0/16", ns=topo.lb, check=False)


def prog_maps(topo):
    """The maps of the hashlb program on the LB's eth0, by name: what bpftool map show says
    of each (id, max_entries, bytes_memlock...)."""
    net = json.loads(T.sh("bpftool", "-j", "net", "show", "dev", "eth0", ns=topo.lb).stdout)
    progs = [a.get("id") or a.get("prog_id") for n in net for k in ("xdp", "tc")
             for a in n.get(k, [])]
    maps = {}
    for prog in filter(None, progs):
        info = json.loads(T.sh("bpftool", "-j", "prog", "show", "id", str(prog)).stdout)
        for m in info.get("map_ids", []):
            one = json.loads(T.sh("bpftool", "-j", "map", "show", "id", str(m)).stdout)
            maps.setdefault(one.get("name"), one)
    return maps


def lock_file(topo):
    """The publication lock file of the hashlb program on the LB's eth0: named by the id of
    its map hlb_active (docs/steering.md)."""
    active = prog_maps(topo).get("hlb_active")
    return f"/run/hashlb/steer-{active['id']}.lock" if active else None


def maglev_sized(topo, servers):
    """A Maglev service alone on eth0, b1 of weight 1,000 (a ring of its weights would have
    160 x 1,002 = 160,320 points): its program's ring maps hold the 65,536 points' minimum
    (hlb_points 2 x 65,536 entries), its table having no ring; then a reload making it a ring
    grows the program, logged once with 320,640 points, and new clients go through the
    kernel path. Before, the Maglev service's program was loaded with ring maps for 320,640
    points (vnodes x weights, as if it were a ring): memory no packet reads."""
    def yaml(scheme):
        return service(topo, backends={0: ", weight: 1000"}).replace(
            "    interface: eth0\n", f"    interface: eth0\n    scheme: {scheme}\n")

    d = Daemon(topo, yaml("maglev")).start()
    try:
        if not check(d.wait_log("kernel steering table published", 15) is not None,
                     f"maglev sized: no table published at start: {d.lines[-1:]}"):
            return
        maps = prog_maps(topo)
        points = maps.get("hlb_points", {}).get("max_entries")
        memlock = sum(m.get("bytes_memlock", 0) for m in maps.values())
        print(f"maglev sized: Maglev alone: hlb_points {points} entries, "
              f"hlb_buckets {maps.get('hlb_buckets', {}).get('max_entries')}, "
              f"maps' memlock {memlock} bytes", flush=True)
        check(points == 2 * 65536,
              f"maglev sized: a Maglev service's ring maps hold {points} points' entries, "
              f"not the minimum's {2 * 65536}")
        steered(topo, "maglev sized: Maglev")
        start = len(d.lines)
        d.skip_log()
        d.edit("scheme: maglev", "scheme: ring")
        p = d.ctl("reload")
        # a growth loads a program: seconds on a loaded machine
        published = d.wait_log("kernel steering table published", 90)
        grown_l = [x for x in d.lines[start:] if "kernel steering program grown" in x]
        check(p.returncode == 0 and published and len(grown_l) == 1 and
              " max_ring_points=320640 " in grown_l[0],
              f"maglev sized: the reload to a ring ({p.returncode} {p.stderr.strip()}) not "
              f"published ({published}) once grown to 320,640 points: {grown_l}")
        got = steered(topo, "maglev sized: ring")
        print(f"maglev sized: the reload to a ring grew the program: hlb_points "
              f"{prog_maps(topo).get('hlb_points', {}).get('max_entries')} entries; new "
              f"clients {dict(got)}", flush=True)
    finally:
        d.stop()


def maglev_moved(topo, servers):
    """maglev_sized's Maglev service (b1 of weight 1,000) reloaded as a ring on another
    interface of the LB (vx0, a veth of its own): the program on eth0, which the reload moves
    the service off, is detached, and the reload's table is not published into it first.
    Before, it was, sized for the old config: the ring's 160,320 points refused there, logged
    as an error ("kernel steering table not updated", its program too small, restart hashlb)
    just before the program was detached."""
    T.sh("ip", "link", "add", "vx0", "type", "veth", "peer", "name", "vx1", ns=topo.lb)
    d = Daemon(topo, service(topo, backends={0: ", weight: 1000"}).replace(
        "    interface: eth0\n", "    interface: eth0\n    scheme: maglev\n"))
    try:
        T.sh("ip", "link", "set", "vx0", "up", ns=topo.lb)
        T.sh("ip", "link", "set", "vx1", "up", ns=topo.lb)
        d.start()
        if not check(d.wait_log("kernel steering table published", 15) is not None,
                     f"maglev moved: no table published at start: {d.lines[-1:]}"):
            return
        d.skip_log()
        start = len(d.lines)
        d.edit("interface: eth0\n    scheme: maglev\n", "interface: vx0\n    scheme: ring\n")
        p = d.ctl("reload")
        detached = d.wait_log('msg="kernel steering detached" service=web interface=eth0', 15)
        end = d.lines.index(detached) if detached in d.lines[start:] else len(d.lines)
        said = [x for x in d.lines[start:end] if "kernel steering table not updated" in x or
                "kernel steering program grown" in x]
        check(p.returncode == 0 and detached and not said,
              f"maglev moved: the reload ({p.returncode} {p.stderr.strip()}) detached eth0's "
              f"program ({detached is not None}) after publishing the new table into it: "
              f"{said}")
    finally:
        d.stop()
        T.sh("ip", "link", "del", "vx0", ns=topo.lb, check=False)
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def lock_tries(path):
    """A counter of the tries of the publication lock file <path> from now on, for tries():
    each try opens the file (publish_lock()), which inotify tells (IN_OPEN), nothing else of
    hashlb's does; a retry's try shows without a log line or counter of its own. Its closes
    watched too, so that two opens unread are never merged into one event. close() when
    done."""
    import ctypes
    import select
    import struct

    class Tries:
        def __init__(self):
            libc = ctypes.CDLL(None, use_errno=True)
            self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if self.fd < 0:
                raise OSError(ctypes.get_errno(), f"inotify on {path}")
            if libc.inotify_add_watch(self.fd, path.encode(), 0x38) < 0:
                err = ctypes.get_errno()
                os.close(self.fd)  # no close() for the caller to call: the watch failed
                raise OSError(err, f"inotify on {path}")
            self.n = 0

        def tries(self, n, timeout=15):
            """Waits until the lock has been tried <n> times since the start; whether it
            was."""
            end = time.monotonic() + timeout
            while self.n < n and time.monotonic() < end:
                if select.select([self.fd], [], [], max(end - time.monotonic(), 0))[0]:
                    buf = os.read(self.fd, 4096)
                    off = 0
                    while off < len(buf):  # struct inotify_event: wd, mask, cookie, len
                        _, mask, _, size = struct.unpack_from("iIII", buf, off)
                        self.n += bool(mask & 0x20)  # IN_OPEN; 0x08, 0x10: IN_CLOSE_*
                        off += 16 + size
            return self.n >= n

        def close(self):
            os.close(self.fd)

    return Tries()


class LockHeld:
    """A daemon (of service() or <services>, a function of the topology) whose first table
    is published, then its program's lock taken by the test (an flock on its lock file) and,
    if <reload>, a config that changes the table reloaded: .d, .path, .refused (the refusal
    logged, or None), .ok (False after a failed check), .temp(x) a temporary path removed at
    the end, .gdb (killed at the end if left running). release() lets the lock go; leaving,
    the lock is let go and the daemon stopped."""

    def __init__(self, topo, tag, services=service, reload=True):
        self.topo, self.tag, self.fd, self.path, self.refused = topo, tag, None, None, None
        self.reload, self.gdb, self.paths = reload, None, []
        self.d = Daemon(topo, services(topo))

    def __enter__(self):
        self.d.start()
        try:
            self._lock_and_reload()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _lock_and_reload(self):
        import fcntl
        self.ok = check(self.d.wait_log("kernel steering table published", 15) is not None,
                        f"{self.tag}: no table published at start")
        self.path = lock_file(self.topo) if self.ok else None
        self.ok = self.ok and check(self.path and os.path.exists(self.path),
                                    f"{self.tag}: no lock file ({self.path})")
        if self.ok:
            self.fd = os.open(self.path, os.O_RDWR)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        if self.ok and self.reload:
            self.d.edit("name: b3,", "name: b3, weight: 3,")
            self.d.skip_log()
            self.d.proc.send_signal(signal.SIGHUP)
            self.refused = self.d.wait_log("kernel steering table not updated", 15)

    def temp(self, x):
        self.paths.append(tempfile.mktemp(prefix=f"hlblock{x}-"))
        return self.paths[-1]

    def gdb_at(self, where, then, before=""):
        """gdb_at() on the daemon, kept in .gdb: whether it was attached (a failed check if
        not)."""
        mark = self.temp("m")
        self.gdb = gdb_at(self.d.proc.pid, mark, where, then, before)
        return check(wait_file(mark, self.gdb) is not None,
                     f"{self.tag}: gdb not attached: {self.gdb.poll()}")

    def gdb_done(self, timeout=60):
        """What .gdb printed once it ended (detached), "" if it did not within <timeout>
        seconds (its breakpoint never hit: killed when leaving), not an exception that
        ended the run before the scenario's checks."""
        try:
            return self.gdb.communicate(timeout=timeout)[0]
        except subprocess.TimeoutExpired:
            return ""

    def release(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __exit__(self, *exc):
        self.release()
        killed = self.gdb is not None and self.gdb.poll() is None
        if killed:
            self.gdb.kill()
            self.gdb.wait()
        for x in self.paths:
            if os.path.exists(x):
                os.unlink(x)
        self.d.stop()
        if killed:
            # killed with its breakpoint in the daemon's code, which dies of it (SIGTRAP) at
            # the next hit: its program is left attached, for no next scenario to take over
            T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=self.topo.lb, check=False)


def admin_get(d, path):
    """GET <path> from <d>'s admin endpoint (a unix socket: no namespace needed): the status
    code, 0 if none came within 30 s."""
    import socket
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    try:
        s.connect(d.admin)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: hashlb\r\nConnection: close\r\n\r\n".encode())
        head = s.makefile("rb").readline().split()
        return int(head[1]) if len(head) > 1 else 0
    except OSError:
        return 0
    finally:
        s.close()


def lock_held(topo, servers):
    """Another publication into the program holds its lock (here the test: an flock on its
    lock file; in life a hashlb steer --update, or a hashlb beside this one, stopped inside a
    publication): hashlb run keeps the table in force, tries again every second, logs the
    refusal naming the holder, and its control thread goes on meanwhile: health checks,
    the admin endpoint. Before, each try waited 2 s for the lock on the control thread and
    the next was due by then: the loop turned once a try (5 GET /status and 3 s: 13 turns
    for 13 tries). Once the lock is let go, the latest table is published and
    steers new clients."""
    # a reload that changes the table, published with the lock held by this process
    with LockHeld(topo, "lock held") as h:
        if not h.ok:
            return
        d, path, line = h.d, h.path, h.refused
        check(line is not None and f"process {os.getpid()}" in line and path in line,
              f"lock held: the refusal does not name this process and {path}: {line}")

        def sample():
            p = d.ctl("metrics")
            m = parse_prometheus(p.stdout) if p.returncode == 0 else {}
            return (m.get(("hashlb_control_turns_total", ""), 0),
                    m.get(("hashlb_service_steer_tables_refused_total", '{service="web"}'), 0))

        turns0, tries0 = sample()
        codes = [admin_get(d, "/status") for _ in range(5)]
        # 3 tries more, every one refused: the counter waited on, not a time
        end = time.monotonic() + 30
        turns1, tries1 = sample()
        while tries1 < tries0 + 3 and time.monotonic() < end:
            time.sleep(0.2)
            turns1, tries1 = sample()
        turns, tries = int(turns1 - turns0), int(tries1 - tries0)
        published = d.wait_log("kernel steering table published", 0)
        check(codes == [200] * 5, f"lock held: GET /status while the lock is held: {codes}")
        # 200 ms health checks of 3 backends: dozens of turns a second when nothing holds
        # the loop; about one a try when each try holds it for 2 s
        check(tries >= 3 and turns >= 4 * tries and published is None,
              f"lock held: the control loop turned {turns} times over {tries} tries of the "
              f"publication (published meanwhile: {published})")
        print(f"lock held: 5 GET /status {codes}; {turns} turns of the control loop over "
              f"{tries} refused tries", flush=True)
        h.release()
        check(d.wait_log("kernel steering table published", 15) is not None,
              "lock held: the table not published once the lock was let go")
        got = steered(topo, "lock held")
        print(f"lock held: let go, published; 20 new clients {dict(got)}", flush=True)


def status_none(d):
    """What hashlb ctl status says of web's kernel steering without a program: the text's
    line ("" if none) and the JSON's steering_none (None if none)."""
    text = d.ctl("status").stdout
    line = next((x.strip() for x in text.splitlines() if "kernel steering:" in x), "")
    p = d.ctl("--json", "status")
    svc = json.loads(p.stdout)["services"][0] if p.returncode == 0 else {}
    return line, (svc.get("steering_none") if svc.get("steering") is None else None)


def status_unread(topo, servers):
    """A program whose counters cannot be read (gdb makes hashlb_steer_stats() fail once, as
    a failing bpf syscall would): ctl --json status shows web's "steering" null with a
    steering_none that says so, and ctl status (text, failed once more) the same words on
    its kernel steering line, not "no program attached"; the next status, read, shows the
    counters again. Before, "steering" was null with no steering_none, as if no reason were
    known, and the text said "no program attached"."""
    d = Daemon(topo, service(topo)).start()
    gdb = None

    def unread(*args):
        """ctl <args> while hashlb_steer_stats() fails once for run_steer_stats(): its
        output."""
        nonlocal gdb
        mark = tempfile.mktemp(prefix="hlbstats-")
        gdb = rebind_fails(d.proc.pid, mark, "hashlb_steer_stats", 5, "run_steer_stats")
        if not check(wait_file(mark, gdb) is not None,
                     f"status_unread: gdb not attached: {gdb.poll()}"):
            return ""
        p = d.ctl(*args)
        out, _ = gdb.communicate(timeout=60)
        gdb = None
        check("injected" in out, f"status_unread: not injected: {out[-300:]}")
        return p.stdout

    try:
        if not check(d.wait_log("kernel steering table published", 15) is not None,
                     "status_unread: no table published at start"):
            return
        out = unread("--json", "status")
        svc = json.loads(out)["services"][0] if out else {}
        why = svc.get("steering_none") or ""
        check(svc.get("steering", {}) is None and "could not be read" in why,
              f"status_unread: steering {svc.get('steering', '-')}, steering_none {why!r}")
        line = next((x.strip() for x in unread("status").splitlines()
                     if "kernel steering:" in x), "")
        check(line == f"kernel steering: {why}",
              f"status_unread: the text's line {line!r}, want the same words")
        again = json.loads(d.ctl("--json", "status").stdout)["services"][0]
        check(isinstance(again.get("steering"), dict) and "steering_none" not in again,
              f"status_unread: the next status: {again.get('steering')} "
              f"{again.get('steering_none')}")
        print(f"status_unread: {line!r}, then read again", flush=True)
    finally:
        if gdb:
            gdb.kill()
            gdb.wait()
        d.stop()


def other_version(topo, servers):
    """Another hashlb version's program on the LB's eth0 (this source built with its map
    hlb_stats named otherwise, attached by hand in generic XDP): hashlb run does not start
    steering and says so once, naming the program and what removes it, and again after eth0
    was gone a while (before, not: the last word logged was that it would be attached once
    eth0 exists, while it was refused every second); once it is detached
    (the ip link command the message names) the daemon attaches its own by itself, within its
    retry, and logs it, and new clients go through the kernel path. Before, only a reload
    after the detach attached it. Meanwhile hashlb ctl status (text and JSON steering_none)
    says why there is no program, as the log did; before, "no program attached" alone."""
    obj = os.path.join(os.environ.get("HASHLB_BUILD_ROOT", "build"), "tests", "steer",
                       "steer-otherver.bpf.o")
    T.sh("ip", "link", "set", "dev", "eth0", "xdpgeneric", "object", obj, "program", "hlb_xdp",
         ns=topo.lb)
    d = Daemon(topo, service(topo))
    d.args = ["--log-level", "debug"]  # each try logged
    d.start()
    try:
        line = d.wait_log("kernel steering not started", 15)
        check(line is not None and "another hashlb version's" in line
              and "ip link set dev eth0 xdpgeneric off" in line,
              f"other version: not refused naming it and what removes it: {line}")
        # two retries after the first try: waited for, not a time
        start = d.pos
        tries = [d.wait_log("kernel steering attach tried", 15) for _ in range(3)]
        again = [x for x in d.lines[start:d.pos] if "kernel steering not started" in x]
        check(all(tries) and not again, f"other version: the refusal logged again at a retry "
              f"({len([x for x in tries if x])} tries): {again}")
        # ctl status says why there is no program, as the log did (before, only "no
        # program attached")
        text, js = status_none(d)
        check(text.startswith("kernel steering: no program attached: ") and
              "another hashlb version's" in text and js and "another hashlb version's" in js,
              f"other version: ctl status without the reason: {text!r}, JSON {js!r}")
        # eth0 gone a while (renamed away, the program with it), then back: the refusal is
        # said again, the log's last word being that it is attached once eth0 exists
        rename_lb(topo, "eth0", "hlbaway0")
        gone = d.wait_log("kernel steering not started", 15)
        check(gone is not None and "attached once it exists" in gone,
              f"other version: eth0 gone, not said so: {gone}")
        text, js = status_none(d)
        check("attached once it exists" in text and js and "attached once it exists" in js,
              f"other version: eth0 gone, ctl status without the reason: {text!r}, {js!r}")
        rename_lb(topo, "hlbaway0", "eth0")
        line = d.wait_log("kernel steering not started", 15)
        check(line is not None and "another hashlb version's" in line,
              f"other version: eth0 back with it, the refusal not said again: {line}")
        T.sh("ip", "link", "set", "dev", "eth0", "xdpgeneric", "off", ns=topo.lb)
        line = d.wait_log("kernel steering attached", 15)
        check(line is not None and "the other hashlb version's program is gone" in line,
              f"other version: detached, this hashlb's not attached by itself: {line}")
        if line is None:
            return
        check(d.wait_log("kernel steering table published", 15) is not None,
              "other version: attached, no table published")
        got = steered(topo, "other version")
        print(f"other version: refused once, attached once detached; 20 new clients "
              f"{dict(got)}", flush=True)
    finally:
        d.stop()
        if "hlbaway0" in T.sh("ip", "link", "show", ns=topo.lb).stdout:
            rename_lb(topo, "hlbaway0", "eth0")
        T.sh("ip", "link", "set", "dev", "eth0", "xdpgeneric", "off", ns=topo.lb, check=False)


def body(topo):
    # The daemon listens on the VIP too: the LB holds it (on lo).
    T.sh("ip", "addr", "add", f"{T.VIP}/32", "dev", "lo", ns=topo.lb)
    # metrics first: it counts every packet to the VIP exactly, in a topology where no
    # connection went through the VIP yet. (After the others it once counted a client's bare
    # RST of a connection still closing when a program was detached: topo.wait_closed().)
    table = [("metrics", metrics), ("dead_host", dead_host), ("neighbour", neighbour),
             ("neighbour_unreadable", neighbour_unreadable), ("routed", routed),
             ("cold_neighbours", cold_neighbours),
             ("maint", maint), ("stop_drain", stop_drain),
             ("stop_drain_closed", stop_drain_closed),
             ("stop_drain_ends", stop_drain_ends),
             ("stop_drain_never_ends", stop_drain_never_ends),
             ("stop_half_closed", stop_half_closed),
             ("stop_vip_unpublished", stop_vip_unpublished), ("stop_twice", stop_twice),
             ("backup", backup), ("ring_backup", ring_backup),
             ("ring_backup_taken", ring_backup_taken), ("ring_backup_locked", ring_backup_locked),
             ("ring_backup_let_go", ring_backup_let_go),
             ("ring_backup_not_grown", ring_backup_not_grown),
             ("reload_listen", reload_listen), ("sigkill", sigkill),
             ("driven_later", driven_later),
             ("worker_failed", worker_failed),
             ("upgrade_unsteered", upgrade_unsteered), ("mac_changed", mac_changed),
             ("manual_update", manual_update),
             ("update_taken_over", update_taken_over), ("lock_held", lock_held),
             ("status_unread", status_unread),
             ("other_version", other_version),
             ("flows", flows), ("maglev_sized", maglev_sized),
             ("maglev_moved", maglev_moved), ("outgrown", outgrown),
             ("outgrown_locked", outgrown_locked),
             ("too_small", too_small), ("outgrown_shared", outgrown_shared),
             ("outgrown_shared_backends", outgrown_shared_backends),
             ("grown_rebind_failed", grown_rebind_failed),
             ("slots_held", slots_held), ("removed_drains", removed_drains),
             ("removed_drains_full", removed_drains_full),
             ("two_hooks", two_hooks), ("upgrade_two_hooks", upgrade_two_hooks),
             ("prefix", prefix),
             ("altname", altname), ("two_services", two_services),
             ("grown", grown), ("grown_locked", grown_locked),
             ("upgrade_grown", upgrade_grown),
             ("upgrade_dropped", upgrade_dropped), ("upgrade_added", upgrade_added),
             ("stop_shared", stop_shared), ("stop_shared_both", stop_shared_both),
             ("shared_flows", shared_flows),
             ("shared_flows_moving", shared_flows_moving),
             ("stop_idle_flow", stop_idle_flow),
             ("iface_recreated", iface_recreated),
             ("lost_shared", lost_shared),
             ("lost_while_retried", lost_while_retried),
             ("iface_later", iface_later), ("renamed", renamed),
             ("many_backends", many_backends)]
    for name, fn in T.chosen(table):
        servers = topo.serve(PEER)
        T.sh("ip", "neigh", "flush", "dev", "eth0", ns=topo.lb)
        topo.resolve()
        try:
            scenarios.run(name, fn, topo, servers)
        finally:
            for p in servers:
                p.terminate()
                p.wait(timeout=10)


if __name__ == "__main__":
    scenarios = T.Scenarios()
    sys.exit(T.main(body, failures, scenarios))
