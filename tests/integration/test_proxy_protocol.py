#!/usr/bin/env python3
"""proxy_protocol: v1 / v2: a backend receives, before the client's first byte, a PROXY protocol
header naming the client's address and port and the address and port it connected to (IPv4 and
IPv6), then the client's bytes intact; health checks send the LOCAL header; a reload switches it
on for new connections (and checks) only; off sends nothing. accept_proxy: hashlb reads its
clients' headers, hashes and passes on the client they name, and closes (and counts) clients
without a valid one."""
import os
import socket
import struct
import subprocess
import threading
import time

from ctltest import REST_TURN_RATE, Lb, config, metric_sum, turn_mark, turn_rate
from shims import shim_env  # noqa: E402
from lbtest import (HASHLB, BlackHole, Hashlb, check, client_ip, connect, dead_port, frozen,
                    logfmt_fields, lookup, outcome, read_to_eof, run_tests, serve_each, syn_sent,
                    tmpfile, tmppath, wait_until)

V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"
NO_CHECKS = "enabled: false"


class ProxyBackend:
    """Accepts connections, reads a PROXY header (v1, v2, or "none" expected), then echoes until
    the client's FIN. .by_id maps the first line a client sent to the header before it; .checks
    holds the headers of connections that sent nothing (hashlb's health checks)."""

    def __init__(self, version):
        self.version = version
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.addr = "127.0.0.1:%d" % self.srv.getsockname()[1]
        self.by_id = {}
        self.checks = []
        self.resets = 0
        self.close = serve_each(self.srv, self._one)

    def _read_header(self, c):
        if self.version == "v1":
            h = b""
            while not h.endswith(b"\r\n") and len(h) < 108:
                d = c.recv(1)
                if not d:
                    break
                h += d
            return h
        if self.version == "v2":
            h = self._exactly(c, 16)
            return h + self._exactly(c, struct.unpack("!H", h[14:16])[0]) if len(h) == 16 else h
        return b""

    @staticmethod
    def _exactly(c, n):
        b = b""
        while len(b) < n:
            d = c.recv(n - len(b))
            if not d:
                break
            b += d
        return b

    def _one(self, c):
        with c:
            header, got = b"", b""
            try:
                header = self._read_header(c)
                while True:
                    d = c.recv(65536)
                    if not d:
                        break
                    if b"\n" not in got and b"\n" in got + d:
                        self.by_id[(got + d).split(b"\n", 1)[0]] = header  # before the echo
                    got += d
                    c.sendall(d)
            except ConnectionResetError:
                # hashlb resets a health check's connection once it has its answer, and
                # the connect of a client that left meanwhile: no traceback for those
                self.resets += 1
                return
            if not got:
                self.checks.append(header)


def expected(version, src, dst):
    """The header for a client at <src> connected to <dst>, both (host, port, ...)."""
    fam = socket.AF_INET6 if ":" in src[0] else socket.AF_INET
    if version == "v1":
        return f"PROXY TCP{4 if fam == socket.AF_INET else 6} {src[0]} {dst[0]} {src[1]} {dst[1]}\r\n".encode()
    addrs = socket.inet_pton(fam, src[0]) + socket.inet_pton(fam, dst[0])
    body = addrs + struct.pack("!HH", src[1], dst[1])
    return V2_SIG + bytes([0x21, 0x11 if fam == socket.AF_INET else 0x21]) + struct.pack("!H", len(body)) + body


def exchange(lb_addr, ident, src=None, family=socket.AF_INET):
    """One connection whose first line is <ident>: send a payload, half-close, read the echo;
    returns (client address, whether the echo is intact)."""
    s = socket.socket(family)
    s.settimeout(10)
    if src:
        s.bind((src, 0))
    s.connect(lb_addr)
    me = s.getsockname()
    # after the id, bytes that look like a header: the backend must get them as they are
    payload = ident + b"\n" + b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\nnot a header, the client's bytes\n" * 3
    s.sendall(payload)
    s.shutdown(socket.SHUT_WR)
    back = read_to_eof(s)
    s.close()
    return me, back == payload


LOCAL = {"v1": b"PROXY UNKNOWN\r\n", "v2": V2_SIG + b"\x20\x00\x00\x00"}


