// How a w8_linear schedule lays its work over warps and K, and what that needs of its buffers,
// stated once: the generator takes its parameters' defaults from here and constrains its
// buffers by it (Halide then proves its vector loads aligned and in bounds); the runtime's
// can_run reads the same to decide which variants may take a call. Plain C++, no Halide.
#pragma once

#include "cpu_registers.h"

#include <algorithm>

namespace schedx::w8 {

struct Layout {
    bool lane = false;   // cuda_gemv, cuda_smallbatch, cuda_splitk: a warp's 32 lanes walk K
    bool mma = false;    // cuda_mma: tensor-core tiles
    int split_k = 1;     // warps sharing one row's K (cuda_splitk, cuda_mma)
    int load_words = 4;  // W words (4 int8) per lane per step (cuda_mma: per row)
    int vector_words = 4;
    bool k_tail = false;
    int rows_per_warp = 4;  // output columns n per warp (cuda_mma: 16 per tile; cpu: per register tile)
    int batch = 1;          // rows of x per warp (cuda_mma: 8 per tile; cpu: per register tile)

    // K elements per step of the reduction: 32 lanes of load_words W words, or an mma chunk
    // of 16 per W word of a lane's run; times the warps sharing K.
    int k_step() const { return (mma ? 16 * load_words : 32 * 4 * load_words) * split_k; }
    // cuda_mma with k_tail and W vectors under 16 bytes: K in whole vectors of load_words words.
    bool vector_tail() const { return mma && k_tail && load_words < 4; }
    // K elements the buffers' extents are whole multiples of: a step, or with k_tail a vector
    // (cuda_mma: a chunk).
    int k_granule() const {
        if (k_tail) return mma ? (vector_tail() ? 4 * load_words : 16 * load_words) : 4 * vector_words;
        return k_step();
    }
    // Words per aligned vector of W and of x (two x words per W word, at most 16 bytes): rows
    // start on these.
    int w_vector_words() const { return lane ? vector_words : std::min(load_words, 4); }
    int x_vector_words() const { return lane ? std::min(2 * vector_words, 4) : mma ? std::min(2 * load_words, 4) : 4; }
    // cpu: vector registers the register tile keeps live, its R x B sums, the operands of its
    // inner unrolled loop (the smaller of R and B: W rows or x rows, live across the outer one)
    // and one of the other; past the CPU's (16 AVX2, 32 AVX-512) it spills: M = 16, AVX2,
    // B = R = 4 11.4 ms against 10.0 for B = 4, R = 2 (w8_cpu_avx2 record), the reverse with
    // AVX-512 (6.0 / 9.7). B = 4, R = 3 (16) fits AVX2 with the W rows inner.
    int cpu_inner_rows() const { return std::min(rows_per_warp, batch); }
    int cpu_tile_vectors() const { return rows_per_warp * batch + cpu_inner_rows() + 1; }
};

// The cuBLAS paths' stages (w8_dequantize, w8_rescale) move 16-byte vectors: buffers 16-byte
// aligned, rows and extents in whole vectors.
constexpr int kStageVectorBytes = 16;

// w8_planes: a plane row holds K digits, then the row's exponent byte and zeros up to K + 16.
constexpr int kPlanesRowPad = 16;

}  // namespace schedx::w8
