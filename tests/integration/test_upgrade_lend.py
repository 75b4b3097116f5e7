#!/usr/bin/env python3
"""Clients waiting in a queue (a backend at its max_connections) at an upgrade in place are lent
to the new process over the channel the old one keeps to it: served by one process at most,
none lost without a word, the old process not stuck, however the new one speaks the channel
(fake_new_hashlb.py plays a new process that stops reading, cuts its answer short, exits
mid-answer, or asks again), with thousands of them, and the new one takes as many as its caps let in.
Runs in a network namespace of its own, as test_upgrade.py does."""
import os
import subprocess
import sys

if os.environ.get("HASHLB_TEST_NETNS") != "upgrade-lend":
    env = dict(os.environ, HASHLB_TEST_NETNS="upgrade-lend")
    sys.exit(subprocess.run(["unshare", "--net", sys.executable, os.path.abspath(__file__),
                             *sys.argv[1:]],
                            env=env).returncode)

import json  # noqa: E402
import re  # noqa: E402
import select  # noqa: E402
import selectors  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402

from ctltest import Lb  # noqa: E402
from lbtest import (HASHLB, Backend, Skip, check, connect, pick_port, read_line, run_tests,  # noqa: E402
                    tmppath, tsan_build, wait_until)
from shims import shim_env  # noqa: E402

subprocess.run(["ip", "link", "set", "lo", "up"], check=True)

HERE = os.path.dirname(os.path.abspath(__file__))
backend = Backend("a")
# a service name of the longest (64 bytes): the lines lent are long, so that a few thousand
# of them fill the channel's buffer (about 200 KiB) when the new process stops reading
LONG = "s" * 64


def service(name, port, extra=""):
    return (f"  - name: {name}\n    listen: 127.0.0.1:{port}\n    timeouts: {{queue: 60s}}\n"
            "    health:\n      enabled: false\n"
            + "".join(f"    {l}\n" for l in extra.splitlines()) +
            f"    backends:\n      - name: a\n        address: {backend.addr}\n"
            "        max_connections: 1\n")


def head(workers=2):
    return (f"workers: {workers}\nadmin: 127.0.0.1:{pick_port()}\n"
            "services:\n")


def install(src, path):
    """<src> at <path>, as a package manager puts a new file: renamed over the old one."""
    shutil.copy(src, path + ".new")
    os.rename(path + ".new", path)


def queue_up(lb, addr, n, first=0):
    """One client served at <addr> (held: its backend's one slot taken), <n> more waiting
    there, each having sent b"qI\\n" (I from <first>) as it waits: (held, queued)."""
    held = connect(addr)
    check(read_line(held) == "a", "one client served, the backend's one slot taken")
    queued = []
    for i in range(n):
        s = connect(addr, timeout=30)
        s.sendall(b"q%d\n" % (first + i))
        queued.append(s)
    return held, queued


def queued_count(lb):
    return sum(s["connections"]["queued"] for s in lb.status()["services"])


def outcomes(socks, within=60):
    """What became of each of <socks> (queued clients that sent b"qI\\n", I their place), by
    what each read to its end, read all at once (the old process serves its queue one at a
    time, each closed here once served): "served" (the backend's greeting and its line echoed:
    served by hashlb), "fake" (fake_new_hashlb.py's b"fake\\n", then its end), "closed" (its
    end, nothing read), else what it read (served twice, or cut); "none" if it had not
    ended within <within> s."""
    sel = selectors.DefaultSelector()
    got, out = {}, {}
    for i, s in enumerate(socks):
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, i)
        got[i] = b""
    end = time.time() + within
    while got and time.time() < end:
        for key, _ in sel.select(1):
            i, s = key.data, key.fileobj
            try:
                d = s.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                d = b""
            got[i] += d
            if got[i] == b"a\nq%d\n" % i:
                out[i] = "served"
            elif not d:
                out[i] = {b"": "closed", b"fake\n": "fake"}.get(got[i], got[i])
            else:
                continue
            sel.unregister(s)
            s.close()
            del got[i]
    for i in got:
        out[i] = "none"
    return [out[i] for i in range(len(socks))]


