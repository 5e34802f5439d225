// mma.sync m16n8k16 by its definition, for CPU builds of tensor-core algorithms (tests): what
// ptx_mma_m16n8k16 (ptx_extern.h) issues on the GPU, as a sum over the warp's fragments.
#pragma once

#include <functional>
#include <vector>

#include "Halide.h"

namespace schedx {

// Lane l's D float e is C's plus the sum over k of A[row][k] B[k][col], row l / 4 + 8 (e / 2),
// col 2 (l % 4) + e % 2, each element read from the lane and fragment word the PTX ISA puts it
// in (`a(word, lane)`, `b(word, lane)`: the operand words of any lane), two 16-bit elements a
// word, the lower k low. Sums in fp32 in k order: the tensor cores' order and rounding differ.
inline std::vector<Halide::Expr> mma_m16n8k16_by_definition(const std::function<Halide::Expr(int, Halide::Expr)> &a,
                                                            const std::function<Halide::Expr(int, Halide::Expr)> &b,
                                                            const std::vector<Halide::Expr> &c, Halide::Expr lane,
                                                            const std::function<Halide::Expr(Halide::Expr)> &to_float) {
    using namespace Halide;
    auto half = [&](Expr word, int k) { return to_float((cast<uint32_t>(word) >> (16 * (k % 2))) & 0xFFFF); };
    std::vector<Expr> d;
    for (int e = 0; e < 4; e++) {
        Expr sum = cast<float>(c[e]);
        Expr col = 2 * (lane % 4) + e % 2;
        for (int k = 0; k < 16; k++) {
            Expr a_elem = half(a(e / 2 + 2 * (k / 8), 4 * (lane / 4) + (k % 8) / 2), k);
            Expr b_elem = half(b(k / 8, 4 * col + (k % 8) / 2), k);
            sum = sum + a_elem * b_elem;
        }
        d.push_back(sum);
    }
    return d;
}

}  // namespace schedx
