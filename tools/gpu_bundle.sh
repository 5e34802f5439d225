#!/usr/bin/env bash
# Gathers what tools/gpu_check.sh needs from this machine's build (tools/setup.sh --tests
# --bench) into gpu_bundle/, one folder to carry to the GPU machine (the device tool takes at
# most 8 paths and 64 MiB), where `cp -a gpu_bundle/. .` puts it back in place before
# tools/gpu_check.sh runs. Binaries find libschedx.so through $ORIGIN/../runtime.
# Usage: tools/gpu_bundle.sh [--with-host-cost] [--source]
#   --with-host-cost  schedx-host-cost too (it links the static library: 18 MB)
#   --source          the tree's committed files at HEAD too, so that the bundle runs on its own
#                     (`cd gpu_bundle && tools/gpu_check.sh ...`): a branch built in another
#                     worktree, copied under an ignored path of the tree the device tool sends
set -euo pipefail
cd "$(dirname "$0")/.."
files=(build/runtime/libschedx.so build/runtime/libschedx_torch.so build/tests/schedx_cuda_*
       build/tools/schedx-explore build/tools/schedx-ptx-rewrite build/bench/schedx-read-bandwidth
       build/bench/schedx-int8-gemm build/bench/schedx-cast-anchor)
source_too=false
for arg in "$@"; do
  case "$arg" in
    --with-host-cost) files+=(build/bench/schedx-host-cost) ;;
    --source) source_too=true ;;
    *) echo "usage: tools/gpu_bundle.sh [--with-host-cost] [--source]" >&2; exit 2 ;;
  esac
done
rm -rf gpu_bundle
mkdir -p gpu_bundle
if $source_too; then
  git archive HEAD | tar -x -C gpu_bundle
  echo "source: $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (the working tree has uncommitted changes, not in the bundle)')"
fi
for f in "${files[@]}"; do
  if [ -e "$f" ]; then install -D "$f" "gpu_bundle/$f"; else echo "not built: $f" >&2; fi
done
[ ! -d .whl ] || cp -a .whl gpu_bundle/  # wheels for the GPU machine, which has no registry (torchao)
bytes=$(du -sb gpu_bundle | cut -f1)
echo "gpu_bundle: $((bytes / 1048576)) MiB"
[ "$bytes" -le $((64 * 1048576)) ] || { echo "over the 64 MiB carry limit" >&2; exit 1; }
