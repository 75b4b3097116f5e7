#!/usr/bin/env python3
"""Upgrading hashlb without losing a connection: a new hashlb starts on the same config beside
the running one, then the old one gets SIGTERM and drains. Under a steady stream of new
connections none fails, each client keeps its backend throughout (both processes hash alike),
and the admin endpoint, TCP or a Unix socket, belongs to the new process afterwards.

Through the admin endpoint the new hashlb takes the old one's listening sockets over (GET
/sockets: on a Unix socket they come with SCM_RIGHTS, over TCP the new one copies them with
pidfd_getfd): the same sockets listen on in the new process, so nothing depends on
net.ipv4.tcp_migrate_req, which is 0 there. Without an admin endpoint it binds sockets of its
own beside the old ones (SO_REUSEPORT) and the kernel hands the old ones' queued connections
over (tcp_migrate_req=1). Runs in a network namespace of its own, where the sysctl is set for
this test alone."""
import os
import subprocess
import urllib.request
import sys

if os.environ.get("HASHLB_TEST_NETNS") != "upgrade":
    env = dict(os.environ, HASHLB_TEST_NETNS="upgrade")
    sys.exit(subprocess.run(["unshare", "--net", sys.executable, os.path.abspath(__file__),
                             *sys.argv[1:]],
                            env=env).returncode)

import json  # noqa: E402
import re  # noqa: E402
import select  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from ctltest import Lb, config, metric_sum  # noqa: E402
from lbtest import HASHLB, Backend, Hashlb, Names, backends_on_one_port, check, client_ip, connect, dead_port, frozen, greetings, listening_sockets, lookup, outcome, pick_port, read_line, read_to_eof, run_tests, Skip, socket_inodes, spawn, suspend, tmpfile, tmppath, wait_closed, wait_until, who  # noqa: E402
from lbtest import config as plain_config  # noqa: E402
from shims import Paused, shim_env, shim_wrap  # noqa: E402

subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def migrate_req(v):
    with open("/proc/sys/net/ipv4/tcp_migrate_req", "w") as f:
        f.write(f"{v}\n")


def listen_inodes(pid, where=None):
    """The inodes of the sockets <pid> listens on at LISTEN (or as ss filter <where> says).
    (From ss, over netlink: reading /proc/net/tcp walks every socket, tens of thousands in
    TIME_WAIT here, for seconds.)"""
    out = subprocess.run(["ss", "-ltnHe", where or f"sport = :{LISTEN[1]}"], capture_output=True,
                         text=True, check=True).stdout
    listening = {f[4:] for f in out.split() if f.startswith("ino:")}
    return socket_inodes(pid) & listening


def free_port():
    """A loopback port for a config that must name its port (an upgrade's new process reads
    the same config and takes the same address over, which port 0 would not give): lbtest's
    pick_port(), below the ephemeral range and picked by no other test process running."""
    return pick_port()


def admin_addr():
    return f"127.0.0.1:{free_port()}"


LISTEN = ("127.0.0.1", free_port())
backends = [Backend(n) for n in ("a", "b", "c")]
BACKENDS = [(b.name, b.addr) for b in backends]


class Traffic:
    """Four threads opening connections from 200 client addresses, one after another, until
    stopped (or 120 s); .got[client] = the set of backends it reached, .failed = failures."""

    def __init__(self):
        self.got, self.failed, self.n = {}, [], 0
        self.stop_at = time.time() + 120
        self.threads = [threading.Thread(target=self._run, args=(k,), daemon=True)
                        for k in range(4)]
        for t in self.threads:
            t.start()

    def _run(self, k):
        i = k
        while time.time() < self.stop_at:
            src = client_ip(i % 200)
            try:
                name = who(LISTEN, src)
            except OSError as e:
                name = repr(e)
            if name in ("a", "b", "c"):
                self.got.setdefault(src, set()).add(name)
            else:
                self.failed.append(name)
            self.n += 1
            i += 4

    def wait_for(self, n, timeout=30):
        """Wait until <n> connections were made (a deadline that fails the test): a fixed
        0.5 s made a number that depends on how fast a loaded machine runs them."""
        wait_until(lambda: self.n >= n, timeout)

    def stop(self):
        self.stop_at = 0
        for t in self.threads:
            t.join()


