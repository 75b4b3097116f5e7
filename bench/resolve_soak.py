#!/usr/bin/env python3
"""DNS churn soak: a backend with each_address whose name's address set changes every
--every seconds (a random subset of six loopback addresses, each with a backend listening),
resolve_every: 1s, while client threads connect one connection after another and read the
backend's greeting. Counts connections, failures, and the changes hashlb applied; with a
sanitizer build, the reports in its log. hashlb runs in a mount namespace where /etc/hosts is
this script's file (tests/integration/lbtest.py's Names), so no query leaves the machine.

  python3 bench/resolve_soak.py --hashlb build/src/cli/hashlb [--seconds 60] [--every 1.3]

Bounded by --seconds. Prints a summary line; exits 1 if a connection failed, hashlb did not
exit 0, or a sanitizer reported anything."""
import os
import random
import sys
import threading
import time

from benchenv import arguments, count, parse, positive

ap = arguments(__doc__)
ap.add_argument("--seconds", type=positive, default=60)
ap.add_argument("--every", type=positive, default=1.3, help="seconds between changes of the name")
ap.add_argument("--clients", type=count, default=4, help="client threads")
args = parse(ap)

from ctltest import Lb, config  # noqa: E402
from lbtest import Names, backends_on_one_port, client_ip, who  # noqa: E402

if os.geteuid() != 0:
    print("resolve_soak: needs root (a mount namespace for /etc/hosts)")
    sys.exit(77)

hosts = [f"127.0.0.{30 + i}" for i in range(6)]
backends = backends_on_one_port([(f"p{i}", h) for i, h in enumerate(hosts)])
port = backends[0].port
names = Names("soak", "".join(f"{h} pool\n" for h in hosts[:3]))
lb = Lb("resolve_every: 1s\n" + config([("pool", f"pool:{port}", "each_address: true")],
                                       health="enabled: false"), wrap=names.wrap())
end = time.time() + args.seconds
counts = {"ok": 0, "failed": 0}
lock = threading.Lock()


def client(k):
    i = k
    while time.time() < end:
        got = who(lb.addr, client_ip(i % 500))
        with lock:
            counts["ok" if got else "failed"] += 1
        i += args.clients


threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
for t in threads:
    t.start()
rnd, changes = random.Random(1), 0
while time.time() < end:
    names.set_hosts("".join(f"{h} pool\n" for h in rnd.sample(hosts, rnd.randint(1, 6))))
    changes += 1
    time.sleep(args.every)
for t in threads:
    t.join()
resolve = lb.status()["resolve"]
status = lb.stop()
reports = sum(1 for line in lb.log
              if "ERROR: AddressSanitizer" in line or "runtime error:" in line or
              "LeakSanitizer" in line)
for b in backends:
    b.stop()
print(f"hashlb {args.hashlb}: {args.seconds:.0f} s, the name changed {changes} times, hashlb "
      f"applied {resolve['changed']} ({resolve['failed']} resolutions failed); "
      f"{counts['ok'] + counts['failed']} connections, {counts['failed']} failed; exit status "
      f"{status}; sanitizer reports: {reports}")
sys.exit(0 if counts["failed"] == 0 and status == 0 and reports == 0 else 1)
