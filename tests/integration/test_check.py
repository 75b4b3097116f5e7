#!/usr/bin/env python3
"""hashlb check and hashlb lookup -c: a good config is accepted with its tables shown
(the fingerprint and shares agree with hashlb table), a broken one is refused with
exit 1 and a line FILE:LINE:COL: error: WHAT for each of its errors, and lookup -c answers with
the table the config describes."""
import os
import re
import subprocess
import sys
import tempfile

HASHLB = os.environ.get("HASHLB", "build/src/cli/hashlb")
SRC = os.environ.get("HASHLB_SOURCE_ROOT", ".")
DEMO = os.path.join(SRC, "configs", "demo.yaml")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


def run(*args):
    return subprocess.run([HASHLB, *args], capture_output=True, text=True, timeout=60)


# --- a good config ---
p = run("check", "-c", DEMO)
check(p.returncode == 0, f"check demo.yaml: exit {p.returncode}: {p.stderr}")
check(p.stderr == "", f"check demo.yaml wrote to stderr: {p.stderr!r}")
check("service demo" in p.stdout, "check prints the service")
fp = re.search(r"fingerprint\s+([0-9a-f]{16})", p.stdout)
check(fp is not None, f"check prints a 16-hex-digit fingerprint: {p.stdout}")
shares = {m.group(1): float(m.group(2))
          for m in re.finditer(r"^\s+([abc])\s+127\.0\.0\.1:1808\d\s+1\s+ready\s+([0-9.]+)%",
                               p.stdout, re.M)}
check(sorted(shares) == ["a", "b", "c"], f"check lists backends a b c: {p.stdout}")
check(abs(sum(shares.values()) - 100.0) < 0.01, f"shares sum to 100%: {shares}")

# The same backends, scheme and seed on the command line give the same table.
t = run("table", "--scheme", "maglev", "a", "b", "c")
tfp = re.search(r"fingerprint\s+([0-9a-f]{16})", t.stdout)
check(fp and tfp and fp.group(1) == tfp.group(1),
      f"check and table agree on the fingerprint: {fp and fp.group(1)} vs {tfp and tfp.group(1)}")

# check and table name the table's parameter alike, as the config does (before, hashlb table
# said "maglev (table size 65537)" where check said "table_size=65537")
sch = re.search(r"^  scheme       (.*)$", p.stdout, re.M)
tsch = re.search(r"^scheme       (.*)$", t.stdout, re.M)
check(sch and tsch and sch.group(1) == tsch.group(1) == "maglev table_size=65537 seed=0",
      f"check and table say the scheme alike: {sch and sch.group(1)!r} {tsch and tsch.group(1)!r}")
r = run("table", "--scheme", "ring", "--vnodes", "50", "a", "b")
check(r.stdout.startswith("scheme       ring vnodes=50 seed=0\n"), f"table, ring: {r.stdout}")

# the tables' memory at most, against table_memory (1 GiB by default): whole, as the config
# writes it, not "1024.0 MiB" (as ctl status says them too)
check(re.search(r"^tables: up to 38\d\.\d KiB with backends down, of table_memory 1 GiB "
                r"\(1073741824 bytes, the default\)$",
                p.stdout, re.M) and
      re.search(r"^  table        \d+ bytes \(up to \d+ with backends down\)$", p.stdout, re.M),
      f"check prints the tables' memory and table_memory: {p.stdout}")

# a small table in a unit that shows it (before: "up to 0.0 MiB"), its tenth cut, not rounded
with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
    f.write("services:\n  - name: web\n    listen: 127.0.0.1:18380\n"
            "    table_size: 251\n    backends:\n      - {name: a, address: 127.0.0.1:18381}\n")
r = run("check", "-c", f.name)
os.unlink(f.name)
small = re.search(r"^tables: up to (\d+\.\d) KiB with backends down, of table_memory 1 GiB "
                r"\(1073741824 bytes, the default\)$",
                  r.stdout, re.M)
total = re.search(r"^  table        \d+ bytes \(up to (\d+) with backends down\)$", r.stdout, re.M)
check(r.returncode == 0 and small and total and
      small.group(1) == f"{int(total.group(1)) // 1024}.{int(total.group(1)) % 1024 * 10 // 1024}"
      != "0.0",
      f"check prints a small table's size in KiB: {r.stdout}")

# table_memory said as its errors say it (before: "1 GiB" here, "1GiB (1073741824, the
# default)" in the refusals): the figure, then the bytes exactly, which a config that is not
# whole in the figure's unit writes
for cap, said in (("1536MiB", "1.5 GiB (1610612736 bytes)"), ("0", "0 (no cap)")):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(f"table_memory: {cap}\nservices:\n  - name: web\n    listen: 127.0.0.1:18380\n"
                "    backends:\n      - {name: a, address: 127.0.0.1:18381}\n")
    r = run("check", "-c", f.name)
    os.unlink(f.name)
    check(r.returncode == 0 and re.search(r"^tables: up to .* with backends down, of "
                                          rf"table_memory {re.escape(said)}$", r.stdout, re.M),
          f"check says table_memory {cap} as {said!r}: {r.stdout}")

# weights more than 16 times apart: a table counts 1/4 byte a slot more (README), the owner
# blocks over its effective slots and over its full ones, which a table with a backend down keeps
# for the return; the README's example, within 1/8 byte a slot of table_memory, accepted while
# they counted 1/8 byte a slot, is refused now, and the same under 16 times apart is not
def skew_config(weight, cap):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(f"table_memory: {cap}\nservices:\n  - name: web\n    listen: 127.0.0.1:18380\n"
                "    table_size: 170813\n    backends:\n"
                f"      - {{name: a, address: 127.0.0.1:18381, weight: {weight}}}\n"
                "      - {name: b, address: 127.0.0.1:18382, weight: 1}\n")
    r = run("check", "-c", f.name)
    os.unlink(f.name)
    return r, f.name


def up_to(r):
    m = re.search(r"^  table        \d+ bytes \(up to (\d+) with backends down\)$", r.stdout, re.M)
    return int(m.group(1)) if m else None


