#!/usr/bin/env python3
"""What kernel steering adds to a /metrics scrape of hashlb run: N services, each on its own
veth in a network namespace this script creates, steered in the kernel, against the same
services steered in userspace; GET /metrics over the admin unix socket R times each. Prints
the median and p90 in us, and the difference a service (the per-CPU counters and the scan of
the conntrack table, on the control thread).

  flock /work/notes/bench.lock python3 bench/steer_scrape.py --hashlb build-bpf/src/cli/hashlb

With --shared, the services are all on one veth (a port each), sharing its program (a table
each); --flows sets their steering_flows (the conntrack table each scrape scans).
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from benchenv import count, executable  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hashlb", required=True)
    ap.add_argument("--services", type=count, default=10)
    ap.add_argument("--scrapes", type=count, default=300)
    ap.add_argument("--shared", action="store_true",
                    help="every service on one interface, sharing its program")
    ap.add_argument("--flows", type=count, help="each service's steering_flows")
    a = ap.parse_args()
    executable(ap, a.hashlb)
    if os.geteuid() != 0:
        print("SKIP: network namespaces and BPF need root")
        return 77
    ns = f"hlbsm-{os.getpid()}"

    def sh(*args):
        return subprocess.run(["ip", "netns", "exec", ns, *args], check=True,
                              capture_output=True, text=True)

    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        sh("ip", "link", "set", "lo", "up")
        for i in range(1 if a.shared else a.services):
            sh("ip", "link", "add", f"d{i}", "type", "veth", "peer", "name", f"p{i}")
            sh("ip", "link", "set", f"d{i}", "up")
            sh("ip", "link", "set", f"p{i}", "up")
            sh("ip", "addr", "add", f"10.250.{i}.1/24", "dev", f"d{i}")
            # a MAC for the backend: the table reaches the kernel
            sh("ip", "neigh", "add", f"10.250.{i}.2", "lladdr", f"02:00:00:00:00:{i:02x}",
               "dev", f"d{i}", "nud", "permanent")
        res = {}
        for mode in ("userspace", "kernel"):
            admin = tempfile.mktemp(prefix="hlbsm-", suffix=".sock")
            y = f"admin: unix:{admin}\nworkers: 1\nservices:\n"
            for i in range(a.services):
                k = 0 if a.shared else i  # the veth, its address, its backend's
                y += (f"  - name: s{i}\n    listen: 10.250.{k}.1:{80 + i if a.shared else 80}\n"
                      f"    steering: {mode}\n    interface: d{k}\n"
                      f"    health: {{enabled: false}}\n"
                      + (f"    steering_flows: {a.flows}\n" if a.flows else "")
                      + f"    backends: [{{name: b{i}, address: '10.250.{k}.2:80'}}]\n")
            cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
            cfg.write(y)
            cfg.close()
            p = subprocess.Popen(["ip", "netns", "exec", ns, a.hashlb, "run", "-c", cfg.name],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                for _ in range(100):
                    if os.path.exists(admin):
                        break
                    time.sleep(0.05)
                time.sleep(1.0)  # every table published

                def get():
                    s = socket.socket(socket.AF_UNIX)
                    s.connect(admin)
                    s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
                    b = b"".join(iter(lambda: s.recv(65536), b""))  # to the endpoint's close
                    s.close()
                    return b

                body = get()
                steered = body.count(b"\nhashlb_service_steer_packets_total{")
                ts = []
                for _ in range(a.scrapes):
                    t = time.perf_counter()
                    get()
                    ts.append((time.perf_counter() - t) * 1e6)
                ts.sort()
                res[mode] = statistics.median(ts)
                print(f"{mode}: {a.services} services ({steered} with kernel counters): "
                      f"median {res[mode]:.0f} us, p90 {ts[int(0.9 * len(ts))]:.0f} us, "
                      f"{len(body)} bytes", flush=True)
            finally:
                p.terminate()
                p.wait()
                os.unlink(cfg.name)
        d = res["kernel"] - res["userspace"]
        print(f"kernel/userspace: {res['kernel'] / res['userspace']:.2f}x, +{d:.0f} us a scrape, "
              f"+{d / a.services:.1f} us a service")
    finally:
        subprocess.run(["ip", "netns", "del", ns])
    return 0


if __name__ == "__main__":
    sys.exit(main())
