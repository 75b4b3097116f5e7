#!/usr/bin/env python3
"""Kernel steering end to end: in network namespaces (a client, the load balancer,
three backends, veth and a bridge), real TCP connections through `hashlb steer`
reach the backend that `hashlb lookup` names for each client, for XDP (native and
generic), tc and auto (tc on a veth); established connections survive adding a backend (`--update`)
while new ones follow the new table; the counters say so; and when hashlb steer
exits nothing stays attached. hashlb run with steering: kernel publishes its tables into the
program, and its upgrades, in place (SIGUSR2) and side by side (through a Unix admin socket),
hand the program over without losing a flow. The namespaces are removed even when it fails."""
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from shims import Paused  # noqa: E402
import topo as T  # noqa: E402

HASHLB = os.environ.get("HASHLB", "build/src/cli/hashlb")
BPF_OBJ = os.path.join(os.environ.get("HASHLB_BUILD_ROOT", "build"), "bpf", "steer.bpf.o")
PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer.py")
CONNS = 24
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)


def lookup(names, sports, scheme):
    clients = ",".join(f"{T.CLIENT_IP}:{sp}" for sp in sports)
    p = subprocess.run([HASHLB, "lookup", "--json", "--key", "4-tuple", "--scheme", scheme,
                        "--vip", f"{T.VIP}:{T.VIP_PORT}", clients, *names],
                       capture_output=True, text=True, timeout=30, check=True)
    return {int(r["client"].rsplit(":", 1)[1]): r["backend"] for r in json.loads(p.stdout)}


def steer_args(topo, n, scheme):
    args = ["-i", "eth0", "--vip", f"{T.VIP}:{T.VIP_PORT}", "--scheme", scheme,
            "--key", "4-tuple"]
    for i in range(n):
        b = topo.backends[i]
        name = b.rsplit("-", 1)[1]
        # b1 without mac=: read from the LB's neighbour table.
        spec = f"{name}={topo.backend_ip(i)}" + ("" if i == 0 else f",mac={topo.mac(b)}")
        args += ["-b", spec]
    return args


def xdp_attached(topo):
    out = T.sh("ip", "-d", "link", "show", "eth0", ns=topo.lb).stdout
    tc = T.sh("tc", "filter", "show", "dev", "eth0", "ingress", ns=topo.lb, check=False).stdout
    return "prog/xdp" in out or "xdp" in out.split("\n")[0] or "hlb_tc" in tc


def run_mode(topo, mode, scheme):
    tag = f"[{mode} {scheme}]"
    if mode == "xdp":
        topo.native_xdp_ready(BPF_OBJ)
    names2 = ["b1", "b2"]
    names3 = ["b1", "b2", "b3"]
    steer = topo.spawn(topo.lb, [HASHLB, "steer", "--mode", mode,
                                 *steer_args(topo, 2, scheme)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = steer.stdout.readline()
    if "attached" not in line:
        steer.wait(timeout=10)
        err = steer.stderr.read()
        check(False, f"{tag} hashlb steer did not attach: {line} {err}")
        return
    print(f"{tag} {line.strip()}", flush=True)
    if mode == "auto":
        # eth0 is a veth: no native XDP (XDP_TX needs XDP on the peer), and
        # tc before generic XDP, which linearizes every GSO packet.
        check("(tc)" in line, f"{tag} auto on a veth did not choose tc: {line.strip()}")

    client = topo.spawn(topo.client, [sys.executable, PEER, "client", T.VIP, str(T.VIP_PORT),
                                      str(CONNS)],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        first = json.loads(client.stdout.readline())
    except json.JSONDecodeError:
        check(False, f"{tag} client could not connect through the kernel path")
        steer.terminate()
        steer.wait(timeout=10)
        return
    want = lookup(names2, [sp for sp, _ in first], scheme)
    wrong = [(sp, got, want[sp]) for sp, got in first if got != want[sp]]
    check(not wrong, f"{tag} {len(wrong)} of {CONNS} connections not on the table's backend: "
          f"{wrong[:3]}")

    # Add b3 while the connections are open.
    up = subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", "--update",
                         *steer_args(topo, 3, scheme)],
                        capture_output=True, text=True, timeout=30)
    check(up.returncode == 0, f"{tag} --update failed: {up.stderr}")
    would_move = [sp for sp, name in first
                  if lookup(names3, [sp], scheme)[sp] != name]

    client.stdin.write("again\n")
    client.stdin.flush()
    again = dict(json.loads(client.stdout.readline()))
    fresh = json.loads(client.stdout.readline())
    moved = [sp for sp, name in first if again.get(sp) != name]
    check(not moved, f"{tag} {len(moved)} established connections changed backend or broke "
          f"after a backend was added: {[(sp, again.get(sp)) for sp in moved[:3]]}")
    want3 = lookup(names3, [sp for sp, _ in fresh], scheme)
    wrong = [(sp, got, want3[sp]) for sp, got in fresh if got != want3[sp]]
    check(not wrong, f"{tag} {len(wrong)} new connections not on the new table's backend")
    print(f"{tag} {CONNS} connections on the table's backend; b3 added: "
          f"{len(would_move)} would move by the new table, {len(moved)} moved; "
          f"{CONNS} new connections follow the new table "
          f"({sum(1 for _, n in fresh if n == 'b3')} to b3)", flush=True)

    client.stdin.write("quit\n")
    client.stdin.flush()
    client.stdout.readline()
    client.wait(timeout=10)

    st = subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", "-i", "eth0",
                         "--stats", "--json"], capture_output=True, text=True, timeout=30)
    check(st.returncode == 0, f"{tag} --stats failed: {st.stderr}")
    if st.returncode == 0:
        stats = json.loads(st.stdout)
        check(stats["new_flows"] >= 2 * CONNS, f"{tag} new_flows {stats['new_flows']}")
        check(stats["ct_hits"] > 0, f"{tag} no conntrack hits")
        check(stats["drop_table"] == 0 and stats["drop_malformed"] == 0,
              f"{tag} drops: {stats}")
        print(f"{tag} stats: packets {stats['packets']} new_flows {stats['new_flows']} "
              f"ct_hits {stats['ct_hits']} passed {stats['passed']}", flush=True)

    topo.wait_closed()  # before the program goes (topo.py)
    steer.terminate()
    steer.wait(timeout=10)
    check(steer.returncode == 0, f"{tag} hashlb steer exited {steer.returncode}")
    check(not xdp_attached(topo), f"{tag} a program is still attached after exit")
    # native XDP forced on a veth says what it needs there (without it, every steered packet
    # was lost unsaid, counted forwarded); the other modes need nothing and say nothing
    err = steer.stderr.read()
    note = "note: eth0 is a veth: native XDP's frames reach its peer only if"
    check((note in err) == (mode == "xdp"), f"{tag} the veth note: {err.strip()!r}")


def keep_and_detach(topo):
    """--keep leaves the program attached after exit; --detach removes it. A clsact qdisc that
    is there already (someone else's: it stays), no filter or no qdisc to find: answers, not
    errors, so libbpf's netlink messages about them are not printed."""
    def steer(*args):
        return subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", *args],
                              capture_output=True, text=True, timeout=30)

    T.sh("tc", "qdisc", "replace", "dev", "eth0", "clsact", ns=topo.lb)
    p = steer("--keep", "--mode", "tc", *steer_args(topo, 3, "maglev"))
    check(p.returncode == 0 and xdp_attached(topo) and "libbpf" not in p.stderr,
          f"--keep: {p.returncode} {p.stderr}")
    # one VIP and one backend are said so (it said "1 VIP(s), 1 backends (1 up)")
    p = steer("--update", "--mode", "tc", *steer_args(topo, 1, "maglev"))
    check(p.returncode == 0 and ", 1 VIP, 1 backend (1 up), maglev," in p.stdout,
          f"--update to one backend: {p.returncode} {p.stdout} {p.stderr}")
    p = steer("-i", "eth0", "--stats")
    check(p.returncode == 0 and "new_flows" in p.stdout, f"--stats after --keep: {p.stderr}")
    # --mode naming the other hook: where the program is, and the --mode that finds it (it said
    # "no hashlb program is attached to 'eth0' in xdp mode" alone); nothing detached
    for mode in ("xdp", "xdp-generic"):
        for act in ("--stats", "--detach"):
            p = steer("-i", "eth0", act, "--mode", mode)
            check(p.returncode == 1 and re.fullmatch(
                f"hashlb steer: no hashlb program is attached to 'eth0' in {mode} mode: its "
                r"program is at tc \(program \d+\): --mode tc, or no --mode\n", p.stderr) and
                xdp_attached(topo), f"{act} --mode {mode} beside tc: {p.returncode} {p.stderr}")
    p = steer("-i", "eth0", "--detach")
    check(p.returncode == 0 and not xdp_attached(topo), f"--detach: {p.stderr}")
    check("clsact" in T.sh("tc", "qdisc", "show", "dev", "eth0", ns=topo.lb).stdout,
          "--detach removed the clsact qdisc that was there before hashlb")
    for qdisc in (True, False):
        p = steer("-i", "eth0", "--stats")
        check(p.returncode == 1 and "no hashlb program" in p.stderr and "libbpf" not in p.stderr,
              f"--stats with nothing attached ({'a' if qdisc else 'no'} clsact qdisc): "
              f"{p.returncode} {p.stderr}")
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)
    keep_and_detach_clsact(topo, steer)
    print("--keep, --stats, --detach: ok" if not failures else "", flush=True)


