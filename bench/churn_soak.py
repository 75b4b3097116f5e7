#!/usr/bin/env python3
"""Churn soak: one `hashlb run` (2 workers, admin endpoint and health checks on) serves mixed
traffic from thousands of 127.0.0.0/8 client addresses (short echo connections, long streams
checked byte for byte both ways, idle connections pinged now and then) while the probe, once per
--action-gap: reloads (SIGHUP or `hashlb ctl reload`) with backends added, removed, renamed and
reweighted, the scheme switched ring<->maglev, a service added or removed; runs `hashlb ctl set`
(drain, maint, ready, weight, max_connections) and `hashlb ctl close`; kills and restarts two
backends (health flaps); and upgrades in place (SIGUSR2 or `hashlb ctl upgrade`).

It checks that no connection to a backend that was not killed or closed is dropped or corrupted,
that every client reset before a greeting is one hashlb counted as refused (no backend could take it;
counted from the msg="service totals" line each hashlb logs as it exits),
that new connections reach the backend `hashlb ctl lookup` names (every 90 s, base config
restored), that the admin endpoint always answers within 1 s, and at rest (traffic stopped,
drains done) that every active-connection gauge is 0, fds, threads and the number of /metrics
series are back where they were, and, over a final stretch without reloads, that the client's
connections, the service's connections and lookups and the sum over its backends agree.

  python3 bench/churn_soak.py --hashlb build/src/cli/hashlb [--minutes 10] [--upgrades 3]

Bounded by --minutes (plus up to ~3 minutes of drains). Ports: --base (admin), base+1..3 (services),
base+101..108 (backends). Writes hashlb.log, errors.json (samples, events, every failure) and the
metrics and status at each rest into --dir."""
import argparse
import asyncio
import collections
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

from benchenv import executable

ap = argparse.ArgumentParser()
ap.add_argument("--hashlb", default="build/src/cli/hashlb",
                help="the hashlb binary to run (default build/src/cli/hashlb)")
ap.add_argument("--base", type=int, default=20000)
ap.add_argument("--minutes", type=float, default=8)
ap.add_argument("--upgrades", type=int, default=3)
ap.add_argument("--dir", default="/tmp/hashlb-churn-soak")
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--streams", type=int, default=10)
ap.add_argument("--idle", type=int, default=40)
ap.add_argument("--short-rate", type=float, default=40)  # short conns per second
ap.add_argument("--clean-secs", type=float, default=60)  # final segment, no reloads
ap.add_argument("--action-gap", type=float, default=0.4)
A = ap.parse_args()
executable(ap, A.hashlb)
random.seed(A.seed)
os.makedirs(A.dir, exist_ok=True)
ECHO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "tools", "echo-backend")
ADMIN = ("127.0.0.1", A.base)
SVC_PORT = {"web": A.base + 1, "api": A.base + 2, "extra": A.base + 3}
STABLE = ["b1", "b2", "b3", "b4", "b5", "b6"]
KILLABLE = ["k1", "k2"]
PORT = {n: A.base + 101 + i for i, n in enumerate(STABLE + KILLABLE)}
T0 = time.time()


def check_ports():
    """A fixed port inside net.ipv4.ip_local_port_range can be held by any connection's
    ephemeral end (the soak's own thousands): an echo backend restarted there fails to bind."""
    try:
        lo, hi = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    except OSError:
        return
    used = [ADMIN[1]] + list(SVC_PORT.values()) + list(PORT.values())
    if any(lo <= x <= hi for x in used):
        raise SystemExit("--base %d: ports %d..%d overlap the ephemeral range %d..%d; pick another"
                         % (A.base, min(used), max(used), lo, hi))


def now():
    return time.time() - T0


def log(*a):
    print(f"[{now():7.1f}]", *a, flush=True)


# ---------------------------------------------------------------- backends
bprocs = {}
kill_events = collections.defaultdict(list)  # proc name -> [(t_down, t_up)]