def exit_status(proc, timeout=30):
    """<proc>'s exit status once it exits, None if it is still there after <timeout> s."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


HANDED_OVER = re.compile(r'msg="upgraded: the new hashlb is ready, this one drains" pid=(\d+)')


def handed_over(lb, k=1, timeout=30):
    """The pid of the process the <k>-th upgrade in place in <lb>'s log handed over to (a new
    process logs to its parent's stderr, so one upgraded in turn logs here too), once the old
    one said so: it closes its admin endpoint as it logs it, and the address is the new one's
    alone from then on. Before, GET /status was polled for a new pid: both processes listen
    there until the handover, so one answer could be the new one's and the next the old
    one's, and a request left in the old one's backlog as it closed is reset
    (close_reaches_two_processes_back raised ECONNRESET in 1 of its first 5 runs under load,
    and left its new processes serving the next tests). None after <timeout> s."""
    def pids():
        return [int(m.group(1)) for l in list(lb.log) for m in [HANDED_OVER.search(l)] if m]
    if not wait_until(lambda: len(pids()) >= k, timeout):
        return None
    return pids()[k - 1]


def old_exits(old, traffic, before):
    """The old hashlb, told to go, drains and exits 0; <traffic> (at .n = <before> when the
    upgrade began) then runs on a little: connections went through before, during and after,
    none failed, and no client changed backend."""
    t0 = time.time()
    rc = exit_status(old.proc, 30)
    check(rc == 0, f"the old hashlb drained and exited 0 ({rc}, {time.time() - t0:.1f}s)")
    during = traffic.n
    traffic.wait_for(during + 21)
    traffic.stop()
    check(before > 20 and during - before > 20 and traffic.n - during > 20,
          f"traffic before ({before}), during ({during - before}) and after the upgrade "
          f"({traffic.n - during})")
    check(not traffic.failed, f"no connection failed: {len(traffic.failed)} of {traffic.n}, "
          f"{traffic.failed[:5]}")
    moved = {c: s for c, s in traffic.got.items() if len(s) > 1}
    check(not moved, f"every client kept its backend: {len(moved)} moved, {list(moved)[:5]}")


def upgrade(admin):
    """One upgrade under traffic with the admin endpoint at <admin> (None: off, and then the
    new hashlb cannot take the old one's sockets over)."""
    listen = f"{LISTEN[0]}:{LISTEN[1]}"
    text = config(BACKENDS, admin=admin, listen=listen) if admin else \
        plain_config(BACKENDS, listen=listen)
    start = Lb if admin else Hashlb
    old = start(text, fname="old.yaml")
    traffic = Traffic()
    traffic.wait_for(21)
    before = traffic.n
    new = start(text, fname="new.yaml")
    if admin:
        check(new.admin == old.admin, f"the new hashlb has the admin endpoint too: {new.admin}")
    old_socks, new_socks = listen_inodes(old.proc.pid), listen_inodes(new.proc.pid)
    if admin:
        over = "unix" if admin.startswith("unix:") else "tcp"
        check(new.wait_log(r"msg=listening .*taken_over=2") and
              old.wait_log(f'msg="listening sockets handed over" count=2 over={over} '
                         f'taker={new.proc.pid}'),
              f"the old hashlb handed its 2 sockets over ({over}), the new one took them")
        check(len(old_socks) == 2 and new_socks == old_socks,
              f"the new hashlb listens on the old one's sockets: {old_socks} {new_socks}")
    else:
        check(new.wait_log(r"msg=listening .*taken_over=0"), "nothing taken over")
        check(len(new_socks) == 2 and not new_socks & old_socks,
              f"the new hashlb listens on sockets of its own: {old_socks} {new_socks}")
    traffic.wait_for(before + 21)  # through both side by side
    old.proc.send_signal(signal.SIGTERM)
    old_exits(old, traffic, before)
    if admin:
        check(new.status()["services"][0]["name"] == "t",
              "the admin endpoint answers, from the new")
        check(new.status()["pid"] == new.proc.pid, "and is the new process's")
    check(who(LISTEN, client_ip(7)) in ("a", "b", "c"), "the new hashlb serves")
    check(new.stop() == 0, "exit 0")


class Notify:
    """A service manager's notify socket ($NOTIFY_SOCKET, sd_notify(3)): .get() gives the next
    message as (sender's pid from SCM_CREDENTIALS, {field: value})."""

    def __init__(self):
        self.path = tmpfile("notify.sock", "")
        os.unlink(self.path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)

    def get(self, timeout=10):
        self.sock.settimeout(timeout)
        try:
            data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
        except socket.timeout:
            return None, {}
        pid = next((struct.unpack("iII", d)[0] for lvl, typ, d in anc
                    if lvl == socket.SOL_SOCKET and typ == socket.SCM_CREDENTIALS), None)
        return pid, dict(l.split("=", 1) for l in data.decode().splitlines() if "=" in l)

    def until(self, field, timeout=10):
        """Messages until one with <field>: (its sender, its fields)."""
        end = time.time() + timeout
        while time.time() < end:
            pid, msg = self.get(end - time.time())
            if field in msg:
                return pid, msg
        return None, {}


def break_config(path):
    """Make the config at <path> fail to load (a YAML syntax error); returns its text."""
    with open(path) as f:
        good = f.read()
    with open(path, "w") as f:
        f.write(good.replace("services:", "services: [", 1))
    return good


def kill(*pids):
    """SIGKILL each of <pids>, an upgrade's new processes (not our children), if it is still
    there, and wait until every thread of each has exited (its pidfd readable) and the
    sockets it listened on are closed (wait_closed(): its io_uring, torn down after it
    exited, holds them a little longer), 10 s at most each. They are the service's own since
    the handover: the next hashlb started on the address binds beside them (SO_REUSEPORT),
    and a client the kernel queued on a dying one was reset (close_reaches_the_old_process's
    side by side part, once in 9 runs under load, and the first test after
    close_reaches_two_processes_back twice in 13)."""
    held, fds = set(), []
    for pid in pids:
        if not pid:
            continue
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue  # gone already
        held |= listening_sockets(pid)
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        except OSError:
            pass
        fds.append(fd)
    for fd in fds:
        select.select([fd], [], [], 10)
        os.close(fd)
    if held:
        wait_closed(held)


def install(binary, path):
    """Put a copy of <binary> at <path> the way a package manager does: a new file renamed
    over the old one, which a running process keeps."""
    shutil.copy(binary, path + ".new")
    os.rename(path + ".new", path)
    return os.stat(path).st_ino


def installed(name, admin):
    """(path, Lb): a copy of hashlb installed at a path of its own (to be replaced for an
    upgrade), running on LISTEN with its admin endpoint at <admin>, config <name>.yaml."""
    exe = tmppath(f"hashlb-{name}")
    install(HASHLB, exe)
    return exe, Lb(config(BACKENDS, admin=admin, listen=f"{LISTEN[0]}:{LISTEN[1]}"),
                   fname=f"{name}.yaml", binary=exe)


def upgrade_reads_the_config_reloads_read():
    """An upgrade in place started from a relative config path (--config=lb.yaml, in the
    directory of the start) runs the new process on the absolute path the reloads read: the
    directory renamed and another written at its path (a deploy swapping directories),
    SIGHUP and the new process both read the new file. Before, the new process ran the
    command line as written, lb.yaml from the working directory it inherited, the renamed
    one: it served the old file where a reload served the new."""
    migrate_req(0)
    port = free_port()
    top = tmppath("rel-config")
    os.makedirs(top)
    with open(os.path.join(top, "lb.yaml"), "w") as f:
        f.write(plain_config(BACKENDS, listen=f"127.0.0.1:{port}"))
    log_path = tmppath("rel-config.log")
    with open(log_path, "w") as log:
        old = spawn([HASHLB, "run", "--config=lb.yaml"], cwd=top, stdout=subprocess.DEVNULL,
                    stderr=log)

    def logged(text):
        with open(log_path, errors="replace") as f:
            return text in f.read()

    check(wait_until(lambda: logged("msg=started"), 20), "started")
    os.rename(top, top + ".old")
    os.makedirs(top)
    with open(os.path.join(top, "lb.yaml"), "w") as f:
        f.write(plain_config([("b", backends[1].addr)], listen=f"127.0.0.1:{port}"))
    old.send_signal(signal.SIGHUP)
    check(wait_until(lambda: logged("msg=reloaded"), 20), "the reload read the new file")
    check(logged(f"by=signal self_pid={old.pid}\n"),
          "the reloaded line credits the signal (by=signal)")
    old.send_signal(signal.SIGUSR2)
    new_pid = None

    def upgraded():
        nonlocal new_pid
        with open(log_path, errors="replace") as f:
            m = re.search(r'msg="upgraded: the new hashlb is ready.*" pid=(\d+)', f.read())
        new_pid = m and int(m.group(1))
        return new_pid

    if not wait_until(upgraded, 20):
        with open(log_path, errors="replace") as f:
            raise SystemExit(f"the new process did not start: {f.read()[-2000:]}")
    try:
        with open(log_path, errors="replace") as f:
            check(re.search(r'started the new hashlb" pid=\d+ .* by=signal self_pid=\d+$',
                            f.read(), re.M),
                  "the upgrade's line credits the signal (by=signal)")
        with open(f"/proc/{new_pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
        want = f"--config={top}/lb.yaml".encode()
        check(want in args, f"the new process reads {want}: {args}")
        try:
            old.wait(30)
        except subprocess.TimeoutExpired:
            pass
        check(old.poll() == 0, f"the old one handed over and exited: {old.poll()}")
        got = [who(("127.0.0.1", port), client_ip(i)) for i in range(1, 9)]
        check(got == ["b"] * 8, f"the new process serves the new file: {got}")
    finally:
        if new_pid:
            os.kill(new_pid, signal.SIGTERM)
            wait_until(lambda: not os.path.exists(f"/proc/{new_pid}"), 20)


def upgrade_in_place():
    """SIGUSR2: hashlb runs the file now at its executable's path again, with the same
    command line; the new process takes the listening sockets over on a socket pair (no
    admin endpoint here, and tcp_migrate_req=0), says it is ready, and the old one tells the
    service manager the new one is the main process (MAINPID=, from the old one's PID, as
    NotifyAccess=main requires), then drains. Under traffic, nothing is lost and no client
    changes backend. A new version that cannot start leaves the old one serving."""
    migrate_req(0)
    exe = tmppath("hashlb")
    install(HASHLB, exe)
    notify = Notify()
    text = plain_config(BACKENDS, listen=f"{LISTEN[0]}:{LISTEN[1]}")
    old = Hashlb(text, fname="inplace.yaml", binary=exe,
                 env=dict(os.environ, NOTIFY_SOCKET=notify.path))
    pid, msg = notify.until("READY")
    check(pid == old.proc.pid and msg.get("MAINPID") == str(pid), f"ready: {pid} {msg}")
    new_pid = None
    try:
        # a version that cannot start: its config does not load
        good = break_config(old.path)
        old.proc.send_signal(signal.SIGUSR2)
        check(old.wait_log(r'msg="upgrade failed: .* status=1'),
              "the failed upgrade is logged, with the new process's exit status")
        check(old.proc.poll() is None and who(LISTEN, client_ip(3)) in ("a", "b", "c"),
              "the old hashlb goes on serving")
        pid, msg = notify.until("STATUS")
        check(pid == old.proc.pid and "MAINPID" not in msg and "failed" in msg["STATUS"],
              f"the service manager is told it failed, and nothing else: {msg}")
        with open(old.path, "w") as f:
            f.write(good)

        inode = install(HASHLB, exe)
        socks = listen_inodes(old.proc.pid)
        with open(f"/proc/{old.proc.pid}/cmdline", "rb") as f:
            cmdline = f.read()
        # held open: the old one drains until enough connections went through during the
        # upgrade, however quickly the new one is ready
        held = connect(LISTEN, client_ip(250))
        check(read_line(held) in ("a", "b", "c"), "a connection held in the old hashlb")
        traffic = Traffic()
        traffic.wait_for(21)
        before = traffic.n
        old.proc.send_signal(signal.SIGUSR2)
        pid, msg = notify.until("MAINPID")
        new_pid = int(msg.get("MAINPID", 0)) or None
        check(pid == old.proc.pid and new_pid and new_pid != pid and msg.get("READY") == "1",
              f"the old process names the new one the main process: {pid} {msg}")
        check(new_pid and os.stat(f"/proc/{new_pid}/exe").st_ino == inode,
              "the new process runs the newly installed file")
        if new_pid:
            with open(f"/proc/{new_pid}/cmdline", "rb") as f:
                got = f.read()
            check(got == cmdline and cmdline.startswith(exe.encode() + b"\0run\0"),
                  f"with the same command line, its argv[0] too (ps, pgrep -f find it as "
                  f"before; it was \"hashlb\"): {got!r}, was {cmdline!r}")
        check(new_pid and len(socks) == 2 and listen_inodes(new_pid) == socks,
              f"and listens on the old one's sockets: {socks}")
        check(old.wait_log(r"msg=listening .*taken_over=2"),
              "it says it took the two sockets over")
        # both write to one stderr: each line names its writer. Before, nothing told the
        # old process's "listening" lines from the new one's
        said = {(m.group(1), int(m.group(2))) for l in list(old.raw_log)
                for m in [re.search(r"msg=(started|listening) .* self_pid=(\d+)$", l)] if m}
        check(new_pid and {("started", old.proc.pid), ("started", new_pid),
                           ("listening", old.proc.pid), ("listening", new_pid)} <= said,
              f"each process's lines end with its own self_pid=: {sorted(said)}")
        traffic.wait_for(before + 21)
        held.close()
        old_exits(old, traffic, before)
        if new_pid:
            os.kill(new_pid, signal.SIGHUP)
            pid, msg = notify.until("RELOADING")
            check(pid == new_pid, f"the new process is the one that reloads: {pid}")
            os.kill(new_pid, signal.SIGTERM)
            pid, msg = notify.until("STOPPING")
            check(pid == new_pid, f"and the one that stops: {pid}")
            end = time.time() + 15
            while time.time() < end and os.path.exists(f"/proc/{new_pid}") and \
                    open(f"/proc/{new_pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
                time.sleep(0.05)
            # the new one's line is read by this process's log reader in its own time
            check(wait_until(lambda: sum("msg=stopped" in l for l in old.log) == 2),
                  "both stopped")
    finally:
        kill(new_pid)


def half_close(s, payload):
    """Send <payload> on <s>, then FIN: what comes back until the backend's EOF (the echo
    backend echoes and closes), None if no EOF comes within 5 s."""
    s.settimeout(5)
    s.sendall(payload)
    s.shutdown(socket.SHUT_WR)
    got = b""
    try:
        while True:
            d = s.recv(4096)
            if not d:
                return got
            got += d
    except socket.timeout:
        return None


def half_close_while_the_old_drains():
    """Connections the old hashlb holds after an upgrade in place end as they would without
    it: a client that half-closes gets its echo and then the backend's FIN, at once, down to
    the last connection of each of the old one's workers (its other worker still holding one:
    the process drains on). Before, the worker whose last connection ended left its loop with
    that connection's closes still unsubmitted: its client sat in CLOSE-WAIT without a FIN
    until the whole process exited. Connections the new hashlb accepts meanwhile half-close
    as well."""
    exe = tmppath("hashlb-halfclose")
    install(HASHLB, exe)
    text = plain_config(BACKENDS, listen=f"{LISTEN[0]}:{LISTEN[1]}",
                        extra="timeouts:\n  drain: 60s\n")
    old = Hashlb(text, fname="halfclose.yaml", binary=exe)
    new_pid = None
    clients = []
    try:
        for i in range(20):  # over both workers: all 20 on one has odds of 2^-19
            clients.append(connect(LISTEN, client_ip(i)))
            check(read_line(clients[-1]) in ("a", "b", "c"), f"client {i} greeted")
        old.proc.send_signal(signal.SIGUSR2)
        check(old.wait_log(r'msg="upgraded: the new hashlb is ready, this one drains"'),
              "upgraded: the old hashlb drains")
        m = [re.search(r"this one drains.* pid=(\d+)", l) for l in old.log]
        new_pid = next((int(x.group(1)) for x in m if x), None)
        news = []
        for i in range(20, 30):
            s = connect(LISTEN, client_ip(i))
            news.append((read_line(s), half_close(s, b"new %d" % i)))
            s.close()
        check(all(g in ("a", "b", "c") and e == b"new %d" % (20 + k)
                  for k, (g, e) in enumerate(news)),
              f"the new hashlb's clients half-close and get their echo and EOF: {news}")
        anchor = clients.pop()  # one connection of the old one's stays open
        ends = [half_close(s, b"old %d" % i) for i, s in enumerate(clients)]
        stuck = [i for i, e in enumerate(ends) if e is None]
        check(not stuck, f"each client of the old hashlb got the backend's EOF: none after 5 s "
              f"for {len(stuck)} of {len(ends)} ({stuck})")
        check(all(e == b"old %d" % i for i, e in enumerate(ends) if e is not None),
              "and its whole echo before it")
        check(old.proc.poll() is None, "the old hashlb drains on for the connection left")
        anchor.close()
        check(exit_status(old.proc, 15) == 0, "then exits 0")
    finally:
        for s in clients:
            s.close()
        kill(new_pid)


def ctl_upgrade():
    """hashlb ctl upgrade: the same upgrade in place through the admin endpoint (POST
    /upgrade), waiting for its outcome. With a config that no longer loads: exit 1, saying how
    the new process ended; the old one serves on and its status says the upgrade failed. Then:
    exit 0 once the new process answers at the admin address, which it now holds, running the
    newly installed file; the old one drains and exits 0."""
    exe, old = installed("ctlup", admin_addr())
    new_pid = None
    try:
        good = break_config(old.path)
        # given the file, ctl reads it first and sends nothing: the new process would refuse
        # to start on it (before: "a reload would refuse it", and the upgrade sent all the same)
        p = subprocess.run([HASHLB, "ctl", "-c", old.path, "upgrade"], capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 1 and p.stdout == "" and
              "the new hashlb would refuse to start on it; nothing was sent (give --force to "
              "upgrade all the same)" in p.stderr and
              re.search(r"ctlup\.yaml:\d+:\d+: error: ", p.stderr),
              f"ctl -c FILE upgrade of a broken file: refused ({p.returncode}, {p.stderr!r})")
        st = old.status()
        check(st["pid"] == old.proc.pid and st.get("upgrade") is None,
              f"and no upgrade was tried: {st.get('upgrade')}")
        # --force sends it: the new process refuses to start, the old one serves on
        p = subprocess.run([HASHLB, "ctl", "-c", old.path, "upgrade", "--force"],
                           capture_output=True, text=True, timeout=90)
        rc, out, err = p.returncode, p.stdout, p.stderr
        check("upgrading all the same (--force)" in err, f"--force says so: {err!r}")
        check(rc == 1 and "upgrade failed" in err and "status=1" in err and
              f"pid {old.proc.pid} goes on serving" in err,
              f"a new process that cannot start: exit 1 and why ({rc}, {out!r}, {err!r})")
        st = old.status()
        check(st["pid"] == old.proc.pid and (st.get("upgrade") or {}).get("state") == "failed",
              f"the old one's status says the upgrade failed: {st.get('upgrade')}")
        check(who(LISTEN, client_ip(5)) in ("a", "b", "c"), "the old one serves on")
        with open(old.path, "w") as f:
            f.write(good)
        inode = install(HASHLB, exe)
        rc, out, err = old.ctl("upgrade")
        m = re.search(r"handed over to pid (\d+)", out)
        new_pid = int(m.group(1)) if m else None
        check(rc == 0 and new_pid and new_pid != old.proc.pid,
              f"upgraded: exit 0, naming the new process ({rc}, {out!r}, {err!r})")
        rc = exit_status(old.proc, 30)
        check(rc == 0, f"the old one drained and exited 0 ({rc})")
        check(new_pid and os.stat(f"/proc/{new_pid}/exe").st_ino == inode,
              "the new process runs the newly installed file")
        st = old.status()
        check(st["pid"] == new_pid and st.get("upgrade") is None,
              f"the admin address is the new process's: {st['pid']} {st.get('upgrade')}")
        check(who(LISTEN, client_ip(6)) in ("a", "b", "c"), "the new one serves")
    finally:
        kill(new_pid)


def ctl_upgrade_admin_moves():
    """hashlb ctl upgrade when the new process's admin endpoint is elsewhere (admin port 0:
    each process gets its own port): the old endpoint closes as it hands over and nobody
    answers there; the new process staying up is the sign, and ctl exits 0 (it used to wait
    70 s and exit 1, failing a good upgrade in a deploy script)."""
    _, old = installed("ctlup0", "127.0.0.1:0")
    new_pid = None
    try:
        t0 = time.time()
        try:
            rc, out, err = old.ctl("upgrade")
        except subprocess.TimeoutExpired:
            rc, out, err = None, "", "no answer in 60 s"
        m = re.search(r"handed over to pid (\d+), which runs", out)
        started = [re.search(r"started the new hashlb\" pid=(\d+)", l) for l in old.log]
        new_pid = next((int(x.group(1)) for x in started if x), None)  # to stop it, whatever ctl says
        check(any(re.search(r'started the new hashlb" pid=\d+ .* by=admin$', l) for l in old.log),
              f"the line credits the admin endpoint (by=admin): {[l for l in old.log if 'started the new' in l]}")
        check(rc == 0 and m and int(m.group(1)) == new_pid and os.path.exists(f"/proc/{new_pid}"),
              f"exit 0, naming the new process ({rc}, {out!r}, {err!r}) in {time.time() - t0:.1f}s")
        rc = exit_status(old.proc, 30)
        check(rc == 0, f"the old one drained and exited 0 ({rc})")
        check(who(LISTEN, client_ip(7)) in ("a", "b", "c"), "the new one serves")
    finally:
        kill(new_pid)


def stuck_new_process_is_killed():
    """A new process that never gets ready and ignores SIGTERM (stuck before its loop, its
    signals blocked): SIGTERM to the old one during the upgrade stops it too, and, still
    there when the old one exits, it is killed rather than left running alone (it used to be
    left orphaned, holding what it had taken over)."""
    exe, old = installed("stuck", "127.0.0.1:0")
    with open(exe + ".new", "w") as f:
        f.write("#!/bin/sh\ntrap '' TERM\nexec sleep 30\n")
    os.chmod(exe + ".new", 0o755)
    os.rename(exe + ".new", exe)
    new_pid = None
    try:
        old.proc.send_signal(signal.SIGUSR2)
        end = time.time() + 10
        while time.time() < end and not new_pid:
            new_pid = (old.status().get("upgrade") or {}).get("new_pid")
            time.sleep(0.05)
        check(new_pid, "the stuck process started")
        old.proc.send_signal(signal.SIGTERM)
        rc = exit_status(old.proc, 20)
        check(rc == 0 and old.wait_log("stopping during an upgrade"),
              f"the old one stops, saying the new one stops too ({rc})")

        def alive():
            try:
                with open(f"/proc/{new_pid}/stat") as f:
                    return f.read().rsplit(")", 1)[1].split()[0] != "Z"
            except OSError:
                return False  # gone, reaped

        # killed (SIGKILL) as the old one exits: it dies a moment later, not at once
        check(new_pid and wait_until(lambda: not alive()),
              f"the stuck new process ({new_pid}) is not left running")
    finally:
        kill(new_pid)


def missing_executable_is_reported():
    """SIGUSR2 with the executable gone (a package removed, a path renamed): no process
    can start; this one goes on serving and says so in /status and in hashlb ctl status,
    where a SIGUSR2's sender looks (it used to say nothing there: upgrade null), naming the
    file it could not run (hashlb ctl upgrade said only "cannot upgrade: No such file or
    directory", /status "could not be started, ENOENT": which file, the operator guessed)."""
    exe, old = installed("gone", "127.0.0.1:0")
    real = os.path.realpath(exe)  # the path hashlb knows itself by
    os.unlink(exe)
    old.proc.send_signal(signal.SIGUSR2)
    old.wait(lambda: (old.status().get("upgrade") or {}).get("state") == "failed")
    up = old.status().get("upgrade")
    why = f"could not be started, ENOENT (No such file or directory): {real}"
    check(up and up["new_pid"] is None and up["error"] == why,
          f"/status: the upgrade failed, no process started, from which file: {up}")
    # its line credits the signal, as the other upgrade lines do (before, no by=); waited
    # for: the log is read apart from /status, which may say it first
    gone = r'msg="cannot upgrade in place" .* err=ENOENT by=signal$'
    check(old.wait_log(gone), "the failure's line credits the signal (by=signal): "
          f"{[l for l in old.log if 'cannot upgrade in place' in l]}")
    rc, so, se = old.ctl("status")
    check(rc == 0 and "last upgrade FAILED (this process still serving): the new hashlb "
          f"{why}\n" in so, f"hashlb ctl status says it: {so}{se}")
    # hashlb ctl upgrade says why as the other commands do: text, not the endpoint's JSON
    rc, so, se = old.ctl("upgrade")
    check(rc == 1 and se == f"hashlb ctl: cannot upgrade: the new hashlb {why}\n",
          f"hashlb ctl upgrade: exit 1 and the reason in words: {rc} {se!r}")
    s = connect(LISTEN, client_ip(1))
    check(read_line(s) in ("a", "b", "c"), "and it still serves")
    s.close()
    # a failure before any file is run (here no descriptor left for the new process's
    # socket pair: the soft fd limit lowered to the lowest free descriptor number, so that
    # every number below it is taken and none above it may be made; the count of those open
    # left a socket pair room where the numbers had gaps, as under ASan) says its own
    # reason; it used to leave the earlier attempt's, and /status and POST /upgrade named
    # the missing file
    # (a descriptor open for a moment when the limit is set, a health check's, may close
    # before the signal and leave room: tried again then, at most 5 times)
    import resource
    pid = old.proc.pid
    lim = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    fails = lambda: [l for l in old.log if 'msg="cannot upgrade in place"' in l]  # noqa: E731
    tries = []
    try:
        for _ in range(5):
            taken = {int(n) for n in os.listdir(f"/proc/{pid}/fd")}
            lowest_free = next(n for n in range(len(taken) + 1) if n not in taken)
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (lowest_free, lim[1]))
            n = len(fails())
            old.proc.send_signal(signal.SIGUSR2)
            old.wait(lambda: len(fails()) > n)
            tries += fails()[n:n + 1]
            if any("err=EMFILE" in l for l in tries):
                break
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, lim)
    check(any(re.search(r' err=EMFILE by=signal$', l) for l in tries),
          f"the upgrade fails at its socket pair, the line crediting the signal: {tries}")
    up = old.status().get("upgrade")
    check(up and up["new_pid"] is None and up["error"] == "could not be started, EMFILE "
          "(Too many open files): socketpair", f"/status says that failure's reason: {up}")
    check(old.stop() == 0, "exit 0")


def upgrade_keeps_run_time_settings():
    """What was set at run time (hashlb ctl set: a drain, a weight, a cap) and what health
    checks found (a dead backend) carry over to the new process of an upgrade, as a reload
    keeps them: a drained backend does not take clients again, and no client moves (the
    new process used to start from the config alone, every backend ready and up). So do the
    reload counts, which an operator reads as the service's history: before, ctl status's
    "reloads: N ok" and hashlb_reloads_total began at 0 again."""
    from lbtest import dead_port
    exe = tmppath("hashlb-keeps")
    install(HASHLB, exe)
    dead = ("d", f"127.0.0.1:{dead_port()}")
    old = Lb(config(BACKENDS + [dead], admin=admin_addr(),
                    listen=f"{LISTEN[0]}:{LISTEN[1]}"), fname="keeps.yaml", binary=exe)
    new_pid = None
    try:
        for args in (("b", "drain"), ("a", "weight", "3"), ("c", "max_connections", "5")):
            rc, so, se = old.ctl("set", *args)
            check(rc == 0, f"ctl set {' '.join(args)}: {se}")
        for _ in range(2):
            check(old.reload()[0] == 0, "a reload")
        good = break_config(old.path)
        check(old.reload()[0] != 0, "a broken config's reload fails")
        with open(old.path, "w") as f:
            f.write(good)
        # out of the table, not only marked down: the table is rebuilt a little after the
        # health change (debounced), and until then d's clients are tried on d and go to
        # their next backend, which the new process (d out from its start) does not give
        # them: seen under load as a few clients "moved" a<->c across the upgrade
        check(old.wait(lambda: old.backend("d")["health"] == "down" and
                       not old.backend("d")["in_table"]), "d is found down, out of the table")
        clients = [client_ip(i) for i in range(200)]
        before = {c: who(LISTEN, c) for c in clients}
        old.proc.send_signal(signal.SIGUSR2)
        rc = exit_status(old.proc, 30)
        check(rc == 0, f"the old one handed over and exited 0 ({rc})")
        st = old.status()
        new_pid = st["pid"]
        after = {c: who(LISTEN, c) for c in clients}
        bs = {b["name"]: b for b in old.service()["backends"]}
        check(new_pid != old.proc.pid and bs["b"]["state"] == "drain" and
              bs["a"]["weight"] == 3 and bs["c"]["max_connections"] == 5,
              f"the new process has them: {[(n, b['state'], b['weight'], b['max_connections']) for n, b in bs.items()]}")
        check(bs["d"]["health"] == "down", f"and d down: {bs['d']['health']}")
        rc, so, se = old.ctl("status")
        check(st["reloads"]["ok"] == 2 and st["reloads"]["failed"] == 1 and
              "reloads: 2 ok, 1 failed" in so and metric_sum(old, "hashlb_reloads_total") == 3,
              f"the reload counts carried over: {st['reloads']} {so.splitlines()[1:2]}")
        moved = [c for c in clients if before[c] != after[c]]
        check(not moved and "b" not in after.values(),
              f"no client moved ({len(moved)}: {[(c, before[c], after[c]) for c in moved[:5]]}), "
              f"none went to the drained b")
    finally:
        kill(new_pid)


def upgrade_keeps_slow_start_going():
    """Backends in slow start, one back up after its checks (d) and one a reload added (e),
    a third of the way into a 20 s ramp, and an upgrade in place: the new process goes on
    with each ramp where the old one was, so the share of their clients they admit is about
    the same right after as right before, and no client admitted before is turned away. The
    new process used to start them not ramping: each admitted all its clients at once."""
    slow = 20.0
    exe = tmppath("hashlb-ramp")
    install(HASHLB, exe)
    dport = dead_port()  # held until d starts there
    listen = f"{LISTEN[0]}:{LISTEN[1]}"
    admin = admin_addr()
    extra = f"slow_start: {slow:.0f}s"
    e = Backend("e")
    base = BACKENDS + [("d", f"127.0.0.1:{dport}")]
    old = Lb(config(base, admin=admin, listen=listen, extra=extra), fname="ramp.yaml",
             binary=exe)
    d, new_pid = None, None
    try:
        check(old.wait(lambda: old.backend("d")["health"] == "down") is not None, "d down")
        old.rewrite(config(base + [("e", e.addr)], admin=admin, listen=listen, extra=extra))
        t0 = time.time()  # neither ramp began before this
        d = Backend("d", port=dport)
        rc, so, se = old.ctl("reload")
        check(rc == 0, f"reload adds e: {se}")
        clients = [client_ip(i * 613) for i in range(2000)]
        first = lookup(old.path, clients)
        mine = {n: [c for c in clients if first[c][0] == n][:150] for n in ("d", "e")}
        check(all(len(m) == 150 for m in mine.values()), "d and e own a share of the table")
        check(old.wait(lambda: all(old.backend(n)["slow_start"] >= 1 / 3 for n in ("d", "e")),
                       slow) is not None, "d and e a third of the way into their ramps")

        def sample():
            got = {n: {c for c in m if who(LISTEN, c) == n} for n, m in mine.items()}
            return got, time.time() - t0
        before, _ = sample()
        old.proc.send_signal(signal.SIGUSR2)
        check(exit_status(old.proc, 30) == 0, "the old one handed over and exited 0")
        new_pid = old.status()["pid"]
        check(new_pid != old.proc.pid, "the new process answers")
        after, at = sample()
        for n in ("d", "e"):
            fb, fa = len(before[n]) / 150, len(after[n]) / 150
            # at most what <at> s of ramp admit, with a margin for the hash's granularity
            most = at / slow + 0.15
            print(f"    {n}: {fb:.0%} of its clients admitted before the upgrade, {fa:.0%} "
                  f"after (at most {at:.1f}s into the ramp)")
            check(before[n] <= after[n],
                  f"{n}: every client admitted before is admitted after "
                  f"({len(before[n] - after[n])} turned away)")
            check(fa <= most, f"{n}: the ramp goes on: {fa:.0%} admitted, not all at once "
                              f"(at most {most:.0%})")
        ramps = {b["name"]: b["slow_start"] for b in old.service()["backends"]}
        check(0 < ramps["d"] < 1 and 0 < ramps["e"] < 1 and
              old.service()["ramp_table_for"] == ["d", "e"],
              f"the new process says they ramp: {ramps}, {old.service()['ramp_table_for']}")
        check(all(old.wait_log(f"carried over from the old hashlb.*backend={n} .*slow_start=0\\.")
                  for n in ("d", "e")), "it says what it carried over")
    finally:
        kill(new_pid)
        for b in (d, e):
            if b:
                b.stop()


def slow_to_start(exe, seconds):
    """Replace the hashlb installed at <exe> by one that waits <seconds> before it runs
    (a new process slow to come up: a big config, names to resolve)."""
    with open(exe + ".new", "w") as f:
        f.write(f"#!/bin/sh\nsleep {seconds}\nexec {HASHLB} \"$@\"\n")
    os.chmod(exe + ".new", 0o755)
    os.rename(exe + ".new", exe)


def upgrade_started(old):
    """The new process's pid once GET /status shows the upgrade under way, else None. An
    upgrade done before the first look (a new process not held back by slow_to_start(), on a
    loaded machine) is found too: the old process answers that it handed its admin address
    over, and the address then answers with the new one's pid. Before, that answer raised
    here, the caller never learnt the pid to kill, and the new process, left serving on the
    test's addresses, failed every test after it (CI, once, beside eight builds)."""
    end = time.time() + 10
    while time.time() < end:
        try:
            st = old.status()
        except AssertionError as e:
            if "handed its admin address over" not in str(e):
                raise
            time.sleep(0.02)
            continue
        up = st.get("upgrade") or {}
        if up.get("state") == "starting":
            return up.get("new_pid")
        if st.get("pid") != old.proc.pid:  # the new process answers: it took over
            return st.get("pid")
        time.sleep(0.02)
    return None


def set_during_an_upgrade_is_not_lost():
    """hashlb ctl set while an upgrade in place is under way: the new process took the
    run-time settings over when it started, so a set the old one applied then would vanish
    at the handover (it used to: answered 0, drained in the old process, ready again in the
    new one). It is refused, saying why, and what the operator was told holds afterwards."""
    exe, old = installed("setup", admin_addr())
    new_pid = None
    try:
        rc, so, se = old.ctl("set", "a", "weight", "2")
        check(rc == 0, f"ctl set a weight 2 before the upgrade: {se}")
        slow_to_start(exe, 2)
        old.proc.send_signal(signal.SIGUSR2)
        new_pid = upgrade_started(old)
        check(new_pid, "the upgrade is under way")
        rc, so, se = old.ctl("set", "b", "drain")
        check(rc == 1 and "an upgrade is under way" in se,
              f"ctl set b drain during the upgrade is refused, saying why: {rc} {so}{se}")
        rc_old = exit_status(old.proc, 30)
        check(rc_old == 0, f"the old one handed over and exited 0 ({rc_old})")
        bs = {b["name"]: b for b in old.service()["backends"]}
        check(old.status()["pid"] == new_pid, "the new process answers")
        check(bs["b"]["state"] == ("drain" if rc == 0 else "ready"),
              f"b is as ctl set said ({rc}): {bs['b']['state']}")
        check(bs["a"]["weight"] == 2, f"the weight set before was carried over: {bs['a']['weight']}")
    finally:
        kill(new_pid)


def held_until(exe, path):
    """Replace the hashlb installed at <exe> by one that waits until <path> exists before it
    runs (a new process slow to come up, for as long as the test needs)."""
    with open(exe + ".new", "w") as f:
        f.write(f"#!/bin/sh\nwhile [ ! -e {path} ]; do sleep 0.02; done\nexec {HASHLB} \"$@\"\n")
    os.chmod(exe + ".new", 0o755)
    os.rename(exe + ".new", exe)


def health_found_while_the_new_process_starts():
    """The old process's checks find a backend up again (c) and another dead (d) after it
    handed its run-time settings over and before the new process is ready (a slow start:
    names to resolve, a big config). Once ready, the new process takes that health from the
    old one at once: it used to start from the first lines, c down and d up, until <rise>
    checks of its own passed on c (its clients sent elsewhere meanwhile, and back: 22 of 60
    clients moved twice, 2.7 s with the default checks) and <fall> failed on d (its clients
    tried there first)."""
    exe = tmppath("hashlb-resync")
    install(HASHLB, exe)
    cport = dead_port()  # held until c starts there
    d = Backend("d")
    rise_fall = 5
    health = f"interval: 200ms\ntimeout: 100ms\nrise: {rise_fall}\nfall: {rise_fall}"
    old = Lb(config(BACKENDS[:2] + [("c", f"127.0.0.1:{cport}"), ("d", d.addr)],
                    admin=admin_addr(), listen=f"{LISTEN[0]}:{LISTEN[1]}", health=health),
             fname="resync.yaml", binary=exe)
    go = tmppath("resync-go")
    c, new_pid = None, None
    try:
        check(old.wait(lambda: old.backend("c")["health"] == "down" and
                       old.backend("d")["health"] == "up") is not None, "c down, d up")
        held_until(exe, go)
        old.proc.send_signal(signal.SIGUSR2)
        new_pid = upgrade_started(old)
        check(new_pid, "the upgrade is under way")
        c = Backend("c", port=cport)
        d.stop()
        check(old.wait(lambda: old.backend("c")["health"] == "up" and
                       old.backend("d")["health"] == "down", 30) is not None,
              "the old one finds c up and d down while the new one starts")
        open(go, "w").close()
        check(exit_status(old.proc, 30) == 0, "the old one handed over and exited 0")
        st = None

        def settled():
            nonlocal st
            st = {b["name"]: b for b in old.service()["backends"]}
            return st["c"]["health"] == "up" and st["d"]["health"] == "down"
        check(old.status()["pid"] == new_pid and old.wait(settled, 30) is not None,
              "the new process has c up and d down")
        # from the old one, not after <rise_fall> checks of its own: a verdict of its own
        # checks first would have left the old one's untaken, and this line unwritten
        check(old.wait_log(r'msg="backend up" service=t backend=c cause=old_hashlb') and
              old.wait_log(r'msg="backend down" service=t backend=d cause=old_hashlb'),
              "it says where the health came from")
        # and the checks that found it so with it, in the counts the new process goes on
        # from (before, those counts began at 0 here, and read as its own checks)
        check(st["c"]["checks_ok"] >= rise_fall and st["d"]["checks_failed"] >= rise_fall,
              f"the old one's checks counted: c up after {st['c']['checks_ok']} passed, "
              f"d down after {st['d']['checks_failed']} failed")
    finally:
        kill(new_pid)
        if c:
            c.stop()


def upgrade_keeps_a_backend_seen_up():
    """A backend the old process's checks saw up goes down after an upgrade in place: the new
    process counts that a flap (hashlb_backend_flaps_total, and the flap damping), as the old
    one would have. It took every backend up as only assumed, as at start: its first down was
    no flap, the count one short."""
    exe = tmppath("hashlb-seen")
    install(HASHLB, exe)
    d = Backend("d")
    health = "interval: 200ms\ntimeout: 100ms\nrise: 2\nfall: 2"
    old = Lb(config(BACKENDS[:2] + [("d", d.addr)], admin=admin_addr(),
                    listen=f"{LISTEN[0]}:{LISTEN[1]}", health=health),
             fname="seen.yaml", binary=exe)
    new_pid = None
    try:
        check(old.wait(lambda: old.backend("d")["health"] == "up" and
                       old.backend("d")["checks_ok"] >= 1) is not None,
              "a check of the old one saw d up")
        old.proc.send_signal(signal.SIGUSR2)
        new_pid = upgrade_started(old)
        check(new_pid and exit_status(old.proc, 30) == 0, "the old one handed over and exited 0")
        check(old.wait(lambda: old.status()["pid"] == new_pid, 30) is not None,
              "the new process answers")
        d.stop()
        check(old.wait(lambda: old.backend("d")["health"] == "down", 30) is not None,
              "the new one finds d down")
        flaps = old.backend("d")["flaps"]
        check(flaps == 1, f"its down is a flap, d was seen up: flaps={flaps}")
    finally:
        kill(new_pid)
        d.stop()


class SlowDns:
    """A DNS server on 127.0.0.53:53 (this test's network namespace) that answers every A
    query with 127.0.0.1, and every other with no address, after .delay seconds; .queries
    counts what it was asked."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.53", 53))
        self.sock.settimeout(0.2)
        self.delay, self.queries = 0, 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _answer(self, q, peer, delay):
        time.sleep(delay)
        end = 12
        while q[end]:
            end += q[end] + 1
        qtype = struct.unpack("!H", q[end + 1:end + 3])[0]
        head = q[:2] + struct.pack("!HHHHH", 0x8180, 1, qtype == 1, 0, 0)
        answer = struct.pack("!HHHIH4B", 0xc00c, 1, 1, 0, 4, 127, 0, 0, 1) if qtype == 1 else b""
        try:
            self.sock.sendto(head + q[12:end + 5] + answer, peer)
        except OSError:
            pass

    def _run(self):
        while not self.done.is_set():
            try:
                q, peer = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            self.queries += 1
            threading.Thread(target=self._answer, args=(q, peer, self.delay), daemon=True).start()

    def close(self):
        self.done.set()
        self.thread.join()
        self.sock.close()


def reload_during_an_upgrade_reaches_the_new_process():
    """A reload (hashlb ctl reload, or SIGHUP as systemctl reload sends it to the main
    process) while an upgrade in place is under way, after the new process has read the
    config (here: it still waits for the names in it): the old one applies it, and the new
    one, once ready, reloads too. It used to serve on the config as it was before the reload,
    which the operator had been told was applied."""
    from lbtest import Names
    dns = SlowDns()
    names = Names("hup", "", nss="dns", resolv="nameserver 127.0.0.53\noptions timeout:10 attempts:1\n")
    exe = tmppath("hashlb-hup")
    install(HASHLB, exe)
    port = backends[0].port
    named = [("a", f"alpha.test:{port}")] + BACKENDS[1:]
    listen = f"{LISTEN[0]}:{LISTEN[1]}"
    admin = admin_addr()
    old = Lb(config(named, admin=admin, listen=listen), fname="hup.yaml", binary=exe,
             wrap=names.wrap())
    new_pid = None
    try:
        for how in ("ctl", "SIGHUP"):
            asked = dns.queries
            dns.delay = 2
            old.proc.send_signal(signal.SIGUSR2)
            new_pid = upgrade_started(old)
            end = time.time() + 10
            while time.time() < end and dns.queries == asked:
                time.sleep(0.02)
            check(new_pid and dns.queries > asked, f"{how}: the new process has read the config")
            weight = 3 if how == "ctl" else 4
            old.rewrite(config(named[:2] + [("c", BACKENDS[2][1], f"weight: {weight}")],
                               admin=admin, listen=listen))
            if how == "ctl":
                rc, so, se = old.ctl("reload")
                check(rc == 0, f"ctl reload during the upgrade: {rc} {so}{se}")
            else:
                old.proc.send_signal(signal.SIGHUP)
            rc = exit_status(old.proc, 30)
            check(rc == 0, f"{how}: the old one handed over and exited 0 ({rc})")
            dns.delay = 0
            check(old.wait(lambda: old.status()["pid"] == new_pid and
                           old.backend("c")["weight"] == weight) is not None,
                  f"{how}: the new process runs the reloaded config: c's weight "
                  f"{old.backend('c')['weight']}, not {weight}")
            check(old.wait_log(rf"msg=\"reloaded while the new hashlb started: it reloads too\" "
                               rf"pid={new_pid}"), f"{how}: the old one says so")
            # the next round upgrades the new process: follow it as the old one
            old.proc = NotOurChild(new_pid)
    finally:
        kill(new_pid)
        dns.close()


def reload_moving_the_address_during_an_upgrade_resets_no_one():
    """A reload that moves a service from 127.0.0.1:P to 0.0.0.0:P while an upgrade in place
    starts, after the old process handed its sockets over and before the new one read the
    config: the old one closes its 127.0.0.1:P socket, which the new one still holds and the
    kernel still queues that address's clients on, and the new one, reading the moved address,
    does not use it. It serves the clients queued there, as a reload that moves an address
    does, before closing it. Before, it closed it and reset them: 6 of 6 here (4 in 10
    upgrades each followed by such a reload under 2,800 new connections a second)."""
    exe = tmppath("hashlb-gate")
    install(HASHLB, exe)
    gate = tmppath("gate-open")
    port = free_port()
    admin = admin_addr()
    lb = Lb(config(BACKENDS[:1], admin=admin, listen=f"127.0.0.1:{port}"), fname="gate.yaml",
            binary=exe)
    new_pid = None
    socks = []
    try:
        # the new process waits at the gate, holding the sockets handed to it
        with open(exe + ".new", "w") as f:
            f.write(f"#!/bin/sh\nwhile [ ! -e {gate} ]; do sleep 0.02; done\n"
                    f"exec {HASHLB} \"$@\"\n")
        os.chmod(exe + ".new", 0o755)
        os.rename(exe + ".new", exe)
        lb.proc.send_signal(signal.SIGUSR2)
        new_pid = upgrade_started(lb)
        check(new_pid, "the upgrade is under way")
        lb.rewrite(config(BACKENDS[:1], admin=admin, listen=f"0.0.0.0:{port}"))
        rc, so, se = lb.ctl("reload")
        check(rc == 0 and lb.wait_log(rf'msg="listener closed" addr=127.0.0.1:{port} service=t'),
              f"the old process moved the address: {rc} {so}{se}")
        for i in range(6):
            s = socket.socket()
            s.bind((client_ip(8200 + i), 0))
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            socks.append(s)
        open(gate, "w").close()
        got = greetings(socks)
        served = sum(g == b"a\n" for g in got)
        check(served == len(socks), f"every client queued on the socket the new process does "
              f"not use is served: {served} of {len(socks)} ({got})")
        check(lb.wait_log(r'msg="sockets taken over and not used: their queued clients served"'),
              "the new process says so")
    finally:
        for s in socks:
            s.close()
        kill(new_pid)


class Bursts:
    """A thread opening <width> connections at once (non-blocking, from as many client
    addresses), reading each one's greeting, then the next <width>, until stopped (or 120 s):
    many clients in the accept queues at any instant. .n connections, .reset those that got
    no greeting (closed or reset)."""

    def __init__(self, width=64):
        self.n, self.reset, self.width = 0, 0, width
        self.stop_at = time.time() + 120
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        k = 0
        while time.time() < self.stop_at:
            socks = []
            for _ in range(self.width):
                s = socket.socket()
                s.bind((client_ip(k % 200), 0))
                s.setblocking(False)
                s.connect_ex(LISTEN)
                socks.append(s)
                k += 1
            got = greetings(socks)
            self.reset += sum(g not in (b"a\n", b"b\n", b"c\n") for g in got) + \
                len(socks) - len(got)
            self.n += len(socks)
            for s in socks:
                s.close()

    def wait_for(self, n, timeout=30):
        wait_until(lambda: self.n >= n, timeout)

    def stop(self):
        self.stop_at = 0
        self.thread.join()


def fewer_workers_after_an_upgrade_reset_no_one():
    """Upgrades in place to fewer workers (3 to 1, the config's workers: changed before
    SIGUSR2), and back: the new process takes one of the old one's 3 sockets per address for
    its worker, and the kernel goes on hashing new clients (SO_REUSEPORT) onto the other 2 for
    as long as any process holds them. Under many clients connecting at once through each
    upgrade and after it, until the old process has exited, none is reset."""
    migrate_req(0)
    exe = tmppath("hashlb-fewer")
    install(HASHLB, exe)
    listen = f"{LISTEN[0]}:{LISTEN[1]}"
    old = Hashlb(plain_config(BACKENDS, listen=listen, workers=3), fname="fewer.yaml",
                 binary=exe)
    pids = []
    bursts = None
    try:
        socks = listen_inodes(old.proc.pid)
        check(len(socks) == 3, "the old hashlb listens on 3 sockets")
        bursts = Bursts()
        proc = old.proc
        for k, workers in enumerate((1, 3) * 4 + (1,), 1):
            bursts.wait_for(bursts.n + 64)
            with open(old.path, "w") as f:
                f.write(plain_config(BACKENDS, listen=listen, workers=workers))
            proc.send_signal(signal.SIGUSR2)
            new_pid = handed_over(old, k)
            check(new_pid, f"upgrade {k} to {workers} worker(s): the new process took over")
            if not new_pid:
                break
            pids.append(new_pid)
            rc = exit_status(proc, 30)
            check(rc == 0, f"upgrade {k}: the old hashlb drained and exited 0 ({rc})")
            # the same 3 sockets throughout: none closed while the kernel queued on it
            check(listen_inodes(new_pid) == socks,
                  f"upgrade {k}: the new process listens on the 3 sockets, with {workers} "
                  f"worker(s): {listen_inodes(new_pid)} {socks}")
            proc = NotOurChild(new_pid)
        bursts.wait_for(bursts.n + 64)
        bursts.stop()
        check(bursts.reset == 0, f"no client reset: {bursts.reset} of {bursts.n}")
    finally:
        if bursts:
            bursts.stop()
        kill(*pids)


def reload_re_adding_a_service_during_an_upgrade():
    """During one upgrade in place, a reload that removes a service and a next one that adds
    it back: the new process, still starting, holds the socket handed over for it, so the
    port is taken, by this service's own socket. The second reload used to be refused
    ("cannot listen on 127.0.0.1:P: ... another process listens there"), though the new
    process, once ready, served the address as the config says. The sockets handed over count
    by address, as the kernel matches a bind: another process's on 127.0.0.2:P was no
    conflict (the port was handed over), and u split its clients with it; 0.0.0.0:P, which
    covers the socket handed over, is."""
    exe = tmppath("hashlb-readd")
    install(HASHLB, exe)
    gate = tmppath("readd-open")
    port = free_port()
    admin = admin_addr()
    base = config(BACKENDS[:1], admin=admin, listen=f"127.0.0.1:{port}")
    u_addr = ("127.0.0.1", free_port())
    second = (f"  - name: u\n    listen: 127.0.0.1:{u_addr[1]}\n    backends:\n"
              f"      - name: b\n        address: {BACKENDS[1][1]}\n")
    lb = Lb(base + second, fname="readd.yaml", binary=exe)
    new_pid = None
    try:
        held_until(exe, gate)
        lb.proc.send_signal(signal.SIGUSR2)
        new_pid = upgrade_started(lb)
        check(new_pid, "the upgrade is under way")
        lb.rewrite(base)
        rc, so, se = lb.ctl("reload")
        check(rc == 0, f"a reload removing u: {rc} {so}{se}")
        other = socket.socket()
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.2", u_addr[1]))
        other.listen(8)
        lb.rewrite(base + second.replace("listen: 127.0.0.1:", "listen: 127.0.0.2:"))
        rc, so, se = lb.ctl("reload")
        other.close()
        check(rc == 1 and "127.0.0.2" in se and "another process listens there" in se,
              f"a reload adding u on 127.0.0.2:P, where another process listens: refused "
              f"({rc} {so}{se})")
        lb.rewrite(base + second.replace("listen: 127.0.0.1:", "listen: 0.0.0.0:"))
        rc, so, se = lb.ctl("reload")
        check(rc == 0, f"a reload adding u on 0.0.0.0:P, over the socket handed over: "
              f"{rc} {so}{se}")
        lb.rewrite(base + second)
        rc, so, se = lb.ctl("reload")
        check(rc == 0, f"a reload adding u back, while the new process holds its socket: "
              f"{rc} {so}{se}")
        open(gate, "w").close()
        rc = exit_status(lb.proc, 30)
        check(rc == 0, f"the old one handed over and exited 0 ({rc})")
        check(lb.wait(lambda: lb.status()["pid"] == new_pid) is not None and
              who(u_addr, client_ip(9)) == "b", "the new process serves u")
    finally:
        kill(new_pid)


def reload_sent_to_the_old_process_after_an_upgrade():
    """SIGHUP to the process that was the service's before an upgrade in place, while it
    still drains (a pid saved before the upgrade, a service manager that had not yet taken
    MAINPID= when it ran its reload): the new process serves the config now, and reloads.
    The old one used to ignore it: the reload went nowhere."""
    admin = admin_addr()
    exe, old = installed("hupold", admin)
    new_pid = None
    try:
        held = connect(LISTEN, client_ip(1))
        check(read_line(held) in ("a", "b", "c"), "a connection held in the old process")
        old.proc.send_signal(signal.SIGUSR2)
        new_pid = handed_over(old)
        check(new_pid, "upgraded")
        old.rewrite(config(BACKENDS[:2] + [("c", BACKENDS[2][1], "weight: 5")],
                           admin=admin, listen=f"{LISTEN[0]}:{LISTEN[1]}"))
        old.proc.send_signal(signal.SIGHUP)
        check(old.wait(lambda: old.backend("c")["weight"] == 5) is not None,
              f"the new process reloads: c's weight {old.backend('c')['weight']}")
        check(old.wait_log(rf'msg="SIGHUP: handed over, the new hashlb reloads" pid={new_pid}'),
              "the old one says where the reload went")
        held.sendall(b"still here\n")
        check(read_line(held) == "still here", "the held connection still works")
        held.close()
        rc = exit_status(old.proc, 30)
        check(rc == 0, f"the old one exits 0 once it is drained ({rc})")
    finally:
        kill(new_pid)


def idle_upgrades_log_no_failure():
    """Upgrades in place (SIGUSR2) of a hashlb with no client, one after another: each old
    process, with nothing to drain, exits as soon as the new one is ready, often before the new
    one asks it for the clients waiting in its queues, or answers its "none": there were none,
    nothing failed, and the log says nothing did (the new one says at info that the old one had
    exited). Before, about 2 in 3 such upgrades logged level=warn msg="cannot ask the old
    hashlb for its queued clients" err=EPIPE, and some "cannot answer the old hashlb", a
    warning to chase after each routine upgrade."""
    lb = Lb(config(BACKENDS, admin=admin_addr(), listen=f"{LISTEN[0]}:{LISTEN[1]}"),
            fname="idle.yaml")
    pids = []
    try:
        pid = lb.proc.pid
        for k in range(1, 13):
            os.kill(pid, signal.SIGUSR2)
            new = handed_over(lb, k)
            check(new, f"upgrade {k} handed over")
            check(NotOurChild(pid).wait(30) is not None if pid != lb.proc.pid else
                  exit_status(lb.proc, 30) == 0, f"the old process {pid}, idle, exited")
            pids.append(new)
            pid = new
        s = connect(LISTEN, client_ip(1))
        check(read_line(s) in ("a", "b", "c"), "the last one serves")
        s.close()
        exited = [l for l in lb.log if "the old hashlb had exited" in l]
        bad = [l for l in lb.log if " level=warn " in l or " level=error " in l]
        check(not bad, f"no warning nor error: {len(bad)}, {bad[:3]}")
        print(f"    {len(exited)} of 12 new processes found the old one gone when they asked")
    finally:
        kill(*pids)


def reload_sent_to_the_first_process_after_two_upgrades():
    """Two upgrades in place in a row (A -> B -> C), A still draining a connection and B,
    with none, gone: a SIGHUP to A (a pid saved before the first upgrade) reaches C, which
    serves. A used to pass it to B alone, which had exited (A's unreaped child): the reload
    went nowhere, and A's log said the new hashlb reloads. B told A of C as it handed over.
    Once C is gone too (killed), A says the SIGHUP went nowhere."""
    admin = admin_addr()
    listen = f"{LISTEN[0]}:{LISTEN[1]}"
    extra = "timeouts:\n  drain: 60s\n"
    exe = tmppath("hashlb-twice")
    install(HASHLB, exe)
    a = Lb(config(BACKENDS, admin=admin, listen=listen, extra=extra), fname="twice.yaml",
           binary=exe)
    b_pid = c_pid = None
    try:
        held = connect(LISTEN, client_ip(1))
        check(read_line(held) in ("a", "b", "c"), "a connection held in A")
        a.proc.send_signal(signal.SIGUSR2)
        b_pid = handed_over(a)
        check(b_pid, "A -> B")
        os.kill(b_pid, signal.SIGUSR2)
        c_pid = handed_over(a, 2)
        check(c_pid, "B -> C")
        b = NotOurChild(b_pid)
        check(b.wait(30) is not None, "B, with no connection, drained and exited")
        a.rewrite(config(BACKENDS[:2] + [("c", BACKENDS[2][1], "weight: 5")], admin=admin,
                         listen=listen, extra=extra))
        a.proc.send_signal(signal.SIGHUP)
        check(a.wait(lambda: a.backend("c")["weight"] == 5) is not None,
              f"C reloads: c's weight {a.backend('c')['weight']}")
        check(a.wait_log(rf'msg="SIGHUP: handed over, the new hashlb reloads" pid={c_pid}'),
              "A says it passed it to C")
        # gone as A sees it: its pidfd readable once every thread has exited (the /proc
        # state shows the leader a zombie while its workers may still be exiting; a SIGHUP
        # sent then reaches the dying C, rightly)
        cfd = os.pidfd_open(c_pid)
        os.kill(c_pid, signal.SIGKILL)
        gone = select.poll()
        gone.register(cfd, select.POLLIN)
        check(gone.poll(10000), "C killed")
        os.close(cfd)
        a.proc.send_signal(signal.SIGHUP)
        check(a.wait_log(rf'msg="SIGHUP not passed on: .*" pid={c_pid}'),
              "with C gone, A says the SIGHUP went nowhere")
        held.sendall(b"still here\n")
        check(read_line(held) == "still here", "A's connection still works")
        held.close()
        check(exit_status(a.proc, 30) == 0, "A exits 0 once it is drained")
    finally:
        kill(b_pid, c_pid)


def close_reaches_the_old_process():
    """hashlb ctl close BACKEND after an upgrade in place: the admin address is the new
    process's, and the old one still drains its own connections to that backend. They are
    closed too (the new process asks the old one), and the answer counts them apart. It used
    to answer with the new process's count alone, exit 0, while the old one's connections
    went on until its drain ended. Through a side-by-side takeover (GET /sockets) nothing
    can ask the old one: the answer says its connections are not closed."""
    exe, old = installed("closeold", admin_addr())
    new_pid = None
    held = []
    try:
        for i in range(12):
            s = connect(LISTEN, client_ip(i))
            held.append((s, read_line(s)))
        target = held[0][1]
        on_target = [s for s, n in held if n == target]
        old.proc.send_signal(signal.SIGUSR2)
        new_pid = handed_over(old)
        check(new_pid, "upgraded")
        rc, so, se = old.ctl("close", target)
        check(rc == 0 and f"and {len(on_target)} of the hashlb this one took over from "
              f"(pid {old.proc.pid})" in so,
              f"the answer counts the old process's {len(on_target)} apart: {rc} {so!r} {se!r}")
        ends = []
        for s in on_target:
            s.settimeout(10)
            try:
                ends.append(s.recv(100))
            except OSError as e:
                ends.append(repr(e))
        check(all(e in (b"",) or "Reset" in str(e) for e in ends),
              f"the old process's connections to {target} are closed: {ends}")
        others = [(s, n) for s, n in held if n != target]
        for s, n in others:
            s.sendall(b"still\n")
        check(all(read_line(s) == "still" for s, _ in others),
              "its other connections go on")
        for s, _ in held:
            s.close()
        check(exit_status(old.proc, 30) == 0, "the old one drains and exits 0")
        rc, so, se = old.ctl("close", target)
        check(rc == 0 and "took over from" not in so,
              f"once it has exited, the answer is the new process's alone: {so!r}")
    finally:
        kill(new_pid)
    # side by side: the new hashlb took the sockets through GET /sockets
    # (on a Unix socket, which the new one takes over: over TCP both would answer)
    text = config(BACKENDS, admin="unix:" + tmppath("close-side.sock"),
                  listen=f"{LISTEN[0]}:{LISTEN[1]}")
    first = Lb(text, fname="close-side-old.yaml")
    s = connect(LISTEN, client_ip(1))
    name = read_line(s)
    second = Lb(text, fname="close-side-new.yaml")
    check(second.wait_log(r'msg="listening sockets taken over"'), "taken over side by side")
    # a second run on the config (by mistake too) is told the first serves on beside it
    note = (f'msg="listening sockets taken over" count=2 from=\\S+ pid={first.proc.pid} '
            f'note="pid {first.proc.pid} serves beside this one until it stops: send it '
            'SIGTERM to finish the upgrade \\(it drains\\)"$')
    check(second.wait_log(note), "and says the old one serves on until it is stopped: " +
          "; ".join(l for l in second.log if "taken over" in l))
    rc, so, se = second.ctl("close", name)
    check(rc == 0 and f"NOT those of the hashlb this one took over from (pid {first.proc.pid})"
          in so, f"the new one says it did not close the old one's: {so!r}")
    status, body = second.http("POST", f"/close?service=t&backend={name}&format=json")
    check(status == 200 and
          f'"old":{{"pid":{first.proc.pid},"closing":null,"asked":false}}' in body,
          f"in JSON too, not asked: {body!r}")
    s.close()
    check(first.stop() == 0 and second.stop() == 0, "both exit 0")


def unread_by(pid):
    """The bytes waiting in the receive queues of <pid>'s Unix stream sockets (ss -x)."""
    inodes = socket_inodes(pid)
    out = subprocess.run(["ss", "-xH"], capture_output=True, text=True, check=True).stdout
    return sum(int(f[2]) for f in (l.split() for l in out.splitlines())
               if len(f) >= 6 and f[5] in inodes)


def close_does_not_stall_the_new_process():
    """hashlb ctl close after an upgrade in place, the old process stopped (SIGSTOP) while it
    drains: the new one asks it, and waits 2 s for its answer on its loop, answering what
    else comes meanwhile: a GET /status sent after the close (once the old one's socket holds
    the request) is answered before the close is. The close then says that the old one could
    not be asked. The new one used to wait in poll(), its control thread stalled (health
    checks, reloads, every admin request) for those 2 s, a hop at a time. The client of the
    close shuts down writing after its request (nc -N): it still gets the answer (a FIN over
    TCP is the same from a client that has gone, which is answered too: docs/control.md)."""
    exe, old = installed("closestop", admin_addr())
    new_pid = None
    try:
        held = connect(LISTEN, client_ip(1))
        target = read_line(held)
        old.proc.send_signal(signal.SIGUSR2)
        new_pid = handed_over(old)
        check(new_pid, "upgraded")
        check(suspend(old.proc), "the old process stopped")
        closing = old.admin_socket()
        closing.sendall(f"POST /close?service=t&backend={target}&format=json HTTP/1.1\r\n"
                        "Host: t\r\nContent-Length: 0\r\n\r\n".encode())
        closing.shutdown(socket.SHUT_WR)
        check(wait_until(lambda: unread_by(old.proc.pid) > 0),
              "the close reached the old process's socket, unread")
        asking = old.admin_socket()
        asking.sendall(b"GET /status HTTP/1.1\r\nHost: t\r\n\r\n")
        first, _, _ = select.select([closing, asking], [], [], 30)
        check(first == [asking], f"GET /status is answered first: "
              f"{['close' if s is closing else 'status' for s in first]}")
        status, close = read_to_eof(asking), read_to_eof(closing)
        check(status.startswith(b"HTTP/1.1 200") and b'"pid":%d' % new_pid in status,
              f"by the new process: {status[:80]!r}")
        check(close.startswith(b"HTTP/1.1 200") and
              b'"old":{"pid":%d,"closing":null,"asked":false}' % old.proc.pid in close,
              f"the close says the old one could not be asked: {close!r}")
        closing.close()
        asking.close()
    finally:
        old.proc.send_signal(signal.SIGCONT)
    held.close()
    check(exit_status(old.proc, 30) == 0, "the old one, continued, drains and exits 0")
    kill(new_pid)


def close_held_at_a_handover_says_what_it_did():
    """A POST /close that waits for the count of the hashlb this one took over from (A -> B, A
    stopped: SIGSTOP) when this one hands its admin address over in its turn (B -> C) is
    answered then with what it did: its own connections closed, A asked too, A's count not
    waited for. It was carried out: answered as a request that was not (the handover's "try
    again"), sent again it would close the connections made since. B waits 2 s for A's count,
    so the handover must come within them: C, the upgrade's new process, is held as it binds
    its admin socket (start_pause.c, preloaded by a stand-in installed as the new version that
    runs hashlb), the Unix path still B's, until the close waits for A; let go, it is ready
    and B hands over at once, well inside the 2 s on a quiet machine (0.4 s here). On a
    loaded one (CI's sanitizer build beside the rest) C may take longer: where B's 2 s ran out
    first (B logs that A did not answer), the case was not made, and it is made again, three
    times at most; the answer of a try that made it must be the one above."""
    for i in range(3):
        close, gave_up = close_at_a_handover(i)
        if not gave_up:
            break
        print(f"    try {i}: B's 2 s for A's count ran out before C was ready: again")
    check(not gave_up, "in one of three tries C was ready within B's 2 s")
    check(gave_up or close.startswith(b"HTTP/1.1 200") and
          b"its count not waited for: this one handed its admin address over" in close,
          f"B answers what it did, A's count not waited for: {close!r}")


def close_at_a_handover(i):
    """One try of close_held_at_a_handover_says_what_it_did: (B's answer to the close, whether
    B gave up on A's count before the handover). A second close, in JSON, held with it, says
    the same its way."""
    path = tmppath(f"closehand{i}.sock")
    exe, a = installed(f"closehand{i}", "unix:" + path)
    real = tmppath(f"hashlb-closehand{i}-real")
    install(HASHLB, real)
    rendezvous = socket.socket(socket.AF_UNIX)
    rendezvous.bind(tmppath(f"closehand{i}-pause.sock"))
    rendezvous.listen(1)
    rendezvous.settimeout(30)
    wrap = list(shim_wrap("start_pause", "HLB_TEST_PAUSE_AT=bind", "HLB_TEST_PAUSE_FD=50"))
    b_pid = c_pid = None
    held = None
    close = close_json = b""
    try:
        held = connect(LISTEN, client_ip(1))
        target = read_line(held)
        a.proc.send_signal(signal.SIGUSR2)
        b_pid = handed_over(a)
        check(b_pid, "A -> B")
        with open(exe + ".new", "w") as f:
            f.write(f"#!{sys.executable}\n"
                    "import os, socket, sys\n"
                    "s = socket.socket(socket.AF_UNIX)\n"
                    f"s.connect({tmppath(f'closehand{i}-pause.sock')!r})\n"
                    "os.dup2(s.fileno(), 50)\n"
                    f"os.execvp('env', {wrap!r} + [{real!r}] + sys.argv[1:])\n")
        os.chmod(exe + ".new", 0o755)
        os.rename(exe + ".new", exe)
        os.kill(b_pid, signal.SIGUSR2)
        pause, _ = rendezvous.accept()
        pause.settimeout(30)
        check(pause.recv(1) == b"p", "C is about to bind its admin socket")
        check(suspend(a.proc), "A stopped")
        closing = a.admin_socket()
        closing.sendall(f"POST /close?service=t&backend={target}&format=text HTTP/1.1\r\n"
                        "Host: t\r\nContent-Length: 0\r\n\r\n".encode())
        check(wait_until(lambda: unread_by(a.proc.pid) > 0),
              "B asked A, which does not read: the close waits")
        # a second close, in JSON, waits in line behind the first (B asks A one at a time):
        # held once B logs its own close of it
        closed_by_b = f'msg="closing a backend\'s connections" service=t backend={target} '

        def b_closed():
            return sum(closed_by_b in l and l.endswith(f" self_pid={b_pid}")
                       for l in list(a.raw_log))
        closing_json = a.admin_socket()
        closing_json.sendall(f"POST /close?service=t&backend={target}&format=json HTTP/1.1\r\n"
                             "Host: t\r\nContent-Length: 0\r\n\r\n".encode())
        check(wait_until(lambda: b_closed() >= 2), "B carried the JSON close out too: it waits")
        pause.close()  # C goes on
        c_pid = handed_over(a, 2)
        check(c_pid, "B -> C")
        closing.settimeout(30)
        close = read_to_eof(closing)
        closing.close()
        closing_json.settimeout(30)
        close_json = read_to_eof(closing_json)
        closing_json.close()
    finally:
        a.proc.send_signal(signal.SIGCONT)
        rendezvous.close()
        if held:
            held.close()
    check(exit_status(a.proc, 30) == 0, "A, continued, drains and exits 0")
    kill(b_pid, c_pid)
    # B's 2 s ran out first: it logs so, and its answer says A could not be asked. Not a
    # failure of this try but a case not made (the caller tries again); before, the check
    # below failed the test on such a try, so that the retries never helped.
    gave_up = b"could not be asked" in close or any(
        "the old hashlb did not answer" in l and l.endswith(f" self_pid={b_pid}")
        for l in list(a.raw_log))
    check(gave_up or b"(pid %d) were asked too" % a.proc.pid in close,
          f"B says it asked A: {close!r}")
    # JSON says "closing":null both for this and for an old one not asked: "asked" tells
    check(gave_up or close_json.startswith(b"HTTP/1.1 200") and
          b'"old":{"pid":%d,"closing":null,"asked":true}' % a.proc.pid in close_json,
          f"in JSON too, A asked: {close_json!r}")
    return close, gave_up


def close_reaches_two_processes_back():
    """Two upgrades in place in a row (A -> B -> C), A and B draining connections to the same
    backend: hashlb ctl close against C closes B's and, through B, A's, counted together as the
    old process's (B's). Two closes sent at once are both answered, the second finding none
    left."""
    exe, a = installed("closetwo", admin_addr())
    b_pid = c_pid = None
    held = []

    def hold(first):
        for i in range(first, first + 12):
            s = connect(LISTEN, client_ip(i))
            held.append((s, read_line(s)))
    try:
        hold(0)
        target = held[0][1]
        a.proc.send_signal(signal.SIGUSR2)
        b_pid = handed_over(a)
        check(b_pid, "A -> B")
        hold(20)
        on_target = sum(n == target for _, n in held)
        os.kill(b_pid, signal.SIGUSR2)
        c_pid = handed_over(a, 2)
        check(c_pid, "B -> C")
        rc, so, se = a.ctl("close", target)
        check(rc == 0 and f"and {on_target} of the hashlb this one took over from (pid {b_pid})"
              in so, f"C counts B's and A's {on_target} as B's: {rc} {so!r} {se!r}")
        ends = []
        for s, n in held:
            if n == target:
                s.settimeout(10)
                try:
                    ends.append(s.recv(100))
                except OSError as e:
                    ends.append(repr(e))
        check(all(e == b"" or "Reset" in str(e) for e in ends),
              f"A's and B's connections to {target} are closed: {ends}")
        socks = [a.admin_socket() for _ in range(2)]
        for s in socks:
            s.sendall(f"POST /close?service=t&backend={target}&format=json HTTP/1.1\r\n"
                      "Host: t\r\nContent-Length: 0\r\n\r\n".encode())
        answers = [read_to_eof(s) for s in socks]
        check(all(x.startswith(b"HTTP/1.1 200") and
                  b'"old":{"pid":%d,"closing":0,"asked":true}' % b_pid in x for x in answers),
              f"two closes at once, both answered: {answers}")
        for s in socks:
            s.close()
    finally:
        for s, _ in held:
            s.close()
        kill(b_pid, c_pid)


def old_process_logs_its_totals():
    """After an upgrade in place the admin address, and so /metrics, is the new process's: a
    client the old one refuses while it drains (here one that waited in its queue for a
    backend at max_connections) was counted where nobody could read it. The old process logs
    each service's totals as it exits, that refusal included. (A waiting client is handed to
    the new process now: this one's config, changed on disk, names the service anew, so the
    new one does not take it and it waits on in the old one, to its deadline.)"""
    exe = tmppath("hashlb-totals")
    install(HASHLB, exe)
    old = Lb(config([("a", BACKENDS[0][1], "max_connections: 1")], health="enabled: false",
                    extra="timeouts:\n  queue: 1s", admin=admin_addr(),
                    listen=f"{LISTEN[0]}:{LISTEN[1]}"), fname="totals.yaml", binary=exe)
    new_pid = None
    try:
        holder = connect(LISTEN, client_ip(1))
        check(read_line(holder) == "a", "a holds its one connection")
        waiting = connect(LISTEN, client_ip(2))
        check(wait_until(lambda: 'hashlb_service_queued{service="t"} 1' in
                         old.http("GET", "/metrics")[1]), "the second client waits in the queue")
        with open(old.path) as f:
            text = f.read()
        with open(old.path, "w") as f:
            f.write(text.replace("- name: t\n", "- name: t2\n"))
        old.proc.send_signal(signal.SIGUSR2)
        new_pid = handed_over(old)
        check(new_pid, "upgraded")
        waiting.settimeout(30)
        try:
            end = waiting.recv(100)
        except OSError as e:
            end = repr(e)
        check(end == b"" or "Reset" in str(end), f"the waiting client is refused: {end!r}")
        holder.close()
        check(exit_status(old.proc, 30) == 0, "the old one drains and exits 0")
        # logged as it exited, read by this process's log reader in its own time (the pipe
        # stays open: the new one runs on); taken at once, it was not there yet (once in 9)
        old.wait_log(r'msg="service totals"')
        line = next((l for l in old.log if 'msg="service totals"' in l), "")
        got = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        refused = sum(int(got.get(k, 0)) for k in ("queue_timeouts", "queue_aborts", "no_backend"))
        check(got.get("service") == "t" and got.get("lookups") == "2" and
              got.get("connections") == "1" and refused == 1,
              f"the old process logs its totals, the refusal after the upgrade included: {line!r}")
        metrics = old.http("GET", "/metrics")[1]
        check('hashlb_service_queue_timeouts_total{service="t2"} 0' in metrics and
              'hashlb_service_queue_aborts_total{service="t2"} 0' in metrics,
              "the new process's /metrics has none of it")
    finally:
        kill(new_pid)


def old_process_totals_count_its_bytes():
    """An operator bills on bytes. A connection the old process keeps after an upgrade in place
    goes on forwarding there, where no scrape reads it (/metrics is the new one's); and a
    backend a reload removed takes its byte counters with it, a while after it drained. The old
    process's totals line counts both: its bytes each way are every byte its clients sent and
    received through it. Before, the line had no bytes at all."""
    exe = tmppath("hashlb-bytes")
    install(HASHLB, exe)
    two = BACKENDS[:2]
    text = config(two, health="enabled: false", admin=admin_addr(),
                  listen=f"{LISTEN[0]}:{LISTEN[1]}")
    old = Lb(text, fname="bytes.yaml", binary=exe)
    new_pid = None
    try:
        table = old.lookup([client_ip(i) for i in range(40)])
        src = {name: next(c for c, b in table.items() if b == name) for name, _ in two}
        sent = received = 0

        def echo(s, n):
            nonlocal sent, received
            s.sendall(b"x" * (n - 1) + b"\n")
            check(read_line(s) == "x" * (n - 1), f"{n} bytes echoed")
            sent += n
            received += n

        conns = {}
        for name, c in src.items():
            conns[name] = connect(LISTEN, c)
            check(read_line(conns[name]) == name, f"the client reaches {name}")
            received += len(name) + 1
            echo(conns[name], 1000)
        # b removed by a reload: its connection drains there, then b drains no more
        old.rewrite(config(two[:1], health="enabled: false", admin=old.admin,
                           listen=f"{LISTEN[0]}:{LISTEN[1]}"))
        check(old.reload()[0] == 0, "reloaded without b")
        echo(conns["b"], 3000)
        conns["b"].close()
        check(wait_until(lambda: not old.service()["draining"]), "b drained")
        old.proc.send_signal(signal.SIGUSR2)
        new_pid = handed_over(old)
        check(new_pid, "upgraded")
        echo(conns["a"], 20000)  # forwarded by the old process, after the upgrade
        conns["a"].close()
        check(exit_status(old.proc, 30) == 0, "the old one drains and exits 0")
        # logged as it exited, read by this process's log reader in its own time (the pipe
        # stays open: the new one runs on); taken at once, it was not there yet (once in 9)
        old.wait_log(r'msg="service totals"')
        line = next((l for l in old.log if 'msg="service totals"' in l), "")
        got = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        check(got.get("sent_bytes") == str(sent) and got.get("received_bytes") == str(received),
              f"the old process's totals count {sent} bytes sent and {received} received: {line!r}")
    finally:
        kill(new_pid)


# The service and backend counters an upgrade in place carries: every counter and histogram
# sample of theirs but those of the process's own work (its table builds, its ticks) and of
# kernel steering (the kernel's maps, taken over with their counts).
NOT_CARRIED = ("hashlb_service_rebuild", "hashlb_service_tick_visits", "hashlb_service_steer_")


def carried_samples(lb):
    """{(name, labels): value} of <lb>'s /metrics samples an upgrade in place carries on."""
    from promtext import parse_prometheus
    status, body = lb.http("GET", "/metrics")
    check(status == 200, f"GET /metrics answers 200 ({status})")
    return {k: v for k, v in parse_prometheus(body).items()
            if k[0].startswith(("hashlb_service_", "hashlb_backend_")) and
            not k[0].startswith(NOT_CARRIED) and
            (k[0].endswith("_total") or k[0].startswith("hashlb_backend_connect_seconds_"))}


def upgrade_carries_the_totals():
    """A Prometheus user reads the service's counters across upgrades: increase() over a
    window, a dashboard of totals, an alert on an absolute count. An upgrade in place carries
    each service's and backend's totals (connections, bytes, failures, checks, ends, the
    connect histogram) into the new process, which goes on from them, through a chain of
    upgrades too: every sample after the upgrade is at least what it was before. A backend the
    new config no longer has drops its series. Before, every one of them began at 0 again in
    the new process."""
    exe = tmppath("hashlb-carries")
    install(HASHLB, exe)
    dead = ("d", f"127.0.0.1:{dead_port()}")
    text = config(BACKENDS + [dead], admin=admin_addr(), listen=f"{LISTEN[0]}:{LISTEN[1]}")
    old = Lb(text, fname="carries.yaml", binary=exe)
    pids = []

    def traffic(n, start):
        for i in range(start, start + n):
            s = connect(LISTEN, client_ip(i))
            check(read_line(s) in ("a", "b", "c"), "a client is served")
            s.sendall(b"x" * 99 + b"\n")
            check(read_line(s) == "x" * 99, "100 bytes echoed")
            s.close()
        # its ends counted: the connections closed on the backends' side too
        check(wait_until(lambda: metric_sum(old, "hashlb_backend_active_connections") == 0),
              "every connection ended")

    try:
        check(old.wait(lambda: old.backend("d")["health"] == "down") is not None,
              "d is found down")
        traffic(60, 0)
        before = carried_samples(old)

        def shown(samples):  # (connections, bytes sent) of the service
            return (samples[("hashlb_service_connections_total", '{service="t"}')],
                    sum(v for (n, _), v in samples.items()
                        if n == "hashlb_backend_sent_bytes_total"))

        conns, sent = shown(before)
        d_failed = before[("hashlb_backend_checks_failed_total", '{service="t",backend="d"}')]
        check(conns >= 60 and sent >= 6000 and d_failed > 0,
              f"counted before: {conns} connections, {sent} bytes sent, d failed {d_failed} checks")
        old.rewrite(config(BACKENDS, admin=old.admin, listen=f"{LISTEN[0]}:{LISTEN[1]}"))
        for k in (1, 2):
            if k == 1:
                old.proc.send_signal(signal.SIGUSR2)
            else:
                traffic(20, 60)
                before = carried_samples(old)
                conns, sent = shown(before)
                os.kill(pids[-1], signal.SIGUSR2)
            pids.append(handed_over(old, k))
            check(pids[-1], f"upgrade {k} handed over")
            after = carried_samples(old)
            lower = [(key, v, after.get(key)) for key, v in before.items()
                     if 'backend="d"' not in key[1] and after.get(key, -1) < v]
            check(not lower, f"upgrade {k}: no total went back ({len(lower)} did: {lower[:5]})")
            check(not [key for key in after if 'backend="d"' in key[1]],
                  f"upgrade {k}: d, out of the new config, has no series")
            st = old.service()
            check(st["connections"]["total"] >= conns and
                  sum(b["bytes_in"] for b in st["backends"]) >= sent,
                  f"upgrade {k}: /status goes on from them too: {st['connections']}")
            rc, so, se = old.ctl("status")
            m = re.search(r"connections: \d+ active, (\d+) total", so)
            check(rc == 0 and m and int(m.group(1)) >= conns,
                  f"upgrade {k}: and ctl status: {m and m.group(0)}")
        # a reload then removes c: once it has drained, /status's rows and `drained` still
        # add up to the service's total, c's carried connections in `drained` as in its row
        # (before, `drained` had c's own alone, short by those of the processes before)
        c_total = old.backend("c")["total"]
        old.rewrite(config([b for b in BACKENDS if b[0] != "c"], admin=old.admin,
                           listen=f"{LISTEN[0]}:{LISTEN[1]}"))
        rc, so, se = old.ctl("reload")
        check(rc == 0 and old.wait(lambda: not old.service()["draining"]) is not None,
              f"c removed and drained: {se}")
        st = old.service()
        rows = sum(b["total"] for b in st["backends"]) + st["drained"]["total"]
        check(st["drained"]["total"] == c_total and rows == st["connections"]["total"],
              f"the rows and drained add up to the service's: {rows} of "
              f"{st['connections']['total']}, drained {st['drained']['total']} of c's {c_total}")
        check(exit_status(old.proc, 30) == 0, "the first process drained and exited 0")
    finally:
        kill(*pids)


def removed_service_drains_on_in_the_old_process():
    """A reload removes a service whose timeouts.drain is longer than every other service's,
    its connection draining; an upgrade in place follows. The old process keeps that
    connection until the drain of the reload that removed it ends, as it would have without
    the upgrade: the upgrade drains as long as its own services' timeouts and its removed
    ones' still to run. Before, it drained for its listening services' longest timeout
    alone (1 s here) and cut the removed service's connection then, 59 s early. And the
    connection of the service kept is closed at that service's own 1 s, while the removed
    one's goes on: before, every connection of the old process drained to the longest."""
    exe = tmppath("hashlb-gone")
    install(HASHLB, exe)
    base = config(BACKENDS[:1], health="enabled: false", admin=admin_addr(),
                  listen=f"{LISTEN[0]}:{LISTEN[1]}", extra="timeouts:\n  drain: 1s\n")
    gone = ("127.0.0.1", free_port())
    second = (f"  - name: gone\n    listen: 127.0.0.1:{gone[1]}\n    timeouts:\n"
              f"      drain: 60s\n    health:\n      enabled: false\n    backends:\n"
              f"      - name: b\n        address: {BACKENDS[1][1]}\n")
    old = Lb(base + second, fname="gone.yaml", binary=exe)
    new_pid = None
    try:
        s = connect(gone, client_ip(7))
        check(read_line(s) == "b", "a client of gone reaches b")
        kept = connect(LISTEN, client_ip(8))
        check(read_line(kept) == "a", "a client of the service kept reaches a")
        old.rewrite(base)
        check(old.reload()[0] == 0, "reloaded without gone")
        s.sendall(b"before\n")
        check(read_line(s) == "before", "its connection drains")
        old.proc.send_signal(signal.SIGUSR2)
        new_pid = handed_over(old)
        check(new_pid, "upgraded")
        # past the 1 s the old process's own service gives its drain, well within gone's
        # (a hang guard, not a measurement)
        check(outcome(kept, timeout=30) == (0, "FIN"),
              "the kept service's connection is closed at its own drain timeout")
        kept.close()
        s.settimeout(10)
        try:
            s.sendall(b"after\n")
            got = read_line(s)
        except OSError as e:
            got = repr(e)
        check(got == "after", f"the removed service's connection still forwards after the "
              f"upgrade's own drain timeout: {got!r}")
        check(old.proc.poll() is None, "the old process drains on for it")
        s.close()
        check(exit_status(old.proc, 30) == 0, "the old one drains and exits 0 once it closed")
    finally:
        kill(new_pid)


def set_after_a_side_by_side_takeover_is_not_lost():
    """A new hashlb run took the old one's sockets over through its TCP admin endpoint
    (GET /sockets), with its run-time settings; both serve that address (SO_REUSEPORT) until
    the old one is stopped. A hashlb ctl set that reached the old one was answered 0, applied
    there, and lost when it stopped: about half of them. The old one refuses them now, saying
    so; every set answered 0 is the new process's."""
    admin = admin_addr()
    text = config(BACKENDS, admin=admin, listen=f"{LISTEN[0]}:{LISTEN[1]}")
    old = Lb(text, fname="side-old.yaml")
    new = Lb(text, fname="side-new.yaml")
    check(new.wait_log(r'msg="listening sockets taken over" count=2'), "the new one took the sockets")
    applied, refused, lost = 0, 0, []
    for weight in range(2, 26):
        rc, so, se = old.ctl("set", "a", "weight", str(weight))
        if rc != 0:
            refused += 1
            check("has handed its sockets and run-time settings over" in se,
                  f"a refusal says why: {se}")
            continue
        applied += 1
        for _ in range(50):  # ask until the new process answers
            st = old.status()
            if st["pid"] == new.proc.pid:
                break
        got = {b["name"]: b["weight"] for b in st["services"][0]["backends"]}["a"]
        if st["pid"] != new.proc.pid or got != weight:
            lost.append((weight, got))
    check(not lost, f"every set answered 0 is the new process's: {lost} lost of {applied}")
    check(refused > 0 and applied > 0, f"the two processes shared the requests: {applied} "
          f"applied, {refused} refused")
    check(old.stop() == 0, "the old one drains and exits 0")
    rc, so, se = new.ctl("set", "a", "weight", "7")
    check(rc == 0 and new.backend("a")["weight"] == 7, f"the new one alone takes sets: {se}")
    check(new.stop() == 0, "exit 0")


def another_instance_keeps_its_admin_address():
    """A second hashlb started on another config (another service, or one of the same name on
    another address) with the admin address of one that runs (two instances of one host left
    at the default 127.0.0.1:9901) is no upgrade of it: it is refused at start, naming its
    'admin' key, and the first one goes on answering alone, taking sets. Before, the second
    took the first's sockets over, left them unused, and shared the admin address with it:
    each answered about half of the requests, a set of the second's backends landed there,
    and the first refused every set ("handed over") for as long as the second ran."""
    admin = admin_addr()
    first = Lb(config(BACKENDS, name="web", admin=admin), fname="first.yaml")
    for k, text in enumerate([config(BACKENDS, name="db", admin=admin),
                              config(BACKENDS, name="web", admin=admin,
                                     listen=f"127.0.0.1:{free_port()}")]):
        line = text.splitlines().index(f"admin: {admin}") + 1
        path = tmpfile(f"second{k}.yaml", text)
        errf = tmppath(f"second{k}.err")
        with open(errf, "w") as f:
            p = subprocess.Popen([HASHLB, "run", "-c", path], stdout=subprocess.DEVNULL,
                                 stderr=f)
        try:
            # refused as it starts; (before) started beside the first in well under 15 s
            wait_until(lambda: p.poll() is not None or "msg=started" in open(errf).read(),
                       timeout=15)
            err = open(errf).read()
            check(p.poll() == 1, f"second{k}: refused, exit 1: {p.poll()}")
            check(re.search(rf"second{k}\.yaml:{line}:8: error: admin: {re.escape(admin)} is "
                            rf"the admin endpoint of another hashlb \(pid {first.proc.pid}\)",
                            err), f"second{k}: says why, at its admin key: {err.strip()[-300:]!r}")
            # whole, the remedy too: it was cut in its middle ("addresse...dress)")
            check("give each its own admin address (or, to move the one there, reload it or "
                  "upgrade it in place)\n" in err and "..." not in err,
                  f"second{k}: the line whole, with what to do: {err.strip()[-300:]!r}")
            for i in range(6):
                rc, so, se = first.ctl("set", "a", "weight", str(2 + i % 2))
                check(rc == 0 and so.startswith("web/a: ") and first.proc.pid == first.status()["pid"],
                      f"second{k}: the first one takes set {i}: {so}{se}")
            check(who(first.addr, client_ip(1)) in ("a", "b", "c"), "and serves")
            # the first logged the sockets handed over as it sent them: the taker's refusal
            # is logged too (before, nothing after "listening sockets handed over")
            check(first.wait_log(rf'msg="listening sockets back: the hashlb they were handed '
                                 rf'over to exited" pid={p.pid} ', 10),
                  f"second{k}: the first says the sockets are its own again: {first.log[-3:]}")
        finally:
            if p.poll() is None:
                p.kill()
            p.wait()
    check(first.stop() == 0, "exit 0")


def unix_admin_comes_back_when_the_new_one_stops():
    """An upgrade side by side on an admin endpoint at a Unix path: the new hashlb takes the
    old one's sockets over and binds the path over the old one's socket. Stopped before the
    old one (a rollback), it took the path with it: the old one served on, its admin endpoint
    reachable by nobody (ctl: No such file or directory), and every set and reload through
    it lost. It listens at the path again once the new one has exited, and takes sets."""
    path = tmppath("rollback.sock")
    text = config(BACKENDS, admin="unix:" + path, listen=f"{LISTEN[0]}:{LISTEN[1]}")
    old = Lb(text, fname="rollback-old.yaml")
    new = Lb(text, fname="rollback-new.yaml")
    check(new.wait_log(r'msg="listening sockets taken over" count=2'), "the new one took the sockets")
    check(old.status()["pid"] == new.proc.pid, "the path is the new one's")
    check(new.stop() == 0, "the new one stops, exit 0")
    check(old.wait_log(r'msg="admin listening again: the hashlb that took it over has exited"'),
          "the old one says it listens again")
    st = old.status()
    check(st["pid"] == old.proc.pid, f"the path answers, from the old one: {st['pid']}")
    rc, so, se = old.ctl("set", "a", "weight", "5")
    check(rc == 0 and old.backend("a")["weight"] == 5, f"it takes sets again: {so}{se}")
    check(who(LISTEN, client_ip(3)) in ("a", "b", "c"), "and serves")
    check(old.stop() == 0, "exit 0")
    check(not os.path.exists(path), "the old one removes the path as it stops")


def status_pid(lb):
    """The pid /status at <lb>'s admin address answers with, or why none answers."""
    try:
        return lb.status()["pid"]
    except (OSError, AssertionError) as e:
        return repr(e)


def unix_admin_path_answers_while_the_new_one_binds():
    """A new hashlb binding the admin endpoint's Unix path the old one serves (side by side
    here, in place alike) binds a socket of its own beside it and renames it over the path:
    the path names a live socket at every moment, the old one's until the new one's is there.
    It used to remove the path, then bind: held there (start_pause.c), the old one, serving
    on, was reached by nobody (No such file or directory), and by nobody for good had the
    bind failed."""
    path = tmppath("bindover.sock")
    text = config(BACKENDS, admin="unix:" + path, listen=f"{LISTEN[0]}:{LISTEN[1]}")
    old = Lb(text, fname="bindover-old.yaml")
    pause = Paused("bind")
    new = Hashlb(text, fname="bindover-new.yaml", wait=False, wrap=pause.wrap,
                 pass_fds=pause.pass_fds)
    try:
        check(pause.reached(), "the new one is about to bind its admin socket")
        check(status_pid(old) == old.proc.pid,
              f"the path answers, from the old one: {status_pid(old)}")
        pause.go()
        check(new.wait_log("msg=started"), "the new one starts")
        check(status_pid(old) == new.proc.pid, f"then from the new one: {status_pid(old)}")
        check(not [f for f in os.listdir(os.path.dirname(path)) if ".hashlb-" in f],
              "no name of its own left beside the path")
    finally:
        new.stop()
    check(old.wait_log(r'msg="admin listening again'), "the old one takes the path back")
    check(status_pid(old) == old.proc.pid, f"and answers there: {status_pid(old)}")
    check(old.stop() == 0, "exit 0")


def unix_admin_path_bound_in_place_when_a_name_beside_it_is_refused():
    """Under an access policy (AppArmor, SELinux) that lets hashlb make its admin socket's
    path and no other name in that directory (bind_refuse.c: a name beginning ".hashlb-" is
    refused EACCES), the socket is bound at the path itself, after removing what was there,
    as before the rename: hashlb starts and answers there, a second one beside it too. Without
    that, the start failed (cannot listen on unix:PATH: Permission denied)."""
    path = tmppath("inplace.sock")
    text = config(BACKENDS, admin="unix:" + path, listen=f"{LISTEN[0]}:{LISTEN[1]}")
    env = shim_env("bind_refuse")
    try:
        old = Lb(text, fname="inplace-old.yaml", env=env)
    except SystemExit as e:  # no admin endpoint: it did not start
        check(False, f"it starts: {e}")
        return
    try:
        check(status_pid(old) == old.proc.pid, f"it answers at the path: {status_pid(old)}")
        new = Hashlb(text, fname="inplace-new.yaml", wait=False, env=env)
        try:
            check(new.wait_log("msg=started"), f"a second one starts: {new.log[-3:]}")
            check(status_pid(old) == new.proc.pid, f"the path is its: {status_pid(old)}")
        finally:
            new.stop()
    finally:
        check(old.stop() == 0, "exit 0")


def unix_admin_comes_back_when_the_upgrade_fails():
    """An upgrade in place whose new process binds the admin endpoint's Unix path, then dies
    before it is ready (killed: here a stand-in installed as the new version, which binds the
    path as hashlb does and kills itself): the old one serves on and listens at the path
    again, as when a side-by-side one exits. It used to log the failed upgrade and serve on
    behind a path that named the dead process's socket (Connection refused): no ctl, no
    status, no metrics until it was restarted."""
    path = tmppath("upfail.sock")
    exe, old = installed("upfail", "unix:" + path)
    with open(exe + ".new", "w") as f:
        f.write(f"#!{sys.executable}\n"
                "import os, signal, socket\n"
                "s = socket.socket(socket.AF_UNIX)\n"
                f"s.bind({path!r} + '.standin')\n"
                "s.listen()\n"
                f"os.rename({path!r} + '.standin', {path!r})\n"
                "os.kill(os.getpid(), signal.SIGKILL)\n")
    os.chmod(exe + ".new", 0o755)
    os.rename(exe + ".new", exe)
    old.proc.send_signal(signal.SIGUSR2)
    check(old.wait_log(r'msg="upgrade failed: .* signal=KILL'), "the failed upgrade is logged")
    check(old.wait_log(r'msg="admin listening again'), "the old one listens at the path again")
    check(status_pid(old) == old.proc.pid, f"the path answers, from the old one: {status_pid(old)}")
    rc, so, se = old.ctl("set", "a", "weight", "5")
    check(rc == 0 and old.backend("a")["weight"] == 5, f"it takes sets: {so}{se}")
    check(who(LISTEN, client_ip(3)) in ("a", "b", "c"), "and serves")
    check(old.stop() == 0, "exit 0")
    check(not os.path.exists(path), "the old one removes the path as it stops")


def upgrade_failed_by_carried_weights_says_why():
    """An upgrade in place carries the weights set at run time over to the new process, as a
    reload keeps them. With a and b set to weight 0 and the config giving c weight 0, the new
    process has no table for the service and exits; the old one serves on. It said only "hashlb
    run: all 3 backends have weight 0", which the config it names contradicts (one backend at
    weight 0): now the config's position, the service and that the weights taken over made
    it, as the reload of that config says it."""
    admin = admin_addr()
    exe, old = installed("wcarry", admin)
    for name in ("a", "b"):
        rc, so, se = old.ctl("set", name, "weight", "0")
        check(rc == 0, f"ctl set {name} weight 0: {se}")
    with open(old.path, "w") as f:
        f.write(config([*BACKENDS[:2], (*BACKENDS[2], "weight: 0")], admin=admin,
                       listen=f"{LISTEN[0]}:{LISTEN[1]}"))
    rc, out, err = old.ctl("upgrade")
    check(rc == 1 and "upgrade failed" in err and f"pid {old.proc.pid} goes on serving" in err,
          f"the new process cannot start: {rc} {out!r} {err!r}")
    check(old.wait_log(re.escape("wcarry.yaml:4:5: error: service 't', with the weights set at "
                                 "run time in the hashlb it takes over from: all 3 backends "
                                 "have weight 0")),
          f"the new process says where and why: {old.log[-5:]}")
    check(who(LISTEN, client_ip(7)) == "c", "the old one serves on, on c")
    check(old.stop() == 0, "exit 0")


def port_zero_service_keeps_its_port():
    """A service listening on port 0 ("any free port": where another program reads the port
    from /status, or a test) keeps the port it got across an upgrade in place, as it does
    across a reload: the new process listens on the very sockets. It used to bind a new port
    and leave the sockets it was handed unused ("sockets taken over and not used"): the
    clients of the port in use were refused from the moment the old one stopped."""
    migrate_req(0)
    exe = tmppath("hashlb-port0")
    install(HASHLB, exe)
    old = Hashlb(plain_config(BACKENDS + [("d", f"127.0.0.1:{backends[0].port}")],
                              name="u") + plain_config(BACKENDS, name="v").split("services:\n", 1)[1],
                 fname="port0.yaml", binary=exe)
    addrs = list(old.addrs)
    check(len(addrs) == 2 and addrs[0] != addrs[1], f"two services on port 0: {addrs}")
    socks = {a: listen_inodes(old.proc.pid, f"src = {a}") for a in addrs}
    new_pid = None
    try:
        old.proc.send_signal(signal.SIGUSR2)
        rc = exit_status(old.proc, 30)
        check(rc == 0, f"the old one handed over and exited 0 ({rc})")
        new_pid = handed_over(old)
        check(new_pid and old.wait_log(r"msg=listening .* service=u .*taken_over=2") and
              old.wait_log(r"msg=listening .* service=v .*taken_over=2"),
              "the new process took each service's two sockets over")
        for a in addrs:
            host, port = a.rsplit(":", 1)
            try:
                got = who((host, int(port)), client_ip(1))
            except OSError as e:
                got = repr(e)
            check(got in ("a", "b", "c"), f"clients of {a} are served after the upgrade: {got!r}")
            check(new_pid and listen_inodes(new_pid, f"src = {a}") == socks[a],
                  f"on the sockets of the old one: {a}")
        check(not old.wait_log("sockets taken over and not used", 0.1), "no socket left unused")
    finally:
        kill(new_pid)


class NotOurChild:
    """What the tests use of a Popen, for a process that is not our child (an upgrade's
    new process): send_signal(), wait() and poll()."""

    def __init__(self, pid):
        self.pid = pid
        self.returncode = None

    def send_signal(self, sig):
        os.kill(self.pid, sig)

    def poll(self):
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                alive = f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            alive = False
        if not alive:
            self.returncode = 0  # not ours to reap: its status is its parent's
        return self.returncode

    def wait(self, timeout=None):
        end = time.time() + (timeout or 1e9)
        while self.poll() is None:
            if time.time() > end:
                raise subprocess.TimeoutExpired("hashlb", timeout)
            time.sleep(0.02)
        return self.returncode


def many_down_backends_handed_over():
    """20,000 backends down: the old hashlb's answer to GET /sockets carries a line for each,
    1.5 MB, and the new one read at most 1 MiB of it: EMSGSIZE, so it took no socket over and
    bound its own (what waited in the old one's queues was reset as it stopped) and knew none
    of the downs. It takes the sockets and the downs over now."""
    from lbtest import dead_port
    port = dead_port()
    admin = admin_addr()
    # checked each second: every 200 ms, 100,000 checks a second kept the old one's control
    # thread from answering the new one's GET /sockets within the 2 s it then allowed, under
    # load (3 runs in 20, each with a stall of this process too: it bound sockets of its own,
    # and took no down over); it waits for 10 s of silence now
    # (takeover_waits_for_a_slow_old_process)
    lines = ["workers: 1", f"admin: {admin}", "services:", "  - name: t",
             f"    listen: {LISTEN[0]}:{LISTEN[1]}", "    health: {interval: 1s, rise: 1, fall: 1}",
             "    backends:", f"      - {{name: a, address: '{BACKENDS[0][1]}'}}"]
    lines += [f"      - {{name: d{i}, address: '127.3.{i >> 8}.{(i & 255) or 1}:{port}'}}"
              for i in range(20000)]
    text = "\n".join(lines) + "\n"
    old = Hashlb(text, fname="many-down.yaml", start_within=60)  # 20,000 backends, ASan
    new = None
    try:
        def downs():
            """Backends out of the table (health found them down): from GET /table, 1.2 MB
            here. (/metrics, polled before, is 64 MB, some seconds of ASan to render and of
            python to read; under load the reading took past the admin endpoint's 10 s, and
            the answer was cut: IncompleteRead in 2 of the first 5 runs.)"""
            with urllib.request.urlopen(f"http://{admin}/table?service=t", timeout=30) as r:
                table = json.loads(r.read())
            return len(table["backends"]) - table["up"]
        end = time.time() + 60
        while time.time() < end and downs() < 20000:
            time.sleep(0.5)
        check(downs() == 20000, "the old one found the 20,000 down")
        new = Hashlb(text, fname="many-down.yaml", start_within=60)  # 20,000 backends, ASan
        check(new.wait_log(r"msg=\"listening sockets taken over\""),
              "the new one took the sockets over: " +
              "; ".join(l for l in new.log if "take over" in l or "EMSGSIZE" in l))
        check(new.wait_log(r"carried over from the old hashlb.*backend=d\d+ .*health=down"),
              "and the downs")
    finally:
        old.stop()
        if new:
            new.stop()


WAITING = r'msg="the old hashlb has not answered yet, waiting"'
GAVE_UP = r'msg="cannot take over listening sockets, binding new ones"'


def takeover_waits_for_a_slow_old_process():
    """The old hashlb answers the new one's GET /sockets late (its control thread busy: 20,000
    backends, a loaded machine; here stopped, SIGSTOP, until the new one has waited 4 s, twice
    what it allowed before): the new one waits, saying so, and takes the sockets and run-time
    settings over once the old one answers. It gave up after 2 s: bound sockets of its own,
    carried no setting over (many_down_backends_handed_over failed so under load)."""
    text = config(BACKENDS, admin=admin_addr(), listen=f"{LISTEN[0]}:{LISTEN[1]}")
    old = Lb(text, fname="slow-old.yaml")
    new = None
    try:
        rc, so, se = old.ctl("set", "a", "weight", "3")
        check(rc == 0, f"ctl set a weight 3: {se}")
        old_socks = listen_inodes(old.proc.pid)
        with frozen(old.proc):
            new = Hashlb(text, fname="slow-new.yaml", wait=False)
            # the second wait line (4 s silent), or the old give-up (2 s), whichever comes
            check(wait_until(lambda: sum(bool(re.search(WAITING, l)) for l in new.log) >= 2 or
                             any(re.search(GAVE_UP, l) for l in new.log), 60),
                  "the new one waited, or gave up")
            check(not any(re.search(GAVE_UP, l) for l in new.log),
                  "the new one did not give up on the old one after 2 s: " +
                  "; ".join(l for l in new.log if "take over" in l))
            print("    " + ([l for l in new.log if re.search(WAITING, l)] or ["no wait"])[-1])
        check(new.wait_log(r'msg="listening sockets taken over" count=2', 30),
              "once continued, the old one answered: the new one took its sockets over: " +
              "; ".join(l for l in new.log if "take over" in l or "answer" in l))
        check(new.wait_log(r"carried over from the old hashlb.*backend=a .*weight=3"),
              "and the weight set at run time")
        check(new.wait_log("msg=started", 30) and listen_inodes(new.proc.pid) == old_socks,
              f"it listens on the old one's sockets: {old_socks} {listen_inodes(new.proc.pid)}")
        check(old.stop() == 0, "the old one drains and exits 0")
        check(who(LISTEN, client_ip(3)) in ("a", "b", "c"), "the new one serves")
        check(new.stop() == 0, "exit 0")
    finally:
        old.stop()
        if new:
            new.stop()


def takeover_gives_up_on_a_hung_old_process():
    """An old hashlb that never answers (stopped for good, stuck): the new one does not wait
    for it forever. After 10 s without a byte of an answer it says it gives up, binds sockets
    of its own beside the old one's (SO_REUSEPORT) and serves."""
    text = config(BACKENDS, admin=admin_addr(), listen=f"{LISTEN[0]}:{LISTEN[1]}")
    old = Lb(text, fname="hung-old.yaml")
    new, clients = None, []
    try:
        old_socks = listen_inodes(old.proc.pid)
        with frozen(old.proc):
            new = Hashlb(text, fname="hung-new.yaml", wait=False)
            check(new.wait_log("msg=started", 120), "the new one started: " +
                  "; ".join(new.log[-5:]))
            check(new.wait_log(GAVE_UP + r" from=\S+ err=ETIMEDOUT note="),
                  "saying it gave up on the old one, and what that costs")
            # one line every 2 s of silence at most (4 at 2, 4, 6, 8 s if it ran meanwhile; a
            # loaded machine that holds it up past a step makes fewer): that it said so
            waits = [l for l in new.log if re.search(WAITING, l)]
            check(len(waits) >= 1, f"having said it waited: {len(waits)} lines")
            print("    " + (waits or ["no wait"])[-1])
            new_socks = listen_inodes(new.proc.pid)
            check(len(new_socks) == 2 and not new_socks & old_socks,
                  f"on sockets of its own: {old_socks} {new_socks}")
            # both groups share the address: a client hashed to the old one's sockets waits
            # there, so of 20 clients (each half and half) one at least reaches the new one
            for i in range(20):
                clients.append(connect(LISTEN, client_ip(100 + i), timeout=60))
            ready, _, _ = select.select(clients, [], [], 60)
            check(ready and read_line(ready[0]) in ("a", "b", "c"),
                  f"the new one serves ({len(ready)} of 20 answered with the old one stopped)")
    finally:
        for c in clients:
            c.close()
        old.stop()
        if new:
            new.stop()


def old_process_given_up_on_hands_nothing_over():
    """The new hashlb gave up on an old one stopped past 10 s, on the Unix admin socket
    (takeover_gives_up_on_a_hung_old_process), and the old one continues: it reads the new
    one's request, left in its queue, and answered it as a handover to that process (its
    credentials name it, and it runs on), though nobody read the answer: it would then
    refuse ctl set as having handed its settings over to a process that took nothing, and
    close its admin endpoint at once as it stops. It hands nothing over to a taker that has
    gone away, and says so."""
    text = config(BACKENDS, admin="unix:" + tmppath("given-up.sock"),
                  listen=f"{LISTEN[0]}:{LISTEN[1]}")
    old = Lb(text, fname="given-up-old.yaml")
    new = None
    try:
        with frozen(old.proc):
            new = Hashlb(text, fname="given-up-new.yaml", wait=False)
            check(new.wait_log("msg=started", 120) and new.wait_log(GAVE_UP + ".*ETIMEDOUT"),
                  "the new one gave up on the old one and started")
        # its durations in ms, in keys that say so, as every log line's are (docs/operations.md,
        # "Logging"): it said silent_for=2.0s gives_up_after=10s
        check([l for l in new.log if re.search(r'msg="the old hashlb has not answered yet, '
                                               r'waiting" silent_for_ms=\d+ '
                                               r'gives_up_after_ms=10000 got=\d+$', l)],
              f"the new one says how long it has waited, in ms: {new.log[:6]}")
        check(old.wait_log(r'msg="listening sockets not handed over"', 30),
              "the old one, continued, answered the request left in its queue")
        line = [l for l in old.log if "listening sockets not handed over" in l][-1]
        print("    " + line)
        # (it said msg="listening sockets handed over" with a note that they were not)
        check(f"taker=0 gone={new.proc.pid} " in line and
              not [l for l in old.log if 'msg="listening sockets handed over"' in l],
              "handing nothing over to the process that gave up, saying so")
        check(old.stop() == 0, "the old one exits 0")
        check(who(LISTEN, client_ip(5)) in ("a", "b", "c"), "the new one serves")
    finally:
        old.stop()
        if new:
            new.stop()


def fake_old_process(path, answer):
    """A Unix admin socket at <path> that is not hashlb: <answer>(connection) on a thread for
    the one connection it accepts (the new hashlb's GET /sockets). Its socket, to close."""
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(4)

    def serve():
        try:
            c, _ = srv.accept()
        except OSError:
            return
        with c:
            c.recv(4096)
            answer(c)
    threading.Thread(target=serve, daemon=True).start()
    return srv


def takeover_refuses_an_answer_cut_short():
    """The old hashlb's answer to GET /sockets that is not whole (it stopped, or was killed,
    as it answered) is not taken as the list of its sockets: the new one says what is wrong
    with it and binds sockets of its own, as when the old one does not answer. It read the
    answer to its end whatever its length said: a Content-Length of 400 with one line there,
    or two sockets listed and one handed over, and it listened on the sockets that had come,
    taking the part of the run-time settings that had come as the whole of them."""
    old_sock = socket.socket()
    old_sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    old_sock.bind(LISTEN)
    old_sock.listen(16)
    addr = f"{LISTEN[0]}:{LISTEN[1]}"
    line = f"{os.getpid()} {old_sock.fileno()} {addr} t\n".encode()

    def cut(c):  # the head, the socket's line with its socket, then nothing
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
                  b"Content-Length: 400\r\nConnection: close\r\n\r\n")
        socket.send_fds(c, [line], [old_sock.fileno()])

    def fewer_fds(c):  # whole by its length, but one socket of the two it lists
        body = line + line.replace(b" t\n", b" u\n")
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n" +
                  f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
        socket.send_fds(c, [body], [old_sock.fileno()])

    try:
        for k, (answer, why) in enumerate(((cut, f"closed its answer after {len(line)} of its 400 bytes"),
                                           (fewer_fds, "lists 2 sockets, and 1 came with it"))):
            path = tmppath(f"cut-{k}.sock")
            srv = fake_old_process(path, answer)
            new = None
            try:
                new = Hashlb(config(BACKENDS, admin="unix:" + path, listen=addr),
                             fname=f"cut-{k}.yaml", wait=False)
                check(new.wait_log("msg=started", 60), "the new one started: " +
                      "; ".join(new.log[-5:]))
                gave_up = [l for l in new.log if re.search(GAVE_UP, l)]
                check(gave_up and "err=EPROTO" in gave_up[0] and why in gave_up[0],
                      f"{answer.__name__}: the new one says the answer was not whole: " +
                      "; ".join(l for l in new.log if "take" in l))
                print("    " + gave_up[0])
                own = listen_inodes(new.proc.pid)
                check(len(own) == 2 and str(os.fstat(old_sock.fileno()).st_ino) not in own,
                      f"on sockets of its own, one per worker: {own}")
                check(new.stop() == 0, "exit 0")
            finally:
                srv.close()
                if new:
                    new.stop()
    finally:
        old_sock.close()


def upgrade_in_place_answer_gives_its_length():
    """The upgrade in place hands the sockets over on its socket pair as GET /sockets answers,
    with the answer's length, so that the new process can tell an answer cut short (the old
    one killed as it writes it) from a whole one, whichever descriptors came. It gave none:
    an answer cut after a batch of descriptors and their lines looked whole."""
    exe, old = installed("length", "127.0.0.1:0")
    got = tmppath("length-answer")
    try:
        with open(exe + ".new", "w") as f:  # a "new hashlb" that keeps what it is handed
            f.write(f"#!/bin/sh\ncat <&3 > {got}\n")
        os.chmod(exe + ".new", 0o755)
        os.rename(exe + ".new", exe)
        old.proc.send_signal(signal.SIGUSR2)
        old.wait(lambda: (old.status().get("upgrade") or {}).get("state") == "failed")
        with open(got, "rb") as f:
            answer = f.read()
        head, _, body = answer.partition(b"\r\n\r\n")
        m = re.search(rb"\r\nContent-Length: (\d+)$", head)
        check(head.startswith(b"HTTP/1.1 200 OK\r\n") and m and int(m[1]) == len(body) and
              body.endswith(b"resync\n") and len(body.splitlines()) >= 3,
              f"the answer gives its length, that of its body: {answer!r}")
        check(old.stop() == 0, "the old one, still serving, exits 0")
    finally:
        old.stop()


def upgrade_tcp_admin():
    """The new hashlb copies the old one's sockets (pidfd_getfd). No help from the kernel."""
    migrate_req(0)
    upgrade(admin_addr())


def upgrade_unix_admin():
    """The new hashlb takes over the socket's path, and the listening sockets with it; the
    old one, exiting, leaves the path alone. No help from the kernel needed."""
    migrate_req(0)
    upgrade("unix:" + tmppath("admin.sock"))


def upgrade_without_admin():
    """Nothing to take the sockets over from: the kernel hands the old sockets' queued
    connections to the new ones."""
    migrate_req(1)
    upgrade(None)


def sockets_over_tcp_give_nothing_away():
    """Over TCP /sockets only names the descriptors: a process of another user may not copy
    them (pidfd_getfd needs the right to ptrace hashlb), while root may."""
    lb = Lb(config(BACKENDS, admin="127.0.0.1:0"))
    status, body = lb.http("GET", "/sockets")
    # the sockets' lines, not those of the backends' health after them ("seen", "set")
    lines = [l.split() for l in body.splitlines() if l[:1].isdigit()]
    check(status == 200 and len(lines) == 2 and all(int(l[0]) == lb.proc.pid for l in lines),
          f"two sockets, named PID FD ADDR: {status} {body!r}")
    fd = lines[0][1] if lines else "0"
    probe = ("import ctypes, os, sys\n"
             "libc = ctypes.CDLL(None, use_errno=True)\n"
             "if sys.argv[3] == 'nobody':\n"
             "    os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
             "p = os.pidfd_open(int(sys.argv[1]))\n"
             "r = libc.syscall(438, p, int(sys.argv[2]), 0)  # pidfd_getfd\n"
             "print('ok' if r >= 0 else os.strerror(ctypes.get_errno()))\n")
    got = {who: subprocess.run([sys.executable, "-c", probe, str(lb.proc.pid), fd, who],
                               capture_output=True, text=True, timeout=10).stdout.strip()
           for who in ("nobody", "root")}
    check(got["nobody"] == "Operation not permitted" and got["root"] == "ok",
          f"nobody is refused, root is not: {got}")
    check(lb.stop() == 0, "exit 0")


def queued_connections_outlive_the_old():
    """Connections the kernel completed while nobody accepted are served by the new hashlb
    even when the old one dies with them in its queues: the sockets are the same. Both
    processes are stopped while 40 clients connect; the old one is killed, the new one
    continued. Without the takeover (tcp_migrate_req=0) the old sockets' share is reset."""
    migrate_req(0)
    text = config(BACKENDS, admin="unix:" + tmppath("admin2.sock"),
                  listen=f"{LISTEN[0]}:{LISTEN[1]}")
    old = Lb(text, fname="old.yaml")
    new = Lb(text, fname="new.yaml")
    check(new.wait_log(r"msg=listening .*taken_over=2"), "the new hashlb took the sockets")
    clients = []
    try:
        check(suspend(new.proc) and suspend(old.proc), "both processes stopped")
        for i in range(40):
            clients.append(connect(LISTEN, client_ip(i)))
        old.proc.kill()
        old.proc.wait(10)
    finally:
        new.proc.send_signal(signal.SIGCONT)
    served = 0
    for s in clients:
        try:
            served += read_line(s) in ("a", "b", "c")
        except OSError:
            pass
        s.close()
    check(served == 40, f"every queued client is served by the new hashlb: {served} of 40")
    check(new.stop() == 0, "exit 0")


def upgrade_keeps_a_rotated_name_in_place():
    """A backend written with a host name of two addresses, the answer rotated since the old
    process resolved it (DNS servers rotate a record set's order): the new process of an
    upgrade in place connects where the old one does while its own answer still has that
    address, as a reload does. It took the answer's first address: an upgrade moved the
    backend's clients to another server. (Names of the test's own: a mount namespace of its
    own, as test_resolve.py's, which the new process inherits.)"""
    if not shutil.which("unshare") or os.geteuid() != 0:
        raise Skip("needs root and unshare(1) for a mount namespace of its own")
    a, a2 = backends_on_one_port([("a", "127.0.0.5"), ("a2", "127.0.0.6")])
    names = Names("uprot", "127.0.0.5 alpha\n127.0.0.6 alpha\n")
    old = Lb(config([("a", f"alpha:{a.port}")], health="enabled: false", admin=admin_addr(),
                    listen=f"127.0.0.1:{free_port()}"), wrap=names.wrap())
    new_pid = None

    def resolved():
        return old.service()["backends"][0]["resolved"]

    try:
        check(resolved() == f"127.0.0.5:{a.port}", f"the answer's first: {resolved()}")
        names.set_hosts("127.0.0.6 alpha\n127.0.0.5 alpha\n")
        rc, out, err = old.ctl("upgrade")
        m = re.search(r"handed over to pid (\d+)", out)
        new_pid = int(m.group(1)) if m else None
        check(rc == 0 and new_pid, f"upgraded ({rc}, {out!r}, {err!r})")
        check(exit_status(old.proc, 30) == 0, "the old one drained and exited 0")
        st = old.status()
        check(st["pid"] == new_pid and resolved() == f"127.0.0.5:{a.port}",
              f"the new process connects where the old one did: {st['pid']} {resolved()}")
        check(who(old.addr, client_ip(1)) == "a", "its clients still reach the same server")
        names.set_hosts("127.0.0.6 alpha\n")
        rc, out, err = old.ctl("reload")
        check(rc == 0 and resolved() == f"127.0.0.6:{a.port}",
              f"an answer without it moves it, as before: {resolved()} {err.strip()}")
    finally:
        kill(new_pid)
        a.stop()
        a2.stop()


def queued_capped(name, n, exe=None, workers=2, extra="", header=None, env=None):
    """(exe, Lb, held, queued): hashlb installed at a path of its own (or <exe>), one backend
    at max_connections: 1 with a long queue, one client served (held open: the old
    process's slot stays taken), <n> more waiting in its queue."""
    b = BACKENDS[0]
    if exe is None:
        exe = tmppath(f"hashlb-{name}")
        install(HASHLB, exe)
    lb = Lb(config([(b[0], b[1], "max_connections: 1")], health="enabled: false",
                   admin=admin_addr(), listen=f"{LISTEN[0]}:{LISTEN[1]}",
                   extra="timeouts: {queue: 60s}\n" + extra, workers=workers),
            fname=f"{name}.yaml", binary=exe, env=env)
    held = connect(LISTEN, client_ip(200))
    if header:
        held.sendall(header(200))
    check(read_line(held) == b[0], "one client served, the backend's one slot taken")
    if header:
        read_line(held)  # our own header, echoed
    queued = [connect(LISTEN, client_ip(i), timeout=30) for i in range(n)]
    for i, s in enumerate(queued):
        if header:
            s.sendall(header(i))
    check(wait_until(lambda: lb.service()["connections"]["queued"] == n, 10),
          f"{n} clients wait in its queue: {lb.service()['connections']['queued']}")
    return exe, lb, held, queued


def served(queued, one_by_one=False, early=False, ids=None):
    """How many of <queued> got their greeting and an echo of a line: bytes through. With
    <one_by_one>, each is closed once served (the backend has room for one at a time) and
    they are read all at once: which worker's client takes a slot that frees is the
    workers' race, not the order they came in. <ids>: the numbers their lines carry (their
    places in <queued> if None)."""
    ok = []

    def one(i, s):
        try:
            s.sendall(b"q%d\n" % i)
            if read_line(s) == BACKENDS[0][0] and (not early or read_line(s) == f"early{i}") \
                    and read_line(s) == f"q{i}":
                ok.append(i)
        except OSError as e:
            print(f"  queued client {i}: {e!r}")
        if one_by_one:
            s.close()
    threads = [threading.Thread(target=one, args=(ids[k] if ids else k, s))
               for k, s in enumerate(queued)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(ok)


def drop_service_t(lb):
    """<lb>'s config on disk without service t (renamed t2): a new process started on it
    refuses the clients of t lent to it."""
    with open(lb.path) as f:
        text = f.read()
    with open(lb.path, "w") as f:
        f.write(text.replace("- name: t\n", "- name: t2\n"))


def queued_clients_survive_an_upgrade():
    for workers, n in ((2, 12), (4, 1)):
        queued_survive(workers, n)


def queued_survive(workers, n):
    """Clients waiting in a service's queue (its backend at max_connections) when an upgrade
    in place hands over are the new process's: the cap lifted there with hashlb ctl set
    serves them, bytes through, none reset, while the old process's one slot stays taken
    (so only the new one could have served them). They stayed in the old process, which
    the set does not reach, and were reset at timeouts.queue (39 of 39 in a chaos run)."""
    exe, lb, held, queued = queued_capped(f"queued-up-{workers}", n, workers=workers)
    new_pid = None
    try:
        for i, s in enumerate(queued):  # what they send while they wait goes with them
            s.sendall(b"early%d\n" % i)
        rc, out, err = lb.ctl("upgrade")
        m = re.search(r"handed over to pid (\d+)", out)
        new_pid = int(m.group(1)) if m else None
        check(rc == 0 and new_pid, f"upgraded ({rc}, {out!r}, {err!r})")
        rc, out, err = lb.ctl("set", "-s", "t", BACKENDS[0][0], "max_connections", "0")
        check(rc == 0 and lb.status()["pid"] == new_pid, f"cap lifted on the new one: {err!r}")
        held.sendall(b"still\n")
        check(read_line(held) == "still", "the old process's own client goes on, its slot taken")
        check(served(queued, early=True) == n,
              "every queued client is served by the new process, its early bytes first")
        check(lb.wait_log(r'msg="clients waiting in the queues handed over" '
                          rf'count={n} kept=0 not_lent=0$') and
              lb.wait_log(r'msg="clients waiting in the old hashlb.s queues taken over" '
                          rf'count={n} left_there=0$'), "both say so")
    finally:
        for s in queued + [held]:
            s.close()
        kill(new_pid)


def proxy_v1(i):
    return b"PROXY TCP4 10.9.0.%d 127.0.0.1 %d 80\r\n" % (i, 1000 + i)


def queued_proxy_clients_keep_their_header():
    """accept_proxy: a queued client's PROXY header was read by the old process; what it
    named goes over with the client, so the new one hashes it and names it to the backend
    (proxy_protocol: v1, which the echo backend sends back) as the old one would have."""
    exe, lb, held, queued = queued_capped("queued-proxy", 4, extra="accept_proxy: true\n"
                                          "proxy_protocol: v1", header=proxy_v1)
    new_pid = None
    try:
        rc, out, err = lb.ctl("upgrade")
        m = re.search(r"handed over to pid (\d+)", out)
        new_pid = int(m.group(1)) if m else None
        check(rc == 0 and new_pid, f"upgraded ({rc}, {out!r}, {err!r})")
        rc, out, err = lb.ctl("set", "-s", "t", BACKENDS[0][0], "max_connections", "0")
        check(rc == 0, f"cap lifted on the new one: {err!r}")
        got = []
        for i, s in enumerate(queued):
            try:
                got.append((read_line(s), read_line(s)))
            except OSError as e:
                got.append(repr(e))
        want = [(BACKENDS[0][0], f"PROXY TCP4 10.9.0.{i} 127.0.0.1 {1000 + i} 80")
                for i in range(4)]
        check(got == want, f"each reaches the backend named as its header named it: {got}")
        check(lb.wait_log(r'msg="clients waiting in the queues handed over" '
                          r'count=4 kept=0 not_lent=0$'),
              "handed over")
    finally:
        for s in queued + [held]:
            s.close()
        kill(new_pid)


def queued_clients_stay_when_the_new_process_refuses():
    """Queued clients the new process of an upgrade in place does not take stay the old
    one's, in their queue: here its config (changed on disk since) no longer has their
    service. The old one serves them when its slot frees, bytes through, none reset. (A new
    process that dies before it answers leaves them there the same way.) 400 of them: the
    new one's answer, refused lines written a 4 KiB part at a time, takes several parts."""
    exe, lb, held, queued = queued_capped("queued-refused", 400)
    new_pid = None
    try:
        drop_service_t(lb)
        rc, out, err = lb.ctl("upgrade")
        m = re.search(r"handed over to pid (\d+)", out)
        new_pid = int(m.group(1)) if m else None
        check(rc == 0 and new_pid, f"upgraded ({rc}, {out!r}, {err!r})")
        check(lb.wait_log(r'msg="clients waiting in the queues handed over" '
                          r'count=0 kept=400 not_lent=0$'),
              "the old one says it keeps them")
        held.close()  # the old process's slot frees: it serves its queue, one at a time
        check(served(queued, one_by_one=True) == 400, "the old process serves every one it kept")
    finally:
        for s in queued:
            s.close()
        kill(new_pid)


def upgraded_to(lb):
    """hashlb ctl upgrade of <lb>: the new process's pid (the test fails without one)."""
    rc, out, err = lb.ctl("upgrade")
    m = re.search(r"handed over to pid (\d+)", out)
    check(rc == 0 and m, f"upgraded ({rc}, {out!r}, {err!r})")
    return int(m.group(1))


def queued_clients_stay_the_new_ones_when_it_is_slow():
    """The new process answers for the queued clients lent to it only after the old one's
    bound for the answer (5 s; answer_pause.c holds it 7 s), while it lives and serves them
    already. They are its: the old one closes its copies, unreset, and serves none of them
    when its slot frees. It took them back on its timer, so that two processes served one
    client socket: its bytes split between two backends' connections."""
    env = shim_env("answer_pause", HLB_TEST_ANSWER_PAUSE_MS="7000")
    exe, lb, held, queued = queued_capped("queued-slow", 4, env=env)
    new_pid = None
    try:
        new_pid = upgraded_to(lb)
        check(lb.wait_log(r'msg="the new hashlb did not answer for the clients lent to it" '
                          r'after_ms=5000 count=4 new_exited=false$', 30) and
              lb.wait_log(r'msg="clients waiting in the queues handed over" '
                          r'count=4 kept=0 not_lent=0$'),
              "the old one gives up waiting, and leaves them to the new one")
        held.close()  # the old process's slot frees: nothing of its queue is served there
        rc, out, err = lb.ctl("set", "-s", "t", BACKENDS[0][0], "max_connections", "0")
        check(rc == 0 and lb.status()["pid"] == new_pid, f"cap lifted on the new one: {err!r}")
        check(served(queued) == 4, "the new process serves each, every byte through it")
    finally:
        for s in queued:
            s.close()
        kill(new_pid)


def queued_clients_the_new_process_used_are_reset():
    """A new process that took the queued clients lent to it and exits before it answers gives
    them back; but one it served meanwhile (here the one its backend's slot let through: it
    read the client's early bytes and sent it the backend's greeting) cannot be served again
    without bytes lost or doubled: the old one resets it. The others, untouched (waiting in
    the new one's queue), are served by the old one, their early bytes first. Before, the old
    one served all of them again: the one used got a second greeting, its early line lost.
    answer_pause.c kills the new process in place of its answer, once the test has seen it
    serve that client."""
    flag = tmppath("queued-exit-now")
    up = None
    env = shim_env("answer_pause", HLB_TEST_ANSWER_EXIT_ON=flag)
    exe, lb, held, queued = queued_capped("queued-exit", 3, env=env)
    new_pid = None
    try:
        for i, s in enumerate(queued):
            s.sendall(b"early%d\n" % i)
        # the upgrade's answer waits for the new process, held until it is killed
        up = threading.Thread(target=lb.ctl, args=("upgrade",))
        up.start()
        new_pid = handed_over(lb)
        check(new_pid, "handed over")
        ready, _, _ = select.select(queued, [], [], 20)
        check(len(ready) == 1, f"the new process serves one of them, its backend's one slot: "
              f"{len(ready)}")
        used = queued.index(ready[0])
        check(read_line(ready[0]) == BACKENDS[0][0] and read_line(ready[0]) == f"early{used}",
              "its greeting and early bytes went through the new process")
        open(flag, "w").close()  # the new process dies, not having answered
        check(exit_status(NotOurChild(new_pid), 30) is not None, "the new process is gone")
        up.join()
        check(lb.wait_log(r'msg="clients lent to the new hashlb reset: it read or wrote them, '
                          r'then exited" count=1$', 30), "the old one says it resets the one used")
        try:
            ready[0].settimeout(30)
            got = ready[0].recv(100)
            check(False, f"the client the new process used is reset, not served again: {got!r}")
        except ConnectionResetError:
            pass
        held.close()  # the old process's slot frees: it serves the others, one at a time
        rest = [i for i in range(3) if i != used]
        check(served([queued[i] for i in rest], one_by_one=True, early=True, ids=rest) == 2,
              "the old process serves the two the new one did not use, their early bytes first")
    finally:
        for s in queued:
            s.close()
        open(flag, "w").close()
        kill(new_pid)
        if up:
            up.join()
        os.unlink(flag)


def queued_clients_of_an_answer_cut_short_are_served_once():
    """The new process's answer for the queued clients lent to it cannot go whole: cut part
    way through a line ("refused 1" of "refused 10", answer_pause.c failing the rest as a
    kernel short of memory does). It gives the channel up at once: a later line of its own
    glued onto the cut one ("refused 1successor PID") would give the old one client 1, which
    the new one may serve. Here it refuses all twelve (its config has no longer their
    service): the old one takes back the ten whose refusals reached it whole, at once (not at
    its 5 s timer: nothing more can come), and serves them when its slot frees; the last two,
    refused there and not said so here, are the new one's and closed on both sides: a client
    is served by one process at most, the old one serving none on a guess."""
    env = shim_env("answer_pause", HLB_TEST_ANSWER_CUT="refused 10")
    # one worker: the lines go in the order the clients came (two would interleave queues)
    exe, lb, held, queued = queued_capped("queued-cut", 12, env=env, workers=1)
    new_pid = None
    try:
        drop_service_t(lb)
        new_pid = upgraded_to(lb)
        check(lb.wait_log(r'msg="cannot answer the old hashlb for the clients it lent: its '
                          r'socket is given up" err=ENOMEM count=12 taken=0 limit_ms=10000$'),
              "the new one says it gives the channel up")
        check(lb.wait_log(r'msg="clients waiting in the queues handed over" '
                          r'count=2 kept=10 not_lent=0$'),
              "the old one takes back the ten refused whole, leaves the rest to the new one")
        said = [l for l in lb.log if "did not answer for the clients lent" in l]
        check(not said, f"it knew at once, the channel closed, not at its timer: {said}")
        held.close()  # the old process's slot frees: it serves the ten, one at a time
        check(served(queued[:10], one_by_one=True) == 10,
              "the old process serves the ten it took back, every byte through it")
        ends = []
        for s in queued[10:]:
            try:
                s.settimeout(30)
                ends.append(s.recv(100))
            except OSError as e:
                ends.append(repr(e))
        check(ends == [b"", b""], f"the two refused unsaid are closed, served by neither: {ends}")
    finally:
        for s in queued + [held]:
            s.close()
        kill(new_pid)


def queued_clients_sending_while_lent_are_not_reset():
    """Queued clients that go on sending while they are lent to the new process, which
    refuses them (its config has no longer their service) and never reads them, come back
    untouched: the old process serves each, every byte through, none reset. Whether the new
    one read a client is told by its socket's counts as it went and as it came back (bytes
    received less those unread); bytes arriving between the two reads of one count
    (inq_pause.c widens that gap, as a loaded machine does) made it look read, and the old
    one reset clients no one had touched."""
    env = shim_env("inq_pause", HLB_TEST_INQ_PAUSE_MS="50")
    exe, lb, held, queued = queued_capped("queued-stream", 3, env=env)
    new_pid = None
    stop_sending = threading.Event()
    sent = [0] * len(queued)

    def send(i, s):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        end = time.time() + 30
        while not stop_sending.is_set() and sent[i] < 10000 and time.time() < end:
            s.sendall(b"x")
            sent[i] += 1
            time.sleep(0.002)

    senders = [threading.Thread(target=send, args=(i, s)) for i, s in enumerate(queued)]
    try:
        drop_service_t(lb)
        for t in senders:
            t.start()
        check(wait_until(lambda: min(sent) >= 20, 10), f"the clients send: {sent}")
        new_pid = upgraded_to(lb)
        check(lb.wait_log(r'msg="clients waiting in the queues handed over" '
                          r'count=0 kept=3 not_lent=0$'),
              "the old one says it keeps them")
        stop_sending.set()
        for t in senders:
            t.join()
        held.close()  # the old process's slot frees: it serves its queue, one at a time
        ok = []

        def one(i, s):
            try:
                s.settimeout(30)
                s.sendall(b"\n")
                if read_line(s) == BACKENDS[0][0] and read_line(s) == "x" * sent[i]:
                    ok.append(i)
            except OSError as e:
                print(f"  queued client {i}: {e!r}")
            s.close()
        threads = [threading.Thread(target=one, args=(i, s)) for i, s in enumerate(queued)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(len(ok) == 3, f"the old process serves each, every byte it sent: {sorted(ok)}")
        resets = [l for l in lb.log if "clients lent to the new hashlb reset" in l]
        check(not resets, f"none of them is said used by the new process: {resets}")
    finally:
        stop_sending.set()
        for t in senders:
            if t.is_alive():
                t.join()
        for s in queued:
            s.close()
        kill(new_pid)


def admin_request_not_whole_at_a_handover_is_answered():
    """An admin connection the old process accepted, its request not whole yet (or not read)
    when an upgrade in place hands the admin address over, is answered 503 saying so, a FIN
    behind it, and a HEAD without the body. Before, the old process closed it with no answer
    (the client read nothing, or a reset when its request's end came after the close): the
    only bare close of the endpoint, at each upgrade, to a `hashlb ctl` or a scrape under
    way (seen 7 in 28,000 POST /close under upgrades every 0.5 s)."""
    lb = Lb(config(BACKENDS, admin=admin_addr(), listen=f"{LISTEN[0]}:{LISTEN[1]}"),
            fname="handed.yaml")
    new = None
    try:
        host, port = lb.admin.rsplit(":", 1)
        half = socket.create_connection((host, int(port)), timeout=10)
        half.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\n")  # its head not whole yet
        head = socket.create_connection((host, int(port)), timeout=10)
        head.sendall(b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n")
        check(wait_until(lambda: lb.status()["pid"] == lb.proc.pid), "the old one answers")
        os.kill(lb.proc.pid, signal.SIGUSR2)
        new = handed_over(lb)
        check(new, "handed over")
        check(exit_status(lb.proc, 30) == 0, "the old process, idle, exited 0")
        got = read_to_eof(half)
        check(got.startswith(b"HTTP/1.1 503 ") and b"handed its admin address over" in got,
              f"the request under way is answered 503 saying why: {got[:120]!r}")
        hd = read_to_eof(head)
        check(hd.startswith(b"HTTP/1.1 503 ") and hd.endswith(b"\r\n\r\n"),
              f"a HEAD's has no body: {hd[-60:]!r}")
        half.close()
        head.close()
    finally:
        kill(*([new] if new else []))


run_tests([upgrade_in_place, upgrade_reads_the_config_reloads_read, half_close_while_the_old_drains, ctl_upgrade, ctl_upgrade_admin_moves, stuck_new_process_is_killed,
           missing_executable_is_reported, upgrade_keeps_run_time_settings, upgrade_keeps_slow_start_going, set_during_an_upgrade_is_not_lost,
           health_found_while_the_new_process_starts,
           upgrade_keeps_a_backend_seen_up,
           reload_during_an_upgrade_reaches_the_new_process,
           reload_moving_the_address_during_an_upgrade_resets_no_one,
           fewer_workers_after_an_upgrade_reset_no_one,
           reload_re_adding_a_service_during_an_upgrade,
           reload_sent_to_the_old_process_after_an_upgrade,
           reload_sent_to_the_first_process_after_two_upgrades, idle_upgrades_log_no_failure,
           close_reaches_the_old_process,
           close_does_not_stall_the_new_process, close_held_at_a_handover_says_what_it_did,
           close_reaches_two_processes_back,
           old_process_logs_its_totals, old_process_totals_count_its_bytes,
           upgrade_carries_the_totals,
           removed_service_drains_on_in_the_old_process,
           set_after_a_side_by_side_takeover_is_not_lost, another_instance_keeps_its_admin_address,
           unix_admin_comes_back_when_the_new_one_stops,
           unix_admin_path_answers_while_the_new_one_binds,
           unix_admin_comes_back_when_the_upgrade_fails,
           upgrade_failed_by_carried_weights_says_why,
           unix_admin_path_bound_in_place_when_a_name_beside_it_is_refused,
           port_zero_service_keeps_its_port, many_down_backends_handed_over,
           takeover_waits_for_a_slow_old_process, takeover_gives_up_on_a_hung_old_process,
           old_process_given_up_on_hands_nothing_over, takeover_refuses_an_answer_cut_short,
           upgrade_in_place_answer_gives_its_length,
           upgrade_tcp_admin, upgrade_unix_admin, upgrade_without_admin,
           queued_connections_outlive_the_old, sockets_over_tcp_give_nothing_away,
           upgrade_keeps_a_rotated_name_in_place, queued_clients_survive_an_upgrade,
           queued_proxy_clients_keep_their_header,
           queued_clients_stay_when_the_new_process_refuses,
           queued_clients_stay_the_new_ones_when_it_is_slow,
           queued_clients_the_new_process_used_are_reset,
           queued_clients_sending_while_lent_are_not_reset,
           queued_clients_of_an_answer_cut_short_are_served_once,
           admin_request_not_whole_at_a_handover_is_answered])
