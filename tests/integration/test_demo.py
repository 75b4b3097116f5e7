#!/usr/bin/env python3
"""The README's first command, scripts/demo.sh, does hashlb's main job as the README shows it:
run in a network namespace of its own (its ports are fixed: 18080-18083), on this build, it
exits 0; the spread of its 1,000 clients is the README's, line for line; every client reached
the backend `hashlb lookup` names; when b stops only b's clients move, all of them served; and
hashlb's own log, which the demo prints, holds no warning or error (a health check that found a
backend not yet listening used to show there)."""
import os
import re
import subprocess
import sys

SRC = os.environ.get("HASHLB_SOURCE_ROOT", ".")
BUILD = os.environ.get("HASHLB_BUILD_ROOT", os.path.join(SRC, "build"))
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
    print("SKIP: cannot make a network namespace (unshare -n)")
    sys.exit(77)

p = subprocess.run(["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0"',
                    os.path.join(SRC, "scripts", "demo.sh")],
                   env={**os.environ, "HASHLB_BUILD": BUILD}, capture_output=True, text=True,
                   timeout=120)
out = p.stdout
print(out)
check(p.returncode == 0, f"demo.sh exit {p.returncode}: {p.stderr[-2000:]}")

with open(os.path.join(SRC, "README.md")) as f:
    readme = f.read()
block = re.search(r"^```\n(== 1,000 clients from.*?)^```", readme, re.M | re.S)
check(block, "README.md has no demo output block")
if block:
    spread = block.group(1).split("\n\n")[0]
    check(spread in out, f"the spread is not README's:\n{spread}")
check("1000 of 1000 clients reached exactly the backend hashlb lookup names" in out,
      "every client reached the backend hashlb lookup names")
for name in ("a", "c"):
    m = re.search(rf"clients of {name}:\s+(\d+), stayed\s+(\d+), moved: none", out)
    check(m and m.group(1) == m.group(2), f"{name}'s clients all stayed: {m and m.group(0)}")
m = re.search(r"clients of b:\s+(\d+), stayed\s+0, moved: (\d+) to a, (\d+) to c", out)
check(m and int(m.group(2)) + int(m.group(3)) == int(m.group(1)),
      f"b's clients all moved to a or c: {m and m.group(0)}")
check("clients of a and c that moved: 0" in out and "clients not served: 0" in out,
      "only b's clients moved, and every client was served")
check("hashlb exited with status 0" in out, "hashlb stopped with exit 0")
logged = [l for l in out.splitlines() if re.search(r"\blevel=(warn|error)\b", l)]
check(not logged, f"warnings or errors in hashlb's log: {logged[:3]}")

print(f"{'FAILED' if failures else 'ok'}: {len(failures)} failures")
sys.exit(1 if failures else 0)
