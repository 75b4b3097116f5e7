#!/usr/bin/env python3
"""Backend addresses written as host names: resolved when hashlb starts and at each reload
(a name that moves takes new clients to its new address while established connections stay
where they are), a name that does not resolve fails the reload with its file:line:column and
the old config keeps serving, and a resolver that does not answer costs the reload a bounded
wait, not its own timeout.

hashlb runs in a mount namespace of its own where /etc/hosts, /etc/nsswitch.conf and
/etc/resolv.conf are files of this test (bind mounts), so the names are the test's and no
query leaves the machine: the only DNS server is a socket of this test on loopback."""
import json
import os
import random
import re
import shutil
import socket
import subprocess
import threading
import time

from ctltest import Lb, config
from lbtest import (HASHLB, Backend, Names, backends_on_one_port, check, client_ip, connect,
                    logfmt_fields, pick_port, read_line, run_tests, Skip, tmpfile, wait_until,
                    who)



def need_unshare():
    if not shutil.which("unshare") or os.geteuid() != 0:
        raise Skip("needs root and unshare(1) for a mount namespace of its own")


def backend_of(lb, name):
    return next(b for b in lb.service()["backends"] if b["name"] == name)


def names_resolved_and_followed_on_reload():
    need_unshare()
    a, a2 = backends_on_one_port([("a", "127.0.0.1"), ("a2", "127.0.0.3")])  # a2: alpha moved
    port_a = a.port
    b = Backend("b")
    names = Names("follow", f"127.0.0.1 alpha\n127.0.0.1 beta.example.test\n")
    cfg = config([("a", f"alpha:{port_a}"), ("b", f"beta.example.test:{b.port}")],
                 health="enabled: false")
    lb = Lb(cfg, wrap=names.wrap())
    addr = lb.addr

    check(backend_of(lb, "a")["resolved"] == f"127.0.0.1:{port_a}" and
          backend_of(lb, "a")["address"] == f"alpha:{port_a}" and
          backend_of(lb, "a")["each_address"] is None,
          f"status shows the name as written and what it resolved to: {backend_of(lb, 'a')}")
    clients = [client_ip(i) for i in range(60)]
    got = {c: who(addr, c) for c in clients}
    check(set(got.values()) == {"a", "b"}, f"clients reach both named backends: "
          f"{sorted(set(got.values()))}")
    on_a = [c for c in clients if got[c] == "a"]
    held = connect(addr, on_a[0])
    check(read_line(held) == "a", "a held connection greeted by a")

    rc, so, se = names.check(lb.path)
    check(rc == 0 and f"resolved=127.0.0.1:{port_a}" in so,
          f"hashlb check prints what each name resolved to: rc={rc} {so[-300:]} {se}")

    # alpha moves: a reload takes a's clients to its new address; the held connection stays
    names.set_hosts(f"127.0.0.3 alpha\n127.0.0.1 beta.example.test\n")
    rc, so, se = lb.ctl("reload")
    check(rc == 0, f"the reload after the name moved succeeds: {se.strip()}")
    check(backend_of(lb, "a")["resolved"] == f"127.0.0.3:{port_a}",
          f"status shows the new address: {backend_of(lb, 'a')}")
    rc, so, se = lb.ctl("status")
    row = next((l for l in so.splitlines() if l.split()[:1] == ["a"]), "")
    check(rc == 0 and f"alpha:{port_a}" in row and row.endswith(f"resolved 127.0.0.3:{port_a}"),
          f"hashlb ctl status shows the name and where it points: {row!r}")
    after = {c: who(addr, c) for c in clients}
    check(all(after[c] == "a2" for c in on_a), "a's clients now reach alpha's new address: "
          f"{sorted(set(after[c] for c in on_a))}")
    check(all(after[c] == "b" for c in clients if got[c] == "b"), "b's clients stay on b")
    held.sendall(b"still here\n")
    check(read_line(held) == "still here", "the connection established before the move still "
          "talks to the old address")

    # beta.example.test no longer resolves: the reload fails where the name is written,
    # and the running config keeps serving
    names.set_hosts(f"127.0.0.3 alpha\n")
    rc, so, se = lb.ctl("reload")
    check(rc != 0 and f"{lb.path}:14:18" in se and "beta.example.test" in se and
          "does not resolve" in se,
          f"a reload with a name that does not resolve fails at its position: rc={rc} {se}")
    st = lb.status()
    check(st["reloads"]["failed"] == 1, f"status counts the failed reload: {st['reloads']}")
    check(all(who(addr, c) == "b" for c in clients if got[c] == "b"),
          "the running config still serves b")
    rc, so, se = names.check(lb.path)
    check(rc == 1 and f"{lb.path}:14:18" in se and "does not resolve" in se,
          f"hashlb check refuses it the same way: rc={rc} {se}")

    names.set_hosts(f"127.0.0.3 alpha\n127.0.0.1 beta.example.test\n")
    rc, so, se = lb.ctl("reload")
    check(rc == 0, f"and reloads once it resolves again: {se.strip()}")

    # what an operator set at run time stays with the name when its address moves: back
    # to where the held connection still drains (that backend is taken back, with its
    # connection), then to an address of none
    rc, so, se = lb.ctl("set", "a", "drain")
    rc2, so, se2 = lb.ctl("set", "a", "max_connections", "7")
    rc3, so, se3 = lb.ctl("set", "a", "weight", "3")
    check(rc == 0 and rc2 == 0 and rc3 == 0,
          f"ctl set a drain, max_connections 7, weight 3: {se} {se2} {se3}")
    for where, hosts in (("back", "127.0.0.1"), ("on", "127.0.0.3")):
        names.set_hosts(f"{hosts} alpha\n127.0.0.1 beta.example.test\n")
        rc, so, se = lb.ctl("reload")
        st = backend_of(lb, "a")
        check(rc == 0 and st["resolved"] == f"{hosts}:{port_a}" and st["state"] == "drain" and
              st["max_connections"] == 7 and st["weight"] == 3,
              f"a moved {where} keeps the state, cap and weight set at run time: {st}")
        if where == "back":
            check(st["active"] == 1, f"the held connection is a's again: {st}")
            held.sendall(b"taken back\n")
            check(read_line(held) == "taken back", "and still talks to a")
            held.close()
    check(lb.stop() == 0, "exit 0")
    for x in (a, a2, b):
        x.stop()


def alpha_and_other(tag, other, options):
    """resolve_every: 1s, backend a at alpha and b at the name <other>, both 127.0.0.1 in the
    hosts file; a name not in it asks a SilentDns (resolv.conf's <options>). Backends a
    (127.0.0.1) and a2 (127.0.0.3, where alpha moves) share a port. (dns, a, a2, b, names, lb)"""
    need_unshare()
    dns = SilentDns()
    a, a2 = backends_on_one_port([("a", "127.0.0.1"), ("a2", "127.0.0.3")])
    b = Backend("b")
    names = Names(tag, f"127.0.0.1 alpha\n127.0.0.1 {other}\n", nss="files dns",
                  resolv=f"nameserver {dns.addr}\noptions {options}\n")
    cfg = "resolve_every: 1s\n" + config([("a", f"alpha:{a.port}"), ("b", f"{other}:{b.port}")],
                                         health="enabled: false")
    return dns, a, a2, b, names, Lb(cfg, wrap=names.wrap())


def names_followed_every():
    """resolve_every: a name that moves is followed without a reload (new clients to the new
    address, a held connection stays); a name that stops resolving keeps its last address
    and says so; the admin endpoint answers while a resolution waits on a silent DNS server."""
    dns, a, a2, b, names, lb = alpha_and_other("every", "beta", "timeout:20 attempts:1")
    addr = lb.addr
    clients = [client_ip(i) for i in range(60)]
    got = {c: who(addr, c) for c in clients}
    on_a = [c for c in clients if got[c] == "a"]
    check(set(got.values()) == {"a", "b"}, f"clients reach both: {sorted(set(got.values()))}")
    held = connect(addr, on_a[0])
    check(read_line(held) == "a", "a held connection greeted by a")

    names.set_hosts("127.0.0.3 alpha\n127.0.0.1 beta\n")
    took = lb.wait(lambda: backend_of(lb, "a")["resolved"] == f"127.0.0.3:{a.port}", timeout=15)
    check(took is not None, "within a few seconds, without a reload, a's address is alpha's new one")
    st = lb.status()
    check(st["reloads"]["ok"] == 0 and st["resolve"]["changed"] == 1 and
          st["resolve"]["every_ms"] == 1000, f"counted as a resolution, not a reload: "
          f"{st['reloads']} {st['resolve']}")
    check(lb.wait_log(r"msg=\"names resolved to new addresses, applied\" backends=1 "
                      rf"changed=t/a:127.0.0.1:{a.port}->127.0.0.3:{a.port}"),
          "the log says which backend moved where")
    check(all(who(addr, c) == "a2" for c in on_a), "a's clients now reach the new address")
    held.sendall(b"still here\n")
    check(read_line(held) == "still here", "the connection held from before stays")
    held.close()

    # beta leaves the hosts file: DNS is asked, never answers; the resolution gives up after
    # 5 s, meanwhile the admin endpoint goes on: asked once the query has reached the DNS
    # server, it answers that the resolution has not failed yet (a control thread that waited
    # on DNS would answer once it gave up). Not timed by this process: 20 requests in 4 s,
    # each to be answered within 1 s, counted on how fast a loaded machine runs them.
    failed0, asked0 = lb.status()["resolve"]["failed"], dns.queries
    names.set_hosts("127.0.0.3 alpha\n")
    check(lb.wait(lambda: dns.queries > asked0, timeout=15) is not None,
          "the resolution asks the test's DNS server, which does not answer")
    code, body = lb.http("GET", "/status")
    resolve = json.loads(body)["resolve"] if code == 200 else None
    check(resolve and resolve["failed"] == failed0,
          f"the admin endpoint answers while names wait on DNS: {code} {resolve}")
    check(lb.wait(lambda: lb.status()["resolve"]["failed"] >= 1, timeout=15) is not None,
          "the resolution that waited on the silent DNS server fails")
    # read from the log, not /status's last_error: the next round (1 s later) fails beta again,
    # as still asked ("was not asked again"), and replaces it
    check(lb.wait_log(r"msg=\"names not resolved, the backends keep their addresses\" .*"
                      r"line=15 column=18 err=\"[^\"]*no answer within 5000 ms"),
          "with the position of the name: " +
          "".join(l for l in lb.log if "names not resolved" in l)[:600])
    check(backend_of(lb, "b")["resolved"] == f"127.0.0.1:{b.port}",
          "b keeps its last address")
    check(all(who(addr, c) == "b" for c in clients if got[c] == "b"), "and serves its clients")
    check(dns.queries > 0, "the resolver asked the test's DNS server")
    check(lb.stop() == 0, "exit 0")
    dns.close()
    for x in (a, a2, b):
        x.stop()


