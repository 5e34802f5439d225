// Every CUDA cast+transpose variant against the independent reference, bit for bit, on
// exhaustive bf16/fp16 patterns, random values and ragged shapes. Exits 77 (ctest: skipped)
// without a CUDA device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <map>

#include "cast_transpose_case.h"
#include "cuda_test_support.h"

using test::CastTransposeBuffers;
using test::CastTransposeCase;
using test::check_cast_transpose;
using test::DeviceCopy;
using test::params_of;
using test::test_stream;

namespace {

// Through guarded device copies on test_stream.
schedx_status run_on_cuda(const CastTransposeCase &c, CastTransposeBuffers &b) {
    DeviceCopy x(b.x), scale(b.scale), rows(b.rows), cols(b.cols), amax(b.amax), scale_inv(b.scale_inv);
    // The uploads ran on the legacy default stream, which a non-blocking stream does not
    // wait for.
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    schedx_status s = schedx_cast_transpose_fp8(
        x.ptr(), c.m, c.k, c.ldx, c.dtype, scale.as<float>(), c.format, c.rows ? rows.ptr() : nullptr, c.ld_rows,
        c.cols ? cols.ptr() : nullptr, c.ld_cols, c.amax ? amax.as<float>() : nullptr,
        c.amax ? scale_inv.as<float>() : nullptr, SCHEDX_DEVICE_CUDA, test_stream);
    if (s != SCHEDX_OK) return s;
    REQUIRE(cudaStreamSynchronize(test_stream) == cudaSuccess);
    for (DeviceCopy *d : {&rows, &cols, &amax, &scale_inv}) d->back();
    for (DeviceCopy *d : {&x, &scale, &rows, &cols, &amax, &scale_inv}) {
        CHECK_MESSAGE(d->guards_intact(), "device guard bytes overwritten");
    }
    return s;
}

uint32_t all_patterns(int64_t i, int64_t j) { return uint32_t((i % 256) * 256 + j % 256); }
uint32_t random_bits(int64_t i, int64_t j) { return test::mix(uint32_t(i * 100003 + j)); }
// Random finite bf16/fp16 of all magnitudes the encoder distinguishes, or fp32 bits.
uint32_t random_half(int64_t i, int64_t j) { return random_bits(i, j) & 0xFFFF; }

}  // namespace

TEST_CASE("every CUDA cast_transpose variant equals the reference bit for bit") {
    int checked = 0;
    for (const schedx_variant_info &info : test::variant_infos("cast_transpose", "cuda")) {
        auto p = params_of(info);
        const schedx_dtype dt = p["in_type"] == "fp32" ? SCHEDX_FP32 : (p["in_type"] == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16);
        const std::string outputs = p.count("outputs") ? p["outputs"] : "both";
        const bool tiled = p["schedule"] == "cuda_tiled";
        CAPTURE(info.name);
        REQUIRE(schedx_force_variant("cast_transpose", info.name) == SCHEDX_OK);
        struct Shape {
            int64_t m, k, ldx, ld_rows, ld_cols;
        };
        std::vector<Shape> shapes{{256, 256, 320, 272, 288}};
        if (!test::quick_run()) shapes.insert(shapes.end(), {{256, 256, 0, 0, 0}, {512, 384, 0, 0, 0}});
        const bool autoscheduled = p.count("autoscheduler") > 0;
        int ran = 0;
        if (!tiled) {
            shapes.push_back({33, 65, 70, 67, 41});
            if (!test::quick_run()) {
                shapes.insert(shapes.end(), {{1, 1, 0, 0, 0}, {17, 33, 0, 0, 0}, {1, 1000, 0, 0, 0},
                                             {1000, 1, 0, 0, 0}, {4095, 4097, 0, 0, 0}});
            }
        }
        for (Shape s : shapes) {
            for (schedx_fp8_format f : {SCHEDX_E4M3FN, SCHEDX_E5M2}) {
                // Tiled variants are built for one format.
                if (p.count("fp8") && p["fp8"] != (f == SCHEDX_E5M2 ? "e5m2" : "e4m3")) continue;
                for (float scale : {1.0f, 448.0f / 3.7f, 0x1p-12f}) {
                    // The large ragged shape once per variant: its CPU reference dominates the run time.
                    if (s.m * s.k > 1000000 && (f != SCHEDX_E4M3FN || scale != 1.0f)) continue;
                    if (test::quick_run() && scale != 1.0f) continue;
                    CastTransposeCase c{s.m, s.k, s.ldx, s.ld_rows, s.ld_cols, dt, f, scale};
                    c.rows = outputs != "cols";
                    c.cols = outputs != "rows";
                    c.amax = p["with_amax"] == "true";
                    CAPTURE(s.m);
                    CAPTURE(s.k);
                    CAPTURE(f);
                    CAPTURE(scale);
                    auto bits = dt == SCHEDX_FP32 ? random_bits : (s.m * s.k >= 65536 ? all_patterns : random_half);
                    const std::string result = check_cast_transpose(c, bits, run_on_cuda);
                    // Autoscheduled variants refuse shapes their generated bounds do not accept.
                    if (autoscheduled && result.rfind("status 11:", 0) == 0) continue;
                    CHECK(result == "");
                    ran++;
                    const char *last = schedx_last_variant("cast_transpose");
                    CHECK(std::string(last ? last : "none") == info.name);
                    // The non-fused variants also serve amax through the abs_max pass (whose
                    // kernels a quick run sees through the general variants).
                    if (test::quick_run() && tiled) continue;
                    c.amax = true;
                    CHECK(check_cast_transpose(c, bits, run_on_cuda) == "");
                }
            }
        }
        CHECK(ran > 0);
        checked++;
    }
    REQUIRE(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
    CHECK(checked >= 7);
}

TEST_CASE("dispatch picks the aligned fast path and falls back for ragged shapes") {
    auto schedule_of_last = [] { return test::schedule_of_last("cast_transpose"); };
    CastTransposeCase aligned{512, 512, 0, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 2.0f};
    CHECK(check_cast_transpose(aligned, all_patterns, run_on_cuda) == "");
    CHECK(schedule_of_last() == "cuda_tiled");
    CastTransposeCase ragged{500, 512, 0, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 2.0f};
    CHECK(check_cast_transpose(ragged, all_patterns, run_on_cuda) == "");
    CHECK(schedule_of_last() == "cuda_general");
    CastTransposeCase odd_ld{512, 512, 513, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 2.0f};
    CHECK(check_cast_transpose(odd_ld, all_patterns, run_on_cuda) == "");
    CHECK(schedule_of_last() == "cuda_general");
}

int main(int argc, char **argv) { return test::cuda_test_main(argc, argv); }
