#!/usr/bin/env python3
"""Malformed configs for `hashlb check -c`, generated from one that sets every key.

Each case is a file (or a path that is not one) and what check must say of it: exit 0
(valid), exit 1 with one line FILE:LINE:COL: error: WHAT whose position lies on the
node that is wrong (the key for an unknown or repeated key, the value for a wrong
value; a case of several mistakes, each such line in file order, the first 20, then
"hashlb check: and N more errors" past them and "hashlb check: N errors"; a second line
of a case of one mistake is a cascade, a defect), or either (a value whose acceptance the probe does not model; a refusal must
still point at it). Every run must end promptly, in bounded memory, with no sanitizer
report.

  python3 tests/integration/config_probe.py --hashlb build/src/cli/hashlb [--sample N]

Prints one line per defect and the figures: cases, and defects by kind.
"""
import argparse
import os
import random
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# --- the base config: every key, each leaf set to a valid value ---------------------
# (key, value) pairs; a value is a scalar's text, a list of pairs (a mapping) or a
# Python list of mappings / scalars (a block sequence).
BACKEND_WEB1 = [
    ("name", "web-1"), ("address", "127.0.0.1:18381"), ("each_address", "false"),
    ("weight", "1"), ("max_connections", "0"), ("state", "ready"), ("backup", "false"),
    ("close_on_return", "false"),
]
SERVICE_WEB = [
    ("name", "web"), ("listen", "127.0.0.1:18380"), ("scheme", "maglev"),
    ("table_size", "65537"), ("hash_key", "src-ip"), ("seed", "0"),
    ("timeouts", [("connect", "1s"), ("idle", "5m"), ("drain", "30s"), ("queue", "0")]),
    ("abort_on_close", "false"), ("max_connections", "10000"),
    ("max_connections_per_client", "0"), ("max_connection_rate", "0"),
    ("connect_retries", "2"), ("slow_start", "0"), ("balance_factor", "0"),
    ("steering", "userspace"), ("interface", "eth0"), ("steering_flows", "65536"),
    ("proxy_protocol", "off"), ("accept_proxy", "false"),
    ("allow_clients", ["10.0.0.0/8", '"fd00::/8"', "127.0.0.0/8"]),
    ("deny_clients", ["10.9.0.0/16"]), ("source", "127.0.0.1"),
    ("keepalive", [("enabled", "false"), ("idle", "60s"), ("interval", "10s"),
                   ("count", "6"), ("user_timeout", "0")]),
    ("log_connections", "false"),
    ("health", [("enabled", "true"), ("interval", "2s"), ("timeout", "1s"), ("rise", "2"),
                ("fall", "3"), ("port", "8008"), ("send", '"PING\\r\\n"'),
                ("expect", '"+PONG"'), ("close_on_down", "false"), ("passive", "true"),
                ("passive_hold", "10s")]),
    ("backends", [BACKEND_WEB1, [("name", "web-2"), ("address", "127.0.0.1:18382")]]),
]
SERVICE_RING = [
    ("name", "ring-example"), ("listen", "127.0.0.1:18390"), ("scheme", "ring"),
    ("vnodes", "160"), ("hash_key", "src-ip"), ("seed", "0"),
    ("accept_proxy", "true"), ("accept_proxy_from", ["10.0.0.0/8", '"fd00::/8"']),
    ("backends", [[("name", "r-1"), ("address", "127.0.0.1:18391")],
                  [("name", "r-2"), ("address", "127.0.0.1:18392")]]),
]
BASE = [
    ("workers", "auto"), ("admin", "127.0.0.1:9901"), ("resolve_every", "0"),
    ("table_memory", "1GiB"), ("services", [SERVICE_WEB, SERVICE_RING]),
]

# What each leaf is, to know which of the standard values it takes.
# kind, lo, hi (numbers: in the key's plain unit, ms for durations, bytes for sizes)
U, D = "u32", "duration"
LEAVES = {
    "workers": ("workers", 1, 256), "admin": ("admin",), "resolve_every": ("resolve", 1000, 86400000),
    "table_memory": ("size", 1 << 20, 1 << 40),
    "name": ("name",), "listen": ("addr",), "scheme": ("enum",), "table_size": ("prime", 3, 16777259),
    "vnodes": (U, 1, 100000), "hash_key": ("enum",), "seed": ("u64",),
    "timeouts.connect": (D, 1, 600000), "timeouts.idle": (D, 0, 7 * 86400000),
    "timeouts.drain": (D, 0, 3600000), "timeouts.queue": (D, 0, 600000),
    "abort_on_close": ("bool", "needs timeouts.queue"), "max_connections": (U, 0, 1 << 24),
    "max_connections_per_client": (U, 0, 1 << 24), "max_connection_rate": (U, 0, 1000000),
    "connect_retries": (U, 0, 32), "slow_start": (D, 0, 3600000),
    "balance_factor": ("factor",), "steering": ("enum",), "interface": ("string",),
    "steering_flows": (U, 1, 402653184), "proxy_protocol": ("enum",), "accept_proxy": ("bool",),
    "accept_proxy_from": ("prefixes",), "allow_clients": ("prefixes",),
    "deny_clients": ("prefixes",), "source": ("source",),
    "keepalive.enabled": ("bool",), "keepalive.idle": ("secs",), "keepalive.interval": ("secs",),
    "keepalive.count": (U, 1, 127), "keepalive.user_timeout": ("user_timeout",),
    "log_connections": ("bool",),
    "health.enabled": ("bool",), "health.interval": (D, 10, 3600000),
    "health.timeout": (D, 1, 60000), "health.rise": (U, 1, 100), "health.fall": (U, 1, 100),
    "health.port": (U, 1, 65535), "health.send": ("bytes",), "health.expect": ("bytes",),
    "health.close_on_down": ("bool",), "health.passive": ("bool",),
    "health.passive_hold": (D, 10, 3600000),
    "backend.name": ("name",), "backend.address": ("addr",), "backend.each_address": ("bool", "needs a host name"),
    "backend.weight": (U, 0, 10000), "backend.max_connections": (U, 0, 1 << 24),
    "backend.state": ("enum",), "backend.backup": ("bool",), "backend.close_on_return": ("bool", "needs backup"),
}
# A refused number says what the key takes: its type ("must be") or its range ("1..256"),
# or the rule it breaks (longer than, not prime, whole seconds, no unit).
NUMERIC = (U, D, "prime", "workers", "u64", "size", "resolve", "secs", "factor")
SAYS_WHAT = r"must be|\.\.|longer than|shorter than|not prime|whole|no unit|needs"

# The wrong values: (label, YAML text). "" is an empty value.
VALUES = [
    ("plain-string", "abc"), ("quoted-string", '"abc"'), ("int", "7"), ("negative", "-1"),
    ("zero", "0"), ("float", "1.5"), ("2^64", "18446744073709551616"),
    ("2^64-1", "18446744073709551615"), ("2^32", "4294967296"), ("huge", "9" * 40),
    ("-2^63", "-9223372036854775808"), ("hex", "0x10"), ("octal", "0o17"), ("exp", "1e3"),
    ("inf", ".inf"), ("nan", ".nan"), ("bool", "true"), ("null", "null"), ("tilde", "~"),
    ("empty", ""), ("list", "[1, 2]"), ("empty-list", "[]"), ("mapping", "{a: 1}"),
    ("empty-mapping", "{}"), ("quoted-int", '"7"'), ("space-padded", '" 7 "'),
]