# Worked out by hand, not with the code's formula: a set of owner blocks over the 170,813
# slots is 2,669 small blocks of 64 slots (2,668 whole and the 61 left) and 42 large ones of
# 4,096 (41 whole and the 2,877 left), each a summary of 4 owners of 2 bytes: 2,711 * 8 =
# 21,688 bytes; a set over the effective slots and one over the full ones: 43,376. About the
# README's 1/4 byte a slot (42,703), the large blocks and the two partial ones more.
sets = 43376
skewed, _ = skew_config(100, 0)
even, _ = skew_config(10, 0)
check(skewed.returncode == even.returncode == 0 and up_to(skewed) is not None and
      up_to(even) is not None and up_to(skewed) - up_to(even) == sets,
      f"weights 100:1 count two sets of owner blocks ({sets} bytes) more than 10:1: "
      f"{up_to(skewed)} vs {up_to(even)}")
r, name = skew_config(100, "1MiB")
check(r.returncode == 1 and r.stdout == "" and
      re.fullmatch(rf"{re.escape(name)}:3:5: error: service 'web': with its table \(\d+ bytes at "
                   r"most\) the services' tables up to it may take \d+ bytes, over table_memory "
                   r"1 MiB \(1048576 bytes\): raise it \(0 = no cap\)\n", r.stderr),
      f"the README's example, 100:1 under 1MiB, is refused: exit {r.returncode}: {r.stderr}")
r, _ = skew_config(10, "1MiB")
check(r.returncode == 0, f"10:1 under 1MiB fits: exit {r.returncode}: {r.stderr}")

# slow_start and balance_factor send clients past the table's backend: shown when on (check
# printed neither, where it shows keepalive, the client lists, the PROXY protocol...)
with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
    f.write("services:\n  - name: web\n    listen: 127.0.0.1:18380\n    slow_start: 30s\n"
            "    balance_factor: 1.25\n    backends:\n      - {name: a, address: 127.0.0.1:18381}\n")
r = run("check", "-c", f.name)
os.unlink(f.name)
check(r.returncode == 0 and
      re.search(r"^  placement    slow_start=30s balance_factor=1\.25$", r.stdout, re.M),
      f"check prints slow_start and balance_factor: {r.stdout}")
check("placement" not in p.stdout, f"and no placement line when both are off: {p.stdout}")
# and a service steered in the kernel says so, with its interface (the commit that added the
# line tested placement alone); a userspace one prints no steering line
with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
    f.write("services:\n  - name: web\n    listen: 127.0.0.1:18380\n    steering: kernel\n"
            "    interface: lo\n    backends:\n      - {name: a, address: 127.0.0.1:18381}\n")
r = run("check", "-c", f.name)
os.unlink(f.name)
check(r.returncode == 0 and re.search(r"^  steering     kernel, on lo$", r.stdout, re.M),
      f"check prints kernel steering and its interface: {r.stdout}")
check("steering" not in p.stdout, f"and no steering line for userspace: {p.stdout}")
# and the forwarder's limits with what they are for: the kernel path opens no connection,
# but while the kernel has no table of the service the daemon's own listener serves its
# clients under them (it printed "none", and that listener took up to 10,000 clients)
check(re.search(r"^  limits       max_connections=10000 connect_retries=2 \(only for clients "
                r"the daemon's listener serves while the kernel has no table of the service: "
                r"kernel steering opens no connection to count or retry\)$", r.stdout, re.M),
      f"check prints the limits the daemon's listener applies: {r.stdout}")

# nor the queue timeout, which such a service refuses to be given (it printed queue=0ms); the
# kernel path connects to no backend and times out no connection, but connect and idle, which
# the config takes, apply to the clients the daemon's own listener serves while no table is in
# the kernel: printed with what they are for (for a while, only drain=30s: an idle: 1m given
# went unsaid)
def kernel_timeouts(timeouts):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write("services:\n  - name: web\n    listen: 127.0.0.1:18380\n    steering: kernel\n"
                f"    interface: lo\n{timeouts}    backends:\n"
                "      - {name: a, address: 127.0.0.1:18381}\n")
    r = run("check", "-c", f.name)
    os.unlink(f.name)
    tl = re.search(r"^  timeouts     (.*)$", r.stdout, re.M)
    return tl.group(1) if r.returncode == 0 and tl else r.stdout + r.stderr


WHAT_FOR = ("(connect and idle: only for clients the daemon's listener serves while the kernel "
            "has no table of the service)")
got = kernel_timeouts("")
check(got == f"connect=3s idle=5m drain=30s {WHAT_FOR}",
      f"check prints a kernel-steered service's timeouts but queue: {got}")
got = kernel_timeouts("    timeouts: {connect: 3s, idle: 1m, drain: 10s}\n")
check(got == f"connect=3s idle=1m drain=10s {WHAT_FOR}",
      f"and those the config gives it: {got}")

