// abs_max's CUDA algorithm on the CPU: the generator's cuda (16-byte words) and cuda_general
// (elements) algorithms with default_schedule=true, built as test libraries
// (tests/CMakeLists.txt): each block's grid of threads, the clamps at the matrix edges, the
// two halves of a bf16/fp16 word, the warps' maxima (REDUX, emulated by the generator) and the
// blocks' atomic max into amax (a C stand-in here), against the reference on ragged shapes.
#include <doctest/doctest.h>

#include "abs_max_blocks_bf16_words.h"
#include "abs_max_blocks_fp16_elements.h"
#include "abs_max_blocks_fp32_words.h"
#include "abs_max.h"
#include "abs_max_case.h"
#include "check_library.h"
#include "pipeline_call.h"
#include "test_util.h"

// The blocks' RED: atom.max.s32 on the float bits of |x| (the NVVM intrinsic compares signed).
extern "C" uint32_t schedx_test_atomic_max_u32(uint64_t address, uint32_t value) {
    uint32_t *word = reinterpret_cast<uint32_t *>(address);
    const uint32_t old = *word;
    if (int32_t(value) > int32_t(old)) *word = value;
    return old;
}

namespace {

struct BlocksLibrary {
    test::CheckLibrary library;
    schedx_dtype type;
    bool words;
    int64_t load_words;
};

// threads 64 x 4, 8 rows per thread (tests/CMakeLists.txt).
const BlocksLibrary kLibraries[] = {
    {SCHEDX_CHECK_LIBRARY(abs_max_blocks_bf16_words), SCHEDX_BF16, true, 4},
    {SCHEDX_CHECK_LIBRARY(abs_max_blocks_fp32_words), SCHEDX_FP32, true, 8},
    {SCHEDX_CHECK_LIBRARY(abs_max_blocks_fp16_elements), SCHEDX_FP16, false, 4},
};

// Runs the library on `in` as runtime/abs_max.cpp runs a CUDA variant: amax zeroed, a block
// sink of one word per block of the grid the runtime computes.
float run(const BlocksLibrary &lib, const test::AbsMaxInput &in, std::string *error) {
    schedx::Variant v = test::check_library_variant(lib.library, "abs_max");
    // The runtime sizes the grid from the variant's parameters; a test library has none in the registry.
    v.params = {{"schedule", lib.words ? "cuda" : "cuda_general"}, {"threads_x", "64"}, {"threads_y", "4"},
                {"rows_per_thread", "8"}, {"load_words", std::to_string(lib.load_words)}};
    const int eb = test::elem_bytes_of(in.type);
    const std::vector<uint8_t> bytes = in.bytes();
    test::Guarded x(bytes.size(), 0);
    std::memcpy(x.data(), bytes.data(), bytes.size());
    const int64_t blocks = schedx::abs_max_blocks(v, in.m, in.k, eb);
    std::vector<uint32_t> sink(size_t(blocks), 0);
    uint32_t amax_bits = 0;
    schedx::PipelineCall call(v, nullptr);
    call.bind_matrix("input", x.data(), in.m, in.k, in.ld, eb);
    call.bind_vector("block_sink", sink.data(), blocks, 4);
    call.bind_address("amax_address", &amax_bits);
    if (call.run() != SCHEDX_OK) *error = schedx_last_error();
    if (!x.guards_intact()) *error = "guard bytes overwritten";
    float amax;
    std::memcpy(&amax, &amax_bits, 4);
    return amax;
}

}  // namespace

TEST_CASE("abs_max CUDA algorithm on the CPU: ragged shapes, padded rows, NaN, inf and the largest at every place") {
    for (const BlocksLibrary &lib : kLibraries) {
        const std::string lib_name = lib.library.name;
        CAPTURE(lib_name);
        int checked = 0;  // per library: the word kernels take only the 16-byte shapes
        const int eb = test::elem_bytes_of(lib.type);
        for (const test::Shape &s : test::ragged_shapes()) {
            // Word kernels read 16-byte vectors: rows and their pitch in whole vectors.
            if (lib.words && ((s.k * eb) % 16 != 0 || (s.ld * eb) % 16 != 0)) continue;
            CAPTURE(s.m);
            CAPTURE(s.k);
            CAPTURE(s.ld);
            test::AbsMaxInput in = test::random_input(lib.type, s.m, s.k, s.ld, uint32_t(s.m * 31 + s.k));
            std::string error;
            CHECK(run(lib, in, &error) == in.want());
            CHECK(error == "");
            // The largest |x| in the last element (a clamped block's edge), negative.
            const uint32_t big = lib.type == SCHEDX_FP32 ? 0xC7000000u : lib.type == SCHEDX_BF16 ? 0xC700u : 0xF800u;
            in.at(s.m - 1, s.k - 1) = big;
            CHECK(run(lib, in, &error) == in.want());
            // inf, then NaN, in the first element.
            in.at(0, 0) = lib.type == SCHEDX_FP32 ? 0x7F800000u : lib.type == SCHEDX_BF16 ? 0x7F80u : 0x7C00u;
            CHECK(std::isinf(run(lib, in, &error)));
            in.at(0, 0) = lib.type == SCHEDX_FP32 ? 0xFFC00001u : lib.type == SCHEDX_BF16 ? 0xFFC1u : 0xFE01u;
            CHECK(std::isnan(run(lib, in, &error)));
            CHECK(error == "");
            checked++;
        }
        CHECK(checked >= 6);
    }
}
