#!/usr/bin/env python3
"""hashlb run when a worker's io_uring fails (io_uring_enter() returns EBADR: the kernel lost a
completion for want of memory): that worker resets its clients and closes its listener sockets,
the process stops as on SIGTERM (the other worker's clients are served until they close, new
clients are refused), logs why, and exits 1, for the service manager to restart it. The
failure is made from outside: gdb attaches and changes one io_uring_enter()'s return value."""
import os
import platform
import selectors
import shutil
import signal
import socket
import subprocess
import sys

from ctltest import Lb, config
from lbtest import (Backend, check, logfmt_fields, read_each, read_line, run_tests, tmpfile,
                    wait_until)

EBADR = 53  # x86_64 Linux; the test runs there only

if not shutil.which("gdb"):
    print("SKIP: gdb is not installed (scripts/setup.sh installs it)")
    sys.exit(77)
if platform.machine() != "x86_64":
    print(f"SKIP: the failure is injected through x86_64's rax, this is {platform.machine()}")
    sys.exit(77)
_probe = subprocess.Popen(["sleep", "600"])
_attach = subprocess.run(["gdb", "-p", str(_probe.pid), "-batch", "-nx", "-ex", "detach"],
                         capture_output=True, text=True, timeout=120)
_probe.kill()
_probe.wait()
if "ptrace: Operation not permitted" in _attach.stdout + _attach.stderr:
    print("SKIP: gdb may not attach to a process here (ptrace not permitted)")
    sys.exit(77)

# Run by gdb attached to hashlb: on the first return from io_uring_enter() in thread
# HLB_FAIL_LWP (a return, not an entry: at an entry rax holds -ENOSYS), the call returns
# -HLB_FAIL_ERRNO instead; then gdb detaches, the process runs on.
GDB_SCRIPT = """\
python
import gdb, os
lwp = int(os.environ["HLB_FAIL_LWP"])
err = int(os.environ["HLB_FAIL_ERRNO"])
gdb.execute("catch syscall io_uring_enter")
while True:
    gdb.execute("continue")
    t = gdb.selected_thread()
    rax = int(gdb.parse_and_eval("$rax"))
    if t is not None and t.ptid[1] == lwp and rax != -38:
        gdb.execute("set var $rax = %d" % -err)
        print("injected: io_uring_enter returns %d in LWP %d" % (-err, lwp))
        break
gdb.execute("delete")
gdb.execute("detach")
end
"""

backend = Backend("a")


def worker_tid(pid, i):
    """The thread id of worker <i> of hashlb <pid> (its name: hlb-worker<i>), or None."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() == f"hlb-worker{i}":
                    return int(tid)
        except OSError:
            pass
    return None


def fail_worker(lb, i):
    """Make worker <i>'s next io_uring_enter() return -EBADR: whether gdb said it did."""
    tid = worker_tid(lb.proc.pid, i)
    if not check(tid is not None, f"hashlb has a thread named hlb-worker{i}"):
        return False
    script = tmpfile("fail-worker.gdb", GDB_SCRIPT)
    env = dict(os.environ, HLB_FAIL_LWP=str(tid), HLB_FAIL_ERRNO=str(EBADR))
    # a hang guard only: the worker enters io_uring at least every 100 ms (its tick)
    p = subprocess.run(["gdb", "-p", str(lb.proc.pid), "-batch", "-nx", "-x", script],
                       capture_output=True, text=True, env=env, timeout=120)
    return check("injected:" in p.stdout,
                 f"gdb changed worker {i}'s io_uring_enter() return: {p.stdout[-500:]}"
                 f"{p.stderr[-500:]}")


def worker_conns(lb):
    """{worker: connections open on it}, from GET /metrics."""
    status, body = lb.http("GET", "/metrics")
    out = {}
    for line in body.splitlines():
        if line.startswith('hashlb_worker_connections{worker="'):
            out[int(line.split('"')[1])] = int(float(line.rsplit(" ", 1)[1]))
    return out


def held_clients(lb, addr, workers, at_least=4):
    """Clients connected and greeted by the backend, at least <at_least> on each of the
    <workers> workers (the kernel spreads them by their ports): (clients, {worker: count})."""
    clients = []
    while len(clients) < 256:
        for _ in range(at_least):
            s = socket.create_connection(addr, timeout=30)  # timeouts: hang guards only
            check(read_line(s) == "a", "a client is greeted by the backend")
            clients.append(s)
        lb.wait(lambda: sum(worker_conns(lb).values()) == len(clients))
        per = worker_conns(lb)
        if min(per.get(i, 0) for i in range(workers)) >= at_least:
            break
    return clients, per


