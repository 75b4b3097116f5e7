#!/usr/bin/env python3
"""hashlb under a real systemd, through the unit files it ships (contrib/systemd/).

systemd runs as PID 1 of a container of this test (systemd-nspawn --volatile=yes: this
machine's /usr, an empty /etc in memory, a network namespace of its own, so every address
is the container's loopback). The built hashlb is bound in as /opt/hashlb/bin/hashlb and
hashlb.service is the shipped one with its paths filled in, as `meson install` fills them.
Backends and clients are processes of this test that enter the container's network
namespace (nsenter -n); systemctl runs inside.

What a unit file cannot show by reading it, and these cases check with systemd 252:
- Type=notify: `systemctl start` returns once hashlb is ready, with its STATUS= shown;
- ExecReload: `systemctl reload` applies an edited config, and a broken one fails the
  reload with the file's line and column while the running config serves on; so does one
  that passes the check but that hashlb refuses (an address in use), through the admin
  endpoint (hashlb ctl reload --pid $MAINPID);
- the upgrade in place: `systemctl kill --kill-whom=main -s USR2` after installing a new
  binary makes the new process the unit's main process (MAINPID=), under a stream of new
  connections none of which fails; the unit stays active; the next reload reaches the new
  process; and systemd still supervises it: killed, it is restarted (Restart=on-failure);
- `systemctl stop` drains: the unit is deactivating while a connection is open, and
  inactive, with result success, once it closes;
- socket activation (hashlb.socket): the first connection starts hashlb, which serves on
  the socket systemd holds, and an upgrade in place hands that socket on; across
  `systemctl restart hashlb` the socket stays open (the socket unit is not restarted with
  the service), so a client that connects while no hashlb accepts waits in its backlog and
  is served by the next hashlb, and a stream of new connections loses none."""
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time

from lbtest import BACKEND, HASHLB, SRC, Skip, _tmp, asan_build, check, run_tests, spawn, stop

NSPAWN = shutil.which("systemd-nspawn")
SYSTEMD = "/lib/systemd/systemd"

# Runs in the container's network namespace (this machine's python and files, lbtest's who()):
# connect to ADDR from SRC and print the greeting; or, with "loop SECONDS", connect one after
# another for that long, from 50 source addresses in turn, and print "ok N failed M FIRST-ERROR".
CLIENT = r'''
import sys, time
sys.path.insert(0, sys.argv[1])
from lbtest import who
host, port = sys.argv[2].rsplit(":", 1)
addr = (host, int(port))
if sys.argv[3] == "loop":
    ok = failed = 0
    first = "-"
    end = time.time() + float(sys.argv[4])
    i = 0
    while time.time() < end and ok + failed < 20000:
        try:
            got = who(addr, f"127.0.2.{i % 50 + 1}")
        except OSError as e:
            got, why = "", repr(e)
        else:
            why = "closed without a greeting"
        ok += bool(got)
        failed += not got
        first = why if not got and first == "-" else first
        i += 1
    print("ok", ok, "failed", failed, first.replace(" ", "_"))
else:
    try:
        print(who(addr, sys.argv[3]))
    except OSError as e:
        print("error", e)
'''
HERE = os.path.dirname(os.path.abspath(__file__))


def need_systemd():
    if os.geteuid() != 0 or not NSPAWN or not os.access(SYSTEMD, os.X_OK) or \
            not shutil.which("nsenter"):
        raise Skip("needs root, systemd-nspawn (Debian's systemd-container, installed by "
                   "scripts/setup.sh), systemd and nsenter")


def unit_text(name):
    """A shipped unit file as `meson install` writes it, hashlb in /opt/hashlb/bin."""
    with open(os.path.join(SRC, "contrib", "systemd", name)) as f:
        text = f.read()
    text = text.replace("@BINDIR@", "/opt/hashlb/bin")
    return text.replace("HASHLB_CONFIG=/etc/hashlb/hashlb.yaml",
                        "HASHLB_CONFIG=/opt/hashlb/hashlb.yaml")


