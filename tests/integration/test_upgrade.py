#!/usr/bin/env python3
"""Upgrading hashlb without losing a connection: a new hashlb starts on the same config beside
the running one (its listeners and its admin endpoint share the addresses), then the old one
gets SIGTERM and drains. Under a steady stream of new connections none fails, each client keeps
its backend throughout (both processes hash alike), and the admin endpoint, TCP or a Unix
socket, belongs to the new process afterwards. Runs in a network namespace of its own, where
the fixed ports collide with nothing and net.ipv4.tcp_migrate_req=1 (what hands the old
listeners' unaccepted connections to the new ones) is set for this test alone."""
import os
import subprocess
import sys

if os.environ.get("HASHLB_TEST_NETNS") != "upgrade":
    env = dict(os.environ, HASHLB_TEST_NETNS="upgrade")
    sys.exit(subprocess.run(["unshare", "--net", sys.executable, os.path.abspath(__file__)],
                            env=env).returncode)

import signal  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from ctltest import Lb, config  # noqa: E402
from lbtest import Backend, check, client_ip, run_tests, tmpfile, who  # noqa: E402

subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
with open("/proc/sys/net/ipv4/tcp_migrate_req", "w") as f:
    f.write("1\n")

LISTEN = ("127.0.0.1", 29400)
backends = [Backend(n) for n in ("a", "b", "c")]
BACKENDS = [(b.name, b.addr) for b in backends]


class Traffic:
    """Four threads opening connections from 200 client addresses, one after another, until
    stopped (or 60 s); .got[client] = the set of backends it reached, .failed = failures."""

    def __init__(self):
        self.got, self.failed, self.n = {}, [], 0
        self.stop_at = time.time() + 60
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

    def stop(self):
        self.stop_at = 0
        for t in self.threads:
            t.join()


def upgrade(admin):
    """One upgrade under traffic with the admin endpoint at <admin>."""
    text = config(BACKENDS, admin=admin, listen=f"{LISTEN[0]}:{LISTEN[1]}")
    old = Lb(text, fname="old.yaml")
    traffic = Traffic()
    time.sleep(0.5)
    before = traffic.n
    new = Lb(text, fname="new.yaml")
    check(new.admin == old.admin, f"the new hashlb has the admin endpoint too: {new.admin}")
    time.sleep(0.5)
    t0 = time.time()
    old.proc.send_signal(signal.SIGTERM)
    try:
        rc = old.proc.wait(30)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, f"the old hashlb drained and exited 0 ({rc}, {time.time() - t0:.1f}s)")
    during = traffic.n
    time.sleep(0.5)
    traffic.stop()
    check(before > 20 and during - before > 20 and traffic.n - during > 20,
          f"traffic before ({before}), during ({during - before}) and after the upgrade "
          f"({traffic.n - during})")
    check(not traffic.failed, f"no connection failed: {len(traffic.failed)} of {traffic.n}, "
          f"{traffic.failed[:5]}")
    moved = {c: s for c, s in traffic.got.items() if len(s) > 1}
    check(not moved, f"every client kept its backend: {len(moved)} moved, {list(moved)[:5]}")
    check(new.status()["services"][0]["name"] == "t", "the admin endpoint answers, from the new")
    check(new.status()["pid"] == new.proc.pid, "and is the new process's")
    check(who(LISTEN, client_ip(7)) in ("a", "b", "c"), "the new hashlb serves")
    check(new.stop() == 0, "exit 0")


def upgrade_tcp_admin():
    upgrade("127.0.0.1:29401")


def upgrade_unix_admin():
    """The new hashlb takes over the socket's path; the old one, exiting, leaves it alone."""
    upgrade("unix:" + tmpfile("admin.sock", ""))


run_tests([upgrade_tcp_admin, upgrade_unix_admin])