# a configured duration is printed in the largest unit that writes it exactly, as the config
# takes it back (before, always in ms: "idle=300000ms" for "idle: 5m"; keepalive in s)
def check_config(text):
    """hashlb check of a config of <text>, in a file removed after."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
    try:
        return run("check", "-c", f.name)
    finally:
        os.unlink(f.name)


r = check_config("resolve_every: 90s\nservices:\n  - name: web\n    listen: 127.0.0.1:18380\n"
                 "    timeouts: {connect: 1500ms, idle: 2h, drain: 5m, queue: 0}\n"
                 "    health: {interval: 1500ms, timeout: 1s}\n    slow_start: 60s\n"
                 "    keepalive: {idle: 120s, interval: 10s, count: 6, user_timeout: 3m}\n"
                 "    backends:\n      - {name: a, address: 127.0.0.1:18381}\n")
for want in (", host names resolved again every 90s\n",
             "  timeouts     connect=1500ms idle=2h drain=5m queue=0ms\n",
             "  health       every 1500ms, timeout 1s, rise 2, fall 3\n",
             "  placement    slow_start=1m\n",
             "  keepalive    idle=2m interval=10s count=6 (a silent peer is dropped after 3m)\n",
             "  keepalive    user_timeout=3m (data unacknowledged"):
    check(r.returncode == 0 and want in r.stdout, f"check prints {want.strip()!r}: {r.stdout}{r.stderr}")

# idle: 0 is no idle timeout, said so: "idle=0ms" read as connections closed at once, as
# drain's and queue's 0 are
r = check_config("services:\n  - name: web\n    listen: 127.0.0.1:18380\n"
                 "    timeouts: {idle: 0, drain: 0}\n"
                 "    backends:\n      - {name: a, address: 127.0.0.1:18381}\n")
want = "  timeouts     connect=3s idle=0 (never) drain=0ms queue=0ms\n"
check(r.returncode == 0 and want in r.stdout, f"check prints idle: 0 as never: {r.stdout}{r.stderr}")
got = kernel_timeouts("    timeouts: {idle: 0}\n")
check(got == f"connect=3s idle=0 (never) drain=30s {WHAT_FOR}",
      f"and for a kernel-steered service: {got}")

# passive-only health (checks off) in the key words the config takes and within 80 columns,
# as the line of checks (it ran to 101 with a sentence of its own)
r = check_config("services:\n  - name: web\n    listen: 127.0.0.1:18380\n"
                 "    health: {enabled: false, fall: 4, passive_hold: 1500ms}\n"
                 "    backends:\n      - {name: a, address: 127.0.0.1:18381}\n"
                 "      - {name: b, address: 127.0.0.1:18382}\n")
want = "  health       passive only (checks off): fall 4, passive_hold 1500ms\n"
check(r.returncode == 0 and want in r.stdout, f"check prints {want.strip()!r}: {r.stdout}{r.stderr}")
long_lines = [l for l in r.stdout.splitlines() if l.startswith("  health") and len(l) > 80]
check(not long_lines, f"check's health line within 80 columns: {long_lines}")
# and at the widest the keys allow: fall 100 (its most), passive_hold 3599999ms (under 1h, its
# most, in the unit that writes it longest)
r = check_config("services:\n  - name: web\n    listen: 127.0.0.1:18380\n"
                 "    health: {enabled: false, fall: 100, passive_hold: 3599999ms}\n"
                 "    backends:\n      - {name: a, address: 127.0.0.1:18381}\n"
                 "      - {name: b, address: 127.0.0.1:18382}\n")
lines = [l for l in r.stdout.splitlines() if l.startswith("  health")]
check(r.returncode == 0 and len(lines) == 1 and "fall 100, passive_hold 3599999ms" in lines[0]
      and len(lines[0]) <= 80,
      f"check's widest passive-only health line within 80 columns: {lines}{r.stderr}")

# with kernel steering too, said what for: the kernel path opens no connection, but the
# daemon's own listener on the VIP does while the kernel has no table of the service, and its
# failed connects hold a backend (it printed "health off (every backend counts as up)"); off
# where it does not apply there either, a lone backend. With checks on too, those connects'
# failures count toward fall (passive checks), as the forwarder's do (it said nothing of them,
# as if kernel steering made none); passive off: none.
kernel_steered = ("services:\n  - name: web\n    listen: 127.0.0.1:18380\n    steering: kernel\n"
                  "    interface: lo\n    health: {%s}\n"
                  "    backends:\n      - {name: a, address: 127.0.0.1:18381}\n")
kernel_checks = kernel_steered + "      - {name: b, address: 127.0.0.1:18382}\n"
only_the_listener = ("(only from the connects of clients the daemon's listener serves while the "
                     "kernel has no table of the service: kernel steering opens none)")
for cfg, want, what in (
        (kernel_checks % "enabled: false",
         f"passive only (checks off): fall 3, passive_hold 10s {only_the_listener}",
         "a kernel-steered service's passive-only health"),
        (kernel_steered % "enabled: false", "off (every backend counts as up)",
         "off for its lone backend"),
        (kernel_checks % "interval: 5s",
         f"every 5s, timeout 1s, rise 2, fall 3, failed connects count toward fall "
         f"{only_the_listener}", "a kernel-steered service's passive checks with checks on"),
        (kernel_checks % "interval: 5s, passive: false",
         "every 5s, timeout 1s, rise 2, fall 3, passive off", "passive off as before")):
    r = check_config(cfg)
    check(r.returncode == 0 and f"  health       {want}\n" in r.stdout,
          f"check prints {what}: {r.stdout}{r.stderr}")

q = run("check", "-q", "-c", DEMO)
check(q.returncode == 0 and q.stdout == "" and q.stderr == "", "check -q is silent on success")

for name in sorted(os.listdir(os.path.join(SRC, "configs"))):
    if name.endswith(".yaml"):
        r = run("check", "-q", "-c", os.path.join(SRC, "configs", name))
        check(r.returncode == 0, f"configs/{name} passes check: {r.stderr}")

# ipv6.yaml promises that its two services, same backends, scheme and seed, route alike.
p6 = run("check", "-c", os.path.join(SRC, "configs", "ipv6.yaml"))
fps = re.findall(r"fingerprint\s+([0-9a-f]{16})", p6.stdout)
check(len(fps) == 2 and fps[0] == fps[1], f"ipv6.yaml: both services have one fingerprint: {fps}")

# --- configs/full.yaml says it shows every key hashlb reads: each key config.c accepts is there
with open(os.path.join(SRC, "src", "config", "config.c")) as f:
    src = f.read()
with open(os.path.join(SRC, "configs", "full.yaml")) as f:
    full = f.read()
keys = set()
for table in re.findall(r"static const char \*const [a-z]+_keys\[\] = \{(.*?)\};", src, re.S):
    keys |= set(re.findall(r'"([a-z_]+)"', table))
absent = sorted(k for k in keys if not re.search(rf"^\s*(#\s*)?(- )?{k}:", full, re.M))
check(len(keys) > 30 and not absent, f"{len(keys)} keys; not in configs/full.yaml: {absent}")
# and what a backend's name may be, as the service's is given there (it said nothing: a user
# learned the rule from an error)
with open(os.path.join(SRC, "include", "hashlb", "config.h")) as f:
    rule = re.search(r"#define HASHLB_BACKEND_NAME_RULE((?:.*\\\n)*.*)", f.read()).group(1)
rule = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', rule)).replace('\\"', '"')
entry = re.search(r"^( +)- name: web-1 +#(.*?)\n\1  address:", full, re.M | re.S)
said = " ".join(re.sub(r"^\s*#", "", ln).strip() for ln in entry.group(2).split("\n"))
check(all(part in said.replace("of UTF-8 ", "") for part in rule.split(" (")),
      f"configs/full.yaml's backend name does not say {rule!r}: {said!r}")
# and each key that config.c refuses with kernel steering says so there ("Userspace steering
# only", in the comment from its line to the next key's)
only = set(re.findall(r'(?:userspace_only\(ld,|get_userspace_bool\(ld,)[^;]*?\bs,\s*"([a-z_.]+)"', src))
only |= {"allow_clients", "deny_clients"}  # their loader passes the key it is given
lines = full.split("\n")
unsaid = []
for key in sorted(only):
    k = key.split(".")[-1]
    at = [i for i, ln in enumerate(lines) if re.match(rf"^\s*(#\s*)?(- )?{k}:", ln)]
    block = ""
    for i in at[:1]:
        block = lines[i]
        for ln in lines[i + 1:]:
            # a key, or a key commented out (at a key's indentation, not a comment's)
            if not re.match(r"^\s+#", ln) or re.match(r"^\s{0,12}#\s*(- )?[a-z_]+:", ln):
                break
            block += " " + ln
    if "userspace" not in block.lower():
        unsaid.append(key)
check(len(only) > 12 and not unsaid,
      f"{len(only)} keys need steering: userspace; configs/full.yaml does not say so for {unsaid}")

# --- what a service does beyond its table: health exchange, source, caps ---
with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
    f.write("services:\n  - name: web\n    listen: 127.0.0.1:18380\n"
            "    source: 127.0.0.7\n    max_connection_rate: 300\n"
            '    health: {send: "PING\\r\\n\\x01", expect: "+PONG", close_on_down: true}\n'
            "    backends:\n      - {name: a, address: 127.0.0.1:18381, max_connections: 500}\n"
            "      - {name: b, address: 127.0.0.1:18382}\n"
            "      - {name: c, address: 127.0.0.1:18383, backup: true, close_on_return: true}\n"
            "      - {name: d, address: 127.0.0.1:18384, backup: true}\n")
r = run("check", "-c", f.name)
os.unlink(f.name)
check(r.returncode == 0 and
      'health       every 2s, timeout 1s, rise 2, fall 3, send "PING\\r\\n\\x01", '
      'expect "+PONG", close_on_down' in r.stdout and "  source       127.0.0.7\n" in r.stdout and
      re.search(r"^\s+a\s.*max_connections=500$", r.stdout, re.M) and
      not re.search(r"^\s+b\s.*max_connections", r.stdout, re.M) and
      re.search(r"^  limits .* max_connection_rate=300/s$", r.stdout, re.M) and
      re.search(r"^\s+c\s.*  backup \(close_on_return\)$", r.stdout, re.M) and
      re.search(r"^\s+d\s.*  backup$", r.stdout, re.M),
      f"check shows the health exchange, the source, the caps, the rate and the backups: {r.stdout}")

# "up" counts the backends that take a share: not one of weight 0 (it said "3 taking clients"
# for a in maint, b of weight 0 and the backups c and d, which take them all; "2" for a ready,
# which takes them all). The word is ctl's and table's ("N/M backends up", "(N up)"): check
# said "taking clients" for the same count
for state, taking in (("maint", 2), ("ready", 1)):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write("services:\n  - name: web\n    listen: 127.0.0.1:18380\n    backends:\n"
                f"      - {{name: a, address: 127.0.0.1:18381, state: {state}}}\n"
                "      - {name: b, address: 127.0.0.1:18382, weight: 0}\n"
                "      - {name: c, address: 127.0.0.1:18383, backup: true}\n"
                "      - {name: d, address: 127.0.0.1:18384, backup: true, weight: 3}\n")
    r = run("check", "-c", f.name)
    os.unlink(f.name)
    check(r.returncode == 0 and f"  backends     4 ({taking} up)\n" in r.stdout,
          f"a {state}: check counts {taking} backends up: {r.stdout[-400:]}")
    # its column is the admin state the config sets, headed so: hashlb table's STATE is
    # whether each takes clients (up, down, weight 0), which check's "ready" for b (weight 0)
    # is not
    check(re.search(rf"^    NAME +ADDRESS +WEIGHT ADMIN +SHARE +IDEAL$", r.stdout, re.M) and
          re.search(rf"^    a +127\.0\.0\.1:18381 +1 {state} ", r.stdout, re.M) and
          re.search(r"^    b +127\.0\.0\.1:18382 +0 ready ", r.stdout, re.M),
          f"a {state}: check heads the admin state ADMIN: {r.stdout[-400:]}")
# and hashlb table, given the same weights, says the same count in the same words
r = check_config("services:\n  - name: web\n    listen: 127.0.0.1:18380\n    backends:\n"
                 "      - {name: a, address: 127.0.0.1:18381}\n"
                 "      - {name: b, address: 127.0.0.1:18382, weight: 0}\n"
                 "      - {name: c, address: 127.0.0.1:18383, weight: 2}\n")
t = run("table", "a", "b=0", "c=2")
check("  backends     3 (2 up)\n" in r.stdout and "backends     3 (2 up)\n" in t.stdout,
      f"check and table count a weight-0 backend alike, as not up: {r.stdout[-300:]}{t.stdout}")

# max_connections_per_client's client_prefix said beside it, in parentheses as
# (abort_on_close) is: said bare, "per client prefix: IPv4 /24, IPv6 /128" ran into the
# next key ("... IPv6 /128 max_connection_rate=300/s")
with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
    f.write("services:\n  - name: web\n    listen: 127.0.0.1:18380\n"
            "    max_connections_per_client: 2\n    client_prefix: {ipv4: 24}\n"
            "    max_connection_rate: 300\n"
            "    backends:\n      - {name: a, address: 127.0.0.1:18381}\n")
r = run("check", "-c", f.name)
os.unlink(f.name)
limits = re.search(r"^  limits +(.*)$", r.stdout, re.M)
check(r.returncode == 0 and limits and limits.group(1) ==
      "max_connections=10000 connect_retries=2 max_connections_per_client=2 "
      "(per client prefix: IPv4 /24, IPv6 /128) max_connection_rate=300/s",
      f"check shows client_prefix beside max_connections_per_client: {limits and limits.group(0)}")

# --- broken configs: exit 1, one line FILE:LINE:COL: error: ..., nothing on stdout ---
with open(DEMO) as f:
    demo = f.read()
broken = [
    # (what to do to demo.yaml, line, column, words in the message)
    (demo.replace("address: 127.0.0.1:18082", "address: 127.0.0.1:99999"), None, None,
     "port 99999 is out of range 1..65535"),
    (demo.replace("scheme: maglev  ", "scheme: magleb  "), None, None,
     "'scheme' must be ring or maglev, found 'magleb'"),
    (demo.replace("    hash_key:", "    hash-key:"), None, None,
     "unknown key 'hash-key' in service (did you mean 'hash_key'?)"),
    (demo.replace("- name: c\n", "- name: a\n"), None, None,
     "duplicate backend name 'a'"),
    (demo + "  - name: other\n    listen: [127.0.0.1:1\n", None, None, "YAML syntax error"),
    ("", 1, 1, "empty"),
    # a link-local address without its zone: bind() and connect() refuse it (EINVAL), so
    # the listener failed at start with "Invalid argument", the backend stayed down
    (demo.replace("address: 127.0.0.1:18082", 'address: "[fe80::1]:18082"'), None, None,
     "'[fe80::1]:18082' is a link-local address, usable only with a zone"),
    (demo.replace("listen: 127.0.0.1:18080", 'listen: "[fe80::1]:18080"'), None, None,
     "'listen': '[fe80::1]:18080' is a link-local address"),
    # the services' tables together past table_memory (three arrays of 174,763 slots > 1 MiB):
    # refused at the service that passes it, before any table is built
    (demo.replace("workers: auto", "table_memory: 1MiB\nworkers: auto")
     .replace("    scheme: maglev ", "    table_size: 174763\n    scheme: maglev ", 1),
     14, 5, "service 'demo': with its table"),
    # hash_prefix: only with src-ip (the others hash the port), each length in its range
    (demo.replace("    hash_key: src-ip ", "    hash_prefix: {ipv4: 24}\n    hash_key: 4-tuple "),
     16, 5, "'hash_prefix' applies to hash_key src-ip, but this service uses 4-tuple"),
    (demo.replace("    hash_key: src-ip ", "    hash_prefix:\n      ipv6: 129\n    hash_key: src-ip "),
     17, 13, "'ipv6' 129 is out of range 1..128"),
    # a duration without a unit counts milliseconds: one out of range for that, meant as
    # seconds, says how it was read (before: "'interval' 5 is out of range 10ms..1h", where 5
    # looked in range), as the warning of one in range does
    (demo.replace("    hash_key: src-ip ", "    health:\n      interval: 5\n    hash_key: src-ip "),
     17, 17, "'interval' 5 is out of range 10ms..1h: a number alone counts milliseconds, "
     "5 read as 5ms: write 5s for seconds"),
]
with tempfile.TemporaryDirectory(prefix="hashlb-check-") as tmp:
    for i, (text, line, col, words) in enumerate(broken):
        path = os.path.join(tmp, f"broken{i}.yaml")
        with open(path, "w") as f:
            f.write(text)
        check(text != demo, f"broken case {i} changes the config")
        r = run("check", "-c", path)
        check(r.returncode == 1, f"broken {i}: exit {r.returncode}, want 1")
        check(r.stdout == "", f"broken {i}: nothing on stdout, got {r.stdout!r}")
        lines = r.stderr.splitlines()
        m = re.fullmatch(re.escape(path) + r":(\d+):(\d+): error: (.*)", lines[0] if lines else "")
        check(len(lines) == 1 and m is not None, f"broken {i}: one FILE:LINE:COL line: {r.stderr!r}")
        if m and line is not None:
            check((int(m.group(1)), int(m.group(2))) == (line, col),
                  f"broken {i}: at {m.group(1)}:{m.group(2)}, want {line}:{col}")
        check(words in r.stderr, f"broken {i}: {words!r} not in {r.stderr!r}")
        # lookup -c refuses the same file the same way.
        lk = run("lookup", "-c", path, "10.0.0.1")
        check(lk.returncode == 1 and lk.stderr == r.stderr,
              f"broken {i}: lookup -c refuses it like check: {lk.returncode} {lk.stderr!r}")

    # The position points at the offending value: the bad port's line and column.
    lines = demo.splitlines()
    ln = next(i for i, s in enumerate(lines) if "127.0.0.1:18082" in s) + 1
    col = lines[ln - 1].index("127.0.0.1:18082") + 1
    path = os.path.join(tmp, "port.yaml")
    with open(path, "w") as f:
        f.write(demo.replace("127.0.0.1:18082", "127.0.0.1:0"))
    r = run("check", "-c", path)
    check(r.stderr.startswith(f"{path}:{ln}:{col}: error: "),
          f"bad port reported at {ln}:{col}: {r.stderr!r}")

r = run("check", "-c", "/nonexistent/hashlb.yaml")
check(r.returncode == 1 and r.stderr.startswith("/nonexistent/hashlb.yaml: error: cannot open"),
      f"missing file: {r.returncode} {r.stderr!r}")
# a directory is said to be one ("not a regular file: Invalid argument" before)
r = run("check", "-c", os.path.join(SRC, "configs"))
check(r.returncode == 1 and r.stderr.endswith(": error: the configuration is a directory: "
                                               "give the file in it\n"),
      f"a directory: {r.returncode} {r.stderr!r}")
# a path with a newline or a control byte: still one line, the bytes written \n and \xNN
# (before: the newline went out as is, the error on two lines)
with tempfile.TemporaryDirectory(prefix="hashlb-check-") as tmp:
    for name, shown in (("a\nb.yaml", "a\\nb.yaml"), ("c\x01\x1b.yaml", "c\\x01\\x1b.yaml")):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write("services: [\n")
        for r in (run("check", "-c", path), run("check", "-c", path + ".missing")):
            check(r.returncode == 1 and r.stderr.count("\n") == 1 and
                  r.stderr.startswith(os.path.join(tmp, shown)),
                  f"{name!r}: one line naming the file: {r.returncode} {r.stderr!r}")
        # and the lines of the other commands that name it, so written too (before, ctl's,
        # lookup's and steer's own went out as is: "hashlb ctl: .../a", then "b.yaml has
        # errors ...")
        with open(path, "w") as f:
            f.write("admin: off\nservices: 3\n")
        r = run("ctl", "-c", path, "status")
        lines = r.stderr.splitlines()
        check(r.returncode == 1 and len(lines) == 3 and
              all(os.path.join(tmp, shown) in ln for ln in lines),
              f"{name!r}: ctl, a line each naming the file: {r.returncode} {r.stderr!r}")
        with open(os.path.join(SRC, "configs", "full.yaml")) as f:
            full = f.read()
        with open(path, "w") as f:
            f.write(full)
        r = run("check", "-c", path)  # and its summary's first line, on stdout
        check(r.returncode == 0 and r.stdout.startswith(os.path.join(tmp, shown) + ": ok: "),
              f"{name!r}: check's summary names the file on its line: {r.stdout[:200]!r}")
        for args in (("lookup", "-c", path, "10.0.0.1"), ("lookup", "-c", path, "--service", "x",
                                                           "10.0.0.1"),
                     ("steer", "-c", path), ("steer", "-c", path, "--service", "x")):
            r = run(*args)
            check(r.returncode == 2 and r.stderr.count("\n") == 2 and
                  os.path.join(tmp, shown) in r.stderr.split("\n")[0],
                  f"{name!r}: {args[0]}, one line naming the file: {r.returncode} {r.stderr!r}")
r = run("check")
check(r.returncode == 2, f"check without -c: exit {r.returncode}, want 2")
r = run("check", "--help")
check(r.returncode == 0 and all(s in r.stdout for s in
                                ("NAME", "SYNOPSIS", "OPTIONS", "EXIT STATUS", "EXAMPLES")),
      "check --help is a manual page")

# --- lookup -c: the table of the config, same answers as the command-line form ---
clients = [f"127.0.{i}.{j}" for i in range(4) for j in range(1, 50)]
a = run("lookup", "-c", DEMO, *clients)
b = run("lookup", "-s", "maglev", ",".join(clients), "a", "b", "c")
check(a.returncode == 0 and b.returncode == 0, f"lookup runs: {a.stderr} {b.stderr}")
check(a.stdout == b.stdout and len(a.stdout.splitlines()) == len(clients),
      "lookup -c answers like the command-line form with the same backends")
a = run("lookup", "-c", DEMO, "--down", "b", *clients)
b = run("lookup", "--down", "b", ",".join(clients), "a", "b", "c")
check(a.stdout == b.stdout and " b " not in a.stdout, "lookup -c --down b: nobody goes to b")
# --down applies the backup rule, as the running hashlb does: with every primary down the
# backups take the clients (lookup used to say no backend, '-')
with tempfile.TemporaryDirectory(prefix="hashlb-check-") as tmp:
    base = ("services:\n  - name: s\n    listen: 127.0.0.1:18300\n    backends:\n"
            "      - {name: a, address: \"127.0.0.1:18301\"%s}\n"
            "      - {name: b, address: \"127.0.0.1:18302\"%s}\n"
            "      - {name: k, address: \"127.0.0.1:18303\", backup: true}\n")
    plain, maint = os.path.join(tmp, "backup.yaml"), os.path.join(tmp, "maint.yaml")
    with open(plain, "w") as f:
        f.write(base % ("", ""))
    with open(maint, "w") as f:
        f.write(base % (", state: maint", ", state: maint"))
    a = run("lookup", "-c", plain, "--down", "a,b", *clients[:20])
    b = run("lookup", "-c", maint, *clients[:20])
    check(a.returncode == 0 and a.stdout == b.stdout and
          all(l.split()[1] == "k" for l in a.stdout.splitlines()),
          f"lookup -c --down a,b: the backup k, as with a and b in maint: {a.stdout[:200]!r}")
for args, status, words in [
    (("lookup", "-c", DEMO, "--scheme", "ring", "10.0.0.1"), 2, "cannot be combined with -c"),
    (("lookup", "-c", DEMO), 2, "need a client"),
    (("lookup", "-c", DEMO, "--service", "nope", "10.0.0.1"), 2, "--service 'nope'"),
    (("lookup", "-c", os.path.join(SRC, "configs", "ipv6.yaml"), "10.0.0.1"), 2, "--service"),
    (("lookup", "-c", DEMO, "--down", "zz", "10.0.0.1"), 2, "not a backend"),
]:
    r = run(*args)
    check(r.returncode == status and words in r.stderr,
          f"hashlb {' '.join(args)}: exit {r.returncode} (want {status}), {r.stderr!r}")
r = run("lookup", "-c", os.path.join(SRC, "configs", "ipv6.yaml"), "--service", "v6", "[::1]:4000")
check(r.returncode == 0 and r.stdout.split()[1].startswith("v6-"), f"lookup --service: {r.stdout!r}")

# --- check --against OLD: what a reload from OLD to FILE moves, service by service ---
# The figure is the share of clients whose backend differs between the two tables: 4,000
# clients looked up in both configs land within a few standard errors (0.008) of it.
MOVED_LINE = re.compile(r"^  (\S+)\s+(?:([0-9.]+)%|(added|removed))  (\d+) -> (\d+)(?:  placed anew \((\S+)\))?$", re.M)
with tempfile.TemporaryDirectory(prefix="hashlb-against-") as tmp:
    # a backend's address is its name's (a at port + 1, b at port + 2...; <at>: another port
    # than the listen port to count from), whichever backends the service has: another
    # address is a move of its own
    def svc(name, port, scheme, names, extra="", at=None):
        base = (at or port) + 1 - ord("a")
        return (f"  - name: {name}\n    listen: 127.0.0.1:{port}\n    scheme: {scheme}\n{extra}"
                "    backends:\n" + "".join(f"      - {{name: {n}, address: \"127.0.0.1:{base + ord(n)}\"}}\n"
                                          for n in names))
    old = os.path.join(tmp, "old.yaml")
    new = os.path.join(tmp, "new.yaml")
    with open(old, "w") as f:
        f.write("services:\n" + svc("web", 31200, "ring", "abcd") + svc("db", 31210, "maglev", "abcde")
                + svc("gone", 31220, "maglev", "ab"))
    with open(new, "w") as f:
        f.write("services:\n" + svc("web", 31200, "ring", "abcde") + svc("db", 31210, "maglev", "abde")
                + svc("fresh", 31230, "ring", "ab"))
    r = run("check", "-c", new, "--against", old)
    rows = {m.group(1): m for m in MOVED_LINE.finditer(r.stdout)}
    check(r.returncode == 0 and r.stderr == "" and sorted(rows) == ["db", "fresh", "gone", "web"],
          f"check --against: a line each for web, db, fresh, gone: {r.returncode} {r.stdout!r} {r.stderr!r}")
    many = [f"10.{i}.{j}.{k}" for i in range(2) for j in range(40) for k in range(1, 51)]

    def looked_up_moved(service):
        a = run("lookup", "-c", old, "--service", service, ",".join(many))
        b = run("lookup", "-c", new, "--service", service, ",".join(many))
        pa = [l.split()[1] for l in a.stdout.splitlines()]
        pb = [l.split()[1] for l in b.stdout.splitlines()]
        check(len(pa) == len(pb) == len(many), f"lookup {service}: {a.stderr} {b.stderr}")
        return sum(x != y for x, y in zip(pa, pb)) / max(len(pa), 1)
    if sorted(rows) == ["db", "fresh", "gone", "web"]:
        web, db = float(rows["web"].group(2)) / 100, float(rows["db"].group(2)) / 100
        # one added to four on a ring: its share moves, about 1/5; one of five off Maglev:
        # its fifth and a few more
        check(0.15 < web < 0.25 and abs(web - looked_up_moved("web")) < 0.04,
              f"web (ring, 4 -> 5): {web} moved, lookups find {looked_up_moved('web')}")
        check(0.19 < db < 0.26 and abs(db - looked_up_moved("db")) < 0.04,
              f"db (maglev, 5 -> 4): {db} moved, lookups find {looked_up_moved('db')}")
        check(rows["web"].group(4, 5) == ("4", "5") and rows["db"].group(4, 5) == ("5", "4"),
              f"backends counted: {r.stdout!r}")
        check(rows["fresh"].group(3) == "added" and rows["gone"].group(3) == "removed",
              f"services added and removed: {r.stdout!r}")
    # the same config: nothing moves
    r = run("check", "-c", old, "--against", old)
    check(r.returncode == 0 and [m.group(2) for m in MOVED_LINE.finditer(r.stdout)] == ["0.000"] * 3,
          f"check --against itself: 0.000% each: {r.stdout!r}")
    # a new seed changes every client's hash: placed anew, 1 - sum of shares squared (4/5)
    with open(new, "w") as f:
        f.write("services:\n" + svc("db", 31210, "maglev", "abcde", "    seed: 9\n"))
    r = run("check", "-c", new, "--against", old)
    m = MOVED_LINE.search(r.stdout)
    check(m and m.group(1) == "db" and m.group(6) == "seed" and abs(float(m.group(2)) - 80) < 0.5,
          f"check --against, seed changed: placed anew (seed), ~80%: {r.stdout!r}")
    # a backend that keeps its name and gets another address keeps its place in the table,
    # but its clients reach another server: its share (1/5) moves; with a new seed too, it
    # keeps none of its clients (1 - 4/25). Before, names alone were matched: 0.000%, 80%
    for extra, want in (("", 20), ("    seed: 9\n", 84)):
        with open(new, "w") as f:
            f.write("services:\n" + svc("db", 31210, "maglev", "abcde", extra)
                    .replace("127.0.0.1:31213", "127.0.0.1:31219"))
        r = run("check", "-c", new, "--against", old)
        m = MOVED_LINE.search(r.stdout)
        check(m and m.group(1) == "db" and abs(float(m.group(2)) - want) < 0.5,
              f"check --against, c at another address{', seed' if extra else ''}: ~{want}%: "
              f"{r.stdout!r}")
    # the 4-tuple key hashes the address clients connect to: a service listening elsewhere
    # places every client anew (listen); under src-ip the same move changes no hash
    for key, want in (("4-tuple", "listen"), ("src-ip", None)):
        k = f"    hash_key: {key}\n"
        with open(old, "w") as f:
            f.write("services:\n" + svc("db", 31210, "maglev", "abcde", k))
        with open(new, "w") as f:
            f.write("services:\n" + svc("db", 31240, "maglev", "abcde", k, at=31210))
        r = run("check", "-c", new, "--against", old)
        m = MOVED_LINE.search(r.stdout)
        moved = float(m.group(2)) if m and m.group(2) else -1
        check(m and m.group(6) == want and abs(moved - (80 if want else 0)) < 0.5,
              f"check --against, {key}, listen moved: placed anew ({want}), "
              f"{80 if want else 0}%: {r.stdout!r}")
    # a wildcard's connections hash the address each reached: to one of its addresses on the
    # same port, clients connecting there hash as before (before: placed anew, 80%); another
    # port is another destination
    k = "    hash_key: 4-tuple\n"
    for was, now, want in (("0.0.0.0:31210", "127.0.0.1:31210", None),
                           ("127.0.0.1:31210", "0.0.0.0:31210", None),
                           ("0.0.0.0:31210", "127.0.0.1:31240", "listen")):
        with open(old, "w") as f:
            f.write("services:\n" + svc("db", 31210, "maglev", "abcde", k)
                    .replace("listen: 127.0.0.1:31210", f"listen: {was}"))
        with open(new, "w") as f:
            f.write("services:\n" + svc("db", 31210, "maglev", "abcde", k)
                    .replace("listen: 127.0.0.1:31210", f"listen: {now}"))
        r = run("check", "-c", new, "--against", old)
        m = MOVED_LINE.search(r.stdout)
        moved = float(m.group(2)) if m and m.group(2) else -1
        check(m and m.group(6) == want and abs(moved - (80 if want else 0)) < 0.5,
              f"check --against, 4-tuple, {was} -> {now}: placed anew ({want}): {r.stdout!r}")
    # OLD refused as FILE would be: its line, exit 1, nothing on stdout
    bad = os.path.join(tmp, "bad.yaml")
    with open(bad, "w") as f:
        f.write("services: [\n")
    r = run("check", "-c", new, "--against", bad)
    check(r.returncode == 1 and r.stdout == "" and r.stderr.startswith(bad + ":"),
          f"check --against a broken OLD: exit 1, its error: {r.returncode} {r.stdout!r} {r.stderr!r}")
    r = run("check", "-q", "-c", new, "--against", old)
    check(r.returncode == 2 and "-q" in r.stderr and "--against" in r.stderr,
          f"check -q --against: a usage error: {r.returncode} {r.stderr!r}")

# A service where no backend can take a client (each of weight 0, or in drain or maint as the
# config starts it) is valid, and hashlb check exits 0, but warns of it at the service: before,
# it said only "0 up" among the tables, and every client of it reached no backend. A ready
# backup of weight above 0 takes them (no warning), as does one ready backend.
NONE_SVC = ("services:\n  - name: web\n    listen: 127.0.0.1:18380\n    backends:\n"
            "      - {name: a, address: 127.0.0.1:18381, weight: 0}\n"
            "      - {name: b, address: 127.0.0.1:18382, state: drain}\n"
            "      - {name: c, address: 127.0.0.1:18383, state: maint}\n")
with tempfile.TemporaryDirectory() as tmp:
    for name, text, warned in (
            ("none.yaml", NONE_SVC, True),
            ("backup.yaml", NONE_SVC + "      - {name: d, address: 127.0.0.1:18384, backup: true}\n",
             False),
            ("ready.yaml", NONE_SVC.replace("state: maint", "state: ready"), False),
            ("drained.yaml", NONE_SVC.replace("state: maint", "state: drain"), True)):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        for args in (("check", "-c", path), ("check", "-q", "-c", path)):
            r = run(*args)
            kinds = "1 of weight 0, 1 in drain, 1 in maint" if "maint" in text else \
                "1 of weight 0, 2 in drain"
            want = (f"{path}:2:5: warning: service 'web': no backend takes clients ({kinds}): "
                    "its clients reach none until one is ready with a weight above 0 (hashlb "
                    "ctl set NAME ready, weight N)\n") if warned else ""
            check(r.returncode == 0 and r.stderr == want and
                  (r.stdout == "") == ("-q" in args),
                  f"{' '.join(args[:-1])} {name}: exit 0, {'warned' if warned else 'no warning'}:"
                  f" {r.returncode} {r.stderr!r}")

# admin with no value is off, as documented, but its address commented out turned hashlb ctl
# and /metrics off without a word: check warns of it (with -q too), exit 0, and says to write
# off; not of admin: off, nor with --admin, whose address is the one in force.
with tempfile.TemporaryDirectory() as tmp:
    svc = ("services:\n  - name: web\n    listen: 127.0.0.1:18385\n    backends:\n"
           "      - {name: a, address: 127.0.0.1:18386}\n")
    path = os.path.join(tmp, "admin.yaml")
    for admin, extra, warned in (("admin:   # 127.0.0.1:9901\n", (), True),
                                 ("admin:   # 127.0.0.1:9901\n", ("-q",), True),
                                 ("admin: off\n", (), False),
                                 ("admin:\n", ("--admin", "127.0.0.1:18387"), False)):
        with open(path, "w") as f:
            f.write(admin + svc)
        r = run("check", *extra, "-c", path)
        want = (f"{path}:1:6: warning: 'admin' has no value, which turns the admin endpoint off "
                "(no hashlb ctl, no /metrics): write off to mean that, or an address\n"
                if warned else "")
        check(r.returncode == 0 and r.stderr == want,
              f"check {' '.join(extra)} of {admin.strip()!r}: exit 0, "
              f"{'warned' if warned else 'no warning'}: {r.returncode} {r.stderr!r}")

# A config with several independent mistakes: every one is said, FILE:LINE:COL: error: WHAT in
# file order, then how many (before, the first alone: five mistakes took five runs), by check
# and by a start alike; exit 1.
MULTI = ("workers: 0\n"
         "services:\n"
         "  - name: web\n"
         "    listen: 127.0.0.1:18390\n"
         "    tabel_size: 101\n"
         "    health: {interval: 1s, timeout: 5s}\n"
         "    backends:\n"
         "      - {name: a, address: 127.0.0.1:99999}\n"
         "      - {name: b, address: 127.0.0.1:18391, weight: -3}\n")
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "multi.yaml")
    with open(path, "w") as f:
        f.write(MULTI)
    want = (f"{path}:1:10: error: 'workers' 0 is out of range 1..256\n"
            f"{path}:5:5: error: unknown key 'tabel_size' in service (did you mean "
            "'table_size'?)\n"
            f"{path}:6:37: error: health check timeout 5s is longer than its interval 1s\n"
            f"{path}:8:28: error: 'address': '127.0.0.1:99999' is not a valid address: port "
            "99999 is out of range 1..65535\n"
            f"{path}:9:53: error: 'weight' -3 is out of range 0..10000\n")
    for cmd in ("check", "run"):
        r = run(cmd, "-c", path)
        check(r.returncode == 1 and r.stdout == "" and
              r.stderr == want + f"hashlb {cmd}: 5 errors\n",
              f"{cmd} of a config with 5 mistakes says each, then the count: {r.returncode} "
              f"{r.stderr!r}")
    # and lookup -c, steer -c, check --against OLD, which load it as check does (they said the
    # first alone); steer in a network namespace of its own (nothing attached to the host's lo
    # if the refusal regressed, as test_cli.py runs it)
    good = os.path.join(tmp, "good.yaml")
    with open(good, "w") as f:
        f.write("services:\n  - name: k\n    listen: 127.0.0.1:18080\n    backends:\n"
                "      - {name: a, address: '127.0.0.1:18081'}\n")
    for cmd, args in (("lookup", ("-c", path, "10.0.0.1")), ("steer", ("-c", path)),
                      ("check", ("-c", good, "--against", path))):
        r = subprocess.run([*(("unshare", "--net") if cmd == "steer" else ()), HASHLB, cmd, *args],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 1 and r.stdout == "" and
              r.stderr == want + f"hashlb {cmd}: 5 errors\n",
              f"{cmd} {' '.join(args[:-1])} of a config with 5 mistakes says each, then the count: "
              f"{r.returncode} {r.stderr!r}")
    # the health timeout is checked against the interval as written: an interval refused
    # leaves its default, 2s, which a timeout of 5s is no error of; one error is one line, as
    # it always was, no count
    with open(path, "w") as f:
        f.write(MULTI.replace("tabel_size: 101", "table_size: 101").replace("workers: 0", "")
                .replace("interval: 1s", "interval: 1x")
                .replace("127.0.0.1:99999", "127.0.0.1:18392").replace("weight: -3", "weight: 3"))
    r = run("check", "-c", path)
    check(r.returncode == 1 and r.stderr.startswith(f"{path}:6:24: error: 'interval' must be a "
                                                    "duration") and
          len(r.stderr.splitlines()) == 1,
          f"a timeout is not checked against an interval refused: {r.returncode} {r.stderr!r}")
    # a config with errors is not read whole: its warnings are not looked for (they would be
    # of the defaults left for values refused), the errors alone said (--help, operations.md)
    with open(path, "w") as f:
        f.write("admin:\n" + MULTI.replace("workers: 0\n", "")
                .replace("tabel_size: 101", "table_size: 101")
                .replace("timeout: 5s", "timeout: 1s")
                .replace("127.0.0.1:99999", "127.0.0.1:18392"))
    r = run("check", "-c", path)
    check(r.returncode == 1 and
          r.stderr == f"{path}:9:53: error: 'weight' -3 is out of range 0..10000\n",
          f"with errors, no warning (admin: with no value): {r.returncode} {r.stderr!r}")
    # past 20, the first 20 and how many more
    with open(path, "w") as f:
        f.write("".join(f"bad{i}: 1\n" for i in range(25)) + MULTI.replace("workers: 0\n", ""))
    r = run("check", "-c", path)
    lines = r.stderr.splitlines()
    check(r.returncode == 1 and len(lines) == 22 and
          lines[0] == f"{path}:1:1: error: unknown key 'bad0' in the configuration" and
          lines[19].startswith(f"{path}:20:1: error: unknown key 'bad19'") and
          lines[20:] == ["hashlb check: and 9 more errors", "hashlb check: 29 errors"],
          f"check of 29 errors shows 20, then how many more: {r.returncode} {r.stderr!r}")

print(f"{'FAILED' if failures else 'ok'}: {len(failures)} failures")
sys.exit(1 if failures else 0)
