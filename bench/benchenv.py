"""What a bench script that drives hashlb through tests/integration's helpers (lbtest.py,
ctltest.py) sets up first: its arguments, --hashlb among them (the binary those helpers run),
and the environment and import path the helpers read."""
import argparse
import math
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def arguments(doc):
    """A parser for the script <doc> documents (its first line the description), with
    --hashlb."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--hashlb", required=True,
                    help="the hashlb binary to run (build/src/cli/hashlb)")
    return ap


def parse(ap):
    """<ap>'s arguments, with HASHLB set to --hashlb, HASHLB_SOURCE_ROOT to this tree unless
    set, and tests/integration's helpers importable."""
    args = ap.parse_args()
    executable(ap, args.hashlb)
    os.environ["HASHLB"] = os.path.abspath(args.hashlb)
    os.environ.setdefault("HASHLB_SOURCE_ROOT", ROOT)
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    return args


def executable(ap, path, option="--hashlb"):
    """<path>, if it is a file this user may run; else <ap>'s usage error naming <option>
    (exit 2), after the other arguments' own. A mistyped --hashlb ended in a traceback
    (FileNotFoundError) once the backends had been started, or in a run of the peers alone."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        ap.error(f"argument {option}: no executable file {path!r}")
    return path


def count(text):
    """An argparse type: a whole number from 1 (rounds, scrapes, clients...). 0 or less
    measured nothing and ended in a traceback (ZeroDivisionError, IndexError) after the
    processes had started, or printed figures of nothing (p50 nan)."""
    try:
        n = int(text, 10)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"a whole number from 1, not {text!r}")
    return n


def positive(text):
    """An argparse type: a number above 0 (seconds, ratios), finite."""
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if not (0 < x < math.inf):
        raise argparse.ArgumentTypeError(f"a number above 0, not {text!r}")
    return x


def at_most(kind, most):
    """An argparse type: a value of type <kind> (count, positive) up to <most>. A bench's
    loops are bounded: past <most> its load would reach beyond what it measures."""
    def judge(text):
        v = kind(text)
        if v > most:
            raise argparse.ArgumentTypeError(f"at most {most:g}, not {text!r}")
        return v
    return judge
