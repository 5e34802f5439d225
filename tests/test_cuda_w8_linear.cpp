// Every CUDA w8_linear variant, forced, against an fp64 reference: integer-valued inputs
// that must match bit for bit, random inputs within 1e-2, padded leading dimensions,
// poisoned outputs and guard bytes around every device buffer; then dispatch on ragged
// shapes. Exits 77 (ctest: skipped) without a CUDA device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <map>

#include "cublas_gemm.h"
#include "cuda_test_support.h"
#include "w8_linear_case.h"

using test::check_w8_linear;
using test::DeviceCopy;
using test::params_of;
using test::test_stream;
using W8Case = test::W8LinearCase;
using W8Result = test::W8LinearResult;

namespace {

// One call on test_stream through guarded device copies.
schedx_status run_on_cuda(const W8Case &c, test::W8LinearBuffers &b) {
    DeviceCopy dx(b.x), dw(b.w), ds(b.scales), db(b.bias), dy(b.y);
    // The uploads ran on the legacy default stream, which a non-blocking stream does not
    // wait for.
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const schedx_status st = schedx_w8_linear(dx.ptr(), c.m, c.k, c.ldx, c.x_dtype, dw.as<int8_t>(), c.n, c.ldw,
                                              ds.ptr(), c.scales_dtype, c.bias ? db.ptr() : nullptr, dy.ptr(), c.ldy,
                                              SCHEDX_DEVICE_CUDA, test_stream);
    if (st != SCHEDX_OK) return st;
    REQUIRE(cudaStreamSynchronize(test_stream) == cudaSuccess);
    dy.back();
    for (DeviceCopy *d : {&dx, &dw, &ds, &db, &dy}) {
        if (!d->guards_intact()) b.guard_error = "device guard bytes overwritten";
    }
    return st;
}

// One seed for the integer inputs and one for the random ones: the header makes each
// matrix and the fp64 products once per process, shared by all variants, dtypes and both
// stream passes (the reference for the large shapes dominates the run time otherwise).
W8Result check_w8(const W8Case &c) { return check_w8_linear(c, c.integer ? 0 : 1, run_on_cuda); }

struct Shape {
    int64_t m, n, k;
};

// Mirrors can_run in runtime/w8_linear.cpp (with the 16-byte alignment that padded()
// keeps for these schedules), restricted to shapes whose reference stays cheap.
bool is_cublas(std::map<std::string, std::string> &p) {
    return p["stage"] == "dequantize" || p["stage"] == "rescale" || p["stage"] == "planes";
}

std::vector<Shape> shapes_for(std::map<std::string, std::string> &p) {
    const std::string s = p["schedule"];
    const bool cublas = is_cublas(p);
    const int64_t load_words = p.count("load_words") ? std::stoll(p["load_words"]) : 4;
    const int64_t step = 128 * load_words;
    const int64_t batch = p.count("batch") ? std::stoll(p["batch"]) : 1;
    const int64_t split = p.count("split_k") ? std::stoll(p["split_k"]) : 1;
    // k_tail: K in whole vectors of W (4 * vector_words bytes), the part past the steps guarded.
    const bool tail = p["k_tail"] == "true";
    // element_io: any K (lane_k 1) and any row pitch (padded() makes them odd).
    const bool element = p["element_io"] == "true";
    const int64_t lane_k = element ? 1 : tail ? 4 * (p.count("vector_words") ? std::stoll(p["vector_words"]) : 4) : step;
    std::vector<Shape> out;
    for (int64_t m : {1, 2, 3, 5, 6, 8, 16, 17, 64, 300}) {
        for (int64_t n : {1, 64, 4096}) {
            // 4100 (W rows 4-byte aligned), 4544 (16-byte, 4.4 steps of 1024) and 48 (less
            // than a step, all tail): off every whole-step schedule, so only k_tail's.
            // 1001 and 11009 (odd: W rows 1-byte aligned) for element I/O only.
            for (int64_t k : {4096, 8192, 1000, 4100, 4544, 48, 1001, 11009}) {
                // 8192: two steps per part for splitk8 (4096 gives it one), so its loop over K runs.
                if (k == 8192 && s != "cuda_splitk") continue;
                if ((k == 1001 || k == 11009) && !element) continue;
                if ((k == 4100 || k == 4544 || k == 48) && !tail) continue;
                bool runs = true;
                if (p["stage"] == "planes") runs = k % 16 == 0;
                else if (cublas) runs = m > 1 && k % 16 == 0 && (p["stage"] != "rescale" || n % 8 == 0);
                else if (s == "cuda_gemv") runs = m == 1 && k % lane_k == 0;
                else if (s == "cuda_smallbatch") runs = (tail || m <= batch) && k % lane_k == 0;
                // cuda_mma k_tail: whole chunks of 16 load_words, or with W vectors under 16 bytes
                // whole vectors of 4 load_words (K = 4100 at load_words 1).
                else if (s == "cuda_mma") {
                    const int64_t granule = tail ? (load_words < 4 ? 4 * load_words : 16 * load_words) : 16 * load_words * split;
                    runs = m <= batch && k % granule == 0;
                }
                else if (s == "cuda_splitk") runs = m == 1 && n <= 1024 && k % (step * split) == 0;
                if (runs && m * n * k <= 16 * 4096 * 4096) out.push_back({m, n, k});
            }
        }
    }
    // A prefill-sized cuBLAS call (the reference is computed once for all eight kinds).
    if (cublas) out.push_back({300, 1000, 4096});
    // Tensor cores at issue 31's shapes: whole and partial 8-row tiles up to M = 64 (the
    // references are shared by all tensor-core variants).
    if (s == "cuda_mma") {
        for (int64_t m : {2, 5, 8, 16, 17, 32, 64}) {
            for (Shape nk : {Shape{0, 8192, 8192}, Shape{0, 14336, 4096}, Shape{0, 4096, 14336}}) {
                if (m <= batch) out.push_back({m, nk.n, nk.k});
            }
        }
    }
    return out;
}

// Padded leading dimensions: odd for the general and element-I/O schedules, which take any; 16-byte row
// pitches for x and W where the schedule needs them (cuBLAS itself takes any ldx), and
// for y where the in-place rescale moves 16-byte vectors.
W8Case padded(W8Case c, std::map<std::string, std::string> &p, bool cublas) {
    const bool any_pitch = p["schedule"] == "cuda_general" || p["element_io"] == "true";
    const bool aligned_x = !any_pitch && !cublas;
    const bool aligned_w = !any_pitch;
    c.ldx = c.k + (aligned_x ? 8 : 1);
    c.ldw = c.k + (aligned_w ? 16 : 3);
    c.ldy = c.n + (p["stage"] == "rescale" ? 8 : 3);
    return c;
}

std::string schedule_of_last() { return test::schedule_of_last("w8_linear"); }

}  // namespace

