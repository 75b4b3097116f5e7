#!/usr/bin/env bash
# One bounded, deterministic fuzz run for meson's suite 'fuzz':
#   run.sh TARGET CORPUS DICT RUNS
# from the checked-in corpus, seed 1, RUNS inputs (at most 20 s, or
# $HASHLB_FUZZ_MAX_SECS: CI's run at the lowest CPU priority), new inputs
# and crash reproducers in a temporary folder that is removed after. A crash
# prints the reproducer in hex, so the CI log alone is enough to replay it.
set -uo pipefail
target=$1 corpus=$2 dict=$3 runs=$4

tmp=$(mktemp -d /tmp/hashlb-fuzz.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/new"
# libFuzzer's own exit code for a finding is 77, which meson reads as a skip.
args=(-seed=1 -runs="$runs" -max_total_time="${HASHLB_FUZZ_MAX_SECS:-20}" -timeout=10
	-rss_limit_mb=2048 -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1
	-artifact_prefix="$tmp/")
[ -f "$dict" ] && args+=(-dict="$dict")
"$target" "${args[@]}" "$tmp/new" "$corpus"
rc=$?
for f in "$tmp"/crash-* "$tmp"/leak-* "$tmp"/timeout-* "$tmp"/oom-*; do
	[ -e "$f" ] || continue
	echo "fuzz: reproducer $(basename "$f") (save it in $corpus to keep it):"
	od -An -tx1 -v "$f"
done
exit $rc
