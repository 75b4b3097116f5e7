#!/usr/bin/env python3
"""Kernel steering on frames the kernel builds in ways BPF_PROG_TEST_RUN cannot (it makes one
linear skb): in network namespaces (tests/steer/topo.py, MTU 9000), hand-made frames sent by a
packet socket from the client to hashlb steer in tc mode. A non-linear frame (PACKET_VNET_HDR:
only the first 60 bytes linear) is counted whole in the bytes counter, and one whose IPv6
extension headers end past the 256 bytes tc pulls first is forwarded; a VLAN-tagged one is
passed; malformed and unusual frames (IP headers cut short, which BPF_PROG_TEST_RUN cannot
give tc, bad lengths, fragments, IP options, UDP) are passed, dropped or forwarded as the
design's table says; a bare RST that finds no conntrack entry is steered by the table and
makes none; a path-MTU message about a real connection reaches its backend's socket. The
namespaces are removed even when it fails."""
import ctypes
import json
import os
import re
import select
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import topo as T  # noqa: E402

HASHLB = os.environ.get("HASHLB", "build/src/cli/hashlb")
failures = []
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000
ETH_P_ALL = 3
SOL_PACKET, PACKET_VNET_HDR = 263, 15
# A frame that must arrive is waited for up to ARRIVE s (a working build takes milliseconds,
# a loaded CI machine may take seconds); one that must not, LINGER s.
ARRIVE, LINGER = 20, 0.5


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)
    return cond


def in_ns(ns, fn):
    """fn() run in network namespace <ns> (its sockets stay there)."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {ns}")
        return fn()
    finally:
        libc.setns(home, CLONE_NEWNET)
        os.close(fd)
        os.close(home)


def packet_socket(ns, vnet=False):
    """An AF_PACKET socket on eth0 of namespace <ns> (entered for the call only)."""
    def make():
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        if vnet:
            s.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
        s.bind(("eth0", 0))
        return s

    s = in_ns(ns, make)
    s.setblocking(False)
    return s


def mac(topo, ns):
    return bytes.fromhex(topo.mac(ns).replace(":", ""))


def tcp(sport, payload):
    """A TCP segment (ACK, no options) to the VIP port; its checksum is not checked here."""
    return struct.pack("!HHIIBBHHH", sport, T.VIP_PORT, 1, 1, 5 << 4, 0x10, 65535, 0, 0) + payload


def ipv4(src, dst, l4):
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 1, 0x4000, 64, 6, 0,
                       socket.inet_aton(src), socket.inet_aton(dst)) + l4


class Frames:
    """Frames from the client to the LB's MAC; what each backend receives."""

    def __init__(self, topo):
        self.topo = topo
        self.src, self.dst = mac(topo, topo.client), mac(topo, topo.lb)
        self.out = packet_socket(topo.client, vnet=True)
        self.backends = [packet_socket(b) for b in topo.backends]

    def close(self):
        """Close its packet sockets."""
        for sock in [self.out] + self.backends:
            sock.close()

    def send(self, ethertype, payload, vlan=None):
        """Send one frame (after a vnet header with hdr_len 60: the rest goes into pages);
        its length."""
        tag = struct.pack("!HH", 0x8100, vlan) if vlan is not None else b""
        frame = self.dst + self.src + tag + struct.pack("!H", ethertype) + payload
        # (a frame shorter than 60 bytes is all linear: hdr_len may not exceed it)
        self.out.send(struct.pack("=BBHHHH", 0, 0, min(60, len(frame)), 0, 0, 0) + frame)
        return len(frame)

    def watch(self, markers, until, done=lambda got: False):
        """Frames the backends receive until monotonic <until>, or until done(got):
        {marker: the backends (names) that received a frame holding it}."""
        got = {m: set() for m in markers}
        while not done(got) and time.monotonic() < until:
            r, _, _ = select.select(self.backends, [], [], max(0, until - time.monotonic()))
            for s in r:
                try:
                    while True:
                        frame = s.recv(65535)
                        for m in markers:
                            if m in frame:
                                got[m].add(f"b{self.backends.index(s) + 1}")
                except BlockingIOError:
                    pass
        return got

    def forwarded(self, markers):
        """The backends (names) that received frames holding <markers>: once a frame holding
        each has arrived, however slow the machine (ARRIVE s: only a broken build takes that
        long), and LINGER s more, for a copy of one on another backend."""
        got = self.watch(markers, time.monotonic() + ARRIVE, lambda got: all(got.values()))
        more = self.watch(markers, time.monotonic() + LINGER)
        return set().union(*got.values(), *more.values())

    def received(self, marker, wait=LINGER):
        """The backends (names) that received a frame holding <marker> within <wait> s: for
        a frame that must not arrive."""
        return self.watch([marker], time.monotonic() + wait)[marker]