class Container:
    """systemd as PID 1 of a container; /opt/hashlb is <opt>, a directory of this test."""

    def __init__(self, tag, opt, units):
        self.dir = os.path.join(_tmp.name, tag)
        os.makedirs(self.dir, exist_ok=True)
        binds = [f"--bind={opt}:/opt/hashlb"]
        units = dict(units)
        units["hlbtest.target"] = ("[Unit]\nDescription=hashlb test\nRequires=basic.target\n"
                                   "After=basic.target\nAllowIsolate=yes\n")
        # nothing configures the container's network (its loopback is all it has), so the
        # wait for it would hold network-online.target, which hashlb.service wants, for two
        # minutes: masked (an empty unit file)
        units["systemd-networkd-wait-online.service"] = ""
        if asan_build() and "hashlb.service" in units:
            # LeakSanitizer stops a process's threads with ptrace() at its exit, a call the
            # shipped unit's SystemCallFilter= (@system-service) refuses: every hashlb of the
            # sanitizer build, `hashlb check` in ExecStartPre= first, exited 1 with "LeakSanitizer
            # has encountered a fatal error". Allowed for that build alone (filters of an
            # allow-list add up), the rest of the hardening as shipped.
            units["hashlb.service.d/sanitizer.conf"] = "[Service]\nSystemCallFilter=ptrace\n"
        for name, text in units.items():
            path = os.path.join(self.dir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)  # a drop-in: NAME.d/FILE
            with open(path, "w") as f:
                f.write(text)
            binds.append(f"--bind-ro={path}:/etc/systemd/system/{name}")
        self.log_path = os.path.join(self.dir, "console.log")
        self.log = open(self.log_path, "w")
        # systemd.firstboot=off: an empty /etc would have it ask for a locale on the console
        self.proc = spawn([NSPAWN, "-q", "-D", "/", "--volatile=yes", "--private-network",
                           "-M", f"hlb-{tag}-{os.getpid()}", "--register=no", "--keep-unit",
                           "--console=pipe", *binds, "-b", "systemd.unit=hlbtest.target",
                           "systemd.firstboot=off"],
                          stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        self.pid = None
        end = time.time() + 30
        while time.time() < end and self.pid is None and self.proc.poll() is None:
            for p in os.listdir("/proc"):
                if p.isdigit() and ppid(p) == self.proc.pid and comm(p) == "systemd":
                    self.pid = int(p)
            time.sleep(0.05)
        if self.pid is None:
            self.kill()
            raise SystemExit(f"no systemd in the container:\n{self.console()}")
        # is-system-running --wait needs systemd's socket, there a moment after PID 1 is
        state = wait(lambda: self.sh("systemctl is-system-running --wait")[1].strip() in
                     ("running", "degraded"), timeout=60, step=0.1)
        if not state:
            why = self.sh('systemctl is-system-running')
            self.kill()
            raise SystemExit(f"the container's systemd did not start: {why}\n{self.console()}")

    def console(self):
        with open(self.log_path) as f:
            return f.read()[-3000:]

    def enter(self, net_only=False):
        """The command prefix that runs what follows inside (net_only: its network only)."""
        # -r -w: the container's root, which is not its mount namespace's root when this
        # test runs in a chroot (there, without them, systemctl saw the chroot's host)
        into = ["-n"] if net_only else ["-r", "-w", "-m", "-u", "-i", "-n", "-p"]
        return ["nsenter", "-t", str(self.pid)] + into + ["--"]

    def sh(self, cmd, timeout=60):
        p = subprocess.run(self.enter() + ["/bin/sh", "-c", cmd], capture_output=True,
                           text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    def show(self, unit, *props):
        _, out, _ = self.sh(f"systemctl show -p {','.join(props)} {unit}")
        return dict(l.split("=", 1) for l in out.splitlines() if "=" in l)

    def journal(self, unit):
        return self.sh(f"journalctl -q -o cat -u {unit} --no-pager")[1]

    def backend(self, name):
        """An echo backend in the container's network: (process, port)."""
        p = spawn(self.enter(net_only=True) + [sys.executable, BACKEND, "--name", name,
                                               "--port", "0"],
                  stdout=subprocess.PIPE, text=True)
        line = p.stdout.readline().split()
        if len(line) != 3 or line[0] != "ready":
            raise SystemExit(f"backend {name} did not start: {line}")
        return p, int(line[2].rsplit(":", 1)[1])

    def who(self, addr, src="127.0.0.5"):
        p = subprocess.run(self.enter(net_only=True) +
                           [sys.executable, "-c", CLIENT, HERE, addr, src],
                           capture_output=True, text=True, timeout=30)
        return p.stdout.strip()

    def client_loop(self, addr, seconds):
        return spawn(self.enter(net_only=True) + [sys.executable, "-c", CLIENT, HERE, addr,
                                                  "loop", str(seconds)],
                     stdout=subprocess.PIPE, text=True)

    def held(self, addr):
        """A connection held open by a client inside: send a line, read the echo."""
        p = spawn(self.enter(net_only=True) + [sys.executable, "-u", "-c", HELD, addr],
                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        return p

    def poweroff(self):
        if self.proc.poll() is None:
            self.sh("systemctl poweroff --no-block")
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()

    def kill(self):
        """The container at once: its PID 1 killed takes every process in it along (nspawn
        killed alone would leave the container's systemd running, reparented)."""
        if self.pid is not None and self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        stop(self.proc)


# A client holding one connection: prints the greeting, then echoes what it is given line
# by line through hashlb, and prints "closed" when hashlb closes the connection.
HELD = r'''
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=30)
f = s.makefile("rb")
print(f.readline().decode().strip(), flush=True)
for line in sys.stdin:
    s.sendall(line.encode())
    got = f.readline()
    print(got.decode().strip() if got else "closed", flush=True)
s.close()
'''


def ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def hashlb_config(backends, listen="127.0.0.1:18080"):
    lines = ["workers: 2", "services:", "  - name: web", f"    listen: {listen}",
             "    health:", "      enabled: false", "    timeouts:", "      drain: 20s",
             "    backends:"]
    for name, port in backends:
        lines += [f"      - name: {name}", f"        address: 127.0.0.1:{port}"]
    return "\n".join(lines) + "\n"


def opt_dir(tag, cfg):
    """/opt/hashlb of a container: bin/hashlb (a copy of the build's) and hashlb.yaml."""
    opt = os.path.join(_tmp.name, f"{tag}-opt")
    os.makedirs(os.path.join(opt, "bin"), exist_ok=True)
    shutil.copy2(HASHLB, os.path.join(opt, "bin", "hashlb"))
    write(os.path.join(opt, "hashlb.yaml"), cfg)
    return opt


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def install_new_binary(opt):
    """A new hashlb over the old one, as a package manager installs it (rename): another
    inode at the same path. Returns that inode."""
    new = os.path.join(opt, "bin", "hashlb.new")
    shutil.copy2(HASHLB, new)
    os.rename(new, os.path.join(opt, "bin", "hashlb"))
    return os.stat(os.path.join(opt, "bin", "hashlb")).st_ino


def wait(cond, timeout=15, step=0.05):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return None


def hardened(ct, pid):
    """Whether process <pid> of container <ct> runs under the unit's hardening: a seccomp
    filter (SystemCallFilter=, RestrictAddressFamilies=: either sets mode 2), no new
    privileges, /proc/sys read-only (ProtectKernelTunables=) and a /dev of its own
    (PrivateDevices=: another file system than the container's /dev, which has no /dev/kmsg
    to miss)."""
    status = ct.sh(f"cat /proc/{pid}/status")[1]
    mounts = {l.split()[4]: l.split()[5] for l in ct.sh(f"cat /proc/{pid}/mountinfo")[1]
              .splitlines() if len(l.split()) > 5}
    devs = ct.sh(f"stat -L -c %d:%i /proc/{pid}/root/dev /dev")[1].split()
    return (re.search(r"^Seccomp:\s+2$", status, re.M) and
            re.search(r"^NoNewPrivs:\s+1$", status, re.M) and
            mounts.get("/proc/sys", "").startswith("ro") and len(devs) == 2 and
            devs[0] != devs[1])


def service_start_reload_upgrade_stop():
    need_systemd()
    opt = opt_dir("svc", "")
    ct = Container("svc", opt, {"hashlb.service": unit_text("hashlb.service.in")})
    (pa, port_a), (pb, port_b) = ct.backend("a"), ct.backend("b")
    write(os.path.join(opt, "hashlb.yaml"), hashlb_config([("a", port_a)]))
    addr = "127.0.0.1:18080"

    rc, out, err = ct.sh("systemctl start hashlb")
    st = ct.show("hashlb", "ActiveState", "MainPID", "StatusText", "NRestarts")
    check(rc == 0 and st.get("ActiveState") == "active" and
          st.get("StatusText", "").startswith("listening"),
          f"systemctl start: active once ready (Type=notify), with its status: rc={rc} {err} "
          f"{st}\n{ct.journal('hashlb')}")
    pid0 = st.get("MainPID")
    check(ct.who(addr) == "a", "a client inside is served")
    # the unit's hardening is what it runs under (its system call filter in force: seccomp
    # mode 2), and what systemd rates it: 6.2 MEDIUM before that hardening
    seen = ct.sh(f"grep -E '^(Seccomp|NoNewPrivs):' /proc/{pid0}/status")[1].split()
    check(hardened(ct, pid0), f"hashlb runs under the unit's hardening: {seen}")
    rc, out, err = ct.sh("systemd-analyze security --no-pager hashlb")
    m = re.search(r"Overall exposure level for hashlb\.service: ([\d.]+) (\w+)", out)
    print(f"    systemd-analyze security: {m and m.group(1)} {m and m.group(2)}")
    check(m and float(m.group(1)) <= 3.0,
          f"systemd-analyze security rates the unit 3.0 or less: {m and m.group(0)} {err}")
    nofile = re.search(r'msg="file descriptor limit" nofile=(\d+) ', ct.journal("hashlb"))
    check(nofile, "hashlb logs the descriptor limit it runs under")
    rc, out, err = ct.sh("/opt/hashlb/bin/hashlb ctl status")
    check(rc == 0 and nofile and f"\nfd limit: {nofile.group(1)} (" in out,
          f"and hashlb ctl status says it, after the journal's line has gone: rc={rc} {out}{err}")

    # reload: an edited config applies; a broken one fails with its position, nothing changes
    write(os.path.join(opt, "hashlb.yaml"), hashlb_config([("a", port_a), ("b", port_b)]))
    rc, out, err = ct.sh("systemctl reload hashlb")
    greeted = {ct.who(addr, f"127.0.1.{i}") for i in range(1, 41)}
    check(rc == 0 and greeted == {"a", "b"} and
          "reloaded /opt/hashlb/hashlb.yaml (1 reload ok)" in ct.journal("hashlb"),
          f"systemctl reload applies the new backend: rc={rc} {err} {greeted}")
    write(os.path.join(opt, "hashlb.yaml"), hashlb_config([("a", port_a), ("b", port_b)]) +
          "        wieght: 2\n")
    rc, out, err = ct.sh("systemctl reload hashlb")
    st = ct.show("hashlb", "ActiveState", "MainPID")
    check(rc != 0 and re.search(r"hashlb\.yaml:\d+:\d+: error: unknown key 'wieght'",
                                ct.journal("hashlb")) and
          st == {"ActiveState": "active", "MainPID": pid0},
          f"a broken config fails the reload with its line:column, the unit runs on: rc={rc} "
          f"{st}")
    check({ct.who(addr, f"127.0.1.{i}") for i in range(1, 41)} == {"a", "b"},
          "and the running config still serves both")
    # a config that passes hashlb check but that hashlb refuses: a second service on the
    # address backend a listens on; the unit reloads through the admin endpoint (the default,
    # 127.0.0.1:9901) with --pid $MAINPID, which waits for that outcome
    write(os.path.join(opt, "hashlb.yaml"), hashlb_config([("a", port_a), ("b", port_b)]) +
          hashlb_config([("b", port_b)], listen=f"127.0.0.1:{port_a}").split("services:\n")[1]
          .replace("name: web", "name: web2"))
    rc, out, err = ct.sh("systemctl reload hashlb")
    st = ct.show("hashlb", "ActiveState", "MainPID")
    check(rc != 0 and re.search(r"web2.*cannot listen on 127\.0\.0\.1:\d+: Address already in "
                                r"use", ct.journal("hashlb")) and
          st == {"ActiveState": "active", "MainPID": pid0},
          f"a reload hashlb refuses (an address in use) fails systemctl reload, the unit runs "
          f"on: rc={rc} {st}\n{ct.journal('hashlb')[-1500:]}")
    # each line's level is its journal priority: -p err shows that refusal and the check's
    # error that failed the reload before, and none of the info lines (before, every line
    # was info, and -p err showed none of hashlb's)
    errs = ct.sh("journalctl -q -o cat -u hashlb -p err --no-pager")[1]
    check('level=error msg="reload failed, keeping the running config"' in errs and
          re.search(r"hashlb\.yaml:\d+:\d+: error: unknown key 'wieght'", errs) and
          "level=info" not in errs and "level=warn" not in errs,
          f"journalctl -p err shows hashlb's errors alone: {errs[-1500:]}")
    write(os.path.join(opt, "hashlb.yaml"), hashlb_config([("a", port_a), ("b", port_b)]))
    rc, out, err = ct.sh("systemctl reload hashlb")
    check(rc == 0 and "reloaded /opt/hashlb/hashlb.yaml (2 reloads ok)" in ct.journal("hashlb"),
          f"the file fixed, systemctl reload succeeds, through the endpoint: rc={rc} {err}")

    # upgrade in place under a stream of new connections
    loop = ct.client_loop(addr, 4)
    time.sleep(0.5)
    ino = install_new_binary(opt)
    rc, out, err = ct.sh("systemctl kill --kill-whom=main -s USR2 hashlb")
    check(rc == 0, f"systemctl kill -s USR2: {err}")
    states = set()

    def new_main():
        st = ct.show("hashlb", "ActiveState", "MainPID")
        states.add(st.get("ActiveState"))
        return st["MainPID"] if st.get("MainPID") not in (pid0, "0", None) else None

    pid1 = wait(new_main)
    check(pid1 is not None, f"the new process becomes the unit's main process:\n"
          f"{ct.journal('hashlb')[-2000:]}")
    check(wait(lambda: ct.sh(f"kill -0 {pid0}")[0] != 0) is not None,
          "the old process drains and exits")
    check(states == {"active"}, f"the unit stays active throughout: {states}")
    rc, out, _ = ct.sh(f"stat -L -c %i /proc/{pid1}/exe")
    check(out.strip() == str(ino), f"the new main process runs the new file: {out} vs {ino}")
    check(hardened(ct, pid1), "the new process, exec'd by the old one, under the same hardening")
    out, _ = loop.communicate(timeout=30)
    print(f"    across the upgrade: {out.strip()}")
    m = re.match(r"ok (\d+) failed (\d+) (\S+)", out.strip())
    check(m and int(m.group(1)) > 0 and m.group(2) == "0",
          f"no connection failed across the upgrade: {out.strip()}")
    rc, _, err = ct.sh("systemctl reload hashlb")
    check(rc == 0 and wait(lambda: re.search(rf"msg=reloaded", ct.sh(
        f"journalctl -q -o cat _PID={pid1} --no-pager")[1])),
          f"the next systemctl reload reaches the new process: rc={rc} {err}")

    # systemd supervises the process it did not start: killed, it is restarted
    ct.sh(f"kill -KILL {pid1}")
    st = wait(lambda: (lambda s: s if s.get("NRestarts") == "1" and
                       s.get("ActiveState") == "active" and s.get("MainPID") not in
                       (pid1, "0") else None)(ct.show("hashlb", "ActiveState", "MainPID",
                                                      "NRestarts")))
    check(st is not None, f"the adopted main process killed: systemd restarts hashlb "
          f"(Restart=on-failure): {ct.show('hashlb', 'ActiveState', 'MainPID', 'NRestarts')}")
    check(wait(lambda: ct.who(addr) in ("a", "b")), "and it serves again")

    # stop drains: deactivating while a connection is open, inactive once it closes
    held = ct.held(addr)
    check(held.stdout.readline().strip() in ("a", "b"), "a connection held open")
    rc, _, err = ct.sh("systemctl stop --no-block hashlb")
    check(wait(lambda: ct.show("hashlb", "ActiveState")["ActiveState"] == "deactivating"),
          "systemctl stop: deactivating while the connection is open")
    held.stdin.write("still here\n")
    held.stdin.flush()
    check(held.stdout.readline().strip() == "still here", "the held connection is served on")
    held.stdin.close()
    held.wait(10)
    st = wait(lambda: (lambda s: s if s["ActiveState"] == "inactive" else None)(
        ct.show("hashlb", "ActiveState", "Result")))
    check(st is not None and st["Result"] == "success",
          f"inactive once it closed, result success: {st}")
    ct.poweroff()
    for p in (pa, pb):
        stop(p)


def socket_activation():
    need_systemd()
    opt = opt_dir("sock", "")
    sock = unit_text("hashlb.socket")
    ct = Container("sock", opt, {"hashlb.service": unit_text("hashlb.service.in"),
                                 "hashlb.socket": sock})
    pa, port_a = ct.backend("a")
    m = re.search(r"^ListenStream=(\S+)$", sock, re.M)
    addr = m.group(1)
    write(os.path.join(opt, "hashlb.yaml"), hashlb_config([("a", port_a)], listen=addr))

    rc, _, err = ct.sh("systemctl start hashlb.socket")
    check(rc == 0 and ct.show("hashlb", "ActiveState")["ActiveState"] == "inactive",
          f"the socket listens, hashlb not started yet: rc={rc} {err}")
    check(ct.who(addr) == "a", "the first connection starts hashlb, which serves it")
    st = ct.show("hashlb", "ActiveState", "MainPID")
    check(st["ActiveState"] == "active" and "socket=inherited" in ct.journal("hashlb"),
          f"on the socket systemd holds: {st}")

    # systemctl restart: a client that connects while no hashlb accepts (the old one
    # draining a held connection) waits in the socket's backlog and the next one serves it.
    # The socket unit must not restart with the service (PartOf= would: systemd closes the
    # socket, resetting that client, and binds a new one, refusing others in between).
    port = addr.rsplit(":", 1)[1]

    def listening():
        """(Recv-Q, inode) of the listening socket: connections in its backlog, identity."""
        out = ct.sh(f"ss -Hltne 'sport = :{port}'")[1].split()
        ino = [f for f in out if f.startswith("ino:")]
        return (int(out[1]), ino[0]) if len(out) > 1 and ino else (None, None)

    _, ino0 = listening()
    held = ct.held(addr)
    check(held.stdout.readline().strip() == "a", "a connection held open")
    pid1 = ct.show("hashlb", "MainPID")["MainPID"]
    rc, _, err = ct.sh("systemctl restart --no-block hashlb")
    check(rc == 0 and wait(lambda: "msg=draining" in ct.sh(
        f"journalctl -q -o cat _PID={pid1} --no-pager")[1]),
          f"systemctl restart: the old hashlb drains: rc={rc} {err}")
    # its workers stop accepting (a command each) soon after the line, a loaded machine
    # taking its time: a client one still accepts is greeted by the old hashlb, and let go
    # for another; a hashlb that kept accepting while it drains greets them all
    waiter = None
    for _ in range(20):
        w = ct.held(addr)
        greeted = lambda t=0: select.select([w.stdout], [], [], t)[0]
        if wait(lambda: listening()[0] == 1 or greeted()) and not greeted(0.5):
            waiter = w
            break
        w.stdin.close()
        w.wait(10)
    check(waiter and wait(lambda: listening()[0] == 1),
          f"a client connects while the old hashlb drains: in the backlog, not accepted: "
          f"{ct.sh(f'ss -ltn sport = :{port}')[1]}")
    if not waiter:
        return
    held.stdin.close()  # the drain ends, the old hashlb exits, systemd starts the next one
    held.wait(10)
    got = waiter.stdout.readline().strip()
    check(got == "a", f"the client that waited in the backlog is served by the next hashlb: "
          f"{got!r}\n{ct.journal('hashlb.socket')}")
    waiter.stdin.close()
    waiter.wait(10)
    st = wait(lambda: (lambda s: s if s["ActiveState"] == "active" else None)(
        ct.show("hashlb", "ActiveState", "MainPID"))) or {"ActiveState": "not active"}
    check(st.get("MainPID") not in (pid1, "0", None) and
          listening()[1] == ino0 and "Closed hashlb.socket" not in ct.journal("hashlb.socket"),
          f"a new hashlb on the same socket, which systemd never closed: {st} "
          f"{listening()} vs {ino0}\n{ct.journal('hashlb.socket')}")

    # and under a stream of new connections, none fails across a restart
    loop = ct.client_loop(addr, 4)
    time.sleep(1)
    rc, _, err = ct.sh("systemctl restart hashlb")
    out, _ = loop.communicate(timeout=30)
    print(f"    across a restart: {out.strip()}")
    m = re.match(r"ok (\d+) failed (\d+) (\S+)", out.strip())
    check(rc == 0 and m and int(m.group(1)) > 0 and m.group(2) == "0",
          f"no connection failed across systemctl restart: rc={rc} {err} {out.strip()}")

    # the upgrade in place hands the socket on
    st = ct.show("hashlb", "MainPID")
    install_new_binary(opt)
    ct.sh("systemctl kill --kill-whom=main -s USR2 hashlb")
    pid2 = wait(lambda: (lambda s: s if s not in (st["MainPID"], "0") else None)(
        ct.show("hashlb", "MainPID")["MainPID"]))
    check(pid2 is not None and ct.who(addr) == "a",
          f"upgraded in place, the new process serves on the same socket: {pid2}")

    # and the upgraded process, not systemd's child, still drains on stop (systemd 252 does
    # not wait for a process it cannot reap: without the unit's ExecStop= it sent SIGKILL
    # right after SIGTERM)
    held = ct.held(addr)
    check(held.stdout.readline().strip() == "a", "a connection held open")
    ct.sh("systemctl stop --no-block hashlb.socket hashlb")
    check(wait(lambda: ct.show("hashlb", "ActiveState")["ActiveState"] == "deactivating"),
          "systemctl stop after the upgrade: deactivating while the connection is open")
    held.stdin.write("still here\n")
    held.stdin.flush()
    got = held.stdout.readline().strip()
    check(got == "still here", f"the held connection is served on, not killed: {got!r}\n"
          f"{ct.journal('hashlb')[-1500:]}")
    held.stdin.close()
    held.wait(10)
    st = wait(lambda: (lambda s: s if s["ActiveState"] in ("inactive", "failed") else None)(
        ct.show("hashlb", "ActiveState", "Result")))
    check(st is not None and st["Result"] == "success",
          f"inactive once it closed, result success: {st}")
    ct.poweroff()
    stop(pa)


def socket_dropin_replaces_the_address():
    """hashlb.socket's own instructions: a drop-in (`systemctl edit hashlb.socket`) whose
    empty ListenStream= drops the shipped 127.0.0.1:18080, then the config's address. Without
    that empty line a drop-in's ListenStream= adds to the shipped one: systemd held 18080 too,
    hashlb logged it as matching no service and kept it open, and the comment had said only
    to write "one ListenStream= per service listen address"."""
    need_systemd()
    sock = unit_text("hashlb.socket")
    m = re.search(r"^#\s+\[Socket\]\n#\s+(ListenStream=)\n#\s+ListenStream=(\S+)", sock, re.M)
    check(m is not None, "hashlb.socket shows a drop-in that resets ListenStream= first")
    if m is None:
        return
    addr = "127.0.0.1:18099"
    opt = opt_dir("dropin", "")
    # and the service's drop-in its comment shows: the admin endpoint on a Unix socket in
    # the unit's RuntimeDirectory=, which the hardened unit leaves hashlb to make and use
    admin = "unix:/run/hashlb/admin.sock"
    ct = Container("dropin", opt, {
        "hashlb.service": unit_text("hashlb.service.in"), "hashlb.socket": sock,
        "hashlb.socket.d/override.conf": f"[Socket]\nListenStream=\nListenStream={addr}\n",
        "hashlb.service.d/admin.conf":
            f'[Service]\nEnvironment="HASHLB_ADMIN_OPTION=--admin {admin}"\n'})
    pa, port_a = ct.backend("a")
    write(os.path.join(opt, "hashlb.yaml"), hashlb_config([("a", port_a)], listen=addr))
    rc, _, err = ct.sh("systemctl start hashlb.socket")
    listen = [l for l in ct.sh("systemctl show -p Listen hashlb.socket")[1].splitlines() if l]
    check(rc == 0 and listen == [f"Listen={addr} (Stream)"],
          f"the socket unit listens on the drop-in's address alone: rc={rc} {err} {listen!r}")
    check(ct.who(addr) == "a", "the first connection starts hashlb, which serves it")
    journal = ct.journal("hashlb")
    check("socket=inherited" in journal and "matches no service" not in journal,
          f"hashlb serves on the socket passed, and is passed no other:\n{journal[-1500:]}")
    rc, out, err = ct.sh(f"/opt/hashlb/bin/hashlb ctl --admin {admin} status")
    check(rc == 0 and "web" in out, f"hashlb ctl asks over the admin Unix socket: rc={rc} {err}")
    rc, _, err = ct.sh("systemctl reload hashlb")
    check(rc == 0 and "reloaded /opt/hashlb/hashlb.yaml (1 reload ok)" in ct.journal("hashlb") and
          "SIGHUP" not in ct.journal("hashlb"),
          f"systemctl reload goes through it: rc={rc} {err}\n{ct.journal('hashlb')[-1500:]}")
    ct.sh("systemctl stop hashlb.socket hashlb")
    ct.poweroff()
    stop(pa)


run_tests([service_start_reload_upgrade_stop, socket_activation,
           socket_dropin_replaces_the_address])
