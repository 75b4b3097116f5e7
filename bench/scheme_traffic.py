#!/usr/bin/env python3
"""Ring against Maglev under real TCP traffic through hashlb: the articles' experiments
(spread, a node removed, a node added) with clients that connect, not keys that are looked up.

  python3 bench/scheme_traffic.py --hashlb build/src/cli/hashlb [--clients 3000] [--backends 3] \
      [--vnodes 100]

One hashlb, two services on the same --backends echo backends, one ring (--vnodes), one
Maglev (default table size). --clients clients, each from its own 127.0.0.0/8 address,
connect once to each service and read the greeting that names their backend. Then, for each
service: the clients a backend got against its share in GET /table (and
hashlb_backend_connections_total, which must agree); one backend set to maint (every client
connects again: those that moved, and where; only its own clients may move); back to ready
(every client back where it was); and a backend added by a reload (the clients that moved, all
of them to it, against 1/(N+1)). Exits 1 if a client reached a backend other than the one GET
/lookup names for it, or if a client that was not the removed backend's moved. Bounded: each
connect has a 5 s timeout and the run makes 8 x --clients connections."""
import collections
import json
import os
import socket
import sys
import time
import urllib.parse

from benchenv import arguments, count, parse

ap = arguments(__doc__)
ap.add_argument("--clients", type=count, default=3000, help="client addresses (at most 60,000)")
ap.add_argument("--backends", type=count, default=3,
                help="backends before the one added (2 to 50: one goes to maint)")
ap.add_argument("--vnodes", type=count, default=100, help="the ring's points per backend (at most 100000)")
args = parse(ap)
for opt, most in (("clients", 60000), ("backends", 50), ("vnodes", 100000)):
    if getattr(args, opt) > most:  # a process a backend; hashlb's own vnodes bound
        ap.error(f"argument --{opt}: at most {most}, not {getattr(args, opt)}")
if args.backends < 2:  # its clients went nowhere: a connection reset, a traceback
    ap.error(f"argument --backends: at least 2 (one goes to maint), not {args.backends}")

from ctltest import Lb  # noqa: E402
from lbtest import Backend  # noqa: E402

SOURCES = ["127.%d.%d.%d" % (100 + i // 62500, (i // 250) % 250, i % 250 + 1)
           for i in range(args.clients)]
names = [chr(ord("a") + i) if i < 26 else f"b{i}" for i in range(args.backends + 1)]
backends = [Backend(n) for n in names]


def cfg(n):
    out = ["workers: 2", "admin: 127.0.0.1:0", "services:"]
    for svc, table in (("ring", f"scheme: ring\n    vnodes: {args.vnodes}"),
                       ("maglev", "scheme: maglev")):
        out += [f"  - name: {svc}", "    listen: 127.0.0.1:0", f"    {table}",
                "    health:", "      enabled: false", "    backends:"]
        out += [f"      - {{name: {b.name}, address: '{b.addr}'}}" for b in backends[:n]]
    return "\n".join(out) + "\n"


def connect_all(addr):
    """{source: the backend that greeted it}."""
    got = {}
    for src in SOURCES:
        with socket.socket() as s:
            s.settimeout(5)
            s.bind((src, 0))
            s.connect(addr)
            got[src] = s.makefile().readline().strip()
    return got


def moves(before, after):
    return collections.Counter((before[k], after[k]) for k in before if before[k] != after[k])


def get(lb, path, **q):
    code, body = lb.http("GET", path + "?" + urllib.parse.urlencode(q))
    assert code == 200, (path, q, code, body)
    return body


failed = []
lb = Lb(cfg(args.backends))
try:
    addrs = lb.service_addrs()
    print(f"{args.clients} clients, {args.backends} backends, ring vnodes={args.vnodes}, "
          f"Maglev table_size=65537\n")
    first = {svc: connect_all(addrs[svc]) for svc in ("ring", "maglev")}
    metrics = get(lb, "/metrics", **{"name[]": "hashlb_backend_connections_total"})
    print("| service | backend | clients | % of clients | table share % | connections_total |")
    print("|---|---|---:|---:|---:|---:|")
    for svc, got in first.items():
        table = json.loads(get(lb, "/table", service=svc, format="json"))
        share = {b["name"]: 100 * b["share"] for b in table["backends"]}
        n = collections.Counter(got.values())
        for b in names[:args.backends]:
            m = f'hashlb_backend_connections_total{{service="{svc}",backend="{b}"}} '
            total = next((int(l[len(m):]) for l in metrics.splitlines() if l.startswith(m)), -1)
            print(f"| {svc} | {b} | {n[b]} | {100 * n[b] / args.clients:.1f} | "
                  f"{share[b]:.1f} | {total} |")
            if total != n[b]:
                failed.append(f"{svc}/{b}: {n[b]} clients, connections_total {total}")
        wrong = [s for s in SOURCES[:200]
                 if json.loads(get(lb, "/lookup", service=svc, client=s))["backend"] != got[s]]
        if wrong:
            failed.append(f"{svc}: {len(wrong)} of 200 clients not where GET /lookup says")
    victim = names[0]
    print(f"\n| service | change | moved | % of clients | ideal % | where to | others moved |")
    print("|---|---|---:|---:|---:|---|---:|")
    for svc in ("ring", "maglev"):
        code, body = lb.http("POST", f"/set?service={svc}&backend={victim}&state=maint")
        assert code == 200, body
    for svc in ("ring", "maglev"):
        got = connect_all(addrs[svc])
        mv = moves(first[svc], got)
        others = sum(v for (a, _), v in mv.items() if a != victim)
        held = sum(1 for v in first[svc].values() if v == victim)
        print(f"| {svc} | {victim} to maint | {sum(mv.values())} | "
              f"{100 * sum(mv.values()) / args.clients:.2f} | {100 * held / args.clients:.2f} "
              f"(its own) | {', '.join(f'{v} to {b}' for (_, b), v in sorted(mv.items()))} "
              f"| {others} |")
        if others:
            failed.append(f"{svc}: {others} clients of other backends moved off them")
    for svc in ("ring", "maglev"):
        code, body = lb.http("POST", f"/set?service={svc}&backend={victim}&state=ready")
        assert code == 200, body
    for svc in ("ring", "maglev"):
        mv = moves(first[svc], connect_all(addrs[svc]))
        print(f"| {svc} | {victim} back to ready | {sum(mv.values())} | "
              f"{100 * sum(mv.values()) / args.clients:.2f} | 0 | - | - |")
        if mv:
            failed.append(f"{svc}: {sum(mv.values())} clients not back where they were")
    lb.rewrite(cfg(args.backends + 1))
    code, body = lb.http("POST", "/reload")
    assert code == 200, body
    new = names[args.backends]
    for svc in ("ring", "maglev"):
        mv = moves(first[svc], connect_all(addrs[svc]))
        to_new = sum(v for (_, b), v in mv.items() if b == new)
        print(f"| {svc} | {new} added | {sum(mv.values())} | "
              f"{100 * sum(mv.values()) / args.clients:.2f} | "
              f"{100 / (args.backends + 1):.2f} | {to_new} to {new} | "
              f"{sum(mv.values()) - to_new} |")
    print("\nothers moved: clients of another backend that moved (maint), or that moved "
          "elsewhere than to the backend added (reload): Maglev trades a few of the latter "
          "for its balance, the ring none.")
finally:
    lb.stop()
    for b in backends:
        b.stop()
for f in failed:
    print("FAIL:", f)
sys.exit(1 if failed else 0)