def names_followed_say_how_many_clients_they_move():
    """A resolve_every round that gives a backend a new address sends that backend's clients
    to another server, as a reload that readdresses it does: each table it rebuilds says its
    share, `msg="resolve: clients moved" service=t moved=F` (a's whole share of the table in
    use: the others stay), before the round's `names resolved to new addresses, applied`
    line. Before, such a round wrote no moved= line at all, where a reload of the same
    change said it."""
    need_unshare()
    names = Names("resolve-moved", "127.0.0.1 alpha\n")
    four = [("a", "alpha:9")] + [(n, f"127.0.0.1:{i + 1}") for i, n in enumerate("bcd")]
    cfg = "resolve_every: 1s\n" + config(four, scheme="ring", health="enabled: false")
    lb = Lb(cfg, wrap=names.wrap())
    share = backend_of(lb, "a")["share"]
    check(0.05 < share < 0.6, f"a owns a share of the ring: {share}")
    names.set_hosts("127.0.0.3 alpha\n")
    check(lb.wait_log(r"names resolved to new addresses, applied", timeout=15),
          "the round applies alpha's new address")
    line = re.compile(r'^level=info msg="resolve: clients moved" service=t moved=([0-9.]+)$')
    said = [m for m in (line.search(l.split(" ", 1)[1] if l.startswith("ts=") else l)
                        for l in lb.log) if m]
    check(len(said) == 1 and abs(float(said[0].group(1)) - share) < 0.0001,
          f"one line, moved= a's share ({share:.4f}): {said} "
          f"{[l for l in lb.log if 'clients moved' in l]}")
    applied = next(i for i, l in enumerate(lb.log) if "names resolved to new addresses" in l)
    moved_at = next((i for i, l in enumerate(lb.log) if 'msg="resolve: clients moved"' in l), -1)
    check(0 <= moved_at < applied, "said before the round's applied line, as a reload's before "
          "its reloaded line")
    check(not [l for l in lb.log if 'msg="reload: ' in l], "no line of a reload: none ran")
    check(backend_of(lb, "a")["share"] == share, "a keeps its place in the table")
    check(lb.stop() == 0, "exit 0")


def others_followed(tag, hosts, why):
    """resolve_every, alpha, beta and an each_address pool resolved, then <hosts> in the hosts
    file: alpha moved, beta and the pool failing (the last error says <why>)."""
    need_unshare()
    a, a2 = backends_on_one_port([("a", "127.0.0.1"), ("a2", "127.0.0.3")])
    b = Backend("b")
    names = Names(tag, "127.0.0.1 alpha\n127.0.0.1 beta\n127.0.0.41 pool\n127.0.0.42 pool\n")
    cfg = "resolve_every: 1s\n" + config([("a", f"alpha:{a.port}"), ("b", f"beta:{b.port}"),
                                          ("p", "pool:7", "each_address: true")],
                                         health="enabled: false")
    lb = Lb(cfg, wrap=names.wrap())
    names.set_hosts(hosts)
    took = lb.wait(lambda: backend_of(lb, "a")["resolved"] == f"127.0.0.3:{a.port}", timeout=15)
    check(took is not None, f"alpha is followed though beta fails: {backend_of(lb, 'a')} "
          f"{lb.status()['resolve']}")
    st = lb.status()
    check(st["resolve"]["changed"] == 1 and st["resolve"]["failed"] >= 1 and
          why in (st["resolve"]["last_error"] or ""),
          f"counted as changed and as failed, with why: {st['resolve']}")
    got = sorted((x["name"], x["resolved"]) for x in st["services"][0]["backends"])
    check(got == [("a", f"127.0.0.3:{a.port}"), ("b", f"127.0.0.1:{b.port}"),
                  ("p@127.0.0.41", "127.0.0.41:7"), ("p@127.0.0.42", "127.0.0.42:7")],
          f"beta and the pool keep their addresses: {got}")
    check(lb.wait_log(r"msg=\"names not resolved, the backends keep their addresses\""),
          "the failure is logged")
    on = {c: lb.lookup([c])[c] for c in (client_ip(i) for i in range(60))}
    check(all(who(lb.addr, c) == "a2" for c in on if on[c] == "a"),
          "a's clients reach alpha's new address")
    check(all(who(lb.addr, c) == "b" for c in on if on[c] == "b"), "beta's still reach b")
    check(lb.stop() == 0, "exit 0")
    for x in (a, a2, b):
        x.stop()


def one_name_failing_does_not_stop_the_others():
    """resolve_every: a name that stops resolving keeps its last address, and the other names
    are still followed: one host gone from DNS (decommissioned, a typo in a zone) held every
    other backend of the config at its old address, as the whole resolution failed. The same
    for an each_address name: its backends stay as they were."""
    others_followed("partial", "127.0.0.3 alpha\n", "beta")


def unusable_answer_does_not_stop_the_others():
    """resolve_every: a name whose answer is an address no connect can use (0.0.0.0, the
    answer DNS sinkholes give a name they block) is a name that failed: it keeps its last
    address, says why, and the other names are still followed (before: every round failed
    as a whole, alpha's move never applied). The same for one address of an each_address
    name's answer: its backends stay as they were."""
    others_followed("unusable", "127.0.0.3 alpha\n0.0.0.0 beta\n127.0.0.41 pool\n"
                                "0.0.0.0 pool\n", "is the unspecified address")


def answer_in_another_order_moves_nothing():
    """resolve_every: a name of several addresses answered in another order (DNS servers
    rotate a record set's order by default, BIND's rrset-order cyclic) keeps the backend at
    the address it has while that address is still in the answer, as HAProxy's resolvers do:
    before, the backend moved to the answer's new first address each round (a new backend,
    its slow start and health verdict begun again, its connections draining). A name whose
    answer no longer has the address takes the new first one."""
    need_unshare()
    a, a2 = backends_on_one_port([("a", "127.0.0.5"), ("a2", "127.0.0.6")])
    names = Names("order", "127.0.0.5 alpha\n127.0.0.6 alpha\n")
    cfg = "resolve_every: 1s\n" + config([("a", f"alpha:{a.port}")], health="enabled: false")
    lb = Lb(cfg, wrap=names.wrap())
    check(backend_of(lb, "a")["resolved"] == f"127.0.0.5:{a.port}", "the answer's first address")
    names.set_hosts("127.0.0.6 alpha\n127.0.0.5 alpha\n")
    ok0 = lb.status()["resolve"]["ok"]
    check(lb.wait(lambda: lb.status()["resolve"]["ok"] >= ok0 + 3, timeout=30) is not None,
          "three rounds resolve the name in its new order")
    st = lb.status()
    check(st["resolve"]["changed"] == 0 and
          backend_of(lb, "a")["resolved"] == f"127.0.0.5:{a.port}",
          f"the backend stays at its address, still in the answer: {st['resolve']} "
          f"{backend_of(lb, 'a')['resolved']}")
    check(who(lb.addr, client_ip(1)) == "a", "its clients still reach it")
    names.set_hosts("127.0.0.6 alpha\n127.0.0.7 alpha\n")
    took = lb.wait(lambda: backend_of(lb, "a")["resolved"] == f"127.0.0.6:{a.port}", timeout=15)
    check(took is not None, "once its address leaves the answer, the new first one")
    check(who(lb.addr, client_ip(1)) == "a2", "its clients reach the new address")
    check(lb.stop() == 0, "exit 0")
    a.stop()
    a2.stop()


def reload_keeps_a_rotated_name_in_place():
    """A reload that leaves a backend as written keeps it at its address while its name's
    answer still has it, in whatever order, as resolve_every's rounds do: before, a reload
    resolved without the running config and took the answer's first address, so a DNS
    server's rotation (BIND's rrset-order cyclic) moved the backend at any reload (its
    clients and connections to a new backend, slow start and health verdict begun again).
    An answer without the address moves it, to the answer's first one."""
    need_unshare()
    a, a2 = backends_on_one_port([("a", "127.0.0.5"), ("a2", "127.0.0.6")])
    c = Backend("c")
    names = Names("rotated", "127.0.0.5 alpha\n127.0.0.6 alpha\n")
    base = [("a", f"alpha:{a.port}")]
    lb = Lb(config(base, health="enabled: false"), wrap=names.wrap())
    check(backend_of(lb, "a")["resolved"] == f"127.0.0.5:{a.port}", "the answer's first address")
    names.set_hosts("127.0.0.6 alpha\n127.0.0.5 alpha\n")
    for what, cfg in (("as it is", base),
                      ("with a backend added", base + [("c", f"127.0.0.1:{c.port}")])):
        lb.rewrite(config(cfg, health="enabled: false"))
        rc, so, se = lb.ctl("reload")
        check(rc == 0 and backend_of(lb, "a")["resolved"] == f"127.0.0.5:{a.port}",
              f"a reload of the config {what} keeps a at its address, still in the answer: "
              f"rc={rc} {se.strip()} {backend_of(lb, 'a')['resolved']}")
    on = lb.lookup([client_ip(i) for i in range(40)])
    check("a" in on.values() and all(who(lb.addr, x) == "a" for x in on if on[x] == "a"),
          "a's clients still reach its address")
    names.set_hosts("127.0.0.6 alpha\n127.0.0.7 alpha\n")
    rc, so, se = lb.ctl("reload")
    check(rc == 0 and backend_of(lb, "a")["resolved"] == f"127.0.0.6:{a.port}",
          f"once its address leaves the answer, a reload takes the new first one: "
          f"{backend_of(lb, 'a')['resolved']}")
    check(lb.stop() == 0, "exit 0")
    for x in (a, a2, c):
        x.stop()


