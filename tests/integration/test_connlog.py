#!/usr/bin/env python3
"""log_connections: each connection of the service writes exactly one log line when it ends,
naming its client (for accept_proxy: the one its PROXY header names), the backend `hashlb lookup`
gives for that client, the connect attempts, the exact bytes forwarded each way (spliced ones
included) and why it ended (done, connect_failed, no_backend, idle_timeout, bad_header,
drain_timeout); a reload turns it on for new connections; off, no connection is logged."""
import fcntl
import os
import pty
import re
import select
import signal
import socket
import struct
import termios
import subprocess
import threading
import time
import tty

from ctltest import Lb, config, metric_sum, metric_sum_text
from lbtest import (HASHLB, Backend, Skip, check, client_ip, connect, connect_outcome, dead_port, frozen,
                    lookup, outcome, read_line, read_to_eof, run_tests, serve_each, spawn, stop,
                    syn_sent, tmpfile, wait_until)

PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
NO_HEALTH = "enabled: false"


def conn_lines(lb):
    """The connection lines of <lb>'s log so far, each as a dict."""
    return [dict((k, v.strip('"')) for k, v in PAIR.findall(l))
            for l in list(lb.log) if " msg=connection " in l]


def wait_lines(lb, n, timeout=10):
    """The connection lines once there are at least <n> (what there is after <timeout>)."""
    lb.wait(lambda: len(conn_lines(lb)) >= n, timeout)
    return conn_lines(lb)


def exchange(addr, src, payload):
    """Send <payload> from <src>, then FIN; everything received until hashlb's FIN, and the
    client's "ip:port". Sends from a thread so a large payload cannot deadlock on the echo."""
    s = connect(addr, src, timeout=30)
    me = "%s:%d" % s.getsockname()[:2]

    def send():
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=send)
    t.start()
    got = read_to_eof(s)
    t.join()
    s.close()
    return got, me


def finish(lb):
    """Stop <lb>: a clean exit, and no sanitizer report (the ASan build runs this test too)."""
    rc = lb.stop()
    check(rc == 0, f"hashlb exited 0 (got {rc})")
    bad = [l for l in lb.log_to_end() if "Sanitizer" in l or "runtime error" in l]
    check(not bad, f"no sanitizer report: {bad[:3]}")


def one_line_per_client():
    """Several clients, one of them with 8 MiB each way (splice): each has exactly one line,
    with its backend as hashlb lookup says and its exact byte counts, end=done."""
    backends = [Backend(n) for n in ("a", "b", "c")]
    cfg = config([(b.name, b.addr) for b in backends], health=NO_HEALTH,
                 extra="log_connections: true")
    lb = Lb(cfg)
    clients = [client_ip(i) for i in range(1, 7)]
    want = lookup(lb.path, clients)
    payloads = [b"x" * (100 * i + 1) for i in range(len(clients))]
    payloads[3] = bytes(range(256)) * (8 * 4096)  # 8 MiB: moves to splice after 256 KiB
    seen = {}
    for src, payload in zip(clients, payloads):
        got, me = exchange(lb.addr, src, payload)
        name = got.split(b"\n", 1)[0].decode()
        check(got == name.encode() + b"\n" + payload, f"{src}: echoed intact")
        seen[me] = (src, name, len(payload), len(got))
    check(metric_sum(lb, "hashlb_backend_spliced_bytes_total") > 0,
          "the 8 MiB transfer went through splice")
    lines = wait_lines(lb, len(clients))
    check(len(lines) == len(clients), f"{len(clients)} connection lines, got {len(lines)}")
    for me, (src, name, sent, received) in seen.items():
        mine = [l for l in lines if l.get("client") == me]
        if not check(len(mine) == 1, f"exactly one line with client={me}, got {len(mine)}"):
            continue
        l = mine[0]
        addr = {b.name: b.addr for b in backends}[name]
        check(l.get("service") == "t", f"{me}: service=t ({l})")
        check(l.get("backend") == want[src][0] == name,
              f"{me}: backend={l.get('backend')}, hashlb lookup says {want[src][0]}, served by {name}")
        check(l.get("backend_addr") == addr, f"{me}: backend_addr={l.get('backend_addr')} ({addr})")
        check(l.get("attempts") == "1", f"{me}: attempts=1 ({l})")
        check(l.get("bytes_in") == str(sent), f"{me}: bytes_in={l.get('bytes_in')}, sent {sent}")
        check(l.get("bytes_out") == str(received),
              f"{me}: bytes_out={l.get('bytes_out')}, received {received}")
        check(l.get("end") == "done", f"{me}: end=done ({l})")
        check(l.get("duration_ms", "").isdigit(), f"{me}: duration_ms is a number ({l})")
        check(re.fullmatch(r"\d+\.\d{3}", l.get("connect_ms", "")) and
              float(l["connect_ms"]) <= float(l["duration_ms"]) + 1,
              f"{me}: connect_ms, in ms to the microsecond, within the duration ({l})")
        check(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", l.get("ts", "")),
              f"{me}: ts in the daemon's format ({l})")
        check(l.get("level") == "info", f"{me}: level=info")
    check(metric_sum(lb, "hashlb_log_dropped_total") == 0, "no line dropped")
    check(lb.service()["log_connections"] is True, "the admin API shows log_connections")
    finish(lb)
    for b in backends:
        b.stop()


def buckets(lb, backend):
    """hashlb_backend_connect_seconds of <backend>: ({le: cumulative count}, sum, count)."""
    status, body = lb.http("GET", "/metrics")
    got, total, count = {}, None, None
    for line in body.splitlines():
        m = re.match(r'hashlb_backend_connect_seconds_(bucket|sum|count)\{(.*)\} (\S+)$', line)
        if not m or f'backend="{backend}"' not in m.group(2):
            continue
        if m.group(1) == "bucket":
            got[re.search(r'le="([^"]+)"', m.group(2)).group(1)] = float(m.group(3))
        elif m.group(1) == "sum":
            total = float(m.group(3))
        else:
            count = float(m.group(3))
    return got, total, count


