#!/usr/bin/env python3
"""hashlb check -c on a fixed sample of config_probe.py's malformed configs (every YAML
feature, file, key and name case, deep nesting and alias bombs, 120 of the wrong types
and ranges): each refused with one FILE:LINE:COL: error line at the node that is wrong,
saying what the key takes, in bounded memory, no sanitizer report; valid ones accepted.
Then 30 of the refusals as reloads of a running hashlb (SIGHUP and ctl reload in turn):
the same error logged, the old config serving. The full run, with its figures:
python3 tests/integration/config_probe.py --hashlb build/src/cli/hashlb"""
import sys

import config_probe

sys.exit(config_probe.main(["--ci"]))
