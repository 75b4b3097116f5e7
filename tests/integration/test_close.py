#!/usr/bin/env python3
"""Closing a backend's connections, with real processes: `hashlb ctl close BACKEND` closes
exactly that backend's established connections (the others keep echoing), counts and logs
them, and leaves the backend serving new clients; health.close_on_down closes a backend's
connections when its checks take it down, and its clients reconnect to their next backend,
while without it (the default) they stay open; a backup's close_on_return closes its
connections when the primary is back. Each is also counted under its end
(hashlb_backend_connection_ends_total, /status "ends")."""
import re
import socket
import time

from ctltest import Lb, config, control_ticks_past, metric_sum, scans_past
from lbtest import (Backend, check, client_ip, connect, clients_at_once, read_line, run_tests, serve_each,
                    wait_until)

HEALTH = "interval: 100ms\ntimeout: 100ms\nrise: 2\nfall: 3"


def echo_ok(s):
    """Whether connection <s> still forwards both ways: a byte out, the same byte back."""
    try:
        s.sendall(b"?")
        return s.recv(1) == b"?"
    except OSError:
        return False


def ended(s, timeout=5):
    """Whether <s> ends (EOF or reset) within <timeout> s, sending nothing meanwhile."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:  # reset
        return True


def open_clients(lb, n, first=0):
    """<n> connections from distinct client addresses, each past its greeting:
    [(client, backend, socket)]."""
    out = []
    for i in range(first, first + n):
        c = client_ip(i * 7919)
        s = connect(lb.addr, c)
        out.append((c, read_line(s), s))
    return out


def closed_metric(lb, backend, reason):
    status, body = lb.http("GET", "/metrics")
    m = re.search(r'^hashlb_backend_closed_connections_total\{service="t",backend="%s",'
                  r'reason="%s"\} (\S+)$' % (backend, reason), body, re.M)
    return float(m.group(1)) if m else None


def ends_metric(lb, backend, end):
    status, body = lb.http("GET", "/metrics")
    m = re.search(r'^hashlb_backend_connection_ends_total\{service="t",backend="%s",'
                  r'end="%s"\} (\S+)$' % (backend, end), body, re.M)
    return float(m.group(1)) if m else None


def ctl_close():
    """hashlb ctl close b: b's connections end, a's and c's keep forwarding; the answer says
    how many; they are counted (reason admin) and logged end=closed; b keeps its state and
    its clients reconnect to it; a connection made after the close stays."""
    bs = [Backend(n) for n in "abc"]
    lb = Lb(config([(b.name, b.addr) for b in bs], extra="log_connections: true", health=HEALTH))
    conns = open_clients(lb, 60)
    on_b = [x for x in conns if x[1] == "b"]
    others = [x for x in conns if x[1] != "b"]
    check(len(on_b) >= 5 and len(others) >= 10, f"clients spread: {len(on_b)} on b")
    check(all(echo_ok(s) for _, _, s in conns), "every connection forwards before")
    check(lb.wait(lambda: lb.backend("b")["active"] == len(on_b)),
          "b's connections are established")

    rc, out, err = lb.ctl("close", "b")
    t0 = time.time()
    check(rc == 0 and f"closing its {len(on_b)} established" in out,
          f"ctl close answers with the count: rc={rc} {out!r} {err!r}")
    gone = [ended(s) for _, _, s in on_b]
    print(f"    {sum(gone)} of {len(on_b)} connections of b ended within "
          f"{time.time() - t0:.2f} s")
    check(all(gone), f"every connection of b ended: {gone}")
    check(all(echo_ok(s) for _, _, s in others), "the connections of a and c still forward")
    check(lb.wait(lambda: closed_metric(lb, "b", "admin") == len(on_b)),
          f"counted under reason admin: {closed_metric(lb, 'b', 'admin')}")
    check(closed_metric(lb, "a", "admin") == 0 and closed_metric(lb, "b", "down") == 0,
          "nothing counted for a, nor as down")
    check(lb.wait(lambda: sum(bool(re.search(r"msg=connection .*backend=b .*end=closed", l))
                              for l in lb.log) == len(on_b)),
          "one line end=closed per connection of b")
    check(any(re.search(r'msg="closing a backend\'s connections" service=t backend=b '
                        rf"address={re.escape(bs[1].addr)} established={len(on_b)} by=admin", l)
              for l in lb.log),
          "the close itself is logged")
    b = lb.backend("b")
    check(b["state"] == "ready" and b["in_table"], f"b keeps its state: {b['state']}")
    check(b["closed"] == {"admin": len(on_b), "down": 0, "backup": 0},
          f"/status counts them: {b['closed']}")

    # b's clients come back to b, and those new connections are not closed.
    again = [(c, connect(lb.addr, c)) for c, _, _ in on_b]
    check(all(read_line(s) == "b" for _, s in again), "b's clients reconnect to b")
    check(scans_past(lb), "every worker walked its connections since")
    check(all(echo_ok(s) for _, s in again), "connections made after the close stay")
    # one connection is said as one (it was "closing its 1 established connections")
    for _, s in again[1:]:
        s.close()
    check(lb.wait(lambda: lb.backend("b")["active"] == 1), "one connection left on b")
    rc, out, err = lb.ctl("close", "b")
    check(rc == 0 and out == "t/b: closing its 1 established connection (and those "
          "connecting); its state (ready) is unchanged\n", f"ctl close b: {out!r} {err!r}")

    rc, out, err = lb.ctl("close", "nosuch")
    check(rc == 1 and "no backend 'nosuch'" in (out + err), f"an unknown backend: {rc} {err!r}")
    status, body = lb.http("GET", "/close?backend=b")
    check(status == 405, f"GET /close is refused: {status}")
    for _, _, s in conns:
        s.close()
    for _, s in again:
        s.close()
    check(lb.stop() == 0, "exit 0")
    for b in bs:
        b.stop()


class Steady:
    """A backend that greets with its name and echoes; .stop_listening() closes its listening
    socket (health checks are then refused) while its established connections go on."""

    def __init__(self, name):
        self.name = name
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.addr = "127.0.0.1:%d" % self.srv.getsockname()[1]
        self._stop = serve_each(self.srv, self._one)

    def stop_listening(self):
        self._stop(hold=True)  # refused from then on, its port given to no other test

    def _one(self, c):
        with c:
            try:
                c.sendall(self.name.encode() + b"\n")
                while True:
                    d = c.recv(65536)
                    if not d:
                        return
                    c.sendall(d)
            except OSError:
                pass


def down_closes(close_on_down):
    x, y = Steady("x"), Backend("y")
    health = HEALTH + ("\nclose_on_down: true" if close_on_down else "")
    lb = Lb(config([("x", x.addr), ("y", y.addr)], extra="log_connections: true",
                   health=health))
    conns = open_clients(lb, 40)
    on_x = [t for t in conns if t[1] == "x"]
    on_y = [t for t in conns if t[1] == "y"]
    check(len(on_x) >= 5 and len(on_y) >= 5, f"clients spread: {len(on_x)} on x")
    check(all(echo_ok(s) for _, _, s in conns), "every connection forwards before")

    x.stop_listening()
    check(lb.wait(lambda: not lb.backend("x")["in_table"], timeout=10), "x goes down")
    if close_on_down:
        t0 = time.time()
        gone = [ended(s) for _, _, s in on_x]
        print(f"    {sum(gone)} of {len(on_x)} connections of x ended within "
              f"{time.time() - t0:.2f} s of the table without x")
        check(all(gone), f"every connection of the down x ended: {gone}")
        check(lb.wait(lambda: closed_metric(lb, "x", "down") == len(on_x)),
              f"counted under reason down: {closed_metric(lb, 'x', 'down')}")
        check(lb.wait(lambda: sum(bool(re.search(r"msg=connection .*backend=x .*"
                                                 r"end=backend_down", l))
                                  for l in lb.log) == len(on_x)),
              "one line end=backend_down per connection of x")
        check(lb.backend("x")["closed"]["down"] == len(on_x), "/status counts them")
        check(ends_metric(lb, "x", "backend_down") == len(on_x) and
              lb.backend("x")["ends"]["backend_down"] == len(on_x),
              f"and as ends backend_down: {ends_metric(lb, 'x', 'backend_down')}")
        back = [read_line(connect(lb.addr, c)) for c, _, _ in on_x]
        check(all(b == "y" for b in back), f"x's clients reconnect to y: {back}")
    else:
        check(scans_past(lb), "every worker walked its connections since x went down")
        check(all(echo_ok(s) for _, _, s in on_x),
              "without close_on_down, x's established connections stay and forward")
        check(closed_metric(lb, "x", "down") == 0, "nothing counted as closed")
    check(all(echo_ok(s) for _, _, s in on_y), "y's connections still forward")
    for _, _, s in conns:
        s.close()
    check(lb.stop() == 0, "exit 0")
    y.stop()


def close_on_down():
    """health.close_on_down: true: when the checks take x down (its port closed, its
    established connections still served), hashlb closes x's connections, counts and logs
    them, and their clients reconnect to y; y's connections stay."""
    down_closes(True)


