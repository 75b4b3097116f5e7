"""The Prometheus text exposition format (0.0.4), read strictly: the integration tests'
/metrics checks and the kernel steering tests' (tests/steer), which import this module alone
(lbtest's import sets signal handlers and an exit hook of its own)."""
import gc
import re
from contextlib import contextmanager
from itertools import groupby

PROM_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
# a label value, escaped: any character but ", \ and a newline, or \\, \" or \n (unrolled, as
# (?:[^"\\\n]|\\[\\"n])* reads the same values a character at a time, twice as slowly)
PROM_LABEL_VALUE = r'[^"\\\n]*(?:\\[\\"n][^"\\\n]*)*'
PROM_LABEL = rf'([a-zA-Z_][a-zA-Z0-9_]*)="({PROM_LABEL_VALUE})"'
PROM_VALUE = r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|Inf)|NaN"
PROM_SAMPLE = re.compile(rf"({PROM_NAME})(\{{(?:{PROM_LABEL}(?:,{PROM_LABEL})*,?)?\}})? "
                         rf"(?P<value>{PROM_VALUE})(?: -?\d+)?")


PROM_VALUE_ALONE = re.compile(rf"(?:{PROM_VALUE})")
PROM_LABELS = re.compile(rf"[{{,]{PROM_LABEL}")  # of a label set, "{" first
PROM_HIST_SUFFIX = re.compile(r"_(bucket|sum|count)$")
# PROM_SAMPLE, each line of a page that is a sample at once: name, labels, value, timestamp
_LABEL_ANY = rf'[a-zA-Z_][a-zA-Z0-9_]*="{PROM_LABEL_VALUE}"'
_SAMPLE_LINES = re.compile(rf"^({PROM_NAME})(\{{(?:{_LABEL_ANY}(?:,{_LABEL_ANY})*,?)?\}})? "
                           rf"({PROM_VALUE})( -?\d+)?$", re.M)

# The shapes of the expositions read whole last (each line without its sample's value, HELP
# and TYPE lines as they are: every rule of the format but a value's is about them), with
# each sample's (name, labels) in order: a page of the same shape again (the same series, new
# values: a test polling a metric) has only its values read: an 8,000-service page in 0.6-1.2 s,
# where reading it whole took 17 s each time (12 s with the label sets read once each; 2.1 s
# of CPU now, read in bulk: _parse_fast(), where line by line took 5.4).
_shapes = {}
_SHAPES_MAX = 2


def parse_prometheus(text):
    """{(name, labels): value} of a text exposition (0.0.4); raises ValueError, naming the
    line, on anything the format does not allow: HELP and TYPE once per family and before
    its samples, a family's samples together, valid names and label names, label values
    escaped, no series twice, values that parse, counters named *_total."""
    with _gc_paused():
        return _parse_prometheus(text)