def wait_checks(lb, be, version):
    """Health checks reach the backend with the LOCAL header of <version> (a connection of
    hashlb's own), and with nothing else."""
    lb.wait(lambda: LOCAL[version] in be.checks)
    check(LOCAL[version] in be.checks, f"{version}: health checks send {LOCAL[version]!r}")


def headers_v4():
    """Each client address and port, as the backend reads it, for v1 and v2; health checks
    send the LOCAL header."""
    for version in ("v1", "v2"):
        be = ProxyBackend(version)
        lb = Lb(config([("p", be.addr)], extra=f"proxy_protocol: {version}"))
        for i in range(5):
            ident = f"{version}-{i}".encode()
            me, intact = exchange(lb.addr, ident, src=client_ip(i * 7))
            check(intact, f"{version}: connection {i}: the client's bytes come back intact")
            got, want = be.by_id.get(ident), expected(version, me, lb.addr)
            check(got == want, f"{version}: connection {i}: header {got!r}, want {want!r}")
        wait_checks(lb, be, version)
        shown = subprocess.run([HASHLB, "check", "-c", lb.path], capture_output=True, text=True)
        check(f"PROXY protocol {version} to the backends" in shown.stdout,
              f"hashlb check shows it: {shown.stdout[:300]!r}")
        # a check that timed out under load closes without a header; none sends another one
        check(set(be.checks) <= {LOCAL[version], b""}, f"{version}: every check: {set(be.checks)}")
        check(lb.stop() == 0, "exit 0")
        be.close()


def headers_v6():
    """An IPv6 client on [::1] (to an IPv4 backend): TCP6 / AF_INET6 with both IPv6 addresses."""
    for version in ("v1", "v2"):
        be = ProxyBackend(version)
        lb = Lb(config([("p", be.addr)], extra=f"proxy_protocol: {version}",
                       listen="\"[::1]:0\""))
        host, port = lb.addr
        ident = f"{version}-v6".encode()
        me, intact = exchange((host.strip("[]"), port), ident, family=socket.AF_INET6)
        check(intact, f"{version} over IPv6: the client's bytes come back intact")
        got, want = be.by_id.get(ident), expected(version, me, ("::1", port))
        check(got == want, f"{version} over IPv6: header {got!r}, want {want!r}")
        check(lb.stop() == 0, "exit 0")
        be.close()


def reload_switches_it_on():
    """off sends the client's bytes alone; after a reload to v2, new connections and health
    checks get the header, and a connection opened before the reload goes on without one."""
    be = ProxyBackend("none")
    lb = Lb(config([("p", be.addr)]))
    check(lb.service()["proxy_protocol"] == "off", "the admin API shows proxy_protocol off")
    held = connect(lb.addr, client_ip(1))
    held.sendall(b"before\n")
    check(held.recv(100) == b"before\n" and be.by_id.get(b"before") == b"",
          "off: the client's bytes alone")
    be.version = "v2"
    lb.rewrite(config([("p", be.addr)], extra="proxy_protocol: v2"))
    rc, so, se = lb.ctl("reload")
    check(rc == 0 and lb.service()["proxy_protocol"] == "v2", f"reload to v2, shown live: {se}")
    me, intact = exchange(lb.addr, b"after-reload", src=client_ip(2))
    got = be.by_id.get(b"after-reload")
    check(intact and got == expected("v2", me, lb.addr),
          f"after the reload a new connection has the v2 header: {got!r}")
    wait_checks(lb, be, "v2")
    held.sendall(b"still\n")
    check(held.recv(100) == b"still\n", "the connection from before the reload is unchanged")
    held.close()
    check(lb.stop() == 0, "exit 0")
    be.close()


