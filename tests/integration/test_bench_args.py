#!/usr/bin/env python3
"""The benchmarks of bench/ check their command line before they measure anything: --help
prints the usage on stdout and exits 0, a word they do not take is refused on stderr with the
usage and exit 2. Before, hashlb-bench-steer read --help (or any word) as RUNS 0 and printed a
run of one repeat a round as its figures ("repeat=1", "reproduce: ... 0 65536"), and
hashlb-bench-control, -prefix and -clients ran their whole measurement, whatever they were
given. hashlb-bench's usage said "hash %% N". Nothing here measures: its ~100 runs, each
refused or stopped at once, take 5-15 s, most of it Python starting."""
import os
import subprocess
import sys

from lbtest import check, failures

BUILD = os.environ.get("HASHLB_BUILD_ROOT", "build")


def run(exe, *args, env=None):
    """(exit status, stdout, stderr) of <exe> <args> (in <env>, if given); a run that measures
    takes longer than the bound and is stopped, a failure (None)."""
    try:
        p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=30, env=env)
    except subprocess.TimeoutExpired:
        return None, "", "still running after 30 s: it measures"
    return p.returncode, p.stdout, p.stderr


benches = {  # binary: words it takes that must be refused
    "hashlb-bench-control": [("--quik",), ("--quick", "x")],
    "hashlb-bench-prefix": [("x",)],
    "hashlb-bench-clients": [("--quick",)],
    # RUNS and CONNTRACK_ENTRIES: whole numbers from 1 (the flows as hashlb steer --flows)
    "hashlb-bench-steer": [("x",), ("0",), ("10k",), ("-5",), ("10", "402653185"),
                           ("10", "10", "10"), ("1000000001",)],
}
for name, refused in benches.items():
    exe = os.path.join(BUILD, "bench", name)
    if name == "hashlb-bench-steer" and not os.path.exists(exe):
        continue  # built only with -Dbpf=enabled; the others are always built
    for flag in ("--help", "-h"):
        st, out, err = run(exe, flag)
        check(st == 0 and out.startswith(f"usage: {name}") and err == "",
              f"{name} {flag}: exit {st}, stdout {out[:200]!r}, stderr {err[:200]!r}")
    for args in refused:
        st, out, err = run(exe, *args)
        check(st == 2 and out == "" and "unexpected argument '" in err
              and f"usage: {name}" in err,
              f"{name} {' '.join(args)}: exit {st}, stdout {out[:200]!r}, stderr {err[:200]!r}")

st, out, err = run(os.path.join(BUILD, "bench", "hashlb-bench"), "--help")
check(st == 0 and "hash % N" in out and "%%" not in out, f"hashlb-bench --help: {out!r}")
# --format's three outputs, which only its synopsis named: what a script reading csv or json
# finds there (the table's id first in csv, '-' for no value; json's items and rows)
check(all(w in out for w in ("--format md (default)", "csv: ", "'-' where a column has no",
                             "json: {\"command\", \"items\"", "\"rows\"")),
      f"hashlb-bench --help names no format's shape: {out!r}")

# hashlb-bench's options: --help after the command too (it named '--help' an unknown option,
# exit 2); --format without its value, or with one it does not take, says so and names the
# formats (it said "unknown option '--format'", and "unknown option '--format=xml'" where
# "--format xml" said "unknown format"); a word that is no option is not called one.
HB = os.path.join(BUILD, "bench", "hashlb-bench")
for cmd in ("schemes", "lookup", "health"):
    for flag in ("--help", "-h"):
        st, out, err = run(HB, "--format", "json", cmd, "--quick", flag)
        check(st == 0 and out.startswith("usage: hashlb-bench") and err == "",
              f"hashlb-bench {cmd} --quick {flag}: exit {st}, stdout {out[:200]!r}, "
              f"stderr {err[:200]!r}")