def down_keeps_by_default():
    """Without close_on_down, a backend marked down keeps its established connections, which
    go on forwarding: the default does not cut what still works."""
    down_closes(False)


def backup_close_on_return():
    """Two backups, one with close_on_return: while the primary is down the clients are on
    the backups; when it is back up, the connections of the close_on_return backup are
    closed (end=primary_up, counted as backup) and their clients reconnect to the primary,
    while the other backup keeps its connections."""
    p = Backend("p")
    d1, d2 = Backend("d1"), Backend("d2")
    lb = Lb(config([("p", p.addr), ("d1", d1.addr, "backup: true", "close_on_return: true"),
                    ("d2", d2.addr, "backup: true")],
                   extra="log_connections: true", health=HEALTH))
    check(lb.wait(lambda: lb.backend("p")["in_table"] and not lb.backend("d1")["in_table"]),
          "the primary serves, the backups wait")
    p.stop()
    check(lb.wait(lambda: lb.backend("d1")["in_table"] and lb.backend("d2")["in_table"]),
          "the primary down: the backups take over")
    conns = open_clients(lb, 40)
    on_d1 = [t for t in conns if t[1] == "d1"]
    on_d2 = [t for t in conns if t[1] == "d2"]
    check(len(on_d1) >= 5 and len(on_d2) >= 5 and len(on_d1) + len(on_d2) == len(conns),
          f"clients on the backups: {len(on_d1)} on d1, {len(on_d2)} on d2")

    p = Backend("p", int(p.addr.rsplit(":", 1)[1]))
    check(lb.wait(lambda: lb.backend("p")["in_table"] and not lb.backend("d1")["in_table"]),
          "the primary back: the backups leave the table")
    gone = [ended(s) for _, _, s in on_d1]
    check(all(gone), f"every connection of d1 (close_on_return) ended: {gone}")
    check(all(echo_ok(s) for _, _, s in on_d2), "d2's connections (no close_on_return) stay")
    check(lb.wait(lambda: closed_metric(lb, "d1", "backup") == len(on_d1)),
          f"counted under reason backup: {closed_metric(lb, 'd1', 'backup')}")
    check(closed_metric(lb, "d2", "backup") == 0, "nothing counted for d2")
    check(ends_metric(lb, "d1", "primary_up") == len(on_d1) and
          lb.backend("d1")["ends"]["primary_up"] == len(on_d1) and
          ends_metric(lb, "d2", "primary_up") == 0,
          f"and as ends primary_up: {ends_metric(lb, 'd1', 'primary_up')}")
    check(lb.wait(lambda: sum(bool(re.search(r"msg=connection .*backend=d1 .*end=primary_up", l))
                              for l in lb.log) == len(on_d1)),
          "one line end=primary_up per connection of d1")
    back = [read_line(connect(lb.addr, c)) for c, _, _ in on_d1]
    check(all(b == "p" for b in back), f"d1's clients reconnect to the primary: {back}")
    check(lb.backend("d1")["close_on_return"] and not lb.backend("d2")["close_on_return"],
          "/status shows close_on_return")
    for _, _, s in conns:
        s.close()
    check(lb.stop() == 0, "exit 0")
    for b in (p, d1, d2):
        b.stop()