def proxied(lb_addr, header, ident, parts=1, src=None):
    """A client behind a proxy (connecting from <src>): <header>, then an <ident> line and some
    bytes, the whole sent in <parts> pieces 0.1 s apart; returns whether the echo came back
    intact."""
    s = connect(lb_addr, src, timeout=10)
    data = header + ident + b"\nafter the header\n"
    cut = [len(data) * k // parts for k in range(parts + 1)]
    try:
        for k in range(parts):
            if k:
                time.sleep(0.1)
            s.sendall(data[cut[k]:cut[k + 1]])
        s.shutdown(socket.SHUT_WR)
        back = read_to_eof(s)
    except OSError:  # reset by hashlb (ECONNRESET, then ENOTCONN)
        back = None
    s.close()
    return back == data[len(header):]


def accept_proxy_hashes_the_client():
    """accept_proxy: hashlb reads the PROXY header its clients come with (v1, v2 with TLVs,
    split across segments), hashes the client it names (the backend each reached is the one
    `hashlb lookup` gives for that address), and passes that client on in its own header;
    a LOCAL header means the connection's own address."""
    bes = {n: ProxyBackend("v2") for n in ("a", "b", "c")}
    lb = Lb(config([(n, b.addr) for n, b in bes.items()],
                   extra="accept_proxy: true\nproxy_protocol: v2"))
    clients = [f"203.0.113.{i}" for i in range(1, 41)]
    want = {c: v[0] for c, v in lookup(lb.path, clients + [client_ip(0)]).items()}
    for i, c in enumerate(clients):
        src, dst = (c, 40000 + i), ("192.0.2.1", 443)
        header = expected("v1" if i % 2 else "v2", src, dst)
        if i % 4 == 0:  # v2 with a NOOP TLV after the addresses
            header = header[:15] + bytes([header[15] + 5]) + header[16:] + b"\x04\x00\x02hi"
        ident = f"client-{i}".encode()
        ok = proxied(lb.addr, header, ident, parts=3 if i % 5 == 0 else 1)
        reached = [n for n, b in bes.items() if ident in b.by_id]
        check(ok and reached == [want[c]],
              f"{c} ({'split, ' if i % 5 == 0 else ''}{header[:5]!r}): intact {ok}, reached "
              f"{reached}, lookup says {want[c]}")
        if reached:
            got = bes[reached[0]].by_id[ident]
            check(got == expected("v2", src, dst), f"{c}: passed on as {got!r}")
    ident = b"local"
    check(proxied(lb.addr, LOCAL["v2"], ident), "a LOCAL header: served")
    reached = [n for n, b in bes.items() if ident in b.by_id]
    check(reached == [want[client_ip(0)]],
          f"a LOCAL header hashes the connection's own address: {reached}")
    check(metric_sum(lb, "hashlb_service_bad_headers_total") == 0, "no bad header counted")
    shown = subprocess.run([HASHLB, "check", "-c", lb.path], capture_output=True, text=True)
    check(lb.service()["accept_proxy"] is True and
          "PROXY protocol expected from the clients" in shown.stdout,
          "the admin API and hashlb check show accept_proxy")
    check(lb.stop() == 0, "exit 0")
    for b in bes.values():
        b.close()


def accept_proxy_refuses_the_rest():
    """accept_proxy: a client without a valid header, one that stops half-way, and one that
    sends nothing are reset (the last at the connect timeout; before, it got a FIN, the others
    the kernel's reset for their unread bytes), counted, and never reach a backend; one that
    closes before sending a byte (a TCP health check) is not counted."""
    be = ProxyBackend("v2")
    lb = Lb(config([("p", be.addr)], extra="accept_proxy: true\nlog_connections: true\n"
                                           "timeouts:\n  connect: 300ms"))
    ends = []
    for data in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"PROXY TCP4 1.2.3.4 5.6.7.8 1 99999\r\n",
                 V2_SIG + b"\x21\x11\x00", b""):
        s = connect(lb.addr, timeout=10)
        if data:
            s.sendall(data)
            if data.startswith(V2_SIG):
                s.shutdown(socket.SHUT_WR)  # stops short of the header
        ends.append(outcome(s))
        s.close()
    check(ends == [(0, "RST")] * 4, f"each reset by hashlb: {ends}")
    # a client that closes before sending a byte (a front proxy's TCP check) is no bad header,
    # whether it ends with FIN or, as HAProxy's checks do, with RST
    for k in range(6):
        s = connect(lb.addr)
        if k % 2:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    # each of the 10 ended, its line logged (those 6 end=client_closed or client_reset), the
    # counter read then: not before hashlb has seen the 6 end
    def ends_logged():
        return [l.split(" end=")[1].split()[0] for l in lb.log if " msg=connection " in l]

    lb.wait(lambda: len(ends_logged()) >= 10)
    got = ends_logged()
    check(len(got) == 10 and got.count("bad_header") == 4 and
          set(got) <= {"bad_header", "client_closed", "client_reset"},
          f"the 10 clients' ends logged, the 6 that sent nothing closed or reset: {got}")
    check(metric_sum(lb, "hashlb_service_bad_headers_total") == 4,
          f"counted: 4 bad headers, not the clients that closed or reset before sending "
          f"anything: {metric_sum(lb, 'hashlb_service_bad_headers_total')}")
    check(not be.by_id, f"no client reached the backend: {list(be.by_id)}")
    check(lb.stop() == 0, "exit 0")
    be.close()


