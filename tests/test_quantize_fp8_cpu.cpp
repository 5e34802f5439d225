// CPU variants of schedx_quantize_fp8 (blockwise 1x128 / 128x128, MXFP8, axiswise in one
// pipeline and in two passes) against the independent reference of quantize_fp8_case.h,
// bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "quantize_fp8_case.h"
#include "quantize_inputs.h"

using test::check_quantize;
using test::QuantizeCase;
using test::QuantizeInput;

namespace {

const schedx_fp8_recipe kRecipes[] = {SCHEDX_RECIPE_BLOCK_1X128, SCHEDX_RECIPE_BLOCK_128X128, SCHEDX_RECIPE_MXFP8,
                                      SCHEDX_RECIPE_AXISWISE};
const schedx_dtype kDtypes[] = {SCHEDX_BF16, SCHEDX_FP16, SCHEDX_FP32};
const schedx_fp8_format kFormats[] = {SCHEDX_E4M3FN, SCHEDX_E5M2};

// Whole blocks, ragged edges of both block sizes, a single element, a single row/column.
struct Shape {
    int64_t m, k;
};
const Shape kShapes[] = {{256, 256}, {130, 257}, {257, 130}, {33, 65}, {1, 1}, {1, 300}, {300, 1}, {96, 160}};

std::function<uint32_t(int64_t, int64_t)> input(schedx_dtype t, QuantizeInput kind) {
    return [t, kind](int64_t i, int64_t j) { return test::quantize_input_bits(t, kind, i, j); };
}

// The option sets each recipe is checked under.
std::vector<schedx_quantize_fp8_options> options_for(schedx_fp8_recipe r, schedx_fp8_format f) {
    if (r == SCHEDX_RECIPE_MXFP8) return {{r, f, 0, 0.0f, SCHEDX_MX_FLOOR}, {r, f, 0, 0.0f, SCHEDX_MX_RCEIL}};
    // torchao's rowwise default (power-of-two scales) and exact scales.
    if (r == SCHEDX_RECIPE_AXISWISE) return {{r, f, 1, 0.0f, SCHEDX_MX_FLOOR}, {r, f, 0, 0.0f, SCHEDX_MX_FLOOR}};
    // TE's default (pow2, epsilon 0), exact scales, and an epsilon that clamps small blocks.
    return {{r, f, 1, 0.0f, SCHEDX_MX_FLOOR}, {r, f, 0, 0.0f, SCHEDX_MX_FLOOR}, {r, f, 0, 0x1p-20f, SCHEDX_MX_FLOOR}};
}

std::string describe(const QuantizeCase &c) {
    return "recipe " + std::to_string(c.opt.recipe) + " dtype " + std::to_string(c.dtype) + " format " +
           std::to_string(c.opt.format) + " pow2 " + std::to_string(c.opt.pow2_scales) + " eps " +
           std::to_string(c.opt.epsilon) + " mx_mode " + std::to_string(c.opt.mx_mode) + " " + std::to_string(c.m) +
           "x" + std::to_string(c.k);
}

}  // namespace

