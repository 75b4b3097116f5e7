"""The Prometheus text exposition format (0.0.4), read strictly: the integration tests'
/metrics checks and the kernel steering tests' (tests/steer), which import this module alone
(lbtest's import sets signal handlers and an exit hook of its own)."""
import re

PROM_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
PROM_LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"'
PROM_VALUE = r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|Inf)|NaN"
PROM_SAMPLE = re.compile(rf"({PROM_NAME})(\{{(?:{PROM_LABEL}(?:,{PROM_LABEL})*,?)?\}})? "
                         rf"(?P<value>{PROM_VALUE})(?: -?\d+)?")


def parse_prometheus(text):
    """{(name, labels): value} of a text exposition (0.0.4); raises ValueError, naming the
    line, on anything the format does not allow: HELP and TYPE once per family and before
    its samples, a family's samples together, valid names and label names, label values
    escaped, no series twice, values that parse, counters named *_total."""
    if text and not text.endswith("\n"):
        raise ValueError("no final newline")
    types, helps, samples, series, seen, current = {}, {}, {}, set(), set(), None
    for n, line in enumerate(text.split("\n")[:-1], 1):
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
        names = re.findall(rf"(?:^|[{{,]){PROM_LABEL}", labels)
        if len({k for k, _ in names}) != len(names):
            raise ValueError(f"line {n}: a label twice: {line!r}")
        base = re.sub(r"_(bucket|sum|count)$", "", name)
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
        key = (name, tuple(sorted(names)))
        if key in series:
            raise ValueError(f"line {n}: series twice: {line!r}")
        series.add(key)
        samples[(name, labels)] = float(m.group("value"))
    for fam in types:
        if fam not in helps:
            raise ValueError(f"{fam} has no HELP")
    return samples
