// Every CUDA quantize_fp8 variant against the independent reference of
// quantize_fp8_case.h, bit for bit, on mixed, special and tiny-block inputs (subnormals
// inside blocks: the GPU's ftz must not show; axiswise also NaN / inf / zero / subnormal
// rows and columns), ragged and whole-tile shapes. The axiswise two-pass variants run both
// passes (their second from quantize_fp8_axis_cols). The hardware-encoder variants
// (encoder=ptx, min_sm 89) also take every 16-bit pattern, and below sm_89 must refuse to
// run. Exits 77 (ctest: skipped) without a CUDA device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "quantize_fp8_case.h"
#include "quantize_inputs.h"

using test::check_quantize;
using test::DeviceCopy;
using test::params_of;
using test::QuantizeBuffers;
using test::QuantizeCase;
using test::QuantizeInput;
using test::test_stream;

namespace {

schedx_status quantize_on_cuda(const QuantizeCase &c, QuantizeBuffers &b) {
    DeviceCopy x(b.x), rows(b.rows), rows_scale(b.rows_scale), cols(b.cols), cols_scale(b.cols_scale);
    // The uploads ran on the legacy default stream, which a non-blocking stream does not wait for.
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const schedx_status s = schedx_quantize_fp8(
        x.ptr(), c.m, c.k, c.ldx, c.dtype, &c.opt, c.rows ? rows.ptr() : nullptr, c.ld_rows,
        c.rows ? rows_scale.ptr() : nullptr, c.cols ? cols.ptr() : nullptr, c.ld_cols,
        c.cols ? cols_scale.ptr() : nullptr, SCHEDX_DEVICE_CUDA, test_stream);
    if (s != SCHEDX_OK) return s;
    REQUIRE(cudaStreamSynchronize(test_stream) == cudaSuccess);
    for (DeviceCopy *d : {&rows, &rows_scale, &cols, &cols_scale}) d->back();
    for (DeviceCopy *d : {&x, &rows, &rows_scale, &cols, &cols_scale}) {
        CHECK_MESSAGE(d->guards_intact(), "device guard bytes overwritten");
    }
    return s;
}

schedx_fp8_recipe recipe_of(const std::string &p) {
    if (p == "axis") return SCHEDX_RECIPE_AXISWISE;
    return p == "mx" ? SCHEDX_RECIPE_MXFP8 : p == "block2d" ? SCHEDX_RECIPE_BLOCK_128X128 : SCHEDX_RECIPE_BLOCK_1X128;
}

}  // namespace

