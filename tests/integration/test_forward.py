#!/usr/bin/env python3
"""hashlb run forwards TCP correctly: bytes intact both ways under backpressure, half-close
propagated, 1,000 concurrent connections, max_connections and the idle timeout enforced."""
import hashlib
import random
import socket
import threading
import time

from lbtest import Backend, Hashlb, check, client_ip, config, connect, read_line, run_tests

backends = [Backend(n) for n in ("a", "b", "c")]
BACKENDS = [(b.name, b.addr) for b in backends]
MiB = 1 << 20


def bytes_intact():
    """100 MiB each way, random chunk sizes, a reader that stalls: both checksums match."""
    lb = Hashlb(config(BACKENDS))
    total = 100 * MiB
    rng = random.Random(7)
    block = rng.randbytes(4 * MiB)
    s = connect(lb.addr, timeout=60)
    name = read_line(s)
    sent = hashlib.sha256()

    def send():
        off = 0
        while off < total:
            n = min(rng.randint(1, 256 * 1024), total - off)
            start = off % (len(block) - 256 * 1024)
            chunk = block[start:start + n]
            s.sendall(chunk)
            sent.update(chunk)
            off += n
        s.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=send)
    t.start()
    got, n, stalls, peak = hashlib.sha256(), 0, 0, 0
    rrng = random.Random(11)
    while True:
        if n > 8 * MiB and stalls < 3 and n > stalls * 30 * MiB:
            # a slow reader: everything in flight piles up in hashlb unless it stops reading
            time.sleep(0.5)
            stalls += 1
            peak = max(peak, lb.rss_kib())
        d = s.recv(rrng.choice((1, 100, 4096, 65536, 1 << 20)))
        if not d:
            break
        got.update(d)
        n += len(d)
    t.join()
    s.close()
    check(name in ("a", "b", "c"), f"greeting from a backend, got {name!r}")
    check(n == total, f"received {n} bytes of {total}")
    check(got.digest() == sent.digest(), "the bytes that came back are the bytes sent (sha256)")
    check(peak < 128 * 1024, f"hashlb RSS stays bounded while the reader stalls ({peak} KiB)")
    check(lb.stop() == 0, "hashlb exits 0 on SIGTERM")


def half_close():
    """The client shuts down its sending side and still receives the whole response."""
    lb = Hashlb(config(BACKENDS))
    for size in (0, 1, 70000, 3 * MiB):
        s = connect(lb.addr)
        payload = random.Random(size).randbytes(size)
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            d = s.recv(1 << 20)
            if not d:
                break
            data += d
        s.close()
        name, _, rest = data.partition(b"\n")
        check(name in (b"a", b"b", b"c") and rest == payload,
              f"half-close with {size} bytes: got {len(rest)} bytes back after FIN")
    # The other direction: the backend finishes first (after echoing), the client keeps
    # its side open and can still write until it closes.
    check(lb.stop() == 0, "hashlb exits 0")


def concurrent_1000():
    """1,000 connections open at once, each served (greeting + echo)."""
    lb = Hashlb(config(BACKENDS))
    socks = []
    for i in range(1000):
        socks.append(connect(lb.addr, src=client_ip(i), timeout=20))
    for i, s in enumerate(socks):
        s.sendall(b"ping %d\n" % i)
    ok = 0
    for i, s in enumerate(socks):
        name = read_line(s)
        echo = read_line(s)
        ok += name in ("a", "b", "c") and echo == "ping %d" % i
    check(ok == 1000, f"1000 concurrent connections served, {ok} were")
    for s in socks:
        s.close()
    check(lb.stop() == 0, "hashlb exits 0")


def max_connections():
    """Over max_connections, a new connection is closed at once; below, served again."""
    lb = Hashlb(config(BACKENDS, extra="max_connections: 5"))
    socks = [connect(lb.addr) for _ in range(5)]
    names = [read_line(s) for s in socks]
    check(all(n in ("a", "b", "c") for n in names), "the first 5 connections are served")
    extra = connect(lb.addr)
    t0 = time.time()
    try:
        d = extra.recv(10)
    except ConnectionError:
        d = b""
    check(d == b"" and time.time() - t0 < 2, "the 6th connection is closed at once")
    extra.close()
    socks.pop().close()
    time.sleep(0.2)
    s = connect(lb.addr)
    check(read_line(s) in ("a", "b", "c"), "a slot freed by a close serves a new connection")
    s.close()
    for s in socks:
        s.close()
    lb.stop()