def renamed_host_of_the_same_address_is_logged():
    """A reload that writes a backend's address as another host name of the same address (or
    as that address in numbers) keeps the backend where it is, and says what it changed: a
    `reload: backend changed` line, address= the name now written, address_was= the one
    before; /status's address is the new one. Before, the backend kept the old name, logged
    nothing, and /status (and an upgrade's handover) went on naming the old host."""
    need_unshare()
    a = Backend("a")
    names = Names("renamed", "127.0.0.1 alpha\n127.0.0.1 beta\n")
    lb = Lb(config([("a", f"alpha:{a.port}")], health="enabled: false"), wrap=names.wrap())
    was = f"alpha:{a.port}"
    for now in (f"beta:{a.port}", f"127.0.0.1:{a.port}"):
        n = len(lb.log)
        lb.rewrite(config([("a", now)], health="enabled: false"))
        rc, so, se = lb.ctl("reload")
        want = f"backend=a address={now} address_was={was}"
        check(rc == 0 and lb.wait_log(re.escape(want)),
              f"{was} to {now}: logged ({want!r}): rc={rc} {se.strip()} {lb.log[n:]}")
        got = backend_of(lb, "a")
        check(got["address"] == now and got["resolved"] == f"127.0.0.1:{a.port}",
              f"/status: address {got['address']}, resolved {got['resolved']}")
        check(wait_until(lambda: any("msg=reloaded " in l for l in lb.log[n:])) and
              not any("backend added" in l or "backend removed" in l for l in lb.log[n:]),
              f"the backend kept, not replaced: {lb.log[n:]}")
        was = now
    n = len(lb.log)
    rc, so, se = lb.ctl("reload")
    check(rc == 0 and wait_until(lambda: any("msg=reloaded " in l for l in lb.log[n:])) and
          not any("backend changed" in l for l in lb.log[n:]),
          f"a reload that changes nothing logs no change: {lb.log[n:]}")
    check(lb.stop() == 0, "exit 0")
    a.stop()


def many_changes_logged_whole():
    """resolve_every: a round that changes more backends than one log line lists (a pool
    behind one name scaled out by 30) lists whole changes and ends with ",..." (backends=
    counts them all): before, the list was cut at 511 bytes, mid-address, its last change
    read as another address (127.0.0.1 for 127.0.0.117)."""
    need_unshare()
    names = Names("many", "127.0.0.41 pool\n")
    cfg = "resolve_every: 1s\n" + config([("p", "pool:7", "each_address: true")],
                                         health="enabled: false")
    lb = Lb(cfg, wrap=names.wrap())
    names.set_hosts("127.0.0.41 pool\n" + "".join(f"127.0.0.{100 + i} pool\n" for i in range(30)))
    check(lb.wait_log(r"names resolved to new addresses, applied", timeout=15), "applied")
    line = next(l for l in lb.log if "names resolved to new addresses, applied" in l)
    listed = re.search(r"changed=(\S+)", line).group(1).split(",")
    whole = [c for c in listed if re.fullmatch(r"t/p@(127\.0\.0\.\d+):\+\1:7", c)]
    check("backends=30 " in line and listed[-1] == "..." and whole == listed[:-1] and
          len(whole) >= 10, f"whole changes, then ...: {line}")
    check(lb.stop() == 0, "exit 0")


def lookup_in(names, cfg_path, clients):
    """hashlb lookup -c in the namespace: {client: backend name}."""
    p = subprocess.run([*names.wrap(), HASHLB, "lookup", "-c", cfg_path, ",".join(clients)],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"hashlb lookup -c resolves the each_address name: {p.stderr}")
    return {l.split()[0]: l.split()[1] for l in p.stdout.splitlines()}


def change_of_a_name_with_a_comma_is_one():
    """The changed= list of a resolve_every round names a backend whose name holds a comma or a
    colon (the list's separators) in double quotes, as hashlb lookup's list does: "x,y" moved
    read as two changes, t/x and y:127.0.0.41:7->127.0.0.43:7, before."""
    need_unshare()
    names = Names("comma", "127.0.0.41 pool\n127.0.0.42 other\n127.0.0.45 third\n")
    cfg = "resolve_every: 1s\n" + config([("x,y", "pool:7"), ("z", "other:7"), ("u:v", "third:7")],
                                         health="enabled: false")
    lb = Lb(cfg, wrap=names.wrap())
    names.set_hosts("127.0.0.43 pool\n127.0.0.44 other\n127.0.0.46 third\n")
    check(lb.wait_log(r"names resolved to new addresses, applied", timeout=15), "applied")
    line = next(l for l in lb.log if "names resolved to new addresses, applied" in l)
    listed = re.findall(r'(?:[^,"]|"[^"]*")+', logfmt_fields(line).get("changed", ""))
    want = ['t/"x,y":127.0.0.41:7->127.0.0.43:7', "t/z:127.0.0.42:7->127.0.0.44:7",
            't/"u:v":127.0.0.45:7->127.0.0.46:7']
    check("backends=3 " in line and listed == want,
          f"three changes, each name whole: {listed}, want {want}: {line}")
    check(lb.stop() == 0, "exit 0")


def each_address_follows_the_name():
    """each_address: a name with three addresses is three backends named by their addresses,
    reached as hashlb lookup says; resolve_every follows the name as it loses one address and
    gains another: only the lost one's clients move off it, the others stay or move to the
    new one, and a connection held to the lost address goes on; hashlb ctl set on the name
    as written closes and sets all of its backends."""
    need_unshare()
    hosts = ["127.0.0.21", "127.0.0.22", "127.0.0.23", "127.0.0.24"]
    bs = backends_on_one_port([(f"p{i + 1}", h) for i, h in enumerate(hosts)])
    port = bs[0].port
    greets = {f"pool@{h}": f"p{i + 1}" for i, h in enumerate(hosts)}
    names = Names("each", "".join(f"{h} pool\n" for h in hosts[:3]))
    cfg = "resolve_every: 1s\n" + config([("pool", f"pool:{port}", "each_address: true")],
                                         health="enabled: false")
    lb = Lb(cfg, wrap=names.wrap())
    addr = lb.addr

    def names_now():
        return sorted(b["name"] for b in lb.service()["backends"])

    check(names_now() == ["pool@127.0.0.21", "pool@127.0.0.22", "pool@127.0.0.23"],
          f"one backend per address of the name: {names_now()}")
    check(all(b["address"] == f"pool:{port}" and b["each_address"] == "pool"
              for b in lb.service()["backends"]),
          f"each shows the name as written, and the entry it comes from: "
          f"{[(b['address'], b['each_address']) for b in lb.service()['backends']]}")
    clients = [client_ip(i) for i in range(300)]
    got = {c: who(addr, c) for c in clients}
    check(set(got.values()) == {"p1", "p2", "p3"},
          f"clients reach all three addresses: {sorted(set(got.values()))}")
    want = lookup_in(names, lb.path, clients)
    wrong = [c for c in clients if greets.get(want.get(c)) != got[c]]
    check(not wrong, f"each client reached the backend hashlb lookup -c names "
          f"({len(wrong)} did not, e.g. {wrong[:3]})")
    on_p2 = [c for c in clients if got[c] == "p2"]
    held = connect(addr, on_p2[0])
    check(read_line(held) == "p2", "a held connection greeted by p2")

    # .22 leaves the name, .24 joins it: followed without a reload
    names.set_hosts("".join(f"{h} pool\n" for h in (hosts[0], hosts[2], hosts[3])))
    took = lb.wait(lambda: names_now() == ["pool@127.0.0.21", "pool@127.0.0.23",
                                           "pool@127.0.0.24"], timeout=15)
    check(took is not None, f"within a few seconds the backends follow the name: {names_now()}")
    check(lb.wait_log(r'msg="names resolved to new addresses, applied" backends=2 changed=.*'
                      rf"t/pool@127.0.0.24:\+127.0.0.24:{port}") and
          lb.wait_log(rf"t/pool@127.0.0.22:-127.0.0.22:{port}"),
          "the log says which address came and which went")
    after = {c: who(addr, c) for c in clients}
    check(not [c for c in clients if after[c] == "p2"], "nobody new reaches the address gone")
    moved = [c for c in clients if got[c] != "p2" and after[c] != got[c]]
    check(all(after[c] == "p4" for c in moved),
          f"a client of an address that stayed either stays or goes to the new one: "
          f"{sorted(set((got[c], after[c]) for c in moved))}")
    check(0 < len(moved) < len(clients) // 2,
          f"the new address takes a share of the others' clients: {len(moved)}")
    want = lookup_in(names, lb.path, clients)
    wrong = [c for c in clients if greets.get(want.get(c)) != after[c]]
    check(not wrong, f"and hashlb lookup -c agrees again ({len(wrong)} differ)")
    held.sendall(b"still here\n")
    check(read_line(held) == "still here", "the connection held to the address gone goes on")
    held.close()

    # the name as written stands for all of its backends in hashlb ctl close and set
    held = [connect(addr, c) for c in clients[:6]]
    check(all(read_line(h) in ("p1", "p3", "p4") for h in held), "six connections held")
    check(lb.wait(lambda: sum(b["active"] for b in lb.service()["backends"]) == 6) is not None,
          "and counted")
    rc, so, se = lb.ctl("close", "pool")
    check(rc == 0 and "closing the 6 established connections" in so and "of its 3 backends" in so,
          f"ctl close pool closes the connections of all three: {so} {se}")
    check(all(read_line(h) == "" for h in held), "and the held connections end")
    for h in held:
        h.close()
    rc, so, se = lb.ctl("set", "pool", "drain")
    states = {b["name"]: b["state"] for b in lb.service()["backends"]}
    check(rc == 0 and so.count("state drain") == 3 and set(states.values()) == {"drain"},
          f"ctl set pool drain drains the three: rc={rc} {so} {se} {states}")
    code, body = lb.http("POST", "/set?service=t&backend=pool&state=ready&weight=2")
    got = json.loads(body) if code == 200 else {}
    check(code == 200 and got.get("each_address") == "pool" and
          sorted(b["backend"] for b in got.get("backends", [])) == names_now() and
          all(b["state"] == "ready" and b["weight"] == 2 for b in got["backends"]),
          f"POST /set on the name answers for each backend: {code} {body}")

    rc, so, se = names.check(lb.path)
    check(rc == 0 and so.count(f"resolved=127.0.0.2") == 3,
          f"hashlb check lists the three backends: rc={rc} {so[-400:]} {se}")
    check(lb.stop() == 0, "exit 0")
    for x in bs:
        x.stop()