def slow_connect_timed():
    """A backend whose accept queue is full drops hashlb's SYN; the kernel sends it again after
    its initial RTO (1 s) and the connect then succeeds. The connection log says connect_ms
    >= 1000, and hashlb_backend_connect_seconds puts that connect above 1 s, where the quick
    connects before it are not."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(0)  # room for one connection not yet accepted
    addr = "127.0.0.1:%d" % ls.getsockname()[1]
    lb = Lb(config([("slow", addr)], health=NO_HEALTH,
                   extra="log_connections: true\ntimeouts:\n  connect: 5s"))
    def serve(n):
        for _ in range(n):
            c, _ = ls.accept()
            c.sendall(b"slow\n")
            c.close()

    # Two quick connects first: accepted at once.
    t = threading.Thread(target=serve, args=(2,))
    t.start()
    for i in range(2):
        got, _ = exchange(lb.addr, client_ip(i + 1), b"")
        check(got == b"slow\n", f"quick connect {i} served ({got!r})")
    t.join()
    # Fill the accept queue with a connection of our own; hashlb's SYN is then dropped.
    blocker = socket.create_connection(ls.getsockname())
    time.sleep(0.1)
    result = {}

    def client():
        result["got"], result["me"] = exchange(lb.addr, client_ip(9), b"")
    ct = threading.Thread(target=client)
    t0 = time.monotonic()
    ct.start()
    # hashlb's first SYN dropped (the queue is full): its socket waits in SYN-SENT for the
    # kernel to send it again, 1 s after the first
    check(wait_until(lambda: syn_sent(ls.getsockname()[1]) > 0, step=0.01),
          "hashlb's connect waits, its SYN dropped")
    c, _ = ls.accept()  # the blocker: room again for the SYN sent again
    c.close()
    serve(1)
    ct.join(10)
    took = time.monotonic() - t0
    check(result.get("got") == b"slow\n", f"the slow connect served ({result})")
    check(took >= 0.9, f"the client waited for the SYN sent again ({took:.2f} s)")
    lines = [l for l in wait_lines(lb, 3) if l.get("client") == result.get("me")]
    check(len(lines) == 1 and float(lines[0].get("connect_ms", 0)) >= 1000,
          f"connect_ms >= 1000 for the slow one ({lines})")
    got, total, count = buckets(lb, "slow")
    check(count == 3 and got.get("+Inf") == 3, f"3 connects counted, +Inf = _count ({got}, {count})")
    check(got.get("1") == 2, f"the two quick connects at or under 1 s, the slow one above ({got})")
    les = sorted((float(k), v) for k, v in got.items() if k != "+Inf")
    check(len(les) == 16 and all(a[1] <= b[1] for a, b in zip(les, les[1:])),
          f"16 buckets, cumulative ({les})")
    # Each bucket and the sum as the connect times hashlb logged say, not as this process's
    # clock guesses: the slow connect is 1 s and a bit, or 3 s and a bit if this process was
    # too slow to make room before the SYN sent again at 1 s (then sent again at 3 s)
    ms = [float(l.get("connect_ms", "nan")) for l in conn_lines(lb)]
    want = {le: sum(round(m * 1000) <= round(le * 1e6) for m in ms) for le, _ in les}  # in µs
    check(len(ms) == 3 and all(v == want[le] for le, v in les),
          f"each bucket counts the connects logged at or under it: {les}, logged {ms}")
    check(total is not None and len(ms) == 3 and abs(total - sum(ms) / 1000) < 0.005 and
          total >= 1.0, f"_sum = the three connect times logged ({total}, {ms})")
    blocker.close()
    ls.close()
    finish(lb)


def refused_first_backend():
    """The client's first backend refuses: attempts=2, the next one serves, end=done."""
    live = Backend("live")
    cfg = config([("dead", f"127.0.0.1:{dead_port()}"), ("live", live.addr)], health=NO_HEALTH,
                 extra="log_connections: true")
    lb = Lb(cfg)
    prefs = lookup(lb.path, [client_ip(i) for i in range(1, 40)])
    src = next(c for c, p in prefs.items() if p[0] == "dead")
    got, me = exchange(lb.addr, src, b"ping\n")
    check(got == b"live\nping\n", f"served by the next backend ({got!r})")
    lines = wait_lines(lb, 1)
    check(len(lines) == 1, f"one line ({lines})")
    l = lines[0] if lines else {}
    check(l.get("client") == me, f"client={me} ({l})")
    check(l.get("attempts") == "2", f"attempts=2 ({l})")
    check(l.get("backend") == "live" and l.get("backend_addr") == live.addr, f"backend=live ({l})")
    check(l.get("end") == "done" and "err" not in l, f"end=done, no err ({l})")
    finish(lb)
    live.stop()


def no_backend_reached():
    """Every connect refused: end=connect_failed, backend=-; every backend in maint:
    end=no_backend, attempts=0."""
    cfg = config([("d1", f"127.0.0.1:{dead_port()}"), ("d2", f"127.0.0.1:{dead_port()}")],
                 health=NO_HEALTH, extra="log_connections: true")
    lb = Lb(cfg)
    check(connect_outcome(lb.addr, client_ip(3)) == (0, "RST"), "the client is reset")
    lines = wait_lines(lb, 1)
    l = lines[0] if lines else {}
    check(len(lines) == 1, f"one line ({lines})")
    check(l.get("client", "").startswith(client_ip(3) + ":") and l.get("backend") == "-" and
          l.get("backend_addr") == "-", f"client={client_ip(3)}:PORT backend=- ({l})")
    check(l.get("end") == "connect_failed" and l.get("attempts") == "2",
          f"end=connect_failed attempts=2 ({l})")
    check(l.get("err") == "ECONNREFUSED", f"err=ECONNREFUSED ({l})")
    check(l.get("bytes_in") == "0" and l.get("bytes_out") == "0", f"no bytes ({l})")
    finish(lb)

    cfg = config([("m1", f"127.0.0.1:{dead_port()}", "state: maint")], health=NO_HEALTH,
                 extra="log_connections: true")
    lb = Lb(cfg)
    check(connect_outcome(lb.addr, client_ip(4)) == (0, "RST"), "the client is reset")
    lines = wait_lines(lb, 1)
    l = lines[0] if lines else {}
    check(l.get("end") == "no_backend" and l.get("attempts") == "0" and l.get("backend") == "-",
          f"end=no_backend attempts=0 backend=- ({l})")
    finish(lb)


