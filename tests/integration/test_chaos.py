#!/usr/bin/env python3
"""Everything a production hashlb lives through, at once, for a while (HASHLB_CHAOS_SECONDS,
default 20): client connections of every size coming and going from many addresses (some reset
by the client, some half-closed while their echo still flows, some read slowly, some large
enough to be spliced), long-lived connections exchanging data throughout, and meanwhile reloads
(weights changed, a backend removed and added back, the scheme switched between maglev and
ring), reloads of a broken config, a backend drained and made ready, a backend's cap set and
lifted, every backend capped at once for a moment (new clients wait in the queue, some reset
while they wait), a backend killed and restarted (health checks take it out and back). The control
plane's changes must cost nothing that does not depend on them:

- every long-lived connection stays on its backend and exchanges every byte intact;
- every new connection is served, byte for byte, unless its own backend was killed under it;
- a broken reload is refused every time and changes nothing;
- once the clients are gone, hashlb holds no connection and no file descriptor more than it
  did before, and it exits cleanly on SIGTERM (under a sanitizer build, ASan or TSan: no report)."""
import os
import random
import re
import signal
import socket
import struct
import threading
import time

from ctltest import Lb, config, metric_sum
from lbtest import Backend, check, client_ip, connect, read_line, run_tests, stop

SECONDS = float(os.environ.get("HASHLB_CHAOS_SECONDS", "20"))
SEED = int(os.environ.get("HASHLB_CHAOS_SEED", random.randrange(1 << 30)))
EXTRA = """connect_retries: 3
timeouts:
  connect: 1s
  drain: 30s
  queue: 5s
keepalive: true
log_connections: true"""
# A second service: IPv6, ring, the 4-tuple hashed, a short idle timeout.
V6_SERVICE = """  - name: v6
    listen: "[::1]:0"
    scheme: ring
    hash_key: 4-tuple
    timeouts:
      idle: 1s
    log_connections: true
    backends:
      - name: b1
        address: {}
      - name: b2
        address: {}
      - name: b3
        address: {}
"""
HEALTH = "interval: 200ms\ntimeout: 200ms\nrise: 2\nfall: 2"


def dial(addr, src, timeout=10, bound=None):
    """connect() for either family (lbtest.connect is IPv4 only). <bound>: a list to which the
    client's own address (as hashlb's log writes it) is appended before the connect, so that
    a connect that fails can still be found in that log."""
    s = socket.socket(socket.AF_INET6 if ":" in addr[0] else socket.AF_INET)
    s.settimeout(timeout)
    try:
        s.bind((src, 0))
        if bound is not None:
            host, port = s.getsockname()[:2]
            bound.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        s.connect(addr)
    except OSError:
        s.close()
        raise
    return s


def recv_exact(s, n, slow=False, events=None):
    """<n> bytes from <s>; <slow>: 16 KiB at a time with pauses, a client that reads slowly.
    <events>: a list to which the time of each chunk received is appended."""
    buf = bytearray()
    while len(buf) < n:
        if slow:
            time.sleep(0.002)
        d = s.recv(min(n - len(buf), 16384 if slow else 1 << 20))
        if not d:
            raise ConnectionError(f"EOF after {len(buf)} of {n} bytes")
        buf += d
        if events is not None:
            events.append(time.monotonic())
    return bytes(buf)


def longest_gap(events):
    """The longest time between two of <events> (monotonic times, in any order)."""
    t = sorted(events)
    return max((b - a for a, b in zip(t, t[1:])), default=0.0)


