#!/usr/bin/env python3
"""Upgrade soak: a chain of upgrades under a steady stream of new connections, counting every
connection that fails. Each cycle starts a new `hashlb run` on the same config beside the running
one, waits for its msg=started, sends the old one SIGTERM and waits for it to exit. Client
processes (one per --clients) connect from 200 loopback addresses, one connection after another,
and read the backend's greeting; a connection that is reset, refused or closed without a
greeting counts as failed, by its error. Runs in a network namespace of its own, like
tests/integration/test_upgrade.py, and measures what a test cannot: failures that show up once in
hundreds of upgrades. Through the admin endpoint (--admin unix or tcp) the new hashlb takes the
old one's listening sockets over; without one (--admin off) it binds its own beside them, and
when the old one stops the kernel hands what waits in its queues to the new one
(net.ipv4.tcp_migrate_req=1, --migrate). With --admin usr2 (admin off) each cycle is an upgrade
in place instead: SIGUSR2 to the running hashlb, which starts the next one itself, hands it the
sockets on a socket pair, and drains once it is ready.

  python3 bench/upgrade_soak.py --hashlb build/src/cli/hashlb [--cycles 300] [--workers 2] \
      [--admin unix|tcp|off|usr2] [--migrate 1|0]

Bounded: stops after --cycles upgrades or --seconds, whichever comes first. Prints one line per
50 cycles and a summary: connections, failures by error, failures per 1,000 upgrades."""
import multiprocessing
import os
import subprocess
import sys
import time

from benchenv import arguments, count, parse, positive

ap = arguments(__doc__)
ap.add_argument("--cycles", type=count, default=300)
ap.add_argument("--seconds", type=positive, default=900)
ap.add_argument("--workers", type=count, default=2)
ap.add_argument("--clients", type=count, default=6)
ap.add_argument("--admin", choices=("unix", "tcp", "off", "usr2"), default="unix",
                help="unix or tcp: the new hashlb takes the old one's sockets over through the "
                     "admin endpoint (SCM_RIGHTS, pidfd_getfd); off: it binds new ones beside "
                     "them and the kernel migrates what is queued; usr2: admin off, SIGUSR2 "
                     "upgrades in place (default unix)")
ap.add_argument("--migrate", choices=("0", "1"), default="1",
                help="net.ipv4.tcp_migrate_req in the namespace (default 1)")
args = parse(ap)

if os.environ.get("HASHLB_SOAK_NETNS") != "1":
    env = dict(os.environ, HASHLB_SOAK_NETNS="1")
    sys.exit(subprocess.run(["unshare", "--net", sys.executable, os.path.abspath(__file__),
                             *sys.argv[1:]], env=env).returncode)

import re  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402

from lbtest import Backend, Hashlb, client_ip, config, tmppath, who  # noqa: E402

LISTEN = ("127.0.0.1", 29500)


def client(k, n_clients, stop, out):
    """Connect until <stop> is set; put (connections, {error: count}) on <out>."""
    n, failed, i = 0, {}, k
    while not stop.is_set():
        try:
            name = who(LISTEN, client_ip(i % 200))
            err = None if name else "closed without a greeting"
        except OSError as e:
            err = type(e).__name__
        if err:
            failed[err] = failed.get(err, 0) + 1
        n += 1
        i += n_clients
    out.put((n, failed))