def queue_wait_and_rejection():
    """A client that waited in the queue (its backend at max_connections: 1) logs how long,
    queue_ms=, at least the time the test held the slot after it saw it waiting; one that did
    not wait has no queue_ms. A client the service's max_connections refuses at once logs
    end=rejected, backend=-, attempts=0. Before, the queue wait was nowhere in the line (HAProxy
    logs it, Tw), and a rejected client logged nothing."""
    a = Backend("a")
    lb = Lb(config([("a", a.addr, "max_connections: 1")], health=NO_HEALTH,
                   extra="log_connections: true\ntimeouts:\n  queue: 30s"))
    first = connect(lb.addr, src=client_ip(11))
    check(read_line(first) == "a", "the first client holds a's slot")
    waiting = connect(lb.addr, src=client_ip(12))
    check(lb.wait(lambda: metric_sum(lb, "hashlb_service_queued") == 1) is not None,
          "the second waits in the queue")
    time.sleep(0.3)  # held at least that long from here on: a lower bound only
    first.close()
    check(read_line(waiting) == "a", "served once the slot frees")
    waiting.close()
    lines = {l.get("client", "").rsplit(":", 1)[0]: l for l in wait_lines(lb, 2)}
    one, two = lines.get(client_ip(11), {}), lines.get(client_ip(12), {})
    check("queue_ms" not in one and one.get("backend") == "a",
          f"the first did not wait: no queue_ms ({one})")
    check(int(two.get("queue_ms", "0")) >= 300 and two.get("backend") == "a",
          f"the second waited 300 ms and more: queue_ms ({two})")
    finish(lb)

    lb = Lb(config([("a", a.addr)], health=NO_HEALTH,
                   extra="log_connections: true\nmax_connections: 1"))
    held = connect(lb.addr, src=client_ip(13))
    check(read_line(held) == "a", "the first client holds the service's one connection")
    check(connect_outcome(lb.addr, client_ip(14)) == (0, "RST"), "the second is refused")
    lines = wait_lines(lb, 1)
    l = lines[0] if lines else {}
    check(len(lines) == 1 and l.get("end") == "rejected" and l.get("backend") == "-" and
          l.get("attempts") == "0" and l.get("client", "").startswith(client_ip(14) + ":"),
          f"the refused client's line: end=rejected ({lines})")
    held.close()
    finish(lb)
    a.stop()


def idle_timeout_and_drain():
    """A silent connection past the idle timeout: end=idle_timeout, with the greeting counted;
    one still open at shutdown past the drain timeout: end=drain_timeout."""
    b = Backend("a")
    cfg = config([("a", b.addr)], health=NO_HEALTH,
                 extra="log_connections: true\ntimeouts: {idle: 300ms, drain: 200ms}")
    lb = Lb(cfg)
    s = connect(lb.addr, client_ip(5))
    me = "%s:%d" % s.getsockname()[:2]
    check(read_line(s) == "a", "greeted")
    check(read_to_eof(s) == b"", "closed by the idle timeout")
    s.close()
    lines = wait_lines(lb, 1)
    l = lines[0] if lines else {}
    check(l.get("client") == me and l.get("end") == "idle_timeout", f"end=idle_timeout ({l})")
    check(l.get("bytes_in") == "0" and l.get("bytes_out") == "2", f"bytes 0 in, 2 out ({l})")
    check(int(l.get("duration_ms", 0)) >= 300, f"duration_ms >= the idle timeout ({l})")

    s = connect(lb.addr, client_ip(6))
    check(read_line(s) == "a", "greeted")
    s.sendall(b"still here\n")
    check(s.recv(100) == b"still here\n", "echoed")
    finish(lb)  # SIGTERM: drains for 200 ms, then closes it; the line is written at exit
    s.close()
    lines = wait_lines(lb, 2)
    l = lines[1] if len(lines) == 2 else {}
    check(len(lines) == 2, f"two lines ({lines})")
    check(l.get("end") == "drain_timeout" and l.get("bytes_in") == "11" and
          l.get("bytes_out") == "13", f"end=drain_timeout, 11 in, 13 out ({l})")
    b.stop()


def accept_proxy_client():
    """accept_proxy: the client is the one the PROXY header names (what was hashed); a bad
    header: end=bad_header, client = the peer itself."""
    backends = [Backend(n) for n in ("a", "b", "c")]
    cfg = config([(b.name, b.addr) for b in backends], health=NO_HEALTH,
                 extra="log_connections: true\naccept_proxy: true")
    lb = Lb(cfg)
    named = "10.1.2.3"
    want = lookup(lb.path, [named])[named][0]
    s = connect(lb.addr, client_ip(7))
    s.sendall(b"PROXY TCP4 10.1.2.3 127.0.0.1 4444 80\r\nhello\n")
    s.shutdown(socket.SHUT_WR)
    got = read_to_eof(s)
    s.close()
    check(got == want.encode() + b"\nhello\n", f"served by {want} ({got!r})")
    s = connect(lb.addr, client_ip(8))
    peer = "%s:%d" % s.getsockname()[:2]
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    try:
        check(read_to_eof(s) == b"", "a bad header is closed")
    except ConnectionResetError:
        pass  # closed with the request unread: a reset
    s.close()
    lines = wait_lines(lb, 2)
    check(len(lines) == 2, f"two lines ({lines})")
    l = next((l for l in lines if l.get("client") == "10.1.2.3:4444"), {})
    check(l.get("backend") == want and l.get("end") == "done", f"client=10.1.2.3:4444 ({lines})")
    check(l.get("bytes_in") == "6" and l.get("bytes_out") == str(len(got)),
          f"the header is not counted: 6 in ({l})")
    l = next((l for l in lines if l.get("client") == peer), {})
    check(l.get("end") == "bad_header" and l.get("backend") == "-", f"end=bad_header ({lines})")
    finish(lb)
    for b in backends:
        b.stop()