def keep_and_detach_clsact(topo, steer):
    """The clsact qdisc that hashlb steer --keep created in tc mode is removed by --detach when
    nothing else is on it, as when a foreground hashlb steer exits; another tool's filter added
    since keeps it (with the filter). Before, --detach left the empty qdisc behind: the process
    that created it had exited, and --detach did not know."""
    def qdisc():
        return "clsact" in T.sh("tc", "qdisc", "show", "dev", "eth0", ns=topo.lb).stdout

    for added in (None, "ingress", "egress"):
        tag = f"[--keep, then --detach, another filter on {added or 'nothing'}]"
        p = steer("--keep", "--mode", "tc", *steer_args(topo, 3, "maglev"))
        check(p.returncode == 0 and qdisc(), f"{tag} --keep: {p.returncode} {p.stderr}")
        if added:
            T.sh("tc", "filter", "add", "dev", "eth0", added, "prio", "10", "u32", "match",
                 "u32", "0", "0", "classid", "1:1", ns=topo.lb)
        p = steer("-i", "eth0", "--detach")
        left = T.sh("tc", "filter", "show", "dev", "eth0", added or "ingress", ns=topo.lb,
                    check=False).stdout
        check(p.returncode == 0 and not hooks(topo) and qdisc() == bool(added) and
              ("u32" in left) == bool(added),
              f"{tag} exit {p.returncode} {p.stderr.strip()}, hashlb's {sorted(hooks(topo))}, "
              f"clsact qdisc {qdisc()}, another filter {'u32' in left}")
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)


def foreign_program(topo):
    """Someone else's XDP program on the interface (hlb_xdp_pass stands for it: hashlb's
    programs are told apart by name) is never read nor detached: alone, --detach and --stats
    find no hashlb program and leave it; beside hashlb's tc filter, --stats reads the filter
    and --detach removes the filter, not the XDP program."""
    def steer(*args):
        return subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", *args],
                              capture_output=True, text=True, timeout=30)

    def foreign_attached():
        return "hlb_xdp_pass" in T.sh("ip", "-d", "link", "show", "eth0", ns=topo.lb).stdout

    T.sh("ip", "link", "set", "dev", "eth0", "xdpgeneric", "object", BPF_OBJ, "program",
         "hlb_xdp_pass", ns=topo.lb)
    try:
        for args in (["--detach"], ["--stats"]):
            p = steer("-i", "eth0", *args)
            check(p.returncode != 0 and "no hashlb program" in p.stderr and foreign_attached(),
                  f"{args[0]} with only a foreign XDP program: {p.returncode} {p.stderr.strip()}")
        p = steer("--keep", "--mode", "tc", *steer_args(topo, 3, "maglev"))
        check(p.returncode == 0, f"tc beside a foreign XDP program: {p.stderr}")
        p = steer("-i", "eth0", "--stats")
        check(p.returncode == 0 and "new_flows" in p.stdout,
              f"--stats reads hashlb's tc filter behind a foreign XDP program: {p.stderr}")
        p = steer("-i", "eth0", "--detach")
        tc = T.sh("tc", "filter", "show", "dev", "eth0", "ingress", ns=topo.lb,
                  check=False).stdout
        check(p.returncode == 0 and "hlb_tc" not in tc and foreign_attached(),
              f"--detach removes hashlb's tc filter, not the foreign XDP program: "
              f"{p.returncode} {p.stderr.strip()} tc: {'hlb_tc' in tc} "
              f"foreign: {foreign_attached()}")
    finally:
        T.sh("ip", "link", "set", "dev", "eth0", "xdpgeneric", "off", ns=topo.lb, check=False)
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)
    print("a foreign XDP program: never read nor detached" if not failures else "", flush=True)


def hooks(topo):
    """Which hooks of the LB's eth0 hold a hashlb program: {"xdp", "tc"}."""
    link = T.sh("ip", "-d", "link", "show", "eth0", ns=topo.lb).stdout
    tc = T.sh("tc", "filter", "show", "dev", "eth0", "ingress", ns=topo.lb, check=False).stdout
    return {h for h, on in (("xdp", "hlb_xdp" in link), ("tc", "hlb_tc" in tc)) if on}


def second_instance(topo):
    """A second hashlb steer on an interface a live one steers is refused, on the other hook
    too: hashlb's XDP program would take every packet from its tc filter (or the reverse
    order: a new XDP program silently takes over from the foreground tc one). Before, it
    attached beside the first, the foreground process's table no longer steered anything,
    and the second stayed attached after the first exited."""
    def steer(*args):
        return subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", *args],
                              capture_output=True, text=True, timeout=30)

    for first, second in [("tc", "xdp-generic"), ("xdp-generic", "tc"), ("tc", "auto")]:
        tag = f"[{first}, then {second}]"
        # b1 is given without mac=: its neighbour entry must hold one, which the tests before
        # (a foreign XDP program on eth0, minutes on a loaded machine) may have let fail
        topo.resolve()
        p1 = topo.spawn(topo.lb, [HASHLB, "steer", "--mode", first,
                                  *steer_args(topo, 3, "maglev")],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        p1.stdout.readline()  # "attached steering on ..."
        want = {"tc" if first == "tc" else "xdp"}
        p = steer("--keep", "--mode", second, *steer_args(topo, 2, "maglev"))
        # what to do, as --detach refuses the foreground process's program: stop it (before,
        # "--update changes its table, --detach removes it")
        check(p.returncode == 1 and "steers this interface already" in p.stderr
              and f"driven by a foreground hashlb steer (process {p1.pid})" in p.stderr
              and "--detach" not in p.stderr
              and "libbpf" not in p.stderr and hooks(topo) == want,
              f"{tag} the second is refused: {p.returncode} {p.stderr.strip()} "
              f"hooks {sorted(hooks(topo))}")
        p1.send_signal(signal.SIGTERM)
        p1.wait(timeout=15)
        check(not hooks(topo), f"{tag} attached after the first exited: {sorted(hooks(topo))}")
        while steer("-i", "eth0", "--detach").returncode == 0:
            pass
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)
    print("a second hashlb steer on the interface: refused" if not failures else "", flush=True)


def foreground_detach(topo):
    """--detach refuses the program of a live foreground hashlb steer, naming its pid, as it
    refuses a live hashlb run's: before, it detached it and left that process running on
    nothing, to detach nothing at Ctrl-C. --update still replaces its table: the foreground
    process publishes nothing after it attached, and --update is how its backends change
    without losing a flow. Killed (SIGKILL: no detaching on its way out), it leaves an orphan,
    which --detach removes."""
    def steer(*args):
        return subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", *args],
                              capture_output=True, text=True, timeout=30)

    p1 = topo.spawn(topo.lb, [HASHLB, "steer", "--mode", "tc", *steer_args(topo, 3, "maglev")],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p1.stdout.readline()  # "attached steering on ..."
    p = steer("-i", "eth0", "--detach")
    check(p.returncode == 1 and f"driven by a foreground hashlb steer (process {p1.pid})"
          in p.stderr and hooks(topo) == {"tc"} and p1.poll() is None,
          f"--detach of a live foreground hashlb steer's program: {p.returncode} "
          f"{p.stderr.strip()}, hooks {sorted(hooks(topo))}, the process "
          f"{'running' if p1.poll() is None else 'gone'}")
    p = steer("--update", *steer_args(topo, 2, "maglev"))
    check(p.returncode == 0, f"--update of a foreground hashlb steer's table: {p.stderr}")
    p1.kill()
    p1.wait(timeout=15)
    p = steer("-i", "eth0", "--detach")
    check(p.returncode == 0 and not hooks(topo),
          f"--detach of a killed foreground hashlb steer's orphan: {p.returncode} "
          f"{p.stderr.strip()}, hooks {sorted(hooks(topo))}")
    T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)
    print("--detach: a live foreground hashlb steer's program refused, its orphan detached"
          if not failures else "", flush=True)


def xdp_beside_tc(topo):
    """A foreground hashlb steer in tc mode goes on while another hashlb XDP program is on the
    interface (attached by hand here, as an older hashlb that did not refuse it might have),
    and detaches its own filter when stopped. Before, its check looked at XDP first, found
    hlb_xdp, and took its own program for lost: it exited 1 ('the program on eth0 is gone')
    within its 2 s check, detaching its filter (hashlb run logged 'kernel steering lost' and
    dropped it, its flows' state with it)."""
    p1 = topo.spawn(topo.lb, [HASHLB, "steer", "--mode", "tc", *steer_args(topo, 3, "maglev")],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p1.stdout.readline()  # "attached steering on ..."
    T.sh("ip", "link", "set", "dev", "eth0", "xdpgeneric", "object", BPF_OBJ, "program",
         "hlb_xdp", ns=topo.lb)
    try:
        try:
            p1.wait(timeout=7)  # three of its checks
        except subprocess.TimeoutExpired:
            pass
        running = p1.poll() is None
    finally:
        T.sh("ip", "link", "set", "dev", "eth0", "xdpgeneric", "off", ns=topo.lb, check=False)
    if running:
        p1.terminate()
    _, err = p1.communicate(timeout=15)
    check(running and p1.returncode == 0 and not hooks(topo),
          f"tc mode beside another hashlb XDP program: {'running' if running else 'exited'}, "
          f"exit {p1.returncode} {err.strip()}, hooks left {sorted(hooks(topo))}")
    T.sh("tc", "filter", "del", "dev", "eth0", "ingress", ns=topo.lb, check=False)
    T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)
    print("tc mode beside another hashlb XDP program: kept, detached when stopped"
          if not failures else "", flush=True)