class Fake:
    """fake_new_hashlb.py installed at <exe> as the new process of the next upgrade, its plan
    <answer>."""

    def __init__(self, exe, answer):
        self.out, self.go = tmppath("fake-out.json"), tmppath("fake-go")
        for p in (self.out, self.go):
            if os.path.exists(p):
                os.unlink(p)
        plan = tmppath("fake-plan.json")
        with open(plan, "w") as f:
            json.dump({"answer": answer, "out": self.out, "go": self.go}, f)
        with open(exe + ".new", "w") as f:
            f.write(f"#!/bin/sh\nexec {sys.executable} {HERE}/fake_new_hashlb.py {plan}\n")
        os.chmod(exe + ".new", 0o755)
        os.rename(exe + ".new", exe)

    def release(self):
        open(self.go, "w").close()

    def result(self, timeout=60):
        end = time.time() + timeout
        while not os.path.exists(self.out) and time.time() < end:
            time.sleep(0.05)
        with open(self.out) as f:
            return json.load(f)


def uncapped(text):
    """Config <text> without the backend's cap (service())."""
    return text.replace("        max_connections: 1\n", "")


def upgraded(lb, edit=None):
    """hashlb ctl upgrade of <lb>, its config first changed by <edit> (the text to the new
    one's), if given: the new process's pid."""
    if edit:
        with open(lb.path) as f:
            text = f.read()
        with open(lb.path, "w") as f:
            f.write(edit(text))
    rc, out, err = lb.ctl("upgrade")
    m = re.search(r"handed over to pid (\d+)", out)
    check(rc == 0 and m, f"upgraded ({rc}, {out!r}, {err!r})")
    return int(m.group(1)) if m else None


def kill(pid):
    """SIGKILL <pid> (an upgrade's new process: not our child), waiting for it to go."""
    if not pid:
        return
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        select.select([fd], [], [], 10)
    except OSError:
        pass
    os.close(fd)


def exits_0(lb, timeout=30):
    try:
        return lb.proc.wait(timeout) == 0
    except subprocess.TimeoutExpired:
        return False


def fake_run(name, answer, n):
    """(lb, fake, held, queued, new_pid): hashlb with <n> clients waiting in its queue, installed
    at a path of its own where fake_new_hashlb.py (<answer>) replaces it, upgraded to it."""
    exe = tmppath(f"hashlb-{name}")
    install(HASHLB, exe)
    port = pick_port()
    lb = Lb(head() + service(LONG, port), fname=f"{name}.yaml", binary=exe)
    held, queued = queue_up(lb, ("127.0.0.1", port), n)
    check(wait_until_queued(lb, n), f"{n} clients wait in its queue: {queued_count(lb)}")
    fake = Fake(exe, answer)
    return lb, fake, held, queued, upgraded(lb)


