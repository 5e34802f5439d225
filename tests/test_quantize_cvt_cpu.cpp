// quantize_fp8's tiled CUDA algorithm with the hardware fp8 conversion (encoder=ptx) on the
// CPU: the same generator code under Halide's default schedule (test libraries,
// tests/CMakeLists.txt), its schedx_ptx_cvt_* calls answered by C stand-ins written from the
// PTX ISA's definition of cvt.rn.satfinite, checked against the recipes' reference on every
// bf16 bit pattern. The GPU machine checks the instruction itself against this definition
// (the cast's cvt variants, bit-exact with the integer encoder on the H200).
#include <doctest/doctest.h>

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "check_library.h"
#include "quantize_cvt_block1d_e4m3.h"
#include "quantize_cvt_block1d_e5m2.h"
#include "quantize_cvt_block2d_e4m3.h"
#include "quantize_cvt_mx_e4m3.h"
#include "quantize_cvt_mx_e5m2.h"
#include "quantize_cvt_block1d_e4m3_words.h"
#include "quantize_cvt_block2d_e4m3_cols_from_rows.h"
#include "quantize_cvt_block2d_e4m3_words.h"
#include "quantize_cvt_mx_e5m2_words.h"
#include "quantize_axis_codes_e4m3.h"
#include "quantize_axis_codes_e5m2.h"
#include "quantize_axis_maxima.h"
#include "quantize_fp8_call.h"
#include "quantize_fp8_case.h"
#include "quantize_inputs.h"

// The atomic max of the axiswise maxima pass (tests/test_abs_max_blocks_cpu.cpp defines it).
extern "C" uint32_t schedx_test_atomic_max_u32(uint64_t address, uint32_t value);

namespace {

// The value of a non-negative fp8 code.
double fp8_value(int code, bool e5m2) {
    const int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
    const int e = code >> mbits, man = code & ((1 << mbits) - 1);
    if (e == 0) return std::ldexp(double(man), 1 - bias - mbits);
    return std::ldexp(1.0 + std::ldexp(double(man), -mbits), e - bias);
}

// One operand of cvt.rn.satfinite.{e4m3,e5m2}x2.f32: round to nearest, ties to the even
// code; magnitudes past the largest finite value, infinities included, become it; NaN
// becomes 0x7F; the sign is kept (zeros included).
uint8_t cvt_rn_satfinite(float v, bool e5m2) {
    if (std::isnan(v)) return 0x7F;
    static const auto values = [](bool e5) {
        std::vector<double> out;
        for (int c = 0; c <= (e5 ? 0x7B : 0x7E); c++) out.push_back(fp8_value(c, e5));
        return out;
    };
    static const std::vector<double> e4m3 = values(false), e5m2_values = values(true);
    const std::vector<double> &vals = e5m2 ? e5m2_values : e4m3;
    const uint8_t sign = std::signbit(v) ? 0x80 : 0;
    const double a = std::fabs(double(v));
    if (a >= vals.back()) return sign | uint8_t(vals.size() - 1);  // infinities too
    // The codes below and above a (values ascend with codes); the nearer, ties to the even code.
    const int hi = int(std::upper_bound(vals.begin(), vals.end(), a) - vals.begin()), lo = hi - 1;
    const double d_lo = a - vals[lo], d_hi = vals[hi] - a;
    return sign | uint8_t(d_lo < d_hi || (d_lo == d_hi && lo % 2 == 0) ? lo : hi);
}

}  // namespace

// The stand-ins the test libraries call (generators/ptx_extern.h: `lo` in the low byte).
extern "C" uint16_t schedx_ptx_cvt_e4m3x2(float lo, float hi) {
    return uint16_t(cvt_rn_satfinite(lo, false) | (cvt_rn_satfinite(hi, false) << 8));
}
extern "C" uint16_t schedx_ptx_cvt_e5m2x2(float lo, float hi) {
    return uint16_t(cvt_rn_satfinite(lo, true) | (cvt_rn_satfinite(hi, true) << 8));
}

