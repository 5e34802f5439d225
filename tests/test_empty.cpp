// Empty operands at the C ABI (M, K or N of 0, as an MoE expert without tokens gives): the
// call succeeds, reads nothing, writes only what an empty operator defines (amax 0 and
// scale_inv 1 / scale; w8_linear's y = 0 * scales + bias for K = 0), and every other byte,
// guard bytes included, keeps its poison.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

using test::Guarded;

namespace {

float as_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

}  // namespace

TEST_CASE("cast_transpose: M = 0 or K = 0 writes amax 0 and scale_inv 1 / scale, nothing else") {
    const struct {
        int64_t m, k;
    } shapes[] = {{0, 8}, {5, 0}, {0, 0}, {0, 1}, {1, 0}};
    for (const auto &shape : shapes) {
        for (schedx_dtype dtype : {SCHEDX_BF16, SCHEDX_FP16, SCHEDX_FP32}) {
            for (bool null_pointers : {false, true}) {
                CAPTURE(shape.m); CAPTURE(shape.k); CAPTURE(int(dtype)); CAPTURE(null_pointers);
                Guarded x(64), rows(64), cols(64), scale(4), amax(4), scale_inv(4);
                const float three = 3.0f;
                std::memcpy(scale.data(), &three, 4);
                const schedx_status s = schedx_cast_transpose_fp8(
                    null_pointers ? nullptr : x.data(), shape.m, shape.k, shape.k + 3, dtype, scale.as<float>(),
                    SCHEDX_E4M3FN, null_pointers ? nullptr : rows.data(), shape.k,
                    null_pointers ? nullptr : cols.data(), shape.m + 1, amax.as<float>(), scale_inv.as<float>(),
                    SCHEDX_DEVICE_CPU, nullptr);
                REQUIRE(s == SCHEDX_OK);
                CHECK(std::string(schedx_last_error()) == "");
                CHECK(*amax.as<float>() == 0.0f);
                CHECK(!std::signbit(*amax.as<float>()));
                CHECK(*scale_inv.as<float>() == 1.0f / 3.0f);
                CHECK(x.untouched());
                CHECK(rows.untouched());
                CHECK(cols.untouched());
                CHECK(amax.guards_intact());
                CHECK(scale_inv.guards_intact());
            }
        }
    }
}

TEST_CASE("cast_transpose: an empty call without amax (or dividing) writes nothing, rows-only and cols-only alike") {
    Guarded x(16), rows(16), cols(16), scale(4);
    const float one = 1.0f;
    std::memcpy(scale.data(), &one, 4);
    for (int outputs = 0; outputs < 3; outputs++) {
        CAPTURE(outputs);
        CHECK(schedx_cast_transpose_fp8(x.data(), 0, 4, 4, SCHEDX_BF16, scale.as<float>(), SCHEDX_E5M2,
                                        outputs != 2 ? rows.data() : nullptr, 4, outputs != 1 ? cols.data() : nullptr,
                                        1, nullptr, nullptr, SCHEDX_DEVICE_CPU, nullptr) == SCHEDX_OK);
        CHECK(schedx_cast_transpose_fp8_divide(outputs ? x.data() : nullptr, 3, 0, 0, SCHEDX_FP32, scale.as<float>(),
                                               SCHEDX_E4M3FN, outputs != 2 ? rows.data() : nullptr, 0,
                                               outputs != 1 ? cols.data() : nullptr, 3, SCHEDX_DEVICE_CPU,
                                               nullptr) == SCHEDX_OK);
    }
    CHECK(x.untouched());
    CHECK(rows.untouched());
    CHECK(cols.untouched());
}