def source_family_picks_the_address():
    """A name with an IPv6 and an IPv4 address: a service whose source is IPv4 takes the
    IPv4 one, whichever the resolver lists first."""
    need_unshare()
    names = Names("dual", "::1 dual\n127.0.0.1 dual\n")
    for source, want in (("127.0.0.1", "127.0.0.1:7"), ("::1", "[::1]:7")):
        path = tmpfile("dual.yaml", config([("a", "dual:7")], health="enabled: false",
                                           listen=("127.0.0.1:0" if ":" not in source
                                                   else '"[::1]:0"'),
                                           extra=f"source: \"{source}\""))
        rc, so, se = names.check(path)
        check(rc == 0 and f"resolved={want}" in so,
              f"source {source}: dual resolves to {want}: rc={rc} {so[-200:]} {se}")


def link_local_name_is_refused():
    """A name that resolves to a link-local address without a zone (fe80::1 in the hosts
    file): no connect can reach it (EINVAL), so it is refused where the name is, as a
    numeric one is, not taken and left down for ever with no reason given."""
    need_unshare()
    names = Names("ll", "fe80::1 ll\n")
    path = tmpfile("ll.yaml", config([("a", "ll:7")], health="enabled: false",
                                     listen='"[::1]:0"'))
    rc, so, se = names.check(path)
    print("   ", se.strip())
    check(rc == 1 and f"{path}:" in se and "link-local address without a zone" in se and
          "the name resolved to [fe80::1]:7" in se,
          f"a name resolved to a zone-less link-local address is refused: rc={rc} {se}")


def each_address_after_a_name():
    """An each_address entry after a backend written with a host name (not each_address) in
    the same service: its backends are its own name's addresses. The answers were taken in
    the order of the names asked, counted past the resolved backend wrongly: the pool got
    that backend's answer (no address: its backends vanished, and hashlb check said ok) or,
    with a second pool after it, the first pool's addresses under its own name."""
    need_unshare()
    names = Names("mixed", "127.0.0.1 alpha\n127.0.0.21 pool\n127.0.0.22 pool\n"
                           "127.0.0.31 other\n")
    path = tmpfile("mixed.yaml", config([("a", "alpha:7"), ("p", "pool:8", "each_address: true"),
                                         ("q", "other:9", "each_address: true")],
                                        health="enabled: false"))
    rc, so, se = names.check(path)
    rows = sorted(l.split()[0] + " " + l.split()[-1] for l in so.splitlines()
                  if "resolved=" in l)
    check(rc == 0 and rows == ["a resolved=127.0.0.1:7", "p@127.0.0.21 resolved=127.0.0.21:8",
                               "p@127.0.0.22 resolved=127.0.0.22:8",
                               "q@127.0.0.31 resolved=127.0.0.31:9"],
          f"each name's backends at its own addresses: rc={rc} {rows} {se}")


def each_address_of_one_address_closed():
    """hashlb ctl close on an each_address name that gave one backend says one backend and
    one connection: it said "closing the 1 established connections (and those connecting)
    of its 1 backends; their states are unchanged"."""
    need_unshare()
    bs = backends_on_one_port([("p1", "127.0.0.21")])
    names = Names("one", "127.0.0.21 pool\n")
    lb = Lb(config([("pool", f"pool:{bs[0].port}", "each_address: true")],
                   health="enabled: false"), wrap=names.wrap())
    held = connect(lb.addr, client_ip(0))
    check(read_line(held) == "p1", "a connection held to the one address")
    check(lb.wait(lambda: lb.service()["backends"][0]["active"] == 1) is not None, "counted")
    rc, so, se = lb.ctl("close", "pool")
    want = ("t/pool: closing the 1 established connection (and those connecting) of its 1 "
            "backend; its state is unchanged\n")
    check(rc == 0 and so == want, f"ctl close pool: rc={rc} {so!r} {se!r}, want {want!r}")
    check(read_line(held) == "", "and the held connection ends")
    held.close()
    check(lb.stop() == 0, "exit 0")
    bs[0].stop()


class SilentDns:
    """A UDP socket on port 53 of a loopback address of its own (.addr: runs of this test
    side by side do not collide) that reads queries and never answers."""

    def __init__(self):
        rng = random.Random()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(100):
            self.addr = f"127.53.{rng.randrange(256)}.{rng.randrange(1, 255)}"
            try:
                self.sock.bind((self.addr, 53))
                break
            except OSError:
                continue
        else:
            raise OSError("no free loopback address for the test's DNS server")
        self.sock.settimeout(0.2)
        self.queries = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.done.is_set():
            try:
                q, peer = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            self.queries += 1
            self.query(q, peer)

    def query(self, q, peer):
        """What it does with query <q> from <peer>: nothing."""

    def close(self):
        self.done.set()
        self.thread.join()
        self.sock.close()


class AOnlyDns(SilentDns):
    """A DNS server that answers each A query with .answer (an IPv4 address, TTL 0), after
    .delay seconds, and drops every other query (AAAA ones: as some middleboxes and broken DNS
    servers do); .dropped counts those."""

    def __init__(self, answer, delay=0):
        self.answer, self.dropped, self.delay = answer, 0, delay
        super().__init__()

    def query(self, q, peer):
        if self.delay:
            threading.Timer(self.delay, self.answer_now, (q, peer)).start()
        else:
            self.answer_now(q, peer)

    def answer_now(self, q, peer):
        i = 12  # the question's name: labels up to a zero length, then type and class
        while i < len(q) and q[i]:
            i += 1 + q[i]
        if q[i + 1:i + 3] != b"\x00\x01":
            self.dropped += 1
            return
        head = q[:2] + b"\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00"
        rr = b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x00\x00\x04"
        self.sock.sendto(head + q[12:i + 5] + rr + socket.inet_aton(self.answer), peer)


def ipv4_lookup_not_held_by_a_dual_one():
    """resolve_every, one name asked for IPv4 only (service v4, whose source is IPv4) and for
    both families (service any), from a DNS server that answers A queries and drops AAAA
    ones: the lookup of both families waits for the resolver's timeout (30 s), the IPv4 one
    is still asked each round and followed. A name still asked was matched by host alone:
    the IPv4 one was not asked again while the other waited, its backend held at its old
    address for the resolver's timeout."""
    need_unshare()
    dns = AOnlyDns("127.0.0.5")
    a, a2 = backends_on_one_port([("a", "127.0.0.5"), ("a2", "127.0.0.6")])
    b = Backend("b")
    names = Names("aonly", "127.0.0.5 dual.example.test\n", nss="files dns",
                  resolv=f"nameserver {dns.addr}\noptions timeout:30 attempts:1\n")
    svc = ("  - name: {0}\n    listen: 127.0.0.1:0\n{1}    health:\n      enabled: false\n"
           "    backends:\n      - name: {2}\n        address: dual.example.test:{3}\n")
    cfg = ("resolve_every: 1s\nworkers: 1\nadmin: 127.0.0.1:0\nservices:\n" +
           svc.format("v4", "    source: 127.0.0.1\n", "a", a.port) +
           svc.format("any", "", "b", b.port))
    lb = Lb(cfg, wrap=names.wrap())
    check(backend_of(lb, "a")["resolved"] == f"127.0.0.5:{a.port}", "a at the hosts file's")
    names.set_hosts("")  # DNS is asked now
    check(lb.wait(lambda: dns.dropped > 0, timeout=15) is not None,
          "the lookup of both families asks AAAA, never answered")
    failed0 = lb.status()["resolve"]["failed"]
    check(lb.wait(lambda: lb.status()["resolve"]["failed"] > failed0, timeout=15) is not None,
          f"a round fails the name of both families: {lb.status()['resolve']}")
    dns.answer = "127.0.0.6"
    took = lb.wait(lambda: backend_of(lb, "a")["resolved"] == f"127.0.0.6:{a.port}", timeout=15)
    res = lb.status()["resolve"]
    check(took is not None, f"the IPv4 name is followed while the other's lookup waits: "
          f"{backend_of(lb, 'a')['resolved']} {res}")
    check(lb.service(1)["backends"][0]["resolved"] == f"127.0.0.5:{b.port}",
          "the name of both families keeps its address")
    check(lb.stop() == 0, "exit 0 (with the lookup still waiting)")
    dns.close()
    for x in (a, a2, b):
        x.stop()


def slow_name(tag, every, delay):
    """resolve_every: <every>, backend a at slow.example.test, which an AOnlyDns answers
    127.0.0.5 after <delay> s; backends a (127.0.0.5) and a2 (127.0.0.6) share a port.
    (dns, a, a2, cfg, lb)"""
    need_unshare()
    dns = AOnlyDns("127.0.0.5", delay=delay)
    a, a2 = backends_on_one_port([("a", "127.0.0.5"), ("a2", "127.0.0.6")])
    names = Names(tag, "", nss="files dns",
                  resolv=f"nameserver {dns.addr}\noptions timeout:20 attempts:1\n")
    cfg = f"resolve_every: {every}\n" + config([("a", f"slow.example.test:{a.port}")],
                                               health="enabled: false",
                                               extra="source: 127.0.0.1")
    return dns, a, a2, cfg, Lb(cfg, wrap=names.wrap())