def accept_proxy_from_only_the_listed():
    """accept_proxy_from: only the listed senders may name a client in a PROXY header; a
    connection from anywhere else is closed at once (before its header is read), counted, and
    never reaches a backend. A reload changes the list for new connections. Health checks off:
    a check timing out on a loaded machine must not take the one backend away."""
    be = ProxyBackend("none")
    front, other = "127.0.0.2", "127.0.0.3"
    lb = Lb(config([("p", be.addr)],
                   extra='accept_proxy: true\naccept_proxy_from: [127.0.0.2, "::1"]',
                   health=NO_CHECKS))
    header = expected("v1", ("203.0.113.7", 5555), ("192.0.2.1", 443))
    check(proxied(lb.addr, header, b"front-1", src=front) and b"front-1" in be.by_id,
          "the listed front proxy's client is served")
    check(not proxied(lb.addr, header, b"other-1", src=other) and b"other-1" not in be.by_id,
          "a valid header from an unlisted source is refused")
    check(lb.wait(lambda: metric_sum(lb, "hashlb_service_untrusted_total") == 1),
          f"and counted: {metric_sum(lb, 'hashlb_service_untrusted_total')}")
    check(metric_sum(lb, "hashlb_service_bad_headers_total") == 0, "not as a bad header")
    svc = lb.service()
    shown = subprocess.run([HASHLB, "check", "-c", lb.path], capture_output=True, text=True)
    check(svc["accept_proxy_from"] == ["127.0.0.2/32", "::1/128"] and
          svc["connections"]["untrusted"] == 1 and
          "sent by 127.0.0.2/32, ::1/128" in shown.stdout,
          f"the admin API and hashlb check show the list: {svc['accept_proxy_from']}")
    held = connect(lb.addr, front, timeout=10)
    held.sendall(header + b"held\n")
    check(held.recv(100) == b"held\n", "a connection from the front proxy, open")

    lb.rewrite(config([("p", be.addr)],
                      extra="accept_proxy: true\naccept_proxy_from: [127.0.0.0/30]",
                      health=NO_CHECKS))
    rc, so, se = lb.ctl("reload")
    check(rc == 0 and lb.service()["accept_proxy_from"] == ["127.0.0.0/30"],
          f"reload to 127.0.0.0/30: {se}")
    check(proxied(lb.addr, header, b"other-2", src=other) and b"other-2" in be.by_id,
          "now .3 is listed: served (untrusted %s, bad headers %s, no backend %s)" % tuple(
              metric_sum(lb, m) for m in ("hashlb_service_untrusted_total",
                                          "hashlb_service_bad_headers_total",
                                          "hashlb_service_no_backend_total")))
    check(not proxied(lb.addr, header, b"other-3", src="127.0.0.4"),
          "127.0.0.4, outside the /30: refused")
    held.sendall(b"still\n")
    check(held.recv(100) == b"still\n", "the connection from before the reload is unchanged")
    held.close()
    check(metric_sum(lb, "hashlb_service_untrusted_total") == 2, "two refused in all")
    check(lb.stop() == 0, "exit 0")
    be.close()