refused = {
    ("schemes", "--format"): "hashlb-bench: option --format needs a value: md, csv or json\n",
    ("schemes", "--format", "xml"):
        "hashlb-bench: invalid value 'xml' for option --format (md, csv or json)\n",
    ("lookup", "--format=xml"):
        "hashlb-bench: invalid value 'xml' for option --format (md, csv or json)\n",
    ("health", "--format="):
        "hashlb-bench: invalid value '' for option --format (md, csv or json)\n",
    ("schemes", "--quick", "extra"): "hashlb-bench: unexpected argument 'extra'\n",
    ("schemes", "--quik"): "hashlb-bench: unexpected argument '--quik'\n",
}
# The options before the command too, judged the same ("--format xml schemes" said "unknown
# command '--format'"); --format given twice is refused as hashlb's commands refuse an option
# of one value given twice (the first was dropped unsaid); no command at all is named as such.
refused.update({
    ("--format", "xml", "schemes"):
        "hashlb-bench: invalid value 'xml' for option --format (md, csv or json)\n",
    ("--quick", "--format=csv", "schemes", "--format", "json"):
        "hashlb-bench: option --format given twice ('csv', then 'json'): give it once\n",
    ("lookup", "--format", "md", "--format=md"):
        "hashlb-bench: option --format given twice ('md', then 'md'): give it once\n",
    ("--quik", "health"): "hashlb-bench: unexpected argument '--quik'\n",
    ("--quick",): "hashlb-bench: no command given: schemes, lookup or health\n",
    (): "hashlb-bench: no command given: schemes, lookup or health\n",
    ("help",): "hashlb-bench: unknown command 'help' (schemes, lookup or health)\n",
})
for args, first in refused.items():
    st, out, err = run(HB, *args)
    check(st == 2 and out == "" and err.startswith(first)
          and err[len(first):].startswith("usage: hashlb-bench "),
          f"hashlb-bench {' '.join(args)}: exit {st}, stdout {out[:200]!r}, stderr {err[:300]!r}")

