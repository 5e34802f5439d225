#!/usr/bin/env bash
# On the GPU machine (see ../shared/GPU.md): GPU tests, compute-sanitizer over the CUDA
# variants, the exploration of the operators (every variant timed against a device copy, or
# for abs_max a read-only kernel, in the same run) and the PyTorch comparison. Logs, tables, CSV/SVG and the tuning database go into one archive,
# $OUT/gpu_check.tar.gz (the device tool brings back at most 8 files), or ./gpu_out.
# The device copy of the tree has no .git: pass SCHEDX_COMMIT so the tables name it.
# Usage: tools/gpu_check.sh [tests] [sanitize] [explore] [hostcost] [torch] [ncu] [pyprofile] [kernels] [inductor] [decode_pass] [hf_generate]
#   [torchops] [hostops] [train] [decode] [ragged] [absmax] [w4] (issue 50: w4_linear explored, bench/w4_linear.py)  (the last three need torchao on PYTHONPATH for train;
#   DECODE_ARGS e.g. "--layers 4 --batches 1,2"; "--forms schedx,schedx-int4,torchao-int4": issue 50's int4 decode)
#   [cpu_w8] (issues 46, 50: w8_linear and w4_linear on the host's cores, schedx's tiles against torch's bf16 GEMM by M)
#   [w4mma] (issue 50: the tensor-core w4 kernels tested, under memcheck, timed against the lane kernels and torchao)
#   [mma] (issue 31: w8_linear M = 1..64, dirty L2; MMA_SHAPES, MMA_VARIANTS narrow it)
#   [divide] (issue 45: the CUDA divide variants, tested, under memcheck, timed)
#   [quantize] [quantize_explore] [quantize_compare]  (quantize_compare needs torchao on PYTHONPATH;
#   QUANTIZE_COMPARE_ARGS e.g. "--recipes block1x128" to fit one device call)
#   (default: the first five)
# COMPARE_FULL=1: compare_torch over every shape instead of --quick, no compile started after
# 330 s so that the step alone fits one 600 s device call. COMPARE_ARGS: more compare_torch
# options, e.g. "--only w8 --w8-nk 4096x4096" (one (N, K) per call reaches its compile columns).
# EXPLORE_ARGS: more schedx-explore options for the explore step, e.g. "--dirty-cache" (each
# call timed after dirtying L2, as do_bench does; dispatch ranks such records first).
# NCU_RUNS (ncu step): "op:variant:shape ..." profiled by Nsight Compute, every Halide kernel
# of one timed call (speed of light, occupancy, warp stalls, issue), e.g.
# "w8_linear:w8_linear_bf16_sbf16_b4_r2w16_coalesced:4x8192x8192".
set -uo pipefail
cd "$(dirname "$0")/.."
dest=${OUT:-gpu_out}
out=$(mktemp -d)
mkdir -p "$dest"
export PATH=/usr/local/cuda/bin:$PATH
# The PTX rewrite's CUDA test reads its stored modules from here, wherever the build was made.
export SCHEDX_PTX_SAMPLES=$PWD/tests/data/ptx
commit=${SCHEDX_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
steps=${*:-tests sanitize explore hostcost torch}
summary=()
for step in $steps; do
  start=$(date +%s)
  rc=0
  case $step in
    tests)  # every binary runs, each bounded (TEST_TIMEOUT s: a hang costs one binary, not the call)
      for t in schedx_cuda_tests schedx_cuda_abs_max_tests schedx_cuda_w8_tests schedx_cuda_concurrency_tests schedx_cuda_ptx_tests; do
        timeout "${TEST_TIMEOUT:-280}" build/tests/$t > "$out/$t.log" 2>&1 || rc=1
        tail -n 6 "$out/$t.log"
      done ;;
    sanitize)
      # SANITIZE_RUNS picks tool:binary pairs (default: both tools over both variant suites).
      for run in ${SANITIZE_RUNS:-memcheck:schedx_cuda_tests racecheck:schedx_cuda_tests \
                 memcheck:schedx_cuda_w8_tests racecheck:schedx_cuda_w8_tests \
                 memcheck:schedx_cuda_abs_max_tests racecheck:schedx_cuda_abs_max_tests}; do
        set -- ${run/:/ }
        # racecheck slows kernels by orders of magnitude: one shape set per variant (quick_run);
        # SCHEDX_TEST_QUICK=1 asks the same of memcheck.
        quick=$([ "$1" = racecheck ] && echo 1 || echo "${SCHEDX_TEST_QUICK:-}")
        # Each run is bounded (SANITIZE_TIMEOUT s) so that one slow tool leaves the others' logs.
        SCHEDX_TEST_QUICK=$quick timeout "${SANITIZE_TIMEOUT:-280}" \
          compute-sanitizer --tool "$1" --error-exitcode 9 build/tests/$2 \
          > "$out/sanitizer_$1_$2.log" 2>&1 || rc=1
        tail -n 3 "$out/sanitizer_$1_$2.log"
      done ;;
    explore)  # issue 4: eight shapes per operator, then dispatch checked against the best.
      # The read-only anchor first, at the sizes W takes (16, 56, 64 MiB) and at 1 GiB.
      build/bench/schedx-read-bandwidth 16,56,64,1024 > "$out/read_bandwidth.md" 2>&1 || rc=1
      # The int8 planes path's floor: cuBLAS's int8 GEMM alone, where it was built, with
      # every cuBLASLt algorithm its heuristic offers (whether the pinned one still wins).
      if [ -x build/bench/schedx-int8-gemm ]; then
        build/bench/schedx-int8-gemm --lt --nk 8192,8192 --rows 12,24,48,96 > "$out/int8_gemm.md" 2>&1 || rc=1
      fi
      # Cast shapes start at 2048^2: below that a call is bound by its ~6 us of host time.
      build/tools/schedx-explore --op cast_transpose --device cuda --db "$out/tuning.jsonl" ${EXPLORE_ARGS:-} \
        --shapes 2048x2048,4096x4096,8192x8192,4096x14336,16384x4096,14336x4096,8192x2048,2048x8192 \
        --csv "$out/explore_cast_transpose.csv" --svg "$out/explore_cast_transpose.svg" \
        > "$out/explore_cast_transpose.md" 2> "$out/explore_cast_transpose.err" || rc=1
      build/tools/schedx-explore --op w8_linear --device cuda --db "$out/tuning.jsonl" ${EXPLORE_ARGS:-} \
        --shapes 1x8192x8192,2x8192x8192,4x8192x8192,8x8192x8192,16x8192x8192,1024x8192x8192,4096x8192x8192,1x4096x4096 \
        --csv "$out/explore_w8_linear.csv" --svg "$out/explore_w8_linear.svg" \
        > "$out/explore_w8_linear.md" 2> "$out/explore_w8_linear.err" || rc=1
      build/tools/schedx-explore --op abs_max --device cuda --db "$out/tuning.jsonl" ${EXPLORE_ARGS:-} \
        --shapes 4096x4096,8192x8192,16384x4096,4096x14336,16384x14336 \
        --csv "$out/explore_abs_max.csv" > "$out/explore_abs_max.md" 2> "$out/explore_abs_max.err" || rc=1
      grep -h "dispatch chose" "$out"/explore_*.md ;;
    ragged)  # issue 29: the ragged shape sets, every variant timed, dispatch checked; memcheck of the shifted and element-I/O tiles
      for op in cast_transpose w8_linear; do
        timeout "${EXPLORE_TIMEOUT:-280}" build/tools/schedx-explore --op $op --device cuda --ragged --db "$out/ragged_tuning.jsonl" ${EXPLORE_ARGS:-} \
          ${RAGGED_VARIANTS:+--variants "$RAGGED_VARIANTS"} --csv "$out/ragged_$op.csv" > "$out/ragged_$op.md" 2> "$out/ragged_$op.err" || rc=1
      done
      grep -h "dispatch chose" "$out"/ragged_*.md
      SCHEDX_TEST_QUICK=1 timeout "${SANITIZE_TIMEOUT:-280}" compute-sanitizer --tool memcheck --error-exitcode 9 \
        build/tests/schedx_cuda_tests --test-case='ragged*,empty*,variants with 128*,dispatch picks*' > "$out/sanitizer_ragged.log" 2>&1 || rc=1
      tail -n 3 "$out/sanitizer_ragged.log"
      # w8_linear's k_tail kernels on K off the steps, under memcheck
      timeout "${SANITIZE_TIMEOUT:-280}" compute-sanitizer --tool memcheck --error-exitcode 9 \
        build/tests/schedx_cuda_w8_tests --test-case='empty*,dispatch: K off the steps*' > "$out/w8_empty_ragged.log" 2>&1 || rc=1
      tail -n 3 "$out/w8_empty_ragged.log" ;;
    w4mma)  # issue 50: the tensor-core w4 kernels (cuda_mma) and cuda_general's new code, never run on a GPU
      # when built: forced against fp64 (one stream pass), under memcheck, timed after a dirty L2 beside the
      # lane kernels and dequantize + cuBLAS (explore), then bench/w4_linear.py with that tuning database
      # (dispatch takes the fastest timed) against torchao's int4 and gpt-fast's.
      SCHEDX_TEST_QUICK=1 SCHEDX_TEST_VARIANTS="mma|general" timeout "${TEST_TIMEOUT:-280}" build/tests/schedx_cuda_w4_tests \
        > "$out/w4mma_tests.log" 2>&1 || rc=1
      tail -n 3 "$out/w4mma_tests.log"
      SCHEDX_TEST_QUICK=1 SCHEDX_TEST_VARIANTS=mma timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
        build/tests/schedx_cuda_w4_tests -tc="every CUDA*" > "$out/w4mma_sanitizer_memcheck.log" 2>&1 || rc=1
      tail -n 3 "$out/w4mma_sanitizer_memcheck.log"
      timeout 200 build/tools/schedx-explore --op w4_linear --device cuda --dirty-cache --db "$out/tuning.jsonl" \
        --variants mma,b4_r4,b8_r4,gemv_r4,dequant --configs bf16 \
        --shapes 4x8192x8192,8x8192x8192,16x8192x8192,16x14336x4096,32x8192x8192,64x8192x8192 \
        --csv "$out/explore_w4mma.csv" > "$out/explore_w4mma.md" 2> "$out/explore_w4mma.err" || rc=1
      grep -h -A4 "^| rank\|dispatch chose" "$out/explore_w4mma.md"
      (SCHEDX_TUNING_DB=$out/tuning.jsonl SCHEDX_LIBRARY=$PWD/build/runtime/libschedx.so timeout "${BENCH_TIMEOUT:-200}" \
         python3 bench/w4_linear.py 4x8192x8192 8x8192x8192 16x8192x8192 32x8192x8192 > "$out/w4mma_bench.log" 2>&1) || rc=1
      tail -n 12 "$out/w4mma_bench.log" ;;
    divide)  # issue 45's scale by divide (x / s, IEEE fp32): the CUDA divide variants forced, bit for bit on
      # every bf16 and fp16 pattern with divisors where x * (1 / s) gives other codes, under memcheck,
      # then timed beside the multiply cast in one explore run (dispatch checked for each).
      SCHEDX_TEST_VARIANTS=_divide timeout 200 build/tests/schedx_cuda_tests -tc="every CUDA*" \
        > "$out/divide_tests.log" 2>&1 || rc=1
      tail -n 3 "$out/divide_tests.log"
      SCHEDX_TEST_QUICK=1 SCHEDX_TEST_VARIANTS=_divide timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 \
        build/tests/schedx_cuda_tests -tc="every CUDA*" > "$out/divide_sanitizer_memcheck.log" 2>&1 || rc=1
      tail -n 3 "$out/divide_sanitizer_memcheck.log"
      timeout 150 build/tools/schedx-explore --op cast_transpose --device cuda --configs bf16,bf16/divide \
        --shapes 4096x4096,8192x8192,4097x4096 --db "$out/tuning.jsonl" --csv "$out/explore_divide.csv" \
        > "$out/explore_divide.md" 2> "$out/explore_divide.err" || rc=1
      grep -h "dispatch chose" "$out/explore_divide.md" ;;
    hostcost)  # issue 5: host time of one C ABI call, and where it goes
      build/bench/schedx-host-cost > "$out/host_cost.md" 2>&1 || rc=1
      cat "$out/host_cost.md"
      build/bench/schedx-host-cost 20000 --profile > "$out/host_cost_profile.txt" 2>&1 || rc=1 ;;
    torch)
      (cd bench && SCHEDX_LIBRARY=$PWD/../build/runtime/libschedx.so PYTHONUNBUFFERED=1 \
         python3 compare_torch.py $([ -n "${COMPARE_FULL:-}" ] && echo --budget 330 || echo --quick) ${COMPARE_ARGS:-} \
         --commit "$commit" --out "$out/compare_torch.md" \
         > "$out/compare_torch.log" 2>&1) || rc=1
      tail -n 5 "$out/compare_torch.log" ;;
    ncu)  # explore checks a variant (2 calls) and warms it up (3) before the timed calls
      for run in ${NCU_RUNS:-}; do
        IFS=: read -r op variant shape <<< "$run"
        timeout "${NCU_TIMEOUT:-90}" ncu --kernel-name regex:_kernel_ --launch-skip 5 --launch-count "${NCU_KERNELS:-1}" \
          --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
          --section SchedulerStats --section MemoryWorkloadAnalysis \
          build/tools/schedx-explore --op "$op" --device cuda --db "$out/ncu_tuning.jsonl" \
          --variants "$variant" --shapes "$shape" --repeats 3 \
          > "$out/ncu_${variant}_$shape.txt" 2>&1 || rc=1
        grep -E "Duration|DRAM Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Stall" \
          "$out/ncu_${variant}_$shape.txt" | head -n 12
      done ;;
    quantize)  # issue 32: quantize_fp8's CUDA tests (every variant bit for bit) and their memcheck
      timeout "${SANITIZE_TIMEOUT:-280}" build/tests/schedx_cuda_quantize_tests > "$out/schedx_cuda_quantize_tests.log" 2>&1 || rc=1
      tail -n 6 "$out/schedx_cuda_quantize_tests.log"
      SCHEDX_TEST_QUICK=1 timeout "${SANITIZE_TIMEOUT:-280}" compute-sanitizer --tool memcheck --error-exitcode 9 \
        build/tests/schedx_cuda_quantize_tests > "$out/sanitizer_memcheck_schedx_cuda_quantize_tests.log" 2>&1 || rc=1
      tail -n 3 "$out/sanitizer_memcheck_schedx_cuda_quantize_tests.log" ;;
    quantize_explore)  # issue 32: every recipe at the issue's shapes, each shape against a copy
      # of its own bytes timed in the same run (--copy-per-shape).
      timeout "${EXPLORE_TIMEOUT:-400}" build/tools/schedx-explore --op quantize_fp8 --device cuda --copy-per-shape --db "$out/tuning.jsonl" ${EXPLORE_ARGS:-} \
        --shapes ${QUANTIZE_SHAPES:-8192x8192,4096x14336,16384x4096} \
        --csv "$out/explore_quantize_fp8.csv" --svg "$out/explore_quantize_fp8.svg" \
        > "$out/explore_quantize_fp8.md" 2> "$out/explore_quantize_fp8.err" || rc=1
      grep -E "^## |^\| +1 \||dispatch chose" "$out/explore_quantize_fp8.md" ;;
    quantize_compare)  # issue 32: bit-exact against torchao and TE's reference; timed against a copy of the
      # same bytes, torch.compile, torchao's Triton kernels and the tensorwise cast, alternated
      (cd bench && SCHEDX_LIBRARY=$PWD/../build/runtime/libschedx.so PYTHONUNBUFFERED=1 \
         timeout "${BENCH_TIMEOUT:-560}" python3 quantize_compare.py --commit "$commit" \
         --out "$out/quantize_compare.md" ${QUANTIZE_COMPARE_ARGS:-} > "$out/quantize_compare.log" 2>&1) || rc=1
      grep -E "^\| [0-9]+x[0-9]+ \||rows with a difference" "$out/quantize_compare.md" 2>/dev/null \
        || tail -n 5 "$out/quantize_compare.log" ;;
    kernels)  # large-M w8_linear split into kernels after do_bench's L2 flush, with do_bench's own time
      SCHEDX_LIBRARY=$PWD/build/runtime/libschedx.so python3 bench/torch_kernels.py --flush \
        ${KERNELS_SHAPES:-4096x14336x4096 1024x14336x4096} > "$out/torch_kernels_flush.md" 2>&1 || rc=1
      grep -E "sum per call|fill end|do_bench" "$out/torch_kernels_flush.md" ;;
    ptx)  # issue 31: kernels with PTX the runtime rewrites: tests, memcheck, no CALL in the SASS,
      # then the hardware-encoder casts and the evict-first GEMVs timed beside their integer /
      # L2-window twins (back to back and after a dirty L2, as do_bench times).
      build/tests/schedx_cuda_ptx_tests > "$out/ptx_tests.log" 2>&1 || rc=1
      tail -n 3 "$out/ptx_tests.log"
      SCHEDX_TEST_QUICK=1 timeout "${SANITIZE_TIMEOUT:-280}" compute-sanitizer --tool memcheck --error-exitcode 9 \
        build/tests/schedx_cuda_ptx_tests > "$out/sanitizer_memcheck_schedx_cuda_ptx_tests.log" 2>&1 || rc=1
      tail -n 3 "$out/sanitizer_memcheck_schedx_cuda_ptx_tests.log"
      tools/ptx_rewrite_check.sh build > "$out/ptx_rewrite_check.md" 2>&1 || rc=1
      cat "$out/ptx_rewrite_check.md"
      for mode in back_to_back dirty_cache; do
        flag=$([ $mode = dirty_cache ] && echo --dirty-cache)
        build/tools/schedx-explore --op cast_transpose --device cuda --db "$out/ptx_tuning.jsonl" $flag \
          --shapes 8192x8192,4096x14336,16384x4096 --variants bf16_e4m3_t64r8w4,bf16_e4m3_t64r4w8,bf16_e4m3_t128x64r8w4,bf16_e4m3_t128r16w4 \
          > "$out/ptx_explore_cast_$mode.md" 2>&1 || rc=1
        build/tools/schedx-explore --op w8_linear --device cuda --db "$out/ptx_tuning.jsonl" $flag \
          --shapes 1x8192x8192,1x14336x4096,1x4096x14336,4x8192x8192 \
          --variants gemv_r2w16_coalesced,gemv_r2w8_coalesced,gemv_r4w16_coalesced,splitk4_r2w4,b4_r4w4_coalesced \
          > "$out/ptx_explore_w8_$mode.md" 2>&1 || rc=1
      done
      grep -h "dispatch chose" "$out"/ptx_explore_*.md ;;
    mma)  # issue 31: w8_linear at M = 1..64 under do_bench's conditions (dirty L2), every variant:
      # the cuda_mma kernels against the lane kernels and the cuBLAS paths at each M
      timeout "${MMA_TIMEOUT:-280}" build/tools/schedx-explore --op w8_linear --device cuda --dirty-cache --configs bf16 --db "$out/mma_tuning.jsonl" ${MMA_VARIANTS:+--variants "$MMA_VARIANTS"} \
        --shapes ${MMA_SHAPES:-1x8192x8192,2x8192x8192,4x8192x8192,8x8192x8192,16x8192x8192,32x8192x8192,64x8192x8192,1x14336x4096,16x14336x4096,32x14336x4096,64x14336x4096,1x4096x14336,16x4096x14336,32x4096x14336,64x4096x14336} \
        --csv "$out/mma_w8.csv" > "$out/mma_w8.md" 2> "$out/mma_w8.err" || rc=1
      grep -E "^## |^\| +1 \||_mma_" "$out/mma_w8.md" | head -n 90 ;;
    pyprofile)  # issue 5: where the Python API's host time goes
      SCHEDX_LIBRARY=$PWD/build/runtime/libschedx.so python3 bench/python_host_profile.py \
        > "$out/python_host_profile.md" 2>&1 || rc=1
      grep -A4 "^| function" "$out/python_host_profile.md" ;;
    torchops)  # torch.ops.schedx and schedx.nn on CUDA and CPU tensors: opcheck, compile, CUDA graphs
      # (w8_linear's C++ kernels: carry build/runtime/libschedx_torch.so)
      SCHEDX_LIBRARY=$PWD/build/runtime/libschedx.so PYTHONPATH="python:${PYTHONPATH:-}" SCHEDX_TORCH_KERNELS=c++ \
        timeout "${TORCHOPS_TIMEOUT:-240}" python3 tests/test_torch_ops.py -v > "$out/torch_ops_tests.log" 2>&1 || rc=1
      tail -n 4 "$out/torch_ops_tests.log" ;;
    inductor|decode_pass|hf_generate)  # issue 45: schedx.inductor on unchanged programs (torchao on
      # PYTHONPATH; each step fits one device call). inductor: its tests on CUDA tensors, issue 130015's
      # pattern and gpt-fast's int8 module with and without the pass, torchao's Float8Linear step;
      # decode_pass: the decoder with gpt-fast's and torchao's formulations; hf_generate: transformers' generate()
      export SCHEDX_LIBRARY=$PWD/build/runtime/libschedx.so SCHEDX_TORCH_KERNELS=c++ PYTHONUNBUFFERED=1
      case $step in
        inductor)
          PYTHONPATH="python:${PYTHONPATH:-}" timeout 150 python3 tests/test_inductor_pass.py > "$out/inductor_tests.log" 2>&1 || rc=1
          tail -n 3 "$out/inductor_tests.log"
          (cd bench && timeout 200 python3 inductor_pass.py --commit "$commit" --out "$out/inductor_pass.md" \
             > "$out/inductor_pass.log" 2>&1 && timeout 150 python3 float8_train_step.py --commit "$commit" \
             --variants "bf16 (eager),torchao (compile),torchao+pass (compile)" --out "$out/float8_pass.md" \
             > "$out/float8_pass.log" 2>&1) || rc=1 ;;
        decode_pass)
          (cd bench && timeout 540 python3 llama_decode.py --commit "$commit" --layers 2 --batches 1,2,4,8 --steps 30 \
             --forms schedx,gpt-fast+pass,torchao,torchao+pass --out "$out/decode_pass.md" > "$out/decode_pass.log" 2>&1) || rc=1 ;;
        hf_generate)
          (cd bench && timeout 540 python3 hf_generate.py --commit "$commit" --layers "${HF_LAYERS:-8}" --batches 1,4,8 \
             --out "$out/hf_generate.md" > "$out/hf_generate.log" 2>&1) || rc=1 ;;
      esac
      grep -hE "^\| [0-9]" "$out"/*.md 2>/dev/null | head -n 60 ;;
    hostops|train|decode)  # issue 28: host time per op call; float8 training step; int8 decode
      script=$(case $step in hostops) echo op_host_cost.py;; train) echo float8_train_step.py;;
                             decode) echo llama_decode.py;; esac)
      (cd bench && SCHEDX_LIBRARY=$PWD/../build/runtime/libschedx.so PYTHONUNBUFFERED=1 \
         timeout "${BENCH_TIMEOUT:-400}" python3 "$script" --commit "$commit" --out "$out/$step.md" \
         ${DECODE_ARGS:+$([ "$step" = decode ] && echo "$DECODE_ARGS")} > "$out/$step.log" 2>&1) || rc=1
      tail -n 14 "$out/$step.md" 2>/dev/null || tail -n 5 "$out/$step.log" ;;
    absmax)  # abs_max alone: its CUDA tests, then every variant against the read-only anchor
      build/tests/schedx_cuda_abs_max_tests > "$out/schedx_cuda_abs_max_tests.log" 2>&1 || rc=1
      tail -n 4 "$out/schedx_cuda_abs_max_tests.log"
      build/tools/schedx-explore --op abs_max --device cuda --db "$out/tuning.jsonl" ${EXPLORE_ARGS:-} \
        --shapes 8192x8192,16384x4096,16384x14336 --csv "$out/explore_abs_max.csv" \
        > "$out/explore_abs_max.md" 2> "$out/explore_abs_max.err" || rc=1
      grep -h -A3 "^| rank\|dispatch chose" "$out/explore_abs_max.md" ;;
    w4)  # issue 50: w4_linear's CUDA tests (every variant forced against fp64, dispatch by M), its variants
         # timed after a dirty L2 against a read-only kernel over the same bytes (explore), then
         # bench/w4_linear.py: torchao's int4, gpt-fast's, bf16 cuBLAS
      timeout "${TEST_TIMEOUT:-280}" build/tests/schedx_cuda_w4_tests > "$out/schedx_cuda_w4_tests.log" 2>&1 || rc=1
      tail -n 4 "$out/schedx_cuda_w4_tests.log"
      build/tools/schedx-explore --op w4_linear --device cuda --dirty-cache --db "$out/tuning.jsonl" ${EXPLORE_ARGS:-} \
        --shapes 1x8192x8192,1x6144x4096,1x4096x4096,1x28672x4096,1x4096x14336,2x8192x8192,4x8192x8192,8x8192x8192,16x8192x8192,64x8192x8192,1024x8192x8192 \
        --csv "$out/explore_w4_linear.csv" > "$out/explore_w4_linear.md" 2> "$out/explore_w4_linear.err" || rc=1
      grep -h -A4 "^| rank\|dispatch chose" "$out/explore_w4_linear.md"
      (SCHEDX_LIBRARY=$PWD/build/runtime/libschedx.so timeout "${BENCH_TIMEOUT:-400}" python3 bench/w4_linear.py \
         > "$out/w4_bench.log" 2>&1) || rc=1
      tail -n 16 "$out/w4_bench.log" ;;
    cpu_w8)  # issues 46 and 50 on the host's cores: w8_linear's and w4_linear's CPU rows, and where torch's
             # bf16 GEMM (AMX or AVX512-BF16) overtakes schedx's tiles (--large-m: both paths beside dequantize + mm)
      (SCHEDX_LIBRARY=$PWD/build/runtime/libschedx.so timeout "${CPU_TIMEOUT:-560}" python3 bench/cpu_compare.py \
         --ops w8 w4 --threads 1 16 --large-m 8 12 16 32 64 256 --note "GPU host's cores, GPU idle" \
         > "$out/cpu_w8.log" 2>&1) || rc=1
      sed -n 's/^wrote //p' "$out/cpu_w8.log" | xargs -r cp -t "$out/"  # the record this run wrote
      grep -E "^\| M=" "$out/cpu_w8.log" | head -n 40 ;;
    *) echo "unknown step $step"; rc=2 ;;
  esac
  summary+=("$step: rc=$rc $(( $(date +%s) - start ))s")
  # The archive is rewritten after every step: a call stopped by the device's bound keeps
  # the steps that finished (an outer timeout once lost a whole w4 step's logs).
  printf '%s\n' "${summary[@]}" > "$out/summary.txt"
  tar -czf "$dest/gpu_check.tar.gz" -C "$out" .
done
cat "$out/summary.txt"
