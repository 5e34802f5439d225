// Every CUDA cast+transpose variant against the independent reference, bit for bit, on
// exhaustive bf16/fp16 patterns, random values and ragged shapes. Exits 77 (ctest: skipped)
// without a CUDA device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <utility>

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
    schedx_status s =
        c.current_scaling
            ? schedx_cast_transpose_fp8_current_scaling(x.ptr(), c.m, c.k, c.ldx, c.dtype, c.format, c.pow2_scales,
                                                        c.rows ? rows.ptr() : nullptr, c.ld_rows,
                                                        c.cols ? cols.ptr() : nullptr, c.ld_cols, amax.as<float>(),
                                                        scale.as<float>(), scale_inv.as<float>(), SCHEDX_DEVICE_CUDA,
                                                        test_stream)
        : c.divide
            ? schedx_cast_transpose_fp8_divide(x.ptr(), c.m, c.k, c.ldx, c.dtype, scale.as<float>(), c.format,
                                               c.rows ? rows.ptr() : nullptr, c.ld_rows, c.cols ? cols.ptr() : nullptr,
                                               c.ld_cols, SCHEDX_DEVICE_CUDA, test_stream)
            : schedx_cast_transpose_fp8(x.ptr(), c.m, c.k, c.ldx, c.dtype, scale.as<float>(), c.format,
                                        c.rows ? rows.ptr() : nullptr, c.ld_rows, c.cols ? cols.ptr() : nullptr,
                                        c.ld_cols, c.amax ? amax.as<float>() : nullptr,
                                        c.amax ? scale_inv.as<float>() : nullptr, SCHEDX_DEVICE_CUDA, test_stream);
    if (s != SCHEDX_OK) return s;
    REQUIRE(cudaStreamSynchronize(test_stream) == cudaSuccess);
    for (DeviceCopy *d : {&rows, &cols, &amax, &scale, &scale_inv}) d->back();
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
        const bool tiled = p["schedule"] == "cuda_tiled", element_io = p["io"] == "element";
        const bool skinny = p["schedule"] == "cuda_skinny", along_k = p["long_dim"] != "m";
        CAPTURE(info.name);
        REQUIRE(schedx_force_variant("cast_transpose", info.name) == SCHEDX_OK);
        struct Shape {
            int64_t m, k, ldx, ld_rows, ld_cols;
        };
        std::vector<Shape> shapes;
        if (!skinny) shapes.push_back({256, 256, 320, 272, 288});
        if (!test::quick_run() && !skinny) shapes.insert(shapes.end(), {{256, 256, 0, 0, 0}, {512, 384, 0, 0, 0}});
        const bool autoscheduled = p.count("autoscheduler") > 0;
        int ran = 0;
        if (skinny) {
            // The short dimension 1, 7, 16 and 63 (the most it takes) against a long one of 1,
            // 300 (a block and a partial one), 4096 and 8192, tight and padded.
            for (Shape s : {Shape{1, 8192, 0, 0, 0}, Shape{7, 300, 301, 303, 9}, Shape{16, 4096, 4100, 4099, 17},
                            Shape{63, 1000, 1001, 1003, 65}, Shape{1, 1, 0, 0, 0}}) {
                shapes.push_back(along_k ? s : Shape{s.k, s.m, s.m + (s.ldx ? 2 : 0), s.m + (s.ldx ? 5 : 0),
                                                     s.k + (s.ldx ? 3 : 0)});
            }
        } else if (element_io) {
            // Rows aligned to the element only: odd K and ragged M, dense (shifted tiles start
            // at 2-byte aligned x and byte-aligned rows and cols), odd leading dimensions, one
            // tile exactly, and the dense 2999x4001 and 4097x4096.
            shapes.insert(shapes.end(), {{129, 67, 0, 0, 0}, {65, 130, 131, 133, 67}});
            if (!test::quick_run()) {
                shapes.insert(shapes.end(), {{64, 64, 65, 67, 69}, {191, 255, 0, 0, 0}, {2999, 4001, 0, 0, 0},
                                             {4097, 4096, 0, 0, 0}});
            }
        } else if (tiled) {
            // Ragged M and K in 16-byte steps: whole tiles plus the last tile row and column
            // shifted inwards (three and four launches), tight and padded.
            shapes.push_back({272, 208, 0, 0, 0});
            if (!test::quick_run()) shapes.insert(shapes.end(), {{400, 256, 0, 0, 0}, {336, 400, 416, 432, 352}});
        } else {
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
                    c.divide = p["scale_by"] == "divide";
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
                    if ((test::quick_run() && tiled) || c.divide) continue;
                    c.amax = true;
                    CHECK(check_cast_transpose(c, bits, run_on_cuda) == "");
                }
            }
        }
        CHECK(ran > 0);
        checked++;
    }
    REQUIRE(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
    if (test::full_variant_list()) CHECK(checked >= 7);
}