def accepts(kind, label):
    """True: valid; False: must be refused; None: not modelled (either)."""
    k = kind[0]
    if label in ("list", "empty-list", "mapping", "empty-mapping"):
        return False
    if k == "bool":
        # true needs another key with these three (timeouts.queue, a host name, backup)
        if label == "bool" and len(kind) > 1:
            return None
        return label == "bool"
    if label in ("hex", "octal", "exp") and k in (U, "prime", "workers", D, "resolve", "size",
                                                 "u64"):
        return None
    if k in (U, "prime", "workers"):
        if label == "int":
            return k == "prime" or kind[1] <= 7 <= kind[2]
        return label == "zero" and kind[1] == 0
    if k == "user_timeout":
        return label == "zero"
    if k == "secs":
        return False
    if k in (D, "resolve", "size"):
        if label == "int":
            return kind[1] <= 7
        if label == "zero":
            return kind[1] == 0 or k in ("resolve", "size")  # 0 = off, no cap
        return label == "2^32" and k == "size"
    if k == "u64":
        return label in ("int", "zero", "2^64-1", "2^32")
    if k == "factor":
        if label == "exp":
            return None
        return label in ("int", "zero", "float", "hex", "octal")  # 0x10, 0o17: YAML integers
    if k == "admin":
        return label in ("null", "tilde", "empty")  # off
    if k in ("name", "string", "bytes"):
        if label in ("null", "tilde", "empty"):
            return None if k == "bytes" else False
        return None
    return False  # enum, addr, source, prefixes


# --- emitting YAML with the position of every key and value -------------------------
class Doc:
    def __init__(self):
        self.lines = []
        self.pos = {}  # path -> (key line, key col, value line, value col, value text)

    def emit_map(self, pairs, indent, path, first_prefix=None):
        for i, (k, v) in enumerate(pairs):
            if i == 0 and first_prefix is not None:
                prefix = first_prefix
            else:
                prefix = " " * indent
            p = f"{path}.{k}" if path else k
            ln = len(self.lines) + 1
            kcol = len(prefix) + 1
            if isinstance(v, str):
                line = f"{prefix}{k}: {v}" if v != "" else f"{prefix}{k}:"
                self.lines.append(line)
                self.pos[p] = (ln, kcol, ln, kcol + len(k) + 2, v)
            elif v and isinstance(v[0], tuple):  # a mapping
                self.lines.append(f"{prefix}{k}:")
                self.pos[p] = (ln, kcol, ln + 1, indent + 3, None)
                self.emit_map(v, indent + 2, p)
            else:  # a sequence
                self.lines.append(f"{prefix}{k}:")
                self.pos[p] = (ln, kcol, ln + 1, indent + 3, None)
                for j, item in enumerate(v):
                    ip = f"{p}[{j}]"
                    self.pos[ip] = (len(self.lines) + 1, indent + 5, len(self.lines) + 1,
                                    indent + 5, None)
                    if isinstance(item, str):
                        self.lines.append(f"{' ' * (indent + 2)}- {item}")
                    else:
                        self.emit_map(item, indent + 4, ip, first_prefix=" " * (indent + 2) + "- ")

    def text(self):
        return "\n".join(self.lines) + "\n"


def render(tree):
    d = Doc()
    d.emit_map(tree, 0, "")
    return d


def replace(tree, path, value):
    """A copy of <tree> with the value at dotted <path> (services[0].timeouts.idle) set;
    value None removes the key."""
    head, _, rest = path.partition(".")
    m = re.fullmatch(r"(\w+)\[(\d+)\]", head)
    key, idx = (m.group(1), int(m.group(2))) if m else (head, None)
    out = []
    for k, v in tree:
        if k != key:
            out.append((k, v))
            continue
        if idx is None:
            if rest:
                out.append((k, replace(v, rest, value)))
            elif value is not None:
                out.append((k, value))
        else:
            items = list(v)
            items[idx] = replace(items[idx], rest, value) if rest else value
            out.append((k, items))
    return out


def insert_after(tree, path, pairs):
    """A copy with <pairs> added at the end of the mapping at <path> ("" = top)."""
    if not path:
        return list(tree) + pairs
    head, _, rest = path.partition(".")
    m = re.fullmatch(r"(\w+)\[(\d+)\]", head)
    key, idx = (m.group(1), int(m.group(2))) if m else (head, None)
    out = []
    for k, v in tree:
        if k == key:
            if idx is None:
                v = insert_after(v, rest, pairs)
            else:
                v = list(v)
                v[idx] = insert_after(v[idx], rest, pairs)
        out.append((k, v))
    return out


# Leaf paths in the base and their LEAVES kind.
def leaf_paths():
    out = []
    for k, _ in BASE:
        if k != "services":
            out.append((k, k))
    for si, svc in enumerate([SERVICE_WEB, SERVICE_RING]):
        for k, v in svc:
            p = f"services[{si}].{k}"
            if k == "backends":
                if si == 0:
                    for bk, _ in BACKEND_WEB1:
                        out.append((f"{p}[0].{bk}", f"backend.{bk}"))
            elif isinstance(v, list) and v and isinstance(v[0], tuple):
                if si == 0:
                    for sk, _ in v:
                        out.append((f"{p}.{sk}", f"{k}.{sk}"))
            elif si == 0 and k not in ("vnodes", "accept_proxy", "accept_proxy_from"):
                out.append((p, k))
            elif si == 1 and k in ("vnodes", "accept_proxy_from"):
                out.append((p, k))
    return out


# --- cases ---------------------------------------------------------------------------
class Case:
    def __init__(self, kind, name, data=None, expect="error", span=None, path=None, words=None,
                 setup=None, nofile=False, many=False):
        self.kind, self.name, self.data, self.expect = kind, name, data, expect
        self.span = span  # [(line, col_lo, col_hi)] where the error may point; None: anywhere
        self.path = path  # a path to give to -c instead of a file of data
        self.words = words  # a regex the message must match
        self.setup = setup
        self.nofile = nofile  # an error without a position (FILE: error: ...) is right
        self.many = many  # several mistakes: a line each, then how many


def value_span(text, line, col):
    """Where a value of <text> written at line:col may be reported: its first to its last
    character on its line (an empty one: the column after the colon or the next line)."""
    if text == "" or text is None:
        return [(line, col - 2, col + 1), (line + 1, 1, 200)]
    return [(line, col, col + max(len(text) - 1, 0))]


def cases_types():
    for path, leaf in leaf_paths():
        kind = LEAVES[leaf]
        for label, text in VALUES:
            t = replace(BASE, path, text)
            d = render(t)
            kl, kc, vl, vc, _ = d.pos[path]
            acc = accepts(kind, label)
            exp = {True: "ok", False: "error", None: "either"}[acc]
            span = value_span(text, vl, vc)
            if len(kind) > 1 and isinstance(kind[1], str):  # a rule between keys: the key too
                span.append((kl, kc, kc))
            yield Case("wrong-type", f"{path}={label}", d.text().encode(), exp, span,
                       words=SAYS_WHAT if kind[0] in NUMERIC else None)


