#!/usr/bin/env python3
"""`systemctl restart hashlb` with socket activation, under a steady stream of new connections:
counts every connection that fails, by error, and says when it began relative to its restart.

systemd 252 runs as PID 1 of a container (tests/integration/test_systemd.py's Container: this
machine's /usr, a network namespace of its own), with the shipped hashlb.service and hashlb.socket
(`--units DIR`: the units of another tree's contrib/systemd; `--partof`: the socket unit with
PartOf=hashlb.service added, as it shipped before). Client threads (--threads) in the container's
network connect from 200 loopback addresses, one connection after another, and read the echo
backend's greeting; one that is reset, refused, closed without a greeting or not greeted within 5 s
counts as failed. Meanwhile --restarts `systemctl restart hashlb`, one every --every seconds
(3.5 s by default: more than 5 starts in 10 s hit systemd's start limit, which fails the socket
unit too and closes its socket, a loss of its own). --hold keeps a connection open across each
restart, so the old hashlb drains (20 s in this config) and new connections wait in the backlog
that long. Prints the totals, each failure, and the container's TCP counters (nstat) that moved.
Needs root, systemd-nspawn and nsenter, like test_systemd.py. Measured (2 cores, kernel 6.18):

  python3 bench/systemd_restart.py --hashlb build/src/cli/hashlb --restarts 12 --threads 4
      shipped units:   ok 84374 failed 0
      --partof:        ok 85239 failed 237 (189 refused, 48 reset: 4 a restart, the clients
                       waiting in the backlog when systemd closed the socket)
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

from benchenv import count, executable, positive  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# Runs in the container's network: THREADS loops for SECONDS; prints one JSON line per failed
# connection, then {"ok": N, "failed": M}.
CLIENT = r'''
import json, socket, sys, threading, time
host, port = sys.argv[1].rsplit(":", 1)
addr, seconds, threads = (host, int(port)), float(sys.argv[2]), int(sys.argv[3])
end = time.time() + seconds
lock = threading.Lock()
fails, ok = [], [0]

def one(src):
    t0 = time.time()
    s = socket.socket()
    s.settimeout(5)
    s.bind((src, 0))
    try:
        s.connect(addr)
        buf = b""
        while not buf.endswith(b"\n"):
            d = s.recv(1)
            if not d:
                break
            buf += d
        return None if buf.endswith(b"\n") else dict(t0=t0, te=time.time(), why="eof")
    except OSError as e:
        why = "timeout" if isinstance(e, socket.timeout) else type(e).__name__
        return dict(t0=t0, te=time.time(), why=why)
    finally:
        s.close()

def loop(k):
    i = 0
    while time.time() < end and i < 200000:
        r = one(f"127.0.2.{(i * threads + k) % 200 + 1}")
        with lock:
            if r:
                fails.append(r)
            else:
                ok[0] += 1
        i += 1

ts = [threading.Thread(target=loop, args=(k,)) for k in range(threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
for f in fails:
    print(json.dumps(f))
print(json.dumps(dict(ok=ok[0], failed=len(fails))), flush=True)
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hashlb", required=True)
    ap.add_argument("--restarts", type=count, default=12)
    ap.add_argument("--every", type=positive, default=3.5)
    ap.add_argument("--threads", type=count, default=4)
    ap.add_argument("--partof", action="store_true")
    ap.add_argument("--hold", action="store_true")
    ap.add_argument("--units", default=os.path.join(HERE, ".."))
    a = ap.parse_args()
    executable(ap, a.hashlb)
    if a.restarts > 100 or a.threads > 16:
        raise SystemExit("bounded: at most 100 restarts and 16 threads")
    os.environ["HASHLB"] = os.path.abspath(a.hashlb)
    os.environ["HASHLB_SOURCE_ROOT"] = os.path.abspath(a.units)
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
    # test_systemd's helpers, without running its cases
    path = os.path.join(HERE, "..", "tests", "integration", "test_systemd.py")
    with open(path) as f:
        # the call, on as many lines as its list of cases takes
        text = re.sub(r"^run_tests\(\[.*?\]\)$", "", f.read(), flags=re.M | re.S)
    ts = {"__name__": "test_systemd", "__file__": path}
    exec(compile(text, path, "exec"), ts)
    import lbtest

    ts["need_systemd"]()
    sock = ts["unit_text"]("hashlb.socket")
    if a.partof:
        sock = sock.replace("Description=hashlb listening sockets\n",
                            "Description=hashlb listening sockets\nPartOf=hashlb.service\n")
    opt = ts["opt_dir"]("restart", "")
    ct = ts["Container"]("restart", opt, {"hashlb.service": ts["unit_text"]("hashlb.service.in"),
                                          "hashlb.socket": sock})
    try:
        _, port_a = ct.backend("a")
        addr = re.search(r"^ListenStream=(\S+)$", sock, re.M).group(1)
        ts["write"](os.path.join(opt, "hashlb.yaml"),
                    ts["hashlb_config"]([("a", port_a)], listen=addr))
        rc, _, err = ct.sh("systemctl start hashlb.socket")
        if rc != 0 or ct.who(addr) != "a":
            raise SystemExit(f"hashlb.socket did not start or serve: {err}")
        n0 = ct.sh("nstat -asz")[1]
        seconds = a.restarts * a.every + 2
        client = lbtest.spawn(ct.enter(net_only=True) +
                              [sys.executable, "-c", CLIENT, addr, str(seconds), str(a.threads)],
                              stdout=subprocess.PIPE, text=True)
        time.sleep(1.0)
        restarts = []
        for _ in range(a.restarts):
            if a.hold:
                held = ct.held(addr)
                held.stdout.readline()
            t0 = time.time()
            rc, _, _ = ct.sh("systemctl restart hashlb", timeout=120)
            restarts.append((t0, time.time(), rc))
            time.sleep(max(0.0, a.every - (time.time() - t0)))
        out, _ = client.communicate(timeout=seconds + 60)
        n1 = ct.sh("nstat -asz")[1]
    finally:
        ct.poweroff()
    fails = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    total = fails.pop()
    by = {}
    for f in fails:
        by[f["why"]] = by.get(f["why"], 0) + 1
    print(f"ok {total['ok']} failed {total['failed']} {by} restarts {len(restarts)}"
          f" (failed: {sum(rc != 0 for *_, rc in restarts)}, took "
          f"{min(e - b for b, e, _ in restarts):.2f}..{max(e - b for b, e, _ in restarts):.2f} s)")
    for f in fails[:50]:
        rb = max((r for r in restarts if r[0] <= f["t0"]), default=None, key=lambda r: r[0])
        when = f"{f['t0'] - rb[0]:+.3f} s after its restart began (it took " \
               f"{rb[1] - rb[0]:.3f} s)" if rb else "before the first restart"
        print(f"  {f['why']}: began {when}, ended {f['te'] - f['t0']:.3f} s later")

    def counters(t):
        return {l.split()[0]: int(l.split()[1]) for l in t.splitlines()
                if len(l.split()) >= 2 and l.split()[1].isdigit()}
    c0, c1 = counters(n0), counters(n1)
    print("nstat:", {k: c1[k] - c0.get(k, 0) for k in sorted(c1) if c1[k] != c0.get(k, 0) and
                     re.search(r"Listen|Abort|Reset|Overflow|Drop|AttemptFails|ReqQFull", k)})
    return 1 if total["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