@contextmanager
def _gc_paused():
    """The cyclic garbage collector off meanwhile: a page's million tuples, none in a cycle,
    each set it off again over every object there is (a third of the time of reading an
    8,000-service page)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _parse_prometheus(text):
    if text and not text.endswith("\n"):
        raise ValueError("no final newline")
    lines = text.split("\n")[:-1]
    heads, values = [], []
    for line in lines:
        if line.startswith("#"):
            heads.append(line)
        else:
            head, _, value = line.rpartition(" ")
            heads.append(head)
            values.append(value)
    shape = "\n".join(heads)
    keys = _shapes.get(shape)
    if keys is not None:
        for k, value in enumerate(values):
            if not PROM_VALUE_ALONE.fullmatch(value):
                n = [n for n, line in enumerate(lines, 1) if not line.startswith("#")][k]
                raise ValueError(f"line {n}: not a sample: {lines[n - 1]!r}")
        return dict(zip(keys, map(float, values)))
    samples, stamped = _parse_whole(lines)
    # not a page whose samples have timestamps: its shape holds their values
    if not stamped and len(samples) == len(values):
        if len(_shapes) >= _SHAPES_MAX:
            del _shapes[next(iter(_shapes))]
        _shapes[shape] = list(samples)
    return samples


class _Families:
    """What the reading of a page knows at a line: each family's TYPE, those with a HELP, the
    family the samples are of now (<current>), those whose samples ended (<seen>)."""

    def __init__(self):
        self.types, self.helps, self.seen, self.current = {}, set(), set(), None
        self.bases = {}  # name: the histogram's or summary's it would be a sample of

    def head(self, n, line):
        """HELP or TYPE line <n>."""
        parts = line.split(" ", 3)
        if len(parts) < 4 and line.startswith("# TYPE "):
            raise ValueError(f"line {n}: bad TYPE: {line!r}")
        name = parts[2]
        if not re.fullmatch(PROM_NAME, name):
            raise ValueError(f"line {n}: bad metric name: {line!r}")
        if name in self.seen:
            raise ValueError(f"line {n}: {parts[1]} of {name} after its samples")
        if line.startswith("# TYPE "):
            if parts[3] not in ("counter", "gauge", "histogram", "summary", "untyped"):
                raise ValueError(f"line {n}: bad TYPE: {line!r}")
            if name in self.types:
                raise ValueError(f"line {n}: TYPE of {name} twice")
            self.types[name] = parts[3]
        else:
            if name in self.helps:
                raise ValueError(f"line {n}: HELP of {name} twice")
            if len(parts) == 4 and re.search(r"\\[^\\n]|\\$", parts[3]):
                raise ValueError(f"line {n}: HELP escapes only \\\\ and \\n: {line!r}")
            self.helps.add(name)
        if self.current is not None and name != self.current:
            self.seen.add(self.current)  # a new family's metadata ends the one before
        self.current = name

    def sample(self, n, name):
        """Sample line <n> of metric <name>. The lines of a run of samples of one name pass or
        fail as the first does: nothing is read in between."""
        base = self.bases.get(name)
        if base is None:
            base = self.bases[name] = PROM_HIST_SUFFIX.sub("", name)
        fam = base if self.types.get(base) in ("histogram", "summary") else name
        if fam != self.current:
            if fam in self.seen:
                raise ValueError(f"line {n}: samples of {fam} are not together")
            if self.current is not None:
                self.seen.add(self.current)
            self.current = fam
        if fam not in self.types:
            raise ValueError(f"line {n}: {fam} has no TYPE before its samples")
        if self.types[fam] == "counter" and not name.endswith("_total"):
            raise ValueError(f"line {n}: counter {name} not named *_total")

    def end(self):
        for fam in self.types:
            if fam not in self.helps:
                raise ValueError(f"{fam} has no HELP")


def _label_set(n, labels, line):
    """The (name, value) pairs of label set <labels> of line <n>, sorted: the series' labels
    whatever their order."""
    names = PROM_LABELS.findall(labels)
    if len({k for k, _ in names}) != len(names):
        raise ValueError(f"line {n}: a label twice: {line!r}")
    return tuple(sorted(names))


def _parse_whole(lines):
    """parse_prometheus() of <lines>, every rule checked, and whether a sample has a
    timestamp: read in bulk by _parse_fast(); a page it does not take, line by line by
    _parse_lines(), which names the first line at fault."""
    with _gc_paused():
        return _parse_fast(lines) or _parse_lines(lines)


def _parse_fast(lines):
    """_parse_lines() of <lines>, each rule checked on the whole page at once (every sample
    line by one regex, the label sets once each, the family rules once per run of samples of
    one name), or None where that would refuse it (or might: a page it does not take, it
    leaves to that one): an 8,000-service page (630,000 lines, 42 MB) in 1.8 s of CPU, where
    line by line took 4.5 s."""
    found = _SAMPLE_LINES.findall("\n".join(lines))
    heads = [(n, line) for n, line in enumerate(lines, 1) if line.startswith("#")]
    if len(found) + len(heads) != len(lines):
        return None  # a line that is no sample
    if not found:
        names = labels = values = stamps = ()
    else:
        names, labels, values, stamps = zip(*found)
    fams = _Families()
    try:
        at = 0  # the samples before head h: those of the lines before it, but the h heads
        for h, (n, line) in enumerate(heads + [(len(lines) + 1, "")]):
            for name, _ in groupby(names[at:n - 1 - h]):  # a run of samples of one name
                fams.sample(n, name)
            at = n - 1 - h
            if line.startswith(("# TYPE ", "# HELP ")):
                fams.head(n, line)
        fams.end()
        sets = {lab: _label_set(0, lab, "") for lab in set(labels)}
    except ValueError:
        return None
    samples = dict(zip(zip(names, labels), map(float, values)))
    if len(samples) != len(found):
        return None  # a series twice, its labels written alike
    if len(set(sets.values())) != len(sets):  # a label set written in two orders
        ids = {s: k for k, s in enumerate(sets.values())}
        if len(set(zip(names, (ids[sets[lab]] for lab in labels)))) != len(found):
            return None  # a series twice
    return samples, any(stamps)


def _parse_lines(lines):
    """_parse_whole() of <lines>, a line at a time: the first rule broken raises ValueError,
    naming its line."""
    fams, samples, series, stamped, label_sets = _Families(), {}, set(), False, {}
    for n, line in enumerate(lines, 1):
        if line.startswith(("# TYPE ", "# HELP ")):
            fams.head(n, line)
            continue
        if line.startswith("#"):
            continue
        m = PROM_SAMPLE.fullmatch(line)
        if not m:
            raise ValueError(f"line {n}: not a sample: {line!r}")
        name, labels = m.group(1), m.group(2) or ""
        names = label_sets.get(labels)  # the same set comes in many families
        if names is None:
            names = label_sets[labels] = _label_set(n, labels, line)
        fams.sample(n, name)
        key = (name, names)
        if key in series:
            raise ValueError(f"line {n}: series twice: {line!r}")
        series.add(key)
        samples[(name, labels)] = float(m.group("value"))
        stamped |= m.end("value") != len(line)
    fams.end()
    return samples, stamped
