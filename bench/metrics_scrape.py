#!/usr/bin/env python3
"""What a GET /metrics costs hashlb's control thread, where health checks, reloads and the rest
of the admin endpoint wait while it renders: N services of B backends on 127.0.0.1 ports (no
checks, no traffic), the thread's CPU time (/proc/PID/task/PID/sched, else its stat) over R
scrapes over the admin unix socket. The reference, in the same run: GET / of the same process
(the endpoint's index, a fixed line: accept, parse, answer, the least a request costs), and with
--baseline another build on the same config (the one before a change). Prints ms of CPU a scrape, ns a line, and the ratios.
With --name FAMILY (any number of times), the scrapes ask for those families alone
(/metrics?name[]=FAMILY...), as a dashboard's scrape of a few families does.

  flock /work/notes/bench.lock python3 bench/metrics_scrape.py --hashlb build/src/cli/hashlb \\
      [--baseline /work/main/build/src/cli/hashlb] [--name hashlb_backend_up] \\
      [--services 4000 --table-size 65537]
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from benchenv import count, executable  # noqa: E402


def config(admin, services, backends, workers, table_size):
    y = [f"workers: {workers}", f"admin: unix:{admin}", "services:"]
    for i in range(services):
        y += [f"  - name: s{i}", f"    listen: 127.46.{i // 250}.{i % 250 + 1}:7002",
              f"    table_size: {table_size}", "    health: {enabled: false}", "    backends:"]
        for j in range(backends):
            port = 10000 + (i * backends + j) % 9000
            y.append(f'      - {{name: b{j}, address: "127.0.0.1:{port}"}}')
    return "\n".join(y) + "\n"


def thread_cpu_seconds(pid):
    """CPU time of the control thread (the main one), ns-precise where the kernel says it."""
    try:
        with open(f"/proc/{pid}/task/{pid}/sched") as f:
            for line in f:
                if line.startswith("se.sum_exec_runtime"):
                    return float(line.split(":")[1]) / 1e3
    except OSError:
        pass
    with open(f"/proc/{pid}/task/{pid}/stat") as f:
        x = f.read().rsplit(")", 1)[1].split()
    return (int(x[11]) + int(x[12])) / os.sysconf("SC_CLK_TCK")


def get(admin, path):
    s = socket.socket(socket.AF_UNIX)
    s.connect(admin)
    s.sendall(b"GET " + path + b" HTTP/1.0\r\n\r\n")
    b = bytearray()
    while True:
        c = s.recv(1 << 20)
        if not c:
            break
        b += c
    s.close()
    head, _, body = bytes(b).partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"GET {path.decode()}: {head[:80]!r}")
    return body


def measure(hashlb, a):
    d = tempfile.mkdtemp(prefix="hlbms-")
    admin = os.path.join(d, "admin.sock")
    cfg = os.path.join(d, "c.yaml")
    with open(cfg, "w") as f:
        f.write(config(admin, a.services, a.backends, a.workers, a.table_size))
    p = subprocess.Popen([hashlb, "run", "-c", cfg], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        for _ in range(1200):
            if os.path.exists(admin) or p.poll() is not None:
                break
            time.sleep(0.05)
        if not os.path.exists(admin):
            raise SystemExit(f"{hashlb}: no admin socket (exit {p.poll()})")
        time.sleep(1.0)  # every table published
        query = "&".join(f"name[]={n}" for n in a.name).encode()
        scrape = b"/metrics" + (b"?" + query if query else b"")
        body = get(admin, scrape)
        r = {"bytes": len(body), "lines": body.count(b"\n")}
        for path, n in ((b"/", a.scrapes * 20), (scrape, a.scrapes)):
            c0, t0 = thread_cpu_seconds(p.pid), time.perf_counter()
            for _ in range(n):
                get(admin, path)
            c1, t1 = thread_cpu_seconds(p.pid), time.perf_counter()
            r[b"/metrics" if path == scrape else path] = ((c1 - c0) / n, (t1 - t0) / n)
        return r
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


def show(name, r):
    cpu, wall = r[b"/metrics"]
    print(f"{name}: /metrics {r['bytes']} bytes, {r['lines']} lines: {cpu * 1e3:.2f} ms CPU a "
          f"scrape ({cpu / r['lines'] * 1e9:.0f} ns a line), {wall * 1e3:.1f} ms wall; "
          f"GET / {r[b'/'][0] * 1e6:.0f} us CPU; a scrape = "
          f"{cpu / max(r[b'/'][0], 1e-9):.0f} GET /", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hashlb", required=True)
    ap.add_argument("--baseline", help="another hashlb to measure on the same config")
    ap.add_argument("--services", type=count, default=1000)
    ap.add_argument("--backends", type=count, default=3)
    ap.add_argument("--workers", type=count, default=2)
    ap.add_argument("--scrapes", type=count, default=50)
    ap.add_argument("--table-size", type=count, default=257,
                    help="each service's Maglev table_size (65537: the default)")
    ap.add_argument("--name", action="append", default=[],
                    help="a family the scrapes ask for (name[]=), any number of times")
    a = ap.parse_args()
    executable(ap, a.hashlb)
    if a.baseline:
        executable(ap, a.baseline, "--baseline")
    print(f"{a.services} services x {a.backends} backends, {a.table_size} slots, "
          f"{a.workers} workers, {a.scrapes} scrapes" + (f" of {', '.join(a.name)}" if a.name else ""), flush=True)
    r = measure(a.hashlb, a)
    show("hashlb", r)
    if a.baseline:
        base = measure(a.baseline, a)
        show("baseline", base)
        ratio = r[b"/metrics"][0] / base[b"/metrics"][0]
        print(f"hashlb/baseline: {ratio:.2f}x the CPU a scrape ({1 / ratio:.1f} times less)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
