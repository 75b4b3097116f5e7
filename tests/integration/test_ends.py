#!/usr/bin/env python3
"""hashlb_backend_connection_ends_total{end=...}: every connection established to a backend is
counted once when it ends, under the end its connection log line names (done, client_reset,
backend_reset, idle_timeout, closed, drain_timeout; backend_down and primary_up in
test_close.py), so that the counter moves by exactly the connections that ended so, and the
log and the metric agree; /status carries the same counts per backend. The ends before a
backend is reached (no_backend, connect_failed, denied, client_limit, queue_timeout,
bad_header) move their service counter by exactly as many, as their log lines say."""
import re
import socket
import struct
from collections import Counter

from ctltest import Lb, config, control_ticks_past, metric_sum, scans_past, service_addr
from lbtest import check, client_ip, connect, dead_port, run_tests, serve_each

NO_HEALTH = "enabled: false"
ENDS = ("done", "client_reset", "backend_reset", "idle_timeout", "error", "drain_timeout",
        "closed", "backend_down", "primary_up")
LINGER0 = struct.pack("ii", 1, 0)
PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


class Server:
    """A backend that greets with its name, echoes, closes (FIN) after the client's FIN, and
    resets the connection (SO_LINGER 0) when it receives a "!"."""

    def __init__(self, name):
        self.name = name
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(128)
        self.addr = "127.0.0.1:%d" % self.srv.getsockname()[1]
        self.stop = serve_each(self.srv, self.handle)

    def handle(self, c):
        try:
            c.sendall(self.name.encode() + b"\n")
            while True:
                d = c.recv(4096)
                if not d:
                    break
                if b"!" in d:
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER0)
                    break
                c.sendall(d)
        except OSError:
            pass
        c.close()


def greeted(lb, i):
    """A client connection to service t (client address i) past its backend's greeting."""
    s = connect(service_addr(lb, "t"), client_ip(i))
    buf = b""
    while not buf.endswith(b"\n"):
        d = s.recv(1)
        if not check(d, "a greeting"):
            break  # an end: recv() returns b"" from now on, a loop without end
        buf += d
    return s, buf.decode().strip()


def ended(s, timeout=10):
    """Wait for <s> to end (EOF or reset), sending nothing."""
    s.settimeout(timeout)
    try:
        while s.recv(4096):
            pass
    except socket.timeout:
        return False
    except OSError:
        pass
    return True


def metric_ends(lb, backend):
    """{end: value} of <backend>'s hashlb_backend_connection_ends_total (its draining series
    too, summed), from /metrics; {} if the family has no such series."""
    status, body = lb.http("GET", "/metrics")
    check(status == 200, "GET /metrics")
    out = Counter()
    for m in re.finditer(r'^hashlb_backend_connection_ends_total\{service="t",backend="%s"'
                         r'(?:,draining="[^"]*")?,end="(\w+)"\} (\S+)$' % backend, body, re.M):
        out[m.group(1)] += int(float(m.group(2)))
    return out


def log_ends(lb, backend):
    """Counter of end= over <backend>'s connection log lines so far."""
    ends = Counter()
    for l in list(lb.log):
        if " msg=connection " in l:
            f = dict((k, v.strip('"')) for k, v in PAIR.findall(l))
            if f.get("backend") == backend:
                ends[f["end"]] += 1
    return ends


class Paced:
    """A second service, "pacer", whose connections end idle after 400 ms: a worker that has
    had one walks its connections every 100 ms from then on (a quarter of the shortest idle
    timeout it has seen: worker.c), not every second, so that settled()'s two walks a check
    take 0.2 s, not 2 (the file took 22 s, 18 of them waiting for walks). The same walks,
    sooner: nothing of service t changes (its own idle timeout, its counters, its log)."""

    def __init__(self):
        self.server = Server("p")

    def config(self, cfg):
        """<cfg> (service t's) with the pacer after it."""
        return cfg + ("  - name: pacer\n    listen: 127.0.0.1:0\n    health: {enabled: false}\n"
                      "    timeouts: {idle: 400ms}\n    backends:\n"
                      f"      - {{name: p, address: {self.server.addr}}}\n")

    def start(self, cfg):
        """An Lb of <cfg> and the pacer, 8 of whose connections (each from its own address,
        spread over the workers) have ended idle."""
        lb = Lb(self.config(cfg))
        socks = [connect(service_addr(lb, "pacer"), client_ip((8 << 8) + i)) for i in range(8)]
        check(all(ended(s) for s in socks), "the pacer's connections end idle")
        for s in socks:
            s.close()
        return lb

    def stop(self):
        self.server.stop()


