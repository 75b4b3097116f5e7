#!/usr/bin/env python3
"""50 reloads (backends added and removed, weights changed) while wrk drives HTTP traffic over
keep-alive connections and a prober opens fresh connections: no request fails, no connection
is refused or dropped, and every reload is counted."""
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

from ctltest import Lb, config
from lbtest import SRC, check, connect, run_tests, spawn, stop

HTTP_BACKEND = os.path.join(SRC, "tests", "tools", "http-backend")
RELOADS = 50


class HttpBackend:
    def __init__(self, name):
        self.proc = spawn([sys.executable, HTTP_BACKEND, "--name", name, "--port", "0"],
                          stdout=subprocess.PIPE, text=True)
        self.addr = self.proc.stdout.readline().split()[2]


def reloads_under_traffic():
    if not shutil.which("wrk"):
        print("wrk is not installed (scripts/setup.sh installs it)")
        sys.exit(77)
    hs = {n: HttpBackend(n) for n in ("h1", "h2", "h3", "h4")}
    cfg_a = config([(n, hs[n].addr) for n in ("h1", "h2", "h3")])
    cfg_b = config([("h1", hs["h1"].addr), ("h2", hs["h2"].addr, "weight: 2"),
                    ("h3", hs["h3"].addr), ("h4", hs["h4"].addr)],
                   extra="connect_retries: 3")
    lb = Lb(cfg_a)
    host, port = lb.addr
    url = f"http://{host}:{port}/"

    refused = []
    probes = [0]
    done = threading.Event()

    def prober():
        while not done.is_set():
            try:
                s = connect((host, port), timeout=5)
                s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
                if not s.recv(100).startswith(b"HTTP/1.1 200"):
                    refused.append("bad answer")
                s.close()
                probes[0] += 1
            except OSError as e:
                refused.append(repr(e))

    # wrk runs until the reloads are over (SIGINT makes it stop and report).
    wrk = subprocess.Popen(["wrk", "-t", "1", "-c", "16", "-d", "100s", "--timeout", "5s", url],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t = threading.Thread(target=prober)
    t.start()
    time.sleep(1.0)
    ok = 0
    t0 = time.time()
    for i in range(RELOADS):
        lb.rewrite(cfg_b if i % 2 == 0 else cfg_a)
        rc, so, se = lb.ctl("reload")
        ok += rc == 0
        if rc:
            print(f"    reload {i}: {se.strip()}")
        time.sleep(0.05)
    print(f"    {RELOADS} reloads in {time.time() - t0:.1f}s")
    time.sleep(0.5)
    wrk.send_signal(signal.SIGINT)
    out, _ = wrk.communicate(timeout=30)
    done.set()
    t.join()
    print("    " + "\n    ".join(l for l in out.splitlines() if l.strip()))
    m = re.search(r"(\d+) requests in", out)
    reqs = int(m.group(1)) if m else 0
    check(ok == RELOADS, f"every reload succeeded ({ok}/{RELOADS})")
    check(reqs > 1000, f"wrk drove traffic through the reloads ({reqs} requests)")
    check("Socket errors" not in out, "wrk saw no connect, read, write or timeout error")
    check("Non-2xx" not in out, "every response was a 200")
    check(not refused, f"no fresh connection refused or dropped ({len(refused)} of {probes[0]}): "
          f"{refused[:3]}")
    st = lb.status()
    check(st["reloads"]["ok"] == RELOADS and st["reloads"]["failed"] == 0,
          f"status counts the reloads: {st['reloads']}")
    check(lb.stop() == 0, "exit 0")
    for h in hs.values():
        stop(h.proc)


run_tests([reloads_under_traffic])