namespace {

struct CvtLibrary {
    test::CheckLibrary library;
    schedx_fp8_recipe recipe;
    schedx_fp8_format format;
};

const CvtLibrary kLibraries[] = {
    {SCHEDX_CHECK_LIBRARY(quantize_cvt_block1d_e4m3), SCHEDX_RECIPE_BLOCK_1X128, SCHEDX_E4M3FN},
    {SCHEDX_CHECK_LIBRARY(quantize_cvt_block1d_e5m2), SCHEDX_RECIPE_BLOCK_1X128, SCHEDX_E5M2},
    {SCHEDX_CHECK_LIBRARY(quantize_cvt_block2d_e4m3), SCHEDX_RECIPE_BLOCK_128X128, SCHEDX_E4M3FN},
    {SCHEDX_CHECK_LIBRARY(quantize_cvt_mx_e4m3), SCHEDX_RECIPE_MXFP8, SCHEDX_E4M3FN},
    {SCHEDX_CHECK_LIBRARY(quantize_cvt_mx_e5m2), SCHEDX_RECIPE_MXFP8, SCHEDX_E5M2},
    {SCHEDX_CHECK_LIBRARY(quantize_cvt_block1d_e4m3_words), SCHEDX_RECIPE_BLOCK_1X128, SCHEDX_E4M3FN},
    {SCHEDX_CHECK_LIBRARY(quantize_cvt_block2d_e4m3_words), SCHEDX_RECIPE_BLOCK_128X128, SCHEDX_E4M3FN},
    {SCHEDX_CHECK_LIBRARY(quantize_cvt_block2d_e4m3_cols_from_rows), SCHEDX_RECIPE_BLOCK_128X128, SCHEDX_E4M3FN},
    {SCHEDX_CHECK_LIBRARY(quantize_cvt_mx_e5m2_words), SCHEDX_RECIPE_MXFP8, SCHEDX_E5M2},
};

// Runs a case through the runtime's binding of a quantize_fp8 variant (bf16 x, both outputs).
test::QuantizeRunner runner_of(const schedx::Variant &v) {
    return [&v](const test::QuantizeCase &c, test::QuantizeBuffers &b) {
        const schedx::QuantizeCall args{b.x->data(), c.m, c.k, c.ldx, 2, c.opt,
                                        b.rows->data(), b.cols->data(), c.ld_rows, c.ld_cols,
                                        b.rows_scale->data(), b.cols_scale->data(),
                                        schedx::scale_shape(c.opt.recipe, c.m, c.k, false),
                                        schedx::scale_shape(c.opt.recipe, c.m, c.k, true),
                                        c.opt.recipe == SCHEDX_RECIPE_MXFP8 ? 1 : 4};
        schedx::PipelineCall call(v, nullptr);
        schedx::bind(call, args);
        return call.run();
    };
}

}  // namespace

TEST_CASE("fp8 conversion stand-in: the PTX ISA's cvt.rn.satfinite on named values") {
    CHECK(cvt_rn_satfinite(448.0f, false) == 0x7E);
    CHECK(cvt_rn_satfinite(464.0f, false) == 0x7E);  // halfway to 480 (not e4m3fn): saturates
    CHECK(cvt_rn_satfinite(-1e30f, false) == 0xFE);
    CHECK(cvt_rn_satfinite(-std::numeric_limits<float>::infinity(), true) == 0xFB);
    CHECK(cvt_rn_satfinite(0x1p100f, true) == 0x7B);
    CHECK(cvt_rn_satfinite(std::numeric_limits<float>::quiet_NaN(), true) == 0x7F);
    CHECK(cvt_rn_satfinite(-0.0f, false) == 0x80);
    CHECK(cvt_rn_satfinite(std::ldexp(1.0f, -10), false) == 0x00);  // half the smallest subnormal: ties to 0
    CHECK(cvt_rn_satfinite(std::ldexp(3.0f, -10), false) == 0x02);  // 1.5 subnormal steps: ties to even 2
    CHECK(cvt_rn_satfinite(1.0625f, false) == 0x38);  // between 1 and 1.125: ties to 1 (even)
    CHECK(cvt_rn_satfinite(1.1875f, false) == 0x3A);  // between 1.125 and 1.25: ties to 1.25 (even)
    CHECK(schedx_ptx_cvt_e4m3x2(1.0f, -2.0f) == uint16_t(0xC0 << 8 | 0x38));
}

