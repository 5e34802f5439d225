// A CPU build of a CUDA algorithm (tests/CMakeLists.txt, schedx_cpu_check_library) as a
// registry Variant, so that the runtime's PipelineCall and binding functions run it.
#pragma once

#include "registry.h"

namespace test {

inline schedx::Variant check_library_variant(const char *name, const char *op, int (*argv)(void **),
                                             const halide_filter_metadata_t *(*metadata)()) {
    schedx::Variant v;
    v.name = name;
    v.op = op;
    v.device = schedx::Device::cpu;
    v.argv = argv;
    v.metadata = metadata();
    return v;
}

}  // namespace test