def untrusted_source_is_logged():
    """A connection refused because its source is not in accept_proxy_from is logged (warn),
    naming the source and the service: before, only hashlb_service_untrusted_total rose, and an
    operator could not tell which host (a front proxy left out of the list, a scan) it was. At
    most one line a second for each worker and service, so a flood does not flood the log:
    each line says how many refusals went unlogged since the one before (suppressed=)."""
    be = ProxyBackend("none")
    lb = Lb(config([("p", be.addr)], workers=1,
                   extra="accept_proxy: true\naccept_proxy_from: [127.0.0.2]", health=NO_CHECKS))
    marker = 'msg="connection from a source not in accept_proxy_from, reset" '

    def lines():
        return [logfmt_fields(l) for l in lb.log if marker in l]

    s = connect(lb.addr, "127.0.0.3", timeout=10)
    port = s.getsockname()[1]
    check(outcome(s) == (0, "RST"), "an unlisted source is reset")
    s.close()
    check(lb.wait(lambda: lines()), "and logged")
    first = lines()[0]
    check(first["level"] == "warn" and first["service"] == "t" and
          first["source"] == f"127.0.0.3:{port}" and first["suppressed"] == "0",
          f"the line names the source and the service: {first}")
    # a burst, hashlb stopped while the kernel queues it: taken in one go, well within a second
    with frozen(lb.proc):
        burst = [connect(lb.addr, "127.0.0.4", timeout=10) for _ in range(100)]
    check(lb.wait(lambda: metric_sum(lb, "hashlb_service_untrusted_total") == 101),
          f"each refusal counted: {metric_sum(lb, 'hashlb_service_untrusted_total')}")
    for c in burst:
        c.close()
    # one refusal at a time until one is logged: that line counts every refusal before it.
    # Waited for by its source, not by a count of lines: a burst's line (the burst came a
    # second or more after the first line, on a slow machine) may reach the log after its
    # refusals are counted, and it is no later refusal's.
    later = []

    def logged_later():
        return [l for l in lines() if l["source"] in later]

    while not logged_later() and len(later) < 300:
        s = connect(lb.addr, "127.0.0.5", timeout=10)
        later.append(f"127.0.0.5:{s.getsockname()[1]}")
        s.close()
        n = 101 + len(later)
        check(lb.wait(lambda: metric_sum(lb, "hashlb_service_untrusted_total") == n),
              f"refusal {n} counted")
        lb.wait(logged_later, timeout=0.2)
    got = lines()  # in the worker's order: every burst line before a later one
    check(logged_later() and got[-1]["source"] in later,
          f"a later refusal is logged again: {got[-1]}")
    # counted here, where every burst line has been read (a later line came after them): just
    # after the burst was counted, its lines could still be on their way from the worker's log
    # buffer, and a line a refusal passed as well
    burst_lines = [l for l in got if l["source"].startswith("127.0.0.4:")]
    check(len(burst_lines) < 50, f"the burst is not a line each: {len(burst_lines)} lines for 100")
    upto = 101 + later.index(got[-1]["source"]) + 1
    told = sum(1 + int(l["suppressed"]) for l in got)
    check(told == upto, f"the lines account for every refusal up to the last: {told} of {upto}")
    check(not be.by_id, "none reached the backend")
    check(lb.stop() == 0, "exit 0")
    be.close()


