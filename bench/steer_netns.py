#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""TCP throughput through the kernel path, against a direct connection and the
io_uring forwarder (hashlb run), in the network namespaces of the steering test
(tests/steer/topo.py: a client, the load balancer, three backends on a bridge).

The client uploads (client -> backend is the direction that crosses the load
balancer; with direct server return the answers bypass it) over CONNS
connections for SECONDS; the sinks confirm the bytes. Runs are interleaved and
repeated, each figure is the median, each ratio is against "direct" measured
in the same repetition. Native XDP on a veth needs complete checksums from the
client (its TX checksum offload off), so it is compared with a direct run under
that same setting.

    meson test -C build --benchmark --suite bench steer-netns -v
    sudo python3 bench/steer_netns.py --hashlb build/src/cli/hashlb \
        --bpf-obj build/bpf/steer.bpf.o [--reps 3] [--seconds 3]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchenv import count, executable, positive  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "steer"))
import topo as T  # noqa: E402

PEER = os.path.join(HERE, "..", "tests", "steer", "peer.py")
SINK_PORT = 9000
PROXY_PORT = 9001


def blast(topo, host, port, conns, seconds):
    p = T.sh(sys.executable, PEER, "blast", host, str(port), str(conns), str(seconds),
             ns=topo.client, timeout=seconds + 60)
    return float(p.stdout.strip()) * 8 / 1e9  # Gbit/s


def steer_on(topo, hashlb, mode):
    args = [hashlb, "steer", "--keep", "--mode", mode, "-i", "eth0",
            "--vip", f"{T.VIP}:{SINK_PORT}", "--scheme", "maglev"]
    for i, b in enumerate(topo.backends):
        args += ["-b", f"b{i + 1}={topo.backend_ip(i)},mac={topo.mac(b)}"]
    T.sh(*args, ns=topo.lb)


def steer_off(topo, hashlb):
    T.sh(hashlb, "steer", "-i", "eth0", "--detach", ns=topo.lb)


def proxy_config(topo, path):
    with open(path, "w") as f:
        f.write("workers: 1\nadmin: off\nservices:\n"
                f"  - name: bench\n    listen: {T.LB_IP}:{PROXY_PORT}\n"
                "    scheme: maglev\n    hash_key: src-ip\n    backends:\n")
        for i in range(len(topo.backends)):
            f.write(f"      - name: b{i + 1}\n        address: {topo.backend_ip(i)}:{SINK_PORT}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hashlb", default="build/src/cli/hashlb")
    ap.add_argument("--bpf-obj", default="build/bpf/steer.bpf.o")
    ap.add_argument("--reps", type=count, default=3)
    ap.add_argument("--seconds", type=positive, default=3)
    ap.add_argument("--conns", type=count, default=4)
    a = ap.parse_args()
    executable(ap, a.hashlb)
    T.need_root()
    hashlb = os.path.abspath(a.hashlb)
    results = {}

    def measure(name, host, port):
        gbps = blast(topo_ref[0], host, port, a.conns, a.seconds)
        results.setdefault(name, []).append(gbps)
        print(f"  {name:28s} {gbps:6.2f} Gbit/s", flush=True)
        return gbps

    topo_ref = []

    def body(topo):
        topo_ref.append(topo)
        for i, b in enumerate(topo.backends):
            p = topo.spawn(b, [sys.executable, PEER, "sink", str(SINK_PORT)],
                           stdout=subprocess.PIPE, text=True)
            p.stdout.readline()
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d, "bench.yaml")
            proxy_config(topo, cfg)
            proxy = topo.spawn(topo.lb, [hashlb, "run", "-c", cfg],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
            have_proxy = proxy.poll() is None
            ratios = {}
            for rep in range(a.reps):
                print(f"repetition {rep + 1}/{a.reps}", flush=True)
                direct = measure("direct", topo.backend_ip(0), SINK_PORT)
                for mode in ("xdp-generic", "tc"):
                    steer_on(topo, hashlb, mode)
                    g = measure(f"kernel path ({mode})", T.VIP, SINK_PORT)
                    steer_off(topo, hashlb)
                    ratios.setdefault(mode, []).append(g / direct)
                if have_proxy:
                    g = measure("io_uring forwarder", T.LB_IP, PROXY_PORT)
                    ratios.setdefault("io_uring forwarder", []).append(g / direct)
            # Native XDP: the client's checksum offload off, for both sides.
            topo.native_xdp_ready(a.bpf_obj)
            for rep in range(a.reps):
                direct = measure("direct (tx csum off)", topo.backend_ip(0), SINK_PORT)
                steer_on(topo, hashlb, "xdp")
                g = measure("kernel path (xdp native)", T.VIP, SINK_PORT)
                steer_off(topo, hashlb)
                ratios.setdefault("xdp", []).append(g / direct)
        print(f"\nTCP upload throughput, {a.conns} connections x {a.seconds:g} s, "
              f"median of {a.reps} (ratio: against direct in the same repetition)")
        for name, vals in results.items():
            print(f"  {name:28s} {statistics.median(vals):6.2f} Gbit/s")
        for name, vals in ratios.items():
            print(f"  ratio {name:22s} {statistics.median(vals):5.2f}x direct")
        # the run made, its options too (it named the meson benchmark, whose defaults are
        # another run than --reps 9 --seconds 4, README's)
        print(f"reproduce: python3 bench/steer_netns.py --hashlb {a.hashlb} --bpf-obj "
              f"{a.bpf_obj} --reps {a.reps} --seconds {a.seconds:g} --conns {a.conns}")

    T.with_topo(3, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