TEST_CASE("every CUDA w8_linear variant, forced, against the fp64 reference") {
    int checked = 0;
    double worst = 0;
    // The op filter also leaves out w8_linear_epilogue, the cuBLAS path's helper.
    for (const schedx_variant_info &info : test::variant_infos("w8_linear", "cuda")) {
        auto p = params_of(info);
        const bool cublas = is_cublas(p);
        const schedx_dtype xt = p["x_type"] == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16;
        // The dequantize and planes paths serve every scale dtype and bias setting through
        // their epilogues; the rescale one its scale dtype without bias.
        std::vector<std::pair<schedx_dtype, bool>> kinds;
        if (p["stage"] == "dequantize" || p["stage"] == "planes") {
            kinds = {{SCHEDX_BF16, false}, {SCHEDX_BF16, true}, {SCHEDX_FP32, false}, {SCHEDX_FP32, true}};
        } else {
            kinds = {{p["scale_type"] == "fp32" ? SCHEDX_FP32 : SCHEDX_BF16, p["with_bias"] == "true"}};
        }
        CAPTURE(info.name);
        REQUIRE(schedx_force_variant("w8_linear", info.name) == SCHEDX_OK);
        const bool autoscheduled = p.count("autoscheduler") > 0;
        int ran = 0;
        for (auto kind : kinds) {
            for (Shape s : shapes_for(p)) {
                CAPTURE(kind.first);
                CAPTURE(kind.second);
                CAPTURE(s.m);
                CAPTURE(s.n);
                CAPTURE(s.k);
                W8Case c{s.m, s.n, s.k, 0, 0, 0, xt, kind.first, kind.second, true};
                const std::string error = check_w8(padded(c, p, cublas)).error;
                // Autoscheduled variants refuse shapes their generated bounds do not accept.
                if (autoscheduled && error.find("status 11") == 0) continue;
                CHECK(error == "");
                ran++;
                const char *last = schedx_last_variant("w8_linear");
                CHECK(std::string(last ? last : "none") == info.name);
                // Random values at tight leading dimensions; N = 4096 only changes how
                // many outputs there are, which the integer case covers.
                if (s.n <= 64) {
                    c.integer = false;
                    const W8Result r = check_w8(c);
                    CHECK(r.error == "");
                    worst = std::max(worst, r.max_rel);
                }
            }
            if (p["schedule"] != "cuda_general" && p["element_io"] != "true" && !autoscheduled) {
                // K = 1002 (W rows 2-byte aligned) fits none of the fast paths: forcing one is
                // refused, not run.
                W8Case c{1, 64, 1002, 0, 0, 0, xt, kind.first, kind.second, true};
                CHECK(check_w8(c).error.find("status 11") == 0);
            }
        }
        CHECK(ran > 0);
        checked++;
    }
    REQUIRE(schedx_force_variant("w8_linear", nullptr) == SCHEDX_OK);
    if (test::full_variant_list()) CHECK(checked >= 35);
    MESSAGE("w8_linear CUDA: largest elementwise relative error against fp64: " << worst);
    CHECK(worst <= 1e-2);
}

