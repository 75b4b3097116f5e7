#!/usr/bin/env bash
# Set up (packages, build) and run hashlb's main job on a built-in default.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
build=${HASHLB_BUILD:-build}
exec "$build/bench/hashlb-bench" schemes --quick "$@"
