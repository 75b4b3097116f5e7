"""Helpers for the control plane's integration tests: hashlb run with its admin
endpoint on a port the kernel picks, read back from the log, and a client for it."""
import json
import re
import socket
import subprocess
import threading
import time

from lbtest import (HASHLB, Hashlb, check, check_format, client_ip, clients_at_once, connect,
                    json_strict, logfmt_fields, parse_prometheus, read_line, read_to_eof,
                    wait_until)


def check_answer(what, head, body):
    """The admin endpoint's answer to <what> in the format its Content-Type names: a
    Prometheus exposition (text/plain; version=0.0.4) or strict JSON."""
    ctype = re.search(rb"(?im)^content-type: *([^\r;]*)", head)
    ctype = ctype.group(1).decode().strip() if ctype else ""
    if ctype == "application/json":
        check_format(json_strict, body, what)
    elif re.search(rb"(?im)^content-type: *text/plain; *version=0\.0\.4", head):
        check_format(parse_prometheus, body, what)


def config(backends, name="t", scheme="maglev", key="src-ip", extra="", workers=2,
           health="interval: 100ms\ntimeout: 100ms\nrise: 2\nfall: 3", admin="127.0.0.1:0",
           listen="127.0.0.1:0"):
    """A one-service config with health checks on and the admin endpoint on port 0;
    <backends> is a list of (name, "host:port") or (name, "host:port", "key: value"...)."""
    lines = [f"workers: {workers}", f"admin: {admin}", "services:", f"  - name: {name}",
             f"    listen: {listen}", f"    scheme: {scheme}", f"    hash_key: {key}",
             "    health:"]
    lines += ["      " + l for l in health.strip("\n").splitlines()]
    lines += ["    " + l for l in extra.strip("\n").splitlines()] if extra else []
    lines.append("    backends:")
    for b in backends:
        lines += [f"      - name: {b[0]}", f"        address: {b[1]}"]
        lines += [f"        {kv}" for kv in b[2:]]
    return "\n".join(lines) + "\n"


def _key_column(line):
    """The column where the key of a YAML block line starts, past its indent and "- " item
    marks; None for a blank or comment line."""
    m = re.match(r"((?:\s*-\s+)*\s*)(\S)", line)
    return None if not m or m.group(2) == "#" else len(m.group(1))


def service_name(lines, i, col):
    """The name: of the block mapping that holds line <i> at key column <col> (a service's,
    for its listen: line), or None."""
    def item_start(line):  # "- " puts this line's key where the mapping's keys are
        return re.match(r"(?:\s*-\s+)*\s*", line).group(0).rstrip().endswith("-")

    j = i
    while j > 0 and not item_start(lines[j]):  # back to the line that starts the item
        k = _key_column(lines[j - 1])
        if k is not None and k < col:
            break
        j -= 1
    for k in range(j, len(lines)):
        c = _key_column(lines[k])
        if c is None:
            continue
        if k > j and (c < col or (c == col and item_start(lines[k]))):
            break
        m = re.match(r"(?:\s*-\s+)*\s*name:\s*(\S+)\s*$", lines[k])
        if m and c == col:
            return m.group(1).strip("\"'")
    return None