# The Python benches: a count or a duration of 0 or less (or not a number) is refused by
# argparse before anything starts, naming the option and what it takes. Before, --rounds 0
# started hashlb and nginx and ended in IndexError or ZeroDivisionError, and slow_readers
# --seconds 0 printed "200 unanswered, p50 nan ms", as if hashlb had failed.
SRC = os.environ.get("HASHLB_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
py_benches = {  # script: (option, value) pairs refused
    "control_traffic.py": [("--rounds", "0"), ("--seconds", "0")],
    "metrics_scrape.py": [("--scrapes", "0"), ("--services", "-1"), ("--workers", "x")],
    "queue_leaving.py": [("--rounds", "0"), ("--ratio", "0")],
    "resolve_soak.py": [("--seconds", "0"), ("--clients", "0"), ("--every", "nan")],
    "scheme_traffic.py": [("--clients", "0"), ("--backends", "-1")],
    "slow_readers.py": [("--seconds", "0"), ("--probes", "0"), ("--timeout", "-3")],
    "steer_netns.py": [("--reps", "0"), ("--seconds", "inf")],
    "steer_scrape.py": [("--scrapes", "0")],
    "systemd_restart.py": [("--restarts", "0"), ("--threads", "1.5")],
    "upgrade_soak.py": [("--cycles", "0"), ("--clients", "0")],
    "zero_window.py": [("--clients", "0"), ("--settle", "0")],
    "churn_soak.py": [],  # its --hashlb alone, below
}
for script, refused in py_benches.items():
    path = os.path.join(SRC, "bench", script)
    for opt, value in refused:
        # --hashlb names no file: were the value taken, the run would fail otherwise
        st, out, err = run(sys.executable, path, "--hashlb", "/nonexistent/hashlb", opt, value)
        what = "a whole number from 1" if opt in ("--rounds", "--scrapes", "--services",
                                                  "--workers", "--clients", "--probes",
                                                  "--reps", "--restarts", "--threads",
                                                  "--cycles", "--backends") else "a number above 0"
        check(st == 2 and out == "" and f"error: argument {opt}: {what}, not '{value}'" in err,
              f"{script} {opt} {value}: exit {st}, stdout {out[:200]!r}, stderr {err[-300:]!r}")

# scheme_traffic.py --backends 1: its one backend went to maint, its clients had nowhere to
# go, and the run ended in a traceback (ConnectionResetError). (The interpreter stands in for
# hashlb: were 1 taken, hashlb would not start.)
st, out, err = run(sys.executable, os.path.join(SRC, "bench", "scheme_traffic.py"),
                   "--hashlb", sys.executable, "--backends", "1")
check(st == 2 and out == "" and "error: argument --backends: at least 2 (one goes to maint), "
      "not 1" in err, f"scheme_traffic.py --backends 1: exit {st}, stderr {err[-300:]!r}")

# zero_window.py's load is bounded: each client may hold ~8 MiB of the whole machine's TCP
# memory, and a few hundred took it past net.ipv4.tcp_mem (every socket's buffers shrunk, the
# figure per client no longer one); --settle in time. Both were taken, whatever their size.
for opt, value, most in (("--clients", "101", "100"), ("--settle", "31", "30")):
    st, out, err = run(sys.executable, os.path.join(SRC, "bench", "zero_window.py"),
                       "--hashlb", "/nonexistent/hashlb", opt, value)
    check(st == 2 and out == "" and f"error: argument {opt}: at most {most}, not '{value}'" in err,
          f"zero_window.py {opt} {value}: exit {st}, stdout {out[:200]!r}, stderr {err[-300:]!r}")

# --hashlb naming no file it can run is refused the same way, before anything starts (a
# traceback, FileNotFoundError, once scheme_traffic.py's backends had started, before);
# metrics_scrape.py's --baseline too.
for script in py_benches:
    path = os.path.join(SRC, "bench", script)
    cases = [("--hashlb", "/nonexistent/hashlb"), ("--hashlb", SRC)]  # no file; a directory
    if script == "metrics_scrape.py":
        cases.append(("--baseline", "/nonexistent/base"))
    for opt, bad in cases:
        given = [] if opt == "--hashlb" else ["--hashlb", sys.executable]
        st, out, err = run(sys.executable, path, *given, opt, bad)
        check(st == 2 and out == "" and f"error: argument {opt}: no executable file {bad!r}"
              in err, f"{script} {opt} {bad}: exit {st}, stdout {out[:200]!r}, "
              f"stderr {err[-300:]!r}")

# bench/peers/peers.py judges its numbers and names before it starts anything: it took each
# of these and started nginx backends and the load balancers (then failed on an unknown LB, or
# measured 0 repetitions, or ran without hashlb: --hashlb named no file). Run with no PATH, so
# that one taken ends at once (exit 77, no nginx) instead of measuring.
peers = os.path.join(SRC, "bench", "peers", "peers.py")
lbs = "(hashlb, haproxy, nginx, direct, haproxy-splice, bare)"
peers_refused = {
    ("--reps", "0"): "argument --reps: a whole number from 1, not 0",
    ("--duration", "-3"): "argument --duration: a whole number from 1, not -3",
    ("--idle-conns", "-1"): "argument --idle-conns: a whole number from 0, not -1",
    ("--port-base", "65500"): "argument --port-base: 1 to 65495, not 65500",
    ("--nice", "20"): "argument --nice: -20 to 19, not 20",
    ("--lbs", "hashlb,nginix"): f"argument --lbs: unknown load balancer 'nginix' {lbs}",
    ("--candidate", "hashbl"): f"argument --candidate: unknown load balancer 'hashbl' {lbs}",
    ("--profile", "hashlb,x"): f"argument --profile: unknown load balancer 'x' {lbs}",
    ("--hashlb", "/nonexistent/hashlb"): "argument --hashlb: no executable file "
                                         "'/nonexistent/hashlb'",
    # it took the default build's bare forwarder in place of the one named
    ("--lbs", "hashlb,bare", "--bare", "/nonexistent/bare"):
        "argument --bare: no executable file '/nonexistent/bare'",
    # a --variant's binary (ARGS starting with its path): it was handed to the default hashlb
    # as an argument, and the variant left out once the run had started, which went on without
    # it; a directory too
    ("--lbs", "hashlb", "--variant", "before=/nonexistent/hashlb --busy-poll 10"):
        "argument --variant: before: no executable file '/nonexistent/hashlb'",
    ("--variant", f"before={SRC}"): f"argument --variant: before: no executable file {SRC!r}",
}
for args, what in peers_refused.items():
    st, out, err = run(sys.executable, peers, *args,
                       env={**os.environ, "PATH": "/nonexistent", "HASHLB_PEERS_ARGS": ""})
    check(st == 2 and out == "" and f"peers.py: error: {what}\n" in err,
          f"peers.py {' '.join(args)}: exit {st}, stdout {out[:200]!r}, stderr {err[-300:]!r}")
# a --variant's name is one of the LBs (it is measured without being listed, once if listed)
st, out, err = run(sys.executable, peers, "--lbs", "hashlb,big", "--variant", "big=--busy-poll 10",
                   "--candidate", "big", env={**os.environ, "PATH": "/nonexistent",
                                              "HASHLB_PEERS_ARGS": ""})
check(st == 77 and "nginx not found" in err, f"peers.py --variant big: exit {st}, {err[-300:]!r}")

print(f"{'FAILED' if failures else 'ok'}: {len(failures)} failures")
sys.exit(1 if failures else 0)