def stats(topo):
    p = T.sh(HASHLB, "steer", "-i", "eth0", "--stats", "--json", ns=topo.lb)
    return json.loads(p.stdout)


def delta(a, b):
    return {k: b[k] - a[k] for k in b if isinstance(b[k], int) and b[k] != a[k]}


def nonlinear_bytes(topo, f):
    """A 5000-byte IPv4 frame, 60 bytes of it linear: forwarded, and counted whole."""
    marker = b"NONLINEAR-BYTES"
    s0 = stats(topo)
    n = f.send(0x0800, ipv4("10.213.0.7", T.VIP, tcp(41000, marker * 330)))
    got = f.forwarded([marker])
    d = delta(s0, stats(topo))
    check(len(got) == 1 and d.get("packets") == 1,
          f"bytes: the non-linear frame was not forwarded: {got} {d}")
    check(d.get("bytes") == n, f"bytes: a {n}-byte frame counted as {d.get('bytes')} bytes")
    print(f"bytes: a non-linear {n}-byte frame forwarded to {sorted(got)}, counted "
          f"{d.get('bytes')} bytes", flush=True)


def ipv6_ext(topo, f):
    """A 4762-byte IPv6 frame, 60 bytes of it linear, the TCP header behind a destination
    options header of 208 bytes (past the 256 bytes tc pulls first): forwarded, not dropped as
    malformed."""
    marker = b"NONLINEAR-EXT6"
    units = 25  # (25 + 1) * 8 = 208 bytes
    dstopts = bytes([6, units, 1, 8 * units + 4]) + bytes(8 * units + 4)  # a PadN option
    l4 = tcp(42000, marker * 320)
    src, dst = socket.inet_pton(socket.AF_INET6, "fd13::7"), socket.inet_pton(socket.AF_INET6,
                                                                              T.VIP6)
    packet = struct.pack("!IHBB", 6 << 28, len(dstopts) + len(l4), 60, 64) + src + dst + \
        dstopts + l4
    s0 = stats(topo)
    n = f.send(0x86DD, packet)
    got = f.forwarded([marker])
    d = delta(s0, stats(topo))
    check(len(got) == 1 and d.get("packets") == 1 and not d.get("drop_malformed"),
          f"ipv6 extension headers: a non-linear frame not forwarded: {got} {d}")
    print(f"ipv6 extension headers: a non-linear {n}-byte frame, TCP at byte 262: forwarded to "
          f"{sorted(got)}, counters {d}", flush=True)


def vlan(topo, f):
    """A VLAN-tagged TCP frame to the VIP: passed, never forwarded (the bridge and the LB's
    veth carry the tag in the skb's metadata, where only tc sees it). An untagged frame to the
    VIP follows it from the same CPU, so through the same queues, in order: once that one has
    reached a backend, the program has judged the tagged one, and the counters hold it."""
    marker, fence = b"VLAN-TAGGED", b"VLAN-FENCE"
    s0 = stats(topo)
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        f.send(0x0800, ipv4("10.213.0.8", T.VIP, tcp(43000, marker)), vlan=100)
        f.send(0x0800, ipv4("10.213.0.8", T.VIP, tcp(43001, fence)))
    finally:
        os.sched_setaffinity(0, cpus)
    got = f.watch([marker, fence], time.monotonic() + ARRIVE, lambda got: got[fence])
    more = f.watch([marker, fence], time.monotonic() + LINGER)
    tagged = got[marker] | more[marker]
    d = delta(s0, stats(topo))
    check(got[fence] and not tagged and d.get("packets") == 1 and d.get("passed", 0) >= 1,
          f"vlan: a tagged frame to the VIP was forwarded: {sorted(tagged)} {d} (the untagged "
          f"one behind it: {sorted(got[fence]) or 'not forwarded'})")
    print(f"vlan: a tagged frame to the VIP reached {sorted(tagged) or 'no backend'}, the "
          f"untagged one behind it {sorted(got[fence])}, counters {d}", flush=True)


def tcp_opts(sport, payload, opt_len):
    """tcp() with <opt_len> bytes of options (NOPs)."""
    return struct.pack("!HHIIBBHHH", sport, T.VIP_PORT, 1, 1, (5 + opt_len // 4) << 4, 0x10,
                       65535, 0, 0) + b"\x01" * opt_len + payload


def ipv6(src, dst, nh, l4):
    return struct.pack("!IHBB", 6 << 28, len(l4), nh, 64) + \
        socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst) + l4


