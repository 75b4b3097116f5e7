"""Helpers for hashlb's integration tests: start backends and hashlb run as real
processes on loopback, talk to them from chosen client addresses, and clean
every process up (by PID) however the test ends."""
import atexit
import contextlib
import errno
import fcntl
import json
import os
import random
import re
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata

from promtext import parse_prometheus  # noqa: F401 (the tests import it from lbtest)

HASHLB = os.environ.get("HASHLB", "build/src/cli/hashlb")
SRC = os.environ.get("HASHLB_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
BACKEND = os.path.join(SRC, "tests", "tools", "echo-backend")



def _sanitizer_in(marker):
    try:
        with open(HASHLB, "rb") as f:
            return marker in f.read()
    except OSError:
        return False


def tsan_build():
    """True when HASHLB was built with ThreadSanitizer (-Db_sanitize=thread), whose shadow
    memory counts in the process's RSS at two to four times the memory it shadows."""
    return _sanitizer_in(b"ThreadSanitizer:")


def asan_build():
    """True when HASHLB was built with AddressSanitizer (-Dsanitize=true), which maps
    terabytes of shadow address space at start: no RLIMIT_AS for it."""
    return _sanitizer_in(b"libasan.so")


_procs = []
_lbs = []  # every Hashlb started: their logs are checked after each test
_tmp = tempfile.TemporaryDirectory(prefix="hashlb-it-")
failures = []


def listening_sockets(pid=None):
    """The inodes (strings) of the listening TCP sockets of this network namespace, or of
    those <pid> holds (from ss, over netlink: /proc/net/tcp can take seconds to read)."""
    out = subprocess.run(["ss", "-ltnHe"], capture_output=True, text=True, timeout=30).stdout
    inodes = {f[4:] for f in out.split() if f.startswith("ino:")}
    if pid is None:
        return inodes
    return inodes & socket_inodes(pid)


def socket_inodes(pid):
    """The inodes (strings) of the sockets <pid> holds: none if it is gone. A descriptor it
    closes while they are read (a health check's, a client's) is left out, not an error."""
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes  # gone
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    return inodes


def wait_closed(inodes, timeout=10):
    """Wait until none of the listening sockets <inodes> listens any more. A hashlb killed
    (SIGKILL) has exited before its io_uring is torn down, which closes a socket a multishot
    accept was armed on only then (15-40 ms later here): meanwhile it listens on beside the
    next hashlb on its address (SO_REUSEPORT), and a client queued on it is reset."""
    return wait_until(lambda: not inodes & listening_sockets(), timeout)


def _stop_since(n=0):
    """Kill the processes spawned after the first <n> (all: however the test ends), and wait
    until the sockets they listened on are closed."""
    held = set()
    for p in _procs[n:]:
        if p.poll() is None:
            held |= listening_sockets(p.pid)
            try:
                p.kill()
                p.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass
    if held:
        wait_closed(held)


atexit.register(_stop_since)
# The stop signals end this process (the atexit hook above stops what it started). Taken here,
# not ignored, they also reach each process it starts with their default action, whatever the
# shell that started the tests ignored: a command a script runs in the background (no job
# control) ignores SIGINT and SIGQUIT, one under nohup SIGHUP, and an ignored signal stays
# ignored across exec. hashlb keeps an ignored SIGINT or SIGQUIT ignored, as it should
# (inherited_ignores_kept): early_sigquit_stops_as_sigterm's SIGQUIT was lost, and hashlb ran on.
for _sig in (signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP):
    signal.signal(_sig, lambda *a: sys.exit(1))
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:  # python's own handler, as usual
    signal.signal(signal.SIGINT, signal.default_int_handler)


class Skip(Exception):
    """Raised by a test that cannot run here (no privilege, no tool, no kernel feature), with
    the reason: run_tests() counts and prints it as skipped, not passed, and the file exits 77
    when every test of it skipped. (A test that printed "skipped" and returned was counted as
    passed: a run as a user other than root said "all passed" having run none of them.)"""


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)
    return cond


# --- the output formats hashlb promises, checked strictly wherever a test reads them ---