def untrusted_line_dropped_is_told_later():
    """A refusal's line that finds the worker's log buffer full (the log's reader behind:
    journald under a flood) is dropped, counted in hashlb_log_dropped_total; the refusals it
    told of go to the next line's suppressed=, so that the lines still account for every
    refusal up to the last. Before, the count was reset as if the line had been written: a
    refusal that no line told of."""
    marker = 'msg="connection from a source not in accept_proxy_from, reset" '
    be = ProxyBackend("none")
    sock = tmppath("untrusted-dropped-admin.sock")
    text = "\n".join([
        "workers: 1", f"admin: unix:{sock}", "services:",
        "  - name: t", "    listen: 127.0.0.1:0", "    accept_proxy: true",
        "    accept_proxy_from: [127.0.0.2]", "    health:", "      enabled: false",
        "    backends:", "      - name: p", f"        address: {be.addr}",
        "  - name: c", "    listen: 127.0.0.1:0", "    log_connections: true",
        "    health:", "      enabled: false", "      passive: false",
        "    backends:", "      - name: d", f"        address: 127.0.0.1:{dead_port()}"]) + "\n"
    # hashlb's stderr a pipe of this test's, not read until the buffer behind it is full
    r, w = os.pipe()
    lb = Lb.__new__(Lb)
    Hashlb.__init__(lb, text, wait=False, pass_fds=(w,),
                    wrap=("sh", "-c", f'exec "$@" 2>/proc/self/fd/{w}', "sh"))
    os.close(w)
    err = os.fdopen(r, errors="surrogateescape")
    addrs, f = {}, {}
    while f.get("msg") != "started":  # its listeners and the admin endpoint's are bound
        line = err.readline()
        if not line:
            raise AssertionError(f"hashlb exited before it started: {lb.proc.wait()}")
        f = logfmt_fields(line)
        if f.get("msg") == "listening":
            host, port = f["addr"].rsplit(":", 1)
            addrs[f["service"]] = (host, int(port))
    lb.admin = f"unix:{sock}"
    # connection lines of service c until lines are dropped: the pipe and the buffer are full
    n = 0
    while metric_sum(lb, "hashlb_log_dropped_total") == 0 and n < 20000:
        for _ in range(200):
            connect(addrs["c"], timeout=10).close()
        n += 200
    check(metric_sum(lb, "hashlb_log_dropped_total") > 0, f"lines dropped after {n} clients")
    s = connect(addrs["t"], "127.0.0.3", timeout=10)
    s.close()
    check(lb.wait(lambda: metric_sum(lb, "hashlb_service_untrusted_total") == 1),
          "the refusal counted")
    # the log read again; one refusal at a time until one is logged
    lines = []
    threading.Thread(target=lambda: lines.extend(err), daemon=True).start()

    def logged():
        return [logfmt_fields(l) for l in list(lines) if marker in l]

    refused = 1
    while not logged() and refused < 300:
        connect(addrs["t"], "127.0.0.3", timeout=10).close()
        refused += 1
        check(lb.wait(lambda: metric_sum(lb, "hashlb_service_untrusted_total") == refused),
              f"refusal {refused} counted")
        lb.wait(logged, timeout=0.2)
    got = logged()
    told = sum(1 + int(l["suppressed"]) for l in got)
    check(len(got) == 1 and told == refused,
          f"the dropped line's refusal told by the next: {told} of {refused}, {got}")
    lb.proc.terminate()
    check(lb.proc.wait(timeout=15) == 0, "exit 0")
    be.close()


def listed_proxy_resetting_is_not_untrusted():
    """A listed front proxy whose TCP checks connect and reset at once (SO_LINGER 0) is not
    counted as an untrusted source: a reset that comes before hashlb reads the peer's address
    used to be, which sets off the 'someone else reaching the listener' alarm on every check."""
    be = ProxyBackend("none")
    lb = Lb(config([("p", be.addr)], workers=1,
                   extra="accept_proxy: true\naccept_proxy_from: [127.0.0.2]\n"
                         "log_connections: true",
                   health=NO_CHECKS))
    host, port = lb.addr
    # hashlb stopped while the checks come and go: the kernel completes each handshake into
    # the listener's queue and takes the reset, and hashlb finds every one reset before it
    # reads its address. Left running, it could read them first, and the test then checked
    # nothing it is meant to.
    with frozen(lb.proc):
        for _ in range(300):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.bind(("127.0.0.2", 0))
            s.connect((host, port))
            s.close()
    check(lb.wait(lambda: sum("end=client_reset" in l for l in lb.log) == 300, timeout=20),
          f"every reset is logged as one: {sum('end=client_reset' in l for l in lb.log)} of 300")
    gone = sum("end=client_reset" in l and " client=- " in l for l in lb.log)
    check(gone == 300, f"each reset before hashlb read its address (client=-): {gone} of 300")
    n = metric_sum(lb, "hashlb_service_untrusted_total")
    check(n == 0, f"none is counted as untrusted: {n} of 300")
    header = expected("v1", ("203.0.113.7", 5555), ("192.0.2.1", 443))
    check(proxied(lb.addr, header, b"after", src="127.0.0.2") and b"after" in be.by_id,
          "and the proxy's clients are served")
    check(lb.stop() == 0, "exit 0")
    be.close()