def moved(before, after):
    return {k: after[k] - before[k] for k in set(before) | set(after) if after[k] != before[k]}


def settled(lb, what):
    """Once the counts match: every worker's walks of its connections and the control plane's
    ticks (what ends connections besides their own traffic) past it, so that an end counted
    again, or one more connection ended, after the counts first matched shows in them, however
    slow the machine. Before, such an end went unseen."""
    check(scans_past(lb) and control_ticks_past(lb), f"{what}: walks and ticks past the match")


def expect(lb, backend, before_m, before_l, want, what):
    """Wait until <backend>'s metric moved from <before_m> by exactly <want> ({end: n}), then
    past that (settled()) check that it still has, that its log lines moved the same, and
    that /status agrees."""
    got = {}

    def done():
        nonlocal got
        got = moved(before_m, metric_ends(lb, backend))
        return got == want and moved(before_l, log_ends(lb, backend)) == want

    if lb.wait(done) is not None:
        settled(lb, what)
        done()
    check(got == want, f"{what}: the metric moved by {want}: {got}")
    lg = moved(before_l, log_ends(lb, backend))
    check(lg == want, f"{what}: the log's end= agree: {lg}")
    m = metric_ends(lb, backend)
    b = lb.backend(backend)
    if b is not None:  # a removed backend is under "draining"
        check(b["ends"] == {k: m[k] for k in ENDS}, f"/status ends agree: {b['ends']} {m}")


def step(lb, backend, want, what, act):
    m, lg = metric_ends(lb, backend), log_ends(lb, backend)
    act()
    expect(lb, backend, m, lg, want, what)


def held_step(lb, n, end, what, trigger):
    """<n> connections to x, held quiet until <trigger>() (or nothing) ends them as <end>."""
    held = []

    def act():
        held.extend(greeted(lb, i)[0] for i in range(n))
        trigger()
        check(all(ended(s) for s in held), f"{what}: x's connections end")

    step(lb, "x", {end: n}, what, act)
    for s in held:
        s.close()


def each_end():
    """One backend x: connections ended by both FINs, by the client's reset, by the backend's
    reset, by hashlb ctl close, and by a reload that removes x (timeouts.drain 300ms): each
    kind moves its own end by exactly its count, as the log says."""
    x, y, pacer = Server("x"), Server("y"), Paced()
    extra = "log_connections: true\ntimeouts: {drain: 300ms}"
    lb = pacer.start(config([("x", x.addr)], health=NO_HEALTH, extra=extra))
    before = metric_ends(lb, "x")
    check(sorted(before) == sorted(ENDS) and not any(before.values()),
          f"one series per end, all 0: {dict(before)}")

    def each(n, end_it):
        """<n> connections, each ended by <end_it>(socket) once past its greeting."""
        def act():
            for i in range(n):
                s, _ = greeted(lb, i)
                end_it(s)
                s.close()
        return act

    def fin(s):
        s.sendall(b"hi")
        check(s.recv(2) == b"hi", "echo")
        s.shutdown(socket.SHUT_WR)
        check(ended(s), "hashlb forwards the backend's FIN")

    def backend_reset(s):
        s.sendall(b"!")
        check(ended(s), "the backend's reset reaches the client")

    step(lb, "x", {"done": 3}, "client and backend FIN", each(3, fin))
    step(lb, "x", {"client_reset": 4}, "client reset",
         each(4, lambda s: s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER0)))
    step(lb, "x", {"backend_reset": 2}, "backend reset", each(2, backend_reset))

    def ctl_close():
        rc, so, se = lb.ctl("close", "x")
        check(rc == 0, f"ctl close x: {so!r} {se!r}")

    held_step(lb, 5, "closed", "hashlb ctl close", ctl_close)
    status, body = lb.http("GET", "/metrics")
    check(re.search(r'^hashlb_backend_closed_connections_total\{service="t",backend="x",'
                    r'reason="admin"\} 5$', body, re.M),
          "hashlb_backend_closed_connections_total{reason=admin} still counts them")

    def remove():
        lb.rewrite(pacer.config(config([("y", y.addr)], health=NO_HEALTH, extra=extra)))
        rc, so, se = lb.ctl("reload")
        check(rc == 0, f"reload: {se}")

    held_step(lb, 3, "drain_timeout", "removed by a reload, past its drain", remove)
    check(lb.stop() == 0, "exit 0")
    x.stop()
    y.stop()
    pacer.stop()


