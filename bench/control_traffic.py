#!/usr/bin/env python3
"""Data-plane throughput while the control plane rebuilds 10 times a second.

hashlb run with one Maglev service of 1,000 configured backends (M=65537; their names
spread over three HTTP backends), wrk driving keep-alive HTTP through it; alternately
quiet and with `POST /set weight` toggled 10 times a second (a rebuild of the
1,000-backend table, a full Maglev population, and a publish each time). The backends
are nginx servers (`--backend nginx`, the default when nginx is installed) so that the
load balancer, not the backends, is what limits the rate; `--backend python` uses the
project's own tests/tools/http-backend. Prints
requests/s of each phase and their ratio (the target is 1.0: workers never wait for the
control thread).

  meson test -C build --benchmark --suite bench control-traffic -v
  python3 bench/control_traffic.py --hashlb build/src/cli/hashlb [--rounds 3] [--seconds 4]
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import benchenv  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
HTTP_BACKEND = os.path.join(HERE, "..", "tests", "tools", "http-backend")


NGINX = "/usr/sbin/nginx"
NGINX_CONF = """daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx{n}.pid;
error_log {dir}/nginx{n}.err warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body{n};
    proxy_temp_path {dir}/proxy{n};
    fastcgi_temp_path {dir}/fcgi{n};
    uwsgi_temp_path {dir}/uwsgi{n};
    scgi_temp_path {dir}/scgi{n};
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 "h{n}\\n"; }}
    }}
}}
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"backend on port {port} did not start")


def http(admin, method, path):
    host, port = admin.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n".encode())
    while s.recv(65536):
        pass
    s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hashlb", default="build/src/cli/hashlb")
    ap.add_argument("--rounds", type=benchenv.count, default=5)
    ap.add_argument("--seconds", type=benchenv.positive, default=4)
    ap.add_argument("--backend", choices=("nginx", "python"),
                    default="nginx" if os.path.exists(NGINX) else "python")
    a = ap.parse_args()
    benchenv.executable(ap, a.hashlb)
    procs = []
    work = tempfile.mkdtemp(prefix="hashlb-ctltraffic-")
    try:
        addrs = []
        for n in range(3):
            if a.backend == "nginx":
                port = free_port()
                conf = os.path.join(work, f"nginx{n}.conf")
                with open(conf, "w") as f:
                    f.write(NGINX_CONF.format(dir=work, n=n, port=port))
                procs.append(subprocess.Popen([NGINX, "-c", conf, "-p", work]))
                wait_port(port)
                addrs.append(f"127.0.0.1:{port}")
                continue
            p = subprocess.Popen([sys.executable, HTTP_BACKEND, "--name", f"h{n}"],
                                 stdout=subprocess.PIPE, text=True)
            procs.append(p)
            addrs.append(p.stdout.readline().split()[2])
        lines = ["admin: 127.0.0.1:0", "services:", "  - name: bench", "    listen: 127.0.0.1:0",
                 "    scheme: maglev", "    table_size: 65537", "    hash_key: 4-tuple",
                 "    health:", "      enabled: false", "    backends:"]
        for i in range(1000):
            lines += [f"      - name: backend-{i}", f"        address: {addrs[i % 3]}"]
        cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
        cfg.write("\n".join(lines) + "\n")
        cfg.close()
        lb = subprocess.Popen([a.hashlb, "run", "-c", cfg.name], stderr=subprocess.PIPE, text=True)
        procs.append(lb)
        listen = admin = None
        while not (listen and admin):
            line = lb.stderr.readline()
            if not line:
                raise SystemExit("hashlb did not start")
            m = re.search(r"msg=listening .*addr=(\S+)", line)
            listen = m.group(1) if m else listen
            m = re.search(r'msg="admin listening" addr=(\S+)', line)
            admin = m.group(1) if m else admin
        threading.Thread(target=lambda: [None for _ in lb.stderr], daemon=True).start()

        def wrk():
            out = subprocess.run(["wrk", "-t", "1", "-c", "32", "-d", f"{a.seconds:g}s",
                                  f"http://{listen}/"], capture_output=True, text=True).stdout
            m = re.search(r"Requests/sec:\s+([\d.]+)", out)
            return float(m.group(1)) if m else 0.0

        results = {"quiet": [], "10 rebuilds/s": []}
        for r in range(a.rounds):
            results["quiet"].append(wrk())
            stop = threading.Event()
            count = [0]

            def churn():
                w = 1
                while not stop.is_set():
                    t0 = time.time()
                    w = 3 - w
                    http(admin, "POST", f"/set?backend=backend-7&weight={w}")
                    count[0] += 1
                    time.sleep(max(0, 0.1 - (time.time() - t0)))

            t = threading.Thread(target=churn)
            t.start()
            results["10 rebuilds/s"].append(wrk())
            stop.set()
            t.join()
            print(f"round {r + 1}: quiet {results['quiet'][-1]:.0f} req/s, "
                  f"with {count[0] / a.seconds:.1f} rebuilds/s {results['10 rebuilds/s'][-1]:.0f} req/s")
        q = sorted(results["quiet"])[len(results["quiet"]) // 2]
        c = sorted(results["10 rebuilds/s"])[len(results["10 rebuilds/s"]) // 2]
        print(f"median: quiet {q:.0f} req/s, during rebuilds {c:.0f} req/s, ratio {c / q:.2f} "
              f"(1,000 backends, Maglev M=65537, full population per rebuild)")
        print(f"reproduce: python3 bench/control_traffic.py --hashlb {a.hashlb} "
              f"--rounds {a.rounds} --seconds {a.seconds:g} --backend {a.backend}")
        os.unlink(cfg.name)
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