// The divide variants on every bf16 and fp16 pattern (fp32: each as a bf16's upper half and as
// its low half) over divisors where x * (1 / s) gives other fp8 codes, both formats a variant
// is built for: tiles and the general variants on 256 x 256, skinny ones on 16 x 4096 (4096 x 16).
TEST_CASE("every CUDA divide variant equals x / s in IEEE fp32, then the fp8 encode, bit for bit") {
    int checked = 0;
    for (const schedx_variant_info &info : test::variant_infos("cast_transpose", "cuda")) {
        auto p = params_of(info);
        if (p["scale_by"] != "divide") continue;
        const schedx_dtype dt = p["in_type"] == "fp32" ? SCHEDX_FP32 : (p["in_type"] == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16);
        const bool skinny = p["schedule"] == "cuda_skinny";
        const int64_t m = skinny ? (p["long_dim"] == "m" ? 4096 : 16) : 256, k = 65536 / m;
        CAPTURE(info.name);
        REQUIRE(schedx_force_variant("cast_transpose", info.name) == SCHEDX_OK);
        for (schedx_fp8_format f : {SCHEDX_E4M3FN, SCHEDX_E5M2}) {
            if (p.count("fp8") && p["fp8"] != (f == SCHEDX_E5M2 ? "e5m2" : "e4m3")) continue;
            for (float s : test::kDivisors) {
                for (int shift : dt == SCHEDX_FP32 ? std::vector<int>{16, 0} : std::vector<int>{0}) {
                    CAPTURE(f);
                    CAPTURE(s);
                    CAPTURE(shift);
                    CastTransposeCase c{m, k, 0, 0, 0, dt, f, s};
                    c.divide = true;
                    c.rows = p["outputs"] != "cols";
                    c.cols = p["outputs"] != "rows";
                    CHECK(check_cast_transpose(c, [k, shift](int64_t i, int64_t j) { return uint32_t(i * k + j) << shift; },
                                               run_on_cuda) == "");
                    const char *last = schedx_last_variant("cast_transpose");
                    CHECK(std::string(last ? last : "none") == info.name);
                }
            }
        }
        checked++;
    }
    REQUIRE(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
    if (test::full_variant_list()) CHECK(checked == 23);
}

// The fused-amax variants take the maximum by atomics in the caller's amax, which each
// call zeroes on its stream first: a call after a larger maximum, or one on another
// stream in flight at the same time, must still report its own. Every fused-amax tiled variant,
// forced, alternating two streams with no synchronization between calls; NaN, infinity,
// zero and subnormals.
TEST_CASE("fused amax: successive calls on two streams each report their own maximum") {
    const int64_t m = 256, k = 384;
    struct Input {
        uint16_t fill, peak;  // bits of every element, and of one element per call
        uint32_t amax;        // float bits
    };
    const std::map<std::string, std::vector<Input>> inputs{
        {"bf16",
         {{0x3F80, 0xC47A, 0x447A0000},    // 1 and -1000
          {0x3E80, 0x3F00, 0x3F000000},    // 0.25 and 0.5: below the call before
          {0x3E80, 0x7FC0, 0x7FC00000},    // NaN
          {0x0000, 0x8000, 0x00000000},    // zeros
          {0x3E80, 0xFF80, 0x7F800000},    // -inf
          {0x0001, 0x8002, 0x00020000}}},  // subnormals
        {"fp16",
         {{0x3C00, 0xE3D0, 0x447A0000},
          {0x3400, 0x3800, 0x3F000000},
          {0x3400, 0x7E00, 0x7FC00000},
          {0x0000, 0x8000, 0x00000000},
          {0x3400, 0xFC00, 0x7F800000},
          {0x0001, 0x8002, 0x34000000}}}};
    const size_t cases = 6;
    const int rounds = 3, calls = rounds * int(cases);
    const float scale = 0x1p-3f;
    std::map<std::string, std::vector<void *>> x;
    for (const auto &[dtype, list] : inputs) {
        for (size_t i = 0; i < cases; i++) {
            std::vector<uint16_t> host(size_t(m * k), list[i].fill);
            host[(37 * i % m) * size_t(k) + (101 * i % k)] = list[i].peak;  // a different tile each time
            void *d = nullptr;
            REQUIRE(cudaMalloc(&d, host.size() * 2) == cudaSuccess);
            REQUIRE(cudaMemcpy(d, host.data(), host.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
            x[dtype].push_back(d);
        }
    }
    float *dscale = nullptr, *stats = nullptr;
    uint8_t *out[2][2] = {};
    cudaStream_t streams[2] = {};
    REQUIRE(cudaMalloc(&dscale, 4) == cudaSuccess);
    REQUIRE(cudaMemcpy(dscale, &scale, 4, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMalloc(&stats, size_t(calls) * 8) == cudaSuccess);
    for (int s = 0; s < 2; s++) {
        REQUIRE(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking) == cudaSuccess);
        for (uint8_t *&o : out[s]) REQUIRE(cudaMalloc(&o, size_t(m * k)) == cudaSuccess);
    }
    int checked = 0;
    for (const schedx_variant_info &info : test::variant_infos("cast_transpose", "cuda")) {
        auto p = params_of(info);
        if (p["with_amax"] != "true" || p["schedule"] != "cuda_tiled" || !inputs.count(p["in_type"])) continue;
        CAPTURE(info.name);
        const std::vector<Input> &list = inputs.at(p["in_type"]);
        const schedx_dtype dtype = p["in_type"] == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16;
        const schedx_fp8_format format = p["fp8"] == "e5m2" ? SCHEDX_E5M2 : SCHEDX_E4M3FN;
        REQUIRE(schedx_force_variant("cast_transpose", info.name) == SCHEDX_OK);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        // 0x7F7F7F7F (3.4e38) until written: the atomic max would keep it if amax were not zeroed.
        REQUIRE(cudaMemset(stats, 0x7F, size_t(calls) * 8) == cudaSuccess);
        for (int c = 0; c < calls; c++) {
            const int s = c % 2;
            const schedx_status st = schedx_cast_transpose_fp8(
                x[p["in_type"]][size_t(c) % cases], m, k, k, dtype, dscale, format, out[s][0], k, out[s][1], m,
                stats + 2 * c, stats + 2 * c + 1, SCHEDX_DEVICE_CUDA, streams[s]);
            REQUIRE_MESSAGE(st == SCHEDX_OK, schedx_last_error());
        }
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        std::vector<uint32_t> got(size_t(calls) * 2);
        REQUIRE(cudaMemcpy(got.data(), stats, got.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
        for (int c = 0; c < calls; c++) {
            CAPTURE(c);
            CHECK(got[size_t(2 * c)] == list[size_t(c) % cases].amax);
            CHECK(got[size_t(2 * c + 1)] == 0x41000000u);  // 1 / 2^-3 = 8
        }
        checked++;
    }
    REQUIRE(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
    if (test::full_variant_list()) CHECK(checked >= 5);
    for (int s = 0; s < 2; s++) {
        for (uint8_t *o : out[s]) cudaFree(o);
        cudaStreamDestroy(streams[s]);
    }
    for (const auto &[dtype, list] : x) {
        for (void *d : list) cudaFree(d);
    }
    cudaFree(dscale);
    cudaFree(stats);
}

namespace {

// The last call's path: "word" or "element" tiles, or the schedule's name.
std::string path_of_last() {
    const std::string schedule = test::schedule_of_last("cast_transpose");
    if (schedule != "cuda_tiled") return schedule;
    auto params = test::params_of_last("cast_transpose");
    if (params["cols_io"] == "element") return "cols_element";
    return params["io"].empty() ? "word" : params["io"];
}

}  // namespace

TEST_CASE("dispatch picks word tiles for 16-byte rows, element tiles for other rows, skinny kernels for M up to 16 or K up to 63") {
    REQUIRE(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
    CastTransposeCase aligned{512, 512, 0, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 2.0f};
    CHECK(check_cast_transpose(aligned, all_patterns, run_on_cuda) == "");
    CHECK(path_of_last() == "word");
    CastTransposeCase ragged{500, 512, 0, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 2.0f};  // ld_cols = 500
    CastTransposeCase odd_ld{512, 512, 513, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 2.0f};
    CastTransposeCase odd_k{300, 301, 0, 0, 0, SCHEDX_FP16, SCHEDX_E4M3FN, 2.0f};
    for (CastTransposeCase c : {ragged, odd_ld, odd_k}) {
        CAPTURE(c.m);
        CAPTURE(c.k);
        CHECK(check_cast_transpose(c, all_patterns, run_on_cuda) == "");
        // A ragged M with 16-byte rows: the word tile storing cols by bytes, which has the hardware conversion only.
        CHECK(path_of_last() == (c.m == ragged.m && test::device_sm() >= 89 ? "cols_element" : "element"));
        c.amax = true;  // the element tiles' fused amax, ahead of any tile that needs the abs_max pass
        CHECK(check_cast_transpose(c, all_patterns, run_on_cuda) == "");
        CHECK(path_of_last() == "element");
        CHECK(test::params_of_last("cast_transpose")["with_amax"] == "true");
    }
    CastTransposeCase one_row{1, 8192, 0, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 2.0f};
    CastTransposeCase one_col{8192, 1, 0, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 2.0f};
    CastTransposeCase rows_16{16, 8192, 0, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 2.0f};
    CastTransposeCase cols_63{8192, 63, 0, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 2.0f};
    for (CastTransposeCase c : {one_row, one_col, rows_16, cols_63}) {
        CAPTURE(c.m);
        CHECK(check_cast_transpose(c, all_patterns, run_on_cuda) == "");
        CHECK(path_of_last() == "cuda_skinny");
        CHECK(test::params_of_last("cast_transpose")["long_dim"] == (c.m < c.k ? "k" : "m"));
        // Forced, an element tile refuses a call below one tile (status 11) before anything runs.
        REQUIRE(schedx_force_variant("cast_transpose", "cast_transpose_bf16_e4m3_t64r8_element_io") == SCHEDX_OK);
        CHECK(check_cast_transpose(c, all_patterns, run_on_cuda).rfind("status 11:", 0) == 0);
        REQUIRE(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
    }
}

// Ragged shapes whose rows stay 16-byte aligned run a tiled variant, as whole tiles plus the
// last tile row and column shifted inwards; the fused amax sees elements that only the
// shifted launches cover (NaN, the largest value) at the bottom-right corner.
TEST_CASE("ragged shapes in 16-byte steps run tiled, the fused amax included") {
    REQUIRE(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
    const struct {
        int64_t m, k;
    } shapes[] = {{80, 64}, {64, 80}, {144, 208}, {1008, 528}};
    for (const auto &sh : shapes) {
        for (bool nan : {false, true}) {
            CAPTURE(sh.m);
            CAPTURE(sh.k);
            CAPTURE(nan);
            const int64_t m = sh.m, k = sh.k;
            auto bits = [m, k, nan](int64_t i, int64_t j) {
                if (i == m - 1 && j == k - 1) return nan ? 0xFFC1u : 0x4780u;  // NaN or 65536
                return uint32_t(ref::float_to_bf16(float((i * 31 + j * 17) % 1000) / 8.0f - 60.0f));
            };
            CastTransposeCase c{m, k, 0, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 0.25f};
            c.amax = true;
            CHECK(check_cast_transpose(c, bits, run_on_cuda) == "");
            CHECK(test::schedule_of_last("cast_transpose") == "cuda_tiled");
            c.amax = false;
            CHECK(check_cast_transpose(c, bits, run_on_cuda) == "");
            CHECK(test::schedule_of_last("cast_transpose") == "cuda_tiled");
        }
    }
    // Rows that the word tiles cannot take run element tiles: K whose last tile starts off
    // 16 bytes, an odd leading dimension (2-byte aligned rows); M below a tile runs the
    // general variant.
    CastTransposeCase small{48, 512, 0, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 2.0f};
    CastTransposeCase odd_k{128, 200, 0, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 2.0f};
    CastTransposeCase odd_ld{128, 128, 129, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 2.0f};
    for (auto [c, path] : {std::pair{small, "cuda_general"}, std::pair{odd_k, "element"}, std::pair{odd_ld, "element"}}) {
        CAPTURE(c.m);
        CAPTURE(c.k);
        CHECK(check_cast_transpose(c, all_patterns, run_on_cuda) == "");
        CHECK(path_of_last() == path);
    }
}

// A tile 128 rows tall needs M >= 128: forced on M = 96 it refuses the call (status 11)
// before anything runs; M = 192 runs as one tile row and one shifted inwards; dispatched,
// M = 96 runs a 64-row tile.
TEST_CASE("variants with 128-row tiles take M of at least 128") {
    const char *tall = "cast_transpose_bf16_e4m3_t128x64r8w4";
    REQUIRE(schedx_force_variant("cast_transpose", tall) == SCHEDX_OK);
    CastTransposeCase c{96, 256, 0, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 2.0f};
    CHECK(check_cast_transpose(c, all_patterns, run_on_cuda).rfind("status 11:", 0) == 0);
    c.m = 192;
    CHECK(check_cast_transpose(c, all_patterns, run_on_cuda) == "");
    REQUIRE(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
    c.m = 96;
    CHECK(check_cast_transpose(c, all_patterns, run_on_cuda) == "");
    CHECK(test::schedule_of_last("cast_transpose") == "cuda_tiled");
    CHECK(std::string(schedx_last_variant("cast_transpose")) != tall);
}

// Untuned, a fused-amax call on whole tiles takes a fused variant, below and above the
// size where an earlier design was demoted (2^25 elements); both report x's maximum.
TEST_CASE("untuned fused amax: a fused variant at 4096^2 and 8192x4096") {
    REQUIRE(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
    for (const auto &[m, k] : {std::pair<int64_t, int64_t>{4096, 4096}, std::pair<int64_t, int64_t>{8192, 4096}}) {
        CAPTURE(m);
        CAPTURE(k);
        const size_t n = size_t(m * k);
        void *x = nullptr, *rows = nullptr, *cols = nullptr;
        float *scalars = nullptr;  // scale, amax, scale_inv
        REQUIRE(cudaMalloc(&x, 2 * n) == cudaSuccess);
        REQUIRE(cudaMalloc(&rows, n) == cudaSuccess);
        REQUIRE(cudaMalloc(&cols, n) == cudaSuccess);
        REQUIRE(cudaMalloc(reinterpret_cast<void **>(&scalars), 3 * sizeof(float)) == cudaSuccess);
        // Every element 0x3F3F (bf16 0.7461); amax must come back as that value's float bits.
        REQUIRE(cudaMemset(x, 0x3F, 2 * n) == cudaSuccess);
        const float host_scalars[3] = {1.0f, -1.0f, -1.0f};
        REQUIRE(cudaMemcpy(scalars, host_scalars, sizeof host_scalars, cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // test_stream may not wait for the legacy stream
        CHECK(schedx_cast_transpose_fp8(x, m, k, k, SCHEDX_BF16, scalars, SCHEDX_E4M3FN, static_cast<uint8_t *>(rows),
                                        k, static_cast<uint8_t *>(cols), m, scalars + 1, scalars + 2,
                                        SCHEDX_DEVICE_CUDA, test_stream) == SCHEDX_OK);
        REQUIRE(cudaStreamSynchronize(test_stream) == cudaSuccess);
        uint32_t out[3] = {};
        REQUIRE(cudaMemcpy(out, scalars, sizeof out, cudaMemcpyDeviceToHost) == cudaSuccess);
        CHECK(out[1] == 0x3F3F0000u);
        CHECK(out[2] == 0x3F800000u);  // 1 / scale
        const char *last = schedx_last_variant("cast_transpose");
        const std::string name = last ? last : "";
        CHECK(name.find("_amax") != std::string::npos);
        for (void *p : {x, rows, cols, static_cast<void *>(scalars)}) REQUIRE(cudaFree(p) == cudaSuccess);
    }
}

// M = 0 or K = 0: amax 0 and scale_inv 1 / scale arrive in stream order (a memset and the
// abs_max pipeline over one zeroed word), x, rows and cols are neither read nor written.
TEST_CASE("empty x: amax 0 and scale_inv 1 / scale on the stream, nothing else written") {
    float *scalars = nullptr;  // scale, amax, scale_inv
    uint8_t *out = nullptr;
    REQUIRE(cudaMalloc(reinterpret_cast<void **>(&scalars), 3 * sizeof(float)) == cudaSuccess);
    REQUIRE(cudaMalloc(reinterpret_cast<void **>(&out), 64) == cudaSuccess);
    for (schedx_dtype dtype : {SCHEDX_BF16, SCHEDX_FP16, SCHEDX_FP32}) {
        for (const auto &[m, k] : {std::pair<int64_t, int64_t>{0, 4096}, std::pair<int64_t, int64_t>{5, 0}}) {
            CAPTURE(int(dtype));
            CAPTURE(m);
            CAPTURE(k);
            const float host_scalars[3] = {4.0f, -1.0f, -1.0f};
            REQUIRE(cudaMemcpy(scalars, host_scalars, sizeof host_scalars, cudaMemcpyHostToDevice) == cudaSuccess);
            REQUIRE(cudaMemset(out, test::kPoison, 64) == cudaSuccess);
            REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
            // x and rows NULL, cols a real pointer that must stay poisoned.
            CHECK(schedx_cast_transpose_fp8(nullptr, m, k, k, dtype, scalars, SCHEDX_E4M3FN, nullptr, k, out, m,
                                            scalars + 1, scalars + 2, SCHEDX_DEVICE_CUDA, test_stream) == SCHEDX_OK);
            REQUIRE(cudaStreamSynchronize(test_stream) == cudaSuccess);
            uint32_t got[3] = {};
            uint8_t bytes[64];
            REQUIRE(cudaMemcpy(got, scalars, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess);
            REQUIRE(cudaMemcpy(bytes, out, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
            CHECK(got[1] == 0u);           // +0.0
            CHECK(got[2] == 0x3E800000u);  // 0.25
            CHECK(std::all_of(bytes, bytes + 64, [](uint8_t b) { return b == test::kPoison; }));
        }
    }
    for (void *p : {static_cast<void *>(scalars), static_cast<void *>(out)}) REQUIRE(cudaFree(p) == cudaSuccess);
}

TEST_CASE("current scaling on the device: amax, torchao's scale and the cast in stream order") {
    auto with_nan = [](int64_t i, int64_t j) { return i == 3 && j == 2 ? 0x7FC1u : random_half(i, j) & 0x3FFFu; };
    auto with_inf = [](int64_t i, int64_t j) { return i == 1 && j == 4 ? 0xFF80u : random_half(i, j) & 0x3FFFu; };
    auto zeros = [](int64_t, int64_t) { return 0u; };
    auto finite = [](int64_t i, int64_t j) { return random_half(i, j) & 0xBFFFu; };  // exponents below 2^1
    struct Shape {
        int64_t m, k;
    };
    // Word tiles, a ragged shape in 16-byte steps, element tiles, skinny, the general variant.
    for (Shape sh : {Shape{256, 256}, Shape{1040, 272}, Shape{130, 70}, Shape{1, 300}, Shape{40, 40}, Shape{0, 5}}) {
        for (schedx_fp8_format f : {SCHEDX_E4M3FN, SCHEDX_E5M2}) {
            for (bool pow2 : {false, true}) {
                int which = 0;
                for (auto *fn : {+finite, +with_nan, +with_inf, +zeros}) {
                    CAPTURE(sh.m);
                    CAPTURE(sh.k);
                    CAPTURE(f);
                    CAPTURE(pow2);
                    CAPTURE(which++);
                    CastTransposeCase c{sh.m, sh.k, 0, 0, 0, SCHEDX_BF16, f};
                    c.current_scaling = true;
                    c.pow2_scales = pow2;
                    CHECK(check_cast_transpose(c, fn, run_on_cuda) == "");
                }
            }
        }
    }
}

int main(int argc, char **argv) { return test::cuda_test_main(argc, argv); }
