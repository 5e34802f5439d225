// Every CUDA w4_linear variant, forced, against an fp64 reference (tests/w4_linear_case.h):
// integer-valued inputs that must match bit for bit, random inputs within 1e-2 |y| + 1e-5
// sum |terms|, both forms (zero points or symmetric), bias, ragged N, padded leading
// dimensions, guard bytes around every device buffer, empty M; then untuned dispatch by M.
// The dequantize + cuBLAS path is checked against the reference with each weight rounded once
// to x's dtype, as it computes. Exits 77 (ctest: skipped) without a CUDA device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <map>

#include "cuda_test_support.h"
#include "w4_linear_case.h"
#include "w4_linear_layout.h"

using test::DeviceCopy;
using test::test_stream;
using test::W4Buffers;
using test::W4Case;

namespace {

// One call on test_stream through guarded device copies.
schedx_status run_on_cuda(const W4Case &c, W4Buffers &b) {
    DeviceCopy dx(b.x), dw(b.w), ds(b.scales), dz(b.zeros), db(b.bias), dy(b.y);
    // The uploads ran on the legacy default stream, which a non-blocking stream does not wait for.
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const schedx_status st = schedx_w4_linear(dx.ptr(), c.m, c.k, c.ldx, c.x_dtype, dw.as<uint32_t>(), c.n, c.ldw,
                                              c.group, ds.ptr(), c.zeros ? dz.ptr() : nullptr, c.scales_dtype,
                                              c.bias ? db.ptr() : nullptr, dy.ptr(), c.ldy, SCHEDX_DEVICE_CUDA,
                                              test_stream);
    if (st != SCHEDX_OK) return st;
    REQUIRE(cudaStreamSynchronize(test_stream) == cudaSuccess);
    dy.back();
    for (DeviceCopy *d : {&dx, &dw, &ds, &dz, &db, &dy}) CHECK(d->guards_intact());
    return st;
}

std::string check(const W4Case &c, uint32_t seed, double *worst = nullptr) {
    return test::check_w4_linear(c, seed, run_on_cuda, worst);
}

struct Shape {
    int64_t m, n, k, group;
};

}  // namespace