TEST_CASE("every CUDA quantize_fp8 variant equals the reference bit for bit") {
    int checked = 0;
    for (const schedx_variant_info &info : test::variant_infos("quantize_fp8", "cuda")) {
        auto p = params_of(info);
        const schedx_dtype dt = p["in_type"] == "fp32" ? SCHEDX_FP32 : (p["in_type"] == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16);
        const std::string outputs = p.count("outputs") ? p["outputs"] : "both";
        const bool tiled = p["schedule"] == "cuda_tiled";
        const schedx_fp8_recipe r = recipe_of(p["recipe"]);
        // The tiled axiswise first pass runs its second, a hardware-encoder variant.
        const bool hardware_encoder = p["encoder"] == "ptx" || p["axis_pass"] == "maxima";
        const bool runs_here = !hardware_encoder || test::device_sm() >= 89;
        CAPTURE(info.name);
        REQUIRE(schedx_force_variant("quantize_fp8", info.name) == SCHEDX_OK);
        // The tiled axiswise first pass: each second pass of its dtype in turn (SCHEDX_TEST_VARIANTS
        // narrows the first passes, never their second ones).
        std::vector<std::string> second_passes{""};
        if (p["axis_pass"] == "maxima") {
            second_passes.clear();
            for (const schedx_variant_info &codes : test::all_variant_infos("quantize_fp8_axis_codes", "cuda")) {
                if (params_of(codes)["in_type"] == p["in_type"]) second_passes.push_back(codes.name);
            }
            REQUIRE(!second_passes.empty());
        }
        for (const std::string &second : second_passes) {
            CAPTURE(second);
            REQUIRE(schedx_force_variant("quantize_fp8_axis_codes", second.empty() ? nullptr : second.c_str()) == SCHEDX_OK);
            struct Shape {
                int64_t m, k, ldx, ld_rows, ld_cols;
            };
            // Tiled block2d takes multiples of 512 (its scale arrays then have no padding).
            std::vector<Shape> shapes{{256, 384, 0, 0, 0}, {384, 256, 400, 416, 400}};
            if (tiled && r == SCHEDX_RECIPE_BLOCK_128X128) shapes = {{512, 1024, 0, 0, 0}, {1024, 512, 528, 520, 1040}};
            if (!tiled) shapes.insert(shapes.end(), {{130, 257, 0, 0, 0}, {33, 65, 70, 71, 35}, {1, 1, 0, 0, 0}});
            if (test::quick_run()) shapes.resize(tiled ? 1 : 3);
            std::vector<schedx_fp8_format> formats{SCHEDX_E4M3FN, SCHEDX_E5M2};
            if (p.count("fp8")) formats = {p["fp8"] == "e5m2" ? SCHEDX_E5M2 : SCHEDX_E4M3FN};
            if (!second.empty()) formats = {second.find("_e5m2_") != std::string::npos ? SCHEDX_E5M2 : SCHEDX_E4M3FN};
            for (const Shape &s : shapes) {
                for (schedx_fp8_format f : formats) {
                    for (int mode = 0; mode < 2; mode++) {
                        QuantizeCase c{s.m, s.k, s.ldx, s.ld_rows, s.ld_cols};
                        c.dtype = dt;
                        c.rows = outputs != "cols";
                        c.cols = outputs != "rows";
                        // mode 0: TE's default (pow2) / MX FLOOR; mode 1: exact scales with an
                        // epsilon / MX RCEIL.
                        c.opt = {r, f, mode == 0, mode == 0 ? 0.0f : 0x1p-20f, mode == 0 ? SCHEDX_MX_FLOOR : SCHEDX_MX_RCEIL};
                        CAPTURE(s.m);
                        CAPTURE(s.k);
                        CAPTURE(int(f));
                        CAPTURE(mode);
                        std::vector<QuantizeInput> kinds{QuantizeInput::mixed, QuantizeInput::specials, QuantizeInput::tiny_blocks};
                        if (r == SCHEDX_RECIPE_AXISWISE) kinds.push_back(QuantizeInput::axis_lines);
                        if (hardware_encoder) kinds.push_back(QuantizeInput::all_patterns);
                        for (QuantizeInput kind : kinds) {
                            CAPTURE(int(kind));
                            const std::string result = check_quantize(
                                c, [&](int64_t i, int64_t j) { return test::quantize_input_bits(dt, kind, i, j); }, quantize_on_cuda);
                            if (!runs_here) {
                                // Below sm_89 the cvt instructions do not exist: dispatch refuses the forced variant.
                                CHECK(result.rfind("status " + std::to_string(SCHEDX_ERR_VARIANT_CANNOT_RUN), 0) == 0);
                                continue;
                            }
                            CHECK(result == "");
                            CHECK(schedx_last_variant("quantize_fp8") == std::string(info.name));
                        }
                    }
                }
            }
        }
        checked++;
    }
    CHECK(checked > 0);
    schedx_force_variant("quantize_fp8", nullptr);
    schedx_force_variant("quantize_fp8_axis_codes", nullptr);
}

TEST_CASE("dispatch takes a tiled variant for whole tiles and the general one for ragged shapes") {
    for (auto [m, k, want] : {std::tuple{256, 256, "cuda_tiled"}, std::tuple{130, 256, "cuda_general"}}) {
        QuantizeCase c{m, k};
        CAPTURE(m);
        CHECK(check_quantize(c, [](int64_t i, int64_t j) { return test::quantize_input_bits(SCHEDX_BF16, QuantizeInput::mixed, i, j); },
                             quantize_on_cuda) == "");
        CHECK(test::schedule_of_last("quantize_fp8") == want);
    }
}

int main(int argc, char **argv) { return test::cuda_test_main(argc, argv); }
