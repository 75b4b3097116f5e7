#!/usr/bin/env python3
"""The documentation names what the code has: each command's --help lists every option its
parser accepts and no other (with the short form the parser gives it) and names no option
the command does not take, every metric the docs
and configs name is one hashlb writes, and every family it writes is in docs/control.md; every
log message (msg=) and connection end (end=) they quote is one hashlb writes, with the keys
they show after it, and the
connection log's table has every end; every command line they show
gives only options its command takes, from a build directory they set up; the examples that need no running hashlb (table,
lookup, check in a console block, an EXAMPLES section, a config's header) run, and those in
a console block print what it shows.
Reads the sources, runs --help and those examples: it takes a second."""
import os
import re
import shlex
import subprocess
import sys

HASHLB = os.environ.get("HASHLB", "build/src/cli/hashlb")
SRC = os.environ.get("HASHLB_SOURCE_ROOT",
                     os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


def read(*path):
    with open(os.path.join(SRC, *path)) as f:
        return f.read()


# --- options: what each parser accepts against what its --help lists ---
table_args = read("src", "cli", "table_args.h")
macros = {
    "TABLE_ARGS_LONGOPTS":
        re.search(r"#define TABLE_ARGS_LONGOPTS(.*?)#define", table_args, re.S).group(1),
    "TABLE_ARGS_SHORTOPTS": re.search(r'#define TABLE_ARGS_SHORTOPTS "([^"]*)"', table_args).group(1),
}
OPTION = re.compile(r'\{\s*"([a-z][a-z0-9-]*)",\s*(?:no|required|optional)_argument,\s*NULL,\s*'
                    r"(?:'(.)'|0x[0-9a-fA-F]+)\s*\}")


def parser_options(path):
    """{long name: short letter or None} that the getopt loop of <path> accepts."""
    src = read("src", "cli", path)
    longs = {}
    for body in re.findall(r"static const struct option \w+\[\] = \{(.*?)\n\t\};", src, re.S):
        body = body.replace("TABLE_ARGS_LONGOPTS", macros["TABLE_ARGS_LONGOPTS"])
        for name, val in OPTION.findall(body.replace("\\\n", "\n")):
            longs[name] = val or None
    call = re.search(r'cli_getopt\(argc, argv,\s*((?:"[^"]*"\s*|TABLE_ARGS_SHORTOPTS\s*)+)', src)
    optstring = "".join(macros["TABLE_ARGS_SHORTOPTS"] if part == "TABLE_ARGS_SHORTOPTS"
                        else part.strip('"')
                        for part in re.findall(r'"[^"]*"|TABLE_ARGS_SHORTOPTS', call.group(1)))
    shorts = set(optstring.replace(":", "").replace("+", ""))
    got = {name: (val if val in shorts else None) for name, val in longs.items()}
    paired = {v for v in got.values() if v}
    check(shorts <= paired, f"{path}: short options without a long one: {sorted(shorts - paired)}")
    return got


def help_options(cmd):
    """{long name: short letter or None} that the OPTIONS section of 'hashlb <cmd> --help' lists."""
    p = subprocess.run([HASHLB, cmd, "--help"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"hashlb {cmd} --help: exit {p.returncode}")
    section = re.search(r"^OPTIONS\n(.*?)\n\n", p.stdout, re.S | re.M)
    listed = {}
    for short, name in re.findall(r"^ {2}(?:-(\w), )? *--([a-z][a-z0-9-]*)", section.group(1), re.M):
        check(name not in listed, f"hashlb {cmd} --help lists --{name} twice")
        listed[name] = short or None
    return listed


for cmd in ("run", "check", "lookup", "table", "ctl", "steer"):
    parsed, listed = parser_options(f"cmd_{cmd}.c"), help_options(cmd)
    check(len(parsed) >= 3, f"cmd_{cmd}.c: no options found: the pattern is out of date")
    for name in sorted(set(parsed) | set(listed)):
        where = f"hashlb {cmd}: --{name}"
        if name not in listed:
            check(False, f"{where} is accepted but not in --help's OPTIONS")
        elif name not in parsed:
            check(False, f"{where} is in --help's OPTIONS but not accepted")
        else:
            check(parsed[name] == listed[name],
                  f"{where}: short form -{parsed[name]} accepted, -{listed[name]} in --help")
# and names no option the command does not take: its --help text whole, but for the lines that
# run another program (hashlb table's options in lookup's EXAMPLES, sysctl -w in steer's)
for cmd in ("run", "check", "lookup", "table", "ctl", "steer"):
    out = subprocess.run([HASHLB, cmd, "--help"], capture_output=True, text=True).stdout
    own = parser_options(f"cmd_{cmd}.c")
    if cmd == "ctl":
        own["vip"] = None  # a command's own, after it (lookup --vip)
    text = "\n".join(ln for ln in out.split("\n")
                     if not re.search(rf"\b(hashlb (?!{cmd}\b)[a-z]+|sysctl|ip|curl) ", ln))
    for name in sorted(set(re.findall(r"(?<![\w-])--([a-z][a-z0-9-]*)", text)) - set(own)):
        check(False, f"hashlb {cmd} --help names --{name}, which hashlb {cmd} does not take")
    for short in sorted(set(re.findall(r"(?<![\w-])-([a-zA-Z])\b", text)) -
                        {v for v in own.values() if v}):
        check(False, f"hashlb {cmd} --help names -{short}, which hashlb {cmd} does not take")
# A SYNOPSIS that spells its options out (not "[OPTIONS]") spells out every one.
for cmd in ("run", "check", "ctl"):
    out = subprocess.run([HASHLB, cmd, "--help"], capture_output=True, text=True).stdout
    synopsis = re.search(r"^SYNOPSIS\n(.*?)\n\n(?:COMMANDS\n(.*?)\n\n)?", out, re.S | re.M)
    text = synopsis.group(1) + (synopsis.group(2) or "")
    for name, short in parser_options(f"cmd_{cmd}.c").items():
        check(name == "help" or re.search(rf"--{name}\b", text) or
              (short and re.search(rf"(?<![\w-])-{short}\b", text)),
              f"hashlb {cmd} --help: --{name} is not in its SYNOPSIS")
# Each default an OPTIONS entry states, in a form one types ("(default 160)", "(default 0:
# sleeps at once)", "256 MiB" as 256MiB), is a value the option takes: --max-bytes said
# "(default 256 MiB)", and "--max-bytes 256MiB" was refused as no byte count.
defaults = 0
for cmd in ("run", "check", "lookup", "table", "ctl", "steer"):
    out = subprocess.run([HASHLB, cmd, "--help"], capture_output=True, text=True).stdout
    section = re.search(r"^OPTIONS\n(.*?)\n\n", out, re.S | re.M).group(1)
    for entry in re.split(r"\n(?=  (?:-\w, )? *--)", section):
        opt = re.match(r"\s*(?:-\w, )?(--[a-z0-9-]+)", entry).group(1)
        for said in re.findall(r"\(default:? ([^),;]*)", re.sub(r"\s+", " ", entry)):
            value = said.split(":")[0]
            unit = re.fullmatch(r"([0-9]+) ([KMGT]iB)", value)
            if unit:
                value = unit.group(1) + unit.group(2)
            elif not re.fullmatch(r"[0-9]+|[a-z][a-z0-9-]*", value):
                continue  # "the kernel's", "max(256, ...)": no value to type
            ring = ["-s", "ring"] if opt == "--vnodes" else []
            argv = {"table": ["table", opt, value, *ring, "a", "b"],
                    "lookup": ["lookup", opt, value, *ring, "10.0.0.1", "a", "b"],
                    "ctl": ["ctl", "--admin", "127.0.0.1:1", opt, value, "status"]}.get(
                        cmd, [cmd, "-c", "/nonexistent/hashlb.yaml", opt, value])
            p = subprocess.run([HASHLB] + argv, capture_output=True, text=True, timeout=60)
            defaults += 1
            check(f"invalid value '{value}' for option {opt}" not in p.stderr,
                  f"hashlb {cmd} --help says {opt} (default {said}), which it refuses: "
                  f"{p.stderr.strip()}")
check(defaults >= 20, f"only {defaults} defaults found in the --help texts: the pattern is out of date")
# The ones a command reads itself, not through getopt (ctl's after the command): in use.
p = subprocess.run([HASHLB, "ctl", "--help"], capture_output=True, text=True, timeout=60)
check("[--vip ADDR:PORT]" in p.stdout and '"--vip"' in read("src", "cli", "cmd_ctl.c"),
      "hashlb ctl lookup --vip: in the parser and in --help")

# Each command line the docs show (a `hashlb CMD ...` span, or a line of an example block that
# runs one) gives only options CMD takes; --bogus is the README's example of a refused one.
takes = {cmd: set(parser_options(f"cmd_{cmd}.c"))
         for cmd in ("run", "check", "lookup", "table", "ctl", "steer")}
takes["ctl"] |= {"vip"}  # a command's own, after it (lookup --vip)
shown = 0
for doc in ["README.md"] + [os.path.join("docs", n) for n in sorted(os.listdir(os.path.join(SRC, "docs")))
                            if n.endswith(".md")] + [os.path.join("configs", n) for n in
                                                     sorted(os.listdir(os.path.join(SRC, "configs")))]:
    text = read(doc)
    lines = re.findall(r"`(hashlb [a-z]+[^`]*)`", text)
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M):
        lines += re.findall(r"^\$? ?(hashlb [a-z]+.*)$", block, re.M)
    lines += re.findall(r"^#\s+(hashlb [a-z]+.*)$", text, re.M)  # a config's header
    for line in lines:
        cmd = line.split()[1]
        if cmd not in takes:
            continue
        shown += 1
        for opt in re.findall(r"(?<![\w-])--([a-z][a-z0-9-]*)", line.split("#")[0]):
            check(opt in takes[cmd] or opt == "bogus",
                  f"{doc}: 'hashlb {cmd} ... --{opt}': hashlb {cmd} has no --{opt} ({line})")
check(shown > 50, f"only {shown} command lines found in the docs: the pattern is out of date")

# --- build directories: each one a command in the docs runs from is one they set up ---
# (`meson setup DIR`, `HASHLB_BUILD=DIR scripts/setup.sh`, or ./build, which setup.sh makes):
# docs/steering.md sent a reader reproducing its scrape figures to build-bpf/, which nothing
# makes ("Directory does not exist").
md_files = ["README.md"] + [os.path.join(d, f) for d in ("docs", "bench", "bench/peers")
                            for f in sorted(os.listdir(os.path.join(SRC, d))) if f.endswith(".md")]
md_text = {f: read(f) for f in md_files}
made = {"build"}
for text in md_text.values():
    made |= set(re.findall(r"meson setup (build[\w-]*)", text))
    made |= set(re.findall(r"HASHLB_BUILD=(build[\w-]*)", text))
run_from = 0
for f, text in md_text.items():
    for d in re.findall(r"-C (build[\w-]*)|(?<![\w/.-])(build[\w-]*)/(?:src|bench|bpf|tests)/", text):
        d = d[0] or d[1]
        run_from += 1
        check(d in made, f"{f}: a command runs from {d}/, which no doc sets up ({sorted(made)})")
check(run_from > 40, f"only {run_from} build directories found in the docs' commands: "
      "the pattern is out of date")

# --- metrics: what the docs name against what metrics.c writes ---
metrics_c = read("src", "control", "metrics.c")
families = set(re.findall(r'"(hashlb_[a-z0-9_]+?)(?:_bucket|_sum|_count)?[" {]', metrics_c))
samples = families | {f + s for f in families for s in ("_bucket", "_sum", "_count")}
# names of C functions and types (hashlb_table_preference...), which the docs name too
c_names = set()
for root in ("include", "src"):
    for d, _, files in os.walk(os.path.join(SRC, root)):
        for name in files:
            if name.endswith((".h", ".c")) and name != "metrics.c":
                with open(os.path.join(d, name)) as f:
                    c_names |= set(re.findall(r"\b(hashlb_[a-z0-9_]+)\b", f.read()))
docs = ["README.md"] + [os.path.join("docs", n) for n in sorted(os.listdir(os.path.join(SRC, "docs")))
                        if n.endswith(".md")]
docs += [os.path.join("configs", n) for n in sorted(os.listdir(os.path.join(SRC, "configs")))]
named = 0
for doc in docs:
    # a name ending in "_" or "_*" is a prefix (hashlb_worker_*): left alone
    for name in sorted(set(re.findall(r"\b(hashlb_[a-z0-9_]*[a-z0-9])\b(?![_*])", read(doc)))):
        named += 1
        check(name in samples or name in c_names,
              f"{doc} names {name}, which is no metric hashlb writes (src/control/metrics.c)")
check(named > 100, f"only {named} metric names found in the docs: the pattern is out of date")
control = read("docs", "control.md")
undocumented = sorted(f for f in families if f"`{f}" not in control)
check(len(families) > 60 and not undocumented,
      f"{len(families)} families in metrics.c; not in docs/control.md: {undocumented}")

# --- log lines: each msg= the docs quote is one hashlb writes; each end= is a reason it gives ---
sources = ""
for d, _, files in os.walk(os.path.join(SRC, "src")):
    for name in files:
        if name.endswith(".c"):
            with open(os.path.join(d, name)) as f:
                sources += f.read()
conn_c = read("src", "proxy", "conn.c")
ends = set(re.findall(r'\[CONN_END_[A-Z_]+\] = "([a-z_]+)"',
                      re.search(r"conn_end_names\[[A-Z_]+\] = \{(.*?)\};", conn_c, re.S).group(1)))
check(len(ends) > 10, f"conn.c's end= names not found: {ends}")
quoted_msgs = quoted_ends = 0
for doc in docs:
    text = read(doc)
    for quoted, word in sorted(set(re.findall(r'msg=(?:"([^"]*)"|([a-z_]+))', text))):
        quoted_msgs += 1
        # "upgrade failed: ..." is a prefix; a message may be wrapped over lines
        msg = re.sub(r"\s+", " ", (quoted or word).split("...")[0]).rstrip(": ")
        check(msg and f'"{msg}' in sources, f"{doc} quotes msg={quoted or word}, which no source writes")
    for end in sorted(set(re.findall(r"`end=([a-z_]+)`", text)) | set(re.findall(r"\bend=([a-z_]+)\b", text))):
        quoted_ends += 1
        check(end in ends, f"{doc} names end={end}, which is no reason conn.c gives")
check(quoted_msgs > 60 and quoted_ends > 10,
      f"only {quoted_msgs} msg= and {quoted_ends} end= found in the docs: the pattern is out of date")
# and the keys a quoted line gives after its msg= (`msg="backend down" ... at=connect err=...`)
# are ones the code writes with that message: in the call, in what the function that makes
# it wrote before (a kv buffer filled beforehand), or in the file's own function the message
# is passed to (log_error("kernel steering not started", ...) writes service= and error=)
c_files = []
for d, _, files in os.walk(os.path.join(SRC, "src")):
    c_files += [open(os.path.join(d, n)).read() for n in files if n.endswith(".c")]
quoted_keys = 0
for doc in docs:
    text = re.sub(r"\s+", " ", read(doc))
    for m in re.finditer(r'`msg=(?:"([^"]*)"|([a-z_]+))((?: (?:\.\.\.|[a-z_]+=(?:"[^"]*"|[^ `]*)))*)`',
                         text):
        msg, keys = m.group(1) or m.group(2), re.findall(r" ([a-z_]+)=", m.group(3))
        if "..." in msg or not keys:
            continue
        around = ""
        for src in c_files:
            for at in re.finditer(re.escape(f'"{msg}"'), src):
                start = src.rfind("\n}\n", 0, at.start())  # the function it is in
                around += src[start:src.find(");", at.end())]
                callee = re.search(r"\b(\w+)\(\s*$", src[max(0, at.start() - 80):at.start()])
                body = callee and re.search(rf"^\w[^\n;]*\b{callee.group(1)}\([^;{{]*\)\n\{{\n"
                                            r"(.*?)^\}", src, re.S | re.M)
                if body:  # passed to a function of this file, which logs it
                    around += body.group(1)
                # a function of this file called in the line's arguments writes keys too
                # (run_steer.c's iface_kv(): interface= and config_interface=)
                for f in set(re.findall(r"\b(\w+)\(", src[at.end():src.find(");", at.end())])):
                    body = re.search(rf"^\w[^\n;]*\b{f}\([^;{{]*\)\n\{{\n(.*?)^\}}", src,
                                     re.S | re.M)
                    if body:
                        around += body.group(1)
        quoted_keys += 1
        missing = [k for k in keys if f"{k}=" not in around]
        check(around and not missing, f"{doc} quotes msg=\"{msg}\" with {missing}, which no "
              f"line of that message writes")
check(quoted_keys > 20, f"only {quoted_keys} quoted log lines with keys: the pattern is out of date")
dataplane = read("docs", "dataplane.md")
table = set(re.findall(r"^\s*\| `([a-z_]+)` \|", dataplane, re.M))
check(table == ends, f"docs/dataplane.md's end= table: missing {sorted(ends - table)}, "
      f"not in conn.c {sorted(table - ends)}")

# --- hashlb ctl's commands: what cmd_ctl.c's table says of each, its --help, control.md and
# README say alike (--service with metrics was refused but not said to be, in both texts) ---
ctl_c = read("src", "cli", "cmd_ctl.c")
ctl_cmds = {name: {"service": sv == "true", "vip": vp == "true", "json": js == "true"}
            for name, sv, vp, js in re.findall(
                r'\{ "([a-z]+)", \w+, \w+, (true|false), (true|false), (true|false),',
                re.search(r"ctl_commands\[\] = \{(.*?)\n\};", ctl_c, re.S).group(1))}
check(len(ctl_cmds) >= 9, f"cmd_ctl.c's ctl_commands not found: {sorted(ctl_cmds)}")
ctl_help = subprocess.run([HASHLB, "ctl", "--help"], capture_output=True, text=True).stdout
flat_help = re.sub(r"\s+", " ", ctl_help)
flat_control = re.sub(r"\s+", " ", control)


def named(text):
    """The command names of "a, b or c" (backquoted or not)."""
    return set(re.findall(r"[a-z]+", text)) - {"or", "and"}


def with_none(flag):
    return {c for c, f in ctl_cmds.items() if not f[flag]}


listed = set(re.findall(r"^  ([a-z]+)\b", re.search(r"^COMMANDS\n(.*?)\n\n", ctl_help, re.S | re.M).group(1),
                        re.M))
check(listed == set(ctl_cmds), f"hashlb ctl --help's COMMANDS: {sorted(listed)}, cmd_ctl.c: {sorted(ctl_cmds)}")
m = re.search(r"--service NAME the service \(([a-z, ]+)\)", flat_help)
check(m and named(m.group(1)) == set(ctl_cmds) - with_none("service"),
      f"hashlb ctl --help: --service applies to {m and m.group(1)}")
for where, text, pattern in (
        ("hashlb ctl --help", flat_help, r"--service with ([a-z, ]+);"),
        ("docs/control.md", flat_control, r"`--service` with ((?:`[a-z]+`,? (?:or )?)+)")):
    m = re.search(pattern, text)
    check(m and named(m.group(1)) == with_none("service"),
          f"{where}: --service is refused with {m and m.group(1)}; cmd_ctl.c: {sorted(with_none('service'))}")
check(with_none("json") == {"metrics"} and "(--json with metrics;" in flat_help and
      "`--json metrics`" in control, f"--json does not apply to {sorted(with_none('json'))}")
check(set(ctl_cmds) - with_none("vip") == {"lookup"} and "--vip with any command but lookup;" in flat_help,
      f"--vip applies to {sorted(set(ctl_cmds) - with_none('vip'))}")
for cmd in sorted(with_none("service")):
    p = subprocess.run([HASHLB, "ctl", "--admin", "127.0.0.1:1", "-s", "x", cmd], capture_output=True,
                       text=True, timeout=60)
    check(p.returncode == 2 and f"-s does not apply to {cmd}" in p.stderr,
          f"hashlb ctl -s x {cmd}: exit {p.returncode}, {p.stderr!r}")
synopsis = re.search(r"^```\n(hashlb ctl \[.*?)^```", control, re.S | re.M).group(1)
check(set(re.findall(r"^hashlb ctl (?:\[[^]]*\] )*([a-z|]+)", synopsis, re.M)) and
      {c for line in re.findall(r"^hashlb ctl (?:\[[^]]*\] )*([a-z|]+)", synopsis, re.M)
       for c in line.split("|")} == set(ctl_cmds), f"docs/control.md's hashlb ctl synopsis: {synopsis!r}")
m = re.search(r"`hashlb ctl ([a-z]+(?:\\\|[a-z]+)+)`", read("README.md"))  # the list, not one named
check(m and set(m.group(1).split("\\|")) == set(ctl_cmds), f"README's hashlb ctl commands: {m and m.group(1)}")

# --- examples that run offline: they run, and print what the docs show ---
# A console block's "$ hashlb table|lookup|check ..." prints what follows it (the build time
# aside); each --help's EXAMPLES and each config's header give lines that exit 0. Run from the
# source root, where configs/ is. A file that is not there (broken.yaml) is the reader's.
OFFLINE = ("table", "lookup", "check")


def run_shown(line):
    if line.split()[1] not in OFFLINE:
        return None
    argv = shlex.split(line.split("#")[0].split("&&")[0])
    files = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-c", "--config")]
    if not all(os.path.exists(os.path.join(SRC, f)) for f in files):
        return None
    return subprocess.run([os.path.abspath(HASHLB)] + argv[1:], capture_output=True, text=True,
                          timeout=60, cwd=SRC)


ran = 0
for doc in docs:
    for block in re.findall(r"^```[a-z]*\n(.*?)^```\n", read(doc), re.S | re.M):
        for part in re.split(r"^\$ ", block, flags=re.M)[1:]:
            line, _, shown = part.partition("\n")
            p = run_shown(line) if line.startswith("hashlb ") else None
            if p is None:
                continue
            ran += 1
            got = re.sub(r"^(build +)[0-9.]+ ms$", r"\1N ms", p.stdout + p.stderr, flags=re.M)
            want = re.sub(r"^(build +)[0-9.]+ ms$", r"\1N ms", shown, flags=re.M)
            check(got == want, f"{doc}: '$ {line}' prints {got!r}, the doc shows {want!r}")
for cmd in ("run", "check", "lookup", "table", "ctl", "steer"):
    out = subprocess.run([HASHLB, cmd, "--help"], capture_output=True, text=True).stdout
    for line in re.findall(r"^  (hashlb .*)$", out.split("\nEXAMPLES\n")[1], re.M):
        p = run_shown(line)
        if p is not None:
            ran += 1
            check(p.returncode == 0, f"hashlb {cmd} --help's example '{line}': exit {p.returncode}, "
                  f"{p.stderr.strip()}")
for name in sorted(os.listdir(os.path.join(SRC, "configs"))):
    for line in re.findall(r"^#.*?(hashlb [a-z]+ -.*)$", read("configs", name), re.M):
        p = run_shown(line)
        if p is not None:
            ran += 1
            check(p.returncode == 0, f"configs/{name}: '{line}': exit {p.returncode}, {p.stderr.strip()}")
check(ran >= 15, f"only {ran} examples run: the patterns are out of date")
print(f"{ran} examples run")

print(f"{'FAILED' if failures else 'ok'}: {len(failures)} failures")
sys.exit(1 if failures else 0)