def both_hooks(topo):
    """Two hashlb programs on eth0, one at the XDP hook (attached by hand here, as another
    process or a hashlb that did not refuse it might have) and one at tc (hashlb steer --keep):
    --stats, --update and --detach without --mode refuse, naming both, and touch neither;
    --mode tc and --mode xdp reach each. Before, all three took the XDP one without a word
    (--stats printed its counters as the interface's, --update replaced its table, --detach
    removed it), the tc one out of reach, and --mode was refused with them."""
    def steer(*args):
        return subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", *args],
                              capture_output=True, text=True, timeout=30)

    p = steer("--keep", "--mode", "tc", *steer_args(topo, 3, "maglev"))
    check(p.returncode == 0, f"both hooks: tc attached: {p.stderr}")
    T.sh("ip", "link", "set", "dev", "eth0", "xdpgeneric", "object", BPF_OBJ, "program",
         "hlb_xdp", ns=topo.lb)
    seen = []
    try:
        for args in (["--stats"], ["--update", *steer_args(topo, 2, "maglev")[2:]],
                     ["--detach"]):
            p = steer("-i", "eth0", *args)
            seen.append(f"{args[0]}: {p.returncode} {(p.stderr or p.stdout).strip()}")
            check(p.returncode == 1 and "two hashlb programs are attached to 'eth0'" in p.stderr
                  and "xdp-generic (program" in p.stderr and "tc (program" in p.stderr
                  and "--mode" in p.stderr and hooks(topo) == {"xdp", "tc"},
                  f"both hooks: {args[0]} without --mode: {p.returncode} "
                  f"{(p.stderr or p.stdout).strip()}, hooks {sorted(hooks(topo))}")
        p = steer("-i", "eth0", "--stats", "--mode", "tc", "--json")
        st = json.loads(p.stdout) if p.returncode == 0 else {}
        check(st.get("mode") == "tc", f"both hooks: --stats --mode tc: {p.returncode} "
              f"{(p.stderr or p.stdout).strip()}")
        p = steer("--update", "--mode", "tc", *steer_args(topo, 2, "maglev"))
        check(p.returncode == 0 and "updated steering on eth0 (tc)" in p.stdout,
              f"both hooks: --update --mode tc: {p.returncode} {(p.stderr or p.stdout).strip()}")
        p = steer("-i", "eth0", "--stats", "--mode", "xdp")
        check(p.returncode == 0 and "(xdp-generic)" in p.stdout,
              f"both hooks: --stats --mode xdp: {p.returncode} {(p.stderr or p.stdout).strip()}")
        p = steer("-i", "eth0", "--detach", "--mode", "xdp")
        check(p.returncode == 0 and hooks(topo) == {"tc"},
              f"both hooks: --detach --mode xdp: {p.returncode} {p.stderr.strip()}, hooks "
              f"{sorted(hooks(topo))}")
        p = steer("-i", "eth0", "--detach", "--mode", "xdp")
        check(p.returncode == 1 and "no hashlb program is attached to 'eth0' in xdp mode"
              in p.stderr and hooks(topo) == {"tc"},
              f"both hooks: --detach --mode xdp again: {p.returncode} {p.stderr.strip()}")
        p = steer("-i", "eth0", "--detach")
        check(p.returncode == 0 and not hooks(topo),
              f"both hooks: --detach of the one left: {p.returncode} {p.stderr.strip()}")
    finally:
        T.sh("ip", "link", "set", "dev", "eth0", "xdpgeneric", "off", ns=topo.lb, check=False)
        steer("-i", "eth0", "--detach", "--mode", "tc")
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)
    print("both hooks: " + "; ".join(seen[:1]) if not failures else "", flush=True)


def slots_held(topo):
    """--update of a program of 2 backend slots, b1 and b2 in them, to b1 and b3: the table
    fits, but b3's only slot is the one b2 holds until the table without it is in force. It
    goes through: b3 takes the slot once the table is in force, with the next incarnation.
    Established connections on b1 keep it; those on the dropped b2 are scheduled again by the
    new table (ct_resched, never followed to b3, the slot's new holder), which resets them, as
    after any update that drops a backend; new clients follow the new table, b3 included.
    Before, it was refused (exit 1, 'this table's 2 backends and the 1 it drops from the table
    in force need 3 backend slots together, the program has 2'), the operator told to drop b2
    with one --update, then add b3 with the next."""
    def steer(*args, names=("b1", "b2")):
        backends = [a for n in names for a in ("-b", f"{n}={topo.backend_ip(int(n[1]) - 1)}")]
        return subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", "-i", "eth0",
                               "--vip", f"{T.VIP}:{T.VIP_PORT}", "--scheme", "maglev",
                               "--key", "4-tuple", *args, *backends],
                              capture_output=True, text=True, timeout=30)

    def stats():
        p = T.sh(HASHLB, "steer", "-i", "eth0", "--stats", "--json", ns=topo.lb, check=False)
        check(p.returncode == 0, f"slots held: --stats: {p.stderr.strip()}")
        return json.loads(p.stdout) if p.returncode == 0 else {}

    topo.resolve()
    p = steer("--keep", "--mode", "tc", "--max-backends", "2")
    check(p.returncode == 0, f"slots held: attached: {p.stderr.strip()}")
    client = None
    try:
        client, held = held_connections(topo)
        want = lookup(["b1", "b2"], [sp for sp, _ in held], "maglev")
        check(dict(held) == want, f"slots held: held connections off the table: {held}")
        before = stats()
        p = steer("--update", names=("b1", "b3"))
        check(p.returncode == 0, f"slots held: --update to b1, b3: {p.returncode} "
              f"{p.stderr.strip()}")
        client.stdin.write("again\n")
        client.stdin.flush()
        again = dict(json.loads(client.stdout.readline()))
        fresh = json.loads(client.stdout.readline())
        client.stdin.write("quit\n")
        client.stdin.flush()
        client.stdout.readline()
        client.wait(timeout=10)
        after = stats()
        on = {n: [sp for sp, b in held if b == n] for n in ("b1", "b2")}
        kept = [sp for sp in on["b1"] if again.get(sp) != "b1"]
        check(not kept, f"slots held: {len(kept)} of {len(on['b1'])} connections on b1 lost "
              f"or moved: {[(sp, again.get(sp)) for sp in kept[:3]]}")
        live = [sp for sp in on["b2"] if not again.get(sp, "").startswith("error")]
        check(not live, f"slots held: connections on the dropped b2 answered: "
              f"{[(sp, again.get(sp)) for sp in live[:3]]}")
        resched = after.get("ct_resched", 0) - before.get("ct_resched", 0)
        check(resched >= len(on["b2"]), f"slots held: {len(on['b2'])} connections on b2, "
              f"ct_resched {resched}: followed to the slot's new holder?")
        want = lookup(["b1", "b3"], [sp for sp, _ in fresh], "maglev")
        off = [(sp, b, want[sp]) for sp, b in fresh if b != want[sp]]
        check(not off and any(b == "b3" for _, b in fresh),
              f"slots held: new clients off the new table: {off[:3]} "
              f"{sorted({b for _, b in fresh})}")
        print(f"slots held: --update from b1, b2 to b1, b3 in 2 slots: {len(on['b1'])} "
              f"connections on b1 kept, {len(on['b2'])} on b2 rescheduled "
              f"(ct_resched {resched}), {CONNS} new ones by the new table "
              f"({sum(1 for _, b in fresh if b == 'b3')} to b3)", flush=True)
    finally:
        if client and client.poll() is None:
            client.kill()
            client.wait(timeout=10)
        # b2 never saw its connections end (their packets went to b1 and b3 since): a real
        # server's keepalive would close them, here they are killed.
        T.sh("ss", "-K", "-tn", "dst", T.CLIENT_IP, ns=topo.backends[1], check=False)
        topo.wait_closed()
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)