def in_a_round(lb, dns, answer):
    """Once a round has asked the DNS server (which answers later), have it answer <answer>;
    how many queries it had before."""
    asked = dns.queries
    check(lb.wait(lambda: dns.queries > asked, timeout=30) is not None,
          "a round asks the name (answered later)")
    dns.answer = answer
    return asked


def slow_name_stop(lb, dns, a, a2):
    check(lb.stop() == 0, "exit 0")
    dns.close()
    for x in (a, a2):
        x.stop()


def reload_during_a_round():
    """A reload while a resolve_every round waits for its lookups (a DNS server answering
    after 1 s): the round is held, the reload waits for its lookups of the same names to
    end and asks them again, and applies the new answer. The reload failed when it came
    while the round's lookup ran ("was not asked again"), once reloads counted against the
    lookups still running."""
    dns, a, a2, cfg, lb = slow_name("during", "1s", 1)
    check(backend_of(lb, "a")["resolved"] == f"127.0.0.5:{a.port}", "a at the DNS answer")
    for answer in ("127.0.0.6", "127.0.0.5"):
        in_a_round(lb, dns, answer)
        rc, so, se = lb.ctl("reload")
        check(rc == 0 and backend_of(lb, "a")["resolved"] == f"{answer}:{a.port}",
              f"the reload during the round succeeds, a at {answer}: rc={rc} {se.strip()} "
              f"{backend_of(lb, 'a')['resolved']}")
    slow_name_stop(lb, dns, a, a2)


def one_lookup_per_name():
    """Backends of one host on several ports (processes of one machine): the name is asked
    once at start and once per resolve_every round, and each backend takes the answer at its
    own port. Each backend asked for itself: as many lookups, DNS queries, per round as
    backends of the name."""
    need_unshare()
    dns = AOnlyDns("127.0.0.5")
    names = Names("once", "", nss="files dns",
                  resolv=f"nameserver {dns.addr}\noptions timeout:5 attempts:1\n")
    bs = [(f"m{i}", f"many.example.test:{7000 + i}") for i in range(12)]
    cfg = "resolve_every: 1s\n" + config(bs, health="enabled: false", extra="source: 127.0.0.1")
    lb = Lb(cfg, wrap=names.wrap())
    check(dns.queries == 1, f"start asks the name once: {dns.queries} queries")
    ports = [7000 + i for i in range(12)]
    got = sorted(b["resolved"] for b in lb.service()["backends"])
    check(got == sorted(f"127.0.0.5:{p}" for p in ports), f"each backend at its port: {got}")
    ok0, asked0 = lb.status()["resolve"]["ok"], dns.queries
    dns.answer = "127.0.0.6"
    check(lb.wait(lambda: lb.status()["resolve"]["changed"] >= 1 and
                  lb.status()["resolve"]["ok"] >= ok0 + 3, timeout=20) is not None,
          f"rounds follow the name: {lb.status()['resolve']}")
    rounds, asked = lb.status()["resolve"]["ok"] - ok0, dns.queries - asked0
    got = sorted(b["resolved"] for b in lb.service()["backends"])
    check(got == sorted(f"127.0.0.6:{p}" for p in ports), f"each at its port: {got}")
    check(asked <= rounds + 1, f"one query per round: {asked} in {rounds} rounds")
    check(lb.stop() == 0, "exit 0")
    dns.close()


def resolver_not_answering():
    """A name DNS must answer, a DNS server that never does (its resolver timeout 20 s):
    start-up checks and reloads give up after hashlb's own deadline and say so; the running
    config keeps serving, its admin endpoint answers again right after."""
    need_unshare()
    dns = SilentDns()
    a = Backend("a")
    late = Backend("late")
    names = Names("silent", "127.0.0.1 alpha\n", nss="files dns",
                  resolv=f"nameserver {dns.addr}\noptions timeout:20 attempts:1\n")
    base = [("a", f"alpha:{a.port}")]
    lb = Lb(config(base, health="enabled: false"), wrap=names.wrap())
    addr = lb.addr
    check(who(addr, client_ip(1)) == "a", "served by a (alpha, from the hosts file)")

    lb.rewrite(config(base + [("late", f"gamma.example.test:{late.port}")],
                      health="enabled: false"))
    t0 = time.time()
    rc, so, se = lb.ctl("reload")
    took = time.time() - t0
    check(rc != 0 and f"{lb.path}:14:18" in se and "no answer within 5000 ms" in se,
          f"the reload gives up on the silent resolver and says where: rc={rc} {se}")
    print(f"    reload gave up after {took:.1f} s (the resolver's own timeout: 20 s); "
          f"{dns.queries} queries reached the test's DNS server")
    check(dns.queries > 0, "the resolver did ask the test's DNS server")
    code, body = lb.http("GET", "/status")
    check(code == 200 and json.loads(body)["reloads"]["failed"] == 1,
          "the admin endpoint answers right after, and counts the failed reload")
    check(who(addr, client_ip(1)) == "a", "the running config still serves")

    rc, so, se = names.check(lb.path)
    check(rc == 1 and "no answer within 5000 ms" in se, f"hashlb check the same: rc={rc} {se}")

    # the abandoned lookups are still running in glibc when the next reload comes
    lb.rewrite(config(base, health="enabled: false"))
    rc, so, se = lb.ctl("reload")
    check(rc == 0, f"a reload without the name succeeds: {se.strip()}")
    check(lb.stop() == 0, "exit 0 (with lookups still pending in the resolver)")
    dns.close()
    for x in (a, late):
        x.stop()


def threads_of(pid):
    """How many threads process <pid> has now (0 once it is gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def silent_resolver_does_not_pile_up_threads():
    """resolve_every behind a DNS server that never answers: a round gives up on its lookups
    after 5 s, but a getaddrinfo() cannot be interrupted and runs on to the resolver's own
    timeout (10 s here). Each round started 16 more lookup threads while those of the rounds
    before still waited: 32 at once here, 80 behind resolv.conf's defaults with
    resolve_every: 1s. Now a round waits for them, skipped and counted as failed with why,
    so at most 16 run at once; once they are done the names are followed again."""
    need_unshare()
    dns = SilentDns()
    a, a2 = backends_on_one_port([("a", "127.0.0.1"), ("a2", "127.0.0.3")])
    silent = [(f"s{i}", f"silent{i}.example.test:{a.port}") for i in range(20)]
    names = Names("pileup", "127.0.0.1 alpha\n" +
                  "".join(f"127.0.0.{10 + i} silent{i}.example.test\n" for i in range(20)),
                  nss="files dns",
                  resolv=f"nameserver {dns.addr}\noptions timeout:10 attempts:1\n")
    cfg = "resolve_every: 1s\n" + config([("a", f"alpha:{a.port}")] + silent,
                                         health="enabled: false")
    lb = Lb(cfg, wrap=names.wrap())
    pid = lb.proc.pid
    # a round with every name in the hosts file: its threads come and go
    check(lb.wait(lambda: lb.status()["resolve"]["ok"] >= 1, timeout=15) is not None,
          "a round resolves every name from the hosts file")
    base = threads_of(pid)
    failed0 = lb.status()["resolve"]["failed"]
    names.set_hosts("127.0.0.1 alpha\n")  # the silentN names now ask DNS, never answered
    most, seen = 0, {}

    def rounds_failed(n):
        nonlocal most, seen
        most = max(most, threads_of(pid) - base)
        seen = lb.status()["resolve"]
        return seen["failed"] >= failed0 + n

    # (before the fix: a round of 16 threads every 6 s, each alive 10 s)
    check(lb.wait(lambda: rounds_failed(4), timeout=60) is not None,
          f"rounds fail while DNS is silent: {lb.status()['resolve']}")
    # read as the 4th failed: the first gave up at 5 s, the next ones skipped while its 16
    # lookups wait 10 s (read later, a round started after them may have failed otherwise)
    st = {"resolve": seen}
    check(backend_of(lb, "s0")["resolved"] == f"127.0.0.10:{a.port}",
          "the silent names keep their addresses")
    # alpha moves, and the silentN names are back in the hosts file: the rounds skipped while
    # the stuck lookups wait follow them once those are done (left to the silent DNS server,
    # each round after would give up on them 5 s later, and only then apply alpha's move)
    names.set_hosts("127.0.0.3 alpha\n" +
                    "".join(f"127.0.0.{10 + i} silent{i}.example.test\n" for i in range(20)))
    for _ in range(20):  # and a while longer
        rounds_failed(0)
        time.sleep(0.1)
    print(f"    at most {most} threads above the {base} before DNS went silent; "
          f"{dns.queries} queries reached the test's DNS server")
    check(most <= 16, f"at most 16 lookup threads alive at once: {most}")
    check("round skipped" in (st["resolve"]["last_error"] or "") and
          "still wait on the resolver" in st["resolve"]["last_error"],
          f"a round skipped says why: {st['resolve']}")
    check(lb.wait_log(r"msg=\"names not resolved, the backends keep their addresses\".*"
                      r"round skipped: \d+ lookups of an earlier one still wait"),
          "and is logged as a round that failed")
    # the stuck lookups end at the resolver's timeout; the next round follows the names again
    took = lb.wait(lambda: backend_of(lb, "a")["resolved"] == f"127.0.0.3:{a.port}",
                   timeout=90)
    check(took is not None, f"once the stuck lookups are done, alpha is followed again: "
          f"{lb.status()['resolve']}")
    check(lb.stop() == 0, "exit 0")
    dns.close()
    for x in (a, a2):
        x.stop()


def reloads_behind_a_silent_resolver_do_not_pile_up_threads():
    """Reloads behind a DNS server that never answers (timeout 30 s): each gives up on its
    lookups after 5 s, which run on to the resolver's timeout. A reload started 16 lookups
    of its own whatever still ran, and asked again the names still asked: two reloads, 32
    threads waiting on the resolver (three, 48). Now reloads have 16 threads, as the rounds
    do: a reload waits up to its 5 s for one, asks no name still asked, and says why."""
    need_unshare()
    dns = SilentDns()
    a = Backend("a")
    names = Names("reloads", "127.0.0.1 alpha\n", nss="files dns",
                  resolv=f"nameserver {dns.addr}\noptions timeout:30 attempts:1\n")
    base = [("a", f"alpha:{a.port}")]
    lb = Lb(config(base, health="enabled: false"), wrap=names.wrap())
    pid = lb.proc.pid
    base_threads = threads_of(pid)
    silent = [(f"s{i}", f"silent{i}.example.test:{a.port}") for i in range(20)]
    lb.rewrite(config(base + silent, health="enabled: false"))
    errors, most = [], 0
    for _ in range(2):
        rc, so, se = lb.ctl("reload")
        errors.append(se.strip())
        most = max(most, threads_of(pid) - base_threads)
        check(rc != 0, f"the reload fails: the names do not resolve: {se.strip()}")
    print(f"    at most {most} threads above the {base_threads} before; {dns.queries} queries "
          f"reached the test's DNS server")
    check(most <= 16, f"at most 16 lookup threads alive at once: {most}")
    check("no answer within 5000 ms" in errors[0], f"the first gives up after 5 s: {errors[0]}")
    check(all("lookups of earlier reloads still wait on the resolver" in e or
              "was not asked again" in e for e in errors[1:]),
          f"the next one says the lookups still wait: {errors[1:]}")
    check(who(lb.addr, client_ip(1)) == "a", "the running config still serves")
    check(lb.stop() == 0, "exit 0")
    dns.close()
    a.stop()


def reload_not_held_by_stuck_rounds():
    """resolve_every behind a DNS server that never answers for 20 names: the rounds' 16
    lookup threads wait on it. A reload that drops those names (and adds one from the hosts
    file) is applied: the rounds' stuck lookups do not hold it, reloads have 16 threads of
    their own. Counted against the rounds' 16, it failed ("names not asked")."""
    need_unshare()
    dns = SilentDns()
    a = Backend("a")
    names = Names("unheld", "127.0.0.1 alpha\n127.0.0.1 beta\n", nss="files dns",
                  resolv=f"nameserver {dns.addr}\noptions timeout:30 attempts:1\n")
    silent = [(f"s{i}", f"silent{i}.example.test:{a.port}") for i in range(20)]
    hosts = "127.0.0.1 alpha\n" + "".join(f"127.0.0.1 silent{i}.example.test\n"
                                          for i in range(20))
    names.set_hosts(hosts)
    lb = Lb("resolve_every: 1s\n" + config([("a", f"alpha:{a.port}")] + silent,
                                           health="enabled: false"), wrap=names.wrap())
    pid = lb.proc.pid
    base = threads_of(pid)
    failed0 = lb.status()["resolve"]["failed"]
    names.set_hosts("127.0.0.1 alpha\n127.0.0.1 beta\n")  # the silent names ask DNS now
    check(lb.wait(lambda: lb.status()["resolve"]["failed"] > failed0, timeout=20) is not None,
          "a round fails on the silent names")
    stuck = threads_of(pid) - base
    lb.rewrite("resolve_every: 1s\n" + config([("a", f"alpha:{a.port}"), ("b", f"beta:{a.port}")],
                                              health="enabled: false"))
    rc, so, se = lb.ctl("reload")
    print(f"    {stuck} lookup threads stuck when the reload came")
    check(stuck >= 16, f"the rounds' 16 lookups are stuck: {stuck}")
    check(rc == 0 and backend_of(lb, "b")["resolved"] == f"127.0.0.1:{a.port}",
          f"the reload without the silent names is applied: rc={rc} {se.strip()}")
    check(lb.stop() == 0, "exit 0")
    dns.close()
    a.stop()