def off_then_reload_on():
    """Off (the default): no connection line; a reload turning it on logs the next ones."""
    b = Backend("a")
    cfg = config([("a", b.addr)], health=NO_HEALTH)
    lb = Lb(cfg)
    for i in range(3):
        got, _ = exchange(lb.addr, client_ip(10 + i), b"x" * 1000)
        check(got == b"a\n" + b"x" * 1000, "forwarded")
    # the three ended in hashlb: a line, were one written, would be on its way
    lb.wait(lambda: lb.service()["connections"]["active"] == 0)
    # (the final count below, once hashlb has exited and written everything, is the check
    # that holds: this one sees a line only if it came in time)
    check(conn_lines(lb) == [], f"log_connections off: no line ({conn_lines(lb)})")
    check(lb.service()["log_connections"] is False, "the admin API shows it off")

    lb.rewrite(cfg.replace("    health:", "    log_connections: true\n    health:", 1))
    rc, _, se = lb.ctl("reload")
    check(rc == 0, f"reload: {se}")
    got, me = exchange(lb.addr, client_ip(20), b"y" * 10)
    lines = wait_lines(lb, 1)
    check(len(lines) == 1 and lines[0].get("client") == me and lines[0].get("bytes_in") == "10",
          f"after the reload, the new connection is logged ({lines})")
    finish(lb)
    check(len(conn_lines(lb)) == 1, "nothing else logged")
    b.stop()


def read_started(out):
    """Read <out>, hashlb's stderr, up to its start-up line; the service's and the admin
    endpoint's addresses ("ip:port")."""
    listen, admin = None, None
    for raw in out:
        line = raw.decode()
        m = re.search(r"msg=listening .*addr=(\S+)", line)
        listen = m.group(1) if m else listen
        m = re.search(r'msg="admin listening" addr=(\S+)', line)
        admin = m.group(1) if m else admin
        if "msg=started" in line:
            break
    return listen, admin


def echo_once(addr, src):
    """One client from <src> through hashlb at <addr>: "x", then its FIN, then what comes
    back read to the end. None if that is the backend's greeting and echo, else what
    went wrong."""
    try:
        s = connect(addr, src, timeout=5)
        try:
            s.sendall(b"x")
            s.shutdown(socket.SHUT_WR)
            got = read_to_eof(s)
        finally:
            s.close()
    except TimeoutError:
        return "timeout"
    except OSError as e:
        return repr(e)
    return None if got == b"a\nx" else f"got {got!r}"


def serve_clients(listen, first, count, failed):
    """How many of <count> clients (from client_ip(first) on) get their echo through <listen>,
    up to the first that does not. A client reset or cut short is tried again, up to three
    times: a try lost on a shared machine says nothing of hashlb (on a loopback other tests
    flood, packets are dropped, as /proc/net/softnet_stat counts: hundreds of thousands under
    load; one SYN lost to hashlb costs the client 1 s of its 5, one lost to the backend a
    connect try of hashlb's, which resets the client). A try that times out (5 s without a
    step: a connection not made after three SYNs, or an echo not come) is what a worker that
    waits on its log does, and ends the serving at once, that client not served. Each try
    that failed goes into <failed> with its why, for the caller to say and to check few; as
    each may have made a connection of its own, logged, the caller counts the lines against
    the connections hashlb routed (routed_and_dropped()), not against its clients."""
    host, port = listen.rsplit(":", 1)
    for i in range(first, first + count):
        for _ in range(3):
            why = echo_once((host, int(port)), client_ip(i % 200))
            if why is None:
                break
            failed.append(f"client {i}: {why}")
            if why == "timeout":
                return i - first
        else:
            return i - first
    return count


def check_served(served, n, failed, what):
    """<served> of <n> clients served, all of them, <what>, with few tries failed (<failed>,
    from serve_clients()), those said."""
    if failed and served == n:
        print(f"    {len(failed)} tries failed, served when tried again: {failed[:5]}")
    ok = check(served == n, f"all {n} connections served {what} ({served}; the last tries: "
                            f"{failed[-3:]})")
    return check(len(failed) <= n // 100,
                 f"few tries failed: {len(failed)} of {n} clients ({failed[:5]})") and ok


def admin_metrics(admin):
    """GET /metrics from the admin endpoint at <admin>: the exposition's text."""
    ahost, aport = admin.rsplit(":", 1)
    a = socket.create_connection((ahost, int(aport)), timeout=10)
    a.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    body = read_to_eof(a).decode()
    a.close()
    return body.partition("\r\n\r\n")[2]


def admin_metric(admin, name):
    """The sum of metric <name>'s samples, from the admin endpoint at <admin>."""
    return metric_sum_text(admin_metrics(admin), name)


def routed_and_dropped(admin, n, failed):
    """Once no connection is open (every line written or dropped): the connections hashlb
    routed (hashlb_service_lookups_total), each of which logs its line, and the lines
    dropped, from one scrape of the admin endpoint at <admin>. Checked to be the <n>
    clients' and at most one more for each try that failed (<failed>)."""
    end = time.time() + 10
    while time.time() < end:
        body = admin_metrics(admin)
        if metric_sum_text(body, "hashlb_service_active_connections") == 0:
            break
        time.sleep(0.05)
    else:
        check(False, "connections still open 10 s after the clients were served")
    routed = int(metric_sum_text(body, "hashlb_service_lookups_total"))
    check(n <= routed <= n + len(failed), f"hashlb routed {routed} connections: the {n} "
                                          f"clients' and at most {len(failed)} of tries that "
                                          f"failed")
    return routed, int(metric_sum_text(body, "hashlb_log_dropped_total"))