def deny_clients_by_the_header():
    """With accept_proxy, allow_clients and deny_clients judge the client the header names,
    not the proxy that sent it."""
    be = ProxyBackend("none")
    lb = Lb(config([("p", be.addr)],
                   extra="accept_proxy: true\nlog_connections: true\n"
                         "deny_clients: [203.0.113.0/24]",
                   health=NO_CHECKS))
    ok = expected("v1", ("198.51.100.1", 5555), ("192.0.2.1", 443))
    bad = expected("v1", ("203.0.113.7", 5555), ("192.0.2.1", 443))
    check(proxied(lb.addr, ok, b"ok-1") and b"ok-1" in be.by_id,
          "a client the deny list does not name is served")
    check(not proxied(lb.addr, bad, b"bad-1") and b"bad-1" not in be.by_id,
          "one it names is closed, though its proxy is not listed")
    check(lb.wait(lambda: metric_sum(lb, "hashlb_service_denied_total") == 1),
          f"counted as denied: {metric_sum(lb, 'hashlb_service_denied_total')}")
    check(lb.wait_log(r"msg=connection .*client=203\.0\.113\.7:5555 .*end=denied"),
          "its log line names the client of the header")
    check(lb.stop() == 0, "exit 0")
    be.close()


def urgent_byte_in_a_header():
    """accept_proxy: a client whose header is cut by an urgent byte (MSG_OOB: the kernel stops
    every read at its mark, so the header can never be read whole though the socket stays
    readable), or whose first byte is urgent (no header starts so, and the socket reports the
    urgent byte as long as it is unread), is reset as a bad header at once, counted and logged
    as one, and the worker does not spin on it (it used to: a CPU second a second, until the
    connect timeout); the next client is served, and so is one whose urgent byte comes after
    its whole header."""
    be = ProxyBackend("none")
    # a connect timeout far past the waits below: only hashlb seeing the bad header resets it
    lb = Lb(config([("p", be.addr)], workers=1,
                   extra="accept_proxy: true\nlog_connections: true\ntimeouts:\n  connect: 60s",
                   health=NO_CHECKS))
    header = expected("v1", ("203.0.113.7", 5555), ("192.0.2.1", 443))
    # v1 with the rest of the header after the urgent byte; v2 with nothing after it; the
    # urgent byte alone, before any header
    cases = ((header[:14], header[14:] + b"after\n"), (V2_SIG[:8], b""), (b"", b""))
    for k, (before, after) in enumerate(cases):
        name = repr(before[:5]) if before else "the urgent byte first"
        s = connect(lb.addr, timeout=10)
        s.sendall(before)
        s.send(b"!", socket.MSG_OOB)
        end = None
        if after:
            try:
                s.sendall(after)
            except ConnectionResetError:  # reset already: the error is taken, not read below
                end = (0, "RST")
        # the client kept open: a FIN would end a spin (as a header cut short)
        t0 = turn_mark(lb)
        time.sleep(1.0)
        turns = turn_rate(lb, t0)
        check(turns < REST_TURN_RATE, f"{name}: the worker does not spin: {turns:.0f} turns a second")
        try:
            end = end or outcome(s)
        except TimeoutError:
            end = "still open after 10 s"
        s.close()
        check(end == (0, "RST"), f"{name}: reset by hashlb: {end}")
        check(lb.wait(lambda: metric_sum(lb, "hashlb_service_bad_headers_total") == k + 1),
              f"{name}: counted as a bad header: "
              f"{metric_sum(lb, 'hashlb_service_bad_headers_total')}")
    check(lb.wait(lambda: sum("end=bad_header" in l for l in lb.log) == len(cases)),
          f"all logged as bad headers: {[l for l in lb.log if 'end=' in l]}")
    check(not be.by_id, f"none reached the backend: {list(be.by_id)}")
    check(proxied(lb.addr, header, b"next") and b"next" in be.by_id, "the next client is served")
    # an urgent byte after a whole header (here one split across segments) is the client's
    s = connect(lb.addr, timeout=10)
    s.sendall(header[:14])
    time.sleep(0.1)
    s.sendall(header[14:] + b"urgent-after\n")
    s.send(b"!", socket.MSG_OOB)
    s.sendall(b"more\n")
    s.shutdown(socket.SHUT_WR)
    back = read_to_eof(s)
    s.close()
    check(b"urgent-after" in be.by_id and back == b"urgent-after\nmore\n",
          f"one with an urgent byte after its header is served (the byte dropped): {back!r}")
    check(metric_sum(lb, "hashlb_service_bad_headers_total") == len(cases), "and is no bad header")
    check(lb.stop() == 0, "exit 0")
    be.close()

