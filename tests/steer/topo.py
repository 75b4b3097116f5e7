"""The kernel-steering network: a client, a load balancer and backends in network
namespaces this process creates, joined by veth pairs to a bridge in a switch
namespace. Names start with hlbst-<pid>- so that concurrent runs never collide.
Used by tests/steer/test_e2e.py and bench/steer_netns.py.

    client 10.211.0.2  fd11::2  --+
    lb     10.211.0.3  fd11::3  --+-- br0 (namespace "sw")
    b1..bN 10.211.0.11 fd11::b... +
The VIPs 10.212.0.100 and fd12::100 are routed by the client via the load
balancer; each backend holds them on its loopback (direct server return) and
answers directly.
"""
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time

SUBNET = "10.211.0"
VIP = "10.212.0.100"
SUBNET6 = "fd11::"
VIP6 = "fd12::100"
CLIENT_IP6 = "fd11::2"
LB_IP6 = "fd11::3"
VIP_PORT = 80
CLIENT_IP = f"{SUBNET}.2"
LB_IP = f"{SUBNET}.3"


# Connects from each source port given (argv[2:], of argv[1] "CLIENT_IP:VIP"), reads the
# backend's name, ends with a RST (SO_LINGER 0: no TIME-WAIT, so the port is free again at
# once); prints [[port, name], ...]. Used by test_e2e.py and test_run.py.
REUSE_CLIENT = """
import json, socket, struct, sys
out = []
for port in map(int, sys.argv[2:]):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.settimeout(5)
    s.bind((sys.argv[1].split(":")[0], port))
    s.connect((sys.argv[1].split(":")[1], 80))
    out.append([port, s.makefile().readline().strip()])
    s.close()
print(json.dumps(out))
"""


# What hashlb run logs when a stop keeps its program up to timeouts.drain, for the kernel path's
# established flows (docs/steering.md).
DRAINING = "kernel steering draining"