def idle():
    """timeouts.idle: n connections left quiet end idle_timeout, counted as many times."""
    x = Server("x")
    lb = Lb(config([("x", x.addr)], health=NO_HEALTH,
                   extra="log_connections: true\ntimeouts: {idle: 300ms}"))
    held_step(lb, 4, "idle_timeout", "left quiet past timeouts.idle", lambda: None)
    check(lb.stop() == 0, "exit 0")
    x.stop()


SVC = {"no_backend": "hashlb_service_no_backend_total",
       "connect_failed": "hashlb_service_no_backend_total",
       "denied": "hashlb_service_denied_total",
       "client_limit": "hashlb_service_client_limited_total",
       "queue_timeout": "hashlb_service_queue_timeouts_total",
       "bad_header": "hashlb_service_bad_headers_total"}


def unserved(lb, want, what, act):
    """<act>() ends connections before a backend: the service counters move by <want>
    ({end: n}, no_backend and connect_failed sharing one), as do the log lines with
    backend=-, still past the match (settled()), and no backend's ends move."""
    def svc():
        return {m: int(metric_sum(lb, m)) for m in set(SVC.values())}

    def log():
        return log_ends(lb, "-")

    m0, l0, b0 = svc(), log(), metric_ends(lb, "x")
    act()
    want_svc = Counter()
    for k, n in want.items():
        want_svc[SVC[k]] += n
    got = {}

    def done():
        nonlocal got
        got = moved(m0, svc())
        return got == dict(want_svc) and moved(l0, log()) == want

    if lb.wait(done) is not None:
        settled(lb, what)
        done()
    check(got == dict(want_svc), f"{what}: the service counters moved by {dict(want_svc)}: {got}")
    lg = moved(l0, log())
    check(lg == want, f"{what}: the log's end= agree: {lg}")
    check(metric_ends(lb, "x") == b0, f"{what}: no backend end counted")


def refused(lb, i, payload=b""):
    """A client (address i) that sends <payload> and is closed without a backend."""
    s = connect(service_addr(lb, "t"), client_ip(i))
    if payload:
        try:
            s.sendall(payload)
        except OSError:
            pass
    check(ended(s), "closed without a backend")
    s.close()


def unserved_ends():
    """Each end before a backend, n times: its service counter moves by n, as the log says."""
    x, pacer = Server("x"), Paced()
    lb = pacer.start(config([("x", x.addr, "max_connections: 1")], health=NO_HEALTH,
                            extra="log_connections: true\nmax_connections_per_client: 1\n"
                                  "deny_clients: [127.0.9.0/24]"))
    unserved(lb, {"denied": 3}, "deny_clients",
             lambda: [refused(lb, (9 << 8) + i - 1) for i in range(1, 4)])
    held, _ = greeted(lb, 1)
    unserved(lb, {"client_limit": 2}, "max_connections_per_client",
             lambda: [refused(lb, 1) for _ in range(2)])
    unserved(lb, {"no_backend": 2}, "its one backend full, no queue",
             lambda: [refused(lb, i) for i in (2, 3)])
    held.close()
    check(lb.stop() == 0, "exit 0")

    lb = pacer.start(config([("x", x.addr, "max_connections: 1")], health=NO_HEALTH,
                            extra="log_connections: true\ntimeouts: {queue: 200ms}"))
    held, _ = greeted(lb, 1)
    unserved(lb, {"queue_timeout": 2}, "timeouts.queue",
             lambda: [refused(lb, i) for i in (2, 3)])
    held.close()
    check(lb.stop() == 0, "exit 0")

    lb = pacer.start(config([("x", "127.0.0.1:%d" % dead_port())], health=NO_HEALTH,
                            extra="log_connections: true\naccept_proxy: true\n"
                                  "connect_retries: 0"))
    unserved(lb, {"bad_header": 2}, "accept_proxy, no header",
             lambda: [refused(lb, i, b"GET / HTTP/1.0\r\n\r\n") for i in (1, 2)])
    unserved(lb, {"connect_failed": 3}, "its backend refuses",
             lambda: [refused(lb, i, b"PROXY TCP4 10.0.0.%d 127.0.0.1 1234 80\r\n" % i)
                      for i in (1, 2, 3)])
    check(lb.stop() == 0, "exit 0")
    x.stop()
    pacer.stop()


if __name__ == "__main__":
    run_tests([each_end, idle, unserved_ends])
