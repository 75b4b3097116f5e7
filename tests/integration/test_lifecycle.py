#!/usr/bin/env python3
"""hashlb run's life: a bad config is refused with its file:line, SIGTERM drains (established
connections keep flowing, new ones are refused, exit 0 once they end or at the drain timeout),
and SIGHUP reloads without closing unchanged listeners or established connections; under a
service manager (systemd Type=notify) hashlb reports ready, reloading and stopping."""
import os
import subprocess
import sys

# In a network namespace of its own: default_admin_address_free_with_admin_option listens on
# 127.0.0.1:9901, hashlb's default admin address, which another suite's hashlb (one run beside
# this one on the same machine) may hold, or take while this test holds it.
if os.environ.get("HASHLB_TEST_NETNS") != "lifecycle":
    env = dict(os.environ, HASHLB_TEST_NETNS="lifecycle")
    sys.exit(subprocess.run(["unshare", "--net", sys.executable, os.path.abspath(__file__),
                             *sys.argv[1:]], env=env).returncode)

import re  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from shims import Paused  # noqa: E402
from lbtest import (HASHLB, Backend, BlackHole, Hashlb, Skip, check, config, connect,
                    connecting, dead_port, greetings, logfmt_error, logfmt_fields, outcome,
                    read_line, run_tests, socket_inodes, spawn, syn_sent, tmpfile, tmppath, wait_until,
                    who)  # noqa: E402

subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
backends = [Backend(n) for n in ("a", "b", "c")]
BACKENDS = [(b.name, b.addr) for b in backends]


def config_error_refused():
    """A config error stops hashlb run at once: exit 1, FILE:LINE:COL on stderr."""
    text = config(BACKENDS).replace("    hash_key: src-ip\n", "    hash_key: src-ip\n    bogus_key: 1\n")
    line = text.splitlines().index("    bogus_key: 1") + 1
    path = tmpfile("bad.yaml", text)
    p = subprocess.run([HASHLB, "run", "-c", path], capture_output=True, text=True, timeout=20)
    check(p.returncode == 1, f"exit status 1, got {p.returncode}")
    check(re.search(rf"bad\.yaml:{line}:\d+: error: ", p.stderr) is not None,
          f"error names line {line}: {p.stderr.strip()}")


def listen_bind_error_says_why():
    """A listen address hashlb run cannot bind at start is refused with its position and what
    is wrong in words an operator acts on: another process listens there, or no interface of
    this host has that address; as a reload says the first. Before, the start said only the
    errno's text ("Address already in use", "Cannot assign requested address") where the
    reload added "(another process listens there)". No line before it says the kernel shares
    the address's clients with that process: hashlb never bound there (before, a warning that
    it did, "another process listens on this address too", came first)."""
    holder = socket.create_server(("127.0.0.1", 0))  # no SO_REUSEPORT: hashlb cannot join it
    port = holder.getsockname()[1]
    cases = [(f"127.0.0.1:{port}", "Address already in use (another process listens there)")]
    with open("/proc/sys/net/ipv4/ip_nonlocal_bind") as f:
        if f.read().strip() == "0":  # else the kernel binds any address
            cases.append(("192.0.2.1:80", "Cannot assign requested address "
                                          "(no interface of this host has that address)"))
    for listen, why in cases:
        text = config(BACKENDS, listen=listen)
        line = text.splitlines().index(f"    listen: {listen}") + 1
        path = tmpfile("listen-taken.yaml", text)
        p = subprocess.run([HASHLB, "run", "-c", path], capture_output=True, text=True,
                           timeout=20)
        check(p.returncode == 1 and
              f"listen-taken.yaml:{line}:13: error: service 't': cannot listen on {listen}: "
              f"{why}\n" in p.stderr,
              f"listen {listen}: exit 1 and why, at its position: {p.returncode} "
              f"{p.stderr.strip()[-300:]}")
        check("another process listens on this address too" not in p.stderr,
              f"listen {listen}: no warning that it shares the address: {p.stderr.strip()}")
    holder.close()


def listen_permission_error_says_what_to_do():
    """A bind the kernel refuses for want of a privilege says what to do, at start and at a
    reload: a port below net.ipv4.ip_unprivileged_port_start needs CAP_NET_BIND_SERVICE (a
    unit run with User= and without AmbientCapabilities=), and a Unix admin socket needs a
    directory the user may write, on a file system that is not read-only (the shipped unit's
    ProtectSystem=strict leaves /run/hashlb/ alone writable). Run here as root without those capabilities (setpriv drops
    them from the bounding set, as a unit's CapabilityBoundingSet= does). Before, both said
    "Permission denied" alone, where an address in use or not local said why."""
    with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as f:
        start = int(f.read())
    check(start > 1, f"ip_unprivileged_port_start in this namespace is {start}: no port to try")
    port = min(80, start - 1)
    drop = ["setpriv", "--bounding-set=-net_bind_service,-dac_override,-dac_read_search",
            "--inh-caps=-net_bind_service,-dac_override,-dac_read_search", "--"]
    why = (f"cannot listen on 127.0.0.1:{port}: Permission denied (ports below {start} need "
           "CAP_NET_BIND_SERVICE: run as root, or grant it, as a unit's AmbientCapabilities= "
           "does)")
    text = config(BACKENDS, listen=f"127.0.0.1:{port}")
    line = text.splitlines().index(f"    listen: 127.0.0.1:{port}") + 1
    path = tmpfile("privileged.yaml", text)
    p = subprocess.run([*drop, HASHLB, "run", "-c", path], capture_output=True, text=True,
                       timeout=20)
    check(p.returncode == 1 and
          f"privileged.yaml:{line}:13: error: service 't': {why}\n" in p.stderr,
          f"start: exit 1 and what to do: {p.returncode} {p.stderr.strip()[-300:]}")

    lb = Hashlb(config(BACKENDS), wrap=drop, fname="privileged-reload.yaml")
    with open(lb.path, "w") as f:
        f.write(text)
    lb.proc.send_signal(signal.SIGHUP)
    check(lb.wait_log(r'msg="reload failed'), "the reload onto the port is refused")
    check(any(why in l for l in lb.log if 'msg="reload failed' in l),
          f"the reload says what to do: {[l for l in lb.log if 'reload failed' in l]}")
    lb.stop()

    d = tmppath("admin-readonly")
    os.mkdir(d, 0o500)  # its owner (root) may not create in it without CAP_DAC_OVERRIDE
    text = config(BACKENDS).replace("admin: off", f"admin: unix:{d}/admin.sock")
    path = tmpfile("admin-readonly.yaml", text)
    p = subprocess.run([*drop, HASHLB, "run", "-c", path], capture_output=True, text=True,
                       timeout=20)
    check(p.returncode == 1 and
          f"admin-readonly.yaml:2:8: error: admin: cannot listen on unix:{d}/admin.sock: "
          "Permission denied (this user may not create a file in that directory)\n" in p.stderr,
          f"admin: exit 1 and what to do: {p.returncode} {p.stderr.strip()[-300:]}")

    # a read-only file system, as the shipped unit's ProtectSystem=strict makes /run but
    # /run/hashlb/: a tmpfs mounted read-only in a mount namespace of hashlb's own
    d = tmppath("admin-rofs")
    os.mkdir(d)
    text = config(BACKENDS).replace("admin: off", f"admin: unix:{d}/admin.sock")
    path = tmpfile("admin-rofs.yaml", text)
    p = subprocess.run(["unshare", "--mount", "sh", "-c",
                        'mount -t tmpfs -o ro none "$1" && exec "$2" run -c "$3"', "sh", d,
                        HASHLB, path], capture_output=True, text=True, timeout=20)
    check(p.returncode == 1 and
          f"admin-rofs.yaml:2:8: error: admin: cannot listen on unix:{d}/admin.sock: "
          "Read-only file system (the shipped systemd unit's ProtectSystem=strict leaves "
          "/run/hashlb/ writable: put it there)\n" in p.stderr,
          f"read-only: exit 1 and what to do: {p.returncode} {p.stderr.strip()[-300:]}")


def second_instance_on_a_listen_address_warned():
    """A hashlb whose listen address another process holds with SO_REUSEPORT (another hashlb
    instance whose config listens there too, under the same user) joins it: the kernel
    shares new clients between both, each sending its share to its own backends. That is
    what an upgrade side by side without a takeover does on purpose, so it starts, but
    warns at start, naming the service and the address. Before, nothing in either log said
    so. A new hashlb that takes the old one's sockets over (through the admin endpoint)
    shares nothing and is not warned, unless another process listens there still."""
    first = Hashlb(config(BACKENDS, name="web"), fname="first-instance.yaml")
    addr = "%s:%d" % first.addr
    admin = f"127.0.0.1:{dead_port(hold=False)}"
    text = config(BACKENDS[:1], name="other", listen=addr).replace("admin: off",
                                                                     f"admin: {admin}")
    second = Hashlb(text, fname="second-instance.yaml")
    warned = [l for l in second.log if "another process listens on this address too" in l]
    check(len(warned) == 1 and "level=warn " in warned[0] and
          f" service=other addr={addr} " in warned[0], f"the second is warned: {second.log}")
    check(not any("another process listens" in l for l in first.log),
          "the first, alone there when it started, is not")
    # A takeover from the second while the first still listens there: the sockets taken are
    # the second's own, the first's are a third process's. Before, any socket taken over at
    # the address silenced the warning.
    beside = Hashlb(text, fname="beside-instance.yaml")
    warned = [l for l in beside.log if "another process listens on this address too" in l]
    check(any('msg="listening sockets taken over"' in l for l in beside.log) and
          len(warned) == 1 and f" service=other addr={addr} " in warned[0],
          f"one that takes the second's sockets over beside the first is warned: {beside.log}")
    check(beside.stop() == 0, "it stops")
    check(first.stop() == 0, "the first stops")
    third = Hashlb(text, fname="third-instance.yaml")  # takes the second's sockets over
    check(any('msg="listening sockets taken over"' in l for l in third.log) and
          not any("another process listens" in l for l in third.log),
          f"a takeover is not warned: {third.log}")
    check(second.stop() == 0 and third.stop() == 0, "both stop")


def another_process_reuseport_program_left_alone():
    """A hashlb started where another process listens with SO_REUSEPORT, its sockets' group
    steered by that process's own program (here a classic one sending every client to its
    first socket), joins the group (warned, as above), but leaves the program there: the
    kernel keeps one a group, the last attached, and hashlb's own (which moves a closing
    socket's clients to the group's others, hlb_proxy_migrates()) took its place before,
    the other process's choice gone: its second socket got clients it never had."""
    import ctypes
    sockets = []
    for _ in range(2):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind(("127.0.0.1", sockets[0].getsockname()[1] if sockets else 0))
        s.listen(64)
        sockets.append(s)
    code = ctypes.create_string_buffer(struct.pack("HBBI", 0x06, 0, 0, 0))  # return 0
    sockets[0].setsockopt(socket.SOL_SOCKET, 51,  # SO_ATTACH_REUSEPORT_CBPF
                          struct.pack("HL", 1, ctypes.addressof(code)))
    addr = "127.0.0.1:%d" % sockets[0].getsockname()[1]
    lb = Hashlb(config(BACKENDS, listen=addr), fname="beside-a-program.yaml")
    check(any("another process listens on this address too" in l for l in lb.log),
          f"hashlb started beside it, warned: {lb.log[-3:]}")
    for _ in range(20):
        socket.create_connection(sockets[0].getsockname(), timeout=10).close()
    got = []
    for s in sockets:
        s.setblocking(False)
        n = 0
        while n < 20:
            try:
                s.accept()[0].close()
                n += 1
            except BlockingIOError:
                break
        got.append(n)
    check(got == [20, 0], f"every client still on the other process's first socket: {got}")
    check(lb.stop() == 0, "exit 0")
    for s in sockets:
        s.close()


