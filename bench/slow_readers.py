#!/usr/bin/env python3
"""Stopped readers against one hashlb worker with its default buffers (256 of 64 KiB): --stuck
clients ask the backend for a feed of 8,000-byte messages every 10 ms (reads under 16 KiB: never spliced) and
never read it, while a prober, from its own client addresses, makes --probes short echo
connections one after another. Reports the probes' latency and how many got no answer within
--timeout seconds, and hashlb's spill metrics. Before the spill (a stopped destination held its
two buffers), 128 stopped readers took every buffer of the worker and stalled everyone else.

  python3 bench/slow_readers.py --hashlb build/src/cli/hashlb [--stuck 200] [--probes 200]

Bounded: the feed stops after --seconds, every socket has a timeout. Exits 1 if a probe got no
answer or hashlb did not exit 0."""
import selectors
import socket
import sys
import threading
import time

from benchenv import arguments, count, parse, positive

ap = arguments(__doc__)
ap.add_argument("--stuck", type=count, default=200, help="clients that stop reading")
ap.add_argument("--probes", type=count, default=200, help="echo connections beside them")
ap.add_argument("--timeout", type=positive, default=3.0, help="seconds a probe waits for its echo")
ap.add_argument("--seconds", type=positive, default=60, help="the feed's bound")
ap.add_argument("--fill", type=positive, default=30,
                help="at most this long for the readers' queues to fill (a spill each)")
args = parse(ap)

from ctltest import Lb, config, metric_sum  # noqa: E402
from lbtest import client_ip, connect  # noqa: E402

END = time.time() + args.seconds
MSG = b"m" * 8000


def backend(srv):
    """One thread, non-blocking: FEED connections get a message every 10 ms while they take
    them (a feed: small reads, never spliced), others get their first bytes echoed."""
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ, "accept")
    feeds, tick = set(), 0.0
    while time.time() < END:
        if time.time() >= tick:
            tick = time.time() + 0.01
            for c in list(feeds):
                try:
                    c.send(MSG)
                except BlockingIOError:
                    pass
                except OSError:
                    feeds.discard(c)
        for key, ev in sel.select(timeout=0.01):
            if key.data == "accept":
                try:
                    c, _ = srv.accept()
                except OSError:
                    continue
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ, "new")
                continue
            c = key.fileobj
            try:
                if key.data == "new":
                    d = c.recv(64)
                    if not d:
                        raise OSError("closed")
                    if d.startswith(b"FEED"):
                        feeds.add(c)
                        sel.modify(c, selectors.EVENT_READ, "feed")
                    else:
                        c.sendall(d)
                elif not c.recv(64):  # a feed's client went away
                    raise OSError("closed")
            except BlockingIOError:
                pass
            except OSError:
                feeds.discard(c)
                sel.unregister(c)
                c.close()
    for key in list(sel.get_map().values()):
        key.fileobj.close()


srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(4096)
bt = threading.Thread(target=backend, args=(srv,), daemon=True)
bt.start()
lb = Lb(config([("feed", f"127.0.0.1:{srv.getsockname()[1]}")], workers=1,
               health="enabled: false", extra="timeouts:\n  idle: 5m"))
stuck = []
for i in range(args.stuck):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.bind((client_ip(i), 0))
    s.connect(lb.addr)
    s.sendall(b"FEED")
    stuck.append(s)
# until the stopped readers' queues are full: a spill each (the build before the spill has
# none: then as long as it took the spill build, --fill seconds)
fill_end = time.time() + args.fill
while time.time() < fill_end and metric_sum(lb, "hashlb_worker_spills_total") < args.stuck:
    time.sleep(0.2)
spills = metric_sum(lb, "hashlb_worker_spills_total")
spilled = metric_sum(lb, "hashlb_worker_spilled_bytes")
in_use = metric_sum(lb, "hashlb_worker_buffers_in_use")
lat, lost = [], 0
for k in range(args.probes):
    t0 = time.time()
    try:
        p = connect(lb.addr, src=client_ip(10000 + k), timeout=args.timeout)
        p.sendall(b"ping")
        ok = p.recv(4) == b"ping"
        p.close()
    except OSError as e:
        ok = False
        print(f"probe {k}: {e!r}")
    if ok:
        lat.append(time.time() - t0)
    else:
        lost += 1
for s in stuck:
    s.close()
rc = lb.stop()
lat.sort()
q = (lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] * 1000) if lat else (lambda f: float("nan"))
print(f"slow_readers: {args.stuck} stopped readers, 1 worker, default buffers (in use when "
      f"probed: {in_use:.0f}); spills {spills:.0f}, spilled {spilled / 1024:.0f} KiB; "
      f"{args.probes} probes: {lost} unanswered in {args.timeout:.0f} s, "
      f"p50 {q(0.5):.2f} ms, p99 {q(0.99):.2f} ms; hashlb exit {rc}")
sys.exit(0 if lost == 0 and rc == 0 else 1)