class Lb(Hashlb):
    """hashlb run plus its admin endpoint."""

    def __init__(self, cfg_text, **kw):
        super().__init__(cfg_text, **kw)
        end = time.time() + 10
        self.admin = None
        while time.time() < end and not self.admin:
            for line in self.log:
                if 'msg="admin listening" ' in line:
                    self.admin = logfmt_fields(line)["addr"]
            time.sleep(0.02)
        if not self.admin:
            raise SystemExit(f"no admin endpoint (hashlb's exit status: {self.proc.poll()}):\n" +
                             "\n".join(self.log))

    def admin_socket(self, timeout=10):
        """A connection to the admin endpoint (TCP or Unix)."""
        if self.admin.startswith("unix:"):
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(timeout)
            s.connect(self.admin[5:])
            return s
        host, port = self.admin.rsplit(":", 1)
        return socket.create_connection((host, int(port)), timeout=timeout)

    def raw(self, request, shut=False, timeout=10):
        """Send <request> (bytes) to the admin endpoint, shutting down writing after it if
        <shut>; everything it answers, to its close."""
        s = self.admin_socket(timeout)
        s.sendall(request)
        if shut:
            s.shutdown(socket.SHUT_WR)
        try:
            return read_to_eof(s)
        finally:
            s.close()

    def http(self, method, path, timeout=10, headers="", body=""):
        """(status, body) of one request to the admin endpoint; <headers>: extra lines,
        each ending in CRLF."""
        buf = self.raw(f"{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{headers}"
                       f"Content-Length: {len(body)}\r\n\r\n{body}".encode(), timeout=timeout)
        head, _, body = buf.partition(b"\r\n\r\n")
        status, body = int(head.split()[1]), body.decode()
        check_answer(f"{method} {path}", head, body)
        return status, body

    def rewrite(self, cfg_text):
        """Replace the config file (for a reload), each service listening on port 0 that runs
        now written with the port it got, so that the reload keeps its listener where it is
        (a service new to <cfg_text> gets a port of its own; the admin endpoint's port 0 is
        left as is). Before, only the first port-0 listen address of the text was rewritten,
        with the port the first "listening" line of the log named, whichever service's that
        was."""
        try:
            bound = {s["name"]: s["bound"] for s in self.status()["services"] if s["bound"]}
        except (OSError, AssertionError):  # no answer (stopped, frozen): as its log says
            bound = {f["service"]: f["addr"] for f in map(logfmt_fields, list(self.log))
                     if f.get("msg") == "listening"}
        lines = cfg_text.split("\n")
        for i, line in enumerate(lines):
            m = re.fullmatch(r"(\s*(?:-\s+)?)listen:(\s*)(\S+):0(\s*)", line)
            name = m and service_name(lines, i, len(m.group(1)))
            if name in bound:
                port = bound[name].rsplit(":", 1)[1]
                lines[i] = f"{m.group(1)}listen:{m.group(2)}{m.group(3)}:{port}{m.group(4)}"
        with open(self.path, "w") as f:
            f.write("\n".join(lines))

    def status(self):
        code, body = self.http("GET", "/status")
        assert code == 200, body
        return json.loads(body)

    def service(self, i=0):
        return self.status()["services"][i]

    def backend(self, name, i=0):
        for b in self.service(i)["backends"]:
            if b["name"] == name:
                return b
        return None

    def ctl(self, *args):
        """hashlb ctl --admin ADDR ARGS: (exit status, stdout, stderr)."""
        p = subprocess.run([HASHLB, "ctl", "--admin", self.admin, *args], capture_output=True,
                           text=True, errors="surrogateescape", timeout=60)
        if p.returncode == 0 and "--json" in args:
            check_format(json_strict, p.stdout, f"hashlb ctl {' '.join(args)}")
        elif p.returncode == 0 and "metrics" in args:
            check_format(parse_prometheus, p.stdout, f"hashlb ctl {' '.join(args)}")
        return p.returncode, p.stdout, p.stderr

    def reload(self, *args, timeout=10):
        """hashlb ctl ARGS reload (<args>: ctl's options, --json): (exit status, stdout,
        stderr, the lines that reload logged).
        hashlb logs a reload before it answers, but this process reads its log on another
        thread: the lines are those up to the reload's own last one ("reloaded" or "reload
        failed"), waited for, so a line not among them was not logged. Every earlier reload
        of <self> went through here (its last line read): one run with self.ctl instead
        may log its lines after this one counted them, and be taken for this one."""
        def ends(l):
            return "msg=reloaded " in l or 'msg="reload failed' in l

        def last_lines():
            return [i for i, l in enumerate(self.log) if ends(l)]

        before = len(last_lines())
        rc, so, se = self.ctl(*args, "reload")
        if self.wait(lambda: len(last_lines()) > before, timeout) is None:
            raise AssertionError(f"reload (exit status {rc}, {se!r}): no reloaded or reload "
                                 f"failed line in the log within {timeout}s")
        ends_at = last_lines()
        start = ends_at[before - 1] + 1 if before else 0
        return rc, so, se, self.log[start:ends_at[before] + 1]

    def lookup(self, clients, args=()):
        """{client: backend} from the running table (hashlb ctl lookup); <args>: more
        options (--vip ADDR:PORT)."""
        out = {}
        for i in range(0, len(clients), 400):
            rc, so, se = self.ctl("lookup", *args, *clients[i:i + 400])
            assert rc == 0, se
            for line in so.splitlines():
                f = line.split()
                out[f[0]] = f[2]
        return out

    def wait(self, cond, timeout=10, step=0.02):
        """Poll <cond>() until true; the seconds it took, or None."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            if cond():
                return time.time() - t0
            time.sleep(step)
        return None


def metric_sum(lb, name):
    """The sum of a metric's samples over all label sets (or its one unlabelled sample),
    from GET /metrics."""
    status, body = lb.http("GET", "/metrics")
    if status != 200:
        raise AssertionError(f"GET /metrics answers {status}")
    return metric_sum_text(body, name)


# A spin detector that counts, not times: the turns a second of the workers' loops at rest
# (hashlb_worker_turns_total: a tick every 100 ms, a paused accept's look every 10 ms, the few
# completions the test causes), or of the control thread's (hashlb_control_turns_total), stay
# well below this. A loop spinning on a request that ends at once (a poll, a send answering
# EAGAIN, a level-triggered descriptor it cannot serve) turns once per wake-up: tens of
# thousands a second, however loaded the machine.
REST_TURN_RATE = 400


def turn_mark(lb, loops="hashlb_worker_turns_total"):
    """Where <lb>'s workers are (or its control thread: hashlb_control_turns_total): their
    loops' turns so far, and when, for turn_rate()."""
    return metric_sum(lb, loops), time.monotonic(), loops