def conntrack_pressure(topo):
    """More live flows than the conntrack table holds: ct_lost counts the packets past a flow's
    SYN that found no entry (evicted while the flow lived), and stays 0 with a table large
    enough for them. 200 connections through --flows 64 (96 entries) and through the default
    (98,304); every connection answers on each packet, from the backend it started on (the
    table did not change, so a flow scheduled again lands where it was). Before, nothing
    told: ct_evicted counts every entry taken, a flow that ended too, and the occupancy
    climbs to the capacity either way."""
    n = 200
    for flows in (None, 64):
        tag = f"[--flows {flows or 'default'}, {n} live flows]"
        extra = ["--flows", str(flows)] if flows else []
        p1 = topo.spawn(topo.lb, [HASHLB, "steer", "--mode", "tc", *extra,
                                  *steer_args(topo, 3, "maglev")],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = p1.stdout.readline()
        check("attached" in line, f"{tag} hashlb steer did not attach: {line}")
        if "attached" not in line:
            p1.terminate()
            p1.wait(timeout=15)
            continue
        client = topo.spawn(topo.client, [sys.executable, PEER, "client", T.VIP,
                                          str(T.VIP_PORT), str(n)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        first = dict(json.loads(client.stdout.readline()))
        client.stdin.write("quit\n")  # a line on every connection: mid-flow packets
        client.stdin.flush()
        answers = dict(json.loads(client.stdout.readline()))
        client.wait(timeout=30)
        moved = [sp for sp in first if answers.get(sp) != first[sp]]
        check(len(first) == n and not moved,
              f"{tag} {len(moved)} connections broke or moved: "
              f"{[(sp, first[sp], answers.get(sp)) for sp in moved[:3]]}")
        st = subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", "-i", "eth0",
                             "--stats", "--json"], capture_output=True, text=True, timeout=30)
        stats = json.loads(st.stdout) if st.returncode == 0 else {}
        lost = stats.get("ct_lost")
        if flows:
            check(lost is not None and lost > 0,
                  f"{tag} ct_lost {lost}: the entries lost to eviction not counted")
        else:
            check(lost == 0, f"{tag} ct_lost {lost} with a table large enough")
        print(f"{tag} ct_lost {lost}, ct_evicted {stats.get('ct_evicted')}, new_flows "
              f"{stats.get('new_flows')}, {n - len(moved)} of {n} connections kept their "
              "backend", flush=True)
        topo.wait_closed()
        p1.send_signal(signal.SIGTERM)
        p1.wait(timeout=15)


def connect_once(topo, vip=T.VIP):
    """CONNS new connections to <vip>: [[sport, backend name], ...]."""
    client = topo.spawn(topo.client, [sys.executable, PEER, "client", vip, str(T.VIP_PORT),
                                      str(CONNS)],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    got = json.loads(client.stdout.readline())
    client.stdin.write("quit\n")
    client.stdin.flush()
    client.stdout.readline()
    client.wait(timeout=10)
    return got


def foreign_filters(topo):
    """hashlb steer in tc mode removes the clsact qdisc it created when it exits, but not one
    that someone has added filters to since (ingress or egress): they stay. Before, the qdisc
    went, and every filter on it with it."""
    def filters(direction):
        return T.sh("tc", "filter", "show", "dev", "eth0", direction, ns=topo.lb,
                    check=False).stdout.count("u32")

    def qdisc():
        return "clsact" in T.sh("tc", "qdisc", "show", "dev", "eth0", ns=topo.lb).stdout

    for added in ([], ["ingress"], ["egress"]):
        tag = f"[another filter on {added or 'nothing'}]"
        p1 = topo.spawn(topo.lb, [HASHLB, "steer", "--mode", "tc",
                                  *steer_args(topo, 3, "maglev")],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        p1.stdout.readline()  # "attached steering on ..."
        for d in added:
            T.sh("tc", "filter", "add", "dev", "eth0", d, "prio", "10", "u32", "match", "u32",
                 "0", "0", "classid", "1:1", ns=topo.lb)
        before = {d: filters(d) for d in added}
        p1.send_signal(signal.SIGTERM)
        p1.wait(timeout=15)
        after = {d: filters(d) for d in added}
        check(after == before and all(before.values()) and not hooks(topo)
              and qdisc() == bool(added),
              f"{tag} after hashlb exited: filters {before} -> {after}, hashlb's "
              f"{sorted(hooks(topo))}, clsact qdisc {qdisc()}")
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)
    print("another filter on the clsact qdisc hashlb created: kept" if not failures else "",
          flush=True)


def foreground_tc(topo):
    """A foreground hashlb steer in tc mode, attached (its first line read)."""
    p1 = topo.spawn(topo.lb, [HASHLB, "steer", "--mode", "tc", *steer_args(topo, 3, "maglev")],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p1.stdout.readline()  # "attached steering on ..."
    return p1


def stop_detaches(topo, p1, sig, what):
    """<sig> to foreground_tc()'s <p1>: it exits 0, its program detached (a leftover removed)."""
    p1.send_signal(sig)
    p1.wait(timeout=15)
    check(p1.returncode == 0 and not hooks(topo),
          f"{what}: exit {p1.returncode}, still attached: {sorted(hooks(topo))}")
    T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
    T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)


def many_args(topo, n):
    """-b arguments of <n> backends, b1..b3 and others whose static neighbour entries on the
    LB's eth0 this adds (many_flush() removes them). b1..b3's are made anew (re_resolve())."""
    batch = "".join(f"neigh replace 10.213.{i // 250}.{i % 250 + 1} lladdr "
                    f"02:00:00:00:{i // 256:02x}:{i % 256:02x} dev eth0 nud permanent\n"
                    for i in range(n - 3))
    subprocess.run(["ip", "-n", topo.lb, "-batch", "-"], input=batch, text=True, check=True,
                   timeout=60)
    re_resolve(topo)
    args = [a for i in range(3) for a in ("-b", f"b{i + 1}={topo.backend_ip(i)}")]
    return args + [a for i in range(n - 3)
                   for a in ("-b", f"p{i}=10.213.{i // 250}.{i % 250 + 1}")]


def re_resolve(topo):
    """b1..b3's neighbour entries on the LB made anew, for the next minute: the kernel's
    neighbour table, shared by every namespace, holds more than gc_thresh1 (128) entries
    while many_args()'s are there, so its periodic collection removes an entry that no
    packet used for 60 s (where, below it, the entry stays), and the earlier scenarios used
    b1's longer ago than that: it went, and the scenarios after needed it."""
    T.sh("ip", "neigh", "flush", "to", f"{T.SUBNET}.0/24", "dev", "eth0", ns=topo.lb,
         check=False)
    topo.resolve()


def many_flush(topo):
    """many_args()'s entries removed, b1..b3's made anew (re_resolve())."""
    T.sh("ip", "neigh", "flush", "to", "10.213.0.0/16", ns=topo.lb, check=False)
    re_resolve(topo)


def many_steer(topo, args, wrap=()):
    return topo.spawn(topo.lb, [*wrap, HASHLB, "steer", "--mode", "tc", "-i", "eth0", "--vip",
                                f"{T.VIP}:{T.VIP_PORT}", "--scheme", "maglev", "--key",
                                "4-tuple", *args],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def many_backends(topo, n=1000):
    """hashlb steer with <n> backends, their MACs from the LB's neighbour table (static entries
    beside b1..b3's): attached with all of them in the table, the neighbour table read once,
    not once a backend. /proc/PID/io's syscr (read syscalls) of the foreground process once it
    has attached: before, each backend's look-up read the whole of /proc/net/arp (a read a
    4 KiB of it: about 38,000 reads for 1,000 backends, and 4 s of the command's time); now
    fewer reads than backends. And the clients `hashlb lookup` gives b1..b3 in that table
    (client ports 21000-24999 tried: about 12) reach them through the kernel path."""
    p1 = many_steer(topo, many_args(topo, n))
    line = p1.stdout.readline()
    try:
        with open(f"/proc/{p1.pid}/io") as f:
            reads = int(re.search(r"syscr:\s*(\d+)", f.read()).group(1))
    except (OSError, AttributeError):
        reads = None
    print(f"    {n} backends: {line.strip()[:80]}...; {reads} read syscalls", flush=True)
    check(f"{n} backends ({n} up)" in line, f"{n} backends: not attached: {line!r}")
    check(reads is not None and reads < n,
          f"{n} backends: {reads} read syscalls, the neighbour table read once a backend")
    names = ["b1", "b2", "b3"] + [f"p{i}" for i in range(n - 3)]
    want = {sp: b for sp, b in lookup(names, range(21000, 25000), "maglev").items()
            if b in names[:3]}
    p = T.sh(sys.executable, "-c", T.REUSE_CLIENT, f"{T.CLIENT_IP}:{T.VIP}",
             *map(str, want), ns=topo.client, check=False, timeout=120)
    got = dict(json.loads(p.stdout)) if p.returncode == 0 else p.stderr.strip()[-200:]
    st = T.sh(HASHLB, "steer", "-i", "eth0", "--stats", "--json", ns=topo.lb, check=False)
    stats = json.loads(st.stdout) if st.returncode == 0 else {}
    print(f"    {n} backends: {len(want)} clients of b1..b3 by the table, "
          f"{sum(1 for sp in want if got.get(sp) == want[sp]) if isinstance(got, dict) else 0} "
          f"reached them; new_flows {stats.get('new_flows')}", flush=True)
    check(want and got == want and stats.get("new_flows", 0) >= len(want),
          f"{n} backends: clients off the table's backend: {got} {want} {stats}")
    topo.wait_closed()
    stop_detaches(topo, p1, signal.SIGTERM, f"{n} backends, SIGTERM")
    many_flush(topo)


def gdb_exit(out):
    """hashlb's exit status as gdb -batch printed it: -N if killed by signal N; None if it
    did not end."""
    m = re.search(r"terminated with signal (SIG[A-Z0-9]+)|exited (normally|with code (\d+))", out)
    if not m:
        return None
    return -signal.Signals[m.group(1)] if m.group(1) else int(m.group(3) or 0)


def early_stop(topo, n=1000):
    """SIGQUIT, SIGTERM or SIGINT to a foreground hashlb steer still starting (its 1,000
    backends' MACs read, its table built), before it attached: it ends, nothing left attached.
    SIGQUIT is a stop as SIGTERM once it runs (hangup()); before, while it started, SIGQUIT
    kept its default action, a core dump (killed by signal 3, a core of the process written)
    where SIGTERM is a clean stop. prlimit: no core file left by the build before. gdb stops it
    at steer_publish()'s sigprocmask(), the one that blocks them before it attaches, sends the signal
    there and lets it go on: the last moment before the block, every time (a poll of
    /proc/PID/status for it missed it now and then, the command attached and detached)."""
    check(shutil.which("gdb"), "gdb is not installed (scripts/setup.sh installs it)")
    args = many_args(topo, n)
    for sig in (signal.SIGQUIT, signal.SIGTERM, signal.SIGINT):
        gdb = ["prlimit", "--core=0", "--", "gdb", "-q", "-batch", "-nx",
               "-ex", "set startup-with-shell off",
               "-ex", "handle SIGQUIT SIGTERM SIGINT nostop noprint pass",
               "-ex", "break steer_publish", "-ex", "run", "-ex", "break sigprocmask",
               "-ex", "continue", "-ex", "bt 2",
               "-ex", f"python import os; os.kill(gdb.selected_inferior().pid, {int(sig)})",
               "-ex", "delete", "-ex", "continue", "--args", HASHLB, "steer", "--mode", "tc",
               "-i", "eth0", "--vip", f"{T.VIP}:{T.VIP_PORT}", "--scheme", "maglev", "--key",
               "4-tuple", *args]
        try:
            p = T.sh(*gdb, ns=topo.lb, check=False, timeout=120)
            out, err = p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:  # it attached and waits (topo.down() ends it)
            out, err = f"{e.stdout} (gdb still running after 120 s)", f"{e.stderr}"
        code = gdb_exit(out)
        print(f"    {sig.name} as it blocks the stop signals: exit status {code} "
              f"{out.strip()[-60:]!r}", flush=True)
        check(re.search(r"#1 .* in steer_publish ", out),
              f"{sig.name}: stopped elsewhere than before the block: {out.strip()[-400:]!r}")
        check(code in (-signal.SIGTERM, -sig) and code != -signal.SIGQUIT and not hooks(topo),
              f"{sig.name} while starting: exit status {code} (killed by SIGQUIT: "
              f"{-signal.SIGQUIT}), {err.strip()[-200:]!r}, attached: {sorted(hooks(topo))}")
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)
    many_flush(topo)


def write_web_config(topo, path):
    """Into <path>: a config of one service, web, steered on eth0 over b1..b3."""
    with open(path, "w") as f:
        f.write(f"services:\n  - name: web\n    listen: {T.VIP}:{T.VIP_PORT}\n"
                "    steering: kernel\n    interface: eth0\n    backends:\n" +
                "".join(f"      - {{name: b{i + 1}, "
                        f"address: '{topo.backend_ip(i)}:{T.VIP_PORT}'}}\n" for i in range(3)))


def pid1_early_stop(topo):
    """hashlb steer as PID 1 of a PID namespace (a container's init), told to stop (SIGTERM,
    SIGINT, SIGQUIT, SIGHUP) while its config loads (start_pause.c, LD_PRELOAD, holds it
    there): it ends at once, exit 128 + the signal's number (SIGQUIT's as SIGTERM's), nothing
    attached. The kernel drops a signal whose action is the default sent to such a process,
    and hashlb steer left them at their default until it blocked them: each was lost, and the
    command attached and steered on."""
    import tempfile
    tmp = tempfile.mkdtemp()
    cfg = os.path.join(tmp, "steer.yaml")
    try:
        write_web_config(topo, cfg)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
            pause = Paused(f"open:{cfg}")
            p = topo.spawn(topo.lb, ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
                                     *pause.wrap, HASHLB, "steer", "-c", cfg, "--mode", "tc"],
                           pass_fds=pause.pass_fds, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
            check(pause.reached(), f"{sig.name}: hashlb steer reached its config")
            with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                os.kill(int(f.read().split()[0]), sig)
            pause.go()
            line = p.stdout.readline()  # its end (""), or "attached steering on ..."
            if line:
                p.kill()  # unshare, and hashlb with it (--kill-child)
            code = p.wait(timeout=15)
            want = 128 + (signal.SIGTERM if sig == signal.SIGQUIT else sig)
            print(f"    PID 1, {sig.name} while its config loads: exit status {code} "
                  f"{line.strip()!r}", flush=True)
            check(code == want and not line and not hooks(topo),
                  f"PID 1, {sig.name} while starting: exit {code} (want {want}), {line.strip()!r}, "
                  f"attached: {sorted(hooks(topo))}")
            T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
            T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)
    finally:
        shutil.rmtree(tmp)


def ignored_kept(topo):
    """A foreground hashlb steer started with SIGHUP, SIGINT and SIGQUIT ignored (nohup; a
    script's background job, spared a Ctrl-C at its terminal) keeps them ignored once
    attached, as while it started: it steers on. It blocked them for sigwait(), which takes a
    blocked signal even ignored: a hashlb steer under nohup detached when its terminal
    closed. SIGTERM still detaches."""
    p1 = topo.spawn(topo.lb, ["sh", "-c", "trap '' HUP INT QUIT; exec \"$@\"", "sh", HASHLB,
                              "steer", "--mode", "tc", *steer_args(topo, 3, "maglev")],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p1.stdout.readline()  # "attached steering on ..."
    err = follow(p1.stderr)
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1):
        p1.send_signal(sig)  # SIGUSR1 said after the others, had they been taken
    end = time.monotonic() + 15
    while time.monotonic() < end and p1.poll() is None and \
            not any("SIGUSR1 ignored" in line for line in err):
        time.sleep(0.05)
    check(p1.poll() is None and hooks(topo) == {"tc"},
          f"SIGHUP, SIGINT, SIGQUIT inherited ignored: exit {p1.poll()}, said {err}, "
          f"attached: {sorted(hooks(topo))}")
    stop_detaches(topo, p1, signal.SIGTERM, "SIGTERM after them")
    print("SIGHUP, SIGINT, SIGQUIT inherited ignored: still steering" if not failures else "",
          flush=True)


def hangup(topo):
    """A foreground hashlb steer detaches on SIGHUP (its terminal or ssh session closed) and
    on SIGQUIT (Ctrl-\\ at its terminal), as on SIGINT and SIGTERM. Before, either killed it
    and left the program steering with a table nobody drove."""
    for sig in (signal.SIGHUP, signal.SIGQUIT):
        stop_detaches(topo, foreground_tc(topo), sig, sig.name)
    print("SIGHUP, SIGQUIT: detached" if not failures else "", flush=True)


def user_signals(topo):
    """A foreground hashlb steer takes SIGUSR1 and SIGUSR2 as hashlb run does SIGUSR1: it says
    it ignores them and steers on, and a stop signal still detaches. Before, either killed it
    (their default action) and left the program steering with a table nobody drove. Its
    stderr the journal's stream (a unit's), each line is a notice there (<5>), as ctl's are:
    it steers on, no error (it was <3>, shown by journalctl -p err)."""
    r, w = os.pipe()
    st = os.fstat(w)
    p1 = topo.spawn(topo.lb, [HASHLB, "steer", "--mode", "tc", *steer_args(topo, 3, "maglev")],
                    stdout=subprocess.PIPE, stderr=w, text=True,
                    env=dict(os.environ, JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}"))
    os.close(w)
    p1.stdout.readline()  # "attached steering on ..."
    err = follow(os.fdopen(r))
    for sig in (signal.SIGUSR1, signal.SIGUSR2):
        p1.send_signal(sig)
        end = time.monotonic() + 15
        while time.monotonic() < end and p1.poll() is None and \
                not any(f"{sig.name} ignored" in l for l in err):
            time.sleep(0.05)
        said = any(l.startswith(f"<5>hashlb steer: {sig.name} ignored") for l in err)
        check(said and p1.poll() is None and hooks(topo) == {"tc"},
              f"{sig.name}: exit {p1.poll()}, said {err}, attached: {sorted(hooks(topo))}")
    stop_detaches(topo, p1, signal.SIGTERM, "SIGTERM after them")
    print("SIGUSR1, SIGUSR2: ignored, still steering" if not failures else "", flush=True)


def early_user_signals(topo):
    """SIGUSR1 and SIGUSR2 to a foreground hashlb steer while its config loads (start_pause.c,
    LD_PRELOAD, holds it there): it attaches, says them and ignores them, and steers on, as
    when they come once it runs. They took their default action there: it died (exit -10, -12)
    before attaching."""
    import tempfile
    tmp = tempfile.mkdtemp()
    cfg = os.path.join(tmp, "steer.yaml")
    try:
        write_web_config(topo, cfg)
        pause = Paused(f"open:{cfg}")
        p = topo.spawn(topo.lb, [*pause.wrap, HASHLB, "steer", "-c", cfg, "--mode", "tc"],
                       pass_fds=pause.pass_fds, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
        check(pause.reached(), "hashlb steer reached its config")
        p.send_signal(signal.SIGUSR1)
        p.send_signal(signal.SIGUSR2)
        pause.go()
        line = p.stdout.readline()  # "attached steering on ...", or its end ("")
        err = follow(p.stderr)
        end = time.monotonic() + 15
        while time.monotonic() < end and p.poll() is None and \
                not all(any(f"{n} ignored" in l for l in err) for n in ("SIGUSR1", "SIGUSR2")):
            time.sleep(0.05)
        print(f"    SIGUSR1, SIGUSR2 while its config loads: {line.strip()!r}, said {err}, "
              f"exit {p.poll()}", flush=True)
        check(line and p.poll() is None and hooks(topo) == {"tc"} and
              all(any(f"{n} ignored" in l for l in err) for n in ("SIGUSR1", "SIGUSR2")),
              f"SIGUSR1, SIGUSR2 while starting: {line.strip()!r}, exit {p.poll()}, said {err}, "
              f"attached: {sorted(hooks(topo))}")
        if p.poll() is None:
            stop_detaches(topo, p, signal.SIGTERM, "SIGTERM after them")
    finally:
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)
        shutil.rmtree(tmp)


def keep_user_signals(topo):
    """SIGUSR1 to hashlb steer --keep, then SIGUSR2 to an --update of its program, each while
    its config loads (start_pause.c, LD_PRELOAD, holds it there): each does its work, says the
    signal ignored, and exits 0, the program attached. Held from main() on, they went with the
    process unsaid (before that, their default action killed it, nothing done)."""
    import tempfile
    tmp = tempfile.mkdtemp()
    cfg = os.path.join(tmp, "steer.yaml")
    try:
        write_web_config(topo, cfg)
        for sig, how in ((signal.SIGUSR1, ("--keep",)), (signal.SIGUSR2, ("--update",))):
            pause = Paused(f"open:{cfg}")
            p = topo.spawn(topo.lb, [*pause.wrap, HASHLB, "steer", "-c", cfg, "--mode", "tc",
                                     *how], pass_fds=pause.pass_fds, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
            reached = pause.reached()
            p.send_signal(sig)
            pause.go()
            try:
                out, err = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            print(f"    {sig.name} to {how[0]} while its config loads: exit {p.returncode}, "
                  f"{out.strip()!r}, {err.strip()!r}", flush=True)
            check(reached and p.returncode == 0 and hooks(topo) == {"tc"} and
                  f"hashlb steer: {sig.name} ignored\n" in err,
                  f"{sig.name} to {how[0]} while starting: exit {p.returncode} (want 0), "
                  f"attached: {sorted(hooks(topo))}, said {err!r} (want '{sig.name} ignored')")
    finally:
        T.sh(HASHLB, "steer", "-i", "eth0", "--mode", "tc", "--detach", ns=topo.lb, check=False)
        T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)
        shutil.rmtree(tmp)


def update_stopped(topo):
    """SIGTERM to hashlb steer --update while it writes the table (gdb stops it as it starts
    to, sends it the signal and lets it go on: blocked, it waits): the update is not applied,
    the program keeps the table it had (20 new clients all on b1, the only backend up in it),
    and the command exits 1 saying so. Before, the signal waited until the new table (b2 the
    only one up) was in force, and the command exited 0: every new client went to b2."""
    check(shutil.which("gdb"), "gdb is not installed (scripts/setup.sh installs it)")
    args = [*steer_args(topo, 3, "maglev"), "--mode", "tc"]
    T.sh(HASHLB, "steer", "--keep", *args, "--down", "b2", "--down", "b3", ns=topo.lb)
    gdb = ["gdb", "-q", "-batch", "-nx", "-ex", "set startup-with-shell off",
           "-ex", "break hashlb_steer_set_table", "-ex", "run",
           "-ex", "python import os, signal; os.kill(gdb.selected_inferior().pid, "
           "signal.SIGTERM)", "-ex", "continue", "--args", HASHLB, "steer", "--update", *args,
           "--down", "b1", "--down", "b3"]
    p = T.sh(*gdb, ns=topo.lb, check=False, timeout=120)
    m = re.search(r"exited (normally|with code (\d+))", p.stdout)
    code = None if not m else int(m.group(2) or 0)
    got = {name for _, name in connect_once(topo)}
    print(f"    SIGTERM while --update writes its table: exit {code}, new clients on "
          f"{sorted(got)}, said {p.stderr.strip()[-120:]!r}", flush=True)
    check(code == 1 and "before the table was applied" in p.stderr and got == {"b1"},
          f"SIGTERM during --update: exit {code} (gdb: {p.stdout.strip()[-300:]!r}), "
          f"{p.stderr.strip()[-300:]!r}, new clients on {sorted(got)} (the old table: b1)")
    topo.wait_closed()
    T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
    T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)


def iface_gone(topo):
    """A foreground hashlb steer whose interface is deleted (and created again under its name:
    a new interface, with no program) exits 1 saying so, within its 2 s check, so that a
    supervisor can start it again. Before, it went on waiting, steering nothing."""
    p1 = topo.spawn(topo.lb, [HASHLB, "steer", "--mode", "tc", *steer_args(topo, 3, "maglev")],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p1.stdout.readline()  # "attached steering on ..."
    topo.rewire_lb()
    topo.resolve()
    try:
        _, err = p1.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        p1.terminate()
        _, err = p1.communicate(timeout=15)
        err = f"still running after 15 s: {err}"
    check(p1.returncode == 1 and "the program on eth0 is gone" in err and not hooks(topo),
          f"interface gone: exit {p1.returncode}, {err.strip()}, hooks {sorted(hooks(topo))}")
    print("interface gone: the foreground hashlb steer exited" if not failures else "",
          flush=True)


def dead_backend_down(topo):
    """--update --down (or --drain) of a backend whose neighbour entry is gone (its host died,
    the entry failed or expired) goes through: a backend out of the table needs no MAC. Before,
    it was refused (`no MAC address`), and the kernel went on sending new clients to the dead
    backend."""
    backends = [a for i in range(3) for a in ("-b", f"b{i + 1}={topo.backend_ip(i)}")]

    def steer(*args):
        return subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", "-i", "eth0",
                               "--vip", f"{T.VIP}:{T.VIP_PORT}", "--key", "4-tuple", *args,
                               *backends],
                              capture_output=True, text=True, timeout=30)

    topo.resolve()
    p = steer("--keep", "--mode", "tc")
    check(p.returncode == 0, f"dead backend: attach: {p.stderr.strip()}")
    # b3's host as dead: it answers no ARP request, which hashlb steer makes for an entry
    # missing (cold_neighbours)
    topo.deaf(2)
    T.sh("ip", "neigh", "del", topo.backend_ip(2), "dev", "eth0", ns=topo.lb, check=False)
    for opt in ("--drain", "--down"):
        p = steer("--update", opt, "b3")
        check(p.returncode == 0, f"dead backend: --update {opt} b3 with no neighbour entry: "
              f"{p.returncode} {p.stderr.strip()}")
        got = connect_once(topo)
        check(got and all(name != "b3" for _, name in got),
              f"dead backend: new clients after {opt} b3: {sorted({n for _, n in got})}")
    p = steer("--update")
    entry = T.sh("ip", "neigh", "show", topo.backend_ip(2), ns=topo.lb).stdout.strip()
    check(p.returncode == 1 and "no MAC address" in p.stderr,
          f"dead backend: back in the table with no MAC must be refused: {p.returncode} "
          f"{p.stderr.strip()} (the LB's entry of b3 now: {entry or 'none'})")
    topo.deaf(2, False)
    T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
    T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)
    topo.resolve()
    print("--down/--drain of a backend with no neighbour entry: ok" if not failures else "",
          flush=True)


