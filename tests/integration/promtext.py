"""The Prometheus text exposition format (0.0.4), read strictly: the integration tests'
/metrics checks and the kernel steering tests' (tests/steer), which import this module alone
(lbtest's import sets signal handlers and an exit hook of its own)."""
import re

PROM_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
PROM_LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"'
PROM_VALUE = r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|Inf)|NaN"
PROM_SAMPLE = re.compile(rf"({PROM_NAME})(\{{(?:{PROM_LABEL}(?:,{PROM_LABEL})*,?)?\}})? "
                         rf"(?P<value>{PROM_VALUE})(?: -?\d+)?")


PROM_VALUE_ALONE = re.compile(rf"(?:{PROM_VALUE})")
PROM_LABELS = re.compile(rf"(?:^|[{{,]){PROM_LABEL}")
PROM_HIST_SUFFIX = re.compile(r"_(bucket|sum|count)$")

# The shapes of the expositions read whole last (each line without its sample's value, HELP
# and TYPE lines as they are: every rule of the format but a value's is about them), with
# each sample's (name, labels) in order: a page of the same shape again (the same series, new
# values: a test polling a metric) has only its values read: an 8,000-service page in 0.6-1.2 s,
# where reading it whole took 17 s each time (12 s now, the label sets read once each).
_shapes = {}
_SHAPES_MAX = 2


def parse_prometheus(text):
    """{(name, labels): value} of a text exposition (0.0.4); raises ValueError, naming the
    line, on anything the format does not allow: HELP and TYPE once per family and before
    its samples, a family's samples together, valid names and label names, label values
    escaped, no series twice, values that parse, counters named *_total."""
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


def _parse_whole(lines):
    """parse_prometheus() of <lines>, every rule checked, and whether a sample has a
    timestamp."""
    types, helps, samples, series, seen, current = {}, {}, {}, set(), set(), None
    stamped, label_sets, bases = False, {}, {}
    for n, line in enumerate(lines, 1):
        if line.startswith(("# TYPE ", "# HELP ")):
            parts = line.split(" ", 3)
            if len(parts) < 4 and line.startswith("# TYPE "):
                raise ValueError(f"line {n}: bad TYPE: {line!r}")
            name = parts[2]
            if not re.fullmatch(PROM_NAME, name):
                raise ValueError(f"line {n}: bad metric name: {line!r}")
            if name in seen:
                raise ValueError(f"line {n}: {parts[1]} of {name} after its samples")
            if line.startswith("# TYPE "):
                if parts[3] not in ("counter", "gauge", "histogram", "summary", "untyped"):
                    raise ValueError(f"line {n}: bad TYPE: {line!r}")
                if name in types:
                    raise ValueError(f"line {n}: TYPE of {name} twice")
                types[name] = parts[3]
            else:
                if name in helps:
                    raise ValueError(f"line {n}: HELP of {name} twice")
                if len(parts) == 4 and re.search(r"\\[^\\n]|\\$", parts[3]):
                    raise ValueError(f"line {n}: HELP escapes only \\\\ and \\n: {line!r}")
                helps[name] = True
            if current is not None and name != current:
                seen.add(current)  # a new family's metadata ends the one before
            current = name
            continue
        if line.startswith("#"):
            continue
        m = PROM_SAMPLE.fullmatch(line)
        if not m:
            raise ValueError(f"line {n}: not a sample: {line!r}")
        name, labels = m.group(1), m.group(2) or ""
        names = label_sets.get(labels)  # the same set comes in many families
        if names is None:
            names = PROM_LABELS.findall(labels)
            if len({k for k, _ in names}) != len(names):
                raise ValueError(f"line {n}: a label twice: {line!r}")
            names = label_sets[labels] = tuple(sorted(names))
        base = bases.get(name)
        if base is None:
            base = bases[name] = PROM_HIST_SUFFIX.sub("", name)
        fam = base if types.get(base) in ("histogram", "summary") else name
        if fam != current:
            if fam in seen:
                raise ValueError(f"line {n}: samples of {fam} are not together")
            if current is not None:
                seen.add(current)
            current = fam
        if fam not in types:
            raise ValueError(f"line {n}: {fam} has no TYPE before its samples")
        if types[fam] == "counter" and not name.endswith("_total"):
            raise ValueError(f"line {n}: counter {name} not named *_total")
        key = (name, names)
        if key in series:
            raise ValueError(f"line {n}: series twice: {line!r}")
        series.add(key)
        samples[(name, labels)] = float(m.group("value"))
        stamped |= m.end("value") != len(line)
    for fam in types:
        if fam not in helps:
            raise ValueError(f"{fam} has no HELP")
    return samples, stamped
