#!/usr/bin/env python3
"""Waiting clients leaving one worker's queue, newest first against oldest first: hashlb's CPU
seconds (/proc/PID/stat, every thread) to drop --clients clients (9,000 at most: half the fd
limit) that reset while they wait under a max_connections held full, in the same run. Each
leaves at its own cost (unlinked by what points to it) in either order; before 855840f each
abort walked the queue from its head to its client, and newest first cost the square of the
queue (0.43-0.63 CPU seconds against 0.07 oldest first).

  python3 bench/queue_leaving.py --hashlb build/src/cli/hashlb [--rounds 3]

A first round leaves in no order, so that hashlb reuses its connections in none either (as
after hours of traffic: a walk of the queue a cache miss per client). Then --rounds rounds of
each order, alternated, added up. Exits 1 if newest first took more than --ratio times oldest
first (floored at --floor seconds: /proc counts in 10 ms ticks) or hashlb did not exit 0.
tests/integration/test_failover.py's queued_clients_leaving_newest_first bounds the same in
the queue's steps (hashlb_worker_queue_steps_total), a count the machine's load leaves alone."""
import os
import random
import sys

from benchenv import arguments, count, parse, positive

ap = arguments(__doc__)
ap.add_argument("--rounds", type=count, default=3, help="rounds of each order")
ap.add_argument("--ratio", type=positive, default=3.0, help="newest / oldest first allowed")
ap.add_argument("--floor", type=positive, default=0.05, help="oldest first counted as at least this")
args = parse(ap)

from ctltest import queue_of_waiting_clients, reset_waiting  # noqa: E402
from lbtest import Backend  # noqa: E402

backend = Backend("a")
lb, holders, n, wait_for = queue_of_waiting_clients((backend.name, backend.addr))


def cpu_seconds():
    """hashlb's CPU seconds so far, user and system, all its threads."""
    with open(f"/proc/{lb.proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def leave(socks):
    """The CPU seconds hashlb took to drop <socks>, reset in that order."""
    cpu = cpu_seconds()
    reset_waiting(lb, socks)
    return cpu_seconds() - cpu


socks = wait_for()
random.Random(1).shuffle(socks)
leave(socks)
oldest = newest = 0.0
for _ in range(args.rounds):
    oldest += leave(wait_for())
    newest += leave(list(reversed(wait_for())))
holders[0].close()
rc = lb.stop()
backend.stop()
ratio = newest / max(oldest, args.floor * args.rounds)
print(f"queue_leaving: {n} waiting clients, 1 worker, {args.rounds} rounds of each order: "
      f"{oldest:.2f} CPU seconds to drop them oldest first, {newest:.2f} newest first "
      f"(ratio {ratio:.2f}, floor {args.floor:.2f} s a round); hashlb exit {rc}")
sys.exit(0 if ratio <= args.ratio and rc == 0 else 1)