def idle_timeout():
    """A connection idle longer than the idle timeout is closed; an active one is not."""
    lb = Hashlb(config(BACKENDS, extra="timeouts:\n  idle: 1s"))
    idle = connect(lb.addr, timeout=10)
    busy = connect(lb.addr, timeout=10)
    read_line(idle)
    read_line(busy)
    t0 = time.time()
    for i in range(8):
        busy.sendall(b"x\n")
        check(read_line(busy) == "x", "the active connection keeps working")
        time.sleep(0.25)
    try:
        d = idle.recv(10)
    except ConnectionError:
        d = b""
    el = time.time() - t0
    check(d == b"" and el < 4, f"the idle connection was closed ({el:.1f}s)")
    busy.close()
    idle.close()
    lb.stop()


def reset_midstream():
    """Clients that reset while a large response is in flight to them: hashlb closes the
    backend side, keeps running and serves the next clients."""
    import struct
    lb = Hashlb(config(BACKENDS))
    for _ in range(20):
        s = connect(lb.addr, timeout=5)
        s.sendall(b"x" * (4 * MiB))
        s.shutdown(socket.SHUT_WR)
        s.recv(1000)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST: unread data and linger 0
    time.sleep(0.3)
    check(lb.proc.poll() is None, "hashlb survives clients that reset mid-stream")
    ok = 0
    for i in range(20):
        s = connect(lb.addr, src=client_ip(i), timeout=5)
        ok += read_line(s) in ("a", "b", "c")
        s.close()
    check(ok == 20, f"and serves the next clients ({ok}/20)")
    check(lb.stop() == 0, "hashlb exits 0")


def buffers_exhausted():
    """With 4 shared buffers for 40 busy connections, every byte still arrives: connections
    wait for a buffer instead of failing."""
    lb = Hashlb(config(BACKENDS), args=("--workers", "1", "--buffers", "4", "--buffer-size", "4096"))
    results = [None] * 40

    def one(i):
        payload = random.Random(i).randbytes(256 * 1024 + i)
        s = connect(lb.addr, src=client_ip(i), timeout=30)
        t = threading.Thread(target=lambda: (s.sendall(payload), s.shutdown(socket.SHUT_WR)))
        t.start()
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
        t.join()
        s.close()
        results[i] = data.partition(b"\n")[2] == payload

    threads = [threading.Thread(target=one, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    check(all(results), f"all 40 connections intact: {results.count(True)} were")
    check(lb.stop() == 0, "hashlb exits 0")


def fd_limit():
    """At the fd limit hashlb does not spin: excess clients wait (or are closed), CPU stays
    idle, and once connections close new clients are served again."""
    lb = Hashlb(config(BACKENDS, workers=1), nofile=48)
    check(lb.wait_log(r"nofile=48 "), "the fd limit is logged at start")
    socks, served = [], 0
    for i in range(40):
        s = connect(lb.addr, src=client_ip(i), timeout=0.5)
        socks.append(s)
    for s in socks:
        try:
            served += read_line(s) in ("a", "b", "c")
        except (socket.timeout, ConnectionError):
            pass
    check(0 < served < 40, f"some clients served, the others held at the limit ({served})")
    check(lb.wait_log("msg=\"accept failed, pausing\"|file descriptor limit reached"),
          "hashlb logs that it hit the limit")
    c0 = lb.cpu_seconds()
    time.sleep(1.0)
    used = lb.cpu_seconds() - c0
    check(used < 0.2, f"no busy loop at the fd limit: {used:.2f} CPU seconds in 1 s")
    for s in socks:
        s.close()
    time.sleep(0.5)
    ok = 0
    for i in range(10):
        s = connect(lb.addr, src=client_ip(100 + i), timeout=5)
        try:
            ok += read_line(s) in ("a", "b", "c")
        except (socket.timeout, ConnectionError):
            pass
        s.close()
    check(ok == 10, f"served again once connections closed: {ok} of 10")
    lb.stop()


run_tests([bytes_intact, half_close, concurrent_1000, max_connections, idle_timeout,
           reset_midstream, buffers_exhausted, fd_limit])
