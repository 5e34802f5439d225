// The w4_linear format and the lane layout's rules, stated once: the generator constrains its
// buffers by them and the runtime's checks and can_run read the same. Plain C++, no Halide.
#pragma once

#include <cstdint>

#include "cpu_registers.h"

namespace schedx::w4 {

// W is uint32 words [N][ldw]: word j of row n holds k = 8j + i in bits 4i..4i+3 (i = 0..7).
constexpr int kElemsPerWord = 8;
// Group sizes along K (scales, zero points): each a whole number of lane vectors.
constexpr int kGroupSizes[] = {32, 64, 128};
inline bool valid_group_size(int64_t g) { return g == 32 || g == 64 || g == 128; }
// cuda_gemv: a lane's vector, 32 elements (4 W words: one 16-byte load); K is always whole
// vectors (a multiple of the group size).
constexpr int kVectorElems = 32;
// cuda_mma: a chunk is 32 load_words elements of K (a quad of lanes, load_words W words each:
// one vector), and every chunk lies in one group, whose sum its mma keeps apart: the kernel
// takes group sizes of at least one chunk.
inline bool valid_mma_load_words(int64_t load_words) { return load_words == 1 || load_words == 2 || load_words == 4; }
inline int64_t mma_chunk_elems(int64_t load_words) { return 32 * load_words; }
// cuda_mma: a weight enters the mma as the x-dtype value M0 + u (the nibble OR-ed into M0's low
// mantissa bits, exact, M0's ulp being 1) and each group subtracts (M0 + z) sum x once, so its fp32
// sums carry x (M0 + u) and their rounding grows with M0 (the tests' tolerance reads it).
inline float mma_weight_offset(bool fp16_x) { return fp16_x ? 1024.0f : 128.0f; }
// The symmetric form's zero point: its nibble holds q + 8 (offset binary), q in [-8, 7].
constexpr float kSymmetricZero = 8.0f;
// cpu: vector registers the register tile's inner loop keeps live: its R x B group sums, R
// vectors of W words, the unpacked weight and an x vector; past the CPU's it spills: B = 4,
// R = 3 (17) lost to R = 2 (12) on AVX2 (0.71x at M = 16) and won on AVX-512 (1.09-1.19x).
inline int cpu_tile_vectors(int rows, int batch) { return rows * batch + rows + 2; }

}  // namespace schedx::w4