def served_or_reset(clients):
    """Each client sends a line and reads the answer: (echoed, reset, other) lists. A reset
    client's recv (or send) fails with ECONNRESET; one served gets its line back; a client
    hung (before the fix: its worker gone, its socket open) ends in <other> once no client
    has had an answer for 30 s (read_each()'s hang guard, not a measurement)."""
    lines = {s: f"ping {n}\n".encode() for n, s in enumerate(clients)}
    reset, live = [], []
    for s in clients:
        try:
            s.sendall(lines[s])
            live.append(s)
        except (ConnectionResetError, BrokenPipeError):
            reset.append(s)
    sel = selectors.DefaultSelector()
    got = read_each(live, {s: len(lines[s]) for s in live}, sel)
    sel.close()
    reset += [s for s in live if got[s] is None]
    echoed = [s for s in live if got[s] == lines[s]]
    other = [s for s in live if got[s] is not None and got[s] != lines[s]]
    return echoed, reset, other


def refused(addr):
    """Whether a new client is refused (no listener left on <addr>)."""
    try:
        socket.create_connection(addr, timeout=30).close()
        return False
    except ConnectionRefusedError:
        return True


def check_failure_logged(lb, k0, drain):
    """The log says which worker failed, why, how many of its clients were reset, and that
    the process stopped for it; each of those clients' lines says end=error err=EBADR."""
    lines = [logfmt_fields(l) for l in lb.log_to_end()]
    msgs = [f.get("msg") for f in lines]
    enter = [f for f in lines if f.get("msg") == "io_uring_enter failed"]
    check(len(enter) == 1 and enter[0].get("worker") == "0" and enter[0].get("err") == "EBADR",
          f"logged: io_uring_enter failed worker=0 err=EBADR ({enter})")
    reset = [f for f in lines if f.get("msg") == "worker failed: its connections reset"]
    check(len(reset) == 1 and reset[0].get("worker") == "0" and
          reset[0].get("connections") == str(k0) and reset[0].get("err") == "EBADR",
          f"logged: worker failed: its connections reset worker=0 connections={k0} err=EBADR "
          f"({reset})")
    want = "a worker failed while draining" if drain else "a worker failed, stopping"
    check(want in msgs, f'logged: "{want}"')
    ends = [f for f in lines if f.get("msg") == "connection" and f.get("end") == "error"]
    check(len(ends) == k0 and all(f.get("err") == "EBADR" for f in ends),
          f"{len(ends)} connection lines say end=error err=EBADR, of {k0} reset")


def fail_and_check(drain, workers=2):
    """Clients held on both workers; worker 0's io_uring fails (while serving, or while the
    process drains after a SIGTERM). Worker 0's clients are reset, worker 1's go on being
    echoed until they close, new clients are refused, the log says why and hashlb run exits
    1. Before the fix: worker 0's clients hung, unanswered, its listener kept taking new
    clients into a backlog nobody accepted from, and hashlb ran on (exit status none), or,
    failing while it drained, exited 0."""
    lb = Lb(config([("a", backend.addr)], workers=workers,
                   health="enabled: false", extra="log_connections: true\n"
                   "timeouts:\n  drain: 60s"))
    addr = lb.addrs[0].rsplit(":", 1)
    addr = (addr[0], int(addr[1]))
    clients, per = held_clients(lb, addr, workers)
    try:
        if not check(min(per.get(i, 0) for i in range(workers)) > 0,
                     f"clients held on each worker ({per})"):
            return
        k0, k1 = per[0], per.get(1, 0)
        if drain:
            lb.proc.send_signal(signal.SIGTERM)
            check(lb.wait_log(r"msg=draining"), "hashlb drains on SIGTERM")
        if not fail_worker(lb, 0):
            return
        echoed, reset, other = served_or_reset(clients)
        check(len(reset) == k0 and len(echoed) == k1 and not other,
              f"worker 0's {k0} clients reset, worker 1's {k1} served: {len(reset)} reset, "
              f"{len(echoed)} echoed, {len(other)} neither (hung or closed)")
        check(wait_until(lambda: refused(addr), timeout=30),
              "new clients are refused once hashlb stops (every listener closed)")
        if k1:
            check(lb.proc.poll() is None, "hashlb runs on while worker 1's clients are open")
        for s in echoed:  # they close: worker 1 has drained, hashlb exits
            s.shutdown(socket.SHUT_WR)
            check(s.recv(16) == b"", "a client of worker 1 gets its FIN after its own")
        try:
            rc = lb.proc.wait(60)  # a hang guard only
        except subprocess.TimeoutExpired:
            rc = None
        check(rc == 1, f"hashlb run exits 1 once drained (a restart is due), got {rc}")
        check_failure_logged(lb, k0, drain)
    finally:
        for s in clients:
            s.close()
        lb.stop()


def worker_fails_while_serving():
    fail_and_check(drain=False)


def worker_fails_while_draining():
    fail_and_check(drain=True)


def only_worker_fails():
    """The one worker's io_uring fails: its clients are reset, and hashlb run, no worker
    left, exits 1 (that exit may end the daemon's loop before the daemon reads it: the
    failure is still seen, logged and in the exit status)."""
    fail_and_check(drain=False, workers=1)


worker_fails_while_serving.__doc__ = fail_and_check.__doc__
worker_fails_while_draining.__doc__ = fail_and_check.__doc__
run_tests([worker_fails_while_serving, worker_fails_while_draining, only_worker_fails])