TEST_CASE("w8_linear: M = 0 or N = 0 writes nothing") {
    const struct {
        int64_t m, n, k;
    } shapes[] = {{0, 4, 8}, {3, 0, 8}, {0, 0, 0}, {0, 4, 0}, {3, 0, 0}};
    for (const auto &shape : shapes) {
        for (bool null_pointers : {false, true}) {
            CAPTURE(shape.m); CAPTURE(shape.n); CAPTURE(shape.k); CAPTURE(null_pointers);
            Guarded x(64), w(64), scales(64), bias(64), y(64);
            const bool k_zero = shape.k == 0;
            // Pointers of empty operands may be NULL; scales are read only when N > 0.
            const schedx_status s = schedx_w8_linear(
                null_pointers && (shape.m == 0 || k_zero) ? nullptr : x.data(), shape.m, shape.k, shape.k, SCHEDX_BF16,
                null_pointers && (shape.n == 0 || k_zero) ? nullptr : w.as<int8_t>(), shape.n, shape.k,
                null_pointers && shape.n == 0 ? nullptr : scales.data(), SCHEDX_BF16,
                null_pointers ? nullptr : bias.data(), null_pointers ? nullptr : y.data(), shape.n + 2,
                SCHEDX_DEVICE_CPU, nullptr);
            REQUIRE(s == SCHEDX_OK);
            CHECK(std::string(schedx_last_error()) == "");
            for (Guarded *g : {&x, &w, &scales, &bias, &y}) CHECK(g->untouched());
        }
    }
}

TEST_CASE("w8_linear: K = 0 gives y = 0 * scales (+ bias), rounded once to x's dtype, padding untouched") {
    // bias values chosen at and around the rounding points of both half formats:
    // 1 + 2^-8 ties to even in bf16 (1.0), + 2^-20 rounds up (1 + 2^-7); fp16 likewise at 2^-11.
    const float bias_f32[4] = {1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, 1.0f + 0x1p-11f, 1.0f + 0x1p-11f + 0x1p-20f};
    const uint16_t want_bf16[4] = {0x3F80, 0x3F81, 0x3F80, 0x3F80};
    const uint16_t want_fp16[4] = {0x3C04, 0x3C04, 0x3C00, 0x3C01};
    const int64_t m = 3, n = 4, ldy = 6;
    // bf16 scales and bias: 2, -0.5, inf, NaN and 1 + 2^-7, -2 (exact in both halves).
    const uint16_t scales_bf16[4] = {0x4000, 0xBF00, 0x7F80, 0x7FC0}, bias_bf16[4] = {0x3F81, 0xC000, 0x3F80, 0x3F80};
    const uint16_t want_bf16_of_bf16[2] = {0x3F81, 0xC000}, want_fp16_of_bf16[2] = {0x3C08, 0xC000};
    for (schedx_dtype x_dtype : {SCHEDX_BF16, SCHEDX_FP16}) {
      for (schedx_dtype s_dtype : {SCHEDX_FP32, SCHEDX_BF16}) {
        if (x_dtype == SCHEDX_FP16 && s_dtype == SCHEDX_BF16) continue;  // fp16 x takes fp32 or fp16 scales
        for (bool with_bias : {false, true}) {
            CAPTURE(int(x_dtype)); CAPTURE(int(s_dtype)); CAPTURE(with_bias);
            Guarded scales(16), bias(16), y(m * ldy * 2);
            const float scale_values[4] = {2.0f, -0.5f, as_float(0x7F800000), as_float(0x7FC00000)};  // inf, NaN
            const bool bf16_scales = s_dtype == SCHEDX_BF16;
            std::memcpy(scales.data(), bf16_scales ? static_cast<const void *>(scales_bf16) : scale_values, bf16_scales ? 8 : 16);
            std::memcpy(bias.data(), bf16_scales ? static_cast<const void *>(bias_bf16) : bias_f32, bf16_scales ? 8 : 16);
            REQUIRE(schedx_w8_linear(nullptr, m, 0, 0, x_dtype, nullptr, n, 0, scales.data(), s_dtype,
                                     with_bias ? bias.data() : nullptr, y.data(), ldy, SCHEDX_DEVICE_CPU,
                                     nullptr) == SCHEDX_OK);
            const bool fp16 = x_dtype == SCHEDX_FP16;
            for (int64_t r = 0; r < m; r++) {
                for (int64_t c = 0; c < ldy; c++) {
                    CAPTURE(r); CAPTURE(c);
                    uint16_t got;
                    std::memcpy(&got, y.data() + 2 * (r * ldy + c), 2);
                    if (c >= n) {
                        CHECK(got == 0xA5A5);  // the caller's padding keeps its poison
                    } else if (c >= 2) {
                        // 0 * inf and 0 * NaN are NaN, whatever the bias.
                        CHECK((fp16 ? (got & 0x7C00) == 0x7C00 && (got & 0x3FF) : (got & 0x7F80) == 0x7F80 && (got & 0x7F)));
                    } else if (with_bias && bf16_scales) {
                        CHECK(got == (fp16 ? want_fp16_of_bf16[c] : want_bf16_of_bf16[c]));
                    } else if (with_bias) {
                        CHECK(got == (fp16 ? want_fp16[c] : want_bf16[c]));
                    } else {
                        CHECK((got & 0x7FFF) == 0);  // +0 or -0 (0 * -0.5)
                    }
                }
            }
            CHECK(y.guards_intact());
            // inputs are only read
            CHECK(std::memcmp(bias.data(), bf16_scales ? static_cast<const void *>(bias_bf16) : bias_f32, bf16_scales ? 8 : 16) == 0);
        }
      }
    }
}