def cold_neighbours(topo):
    """The LB's neighbour table empty (a boot; no backend reached from it yet): hashlb steer,
    given the backends by address alone, asks the kernel for their entries itself and attaches,
    and clients reach the backend `hashlb lookup` names. Before, it stopped with "no MAC
    address" until each had been reached (ping) first."""
    for fam in ("-4", "-6"):
        T.sh("ip", fam, "neigh", "flush", "dev", "eth0", ns=topo.lb)
    p = subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", "--keep", "--mode", "tc",
                        *steer_args(topo, 3, "maglev")],
                       capture_output=True, text=True, timeout=30)
    if check(p.returncode == 0, f"cold neighbours: attach: {p.returncode} {p.stderr.strip()}"):
        got = connect_once(topo)
        want = lookup(["b1", "b2", "b3"], [sp for sp, _ in got], "maglev")
        wrong = [(sp, n, want[sp]) for sp, n in got if n != want[sp]]
        check(not wrong, f"cold neighbours: {len(wrong)} of {len(got)} connections not on the "
              f"table's backend: {wrong[:3]}")
        topo.wait_closed()
    T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
    T.sh("tc", "qdisc", "del", "dev", "eth0", "clsact", ns=topo.lb, check=False)
    topo.resolve()
    print("cold neighbours: attached, the backends' entries asked for" if not failures else "",
          flush=True)