# leaf -> [(text, ok)]: ok 1 valid, 0 refused at the value, None either, "rel" refused
# where a rule between keys says (the other key's value: the timeout for a short interval)
RANGES = {
    "workers": [("1", 1), ("256", 1), ("257", 0), ("0", 0)],
    "resolve_every": [("1s", 1), ("24h", 1), ("999ms", 0), ("86400001", 0), ("25h", 0)],
    "table_memory": [("1MiB", 1), ("1TiB", 1), ("1048575", 0), ("1025GiB", 0), ("2TiB", 0),
                     ("1.5GiB", 0), ("1GB", 0), ("1 GiB", None), ("16384PiB", 0)],
    "table_size": [("3", 1), ("16777259", 1), ("2", 0), ("16777260", 0), ("65536", 0),
                   ("16777261", 0)],
    "vnodes": [("1", 1), ("100000", 1), ("0", 0), ("100001", 0)],
    "seed": [("18446744073709551615", 1), ("18446744073709551616", 0), ("-1", 0)],
    "timeouts.connect": [("1ms", 1), ("10m", 1), ("0", 0), ("600001", 0), ("11m", 0),
                         ("1.5s", 0), ("5 s", None), ("5S", None), ("5sec", 0), ("s", 0),
                         ("ms", 0), ("1h", 0), ("-5s", 0), ("99999999999999999999s", 0),
                         ("18446744073709551615ms", 0), ("4294967296ms", 0),
                         ("307445734561826h", 0)],
    "timeouts.idle": [("7d", None), ("168h", 1), ("169h", 0), ("604800001", 0)],
    "timeouts.drain": [("1h", 1), ("61m", 0), ("3600001", 0)],
    "timeouts.queue": [("10m", 1), ("601s", 0)],
    "max_connections": [("16777216", 1), ("16777217", 0)],
    "max_connections_per_client": [("16777216", 1), ("16777217", 0)],
    "max_connection_rate": [("1000000", 1), ("1000001", 0)],
    "connect_retries": [("32", 1), ("33", 0)],
    "slow_start": [("1h", 1), ("3600001", 0)],
    "balance_factor": [("1.0", 1), ("100", 1), ("0.5", 0), ("0.999", 0), ("100.01", 0),
                       ("1e2", None), ("-0", None), ("1e400", 0), ("1e-400", 0),
                       ("0x1p3", 0), ("0x1.8", 0), ("1.25abc", 0), (".5", 0), ("1.", None)],
    "steering_flows": [("1", 1), ("402653184", 1), ("0", 0), ("402653185", 0)],
    "keepalive.idle": [("1s", 1), ("32767s", 1), ("0", 0), ("32768s", 0), ("1500ms", 0),
                       ("999ms", 0)],
    "keepalive.interval": [("1s", 1), ("32767s", 1), ("0", 0), ("32768s", 0)],
    "keepalive.count": [("1", 1), ("127", 1), ("0", 0), ("128", 0)],
    "keepalive.user_timeout": [("120s", 1), ("119s", 0), ("32767s", 1), ("32768s", 0)],
    "health.interval": [("10ms", "rel"), ("1h", 1), ("9ms", 0), ("3600001", 0)],
    "health.timeout": [("1ms", 1), ("2s", 1), ("2001", 0), ("61s", 0), ("0", 0)],
    "health.rise": [("1", 1), ("100", 1), ("0", 0), ("101", 0)],
    "health.fall": [("1", 1), ("100", 1), ("0", 0), ("101", 0)],
    "health.port": [("1", 1), ("65535", 1), ("0", 0), ("65536", 0)],
    "health.send": [('"' + "x" * 1024 + '"', 1), ('"' + "x" * 1025 + '"', 0), ('""', 0),
                    ('"\\x"', 0), ('"\\u00ff"', None), ('"\\0"', 1)],
    "health.expect": [('"' + "x" * 1025 + '"', 0), ('""', 0)],
    "backend.weight": [("0", 1), ("10000", 1), ("10001", 0)],
    "backend.max_connections": [("16777216", 1), ("16777217", 0)],
    "backend.name": [("a" * 255, 1), ("a" * 256, 0), ('"a b"', None), ('"a\\tb"', 0),
                     ('"a\\0b"', 0), ('"a\\u00a0"', 0), ('"\\u200b"', 0), ('""', 0)],
    "name": [("a" * 64, 1), ("a" * 65, 0), ('"a b"', 0), ("a/b", 0), ('""', 0), ("ä", 0)],
    "listen": [("127.0.0.1:0", 1), ("127.0.0.1:65535", 1), ("127.0.0.1:65536", 0),
               ("127.0.0.1", 0), ("localhost:80", 0), ('"[::1]:80"', 1), ('"[::1]"', 0),
               ("::1:80", 0), ('"[fe80::1%eth0]:80"', 0), ("256.0.0.1:80", 0),
               ("127.0.0.1:-1", 0), ("127.0.0.1:08", None), ("127.1:80", None),
               ("1.2.3.4:80:90", 0), ('"[::ffff:1.2.3.4]:80"', None), ("unix:/tmp/x", 0)],
    "backend.address": [("127.0.0.1:0", 0), ("example.invalid:80", None),
                        ("a" * 254 + ":80", 0), ('"[::1]:80"', None), ("127.0.0.1:80x", 0),
                        ("-bad-:80", 0), (":80", 0), ("127.0.0.1:18380", 0)],
    "source": [("client", None), ("127.0.0.1:80", 0), ('"::1"', "rel"), ("10.0.0.0/8", 0)],
    "allow_clients": [("[1.2.3.4/33]", 0), ('["::/129"]', 0), ("[1.2.3.4/-1]", 0),
                      ("[1.2.3.4/8]", None), ("[0.0.0.0/0]", 1), ("[[1]]", 0),
                      ("[{a: 1}]", 0), ("[~]", 0), ("[1.2.3.4/]", 0), ("[/8]", 0)],
    "admin": [("off", 1), ('"off"', 1), ("false", 1), ("no", 1), ("unix:/tmp/x.sock", 1),
              ("unix:", 0), ("unix:relative", None), ("127.0.0.1", 0), ("yes", 0),
              ("unix:/" + "a" * 200, 0)],
    "workers": [("auto", 1), ('"auto"', None), ("Auto", 0), ("AUTO", 0)],
    # off as admin's: a boolean's off too (false was refused); a quoted one is a string
    "proxy_protocol": [("off", 1), ('"off"', 1), ("false", 1), ("no", 1), ("Off", 1),
                       ('"false"', 0), ("true", 0), ("v3", 0), ("V1", 0)],
}


def cases_ranges():
    by_leaf = {}
    for path, leaf in leaf_paths():
        by_leaf.setdefault(leaf, path)
    for leaf, items in RANGES.items():
        path = by_leaf[leaf]
        for text, ok in items:
            d = render(replace(BASE, path, text))
            _, _, vl, vc, _ = d.pos[path]
            exp = {1: "ok", 0: "error", None: "either", "rel": "error"}[ok]
            yield Case("range", f"{path}={text[:40]}", d.text().encode(), exp,
                       None if ok == "rel" else value_span(text, vl, vc),
                       words=SAYS_WHAT if LEAVES[leaf][0] in NUMERIC else None)