def start_backend(n):
    for _ in range(50):
        p = subprocess.Popen([sys.executable, ECHO, "--name", n, "--port", str(PORT[n])],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = p.stdout.readline()
        if line.startswith("ready"):
            bprocs[n] = p
            return
        p.wait()
        time.sleep(0.1)
    raise SystemExit("backend %s did not start" % n)


def kill_backend(n):
    p = bprocs.pop(n)
    kill_events[n].append([now(), None])
    p.kill()
    p.wait()


# ---------------------------------------------------------------- config
BASE = {
    "web_scheme": "ring",
    "web": [(n, n, 1) for n in STABLE] + [("k1", "k1", 1)],  # (config name, proc, weight)
    "api": [("a-" + n, n, 2) for n in ["b1", "b3", "b5"]] + [("a-k2", "k2", 1)],
    "api_scheme": "maglev",
    "extra": False,
}
cfg_state = json.loads(json.dumps(BASE))
CFG = os.path.join(A.dir, "hashlb.yaml")


def render(st):
    def svc(name, scheme, bks):
        s = [f"  - name: {name}", f"    listen: 127.0.0.1:{SVC_PORT[name]}", f"    scheme: {scheme}",
             "    timeouts:", "      drain: 90s", "      connect: 500ms",
             "    health:", "      interval: 200ms", "      timeout: 150ms", "      rise: 2", "      fall: 2",
             "    backends:"]
        for cn, proc, w in bks:
            s += [f"      - name: {cn}", f"        address: 127.0.0.1:{PORT[proc]}", f"        weight: {w}"]
        return s
    out = ["workers: 2", f"admin: {ADMIN[0]}:{ADMIN[1]}", "services:"]
    out += svc("web", st["web_scheme"], st["web"])
    out += svc("api", st["api_scheme"], st["api"])
    if st["extra"]:
        out += svc("extra", "maglev", [("x-b2", "b2", 1), ("x-b4", "b4", 1)])
    return "\n".join(out) + "\n"


def write_cfg(st):
    tmp = CFG + ".tmp"
    with open(tmp, "w") as f:
        f.write(render(st))
    os.rename(tmp, CFG)


# ---------------------------------------------------------------- admin
admin_slow = []


async def http(method, path, timeout=5.0):
    t = time.time()
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection(*ADMIN), timeout)
        w.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n".encode())
        data = await asyncio.wait_for(r.read(), timeout)
        w.close()
    except (asyncio.TimeoutError, OSError) as e:
        admin_slow.append((now(), method, path, repr(e)))
        log("ADMIN FAIL", method, path, repr(e))
        return None, b""
    dt = time.time() - t
    if dt > 1.0:
        admin_slow.append((now(), method, path, "slow %.2fs" % dt))
    head, _, body = data.partition(b"\r\n\r\n")
    try:
        code = int(head.split()[1])
    except Exception:
        code = None
    return code, body


async def status():
    code, body = await http("GET", "/status")
    if code != 200:
        return None
    return json.loads(body)


async def metrics():
    code, body = await http("GET", "/metrics")
    return body.decode() if code == 200 else None