def reused_ports(topo):
    """New connections from the source ports of ended ones (a client cycling through its
    ports, a NAT) while the backend they had drains: none reaches it, each the backend
    `hashlb lookup` names. Entries are never freed, and before, a SYN went by the ended
    connection's entry: every one of those connections went back to the draining backend."""
    names = ["b1", "b2", "b3"]
    backends = [a for i in range(3) for a in ("-b", f"b{i + 1}={topo.backend_ip(i)}")]
    # Below the ephemeral range (32768-60999): no earlier scenario's connection holds one.
    ports = list(range(20100, 20100 + CONNS))

    def steer(*args):
        return subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", "-i", "eth0",
                               "--vip", f"{T.VIP}:{T.VIP_PORT}", "--scheme", "maglev",
                               "--key", "4-tuple", *args, *backends],
                              capture_output=True, text=True, timeout=30)

    def connect():
        p = T.sh(sys.executable, "-c", T.REUSE_CLIENT, f"{T.CLIENT_IP}:{T.VIP}",
                 *map(str, ports), ns=topo.client)
        return dict(json.loads(p.stdout))

    topo.resolve()
    p = steer("--keep", "--mode", "tc")
    check(p.returncode == 0, f"reused ports: attach: {p.stderr.strip()}")
    first = connect()
    want = lookup(names, ports, "maglev")
    check(first == want, f"reused ports: first connections off the table: {first} {want}")
    drained = max(names, key=lambda n: sum(1 for v in first.values() if v == n))
    p = steer("--update", "--drain", drained)
    check(p.returncode == 0, f"reused ports: --update --drain {drained}: {p.stderr.strip()}")
    again = connect()
    back = [sp for sp, name in again.items() if name == drained]
    had = sum(1 for v in first.values() if v == drained)
    check(not back, f"reused ports: {len(back)} of {had} new connections from ports whose "
          f"ended connection was on the draining {drained} went back to it")
    off = [sp for sp in ports if again.get(sp) != first[sp] and first[sp] != drained]
    check(not off, f"reused ports: {len(off)} connections of other backends moved")
    topo.wait_closed()
    T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)
    print(f"reused ports: {had} of {CONNS} connections on {drained}; drained, the same ports' "
          f"new connections: {len(back)} to it", flush=True)


def config_lookup(path, sports, *extra):
    """{sport: backend} that hashlb lookup -c names for the client's ports."""
    clients = [f"{T.CLIENT_IP}:{sp}" for sp in sports]
    out = subprocess.run([HASHLB, "lookup", "--json", "-c", path, *extra, *clients],
                         capture_output=True, text=True, timeout=30, check=True)
    return {int(r["client"].rsplit(":", 1)[1]): r["backend"] for r in json.loads(out.stdout)}


def from_config_as_run(topo):
    """hashlb steer -c builds the table hashlb run (and hashlb lookup -c) builds: a backup
    (b3) takes no new client while a primary is up, and --update with --drain or --down
    applies to the config's backends. Before, the backup was put in the table like a primary
    (about a third of new clients), --drain/--down were ignored without a word (an unknown
    name too), and so were --scheme and --key."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(f"""services:
  - name: web
    listen: {T.VIP}:{T.VIP_PORT}
    hash_key: 4-tuple
    steering: kernel
    interface: eth0
    backends:
