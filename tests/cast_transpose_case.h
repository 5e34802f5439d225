// One cast+transpose call on given input bits, checked element by element against the
// reference, with poisoned outputs, padded leading dimensions and guard bytes. The
// `run` hook executes the call (on the CPU directly, or through device copies).
#pragma once

#include <cmath>
#include <functional>
#include <sstream>

#include "reference.h"
#include "test_util.h"

namespace test {

struct CastTransposeCase {
    int64_t m, k;
    int64_t ldx, ld_rows, ld_cols;  // 0: tight
    schedx_dtype dtype = SCHEDX_BF16;
    schedx_fp8_format format = SCHEDX_E4M3FN;
    float scale = 1.0f;  // with current_scaling, computed from x instead
    bool rows = true, cols = true, amax = false;
    // schedx_cast_transpose_fp8_current_scaling: amax, scale and scale_inv are outputs.
    bool current_scaling = false, pow2_scales = false;
    // schedx_cast_transpose_fp8_divide: x / scale (no amax).
    bool divide = false;
};

// Divisors of the divide cast's tests: 7, 1.7 and 0.3 are ones where x * (1 / s) rounds to
// another fp8 code than x / s for some bf16 and fp16 x (test_cast_transpose_cpu.cpp asserts it);
// 2^12 makes most results fp8 subnormals, 2^-12 saturates most, 0 makes x / 0 infinite
// (saturated) and 0 / 0 NaN.
inline constexpr float kDivisors[] = {7.0f, 1.7f, 0.3f, 3.0f, 0x1p12f, 0x1p-12f, 0.0f};

// Host views of every argument; `run` may copy them to a device and back.
struct CastTransposeBuffers {
    Guarded *x, *scale, *rows, *cols, *amax, *scale_inv;
};
using CastTransposeRunner = std::function<schedx_status(const CastTransposeCase &, CastTransposeBuffers &)>;

inline schedx_status run_on_cpu(const CastTransposeCase &c, CastTransposeBuffers &b) {
    if (c.current_scaling) {
        return schedx_cast_transpose_fp8_current_scaling(
            b.x->data(), c.m, c.k, c.ldx, c.dtype, c.format, c.pow2_scales, c.rows ? b.rows->data() : nullptr,
            c.ld_rows, c.cols ? b.cols->data() : nullptr, c.ld_cols, b.amax->as<float>(), b.scale->as<float>(),
            b.scale_inv->as<float>(), SCHEDX_DEVICE_CPU, nullptr);
    }
    if (c.divide) {
        return schedx_cast_transpose_fp8_divide(b.x->data(), c.m, c.k, c.ldx, c.dtype, b.scale->as<float>(), c.format,
                                                c.rows ? b.rows->data() : nullptr, c.ld_rows,
                                                c.cols ? b.cols->data() : nullptr, c.ld_cols, SCHEDX_DEVICE_CPU, nullptr);
    }
    return schedx_cast_transpose_fp8(b.x->data(), c.m, c.k, c.ldx, c.dtype, b.scale->as<float>(), c.format,
                                     c.rows ? b.rows->data() : nullptr, c.ld_rows, c.cols ? b.cols->data() : nullptr,
                                     c.ld_cols, c.amax ? b.amax->as<float>() : nullptr,
                                     c.amax ? b.scale_inv->as<float>() : nullptr, SCHEDX_DEVICE_CPU, nullptr);
}

inline float element_value(const CastTransposeCase &c, uint32_t bits) {
    switch (c.dtype) {
    case SCHEDX_BF16: return ref::bf16_to_float(uint16_t(bits));
    case SCHEDX_FP16: return ref::fp16_to_float(uint16_t(bits));
    default: return ref::bits_to_float(bits);
    }
}

// `bits(i, j)` gives the input element bits at row i, column j. Returns "" on success,
// else a description of the first mismatch.
inline std::string check_cast_transpose(CastTransposeCase c, const std::function<uint32_t(int64_t, int64_t)> &bits,
                                        const CastTransposeRunner &run = run_on_cpu) {
    if (!c.ldx) c.ldx = c.k;
    if (!c.ld_rows) c.ld_rows = c.k;
    if (!c.ld_cols) c.ld_cols = c.m;
    const int eb = c.dtype == SCHEDX_FP32 ? 4 : 2;
    // Padding between rows holds inf, which would show in the outputs if it were read.
    Guarded x(size_t(c.m) * c.ldx * eb, 0), scale(4), rows(size_t(c.m) * c.ld_rows), cols(size_t(c.k) * c.ld_cols),
        amax(4), scale_inv(4);
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t j = 0; j < c.ldx; j++) {
            const uint32_t v = j < c.k ? bits(i, j) : (eb == 2 ? (c.dtype == SCHEDX_BF16 ? 0x7F80u : 0x7C00u) : 0x7F800000u);
            std::memcpy(x.data() + (size_t(i) * c.ldx + j) * eb, &v, eb);
        }
    }
    if (!c.current_scaling) std::memcpy(scale.data(), &c.scale, 4);  // else an output, left poisoned
    CastTransposeBuffers b{&x, &scale, &rows, &cols, &amax, &scale_inv};
    schedx_status s = run(c, b);
    std::ostringstream err;
    if (s != SCHEDX_OK) {
        err << "status " << s << ": " << schedx_last_error();
        // A refused call writes nothing.
        for (Guarded *g : {&rows, &cols, &amax, &scale_inv}) {
            if (!g->untouched()) err << " (and an output was written)";
        }
        return err.str();
    }
    const ref::Fp8Table &t = c.format == SCHEDX_E5M2 ? ref::e5m2() : ref::e4m3fn();
    float max_abs = 0;
    bool any_nan = false;
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t j = 0; j < c.k; j++) {
            const float v = element_value(c, bits(i, j));
            any_nan |= std::isnan(v);
            if (!std::isnan(v)) max_abs = std::max(max_abs, std::fabs(v));
        }
    }
    const float want_amax = any_nan ? NAN : max_abs;
    if (c.current_scaling) c.scale = ref::torchao_scale(c.format == SCHEDX_E5M2 ? 57344.0 : 448.0, want_amax, c.pow2_scales);
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t j = 0; j < c.k; j++) {
            const uint32_t xb = bits(i, j);
            // IEEE fp32 product or quotient, rounded once (no -ffast-math in the tests' build).
            const float v = element_value(c, xb), scaled = c.divide ? v / c.scale : v * c.scale;
            const uint8_t want = ref::encode(scaled, t);
            const uint8_t got_r = c.rows ? rows.data()[i * c.ld_rows + j] : want;
            const uint8_t got_c = c.cols ? cols.data()[j * c.ld_cols + i] : want;
            if (got_r != want || got_c != want) {
                err << "at (" << i << ", " << j << ") x bits 0x" << std::hex << xb << " scale " << c.scale
                    << ": want 0x" << int(want) << " rows 0x" << int(got_r) << " cols 0x" << int(got_c);
                return err.str();
            }
        }
    }
    // Row padding of the outputs must stay poisoned.
    for (int64_t i = 0; c.rows && i < c.m; i++) {
        for (int64_t j = c.k; j < c.ld_rows; j++) {
            if (rows.data()[i * c.ld_rows + j] != kPoison) return "rows padding written";
        }
    }
    for (int64_t j = 0; c.cols && j < c.k; j++) {
        for (int64_t i = c.m; i < c.ld_cols; i++) {
            if (cols.data()[j * c.ld_cols + i] != kPoison) return "cols padding written";
        }
    }
    // Floats compared as bits, NaN as any NaN.
    auto same = [](float got, float want) {
        return std::isnan(want) ? std::isnan(got) : ref::float_to_bits(got) == ref::float_to_bits(want);
    };
    if (c.amax || c.current_scaling) {
        const float got = *amax.as<float>(), inv = *scale_inv.as<float>();
        if (!same(got, want_amax)) {
            err << "amax " << got << " want " << want_amax;
            return err.str();
        }
        if (c.current_scaling && !same(*scale.as<float>(), c.scale)) {
            err << "scale " << *scale.as<float>() << " want " << c.scale;
            return err.str();
        }
        if (!same(inv, 1.0f / c.scale)) {
            err << "scale_inv " << inv << " want " << 1.0f / c.scale;
            return err.str();
        }
    }
    for (Guarded *g : {&x, &scale, &rows, &cols, &amax, &scale_inv}) {
        if (!g->guards_intact()) return "guard bytes overwritten";
    }
    return "";
}

}  // namespace test