def malformed(topo, f):
    """Malformed and unusual frames to the VIP, each as the design's table ("What each packet
    gets") says: passed to the LB's stack, dropped under its counter, or forwarded; never sent to
    a backend unless forwarded. steer-packet runs such frames through BPF_PROG_TEST_RUN, which
    refuses to build an skb for tc whose IP header is cut short: here real frames through the
    veths reach tc as they come. A frame to the VIP behind them, from the same CPU, tells when
    they have all been judged (as in vlan)."""
    v4 = ipv4("10.213.0.10", T.VIP, tcp(44100, b"x"))
    v6 = ipv6("fd13::10", T.VIP6, 6, tcp(44101, b"x"))
    frag6 = bytes([6, 0, 0, 0, 0, 0, 0, 1])  # fragment header: offset 0, M 0, id 1
    opt6 = bytes([6, 0, 1, 4, 0, 0, 0, 0])  # destination options: one PadN

    def v4_with(byte, value):
        b = bytearray(v4)
        b[byte] = value
        return bytes(b)

    def v4_len(n):
        return v4[:2] + struct.pack("!H", n) + v4[4:]

    opts = ipv4("10.213.0.11", T.VIP, tcp_opts(44102, b"MALFORMED-OPTIONS", 40))
    opts = bytes([0x4f]) + opts[1:2] + struct.pack("!H", len(opts) + 40) + opts[4:20] + \
        b"\x01" * 40 + opts[20:]  # IHL 15: 40 bytes of IP options (NOPs), TCP 40 bytes of its own
    # (what, ethertype, payload, the counter of its verdict, or the marker of a forwarded one)
    cases = [
        ("ipv4 header cut at 12 bytes", 0x0800, v4[:12], "passed"),
        ("ipv6 header cut at 30 bytes", 0x86DD, v6[:30], "passed"),
        ("ipv4 ihl 4", 0x0800, v4_with(0, 0x44), "passed"),
        ("ipv4 ihl 15 past the frame", 0x0800, v4_with(0, 0x4f)[:40], "passed"),
        ("ipv4 total length below ihl", 0x0800, v4_len(12), "passed"),
        ("ipv4 total length past the frame", 0x0800, v4_len(len(v4) + 20), "drop_malformed"),
        ("tcp header cut at 12 bytes", 0x0800, v4_len(32)[:32], "drop_malformed"),
        ("tcp data offset 4", 0x0800, v4_with(32, 0x40), "drop_malformed"),
        ("ipv4 first fragment (MF)", 0x0800, v4_with(6, 0x20), "drop_fragment"),
        ("ipv4 later fragment (offset 8)", 0x0800, v4_with(7, 0x01), "drop_fragment"),
        ("ipv6 fragment header", 0x86DD,
         ipv6("fd13::10", T.VIP6, 44, frag6 + tcp(44101, b"x")), "drop_fragment"),
        ("ipv6 extension header cut by the frame's end", 0x86DD,
         ipv6("fd13::10", T.VIP6, 60, opt6 + tcp(44101, b"x"))[:40 + 4], "passed"),
        ("ipv6 extension header longer than the frame", 0x86DD,
         ipv6("fd13::10", T.VIP6, 60, bytes([6, 30]) + opt6[2:] + tcp(44101, b"x")),
         "drop_malformed"),
        ("udp to the VIP", 0x0800, v4_with(9, 17), "passed"),
        ("ipv6 tcp to the ipv4 VIP, ipv4-mapped", 0x86DD,
         ipv6("fd13::10", "::ffff:" + T.VIP, 6, tcp(44101, b"x")), "passed"),
        ("ipv4 40 bytes of options, tcp 40, non-linear", 0x0800, opts, "MALFORMED-OPTIONS"),
    ]
    fence = b"MALFORMED-FENCE"
    s0 = stats(topo)
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        for _, ethertype, payload, _ in cases:
            f.send(ethertype, payload)
        f.send(0x0800, ipv4("10.213.0.12", T.VIP, tcp(44103, fence)))
    finally:
        os.sched_setaffinity(0, cpus)
    # every frame the backends receive until the fence's, and LINGER s more
    frames, end, seen = [], time.monotonic() + ARRIVE, False
    while time.monotonic() < end:
        r, _, _ = select.select(f.backends, [], [], max(0, end - time.monotonic()))
        for s in r:
            try:
                while True:
                    frames.append(s.recv(65535))
            except BlockingIOError:
                pass
        if not seen and any(fence in fr for fr in frames):
            seen, end = True, time.monotonic() + LINGER
    d = delta(s0, stats(topo))
    want = {"drop_malformed": 0, "drop_fragment": 0, "passed": 0}
    wrong = []
    for name, _, payload, what in cases:
        # forwarded: the backend's MAC for the LB's (the bridge floods frames to a MAC it
        # has not learnt with the LB's MAC kept)
        got = sum(1 for fr in frames if fr[:6] != f.dst and fr[14:] == payload)
        if what in want:
            want[what] += 1
            if got:
                wrong.append(f"{name}: sent to a backend")
        elif got != 1:
            wrong.append(f"{name}: reached {got} backends, want 1")
    forwarded = len(cases) + 1 - sum(want.values())
    check(seen and not wrong and d.get("packets") == forwarded and
          d.get("drop_malformed", 0) == want["drop_malformed"] and
          d.get("drop_fragment", 0) == want["drop_fragment"] and
          d.get("passed", 0) >= want["passed"],
          f"malformed: {wrong or 'verdicts'}: counters {d}, want packets {forwarded}, {want} "
          f"(passed at least); the frame behind them {'arrived' if seen else 'did not arrive'}")
    print(f"malformed: {len(cases)} frames: {want['passed']} passed, {want['drop_malformed']} "
          f"dropped malformed, {want['drop_fragment']} as fragments, "
          f"{len(cases) - sum(want.values())} forwarded; counters {d}", flush=True)


