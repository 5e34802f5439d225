#!/usr/bin/env bash
# The kernels of every variant that calls schedx_ptx_* functions, as the driver gets them:
# rewritten (build/tools/schedx-ptx-rewrite; no `call` may remain in the PTX), compiled by
# ptxas for sm_90, and their SASS counted: CALL (ptxas's own subroutines only: the fused
# amax's 1 / scale takes the float division's slow path by one CALL, as in the integer
# variants), F2FP (the fp8 pair conversions), LDG.E.NA (loads the evict-first rewrite marked),
# HMMA (the tensor-core mma), LDL/STL (local memory: fragments that left registers).
# Needs ptxas and cuobjdump (cuobjdump: the GPU machine's, or the copy in .venv's triton wheel).
# Usage: tools/ptx_rewrite_check.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
printf '| variant | rewritten calls | call in PTX | SASS CALL | F2FP | HMMA | LDL/STL | LDG.E.NA / LDG | registers |\n|---|---|---|---|---|---|---|---|---|\n'
for stmt in "$build"/runtime/*.stmt; do
  grep -aq "schedx_ptx_" "$stmt" || continue
  name=$(basename "$stmt" .stmt)
  if ! "$build/tools/schedx-ptx-rewrite" "$stmt" 90 > "$tmp/k.ptx" 2> "$tmp/err"; then
    echo "| $name | FAILED: $(cat "$tmp/err") | | | | | | | |"; status=1; continue
  fi
  calls=$(grep -o "[0-9]* calls" "$tmp/err" | cut -d' ' -f1)
  regs=$(ptxas -arch=sm_90 -v "$tmp/k.ptx" -o "$tmp/k.cubin" 2>&1 | grep -o "Used [0-9]* registers" | cut -d' ' -f2 | sort -n | tail -1)
  cuobjdump -sass "$tmp/k.cubin" > "$tmp/k.sass"
  ptxcall=$(grep -cE "^\s*call" "$tmp/k.ptx" || true)
  ncall=$(grep -cE "\bCALL" "$tmp/k.sass" || true)
  nf2fp=$(grep -c "F2FP" "$tmp/k.sass" || true)
  nhmma=$(grep -c "HMMA" "$tmp/k.sass" || true)
  nlocal=$(grep -cE "\b(LDL|STL)\b" "$tmp/k.sass" || true)
  nldg=$(grep -c "LDG" "$tmp/k.sass" || true)
  nna=$(grep -c "LDG\.E\.NA" "$tmp/k.sass" || true)
  [ "$ptxcall" = 0 ] || status=1
  echo "| $name | $calls | $ptxcall | $ncall | $nf2fp | $nhmma | $nlocal | $nna / $nldg | $regs |"
done
exit $status