def log_dropped(admin):
    """hashlb_log_dropped_total, from the admin endpoint at <admin>."""
    return int(admin_metric(admin, "hashlb_log_dropped_total"))


WHOLE = re.compile(r'^ts=\S+Z level=\w+ msg=("[^"]*"|\S+)( \w+=("[^"]*"|\S+))*\n$')


def whole_lines(rest):
    """The lines read from hashlb's stderr (<rest>, bytes), checked to arrive whole (none cut by
    another's), and the connection lines among them."""
    lines = [l.decode(errors="replace") for l in rest]
    check(all(WHOLE.match(l) for l in lines), "every line arrives whole: " +
          repr([l for l in lines if not WHOLE.match(l)][:3]))
    return lines, [l for l in lines if " msg=connection " in l]


def stalled_stderr(kind):
    """stderr is a <kind> ("pipe"; "fifo", a named one, as a log reader's that mkfifo made;
    "terminal", a pty, as one paused with ^S; or "socket": a stream socket, as journald's)
    nobody reads:
    connections are still served at full speed (the worker never waits on the log), the
    lines that do not fit are dropped and counted in hashlb_log_dropped_total, and once the
    reader catches up every other line arrives whole, none cut by another thread's (on a
    stream socket a write that does not wait may take part of a line: two workers and the
    control thread, logging reloads, write at once there): lines written + dropped =
    connections (+ the control thread's reload lines, dropped too). The control thread does
    not hang on the stalled reader: the admin endpoint answers, and a reload once the reader
    is back is logged."""
    n = 3000
    b = Backend("a")
    workers = 2 if kind == "socket" else 1
    path = tmpfile(f"stalled-{kind}.yaml", config([("a", b.addr)], health=NO_HEALTH,
                                                  workers=workers,
                                                  extra="log_connections: true"))
    if kind == "pipe":
        proc = spawn([HASHLB, "run", "-c", path], stderr=subprocess.PIPE)
        out = proc.stderr
    elif kind == "fifo":
        fifo = tmpfile("stalled.fifo", "")
        os.unlink(fifo)
        os.mkfifo(fifo)
        rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the writer's open does not wait
        with open(fifo, "wb") as w:
            proc = spawn([HASHLB, "run", "-c", path], stderr=w)
        # Every line was dropped, the FIFO refusing pwritev2(RWF_NOWAIT) (EOPNOTSUPP).
        if not check(select.select([rfd], [], [], 10)[0],
                     "hashlb's start-up lines come through the FIFO"):
            stop(proc)
            os.close(rfd)
            b.stop()
            return
        os.set_blocking(rfd, True)
        out = os.fdopen(rfd, "rb")
    elif kind == "terminal":
        master, slave = pty.openpty()
        tty.setraw(slave)  # no echo, no line discipline: what hashlb writes waits for us
        proc = spawn([HASHLB, "run", "-c", path], stderr=slave)
        os.close(slave)
        out = os.fdopen(master, "rb")  # EIO, not EOF, once hashlb is gone: caught below
    else:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # partial writes early
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        proc = spawn([HASHLB, "run", "-c", path], stderr=theirs.fileno())
        theirs.close()
        out = ours.makefile("rb")
    listen, admin = read_started(out)  # the start-up lines, then the reader stops
    t0, served, failed = time.time(), 0, []
    for i in range(0, n, 250):
        if kind == "socket" and i % 500:
            proc.send_signal(signal.SIGHUP)  # the control thread logs the reload meanwhile
        got = serve_clients(listen, i, 250, failed)
        served += got
        if got < 250:
            break
    if not check_served(served, n, failed, "with stderr stalled"):
        stop(proc)
        b.stop()
        return
    dropped = log_dropped(admin)
    check(0 < dropped < n, f"lines dropped and counted: {dropped} of {n}")
    rest = []
    def read_rest():
        try:
            rest.extend(out)
        except OSError:  # a pty's master side once its other side is closed
            pass
    reader = threading.Thread(target=read_rest, daemon=True)
    reader.start()  # the reader catches up
    time.sleep(0.5)
    seen = len(rest)
    if kind == "socket":
        proc.send_signal(signal.SIGHUP)
        end = time.time() + 15
        while time.time() < end and not any(b"msg=reloaded" in l for l in rest[seen:]):
            time.sleep(0.05)
    routed, dropped = routed_and_dropped(admin, n, failed)
    late = [l.decode(errors="replace") for l in rest[seen:]]
    check(stop(proc) == 0, "hashlb exited 0")
    reader.join(10)
    _, conn = whole_lines(rest)
    # the reload lines of the stall (6 SIGHUPs, at most 4 lines each) are dropped too
    extra = len(conn) + dropped - routed
    if kind != "socket":
        check(extra == 0, f"lines written {len(conn)} + dropped {dropped} = {routed} "
                          f"connections")
    else:
        check(0 <= extra <= 24, f"lines written {len(conn)} + dropped {dropped} = {routed} "
                                f"connections + the reload lines of the stall ({extra})")
    if kind == "socket":
        check(any("msg=reloaded" in l for l in late), f"a reload once the reader is back is "
                                                       f"logged: {late[-3:]}")
    print(f"    {kind}: {n} connections in {time.time() - t0:.1f}s, {dropped} lines dropped")
    b.stop()