def close_draining():
    """A reload moves b to a new address and removes c, both draining (timeouts.drain 60s):
    hashlb ctl close c closes the removed c's connections; hashlb ctl close b those of b's
    old address and of its new one; a's connections stay."""
    a, b_old, b_new, c = Backend("a"), Backend("b"), Backend("b-new"), Backend("c")
    drain = "timeouts: {drain: 60s}"
    lb = Lb(config([("a", a.addr), ("b", b_old.addr), ("c", c.addr)], extra=drain,
                   health=HEALTH))
    conns = open_clients(lb, 60)
    by = {n: [t for t in conns if t[1] == n] for n in ("a", "b", "c")}
    check(all(len(v) >= 5 for v in by.values()), f"clients spread: { {k: len(v) for k, v in by.items()} }")
    lb.rewrite(config([("a", a.addr), ("b", b_new.addr)], extra=drain, health=HEALTH))
    rc, so, se = lb.ctl("reload")
    check(rc == 0, f"reload: {se}")
    check(sorted(d["name"] for d in lb.service()["draining"]) == ["b", "c"],
          f"b's old address and c drain: {lb.service()['draining']}")
    moved = [(cl, connect(lb.addr, cl)) for cl, _, _ in by["b"]]
    check(all(read_line(s) == "b-new" for _, s in moved), "b's clients reach its new address")
    check(all(echo_ok(s) for _, _, s in conns), "every connection from before still forwards")

    rc, so, se = lb.ctl("close", "c")
    check(rc == 0 and so.startswith(f"t/c: removed by a reload, closing the {len(by['c'])} "
                                    "established connections of its draining"),
          f"close of a removed backend: {rc} {so!r} {se!r}")
    check(all(ended(s) for _, _, s in by["c"]), "the removed c's connections ended")
    rc, so, se = lb.ctl("close", "b")
    check(rc == 0 and f"closing its {len(moved)} established" in so and
          f"closing the {len(by['b'])} established connections of its draining" in so,
          f"close of a moved backend: {rc} {so!r} {se!r}")
    check(all(ended(s) for _, _, s in by["b"]), "the connections to b's old address ended")
    check(all(ended(s) for _, s in moved), "the connections to b's new address ended")
    # a line each, told apart by the address and removed=1 (before: the same
    # "service=t backend=b established=N by=admin" twice, only N differing)
    lines = [l for l in lb.log if "msg=\"closing a backend's connections\" service=t backend=b " in l]
    check(len(lines) == 2 and
          any(l.endswith(f" backend=b address={b_new.addr} established={len(moved)} by=admin")
              for l in lines) and
          any(l.endswith(f" backend=b address={b_old.addr} removed=1 "
                         f"established={len(by['b'])} by=admin") for l in lines),
          f"the close of b's two addresses: a line each, which is which said: {lines}")
    check(all(echo_ok(s) for _, _, s in by["a"]), "a's connections still forward")
    for _, _, s in conns:
        s.close()
    for _, s in moved:
        s.close()
    check(lb.stop() == 0, "exit 0")
    for x in (a, b_old, b_new, c):
        x.stop()


