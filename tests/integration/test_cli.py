#!/usr/bin/env python3
"""hashlb table / hashlb lookup: the commands agree with the table they dump, with an
independent XXH64 of the canonical tuple, keep healthy clients on their backend when
another goes down; every command refuses a malformed or inapplicable command line with
exit status 2 and the option's name, what fails as it runs with 1."""
import csv
import fcntl
import ipaddress
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile

from shims import Paused, shim_env  # noqa: E402
from lbtest import json_strict, listening_sockets, text_columns, wait_until

HASHLB = os.environ.get("HASHLB", "build/src/cli/hashlb")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


# hashlb steer runs in a network namespace of its own (its loopback down, nothing attached):
# every steer command here is one to be refused, and if a refusal regressed, the program it
# attached went to the namespace's lo, gone with it, not to the host's (which happened).
NO_HOST_NET = ("unshare", "--net")


def argv(*args):
    return [*NO_HOST_NET, HASHLB, *args] if args[:1] == ("steer",) else [HASHLB, *args]


def run(*args, ok=True):
    p = subprocess.run(argv(*args), capture_output=True, text=True, timeout=60)
    if ok and p.returncode != 0:
        raise SystemExit(f"hashlb {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    if p.returncode == 0 and "--json" in args:
        try:
            json_strict(p.stdout)
        except ValueError as e:
            check(False, f"hashlb {' '.join(args)}: not strict JSON ({e}): {p.stdout[:200]!r}")
    return p


def in_netns(*args, env=None):
    """hashlb ARGS in a network namespace of its own, its loopback up (127.0.0.1/8 and ::1, no
    neighbour entry, nothing attached): what runs beside this test on the host does not
    change what it finds."""
    return subprocess.run(["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" "$@"',
                           HASHLB, *args], capture_output=True, text=True, timeout=60, env=env)


# --- XXH64, written from the specification, independent of libxxhash ---
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                      0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)
M64 = (1 << 64) - 1


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def rnd(acc, lane):
    acc = (acc + lane * P2) & M64
    return (rotl(acc, 31) * P1) & M64


def merge(acc, val):
    acc ^= rnd(0, val)
    return (acc * P1 + P4) & M64