def stalled_stderr_burst():
    """A burst of control-plane lines (500 backends found down at once) to a stderr nobody
    reads costs the control loop one wait (100 ms), not one per line: the admin endpoint
    sees them all down promptly, and the lines are dropped and counted. The loop used to
    wait 100 ms per line (50 s for these, a scrape hanging as long)."""
    ports = [dead_port() for _ in range(500)]
    path = tmpfile("burst.yaml", config(
        [(f"b{i}", f"127.0.0.1:{p}") for i, p in enumerate(ports)], workers=1,
        health="interval: 1s\ntimeout: 100ms\nrise: 1\nfall: 1"))
    proc = spawn([HASHLB, "run", "-c", path], stderr=subprocess.PIPE)
    fcntl.fcntl(proc.stderr.fileno(), 1031, 4096)  # F_SETPIPE_SZ: the smallest pipe
    admin = None
    for raw in proc.stderr:  # the start-up lines, then the reader stops
        m = re.search(r'msg="admin listening" addr=(\S+)', raw.decode())
        admin = m.group(1) if m else admin
        if b"msg=started" in raw:
            break
    ahost, aport = admin.rsplit(":", 1)

    def metric(name):
        a = socket.create_connection((ahost, int(aport)), timeout=20)
        a.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        body = read_to_eof(a).decode()
        a.close()
        return metric_sum_text(body, name)

    def up():
        try:
            return metric("hashlb_service_backends_up")
        except socket.timeout:
            return -1  # a scrape not answered in 20 s: the loop stuck

    t0 = time.time()
    while time.time() - t0 < 60 and up() != 0:
        time.sleep(0.1)
    took = time.time() - t0
    dropped = metric("hashlb_log_dropped_total")
    # Not a speed check: waiting per line costs 100 ms for each line dropped, by
    # construction (the reader never reads), however fast the machine: 0.1 s x dropped
    # (about 50 s). Without it the burst is one check interval and one wait (about 1.2 s):
    # the bound, half what the waits would cost, leaves a slow machine 20 times that.
    bound = 0.1 * dropped / 2
    print(f"    all down in {took:.1f} s, {dropped:.0f} lines dropped (bound {bound:.1f} s)")
    check(took < bound, f"the 500 backends seen down in {took:.1f} s, under {bound:.1f} s "
                        "(one check interval and a wait, not one wait per line dropped)")
    check(dropped >= 100, f"their lines dropped and counted ({dropped:.0f})")
    check(stop(proc) == 0, "hashlb exited 0")


def stalled_journal_stream_no_spin():
    """stderr is a stream socket whose reader shut down its writing side, as journald does (it
    never writes back), and does not read: while log lines wait for room, hashlb waits for it
    without spinning, serves its clients, drops and counts the lines that do not fit, and once
    the reader reads again every line kept arrives whole. Before, io_uring's poll, which
    reports the reader's shutdown (POLLRDHUP) whatever its mask, ended at once each time the
    worker armed it for room: a worker at full CPU for as long as lines waited, woken by that
    poll at every turn (hashlb_worker_log_wakeups_total: about 240,000 in the 1 s the test
    waits, against none)."""
    n = 1500
    b = Backend("a")
    path = tmpfile("journal.yaml", config([("a", b.addr)], health=NO_HEALTH, workers=1,
                                          extra="log_connections: true"))
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    ours.shutdown(socket.SHUT_WR)  # journald's side: it only reads
    proc = spawn([HASHLB, "run", "-c", path], stderr=theirs.fileno())
    theirs.close()
    out = ours.makefile("rb")
    listen, admin = read_started(out)  # the start-up lines, then the reader stops

    failed = []
    served = serve_clients(listen, 0, n, failed)
    if not check_served(served, n, failed, "with the journal stalled"):
        stop(proc)
        b.stop()
        return
    woken = admin_metric(admin, "hashlb_worker_log_wakeups_total")
    time.sleep(1.0)  # lines wait for room; nothing else happens
    woken = admin_metric(admin, "hashlb_worker_log_wakeups_total") - woken
    # the reader takes nothing: no room to wake the worker for (a spin: one a turn)
    check(woken <= 2, f"no spin while lines wait for the journal: {woken:.0f} wake-ups in 1 s")
    served = serve_clients(listen, n, 50, failed)
    check(served == 50, f"clients still served after the stall ({served} of 50; the last "
                        f"tries: {failed[-3:]})")
    check(len(failed) <= (n + 50) // 100,
          f"few tries failed: {len(failed)} of {n + 50} clients ({failed[:5]})")
    routed, dropped = routed_and_dropped(admin, n + 50, failed)
    check(0 < dropped < routed, f"lines dropped and counted: {dropped} of {routed}")
    rest = []
    reader = threading.Thread(target=lambda: rest.extend(out), daemon=True)
    reader.start()  # the reader reads again
    lines = routed - dropped
    t0 = time.time()
    end = t0 + 10
    while time.time() < end and sum(b" msg=connection " in l for l in rest) < lines:
        time.sleep(0.05)
    took = time.time() - t0
    check(stop(proc) == 0, "hashlb exited 0")
    reader.join(10)
    got, conn = whole_lines(rest)
    check(len(conn) == lines, f"lines written {len(conn)} + dropped {dropped} = {routed} "
                              "connections")
    bad = [l for l in got if "Sanitizer" in l or "runtime error" in l]
    check(not bad, f"no sanitizer report: {bad[:3]}")
    print(f"    {woken:.0f} wake-ups in the 1 s stall, {dropped} lines dropped, the "
          f"{lines} kept read in {took:.2f} s once the reader was back")
    ours.close()
    b.stop()


def stalled_stderr_reader():
    stalled_stderr("pipe")


def stalled_stderr_fifo():
    stalled_stderr("fifo")


def stalled_stderr_terminal_counted():
    stalled_stderr("terminal")


