#!/usr/bin/env python3
"""Peers that vanish without a FIN or RST. keepalive: hashlb sets TCP keepalive with the
configured idle, interval and count on both sockets of each connection (read back from
hashlb's own sockets); a client or backend whose connection vanished (its host rebooted:
TCP_REPAIR closes a socket silently here) is found by the first probe, and the other side is
closed, long before the idle timeout; without keepalive such a connection stays. A reload
applies to new connections. In network namespaces this test creates, a client whose link goes
down while a backend streams to it (its window full, then no ACK at all): the idle timeout
ends the connection, on splice and on buffers, hashlb holds nothing for it afterwards and does
not spin meanwhile; a SIGTERM drain with such a client still connected exits at the drain
deadline; and a backend whose link goes down while its connection is quiet is found by
keepalive: ETIMEDOUT, its client reset, logged and counted once as backend_reset."""
import contextlib
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from ctltest import REST_TURN_RATE, Lb, metric_sum, turn_mark, turn_rate
from ctltest import config as ctl_config
from lbtest import check, client_ip, connect, run_tests, serve_each, tmppath

TCP_REPAIR = 19  # linux/tcp.h; not in Python's socket module
SYS_PIDFD_GETFD = 438
_libc = ctypes.CDLL(None, use_errno=True)


class HoldBackend:
    """Echoes, and keeps every connection: .conns[i] = (socket, Event set when the peer ends
    it); .vanish(i) makes connection i vanish."""

    def __init__(self):
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.addr = "127.0.0.1:%d" % self.srv.getsockname()[1]
        self.conns = []
        self._vanish = []
        self.close = serve_each(self.srv, self._one)

    def _one(self, c):
        ended, gone = threading.Event(), threading.Event()
        self._vanish.append(gone)
        self.conns.append((c, ended))
        # short timeouts: a socket may only vanish when no recv() holds it
        c.settimeout(0.05)
        try:
            while not gone.is_set():
                try:
                    d = c.recv(65536)
                except socket.timeout:
                    continue
                if not d:
                    break
                c.sendall(d)
        except OSError:
            pass
        if gone.is_set():
            vanish(c)
            return
        ended.set()
        c.close()

    def vanish(self, i):
        self._vanish[i].set()

    def wait_conns(self, n, timeout=10):
        end = time.time() + timeout
        while len(self.conns) < n and time.time() < end:
            time.sleep(0.02)
        return len(self.conns) >= n


def config(backends, extra=""):
    """One service, health checks off: every connection a backend sees is a client's."""
    return ctl_config(backends, extra=extra, health="enabled: false")


def vanish(s):
    """Close <s> without a FIN or RST, as if its host had rebooted: the peer's next segment
    (a keepalive probe) finds no socket and gets a RST."""
    s.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
    s.close()


def hashlb_socket(pid, peer):
    """A duplicate of hashlb's socket connected to <peer> (host, port), or None."""
    pidfd = os.pidfd_open(pid)
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                if not os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                    continue
            except OSError:
                continue
            fd = _libc.syscall(SYS_PIDFD_GETFD, pidfd, int(name), 0)
            if fd < 0:
                continue
            s = socket.socket(fileno=fd)
            try:
                if s.type == socket.SOCK_STREAM and s.getpeername()[:2] == peer:
                    return s
            except OSError:
                pass
            s.close()
    finally:
        os.close(pidfd)
    return None


def keepalive_of(s):
    """(SO_KEEPALIVE, idle, interval, count) of socket <s>."""
    return (s.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT))


def opened(lb, src):
    """A connection from <src> through <lb>, one line echoed."""
    s = connect(lb.addr, src)
    s.sendall(b"hi\n")
    check(s.recv(3) == b"hi\n", f"{src}: echoed")
    return s