""")
        for i in range(3):
            f.write(f"      - {{name: b{i + 1}, address: '{topo.backend_ip(i)}:{T.VIP_PORT}'"
                    f"{', backup: true' if i == 2 else ''}}}\n")
        path = f.name

    def steer(*args):
        return subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", "-c", path,
                               *args], capture_output=True, text=True, timeout=30)

    try:
        p = steer("--keep")
        check(p.returncode == 0, f"steer -c, a backup: {p.returncode} {p.stderr}")
        first = connect_once(topo)
        want = config_lookup(path, [sp for sp, _ in first])
        wrong = [(sp, n, want[sp]) for sp, n in first if n != want[sp]]
        check(not wrong and all(n != "b3" for _, n in first),
              f"steer -c, b3 a backup: {len(wrong)} connections off hashlb lookup -c's "
              f"table: {wrong[:3]}")
        p = steer("--update", "--drain", "b1")
        check(p.returncode == 0, f"steer -c --update --drain b1: {p.returncode} {p.stderr}")
        second = connect_once(topo)
        want = config_lookup(path, [sp for sp, _ in second], "--down", "b1")
        wrong = [(sp, n, want[sp]) for sp, n in second if n != want[sp]]
        check(not wrong and all(n == "b2" for _, n in second),
              f"steer -c --update --drain b1: {len(wrong)} connections off the table: "
              f"{wrong[:3]}")
        p = steer("--update", "--down", "b1,b2")
        third = connect_once(topo)
        check(p.returncode == 0 and all(n == "b3" for _, n in third),
              f"steer -c --update --down b1,b2: the backup does not take over: {p.stderr} "
              f"{third[:3]}")
        for args in (["--drain", "b9"], ["--down", "b9"], ["--scheme", "ring"],
                     ["--key", "src-ip"]):
            p = steer("--update", *args)
            check(p.returncode == 2 and p.stderr.startswith("hashlb steer: "),
                  f"steer -c --update {' '.join(args)}: not refused: {p.returncode} {p.stdout}")
        # -c FILE in place of -i IFACE for --stats and --detach (the SYNOPSIS showed -i only)
        p = steer("--stats", "--json")
        stats = json.loads(p.stdout) if p.returncode == 0 else {}
        check(stats.get("new_flows", 0) >= 3 * CONNS,
              f"steer -c --stats: {p.returncode} {p.stderr} {stats}")
        p = steer("--detach")
        check(p.returncode == 0 and not xdp_attached(topo),
              f"steer -c --detach: {p.returncode} {p.stderr}")
        print(f"steer -c with a backup, then --drain b1, then --down b1,b2: {3 * CONNS} "
              "connections on the backend hashlb lookup -c names; -c --stats counted them, "
              "-c --detach detached it", flush=True)
    finally:
        steer("--detach")
        os.unlink(path)


def ipv6(topo):
    """An IPv6 VIP beside the IPv4 one, one table for both: IPv6 connections
    reach the backend hashlb lookup names; b1's MAC is read from the LB's IPv6
    neighbour table, the others are given. That table is flushed first: b1's entry is asked
    of the kernel, a neighbour solicitation (cold_neighbours' IPv4 ARP, for IPv6)."""
    # the kernel sends no solicitation while the LB's link-local address is tentative (its
    # duplicate address detection, a second or two after the link came up)
    end = time.monotonic() + 10
    while T.sh("ip", "-6", "addr", "show", "dev", "eth0", "tentative", ns=topo.lb).stdout and \
            time.monotonic() < end:
        time.sleep(0.05)
    T.sh("ip", "-6", "neigh", "flush", "dev", "eth0", ns=topo.lb)
    args = ["-i", "eth0", "--vip", f"{T.VIP}:{T.VIP_PORT}", "--vip", f"[{T.VIP6}]:{T.VIP_PORT}",
            "--scheme", "maglev", "--key", "src-ip-port", "--mode", "xdp-generic", "--keep"]
    for i, b in enumerate(topo.backends):
        args += ["-b", f"b{i + 1}={topo.backend_ip6(i)}" + (f",mac={topo.mac(b)}" if i else "")]
    p = subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", *args],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, f"ipv6: steer failed: {p.stderr}")
    check(", 2 VIPs, 3 backends (3 up)," in p.stdout, f"ipv6: the summary: {p.stdout}")
    try:
        for vip, client_ip in ((T.VIP6, f"[{T.CLIENT_IP6}]"), (T.VIP, T.CLIENT_IP)):
            got = connect_once(topo, vip)
            clients = ",".join(f"{client_ip}:{sp}" for sp, _ in got)
            out = subprocess.run([HASHLB, "lookup", "--json", "--key", "src-ip-port",
                                  "--scheme", "maglev", clients, "b1", "b2", "b3"],
                                 capture_output=True, text=True, timeout=30, check=True)
            want = {int(r["client"].rsplit(":", 1)[1]): r["backend"]
                    for r in json.loads(out.stdout)}
            wrong = [(sp, n, want[sp]) for sp, n in got if n != want[sp]]
            check(not wrong, f"ipv6: {vip}: {len(wrong)} connections off the table: {wrong[:3]}")
        print(f"IPv6 and IPv4 VIPs on one table (key src-ip-port): {2 * CONNS} connections on "
              "the table's backend", flush=True)
    finally:
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


def steer_config(topo, name):
    """A config file (its path) of one service named <name>, steering: kernel on eth0, ring,
    seed 7, 4-tuple, b1..b3 of weights 1..3, b2 draining."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(f"""services:
  - name: '{name}'
    listen: {T.VIP}:{T.VIP_PORT}
    scheme: ring
    hash_key: 4-tuple
    seed: 7
    steering: kernel
    interface: eth0
    backends:
""")
        for i in range(3):
            f.write(f"      - {{name: b{i + 1}, address: '{topo.backend_ip(i)}:{T.VIP_PORT}', "
                    f"weight: {i + 1}{', state: drain' if i == 1 else ''}}}\n")
        return f.name


def steer_c(topo, path, name, shown):
    """hashlb steer -c <path> --keep, the service <name>: --stats without -c reads the table's
    name, JSON <name>, text <shown>."""
    p = subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", "-c", path, "--keep"],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, f"steer -c ({name}): {p.returncode} {p.stderr}")
    st = subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", "-i", "eth0",
                         "--stats", "--json"], capture_output=True, text=True, timeout=30)
    txt = subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", "-i", "eth0",
                          "--stats"], capture_output=True, text=True, timeout=30)
    named = (json.loads(st.stdout).get("service") if st.returncode == 0 else st.stderr,
             re.findall(r"^service +(.*)$", txt.stdout, re.M))
    check(named == (name, [shown]),
          f"steer -c: --stats' service (JSON, text) {named}, want the config's: {name}, {shown}")


def steer_c_detach(topo, path):
    p = subprocess.run(["ip", "netns", "exec", topo.lb, HASHLB, "steer", "-c", path,
                        "--detach"], capture_output=True, text=True, timeout=30)
    check(p.returncode == 0 and not xdp_attached(topo), f"steer -c --detach: {p.stderr}")


def from_config(topo):
    """hashlb steer -c: VIP, scheme, key, weights and admin state from the
    service with steering: kernel; a draining backend gets no new client. The
    program's table is named by the service (hashlb steer --stats without -c
    reads it; before, hashlb steer wrote no name), web as it is; then, attached
    alone (no traffic), one named -, a valid name, which the text shows quoted,
    "-" (before, it read as none)."""
    path = steer_config(topo, "web")
    try:
        steer_c(topo, path, "web", "web")
        first = connect_once(topo)
        clients = ",".join(f"{T.CLIENT_IP}:{sp}" for sp, _ in first)
        out = subprocess.run([HASHLB, "lookup", "--json", "--key", "4-tuple", "--scheme", "ring",
                              "--seed", "7", "--down", "b2", "--vip", f"{T.VIP}:{T.VIP_PORT}",
                              clients, "b1=1", "b2=2", "b3=3"],
                             capture_output=True, text=True, timeout=30, check=True)
        want = {int(r["client"].rsplit(":", 1)[1]): r["backend"] for r in json.loads(out.stdout)}
        wrong = [(sp, n, want[sp]) for sp, n in first if n != want[sp]]
        check(not wrong, f"steer -c: {len(wrong)} connections off the table: {wrong[:3]}")
        check(all(n != "b2" for _, n in first), "steer -c: a new client went to draining b2")
        # --detach -c FILE of a file with a second kernel-steered service on eth0: the
        # interface's program, no --service needed (before, "several services have steering:
        # kernel; name one with --service", exit 2)
        with open(path, "a") as f:
            f.write(f"""  - name: other
    listen: {T.VIP}:{T.VIP_PORT + 1}
    steering: kernel
    interface: eth0
    backends: [{{name: o1, address: '{topo.backend_ip(0)}:{T.VIP_PORT}'}}]
""")
        steer_c_detach(topo, path)
        print(f"steer -c (ring, seed 7, weights, b2 draining): {CONNS} connections on the "
              "table's backend", flush=True)
    finally:
        os.unlink(path)
    path = steer_config(topo, "-")
    try:
        steer_c(topo, path, "-", '"-"')
        steer_c_detach(topo, path)
    finally:
        os.unlink(path)


def daemon_steering(topo, servers):
    """hashlb run with steering: kernel: the daemon attaches the program and
    publishes every table into it; when a backend's server dies, the health
    checks take it out of the kernel path's table too; reloads turn the kernel
    path off and on; upgraded in place, then
    side by side, the program passes from process to process with every flow;
    when the last one stops, detached. auto mode: tc, since eth0 is a veth."""
    import tempfile
    admin = tempfile.mktemp(prefix="hlbst-admin-", suffix=".sock")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(f"""admin: unix:{admin}
workers: 1
services:
  - name: web
    listen: {T.VIP}:{T.VIP_PORT}
    scheme: maglev
    hash_key: 4-tuple
    steering: kernel
    interface: eth0
    health: {{interval: 100ms, timeout: 100ms, fall: 2, rise: 1}}
    backends:
