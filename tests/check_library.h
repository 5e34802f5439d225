// A CPU build of a CUDA algorithm (tests/CMakeLists.txt, schedx_cpu_check_library) as a
// registry Variant, so that the runtime's PipelineCall and binding functions run it.
#pragma once

#include "registry.h"

namespace test {

// A test library's name and entry points: SCHEDX_CHECK_LIBRARY(w8_lanes_v1_tail).
struct CheckLibrary {
    const char *name;
    int (*argv)(void **);
    const halide_filter_metadata_t *(*metadata)();
};
#define SCHEDX_CHECK_LIBRARY(n) test::CheckLibrary{#n, n##_argv, n##_metadata}

inline schedx::Variant check_library_variant(const CheckLibrary &lib, const char *op) {
    schedx::Variant v;
    v.name = lib.name;
    v.op = op;
    v.device = schedx::Device::cpu;
    v.argv = lib.argv;
    v.metadata = lib.metadata();
    return v;
}

}  // namespace test
