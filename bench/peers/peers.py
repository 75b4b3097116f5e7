#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Peer benchmark: hashlb against HAProxy (mode tcp) and nginx stream, plus
"direct" to one backend, on the same backends with the same hash key.

Each load balancer runs pinned to CPU 0 with one worker/thread; wrk and three
nginx HTTP backends run pinned to CPU 1. Runs are interleaved (A B C A B C ...)
and repeated; every figure is a median, every ratio is candidate/peer taken
within the same repetition, then the median of those ratios.

Also measures RSS per idle established connection at 5,000 connections.

All processes are our own, started with generated configs in a temporary
directory, and stopped by PID. Every load run is bounded by wrk -d.
"""

import argparse
import csv
import json
import os
import re
import resource
import selectors
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

NGINX_STREAM_MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so"
SMALL_SIZE = 128
BULK_SIZE = 10 * 1024 * 1024

# name, url path, connections, extra wrk headers, unit
WORKLOADS = {
    "ka50": dict(path="/small", conns=50, headers=[], unit="req",
                 title="keep-alive, 50 connections"),
    "ka200": dict(path="/small", conns=200, headers=[], unit="req",
                  title="keep-alive, 200 connections"),
    "close": dict(path="/small", conns=50, headers=["Connection: close"], unit="req",
                  title="new connection per request, 50 concurrent"),
    "bulk": dict(path="/bulk", conns=4, headers=[], unit="MiB",
                 title="bulk 10 MiB responses, 4 streams"),
}

WRK_LUA = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"duration_us":%d,"requests":%d,"bytes":%d,"err_connect":%d,' ..
    '"err_read":%d,"err_write":%d,"err_status":%d,"err_timeout":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.duration, summary.requests, summary.bytes, e.connect, e.read,
    e.write, e.status, e.timeout, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max))
end
"""


# Niceness of everything the benchmark starts (--nice).
NICE = 0
# The backend servers, whose CPU time each run also reads.
BACKENDS = []


def pinned(cpu):
    """The command prefix that runs a program on <cpu> only (and at NICE)."""
    prefix = ["nice", "-n", str(NICE)] if NICE else []
    return prefix + ["taskset", "-c", str(cpu)]


def renice_group(pid):
    """With autogroup scheduling (Debian's default) a niceness counts only
    inside the process's session; the session's own weight is what competes
    with other sessions. Each process we start has its own session: give
    that session NICE too."""
    if not NICE:
        return
    try:
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(str(NICE))
    except OSError:
        pass  # no autogroup: the plain niceness applies


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- /proc probes

def proc_children(pid):
    """Direct children of <pid> (nginx workers of a master)."""
    kids = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return kids


def cpu_ticks(pids):
    """utime + stime of whole thread groups (all threads, live and exited)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5)
    return total


def rss_kib(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
    return total


def cpu0_busy_ticks():
    """Busy ticks of CPU 0 (everything but idle and iowait): to see how much
    of the load balancer's CPU other processes took during a run."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu0 "):
                v = [int(x) for x in line.split()[1:]]
                return sum(v) - v[3] - v[4]
    return 0


def cpu_stat():
    """Per CPU (and "all") from /proc/stat: (busy ticks, softirq ticks).
    Busy = everything but idle and iowait: it includes softirq work and
    kworkers, which in-kernel forwarding (sockmap) moves out of the LB
    process, so a machine-wide figure is the only fair one for it."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if not line.startswith("cpu"):
                break
            name, *v = line.split()
            v = [int(x) for x in v]
            out["all" if name == "cpu" else int(name[3:])] = (sum(v[:8]) - v[3] - v[4], v[6])
    return out


def kworker_ticks():
    """utime+stime of kworker threads, per CPU they are bound to
    ("kworker/N:..."); unbound ones ("kworker/uN:...") under "u"."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1:raw.rindex(")")]
        if not comm.startswith("kworker/"):
            continue
        cpu = comm[8:].split(":")[0]
        key = "u" if cpu.startswith("u") else cpu
        fields = raw.rsplit(")", 1)[1].split()
        out[key] = out.get(key, 0) + int(fields[11]) + int(fields[12])
    return out


def net_drops():
    """Packets the kernel dropped (softnet backlog full, all CPUs), TCP
    retransmissions and TCP segments sent, machine-wide: a loopback drop
    costs a 200 ms RTO and shows in p99; segments per request show whether
    an LB makes the kernel send more packets (each one runs a receiver's
    input path) than another for the same work."""
    drops = 0
    with open("/proc/net/softnet_stat") as f:
        for line in f:
            drops += int(line.split()[1], 16)
    retrans = out_segs = 0
    with open("/proc/net/snmp") as f:
        lines = [l.split() for l in f if l.startswith("Tcp:")]
    if len(lines) >= 2:
        retrans = int(lines[1][lines[0].index("RetransSegs")])
        out_segs = int(lines[1][lines[0].index("OutSegs")])
    return drops, retrans, out_segs


def wakeup_irqs():
    """Rescheduling and function-call interrupts received by CPU 0 and CPU 1:
    the IPIs one CPU sends to wake a task on the other (on a VM each one
    costs a VM exit). Per request they show how often the LB and its peers
    wake each other."""
    irqs = [0, 0]
    with open("/proc/interrupts") as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] in ("RES:", "CAL:"):
                irqs[0] += int(parts[1])
                irqs[1] += int(parts[2])
    return irqs


def ctx_switches(pids, kinds=("voluntary_ctxt_switches:",)):
    """Context switches of <pids> (and their threads); by default the voluntary ones: how often they slept."""
    n = 0
    for pid in pids:
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith(kinds):
                            n += int(line.split()[1])
        except OSError:
            pass
    return n


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


class RssSampler:
    """Peak RSS of <pids> while a run lasts, sampled twice a second."""

    def __init__(self, pids):
        self.pids = pids
        self.peak = rss_kib(pids)
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop_ev.wait(0.5):
            self.peak = max(self.peak, rss_kib(self.pids))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_ev.set()
        self.thread.join()
        self.peak = max(self.peak, rss_kib(self.pids))


