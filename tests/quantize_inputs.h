// Input patterns for the quantize tests (CPU and CUDA share them): element bits that are
// a pure function of (i, j), with magnitudes that vary from block to block, specials
// (zeros, inf, NaN, subnormals, the largest finite value) inside blocks, all-zero blocks,
// blocks of subnormals only (the infinite-scale path) and blocks near the RCEIL thresholds;
// for axiswise, rows and columns of each kind (NaN, inf, zero, subnormal-only, ordinary).
#pragma once

#include <cstdint>

#include "test_util.h"

namespace test {

enum class QuantizeInput { mixed, specials, tiny_blocks, all_patterns, axis_lines };

inline uint32_t quantize_input_bits(schedx_dtype t, QuantizeInput kind, int64_t i, int64_t j) {
    const uint32_t h = mix(uint32_t(i * 1000003 + j * 7919 + 17));
    // Exponent field width, bias, mantissa width of the input dtype.
    const int ebits = t == SCHEDX_FP16 ? 5 : 8, mbits = t == SCHEDX_BF16 ? 7 : t == SCHEDX_FP16 ? 10 : 23;
    const int bias = (1 << (ebits - 1)) - 1, emax = (1 << ebits) - 2;
    const uint32_t sign = (h >> 31) << (ebits + mbits);
    const uint32_t mant = (h >> 3) & ((1u << mbits) - 1);
    auto make = [&](int e) { return sign | (uint32_t(e) << mbits) | mant; };
    // A magnitude per 32 x 32 region, so neighbouring blocks get different scales.
    const int region = int(mix(uint32_t((i / 32) * 131 + j / 32)) % 21) - 10;
    const int e = std::min(std::max(bias + region + int(h % 7) - 3, 1), emax);
    switch (kind) {
    case QuantizeInput::all_patterns:
        return uint32_t(((i % 256) * 256 + j % 256) & 0xFFFF);
    case QuantizeInput::mixed:
        return make(e);
    case QuantizeInput::specials: {
        // Whole 64 x 64 regions of zeros (all-zero blocks of every recipe at the corner).
        if (((i / 64) + (j / 64)) % 5 == 4) return (h & 1) ? sign : 0;
        switch (h % 61) {
        case 0: return 0;
        case 1: return sign;                                        // -0 or +0
        case 2: return sign | (uint32_t(emax + 1) << mbits);        // +-inf
        case 3: return (uint32_t(emax + 1) << mbits) | 1u | (mant << 1 & ((1u << mbits) - 1));  // NaN
        case 4: case 5: case 6: return sign | (mant | 1u);          // subnormal
        case 7: return sign | (uint32_t(emax) << mbits) | ((1u << mbits) - 1);  // +-max finite
        default: return make(e);
        }
    }
    case QuantizeInput::axis_lines: {
        // specials would put a NaN in nearly every row and column: here only rows i % 8 == 3
        // and columns j % 16 == 5 hold one (NaN scales), rows i % 8 == 6 and columns
        // j % 16 == 9 an inf (scale 0), rows i % 13 == 7 and columns j % 29 == 11 are zero
        // (amax 0), rows i % 11 == 4 subnormal (amax below 1e-12); other lines are finite
        // with a scattering of subnormals, zeros and +-max finite.
        if (i % 8 == 3 && j % 16 == 5) return (uint32_t(emax + 1) << mbits) | 1u;  // NaN
        if (i % 8 == 6 && j % 16 == 9) return sign | (uint32_t(emax + 1) << mbits);  // +-inf
        if (i % 13 == 7 || j % 29 == 11) return sign;                                // +-0
        if (i % 11 == 4) return sign | (mant | 1u);                                  // subnormal
        switch (h % 37) {
        case 0: return sign;
        case 1: case 2: return sign | (mant | 1u);
        case 3: return sign | (uint32_t(emax) << mbits) | ((1u << mbits) - 1);
        default: return make(e);
        }
    }
    case QuantizeInput::tiny_blocks: {
        // Regions of subnormals only, or of tiny normals (amax ~2^-117..2^-119 for fp32/bf16,
        // where RCEIL's descale is subnormal), and ordinary values elsewhere.
        const int r = int(mix(uint32_t((i / 32) * 31 + j / 32)) % 3);
        if (r == 0) return sign | (mant | 1u);
        if (r == 1) return make(t == SCHEDX_FP16 ? 1 + int(h % 3) : 7 + int(h % 4));
        return make(e);
    }
    }
    return 0;
}

}  // namespace test
