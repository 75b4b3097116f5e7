#!/usr/bin/env python3
"""Clients that stop reading (a zero window) an endless stream: the kernel's TCP memory each one
holds connected to the backend directly and through one hashlb worker, in the same run, and
hashlb's RSS and spilled bytes. hashlb caps its own memory (the spill); the socket buffers are
the kernel's: through hashlb a stopped client fills hashlb's send buffer to it and hashlb's
receive buffer from the backend besides the backend's own send buffer.

  python3 bench/zero_window.py --hashlb build/src/cli/hashlb [--clients 20] [--settle 3]

The TCP memory is the machine's (/proc/net/sockstat), so other traffic blurs it: run it on a
quiet machine. Each client may hold ~8 MiB of it (net.ipv4.tcp_wmem's default maximum, 4 MiB,
twice): a few hundred take a small machine past net.ipv4.tcp_mem, where the kernel shrinks every
socket's buffers (the whole machine's, not only this run's) and the figure per client is no
longer what one costs. So --clients is at most 100 and --settle 30 s, and a run that found the
machine's TCP memory past tcp_mem's pressure threshold says so and exits 1, as it does if
hashlb did not exit 0."""
import selectors
import socket
import sys
import threading
import time

from benchenv import arguments, at_most, count, parse, positive

ap = arguments(__doc__)
ap.add_argument("--clients", type=at_most(count, 100), default=20,
                help="clients that stop reading (at most 100)")
ap.add_argument("--settle", type=at_most(positive, 30), default=3.0,
                help="seconds for the buffers to fill before the memory is read (at most 30)")
args = parse(ap)

from ctltest import Lb, config, metric_sum  # noqa: E402

PAGE = 4096


def tcp_pages():
    with open("/proc/net/sockstat") as f:
        for line in f:
            if line.startswith("TCP:"):
                return int(line.split(" mem ")[1])
    return 0


def tcp_pressure():
    """net.ipv4.tcp_mem's pressure threshold, in pages: past it the kernel moderates every TCP
    socket's buffers."""
    with open("/proc/sys/net/ipv4/tcp_mem") as f:
        return int(f.read().split()[1])


def feeder(srv, done):
    """One thread, non-blocking: every connection is written to whenever it has room."""
    srv.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ)
    chunk = b"z" * 65536
    while not done.is_set():
        for key, _ in sel.select(0.1):
            if key.fileobj is srv:
                try:
                    c, _ = srv.accept()
                except OSError:
                    continue
                c.setblocking(False)
                sel.register(c, selectors.EVENT_WRITE)
                continue
            try:
                key.fileobj.send(chunk)
            except BlockingIOError:
                pass
            except OSError:
                sel.unregister(key.fileobj)
                key.fileobj.close()
    for key in list(sel.get_map().values()):
        key.fileobj.close()


def stopped_readers(addr):
    """The TCP pages each of --clients that connect to <addr> and never read holds, once
    --settle seconds have passed; the sockets, open."""
    before = tcp_pages()
    socks = []
    for _ in range(args.clients):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(addr)
        socks.append(s)
    time.sleep(args.settle)
    now = tcp_pages()
    if now >= tcp_pressure():
        pressed.append(now)
    return (now - before) / args.clients, socks


pressed = []  # the TCP pages of a reading past tcp_mem's pressure threshold
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(4096)
done = threading.Event()
ft = threading.Thread(target=feeder, args=(srv, done), daemon=True)
ft.start()
direct, socks = stopped_readers(srv.getsockname())
for s in socks:
    s.close()
time.sleep(args.settle)  # the closed ones' memory given back
lb = Lb(config([("feed", f"127.0.0.1:{srv.getsockname()[1]}")], workers=1,
               health="enabled: false", extra="timeouts:\n  idle: 5m"))
via, socks = stopped_readers(lb.addr)
rss = lb.rss_kib()
spilled = metric_sum(lb, "hashlb_worker_spilled_bytes")
in_use = metric_sum(lb, "hashlb_worker_buffers_in_use")
for s in socks:
    s.close()
rc = lb.stop()
done.set()
ft.join(5)
print(f"zero_window: {args.clients} clients that stop reading, {args.settle:g} s: kernel TCP "
      f"memory per client {direct * PAGE / 2**20:.1f} MiB direct, {via * PAGE / 2**20:.1f} MiB "
      f"through hashlb ({via / direct if direct > 0 else float('nan'):.2f}x); hashlb RSS "
      f"{rss / 1024:.1f} MiB, spilled {spilled / 2**20:.1f} MiB, buffers in use {in_use:.0f}; "
      f"hashlb exit {rc}")
if pressed:
    print(f"zero_window: the machine's TCP memory read {max(pressed) * PAGE / 2**20:.0f} MiB, past "
          f"net.ipv4.tcp_mem's pressure threshold ({tcp_pressure() * PAGE / 2**20:.0f} MiB), "
          f"where the kernel shrinks every socket's buffers: not a figure per client (fewer "
          f"--clients, or a quieter machine)")
sys.exit(0 if rc == 0 and not pressed else 1)