# ---------------------------------------------------------------- processes

def port_free(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def http_get(port, path, timeout=2.0):
    """One HTTP/1.1 request; returns (status, body) or raises OSError."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: peers\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else 0
    return status, body


class Server:
    """A process we started (pinned with taskset), stopped by its PID only."""

    def __init__(self, name, cpu, argv, workdir, port):
        self.name = name
        self.port = port
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.log_f = open(self.log_path, "wb")
        self.proc = subprocess.Popen(pinned(cpu) + argv,
                                     stdin=subprocess.DEVNULL, stdout=self.log_f,
                                     stderr=subprocess.STDOUT, cwd=workdir,
                                     start_new_session=True)
        renice_group(self.proc.pid)

    def pids(self):
        """The process and its children (nginx: master + worker)."""
        return [self.proc.pid] + proc_children(self.proc.pid)

    def wait_ready(self, path="/small", timeout=10.0):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                status, body = http_get(self.port, path)
                if status == 200 and len(body) == SMALL_SIZE:
                    return
                last = f"status {status}, {len(body)} bytes"
            except OSError as e:
                last = str(e)
            time.sleep(0.1)
        self.stop()
        with open(self.log_path, "rb") as f:
            tail = f.read()[-2000:].decode(errors="replace")
        raise RuntimeError(f"{self.name} not serving on port {self.port} ({last}); "
                           f"exit {self.proc.poll()}; log:\n{tail}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # our PID only
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_f.close()


def nginx_common(workdir, name):
    tmp = os.path.join(workdir, f"{name}-tmp")
    os.makedirs(tmp, exist_ok=True)
    return f"""daemon off;
master_process on;
worker_processes 1;
user root;
pid {workdir}/{name}.pid;
error_log {workdir}/{name}.err warn;
worker_rlimit_nofile 20000;
events {{ worker_connections 12000; }}
"""


def nginx_temp_paths(workdir, name):
    tmp = os.path.join(workdir, f"{name}-tmp")
    return "".join(f"  {k}_temp_path {tmp}/{k};\n"
                   for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))


def start_backend(workdir, idx, port, www):
    name = f"backend{idx}"
    conf = nginx_common(workdir, name) + f"""http {{
  access_log off;
{nginx_temp_paths(workdir, name)}  default_type application/octet-stream;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    root {www};
  }}
}}
"""
    path = os.path.join(workdir, f"{name}.conf")
    with open(path, "w") as f:
        f.write(conf)
    return Server(name, 1, ["nginx", "-e", f"{workdir}/{name}.err", "-p", workdir, "-c", path],
                  workdir, port)


def start_haproxy(workdir, port, backends, splice=False):
    """HAProxy in mode tcp; <splice>: with `option splice-request` and `splice-response` (HAProxy's kernel splicing
    of bulk streams, the "haproxy-splice" LB)."""
    name = "haproxy-splice" if splice else "haproxy"
    servers = "".join(f"  server b{i} 127.0.0.1:{p}\n" for i, p in enumerate(backends, 1))
    option = "  option splice-request\n  option splice-response\n" if splice else ""
    # each pipe takes 2 fds: HAProxy refuses to start if maxconn's fds plus its pipes
    # (maxconn/4 by default) exceed the 20,000-fd limit
    pipes = "  maxpipes 512\n" if splice else ""
    conf = f"""global
  nbthread 1
  maxconn 9000
{pipes}
defaults
  mode tcp
  timeout connect 5s
  timeout client 300s
  timeout server 300s
{option}
frontend fe
  bind 127.0.0.1:{port}
  default_backend be

backend be
  balance source
  hash-type consistent
{servers}"""
    path = os.path.join(workdir, f"{name}.cfg")
    with open(path, "w") as f:
        f.write(conf)
    return Server(name, 0, ["haproxy", "-db", "-f", path], workdir, port)


def start_nginx_stream(workdir, port, backends):
    name = "nginx"
    servers = "".join(f"    server 127.0.0.1:{p};\n" for p in backends)
    conf = f"load_module {NGINX_STREAM_MODULE};\n" + nginx_common(workdir, name) + f"""stream {{
  upstream be {{
    hash $remote_addr consistent;
{servers}  }}
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    proxy_pass be;
    proxy_timeout 300s;
  }}
}}
"""
    path = os.path.join(workdir, f"{name}.conf")
    with open(path, "w") as f:
        f.write(conf)
    return Server(name, 0, ["nginx", "-e", f"{workdir}/{name}.err", "-p", workdir, "-c", path],
                  workdir, port)


def start_hashlb(workdir, port, backends, binary, admin_port, name="hashlb", extra=()):
    entries = "".join(f"      - name: b{i}\n        address: 127.0.0.1:{p}\n"
                      for i, p in enumerate(backends, 1))
    conf = f"""# generated by bench/peers/peers.py
