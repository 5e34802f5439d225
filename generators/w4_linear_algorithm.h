// Weight-only group-wise int4 linear (LLM inference), include/schedx/schedx.h's schedx_w4_linear:
//   y[m][n] = sum_g s[n][g] * sum_{k in g} x[m][k] * (u[n][k] - z[n][g])   (+ bias[n])
// x bf16 or fp16 [M, K]; u the unsigned nibbles of W, word j of row n holding k = 8j + i in bits
// 4i..4i+3 (w4_linear_layout.h); s, z (zero points) and bias bf16 or fp16 [N, K/G] and [N] in
// the scales' dtype; y [M, N] in x's dtype, rounded to nearest-even once from the fp32 sum. The
// symmetric form has no zero points: z = 8 (the nibble holds q + 8, offset binary).
//
// Runtime parameters: group_size (32, 64 or 128; the runtime checks it), has_zeros and
// has_bias (0 or 1). Without zero points or bias the runtime binds the scales in their place,
// read in cache with the scales and never used: one pipeline serves all four forms (per group
// or output that is one load and a select, against a doubled variant list).
//
// The pieces every w4_linear generator shares (w4_linear_generator.cpp: the CPU, the lane
// kernels and the general variant; w4_linear_mma_generator.cpp: tensor cores): the buffers,
// the scales and zero points as floats, and y from the fp32 sums acc.
#pragma once

#include "Halide.h"
#include "numerics.h"
#include "w4_linear_layout.h"

namespace schedx::w4 {

using namespace Halide;

// A generator derives from Generator<itself> and from this, and calls declare_buffers from
// configure() with its add_input / add_output.
class Algorithm {
protected:
    ElemType x_elem = ElemType::bf16, scale_elem = ElemType::bf16;
    Var n{"n"}, m{"m"}, g{"g"};
    GeneratorInput<Buffer<>> *x = nullptr, *w = nullptr, *scales = nullptr, *zeros = nullptr, *bias = nullptr;
    GeneratorInput<int32_t> *group_size = nullptr, *has_zeros = nullptr, *has_bias = nullptr;
    GeneratorOutput<Buffer<>> *y = nullptr;
    Func sf{"sf"}, zf{"zf"}, acc{"acc"};

    // x as 16-bit elements, or (x_words) as words of two.
    template <typename G>
    void declare_buffers(G &gen, ElemType x_type, ElemType scale_type, bool x_words) {
        if (x_type == ElemType::fp32 || scale_type == ElemType::fp32) {
            throw std::invalid_argument("x_type and scale_type are bf16 or fp16");
        }
        x_elem = x_type;
        scale_elem = scale_type;
        x = gen.template add_input<Buffer<>>("x", x_words ? UInt(32) : UInt(16), 2);
        w = gen.template add_input<Buffer<>>("w", UInt(32), 2);
        scales = gen.template add_input<Buffer<>>("scales", UInt(16), 2);
        zeros = gen.template add_input<Buffer<>>("zeros", UInt(16), 2);
        bias = gen.template add_input<Buffer<>>("bias", UInt(16), 1);
        group_size = gen.template add_input<int32_t>("group_size");
        has_zeros = gen.template add_input<int32_t>("has_zeros");
        has_bias = gen.template add_input<int32_t>("has_bias");
        y = gen.template add_output<Buffer<>>("y", UInt(16), 2);
    }

    static Expr decode(ElemType t, Expr bits) { return schedx::decode_to_float(cast<uint32_t>(bits), t); }

    // Rows beyond N or M (a tile's padding) read the last row; their results are never stored.
    Expr x_row(Expr row) const { return clamp(row, 0, x->dim(1).extent() - 1); }
    Expr w_row(Expr row) const { return clamp(row, 0, w->dim(1).extent() - 1); }

    // sf(g, n), zf(g, n): the scale and zero point of row n's group g as floats.
    void define_scales() {
        sf(g, n) = decode(scale_elem, (*scales)(g, w_row(n)));
        zf(g, n) = select(*has_zeros != 0, decode(scale_elem, (*zeros)(g, w_row(n))), kSymmetricZero);
    }

    // y from acc(n, m), the fp32 sums: biased, rounded once to x's dtype.
    void define_y() {
        Expr out = acc(n, m) + select(*has_bias != 0, decode(scale_elem, (*bias)(w_row(n))), 0.0f);
        (*y)(n, m) = cast<uint16_t>(schedx::float_to_half_bits(out, x_elem));
    }

    // x_elems_per_word: 2 where x is read as words.
    void estimate_buffers(int x_elems_per_word, int m_estimate) {
        x->set_estimates({{0, 8192 / x_elems_per_word}, {0, m_estimate}});
        w->set_estimates({{0, 1024}, {0, 8192}});
        scales->set_estimates({{0, 64}, {0, 8192}});
        zeros->set_estimates({{0, 64}, {0, 8192}});
        bias->set_estimates({{0, 8192}});
        group_size->set_estimate(128);
        has_zeros->set_estimate(1);
        has_bias->set_estimate(0);
        y->set_estimates({{0, 8192}, {0, m_estimate}});
    }
};

}  // namespace schedx::w4