LOGFMT_KEY = re.compile(r"[a-z_][a-z0-9_.]*")
# a bare value: plain printable ASCII without space, '"', '=' or '\\' (docs/operations.md:
# any other is quoted); a quoted one: the escapes it lists (\" \\ \n \r \t \xNN), no raw
# control byte
LOGFMT_PAIR = re.compile(r'([^=\s]*)=([!#-<>-\[\]-~]+|"(?:[^"\\\x00-\x1f\x7f]|\\["\\nrt]|\\x[0-9a-f]{2})*")(?= |$)')
# the pair that ends every line: the pid of the process that wrote it
SELF_PID = re.compile(r" self_pid=(\d+)$")
# what hashlb run prints, not logged, when it refuses to start (docs: FILE:LINE:COL: error: ...)
START_ERROR = re.compile(r"^(?!ts=)\S.*: error: ")


def logfmt_error(line):
    """Why <line> (without its newline) is not a strict logfmt line with ts, level and msg,
    or None."""
    if "\ufffd" in line or any("\udc80" <= c <= "\udcff" for c in line):
        return "not UTF-8"
    pos, keys = 0, []
    while pos < len(line):
        m = LOGFMT_PAIR.match(line, pos)
        if not m:
            return f"no key=value at byte {pos}: {line[pos:pos + 40]!r}"
        if not LOGFMT_KEY.fullmatch(m.group(1)):
            return f"bad key {m.group(1)!r}"
        if m.group(1) in keys:
            return f"key {m.group(1)} twice"
        keys.append(m.group(1))
        pos = m.end()
        if pos < len(line):
            if line[pos] != " " or pos + 1 == len(line):
                return f"not one space between pairs at byte {pos}"
            pos += 1
    if keys[:3] != ["ts", "level", "msg"]:
        return f"does not start ts= level= msg=: keys {keys[:3]}"
    return None


def logfmt_fields(line):
    """{key: value} of a logfmt line, quoted values unescaped (\\xNN: the byte, as
    os.fsdecode() has it)."""
    def value(v):
        if not v.startswith('"'):
            return v
        out, i, v = bytearray(), 0, v[1:-1]
        while i < len(v):
            if v[i] == "\\":
                e = v[i + 1]
                if e == "x":
                    out.append(int(v[i + 2:i + 4], 16))
                    i += 4
                    continue
                out += {"n": b"\n", "r": b"\r", "t": b"\t"}.get(e, e.encode())
                i += 2
            else:
                out += v[i].encode("utf-8", "surrogateescape")
                i += 1
        return os.fsdecode(bytes(out))
    return {m.group(1): value(m.group(2)) for m in LOGFMT_PAIR.finditer(line)}


def check_logfmt(lines, who="hashlb"):
    """Every line of <lines> strict logfmt (a refusal to start excepted): one failure for
    the first bad line."""
    for line in lines:
        if START_ERROR.match(line):
            continue
        why = logfmt_error(line)
        if why:
            return check(False, f"{who} logged a line that is not strict logfmt ({why}): {line!r}")
    return True


def _no_constant(c):
    raise ValueError(f"{c} is not JSON")


def _no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"key {k!r} twice in an object")
        d[k] = v
    return d


def json_strict(text):
    """json.loads() refusing what RFC 8259 does not allow (NaN, Infinity) and an object
    with a key twice."""
    return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)


def check_format(parse, text, who):
    """<text>, the output of <who>, parses with <parse> (json_strict, parse_prometheus)."""
    try:
        parse(text)
    except ValueError as e:
        return check(False, f"{who}: not valid ({parse.__name__}: {e}): {text[:200]!r}")
    return True


