#!/usr/bin/env python3
"""hashlb run when a worker's io_uring fails (io_uring_enter() returns EBADR: the kernel lost a
completion for want of memory): that worker resets its clients and closes its listener sockets,
the process stops as on SIGTERM (the other worker's clients are served until they close, new
clients are refused), logs why, and exits 1, for the service manager to restart it. The
failure is made from outside: gdb attaches and changes one io_uring_enter()'s return value.
A reload racing the failure leaves no socket listening; a connection whose poll fails (the
CQE's res changed by gdb) ends end=error, its client reset."""
import os
import re
import selectors
import signal
import socket
import subprocess
import sys

from ctltest import Lb, config, metric_sum
from gdbfail import EBADR, inject, unusable, worker_tid
from lbtest import (Backend, check, logfmt_fields, outcome, read_each, read_line, run_tests,
                    socket_inodes, tmpfile, wait_until)

_why = unusable()
if _why:
    print(f"SKIP: {_why}")
    sys.exit(77)


# Run by gdb in non-stop mode (the other threads run on) attached to hashlb: as GDB_SCRIPT,
# then thread HLB_FAIL_LWP is held, at that return ("enter": the failure not yet seen) or, with
# HLB_HOLD=exit, once it has torn its ring down (bufring_free(), after worker_fail()), until
# gdb reads "detach" on its stdin.
GDB_HOLD_SCRIPT = """\
python
import gdb, os
lwp = int(os.environ["HLB_FAIL_LWP"])
err = int(os.environ["HLB_FAIL_ERRNO"])
hold = os.environ["HLB_HOLD"]
inf = gdb.selected_inferior()
num = [t.num for t in inf.threads() if t.ptid[1] == lwp][0]
gdb.execute("set confirm off")
gdb.execute("catch syscall io_uring_enter")
gdb.execute("condition 1 $_thread == %d && $rax != -38" % num)

def resume_others():
    for t in inf.threads():
        if t.num != num and t.is_valid() and t.is_stopped():
            t.switch()
            gdb.execute("continue &")

def resume_target():
    [t for t in inf.threads() if t.num == num][0].switch()
    gdb.execute("continue &")

def on_stop(ev):
    t = gdb.selected_thread()
    if t is None or t.num != num:
        gdb.post_event(resume_others)  # stopped as the catchpoint went: on its way
        return
    if int(gdb.parse_and_eval("$rax")) != -38 and gdb.breakpoints():
        if gdb.breakpoints()[0].type == gdb.BP_CATCHPOINT:
            gdb.execute("set var $rax = %d" % -err)
            gdb.execute("delete")
            print("injected: io_uring_enter returns %d in LWP %d" % (-err, lwp), flush=True)
            if hold == "exit":
                gdb.execute("break bufring_free thread %d" % num)
                gdb.post_event(resume_target)
                return
        else:
            gdb.execute("delete")
    gdb.post_event(resume_others)
    print("held: LWP %d" % lwp, flush=True)

gdb.events.stop.connect(on_stop)
gdb.execute("continue -a &")
end
"""

# Run by gdb attached to hashlb: at the next conn_cqe() (x86_64: op in rdx, the CQE in rcx) of
# op HLB_POLL_OP, the CQE's res (after its 64-bit user_data) becomes -HLB_POLL_ERRNO, as a
# poll that failed would post it; then gdb detaches.
GDB_POLL_SCRIPT = """\
python
import gdb, os
op = int(os.environ["HLB_POLL_OP"])
err = int(os.environ["HLB_POLL_ERRNO"])
gdb.execute("break *conn_cqe if $rdx == %d" % op)
print("armed", flush=True)
gdb.execute("continue")
gdb.execute("set var *(int *)($rcx + 8) = %d" % -err)
print("injected: a poll CQE with res %d" % -err, flush=True)
gdb.execute("delete")
gdb.execute("detach")
end
"""
ENOMEM = 12

backend = Backend("a")


def fail_worker(lb, i):
    """Make worker <i>'s next io_uring_enter() return -EBADR: whether gdb said it did."""
    tid = worker_tid(lb.proc.pid, i)
    if not check(tid is not None, f"hashlb has a thread named hlb-worker{i}"):
        return False
    ok, out = inject(lb.proc.pid, tid)
    return check(ok, f"gdb changed worker {i}'s io_uring_enter() return: {out}")


