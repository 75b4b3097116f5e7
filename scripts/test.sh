#!/usr/bin/env bash
# Set up (packages, build) and run every test of the default suite.
# Run as root: kernel steering and namespace tests need it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${HASHLB_BUILD:-build}
exec meson test -C "$build" --print-errorlogs --num-processes 2 "$@"
