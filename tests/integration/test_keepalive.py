#!/usr/bin/env python3
"""keepalive: hashlb sets TCP keepalive with the configured idle, interval and count on both
sockets of each connection (read back from hashlb's own sockets); a client or backend whose
connection vanished without a FIN or RST (its host rebooted: TCP_REPAIR closes a socket
silently here) is found by the first probe, and the other side is closed, long before the
idle timeout; without keepalive such a connection stays. A reload applies to new connections."""
import ctypes
import os
import socket
import threading
import time

from ctltest import Lb
from ctltest import config as ctl_config
from lbtest import check, client_ip, connect, run_tests, serve_each

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
    time.sleep(3)
    check(not be.conns[0][1].is_set(), "keepalive off: the vanished client's connection stays")

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


run_tests([settings_on_both_sockets, vanished_peers_found])