def cases_structure():
    # a mapping-valued key given each wrong value
    for path in ("services", "services[0].timeouts", "services[0].health",
                 "services[0].keepalive", "services[0].backends", "services[0]",
                 "services[0].backends[0]"):
        for label, text in VALUES:
            if path == "services[0].keepalive" and label == "bool":
                continue
            d0 = render(BASE)
            if path.endswith("]"):
                # a list item replaced by a scalar
                d = render(replace(BASE, path, [("name", "x")]))
                lines = d.text().split("\n")
                kl, kc, _, _, _ = d0.pos[path]
                lines[kl - 1] = lines[kl - 1][: kc - 1] + text
                txt = "\n".join(lines)
                exp = "error"
                yield Case("structure", f"{path}={label}", txt.encode(), exp,
                           value_span(text, kl, kc) + [(kl, kc - 2, kc)])
                continue
            d = render(replace(BASE, path, text))
            _, _, vl, vc, _ = d.pos[path]
            exp = "error"
            if path.endswith("timeouts") or path.endswith("health") or path.endswith("keepalive"):
                if label == "empty-mapping":
                    exp = "ok"
                elif label in ("null", "tilde", "empty"):
                    exp = "either"
            # [1, 2] for a list of mappings: two items wrong, an error each
            yield Case("structure", f"{path}={label}", d.text().encode(), exp,
                       value_span(text, vl, vc),
                       many=label == "list" and path in ("services", "services[0].backends"))
    # an unknown key in each mapping, and a key repeated
    for path in ("", "services[0]", "services[0].timeouts", "services[0].health",
                 "services[0].keepalive", "services[0].backends[0]"):
        for label, key in (("unknown", "bogus_key"), ("typo", "nmae"), ("quoted", '"bogus"'),
                           ("case", "Name"), ("merge", "<<"), ("list-key", "? [a]"),
                           ("map-key", "? {a: 1}"), ("null-key", "~"), ("int-key", "1"),
                           ("empty-key", '""')):
            t = insert_after(BASE, path, [("__K__", "1")])
            d = render(t)
            p = f"{path}.__K__" if path else "__K__"
            kl, kc, _, _, _ = d.pos[p]
            txt = d.text()
            if key.startswith("? "):
                # complex key: "? KEY\n<indent>: 1"
                lines = txt.split("\n")
                lines[kl - 1] = " " * (kc - 1) + key + "\n" + " " * (kc - 1) + ": 1"
                txt = "\n".join(lines)
                span = [(kl, kc, kc + len(key))]
            else:
                txt = txt.replace("__K__", key)
                span = [(kl, kc, kc + len(key) - 1)]
            yield Case("unknown-key", f"{path or 'top'}:{label}", txt.encode(), "error", span)
        # a repeated key: the pair's first key again at the end
        d0 = render(BASE)
        if path == "":
            first = "workers"
        elif path.endswith("backends[0]") or path == "services[0]":
            first = "name"
        else:
            first = {"timeouts": "connect", "health": "enabled", "keepalive": "enabled"}[
                path.rsplit(".", 1)[1]]
        val = "web-9" if first == "name" else "auto" if first == "workers" else \
            "1s" if first == "connect" else "true"
        d = render(insert_after(BASE, path, [(first + "__DUP", val)]))
        p = f"{path}.{first}__DUP" if path else f"{first}__DUP"
        kl, kc, _, _, _ = d.pos[p]
        yield Case("duplicate-key", f"{path or 'top'}:{first}",
                   d.text().replace("__DUP", "").encode(), "error", [(kl, kc, kc)])
    # duplicate names / listen addresses / backend names
    svc2 = replace(SERVICE_RING, "name", "web")
    d = render(replace(BASE, "services", [SERVICE_WEB, svc2]))
    yield Case("duplicate-name", "service name", d.text().encode(), "error",
               value_span("web", *d.pos["services[1].name"][2:4]))
    for listen, ok in (("127.0.0.1:18380", 0), ('"[::ffff:127.0.0.1]:18380"', None),
                       ("0.0.0.0:18380", 0), ('"[::]:18380"', None), ("127.0.0.1:0", None)):
        svc2 = replace(SERVICE_RING, "listen", listen)
        base = replace(BASE, "services", [SERVICE_WEB, svc2])
        if listen.endswith(":0\"") or listen.endswith(":0"):
            base = replace(base, "services[0].listen", "127.0.0.1:0")
        d = render(base)
        exp = {0: "error", None: "either"}[ok]
        yield Case("duplicate-name", f"listen {listen}", d.text().encode(), exp,
                   value_span(listen, *d.pos["services[1].listen"][2:4]) +
                   value_span("x", *d.pos["services[0].listen"][2:4]))
    d = render(replace(BASE, "services[0].backends[1].name", "web-1"))
    yield Case("duplicate-name", "backend name", d.text().encode(), "error",
               value_span("web-1", *d.pos["services[0].backends[1].name"][2:4]))
    d = render(replace(BASE, "services[0].backends[1].name", '"web-1"'))
    yield Case("duplicate-name", "backend name quoted", d.text().encode(), "error",
               value_span('"web-1"', *d.pos["services[0].backends[1].name"][2:4]))
    d = render(replace(BASE, "services[0].backends[1].address", "127.0.0.1:18381"))
    yield Case("duplicate-name", "backend address", d.text().encode(), "either",
               value_span("x" * 15, *d.pos["services[0].backends[1].address"][2:4]))
    # a required key missing: anywhere in the mapping that lacks it
    for path in ("services[0].name", "services[0].listen", "services[0].backends",
                 "services[0].backends[0].name", "services[0].backends[0].address", "services"):
        d = render(replace(BASE, path, None))
        yield Case("missing", path, d.text().encode(), "error", None)
    # empty sequences
    for path in ("services[0].backends", "services", "services[0].allow_clients"):
        d = render(replace(BASE, path, "[]"))
        _, _, vl, vc, _ = d.pos[path]
        yield Case("structure", f"{path}=[]", d.text().encode(), "error",
                   value_span("[]", vl, vc))


FULL_TEXT = None