def text_columns(text):
    """The columns <text> takes on a terminal: 2 a wide (East Asian) character, none a
    combining one, 1 any other."""
    return sum(0 if unicodedata.combining(c) else
               2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def tmppath(name):
    """A path in the tests' directory, nothing created there (a socket's, a binary's)."""
    return os.path.join(_tmp.name, name)


def tmpfile(name, text):
    path = os.path.join(_tmp.name, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def spawn(args, **kw):
    p = subprocess.Popen(args, **kw)
    _procs.append(p)
    return p


def threads_state(pid):
    """Where each thread of process <pid> is (its state, the kernel function it waits in, its
    kernel stack when readable): for a failure's message, a hang told apart from a slow
    start (a process stopped by a signal, one waiting on a pipe, one on a lock)."""
    out = []
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError as e:
        return f"process {pid}: {e.strerror}"
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}/"
        try:
            with open(base + "stat") as f:
                stat = f.read()
            name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:]
            with open(base + "wchan") as f:
                wchan = f.read().strip()
            try:
                with open(base + "stack") as f:
                    stack = " < ".join(l.split()[1].split("+")[0] for l in f if l.strip())
            except OSError:
                stack = "-"
            out.append(f"thread {tid} ({name}): state {rest.split()[0]}, wchan {wchan or '-'}, "
                       f"stack {stack or '-'}")
        except (OSError, ValueError, IndexError) as e:
            out.append(f"thread {tid}: {e}")
    return "\n".join(out)


def stop(p, sig=signal.SIGTERM, timeout=10):
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode


# Ports of stopped backends, each held by a socket bound there, not listening (connects are
# refused, as to nothing), until a backend or BlackHole is started there again: with tests run
# side by side, a freed port could go to another test's port-0 listener, and this test's
# "refusing" backend would answer as that one (once in about 4 CI runs: test_failover served
# by another test's server on x's port). A port-0 bind skips a port any socket is bound to,
# SO_REUSEADDR or not.
_reserved = {}


def hold_port(host, port):
    """Hold <host>:<port>, a backend's port that it stopped listening on, until a backend
    listens there again (listen_on(), Backend, BlackHole): see _reserved."""
    if (host, port) in _reserved:
        return  # held already (a backend killed, then stopped)
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, port))
    except OSError:
        s.close()  # taken already: nothing to hold
        return
    _reserved[(host, port)] = s


def release_port(host, port):
    """Stop holding <host>:<port> (hold_port(), dead_port()), for a backend to listen there."""
    s = _reserved.pop((host, port), None)
    if s:
        s.close()


def listen_on(port=0, host="127.0.0.1", backlog=64):
    """A socket listening on <host>:<port>: a port held for a backend (hold_port(), dead_port())
    is released to it; 0: one the kernel picks."""
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    if port:
        release_port(host, port)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(backlog)
    return s


def close_listening(s):
    """Close <s>, a backend's listening socket, its port held as a stopped Backend's is: the
    backend refuses connects, and no other test's port-0 listener is given its port."""
    host, port = s.getsockname()[:2]
    s.close()
    hold_port(host, port)