def settings_on_both_sockets():
    """hashlb's socket to the client and its socket to the backend carry the configured
    keepalive; after a reload to off, a new connection's do not and the old one's keep it."""
    be = HoldBackend()
    ka = "keepalive: {idle: 7s, interval: 3s, count: 4}"
    lb = Lb(config([("a", be.addr)], extra=ka))
    s = opened(lb, client_ip(1))
    be.wait_conns(1)
    bport = be.conns[0][0].getpeername()
    front = hashlb_socket(lb.proc.pid, s.getsockname()[:2])
    back = hashlb_socket(lb.proc.pid, ("127.0.0.1", be.srv.getsockname()[1]))
    check(front and back, "found hashlb's two sockets of the connection")
    if front and back:
        check(back.getsockname()[:2] == bport[:2], "the backend socket is this connection's")
        check(keepalive_of(front) == (1, 7, 3, 4), f"client side: {keepalive_of(front)}")
        check(keepalive_of(back) == (1, 7, 3, 4), f"backend side: {keepalive_of(back)}")
        front.close()
        back.close()
    lb.rewrite(config([("a", be.addr)]))
    rc, so, se = lb.ctl("reload")
    check(rc == 0, f"reload to keepalive off: {se}")
    s2 = opened(lb, client_ip(2))
    front2 = hashlb_socket(lb.proc.pid, s2.getsockname()[:2])
    check(front2 and keepalive_of(front2)[0] == 0,
          f"after the reload a new connection has none: {front2 and keepalive_of(front2)}")
    if front2:
        front2.close()
    front = hashlb_socket(lb.proc.pid, s.getsockname()[:2])
    check(front and keepalive_of(front) == (1, 7, 3, 4), "the connection from before keeps it")
    if front:
        front.close()
    s.close()
    s2.close()
    check(lb.stop() == 0, "exit 0")
    be.close()


def vanished_peers_found():
    """idle 1s: a client that vanished is found and its backend connection closed; a backend
    that vanished is found and its client closed. The idle timeout (10m) plays no part. Without
    keepalive a vanished client's backend connection stays."""
    be = HoldBackend()
    base = "timeouts: {idle: 10m, drain: 1s}"
    lb = Lb(config([("a", be.addr)], extra=base))
    s = opened(lb, client_ip(1))
    be.wait_conns(1)
    vanish(s)
    # its stay is checked once keepalive found a client that vanished after it: how long
    # finding one takes, on this machine now, not a guess at it

    lb.rewrite(config([("a", be.addr)],
                      extra=base + "\nkeepalive: {idle: 1s, interval: 1s, count: 2}"))
    rc, so, se = lb.ctl("reload")
    check(rc == 0, f"reload to keepalive on: {se}")
    s = opened(lb, client_ip(2))
    be.wait_conns(2)
    t0 = time.time()
    vanish(s)
    check(be.conns[1][1].wait(30),
          "keepalive on: the vanished client is found, its backend connection closed")
    print(f"    client found after {time.time() - t0:.1f}s")
    check(not be.conns[0][1].is_set(), "keepalive off: the vanished client's connection "
          "stays, though it vanished before the one keepalive found")

    s = opened(lb, client_ip(3))
    be.wait_conns(3)
    s.settimeout(30)
    be.vanish(2)
    try:
        gone = s.recv(100) == b""
    except ConnectionResetError:
        gone = True
    except OSError:
        gone = False
    check(gone, "a vanished backend is found, and its client's connection closed")
    s.close()
    check(not be.conns[0][1].is_set(), "the connection from before the reload still stays")
    check(lb.stop() == 0, "exit 0")
    be.close()


CLONE_NEWNET = 0x40000000
# hashlb's gauges of what a connection holds: all back to 0 once it is gone
HELD = ("hashlb_connections", "hashlb_backend_active_connections", "hashlb_worker_connections",
        "hashlb_worker_buffers_in_use", "hashlb_worker_spilled_bytes",
        "hashlb_worker_splice_pipes")


def sh(*args):
    p = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {p.stderr.strip()}")


@contextlib.contextmanager
def in_netns(name):
    """The body runs in network namespace <name> (this thread only): sockets made there
    stay there."""
    mine = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns")
        yield
    finally:
        _libc.setns(mine, CLONE_NEWNET)
        os.close(fd)
        os.close(mine)