def wait_exit(pid, timeout=30):
    """Whether <pid> (not necessarily our child) exits within <timeout> s."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def in_place(first, t0):
    """Upgrades in place: SIGUSR2 to the running hashlb, which starts the next one itself and
    drains once it is ready; every generation writes to the first one's stderr, read into
    first.log. Returns (cycles, processes that did not stop cleanly, sockets taken over)."""
    pid, cycles, bad, taken, seen = first.proc.pid, 0, 0, 0, 0
    while cycles < args.cycles and time.time() - t0 < args.seconds:
        os.kill(pid, signal.SIGUSR2)
        new, end = None, time.time() + 30
        while new is None and time.time() < end:
            for line in first.log[seen:]:
                m = re.search(r'msg="upgraded: .* pid=(\d+)', line)
                taken += 'msg="listening sockets taken over"' in line
                bad += 'msg="upgrade failed' in line
                new = int(m.group(1)) if m else new
            seen = len(first.log)
            time.sleep(0.005)
        if new is None:
            print("  no new process in 30 s: stopping", flush=True)
            bad += 1
            break
        bad += not wait_exit(pid)
        pid = new
        cycles += 1
        if cycles % 50 == 0:
            print(f"  {cycles} upgrades, {time.time() - t0:.0f} s", flush=True)
    first.proc = _Pid(pid)
    return cycles, bad, taken


def sanitizer_reports(log):
    """Lines of an ASan/UBSan/LSan report in <log> (a sanitized build's processes, which the
    in-place chain does not wait for, report there and nowhere else)."""
    return [l for l in log if "Sanitizer" in l or "runtime error:" in l]


class _Pid:
    """What Hashlb.stop() needs of the last generation, which is not our child."""

    def __init__(self, pid):
        self.pid = pid

    def poll(self):
        return -1 if wait_exit(self.pid, 0) else None  # exited, status unknown

    def send_signal(self, sig):
        os.kill(self.pid, sig)

    def wait(self, timeout=None):
        if not wait_exit(self.pid, timeout or 30):
            raise subprocess.TimeoutExpired(str(self.pid), timeout)
        return None  # not our child: its exit status is not ours to see

    def kill(self):
        os.kill(self.pid, signal.SIGKILL)

    returncode = None


def started(lb):
    """<lb>, once it said msg=started; else the soak stops with its log (Hashlb() returns when
    the process exits too, and a chain of hashlbs that never start looks like lost connections)."""
    if not any("msg=started" in line for line in lb.log):
        lb.stop()
        raise SystemExit("hashlb did not start:\n" + "\n".join(lb.log[-5:]))
    return lb


def main():
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with open("/proc/sys/net/ipv4/tcp_migrate_req", "w") as f:
        f.write(args.migrate + "\n")
    backends = [Backend(n) for n in ("a", "b", "c")]
    # the socket's path only: hashlb leaves a file that is not a socket alone, and does not start
    admin = {"unix": "unix:" + tmppath("admin.sock"), "tcp": "127.0.0.1:29501",
             "off": "off", "usr2": "off"}[args.admin]
    text = config([(b.name, b.addr) for b in backends], workers=args.workers,
                  listen=f"{LISTEN[0]}:{LISTEN[1]}").replace("admin: off", f"admin: {admin}")
    old = started(Hashlb(text, fname="soak.yaml"))
    stop, out = multiprocessing.Event(), multiprocessing.Queue()
    procs = [multiprocessing.Process(target=client, args=(k, args.clients, stop, out))
             for k in range(args.clients)]
    for p in procs:
        p.start()
    t0 = time.time()
    cycles, bad_exit, taken = 0, 0, 0
    try:
        if args.admin == "usr2":
            cycles, bad_exit, taken = in_place(old, t0)
        while args.admin != "usr2" and cycles < args.cycles and time.time() - t0 < args.seconds:
            new = started(Hashlb(text, fname="soak.yaml"))
            taken += any("listening sockets taken over" in line for line in new.log)
            time.sleep(0.05)
            old.proc.send_signal(signal.SIGTERM)
            try:
                rc = old.proc.wait(30)
            except subprocess.TimeoutExpired:
                old.proc.kill()
                rc = None
            bad_exit += rc != 0
            old = new
            cycles += 1
            if cycles % 50 == 0:
                print(f"  {cycles} upgrades, {time.time() - t0:.0f} s", flush=True)
    finally:
        stop.set()
        results = [out.get(timeout=30) for _ in procs]
        for p in procs:
            p.join(10)
        old.stop()
    time.sleep(0.5)  # the last generation's last lines
    reports = sanitizer_reports(old.log)
    conns = sum(n for n, _ in results)
    failed = {}
    for _, f in results:
        for e, c in f.items():
            failed[e] = failed.get(e, 0) + c
    total = sum(failed.values())
    print(f"hashlb {args.hashlb}, workers {args.workers}, admin {args.admin}, "
          f"tcp_migrate_req {args.migrate}: {cycles} upgrades in "
          f"{time.time() - t0:.0f} s, {conns} connections, {total} failed "
          f"({', '.join(f'{e} {c}' for e, c in sorted(failed.items())) or 'none'}), "
          f"{1000 * total / max(cycles, 1):.1f} per 1,000 upgrades; "
          f"sockets taken over in {taken}; "
          f"{'failed upgrades or old processes that did not exit (their status is not seen)' if args.admin == 'usr2' else 'old processes that did not exit 0'}: {bad_exit}; "
          f"sanitizer reports: {len(reports)}", flush=True)
    for line in reports[:10]:
        print("  ", line, flush=True)
    return 1 if bad_exit or reports else 0


if __name__ == "__main__":
    sys.exit(main())