def admin_option_clash_refused():
    """--admin on a service's listen address is refused as the config's admin would be: both
    listen with SO_REUSEPORT, and the kernel shared the service's clients out with the admin
    endpoint (hashlb run started, and some clients got the admin API's answers)."""
    port = dead_port(hold=False)
    text = config(BACKENDS, listen=f"127.0.0.1:{port}")
    line = text.splitlines().index(f"    listen: 127.0.0.1:{port}") + 1
    path = tmpfile("admin-clash.yaml", text)
    for admin in (f"127.0.0.1:{port}", f"[::]:{port}"):
        p = spawn([HASHLB, "run", "-c", path, "--admin", admin], stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        check(p.returncode == 1, f"--admin {admin}: exit status 1, got {p.returncode}")
        check(re.search(rf"admin-clash\.yaml:{line}:13: error: listen address 127\.0\.0\.1:{port} "
                        r"clashes with the admin endpoint's .*\(--admin\)", err) is not None,
              f"--admin {admin}: the error names the listen address's line: {err.strip()[-300:]}")


def default_admin_address_free_with_admin_option():
    """A file without admin: whose service listens on the default admin address
    (127.0.0.1:9901) is refused by hashlb check, the default endpoint would take its clients;
    with --admin elsewhere that default is not used, so hashlb run starts and serves there,
    and a reload keeps working. It used to be refused even with --admin."""
    from ctltest import Lb
    try:
        socket.create_server(("127.0.0.1", 9901)).close()
    except OSError as e:
        check(False, f"127.0.0.1:9901, which this test listens on, is taken: {e}")
        return
    text = config(BACKENDS, listen="127.0.0.1:9901").replace("admin: off\n", "")
    path = tmpfile("default-admin.yaml", text)
    p = subprocess.run([HASHLB, "check", "-c", path], capture_output=True, text=True, timeout=30)
    check(p.returncode == 1 and "clashes with the admin endpoint's 127.0.0.1:9901 (the default)"
          in p.stderr, f"hashlb check refuses the default's clash: {p.returncode} {p.stderr!r}")
    # check takes the --admin run takes, and agrees with it (the unit's ExecStartPre
    # passes it): before, "unrecognized option", exit 2
    p = subprocess.run([HASHLB, "check", "-c", path, "--admin", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 0 and "admin 127.0.0.1:0" in p.stdout,
          f"hashlb check --admin elsewhere passes it: {p.returncode} {p.stderr!r}")
    p = subprocess.run([HASHLB, "check", "-c", path, "--admin", "0.0.0.0:9901"],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 1 and re.search(r"default-admin\.yaml:\d+:\d+: error: listen address "
                                          r"127\.0\.0\.1:9901 clashes with the admin endpoint's "
                                          r"0\.0\.0\.0:9901 \(--admin\)", p.stderr),
          f"and refuses --admin on its listen address, as run does: {p.returncode} {p.stderr!r}")
    lb = Lb(text, args=("--admin", "127.0.0.1:0"))
    check(lb.admin != "127.0.0.1:9901", f"the admin endpoint is where --admin says: {lb.admin}")
    check(who(("127.0.0.1", 9901)) in ("a", "b", "c"), "clients on 127.0.0.1:9901 are served")
    rc, so, se = lb.ctl("reload")
    check(rc == 0, f"a reload of the same file succeeds: {rc} {se.strip()}")
    check(who(("127.0.0.1", 9901)) in ("a", "b", "c"), "and they still are")
    check(lb.stop() == 0, "hashlb exits 0")


def _run_to_exit(path):
    """hashlb run on <path> until it exits (killed after 10 s): the process, its stderr."""
    p = spawn([HASHLB, "run", "-c", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
              text=True)
    try:
        err = p.communicate(timeout=10)[1]
    except subprocess.TimeoutExpired:
        p.kill()
        err = p.communicate()[1]
    return p, err


def admin_bind_error_placed():
    """An admin address of the file that cannot be listened on (another process holds it) is
    refused at start with the file, line and column of its 'admin' key, as every config
    error is; it used to say only 'admin: cannot listen on ...'. And it says who holds it, as
    a reload refused for a service's address does: it said only "Address already in use"."""
    holder = socket.create_server(("127.0.0.1", 0))  # no SO_REUSEPORT: hashlb cannot join it
    port = holder.getsockname()[1]
    text = config(BACKENDS).replace("admin: off", f"admin: 127.0.0.1:{port}")
    line = text.splitlines().index(f"admin: 127.0.0.1:{port}") + 1
    path = tmpfile("admin-taken.yaml", text)
    p, err = _run_to_exit(path)
    holder.close()
    check(p.returncode == 1, f"exit status 1, got {p.returncode}")
    check(re.search(rf"admin-taken\.yaml:{line}:8: error: admin: cannot listen on "
                    rf"127\.0\.0\.1:{port}: Address already in use \(another process "
                    r"listens there\)\n", err) is not None,
          f"the error names the admin key's line and column: {err.strip()[-300:]}")


def admin_bind_beside_a_connection_says_so():
    """An admin address on a wildcard whose port a connection holds on another address (no
    process listens there; the kernel refuses a wildcard's bind beside a socket of its port
    that does not listen) is refused saying so, as a service's listener is: it said "another
    process listens there", which sent the user hunting a listener that does not exist."""
    holder = socket.create_server(("127.0.0.1", 0))
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # no TIME_WAIT
    c.bind(("127.0.0.2", 0))
    port = c.getsockname()[1]
    c.connect(holder.getsockname())
    text = config(BACKENDS).replace("admin: off", f"admin: 0.0.0.0:{port}")
    path = tmpfile("admin-beside.yaml", text)
    p, err = _run_to_exit(path)
    c.close()
    holder.close()
    check(p.returncode == 1, f"exit status 1, got {p.returncode}")
    check(f"error: admin: cannot listen on 0.0.0.0:{port}: Address already in use (no other "
          f"process listens there: connections hold port {port}" in err
          and f"sport = :{port}" in err and "another process listens there" not in err,
          f"the error says connections hold the port: {err.strip()[-400:]}")


def sigterm_drain():
    """During the drain an established connection keeps transferring, new connections are
    refused, and hashlb exits 0 as soon as the last connection ends."""
    # drain 60 s: the exit is at the last close, or at the deadline, 5x the 12 s waited below
    lb = Hashlb(config(BACKENDS, extra="timeouts:\n  drain: 60s"))
    s = connect(lb.addr, timeout=5)
    read_line(s)
    lb.proc.send_signal(signal.SIGTERM)
    check(lb.wait_log("msg=draining"), "hashlb logs the drain")
    refused = False
    end = time.time() + 10
    while time.time() < end and not refused:
        try:
            c = connect(lb.addr, timeout=1)
            c.close()
            time.sleep(0.05)
        except (ConnectionRefusedError, socket.timeout):
            refused = True
    check(refused, "new connections are refused during the drain")
    for i in range(20):
        s.sendall(b"during drain %d\n" % i)
        check(read_line(s) == "during drain %d" % i, "the established connection keeps flowing")
        time.sleep(0.02)
    check(lb.proc.poll() is None, "hashlb waits for the established connection")
    lb.proc.send_signal(signal.SIGHUP)
    check(lb.wait_log("SIGHUP ignored: stopping"), "a SIGHUP while draining says it is ignored")
    t0 = time.time()
    s.close()
    try:
        rc = lb.proc.wait(12)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, f"exit 0 once the last connection closed, got {rc} after {time.time() - t0:.1f}s")


def stop_serves_the_backlog():
    """A stop serves the clients waiting in the listening socket's backlog (held there by
    max_connection_rate; under load, those the workers had not accepted yet), which the kernel
    accepted already: each is greeted by its backend and drained with the rest, none reset
    when the socket closes. Before, the close reset them: 8 of the 9 waiting here."""
    n = 10
    lb = Hashlb(config(BACKENDS[:1], extra="max_connection_rate: 1\ntimeouts:\n  drain: 60s",
                       workers=1))
    socks = connecting(lb.addr, n, 8200)
    # the first is served at once (the burst), the others wait in the backlog at 1 a second
    first = greetings(socks[:1])
    check(first == [b"a\n"], f"the first client is served: {first}")
    # every handshake done (writable: connected), the clients in the kernel's accept queue
    _, writable, _ = select.select([], socks, [], 10)
    check(len(writable) == n, f"all {n} connected: {len(writable)}")
    lb.proc.send_signal(signal.SIGTERM)
    check(lb.wait_log("msg=draining"), "hashlb drains")
    got = greetings(socks[1:])
    served = sum(g == b"a\n" for g in got)
    check(served == n - 1, f"every client waiting in the backlog is served: {served} of {n - 1} "
          f"({len(got) - served} reset or closed, {n - 1 - len(got)} unanswered)")
    check(lb.proc.poll() is None, "hashlb drains them")
    for s in socks:
        s.close()
    check(lb.proc.wait(30) == 0, "exit 0 once they closed")


def drain_timeout():
    """A connection still open at the end of the drain timeout is closed, then exit 0."""
    lb = Hashlb(config(BACKENDS, extra="timeouts:\n  drain: 1s\nlog_connections: true"))
    s = connect(lb.addr, timeout=5)
    read_line(s)
    t0 = time.time()
    lb.proc.send_signal(signal.SIGINT)
    try:
        rc = lb.proc.wait(30)
    except subprocess.TimeoutExpired:
        rc = None
    el = time.time() - t0
    # not before the 1 s drain; after it, by the drain (logged so), not by another timeout:
    # the next is the default drain (30 s), 5x the 6 s bound, then idle (300 s)
    check(rc == 0 and 0.8 < el < 6, f"exit 0 after the 1s drain timeout, got {rc} after {el:.1f}s")
    check(lb.wait_log(r"msg=connection .*end=drain_timeout"),
          f"the connection ended at the drain deadline: {[l for l in lb.log if 'end=' in l]}")
    try:
        d = s.recv(10)
    except ConnectionError:
        d = b""
    check(d == b"", "the connection was closed")
    s.close()


def drain_end_logged():
    """The drain's end is one line as hashlb exits, after every connection line:
    msg=stopped finished=N drain_timeout=N drain_ms=N, the connections that ended by
    themselves during the drain and those closed at its deadline, which the connection log's
    end= agrees with. Before, msg=stopped said nothing: whether the drain cut connections
    (and how many) took counting end=drain_timeout lines, logged only with log_connections,
    and the drain's length was nowhere. Then a second signal: the connections it closes count
    as closed at the deadline too (it ends the drain at once), but the service's line says a
    second signal cut them: before, it said "drain timeout" with no timeout reached."""
    lb = Hashlb(config(BACKENDS, extra="timeouts:\n  drain: 2s\nlog_connections: true"))
    done, held = connect(lb.addr, timeout=5), connect(lb.addr, timeout=5)
    read_line(done)
    read_line(held)
    lb.proc.send_signal(signal.SIGTERM)
    check(lb.wait_log(r"msg=draining connections=2 "), f"draining 2: {lb.log[-3:]}")
    done.close()
    check(lb.wait_log(r"msg=connection .* end=done"), "the closed one ends by itself")
    check(lb.proc.wait(30) == 0, "exit 0 at the drain deadline")
    lines = [logfmt_fields(l) for l in lb.log_to_end()]
    ends = sorted(f["end"] for f in lines if f["msg"] == "connection")
    check(ends == ["done", "drain_timeout"], f"logged done and drain_timeout: {ends}")
    last = [i for i, f in enumerate(lines) if f["msg"] in ("connection", "stopped")]
    stopped = lines[last[-1]] if last else {}
    check(stopped.get("msg") == "stopped", f"msg=stopped after the connections: {stopped}")
    check(stopped.get("finished") == "1" and stopped.get("drain_timeout") == "1",
          f"1 finished, 1 closed at the deadline: {stopped}")
    # the workers' deadline is on their own clock, read once a turn in whole ms: 1999 seen
    check(int(stopped.get("drain_ms", "0")) >= 1900, f"the drain lasted its 2 s: {stopped}")
    done.close()
    held.close()

    lb = Hashlb(config(BACKENDS, extra="timeouts:\n  drain: 60s\nlog_connections: true"))
    held = [connect(lb.addr, timeout=5) for _ in range(3)]
    for s in held:
        read_line(s)
    lb.proc.send_signal(signal.SIGTERM)
    check(lb.wait_log(r"msg=draining connections=3 "), f"draining 3: {lb.log[-3:]}")
    lb.proc.send_signal(signal.SIGTERM)
    check(lb.proc.wait(30) == 0, "exit 0 at the second signal")
    check(lb.drain_ends() == (0, 3),
          f"second signal: 3 closed at the deadline: {lb.drain_ends()}")
    cut = [l.split("msg=", 1)[1] for l in lb.log if "connections closed" in l]
    check(cut == ['"drain cut: connections closed" service=t connections=3 reason=second_signal'],
          f"the service's line says the second signal cut its 3, not a timeout: {cut}")
    for s in held:
        s.close()


def drain_deadline_resets_the_unserved():
    """At the drain deadline a client whose backend connect is still in flight, never
    answered, is reset, whether or not it sent its request: before, it got a FIN when it had
    sent nothing (as if a backend had answered with nothing and closed) and a reset when it
    had (the kernel's, for its unread request). An established connection ends with a FIN,
    after every byte, as the docs say."""
    hole = BlackHole()  # its connects hang until the connect timeout, past the drain
    extra = "log_connections: true\ntimeouts:\n  connect: 20s\n  drain: 1s"
    text = config([("hole", hole.addr)], name="hole", extra=extra, workers=1)
    text += config(BACKENDS, name="up", extra=extra).split("services:\n", 1)[1]
    lb = Hashlb(text)
    addr = lb.service_addrs()
    hole_port = int(hole.addr.rsplit(":", 1)[1])
    waiting = syn_sent(hole_port)  # the BlackHole's own fillers
    quiet = connect(addr["hole"], timeout=10)
    asked = connect(addr["hole"], timeout=10)
    asked.sendall(b"request\n")
    served = connect(addr["up"], timeout=10)
    check(read_line(served) in ("a", "b", "c"), "the established client is greeted")
    check(wait_until(lambda: syn_sent(hole_port) >= waiting + 2),
          "hashlb connects to the hole for both")
    lb.proc.send_signal(signal.SIGTERM)
    check(outcome(quiet) == (0, "RST"), "a connecting client that sent nothing is reset")
    check(outcome(asked) == (0, "RST"), "a connecting client that sent its request is reset")
    check(outcome(served) == (0, "FIN"), "an established client gets a FIN")
    check(lb.stop() == 0, "exit 0")
    wait_until(lambda: sum("msg=connection" in l for l in lb.log) >= 3)  # read to the end
    ends = [re.search(r"service=(\w+).* end=(\w+)", l).groups() for l in lb.log
            if "msg=connection" in l]
    check(sorted(ends) == [("hole", "drain_timeout")] * 2 + [("up", "drain_timeout")],
          f"all three logged as drain_timeout: {ends}")
    for s in (quiet, asked, served):
        s.close()
    hole.close()


def _two_services(drain_a, drain_b):
    """hashlb with services a (timeouts.drain <drain_a>) and b (<drain_b>), connection lines
    logged, and one client established on each, greeted: (lb, client of a, client of b)."""
    text = config(BACKENDS, name="a", extra=f"log_connections: true\ntimeouts:\n  drain: {drain_a}")
    text += config(BACKENDS, name="b", extra=f"timeouts:\n  drain: {drain_b}").split(
        "services:\n", 1)[1]
    lb = Hashlb(text)
    addr = lb.service_addrs()
    a, b = connect(addr["a"], timeout=10), connect(addr["b"], timeout=10)
    check(read_line(a) in ("a", "b", "c") and read_line(b) in ("a", "b", "c"),
          "a client established on each service")
    return lb, a, b


def each_service_drains_to_its_own_timeout():
    """A stop drains each service's connections to that service's own timeouts.drain: with
    drain 1s on service a and 60s on b, a's connection is closed at a's deadline (logged
    end=drain_timeout service=a) while b's goes on forwarding, until a second signal closes
    it (or it ends by itself: then hashlb exits at once). Before, every service drained to
    the longest deadline: a's connection stayed open for b's 60 s."""
    lb, a, b = _two_services("1s", "60s")
    lb.proc.send_signal(signal.SIGTERM)
    check(lb.wait_log(r"msg=draining connections=2 drain_timeout_ms=60000"),
          f"draining 2, for up to the longest drain: {lb.log[-3:]}")
    # a hang guard, not a measurement: a's 1 s deadline is long past then, b's 60 s is not
    check(outcome(a, timeout=30) == (0, "FIN"), "a's connection is closed at a's deadline")
    check(lb.wait_log(r"msg=connection .*service=a .*end=drain_timeout"),
          f"and logged so: {[l for l in lb.log if 'msg=connection' in l]}")
    for i in range(5):
        b.sendall(b"after a's deadline %d\n" % i)
        check(read_line(b) == "after a's deadline %d" % i, "b's connection keeps forwarding")
    check(lb.proc.poll() is None, "hashlb waits for b's connection")
    lb.proc.send_signal(signal.SIGTERM)
    check(outcome(b, timeout=20) == (0, "FIN"), "a second signal closes b's connection")
    check(lb.proc.wait(20) == 0, "exit 0")
    check(lb.drain_ends() == (0, 2),
          f"both closed at their deadline (b's cut short by the second signal): {lb.drain_ends()}")
    cut = [l.split("msg=", 1)[1] for l in lb.log if "connections closed" in l]
    check(sorted(cut) == ['"drain cut: connections closed" service=b connections=1 '
                          'reason=second_signal',
                          '"drain timeout: connections closed" service=a connections=1'],
          f"a's at its timeout, b's by the second signal, each said so: {cut}")
    a.close()
    b.close()

    lb, a, b = _two_services("1s", "60s")
    lb.proc.send_signal(signal.SIGTERM)
    check(outcome(a, timeout=30) == (0, "FIN"), "a's connection is closed at a's deadline")
    b.sendall(b"still\n")
    check(read_line(b) == "still", "b's goes on")
    b.close()
    # 60 s: b's deadline; 20 s is a hang guard for the exit at its last connection's end
    check(lb.proc.wait(20) == 0, "exit 0 once b's connection ended, not at b's deadline")
    check(lb.drain_ends() == (1, 1),
          f"a's closed at its deadline, b's ended by itself: {lb.drain_ends()}")
    a.close()


def second_signal():
    """A second SIGTERM/SIGINT during the drain closes the remaining connections at once (as
    hashlb run --help says), not at the end of the drain timeout."""
    lb = Hashlb(config(BACKENDS, extra="timeouts:\n  drain: 60s"))
    s = connect(lb.addr, timeout=5)
    read_line(s)
    lb.proc.send_signal(signal.SIGTERM)
    check(lb.wait_log("msg=draining"), "hashlb logs the drain")
    lb.proc.send_signal(signal.SIGINT)
    check(lb.wait_log("second signal"), "hashlb logs the second signal")
    try:
        rc = lb.proc.wait(20)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, f"exit 0 soon after the second signal, long before the 60 s drain, got {rc}")
    s.settimeout(5)
    try:
        d = s.recv(10)
    except (ConnectionError, socket.timeout):
        d = b""
    check(d == b"", "the connection was closed")
    s.close()


def sigusr1_cuts_nothing():
    """SIGUSR1, which nginx takes to reopen its log files and HAProxy to stop softly (a
    logrotate script or a habit may send it), is logged and ignored: the established
    connection goes on and hashlb serves on. Before, its default action killed hashlb at
    once, every connection reset, without a line."""
    lb = Hashlb(config(BACKENDS))
    s = connect(lb.addr, timeout=5)
    read_line(s)
    lb.proc.send_signal(signal.SIGUSR1)
    logged = lb.wait_log("SIGUSR1 ignored", timeout=5)
    check(logged and lb.proc.poll() is None,
          f"SIGUSR1 is logged and hashlb runs on: exit {lb.proc.poll()}")
    if lb.proc.poll() is None:
        s.sendall(b"after USR1\n")
        check(read_line(s) == "after USR1", "the established connection keeps flowing")
        check(who(lb.addr) in ("a", "b", "c"), "new clients are served")
    s.close()
    check(lb.stop() == 0, "SIGTERM: exit 0")


def sigquit_drains():
    """SIGQUIT stops hashlb as SIGTERM does: the established connection goes on until it
    ends, then exit 0. nginx takes it for its graceful stop (its Docker image's STOPSIGNAL,
    which a container built from that template keeps). Before, its default action ended
    hashlb at once with a core dump, every connection reset."""
    lb = Hashlb(config(BACKENDS, extra="timeouts:\n  drain: 60s"))
    s = connect(lb.addr, timeout=5)
    read_line(s)
    lb.proc.send_signal(signal.SIGQUIT)
    check(lb.wait_log(r'msg="signal, shutting down" signal=SIGQUIT', timeout=5) and
          lb.wait_log("msg=draining", timeout=5), f"SIGQUIT starts the drain: exit {lb.proc.poll()}")
    if lb.proc.poll() is None:
        s.sendall(b"during drain\n")
        check(read_line(s) == "during drain", "the established connection keeps flowing")
    s.close()
    wait_until(lambda: lb.proc.poll() is not None, timeout=12)
    check(lb.proc.poll() == 0, f"exit 0 once the last connection closed, got {lb.proc.poll()}")


def second_signal_after_an_upgrade():
    """After an upgrade in place hands over, the old process drains; that was no stop signal,
    so a first SIGTERM to it (a service manager's stop reaching every process of the unit)
    lets the drain go on, and only a second one closes what is left."""
    lb = Hashlb(config(BACKENDS, extra="timeouts:\n  drain: 60s"))
    s = connect(lb.addr, timeout=5)
    read_line(s)
    lb.proc.send_signal(signal.SIGUSR2)
    check(lb.wait_log("this one drains"), "the upgrade hands over")
    m = next((re.search(r"this one drains\" pid=(\d+)", l) for l in lb.log
              if "this one drains" in l), None)
    new_pid = int(m.group(1)) if m else None
    try:
        lb.proc.send_signal(signal.SIGTERM)
        check(lb.wait_log("draining already"), "a first SIGTERM: the drain goes on")
        s.sendall(b"still\n")
        check(read_line(s) == "still", "and the connection with it")
        lb.proc.send_signal(signal.SIGTERM)
        try:
            rc = lb.proc.wait(20)
        except subprocess.TimeoutExpired:
            rc = None
        check(rc == 0, f"a second one closes it at once and the old process exits 0, got {rc}")
    finally:
        s.close()
        if new_pid:
            try:
                os.kill(new_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def reload_keeps_listeners_and_connections():
    """SIGHUP with one more service and one backend fewer: the old listener is never closed,
    the established connection keeps its backend, the new service serves."""
    text = config(BACKENDS)
    lb = Hashlb(text)
    addr = lb.addr
    s = connect(addr, timeout=5)
    first = read_line(s)
    # The new config: the same service on the same (now known) port without 'first', plus
    # a second service on a new port.
    kept = [b for b in BACKENDS if b[0] != first]
    new = config(kept, listen=f"{addr[0]}:{addr[1]}")
    new += "\n".join(config(BACKENDS, name="u").splitlines()[3:]) + "\n"
    with open(lb.path, "w") as f:
        f.write(new)
    stop_probe = False
    refused = 0

    import threading

    def probe():
        nonlocal refused
        while not stop_probe:
            try:
                # a hang guard: slow to answer on a loaded machine is not refused
                c = connect(addr, timeout=10)
                if read_line(c) not in ("a", "b", "c"):
                    refused += 1
                c.close()
            except OSError:
                refused += 1

    t = threading.Thread(target=probe)
    t.start()
    time.sleep(0.2)
    lb.proc.send_signal(signal.SIGHUP)
    check(lb.wait_log("msg=reloaded"), "hashlb logs the reload")
    time.sleep(0.3)
    stop_probe = True
    t.join()
    check(refused == 0, f"no connection refused or dropped during the reload ({refused})")
    s.sendall(b"after reload\n")
    check(read_line(s) == "after reload", f"the connection to {first} survives the reload")
    check(len(lb.addrs) == 2, f"a listener opened for the new service: {lb.addrs}")
    if len(lb.addrs) == 2:
        host, port = lb.addrs[1].rsplit(":", 1)
        check(who((host, int(port))) in ("a", "b", "c"), "the new service serves")
    names = {who(addr, f"127.9.0.{i}") for i in range(1, 60)}
    check(first not in names, f"the removed backend {first} takes no new client: {names}")
    # A broken config on SIGHUP is refused and the running one kept.
    with open(lb.path, "w") as f:
        f.write("services: [\n")
    lb.proc.send_signal(signal.SIGHUP)
    check(lb.wait_log("msg=\"reload failed"), "a broken config is refused on reload")
    check(who(addr) in ("a", "b", "c"), "and the running config keeps serving")
    s.close()
    check(lb.stop() == 0, "exit 0")


class NotifySocket:
    """What systemd gives a Type=notify service: a datagram socket in $NOTIFY_SOCKET."""

    def __init__(self, abstract=False, name="notify.sock"):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        if abstract:
            self.sock.bind(f"\0hashlb-test-{os.getpid()}")
            self.env = f"@hashlb-test-{os.getpid()}"
        else:
            self.env = tmpfile(name, "")
            os.unlink(self.env)
            self.sock.bind(self.env)

    def start(self, text):
        """hashlb run with $NOTIFY_SOCKET set to this socket."""
        os.environ["NOTIFY_SOCKET"] = self.env
        try:
            return Hashlb(text, wait=False)
        finally:
            del os.environ["NOTIFY_SOCKET"]

    def next(self, timeout=10):
        """The next message as {key: value} and the sender's pid, or ({}, None)."""
        self.sock.settimeout(timeout)
        try:
            data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
        except socket.timeout:
            return {}, None
        pid = None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = int.from_bytes(payload[:4], "little")
        return dict(l.split("=", 1) for l in data.decode().splitlines()), pid


def odd_config_path_logged_as_logfmt():
    """A config path with spaces, quotes or '=' is quoted in the log lines that name it
    (started, reloaded), so every line still parses as logfmt: it used to go out bare,
    'config=/etc/my dir/lb.yaml' reading as three fields."""
    d = tmppath('dir with space="q"')
    os.makedirs(d, exist_ok=True)
    lb = Hashlb(config(BACKENDS), fname=os.path.join('dir with space="q"', "lb conf.yaml"))
    lb.proc.send_signal(signal.SIGHUP)
    check(lb.wait_log("msg=reloaded"), "reloaded")
    for tag in ("msg=started", "msg=reloaded"):
        line = next((l for l in lb.log if tag in l), "")
        check(line and logfmt_error(line) is None and
              logfmt_fields(line).get("config") == lb.path, f"{tag}: every field key=value: {line!r}")
    check(lb.stop() == 0, "exit 0")

def started_line_names_the_version():
    """The started line gives hashlb's version, as hashlb --version prints it: which binary
    ran from when, in a journal read after an upgrade. Before, only ctl status said it."""
    v = subprocess.run([HASHLB, "--version"], capture_output=True, text=True, timeout=60)
    version = v.stdout.split()[-1] if v.returncode == 0 and v.stdout.startswith("hashlb ") else None
    lb = Hashlb(config(BACKENDS))
    line = next((l for l in lb.log if "msg=started " in l), "")
    check(version and logfmt_fields(line).get("version") == version,
          f"msg=started carries version={version}: {line!r}")
    check(lb.stop() == 0, "exit 0")


def long_config_path_logged_whole():
    """A config path of some 1,200 bytes (nested dirs, with spaces and quotes: quoted, and
    some 1,300 bytes so) is logged whole in the lines that name it: started, a reload refused
    (config=PATH ... err=...) and reloaded, each strict logfmt. Before, a quoted value was cut
    at 511 bytes (the path lost its end), and the refused reload's line at 768 bytes."""
    parts = [f'd{i:02} "q"=' + "x" * 90 for i in range(12)]
    d = tmppath(os.path.join(*parts))
    os.makedirs(d, exist_ok=True)
    text = config(BACKENDS)
    lb = Hashlb(text, fname=os.path.join(*parts, "lb.yaml"))
    check(len(os.fsencode(lb.path)) > 1200, f"premise: a path of {len(os.fsencode(lb.path))} bytes")
    with open(lb.path, "w") as f:
        f.write(text.replace("scheme:", "schema:"))
    lb.proc.send_signal(signal.SIGHUP)
    check(lb.wait_log('msg="reload failed'), "a broken config is refused on reload")
    with open(lb.path, "w") as f:
        f.write(text)
    lb.proc.send_signal(signal.SIGHUP)
    check(lb.wait_log("msg=reloaded "), "the fixed one reloads")
    for tag in ("msg=started ", 'msg="reload failed', "msg=reloaded "):
        line = next((l for l in lb.log if tag in l), "")
        f = logfmt_fields(line)
        print(f"    {tag.strip()}: {len(line)} bytes, config= {len(f.get('config', ''))} of "
              f"{len(lb.path)} characters")
        check(line and logfmt_error(line) is None and f.get("config") == lb.path,
              f"{tag.strip()}: strict logfmt, config= the whole path: {line!r}")
        if "failed" in tag:
            check("schema" in f.get("err", "") and f.get("line") == "6",
                  f"and the error whole after it: {f.get('err')!r} line={f.get('line')}")
    check(lb.stop() == 0, "exit 0")


def early_signals():
    """SIGHUP and SIGUSR2 terminate a process by default. hashlb holds them from the start of
    hashlb run, so one that arrives while the config still loads reloads (or upgrades) once
    the daemon runs, instead of killing it (the build before died of a SIGHUP 10-80 ms into
    its start here). SIGUSR1 (logrotate's signal for nginx) is held too, and logged and
    ignored once it runs: before, it killed a hashlb still loading, such as the new process of
    an upgrade in place resolving its names, and the upgrade failed. (Stopped as it opens its
    config by start_pause.c: a poll of /proc/PID/status for the moment missed it now and
    then under ASan.)"""
    lb, pid, go = _paused("open")
    os.kill(pid, signal.SIGUSR1)
    os.kill(pid, signal.SIGHUP)
    go()
    check(lb.wait_log("msg=reloaded", 30) and lb.proc.poll() is None,
          f"a SIGHUP during start-up: reloaded once running ({lb.proc.poll()}, "
          f"{[l for l in lb.log if 'reload' in l or 'error' in l][:3]})")
    check(lb.wait_log('msg="SIGUSR1 ignored"', 10),
          f"a SIGUSR1 during start-up: logged and ignored once running ({lb.proc.poll()})")
    check(lb.stop(timeout=30) == 0, "exit 0")


def early_sigquit_stops_as_sigterm():
    """SIGQUIT is a stop as SIGTERM (nginx's graceful stop, "not a core dump", hashlb run
    --help). While the config still loads, SIGTERM ends hashlb at once (nothing to drain
    yet); SIGQUIT kept its default action there, a core dump: the process killed by signal 3
    with a core of it written, which systemd takes for a failure (code=dumped, and a restart
    under Restart=on-failure) where a SIGTERM is a clean stop. Now it ends as SIGTERM does.
    prlimit: no core file is left by the build before."""
    lb, pid, go = _paused("open", wrap=("prlimit", "--core=0", "--"))
    os.kill(pid, signal.SIGQUIT)
    go()
    rc = _end_or_start(lb)
    print(f"    SIGQUIT while loading: exit status {rc}")
    check(rc == -signal.SIGTERM,
          f"ended as by SIGTERM ({-signal.SIGTERM}), not killed by SIGQUIT ({-signal.SIGQUIT}), "
          f"a core dump: {rc}")


# hashlb as PID 1 of a PID namespace of its own (a container's init); --kill-child: it goes
# with unshare when a test stops that
AS_PID1 = ("unshare", "--pid", "--fork", "--mount-proc", "--kill-child")


def _init_pid(proc):
    """The pid, as seen here, of the PID 1 that <proc> (AS_PID1 ...) started."""
    with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
        return int(f.read().split()[0])


def _stop_pid1(lb, pid, sig=signal.SIGTERM, timeout=20):
    """<sig> to hashlb as PID 1 (<pid>): its exit status, None if it has not exited within
    <timeout> s."""
    os.kill(pid, sig)
    try:
        return lb.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


def _paused(at, pid1=False, ignore=(), cfg_text=None, fname="paused.yaml", wrap=()):
    """hashlb run (on a small config, or <cfg_text>) stopped at one point <at> of its start
    by start_pause.c (LD_PRELOAD), a moment a poll of /proc/PID/status can miss: "sigprocmask", just after
    its first mask; "open", as it opens its config, which is then loading. With <pid1>, as
    PID 1 of a PID namespace of its own (a container's init: unshare --pid); with <ignore>,
    those signals inherited ignored (as a shell's background job has SIGINT and SIGQUIT).
    <wrap>: a command prefix before all that. (lb, its pid as seen here, go): go() lets it
    go on."""
    pause = Paused("open:" + tmppath(fname) if at == "open" else at)
    wrap_ = pause.wrap
    if ignore:  # as the shell does, with exec: hashlb inherits them ignored
        wrap_ = ("sh", "-c", f"trap '' {' '.join(signal.Signals(s).name[3:] for s in ignore)}; "
                 'exec "$@"', "sh", *wrap_)
    if pid1:
        wrap_ = (*AS_PID1, *wrap_)
    lb = Hashlb(cfg_text or config(BACKENDS), fname=fname, wait=False, wrap=(*wrap, *wrap_),
                pass_fds=pause.pass_fds)
    check(pause.reached(), "hashlb reached the point of its start")
    pid = _init_pid(lb.proc) if pid1 else lb.proc.pid
    return lb, pid, pause.go


def _logged(lb, text):
    return any(text in line for line in lb.log)


def _end_or_start(lb, timeout=30):
    """hashlb's exit status, or None if it started instead (logged msg=started)."""
    wait_until(lambda: lb.proc.poll() is not None or _logged(lb, "msg=started"), timeout)
    return lb.proc.poll()


def start_stop_as_pid1():
    """As PID 1 of a PID namespace (a container's init: docker stop's SIGTERM), a stop signal
    while the config loads ends hashlb at once, SIGQUIT as SIGTERM: exit 128 + the signal's
    number, a shell's status for it. The kernel drops a signal whose action is the default
    sent to such a process, and hashlb held SIGTERM, SIGINT and SIGQUIT at their default
    until the daemon took them: they were lost, and it went on to start and run (SIGQUIT's
    handler raised SIGTERM, dropped the same way)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
        lb, pid, go = _paused("open", pid1=True)
        os.kill(pid, sig)
        go()
        rc = _end_or_start(lb)
        want = 128 + (signal.SIGTERM if sig == signal.SIGQUIT else sig)
        print(f"    PID 1, {sig.name} while loading: exit status {rc}")
        check(rc == want, f"PID 1, {sig.name} while the config loads: exit {want}, got {rc} "
                          f"({'it started' if rc is None else 'exited'})")


def stop_as_pid1_once_running():
    """As PID 1 of a PID namespace, hashlb running stops on SIGTERM, SIGINT and SIGQUIT as
    ever: it drains and exits 0 (the daemon reads them from a signalfd, held: none is
    dropped)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
        lb, pid = _hashlb_as_pid1("pid1.yaml")
        rc = _stop_pid1(lb, pid, sig)
        check(rc == 0 and lb.wait_log(f'msg="signal, shutting down" signal={sig.name}', 5),
              f"PID 1, running: {sig.name} drains, exit 0: {rc}")


def _hashlb_as_pid1(fname, sock=None):
    """hashlb run as PID 1 of a PID namespace of its own, its admin endpoint on Unix socket
    <sock> (None: off), started: it and its pid as seen from here."""
    cfg = config(BACKENDS)
    lb = Hashlb(cfg.replace("admin: off", f"admin: unix:{sock}") if sock else cfg, fname=fname,
                wrap=AS_PID1)
    pid = _init_pid(lb.proc)
    check(lb.wait_log("msg=started"), "started")
    return lb, pid


def upgrade_as_pid1_refused():
    """As PID 1 of a PID namespace (a container's init), an upgrade in place is refused, by
    SIGUSR2 (logged) and by hashlb ctl upgrade (exit 1, saying why), and hashlb serves on:
    when a namespace's init exits, the kernel kills everything else in it. Before, the new
    hashlb started, took the sockets over and was killed as the old one, drained, exited 0:
    the upgrade ended the service."""
    sock = tmppath("pid1-admin.sock")
    lb, pid = _hashlb_as_pid1("pid1-upgrade.yaml", sock)
    os.kill(pid, signal.SIGUSR2)
    check(lb.wait_log(r'msg="upgrade refused" reason="this hashlb is PID 1 of its PID '
                      r'namespace .*note="restart the container', 10),
          "SIGUSR2 as PID 1: the upgrade refused, saying why and what to do instead")
    p = subprocess.run([HASHLB, "ctl", "--admin", f"unix:{sock}", "upgrade"],
                       capture_output=True, text=True, timeout=30)
    print(f"    ctl upgrade: exit {p.returncode}: {p.stderr.strip()}")
    check(p.returncode == 1 and "PID 1 of its PID namespace" in p.stderr,
          f"ctl upgrade as PID 1: exit 1, saying why: {p.returncode} {p.stderr!r}")
    check(lb.proc.poll() is None and who(lb.addr) in ("a", "b", "c"), "hashlb serves on")
    rc = _stop_pid1(lb, pid)
    check(rc == 0, f"and stops on SIGTERM as ever, exit 0: {rc}")


# GET /sockets?taker=ITS_PID on a Unix socket, sent from where it runs (a PID namespace),
# printing its pid there, then the answer
ASK_SOCKETS = """
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(sys.argv[1])
s.sendall(b"GET /sockets?taker=%d HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n"
          % os.getpid())
print(os.getpid())
print(s.makefile("rb").read().decode(errors="replace"))
"""


def sockets_to_a_taker_as_pid1_refused():
    """As PID 1 of a PID namespace (a container's init), hashlb refuses to hand its listening
    sockets over (GET /sockets?taker=PID) to a process of that namespace, as it refuses
    SIGUSR2: once it exits, having handed over, the kernel kills everything in the
    namespace, the taker too. A 409 saying why, a warning in its log, and a new hashlb
    asking says why in its own (answer="HTTP/1.1 409 Conflict: cannot hand ...") and binds
    sockets of its own. Before, the sockets were handed over (200, taker=N), this hashlb
    counted as replaced, and the new one died with it."""
    sock = tmppath("pid1-take.sock")
    lb, pid = _hashlb_as_pid1("pid1-take.yaml", sock)
    inside = ["nsenter", "-t", str(pid), "-p", "-m", "--"]
    p = subprocess.run([*inside, sys.executable, "-c", ASK_SOCKETS, sock],
                       capture_output=True, text=True, timeout=60)
    taker, _, answer = p.stdout.partition("\n")
    print(f"    GET /sockets?taker={taker} from the namespace: {answer.splitlines()[:1]}")
    check(p.returncode == 0 and answer.startswith("HTTP/1.1 409 ") and
          f"cannot hand the listening sockets over to pid {taker}: this hashlb is PID 1 of "
          "its PID namespace" in answer, f"refused, saying why: {p.returncode} {p.stdout!r} "
          f"{p.stderr!r}")
    check(lb.wait_log(f'level=warn msg="listening sockets not handed over" taker={taker} '
                      r'reason="this hashlb is PID 1 of its PID namespace .*note="restart '
                      r'the container'), "logged at warn, with what to do instead")
    # a new hashlb in the namespace: told why, it binds sockets of its own
    new = spawn([*inside, HASHLB, "run", "-c", lb.path], stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, text=True)
    said = []
    threading.Thread(target=lambda: said.extend(new.stderr), daemon=True).start()
    told = (r'msg="no listening sockets taken over, binding new ones" from=\S+ '
            r'answer="HTTP/1.1 409 Conflict: cannot hand the listening sockets over to pid \d+: '
            r'this hashlb is PID 1 of its PID namespace')
    end = time.time() + 30
    while time.time() < end and not any(re.search(told, l) for l in said):
        time.sleep(0.05)
    check(any(re.search(told, l) for l in said) and
          not any('msg="listening sockets taken over"' in l for l in said),
          f"the new hashlb says why it takes nothing over: {said[:3]}")
    check(not [l for l in lb.log if 'msg="listening sockets handed over"' in l],
          "nothing handed over")
    rc = _stop_pid1(lb, pid)  # the namespace ends with it, the new hashlb too
    try:
        new.wait(20)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, f"stops on SIGTERM, exit 0: {rc}")


def sigquit_at_first_mask():
    """A SIGQUIT just after hashlb run's first signal mask ends it as SIGTERM does. It set
    SIGQUIT's handler after that mask: there SIGQUIT still took its default action, a core
    dump (killed by signal 3). Now the stop signals are held from the first mask until
    their handlers are set."""
    lb, pid, go = _paused("sigprocmask", wrap=("prlimit", "--core=0", "--"))  # no core left
    os.kill(pid, signal.SIGQUIT)
    go()
    rc = _end_or_start(lb)
    print(f"    SIGQUIT after the first mask: exit status {rc}")
    check(rc == -signal.SIGTERM, f"ended as by SIGTERM ({-signal.SIGTERM}), not killed by "
                                 f"SIGQUIT ({-signal.SIGQUIT}), a core dump: {rc}")


def signals_before_command():
    """A signal between main()'s start and hashlb run's own first statement: held there too.
    They kept their default action until the command's first statement: a SIGHUP (a reload)
    or a SIGUSR1 sent that early killed hashlb run, and as PID 1 of a PID namespace (a
    container's init) the kernel dropped a SIGTERM, and hashlb went on to start and serve.
    Now the SIGHUP reloads once it runs, the SIGUSR1 is logged and ignored, the SIGTERM
    stops it (exit 143 as PID 1). Anything else keeps the mask it inherited: hashlb check,
    --version and --help die of a SIGTERM sent there. Held in main() by start_pause.c ("main")."""
    lb, pid, go = _paused("main")
    os.kill(pid, signal.SIGHUP)
    os.kill(pid, signal.SIGUSR1)
    go()
    check(lb.wait_log("msg=reloaded", 30) and lb.proc.poll() is None,
          f"a SIGHUP in main(): reloaded once running, not killed ({lb.proc.poll()})")
    check(lb.wait_log('msg="SIGUSR1 ignored"', 10),
          f"a SIGUSR1 in main(): logged and ignored once running ({lb.proc.poll()})")
    check(lb.stop(timeout=30) == 0, "exit 0")

    lb, pid, go = _paused("main", pid1=True, fname="paused-pid1.yaml")
    os.kill(pid, signal.SIGTERM)
    go()
    rc = _end_or_start(lb)
    print(f"    PID 1, SIGTERM in main(): exit status {rc}")
    check(rc == 128 + signal.SIGTERM,
          f"PID 1, a SIGTERM in main(): exit 143, got {rc} "
          f"({'it started' if rc is None else 'exited'})")

    # and hashlb --version or --help, held too, exited 0 on it, the SIGTERM left pending
    for args in (["check", "-c", tmpfile("check.yaml", config(BACKENDS))], ["--version"],
                 ["--help"]):
        pause = Paused("main")
        p = spawn([*pause.wrap, HASHLB, *args], pass_fds=pause.pass_fds,
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        check(pause.reached(), f"hashlb {args[0]} reached main()")
        os.kill(p.pid, signal.SIGTERM)
        pause.go()
        rc = p.wait(30)
        check(rc == -signal.SIGTERM,
              f"hashlb {args[0]}: killed by a SIGTERM in main(), as ever: {rc}")


def inherited_ignores_kept():
    """SIGINT and SIGQUIT inherited ignored (a POSIX shell's background job has them so,
    spared a Ctrl-C at its terminal) stay ignored once hashlb runs, as while it started:
    the daemon blocked them for its signalfd, which takes a blocked signal even ignored, and
    stopped. SIGTERM is honoured even inherited ignored, while it starts (where it was
    ignored) as once it runs. SIGHUP, the reload, is no stop: under nohup (inherited
    ignored) it reloads all the same, as nginx and HAProxy do; kill -HUP must not be lost."""
    lb, pid, go = _paused("open", ignore=(signal.SIGINT, signal.SIGQUIT, signal.SIGTERM,
                                          signal.SIGHUP))
    os.kill(pid, signal.SIGINT)
    os.kill(pid, signal.SIGQUIT)
    go()
    check(_end_or_start(lb) is None, f"SIGINT, SIGQUIT ignored while loading: {lb.proc.poll()}")
    os.kill(pid, signal.SIGINT)
    os.kill(pid, signal.SIGQUIT)
    os.kill(pid, signal.SIGUSR1)  # read after them, had they been taken: a higher number
    check(lb.wait_log('msg="SIGUSR1 ignored"'), "SIGUSR1 logged")
    check(lb.proc.poll() is None and not _logged(lb, "shutting down"),
          f"running: SIGINT, SIGQUIT ignored: {lb.proc.poll()} "
          f"{[l for l in lb.log if 'signal' in l]}")
    os.kill(pid, signal.SIGHUP)
    check(lb.wait_log("msg=reloaded", 30) and lb.proc.poll() is None,
          f"SIGHUP inherited ignored (nohup) reloads: {lb.proc.poll()} "
          f"{[l for l in lb.log if 'reload' in l][:3]}")
    check(lb.stop() == 0, "SIGTERM: drained, exit 0")

    lb, pid, go = _paused("open", ignore=(signal.SIGTERM,), fname="paused-term.yaml")
    os.kill(pid, signal.SIGTERM)
    go()
    rc = _end_or_start(lb)
    check(rc == -signal.SIGTERM, f"SIGTERM inherited ignored ends it while it loads: {rc}")


def systemd_notify():
    """With $NOTIFY_SOCKET (a unit with Type=notify), hashlb sends READY=1 from its main pid
    once it accepts connections, RELOADING=1 (with MONOTONIC_USEC) then READY=1 on SIGHUP,
    STOPPING=1 on SIGTERM; an abstract socket ("@name") works too. Without it, nothing."""
    ns = NotifySocket()
    lb = ns.start(config(BACKENDS))
    msg, pid = ns.next()
    check(msg.get("READY") == "1" and pid == lb.proc.pid and
          msg.get("MAINPID") == str(lb.proc.pid),
          f"READY=1 from hashlb's pid {lb.proc.pid}: {msg} from {pid}")
    # its "listening" line came before READY=1; our reader of its log may lag behind
    check(lb.wait_log("msg=listening") and who(lb.addr) in ("a", "b", "c"),
          "serving when it says ready")
    check(msg.get("STATUS") == "listening on 1 address", f"a status line: {msg}")
    lb.proc.send_signal(signal.SIGHUP)
    msg, _ = ns.next()
    check(msg.get("RELOADING") == "1" and msg.get("MONOTONIC_USEC", "").isdigit(),
          f"SIGHUP: RELOADING=1 with MONOTONIC_USEC: {msg}")
    now_us = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    check(0 <= now_us - int(msg.get("MONOTONIC_USEC", 0)) < 60_000_000,
          "MONOTONIC_USEC is CLOCK_MONOTONIC's")
    msg, _ = ns.next()
    check(msg.get("READY") == "1", f"then READY=1: {msg}")
    lb.proc.send_signal(signal.SIGTERM)
    msg, _ = ns.next()
    check(msg.get("STOPPING") == "1", f"SIGTERM: STOPPING=1: {msg}")
    # the drain may outlast the unit's TimeoutStopSec: systemd is asked for its time
    # (timeouts.drain, 30 s by default, and 10 s to exit)
    check(msg.get("EXTEND_TIMEOUT_USEC") == str(40_000_000),
          f"with EXTEND_TIMEOUT_USEC for the drain and the exit: {msg}")
    # counted as every count is said: "1 connection", "0 connections" ("connection(s)"
    # before); the client of who() above may not have been closed yet
    check(re.fullmatch(r"draining (1 connection|(?!1 )\d+ connections), up to 30s",
                       msg.get("STATUS", "")), f"with a STATUS= that counts what it drains: {msg}")
    check(lb.proc.wait(20) == 0, "exit 0")

    ns2 = NotifySocket(abstract=True)
    lb = ns2.start(config(BACKENDS))
    msg, pid = ns2.next()
    check(msg.get("READY") == "1" and pid == lb.proc.pid, f"abstract socket: READY=1: {msg}")
    check(lb.stop() == 0 and ns2.next()[0].get("STOPPING") == "1", "STOPPING=1, exit 0")
    lb = Hashlb(config(BACKENDS))  # no $NOTIFY_SOCKET: runs as ever, sends nothing
    check(who(lb.addr) in ("a", "b", "c") and ns.next(timeout=0.5)[0] == {} and
          ns2.next(timeout=0.1)[0] == {}, "without NOTIFY_SOCKET nothing is sent")
    check(lb.stop() == 0, "exit 0")


def systemd_notify_admin_reload():
    """The unit's `systemctl reload` goes through the admin endpoint (hashlb ctl reload --pid
    $MAINPID): RELOADING=1 (with MONOTONIC_USEC) then READY=1 frame that reload too, applied or
    refused, as they frame a SIGHUP's; before, a reload by the admin endpoint sent neither,
    so the unit's own reload was never one to systemd (its STATUS= never said reloading)."""
    from ctltest import Lb
    ns = NotifySocket(name="notify-admin.sock")
    os.environ["NOTIFY_SOCKET"] = ns.env
    try:
        lb = Lb(config(BACKENDS), args=("--admin", "127.0.0.1:0"))
    finally:
        del os.environ["NOTIFY_SOCKET"]
    msg, pid = ns.next()
    check(msg.get("READY") == "1" and pid == lb.proc.pid, f"READY=1 at start: {msg}")
    for what, text, want in (("applied", config(BACKENDS[:2]), 0),
                             ("refused", "services: [\n", 1)):
        with open(lb.path, "w") as f:
            f.write(text)
        rc, so, se = lb.ctl("reload", "--pid", str(lb.proc.pid))
        check(rc == want, f"the reload is {what}: {rc} {so.strip()} {se.strip()}")
        msg, pid = ns.next()
        check(msg.get("RELOADING") == "1" and msg.get("MONOTONIC_USEC", "").isdigit() and
              pid == lb.proc.pid, f"{what} by the admin endpoint: RELOADING=1 first: {msg}")
        msg, _ = ns.next()
        check(msg.get("READY") == "1" and msg.get("STATUS") == "listening on 1 address",
              f"{what}: then READY=1: {msg}")
    check(lb.stop() == 0 and ns.next()[0].get("STOPPING") == "1", "STOPPING=1, exit 0")


def journal_priorities():
    """Under systemd, stderr is the journal's stream ($JOURNAL_STREAM names its device and
    inode): each line starts with its syslog priority, <6> info, <4> warn, <3> error, which
    journald takes off and keeps as the entry's PRIORITY, so that `journalctl -p warning`
    shows hashlb's warnings and errors (a backend down); before, every line was the stream's
    default, info. Another stderr (a file, a pipe), even with $JOURNAL_STREAM set for
    another (a shell started from a unit), gets the lines as ever. The workers' connection
    lines, which go out through a buffer of each worker's own (log.c), are prefixed too."""
    text = config([("up", BACKENDS[0][1]), ("gone", f"127.0.0.1:{dead_port()}")],
                  extra="log_connections: true")
    text = text.replace("      enabled: false\n", "      interval: 50ms\n      timeout: 40ms\n"
                        "      fall: 2\n")
    path = tmpfile("journal.yaml", text)
    for journal in (True, False):
        log = tmppath(f"journal-{journal}.log")
        with open(log, "w") as err:
            st = os.fstat(err.fileno())
            ino = st.st_ino if journal else st.st_ino + 1
            env = dict(os.environ, JOURNAL_STREAM=f"{st.st_dev}:{ino}")
            p = spawn([HASHLB, "run", "-c", path], stderr=err, env=env)

        def lines():
            with open(log, errors="replace") as f:
                return f.read().splitlines()
        check(wait_until(lambda: any('msg="backend down"' in l for l in lines())),
              f"the dead backend is down: {lines()}")
        addr = re.search(r" msg=listening addr=127\.0\.0\.1:(\d+) ", "\n".join(lines()))
        check(addr is not None, f"its address logged: {lines()}")
        with socket.create_connection(("127.0.0.1", int(addr.group(1))), timeout=10) as c:
            c.shutdown(socket.SHUT_WR)
            c.recv(1)  # the backend's end, or a reset: either ends the connection
        check(wait_until(lambda: any(" msg=connection " in l for l in lines())),
              f"a worker's connection line: {lines()}")
        p.send_signal(signal.SIGTERM)
        check(p.wait(20) == 0, "exit 0")
        want = {"info": "<6>", "warn": "<4>", "error": "<3>"} if journal else {}
        seen = set()
        for line in lines():
            level = re.search(r" level=(\w+) ", line)
            level = level.group(1) if level else None
            seen.add(level)
            prefix = want.get(level, "")
            check(line.startswith(prefix + "ts="),
                  f"journal {journal}: a {level} line starts {prefix or 'ts='}: {line}")
        check(seen >= {"info", "warn", "error"}, f"info, warn and error lines seen: {seen}")


def journal_priorities_of_config_diagnostics():
    """What a unit's hashlb check (ExecStartPre=, ExecReload=) and hashlb run print of a
    config, FILE:LINE:COL: error (or warning): WHAT, is on the journal an error (a warning)
    too, <3> (<4>) before it, so that journalctl -p err says why a start or a reload failed;
    before, those lines were info. Another stderr gets them as ever."""
    warned = config(BACKENDS).replace("    health:\n", "    timeouts: {connect: 5}\n"
                                      "    health:\n")
    broken = warned.replace("scheme: maglev", "scheme: magleb")
    for name, text, kind, rc in (("warned", warned, "warning", 0), ("broken", broken, "error", 1)):
        path = tmpfile(f"journal-{name}.yaml", text)
        for journal in (True, False):
            log = tmppath(f"journal-{name}-{journal}.err")
            with open(log, "w") as err:
                st = os.fstat(err.fileno())
                env = dict(os.environ, JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino + (not journal)}")
                got = subprocess.run([HASHLB, "check", "-q", "-c", path], stderr=err, env=env,
                                     timeout=30).returncode
            with open(log) as f:
                out = f.read()
            prefix = ("<3>" if kind == "error" else "<4>") if journal else ""
            check(got == rc and re.fullmatch(re.escape(prefix + path) + rf":\d+:\d+: {kind}: .*\n",
                                             out),
                  f"hashlb check, journal {journal}: {rc}, {prefix}FILE:LINE:COL: {kind}: {out!r}")
    log = tmppath("journal-run.err")
    with open(log, "w") as err:
        st = os.fstat(err.fileno())
        env = dict(os.environ, JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}")
        got = subprocess.run([HASHLB, "run", "-c", tmppath("journal-broken.yaml")], stderr=err,
                             env=env, timeout=30).returncode
    with open(log) as f:
        out = f.read()
    check(got == 1 and re.match(r"<3>\S+journal-broken\.yaml:\d+:\d+: error: ", out),
          f"hashlb run refused at start, on the journal: <3>FILE:LINE:COL: error: {out!r}")


def journal_priorities_of_ctl():
    """hashlb ctl run by a unit (ExecReload=) writes to the journal's stream too: its errors
    start <3> there, as the daemon's lines do, so that journalctl -p err shows why a
    systemctl reload failed; its notices (a reload sent as SIGHUP, exit 0) start <5>, no
    error. Before, every ctl line was the stream's default, info. Another stderr gets them
    as ever. A reload's refusal, said as the endpoint sent it, is two lines (why, and that
    nothing changed): each is an error (journald reads the prefix of each line; the second,
    "reload refused", was at info)."""
    lb = Hashlb(config([("a", "127.0.0.1:1")]))
    sock = tmppath("journal-ctl-admin.sock")
    refusing = Hashlb(config([("a", "127.0.0.1:1")]).replace("admin: off", f"admin: unix:{sock}"))

    def ctl(kind, argv, journal):
        log = tmppath(f"journal-ctl-{kind}-{journal}.err")
        with open(log, "w") as err:
            st = os.fstat(err.fileno())
            env = dict(os.environ, JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino + (not journal)}")
            got = subprocess.run([HASHLB] + argv, stderr=err, stdout=subprocess.DEVNULL,
                                 env=env, timeout=30).returncode
        with open(log) as f:
            return got, f.read()

    cases = (("error", ["ctl", "--admin", f"127.0.0.1:{dead_port()}", "status"], 1,
              "cannot reach the admin endpoint"),
             ("notice", ["ctl", "-c", lb.path, "--admin", "off", "reload", "--pid",
                         str(lb.proc.pid)], 0, f"sent SIGHUP to pid {lb.proc.pid} instead"))
    for kind, argv, rc, says in cases:
        for journal in (True, False):
            got, out = ctl(kind, argv, journal)
            prefix = ("<3>" if kind == "error" else "<5>") if journal else ""
            check(got == rc and out.startswith(prefix + "hashlb ctl: ") and says in out,
                  f"ctl's {kind}, journal {journal}: exit {rc}, {prefix}hashlb ctl: {says}: "
                  f"{got} {out!r}")
    with open(refusing.path, "a") as f:
        f.write("bogus_key: 1\n")
    for journal in (True, False):
        got, out = ctl("refusal", ["ctl", "--admin", f"unix:{sock}", "reload"], journal)
        lines = out.splitlines()
        check(got == 1 and len(lines) >= 2 and "error: " in lines[0] and
              "reload refused" in out and all(l.startswith("<3>") == journal for l in lines),
              f"a reload's refusal, journal {journal}: exit 1, every line an error there: "
              f"{got} {out!r}")
    check(wait_until(lambda: any(" msg=reloaded " in l for l in lb.log)),
          "the SIGHUP reloaded it")
    check(lb.stop() == 0 and refusing.stop() == 0, "exit 0")


def systemd_unit_verifies():
    """The units `meson install` puts in lib/systemd/system (the service, and the socket that
    can activate it) pass systemd-analyze verify (with the built binary in place of the
    installed one), and the service's ExecStartPre check accepts the demo config."""
    unit = os.path.join(os.environ.get("HASHLB_BUILD_ROOT", "build"), "src", "cli",
                        "hashlb.service")
    with open(unit) as f:
        text = f.read()
    bindir = re.search(r"^ExecStart=(\S+)/hashlb run ", text, re.M)
    check(bindir is not None, "ExecStart runs hashlb run")
    path = tmpfile("hashlb.service", text.replace(bindir.group(1) + "/hashlb", HASHLB))
    src = os.environ.get("HASHLB_SOURCE_ROOT", ".")
    with open(os.path.join(src, "contrib", "systemd", "hashlb.socket")) as f:
        sock = tmpfile("hashlb.socket", f.read())  # beside the service it activates
    p = subprocess.run(["systemd-analyze", "verify", "--man=no", sock, path], capture_output=True,
                       text=True, timeout=60)
    check(p.returncode == 0 and "hashlb." not in p.stderr,
          f"systemd-analyze verify (service and socket): {p.returncode} {p.stderr.strip()}")
    demo = os.path.join(os.environ.get("HASHLB_SOURCE_ROOT", "."), "configs", "demo.yaml")
    p = subprocess.run([HASHLB, "check", "-q", "-c", demo], capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout == "", "ExecStartPre's check -q: silent on success")


def activated(cfg_path, sock, nofile=None, args=()):
    """hashlb run as systemd starts it with socket activation: <sock> as fd 3, LISTEN_FDS=1 and
    LISTEN_PID its own pid (the shell's, which exec makes hashlb's); RLIMIT_NOFILE <nofile>
    (soft and hard) if given; <args> after hashlb run -c PATH."""
    fd = sock.fileno()
    # a small exec'er: the socket moved to fd 3, the variables set for the pid that execs hashlb
    limit = (f"import resource; resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {nofile})); "
             if nofile else "")
    launcher = ("import os, sys; fd = int(sys.argv[1]); fd != 3 and (os.dup2(fd, 3), os.close(fd)); "
                + limit + "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1'); "
                "os.execv(sys.argv[2], sys.argv[2:])")
    p = spawn([sys.executable, "-c", launcher, str(fd), HASHLB, "run", "-c", cfg_path, *args],
              pass_fds=(fd,), stderr=subprocess.PIPE, text=True)
    log = []

    def read():
        for line in p.stderr:
            log.append(line.rstrip("\n"))
    threading.Thread(target=read, daemon=True).start()
    return p, log


def wait_for(log, text, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        if any(text in line for line in log):
            return True
        time.sleep(0.02)
    return False


def serves_on_the_passed_socket(log, port):
    """hashlb (its log <log>) started, serving 127.0.0.1:<port> on the socket passed, which its
    workers share, and on no socket of its own."""
    check(wait_for(log, "msg=started") and
          any(f"addr=127.0.0.1:{port}" in l and "socket=inherited" in l for l in log),
          f"listening on the passed socket: {log[-5:]}")
    check(who(("127.0.0.1", port)) in ("a", "b", "c"), "serves on it")
    ss = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True)
    check(len(ss.stdout.splitlines()) == 1, f"one listening socket on the port, the passed one "
                                            f"(two workers share it):\n{ss.stdout}")


def sigusr2_new_pid(p, log):
    """SIGUSR2 to hashlb <p> (its log <log>): the new process's pid, once its upgrade in place
    is logged; None if it is not."""
    p.send_signal(signal.SIGUSR2)
    check(wait_for(log, 'msg="upgraded: '), f"SIGUSR2: upgraded in place: {log[-5:]}")
    m = next((re.search(r'msg="upgraded: .* pid=(\d+)', l) for l in log if "upgraded:" in l), None)
    return int(m.group(1)) if m else None


def upgraded_pid(p, log, port):
    """hashlb <p> (its log <log>) started on the passed socket of 127.0.0.1:<port>, upgraded in
    place (SIGUSR2): the new process's pid (None if it is not logged), the old one exited 0."""
    serves_on_the_passed_socket(log, port)
    new_pid = sigusr2_new_pid(p, log)
    check(p.wait(20) == 0 and new_pid, "the old one exited 0, the new one's pid logged")
    return new_pid


def new_one_stops(pid):
    """SIGTERM to an upgrade's new process <pid> (not our child): it stops."""
    pidfd = os.pidfd_open(pid)
    os.kill(pid, signal.SIGTERM)
    check(select.select([pidfd], [], [], 20)[0], "the new one stops on SIGTERM")
    os.close(pidfd)


def upgraded_in_place_on_the_passed_socket(p, log, lsock, port):
    """hashlb <p> (its log <log>), serving 127.0.0.1:<port> on the passed socket <lsock>,
    upgraded in place (SIGUSR2): the new process serves on that very socket, then stops."""
    # An upgrade in place hands the service manager's socket on too: the manager does not
    # start the new process, so it would otherwise get no LISTEN_FDS.
    new_pid = sigusr2_new_pid(p, log)
    try:
        check(p.wait(20) == 0, "the old one exited 0")
        check(any('msg="listening sockets taken over" count=2' in l for l in log),
              "the new one took the socket over (a descriptor per worker, as the old one "
              f"shared it): {[l for l in log if 'taken' in l]}")
        ino = str(os.fstat(lsock.fileno()).st_ino)
        check(ino in socket_inodes(new_pid),
              f"the new one listens on the passed socket itself (socket:[{ino}])")
        check(who(("127.0.0.1", port)) in ("a", "b", "c"), "and serves on it")
    finally:
        if new_pid:
            new_one_stops(new_pid)


def u_added_refused(p, log, path, listen, what):
    """Append service u on <listen> to config <path>, reload hashlb <p> (its log <log>): the
    reload is refused, another process listening at <listen>."""
    with open(path, "a") as f:
        f.write(f"  - name: u\n    listen: {listen}\n    backends:\n"
                f"      - name: a\n        address: {BACKENDS[0][1]}\n")
    p.send_signal(signal.SIGHUP)
    check(wait_for(log, "msg=\"reload failed") and
          any(listen in l and "another process listens there" in l for l in log),
          f"{what}: {log[-3:]}")


def socket_activation():
    """systemd socket activation: hashlb serves on the listening socket it is passed (LISTEN_FDS),
    shared by its workers, and binds none of its own, so a client that connects while hashlb
    restarts waits in that socket's backlog and the next hashlb serves it; an upgrade in place
    (SIGUSR2) hands that very socket to the new process. A passed socket no service listens on
    is reported; one that is not a listening TCP socket is refused at start."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    port = lsock.getsockname()[1]
    path = tmpfile("activated.yaml", config(BACKENDS, listen=f"127.0.0.1:{port}"))
    p, log = activated(path, lsock)
    serves_on_the_passed_socket(log, port)
    p.send_signal(signal.SIGTERM)
    check(p.wait(20) == 0, "stopped: exit 0")
    waiting = connect(("127.0.0.1", port), "127.0.0.9")  # nobody accepts now: the backlog holds it
    p, log = activated(path, lsock)
    check(read_line(waiting) in ("a", "b", "c"),
          "a client that connected while hashlb was down is served by the next one")
    waiting.close()
    upgraded_in_place_on_the_passed_socket(p, log, lsock, port)

    other = tmpfile("other.yaml", config(BACKENDS, listen="127.0.0.1:0"))
    p, log = activated(other, lsock)
    check(wait_for(log, "socket from the service manager matches no service") and
          any(f"addr=127.0.0.1:{port}" in l for l in log if "matches no service" in l),
          f"a passed socket no service uses is reported: {log}")
    # with what it does to clients and what to do: they connect (the socket listens) and
    # wait, never served; before, the line said neither
    check(any('note="clients that connect there wait in its backlog, never served: remove '
              "it from the socket unit (ListenStream=), or add a service listening there "
              '(a reload takes it)"' in l for l in log if "matches no service" in l),
          f"and says what it means and what to do: {log}")
    # it is hashlb's own on 127.0.0.1:P, not on 127.0.0.2:P: a reload adding a service there,
    # where another process listens, is refused (it was allowed, the port being the passed
    # socket's, and the service split that process's clients)
    beside = socket.socket()
    beside.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    beside.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    beside.bind(("127.0.0.2", port))
    beside.listen(8)
    u_added_refused(p, log, other, f"127.0.0.2:{port}",
                    "a reload onto another process's 127.0.0.2:P is refused")
    beside.close()
    p.send_signal(signal.SIGTERM)
    check(p.wait(20) == 0, "exit 0")

    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    p, log = activated(path, udp)
    check(p.wait(20) != 0 and wait_for(log, "fd 3 from the service manager is not a listening TCP"),
          f"a datagram socket is refused, naming it: {log}")
    udp.close()
    lsock.close()


def upgraded_stop_leaves_the_managers_backlog():
    """The stop of a process an upgrade in place started leaves the clients waiting in the
    service manager's socket's backlog there, for the next start, as the stop of the process
    the manager started does (docs/operations.md): that socket stays inherited through the
    upgrade. Before, the new process took it as a socket taken over only, and its stop served
    that backlog (greeted, then cut at the drain deadline) as if the socket were its own."""
    lsock = socket.create_server(("127.0.0.1", 0), backlog=64)
    port = lsock.getsockname()[1]
    path = tmpfile("activated-backlog.yaml",
                   config(BACKENDS[:1], listen=f"127.0.0.1:{port}", workers=1,
                          extra="timeouts:\n  drain: 1s"))
    p, log = activated(path, lsock, args=("--max-connections", "1"))
    new_pid, socks = None, []
    try:
        new_pid = upgraded_pid(p, log, port)
        if not new_pid:
            return
        n = 6
        socks = connecting(("127.0.0.1", port), n, 8300)
        # one served (the cap, kept by the upgrade; the accept under way as it was reached may
        # pass it by one), the others wait in the backlog
        first = greetings(socks[:1])
        check(first == [b"a\n"], f"the first client is served: {first}")
        _, writable, _ = select.select([], socks, [], 10)
        check(len(writable) == n, f"all {n} connected: {len(writable)}")
        check(wait_for(log, "connection cap reached"), f"accepts paused at the cap: {log[-3:]}")
        new_one_stops(new_pid)  # those it holds cut at the drain deadline
        m = next((re.search(r"msg=draining connections=(\d+)", l) for l in log
                  if "msg=draining" in l and f"self_pid={new_pid}" in l), None)
        new_pid = None
        held = int(m.group(1)) - 1 if m else n  # beside the first
        check(0 <= held < n - 1, f"the stop found clients in the backlog: {held} of {n - 1} held")
        # it has exited: what it sent them is there to read by now
        readable, _, _ = select.select(socks[1:], [], [], 0)
        check(len(readable) == held,
              f"the stop leaves the clients in the manager's socket's backlog: {len(readable)} "
              f"greeted, reset or closed, {held} of them its own before the stop")
        waiting = [s for s in socks[1:] if s not in readable]
        plain = tmpfile("activated-backlog-next.yaml",
                        config(BACKENDS[:1], listen=f"127.0.0.1:{port}", workers=1))
        p, log = activated(plain, lsock)
        got = greetings(waiting)
        check(got == [b"a\n"] * len(waiting), f"the next start serves each of them: {got}")
    finally:
        for s in socks:
            s.close()
        upgraded_one_stops(p, new_pid, lsock)


def passed_socket_removed_and_added_back_after_an_upgrade():
    """After an upgrade in place handed the service manager's socket on, a reload that removes
    its address and a later one that adds it back listen on that very socket again, as without
    the upgrade: the new process keeps it while unused, as it keeps a socket the manager passed
    it. Before, it closed its last copy with the service: the manager's socket, still bound
    there (no SO_REUSEPORT), refused the one the second reload bound ("another process listens
    there"), and the service could not come back short of a restart."""
    lsock = socket.create_server(("127.0.0.1", 0), backlog=64)
    port = lsock.getsockname()[1]
    web = config(BACKENDS, name="web", listen=f"127.0.0.1:{port}")
    other = config(BACKENDS, name="other").split("services:\n", 1)[1]
    path = tmpfile("activated-back.yaml", web + other)
    p, log = activated(path, lsock)
    new_pid = None
    try:
        new_pid = upgraded_pid(p, log, port)
        if not new_pid:
            return
        for text, what in ((web.split("services:\n", 1)[0] + "services:\n" + other,
                            "web removed"), (web + other, "web added back")):
            reloaded_to(new_pid, log, path, text, what)
        serves_on_the_managers_socket(new_pid, lsock, port, "web serves again")
    finally:
        upgraded_one_stops(p, new_pid, lsock)


def socket_copies(pid, sock):
    """How many descriptors of process <pid> are socket <sock> (/proc/PID/fd)."""
    ino = os.fstat(sock.fileno()).st_ino
    return sum(os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{ino}]"
               for fd in os.listdir(f"/proc/{pid}/fd"))


def passed_socket_kept_by_an_upgrade_that_adds_workers():
    """An upgrade in place to more workers than the old process had, with a service on the
    service manager's socket: each new worker accepts on that socket, a descriptor of it each,
    as the process the manager started would. Before, the new process took the copies the old
    one handed on (one a worker, two at least) and bound a socket of its own for each worker
    more, which the manager's socket, bound there without SO_REUSEPORT, refused ("another
    process listens there"): the upgrade failed, the old process serving on."""
    for old, new in ((1, 3), (2, 4)):
        lsock = socket.create_server(("127.0.0.1", 0), backlog=64)
        port = lsock.getsockname()[1]
        text = config(BACKENDS, name="web", listen=f"127.0.0.1:{port}", workers=old)
        path = tmpfile(f"activated-workers-{old}.yaml", text)
        p, log = activated(path, lsock)
        new_pid = None
        try:
            serves_on_the_passed_socket(log, port)
            with open(path, "w") as f:
                f.write(text.replace(f"workers: {old}", f"workers: {new}"))
            new_pid = sigusr2_new_pid(p, log)
            if not new_pid:  # the old one serves on
                check(False, f"workers {old} to {new}: upgraded: "
                             f"{[l for l in log if 'error' in l][-2:]}")
                continue
            check(p.wait(20) == 0, f"workers {old} to {new}: the old one exited 0")
            copies = socket_copies(new_pid, lsock)
            check(copies >= new, f"workers {old} to {new}: a descriptor of the manager's "
                                 f"socket for each worker: {copies}")
            serves_on_the_managers_socket(new_pid, lsock, port, f"workers {new} serve")
        finally:
            upgraded_one_stops(p, new_pid, lsock)


def reloaded_to(pid, log, path, text, what):
    """Config <path> rewritten as <text>, hashlb <pid> (its log <log>) reloaded: it says so."""
    with open(path, "w") as f:
        f.write(text)
    n = sum("msg=reloaded" in l for l in log)
    os.kill(pid, signal.SIGHUP)
    end = time.time() + 20
    while (time.time() < end and sum("msg=reloaded" in l for l in log) == n and
           not any("reload failed" in l for l in log)):
        time.sleep(0.05)
    check(sum("msg=reloaded" in l for l in log) > n,
          f"{what}: reloaded: {[l for l in log if 'reload' in l][-2:]}")


def serves_on_the_managers_socket(pid, lsock, port, what):
    """hashlb <pid> serves 127.0.0.1:<port> on the service manager's socket <lsock> itself, the
    one socket listening on the port."""
    check(who(("127.0.0.1", port)) in ("a", "b", "c"), what)
    ino = str(os.fstat(lsock.fileno()).st_ino)
    check(ino in socket_inodes(pid), f"on the manager's socket itself (socket:[{ino}])")
    ss = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True)
    check(len(ss.stdout.splitlines()) == 1,
          f"one listening socket on the port, the manager's:\n{ss.stdout}")


def upgraded_one_stops(p, new_pid, lsock):
    """The end of a test of hashlb <p> upgraded in place: the new process <new_pid> (None: there
    is none, <p> is stopped if it runs) stops; the manager's socket <lsock> closed."""
    if new_pid:
        new_one_stops(new_pid)
    elif p.poll() is None:
        p.send_signal(signal.SIGTERM)
        p.wait(20)
    lsock.close()


def passed_socket_unused_then_added_after_an_upgrade():
    """A socket the service manager passed that no service listens on is handed on by an upgrade
    in place too, and a reload of the new process that adds a service at its address listens on
    it, as one of the process the manager started would. Before, only the sockets of services
    were handed on: the new process had none there, the manager's socket still bound there (no
    SO_REUSEPORT) refused the one that reload bound ("another process listens there"), and the
    service could not be added short of a restart."""
    lsock = socket.create_server(("127.0.0.1", 0), backlog=64)
    port = lsock.getsockname()[1]
    other = config(BACKENDS, name="other")
    web = config(BACKENDS, name="web", listen=f"127.0.0.1:{port}").split("services:\n", 1)[1]
    path = tmpfile("activated-unused.yaml", other)
    p, log = activated(path, lsock)
    new_pid = None
    try:
        check(wait_for(log, "socket from the service manager matches no service"),
              f"started, the passed socket unused: {log[-3:]}")
        new_pid = sigusr2_new_pid(p, log)
        check(p.wait(20) == 0 and new_pid, "the old one exited 0, the new one's pid logged")
        if not new_pid:
            return
        copies = socket_copies(new_pid, lsock)
        check(copies == 1, f"the new one holds the manager's socket, unused, once (it came "
                           f"twice): {copies} descriptors of it")
        reloaded_to(new_pid, log, path, other + web, "web added")
        check(any(f"addr=127.0.0.1:{port}" in l and "socket=inherited" in l for l in log),
              f"web listens on the passed socket: {[l for l in log if 'listening' in l][-2:]}")
        serves_on_the_managers_socket(new_pid, lsock, port, "web serves")
    finally:
        upgraded_one_stops(p, new_pid, lsock)


def _cap(log, pid=None):
    """The connection cap the last "connection cap" line of <log> gives (of process <pid> if
    given), None if there is none."""
    lines = [l for l in log if 'msg="connection cap"' in l and
             (pid is None or f"self_pid={pid}" in l)]
    m = re.search(r"max_connections=(\d+) ", lines[-1] if lines else "")
    return int(m.group(1)) if m else None


def passed_socket_held_off_the_connection_cap():
    """A socket the service manager passed is a descriptor hashlb holds, used or not, and after
    an upgrade in place the new process holds one copy of it: each comes off the connection cap
    the fd limit allows, as a health check's socket does, so that at the cap a worker still has
    a descriptor for a client's backend. Before, neither was counted."""
    lsock = socket.create_server(("127.0.0.1", 0), backlog=64)
    text = config(BACKENDS, name="other")
    lb = Hashlb(text, nofile=4000, fname="cap-alone.yaml")
    alone = _cap(lb.log)
    lb.stop()
    p, log = activated(tmpfile("cap-passed.yaml", text), lsock, nofile=4000)
    new_pid = None
    try:
        check(wait_for(log, "socket from the service manager matches no service"),
              f"started, the passed socket unused: {log[-3:]}")
        # 2 workers' listener sockets take 3 connections off ((3 * 2 + 1) / 2); with one
        # descriptor more, 4 ((3 * 2 + 1 + 1) / 2)
        check(alone and _cap(log) == alone - 1,
              f"the passed socket comes off the cap: {_cap(log)}, {alone} without it")
        new_pid = sigusr2_new_pid(p, log)
        check(p.wait(20) == 0 and new_pid, "the old one exited 0, the new one's pid logged")
        # the new process's line (its self_pid): the old one's says the same cap
        check(new_pid and wait_until(lambda: _cap(log, new_pid) == alone - 1),
              f"after an upgrade in place, the one copy the new process keeps does: "
              f"{_cap(log, new_pid)}")
    finally:
        upgraded_one_stops(p, new_pid, lsock)


def passed_socket_in_the_other_family_is_used():
    """A socket the service manager passed on [::ffff:127.0.0.1]:P (ListenStream= written as
    IPv6) is the one a service on 127.0.0.1:P listens on: the kernel's one address. hashlb
    serves on it and binds none of its own. Before, it took it for another address, bound its
    own 127.0.0.1:P beside it, which the passed socket refused (no SO_REUSEPORT), and the start
    failed, "another process listens there", about its own socket."""
    lsock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    lsock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    lsock.bind(("::ffff:127.0.0.1", 0))
    lsock.listen(64)
    port = lsock.getsockname()[1]
    path = tmpfile("passed-mapped.yaml", config(BACKENDS, listen=f"127.0.0.1:{port}"))
    p, log = activated(path, lsock)
    try:
        serves_on_the_passed_socket(log, port)
        # the new process reads the socket's address as the kernel gives it, [::ffff:...]
        upgraded_in_place_on_the_passed_socket(p, log, lsock, port)
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            check(p.wait(20) == 0, "exit 0")
        lsock.close()


def passed_socket_refusing_a_wildcard_says_so():
    """A socket the service manager passed on 127.0.0.1:P (no SO_REUSEPORT: a .socket unit's
    default) refuses hashlb's own bind of 0.0.0.0:P, which its config listens on: the start is
    refused naming that socket, hashlb's own, and what lets the bind beside it. Before, it said
    "no other process listens there: connections hold port P", sending the operator to ss for
    connections that were not the cause."""
    lsock = socket.create_server(("127.0.0.1", 0), backlog=64)
    port = lsock.getsockname()[1]
    path = tmpfile("passed-wild.yaml", config(BACKENDS, listen=f"0.0.0.0:{port}"))
    p, log = activated(path, lsock)
    try:
        check(p.wait(20) == 1, f"exit 1: {p.returncode}")
        check(wait_for(log, f"cannot listen on 0.0.0.0:{port}: Address already in use "
                            f"(hashlb's own socket on 127.0.0.1:{port}, which the service "
                            f"manager passed, has no SO_REUSEPORT: ReusePort=yes in its "
                            f".socket unit)"),
              f"the passed socket named: {log[-3:]}")
        check(not any("connections hold port" in l or "another process" in l for l in log),
              f"neither connections nor another process blamed: {log[-3:]}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        lsock.close()


def passed_socket_outlives_a_worker_failure_after_an_upgrade(workers=2):
    """The service manager's socket, handed on by an upgrade in place (a descriptor per worker
    of the new process), still listens once a worker of the new process has failed (its
    io_uring_enter() made to return EBADR by gdb) and that process has exited 1: a client
    connecting then waits in its backlog for the restart, as without the upgrade
    (inherited_listener_outlives_failure in test_worker_fail.py). Before, the failed worker
    shut the socket down as its own: the manager's socket stopped listening, and the
    restarted hashlb refused it ("not a listening TCP socket")."""
    from gdbfail import inject, unusable, worker_tid
    why = unusable()
    if why:
        raise Skip(why)
    lsock = socket.create_server(("127.0.0.1", 0), backlog=64)
    port = lsock.getsockname()[1]
    path = tmpfile("activated-fail.yaml", config(BACKENDS, workers=workers,
                                                 listen=f"127.0.0.1:{port}"))
    p, log = activated(path, lsock)
    new_pid, waiting = None, None
    try:
        serves_on_the_passed_socket(log, port)
        new_pid = sigusr2_new_pid(p, log)
        check(p.wait(20) == 0, "the old one exited 0")
        if not check(new_pid, "the new one's pid is logged"):
            return
        pidfd = os.pidfd_open(new_pid)
        tid = worker_tid(new_pid, 0)
        ok, out = inject(new_pid, tid) if tid else (False, "no thread hlb-worker0")
        if check(ok, f"gdb made worker 0 of the new one fail: {out}"):
            check(select.select([pidfd], [], [], 60)[0], "the new one exits (a hang guard)")
            new_pid = None
            check(wait_for(log, 'msg="worker failed: its connections reset"'),
                  "the new one's worker 0 failed")
        os.close(pidfd)
        check(lsock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1,
              "the manager's socket still listens")
        try:
            waiting = socket.create_connection(("127.0.0.1", port), timeout=30)
        except ConnectionRefusedError:
            pass
        check(waiting is not None, "a client waits in its backlog for the next hashlb")
    finally:
        if waiting:
            waiting.close()
        if new_pid:
            os.kill(new_pid, signal.SIGTERM)
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.wait(20)
        lsock.close()


def passed_socket_of_one_worker_outlives_a_worker_failure_after_an_upgrade():
    """As passed_socket_outlives_a_worker_failure_after_an_upgrade, with workers: 1: the old
    process had a single descriptor of the manager's socket to hand on, and the new one could
    not tell it from a socket of the old one's own (no two descriptors of one socket), so its
    failed worker shut the manager's socket down. The old one now hands that socket on twice."""
    passed_socket_outlives_a_worker_failure_after_an_upgrade(workers=1)


def passed_socket_beside_another_process_in_the_other_family():
    """A socket the service manager passed on 127.0.0.1:P that no service uses yet is
    hashlb's own there, but not another process's socket on the same address written as
    IPv6, [::ffff:127.0.0.1]:P (SO_REUSEPORT: the kernel lets it beside the passed one and
    splits the clients between them): a reload adding a service on 127.0.0.1:P is refused,
    "another process listens there", and taken once that process is gone, the service then
    serving on the passed socket. Before, only IPv4 sockets were looked at for an IPv4
    address (sock_diag lists a socket in its own family only): the reload was taken and the
    service shared its clients with that process."""
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    port = lsock.getsockname()[1]
    other = tmpfile("passed-beside.yaml", config(BACKENDS, listen="127.0.0.1:0"))
    p, log = activated(other, lsock)
    check(wait_for(log, "socket from the service manager matches no service"),
          f"the passed socket is held, unused: {log}")
    beside = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    beside.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    beside.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    beside.bind(("::ffff:127.0.0.1", port))
    beside.listen(8)
    u_added_refused(p, log, other, f"127.0.0.1:{port}",
                    "a reload beside another process's [::ffff:127.0.0.1]:P is refused")
    beside.close()
    p.send_signal(signal.SIGHUP)
    check(wait_for(log, "msg=reloaded") and
          any(f"addr=127.0.0.1:{port}" in l and "socket=inherited" in l for l in log),
          f"taken once that process is gone, on the passed socket: {log[-5:]}")
    check(who(("127.0.0.1", port)) == "a", "and u serves there")
    p.send_signal(signal.SIGTERM)
    check(p.wait(20) == 0, "exit 0")
    lsock.close()


def activated_socket_share_error_says_where():
    """A passed socket its workers cannot share (a descriptor each: none left under the fd limit)
    refuses the start naming the service and the address, as a bind that fails does
    (83fd619); it said "cannot listen on web: ...", the service's name where the address is."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    port = lsock.getsockname()[1]
    workers = 64
    path = tmpfile("activated-nofile.yaml",
                   config(BACKENDS, name="web", workers=workers, listen=f"127.0.0.1:{port}"))
    # the workers' rings and eventfds (about 2 a worker) fit, a copy of the socket for each
    # does not: about 30 descriptors of margin either way
    p, log = activated(path, lsock, nofile=2 * workers + workers // 2 + 10)
    check(p.wait(20) != 0, "the start is refused")
    check(wait_for(log, f"service 'web': cannot listen on 127.0.0.1:{port}: Too many open files"),
          f"the error names the service and the address: {log[-3:]}")
    lsock.close()


run_tests([config_error_refused, listen_bind_error_says_why,
           passed_socket_beside_another_process_in_the_other_family,
           passed_socket_in_the_other_family_is_used,
           passed_socket_refusing_a_wildcard_says_so,
           passed_socket_removed_and_added_back_after_an_upgrade,
           passed_socket_unused_then_added_after_an_upgrade,
           passed_socket_kept_by_an_upgrade_that_adds_workers,
           passed_socket_held_off_the_connection_cap,
           passed_socket_outlives_a_worker_failure_after_an_upgrade,
           passed_socket_of_one_worker_outlives_a_worker_failure_after_an_upgrade,
           listen_permission_error_says_what_to_do, second_instance_on_a_listen_address_warned,
           another_process_reuseport_program_left_alone,
           admin_option_clash_refused,
           default_admin_address_free_with_admin_option, admin_bind_error_placed,
           admin_bind_beside_a_connection_says_so, sigterm_drain,
           stop_serves_the_backlog, drain_timeout,
           drain_end_logged,
           drain_deadline_resets_the_unserved,
           each_service_drains_to_its_own_timeout, second_signal, sigusr1_cuts_nothing, sigquit_drains,
           second_signal_after_an_upgrade,
           reload_keeps_listeners_and_connections, early_signals,
           early_sigquit_stops_as_sigterm, start_stop_as_pid1, stop_as_pid1_once_running,
           upgrade_as_pid1_refused, sockets_to_a_taker_as_pid1_refused,
           sigquit_at_first_mask, signals_before_command, inherited_ignores_kept, systemd_notify,
           systemd_notify_admin_reload, journal_priorities,
           journal_priorities_of_config_diagnostics, journal_priorities_of_ctl,
           systemd_unit_verifies,
           socket_activation, upgraded_stop_leaves_the_managers_backlog,
           activated_socket_share_error_says_where,
           odd_config_path_logged_as_logfmt, started_line_names_the_version,
           long_config_path_logged_whole])