class Hosts:
    """Namespace "lb" (hashlb and its backend, on its loopback) and client namespaces, each
    on a veth link to "lb": client i is 10.214.i.2, "lb" 10.214.i.1 on that link.
    .vanish(i) takes client i's link down: its host is gone, nothing it sent or would send
    arrives any more, no FIN, no RST."""

    def __init__(self, clients):
        pre = f"hlbgone{os.getpid() % 100000}-"
        self.lb = pre + "lb"
        self.clients = [f"{pre}c{i}" for i in range(1, clients + 1)]
        self.made = []
        try:
            for ns in [self.lb] + self.clients:
                sh("ip", "netns", "add", ns)
                self.made.append(ns)
            sh("ip", "-n", self.lb, "link", "set", "lo", "up")
            for i, ns in enumerate(self.clients, 1):
                sh("ip", "-n", self.lb, "link", "add", f"c{i}", "type", "veth", "peer", "name",
                   "eth0", "netns", ns)
                sh("ip", "-n", self.lb, "addr", "add", f"10.214.{i}.1/24", "dev", f"c{i}")
                sh("ip", "-n", ns, "addr", "add", f"10.214.{i}.2/24", "dev", "eth0")
                sh("ip", "-n", self.lb, "link", "set", f"c{i}", "up")
                sh("ip", "-n", ns, "link", "set", "eth0", "up")
        except BaseException:
            self.close()
            raise

    def connect(self, i, port, rcvbuf=None):
        """A connection from client <i> (1...) to port <port> of "lb" on its link."""
        with in_netns(self.clients[i - 1]):
            s = socket.socket()
            if rcvbuf:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            s.settimeout(10)
            s.connect((f"10.214.{i}.1", port))
        return s

    def vanish(self, i):
        sh("ip", "-n", self.clients[i - 1], "link", "set", "eth0", "down")

    def close(self):
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self.made = []


class StreamBackend:
    """In namespace <ns>, on its loopback: sends to each connection until it fails;
    .ended[i] is set when connection i ends (its peer's FIN or RST)."""

    def __init__(self, ns):
        with in_netns(ns):
            self.srv = socket.create_server(("127.0.0.1", 0))
        self.addr = "127.0.0.1:%d" % self.srv.getsockname()[1]
        self.ended = []
        self.close = serve_each(self.srv, self._one)

    def _one(self, c):
        ended = threading.Event()
        self.ended.append(ended)
        c.settimeout(30)  # bounded: a send that no one takes fails the test, not hangs it
        try:
            while True:
                c.sendall(b"x" * 65536)
        except OSError:
            pass
        ended.set()
        c.close()

    def wait_conns(self, n, timeout=10):
        end = time.time() + timeout
        while len(self.ended) < n and time.time() < end:
            time.sleep(0.02)
        return len(self.ended) >= n


def stalled_vanished_client(hosts, lb, i):
    """Client <i> reads 1 MiB of the stream, stops reading (its window fills, then hashlb's
    sends to it wait), and vanishes."""
    s = hosts.connect(i, lb.addr[1], rcvbuf=65536)
    got = 0
    while got < (1 << 20):
        d = s.recv(1 << 16)
        if not d:
            break
        got += len(d)
    time.sleep(0.5)  # the rest fills its socket and hashlb's; nothing moves any more
    hosts.vanish(i)
    return s


def held(lb):
    return {g: metric_sum(lb, g) for g in HELD}


def lb_in(hosts, be, name, extra, args=()):
    """hashlb in namespace "lb" of <hosts>, one worker, in front of <be> alone, connections
    logged, <extra> added to its service."""
    return Lb(ctl_config([("a", be.addr)], health="enabled: false", workers=1,
                         admin="unix:" + tmppath(f"gone-admin-{name}"), listen="0.0.0.0:0",
                         extra="log_connections: true\n" + extra),
              args=args, wrap=("ip", "netns", "exec", hosts.lb))


def vanished_client_idle_timeout():
    """A client whose host vanishes while a backend streams to it: its window was full, then
    no ACK comes at all. The idle timeout (1 s) ends the connection and the backend's side
    is closed; meanwhile the worker does not spin; afterwards no gauge, descriptor, buffer,
    spill or pipe is held for it, and a new client is served. On splice (the default for a
    bulk stream) and on buffers (spilled data waiting for room)."""
    hosts = Hosts(clients=3)  # 1 and 2 vanish, 3 stays
    try:
        for i, args in ((1, ()), (2, ("--splice-after", "off"))):
            mode = "buffers" if args else "splice"
            be = StreamBackend(hosts.lb)
            lb = lb_in(hosts, be, mode, "timeouts: {idle: 1s, drain: 1s}", args)
            fds = len(os.listdir(f"/proc/{lb.proc.pid}/fd"))
            s = stalled_vanished_client(hosts, lb, i)
            t0 = turn_mark(lb)
            ended = be.wait_conns(1) and be.ended[0].wait(10)
            turns = turn_rate(lb, t0)
            check(ended, f"{mode}: the vanished client's backend connection is closed")
            check(lb.wait_log(r"msg=connection .*\bend=idle_timeout"),
                  f"{mode}: logged end=idle_timeout: {[l for l in lb.log if 'end=' in l]}")
            check(turns < REST_TURN_RATE, f"{mode}: no spin while the send waits: {turns:.0f} turns a second")
            check(lb.wait(lambda: not any(held(lb).values())),
                  f"{mode}: nothing held for it any more: {held(lb)}")
            check(lb.wait(lambda: len(os.listdir(f"/proc/{lb.proc.pid}/fd")) <= fds),
                  f"{mode}: its descriptors closed: {len(os.listdir(f'/proc/{lb.proc.pid}/fd'))}"
                  f" open, {fds} before")
            s.close()  # its host is gone: this FIN goes nowhere
            n = hosts.connect(3, lb.addr[1])
            check(len(n.recv(65536)) > 0, f"{mode}: a new client is served")
            n.close()
            check(lb.stop() == 0, f"{mode}: hashlb exits 0")
            be.close()
            be = None
    finally:
        if be:
            be.close()
        hosts.close()