def stop_draining(pid, lines, timeout=15):
    """SIGTERM <pid>, a hashlb run whose log is <lines> (followed by a thread), and wait until it
    has exited (<timeout> s at most). If it drains the kernel path's flows (a stop keeps its
    program up to timeouts.drain, 30 s by default), a second SIGTERM, sent once it says so (two
    at once would be one), ends that at once. Whether it exited."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        start, again = len(lines), False
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if select.select([fd], [], [], 0.05)[0]:
                return True
            if not again and any(DRAINING in line for line in lines[start:]):
                os.kill(pid, signal.SIGTERM)
                again = True
        return False
    finally:
        os.close(fd)


def sh(*args, check=True, ns=None, timeout=30):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return p


class Topo:
    def __init__(self, n_backends=3):
        self.prefix = f"hlbst-{os.getpid()}-"
        self.sw = self.prefix + "sw"
        self.client = self.prefix + "c"
        self.lb = self.prefix + "lb"
        self.backends = [self.prefix + f"b{i + 1}" for i in range(n_backends)]
        self.procs = []
        self.created = []

    def ns_all(self):
        return [self.sw, self.client, self.lb] + self.backends

    def backend_ip(self, i):
        return f"{SUBNET}.{11 + i}"

    def backend_ip6(self, i):
        return f"{SUBNET6}{11 + i:x}"

    def mac(self, ns):
        out = sh("ip", "-br", "link", "show", "eth0", ns=ns).stdout
        return re.search(r"([0-9a-f]{2}(:[0-9a-f]{2}){5})", out).group(1)

    def up(self):
        for ns in self.ns_all():
            sh("ip", "netns", "add", ns)
            self.created.append(ns)
        sh("ip", "link", "add", "br0", "type", "bridge", ns=self.sw)
        sh("ip", "link", "set", "br0", "up", ns=self.sw)
        nodes = [(self.client, CLIENT_IP, CLIENT_IP6), (self.lb, LB_IP, LB_IP6)] + [
            (b, self.backend_ip(i), self.backend_ip6(i)) for i, b in enumerate(self.backends)]
        for k, (ns, ip, ip6) in enumerate(nodes):
            self.wire(k, ns, ip, ip6)
        sh("ip", "-n", self.client, "route", "add", f"{VIP}/32", "via", LB_IP)
        sh("ip", "-n", self.client, "-6", "route", "add", f"{VIP6}/128", "via", LB_IP6)
        for b in self.backends:
            sh("ip", "-n", b, "addr", "add", f"{VIP}/32", "dev", "lo")
            sh("ip", "-n", b, "-6", "addr", "add", f"{VIP6}/128", "dev", "lo")
            # The VIP is not theirs to announce: only the LB attracts it.
            sh("sysctl", "-q", "-w", "net.ipv4.conf.all.arp_ignore=1", ns=b)
            sh("sysctl", "-q", "-w", "net.ipv4.conf.all.arp_announce=2", ns=b)
        for ns in [self.client, self.lb] + self.backends:
            sh("sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=0", ns=ns)
            sh("sysctl", "-q", "-w", "net.ipv4.conf.eth0.rp_filter=0", ns=ns)
        for b in self.backends:
            self.pin_lb(b)
        self.resolve()
        return self

    def pin_lb(self, ns):
        """Backend <ns> holds the LB's addresses in permanent neighbour entries, so that it never
        asks for them: the LB learns a backend's MAC only from what the LB sends it, as
        resolve() and health checks do, and a test that deletes the LB's entry of a backend
        finds it gone until then. Otherwise a backend that answered the LB (resolve()'s
        connect) checks its entry of the LB 5 s later (delay_first_probe_time) by a unicast
        request, and that request gives the LB the backend's entry again: steer-e2e's
        dead_backend_down found b3's MAC back where it must be refused (CI, session 36)."""
        mac = self.mac(self.lb)
        sh("ip", "neigh", "replace", LB_IP, "lladdr", mac, "dev", "eth0", "nud", "permanent",
           ns=ns)
        sh("ip", "-6", "neigh", "replace", LB_IP6, "lladdr", mac, "dev", "eth0", "nud",
           "permanent", ns=ns)

    def wire(self, k, ns, ip, ip6, mac=None):
        """Node <ns>'s eth0, with <ip> and <ip6> (and <mac>), on the switch's port p<k>."""
        port = f"p{k}"
        sh("ip", "-n", self.sw, "link", "add", port, "type", "veth", "peer", "name", "eth0",
           "netns", ns)
        if mac:
            sh("ip", "-n", ns, "link", "set", "eth0", "address", mac)
        sh("ip", "-n", self.sw, "link", "set", port, "master", "br0", "up")
        sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        sh("ip", "-n", ns, "-6", "addr", "add", f"{ip6}/64", "dev", "eth0", "nodad")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("sysctl", "-q", "-w", "net.ipv4.conf.eth0.rp_filter=0", ns=ns)

    def rewire_lb(self):
        """The LB's eth0 deleted and created again under its name (a bond or a VLAN
        interface set up anew): whatever was attached to it goes with it. Its MAC stays, as
        the other nodes' neighbour entries have it (a bond keeps its own too); its neighbour
        table starts empty (resolve() fills it)."""
        mac = self.mac(self.lb)
        sh("ip", "link", "del", "eth0", ns=self.lb)
        self.wire(1, self.lb, LB_IP, LB_IP6, mac)

    def deaf(self, i, on=True):
        """Backend <i> answers no ARP request while <on> (its eth0's arp_ignore 8, above the
        all's 1): the LB cannot learn its MAC, whatever it sends it, until the test lets go
        (<on> False: the all's again). A test that needs a MAC unknown a while holds it so.
        IPv4 only: arp_ignore does not touch NDP, so the LB still learns the MAC of the
        backend's IPv6 address (its IPv6 entry), which a backend given by that address needs.
        Nor does it stop the LB learning from the backend's own ARP requests once the LB
        has an entry of it (INCOMPLETE or FAILED, from anything that sent to it): hold it
        with the LB's entry deleted and nothing in the LB sending to the backend."""
        sh("sysctl", "-q", "-w", f"net.ipv4.conf.eth0.arp_ignore={8 if on else 0}",
           ns=self.backends[i])

    def resolve(self, deadline=20):
        """Fill the LB's neighbour table so backends can be given without mac=: until each
        backend's entries hold its MAC, however slow the machine (<deadline> s: only a broken
        network takes that long). (A TCP connect to a closed port asks for the address, no ping
        needed; asked again every second while an entry has no MAC.)"""
        ips = [ip for i in range(len(self.backends))
               for ip in (self.backend_ip(i), self.backend_ip6(i))]
        missing, end = ips, time.monotonic() + deadline
        while missing and time.monotonic() < end:
            for ip in missing:
                sh(sys.executable, "-c", "import socket, sys; "
                   "s = socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET); "
                   "s.settimeout(1); s.connect_ex((sys.argv[1], 9))", ip, ns=self.lb, check=False)
            missing = self.unresolved(ips)

    def unresolved(self, ips):
        """Those of <ips> whose entry in the LB's neighbour table holds no MAC."""
        out = sh("ip", "neigh", "show", "dev", "eth0", ns=self.lb).stdout
        return [ip for ip in ips if not re.search(rf"^{re.escape(ip)} lladdr ", out, re.M)]

    def ethtool(self, ns, dev, cmd, value):
        """An ethtool set command by ioctl (ethtool itself may not be
        installed): cmd is ETHTOOL_S* (struct ethtool_value)."""
        sh(sys.executable, "-c", (
            "import ctypes, fcntl, socket, struct, sys\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "val = ctypes.create_string_buffer(struct.pack('II', int(sys.argv[2]), "
            "int(sys.argv[3])))\n"
            "ifr = struct.pack('16sP', sys.argv[1].encode(), ctypes.addressof(val))\n"
            "fcntl.ioctl(s, 0x8946, ifr)\n"), dev, str(cmd), str(value), ns=ns)

    def native_xdp_ready(self, bpf_obj):
        """What native XDP on the LB's veth needs to forward to a backend:
        - the LB's bridge port (p1) must run XDP itself to take XDP_TX
          frames (veth hands them to its peer's XDP receive queue): give it
          the trivial hlb_xdp_pass program of <bpf_obj>;
        - the client must send complete checksums (ETHTOOL_STXCSUM off): a
          veth hands over partial checksums that the stack completes later,
          but XDP_TX bypasses that. Frames from a real NIC are complete."""
        sh("ip", "link", "set", "dev", "p1", "xdpdrv", "object", bpf_obj, "program",
           "hlb_xdp_pass", ns=self.sw)
        self.ethtool(self.client, "eth0", 0x17, 0)

    def closing(self):
        """The backends' connections on a VIP's port that are not closed yet: [(backend, state,
        peer)]. LISTEN and TIME-WAIT (which sends nothing by itself) do not count; a health
        check's connection, to the backend's own address, neither."""
        vips = (f"{VIP}:{VIP_PORT}", f"[::ffff:{VIP}]:{VIP_PORT}", f"[{VIP6}]:{VIP_PORT}")
        out = []
        for b in self.backends:
            for line in sh("ss", "-Htan", ns=b).stdout.splitlines():
                f = line.split()
                if len(f) >= 5 and f[0] not in ("LISTEN", "TIME-WAIT") and f[3] in vips:
                    out.append((b[len(self.prefix):], f[0], f[4]))
        return out

    def wait_closed(self, deadline=20):
        """Wait until every connection through the VIP has ended on its backend (<deadline> s
        at most, for a client still holding one: a failing test); what is left, [] normally.
        Call it before the program is detached after connections through it. Otherwise a
        connection still closing then (its backend's FIN sent a moment late) ends badly: the
        client's last ACK reaches the LB's own stack, which answers with a RST that ends the
        client's TIME-WAIT; the backend, its FIN never acknowledged, sends it again and again
        (for about 100 s: tcp_orphan_retries), and the client, with no socket left, answers
        each with a bare RST to the VIP (54 bytes, no options). The next program attached
        counts one (packets, bytes, new_flows, ct_lost) and steers it by its table: to the
        flow's backend, which it ends, or to another, which ignores it, and the FIN comes
        again. steer-run's metrics scenario, which counts every packet, saw one in 1 run of
        14 (sessions 25, 26); with each backend's close delayed 0.3 s, 1,168 such RSTs in a
        steer-run, 20 of them counted by metrics run last."""
        end = time.monotonic() + deadline
        left = self.closing()
        while left and time.monotonic() < end:
            time.sleep(0.05)
            left = self.closing()
        if left:
            print(f"connections through the VIP still open after {deadline} s: {left[:3]}",
                  flush=True)
        return left

    def serve(self, peer, n=None):
        """`peer.py serve bN 80` in each backend (the first <n>), ready: the processes."""
        servers = []
        for i, b in enumerate(self.backends[:n]):
            p = self.spawn(b, [sys.executable, peer, "serve", f"b{i + 1}", str(VIP_PORT)],
                           stdout=subprocess.PIPE, text=True)
            p.stdout.readline()
            servers.append(p)
        return servers

    def spawn(self, ns, args, **kw):
        p = subprocess.Popen(["ip", "netns", "exec", ns] + list(args), **kw)
        self.procs.append(p)
        return p

    def down(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for ns in reversed(self.created):
            # Processes still inside would keep it alive: kill them by PID.
            pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            sh("ip", "netns", "del", ns, check=False)
        self.created = []


def with_topo(n_backends, body):
    """Run body(topo), removing every namespace afterwards, even on failure,
    SIGTERM (meson's timeout), SIGINT, SIGQUIT or SIGHUP. Taken here, not ignored, those
    also reach each process started with their default action, whatever the shell that
    started the test ignored: a command a script runs in the background (no job control)
    ignores SIGINT and SIGQUIT, one under nohup SIGHUP, and an ignored signal stays ignored
    across exec. A hashlb steer keeps it ignored (ignored_kept): early_stop's SIGQUIT was
    lost, and the command attached and ran on."""
    topo = Topo(n_backends)

    def on_signal(signum, frame):
        raise SystemExit(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        topo.up()
        return body(topo)
    finally:
        topo.down()


def need_root():
    if os.geteuid() != 0:
        print("SKIP: network namespaces and BPF need root")
        sys.exit(77)


def chosen(table):
    """The (name, fn) entries of <table> named on the command line, every one when none is. A
    name no entry has ends the run (exit 1) before anything runs: a mistyped or renamed
    scenario ran nothing, and the run said "0 failed checks" and exited 0."""
    names = sys.argv[1:]
    unknown = [n for n in names if n not in {name for name, _ in table}]
    if unknown:
        raise SystemExit(f"no such scenario: {' '.join(unknown)}; the scenarios: "
                         f"{' '.join(name for name, _ in table)}")
    return [(name, fn) for name, fn in table if not names or name in names]


class Skip(Exception):
    """Raised by a scenario that cannot run here (no gdb, ...), with the reason: counted in
    Scenarios.skipped, not as passed."""


class Scenarios:
    """The scenarios a body ran and skipped (Skip): run(name, fn, *args) runs one."""

    def __init__(self):
        self.ran, self.skipped = [], []

    def run(self, name, fn, *args):
        self.ran.append(name)
        try:
            fn(*args)
        except Skip as e:
            print(f"{name}: skipped: {e}", flush=True)
            self.skipped.append(name)


def main(body, failures, scenarios=None):
    """A test's main: root or skip, body(topo) on three backends, its failed checks counted;
    the exit status: 77 if every scenario of <scenarios> (a Scenarios) skipped, the skipped
    ones named in a line .ci/run reads (skips are no passes)."""
    need_root()
    t0 = time.monotonic()
    with_topo(3, body)
    print(f"{len(failures)} failed checks, {time.monotonic() - t0:.1f} s")
    if scenarios and scenarios.skipped:
        print(f"{len(scenarios.skipped)} of {len(scenarios.ran)} test(s) skipped: "
              f"{' '.join(scenarios.skipped)}")
        if not failures and len(scenarios.skipped) == len(scenarios.ran):
            return 77
    return 1 if failures else 0
