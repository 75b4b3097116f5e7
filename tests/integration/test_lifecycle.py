#!/usr/bin/env python3
"""hashlb run's life: a bad config is refused with its file:line, SIGTERM drains (established
connections keep flowing, new ones are refused, exit 0 once they end or at the drain timeout),
and SIGHUP reloads without closing unchanged listeners or established connections."""
import re
import signal
import socket
import subprocess
import time

from lbtest import (HASHLB, Backend, Hashlb, check, config, connect, read_line, run_tests,
                    tmpfile, who)

backends = [Backend(n) for n in ("a", "b", "c")]
BACKENDS = [(b.name, b.addr) for b in backends]


def config_error_refused():
    """A config error stops hashlb run at once: exit 1, FILE:LINE:COL on stderr."""
    text = config(BACKENDS).replace("    hash_key: src-ip\n", "    hash_key: src-ip\n    bogus_key: 1\n")
    line = text.splitlines().index("    bogus_key: 1") + 1
    path = tmpfile("bad.yaml", text)
    p = subprocess.run([HASHLB, "run", "-c", path], capture_output=True, text=True, timeout=20)
    check(p.returncode == 1, f"exit status 1, got {p.returncode}")
    check(re.search(rf"bad\.yaml:{line}:\d+: error: ", p.stderr) is not None,
          f"error names line {line}: {p.stderr.strip()}")


def sigterm_drain():
    """During the drain an established connection keeps transferring, new connections are
    refused, and hashlb exits 0 as soon as the last connection ends."""
    lb = Hashlb(config(BACKENDS, extra="timeouts:\n  drain: 20s"))
    s = connect(lb.addr, timeout=5)
    read_line(s)
    lb.proc.send_signal(signal.SIGTERM)
    check(lb.wait_log("msg=draining"), "hashlb logs the drain")
    refused = False
    end = time.time() + 3
    while time.time() < end and not refused:
        try:
            c = connect(lb.addr, timeout=1)
            c.close()
            time.sleep(0.05)
        except (ConnectionRefusedError, socket.timeout):
            refused = True
    check(refused, "new connections are refused during the drain")
    for i in range(20):
        s.sendall(b"during drain %d\n" % i)
        check(read_line(s) == "during drain %d" % i, "the established connection keeps flowing")
        time.sleep(0.02)
    check(lb.proc.poll() is None, "hashlb waits for the established connection")
    t0 = time.time()
    s.close()
    try:
        rc = lb.proc.wait(5)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, f"exit 0 once the last connection closed, got {rc} after {time.time() - t0:.1f}s")


def drain_timeout():
    """A connection still open at the end of the drain timeout is closed, then exit 0."""
    lb = Hashlb(config(BACKENDS, extra="timeouts:\n  drain: 1s"))
    s = connect(lb.addr, timeout=5)
    read_line(s)
    t0 = time.time()
    lb.proc.send_signal(signal.SIGINT)
    try:
        rc = lb.proc.wait(6)
    except subprocess.TimeoutExpired:
        rc = None
    el = time.time() - t0
    check(rc == 0 and 0.8 < el < 4, f"exit 0 after the 1s drain timeout, got {rc} after {el:.1f}s")
    try:
        d = s.recv(10)
    except ConnectionError:
        d = b""
    check(d == b"", "the connection was closed")
    s.close()


def reload_keeps_listeners_and_connections():
    """SIGHUP with one more service and one backend fewer: the old listener is never closed,
    the established connection keeps its backend, the new service serves."""
    text = config(BACKENDS)
    lb = Hashlb(text)
    addr = lb.addr
    s = connect(addr, timeout=5)
    first = read_line(s)
    # The new config: the same service on the same (now known) port without 'first', plus
    # a second service on a new port.
    kept = [b for b in BACKENDS if b[0] != first]
    new = config(kept, listen=f"{addr[0]}:{addr[1]}")
    new += "\n".join(config(BACKENDS, name="u").splitlines()[3:]) + "\n"
    with open(lb.path, "w") as f:
        f.write(new)
    stop_probe = False
    refused = 0

    import threading

    def probe():
        nonlocal refused
        while not stop_probe:
            try:
                c = connect(addr, timeout=2)
                if read_line(c) not in ("a", "b", "c"):
                    refused += 1
                c.close()
            except OSError:
                refused += 1

    t = threading.Thread(target=probe)
    t.start()
    time.sleep(0.2)
    lb.proc.send_signal(signal.SIGHUP)
    check(lb.wait_log("msg=reloaded"), "hashlb logs the reload")
    time.sleep(0.3)
    stop_probe = True
    t.join()
    check(refused == 0, f"no connection refused or dropped during the reload ({refused})")
    s.sendall(b"after reload\n")
    check(read_line(s) == "after reload", f"the connection to {first} survives the reload")
    check(len(lb.addrs) == 2, f"a listener opened for the new service: {lb.addrs}")
    if len(lb.addrs) == 2:
        host, port = lb.addrs[1].rsplit(":", 1)
        check(who((host, int(port))) in ("a", "b", "c"), "the new service serves")
    names = {who(addr, f"127.9.0.{i}") for i in range(1, 60)}
    check(first not in names, f"the removed backend {first} takes no new client: {names}")
    # A broken config on SIGHUP is refused and the running one kept.
    with open(lb.path, "w") as f:
        f.write("services: [\n")
    lb.proc.send_signal(signal.SIGHUP)
    check(lb.wait_log("msg=\"reload failed"), "a broken config is refused on reload")
    check(who(addr) in ("a", "b", "c"), "and the running config keeps serving")
    s.close()
    check(lb.stop() == 0, "exit 0")


run_tests([config_error_refused, sigterm_drain, drain_timeout,
           reload_keeps_listeners_and_connections])