def stalled_stderr_terminal(foreign=False):
    """stderr is a terminal (a pty) whose reader stops, as one paused with ^S or behind an ssh
    session that hangs: connections are still served, and SIGTERM still stops hashlb. A
    terminal refuses RWF_NOWAIT, and its lines were written with a blocking write(): the
    workers and the control thread stopped at the first line that found the terminal full
    (about 85 connections), the next clients timing out and SIGTERM unheard. <foreign>: the
    terminal is another user's, hashlb allowed no open of it (run after su, or by a
    supervisor as a user of its own), as the terminal it controls."""
    n = 3000
    b = Backend("a")
    kw = {}
    master, slave = pty.openpty()
    tty.setraw(slave)  # no echo, no line discipline: what hashlb writes waits for us
    if foreign:
        if os.geteuid() != 0:
            os.close(master)
            os.close(slave)
            b.stop()
            raise Skip("not root: hashlb cannot be run as another user")
        os.fchown(slave, 0, 0)
        os.fchmod(slave, 0o600)  # mesg n: only root opens it
        os.chmod(os.path.dirname(tmpfile("x", "")), 0o755)  # its config readable by nobody

        def ctty():  # the pty hashlb's controlling terminal, as a login's or an ssh session's
            os.setsid()
            fcntl.ioctl(2, termios.TIOCSCTTY, 0)
        kw = dict(user=65534, group=65534, extra_groups=[], preexec_fn=ctty)
    path = tmpfile("stalled-tty.yaml", config([("a", b.addr)], health=NO_HEALTH, workers=1,
                                              extra="log_connections: true"))
    os.chmod(path, 0o644)
    proc = spawn([HASHLB, "run", "-c", path], stderr=slave, **kw)
    os.close(slave)
    out, end = b"", time.time() + 10
    while b"msg=started" not in out and time.time() < end:
        if select.select([master], [], [], 0.5)[0]:
            out += os.read(master, 65536)
    listen = re.search(rb"msg=listening .*addr=(\S+)", out)
    if not check(listen, "hashlb started, its lines on the terminal"):
        stop(proc)
        os.close(master)
        b.stop()
        return
    # The terminal is not read from here on. Tried again, a client lost on a shared machine
    # is served (the 2,914th of 3,000 once, at load 15-18, where the terminal was full long
    # before), while a worker that waits on the terminal stops at about the 85th.
    failed = []
    served = serve_clients(listen.group(1).decode(), 0, n, failed)
    check_served(served, n, failed, "with the terminal stalled")
    check(stop(proc, timeout=10) == 0, "SIGTERM stops hashlb with the terminal stalled")
    os.close(master)
    b.stop()


def stalled_stderr_terminal_of_another_user():
    stalled_stderr_terminal(foreign=True)


def stderr_on_a_pty_master():
    """stderr is a pty's master side (a program that runs hashlb under a terminal of its own
    and reads the other side): hashlb's lines reach that side. Opened again by its name to
    be written without waiting, /dev/ptmx made a new pty, and every line went there, read
    by none and not counted as dropped."""
    b = Backend("a")
    path = tmpfile("ptmx.yaml", config([("a", b.addr)], health=NO_HEALTH, workers=1))
    master, slave = pty.openpty()
    tty.setraw(slave)
    proc = spawn([HASHLB, "run", "-c", path], stderr=master)
    os.close(master)
    out, end = b"", time.time() + 10
    while b"msg=started" not in out and time.time() < end:
        if select.select([slave], [], [], 0.5)[0]:
            out += os.read(slave, 65536)
    check(b"msg=started" in out, f"hashlb's start-up lines reach the pty's other side: {out[:200]!r}")
    stop(proc)
    os.close(slave)
    b.stop()


def stalled_stderr_stream_socket():
    stalled_stderr("socket")


def reset_before_routed():
    """Clients that reset before hashlb reads their address (connect, then close with
    SO_LINGER 0 at once: a TCP check that ends with RST) are logged client=- end=client_reset
    err=ECONNRESET, as the log's description says: the error their reset left on the socket.
    Before, err named the failure of hashlb's own getpeername() on it, ENOTCONN (19 of 20)."""
    b = Backend("a")
    lb = Lb(config([("a", b.addr)], workers=1, health=NO_HEALTH, extra="log_connections: true"))
    # hashlb stopped while the clients come and go: the kernel completes each handshake into
    # the listener's queue and takes the reset, and hashlb reads every address after it. Left
    # running, it could read them first (0 of 20 gone in one CI run under ASan).
    with frozen(lb.proc):
        for _ in range(20):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.connect(lb.addr)
            s.close()
    lines = wait_lines(lb, 20)
    gone = [l for l in lines if l.get("client") == "-"]
    check(len(lines) == 20 and all(l.get("end") == "client_reset" for l in lines),
          f"20 lines, end=client_reset: {[(l.get('end'), l.get('err')) for l in lines]}")
    check(len(gone) == 20, f"all were gone before their address was read (client=-): {len(gone)} of 20")
    wrong = [l.get("err") for l in gone if l.get("err") != "ECONNRESET"]
    check(not wrong, f"each says err=ECONNRESET: {len(wrong)} of {len(gone)} do not ({wrong[:3]})")
    finish(lb)
    b.stop()


def uploading(s):
    """<s> uploads from a thread until it fails or the Event returned is set: (that Event,
    the thread)."""
    done = threading.Event()

    def upload():
        try:
            while not done.is_set():
                s.sendall(b"u" * 65536)
        except OSError:
            pass

    t = threading.Thread(target=upload)
    t.start()
    return done, t