TEST_CASE("every CUDA w4_linear variant, forced, against the fp64 reference") {
    // M: one row, each batch and one past it, two passes of 8 and a part; N: one row, ragged
    // (off every warp's rows), a few warps; K: one vector, one group of 128, several warps' worth
    // of lanes (4096 = 128 vectors) with each group size.
    std::vector<Shape> shapes;
    for (int64_t m : {1, 2, 3, 4, 5, 8, 9, 16, 17}) {
        for (Shape s : {Shape{0, 1, 32, 32}, Shape{0, 33, 128, 128}, Shape{0, 4097, 256, 64}, Shape{0, 96, 4096, 32},
                        Shape{0, 64, 4096, 128}}) {
            s.m = m;
            shapes.push_back(s);
        }
    }
    shapes.push_back({64, 512, 4096, 128});  // a prefill-sized call (the cuBLAS path's)
    double worst = 0;
    int checked = 0;
    uint32_t seed = 1;
    // The op filter also leaves out w4_linear_epilogue, the cuBLAS path's helper.
    for (const schedx_variant_info &info : test::variant_infos("w4_linear", "cuda")) {
        auto p = test::params_of(info);
        // The lane and tensor-core kernels read 16-byte vectors; the tensor-core ones take a group
        // of at least one chunk (w4_linear_layout.h).
        const bool mma = p["schedule"] == "cuda_mma";
        const bool lanes = p["schedule"] == "cuda_gemv" || p["schedule"] == "cuda_smallbatch" || mma;
        const int64_t min_group = mma ? schedx::w4::mma_chunk_elems(std::stoi(p["load_words"])) : 0;
        const bool dequantize = p["stage"] == "dequantize";
        CAPTURE(info.name);
        REQUIRE(schedx_force_variant("w4_linear", info.name) == SCHEDX_OK);
        for (const Shape &s : shapes) {
            for (bool zeros : {false, true}) {
                for (bool bias : {false, true}) {
                    CAPTURE(s.m);
                    CAPTURE(s.n);
                    CAPTURE(s.k);
                    CAPTURE(zeros);
                    CAPTURE(bias);
                    W4Case c{s.m, s.n, s.k, s.group};
                    c.x_dtype = p["x_type"] == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16;
                    c.scales_dtype = p["scale_type"] == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16;
                    c.zeros = zeros;
                    c.bias = bias;
                    c.weight_rounded = dequantize;
                    // The tensor cores sum x (M0 + u) in fp32: on an H100 one random case (M = 16,
                    // N = 33, K = 128) missed a bound on |x (u - z) s| alone (2.1e-4 off 5.2e-3).
                    c.sum_offset = mma ? schedx::w4::mma_weight_offset(c.x_dtype == SCHEDX_FP16) : 0.0;
                    // Padded rows: 16-byte pitches where the lane kernels need them, odd elsewhere.
                    c.ldx = s.k + (lanes ? 8 : 1);
                    c.ldw = s.k / 8 + (lanes ? 4 : 1);
                    c.ldy = s.n + 3;
                    if (s.group < min_group) {  // refused, nothing written
                        CHECK(check(c, seed++).find("status 11") == 0);
                        continue;
                    }
                    CHECK(check(c, seed++) == "");
                    CHECK(std::string(schedx_last_variant("w4_linear")) == info.name);
                    // Random values at tight leading dimensions where the reference stays cheap.
                    if (s.m * s.n * s.k <= 16 * 96 * 4096) {
                        c.integer = false;
                        c.ldx = c.ldw = c.ldy = 0;
                        CHECK(check(c, seed++, &worst) == "");
                    }
                }
            }
        }
        // Empty M writes nothing; K = 0 (y is the bias) only the general variant takes.
        W4Case empty{0, 64, 128, 128};
        CHECK(check(empty, 1) == "");
        W4Case no_k{3, 5, 0, 32, 0, 0, 0, SCHEDX_BF16, SCHEDX_BF16, false, true};
        no_k.x_dtype = p["x_type"] == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16;
        no_k.scales_dtype = p["scale_type"] == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16;
        const std::string no_k_error = check(no_k, 1);
        if (p["schedule"] == "cuda_general") {
            CHECK(no_k_error == "");
        } else {
            CHECK(no_k_error.find("status 11") == 0);
        }
        // x rows off 16 bytes: the lane kernels refuse the call, writing nothing.
        if (lanes) {
            W4Case off{2, 8, 64, 32, 66};
            off.x_dtype = no_k.x_dtype;
            off.scales_dtype = no_k.scales_dtype;
            CHECK(check(off, 1).find("status 11") == 0);
        }
        checked++;
    }
    REQUIRE(schedx_force_variant("w4_linear", nullptr) == SCHEDX_OK);
    if (test::full_variant_list()) CHECK(checked == 49);
    MESSAGE("w4_linear CUDA: largest relative error against fp64: " << worst);
}

TEST_CASE("untuned CUDA dispatch of w4_linear by M: the GEMV, small-batch, tensor cores, dequantize + cuBLAS") {
    REQUIRE(schedx_force_variant("w4_linear", nullptr) == SCHEDX_OK);
    const std::map<int64_t, std::string> first{
        {1, "gemv_r4"},  {2, "b2_r4"}, {3, "mma_b8_r16w4_splitk4"}, {7, "mma_b8_r16w4_splitk4"},
        {16, "mma_b16_r16w4_splitk4"}, {17, "mma_b32_r16w1_splitk8"}, {64, "mma_b32_r16w1_splitk8"},
        {65, "dequant_cublas"}};
    uint32_t seed = 900;
    for (const auto &[m, name] : first) {
        for (bool zeros_bias : {false, true}) {
            CAPTURE(m);
            CAPTURE(zeros_bias);
            W4Case c{m, 4097, 1024, 128};
            c.zeros = c.bias = zeros_bias;
            c.weight_rounded = m > 64;
            c.sum_offset = name.rfind("mma", 0) == 0 ? schedx::w4::mma_weight_offset(false) : 0.0;
            CHECK(check(c, seed++) == "");
            CHECK(std::string(schedx_last_variant("w4_linear")) == "w4_linear_bf16_sbf16_" + name);
        }
    }
}

int main(int argc, char **argv) { return test::cuda_test_main(argc, argv); }