TEST_CASE("every recipe, dtype, format and option set on mixed, special and tiny inputs, ragged shapes") {
    for (schedx_fp8_recipe r : kRecipes) {
        for (schedx_dtype dt : kDtypes) {
            for (schedx_fp8_format f : kFormats) {
                for (const schedx_quantize_fp8_options &o : options_for(r, f)) {
                    for (const Shape &s : kShapes) {
                        for (QuantizeInput kind : {QuantizeInput::mixed, QuantizeInput::specials, QuantizeInput::tiny_blocks}) {
                            QuantizeCase c{s.m, s.k};
                            c.dtype = dt;
                            c.opt = o;
                            CAPTURE(describe(c));
                            CAPTURE(int(kind));
                            CHECK(check_quantize(c, input(dt, kind)) == "");
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("every bf16 and fp16 bit pattern inside 1x128, 128x128 and MX blocks") {
    for (schedx_fp8_recipe r : kRecipes) {
        for (schedx_dtype dt : {SCHEDX_BF16, SCHEDX_FP16}) {
            for (schedx_fp8_format f : kFormats) {
                for (const schedx_quantize_fp8_options &o : options_for(r, f)) {
                    QuantizeCase c{256, 256};
                    c.dtype = dt;
                    c.opt = o;
                    CAPTURE(describe(c));
                    CHECK(check_quantize(c, input(dt, QuantizeInput::all_patterns)) == "");
                }
            }
        }
    }
}

TEST_CASE("one orientation only, padded leading dimensions, and the variant that ran") {
    for (schedx_fp8_recipe r : kRecipes) {
        for (schedx_dtype dt : kDtypes) {
            QuantizeCase c{130, 200, 203, 211, 137};
            c.dtype = dt;
            c.opt = options_for(r, SCHEDX_E4M3FN).front();
            CAPTURE(describe(c));
            CHECK(check_quantize(c, input(dt, QuantizeInput::specials)) == "");
            const std::string recipe = r == SCHEDX_RECIPE_MXFP8      ? "mx"
                                       : r == SCHEDX_RECIPE_AXISWISE ? "axis"
                                       : r == SCHEDX_RECIPE_BLOCK_1X128 ? "block1d"
                                                                        : "block2d";
            const std::string type = dt == SCHEDX_BF16 ? "bf16" : dt == SCHEDX_FP16 ? "fp16" : "fp32";
            // 130 x 200 is below one 128 x 256 tile: untuned dispatch takes the untiled variant.
            const std::string both = r == SCHEDX_RECIPE_AXISWISE ? "_2pass_s32_cpu" : "_cpu";
            CHECK(schedx_last_variant("quantize_fp8") == "quantize_fp8_" + recipe + "_" + type + both);
            c.cols = false;
            CHECK(check_quantize(c, input(dt, QuantizeInput::mixed)) == "");
            CHECK(schedx_last_variant("quantize_fp8") == "quantize_fp8_" + recipe + "_" + type + "_rows_cpu");
            c.cols = true;
            c.rows = false;
            CHECK(check_quantize(c, input(dt, QuantizeInput::mixed)) == "");
            CHECK(schedx_last_variant("quantize_fp8") == "quantize_fp8_" + recipe + "_" + type + "_cols_cpu");
        }
    }
}

// Every CPU variant in the registry, forced (dispatch reaches only the first of each family):
// both formats, every option set, ragged shapes, mixed and special inputs.
TEST_CASE("every CPU quantize_fp8 variant, forced: both formats, every option set, ragged shapes") {
    const std::vector<schedx_variant_info> infos = test::variant_infos("quantize_fp8", "cpu");
    REQUIRE(infos.size() >= 30);
    for (const schedx_variant_info &info : infos) {
        auto p = test::params_of(info);
        const schedx_fp8_recipe r = p["recipe"] == "mx"        ? SCHEDX_RECIPE_MXFP8
                                    : p["recipe"] == "axis"    ? SCHEDX_RECIPE_AXISWISE
                                    : p["recipe"] == "block2d" ? SCHEDX_RECIPE_BLOCK_128X128
                                                               : SCHEDX_RECIPE_BLOCK_1X128;
        const schedx_dtype dt = p["in_type"] == "fp32" ? SCHEDX_FP32 : (p["in_type"] == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16);
        CAPTURE(info.name);
        REQUIRE(schedx_force_variant("quantize_fp8", info.name) == SCHEDX_OK);
        for (schedx_fp8_format f : kFormats) {
            for (const schedx_quantize_fp8_options &o : options_for(r, f)) {
                // The tiled variants also on ragged tiles, several each way (300 x 520 in 128 x 256).
                std::vector<Shape> shapes{{130, 257}, {33, 65}, {1, 1}, {1, 300}};
                if (p.count("tile")) shapes.push_back({300, 520});
                for (const Shape &s : shapes) {
                    for (QuantizeInput kind : {QuantizeInput::mixed, QuantizeInput::specials}) {
                        QuantizeCase c{s.m, s.k};
                        c.dtype = dt;
                        c.opt = o;
                        c.rows = p["outputs"] != "cols";
                        c.cols = p["outputs"] != "rows";
                        CAPTURE(describe(c));
                        CAPTURE(int(kind));
                        CHECK(check_quantize(c, input(dt, kind)) == "");
                        CHECK(std::string(schedx_last_variant("quantize_fp8")) == info.name);
                    }
                }
            }
        }
    }
    CHECK(schedx_force_variant("quantize_fp8", nullptr) == SCHEDX_OK);
}

// Ragged against the two-pass variants' 32-row strips (M = 31, 33, 65, 1) and against vector
// widths along K, single rows and columns, and a strip count above one per thread.
const Shape kAxisShapes[] = {{1, 1}, {1, 300}, {300, 1}, {31, 17}, {33, 65}, {65, 33}, {130, 257}, {257, 130}, {64, 64}};

// Dispatch takes the two-pass variants first; the one-pipeline ones are forced here too.
TEST_CASE("axiswise, both outputs, in one pipeline and in two passes: every dtype, format, pow2 on and off, ragged strips, NaN / inf / zero / subnormal lines") {
    int checked = 0, two_pass = 0;
    for (const schedx_variant_info &info : test::variant_infos("quantize_fp8", "cpu")) {
        auto p = test::params_of(info);
        if (p["recipe"] != "axis" || p.count("outputs")) continue;
        two_pass += p["axis_pass"] == "first";
        const schedx_dtype dt = p["in_type"] == "fp32" ? SCHEDX_FP32 : (p["in_type"] == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16);
        CAPTURE(info.name);
        REQUIRE(schedx_force_variant("quantize_fp8", info.name) == SCHEDX_OK);
        for (schedx_fp8_format f : kFormats) {
            for (const schedx_quantize_fp8_options &o : options_for(SCHEDX_RECIPE_AXISWISE, f)) {
                for (const Shape &s : kAxisShapes) {
                    for (QuantizeInput kind : {QuantizeInput::mixed, QuantizeInput::specials, QuantizeInput::tiny_blocks,
                                               QuantizeInput::axis_lines}) {
                        QuantizeCase c{s.m, s.k};
                        c.dtype = dt;
                        c.opt = o;
                        CAPTURE(describe(c));
                        CAPTURE(int(kind));
                        CHECK(check_quantize(c, input(dt, kind)) == "");
                        CHECK(schedx_last_variant("quantize_fp8") == std::string(info.name));
                    }
                }
            }
        }
        // Padded leading dimensions (x's padding holds NaN: read, it would show).
        QuantizeCase c{70, 200, 203, 211, 77};
        c.dtype = dt;
        c.opt = options_for(SCHEDX_RECIPE_AXISWISE, SCHEDX_E4M3FN).front();
        CHECK(check_quantize(c, input(dt, QuantizeInput::axis_lines)) == "");
        if (dt != SCHEDX_FP32) {
            c = QuantizeCase{256, 256};
            c.dtype = dt;
            for (const schedx_quantize_fp8_options &o : options_for(SCHEDX_RECIPE_AXISWISE, SCHEDX_E5M2)) {
                c.opt = o;
                CHECK(check_quantize(c, input(dt, QuantizeInput::all_patterns)) == "");
            }
        }
        checked++;
    }
    CHECK(checked == 6);
    CHECK(two_pass == 3);
    schedx_force_variant("quantize_fp8", nullptr);
}

// The runtime runs a first-pass variant's second pass from the quantize_fp8_axis_cols list
// by device and dtype: a missing one fails only on that device (the GPU's is not run here).
TEST_CASE("axiswise in two passes: every first-pass variant has a second pass of its device and dtype") {
    int firsts = 0;
    for (const char *device : {"cpu", "cuda"}) {
        const std::vector<schedx_variant_info> seconds = test::all_variant_infos("quantize_fp8_axis_cols", device);
        for (const schedx_variant_info &info : test::variant_infos("quantize_fp8", device)) {
            auto p = test::params_of(info);
            if (p["axis_pass"] != "first") continue;
            firsts++;
            CAPTURE(info.name);
            CHECK(std::any_of(seconds.begin(), seconds.end(), [&](const schedx_variant_info &s) {
                auto q = test::params_of(s);
                return q["axis_pass"] == "second" && q["in_type"] == p["in_type"];
            }));
        }
    }
    CHECK(firsts >= 6);
}

TEST_CASE("scale array shapes and padding") {
    int64_t r = 0, c = 0;
    auto shape = [&](schedx_fp8_recipe rec, int64_t m, int64_t k, int colwise) {
        REQUIRE(schedx_quantize_fp8_scale_shape(rec, m, k, colwise, &r, &c) == SCHEDX_OK);
        return std::pair{r, c};
    };
    // TE's GEMM-ready shapes: 1D [ceil(K/128)][pad4(M)] and [ceil(M/128)][pad4(K)].
    CHECK(shape(SCHEDX_RECIPE_BLOCK_1X128, 130, 257, 0) == std::pair<int64_t, int64_t>{3, 132});
    CHECK(shape(SCHEDX_RECIPE_BLOCK_1X128, 130, 257, 1) == std::pair<int64_t, int64_t>{2, 260});
    // 2D [ceil(M/128)][pad4(ceil(K/128))] and [ceil(K/128)][pad4(ceil(M/128))].
    CHECK(shape(SCHEDX_RECIPE_BLOCK_128X128, 130, 257, 0) == std::pair<int64_t, int64_t>{2, 4});
    CHECK(shape(SCHEDX_RECIPE_BLOCK_128X128, 130, 257, 1) == std::pair<int64_t, int64_t>{3, 4});
    // MXFP8 [M][ceil(K/32)] and [K][ceil(M/32)], no padding.
    CHECK(shape(SCHEDX_RECIPE_MXFP8, 130, 257, 0) == std::pair<int64_t, int64_t>{130, 9});
    CHECK(shape(SCHEDX_RECIPE_MXFP8, 130, 257, 1) == std::pair<int64_t, int64_t>{257, 5});
    // Axiswise [M][1] and [1][K].
    CHECK(shape(SCHEDX_RECIPE_AXISWISE, 130, 257, 0) == std::pair<int64_t, int64_t>{130, 1});
    CHECK(shape(SCHEDX_RECIPE_AXISWISE, 130, 257, 1) == std::pair<int64_t, int64_t>{1, 257});
    CHECK(shape(SCHEDX_RECIPE_BLOCK_1X128, 0, 0, 0) == std::pair<int64_t, int64_t>{0, 0});
    // check_quantize compares every entry, padding included (0.0f): shapes whose padded
    // extents differ from the real ones.
    for (schedx_fp8_recipe rec : {SCHEDX_RECIPE_BLOCK_1X128, SCHEDX_RECIPE_BLOCK_128X128}) {
        QuantizeCase q{5, 3 * 128 + 1};
        q.opt.recipe = rec;
        CHECK(check_quantize(q, input(SCHEDX_BF16, QuantizeInput::mixed)) == "");
    }
}

// Bad arguments: tests/test_errors.cpp (status, message, nothing written).
TEST_CASE("empty tensors are valid: nothing read or written, even through NULL data pointers") {
    std::vector<uint16_t> x(64 * 64, 0x3F80);
    std::vector<uint8_t> rows(64 * 64), cols(64 * 64);
    std::vector<float> rs(64 * 64), cs(64 * 64);
    schedx_quantize_fp8_options o{SCHEDX_RECIPE_BLOCK_1X128, SCHEDX_E4M3FN, 1, 0.0f, SCHEDX_MX_FLOOR};
    CHECK(schedx_quantize_fp8(x.data(), 64, 64, 64, SCHEDX_BF16, &o, rows.data(), 64, rs.data(), cols.data(), 64,
                              cs.data(), SCHEDX_DEVICE_CPU, nullptr) == SCHEDX_OK);
    std::fill(rows.begin(), rows.end(), 0xA5);
    CHECK(schedx_quantize_fp8(nullptr, 0, 64, 64, SCHEDX_BF16, &o, rows.data(), 64, rs.data(), cols.data(), 1,
                              cs.data(), SCHEDX_DEVICE_CPU, nullptr) == SCHEDX_OK);
    CHECK(schedx_quantize_fp8(nullptr, 64, 0, 0, SCHEDX_BF16, &o, rows.data(), 0, rs.data(), nullptr, 0, nullptr,
                              SCHEDX_DEVICE_CPU, nullptr) == SCHEDX_OK);
    CHECK(rows[0] == 0xA5);
}