def tcp_flags(sport, flags, seq=1):
    """A bare TCP segment (no payload, no options) to the VIP port with <flags>."""
    return struct.pack("!HHIIBBHHH", sport, T.VIP_PORT, seq, 0, 5 << 4, flags, 0, 0, 0)


def reset(topo, f):
    """A bare RST to the VIP from a flow conntrack does not hold (as a client sends when a
    backend repeats the FIN of a connection the client no longer has) is steered by the table
    and makes no entry: counted in packets and rst_untracked, not in new_flows nor ct_lost. An
    ACK of the same flow behind it then finds no entry (a new flow, lost) and reaches the same
    backend: the table's. A RST of that now tracked flow goes by its entry, which stays, marked
    closing (ct_closing 1: what a stop's drain ends by): the next ACK is a conntrack hit. Each
    frame is waited for before the next is sent."""
    src, sport = "10.213.0.20", 45000
    frames = [("untracked rst", tcp_flags(sport, 0x04)), ("ack", tcp_flags(sport, 0x10)),
              ("tracked rst", tcp_flags(sport, 0x14, 2)), ("ack again", tcp_flags(sport, 0x10, 3))]
    # the ACK's new entry is one more of the conntrack table's in use ("flows", in --stats
    # since it prints the table's occupancy)
    want = [{"rst_untracked": 1}, {"new_flows": 1, "ct_lost": 1, "flows": 1},
            {"ct_hits": 1, "ct_closing": 1}, {"ct_hits": 1}]
    where = set()
    for (name, l4), w in zip(frames, want):
        packet = ipv4(src, T.VIP, l4)
        s0 = stats(topo)
        w.update(packets=1, bytes=f.send(0x0800, packet))
        got = f.watch([packet], time.monotonic() + ARRIVE, lambda got: got[packet])[packet]
        # Not "passed": it counts every frame the program lets by, the namespaces' own
        # traffic among them (IPv6 neighbour discovery and router solicitations in the
        # first seconds after the links came up); the frame sent here is one of "packets",
        # which a passed frame is not.
        d = {k: v for k, v in delta(s0, stats(topo)).items() if k != "passed"}
        check(len(got) == 1 and d == w, f"reset: {name}: reached {sorted(got)}, counters {d}, "
              f"want {w}")
        where |= got
        print(f"reset: {name}: reached {sorted(got)}, counters {d}", flush=True)
    check(len(where) == 1, f"reset: the flow's frames reached {sorted(where)}, want one backend")


