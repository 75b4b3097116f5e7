#!/usr/bin/env python3
"""source: client (transparent backend connections), with real processes: each backend
connection leaves from the client's own address, so the backend sees the client and not
hashlb. On loopback (every 127/8 address is local) and across network namespaces this test
creates: client, hashlb and a backend on two links, where the client's address is not one of
hashlb's host and the backend routes its replies back through it (policy routing on hashlb's
side delivers them locally, as for any transparent proxy). Bytes pass both ways; without
the setting the backend sees hashlb's address; an IPv6 client of an IPv4 backend is refused
with EAFNOSUPPORT rather than sent from another address."""
import os
import re
import shutil
import socket
import subprocess
import sys

from lbtest import (BACKEND, HASHLB, Hashlb, check, client_ip, config, connect, outcome,
                    read_line, run_tests, spawn)

def start_peer_server(host, prefix=()):
    """A backend that greets each connection with the address it sees, then echoes."""
    p = spawn([*prefix, sys.executable, BACKEND, "--name", "@peer", "--host", host],
              stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    if len(line) != 3 or line[0] != "ready":
        raise SystemExit(f"peer server did not start: {line}")
    return p, int(line[2].rsplit(":", 1)[1])


def stop_proc(p):
    if p.poll() is None:
        p.kill()
        p.wait(5)


def clean_up(procs, namespaces):
    """Stop <procs> and delete <namespaces>, however the test ended."""
    for p in procs:
        stop_proc(p)
    for ns in namespaces:
        sh("ip", "netns", "del", ns, check_rc=False)


def echo_roundtrip(s, data):
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        d = s.recv(65536)
        if not d:
            break
        got += d
    return got == data


def loopback():
    """On loopback: each backend connection comes from its client's address; bytes pass both
    ways; without source: client, the backend sees hashlb's own address."""
    srv, port = start_peer_server("127.0.0.1")
    backends = [("a", f"127.0.0.1:{port}")]
    lb = Hashlb(config(backends, extra="source: client\nlog_connections: true"))
    clients = [client_ip(i * 7919 + 11) for i in range(20)]
    seen = {}
    for c in clients:
        s = connect(lb.addr, c)
        seen[c] = read_line(s)
        if not echo_roundtrip(s, os.urandom(100000)):
            seen[c] += " (echo broken)"
        s.close()
    wrong = {c: v for c, v in seen.items() if v != c}
    check(not wrong, f"the backend sees each client's own address: {list(wrong.items())[:3]}")
    check(lb.stop() == 0, "exit 0")

    plain = Hashlb(config(backends))
    s = connect(plain.addr, clients[0])
    got = read_line(s)
    s.close()
    check(got == "127.0.0.1", f"without source: client the backend sees hashlb: {got}")
    check(plain.stop() == 0, "exit 0")

    # An IPv6 client of an IPv4 backend: no address of its own there. Refused, logged. (A
    # dual-stack listener: one of IPv6 alone would refuse the IPv4 backend as it loads.)
    six = Hashlb(config(backends, extra="source: client\nlog_connections: true",
                        listen='"[::]:0"'))
    s = connect(("::1", six.addr[1]))
    got = outcome(s)
    s.close()
    check(got == (0, "RST"), f"an IPv6 client of an IPv4 backend is reset, unserved: {got}")
    check(six.wait_log(r"msg=connection .*end=error .*err=EAFNOSUPPORT"),
          "logged as hashlb's own error (end=error err=EAFNOSUPPORT), not as a service without "
          f"a backend: {[l for l in six.log if 'msg=connection' in l]}")
    check(six.stop() == 0, "exit 0")
    stop_proc(srv)


def sh(*args, ns=None, check_rc=True):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check_rc and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return p


NETS = {  # family: (client addresses, hashlb's client side, hashlb's backend side, backend)
    4: (["10.213.1.2", "10.213.1.3"], "10.213.1.1", "10.213.2.1", "10.213.2.2"),
    6: (["fd13:1::2", "fd13:1::3"], "fd13:1::1", "fd13:2::1", "fd13:2::2"),
}


def namespaces():
    """Client 10.213.1.2 and .3 | hashlb 10.213.1.1 and 10.213.2.1 | backend 10.213.2.2 (and
    the same in IPv6, fd13:1::/64 and fd13:2::/64), the backend's default route through
    hashlb's host, which delivers what comes back from the backend's link locally (ip rule
    iif ... lookup 100; local 0.0.0.0/0 and ::/0 in table 100). IPv4 and IPv6."""
    pre = f"hlbtp{os.getpid() % 100000}-"
    c, lbns, b = pre + "c", pre + "lb", pre + "b"
    made = []
    procs = []
    try:
        for ns in (c, lbns, b):
            sh("ip", "netns", "add", ns)
            made.append(ns)
        sh("ip", "-n", lbns, "link", "add", "ethc", "type", "veth", "peer", "name", "eth0",
           "netns", c)
        sh("ip", "-n", lbns, "link", "add", "ethb", "type", "veth", "peer", "name", "eth0",
           "netns", b)
        for fam, (clients, lb_c, lb_b, be) in NETS.items():
            plen = "/24" if fam == 4 else "/64"
            for ns, dev, addrs in ((c, "eth0", clients), (lbns, "ethc", [lb_c]),
                                   (lbns, "ethb", [lb_b]), (b, "eth0", [be])):
                for a in addrs:
                    sh("ip", "-n", ns, "addr", "add", a + plen, "dev", dev,
                       *(["nodad"] if fam == 6 else []))
        for ns, dev in ((c, "eth0"), (lbns, "ethc"), (lbns, "ethb"), (b, "eth0")):
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        for fam, (_, lb_c, lb_b, _) in NETS.items():
            sh("ip", f"-{fam}", "-n", c, "route", "add", "default", "via", lb_c)
            sh("ip", f"-{fam}", "-n", b, "route", "add", "default", "via", lb_b)
            sh("ip", f"-{fam}", "-n", lbns, "rule", "add", "iif", "ethb", "lookup", "100")
            sh("ip", f"-{fam}", "-n", lbns, "route", "add", "local",
               "0.0.0.0/0" if fam == 4 else "::/0", "dev", "lo", "table", "100")

        for fam, (clients, lb_c, lb_b, be) in NETS.items():
            srv, port = start_peer_server(be, prefix=("ip", "netns", "exec", b))
            procs.append(srv)
            host = lb_c if fam == 4 else f"[{lb_c}]"
            # a plain connection first: it fills the neighbour caches of the new links
            # (IPv6: with them cold, the first transparent connect sometimes waited out
            # the 1 s connect timeout, see the closing note of session 8)
            for transparent in (False, True):
                extra = "source: client" if transparent else ""
                back = f"{be}:{port}" if fam == 4 else f'"[{be}]:{port}"'
                lb = Hashlb(config([("b", back)], extra=extra + "\nlog_connections: true",
                                   listen=f'"{host}:0"'),
                            wrap=("ip", "netns", "exec", lbns))
                lport = lb.addr[1]
                af = "socket.AF_INET" if fam == 4 else "socket.AF_INET6"
                client = (
                    "import socket, os, sys\n"
                    f"for src in {clients!r}:\n"
                    f"    s = socket.socket({af}); s.settimeout(5); s.bind((src, 0))\n"
                    f"    s.connect(('{lb_c}', {lport}))\n"
                    "    f = s.makefile('rb'); seen = f.readline().decode().strip()\n"
                    "    data = os.urandom(200000); s.sendall(data); got = b''\n"
                    "    while len(got) < len(data):\n"
                    "        d = s.recv(65536)\n"
                    "        if not d: break\n"
                    "        got += d\n"
                    "    print(src, seen, got == data, flush=True); s.close()\n")
                out = sh(sys.executable, "-c", client, ns=c, check_rc=False)
                rows = [l.split() for l in out.stdout.splitlines()]
                want = [[cl, cl if transparent else lb_b, "True"] for cl in clients]
                check(rows == want,
                      f"IPv{fam}, {'source: client' if transparent else 'no source'}: the "
                      f"backend sees {'each client' if transparent else 'hashlb'}, bytes "
                      f"intact: {rows} {out.stderr.strip()[-300:]}")
                check(lb.stop() == 0, "exit 0")
    finally:
        clean_up(procs, made)


def dual_stack_listener():
    """A listener on [::] takes IPv4 clients too, also where net.ipv6.bindv6only=1 makes
    new IPv6 sockets IPv6-only (the config's clash check and the docs count on it): in a
    namespace of its own with that setting, an IPv4 client is served through [::]. So does
    an admin endpoint on [::]: hashlb ctl -a 127.0.0.1:PORT reaches it (it was refused: the
    endpoint was IPv6-only there, while the clash check took it to cover 127.0.0.1:PORT)."""
    ns = f"hlbds{os.getpid() % 100000}"
    sh("ip", "netns", "add", ns)
    srv = None
    try:
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("sysctl", "-q", "-w", "net.ipv6.bindv6only=1", ns=ns)
        srv, port = start_peer_server("127.0.0.1", prefix=("ip", "netns", "exec", ns))
        lb = Hashlb(config([("b", f"127.0.0.1:{port}")], listen='"[::]:0"').replace(
                        "admin: off", 'admin: "[::]:0"'), wrap=("ip", "netns", "exec", ns))
        client = ("import socket\n"
                  f"s = socket.create_connection(('127.0.0.1', {lb.addr[1]}), timeout=5)\n"
                  "print(s.makefile('rb').readline().decode().strip())\n")
        out = sh(sys.executable, "-c", client, ns=ns, check_rc=False)
        check(out.stdout.strip() == "127.0.0.1",
              f"an IPv4 client through [::] with bindv6only=1: {out.stdout!r} "
              f"{out.stderr.strip()[-200:]}")
        admin = [m.group(1) for m in map(re.compile(r'msg="admin listening" addr=\[::\]:(\d+)')
                                         .search, lb.log) if m]
        check(len(admin) == 1, f"the admin endpoint listens on [::]: {lb.log}")
        if admin:
            out = sh(HASHLB, "ctl", "-a", f"127.0.0.1:{admin[0]}", "status", ns=ns,
                     check_rc=False)
            check(out.returncode == 0 and "service t" in out.stdout,
                  f"an IPv4 client of the admin endpoint on [::] with bindv6only=1: "
                  f"{out.returncode} {out.stdout[:100]!r} {out.stderr.strip()[-200:]}")
        check(lb.stop() == 0, "exit 0")
    finally:
        if srv:
            stop_proc(srv)
        sh("ip", "netns", "del", ns, check_rc=False)


def link_local_clients():
    """Clients on a link of their own, from link-local addresses, through a [::] listener:
    each reaches the backend hashlb lookup -c and hashlb ctl lookup name for it, its address
    written with its zone as ip and ss write it (fe80::1%eth0, [fe80::1%eth0]:PORT) or
    without; the zone is not hashed (hashlb run hashes the address alone). Before, both
    lookups refused the zone: "not an address"."""
    pre = f"hlbll{os.getpid() % 100000}-"
    c, lbns = pre + "c", pre + "lb"
    made, procs = [], []
    try:
        for ns in (c, lbns):
            sh("ip", "netns", "add", ns)
            made.append(ns)
        sh("ip", "-n", lbns, "link", "add", "ethc", "type", "veth", "peer", "name", "eth0",
           "netns", c)
        clients = [f"fe80::{i + 10:x}" for i in range(12)]
        for a in clients:
            sh("ip", "-n", c, "addr", "add", a + "/64", "dev", "eth0", "nodad")
        sh("ip", "-n", lbns, "addr", "add", "fe80::1/64", "dev", "ethc", "nodad")
        for ns, dev in ((c, "eth0"), (lbns, "ethc")):
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        backends = []
        for name in ("a", "b", "c", "d"):
            p = spawn(["ip", "netns", "exec", lbns, sys.executable, BACKEND, "--name", name,
                       "--host", "::1"], stdout=subprocess.PIPE, text=True)
            procs.append(p)
            backends.append((name, f'"[::1]:{p.stdout.readline().split()[2].rsplit(":", 1)[1]}"'))
        text = config(backends, key="src-ip-port", listen='"[::]:0"').replace(
            "admin: off", 'admin: "[::1]:0"')
        lb = Hashlb(text, wrap=("ip", "netns", "exec", lbns))
        admin = [m.group(1) for m in map(re.compile(r'msg="admin listening" addr=(\S+)').search,
                                         lb.log) if m]
        client = ("import socket, sys\n"
                  "for a in sys.argv[1:]:\n"
                  "    s = socket.socket(socket.AF_INET6)\n"
                  "    s.settimeout(5)\n"
                  "    s.bind((a, 0, 0, socket.if_nametoindex('eth0')))\n"
                  f"    s.connect(('fe80::1', {lb.addr[1]}, 0, socket.if_nametoindex('eth0')))\n"
                  "    print(a, s.getsockname()[1], s.makefile('rb').readline().decode().strip())\n")
        out = sh(sys.executable, "-c", client, *clients, ns=c, check_rc=False)
        reached = {f"{a}:{port}": name for a, port, name in
                   (l.split() for l in out.stdout.splitlines())}
        check(len(reached) == len(clients) and set(reached.values()) <= {"a", "b", "c", "d"},
              f"every link-local client is served: {out.stdout!r} {out.stderr[-300:]}")
        bad = []
        for cp, name in reached.items():
            a, port = cp.rsplit(":", 1)
            for form in (f"[{a}%ethc]:{port}", f"[{a}]:{port}"):
                lk = sh(HASHLB, "lookup", "-c", lb.path, form, check_rc=False)
                ctl = sh(HASHLB, "ctl", "-a", admin[0] if admin else "-", "lookup", form,
                         ns=lbns, check_rc=False)
                got = (lk.stdout.split()[1:2], ctl.stdout.split()[2:3])
                if got != ([name], [name]):
                    bad.append((form, name, got, lk.stderr.strip(), ctl.stderr.strip()))
        check(not bad, f"lookup -c and ctl lookup name the backend each client reached, "
              f"zone or not: {len(bad)} differ, e.g. {bad[:2]}")
        check(lb.stop() == 0, "exit 0")
    finally:
        clean_up(procs, made)


if os.geteuid() != 0 or not shutil.which("ip"):
    print("SKIP: needs root and iproute2 for IP_TRANSPARENT and network namespaces")
    sys.exit(77)
run_tests([loopback, namespaces, dual_stack_listener, link_local_clients])