TEST_CASE("quantize_fp8 tiled algorithm with the hardware conversion, on the CPU: every bf16 pattern, special blocks") {
    for (const CvtLibrary &lib : kLibraries) {
        const schedx::Variant v = test::check_library_variant(lib.library, "quantize_fp8");
        const std::string lib_name = lib.library.name;
        CAPTURE(lib_name);
        std::vector<schedx_quantize_fp8_options> options;
        if (lib.recipe == SCHEDX_RECIPE_MXFP8) {
            for (schedx_mx_scale_mode mode : {SCHEDX_MX_FLOOR, SCHEDX_MX_RCEIL}) {
                options.push_back({lib.recipe, lib.format, 0, 0.0f, mode});
            }
        } else {
            for (int pow2 : {0, 1}) options.push_back({lib.recipe, lib.format, pow2, 0.0f, SCHEDX_MX_FLOOR});
        }
        for (const schedx_quantize_fp8_options &o : options) {
            CAPTURE(o.pow2_scales);
            CAPTURE(int(o.mx_mode));
            // 512 x 512: whole tiles, and block2d's scale arrays without padding.
            for (test::QuantizeInput kind :
                 {test::QuantizeInput::all_patterns, test::QuantizeInput::specials, test::QuantizeInput::mixed}) {
                CAPTURE(int(kind));
                test::QuantizeCase c{512, 512};
                c.opt = o;
                CHECK(test::check_quantize(
                          c, [kind](int64_t i, int64_t j) { return test::quantize_input_bits(SCHEDX_BF16, kind, i, j); },
                          runner_of(v)) == "");
            }
        }
    }
}

TEST_CASE("axiswise tiles on the CPU: the maxima pass, then the codes pass, every bf16 pattern, special rows and columns") {
    const schedx::Variant maxima = test::check_library_variant(SCHEDX_CHECK_LIBRARY(quantize_axis_maxima), "quantize_fp8");
    for (const auto &[codes_library, format] : {std::pair{SCHEDX_CHECK_LIBRARY(quantize_axis_codes_e4m3), SCHEDX_E4M3FN},
                                                std::pair{SCHEDX_CHECK_LIBRARY(quantize_axis_codes_e5m2), SCHEDX_E5M2}}) {
        const schedx::Variant codes = test::check_library_variant(codes_library, "quantize_fp8");
        const std::string lib_name = codes_library.name;
        CAPTURE(lib_name);
        // As runtime/quantize_fp8.cpp runs them: maxima zeroed, sinks of a byte per tile row or column.
        const test::QuantizeRunner runner = [&](const test::QuantizeCase &c, test::QuantizeBuffers &b) {
            const schedx::QuantizeCall args{b.x->data(), c.m, c.k, c.ldx, 2, c.opt,
                                            b.rows->data(), b.cols->data(), c.ld_rows, c.ld_cols,
                                            b.rows_scale->data(), b.cols_scale->data(),
                                            schedx::scale_shape(c.opt.recipe, c.m, c.k, false),
                                            schedx::scale_shape(c.opt.recipe, c.m, c.k, true), 4};
            std::vector<uint32_t> row_max(size_t(c.m), 0), col_max(size_t(c.k), 0);
            std::vector<uint8_t> row_sink(size_t(c.m * (c.k / 128))), col_sink(size_t(c.k * (c.m / 128)));
            schedx::PipelineCall first(maxima, nullptr);
            schedx::bind(first, args);
            first.bind_address("row_max_address", row_max.data());
            first.bind_address("col_max_address", col_max.data());
            first.bind_matrix("row_sink", row_sink.data(), c.k / 128, c.m, c.m, 1);
            first.bind_matrix("col_sink", col_sink.data(), c.m / 128, c.k, c.k, 1);
            schedx_status s = first.run();
            if (s != SCHEDX_OK) return s;
            schedx::PipelineCall second(codes, nullptr);
            schedx::bind(second, args);
            second.bind_vector("row_max", row_max.data(), c.m, 4);
            second.bind_vector("col_max", col_max.data(), c.k, 4);
            return second.run();
        };
        for (int pow2 : {0, 1}) {
            CAPTURE(pow2);
            for (test::QuantizeInput kind :
                 {test::QuantizeInput::all_patterns, test::QuantizeInput::axis_lines, test::QuantizeInput::mixed}) {
                CAPTURE(int(kind));
                test::QuantizeCase c{256, 384};
                c.opt = {SCHEDX_RECIPE_AXISWISE, format, pow2, 0.0f, SCHEDX_MX_FLOOR};
                CHECK(test::check_quantize(
                          c, [kind](int64_t i, int64_t j) { return test::quantize_input_bits(SCHEDX_BF16, kind, i, j); },
                          runner) == "");
            }
        }
    }
}