def csum(data):
    """The Internet checksum of <data>."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xffff) + (total >> 16)
    return ~total & 0xffff


def backend_pmtu(topo, name, cport):
    """The path MTU the socket of backend <name> for client port <cport> holds (ss), or None."""
    out = T.sh("ss", "-tinH", "state", "established", f"( dport = :{cport} )",
               ns=topo.backends[int(name[1:]) - 1]).stdout
    m = re.search(r"pmtu:(\d+)", out)
    return int(m.group(1)) if m else None


def pmtu(topo, f):
    """A path-MTU message about a real connection through the kernel path: ICMP fragmentation
    needed (MTU 1400), as a router on the backend's reply path sends it to the VIP, quoting the
    backend's reply (its sequence number the socket's next, as such a router would quote one
    in flight). It reaches the backend that holds the connection, whose socket takes the MTU
    (ss: pmtu 1400, from 9000), counted a conntrack hit. Before, the LB's stack took it and
    the backend's socket kept 9000: its full-size segments would have been lost."""
    topo.serve(os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer.py"))
    sniff = packet_socket(topo.client)
    conn = in_ns(topo.client, lambda: socket.create_connection((T.VIP, T.VIP_PORT), timeout=10))
    try:
        name = conn.makefile().readline().strip()
        cport = conn.getsockname()[1]
        isn = None
        until = time.monotonic() + ARRIVE
        while isn is None and time.monotonic() < until:
            select.select([sniff], [], [], 0.2)
            try:
                while True:
                    fr = sniff.recv(65535)
                    ip = fr[14:]
                    if fr[12:14] == b"\x08\x00" and ip[9] == 6 and \
                            ip[12:16] == socket.inet_aton(T.VIP):
                        th = ip[(ip[0] & 15) * 4:]
                        sport, dport, seq = struct.unpack("!HHI", th[:8])
                        if dport == cport and th[13] & 0x12 == 0x12:  # the SYN-ACK
                            isn = seq
            except BlockingIOError:
                pass
        if not check(isn is not None and name.startswith("b"),
                     f"pmtu: no SYN-ACK seen, or no backend named ({name!r})"):
            return
        before = backend_pmtu(topo, name, cport)
        nxt = (isn + 1 + len(name) + 1) & 0xffffffff  # SYN, then "bN\n"
        quoted = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 1500, 1, 0x4000, 64, 6, 0,
                             socket.inet_aton(T.VIP), socket.inet_aton(T.CLIENT_IP)) + \
            struct.pack("!HHI", T.VIP_PORT, cport, nxt)
        icmp = struct.pack("!BBHHH", 3, 4, 0, 0, 1400) + quoted
        icmp = icmp[:2] + struct.pack("!H", csum(icmp)) + icmp[4:]
        hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 2, 0, 64, 1, 0,
                          socket.inet_aton("10.211.0.254"), socket.inet_aton(T.VIP))
        hdr = hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:]
        s0 = stats(topo)
        f.send(0x0800, hdr + icmp)
        until = time.monotonic() + ARRIVE
        after = before
        while after == before and time.monotonic() < until:
            time.sleep(0.05)
            after = backend_pmtu(topo, name, cport)
        d = {k: v for k, v in delta(s0, stats(topo)).items() if k not in ("passed", "bytes")}
        check(before == 9000 and after == 1400 and d == {"packets": 1, "ct_hits": 1},
              f"pmtu: {name}'s socket pmtu {before} then {after} (want 9000 then 1400), "
              f"counters {d}")
        print(f"pmtu: fragmentation needed about {name}'s connection: its socket's pmtu {before}"
              f" then {after}, counters {d}", flush=True)
    finally:
        conn.close()
        sniff.close()


def body(topo):
    for ns, dev in [(n, "eth0") for n in [topo.client, topo.lb] + topo.backends] + \
            [(topo.sw, f"p{k}") for k in range(2 + len(topo.backends))]:
        T.sh("ip", "link", "set", dev, "mtu", "9000", ns=ns)
    # A plain switch: br_netfilter (if loaded) would check and trim IP packets in the bridge.
    for key in ("iptables", "ip6tables"):
        T.sh("sysctl", "-q", "-w", f"net.bridge.bridge-nf-call-{key}=0", ns=topo.sw,
             check=False)
    args = ["--mode", "tc", "--keep", "-i", "eth0", "--vip", f"{T.VIP}:{T.VIP_PORT}",
            "--vip", f"[{T.VIP6}]:{T.VIP_PORT}"]
    for i, b in enumerate(topo.backends):
        args += ["-b", f"b{i + 1}={topo.backend_ip(i)},mac={topo.mac(b)}"]
    p = T.sh(HASHLB, "steer", *args, ns=topo.lb, check=False)
    if not check(p.returncode == 0, f"hashlb steer --mode tc: {p.stderr}"):
        return
    try:
        f = Frames(topo)
        for name, fn in T.chosen([("bytes", nonlinear_bytes), ("ipv6_ext", ipv6_ext),
                                  ("vlan", vlan), ("malformed", malformed), ("reset", reset),
                                  ("pmtu", pmtu)]):
            fn(topo, f)
    finally:
        T.sh(HASHLB, "steer", "-i", "eth0", "--detach", ns=topo.lb, check=False)


if __name__ == "__main__":
    sys.exit(T.main(body, failures))