def removed_backend_counts_outlive_its_drain():
    """hashlb ctl close of a backend a reload removed: its closes are counted (reason admin) in
    its draining series, and that series stays after its last connection closed, long enough
    for a scrape to read them and the bytes its connections forwarded since the last one.
    Before, the series went with the backend at the pool's next tick (50 ms), and with it
    every count since the last scrape: no scrape saw the closes."""
    a, c = Backend("a"), Backend("c")
    lb = Lb(config([("a", a.addr), ("c", c.addr)], extra="timeouts: {drain: 60s}",
                   health=HEALTH))
    conns = open_clients(lb, 30)
    on_c = [s for _, n, s in conns if n == "c"]
    check(len(on_c) >= 3, f"clients spread: {len(on_c)} on c")
    lb.rewrite(config([("a", a.addr)], extra="timeouts: {drain: 60s}", health=HEALTH))
    check(lb.ctl("reload")[0] == 0, "c removed by a reload")
    check(all(echo_ok(s) for s in on_c), "c's connections forward while it drains")
    rc, so, se = lb.ctl("close", "c")
    check(rc == 0 and f"closing the {len(on_c)} established" in so, f"ctl close c: {so!r} {se!r}")
    check(all(ended(s) for s in on_c), "the removed c's connections ended")
    check(lb.wait(lambda: not lb.service()["draining"]) is not None,
          "c drains no more: /status lists it no longer")
    # several of the pool's ticks since, each of which could drop the series
    check(control_ticks_past(lb), "the control plane ticked since")
    status, body = lb.http("GET", "/metrics")

    def c_sample(name, extra=""):
        m = re.search(r'^%s\{service="t",backend="c",draining="%s"%s\} (\S+)$'
                      % (name, re.escape(c.addr), extra), body, re.M)
        return float(m.group(1)) if m else None

    n = len(on_c)
    got = (c_sample("hashlb_backend_closed_connections_total", ',reason="admin"'),
           c_sample("hashlb_backend_sent_bytes_total"),
           c_sample("hashlb_backend_received_bytes_total"))
    check(got == (n, n, 3 * n),
          f"c's draining series, after its drain: {n} closed (admin), {n} bytes sent and "
          f"{3 * n} received (greeting and echo): {got}")
    gauges = (c_sample("hashlb_backend_active_connections"), c_sample("hashlb_backend_healthy"))
    check(gauges == (None, None), f"but not its gauges (a last health verdict would keep an "
          f"alert firing): {gauges}")
    check(metric_sum(lb, "hashlb_service_draining_backends") == 0,
          "hashlb_service_draining_backends counts c no more")
    for _, _, s in conns:
        s.close()
    check(lb.stop() == 0, "exit 0")
    a.stop()
    c.stop()