def stuck_name_does_not_hold_the_others():
    """resolve_every, one name whose lookup hangs (its zone's DNS server never answers; the
    resolver's own timeout 30 s, twice) and another that moves: the moved one is followed
    within a round or two while the stuck lookup still runs, the stuck name not asked again
    (it keeps its address, and the round says why). A round waited while any lookup of an
    earlier one ran, so one dead zone held every name of the config at its old address."""
    dns, a, a2, b, names, lb = alpha_and_other("stuck", "stuck.example.test",
                                                "timeout:30 attempts:2")
    pid = lb.proc.pid
    check(lb.wait(lambda: lb.status()["resolve"]["ok"] >= 1, timeout=15) is not None,
          "a round resolves both names from the hosts file")
    base = threads_of(pid)
    names.set_hosts("127.0.0.1 alpha\n")  # stuck.example.test now asks DNS, never answered
    check(lb.wait(lambda: dns.queries > 0, timeout=15) is not None,
          "the stuck name's lookup reaches the silent DNS server")
    failed0 = lb.status()["resolve"]["failed"]
    # the round that asked it gives up after 5 s; the lookup runs on (60 s)
    check(lb.wait(lambda: lb.status()["resolve"]["failed"] >= failed0 + 2, timeout=30)
          is not None, f"rounds fail while the lookup hangs: {lb.status()['resolve']}")
    asked = dns.queries
    names.set_hosts("127.0.0.3 alpha\n")
    took = lb.wait(lambda: backend_of(lb, "a")["resolved"] == f"127.0.0.3:{a.port}",
                   timeout=25)
    res = lb.status()["resolve"]
    check(took is not None, f"alpha is followed while the stuck lookup still runs: {res}")
    err = res["last_error"] or ""
    check(f"{lb.path}:15:18" in err and "was not asked again" in err and
          "still waits on the resolver" in err,
          f"the round says the stuck name was not asked again, and where: {err}")
    logged = [l for l in lb.log if "names not resolved" in l and "stuck.example.test" in l]
    check(len(logged) == 1 and "no answer within 5000 ms" in logged[0],
          "the log says it once, as the round that asked it found it: the rounds that did not "
          f"ask it again fail as the same failure: {logged}")
    check(backend_of(lb, "b")["resolved"] == f"127.0.0.1:{b.port}",
          "the stuck name keeps its address")
    extra = threads_of(pid) - base
    print(f"    {dns.queries} queries reached the silent DNS server ({asked} before alpha "
          f"moved); {extra} threads above the {base} before")
    check(dns.queries <= 4, f"one lookup's queries (A and AAAA, tried twice at most), not "
          f"one lookup per round: {dns.queries}")
    check(extra <= 1, f"one lookup thread left waiting, not one per round: {extra}")
    on = {c: lb.lookup([c])[c] for c in (client_ip(i) for i in range(40))}
    check(all(who(lb.addr, c) == "a2" for c in on if on[c] == "a"),
          "a's clients reach alpha's new address")
    check(all(who(lb.addr, c) == "b" for c in on if on[c] == "b"), "b's still reach b")
    check(lb.stop() == 0, "exit 0 (with the stuck lookup still running)")
    dns.close()
    for x in (a, a2, b):
        x.stop()


def msg_lines(lb, what):
    """The lines of <lb>'s log whose message begins with <what>."""
    return [l for l in lb.log if f'msg="{what}' in l]


def refused_rounds(lb, rounds):
    """The lines of <lb>'s log saying a round's new addresses were refused, once one is and
    <rounds> more rounds have failed."""
    refused = 'names resolved, their new addresses refused: the backends keep theirs"'
    check(lb.wait(lambda: msg_lines(lb, refused), timeout=15) is not None,
          f"the round is refused, saying so: {lb.log[-3:]}")
    failed0 = lb.status()["resolve"]["failed"]
    check(lb.wait(lambda: lb.status()["resolve"]["failed"] >= failed0 + rounds, timeout=30)
          is not None, f"{rounds} more rounds refused: {lb.status()['resolve']}")
    return msg_lines(lb, refused)


def round_refused_says_so():
    """A round whose names resolve but whose new addresses cannot be applied (here: an
    each_address name gaining 9 addresses, beside a weight of 25 set at run time, passes
    table_memory; the config's weights alone fit) is logged as refused, with the reload's
    error at its position, once, and the backends keep their addresses. Before, it was logged
    as `names not resolved`, though every name was, and each round logged `names resolve
    again` before it: two lines a second."""
    need_unshare()
    hosts = [f"127.0.0.{21 + i}" for i in range(10)]
    names = Names("refused", f"{hosts[0]} pool\n")
    # table_memory at line 2, column 15; ring of vnodes 1000: about 32 bytes a point
    cfg = "resolve_every: 1s\ntable_memory: 1MiB\n" + config(
        [("pool", "pool:9", "each_address: true"), ("b", "127.0.0.1:9")], scheme="ring",
        extra="vnodes: 1000", health="enabled: false")
    lb = Lb(cfg, wrap=names.wrap())
    rc, so, se = lb.ctl("set", "b", "weight", "25")  # 26,000 points: within 1 MiB
    check(rc == 0, f"ctl set b weight 25: {rc} {se}")

    names.set_hosts("".join(f"{h} pool\n" for h in hosts))  # 35,000 points: past it
    got = refused_rounds(lb, 3)
    check(len(got) == 1 and "line=2 column=15" in got[0] and
          "over table_memory 1 MiB (1048576 bytes): raise it" in got[0] and
          "rounds_failed=1" in got[0], f"logged once, at table_memory, in its words: {got}")
    was = lb.status()["resolve"]
    check(lb.wait(lambda: lb.status()["resolve"]["failed"] >= was["failed"] + 2, timeout=30)
          is not None and lb.status()["resolve"]["ok"] == was["ok"],
          f"a refused round counts as failed only, not as resolved too: {was} then "
          f"{lb.status()['resolve']}")
    check(not msg_lines(lb, "names not resolved") and not msg_lines(lb, "names resolve again"),
          f"not as names not resolved, nor as resolved again each round: "
          f"{msg_lines(lb, 'names not resolved')[:1]} {msg_lines(lb, 'names resolve again')[:1]}")
    check(sorted(b["name"] for b in lb.service()["backends"]) == ["b", f"pool@{hosts[0]}"],
          f"the backends keep their addresses: {lb.service()['backends']}")
    check(lb.stop() == 0, "exit 0")


