// One w4_linear call checked against an fp64 reference: integer-valued cases that must match
// bit for bit, random cases within |y - ref| <= 1e-2 |ref| + 1e-5 sum |terms| (each term
// |x| (|u - z| + offset) s, the offset being what the kernel's sums carry per weight), padded leading
// dimensions (inf in x's and nibbles 15 in W's padding), poisoned outputs and guard bytes. The
// `run` hook executes the call (on the CPU directly, or through device copies).
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "test_util.h"
#include "w8_linear_case.h"  // round_to_half, half_value

namespace test {

struct W4Case {
    int64_t m, n, k, group = 32;
    int64_t ldx = 0, ldw = 0, ldy = 0;  // 0: tight (ldw in words)
    schedx_dtype x_dtype = SCHEDX_BF16, scales_dtype = SCHEDX_BF16;
    bool zeros = false, bias = false;
    bool integer = true;  // integer x and z, power-of-two scales: y must be exact
    // The dequantize + cuBLAS path's reference: each weight (u - z) * s rounded once to x's
    // dtype (exact in integer cases), as that path and torchao's dequantize compute it.
    bool weight_rounded = false;
    // What the kernel's sums carry beside u - z per weight: the tensor-core kernels sum x (M0 + u)
    // (w4_linear_layout.h, mma_weight_offset), the others nothing.
    double sum_offset = 0;
};

struct W4Buffers {
    Guarded *x, *w, *scales, *zeros, *bias, *y;
};
using W4Runner = std::function<schedx_status(const W4Case &, W4Buffers &)>;

inline uint32_t w4_hash(int64_t a, int64_t b, uint32_t seed, uint32_t salt) {
    return test::mix(uint32_t(a * 7919 + b) ^ (seed * 0x9E3779B9u) ^ salt);
}

// Runs `c` and checks y: bit for bit for integer cases, else |y - ref| <= 1e-2 |ref| + 1e-5
// sum |terms| (the output's rounding, 2^-9 relative in bf16, plus fp32 accumulation of what the
// kernel sums); then y's
// row padding (still poisoned) and every guard byte. "" or the first fault.
inline std::string check_w4_linear(W4Case c, uint32_t seed, const W4Runner &run, double *worst = nullptr) {
    if (!c.ldx) c.ldx = c.k;
    if (!c.ldw) c.ldw = c.k / 8;
    if (!c.ldy) c.ldy = c.n;
    const int64_t groups = c.k / c.group;
    Guarded x(size_t(c.m * c.ldx) * 2, 0), w(size_t(c.n * c.ldw) * 4, 0), scales(size_t(c.n * groups) * 2),
        zeros(size_t(c.n * groups) * 2), bias(size_t(c.n) * 2), y(size_t(c.m * c.ldy) * 2);
    std::vector<double> xv(size_t(c.m * c.k)), uv(size_t(c.n * c.k)), sv(size_t(c.n * groups)),
        zv(size_t(c.n * groups), 8.0), bv(size_t(c.n), 0.0);
    // Row padding: inf in x and nibbles 15 in W, which would show in y if they were read.
    const uint16_t x_pad = c.x_dtype == SCHEDX_BF16 ? 0x7F80 : 0x7C00;
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t j = 0; j < c.ldx; j++) {
            const uint32_t r = w4_hash(i, j, seed, 1);
            const double v = c.integer ? double(int(r % 7) - 3) : double(int(r % 20001) - 10000) / 2500.0;
            const uint16_t bits = j < c.k ? test::round_to_half(v, c.x_dtype) : x_pad;
            x.as<uint16_t>()[i * c.ldx + j] = bits;
            if (j < c.k) xv[size_t(i * c.k + j)] = test::half_value(bits, c.x_dtype);
        }
    }
    for (int64_t i = 0; i < c.n; i++) {
        for (int64_t j = 0; j < c.ldw; j++) {
            const uint32_t word = j < c.k / 8 ? w4_hash(i, j, seed, 2) : 0xFFFFFFFFu;
            w.as<uint32_t>()[i * c.ldw + j] = word;
            for (int q = 0; q < 8 && j < c.k / 8; q++) uv[size_t(i * c.k + 8 * j + q)] = double((word >> (4 * q)) & 0xF);
        }
        for (int64_t g = 0; g < groups; g++) {
            const uint32_t r = w4_hash(i, g, seed, 3);
            const double s = c.integer ? std::ldexp(1.0, int(r % 4) - 2) : (1.0 + double(r % 1000) / 1000.0) * 1e-2;
            const uint16_t sb = test::round_to_half(s, c.scales_dtype), zb = test::round_to_half(double(r % 17), c.scales_dtype);
            scales.as<uint16_t>()[i * groups + g] = sb;
            zeros.as<uint16_t>()[i * groups + g] = zb;
            sv[size_t(i * groups + g)] = test::half_value(sb, c.scales_dtype);
            if (c.zeros) zv[size_t(i * groups + g)] = test::half_value(zb, c.scales_dtype);
        }
        const uint16_t b = test::round_to_half(double(int(w4_hash(i, 0, seed, 4) % 101) - 50), c.scales_dtype);
        bias.as<uint16_t>()[i] = b;
        if (c.bias) bv[size_t(i)] = test::half_value(b, c.scales_dtype);
    }
    W4Buffers buffers{&x, &w, &scales, &zeros, &bias, &y};
    const schedx_status st = run(c, buffers);
    if (st != SCHEDX_OK) {
        return "status " + std::to_string(st) + ": " + schedx_last_error() + (y.untouched() ? "" : " (and y was written)");
    }
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t j = 0; j < c.n; j++) {
            double sum = 0, sum_abs = 0;
            for (int64_t kk = 0; kk < c.k; kk++) {
                const size_t gi = size_t(j * groups + kk / c.group);
                double wv = (uv[size_t(j * c.k + kk)] - zv[gi]) * sv[gi];
                if (c.weight_rounded) wv = test::half_value(test::round_to_half(wv, c.x_dtype), c.x_dtype);
                const double t = xv[size_t(i * c.k + kk)] * wv;
                sum += t;
                sum_abs += std::fabs(t) + std::fabs(xv[size_t(i * c.k + kk)] * sv[gi]) * c.sum_offset;
            }
            sum += bv[size_t(j)];
            const uint16_t got = y.as<uint16_t>()[i * c.ldy + j];
            const double gv = test::half_value(got, c.x_dtype);
            if (c.integer ? got != test::round_to_half(sum, c.x_dtype)
                          : !(std::fabs(gv - sum) <= 1e-2 * std::fabs(sum) + 1e-5 * sum_abs)) {
                return "at (" + std::to_string(i) + ", " + std::to_string(j) + "): want " + std::to_string(sum) +
                       " got " + std::to_string(gv);
            }
            if (worst && sum != 0) *worst = std::max(*worst, std::fabs(gv - sum) / std::fabs(sum));
        }
        for (int64_t j = c.n * 2; j < c.ldy * 2; j++) {
            if (y.data()[i * c.ldy * 2 + j] != test::kPoison) return "y padding written";
        }
    }
    for (Guarded *g : {&x, &w, &scales, &zeros, &bias, &y}) {
        if (!g->guards_intact()) return "guard bytes overwritten";
    }
    return "";
}

}  // namespace test