def cases_yaml():
    base = render(BASE).text()
    b = base.encode()
    Y = "yaml"
    yield Case(Y, "base", b, "ok")
    yield Case(Y, "full.yaml", FULL_TEXT, "ok")
    yield Case(Y, "crlf", b.replace(b"\n", b"\r\n"), "ok")
    yield Case(Y, "cr only", b.replace(b"\n", b"\r"), "either")
    yield Case(Y, "bom", b"\xef\xbb\xbf" + b, "ok")
    yield Case(Y, "bom crlf", b"\xef\xbb\xbf" + b.replace(b"\n", b"\r\n"), "ok")
    yield Case(Y, "utf16 bom", b"\xff\xfe" + base.encode("utf-16-le"), "either")
    yield Case(Y, "double bom", b"\xef\xbb\xbf\xef\xbb\xbf" + b, "either")
    yield Case(Y, "bom mid-file", b.replace(b"workers", b"\xef\xbb\xbfworkers", 1), "either")
    yield Case(Y, "doc markers", b"%YAML 1.2\n---\n" + b + b"...\n", "ok")
    yield Case(Y, "yaml 1.1 directive", b"%YAML 1.1\n---\n" + b, "either")
    yield Case(Y, "yaml 9.9 directive", b"%YAML 9.9\n---\n" + b, "either")
    yield Case(Y, "unknown directive", b"%FOO bar\n---\n" + b, "either")
    yield Case(Y, "two documents", b + b"---\n" + b, "error", [(len(base.split("\n")), 1, 3)])
    yield Case(Y, "second document empty", b + b"---\n", "either")
    yield Case(Y, "only ---", b"---\n", "error", [(1, 1, 4), (2, 1, 1)])
    yield Case(Y, "empty", b"", "error", [(1, 1, 1)])
    yield Case(Y, "only newline", b"\n", "error", [(1, 1, 1), (2, 1, 1)])
    yield Case(Y, "only comments", b"# a\n# b\n", "error", None)
    yield Case(Y, "only spaces", b"   \n  \n", "error", None)
    yield Case(Y, "tab indent", b.replace(b"\n  - name: web", b"\n\t- name: web"), "error",
               None)
    yield Case(Y, "tab before value", b.replace(b"workers: auto", b"workers:\tauto"), "ok")
    yield Case(Y, "tab after value", b.replace(b"workers: auto", b"workers: auto\t"), "ok")
    yield Case(Y, "trailing spaces", b.replace(b"\n", b"   \n"), "ok")
    ln = base.split("\n").index("workers: auto") + 1
    yield Case(Y, "latin-1 byte in value", b.replace(b"workers: auto", b"workers: aut\xe9"),
               "error", [(ln, 1, 20)])
    yield Case(Y, "latin-1 byte in comment", b.replace(b"workers: auto", b"workers: auto # \xe9"),
               "either")
    yield Case(Y, "0xff byte", b.replace(b"name: web\n", b"name: w\xffb\n", 1), "error", None)
    yield Case(Y, "overlong utf8", b.replace(b"name: web\n", b"name: w\xc0\xafb\n", 1), "error",
               None)
    yield Case(Y, "surrogate utf8", b.replace(b"name: web\n", b"name: w\xed\xa0\x80b\n", 1),
               "error", None)
    yield Case(Y, "truncated utf8 at end", b + b"\xe2\x82", "error", None)
    yield Case(Y, "NUL at start", b"\0" + b, "error", [(1, 1, 1)])
    yield Case(Y, "NUL in value", b.replace(b"workers: auto", b"workers: au\0to"), "error",
               [(ln, 1, 20)])
    yield Case(Y, "NUL in comment", b.replace(b"workers: auto", b"workers: auto # a\0b"),
               "error", [(ln, 1, 20)])
    yield Case(Y, "NUL at end", b + b"\0", "error", None)
    yield Case(Y, "escaped NUL in name", b.replace(b"name: web\n", b'name: "w\\0b"\n', 1), "error",
               None)
    yield Case(Y, "escaped NUL in key", b.replace(b"workers: auto", b'"work\\0ers": auto'),
               "error", [(ln, 1, 12)])
    yield Case(Y, "C0 control", b.replace(b"workers: auto", b"workers: au\x01to"), "error",
               [(ln, 1, 20)])
    yield Case(Y, "DEL", b.replace(b"name: web\n", b"name: w\x7fb\n", 1), "error", None)
    yield Case(Y, "nbsp in key", b.replace(b"workers: auto", "workers\u00a0: auto".encode()),
               "error", [(ln, 1, 12)])
    yield Case(Y, "zero-width in key", b.replace(b"workers: auto", "work\u200bers: auto".encode()),
               "error", [(ln, 1, 12)])
    # anchors and aliases: valid uses
    anchor_ok = base.replace("  - name: web\n", "  - &svc\n    name: web\n", 1)
    yield Case(Y, "anchor on a service", anchor_ok.encode(), "ok")
    t = base.replace("    timeouts:\n", "    timeouts: &to\n", 1).replace(
        "  - name: ring-example\n", "  - name: ring-example\n    timeouts: *to\n", 1)
    yield Case(Y, "alias of a mapping", t.encode(), "ok")
    t = base.replace("workers: auto", "workers: &w 4").replace("    connect_retries: 2",
                                                                "    connect_retries: *w")
    yield Case(Y, "alias of a scalar", t.encode(), "ok")
    t = base.replace("    allow_clients:\n", "    allow_clients: &nets\n", 1).replace(
        "    deny_clients:\n      - 10.9.0.0/16\n", "    deny_clients: *nets\n", 1)
    yield Case(Y, "alias of a list", t.encode(), "ok")
    # an error in an aliased value: at the value, naming the alias
    t = base.replace("    health:\n", "    health: &h\n", 1).replace(
        "  - name: ring-example\n", "  - name: ring-example\n    keepalive: *h\n", 1)
    lines = t.split("\n")
    hl = lines.index("    health: &h") + 1
    al = lines.index("    keepalive: *h") + 1
    yield Case(Y, "alias of health as keepalive", t.encode(), "error",
               [(l, 1, 40) for l in range(hl, hl + 10)],
               words=rf"\(through the alias at line {al}, column 16\)$", many=True)
    t = base.replace("  - name: web\n", "  - &svc\n    name: web\n", 1) + "  - *svc\n"
    yield Case(Y, "service repeated by an alias", t.encode(), "error", [(7, 11, 11)],
               words=rf"duplicate service name 'web'.*\(through the alias at line "
                     rf"{len(t.split(chr(10))) - 1}, column 5\)$")
    t = base.replace("workers: auto", "workers: *nowhere")
    yield Case(Y, "undefined alias", t.encode(), "error", [(ln, 10, 17)])
    t = base.replace("workers: auto", "workers: &a auto").replace("admin: 127.0.0.1:9901",
                                                                 "admin: &a 127.0.0.1:9901")
    yield Case(Y, "anchor redefined", t.encode(), "either")
    t = base.replace("workers: auto", "*k : auto\nadmin2: &k workers")
    yield Case(Y, "alias as a key before its anchor", t.encode(), "error", [(ln, 1, 3)])
    t = base.replace("workers: auto", "w: &k workers\n*k : auto")
    yield Case(Y, "alias as a key", t.encode(), "error", None)
    t = base.replace("services:\n", "services: &s\n", 1) + "x: *s\n"
    yield Case(Y, "alias of services under an unknown key", t.encode(), "error",
               [(len(base.split("\n")), 1, 1)])
    # an alias of a node that contains itself
    t = base.replace("services:\n", "services: &s\n", 1).replace(
        "    deny_clients:\n      - 10.9.0.0/16\n", "    deny_clients: *s\n")
    yield Case(Y, "recursive alias", t.encode(), "error", None)
    # merge keys
    t = base.replace("    timeouts:\n", "    timeouts: &to\n", 1).replace(
        "  - name: ring-example\n", "  - name: ring-example\n    timeouts:\n      <<: *to\n", 1)
    lines = t.split("\n")
    ml = lines.index("      <<: *to") + 1
    yield Case(Y, "merge key", t.encode(), "error", [(ml, 7, 8)])
    # tags
    for tag, where, exp in (("!!str", "workers: !!str auto", "either"),
                            ("!!int string", "workers: !!int auto", "error"),
                            ("!!int number", "workers: !!int 4", "either"),
                            ("!!binary", "workers: !!binary YXV0bw==", "error"),
                            ("!foo", "workers: !foo auto", "error"),
                            ("!<tag:x>", "workers: !<tag:example.com,2000:x> auto", "error"),
                            ("!!map", "workers: !!map {}", "error"),
                            ("!!str key", "!!str workers: auto", "either"),
                            ("!!null", "admin: !!null ''", "either"),
                            ("!!bool", "log: !!bool yes", "error"),
                            ("!!float", "workers: !!float 4", "error"),
                            ("tag directive", None, "either"),
                            ("unknown handle", "workers: !x!y auto", "error"),
                            ("verbatim !", "workers: ! auto", "either")):
        if where is None:
            t = "%TAG !e! tag:example.com,2000:\n---\n" + base.replace("workers: auto",
                                                                     "workers: !e!foo auto")
            yield Case(Y, f"tag {tag}", t.encode(), "error", None)
            continue
        t = base.replace("workers: auto", where) if not where.startswith("log") else \
            base.replace("    log_connections: false", "    log_connections: !!bool yes")
        li = t.split("\n").index(where if not where.startswith("log") else
                                 "    log_connections: !!bool yes") + 1
        yield Case(Y, f"tag {tag}", t.encode(), exp, [(li, 1, len(where) + 8)])
    # flow style: the whole config on a line, and a service in flow style
    yield Case(Y, "flow services", (
        "{workers: auto, services: [{name: web, listen: '127.0.0.1:18380', backends: "
        "[{name: a, address: '127.0.0.1:18381'}]}]}\n").encode(), "ok")
    yield Case(Y, "flow unknown key", (
        "{workers: auto, services: [{name: web, listen: '127.0.0.1:18380', bogus: 1, backends: "
        "[{name: a, address: '127.0.0.1:18381'}]}]}\n").encode(), "error", [(1, 67, 71)])
    yield Case(Y, "flow wrong type", (
        "{workers: auto, services: [{name: web, listen: '127.0.0.1:18380', backends: "
        "[{name: a, address: '127.0.0.1:18381', weight: [1]}]}]}\n").encode(), "error",
        [(1, 123, 125)])
    yield Case(Y, "flow unclosed", b"{workers: auto, services: [\n", "error", None)
    yield Case(Y, "flow multi-line", (
        "services: [\n  {name: web,\n   listen: '127.0.0.1:18380',\n   backends: [\n"
        "     {name: a, address: '127.0.0.1:18381'}]}\n  ]\n").encode(), "ok")
    # block scalars
    for style, exp in (("|", "error"), (">", "error"), ("|-", "ok"), (">-", "ok"), ("|+", "error")):
        t = base.replace("  - name: web\n", f"  - name: {style}\n      web\n", 1)
        li = t.split("\n").index(f"  - name: {style}") + 1
        yield Case(Y, f"block scalar {style} name", t.encode(), exp, [(li, 11, 14)])
    t = base.replace('    send: "PING\\r\\n"', "    send: |\n      PING\n      PONG")
    yield Case(Y, "block scalar send", t.encode(), "ok")
    # quoting
    yield Case(Y, "single-quoted listen", base.replace("listen: 127.0.0.1:18380",
                                                       "listen: '127.0.0.1:18380'").encode(), "ok")
    yield Case(Y, "unterminated quote", base.replace("listen: 127.0.0.1:18380",
                                                     "listen: '127.0.0.1:18380").encode(), "error",
               None)
    yield Case(Y, "bad escape", base.replace('send: "PING\\r\\n"', 'send: "PING\\q"').encode(),
               "error", None)
    yield Case(Y, "bad indent", base.replace("    scheme: maglev", "     scheme: maglev").encode(),
               "error", None)
    yield Case(Y, "key without value colon", base.replace("workers: auto", "workers auto").encode(),
               "error", None)
    yield Case(Y, "top-level list", b"- a\n- b\n", "error", [(1, 1, 1)])
    yield Case(Y, "top-level scalar", b"hello\n", "error", [(1, 1, 1)])
    yield Case(Y, "top-level null", b"~\n", "error", [(1, 1, 1)])
    yield Case(Y, "top-level quoted", b'"services"\n', "error", [(1, 1, 1)])
    yield Case(Y, "anchor on top", b"&top\n" + b, "ok")
    yield Case(Y, "comment after document end", b + b"...\n# bye\n", "ok")
    yield Case(Y, "garbage after document end", b + b"...\ngarbage\n", "error", None)
    yield Case(Y, "long line", b.replace(b"workers: auto", b"workers: " + b"a" * 200000), "error",
               [(ln, 10, 10)])
    yield Case(Y, "long key", b.replace(b"workers: auto", b"k" * 200000 + b": 1"), "error",
               [(ln, 1, 1)])


