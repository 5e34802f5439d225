// One schedx_quantize_fp8 call on given input bits, checked element by element (codes,
// scales, scale padding) against a reference written here from the recipes' definitions
// in float arithmetic (TE's kernels and torchao's to_mx as they compute, not the
// generator's integer emulation of them), with poisoned outputs, padded leading
// dimensions and guard bytes. The `run` hook executes the call (CPU, or device copies).
#pragma once

#include <cmath>
#include <functional>
#include <sstream>

#include "quantize_reference.h"
#include "test_util.h"

namespace test {

struct QuantizeCase {
    int64_t m, k;
    int64_t ldx = 0, ld_rows = 0, ld_cols = 0;  // 0: tight
    schedx_dtype dtype = SCHEDX_BF16;
    schedx_quantize_fp8_options opt{SCHEDX_RECIPE_BLOCK_1X128, SCHEDX_E4M3FN, 1, 0.0f, SCHEDX_MX_FLOOR};
    bool rows = true, cols = true;
};

struct QuantizeBuffers {
    Guarded *x, *rows, *rows_scale, *cols, *cols_scale;
};
using QuantizeRunner = std::function<schedx_status(const QuantizeCase &, QuantizeBuffers &)>;

inline schedx_status quantize_on_cpu(const QuantizeCase &c, QuantizeBuffers &b) {
    return schedx_quantize_fp8(b.x->data(), c.m, c.k, c.ldx, c.dtype, &c.opt, c.rows ? b.rows->data() : nullptr,
                               c.ld_rows, c.rows ? b.rows_scale->data() : nullptr, c.cols ? b.cols->data() : nullptr,
                               c.ld_cols, c.cols ? b.cols_scale->data() : nullptr, SCHEDX_DEVICE_CPU, nullptr);
}


// `bits(i, j)`: input element bits at row i, column j. "" on success, else the first
// mismatch.
inline std::string check_quantize(QuantizeCase c, const std::function<uint32_t(int64_t, int64_t)> &bits,
                                  const QuantizeRunner &run = quantize_on_cpu) {
    if (!c.ldx) c.ldx = c.k;
    if (!c.ld_rows) c.ld_rows = c.k;
    if (!c.ld_cols) c.ld_cols = c.m;
    const schedx_quantize_fp8_options &o = c.opt;
    const bool mx = o.recipe == SCHEDX_RECIPE_MXFP8, square = o.recipe == SCHEDX_RECIPE_BLOCK_128X128;
    const bool axis = o.recipe == SCHEDX_RECIPE_AXISWISE;
    const int eb = c.dtype == SCHEDX_FP32 ? 4 : 2, sb = mx ? 1 : 4;
    // Block lengths: along K for rows, along M for cols (axiswise: whole rows and columns).
    const int64_t B = mx ? 32 : 128, BK = axis ? std::max<int64_t>(c.k, 1) : B, BM = axis ? std::max<int64_t>(c.m, 1) : B;
    int64_t rs_r, rs_c, cs_r, cs_c;
    REQUIRE(schedx_quantize_fp8_scale_shape(o.recipe, c.m, c.k, 0, &rs_r, &rs_c) == SCHEDX_OK);
    REQUIRE(schedx_quantize_fp8_scale_shape(o.recipe, c.m, c.k, 1, &cs_r, &cs_c) == SCHEDX_OK);
    // Padding between rows of x holds NaN and the dtype's largest finite value in turn: a read
    // of it would show in the outputs (NaN alone could not: the block recipes' maxima skip it).
    Guarded x(size_t(c.m) * c.ldx * eb, 0), rows(size_t(c.m) * c.ld_rows), cols(size_t(c.k) * c.ld_cols),
        rows_scale(size_t(rs_r * rs_c) * sb), cols_scale(size_t(cs_r * cs_c) * sb);
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t j = 0; j < c.ldx; j++) {
            const uint32_t nan = eb == 2 ? 0x7FC1u : 0x7FC00001u;
            const uint32_t largest = c.dtype == SCHEDX_BF16 ? 0x7F7Fu : (c.dtype == SCHEDX_FP16 ? 0x7BFFu : 0x7F7FFFFFu);
            const uint32_t v = j < c.k ? bits(i, j) : ((j - c.k) % 2 == 0 ? nan : largest);
            std::memcpy(x.data() + (size_t(i) * c.ldx + j) * eb, &v, eb);
        }
    }
    QuantizeBuffers b{&x, &rows, &rows_scale, &cols, &cols_scale};
    const schedx_status s = run(c, b);
    std::ostringstream err;
    if (s != SCHEDX_OK) {
        err << "status " << s << ": " << schedx_last_error();
        // A refused call writes nothing.
        for (Guarded *g : {&rows, &cols, &rows_scale, &cols_scale}) {
            if (!g->untouched()) err << " (and an output was written)";
        }
        return err.str();
    }
    auto value = [&](int64_t i, int64_t j) { return qref::decode(c.dtype, bits(i, j)); };
    // Block maxima: TE's skip NaN (fmaxf on the GPU), torchao's propagate it.
    auto block_amax = [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
        float a = 0;
        bool nan = false;
        for (int64_t i = i0; i < std::min(i1, c.m); i++) {
            for (int64_t j = j0; j < std::min(j1, c.k); j++) {
                // Every NaN skipped, signaling ones too (glibc's fmaxf returns NaN for those;
                // the GPU's max.f32 that TE's fmaxf becomes does not).
                const float v = std::fabs(value(i, j));
                nan |= std::isnan(v);
                if (!std::isnan(v)) a = std::max(a, v);
            }
        }
        return (mx || axis) && nan ? NAN : a;
    };
    const ref::Fp8Table &t = o.format == SCHEDX_E5M2 ? ref::e5m2() : ref::e4m3fn();
    // The code of x[i][j] in a block of maximum `amax`, and the block's scale entry.
    auto code = [&](int64_t i, int64_t j, float amax) -> uint8_t {
        if (axis) {
            const float s = qref::axis_scale(amax, o);
            return std::isnan(s) ? 0x7F : ref::encode(value(i, j) * s, t);
        }
        if (!mx) return ref::encode(value(i, j) * qref::te_scale(amax, o, c.dtype), t);
        return ref::encode(qref::mx_scaled(value(i, j), qref::mx_byte(amax, o), o), t);
    };
    auto scale_entry = [&](float amax) -> uint32_t {
        if (mx) return qref::mx_byte(amax, o);
        if (axis) {
            const float s = qref::axis_scale(amax, o);
            return std::isnan(s) ? 0x7FC00000u : ref::float_to_bits(s);  // any NaN matches (below)
        }
        return ref::float_to_bits(1.0f / qref::te_scale(amax, o, c.dtype));
    };
    auto scale_at = [&](Guarded &g, int64_t idx) -> uint32_t {
        if (mx) return g.data()[idx];
        return ref::float_to_bits(g.as<float>()[idx]);
    };
    const int64_t KB = (c.k + BK - 1) / BK, MB = (c.m + BM - 1) / BM;
    // Expected scale arrays (padding 0), compared whole.
    std::vector<uint32_t> want_rs(size_t(rs_r * rs_c), 0), want_cs(size_t(cs_r * cs_c), 0);
    std::vector<float> row_amax(size_t(c.m * KB)), col_amax(size_t(c.k * MB));
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t kb = 0; kb < KB; kb++) {
            const float a = square ? block_amax(i / B * B, i / B * B + B, kb * B, kb * B + B)
                                   : block_amax(i, i + 1, kb * BK, kb * BK + BK);
            row_amax[size_t(i * KB + kb)] = a;
            const int64_t at = mx || axis ? i * rs_c + kb : square ? (i / B) * rs_c + kb : kb * rs_c + i;
            want_rs[size_t(at)] = scale_entry(a);
        }
    }
    for (int64_t j = 0; j < c.k; j++) {
        for (int64_t mb = 0; mb < MB; mb++) {
            const float a = square ? row_amax[size_t(mb * B * KB + j / B)] : block_amax(mb * BM, mb * BM + BM, j, j + 1);
            col_amax[size_t(j * MB + mb)] = a;
            const int64_t at = mx ? j * cs_c + mb : square ? (j / B) * cs_c + mb : mb * cs_c + j;
            want_cs[size_t(at)] = scale_entry(a);
        }
    }
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t j = 0; j < c.k; j++) {
            const uint8_t want_r = code(i, j, row_amax[size_t(i * KB + j / BK)]);
            const uint8_t want_c = code(i, j, col_amax[size_t(j * MB + i / BM)]);
            const uint8_t got_r = c.rows ? rows.data()[i * c.ld_rows + j] : want_r;
            const uint8_t got_c = c.cols ? cols.data()[j * c.ld_cols + i] : want_c;
            if (got_r != want_r || got_c != want_c) {
                err << "at (" << i << ", " << j << ") x bits 0x" << std::hex << bits(i, j) << ": rows want 0x"
                    << int(want_r) << " got 0x" << int(got_r) << ", cols want 0x" << int(want_c) << " got 0x"
                    << int(got_c);
                return err.str();
            }
        }
    }
    for (auto [on, g, want, name] : {std::tuple{c.rows, &rows_scale, &want_rs, "rows_scale"},
                                     std::tuple{c.cols, &cols_scale, &want_cs, "cols_scale"}}) {
        for (size_t idx = 0; on && idx < want->size(); idx++) {
            const uint32_t got = scale_at(*g, int64_t(idx));
            const bool both_nan = axis && (got & 0x7FFFFFFF) > 0x7F800000 && (*want)[idx] == 0x7FC00000u;
            if (got != (*want)[idx] && !both_nan) {
                err << name << "[" << idx << "]: want bits 0x" << std::hex << (*want)[idx] << " got 0x"
                    << scale_at(*g, int64_t(idx));
                return err.str();
            }
        }
    }
    // Row padding of the data outputs stays poisoned; unrequested outputs stay untouched.
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t j = c.rows ? c.k : 0; j < c.ld_rows; j++) {
            if (rows.data()[i * c.ld_rows + j] != kPoison) return "rows written outside its rows";
        }
    }
    for (int64_t j = 0; j < c.k; j++) {
        for (int64_t i = c.cols ? c.m : 0; i < c.ld_cols; i++) {
            if (cols.data()[j * c.ld_cols + i] != kPoison) return "cols written outside its rows";
        }
    }
    for (Guarded *g : {&x, &rows, &cols, &rows_scale, &cols_scale}) {
        if (!g->guards_intact()) return "guard bytes overwritten";
    }
    return "";
}

}  // namespace test