workers: 1
admin: 127.0.0.1:{admin_port}
services:
  - name: peers
    listen: 127.0.0.1:{port}
    scheme: maglev
    hash_key: src-ip
    timeouts:
      idle: 5m
    max_connections: 9000
    health:
      enabled: false            # like the peers' configs: no active checks
    backends:
{entries}"""
    path = os.path.join(workdir, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(conf)
    return Server(name, 0, [binary, "run", "-c", path, "--workers", "1"] + list(extra),
                  workdir, port)


def start_bare(workdir, port, backends, binary):
    """bench/peers/bare.c: the least a user-space forwarder does (one thread, epoll, recv and
    send straight through, a backend by source address): the yardstick, not a peer."""
    return Server("bare", 0, [binary, str(port)] + [str(p) for p in backends], workdir, port)


def find_bare(explicit):
    for cand in (explicit, os.path.join(REPO, "build/bench/peers/hashlb-bench-bare")):
        if cand and os.access(cand, os.X_OK):
            return os.path.abspath(cand)
    return None


def find_hashlb(explicit):
    if explicit:
        return os.path.abspath(explicit) if os.access(explicit, os.X_OK) else None
    for cand in (os.environ.get("HASHLB"), os.path.join(REPO, "build/src/cli/hashlb"),
                 shutil.which("hashlb")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


# ---------------------------------------------------------------- load runs

def run_wrk(port, wl, duration, lua, timeout_s):
    argv = pinned(1) + ["wrk", "-t1", f"-c{wl['conns']}", f"-d{duration}s",
            "--latency", f"--timeout={timeout_s}s", "-s", lua]
    for h in wl["headers"]:
        argv += ["-H", h]
    argv.append(f"http://127.0.0.1:{port}{wl['path']}")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    renice_group(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=duration + 60)
    finally:
        if proc.poll() is None:
            proc.kill()  # our wrk, by PID
            proc.wait()
    for line in stdout.splitlines():
        if line.startswith("WRKJSON "):
            return json.loads(line[8:]), stdout
    raise RuntimeError(f"wrk gave no summary (exit {proc.returncode}): "
                       f"{stdout[-1000:]} {stderr[-1000:]}")


def measure(target, wl_name, duration, lua, rep):
    wl = WORKLOADS[wl_name]
    pids = target.pids() if target.is_lb else []
    load0 = loadavg()
    d0 = net_drops()
    be_pids = [p for b in BACKENDS for p in b.pids()]
    t0, c0, b0 = cpu_ticks(pids), cpu0_busy_ticks(), cpu_ticks(be_pids)
    i0, x0 = wakeup_irqs(), ctx_switches(pids)
    y0 = ctx_switches(be_pids, ("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"))
    k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    m0, q0 = cpu_stat(), kworker_ticks()
    with RssSampler(pids) as rss:
        w, raw = run_wrk(target.port, wl, duration, lua, 5 if wl_name == "bulk" else 2)
    m1, q1 = cpu_stat(), kworker_ticks()
    t1, c1, b1 = cpu_ticks(pids), cpu0_busy_ticks(), cpu_ticks(be_pids)
    i1, x1 = wakeup_irqs(), ctx_switches(pids)
    y1 = ctx_switches(be_pids, ("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"))
    k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    d1 = net_drops()
    # wrk is the only child reaped during the run: its CPU is the delta.
    wrk_cpu = (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)
    secs = w["duration_us"] / 1e6
    lb_cpu = (t1 - t0) / CLK_TCK if target.is_lb else None
    errors = sum(w[k] for k in ("err_connect", "err_read", "err_write", "err_status",
                                "err_timeout"))
    r = dict(rep=rep, workload=wl_name, lb=target.name, seconds=round(secs, 3),
             requests=w["requests"], bytes=w["bytes"], errors=errors,
             err_status=w["err_status"], err_timeout=w["err_timeout"],
             req_s=w["requests"] / secs, mib_s=w["bytes"] / secs / 2**20,
             p50_ms=w["p50_us"] / 1000, p99_ms=w["p99_us"] / 1000,
             lb_cpu_s=lb_cpu,
             cpu0_other_s=((c1 - c0) - (t1 - t0)) / CLK_TCK,
             rss_kib=rss.peak if target.is_lb else None, loadavg=load0,
             net_drops=d1[0] - d0[0], tcp_retrans=d1[1] - d0[1],
             segs_per_req=(d1[2] - d0[2]) / max(1, w["requests"]),
             backends_cpu_s=(b1 - b0) / CLK_TCK, wrk_cpu_s=wrk_cpu,
             ipi0_per_req=(i1[0] - i0[0]) / max(1, w["requests"]),
             ipi1_per_req=(i1[1] - i0[1]) / max(1, w["requests"]),
             lb_sleeps_per_req=(x1 - x0) / max(1, w["requests"]) if target.is_lb else None,
             be_csw_per_req=(y1 - y0) / max(1, w["requests"]),
             wrk_csw_per_req=(k1.ru_nvcsw + k1.ru_nivcsw - k0.ru_nvcsw - k0.ru_nivcsw)
             / max(1, w["requests"]))
    # Everything this request path cost: LB, backends and wrk. On loopback
    # the receiver's softirq work runs on the sender's CPU and is billed to
    # the sender, so an LB can shift work to its peers; this total cannot.
    r["total_cpu_s"] = (lb_cpu or 0) + r["backends_cpu_s"] + wrk_cpu
    # Machine-wide: every CPU's busy time, kworkers and softirq included.
    r["machine_cpu_s"] = (m1["all"][0] - m0["all"][0]) / CLK_TCK
    for cpu in (0, 1):
        r[f"cpu{cpu}_busy_s"] = (m1[cpu][0] - m0[cpu][0]) / CLK_TCK
        r[f"cpu{cpu}_softirq_s"] = (m1[cpu][1] - m0[cpu][1]) / CLK_TCK
        r[f"cpu{cpu}_kworker_s"] = (q1.get(str(cpu), 0) - q0.get(str(cpu), 0)) / CLK_TCK
    r["unbound_kworker_s"] = (q1.get("u", 0) - q0.get("u", 0)) / CLK_TCK
    amount = r["requests"] if wl["unit"] == "req" else r["bytes"] / 2**20
    r["rate"] = r["req_s"] if wl["unit"] == "req" else r["mib_s"]
    r["per_cpu_s"] = amount / lb_cpu if lb_cpu else None
    r["per_total_cpu_s"] = amount / r["total_cpu_s"] if r["total_cpu_s"] else None
    r["per_machine_cpu_s"] = amount / r["machine_cpu_s"] if r["machine_cpu_s"] else None
    return r


class Target:
    def __init__(self, name, port, server=None):
        self.name = name
        self.port = port
        self.server = server
        self.is_lb = server is not None

    def pids(self):
        return self.server.pids()


# ---------------------------------------------------------------- profiles

PERF_STAT_EVENTS = "task-clock,context-switches,cpu-migrations,page-faults,raw_syscalls:sys_enter"


def perf_stop(proc):
    proc.send_signal(signal.SIGINT)  # perf writes its output on SIGINT
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def profile(target, wl, duration, lua, out_dir):
    """One extra run of <wl> under perf stat (counts per request), one under
    perf record (where the CPU goes); neither is counted in the results."""
    pids = ",".join(str(p) for p in target.pids())
    base = os.path.join(out_dir, f"perf-{target.name}-{wl}")
    stat = subprocess.Popen(pinned(1) + ["perf", "stat", "-e", PERF_STAT_EVENTS, "-p", pids,
                                         "-x", ",", "-o", base + ".stat"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    r = measure(target, wl, duration, lua, -2)
    perf_stop(stat)
    counts = {}
    with open(base + ".stat") as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) > 2 and parts[0] and parts[0][0].isdigit():
                counts[parts[2]] = float(parts[0])
    amount = r["requests"] if WORKLOADS[wl]["unit"] == "req" else r["bytes"] / 2**20
    per = {k: v / amount for k, v in counts.items() if amount}
    rec = subprocess.Popen(pinned(1) + ["perf", "record", "-e", "cpu-clock", "-F", "999", "-g",
                                        "-p", pids, "-o", base + ".data"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    measure(target, wl, duration, lua, -2)
    perf_stop(rec)
    rep = subprocess.run(["perf", "report", "-i", base + ".data", "--stdio", "--no-children",
                          "-g", "none", "--sort", "dso,symbol", "--percent-limit", "0.7"],
                         capture_output=True, text=True, timeout=300).stdout
    top = [re.sub(r"(\s+-)+$", "", line.rstrip()) for line in rep.splitlines()
           if line.strip() and not line.startswith("#")]
    with open(base + ".txt", "w") as f:
        f.write(rep)
    return dict(lb=target.name, workload=wl, per_unit=per, unit=WORKLOADS[wl]["unit"],
                rate=r["rate"], top=top[:25])


# ---------------------------------------------------------------- idle RSS

def established_to(ports):
    """Established TCP sockets whose peer is one of <ports> on loopback."""
    flt = " or ".join(f"dport = :{p}" for p in ports)
    out = subprocess.run(["ss", "-Htn", "state", "established", f"( {flt} )"],
                         capture_output=True, text=True, timeout=30).stdout
    return sum(1 for line in out.splitlines() if line.strip())


def idle_rss(target, backends, n, settle):
    """RSS growth of the load balancer per idle established connection, with
    <n> client connections (and <n> backend connections) open: once just
    connected, and again after one request/response on each connection."""
    pids = target.pids()
    time.sleep(settle)
    base = rss_kib(pids)
    before_be = established_to(backends)
    socks = []
    res = dict(lb=target.name, conns=n, base_kib=base)
    try:
        sel = selectors.DefaultSelector()
        batch = 250
        for start in range(0, n, batch):
            pending = set()
            for _ in range(min(batch, n - start)):
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", target.port))
                socks.append(s)
                pending.add(s)
                sel.register(s, selectors.EVENT_WRITE)
            deadline = time.monotonic() + 10
            while pending and time.monotonic() < deadline:
                for key, _ in sel.select(timeout=0.5):
                    s = key.fileobj
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise RuntimeError(f"connect: {os.strerror(err)}")
                    sel.unregister(s)
                    pending.discard(s)
            if pending:
                raise RuntimeError(f"{len(pending)} connections still pending after 10 s")
        sel.close()
        deadline = time.monotonic() + 20
        while established_to(backends) - before_be < n and time.monotonic() < deadline:
            time.sleep(0.5)
        res["backend_conns"] = established_to(backends) - before_be
        time.sleep(settle)
        res["connected_kib"] = rss_kib(pids)
        # One small exchange on each, then idle again.
        req = b"GET /small HTTP/1.1\r\nHost: peers\r\n\r\n"
        for start in range(0, n, batch):
            group = socks[start:start + batch]
            for s in group:
                s.setblocking(True)
                s.settimeout(10)
                s.sendall(req)
            for s in group:
                data = b""
                while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < SMALL_SIZE:
                    chunk = s.recv(4096)
                    if not chunk:
                        raise RuntimeError("connection closed during the exchange")
                    data += chunk
        time.sleep(settle)
        res["exchanged_kib"] = rss_kib(pids)
    finally:
        for s in socks:
            s.close()
    res["per_conn_connected_kib"] = (res["connected_kib"] - base) / n
    res["per_conn_exchanged_kib"] = (res["exchanged_kib"] - base) / n
    time.sleep(settle)
    res["after_close_kib"] = rss_kib(pids)
    return res


# ---------------------------------------------------------------- report

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread_pct(xs):
    xs = [x for x in xs if x is not None]
    if len(xs) < 2 or not statistics.median(xs):
        return None
    return 100.0 * (max(xs) - min(xs)) / statistics.median(xs)


def fmt(x, nd=0):
    if x is None:
        return "-"
    if nd == 0:
        return f"{x:,.0f}"
    return f"{x:,.{nd}f}"


def pct(x):
    return "-" if x is None else f"{x:.0f}%"


def summarize(runs, lbs, workloads, cand):
    """Per workload and LB: medians and spread; ratios cand/peer per repetition."""
    summ = {}
    for wl in workloads:
        summ[wl] = {}
        for lb in lbs:
            rs = [r for r in runs if r["workload"] == wl and r["lb"] == lb]
            if not rs:
                continue
            summ[wl][lb] = dict(
                n=len(rs), rate=med([r["rate"] for r in rs]),
                rate_spread_pct=spread_pct([r["rate"] for r in rs]),
                rate_min=min(r["rate"] for r in rs), rate_max=max(r["rate"] for r in rs),
                p50_ms=med([r["p50_ms"] for r in rs]), p99_ms=med([r["p99_ms"] for r in rs]),
                lb_cpu_s=med([r["lb_cpu_s"] for r in rs]),
                per_cpu_s=med([r["per_cpu_s"] for r in rs]),
                per_cpu_spread_pct=spread_pct([r["per_cpu_s"] for r in rs]),
                per_total_cpu_s=med([r["per_total_cpu_s"] for r in rs]),
                rss_kib=med([r["rss_kib"] for r in rs]),
                errors=sum(r["errors"] for r in rs),
                cpu0_other_s=med([r["cpu0_other_s"] for r in rs]),
                machine_cpu_s=med([r["machine_cpu_s"] for r in rs]),
                per_machine_cpu_s=med([r["per_machine_cpu_s"] for r in rs]),
                **{k: med([r[k] for r in rs]) for k in (
                    "cpu0_busy_s", "cpu1_busy_s", "cpu0_softirq_s", "cpu1_softirq_s",
                    "cpu0_kworker_s", "cpu1_kworker_s", "unbound_kworker_s")})
        if cand and cand in summ[wl]:
            for lb in lbs:
                if lb == cand or lb not in summ[wl]:
                    continue
                ratios = {}
                for key in ("rate", "p50_ms", "p99_ms", "lb_cpu_s", "per_cpu_s", "rss_kib",
                            "per_total_cpu_s", "per_machine_cpu_s"):
                    per_rep = []
                    for c in (r for r in runs if r["workload"] == wl and r["lb"] == cand):
                        p = [r for r in runs if r["workload"] == wl and r["lb"] == lb
                             and r["rep"] == c["rep"]]
                        if p and c[key] is not None and p[0][key]:
                            per_rep.append(c[key] / p[0][key])
                    ratios[key] = med(per_rep)
                summ[wl][lb]["ratio"] = ratios
    return summ


def markdown(summ, idle, lbs, workloads, cand, meta):
    out = []
    out.append(f"Machine: {meta['cpus']} CPUs; load balancers on CPU 0 (one worker/thread), "
               f"wrk and 3 nginx backends on CPU 1. {meta['reps']} interleaved repetitions "
               f"of {meta['duration']} s per run; medians, spread = (max-min)/median of the "
               f"rate; \"CPU 0 others\" = CPU seconds other processes took on the LB's CPU "
               f"during a run; \"per total CPU-s\" divides by the CPU time of the LB, the "
               f"backends and wrk together (loopback bills a receiver's softirq work to "
               f"the sender, so this one cannot be moved around). Niceness {meta['nice']}. "
               f"Load average at start: "
               f"{meta['loadavg']:.2f}.")
    out.append("")
    for wl in workloads:
        if wl not in summ:
            continue
        unit = WORKLOADS[wl]["unit"]
        rate_h = "req/s" if unit == "req" else "MiB/s"
        per_h = "req per LB CPU-s" if unit == "req" else "MiB per LB CPU-s"
        out.append(f"### {wl}: {WORKLOADS[wl]['title']}")
        out.append("")
        dec = 0 if unit == "req" else 1
        has_ratio = cand and cand in summ[wl]

        def table(cols, row, ratio_cols, ratio_row):
            """A markdown table, a line per LB: <row>(summary) and, for the
            candidate's ratios, <ratio_row>(ratios) (None: the candidate itself)."""
            hdr = "| LB | " + " | ".join(cols) + " |"
            if has_ratio:
                hdr += f" {cand}/LB: " + " | ".join(ratio_cols) + " |"
            out.append(hdr)
            out.append("|" + "---|" * (hdr.count("|") - 1))
            for lb in lbs:
                s = summ[wl].get(lb)
                if not s:
                    continue
                line = f"| {lb} | " + " | ".join(row(s)) + " |"
                if has_ratio:
                    ra = s.get("ratio")
                    line += " " + " | ".join(ratio_row(ra) if ra else [""] * len(ratio_cols)) + " |"
                out.append(line)
            out.append("")

        table([rate_h, "spread", "p50 ms", "p99 ms", "LB CPU s", per_h, "per total CPU-s",
               "RSS MiB", "errors", "CPU 0 others s"],
              lambda s: [fmt(s["rate"], dec), pct(s["rate_spread_pct"]), fmt(s["p50_ms"], 2),
                         fmt(s["p99_ms"], 2), fmt(s["lb_cpu_s"], 2), fmt(s["per_cpu_s"], dec),
                         fmt(s["per_total_cpu_s"], dec),
                         fmt(s["rss_kib"] / 1024 if s["rss_kib"] else None, 1),
                         str(s["errors"]), fmt(s["cpu0_other_s"], 1)],
              [rate_h, "per LB CPU-s", "per total CPU-s", "p99", "RSS"],
              lambda ra: [fmt(ra["rate"], 2), fmt(ra["per_cpu_s"], 2),
                          fmt(ra["per_total_cpu_s"], 2), fmt(ra["p99_ms"], 2),
                          fmt(ra["rss_kib"], 2)])
        out.append(f"Machine-wide CPU (all CPUs' busy time from /proc/stat: everything but "
                   f"idle and iowait, so softirq and kworkers count), {wl}:")
        out.append("")
        table([rate_h, "machine CPU s", "CPU 0 busy s", "CPU 1 busy s", "softirq s CPU 0/1",
               "kworker s CPU 0/1/unbound", f"{'req' if unit == 'req' else 'MiB'} per machine CPU-s"],
              lambda s: [fmt(s["rate"], dec), fmt(s["machine_cpu_s"], 2),
                         fmt(s["cpu0_busy_s"], 2), fmt(s["cpu1_busy_s"], 2),
                         f"{fmt(s['cpu0_softirq_s'], 2)}/{fmt(s['cpu1_softirq_s'], 2)}",
                         f"{fmt(s['cpu0_kworker_s'], 2)}/{fmt(s['cpu1_kworker_s'], 2)}/"
                         f"{fmt(s['unbound_kworker_s'], 2)}",
                         fmt(s["per_machine_cpu_s"], dec)],
              ["per machine CPU-s"], lambda ra: [fmt(ra["per_machine_cpu_s"], 2)])
    if idle:
        out.append(f"### RSS per idle established connection ({idle[0]['conns']} connections)")
        out.append("")
        out.append("| LB | base RSS MiB | KiB/conn, connected | KiB/conn, after one request | "
                   "backend conns |")
        out.append("|---|---|---|---|---|")
        for r in idle:
            if "error" in r:
                out.append(f"| {r['lb']} | - | failed: {r['error']} | | |")
                continue
            out.append(f"| {r['lb']} | {r['base_kib'] / 1024:.1f} | "
                       f"{r['per_conn_connected_kib']:.2f} | {r['per_conn_exchanged_kib']:.2f} | "
                       f"{r['backend_conns']} |")
        out.append("")
    return "\n".join(out)