def wait_until_queued(lb, n, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if queued_count(lb) == n:
            return True
        time.sleep(0.05)
    return False


def check_outcomes(got, want, what):
    """outcomes() <got> as <want> says, or the test fails naming the first few that are not."""
    return check(got == want, f"{what}: {sum(a != b for a, b in zip(got, want))} not, e.g. "
                 f"{[(i, a, b) for i, (a, b) in enumerate(zip(got, want)) if a != b][:5]}")


def all_taken_served(lb, queued):
    """The new process takes all of <queued> (the old one keeps none; both say so) and serves
    each, its early line echoed."""
    n = len(queued)
    check(lb.wait_log(r'msg="clients waiting in the old hashlb.s queues taken over" '
                      rf'count={n} left_there=0$', 30) and
          lb.wait_log(r'msg="clients waiting in the queues handed over" '
                      rf'count={n} kept=0 not_lent=0$'),
          f"the new one takes all {n}: "
          f"{[l for l in lb.log if 'taken over' in l or 'handed over' in l]}")
    check_outcomes(outcomes(queued), ["served"] * n, "each served through the new process")


def cleanup(socks, new_pid, fake=None):
    """The end of a test: <fake> let go, <socks> closed, the new process <new_pid> killed."""
    if fake:
        fake.release()
    for s in socks:
        s.close()
    kill(new_pid)


def by_peer(queued):
    """{"IP:PORT" each of <queued> connects from: its place}."""
    return {"%s:%d" % s.getsockname()[:2]: i for i, s in enumerate(queued)}


def queued_clients_by_the_thousand_served_once():
    """3,000 clients waiting in the queue at an upgrade in place go to the new process (its
    config lets the backend take them all), each served once, its early line echoed, none
    reset; the old one, its own client still served, exits once that one ends."""
    n = 3000
    exe = tmppath("hashlb-thousand")
    install(HASHLB, exe)
    port = pick_port()
    lb = Lb(head() + service("t", port), fname="thousand.yaml", binary=exe)
    held, queued = queue_up(lb, ("127.0.0.1", port), n)
    new_pid = None
    try:
        check(wait_until_queued(lb, n), f"{n} clients wait in its queue: {queued_count(lb)}")
        new_pid = upgraded(lb, uncapped)
        check(lb.wait_log(r'msg="clients waiting in the queues handed over" '
                          rf'count={n} kept=0 not_lent=0$',
                          30) and
              lb.wait_log(r'msg="clients waiting in the old hashlb.s queues taken over" '
                          rf'count={n} left_there=0$', 30), "all handed over, both say so")
        got = outcomes(queued)
        odd = {i: o for i, o in enumerate(got) if o != "served"}
        check(not odd, f"each served once by hashlb, its early line echoed: {len(odd)} not: "
              f"{dict(list(odd.items())[:5])}")
        held.sendall(b"still\n")
        check(read_line(held) == "still", "the old process's own client goes on")
        held.close()
        check(exits_0(lb), "the old process exits 0 once its own client has ended")
    finally:
        cleanup(queued + [held], new_pid)


def queued_clients_lent_to_a_new_process_that_stops_reading():
    """A new process that asks for the queued clients and then reads nothing: the old one
    sends until the channel is full, gives up at its 10 s bound, and says how many went. Those
    that went are the new one's (it serves those whose line it got, and closes the rest, as
    hashlb does); the others stay in the old one's queue and it serves them as its slot
    frees. Of 3,000, each is served by one process or closed by the new one, none by both,
    none left hanging, and the old one exits. As many clients as it takes their lines (82
    bytes each) to pass the channel's buffer (net.core.wmem_default) by half: 3,896 at the
    default 208 KiB (2,750 of them went in a run)."""
    with open("/proc/sys/net/core/wmem_default") as f:
        n = max(3000, int(f.read()) * 3 // 2 // 82)
    if n > 6000:
        raise Skip(f"net.core.wmem_default is too large: {n} clients would fill the channel")
    lb, fake, held, queued, new_pid = fake_run("stall", "stall", n)
    try:
        check(lb.wait_log(r'msg="cannot send the new hashlb all the clients lent to it" '
                          r'err=ETIMEDOUT sent=\d+ ', 30), "the old one gives up sending")
        said = [l for l in lb.log if "cannot send the new hashlb all" in l][0]
        sent = int(re.search(r" sent=(\d+) ", said).group(1))
        print(f"    {said}")
        check(0 < sent < n and f" count={n} " in said, f"some went, not all: {said}")
        check(lb.wait_log(r'msg="clients waiting in the queues handed over" '
                          rf'count={sent} kept={n - sent} not_lent=0$'),
              "the old one keeps those that did not go")
        fake.release()
        res = fake.result()
        check(len(res["peers"]) == sent and res["ended"] is None,
              f"the new one got the {sent} sockets that went, no end: {len(res['peers'])} "
              f"{res['ended']}")
        where = by_peer(queued)
        held.close()  # the old process's slot frees: it serves those it kept, one at a time
        got = outcomes(queued)
        want = ["served"] * n
        for p in res["served"]:
            want[where[p]] = "fake"
        for p in res["closed"]:
            want[where[p]] = "closed"
        check_outcomes(got, want, "each served by the one process that has it, or closed by "
                       "the new one")
        check(got.count("served") == n - sent and got.count("fake") == res["lines"],
              f"{n - sent} by the old one, {res['lines']} by the new one")
        check(exits_0(lb), "the old process exits 0")
    finally:
        cleanup(queued + [held], new_pid, fake)


def queued_clients_of_a_new_process_cutting_its_answer_short():
    """A new process that refuses two of the queued clients lent to it, then closes the
    channel part way through a third refusal and lives on: the old one takes back the two,
    at once (no 5 s timer), and leaves it the rest, which it serves. Each client is served
    by one process, and the old one exits."""
    n = 40
    lb, fake, held, queued, new_pid = fake_run("cut", "cut", n)
    try:
        check(lb.wait_log(rf'msg="clients waiting in the queues handed over" count={n - 2} '
                          r'kept=2 not_lent=0$', 30), "the old one keeps the two refused whole")
        check(not [l for l in lb.log if "did not answer for the clients lent" in l],
              "it knew as the channel closed, not at its timer")
        fake.release()
        res = fake.result()
        where = by_peer(queued)
        refused = {where[p] for p in res["peers"][:2]}
        held.close()
        got = outcomes(queued)
        want = ["served" if i in refused else "fake" for i in range(n)]
        check_outcomes(got, want, "the two refused served by the old one, the others by the new")
        check(exits_0(lb), "the old process exits 0")
    finally:
        cleanup(queued + [held], new_pid, fake)


def queued_clients_of_a_new_process_exiting_mid_answer():
    """A new process that exits part way through its answer, having served none of the queued
    clients lent to it: the old one takes every one back (the new one gone, none of their
    streams touched) and serves each, its early line echoed, none reset, and exits."""
    n = 40
    lb, fake, held, queued, new_pid = fake_run("exit", "exit", n)
    try:
        check(lb.wait_log(r'msg="clients waiting in the queues handed over" '
                          rf'count=0 kept={n} not_lent=0$',
                          30), "the old one takes them all back")
        held.close()
        got = outcomes(queued)
        check_outcomes(got, ["served"] * n, "each served by the old one")
        check(not [l for l in lb.log if "reset: it read or wrote them" in l], "none reset")
        check(exits_0(lb), "the old process exits 0")
    finally:
        cleanup(queued + [held], new_pid)


def queued_clients_taken_up_to_each_service_cap():
    """The new process takes as many queued clients as each service's max_connections lets
    in: two services of 4 waiting each, capped at 4 there, all 8 taken and served. It counted
    each client taken twice (once noted, once as a connection of its service) and those of
    every service against each one's cap: it took 3 of the 8 in a run (refused the rest, left
    waiting in the old process)."""
    exe = tmppath("hashlb-caps")
    install(HASHLB, exe)
    p1, p2 = pick_port(), pick_port()
    lb = Lb(head(workers=1) + service("s1", p1) + service("s2", p2), fname="caps.yaml",
            binary=exe)
    held1, q1 = queue_up(lb, ("127.0.0.1", p1), 4)
    held2, q2 = queue_up(lb, ("127.0.0.1", p2), 4, first=4)
    new_pid = None
    try:
        check(wait_until_queued(lb, 8), f"8 clients wait: {queued_count(lb)}")
        new_pid = upgraded(lb, lambda text: uncapped(text).replace(
            "    health:\n", "    max_connections: 4\n    health:\n"))  # 4 a service
        all_taken_served(lb, q1 + q2)
        held1.close()
        held2.close()
        check(exits_0(lb), "the old process exits 0")
    finally:
        cleanup(q1 + q2 + [held1, held2], new_pid)


def queued_clients_taken_up_to_the_connection_cap():
    """The new process takes as many queued clients as its connection cap (--max-connections
    here, its fd limit's alike) lets in: 600 waiting, capped at 601 (the old one's own client
    and those 600), all taken and served. It counted a client taken twice once a worker had
    served it (a connection of its, and noted taken): it refused some it had room for, left
    in the old one (3 to 249 of the 600 in 7 runs of 10 on a loaded machine; none in the
    others, its worker not run before the last line came: it cannot fail with the count
    right, and can pass with it wrong)."""
    n = 600
    exe = tmppath("hashlb-conncap")
    install(HASHLB, exe)
    port = pick_port()
    # a short drain: a client the old one kept wrongly is closed soon rather than served
    lb = Lb(head(workers=1) + service("c", port).replace("{queue: 60s}",
                                                         "{queue: 60s, drain: 2s}"),
            args=("--max-connections", str(n + 1)), fname="conncap.yaml", binary=exe)
    held, queued = queue_up(lb, ("127.0.0.1", port), n)
    new_pid = None
    try:
        check(wait_until_queued(lb, n), f"{n} clients wait: {queued_count(lb)}")
        new_pid = upgraded(lb, uncapped)
        all_taken_served(lb, queued)
        held.close()
        check(exits_0(lb), "the old process exits 0")
    finally:
        cleanup(queued + [held], new_pid)


def queued_clients_lent_twice_served_once():
    """A new process that asks twice in a row (the second request, made while the first is
    lent, is no lending of its own), refuses every client, then asks again and takes them
    all: each lending ends only its own clients, and each client is served once, by the new
    process; the old one takes them back after the first and gives them up after the second."""
    n = 40
    lb, fake, held, queued, new_pid = fake_run("again", "again", n)
    try:
        check(lb.wait_log(r'msg="clients waiting in the queues handed over" '
                          rf'count=0 kept={n} not_lent=0$',
                          30) and
              lb.wait_log(r'msg="clients waiting in the queues handed over" '
                          rf'count={n} kept=0 not_lent=0$',
                          30), "the old one takes them back, then hands them over")
        res = fake.result()
        check(res["lines"] == n and len(res["served"]) == n,
              f"the new one got and served {n} the second time: {res['lines']} {res['served']}")
        got = outcomes(queued)
        check_outcomes(got, ["fake"] * n, "each served by the new process alone")
        held.close()
        check(exits_0(lb), "the old process exits 0")
    finally:
        cleanup(queued + [held], new_pid, fake)


def queued_clients_keep_their_queue_wait():
    """A client lent to the new process logs, as its connection ends there, the whole of its
    wait in the queue (queue_ms=): the time it waited in the old process too, at least the
    second the test held them there after it saw them waiting (a lower bound only). It logged
    its wait in the new process alone, 0 for one served at once: a client that had waited out
    most of timeouts.queue read as one that never waited."""
    n = 3
    exe = tmppath("hashlb-waited")
    install(HASHLB, exe)
    port = pick_port()
    lb = Lb(head(workers=1) + service("w", port, "log_connections: true"), fname="waited.yaml",
            binary=exe)
    held, queued = queue_up(lb, ("127.0.0.1", port), n)
    new_pid = None
    try:
        check(wait_until_queued(lb, n), f"{n} clients wait: {queued_count(lb)}")
        time.sleep(1.0)  # each waits at least that long from here on
        peers = by_peer(queued)
        new_pid = upgraded(lb, uncapped)
        all_taken_served(lb, queued)
        end = time.time() + 30
        waited = {}
        while len(waited) < n and time.time() < end:
            for line in list(lb.log):
                m = re.search(r' msg=connection .*client=(\S+) .*end=handed_over', line)
                if m:
                    continue  # the old process's end of its copy
                m = re.search(r' msg=connection service=w client=(\S+) .* queue_ms=(\d+)',
                              line)
                if m and m.group(1) in peers:
                    waited[peers[m.group(1)]] = int(m.group(2))
            time.sleep(0.05)
        check(len(waited) == n and all(ms >= 1000 for ms in waited.values()),
              f"each logs its wait in both processes, 1000 ms and more: {waited}")
        held.close()
        check(exits_0(lb), "the old process exits 0")
    finally:
        cleanup(queued + [held], new_pid)


def elf_base(exe):
    """The address nm gives to the first byte of <exe>'s lowest mapping, which dladdr()'s
    dli_fbase is the address of in the process (glibc's l_map_start): its lowest PT_LOAD's
    p_vaddr, down to its page. 0 for a PIE (ET_DYN, the compiler's default here, whatever
    meson's b_pie says), 0x400000 or so for an executable linked at a fixed address
    (ET_EXEC, -no-pie), whose offsets from dli_fbase are not nm's addresses."""
    import struct

    with open(exe, "rb") as f:
        elf = f.read(1 << 16)  # the program headers follow the ELF header at once
    check(elf[:4] == b"\x7fELF", f"{exe}: an ELF file")
    wide, end = elf[4] == 2, "<" if elf[5] == 1 else ">"  # EI_CLASS 64-bit, EI_DATA LSB
    phoff, phentsize, phnum = (struct.unpack_from(end + "Q", elf, 32)[0],
                               *struct.unpack_from(end + "HH", elf, 54)) if wide else \
        (struct.unpack_from(end + "I", elf, 28)[0], *struct.unpack_from(end + "HH", elf, 42))
    loads = []
    for i in range(phnum):
        at = phoff + i * phentsize
        p_type = struct.unpack_from(end + "I", elf, at)[0]
        if p_type == 1:  # PT_LOAD: p_vaddr after p_flags, p_offset (64-bit) or p_offset (32)
            loads.append(struct.unpack_from(end + ("Q" if wide else "I"), elf,
                                            at + (16 if wide else 8))[0])
    check(loads, f"{exe}: a PT_LOAD program header")
    return min(loads, default=0) & ~(os.sysconf("SC_PAGE_SIZE") - 1)


def failed_growth(exe, text):
    """Which growth grow_fail.c failed in <exe>, from what its ".hit" file says (<text>): (the
    function that asked, whether the array was there before (grown, not first allocated), the
    elements asked for); None if the file does not say. The function is the first of the two
    callers the shim names that is not hlb_grow() (inline, but a function of its own at -O0,
    as in CI's sanitizer build)."""
    m = re.fullmatch(r"callers=0x([0-9a-f]+)(?:,0x([0-9a-f]+))? grown=([01]) count=(\d+)\n",
                     text)
    if not m:
        return None
    nm = subprocess.run(["nm", "--defined-only", exe], capture_output=True, text=True).stdout
    funcs = [(int(f[0], 16), f[2]) for f in map(str.split, nm.splitlines())
             if len(f) == 3 and f[1] in "tT"]
    # offsets from <exe>'s lowest mapping: nm's addresses once its own address is added, a
    # PIE's 0 (ET_DYN) or a fixed one's (ET_EXEC)
    base = elf_base(exe)
    names = [max(((a, name) for a, name in funcs if a <= base + int(at, 16)),
                 default=(0, None))[1] for at in m.group(1, 2) if at]
    func = next((f for f in names if f != "hlb_grow"), names[0])
    return func, m.group(3) == "1", int(m.group(4))


def lent_short_of_memory(at):
    """hashlb with 100 clients waiting in its queue, upgraded in place (the new one's backend
    uncapped) with grow_fail.c failing the array growth numbered <at> in its worker from the
    lending on; its queued clients then served. (lb, queued clients, outcomes, the growth
    that failed: failed_growth()); the caller checks what it logged."""
    if not shutil.which("nm"):
        raise Skip("no nm (binutils): which growth failed cannot be told")
    if tsan_build():
        # ThreadSanitizer's runtime is linked into the executable, whose reallocarray()
        # (its interceptor) comes before any preloaded one: grow_fail.c is never called
        raise Skip("ThreadSanitizer build: its reallocarray() shadows grow_fail.c's")
    n = 100
    exe = tmppath(f"hashlb-nomem{at}")
    install(HASHLB, exe)
    port = pick_port()
    arm = tmppath(f"grow-fail-pid{at}")
    for path in (arm, arm + ".hit"):
        if os.path.exists(path):
            os.unlink(path)
    env = shim_env("grow_fail", HLB_TEST_GROW_FAIL=arm, HLB_TEST_GROW_FAIL_AT=str(at))
    lb = Lb(head(workers=1) + service("m", port), fname=f"nomem{at}.yaml", binary=exe, env=env)
    held, queued = queue_up(lb, ("127.0.0.1", port), n)
    new_pid = None
    try:
        check(wait_until_queued(lb, n), f"{n} clients wait: {queued_count(lb)}")
        with open(arm, "w") as f:
            f.write(str(lb.proc.pid))
        new_pid = upgraded(lb, uncapped)
        def said():  # the whole line, once the shim has written it
            try:
                with open(arm + ".hit") as f:
                    text = f.read()
            except FileNotFoundError:
                return ""
            return text if text.endswith("\n") else ""
        check(wait_until(said, timeout=30), "its worker ran out of memory")
        growth = failed_growth(exe, said())
        held.close()  # the old process's slot frees: it serves those it kept, one at a time
        got = outcomes(queued)
        check(not [l for l in lb.log if "reset: it read or wrote them" in l], "none reset")
        check(exits_0(lb), "the old process exits 0")
        return lb, queued, got, growth
    finally:
        cleanup(queued + [held], new_pid)


def queued_clients_lent_short_of_memory():
    """The old process's worker runs out of memory part way through a lending (the growth of
    its array of lent clients past the first 64 fails): the clients lent so far go to the new
    process, which takes them, the others stay in the old one's queue; each client is served
    once, by one process, its early line echoed, none reset, and the old one exits 0."""
    lb, queued, got, growth = lent_short_of_memory(2)
    check(growth == ("conn_queue_lend", True, 128),
          f"the growth that failed: the lent clients' array, from 64 to 128, in "
          f"conn_queue_lend(): {growth}")
    said = [l for l in lb.log if "clients waiting in the queues handed over" in l]
    print(f"    {said}")
    m = re.search(r" count=(\d+) kept=0 not_lent=(\d+)$", said[-1]) if said else None
    sent, left = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    # "kept" counts those lent and refused, "not_lent" those never lent, left in the queue
    check(0 < sent < len(queued), f"some lent before the memory ran out, all taken: {said}")
    check(sent + left == len(queued), f"the line counts each queued client once: {said}")
    check(lb.wait_log(r'msg="clients waiting in the old hashlb.s queues taken over" '
                      rf'count={sent} left_there=0$', 30), f"the new one took the {sent} lent")
    check_outcomes(got, ["served"] * len(queued), "each served once")


def queued_clients_not_noted_short_of_memory():
    """The old process cannot note the clients its worker lent (the growth of the array they
    are gathered in fails): none is lent, the new process gets none, and the old one serves
    each, once, its early line echoed, none reset, and exits 0."""
    lb, queued, got, growth = lent_short_of_memory(3)
    check(growth == ("lent_answer", False, 128),
          f"the growth that failed: the array the lent clients are noted in, its first (128 "
          f"for 100), in lent_answer(): {growth}")
    check(not [l for l in lb.log if "taken over" in l and "clients" in l],
          f"none lent: {[l for l in lb.log if 'handed over' in l or 'taken over' in l]}")
    check(lb.wait_log(r'level=warn msg="clients waiting in the queues handed over" count=0 '
                      rf'kept=0 not_lent={len(queued)}$'),
          "the old one says it kept them all, never lent")
    check_outcomes(got, ["served"] * len(queued), "each served once, by the old one")


def queued_clients_cut_short_by_the_fd_limit():
    """The new process at its fd limit as the old one lends it 300 queued clients: the kernel
    gives it 240 of the first 250 descriptors (fds_cut.c cuts that message as the kernel does,
    MSG_CTRUNC). The ten without one are refused, the old one keeping them, and the next
    batch's 50 are taken: before, every client after the cut was refused. Each is served once,
    none reset."""
    n = 300
    port = pick_port()
    env = shim_env("fds_cut", HLB_TEST_FDS_CUT_MIN="200", HLB_TEST_FDS_CUT="10")
    lb = Lb(head(workers=1) + service("c", port), fname="fdscut.yaml", env=env)
    held, queued = queue_up(lb, ("127.0.0.1", port), n)
    new_pid = None
    try:
        check(wait_until_queued(lb, n), f"{n} clients wait: {queued_count(lb)}")
        new_pid = upgraded(lb, uncapped)
        check(lb.wait_log(r'level=warn msg="clients of the old hashlb.s queues refused: no '
                          r'descriptor left for them" at_most=10 got=240$', 30),
              "the new one says it was cut short")
        check(lb.wait_log(r'msg="clients waiting in the old hashlb.s queues taken over" '
                          rf'count={n - 10} left_there=10$', 30) and
              lb.wait_log(r'msg="clients waiting in the queues handed over" '
                          rf'count={n - 10} kept=10 not_lent=0$'),
              f"all but the ten taken: {[l for l in lb.log if 'over' in l and 'count=' in l]}")
        held.close()  # the old process's slot frees: it serves the ten it kept
        check_outcomes(outcomes(queued), ["served"] * n, "each served once")
        check(not [l for l in lb.log if "reset: it read or wrote them" in l], "none reset")
        check(exits_0(lb), "the old process exits 0")
    finally:
        cleanup(queued + [held], new_pid)


try:
    run_tests([queued_clients_keep_their_queue_wait,
               queued_clients_cut_short_by_the_fd_limit,
               queued_clients_lent_short_of_memory,
               queued_clients_not_noted_short_of_memory,
               queued_clients_taken_up_to_each_service_cap,
               queued_clients_taken_up_to_the_connection_cap,
               queued_clients_of_a_new_process_exiting_mid_answer,
               queued_clients_lent_twice_served_once,
               queued_clients_of_a_new_process_cutting_its_answer_short,
               queued_clients_lent_to_a_new_process_that_stops_reading,
               queued_clients_by_the_thousand_served_once])
finally:
    backend.stop()