def cases_stress():
    S = "stress"
    base = render(BASE).text()
    b = base.encode()
    # deep nesting: flow and block, in a known key and an unknown one
    for depth in (100, 1000, 10000, 100000, 1000000):
        yield Case(S, f"deep flow list {depth}",
                   (base + "x: " + "[" * depth + "]" * depth + "\n").encode(), "error", None)
        yield Case(S, f"deep flow map {depth}",
                   (base + "x: " + "{a: " * depth + "1" + "}" * depth + "\n").encode(), "error",
                   None)
        yield Case(S, f"deep in allow_clients {depth}",
                   base.replace("    deny_clients:\n      - 10.9.0.0/16\n",
                                "    deny_clients: " + "[" * depth + "]" * depth + "\n").encode(),
                   "error", None)
    for depth in (100, 1000, 2000):
        yield Case(S, f"deep block list {depth}",
                   (base + "x:\n" + "\n".join(" " * (i * 2 + 2) + "-" for i in range(depth))
                    + " 1\n").encode(), "error", None)
        yield Case(S, f"deep block map {depth}",
                   (base + "x:\n" + "".join(" " * (i * 2 + 2) + "a:\n" for i in range(depth))
                    + " " * (2 * depth + 2) + "1\n").encode(), "error", None)
    # billion laughs: 9 levels of 9 (and 10 of 10) aliases, in an unknown key and a known one
    for levels, width in ((9, 9), (10, 10), (30, 2), (64, 2)):
        lol = ['a0: &a0 "lol"']
        for i in range(1, levels + 1):
            lol.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
        bomb = "\n".join(lol) + "\n"
        yield Case(S, f"alias bomb {width}^{levels} top", (bomb + base).encode(), "error", None)
        # inside a known list, under a valid key
        lol_in = ["    deny_clients:", '      - &b0 "10.0.0.0/8"'] + [
            f"      - &b{i} [" + ", ".join([f"*b{i - 1}"] * width) + "]"
            for i in range(1, levels + 1)]
        t = base.replace("    deny_clients:\n      - 10.9.0.0/16\n", "\n".join(lol_in) + "\n")
        yield Case(S, f"alias bomb {width}^{levels} in deny_clients", t.encode(), "error", None)
        # mapping-valued bomb merged under timeouts
        t = base.replace("workers: auto",
                         "workers: auto\nz0: &z0 {a: 1}\n" + "".join(
                             f"z{i}: &z{i} [" + ", ".join([f"*z{i - 1}"] * width) + "]\n"
                             for i in range(1, levels + 1)))
        yield Case(S, f"alias bomb {width}^{levels} maps", t.encode(), "error", None)
    # many anchors / aliases (linear size)
    n = 40000
    t = base.replace("workers: auto", "workers: auto\n" + "".join(
        f"k{i}: &x{i} {i}\n" for i in range(n)) + "many: [" + ", ".join(
        f"*x{i}" for i in range(n)) + "]")
    yield Case(S, "40000 anchors and aliases", t.encode(), "error", None, many=True)
    # a very large file: many services (valid), and past the size limit
    svcs = []
    for i in range(2000):
        svcs.append(f"  - name: s{i}\n    listen: 127.0.0.{1 + i // 250}:{20300 + i}\n"
                    f"    scheme: ring\n    vnodes: 1\n    health: {{enabled: false}}\n"
                    f"    backends:\n      - {{name: a, address: 127.0.0.1:1}}\n")
    yield Case(S, "2000 services", ("services:\n" + "".join(svcs)).encode(), "ok")
    yield Case(S, "16 MiB + 1 of comments", b + b"#" * (16 << 20) + b"\n", "error", None,
               nofile=True)
    yield Case(S, "15 MiB of comments", b + (b"#" * 1000 + b"\n") * 15000, "ok")
    yield Case(S, "100k backends", ("services:\n  - name: s\n    listen: 127.0.0.1:1\n"
                                    "    scheme: ring\n    vnodes: 1\n    health: {enabled: false}\n"
                                    "    backends:\n" + "".join(
        f"      - {{name: b{i}, address: 127.0.0.1:{1 + i % 60000}}}\n" for i in range(100000))
    ).encode(), "error", None)
    yield Case(S, "long scalar 15 MiB", b.replace(b"workers: auto",
                                                  b"workers: " + b"x" * (15 << 20)), "error", None)
    yield Case(S, "many keys in a map", (base + "x: {" + ", ".join(
        f"k{i}: {i}" for i in range(200000)) + "}\n").encode(), "error", None)
    yield Case(S, "many duplicate keys", base.replace("  - name: web\n", "  - name: web\n" + "".join(
        f"    x{i}: 1\n" for i in range(100000)), 1).encode(), "error", None, many=True)
    # a key repeated after many unknown ones: every error listed, each repeat was looked for
    # among all the keys before it (minutes for 16 MiB; stopping at the first error, none)
    yield Case(S, "duplicates after unknown keys", base.replace("  - name: web\n", "  - name: web\n" + "".join(
        f"    x{i}: 1\n" for i in range(100000)) + "    seed: 1\n" * 100000, 1).encode(),
        "error", None, many=True)


