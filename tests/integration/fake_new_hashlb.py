#!/usr/bin/env python3
"""A stand-in for the new process of a hashlb upgrade in place (test_upgrade_lend.py), which
speaks the channel to the old one as it is told: run in place of hashlb (the old one starts it
with HASHLB_UPGRADE_FD=3), it reads the listening sockets handed over, says READY, reads the
resync, asks for the clients waiting in the old one's queues, and then answers as the plan
(JSON, the file named by its first argument) says:

  answer: "all"   every client taken ("adopted N"), each sent b"fake\\n" and closed
          "again" it asks twice in a row, refuses every client, then asks again and takes
                  them all, as "all"
          "cut"   "refused 0" and "refused 1" whole, then "refu" and the channel closed, alive
                  until <go> exists; then the clients not refused are served as "all"'s
          "exit"  as "cut", but it exits as it closes the channel, having served none
          "stall" it reads nothing after its request until <go> exists; then it reads what
                  the old one sent (the channel closed by then), serves those whose line came
                  whole and closes the others
  out:    where it writes what it did (JSON): the clients' addresses as it saw them (their
          getpeername()), those it served and those it closed unserved
  go:     the file it waits for (60 s at most)

Every wait is bounded; it exits 0 once it has written <out>."""
import json
import os
import socket
import sys
import time

plan = json.load(open(sys.argv[1]))
channel = socket.socket(fileno=3)


def recv_fds(s, fds, size=1 << 16):
    """What <s> gives, its descriptors appended to <fds> (b"" at its end)."""
    data, anc, _, _ = s.recvmsg(size, socket.CMSG_SPACE(4 * 4100))
    for level, kind, blob in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(int.from_bytes(blob[i:i + 4], sys.byteorder)
                       for i in range(0, len(blob) - len(blob) % 4, 4))
    return data


def wait_go():
    end = time.time() + 60
    while not os.path.exists(plan["go"]) and time.time() < end:
        time.sleep(0.05)


# the handover: an HTTP answer with its length, the listening sockets and the resync one last
text, fds = b"", []
while True:
    head, sep, body = text.partition(b"\r\n\r\n")
    if sep:
        length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
        if len(body) >= length:
            break
    d = recv_fds(channel, fds)
    if not d:
        sys.exit("the old hashlb's handover ended short")
    text += d
if not body.endswith(b"resync\n"):
    sys.exit("no resync socket handed over")
resync = socket.socket(fileno=fds.pop())
for fd in fds:
    os.close(fd)  # its listening sockets: this one serves no new client
channel.sendall(b"READY %d\n" % os.getpid())

buf = b""
while b"resynced\n" not in buf:
    d = resync.recv(1 << 16)
    if not d:
        sys.exit("the old hashlb closed the resync socket")
    buf += d
buf = buf.split(b"resynced\n", 1)[1]


def lent():
    """(lines, descriptors, the count its end gave or None): what the old one lends."""
    global buf
    lines, fds, ended = [], [], None
    while ended is None:
        d = recv_fds(resync, fds)
        buf += d
        *whole, buf = buf.split(b"\n")
        for line in whole:
            if line.startswith(b"queued-end "):
                ended = int(line.split()[1])
            elif line.startswith(b"queued "):
                lines.append(line)
        if not d:
            break
    return lines, fds, ended


if plan["answer"] == "again":
    resync.sendall(b"queue\nqueue\n")  # the second, asked while it lends, is not a lending
    lines, fds, ended = lent()
    resync.sendall(b"".join(b"refused %d\n" % i for i in range(len(lines))) + b"adopted 0\n")
    for fd in fds:
        os.close(fd)
    plan["answer"] = "all"
resync.sendall(b"queue\n")
if plan["answer"] == "stall":
    wait_go()
lines, fds, ended = lent()
socks = [socket.socket(fileno=fd) for fd in fds]
peers = []
for s in socks:
    try:
        peers.append("%s:%d" % s.getpeername()[:2])
    except OSError:
        peers.append(None)

refused = set()
if plan["answer"] == "all":
    resync.sendall(b"adopted %d\n" % len(lines))
elif plan["answer"] in ("cut", "exit"):
    refused = {0, 1}
    resync.sendall(b"refused 0\nrefused 1\nrefu")
    resync.close()
    if plan["answer"] == "exit":
        os._exit(0)  # its sockets closed with it, none served
    wait_go()
served, closed = [], []
for i, s in enumerate(socks):
    # a socket whose line did not come is not known to be a client of this lending
    if i < len(lines) and i not in refused:
        try:
            s.sendall(b"fake\n")
            served.append(peers[i])
        except OSError:
            closed.append(peers[i])
    elif i not in refused:
        closed.append(peers[i])
    s.close()
with open(plan["out"] + ".new", "w") as f:
    json.dump({"peers": peers, "lines": len(lines), "ended": ended, "served": served,
               "closed": closed}, f)
os.rename(plan["out"] + ".new", plan["out"])
