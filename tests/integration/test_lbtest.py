#!/usr/bin/env python3
"""The integration tests' runner counts a test that cannot run here (lbtest.Skip) as skipped,
not passed: the summary names it, a file whose every test skipped exits 77, one with a
failure exits 1, and .ci/run counts a file that passed with tests skipped as failed. Before,
such tests printed "skipped" and returned: a run as a user other than root said "all passed"
having run none of them, and CI counted them as passes. Nothing here starts hashlb."""
import json
import os
import re
import subprocess
import sys
import tempfile

from lbtest import check, failures

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("HASHLB_SOURCE_ROOT", os.path.join(HERE, "..", ".."))

TESTS = {
    "ok": "def ok():\n    check(True, 'ok')\n",
    "skip": "def skip():\n    raise Skip('needs something this host has not')\n",
    "fail": "def fail():\n    check(False, 'it failed')\n",
}


def run(*names):
    """(exit status, stdout) of a test file of the tests <names>."""
    text = "from lbtest import Skip, check, run_tests\n" + "".join(TESTS[n] for n in names)
    text += f"run_tests([{', '.join(names)}])\n"
    p = subprocess.run([sys.executable, "-c", text], cwd=HERE, capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, PYTHONPATH=HERE))
    return p.returncode, p.stdout


code, out = run("ok", "skip")
print("    " + out.strip().splitlines()[-2] + " / " + out.strip().splitlines()[-1])
check(code == 0 and "    skipped: needs something this host has not" in out and
      "1 of 2 test(s) skipped: skip\n" in out and "1 passed" in out and "all passed" not in out,
      f"a test skipped is said and not counted as passed: {code} {out!r}")
code, out = run("skip")
check(code == 77 and "1 of 1 test(s) skipped: skip" in out,
      f"every test skipped: the file exits 77: {code} {out!r}")
code, out = run("skip", "fail")
check(code == 1, f"a failure beside a skip: the file fails: {code} {out!r}")

# .ci/run's count of the meson test logs (its inline Python): a file that passed with a
# test skipped counts as failed, as a file that skipped whole does
with open(os.path.join(SRC, ".ci", "run")) as f:
    count = re.search(r"<<'PY'\n(.*?)\nPY\n", f.read(), re.S).group(1)
with tempfile.NamedTemporaryFile("w", suffix=".json") as log:
    for name, result, stdout in (("a", "OK", "all passed\n"),
                                 ("b", "OK", "1 of 2 test(s) skipped: skip\n1 passed\n"),
                                 ("c", "SKIP", "1 of 1 test(s) skipped: skip\n")):
        log.write(json.dumps({"name": name, "result": result, "stdout": stdout}) + "\n")
    log.flush()
    p = subprocess.run([sys.executable, "-c", count, log.name], capture_output=True, text=True,
                       timeout=60)
check(p.returncode == 1 and "1 passed, 2 failed" in p.stdout and
      "ci: b: 1 of 2 test(s) skipped: skip: counted as failed" in p.stdout,
      f".ci/run: tests skipped are no passes: {p.returncode} {p.stdout!r}")
print("all passed" if not failures else f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