TEST_CASE("quantize_fp8: M = 0 or K = 0 writes only the axiswise scales of amax 0, NULL outputs allowed") {
    const struct {
        int64_t m, k;
    } shapes[] = {{0, 8}, {5, 0}, {0, 0}};
    for (const auto &shape : shapes) {
        for (schedx_fp8_recipe recipe : {SCHEDX_RECIPE_BLOCK_1X128, SCHEDX_RECIPE_BLOCK_128X128, SCHEDX_RECIPE_MXFP8,
                                         SCHEDX_RECIPE_AXISWISE}) {
            for (int pow2 : {0, 1}) {
              for (schedx_fp8_format format : {SCHEDX_E4M3FN, SCHEDX_E5M2}) {
                for (bool null_pointers : {false, true}) {
                    CAPTURE(shape.m); CAPTURE(shape.k); CAPTURE(int(recipe)); CAPTURE(pow2); CAPTURE(null_pointers);
                    CAPTURE(int(format));
                    const schedx_quantize_fp8_options o{recipe, format, pow2, 0.0f, SCHEDX_MX_FLOOR};
                    Guarded x(64), rows(64), cols(64), rows_scale(64), cols_scale(64);
                    const schedx_status s = schedx_quantize_fp8(
                        null_pointers ? nullptr : x.data(), shape.m, shape.k, shape.k, SCHEDX_BF16, &o,
                        null_pointers ? nullptr : rows.data(), shape.k, rows_scale.data(),
                        null_pointers ? nullptr : cols.data(), shape.m, cols_scale.data(), SCHEDX_DEVICE_CPU, nullptr);
                    REQUIRE(s == SCHEDX_OK);
                    CHECK(x.untouched());
                    CHECK(rows.untouched());
                    CHECK(cols.untouched());
                    // Axiswise: rows_scale is [M][1], cols_scale [1][K]; the entries that exist
                    // hold torchao's amax_to_scale of 0 (amax clamped to 1e-12).
                    const int64_t entries[2] = {recipe == SCHEDX_RECIPE_AXISWISE ? shape.m : 0,
                                                recipe == SCHEDX_RECIPE_AXISWISE ? shape.k : 0};
                    float want = float((format == SCHEDX_E5M2 ? 57344.0 : 448.0) / 1e-12);
                    if (pow2) want = std::exp2(std::floor(std::log2(want)));
                    Guarded *arrays[2] = {&rows_scale, &cols_scale};
                    for (int i = 0; i < 2; i++) {
                        for (int64_t e = 0; e < entries[i]; e++) CHECK(arrays[i]->as<float>()[e] == want);
                        for (size_t b = size_t(entries[i]) * 4; b < arrays[i]->size(); b++) {
                            CHECK(arrays[i]->data()[b] == test::kPoison);
                        }
                        CHECK(arrays[i]->guards_intact());
                    }
                }
              }
            }
        }
    }
}