def user_timeout_finds_a_vanished_reader():
    """keepalive's user_timeout (TCP_USER_TIMEOUT) on both sockets: a client whose host
    vanishes while a backend streams to it, which keepalive alone never finds (no probe
    while data waits for an ACK) and here no idle timeout either (idle: 0), is found once
    its data has gone unacknowledged that long: the connection ends (client_reset,
    err=ETIMEDOUT), the backend's side is closed, nothing is held for it."""
    hosts = Hosts(clients=1)
    be = None
    try:
        be = StreamBackend(hosts.lb)
        lb = lb_in(hosts, be, "ut", "timeouts: {idle: 0, drain: 1s}\n"
                   "keepalive: {idle: 1s, interval: 1s, count: 2, user_timeout: 3s}")
        s = stalled_vanished_client(hosts, lb, 1)
        TCP_USER_TIMEOUT = 18
        for side, peer in (("client", ("10.214.1.2", s.getsockname()[1])),
                           ("backend", ("127.0.0.1", int(be.addr.rsplit(":", 1)[1])))):
            h = hashlb_socket(lb.proc.pid, peer)
            got = h and h.getsockopt(socket.IPPROTO_TCP, TCP_USER_TIMEOUT)
            check(got == 3000, f"{side} side: TCP_USER_TIMEOUT {got}")
            if h:
                h.close()
        ended = be.wait_conns(1) and be.ended[0].wait(20)
        check(ended, "the vanished client's backend connection is closed")
        check(lb.wait_log(r"msg=connection .*\bend=client_reset .*err=ETIMEDOUT"),
              f"logged end=client_reset err=ETIMEDOUT: {[l for l in lb.log if 'end=' in l]}")
        check(lb.wait(lambda: not any(held(lb).values())),
              f"nothing held for it any more: {held(lb)}")
        s.close()
        check(lb.stop() == 0, "hashlb exits 0")
    finally:
        if be:
            be.close()
        hosts.close()


def drain_with_a_vanished_client():
    """SIGTERM while a vanished client's connection is open, a stream to it waiting for room
    (idle timeout 60 s, drain 1 s): hashlb exits 0 at the drain deadline, not at the idle
    timeout, its backend connection closed and logged end=drain_timeout."""
    hosts = Hosts(clients=1)
    be = None
    try:
        be = StreamBackend(hosts.lb)
        lb = lb_in(hosts, be, "drain", "timeouts: {idle: 60s, drain: 1s}")
        s = stalled_vanished_client(hosts, lb, 1)
        t0 = time.time()
        rc = lb.stop(signal.SIGTERM, timeout=15)  # killed past it: not 0
        took = time.time() - t0
        check(rc == 0 and took < 10, f"exits 0 at the drain deadline (1 s): exit status {rc} "
              f"after {took:.1f} s")
        check(be.wait_conns(1) and be.ended[0].wait(10), "its backend connection is closed")
        check(lb.wait_log(r"msg=connection .*\bend=drain_timeout"),
              f"logged end=drain_timeout: {[l for l in lb.log if 'end=' in l]}")
        s.close()
    finally:
        if be:
            be.close()
        hosts.close()


class EchoIn:
    """In namespace <ns>, on <host>: echoes each connection until it ends; .ended[i] is set
    when connection i ends."""

    def __init__(self, ns, host):
        with in_netns(ns):
            self.srv = socket.create_server((host, 0))
        self.addr = "%s:%d" % (host, self.srv.getsockname()[1])
        self.ended = []
        self.close = serve_each(self.srv, self._one)

    def _one(self, c):
        ended = threading.Event()
        self.ended.append(ended)
        try:
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d)
        except OSError:
            pass
        ended.set()
        c.close()