def hold_failed_worker(lb, i, hold):
    """Make worker <i>'s next io_uring_enter() return -EBADR and hold the worker there
    (<hold>="enter") or once it has handled the failure ("exit"), the other threads running:
    the gdb process, which lets it go on when told "detach" (release()), or None."""
    tid = worker_tid(lb.proc.pid, i)
    if not check(tid is not None, f"hashlb has a thread named hlb-worker{i}"):
        return None
    script = tmpfile("hold-worker.gdb", GDB_HOLD_SCRIPT)
    env = dict(os.environ, HLB_FAIL_LWP=str(tid), HLB_FAIL_ERRNO=str(EBADR), HLB_HOLD=hold)
    g = subprocess.Popen(["gdb", "-q", "-nx", "-iex", "set non-stop on", "-p",
                          str(lb.proc.pid), "-x", script], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    out = []
    for line in g.stdout:  # ends if gdb exits: a hang guard is its own failure
        out.append(line)
        if line.startswith("held:"):
            return g
    g.wait()
    check(False, f"gdb held worker {i}: {''.join(out)[-1000:]}")
    return None


def release(g):
    """Let the worker held by hold_failed_worker() go on."""
    g.stdin.write("detach\nquit\n")
    g.stdin.close()
    g.stdout.read()
    g.wait(120)  # a hang guard only


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


def listening_on(pid, port):
    """The inodes (strings) of the sockets listening on <port> that <pid> holds."""
    out = subprocess.run(["ss", "-ltnHe", f"sport = :{port}"], capture_output=True, text=True,
                         timeout=30).stdout
    return {f[4:] for f in out.split() if f.startswith("ino:")} & socket_inodes(pid)


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
        listeners = listening_on(lb.proc.pid, addr[1])
        check(len(listeners) == workers, f"a listening socket per worker: {listeners}")
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
            held = lambda: listeners & socket_inodes(lb.proc.pid)
            check(wait_until(lambda: not held(), timeout=10),
                  f"hashlb holds none of its listening sockets while it drains, the failed "
                  f"worker's closed too (its port bound no more): {held()}")
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


def reload_adds_listener(hold):
    """A reload adds a listener while worker 0's ring fails (the failure not yet seen, or
    handled already): once hashlb stops for it, clients to the new address are refused, as
    to the old one, while a client of worker 1 keeps it draining. Before the fix, the socket
    the reload gave the failed worker stayed in the address's SO_REUSEPORT group, no one
    accepting on it, until hashlb exited: the kernel queued clients there, unserved."""
    lb = Lb(config([("a", backend.addr)], health="enabled: false",
                   extra="timeouts:\n  drain: 60s"))
    addr = lb.addrs[0].rsplit(":", 1)
    addr = (addr[0], int(addr[1]))
    clients, per = held_clients(lb, addr, 2, at_least=1)
    g = None
    try:
        g = hold_failed_worker(lb, 0, hold)
        if not g:
            return
        lb.rewrite(config([("a", backend.addr)], health="enabled: false",
                          extra="timeouts:\n  drain: 60s") +
                   "  - name: u\n    listen: 127.0.0.1:0\n    scheme: maglev\n"
                   "    hash_key: src-ip\n    health:\n      enabled: false\n"
                   f"    backends:\n      - name: a\n        address: {backend.addr}\n")
        rc, so, se, lines = lb.reload()
        check(rc == 0 and any("msg=reloaded " in l for l in lines),
              f"the reload adds service u ({rc} {se!r} {lines})")
        check(lb.wait(lambda: len(lb.addrs) > 1), "u listens")
        new = lb.addrs[-1].rsplit(":", 1)
        new = (new[0], int(new[1]))
        release(g)
        g = None
        check(lb.wait_log(r"msg=draining"), "hashlb stops for the failure")
        check(wait_until(lambda: refused(addr), timeout=30), "clients to t are refused")
        check(wait_until(lambda: refused(new), timeout=30),
              "clients to the address the reload added are refused (no socket left "
              "listening there)")
        check(lb.proc.poll() is None, "hashlb drains worker 1's client meanwhile")
    finally:
        if g:
            release(g)
        for s in clients:
            s.close()
        lb.stop()


def reload_adds_listener_as_worker_fails():
    reload_adds_listener("enter")


def reload_adds_listener_after_worker_failed():
    reload_adds_listener("exit")


reload_adds_listener_as_worker_fails.__doc__ = reload_adds_listener.__doc__
reload_adds_listener_after_worker_failed.__doc__ = reload_adds_listener.__doc__
def inherited_listener_outlives_failure():
    """The listening socket the service manager passed (systemd socket activation: shared by
    the workers, and held by the manager for the next hashlb) still listens once worker 0's
    ring has failed and hashlb has exited 1: a client connecting then waits in its backlog
    for the restart. Before the fix, the failed worker shut the shared socket down: the
    manager's socket stopped listening, and the restarted hashlb inherited a dead one."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    port = lsock.getsockname()[1]
    fd = lsock.fileno()
    # the socket as fd 3, LISTEN_FDS=1, LISTEN_PID its own (the exec'er's, hashlb's)
    launcher = ("import os, sys; fd = int(sys.argv[1]); fd != 3 and (os.dup2(fd, 3), "
                "os.close(fd)); os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1'); "
                "os.execv(sys.argv[2], sys.argv[2:])")
    lb = Lb(config([("a", backend.addr)], health="enabled: false", listen=f"127.0.0.1:{port}"),
            wrap=(sys.executable, "-c", launcher, str(fd)), pass_fds=(fd,))
    waiting = None
    try:
        check(any("socket=inherited" in l for l in lb.log), "hashlb serves the passed socket")
        if not fail_worker(lb, 0):
            return
        try:
            rc = lb.proc.wait(60)  # a hang guard only
        except subprocess.TimeoutExpired:
            rc = None
        check(rc == 1, f"hashlb run exits 1, got {rc}")
        try:
            waiting = socket.create_connection(("127.0.0.1", port), timeout=30)
        except ConnectionRefusedError:
            pass
        check(waiting is not None, "the manager's socket still listens: a client waits in its "
              "backlog for the next hashlb")
    finally:
        if waiting:
            waiting.close()
        lb.stop()
        lsock.close()


def op_value(name):
    """The value of enum op's <name> (src/proxy/worker.h)."""
    with open(os.path.join(os.environ["HASHLB_SOURCE_ROOT"], "src/proxy/worker.h")) as f:
        body = f.read().split("enum op {", 1)[1].split("};", 1)[0]
    names = [l.split(",")[0].split("=")[0].strip() for l in body.splitlines()]
    return [n for n in names if n.startswith("OP_")].index(name)


def ends_error(lb):
    status, body = lb.http("GET", "/metrics")
    m = re.search(r'^hashlb_backend_connection_ends_total\{service="t",backend="a",'
                  r'end="error"\} (\S+)$', body, re.M)
    return float(m.group(1)) if m else None


def poll_fails_on_open_connection():
    """A poll of an established connection fails (its CQE carries -ENOMEM: injected with
    gdb): the connection ends end=error err=ENOMEM (its log line, the ends metric) and the
    client is reset, not sent a FIN that would tell it the stream ended complete (before the
    fix: it read an end of stream)."""
    lb = Lb(config([("a", backend.addr)], workers=1, health="enabled: false",
                   extra="log_connections: true"), args=("--splice-after", "1"))
    host, port = lb.addrs[0].rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=30)  # hang guard only
    g = None
    try:
        check(read_line(s) == "a", "the client is greeted by the backend")
        data = b"y" * 65535 + b"\n"
        s.sendall(data)
        with s.makefile("rb") as f:
            check(f.readline() == data, "64 KiB echoed: both directions move to splice")
        # spliced and drained, each direction polls its source: the backend's, OP_POLL_B
        check(lb.wait(lambda: metric_sum(lb, "hashlb_worker_splice_pipes") == 2),
              "both directions spliced")
        env = dict(os.environ, HLB_POLL_OP=str(op_value("OP_POLL_B")),
                   HLB_POLL_ERRNO=str(ENOMEM))
        g = subprocess.Popen(["gdb", "-p", str(lb.proc.pid), "-batch", "-nx", "-x",
                              tmpfile("poll-fail.gdb", GDB_POLL_SCRIPT)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=env)
        out = []
        for line in g.stdout:
            out.append(line)
            if line.startswith("armed"):
                break
        s.sendall(b"x\n")  # echoed by the backend: its socket readable, the poll ends
        out += g.stdout.readlines()
        g.wait(120)  # a hang guard only
        g = None
        if not check(any(l.startswith("injected:") for l in out),
                     f"gdb made the poll fail: {''.join(out)[-1000:]}"):
            return
        n, end = outcome(s)
        check(end == "RST", f"the client is reset, got {n} bytes and a {end}")
        check(lb.wait_log(r"msg=connection .*end=error err=ENOMEM"),
              "its log line says end=error err=ENOMEM")
        check(ends_error(lb) == 1, f"ends_total{{end=error}} is 1: {ends_error(lb)}")
    finally:
        if g:
            g.kill()
            g.wait()
        s.close()
        lb.stop()


worker_fails_while_serving.__doc__ = fail_and_check.__doc__
worker_fails_while_draining.__doc__ = fail_and_check.__doc__
run_tests([worker_fails_while_serving, worker_fails_while_draining, only_worker_fails,
           reload_adds_listener_as_worker_fails, reload_adds_listener_after_worker_failed,
           poll_fails_on_open_connection, inherited_listener_outlives_failure])