# Loaded into hashlb (LD_PRELOAD): its first send() of a v2 PROXY header to the port in
# HLB_TEST_REFUSE_PORT fails as it does when that backend reset the connection right after
# accepting it, a moment no real backend can be timed to hit.


def header_refused_then_retried():
    """accept_proxy and proxy_protocol: when the first backend takes no header (reset at
    once), the client is retried on the next one, whose header still names the client the
    front proxy named, not the proxy itself (the addresses used to be freed with the first
    try)."""
    bes = {n: ProxyBackend("v2") for n in ("a", "b", "c")}
    cfg = config([(n, b.addr) for n, b in bes.items()],
                 extra="accept_proxy: true\nproxy_protocol: v2\nconnect_retries: 2\n"
                       "log_connections: true", health=NO_CHECKS)
    client = "203.0.113.9"
    prefs = lookup(tmpfile("lookup.yaml", cfg), [client])[client]
    first = bes[prefs[0]].addr.rsplit(":", 1)[1]
    env = shim_env("refuse_header", HLB_TEST_REFUSE_PORT=first)
    lb = Lb(cfg, env=env)
    src, dst = (client, 40000), ("192.0.2.1", 443)
    ok = proxied(lb.addr, expected("v1", src, dst), b"retried")
    reached = [n for n, b in bes.items() if b"retried" in b.by_id]
    check(ok and reached == [prefs[1]],
          f"served by the next backend of {prefs}: intact {ok}, reached {reached}")
    if reached:
        got = bes[reached[0]].by_id[b"retried"]
        check(got == expected("v2", src, dst), f"which is told the client: {got!r}")
    check(metric_sum(lb, "hashlb_backend_retries_total") == 1, "one retry counted")
    check(lb.stop() == 0, "exit 0")
    for b in bes.values():
        b.close()


def client_reset_while_connecting():
    """proxy_protocol: a client that resets while its backend connect is in flight, and
    before hashlb watches it (a connect under 100 ms), is found as hashlb reads its address
    for the header once the connect completes: the backend is reset and the line says
    end=client_reset err=ECONNRESET, as every client reset is logged. Before, it said
    err=ENOTCONN, the error of the getpeername() that found the client gone."""
    bh = BlackHole()  # the connect waits (its SYN dropped) until the queue is emptied below
    bport = int(bh.addr.rsplit(":", 1)[1])
    lb = Lb(config([("bh", bh.addr)], workers=1, health=NO_CHECKS,
                   extra="proxy_protocol: v1\nlog_connections: true\ntimeouts:\n  connect: 20s"))
    fillers = syn_sent(bport)  # the BlackHole's own connects whose SYN it drops
    s = connect(lb.addr, client_ip(1))
    check(wait_until(lambda: syn_sent(bport) == fillers + 1), "hashlb connects to the backend")
    with frozen(lb.proc):
        # gone before hashlb sees anything of it: no scan has watched it yet (a connect
        # 100 ms old), and it is stopped now
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        for f in bh.fillers:  # room in the backend's queue: the SYN sent again gets through
            f.close()
        bh.sock.accept()[0].close()
        check(wait_until(lambda: syn_sent(bport) == 0, timeout=15),
              "the connect completes while hashlb is stopped")
    check(lb.wait_log("msg=connection "), "the connection is logged")
    line = next((l for l in lb.log if "msg=connection " in l), "")
    check(" backend=- " in line and "end=client_reset err=ECONNRESET" in line,
          f"logged as the client's reset: {line}")
    check(lb.stop() == 0, "exit 0")
    bh.close()


run_tests([headers_v4, headers_v6, reload_switches_it_on, accept_proxy_hashes_the_client,
           accept_proxy_refuses_the_rest, accept_proxy_from_only_the_listed,
           untrusted_source_is_logged, untrusted_line_dropped_is_told_later,
           listed_proxy_resetting_is_not_untrusted,
           deny_clients_by_the_header, header_refused_then_retried, urgent_byte_in_a_header,
           client_reset_while_connecting])