def backend_ends(lb):
    """{end: n} of backend "a" in hashlb_backend_connection_ends_total, those not 0."""
    status, body = lb.http("GET", "/metrics")
    check(status == 200, "GET /metrics")
    return {m.group(1): int(float(m.group(2))) for m in re.finditer(
        r'^hashlb_backend_connection_ends_total\{service="t",backend="a",end="(\w+)"\} (\S+)$',
        body, re.M) if float(m.group(2))}


def keepalive_finds_a_vanished_backend():
    """A backend whose host vanishes (its link down: no FIN, no RST, no answer to anything)
    while its connection is quiet: keepalive (1 s, 1 s, 1 probe) on hashlb's backend socket
    gets no answer, and the kernel ends that socket with ETIMEDOUT. The client is told (reset,
    as for any failure of the backend's socket), the connection is logged once,
    end=backend_reset err=ETIMEDOUT (the backend's socket failed; err= tells a timeout from a
    reset), and counted once under that end in hashlb_backend_connection_ends_total and
    /status; nothing is held for it. On buffers, and on splice (both directions spliced)."""
    hosts = Hosts(clients=2)  # the "clients" are the backends' hosts here, one per mode
    be = None
    try:
        for i, mode, args, size in ((1, "buffers", ("--splice-after", "off"), 3),
                                    (2, "splice", ("--splice-after", "16384"), 1 << 20)):
            be = EchoIn(hosts.clients[i - 1], f"10.214.{i}.2")
            lb = lb_in(hosts, be, "beka-" + mode, "timeouts: {idle: 10m, drain: 1s}\n"
                       "keepalive: {idle: 1s, interval: 1s, count: 1}", args)
            with in_netns(hosts.lb):
                s = socket.create_connection(("127.0.0.1", lb.addr[1]), timeout=10)
            sent = bytes(range(256)) * (size // 256) or b"hi\n"
            threading.Thread(target=s.sendall, args=(sent,), daemon=True).start()
            got = b""
            while len(got) < len(sent):
                d = s.recv(1 << 16)
                if not d:
                    break
                got += d
            check(got == sent, f"{mode}: {len(sent)} bytes echoed through hashlb: {len(got)}")
            if mode == "splice":
                pipes = metric_sum(lb, "hashlb_worker_splice_pipes")
                check(pipes == 2, f"splice: both directions spliced: {pipes} pipes")
            hosts.vanish(i)
            s.settimeout(60)  # bounded: keepalive ends it in about 2 s
            try:
                how = "FIN" if s.recv(100) == b"" else "data"
            except ConnectionResetError:
                how = "RST"
            except OSError as e:
                how = repr(e)
            check(how == "RST", f"{mode}: the client's connection is reset: {how}")
            check(lb.wait_log(r" msg=connection "), f"{mode}: a connection line")
            lines = [l for l in lb.log if " msg=connection " in l]
            check(len(lines) == 1 and re.search(r"\bend=backend_reset err=ETIMEDOUT$", lines[0]),
                  f"{mode}: logged once, end=backend_reset err=ETIMEDOUT: {lines}")
            ends = {}

            def counted():
                nonlocal ends
                ends = backend_ends(lb)
                return ends == {"backend_reset": 1}

            lb.wait(counted)
            check(ends == {"backend_reset": 1}, f"{mode}: counted once, backend_reset: {ends}")
            b = lb.backend("a")
            st = b and {k: v for k, v in b["ends"].items() if v}
            check(st == {"backend_reset": 1}, f"{mode}: /status ends agree: {st}")
            check(lb.wait(lambda: not any(held(lb).values())),
                  f"{mode}: nothing held for it any more: {held(lb)}")
            s.close()
            check(lb.stop() == 0, f"{mode}: hashlb exits 0")
            be.close()
            be = None
    finally:
        if be:
            be.close()
        hosts.close()


if os.geteuid() != 0 or not shutil.which("ip"):
    # TCP_REPAIR needs CAP_NET_ADMIN; the vanishing clients, network namespaces
    print("SKIP: needs root (TCP_REPAIR, network namespaces) and iproute2")
    sys.exit(77)
try:
    Hosts(clients=1).close()
except (RuntimeError, OSError) as e:
    print(f"SKIP: cannot create network namespaces: {e}")
    sys.exit(77)
run_tests([settings_on_both_sockets, vanished_peers_found, vanished_client_idle_timeout,
           user_timeout_finds_a_vanished_reader, drain_with_a_vanished_client,
           keepalive_finds_a_vanished_backend])