async def ctl(*args, timeout=10):
    p = await asyncio.create_subprocess_exec(A.hashlb, "ctl", "--admin", "%s:%d" % ADMIN, *args,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(p.communicate(), timeout)
    except asyncio.TimeoutError:
        p.kill()
        await p.wait()
        admin_slow.append((now(), "ctl", args, "timeout"))
        log("CTL TIMEOUT", args)
        return None, "", ""
    return p.returncode, out.decode(), err.decode()


# ---------------------------------------------------------------- traffic
stats = collections.Counter()
errors = []  # (t, kind, backend_proc, detail, t_start)
backend_of_client = {}
run_traffic = True
open_conns = collections.Counter()


def rand_client():
    return "127.%d.%d.%d" % (random.randint(1, 250), random.randint(0, 255), random.randint(1, 254))


CLIENT_POOL = [rand_client() for _ in range(3000)]


async def connect(svc, src):
    return await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", SVC_PORT[svc], local_addr=(src, 0), limit=1 << 20), 5)


def err(kind, who, detail, t_start, svc):
    errors.append((now(), kind, who, detail, t_start, svc))


async def greet(r):
    line = await asyncio.wait_for(r.readline(), 5)
    if not line.endswith(b"\n"):
        raise ConnectionError("no greeting: %r" % line)
    return line.strip().decode()


async def short_conn(svc):
    src = random.choice(CLIENT_POOL)
    t0 = now()
    who = None
    stats["short_try_" + svc] += 1
    try:
        r, w = await connect(svc, src)
    except Exception as e:
        err("short_connect", None, repr(e), t0, svc)
        return
    try:
        who = await greet(r)
        payload = os.urandom(random.randint(1, 8192))
        w.write(payload)
        await w.drain()
        w.write_eof()
        got = await asyncio.wait_for(r.read(), 10)
        if got != payload:
            err("short_mismatch", who, "%d vs %d" % (len(got), len(payload)), t0, svc)
        else:
            stats["short_ok_" + svc] += 1
    except Exception as e:
        err("short_io", who, repr(e), t0, svc)
    finally:
        w.close()


async def short_loop():
    while run_traffic:
        svc = random.choice(["web", "web", "api"] + (["extra"] if cfg_state["extra"] and cfg_applied["extra"] else []))
        asyncio.ensure_future(short_conn(svc))
        await asyncio.sleep(random.expovariate(A.short_rate))


async def open_counted(kind, svc):
    """A connection of <kind> (stream, idle) to <svc> from a random client, counted as
    tried and, once open, as open: (reader, writer, source, start), or None (logged)."""
    src = random.choice(CLIENT_POOL)
    t0 = now()
    stats[kind + "_try_" + svc] += 1
    try:
        r, w = await connect(svc, src)
    except Exception as e:
        err(kind + "_connect", None, repr(e), t0, svc)
        return None
    open_conns[kind] += 1
    return r, w, src, t0


async def stream(svc, dur):
    got = await open_counted("stream", svc)
    if not got:
        return
    r, w, src, t0 = got
    who = None
    sent = hashlib.sha256()
    recvd = hashlib.sha256()
    nsent = 0
    nrecv = 0
    pending = bytearray()
    bad = []

    async def reader():
        nonlocal nrecv
        while True:
            d = await asyncio.wait_for(r.read(1 << 18), 15)
            if not d:
                return
            if pending[:len(d)] != d:
                bad.append(nrecv)
                raise ConnectionError("mismatch at %d" % nrecv)
            del pending[:len(d)]
            recvd.update(d)
            nrecv += len(d)

    try:
        who = await greet(r)
        rt = asyncio.ensure_future(reader())
        end = time.time() + dur
        while time.time() < end and run_traffic and not rt.done():
            chunk = random.randbytes(random.choice([1024, 16384, 65536, 65536, 131072]))
            pending.extend(chunk)
            sent.update(chunk)
            nsent += len(chunk)
            w.write(chunk)
            await asyncio.wait_for(w.drain(), 15)
            await asyncio.sleep(random.uniform(0.01, 0.1))
        if not rt.done():
            w.write_eof()
        await asyncio.wait_for(rt, 30)
        if nrecv != nsent or sent.digest() != recvd.digest():
            err("stream_short", who, "sent %d recv %d" % (nsent, nrecv), t0, svc)
        else:
            stats["stream_ok_" + svc] += 1
            stats["stream_bytes"] += nsent
    except Exception as e:
        err("stream_io", who, "%r sent=%d recv=%d" % (e, nsent, nrecv), t0, svc)
    finally:
        open_conns["stream"] -= 1
        w.close()


async def stream_loop(i):
    while run_traffic:
        svc = "web" if i % 3 else "api"
        n = len(errors)
        await stream(svc, random.uniform(5, 40))
        if len(errors) > n:
            await asyncio.sleep(0.5)


async def idle_conn(svc, dur):
    got = await open_counted("idle", svc)
    if not got:
        return
    r, w, src, t0 = got
    who = None
    try:
        who = await greet(r)
        end = time.time() + dur
        while time.time() < end and run_traffic:
            await asyncio.sleep(min(random.uniform(5, 12), max(0.1, end - time.time())))
            ping = os.urandom(64)
            w.write(ping)
            await w.drain()
            got = await asyncio.wait_for(r.readexactly(64), 5)
            if got != ping:
                raise ConnectionError("ping mismatch")
        w.write_eof()
        step = "eof"
        try:
            rest = await asyncio.wait_for(r.read(), 10)
        except asyncio.TimeoutError:
            ss = subprocess.run("ss -tanpoi", shell=True, capture_output=True, text=True).stdout
            open(os.path.join(A.dir, "ss.%d" % int(now())), "w").write(repr(w.get_extra_info("sockname")) + "\n" + ss)
            raise
        if rest:
            raise ConnectionError("trailing %r" % rest[:20])
        stats["idle_ok_" + svc] += 1
    except Exception as e:
        err("idle_io", who, repr(e), t0, svc)
    finally:
        open_conns["idle"] -= 1
        w.close()


async def idle_loop(i):
    await asyncio.sleep(random.uniform(0, 10))
    while run_traffic:
        svcs = ["web", "api"]
        if cfg_state["extra"] and cfg_applied["extra"] and i % 5 == 0:
            svcs = ["extra"]
        await idle_conn(random.choice(svcs), random.uniform(20, 60))


# ---------------------------------------------------------------- churn
cfg_applied = {"extra": False}
all_pids = []
hl = {"pid": None, "proc": None}
samples = []
events = []
upgrades_done = 0
ctl_set = {}  # (svc, cname) -> dict


def ev(*a):
    events.append((now(),) + a)
    log("EV", *a)


def web_names():
    return [c for c, _, _ in cfg_state["web"]]


async def do_reload(how):
    write_cfg(cfg_state)
    if how == "hup":
        # SIGHUP answers nothing: wait until /status shows the new set of services (0.3 s was
        # not always enough under load, and clients then tried "extra" before it listened)
        os.kill(hl["pid"], signal.SIGHUP)
        want = sorted(["web", "api"] + (["extra"] if cfg_state["extra"] else []))
        t = time.time()
        ok = False
        while time.time() - t < 10:
            await asyncio.sleep(0.1)
            s = await status()
            if s and sorted(x["name"] for x in s["services"]) == want:
                ok = True
                break
        if not ok:
            errors.append((now(), "reload_fail", None, "SIGHUP: services not %s after 10 s" % want, now(), "-"))
    else:
        rc, out, errt = await ctl("reload")
        ok = rc == 0
        if not ok:
            log("RELOAD FAIL", rc, out, errt)
            errors.append((now(), "reload_fail", None, out + errt, now(), "-"))
    cfg_applied["extra"] = cfg_state["extra"]
    return ok


def mutate():
    st = cfg_state
    choice = random.choice(["add", "remove", "rename", "weight", "scheme", "api", "extra", "restore"])
    web = st["web"]
    present = {p for _, p, _ in web}
    if choice == "add":
        miss = [n for n in STABLE + ["k1"] if n not in present]
        if miss:
            n = random.choice(miss)
            web.append((n, n, 1))
    elif choice == "remove" and len(web) > 4:
        web.pop(random.randrange(len(web)))
    elif choice == "rename":
        i = random.randrange(len(web))
        c, p, w = web[i]
        base = c.split("-r")[0]
        web[i] = (base if c != base and random.random() < 0.5 else "%s-r%d" % (base, random.randint(1, 9)), p, w)
    elif choice == "weight":
        i = random.randrange(len(web))
        c, p, w = web[i]
        web[i] = (c, p, random.randint(1, 5))
    elif choice == "scheme":
        st["web_scheme"] = "maglev" if st["web_scheme"] == "ring" else "ring"
    elif choice == "api":
        st["api_scheme"] = "maglev" if st["api_scheme"] == "ring" else "ring"
        if random.random() < 0.5 and len(st["api"]) > 3:
            st["api"].pop(random.randrange(len(st["api"])))
        elif len(st["api"]) < 5:
            miss = [n for n in ["b1", "b2", "b3", "b4", "b5", "b6"] if ("a-" + n) not in [c for c, _, _ in st["api"]]]
            if miss:
                n = random.choice(miss)
                st["api"].append(("a-" + n, n, 2))
    elif choice == "extra":
        st["extra"] = not st["extra"]
    elif choice == "restore":
        extra = st["extra"]
        st.clear()
        st.update(json.loads(json.dumps(BASE)))
        st["extra"] = extra
    return choice


async def ctl_action():
    svc = random.choice(["web", "web", "api"])
    names = [c for c, _, _ in cfg_state[svc]]
    b = random.choice(names)
    kind = random.choice(["state", "state", "weight", "maxc"])
    if kind == "state":
        args = [b, random.choice(["drain", "maint", "ready", "ready"])]
    elif kind == "weight":
        args = [b, "weight", str(random.randint(0, 4))]
    else:
        args = [b, "max_connections", str(random.choice([0, 0, 10, 50]))]
    rc, out, e = await ctl("set", "-s", svc, *args)
    if rc != 0:
        log("ctl set fail", svc, args, rc, out.strip(), e.strip())
        stats["ctl_set_fail"] += 1
    else:
        stats["ctl_set_ok"] += 1


async def reset_ctl():
    for svc in ["web", "api"]:
        for c, p, w in cfg_state[svc]:
            for args in ([c, "ready"], [c, "weight", str(w)], [c, "max_connections", "0"]):
                rc, out, e = await ctl("set", "-s", svc, *args)
                if rc != 0:
                    log("reset ctl fail", svc, args, out, e)


def proc_stats(pid):
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        st = open(f"/proc/{pid}/status").read()
        rss = int(re.search(r"VmRSS:\s+(\d+)", st).group(1))
        thr = int(re.search(r"Threads:\s+(\d+)", st).group(1))
        return fds, rss, thr
    except Exception:
        return None, None, None


REFUSALS = ["no_backend", "rejected", "queue_timeouts", "queue_aborts", "denied", "client_limited"]
refused_seen = collections.defaultdict(dict)  # pid -> {service: refusals counted by that hashlb}


def note_refusals(pid, m):
    """Keep the latest count of the clients <pid> refused (reset before a backend served them),
    per service: each hashlb counts from 0, so the run's total is the sum over processes."""
    for svc in SVC_PORT:
        n = 0
        for k in REFUSALS:
            mm = re.search(r'^hashlb_service_%s_total\{service="%s"\} (\d+)' % (k, svc), m, re.M)
            n += int(mm.group(1)) if mm else 0
        refused_seen[pid][svc] = max(n, refused_seen[pid].get(svc, 0))


def exit_totals():
    """{service: refusals} summed over the msg="service totals" lines every hashlb logs per
    service as it exits, and how many processes logged "web" (present in all of them)."""
    total, n_web = collections.Counter(), 0
    for line in open(os.path.join(A.dir, "hashlb.log"), errors="replace"):
        if 'msg="service totals"' not in line:
            continue
        kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
        total[kv["service"]] += sum(int(kv.get(k, 0)) for k in REFUSALS)
        n_web += kv["service"] == "web"
    return total, n_web


def check_refusals():
    """Every client reset before a greeting is one hashlb counted as refused, and the other
    way round, from each process's totals at its exit (all have exited: the old ones drained
    before the rests, the last one was stopped). The /metrics samples missed what an old
    process counted after the last one before its upgrade (a client it accepted while the new
    one started, refused after). Exact for web and api, which every process serves from its
    start to its exit; "extra" ends with its counters when a reload removes it, so for it the
    samples stand in and the check is a bound."""
    totals, n_web = exit_totals()
    if n_web != len(all_pids):
        errors.append((now(), "exit_totals", None, f"{n_web} processes logged their totals, "
                       f"{len(all_pids)} ran", now(), "-"))
    for svc in SVC_PORT:
        resets = sum(1 for e in errors if e[5] == svc and refused_by_hashlb(e))
        sampled = sum(v.get(svc, 0) for v in refused_seen.values())
        counted = totals[svc]
        ev("refusals", svc, "client_resets", resets, "hashlb_counted", counted, "sampled", sampled)
        if svc == "extra" and resets <= counted + sampled or svc != "extra" and resets == counted:
            continue
        errors.append((now(), "unexplained_resets", None,
                       f"{svc}: {resets} clients reset before a greeting, hashlb counted {counted} "
                       f"refusals ({sampled} in the /metrics samples)", now(), svc))


async def sample(tag):
    m = await metrics()
    s = await status()
    pid = s["pid"] if s else hl["pid"]
    if m and s:
        note_refusals(pid, m)
    fds, rss, thr = proc_stats(pid)
    series = len([l for l in (m or "").splitlines() if l and not l.startswith("#")])
    conns = None
    if m:
        mm = re.search(r"^hashlb_connections (\d+)", m, re.M)
        conns = int(mm.group(1)) if mm else None
    draining = sum(len(x["draining"]) for x in s["services"]) if s else None
    row = dict(t=round(now(), 1), tag=tag, pid=pid, fds=fds, rss=rss, thr=thr, series=series, conns=conns,
               draining=draining, streams=open_conns["stream"], idle=open_conns["idle"])
    samples.append(row)
    return row, m, s


async def find_new_pid(old, timeout=20):
    t = time.time()
    while time.time() - t < timeout:
        s = await status()
        if s and s["pid"] != old:
            return s["pid"]
        await asyncio.sleep(0.2)
    return None


async def upgrade():
    global upgrades_done
    old = hl["pid"]
    await sample("pre-upgrade")
    if random.random() < 0.5:
        os.kill(old, signal.SIGUSR2)
        how = "usr2"
    else:
        rc, out, e = await ctl("upgrade", timeout=40)
        how = "ctl(%s)" % rc
    new = await find_new_pid(old)
    ev("upgrade", how, old, new)
    if new:
        hl["pid"] = new
        all_pids.append(new)
        upgrades_done += 1
    else:
        errors.append((now(), "upgrade_fail", None, how, now(), "-"))


async def stickiness_check(tag):
    """All ready, base weights, no caps: the forwarder should follow ctl lookup."""
    await reset_ctl()
    await asyncio.sleep(1.0)
    s = await status()
    bad = 0
    checked = 0
    for svc in ["web", "api"]:
        procmap = {c: p for c, p, _ in cfg_state[svc]}
        sv = [x for x in s["services"] if x["name"] == svc][0]
        if any(b["health"] != "up" for b in sv["backends"]):
            continue
        clients = random.sample(CLIENT_POOL, 40)
        rc, out, e = await ctl("--json", "lookup", "-s", svc, *clients)
        try:
            res = json.loads(out)  # one array, an object per client
        except Exception:
            log("lookup json?", out[:300], e)
            continue
        for c, item in zip(clients, res):
            exp = procmap.get(item.get("backend"))
            try:
                r, w = await connect(svc, c)
                who = await greet(r)
                w.close()
            except Exception as ex:
                who = "ERR " + repr(ex)
            checked += 1
            if who != exp:
                bad += 1
                log("STICKY mismatch", tag, svc, c, "lookup", item.get("backend"), exp, "got", who)
    ev("sticky", tag, checked, bad)
    if bad:
        errors.append((now(), "sticky", None, "%d/%d" % (bad, checked), now(), tag))


async def churn(deadline, allow_reload=True, allow_upgrade=True):
    last_up = now()
    n = 0
    last_sticky = now()
    while now() < deadline:
        n += 1
        r = random.random()
        if allow_upgrade and upgrades_done < A.upgrades and now() - last_up > 60 and r < 0.05:
            await upgrade()
            last_up = now()
        elif allow_reload and r < 0.45:
            c = mutate()
            how = random.choice(["hup", "ctl"])
            await do_reload(how)
            stats["reload_" + how] += 1
            stats["mut_" + c] += 1
        elif r < 0.80:
            await ctl_action()
        elif r < 0.92:
            k = random.choice(KILLABLE)
            if k in bprocs:
                kill_backend(k)
                stats["kill"] += 1
            else:
                start_backend(k)
                kill_events[k][-1][1] = now()
                stats["restart"] += 1
        else:
            rc, out, e = await ctl("close", "-s", "web" if random.random() < 0.5 else "api",
                                   "k1" if random.random() < 0.5 else "a-k2")
            stats["ctl_close"] += 1
        if n % 10 == 0:
            row, _, _ = await sample("churn")
        if allow_reload and now() - last_sticky > 90:
            # restore base config and check stickiness
            extra = cfg_state["extra"]
            cfg_state.clear()
            cfg_state.update(json.loads(json.dumps(BASE)))
            cfg_state["extra"] = extra
            await do_reload("ctl")
            await stickiness_check("t=%.0f" % now())
            last_sticky = now()
        await asyncio.sleep(random.uniform(0.5, 1.5) * A.action_gap)
    return n


def refused_by_hashlb(e):
    """A client reset before any backend greeted it: how hashlb refuses a connection it
    cannot serve (client_refuse(): no backend of the client's list could take it, all
    drained, in maint, down, of weight 0 or at max_connections). The connect itself may
    report the reset, if it came before the handshake was seen complete."""
    t, kind, who, detail, t0, svc = e
    return who is None and "ConnectionResetError" in detail


def expected_failure(e):
    t, kind, who, detail, t0, svc = e
    if refused_by_hashlb(e):
        return True  # checked in bulk against the refusal counters (main())
    if who is None and kind.endswith("_connect"):
        return False
    if who is None and "no greeting" in detail:
        return True  # closed (FIN) before a greeting: as above, from an older hashlb
    if who in KILLABLE:
        return True  # killed or ctl close'd backend
    return False


async def rest(tag, wait_drain=True):
    global run_traffic
    run_traffic = False
    t = time.time()
    while (open_conns["stream"] or open_conns["idle"]) and time.time() - t < 90:
        await asyncio.sleep(0.5)
    await asyncio.sleep(2)
    # wait for hashlb to show 0 connections, draining backends gone
    t = time.time()
    while time.time() - t < 100:
        row, m, s = await sample(tag + "-wait")
        if row["conns"] == 0 and row["draining"] == 0:
            break
        await asyncio.sleep(1)
    await asyncio.sleep(1)
    row, m, s = await sample(tag)
    with open(os.path.join(A.dir, tag + ".metrics"), "w") as f:
        f.write(m or "")
    with open(os.path.join(A.dir, tag + ".status.json"), "w") as f:
        json.dump(s, f, indent=1)
    ev("rest", tag, row)
    # gauges
    nz = [l for l in (m or "").splitlines()
          if re.match(r"^(hashlb_backend_active_connections|hashlb_service_active_connections|hashlb_connections|"
                      r"hashlb_worker_connections|hashlb_worker_buffers_in_use|hashlb_worker_splice_pipes|"
                      r"hashlb_service_queued|hashlb_worker_spilled_bytes|hashlb_worker_buffer_waiters)[{ ]", l)
          and not l.endswith(" 0")]
    if nz:
        ev("NONZERO gauges at rest", nz)
        errors.append((now(), "gauge_at_rest", None, "; ".join(nz), now(), tag))
    return row, m, s


def parse_metrics(m):
    out = {}
    for l in m.splitlines():
        if l.startswith("#") or not l:
            continue
        k, _, v = l.rpartition(" ")
        try:
            out[k] = float(v)
        except ValueError:
            pass
    return out


async def main():
    global run_traffic
    check_ports()
    for n in STABLE + KILLABLE:
        start_backend(n)
    write_cfg(cfg_state)
    logf = open(os.path.join(A.dir, "hashlb.log"), "w")
    p = subprocess.Popen([A.hashlb, "run", "-c", CFG], stderr=logf)
    hl["proc"] = p
    hl["pid"] = p.pid
    all_pids.append(p.pid)
    await asyncio.sleep(1.5)
    admin_slow.clear()
    r0, m0, s0 = await sample("start")
    fp0 = {x["name"]: x["fingerprint"] for x in s0["services"]}
    ev("start", r0, fp0)
    cfg_applied["extra"] = cfg_state["extra"]

    async def traffic():
        tasks = [asyncio.ensure_future(short_loop())]
        tasks += [asyncio.ensure_future(stream_loop(i)) for i in range(A.streams)]
        tasks += [asyncio.ensure_future(idle_loop(i)) for i in range(A.idle)]
        return tasks

    # Phase A: churn with upgrades
    churn_secs = A.minutes * 60 - A.clean_secs
    tasks = await traffic()
    na = await churn(now() + churn_secs * 0.5, allow_upgrade=True)
    ev("phaseA done", na)
    run_traffic = False
    await asyncio.gather(*tasks, return_exceptions=True)
    # make sure base config, all backends up, reset ctl
    for k in KILLABLE:
        if k not in bprocs:
            start_backend(k)
            kill_events[k][-1][1] = now()
    extra = False
    cfg_state.clear()
    cfg_state.update(json.loads(json.dumps(BASE)))
    await do_reload("ctl")
    await reset_ctl()
    rest1, m1, s1 = await rest("rest1")
    # Phase B: churn without upgrades
    run_traffic = True
    tasks = await traffic()
    nb = await churn(now() + churn_secs * 0.5, allow_upgrade=False)
    ev("phaseB done", nb)
    run_traffic = False
    await asyncio.gather(*tasks, return_exceptions=True)
    for k in KILLABLE:
        if k not in bprocs:
            start_backend(k)
            kill_events[k][-1][1] = now()
    cfg_state.clear()
    cfg_state.update(json.loads(json.dumps(BASE)))
    await do_reload("ctl")
    await reset_ctl()
    # Phase C: clean traffic, no reload, for counter accounting
    rest2, m2, s2 = await rest("rest2")
    stats_before = dict(stats)
    run_traffic = True
    tasks = await traffic()
    await asyncio.sleep(A.clean_secs)
    rest3, m3, s3 = await rest("rest3")
    await asyncio.gather(*tasks, return_exceptions=True)
    # accounting over phase C
    pm2, pm3 = parse_metrics(m2), parse_metrics(m3)
    for svc in ["web", "api"]:
        k = 'hashlb_service_connections_total{service="%s"}' % svc
        dsvc = pm3.get(k, 0) - pm2.get(k, 0)
        kl = 'hashlb_service_lookups_total{service="%s"}' % svc
        dl = pm3.get(kl, 0) - pm2.get(kl, 0)
        client = sum(stats[f"{x}_try_{svc}"] - stats_before.get(f"{x}_try_{svc}", 0) for x in ["short", "stream", "idle"])
        bsum = sum(v - pm2.get(kk, 0) for kk, v in pm3.items()
                   if kk.startswith("hashlb_backend_connections_total{") and f'service="{svc}"' in kk)
        ev("accounting", svc, "client_tries", client, "svc_conns", dsvc, "lookups", dl, "backend_sum", bsum)
        if not (client == dsvc == dl == bsum):
            errors.append((now(), "accounting", None, f"{svc}: client {client} svc {dsvc} lookups {dl} backends {bsum}", now(), svc))
    # byte accounting phase C: bytes sent by clients vs backend sent_bytes
    # leaks
    ev("leak", "rest1", rest1, "rest2", rest2, "rest3", rest3)
    # stop
    p_final = hl["pid"]
    os.kill(p_final, signal.SIGTERM)
    for _ in range(200):
        try:  # an upgraded process is not our child: once it exits, pid 1 reaps it
            if open(f"/proc/{p_final}/stat").read().rsplit(")", 1)[1].split()[0] in "ZX":
                break
        except (OSError, IndexError):
            break
        await asyncio.sleep(0.1)
    else:
        errors.append((now(), "no_exit", None, str(p_final), now(), "-"))
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        pass
    for b in list(bprocs):
        bprocs[b].kill()
    logf.close()
    check_refusals()
    # report
    real = [e for e in errors if not expected_failure(e)]
    exp = [e for e in errors if expected_failure(e)]
    with open(os.path.join(A.dir, "errors.json"), "w") as f:
        json.dump({"real": real, "expected": exp, "admin_slow": admin_slow, "events": events,
                   "samples": samples, "stats": stats, "kills": kill_events}, f, indent=1, default=str)
    log("STATS", dict(stats))
    log("expected failures:", len(exp), "real errors:", len(real), "admin slow:", len(admin_slow))
    for e in real[:50]:
        log("ERR", e)
    for e in admin_slow[:20]:
        log("ADMIN", e)


signal.signal(signal.SIGTERM, lambda *a: sys.exit(3))
try:
    asyncio.run(main())
finally:
    for pid in all_pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except Exception:
            pass
    for b in list(bprocs):
        try:
            bprocs[b].kill()
        except Exception:
            pass
    if hl["proc"] and hl["proc"].poll() is None:
        hl["proc"].kill()