def bytes_taken_as_the_backend_resets():
    """A backend that answers and resets at once (a close with the upload unread), while its
    client uploads and reads: every byte the client received is in its line's bytes_out, and
    the lines add up to hashlb_backend_received_bytes_total. The send to the client and the
    backend's reset complete in one turn; the send's count was dropped when the reset came
    first (6 to 15 of 200 connections logged bytes_out=0 for a client that got the whole
    7,736-byte answer)."""
    answer = b"B" * 7736
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(128)

    def handle(c):
        try:
            c.recv(1)
            c.sendall(answer)
        finally:
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()

    stop_backend = serve_each(srv, handle)
    addr = "127.0.0.1:%d" % srv.getsockname()[1]
    lb = Lb(config([("a", addr)], workers=1, health=NO_HEALTH, extra="log_connections: true"))
    got = {}
    for i in range(200):
        s = connect(lb.addr, client_ip(i))
        me = "%s:%d" % s.getsockname()[:2]
        done, t = uploading(s)
        n = 0
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                n += len(d)
        except OSError:
            pass
        done.set()
        s.close()
        t.join()
        got[me] = n
    lines = wait_lines(lb, 200)
    short = [(l["client"], got.get(l["client"]), l["bytes_out"]) for l in lines
             if got.get(l["client"], 0) > int(l["bytes_out"])]
    check(len(lines) == 200 and not short,
          f"no line counts fewer bytes than its client received: {len(short)} of {len(lines)} "
          f"do ({short[:3]})")
    total = metric_sum(lb, "hashlb_backend_received_bytes_total")
    check(total == sum(int(l["bytes_out"]) for l in lines),
          f"the lines add up to received_bytes_total ({total})")
    finish(lb)
    stop_backend()


def resets_after_a_fin_say_econnreset():
    """A peer that half-closes and then resets (a client that sends its request and its FIN,
    then closes with the answer unread; a backend that answers, closes its side, then closes
    with the upload unread) is logged err=ECONNRESET, with splice and without: the kernel
    names a reset after the peer's FIN EPIPE, which was logged as it was, "broken pipe" for
    what the peer did, a reset (err=EPIPE on all four before)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)

    def handle(c):
        try:
            if c.recv(1) == b"d":  # a download: more than the client reads
                while True:
                    c.sendall(b"d" * 65536)
            c.sendall(b"answer")  # an upload: answered, then closed with the rest unread
            c.shutdown(socket.SHUT_WR)
            time.sleep(0.3)
        except OSError:
            pass
        c.close()

    stop_backend = serve_each(srv, handle)
    addr = "127.0.0.1:%d" % srv.getsockname()[1]
    ends = []
    for splice in ("65536", "off"):
        lb = Lb(config([("a", addr)], workers=1, health=NO_HEALTH, extra="log_connections: true"),
                args=("--splice-after", splice))
        s = connect(lb.addr, timeout=10)
        s.sendall(b"d")
        s.shutdown(socket.SHUT_WR)
        got = 0
        while got < 4 * 65536:
            got += len(s.recv(65536))
        s.close()  # the answer's rest unread: a reset
        s = connect(lb.addr, timeout=10)
        stop, t = uploading(s)
        lines = wait_lines(lb, 2)
        stop.set()
        t.join()
        s.close()
        ends += [(f"splice {splice}", l.get("end"), l.get("err")) for l in lines]
        finish(lb)
    want = [(f"splice {sp}", end, "ECONNRESET") for sp in ("65536", "off")
            for end in ("client_reset", "backend_reset")]
    check(ends == want, f"each reset after a FIN says ECONNRESET: {ends}")
    stop_backend()


def reset_during_slow_connect():
    """A client that resets while hashlb's connect to its backend is slow (the backend's accept
    queue full: its SYN dropped, sent again 1 s later) is found gone when the connect completes:
    the backend's connection is reset before a byte, the client is logged end=client_reset, and
    neither hashlb_backend_connections_total nor hashlb_service_connections_total counts it as
    served. Before, its connection went on to forward and was counted established, its reset
    read only by the first recv (or by the idle scan's watch, had one come first)."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(0)  # room for one connection not yet accepted: the blocker's
    port = ls.getsockname()[1]
    lb = Lb(config([("slow", f"127.0.0.1:{port}")], workers=1, health=NO_HEALTH,
                   extra="log_connections: true\ntimeouts:\n  connect: 10s"))
    blocker = socket.create_connection(ls.getsockname())
    s = connect(lb.addr, client_ip(9))
    me = "%s:%d" % s.getsockname()[:2]
    check(wait_until(lambda: syn_sent(port) > 0, step=0.01), "hashlb's connect waits, its SYN dropped")
    # hashlb stopped while the client resets and its connect completes (the SYN sent again
    # into the room the blocker's accept leaves): it sees both at once, as it would a reset
    # that came between two idle scans, before the scan that would watch the client.
    with frozen(lb.proc):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        c, _ = ls.accept()  # the blocker's
        c.close()
        check(wait_until(lambda: syn_sent(port) == 0, timeout=10, step=0.02),
              "hashlb's connect completed (its SYN sent again)")
    ls.settimeout(10)
    b, _ = ls.accept()  # hashlb's
    got = outcome(b)
    check(got == (0, "RST"), f"the backend's connection reset, nothing sent on it ({got})")
    lines = [l for l in wait_lines(lb, 1) if l.get("client") == me]
    check(len(lines) == 1 and lines[0].get("end") == "client_reset",
          f"the client logged end=client_reset ({lines})")
    for name in ("hashlb_backend_connections_total", "hashlb_service_connections_total"):
        n = metric_sum(lb, name)
        check(n == 0, f"{name} counts no connection served ({n})")
    b.close()
    blocker.close()
    ls.close()
    finish(lb)


run_tests([one_line_per_client, slow_connect_timed, refused_first_backend, no_backend_reached,
           queue_wait_and_rejection,
           idle_timeout_and_drain, accept_proxy_client, off_then_reload_on,
           stalled_stderr_reader, stalled_stderr_fifo, stalled_stderr_terminal,
           stalled_stderr_terminal_counted, stalled_stderr_terminal_of_another_user,
           stderr_on_a_pty_master,
           stalled_stderr_stream_socket, stalled_stderr_burst,
           stalled_journal_stream_no_spin, reset_before_routed, bytes_taken_as_the_backend_resets,
           resets_after_a_fin_say_econnreset, reset_during_slow_connect])