class Chaos:
    def __init__(self):
        print(f"    HASHLB_CHAOS_SEED={SEED} HASHLB_CHAOS_SECONDS={SECONDS:g} reproduce this run's "
              "choices (not its timing)", flush=True)
        self.rng = random.Random(SEED)
        self.bs = {n: Backend(n) for n in ("b1", "b2", "b3", "b4", "b5")}
        self.weights = {"b1": 1, "b3": 1}
        self.with_b5 = True
        self.scheme = "maglev"
        self.lb = Lb(self.config())
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.served = {}     # backend -> new connections served intact
        self.failed = []     # (backend's greeting or "", client, what, stall s): not served
        self.killed = set()  # backends killed at some point (their clients may fail)
        self.anchor_errors = []
        self.idled = []      # (greeting, what recv returned, seconds): idle connections
        self.actions = {}

    def config(self):
        names = ["b1", "b2", "b3", "b4"] + (["b5"] if self.with_b5 else [])
        backends = [(n, self.bs[n].addr, f"weight: {self.weights.get(n, 1)}") for n in names]
        return config(backends, scheme=self.scheme, extra=EXTRA, health=HEALTH) + V6_SERVICE.format(
            *(self.bs[n].addr for n in ("b1", "b2", "b3")))

    def addr_of(self, service):
        """The address hashlb bound for <service> (its config says port 0)."""
        for line in self.lb.log:
            m = re.search(rf"msg=listening .*addr=(\S+) service={service} ", line)
            if m:
                host, port = m.group(1).rsplit(":", 1)
                return host.strip("[]"), int(port)
        raise AssertionError(f"no listening line for {service}")

    def write(self, text):
        with open(self.lb.path + ".new", "w") as f:
            f.write(text)
        os.rename(self.lb.path + ".new", self.lb.path)  # a reload never reads half a file

    # -- clients --------------------------------------------------------------------------
    def anchor(self, s, name, errors):
        """A long-lived connection: echoes chunks until the end, then closes cleanly."""
        rng = random.Random(f"{SEED}{name}")
        sent = 0
        try:
            while not self.done.is_set():
                data = rng.randbytes(rng.randint(1, 20000))
                s.sendall(data)
                if recv_exact(s, len(data)) != data:
                    errors.append(f"{name}: bytes changed after {sent}")
                    return
                sent += len(data)
                time.sleep(0.02)
            s.shutdown(socket.SHUT_WR)
            if s.recv(1) != b"":
                errors.append(f"{name}: data after the end")
        except OSError as e:
            errors.append(f"{name}: {e!r} after {sent} bytes")
        finally:
            s.close()

    def churn(self, seed, service="t"):
        rng = random.Random(seed)
        addr = self.addr_of(service)
        while not self.done.is_set():
            src = client_ip(rng.randrange(20000)) if service == "t" else "::1"
            r = rng.random()
            size = (rng.randint(1, 8192) if r < 0.8 else rng.randint(65536, 524288) if r < 0.95
                    else rng.randint(1 << 20, 2 << 20))
            name, bound = "", []
            try:
                s = dial(addr, src, bound=bound)
            except OSError as e:
                src = bound[0] if bound else src
                with self.lock:
                    self.failed.append(("", src, f"connect from {src}: {e!r}", 0.0))
                continue
            src = bound[0]
            # When this client moved bytes: a client that itself stalled past the v6
            # service's idle timeout (a starved thread on a loaded machine) is closed
            # by it, rightly.
            events = [time.monotonic()]
            sender, send_errors = None, []
            try:
                name = read_line(s)
                events.append(time.monotonic())
                if not name:
                    raise ConnectionError("closed before the backend's greeting")
                if rng.random() < 0.03:  # the client resets: hashlb must clean up
                    s.sendall(b"x" * rng.randint(1, 4096))
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    continue
                data = rng.randbytes(size)
                half_close = rng.random() < 0.5  # FIN as soon as sent, echo still coming

                def send():
                    try:
                        events.append(time.monotonic())
                        s.sendall(data)
                        events.append(time.monotonic())
                        if half_close:
                            s.shutdown(socket.SHUT_WR)
                    except OSError as e:
                        send_errors.append(e)
                sender = threading.Thread(target=send)
                sender.start()  # send and receive at once: the echo must not deadlock on buffers
                got = recv_exact(s, size, slow=size > 65536 and rng.random() < 0.1,
                                 events=events)
                sender.join()
                if send_errors:
                    raise send_errors[0]
                if not half_close:
                    s.shutdown(socket.SHUT_WR)
                if got != data or s.recv(1) != b"":
                    raise ConnectionError("bytes changed" if got != data else "data after echo")
                with self.lock:
                    self.served[name] = self.served.get(name, 0) + 1
            except OSError as e:
                events.append(time.monotonic())
                with self.lock:
                    self.failed.append((name, src, f"{size} bytes from {src} via {name or '?'}: "
                                        f"{e!r}", longest_gap(events)))
            finally:
                if sender and sender.is_alive():  # the receiving side failed: stop the sender
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    sender.join()
                s.close()

    # -- the control plane's side ---------------------------------------------------------
    def idler(self):
        """Connections that say nothing: the v6 service's idle timeout (1 s) closes them."""
        while not self.done.is_set():
            try:
                with dial(self.addr_of("v6"), "::1") as s:
                    name = read_line(s)
                    t0 = time.time()
                    rest = s.recv(1)
                    with self.lock:
                        self.idled.append((name, rest, time.time() - t0))
            except OSError as e:
                with self.lock:
                    self.idled.append(("", repr(e), 0))

    def reload(self, what):
        self.write(self.config())
        rc, so, se = self.lb.ctl("reload")
        check(rc == 0, f"reload ({what}) succeeds: {so}{se}")

    def act(self):
        lb, rng = self.lb, self.rng
        kind = rng.choice(["weights", "broken", "drain", "cap", "kill", "b5", "sighup", "scheme",
                           "squeeze"])
        self.actions[kind] = self.actions.get(kind, 0) + 1
        if kind == "weights":
            self.weights = {"b1": rng.randint(1, 3), "b3": rng.randint(1, 2)}
            self.reload("weights")
        elif kind == "broken":
            good = self.config()
            self.write(good.replace("hash_key: src-ip", "hash_key: src-ipp"))
            rc, so, se = lb.ctl("reload")
            check(rc == 1 and "src-ipp" in se, f"a broken reload is refused: {rc} {se!r}")
            self.write(good)
        elif kind == "drain":
            state = "drain" if lb.backend("b3")["state"] == "ready" else "ready"
            rc, so, se = lb.ctl("set", "-s", "t", "b3", state)
            check(rc == 0, f"ctl set b3 {state}: {se}")
        elif kind == "cap":
            cap = rng.choice(["1", "3", "0"])
            rc, so, se = lb.ctl("set", "-s", "t", "b2", "max_connections", cap)
            check(rc == 0, f"ctl set b2 max_connections {cap}: {se}")
        elif kind == "kill":
            b4 = self.bs["b4"]
            if b4.proc.poll() is None:
                self.killed.add("b4")
                b4.kill()
            else:
                self.bs["b4"] = Backend("b4", b4.port)
        elif kind == "b5":
            self.with_b5 = not self.with_b5
            self.reload("b5 " + ("added" if self.with_b5 else "removed"))
        elif kind == "scheme":
            self.scheme = "ring" if self.scheme == "maglev" else "maglev"
            self.reload("scheme " + self.scheme)
        elif kind == "sighup":
            os.kill(lb.proc.pid, signal.SIGHUP)
        elif kind == "squeeze":
            # Every backend of t at max_connections 1 for a moment: new clients wait in the
            # queue (timeouts.queue) and are served once it lifts; a few give up (reset)
            # while they wait and are dropped from it.
            names = ["b1", "b2", "b3", "b4"] + (["b5"] if self.with_b5 else [])
            for n in names:
                rc, so, se = lb.ctl("set", "-s", "t", n, "max_connections", "1")
                check(rc == 0, f"ctl set {n} max_connections 1: {se}")
            quitters = []
            for _ in range(rng.randint(1, 4)):
                try:
                    quitters.append(dial(self.addr_of("t"), client_ip(rng.randrange(30000, 40000))))
                except OSError:
                    pass
            time.sleep(rng.uniform(0.1, 0.4))
            for q in quitters:
                q.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                q.close()
            for n in names:
                rc, so, se = lb.ctl("set", "-s", "t", n, "max_connections", "0")
                check(rc == 0, f"ctl set {n} max_connections 0: {se}")

    def run(self):
        lb = self.lb
        if not lb.wait(lambda: all(b["in_table"] for b in lb.service()["backends"])):
            check(False, f"every backend up at start: {lb.service()}")
        # Health checks open a socket for a moment every interval: the least of a few
        # readings is the count at rest.
        readings = []
        for _ in range(5):
            readings.append(metric_sum(lb, "hashlb_process_open_fds"))
            time.sleep(0.05)
        fds0 = min(readings)
        anchors = []
        for i in range(400):
            if len(anchors) == 12:
                break
            s = connect(self.addr_of("t"), client_ip(50000 + i))
            name = read_line(s)
            if name in ("b1", "b2", "b3"):  # never killed nor removed
                anchors.append(threading.Thread(target=self.anchor,
                                                args=(s, f"{name}@{client_ip(50000 + i)}",
                                                      self.anchor_errors)))
            else:
                s.close()
        check(len(anchors) == 12, f"12 long-lived connections ({len(anchors)})")
        threads = anchors + [threading.Thread(target=self.churn, args=(SEED + i,)) for i in range(3)]
        threads += [threading.Thread(target=self.churn, args=(SEED + 3, "v6")),
                    threading.Thread(target=self.idler)]
        for t in threads:
            t.daemon = True  # never keep the test's process from exiting
            t.start()
        end = time.time() + SECONDS
        try:
            while time.time() < end:
                self.act()
                time.sleep(self.rng.uniform(0.1, 0.4))
        finally:  # an action that raised fails the test: the clients must stop all the same
            self.done.set()
        for t in threads:
            t.join(60)
            check(not t.is_alive(), "every client finishes")

        check(not self.anchor_errors, f"long-lived connections intact: {self.anchor_errors}")
        bad_idle = [i for i in self.idled if i[0] not in ("b1", "b2", "b3") or i[1] != b""]
        check(self.idled and not bad_idle, f"{len(self.idled)} idle connections, each closed by "
                                           f"the idle timeout after its greeting: {bad_idle[:5]}")
        total = sum(self.served.values())
        print(f"    served {total} new connections {sorted(self.served.items())}, "
              f"{len(self.failed)} lost, {len(self.idled)} closed idle, actions {sorted(self.actions.items())}, "
              f"queued {metric_sum(lb, 'hashlb_service_queued_total'):.0f}, left the queue "
              f"{metric_sum(lb, 'hashlb_service_queue_aborts_total'):.0f}")
        check(total > 100, f"a real load ({total} connections)")

        # Nothing is left behind once the clients are gone.
        check(lb.wait(lambda: metric_sum(lb, "hashlb_service_active_connections") == 0
                      and metric_sum(lb, "hashlb_backend_active_connections") == 0),
              "no connection left open: service "
              f"{metric_sum(lb, 'hashlb_service_active_connections')}, backends "
              f"{metric_sum(lb, 'hashlb_backend_active_connections')}")
        check(lb.wait(lambda: metric_sum(lb, "hashlb_process_open_fds") <= fds0, timeout=5),
              "no file descriptor left open: "
              f"{metric_sum(lb, 'hashlb_process_open_fds')} now, {fds0} at start")
        # The cap's count came back with the connections: one at a time, b2 takes its clients.
        rc, so, se = lb.ctl("set", "-s", "t", "b2", "max_connections", "1")
        rc, so, se = lb.ctl("lookup", "-s", "t", *(client_ip(i) for i in range(300)))
        b2_clients = [f[0] for f in map(str.split, so.splitlines()) if f[2] == "b2"]
        got = []
        for c in b2_clients[:3]:  # each one gone (its slot back) before the next
            with connect(self.addr_of("t"), c) as s:
                got.append(read_line(s))
            lb.wait(lambda: metric_sum(lb, "hashlb_backend_active_connections") == 0)
        check(got and all(g == "b2" for g in got), f"b2 at max_connections 1 serves its clients "
                                                   f"one at a time: {got}")
        rc = lb.stop()
        check(rc == 0, f"exit status 0 on SIGTERM ({rc})")
        bad = [l for l in lb.log_to_end() if "Sanitizer" in l or "runtime error" in l]
        check(not bad, f"no sanitizer report: {bad[:5]}")
        # A connection that failed before the greeting: its backend, from hashlb's connection log.
        ended_on, lines = {}, {}
        for line in lb.log:
            m = re.search(r"msg=connection .*client=(\S+) backend=(\S+)", line)
            if m:
                ended_on[m.group(1)] = m.group(2)
                lines.setdefault(m.group(1), []).append(line)  # a port may be used again
        # Expected: a killed backend's client, or a v6 client that stalled itself past the
        # idle timeout (1 s; 0.9 s of the client's own gap allows for the two clocks) and was
        # closed by it, as hashlb's log says.
        idle = [c for n, c, w, stall in self.failed if stall >= 0.9 and
                any(f"backend={n} " in l and "end=idle_timeout" in l for l in lines.get(c, []))]
        if idle:
            print(f"    {len(idle)} v6 clients stalled past the idle timeout and were closed by it")
        unexpected = [f"{w} (stalled {stall:.2f} s; hashlb's log: {lines.get(c)})"
                      for n, c, w, stall in self.failed
                      if (n or ended_on.get(c)) not in self.killed and c not in idle]
        check(not unexpected, f"every new connection served, but {len(unexpected)} of "
                              f"{len(self.failed)} failures were not a killed backend's: "
                              f"{unexpected[:5]}")
        for b in self.bs.values():
            stop(b.proc)


def chaos():
    Chaos().run()


if __name__ == "__main__":
    import lbtest
    run_tests([chaos])
    raise SystemExit(1 if lbtest.failures else 0)