def turn_rate(lb, mark):
    """The turns a second of the loops <mark> is of since turn_mark() gave it, a window under
    a second counted as one: the few turns an event costs (a connection closed: 2) in the
    milliseconds that a window ended by a timer shrinks to when the machine is slow to mark it
    read as a spin (2 in 2 ms: 1,000 a second), where a real one turns millions of times a
    second, tens of thousands in 10 ms."""
    turns, t = metric_sum(lb, mark[2]), time.monotonic()
    return (turns - mark[0]) / max(t - mark[1], 1.0)


def ticks_past(lb, ticks=3, timeout=30):
    """Waits until the control plane's ticks (every 50 ms), which decide a backend's health
    from the forwarder's failures, have looked at every backend of <lb>'s services <ticks>
    more times since the call (hashlb_service_tick_visits_total): the evidence that a
    decision the counts seen before the call called for has been made, however slow the
    machine. Whether they did."""
    def visits():
        return metric_sum(lb, "hashlb_service_tick_visits_total")

    need = visits() + ticks * sum(len(s["backends"]) for s in lb.status()["services"])
    return lb.wait(lambda: visits() >= need, timeout=timeout, step=0.05) is not None


def control_ticks_past(lb, ticks=3, timeout=30):
    """Waits until the control plane has ticked (every 50 ms) <ticks> more times since the call
    (hashlb_control_ticks_total): the ticks that end drains at their deadline and let backends
    without connections go, so that what one would have done has been done, however slow the
    machine. Whether they did. It reads that family alone (GET /metrics?name[]=): a scrape
    of a service of thousands of backends does not cost each look."""
    def now():
        status, body = lb.http("GET", "/metrics?name[]=hashlb_control_ticks_total")
        if status != 200:
            raise AssertionError(f"GET /metrics answers {status}")
        return metric_sum_text(body, "hashlb_control_ticks_total")

    need = now() + ticks
    return lb.wait(lambda: now() >= need, timeout=timeout, step=0.05) is not None


def scans_past(lb, scans=2, timeout=30):
    """Waits until every worker of <lb> has walked all its connections <scans> more times
    since the call (hashlb_worker_idle_scans_total): the walks that close a connection the
    control plane closed (ctl close, close_on_down), idle or past its drain, so that one
    which would have been closed has been, however slow the machine. Whether they did."""
    def each():
        status, body = lb.http("GET", "/metrics")
        if status != 200:
            raise AssertionError(f"GET /metrics answers {status}")
        return {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1]) for l in body.splitlines()
                if l.startswith("hashlb_worker_idle_scans_total{")}

    start = each()
    if not start:
        raise AssertionError("GET /metrics has no sample of hashlb_worker_idle_scans_total")
    return lb.wait(lambda: all(v >= start[k] + scans for k, v in each().items()),
                   timeout=timeout, step=0.05) is not None


def metric_sum_text(body, name):
    """metric_sum() of an exposition already fetched."""
    total, samples = 0.0, 0
    for line in body.splitlines():
        if line.startswith((name + "{", name + " ")):
            total += float(line.rsplit(" ", 1)[1])
            samples += 1
    if samples == 0:
        # A renamed or never-exported metric must fail the check that reads it, not read as 0.
        raise AssertionError(f"GET /metrics has no sample of {name}")
    return total


