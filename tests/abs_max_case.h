// abs_max test inputs and the independent reference, shared by the CPU and CUDA tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "reference.h"
#include "schedx/schedx.h"

namespace test {

inline int elem_bytes_of(schedx_dtype t) { return t == SCHEDX_FP32 ? 4 : 2; }

// |x| of one element's bits as a double (NaN for NaN), from the formats' definitions.
inline double abs_value(schedx_dtype t, uint32_t bits) {
    switch (t) {
    case SCHEDX_BF16: return std::fabs(double(ref::bf16_to_float(uint16_t(bits))));
    case SCHEDX_FP16: return std::fabs(double(ref::fp16_to_float(uint16_t(bits))));
    default: return std::fabs(double(ref::bits_to_float(bits)));
    }
}

// An [m][ld] matrix of element bits (bf16/fp16 in the low 16 of each entry); only the
// first k of each row belong to x, the rest of a row is padding that must not count.
struct AbsMaxInput {
    schedx_dtype type;
    int64_t m, k, ld;
    std::vector<uint32_t> bits;
    uint32_t &at(int64_t i, int64_t j) { return bits[size_t(i * ld + j)]; }

    // The reference: max |x| over the first k of each row, NaN if any is NaN, 0 if empty.
    float want() const {
        double best = 0;
        for (int64_t i = 0; i < m; i++) {
            for (int64_t j = 0; j < k; j++) {
                const double a = abs_value(type, bits[size_t(i * ld + j)]);
                if (std::isnan(a)) return std::nanf("");
                best = std::max(best, a);
            }
        }
        return float(best);
    }
    // The matrix in the element type's own bytes.
    std::vector<uint8_t> bytes() const {
        const int eb = elem_bytes_of(type);
        std::vector<uint8_t> out(bits.size() * size_t(eb));
        for (size_t i = 0; i < bits.size(); i++) std::memcpy(&out[i * size_t(eb)], &bits[i], size_t(eb));
        return out;
    }
};

// Random finite values with a few large ones; the padding holds larger values and NaN, so a
// read past k or into the padding changes the answer.
inline AbsMaxInput random_input(schedx_dtype t, int64_t m, int64_t k, int64_t ld, uint32_t seed) {
    AbsMaxInput in{t, m, k, ld, std::vector<uint32_t>(size_t(m * ld))};
    std::mt19937 rng(seed);
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < ld; j++) {
            uint32_t b;
            if (j >= k) {
                b = (i + j) % 2 ? (t == SCHEDX_FP32 ? 0x7FC00000u : t == SCHEDX_BF16 ? 0x7FC0u : 0x7E00u)
                                : (t == SCHEDX_FP32 ? 0x7F000000u : t == SCHEDX_BF16 ? 0x7F00u : 0x7BFFu);
            } else if (t == SCHEDX_FP32) {
                b = ref::float_to_bits(std::ldexp(float(rng() % 10000) / 10000.0f, int(rng() % 20) - 10)) |
                    (rng() % 2 ? 0x80000000u : 0);
            } else {
                // Exponents below the formats' largest: finite, and 1.0's magnitude at most 2^10.
                const uint32_t r = rng();
                b = t == SCHEDX_BF16 ? ((r & 0x8000) | ((117 + r % 20) << 7) | ((r >> 8) & 0x7F))
                                     : ((r & 0x8000) | ((5 + r % 20) << 10) | ((r >> 8) & 0x3FF));
            }
            in.at(i, j) = b;
        }
    }
    return in;
}

// Shapes every variant must take: single elements, single rows and columns, primes, row
// pitches above k (odd ones break 16-byte rows), and shapes around the blocks' sizes.
struct Shape {
    int64_t m, k, ld;
};
inline std::vector<Shape> ragged_shapes() {
    return {{1, 1, 1},     {1, 2, 2},      {1, 7, 7},      {1, 1000, 1000}, {1, 4099, 4099}, {1000, 1, 1},
            {37, 1, 5},    {3, 8, 8},      {31, 53, 53},   {31, 53, 64},    {64, 64, 71},    {33, 257, 263},
            {97, 1031, 1031}, {127, 512, 520}, {45, 1544, 1552}, {65, 2048, 2048}, {256, 256, 256},
            {300, 1030, 1032}};
}

}  // namespace test