def profile_markdown(profiles):
    out = ["### Profiles (extra runs, not in the figures above)", "",
           "| LB | workload | rate | syscalls | context switches | task-clock ms | "
           "(per request, or per MiB for bulk) |", "|---|---|---|---|---|---|---|"]
    for p in profiles:
        u = p["per_unit"]
        out.append(f"| {p['lb']} | {p['workload']} | {fmt(p['rate'], 0)} | "
                   f"{fmt(u.get('raw_syscalls:sys_enter'), 2)} | "
                   f"{fmt(u.get('context-switches'), 3)} | {fmt(u.get('task-clock'), 4)} | |")
    for p in profiles:
        out += ["", f"{p['lb']} {p['workload']}, top symbols (perf record -e cpu-clock):", "```"]
        out += p["top"][:15]
        out.append("```")
    return "\n".join(out) + "\n"


def targets(summ, idle, cand):
    """The targets of issue #4, checked against the medians of this run."""
    lines = []
    peers = ("haproxy", "nginx")

    def check(ok, text):
        lines.append(f"- [{'x' if ok else ' '}] {text}")

    for wl in ("ka50", "ka200", "close"):
        s = summ.get(wl, {})
        if cand not in s:
            continue
        for peer, need in (("haproxy", 1.5), ("nginx", 1.3)):
            if peer in s and "ratio" in s[peer]:
                v = s[peer]["ratio"]["per_cpu_s"]
                check(v is not None and v >= need,
                      f"{wl}: req per LB CPU-s {cand}/{peer} = {fmt(v, 2)} (target >= {need})")
        present = [p for p in peers if p in s and p != cand]
        if present:
            best = max(s[p]["rate"] for p in present)
            check(s[cand]["rate"] >= best,
                  f"{wl}: req/s {fmt(s[cand]['rate'])} vs best peer {fmt(best)} (target >=)")
            bestp99 = min(s[p]["p99_ms"] for p in present)
            check(s[cand]["p99_ms"] <= bestp99,
                  f"{wl}: p99 {fmt(s[cand]['p99_ms'], 2)} ms vs best peer "
                  f"{fmt(bestp99, 2)} ms (target <=)")
    s = summ.get("bulk", {})
    if cand in s:
        present = [p for p in peers + ("haproxy-splice",)
                   if p in s and p != cand and s[p]["per_cpu_s"]]
        if present:
            best = max(present, key=lambda p: s[p]["per_cpu_s"])
            v = s[best].get("ratio", {}).get("per_cpu_s")
            check(v is not None and v >= 1.2,
                  f"bulk: MiB per LB CPU-s {cand}/{best} (best peer) = {fmt(v, 2)} (target >= 1.2)")
    for r in idle or []:
        if r["lb"] == cand and "error" not in r:
            v = r["per_conn_exchanged_kib"]
            check(v <= 16, f"idle: {fmt(v, 1)} KiB per established idle connection "
                           f"(after one request; target <= 16)")
    return "\n".join(lines)


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="smoke check: 1 repetition, 2 s runs, 1,000 idle connections")
    ap.add_argument("--reps", type=int, default=5, help="repetitions, from 1 (default 5)")
    ap.add_argument("--duration", type=int, default=10, help="seconds per run, from 1 (default 10)")
    ap.add_argument("--lbs", default="hashlb,haproxy,nginx,direct",
                    help="comma list of hashlb, haproxy, nginx, direct, and, not in the "
                         "default list, haproxy-splice (HAProxy splicing both ways) and bare "
                         "(bench/peers/bare.c: the least a user-space forwarder does, a "
                         "yardstick)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="comma list of " + ", ".join(WORKLOADS))
    ap.add_argument("--hashlb", help="path of the hashlb binary (default: build/src/cli/hashlb, "
                    "$HASHLB, PATH); hashlb is skipped when none of those is found, a path "
                    "given that it cannot run is refused")
    ap.add_argument("--bare", help="path of the bare forwarder (default: "
                    "build/bench/peers/hashlb-bench-bare; a path given that it cannot run "
                    "is refused)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                    help="one more LB NAME: hashlb with extra run ARGS (e.g. "
                    "'big=--buffer-size 65536'), or another hashlb binary when ARGS starts "
                    "with its path (e.g. 'patched=/tmp/hashlb --buffer-size 65536'; a path it "
                    "cannot run is refused); repeatable, added to --lbs")
    ap.add_argument("--candidate", default="hashlb",
                    help="the LB whose ratios to the others are reported (default hashlb)")
    ap.add_argument("--idle-conns", type=int, default=5000,
                    help="idle connections for the RSS measurement (0 = skip; default 5000)")
    ap.add_argument("--port-base", type=int, default=25000,
                    help="loopback ports base+1 .. base+40 are used: backends, LBs, "
                    "admin endpoints, variants (default 25000)")
    ap.add_argument("--nice", type=int, default=0,
                    help="run LBs, backends and wrk at this niceness, e.g. -10 on a machine "
                    "shared with builds (default 0)")
    ap.add_argument("--profile", default="",
                    help="comma list of LBs to profile after the runs: one run per workload "
                    "under perf stat (syscalls, context switches per request), one under perf "
                    "record (top symbols); files perf-LB-WORKLOAD.* in the output directory")
    ap.add_argument("--out", help="directory for runs.csv, runs.json, summary.json, summary.md "
                    "(default: a new temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (configs, logs)")
    argv = sys.argv[1:] + os.environ.get("HASHLB_PEERS_ARGS", "").split()
    args = ap.parse_args(argv)

    global NICE
    NICE = args.nice

    def interrupted(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    # SIGTERM (meson's timeout) and SIGINT, even when started in the background
    # with SIGINT ignored, unwind through the finally below that stops what we
    # started.
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    if args.quick:
        args.reps, args.duration = 1, 2
        args.idle_conns = min(args.idle_conns, 1000)
    lbs = [x for x in args.lbs.split(",") if x]
    workloads = [x for x in args.workloads.split(",") if x]
    args.profile = [x for x in args.profile.split(",") if x]
    for w in workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w}")
    # Judged before anything starts: each of these was taken, and the run started backends and
    # load balancers before it failed (an unknown LB), measured nothing (0 repetitions or
    # seconds), or went on without hashlb (a --hashlb it cannot run).
    for opt, value, low, high in (("--reps", args.reps, 1, None),
                                  ("--duration", args.duration, 1, None),
                                  ("--idle-conns", args.idle_conns, 0, None),
                                  ("--port-base", args.port_base, 1, 65535 - 40),
                                  ("--nice", args.nice, -20, 19)):
        if value < low or (high is not None and value > high):
            ap.error(f"argument {opt}: " + (f"{low} to {high}" if high is not None
                                            else f"a whole number from {low}")
                     + f", not {value}")
    known = ["hashlb", "haproxy", "nginx", "direct", "haproxy-splice", "bare"]
    variant_names = [spec.partition("=")[0] for spec in args.variant]
    named = known + variant_names
    for opt, lb in ([("--lbs", lb) for lb in lbs] + [("--profile", lb) for lb in args.profile]
                    + [("--candidate", args.candidate)]):
        if lb not in named:
            ap.error(f"argument {opt}: unknown load balancer {lb!r} ({', '.join(named)})")
    lbs = [lb for lb in lbs if lb not in variant_names]  # each variant is added below, once
    for opt, path in (("--hashlb", args.hashlb), ("--bare", args.bare)):
        if path and not (os.path.isfile(path) and os.access(path, os.X_OK)):
            ap.error(f"argument {opt}: no executable file {path!r}")
    # (it was found missing once the backends and the LBs listed before it had started)
    if "bare" in lbs and not find_bare(args.bare):
        ap.error("--lbs bare: no bare forwarder (build it: ninja -C build, or --bare)")
    # A --variant whose ARGS start with a path names its binary (hashlb run takes no word that
    # is not an option): one it cannot run was passed to the default hashlb as an argument, and
    # the variant was left out once everything had started, the run going on without it.
    variants = {}
    for spec in args.variant:
        name, sep, rest = spec.partition("=")
        if not sep or not name or name in known or name in variants or len(variants) >= 8:
            ap.error(f"--variant {spec!r}: NAME=ARGS, a new name, at most 8")
        words = shlex.split(rest)
        if words and not words[0].startswith("-"):
            path = words.pop(0)
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                ap.error(f"argument --variant: {name}: no executable file {path!r}")
            binary = os.path.abspath(path)
        else:
            binary = find_hashlb(args.hashlb)
        if not binary:
            ap.error(f"--variant {name}: no hashlb binary")
        variants[name] = (binary, words)
    if args.profile and not shutil.which("perf"):
        ap.error("--profile needs perf (linux-perf)")
    for tool in ("nginx", "haproxy", "wrk", "taskset", "ss"):
        if not shutil.which(tool):
            log(f"peers: {tool} not found (scripts/setup.sh installs it); skipping")
            return 77
    if os.cpu_count() < 2:
        log("peers: needs 2 CPUs to pin the load balancer apart from the load; skipping")
        return 77
    hashlb_bin = None
    if "hashlb" in lbs:
        hashlb_bin = find_hashlb(args.hashlb)
        if not hashlb_bin:
            log("peers: no hashlb binary found; measuring the peers only")
            lbs.remove("hashlb")
    for name in variants:
        lbs.append(name)
    cand = args.candidate if args.candidate in lbs else None
    bare_bin = find_bare(args.bare) if "bare" in lbs else None

    pb = args.port_base
    be_ports = [pb + 1, pb + 2, pb + 3]
    lb_ports = {"haproxy": pb + 10, "nginx": pb + 11, "hashlb": pb + 12, "haproxy-splice": pb + 14,
                "bare": pb + 15}
    admin_ports = {"hashlb": pb + 13}
    for i, name in enumerate(variants):
        lb_ports[name] = pb + 20 + i
        admin_ports[name] = pb + 30 + i
    busy = [p for p in be_ports + list(lb_ports.values()) + list(admin_ports.values())
            if not port_free(p)]
    if busy:
        log(f"peers: ports {busy} busy (another run?); use --port-base")
        return 1

    os.sched_setaffinity(0, {1})  # the harness itself stays off the LB's CPU
    workdir = tempfile.mkdtemp(prefix="hashlb-peers-")
    out_dir = args.out or tempfile.mkdtemp(prefix="hashlb-peers-out-")
    os.makedirs(out_dir, exist_ok=True)
    www = os.path.join(workdir, "www")
    os.makedirs(www)
    with open(os.path.join(www, "small"), "wb") as f:
        f.write(b"x" * (SMALL_SIZE - 1) + b"\n")
    with open(os.path.join(www, "bulk"), "wb") as f:
        f.write(os.urandom(BULK_SIZE))
    lua = os.path.join(workdir, "summary.lua")
    with open(lua, "w") as f:
        f.write(WRK_LUA)

    servers = []
    targets_ = []
    runs, idle, profiles = [], [], []
    try:
        for i, p in enumerate(be_ports, 1):
            servers.append(start_backend(workdir, i, p, www))
        for s in servers:
            s.wait_ready()
        BACKENDS[:] = servers
        for lb in lbs:
            if lb == "direct":
                targets_.append(Target("direct", be_ports[0]))
                continue
            if lb in ("haproxy", "haproxy-splice"):
                srv = start_haproxy(workdir, lb_ports[lb], be_ports, lb == "haproxy-splice")
            elif lb == "nginx":
                srv = start_nginx_stream(workdir, lb_ports[lb], be_ports)
            elif lb == "bare":
                srv = start_bare(workdir, lb_ports[lb], be_ports, bare_bin)
            elif lb == "hashlb":
                srv = start_hashlb(workdir, lb_ports[lb], be_ports, hashlb_bin,
                                   admin_ports[lb])
            elif lb in variants:
                srv = start_hashlb(workdir, lb_ports[lb], be_ports, variants[lb][0],
                                   admin_ports[lb], lb, variants[lb][1])
            else:
                ap.error(f"unknown load balancer {lb}")
            servers.append(srv)
            try:
                srv.wait_ready()
                status, body = http_get(lb_ports[lb], "/bulk", timeout=10)
                if status != 200 or len(body) != BULK_SIZE:
                    raise RuntimeError(f"{lb}: /bulk came back as {status}, {len(body)} bytes")
            except (OSError, RuntimeError) as e:
                # One broken load balancer must not cost the others' figures.
                log(f"peers: {lb} left out: {e}")
                srv.stop()
                continue
            targets_.append(Target(lb, lb_ports[lb], srv))
        names = [t.name for t in targets_]
        log(f"peers: work dir {workdir}; out {out_dir}; LBs {names}; "
            f"{args.reps} x {len(workloads)} workloads x {args.duration} s")

        # Warm-up: page cache, allocator pools, connection tables.
        for t in targets_:
            measure(t, "ka50", 1, lua, -1)
            if "bulk" in workloads:
                measure(t, "bulk", 1, lua, -1)

        for rep in range(args.reps):
            for wl in workloads:
                # Rotate the order each repetition so that no LB always runs
                # right after the same neighbour.
                order = targets_[rep % len(targets_):] + targets_[:rep % len(targets_)]
                for t in order:
                    r = measure(t, wl, args.duration, lua, rep)
                    runs.append(r)
                    log(f"  rep {rep} {wl:6} {t.name:8} {r['rate']:10.1f} "
                        f"{'req/s' if WORKLOADS[wl]['unit'] == 'req' else 'MiB/s'} "
                        f"p99 {r['p99_ms']:7.2f} ms cpu {fmt(r['lb_cpu_s'], 2):>5} s "
                        f"per-cpu-s {fmt(r['per_cpu_s'], 0):>8} "
                        f"machine {r['machine_cpu_s']:.2f} s (cpu0 {r['cpu0_busy_s']:.2f} "
                        f"cpu1 {r['cpu1_busy_s']:.2f} kworker {r['cpu0_kworker_s']:.2f}/"
                        f"{r['cpu1_kworker_s']:.2f}/{r['unbound_kworker_s']:.2f}) "
                        f"per-machine-cpu-s {fmt(r['per_machine_cpu_s'], 0)} "
                        f"rss {fmt(r['rss_kib'])} KiB "
                        f"err {r['errors']} cpu0-other {r['cpu0_other_s']:.2f} s "
                        f"drops {r['net_drops']} retrans {r['tcp_retrans']} "
                        f"segs/req {r['segs_per_req']:.2f} "
                        f"IPIs/req cpu0 {r['ipi0_per_req']:.2f} cpu1 {r['ipi1_per_req']:.2f} "
                        f"LB sleeps/req {fmt(r['lb_sleeps_per_req'], 2)} "
                        f"csw/req backends {r['be_csw_per_req']:.2f} wrk {r['wrk_csw_per_req']:.2f}")

        for t in targets_:
            if t.name in args.profile and t.is_lb:
                for wl in workloads:
                    pr = profile(t, wl, args.duration, lua, out_dir)
                    profiles.append(pr)
                    log(f"  profile {t.name} {wl}: {pr['per_unit']}")

        if args.idle_conns:
            for t in targets_:
                if not t.is_lb:
                    continue
                try:
                    r = idle_rss(t, be_ports, args.idle_conns, 0.5 if args.quick else 2.0)
                except (OSError, RuntimeError) as e:
                    r = dict(lb=t.name, conns=args.idle_conns, error=str(e)[:200])
                idle.append(r)
                log(f"  idle {t.name:8} {r}")
    finally:
        for s in reversed(servers):
            s.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    meta = dict(cpus=os.cpu_count(), reps=args.reps, duration=args.duration, nice=args.nice,
                loadavg=runs[0]["loadavg"] if runs else loadavg(),
                command=reproduce_command(argv),
                date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                versions=versions(hashlb_bin))
    names = [t.name for t in targets_]
    summ = summarize(runs, names, workloads, cand)
    md = markdown(summ, idle, names, workloads, cand, meta)
    tg = targets(summ, idle, cand) if cand else ""
    with open(os.path.join(out_dir, "runs.json"), "w") as f:
        json.dump(dict(meta=meta, runs=runs, idle=idle, profiles=profiles), f, indent=1)
    if runs:
        with open(os.path.join(out_dir, "runs.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(runs[0]))
            w.writeheader()
            w.writerows(runs)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(dict(meta=meta, summary=summ, idle=idle), f, indent=1)
    report = md
    if tg:
        report += f"\n### Targets of issue #4 ({cand})\n\n" + tg + "\n"
    if profiles:
        report += "\n" + profile_markdown(profiles)
    report += (f"\nReproduce: `{meta['command']}` ({meta['date']}; {meta['versions']})\n")
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(report)
    print(report)
    log(f"peers: results in {out_dir}")
    return 0


def reproduce_command(argv):
    """The command line, from the repository's top, that runs this again
    (output directory left to its default)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--out":
            skip = True
            continue
        if a.startswith("--out="):
            continue
        if os.path.exists(a):
            # inside the checkout: relative to it; elsewhere (a copied binary): as is
            rel = os.path.relpath(os.path.abspath(a), REPO)
            a = os.path.abspath(a) if rel.startswith("..") else rel
        out.append(a)
    return " ".join(["python3 bench/peers/peers.py"] + out)


def versions(hashlb_bin):
    def first_line(argv):
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (p.stdout + p.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "?"
    v = [first_line(["haproxy", "-v"]).split(" - ")[0],
         first_line(["nginx", "-v"]).replace("nginx version: ", ""),
         first_line(["wrk", "-v"]).split(" [")[0]]
    if hashlb_bin:
        p = subprocess.run(["git", "-C", os.path.dirname(hashlb_bin), "rev-parse", "--short",
                            "HEAD"], capture_output=True, text=True)
        # a binary copied out of its checkout has no tree to name
        tree = f" (tree at {p.stdout.strip()} when run)" if p.returncode == 0 else ""
        v.append("hashlb " + first_line([hashlb_bin, "--version"]).replace("hashlb ", "") + tree)
    return ", ".join(v)


if __name__ == "__main__":
    sys.exit(main())