def queue_of_waiting_clients(backend, services=1):
    """hashlb with one worker, <services> services of one backend each (<backend>, a (name,
    "host:port") answering its name) at its max_connections (held by the clients returned),
    and a queue: (lb, holders, n, wait_for), wait_for() connecting n clients, as many to
    each service, that wait there and returning their sockets once they all do
    (wait_for(count): count clients)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    nofile = min(hard, 20000)
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))
    # hashlb holds a descriptor per waiting client, under a cap of half its limit
    n = min(9000, nofile // 2 - 500) // services * services
    opts = "timeouts:\n  queue: 120s"
    be = (backend[0], backend[1], "max_connections: 1")
    cfg = config([be], name="s0", health="enabled: false", extra=opts, workers=1)
    for i in range(1, services):
        more = config([be], name=f"s{i}", health="enabled: false", extra=opts)
        cfg += more[more.index(f"  - name: s{i}"):]
    lb = Lb(cfg, nofile=nofile)
    listening = {logfmt_fields(l)["service"]: logfmt_fields(l)["addr"].rsplit(":", 1)
                 for l in lb.log if "msg=listening" in l}
    addrs = [(listening[f"s{i}"][0], int(listening[f"s{i}"][1])) for i in range(services)]
    holders = [connect(a, client_ip(1)) for a in addrs]
    check(all(read_line(h) == backend[0] for h in holders),
          "the first client of each within the cap")

    def wait_for(count=n):
        socks = [s for a in addrs for s in clients_at_once(a, count // services)]
        # a scrape reads /proc/self/fd, thousands of entries: not too often
        check(wait_until(lambda: metric_sum(lb, "hashlb_service_queued") == count, 60,
                         step=0.2), f"{count} clients wait")
        return socks

    return lb, holders, n, wait_for


def service_addr(lb, name):
    """The (host, port) <lb> listens on for service <name>, as it logged it."""
    fields = (logfmt_fields(l) for l in lb.log if "msg=listening" in l)
    host, port = next(f["addr"] for f in fields if f["service"] == name).rsplit(":", 1)
    return host, int(port)


QUEUE_COUNTERS = ("hashlb_worker_queue_tries_total", "hashlb_worker_queue_looks_total",
                  "hashlb_worker_queue_looks_woken_total")


def queue_counters(lb):
    """(tries, tick looks) of <lb>'s workers: hashlb_worker_queue_tries_total, and
    hashlb_worker_queue_looks_total less the looks a kick woke (a tick's look: one every
    100 ms at most, while clients wait). Those families alone (name[]): a whole scrape reads
    /proc/self/fd, thousands of entries with a queue."""
    status, body = lb.http("GET", "/metrics?" + "&".join(f"name[]={n}" for n in QUEUE_COUNTERS))
    if status != 200:
        raise AssertionError(f"GET /metrics answers {status}")
    tries, looks, woken = (metric_sum_text(body, n) for n in QUEUE_COUNTERS)
    return tries, looks - woken


def queue_ticks_past(lb, ticks, timeout=120):
    """Waits until <lb>'s workers' ticks have looked at their queues <ticks> more times since
    the call: a window counted in the worker's own looks (<ticks> tenths of a second of its
    ticks at least), not in seconds of the test's, however slow the machine. The tries then
    (hashlb_worker_queue_tries_total); None if they did not within <timeout>."""
    need = queue_counters(lb)[1] + ticks
    end = time.monotonic() + timeout
    while True:
        tries, looks = queue_counters(lb)
        if looks >= need:
            return tries
        if time.monotonic() >= end:
            return None
        time.sleep(0.2)


def queue_tries_settled(lb):
    """hashlb_worker_queue_tries_total once the walks of the queue that its clients' coming
    caused (a new service, the walk due 1 s after a change) are over: once 15 tick looks
    (1.5 s of the worker's ticks) saw none."""
    before = queue_counters(lb)[0]
    for _ in range(8):
        now = queue_ticks_past(lb, 15)
        if now is None:
            raise AssertionError("the workers' ticks look at their queues no more")
        settled, before = before, now
        if settled == before:
            break
    return before


def reset_waiting(lb, socks):
    """Reset the clients <socks> (waiting in <lb>'s queue), in that order, and wait until
    none waits any more."""
    import struct

    for s in socks:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST
    check(wait_until(lambda: metric_sum(lb, "hashlb_service_queued") == 0, 60, step=0.2),
          "every one dropped from the queue")


class FakeEndpoint:
    """A server on 127.0.0.1 that is not hashlb: <answer>(connection) on a thread of its own
    for each connection it accepts."""

    def __init__(self, answer):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(64)
        self.conns, self.threads = [], []
        self.thread = threading.Thread(target=self._serve, args=(answer,), daemon=True)
        self.thread.start()

    def _serve(self, answer):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            t = threading.Thread(target=answer, args=(c,), daemon=True)
            self.conns.append(c)
            self.threads.append(t)
            t.start()

    def close(self):
        """Its threads ended (their sockets shut down under them), then its sockets closed.
        A socket closed under a thread of it, which still wrote to it, left that thread on
        the descriptor's number, which the next test's sockets took: a ctl of
        ctl_says_a_refusal_without_a_reason read more than 1 GiB, the never-ending answer of
        ctl_bounds_an_answer_that_does_not_end, run before it (1 run in 8 of the two beside
        two busy loops)."""
        for sock in (self.srv, *self.conns):
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes an accept, a send, a recv
            except OSError:  # closed by its answer, or not connected
                pass
        for t in (self.thread, *self.threads):
            t.join(30)
            check(not t.is_alive(), "a thread of the fake endpoint ends once shut down")
        for sock in (self.srv, *self.conns):
            sock.close()


def fake_endpoint(answer):
    """A FakeEndpoint answering with <answer>(connection): (it, to close; its address,
    "127.0.0.1:PORT")."""
    e = FakeEndpoint(answer)
    return e, f"127.0.0.1:{e.srv.getsockname()[1]}"