TEST_CASE("dispatch: K off the steps runs the k_tail kernels, rows off 4-byte alignment the element-I/O ones") {
    REQUIRE(schedx_force_variant("w8_linear", nullptr) == SCHEDX_OK);
    struct Expect {
        W8Case c;
        const char *schedule;
        const char *suffix;  // of the variant's name: "_ktail", "_element_ktail" or "" (general)
    };
    const Expect cases[] = {
        // K off every step, rows of x and W 4- or 16-byte aligned: the k_tail kernels.
        {{1, 64, 4100}, "cuda_gemv", "_ktail"},
        {{1, 4097, 4544, 0, 0, 0, SCHEDX_FP16, SCHEDX_FP32, true}, "cuda_gemv", "_ktail"},
        {{3, 64, 1000, 0, 0, 0, SCHEDX_BF16, SCHEDX_BF16, true}, "cuda_smallbatch", "_ktail"},
        {{16, 4096, 1000, 0, 0, 0, SCHEDX_FP16, SCHEDX_FP32}, "cuda_smallbatch", "_ktail"},
        {{2, 64, 48}, "cuda_smallbatch", "_ktail"},
        // M past 16 with K off the cuBLAS paths' 16: the B = 16 tile once per 16 rows.
        {{17, 64, 1000}, "cuda_smallbatch", "_ktail"},
        {{100, 1024, 4100, 0, 0, 0, SCHEDX_FP16, SCHEDX_FP32, true}, "cuda_smallbatch", "_ktail"},
        {{17, 64, 1000, 0, 0, 0, SCHEDX_BF16, SCHEDX_FP32}, "cuda_smallbatch", "_ktail"},  // torchao's scales
        // Odd row pitches of x or W, K not a multiple of 4 (11009: Llama's 11008 plus one),
        // dtypes without k_tail kernels (fp16 x with bf16 scales):
        // the element-I/O kernels.
        {{1, 64, 4096, 4097}, "cuda_gemv", "_element_ktail"},
        {{3, 64, 4096, 0, 4099, 67, SCHEDX_FP16, SCHEDX_FP32, true}, "cuda_smallbatch", "_element_ktail"},
        {{1, 64, 4098}, "cuda_gemv", "_element_ktail"},
        {{1, 4096, 11009}, "cuda_gemv", "_element_ktail"},
        {{5, 256, 11009, 11011, 11013, 259}, "cuda_smallbatch", "_element_ktail"},
        {{16, 4096, 11009, 0, 0, 0, SCHEDX_FP16, SCHEDX_FP32}, "cuda_smallbatch", "_element_ktail"},
        {{300, 64, 1000, 1003, 1001, 65, SCHEDX_FP16, SCHEDX_BF16, true}, "cuda_smallbatch", "_element_ktail"},
        {{1, 64, 4096, 4097, 0, 0, SCHEDX_BF16, SCHEDX_FP32, true}, "cuda_gemv", "_element_ktail"},
    };
    for (const Expect &e : cases) {
        const W8Case &c = e.c;
        CAPTURE(c.m);
        CAPTURE(c.n);
        CAPTURE(c.k);
        CAPTURE(c.ldx);
        CAPTURE(c.ldw);
        CHECK(check_w8(c).error == "");
        CHECK(schedule_of_last() == e.schedule);
        const char *last = schedx_last_variant("w8_linear");
        const std::string name = last ? last : "";
        CAPTURE(name);
        const std::string suffix = e.suffix;
        if (suffix.empty()) {
            CHECK(name.find("_ktail") == std::string::npos);
        } else {
            CHECK(name.size() >= suffix.size());
            CHECK(name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0);
        }
    }
}