class Backend:
    def __init__(self, name, port=0, host="127.0.0.1"):
        self.name = name
        self.host = host
        if port:
            release_port(host, port)
        self.proc = spawn([sys.executable, BACKEND, "--name", name, "--port", str(port),
                           "--host", host],
                          stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().split()
        if len(line) != 3 or line[0] != "ready":
            raise SystemExit(f"backend {name} did not start: {line}")
        self.addr = line[2]
        self.port = int(self.addr.rsplit(":", 1)[1])

    def stop(self):
        stop(self.proc)
        self._hold()

    def kill(self):
        """SIGKILL it (it dies at once, nothing closed in order), its port held as stop()'s."""
        self.proc.kill()
        self.proc.wait()
        self._hold()

    def _hold(self):
        if self.host == "::1" or self.host.startswith("127."):
            hold_port(self.host, self.port)


def backends_on_one_port(specs, tries=10):
    """Backends [(name, host), ...] all on one port, which the first picks: a port free on
    one loopback address may be taken on another (a client's ephemeral port there), so a
    conflict picks another port rather than failing the test."""
    for _ in range(tries):
        out = [Backend(specs[0][0], host=specs[0][1])]
        try:
            for name, host in specs[1:]:
                out.append(Backend(name, port=out[0].port, host=host))
            return out
        except SystemExit:
            for b in out:
                b.stop()
    raise SystemExit(f"no port free on every host of {specs} in {tries} tries")


class BlackHole:
    """A backend that never answers: its accept queue is full, so SYNs are dropped and a
    connect to <addr> ("127.0.0.1:PORT") hangs until the connector's timeout. <port>: on
    that one (a backend's, stopped), else on one the kernel picks."""

    def __init__(self, port=0):
        self.sock = listen_on(port, backlog=0)
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.fillers = []
        for _ in range(3):  # fill the accept queue; later SYNs are dropped
            f = socket.socket()
            f.setblocking(False)
            try:
                f.connect(self.sock.getsockname())
            except BlockingIOError:
                pass
            self.fillers.append(f)
        time.sleep(0.2)

    def close(self):
        """Refuse from now on, its port held (close_listening()): a test that opens it again
        there (test_control_health's flapping error) is not beaten to it by another test."""
        for f in self.fillers:
            f.close()
        close_listening(self.sock)


def dead_port(hold=True):
    """A loopback port nobody listens on (connects are refused). Held (hold_port()): its socket
    stays bound, not listening, until a backend listens there (listen_on(), Backend,
    BlackHole), so that no port 0 bind (a hashlb listener or admin endpoint, another test's) is
    given it meanwhile: a hashlb whose port-0 listener got one of its own dead backends' ports
    would forward to itself, connection after connection, until the fd limit. hold=False: only
    free now, for a caller to bind."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    if hold:
        _reserved[("127.0.0.1", port)] = s
    else:
        s.close()
    return port


def config(backends, name="t", scheme="maglev", key="src-ip", extra="", workers=2, listen="127.0.0.1:0",
           passive=False):
    """A one-service config, checks off; <backends> is a list of (name, "host:port").
    <passive>: passive-only health on (the default of a config with checks off); off here,
    every backend up whatever its connects, for the tests of the forwarder's retries."""
    lines = [f"workers: {workers}", "admin: off", "services:", f"  - name: {name}",
             f"    listen: {listen}", f"    scheme: {scheme}", f"    hash_key: {key}",
             "    health:", "      enabled: false", f"      passive: {str(passive).lower()}"]
    lines += ["    " + l for l in extra.strip("\n").splitlines()] if extra else []
    lines.append("    backends:")
    for n, a in backends:
        lines += [f"      - name: {n}", f"        address: {a}"]
    return "\n".join(lines) + "\n"


class Hashlb:
    """hashlb run on a config; .addr is the (first) service's bound address."""

    def __init__(self, cfg_text, args=(), fname="hashlb.yaml", wait=True, nofile=None, wrap=(),
                 binary=HASHLB, env=None, start_within=10, pass_fds=(), log_file=False):
        """<wrap>: a command prefix that execs hashlb (same PID), e.g. into a namespace;
        <binary>: the hashlb to run; <env>: its environment (default: ours); <start_within>:
        seconds it may take to start (a test's failure past it, not a measurement);
        <pass_fds>: descriptors it inherits (for <wrap>); <log_file>: stderr to a file,
        followed, rather than a pipe: hashlb drops the connection log lines a pipe's reader
        does not take in time (hashlb_log_dropped_total), and this reader, a thread of a
        test busy with thousands of sockets on a loaded machine, can fall that far behind;
        a file takes every line."""
        self.path = tmpfile(fname, cfg_text)
        self.log = []  # the lines, without the self_pid= that ends each
        self.raw_log = []  # the lines as written
        log_path = tmppath(fname + ".log") if log_file else None

        def limit():
            if nofile:
                import resource
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        with open(log_path, "w") if log_path else contextlib.nullcontext(subprocess.PIPE) as err:
            self.proc = spawn([*wrap, binary, "run", "-c", self.path, *args], stderr=err,
                              text=True, errors="surrogateescape", preexec_fn=limit, env=env,
                              pass_fds=pass_fds)
        _lbs.append(self)
        self._ready = threading.Event()
        self.addrs = []
        self._reader = threading.Thread(target=self._read, args=(log_path,), daemon=True)
        self._reader.start()
        if wait and not self._ready.wait(start_within):
            raise SystemExit("hashlb did not start:\n" + "\n".join(self.log) + "\n" +
                             threads_state(self.proc.pid))

    def _lines(self, log_path):
        """hashlb's stderr, line by line, to its end: the pipe's, or the file's as it grows."""
        if not log_path:
            yield from self.proc.stderr
            return
        with open(log_path, errors="surrogateescape") as f:
            part = ""
            while True:
                running = self.proc.poll() is None
                part += f.read()
                *lines, part = part.split("\n")
                yield from lines
                if not running:
                    break
                if not lines:
                    time.sleep(0.02)
            if part:
                yield part

    def _read(self, log_path=None):
        for line in self._lines(log_path):
            line = line.rstrip("\n")
            self.raw_log.append(line)
            # the writer's pid ends every line (docs/operations.md); tests match the rest
            self.log.append(SELF_PID.sub("", line))
            if os.environ.get("HASHLB_TEST_VERBOSE"):
                print("  hashlb:", line, flush=True)
            m = re.search(r"msg=listening .*addr=(\S+)", line)
            if m:
                self.addrs.append(m.group(1))
            if "msg=started" in line:
                self._ready.set()
        self._ready.set()

    @property
    def addr(self):
        host, port = self.addrs[0].rsplit(":", 1)
        return host, int(port)

    def wait_log(self, pattern, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            if any(re.search(pattern, l) for l in self.log):
                return True
            time.sleep(0.05)
        return False

    def stop(self, sig=signal.SIGTERM, timeout=15):
        return stop(self.proc, sig, timeout)

    def log_to_end(self, timeout=10):
        """The whole log of a stopped hashlb: what it wrote last (a sanitizer's report at exit)
        read too, not only what the reader had reached when stop() returned."""
        self._reader.join(timeout)
        return list(self.log)

    def drain_ends(self):
        """Of a stopped hashlb, its one msg=stopped line's (finished, drain_timeout): the
        connections that ended by themselves during the drain and those closed at their
        deadline (or by a second signal); None without exactly one such line."""
        stopped = [logfmt_fields(l) for l in self.log_to_end() if " msg=stopped" in l]
        if len(stopped) != 1:
            return None
        return int(stopped[0].get("finished", -1)), int(stopped[0].get("drain_timeout", -1))

    def service_addrs(self):
        """{service name: (host, port)} of the services it listens for, from its log."""
        addrs = {}
        for l in self.log:
            m = re.search(r"msg=listening .*addr=(\S+):(\d+) service=(\w+)", l)
            if m:
                addrs[m.group(3)] = (m.group(1), int(m.group(2)))
        return addrs

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


def suspend(proc):
    """SIGSTOP <proc> (hashlb, say) and wait until every thread of it is stopped (state T):
    the signal takes a moment to reach each one, and a worker still running handles what
    the caller meant it to find later, all at once (test_connlog's reset_before_routed: a
    client read before the stop took, 11 runs in 30). Whether it was, within 10 s."""
    proc.send_signal(signal.SIGSTOP)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        states = []
        try:
            tids = os.listdir(f"/proc/{proc.pid}/task")
        except OSError:
            return False  # it exited
        for tid in tids:
            try:
                with open(f"/proc/{proc.pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass  # a thread that exited meanwhile
        if states and all(st in "Tt" for st in states):
            return True
        time.sleep(0.001)
    return False


@contextlib.contextmanager
def frozen(proc):
    """<proc> suspended (suspend()) while the body runs, SIGCONT however it ends."""
    try:
        if not suspend(proc):
            raise AssertionError(f"process {proc.pid} not stopped within 10 s")
        yield
    finally:
        proc.send_signal(signal.SIGCONT)


def serve_each(srv, handle, with_addr=False):
    """Accept on listening socket <srv>, each connection handled by <handle>(conn) (with
    <with_addr>: <handle>(conn, peer address as accept() gave it, which getpeername() may not
    once the peer reset, as health checks do)) in a thread of its own, until the returned
    stop() closes it (stop(hold=True): its port then held, close_listening()). stop() shuts
    the listener down first and waits for the accepting thread: a plain close() leaves a
    blocked accept() holding the listener, and the thread may then accept on whatever socket
    reuses the fd number (a later test's backend), handing that test's connection to this
    handler."""
    done = threading.Event()

    def loop():
        while not done.is_set():
            try:
                c, peer = srv.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(c, peer) if with_addr else (c,),
                             daemon=True).start()

    t = threading.Thread(target=loop, daemon=True)
    t.start()

    def stop(hold=False):
        done.set()
        try:
            srv.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        t.join(5)
        if hold:
            close_listening(srv)
        else:
            srv.close()

    return stop


class StallWatch:
    """How long this test process itself was kept from running (the machine or its VM
    stalled, e.g. a neighbour's burst on a shared host): a thread sleeps <tick> at a time
    and keeps the longest time one sleep took. A client timeout that falls inside such a
    stall says nothing about hashlb, which was frozen with it."""

    def __init__(self, tick=0.02):
        self.tick = tick
        self.longest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        last = time.monotonic()
        while not self._stop.wait(self.tick):
            now = time.monotonic()
            self.longest = max(self.longest, now - last - self.tick)
            last = now

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class Names:
    """The files a mount namespace of a test sees as /etc/hosts, nsswitch.conf and resolv.conf:
    host names that are the test's own, no query leaving the machine."""

    def __init__(self, tag, hosts, nss="files", resolv="nameserver 127.0.0.9\n"):
        self.hosts = tmpfile(f"{tag}.hosts", hosts)
        self.nss = tmpfile(f"{tag}.nsswitch", f"hosts: {nss}\n")
        self.resolv = tmpfile(f"{tag}.resolv", resolv)

    def set_hosts(self, text):
        # in place: the bind mount follows the inode, not the path
        with open(self.hosts, "w") as f:
            f.write(text)

    def wrap(self):
        """A command prefix that runs the rest in a mount namespace seeing these files."""
        script = ("mount --bind \"$1\" /etc/hosts && mount --bind \"$2\" /etc/nsswitch.conf && "
                  "mount --bind \"$3\" /etc/resolv.conf && shift 3 && exec \"$@\"")
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                self.hosts, self.nss, self.resolv]

    def check(self, cfg_path):
        """hashlb check -c in the namespace: (exit status, stdout, stderr)."""
        p = subprocess.run([*self.wrap(), HASHLB, "check", "-c", cfg_path],
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout, p.stderr


def syn_sent(port, host="127.0.0.1"):
    """How many sockets of this network namespace connect to <host>:<port>, their SYN not
    answered yet (one whose SYN a full accept queue dropped stays so until it is sent again):
    from ss, over netlink (/proc/net/tcp can take seconds to read)."""
    out = subprocess.run(["ss", "-tnH", "state", "syn-sent", "dst", f"{host}:{port}"],
                         capture_output=True, text=True, check=True, timeout=30).stdout
    return len(out.splitlines())


def port_free(port, host="0.0.0.0"):
    """Whether <host>:<port> can be bound now (no listener, no connection on it)."""
    s = socket.socket()
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


PORT_LOCKS = "/tmp/hashlb-test-ports"
_picked_ports = {}  # port: the descriptor holding its lock, for as long as this process lives


def pick_port(host="127.0.0.1"):
    """A port that <host>:PORT can be bound on now, for a config that must name its port (an
    upgrade's new process reads the same config and takes the same address over, a test frees
    a port for hashlb to bind: port 0 gives neither). Below the ephemeral range: a connection
    or a port-0 socket cannot take it meanwhile. Picked by no other test process running, nor
    by this one before: each pick holds a lock (flock) on PORT_LOCKS/PORT while this process
    lives. (Picks remembered by each process alone: two parts of a file side by side could
    pick the same port at once.)"""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    if not os.path.isdir(PORT_LOCKS):
        os.makedirs(PORT_LOCKS, exist_ok=True)
        os.chmod(PORT_LOCKS, 0o1777)  # any user's tests: /tmp's own mode
    start = random.randrange(1024, low - 1000)
    for port in [*range(start, low), *range(1024, start)]:
        if port in _picked_ports:
            continue
        fd = os.open(f"{PORT_LOCKS}/{port}", os.O_RDONLY | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another process's pick
            os.close(fd)
            continue
        if not port_free(port, host):
            os.close(fd)
            continue
        _picked_ports[port] = fd
        return port
    raise SystemExit(f"no free port below {low} on {host}")

def wait_until(cond, timeout=10, step=0.02):
    """Poll <cond>() until true or <timeout> s: whether it came true."""
    end = time.time() + timeout
    while not cond():
        if time.time() >= end:
            return False
        time.sleep(step)
    return True


def client_ip(i):
    """The i-th client address on 127.0.0.0/8 (never 127.0.0.0 or .255)."""
    i += 1
    return f"127.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255 or 1}"


def connecting(addr, n, first):
    """<n> clients connecting to <addr>, non-blocking, from client_ip(<first>) on (one each): for
    the tests of the clients that wait in a listening socket's backlog."""
    socks = []
    for i in range(n):
        s = socket.socket()
        s.bind((client_ip(first + i), 0))
        s.setblocking(False)
        s.connect_ex(addr)
        socks.append(s)
    return socks


class ResetSocket:
    """A client connection reset before connect() returned: a client refused at once is
    reset, and the reset may overtake the connect's own completion (on loopback, say), which
    then fails with ECONNRESET. Reads and writes say what they would have said on the socket
    had connect() returned first: the connection was reset."""

    def __init__(self, s):
        self._s = s

    def recv(self, *args, **kwargs):
        raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")

    recv_into = send = sendall = recv

    def __getattr__(self, name):
        return getattr(self._s, name)


def connect(addr, src=None, timeout=5):
    s = socket.socket(socket.AF_INET6 if ":" in addr[0] else socket.AF_INET)
    s.settimeout(timeout)
    if src:
        s.bind((src, 0))
    try:
        s.connect(addr)
    except ConnectionResetError:
        return ResetSocket(s)
    return s



def clients_at_once(addr, n, first_ip=None):
    """<n> clients connecting to <addr> at once (non-blocking sockets, no wait); with
    <first_ip>, each from its own address, client_ip(first_ip + i)."""
    socks = []
    for i in range(n):
        s = socket.socket()
        if first_ip is not None:
            s.bind((client_ip(first_ip + i), 0))
        s.setblocking(False)
        s.connect_ex(addr)
        socks.append(s)
    return socks


def read_line(s):
    buf = b""
    while not buf.endswith(b"\n"):
        d = s.recv(1)
        if not d:
            break
        buf += d
    return buf.decode().strip()


def read_head(s):
    """What <s> receives up to an HTTP head's end (the blank line) or the peer's FIN: the
    head, and whatever came with it."""
    data = b""
    while b"\r\n\r\n" not in data:
        d = s.recv(4096)
        if not d:
            break
        data += d
    return data


def read_to_eof(s, chunk=1 << 20):
    """Everything <s> receives until the peer's FIN."""
    data = b""
    while True:
        d = s.recv(chunk)
        if not d:
            return data
        data += d


def outcome(s, timeout=10):
    """Read <s> to its end: (bytes read, "FIN" or "RST")."""
    s.settimeout(timeout)
    n = 0
    try:
        while True:
            d = s.recv(1 << 16)
            if not d:
                return n, "FIN"
            n += len(d)
    except ConnectionResetError:
        return n, "RST"

def read_each(socks, want, sel):
    """Read each of <socks> until it holds <want[s]> bytes, or its end (b"" then read), or a
    reset: {sock: bytes}, the resets as None. A hang guard only: 30 s without a byte for any."""
    got = {s: b"" for s in socks}
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    left = len(socks)
    while left:
        ready = sel.select(30)
        if not ready:
            break
        for key, _ in ready:
            s = key.fileobj
            try:
                d = s.recv(65536)
            except ConnectionResetError:
                got[s], d = None, b""
            if d:
                got[s] += d
            if not d or len(got[s]) >= want[s]:
                sel.unregister(s)
                left -= 1
    for s in list(sel.get_map().values()):
        sel.unregister(s.fileobj)
    return got


def connect_outcome(addr, src=None):
    """A client from <src> that sends nothing, read to its end: outcome()."""
    s = connect(addr, src)
    try:
        return outcome(s)
    finally:
        s.close()


def who(addr, src=None):
    """The name of the backend a client at <src> reaches, "" if closed without a greeting
    (a client refused is reset)."""
    s = connect(addr, src)
    try:
        return read_line(s)
    except (ConnectionError, socket.timeout):
        return ""
    finally:
        s.close()


def lookup(cfg_path, clients, args=()):
    """hashlb lookup -c for each client: {client: [backend, pref...]}; <args>: more options
    (--vip ADDR:PORT)."""
    out = {}
    for i in range(0, len(clients), 500):
        chunk = clients[i:i + 500]
        p = subprocess.run([HASHLB, "lookup", "-c", cfg_path, *args, ",".join(chunk)],
                           capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise SystemExit(f"hashlb lookup failed: {p.stderr}")
        for line in p.stdout.splitlines():
            f = line.split()
            out[f[0]] = f[2].split(",")
    return out


def _check_logs(n):
    """Every line the hashlb processes started since the first <n> wrote (those they
    started in turn, an upgrade's, share their stderr): strict logfmt."""
    for lb in _lbs[n:]:
        if lb.proc.poll() is not None:
            lb.log_to_end(timeout=5)
        lines = list(lb.raw_log)
        check_logfmt(lines, f"hashlb (pid {lb.proc.pid})")
        bare = [l for l in lines if not START_ERROR.match(l) and not SELF_PID.search(l)]
        check(not bare, f"hashlb (pid {lb.proc.pid}): a line without its self_pid=: {bare[:1]}")
    del _lbs[n:]


STALL = 1.0     # s: a test during which this process was kept from running this long is rerun


def part_of(tests, argv=None):
    """The tests of this run: all of them, or with "--part K/N" on the command line every Nth
    from the Kth (1-based), so that meson runs one long file as N tests side by side
    (tests/integration/meson.build): a test added to the file falls into a part by itself."""
    argv = sys.argv[1:] if argv is None else argv
    if "--part" not in argv:
        return tests
    k, n = map(int, argv[argv.index("--part") + 1].split("/"))
    if not 1 <= k <= n:
        raise SystemExit(f"--part {k}/{n}: K must be 1 to N")
    return tests[k - 1::n]


def run_tests(tests):
    """Run each test of this part (part_of()). A test that failed while this process itself was kept from running
    for STALL seconds or more (the machine or its VM stalled, hashlb and the clients frozen
    together: timeouts fire on resume) runs once more, its first failures set aside and
    printed; the second run decides. What a test left running (one that raised before it
    stopped its hashlb, a process that drains still) is stopped before the next one: left
    there, it went on serving the next tests' address, or held a listening socket they
    shared (SO_REUSEPORT), and one failure made many. A test that raises Skip is counted
    as skipped; the summary names them, and the file exits 77 if every test skipped, 1 if
    any failed."""
    tests, skipped = part_of(tests), []
    for t in tests:
        n_start, n_lbs = len(_procs), len(_lbs)
        for attempt in (1, 2):
            t0 = time.time()
            print(f"--- {t.__name__}" + (" (second run)" if attempt == 2 else ""), flush=True)
            n_failures, n_procs = len(failures), len(_procs)
            if skipped and skipped[-1] == t.__name__:  # its second run decides
                skipped.pop()
            with StallWatch() as stall:
                try:
                    t()
                except Skip as e:
                    print(f"    skipped: {e}", flush=True)
                    skipped.append(t.__name__)
                except Exception as e:  # a crash in one test is a failure, the others still run
                    import traceback
                    traceback.print_exc()
                    check(False, f"{t.__name__} raised {e!r}")
            print(f"    {time.time() - t0:.1f}s", flush=True)
            if len(failures) == n_failures or stall.longest < STALL or attempt == 2:
                break
            print(f"    this process was kept from running for {stall.longest:.1f} s during "
                  f"{t.__name__} (the machine stalled, hashlb with it): its "
                  f"{len(failures) - n_failures} failure(s) above are set aside, it runs again",
                  flush=True)
            del failures[n_failures:]
            _stop_since(n_procs)
        _stop_since(n_start)
        _check_logs(n_lbs)
    _stop_since()
    if skipped:  # one line .ci/run reads: skips are no passes
        print(f"{len(skipped)} of {len(tests)} test(s) skipped: {' '.join(skipped)}")
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    if skipped and len(skipped) == len(tests):
        sys.exit(77)
    print(f"{len(tests) - len(skipped)} passed" if skipped else "all passed")


def greetings(socks, within=30):
    """The first bytes each of <socks> (connecting, non-blocking) reads, b"" for one closed
    or reset, in the order they answer; those that answer within <within> seconds."""
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    got, end = [], time.monotonic() + within
    while len(got) < len(socks) and time.monotonic() < end:
        for key, _ in sel.select(timeout=1):
            try:
                got.append(key.fileobj.recv(64))
            except OSError:
                got.append(b"")
            sel.unregister(key.fileobj)
    return got