def round_past_own_table_memory_says_so():
    """A round whose names resolve but whose new addresses put the config's own weights past
    table_memory (an each_address name of weight 4 gaining 9 addresses, no weight set at run
    time) is logged as refused, at the service, once, and the backends keep their addresses.
    Before, it was logged as `names not resolved`, though its error said "its names
    resolved": the resolver's own refusal gave the reason a failing name gives."""
    need_unshare()
    hosts = [f"127.0.0.{41 + i}" for i in range(10)]
    names = Names("ownmemory", f"{hosts[0]} pool\n")
    # ring of vnodes 1000, about 32 bytes a point: 5,000 points within 1 MiB, 41,000 past it
    cfg = "resolve_every: 1s\ntable_memory: 1MiB\n" + config(
        [("pool", "pool:9", "each_address: true", "weight: 4"), ("b", "127.0.0.1:9")],
        scheme="ring", extra="vnodes: 1000", health="enabled: false")
    line = cfg.splitlines().index("  - name: t") + 1
    lb = Lb(cfg, wrap=names.wrap())

    names.set_hosts("".join(f"{h} pool\n" for h in hosts))
    got = refused_rounds(lb, 2)
    check(len(got) == 1 and f"line={line} " in got[0] and "its names resolved" in got[0] and
          "over table_memory 1 MiB (1048576 bytes): raise it" in got[0] and
          "rounds_failed=1" in got[0], f"logged once, at the service, in its words: {got}")
    check(not msg_lines(lb, "names not resolved"),
          f"not as names not resolved: {msg_lines(lb, 'names not resolved')[:1]}")
    check(sorted(b["name"] for b in lb.service()["backends"]) == ["b", f"pool@{hosts[0]}"],
          f"the backends keep their addresses: {lb.service()['backends']}")
    check(lb.stop() == 0, "exit 0")


def round_past_backends_max_says_so():
    """A round whose each_address names expand past 65,535 backends in a service (64 entries
    of one name that grows from 1 address to 1,024) is logged as refused, saying how many
    backends, at the service's first backend, and /status's last_errors says the same; the
    backends keep their addresses. Before, it was logged as `names not resolved`, though
    every name was."""
    need_unshare()
    hosts = [f"127.0.{4 + i // 256}.{i % 256}" for i in range(1024)]
    names = Names("backendsmax", f"{hosts[1]} pool\n")
    cfg = "resolve_every: 1s\n" + config(
        [(f"p{i}", "pool:9", "each_address: true") for i in range(64)],
        health="enabled: false")
    line = cfg.splitlines().index("        address: pool:9") + 1
    lb = Lb(cfg, wrap=names.wrap())
    check(len(lb.service()["backends"]) == 64, "64 backends, one address each")

    names.set_hosts("".join(f"{h} pool\n" for h in hosts))
    got = refused_rounds(lb, 1)
    said = "service 't' has 65536 backends once its names are resolved: at most 65535"
    check(len(got) == 1 and f"line={line} " in got[0] and said in got[0],
          f"logged once, at the first backend, saying how many: {got}")
    check(not msg_lines(lb, "names not resolved"),
          f"not as names not resolved: {msg_lines(lb, 'names not resolved')[:1]}")
    errs = lb.status()["resolve"]["last_errors"]
    check(len(errs) == 1 and said in errs[0], f"last_errors says it: {errs}")
    check(sorted(b["name"] for b in lb.service()["backends"]) ==
          sorted(f"p{i}@{hosts[1]}" for i in range(64)),
          f"the backends keep their addresses: {lb.service()['backends'][:2]}")
    check(lb.stop() == 0, "exit 0")


def round_refused_by_its_backends_says_what():
    """A round whose each_address names expand into backends the table refuses, each its own
    way: a name another backend has, more backends than a Maglev table_size, a ring past the
    build's cap. Each is logged as refused (the names resolved), saying what is wrong, once,
    and /status' last_errors says it; the backends keep their addresses. Before, all three
    were logged as `names not resolved` (the resolver gave them the reason a failing name
    has), though every name was."""
    need_unshare()
    cases = [
        # the name's second address gives pool@127.0.0.62, which b is called already
        ("dupname", ["127.0.0.61", "127.0.0.62"], "maglev", "",
         [("pool", "pool:9", "each_address: true"), ("pool@127.0.0.62", "127.0.0.1:9")],
         "backend 'pool' (each_address) gives the name 'pool@127.0.0.62', which another "
         "backend of service 't' has"),
        # 2 backends within table_size 5, then 7
        ("smalltable", [f"127.0.0.{71 + i}" for i in range(6)], "maglev", "table_size: 5",
         [("pool", "pool:9", "each_address: true"), ("b", "127.0.0.1:9")],
         "service 't', its names resolved: Maglev table size 5 is smaller than the 7 backends"),
        # 500,000 points (vnodes 100000 x weights 4 + 1), then 4,100,000: past 256 MiB
        ("buildcap", [f"127.0.0.{81 + i}" for i in range(10)], "ring", "vnodes: 100000",
         [("pool", "pool:9", "each_address: true", "weight: 4"), ("b", "127.0.0.1:9")],
         "service 't', its names resolved: ring of 4100000 points (vnodes 100000 x weights "
         "summed 41) needs 295201077 bytes to build, above the cap of 268435456"),
    ]
    for tag, hosts, scheme, extra, backends, said in cases:
        names = Names(tag, f"{hosts[0]} pool\n")
        cfg = "resolve_every: 1s\n" + config(backends, scheme=scheme, extra=extra,
                                             health="enabled: false")
        lb = Lb(cfg, wrap=names.wrap())
        before = sorted(b["name"] for b in lb.service()["backends"])
        names.set_hosts("".join(f"{h} pool\n" for h in hosts))
        got = refused_rounds(lb, 1)
        check(len(got) == 1 and said in got[0] and
              "rounds_failed=1" in got[0],
              f"{tag}: logged once as refused, saying what is wrong: {got}")
        check(not msg_lines(lb, "names not resolved"),
              f"{tag}: not as names not resolved: {msg_lines(lb, 'names not resolved')[:1]}")
        errs = lb.status()["resolve"]["last_errors"]
        check(len(errs) == 1 and said in errs[0], f"{tag}: last_errors says it: {errs}")
        check(sorted(b["name"] for b in lb.service()["backends"]) == before,
              f"{tag}: the backends keep their addresses: {lb.service()['backends']}")
        check(lb.stop() == 0, f"{tag}: exit 0")


def round_making_a_ring_is_refused_as_such():
    """A round whose answer makes two services forward to one another (t's backend a name
    that moves to u's listen address, u's backend t's) is refused, the backends keeping their
    addresses, and logged as refused, saying the ring. Before, it was logged as `names not
    resolved` (the ring's refusal had the reason a failing name has), though the name had."""
    need_unshare()
    pt, pu = pick_port(), pick_port()
    names = Names("ring", "127.0.0.52 peer\n")
    cfg = "resolve_every: 1s\n" + config([("p", f"peer:{pu}")], listen=f"127.0.0.1:{pt}",
                                         health="enabled: false")
    cfg += (f"  - name: u\n    listen: 127.0.0.1:{pu}\n    health:\n      enabled: false\n"
            f"    backends:\n      - name: back\n        address: 127.0.0.1:{pt}\n")
    lb = Lb(cfg, wrap=names.wrap())
    names.set_hosts("127.0.0.1 peer\n")
    said = (f"backend 'back' at 127.0.0.1:{pt} is service 't' (listen 127.0.0.1:{pt}), which "
            "forwards back to service 'u': connections would loop (t -> u -> t)")
    got = refused_rounds(lb, 1)
    check(len(got) == 1 and said in got[0], f"logged as refused, saying the ring: {got}")
    check(not msg_lines(lb, "names not resolved"),
          f"not as names not resolved: {msg_lines(lb, 'names not resolved')[:1]}")
    check(backend_of(lb, "p")["resolved"] == f"127.0.0.52:{pu}",
          f"the backend keeps its address: {backend_of(lb, 'p')}")
    check(lb.stop() == 0, "exit 0")