TEST_CASE("untuned dispatch: split-K tensor cores for M = 3..16 from 2^24 weights (bf16 x to M = 64), int8 planes to M = 128 past 2^27 multiply-adds, then cuBLAS; split-K for long rows") {
    REQUIRE(schedx_force_variant("w8_linear", nullptr) == SCHEDX_OK);
    auto last_name = [] {
        const char *last = schedx_last_variant("w8_linear");
        return std::string(last ? last : "none");
    };
    // x's rows 2 bytes off 16: no fused kernel runs it, the planes kernel reads x by
    // element; 16 x 4096 x 4096 multiply-adds are past the planes path's 2^27.
    W8Case big{16, 4096, 4096, 4097};
    CHECK(check_w8(big).error == "");
    CHECK(last_name().find("_planes_") != std::string::npos);
    // Past M = 128 the dequantize path: bf16 tensor cores on a third of the planes' work.
    W8Case prefill{300, 1008, 4096};
    CHECK(check_w8(prefill).error == "");
    CHECK(last_name().find("dequant_cublas") != std::string::npos);
    // M = 3..16 from 2^24 weights: the split-K tensor-core kernels (bf16 x with or without
    // bias, fp16 x without: the forms that exist); below 2^24 weights the lane tiles (M = 5
    // and 6: B = 6).
    for (int64_t m : {5, 6, 7, 16}) {
        for (W8Case c : {W8Case{m, 4096, 4096}, W8Case{m, 8192, 4096, 0, 0, 0, SCHEDX_FP16, SCHEDX_FP32},
                         W8Case{m, 4096, 8192, 0, 0, 0, SCHEDX_BF16, SCHEDX_BF16, true}}) {
            CHECK(check_w8(c).error == "");
            CHECK(schedule_of_last() == "cuda_mma");
        }
    }
    for (int64_t m : {5, 6}) {
        W8Case below{m, 2048, 4096};
        CHECK(check_w8(below).error == "");
        CHECK(last_name().find("_b6_") != std::string::npos);
    }
    // M = 17 .. 64, bf16 x without bias: the b32 and b64 split-K tensor-core kernels.
    for (int64_t m : {17, 32, 33, 64}) {
        W8Case c{m, 4096, 8192};
        CHECK(check_w8(c).error == "");
        CHECK(schedule_of_last() == "cuda_mma");
    }
    // M = 17 .. 128 past 2^27 multiply-adds otherwise: the int8 planes path, with every dtype
    // pair and bias (cublasGemmEx's pick).
    for (W8Case c : {W8Case{65, 4096, 8192}, W8Case{17, 4096, 8192, 0, 0, 0, SCHEDX_BF16, SCHEDX_BF16, true},
                     W8Case{17, 8192, 4096, 0, 0, 0, SCHEDX_FP16, SCHEDX_FP32, true}}) {
        CHECK(check_w8(c).error == "");
        CHECK(last_name().find("_planes_cublas_i8") != std::string::npos);
    }
    // x's rows 2-byte aligned, K off 16: the element-I/O tile.
    W8Case small{16, 64, 1008, 1009};
    CHECK(check_w8(small).error == "");
    CHECK(last_name().find("_element_ktail") != std::string::npos);
    // M = 1: split-K for few, long rows (N <= 2048, K >= 4N), with every dtype pair and
    // bias (splitk4 divides K = 14336), the GEMV otherwise.
    const W8Case long_rows[] = {{1, 1024, 14336},
                                {1, 1024, 14336, 0, 0, 0, SCHEDX_BF16, SCHEDX_BF16, true},
                                {1, 1024, 14336, 0, 0, 0, SCHEDX_FP16, SCHEDX_FP32},
                                {1, 1024, 14336, 0, 0, 0, SCHEDX_FP16, SCHEDX_FP32, true}};
    for (const W8Case &c : long_rows) {
        CHECK(check_w8(c).error == "");
        CHECK(schedule_of_last() == "cuda_splitk");
    }
    W8Case square{1, 4096, 4096};
    CHECK(check_w8(square).error == "");
    CHECK(schedule_of_last() == "cuda_gemv");
}

