#!/usr/bin/env bash
# On the GPU machine (see ../shared/GPU.md): GPU tests, compute-sanitizer over the CUDA
# variants, the C++ benchmark and the PyTorch comparison; logs go to $OUT (or ./gpu_out).
# Usage: tools/gpu_check.sh [tests] [sanitize] [bench] [torch]   (default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu_out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
steps=${*:-tests sanitize bench torch}
summary=()
for step in $steps; do
  start=$(date +%s)
  case $step in
    # Both binaries run; the step fails if either does.
    tests)
      build/tests/schedx_cuda_tests > "$out/cuda_tests.log" 2>&1; rc=$?; tail -n 15 "$out/cuda_tests.log"
      build/tests/schedx_cuda_w8_tests > "$out/cuda_w8_tests.log" 2>&1; rc2=$?; tail -n 15 "$out/cuda_w8_tests.log"; (exit $((rc | rc2))) ;;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --error-exitcode 9 build/tests/schedx_cuda_tests \
          2>&1 | tail -n 20 | tee "$out/sanitizer_$tool.log"
      done; rc=$?
      # w8_linear: memcheck only, to keep the step short (split-K's shared-memory partials
      # are therefore not race-checked).
      compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/schedx_cuda_w8_tests \
        2>&1 | tail -n 20 | tee "$out/sanitizer_memcheck_w8.log" && (exit $rc) ;;
    bench) build/bench/bench_cuda_cast_transpose "${BENCH_ARGS:-}" 2>&1 | tee "$out/bench_cast_transpose.md" ;;
    torch) SCHEDX_LIBRARY=$PWD/build/runtime/libschedx.so PYTHONUNBUFFERED=1 \
             python3 bench/compare_torch.py --quick 2>&1 | tee "$out/compare_torch.log" ;;
  esac
  summary+=("$step: rc=$? $(( $(date +%s) - start ))s")
done
printf '%s\n' "${summary[@]}"