def closing_many_at_once():
    """ctl close of a backend holding thousands of connections on one worker costs each its
    own: every one is closed, its requests cancelled by what they are, not by descriptor
    (hashlb_worker_cancels_by_fd_total: none). Each close cancelled its connection's
    requests by descriptor, which the kernel matches against every request of the worker:
    3,000 connections took 1.3 CPU seconds (the worker stalled meanwhile), a drain's
    deadline over 7,000 on two workers 3.2; with that again, 6,000 cancels by descriptor."""
    import resource
    n = 3000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 1000), hard))
    a = Backend("a")
    lb = Lb(config([("a", a.addr)], workers=1, health="enabled: false"))
    socks = clients_at_once(lb.addr, n)
    check(wait_until(lambda: metric_sum(lb, "hashlb_service_active_connections") == n, 60),
          f"{n} connections established")
    rc, out, err = lb.ctl("close", "a")
    check(rc == 0, f"ctl close: {err}")
    check(wait_until(lambda: metric_sum(lb, "hashlb_service_active_connections") == 0, 60),
          "every connection closed")
    by_fd = metric_sum(lb, "hashlb_worker_cancels_by_fd_total")
    print(f"    {n} connections closed: {by_fd:.0f} cancels by descriptor")
    check(by_fd == 0, f"{n} closes sent {by_fd:.0f} cancels by descriptor")
    for s in socks:
        s.close()
    check(lb.stop() == 0, "hashlb exits 0")
    a.stop()


run_tests([ctl_close, close_on_down, down_keeps_by_default, backup_close_on_return,
           close_draining, removed_backend_counts_outlive_its_drain, closing_many_at_once])
