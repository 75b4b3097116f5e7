"""What a bench script that drives hashlb through tests/integration's helpers (lbtest.py,
ctltest.py) sets up first: its arguments, --hashlb among them (the binary those helpers run),
and the environment and import path the helpers read."""
import argparse
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def arguments(doc):
    """A parser for the script <doc> documents (its first line the description), with
    --hashlb."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--hashlb", required=True)
    return ap


def parse(ap):
    """<ap>'s arguments, with HASHLB set to --hashlb, HASHLB_SOURCE_ROOT to this tree unless
    set, and tests/integration's helpers importable."""
    args = ap.parse_args()
    os.environ["HASHLB"] = os.path.abspath(args.hashlb)
    os.environ.setdefault("HASHLB_SOURCE_ROOT", ROOT)
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    return args