// The planes path's rows are independent: a row holding inf gives NaN in all its outputs
// (its digits are not defined), an element 32 binades below its row's largest is dropped
// while the rest of that row stays exact, and the other rows are exact. x and W
// integer-valued, scales a power of two.
TEST_CASE("int8 planes path: a row with inf gives NaN, other rows exact") {
    const int64_t m = 8, n = 64, k = 512;
    std::vector<uint16_t> x(size_t(m * k));
    std::vector<int8_t> w(size_t(n * k));
    for (int64_t i = 0; i < m * k; i++) x[size_t(i)] = ref::float_to_bf16(float(int(i * 7 % 9) - 4));
    for (int64_t i = 0; i < n * k; i++) w[size_t(i)] = int8_t(i * 13 % 255 - 127);
    x[size_t(3 * k + 5)] = 0x7F80;                     // row 3: +inf
    x[size_t(5 * k + 9)] = ref::float_to_bf16(0x1p-30f);  // row 5: 2^-30 next to integers
    std::vector<uint16_t> scales(size_t(n), ref::float_to_bf16(0.5f)), y(size_t(m * n), 0xFFFF);
    void *dx, *dw, *ds, *dy;
    REQUIRE(cudaMalloc(&dx, x.size() * 2) == cudaSuccess);
    REQUIRE(cudaMalloc(&dw, w.size()) == cudaSuccess);
    REQUIRE(cudaMalloc(&ds, scales.size() * 2) == cudaSuccess);
    REQUIRE(cudaMalloc(&dy, y.size() * 2) == cudaSuccess);
    REQUIRE(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(dw, w.data(), w.size(), cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(ds, scales.data(), scales.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(dy, y.data(), y.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);  // poison
    REQUIRE(schedx_force_variant("w8_linear", "w8_linear_bf16_planes_cublas_i8") == SCHEDX_OK);
    const schedx_status st = schedx_w8_linear(dx, m, k, k, SCHEDX_BF16, static_cast<int8_t *>(dw), n, k, ds,
                                              SCHEDX_BF16, nullptr, dy, n, SCHEDX_DEVICE_CUDA, nullptr);
    REQUIRE(schedx_force_variant("w8_linear", nullptr) == SCHEDX_OK);
    REQUIRE_MESSAGE(st == SCHEDX_OK, schedx_last_error());
    REQUIRE(cudaMemcpy(y.data(), dy, y.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            CAPTURE(i);
            CAPTURE(j);
            const uint16_t got = y[size_t(i * n + j)];
            if (i == 3) {
                CHECK(got == 0x7FC0);
                continue;
            }
            // Row 5's 2^-30 is below its planes' quantum (2^-19 for a largest |x| of 4):
            // dropped, as documented, so the rest of the row is the exact integer sum.
            double dot = 0;
            for (int64_t kk = 0; kk < k; kk++) {
                if (i == 5 && kk == 9) continue;
                dot += ref::bf16_to_float(x[size_t(i * k + kk)]) * w[size_t(j * k + kk)];
            }
            CHECK(got == ref::float_to_bf16(float(dot) * 0.5f));
        }
    }
    for (void *p : {dx, dw, ds, dy}) cudaFree(p);
}

// The forced-variant test checks the results of the ranked rescale variants; this one
// checks that their GEMMs ran through cuBLASLt, not the cublasGemmEx fallback, for the
// first ranks the H200's heuristic offers at a prefill shape (exact on integer inputs),
// and that the unranked variant runs cublasGemmEx.
TEST_CASE("rescale variants with a cuBLASLt heuristic rank run that rank's algorithm") {
    for (int rank = -1; rank < 3; rank++) {
        const std::string name = rank < 0 ? "w8_linear_bf16_sbf16_dequant_cublas_rescale"
                                          : "w8_linear_bf16_sbf16_dequant_cublaslt_h" + std::to_string(rank) + "_rescale";
        CAPTURE(name);
        REQUIRE(schedx_force_variant("w8_linear", name.c_str()) == SCHEDX_OK);
        W8Case c{256, 2048, 1024, 1024, 1024, 2048, SCHEDX_BF16, SCHEDX_BF16, false, true};
        CHECK(check_w8(c).error == "");
        CHECK(std::string(schedx_last_variant("w8_linear")) == name);
        CHECK(schedx::last_gemm_was_cublaslt() == (rank >= 0));
    }
    REQUIRE(schedx_force_variant("w8_linear", nullptr) == SCHEDX_OK);
}

// K = 0: every sum is empty, y = 0 * scales (+ bias) rounded to x's dtype, by the epilogue
// over a zeroed row of the workspace; M = 0 and N = 0 write nothing. Bias values exact in
// both half formats; a scale of inf gives NaN.
TEST_CASE("empty operands: K = 0 gives y = 0 * scales + bias, M = 0 and N = 0 write nothing") {
    const int64_t m = 3, n = 5, ldy = 7;
    const float scales[n] = {2.0f, -1.0f, 0.5f, 3.0f, INFINITY};
    const float bias[n] = {1.5f, -2.25f, 0.375f, 0.0f, 1.0f};
    const uint16_t want_bf16[n] = {0x3FC0, 0xC010, 0x3EC0, 0x0000, 0x7FC0};
    const uint16_t want_fp16[n] = {0x3E00, 0xC080, 0x3600, 0x0000, 0x7E00};
    // operands: x (3 x 64 bf16) or W (5 x 64 int8) where M = 0 or N = 0 leaves the other
    // one non-empty, so its pointer must be real.
    void *dscales = nullptr, *dbias = nullptr, *dy = nullptr, *operands = nullptr;
    REQUIRE(cudaMalloc(&operands, 3 * 64 * 2) == cudaSuccess);
    REQUIRE(cudaMalloc(&dscales, sizeof scales) == cudaSuccess);
    REQUIRE(cudaMalloc(&dbias, sizeof bias) == cudaSuccess);
    REQUIRE(cudaMalloc(&dy, m * ldy * 2) == cudaSuccess);
    REQUIRE(cudaMemcpy(dscales, scales, sizeof scales, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(dbias, bias, sizeof bias, cudaMemcpyHostToDevice) == cudaSuccess);
    for (schedx_dtype x_dtype : {SCHEDX_BF16, SCHEDX_FP16}) {
        CAPTURE(int(x_dtype));
        REQUIRE(cudaMemset(dy, test::kPoison, m * ldy * 2) == cudaSuccess);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        // M = 0 and N = 0 first: nothing may land in y.
        CHECK(schedx_w8_linear(nullptr, 0, 64, 64, x_dtype, static_cast<const int8_t *>(operands), n, 64, dscales,
                               SCHEDX_FP32, dbias, dy, ldy, SCHEDX_DEVICE_CUDA, test_stream) == SCHEDX_OK);
        CHECK(schedx_w8_linear(operands, m, 64, 64, x_dtype, nullptr, 0, 64, nullptr, SCHEDX_FP32, nullptr, dy, ldy,
                               SCHEDX_DEVICE_CUDA, test_stream) == SCHEDX_OK);
        REQUIRE(schedx_w8_linear(nullptr, m, 0, 0, x_dtype, nullptr, n, 0, dscales, SCHEDX_FP32, dbias, dy, ldy,
                                 SCHEDX_DEVICE_CUDA, test_stream) == SCHEDX_OK);
        REQUIRE(cudaStreamSynchronize(test_stream) == cudaSuccess);
        std::vector<uint16_t> y(size_t(m * ldy));
        REQUIRE(cudaMemcpy(y.data(), dy, m * ldy * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
        for (int64_t r = 0; r < m; r++) {
            for (int64_t c = 0; c < ldy; c++) {
                CAPTURE(r);
                CAPTURE(c);
                const uint16_t got = y[size_t(r * ldy + c)];
                if (c >= n) {
                    CHECK(got == 0xA5A5);
                } else if (c == n - 1) {
                    CHECK((x_dtype == SCHEDX_FP16 ? (got & 0x7C00) == 0x7C00 && (got & 0x3FF)
                                                  : (got & 0x7F80) == 0x7F80 && (got & 0x7F)));
                } else {
                    CHECK(got == (x_dtype == SCHEDX_FP16 ? want_fp16[c] : want_bf16[c]));
                }
            }
        }
    }
    for (void *p : {dscales, dbias, dy, operands}) REQUIRE(cudaFree(p) == cudaSuccess);
}

int main(int argc, char **argv) { return test::cuda_test_main(argc, argv); }
