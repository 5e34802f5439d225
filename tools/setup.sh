#!/usr/bin/env bash
# Usage: tools/setup.sh [--tests] [--bench]
# Installs what is missing (Debian packages, the pinned Python tools in .venv), then
# configures and builds schedx into build/: libschedx and schedx-explore, and with
#   --tests  the tests and the README's examples, torch (requirements-torch.txt) for the
#            PyTorch tests, and in build-fuzz/ (clang) the libFuzzer targets that build/'s
#            ctest runs;
#   --bench  the C++ and CUDA benchmarks (bench/).
# Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
tests=OFF bench=OFF
for arg in "$@"; do
  case "$arg" in
    --tests) tests=ON ;;
    --bench) bench=ON ;;
    *) echo "usage: tools/setup.sh [--tests] [--bench]" >&2; exit 2 ;;
  esac
done

# python3-dev: torch.compile's CPU backend (the torch tests) compiles against Python.h.
need_apt=()
for pkg in ca-certificates g++ make git python3 python3-venv python3-dev doctest-dev nlohmann-json3-dev libcli11-dev clang libclang-rt-14-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
# The tests of the PyTorch side need torch (about 2 minutes and 4.7 GB, mostly download):
# installed beside the build, which is CPU-bound.
if [ "$tests" = ON ]; then
  .venv/bin/pip install -q --disable-pip-version-check -r requirements-torch.txt &
  torch_install=$!
fi

halide_dir=$(.venv/bin/python -c 'import halide; print(halide.install_dir())')
configure_and_build() {
  .venv/bin/cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_MAKE_PROGRAM="$PWD/.venv/bin/ninja" \
    -DHalide_DIR="$halide_dir/lib64/cmake/Halide" -DPython3_EXECUTABLE="$PWD/.venv/bin/python" \
    -DSCHEDX_TESTS=$tests -DSCHEDX_BENCH=$bench
  .venv/bin/cmake --build build -j"$(nproc)"
}
configure_and_build
# With torch now installed, configuring again adds torch.ops.schedx's C++ kernels
# (python/CMakeLists.txt); nothing else is rebuilt.
if [ -n "${torch_install:-}" ]; then
  wait "$torch_install"
  configure_and_build
fi

# The libFuzzer targets, which build/'s ctest runs (label "fuzz"): clang (libFuzzer comes
# with Debian's libclang-rt-14-dev) compiles libschedx's own sources instrumented and links
# them with the pipelines build/ generated, so no Halide variant is generated twice.
[ "$tests" = ON ] || exit 0
.venv/bin/cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCHEDX_FUZZ=ON \
  -DSCHEDX_MAIN_BUILD_DIR="$PWD/build" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_MAKE_PROGRAM="$PWD/.venv/bin/ninja" \
  -DHalide_DIR="$halide_dir/lib64/cmake/Halide" -DPython3_EXECUTABLE="$PWD/.venv/bin/python"
.venv/bin/cmake --build build-fuzz -j"$(nproc)" --target fuzz_abi fuzz_tuning_db