def cases_files(tmp):
    F = "file"
    base = render(BASE).text().encode()
    yield Case(F, "directory", path=tmp, expect="error", nofile=True)
    p = os.path.join(tmp, "unreadable.yaml")
    with open(p, "wb") as f:
        f.write(base)
    os.chmod(p, 0)
    yield Case(F, "unreadable", path=p, expect="error" if os.geteuid() != 0 else "ok", nofile=True)
    yield Case(F, "missing", path=os.path.join(tmp, "nope.yaml"), expect="error", nofile=True)
    yield Case(F, "missing dir", path=os.path.join(tmp, "nope", "x.yaml"), expect="error",
               nofile=True)
    yield Case(F, "/dev/null", path="/dev/null", expect="error", nofile=True)
    fifo = os.path.join(tmp, "fifo.yaml")
    os.mkfifo(fifo)
    yield Case(F, "fifo", path=fifo, expect="error", nofile=True)
    yield Case(F, "/proc file", path="/proc/self/status", expect="error", nofile=True,
               many=True)
    link = os.path.join(tmp, "link.yaml")
    os.symlink(link, link)
    yield Case(F, "symlink loop", path=link, expect="error", nofile=True)
    # no file named at all: a usage error (exit 2), as any invalid option value
    yield Case(F, "empty path", path="", expect="usage", words=r"invalid value '' for option -c")
    long = os.path.join(tmp, "a" * 300)
    yield Case(F, "name too long", path=long, expect="error", nofile=True)
    colon = os.path.join(tmp, "a:1:2.yaml")
    with open(colon, "wb") as f:
        f.write(b"workers: 0\n")
    yield Case(F, "colons in the name", path=colon, expect="error", span=[(1, 10, 10)])
    # (a newline in the file's name breaks the error's line: hashlb prints the name as is)


# --- running --------------------------------------------------------------------------
SAN = re.compile(r"AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|"
                 r"Segmentation fault|Aborted")


def run_check(hashlb, path, timeout, mem_mb):
    """exit status, stdout, stderr, seconds, timed out, max RSS in KiB."""
    def limit():
        if mem_mb:
            resource.setrlimit(resource.RLIMIT_AS, (mem_mb << 20, mem_mb << 20))
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.monotonic()
        p = subprocess.Popen([hashlb, "check", "-q", "-c", path], stdout=fo, stderr=fe,
                             preexec_fn=limit)
        # its end awaited on a pidfd: a poll (sleeps of 1 to 50 ms) took a sixth more time
        pidfd = os.pidfd_open(p.pid)
        try:
            timed_out = not select.select([pidfd], [], [], timeout)[0]
        finally:
            os.close(pidfd)
        if timed_out:
            p.kill()
        pid, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        secs = time.monotonic() - t0
        fo.seek(0)
        fe.seek(0)
        return (p.returncode, fo.read().decode("utf-8", "replace"),
                fe.read().decode("utf-8", "replace"), secs, timed_out, ru.ru_maxrss)


def judge(case, path, rc, out, err, secs, timed_out, rss_kb, max_rss_mb, max_secs):
    """The defects of one run: [(kind, detail)]."""
    defects = []
    if timed_out:
        return [("hang", f"no answer in {secs:.1f}s")]
    if SAN.search(err) or rc < 0 or rc > 2:
        return [("crash", f"exit {rc}: {err[-600:]!r}")]
    if rss_kb > max_rss_mb * 1024:
        defects.append(("memory", f"max RSS {rss_kb // 1024} MiB"))
    if secs > max_secs:
        defects.append(("slow", f"{secs:.1f}s"))
    lines = err.splitlines()
    if case.expect == "ok" and rc != 0:
        return defects + [("refused-valid", f"exit {rc}: {err.strip()[:300]}")]
    if case.expect in ("error", "usage") and rc == 0:
        return defects + [("accepted-invalid", "exit 0")]
    if case.expect == "usage":
        if rc != 2:
            defects.append(("exit-status", f"exit {rc}, want 2 (usage)"))
        if not re.search(case.words, lines[0] if lines else ""):
            defects.append(("message", repr(err[:300])))
        return defects
    if rc == 0:
        # a config accepted may be warned of (two backends at one address), each warning one
        # line FILE:LINE:COLUMN: warning: ...; anything else on stderr is a defect
        other = [l for l in lines
                 if not re.fullmatch(re.escape(path) + r":\d+:\d+: warning: .+", l)]
        if other:
            defects.append(("stderr-on-success", "\n".join(other)[:200]))
        return defects
    if rc != 1:
        defects.append(("exit-status", f"exit {rc}"))
    if len(lines) != 1 and not case.many:
        defects.append(("not-one-line", f"{len(lines)} lines: {err[:300]!r}"))
    elif len(lines) != 1:
        defects += many_errors(lines, path)
    first = lines[0] if lines else ""
    m = re.fullmatch(re.escape(path) + r":(\d+):(\d+): error: (.+)", first)
    if m is None:
        if case.nofile and re.fullmatch(re.escape(path) + r": error: .+", first):
            return defects
        return defects + [("format", repr(first[:300]))]
    line, col, msg = int(m.group(1)), int(m.group(2)), m.group(3)
    if case.span is not None and not any(l == line and lo <= col <= hi
                                         for l, lo, hi in case.span):
        defects.append(("position", f"at {line}:{col}, want one of {case.span}: {msg[:200]}"))
    if case.words and not re.search(case.words, msg):
        defects.append(("message", msg[:200]))
    # the message says what is wrong: not just a bare word
    if len(msg) < 12:
        defects.append(("message", f"too terse: {msg!r}"))
    return defects


def many_errors(lines, path):
    """Defects of check's refusal <lines> of a file of several mistakes: each error a line
    FILE:LINE:COL: error: WHAT in file order, at most 20, then "and N more errors" if there
    are more, then the count."""
    pos = [re.fullmatch(re.escape(path) + r":(\d+):(\d+): error: .+", l) for l in lines]
    shown = [(int(m.group(1)), int(m.group(2))) for m in pos if m]
    rest = lines[len(shown):]
    more = re.fullmatch(r"hashlb check: and (\d+) more errors?", rest[0]) if rest else None
    total = re.fullmatch(r"hashlb check: (\d+) errors", rest[-1]) if rest else None
    if (not all(pos[:len(shown)]) or len(shown) > 20 or shown != sorted(shown) or
            total is None or len(rest) != 1 + (more is not None) or
            int(total.group(1)) != len(shown) + (int(more.group(1)) if more else 0)):
        return [("many-errors", repr("\n".join(lines)[:300]))]
    return []


def logfmt_value(line, key):
    """The value of <key>= in a logfmt <line>, unquoted; None if absent."""
    m = re.search(rf'(?:^| ){key}=("(?:[^"\\]|\\.)*"|\S*)', line)
    if not m:
        return None
    v = m.group(1)
    if v.startswith('"'):
        v = re.sub(r"\\(.)", r"\1", v[1:-1])
    return v