def refused_with_a_failing_name(tag, first, weight_set):
    """A round where one name fails (it keeps its address) and the others' new addresses are
    refused past table_memory (<weight_set>: with a weight set at run time; else the config's
    own weights): both are logged, once, as one round failed (rounds_failed=1 on each line),
    and later rounds log neither again."""
    need_unshare()
    hosts = [f"127.0.0.{first + i}" for i in range(10)]
    names = Names(tag, f"{hosts[0]} pool\n127.0.0.{first + 10} other\n")
    pool = ("pool", "pool:9", "each_address: true") + (() if weight_set else ("weight: 4",))
    cfg = "resolve_every: 1s\ntable_memory: 1MiB\n" + config(
        [pool, ("o", "other:9"), ("b", "127.0.0.1:9")], scheme="ring", extra="vnodes: 1000",
        health="enabled: false")
    lb = Lb(cfg, wrap=names.wrap())
    if weight_set:
        rc, so, se = lb.ctl("set", "b", "weight", "25")
        check(rc == 0, f"ctl set b weight 25: {rc} {se}")

    names.set_hosts("".join(f"{h} pool\n" for h in hosts))  # other gone, pool past the cap
    got = refused_rounds(lb, 3)
    failed = msg_lines(lb, "names not resolved")
    check(len(got) == 1 and "over table_memory 1 MiB (1048576 bytes): raise it" in got[0] and
          "rounds_failed=1" in got[0], f"the refusal logged once, the first round's: {got}")
    check(len(failed) == 1 and "other" in failed[0] and "rounds_failed=1" in failed[0],
          f"the failing name logged too, once, in the same round (one round failed): {failed}")
    check(sorted(b["name"] for b in lb.service()["backends"]) ==
          ["b", "o", f"pool@{hosts[0]}"], f"the backends keep their addresses: "
          f"{lb.service()['backends']}")
    # /status: the round's two errors, the failing name's first (before, last_error alone,
    # the refusal: the name that failed was nowhere in /status)
    res = lb.status()["resolve"]
    errs = res.get("last_errors")
    check(isinstance(errs, list) and len(errs) == 2 and
          errs[0].startswith(f"{lb.path}:") and "other" in errs[0] and
          "does not resolve" in errs[0] and
          "over table_memory 1 MiB (1048576 bytes): raise it" in errs[1] and
          res["last_error"] == errs[1],
          f"/status lists both of the round's errors, the refusal its last_error: {res}")
    # hashlb ctl status too, a line each under one that says the round failed (before, it
    # said nothing: an operator reading it saw every name resolving)
    rc, so, se = lb.ctl("status")
    lines = so.splitlines()
    at = next((i for i, ln in enumerate(lines)
               if ln.startswith("last resolve round FAILED (2 errors):")), None)
    check(rc == 0 and at is not None and lines[at + 1:at + 3] == [f"  {e}" for e in errs],
          f"ctl status says the round failed, with both errors: {rc} {so[:600]} {se}")

    # pool's addresses within the cap: applied (other still failing); then past it again, a
    # refusal of other addresses than those now in use: said again, not taken for the first
    names.set_hosts("".join(f"{h} pool\n" for h in hosts[:2]))
    check(lb.wait(lambda: msg_lines(lb, "names resolved to new addresses, applied"),
                  timeout=15) is not None, f"pool's two addresses applied: {lb.log[-3:]}")
    res = lb.status()["resolve"]
    check(len(res["last_errors"]) == 1 and "other" in res["last_errors"][0] and
          res["last_error"] == res["last_errors"][0],
          f"a round with the name failing alone lists it alone: {res}")
    rc, so, se = lb.ctl("status")
    check(rc == 0 and f"last resolve round FAILED (1 error):\n  {res['last_errors'][0]}\n"
          in so, f"and so does ctl status: {rc} {so[:600]} {se}")
    names.set_hosts("".join(f"{h} pool\n" for h in hosts))
    refused = "names resolved, their new addresses refused"
    check(lb.wait(lambda: len(msg_lines(lb, refused)) >= 2, timeout=15) is not None,
          f"the refusal back after an applied round is logged again: {msg_lines(lb, refused)}")
    got = refused_rounds(lb, 2)
    failed = msg_lines(lb, "names not resolved")
    m = re.search(r" rounds_failed=(\d+)", got[-1])
    check(len(got) == 2 and m and int(m.group(1)) > 1,
          f"once more, in the same run of failed rounds, not each round: {got}")
    check(len(failed) == 1, f"the name that kept failing is not said again: {failed}")
    check(sorted(b["name"] for b in lb.service()["backends"]) ==
          ["b", "o", f"pool@{hosts[0]}", f"pool@{hosts[1]}"],
          f"the backends keep the addresses applied: {lb.service()['backends']}")
    check(lb.stop() == 0, "exit 0")


def round_refused_with_a_failing_name_says_both():
    """A round refused past table_memory by a weight set at run time, with a name failing
    beside it. Before, the round counted twice (its refusal's line said rounds_failed=2), and
    both lines were logged again each round: the two failures, remembered as one, alternated."""
    refused_with_a_failing_name("refusedname", 61, True)


def round_past_own_table_memory_with_a_failing_name_says_both():
    """A round past the config's own table_memory, with a name failing beside it. Before,
    only the refusal was logged: the name that failed was not said at all."""
    refused_with_a_failing_name("ownname", 81, False)


def failing_name_logged_once():
    """resolve_every: 1s, a name gone from the hosts file: the failure is logged once, not
    once a round; again when it changes (the name answers an address no connect can use), with
    the rounds failed in a row; and a line when the name resolves again. Every round logged
    the same line: an operator's log filled with it, one a second. A reload that applies
    clears /status's resolve.last_errors, as a round that resolves every name does."""
    need_unshare()
    a, b = Backend("a"), Backend("b")
    names = Names("logonce", "127.0.0.1 alpha\n127.0.0.1 beta\n")
    cfg = "resolve_every: 1s\n" + config([("a", f"alpha:{a.port}"), ("b", f"beta:{b.port}")],
                                         health="enabled: false")
    lb = Lb(cfg, wrap=names.wrap())

    def rounds_after(n):
        failed0 = lb.status()["resolve"]["failed"]
        check(lb.wait(lambda: lb.status()["resolve"]["failed"] >= failed0 + n, timeout=30)
              is not None, f"{n} more rounds fail: {lb.status()['resolve']}")

    names.set_hosts("127.0.0.1 alpha\n")
    rounds_after(4)
    got = msg_lines(lb, "names not resolved")
    check(len(got) == 1 and "line=15 column=18" in got[0] and "does not resolve" in got[0]
          and "rounds_failed=1" in got[0],
          f"4 rounds failing on beta log it once, where it is written: {got}")
    names.set_hosts("127.0.0.1 alpha\n0.0.0.0 beta\n")
    rounds_after(4)
    got = msg_lines(lb, "names not resolved")
    check(len(got) == 2 and "unspecified address" in got[1] and
          re.search(r"rounds_failed=([2-9]|\d\d)", got[1]),
          "the failure that changed is logged once more, with the rounds failed in a row: " +
          " | ".join(got))
    names.set_hosts("127.0.0.1 alpha\n127.0.0.1 beta\n")
    check(lb.wait(lambda: msg_lines(lb, "names resolve again"), timeout=15) is not None,
          "a line says the names resolve again")
    back = (msg_lines(lb, "names resolve again") or [""])[0]
    check(re.search(r"rounds_failed=([89]|\d\d)", back), f"with how many rounds failed: {back}")
    res = lb.status()["resolve"]
    check(res["last_errors"] == [] and res["last_error"] is None,
          f"/status: no error once a round resolves every name: {res}")
    rc, so, se = lb.ctl("status")
    check(rc == 0 and "config" in so and "resolve round" not in so,
          f"nor in ctl status: {rc} {so[:600]} {se}")
    names.set_hosts("127.0.0.1 alpha\n")
    rounds_after(2)
    got = msg_lines(lb, "names not resolved")
    check(len(got) == 3 and "rounds_failed=1" in got[2],
          f"a failure after that is logged again, once: {got[2:]}")
    # a reload that applies resolved every name: /status keeps no error of the rounds before
    # it. Before, it kept beta's, at a line of the file as it was, for a name the config no
    # longer has, and with resolve_every gone no round came to clear it
    res = lb.status()["resolve"]
    check(len(res["last_errors"]) == 1 and "beta" in res["last_errors"][0],
          f"/status says beta's failure: {res}")
    with open(lb.path, "w") as f:
        f.write(config([("a", f"alpha:{a.port}"), ("b", f"127.0.0.1:{b.port}")],
                       health="enabled: false"))
    rc, so, se = lb.ctl("reload")
    check(rc == 0, f"a reload without beta's name and resolve_every applies: {se.strip()}")
    check(lb.wait(lambda: len(msg_lines(lb, "names resolve again")) == 2, timeout=15)
          is not None, f"said in the log: {msg_lines(lb, 'names resolve again')}")
    res = lb.status()["resolve"]
    check(res["last_errors"] == [] and res["last_error"] is None,
          f"/status: no error left of the rounds before the reload: {res}")
    check(lb.stop() == 0, "exit 0")
    a.stop()
    b.stop()


def failed_reload_keeps_the_round():
    """A reload that fails while a resolve_every round waits for its lookup (a DNS server
    answering after 2 s): the round goes on and applies its answer, the name not asked again
    by a round. The reload gave the round up and the next came a period later: a reload
    refused, even for a syntax error, held a moved name at its old address a whole period.
    Refused for a syntax error, then after its names were resolved (a service listening
    where the admin endpoint does)."""
    dns, a, a2, cfg, lb = slow_name("failreload", "4s", 2)
    admin_port = lb.admin.rsplit(":", 1)[1]
    refused = (("syntax error", cfg + "  - name: [\n", 0),
               ("admin clash", cfg.replace("listen: 127.0.0.1:0", f"listen: 127.0.0.1:{admin_port}"),
                1))  # the reload asks the name itself
    for (why, text, own), answer in zip(refused, ("127.0.0.6", "127.0.0.5")):
        asked = in_a_round(lb, dns, answer)
        with open(lb.path, "w") as f:
            f.write(text)
        rc, so, se = lb.ctl("reload")
        check(rc != 0, f"the reload is refused ({why}): {se.strip()}")
        took = lb.wait(lambda: backend_of(lb, "a")["resolved"] == f"{answer}:{a.port}",
                       timeout=30)
        n = dns.queries - asked
        check(took is not None and n == 1 + own,
              f"after a reload refused ({why}) the round under way applies its answer, "
              f"the name asked {n} times (the round's{' and the reload' if own else ''}): "
              f"{backend_of(lb, 'a')['resolved']} {lb.status()['resolve']}")
    slow_name_stop(lb, dns, a, a2)


run_tests([names_resolved_and_followed_on_reload, names_followed_every,
           names_followed_say_how_many_clients_they_move,
           one_name_failing_does_not_stop_the_others, unusable_answer_does_not_stop_the_others,
           answer_in_another_order_moves_nothing, reload_keeps_a_rotated_name_in_place, renamed_host_of_the_same_address_is_logged,
           many_changes_logged_whole, change_of_a_name_with_a_comma_is_one,
           each_address_follows_the_name, each_address_after_a_name,
           each_address_of_one_address_closed,
           source_family_picks_the_address, link_local_name_is_refused, resolver_not_answering,
           silent_resolver_does_not_pile_up_threads, stuck_name_does_not_hold_the_others,
           ipv4_lookup_not_held_by_a_dual_one,
           reloads_behind_a_silent_resolver_do_not_pile_up_threads, reload_during_a_round,
           reload_not_held_by_stuck_rounds, one_lookup_per_name, failing_name_logged_once,
           round_refused_says_so,
           round_past_own_table_memory_says_so, round_past_backends_max_says_so,
           round_refused_by_its_backends_says_what,
           round_making_a_ring_is_refused_as_such,
           round_refused_with_a_failing_name_says_both,
           round_past_own_table_memory_with_a_failing_name_says_both,
           failed_reload_keeps_the_round])
