#!/usr/bin/env bash
# Usage: tools/fuzz/run.sh FUZZ_BUILD_DIR TARGET SECONDS
# Replays TARGET's regression inputs (tests/fuzz_regressions/TARGET/), then fuzzes it for
# SECONDS (0: replay only) from its seed corpus (tools/fuzz/corpus/TARGET/). Fails on any crash, leaving
# the input in FUZZ_BUILD_DIR/fuzz-artifacts/TARGET/. Exits 77 (ctest: skipped) when the
# fuzz build is missing (`tools/setup.sh --tests` makes it with clang).
set -euo pipefail
build=$1 target=$2 seconds=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$build/tools/fuzz/$target
if [ ! -x "$bin" ]; then
  echo "SKIPPED: $bin is not built"
  exit 77
fi

regressions=$root/tests/fuzz_regressions/$target
if compgen -G "$regressions/*" >/dev/null; then
  "$bin" "$regressions"/*
fi
# libFuzzer reads -max_total_time=0 as "no limit".
[ "$seconds" -gt 0 ] || exit 0

corpus=()
[ -d "$root/tools/fuzz/corpus/$target" ] && corpus=("$root/tools/fuzz/corpus/$target")
quiet=()
# The database reader warns once per damaged file, i.e. on nearly every input; libFuzzer
# and sanitizer reports still reach the terminal.
[ "$target" = fuzz_tuning_db ] && quiet=(-close_fd_mask=2)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
artifacts=$build/fuzz-artifacts/$target
mkdir -p "$artifacts"
if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
     -artifact_prefix="$artifacts/" "${quiet[@]}" "$work" "${corpus[@]}"; then
  echo "$target crashed: the input is in $artifacts/; once fixed, add it to tests/fuzz_regressions/$target/"
  exit 1
fi