def reload_run(args, cases, tmp):
    """Each refused case given to a running hashlb run as a reload (SIGHUP and ctl reload in
    turn): the reload fails with the error check gives (same line, column and message), the
    old config keeps serving, and the daemon ends cleanly. [(kind, detail)] per case."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import lbtest
    from ctltest import Lb, config

    be = lbtest.Backend("a")
    lb = Lb(config([("a", be.addr)], health="enabled: false"), binary=args.hashlb)
    good = open(lb.path).read().replace("listen: 127.0.0.1:0", f"listen: {lb.addrs[0]}", 1)
    results = []
    try:
        for i, c in enumerate(cases):
            live = lb.path
            if c.path is not None:
                tmp_link = live + ".new"
                os.symlink(c.path, tmp_link)
                os.replace(tmp_link, live)
            else:
                with open(live + ".new", "wb") as f:
                    f.write(c.data)
                os.replace(live + ".new", live)
            chk = subprocess.run([args.hashlb, "check", "-q", "-c", live], capture_output=True,
                                 timeout=args.timeout)
            want = chk.stderr.decode("utf-8", "replace").strip()
            if chk.returncode == 0:  # valid after all (check's run says so): not a reload test
                continue
            n = sum('msg="reload failed' in l or "msg=reloaded " in l for l in lb.log)
            if i % 2:
                lb.proc.send_signal(signal.SIGHUP)
                how = "SIGHUP"
            else:
                subprocess.run([args.hashlb, "ctl", "--admin", lb.admin, "reload"],
                               capture_output=True, timeout=args.timeout)
                how = "ctl reload"
            d = []
            if not lbtest.wait_until(lambda: sum('msg="reload failed' in l or "msg=reloaded " in l
                                                 for l in lb.log) > n, timeout=args.timeout):
                d.append(("reload-hang", f"{how}: no reload line"))
            else:
                line = [l for l in lb.log if 'msg="reload failed' in l or "msg=reloaded " in l][n]
                if "msg=reloaded " in line:
                    d.append(("reload-accepted", f"{how}: {line[:200]}"))
                else:
                    got = f"{live}:{logfmt_value(line, 'line')}:{logfmt_value(line, 'column')}: " \
                        f"error: {logfmt_value(line, 'err')}"
                    if logfmt_value(line, "line") is None:
                        got = f"{live}: error: {logfmt_value(line, 'err')}"
                    if got != want and not (len(want) > 300 and got[:200] == want[:200]):
                        d.append(("reload-differs", f"{how}: log {got[:300]!r} check {want[:300]!r}"))
            if lb.proc.poll() is not None:
                d.append(("reload-crash", f"{how}: exit {lb.proc.poll()}"))
                results.append((c, d))
                break
            try:
                served = lbtest.who(lb.addr)
            except OSError as e:
                served = repr(e)
            if served != "a":
                d.append(("reload-not-serving", f"{how}: {served} {lb.log[-3:]}"))
            results.append((c, d))
        with open(lb.path + ".new", "w") as f:
            f.write(good)
        os.replace(lb.path + ".new", lb.path)
        r = subprocess.run([args.hashlb, "ctl", "--admin", lb.admin, "reload"], capture_output=True,
                           text=True, timeout=args.timeout)
        extra = []
        if r.returncode != 0:
            extra.append(("reload-good-refused", r.stderr[:300]))
        rc = lb.stop()
        log = "\n".join(lb.log_to_end())
        if rc != 0 or SAN.search(log):
            extra.append(("reload-crash", f"exit {rc}: {log[-1500:]}"))
        if extra:
            results.append((Case("reload", "end"), extra))
    finally:
        if lb.proc.poll() is None:
            lb.stop()
        be.stop()
    return results


def all_cases(tmp):
    yield from cases_yaml()
    yield from cases_types()
    yield from cases_ranges()
    yield from cases_structure()
    yield from cases_stress()
    yield from cases_files(tmp)


def check_run(args, cases, tmp):
    """hashlb check -c on each case: [(case, [(kind, detail)])]."""
    out = []
    for i, c in enumerate(cases):
        if c.path is not None:
            path = c.path
        else:
            path = os.path.join(tmp, f"case{i}.yaml")
            with open(path, "wb") as f:
                f.write(c.data)
        rc, so, err, secs, to, rss = run_check(args.hashlb, path, args.timeout, args.mem_limit)
        d = judge(c, path, rc, so, err, secs, to, rss, args.max_rss, args.max_secs)
        if args.verbose and rc != 0:
            print(f"  [{c.kind}] {c.name}: {err.strip()[len(path):][:200]}")
        out.append((c, d))
        if c.path is None and not d:
            os.unlink(path)
    return out


def report(what, cases, results):
    """Print each defect of <results> and the figures; the number of defects."""
    by_kind, n_case, n_def = {}, {}, 0
    for c in cases:
        n_case[c.kind] = n_case.get(c.kind, 0) + 1
    for c, d in results:
        for kind, detail in d:
            n_def += 1
            by_kind[kind] = by_kind.get(kind, 0) + 1
            print(f"DEFECT {kind}: [{c.kind}] {c.name}: {detail}", flush=True)
    print(f"{what}: {len(cases)} ({', '.join(f'{k} {v}' for k, v in sorted(n_case.items()))})")
    print(f"defects: {n_def}" + (f" ({', '.join(f'{k} {v}' for k, v in sorted(by_kind.items()))})"
                                 if by_kind else ""), flush=True)
    return n_def


def ci_sample(cases):
    """What CI runs (a few seconds): every YAML, file, key and name case, the stress cases
    of under 4 MiB (deep nesting, alias bombs), and a fixed sample of 120 of the
    wrong-type, range and structure cases."""
    small = [c for c in cases if c.kind in ("yaml", "file", "unknown-key", "duplicate-key",
                                             "duplicate-name", "missing") or
             (c.kind == "stress" and c.data is not None and len(c.data) < (4 << 20))]
    rest = [c for c in cases if c.kind in ("wrong-type", "range", "structure")]
    return small + random.Random(4).sample(rest, 120)


def main(argv=None):
    global FULL_TEXT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hashlb", default=os.environ.get("HASHLB", "build/src/cli/hashlb"))
    ap.add_argument("--source-root", default=os.environ.get("HASHLB_SOURCE_ROOT", "."))
    ap.add_argument("--sample", type=int, default=0, help="run N cases chosen by --seed")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="", help="a regex on kind/name")
    ap.add_argument("--max-rss", type=int, default=256, help="MiB a run may take")
    ap.add_argument("--max-secs", type=float, default=10.0, help="what counts as slow")
    ap.add_argument("--timeout", type=float, default=120.0, help="what counts as a hang")
    ap.add_argument("--mem-limit", type=int, default=0, help="RLIMIT_AS in MiB (not for ASan)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each refusal")
    ap.add_argument("--reload", action="store_true",
                    help="give the refused cases to a running hashlb run as reloads instead")
    ap.add_argument("--ci", action="store_true",
                    help="CI's sample (ci_sample()), then 30 of its refusals as reloads; no time "
                         "bound")
    args = ap.parse_args(argv)
    if args.ci:
        args.max_secs = float("inf")
        args.timeout = 600.0
    with open(os.path.join(args.source_root, "configs", "full.yaml"), "rb") as f:
        FULL_TEXT = f.read()
    tmp = tempfile.mkdtemp(prefix="hashlb-probe-")
    try:
        cases = list(all_cases(tmp))
        if args.only:
            cases = [c for c in cases if re.search(args.only, f"{c.kind}/{c.name}")]
        if args.sample:
            cases = random.Random(args.seed).sample(cases, min(args.sample, len(cases)))
        if args.ci:
            cases = ci_sample(cases)
        n_def = 0
        if not args.reload:
            n_def += report("cases", cases, check_run(args, cases, tmp))
        if args.reload or args.ci:
            # bigger than a few MiB: the daemon copes (the check run shows the memory)
            cases = [c for c in cases if c.expect == "error" and c.path != "" and
                     (c.kind != "stress" or "stress" in args.only)]
            if args.ci:
                cases = random.Random(5).sample(cases, 30)
            n_def += report("reload cases", cases, reload_run(args, cases, tmp))
        return 1 if n_def else 0
    finally:
        for root, dirs, files in os.walk(tmp):
            for x in files:
                try:
                    os.chmod(os.path.join(root, x), 0o600)
                except OSError:
                    pass
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