""")
        for i in range(3):
            f.write(f"      - {{name: b{i + 1}, address: '{topo.backend_ip(i)}:{T.VIP_PORT}'}}\n")
        path = f.name
    # The daemon listens on the VIP too: the LB holds it (on lo).
    T.sh("ip", "addr", "add", f"{T.VIP}/32", "dev", "lo", ns=topo.lb)
    run = topo.spawn(topo.lb, [HASHLB, "run", "-c", path], stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE, text=True)
    published, new_pid, third = 0, None, None

    lines, pos = follow(run.stderr), 0

    def wait_log(what, timeout):
        """The next line of the daemon's log (of every generation) holding <what>, or None."""
        nonlocal published, pos
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            while pos < len(lines):
                line = lines[pos]
                pos += 1
                if "kernel steering table published" in line:
                    published += 1
                if what in line:
                    return line
            time.sleep(0.01)
        return None

    try:
        line = wait_log("kernel steering table published", 15)
        check(line is not None, "hashlb run: no kernel steering table published")
        if line is None:
            return

        def connect_and_check(names, tag):
            got = connect_once(topo)
            want = lookup(names, [sp for sp, _ in got], "maglev")
            wrong = [(sp, n, want[sp]) for sp, n in got if n != want[sp]]
            check(not wrong, f"hashlb run {tag}: {len(wrong)} connections off the table: "
                  f"{wrong[:3]}")
            return got

        connect_and_check(["b1", "b2", "b3"], "all up")
        p = T.sh(HASHLB, "ctl", "-c", path, "close", "b1", ns=topo.lb, check=False)
        check(p.returncode != 0 and "steered in the kernel" in p.stdout + p.stderr,
              f"ctl close on a kernel-steered service is refused: {p.stdout} {p.stderr}")
        st = json.loads(T.sh(HASHLB, "steer", "-i", "eth0", "--stats", "--json",
                             ns=topo.lb).stdout)
        check(st["new_flows"] >= CONNS, f"hashlb run: the kernel path carried no flow: {st}")
        # b3's server dies: the checks bring it down, the kernel table follows.
        servers[2].terminate()
        servers[2].wait(timeout=10)
        # the table published once the checks took b3 down: its first failed check publishes
        # too (a Maglev retry table prepared, the kernel's table unchanged: b3 still in it)
        check(wait_log("backend down", 15) is not None, "hashlb run: b3 not taken down")
        before = published
        deadline = time.monotonic() + 15
        while published == before and time.monotonic() < deadline:
            wait_log("kernel steering table published", 1)
        check(published > before, "hashlb run: no table published after b3 died")
        got = connect_and_check(["b1", "b2", "b3"] if published == before else
                                ["--down", "b3", "b1", "b2", "b3"], "b3 down")
        check(all(n != "b3" for _, n in got), "hashlb run: a new flow went to dead b3")
        print(f"hashlb run, steering: kernel: {CONNS} connections on the table's backend, then "
              "b3 taken out by the health checks", flush=True)
        reload_steering(topo, run, path, wait_log, connect_and_check)
        new_pid = upgrade_in_place(topo, run, wait_log)
        if new_pid:
            third = side_by_side(topo, path, new_pid)
        if third:
            # its sockets fetched by hand: no successor took them, so it still detaches the
            # program when it stops (the check after the finally)
            got = T.sh("curl", "-s", "--unix-socket", admin, "http://hashlb/sockets",
                       ns=topo.lb, check=False)
            check(got.returncode == 0 and re.search(r"^\d+ \d+ ", got.stdout, re.M),
                  f"GET /sockets by hand answers with the sockets: {got.stdout} {got.stderr}")
    finally:
        run.terminate()
        run.wait(timeout=15)
        if new_pid:
            stop_pid(new_pid)
        if third:
            # the last to drive the program: a stop drains the kernel path's flows up to
            # timeouts.drain (30 s), a second SIGTERM detaches it at once
            T.stop_draining(third.pid, third.lines)
            third.wait(timeout=15)
        if os.path.exists(admin):
            os.unlink(admin)
        T.sh("ip", "addr", "del", f"{T.VIP}/32", "dev", "lo", ns=topo.lb, check=False)
        os.unlink(path)
    check(not xdp_attached(topo), "hashlb run left the program attached (the new process, "
          "once the upgrade's, detaches it when it stops)")


def reload_steering(topo, run, path, wait_log, connect_and_check):
    """A reload that sets steering: userspace detaches the program (the daemon then serves the
    VIP itself); one that sets steering: kernel again attaches it, with the table in force (b3
    still down), and the kernel path carries new flows."""
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace("steering: kernel", "steering: userspace"))
    run.send_signal(signal.SIGHUP)
    check(wait_log("kernel steering detached", 15) is not None and not xdp_attached(topo),
          "a reload to steering: userspace detaches the program")
    with open(path, "w") as f:
        f.write(text)
    run.send_signal(signal.SIGHUP)
    check(wait_log("kernel steering table published", 15) is not None and xdp_attached(topo),
          "a reload back to steering: kernel attaches it again and publishes the table")
    got = connect_and_check(["--down", "b3", "b1", "b2", "b3"], "after the reloads")
    st = json.loads(T.sh(HASHLB, "steer", "-i", "eth0", "--stats", "--json", ns=topo.lb).stdout)
    check(st["new_flows"] >= CONNS and all(n != "b3" for _, n in got),
          f"the program attached by the reload carries the new flows: {st}")
    print("hashlb run: reloads detach and attach the kernel path", flush=True)


def follow(stream):
    """The lines of a daemon's log as they come, read by a thread (select() on the pipe cannot
    see lines a readline() already buffered, and a reload's lines come together)."""
    lines = []

    def read():
        for line in stream:
            if os.environ.get("HLBST_VERBOSE"):
                print("run:", line.rstrip(), flush=True)
            lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def stop_pid(pid, timeout=15):
    """SIGTERM <pid> (not our child) and wait until it has exited."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        os.kill(pid, signal.SIGTERM)
        select.select([fd], [], [], timeout)
    finally:
        os.close(fd)


def upgrade_in_place(topo, run, wait_log):
    """SIGUSR2 to hashlb run with steering: kernel: the new process takes the attached program
    over (its conntrack too) and the old one leaves it attached when it exits, so connections
    the kernel path carries keep their backend across the upgrade. Returns the new pid."""
    client, held = held_connections(topo)
    run.send_signal(signal.SIGUSR2)
    taken = wait_log("kernel steering taken over", 15)
    line = wait_log("upgraded: the new hashlb is ready", 15)
    m = re.search(r" pid=(\d+)", line or "")
    new_pid = int(m.group(1)) if m else None
    check(taken is not None, "hashlb run upgraded in place: the new process did not take the "
          "kernel steering over")
    check(new_pid is not None, "hashlb run: no upgrade in place")
    try:
        rc = run.wait(timeout=15)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, f"the old hashlb run exited 0 after the upgrade: {rc}")
    check(xdp_attached(topo), "the old hashlb run detached the program the new one uses")
    still_held(client, held, "upgrade in place")
    return new_pid


def held_connections(topo):
    """A client in the client namespace holding CONNS connections: (process, [[sport, name]])."""
    client = topo.spawn(topo.client, [sys.executable, PEER, "client", T.VIP, str(T.VIP_PORT),
                                      str(CONNS)],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return client, json.loads(client.stdout.readline())


def still_held(client, held, tag):
    """Each held connection answers, from the backend it had."""
    client.stdin.write("quit\n")
    client.stdin.flush()
    answers = json.loads(client.stdout.readline())
    client.wait(timeout=10)
    moved = [(sp, n, dict(held).get(sp)) for sp, n in answers if n != dict(held).get(sp)]
    check(len(answers) == CONNS and not moved,
          f"connections through the kernel path across the {tag}: {len(moved)} of "
          f"{len(answers)} lost or moved: {moved[:3]}")
    if not moved:
        print(f"hashlb run, {tag}: {CONNS} connections kept their backend through the kernel "
              "path", flush=True)


def side_by_side(topo, path, old_pid):
    """A new hashlb run beside the running one takes its sockets over through the admin
    endpoint (a Unix socket), and with them the kernel program: the old one, SIGTERMed,
    leaves the program attached. Returns the new process."""
    client, held = held_connections(topo)
    new = topo.spawn(topo.lb, [HASHLB, "run", "-c", path], stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE, text=True)
    lines, end = follow(new.stderr), time.monotonic() + 15
    new.lines = lines
    while time.monotonic() < end and not any("msg=started" in l for l in lines):
        time.sleep(0.01)
    check(any("kernel steering taken over" in l for l in lines) and
          any('msg="listening sockets taken over"' in l for l in lines),
          f"the side-by-side hashlb took the sockets and the kernel program over: {lines}")
    stop_pid(old_pid)
    check(xdp_attached(topo), "the old hashlb run detached the program after handing its "
          "sockets over through the admin endpoint")
    still_held(client, held, "side-by-side upgrade")
    return new


def body(topo):
    """Every scenario, or those named on the command line (test_e2e.py NAME...)."""
    servers = topo.serve(PEER)
    modes = [("xdp-generic", "maglev"), ("tc", "ring"), ("xdp", "maglev"), ("auto", "ring")]
    table = [("run_mode", lambda t: [run_mode(t, m, s) for m, s in modes]),
             ("keep_and_detach", keep_and_detach), ("foreign_program", foreign_program),
             ("second_instance", second_instance), ("foreign_filters", foreign_filters),
             ("hangup", hangup), ("many_backends", many_backends),
             ("early_stop", early_stop), ("pid1_early_stop", pid1_early_stop),
             ("ignored_kept", ignored_kept), ("user_signals", user_signals),
             ("early_user_signals", early_user_signals),
             ("keep_user_signals", keep_user_signals),
             ("update_stopped", update_stopped), ("iface_gone", iface_gone),
             ("foreground_detach", foreground_detach), ("xdp_beside_tc", xdp_beside_tc),
             ("both_hooks", both_hooks), ("slots_held", slots_held),
             ("conntrack_pressure", conntrack_pressure),
             ("dead_backend_down", dead_backend_down), ("cold_neighbours", cold_neighbours),
             ("reused_ports", reused_ports),
             ("from_config", from_config), ("from_config_as_run", from_config_as_run),
             ("ipv6", ipv6),
             # last: it stops b3's server
             ("daemon_steering", lambda t: daemon_steering(t, servers))]
    for name, fn in T.chosen(table):
        fn(topo)


def main():
    T.need_root()
    t0 = time.monotonic()
    T.with_topo(3, body)
    leftover = [n for n in T.sh("ip", "netns", "list").stdout.split()
                if n.startswith(f"hlbst-{os.getpid()}-")]
    check(not leftover, f"namespaces left behind: {leftover}")
    print(f"{len(failures)} failed checks, {time.monotonic() - t0:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
