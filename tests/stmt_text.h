// The lowered statement add_halide_library wrote for the pipeline a variant calls (its
// kernels_of owner's, where it has one), with the CUDA kernels' PTX; "" if missing. For the
// tests that check generated code without a GPU (SCHEDX_STMT_DIR: the build's runtime/).
#pragma once

#include <fstream>
#include <iterator>
#include <string>

#include "registry.h"

namespace test {

inline std::string stmt_text(const schedx::Variant &v) {
    std::ifstream file(std::string(SCHEDX_STMT_DIR) + "/" + v.metadata->name + ".stmt", std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

}  // namespace test