def xxh64(data, seed):
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
        while i + 32 <= n:
            for k in range(4):
                v[k] = rnd(v[k], int.from_bytes(data[i + 8 * k:i + 8 * k + 8], "little"))
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M64
        for k in range(4):
            h = merge(h, v[k])
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h ^= rnd(0, int.from_bytes(data[i:i + 8], "little"))
        h = (rotl(h, 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        h ^= (int.from_bytes(data[i:i + 4], "little") * P1) & M64
        h = (rotl(h, 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h ^= (data[i] * P5) & M64
        h = (rotl(h, 11) * P1) & M64
        i += 1
    h ^= h >> 33
    h = (h * P2) & M64
    h ^= h >> 29
    h = (h * P3) & M64
    return h ^ (h >> 32)


def canonical_src(client):
    """Canonical bytes of the source half: 16-byte address (v4 mapped), 2-byte port."""
    port = 0
    if client.startswith("["):
        host, _, rest = client[1:].partition("]")
        port = int(rest[1:]) if rest else 0
    elif client.count(":") == 1:
        host, p = client.split(":")
        port = int(p)
    else:
        host = client
    a = ipaddress.ip_address(host)
    raw = (b"\0" * 10 + b"\xff\xff" + a.packed) if a.version == 4 else a.packed
    return raw + port.to_bytes(2, "big")


def lookups(clients, backends, extra=(), key="src-ip"):
    out = run("lookup", "--key", key, "--json", *extra, ",".join(clients), *backends).stdout
    return {e["client"]: e for e in json.loads(out)}


def dump(backends, extra=()):
    lines = run("table", "--dump", *extra, *backends).stdout.splitlines()
    return [l.split(" ", 1) for l in lines]


clients = [f"10.{i // 250}.{i % 250}.{(i * 7) % 250 + 1}" for i in range(2000)]
clients += [f"[2001:db8::{i:x}]:{1000 + i}" for i in range(200)]
backends = ["alpha", "bravo", "charlie=2", "delta"]
names = ["alpha", "bravo", "charlie", "delta"]

# 1. The hash printed by lookup is XXH64 over the canonical layout, per key.
res = lookups(clients[:300] + clients[-50:], backends, ("--seed", "12345"))
for c, e in res.items():
    want = xxh64(canonical_src(c)[:16], 12345)
    check(int(e["hash"], 16) == want, f"src-ip hash of {c}: {e['hash']} != {want:016x}")
res = lookups(["10.1.2.3:4567", "[::1]:80"], backends, ("--seed", "7"), key="src-ip-port")
for c, e in res.items():
    check(int(e["hash"], 16) == xxh64(canonical_src(c), 7), f"src-ip-port hash of {c}")

# 2. Maglev: lookup answers what the dumped table holds at slot (h >> 32) * M >> 32.
M = 1009
table = dump(backends, ("--table-size", str(M)))
check(len(table) == M, f"maglev dump has {len(table)} lines, want {M}")
check([int(s) for s, _ in table] == list(range(M)), "maglev dump slots are 0..M-1 in order")
res = lookups(clients, backends, ("--table-size", str(M)))
for c, e in res.items():
    slot = ((int(e["hash"], 16) >> 32) * M) >> 32
    check(e["backend"] == table[slot][1], f"maglev lookup of {c} disagrees with the dump")
    check(len(set(e["preference"])) == len(e["preference"]) == 3, f"preference of {c} distinct")
    check(e["preference"][0] == e["backend"], f"preference of {c} starts with its backend")
summary = json.loads(run("table", "--json", "--table-size", str(M), *backends).stdout)
for b in summary["backends"]:
    slots = sum(1 for _, n in table if n == b["name"])
    check(abs(slots / M - b["share"]) < 1e-6, f"share of {b['name']} matches its slots")

# 3. Ring: lookup answers the owner of the first point at or after the hash.
ring = dump(backends, ("--scheme", "ring", "--vnodes", "50"))
pos = [int(p, 16) for p, _ in ring]
check(len(ring) == 50 * 5, f"ring dump has {len(ring)} points, want 250")
check(pos == sorted(pos), "ring dump is sorted by position")
res = lookups(clients, backends, ("--scheme", "ring", "--vnodes", "50"))
for c, e in res.items():
    h = int(e["hash"], 16)
    owner = next((n for p, n in zip(pos, (n for _, n in ring)) if p >= h), ring[0][1])
    check(e["backend"] == owner, f"ring lookup of {c} disagrees with the dump")

# 4. A backend down: only its clients move, spread over every survivor; back up: they return.
for scheme in ("maglev", "ring"):
    before = lookups(clients, backends, ("--scheme", scheme))
    after = lookups(clients, backends, ("--scheme", scheme, "--down", "bravo"))
    moved_to = {}
    for c in clients:
        b, a = before[c]["backend"], after[c]["backend"]
        if b != "bravo":
            check(a == b, f"{scheme}: {c} moved from healthy {b} to {a}")
        else:
            check(a != "bravo", f"{scheme}: {c} still on the down backend")
            moved_to[a] = moved_to.get(a, 0) + 1
    check(set(moved_to) == {"alpha", "charlie", "delta"},
          f"{scheme}: bravo's clients spread over every survivor ({moved_to})")
    again = lookups(clients, backends, ("--scheme", scheme))
    check(again == before, f"{scheme}: the table is the same once bravo is back")

# 5. The order of the backend list does not matter; the seed does.
fp = lambda *a: json.loads(run("table", "--json", *a).stdout)["fingerprint"]
check(fp("a", "b", "c=3") == fp("c=3", "a", "b"), "fingerprint independent of list order")
check(fp("--scheme", "ring", "a", "b") == fp("--scheme", "ring", "b", "a"), "ring: same")
check(fp("a", "b") != fp("--seed", "1", "a", "b"), "the seed changes the table")

# 6. Bad input: a usage error (the command line is wrong: an unknown option, a malformed or
# out-of-range value or argument, an option that does not apply, a name that names nothing)
# exits 2 naming the option, before anything is done; what fails as the command runs, 1.
SRC = os.environ.get("HASHLB_SOURCE_ROOT", ".")
DEMO = os.path.join(SRC, "configs", "demo.yaml")
tmp = tempfile.mkdtemp(prefix="hlb-cli-")
STEER_CFG = os.path.join(tmp, "steer.yaml")  # its MACs are not in lo's neighbour table
with open(STEER_CFG, "w") as f:
    f.write("services:\n  - name: k\n    listen: 127.0.0.1:18080\n    steering: kernel\n"
            "    interface: lo\n    backends:\n      - {name: a, address: '127.0.0.1:18081'}\n")
NO_FILE = os.path.join(tmp, "none.yaml")
ADMIN_PORT_0 = os.path.join(tmp, "port0.yaml")  # admin on a port the kernel picks
with open(ADMIN_PORT_0, "w") as f:
    f.write("admin: 127.0.0.1:0\nservices:\n  - name: w\n    listen: 127.0.0.1:0\n"
            "    backends:\n      - {name: a, address: '127.0.0.1:18081'}\n")
ADMIN_OFF = os.path.join(tmp, "admin-off.yaml")  # no admin endpoint
with open(ADMIN_OFF, "w") as f:
    f.write("admin: off\nservices:\n  - name: w\n    listen: 127.0.0.1:0\n"
            "    backends:\n      - {name: a, address: '127.0.0.1:18081'}\n")
VIP, BACKEND = ("--vip", "10.0.0.1:80"), ("-b", "a=10.0.0.2,mac=02:00:00:00:00:01")
ADMIN = ("--admin", "127.0.0.1:1")
for args, status, msg in [
    (("table", "a", "a"), 1, "same name"),
    # backends counted from 1, as "backend 1 has an empty name" counts them (it said
    # "backends 0 and 2": the core's indexes)
    (("table", "a", "b", "a"), 1, "hashlb table: backends 1 and 3 have the same name 'a'"),
    (("lookup", "10.0.0.1", "b", "a", "a"), 1,
     "hashlb lookup: backends 2 and 3 have the same name 'a'"),
    (("table", "--table-size", "1000", "a"), 1, "not prime"),
    (("table", "a=0", "b=0"), 1, "weight 0"),
    (("table", "--table-size", "3", "a", "b", "c", "d"), 1, "smaller than"),
    # what makes the size, and the option that raises the cap (it said "table needs N
    # bytes, above the cap of C" alone)
    (("table", "--max-bytes", "1000", "a"), 1,
     "hashlb table: Maglev table of 65537 slots for 1 backend needs "),
    (("table", "--max-bytes", "1000", "a"), 1, "above the cap of 1000 (--max-bytes raises it)\n"),
    (("lookup", "-s", "ring", "-v", "100000", "10.0.0.1", "a=10000"), 1,
     "hashlb lookup: ring of 1000000000 points (vnodes 100000 x weights summed 10000) needs "),
    # a weight that is no number 0..10000 is a malformed argument, as a bad option value
    # (it exited 1, the table's failure)
    (("table", "a=10001"), 2, "backend 'a': invalid weight '10001' (0..10000)"),
    (("table", "a=x"), 2, "backend 'a': invalid weight 'x'"),
    (("lookup", "10.0.0.1", "a=x"), 2, "backend 'a': invalid weight 'x'"),
    # --down naming no backend: 2 wherever it is given (table and lookup exited 1, steer 2)
    (("table", "--down", "x", "a"), 2, "--down names 'x', which is not a backend"),
    (("lookup", "--down", "x", "10.0.0.1", "a"), 2, "--down names 'x'"),
    (("lookup", "-c", DEMO, "--down", "x", "10.0.0.1"), 2, "--down names 'x'"),
    (("steer", "-i", "lo", *VIP, *BACKEND, "--down", "x"), 2, "--down names 'x'"),
    # before the host is asked for a MAC (10.0.0.2 is in no neighbour table): it said none, 1
    (("steer", "-i", "lo", *VIP, "-b", "a=10.0.0.2", "--down", "x"), 2, "--down names 'x'"),
    (("steer", "-i", "lo", *VIP, "-b", "a=10.0.0.2", "--drain", "x"), 2, "--drain names 'x'"),
    # the SPEC as --help gives it: dev= was left out
    (("steer", "-i", "lo", *VIP, "-b", "a=10.0.0.2", "-b", "b"), 2,
     "hashlb steer: backend 'b': expected NAME=IP[,mac=MAC][,weight=N][,dev=IFACE]\n"),
    # the service the name is not a backend of, and those it has (it said "which is not a
    # backend" alone: which service -c took, and how its backends are spelled, left to find)
    (("steer", "-c", STEER_CFG, "--down", "x"), 2,
     "hashlb steer: --down names 'x', which is not a backend of service 'k' (its backends: a)\n"),
    (("steer", "-c", STEER_CFG, "--drain", "nope"), 2,
     "hashlb steer: --drain names 'nope', which is not a backend of service 'k' (its "
     "backends: a)\n"),
    (("steer", "-i", "lo", *VIP, "-b", "a=10.0.0.2", "-b", "b=10.0.0.3", "--drain", "nope"), 2,
     "hashlb steer: --drain names 'nope', which is not a backend (the backends: a, b)\n"),
    (("lookup", "-c", DEMO, "--down", "x", "10.0.0.1"), 2, "which is not a backend of service "),
    (("table", "--down", "x", *"abcdefghij"), 2,
     "--down names 'x', which is not a backend (the backends: a, b, c, d, e, f, g, h, ... 10 "
     "in all)\n"),
    # an empty name in the list, said so (it said "names ''")
    (("steer", "-c", STEER_CFG, "--drain", "a,,b"), 2,
     "hashlb steer: --drain 'a,,b' has an empty name: give A,B,... (backend names, a comma "
     "between two)\n"),
    # and one after a comma that ends the list, as refused as one between two ("a," was
    # taken as "a": "a,b" cut short in a script went through silently)
    (("steer", "-c", STEER_CFG, "--drain", "a,"), 2,
     "hashlb steer: --drain 'a,' has an empty name: give A,B,... (backend names, a comma "
     "between two)\n"),
    (("steer", "-c", STEER_CFG, "--down", "a,"), 2, "--down 'a,' has an empty name"),
    (("table", "--down", "a,", "a", "b"), 2, "hashlb table: --down 'a,' has an empty name"),
    (("lookup", "--down", "a,", "10.0.0.1", "a", "b"), 2, "--down 'a,' has an empty name"),
    (("lookup", "-c", DEMO, "--down", ",", "10.0.0.1"), 2, "--down ',' has an empty name"),
    (("lookup", "-c", DEMO, "--service", "x", "10.0.0.1"), 2, "--service 'x'"),
    (("steer", "-c", STEER_CFG, "--service", "x"), 2, "--service 'x'"),
    (("steer", "-c", DEMO), 2, "no service has steering: kernel"),
    # an option that does not apply: --json with --dump (it printed the dump)
    (("table", "--dump", "--json", "a"), 2, "--json does not apply with --dump"),
    # steer: a malformed -b SPEC (it exited 1, as a failure)
    (("steer", "-i", "lo", *VIP, "-b", "a=bogus"), 2, "backend 'a': invalid IP address"),
    # no interface: to attach, a config names one too (it said "--iface is required" alone,
    # and the synopsis's -c FILE form takes none)
    (("steer",), 2, "hashlb steer: --iface is required (or --config FILE, whose service names "
     "its interface)\n"),
    # --stats and --detach take the config's interface too (it said "--iface is required" alone)
    (("steer", "--stats"), 2, "hashlb steer: --iface is required (or --config FILE, whose "
     "service names its interface)\n"),
    (("steer", "--detach"), 2, "hashlb steer: --iface is required (or --config FILE, whose "
     "service names its interface)\n"),
    # a name the config, table and lookup refuse (it was steered: "a b", a newline, a quote)
    (("steer", "-i", "lo", "--update", *VIP, "-b", "a=10.0.0.2,mac=02:00:00:00:00:02", "-b",
      'b c"=10.0.0.3,mac=02:00:00:00:00:03'), 2, "hashlb steer: backend 2: a name must be 1 to "
     "255 bytes without spaces, '=' or '\"' (nor control or invisible characters), and not '-' "
     "alone (what hashlb writes for no backend)\n"),
    (("steer", "-i", "lo", "--update", *VIP, "-b", "a\nb=10.0.0.2,mac=02:00:00:00:00:02"), 2,
     "hashlb steer: backend 1: a name must be"),
    (("steer", "-i", "lo", *VIP, "-b", "a=10.0.0.2,weight=x"), 2, "invalid option 'weight=x'"),
    (("steer", "-i", "lo", *VIP, "-b", "a=10.0.0.2,mac=zz"), 2, "invalid option 'mac=zz'"),
    # a VIP or a MAC that steers nothing (they were taken: the program matched no packet to
    # 0.0.0.0, sent the backend's to 00:00:00:00:00:00 or flooded them to every host). With
    # --update, so that a hashlb that takes them attaches nothing to the host's lo
    (("steer", "-i", "lo", "--update", "--vip", "0.0.0.0:80", *BACKEND), 2,
     "VIP '0.0.0.0:80' is a wildcard address"),
    (("steer", "-i", "lo", "--update", "--vip", "[::]:443", *BACKEND), 2,
     "VIP '[::]:443' is a wildcard address"),
    # what is wrong with a VIP said, as the config says it (it was "invalid VIP '...'
    # (ADDR:PORT or [V6]:PORT, at most 16)" whatever it was)
    (("steer", "-i", "lo", "--update", "--vip", "http://10.0.0.1:80", *BACKEND), 2,
     "hashlb steer: invalid VIP 'http://10.0.0.1:80' (ADDR:PORT or [V6]:PORT): a URL: write it "
     "without 'http://', as ADDR:PORT\n"),
    (("steer", "-i", "lo", "--update", "--vip", "10.0.0.1", *BACKEND), 2,
     "invalid VIP '10.0.0.1' (ADDR:PORT or [V6]:PORT): missing ':PORT'\n"),
    (("steer", "-i", "lo", "--update", "--vip", "10.0.0.1:0", *BACKEND), 2,
     "invalid VIP '10.0.0.1:0' (ADDR:PORT or [V6]:PORT): port 0 is out of range 1..65535\n"),
    # a VIP given twice (an IPv4 address and its IPv4-mapped form are one): the kernel keys
    # it once, but it was counted twice (one of the 16 places, "2 VIPs")
    (("steer", "-i", "lo", "--update", *VIP, *VIP, *BACKEND), 2, "VIP '10.0.0.1:80' given twice"),
    (("steer", "-i", "lo", "--update", *VIP, "--vip", "[::ffff:10.0.0.1]:80", *BACKEND), 2,
     "VIP '[::ffff:10.0.0.1]:80' given twice"),
    (("steer", "-i", "lo", "--update", *VIP, "-b", "a=10.0.0.2,mac=00:00:00:00:00:00"), 2,
     "invalid option 'mac=00:00:00:00:00:00' (mac=MAC of one host"),
    (("steer", "-i", "lo", "--update", *VIP, "-b", "a=10.0.0.2,mac=FF:ff:ff:ff:ff:ff"), 2,
     "invalid option 'mac=FF:ff:ff:ff:ff:ff'"),
    (("steer", "-i", "lo", *VIP, *BACKEND, "-v", "5"), 2, "hashlb steer: -v applies to scheme ring"),
    # steer: an interface name the kernel reads as another, as the config refuses it (-i lo:1
    # attached to lo, --detach -i lo:1 detached lo's program, dev=lo:1 sent through lo)
    (("steer", "-i", "lo:1", *VIP, *BACKEND), 2,
     "-i: 'lo:1' is not a valid interface name: ':' names an address label, not an "
     "interface (give 'lo')"),
    (("steer", "--iface", "lo:1", "--detach"), 2, "--iface: 'lo:1' is not a valid interface"),
    (("steer", "-c", STEER_CFG, "-i", "lo:1"), 2, "-i: 'lo:1' is not a valid interface"),
    (("steer", "-i", "lo", *VIP, "-b", "a=10.0.0.2,dev=lo:1"), 2,
     "backend 'a': dev 'lo:1' is not a valid interface name"),
    (("steer", "-i", "a/b", "--stats"), 2, "-i: 'a/b' is not a valid interface name"),
    # steer: what the action does not take was ignored
    (("steer", "-i", "lo", *VIP, *BACKEND, "--json"), 2, "--json applies only with --stats"),
    (("steer", "-i", "lo", "--detach", "--json"), 2, "--json applies only with --stats"),
    (("steer", "-i", "lo", "--stats", "--keep"), 2, "--keep does not apply with --stats"),
    (("steer", "-i", "lo", "--update", "--flows", "5", *VIP, *BACKEND), 2,
     "--flows does not apply with --update"),
    (("steer", "-i", "lo", "--detach", "--flows", "5"), 2, "--flows does not apply with --detach"),
    (("steer", "-i", "lo", "--stats", *VIP), 2, "--vip does not apply with --stats"),
    (("steer", "-i", "lo", "--stats", "--down", "a"), 2, "--down does not apply with --stats"),
    (("steer", "-i", "lo", "--stats", "--scheme", "ring"), 2, "--scheme does not apply with"),
    # hash_prefix on the command line: in range, src-ip only, not with -c (which sets it)
    (("steer", "-i", "lo", "--stats", "--ipv6-prefix", "64"), 2,
     "--ipv6-prefix does not apply with --stats"),
    (("steer", "-i", "lo", *VIP, *BACKEND, "--ipv4-prefix", "33"), 2,
     "invalid value '33' for option --ipv4-prefix (1..32)"),
    (("steer", "-i", "lo", *VIP, *BACKEND, "-k", "4-tuple", "--ipv4-prefix", "24"), 2,
     "--ipv4-prefix applies to the src-ip key, not 4-tuple"),
    (("steer", "-c", STEER_CFG, "--ipv6-prefix", "64"), 2,
     "--ipv6-prefix cannot be combined with -c"),
    (("steer", "-i", "lo", "--service", "k", *VIP, *BACKEND), 2, "--service needs --config"),
    # two actions: the last one won
    (("steer", "-i", "lo", "--stats", "--update"), 2, "--stats and --update exclude each other"),
    (("steer", "-i", "lo", "--stats", "--detach"), 2, "--stats and --detach exclude each other"),
    (("steer", "-i", "lo", *VIP, *BACKEND, "--flows", "0"), 2,
     "invalid value '0' for option --flows (1..402653184)"),
    # --flows past HASHLB_STEER_FLOWS_MAX, the config's steering_flows range: it was taken up
    # to 4294967295 and refused only as the program loaded (1)
    (("steer", "-i", "lo", *VIP, *BACKEND, "--flows", "402653185"), 2,
     "invalid value '402653185' for option --flows (1..402653184)"),
    (("steer", "-i", "lo", *VIP, *BACKEND, "--flows", "4294967295"), 2,
     "invalid value '4294967295' for option --flows (1..402653184)"),
    (("steer", "-c", STEER_CFG, "--flows", "402653185"), 2,
     "invalid value '402653185' for option --flows (1..402653184)"),
    # run: a usage error before the config is read (it was 1: the file's error first)
    (("run", "-c", NO_FILE, "--admin", "bogus"), 2, "invalid value 'bogus' for option --admin (ADDR:PORT, unix:/PATH"),
    # a link-local admin address, refused as the config's admin is (it failed at bind: EINVAL)
    (("run", "-c", NO_FILE, "--admin", "[fe80::1]:9901"), 2,
     "hashlb run: invalid value '[fe80::1]:9901' for option --admin: a link-local address, "
     "usable only with a zone ('%' and an interface), and zones are not supported: give a "
     "global or unique local address"),
    # but an option that sizes nothing only warns: a command line that started hashlb (a unit
    # file, an upgrade in place re-running it) must start it again; here the file's error follows
    (("run", "-c", NO_FILE, "--splice-after", "off", "--pipe-size", "8192"), 1,
     'msg="option ignored: nothing is spliced with --splice-after off" option=--pipe-size'),
    (("run", "-c", NO_FILE, "--splice-after", "off", "--splice-pipes", "8"), 1,
     'msg="option ignored: nothing is spliced with --splice-after off" option=--splice-pipes'),
    # both given, both said (only the last one given was named)
    (("run", "-c", NO_FILE, "--splice-after", "off", "--splice-pipes", "8", "--pipe-size", "8192"), 1,
     'msg="option ignored: nothing is spliced with --splice-after off" option=--splice-pipes '
     'self_pid='),
    # ctl: an option the command does not take was ignored; usage before the config is read
    (("ctl", *ADMIN, "-s", "x", "status"), 2, "hashlb ctl: -s does not apply to status"),
    (("ctl", *ADMIN, "--service", "x", "upgrade"), 2, "--service does not apply to upgrade"),
    (("ctl", *ADMIN, "--json", "metrics"), 2, "--json does not apply to metrics"),
    (("ctl", *ADMIN, "reload", "--force"), 2, "--force does not apply to reload"),
    (("ctl", *ADMIN, "close", "a", "--vip", "10.0.0.1:80"), 2, "--vip does not apply to close"),
    (("ctl", *ADMIN, "-s", "x", "table", "y"), 2, "the service is given twice"),
    # reload --pid: kill(2) takes 0 and -1 as a process group and every process
    (("ctl", *ADMIN, "status", "--pid", "1"), 2, "--pid does not apply to status"),
    (("ctl", "-c", NO_FILE, "reload", "--pid", "0"), 2,
     "invalid value '0' for option --pid (a process id, 1..2147483647)"),
    (("ctl", "-c", NO_FILE, "reload", "--pid", "-1"), 2, "invalid value '-1' for option --pid"),
    (("ctl", "-c", NO_FILE, "reload", "--pid"), 2, "option '--pid' requires an argument"),
    (("ctl", "-c", NO_FILE, "status", "extra"), 2,
     "hashlb ctl: wrong arguments for status: hashlb ctl status\n"),
    (("table",), 2, "no backends"),
    (("table", "--scheme", "bogus", "a"), 2, "invalid value"),
    # a client that is no address is a malformed argument (it exited 1)
    (("lookup", "999.1.1.1", "a"), 2, "invalid client"),
    (("lookup", "-c", DEMO, "bogus"), 2, "invalid client address 'bogus'"),
    (("lookup", "--key", "4-tuple", "--vip", "bogus", "10.0.0.1:5", "a"), 2,
     "invalid --vip address 'bogus'"),
    # what is wrong said, as the config and --admin say it (it was "invalid --vip address
    # 'http://10.0.0.1:80'" alone); the port optional, an address alone is never told ':PORT'
    (("lookup", "--key", "4-tuple", "--vip", "http://10.0.0.1:80", "10.0.0.1:5", "a"), 2,
     "hashlb lookup: invalid --vip address 'http://10.0.0.1:80': a URL: write it without "
     "'http://', as ADDR:PORT\n"),
    (("lookup", "--key", "4-tuple", "--vip", "10.0.0.1:99999", "10.0.0.1:5", "a"), 2,
     "invalid --vip address '10.0.0.1:99999': port 99999 is out of range 0..65535\n"),
    (("lookup", "bogus", "a"), 2, "hashlb lookup: invalid client address 'bogus': 'bogus' is "
     "not a numeric IPv4 address (host names are not resolved here)\n"),
    (("lookup", "[::zz]", "a"), 2,
     "invalid client address '[::zz]': '::zz' is not a numeric IPv6 address\n"),
    (("lookup", "::zz:80", "a"), 2, "invalid client address '::zz:80': '::zz:80' is not a "
     "numeric IPv6 address (with a port, it is written [ADDR]:PORT, as [::1]:80)\n"),
    (("frobnicate",), 2, "unknown command"),
    # ctl says which address it tried (from --admin, $HASHLB_ADMIN, -c or the default)
    (("ctl", "--admin", "127.0.0.1:1", "status"), 1, "admin endpoint at 127.0.0.1:1:"),
    (("ctl", "--admin", "unix:/nonexistent/hashlb.sock", "status"), 1,
     "admin endpoint at unix:/nonexistent/hashlb.sock:"),
    (("ctl", "--admin", "localhost", "status"), 2, "(HOST:PORT, [V6]:PORT or unix:/PATH)"),
    # unix:PATH given, the path wrong: said as the config says it (it was told to give unix:/PATH)
    # and the one condition it fails said (both were: "must be absolute and shorter than 108")
    (("ctl", "--admin", "unix:admin.sock", "status"), 2,
     "hashlb ctl: invalid value 'unix:admin.sock' for option --admin: the Unix socket path "
     "'admin.sock' is relative: it must be absolute (unix:/PATH)\n"),
    (("run", "-c", NO_FILE, "--admin", "unix:admin.sock"), 2,
     "hashlb run: invalid value 'unix:admin.sock' for option --admin: the Unix socket path "
     "'admin.sock' is relative: it must be absolute (unix:/PATH)\n"),
    (("ctl", "--admin", "unix:", "status"), 2,
     "hashlb ctl: invalid value 'unix:' for option --admin: 'unix:' names no socket path: "
     "write unix:/PATH\n"),
    (("run", "-c", NO_FILE, "--admin", "unix:/" + "x" * 107), 2,
     "hashlb run: invalid value 'unix:/" + "x" * 107 + "' for option --admin: the Unix socket "
     "path has 108 bytes: it must be shorter than 108\n"),
    # one parser for run's --admin and ctl's: ctl took a link-local address (and failed to
    # connect, EINVAL); a host name is ctl's alone, and run says why (it binds one address)
    (("ctl", "--admin", "[fe80::1]:9901", "status"), 2,
     "hashlb ctl: invalid value '[fe80::1]:9901' for option --admin: a link-local address, "
     "usable only with a zone ('%' and an interface), and zones are not supported: give a "
     "global or unique local address"),
    (("run", "-c", NO_FILE, "--admin", "localhost:9901"), 2,
     "hashlb run: invalid value 'localhost:9901' for option --admin (ADDR:PORT, unix:/PATH "
     "(absolute, under 108 bytes) or off): a host name: hashlb run listens on one address, "
     "which a name does not say (localhost may be ::1 and 127.0.0.1): write it in numbers, as "
     "127.0.0.1:9901; hashlb ctl --admin takes the name\n"),
    (("run", "-c", NO_FILE, "--admin", ":9901"), 2, "no address before ':9901': write one, "
     "as 127.0.0.1:9901, or 0.0.0.0:9901 for every IPv4 address, [::]:9901 for every address"),
    # a port alone, as the config's admin key says it (they said only the forms taken, ctl as
    # "--admin: bad admin address", unlike every other option's "invalid value")
    (("run", "-c", NO_FILE, "--admin", "26990"), 2,
     "hashlb run: invalid value '26990' for option --admin (ADDR:PORT, unix:/PATH (absolute, "
     "under 108 bytes) or off): a port alone: write ADDR:26990, as 127.0.0.1:26990\n"),
    (("ctl", "--admin", "26999", "status"), 2,
     "hashlb ctl: invalid value '26999' for option --admin (HOST:PORT, [V6]:PORT or "
     "unix:/PATH): a port alone: write ADDR:26999, as 127.0.0.1:26999\n"),
    (("ctl", "--admin", "unix:/" + "x" * 107, "status"), 2, "has 108 bytes: it must be shorter"),
    # with -c, --admin as run takes it (the unit's ExecReload): a host name is not
    (("ctl", "-c", "x.yaml", "--admin", "localhost:1", "status"), 2, "write it in numbers"),
    # -c FILE with admin on port 0: where the running hashlb listens is in its log, not the
    # file (ctl said "cannot reach the admin endpoint at 127.0.0.1:0: Connection refused")
    (("ctl", "-c", ADMIN_PORT_0, "status"), 1,
     "admin 127.0.0.1:0 has port 0, which the kernel picks for the running hashlb"),
    # -c FILE with admin: off: nothing to ask, and the way out when hashlb run was given one
    # (it said "FILE has the admin endpoint off" and no more)
    (("ctl", "-c", ADMIN_OFF, "status"), 1,
     "hashlb ctl: " + ADMIN_OFF + " has the admin endpoint off: no endpoint to ask (for a "
     "hashlb run started with --admin ADDR, give --admin ADDR)\n"),
    (("ctl", "-c", ADMIN_OFF, "--admin", "off", "status"), 1,
     "hashlb ctl: the admin endpoint is off (--admin off): no endpoint to ask\n"),
    (("ctl", "set", "a", "weight"), 2, "weight needs a value"),
    # a command given the wrong arguments says so, with its own synopsis (not the whole manual)
    (("ctl", "--admin", "127.0.0.1:1", "set", "a"), 2,
     "hashlb ctl: wrong arguments for set: hashlb ctl set [-s SERVICE] BACKEND "),
    (("ctl", "--admin", "127.0.0.1:1", "status", "x"), 2, "hashlb ctl: wrong arguments for status"),
    # a negative number is an argument (the endpoint refuses it), not an unknown option
    (("ctl", "--admin", "127.0.0.1:1", "set", "a", "weight", "-1"), 1, "admin endpoint at"),
    (("ctl", "lookup", "1.2.3.4", "--bogus"), 2, "hashlb ctl: unrecognized option '--bogus'"),
    # ctl's options after the command are read as before it, in getopt's every form: a unit's
    # "reload --pid=$MAINPID" was "unrecognized option '--pid=0'", as were -sNAME, --service=NAME,
    # --vip=ADDR:PORT, and --admin or --timeout after the command, or --vip before it
    (("ctl", *ADMIN, "reload", "--pid=0"), 2, "invalid value '0' for option --pid"),
    (("ctl", *ADMIN, "table", "--service=web"), 1, "admin endpoint at 127.0.0.1:1:"),
    (("ctl", *ADMIN, "table", "-sweb"), 1, "admin endpoint at 127.0.0.1:1:"),
    (("ctl", *ADMIN, "lookup", "--vip=10.0.0.1:80", "10.0.0.2"), 1, "admin endpoint at"),
    (("ctl", *ADMIN, "--vip", "10.0.0.1:80", "lookup", "10.0.0.2"), 1, "admin endpoint at"),
    (("ctl", *ADMIN, "--vip", "10.0.0.1:80", "close", "a"), 2, "--vip does not apply to close"),
    (("ctl", "status", *ADMIN), 1, "admin endpoint at 127.0.0.1:1:"),
    (("ctl", *ADMIN, "status", "--timeout", "0"), 2, "invalid value '0' for option --timeout"),
    (("ctl", *ADMIN, "status", "--timeout=0"), 2, "invalid value '0' for option --timeout"),
    (("ctl", *ADMIN, "status", "--json=1"), 2, "option '--json' takes no argument"),
    (("ctl", *ADMIN, "close", "a", "-s"), 2, "option '-s' requires an argument"),
    # after "--" nothing is an option: a backend named "-s" is the endpoint's to judge
    (("ctl", *ADMIN, "close", "--", "-s"), 1, "admin endpoint at"),
    # the config refuses these; the command line did not (0 meant the default, the other
    # scheme's option was ignored)
    (("table", "--scheme", "ring", "-v", "0", "a"), 2, "invalid value '0'"),
    (("table", "-m", "0", "a"), 2, "invalid value '0'"),
    # an option without a short form is named by its long name (it read "option --")
    (("table", "--max-bytes", "0", "a"), 2, "invalid value '0' for option --max-bytes"),
    # the option named as typed, short or long (it was always the long name)
    (("table", "-v", "5", "a"), 2, "hashlb table: -v applies to scheme ring"),
    (("table", "--vnodes", "5", "a"), 2, "hashlb table: --vnodes applies to scheme ring"),
    (("table", "--scheme", "ring", "-m", "7", "a"), 2, "-m applies to scheme maglev"),
    (("table", "--scheme", "ring", "--table-size", "7", "a"), 2,
     "--table-size applies to scheme maglev"),
    (("lookup", "-v", "5", "10.0.0.1", "a"), 2, "hashlb lookup: -v applies to scheme ring"),
    # an empty backend name is a malformed argument, as an empty weight is (it was exit 1,
    # "backend 0: name must be 1 to 255 bytes", as if the table could not be built)
    (("table", "", "a"), 2, "hashlb table: backend 1 has an empty name: give NAME or "
     "NAME=WEIGHT\n"),
    (("table", "a", "=2"), 2, "hashlb table: backend 2 has an empty name"),
    (("lookup", "10.0.0.1", "a", ""), 2, "hashlb lookup: backend 2 has an empty name"),
    # a name the config refuses, as a malformed argument: a space or a newline broke the
    # columns printed (it was a table, exit 0, with "a b" and "a\nb" rows)
    (("table", "a b", "c"), 2, "hashlb table: backend 1: a name must be 1 to 255 bytes without "
     "spaces, '=' or '\"' (nor control or invisible characters), and not '-' alone (what "
     "hashlb writes for no backend)\n"),
    (("lookup", "10.0.0.1", "a", "b\nc"), 2, "hashlb lookup: backend 2: a name must be"),
    (("table", "a", "b\u00a0=2"), 2, "hashlb table: backend 2: a name must be"),
    (("lookup", "10.0.0.1", 'a"b'), 2, "hashlb lookup: backend 1: a name must be"),
    (("table", "a", "b" * 256), 2, "hashlb table: backend 2: a name must be"),
    # "-", what lookup (and the connection log) writes for no backend: "10.0.0.1 - - HASH"
    # was both a client with no backend and one of a backend so named
    (("lookup", "10.0.0.1", "--", "-"), 2, "hashlb lookup: backend 1: a name must be"),
    (("table", "a", "--", "-=2"), 2, "hashlb table: backend 2: a name must be"),
    # an empty client is refused, not skipped
    (("lookup", "", "a", "b"), 2, "invalid client address ''"),
    (("lookup", "1.2.3.4,,5.6.7.8", "a", "b"), 2, "invalid client address ''"),
    (("run",), 2, "need -c FILE"),
    # the config file given without its -c: it said only "need -c FILE" (steer: "unexpected
    # argument 'lb.yaml'"), not how to give it
    (("check", "lb.yaml"), 2, "hashlb check: need -c FILE (the config file is given with -c: "
     "hashlb check -c lb.yaml)\n"),
    (("run", "lb.yaml"), 2, "hashlb run: need -c FILE (the config file is given with -c: "
     "hashlb run -c lb.yaml)\n"),
    (("steer", "lb.yml"), 2, "hashlb steer: unexpected argument 'lb.yml' (the config file is "
     "given with -c: hashlb steer -c lb.yml)\n"),
    (("steer", "-c", "a.yaml", "b.yaml"), 2, "hashlb steer: unexpected argument 'b.yaml'\n"),
    # an empty FILE (a unit's "-c ${HASHLB_CONFIG}" with the variable unset is one empty
    # argument) names no file: it was exit 1, ": error: cannot open the configuration"
    *((("check", "-c", ""), 2, "hashlb check: invalid value '' for option -c (a file name"),
      (("run", "--config", ""), 2, "hashlb run: invalid value '' for option --config"),
      (("lookup", "-c", "", "10.0.0.1"), 2, "hashlb lookup: invalid value '' for option -c"),
      (("steer", "-c", ""), 2, "hashlb steer: invalid value '' for option -c"),
      (("ctl", "-c", "", "status"), 2, "hashlb ctl: invalid value '' for option -c"),
      (("ctl", "reload", "--pid", "1", "--config="), 2,
       "hashlb ctl: invalid value '' for option --config")),
    # every command reads one FILE: a second -c is refused, naming it (check, run, lookup, steer
    # and ctl read the last one given, exit 0 on "check -c a.yaml -c b.yaml" with a.yaml unread)
    *((("check", "-c", "a.yaml", "-c", "b.yaml"), 2,
       "hashlb check: option -c given twice ('a.yaml', then 'b.yaml'): give one config file\n"),
      (("run", "-c", "a.yaml", "--config=b.yaml"), 2,
       "hashlb run: option --config given twice ('a.yaml', then 'b.yaml')"),
      (("lookup", "-c", "a.yaml", "-c", "b.yaml", "10.0.0.1"), 2,
       "hashlb lookup: option -c given twice"),
      (("steer", "-c", "a.yaml", "-c", "b.yaml"), 2, "hashlb steer: option -c given twice"),
      (("ctl", "-c", "a.yaml", "status", "-c", "b.yaml"), 2,
       "hashlb ctl: option -c given twice")),
    # and so is any option that takes one value, in every command and form: the last one was
    # taken, the first dropped unsaid ("ctl -s a ... -s b" acted on b, "run -w 2 --workers 4"
    # ran 4 workers)
    *(((*args,), 2, f"hashlb {args[0]}: option {opt} given twice ('{a}', then '{b}'): "
       "give it once\n")
      for args, opt, a, b in (
          (("run", "-c", NO_FILE, "-w", "2", "--workers=4"), "--workers", "2", "4"),
          (("run", "-c", NO_FILE, "--admin", "off", "--admin", "127.0.0.1:0"), "--admin", "off",
           "127.0.0.1:0"),
          (("run", "-c", NO_FILE, "--log-level", "warn", "--log-level", "debug"), "--log-level",
           "warn", "debug"),
          (("ctl", "-s", "a", "status", "-s", "b"), "-s", "a", "b"),
          (("ctl", "--service", "a", "table", "-sb"), "-s", "a", "b"),
          (("ctl", "-a", "127.0.0.1:1", "status", "--admin", "127.0.0.1:2"), "--admin",
           "127.0.0.1:1", "127.0.0.1:2"),
          (("ctl", "--pid", "1", "reload", "--pid=2"), "--pid", "1", "2"),
          (("ctl", "--vip", "10.0.0.1:80", "lookup", "--vip", "10.0.0.2:80", "1.2.3.4"), "--vip",
           "10.0.0.1:80", "10.0.0.2:80"),
          (("ctl", "-t", "5", "-t", "6", "status"), "-t", "5", "6"),
          (("lookup", "-k", "src-ip", "--key", "4-tuple", "10.0.0.1", "a"), "--key", "src-ip",
           "4-tuple"),
          (("lookup", "--vip", "10.0.0.1:80", "--vip", "10.0.0.2:80", "10.0.0.1", "a"), "--vip",
           "10.0.0.1:80", "10.0.0.2:80"),
          (("lookup", "-c", "a.yaml", "--service", "x", "--service", "y", "10.0.0.1"),
           "--service", "x", "y"),
          (("table", "-S", "1", "--seed", "2", "a", "b"), "--seed", "1", "2"),
          (("table", "-s", "ring", "-s", "maglev", "a"), "-s", "ring", "maglev"),
          (("steer", "-i", "lo", "-i", "hlb-no-such0", "--stats"), "-i", "lo", "hlb-no-such0"),
          (("steer", "-c", "a.yaml", "--service", "x", "--service", "y"), "--service", "x", "y"),
          # (an interface that does not exist: a steer let through attaches nothing)
          (("steer", "-i", "hlb-no-such0", "--mode", "xdp", "--mode", "tc", *VIP, *BACKEND),
           "--mode", "xdp", "tc"))),
    (("run", "-c", "x.yaml", "extra"), 2, "unexpected argument 'extra'"),
    # a key that hashes the port wants one: port 0 is no client's
    (("lookup", "--key", "src-ip-port", "10.0.0.1", "a", "b"), 2, "has no port"),
    # an IPv6 address without brackets, its port meant: told how to write it (it said "give
    # ADDR:PORT" alone, which read as what was given)
    (("lookup", "--key", "src-ip-port", "::1:5555", "a", "b"), 2,
     "client '::1:5555' has no port, and the src-ip-port key hashes it: give ADDR:PORT (an IPv6 address with a port is written [ADDR]:PORT, as [::1]:80)"),
    (("lookup", "--key", "4-tuple", "--vip", "::1:80", "[::1]:5", "a", "b"), 2,
     "--vip '::1:80' has no port, and the 4-tuple key hashes it: give ADDR:PORT (an IPv6 address with a port is written [ADDR]:PORT, as [::1]:80)"),
    # and the 4-tuple key the address clients connect to: 0.0.0.0:0 is no connection's
    (("lookup", "--key", "4-tuple", "10.0.0.1:5", "a", "b"), 2, "give --vip ADDR:PORT"),
    # and a --vip without a port is none either (it hashed port 0: a wrong answer, exit 0)
    (("lookup", "--key", "4-tuple", "--vip", "10.0.0.9", "10.0.0.1:5", "a", "b"), 2,
     "--vip '10.0.0.9' has no port"),
]:
    p = run(*args, ok=False)
    check(p.returncode == status, f"hashlb {' '.join(args)}: exit {p.returncode}, want {status}")
    check(msg in p.stderr, f"hashlb {' '.join(args)}: stderr {p.stderr!r} lacks {msg!r}")

# An empty list names no backend, given alone or after another (a script's empty variable:
# --down "$DOWN"): what is down is what the other lists name. "--down a --down ''" is not
# "a," with an empty name after it.
for extra, want_down in (((), ()), (("--down", ""), ()), (("--down", "a", "--down", ""), ("a",)),
                         (("--down", "", "--down", "a"), ("a",))):
    p = run("table", *extra, "--dump", "a", "b")
    want = run("table", *[x for d in want_down for x in ("--down", d)], "--dump", "a", "b")
    check(p.stdout == want.stdout, f"hashlb table {' '.join(extra)}: {p.stdout[:200]!r}")
    p = run("lookup", *extra, "10.0.0.1", "a", "b")
    want = run("lookup", *[x for d in want_down for x in ("--down", d)], "10.0.0.1", "a", "b")
    check(p.stdout == want.stdout, f"hashlb lookup {' '.join(extra)}: {p.stdout!r}")

# An endpoint that cannot be reached is said once, not once per client of ctl lookup (each of
# which could wait --timeout for an endpoint that does not answer): it was said 3 times.
p = run("ctl", *ADMIN, "lookup", "10.0.0.1", "10.0.0.2", "10.0.0.3", ok=False)
check(p.returncode == 1 and p.stdout == "" and p.stderr ==
      "hashlb ctl: cannot reach the admin endpoint at 127.0.0.1:1: Connection refused\n",
      f"hashlb ctl lookup of 3 clients, no endpoint: exit {p.returncode}, stderr {p.stderr!r}")

# An empty $HASHLB_ADMIN (a shell's "export HASHLB_ADMIN=", or one set from an empty variable)
# is no address given: the default is asked, as most tools take an empty variable for unset.
# It was a usage error, exit 2: "$HASHLB_ADMIN: bad admin address ''". In a network namespace
# of its own, where nothing listens at the default address whatever runs beside this test.
p = subprocess.run(["unshare", "--net", HASHLB, "ctl", "status"], capture_output=True,
                   text=True, timeout=60, env=dict(os.environ, HASHLB_ADMIN=""))
check(p.returncode == 1 and "hashlb ctl: cannot reach the admin endpoint at 127.0.0.1:9901:"
      in p.stderr, f"ctl status with HASHLB_ADMIN='': exit {p.returncode}, stderr {p.stderr!r}")

# Nothing at the default address, no address given: most often a hashlb whose config sets its
# admin elsewhere, and the message says how to reach that one; an address given is not
# second-guessed. It said "Connection refused" alone, whatever hashlb ran. (A namespace of its
# own, its loopback up: refused, not unreachable.)
env = {k: v for k, v in os.environ.items() if k != "HASHLB_ADMIN"}
for args, hint in ((["ctl", "status"], True), (["ctl", "--admin", "127.0.0.1:9901", "status"], False)):
    p = in_netns(*args, env=env)
    want = ("hashlb ctl: cannot reach the admin endpoint at 127.0.0.1:9901: Connection refused" +
            (" (the default address: for a hashlb whose config sets admin: elsewhere, give "
             "-c FILE or --admin ADDR)" if hint else "") + "\n")
    check(p.returncode == 1 and p.stderr == want,
          f"hashlb {' '.join(args)}, nothing there: exit {p.returncode}, stderr {p.stderr!r}")

# Nothing at -c FILE's admin address: its key may have been changed since hashlb started, which
# a reload does not apply (the running hashlb serves its first address until a restart), and
# the message says so and how to reach it; --admin beside -c is not second-guessed. It said
# "Connection refused" alone, and the operator who had just reloaded the file could not tell why.
# Worded to be true where no hashlb runs at all, too (it said "a hashlb started before that key
# changed" as if one did): "is hashlb running?" first.
with open(os.path.join(tmp, "admin-moved.yaml"), "w") as f:
    f.write("admin: 127.0.0.1:9901\nservices:\n  - name: s\n    listen: 127.0.0.1:18080\n"
            "    backends:\n      - name: a\n        address: 127.0.0.1:1\n")
for args, hint in ((["ctl", "-c", f.name, "status"], True),
                   (["ctl", "-c", f.name, "--admin", "127.0.0.1:9901", "status"], False)):
    p = in_netns(*args, env=env)
    want = ("hashlb ctl: cannot reach the admin endpoint at 127.0.0.1:9901: Connection refused" +
            (f" ({f.name}'s admin key: is hashlb running? One started before that key changed "
             "serves its old address still, which a reload does not move: --admin ADDR "
             "reaches it)"
             if hint else "") + "\n")
    check(p.returncode == 1 and p.stderr == want,
          f"hashlb {' '.join(args)}, nothing there: exit {p.returncode}, stderr {p.stderr!r}")
os.unlink(f.name)
# the same for a Unix socket whose path is gone (the key moved to a new path, the running hashlb
# on the old one): nothing listens there either, and the note is said (it was for a refusal alone)
with open(os.path.join(tmp, "admin-unix-moved.yaml"), "w") as f:
    f.write(f"admin: unix:{tmp}/gone.sock\nservices:\n  - name: s\n    listen: 127.0.0.1:18080\n"
            "    backends:\n      - name: a\n        address: 127.0.0.1:1\n")
p = run("ctl", "-c", f.name, "status", ok=False)
want = (f"hashlb ctl: cannot reach the admin endpoint at unix:{tmp}/gone.sock: No such file or "
        f"directory ({f.name}'s admin key: is hashlb running? One started before that key "
        "changed serves its old address still, which a reload does not move: --admin ADDR "
        "reaches it)\n")
check(p.returncode == 1 and p.stderr == want,
      f"hashlb ctl -c FILE status, FILE's Unix socket path gone: exit {p.returncode}, "
      f"stderr {p.stderr!r}")
os.unlink(f.name)
# and a FILE that writes no admin key: the default address, not "FILE's admin key" (it said so)
with open(os.path.join(tmp, "admin-default.yaml"), "w") as f:
    f.write("services:\n  - name: s\n    listen: 127.0.0.1:18080\n"
            "    backends:\n      - name: a\n        address: 127.0.0.1:1\n")
p = in_netns("ctl", "-c", f.name, "status", env=env)
want = ("hashlb ctl: cannot reach the admin endpoint at 127.0.0.1:9901: Connection refused "
        f"(the default address, {f.name} writing no admin key: is hashlb running? One started "
        "before that changed serves its old address still, which a reload does not move: "
        "--admin ADDR reaches it)\n")
check(p.returncode == 1 and p.stderr == want,
      f"hashlb ctl -c FILE status, FILE without admin, nothing there: exit {p.returncode}, "
      f"stderr {p.stderr!r}")
os.unlink(f.name)

# ctl -c FILE reload --pid PID (a unit's ExecReload=) where FILE, or its admin key, cannot be
# read: exit 1 and PID sent nothing, no reload asked and no SIGHUP, as control.md says; and the
# message says so, where ctl's SIGHUP fallback says what it sent. It said only FILE's error, and
# an operator who knows the fallback could not tell whether PID had been sent a SIGHUP.
with open(os.path.join(tmp, "admin-later.yaml"), "w") as f:
    f.write("services: [\nadmin: 127.0.0.1:9901\n")
idle = subprocess.Popen(["sleep", "60"])
for path, why in ((NO_FILE, f"hashlb ctl: {NO_FILE}: its admin address cannot be read: give "
                  "--admin ADDR"),
                  (f.name, f"hashlb ctl: {f.name}: no admin key before that error (what comes "
                  "after it cannot be read): give --admin ADDR")):
    p = run("ctl", "-c", path, "reload", "--pid", str(idle.pid), ok=False)
    want = f"{why}; nothing was sent to pid {idle.pid} (no reload, no SIGHUP)\n"
    check(p.returncode == 1 and p.stdout == "" and p.stderr.endswith(want) and
          idle.poll() is None,
          f"ctl -c {os.path.basename(path)} reload --pid: exit {p.returncode}, {idle.poll()}, "
          f"stderr {p.stderr!r}, want it to end {want!r}")
# The same file with --admin ADDR: the address is given, so the file's admin key is not needed
# and the command runs (here: nothing listens there), FILE's error said; with --pid still
# nothing is sent, a reload of FILE failing. It said "give --admin ADDR", --admin given.
p = run("ctl", "-c", f.name, *ADMIN, "status", ok=False)
check(p.returncode == 1 and "give --admin" not in p.stderr and
      f"hashlb ctl: {f.name} has errors (above), a reload would refuse it: --admin 127.0.0.1:1 "
      "is used\n" in p.stderr and "cannot reach the admin endpoint at 127.0.0.1:1" in p.stderr,
      f"ctl -c admin-later.yaml --admin status: exit {p.returncode}, stderr {p.stderr!r}")
# A file whose admin key is read (its error after it) with --admin ADDR: ADDR is asked, and
# the note says so; it said "its admin address is used all the same", the file's, not asked.
with open(os.path.join(tmp, "admin-first.yaml"), "w") as af:
    af.write("admin: 127.0.0.2:1\nservices: [\n")
p = run("ctl", "-c", af.name, *ADMIN, "status", ok=False)
check(p.returncode == 1 and "its admin address is used" not in p.stderr and
      f"hashlb ctl: {af.name} has errors (above), a reload would refuse it: --admin 127.0.0.1:1 "
      "is used\n" in p.stderr and "cannot reach the admin endpoint at 127.0.0.1:1" in p.stderr,
      f"ctl -c admin-first.yaml --admin status: exit {p.returncode}, stderr {p.stderr!r}")
p = run("ctl", "-c", af.name, "status", ok=False)
check(p.returncode == 1 and f"hashlb ctl: {af.name} has errors (above), a reload would refuse "
      "it: its admin address is used all the same\n" in p.stderr and
      "cannot reach the admin endpoint at 127.0.0.2:1" in p.stderr,
      f"ctl -c admin-first.yaml status: exit {p.returncode}, stderr {p.stderr!r}")
os.unlink(af.name)
p = run("ctl", "-c", f.name, *ADMIN, "reload", "--pid", str(idle.pid), ok=False)
check(p.returncode == 1 and "give --admin" not in p.stderr and idle.poll() is None and
      p.stderr.endswith(f"hashlb ctl: {f.name} has errors (above), which a reload would "
                        f"refuse: nothing was sent to pid {idle.pid} (no reload, no SIGHUP)\n"),
      f"ctl -c admin-later.yaml --admin reload --pid: exit {p.returncode}, stderr {p.stderr!r}")
idle.kill()
idle.wait()
os.unlink(f.name)

# A usage error is found before anything is done: a bad client after a good one printed the
# good one's line first (and exited 1).
for args in (("lookup", "10.0.0.1,bogus", "a", "b"), ("lookup", "-c", DEMO, "10.0.0.1", "bogus"),
             ("lookup", "--json", "10.0.0.1,,10.0.0.2", "a")):
    p = run(*args, ok=False)
    check(p.returncode == 2 and p.stdout == "",
          f"hashlb {' '.join(args)}: exit {p.returncode}, stdout {p.stdout!r}")
# A build without kernel steering says so once the command line is known right, before it asks
# the host for a MAC: it said "backend 'a': no MAC address" (or the config's "no MAC address in
# the neighbour table"), and only once that was given, that it cannot steer at all.
NO_BPF = "hashlb steer: hashlb was built without kernel steering"
BPF = NO_BPF not in run("steer", "-i", "lo", "--stats", ok=False).stderr
if not BPF:
    for args in (("steer", "-i", "lo", *VIP, "-b", "a=10.0.0.2"),
                 ("steer", "-i", "lo", *VIP, "-b", "a=10.0.0.2,dev=hlb-no-such0"),
                 ("steer", "-i", "lo", "--update", *VIP, "-b", "a=10.0.0.2"),
                 ("steer", "-c", STEER_CFG)):
        p = run(*args, ok=False)
        check(p.returncode == 1 and p.stderr.startswith(NO_BPF) and p.stderr.count("\n") == 1,
              f"hashlb {' '.join(args)} without BPF: exit {p.returncode}, stderr {p.stderr!r}")
# A neighbour table that cannot be read (LD_PRELOAD: /proc/net/arp fails with EIO after
# HLB_TEST_ARP's text, rtnetlink's recv() with ENOBUFS) is said once, naming what failed, and
# with no "no MAC address" after it: it was said once a backend ("backend 'a': reading the
# neighbour table: ..."), then "backend 'b': no MAC address: ... ping it once", which no ping
# helps; and /proc/net/arp failing after its first lines was the table's end (a read when an
# entry came before the error). --update: nothing is attached if it went on.
if BPF:
    ARP_HEAD = "IP address       HW type     Flags       HW address            Mask     Device\n"
    ARP_LO = "10.0.0.2         0x1         0x2         02:00:00:00:00:02     *        lo\n"
    V4 = "hashlb steer: reading the neighbour table (/proc/net/arp): Input/output error\n"
    V6 = ("hashlb steer: reading the neighbour table (rtnetlink's IPv6 dump): No buffer space "
          "available\n")
    UPD = ("steer", "-i", "lo", "--update", *VIP)
    for args, env, want in (
            # once, though a (down) is read first
            ((*UPD, "-b", "a=10.0.0.2", "-b", "b=10.0.0.3", "--down", "a"),
             {"HLB_TEST_ARP": ARP_HEAD}, V4),
            # partway: 10.0.0.2 before the error
            ((*UPD, "-b", "a=10.0.0.2"), {"HLB_TEST_ARP": ARP_HEAD + ARP_LO}, V4),
            (("steer", "-c", STEER_CFG, "--update"), {"HLB_TEST_ARP": ARP_HEAD}, V4),
            ((*UPD, "-b", "a=fd00::2", "-b", "b=fd00::3", "--down", "a"),
             {"HLB_TEST_NETLINK_FAIL": "1"}, V6)):
        p = subprocess.run(argv(*args), capture_output=True, text=True, timeout=60,
                           env=shim_env("neigh_fail", **env))
        check(p.returncode == 1 and p.stderr == want,
              f"hashlb {' '.join(args)}, {env}: exit {p.returncode}, stderr {p.stderr!r}, "
              f"want {want!r}")
# An interface that does not exist (-i misspelt, a config's interface: not there yet) is said,
# exit 1, whatever the action: it said "backend 'a': no MAC address: ... (e.g. ping 10.0.0.2
# once)" when a backend's MAC was to be read from its table, which no ping helps.
if BPF:
    NO_IF = "hlb-no-such0"
    with open(os.path.join(tmp, "no-if.yaml"), "w") as f:
        f.write(open(STEER_CFG).read().replace("interface: lo", f"interface: {NO_IF}"))
    for args in (("steer", "-i", NO_IF, *VIP, "-b", "a=10.0.0.2"),
                 ("steer", "-i", NO_IF, "--update", *VIP, "-b", "a=10.0.0.2", "-b", "b=fd00::3"),
                 ("steer", "-i", NO_IF, *VIP, *BACKEND),
                 ("steer", "-c", f.name), ("steer", "-i", NO_IF, "--stats")):
        p = run(*args, ok=False)
        check(p.returncode == 1 and p.stderr == f"hashlb steer: no interface '{NO_IF}'\n",
              f"hashlb {' '.join(args)}: exit {p.returncode}, stderr {p.stderr!r}")
    os.unlink(f.name)
# A backend in none of the interface's subnets (routed: Katran reaches its backends so) is said to
# be out of L2 DSR's reach: it said "(e.g. ping 10.0.0.2 once)" ("reach it once first" with -c),
# and no ping makes an entry for an address routed elsewhere. One in a subnet of it (127/8 on lo)
# is told it answered no ARP request in the second hashlb steer waited for one (it said "e.g.
# ping 127.0.0.2 once", which asks the same again). In a network namespace of its own, its lo up with 127.0.0.1/8
# and ::1 alone and no neighbour entry: what lo has in the host's namespace is not this test's
# (with steering experiments run beside it on the host's lo, fd00::2 once had a MAC there and
# --update said "no hashlb program is attached to 'lo'" instead), and a MAC found there would
# have attached a program to the host's lo.
if BPF:
    OFF = ("no MAC address: {} is in none of lo's subnets, so no neighbour entry is made for it "
           "there: the kernel path reaches only hosts on the layer-2 segment of lo (dev=IFACE "
           "names another interface; mac=... one on it all the same)\n")
    with open(os.path.join(tmp, "off-subnet.yaml"), "w") as f:
        f.write(open(STEER_CFG).read().replace("127.0.0.1:18081", "10.0.0.2:18081"))
    for args, want in (
            (("steer", "-i", "lo", *VIP, "-b", "a=10.0.0.2"),
             "hashlb steer: backend 'a': " + OFF.format("10.0.0.2")),
            (("steer", "-i", "lo", "--update", *VIP, "-b", "a=fd00::2"),
             "hashlb steer: backend 'a': " + OFF.format("fd00::2")),
            (("steer", "-c", f.name),
             "hashlb steer: backend 'a' (10.0.0.2:18081): " + OFF.format("10.0.0.2")),
            (("steer", "-i", "lo", *VIP, "-b", "a=127.0.0.2"),
             "hashlb steer: backend 'a': no MAC address: give mac=..., or make the neighbour "
             "entry exist first (127.0.0.2 answered no ARP request or neighbour solicitation "
             "in a second: its host down?)\n")):
        p = in_netns(*args)
        check(p.returncode == 1 and p.stderr == want,
              f"hashlb {' '.join(args)}: exit {p.returncode}, stderr {p.stderr!r}, want {want!r}")
    os.unlink(f.name)
os.unlink(STEER_CFG)
os.unlink(ADMIN_PORT_0)
os.unlink(ADMIN_OFF)
os.rmdir(tmp)

# 7. A number reads as the config reads it: "010" is ten (YAML 1.2), not octal eight, so a
# seed or weight copied from a config gives the config's table; blanks and signs are refused.
check(fp("--seed", "010", "a", "b") == fp("--seed", "10", "a", "b"), "--seed 010 is ten")
check(fp("a=010", "b") == fp("a=10", "b"), "weight 010 is ten")
check(fp("--seed", "0x10", "a", "b") == fp("--seed", "16", "a", "b"), "--seed 0x10 is 16")
for bad in ("0x", " 5", "+5", "1 "):
    p = run("table", "--seed", bad, "a", ok=False)
    check(p.returncode == 2, f"hashlb table --seed {bad!r}: exit {p.returncode}, want 2")

# 8. lookup --json is JSON whatever the names: a backend name may hold a '\\', which was
# printed unescaped (a '"', once taken on the command line, is refused there as in a config).
for names in (['a\\b', "c\\d"], ["c\\d"]):
    out = run("lookup", "--json", "10.0.0.1", *names).stdout
    try:
        got = json.loads(out)[0]
        check(got["backend"] in names and sorted(got["preference"]) == sorted(names),
              f"lookup --json names {got['preference']}, want {names}")
    except ValueError as e:
        check(False, f"lookup --json with names {names}: not JSON ({e}): {out!r}")

# 8b. lookup's preference list names each backend once, whatever the names: one with a comma
# in it (a config may have "a,b") is in double quotes, as CSV quotes a field (names hold no
# '"'). It was printed bare: a,b,c read as three backends where there were two.
names = ["a,b", "c", "d,e,f", "g"]
for client in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
    line = run("lookup", "-n", "4", client, *names).stdout.split()
    want = json.loads(run("lookup", "-n", "4", "--json", client, *names).stdout)[0]
    got = next(csv.reader([line[2]])) if len(line) == 4 else None
    check(got == want["preference"] and line[1] == want["backend"],
          f"lookup {client} {names}: the list reads as {got}, want {want['preference']}")
line = run("lookup", "-n", "3", "10.0.0.1", "a", "b", "c").stdout.split()
check(sorted(line[2].split(",")) == ["a", "b", "c"], f"lookup a b c: plain names bare: {line}")

# 9. --help after a ctl command is the manual, as before it (it was "unknown option")
for args in (("ctl", "set", "--help"), ("ctl", "status", "-h"), ("ctl", "--help")):
    p = run(*args, ok=False)
    check(p.returncode == 0 and "SYNOPSIS" in p.stdout,
          f"hashlb {' '.join(args)}: exit {p.returncode}, {p.stderr[:80]!r}")

# 10. Output that cannot be written is an error: "hashlb lookup ... > out" on a full disk
# exited 0 with the answers lost (and check, table, --help alike).
if os.path.exists("/dev/full"):
    for args in (("lookup", "10.0.0.1", "a", "b"), ("table", "a", "b"),
                 ("check", "-c", os.path.join(SRC, "configs", "demo.yaml")),
                 ("lookup", "-c", os.path.join(SRC, "configs", "demo.yaml"), "10.0.0.1"),
                 ("check", "--help"), ("--version",)):
        with open("/dev/full", "w") as full:
            p = subprocess.run([HASHLB, *args], stdout=full, stderr=subprocess.PIPE, text=True,
                               timeout=60)
        check(p.returncode == 1 and "cannot write the output: No space left on device" in p.stderr,
              f"hashlb {' '.join(args)} > /dev/full: exit {p.returncode}, {p.stderr!r}")
    # -q prints nothing: nothing is lost
    with open("/dev/full", "w") as full:
        p = subprocess.run([HASHLB, "check", "-q", "-c", os.path.join(SRC, "configs", "demo.yaml")],
                           stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    check(p.returncode == 0 and p.stderr == "", f"check -q > /dev/full: {p.returncode} {p.stderr!r}")

# 11. One form for every usage error, whichever command and whoever finds it (getopt or the
# command): "hashlb CMD: WHAT" naming the option as it was typed, then one line that says where
# the options are, not the whole manual; exit 2. It was "hashlb run: ", "hashlb: error: ",
# getopt's own "check: unrecognized option" with the manual after it, "-S" for --seed...
HINT = "Run 'hashlb {} --help' for the options.\n"
SEED = " (an integer below 2^64, decimal or 0x hex)"
for args, line in [
    (("run", "-c", "x.yaml", "-w", "0"),
     "hashlb run: invalid value '0' for option -w (1..256, or auto)"),
    (("run", "-c", "x.yaml", "--workers", "Auto"),
     "hashlb run: invalid value 'Auto' for option --workers (1..256, or auto)"),
    (("run", "-c", "x.yaml", "--log-level", "loud"),
     "hashlb run: invalid value 'loud' for option --log-level (debug, info, warn or error)"),
    (("check", "--bogus"), "hashlb check: unrecognized option '--bogus'"),
    (("check", "-q", "-c"), "hashlb check: option '-c' requires an argument"),
    (("check", "--config"), "hashlb check: option '--config' requires an argument"),
    (("check", "-qz", "-c", "x.yaml"), "hashlb check: unrecognized option '-z'"),
    (("check", "--quiet=yes", "-c", "x.yaml"), "hashlb check: option '--quiet' takes no argument"),
    (("lookup", "--pref", "0", "10.0.0.1", "a"), "hashlb lookup: invalid value '0' for option --pref (1..64)"),
    (("lookup", "-n", "0", "10.0.0.1", "a"), "hashlb lookup: invalid value '0' for option -n (1..64)"),
    (("lookup", "-k", "bogus", "10.0.0.1", "a"),
     "hashlb lookup: invalid value 'bogus' for option -k (src-ip, src-ip-port or 4-tuple)"),
    (("lookup", "-c", DEMO, "-S", "1", "10.0.0.1"),
     "hashlb lookup: -S cannot be combined with -c: the configuration sets the scheme, its "
     "parameters, the seed, the hash key and its prefix"),
    (("lookup", "-c", DEMO, "--ipv6-prefix", "64", "10.0.0.1"),
     "hashlb lookup: --ipv6-prefix cannot be combined with -c: the configuration sets the "
     "scheme, its parameters, the seed, the hash key and its prefix"),
    # -s, hashlb ctl's --service, is the scheme here: said, with the option that names the
    # service (before: the scheme alone, to an operator who typed a service's name)
    (("lookup", "-c", DEMO, "-s", "ring", "10.0.0.1"),
     "hashlb lookup: -s cannot be combined with -c: the configuration sets the scheme, its "
     "parameters, the seed, the hash key and its prefix (-s is --scheme here; the service of "
     "the file is --service NAME)"),
    (("lookup", "-c", DEMO, "-s", "web", "10.0.0.1"),
     "hashlb lookup: invalid value 'web' for option -s (ring or maglev; -s is --scheme here; "
     "the service of the file is --service NAME)"),
    (("steer", "-c", STEER_CFG, "-s", "web"),
     "hashlb steer: invalid value 'web' for option -s (ring or maglev; -s is --scheme here; "
     "the service of the file is --service NAME)"),
    (("table", "-s", "web", "a"), "hashlb table: invalid value 'web' for option -s (ring or maglev)"),
    (("lookup", "--ipv4-prefix", "33", "10.0.0.1", "a"),
     "hashlb lookup: invalid value '33' for option --ipv4-prefix (1..32)"),
    (("lookup", "--ipv6-prefix", "0", "10.0.0.1", "a"),
     "hashlb lookup: invalid value '0' for option --ipv6-prefix (1..128)"),
    # a destination the key does not hash: it was taken and changed nothing (exit 0)
    (("lookup", "--vip", "10.0.0.9:80", "10.0.0.1", "a"),
     "hashlb lookup: --vip applies to the 4-tuple key, not src-ip"),
    (("lookup", "-k", "src-ip-port", "--vip", "10.0.0.9:80", "10.0.0.1:5", "a"),
     "hashlb lookup: --vip applies to the 4-tuple key, not src-ip-port"),
    (("lookup", "-k", "src-ip-port", "--ipv4-prefix", "24", "10.0.0.1:5", "a"),
     "hashlb lookup: --ipv4-prefix applies to the src-ip key, not src-ip-port"),
    (("lookup", "10.0.0.1"), "hashlb lookup: need a client address and at least one backend"),
    (("table", "--seed", "x", "a"), f"hashlb table: invalid value 'x' for option --seed{SEED}"),
    (("table", "--seed=x", "a"), f"hashlb table: invalid value 'x' for option --seed{SEED}"),
    (("table", "-S", "x", "a"), f"hashlb table: invalid value 'x' for option -S{SEED}"),
    (("table", "-d", "x", "a"),
     "hashlb table: -d names 'x', which is not a backend (the backends: a)"),
    (("table", "--s", "1", "a"),
     "hashlb table: option '--s' is ambiguous; possibilities: '--scheme' '--seed'"),
    (("table",), "hashlb table: no backends given"),
    # a size out of the range the message gives is a usage error too, as --help says (exit 1,
    # "Maglev table size 2 out of range 3..16777259" from the build, before)
    (("table", "-m", "2", "a"), "hashlb table: invalid value '2' for option -m (a prime, 3..16777259)"),
    (("lookup", "--table-size", "16777260", "10.0.0.1", "a"),
     "hashlb lookup: invalid value '16777260' for option --table-size (a prime, 3..16777259)"),
    (("table", "-s", "ring", "-v", "100001", "a"),
     "hashlb table: invalid value '100001' for option -v (1..100000)"),
    (("ctl", "--bogus"), "hashlb ctl: unrecognized option '--bogus'"),
    (("ctl", "--admin"), "hashlb ctl: option '--admin' requires an argument"),
    (("ctl", "--timeout", "0", "status"),
     "hashlb ctl: invalid value '0' for option --timeout (1..3600 seconds)"),
    (("ctl",), "hashlb ctl: no command given"),
    (("ctl", "frobnicate"), "hashlb ctl: unknown command 'frobnicate'"),
    # what 'set' sets, typed as a command (other balancers' tools drain so): the message says
    # the 'set' that does it (it said "unknown command 'drain'" and no more)
    (("ctl", "drain", "web-2"), "hashlb ctl: unknown command 'drain': a backend's state is set "
     "with 'hashlb ctl set [-s SERVICE] BACKEND drain'"),
    (("ctl", "Maint", "web-2"), "hashlb ctl: unknown command 'Maint': a backend's state is set "
     "with 'hashlb ctl set [-s SERVICE] BACKEND Maint'"),
    (("ctl", "weight", "web-2", "3"), "hashlb ctl: unknown command 'weight': it is set with "
     "'hashlb ctl set [-s SERVICE] BACKEND weight N'"),
    (("ctl", *ADMIN, "-j", "metrics"), "hashlb ctl: -j does not apply to metrics"),
    (("ctl", *ADMIN, "lookup", "10.0.0.1", "-s"), "hashlb ctl: option '-s' requires an argument"),
    (("ctl", "-a", "localhost", "status"),
     "hashlb ctl: invalid value 'localhost' for option -a (HOST:PORT, [V6]:PORT or "
     "unix:/PATH): missing ':PORT'"),
    (("ctl", "-a", "nosuch.invalid:9901", "status"),
     "hashlb ctl: invalid value 'nosuch.invalid:9901' for option -a (HOST:PORT, [V6]:PORT or "
     "unix:/PATH): the host name does not resolve"),
    # an IPv6 address without brackets, as the config refuses it (getaddrinfo took it)
    (("ctl", "-a", "::1:9901", "status"),
     "hashlb ctl: invalid value '::1:9901' for option -a (HOST:PORT, [V6]:PORT or unix:/PATH): "
     "an IPv6 address must be written in brackets, as [::1]:PORT"),
    # a port out of 1..65535, or not digits alone, as the config refuses it: getaddrinfo took
    # 99999 as 34463 (99999 - 65536) and 0 as 0, and ctl asked whatever listened there (exit 1,
    # "cannot reach the admin endpoint at 127.0.0.1:34463", when nothing did)
    *((("ctl", "-a", a, "status"),
       f"hashlb ctl: invalid value '{a}' for option -a (HOST:PORT, [V6]:PORT or unix:/PATH): "
       + why)
      for a, why in (("127.0.0.1:99999", "port 99999 is out of range 1..65535"),
                     ("localhost:99999", "port 99999 is out of range 1..65535"),
                     ("localhost:-1", "the port must be a number"),
                     ("127.0.0.1:0", "port 0 is out of range 1..65535"))),
    (("ctl", "set", "a", "weight"), "hashlb ctl: set: weight needs a value"),
    # clients' N, a count whose range ctl knows: a usage error naming N (it was exit 1, the
    # endpoint's "top must be 1..1000", a query parameter the user never typed)
    (("ctl", *ADMIN, "clients", "x"), "hashlb ctl: clients: invalid value 'x' for N (1..1000)"),
    (("ctl", *ADMIN, "clients", "0"), "hashlb ctl: clients: invalid value '0' for N (1..1000)"),
    (("ctl", *ADMIN, "-s", "web", "clients", "1001"),
     "hashlb ctl: clients: invalid value '1001' for N (1..1000)"),
    (("steer", "--bogus"), "hashlb steer: unrecognized option '--bogus'"),
    (("steer", "-i", "lo", "--stats", "-k", "4-tuple"), "hashlb steer: -k does not apply with --stats"),
    (("steer", "-i", "lo", "--stats", "--key", "4-tuple"),
     "hashlb steer: --key does not apply with --stats"),
    (("steer", "-i", "lo", *VIP, "-b", "a=bogus"), "hashlb steer: backend 'a': invalid IP address"),
]:
    p = run(*args, ok=False)
    want = f"{line}\n{HINT.format(args[0])}"
    check(p.returncode == 2 and p.stderr == want and p.stdout == "",
          f"hashlb {' '.join(args)}: exit {p.returncode}, stderr {p.stderr!r}, want {want!r}")
# getopt's two refusals of a known option, for every long option each --help lists: one that
# takes no argument given one ("--pin=1"), one that takes one given none (the last word). A long
# option with no short form but a letter of its own was "unrecognized option '-P'" (run --pin).
refusals = 0
for cmd in ("run", "check", "lookup", "table", "ctl", "steer"):
    options = re.search(r"^OPTIONS\n(.*?)\n\n", run(cmd, "--help").stdout, re.S | re.M).group(1)
    for name, gap in re.findall(r"^ {2}(?:-\w, )? *--([a-z][a-z0-9-]*)((?: (?=\S))?)", options, re.M):
        # "--vnodes V": one space, then what it takes; "--pin      pin worker": none
        args, line = ((f"--{name}",), f"option '--{name}' requires an argument") if gap else \
            ((f"--{name}=1",), f"option '--{name}' takes no argument")
        p = run(cmd, *args, ok=False)
        want = f"hashlb {cmd}: {line}\n{HINT.format(cmd)}"
        check(p.returncode == 2 and p.stderr == want,
              f"hashlb {cmd} {args[0]}: exit {p.returncode}, stderr {p.stderr!r}, want {want!r}")
        refusals += 1
check(refusals > 60, f"only {refusals} long options found in the --help texts: the pattern is out of date")
# before a command is known: "hashlb: ", and the commands are where to look
for args, line in [((), "hashlb: no command given"),
                   (("frobnicate",), "hashlb: unknown command 'frobnicate'"),
                   (("--bogus",), "hashlb: unrecognized option '--bogus'"),
                   # --version and --help take nothing (they printed and exited 0, the rest ignored)
                   (("--version", "x"), "hashlb: unexpected argument 'x'"),
                   (("-V", "x"), "hashlb: unexpected argument 'x'"),
                   (("--help", "x"), "hashlb: unexpected argument 'x'"),
                   (("help", "frobnicate"), "hashlb: unknown command 'frobnicate'"),
                   (("help", "lookup", "x"), "hashlb: unexpected argument 'x'")]:
    p = run(*args, ok=False)
    want = f"{line}\nRun 'hashlb --help' for the commands.\n"
    check(p.returncode == 2 and p.stderr == want and p.stdout == "",
          f"hashlb {' '.join(args)}: exit {p.returncode}, stderr {p.stderr!r}, want {want!r}")
# "hashlb help COMMAND" is "hashlb COMMAND --help", for every command the commands list names
# (it was refused: "unexpected argument 'lookup'")
listed = re.findall(r"^  ([a-z]+) ", run("--help").stdout.split("Commands:\n")[1], re.M)
check(len(listed) >= 6, f"hashlb --help lists {listed}: the pattern is out of date")
# every --help fits an 80-column terminal (lookup's, steer's and table's had lines of 81-83,
# hashlb's own three)
for cmd in ("", *listed):
    wide = [ln for ln in run(*([cmd] if cmd else []), "--help").stdout.splitlines()
            if text_columns(ln) > 80]
    check(not wide, f"hashlb {cmd} --help: lines wider than 80 columns: {wide}")
for cmd in listed:
    p, want = run("help", cmd, ok=False), run(cmd, "--help", ok=False)
    check((p.returncode, p.stdout, p.stderr) == (want.returncode, want.stdout, want.stderr)
          and p.returncode == 0 and p.stdout.startswith(f"NAME\n  hashlb {cmd} - "),
          f"hashlb help {cmd}: exit {p.returncode}, stdout {p.stdout[:60]!r}, stderr "
          f"{p.stderr!r}; hashlb {cmd} --help: exit {want.returncode}")
# help's own help is hashlb's ("unknown command 'help'" before)
for args in (("help", "help"), ("help", "--help"), ("help", "-h")):
    p = run(*args, ok=False)
    check(p.returncode == 0 and p.stdout == run("--help").stdout and p.stderr == "",
          f"hashlb {' '.join(args)}: exit {p.returncode}, stderr {p.stderr!r}")
# and each command's --help says so, with its own name
for cmd in ("run", "check", "lookup", "table", "ctl", "steer"):
    p = run(cmd, "--help")
    check(f'"hashlb {cmd}: WHAT"' in p.stdout and f"\"Run 'hashlb {cmd} --help' for\n" in p.stdout,
          f"hashlb {cmd} --help: no ERRORS section with its prefix and hint")
# what fails as the command runs (exit 1) is said the same way, without the hint; a size not
# prime with the nearest primes, as the config's table_size says it (it said only "not prime")
p = run("table", "--table-size", "1000", "a", ok=False)
check(p.returncode == 1 and p.stderr.startswith("hashlb table: ")
      and "not prime (nearest: 997 or 1009)" in p.stderr and "--help" not in p.stderr, f"hashlb table --table-size 1000 a: {p.returncode} {p.stderr!r}")

# Every write() of the command to stderr is whole lines: a daemon's stderr is often shared (an
# upgrade in place: the new process's config error and the old one's log lines, in one pipe),
# and a line written in pieces interleaves with another writer's. stderr as a SOCK_SEQPACKET
# socket keeps each write() a message of its own. (A config error's path went out a byte a
# write, the rest in three more: the old process's log line landed after its first "/".)
def stderr_writes(*args):
    import socket
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with mine:
        with theirs:
            p = subprocess.Popen([HASHLB, *args], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=theirs)
        writes = []
        while (m := mine.recv(1 << 20)):
            writes.append(m.decode())
    return p.wait(timeout=60), writes


with tempfile.TemporaryDirectory() as d:
    bad = os.path.join(d, "a-config-dir", "bad.yaml")
    os.mkdir(os.path.dirname(bad))
    with open(bad, "w") as f:
        f.write("services:\n  - name: web\n    listen: 127.0.0.1:1\n    bogus: 1\n")
    for args in (("check", "-c", bad), ("run", "-c", bad), ("run", "--s"), ("frobnicate",)):
        rc, writes = stderr_writes(*args)
        cut = [w for w in writes if not w.endswith("\n")]
        check(rc != 0 and writes and not cut,
              f"hashlb {' '.join(args)}: stderr in {len(writes)} writes, {len(cut)} of them "
              f"not whole lines: {writes[:6]!r}")
        if args[0] in ("check", "run") and args[1] == "-c":
            check(len(writes) == 1 and writes[0].startswith(f"{bad}:4:5: error: "),
                  f"hashlb {' '.join(args)}: the config error in one write: {writes[:6]!r}")

# 12. --down names any backend, one whose name holds a comma too (a config and the command line
# take "x,y" as a name): it was split into "x" and "y", refused as no backend, so what happens
# when x,y fails could not be asked; each name of the list is matched whole, the longest first.
CS_DIR = tempfile.mkdtemp(prefix="hlb-cli-")
CS = os.path.join(CS_DIR, "comma.yaml")
with open(CS, "w") as f:
    f.write("services:\n  - name: s\n    listen: 127.0.0.1:18080\n    backends:\n"
            + "".join(f"      - {{name: '{n}', address: '127.0.0.1:{18081 + i}'}}\n"
                      for i, n in enumerate(("x,y", "x", "z"))))
for down, out in (("x,y", {"x,y"}), ("z,x,y", {"x,y", "z"}), ("x,y,x", {"x,y", "x"}),
                  ("x", {"x"})):
    p = run("table", "--json", "--down", down, "x,y", "x", "z", ok=False)
    got = ({b["name"] for b in json.loads(p.stdout)["backends"] if not b["in_table"]}
           if p.returncode == 0 else p.stderr.strip())
    check(got == out, f"table --down {down!r} with a backend 'x,y': down {got!r}, want {out}")
    for cmd in (("lookup", "--json", "-n", "3", "--down", down, "10.0.0.1", "x,y", "x", "z"),
                ("lookup", "--json", "-n", "3", "-c", CS, "--down", down, "10.0.0.1")):
        p = run(*cmd, ok=False)
        names = ("x,y", "x", "z")
        got = (set(names) - set(json.loads(p.stdout)[0]["preference"])
               if p.returncode == 0 else p.stderr.strip())
        check(got == out, f"{' '.join(cmd[:5])}: out of the list {got!r}, want {out}")
for args in (("table", "--down", "x,q", "x,y", "x"), ("lookup", "-c", CS, "--down", "y", "10.0.0.1")):
    p = run(*args, ok=False)
    bad = args[args.index("--down") + 1].split(",")[-1]
    check(p.returncode == 2 and f"names '{bad}'" in p.stderr,
          f"hashlb {' '.join(args)}: exit {p.returncode}, {p.stderr!r}")
os.unlink(CS)
os.rmdir(CS_DIR)

# 13. --down given twice puts both down ("--down a --down b" as "--down a,b"): the last one
# alone was taken, and the answer was for a table with a up, said nowhere.
for cmd, want in ((("table", "--json", "--down", "a", "--down", "b,c", "a", "b", "c", "d"), None),
                  (("lookup", "--json", "--down", "a", "--down", "b", "10.0.0.1", "a", "b", "c"),
                   ["c"]),
                  (("lookup", "--json", "-c", DEMO, "--down", "a", "-d", "b", "127.0.0.7"), ["c"])):
    p = run(*cmd, ok=False)
    if p.returncode != 0:
        check(False, f"hashlb {' '.join(cmd)}: exit {p.returncode}, {p.stderr!r}")
    elif want is None:
        got = sorted(b["name"] for b in json.loads(p.stdout)["backends"] if not b["in_table"])
        check(got == ["a", "b", "c"], f"hashlb {' '.join(cmd)}: down {got}, want a, b, c")
    else:
        got = json.loads(p.stdout)[0]["preference"]
        check(got == want, f"hashlb {' '.join(cmd)}: preference {got}, want {want}")
# steer's --down and --drain alike: the first of two naming no backend is still refused (on
# an interface that does not exist: a steer let through fails there and attaches nothing)
for opt in ("--down", "--drain"):
    args = ("steer", "-i", "hlb-no-such0", *VIP, *BACKEND, opt, "x", opt, "a")
    p = run(*args, ok=False)
    check(p.returncode == 2 and f"{opt} names 'x'" in p.stderr,
          f"hashlb {' '.join(args)}: exit {p.returncode}, {p.stderr!r}")

# 14. Standard descriptors closed by whoever starts hashlb run (`2>&-`, a supervisor) are
# /dev/null in it: the next descriptor hashlb opened took the number, and its log lines went
# there (stderr was a signalfd or an eventfd; it could have been a client's socket).
with tempfile.TemporaryDirectory() as d:
    cfg = os.path.join(d, "closed.yaml")
    with open(cfg, "w") as f:
        f.write("services:\n  - name: s\n    listen: 127.0.0.1:0\n    backends:\n"
                "      - {name: a, address: '127.0.0.1:9'}\nadmin: off\n")
    for closed in ((0, 1, 2), (2,), (1,)):
        p = subprocess.Popen([HASHLB, "run", "-c", cfg, "--workers", "1"],
                             preexec_fn=lambda closed=closed: [os.close(fd) for fd in closed])
        try:
            listening = wait_until(lambda: listening_sockets(p.pid), 30)
            links = {fd: os.readlink(f"/proc/{p.pid}/fd/{fd}") for fd in closed}
            check(listening and all(v == "/dev/null" for v in links.values()),
                  f"hashlb run with {closed} closed: listening {bool(listening)}, they are {links}")
        finally:
            p.terminate()
            rc = p.wait(timeout=30)
        check(rc == 0, f"hashlb run with {closed} closed: exit {rc}")

# 15. Names beyond ASCII pad to the columns a terminal gives them, not their bytes: the
# columns after them stay aligned (each row as wide as the header). "ünïcödé" (10 bytes, 7
# characters) was padded as 10, its row 3 columns short; then as one column a character,
# "中文" (2 characters, 4 columns) 2 columns long and "e\u0301x" (3, 2: a combining accent) 1
# short.
rows = run("table", "é1=1", "bb=2", "ünïcödé=1", "中文=1", "e\u0301x").stdout.splitlines()
table = rows[rows.index(next(r for r in rows if r.startswith("NAME"))):]
check(len(table) == 6 and len({text_columns(r) for r in table}) == 1,
      f"hashlb table: rows of UTF-8 names aligned with the header: {table}")
with tempfile.TemporaryDirectory() as d:
    cfg = os.path.join(d, "utf8.yaml")
    with open(cfg, "w") as f:
        f.write("services:\n  - name: s\n    listen: 127.0.0.1:7000\n    backends:\n"
                "      - {name: ünïcödé, address: '127.0.0.1:7001'}\n"
                "      - {name: 中文, address: '127.0.0.1:7003'}\n"
                "      - {name: \"e\u0301x\", address: '127.0.0.1:7004'}\n"
                "      - {name: a, address: '127.0.0.1:7002'}\nadmin: off\n")
    rows = run("check", "-c", cfg).stdout.splitlines()
    table = [r for r in rows if r.startswith("    ")]
    check(len(table) == 5 and len({text_columns(r) for r in table}) == 1,
          f"hashlb check: rows of UTF-8 names aligned with the header: {table}")

# 16. -j is --json in every command that prints JSON, as in hashlb ctl (only ctl took it:
# "hashlb table -j a b" was "unrecognized option '-j'"); what refuses it names it as typed.
for args in (("table", "a", "b=2"), ("lookup", "10.0.0.1,10.0.0.2", "a", "b")):
    p, q = run(args[0], "-j", *args[1:], ok=False), run(args[0], "--json", *args[1:], ok=False)
    same = p.returncode == 0 and q.returncode == 0
    if same:  # the table's build time differs from run to run
        drop = lambda o: {k: v for k, v in o.items() if k != "build_ms"} if isinstance(o, dict) else o
        same = drop(json.loads(p.stdout)) == drop(json.loads(q.stdout))
    check(same, f"hashlb {args[0]} -j: as --json: exit {p.returncode} {p.stdout[:80]!r}{p.stderr!r}")
for args, msg in ((("table", "-j", "--dump", "a"), "hashlb table: -j does not apply with --dump\n"),
                  (("steer", "-i", "hlb-no-such0", "-j"),
                   "hashlb steer: -j applies only with --stats\n")):
    p = run(*args, ok=False)
    check(p.returncode == 2 and p.stderr.startswith(msg),
          f"hashlb {' '.join(args)}: exit {p.returncode}, {p.stderr!r}, want {msg!r}")

# 16. A backend of weight 0 takes no client: its STATE says so, as the "(N up)" above it counts
# it (it read "up", and the summary "(1 up)" left it out); one down still says down.
p = run("table", "--down", "b", "a", "b", "z=0")
rows = {r.split()[0]: r for r in p.stdout.splitlines()[6:]}
check("backends     3 (1 up)\n" in p.stdout and
      re.fullmatch(r"a +1  up +100\.000%", rows.get("a", "")) and
      re.fullmatch(r"b +1  down +0\.000%", rows.get("b", "")) and
      re.fullmatch(r"z +0  weight 0 +0\.000%", rows.get("z", "")),
      f"hashlb table: a weight 0 backend's STATE agrees with the count of those up: {p.stdout}")

# 17. hashlb table reads no config, where hashlb lookup does: -c FILE, as an operator types it
# after lookup -c, says where a config's tables are, not "unrecognized option '-c'".
for args in (("table", "-c", "lb.yaml", "a"), ("table", "--config=lb.yaml", "a"),
             ("table", "a", "b", "-clb.yaml")):
    p = run(*args, ok=False)
    opt = "--config" if "--config=lb.yaml" in args else "-c"
    want = (f"hashlb table: {opt}: hashlb table reads no config (its backends are its "
            "arguments): a config's tables are 'hashlb check -c FILE', a running hashlb's "
            "'hashlb ctl table'\nRun 'hashlb table --help' for the options.\n")
    check(p.returncode == 2 and p.stderr == want,
          f"hashlb {' '.join(args)}: exit {p.returncode}, {p.stderr!r}, want {want!r}")

# 18. An admin socket path written without unix: is said so, for every command that takes
# --admin (and ctl's $HASHLB_ADMIN): it said "missing ':PORT'".
for args, env, what in ((("ctl", "--admin", "/run/h.sock", "status"), {}, "option --admin"),
                        (("ctl", "status"), {"HASHLB_ADMIN": "/run/h.sock"}, "$HASHLB_ADMIN"),
                        (("check", "-c", "x.yaml", "--admin", "/run/h.sock"), {}, "option --admin")):
    p = subprocess.run([HASHLB, *args], capture_output=True, text=True, timeout=60,
                       env={**os.environ, **env})
    want = (f"hashlb {args[0]}: invalid value '/run/h.sock' for {what}: a path: a Unix socket "
            "is written unix:/run/h.sock\n")
    check(p.returncode == 2 and p.stderr.startswith(want),
          f"hashlb {' '.join(args)} {env}: exit {p.returncode}, {p.stderr!r}, want {want!r}")

# 19. Every name --key takes is in lookup's and steer's --help, its aliases too: they listed
# src-ip, src-ip-port and 4-tuple alone, where "-k src_ip" (a config's spelling) is taken as
# well, and a reader of the help could not tell. Each alias answers as its canonical name.
KEY_ALIASES = {"src-ip": ("src_ip", "source-ip"), "src-ip-port": ("src_ip_port",),
               "4-tuple": ("4tuple", "four-tuple")}
helps = {cmd: " ".join(run(cmd, "--help").stdout.split()) for cmd in ("lookup", "steer")}
for canon, aliases in KEY_ALIASES.items():
    args = ("--json", *(("--vip", "10.9.9.9:80") if canon == "4-tuple" else ()),
            "10.0.0.1:5555,10.0.0.2:6666", "a", "b", "c")
    want = run("lookup", "-k", canon, *args).stdout
    for alias in aliases:
        for cmd, text in helps.items():
            check(re.search(rf"(?<![\w-]){re.escape(alias)}(?![\w-])", text),
                  f"hashlb {cmd} --help names the key alias {alias!r}")
        for spelled in (alias, alias.upper()):
            p = run("lookup", "-k", spelled, *args, ok=False)
            check(p.returncode == 0 and p.stdout == want,
                  f"hashlb lookup -k {spelled}: as -k {canon}: {p.returncode} {p.stderr!r}")

# 20. hashlb steer keeps SIGUSR1 and SIGUSR2 held from main() on, as hashlb run does its
# commands: one sent while it starts (its config loading, start_pause.c holding it there) is
# said once it waits, or lost if it ends first; it let them go at its first statement, and
# their default action killed it (exit -10) before it attached anything.
with tempfile.TemporaryDirectory() as d:
    cfg = os.path.join(d, "steer.yaml")
    with open(cfg, "w") as f:
        f.write("services:\n  - name: k\n    listen: 127.0.0.1:18080\n    steering: kernel\n"
                "    interface: lo\n    backends:\n      - {name: a, address: '127.0.0.1:18081'}\n")
    for sig in (signal.SIGUSR1, signal.SIGUSR2):
        pause = Paused(f"open:{cfg}")
        p = subprocess.Popen([*NO_HOST_NET, *pause.wrap, HASHLB, "steer", "-c", cfg,
                              "--service", "x"],
                             pass_fds=pause.pass_fds, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        reached = pause.reached()
        os.kill(p.pid, sig)
        pause.go()
        err = p.stderr.read()
        rc = p.wait(timeout=60)
        check(reached and rc == 2 and "--service 'x'" in err,
              f"hashlb steer, {sig.name} while its config loads: exit {rc} (want 2, the usage "
              f"error it goes on to; killed: {-sig}), {err!r}")

# 20b. commands_before_a_failed_start_are_dropped: hashlb run's SIGHUP and SIGUSR1, held while
# its config loads for the daemon to take, are dropped with a start that fails: the exit
# status is the config's failure (1, its error said), not a death by the signal, whose
# default action would have been taken had they been let go (docs/operations.md).
with tempfile.TemporaryDirectory() as d:
    cfg = os.path.join(d, "bad.yaml")
    with open(cfg, "w") as f:
        f.write("services:\n  - name: k\n    listen: 127.0.0.1:18080\n    backends: 7\n")
    for sigs in ((signal.SIGHUP,), (signal.SIGUSR1,), (signal.SIGHUP, signal.SIGUSR1)):
        pause = Paused(f"open:{cfg}")
        p = subprocess.Popen([*pause.wrap, HASHLB, "run", "-c", cfg], pass_fds=pause.pass_fds,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
        reached = pause.reached()
        for sig in sigs:
            os.kill(p.pid, sig)
        pause.go()
        err = p.stderr.read()
        rc = p.wait(timeout=60)
        names = "+".join(s.name for s in sigs)
        check(reached and rc == 1 and f"{cfg}:" in err and ": error: " in err,
              f"hashlb run, {names} while a config that does not load loads: exit {rc} (want 1, "
              f"the config's error), {err!r}")

# 21. --help behaves as any tool's, though hashlb run and steer hold their signals from main()
# on: a SIGHUP (a terminal closed under "hashlb run --help | less") or SIGUSR1 ends it by its
# default action. Held, it was lost: the text went on to its end, into a pipe nobody read as
# long as it took, and the command exited 0. The pipe, one page, is smaller than the text:
# hashlb waits on it, the text under way, when the signal comes.
F_SETPIPE_SZ = 1031
for args, sig in ((("run", "--help"), signal.SIGHUP), (("help", "run"), signal.SIGHUP),
                  (("run", "--help"), signal.SIGUSR2), (("steer", "--help"), signal.SIGUSR1)):
    r, w = os.pipe()
    fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
    p = subprocess.Popen([HASHLB, *args], stdout=w, stderr=subprocess.DEVNULL)
    os.close(w)
    ready, _, _ = select.select([r], [], [], 60)  # the text under way: past main()'s mask
    os.kill(p.pid, sig)
    with os.fdopen(r, "rb") as out:
        got = out.read()
    rc = p.wait(timeout=60)
    check(ready and rc == -sig,
          f"hashlb {' '.join(args)}: {sig.name} as it prints: exit {rc} after {len(got)} bytes, "
          f"want killed by it ({-sig})")

print(f"{'FAILED' if failures else 'ok'}: {len(failures)} failures")
sys.exit(1 if failures else 0)
